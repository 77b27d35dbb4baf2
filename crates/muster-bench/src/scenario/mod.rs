//! The benchmark scenarios. Each returns a [`Report`]: a human-readable text and the same
//! figures as JSON.

pub mod commit;
pub mod expiry;
pub mod heartbeat;
pub mod hostile;
pub mod idle;
pub mod rebalance;
pub mod security;

use std::net::SocketAddr;

use serde::Serialize;

/// What every scenario needs to know about the run.
#[derive(Debug, Clone)]
pub struct Common {
    pub addr: SocketAddr,
    /// Prefix of every group id this run creates, unique per run so that runs against the
    /// same server never meet each other's groups.
    pub run_id: String,
    /// The server's process id, when known (for `idle`, which reads its resident memory).
    pub pid: Option<u32>,
}

/// A scenario's result.
pub struct Report {
    pub text: String,
    pub json: serde_json::Value,
}

impl Report {
    pub fn new(text: String, figures: &impl Serialize) -> Self {
        Report {
            text,
            json: serde_json::to_value(figures).unwrap_or(serde_json::Value::Null),
        }
    }
}

/// The client id the benchmark's connections use (short: it is part of every member id, and a
/// leader's SyncGroup for 10 000 members carries every one).
pub const CLIENT_ID: &str = "b";

/// Milliseconds, for reports.
pub fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}
