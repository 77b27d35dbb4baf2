//! `join-one`: the classic protocol and the consumer protocol (KIP-848) side by side in one
//! run (issue #21): one member joins a formed group, then one leaves, and what that costs the
//! newcomer, the partitions and the members that were there.
//!
//! Each repeat, for each protocol in turn (against the same server, one topic made with
//! CreateTopics, a fresh group per protocol and repeat):
//!
//! 1. `members` members form a group on the topic's `partitions` (not timed for the figures;
//!    printed as formation time).
//! 2. Baseline: `baseline` of steady heartbeats (their latency is the baseline), then a random
//!    part of a heartbeat interval, so that the change starts at an arbitrary moment of the
//!    members' heartbeat cycle (so does the leave below).
//! 3. **One joins.** Start: the newcomer's first request (JoinGroup; ConsumerGroupHeartbeat
//!    with epoch 0). Figures: (a) start → the newcomer owns its share (the answer that gave it
//!    the partitions it ends with: its SyncGroup answer; the heartbeat answer carrying its
//!    last partitions); (b) which partitions stop at all (any member stops owning them, for
//!    any time) against those that move (owner at the end ≠ owner at the start), and each stop's
//!    downtime; (c) the members that were there: how many lost any partition, how many had to
//!    do anything but heartbeat, and their heartbeat latency during the change against the
//!    baseline. Settled: every member in the new generation (classic: synced; consumer: the
//!    same epoch in every member's answers, every partition owned once).
//! 4. **One leaves** (a member that was there before): the same figures, from its leave.
//! 5. Everyone leaves (classic: one LeaveGroup; consumer: each member's epoch -1, and the group
//!    is awaited Empty on the server before going on).
//!
//! Ownership is what the members themselves report ([`views`]). The classic members are the
//! benchmark's eager ones ([`classic`]): on REBALANCE_IN_PROGRESS they give up everything
//! before rejoining, as Kafka's eager consumers do; the leader assigns round-robin. The
//! consumer members ([`crate::consumer`]) heartbeat at the interval the server returns, report
//! what they own, and revoke before taking. No application runs: revoking and taking cost
//! nothing, so the times are the coordinator's and the protocols' (round trips and heartbeat
//! intervals), not a real consumer's processing.

mod classic;
mod consumer;
pub mod views;

use std::time::Duration;

use anyhow::{bail, Result};
use serde::Serialize;

use super::{Common, Report, CLIENT_ID};
use crate::client::connect_many;
use crate::stats::{LatencySummary, Series};
use views::{Change, Measured};

/// A protocol `join-one` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Classic,
    Consumer,
}

impl Protocol {
    /// `classic`, `consumer` or `both` (classic first).
    pub fn parse_list(s: &str) -> Result<Vec<Protocol>> {
        Ok(match s {
            "classic" => vec![Protocol::Classic],
            "consumer" => vec![Protocol::Consumer],
            "both" => vec![Protocol::Classic, Protocol::Consumer],
            other => bail!("no protocol {other:?}: classic, consumer or both"),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Protocol::Classic => "classic",
            Protocol::Consumer => "consumer",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    pub members: usize,
    pub partitions: i32,
    pub protocols: Vec<Protocol>,
    pub repeats: usize,
    /// Connections the members share (default: one per 50 members).
    pub connections: Option<usize>,
    /// The classic members' heartbeat interval (the consumer members use the server's; run
    /// the server with the same `--consumer-heartbeat-interval-ms`, as `--spawn` does).
    pub heartbeat: Duration,
    pub session_timeout_ms: u32,
    pub rebalance_timeout_ms: u32,
    /// The consumer members' server assignor.
    pub assignor: String,
    /// Steady heartbeats measured before the change.
    pub baseline: Duration,
    /// Skip the leave.
    pub no_leave: bool,
    /// Give up on a phase after this long.
    pub settle_limit: Duration,
}

/// One repeat of one protocol.
pub struct Run {
    pub formation_ms: f64,
    /// The members' heartbeat interval (consumer: as the server returned it).
    pub interval_ms: u64,
    pub baseline: LatencySummary,
    pub join: Measured,
    pub leave: Option<Measured>,
    /// The server's state for the group after each change (consumer: ConsumerGroupDescribe).
    pub server_states: Vec<String>,
}

/// One change (join or leave) of one protocol over the repeats.
#[derive(Debug, Default, Serialize)]
struct PhaseFigures {
    /// The subject's first request → it owns what it ends with (join: the newcomer's share).
    subject: Series,
    /// Start → every stopped partition owned again.
    all_owned: Series,
    /// Start → settled.
    settled: Series,
    /// The other members' heartbeats during the change, per repeat.
    heartbeats: Vec<LatencySummary>,
    /// Each stop's downtime, per repeat.
    downtime: Vec<LatencySummary>,
    /// Everything counted, per repeat.
    changes: Vec<Change>,
}

impl PhaseFigures {
    fn push(&mut self, m: &Measured) {
        let add = |s: &mut Series, v: f64| {
            let mut values = std::mem::take(&mut s.values_ms);
            values.push(v);
            *s = Series::from_ms(values);
        };
        add(&mut self.subject, m.change.subject_ms);
        add(&mut self.all_owned, m.change.all_owned_ms);
        add(&mut self.settled, m.change.settled_ms);
        self.heartbeats.push(m.heartbeats);
        self.downtime.push(m.downtime);
        self.changes.push(m.change.clone());
    }
}

#[derive(Debug, Serialize)]
struct Side {
    protocol: Protocol,
    /// How the members behave.
    members_are: String,
    heartbeat_interval_ms: u64,
    formation: Series,
    baseline_heartbeats: Vec<LatencySummary>,
    join: PhaseFigures,
    leave: Option<PhaseFigures>,
    /// The server's state for the group after each change (consumer only).
    server_states: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Figures {
    scenario: &'static str,
    members: usize,
    partitions: i32,
    repeats: usize,
    connections: usize,
    topic: String,
    sides: Vec<Side>,
}

pub async fn run(common: &Common, opts: &Options) -> Result<Report> {
    let members = opts.members.max(1);
    let connections = opts
        .connections
        .unwrap_or_else(|| members.div_ceil(50))
        .clamp(1, members + 1);
    let conns = connect_many(common.addr, connections, CLIENT_ID).await?;
    // One topic per partition count, shared by both protocols (and with `rebalance`).
    let topic = format!("bench-t{}", opts.partitions);
    create_topic(&conns, &topic, opts.partitions).await?;
    let mut sides: Vec<Side> = opts
        .protocols
        .iter()
        .map(|&protocol| Side {
            protocol,
            members_are: match protocol {
                Protocol::Classic => {
                    "eager classic members: JoinGroup/SyncGroup, the leader assigns round-robin; \
                     on a rebalance each gives up everything before rejoining"
                        .to_owned()
                }
                Protocol::Consumer => format!(
                    "consumer-protocol members (KIP-848), server assignor {}: heartbeat at the \
                     server's interval, report owned partitions, revoke before taking",
                    opts.assignor
                ),
            },
            heartbeat_interval_ms: 0,
            formation: Series::default(),
            baseline_heartbeats: Vec::new(),
            join: PhaseFigures::default(),
            leave: (!opts.no_leave).then(PhaseFigures::default),
            server_states: Vec::new(),
        })
        .collect();
    let mut text = String::new();
    let mut formation: Vec<Vec<f64>> = vec![Vec::new(); sides.len()];
    for repeat in 0..opts.repeats.max(1) {
        for (k, side) in sides.iter_mut().enumerate() {
            let name = side.protocol.name();
            let base = format!("{}-j{repeat}-{name}", common.run_id);
            let group_id = super::local_group_id(common, &base).await?;
            let run = match side.protocol {
                Protocol::Classic => classic::run_once(&conns, opts, &group_id, &topic).await?,
                Protocol::Consumer => consumer::run_once(&conns, opts, &group_id, &topic).await?,
            };
            text.push_str(&format!(
                "repeat {repeat} {name:<8}: formed in {:.0} ms; join: newcomer owns its share {:.1} ms, all owned {:.1} ms, settled {:.1} ms, {} stopped / {} moved, {} of {} others lost a partition, {} acted",
                run.formation_ms,
                run.join.change.subject_ms,
                run.join.change.all_owned_ms,
                run.join.change.settled_ms,
                run.join.change.stopped,
                run.join.change.moved,
                run.join.change.others_lost,
                run.join.change.others,
                run.join.change.others_acted,
            ));
            if let Some(leave) = &run.leave {
                text.push_str(&format!(
                    "; leave: all owned {:.1} ms, settled {:.1} ms, {} stopped / {} moved, {} lost, {} acted",
                    leave.change.all_owned_ms,
                    leave.change.settled_ms,
                    leave.change.stopped,
                    leave.change.moved,
                    leave.change.others_lost,
                    leave.change.others_acted,
                ));
            }
            text.push('\n');
            side.heartbeat_interval_ms = run.interval_ms;
            if let Some(values) = formation.get_mut(k) {
                values.push(run.formation_ms);
                side.formation = Series::from_ms(values.clone());
            }
            side.baseline_heartbeats.push(run.baseline);
            side.join.push(&run.join);
            if let (Some(figures), Some(leave)) = (side.leave.as_mut(), &run.leave) {
                figures.push(leave);
            }
            side.server_states.extend(run.server_states);
        }
    }
    let figures = Figures {
        scenario: "join-one",
        members,
        partitions: opts.partitions,
        repeats: opts.repeats.max(1),
        connections,
        topic,
        sides,
    };
    text.push_str(&summary(&figures));
    Ok(Report::new(text, &figures))
}

/// A random moment within `interval` (to start a change at): the change's timing against the
/// members' heartbeats is then as arbitrary as a real newcomer's or leaver's, not tied to how
/// the scenario spaced its steps.
fn random_offset(interval: Duration) -> Result<Duration> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no OS randomness: {e}"))?;
    let fraction = (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64;
    Ok(interval.mul_f64(fraction))
}

async fn create_topic(conns: &[crate::client::Conn], topic: &str, partitions: i32) -> Result<()> {
    use muster_protocol::{CreateTopicsRequest, ErrorCode, Response, TopicInfo};
    let Some(conn) = conns.first() else {
        bail!("no connection");
    };
    let answer = conn
        .call(CreateTopicsRequest {
            topics: vec![TopicInfo {
                topic: topic.to_owned(),
                partitions,
            }],
        })
        .await?;
    match answer {
        // INVALID_PARTITIONS: there already, with more partitions (the name says how many
        // this run created; an operator could have raised it).
        Response::CreateTopics(r)
            if r.results.iter().all(|t| {
                t.error_code == ErrorCode::None.code()
                    || t.error_code == ErrorCode::InvalidPartitions.code()
            }) =>
        {
            Ok(())
        }
        other => bail!("CreateTopics answered {other:?}"),
    }
}

/// `median [min–max]` of counts over repeats.
fn counts(values: impl Iterator<Item = usize>) -> String {
    let mut v: Vec<usize> = values.collect();
    v.sort_unstable();
    match (v.first(), v.last()) {
        (Some(lo), Some(hi)) if lo == hi => format!("{lo}"),
        (Some(lo), Some(hi)) => format!("{} [{lo}–{hi}]", v[(v.len() - 1) / 2]),
        _ => "-".to_owned(),
    }
}

fn series(s: &Series) -> String {
    format!("p50 {:.1} max {:.1} ms", s.p50_ms, s.max_ms)
}

/// Median of the repeats' p50s, the largest p99 and max.
fn latencies(v: &[LatencySummary]) -> String {
    if v.is_empty() {
        return "-".to_owned();
    }
    let mut p50: Vec<f64> = v.iter().map(|s| s.p50_us).collect();
    p50.sort_by(f64::total_cmp);
    let p99 = v.iter().map(|s| s.p99_us).fold(0.0, f64::max);
    let max = v.iter().map(|s| s.max_us).fold(0.0, f64::max);
    let n: u64 = v.iter().map(|s| s.count).sum();
    format!(
        "p50 {} p99 {} max {} (n={n})",
        crate::stats::fmt_us(p50[(p50.len() - 1) / 2]),
        crate::stats::fmt_us(p99),
        crate::stats::fmt_us(max)
    )
}

/// Which change of a side a table section shows.
type PickPhase = fn(&Side) -> Option<&PhaseFigures>;

/// The side-by-side table.
fn summary(f: &Figures) -> String {
    let mut out = format!(
        "join-one: {} members on {} partitions (topic {}), then one joins and one that was there leaves; {} repeats over {} connections\n",
        f.members, f.partitions, f.topic, f.repeats, f.connections
    );
    for side in &f.sides {
        out.push_str(&format!(
            "  {}: {}; heartbeat interval {} ms; formation {}\n",
            side.protocol.name(),
            side.members_are,
            side.heartbeat_interval_ms,
            series(&side.formation)
        ));
        if side.server_states.iter().any(|s| s != "Stable") {
            out.push_str(&format!(
                "  {}: the server's state after the changes: {:?}\n",
                side.protocol.name(),
                side.server_states
            ));
        }
    }
    let row = |out: &mut String, label: &str, cells: Vec<String>| {
        out.push_str(&format!("  {label:<46}"));
        for cell in cells {
            out.push_str(&format!(" | {cell:<48}"));
        }
        out.push('\n');
    };
    let phases: [(&str, PickPhase); 2] = [
        ("one joins", |s| Some(&s.join)),
        ("one leaves", |s| s.leave.as_ref()),
    ];
    for (title, pick) in phases {
        let sides: Vec<(&Side, &PhaseFigures)> = f
            .sides
            .iter()
            .filter_map(|s| pick(s).map(|p| (s, p)))
            .collect();
        if sides.is_empty() {
            continue;
        }
        row(
            &mut out,
            title,
            sides
                .iter()
                .map(|(s, _)| s.protocol.name().to_owned())
                .collect(),
        );
        let each = |g: &dyn Fn(&Side, &PhaseFigures) -> String| -> Vec<String> {
            sides.iter().map(|(s, p)| g(s, p)).collect()
        };
        if title == "one joins" {
            row(
                &mut out,
                "newcomer: first request → owns its share",
                each(&|s, p| {
                    let target = s.heartbeat_interval_ms as f64 + 20.0;
                    let met = if p.subject.max_ms <= target {
                        "met"
                    } else {
                        "missed"
                    };
                    format!("{} (target ≤ {target:.0}: {met})", series(&p.subject))
                }),
            );
        }
        row(
            &mut out,
            "start → every partition owned again",
            each(&|_, p| series(&p.all_owned)),
        );
        row(
            &mut out,
            "start → settled",
            each(&|_, p| series(&p.settled)),
        );
        row(
            &mut out,
            "partitions stopped / moved",
            each(&|_, p| {
                format!(
                    "{} / {}",
                    counts(p.changes.iter().map(|c| c.stopped)),
                    counts(p.changes.iter().map(|c| c.moved))
                )
            }),
        );
        row(
            &mut out,
            "partitions stopped that did not move",
            each(&|_, p| counts(p.changes.iter().map(|c| c.stopped_not_moved))),
        );
        row(
            &mut out,
            "stop → owned again (each stop)",
            each(&|_, p| latencies(&p.downtime)),
        );
        row(
            &mut out,
            "others that lost any partition",
            each(&|_, p| {
                format!(
                    "{} of {}",
                    counts(p.changes.iter().map(|c| c.others_lost)),
                    counts(p.changes.iter().map(|c| c.others))
                )
            }),
        );
        row(
            &mut out,
            "others that did more than heartbeat",
            each(&|_, p| counts(p.changes.iter().map(|c| c.others_acted))),
        );
        row(
            &mut out,
            "others giving / taking moved partitions",
            each(&|_, p| {
                format!(
                    "{} / {}",
                    counts(p.changes.iter().map(|c| c.donors)),
                    counts(p.changes.iter().map(|c| c.receivers))
                )
            }),
        );
        row(
            &mut out,
            "uninvolved others that lost / acted",
            each(&|_, p| {
                format!(
                    "{} / {}",
                    counts(p.changes.iter().map(|c| c.uninvolved_lost)),
                    counts(p.changes.iter().map(|c| c.uninvolved_acted))
                )
            }),
        );
        row(
            &mut out,
            "others' heartbeats during the change",
            each(&|_, p| latencies(&p.heartbeats)),
        );
        row(
            &mut out,
            "overlaps (two owners) / unowned at the end",
            each(&|_, p| {
                format!(
                    "{} / {}",
                    p.changes.iter().map(|c| c.overlaps).sum::<usize>(),
                    p.changes.iter().map(|c| c.unowned_at_end).sum::<usize>()
                )
            }),
        );
    }
    row(
        &mut out,
        "baseline heartbeats (before the join)",
        f.sides
            .iter()
            .map(|s| latencies(&s.baseline_heartbeats))
            .collect(),
    );
    out
}
