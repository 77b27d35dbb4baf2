//! Offset commits of consumer-protocol members (protocol-v1 §7 "Fencing"; Kafka 4's
//! `ConsumerGroup.validateOffsetCommit`): a commit carries the member's epoch as its
//! generation; an older epoch is STALE_MEMBER_EPOCH, a newer one FENCED_MEMBER_EPOCH. A commit
//! from outside the group (generation -1, no member id) is only for a group with no members.

use muster_protocol::{ErrorCode, OffsetCommitRequest};

use crate::engine::{Group, Millis};

impl<R> Group<R> {
    pub(in crate::engine) fn check_consumer_commit(
        &mut self,
        now: Millis,
        req: &OffsetCommitRequest,
    ) -> Result<(), ErrorCode> {
        let Some(part) = self.consumer.as_deref_mut() else {
            return Err(ErrorCode::UnknownServerError);
        };
        let member = part
            .members
            .get_mut(req.member_id.as_str())
            .ok_or(ErrorCode::UnknownMemberId)?;
        if req.group_instance_id.is_some() && member.instance_id != req.group_instance_id {
            return Err(ErrorCode::FencedInstanceId);
        }
        // Heard from, whatever the epoch (protocol §6.10's rule, kept for both protocols).
        member.last_heard = now;
        let epoch = member.assignment.epoch;
        if member.classic.is_some() {
            // A classic member's generation is its epoch (Kafka's `useClassicProtocol` rule).
            return if req.generation_id == epoch {
                Ok(())
            } else {
                Err(ErrorCode::IllegalGeneration)
            };
        }
        if member.left || req.generation_id > epoch {
            return Err(ErrorCode::FencedMemberEpoch);
        }
        if req.generation_id < epoch {
            return Err(ErrorCode::StaleMemberEpoch);
        }
        Ok(())
    }
}
