//! The cluster compose (deploy/cluster/docker-compose.yml: one etcd, three musterd nodes, three
//! example workers bootstrapping from all three), run for real on a Docker engine
//! (tests/docker): the shards spread over the three nodes; a node's container killed → within
//! the lease TTL and a few seconds every shard is owned by the two survivors, and the group
//! goes on there at the same generation with every committed offset; a node cut off its
//! network → it stops serving, its shards move, and once back on the network it takes a fair
//! share again; the whole cluster taken down (etcd's volume kept) and brought up → groups and
//! offsets are still there; with three etcd members (deploy/cluster/etcd3.yml), the etcd
//! leader's container killed → no node loses its lease, no shard moves, commits go on.
//!
//! Everything is asked with the `muster` CLI inside a node's container (the nodes advertise
//! names that resolve on the compose network only), of the nodes that are up. The lease TTL
//! is 3 s; the workers' session timeout is 6 s.
//!
//! Skipped, saying so, where no engine is reachable; CI and MUSTER_REQUIRE_DOCKER=1 make that
//! a failure.

mod docker;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use docker::group::{stable_with, PARTITIONS};
use docker::{engine, etcd_image, image, json, repo, wait_for, Compose, Engine};
use serde_json::Value;

/// Long enough for a compose step on a loaded 2-core machine; a step normally takes seconds.
const STEP: Duration = Duration::from_secs(120);
/// The lease TTL of the etcd-leader test: the default.
const ETCD_LOSS_TTL: Duration = Duration::from_secs(5);

/// The nodes' lease TTL here (the compose file's default is 5 s).
const TTL: Duration = Duration::from_secs(3);
/// How long after a node's death or cut its shards may take to be owned by the others: the
/// TTL, etcd's expiry and the survivors' claims (milliseconds), and the probes' own `docker
/// exec`s on a loaded machine.
const MOVE: Duration = Duration::from_secs(TTL.as_secs() + 10);

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
/// etcd's members: `etcd` alone, or all three with deploy/cluster/etcd3.yml.
const ETCD_MEMBERS: [&str; 3] = ["etcd", "etcd-2", "etcd-3"];
const WORKERS: [&str; 3] = ["worker-1", "worker-2", "worker-3"];
const GROUP: &str = "demo";
const TOPIC: &str = "orders";

/// The cluster compose under a project of its own, with this checkout's images.
fn cluster(engine: &'static Engine) -> Compose {
    Compose::new(
        engine,
        &repo().join("deploy/cluster/docker-compose.yml"),
        image(),
    )
    .with_env("MUSTER_ETCD_IMAGE", etcd_image())
    .with_env("MUSTER_LEASE_TTL_S", &TTL.as_secs().to_string())
}

/// `muster --json ARGS` inside the container of `live[0]`, bootstrapping from `live` (the
/// nodes that are up: a cut-off one would only cost its connect timeout).
fn cli(compose: &Compose, live: &[&str], args: &[&str]) -> Result<Value, String> {
    let servers = live
        .iter()
        .map(|n| format!("{n}:7450"))
        .collect::<Vec<_>>()
        .join(",");
    let mut argv = vec!["muster", "--json", "--server", &servers];
    argv.extend_from_slice(args);
    json(&compose.exec(live[0], &[], &argv))
}

/// The shards each node owns, as node `at` sees the cluster.
fn view(compose: &Compose, at: &str) -> Result<BTreeMap<String, Vec<u64>>, String> {
    let described = cli(compose, &[at], &["cluster", "describe"])?;
    let shards = described["shards"]
        .as_u64()
        .ok_or_else(|| format!("no shard count: {described}"))?;
    let mut owners = BTreeMap::new();
    let mut owned = Vec::new();
    for node in described["nodes"].as_array().into_iter().flatten() {
        let id = node["node_id"].as_str().unwrap_or_default().to_owned();
        let mine: Vec<u64> = node["shards"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .collect();
        owned.extend(mine.iter().copied());
        owners.insert(id, mine);
    }
    owned.sort_unstable();
    if owned != (0..shards).collect::<Vec<_>>() {
        return Err(format!("shards owned {owned:?} of {shards}: {described}"));
    }
    Ok(owners)
}

/// Every node of `live` sees exactly the nodes `live` owning all the shards, each once,
/// spread evenly (counts differ by at most one). The count per node.
fn spread_over(compose: &Compose, live: &[&str]) -> Result<BTreeMap<String, usize>, String> {
    let mut seen: Option<BTreeMap<String, Vec<u64>>> = None;
    for at in live {
        let owners = view(compose, at)?;
        let counts: BTreeMap<&str, usize> =
            owners.iter().map(|(n, s)| (n.as_str(), s.len())).collect();
        if !counts.keys().copied().eq(live.iter().copied()) {
            return Err(format!("{at} sees {counts:?}"));
        }
        let (min, max) = (counts.values().min(), counts.values().max());
        if max.zip(min).is_none_or(|(max, min)| max - min > 1) {
            return Err(format!("{at} sees an uneven spread {counts:?}"));
        }
        if let Some(first) = &seen {
            if *first != owners {
                return Err(format!("{at} sees {owners:?}, {} {first:?}", live[0]));
            }
        }
        seen = Some(owners);
    }
    seen.map(|owners| owners.iter().map(|(n, s)| (n.clone(), s.len())).collect())
        .ok_or_else(|| "no node to ask".to_owned())
}

fn wait_spread(compose: &Compose, live: &[&str], timeout: Duration) -> BTreeMap<String, usize> {
    wait_for(
        &format!("every shard owned by {live:?}, evenly"),
        timeout,
        || spread_over(compose, live),
    )
}

/// Waits until the group is Stable with the three workers sharing the topic, as `live`
/// answer; its generation.
fn wait_stable(compose: &Compose, live: &[&str]) -> i64 {
    wait_for(
        &format!("group {GROUP} Stable with {WORKERS:?} at {live:?}"),
        STEP,
        || {
            stable_with(
                &cli(compose, live, &["groups", "describe", GROUP])?,
                TOPIC,
                &WORKERS,
            )
        },
    )
}

/// The group's committed offsets, partition → offset.
fn offsets(compose: &Compose, live: &[&str]) -> Result<BTreeMap<i64, i64>, String> {
    Ok(docker::group::offsets(&cli(
        compose,
        live,
        &["offsets", "get", GROUP],
    )?))
}

/// Waits until every partition has a committed offset.
fn wait_all_committed(compose: &Compose, live: &[&str]) -> BTreeMap<i64, i64> {
    wait_for("an offset for every partition", STEP, || {
        let got = offsets(compose, live)?;
        (got.keys().copied().eq(0..PARTITIONS))
            .then_some(got.clone())
            .ok_or_else(|| format!("{got:?}"))
    })
}

/// No partition's offset went back from `before` to `after`.
fn none_went_back(before: &BTreeMap<i64, i64>, after: &BTreeMap<i64, i64>) {
    for (partition, offset) in before {
        assert!(
            after.get(partition).is_some_and(|a| a >= offset),
            "partition {partition} went back: {before:?} → {after:?}"
        );
    }
}

/// The node coordinating the group, as `live` answer.
fn coordinator(compose: &Compose, live: &[&str]) -> String {
    wait_for(&format!("the coordinator of {GROUP}"), STEP, || {
        let found = cli(compose, live, &["groups", "coordinator", GROUP])?;
        found["node_id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| found.to_string())
    })
}

/// The nodes other than `gone`.
fn others(gone: &str) -> Vec<&'static str> {
    NODES.into_iter().filter(|n| *n != gone).collect()
}

/// Makes a failing step show what the containers said.
fn explain(compose: &Compose) -> impl Drop + '_ {
    struct Explain<'a>(&'a Compose);
    impl Drop for Explain<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                for service in ETCD_MEMBERS.iter().chain(&WORKERS) {
                    eprintln!("--- {service} ---\n{}", self.0.logs(service));
                }
                // A node logs a line per shard it takes: its warnings and errors say more.
                for node in NODES {
                    let logs = self.0.logs_tail(node, "all");
                    let notable: Vec<&str> = logs
                        .lines()
                        .filter(|l| l.contains("\"WARN\"") || l.contains("\"ERROR\""))
                        .collect();
                    let from = notable.len().saturating_sub(40);
                    eprintln!(
                        "--- {node} (warnings and errors) ---\n{}",
                        notable[from..].join("\n")
                    );
                }
            }
        }
    }
    Explain(compose)
}

/// Up, with the shards spread over the three nodes and the workers in a Stable group that
/// has committed every partition: the generation and the offsets.
fn up_and_settled(compose: &Compose) -> (i64, BTreeMap<i64, i64>) {
    compose.up();
    for node in NODES {
        assert_eq!(compose.health(node), "healthy", "{node}");
    }
    let counts = wait_spread(compose, &NODES, STEP);
    eprintln!("shards per node: {counts:?}");
    let generation = wait_stable(compose, &NODES);
    (generation, wait_all_committed(compose, &NODES))
}

#[test]
fn cluster_compose_spreads_the_shards_and_a_killed_node_fails_over_without_a_rebalance() {
    let Some(engine) = engine(
        "cluster_compose_spreads_the_shards_and_a_killed_node_fails_over_without_a_rebalance",
    ) else {
        return;
    };
    let compose = cluster(engine);
    let _explain = explain(&compose);
    let (generation, before) = up_and_settled(&compose);

    // Kill the group's coordinator: SIGKILL, no handover; its lease has to expire.
    let victim = coordinator(&compose, &NODES);
    let survivors = others(&victim);
    let killed = Instant::now();
    docker::docker(&["kill", &compose.container(&victim)]);
    assert!(!compose.running(&victim), "{victim} stays dead");
    wait_spread(&compose, &survivors, STEP);
    let moved = killed.elapsed();
    eprintln!("every shard owned by {survivors:?} {moved:.1?} after the kill");
    assert!(
        moved <= MOVE,
        "the shards moved in {moved:?}, more than the TTL {TTL:?} + a few seconds"
    );

    // The workers found the new coordinator and heartbeat on with the same member ids and
    // generation: no rebalance. Every offset committed before is there.
    assert_eq!(
        wait_stable(&compose, &survivors),
        generation,
        "the failover rebalanced the group"
    );
    let now = coordinator(&compose, &survivors);
    assert!(survivors.contains(&now.as_str()), "coordinated by {now}");
    let after = offsets(&compose, &survivors).expect("offsets");
    none_went_back(&before, &after);
    // And the workers commit there.
    wait_for("commits at the new coordinator", STEP, || {
        let later = offsets(&compose, &survivors)?;
        (later != after)
            .then_some(())
            .ok_or_else(|| "unchanged".to_owned())
    });
    assert_eq!(wait_stable(&compose, &survivors), generation);
}

#[test]
fn a_cluster_node_cut_off_its_network_loses_its_shards_and_takes_a_fair_share_back() {
    let Some(engine) =
        engine("a_cluster_node_cut_off_its_network_loses_its_shards_and_takes_a_fair_share_back")
    else {
        return;
    };
    let compose = cluster(engine);
    let _explain = explain(&compose);
    let (generation, before) = up_and_settled(&compose);

    // Cut the group's coordinator off: its clients and etcd stop hearing from it, and it
    // from them.
    let victim = coordinator(&compose, &NODES);
    let survivors = others(&victim);
    let cut_at = Instant::now();
    let cut = compose.disconnect(&victim);
    wait_spread(&compose, &survivors, STEP);
    let moved = cut_at.elapsed();
    eprintln!("every shard owned by {survivors:?} {moved:.1?} after the cut");
    assert!(moved <= MOVE, "the shards moved in {moved:?}");
    // Past its lease deadline the cut-off node serves nothing and says so.
    wait_for(&format!("{victim} not ready"), STEP, || {
        let out = compose.exec(
            &victim,
            &[],
            &["curl", "-sS", "-m", "5", "http://127.0.0.1:7451/readyz"],
        );
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        said.starts_with("not ready").then_some(()).ok_or(said)
    });

    // The group goes on at a survivor with its workers; nothing committed is lost.
    let during = wait_stable(&compose, &survivors);
    assert!(during >= generation, "generation {generation} → {during}");
    eprintln!("generation {generation} before the cut, {during} after");
    none_went_back(&before, &offsets(&compose, &survivors).expect("offsets"));

    // Back on the network (under its names), it registers again and takes a fair share.
    compose.reconnect(cut);
    let counts = wait_spread(&compose, &NODES, STEP);
    assert!(counts[&victim] > 0, "{counts:?}");
    let last = wait_stable(&compose, &NODES);
    assert!(last >= during, "generation {during} → {last}");
    let after = offsets(&compose, &NODES).expect("offsets");
    none_went_back(&before, &after);

    // Owning and serving shards again, it says it is ready (its health check passes), whether
    // or not one of its groups has written since.
    wait_for(&format!("{victim} ready again"), STEP, || {
        let out = compose.exec(
            &victim,
            &[],
            &["curl", "-sS", "-m", "5", "http://127.0.0.1:7451/readyz"],
        );
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        (said.trim() == "ready").then_some(()).ok_or_else(|| {
            format!(
                "{victim} owns {} shards and answers /readyz {said:?}",
                counts[&victim]
            )
        })
    });
}

#[test]
fn a_cluster_taken_down_and_up_again_keeps_groups_and_offsets_in_etcd() {
    let Some(engine) = engine("a_cluster_taken_down_and_up_again_keeps_groups_and_offsets_in_etcd")
    else {
        return;
    };
    let mut compose = cluster(engine);
    {
        let _explain = explain(&compose);
        up_and_settled(&compose);

        // The workers commit their positions and leave on SIGTERM: an Empty group with offsets.
        let mut stop = vec!["stop", "--timeout", "10"];
        stop.extend(WORKERS);
        compose.compose(&stop);
        let generation = wait_for(&format!("group {GROUP} Empty"), STEP, || {
            let group = cli(&compose, &NODES, &["groups", "describe", GROUP])?;
            match (group["state"].as_str(), group["generation"].as_i64()) {
                (Some("Empty"), Some(generation)) => Ok(generation),
                _ => Err(group.to_string()),
            }
        });
        let before = offsets(&compose, &NODES).expect("offsets");
        assert!(before.keys().copied().eq(0..PARTITIONS), "{before:?}");

        // Every container and the network go; etcd's volume stays.
        compose.compose(&["down", "--timeout", "15"]);
        let left = compose.leftovers();
        assert!(
            left.len() == 1 && left[0].starts_with("volume ls"),
            "only etcd's volume is left: {left:?}"
        );
        let mut nodes_up = vec!["up", "-d", "etcd"];
        nodes_up.extend(NODES);
        compose.compose(&nodes_up);
        wait_spread(&compose, &NODES, STEP);
        let group = cli(&compose, &NODES, &["groups", "describe", GROUP]).expect("describe");
        assert_eq!(
            (group["state"].as_str(), group["generation"].as_i64()),
            (Some("Empty"), Some(generation)),
            "{group}"
        );
        assert_eq!(offsets(&compose, &NODES).expect("offsets"), before);

        // The workers come back and go on from the committed offsets.
        compose.up();
        let again = wait_stable(&compose, &NODES);
        assert!(again > generation, "generation {generation} → {again}");
        let after = wait_for("new commits", STEP, || {
            let now = offsets(&compose, &NODES)?;
            (now != before).then_some(now).ok_or("unchanged".to_owned())
        });
        none_went_back(&before, &after);
    }
    compose.down();
    assert_eq!(
        compose.leftovers(),
        Vec::<String>::new(),
        "down -v removes the project's containers, volume and network"
    );
}

/// The etcd member that leads, asking each member's status (etcd's JSON gateway).
fn etcd_leader(compose: &Compose) -> Result<&'static str, String> {
    let mut leader = None;
    let mut ids = BTreeMap::new();
    for member in ETCD_MEMBERS {
        let status = json(&compose.exec(
            member,
            &[],
            &[
                "curl",
                "-fsS",
                "-m",
                "5",
                "-X",
                "POST",
                "-d",
                "{}",
                "http://127.0.0.1:2379/v3/maintenance/status",
            ],
        ))?;
        let id = status["header"]["member_id"].as_str().map(str::to_owned);
        let leads = status["leader"].as_str().map(str::to_owned);
        match (id, leads) {
            (Some(id), Some(leads)) => {
                ids.insert(id, member);
                leader = Some(leads);
            }
            _ => return Err(format!("{member}: {status}")),
        }
    }
    leader
        .and_then(|l| ids.get(&l).copied())
        .ok_or_else(|| format!("no member leads: {ids:?}"))
}

#[test]
fn the_cluster_carries_on_when_its_three_member_etcd_loses_its_leader() {
    let Some(engine) = engine("the_cluster_carries_on_when_its_three_member_etcd_loses_its_leader")
    else {
        return;
    };
    // The default lease (5 s): with a shorter one, a renewal that meets the dead leader and
    // then etcd's election can run out of lease (docs/cluster.md, "Lease TTL").
    let compose = cluster(engine)
        .with_env("MUSTER_LEASE_TTL_S", &ETCD_LOSS_TTL.as_secs().to_string())
        .with_file(&repo().join("deploy/cluster/etcd3.yml"));
    let _explain = explain(&compose);
    let (generation, _) = up_and_settled(&compose);
    let owners = wait_for("the shard owners", STEP, || view(&compose, NODES[0]));
    let leader = wait_for("etcd's leader", STEP, || etcd_leader(&compose));

    let killed = Instant::now();
    docker::docker(&["kill", &compose.container(leader)]);
    let at_kill = offsets(&compose, &NODES).expect("offsets");
    // For three lease TTLs no node loses its lease: no shard moves.
    let mut seen = 0;
    while killed.elapsed() < ETCD_LOSS_TTL * 3 {
        for node in NODES {
            // A probe that fails (a loaded machine) proves nothing either way; a view that
            // differs fails the test.
            if let Ok(now) = view(&compose, node) {
                let gained: Vec<String> = now
                    .iter()
                    .map(|(n, shards)| {
                        let had = owners.get(n).cloned().unwrap_or_default();
                        let new: Vec<&u64> = shards.iter().filter(|s| !had.contains(s)).collect();
                        format!("{n} gained {new:?}")
                    })
                    .collect();
                assert!(
                    now == owners,
                    "{:.1?} after etcd lost {leader}, {node} sees shards moved: {gained:?}\nbefore: {owners:?}\nnow: {now:?}",
                    killed.elapsed()
                );
                seen += 1;
            }
        }
    }
    assert!(
        seen >= 3,
        "only {seen} views read in {:?}",
        ETCD_LOSS_TTL * 3
    );
    // Commits are acknowledged (etcd took them) and the group never rebalanced.
    let after = wait_for("commits after the etcd member's death", STEP, || {
        let now = offsets(&compose, &NODES)?;
        (now != at_kill)
            .then_some(now)
            .ok_or("unchanged".to_owned())
    });
    none_went_back(&at_kill, &after);
    assert_eq!(wait_stable(&compose, &NODES), generation);
    assert_eq!(view(&compose, NODES[0]), Ok(owners), "no shard moved");
}
