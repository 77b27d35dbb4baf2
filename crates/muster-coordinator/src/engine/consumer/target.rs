//! The group epoch and the target assignment (protocol-v1 §7 "Epochs"; Kafka 4's
//! `TargetAssignmentBuilder`): the group epoch rises on every change of membership,
//! subscription or a subscribed topic's partition count, and the group's server assignor then
//! computes every member's target at that epoch. Subscriptions are resolved here: topic names
//! that exist in the catalog, and the topics a member's regex matches.

use std::collections::{BTreeMap, BTreeSet};

use muster_protocol::RebalanceCause;
use regex::Regex;

use super::group::ConsumerPart;
use super::{assign_range, assign_uniform, AssignmentSpec, Target};
use crate::engine::{Ctx, Effects, Group, TopicLookup};

/// The server assignors (protocol-v1 §7 "Server assignors").
pub const ASSIGNORS: [&str; 2] = ["uniform", "range"];

/// A regex is refused if compiling it would take more than this (bounded memory).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Compiles a subscription regex, anchored as Kafka matches it (the whole topic name).
pub fn compile_regex(pattern: &str) -> Result<Regex, regex::Error> {
    regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
}

/// The topics a member subscribes to that exist: its names found in the catalog, and every
/// catalog topic its regex matches.
pub fn resolve(
    topics: &dyn TopicLookup,
    names: &[String],
    regex: Option<&str>,
) -> BTreeMap<String, i32> {
    let mut out = BTreeMap::new();
    for name in names {
        if let Some(count) = topics.partitions(name) {
            out.insert(name.clone(), count);
        }
    }
    if let Some(Ok(re)) = regex.map(compile_regex) {
        topics.each(&mut |topic, count| {
            if re.is_match(topic) {
                out.insert(topic.to_owned(), count);
            }
        });
    }
    out
}

impl ConsumerPart {
    /// The assignor the group uses: the one most members ask for (ties: the first in
    /// [`ASSIGNORS`]), or `default` when none asks (Kafka 4 picks the most used one too).
    pub fn choose_assignor(&self, default: &str) -> String {
        let mut counts = [0usize; ASSIGNORS.len()];
        for m in self.members.values() {
            if let Some(i) = m
                .server_assignor
                .as_deref()
                .and_then(|a| ASSIGNORS.iter().position(|n| *n == a))
            {
                counts[i] += 1;
            }
        }
        match counts
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
        {
            Some((i, &n)) if n > 0 => ASSIGNORS[i].to_owned(),
            _ => default.to_owned(),
        }
    }

    /// Every member's resolved subscription and the partition counts of the topics in them.
    pub fn subscriptions(
        &self,
        topics: &dyn TopicLookup,
    ) -> (BTreeMap<String, BTreeSet<String>>, BTreeMap<String, i32>) {
        let mut members = BTreeMap::new();
        let mut counts = BTreeMap::new();
        for m in self.members.values() {
            let resolved = resolve(topics, &m.subscribed_topics, m.regex.as_deref());
            let names = resolved.keys().cloned().collect();
            counts.extend(resolved);
            members.insert(m.member_id.to_string(), names);
        }
        (members, counts)
    }
}

/// Runs the named server assignor (`range`, or `uniform` for anything else).
pub fn run_assignor(
    assignor: &str,
    members: &BTreeMap<String, BTreeSet<String>>,
    counts: &BTreeMap<String, i32>,
    current: &BTreeMap<String, super::Partitions>,
) -> Target {
    let spec = AssignmentSpec {
        members,
        partition_counts: counts,
        current,
    };
    if assignor == "range" {
        assign_range(&spec)
    } else {
        assign_uniform(&spec)
    }
}

impl<R> Group<R> {
    /// The group epoch rises (a member joined or left, a subscription or a subscribed topic
    /// changed); the target follows at the new epoch (`assign.rs`: at once for a small group,
    /// off the group's turn for a large one).
    pub(in crate::engine) fn bump_group_epoch(
        &mut self,
        cx: Ctx<'_>,
        cause: RebalanceCause,
        out: &mut Effects<R>,
    ) {
        self.generation = self.generation.saturating_add(1);
        out.persist = true;
        let epoch = self.generation;
        if let Some(part) = self.consumer.as_deref_mut() {
            let full = part.pending_causes.len() >= super::group::MAX_PENDING_CAUSES;
            match part.pending_causes.back_mut() {
                // Bounded: past the cap, the newest entry covers this epoch too (its cause
                // stands for the changes it coalesces), so that every target still names one.
                Some(last) if full => last.0 = epoch,
                _ => part.pending_causes.push_back((epoch, cause, cx.now)),
            }
        }
        self.start_assignment(cx, out);
    }
}
