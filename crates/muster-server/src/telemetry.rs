//! Logs and metrics: the `tracing` subscriber (`text` or `json`), the Prometheus recorder, and
//! the per-connection request metrics the writer records as answers leave.
//!
//! Metric names (all prefixed `muster_`) are listed in `docs/operations.md`. Labels are
//! bounded: request type, error name, group state, rebalance trigger — never a member or group
//! id.

use std::sync::OnceLock;
use std::time::Instant;

use metrics::{counter, histogram, Counter, Histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use muster_coordinator::actors::NO_REQUEST;
use muster_protocol::{ErrorCode, Response, REQUEST_NAMES};
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (for containers and log shippers).
    Json,
}

/// Installs the global `tracing` subscriber, writing to stderr. `RUST_LOG`, when set, wins
/// over `level`.
pub fn init_logging(format: LogFormat, level: &str) -> Result<(), String> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => {
            EnvFilter::try_new(&spec).map_err(|e| format!("invalid RUST_LOG {spec:?}: {e}"))?
        }
        _ => {
            EnvFilter::try_new(level).map_err(|e| format!("invalid --log-level {level:?}: {e}"))?
        }
    };
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
    result.map_err(|e| format!("logging already initialised: {e}"))
}

/// Request latency buckets, in seconds: from a pipelined heartbeat to a held JoinGroup.
const LATENCY_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// The process-wide Prometheus recorder (installed once; later calls share it, so several
/// servers in one test process work).
pub fn metrics_handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets(LATENCY_BUCKETS)
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        // Another recorder may already be installed (an embedding application's): then ours
        // still renders what it records, and the other receives the rest.
        let _ = metrics::set_global_recorder(recorder);
        describe();
        // Histogram samples accumulate until upkeep folds them into the buckets; a recorder
        // built without the exporter's own listener has no upkeep task, so run one (without
        // it memory grows with every request between scrapes).
        let upkeep = handle.clone();
        let _ = std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
                upkeep.run_upkeep();
            });
        handle
    })
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!("muster_connections_total", "Connections accepted");
    describe_gauge!("muster_connections_open", "Connections open now");
    describe_counter!(
        "muster_connections_rejected_total",
        "Connections refused (reason: max_connections)"
    );
    describe_counter!(
        "muster_requests_total",
        "Requests answered, by type and error"
    );
    describe_histogram!(
        "muster_request_duration_seconds",
        Unit::Seconds,
        "Time from a request's arrival to its answer being queued for the socket"
    );
    muster_coordinator::metrics::describe();
}

/// Pre-registered handles for one connection's answers, so the per-answer cost is an index
/// and two atomic adds rather than a registry lookup.
pub struct RequestMetrics {
    ok: Vec<Counter>,
    latency: Vec<Histogram>,
}

impl RequestMetrics {
    pub fn new() -> Self {
        metrics_handle();
        let ok = REQUEST_NAMES
            .iter()
            .map(|&request| counter!("muster_requests_total", "request" => request, "error" => "NONE"))
            .collect();
        let latency = REQUEST_NAMES
            .iter()
            .map(|&request| histogram!("muster_request_duration_seconds", "request" => request))
            .collect();
        Self { ok, latency }
    }

    /// Records one answer.
    pub fn record(&self, request_tag: u32, response: &Response, started: Instant) {
        let Some(index) = (request_tag != NO_REQUEST)
            .then_some(request_tag as usize)
            .filter(|&i| i < REQUEST_NAMES.len())
        else {
            counter!("muster_requests_total", "request" => "undecodable", "error" => error_name(response.error_code()))
                .increment(1);
            return;
        };
        self.latency[index].record(started.elapsed().as_secs_f64());
        match response.error_code() {
            0 => self.ok[index].increment(1),
            code => counter!(
                "muster_requests_total",
                "request" => REQUEST_NAMES[index],
                "error" => error_name(code)
            )
            .increment(1),
        }
    }
}

impl Default for RequestMetrics {
    fn default() -> Self {
        Self::new()
    }
}

fn error_name(code: i16) -> &'static str {
    ErrorCode::from_code(code).map_or("UNKNOWN", ErrorCode::name)
}
