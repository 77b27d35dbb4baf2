//! What time does to a consumer-protocol group (protocol-v1 §7 "Fencing"): a member not heard
//! from for the session timeout is removed, and so is one that keeps partitions it was asked to
//! give up past its rebalance timeout (Kafka 4's session and rebalance timers).

use std::sync::Arc;

use crate::engine::{Ctx, Effects, Event, Group, Millis};

impl<R> Group<R> {
    /// The earliest time a consumer member's timer is due.
    pub(in crate::engine) fn consumer_deadline(&self) -> Option<Millis> {
        let session = self.config.consumer.session_timeout_ms;
        let members = self
            .consumer
            .as_deref()?
            .members
            .values()
            .map(|m| m.deadline(session))
            .min();
        members.into_iter().chain(self.waiters_deadline()).min()
    }

    /// Reports the consumer members' earliest deadline to the shell (after a change that may
    /// have brought one forward: a member joined or took over an instance, a revocation
    /// started).
    pub(in crate::engine) fn note_consumer_deadline(&mut self) {
        if let Some(at) = self.consumer_deadline() {
            self.note_deadline(at);
        }
    }

    /// Removes every member whose session or rebalance timeout passed at `cx.now`.
    pub(in crate::engine) fn expire_consumer_members(&mut self, cx: Ctx<'_>, out: &mut Effects<R>) {
        let session = self.config.consumer.session_timeout_ms;
        let Some(part) = self.consumer.as_deref() else {
            return;
        };
        let mut due: Vec<(Arc<str>, Millis, bool)> = part
            .members
            .values()
            .filter(|m| m.deadline(session) <= cx.now)
            .map(|m| {
                let session_over =
                    m.last_heard + Millis::from(m.session_timeout(session)) <= cx.now;
                (
                    Arc::clone(&m.member_id),
                    cx.now.saturating_sub(m.last_heard),
                    session_over,
                )
            })
            .collect();
        due.sort_unstable();
        for (member_id, age, session_over) in due {
            let trigger = if session_over {
                out.events.push(Event::MemberExpired {
                    member_id: member_id.to_string(),
                    last_heard_ms_ago: age,
                });
                super::journal::kind::SESSION_EXPIRED
            } else {
                out.events.push(Event::RevocationTimedOut {
                    member_id: member_id.to_string(),
                });
                super::journal::kind::REVOCATION_TIMEOUT
            };
            self.remove_consumer_member(cx, &member_id, trigger, out);
        }
        self.resume_assignment(cx, out);
        self.answer_waiters(cx, out);
        self.refresh_consumer_state(cx.now);
    }
}
