//! The engine fuzz target's offset requests (protocol §6.13, §6.23–§6.25): OffsetReset,
//! OffsetRestore, OwnershipEpochs and OffsetHistory, each sent and checked against what
//! OffsetFetch shows before and after.

use std::collections::{BTreeMap, HashMap};

use muster_coordinator::engine::{ClientInfo, Effects, Group};
use muster_protocol::{
    ErrorCode, OffsetFetchRequest, OffsetHistoryRequest, OffsetResetRequest, OffsetRestoreRequest,
    OwnershipEpochsRequest, ResetTo, Response,
};

use super::{Model, GROUP};

impl Model {
    /// Sends one offset request answered by `call` and returns its answer: answered exactly
    /// once, every write durable at once.
    fn offsets_request(
        &mut self,
        call: impl FnOnce(&mut Group<u32>, u64, &ClientInfo, u32) -> Effects<u32>,
    ) -> Response {
        let token = self.token();
        let effects = call(&mut self.group, self.now, &self.client, token);
        let answered = self.carry_out(effects);
        match answered.into_iter().find(|(t, _)| *t == token) {
            Some((_, response)) => response,
            None => panic!("an offset request is answered once its write is durable"),
        }
    }

    /// What OffsetFetch shows: (topic, partition) → (offset, metadata).
    fn fetched(&self) -> BTreeMap<(String, i32), (i64, Option<String>)> {
        let request = OffsetFetchRequest {
            group_id: GROUP.to_owned(),
            topics: None,
        };
        let answer = self.group.fetch_offsets(&request, &self.client.access);
        answer
            .topics
            .into_iter()
            .flat_map(|t| {
                t.partitions
                    .into_iter()
                    .map(move |p| ((t.topic.clone(), p.partition), (p.offset, p.metadata)))
            })
            .collect()
    }

    pub(super) fn reset(&mut self, to: u8, value: i16, execute: bool) {
        let value64 = i64::from(value);
        let to = match to % 4 {
            0 => ResetTo::Time {
                at_ms: self.now.saturating_add_signed(value64 * 1_000),
            },
            1 => ResetTo::EarliestRecorded,
            2 => ResetTo::ShiftBy { delta: value64 },
            _ => ResetTo::Offset { offset: value64 },
        };
        let members = self.group.member_count();
        let before = self.fetched();
        let request = OffsetResetRequest {
            group_id: GROUP.to_owned(),
            to,
            topics: Vec::new(),
            execute,
        };
        let Response::OffsetReset(answer) = self.offsets_request(|group, now, client, token| {
            group.reset_offsets(now, request, client, token)
        }) else {
            panic!("not an OffsetReset answer");
        };
        if members > 0 {
            assert_eq!(
                answer.error_code,
                ErrorCode::NonEmptyGroup.code(),
                "{answer:?}"
            );
        }
        assert_eq!(
            answer.executed,
            execute && answer.error_code == 0,
            "{answer:?}"
        );
        let after = self.fetched();
        if !answer.executed {
            assert_eq!(after, before, "a reset not executed changed offsets");
            return;
        }
        for t in &answer.topics {
            for p in &t.partitions {
                let key = (t.topic.clone(), p.partition);
                assert_eq!(
                    p.current,
                    before.get(&key).map_or(-1, |o| o.0),
                    "{answer:?}"
                );
                assert_eq!(after.get(&key).map_or(-1, |o| o.0), p.new, "{answer:?}");
            }
        }
    }

    pub(super) fn restore(&mut self, execute: bool) {
        let request = OffsetRestoreRequest {
            group_id: GROUP.to_owned(),
            execute,
        };
        let before = self.fetched();
        let Response::OffsetRestore(answer) = self.offsets_request(|group, now, client, token| {
            group.restore_offsets(now, request, client, token)
        }) else {
            panic!("not an OffsetRestore answer");
        };
        assert_eq!(answer.error_code, 0, "{answer:?}");
        let after = self.fetched();
        let listed: BTreeMap<(String, i32), (i64, Option<String>)> = answer
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| {
                    (
                        (t.topic.clone(), p.partition),
                        (p.offset, p.metadata.clone()),
                    )
                })
            })
            .collect();
        if !answer.executed {
            assert_eq!(after, before);
            return;
        }
        for (key, listed) in &listed {
            assert!(
                !before.contains_key(key),
                "listed {key:?}, which has an offset"
            );
            assert_eq!(after.get(key), Some(listed), "restored {key:?}");
        }
        assert_eq!(after.len(), before.len() + listed.len());
    }

    /// A member's OwnershipEpochs answer: its partitions, or `None` if refused.
    pub(super) fn epochs(
        &mut self,
        member_id: &str,
        instance: Option<String>,
        generation_id: i32,
    ) -> Option<Vec<(String, i32)>> {
        let request = OwnershipEpochsRequest {
            group_id: GROUP.to_owned(),
            generation_id,
            member_id: member_id.to_owned(),
            group_instance_id: instance,
        };
        let answer = self.group.ownership_epochs(self.now, &request);
        if answer.error_code != 0 {
            // A refusal names no generation (protocol §6.23).
            assert_eq!(answer.generation_id, -1);
            assert!(answer.topics.is_empty());
            return None;
        }
        assert_eq!(answer.generation_id, generation_id);
        let mut owned = Vec::new();
        for t in &answer.topics {
            for p in &t.partitions {
                assert!(
                    p.epoch >= 1,
                    "epoch {} of {}-{}",
                    p.epoch,
                    t.topic,
                    p.partition
                );
                owned.push((t.topic.clone(), p.partition));
            }
        }
        Some(owned)
    }

    /// No partition is owned by two members.
    pub(super) fn epochs_do_not_overlap(&mut self) {
        let mut owners: HashMap<(String, i32), String> = HashMap::new();
        for (member_id, instance) in self.known.clone() {
            let Some(&generation) = self.generations.get(&member_id) else {
                continue;
            };
            for key in self
                .epochs(&member_id, instance, generation)
                .unwrap_or_default()
            {
                if let Some(other) = owners.insert(key.clone(), member_id.clone()) {
                    panic!("{key:?} owned by {other} and {member_id}");
                }
            }
        }
    }

    pub(super) fn history(&mut self, limit: u8) {
        let request = OffsetHistoryRequest {
            group_id: GROUP.to_owned(),
            topic: None,
            partition: None,
            limit: u32::from(limit % 4),
        };
        let answer = self.group.offset_history(&request, &self.client.access);
        assert_eq!(answer.error_code, 0);
        let budget = self.config.offsets.history_entries as usize;
        for t in &answer.topics {
            assert!(
                !t.partitions.is_empty(),
                "{} listed with no partition",
                t.topic
            );
            for p in &t.partitions {
                assert!(p.entries.len() <= budget);
                assert!(request.limit == 0 || p.entries.len() <= request.limit as usize);
                assert!(
                    p.entries.windows(2).all(|w| w[0].seq > w[1].seq),
                    "{}-{} not newest first",
                    t.topic,
                    p.partition
                );
            }
        }
    }
}
