//! Latency histograms and the summaries printed from them.
//!
//! Latencies are recorded in nanoseconds into an [`hdrhistogram::Histogram`] with 3 significant
//! digits (so a percentile is exact to 0.1 %); summaries are given in microseconds or
//! milliseconds. Series of a handful of values (one per repeat) use [`Series`], which keeps the
//! values and takes nearest-rank percentiles of them.

use std::time::Duration;

use anyhow::{Context as _, Result};
use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency a histogram records (longer ones are clamped): 10 minutes.
const MAX_NANOS: u64 = 600_000_000_000;

/// A latency histogram in nanoseconds.
#[derive(Debug, Clone)]
pub struct Latencies(Histogram<u64>);

impl Latencies {
    pub fn new() -> Result<Self> {
        Histogram::new_with_bounds(1, MAX_NANOS, 3)
            .map(Latencies)
            .context("cannot create a latency histogram")
    }

    pub fn record(&mut self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos())
            .unwrap_or(MAX_NANOS)
            .clamp(1, MAX_NANOS);
        // In bounds by the clamp above, so this cannot fail.
        let _ = self.0.record(nanos);
    }

    pub fn merge(&mut self, other: &Latencies) -> Result<()> {
        self.0
            .add(&other.0)
            .context("cannot merge latency histograms")
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// p50 / p99 / p99.9 / max, in microseconds.
    pub fn summary(&self) -> LatencySummary {
        let us = |nanos: u64| nanos as f64 / 1_000.0;
        if self.0.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: self.0.len(),
            mean_us: self.0.mean() / 1_000.0,
            p50_us: us(self.0.value_at_quantile(0.50)),
            p99_us: us(self.0.value_at_quantile(0.99)),
            p999_us: us(self.0.value_at_quantile(0.999)),
            max_us: us(self.0.max()),
        }
    }
}

/// Percentiles of a latency histogram, in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl std::fmt::Display for LatencySummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {} p99 {} p99.9 {} max {} (n={})",
            fmt_us(self.p50_us),
            fmt_us(self.p99_us),
            fmt_us(self.p999_us),
            fmt_us(self.max_us),
            self.count
        )
    }
}

/// `  (N failed)` after a figure line, or nothing when no request failed.
pub fn failed_note(failed: u64) -> String {
    if failed > 0 {
        format!("  ({failed} failed)")
    } else {
        String::new()
    }
}

/// A microsecond figure with a sensible unit.
pub fn fmt_us(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1_000.0)
    } else if us >= 1_000.0 {
        format!("{:.2} ms", us / 1_000.0)
    } else {
        format!("{us:.0} µs")
    }
}

/// A few values (milliseconds, one per repeat) and their nearest-rank percentiles.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Series {
    pub values_ms: Vec<f64>,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Series {
    pub fn from_durations(values: &[Duration]) -> Self {
        Self::from_ms(values.iter().map(|d| d.as_secs_f64() * 1_000.0).collect())
    }

    pub fn from_ms(values_ms: Vec<f64>) -> Self {
        let mut sorted = values_ms.clone();
        sorted.sort_by(f64::total_cmp);
        Series {
            p50_ms: nearest_rank(&sorted, 0.50),
            p99_ms: nearest_rank(&sorted, 0.99),
            max_ms: sorted.last().copied().unwrap_or(0.0),
            values_ms,
        }
    }
}

impl std::fmt::Display for Series {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:.1} ms  p99 {:.1} ms  max {:.1} ms  (n={})",
            self.p50_ms,
            self.p99_ms,
            self.max_ms,
            self.values_ms.len()
        )
    }
}

/// The median of a few values (the mean of the middle two for an even count; 0 for none): one
/// figure per configuration out of its rounds.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Nearest-rank percentile of sorted values (0 for none).
fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s = Series::from_ms(vec![5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!(s.p50_ms, 3.0);
        assert_eq!(s.p99_ms, 5.0);
        assert_eq!(s.max_ms, 5.0);
        assert_eq!(Series::from_ms(Vec::new()).p50_ms, 0.0);
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(Vec::new()), 0.0);
    }

    #[test]
    fn histogram_summary() -> Result<()> {
        let mut h = Latencies::new()?;
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert!((s.p50_us - 500.0).abs() < 1.0, "{s:?}");
        assert!((s.p99_us - 990.0).abs() < 1.0, "{s:?}");
        Ok(())
    }
}
