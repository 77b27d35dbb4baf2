//! The real `muster` binary against a real server started in-process on `127.0.0.1:0`: every
//! command in table and `--json` form, and every exit code.
//!
//! Each test starts its own server. Group members that must stay alive while the binary runs
//! live on a multi-threaded Tokio runtime owned by the test ([`Fixture`]), so they heartbeat
//! while the test thread waits for the command.

use std::time::Duration;

use anyhow::{Context as _, Result};
use assert_cmd::Command;
use muster_client::{
    Admin, Connection, ConnectionConfig, Event, Events, GroupMember, MemberConfig, Phase,
};
use predicates::prelude::*;
use serde_json::Value;

/// How long a test waits for a group to form.
mod fixture;
use fixture::Fixture;
const PATIENCE: Duration = Duration::from_secs(10);

impl Fixture {
    /// A group member of `group` subscribed to `topic` (created with 3 partitions if
    /// missing), Stable with its assignment.
    fn member(&self, group: &str, topic: &str, client_id: &str) -> Result<GroupMember> {
        self.runtime.block_on(async {
            let (member, events) = start_member(self.addr(), group, topic, client_id).await?;
            // Events are not needed; dropping the stream does not stop the member.
            drop(events);
            member
                .wait_for_state(PATIENCE, |s| {
                    s.phase == Phase::Stable && !s.assignment.is_empty()
                })
                .await?;
            Ok(member)
        })
    }
}

/// Starts a member of `group` (eager `range` assignor, heartbeats every 100 ms) on the server
/// at `addr`, creating `topic` with 3 partitions if missing; does not wait for it to join.
async fn start_member(
    addr: String,
    group: &str,
    topic: &str,
    client_id: &str,
) -> Result<(GroupMember, Events)> {
    let config = ConnectionConfig::new(addr)
        .client_id(client_id)
        .request_timeout(PATIENCE);
    let conn = Connection::connect(config).await?;
    Admin::new(conn.clone()).ensure_topic(topic, 3).await?;
    Ok(MemberConfig::new(group, [topic])
        .session_timeout(Duration::from_secs(10))
        .rebalance_timeout(Duration::from_secs(5))
        .heartbeat_interval(Duration::from_millis(100))
        .assignor_names(["range"])?
        .start(conn)?)
}

fn as_array<'a>(value: &'a Value, field: &str) -> Result<&'a Vec<Value>> {
    value[field]
        .as_array()
        .with_context(|| format!("{field} is an array in {value}"))
}

#[test]
fn topics_create_raise_list_and_refuse_to_lower() -> Result<()> {
    let f = Fixture::new();
    f.muster(&["topics", "create", "orders", "--partitions", "3"])
        .assert()
        .success()
        .stdout("created topic \"orders\" with 3 partitions\n");
    let raised = f.json(&["topics", "create", "orders", "--partitions", "6"])?;
    assert_eq!(raised["topic"], "orders");
    assert_eq!(raised["partitions"], 6);
    assert_eq!(raised["previous_partitions"], 3);
    assert_eq!(raised["action"], "raised");
    f.muster(&["topics", "create", "orders", "--partitions", "6"])
        .assert()
        .success()
        .stdout("topic \"orders\" already has 6 partitions\n");
    let created = f.json(&["topics", "create", "audit", "--partitions", "1"])?;
    assert_eq!(created["action"], "created");
    assert_eq!(created["previous_partitions"], Value::Null);

    f.muster(&["topics", "create", "orders", "--partitions", "2"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains("INVALID_PARTITIONS (37)"))
        .stderr(predicate::str::contains("the topic has 6 partitions"));
    f.muster(&["topics", "create", "bad/name", "--partitions", "1"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("INVALID_TOPIC (17)"));

    f.muster(&["topics", "list"])
        .assert()
        .success()
        .stdout("TOPIC   PARTITIONS\naudit   1\norders  6\n");
    let listed = f.json(&["topics", "list"])?;
    let topics = as_array(&listed, "topics")?;
    assert_eq!(topics.len(), 2);
    assert_eq!(topics[1]["topic"], "orders");
    assert_eq!(topics[1]["partitions"], 6);
    Ok(())
}

#[test]
fn empty_lists_print_nothing_on_stdout() -> Result<()> {
    let f = Fixture::new();
    f.muster(&["topics", "list"])
        .assert()
        .success()
        .stdout("")
        .stderr("muster: no topics\n");
    f.muster(&["groups", "list"])
        .assert()
        .success()
        .stdout("")
        .stderr("muster: no groups\n");
    assert_eq!(as_array(&f.json(&["groups", "list"])?, "groups")?.len(), 0);
    Ok(())
}

#[test]
fn offsets_set_on_an_empty_group_then_get() -> Result<()> {
    let f = Fixture::new();
    f.muster(&[
        "offsets",
        "set",
        "billing",
        "--topic",
        "orders",
        "--partition",
        "2",
        "--offset",
        "42",
    ])
    .assert()
    .success()
    .stdout("set the offset of orders:2 in group \"billing\" to 42\n");
    let set = f.json(&[
        "offsets",
        "set",
        "billing",
        "--topic",
        "orders",
        "--partition",
        "0",
        "--offset",
        "7",
        "--metadata",
        "replayed",
    ])?;
    assert_eq!(set["group"], "billing");
    assert_eq!(set["offsets"][0]["offset"], 7);
    assert_eq!(set["offsets"][0]["metadata"], "replayed");

    f.muster(&["offsets", "get", "billing"])
        .assert()
        .success()
        .stdout(
            "TOPIC   PARTITION  OFFSET  METADATA\n\
             orders  0          7       replayed\n\
             orders  2          42      -\n",
        );
    let got = f.json(&["offsets", "get", "billing"])?;
    assert_eq!(got["group"], "billing");
    let offsets = as_array(&got, "offsets")?;
    assert_eq!(offsets.len(), 2);
    assert_eq!(offsets[1]["topic"], "orders");
    assert_eq!(offsets[1]["partition"], 2);
    assert_eq!(offsets[1]["offset"], 42);
    assert_eq!(offsets[1]["metadata"], Value::Null);

    // The group now exists, Empty: it describes and lists as such.
    let described = f.json(&["groups", "describe", "billing"])?;
    assert_eq!(described["state"], "Empty");
    assert_eq!(as_array(&described, "members")?.len(), 0);
    Ok(())
}

#[test]
fn offsets_set_on_a_group_with_a_member_is_refused() -> Result<()> {
    let f = Fixture::new();
    let _member = f.member("live", "orders", "app")?;
    f.muster(&[
        "offsets",
        "set",
        "live",
        "--topic",
        "orders",
        "--partition",
        "0",
        "--offset",
        "1",
    ])
    .assert()
    .code(1)
    .stdout("")
    .stderr(predicate::str::starts_with(
        "muster: cannot set the offsets of group \"live\": UNKNOWN_MEMBER_ID (25): \
         the group is not Empty (state Stable, 1 member)",
    ))
    .stderr(predicate::str::contains("stop its consumers first"));
    Ok(())
}

#[test]
fn groups_describe_shows_members() -> Result<()> {
    let f = Fixture::new();
    let member = f.member("billing", "orders", "billing-app")?;
    let member_id = member.member_id();

    let assert = f
        .muster(&["groups", "describe", "billing"])
        .assert()
        .success();
    let text = String::from_utf8(assert.get_output().stdout.clone())?;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "GROUP       billing");
    assert_eq!(lines[1], "STATE       Stable");
    assert_eq!(lines[3], "ASSIGNOR    range");
    assert_eq!(lines[4], format!("LEADER      {member_id}"));
    assert_eq!(lines[5], "MEMBERS     1");
    assert!(
        lines[7].starts_with("MEMBER ID") && lines[7].ends_with("HOLDING REBALANCE"),
        "{text}"
    );
    assert!(lines[8].starts_with(&member_id), "{text}");
    assert!(lines[8].contains("billing-app"), "{text}");
    assert!(lines[8].contains("orders:0,1,2"), "{text}");
    assert!(lines[8].contains("10s"), "{text}");
    assert!(lines[8].ends_with("no"), "{text}");

    let described = f.json(&["groups", "describe", "billing"])?;
    assert_eq!(described["group"], "billing");
    assert_eq!(described["state"], "Stable");
    assert!(described["generation"].as_i64() >= Some(1), "{described}");
    assert_eq!(described["assignor"], "range");
    assert_eq!(described["leader"], member_id.as_str());
    let members = as_array(&described, "members")?;
    assert_eq!(members.len(), 1);
    let m = &members[0];
    assert_eq!(m["member_id"], member_id.as_str());
    assert_eq!(m["instance_id"], Value::Null);
    assert_eq!(m["client_id"], "billing-app");
    assert!(m["host"]
        .as_str()
        .is_some_and(|h| h.starts_with("127.0.0.1")));
    assert_eq!(m["topics"], serde_json::json!(["orders"]));
    assert_eq!(
        m["assignment"],
        serde_json::json!([{"topic": "orders", "partitions": [0, 1, 2]}])
    );
    assert_eq!(m["session_timeout_ms"], 10_000);
    assert!(m["last_seen_ms_ago"].is_u64());
    assert_eq!(m["holding_rebalance"], false);
    Ok(())
}

#[test]
fn groups_describe_names_the_member_holding_a_rebalance() -> Result<()> {
    let f = Fixture::new();
    let (first, mut events) =
        f.runtime
            .block_on(start_member(f.addr(), "slow", "orders", "slow-app"))?;
    // Wait for the first assignment, then let a second member join: the first member is told
    // to revoke, and holds the rebalance until it drops the revoked partitions.
    let revoked = f.runtime.block_on(async {
        let mut second = None;
        loop {
            match tokio::time::timeout(PATIENCE, events.recv()).await? {
                Some(Event::Assigned(_)) if second.is_none() => {
                    second = Some(start_member(f.addr(), "slow", "orders", "fast-app").await?);
                }
                Some(Event::Revoked(partitions)) => {
                    return Ok::<_, anyhow::Error>((partitions, second))
                }
                Some(_) => {}
                None => anyhow::bail!("the event stream ended"),
            }
        }
    })?;
    let described = f.json(&["groups", "describe", "slow"])?;
    assert_eq!(described["state"], "PreparingRebalance");
    let members = as_array(&described, "members")?;
    assert_eq!(members.len(), 2, "{described}");
    for m in members {
        let holding = m["member_id"] == first.member_id().as_str();
        assert_eq!(m["holding_rebalance"], holding, "{described}");
    }
    let assert = f.muster(&["groups", "describe", "slow"]).assert().success();
    let text = String::from_utf8(assert.get_output().stdout.clone())?;
    let first_row = text
        .lines()
        .find(|l| l.starts_with(&first.member_id()))
        .with_context(|| format!("a row for the first member in {text}"))?;
    assert!(first_row.ends_with("yes"), "{text}");
    drop(revoked);
    Ok(())
}

#[test]
fn groups_list_filters_by_state() -> Result<()> {
    let f = Fixture::new();
    let _member = f.member("stable-group", "orders", "app")?;
    f.muster(&[
        "offsets",
        "set",
        "empty-group",
        "--topic",
        "orders",
        "--partition",
        "0",
        "--offset",
        "5",
    ])
    .assert()
    .success();

    f.muster(&["groups", "list"]).assert().success().stdout(
        "GROUP         STATE   MEMBERS\n\
         empty-group   Empty   0\n\
         stable-group  Stable  1\n",
    );
    f.muster(&["groups", "list", "--state", "Stable"])
        .assert()
        .success()
        .stdout("GROUP         STATE   MEMBERS\nstable-group  Stable  1\n");
    let empty = f.json(&["groups", "list", "--state", "empty"])?;
    assert_eq!(
        empty,
        serde_json::json!({"groups": [{"group": "empty-group", "state": "Empty", "members": 0}]})
    );
    let both = f.json(&["groups", "list", "--state", "STABLE", "--state", "Empty"])?;
    assert_eq!(as_array(&both, "groups")?.len(), 2);
    let rebalancing = f.json(&["groups", "list", "--state", "PreparingRebalance"])?;
    assert_eq!(as_array(&rebalancing, "groups")?.len(), 0);
    f.muster(&["groups", "list", "--state", "Dead"])
        .assert()
        .code(2);
    Ok(())
}

#[test]
fn groups_delete() -> Result<()> {
    let f = Fixture::new();
    for group in ["old", "older"] {
        f.muster(&[
            "offsets",
            "set",
            group,
            "--topic",
            "orders",
            "--partition",
            "0",
            "--offset",
            "1",
        ])
        .assert()
        .success();
    }
    f.muster(&["groups", "delete", "old"])
        .assert()
        .success()
        .stdout("deleted group \"old\" and its committed offsets\n");
    let deleted = f.json(&["groups", "delete", "older"])?;
    assert_eq!(
        deleted,
        serde_json::json!({"group": "older", "deleted": true})
    );
    f.muster(&["offsets", "get", "old"]).assert().code(3);

    let _member = f.member("busy", "orders", "app")?;
    f.muster(&["groups", "delete", "busy"])
        .assert()
        .code(1)
        .stderr(
            "muster: cannot delete group \"busy\": NON_EMPTY_GROUP (68): \
             the group still has members\n",
        );
    Ok(())
}

#[test]
fn unknown_groups_are_not_found() -> Result<()> {
    let f = Fixture::new();
    f.muster(&["groups", "describe", "nope"])
        .assert()
        .code(3)
        .stdout("")
        .stderr("muster: group \"nope\" not found\n");
    f.muster(&["groups", "delete", "nope"])
        .assert()
        .code(3)
        .stderr("muster: cannot delete group \"nope\": GROUP_ID_NOT_FOUND (69): no such group\n");
    f.muster(&["offsets", "get", "nope", "--json"])
        .assert()
        .code(3)
        .stdout("")
        .stderr("muster: group \"nope\" not found\n");
    Ok(())
}

#[test]
fn an_invalid_group_id_is_refused() -> Result<()> {
    let f = Fixture::new();
    for args in [
        &["groups", "describe", ""][..],
        &["groups", "delete", ""],
        &["offsets", "get", ""],
    ] {
        f.muster(args)
            .assert()
            .code(1)
            .stderr(predicate::str::contains("INVALID_GROUP_ID (24)"));
    }
    Ok(())
}

#[test]
fn a_group_without_offsets_is_not_an_error() -> Result<()> {
    let f = Fixture::new();
    let _member = f.member("fresh", "orders", "app")?;
    f.muster(&["offsets", "get", "fresh"])
        .assert()
        .success()
        .stdout("")
        .stderr("muster: group \"fresh\" has no committed offsets\n");
    let got = f.json(&["offsets", "get", "fresh"])?;
    assert_eq!(got, serde_json::json!({"group": "fresh", "offsets": []}));
    Ok(())
}

#[test]
fn an_unreachable_server_exits_4() -> Result<()> {
    // Nothing listens on port 1: the connection is refused at once.
    let mut cmd = Command::cargo_bin("muster")?;
    cmd.env_remove("MUSTER_SERVER")
        .args(["--server", "127.0.0.1:1", "groups", "list"])
        .timeout(Duration::from_secs(20))
        .assert()
        .code(4)
        .stdout("")
        .stderr(predicate::str::starts_with(
            "muster: cannot connect: server 127.0.0.1:1 unreachable:",
        ));

    // A socket that accepts but never answers: the Hello times out.
    let silent = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = silent.local_addr()?.to_string();
    let mut cmd = Command::cargo_bin("muster")?;
    cmd.env_remove("MUSTER_SERVER")
        .args(["--server", &addr, "--timeout-ms", "200", "topics", "list"])
        .timeout(Duration::from_secs(20))
        .assert()
        .code(4)
        .stderr(predicate::str::contains("within 200 ms"));
    drop(silent);
    Ok(())
}

#[test]
fn usage_errors_exit_2_and_help_lists_exit_codes() -> Result<()> {
    let mut cmd = Command::cargo_bin("muster")?;
    cmd.args(["offsets", "set", "g", "--topic", "t"])
        .assert()
        .code(2);
    let mut cmd = Command::cargo_bin("muster")?;
    cmd.args(["--server", "no-port", "topics", "list"])
        .assert()
        .code(2);
    let mut cmd = Command::cargo_bin("muster")?;
    cmd.arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("Exit codes:"))
        .stdout(predicate::str::contains("4  server unreachable"));
    Ok(())
}

#[test]
fn the_server_can_come_from_the_environment() -> Result<()> {
    let f = Fixture::new();
    let mut cmd = Command::cargo_bin("muster")?;
    cmd.env("MUSTER_SERVER", f.addr())
        .args(["topics", "list", "--json"])
        .timeout(Duration::from_secs(20))
        .assert()
        .success()
        .stdout(predicate::str::contains("\"topics\": []"));
    Ok(())
}
