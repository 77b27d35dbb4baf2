//! `muster cluster describe` and `muster groups coordinator GROUP`: the real binary against a
//! real single-node server started in-process on `127.0.0.1:0`, in table and `--json` form,
//! with a node id, cluster name and advertised address of the test's choosing.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use assert_cmd::Command;
use muster_coordinator::storage::MemoryStore;
use muster_server::node::NodeOptions;
use muster_server::{spawn, ServerOptions, ServerThread};
use predicates::prelude::*;
use serde_json::{json, Value};

/// A server named `node-a` in cluster `prod`, advertising `advertise` if given.
fn server(advertise: Option<&str>) -> Result<ServerThread> {
    let mut options = ServerOptions::new("127.0.0.1:0", Arc::new(MemoryStore::new()));
    options.workers = 1;
    options.node = NodeOptions {
        node_id: Some("node-a".into()),
        advertise: advertise.map(str::parse).transpose()?,
        cluster_name: "prod".into(),
    };
    Ok(spawn(options)?)
}

/// `muster --server <server> ARGS...`, with the environment cleared of muster's variables.
fn muster(server: &ServerThread, args: &[&str]) -> Command {
    let mut cmd = Command::cargo_bin("muster").expect("the muster binary is built");
    cmd.env_remove("MUSTER_SERVER")
        .env_remove("MUSTER_TOKEN")
        .args(["--server", &server.local_addr().to_string()])
        .args(args)
        .timeout(Duration::from_secs(20));
    cmd
}

fn json(server: &ServerThread, args: &[&str]) -> Result<Value> {
    let output = muster(server, args).arg("--json").assert().success();
    serde_json::from_slice(&output.get_output().stdout).context("stdout is JSON")
}

#[test]
fn cluster_describe_shows_the_one_node_and_its_shard() -> Result<()> {
    let s = server(None)?;
    let addr = s.local_addr();
    muster(&s, &["cluster", "describe"])
        .assert()
        .success()
        .stderr("")
        .stdout(format!(
            "CLUSTER  prod\nSHARDS   1\nNODES    1\n\nNODE    ADDRESS{pad}  SHARDS\nnode-a  {addr}  0\n",
            pad = " ".repeat(addr.to_string().len() - "ADDRESS".len())
        ));
    assert_eq!(
        json(&s, &["cluster", "describe"])?,
        json!({
            "cluster": "prod",
            "shards": 1,
            "nodes": [{
                "node_id": "node-a",
                "host": "127.0.0.1",
                "port": addr.port(),
                "address": addr.to_string(),
                "shards": [0],
            }],
        })
    );
    Ok(())
}

#[test]
fn groups_coordinator_names_the_node() -> Result<()> {
    let s = server(None)?;
    let addr = s.local_addr();
    muster(&s, &["groups", "coordinator", "orders"])
        .assert()
        .success()
        .stdout(format!(
            "GROUP        orders\nCOORDINATOR  node-a\nADDRESS      {addr}\n"
        ));
    assert_eq!(
        json(&s, &["groups", "coordinator", "orders"])?,
        json!({
            "group": "orders",
            "node_id": "node-a",
            "host": "127.0.0.1",
            "port": addr.port(),
            "address": addr.to_string(),
        })
    );
    Ok(())
}

#[test]
fn the_advertised_address_is_what_both_show() -> Result<()> {
    let s = server(Some("[fd00::7]:9999"))?;
    let coordinator = json(&s, &["groups", "coordinator", "orders"])?;
    assert_eq!(coordinator["host"], "fd00::7");
    assert_eq!(coordinator["port"], 9999);
    assert_eq!(coordinator["address"], "[fd00::7]:9999");
    let cluster = json(&s, &["cluster", "describe"])?;
    assert_eq!(cluster["nodes"][0]["address"], "[fd00::7]:9999");
    Ok(())
}

#[test]
fn an_invalid_group_id_has_no_coordinator() -> Result<()> {
    let s = server(None)?;
    muster(&s, &["groups", "coordinator", ""])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::starts_with(
            "muster: cannot find the coordinator of group \"\": INVALID_GROUP_ID (24)",
        ));
    Ok(())
}

#[test]
fn an_unreachable_server_exits_4() -> Result<()> {
    let s = server(None)?;
    let addr = s.local_addr().to_string();
    drop(s);
    for args in [
        &["cluster", "describe"][..],
        &["groups", "coordinator", "g"],
    ] {
        Command::cargo_bin("muster")?
            .env_remove("MUSTER_SERVER")
            .args(["--server", &addr, "--timeout-ms", "2000"])
            .args(args)
            .timeout(Duration::from_secs(20))
            .assert()
            .code(4);
    }
    Ok(())
}

/// A single server that advertises an address no client can reach (as one listening on
/// `0.0.0.0` advertises its host name): group commands still reach it, because it describes
/// itself as a cluster of one (docs/clients.md, "Finding a group's coordinator").
#[test]
fn group_commands_reach_a_single_server_whatever_it_advertises() -> Result<()> {
    let s = server(Some("muster-node.invalid:9999"))?;
    muster(
        &s,
        &[
            "offsets",
            "set",
            "g",
            "--topic",
            "t",
            "--partition",
            "0",
            "--offset",
            "7",
        ],
    )
    .assert()
    .success();
    let got = json(&s, &["offsets", "get", "g"])?;
    assert_eq!(got["offsets"][0]["offset"], 7);
    let described = json(&s, &["groups", "describe", "g"])?;
    assert_eq!(described["state"], "Empty");
    let listed = json(&s, &["groups", "list"])?;
    assert_eq!(
        listed,
        json!({"groups": [{"group": "g", "state": "Empty", "members": 0}]})
    );
    muster(&s, &["groups", "delete", "g"]).assert().success();
    Ok(())
}

/// `--server` takes a list: a first node that is down is skipped, by commas or repetition,
/// and from the environment.
#[test]
fn a_bootstrap_list_skips_a_node_that_is_down() -> Result<()> {
    let s = server(None)?;
    let dead = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .to_string();
    let live = s.local_addr().to_string();
    let listed = |cmd: &mut Command| -> Result<Value> {
        let output = cmd
            .env_remove("MUSTER_TOKEN")
            .args(["groups", "list", "--json"])
            .timeout(Duration::from_secs(20))
            .assert()
            .success();
        serde_json::from_slice(&output.get_output().stdout).context("stdout is JSON")
    };
    let by_commas = listed(
        Command::cargo_bin("muster")?
            .env_remove("MUSTER_SERVER")
            .args(["--server", &format!("{dead},{live}")]),
    )?;
    assert_eq!(by_commas, json!({"groups": []}));
    let repeated = listed(
        Command::cargo_bin("muster")?
            .env_remove("MUSTER_SERVER")
            .args(["--server", &dead, "--server", &live]),
    )?;
    assert_eq!(repeated, json!({"groups": []}));
    let from_env =
        listed(Command::cargo_bin("muster")?.env("MUSTER_SERVER", format!("{dead}, {live}")))?;
    assert_eq!(from_env, json!({"groups": []}));
    // Every node down: unreachable, naming the list.
    Command::cargo_bin("muster")?
        .env_remove("MUSTER_SERVER")
        .args(["--server", &format!("{dead},{dead}"), "topics", "list"])
        .timeout(Duration::from_secs(20))
        .assert()
        .code(4)
        .stderr(predicate::str::starts_with(format!(
            "muster: cannot connect: server {dead},{dead} unreachable"
        )));
    Ok(())
}
