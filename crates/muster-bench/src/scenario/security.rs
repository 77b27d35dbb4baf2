//! `security`: what authentication and encryption cost, measured in one run. The same
//! heartbeat load ([`super::heartbeat::measure`]) runs against a fresh `musterd` in each phase:
//!
//! | phase | server | client |
//! |---|---|---|
//! | `open` | no auth file, plaintext | no token |
//! | `token` | auth file, plaintext | token in Hello |
//! | `tls` | auth file, TLS | token in Hello, over TLS |
//! | `mtls` | auth file, TLS requiring client certificates | client certificate, no token |
//!
//! The phases run in that order `rounds` times over (interleaved, so that drift of the machine
//! weighs on every phase alike), and each phase's figure is the median of its rounds. The
//! ratios `token / open` (issue #12: at least 0.95) and `tls / token` (at least 0.70) are
//! reported. The CA, the certificates, the token and the auth file are made for the run in a
//! temporary directory. Needs `--spawn`.

use std::ffi::OsString;

use anyhow::{bail, Context as _, Result};
use muster_auth::TokenHash;
use muster_client::TlsConfig;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde::Serialize;

use super::heartbeat::{self, LoadFigures};
use super::{Common, Report};
use crate::stats::median;
use crate::target::Target;
use crate::transport::{self, Tls, Transport};

/// The principal the bench authenticates as (its token, and its client certificate's CN).
const PRINCIPAL: &str = "bench";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Open,
    Token,
    Tls,
    Mtls,
}

impl Phase {
    const ALL: [Phase; 4] = [Phase::Open, Phase::Token, Phase::Tls, Phase::Mtls];

    fn name(self) -> &'static str {
        match self {
            Phase::Open => "open",
            Phase::Token => "token",
            Phase::Tls => "tls",
            Phase::Mtls => "mtls",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    pub load: heartbeat::Options,
    pub rounds: usize,
}

/// The files a run makes (also `hostile --tls`'s server certificate).
pub struct Material {
    dir: tempfile::TempDir,
    token: String,
    ca_pem: String,
    client_pem: String,
    client_key: String,
}

impl Material {
    pub fn make() -> Result<Material> {
        let dir = tempfile::Builder::new()
            .prefix("muster-bench-security-")
            .tempdir()
            .context("cannot create a temporary directory")?;
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.distinguished_name = name("muster-bench CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let server_key = KeyPair::generate()?;
        let mut server_params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
        server_params.distinguished_name = name("localhost");
        let server_cert = server_params.signed_by(&server_key, &issuer)?;

        let client_key = KeyPair::generate()?;
        let mut client_params = CertificateParams::new(Vec::<String>::new())?;
        client_params.distinguished_name = name(PRINCIPAL);
        let client_cert = client_params.signed_by(&client_key, &issuer)?;

        // A random token: 32 bytes of the OS's randomness.
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| anyhow::anyhow!("no OS randomness: {e}"))?;
        let token = hex(&secret);
        let material = Material {
            dir,
            token,
            ca_pem: ca_cert.pem(),
            client_pem: client_cert.pem(),
            client_key: client_key.serialize_pem(),
        };
        material.write("ca.pem", &material.ca_pem)?;
        material.write("server.pem", &server_cert.pem())?;
        material.write("server.key", &server_key.serialize_pem())?;
        material.write("auth.toml", &auth_file(&material.token))?;
        Ok(material)
    }

    fn write(&self, file: &str, text: &str) -> Result<()> {
        let path = self.dir.path().join(file);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    }

    fn path(&self, file: &str) -> OsString {
        self.dir.path().join(file).into_os_string()
    }

    /// TLS trusting the run's CA, presenting the client certificate if `mtls`, to the
    /// spawned server (its certificate is for `localhost`).
    pub fn tls(&self, mtls: bool) -> Result<Tls> {
        let mut tls = TlsConfig::from_ca_pem(self.ca_pem.as_bytes())?;
        if mtls {
            tls = tls.client_cert_pem(self.client_pem.as_bytes(), self.client_key.as_bytes())?;
        }
        Tls::new(&tls, "localhost")
    }

    /// The server's flags for TLS with the run's certificate (no client certificates, no
    /// auth file).
    pub fn tls_flags(&self) -> Vec<OsString> {
        vec![
            "--tls-cert".into(),
            self.path("server.pem"),
            "--tls-key".into(),
            self.path("server.key"),
        ]
    }

    /// The server's flags and the client's transport for a phase.
    fn phase(&self, phase: Phase) -> Result<(Vec<OsString>, Transport)> {
        let auth = vec!["--auth-file".into(), self.path("auth.toml")];
        let tls = self.tls_flags();
        let token = Some(self.token.clone());
        Ok(match phase {
            Phase::Open => (Vec::new(), Transport::default()),
            Phase::Token => (auth, Transport { token, tls: None }),
            Phase::Tls => (
                [auth, tls].concat(),
                Transport {
                    token,
                    tls: Some(self.tls(false)?),
                },
            ),
            Phase::Mtls => (
                [
                    auth,
                    tls,
                    vec!["--tls-client-ca".into(), self.path("ca.pem")],
                ]
                .concat(),
                Transport {
                    token: None,
                    tls: Some(self.tls(true)?),
                },
            ),
        })
    }
}

fn name(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bench's principal with the ACLs a real consumer would have: `read` on its groups, and
/// `read` and `create` on its topics, by prefix; no cluster admin (which would skip the ACL
/// check being measured).
fn auth_file(token: &str) -> String {
    format!(
        r#"[[principals]]
name = "{PRINCIPAL}"
token_sha256 = "{}"

[[acls]]
principal = "{PRINCIPAL}"
resource = "group"
pattern = "bench-*"
operations = ["read"]

[[acls]]
principal = "{PRINCIPAL}"
resource = "topic"
pattern = "bench-*"
operations = ["read", "create"]
"#,
        TokenHash::of(token).to_hex()
    )
}

#[derive(Debug, Serialize)]
struct PhaseFigures {
    phase: Phase,
    /// Median heartbeats/s over the rounds.
    per_second: f64,
    rounds: Vec<LoadFigures>,
}

/// Each phase's median heartbeats/s.
#[derive(Debug, Serialize)]
struct PerSecond {
    open: f64,
    token: f64,
    tls: f64,
    mtls: f64,
}

#[derive(Debug, Serialize)]
struct Figures {
    scenario: &'static str,
    per_second: PerSecond,
    phases: Vec<PhaseFigures>,
    /// token / open (target ≥ 0.95).
    token_ratio: f64,
    /// tls / token (target ≥ 0.70).
    tls_ratio: f64,
    /// mtls / token.
    mtls_ratio: f64,
}

pub async fn run(common: &Common, target: &mut Target, opts: &Options) -> Result<Report> {
    if !target.is_spawned() {
        bail!("security starts its own servers: run it with --spawn");
    }
    let material = Material::make()?;
    let mut rounds: Vec<Vec<LoadFigures>> = vec![Vec::new(); Phase::ALL.len()];
    for round in 0..opts.rounds.max(1) {
        for (i, phase) in Phase::ALL.into_iter().enumerate() {
            let (flags, client) = material.phase(phase)?;
            target.restart_with(flags)?;
            transport::set(client);
            let phase_common = Common {
                addr: target.addr,
                run_id: format!("{}-{}-{round}", common.run_id, phase.name()),
                pid: target.pid,
            };
            let figures = heartbeat::measure(&phase_common, &opts.load)
                .await
                .with_context(|| format!("phase {} (round {round})", phase.name()))?;
            rounds[i].push(figures);
        }
    }
    transport::set(Transport::default());
    let phases: Vec<PhaseFigures> = Phase::ALL
        .into_iter()
        .zip(rounds)
        .map(|(phase, rounds)| PhaseFigures {
            phase,
            per_second: median(rounds.iter().map(|f| f.per_second).collect()),
            rounds,
        })
        .collect();
    let rate = |p: Phase| {
        phases
            .iter()
            .find(|f| f.phase == p)
            .map_or(0.0, |f| f.per_second)
    };
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let figures = Figures {
        scenario: "security",
        per_second: PerSecond {
            open: rate(Phase::Open),
            token: rate(Phase::Token),
            tls: rate(Phase::Tls),
            mtls: rate(Phase::Mtls),
        },
        token_ratio: ratio(rate(Phase::Token), rate(Phase::Open)),
        tls_ratio: ratio(rate(Phase::Tls), rate(Phase::Token)),
        mtls_ratio: ratio(rate(Phase::Mtls), rate(Phase::Token)),
        phases,
    };
    let mut text = String::new();
    for phase in &figures.phases {
        let failed: u64 = phase.rounds.iter().map(|r| r.failed).sum();
        text.push_str(&format!(
            "{:<6} {:>10.0} heartbeats/s (median of {}){}\n",
            phase.phase.name(),
            phase.per_second,
            phase.rounds.len(),
            if failed > 0 {
                format!("  ({failed} failed)")
            } else {
                String::new()
            }
        ));
    }
    text.push_str(&format!(
        "token / open = {:.1} %   tls / token = {:.1} %   mtls / token = {:.1} %\n",
        figures.token_ratio * 100.0,
        figures.tls_ratio * 100.0,
        figures.mtls_ratio * 100.0
    ));
    Ok(Report::new(text, &figures))
}
