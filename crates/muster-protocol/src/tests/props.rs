//! Property tests: arbitrary frames round-trip through the whole-frame encoding, and no byte
//! string (random, or a valid payload with some bytes changed) makes a decoder panic.

use proptest::collection::vec;
use proptest::prelude::*;

use super::strategies::{request_frame, response_frame};
use crate::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A payload that starts like a real one (correlation id, then a tag near the valid range) so
/// that random bytes reach past the first check.
fn plausible_payload() -> impl Strategy<Value = Vec<u8>> {
    (any::<u32>(), 0u32..25, vec(any::<u8>(), 0..96)).prop_map(|(id, tag, rest)| {
        let mut p = Vec::with_capacity(8 + rest.len());
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(&tag.to_le_bytes());
        p.extend_from_slice(&rest);
        p
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn request_frames_round_trip(frame in request_frame(), cut in any::<prop::sample::Index>()) {
        let mut wire = vec![0xEE];
        encode_request(&frame, &mut wire).expect("encodes");
        let (payload, consumed) = split_frame(&wire[1..], u32::MAX).expect("valid").expect("whole");
        prop_assert_eq!(consumed, wire.len() - 1);
        prop_assert_eq!(correlation_hint(payload), frame.correlation_id);
        prop_assert_eq!(decode_request(payload), Ok(frame.clone()));
        let cut = cut.index(payload.len());
        prop_assert!(decode_request(&payload[..cut]).is_err());
    }

    #[test]
    fn response_frames_round_trip(frame in response_frame(), cut in any::<prop::sample::Index>()) {
        let mut wire = Vec::new();
        encode_response(&frame, &mut wire).expect("encodes");
        let (payload, consumed) = split_frame(&wire, u32::MAX).expect("valid").expect("whole");
        prop_assert_eq!(consumed, wire.len());
        prop_assert_eq!(correlation_hint(payload), frame.correlation_id);
        prop_assert_eq!(decode_response(payload), Ok(frame.clone()));
        let cut = cut.index(payload.len());
        prop_assert!(decode_response(&payload[..cut]).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..256)) {
        let _ = decode_request(&bytes);
        let _ = decode_response(&bytes);
        let _ = correlation_hint(&bytes);
        let _ = split_frame(&bytes, DEFAULT_MAX_FRAME_BYTES);
    }

    #[test]
    fn plausible_bytes_never_panic(bytes in plausible_payload()) {
        let _ = decode_request(&bytes);
        let _ = decode_response(&bytes);
    }

    #[test]
    fn mutated_requests_never_panic(
        frame in request_frame(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut payload = Vec::new();
        encode_request_payload(&frame, &mut payload).expect("encodes");
        for (at, byte) in edits {
            let i = at.index(payload.len());
            payload[i] = byte;
        }
        if let Ok(decoded) = decode_request(&payload) {
            // Whatever decodes must re-encode to the same bytes (the format has one encoding
            // per value).
            let mut again = Vec::new();
            encode_request_payload(&decoded, &mut again).expect("encodes");
            prop_assert_eq!(again, payload);
        }
    }

    #[test]
    fn mutated_responses_never_panic(
        frame in response_frame(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut payload = Vec::new();
        encode_response_payload(&frame, &mut payload).expect("encodes");
        for (at, byte) in edits {
            let i = at.index(payload.len());
            payload[i] = byte;
        }
        if let Ok(decoded) = decode_response(&payload) {
            let mut again = Vec::new();
            encode_response_payload(&decoded, &mut again).expect("encodes");
            prop_assert_eq!(again, payload);
        }
    }

    #[test]
    fn frame_length_check_agrees_with_rules(declared in any::<u32>(), max in any::<u32>()) {
        let ok = check_frame_length(declared, max).is_ok();
        prop_assert_eq!(ok, declared >= 1 && declared <= max);
    }
}
