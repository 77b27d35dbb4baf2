//! Logs and metrics: the `tracing` subscriber (`text` or `json`), the Prometheus recorder, and
//! the per-connection request metrics the writer records as answers leave.
//!
//! Metric names (all prefixed `muster_`) are listed in `docs/operations.md`. Labels are
//! bounded: request type, error name, group state, rebalance trigger — never a member or group
//! id.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use metrics::{counter, Counter};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use muster_protocol::{ErrorCode, Response, REQUEST_NAMES};
use tracing_subscriber::EnvFilter;

/// [`muster_coordinator::actors::Ticket::request_tag`] of an answer to a frame that never
/// decoded into a request.
pub const NO_REQUEST: u32 = u32::MAX;

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
    use metrics::{describe_counter, describe_gauge};
    describe_counter!("muster_connections_total", "Connections accepted");
    describe_gauge!("muster_connections_open", "Connections open now");
    describe_counter!(
        "muster_connections_rejected_total",
        "Connections refused (reason: max_connections)"
    );
    describe_counter!(
        "muster_connections_closed_total",
        "Connections closed by the server for a client not reading its answers (reason: write_timeout, response_buffer)"
    );
    describe_counter!(
        "muster_admin_accept_waits_total",
        "Times the admin listener stopped accepting because admin_max_connections were open"
    );
    describe_counter!(
        "muster_accept_errors_total",
        "Failed accepts (listener: client, admin), e.g. out of file descriptors"
    );
    describe_counter!(
        "muster_tls_handshake_failures_total",
        "TLS handshakes that failed (reason: not_tls, timeout, no_client_certificate, bad_certificate, closed, tls_error, io)"
    );
    describe_counter!(
        "muster_requests_total",
        "Requests answered, by type and error"
    );
    describe_counter!(
        "muster_shard_claims_total",
        "Shards this node claimed in a cluster (a shard read and kept is claimed once)"
    );
    describe_gauge!(
        "muster_quarantined_keys",
        "Keys in etcd this node could not decode, by shard: their groups are held back \
         (COORDINATOR_NOT_AVAILABLE) until the keys are fixed or deleted; /readyz names them"
    );
    muster_coordinator::metrics::describe();
}

/// Request latencies in fixed buckets ([`LATENCY_BUCKETS`]), per request type, rendered by
/// [`render_metrics`] beside the recorder's output. Not the recorder's own histogram: that one
/// stores every sample (value and timestamp) until its next upkeep, which cost ~8 % of the
/// server's CPU with pipelined heartbeats (docs/benchmarks.md). Here a writer adds a run of
/// answers with equal latency (a burst's heartbeats, answered together) in two atomic adds.
struct Latency {
    /// Per bucket (the last is `+Inf`), not cumulative; cumulated when rendered.
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Latency {
    const fn new() -> Self {
        Self {
            buckets: [const { AtomicU64::new(0) }; LATENCY_BUCKETS.len() + 1],
            sum_nanos: AtomicU64::new(0),
        }
    }

    fn add(&self, latency: Duration, count: u64) {
        let secs = latency.as_secs_f64();
        let bucket = LATENCY_BUCKETS.partition_point(|&bound| bound < secs);
        self.buckets[bucket].fetch_add(count, Ordering::Relaxed);
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos
            .fetch_add(nanos.saturating_mul(count), Ordering::Relaxed);
    }

    /// Appends this request type's series in Prometheus' text format, if it has any.
    fn render(&self, request: &str, out: &mut String) {
        use std::fmt::Write;
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return;
        }
        let mut cumulative = 0;
        for (i, count) in counts.iter().enumerate() {
            cumulative += count;
            match LATENCY_BUCKETS.get(i) {
                Some(bound) => writeln!(
                    out,
                    "{LATENCY_METRIC}_bucket{{request=\"{request}\",le=\"{bound}\"}} {cumulative}"
                ),
                None => writeln!(
                    out,
                    "{LATENCY_METRIC}_bucket{{request=\"{request}\",le=\"+Inf\"}} {cumulative}"
                ),
            }
            .ok();
        }
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        writeln!(out, "{LATENCY_METRIC}_sum{{request=\"{request}\"}} {sum}").ok();
        writeln!(
            out,
            "{LATENCY_METRIC}_count{{request=\"{request}\"}} {total}"
        )
        .ok();
    }
}

const LATENCY_METRIC: &str = "muster_request_duration_seconds";

static LATENCY: [Latency; REQUEST_NAMES.len()] = [const { Latency::new() }; REQUEST_NAMES.len()];

/// Everything `/metrics` serves: the recorder's metrics, then the request latency histograms.
pub fn render_metrics() -> String {
    // A gauge of "now": set from the open barriers at the moment it is read.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    muster_coordinator::metrics::refresh_longest_barrier(now_ms);
    let mut out = metrics_handle().render();
    out.push_str(&format!(
        "# HELP {LATENCY_METRIC} Time from a request's arrival to its answer being taken for writing to the socket\n\
         # TYPE {LATENCY_METRIC} histogram\n"
    ));
    for (latency, request) in LATENCY.iter().zip(REQUEST_NAMES) {
        latency.render(request, &mut out);
    }
    out
}

/// One connection's request metrics. Answers are written in rounds (whatever is ready, one
/// write); a round's figures are gathered here and added to the shared ones by
/// [`RequestMetrics::flush`] once per round, so a round of pipelined heartbeats costs a few
/// atomic adds rather than a few per answer.
pub struct RequestMetrics {
    ok: Vec<Counter>,
    /// Successful answers of this round per request type, not yet counted.
    ok_pending: Vec<u64>,
    /// The current run of answers with the same request type and latency: (type, latency, n).
    run: Option<(usize, Duration, u64)>,
}

impl RequestMetrics {
    pub fn new() -> Self {
        metrics_handle();
        let ok = REQUEST_NAMES
            .iter()
            .map(|&request| counter!("muster_requests_total", "request" => request, "error" => "NONE"))
            .collect();
        Self {
            ok,
            ok_pending: vec![0; REQUEST_NAMES.len()],
            run: None,
        }
    }

    /// Records one answer, `latency` after its request arrived.
    pub fn record(&mut self, request_tag: u32, response: &Response, latency: Duration) {
        let Some(index) = (request_tag != NO_REQUEST)
            .then_some(request_tag as usize)
            .filter(|&i| i < REQUEST_NAMES.len())
        else {
            counter!("muster_requests_total", "request" => "undecodable", "error" => error_name(response.error_code()))
                .increment(1);
            return;
        };
        match &mut self.run {
            Some((run_index, run_latency, n)) if *run_index == index && *run_latency == latency => {
                *n += 1
            }
            run => {
                if let Some((i, latency, n)) = run.take() {
                    LATENCY[i].add(latency, n);
                }
                *run = Some((index, latency, 1));
            }
        }
        match response.error_code() {
            0 => self.ok_pending[index] += 1,
            code => counter!(
                "muster_requests_total",
                "request" => REQUEST_NAMES[index],
                "error" => error_name(code)
            )
            .increment(1),
        }
    }

    /// Adds this round's figures to the shared ones.
    pub fn flush(&mut self) {
        if let Some((i, latency, n)) = self.run.take() {
            LATENCY[i].add(latency, n);
        }
        for (pending, counter) in self.ok_pending.iter_mut().zip(&self.ok) {
            if *pending > 0 {
                counter.increment(std::mem::take(pending));
            }
        }
    }
}

impl Default for RequestMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for RequestMetrics {
    fn drop(&mut self) {
        self.flush();
    }
}

fn error_name(code: i16) -> &'static str {
    ErrorCode::from_code(code).map_or("UNKNOWN", ErrorCode::name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_protocol::HeartbeatResponse;

    fn sample(body: &str, series: &str) -> Option<f64> {
        body.lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
    }

    #[test]
    fn latency_runs_are_counted_in_their_buckets_and_rendered_cumulatively() {
        // A request type no other test in this process records: DeleteGroups.
        let tag = REQUEST_NAMES
            .iter()
            .position(|&n| n == "DeleteGroups")
            .expect("DeleteGroups is a request") as u32;
        let ok = Response::Heartbeat(HeartbeatResponse { error_code: 0 });
        let mut metrics = RequestMetrics::new();
        let series = |suffix: &str, le: Option<&str>| match le {
            Some(le) => {
                format!("{LATENCY_METRIC}_{suffix}{{request=\"DeleteGroups\",le=\"{le}\"}}")
            }
            None => format!("{LATENCY_METRIC}_{suffix}{{request=\"DeleteGroups\"}}"),
        };
        // A run of three at 70 µs: not shared while it lasts.
        for _ in 0..3 {
            metrics.record(tag, &ok, Duration::from_micros(70));
        }
        assert_eq!(sample(&render_metrics(), &series("count", None)), None);
        // Then one at 3 ms and one at 70 µs again; the round ends.
        metrics.record(tag, &ok, Duration::from_millis(3));
        metrics.record(tag, &ok, Duration::from_micros(70));
        metrics.flush();
        let body = render_metrics();
        assert_eq!(sample(&body, &series("bucket", Some("0.00005"))), Some(0.0));
        assert_eq!(sample(&body, &series("bucket", Some("0.0001"))), Some(4.0));
        assert_eq!(sample(&body, &series("bucket", Some("0.0025"))), Some(4.0));
        assert_eq!(sample(&body, &series("bucket", Some("0.005"))), Some(5.0));
        assert_eq!(sample(&body, &series("bucket", Some("+Inf"))), Some(5.0));
        assert_eq!(sample(&body, &series("count", None)), Some(5.0));
        let sum = sample(&body, &series("sum", None)).expect("a sum");
        assert!((sum - 0.003_28).abs() < 1e-9, "sum {sum}");
        assert!(body.contains(&format!("# TYPE {LATENCY_METRIC} histogram")));
    }

    #[test]
    fn a_bound_is_in_its_own_bucket() {
        // Prometheus buckets are `le`: a latency equal to a bound counts in that bucket.
        let latency = Latency::new();
        latency.add(Duration::from_millis(1), 2);
        let le_1ms = LATENCY_BUCKETS
            .iter()
            .position(|&b| b == 0.001)
            .expect("a 1 ms bucket");
        assert_eq!(latency.buckets[le_1ms].load(Ordering::Relaxed), 2);
    }
}
