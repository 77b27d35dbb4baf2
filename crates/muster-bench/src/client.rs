//! A small pipelined protocol client, enough to drive members and admin requests: one TCP
//! connection, any number of requests in flight from any number of tasks, answers matched by
//! correlation id in whatever order they arrive.
//!
//! ```text
//!  call() ──(Request, oneshot)──► writer task ── assigns id, records it in `pending`,
//!                                   │            gathers what is queued into one write
//!                                   ▼
//!                                 socket ──► reader task: FramedRead + LengthDelimitedCodec,
//!                                            decode, take `pending[id]`, answer the oneshot
//! ```
//!
//! It is not `muster-client`'s connection: the benchmark must see the server's behaviour, not a
//! client library's retries and timers (the bench takes only its option parsing and TLS
//! settings from `muster-client`).
//!
//! Every connection the bench opens starts here: [`open`] (the transport in force, then
//! [`hello`]) for [`Conn`] and the load driver, [`hello`] alone over the attacks' plain TCP.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};
use futures_util::StreamExt;
use muster_protocol::{
    decode_response, encode_request, ErrorCode, HelloRequest, Request, RequestFrame, Response,
    PROTOCOL_VERSION,
};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};

use crate::transport::{self, Stream};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};

/// Largest response frame the benchmark accepts (a leader's JoinGroup answer for 10 000
/// members is about 1 MB).
pub const MAX_RESPONSE_BYTES: usize = 256 << 20;

/// Bytes the writer gathers from queued requests before one write.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// The frame codec both directions use: a 4-byte big-endian length, then the payload.
pub fn codec(max_frame: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .big_endian()
        .length_field_length(4)
        .max_frame_length(max_frame)
        .new_codec()
}

type Pending = Arc<Mutex<HashMap<u32, oneshot::Sender<Response>>>>;

struct Call {
    request: Request,
    answer: oneshot::Sender<Response>,
}

/// One connection to the server. Cheap to clone: clones share the connection.
#[derive(Clone)]
pub struct Conn {
    tx: mpsc::UnboundedSender<Call>,
}

impl Conn {
    /// Connects and says Hello ([`open`]).
    pub async fn connect(addr: SocketAddr, client_id: &str) -> Result<Conn> {
        let stream = open(addr, client_id).await?;
        let (read, write) = tokio::io::split(stream);
        let pending: Pending = Arc::default();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_loop(write, rx, Arc::clone(&pending)));
        tokio::spawn(read_loop(
            FramedRead::new(read, codec(MAX_RESPONSE_BYTES)),
            pending,
        ));
        Ok(Conn { tx })
    }

    /// Sends one request and waits for its answer.
    pub async fn call(&self, request: impl Into<Request>) -> Result<Response> {
        let (answer, rx) = oneshot::channel();
        self.tx
            .send(Call {
                request: request.into(),
                answer,
            })
            .map_err(|_| anyhow!("connection closed"))?;
        rx.await
            .map_err(|_| anyhow!("connection closed before the answer"))
    }

    /// [`Conn::call`] with a time limit.
    pub async fn call_within(
        &self,
        limit: Duration,
        request: impl Into<Request>,
    ) -> Result<Response> {
        tokio::time::timeout(limit, self.call(request))
            .await
            .map_err(|_| anyhow!("no answer within {limit:?}"))?
    }
}

/// Connects with the transport in force ([`transport::connect`]) and says Hello with its
/// token: the one way every connection of the bench's own client, and of the load driver,
/// starts.
pub async fn open(addr: SocketAddr, client_id: &str) -> Result<Stream> {
    let mut stream = transport::connect(addr).await?;
    hello(&mut stream, client_id, transport::token()).await?;
    Ok(stream)
}

/// Sends Hello (correlation id 0) on a fresh `stream` and reads its answer: an error unless
/// the server accepts. Nothing may follow the answer, which is read without buffering past it
/// (the caller reads the stream from here on).
pub async fn hello<S>(stream: &mut S, client_id: &str, auth_token: Option<String>) -> Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut buf = Vec::new();
    encode_request(
        &RequestFrame::new(
            0,
            HelloRequest {
                protocol_version: PROTOCOL_VERSION,
                client_id: client_id.to_owned(),
                auth_token,
            },
        ),
        &mut buf,
    )?;
    stream.write_all(&buf).await?;
    let mut frames = FramedRead::new(stream, codec(MAX_RESPONSE_BYTES));
    let frame = frames
        .next()
        .await
        .context("connection closed before the Hello answer")??;
    match decode_response(&frame)?.response {
        Response::Hello(h) if h.error_code == ErrorCode::None.code() => {}
        other => bail!("Hello refused: {other:?}"),
    }
    if !frames.read_buffer().is_empty() {
        bail!("unexpected bytes after the Hello answer");
    }
    Ok(())
}

/// Opens `n` connections, a few at a time (a burst of thousands overflows the listen backlog).
pub async fn connect_many(addr: SocketAddr, n: usize, client_id: &str) -> Result<Vec<Conn>> {
    let mut conns = Vec::with_capacity(n);
    for chunk_start in (0..n).step_by(64) {
        let chunk = (chunk_start..n.min(chunk_start + 64))
            .map(|_| Conn::connect(addr, client_id))
            .collect::<Vec<_>>();
        for conn in futures_util::future::join_all(chunk).await {
            conns.push(conn?);
        }
    }
    Ok(conns)
}

async fn write_loop(
    mut write: WriteHalf<Stream>,
    mut rx: mpsc::UnboundedReceiver<Call>,
    pending: Pending,
) {
    let mut next_id: u32 = 1;
    let mut buf: Vec<u8> = Vec::with_capacity(8 * 1024);
    while let Some(first) = rx.recv().await {
        let mut call = Some(first);
        while let Some(Call { request, answer }) = call.take() {
            let id = next_id;
            next_id = next_id.wrapping_add(1).max(1);
            if encode_request(&RequestFrame::new(id, request), &mut buf).is_ok() {
                pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(id, answer);
            }
            // A request that cannot be encoded drops `answer`: its caller sees an error.
            if buf.len() < WRITE_BATCH_BYTES {
                call = rx.try_recv().ok();
            }
        }
        if write.write_all(&buf).await.is_err() {
            return;
        }
        buf.clear();
    }
}

async fn read_loop(
    mut frames: FramedRead<ReadHalf<Stream>, LengthDelimitedCodec>,
    pending: Pending,
) {
    while let Some(Ok(frame)) = frames.next().await {
        let Ok(decoded) = decode_response(&frame) else {
            continue;
        };
        let waiter = pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&decoded.correlation_id);
        if let Some(waiter) = waiter {
            let _ = waiter.send(decoded.response);
        }
    }
    // Closed: every waiting caller learns it from its dropped sender.
    pending
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}
