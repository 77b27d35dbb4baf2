//! Corrupt shard quarantine (issue #24 item 5) against a real etcd and real `musterd` nodes: a
//! group whose record in etcd is garbage is held back on the node that claims its shard —
//! answered COORDINATOR_NOT_AVAILABLE, never recreated nor written over, one ERROR naming the
//! key, `muster_quarantined_keys`, the `/readyz` count and the dashboard's `/api/quarantine`
//! showing it — while the other group
//! of the same shard is served; the shard is claimed once and kept (no give-back loop), the
//! next node quarantines it the same way after a failover, and once the key is deleted the
//! group is served again with its offsets.

mod cluster_support;
mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use cluster_support::*;
use muster_etcd::testkit::EtcdCluster;
use muster_etcd::{EtcdClient, KeyLayout};
use muster_protocol::*;

const SHARD: u32 = 5;
const GARBAGE: &[u8] = b"\xff\x00 not a group record";
/// How long the test watches a node for a loop (a give-back loop claimed about every second).
const WATCH: Duration = Duration::from_secs(3);

/// Two groups of [`SHARD`]: the one to damage, and its healthy neighbour.
fn two_groups_in_the_shard() -> (String, String) {
    let mut ids = (0..)
        .map(|i| format!("group-{i}"))
        .filter(|g| muster_etcd::shard_of(g, SHARDS) == SHARD);
    let bad = ids.next().unwrap_or_default();
    let good = ids.next().unwrap_or_default();
    (bad, good)
}

/// One etcd request, on a runtime of its own.
fn etcd<T>(
    endpoints: &[String],
    f: impl AsyncFnOnce(EtcdClient) -> Result<T, muster_etcd::EtcdError>,
) -> Result<T> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = EtcdClient::connect(endpoints, Duration::from_secs(5))?;
        Ok::<T, anyhow::Error>(f(client).await?)
    })
}

fn node(endpoints: &str, id: &str) -> Result<Node> {
    Node::start_with(
        endpoints,
        id,
        TTL_S,
        SHARDS,
        &["--admin-listen", "127.0.0.1:0"],
    )
}

/// The node's admin listener, as its "musterd listening" line names it.
fn admin_addr(node: &Node) -> Result<SocketAddr> {
    let line = node
        .log_lines(&["musterd listening"])
        .pop()
        .context("no listening line")?;
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("admin_addr="))
        .context("no admin_addr")?
        .parse()
        .context("admin_addr")
}

/// A GET on the admin listener: status and body.
fn get(admin: SocketAddr, path: &str) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&admin, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no status")?;
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// The value of one metric line (`name{labels}` exactly as rendered), if present.
fn metric(admin: SocketAddr, series: &str) -> Result<Option<f64>> {
    let (_, body) = get(admin, "/metrics")?;
    Ok(body.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok())?
    }))
}

fn fetch_code(addr: SocketAddr, group: &str) -> Result<i16> {
    let request = Request::OffsetFetch(OffsetFetchRequest {
        group_id: group.into(),
        topics: None,
    });
    match call(addr, request)? {
        Response::OffsetFetch(f) => Ok(f.error_code),
        Response::Error(e) => Ok(e.error_code),
        other => bail!("not an OffsetFetch answer: {other:?}"),
    }
}

fn join_code(addr: SocketAddr, group: &str) -> Result<i16> {
    let request = Request::JoinGroup(JoinGroupRequest {
        group_id: group.into(),
        member_id: String::new(),
        group_instance_id: None,
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        topics: vec![TOPIC.into()],
        assignors: vec![AssignorMetadata {
            name: "range".into(),
            user_data: vec![],
        }],
        owned_partitions: vec![],
        reason: None,
    });
    match call(addr, request)? {
        Response::JoinGroup(j) => Ok(j.error_code),
        Response::Error(e) => Ok(e.error_code),
        other => bail!("not a JoinGroup answer: {other:?}"),
    }
}

/// `node`, alone in the cluster, owns the shard, `bad` is held back there with one ERROR
/// naming `key`, and `good` is served; watched for [`WATCH`]: one claim of the shard, one
/// ERROR, no claim at all.
fn check_quarantined(
    node: &Node,
    bad: &Member,
    good: &mut Member,
    key: &str,
    endpoints: &[String],
) -> Result<()> {
    let admin = admin_addr(node)?;
    let owned = format!("shard={SHARD} ");
    // Alone in the cluster by now: it holds every shard, so no other claim can land in the
    // window watched below.
    wait_settled(node.addr, 1, Duration::from_secs(10))?;
    wait_for(Duration::from_secs(10), "the shard owned", || {
        (!node.log_lines(&["shard owned", &owned]).is_empty()).then_some(())
    })?;
    good.follow(&[node.addr], Duration::from_secs(5))?;
    ensure!(
        good.node == node.id,
        "{} served by {}",
        good.group,
        good.node
    );
    ensure!(fetch_offset(node.addr, &good.group)? == Some(42));

    let unavailable = ErrorCode::CoordinatorNotAvailable.code();
    ensure!(fetch_code(node.addr, &bad.group)? == unavailable);
    ensure!(join_code(node.addr, &bad.group)? == unavailable);
    let mut twin = bad.twin(node.addr)?;
    ensure!(twin.heartbeat()? == unavailable);
    ensure!(twin.commit(99)? == unavailable);
    // Nothing written over it: the damaged value is as it was.
    let stored = etcd(endpoints, async |c| c.get(key.as_bytes()).await)?;
    ensure!(stored.map(|kv| kv.value).as_deref() == Some(GARBAGE));

    // Ready (every other group is served); the body counts, the dashboard names.
    let (status, body) = get(admin, "/readyz")?;
    ensure!(status == 200, "readyz {status}: {body}");
    let counted = format!("ready\nshard {SHARD}: 1 key(s) in etcd cannot be decoded");
    ensure!(
        body.starts_with(&counted) && !body.contains(&bad.group),
        "{body}"
    );
    let (status, body) = get(admin, "/api/quarantine")?;
    ensure!(status == 200, "/api/quarantine {status}: {body}");
    ensure!(
        body.contains(&format!(r#""key":"{key}""#))
            && body.contains(&format!(r#""group_id":"{}""#, bad.group))
            && body.contains(&format!(r#""shard":{SHARD}"#)),
        "{body}"
    );
    let series = format!("muster_quarantined_keys{{shard=\"{SHARD}\"}}");
    ensure!(metric(admin, &series)? == Some(1.0));

    // No loop: over a few seconds (reconcile rounds every second, a re-read of the group
    // every two) the shard stays claimed once, the key logged once, the claims unchanged.
    let claims = metric(admin, "muster_shard_claims_total")?;
    let until = Instant::now() + WATCH;
    while Instant::now() < until {
        let errors = node.log_lines(&["ERROR", key]);
        ensure!(errors.len() == 1, "{errors:#?}");
        let claimed = node.log_lines(&["shard owned", &owned]);
        ensure!(claimed.len() == 1, "{claimed:#?}");
        ensure!(fetch_code(node.addr, &bad.group)? == unavailable);
        std::thread::sleep(Duration::from_millis(100));
    }
    ensure!(metric(admin, "muster_shard_claims_total")? == claims);
    Ok(())
}

#[test]
fn a_corrupt_group_is_quarantined_once_per_claim_and_served_again_once_its_key_is_deleted(
) -> Result<()> {
    let etcd_cluster = EtcdCluster::single()?;
    let endpoints = etcd_cluster.endpoints();
    let joined = endpoints.join(",");
    let (bad, good) = two_groups_in_the_shard();
    let key = String::from_utf8(KeyLayout::new("muster")?.group(SHARD, &bad))?;

    // Both groups formed and committed on a first node, which then dies.
    let mut first = node(&joined, "n1")?;
    wait_settled(first.addr, 1, Duration::from_secs(10))?;
    create_topic(first.addr, &[first.addr])?;
    let bad_member = Member::start(first.addr, &bad, 41)?;
    let mut good_member = Member::start(first.addr, &good, 42)?;
    first.kill();
    etcd(&endpoints, async |c| c.put(key.as_bytes(), GARBAGE).await)?;

    // The next node claims every shard once its lease is gone.
    let mut second = node(&joined, "n2")?;
    check_quarantined(&second, &bad_member, &mut good_member, &key, &endpoints)?;

    // Failover: the third node quarantines it too, once.
    let third = node(&joined, "n3")?;
    wait_settled(third.addr, 2, Duration::from_secs(10))?;
    second.kill();
    check_quarantined(&third, &bad_member, &mut good_member, &key, &endpoints)?;
    ensure!(second.log_lines(&["ERROR", &key]).len() == 1);

    // The operator deletes the damaged record: the group comes back with its offsets (as a
    // group with offsets and no record), without the shard moving.
    etcd(&endpoints, async |c| c.delete(key.as_bytes()).await)?;
    let offset = wait_for(Duration::from_secs(10), "the group served again", || {
        fetch_offset(third.addr, &bad).ok().flatten()
    })?;
    ensure!(offset == 41);
    ensure!(!third.log_lines(&["quarantine lifted"]).is_empty());
    let admin = admin_addr(&third)?;
    let (status, body) = get(admin, "/readyz")?;
    ensure!(status == 200 && body == "ready\n", "{status}: {body}");
    let (_, body) = get(admin, "/api/quarantine")?;
    ensure!(body == r#"{"keys":[],"more":0}"#, "{body}");
    let series = format!("muster_quarantined_keys{{shard=\"{SHARD}\"}}");
    ensure!(metric(admin, &series)? == Some(0.0));
    let owned = format!("shard={SHARD} ");
    ensure!(third.log_lines(&["shard owned", &owned]).len() == 1);
    Ok(())
}
