//! The node settings of the real binary reach FindCoordinator and DescribeCluster:
//! `--node-id`, `--cluster-name` and `--advertise` as given; without `--advertise`, a server
//! listening on the unspecified address `0.0.0.0` advertises the machine's host name with the
//! port it actually bound.

mod support;

use std::net::SocketAddr;

use anyhow::{bail, Result};
use muster_protocol::*;
use muster_server::node::host_name;
use support::{start_with, Conn};

fn find(conn: &mut Conn, group: &str) -> Result<FindCoordinatorResponse> {
    match conn.call(Request::FindCoordinator(FindCoordinatorRequest {
        key: group.into(),
    }))? {
        Response::FindCoordinator(found) => Ok(found),
        other => bail!("unexpected {other:?}"),
    }
}

fn describe(conn: &mut Conn) -> Result<DescribeClusterResponse> {
    match conn.call(Request::DescribeCluster(DescribeClusterRequest {}))? {
        Response::DescribeCluster(described) => Ok(described),
        other => bail!("unexpected {other:?}"),
    }
}

/// Stops the child even when the test fails.
struct Running(std::process::Child, std::path::PathBuf);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

fn data_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("muster-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn node_settings_reach_the_answers() -> Result<()> {
    let dir = data_dir("node-settings");
    let (child, addr) = start_with(
        &dir,
        &[
            "--node-id",
            "node-7",
            "--cluster-name",
            "prod-eu",
            "--advertise",
            "muster-7.example:9092",
        ],
    )?;
    let _running = Running(child, dir);
    let mut conn = Conn::connect(addr)?;
    let found = find(&mut conn, "orders")?;
    assert_eq!(
        found,
        FindCoordinatorResponse {
            error_code: 0,
            node_id: "node-7".into(),
            host: "muster-7.example".into(),
            port: 9092,
        }
    );
    let described = describe(&mut conn)?;
    assert_eq!(
        described,
        DescribeClusterResponse {
            error_code: 0,
            cluster: "prod-eu".into(),
            shards: 1,
            nodes: vec![ClusterNode {
                node_id: "node-7".into(),
                host: "muster-7.example".into(),
                port: 9092,
                shards: vec![0],
            }],
        }
    );
    Ok(())
}

#[test]
fn an_unspecified_listen_address_advertises_the_host_name_and_bound_port() -> Result<()> {
    let dir = data_dir("node-unspecified");
    let (child, bound) = start_with(&dir, &["--listen", "0.0.0.0:0"])?;
    let _running = Running(child, dir);
    assert!(bound.ip().is_unspecified(), "{bound}");
    let mut conn = Conn::connect(SocketAddr::from(([127, 0, 0, 1], bound.port())))?;
    let found = find(&mut conn, "orders")?;
    let me = host_name();
    assert_eq!(
        (found.node_id.as_str(), found.host.as_str(), found.port),
        (me.as_str(), me.as_str(), bound.port())
    );
    Ok(())
}

#[test]
fn a_bad_advertise_stops_startup_naming_it() -> Result<()> {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_musterd"))
        .args(["--advertise", "muster-7.example", "--admin-listen", "off"])
        .output()?;
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("invalid setting advertise = muster-7.example: expected HOST:PORT"),
        "{stderr}"
    );
    Ok(())
}
