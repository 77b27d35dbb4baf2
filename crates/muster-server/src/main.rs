//! `musterd`: parse settings, set up logging, run the server until SIGINT or SIGTERM.

use std::sync::Arc;

use anyhow::{anyhow, Context as _};
use clap::Parser;
use muster_coordinator::storage::MemoryStore;
use muster_server::config::Settings;
use muster_server::{start, ServerOptions};
use tracing_subscriber::EnvFilter;

fn main() -> anyhow::Result<()> {
    let settings = Settings::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .init();
    let group = settings.group_config().map_err(|e| anyhow!(e))?;
    let store = Arc::new(MemoryStore::new());
    let mut options = ServerOptions::new(settings.listen.clone(), store);
    options.group = group;
    options.max_frame_bytes = settings.max_frame_bytes;
    options.max_in_flight = settings.max_in_flight as usize;
    options.workers = settings.workers;

    let system = actix_rt::System::new();
    system.block_on(async move {
        let running = start(options).await.context("musterd could not start")?;
        wait_for_signal().await;
        running.shutdown().await;
        Ok(())
    })
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
