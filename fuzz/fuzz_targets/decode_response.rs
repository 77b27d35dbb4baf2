//! Any payload given to the response decoder (what a client library runs on a server's bytes)
//! either fails with a `DecodeError` or yields a frame that encodes back to the same bytes;
//! it never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use muster_protocol::{decode_response, encode_response_payload};

fuzz_target!(|payload: &[u8]| {
    let Ok(frame) = decode_response(payload) else {
        return;
    };
    let mut again = Vec::with_capacity(payload.len());
    encode_response_payload(&frame, &mut again).expect("a decoded response encodes");
    assert_eq!(
        again.as_slice(),
        payload,
        "decode then encode changed the bytes"
    );
    let _ = frame.response.error_code();
});
