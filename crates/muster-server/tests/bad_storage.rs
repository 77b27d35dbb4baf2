//! Bad storage is loud: the real binary refuses a data dir that another `musterd` holds, or
//! whose database is garbage, with a message naming the path and what to do, and exits
//! non-zero. It never resets the data to empty.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Result;
use support::start;

/// Runs `musterd` on `dir` expecting it to refuse to start; returns its stderr.
fn refused(dir: &std::path::Path) -> Result<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_musterd"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "off",
            "--data-dir",
        ])
        .arg(dir)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let started = std::time::Instant::now();
    while child.try_wait()?.is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            anyhow::bail!("musterd kept running on a bad data dir");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output()?;
    assert!(!output.status.success(), "must exit non-zero");
    Ok(String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn a_data_dir_held_by_another_musterd_is_refused() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("muster-locked-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (mut first, _) = start(&dir)?;
    let stderr = refused(&dir)?;
    assert!(stderr.contains("another musterd is using"), "{stderr}");
    assert!(
        stderr.contains(&dir.display().to_string()),
        "names the path: {stderr}"
    );
    first.kill()?;
    let _ = first.wait();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn a_corrupt_database_is_refused_and_left_alone() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("muster-corrupt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("muster.redb");
    let garbage = vec![0x5au8; 64 * 1024];
    std::fs::write(&file, &garbage)?;
    let stderr = refused(&dir)?;
    assert!(
        stderr.contains(&file.display().to_string()),
        "names the file: {stderr}"
    );
    assert!(stderr.contains("corrupt"), "{stderr}");
    assert_eq!(std::fs::read(&file)?, garbage, "the data is never reset");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
