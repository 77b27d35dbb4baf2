//! The command-line options a program that connects to Muster shares with the others (the
//! `muster` CLI, `muster-bench`, the worker example): `--token` and the `--tls-*` options, as
//! one clap [`Args`](clap::Args) struct to `#[command(flatten)]` into a program's own. Only
//! with the crate's `clap` feature: a library user who parses no command line does not get
//! clap.
//!
//! The options are `global`, so that a program with subcommands takes them before or after
//! its subcommand.

use std::path::PathBuf;

use crate::connection::ConnectionConfig;
use crate::tls::{TlsConfig, TlsError};

/// `--token`, `--tls-ca`, `--tls-client-cert`, `--tls-client-key`, `--tls-server-name`, each
/// also read from its `MUSTER_*` environment variable.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConnectArgs {
    /// Credentials, for a server configured with tokens.
    #[arg(long, global = true, env = "MUSTER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    /// Speak TLS, trusting the CA certificates in this PEM file.
    #[arg(long, global = true, env = "MUSTER_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,

    /// Client certificate (PEM), for a server that requires one (with --tls-client-key).
    #[arg(
        long,
        global = true,
        env = "MUSTER_TLS_CLIENT_CERT",
        value_name = "FILE"
    )]
    pub tls_client_cert: Option<PathBuf>,

    /// The client certificate's private key (PEM).
    #[arg(
        long,
        global = true,
        env = "MUSTER_TLS_CLIENT_KEY",
        value_name = "FILE"
    )]
    pub tls_client_key: Option<PathBuf>,

    /// The name the server's certificate must carry [default: the host of --server].
    #[arg(
        long,
        global = true,
        env = "MUSTER_TLS_SERVER_NAME",
        value_name = "NAME"
    )]
    pub tls_server_name: Option<String>,
}

impl ConnectArgs {
    /// The TLS the options ask for ([`TlsConfig::from_options`]): `None` without `--tls-ca`.
    pub fn tls(&self) -> Result<Option<TlsConfig>, TlsError> {
        TlsConfig::from_options(
            self.tls_ca.as_deref(),
            self.tls_client_cert.as_deref(),
            self.tls_client_key.as_deref(),
            self.tls_server_name.as_deref(),
        )
    }

    /// `config` with the token and the TLS the options ask for.
    pub fn apply(&self, mut config: ConnectionConfig) -> Result<ConnectionConfig, TlsError> {
        if let Some(token) = &self.token {
            config = config.auth_token(token.clone());
        }
        if let Some(tls) = self.tls()? {
            config = config.tls(tls);
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser, Subcommand};

    use super::ConnectArgs;

    #[derive(Debug, Parser)]
    struct Program {
        #[command(flatten)]
        connect: ConnectArgs,
        #[command(subcommand)]
        command: Option<Sub>,
    }

    #[derive(Debug, Subcommand)]
    enum Sub {
        Run,
    }

    #[test]
    fn the_options_are_consistent_and_go_after_a_subcommand() {
        Program::command().debug_assert();
        let parsed = Program::try_parse_from([
            "p",
            "run",
            "--token",
            "t",
            "--tls-ca",
            "ca.pem",
            "--tls-client-cert",
            "c.pem",
            "--tls-client-key",
            "k.pem",
            "--tls-server-name",
            "muster.internal",
        ])
        .expect("parses");
        let c = parsed.connect;
        assert_eq!(c.token.as_deref(), Some("t"));
        assert_eq!(c.tls_ca.as_deref(), Some("ca.pem".as_ref()));
        assert_eq!(c.tls_client_cert.as_deref(), Some("c.pem".as_ref()));
        assert_eq!(c.tls_client_key.as_deref(), Some("k.pem".as_ref()));
        assert_eq!(c.tls_server_name.as_deref(), Some("muster.internal"));
    }

    #[test]
    fn no_ca_is_plaintext_and_tls_options_without_it_are_refused() {
        assert!(ConnectArgs::default().tls().expect("plaintext").is_none());
        let without_ca = ConnectArgs {
            tls_server_name: Some("muster.internal".into()),
            ..ConnectArgs::default()
        };
        assert!(without_ca.tls().is_err());
    }
}
