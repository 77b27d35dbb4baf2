//! What nodes share through etcd under concurrent requests (issue #24 items 3 and 4), against
//! a real etcd (`muster_etcd::testkit`) and real `musterd` processes on `127.0.0.1:0`:
//!
//! - CreateTopics of the same topics, creating and growing them, from two nodes at once: no
//!   change is lost (the catalog ends at the largest count asked for, in etcd and on every
//!   node), and each request is answered NONE or, asking less than a change that won before
//!   it, INVALID_PARTITIONS;
//! - a principal with `max_groups` N creating groups through both nodes at once: exactly N
//!   are created cluster-wide, the rest answered QUOTA_EXCEEDED; deleting a group frees a unit
//!   on the other node; a node SIGKILLed neither leaks the unit of a group it held only in
//!   memory nor counts its recorded groups twice once a survivor has loaded them.

mod cluster_support;
mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use cluster_support::*;
use muster_coordinator::storage::Store;
use muster_etcd::testkit::EtcdCluster;
use muster_etcd::{EtcdStore, EtcdStoreConfig};
use muster_protocol::*;
use support::Conn;

/// The principal with a group quota, and one without (for everything else).
const ALPHA: &str = "alpha-token";
const ADMIN: &str = "beta-token";

/// An auth file giving `alpha` (SHA-256 of `alpha-token`) `max_groups`, and `beta` no quota;
/// everyone may do everything on groups and topics and describe the cluster.
fn auth_file(dir: &Path, max_groups: u32) -> Result<PathBuf> {
    let path = dir.join("auth.toml");
    std::fs::write(
        &path,
        format!(
            "[[principals]]\nname = \"alpha\"\n\
             token_sha256 = \"a336d9b1d8b8647875238537ca5087b0ea335afd2032936aecdffc3e4b13f720\"\n\
             max_groups = {max_groups}\n\n\
             [[principals]]\nname = \"beta\"\n\
             token_sha256 = \"863d63c0bd3a94bfca84ed2063a7355a226faff82ca50b90158bf183aa1a9e61\"\n\n\
             [[acls]]\nprincipal = \"*\"\nresource = \"group\"\npattern = \"*\"\n\
             operations = [\"read\", \"describe\", \"delete\"]\n\n\
             [[acls]]\nprincipal = \"*\"\nresource = \"topic\"\npattern = \"*\"\n\
             operations = [\"read\", \"describe\", \"create\"]\n"
        ),
    )?;
    Ok(path)
}

fn call_as(addr: SocketAddr, token: Option<&str>, request: Request) -> Result<Response> {
    Conn::connect_as(addr, Duration::from_secs(5), token)?.call(request)
}

/// Two nodes (`extra` flags for both), settled with 8 shards each.
fn two_nodes(etcd: &EtcdCluster, extra: &[&str], token: Option<&str>) -> Result<Vec<Node>> {
    let endpoints = etcd.endpoints().join(",");
    let nodes: Vec<Node> = (1..=2)
        .map(|i| Node::start_with(&endpoints, &format!("n{i}"), TTL_S, SHARDS, extra))
        .collect::<Result<_>>()?;
    wait_for(
        Duration::from_secs(10),
        "two nodes sharing the shards",
        || {
            let described = call_as(
                nodes[0].addr,
                token,
                Request::DescribeCluster(DescribeClusterRequest {}),
            );
            match described.ok()? {
                Response::DescribeCluster(d) => (d.nodes.len() == 2
                    && d.nodes
                        .iter()
                        .all(|n| n.shards.len() == SHARDS as usize / 2))
                .then_some(()),
                _ => None,
            }
        },
    )?;
    Ok(nodes)
}

fn described_topics(addr: SocketAddr, token: Option<&str>) -> Option<Vec<TopicInfo>> {
    match call_as(
        addr,
        token,
        Request::DescribeTopics(DescribeTopicsRequest { topics: None }),
    )
    .ok()?
    {
        Response::DescribeTopics(d) => {
            let mut topics = d.topics;
            topics.sort_by(|a, b| a.topic.cmp(&b.topic));
            Some(topics)
        }
        _ => None,
    }
}

fn topic(name: &str, partitions: i32) -> TopicInfo {
    TopicInfo {
        topic: name.into(),
        partitions,
    }
}

const INVALID_PARTITIONS: i16 = ErrorCode::InvalidPartitions.code();

/// Rounds of the race, each on topics of its own: one round's loser under last-writer-wins
/// lands last only some of the time.
const ROUNDS: usize = 6;

#[test]
fn concurrent_creates_and_grows_of_topics_from_two_nodes_lose_nothing() -> Result<()> {
    let etcd = EtcdCluster::single()?;
    let nodes = two_nodes(&etcd, &[], None)?;
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    let mut expected = Vec::new();
    for round in 0..ROUNDS {
        let (up, down) = (format!("up-{round}"), format!("down-{round}"));
        race(&addrs, &up, &down)?;
        expected.extend([topic(&down, 16), topic(&up, 16)]);
    }
    expected.sort_by(|a, b| a.topic.cmp(&b.topic));
    // etcd holds the largest count asked for...
    let store = EtcdStore::connect(EtcdStoreConfig::new(etcd.endpoints(), "muster", SHARDS))?;
    let stored = store.load()?.topics;
    ensure!(stored == expected, "etcd: {stored:?}");
    // ...and every node converges to it.
    for addr in &addrs {
        wait_for(Duration::from_secs(5), "the catalog on every node", || {
            (described_topics(*addr, None)? == expected).then_some(())
        })?;
    }
    Ok(())
}

/// 16 CreateTopics, 8 on each node, all at once: request k asks `up` for k + 1 partitions
/// and `down` for 16 - k, so each topic is created by one of them and grown by others. Each
/// is answered NONE, or INVALID_PARTITIONS for a count lower than one made before it; the
/// largest count never is.
fn race(addrs: &[SocketAddr], up: &str, down: &str) -> Result<()> {
    let threads: Vec<_> = (0..16)
        .map(|k: i32| {
            let addr = addrs[k as usize % 2];
            let asked = vec![topic(up, k + 1), topic(down, 16 - k)];
            std::thread::spawn(move || -> Result<(i32, Vec<TopicResult>)> {
                let request = Request::CreateTopics(CreateTopicsRequest { topics: asked });
                match call_as(addr, None, request)? {
                    Response::CreateTopics(c) => Ok((k, c.results)),
                    other => bail!("request {k}: {other:?}"),
                }
            })
        })
        .collect();
    for thread in threads {
        let Ok(answer) = thread.join() else {
            bail!("a CreateTopics thread panicked");
        };
        let (k, results) = answer?;
        ensure!(results.len() == 2, "request {k}: {results:?}");
        for (result, asked) in results.iter().zip([k + 1, 16 - k]) {
            ensure!(
                result.error_code == 0 || result.error_code == INVALID_PARTITIONS,
                "request {k}, {}: {result:?} (NONE, or a lower count than one already made)",
                result.topic
            );
            if asked == 16 {
                ensure!(
                    result.error_code == 0,
                    "the largest count is never refused: {result:?}"
                );
            }
        }
    }
    Ok(())
}

/// The coordinator of `group`, as `ask` names it.
fn coordinator(ask: SocketAddr, group: &str) -> Option<SocketAddr> {
    match call_as(
        ask,
        Some(ADMIN),
        Request::FindCoordinator(FindCoordinatorRequest { key: group.into() }),
    )
    .ok()?
    {
        Response::FindCoordinator(f) if f.error_code == 0 => {
            format!("{}:{}", f.host, f.port).parse().ok()
        }
        _ => None,
    }
}

/// `group`'s first request, `request` (one that creates it), as alpha at its coordinator:
/// the answer's code, once the cluster answers it as the coordinator (never
/// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE, which a
/// client retries).
fn create_as_alpha(ask: SocketAddr, group: &str, request: &Request) -> Result<i16> {
    let retried = [
        ErrorCode::NotCoordinator.code(),
        ErrorCode::CoordinatorLoadInProgress.code(),
        ErrorCode::CoordinatorNotAvailable.code(),
    ];
    wait_for(
        Duration::from_secs(10),
        "an answer from the coordinator",
        || {
            let addr = coordinator(ask, group)?;
            let code = match call_as(addr, Some(ALPHA), request.clone()).ok()? {
                Response::JoinGroup(j) => j.error_code,
                other => commit_code(&other),
            };
            (!retried.contains(&code)).then_some(code)
        },
    )
}

fn simple_commit(group: &str) -> Request {
    commit(group, -1, "", 1)
}

/// A JoinGroup asking for a member id: it creates the group, held in memory only (nothing is
/// recorded before the member joins with its id).
fn ask_member_id(group: &str) -> Request {
    Request::JoinGroup(JoinGroupRequest {
        group_id: group.into(),
        member_id: String::new(),
        group_instance_id: None,
        session_timeout_ms: 120_000,
        rebalance_timeout_ms: 10_000,
        topics: vec![TOPIC.into()],
        assignors: vec![AssignorMetadata {
            name: "range".into(),
            user_data: vec![],
        }],
        owned_partitions: vec![],
        reason: None,
    })
}

/// Group names coordinated by `node` (as `ask` says), `count` of them, none in `taken`.
fn groups_on(ask: SocketAddr, node: SocketAddr, count: usize, tag: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for i in 0..1000 {
        let group = format!("{tag}-{i}");
        if coordinator(ask, &group) == Some(node) {
            out.push(group);
            if out.len() == count {
                return Ok(out);
            }
        }
    }
    bail!("fewer than {count} {tag} groups on {node}")
}

fn delete_group(addr: SocketAddr, group: &str) -> Result<()> {
    let answer = call_as(
        coordinator(addr, group).unwrap_or(addr),
        Some(ADMIN),
        Request::DeleteGroups(DeleteGroupsRequest {
            group_ids: vec![group.into()],
        }),
    )?;
    match answer {
        Response::DeleteGroups(d) if d.results.iter().all(|r| r.error_code == 0) => Ok(()),
        other => bail!("DeleteGroups {group}: {other:?}"),
    }
}

fn create_shared_topic(addr: SocketAddr, nodes: &[SocketAddr]) -> Result<()> {
    let created = call_as(
        addr,
        Some(ADMIN),
        Request::CreateTopics(CreateTopicsRequest {
            topics: vec![topic(TOPIC, 4)],
        }),
    )?;
    ensure!(
        matches!(&created, Response::CreateTopics(c) if c.results.iter().all(|r| r.error_code == 0)),
        "{created:?}"
    );
    for node in nodes {
        wait_for(Duration::from_secs(5), "the topic on every node", || {
            described_topics(*node, Some(ADMIN))?
                .iter()
                .any(|t| t.topic == TOPIC)
                .then_some(())
        })?;
    }
    Ok(())
}

const OVER: i16 = ErrorCode::QuotaExceeded.code();
const MEMBER_ID_REQUIRED: i16 = ErrorCode::MemberIdRequired.code();

#[test]
fn max_groups_holds_across_nodes_under_concurrent_creation() -> Result<()> {
    const MAX: usize = 6;
    let etcd = EtcdCluster::single()?;
    let dir = tempfile::tempdir()?;
    let auth = auth_file(dir.path(), MAX as u32)?;
    let auth = auth.to_string_lossy();
    let nodes = two_nodes(&etcd, &["--auth-file", &auth], Some(ADMIN))?;
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    create_shared_topic(addrs[0], &addrs)?;

    // 10 groups on each node, 20 creations at once: exactly MAX succeed cluster-wide.
    let mut groups = groups_on(addrs[0], addrs[0], 10, "q")?;
    groups.extend(groups_on(addrs[0], addrs[1], 10, "q")?);
    let ask = addrs[0];
    let threads: Vec<_> = groups
        .iter()
        .cloned()
        .map(|group| {
            std::thread::spawn(move || {
                let code = create_as_alpha(ask, &group, &simple_commit(&group));
                (group, code)
            })
        })
        .collect();
    let mut created = Vec::new();
    for thread in threads {
        let Ok((group, code)) = thread.join() else {
            bail!("a creating thread panicked");
        };
        match code? {
            0 => created.push(group),
            OVER => {}
            other => bail!("{group}: {other}"),
        }
    }
    ensure!(
        created.len() == MAX,
        "created across the cluster: {created:?}"
    );

    // A group deleted on one node frees a unit for the other node, and only one.
    let on_first = created
        .iter()
        .find(|g| coordinator(ask, g) == Some(addrs[0]));
    let (deleted, other) = match on_first {
        Some(g) => (g.clone(), addrs[1]),
        None => (created[0].clone(), addrs[0]),
    };
    delete_group(ask, &deleted)?;
    let late = groups_on(ask, other, 2, "late")?;
    ensure!(create_as_alpha(ask, &late[0], &simple_commit(&late[0]))? == 0);
    ensure!(create_as_alpha(ask, &late[1], &simple_commit(&late[1]))? == OVER);
    Ok(())
}

#[test]
fn a_sigkilled_node_neither_leaks_nor_double_counts_units() -> Result<()> {
    const MAX: usize = 4;
    let etcd = EtcdCluster::single()?;
    let dir = tempfile::tempdir()?;
    let auth = auth_file(dir.path(), MAX as u32)?;
    let auth = auth.to_string_lossy();
    let mut nodes = two_nodes(&etcd, &["--auth-file", &auth], Some(ADMIN))?;
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    create_shared_topic(addrs[0], &addrs)?;
    let (survivor, victim) = (addrs[0], addrs[1]);

    // Recorded groups on both nodes (a simple commit records its group and its creator), and
    // on the victim one group held only in memory: MAX units in all.
    let mut recorded = groups_on(survivor, survivor, 1, "kept")?;
    recorded.extend(groups_on(survivor, victim, 2, "kept")?);
    for group in &recorded {
        ensure!(
            create_as_alpha(survivor, group, &simple_commit(group))? == 0,
            "{group}"
        );
    }
    let unrecorded = groups_on(survivor, victim, 1, "memory")?;
    ensure!(
        create_as_alpha(survivor, &unrecorded[0], &ask_member_id(&unrecorded[0]))?
            == MEMBER_ID_REQUIRED
    );
    let more = groups_on(survivor, survivor, 3, "more")?;
    ensure!(
        create_as_alpha(survivor, &more[0], &simple_commit(&more[0]))? == OVER,
        "the group held in memory counts too"
    );

    nodes[1].kill();
    let killed = Instant::now();
    wait_for(
        Duration::from_secs(TTL_S + 5),
        "the survivor owning every shard",
        || match call_as(
            survivor,
            Some(ADMIN),
            Request::DescribeCluster(DescribeClusterRequest {}),
        )
        .ok()?
        {
            Response::DescribeCluster(d) => {
                (d.nodes.len() == 1 && d.nodes[0].shards.len() == SHARDS as usize).then_some(())
            }
            _ => None,
        },
    )?;
    // The survivor serves the recorded groups, and their units are counted once: the one
    // unit the in-memory group held is free again, and no more.
    for group in &recorded {
        ensure!(
            fetch_offset_as(survivor, group)? == Some(1),
            "{group} after failover"
        );
    }
    ensure!(create_as_alpha(survivor, &more[1], &simple_commit(&more[1]))? == 0);
    ensure!(create_as_alpha(survivor, &more[2], &simple_commit(&more[2]))? == OVER);
    ensure!(killed.elapsed() < Duration::from_secs(30));
    Ok(())
}

fn fetch_offset_as(addr: SocketAddr, group: &str) -> Result<Option<i64>> {
    fetched_offset(call_as(addr, Some(ADMIN), offset_fetch(group))?)
}
