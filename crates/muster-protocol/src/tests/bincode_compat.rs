//! Equivalence with bincode 1.3's default (legacy) format, the format protocol §2 names:
//! arbitrary frames have identical bytes under both encoders, each decodes the other's bytes,
//! and on arbitrary input the two strict decoders accept and refuse exactly the same payloads.

use bincode::Options;
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

/// bincode 1.3's legacy options (what `bincode::serialize` uses) but refusing trailing bytes,
/// as our decoder does.
fn strict_bincode() -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .reject_trailing_bytes()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn request_bytes_identical(frame in request_frame()) {
        let mut ours = Vec::new();
        encode_request_payload(&frame, &mut ours).expect("encodes");
        let theirs = bincode::serialize(&frame).expect("bincode serializes");
        prop_assert_eq!(&ours, &theirs);
        prop_assert_eq!(bincode::deserialize::<RequestFrame>(&ours).expect("bincode decodes"), frame.clone());
        prop_assert_eq!(decode_request(&theirs), Ok(frame));
    }

    #[test]
    fn response_bytes_identical(frame in response_frame()) {
        let mut ours = Vec::new();
        encode_response_payload(&frame, &mut ours).expect("encodes");
        let theirs = bincode::serialize(&frame).expect("bincode serializes");
        prop_assert_eq!(&ours, &theirs);
        prop_assert_eq!(bincode::deserialize::<ResponseFrame>(&ours).expect("bincode decodes"), frame.clone());
        prop_assert_eq!(decode_response(&theirs), Ok(frame));
    }

    #[test]
    fn decoders_agree_on_arbitrary_input(
        id in any::<u32>(),
        tag in 0u32..25,
        rest in vec(any::<u8>(), 0..64),
    ) {
        let mut payload = id.to_le_bytes().to_vec();
        payload.extend_from_slice(&tag.to_le_bytes());
        payload.extend_from_slice(&rest);
        let ours = decode_request(&payload).ok();
        let theirs = strict_bincode().deserialize::<RequestFrame>(&payload).ok();
        prop_assert_eq!(ours, theirs);
        let ours = decode_response(&payload).ok();
        let theirs = strict_bincode().deserialize::<ResponseFrame>(&payload).ok();
        prop_assert_eq!(ours, theirs);
    }
}

/// `bincode::serialize` is the legacy format: its options are the ones spelled out above.
#[test]
fn bincode_serialize_is_the_legacy_format() {
    let frame = super::samples::join_group_response();
    let legacy = bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .allow_trailing_bytes()
        .serialize(&frame)
        .expect("serializes");
    assert_eq!(bincode::serialize(&frame).expect("serializes"), legacy);
}
