//! The writer half of a connection and its protocol: the [`Outbox`] (the connection's
//! [`ReplySink`], which the coordinator's actors answer through), the [`ToWriter`] messages on
//! its channel, and the writer task that batches whatever answers are ready into one write and
//! gives the answered requests' in-flight slots back once their bytes are on the wire.
//!
//! In-flight bookkeeping lives here, not in the coordinator: every answer that comes through
//! the sink (`One`, `Many`) is to a request that took a slot; the session's own answers to
//! frames that never took one go as `Unslotted`.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use muster_coordinator::actors::{Answer, ReplySink};
use muster_protocol::{encode_response, ErrorCode, Response, ResponseFrame};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tracing::info;

use crate::connection_limits::ConnectionLimits;
use crate::telemetry::RequestMetrics;

/// Whether a request (by its tag, `Request::tag`) takes one of the connection's
/// `max_in_flight_large` slots besides its in-flight slot: the requests whose answer grows
/// with what a group, or the server, holds (~1 MB and more) and is built at once. JoinGroup
/// and SyncGroup do not: they can be held at a barrier that waits for other members' requests
/// on the same connection (a client may run many members on one connection), and their
/// answers are bounded by the group caps. A request left out here can be pipelined
/// `max_in_flight` deep without reading, each answer built at once: the hostile bench's
/// `non-reader-more` grew the server by 477 MiB that way with OffsetHistory, OffsetReset and
/// OffsetRestore before they were added.
#[inline]
pub(crate) const fn takes_large_slot(request_tag: u32) -> bool {
    // OffsetFetch, DescribeGroups, ListGroups, DescribeTopics, GroupHistory, GroupDiagnosis,
    // ConsumerGroupDescribe, GroupSimulate, OwnershipEpochs, OffsetHistory, OffsetReset,
    // OffsetRestore.
    matches!(
        request_tag,
        6 | 7 | 8 | 11 | 14 | 15 | 17 | 18 | 19 | 20 | 21 | 22
    )
}

/// Bytes the writer gathers from ready responses before one write.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// The writer buffer's capacity kept between writes.
const WRITE_BUF_KEEP: usize = 8 * 1024;

/// What a connection's writer receives.
#[derive(Debug)]
pub(crate) enum ToWriter {
    /// The answer to one request holding an in-flight slot.
    One(Answer),
    /// The answers to a batch of requests handled together, each holding a slot (one channel
    /// operation and one wake-up for all of them).
    Many(Vec<Answer>),
    /// An answer to a frame that never took an in-flight slot (an oversize frame).
    Unslotted(Answer),
}

/// The sending end of a connection's writer channel: what the session and, as the
/// connection's [`ReplySink`], the coordinator's actors answer through. One per connection,
/// shared (an `Arc` clone per batch or held request, never an allocation).
#[derive(Debug)]
pub(crate) struct Outbox(mpsc::UnboundedSender<ToWriter>);

impl Outbox {
    pub(crate) fn new() -> (Arc<Self>, mpsc::UnboundedReceiver<ToWriter>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Arc::new(Self(tx)), rx)
    }

    /// Queues `msg` for the writer. A closed connection simply drops it.
    pub(crate) fn push(&self, msg: ToWriter) {
        let _ = self.0.send(msg);
    }
}

impl ReplySink for Outbox {
    fn send(&self, answer: Answer) {
        self.push(ToWriter::One(answer));
    }

    fn send_all(&self, answers: Vec<Answer>) {
        self.push(ToWriter::Many(answers));
    }
}

/// A connection writer's limits (protocol §5, "Requests" and "Errors on the connection").
#[derive(Debug, Clone, Copy)]
pub(crate) struct WriterLimits {
    /// Encoded answers not yet written at which the session stops reading (the writer takes
    /// every free in-flight slot until the buffer drains below it). Twice this, with more than
    /// one answer buffered and the socket not taking bytes, closes the connection.
    pub max_buffered: usize,
    /// A socket that takes no byte for this long closes the connection.
    pub write_timeout: Duration,
    /// Large-answer slots of a connection ([`takes_large_slot`]).
    pub max_in_flight_large: usize,
}

impl From<&ConnectionLimits> for WriterLimits {
    fn from(limits: &ConnectionLimits) -> Self {
        Self {
            max_buffered: limits.max_buffered_response_bytes,
            write_timeout: limits.write_timeout,
            max_in_flight_large: limits.max_in_flight_large.max(1),
        }
    }
}

/// Why a connection's writer ended other than by closing cleanly.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteEnd {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("the client took no bytes for {0:?} (write timeout)")]
    Timeout(Duration),
    #[error("{0} bytes of answers unread by the client (over twice the buffer bound)")]
    Overflow(usize),
}

/// Writes responses as they come, batching whatever is ready into one write, and gives the
/// answered requests' in-flight slots back once their bytes are written. On `close` it writes
/// what is already queued and shuts the socket.
///
/// The fast path (the socket takes the batch at once) is one write per batch, as before any
/// limit: no timer, no extra clock read. Only when the socket does not take the bytes does the
/// writer arm the write timeout, and while it waits it keeps taking answers off the channel
/// and encoding them, so what a connection holds is counted in encoded bytes: at
/// [`WriterLimits::max_buffered`] it withholds the in-flight slots (the session stops reading,
/// as at `max_in_flight`), and at twice that it gives up on the client.
pub(crate) async fn write_responses<W: AsyncWrite + Unpin>(
    mut write: W,
    mut rx: mpsc::UnboundedReceiver<ToWriter>,
    permits: Arc<Semaphore>,
    large: Arc<Semaphore>,
    limits: WriterLimits,
    mut close: oneshot::Receiver<()>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), WriteEnd> {
    let mut out = Encoder::new();
    let mut gate = Gate {
        permits,
        withheld: 0,
        max_buffered: limits.max_buffered,
    };
    let mut closing = false;
    // Armed only while the socket refuses bytes; reset on every write that makes progress.
    let timer = tokio::time::sleep(limits.write_timeout);
    tokio::pin!(timer);
    loop {
        if out.unwritten() == 0 {
            if closing {
                tokio::time::timeout(limits.write_timeout, write.shutdown())
                    .await
                    .map_err(|_| WriteEnd::Timeout(limits.write_timeout))??;
                return Ok(());
            }
            let first = tokio::select! {
                biased;
                msg = rx.recv() => msg,
                _ = &mut close => None,
                _ = shutdown.wait_for(|down| *down) => None,
            };
            out.now = Instant::now();
            match first {
                Some(first) => out.push(first),
                None => closing = true,
            }
            if closing {
                // Closing (or shutting down): write what is already queued, then close.
                while let Ok(next) = rx.try_recv() {
                    out.push(next);
                }
            } else {
                while out.buf.len() < WRITE_BATCH_BYTES {
                    match rx.try_recv() {
                        Ok(next) => out.push(next),
                        Err(_) => break,
                    }
                }
            }
            out.metrics.flush();
            gate.check(out.unwritten());
        }
        // Fast path: the socket takes the bytes now.
        let attempt = write.write(out.pending()).now_or_never();
        let written = match attempt {
            Some(written) => written?,
            None => {
                // The client is not reading fast enough: wait for the socket, the timeout, or
                // more answers (encoded meanwhile, so the bound counts them).
                timer
                    .as_mut()
                    .reset(tokio::time::Instant::now() + limits.write_timeout);
                loop {
                    tokio::select! {
                        biased;
                        written = write.write(out.pending()) => break written?,
                        msg = rx.recv(), if !closing => {
                            let Some(msg) = msg else {
                                closing = true;
                                continue;
                            };
                            out.now = Instant::now();
                            out.compact();
                            out.push(msg);
                            out.metrics.flush();
                            gate.check(out.unwritten());
                            if out.unwritten() > limits.max_buffered.saturating_mul(2)
                                && out.buffered_answers > 1
                            {
                                return Err(WriteEnd::Overflow(out.unwritten()));
                            }
                        }
                        _ = &mut close, if !closing => closing = true,
                        _ = shutdown.wait_for(|down| *down), if !closing => closing = true,
                        _ = &mut timer => return Err(WriteEnd::Timeout(limits.write_timeout)),
                    }
                    if closing {
                        // What was queued before the close still goes (within the timeout).
                        out.compact();
                        while let Ok(next) = rx.try_recv() {
                            out.push(next);
                        }
                    }
                }
            }
        };
        if written == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero).into());
        }
        out.written += written;
        if out.unwritten() == 0 {
            // A TLS stream may keep encrypted bytes the socket did not take yet; they must go
            // before the writer sleeps. On plain TCP this is ready at once (a no-op).
            match write.flush().now_or_never() {
                Some(flushed) => flushed?,
                None => tokio::time::timeout(limits.write_timeout, write.flush())
                    .await
                    .map_err(|_| WriteEnd::Timeout(limits.write_timeout))??,
            }
            out.clear();
            // The responses are on the wire: their in-flight slots are free again.
            gate.permits.add_permits(std::mem::take(&mut out.answered));
            if out.answered_large > 0 {
                large.add_permits(std::mem::take(&mut out.answered_large));
            }
            gate.check(0);
        }
    }
}

/// The byte bound on a connection's unwritten answers, enforced through its in-flight slots:
/// at the bound the writer takes every free slot (the session, finding none, stops reading
/// until one comes back), and gives them back once the buffer is under the bound again.
struct Gate {
    permits: Arc<Semaphore>,
    /// Free slots the writer took because the buffer is at the bound.
    withheld: usize,
    max_buffered: usize,
}

impl Gate {
    fn check(&mut self, unwritten: usize) {
        if unwritten >= self.max_buffered {
            let free = self.permits.available_permits();
            if free > 0 {
                if let Ok(taken) = self
                    .permits
                    .try_acquire_many(u32::try_from(free).unwrap_or(u32::MAX))
                {
                    self.withheld += taken.num_permits();
                    taken.forget();
                }
            }
        } else if self.withheld > 0 {
            self.permits.add_permits(std::mem::take(&mut self.withheld));
        }
    }
}

/// The writer's buffer of encoded answers not yet written.
struct Encoder {
    buf: Vec<u8>,
    /// How much of `buf` is on the wire already.
    written: usize,
    /// In-flight slots the answers in `buf` hold.
    answered: usize,
    /// Large-answer slots ([`takes_large_slot`]) the answers in `buf` hold.
    answered_large: usize,
    /// Answers encoded into `buf` (slotted or not).
    buffered_answers: usize,
    /// When this round of answers was taken (one clock read per write for their latencies).
    now: Instant,
    metrics: RequestMetrics,
}

impl Encoder {
    fn new() -> Self {
        Self {
            buf: Vec::with_capacity(WRITE_BUF_KEEP),
            written: 0,
            answered: 0,
            answered_large: 0,
            buffered_answers: 0,
            now: Instant::now(),
            metrics: RequestMetrics::new(),
        }
    }

    /// Encoded bytes not yet written.
    fn unwritten(&self) -> usize {
        self.buf.len() - self.written
    }

    fn pending(&self) -> &[u8] {
        &self.buf[self.written..]
    }

    /// Drops the written prefix once it is large (the buffer grows while the socket waits).
    fn compact(&mut self) {
        if self.written >= WRITE_BATCH_BYTES {
            self.buf.drain(..self.written);
            self.written = 0;
        }
    }

    /// Everything is written: start over with a small buffer.
    fn clear(&mut self) {
        self.buf.clear();
        self.written = 0;
        self.buffered_answers = 0;
        // One large answer (a 10 000-member leader's JoinGroup is ~1 MB) grows the buffer; the
        // connection should not keep that high-water mark for the rest of its life.
        self.buf.shrink_to(WRITE_BUF_KEEP);
    }

    fn push(&mut self, next: ToWriter) {
        match next {
            ToWriter::One(answer) => {
                self.answered += 1;
                self.answered_large += usize::from(takes_large_slot(answer.ticket.request_tag));
                self.encode(answer);
            }
            ToWriter::Many(answers) => {
                self.answered += answers.len();
                for answer in answers {
                    self.answered_large += usize::from(takes_large_slot(answer.ticket.request_tag));
                    self.encode(answer);
                }
            }
            ToWriter::Unslotted(answer) => self.encode(answer),
        }
    }

    fn encode(&mut self, Answer { ticket, response }: Answer) {
        self.buffered_answers += 1;
        let latency = self.now.saturating_duration_since(ticket.arrived);
        self.metrics.record(ticket.request_tag, &response, latency);
        let frame = ResponseFrame {
            correlation_id: ticket.correlation_id,
            response,
        };
        let start = self.buf.len();
        if let Err(e) = encode_response(&frame, &mut self.buf) {
            // Only an answer past wincode's per-sequence limit could fail (the request limits
            // keep answers under it); answer with an error instead of nothing.
            self.buf.truncate(start);
            info!(error = %e, "response could not be encoded");
            let fallback = ResponseFrame {
                correlation_id: frame.correlation_id,
                response: Response::error(ErrorCode::UnknownServerError, "response too large"),
            };
            let _ = encode_response(&fallback, &mut self.buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use muster_coordinator::actors::Ticket;
    use muster_protocol::{decode_response, HeartbeatResponse};

    use super::*;

    /// Every request whose answer grows with what the server holds takes a large slot; the
    /// ones answered in a few bytes (or held at a barrier) do not. A new request kind must be
    /// placed here on purpose.
    #[test]
    fn the_requests_with_large_answers_take_a_large_slot() {
        use muster_protocol::*;
        let large: Vec<Request> = vec![
            OffsetFetchRequest::default().into(),
            DescribeGroupsRequest::default().into(),
            ListGroupsRequest::default().into(),
            DescribeTopicsRequest::default().into(),
            GroupHistoryRequest::default().into(),
            GroupDiagnosisRequest::default().into(),
            ConsumerGroupDescribeRequest::default().into(),
            GroupSimulateRequest::default().into(),
            OwnershipEpochsRequest::default().into(),
            OffsetHistoryRequest::default().into(),
            OffsetResetRequest {
                group_id: String::new(),
                to: ResetTo::EarliestRecorded,
                topics: Vec::new(),
                execute: false,
            }
            .into(),
            OffsetRestoreRequest::default().into(),
        ];
        let small: Vec<Request> = vec![
            HelloRequest::default().into(),
            JoinGroupRequest::default().into(),
            SyncGroupRequest::default().into(),
            HeartbeatRequest::default().into(),
            LeaveGroupRequest::default().into(),
            OffsetCommitRequest::default().into(),
            DeleteGroupsRequest::default().into(),
            CreateTopicsRequest::default().into(),
            FindCoordinatorRequest::default().into(),
            DescribeClusterRequest::default().into(),
            ConsumerGroupHeartbeatRequest::default().into(),
        ];
        assert_eq!(
            large.len() + small.len(),
            23,
            "every request kind is listed"
        );
        for r in &large {
            assert!(takes_large_slot(r.tag()), "{} takes a large slot", r.name());
        }
        for r in &small {
            assert!(!takes_large_slot(r.tag()), "{} takes none", r.name());
        }
    }

    fn answer(correlation_id: u32) -> Answer {
        tagged(correlation_id, 3)
    }

    /// An answer (a heartbeat's body) to a request of tag `request_tag`.
    fn tagged(correlation_id: u32, request_tag: u32) -> Answer {
        Ticket {
            correlation_id,
            request_tag,
            arrived: Instant::now(),
        }
        .answer(Response::Heartbeat(HeartbeatResponse {
            error_code: ErrorCode::None.code(),
        }))
    }

    /// A heartbeat answer's frame: 4 + 4 + 4 + 2 bytes.
    const HEARTBEAT_FRAME: usize = 14;

    /// A writer on one end of an in-memory pipe of `pipe` bytes, the session's side of its
    /// channel, and its in-flight slots (`slots` of them, all taken as by the session).
    struct Harness {
        outbox: Arc<Outbox>,
        permits: Arc<Semaphore>,
        /// The large-answer slots, all `slots` taken too.
        large: Arc<Semaphore>,
        reader: tokio::io::DuplexStream,
        task: tokio::task::JoinHandle<Result<(), WriteEnd>>,
        _close: oneshot::Sender<()>,
        _shutdown: watch::Sender<bool>,
    }

    fn harness(pipe: usize, slots: usize, limits: WriterLimits) -> Harness {
        let (writer, reader) = tokio::io::duplex(pipe);
        let (outbox, rx) = Outbox::new();
        let permits = Arc::new(Semaphore::new(slots));
        permits
            .try_acquire_many(u32::try_from(slots).expect("few"))
            .expect("free slots")
            .forget();
        let large = Arc::new(Semaphore::new(slots));
        large
            .try_acquire_many(u32::try_from(slots).expect("few"))
            .expect("free slots")
            .forget();
        let (close, close_rx) = oneshot::channel();
        let (shutdown, shutdown_rx) = watch::channel(false);
        let task = tokio::spawn(write_responses(
            writer,
            rx,
            Arc::clone(&permits),
            Arc::clone(&large),
            limits,
            close_rx,
            shutdown_rx,
        ));
        Harness {
            outbox,
            permits,
            large,
            reader,
            task,
            _close: close,
            _shutdown: shutdown,
        }
    }

    /// Polls `cond` every millisecond for up to 5 s.
    async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
        for _ in 0..5_000 {
            if cond() {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        false
    }

    #[tokio::test]
    async fn answers_held_by_a_buffering_stream_are_flushed() {
        // A TLS stream takes bytes it cannot send yet and keeps them until the next write or a
        // flush; a BufWriter does the same deterministically. The writer must flush before it
        // sleeps, or the answer never leaves.
        use tokio::io::AsyncReadExt;
        let (pipe, mut reader) = tokio::io::duplex(1024);
        let (outbox, rx) = Outbox::new();
        let permits = Arc::new(Semaphore::new(1));
        permits.try_acquire().expect("a free slot").forget();
        let large = Arc::new(Semaphore::new(1));
        let (_close, close_rx) = oneshot::channel();
        let (_shutdown, shutdown_rx) = watch::channel(false);
        let limits = WriterLimits {
            max_buffered: 1 << 20,
            write_timeout: Duration::from_secs(60),
            max_in_flight_large: 1,
        };
        let task = tokio::spawn(write_responses(
            tokio::io::BufWriter::new(pipe),
            rx,
            Arc::clone(&permits),
            large,
            limits,
            close_rx,
            shutdown_rx,
        ));
        outbox.send(answer(7));
        let mut buf = [0u8; HEARTBEAT_FRAME];
        tokio::time::timeout(Duration::from_secs(5), reader.read_exact(&mut buf))
            .await
            .expect("the answer was flushed")
            .expect("read");
        assert_eq!(
            &buf[4..8],
            &7u32.to_le_bytes(),
            "the answer's correlation id"
        );
        assert!(eventually(|| permits.available_permits() == 1).await);
        task.abort();
    }

    #[tokio::test]
    async fn at_the_byte_bound_the_writer_withholds_free_slots_until_the_client_reads() {
        use tokio::io::AsyncReadExt;
        let limits = WriterLimits {
            max_buffered: 10 * HEARTBEAT_FRAME,
            write_timeout: Duration::from_secs(60),
            max_in_flight_large: 8,
        };
        // 100 slots, 20 of them taken by requests whose answers the client does not read.
        let mut h = harness(16, 100, limits);
        h.permits.add_permits(80);
        for i in 0..20 {
            h.outbox.send(answer(i));
        }
        let permits = Arc::clone(&h.permits);
        assert!(
            eventually(|| permits.available_permits() == 0).await,
            "the session would stop reading"
        );
        // The client reads everything: every slot comes back.
        let mut buf = vec![0u8; 20 * HEARTBEAT_FRAME];
        h.reader.read_exact(&mut buf).await.expect("answers");
        assert!(eventually(|| permits.available_permits() == 100).await);
        assert!(!h.task.is_finished());
    }

    #[tokio::test]
    async fn a_client_that_takes_nothing_for_the_write_timeout_is_given_up() {
        let limits = WriterLimits {
            max_buffered: 1 << 20,
            write_timeout: Duration::from_millis(50),
            max_in_flight_large: 8,
        };
        let h = harness(16, 10, limits);
        for i in 0..10 {
            h.outbox.send(answer(i));
        }
        let ended = tokio::time::timeout(Duration::from_secs(5), h.task)
            .await
            .expect("the writer ends")
            .expect("no panic");
        assert!(matches!(ended, Err(WriteEnd::Timeout(_))), "{ended:?}");
        drop(h.reader);
    }

    #[tokio::test]
    async fn unread_answers_over_twice_the_bound_end_the_connection() {
        let limits = WriterLimits {
            max_buffered: 10 * HEARTBEAT_FRAME,
            write_timeout: Duration::from_secs(60),
            max_in_flight_large: 8,
        };
        let h = harness(16, 100, limits);
        for i in 0..100 {
            h.outbox.send(answer(i));
            tokio::task::yield_now().await;
        }
        let ended = tokio::time::timeout(Duration::from_secs(5), h.task)
            .await
            .expect("the writer ends")
            .expect("no panic");
        assert!(matches!(ended, Err(WriteEnd::Overflow(_))), "{ended:?}");
        drop(h.reader);
    }

    #[test]
    fn answers_through_the_sink_give_their_slots_back_unslotted_ones_do_not() {
        let (outbox, mut rx) = Outbox::new();
        outbox.send(answer(1));
        outbox.send_all(vec![answer(2), answer(3)]);
        outbox.push(ToWriter::Unslotted(answer(4)));
        let mut out = Encoder::new();
        while let Ok(next) = rx.try_recv() {
            out.push(next);
        }
        assert_eq!(out.answered, 3);
        // Four frames, in the order queued, each with its correlation id.
        let mut ids = Vec::new();
        let mut rest = &out.buf[..];
        while rest.len() >= 4 {
            let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            let frame = decode_response(&rest[4..4 + len]).expect("a response frame");
            ids.push(frame.correlation_id);
            rest = &rest[4 + len..];
        }
        assert_eq!(ids, [1, 2, 3, 4]);
    }

    #[tokio::test]
    async fn written_large_answers_give_their_large_slots_back_others_do_not() {
        use tokio::io::AsyncReadExt;
        let limits = WriterLimits {
            max_buffered: 1 << 20,
            write_timeout: Duration::from_secs(60),
            max_in_flight_large: 8,
        };
        let mut h = harness(16, 10, limits);
        // OffsetFetch, DescribeGroups, ListGroups, DescribeTopics; then JoinGroup, SyncGroup,
        // Heartbeat, OffsetCommit: only the first four held a large slot.
        for (i, tag) in [6, 7, 8, 11, 1, 2, 3, 5].into_iter().enumerate() {
            h.outbox.send(tagged(u32::try_from(i).expect("few"), tag));
        }
        let mut buf = vec![0u8; 8 * HEARTBEAT_FRAME];
        h.reader.read_exact(&mut buf).await.expect("answers");
        let (permits, large) = (Arc::clone(&h.permits), Arc::clone(&h.large));
        assert!(eventually(|| permits.available_permits() == 8).await);
        assert_eq!(large.available_permits(), 4);
    }
}
