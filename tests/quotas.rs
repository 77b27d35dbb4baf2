//! Per-principal quotas over real TCP (issue #12, protocol §5 "Quotas"), each test with its
//! own auth file and in-process server:
//!
//! - `max_groups` counts the groups a principal created, by JoinGroup or by a generation -1
//!   OffsetCommit; past it, creating one more is answered QUOTA_EXCEEDED (202); deleting one
//!   frees its unit; other principals are not affected;
//! - `max_members` counts members and pending member ids across groups; leaving frees;
//! - a restart (same store, a fresh process's quota table) counts what was loaded again;
//! - a reload that lowers or raises a limit takes effect and keeps the counts;
//! - `max_requests_per_s` slows a principal's connections down without an error, while
//!   another principal's connection keeps its full speed.

mod common;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use common::*;
use muster_coordinator::quota::{QuotaKind, Quotas};
use muster_coordinator::storage::{MemoryStore, Store};
use muster_protocol::*;
use muster_server::auth::Auth;
use muster_server::ServerThread;

/// Hex SHA-256 of `{name}-token`, for the principals these tests use (what
/// `muster auth hash-token` prints).
fn token_sha256(name: &str) -> &'static str {
    match name {
        "alpha" => "a336d9b1d8b8647875238537ca5087b0ea335afd2032936aecdffc3e4b13f720",
        "beta" => "863d63c0bd3a94bfca84ed2063a7355a226faff82ca50b90158bf183aa1a9e61",
        "gamma" => "6be6ba7a6ef7e0422d11aaf33cf3e9290ff8186e391f846c1cf23fe7594a9b19",
        "delta" => "b2276ded52b37a1ac4a55781bc186f1bea6c04c772af4117135e92b1f25d96c4",
        "slow" => "8fca511e871e5afb4ff5d07dfe606a6244d850dd9e7c7305a9cd56d6169179ad",
        "fast" => "a021f42a91f1fbe7c3b5fe8cf0bf2c51dc86a2c14c7ba071e6635c10c5f46e51",
        "zeta" => "bdf259d105404fdbfdc68ef534a311e75da3fee61c814d99e2890a766f285ac7",
        other => panic!("no token for {other}"),
    }
}

/// An auth file in the temp directory, removed when dropped.
struct AuthFile(PathBuf);

impl AuthFile {
    /// `principals`: (name, extra TOML lines for its quotas). Every principal may do
    /// everything on groups and topics, so only quotas refuse anything.
    fn new(test: &str, principals: &[(&str, &str)]) -> AuthFile {
        let path =
            std::env::temp_dir().join(format!("muster-quotas-{}-{test}.toml", std::process::id()));
        let file = AuthFile(path);
        file.write(principals);
        file
    }

    fn write(&self, principals: &[(&str, &str)]) {
        let mut text = String::new();
        for (name, quotas) in principals {
            text.push_str(&format!(
                "[[principals]]\nname = \"{name}\"\ntoken_sha256 = \"{}\"\n{quotas}\n\n",
                token_sha256(name)
            ));
        }
        text.push_str(
            "[[acls]]\nprincipal = \"*\"\nresource = \"group\"\npattern = \"*\"\n\
             operations = [\"read\", \"describe\", \"delete\"]\n\n\
             [[acls]]\nprincipal = \"*\"\nresource = \"topic\"\npattern = \"*\"\n\
             operations = [\"read\", \"describe\", \"create\"]\n",
        );
        std::fs::write(&self.0, text).expect("the auth file is written");
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for AuthFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn start(auth: &Arc<Auth>, store: Arc<dyn Store>) -> ServerThread {
    let auth = Arc::clone(auth);
    start_server_with(fast_config(), move |o| {
        o.auth = auth;
        o.store = store;
    })
}

fn auth(file: &AuthFile) -> Arc<Auth> {
    Arc::new(Auth::from_file(file.path(), Quotas::default()).expect("the auth file loads"))
}

/// Connects as principal `name` (its token in Hello).
async fn connect_as(addr: SocketAddr, name: &str) -> Result<Conn> {
    let mut conn = Conn::connect_raw(addr).await?;
    let hello = as_hello(
        conn.call(Request::Hello(HelloRequest {
            protocol_version: 1,
            client_id: format!("{name}-client"),
            auth_token: Some(format!("{name}-token")),
        }))
        .await?,
    );
    ensure!(hello.error_code == 0, "hello refused: {hello:?}");
    Ok(conn)
}

async fn create_topic(conn: &mut Conn) -> Result<()> {
    let created = conn.call(create_topics(&[(TOPIC, 4)])).await?;
    ensure!(
        matches!(&created, Response::CreateTopics(r) if r.results.iter().all(|t| t.error_code == 0)),
        "{created:?}"
    );
    Ok(())
}

/// A JoinGroup with no member id: MEMBER_ID_REQUIRED's code (0 never), or the refusal.
async fn ask_member_id(conn: &mut Conn, group: &str) -> Result<JoinGroupResponse> {
    Ok(as_join(
        conn.call(join_request(group, "", LONG_MS, LONG_MS)).await?,
    ))
}

/// A generation -1 commit of one offset; the per-partition codes.
async fn simple_commit(conn: &mut Conn, group: &str) -> Result<Vec<i16>> {
    let r = as_commit(
        conn.call(commit(group, -1, "", &[(TOPIC, 0, 7, None)]))
            .await?,
    );
    Ok(commit_codes(&r).into_iter().map(|(_, _, c)| c).collect())
}

async fn delete(conn: &mut Conn, group: &str) -> Result<()> {
    let r = conn.call(delete_groups(&[group])).await?;
    ensure!(
        matches!(&r, Response::DeleteGroups(d) if d.results.iter().all(|g| g.error_code == 0)),
        "{r:?}"
    );
    Ok(())
}

const MID: i16 = ErrorCode::MemberIdRequired.code();
const OVER: i16 = ErrorCode::QuotaExceeded.code();

#[tokio::test]
async fn max_groups_counts_groups_created_by_join_and_by_simple_commit() -> Result<()> {
    let file = AuthFile::new("groups", &[("alpha", "max_groups = 2"), ("beta", "")]);
    let auth = auth(&file);
    let server = start(&auth, Arc::new(MemoryStore::new()));
    let addr = server.local_addr();
    let mut alpha = connect_as(addr, "alpha").await?;
    let mut beta = connect_as(addr, "beta").await?;
    create_topic(&mut alpha).await?;
    let quota = auth.quotas().get("alpha");

    // Created by a JoinGroup, and by a generation -1 OffsetCommit.
    assert_eq!(ask_member_id(&mut alpha, "alpha-1").await?.error_code, MID);
    assert_eq!(simple_commit(&mut alpha, "alpha-2").await?, vec![0]);
    assert_eq!(quota.used(QuotaKind::Groups), 2);

    // A third is refused, both ways, and nothing is created.
    assert_eq!(ask_member_id(&mut alpha, "alpha-3").await?.error_code, OVER);
    assert_eq!(simple_commit(&mut alpha, "alpha-3").await?, vec![OVER]);
    let listed = as_list(alpha.call(list_groups(&[])).await?);
    assert!(
        listed.groups.iter().all(|g| g.group_id != "alpha-3"),
        "{listed:?}"
    );

    // Using a group that exists, created by anyone, is not creating one.
    assert_eq!(simple_commit(&mut alpha, "alpha-2").await?, vec![0]);
    assert_eq!(simple_commit(&mut beta, "beta-1").await?, vec![0]);
    assert_eq!(simple_commit(&mut alpha, "beta-1").await?, vec![0]);
    // Another principal is not affected, and its groups do not count against alpha.
    assert_eq!(ask_member_id(&mut beta, "beta-2").await?.error_code, MID);
    assert_eq!(quota.used(QuotaKind::Groups), 2);
    assert_eq!(auth.quotas().get("beta").used(QuotaKind::Groups), 2);

    // Deleting a group gives its unit back (whoever deletes it).
    delete(&mut beta, "alpha-2").await?;
    assert_eq!(quota.used(QuotaKind::Groups), 1);
    assert_eq!(simple_commit(&mut alpha, "alpha-3").await?, vec![0]);
    assert_eq!(quota.used(QuotaKind::Groups), 2);

    let metrics = muster_server::telemetry::render_metrics();
    assert!(
        metrics.contains("muster_quota_groups{principal=\"alpha\"} 2"),
        "{metrics}"
    );
    Ok(())
}

#[tokio::test]
async fn max_members_counts_members_and_pending_ids_across_groups() -> Result<()> {
    let file = AuthFile::new("members", &[("gamma", "max_members = 3"), ("beta", "")]);
    let auth = auth(&file);
    let server = start(&auth, Arc::new(MemoryStore::new()));
    let addr = server.local_addr();
    let quota = auth.quotas().get("gamma");

    // A member that joined (its pending id's unit passes on to it).
    let mut first = Member::pending(
        connect_as(addr, "gamma").await?,
        "gamma-1",
        LONG_MS,
        LONG_MS,
    )
    .await?;
    assert_eq!(quota.used(QuotaKind::Members), 1);
    first.join().await?;
    first.sync(vec![assignment(&first.id, vec![0])]).await?;
    assert_eq!(quota.used(QuotaKind::Members), 1);
    // It rejoins: no new unit.
    first.join().await?;
    assert_eq!(quota.used(QuotaKind::Members), 1);

    // Pending ids count, in another group too.
    let mut gamma = connect_as(addr, "gamma").await?;
    assert_eq!(ask_member_id(&mut gamma, "gamma-2").await?.error_code, MID);
    assert_eq!(ask_member_id(&mut gamma, "gamma-1").await?.error_code, MID);
    assert_eq!(quota.used(QuotaKind::Members), 3);
    let refused = ask_member_id(&mut gamma, "gamma-2").await?;
    assert_eq!(refused.error_code, OVER, "{refused:?}");
    assert_eq!(refused.member_id, "");

    // At its max_members, a JoinGroup that would create a group is refused before the
    // group exists (no group charged to stand Empty).
    let groups_before = quota.used(QuotaKind::Groups);
    let refused = ask_member_id(&mut gamma, "gamma-new").await?;
    assert_eq!(refused.error_code, OVER, "{refused:?}");
    assert_eq!(quota.used(QuotaKind::Groups), groups_before);

    // Another principal joins the same groups freely.
    let mut beta = connect_as(addr, "beta").await?;
    assert_eq!(ask_member_id(&mut beta, "gamma-2").await?.error_code, MID);
    assert_eq!(auth.quotas().get("beta").used(QuotaKind::Members), 1);

    // Leaving frees a unit.
    let left = first.conn.call(leave("gamma-1", &[&first.id])).await?;
    assert!(
        matches!(&left, Response::LeaveGroup(l) if l.error_code == 0),
        "{left:?}"
    );
    assert_eq!(quota.used(QuotaKind::Members), 2);
    assert_eq!(ask_member_id(&mut gamma, "gamma-2").await?.error_code, MID);
    assert_eq!(quota.used(QuotaKind::Members), 3);

    let metrics = muster_server::telemetry::render_metrics();
    assert!(
        metrics.contains("muster_quota_members{principal=\"gamma\"} 3"),
        "{metrics}"
    );
    Ok(())
}

#[tokio::test]
async fn a_restart_counts_loaded_groups_and_members_again() -> Result<()> {
    let file = AuthFile::new(
        "restart",
        &[("delta", "max_groups = 3\nmax_members = 2"), ("beta", "")],
    );
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    {
        let auth = auth(&file);
        let server = start(&auth, Arc::clone(&store));
        let addr = server.local_addr();
        let mut delta = connect_as(addr, "delta").await?;
        create_topic(&mut delta).await?;
        // Two groups of one member each (durable: a Stable group's record, written before
        // the SyncGroup is answered), and a group that only has offsets.
        let _one = stable_alone(addr, "delta", "delta-1").await?;
        let _two = stable_alone(addr, "delta", "delta-3").await?;
        assert_eq!(simple_commit(&mut delta, "delta-2").await?, vec![0]);
        let quota = auth.quotas().get("delta");
        assert_eq!(quota.used(QuotaKind::Groups), 3);
        assert_eq!(quota.used(QuotaKind::Members), 2);
        server.stop();
    }

    // A new process: a fresh quota table, the same store.
    let auth = auth(&file);
    let server = start(&auth, store);
    let addr = server.local_addr();
    let quota = auth.quotas().get("delta");
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    while quota.used(QuotaKind::Groups) < 3 {
        ensure!(Instant::now() < deadline, "groups never counted: {quota:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(quota.used(QuotaKind::Members), 2);
    let mut delta = connect_as(addr, "delta").await?;
    assert_eq!(ask_member_id(&mut delta, "delta-4").await?.error_code, OVER);
    assert_eq!(ask_member_id(&mut delta, "delta-1").await?.error_code, OVER);
    // Others were never charged.
    assert_eq!(auth.quotas().get("beta").used(QuotaKind::Groups), 0);
    Ok(())
}

#[tokio::test]
async fn a_reload_changes_limits_and_keeps_counts() -> Result<()> {
    let file = AuthFile::new("reload", &[("zeta", "max_groups = 1")]);
    let auth = auth(&file);
    let server = start(&auth, Arc::new(MemoryStore::new()));
    let mut zeta = connect_as(server.local_addr(), "zeta").await?;
    let quota = auth.quotas().get("zeta");
    assert_eq!(ask_member_id(&mut zeta, "zeta-1").await?.error_code, MID);
    assert_eq!(ask_member_id(&mut zeta, "zeta-2").await?.error_code, OVER);

    // Raised: one more fits, the one held still counts.
    file.write(&[("zeta", "max_groups = 2")]);
    auth.reload()?;
    assert_eq!(quota.used(QuotaKind::Groups), 1);
    assert_eq!(ask_member_id(&mut zeta, "zeta-2").await?.error_code, MID);
    assert_eq!(ask_member_id(&mut zeta, "zeta-3").await?.error_code, OVER);

    // Lowered below what is held: nothing is taken away, nothing new fits.
    file.write(&[("zeta", "max_groups = 1")]);
    auth.reload()?;
    assert_eq!(quota.used(QuotaKind::Groups), 2);
    assert_eq!(ask_member_id(&mut zeta, "zeta-3").await?.error_code, OVER);

    // Unlimited.
    file.write(&[("zeta", "")]);
    auth.reload()?;
    assert_eq!(ask_member_id(&mut zeta, "zeta-3").await?.error_code, MID);
    assert_eq!(quota.used(QuotaKind::Groups), 3);
    Ok(())
}

/// A Stable group of one member, principal `name`'s, on its own connection.
async fn stable_alone(addr: SocketAddr, name: &str, group: &str) -> Result<Member> {
    let conn = connect_as(addr, name).await?;
    let mut member = Member::pending(conn, group, LONG_MS, LONG_MS).await?;
    member.join().await?;
    let id = member.id.clone();
    let synced = member.sync(vec![assignment(&id, vec![0])]).await?;
    ensure!(synced.error_code == 0, "{synced:?}");
    Ok(member)
}

/// Heartbeats `member` as fast as the connection answers (up to 64 in flight) until
/// `until`; returns how many were answered by then, and checks every answer is success.
async fn heartbeat_flat_out(member: &mut Member, until: Instant) -> Result<usize> {
    let mut in_flight = VecDeque::new();
    let mut answered = 0;
    let until = tokio::time::Instant::from_std(until);
    loop {
        while in_flight.len() < 64 {
            let request = heartbeat(&member.group, member.generation, &member.id);
            in_flight.push_back(member.conn.send(request).await?);
        }
        let oldest = in_flight.pop_front().expect("one is in flight");
        match tokio::time::timeout_at(until, oldest).await {
            Ok(answer) => {
                let code = as_heartbeat(answer?);
                ensure!(code == 0, "a throttled heartbeat failed: {code}");
                answered += 1;
            }
            Err(_) => return Ok(answered),
        }
    }
}

#[tokio::test]
async fn a_request_rate_quota_slows_its_principal_without_errors_and_no_one_else() -> Result<()> {
    const RATE: usize = 50;
    let file = AuthFile::new(
        "rate",
        &[
            ("slow", &format!("max_requests_per_s = {RATE}")),
            ("fast", ""),
        ],
    );
    let auth = auth(&file);
    let server = start(&auth, Arc::new(MemoryStore::new()));
    let addr = server.local_addr();
    // Each forms a one-member group (a few requests, well within the burst).
    let mut slow =
        Member::pending(connect_as(addr, "slow").await?, "slow-g", LONG_MS, LONG_MS).await?;
    let mut fast =
        Member::pending(connect_as(addr, "fast").await?, "fast-g", LONG_MS, LONG_MS).await?;
    for m in [&mut slow, &mut fast] {
        m.join().await?;
        let id = m.id.clone();
        m.sync(vec![assignment(&id, vec![0])]).await?;
    }

    let window = Duration::from_secs(1);
    let until = Instant::now() + window;
    let (slow_answers, fast_answers) = tokio::join!(
        heartbeat_flat_out(&mut slow, until),
        heartbeat_flat_out(&mut fast, until)
    );
    let (slow_answers, fast_answers) = (slow_answers?, fast_answers?);
    // At most a burst (RATE) plus RATE per second of the window, with slack for the edges.
    assert!(
        slow_answers <= RATE + RATE + RATE / 2,
        "slow got {slow_answers} answers in {window:?}"
    );
    assert!(slow_answers >= RATE / 2, "slow got only {slow_answers}");
    assert!(
        fast_answers >= 4 * slow_answers,
        "fast {fast_answers} vs slow {slow_answers}: the other principal was slowed too"
    );
    // The throttled connection is still served, just later: its next heartbeat succeeds.
    assert!(!slow.conn.is_closed());
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    while slow.heartbeat().await? != 0 {
        ensure!(
            Instant::now() < deadline,
            "the slow member was not answered"
        );
    }
    Ok(())
}

/// Consumer-protocol members count against `max_members` like classic ones: a join past the
/// limit is QUOTA_EXCEEDED, a leave (epoch -1) gives the unit back; the group a consumer join
/// creates counts against `max_groups`.
#[tokio::test]
async fn consumer_protocol_members_count_against_max_members() -> Result<()> {
    let file = AuthFile::new("consumer", &[("gamma", "max_members = 2")]);
    let auth = auth(&file);
    let server = start(&auth, Arc::new(MemoryStore::new()));
    let addr = server.local_addr();
    let quota = auth.quotas().get("gamma");
    let mut conn = connect_as(addr, "gamma").await?;
    let heartbeat = |member_id: &str, epoch: i32| {
        Request::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest {
            group_id: "gamma-cg".into(),
            member_id: member_id.into(),
            member_epoch: epoch,
            rebalance_timeout_ms: if epoch == 0 { 30_000 } else { -1 },
            subscribed_topics: (epoch == 0).then(|| vec!["t".into()]),
            ..Default::default()
        })
    };
    let code = |response: Response| match response {
        Response::ConsumerGroupHeartbeat(r) => r.error_code,
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(code(conn.call(heartbeat("m-1", 0)).await?), 0);
    assert_eq!(quota.used(QuotaKind::Groups), 1);
    assert_eq!(code(conn.call(heartbeat("m-2", 0)).await?), 0);
    // Heartbeats and rejoins of known members take nothing.
    assert_eq!(code(conn.call(heartbeat("m-2", 0)).await?), 0);
    assert_eq!(quota.used(QuotaKind::Members), 2);
    assert_eq!(code(conn.call(heartbeat("m-3", 0)).await?), OVER);
    assert_eq!(code(conn.call(heartbeat("m-1", -1)).await?), 0);
    assert_eq!(quota.used(QuotaKind::Members), 1);
    assert_eq!(code(conn.call(heartbeat("m-3", 0)).await?), 0);
    assert_eq!(quota.used(QuotaKind::Members), 2);
    Ok(())
}
