//! A principal's `max_connections` (auth file) against the real binary: its connections past
//! the limit are refused at Hello with TOO_MANY_CONNECTIONS and closed, another principal is
//! not affected, a closed connection frees its place, and a reload changes the limit.

mod support;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use muster_protocol::ErrorCode;

const TOKEN_A: &str = "token-of-principal-a";
const TOKEN_B: &str = "token-of-principal-b";

fn sha256_hex(text: &str) -> String {
    muster_auth::TokenHash::of(text).to_hex()
}

fn auth_file(max_a: u32) -> String {
    format!(
        "[[principals]]\nname = \"a\"\ntoken_sha256 = \"{}\"\nmax_connections = {max_a}\n\n\
         [[principals]]\nname = \"b\"\ntoken_sha256 = \"{}\"\n",
        sha256_hex(TOKEN_A),
        sha256_hex(TOKEN_B)
    )
}

/// A connection that sent Hello with `token`; the Hello's error code.
fn hello(addr: SocketAddr, token: &str) -> Result<(TcpStream, i16)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let code = support::hello_over(&mut stream, Some(token))?;
    Ok((stream, code))
}

/// Hellos until one gets `code` (a place frees once the server has seen the close).
fn until(addr: SocketAddr, token: &str, code: ErrorCode) -> Result<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (stream, got) = hello(addr, token)?;
        if got == code.code() {
            return Ok(stream);
        }
        if Instant::now() > deadline {
            bail!("Hello still answered {got}, not {}", code.name());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_principal_past_its_max_connections_is_refused_at_hello() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("muster-principal-conns-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("auth.toml");
    std::fs::write(&file, auth_file(2))?;
    let file_arg = file.display().to_string();
    let (mut child, addr) = support::start_with(&dir.join("data"), &["--auth-file", &file_arg])?;

    let (first, code) = hello(addr, TOKEN_A)?;
    assert_eq!(code, 0);
    let (_second, code) = hello(addr, TOKEN_A)?;
    assert_eq!(code, 0);
    let (mut third, code) = hello(addr, TOKEN_A)?;
    assert_eq!(code, ErrorCode::TooManyConnections.code(), "the third of a");
    // Closed by the server after the answer.
    let mut rest = Vec::new();
    assert_eq!(third.read_to_end(&mut rest)?, 0, "closed");
    // Another principal is not counted against a.
    let (_b, code) = hello(addr, TOKEN_B)?;
    assert_eq!(code, 0);
    // A closed connection frees its place.
    drop(first);
    let _again = until(addr, TOKEN_A, ErrorCode::None)?;

    // A reload raises the limit: one more fits; the connections open stay counted.
    std::fs::write(&file, auth_file(3))?;
    let status = std::process::Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()?;
    assert!(status.success());
    let _fourth = until(addr, TOKEN_A, ErrorCode::None)?;
    let (_, code) = hello(addr, TOKEN_A)?;
    assert_eq!(
        code,
        ErrorCode::TooManyConnections.code(),
        "3 open, at the new limit"
    );

    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
