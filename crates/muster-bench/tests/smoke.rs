//! Every scenario, tiny, against an in-process server: the benchmark keeps working as the
//! server changes. (Figures are not checked: this machine is shared; see docs/benchmarks.md.)

use std::time::Duration;

use anyhow::Result;
use muster_bench::scenario::{self, Common};
use muster_bench::target::Target;

fn common(target: &Target, name: &str) -> Common {
    Common {
        addr: target.addr,
        run_id: format!("smoke-{name}"),
        in_process: target.in_process,
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
    let target = Target::resolve("", true, None)?;
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
            },
        )
        .await?;
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
