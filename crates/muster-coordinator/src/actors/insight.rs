//! The admin requests about one group's rebalances (protocol §6.20): GroupHistory and
//! GroupDiagnosis. The supervisor hands each here with the group's actor (or why it has none);
//! the answer comes from the group actor, which asks its engine (`engine/journal.rs`,
//! `engine/diagnosis.rs`).
//!
//! Checks in order: `describe` on the group (GROUP_AUTHORIZATION_FAILED, before anything about
//! the group shows), then the id and whether this node coordinates it (INVALID_GROUP_ID,
//! NOT_COORDINATOR: the supervisor's `refusal`), then whether it exists (GROUP_ID_NOT_FOUND).

use std::sync::Arc;

use actix::prelude::*;
use muster_protocol::{ErrorCode, GroupDiagnosisResponse, GroupHistoryResponse, Request, Response};

use super::admin_access;
use super::group::GroupActor;
use super::messages::{Diagnose, History};
use crate::access::Access;

/// Where a group-scoped admin request goes: the group's actor, or the error that answers it.
pub(super) type Target = Result<Arc<Addr<GroupActor>>, ErrorCode>;

/// Where `request` (a GroupHistory or GroupDiagnosis) goes: GROUP_AUTHORIZATION_FAILED
/// (counted as a denial) unless `access` may describe the group, else what `lookup` (the
/// supervisor's registry and `refusal`) says.
pub(super) fn target(
    request: &Request,
    access: &Access,
    lookup: impl FnOnce(&str) -> Target,
) -> Target {
    let group_id = match request {
        Request::GroupHistory(r) => &r.group_id,
        Request::GroupDiagnosis(r) => &r.group_id,
        _ => return Err(ErrorCode::InvalidRequest),
    };
    if admin_access::describe_group_denied(access, group_id) {
        return Err(ErrorCode::GroupAuthorizationFailed);
    }
    lookup(group_id)
}

fn failed(request: &Request, code: ErrorCode) -> Response {
    match request {
        Request::GroupDiagnosis(_) => Response::GroupDiagnosis(GroupDiagnosisResponse {
            error_code: code.code(),
            ..GroupDiagnosisResponse::default()
        }),
        _ => Response::GroupHistory(GroupHistoryResponse {
            error_code: code.code(),
            rebalances: Vec::new(),
        }),
    }
}

/// Answers a GroupHistory or GroupDiagnosis through the group's actor.
pub(super) async fn answer(request: Request, target: Target) -> Response {
    let addr = match target {
        Ok(addr) => addr,
        Err(code) => return failed(&request, code),
    };
    let answered = match &request {
        Request::GroupHistory(r) => addr
            .send(History { limit: r.limit })
            .await
            .map(Response::GroupHistory),
        _ => addr.send(Diagnose).await.map(Response::GroupDiagnosis),
    };
    // The actor stopped meanwhile (deleted, or removed by retention): the group is gone.
    answered.unwrap_or_else(|_| failed(&request, ErrorCode::GroupIdNotFound))
}
