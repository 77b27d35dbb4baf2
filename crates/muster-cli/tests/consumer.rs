//! `muster groups describe | list | simulate | why | history` on consumer-protocol groups
//! (protocol-v1 §7), and across a migration between the protocols, with the real `muster`
//! binary against a real server on `127.0.0.1:0`.
//!
//! Most members are scripted with raw ConsumerGroupHeartbeat requests, so that the group
//! stands still in each state a test looks at: a member that has not heartbeated since the
//! target changed still holds what it must give up, and the newcomer waits for it. Classic
//! members, where a test needs one, are scripted with raw JoinGroup and SyncGroup the same way.
//! One test runs the migration with the library's members instead (they heartbeat on the
//! fixture's runtime while the binary runs), waiting on their state, never sleeping. The
//! server's consumer session timeout is long enough that nobody expires while a test runs.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure, Context as _, Result};
use assert_cmd::Command;
use muster_client::protocol::{
    AssignorMetadata, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    JoinGroupRequest, MemberAssignment, Response, SyncGroupRequest,
};
use muster_client::{
    Admin, Connection, ConnectionConfig, ErrorCode, GroupMember, GroupProtocol, MemberConfig,
    Phase, TopicPartitions,
};
use muster_coordinator::storage::MemoryStore;
use muster_coordinator::{ConsumerConfig, GroupConfig};
use muster_server::{spawn, ServerOptions, ServerThread};
use predicates::prelude::*;
use serde_json::{json, Value};

const PATIENCE: Duration = Duration::from_secs(20);
const GROUP: &str = "billing";
const TOPIC: &str = "orders";

struct Fixture {
    server: ServerThread,
    runtime: tokio::runtime::Runtime,
}

impl Fixture {
    fn new() -> Fixture {
        let mut options = ServerOptions::new("127.0.0.1:0", Arc::new(MemoryStore::new()));
        options.group = GroupConfig {
            min_session_timeout_ms: 100,
            max_session_timeout_ms: 120_000,
            initial_rebalance_delay_ms: 0,
            consumer: ConsumerConfig {
                heartbeat_interval_ms: 200,
                session_timeout_ms: 120_000,
                default_assignor: "uniform".into(),
                ..ConsumerConfig::default()
            },
            ..GroupConfig::default()
        };
        options.workers = 1;
        let server = spawn(options).expect("server starts");
        // Multi-threaded: library members keep heartbeating while the binary runs.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime builds");
        Fixture { server, runtime }
    }

    fn muster(&self, args: &[&str]) -> Command {
        let mut cmd = Command::cargo_bin("muster").expect("the muster binary is built");
        cmd.env_remove("MUSTER_SERVER")
            .env_remove("MUSTER_TOKEN")
            .args(["--server", &self.server.local_addr().to_string()])
            .args(args)
            .timeout(PATIENCE);
        cmd
    }

    fn json(&self, args: &[&str]) -> Result<Value> {
        let output = self.muster(args).arg("--json").output()?;
        ensure!(
            output.status.success(),
            "muster {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).context("stdout is JSON")
    }

    fn connect(&self, client_id: &str) -> Result<Connection> {
        let config = ConnectionConfig::new(self.server.local_addr().to_string())
            .client_id(client_id)
            .request_timeout(PATIENCE);
        Ok(self.runtime.block_on(Connection::connect(config))?)
    }

    fn create_topic(&self, topic: &str, partitions: i32) -> Result<()> {
        let admin = Admin::new(self.connect("admin")?);
        Ok(self
            .runtime
            .block_on(admin.create_topic(topic, partitions))?)
    }
}

/// A consumer-protocol member driven by hand: each call is one ConsumerGroupHeartbeat.
struct Member {
    conn: Connection,
    member_id: String,
    epoch: i32,
}

impl Member {
    /// Joins `GROUP` subscribed to `TOPIC` (epoch 0, a member id of its own choosing).
    fn join(f: &Fixture, member_id: &str) -> Result<(Member, ConsumerGroupHeartbeatResponse)> {
        let mut me = Member {
            conn: f.connect(member_id)?,
            member_id: member_id.into(),
            epoch: 0,
        };
        let answer = me.heartbeat(
            f,
            ConsumerGroupHeartbeatRequest {
                rebalance_timeout_ms: 60_000,
                subscribed_topics: Some(vec![TOPIC.into()]),
                owned_partitions: Some(Vec::new()),
                ..me.request()
            },
        )?;
        Ok((me, answer))
    }

    fn request(&self) -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest {
            group_id: GROUP.into(),
            member_id: self.member_id.clone(),
            member_epoch: self.epoch,
            rebalance_timeout_ms: -1,
            ..ConsumerGroupHeartbeatRequest::default()
        }
    }

    /// A heartbeat reporting that it owns `owned`.
    fn owning(&mut self, f: &Fixture, owned: &[i32]) -> Result<ConsumerGroupHeartbeatResponse> {
        let request = ConsumerGroupHeartbeatRequest {
            owned_partitions: Some(vec![TopicPartitions {
                topic: TOPIC.into(),
                partitions: owned.to_vec(),
            }]),
            ..self.request()
        };
        self.heartbeat(f, request)
    }

    fn heartbeat(
        &mut self,
        f: &Fixture,
        request: ConsumerGroupHeartbeatRequest,
    ) -> Result<ConsumerGroupHeartbeatResponse> {
        match f.runtime.block_on(self.conn.send(request))? {
            Response::ConsumerGroupHeartbeat(r) if r.error_code == ErrorCode::None.code() => {
                self.epoch = r.member_epoch;
                Ok(r)
            }
            other => bail!("heartbeat of {} refused: {other:?}", self.member_id),
        }
    }
}

/// The partitions of `TOPIC` in an answer's assignment.
fn assigned(answer: &ConsumerGroupHeartbeatResponse) -> Result<Vec<i32>> {
    let assignment = answer
        .assignment
        .as_ref()
        .context("the answer carries the assignment")?;
    let mut partitions: Vec<i32> = assignment
        .iter()
        .filter(|t| t.topic == TOPIC)
        .flat_map(|t| t.partitions.iter().copied())
        .collect();
    partitions.sort_unstable();
    Ok(partitions)
}

/// `[{"topic": TOPIC, "partitions": ps}]`, or `[]` for none.
fn orders(ps: &[i32]) -> Value {
    if ps.is_empty() {
        json!([])
    } else {
        json!([{"topic": TOPIC, "partitions": ps}])
    }
}

/// How many partitions a `[{topic, partitions}]` list holds.
fn count(list: &Value) -> usize {
    list.as_array().map_or(0, |topics| {
        topics
            .iter()
            .map(|t| t["partitions"].as_array().map_or(0, Vec::len))
            .sum()
    })
}

/// A two-member group caught mid-reconciliation, then reconciled: `groups describe` shows the
/// epochs, each member's current and target assignment and what moves; `groups list` shows
/// the consumer-protocol states; `groups simulate --add 1` on the Stable group stops exactly
/// what the newcomer gains.
#[test]
fn a_consumer_group_is_described_listed_and_simulated() -> Result<()> {
    let f = Fixture::new();
    f.create_topic(TOPIC, 6)?;
    let (mut a, joined) = Member::join(&f, "member-a")?;
    assert_eq!(assigned(&joined)?, [0, 1, 2, 3, 4, 5]);
    // b joins: the target splits the topic, but a has not heartbeated since, so it still
    // holds everything and b waits for its half.
    let (mut b, b_joined) = Member::join(&f, "member-b")?;
    assert_eq!(assigned(&b_joined)?, Vec::<i32>::new());

    let described = f.json(&["groups", "describe", GROUP])?;
    assert_eq!(described["group"], GROUP);
    assert_eq!(described["protocol"], "consumer");
    assert_eq!(described["state"], "Reconciling");
    assert_eq!(described["group_epoch"], 2);
    assert_eq!(described["assignment_epoch"], 2);
    assert_eq!(described["assignor"], "uniform");
    let members = described["members"]
        .as_array()
        .context("members is an array")?;
    assert_eq!(members.len(), 2);
    let (ma, mb) = (&members[0], &members[1]);
    assert_eq!(ma["member_id"], "member-a");
    assert_eq!(ma["member_epoch"], 1);
    assert_eq!(ma["client_id"], "member-a");
    assert_eq!(ma["instance_id"], Value::Null);
    assert_eq!(ma["topics"], json!([TOPIC]));
    assert_eq!(ma["subscribed_topic_regex"], Value::Null);
    assert_eq!(ma["assignment"], orders(&[0, 1, 2, 3, 4, 5]));
    assert_eq!(count(&ma["target"]), 3);
    assert_eq!(count(&ma["revoking"]), 3);
    assert_eq!(ma["awaiting"], json!([]));
    assert_eq!(mb["member_id"], "member-b");
    assert_eq!(mb["member_epoch"], 2);
    assert_eq!(mb["assignment"], json!([]));
    assert_eq!(count(&mb["target"]), 3);
    assert_eq!(mb["awaiting"], mb["target"]);
    assert_eq!(mb["revoking"], json!([]));
    // What a gives up is what b waits for.
    assert_eq!(ma["revoking"], mb["target"]);

    f.muster(&["groups", "describe", GROUP])
        .assert()
        .success()
        .stdout(
            "GROUP             billing\n\
             PROTOCOL          consumer\n\
             STATE             Reconciling\n\
             GROUP EPOCH       2\n\
             ASSIGNMENT EPOCH  2\n\
             ASSIGNOR          uniform\n\
             MEMBERS           2\n\
             \n\
             MEMBER ID  INSTANCE ID  CLIENT ID  HOST       EPOCH  SUBSCRIPTION  ASSIGNMENT          TARGET        REVOKING      AWAITING\n\
             member-a   -            member-a   127.0.0.1  1      orders        orders:0,1,2,3,4,5  orders:0,1,2  orders:3,4,5  -\n\
             member-b   -            member-b   127.0.0.1  2      orders        -                   orders:3,4,5  -             orders:3,4,5\n",
        );

    // `history` has an entry per epoch bump.
    let history = f.json(&["groups", "history", GROUP])?;
    assert_eq!(history[0]["generation"], 2, "{history}");
    assert_eq!(history[0]["trigger"]["kind"], "member_joined");
    assert_eq!(history[0]["trigger"]["member_id"], "member-b");

    f.muster(&["groups", "list"])
        .assert()
        .success()
        .stdout("GROUP    STATE        MEMBERS\nbilling  Reconciling  2\n");
    let listed = f.json(&["groups", "list", "--state", "reconciling"])?;
    assert_eq!(
        listed,
        json!({"groups": [{"group": GROUP, "state": "Reconciling", "members": 2}]})
    );
    f.muster(&["groups", "list", "--state", "Stable"])
        .assert()
        .success()
        .stdout("");

    // Reconcile: a gives its half up (first heartbeat: told what to keep; second: it no longer
    // owns the rest), then b gets it.
    let kept = assigned(&a.owning(&f, &[0, 1, 2, 3, 4, 5])?)?;
    assert_eq!(kept.len(), 3);
    // Told to give half up, a still holds it (describe shows what a member holds, pending
    // revocations included) and stays at its epoch until it reports it let go; b still
    // waits, and `why` names a.
    let revoking = f.json(&["groups", "describe", GROUP])?;
    let (ma, mb) = (&revoking["members"][0], &revoking["members"][1]);
    assert_eq!(ma["member_epoch"], 1);
    assert_eq!(count(&ma["assignment"]), 6);
    assert_eq!(count(&ma["revoking"]), 3);
    assert_eq!(count(&mb["awaiting"]), 3);
    let why = f.json(&["groups", "why", GROUP])?;
    assert_eq!(why["rebalance"]["phase"], "reconcile", "{why}");
    assert_eq!(why["rebalance"]["waiting_for"][0]["member_id"], "member-a");
    f.muster(&["groups", "why", GROUP])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "waiting for these members to let go of the partitions they were asked to revoke:",
        ));
    a.owning(&f, &kept)?;
    let took = assigned(&b.owning(&f, &[])?)?;
    assert_eq!(took.len(), 3);
    b.owning(&f, &took)?;

    let stable = f.json(&["groups", "describe", GROUP])?;
    assert_eq!(stable["state"], "Stable");
    for m in stable["members"].as_array().context("members")? {
        assert_eq!(m["member_epoch"], 2, "{m}");
        assert_eq!(m["assignment"], m["target"], "{m}");
        assert_eq!((&m["revoking"], &m["awaiting"]), (&json!([]), &json!([])));
    }
    f.muster(&["groups", "list"])
        .assert()
        .success()
        .stdout("GROUP    STATE   MEMBERS\nbilling  Stable  2\n");

    // One more member: it gains 2, each of the others loses 1 and gains nothing.
    let simulated = f.json(&["groups", "simulate", GROUP, "--add", "1"])?;
    assert_eq!(simulated["group"], GROUP);
    assert_eq!(simulated["assignor"], "uniform");
    let members = simulated["members"].as_array().context("members")?;
    assert_eq!(members.len(), 3);
    let newcomer = members
        .iter()
        .find(|m| m["change"] == "added")
        .context("an added member")?;
    assert_eq!(newcomer["member_id"], "new-1");
    assert_eq!(
        simulated["stopped_partitions"].as_u64(),
        Some(count(&newcomer["gained"]) as u64)
    );
    assert_eq!(count(&newcomer["gained"]), 2);
    for m in members.iter().filter(|m| m["change"] == "staying") {
        assert_eq!(m["gained"], json!([]), "{m}");
        assert_eq!(count(&m["lost"]), 1, "{m}");
        assert_eq!(count(&m["kept"]), 2, "{m}");
    }
    f.muster(&["groups", "simulate", GROUP, "--add", "1"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with(
            "GROUP       billing\nASSIGNOR    uniform\nWOULD STOP  2 partitions\n\n\
             MEMBER ID  CHANGE   KEPT",
        ))
        .stdout(predicate::str::contains("new-1      added    -"));

    // Removing a member and growing the topic, together.
    let grown = f.json(&[
        "groups",
        "simulate",
        GROUP,
        "--remove",
        "member-a",
        "--partitions",
        "orders=8",
    ])?;
    let members = grown["members"].as_array().context("members")?;
    let removed = members
        .iter()
        .find(|m| m["member_id"] == "member-a")
        .context("member-a")?;
    assert_eq!(removed["change"], "removed");
    assert_eq!(count(&removed["lost"]), 3);
    let staying = members
        .iter()
        .find(|m| m["member_id"] == "member-b")
        .context("member-b")?;
    assert_eq!(count(&staying["kept"]) + count(&staying["gained"]), 8);
    assert_eq!(grown["stopped_partitions"], 3);

    // Nothing changed in the group.
    assert_eq!(f.json(&["groups", "describe", GROUP])?["group_epoch"], 2);
    Ok(())
}

#[test]
fn simulate_refusals_are_one_line_with_the_servers_reason() -> Result<()> {
    let f = Fixture::new();
    f.create_topic(TOPIC, 4)?;
    let (_a, _) = Member::join(&f, "member-a")?;

    f.muster(&["groups", "simulate", GROUP, "--remove", "nobody"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(
            "muster: cannot simulate a rebalance of group \"billing\": UNKNOWN_MEMBER_ID (25): \
             the group has no member nobody\n",
        );
    f.muster(&["groups", "simulate", GROUP, "--partitions", "orders=2"])
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with(
            "muster: cannot simulate a rebalance of group \"billing\": INVALID_PARTITIONS (37): \
             topic orders has 4 partitions",
        ));
    f.muster(&["groups", "simulate", "nope", "--add", "1"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("GROUP_ID_NOT_FOUND (69)"));

    // A classic group whose assignor runs in its members: the server cannot compute it. One
    // member joins (no sync needed: the assignor is chosen when the join completes).
    let conn = f.connect("classic")?;
    classic_join(&f, &conn, "sticky-group", "cooperative-sticky")?;
    f.muster(&["groups", "simulate", "sticky-group", "--add", "1"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::starts_with(
            "muster: cannot simulate a rebalance of group \"sticky-group\": INVALID_REQUEST (42): \
             the group's assignor \"cooperative-sticky\" runs in its members",
        ));
    // A classic group is still described as one.
    let classic = f.json(&["groups", "describe", "sticky-group"])?;
    assert_eq!(classic["protocol"], "classic");
    assert_eq!(classic["assignor"], "cooperative-sticky");
    Ok(())
}

/// Migration (docs/consumer-protocol.md, "Migrating a running fleet"): a Stable classic
/// group is upgraded online when a consumer-protocol member joins, and is classic again when
/// that member leaves; a classic group mid-rebalance refuses the joiner (it retries); the
/// committed offsets stay with the group throughout. `describe` follows the group across.
#[test]
fn migration_both_ways_keeps_the_offsets_and_describe_follows() -> Result<()> {
    let f = Fixture::new();
    f.create_topic(TOPIC, 2)?;
    f.muster(&[
        "offsets",
        "set",
        GROUP,
        "--topic",
        TOPIC,
        "--partition",
        "1",
        "--offset",
        "42",
    ])
    .assert()
    .success();

    // A classic member, alone: leader of generation 1, it assigns itself both partitions.
    let classic = f.connect("classic")?;
    let (member_id, generation) = classic_join(&f, &classic, GROUP, "range")?;
    let answer = f.runtime.block_on(classic.send(SyncGroupRequest {
        group_id: GROUP.into(),
        generation_id: generation,
        member_id: member_id.clone(),
        group_instance_id: None,
        assignor: Some("range".into()),
        assignments: vec![MemberAssignment {
            member_id: member_id.clone(),
            partitions: vec![TopicPartitions {
                topic: TOPIC.into(),
                partitions: vec![0, 1],
            }],
            user_data: Vec::new(),
        }],
    }))?;
    ensure!(
        matches!(&answer, Response::SyncGroup(r) if r.error_code == 0),
        "sync refused: {answer:?}"
    );
    let described = f.json(&["groups", "describe", GROUP])?;
    assert_eq!(
        (&described["protocol"], &described["state"]),
        (&json!("classic"), &json!("Stable"))
    );

    // A consumer-protocol member joins: the group is upgraded, the classic member in it.
    let (mut a, _) = Member::join(&f, "member-a")?;
    let described = f.json(&["groups", "describe", GROUP])?;
    assert_eq!(described["protocol"], "consumer");
    let ids: Vec<&Value> = described["members"]
        .as_array()
        .context("members")?
        .iter()
        .map(|m| &m["member_id"])
        .collect();
    assert!(ids.contains(&&json!(member_id)), "{described}");
    assert!(ids.contains(&&json!("member-a")), "{described}");
    assert_eq!(
        f.json(&["offsets", "get", GROUP])?["offsets"][0]["offset"],
        42
    );

    // It leaves (epoch -1): classic again, and the classic member is asked to rejoin.
    a.heartbeat(
        &f,
        ConsumerGroupHeartbeatRequest {
            member_epoch: -1,
            ..a.request()
        },
    )?;
    let described = f.json(&["groups", "describe", GROUP])?;
    assert_eq!(
        (&described["protocol"], &described["state"]),
        (&json!("classic"), &json!("PreparingRebalance"))
    );
    assert_eq!(
        f.json(&["offsets", "get", GROUP])?["offsets"][0]["offset"],
        42
    );

    // Mid-rebalance a classic group cannot be upgraded: the joiner is told why.
    let answer =
        f.runtime
            .block_on(f.connect("member-b")?.send(ConsumerGroupHeartbeatRequest {
                group_id: GROUP.into(),
                member_id: "member-b".into(),
                rebalance_timeout_ms: 60_000,
                subscribed_topics: Some(vec![TOPIC.into()]),
                ..ConsumerGroupHeartbeatRequest::default()
            }))?;
    let Response::ConsumerGroupHeartbeat(refused) = answer else {
        bail!("not a ConsumerGroupHeartbeat answer: {answer:?}");
    };
    assert_eq!(refused.error_code, ErrorCode::GroupIdNotFound.code());
    assert!(
        refused
            .error_message
            .as_deref()
            .is_some_and(|m| m.contains("only when Stable")),
        "{refused:?}"
    );
    Ok(())
}

/// The same migration with the library's members, as docs/consumer-protocol.md tells it: a
/// classic `range` member alone owns the topic; a consumer-protocol member joins and the two
/// share it (the classic one rejoins when the server asks); the consumer-protocol member
/// closes and the classic one owns everything again, after a classic rebalance.
#[test]
fn a_rolling_migration_with_library_members() -> Result<()> {
    let f = Fixture::new();
    f.create_topic(TOPIC, 6)?;
    // Members start their tasks on the fixture's runtime.
    let _runtime = f.runtime.enter();
    let owns = |member: &GroupMember, n: usize| {
        f.runtime.block_on(member.wait_for_state(PATIENCE, |s| {
            s.phase == Phase::Stable && s.assignment.len() == n
        }))
    };
    let (classic, events) = MemberConfig::new(GROUP, [TOPIC])
        .session_timeout(Duration::from_secs(10))
        .heartbeat_interval(Duration::from_millis(100))
        .assignor_names(["range"])?
        .start(f.connect("classic")?)?;
    // Nobody reads the events: dropping the stream acknowledges each at once.
    drop(events);
    owns(&classic, 6)?;
    assert_eq!(
        f.json(&["groups", "describe", GROUP])?["protocol"],
        "classic"
    );

    let (consumer, events) = MemberConfig::new(GROUP, [TOPIC])
        .group_protocol(GroupProtocol::Consumer)
        .heartbeat_interval(Duration::from_millis(100))
        .start(f.connect("consumer")?)?;
    drop(events);
    owns(&consumer, 3)?;
    owns(&classic, 3)?;
    let described = f.json(&["groups", "describe", GROUP])?;
    assert_eq!(described["protocol"], "consumer", "{described}");
    let members = described["members"].as_array().context("members")?;
    assert_eq!(members.len(), 2, "{described}");
    for m in members {
        assert_eq!(count(&m["target"]), 3, "{m}");
    }

    f.runtime.block_on(consumer.close())?;
    owns(&classic, 6)?;
    let described = f.json(&["groups", "describe", GROUP])?;
    assert_eq!(
        (&described["protocol"], &described["assignor"]),
        (&json!("classic"), &json!("range"))
    );
    Ok(())
}

/// A classic member joining `group` alone with `assignor` (again after MEMBER_ID_REQUIRED):
/// its member id and generation. The assignor is chosen once the join completes.
fn classic_join(
    f: &Fixture,
    conn: &Connection,
    group: &str,
    assignor: &str,
) -> Result<(String, i32)> {
    let mut member_id = String::new();
    for _ in 0..2 {
        let answer = f.runtime.block_on(conn.send(JoinGroupRequest {
            group_id: group.into(),
            member_id: member_id.clone(),
            group_instance_id: None,
            session_timeout_ms: 60_000,
            rebalance_timeout_ms: 60_000,
            topics: vec![TOPIC.into()],
            assignors: vec![AssignorMetadata {
                name: assignor.into(),
                user_data: Vec::new(),
            }],
            owned_partitions: Vec::new(),
            reason: None,
        }))?;
        let Response::JoinGroup(joined) = answer else {
            bail!("not a JoinGroup answer: {answer:?}");
        };
        if joined.error_code == ErrorCode::None.code() {
            return Ok((joined.member_id, joined.generation_id));
        }
        ensure!(
            joined.error_code == ErrorCode::MemberIdRequired.code(),
            "join refused: {joined:?}"
        );
        member_id = joined.member_id;
    }
    bail!("never got past MEMBER_ID_REQUIRED")
}
