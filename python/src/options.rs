//! `ClientOptions`: where and how to connect (the bootstrap list, client id, token, TLS).
//!
//! The Python wrappers fill it from keyword arguments, falling back on the environment
//! variables of the `muster` CLI (`MUSTER_SERVER`, `MUSTER_TOKEN`, `MUSTER_TLS_CA`,
//! `MUSTER_TLS_CLIENT_CERT`, `MUSTER_TLS_CLIENT_KEY`, `MUSTER_TLS_SERVER_NAME`); TLS is
//! configured by muster-client's own `TlsConfig::from_options`, as the CLI's is.

use std::path::PathBuf;
use std::time::Duration;

use muster_client::{ClientConfig, ClientError, TlsConfig};
use pyo3::prelude::*;

/// Connection settings shared by members and admin clients.
#[pyclass(module = "muster._native", name = "ClientOptions", frozen)]
#[derive(Debug, Clone)]
pub struct ClientOptions {
    servers: Vec<String>,
    client_id: String,
    token: Option<String>,
    tls_ca: Option<PathBuf>,
    tls_client_cert: Option<PathBuf>,
    tls_client_key: Option<PathBuf>,
    tls_server_name: Option<String>,
    request_timeout_ms: Option<u64>,
}

#[pymethods]
impl ClientOptions {
    #[new]
    #[pyo3(signature = (servers, client_id, *, token = None, tls_ca = None,
        tls_client_cert = None, tls_client_key = None, tls_server_name = None,
        request_timeout_ms = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        servers: Vec<String>,
        client_id: String,
        token: Option<String>,
        tls_ca: Option<PathBuf>,
        tls_client_cert: Option<PathBuf>,
        tls_client_key: Option<PathBuf>,
        tls_server_name: Option<String>,
        request_timeout_ms: Option<u64>,
    ) -> Self {
        ClientOptions {
            servers,
            client_id,
            token,
            tls_ca,
            tls_client_cert,
            tls_client_key,
            tls_server_name,
            request_timeout_ms,
        }
    }

    fn __repr__(&self) -> String {
        // The token is a secret: only whether there is one.
        format!(
            "ClientOptions(servers={:?}, client_id={:?}, token={}, tls={})",
            self.servers,
            self.client_id,
            if self.token.is_some() { "set" } else { "None" },
            self.tls_ca.is_some()
        )
    }
}

impl ClientOptions {
    /// muster-client's configuration; TLS files are read here.
    pub fn client_config(&self) -> Result<ClientConfig, ClientError> {
        let tls = TlsConfig::from_options(
            self.tls_ca.as_deref(),
            self.tls_client_cert.as_deref(),
            self.tls_client_key.as_deref(),
            self.tls_server_name.as_deref(),
        )?;
        let token = self.token.clone();
        let timeout = self.request_timeout_ms;
        let client_id = self.client_id.clone();
        Ok(ClientConfig::new(self.servers.clone()).configure(|mut c| {
            c = c.client_id(client_id);
            if let Some(token) = token {
                c = c.auth_token(token);
            }
            if let Some(tls) = tls {
                c = c.tls(tls);
            }
            if let Some(ms) = timeout {
                c = c.request_timeout(Duration::from_millis(ms));
            }
            c
        }))
    }
}
