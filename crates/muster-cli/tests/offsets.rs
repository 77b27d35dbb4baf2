//! `muster offsets history | reset | restore` (docs/offsets.md) with the real `muster` binary
//! against a real server started in-process on `127.0.0.1:0`: the history after a member's
//! commits, a dry run that changes nothing, an executed reset undone by the command it prints
//! (the `offsets get` output is the same again), a reset refused while the group has members
//! (the refusal names them), and an empty expiry quarantine.
//!
//! Members live on a multi-threaded Tokio runtime owned by the test, so they heartbeat while
//! the test thread waits for the binary.

use std::time::Duration;

use anyhow::{ensure, Context as _, Result};
use muster_client::{
    Admin, Connection, ConnectionConfig, GroupMember, MemberConfig, Phase, TopicPartition,
};
use predicates::prelude::*;
use serde_json::Value;

mod fixture;
use fixture::Fixture;
const PATIENCE: Duration = Duration::from_secs(10);
const TOPIC: &str = "orders";

impl Fixture {
    /// `muster ARGS...` (human output), expected to succeed: its stdout.
    fn text(&self, args: &[&str]) -> Result<String> {
        let output = self.muster(args).output()?;
        ensure!(
            output.status.success(),
            "muster {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(String::from_utf8(output.stdout)?)
    }

    fn admin(&self) -> Result<Admin> {
        self.runtime.block_on(async {
            let conn = Connection::connect(ConnectionConfig::new(self.addr())).await?;
            Ok(Admin::new(conn))
        })
    }

    /// Sets offsets of an Empty group as an administrator (each is a `commit` entry).
    fn set(&self, group: &str, offsets: &[(i32, i64)]) -> Result<()> {
        let admin = self.admin()?;
        self.runtime.block_on(async {
            admin.ensure_topic(TOPIC, 3).await?;
            let offsets = offsets
                .iter()
                .map(|&(p, o)| (TopicPartition::new(TOPIC, p), o));
            admin.set_offsets(group, offsets).await?;
            Ok(())
        })
    }

    /// A member of `group` (eager `range`: alone, it owns the topic's 3 partitions), Stable.
    fn member(&self, group: &str, client_id: &str) -> Result<GroupMember> {
        self.runtime.block_on(async {
            let config = ConnectionConfig::new(self.addr())
                .client_id(client_id)
                .request_timeout(PATIENCE);
            let conn = Connection::connect(config).await?;
            Admin::new(conn.clone()).ensure_topic(TOPIC, 3).await?;
            let (member, events) = MemberConfig::new(group, [TOPIC])
                .session_timeout(Duration::from_secs(10))
                .heartbeat_interval(Duration::from_millis(100))
                .assignor_names(["range"])?
                .start(conn)?;
            drop(events);
            member
                .wait_for_state(PATIENCE, |s| {
                    s.phase == Phase::Stable && s.assignment.len() == 3
                })
                .await?;
            Ok(member)
        })
    }
}

fn entries(history: &Value) -> Result<&Vec<Value>> {
    history["entries"]
        .as_array()
        .with_context(|| format!("entries is an array in {history}"))
}

#[test]
fn history_shows_a_members_commits_newest_first() -> Result<()> {
    let f = Fixture::new();
    let member = f.member("billing", "w1")?;
    let generation = member.generation();
    f.runtime.block_on(async {
        for offset in [10_i64, 20] {
            let offsets = (0..3).map(|p| {
                let at =
                    muster_client::OffsetAndMetadata::with_metadata(offset + i64::from(p), "batch");
                (TopicPartition::new(TOPIC, p), at)
            });
            member.commit_offsets(offsets).await?;
        }
        anyhow::Ok(())
    })?;

    let history = f.json(&["offsets", "history", "billing"])?;
    assert_eq!(history["group"], "billing");
    let all = entries(&history)?;
    assert_eq!(all.len(), 6, "{history:#}");
    let first = &all[0];
    assert_eq!(
        (first["topic"].as_str(), first["partition"].as_i64()),
        (Some(TOPIC), Some(0))
    );
    assert_eq!(first["kind"], "commit");
    assert_eq!(first["offset"], 20, "newest first");
    assert_eq!(all[1]["offset"], 10);
    assert_eq!(first["metadata"], "batch");
    assert_eq!(first["member_id"], member.member_id().as_str());
    assert_eq!(first["client_id"], "w1");
    assert_eq!(first["generation"], generation);
    assert!(
        first["time"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{first}"
    );
    assert!(first["at_ms"].as_u64() >= all[1]["at_ms"].as_u64());

    let one = f.json(&[
        "offsets",
        "history",
        "billing",
        "--topic",
        TOPIC,
        "--partition",
        "2",
        "--limit",
        "1",
    ])?;
    let only = entries(&one)?;
    assert_eq!(only.len(), 1, "{one:#}");
    assert_eq!(
        (only[0]["partition"].as_i64(), only[0]["offset"].as_i64()),
        (Some(2), Some(22))
    );

    let table = f.text(&["offsets", "history", "billing", "--partition", "1"])?;
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    for column in [
        "TOPIC",
        "TIME",
        "KIND",
        "OFFSET",
        "METADATA",
        "MEMBER",
        "CLIENT",
        "HOST",
        "GENERATION",
    ] {
        assert!(lines[0].contains(column), "{table}");
    }
    assert!(lines[1].contains("commit  21"), "{table}");
    assert!(lines[2].contains("commit  11"), "{table}");

    f.muster(&["offsets", "history", "nobody"])
        .assert()
        .code(3)
        .stdout("");
    f.runtime.block_on(member.close())?;
    Ok(())
}

#[test]
fn a_dry_run_changes_nothing() -> Result<()> {
    let f = Fixture::new();
    f.set("replay", &[(0, 10), (1, 20), (2, 30)])?;
    let before = f.text(&["offsets", "get", "replay"])?;
    f.muster(&[
        "offsets",
        "reset",
        "replay",
        "--shift-by",
        "-15",
        "--dry-run",
    ])
    .assert()
    .success()
    .stdout(
        "TOPIC   PARTITION  CURRENT      NEW\n\
             orders  0          10       ->  0\n\
             orders  1          20       ->  5\n\
             orders  2          30       ->  15\n",
    )
    .stderr(predicate::str::contains("dry run: nothing was changed"));
    let dry = f.json(&[
        "offsets",
        "reset",
        "replay",
        "--to-offset",
        "3",
        "--topic",
        "orders:1",
        "--dry-run",
    ])?;
    assert_eq!(dry["executed"], false);
    assert_eq!(dry["undo"], Value::Null);
    assert_eq!(
        dry["partitions"].as_array().map(Vec::len),
        Some(1),
        "{dry:#}"
    );
    assert_eq!(dry["partitions"][0]["current"], 20);
    assert_eq!(dry["partitions"][0]["new"], 3);
    assert_eq!(
        f.text(&["offsets", "get", "replay"])?,
        before,
        "nothing changed"
    );
    let history = f.json(&["offsets", "history", "replay"])?;
    assert!(
        entries(&history)?.iter().all(|e| e["kind"] == "commit"),
        "no reset recorded: {history:#}"
    );
    Ok(())
}

#[test]
fn an_executed_reset_is_undone_by_the_command_it_prints() -> Result<()> {
    let f = Fixture::new();
    f.set("replay", &[(0, 10), (1, 20), (2, 30)])?;
    f.set("replay", &[(0, 110), (1, 120)])?;
    let before = f.text(&["offsets", "get", "replay"])?;

    let human = f.text(&[
        "offsets",
        "reset",
        "replay",
        "--to-earliest-recorded",
        "--execute",
    ])?;
    assert!(
        human.contains("orders  0          110      ->  10"),
        "{human}"
    );
    assert!(human.contains("\nreset recorded at "), "{human}");
    let undo_line = human
        .lines()
        .find_map(|l| l.strip_prefix("undo with: "))
        .context("an undo line")?;
    assert!(
        undo_line.starts_with("muster offsets reset replay --to-time ")
            && undo_line.ends_with(" --execute"),
        "{undo_line}"
    );
    let after = f.text(&["offsets", "get", "replay"])?;
    assert_ne!(after, before);
    assert!(after.contains("orders  0          10"), "{after}");

    // The printed command, as an operator would paste it.
    let args: Vec<&str> = undo_line.split(' ').skip(1).collect();
    let undone = f.json(&args)?;
    assert_eq!(undone["executed"], true);
    assert_eq!(
        f.text(&["offsets", "get", "replay"])?,
        before,
        "undone exactly"
    );

    // Both resets are in the history, the undo newest.
    let history = f.json(&[
        "offsets",
        "history",
        "replay",
        "--partition",
        "0",
        "--limit",
        "2",
    ])?;
    let latest = entries(&history)?;
    assert_eq!(
        (latest[0]["kind"].as_str(), latest[0]["offset"].as_i64()),
        (Some("reset"), Some(110))
    );
    assert_eq!(
        (latest[1]["kind"].as_str(), latest[1]["offset"].as_i64()),
        (Some("reset"), Some(10))
    );
    Ok(())
}

#[test]
fn a_reset_is_refused_while_the_group_has_members_and_names_them() -> Result<()> {
    let f = Fixture::new();
    let member = f.member("live", "app")?;
    let member_id = member.member_id();
    let before = f.text(&["offsets", "get", "live"]).unwrap_or_default();
    f.muster(&["offsets", "reset", "live", "--to-offset", "0", "--execute"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains("NON_EMPTY_GROUP (68)"))
        .stderr(predicate::str::contains(member_id.as_str()));
    assert_eq!(
        f.text(&["offsets", "get", "live"]).unwrap_or_default(),
        before
    );
    f.runtime.block_on(member.close())?;
    f.muster(&[
        "offsets",
        "reset",
        "nobody",
        "--to-offset",
        "0",
        "--execute",
    ])
    .assert()
    .code(3);
    Ok(())
}

#[test]
fn restore_lists_an_empty_quarantine() -> Result<()> {
    let f = Fixture::new();
    f.set("idle", &[(0, 5)])?;
    f.muster(&["offsets", "restore", "idle"])
        .assert()
        .success()
        .stdout("")
        .stderr("muster: group \"idle\" has no offsets in the expiry quarantine\n");
    let listed = f.json(&["offsets", "restore", "idle"])?;
    assert_eq!(listed["executed"], false);
    assert_eq!(listed["offsets"], serde_json::json!([]));
    assert_eq!(listed["quarantined_at"], Value::Null);
    assert_eq!(listed["drop_at"], Value::Null);
    let restored = f.json(&["offsets", "restore", "idle", "--execute"])?;
    assert_eq!(restored["executed"], false, "nothing to restore");
    f.muster(&["offsets", "restore", "nobody"]).assert().code(3);
    Ok(())
}
