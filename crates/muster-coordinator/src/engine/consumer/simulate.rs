//! Dry-run rebalance (GroupSimulate, docs/protocol.md): what the group's assignor would move if
//! members left, members joined, or topics grew — per member, partitions kept, lost and gained,
//! and how many partitions would stop. It runs the assignor on a copy of the inputs: nothing in
//! the group changes.
//!
//! The server can compute the assignment of a consumer-protocol group (its own `uniform` or
//! `range`, sticky from the current target) and of a classic group whose assignor is one whose
//! result depends on nothing but the subscriptions: Kafka's classic `range` and `roundrobin`,
//! computed here exactly as Kafka's `RangeAssignor` and `RoundRobinAssignor` do. The sticky
//! classic assignors depend on the members' own user data, so they are refused.

use std::collections::{BTreeMap, BTreeSet};

use muster_protocol::{ErrorCode, GroupSimulateRequest, GroupSimulateResponse, SimulatedMember};

use super::group::to_wire;
use super::target::{resolve, run_assignor};
use super::{Partitions, Target};
use crate::engine::{Group, TopicLookup};

/// The catalog as it would be: the request's partition counts over the real ones.
struct Overlay<'a> {
    topics: &'a dyn TopicLookup,
    grown: &'a BTreeMap<String, i32>,
}

impl TopicLookup for Overlay<'_> {
    fn partitions(&self, topic: &str) -> Option<i32> {
        self.grown
            .get(topic)
            .copied()
            .or_else(|| self.topics.partitions(topic))
    }

    fn each(&self, f: &mut dyn FnMut(&str, i32)) {
        self.topics.each(&mut |topic, count| {
            if !self.grown.contains_key(topic) {
                f(topic, count);
            }
        });
        for (topic, &count) in self.grown {
            f(topic, count);
        }
    }
}

fn refused(code: ErrorCode, message: impl Into<String>) -> GroupSimulateResponse {
    GroupSimulateResponse {
        error_code: code.code(),
        error_message: Some(message.into()),
        ..GroupSimulateResponse::default()
    }
}

/// What one member has now and would have after, by member id.
struct Inputs {
    assignor: String,
    /// Subscriptions (resolved against the overlay) of the members after the change.
    after: BTreeMap<String, BTreeSet<String>>,
    counts: BTreeMap<String, i32>,
    /// What every current member holds now.
    now: BTreeMap<String, Partitions>,
    /// The current targets (for the sticky server assignors).
    targets: BTreeMap<String, Partitions>,
    /// Whether the assignor is one of the server's own (sticky) or a classic one.
    server_side: bool,
}

impl<R> Group<R> {
    /// GroupSimulate of this group (see the module docs).
    pub fn simulate(
        &self,
        req: &GroupSimulateRequest,
        topics: &dyn TopicLookup,
    ) -> GroupSimulateResponse {
        let limits = &self.config.limits;
        let mut grown = BTreeMap::new();
        for t in &req.partitions {
            let current = topics.partitions(&t.topic).unwrap_or(0);
            if t.partitions < 1 || t.partitions < current {
                return refused(
                    ErrorCode::InvalidPartitions,
                    format!(
                        "topic {} has {current} partitions: a simulated count must be at least that and at least 1",
                        t.topic
                    ),
                );
            }
            // As CreateTopics: a count no topic may have cannot be simulated either.
            if t.partitions > limits.max_partitions_per_topic {
                return refused(
                    ErrorCode::InvalidPartitions,
                    format!(
                        "{} partitions for topic {}: a topic has at most {} (max_partitions_per_topic)",
                        t.partitions, t.topic, limits.max_partitions_per_topic
                    ),
                );
            }
            grown.insert(t.topic.clone(), t.partitions);
        }
        let overlay = Overlay {
            topics,
            grown: &grown,
        };
        let inputs = match self.simulation_inputs(req, &overlay) {
            Ok(inputs) => inputs,
            Err(refusal) => return refusal,
        };
        let target: Target = if inputs.server_side {
            run_assignor(
                &inputs.assignor,
                &inputs.after,
                &inputs.counts,
                &inputs.targets,
            )
        } else if inputs.assignor == "range" {
            classic_range(&inputs.after, &inputs.counts)
        } else {
            classic_round_robin(&inputs.after, &inputs.counts)
        };
        compare(&inputs, &target, req)
    }

    fn simulation_inputs(
        &self,
        req: &GroupSimulateRequest,
        topics: &dyn TopicLookup,
    ) -> Result<Inputs, GroupSimulateResponse> {
        let removed: BTreeSet<&str> = req.remove_members.iter().map(String::as_str).collect();
        let mut after = BTreeMap::new();
        let mut now = BTreeMap::new();
        let mut targets = BTreeMap::new();
        let mut counts = BTreeMap::new();
        let mut union: BTreeSet<String> = BTreeSet::new();
        let (assignor, server_side) = if let Some(part) = self.consumer.as_deref() {
            for m in part.members.values() {
                let resolved = resolve(topics, &m.subscribed_topics, m.regex.as_deref());
                now.insert(m.member_id.to_string(), m.holds());
                targets.insert(m.member_id.to_string(), m.target.clone());
                union.extend(resolved.keys().cloned());
                if !removed.contains(&*m.member_id) {
                    after.insert(m.member_id.to_string(), resolved.keys().cloned().collect());
                }
                counts.extend(resolved);
            }
            (part.assignor.clone(), true)
        } else {
            let assignor = self.assignor.clone().unwrap_or_default();
            if !matches!(assignor.as_str(), "range" | "roundrobin") {
                return Err(refused(
                    ErrorCode::InvalidRequest,
                    format!(
                        "the group's assignor {assignor:?} runs in its members with their own data: \
                         the server computes consumer groups and classic groups on range or roundrobin"
                    ),
                ));
            }
            for m in self.members.values() {
                let resolved = resolve(topics, &m.topics, None);
                now.insert(
                    m.member_id.to_string(),
                    super::group::from_wire(&m.assignment),
                );
                union.extend(resolved.keys().cloned());
                if !removed.contains(&*m.member_id) {
                    after.insert(m.member_id.to_string(), resolved.keys().cloned().collect());
                }
                counts.extend(resolved);
            }
            (assignor, false)
        };
        if let Some(unknown) = removed.iter().find(|id| !now.contains_key(**id)) {
            return Err(refused(
                ErrorCode::UnknownMemberId,
                format!("the group has no member {unknown}"),
            ));
        }
        check_size(
            req,
            &union,
            &counts,
            self.config.limits.max_partitions_per_request,
        )?;
        for k in 1..=req.add_members {
            after.insert(format!("new-{k}"), union.clone());
        }
        Ok(Inputs {
            assignor,
            after,
            counts,
            now,
            targets,
            server_side,
        })
    }
}

/// The simulation's own size limit: the partitions it would assign (every partition of every
/// topic the group subscribes to, at the simulated counts), and the subscriptions of the
/// members it adds (each subscribes to all of those topics), each at most `max` — the limit on
/// the partitions one request may name. Without it a request of a few hundred bytes (a topic
/// grown to 100 000 partitions, 26 000 members added) would make the group's actor compute and
/// encode an assignment of billions of entries while every other request to it waits.
fn check_size(
    req: &GroupSimulateRequest,
    union: &BTreeSet<String>,
    counts: &BTreeMap<String, i32>,
    max: usize,
) -> Result<(), GroupSimulateResponse> {
    let partitions: usize = counts
        .values()
        .map(|&n| usize::try_from(n).unwrap_or(0))
        .sum();
    if partitions > max {
        return Err(refused(
            ErrorCode::RequestLimitExceeded,
            format!(
                "the simulation would assign {partitions} partitions; one simulation assigns at most {max} (max_partitions_per_request)"
            ),
        ));
    }
    let subscriptions = (req.add_members as usize).saturating_mul(union.len());
    if subscriptions > max {
        return Err(refused(
            ErrorCode::RequestLimitExceeded,
            format!(
                "{} added members × {} subscribed topics is {subscriptions} subscriptions; one simulation adds at most {max} (max_partitions_per_request)",
                req.add_members,
                union.len()
            ),
        ));
    }
    Ok(())
}

/// Per member: kept, lost, gained; and the partitions that stop (lose their current owner).
fn compare(inputs: &Inputs, target: &Target, req: &GroupSimulateRequest) -> GroupSimulateResponse {
    let empty = Partitions::new();
    let mut ids: BTreeSet<&String> = inputs.now.keys().collect();
    ids.extend(inputs.after.keys());
    let mut stopped = 0usize;
    let mut members = Vec::new();
    for id in ids {
        let before = inputs.now.get(id).unwrap_or(&empty);
        let after = target.get(id).unwrap_or(&empty);
        let (kept, lost, gained) = split(before, after);
        stopped += lost.values().map(BTreeSet::len).sum::<usize>();
        let change = if req.remove_members.contains(id) {
            "removed"
        } else if inputs.now.contains_key(id) {
            "staying"
        } else {
            "added"
        };
        members.push(SimulatedMember {
            member_id: id.clone(),
            change: change.to_owned(),
            kept: to_wire(&kept),
            lost: to_wire(&lost),
            gained: to_wire(&gained),
        });
    }
    GroupSimulateResponse {
        error_code: ErrorCode::None.code(),
        error_message: None,
        assignor: inputs.assignor.clone(),
        members,
        stopped_partitions: u32::try_from(stopped).unwrap_or(u32::MAX),
    }
}

fn split(before: &Partitions, after: &Partitions) -> (Partitions, Partitions, Partitions) {
    let mut kept = Partitions::new();
    let mut lost = Partitions::new();
    let mut gained = Partitions::new();
    let empty = BTreeSet::new();
    let topics: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for t in topics {
        let b = before.get(t).unwrap_or(&empty);
        let a = after.get(t).unwrap_or(&empty);
        let k: BTreeSet<i32> = b.intersection(a).copied().collect();
        let l: BTreeSet<i32> = b.difference(a).copied().collect();
        let g: BTreeSet<i32> = a.difference(b).copied().collect();
        for (set, into) in [(k, &mut kept), (l, &mut lost), (g, &mut gained)] {
            if !set.is_empty() {
                into.insert(t.clone(), set);
            }
        }
    }
    (kept, lost, gained)
}

/// Kafka's classic `RangeAssignor`: per topic, its subscribers in member-id order take ranges,
/// `count / n` each and one more for the first `count % n`.
fn classic_range(
    members: &BTreeMap<String, BTreeSet<String>>,
    counts: &BTreeMap<String, i32>,
) -> Target {
    let mut target: Target = members
        .keys()
        .map(|m| (m.clone(), Partitions::new()))
        .collect();
    for (topic, &count) in counts {
        let subscribers: Vec<&String> = members
            .iter()
            .filter(|(_, ts)| ts.contains(topic))
            .map(|(m, _)| m)
            .collect();
        if subscribers.is_empty() {
            continue;
        }
        let n = subscribers.len() as i32;
        let (each, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, m) in subscribers.into_iter().enumerate() {
            let len = each + i32::from((i as i32) < extra);
            if len > 0 {
                if let Some(own) = target.get_mut(m) {
                    own.insert(topic.clone(), (next..next + len).collect());
                }
            }
            next += len;
        }
    }
    target
}

/// Kafka's classic `RoundRobinAssignor`: every partition (topics in name order) goes to the
/// next member, in member-id order around a circle, that subscribes to its topic.
fn classic_round_robin(
    members: &BTreeMap<String, BTreeSet<String>>,
    counts: &BTreeMap<String, i32>,
) -> Target {
    let mut target: Target = members
        .keys()
        .map(|m| (m.clone(), Partitions::new()))
        .collect();
    let ids: Vec<&String> = members.keys().collect();
    if ids.is_empty() {
        return target;
    }
    let mut at = 0usize;
    for (topic, &count) in counts {
        if !members.values().any(|ts| ts.contains(topic)) {
            continue;
        }
        for p in 0..count {
            while !members[ids[at % ids.len()]].contains(topic) {
                at += 1;
            }
            if let Some(own) = target.get_mut(ids[at % ids.len()]) {
                own.entry(topic.clone()).or_default().insert(p);
            }
            at += 1;
        }
    }
    target
}
