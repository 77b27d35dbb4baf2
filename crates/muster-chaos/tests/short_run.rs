//! The chaos harness's short run (docs/reliability.md, "Chaos harness"): 60 s of nemesis on
//! a three-member etcd, three nodes and 20 workers (one classic group, one consumer group),
//! and the checker must find nothing. It fails when etcd is missing (the harness says how to
//! install it), like every cluster-mode test.
//!
//! `musterd` is `$MUSTER_BIN_DIR/musterd` when that is set; otherwise this test's cargo
//! builds it into this test's own target directory and profile (a no-op when up to date),
//! so the run never uses an old server.

mod common;

use std::process::Command;

use common::musterd;

#[test]
fn sixty_seconds_of_kills_pauses_and_cuts_break_no_rule() {
    let musterd = musterd();
    let out = std::env::temp_dir().join(format!("muster-chaos-short-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let output = Command::new(env!("CARGO_BIN_EXE_muster-chaos"))
        .args([
            "run",
            "--duration",
            "60s",
            "--seed",
            "2401",
            "--protocol",
            "both",
        ])
        .args(["--workers", "20", "--partitions", "30"])
        .arg("--out")
        .arg(&out)
        .arg("--musterd")
        .arg(&musterd)
        .output()
        .expect("the harness runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the chaos run failed ({}); histories and logs in {}\n{stdout}\n{stderr}",
        output.status,
        out.display()
    );
    // The run did inject faults of every class ("  kill node: 3" lines).
    let injected = |class: &str| -> usize {
        stdout
            .lines()
            .filter_map(|l| {
                let (what, n) = l.trim().split_once(": ")?;
                let (kind, target) = what.split_once(' ')?;
                let counted = ["kill", "pause", "cut"].contains(&kind) && target == class;
                counted.then(|| n.parse::<usize>().ok()).flatten()
            })
            .sum()
    };
    for class in ["node", "etcd", "worker"] {
        assert!(injected(class) > 0, "no {class} fault in 60 s:\n{stdout}");
    }
    assert!(stdout.contains("violations: 0"), "{stdout}");
    assert!(
        stdout.contains("settle chaos-classic: ") && stdout.contains("settle chaos-consumer: ")
    );
    let _ = std::fs::remove_dir_all(&out);
}
