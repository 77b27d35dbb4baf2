//! `muster groups history` and `muster groups why` (protocol §6.20) with the real `muster`
//! binary against a real server on `127.0.0.1:0`: a member that dies without a word shows up
//! as a session expiry naming it, with the partitions that moved; a member that stops
//! rejoining is the one `why` says the barrier waits for, before the barrier gives up; and the
//! journal survives a restart of the server on the same redb file.
//!
//! The member that dies (or stalls) is scripted with raw requests, so that it does exactly
//! that and nothing else: a killed process sends nothing more, like this one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _, Result};
use assert_cmd::Command;
use muster_client::protocol::{
    AssignorMetadata, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, Response,
    SyncGroupRequest,
};
use muster_client::{
    Admin, Connection, ConnectionConfig, ErrorCode, GroupMember, MemberConfig, Phase,
};
use muster_coordinator::storage::{RedbStore, Store};
use muster_coordinator::GroupConfig;
use muster_server::{spawn, ServerOptions, ServerThread};
use serde_json::Value;

const PATIENCE: Duration = Duration::from_secs(20);
const TOPIC: &str = "orders";

fn server(store: Arc<dyn Store>) -> ServerThread {
    let mut options = ServerOptions::new("127.0.0.1:0", store);
    options.group = GroupConfig {
        min_session_timeout_ms: 100,
        max_session_timeout_ms: 60_000,
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    };
    options.workers = 1;
    spawn(options).expect("server starts")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime builds")
}

fn muster(server: &ServerThread, args: &[&str]) -> Command {
    let mut cmd = Command::cargo_bin("muster").expect("the muster binary is built");
    cmd.env_remove("MUSTER_SERVER")
        .env_remove("MUSTER_TOKEN")
        .args(["--server", &server.local_addr().to_string()])
        .args(args)
        .timeout(PATIENCE);
    cmd
}

fn json(server: &ServerThread, args: &[&str]) -> Result<Value> {
    let output = muster(server, args).arg("--json").output()?;
    ensure!(
        output.status.success(),
        "muster {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).context("stdout is JSON")
}

/// Polls `muster ARGS --json` every 100 ms until `done` holds, for at most [`PATIENCE`].
fn poll(server: &ServerThread, args: &[&str], done: impl Fn(&Value) -> bool) -> Result<Value> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let value = json(server, args)?;
        if done(&value) {
            return Ok(value);
        }
        if Instant::now() > deadline {
            bail!("muster {args:?} never showed what was expected; last: {value:#}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

async fn connect(server: &ServerThread, client_id: &str) -> Result<Connection> {
    let config = ConnectionConfig::new(server.local_addr().to_string())
        .client_id(client_id)
        .request_timeout(PATIENCE);
    Ok(Connection::connect(config).await?)
}

/// A library member (eager `range`, heartbeats every 100 ms, session 10 s).
async fn library_member(
    server: &ServerThread,
    group: &str,
    client_id: &str,
) -> Result<GroupMember> {
    let conn = connect(server, client_id).await?;
    Admin::new(conn.clone()).ensure_topic(TOPIC, 6).await?;
    let (member, events) = MemberConfig::new(group, [TOPIC])
        .session_timeout(Duration::from_secs(10))
        .rebalance_timeout(Duration::from_secs(4))
        .heartbeat_interval(Duration::from_millis(100))
        .assignor_names(["range"])?
        .start(conn)?;
    drop(events);
    Ok(member)
}

/// A member driven by hand: it joins (twice: MEMBER_ID_REQUIRED first) and syncs, and then
/// does only what the test tells it.
struct Scripted {
    conn: Connection,
    group: String,
    member_id: String,
    generation: i32,
}

impl Scripted {
    fn join_request(&self, session_ms: u32) -> JoinGroupRequest {
        JoinGroupRequest {
            group_id: self.group.clone(),
            member_id: self.member_id.clone(),
            group_instance_id: None,
            session_timeout_ms: session_ms,
            rebalance_timeout_ms: 4_000,
            topics: vec![TOPIC.into()],
            assignors: vec![AssignorMetadata {
                name: "range".into(),
                user_data: Vec::new(),
            }],
            owned_partitions: Vec::new(),
            reason: None,
        }
    }

    async fn join(server: &ServerThread, group: &str, session_ms: u32) -> Result<Scripted> {
        let mut me = Scripted {
            conn: connect(server, "scripted-worker").await?,
            group: group.into(),
            member_id: String::new(),
            generation: -1,
        };
        for _ in 0..2 {
            let answer = me.conn.send(me.join_request(session_ms)).await?;
            let Response::JoinGroup(JoinGroupResponse {
                error_code,
                member_id,
                generation_id,
                ..
            }) = answer
            else {
                bail!("not a JoinGroup answer: {answer:?}");
            };
            me.member_id = member_id;
            if error_code == ErrorCode::None.code() {
                me.generation = generation_id;
                return Ok(me);
            }
            ensure!(
                error_code == ErrorCode::MemberIdRequired.code(),
                "join refused: {error_code}"
            );
        }
        bail!("never joined")
    }

    /// SyncGroup until this generation's assignment comes (a follower waits for the leader).
    async fn sync(&self) -> Result<()> {
        let answer = self
            .conn
            .send(SyncGroupRequest {
                group_id: self.group.clone(),
                generation_id: self.generation,
                member_id: self.member_id.clone(),
                group_instance_id: None,
                assignor: None,
                assignments: Vec::new(),
            })
            .await?;
        match answer {
            Response::SyncGroup(r) if r.error_code == 0 => Ok(()),
            other => bail!("sync failed: {other:?}"),
        }
    }

    fn heartbeat(&self) -> HeartbeatRequest {
        HeartbeatRequest {
            group_id: self.group.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: None,
        }
    }
}

/// Waits until every library member is Stable with an assignment.
async fn stable(members: &[&GroupMember]) -> Result<()> {
    for m in members {
        m.wait_for_state(PATIENCE, |s| {
            s.phase == Phase::Stable && !s.assignment.is_empty()
        })
        .await?;
    }
    Ok(())
}

#[test]
fn a_member_that_dies_is_a_session_expiry_naming_it_with_what_moved() -> Result<()> {
    let server = server(Arc::new(muster_coordinator::storage::MemoryStore::new()));
    let rt = runtime();
    let group = "dies";
    let (a, b, dead) = rt.block_on(async {
        let a = library_member(&server, group, "worker-a").await?;
        let b = library_member(&server, group, "worker-b").await?;
        stable(&[&a, &b]).await?;
        // The third member: a 1 s session, and then it goes silent as a killed process does.
        let dead = Scripted::join(&server, group, 1_000).await?;
        dead.sync().await?;
        stable(&[&a, &b]).await?;
        Ok::<_, anyhow::Error>((a, b, dead))
    })?;
    let history = poll(&server, &["groups", "history", group], |h| {
        h[0]["trigger"]["kind"] == "session_expired" && h[0]["sync_ms"].is_u64()
    })?;
    let newest = &history[0];
    assert_eq!(
        newest["trigger"]["member_id"],
        dead.member_id.as_str(),
        "{newest:#}"
    );
    assert_eq!(newest["trigger"]["client_id"], "scripted-worker");
    assert_eq!(newest["left"], serde_json::json!([dead.member_id]));
    assert_eq!(newest["joined"], serde_json::json!([]));
    let moved = newest["moved"].as_u64().context("moved is a number")?;
    assert!(moved >= 1, "{newest:#}");
    for key in ["generation", "started_at", "barrier_ms", "sync_ms"] {
        assert!(newest[key].is_number(), "{key} in {newest:#}");
    }
    // Newest first: the join of the dead member came before.
    assert_eq!(history[1]["trigger"]["kind"], "member_joined");
    assert_eq!(history[1]["trigger"]["member_id"], dead.member_id.as_str());
    let older = history[1]["generation"].as_i64().context("generation")?;
    assert!(newest["generation"].as_i64().context("generation")? > older);

    // The table names the member and the trigger.
    let out = muster(&server, &["groups", "history", group, "--limit", "1"])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone())?;
    assert!(text.contains("session_expired"), "{text}");
    assert!(text.contains(&dead.member_id), "{text}");
    assert_eq!(text.lines().count(), 2, "a header and one row: {text}");
    drop((a, b));
    Ok(())
}

#[test]
fn why_names_the_member_the_barrier_waits_for_before_it_gives_up() -> Result<()> {
    let server = server(Arc::new(muster_coordinator::storage::MemoryStore::new()));
    let rt = runtime();
    let group = "stalls";
    let (a, stalled, _pump, b) = rt.block_on(async {
        let a = library_member(&server, group, "worker-a").await?;
        stable(&[&a]).await?;
        let stalled = Scripted::join(&server, group, 10_000).await?;
        stalled.sync().await?;
        stable(&[&a]).await?;
        // It keeps heartbeating (its session lives on) but will never rejoin.
        let conn = stalled.conn.clone();
        let beat = stalled.heartbeat();
        let pump = tokio::spawn(async move {
            loop {
                let _ = conn.send(beat.clone()).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        // A new member starts a rebalance that the stalled member never rejoins.
        let b = library_member(&server, group, "worker-b").await?;
        Ok::<_, anyhow::Error>((a, stalled, pump, b))
    })?;
    let why = poll(&server, &["groups", "why", group], |w| {
        w["rebalance"]["phase"] == "join"
            && w["rebalance"]["waiting_for"]
                .as_array()
                .is_some_and(|l| l.len() == 1)
    })?;
    let rebalance = &why["rebalance"];
    assert_eq!(
        rebalance["waiting_for"][0]["member_id"],
        stalled.member_id.as_str(),
        "{why:#}"
    );
    assert_eq!(rebalance["waiting_for"][0]["client_id"], "scripted-worker");
    assert_eq!(rebalance["trigger"]["kind"], "member_joined");
    let deadline = rebalance["deadline"].as_u64().context("a deadline")?;
    let now = why["now"].as_u64().context("now")?;
    assert!(deadline > now, "asked before the barrier gives up: {why:#}");
    // The human form says whom and until when.
    let out = muster(&server, &["groups", "why", group])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone())?;
    assert!(text.contains(&stalled.member_id), "{text}");
    assert!(text.contains("gives up in"), "{text}");
    // Then the barrier gives up on it: evicted, as the journal says.
    let history = poll(&server, &["groups", "history", group], |h| {
        h[0]["evicted"].as_array().is_some_and(|e| !e.is_empty())
    })?;
    assert_eq!(
        history[0]["evicted"],
        serde_json::json!([stalled.member_id])
    );
    drop((a, b));
    Ok(())
}

#[test]
fn the_journal_survives_a_restart() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let group = "durable";
    let before = {
        let store: Arc<dyn Store> = Arc::new(RedbStore::open(dir.path())?);
        let server = server(Arc::clone(&store));
        let rt = runtime();
        let a = rt.block_on(async {
            let a = library_member(&server, group, "worker-a").await?;
            stable(&[&a]).await?;
            Ok::<_, anyhow::Error>(a)
        })?;
        let history = poll(&server, &["groups", "history", group], |h| {
            h.as_array().is_some_and(|l| !l.is_empty()) && h[0]["sync_ms"].is_u64()
        })?;
        drop(a);
        drop(rt);
        server.stop();
        drop(store);
        history
    };
    let store: Arc<dyn Store> = Arc::new(RedbStore::open(dir.path())?);
    let server = server(store);
    let after = json(&server, &["groups", "history", group])?;
    let count = before.as_array().map_or(0, Vec::len);
    assert!(count >= 1);
    // The member's LeaveGroup at shutdown may have added entries after `before`: the old
    // ones are all there, unchanged.
    let after = after.as_array().context("an array")?;
    assert!(after.len() >= count, "{after:#?}");
    assert_eq!(
        &after[after.len() - count..],
        before.as_array().context("array")?.as_slice()
    );
    Ok(())
}
