//! The Muster wire protocol, version 1: every message type (protocol §3), the error codes (§4)
//! and the frame codec (§1, §2). The description written for client authors in other languages
//! is `docs/protocol.md`; this crate is its Rust implementation, and the worked hex examples in
//! that document are checked against it by `tests/golden.rs`.
//!
//! # Frame layout
//!
//! A TCP connection carries a sequence of frames in each direction. Each frame is a big-endian
//! length followed by that many bytes of payload:
//!
//! ```text
//!  0        1        2        3        4                                 4 + length
//! +--------+--------+--------+--------+-------------------- ... -------+
//! |     length: u32, big-endian       |  payload: `length` bytes        |
//! +--------+--------+--------+--------+-------------------- ... -------+
//!
//!   1 <= length <= max_frame_bytes        (default 1 MiB = 1_048_576; the 4 prefix bytes
//!                                          are not counted)
//!
//! payload, client -> server:  RequestFrame  { correlation_id: u32, request:  Request  }
//! payload, server -> client:  ResponseFrame { correlation_id: u32, response: Response }
//!                              in bincode's legacy format: integers fixed-width little-endian,
//!                              enums a u32 LE variant index, lengths u64 LE, Option a 0/1 byte
//! ```
//!
//! The length prefix is checked with [`check_frame_length`] *before* anything is allocated for
//! the payload; a length of 0 or over the limit is answered `MESSAGE_TOO_LARGE` (correlation
//! id 0) and the connection is closed. A payload that arrives whole but does not decode is
//! answered `INVALID_REQUEST` with the id from [`correlation_hint`], and the connection stays.
//!
//! # What this crate owns
//!
//! It is a pure codec: types, error codes, and functions from bytes to values and back. No
//! sockets, no async runtime, no timers, no group logic: the server and any Rust client both
//! depend on it, and convert to their own domain types at the edge. Its API:
//!
//! - [`decode_request`] / [`decode_response`]: exactly one message from one payload (trailing
//!   bytes, truncation, bad tags, bad bools and invalid UTF-8 are all [`DecodeError`]s; no input
//!   makes them panic);
//! - [`encode_request`] / [`encode_response`]: append a whole frame, length prefix included, to
//!   a `Vec<u8>` with one reservation and no intermediate buffer (and the `_payload` variants
//!   for the payload alone);
//! - [`check_frame_length`], [`split_frame`], [`correlation_hint`]: the framing rules;
//! - [`ErrorCode`]: the wire error codes, with names and descriptions, from one table;
//! - [`Request::group_id`]: the group a group-scoped request is addressed to, and
//!   [`validate_group_id`]: whether a group id is valid (protocol §6.2);
//! - [`error_answers`]: a refusal in each request's own answer shape ([`error_answers::error_for`]
//!   and the like), for whoever refuses a request before or after it reaches its group;
//! - with the `serde` feature, `view`: the JSON shape of a described member that the CLI and
//!   the dashboard share (presentation of a decoded answer, not part of the codec).
//!
//! # Why wincode
//!
//! The wire format is bincode 1.x's (bincode 2's `config::legacy()`), chosen so that a client
//! in any language can implement it from a one-page table. The encoder is
//! [wincode](https://docs.rs/wincode), not the `bincode` crate:
//!
//! - its bytes are identical to bincode 1.3's `serialize` for every type here (a test in this
//!   crate compares them on arbitrary values, in both directions);
//! - the `bincode` crate is unmaintained (RUSTSEC-2025-0141) and its 3.0 release is a
//!   `compile_error!`, while wincode is maintained, and was the fastest candidate in the
//!   project's comparison;
//! - wincode refuses to preallocate more than 4 MiB for one sequence, so a hostile length such
//!   as `u64::MAX` fails at once instead of attempting a huge allocation.
//!
//! # Example
//!
//! ```
//! use muster_protocol::*;
//!
//! let frame = RequestFrame::new(
//!     7,
//!     HeartbeatRequest {
//!         group_id: "orders".into(),
//!         generation_id: 3,
//!         member_id: "consumer-1".into(),
//!         group_instance_id: None,
//!     },
//! );
//! let mut wire = Vec::new();
//! encode_request(&frame, &mut wire)?;
//!
//! // The receiving side: check the prefix, then decode the payload.
//! let (payload, consumed) = split_frame(&wire, DEFAULT_MAX_FRAME_BYTES)?.expect("whole frame");
//! assert_eq!(consumed, wire.len());
//! assert_eq!(decode_request(payload)?, frame);
//!
//! // An undecodable payload is answered with INVALID_REQUEST, echoing what we can.
//! let garbage = [7, 0, 0, 0, 99, 0, 0, 0];
//! assert!(decode_request(&garbage).is_err());
//! let answer = ResponseFrame::new(
//!     correlation_hint(&garbage),
//!     Response::error(ErrorCode::InvalidRequest, "unknown request tag"),
//! );
//! assert_eq!(answer.correlation_id, 7);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod codec;
mod consumer;
mod error;
pub mod error_answers;
mod group_id;
mod insight;
mod offsets;
mod shared;
mod state;
mod types;
#[cfg(feature = "serde")]
pub mod view;

#[cfg(test)]
mod tests;

pub use codec::{
    check_frame_length, correlation_hint, decode_request, decode_response, encode_request,
    encode_request_payload, encode_response, encode_response_payload, split_frame, DecodeError,
    EncodeError, FrameError, DEFAULT_MAX_FRAME_BYTES, LENGTH_PREFIX_BYTES, MAX_PROTOCOL_VERSION,
    MIN_PROTOCOL_VERSION, PROTOCOL_VERSION,
};
pub use consumer::*;
pub use error::ErrorCode;
pub use group_id::{validate_group_id, MAX_GROUP_ID_BYTES};
pub use insight::*;
pub use offsets::*;
pub use shared::*;
pub use state::{GroupState, UnknownGroupState};
pub use types::*;
