//! Zombie commits with real processes (issue #22's acceptance criterion): workers A and B
//! share a topic through a real `musterd` over TCP, committing every 50 ms. A is SIGSTOPped
//! past its 1.5 s session: the server removes it, B takes every partition over and commits
//! past A's offsets. Then A is SIGCONTed, still believing it owns its partitions. Once with
//! the classic protocol and once with the consumer protocol.
//!
//! The zombie commit is not left to chance. On SIGCONT both the worker's commit timer (long
//! overdue) and its membership's heartbeat timer have expired; the worker's single-threaded
//! runtime polls both tasks in the same round, so the commit is built from the membership A had
//! before the pause (its member id and generation, or member epoch) and sent before the answer
//! to the heartbeat, the only way A can learn it was removed, can be read. The server no
//! longer knows that member and refuses the commit on every partition with UNKNOWN_MEMBER_ID:
//! that is the path exercised (the test accepts the other stale-member codes and
//! PARTITION_NOT_OWNED, and prints which it saw). The worker logs the refusal to stderr, then
//! its heartbeat's answer makes it drop the partitions (`lost`) and rejoin.
//!
//! Checked:
//! - the server removed A after it stopped, and B took A's partitions only after that;
//! - A's stderr names the refusal (asserted: it is deterministic, as above);
//! - the new owner's offsets are intact: the group's committed offsets of A's former
//!   partitions, sampled every ~20 ms from before the pause to the end, never go down and are
//!   never below an offset a worker had logged as acknowledged (B commits `MARGIN` past A's
//!   offsets before A resumes, so a zombie commit that got through would show as a drop); and
//!   the server's offset history of those partitions (every write, kept whole here) never goes
//!   down and holds no write but B's from B's takeover until it gave them back;
//! - A logged no acknowledged commit of a partition while B owned it, but for the answer to a
//!   commit sent just before the pause and read just after it, which the history shows the
//!   server wrote before B took the partition;
//! - A did believe it owned them while B did (its own log overlaps B's: it was a zombie, and
//!   those are the only overlaps), and it logged them `lost` after the resume; the two then
//!   share the topic again, and no acknowledged commit was lost (the fleet's check).
#![allow(clippy::unwrap_used)]

mod fleet;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fleet::{fetch_offsets, now_us, Fleet, Interval, Kind};
use muster_client::TopicPartition;
use muster_protocol::OffsetHistoryEntry;

const TOPIC: &str = "jobs";
const PARTITIONS: i32 = 6;
const SESSION_MS: &str = "1500";
const COMMIT_MS: &str = "50";
/// How far past A's last acknowledged offset of a partition B must have committed before A
/// resumes: a zombie commit (A's position plus the few ticks it bursts through on resume)
/// that got through would then move the offset back.
const MARGIN: i64 = 10;
/// Offset history entries kept per partition: more than a run writes, so that it is whole.
const HISTORY: usize = 10_000;
const PATIENCE: Duration = Duration::from_secs(30);
/// How far the server's history stamps may be from the wall clock the workers stamp their
/// lines with: they are ms since a reading of it at start-up, advanced by a monotonic clock
/// (two truncations to ms, and whatever the wall clock was slewed since). A zombie's write
/// lands right after the resume, far inside B's tenure, which ends only after A has rejoined.
const SERVER_CLOCK_SLACK_US: u64 = 5_000;
/// What a commit from a member that missed a rebalance may be answered.
const REFUSALS: [&str; 5] = [
    "UNKNOWN_MEMBER_ID",
    "ILLEGAL_GENERATION",
    "FENCED_MEMBER_EPOCH",
    "STALE_MEMBER_EPOCH",
    "PARTITION_NOT_OWNED",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_worker_resumed_after_missing_a_rebalance_is_refused_and_the_new_owners_offsets_stand(
) {
    zombie("classic").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_protocol_worker_resumed_after_missing_a_rebalance_is_refused_and_the_new_owners_offsets_stand(
) {
    zombie("consumer").await;
}

async fn zombie(protocol: &str) {
    fleet::bins(); // Built (or found up to date) before the clock starts.
    let t0 = Instant::now();
    let history_entries = HISTORY.to_string();
    let mut fleet = Fleet::new(
        &format!("zombie-{protocol}"),
        &[
            "--min-session-timeout-ms",
            "100",
            "--initial-rebalance-delay-ms",
            "0",
            "--consumer-heartbeat-interval-ms",
            "200",
            "--consumer-session-timeout-ms",
            SESSION_MS,
            "--offset-history-entries",
            &history_entries,
            "--offset-history-bytes",
            "8388608",
        ],
        TOPIC,
        PARTITIONS,
    );
    // A consumer-protocol member's session is the server's; a classic one asks for its own
    // (and heartbeats every third of it).
    fleet.worker_flags = ["--commit-interval-ms", COMMIT_MS]
        .map(str::to_owned)
        .to_vec();
    if protocol == "classic" {
        fleet
            .worker_flags
            .extend(["--session-timeout-ms".to_owned(), SESSION_MS.to_owned()]);
    }
    let admin = fleet.admin().await;
    admin.create_topic(TOPIC, PARTITIONS).await.unwrap();
    fleet.start_worker("A", protocol, &[]);
    fleet.start_worker("B", protocol, &[]);
    let group = fleet.wait_settled(&admin, PATIENCE).await;
    fleet.wait_commits_after(now_us(), PATIENCE).await;
    let a_member = group
        .members
        .iter()
        .find(|m| m.client_id == "A")
        .map(|m| m.member_id.clone())
        .unwrap();

    let sampler = Sampler::start(&fleet).await;
    let paused_at = fleet.pause("A");
    let t_paused = t0.elapsed();
    // A's log is frozen now: what it owns and the last offsets it was told were committed.
    let a_owned = fleet.owned_by_logs()["A"].clone();
    assert!(!a_owned.is_empty(), "A owns nothing");
    let a_acked = best_commits(&fleet, "A");
    assert!(
        refusals(&fleet.worker("A").stderr_text()).is_empty(),
        "A had commits refused before the pause:\n{}",
        fleet.worker("A").stderr_text()
    );

    // The server removes A when its session expires; B takes everything over and commits
    // well past A's offsets.
    let all = fleet.all_partitions();
    wait_until(&mut fleet, |fleet| {
        let b_owned = &fleet.owned_by_logs()["B"];
        if b_owned != &all {
            return Some(format!(
                "B owns {} of {PARTITIONS} partitions",
                b_owned.len()
            ));
        }
        let b_acked = best_commits(fleet, "B");
        let behind: Vec<String> = a_owned
            .iter()
            .filter(|tp| b_acked.get(*tp).copied().unwrap_or(-1) < a_acked[*tp] + MARGIN)
            .map(|tp| format!("{tp}: A {}, B {:?}", a_acked[tp], b_acked.get(tp)))
            .collect();
        (!behind.is_empty()).then(|| format!("B not {MARGIN} past A's offsets: {behind:?}"))
    })
    .await;
    let resumed_at = fleet.resume("A");
    let t_resumed = t0.elapsed();

    // A commits what it thinks it owns (refused), hears it was removed, drops its partitions.
    wait_until(&mut fleet, |fleet| {
        let a = fleet.worker("A");
        if refusals(&a.stderr_text()).is_empty() {
            return Some(format!(
                "A's stderr names no refused commit:\n{}",
                a.stderr_text()
            ));
        }
        let lost: BTreeSet<TopicPartition> = a
            .own_lines()
            .into_iter()
            .filter(|l| l.kind == Kind::Lost && l.at_us > resumed_at)
            .flat_map(|l| l.partitions.into_iter().map(|(tp, _)| tp))
            .collect();
        (!lost.is_superset(&a_owned))
            .then(|| format!("A lost {lost:?} since the resume, owned {a_owned:?}"))
    })
    .await;
    // Then it rejoins, and both work on.
    fleet.wait_settled(&admin, PATIENCE).await;
    fleet.wait_commits_after(now_us(), PATIENCE).await;
    let samples = sampler.finish().await;
    let a_refusals = refusals(&fleet.worker("A").stderr_text());
    fleet.stop_all().await;
    let fetched = fetch_offsets(&admin, &fleet.group).await;
    let history = fleet.history();

    // The server removed A while it was stopped, and B took its partitions after that.
    let removals = fleet.server.removals();
    let removed_at = *removals
        .get(&a_member)
        .unwrap_or_else(|| panic!("the server never removed A ({a_member}): {removals:?}"));
    assert!(
        paused_at < removed_at && removed_at < resumed_at,
        "A ({a_member}) removed at {removed_at}, paused {paused_at}..{resumed_at}"
    );
    let takeovers: BTreeMap<&TopicPartition, &Interval> = history
        .intervals
        .iter()
        .filter(|i| i.worker == "B" && a_owned.contains(&i.tp))
        .filter(|i| paused_at < i.from_us && i.from_us < resumed_at)
        .map(|i| (&i.tp, i))
        .collect();
    for tp in &a_owned {
        let took = takeovers
            .get(tp)
            .unwrap_or_else(|| panic!("{tp}: B did not take it while A was stopped"));
        assert!(
            took.from_us > removed_at,
            "{tp}: B took it at {}, before A's removal at {removed_at}",
            took.from_us
        );
    }

    // A's only overlaps with B are its beliefs as a zombie, ended by its `lost` line.
    let overlaps = history.overlaps();
    for (a, b) in &overlaps {
        assert!(
            a.worker == "A"
                && b.worker == "B"
                && a_owned.contains(&a.tp)
                && a.from_us < paused_at
                && a.to_us > resumed_at,
            "an overlap that is not A's zombie tenure: {a:?} and {b:?}"
        );
    }
    let zombie: BTreeSet<&TopicPartition> = overlaps.iter().map(|(a, _)| &a.tp).collect();
    assert_eq!(
        zombie,
        a_owned.iter().collect::<BTreeSet<_>>(),
        "A's zombie beliefs"
    );

    // The server's history of A's former partitions.
    let mut written: BTreeMap<&TopicPartition, Vec<OffsetHistoryEntry>> = BTreeMap::new();
    for tp in &a_owned {
        let mut answer = admin
            .offset_history(&fleet.group, Some(TOPIC), Some(tp.partition), 0)
            .await
            .unwrap();
        assert_eq!(answer.omitted, 0, "{tp}: history cut at the answer's cap");
        let mut entries = answer.topics.remove(0).partitions.remove(0).entries;
        assert!(entries.len() < HISTORY, "{tp}: history trimmed");
        entries.reverse(); // Oldest first.
        for pair in entries.windows(2) {
            assert!(
                pair[1].offset >= pair[0].offset,
                "{tp}: the offset went back: {:?} then {:?}",
                pair[0],
                pair[1]
            );
        }
        // B's takeover: nobody else wrote while it owned the partition.
        let tenure = takeovers[tp];
        let during = |e: &&OffsetHistoryEntry| {
            let at_us = e.committed_at_ms * 1000;
            tenure.from_us + SERVER_CLOCK_SLACK_US <= at_us
                && at_us + SERVER_CLOCK_SLACK_US <= tenure.to_us
        };
        let intruders: Vec<_> = entries
            .iter()
            .filter(during)
            .filter(|e| e.client_id != "B")
            .collect();
        assert!(
            intruders.is_empty(),
            "{tp}: written by others while B owned it ({}..{}): {intruders:?}",
            tenure.from_us,
            tenure.to_us
        );
        written.insert(tp, entries);
    }

    // A's acknowledged commits while B owned a partition: only the answer to one sent before
    // the pause, which the server wrote before B took the partition.
    let mut late_answers = 0;
    for commit in history.commits.iter().filter(|c| c.worker == "A") {
        let Some(tenure) = history.intervals.iter().find(|i| {
            i.worker == "B"
                && i.tp == commit.tp
                && i.from_us < commit.at_us
                && commit.at_us < i.to_us
        }) else {
            continue;
        };
        let before = written.get(&commit.tp).and_then(|entries| {
            entries.iter().find(|e| {
                e.client_id == "A"
                    && e.offset == commit.offset
                    && e.committed_at_ms * 1000 < tenure.from_us
            })
        });
        assert!(
            before.is_some(),
            "{}: A logged {} acknowledged at {} while B owned it (from {}), and the server did \
             not write it before; A's writes: {:?}",
            commit.tp,
            commit.offset,
            commit.at_us,
            tenure.from_us,
            written.get(&commit.tp).map(|entries| entries
                .iter()
                .filter(|e| e.client_id == "A")
                .collect::<Vec<_>>())
        );
        late_answers += 1;
    }

    // The group's offsets as sampled: never down, never below an acknowledged commit.
    let mut previous: BTreeMap<&TopicPartition, i64> = BTreeMap::new();
    let mut during_pause = 0;
    for sample in &samples {
        if paused_at < sample.sent_us && sample.sent_us < resumed_at {
            during_pause += 1;
        }
        for tp in &a_owned {
            let offset = *sample
                .offsets
                .get(tp)
                .unwrap_or_else(|| panic!("{tp}: no committed offset at {}", sample.sent_us));
            if let Some(&before) = previous.get(tp) {
                assert!(
                    offset >= before,
                    "{tp}: the group's offset went from {before} to {offset} (fetched at {})",
                    sample.sent_us
                );
            }
            previous.insert(tp, offset);
            let acked = history
                .commits
                .iter()
                .filter(|c| &c.tp == tp && c.at_us < sample.sent_us)
                .max_by_key(|c| c.offset);
            if let Some(c) = acked {
                assert!(
                    offset >= c.offset,
                    "{tp}: the group's offset was {offset} at {}, below the {} acknowledged to {} \
                     at {}",
                    sample.sent_us,
                    c.offset,
                    c.worker,
                    c.at_us
                );
            }
        }
    }
    assert!(during_pause > 0, "no sample while A was stopped");
    history.assert_no_commit_lost(&all, &fetched);

    eprintln!(
        "{protocol}: A paused at {t_paused:?} owning {} partitions, resumed at {t_resumed:?} \
         ({} ms stopped, removed after {} ms); {} refused commits, e.g. {:?}; {late_answers} \
         offsets acknowledged after the resume to a commit sent before the pause; {} samples ({during_pause} while stopped); \
         done in {:?}",
        a_owned.len(),
        (resumed_at - paused_at) / 1000,
        (removed_at - paused_at) / 1000,
        a_refusals.len(),
        a_refusals.first(),
        samples.len(),
        t0.elapsed()
    );
}

/// The highest offset `worker` logged as acknowledged, per partition.
fn best_commits(fleet: &Fleet, worker: &str) -> BTreeMap<TopicPartition, i64> {
    let mut best = BTreeMap::new();
    for line in fleet.worker(worker).own_lines() {
        if line.kind != Kind::Committed {
            continue;
        }
        for (tp, offset) in line.partitions {
            let offset = offset.expect("committed lines carry offsets");
            let entry = best.entry(tp).or_insert(offset);
            *entry = (*entry).max(offset);
        }
    }
    best
}

/// The lines of a worker's stderr reporting a commit the server refused, naming the code.
fn refusals(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains("commit failed") || l.contains("not the owner of"))
        .filter(|l| REFUSALS.iter().any(|code| l.contains(code)))
        .map(str::to_owned)
        .collect()
}

/// Waits until `why_not` has nothing to say, failing with what it last said after
/// `PATIENCE`; every worker must stay alive meanwhile.
async fn wait_until(fleet: &mut Fleet, mut why_not: impl FnMut(&Fleet) -> Option<String>) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        fleet.assert_alive();
        match why_not(fleet) {
            None => return,
            Some(why) => assert!(Instant::now() < deadline, "after {PATIENCE:?}: {why}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The group's committed offsets, fetched over and over in the background.
struct Sampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<Sample>>,
}

struct Sample {
    /// When the fetch was sent (µs): it sees every commit acknowledged before.
    sent_us: u64,
    offsets: BTreeMap<TopicPartition, i64>,
}

impl Sampler {
    async fn start(fleet: &Fleet) -> Sampler {
        let admin = fleet.admin().await;
        let group = fleet.group.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let mut samples = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                let sent_us = now_us();
                let offsets = fetch_offsets(&admin, &group).await;
                samples.push(Sample { sent_us, offsets });
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            samples
        });
        Sampler { stop, task }
    }

    async fn finish(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("the sampler's fetches succeeded")
    }
}
