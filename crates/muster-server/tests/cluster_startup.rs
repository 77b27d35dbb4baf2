//! Cluster-mode startup when etcd or the node's own past is in the way (the chaos harness's
//! findings, docs/reliability.md): a node started before its etcd answers waits for it
//! (`--etcd-startup-wait-s`) instead of exiting, and a node restarted after a SIGKILL on its
//! own address takes its previous registration over at once instead of waiting for its lease
//! (which etcd extends on every leader change) and then refusing to start.

mod cluster_support;
mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use cluster_support::*;
use muster_etcd::testkit::EtcdCluster;

/// Copies bytes one way until either side closes.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// From `after` on, accepts on `port` and relays every connection to `target`: an etcd
/// endpoint that answers nothing (connection refused) until then.
fn etcd_appearing_later(port: u16, target: SocketAddr, after: Duration, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        std::thread::sleep(after);
        let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) else {
            return;
        };
        for client in listener.incoming() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let (Ok(client), Ok(server)) = (client, TcpStream::connect(target)) else {
                continue;
            };
            let (Ok(client2), Ok(server2)) = (client.try_clone(), server.try_clone()) else {
                continue;
            };
            std::thread::spawn(move || pipe(client, server));
            std::thread::spawn(move || pipe(server2, client2));
        }
    });
}

#[test]
fn a_node_started_before_etcd_answers_waits_for_it_and_then_serves() -> Result<()> {
    let etcd = EtcdCluster::single()?;
    let real: SocketAddr = etcd.endpoints()[0]
        .trim_start_matches("http://")
        .parse()
        .context("etcd's endpoint")?;
    // A port nothing listens on yet: etcd "appears" there 8 s after the node starts, longer
    // than one request's own retries (5 s), so a startup step fails and is retried.
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let stop = Arc::new(AtomicBool::new(false));
    etcd_appearing_later(port, real, Duration::from_secs(8), Arc::clone(&stop));
    let endpoint = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    let node = Node::start_with(
        &endpoint,
        "n1",
        TTL_S,
        SHARDS,
        &["--etcd-startup-wait-s", "30"],
    )?;
    ensure!(
        started.elapsed() >= Duration::from_secs(7),
        "the node cannot have registered before etcd answered"
    );
    wait_settled(node.addr, 1, Duration::from_secs(10))?;
    create_topic(node.addr, &[node.addr])?;
    let member = Member::start(node.addr, &group_in_shard(0), 5)?;
    assert_eq!(fetch_offset(node.addr, &member.group)?, Some(5));
    let waited = node.log_lines(&["etcd cannot serve yet; retrying"]);
    assert!(
        !waited.is_empty(),
        "each failed attempt is logged as a WARN: {:?}",
        node.log_lines(&[])
    );
    stop.store(true, Ordering::Relaxed);
    Ok(())
}

#[test]
fn without_a_startup_wait_a_node_whose_etcd_does_not_answer_exits_saying_so() -> Result<()> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let dir = tempfile::tempdir()?;
    let endpoint = format!("http://127.0.0.1:{port}");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_musterd"))
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "off"])
        .args(["--cluster-etcd", &endpoint, "--etcd-startup-wait-s", "0"])
        .arg("--data-dir")
        .arg(dir.path())
        .output()?;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no etcd member answered"), "{stderr}");
    assert!(!stderr.contains("retrying"), "{stderr}");
    Ok(())
}

#[test]
fn a_node_restarted_after_sigkill_on_its_own_address_takes_its_registration_over_at_once(
) -> Result<()> {
    // A lease far longer than the test may take: the restarted node cannot wait it out.
    const LONG_TTL: u64 = 60;
    let etcd = EtcdCluster::single()?;
    let endpoints = etcd.endpoints().join(",");
    let mut first = Node::start(&endpoints, "n1", LONG_TTL)?;
    wait_settled(first.addr, 1, Duration::from_secs(10))?;
    create_topic(first.addr, &[first.addr])?;
    let member = Member::start(first.addr, &group_in_shard(3), 42)?;
    let addr = first.addr;
    first.kill();
    let restarted = Instant::now();
    let listen = addr.to_string();
    let second = Node::start_with(&endpoints, "n1", LONG_TTL, SHARDS, &["--listen", &listen])?;
    assert_eq!(second.addr, addr);
    // Serving the group again: its shard was freed with the previous life's lease.
    wait_for(Duration::from_secs(15), "the group served again", || {
        (fetch_offset(addr, &member.group).ok()? == Some(42)).then_some(())
    })?;
    assert!(restarted.elapsed() < Duration::from_secs(LONG_TTL));
    assert!(
        !second
            .log_lines(&["previous life is still registered", "revoking its lease"])
            .is_empty(),
        "{:?}",
        second.log_lines(&[])
    );
    let described = describe_cluster(addr)?;
    assert_eq!(described.nodes.len(), 1, "{described:?}");
    assert_eq!(described.nodes[0].shards.len(), SHARDS as usize);
    Ok(())
}
