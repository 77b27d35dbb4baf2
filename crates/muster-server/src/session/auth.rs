//! A connection's identity: the Hello that authenticates it (token or client certificate, with
//! repeated failures from one address slowed down), the group permission every group request
//! needs before it goes anywhere (protocol §5 "Authorization": checked before any other
//! validation), and its principal's request-rate quota, which delays reading the connection
//! instead of failing requests (Kafka's channel muting). A SIGHUP reload reaches a session at
//! its next request: its principal's grants and rate are looked up again then.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use metrics::{counter, histogram};
use muster_coordinator::access::{Operation, ResourceType};
use muster_coordinator::actors::Ticket;
use muster_coordinator::logsafe;
use muster_protocol::error_answers::error_for;
use muster_protocol::{
    ErrorCode, HelloRequest, HelloResponse, Request, Response, MAX_PROTOCOL_VERSION,
    MIN_PROTOCOL_VERSION,
};
use tracing::{debug, info, warn};

use super::writer::ToWriter;
use super::Session;
use crate::auth::{RequestRate, SessionAuth};

impl Session {
    pub(super) fn hello(&mut self, hello: HelloRequest, ticket: Ticket, ctx: &mut Context<Self>) {
        if !(MIN_PROTOCOL_VERSION..=MAX_PROTOCOL_VERSION).contains(&hello.protocol_version) {
            // The connection stays open for a second Hello with a version we speak.
            return self.answer(ticket, self.hello_answer(ErrorCode::UnsupportedVersion));
        }
        if hello.client_id.len() > self.settings.max_client_id_bytes {
            // Kept on every member and in log lines: refused, the connection stays open.
            return self.answer(ticket, self.hello_answer(ErrorCode::RequestLimitExceeded));
        }
        let Some(delay) = self
            .settings
            .auth
            .hello_delay(self.peer.ip(), Instant::now())
        else {
            // This address failed so often lately that its turn is far away: refused unchecked
            // (a guess is not even looked at), and the connection closed.
            counter!("muster_auth_failures_total", "reason" => "throttled").increment(1);
            warn!(parent: &self.span, "authentication refused: too many recent failures from this address");
            let response = self.hello_answer(ErrorCode::AuthenticationFailed);
            return self.close_with(ToWriter::One(ticket.answer(response)), ctx);
        };
        if delay.is_zero() {
            return self.check_hello(hello, ticket, ctx);
        }
        // This address failed lately: its Hello waits its turn, and nothing more is read from
        // the connection meanwhile.
        debug!(parent: &self.span, delay_ms = delay.as_millis() as u64, "hello delayed after failures");
        ctx.wait(
            actix::clock::sleep(delay)
                .into_actor(self)
                .map(move |(), act, ctx| act.check_hello(hello, ticket, ctx)),
        );
    }

    fn check_hello(&mut self, hello: HelloRequest, ticket: Ticket, ctx: &mut Context<Self>) {
        if self.closing {
            return;
        }
        let auth = &self.settings.auth;
        // Before the rules authenticate() reads: see SessionAuth::new.
        let epoch = auth.epoch();
        let identity = match auth.authenticate(
            hello.auth_token.as_deref(),
            self.certificate_name.as_deref(),
        ) {
            Ok(identity) => identity,
            Err(e) => {
                auth.hello_failed(self.peer.ip(), Instant::now());
                warn!(parent: &self.span, reason = %e, "authentication failed");
                let response = self.hello_answer(ErrorCode::AuthenticationFailed);
                return self.close_with(ToWriter::One(ticket.answer(response)), ctx);
            }
        };
        if let Some(cap) = &identity.connections {
            let held = self.principal_slot.take().filter(|slot| slot.is_for(cap));
            match held.or_else(|| cap.try_open()) {
                Some(slot) => self.principal_slot = Some(slot),
                None => {
                    counter!("muster_connections_rejected_total", "reason" => "principal_max_connections")
                        .increment(1);
                    warn!(
                        parent: &self.span,
                        principal = %identity.access.name(),
                        max_connections = cap.max().unwrap_or(u32::MAX),
                        "connection refused: the principal is at its max_connections"
                    );
                    let response = self.hello_answer(ErrorCode::TooManyConnections);
                    return self.close_with(ToWriter::One(ticket.answer(response)), ctx);
                }
            }
        }
        self.greeted = true;
        self.span.record(
            "client_id",
            tracing::field::display(logsafe(&hello.client_id)),
        );
        if !identity.access.is_open() {
            self.span
                .record("principal", tracing::field::display(identity.access.name()));
        }
        self.client.client_id = std::sync::Arc::from(hello.client_id.as_str());
        self.client.access = identity.access.clone();
        self.auth = SessionAuth::new(identity, epoch);
        debug!(parent: &self.span, "hello");
        self.answer(ticket, self.hello_answer(ErrorCode::None));
    }

    fn hello_answer(&self, error: ErrorCode) -> Response {
        Response::Hello(HelloResponse {
            error_code: error.code(),
            min_version: MIN_PROTOCOL_VERSION,
            max_version: MAX_PROTOCOL_VERSION,
            server_id: self.settings.server_id.clone(),
        })
    }

    /// Takes a reload of the auth file into account (one atomic load when nothing changed).
    pub(super) fn refresh_identity(&mut self) {
        if self.auth.refresh(&self.settings.auth) {
            self.client.access = self.auth.access().clone();
            info!(parent: &self.span, "auth rules reloaded for this connection");
        }
    }

    /// Whether the connection may send this group request (`read` on its group); if not, it
    /// is answered GROUP_AUTHORIZATION_FAILED here and `false` returned.
    pub(super) fn may_touch_group(&self, request: &Request, ticket: &Ticket) -> bool {
        let access = &self.client.access;
        if access.is_open() {
            return true;
        }
        let group_id = request.group_id().unwrap_or_default();
        if access.allows(ResourceType::Group, group_id, Operation::Read) {
            return true;
        }
        denied(ResourceType::Group);
        debug!(parent: &self.span, group_id = %logsafe(group_id), request = request.name(), "group access denied");
        self.answer(
            *ticket,
            error_for(request, ErrorCode::GroupAuthorizationFailed),
        );
        false
    }

    /// The principal's request rate (`max_requests_per_s`, shared by all its connections),
    /// if it has one and it is used up: the caller must wait for it before handling one more
    /// request.
    pub(super) fn over_rate(&self) -> Option<Arc<RequestRate>> {
        let rate = self.auth.identity.rate.as_ref()?;
        (!rate.try_admit()).then(|| Arc::clone(rate))
    }

    /// Records how long the connection was not read for its principal's rate.
    pub(super) fn throttled(&self, waited: Duration) {
        // `_sum` is the time this principal's connections were not read; `_count` how often.
        histogram!("muster_throttle_seconds", "principal" => self.client.access.name().to_owned())
            .record(waited.as_secs_f64());
    }
}

/// Counts an authorization denial by resource type.
pub(crate) fn denied(resource: ResourceType) {
    counter!("muster_authorization_denials_total", "resource" => resource.name()).increment(1);
}
