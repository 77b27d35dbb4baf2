//! Frame splitting over an arbitrary byte stream cut into arbitrary reads: the frames it yields
//! are exactly the ones a byte-at-a-time reference splitter yields, no frame is ever longer than
//! the limit, an oversized or empty prefix is refused as soon as its 4 bytes are there, and
//! nothing panics.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use muster_protocol::{check_frame_length, split_frame, FrameError, LENGTH_PREFIX_BYTES};

#[derive(Debug, Arbitrary)]
struct Input {
    /// The receiver's limit; kept small so that whole frames actually occur.
    max_frame_bytes: u16,
    /// How the stream arrives: each entry is the size of one read (0 = a read of 1 byte).
    reads: Vec<u8>,
    stream: Vec<u8>,
}

/// The reference: walk the stream prefix by prefix.
fn reference(stream: &[u8], max: u32) -> (Vec<&[u8]>, Option<FrameError>) {
    let mut frames = Vec::new();
    let mut at = 0;
    while stream.len() - at >= LENGTH_PREFIX_BYTES {
        let mut prefix = [0u8; LENGTH_PREFIX_BYTES];
        prefix.copy_from_slice(&stream[at..at + LENGTH_PREFIX_BYTES]);
        let len = match check_frame_length(u32::from_be_bytes(prefix), max) {
            Ok(len) => len,
            Err(e) => return (frames, Some(e)),
        };
        let start = at + LENGTH_PREFIX_BYTES;
        if stream.len() - start < len {
            break;
        }
        frames.push(&stream[start..start + len]);
        at = start + len;
    }
    (frames, None)
}

fuzz_target!(|input: Input| {
    let max = u32::from(input.max_frame_bytes);
    let (expected, expected_error) = reference(&input.stream, max);

    // The receiver: a buffer filled read by read, drained by split_frame after every read.
    let mut buffer: Vec<u8> = Vec::new();
    let mut got: Vec<Vec<u8>> = Vec::new();
    let mut error = None;
    let mut fed = 0;
    let mut reads = input.reads.iter().copied().cycle();
    'outer: while fed < input.stream.len() {
        let n = usize::from(reads.next().unwrap_or(0)).max(1);
        let end = (fed + n).min(input.stream.len());
        buffer.extend_from_slice(&input.stream[fed..end]);
        fed = end;
        loop {
            match split_frame(&buffer, max) {
                Ok(Some((payload, consumed))) => {
                    assert!(payload.len() <= max as usize, "frame over the limit");
                    assert!(!payload.is_empty(), "empty frame accepted");
                    assert_eq!(consumed, payload.len() + LENGTH_PREFIX_BYTES);
                    got.push(payload.to_vec());
                    buffer.drain(..consumed);
                }
                Ok(None) => break,
                Err(e) => {
                    error = Some(e);
                    break 'outer;
                }
            }
        }
    }
    assert_eq!(got.len(), expected.len(), "frame count differs");
    for (a, b) in got.iter().zip(&expected) {
        assert_eq!(a.as_slice(), *b);
    }
    assert_eq!(error, expected_error);
});
