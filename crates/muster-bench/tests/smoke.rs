//! Every scenario, tiny, against a real `musterd` started by `--spawn`'s code: the benchmark
//! keeps working as the server changes. (Figures are not checked: this machine is shared; see
//! docs/benchmarks.md.)
//!
//! The `musterd` binary is `MUSTER_BENCH_MUSTERD` when set, else the one in this test's
//! target directory and profile (`cargo test --workspace` builds it before any test runs).
//! When that one is missing or older than the server's sources, the test builds it with the
//! cargo that built the test, so it never runs an old server. (A dependency cannot hand
//! another package's binary to a test: `CARGO_BIN_EXE_*` is only for the test's own package.
//! Building every time would not do either: `cargo build -p muster-server` resolves features
//! for that package alone and would rebuild a workspace build's dependencies.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context as _, Result};
use muster_bench::attack::Attack;
use muster_bench::scenario::{self, Common};
use muster_bench::target::{locate_musterd, Target, MUSTERD_ENV};

/// The `musterd` to run: `MUSTER_BENCH_MUSTERD`, or an up-to-date build next to this test.
fn musterd() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(MUSTERD_ENV) {
        return Ok(path.into());
    }
    if let Ok(found) = locate_musterd(None) {
        if !server_sources_newer_than(&found) {
            return Ok(found);
        }
    }
    // This test runs as <target dir>/<profile dir>/deps/smoke-<hash>.
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .context("test executable outside a target directory")?;
    let target_dir = profile_dir.parent().context("no target directory")?;
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev",
        Some(other) => other,
    };
    let output = Command::new(env!("CARGO"))
        .args([
            "build",
            "--locked",
            "-p",
            "muster-server",
            "--bin",
            "musterd",
        ])
        .args(["--profile", profile, "--target-dir"])
        .arg(target_dir)
        .output()
        .context("run cargo build for musterd")?;
    if !output.status.success() {
        bail!(
            "cargo build of musterd failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    locate_musterd(None)
}

/// Whether a file of the crates `musterd` is built from, or `Cargo.lock`, changed after
/// `binary` was built.
fn server_sources_newer_than(binary: &Path) -> bool {
    let Ok(built) = std::fs::metadata(binary).and_then(|m| m.modified()) else {
        return true;
    };
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    ["muster-server", "muster-coordinator", "muster-protocol"]
        .iter()
        .map(|c| crates.join(c))
        .chain([crates.join("../Cargo.lock")])
        .any(|path| modified_after(&path, built))
}

fn modified_after(path: &Path, time: SystemTime) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if meta.is_dir() {
        return std::fs::read_dir(path)
            .into_iter()
            .flatten()
            .flatten()
            .any(|entry| modified_after(&entry.path(), time));
    }
    meta.modified().is_ok_and(|m| m > time)
}

fn common(target: &Target, name: &str) -> Common {
    Common {
        addr: target.addr,
        run_id: format!("smoke-{name}"),
        pid: target.pid,
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

#[test]
fn every_scenario_runs() -> Result<()> {
    let target = Target::spawn(&musterd()?, None)?;
    // `idle` reads the server's memory, not this process's.
    assert!(target.pid.is_some_and(|pid| pid != std::process::id()));
    let rt = runtime()?;
    rt.block_on(async {
        let report = scenario::rebalance::run(
            &common(&target, "rebalance"),
            &scenario::rebalance::Options {
                members: 5,
                groups: 3,
                repeats: 2,
                connections: Some(2),
                partitions: None,
                heartbeat_ms: Some(50),
                session_timeout_ms: 10_000,
                rebalance_timeout_ms: 30_000,
                no_leave: false,
                settle_limit: Duration::from_secs(30),
                idle_groups: 3,
            },
        )
        .await?;
        assert_eq!(report.json["idle_groups"].as_u64(), Some(3));
        assert!(
            report.json["rss_start"].as_u64() > Some(0),
            "{}",
            report.text
        );
        assert_eq!(
            report.json["rss_formed"].as_array().map(Vec::len),
            Some(2),
            "{}",
            report.text
        );
        assert_eq!(
            report.json["join_to_sync"]["values_ms"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
        assert_eq!(
            report.json["rejoin_all"]["values_ms"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
        assert!(report.json["leave_settle"]["p50_ms"].as_f64().is_some());

        let load = scenario::heartbeat::Options {
            connections: 4,
            pipeline: 4,
            duration: Duration::from_millis(300),
            warmup: Duration::from_millis(100),
            group_size: 2,
            compare_echo: true,
            echo_threads: 1,
        };
        let report = scenario::heartbeat::run(&common(&target, "heartbeat"), &load).await?;
        assert!(
            report.json["muster"]["ok"].as_u64() > Some(0),
            "{}",
            report.text
        );
        assert_eq!(
            report.json["muster"]["failed"].as_u64(),
            Some(0),
            "{}",
            report.text
        );
        assert!(
            report.json["echo"]["ok"].as_u64() > Some(0),
            "{}",
            report.text
        );
        assert!(report.json["ratio"].as_f64().is_some());

        let report = scenario::commit::run(
            &common(&target, "commit"),
            &scenario::commit::Options {
                connections: 2,
                partitions: 3,
                pipeline: 2,
                duration: Duration::from_millis(300),
                warmup: Duration::from_millis(100),
            },
        )
        .await?;
        assert!(report.json["ok"].as_u64() > Some(0), "{}", report.text);
        assert_eq!(report.json["failed"].as_u64(), Some(0), "{}", report.text);

        let report = scenario::idle::run(
            &common(&target, "idle"),
            &scenario::idle::Options {
                groups: 4,
                members: 3,
                connections: Some(2),
                pause: Duration::from_millis(10),
                batch: 2,
                hold: Duration::ZERO,
            },
        )
        .await?;
        assert!(report.json["bytes_per_member"].as_f64().is_some());

        let report = scenario::expiry::run(
            &common(&target, "expiry"),
            &scenario::expiry::Options {
                members: 2,
                session_timeout_ms: 300,
                heartbeat_ms: Some(30),
                repeats: 1,
            },
        )
        .await?;
        let late = report.json["describe_lateness"]["p50_ms"].as_f64();
        assert!(late.is_some_and(|ms| ms > -5.0), "{}", report.text);
        anyhow::Ok(())
    })?;
    // The runtime goes before the server, so no client task outlives it.
    drop(rt);
    target.stop();
    Ok(())
}

/// `commit --compare-history`, tiny: each configuration on its own fresh server commits
/// without failures, and the fill finds history's bytes on disk.
#[test]
fn commit_history_comparison_runs() -> Result<()> {
    let mut target = Target::spawn(&musterd()?, None)?;
    let rt = runtime()?;
    let common = common(&target, "history");
    let report = rt.block_on(scenario::history::run(
        &common,
        &mut target,
        &scenario::history::Options {
            load: scenario::commit::Options {
                connections: 2,
                partitions: 3,
                pipeline: 1,
                duration: Duration::from_millis(300),
                warmup: Duration::from_millis(100),
            },
            rounds: 2,
            fill_partitions: 200,
            fill_commits: 5,
            // Well past musterd's offset_history_flush_ms (200 ms), so the history is on disk
            // then even on a loaded machine (at 600 ms a CI run once measured no history on
            // disk, the flush not yet done).
            pause: Duration::from_millis(2_000),
        },
    ))?;
    drop(rt);
    target.stop();
    for config in ["off", "on"] {
        let summary = &report.json[config];
        assert_eq!(summary["rounds"].as_array().map(Vec::len), Some(2));
        assert!(
            summary["commits_per_second"].as_f64() > Some(0.0),
            "{}",
            report.text
        );
        assert_eq!(summary["failed"].as_u64(), Some(0), "{}", report.text);
    }
    assert!(report.json["throughput_ratio"].as_f64() > Some(0.0));
    let fill = &report.json["fill"];
    assert_eq!(fill["entries_per_partition"].as_u64(), Some(5));
    assert!(fill["memory_bytes_per_entry"].as_f64().is_some());
    assert!(
        fill["on"]["disk_filled"].as_u64() > fill["off"]["disk_filled"].as_u64(),
        "{}",
        report.text
    );
    Ok(())
}

/// `parked`, tiny: the same data loaded live and parked, and a group loaded parked still
/// answers with its offset over TCP (woken by the request).
#[test]
fn parked_comparison_runs() -> Result<()> {
    use muster_bench::client::Conn;
    use muster_protocol::{OffsetFetchRequest, Response};

    let mut target = Target::spawn(&musterd()?, None)?;
    let rt = runtime()?;
    let common = common(&target, "parked");
    let report = rt.block_on(scenario::parked::run(
        &common,
        &mut target,
        &scenario::parked::Options {
            groups: 50,
            rounds: 1,
            pause: Duration::from_millis(200),
        },
    ))?;
    assert_eq!(report.json["rss_live"].as_array().map(Vec::len), Some(1));
    assert_eq!(report.json["rss_parked"].as_array().map(Vec::len), Some(1));
    // Each restart timed until the last group's offset was answered.
    for config in ["restart_s_live", "restart_s_parked"] {
        let times = report.json[config].as_array().context("restart times")?;
        assert_eq!(times.len(), 1);
        assert!(times[0].as_f64() > Some(0.0), "{}", report.text);
    }
    // The last start parked every group it loaded.
    let fetched = rt.block_on(async {
        let conn = Conn::connect(target.addr, "smoke").await?;
        conn.call(OffsetFetchRequest {
            group_id: format!("{}-parked-7", common.run_id),
            topics: None,
        })
        .await
    })?;
    let Response::OffsetFetch(fetched) = fetched else {
        bail!("not an OffsetFetch answer: {fetched:?}");
    };
    assert_eq!(fetched.topics[0].partitions[0].offset, 1, "{fetched:?}");
    drop(rt);
    target.stop();
    Ok(())
}

/// `join-one`, tiny, both protocols in one run: each side forms, takes a newcomer and loses a
/// member, and the members' views stay sound (no partition with two owners, none left
/// unowned). The server's consumer heartbeat interval is its lowest (100 ms), as the
/// benchmark's `--spawn` sets it from `--heartbeat-ms`.
/// `one-join --compare`: a redb server, a memory-store server and a real etcd's watchers (the
/// etcd is `$MUSTER_ETCD_BIN` or `etcd` on `PATH`, as for the cluster tests), one round.
#[test]
fn one_join_comparison_runs() -> Result<()> {
    let mut target = Target::spawn(&musterd()?, None)?;
    let rt = runtime()?;
    let report = rt.block_on(scenario::one_join::run(
        &common(&target, "one-join"),
        &mut target,
        &scenario::one_join::Options {
            members: 4,
            repeats: 2,
            connections: Some(2),
            heartbeat_ms: Some(50),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            settle_limit: Duration::from_secs(30),
            compare: true,
            rounds: 1,
            etcd: None,
        },
    ))?;
    for figure in ["redb", "memory", "etcd_watch", "etcd_put"] {
        assert_eq!(
            report.json[figure]["all"]["values_ms"]
                .as_array()
                .map(Vec::len),
            Some(2),
            "{figure}: {}",
            report.text
        );
    }
    assert!(
        report.json["redb_ratio"].as_f64() > Some(0.0),
        "{}",
        report.text
    );
    target.stop();
    Ok(())
}

#[test]
fn join_one_runs() -> Result<()> {
    let target = Target::spawn_with(
        &musterd()?,
        None,
        vec!["--consumer-heartbeat-interval-ms".into(), "100".into()],
    )?;
    let rt = runtime()?;
    let report = rt.block_on(scenario::join_one::run(
        &common(&target, "join-one"),
        &scenario::join_one::Options {
            members: 3,
            partitions: 12,
            protocols: scenario::join_one::Protocol::parse_list("both")?,
            repeats: 1,
            connections: Some(2),
            heartbeat: Duration::from_millis(100),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            assignor: "uniform".to_owned(),
            baseline: Duration::from_millis(200),
            no_leave: false,
            settle_limit: Duration::from_secs(30),
        },
    ))?;
    drop(rt);
    target.stop();
    let sides = report.json["sides"].as_array().context("sides")?;
    let names: Vec<_> = sides
        .iter()
        .filter_map(|s| s["protocol"].as_str())
        .collect();
    assert_eq!(names, ["classic", "consumer"], "{}", report.text);
    for side in sides {
        assert_eq!(
            side["heartbeat_interval_ms"].as_u64(),
            Some(100),
            "{}",
            report.text
        );
        for phase in ["join", "leave"] {
            let changes = side[phase]["changes"].as_array().context("changes")?;
            assert_eq!(changes.len(), 1, "{}", report.text);
            let change = &changes[0];
            assert_eq!(change["overlaps"].as_u64(), Some(0), "{}", report.text);
            assert_eq!(
                change["unowned_at_end"].as_u64(),
                Some(0),
                "{}",
                report.text
            );
            assert_eq!(change["others"].as_u64(), Some(3), "{}", report.text);
            assert!(change["moved"].as_u64() > Some(0), "{}", report.text);
        }
        // The newcomer ended with a share, and got it some time after its first request.
        assert!(
            side["join"]["subject"]["p50_ms"].as_f64() > Some(0.0),
            "{}",
            report.text
        );
    }
    // Eager classic members all give up everything when one joins.
    assert_eq!(
        sides[0]["join"]["changes"][0]["stopped"].as_u64(),
        Some(12),
        "{}",
        report.text
    );
    Ok(())
}

/// `hostile`, tiny: two short attacks against a few victims, and the report says what each
/// attack got and whether the server survived. (Whether it defended itself is for the full
/// benchmark, not for a test.)
#[test]
fn hostile_runs() -> Result<()> {
    let mut target = Target::spawn_with_admin(&musterd()?, None)?;
    assert!(target.admin.is_some(), "the admin listener's address");
    let common = common(&target, "hostile");
    let rt = runtime()?;
    let report = rt.block_on(scenario::hostile::run(
        &common,
        &scenario::hostile::Options {
            groups: 2,
            members: 2,
            victim_heartbeat: Duration::from_millis(20),
            victim_connections: 2,
            baseline: Duration::from_millis(300),
            phase: Duration::from_millis(400),
            recovery: Duration::from_millis(300),
            attacks: vec![Attack::Garbage, Attack::JoinFlood, Attack::Slowloris],
            attack_connections: 1,
            flood_connections: 20,
            admin_connections: 5,
            max_requests: 50,
            max_frame: 64 * 1024,
            rss_limit: 4 << 30,
            fresh_server: true,
        },
        &mut target,
    ))?;
    drop(rt);
    target.stop();
    let phases = report.json["phases"].as_array().context("phases")?;
    let names: Vec<_> = phases.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(
        names,
        ["baseline", "garbage", "join-flood", "slowloris", "recovery"],
        "{}",
        report.text
    );
    // fresh_server: a new server after each attack but the last.
    assert_eq!(report.json["restarts"].as_u64(), Some(2), "{}", report.text);
    for phase in phases {
        assert!(phase["victim"]["ok"].as_u64() > Some(0), "{}", report.text);
        assert!(
            phase["rss_peak_mib"].as_f64() > Some(0.0),
            "{}",
            report.text
        );
    }
    for attack in &phases[1..4] {
        assert!(
            attack["attack"]["sent"].as_u64() > Some(0),
            "{}",
            report.text
        );
    }
    // Garbage is answered (INVALID_REQUEST today), or the connection is closed.
    let garbage = &phases[1]["attack"];
    assert!(
        garbage["answers"]
            .as_object()
            .is_some_and(|a| !a.is_empty())
            || garbage["disconnects"].as_u64() > Some(0),
        "{}",
        report.text
    );
    assert!(
        phases[2]["attack"]["answers"]
            .as_object()
            .is_some_and(|a| a.keys().any(|k| k.starts_with("JoinGroup:"))),
        "{}",
        report.text
    );
    assert!(
        phases[3]["attack"]["extra"]["probe_ok"].as_u64() > Some(0),
        "{}",
        report.text
    );
    Ok(())
}

/// A server that cannot start is an error naming the cause, not a hang.
#[test]
fn a_musterd_that_cannot_start_is_reported() {
    let e = Target::spawn(std::path::Path::new("/nonexistent/musterd"), None)
        .err()
        .expect("no such binary");
    assert!(e.to_string().contains("/nonexistent/musterd"), "{e:#}");
    // `false` exits at once without a log line.
    if std::path::Path::new("/bin/false").exists() {
        let e = Target::spawn(std::path::Path::new("/bin/false"), None)
            .err()
            .expect("exits at once");
        assert!(e.to_string().contains("exited before listening"), "{e:#}");
    }
}
