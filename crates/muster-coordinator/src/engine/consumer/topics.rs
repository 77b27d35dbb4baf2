//! Topic changes in a consumer-protocol group (protocol-v1 §7 "Epochs"): a change of a
//! subscribed topic's partition count, or a new topic that a member's regex matches, raises the
//! group epoch and the target follows; members reconcile on their next heartbeats.

use super::target::compile_regex;
use crate::engine::{Ctx, Effects, Group};

impl<R> Group<R> {
    /// `topics` were created or grew: whether the consumer part took it (it bumps its epoch
    /// when a member subscribes to one of them, by name or regex).
    pub(in crate::engine) fn consumer_topics_changed(
        &mut self,
        cx: Ctx<'_>,
        topics: &[String],
        out: &mut Effects<R>,
    ) -> bool {
        let Some(part) = self.consumer.as_deref() else {
            return false;
        };
        let affected = part.members.values().any(|m| {
            topics.iter().any(|t| m.subscribed_topics.contains(t))
                || m.regex
                    .as_deref()
                    .and_then(|r| compile_regex(r).ok())
                    .is_some_and(|re| topics.iter().any(|t| re.is_match(t)))
        });
        if affected {
            let detail = Some(topics.join(","));
            let cause = self.consumer_cause(super::journal::kind::TOPIC_CHANGE, None, detail);
            self.bump_group_epoch(cx, cause, out);
            self.refresh_consumer_state(cx.now);
        }
        true
    }
}
