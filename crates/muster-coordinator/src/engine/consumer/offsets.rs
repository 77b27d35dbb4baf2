//! Offset commits of consumer-protocol members (protocol-v1 §7 "Fencing"; Kafka 4's
//! `ConsumerGroup.validateOffsetCommit`): a commit carries the member's epoch as its
//! generation; an older epoch is STALE_MEMBER_EPOCH, a newer one FENCED_MEMBER_EPOCH. A commit
//! from outside the group (generation -1, no member id) is only for a group with no members.

use std::sync::Arc;

use muster_protocol::ErrorCode;

use crate::engine::{Group, Millis};

impl<R> Group<R> {
    /// The member's id (shared with the group's map) if its commit (or OwnershipEpochs) may
    /// go on.
    pub(in crate::engine) fn check_consumer_commit(
        &mut self,
        now: Millis,
        member_id: &str,
        generation_id: i32,
        instance: Option<&str>,
    ) -> Result<Arc<str>, ErrorCode> {
        let Some(part) = self.consumer.as_deref_mut() else {
            return Err(ErrorCode::UnknownServerError);
        };
        let id = part
            .members
            .get_key_value(member_id)
            .map(|(id, _)| Arc::clone(id))
            .ok_or(ErrorCode::UnknownMemberId)?;
        let member = part
            .members
            .get_mut(member_id)
            .ok_or(ErrorCode::UnknownMemberId)?;
        if instance.is_some() && member.instance_id.as_deref() != instance {
            return Err(ErrorCode::FencedInstanceId);
        }
        // Heard from, whatever the epoch (protocol §6.10's rule, kept for both protocols).
        member.last_heard = now;
        let epoch = member.assignment.epoch;
        if member.classic.is_some() {
            // A classic member's generation is its epoch (Kafka's `useClassicProtocol` rule).
            return if generation_id == epoch {
                Ok(id)
            } else {
                Err(ErrorCode::IllegalGeneration)
            };
        }
        if member.left || generation_id > epoch {
            return Err(ErrorCode::FencedMemberEpoch);
        }
        if generation_id < epoch {
            return Err(ErrorCode::StaleMemberEpoch);
        }
        Ok(id)
    }
}
