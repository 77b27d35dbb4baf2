//! `muster offsets reset` and `muster offsets restore` (OffsetReset and OffsetRestore,
//! docs/offsets.md).
//!
//! `reset` prints per partition its offset now and after the reset, like
//! `kafka-consumer-groups.sh --reset-offsets`; with `--execute` also the time the reset was
//! recorded at and the command that undoes it: a reset to 1 ms before that time, over the
//! same `--topic`s, puts back exactly what it replaced. The server is the judge of whether
//! the group may be reset (Empty, no members); its refusal, which names the members, is
//! printed as it is, and the exit code is 1. `--json`: `{"group", "executed",
//! "recorded_at_ms", "recorded_at", "undo", "partitions": [{"topic", "partition", "current",
//! "new", "error"}]}` (`current` and `new` null for no offset; `error` null, or why the
//! partition is left alone, e.g. `TOPIC_AUTHORIZATION_FAILED`; the times and `undo` null for a
//! dry run).
//!
//! `restore` lists the expiry quarantine (offsets past retention, held before they are
//! dropped), or brings it back with `--execute`. `--json`: `{"group", "executed",
//! "quarantined_at_ms", "quarantined_at", "drop_at_ms", "drop_at", "offsets": [{"topic",
//! "partition", "offset", "metadata"}]}` (the times null for an empty quarantine).

use muster_client::admin::server_message;
use muster_client::protocol::{OffsetResetResponse, OffsetRestoreResponse};
use muster_client::{ClientError, ErrorCode, ResetTo, TopicPartitions};
use serde::Serialize;

use super::offsets::OffsetEntry;
use super::Context;
use crate::exit::Failure;
use crate::render::{self, Report};

/// One partition of a reset.
#[derive(Debug, Serialize)]
pub struct ResetRow {
    pub topic: String,
    pub partition: i32,
    /// `null`: no committed offset.
    pub current: Option<i64>,
    /// `null`: the reset removes the offset (the partition had none at that time).
    pub new: Option<i64>,
    /// `null`, or why this partition is left as it is (`TOPIC_AUTHORIZATION_FAILED`: the
    /// principal may not read its topic; the others are reset).
    pub error: Option<String>,
}

/// `offsets reset`.
#[derive(Debug, Serialize)]
pub struct OffsetReset {
    pub group: String,
    pub executed: bool,
    pub recorded_at_ms: Option<u64>,
    pub recorded_at: Option<String>,
    /// The command that undoes this reset.
    pub undo: Option<String>,
    pub partitions: Vec<ResetRow>,
}

fn offset(o: i64) -> Option<i64> {
    (o >= 0).then_some(o)
}

/// An error code's name, for a cell or a JSON field.
fn code_name(code: i16) -> String {
    ErrorCode::from_code(code).map_or_else(|| format!("error {code}"), |c| c.name().to_owned())
}

fn offset_cell(o: Option<i64>) -> String {
    o.map_or_else(|| "none".to_owned(), |o| o.to_string())
}

/// `s` as one shell word (quoted only when it needs to be).
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-:,=@+/".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `--topic` as given: `TOPIC` or `TOPIC:P,P`.
fn topic_arg(t: &TopicPartitions) -> String {
    if t.partitions.is_empty() {
        t.topic.clone()
    } else {
        let list: Vec<String> = t.partitions.iter().map(i32::to_string).collect();
        format!("{}:{}", t.topic, list.join(","))
    }
}

/// The command that undoes a reset recorded at `recorded_at_ms` over `topics`.
pub fn undo_command(group: &str, recorded_at_ms: u64, topics: &[TopicPartitions]) -> String {
    let mut command = format!(
        "muster offsets reset {} --to-time {}",
        shell_word(group),
        render::time_ms(recorded_at_ms.saturating_sub(1))
    );
    for t in topics {
        command.push_str(" --topic ");
        command.push_str(&shell_word(&topic_arg(t)));
    }
    command.push_str(" --execute");
    command
}

impl OffsetReset {
    pub fn new(group: &str, topics: &[TopicPartitions], answer: OffsetResetResponse) -> Self {
        let executed = answer.executed;
        let recorded = (executed && answer.recorded_at_ms > 0).then_some(answer.recorded_at_ms);
        OffsetReset {
            group: group.to_owned(),
            executed,
            recorded_at_ms: recorded,
            recorded_at: recorded.map(render::time_ms),
            undo: recorded.map(|at| undo_command(group, at, topics)),
            partitions: answer
                .topics
                .into_iter()
                .flat_map(|t| {
                    let topic = t.topic;
                    t.partitions.into_iter().map(move |p| ResetRow {
                        topic: topic.clone(),
                        partition: p.partition,
                        current: offset(p.current),
                        new: offset(p.new),
                        error: (p.error_code != 0).then(|| code_name(p.error_code)),
                    })
                })
                .collect(),
        }
    }
}

impl Report for OffsetReset {
    fn human(&self) -> String {
        if self.partitions.is_empty() {
            return String::new();
        }
        let mut out = render::table(
            &["TOPIC", "PARTITION", "CURRENT", "", "NEW"],
            self.partitions.iter().map(|p| match &p.error {
                None => [
                    p.topic.clone(),
                    p.partition.to_string(),
                    offset_cell(p.current),
                    "->".to_owned(),
                    offset_cell(p.new),
                ],
                Some(error) => [
                    p.topic.clone(),
                    p.partition.to_string(),
                    "-".to_owned(),
                    String::new(),
                    format!("not reset: {error}"),
                ],
            }),
        );
        if let (Some(at), Some(undo)) = (&self.recorded_at, &self.undo) {
            out.push_str(&format!("\n\nreset recorded at {at}\nundo with: {undo}"));
        }
        out
    }

    fn note(&self) -> Option<String> {
        if self.partitions.is_empty() {
            return Some(format!(
                "group {:?} has no offsets or history to reset",
                self.group
            ));
        }
        (!self.executed).then(|| "dry run: nothing was changed (--execute to reset)".to_owned())
    }
}

/// The failure of an offset admin request: the server's own reason when it gave one.
fn refused(ctx: &Context, what: &str, request: &str, group: &str, err: &ClientError) -> Failure {
    match (err.code(), server_message(err, request, group)) {
        (Some(code), reason) => Failure::server(what, code, reason),
        (None, _) => ctx.fail(what, err),
    }
}

pub async fn reset(
    ctx: &Context,
    group: &str,
    to: ResetTo,
    topics: &[TopicPartitions],
    execute: bool,
) -> Result<OffsetReset, Failure> {
    let answer = ctx
        .admin
        .reset_offsets(group, to, topics.to_vec(), execute)
        .await
        .map_err(|err| {
            let what = format!("cannot reset the offsets of group {group:?}");
            refused(ctx, &what, "OffsetReset", group, &err)
        })?;
    Ok(OffsetReset::new(group, topics, answer))
}

/// `offsets restore`.
#[derive(Debug, Serialize)]
pub struct Quarantine {
    pub group: String,
    pub executed: bool,
    /// When the oldest of them entered the quarantine.
    pub quarantined_at_ms: Option<u64>,
    pub quarantined_at: Option<String>,
    /// When the first of them will be dropped for good.
    pub drop_at_ms: Option<u64>,
    pub drop_at: Option<String>,
    pub offsets: Vec<OffsetEntry>,
    /// Whether `--execute` was asked.
    #[serde(skip)]
    pub asked: bool,
}

impl Quarantine {
    pub fn new(group: &str, asked: bool, answer: OffsetRestoreResponse) -> Self {
        let at = |ms: u64| (ms > 0).then_some(ms);
        let (quarantined, drop) = (at(answer.quarantined_at_ms), at(answer.drop_at_ms));
        Quarantine {
            group: group.to_owned(),
            executed: answer.executed,
            quarantined_at_ms: quarantined,
            quarantined_at: quarantined.map(render::time_ms),
            drop_at_ms: drop,
            drop_at: drop.map(render::time_ms),
            offsets: answer
                .topics
                .into_iter()
                .flat_map(|t| {
                    let topic = t.topic;
                    t.partitions.into_iter().map(move |p| OffsetEntry {
                        topic: topic.clone(),
                        partition: p.partition,
                        offset: p.offset,
                        metadata: p.metadata,
                    })
                })
                .collect(),
            asked,
        }
    }
}

impl Report for Quarantine {
    fn human(&self) -> String {
        if self.offsets.is_empty() {
            return String::new();
        }
        let head = if self.executed {
            format!(
                "restored {} offset(s) of group {}",
                self.offsets.len(),
                self.group
            )
        } else {
            render::fields(&[
                (
                    "QUARANTINED SINCE",
                    render::or_dash(self.quarantined_at.as_deref()),
                ),
                ("DROPPED AT", render::or_dash(self.drop_at.as_deref())),
            ])
        };
        let table = render::table(
            &["TOPIC", "PARTITION", "OFFSET", "METADATA"],
            self.offsets.iter().map(|o| {
                [
                    o.topic.clone(),
                    o.partition.to_string(),
                    o.offset.to_string(),
                    render::or_dash(o.metadata.as_deref()),
                ]
            }),
        );
        format!("{head}\n\n{table}")
    }

    fn note(&self) -> Option<String> {
        if self.offsets.is_empty() {
            return Some(format!(
                "group {:?} has no offsets in the expiry quarantine",
                self.group
            ));
        }
        match (self.asked, self.executed) {
            (false, _) => Some(format!(
                "restore them with: muster offsets restore {} --execute",
                shell_word(&self.group)
            )),
            (true, false) => Some("nothing was restored".to_owned()),
            (true, true) => None,
        }
    }
}

pub async fn restore(ctx: &Context, group: &str, execute: bool) -> Result<Quarantine, Failure> {
    let answer = ctx
        .admin
        .restore_offsets(group, execute)
        .await
        .map_err(|err| {
            let what = if execute {
                format!("cannot restore the offsets of group {group:?}")
            } else {
                format!("cannot list the quarantined offsets of group {group:?}")
            };
            refused(ctx, &what, "OffsetRestore", group, &err)
        })?;
    Ok(Quarantine::new(group, execute, answer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_client::protocol::{FetchedPartition, FetchedTopic, ResetPartition, ResetTopic};

    fn reset_answer(executed: bool) -> OffsetResetResponse {
        OffsetResetResponse {
            error_code: 0,
            error_message: None,
            executed,
            recorded_at_ms: if executed { 1_796_133_600_000 } else { 0 },
            topics: vec![ResetTopic {
                topic: "orders".into(),
                partitions: vec![
                    ResetPartition {
                        partition: 0,
                        current: 42,
                        new: 17,
                        error_code: 0,
                    },
                    ResetPartition {
                        partition: 1,
                        current: 5,
                        new: -1,
                        error_code: 0,
                    },
                ],
            }],
        }
    }

    #[test]
    fn a_partition_left_alone_says_why() {
        let mut answer = reset_answer(false);
        answer.topics.push(ResetTopic {
            topic: "secret".into(),
            partitions: vec![ResetPartition {
                partition: 0,
                current: -1,
                new: -1,
                error_code: ErrorCode::TopicAuthorizationFailed.code(),
            }],
        });
        let report = OffsetReset::new("g", &[], answer);
        let text = report.human();
        assert!(
            text.ends_with("secret  0          -            not reset: TOPIC_AUTHORIZATION_FAILED"),
            "{text}"
        );
        let json = serde_json::to_value(&report).expect("encodes");
        assert_eq!(json["partitions"][0]["error"], serde_json::Value::Null);
        assert_eq!(json["partitions"][2]["error"], "TOPIC_AUTHORIZATION_FAILED");
    }

    #[test]
    fn a_dry_run_shows_current_and_new_and_says_nothing_changed() {
        let report = OffsetReset::new("g", &[], reset_answer(false));
        assert_eq!(
            report.human(),
            "TOPIC   PARTITION  CURRENT      NEW\n\
             orders  0          42       ->  17\n\
             orders  1          5        ->  none"
        );
        assert!(report.note().expect("a note").starts_with("dry run"));
        let json = serde_json::to_value(&report).expect("encodes");
        assert_eq!(json["undo"], serde_json::Value::Null);
        assert_eq!(json["partitions"][1]["new"], serde_json::Value::Null);
    }

    #[test]
    fn an_executed_reset_prints_the_command_that_undoes_it() {
        let topics = [
            TopicPartitions {
                topic: "orders".into(),
                partitions: vec![0, 1],
            },
            TopicPartitions {
                topic: "audit".into(),
                partitions: vec![],
            },
        ];
        let report = OffsetReset::new("my group", &topics, reset_answer(true));
        let text = report.human();
        assert!(
            text.ends_with(
                "\n\nreset recorded at 2026-12-01T14:00:00.000Z\nundo with: muster offsets reset \
                 'my group' --to-time 2026-12-01T13:59:59.999Z --topic orders:0,1 --topic audit \
                 --execute"
            ),
            "{text}"
        );
        assert_eq!(report.note(), None);
        assert_eq!(
            undo_command("g", 1_796_133_600_000, &[]),
            "muster offsets reset g --to-time 2026-12-01T13:59:59.999Z --execute"
        );
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }

    #[test]
    fn the_quarantine_says_when_it_entered_and_when_it_is_dropped() {
        let answer = OffsetRestoreResponse {
            error_code: 0,
            error_message: None,
            executed: false,
            quarantined_at_ms: 1_796_133_600_000,
            drop_at_ms: 1_796_738_400_000,
            topics: vec![FetchedTopic {
                topic: "orders".into(),
                partitions: vec![FetchedPartition {
                    partition: 2,
                    offset: 7,
                    metadata: None,
                    error_code: 0,
                }],
            }],
        };
        let report = Quarantine::new("g", false, answer);
        assert_eq!(
            report.human(),
            "QUARANTINED SINCE  2026-12-01T14:00:00.000Z\n\
             DROPPED AT         2026-12-08T14:00:00.000Z\n\
             \n\
             TOPIC   PARTITION  OFFSET  METADATA\n\
             orders  2          7       -"
        );
        assert!(report.note().expect("a note").contains("--execute"));
        let empty = Quarantine::new("g", false, OffsetRestoreResponse::default());
        assert_eq!(empty.human(), "");
        let json = serde_json::to_value(&empty).expect("encodes");
        assert_eq!(json["quarantined_at"], serde_json::Value::Null);
        assert_eq!(json["offsets"], serde_json::json!([]));
    }
}
