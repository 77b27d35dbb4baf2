//! Chaos on the consumer protocol (issue #21, "Done when"): 50 `worker` processes on the
//! consumer protocol share a 500-partition topic through a real `musterd`, committing a rising
//! offset per partition; 5 are SIGKILLed and 10 more start at the same moment. Once the group
//! is Stable again, the workers' own wall-clock logs must show that no partition ever had two
//! owners (a killed worker owns its partitions until its death, and they move only after the
//! server removed it), and the group's final offsets that no acknowledged commit was lost.
//!
//! Heartbeats every 200 ms and a 2 s session keep it well under a minute.
#![allow(clippy::unwrap_used)]

mod fleet;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use fleet::{fetch_offsets, flatten, now_us, Fleet};
use muster_client::TopicPartition;

const TOPIC: &str = "jobs";
const PARTITIONS: i32 = 500;
const SESSION_MS: u64 = 2000;
const PATIENCE: Duration = Duration::from_secs(30);

fn server_flags() -> Vec<String> {
    [
        "--consumer-heartbeat-interval-ms",
        "200",
        "--consumer-session-timeout-ms",
        &SESSION_MS.to_string(),
        "--initial-rebalance-delay-ms",
        "0",
        "--min-session-timeout-ms",
        "100",
    ]
    .map(str::to_owned)
    .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_workers_lose_five_to_sigkill_and_gain_ten_yet_no_partition_has_two_owners_and_no_commit_is_lost(
) {
    fleet::bins(); // Built (or found up to date) before the clock starts.
    let t0 = Instant::now();
    let flags = server_flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut fleet = Fleet::new("consumer-chaos", &flags, TOPIC, PARTITIONS);
    fleet.worker_flags = ["--commit-interval-ms", "250"].map(str::to_owned).to_vec();
    let admin = fleet.admin().await;
    admin.create_topic(TOPIC, PARTITIONS).await.unwrap();

    for i in 1..=50 {
        fleet.start_worker(&format!("w{i:02}"), "consumer", &[]);
    }
    fleet.wait_settled(&admin, PATIENCE).await;
    let before = fleet.describe_consumer(&admin).await;
    assert_consumer_stable(&before, 50);
    let t_formed = t0.elapsed();
    // Every worker has committed what it owns, so a victim's offsets are there to lose.
    fleet.wait_commits_after(now_us(), PATIENCE).await;

    // The victims, and their member ids (to find their removal in the server's log).
    let victims = ["w03", "w13", "w23", "w33", "w43"];
    let member_of: BTreeMap<&str, &str> = before
        .members
        .iter()
        .map(|m| (m.client_id.as_str(), m.member_id.as_str()))
        .collect();
    let mut killed: BTreeMap<&str, u64> = BTreeMap::new();
    for victim in victims {
        killed.insert(victim, fleet.kill(victim));
    }
    for i in 51..=60 {
        fleet.start_worker(&format!("w{i:02}"), "consumer", &[]);
    }
    let t_chaos = t0.elapsed();
    fleet.wait_settled(&admin, PATIENCE).await;
    let after = fleet.describe_consumer(&admin).await;
    assert_consumer_stable(&after, 55);
    assert!(after.group_epoch > before.group_epoch, "{after:#?}");
    let t_settled = t0.elapsed();

    // The server removed each victim (session expiry), after it died.
    let removals = fleet.server.removals();
    let mut removed_at = BTreeMap::new();
    for (victim, died) in &killed {
        let member_id = member_of[victim];
        let at = *removals.get(member_id).unwrap_or_else(|| {
            panic!("the server never removed {victim} ({member_id}): {removals:?}")
        });
        assert!(
            at > *died,
            "{victim} removed at {at}, before it was killed at {died}"
        );
        removed_at.insert(*victim, at);
    }

    // A little more work in the new shape, then everyone stops cleanly.
    fleet.wait_commits_after(now_us(), PATIENCE).await;
    fleet.stop_all().await;
    let fetched = fetch_offsets(&admin, &fleet.group).await;
    let history = fleet.history();

    history.assert_single_ownership();
    history.assert_no_commit_lost(&fleet.all_partitions(), &fetched);
    assert!(
        history.lost.is_empty(),
        "survivors lost partitions (fenced): {:#?}",
        history.lost
    );
    // What each victim owned when it died went to others only after the server had removed
    // it (and, by the check above, at a position no lower than what the victim committed).
    let mut moved = 0;
    let died_owning: Vec<_> = history.intervals.iter().filter(|i| i.killed).collect();
    for victim in victims {
        assert!(
            died_owning.iter().any(|i| i.worker == victim),
            "{victim} owned nothing when killed"
        );
    }
    for held in &died_owning {
        let victim = held.worker.as_str();
        let next = history
            .starts
            .iter()
            .filter(|s| s.tp == held.tp && s.at_us > held.to_us)
            .min_by_key(|s| s.at_us)
            .unwrap_or_else(|| panic!("{}: nobody took it after {victim} died", held.tp));
        assert!(
            next.at_us > removed_at[victim],
            "{}: {victim}'s partition went to {} at {}, before the server removed {victim} at {}",
            held.tp,
            next.worker,
            next.at_us,
            removed_at[victim]
        );
        moved += 1;
    }
    assert!(history.handovers_with_commits() > 0);
    eprintln!(
        "50 workers formed the group in {t_formed:?}; chaos at {t_chaos:?}; settled at \
         {t_settled:?}; {} ownership intervals, {} acknowledged commits, {moved} takeovers of \
         killed workers' partitions; done in {:?}",
        history.intervals.len(),
        history.commits.len(),
        t0.elapsed()
    );
}

/// The smallest case of what the test above found: a lone consumer-protocol worker is
/// SIGKILLed (no revocation was ever pending in its group, so no other timer of the group is
/// armed) and another one joins. The dead member must be removed when its 2 s session
/// expires, and its partitions go to the newcomer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_consumer_member_is_removed_when_its_session_expires() {
    fleet::bins();
    let flags = server_flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut fleet = Fleet::new("consumer-expiry", &flags, TOPIC, 8);
    fleet.worker_flags = ["--commit-interval-ms", "100"].map(str::to_owned).to_vec();
    let admin = fleet.admin().await;
    admin.create_topic(TOPIC, 8).await.unwrap();
    fleet.start_worker("lone", "consumer", &[]);
    fleet.wait_settled(&admin, PATIENCE).await;
    let member_id = fleet.describe_consumer(&admin).await.members[0]
        .member_id
        .clone();
    fleet.wait_commits_after(now_us(), PATIENCE).await;
    let died = fleet.kill("lone");
    fleet.start_worker("heir", "consumer", &[]);
    // Five sessions: plenty for the server to notice.
    fleet
        .wait_settled(&admin, Duration::from_millis(5 * SESSION_MS))
        .await;
    let removed = fleet.server.removals();
    assert!(
        removed.get(&member_id).is_some_and(|at| *at > died),
        "{member_id} (killed at {died}) removed: {removed:?}"
    );
    fleet.stop_all().await;
    let fetched = fetch_offsets(&admin, &fleet.group).await;
    let history = fleet.history();
    history.assert_single_ownership();
    history.assert_no_commit_lost(&fleet.all_partitions(), &fetched);
}

/// ConsumerGroupDescribe agrees: Stable, `members` members each at the target, which covers
/// the topic once.
fn assert_consumer_stable(group: &muster_protocol::DescribedConsumerGroup, members: usize) {
    assert_eq!(group.error_code, 0, "{group:#?}");
    assert_eq!(group.state, "Stable", "{group:#?}");
    assert_eq!(group.members.len(), members, "{group:#?}");
    assert_eq!(group.assignment_epoch, group.group_epoch, "{group:#?}");
    let mut seen = BTreeSet::new();
    for member in &group.members {
        let owned: BTreeSet<TopicPartition> = flatten(&member.assignment).collect();
        let target: BTreeSet<TopicPartition> = flatten(&member.target_assignment).collect();
        assert_eq!(owned, target, "{} is not at its target", member.client_id);
        assert_eq!(
            member.member_epoch, group.group_epoch,
            "{} at epoch {}",
            member.client_id, member.member_epoch
        );
        for tp in owned {
            assert!(seen.insert(tp), "{} twice", member.client_id);
        }
    }
    assert_eq!(seen.len(), PARTITIONS as usize);
    // Uniform: 500 over 50 or 55 members, balanced within one.
    let sizes: Vec<usize> = group
        .members
        .iter()
        .map(|m| flatten(&m.assignment).count())
        .collect();
    let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
    assert!(max - min <= 1, "unbalanced: {sizes:?}");
}
