//! `musterd`'s settings: flags, each also read from `MUSTER_<FLAG_IN_CAPS>`.

use std::path::PathBuf;

use clap::Parser;
use muster_coordinator::GroupConfig;

/// Muster consumer-group coordinator.
#[derive(Debug, Clone, Parser)]
#[command(name = "musterd", version, about)]
pub struct Settings {
    /// Address to accept client connections on.
    #[arg(long, env = "MUSTER_LISTEN", default_value = "127.0.0.1:7450")]
    pub listen: String,

    /// Directory holding durable state (offsets, groups, topics).
    #[arg(long, env = "MUSTER_DATA_DIR", default_value = "./muster-data")]
    pub data_dir: PathBuf,

    /// Smallest session timeout a member may ask for.
    #[arg(long, env = "MUSTER_MIN_SESSION_TIMEOUT_MS", default_value_t = 6_000)]
    pub min_session_timeout_ms: u32,

    /// Largest session timeout a member may ask for.
    #[arg(long, env = "MUSTER_MAX_SESSION_TIMEOUT_MS", default_value_t = 1_800_000)]
    pub max_session_timeout_ms: u32,

    /// How long the first rebalance of an empty group waits for more members.
    #[arg(long, env = "MUSTER_INITIAL_REBALANCE_DELAY_MS", default_value_t = 3_000)]
    pub initial_rebalance_delay_ms: u32,

    /// Most members per group (0 = unlimited).
    #[arg(long, env = "MUSTER_MAX_GROUP_SIZE", default_value_t = 0)]
    pub max_group_size: u32,

    /// Largest frame payload accepted, in bytes.
    #[arg(long, env = "MUSTER_MAX_FRAME_BYTES", default_value_t = 1_048_576,
          value_parser = clap::value_parser!(u32).range(64..=(1 << 30)))]
    pub max_frame_bytes: u32,

    /// Requests one connection may have in flight before the server stops reading from it.
    #[arg(long, env = "MUSTER_MAX_IN_FLIGHT", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_in_flight: u32,

    /// Offsets of a group that has been Empty this long expire (Kafka's
    /// offsets.retention.minutes); an Empty group with no offsets left is then removed.
    #[arg(long, env = "MUSTER_OFFSETS_RETENTION_MINUTES", default_value_t = 10_080,
          value_parser = clap::value_parser!(u64).range(1..=(1 << 40)))]
    pub offsets_retention_minutes: u64,

    /// Worker threads for connections and groups (0 = one per core).
    #[arg(long, env = "MUSTER_WORKERS", default_value_t = 0)]
    pub workers: usize,
}

impl Settings {
    /// The group rules these settings describe.
    pub fn group_config(&self) -> Result<GroupConfig, String> {
        if self.min_session_timeout_ms > self.max_session_timeout_ms {
            return Err(format!(
                "--min-session-timeout-ms ({}) is above --max-session-timeout-ms ({})",
                self.min_session_timeout_ms, self.max_session_timeout_ms
            ));
        }
        Ok(GroupConfig {
            min_session_timeout_ms: self.min_session_timeout_ms,
            max_session_timeout_ms: self.max_session_timeout_ms,
            initial_rebalance_delay_ms: self.initial_rebalance_delay_ms,
            max_group_size: self.max_group_size,
            offsets_retention_ms: self.offsets_retention_minutes.saturating_mul(60_000),
            ..GroupConfig::default()
        })
    }
}
