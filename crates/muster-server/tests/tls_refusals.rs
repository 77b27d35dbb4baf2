//! The real binary refusing client certificates (mTLS): the log names the cause an operator
//! can act on. The certificates are made with the `openssl` command line exactly as an
//! operator following an older recipe would (`openssl x509 -req` with no extension file makes
//! an X.509 v1 certificate); `cargo xtask test` installs openssl, and a machine without it
//! fails this test, naming it.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

fn openssl(dir: &Path, args: &[&str]) -> Result<()> {
    let output = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .context("the openssl command line is needed (cargo xtask test installs it)")?;
    if !output.status.success() {
        bail!(
            "openssl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// A CA, a v3 server certificate for 127.0.0.1 (as docs/security.md makes it) and a client
/// certificate signed without an extension file: version 1.
fn make_pki(dir: &Path) -> Result<()> {
    let ec = ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"];
    for key in ["ca.key", "server.key", "client.key"] {
        let mut args = vec!["genpkey"];
        args.extend(ec);
        args.extend(["-out", key]);
        openssl(dir, &args)?;
    }
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-key",
            "ca.key",
            "-sha256",
            "-days",
            "2",
            "-subj",
            "/CN=test-ca",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-out",
            "ca.pem",
        ],
    )?;
    std::fs::write(
        dir.join("server.ext"),
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
         extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n",
    )?;
    for (name, ext) in [("server", Some("server.ext")), ("client", None)] {
        let (key, csr, pem) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
        );
        openssl(
            dir,
            &[
                "req",
                "-new",
                "-key",
                &key,
                "-subj",
                &format!("/CN={name}"),
                "-out",
                &csr,
            ],
        )?;
        let mut args = vec![
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-sha256",
            "-out",
            &pem,
        ];
        if let Some(ext) = ext {
            args.extend(["-extfile", ext]);
        }
        openssl(dir, &args)?;
    }
    Ok(())
}

/// Starts musterd with `args`; its address, and every log line as it comes.
fn start_logged(
    args: &[&str],
) -> Result<(std::process::Child, SocketAddr, mpsc::Receiver<String>)> {
    let mut child = Command::new(support::musterd_bin())
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "off",
            "--log-format",
            "text",
        ])
        .args(args)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("spawn musterd")?;
    let stderr = child.stderr.take().context("stderr")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let line = rx.recv_timeout(Duration::from_millis(100));
        if let Ok(line) = line {
            if line.contains("musterd listening") {
                if let Some(addr) = line
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("local_addr="))
                {
                    return Ok((child, addr.parse()?, rx));
                }
            }
        }
    }
    let _ = child.kill();
    bail!("musterd did not report its address")
}

#[test]
fn a_version_1_client_certificate_is_refused_with_its_cause_in_the_log() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("muster-tls-v1-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    make_pki(&dir)?;
    let path = |name: &str| dir.join(name).display().to_string();
    let data = path("data");
    let (mut child, addr, log) = start_logged(&[
        "--data-dir",
        &data,
        "--tls-cert",
        &path("server.pem"),
        "--tls-key",
        &path("server.key"),
        "--tls-client-ca",
        &path("ca.pem"),
    ])?;

    // openssl's client presents the v1 certificate as any non-Rust client would (rustls
    // itself will not load a v1 certificate to present).
    let client = Command::new("openssl")
        .current_dir(&dir)
        .args([
            "s_client",
            "-connect",
            &addr.to_string(),
            "-cert",
            "client.pem",
        ])
        .args([
            "-key",
            "client.key",
            "-CAfile",
            "ca.pem",
            "-verify_return_error",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut client = client.context("openssl s_client")?;
    if let Some(mut input) = client.stdin.take() {
        // TLS 1.3: the server checks the client's certificate once the client's handshake
        // ends; data is sent so that the exchange gets that far.
        let _ = input.write_all(b"hello\n");
    }

    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    let refusal = loop {
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("no refusal logged; the log was:\n{}", seen.join("\n"));
        }
        if let Ok(line) = log.recv_timeout(Duration::from_millis(100)) {
            if line.contains("TLS client refused") {
                break line;
            }
            seen.push(line);
        }
    };
    let _ = client.kill();
    let _ = client.wait();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        refusal.contains("X.509 v1; v3 is required"),
        "the log line names the cause: {refusal}"
    );
    assert!(refusal.contains("bad_certificate"), "{refusal}");
    eprintln!("the refusal as logged: {refusal}");
    Ok(())
}
