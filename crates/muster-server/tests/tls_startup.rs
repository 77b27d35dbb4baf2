//! The real binary with TLS flags: bad certificate, key or CA files stop startup with a
//! message naming the file (never a server without TLS); good ones start it with TLS on.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Result;
use rcgen::{CertificateParams, DnType, KeyPair};

/// Writes a self-signed certificate for `localhost` and its key; returns (cert, key).
fn self_signed(dir: &Path, name: &str) -> Result<(PathBuf, PathBuf)> {
    let mut params = CertificateParams::new(vec!["localhost".to_owned()])?;
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    let (cert_path, key_path) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}-key.pem")),
    );
    std::fs::write(&cert_path, cert.pem())?;
    std::fs::write(&key_path, key.serialize_pem())?;
    Ok((cert_path, key_path))
}

fn temp_dir(name: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("muster-tls-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Runs `musterd` with `tls_args`, expecting it to refuse to start; returns its stderr.
fn refused(dir: &Path, tls_args: &[&Path]) -> Result<String> {
    let flags = ["--tls-cert", "--tls-key", "--tls-client-ca"];
    let mut command = Command::new(env!("CARGO_BIN_EXE_musterd"));
    command
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "off",
            "--data-dir",
        ])
        .arg(dir.join("data"));
    for (flag, path) in flags.iter().zip(tls_args) {
        command.arg(flag).arg(path);
    }
    let mut child = command
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let started = std::time::Instant::now();
    while child.try_wait()?.is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            anyhow::bail!("musterd kept running with bad TLS files");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output()?;
    assert!(!output.status.success(), "must exit non-zero");
    Ok(String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn bad_tls_files_stop_startup_naming_the_file() -> Result<()> {
    let dir = temp_dir("bad-files")?;
    let (cert, key) = self_signed(&dir, "server")?;
    let (_, other_key) = self_signed(&dir, "other")?;
    let stderr = refused(&dir, &[&cert, &other_key])?;
    assert!(
        stderr.contains("other-key.pem") && stderr.contains("does not match"),
        "{stderr}"
    );
    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "not a certificate")?;
    let stderr = refused(&dir, &[&garbage, &key])?;
    assert!(
        stderr.contains("garbage.pem") && stderr.contains("no CERTIFICATE"),
        "{stderr}"
    );
    let empty_ca = dir.join("empty-ca.pem");
    std::fs::write(&empty_ca, "")?;
    let stderr = refused(&dir, &[&cert, &key, &empty_ca])?;
    assert!(stderr.contains("empty-ca.pem"), "{stderr}");
    let missing = dir.join("missing.pem");
    let stderr = refused(&dir, &[&cert, &missing])?;
    assert!(
        stderr.contains("missing.pem") && stderr.contains("cannot read"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn good_tls_files_start_the_server_with_tls() -> Result<()> {
    let dir = temp_dir("good-files")?;
    let (cert, key) = self_signed(&dir, "server")?;
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    let (mut child, addr) =
        support::start_with(&dir.join("data"), &["--tls-cert", &cert, "--tls-key", &key])?;
    // A plaintext Hello gets no Muster answer: the port speaks TLS.
    assert!(
        support::Conn::connect(addr).is_err(),
        "a plaintext Hello was answered"
    );
    child.kill()?;
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
