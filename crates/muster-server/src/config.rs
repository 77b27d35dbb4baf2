//! `musterd`'s settings, from four layers with this precedence: command-line flags, then
//! environment variables (`MUSTER_<FLAG_IN_CAPS>`), then a TOML file (`--config FILE`, keys
//! are the flag names with `_` for `-`), then defaults. Every value, wherever it came from, is
//! checked by [`Settings::validate`]; a bad one stops startup with a message naming the
//! setting, the value and what is allowed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser};
use muster_coordinator::GroupConfig;
use serde::Deserialize;

use crate::telemetry::LogFormat;

/// Muster consumer-group coordinator.
///
/// Every setting can be given as a flag, as an environment variable MUSTER_<FLAG_IN_CAPS>, or
/// in the TOML file named by --config (keys are flag names with underscores); flags win over
/// the environment, which wins over the file.
#[derive(Debug, Clone, Parser)]
#[command(name = "musterd", version, about, long_about)]
pub struct Settings {
    /// TOML file with settings (see docs/operations.md for an annotated example).
    #[arg(long, env = "MUSTER_CONFIG")]
    pub config: Option<PathBuf>,

    /// Address to accept client connections on.
    #[arg(long, env = "MUSTER_LISTEN", default_value = "127.0.0.1:7450")]
    pub listen: String,

    /// Address of the HTTP listener for /metrics, /healthz and /readyz ("off" disables it).
    #[arg(long, env = "MUSTER_ADMIN_LISTEN", default_value = "127.0.0.1:7451")]
    pub admin_listen: String,

    /// Directory holding durable state (offsets, groups, topics).
    #[arg(long, env = "MUSTER_DATA_DIR", default_value = "./muster-data")]
    pub data_dir: PathBuf,

    /// Smallest session timeout a member may ask for [1..=max-session-timeout-ms].
    #[arg(long, env = "MUSTER_MIN_SESSION_TIMEOUT_MS", default_value_t = 6_000)]
    pub min_session_timeout_ms: u32,

    /// Largest session timeout a member may ask for [min-session-timeout-ms..=86400000].
    #[arg(
        long,
        env = "MUSTER_MAX_SESSION_TIMEOUT_MS",
        default_value_t = 1_800_000
    )]
    pub max_session_timeout_ms: u32,

    /// How long the first rebalance of an empty group waits for more members [0..=3600000].
    #[arg(
        long,
        env = "MUSTER_INITIAL_REBALANCE_DELAY_MS",
        default_value_t = 3_000
    )]
    pub initial_rebalance_delay_ms: u32,

    /// Most members per group (0 = unlimited).
    #[arg(long, env = "MUSTER_MAX_GROUP_SIZE", default_value_t = 0)]
    pub max_group_size: u32,

    /// Largest frame payload accepted, in bytes [64..=1073741824].
    #[arg(long, env = "MUSTER_MAX_FRAME_BYTES", default_value_t = 1_048_576)]
    pub max_frame_bytes: u32,

    /// Requests one connection may have in flight before the server stops reading from it
    /// [1..=1000000].
    #[arg(long, env = "MUSTER_MAX_IN_FLIGHT", default_value_t = 1024)]
    pub max_in_flight: u32,

    /// Most client connections open at once; more are answered TOO_MANY_CONNECTIONS and closed
    /// [1..=1000000].
    #[arg(long, env = "MUSTER_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: u32,

    /// A connection with nothing in flight and no request for this long is closed (0 = never)
    /// [0..=86400000].
    #[arg(long, env = "MUSTER_IDLE_TIMEOUT_MS", default_value_t = 600_000)]
    pub idle_timeout_ms: u64,

    /// Offsets of a group that has been Empty this long expire; an Empty group with no offsets
    /// left is then removed [1..=1099511627776].
    #[arg(
        long,
        env = "MUSTER_OFFSETS_RETENTION_MINUTES",
        default_value_t = 10_080
    )]
    pub offsets_retention_minutes: u64,

    /// Worker threads for connections and groups (0 = one per core) [0..=1024].
    #[arg(long, env = "MUSTER_WORKERS", default_value_t = 0)]
    pub workers: usize,

    /// On SIGTERM/SIGINT, how long to wait for held requests to be answered and storage to be
    /// flushed before exiting anyway [0..=600000].
    #[arg(long, env = "MUSTER_SHUTDOWN_TIMEOUT_MS", default_value_t = 10_000)]
    pub shutdown_timeout_ms: u64,

    /// Log line format.
    #[arg(long, env = "MUSTER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter (e.g. "info" or "info,muster_coordinator=debug"); RUST_LOG, when set, wins.
    #[arg(long, env = "MUSTER_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
}

/// The TOML file: every setting optional, unknown keys refused (a typo must not pass silently).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSettings {
    listen: Option<String>,
    admin_listen: Option<String>,
    data_dir: Option<PathBuf>,
    min_session_timeout_ms: Option<u32>,
    max_session_timeout_ms: Option<u32>,
    initial_rebalance_delay_ms: Option<u32>,
    max_group_size: Option<u32>,
    max_frame_bytes: Option<u32>,
    max_in_flight: Option<u32>,
    max_connections: Option<u32>,
    idle_timeout_ms: Option<u64>,
    offsets_retention_minutes: Option<u64>,
    workers: Option<usize>,
    shutdown_timeout_ms: Option<u64>,
    log_format: Option<LogFormat>,
    log_level: Option<String>,
}

/// A setting that stops startup.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid setting {setting} = {value}: {allowed}")]
    Invalid {
        setting: &'static str,
        value: String,
        allowed: String,
    },
    #[error("cannot read config file {path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error(transparent)]
    Cli(#[from] clap::Error),
}

impl Settings {
    /// Flags and environment from `args`, then the config file, then validation.
    pub fn load<I, T>(args: I) -> Result<Settings, ConfigError>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Settings::command().try_get_matches_from(args)?;
        let mut settings = Settings::from_arg_matches(&matches)?;
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
        let defaulted = |id: &str| {
            matches
                .value_source(id)
                .is_none_or(|s| s == ValueSource::DefaultValue)
        };
        macro_rules! layer {
            ($($field:ident),* $(,)?) => {$(
                if let Some(value) = file.$field {
                    if defaulted(stringify!($field)) {
                        self.$field = value;
                    }
                }
            )*};
        }
        layer!(
            listen,
            admin_listen,
            data_dir,
            min_session_timeout_ms,
            max_session_timeout_ms,
            initial_rebalance_delay_ms,
            max_group_size,
            max_frame_bytes,
            max_in_flight,
            max_connections,
            idle_timeout_ms,
            offsets_retention_minutes,
            workers,
            shutdown_timeout_ms,
            log_format,
            log_level,
        );
        Ok(())
    }

    /// Checks every value against its allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        fn within<T: PartialOrd + std::fmt::Display + Copy>(
            setting: &'static str,
            value: T,
            min: T,
            max: T,
        ) -> Result<(), ConfigError> {
            if value < min || value > max {
                return Err(ConfigError::Invalid {
                    setting,
                    value: value.to_string(),
                    allowed: format!("allowed range is {min}..={max}"),
                });
            }
            Ok(())
        }
        within(
            "min-session-timeout-ms",
            self.min_session_timeout_ms,
            1,
            self.max_session_timeout_ms.max(1),
        )?;
        within(
            "max-session-timeout-ms",
            self.max_session_timeout_ms,
            self.min_session_timeout_ms,
            86_400_000,
        )?;
        within(
            "initial-rebalance-delay-ms",
            self.initial_rebalance_delay_ms,
            0,
            3_600_000,
        )?;
        within("max-frame-bytes", self.max_frame_bytes, 64, 1 << 30)?;
        within("max-in-flight", self.max_in_flight, 1, 1_000_000)?;
        within("max-connections", self.max_connections, 1, 1_000_000)?;
        within("idle-timeout-ms", self.idle_timeout_ms, 0, 86_400_000)?;
        within(
            "offsets-retention-minutes",
            self.offsets_retention_minutes,
            1,
            1 << 40,
        )?;
        within("workers", self.workers, 0, 1024)?;
        within("shutdown-timeout-ms", self.shutdown_timeout_ms, 0, 600_000)?;
        for (setting, addr) in [
            ("listen", &self.listen),
            ("admin-listen", &self.admin_listen),
        ] {
            if setting == "admin-listen" && addr == "off" {
                continue;
            }
            if addr.parse::<std::net::SocketAddr>().is_err() && !addr.contains(':') {
                return Err(ConfigError::Invalid {
                    setting,
                    value: addr.clone(),
                    allowed: "expected HOST:PORT".into(),
                });
            }
        }
        if self.log_level.trim().is_empty() {
            return Err(ConfigError::Invalid {
                setting: "log-level",
                value: String::new(),
                allowed: "expected a filter such as \"info\"".into(),
            });
        }
        Ok(())
    }

    /// The group rules these settings describe.
    pub fn group_config(&self) -> GroupConfig {
        GroupConfig {
            min_session_timeout_ms: self.min_session_timeout_ms,
            max_session_timeout_ms: self.max_session_timeout_ms,
            initial_rebalance_delay_ms: self.initial_rebalance_delay_ms,
            max_group_size: self.max_group_size,
            offsets_retention_ms: self.offsets_retention_minutes.saturating_mul(60_000),
            ..GroupConfig::default()
        }
    }

    /// The admin listener's address, unless it is switched off.
    pub fn admin_address(&self) -> Option<&str> {
        (self.admin_listen != "off").then_some(self.admin_listen.as_str())
    }

    pub fn idle_timeout(&self) -> Option<Duration> {
        (self.idle_timeout_ms > 0).then(|| Duration::from_millis(self.idle_timeout_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
