//! A scripted peer: a `TcpListener` that speaks the protocol through `muster-protocol`, so a
//! test decides every answer the client gets.
#![allow(dead_code, clippy::unwrap_used)]

use std::net::SocketAddr;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use muster_protocol::*;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

pub type Peer = Framed<TcpStream, LengthDelimitedCodec>;

pub async fn accept(listener: &TcpListener) -> Peer {
    let (stream, _) = listener.accept().await.unwrap();
    LengthDelimitedCodec::builder()
        .length_field_type::<u32>()
        .new_framed(stream)
}

pub async fn read(peer: &mut Peer) -> RequestFrame {
    let payload = peer.next().await.unwrap().unwrap();
    decode_request(&payload).unwrap()
}

pub async fn write(peer: &mut Peer, correlation_id: u32, response: impl Into<Response>) {
    let mut payload = Vec::new();
    encode_response_payload(&ResponseFrame::new(correlation_id, response), &mut payload).unwrap();
    peer.send(Bytes::from(payload)).await.unwrap();
}

/// Reads the Hello and answers it (with `code`).
pub async fn hello(peer: &mut Peer, code: ErrorCode) -> HelloRequest {
    let frame = read(peer).await;
    let Request::Hello(h) = frame.request else {
        panic!("expected Hello, got {frame:?}")
    };
    write(
        peer,
        frame.correlation_id,
        HelloResponse {
            error_code: code.code(),
            min_version: 1,
            max_version: 1,
            server_id: "scripted".into(),
        },
    )
    .await;
    h
}

/// Answers FindCoordinator (`correlation_id`) naming `node_id` at `addr`.
pub async fn coordinator(peer: &mut Peer, correlation_id: u32, node_id: &str, addr: SocketAddr) {
    write(
        peer,
        correlation_id,
        FindCoordinatorResponse {
            error_code: 0,
            node_id: node_id.into(),
            host: addr.ip().to_string(),
            port: addr.port(),
        },
    )
    .await;
}

/// The next request that is not a FindCoordinator; a FindCoordinator is answered with this
/// peer itself (a single server names itself, at the address the client reached it on).
pub async fn read_routed(peer: &mut Peer) -> RequestFrame {
    loop {
        let frame = read(peer).await;
        if let Request::FindCoordinator(_) = frame.request {
            let me = peer.get_ref().local_addr().unwrap();
            coordinator(peer, frame.correlation_id, "scripted", me).await;
            continue;
        }
        return frame;
    }
}
