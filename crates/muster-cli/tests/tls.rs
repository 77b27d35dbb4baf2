//! The real `muster` binary over TLS and mTLS (`--tls-ca`, `--tls-client-cert`,
//! `--tls-client-key`, `--tls-server-name`, and their MUSTER_TLS_* environment variables)
//! against a real server started in-process on `127.0.0.1:0`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use assert_cmd::Command;
use muster_coordinator::storage::MemoryStore;
use muster_server::tls::TlsSettings;
use muster_server::{spawn, ServerOptions, ServerThread};
use predicates::prelude::*;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A CA, a server certificate for `localhost` and 127.0.0.1, and a client certificate with
/// CN `ops`, as PEM files in a fresh directory.
struct Files {
    dir: PathBuf,
}

impl Files {
    fn new() -> Files {
        let dir = std::env::temp_dir().join(format!(
            "muster-cli-tls-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "cli test CA");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key"))
            .expect("CA certificate");
        std::fs::write(dir.join("ca.pem"), ca.pem()).expect("write CA");
        let issue = |name: &str, cn: &str, sans: Vec<String>, usage| {
            let mut params = CertificateParams::new(sans).expect("params");
            params.distinguished_name.push(DnType::CommonName, cn);
            params.extended_key_usages = vec![usage];
            let key = KeyPair::generate().expect("key");
            let cert = params.signed_by(&key, &ca).expect("sign");
            std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).expect("write cert");
            std::fs::write(dir.join(format!("{name}-key.pem")), key.serialize_pem())
                .expect("write key");
        };
        issue(
            "server",
            "localhost",
            vec!["localhost".into(), "127.0.0.1".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        issue("client", "ops", vec![], ExtendedKeyUsagePurpose::ClientAuth);
        Files { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn arg(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    fn server(&self, mtls: bool) -> ServerThread {
        let ca = self.path("ca.pem");
        let tls = TlsSettings::load(
            &self.path("server.pem"),
            &self.path("server-key.pem"),
            mtls.then_some(ca.as_path()),
        )
        .expect("TLS settings load");
        let mut options = ServerOptions::new("127.0.0.1:0", Arc::new(MemoryStore::new()));
        options.workers = 1;
        options.tls = Some(tls);
        spawn(options).expect("server starts")
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `muster --server ADDR ARGS...` with every MUSTER_* variable cleared.
fn muster(server: &ServerThread, args: &[&str]) -> Command {
    let mut cmd = Command::cargo_bin("muster").expect("the muster binary is built");
    for var in [
        "MUSTER_SERVER",
        "MUSTER_TOKEN",
        "MUSTER_TLS_CA",
        "MUSTER_TLS_CLIENT_CERT",
        "MUSTER_TLS_CLIENT_KEY",
        "MUSTER_TLS_SERVER_NAME",
    ] {
        cmd.env_remove(var);
    }
    cmd.args([
        "--server",
        &server.local_addr().to_string(),
        "--timeout-ms",
        "3000",
    ])
    .args(args)
    .timeout(Duration::from_secs(20));
    cmd
}

#[test]
fn groups_list_over_tls() {
    let files = Files::new();
    let server = files.server(false);
    muster(
        &server,
        &["--tls-ca", &files.arg("ca.pem"), "groups", "list", "--json"],
    )
    .assert()
    .success()
    .stdout(predicate::str::contains("groups"));
    // The same through the environment, and with an explicit server name.
    muster(&server, &["groups", "list"])
        .env("MUSTER_TLS_CA", files.path("ca.pem"))
        .env("MUSTER_TLS_SERVER_NAME", "localhost")
        .assert()
        .success();
    // Without --tls-ca the client speaks plaintext to a TLS port: no answer (exit 4).
    muster(&server, &["groups", "list"]).assert().code(4);
    // A name the server's certificate does not carry.
    muster(
        &server,
        &[
            "--tls-ca",
            &files.arg("ca.pem"),
            "--tls-server-name",
            "other.example",
            "groups",
            "list",
        ],
    )
    .assert()
    .code(4)
    .stderr(predicate::str::contains("TLS"));
}

#[test]
fn groups_list_over_mtls_needs_the_client_certificate() {
    let files = Files::new();
    let server = files.server(true);
    muster(
        &server,
        &["--tls-ca", &files.arg("ca.pem"), "groups", "list"],
    )
    .assert()
    .code(4)
    .stderr(predicate::str::contains("TLS"));
    muster(
        &server,
        &[
            "--tls-ca",
            &files.arg("ca.pem"),
            "--tls-client-cert",
            &files.arg("client.pem"),
            "--tls-client-key",
            &files.arg("client-key.pem"),
            "groups",
            "list",
        ],
    )
    .assert()
    .success();
}

#[test]
fn bad_tls_options_are_usage_errors_naming_the_file() {
    let files = Files::new();
    let server = files.server(false);
    let missing = files.arg("missing.pem");
    muster(&server, &["--tls-ca", &missing, "groups", "list"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("missing.pem"));
    muster(
        &server,
        &[
            "--tls-ca",
            &files.arg("ca.pem"),
            "--tls-client-cert",
            &files.arg("client.pem"),
            "groups",
            "list",
        ],
    )
    .assert()
    .code(2)
    .stderr(predicate::str::contains("--tls-client-key"));
}
