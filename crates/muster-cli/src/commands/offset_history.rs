//! `muster offsets history`: a group's offset history (OffsetHistory, docs/offsets.md): per
//! partition its last commits, resets and restores, newest first, with who wrote each and
//! when. What an operator reads before a point-in-time reset (`offsets reset --to-time`).
//!
//! `--json`: `{"group", "entries": [{"topic", "partition", "seq", "time", "at_ms", "kind",
//! "offset", "metadata", "member_id", "client_id", "client_host", "generation"}], "denied":
//! [{"topic", "partition", "error"}], "omitted"}`; entries by topic, partition, then newest
//! first; `time` is RFC 3339 UTC and `at_ms` the same in ms since the Unix epoch; `offset` is
//! null where a reset removed the offset; `member_id`, `client_id`, `client_host` are null
//! when empty and `generation` null outside any generation. `denied` lists partitions of
//! topics the principal may not read; `omitted` counts entries the server left out at its cap.

use muster_client::protocol::{ErrorCode, OffsetHistoryResponse};
use serde::Serialize;

use super::Context;
use crate::exit::Failure;
use crate::render::{self, Report};

/// One history entry of one partition.
#[derive(Debug, Serialize)]
pub struct HistoryEntry {
    pub topic: String,
    pub partition: i32,
    pub seq: u64,
    /// RFC 3339, UTC, to the millisecond.
    pub time: String,
    pub at_ms: u64,
    /// `commit`, `reset` or `restore` (passed through as the server says it).
    pub kind: String,
    /// `null`: the reset removed the partition's offset.
    pub offset: Option<i64>,
    pub metadata: Option<String>,
    /// The committing member, or for a reset or restore the principal.
    pub member_id: Option<String>,
    pub client_id: Option<String>,
    pub client_host: Option<String>,
    /// `null`: outside any generation (an administrator's commit, a reset, a restore).
    pub generation: Option<i32>,
}

/// A partition whose history could not be shown.
#[derive(Debug, Serialize)]
pub struct Denied {
    pub topic: String,
    pub partition: i32,
    /// The error's name, e.g. `TOPIC_AUTHORIZATION_FAILED`.
    pub error: String,
}

/// `offsets history`.
#[derive(Debug, Serialize)]
pub struct OffsetHistory {
    pub group: String,
    pub entries: Vec<HistoryEntry>,
    pub denied: Vec<Denied>,
    pub omitted: u32,
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

impl OffsetHistory {
    pub fn new(group: &str, answer: OffsetHistoryResponse) -> Self {
        let mut report = OffsetHistory {
            group: group.to_owned(),
            entries: Vec::new(),
            denied: Vec::new(),
            omitted: answer.omitted,
        };
        for topic in answer.topics {
            for p in topic.partitions {
                if p.error_code != 0 {
                    report.denied.push(Denied {
                        topic: topic.topic.clone(),
                        partition: p.partition,
                        error: ErrorCode::from_code(p.error_code).map_or_else(
                            || format!("error {}", p.error_code),
                            |c| c.name().to_owned(),
                        ),
                    });
                    continue;
                }
                report
                    .entries
                    .extend(p.entries.into_iter().map(|e| HistoryEntry {
                        topic: topic.topic.clone(),
                        partition: p.partition,
                        seq: e.seq,
                        time: render::time_ms(e.committed_at_ms),
                        at_ms: e.committed_at_ms,
                        kind: e.kind,
                        offset: (e.offset >= 0).then_some(e.offset),
                        metadata: e.metadata,
                        member_id: non_empty(e.member_id),
                        client_id: non_empty(e.client_id),
                        client_host: non_empty(e.client_host),
                        generation: (e.generation_id >= 0).then_some(e.generation_id),
                    }));
            }
        }
        report
    }
}

impl Report for OffsetHistory {
    fn human(&self) -> String {
        if self.entries.is_empty() {
            return String::new();
        }
        let dash = |v: &Option<String>| render::or_dash(v.as_deref());
        render::table(
            &[
                "TOPIC",
                "PARTITION",
                "TIME",
                "KIND",
                "OFFSET",
                "METADATA",
                "MEMBER",
                "CLIENT",
                "HOST",
                "GENERATION",
            ],
            self.entries.iter().map(|e| {
                [
                    e.topic.clone(),
                    e.partition.to_string(),
                    e.time.clone(),
                    e.kind.clone(),
                    e.offset
                        .map_or_else(|| "none".to_owned(), |o| o.to_string()),
                    dash(&e.metadata),
                    dash(&e.member_id),
                    dash(&e.client_id),
                    dash(&e.client_host),
                    e.generation
                        .map_or_else(|| "-".to_owned(), |g| g.to_string()),
                ]
            }),
        )
    }

    fn note(&self) -> Option<String> {
        let mut notes = Vec::new();
        if self.entries.is_empty() && self.denied.is_empty() {
            notes.push(format!("group {:?} has no offset history", self.group));
        }
        for d in &self.denied {
            notes.push(format!(
                "{}:{} not shown: {}",
                d.topic, d.partition, d.error
            ));
        }
        if self.omitted > 0 {
            notes.push(format!(
                "{} older entries left out (the server's cap): narrow with --topic, --partition \
                 or --limit",
                self.omitted
            ));
        }
        (!notes.is_empty()).then(|| notes.join("\nmuster: "))
    }
}

pub async fn history(
    ctx: &Context,
    group: &str,
    topic: Option<&str>,
    partition: Option<i32>,
    limit: u32,
) -> Result<OffsetHistory, Failure> {
    let answer = ctx
        .admin
        .offset_history(group, topic, partition, limit)
        .await
        .map_err(|e| {
            ctx.fail(
                &format!("cannot read the offset history of group {group:?}"),
                &e,
            )
        })?;
    Ok(OffsetHistory::new(group, answer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_client::protocol::{OffsetHistoryEntry, PartitionHistory, TopicHistory};

    fn answer() -> OffsetHistoryResponse {
        OffsetHistoryResponse {
            error_code: 0,
            topics: vec![
                TopicHistory {
                    topic: "orders".into(),
                    partitions: vec![PartitionHistory {
                        partition: 0,
                        error_code: 0,
                        entries: vec![
                            OffsetHistoryEntry {
                                seq: 2,
                                kind: "reset".into(),
                                offset: -1,
                                committed_at_ms: 1_796_133_600_500,
                                member_id: "ops".into(),
                                client_id: "muster-cli".into(),
                                client_host: "10.0.0.9".into(),
                                generation_id: -1,
                                ..OffsetHistoryEntry::default()
                            },
                            OffsetHistoryEntry {
                                seq: 1,
                                kind: "commit".into(),
                                offset: 42,
                                metadata: Some("m".into()),
                                committed_at_ms: 1_796_133_600_000,
                                member_id: "w1-abc".into(),
                                client_id: "w1".into(),
                                client_host: "10.0.0.1".into(),
                                generation_id: 3,
                            },
                        ],
                    }],
                },
                TopicHistory {
                    topic: "secret".into(),
                    partitions: vec![PartitionHistory {
                        partition: 1,
                        error_code: ErrorCode::TopicAuthorizationFailed.code(),
                        entries: vec![],
                    }],
                },
            ],
            omitted: 3,
        }
    }

    #[test]
    fn the_table_is_newest_first_with_times_in_utc() {
        let report = OffsetHistory::new("g", answer());
        let text = report.human();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("TOPIC"), "{text}");
        assert!(lines[0].ends_with("GENERATION"), "{text}");
        assert!(
            lines[1].contains("2026-12-01T14:00:00.500Z  reset   none"),
            "{text}"
        );
        assert!(lines[1].trim_end().ends_with('-'), "{text}");
        assert!(lines[2].contains("commit  42"), "{text}");
        assert!(lines[2].contains("w1-abc  w1"), "{text}");
        assert!(lines[2].ends_with('3'), "{text}");
        let note = report.note().expect("a note");
        assert!(
            note.contains("secret:1 not shown: TOPIC_AUTHORIZATION_FAILED"),
            "{note}"
        );
        assert!(note.contains("3 older entries left out"), "{note}");
    }

    #[test]
    fn json_names_the_fields() {
        let json = serde_json::to_value(OffsetHistory::new("g", answer())).expect("encodes");
        let reset = &json["entries"][0];
        assert_eq!(reset["kind"], "reset");
        assert_eq!(reset["offset"], serde_json::Value::Null);
        assert_eq!(reset["generation"], serde_json::Value::Null);
        assert_eq!(reset["time"], "2026-12-01T14:00:00.500Z");
        assert_eq!(reset["at_ms"], 1_796_133_600_500_u64);
        assert_eq!(json["entries"][1]["metadata"], "m");
        assert_eq!(json["denied"][0]["error"], "TOPIC_AUTHORIZATION_FAILED");
        assert_eq!(json["omitted"], 3);
    }
}
