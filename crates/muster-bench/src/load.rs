//! The closed-loop load driver behind `heartbeat`, `echo` and `commit`: each connection keeps
//! exactly `depth` requests in flight, sending a new one for every answer it reads.
//!
//! One task per connection does both directions, so the client spends as little CPU per request
//! as it can (it shares the machine with the server): it encodes every free slot's request into
//! one buffer, writes it with one syscall, waits for at least one answer, then takes every
//! answer already buffered before writing again. A request's correlation id is its slot
//! (`0..depth`), so answers may arrive in any order; a slot is reused only once answered.
//!
//! Latency is measured from just before the write that carries the request to the moment its
//! answer is decoded; only answers received inside the measurement window (after the warm-up)
//! count, for throughput and for latency alike.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use futures_util::{FutureExt as _, StreamExt as _};
use muster_protocol::{decode_response, encode_request, Request, RequestFrame, Response};
use tokio::io::AsyncWriteExt as _;
use tokio_util::codec::FramedRead;

use crate::client::{codec, MAX_RESPONSE_BYTES};
use crate::stats::Latencies;
use crate::transport::Stream;

/// What one connection sends, and how it judges each answer.
pub trait Source: Send + 'static {
    /// The next request to send.
    fn next_request(&mut self) -> Request;
    /// Appends the whole frame of the next request, with `correlation_id`, to `buf`. A source
    /// that sends the same request over and over overrides this to copy a pre-encoded frame,
    /// so the client spends its (shared) CPU on syscalls, not on encoding.
    fn encode_next(&mut self, correlation_id: u32, buf: &mut Vec<u8>) -> Result<()> {
        encode_request(&RequestFrame::new(correlation_id, self.next_request()), buf)?;
        Ok(())
    }
    /// Whether `response` is a success.
    fn is_ok(&self, response: &Response) -> bool;
}

/// The window every connection of a run shares.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Answers before this are warm-up.
    pub measure_from: Instant,
    /// No request is sent after this.
    pub until: Instant,
}

impl Window {
    pub fn starting_now(warmup: Duration, duration: Duration) -> Self {
        let measure_from = Instant::now() + warmup;
        Window {
            measure_from,
            until: measure_from + duration,
        }
    }

    pub fn measured(&self) -> Duration {
        self.until.saturating_duration_since(self.measure_from)
    }
}

/// What one connection did inside the window.
#[derive(Debug)]
pub struct ConnStats {
    pub ok: u64,
    pub failed: u64,
    pub latencies: Latencies,
    /// The first failing answer, to show the operator.
    pub first_failure: Option<String>,
}

/// Runs `source` over `stream` with `depth` requests in flight until `window.until`.
pub async fn drive<S: Source>(
    stream: Stream,
    mut source: S,
    depth: usize,
    window: Window,
) -> Result<ConnStats> {
    let depth = depth.max(1);
    let (read, mut write) = tokio::io::split(stream);
    let mut frames = FramedRead::new(read, codec(MAX_RESPONSE_BYTES));
    let mut sent_at: Vec<Option<Instant>> = vec![None; depth];
    let mut free: Vec<u32> = (0..u32::try_from(depth)?).rev().collect();
    let mut buf = Vec::with_capacity(depth * 64);
    let mut stats = ConnStats {
        ok: 0,
        failed: 0,
        latencies: Latencies::new()?,
        first_failure: None,
    };
    let mut in_flight = 0usize;
    // Generous: an answer that takes longer than this means the server is stuck.
    let stall_limit = Duration::from_secs(30);
    loop {
        let now = Instant::now();
        if now < window.until {
            while let Some(slot) = free.pop() {
                source.encode_next(slot, &mut buf)?;
                if let Some(entry) = sent_at.get_mut(slot as usize) {
                    *entry = Some(now);
                }
                in_flight += 1;
            }
            if !buf.is_empty() {
                write.write_all(&buf).await?;
                buf.clear();
            }
        } else if in_flight == 0 {
            break;
        }
        // At least one answer, then whatever else is already here.
        let first = tokio::time::timeout(stall_limit, frames.next())
            .await
            .context("no answer for 30 s")?;
        let mut next = first;
        loop {
            let frame = match next {
                Some(frame) => frame.context("read failed")?,
                None => bail!("the server closed the connection"),
            };
            let received = Instant::now();
            let answer = decode_response(&frame)?;
            let slot = answer.correlation_id;
            let Some(sent) = sent_at.get_mut(slot as usize).and_then(Option::take) else {
                bail!(
                    "answer to an unknown correlation id {slot}: {:?}",
                    answer.response
                );
            };
            free.push(slot);
            in_flight -= 1;
            if received >= window.measure_from && received < window.until {
                if source.is_ok(&answer.response) {
                    stats.ok += 1;
                    stats.latencies.record(received - sent);
                } else {
                    stats.failed += 1;
                    if stats.first_failure.is_none() {
                        stats.first_failure = Some(format!("{:?}", answer.response));
                    }
                }
            }
            match frames.next().now_or_never() {
                Some(more) => next = more,
                None => break,
            }
        }
        if Instant::now() >= window.until && in_flight == 0 {
            break;
        }
    }
    Ok(stats)
}

/// The same request over and over, encoded once: each send copies the frame and writes the
/// correlation id into it (payload bytes 0..4, little-endian, after the 4-byte length).
pub struct Repeat {
    request: Request,
    frame: Vec<u8>,
}

impl Repeat {
    pub fn new(request: Request) -> Result<Self> {
        let mut frame = Vec::new();
        encode_request(&RequestFrame::new(0, request.clone()), &mut frame)?;
        Ok(Repeat { request, frame })
    }

    pub fn request(&self) -> &Request {
        &self.request
    }

    /// Appends the frame with `correlation_id` to `buf`.
    pub fn encode(&self, correlation_id: u32, buf: &mut Vec<u8>) {
        let start = buf.len();
        buf.extend_from_slice(&self.frame);
        if let Some(id) = buf.get_mut(start + 4..start + 8) {
            id.copy_from_slice(&correlation_id.to_le_bytes());
        }
    }
}

/// Totals over every connection of a run.
#[derive(Debug)]
pub struct RunStats {
    pub ok: u64,
    pub failed: u64,
    pub latencies: Latencies,
    pub measured: Duration,
    pub first_failure: Option<String>,
}

impl RunStats {
    pub fn per_second(&self) -> f64 {
        self.ok as f64 / self.measured.as_secs_f64().max(1e-9)
    }
}

/// Runs one driver per `(stream, source)` pair, all in the same window, on the current
/// runtime, and adds up what they did.
pub async fn run_all<S: Source>(
    conns: Vec<(Stream, S)>,
    depth: usize,
    warmup: Duration,
    duration: Duration,
) -> Result<RunStats> {
    let window = Window::starting_now(warmup, duration);
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|(stream, source)| tokio::spawn(drive(stream, source, depth, window)))
        .collect();
    let mut total = RunStats {
        ok: 0,
        failed: 0,
        latencies: Latencies::new()?,
        measured: window.measured(),
        first_failure: None,
    };
    for task in tasks {
        let stats = task.await.context("load task panicked")??;
        total.ok += stats.ok;
        total.failed += stats.failed;
        total.latencies.merge(&stats.latencies)?;
        if total.first_failure.is_none() {
            total.first_failure = stats.first_failure;
        }
    }
    Ok(total)
}
