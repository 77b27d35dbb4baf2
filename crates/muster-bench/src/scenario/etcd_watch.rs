//! `etcd-watch`: the baseline of a rebalance alone ([`crate::etcd_watch`]): put sent → the
//! last of `watchers` watchers notified, and → the put answered. `one-join --compare` measures
//! it between Muster's rebalances in the same run.

use anyhow::Result;
use serde::Serialize;

use super::{ms, Report};
use crate::etcd_watch::EtcdWatchers;
use crate::stats::Series;

#[derive(Serialize)]
struct Figures {
    scenario: &'static str,
    watchers: usize,
    last_notified: Series,
    put_answered: Series,
}

/// One put after a warm-up one, `repeats` times, against `watchers` watchers.
pub async fn run(
    endpoint: Option<&str>,
    watchers: usize,
    connections: Option<usize>,
    repeats: usize,
) -> Result<Report> {
    let mut etcd = EtcdWatchers::start(endpoint, watchers, connections).await?;
    let mut notified = Vec::new();
    let mut answered = Vec::new();
    for repeat in 0..=repeats.max(1) {
        let p = etcd.measure().await?;
        if repeat > 0 {
            notified.push(ms(p.last_notified));
            answered.push(ms(p.put_answered));
        }
    }
    let figures = Figures {
        scenario: "etcd-watch",
        watchers: etcd.watchers(),
        last_notified: Series::from_ms(notified),
        put_answered: Series::from_ms(answered),
    };
    let text = format!(
        "etcd: one put, {} watchers\n  put sent → last watcher notified: {}\n  put sent → put answered: {}\n",
        figures.watchers, figures.last_notified, figures.put_answered
    );
    Ok(Report::new(text, &figures))
}
