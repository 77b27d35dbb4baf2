//! `musterd`: load settings (flags > env > file > defaults), set up logs, open the data dir,
//! serve the admin listener and clients until SIGINT or SIGTERM, then shut down gracefully.
//! A second signal exits at once. SIGHUP rereads the auth file. At start it raises the soft open-files limit to the hard
//! one and makes any panic abort the process (`fatal.rs`).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use muster_coordinator::quota::Quotas;
use muster_coordinator::storage::Store;
use muster_etcd::{EtcdStore, EtcdStoreConfig};
use muster_server::auth::Auth;
use muster_server::cluster::{waits_at_startup, ClusterSetup, STARTUP_RETRY};
use muster_server::config::{ConfigError, Settings};
use muster_server::fatal::install_abort_on_panic;
use muster_server::store_kind::StoreKind;
use muster_server::telemetry::init_logging;
use muster_server::tls::TlsSettings;
use muster_server::{start, ServerOptions};
use tracing::{error, info, warn};

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let settings = match Settings::load(std::env::args_os()) {
        Ok(settings) => settings,
        Err(ConfigError::Cli(e)) => e.exit(),
        Err(e) => {
            eprintln!("musterd: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = init_logging(settings.log_format, &settings.log_level) {
        eprintln!("musterd: {e}");
        return ExitCode::from(2);
    }
    // A panic anywhere stops the process (one ERROR line, then abort): never a zombie actor.
    install_abort_on_panic();
    raise_open_files_limit();
    match run(settings) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("musterd cannot run: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(settings: Settings) -> anyhow::Result<()> {
    // Bad storage is loud: a locked, unreadable or corrupt data dir stops startup here with a
    // message naming the path; it is never reset to empty.
    let endpoints = settings.etcd_endpoints();
    let (store, cluster): (Arc<dyn Store>, _) = if endpoints.is_empty() {
        if settings.store == StoreKind::Memory {
            warn!("--store memory: groups, offsets and topics are kept in memory only; nothing survives a restart");
        }
        (settings.store.open(&settings.data_dir)?, None)
    } else {
        // Bad TLS files or a missing password stop startup naming the setting; a refused
        // certificate, password or right stops it at the first request, with what to fix.
        let security = settings.etcd_security(Settings::etcd_password_from_env()?)?;
        let tls = security.tls.as_ref().map_or("off", |tls| {
            if tls.has_client_certificate() {
                "on, client certificate"
            } else {
                "on"
            }
        });
        let user = security
            .credentials
            .as_ref()
            .map_or_else(|| "none".to_owned(), |c| c.user().to_owned());
        let config = EtcdStoreConfig {
            security,
            ..EtcdStoreConfig::new(
                endpoints.clone(),
                settings.cluster_name.clone(),
                settings.shards,
            )
        };
        // etcd may not serve yet (started beside musterd, electing a leader): each startup
        // step waits for it until this instant (`--etcd-startup-wait-s`).
        let startup_until = Instant::now() + settings.etcd_startup_wait();
        let store = loop {
            match EtcdStore::connect(config.clone()) {
                Err(e) if waits_at_startup(e.is_transient(), startup_until) => {
                    warn!(error = %e, "connecting to etcd: etcd cannot serve yet; retrying");
                    std::thread::sleep(STARTUP_RETRY);
                }
                connected => {
                    break Arc::new(
                        connected
                            .map_err(|e| anyhow::anyhow!("etcd at {}: {e}", endpoints.join(",")))?,
                    )
                }
            }
        };
        info!(etcd = %endpoints.join(","), tls, etcd_user = %user, cluster = %settings.cluster_name, shards = settings.shards, "cluster mode");
        let setup = ClusterSetup {
            store: Arc::clone(&store),
            lease_ttl: settings.lease_ttl(),
            startup_until,
        };
        (store as Arc<dyn Store>, Some(setup))
    };
    // A bad auth file stops startup with its line and reason; it never means "open".
    let auth = match settings.auth_file() {
        Some(path) => {
            let auth = Auth::from_file(path, Quotas::default())
                .map_err(|e| anyhow::anyhow!("auth file {}: {e}", path.display()))?;
            let loaded = auth.summary();
            info!(path = %path.display(), principals = loaded.principals, acls = loaded.acls, "auth file loaded");
            auth
        }
        None => Auth::open(Quotas::default()),
    };
    let auth = Arc::new(auth);
    // A bad certificate, key or CA file stops startup naming the file: asked for TLS, the
    // server never runs without it. (Settings already refused a cert without a key.)
    let tls = match (settings.tls_cert(), settings.tls_key()) {
        (Some(cert), Some(key)) => {
            let tls = TlsSettings::load(cert, key, settings.tls_client_ca())?;
            info!(
                cert = %cert.display(),
                client_ca = %settings.tls_client_ca().map_or_else(|| "none".into(), |ca| ca.display().to_string()),
                "TLS configured"
            );
            Some(tls)
        }
        _ => None,
    };
    let mut options = ServerOptions::new(settings.listen.clone(), store);
    options.cluster = cluster;
    options.auth = Arc::clone(&auth);
    let reloadable_tls = tls.clone();
    options.tls = tls;
    options.node = settings.node_options()?;
    options.admin_listen = settings.admin_address().map(str::to_owned);
    options.group = settings.group_config();
    options.max_frame_bytes = settings.max_frame_bytes;
    options.max_in_flight = settings.max_in_flight as usize;
    options.max_connections = settings.max_connections as usize;
    options.idle_timeout = settings.idle_timeout();
    options.limits = settings.connection_limits();
    options.workers = settings.workers;
    options.shutdown_timeout = Duration::from_millis(settings.shutdown_timeout_ms);

    let system = actix_rt::System::new();
    system.block_on(async move {
        // Listen for signals before starting: once `start` has said "listening", a SIGTERM or
        // SIGINT must reach this handler, not the default action (which would kill the process
        // without the graceful path), and a second one must not fall between two listeners.
        let mut signals = Signals::new()?;
        let running = start(options).await?;
        while let Signal::Reload = signals.recv().await {
            reload(&auth, reloadable_tls.as_ref());
        }
        // A second signal means "now": exit without waiting for the graceful path.
        tokio::spawn(async move {
            while let Signal::Reload = signals.recv().await {}
            eprintln!("musterd: second signal, exiting at once");
            std::process::exit(130);
        });
        running.shutdown().await;
        info!("bye");
        Ok(())
    })
}

/// Raises the soft open-files limit to the hard one: each client connection is a file
/// descriptor, and distributions' soft default (1024) is far below `max_connections`. Logs
/// both limits either way.
fn raise_open_files_limit() {
    let Ok((soft, hard)) = rlimit::Resource::NOFILE.get() else {
        warn!("cannot read the open-files limit (RLIMIT_NOFILE)");
        return;
    };
    match rlimit::increase_nofile_limit(hard) {
        Ok(now) if now > soft => info!(soft = now, hard, was = soft, "open-files limit raised"),
        Ok(now) => info!(soft = now, hard, "open-files limit"),
        Err(e) => warn!(soft, hard, error = %e, "cannot raise the open-files limit"),
    }
}

/// SIGHUP: reread the TLS certificate, key and client CA files and the auth file. A file
/// that does not parse is refused with its reason, and what is in force stays.
fn reload(auth: &Auth, tls: Option<&TlsSettings>) {
    if let Some(tls) = tls {
        match tls.reload() {
            Ok(()) => info!(
                cert = %tls.cert_path().display(),
                "TLS certificate, key and client CA reloaded; open connections keep theirs"
            ),
            Err(e) => error!(
                error = %e,
                "TLS files refused; the certificate in force stays"
            ),
        }
    }
    let Some(path) = auth.path() else {
        info!("SIGHUP: no auth file to reload");
        return;
    };
    match auth.reload() {
        Ok(loaded) => info!(
            path = %path.display(),
            principals = loaded.principals,
            acls = loaded.acls,
            "auth file reloaded"
        ),
        Err(e) => error!(
            path = %path.display(),
            error = %e,
            "auth file refused; the previous rules stay in force"
        ),
    }
}

/// What a signal asks for.
enum Signal {
    Shutdown,
    Reload,
}

/// SIGTERM, SIGINT and SIGHUP, listened for from creation on (a signal that arrives between
/// two `recv` calls is kept, not lost).
struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Self {
                term: signal(SignalKind::terminate())?,
                int: signal(SignalKind::interrupt())?,
                hup: signal(SignalKind::hangup())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    async fn recv(&mut self) -> Signal {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {
                info!(signal = "SIGTERM", "shutdown requested");
                Signal::Shutdown
            }
            _ = self.int.recv() => {
                info!(signal = "SIGINT", "shutdown requested");
                Signal::Shutdown
            }
            _ = self.hup.recv() => {
                info!(signal = "SIGHUP", "reload requested");
                Signal::Reload
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Signal::Shutdown
        }
    }
}
