//! The machine's limit for this protocol: a minimal server that does the per-frame work of
//! `musterd` and nothing else.
//!
//! Plain tokio, one task per connection, the same framing (`LengthDelimitedCodec`, 4-byte
//! big-endian length): it reads a frame, decodes it with `muster-protocol`, and answers with a
//! Heartbeat response (a Hello with a Hello) encoded with `muster-protocol`, gathering the
//! answers to every frame already read into one write, as `musterd`'s connection writer does.
//! No actors, no group lookup, no channel between reader and writer. Running the heartbeat load
//! against it and against `musterd` in the same run gives "what fraction of the machine's
//! limit does the coordinator reach".

use std::net::SocketAddr;

use anyhow::{Context as _, Result};
use futures_util::{FutureExt as _, StreamExt as _};
use muster_protocol::{
    decode_request, encode_response, ErrorCode, HeartbeatResponse, HelloResponse, Request,
    Response, ResponseFrame, DEFAULT_MAX_FRAME_BYTES, MAX_PROTOCOL_VERSION, MIN_PROTOCOL_VERSION,
};
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::FramedRead;

use crate::client::codec;

/// Bytes of answers gathered before one write.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// An echo server on its own runtime (`threads` worker threads), like a separate process.
pub struct EchoServer {
    addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl EchoServer {
    /// Binds `127.0.0.1:0` and starts serving.
    pub fn start(threads: usize) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("echo")
            .enable_all()
            .build()
            .context("cannot start the echo runtime")?;
        // Bound here, registered with the echo runtime inside its own task (this may run on
        // another runtime's thread, where `block_on` is not allowed).
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        runtime.spawn(async move {
            if let Ok(listener) = TcpListener::from_std(listener) {
                accept_loop(listener).await;
            }
        });
        Ok(EchoServer {
            addr,
            runtime: Some(runtime),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

async fn accept_loop(listener: TcpListener) {
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve(stream));
    }
}

/// Answers every frame of one connection until it closes.
async fn serve(stream: TcpStream) {
    let (read, mut write) = stream.into_split();
    let mut frames = FramedRead::new(read, codec(DEFAULT_MAX_FRAME_BYTES as usize));
    let mut out = Vec::with_capacity(8 * 1024);
    while let Some(Ok(first)) = frames.next().await {
        answer(&first, &mut out);
        while out.len() < WRITE_BATCH_BYTES {
            match frames.next().now_or_never() {
                Some(Some(Ok(frame))) => answer(&frame, &mut out),
                _ => break,
            }
        }
        if write.write_all(&out).await.is_err() {
            return;
        }
        out.clear();
    }
}

fn answer(payload: &[u8], out: &mut Vec<u8>) {
    let frame = match decode_request(payload) {
        Ok(request) => ResponseFrame::new(
            request.correlation_id,
            match request.request {
                Request::Hello(_) => Response::Hello(HelloResponse {
                    error_code: ErrorCode::None.code(),
                    min_version: MIN_PROTOCOL_VERSION,
                    max_version: MAX_PROTOCOL_VERSION,
                    server_id: "echo".to_owned(),
                }),
                _ => Response::Heartbeat(HeartbeatResponse {
                    error_code: ErrorCode::None.code(),
                }),
            },
        ),
        Err(e) => ResponseFrame::new(
            muster_protocol::correlation_hint(payload),
            Response::error(ErrorCode::InvalidRequest, e.to_string()),
        ),
    };
    // A Heartbeat or Hello answer is a few bytes: encoding cannot fail.
    let _ = encode_response(&frame, out);
}
