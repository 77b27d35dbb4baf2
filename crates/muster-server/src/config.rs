//! `musterd`'s settings, from four layers with this precedence: command-line flags, then
//! environment variables (`MUSTER_<FLAG_IN_CAPS>`), then a TOML file (`--config FILE`, keys
//! are the flag names with `_` for `-`), then defaults. Every value, wherever it came from, is
//! checked by [`Settings::validate`]; a bad one stops startup with a message naming the
//! setting, the value and what is allowed.
//!
//! # One table
//!
//! Every setting is one row of the `settings!` table below: name, type, default, help text,
//! and optionally its allowed range or a check function. The flag, the environment variable,
//! the TOML key, the `--help` line (with its default and range), the file's struct, the
//! layering and the validation are all derived from that row by the macro in
//! `config/table.rs`, whose expansion is plain clap builder calls, a serde struct and one `if`
//! per setting. Adding a setting is one row (plus a line in the annotated example of
//! `docs/operations.md`, which a test checks lists every setting, and the code that uses it).
//!
//! Why not clap's derive alone: it cannot name the variables `MUSTER_…` without every row
//! spelling its variable out, nor show a range in `--help` from the same tokens that are
//! checked, and the file layer and the validation would still be separate lists. So clap is
//! used through its builder, and clap still does the parsing, the flag > environment >
//! default order and the help; the file is layered under whatever clap did not take from its
//! default.

mod checks;
mod etcd;
mod table;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Arg, ArgMatches, Command};
use muster_coordinator::{ConsumerConfig, GroupConfig, Limits, OffsetsConfig};

use crate::connection_limits::ConnectionLimits;
use crate::node::{BadHostPort, NodeOptions};
use crate::store_kind::StoreKind;
use crate::telemetry::LogFormat;
use checks::{
    address, address_or_off, advertise, cluster_name, etcd_endpoints, log_filter, node_id,
    server_assignor,
};
use table::settings;

settings! {
    /// Address to accept client connections on.
    listen: String = "127.0.0.1:7450", check(address);

    /// Address of the HTTP listener for /metrics, /healthz and /readyz ("off" disables it).
    admin_listen: String = "127.0.0.1:7451", check(address_or_off);

    /// Directory holding durable state (offsets, groups, topics).
    data_dir: PathBuf = "./muster-data";

    /// Where a single node keeps its state: redb (in --data-dir, durable) or memory (nothing
    /// survives a restart; for benchmarks and tests). A cluster node uses etcd whatever this
    /// says.
    store: StoreKind = "redb";

    /// Smallest session timeout a member may ask for.
    min_session_timeout_ms: u32 = "6000", range(1 ..= max_session_timeout_ms);

    /// Largest session timeout a member may ask for.
    max_session_timeout_ms: u32 = "1800000", range(min_session_timeout_ms ..= 86_400_000);

    /// How long the first rebalance of an empty group waits for more members.
    initial_rebalance_delay_ms: u32 = "3000", range(0 ..= 3_600_000);

    /// How often consumer-protocol members heartbeat (protocol-v1 §7; Kafka's
    /// group.consumer.heartbeat.interval.ms).
    consumer_heartbeat_interval_ms: u32 = "5000", range(100 ..= 3_600_000);

    /// A consumer-protocol member not heard from this long is removed (Kafka's
    /// group.consumer.session.timeout.ms).
    consumer_session_timeout_ms: u32 = "45000", range(1 ..= 86_400_000);

    /// The server assignor of a consumer group none of whose members asks for one: uniform or
    /// range.
    consumer_default_assignor: String = "uniform", check(server_assignor);

    /// Rebalances kept per group in its durable journal (`muster groups history`); 0 = none.
    journal_size: u32 = "50", range(0 ..= 1_000);

    /// A group whose rebalances started more than this many times within storm_window_s is
    /// flagged as in a rebalance storm (`muster groups why`).
    storm_rebalances: u32 = "5", range(1 ..= 1_000_000);

    /// The window of storm_rebalances, in seconds.
    storm_window_s: u64 = "300", range(1 ..= 86_400);

    /// Most members (and pending ids) per group; 0 = 26214, the most whose answers encode.
    max_group_size: u32 = "0";

    /// Longest client id in Hello, in bytes (more → REQUEST_LIMIT_EXCEEDED).
    max_client_id_bytes: usize = "255", range(1 ..= 65_535);

    /// Longest member id a request may carry, in bytes.
    max_member_id_bytes: usize = "255", range(128 ..= 65_535);

    /// Longest group_instance_id, in bytes.
    max_instance_id_bytes: usize = "249", range(1 ..= 65_535);

    /// Most assignors one JoinGroup may name.
    max_assignors: usize = "16", range(1 ..= 1_024);

    /// Longest assignor name, in bytes.
    max_assignor_name_bytes: usize = "255", range(1 ..= 65_535);

    /// Most assignor user-data bytes one JoinGroup may carry, summed over its assignors.
    max_assignor_metadata_bytes: usize = "131072", range(0 ..= 1_073_741_824);

    /// Most topics one JoinGroup may subscribe to.
    max_subscribed_topics: usize = "1000", range(1 ..= 1_000_000);

    /// Most partitions one OffsetCommit, OffsetFetch or JoinGroup (owned partitions) may name;
    /// also the most a GroupSimulate may assign, and its added members × subscribed topics.
    max_partitions_per_request: usize = "50000", range(1 ..= 100_000_000);

    /// Most group ids one DescribeGroups or DeleteGroups may name.
    max_groups_per_request: usize = "1000", range(1 ..= 1_000_000);

    /// Most topics one CreateTopics or DescribeTopics may name.
    max_topics_per_request: usize = "1000", range(1 ..= 1_000_000);

    /// Longest reason string in JoinGroup or LeaveGroup, in bytes.
    max_reason_bytes: usize = "1024", range(0 ..= 1_048_576);

    /// Largest rebalance timeout a member may ask for.
    max_rebalance_timeout_ms: u32 = "1800000", range(1 ..= 86_400_000);

    /// Most member ids handed out with MEMBER_ID_REQUIRED and not yet joined, over all groups.
    max_pending_member_ids: usize = "20000", range(1 ..= 100_000_000);

    /// Most groups the server holds (more → RESOURCE_LIMIT_REACHED); only creating a group is
    /// refused, groups loaded at start are all served. An idle group costs ~4–5 KiB, so the
    /// default bounds what one client can make the server hold to ~250 MiB.
    max_groups: usize = "50000", range(1 ..= 100_000_000);

    /// Most topics in the catalog.
    max_topics: usize = "100000", range(1 ..= 100_000_000);

    /// Most partitions one topic may have (more → INVALID_PARTITIONS).
    max_partitions_per_topic: u32 = "100000", range(1 ..= 2_147_483_647);

    /// Admin requests (DescribeGroups, ListGroups, DeleteGroups, CreateTopics, DescribeTopics,
    /// GroupHistory, GroupDiagnosis) in flight at once over the whole server, dashboard
    /// included; more are answered RESOURCE_LIMIT_REACHED at once.
    max_admin_requests_in_flight: usize = "4096", range(1 ..= 1_000_000);

    /// Largest frame payload accepted, in bytes.
    max_frame_bytes: u32 = "1048576", range(64 ..= 1_073_741_824);

    /// Requests one connection may have in flight before the server stops reading from it.
    max_in_flight: u32 = "1024", range(1 ..= 1_000_000);

    /// Of those, requests whose answer can be large (OffsetFetch, DescribeGroups, ListGroups,
    /// DescribeTopics) one connection may have in flight before the server stops reading it.
    max_in_flight_large: u32 = "8", range(1 ..= 1_000_000);

    /// Most client connections open at once; more are answered TOO_MANY_CONNECTIONS and
    /// closed.
    max_connections: u32 = "10000", range(1 ..= 1_000_000);

    /// A connection with nothing in flight and no request for this long is closed (0 = never).
    idle_timeout_ms: u64 = "600000", range(0 ..= 86_400_000);

    /// Answers waiting to be written to one connection, in bytes, at which the server stops
    /// reading from it (twice this, unread, closes it).
    max_buffered_response_bytes: u64 = "16777216", range(65_536 ..= 1_073_741_824);

    /// A connection whose client takes no byte of its answers for this long is closed.
    write_timeout_ms: u64 = "60000", range(10 ..= 3_600_000);

    /// Most admin HTTP connections open at once; more wait in the kernel's accept queue until
    /// one closes.
    admin_max_connections: u32 = "32", range(1 ..= 10_000);

    /// An admin HTTP connection must send its request headers, and get its answer, within this
    /// (one request per connection).
    admin_timeout_ms: u64 = "10000", range(10 ..= 600_000);

    /// Offsets of a group that has been Empty this long expire; an Empty group with no offsets
    /// left is then removed.
    offsets_retention_minutes: u64 = "10080", range(1 ..= 1_099_511_627_776);

    /// Expired offsets stay this long in the group's quarantine (`muster offsets restore`)
    /// before they are dropped for good; 0 = dropped at once.
    offsets_quarantine_minutes: u64 = "10080", range(0 ..= 1_099_511_627_776);

    /// A member joining a group whose offsets are quarantined gets them restored first.
    offsets_restore_on_join: bool = "true";

    /// Refuse (PARTITION_NOT_OWNED) a member's commit for a partition it does not own; false
    /// for clients that commit partitions they were never assigned.
    offsets_ownership_check: bool = "true";

    /// Commits, resets and restores kept per partition in its offset history
    /// (`muster offsets history`, point-in-time reset); 0 = no history.
    offset_history_entries: u32 = "100", range(0 ..= 100_000);

    /// Bytes one partition's offset history may weigh; its oldest entries go first.
    offset_history_bytes: usize = "65536", range(1_024 ..= 67_108_864);

    /// A commit's history entries are written at most this long after it, gathered with the
    /// other commits' of that time into one write (0 = with each commit, at a measured 12 %
    /// of commit throughput, against 5-8 % with the default). Offsets are durable when acknowledged either way; a crash can lose
    /// the history entries of the last flush interval (a graceful stop writes them first).
    offset_history_flush_ms: u64 = "200", range(0 ..= 60_000);

    /// A group with nothing but data left (Empty: no member, no pending member id, nothing in
    /// flight) and no request for this long is parked: kept as data, with no actor of its
    /// own, until a request, an admin call or its retention wakes it (0 = never parked).
    park_after_ms: u64 = "60000", range(0 ..= 86_400_000);

    /// Worker threads for connections and groups (0 = one per core).
    workers: usize = "0", range(0 ..= 1024);

    /// On SIGTERM/SIGINT, how long to wait for held requests to be answered and storage to be
    /// flushed before exiting anyway.
    shutdown_timeout_ms: u64 = "10000", range(0 ..= 600_000);

    /// Auth file (TOML: principals, token hashes, quotas, ACLs; docs/security.md). Unset: no
    /// authentication, every client may do everything. SIGHUP rereads it.
    auth_file: OptionalPath = "";

    /// PEM certificate chain for TLS on the client and admin listeners (with --tls-key).
    tls_cert: OptionalPath = "";

    /// PEM private key of --tls-cert.
    tls_key: OptionalPath = "";

    /// PEM CA bundle: clients must present a certificate it signed, whose subject common name
    /// is their principal (mTLS). Needs --tls-cert.
    tls_client_ca: OptionalPath = "";

    /// This node's id, as FindCoordinator and DescribeCluster name it (empty = the host name).
    node_id: String = "", check(node_id);

    /// HOST:PORT clients are told to connect to (empty = the listen address, with the port
    /// actually bound, and the host name for 0.0.0.0 or [::]).
    advertise: String = "", check(advertise);

    /// Name of the cluster this node belongs to ([A-Za-z0-9._-]), as DescribeCluster names it;
    /// in cluster mode also the etcd key prefix (/<name>/), so clusters can share an etcd.
    cluster_name: String = "muster", check(cluster_name);

    /// Cluster mode: etcd client URLs (http://host:port or host:port, comma-separated). Empty:
    /// a single node storing everything in --data-dir.
    cluster_etcd: String = "", check(etcd_endpoints);

    /// Cluster mode: PEM CA bundle that signed etcd's server certificates. Needed for https://
    /// etcd endpoints (a bare host:port then means https://); refused with http:// ones.
    etcd_ca: OptionalPath = "";

    /// Cluster mode: PEM client certificate chain for etcd's --client-cert-auth (with
    /// --etcd-key; needs --etcd-ca).
    etcd_cert: OptionalPath = "";

    /// Cluster mode: PEM private key of --etcd-cert.
    etcd_key: OptionalPath = "";

    /// Cluster mode: etcd user to authenticate as (its role needs readwrite on
    /// /<cluster-name>/ with --prefix=true, docs/cluster.md); its password comes from
    /// --etcd-password-file or the MUSTER_ETCD_PASSWORD environment variable.
    etcd_user: String = "";

    /// Cluster mode: file holding the password of --etcd-user (one trailing line end is
    /// ignored). Never given on the command line or in the config file itself.
    etcd_password_file: OptionalPath = "";

    /// Cluster mode: shards groups are spread over; fixed when the cluster is first created
    /// (a node started with another value refuses to start).
    shards: u32 = "64", range(1 ..= 4096);

    /// Cluster mode: the node's etcd lease, in seconds: how soon after a node dies its shards
    /// move to the survivors.
    lease_ttl_s: u64 = "5", range(2 ..= 300);

    /// Cluster mode: how long startup keeps retrying while etcd cannot be reached or cannot
    /// serve (no leader, a leader change, no quorum) before musterd gives up; 0 = give up at
    /// the first such failure. Refusals (credentials, rights, certificates) stop it at once.
    etcd_startup_wait_s: u64 = "60", range(0 ..= 3600);

    /// Log line format.
    log_format: LogFormat = "text";

    /// Log filter (e.g. "info" or "info,muster_coordinator=debug"); RUST_LOG, when set, wins.
    log_level: String = "info", check(log_filter);
}

/// The one argument outside the table: where the file layer comes from.
const CONFIG: &str = "config";

/// `musterd -h`'s first line: the package's description.
const ABOUT: &str = env!("CARGO_PKG_DESCRIPTION");

/// `musterd --help`'s introduction.
const LONG_ABOUT: &str = "Muster consumer-group coordinator.\n\nEvery setting can be given as \
a flag, as an environment variable MUSTER_<FLAG_IN_CAPS>, or in the TOML file named by --config \
(keys are flag names with underscores); flags win over the environment, which wins over the file.";

/// A setting that stops startup.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid setting {setting} = {value}: {allowed}")]
    Invalid {
        setting: String,
        value: String,
        allowed: String,
    },
    #[error("cannot read config file {path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error(transparent)]
    Cli(#[from] clap::Error),
    /// Cannot happen (every setting has a default); an error rather than a panic all the same.
    #[error("setting {0} has no value")]
    Missing(String),
}

impl Settings {
    /// The command line `musterd` accepts: `--config` and every setting of the table.
    pub fn command() -> Command {
        Command::new("musterd")
            .version(env!("CARGO_PKG_VERSION"))
            .about(ABOUT)
            .long_about(LONG_ABOUT)
            .arg(
                Arg::new(CONFIG)
                    .long(CONFIG)
                    .env("MUSTER_CONFIG")
                    .value_name("CONFIG")
                    .value_parser(clap::value_parser!(PathBuf))
                    .help(
                        "TOML file with settings (see docs/operations.md for an annotated example)",
                    ),
            )
            .args(Settings::args())
    }

    /// Flags and environment from `args`, then the config file, then validation.
    pub fn load<I, T>(args: I) -> Result<Settings, ConfigError>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Settings::command().try_get_matches_from(args)?;
        let mut settings = Settings::from_matches(&matches)?;
        if let Some(path) = settings.config.clone() {
            settings.apply_file(&path, &matches)?;
        }
        settings.validate()?;
        Ok(settings)
    }

    /// Takes each setting from the file unless a flag or the environment gave it.
    fn apply_file(&mut self, path: &Path, matches: &ArgMatches) -> Result<(), ConfigError> {
        let file_error = |reason: String| ConfigError::File {
            path: path.to_owned(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| file_error(e.to_string()))?;
        let file: FileSettings = toml::from_str(&text).map_err(|e| file_error(e.to_string()))?;
        self.layer_file(file, matches);
        Ok(())
    }

    /// Checks every value against its allowed range and checks, in table order, then the
    /// settings that only make sense together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_each()?;
        let invalid = |setting: &str, value: &OptionalPath, allowed: &str| ConfigError::Invalid {
            setting: table::flag(setting),
            value: value.0.display().to_string(),
            allowed: allowed.into(),
        };
        match (self.tls_cert(), self.tls_key()) {
            (Some(_), None) => {
                return Err(invalid(
                    "tls_key",
                    &self.tls_key,
                    "--tls-cert needs --tls-key",
                ))
            }
            (None, Some(key)) => {
                return Err(invalid(
                    "tls_cert",
                    &self.tls_cert,
                    &format!("--tls-key {} needs --tls-cert", key.display()),
                ))
            }
            _ => {}
        }
        if let (Some(ca), None) = (self.tls_client_ca(), self.tls_cert()) {
            return Err(invalid(
                "tls_client_ca",
                &OptionalPath(ca.to_owned()),
                "client certificates need TLS: give --tls-cert and --tls-key too",
            ));
        }
        self.validate_etcd()
    }

    /// The auth file, if one is set.
    pub fn auth_file(&self) -> Option<&Path> {
        set(&self.auth_file)
    }

    pub fn tls_cert(&self) -> Option<&Path> {
        set(&self.tls_cert)
    }

    pub fn tls_key(&self) -> Option<&Path> {
        set(&self.tls_key)
    }

    pub fn tls_client_ca(&self) -> Option<&Path> {
        set(&self.tls_client_ca)
    }

    /// The group rules these settings describe.
    pub fn group_config(&self) -> GroupConfig {
        GroupConfig {
            min_session_timeout_ms: self.min_session_timeout_ms,
            max_session_timeout_ms: self.max_session_timeout_ms,
            initial_rebalance_delay_ms: self.initial_rebalance_delay_ms,
            max_group_size: self.max_group_size,
            offsets_retention_ms: self.offsets_retention_minutes.saturating_mul(60_000),
            journal_size: self.journal_size,
            offsets: OffsetsConfig {
                ownership_check: self.offsets_ownership_check,
                history_entries: self.offset_history_entries,
                history_bytes: self.offset_history_bytes,
                history_flush_ms: self.offset_history_flush_ms,
                quarantine_ms: self.offsets_quarantine_minutes.saturating_mul(60_000),
                restore_on_join: self.offsets_restore_on_join,
            },
            consumer: ConsumerConfig {
                heartbeat_interval_ms: self.consumer_heartbeat_interval_ms,
                session_timeout_ms: self.consumer_session_timeout_ms,
                default_assignor: self.consumer_default_assignor.clone(),
                ..ConsumerConfig::default()
            },
            storm_rebalances: self.storm_rebalances,
            storm_window_ms: self.storm_window_s.saturating_mul(1_000),
            park_after_ms: self.park_after_ms,
            limits: Limits {
                max_client_id_bytes: self.max_client_id_bytes,
                max_member_id_bytes: self.max_member_id_bytes,
                max_instance_id_bytes: self.max_instance_id_bytes,
                max_assignors: self.max_assignors,
                max_assignor_name_bytes: self.max_assignor_name_bytes,
                max_assignor_metadata_bytes: self.max_assignor_metadata_bytes,
                max_subscribed_topics: self.max_subscribed_topics,
                max_partitions_per_request: self.max_partitions_per_request,
                max_groups_per_request: self.max_groups_per_request,
                max_topics_per_request: self.max_topics_per_request,
                max_reason_bytes: self.max_reason_bytes,
                max_rebalance_timeout_ms: self.max_rebalance_timeout_ms,
                max_pending_member_ids: self.max_pending_member_ids,
                max_groups: self.max_groups,
                max_topics: self.max_topics,
                max_partitions_per_topic: i32::try_from(self.max_partitions_per_topic)
                    .unwrap_or(i32::MAX),
                max_admin_requests_in_flight: self.max_admin_requests_in_flight,
            },
            ..GroupConfig::default()
        }
    }

    /// The etcd endpoints of cluster mode; empty for a single node.
    pub fn etcd_endpoints(&self) -> Vec<String> {
        self.cluster_etcd
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(str::to_owned)
            .collect()
    }

    pub fn lease_ttl(&self) -> Duration {
        Duration::from_secs(self.lease_ttl_s)
    }

    pub fn etcd_startup_wait(&self) -> Duration {
        Duration::from_secs(self.etcd_startup_wait_s)
    }

    /// The node's id, advertised address and cluster name, as [`crate::ServerOptions`] takes
    /// them (empty settings are the defaults `NodeIdentity::new` derives).
    pub fn node_options(&self) -> Result<NodeOptions, ConfigError> {
        let advertise = match self.advertise.as_str() {
            "" => None,
            given => Some(
                given
                    .parse()
                    .map_err(|e: BadHostPort| ConfigError::Invalid {
                        setting: table::flag("advertise"),
                        value: given.to_owned(),
                        allowed: e.to_string(),
                    })?,
            ),
        };
        Ok(NodeOptions {
            node_id: (!self.node_id.is_empty()).then(|| self.node_id.clone()),
            advertise,
            cluster_name: self.cluster_name.clone(),
        })
    }

    /// The admin listener's address, unless it is switched off.
    pub fn admin_address(&self) -> Option<&str> {
        (self.admin_listen != "off").then_some(self.admin_listen.as_str())
    }

    pub fn idle_timeout(&self) -> Option<Duration> {
        (self.idle_timeout_ms > 0).then(|| Duration::from_millis(self.idle_timeout_ms))
    }

    /// Connection writer and admin listener limits, as [`crate::ServerOptions`] takes them.
    pub fn connection_limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            max_buffered_response_bytes: usize::try_from(self.max_buffered_response_bytes)
                .unwrap_or(usize::MAX),
            write_timeout: Duration::from_millis(self.write_timeout_ms),
            max_in_flight_large: self.max_in_flight_large as usize,
            admin_max_connections: self.admin_max_connections as usize,
            admin_timeout: Duration::from_millis(self.admin_timeout_ms),
        }
    }
}

/// A path setting that may be unset: empty (its default) means unset.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct OptionalPath(pub PathBuf);

impl std::str::FromStr for OptionalPath {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(OptionalPath(PathBuf::from(s)))
    }
}

fn set(path: &OptionalPath) -> Option<&Path> {
    (!path.0.as_os_str().is_empty()).then_some(path.0.as_path())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::HostPort;

    /// Environment variables are process-wide and tests run in parallel: every load in this
    /// module happens under this lock, and the test that sets variables holds it throughout.
    static ENV: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn load(args: &[&str]) -> Result<Settings, ConfigError> {
        let _env = ENV.lock().unwrap_or_else(|p| p.into_inner());
        load_unlocked(args)
    }

    fn load_unlocked(args: &[&str]) -> Result<Settings, ConfigError> {
        Settings::load(std::iter::once("musterd").chain(args.iter().copied()))
    }

    fn file(contents: &str) -> tempfile_path::TempFile {
        tempfile_path::TempFile::new(contents)
    }

    /// A config file that deletes itself.
    mod tempfile_path {
        use std::path::PathBuf;

        pub struct TempFile(pub PathBuf);

        impl TempFile {
            pub fn new(contents: &str) -> Self {
                use std::sync::atomic::{AtomicU32, Ordering};
                static NEXT: AtomicU32 = AtomicU32::new(0);
                let path = std::env::temp_dir().join(format!(
                    "musterd-config-{}-{}.toml",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::write(&path, contents).expect("write config");
                TempFile(path)
            }

            pub fn arg(&self) -> String {
                self.0.display().to_string()
            }
        }

        impl Drop for TempFile {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    #[test]
    fn flags_beat_env_beat_file_beat_defaults() {
        let f = file(
            "listen = \"127.0.0.1:9001\"\nmax_group_size = 7\nmax_in_flight = 33\nlog_format = \"json\"\n",
        );
        let env = ENV.lock().unwrap_or_else(|p| p.into_inner());
        std::env::set_var("MUSTER_MAX_IN_FLIGHT", "44");
        std::env::set_var("MUSTER_MAX_CONNECTIONS", "55");
        let s = load_unlocked(&["--config", &f.arg(), "--max-connections", "66"]).expect("valid");
        std::env::remove_var("MUSTER_MAX_IN_FLIGHT");
        std::env::remove_var("MUSTER_MAX_CONNECTIONS");
        drop(env);
        assert_eq!(s.listen, "127.0.0.1:9001", "file beats default");
        assert_eq!(s.max_group_size, 7, "file beats default");
        assert_eq!(s.max_in_flight, 44, "env beats file");
        assert_eq!(s.max_connections, 66, "flag beats env");
        assert_eq!(s.log_format, LogFormat::Json);
        assert_eq!(
            s.min_session_timeout_ms, 6_000,
            "default when nobody sets it"
        );
    }

    #[test]
    fn invalid_values_name_setting_value_and_range() {
        let e = load(&["--max-frame-bytes", "12"]).expect_err("too small");
        assert_eq!(
            e.to_string(),
            "invalid setting max-frame-bytes = 12: allowed range is 64..=1073741824"
        );
        let f = file("idle_timeout_ms = 999999999999\n");
        let e = load(&["--config", &f.arg()]).expect_err("too large");
        assert!(
            e.to_string().contains("idle-timeout-ms = 999999999999"),
            "{e}"
        );
        let e = load(&[
            "--min-session-timeout-ms",
            "9000",
            "--max-session-timeout-ms",
            "8000",
        ])
        .expect_err("min above max");
        assert!(e.to_string().contains("session-timeout-ms"), "{e}");
        let e = load(&["--listen", "nowhere"]).expect_err("not an address");
        assert!(e.to_string().contains("listen = nowhere"), "{e}");
    }

    #[test]
    fn unknown_keys_and_bad_files_are_refused() {
        let f = file("lisen = \"typo\"\n");
        let e = load(&["--config", &f.arg()]).expect_err("unknown key");
        assert!(e.to_string().contains("lisen"), "{e}");
        let e = load(&["--config", "/nonexistent/muster.toml"]).expect_err("missing file");
        assert!(e.to_string().contains("/nonexistent/muster.toml"), "{e}");
        let f = file("max_group_size = \"many\"\n");
        assert!(load(&["--config", &f.arg()]).is_err());
    }

    /// The annotated example in docs/operations.md is a valid file and says the defaults.
    #[test]
    fn the_documented_example_file_is_valid_and_matches_the_defaults() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/operations.md"
        ))
        .expect("docs/operations.md");
        let example = doc
            .split("```toml\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("a toml block");
        let f = file(example);
        let from_file = load(&["--config", &f.arg()]).expect("the example is valid");
        let defaults = load(&[]).expect("defaults");
        assert_eq!(
            format!(
                "{:?}",
                Settings {
                    config: None,
                    ..from_file
                }
            ),
            format!("{defaults:?}")
        );
    }

    #[test]
    fn defaults_are_valid_and_documented_in_help() {
        let s = load(&[]).expect("defaults valid");
        assert_eq!(s.group_config().offsets_retention_ms, 10_080 * 60_000);
        // A server embedded without settings (tests, `ServerOptions::new`) gets the same limits.
        assert_eq!(s.group_config().limits, Limits::default());
        let help = Settings::command().render_long_help().to_string();
        for flag in [
            "--listen",
            "--admin-listen",
            "--data-dir",
            "--max-connections",
            "--idle-timeout-ms",
            "--shutdown-timeout-ms",
            "--log-format",
            "--offsets-retention-minutes",
            "[default:",
        ] {
            assert!(help.contains(flag), "help lacks {flag}");
        }
    }

    /// Every row of the table is a flag with its default and environment variable in
    /// `--help`, and a key of the documented example file.
    #[test]
    fn every_setting_is_in_help_and_in_the_documented_example() {
        let help = Settings::command().render_long_help().to_string();
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/operations.md"
        ))
        .expect("docs/operations.md");
        for name in SETTINGS {
            let flag = format!("--{}", name.replace('_', "-"));
            // The flag's line and the lines under it, up to the next flag.
            let entry: String = help
                .lines()
                .skip_while(|l| !l.trim_start().starts_with(&format!("{flag} <")))
                .enumerate()
                .take_while(|(i, l)| *i == 0 || !l.trim_start().starts_with("--"))
                .map(|(_, l)| l)
                .collect();
            assert!(!entry.is_empty(), "help lacks {flag}:\n{help}");
            let env = format!("[env: MUSTER_{}=", name.to_uppercase());
            assert!(entry.contains(&env), "{flag} lacks {env}: {entry}");
            assert!(entry.contains("[default: "), "{flag} lacks its default");
            assert!(
                doc.contains(&format!("\n{name} = ")),
                "docs/operations.md's example lacks {name}"
            );
        }
    }

    #[test]
    fn node_settings_default_to_derived_values_and_are_checked() {
        let defaults = load(&[]).expect("defaults").node_options().expect("valid");
        assert_eq!(defaults, NodeOptions::default());
        let s = load(&[
            "--node-id",
            "muster-1",
            "--advertise",
            "[fd00::7]:7450",
            "--cluster-name",
            "prod",
        ])
        .expect("valid");
        let node = s.node_options().expect("valid");
        assert_eq!(node.node_id.as_deref(), Some("muster-1"));
        assert_eq!(
            node.advertise,
            Some(HostPort {
                host: "fd00::7".into(),
                port: 7450
            })
        );
        assert_eq!(node.cluster_name, "prod");
        let e = load(&["--advertise", "muster-1"]).expect_err("no port");
        assert!(
            e.to_string()
                .starts_with("invalid setting advertise = muster-1: expected HOST:PORT"),
            "{e}"
        );
        let e = load(&["--advertise", "muster-1:0"]).expect_err("port 0");
        assert!(e.to_string().contains("advertise = muster-1:0"), "{e}");
        let e = load(&["--node-id", "two words"]).expect_err("whitespace");
        assert!(e.to_string().contains("node-id = two words"), "{e}");
        let e = load(&["--cluster-name", ""]).expect_err("empty");
        assert!(e.to_string().contains("cluster-name = "), "{e}");
        let e = load(&["--cluster-name", "a/b"]).expect_err("slash");
        assert!(e.to_string().contains("[A-Za-z0-9._-]"), "{e}");
    }

    #[test]
    fn ranges_show_in_help_as_checked() {
        let help = Settings::command().render_help().to_string();
        for line in [
            "Smallest session timeout a member may ask for [1..=max-session-timeout-ms]",
            "Largest session timeout a member may ask for [min-session-timeout-ms..=86400000]",
            "Largest frame payload accepted, in bytes [64..=1073741824]",
        ] {
            assert!(help.contains(line), "help lacks {line:?}:\n{help}");
        }
        // An upper bound from another setting never reads as an empty range.
        let e = load(&["--max-session-timeout-ms", "0"]).expect_err("min above max");
        assert_eq!(
            e.to_string(),
            "invalid setting min-session-timeout-ms = 6000: allowed range is 1..=1"
        );
    }
}
