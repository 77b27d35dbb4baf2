//! Any payload given to the request decoder either fails with a `DecodeError` or yields a frame
//! that encodes back to exactly the same bytes (the format has one encoding per value, so a
//! decoder that accepted two spellings of one request would be a bug), and never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use muster_protocol::{decode_request, encode_request_payload};

fuzz_target!(|payload: &[u8]| {
    let Ok(frame) = decode_request(payload) else {
        return;
    };
    let mut again = Vec::with_capacity(payload.len());
    encode_request_payload(&frame, &mut again).expect("a decoded request encodes");
    assert_eq!(
        again.as_slice(),
        payload,
        "decode then encode changed the bytes"
    );
    // The group id the server routes by is a pure function of the decoded request.
    let _ = (frame.request.tag(), frame.request.group_id());
});
