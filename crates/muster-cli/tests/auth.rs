//! `muster auth hash-token | check`, the real binary, with no server anywhere: the line it
//! prints parses as the auth file's and matches the token; `check` summarises a valid file
//! and refuses a broken one with its line, exiting 1.

use std::time::Duration;

use assert_cmd::Command;
use muster_auth::AuthFile;
use predicates::prelude::*;
use serde_json::Value;

/// `echo -n test | sha256sum`.
const TEST_HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

fn muster(args: &[&str]) -> Command {
    let mut cmd = Command::cargo_bin("muster").expect("the muster binary is built");
    // A server address that answers nothing: `auth` must not try it.
    cmd.env("MUSTER_SERVER", "127.0.0.1:1")
        .env_remove("MUSTER_TOKEN")
        .args(args)
        .timeout(Duration::from_secs(20));
    cmd
}

#[test]
fn hash_token_reads_stdin_without_its_newline() {
    muster(&["auth", "hash-token"])
        .write_stdin("test\n")
        .assert()
        .success()
        .stdout(format!("token_sha256 = \"{TEST_HASH}\"\n"))
        .stderr("");
    muster(&["auth", "hash-token", "--token-stdin"])
        .write_stdin("test")
        .assert()
        .success()
        .stdout(format!("token_sha256 = \"{TEST_HASH}\"\n"));
}

#[test]
fn a_token_argument_works_but_warns_about_shell_history() {
    muster(&["auth", "hash-token", "test"])
        .assert()
        .success()
        .stdout(format!("token_sha256 = \"{TEST_HASH}\"\n"))
        .stderr(predicate::str::contains("shell history"));
}

#[test]
fn an_empty_token_is_a_usage_error() {
    muster(&["auth", "hash-token"])
        .write_stdin("\n")
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("empty"));
}

#[test]
fn generate_prints_a_new_token_and_its_line() {
    let run = |json: bool| -> (String, String) {
        let mut args = vec!["auth", "hash-token", "--generate"];
        if json {
            args.push("--json");
        }
        let out = muster(&args).assert().success().get_output().stdout.clone();
        let out = String::from_utf8(out).expect("utf-8");
        if json {
            let v: Value = serde_json::from_str(&out).expect("json");
            let field = |k: &str| v[k].as_str().expect("a string field").to_owned();
            (
                field("token"),
                format!("token_sha256 = \"{}\"", field("token_sha256")),
            )
        } else {
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines.len(), 2, "{out}");
            (lines[0].to_owned(), lines[1].to_owned())
        }
    };
    let (token, line) = run(false);
    assert_eq!(token.len(), 64, "{token}");
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()), "{token}");
    let file = AuthFile::parse(&format!("[[principals]]\nname = \"svc\"\n{line}\n"))
        .expect("the printed line parses");
    assert_eq!(
        file.principal_for_token(&token).map(|p| p.name.as_str()),
        Some("svc")
    );
    // The hash printed is the one of the token printed, and stdin's hash agrees.
    muster(&["auth", "hash-token"])
        .write_stdin(token.clone())
        .assert()
        .success()
        .stdout(format!("{line}\n"));
    let (other, other_line) = run(true);
    assert_ne!(other, token, "two generated tokens are different");
    assert!(
        AuthFile::parse(&format!("[[principals]]\nname = \"svc\"\n{other_line}\n"))
            .expect("json line parses")
            .principal_for_token(&other)
            .is_some()
    );
}

const GOOD: &str = r#"
[[principals]]
name = "orders-service"
token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
max_groups = 100
max_members = 1000
max_requests_per_s = 5000
max_connections = 50

[[principals]]
name = "ops"

[[acls]]
principal = "orders-service"
resource = "group"
pattern = "orders-*"
operations = ["read"]

[[acls]]
principal = "ops"
resource = "cluster"
pattern = "*"
operations = ["admin"]
"#;

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write the auth file");
    path.to_str().expect("utf-8 path").to_owned()
}

#[test]
fn check_summarises_a_valid_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(&dir, "auth.toml", GOOD);
    let out = muster(&["auth", "check", &path])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).expect("utf-8");
    assert!(
        out.starts_with(&format!("{path}: valid, 2 principals, 2 ACLs")),
        "{out}"
    );
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    assert!(
        rows.contains(&vec![
            "orders-service",
            "token",
            "100",
            "1000",
            "5000",
            "50"
        ]),
        "{out}"
    );
    assert!(
        rows.contains(&vec!["ops", "certificate", "-", "-", "-", "-"]),
        "{out}"
    );
    // Implied operations are shown: group read implies describe.
    assert!(
        rows.contains(&vec![
            "orders-service",
            "group",
            "orders-*",
            "read, describe"
        ]),
        "{out}"
    );
    assert!(
        rows.contains(&vec!["ops", "cluster", "*", "admin"]),
        "{out}"
    );

    let json = muster(&["auth", "check", &path, "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&json).expect("json");
    assert_eq!(v["principals"][0]["name"], "orders-service");
    assert_eq!(v["principals"][0]["authentication"], "token");
    assert_eq!(v["principals"][0]["max_members"], 1000);
    assert_eq!(v["principals"][0]["max_connections"], 50);
    assert_eq!(v["principals"][1]["authentication"], "certificate");
    assert_eq!(v["principals"][1]["max_groups"], Value::Null);
    assert_eq!(
        v["principals"][0]["acls"][0]["operations"],
        serde_json::json!(["read", "describe"])
    );
    assert_eq!(v["acls_for_everyone"], serde_json::json!([]));
}

#[test]
fn check_notes_principals_that_can_do_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(&dir, "auth.toml", "[[principals]]\nname = \"idle\"\n");
    muster(&["auth", "check", &path])
        .assert()
        .success()
        .stderr(predicate::str::contains("no ACL grants anything to idle"));
}

#[test]
fn check_refuses_a_broken_file_with_its_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broken = GOOD.replace(
        r#"operations = ["read"]"#,
        r#"operations = ["read", "write"]"#,
    );
    let path = write(&dir, "auth.toml", &broken);
    let line = broken
        .lines()
        .position(|l| l.contains("\"write\""))
        .expect("the bad line")
        + 1;
    muster(&["auth", "check", &path])
        .assert()
        .code(1)
        .stdout("")
        .stderr(
            predicate::str::contains(format!("line {line}, column")).and(predicate::str::contains(
                "\"write\" is not an operation on a group",
            )),
        );
    let missing = dir.path().join("missing.toml");
    muster(&["auth", "check", missing.to_str().expect("utf-8")])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cannot read"));
}

/// The walkthrough in docs/security.md shows `muster auth check` on its example file: that is
/// what the binary prints for it.
#[test]
fn the_security_docs_show_what_check_prints() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/security.md"
    ))
    .expect("docs/security.md");
    let example = doc
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the example auth file");
    let shown = doc
        .split("$ muster auth check /etc/muster/auth.toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the documented output");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(&dir, "auth.toml", example);
    let out = muster(&["auth", "check", &path])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out)
        .expect("utf-8")
        .replace(&path, "/etc/muster/auth.toml");
    assert_eq!(out, shown);
}
