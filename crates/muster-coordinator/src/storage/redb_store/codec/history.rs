//! The values of a partition's offset history (`HistoryV1`) and of its expiry quarantine
//! (`QuarantineV1`), store format 5 (protocol §6.24). Their keys hold the group, the topic, the
//! partition and, for history, the entry's sequence number: none of these is in the value.
//!
//! ```text
//! HistoryV1     kind u8 (0 commit, 1 reset, 2 restore; never renumbered), offset i64
//!               (-1: removed), metadata Option<String>, at_ms u64, member_id String,
//!               client_id String, client_host String, generation i32
//! QuarantineV1  offset OffsetV1 (the committed offset's value, as in the offsets table),
//!               quarantined_at u64
//! ```
//!
//! A kind number other than 0, 1 or 2 is refused when decoding (damaged bytes); the engine's
//! `HistoryKind` cannot hold any other, so encoding never meets one.

use std::sync::Arc;

use wincode::{SchemaRead, SchemaWrite};

use super::{CodecError, OffsetV1, FORMAT};
use crate::storage::{CommittedOffset, HistoryEntry, HistoryKind};

/// One offset history entry, field for field as `HistoryEntry` less its `seq` (the key's).
#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct HistoryV1 {
    kind: u8,
    offset: i64,
    metadata: Option<String>,
    at_ms: u64,
    member_id: String,
    client_id: String,
    client_host: String,
    generation: i32,
}

/// An offset in the expiry quarantine: its committed value and when it went there.
#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct QuarantineV1 {
    offset: OffsetV1,
    quarantined_at: u64,
}

/// A history entry's value (its key holds the group, the partition and `entry.seq`).
pub fn encode_history(entry: HistoryEntry) -> Result<Vec<u8>, CodecError> {
    let stored = HistoryV1 {
        kind: entry.kind.number(),
        offset: entry.offset,
        metadata: entry.metadata,
        at_ms: entry.at_ms,
        member_id: entry.member_id.to_string(),
        client_id: entry.client_id.to_string(),
        client_host: entry.client_host.to_string(),
        generation: entry.generation,
    };
    wincode::config::serialize(&stored, FORMAT)
        .map_err(|e| CodecError(format!("cannot encode an offset history entry: {e}")))
}

/// The history entry numbered `seq` (from its key) from its value.
pub fn decode_history(seq: u64, bytes: &[u8]) -> Result<HistoryEntry, CodecError> {
    let stored: HistoryV1 = wincode::config::deserialize_exact(bytes, FORMAT)
        .map_err(|e| CodecError(format!("offset history entry {seq}: {e}")))?;
    let kind = HistoryKind::from_number(stored.kind).ok_or_else(|| {
        CodecError(format!(
            "offset history entry {seq}: unknown kind number {}",
            stored.kind
        ))
    })?;
    Ok(HistoryEntry {
        seq,
        kind,
        offset: stored.offset,
        metadata: stored.metadata,
        at_ms: stored.at_ms,
        member_id: Arc::from(stored.member_id),
        client_id: Arc::from(stored.client_id),
        client_host: Arc::from(stored.client_host),
        generation: stored.generation,
    })
}

/// A quarantined offset's value (its key holds the group and the partition).
pub fn encode_quarantine(
    committed: CommittedOffset,
    quarantined_at: u64,
) -> Result<Vec<u8>, CodecError> {
    let stored = QuarantineV1 {
        offset: committed.into(),
        quarantined_at,
    };
    wincode::config::serialize(&stored, FORMAT)
        .map_err(|e| CodecError(format!("cannot encode a quarantined offset: {e}")))
}

/// A quarantined offset and when it was quarantined.
pub fn decode_quarantine(bytes: &[u8]) -> Result<(CommittedOffset, u64), CodecError> {
    let stored: QuarantineV1 = wincode::config::deserialize_exact(bytes, FORMAT)
        .map_err(|e| CodecError(format!("quarantined offset value: {e}")))?;
    Ok((stored.offset.into(), stored.quarantined_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_entry() -> HistoryEntry {
        HistoryEntry {
            seq: 12,
            kind: HistoryKind::Reset,
            offset: 42,
            metadata: Some("m".into()),
            at_ms: 7,
            member_id: "a".into(),
            client_id: "c".into(),
            client_host: "h".into(),
            generation: -1,
        }
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// `sample_entry`'s value, field by field.
    const HISTORY_V1_HEX: &str = concat!(
        "01",                   // kind: reset
        "2a00000000000000",     // offset 42
        "0101000000000000006d", // metadata Some("m")
        "0700000000000000",     // at_ms 7
        "010000000000000061",   // member_id "a"
        "010000000000000063",   // client_id "c"
        "010000000000000068",   // client_host "h"
        "ffffffff",             // generation -1
    );

    /// OffsetV1 (42, committed at 7, metadata "m"), then quarantined_at 9.
    const QUARANTINE_V1_HEX: &str = concat!(
        "2a00000000000000",     // offset 42
        "0700000000000000",     // committed at 7
        "0101000000000000006d", // metadata Some("m")
        "0900000000000000",     // quarantined_at 9
    );

    fn quarantined() -> (CommittedOffset, u64) {
        (
            CommittedOffset {
                offset: 42,
                metadata: Some("m".into()),
                commit_timestamp_ms: 7,
            },
            9,
        )
    }

    /// Store format 5's history and quarantine values, byte for byte (as `format_is_pinned`).
    #[test]
    fn history_and_quarantine_formats_are_pinned() {
        let bytes = encode_history(sample_entry()).expect("encodes");
        assert_eq!(hex(&bytes), HISTORY_V1_HEX);
        assert_eq!(decode_history(12, &bytes).expect("decodes"), sample_entry());
        let (committed, at) = quarantined();
        let bytes = encode_quarantine(committed, at).expect("encodes");
        assert_eq!(hex(&bytes), QUARANTINE_V1_HEX);
        assert_eq!(decode_quarantine(&bytes).expect("decodes"), quarantined());
    }

    /// Every kind keeps its number; any other number is damaged bytes.
    #[test]
    fn kinds_round_trip_and_unknown_ones_are_refused() {
        for (kind, number) in [
            (HistoryKind::Commit, 0u8),
            (HistoryKind::Reset, 1),
            (HistoryKind::Restore, 2),
        ] {
            let entry = HistoryEntry {
                kind,
                metadata: None,
                member_id: "".into(),
                ..sample_entry()
            };
            let bytes = encode_history(entry.clone()).expect("encodes");
            assert_eq!(bytes[0], number);
            assert_eq!(decode_history(12, &bytes).expect("decodes"), entry);
        }
        let mut bytes = encode_history(sample_entry()).expect("encodes");
        for number in [3, 0x7f, 0xff] {
            bytes[0] = number;
            let error = decode_history(12, &bytes).expect_err("an unknown kind");
            assert!(
                error
                    .to_string()
                    .contains(&format!("unknown kind number {number}")),
                "{error}"
            );
        }
    }

    #[test]
    fn truncated_and_trailing_bytes_are_refused() {
        let history = encode_history(sample_entry()).expect("encodes");
        let (committed, at) = quarantined();
        let quarantine = encode_quarantine(committed, at).expect("encodes");
        for len in 0..history.len() {
            assert!(decode_history(1, &history[..len]).is_err(), "{len}");
        }
        for len in 0..quarantine.len() {
            assert!(decode_quarantine(&quarantine[..len]).is_err(), "{len}");
        }
        let mut longer = history.clone();
        longer.push(0);
        assert!(decode_history(1, &longer).is_err());
        let mut longer = quarantine.clone();
        longer.push(0);
        assert!(decode_quarantine(&longer).is_err());
    }

    /// Every byte changed to each of a few values: an entry or an error, never a panic; a
    /// string length made huge is an error, not an allocation.
    #[test]
    fn damaged_values_never_panic() {
        let history = encode_history(sample_entry()).expect("encodes");
        for at in 0..history.len() {
            for value in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                let mut damaged = history.clone();
                damaged[at] = value;
                let _ = decode_history(1, &damaged);
                let _ = decode_quarantine(&damaged);
            }
        }
        let mut huge = history;
        // The member id's length, after kind, offset, metadata and at_ms.
        let at = 1 + 8 + (1 + 8 + 1) + 8;
        assert_eq!(huge[at..at + 8], 1u64.to_le_bytes());
        huge[at..at + 8].copy_from_slice(&(1u64 << 62).to_le_bytes());
        assert!(decode_history(1, &huge).is_err());
    }
}
