//! The frame codec: the length prefix, payload encoding and decoding, and the checks a peer
//! makes before it trusts a length read from the wire.
//!
//! Everything here works on byte slices and `Vec<u8>`: reading from and writing to sockets is
//! the caller's job (e.g. a `tokio_util::codec::Decoder` that calls [`check_frame_length`] on the
//! prefix before it buffers the payload, then [`decode_request`] on the payload).
//!
//! Decoding is strict: the payload must hold exactly one message (trailing bytes are an error),
//! and a bad enum or `Option` tag, a bool byte other than 0/1, invalid UTF-8 or a truncated
//! payload are errors, never panics. A sequence length is checked against wincode's
//! preallocation limit (4 MiB of memory per sequence) before anything is allocated, so a hostile
//! `u64::MAX` length fails at once.

use thiserror::Error;
use wincode::error::ReadError;

use crate::types::{RequestFrame, ResponseFrame};

/// The protocol version this crate implements (sent in `Hello`).
pub const PROTOCOL_VERSION: u16 = 1;
/// The oldest protocol version this crate can speak.
pub const MIN_PROTOCOL_VERSION: u16 = 1;
/// The newest protocol version this crate can speak.
pub const MAX_PROTOCOL_VERSION: u16 = 1;
/// Default for the server's `max_frame_bytes` setting: the largest payload (length prefix not
/// counted) a peer accepts, 1 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: u32 = 1_048_576;
/// Size of the big-endian `u32` length prefix in front of every payload.
pub const LENGTH_PREFIX_BYTES: usize = 4;

/// A payload that is not exactly one well-formed message.
///
/// The server answers it with `Response::Error { INVALID_REQUEST }` (using
/// [`correlation_hint`] for the correlation id) and keeps the connection.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The payload ends in the middle of a message.
    #[error("payload is truncated: {0}")]
    Truncated(String),
    /// A whole message was decoded but bytes are left over.
    #[error("payload has trailing bytes after a complete message")]
    TrailingBytes,
    /// An enum variant index or `Option` tag that does not exist.
    #[error("invalid enum or option tag: {0}")]
    InvalidTag(String),
    /// A `bool` byte other than 0 or 1.
    #[error("invalid bool byte {0} (must be 0 or 1)")]
    InvalidBool(u8),
    /// A string whose bytes are not UTF-8.
    #[error("string is not valid UTF-8: {0}")]
    InvalidUtf8(String),
    /// A sequence length too large to be real (it would need more memory than the decoder
    /// preallocates for one sequence, or does not fit in `usize`).
    #[error("sequence length rejected: {0}")]
    LengthLimit(String),
    /// Any other malformation.
    #[error("malformed payload: {0}")]
    Malformed(String),
}

impl From<ReadError> for DecodeError {
    fn from(err: ReadError) -> Self {
        match err {
            ReadError::Io(e) => DecodeError::Truncated(e.to_string()),
            ReadError::TrailingBytes => DecodeError::TrailingBytes,
            ReadError::InvalidTagEncoding(_) => DecodeError::InvalidTag(err.to_string()),
            ReadError::InvalidBoolEncoding(byte) => DecodeError::InvalidBool(byte),
            ReadError::InvalidUtf8Encoding(_)
            | ReadError::InvalidUtf8Code(_)
            | ReadError::InvalidCharLead(_) => DecodeError::InvalidUtf8(err.to_string()),
            ReadError::PreallocationSizeLimit { .. }
            | ReadError::LengthEncodingOverflow(_)
            | ReadError::PointerSizedReadError => DecodeError::LengthLimit(err.to_string()),
            other => DecodeError::Malformed(other.to_string()),
        }
    }
}

/// A message that cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The payload would not fit the `u32` length prefix (or this platform's `usize`).
    #[error("payload of {size} bytes does not fit in a frame (at most {max} bytes)", max = u32::MAX)]
    TooLarge { size: u64 },
    /// The encoder refused the value (e.g. one sequence over wincode's 4 MiB limit).
    #[error("cannot encode message: {0}")]
    Encode(String),
    /// The encoder wrote a different number of bytes than it computed beforehand (a bug).
    #[error("encoder wrote {written} bytes but computed {computed}")]
    SizeMismatch { computed: usize, written: usize },
}

impl From<wincode::error::WriteError> for EncodeError {
    fn from(err: wincode::error::WriteError) -> Self {
        EncodeError::Encode(err.to_string())
    }
}

/// A declared frame length that the receiver refuses before reading the payload.
///
/// The server answers `Response::Error { MESSAGE_TOO_LARGE }` with correlation id 0 and closes
/// the connection (the stream can no longer be trusted to be in sync).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FrameError {
    /// A length prefix of 0: every payload holds at least a correlation id.
    #[error("frame length is 0")]
    Empty,
    /// A length prefix over the receiver's `max_frame_bytes`.
    #[error("frame length {declared} exceeds the limit of {max} bytes")]
    TooLarge { declared: u32, max: u32 },
    /// The length is acceptable but does not fit in this platform's `usize`.
    #[error("frame length {declared} does not fit in memory on this platform")]
    Unaddressable { declared: u32 },
}

/// Checks a declared payload length (the value of a frame's length prefix) against the
/// receiver's limit, before anything is allocated for it. Returns the length to read.
///
/// `1 <= declared <= max_frame_bytes` is accepted; 0 and anything over the limit are refused.
pub fn check_frame_length(declared: u32, max_frame_bytes: u32) -> Result<usize, FrameError> {
    if declared == 0 {
        return Err(FrameError::Empty);
    }
    if declared > max_frame_bytes {
        return Err(FrameError::TooLarge {
            declared,
            max: max_frame_bytes,
        });
    }
    usize::try_from(declared).map_err(|_| FrameError::Unaddressable { declared })
}

/// Splits the first whole frame off the front of `buf`.
///
/// Returns `Ok(None)` while `buf` holds less than a whole frame (read more), and
/// `Ok(Some((payload, consumed)))` once it does, where `consumed` is the prefix and payload
/// length together. The length is checked with [`check_frame_length`] as soon as the 4 prefix
/// bytes are present, so an oversized frame is refused before its payload arrives.
pub fn split_frame(buf: &[u8], max_frame_bytes: u32) -> Result<Option<(&[u8], usize)>, FrameError> {
    let Some((prefix, rest)) = buf.split_first_chunk::<LENGTH_PREFIX_BYTES>() else {
        return Ok(None);
    };
    let len = check_frame_length(u32::from_be_bytes(*prefix), max_frame_bytes)?;
    Ok(rest
        .get(..len)
        .map(|payload| (payload, LENGTH_PREFIX_BYTES + len)))
}

/// The correlation id to use when answering a payload that does not decode: its first 4 bytes
/// as a little-endian `u32` (where a well-formed payload keeps its correlation id), or 0 when
/// the payload is shorter than that.
pub fn correlation_hint(payload: &[u8]) -> u32 {
    payload
        .first_chunk::<4>()
        .map_or(0, |bytes| u32::from_le_bytes(*bytes))
}

/// Decodes one whole client → server payload (the bytes after the length prefix).
pub fn decode_request(payload: &[u8]) -> Result<RequestFrame, DecodeError> {
    Ok(wincode::deserialize_exact(payload)?)
}

/// Decodes one whole server → client payload (the bytes after the length prefix).
pub fn decode_response(payload: &[u8]) -> Result<ResponseFrame, DecodeError> {
    Ok(wincode::deserialize_exact(payload)?)
}

/// Appends a whole frame (length prefix and payload) for `frame` to `dst`.
///
/// On error `dst` is left as it was.
pub fn encode_request(frame: &RequestFrame, dst: &mut Vec<u8>) -> Result<(), EncodeError> {
    encode_frame(frame, dst)
}

/// Appends a whole frame (length prefix and payload) for `frame` to `dst`.
///
/// On error `dst` is left as it was.
pub fn encode_response(frame: &ResponseFrame, dst: &mut Vec<u8>) -> Result<(), EncodeError> {
    encode_frame(frame, dst)
}

/// Appends only the payload of `frame` (no length prefix) to `dst`.
///
/// On error `dst` is left as it was.
pub fn encode_request_payload(frame: &RequestFrame, dst: &mut Vec<u8>) -> Result<(), EncodeError> {
    encode_payload(frame, dst)
}

/// Appends only the payload of `frame` (no length prefix) to `dst`.
///
/// On error `dst` is left as it was.
pub fn encode_response_payload(
    frame: &ResponseFrame,
    dst: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    encode_payload(frame, dst)
}

/// The payload size of `frame`, checked to fit a `u32` length prefix.
fn payload_size<T>(frame: &T) -> Result<(u32, usize), EncodeError>
where
    T: wincode::SchemaWrite<wincode::config::DefaultConfig, Src = T>,
{
    let size = wincode::serialized_size(frame)?;
    let prefix = u32::try_from(size).map_err(|_| EncodeError::TooLarge { size })?;
    let len = usize::try_from(size).map_err(|_| EncodeError::TooLarge { size })?;
    Ok((prefix, len))
}

fn encode_frame<T>(frame: &T, dst: &mut Vec<u8>) -> Result<(), EncodeError>
where
    T: wincode::SchemaWrite<wincode::config::DefaultConfig, Src = T>,
{
    let (prefix, len) = payload_size(frame)?;
    let start = dst.len();
    dst.reserve(LENGTH_PREFIX_BYTES + len);
    dst.extend_from_slice(&prefix.to_be_bytes());
    write_exactly(frame, dst, start, len)
}

fn encode_payload<T>(frame: &T, dst: &mut Vec<u8>) -> Result<(), EncodeError>
where
    T: wincode::SchemaWrite<wincode::config::DefaultConfig, Src = T>,
{
    let (_, len) = payload_size(frame)?;
    let start = dst.len();
    dst.reserve(len);
    write_exactly(frame, dst, start, len)
}

/// Serializes `frame` onto the end of `dst` and checks it wrote `len` bytes; on any failure
/// truncates `dst` back to `start`.
fn write_exactly<T>(
    frame: &T,
    dst: &mut Vec<u8>,
    start: usize,
    len: usize,
) -> Result<(), EncodeError>
where
    T: wincode::SchemaWrite<wincode::config::DefaultConfig, Src = T>,
{
    let before = dst.len();
    let result = wincode::serialize_into(&mut *dst, frame)
        .map_err(EncodeError::from)
        .and_then(|()| {
            let written = dst.len().saturating_sub(before);
            if written == len {
                Ok(())
            } else {
                Err(EncodeError::SizeMismatch {
                    computed: len,
                    written,
                })
            }
        });
    if result.is_err() {
        dst.truncate(start);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{HeartbeatRequest, Request, Response};
    use crate::ErrorCode;

    fn heartbeat() -> RequestFrame {
        RequestFrame::new(
            9,
            HeartbeatRequest {
                group_id: "g".into(),
                generation_id: 3,
                member_id: "m".into(),
                group_instance_id: None,
            },
        )
    }

    #[test]
    fn frame_length_rules() {
        assert_eq!(check_frame_length(0, 100), Err(FrameError::Empty));
        assert_eq!(check_frame_length(1, 100), Ok(1));
        assert_eq!(check_frame_length(100, 100), Ok(100));
        assert_eq!(
            check_frame_length(101, 100),
            Err(FrameError::TooLarge {
                declared: 101,
                max: 100
            })
        );
        assert_eq!(
            check_frame_length(u32::MAX, DEFAULT_MAX_FRAME_BYTES),
            Err(FrameError::TooLarge {
                declared: u32::MAX,
                max: DEFAULT_MAX_FRAME_BYTES
            })
        );
        assert_eq!(check_frame_length(0, 0), Err(FrameError::Empty));
    }

    #[test]
    fn correlation_hint_reads_first_four_bytes_le() {
        assert_eq!(correlation_hint(&[]), 0);
        assert_eq!(correlation_hint(&[1, 2, 3]), 0);
        assert_eq!(correlation_hint(&[1, 0, 0, 0]), 1);
        assert_eq!(
            correlation_hint(&[0x78, 0x56, 0x34, 0x12, 0xff]),
            0x1234_5678
        );
        let mut payload = Vec::new();
        encode_request_payload(&heartbeat(), &mut payload).expect("encodes");
        assert_eq!(correlation_hint(&payload), 9);
    }

    #[test]
    fn encode_appends_prefix_and_payload() {
        let mut dst = vec![0xAA, 0xBB];
        encode_request(&heartbeat(), &mut dst).expect("encodes");
        let mut payload = Vec::new();
        encode_request_payload(&heartbeat(), &mut payload).expect("encodes");
        assert_eq!(&dst[..2], &[0xAA, 0xBB]);
        let len = u32::try_from(payload.len()).expect("small");
        assert_eq!(&dst[2..6], &len.to_be_bytes());
        assert_eq!(&dst[6..], &payload[..]);
        assert_eq!(decode_request(&payload), Ok(heartbeat()));
    }

    #[test]
    fn encode_reserves_once() {
        let frame = ResponseFrame::new(
            1,
            Response::error(ErrorCode::InvalidRequest, "x".repeat(300)),
        );
        let mut dst = Vec::new();
        encode_response(&frame, &mut dst).expect("encodes");
        assert_eq!(dst.capacity(), dst.len(), "one exact reservation");
    }

    #[test]
    fn split_frame_waits_for_whole_frame() {
        let mut buf = Vec::new();
        encode_request(&heartbeat(), &mut buf).expect("encodes");
        encode_request(&heartbeat(), &mut buf).expect("encodes");
        let one = buf.len() / 2;
        for cut in 0..one {
            assert_eq!(
                split_frame(&buf[..cut], DEFAULT_MAX_FRAME_BYTES),
                Ok(None),
                "{cut}"
            );
        }
        let (payload, consumed) = split_frame(&buf, DEFAULT_MAX_FRAME_BYTES)
            .expect("valid")
            .expect("whole");
        assert_eq!(consumed, one);
        assert_eq!(decode_request(payload), Ok(heartbeat()));
        assert_eq!(
            split_frame(&[0, 0, 0, 0], DEFAULT_MAX_FRAME_BYTES),
            Err(FrameError::Empty)
        );
        assert_eq!(
            split_frame(&[0, 0x10, 0, 1], DEFAULT_MAX_FRAME_BYTES),
            Err(FrameError::TooLarge {
                declared: 0x0010_0001,
                max: DEFAULT_MAX_FRAME_BYTES
            })
        );
    }

    #[test]
    fn names_and_tags() {
        assert_eq!(heartbeat().request.name(), "Heartbeat");
        assert_eq!(heartbeat().request.tag(), 3);
        let err = Response::error(ErrorCode::MessageTooLarge, "too big");
        assert_eq!(err.name(), "Error");
        assert_eq!(err.tag(), 12);
        assert!(matches!(&err, Response::Error(e) if e.error_code == 10 && e.message == "too big"));
        assert_eq!(
            Request::from(HeartbeatRequest::default()).name(),
            "Heartbeat"
        );
    }

    #[test]
    fn decode_errors_are_classified() {
        assert!(matches!(
            decode_request(&[]),
            Err(DecodeError::Truncated(_))
        ));
        let mut payload = Vec::new();
        encode_request_payload(&heartbeat(), &mut payload).expect("encodes");
        payload.push(0);
        assert_eq!(decode_request(&payload), Err(DecodeError::TrailingBytes));
    }
}
