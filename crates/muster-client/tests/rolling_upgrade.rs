//! A rolling upgrade of a running fleet (issue #21, "Migration"), against a real `musterd`:
//! six classic `worker` processes share a topic and commit; one at a time, a classic worker is
//! stopped (SIGTERM: it commits, gives its partitions up and leaves) and a consumer-protocol
//! worker takes its place, the group settling after each step (the first one upgrades the
//! classic group online); then the same back to classic (the last consumer-protocol member
//! leaving downgrades the group). The workers' own wall-clock logs must show that no partition
//! ever had two owners, the final offsets that no acknowledged commit was lost, and the group
//! must end classic: Stable, with a leader and the classic assignor, unknown to
//! ConsumerGroupDescribe.
//!
//! Once with the cooperative-sticky assignor and once with an eager one (range).
#![allow(clippy::unwrap_used)]

mod fleet;

use std::time::{Duration, Instant};

use fleet::{fetch_offsets, now_us, Fleet};
use muster_protocol::ErrorCode;

const TOPIC: &str = "jobs";
const PARTITIONS: i32 = 24;
const FLEET: usize = 6;
const PATIENCE: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cooperative_sticky_fleet_upgrades_one_worker_at_a_time_and_rolls_back() {
    rolling_upgrade("cooperative-sticky").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eager_range_fleet_upgrades_one_worker_at_a_time_and_rolls_back() {
    rolling_upgrade("range").await;
}

async fn rolling_upgrade(assignor: &str) {
    fleet::bins(); // Built (or found up to date) before the clock starts.
    let t0 = Instant::now();
    let mut fleet = start_fleet(&format!("rolling-{assignor}"), PARTITIONS);
    let classic = ["--assignors", assignor];
    let admin = fleet.admin().await;
    admin.create_topic(TOPIC, PARTITIONS).await.unwrap();

    for i in 1..=FLEET {
        fleet.start_worker(&format!("classic-{i}"), "classic", &classic);
    }
    fleet.wait_settled(&admin, PATIENCE).await;
    assert_classic(&fleet, &admin, assignor).await;
    fleet.wait_commits_after(now_us(), PATIENCE).await;
    let mut steps = vec![("classic fleet", t0.elapsed())];

    // Upgrade, one worker at a time.
    for i in 1..=FLEET {
        fleet.stop(&format!("classic-{i}")).await;
        fleet.start_worker(&format!("consumer-{i}"), "consumer", &[]);
        fleet.wait_settled(&admin, PATIENCE).await;
        let group = fleet.describe_consumer(&admin).await;
        assert_eq!(
            group.error_code, 0,
            "a consumer group after step {i}: {group:#?}"
        );
        assert_eq!(group.state, "Stable", "{group:#?}");
        assert_eq!(group.members.len(), FLEET, "{group:#?}");
        fleet.wait_commits_after(now_us(), PATIENCE).await;
        steps.push(("upgraded one", t0.elapsed()));
    }

    // Roll back, one worker at a time: a consumer group while a consumer-protocol worker
    // remains, classic again once the last one left.
    let mut last_epoch = 0;
    for i in 1..=FLEET {
        fleet.stop(&format!("consumer-{i}")).await;
        fleet.start_worker(&format!("rolled-back-{i}"), "classic", &classic);
        fleet.wait_settled(&admin, PATIENCE).await;
        if i < FLEET {
            let group = fleet.describe_consumer(&admin).await;
            assert_eq!(group.error_code, 0, "still a consumer group: {group:#?}");
            last_epoch = group.group_epoch;
        }
        fleet.wait_commits_after(now_us(), PATIENCE).await;
        steps.push(("rolled back one", t0.elapsed()));
    }
    let classic_again = assert_classic(&fleet, &admin, assignor).await;
    assert!(
        classic_again.generation_id > last_epoch,
        "generation {} reuses the consumer group's epochs (up to {last_epoch})",
        classic_again.generation_id
    );

    fleet.stop_all().await;
    let fetched = fetch_offsets(&admin, &fleet.group).await;
    let history = fleet.history();
    history.assert_single_ownership();
    history.assert_no_commit_lost(&fleet.all_partitions(), &fetched);
    fleet.assert_nothing_lost(&history);
    // Partitions did change hands with committed positions to carry over.
    assert!(history.handovers_with_commits() >= PARTITIONS as usize);
    eprintln!(
        "{assignor}: {} ownership intervals, {} acknowledged commits; steps at {steps:?}; done in {:?}",
        history.intervals.len(),
        history.commits.len(),
        t0.elapsed()
    );
}

/// The smallest case of the downgrade: one classic worker, one consumer-protocol worker that
/// upgrades the group and then leaves. The classic worker is asked to rejoin (the group is
/// classic again) and keeps working: its partitions are never lost, its commits never refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_consumer_member_leaving_downgrades_the_group_without_the_classic_member_losing_its_partitions(
) {
    let mut fleet = start_fleet("downgrade", 4);
    let admin = fleet.admin().await;
    admin.create_topic(TOPIC, 4).await.unwrap();
    let classic = ["--assignors", "cooperative-sticky"];
    fleet.start_worker("classic", "classic", &classic);
    fleet.wait_settled(&admin, PATIENCE).await;
    fleet.start_worker("consumer", "consumer", &[]);
    fleet.wait_settled(&admin, PATIENCE).await;
    let upgraded = fleet.describe_consumer(&admin).await;
    assert_eq!(
        (upgraded.error_code, upgraded.members.len()),
        (0, 2),
        "{upgraded:#?}"
    );
    fleet.wait_commits_after(now_us(), PATIENCE).await;
    fleet.stop("consumer").await;
    fleet.wait_settled(&admin, PATIENCE).await;
    assert_classic(&fleet, &admin, "cooperative-sticky").await;
    fleet.wait_commits_after(now_us(), PATIENCE).await;
    fleet.stop_all().await;
    let fetched = fetch_offsets(&admin, &fleet.group).await;
    let history = fleet.history();
    history.assert_single_ownership();
    history.assert_no_commit_lost(&fleet.all_partitions(), &fetched);
    fleet.assert_nothing_lost(&history);
}

/// A server whose members time out quickly, and workers that commit every 100 ms.
fn start_fleet(test: &str, partitions: i32) -> Fleet {
    let mut fleet = Fleet::new(
        test,
        &[
            "--min-session-timeout-ms",
            "100",
            "--initial-rebalance-delay-ms",
            "0",
            "--consumer-heartbeat-interval-ms",
            "100",
            "--consumer-session-timeout-ms",
            "3000",
        ],
        TOPIC,
        partitions,
    );
    // Classic members heartbeat every 500 ms (a third of the session).
    fleet.worker_flags = [
        "--commit-interval-ms",
        "100",
        "--session-timeout-ms",
        "1500",
    ]
    .map(str::to_owned)
    .to_vec();
    fleet
}

/// The group is classic: DescribeGroups shows it Stable with a leader and the classic
/// assignor, and ConsumerGroupDescribe does not know it.
async fn assert_classic(
    fleet: &Fleet,
    admin: &muster_client::Admin,
    assignor: &str,
) -> muster_protocol::DescribedGroup {
    let group = fleet.describe(admin).await;
    assert_eq!(group.state, "Stable", "{group:#?}");
    assert!(group.generation_id > 0, "{group:#?}");
    assert!(!group.leader_id.is_empty(), "no leader: {group:#?}");
    assert_eq!(group.assignor.as_deref(), Some(assignor), "{group:#?}");
    let consumer = fleet.describe_consumer(admin).await;
    assert_eq!(
        consumer.error_code,
        ErrorCode::GroupIdNotFound.code(),
        "ConsumerGroupDescribe knows a classic group: {consumer:#?}"
    );
    group
}
