//! The crate's codec tests: per message type (round trip, whole buffer consumed, every strict
//! prefix refused, byte-for-byte equality with bincode 1.3), invalid inputs, and property tests.
//!
//! They live inside the crate because the serde derives used for the bincode comparison exist
//! only under `cfg(test)`. `group_id` covers [`Request::group_id`], one test per request kind;
//! `offsets` what is particular to the offset-protection messages.

mod bincode_compat;
mod group_id;
mod invalid;
mod messages;
mod offsets;
mod props;
mod samples;
mod strategies;

use crate::*;

/// A request or response frame, so one test body can serve both directions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    Req(RequestFrame),
    Resp(ResponseFrame),
}

impl Msg {
    pub fn payload(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Msg::Req(f) => encode_request_payload(f, &mut out),
            Msg::Resp(f) => encode_response_payload(f, &mut out),
        }
        .expect("test values encode");
        out
    }

    pub fn frame(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Msg::Req(f) => encode_request(f, &mut out),
            Msg::Resp(f) => encode_response(f, &mut out),
        }
        .expect("test values encode");
        out
    }

    /// Decodes `payload` as the same direction as `self`.
    pub fn decode_like(&self, payload: &[u8]) -> Result<Msg, DecodeError> {
        match self {
            Msg::Req(_) => decode_request(payload).map(Msg::Req),
            Msg::Resp(_) => decode_response(payload).map(Msg::Resp),
        }
    }

    pub fn bincode(&self) -> Vec<u8> {
        match self {
            Msg::Req(f) => bincode::serialize(f),
            Msg::Resp(f) => bincode::serialize(f),
        }
        .expect("bincode serializes test values")
    }

    pub fn bincode_decode_like(&self, payload: &[u8]) -> Msg {
        match self {
            Msg::Req(_) => Msg::Req(bincode::deserialize(payload).expect("bincode decodes")),
            Msg::Resp(_) => Msg::Resp(bincode::deserialize(payload).expect("bincode decodes")),
        }
    }
}
