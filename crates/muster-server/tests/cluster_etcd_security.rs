//! Cluster mode against etcd as production runs it (issue #24 item 2's "done when"): TLS with
//! client certificates required, authentication on, and a Muster user whose role may read and
//! write under `/muster/` only (`muster_etcd::testkit`'s secure cluster). Two real `musterd`
//! nodes serve groups through it and fail over after a SIGKILL, with etcd tokens that expire
//! after one idle second (whether a node's token does expire depends on its request gaps; that
//! re-authentication works is asserted by muster-etcd's `store::secure_tests`); and every way
//! the connection can be refused stops `musterd` at startup with a message saying what to fix,
//! without a panic and without hanging.

mod cluster_support;
mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use cluster_support::*;
use muster_etcd::testkit::{EtcdCluster, SecureOptions, TestUser};

const USER: &str = "muster-node";
const PASSWORD: &str = "node-password-5up3r";

/// A secure etcd with Muster's user (readwrite on /muster/), a user with rights elsewhere
/// only, and tokens that expire after `token_ttl_s` idle seconds.
fn secure_etcd(token_ttl_s: u64) -> Result<EtcdCluster> {
    Ok(EtcdCluster::secure(
        1,
        &SecureOptions {
            users: vec![
                TestUser::new(USER, PASSWORD, Some("/muster/")),
                TestUser::new("stranger", "stranger-password", Some("/elsewhere/")),
            ],
            auth_token_ttl_s: Some(token_ttl_s),
            jwt: false,
        },
    )?)
}

/// The flags of a node that reaches `etcd` over mTLS as `user`, its password in a file in
/// `dir`.
fn etcd_flags(etcd: &EtcdCluster, dir: &Path, user: &str, password: &str) -> Result<Vec<String>> {
    let pki = etcd.pki().context("a secure etcd")?;
    let password_file = dir.join(format!("{user}.password"));
    std::fs::write(&password_file, format!("{password}\n"))?;
    Ok([
        "--etcd-ca",
        &pki.ca.display().to_string(),
        "--etcd-cert",
        &pki.client.cert.display().to_string(),
        "--etcd-key",
        &pki.client.key.display().to_string(),
        "--etcd-user",
        user,
        "--etcd-password-file",
        &password_file.display().to_string(),
    ]
    .map(str::to_owned)
    .to_vec())
}

fn refs(flags: &[String]) -> Vec<&str> {
    flags.iter().map(String::as_str).collect()
}

#[test]
fn two_nodes_on_an_etcd_with_tls_and_auth_serve_and_fail_over() -> Result<()> {
    let etcd = secure_etcd(1)?;
    let endpoints = etcd.endpoints().join(",");
    let secrets = tempfile::tempdir()?;
    let flags = etcd_flags(&etcd, secrets.path(), USER, PASSWORD)?;
    let mut nodes: Vec<Node> = ["n1", "n2"]
        .iter()
        .map(|id| Node::start_with(&endpoints, id, TTL_S, SHARDS, &refs(&flags)))
        .collect::<Result<_>>()?;
    let addrs: Vec<_> = nodes.iter().map(|n| n.addr).collect();
    wait_settled(addrs[0], 2, Duration::from_secs(15))?;
    create_topic(addrs[1], &addrs)?;
    let mut members: Vec<Member> = (0..SHARDS)
        .map(|shard| Member::start(addrs[0], &group_in_shard(shard), 100 + i64::from(shard)))
        .collect::<Result<_>>()?;
    ensure!(
        members.iter().any(|m| m.node == "n1") && members.iter().any(|m| m.node == "n2"),
        "groups on both nodes"
    );

    // SIGKILL n1: its groups answer on n2 within the lease TTL + 2 s, same member and
    // generation, and n2 ends up with every shard.
    let killed_at = Instant::now();
    nodes[0].kill();
    let deadline = killed_at + Duration::from_secs(TTL_S + 2);
    for m in members.iter_mut().filter(|m| m.node == "n1") {
        let left = deadline.saturating_duration_since(Instant::now());
        let node = m.follow(&addrs[1..], left)?;
        ensure!(node == "n2", "{} moved to {node}", m.group);
    }
    eprintln!("failed over in {:?}", killed_at.elapsed());
    wait_settled(addrs[1], 1, Duration::from_secs(5))?;
    for (shard, m) in members.iter_mut().enumerate() {
        assert_eq!(
            fetch_offset(addrs[1], &m.group)?,
            Some(100 + shard as i64),
            "{}",
            m.group
        );
        assert_eq!(m.heartbeat()?, 0, "{} heartbeats on", m.group);
    }
    // The survivor writes the moved groups' commits through its own etcd user.
    for (shard, m) in members.iter_mut().enumerate() {
        assert_eq!(m.commit(200 + shard as i64)?, 0, "{} commits", m.group);
    }
    assert_eq!(fetch_offset(addrs[1], &members[3].group)?, Some(203));
    Ok(())
}

/// How a `musterd` start ended.
enum Started {
    Listening(std::process::Child),
    Exited { code: Option<i32>, log: String },
}

/// Starts `musterd` with `args` (and `env`), and waits for it to listen or to exit.
fn start_musterd(args: &[&str], env: &[(&str, &str)]) -> Result<Started> {
    let data = tempfile::tempdir()?;
    let mut child = Command::new(support::musterd_bin())
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "off"])
        .arg("--data-dir")
        .arg(data.path())
        .args(args)
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("spawn musterd")?;
    let stderr = child.stderr.take().context("stderr")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut log = String::new();
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(line) => {
                if line.contains("musterd listening") {
                    return Ok(Started::Listening(child));
                }
                log.push_str(&line);
                log.push('\n');
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait()?;
                return Ok(Started::Exited {
                    code: status.code(),
                    log,
                });
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("musterd neither listened nor exited within 30 s (a hang):\n{log}");
        }
    }
}

/// `musterd` with `args` must stop at startup, within 30 s, with every one of `expected` in
/// its log, no panic, and no `secret` shown.
fn refused(args: &[&str], expected: &[&str], secret: &str) -> Result<()> {
    match start_musterd(args, &[])? {
        Started::Listening(mut child) => {
            let _ = child.kill();
            let _ = child.wait();
            bail!("musterd started with {args:?}");
        }
        Started::Exited { code, log } => {
            ensure!(
                matches!(code, Some(1) | Some(2)),
                "exit code {code:?}:\n{log}"
            );
            ensure!(!log.contains("panicked"), "a panic:\n{log}");
            ensure!(!log.contains(secret), "the password shows:\n{log}");
            for part in expected {
                ensure!(log.contains(part), "{part:?} missing from:\n{log}");
            }
            eprintln!("refused as expected: {}", log.trim_end());
            Ok(())
        }
    }
}

#[test]
fn each_refusal_by_etcd_stops_musterd_at_startup_saying_what_to_fix() -> Result<()> {
    let etcd = secure_etcd(300)?;
    let pki = etcd.pki().context("a secure etcd")?;
    let endpoints = etcd.endpoints().join(",");
    let secrets = tempfile::tempdir()?;
    // No startup wait: a client certificate etcd refuses shows as a closed connection, which
    // a restarting etcd member can cause too, so startup would otherwise retry it for the
    // wait (`--etcd-startup-wait-s`, logging the reason each time).
    let cluster = ["--cluster-etcd", &endpoints, "--etcd-startup-wait-s", "0"];
    let with = |flags: &[String]| -> Vec<String> {
        cluster
            .iter()
            .map(|s| s.to_string())
            .chain(flags.iter().cloned())
            .collect()
    };

    // A wrong password.
    let flags = with(&etcd_flags(&etcd, secrets.path(), USER, "wrong-pa55word")?);
    refused(
        &refs(&flags),
        &["etcd refused user \"muster-node\": wrong user name or password"],
        "wrong-pa55word",
    )?;

    // A user whose role has no rights on /muster/.
    let flags = with(&etcd_flags(
        &etcd,
        secrets.path(),
        "stranger",
        "stranger-password",
    )?);
    refused(
        &refs(&flags),
        &[
            "etcd user \"stranger\" may not read and write under /muster/",
            "grant its role readwrite on that prefix",
        ],
        "stranger-password",
    )?;

    // A client certificate signed by another CA.
    let mut flags = with(&etcd_flags(&etcd, secrets.path(), USER, PASSWORD)?);
    let rogue_cert = pki.rogue_client.cert.display().to_string();
    let rogue_key = pki.rogue_client.key.display().to_string();
    replace_flag(&mut flags, "--etcd-cert", &rogue_cert);
    replace_flag(&mut flags, "--etcd-key", &rogue_key);
    refused(
        &refs(&flags),
        &[
            "no etcd member answered",
            "refused this client's certificate",
        ],
        PASSWORD,
    )?;

    // etcd's certificate checked against a CA that did not sign it.
    let mut flags = with(&etcd_flags(&etcd, secrets.path(), USER, PASSWORD)?);
    replace_flag(&mut flags, "--etcd-ca", &pki.rogue_ca.display().to_string());
    refused(
        &refs(&flags),
        &["invalid peer certificate", "UnknownIssuer"],
        PASSWORD,
    )?;

    // A client key that is not the certificate's: refused before any connection.
    let mut flags = with(&etcd_flags(&etcd, secrets.path(), USER, PASSWORD)?);
    replace_flag(&mut flags, "--etcd-key", &rogue_key);
    refused(
        &refs(&flags),
        &["etcd-key", "the private key does not match the certificate"],
        PASSWORD,
    )?;

    // A CA with http:// endpoints: a configuration error.
    let plain = endpoints.replace("https://", "http://");
    let mut flags = with(&etcd_flags(&etcd, secrets.path(), USER, PASSWORD)?);
    replace_flag(&mut flags, "--cluster-etcd", &plain);
    refused(
        &refs(&flags),
        &["invalid setting etcd-ca", "use https://"],
        PASSWORD,
    )?;

    // The password from the environment instead of a file: starts.
    let mut flags = with(&etcd_flags(&etcd, secrets.path(), USER, PASSWORD)?);
    let at = flags
        .iter()
        .position(|f| f == "--etcd-password-file")
        .context("the flag")?;
    flags.drain(at..at + 2);
    match start_musterd(&refs(&flags), &[("MUSTER_ETCD_PASSWORD", PASSWORD)])? {
        Started::Listening(mut child) => {
            let _ = child.kill();
            let _ = child.wait();
        }
        Started::Exited { log, .. } => bail!("refused the password from the environment:\n{log}"),
    }
    Ok(())
}

/// Sets the value after `flag` in `flags`.
fn replace_flag(flags: &mut [String], flag: &str, value: &str) {
    if let Some(at) = flags.iter().position(|f| f == flag) {
        if let Some(slot) = flags.get_mut(at + 1) {
            *slot = value.to_owned();
        }
    }
}
