//! The admin requests about one group's rebalances (protocol §6.20): GroupHistory and
//! GroupDiagnosis. The supervisor hands each here with the group's answer on its way (or why
//! there is none): from the group actor, or at once from the parked group, which ask the
//! engine (`engine/journal.rs`, `engine/diagnosis.rs`).
//!
//! Checks in order: `describe` on the group (GROUP_AUTHORIZATION_FAILED, before anything about
//! the group shows), then the id and whether this node coordinates it (INVALID_GROUP_ID,
//! NOT_COORDINATOR: the supervisor's `refusal`), then whether it exists (GROUP_ID_NOT_FOUND).

use muster_protocol::{ErrorCode, GroupDiagnosisResponse, GroupHistoryResponse, Request, Response};

use super::admin_access;
use super::group::Reader;
use super::messages::{Diagnose, History};
use super::registry::{Asked, Entry};
use crate::access::Access;
use crate::engine::Millis;

/// Where a group-scoped admin request goes: the group's answer on its way, or the error that
/// answers it.
pub(super) type Target = Result<Asked<Response>, ErrorCode>;

/// Asks the group at `home` `request` (a GroupHistory or GroupDiagnosis).
pub(super) fn ask(
    request: &Request,
    entry: &Entry,
    reader: &Reader<'_>,
    now: Millis,
) -> Asked<Response> {
    use futures_util::FutureExt;
    match request {
        Request::GroupHistory(r) => {
            let limit = r.limit;
            let asked = entry.ask(reader, History { limit }, |g| GroupHistoryResponse {
                error_code: ErrorCode::None.code(),
                rebalances: g.history(limit),
            });
            Box::pin(asked.map(|a| a.map(Response::GroupHistory)))
        }
        _ => {
            let asked = entry.ask(reader, Diagnose, |g| g.diagnose(now));
            Box::pin(asked.map(|a| a.map(Response::GroupDiagnosis)))
        }
    }
}

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

/// Answers a GroupHistory or GroupDiagnosis: the group's answer, or the error.
pub(super) async fn answer(request: Request, target: Target) -> Response {
    let asked = match target {
        Ok(asked) => asked,
        Err(code) => return failed(&request, code),
    };
    let answered = asked.await;
    // The actor stopped meanwhile (deleted, or removed by retention): the group is gone.
    answered.unwrap_or_else(|_| failed(&request, ErrorCode::GroupIdNotFound))
}
