//! The value of a *run* of one partition's offset history (`HistoryRunV1`, store format 6):
//! the entries of that partition one write carried, in sequence order, each writer's ids
//! stored once. The key holds the group, the topic, the partition and the run's first
//! sequence number.
//!
//! ```text
//! HistoryRunV1  last_seq u64 (first, at a fixed place: a trim reads it without decoding the
//!               rest), writers Vec<WriterV1>, entries Vec<RunEntryV1> (at least one, by
//!               rising seq, the last one `last_seq`)
//! WriterV1      member_id String, client_id String, client_host String
//! RunEntryV1    seq u64, kind u8 (as HistoryV1), offset i64, metadata Option<String>,
//!               at_ms u64, writer u32 (an index into writers), generation i32
//! ```
//!
//! Why runs: format 5 kept one row per entry, so a write of a busy partition's newest 100
//! entries inserted 100 rows and trimmed 100 more, rewriting B-tree leaves the commits beside
//! it share; the history's writes then stalled the commits queued behind them
//! (docs/benchmarks.md). A run is one row per partition per write.

use std::sync::Arc;

use wincode::{SchemaRead, SchemaWrite};

use super::{CodecError, FORMAT};
use crate::storage::{HistoryEntry, HistoryKind};

#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct HistoryRunV1 {
    last_seq: u64,
    writers: Vec<WriterV1>,
    entries: Vec<RunEntryV1>,
}

#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct WriterV1 {
    member_id: String,
    client_id: String,
    client_host: String,
}

#[derive(Debug, PartialEq, Eq, SchemaWrite, SchemaRead)]
struct RunEntryV1 {
    seq: u64,
    kind: u8,
    offset: i64,
    metadata: Option<String>,
    at_ms: u64,
    writer: u32,
    generation: i32,
}

/// The value of a run holding `entries` (one partition's, by strictly rising `seq`), and
/// its first sequence number (the key's).
pub fn encode_history_run(entries: &[HistoryEntry]) -> Result<(u64, Vec<u8>), CodecError> {
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
        return Err(CodecError("an offset history run holds no entry".into()));
    };
    if entries.windows(2).any(|w| w[0].seq >= w[1].seq) {
        return Err(CodecError(
            "an offset history run's entries are not in rising sequence order".into(),
        ));
    }
    let mut writers: Vec<WriterV1> = Vec::new();
    let mut stored = Vec::with_capacity(entries.len());
    for e in entries {
        let same = |w: &WriterV1| {
            *w.member_id == *e.member_id
                && *w.client_id == *e.client_id
                && *w.client_host == *e.client_host
        };
        // One commit's entries share a writer, and a partition is mostly committed by one
        // member: the last writer is checked first, the others only when it differs.
        let writer = match writers.last().filter(|w| same(w)) {
            Some(_) => writers.len() - 1,
            None => match writers.iter().position(same) {
                Some(at) => at,
                None => {
                    writers.push(WriterV1 {
                        member_id: e.member_id.to_string(),
                        client_id: e.client_id.to_string(),
                        client_host: e.client_host.to_string(),
                    });
                    writers.len() - 1
                }
            },
        };
        stored.push(RunEntryV1 {
            seq: e.seq,
            kind: e.kind.number(),
            offset: e.offset,
            metadata: e.metadata.clone(),
            at_ms: e.at_ms,
            writer: u32::try_from(writer)
                .map_err(|_| CodecError("an offset history run has too many writers".into()))?,
            generation: e.generation,
        });
    }
    let run = HistoryRunV1 {
        last_seq: last.seq,
        writers,
        entries: stored,
    };
    let bytes = wincode::config::serialize(&run, FORMAT)
        .map_err(|e| CodecError(format!("cannot encode an offset history run: {e}")))?;
    Ok((first.seq, bytes))
}

/// The sequence number of a run's last entry, read from its first 8 bytes without decoding
/// the rest; `None` if the value is shorter (damaged).
pub fn history_run_last_seq(bytes: &[u8]) -> Option<u64> {
    let prefix: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(prefix))
}

/// A run's entries, checked: at least one, by strictly rising sequence number, the first one
/// `first_seq` (the key's) and the last one the value's `last_seq`, every writer index and
/// kind number known. Entries of one writer share its ids.
pub fn decode_history_run(first_seq: u64, bytes: &[u8]) -> Result<Vec<HistoryEntry>, CodecError> {
    let damaged = |why: String| CodecError(format!("offset history run from {first_seq}: {why}"));
    let run: HistoryRunV1 =
        wincode::config::deserialize_exact(bytes, FORMAT).map_err(|e| damaged(e.to_string()))?;
    let (Some(first), Some(last)) = (run.entries.first(), run.entries.last()) else {
        return Err(damaged("no entry".into()));
    };
    if first.seq != first_seq || last.seq != run.last_seq {
        return Err(damaged(format!(
            "its entries run from {} to {}, its key and value say {first_seq} to {}",
            first.seq, last.seq, run.last_seq
        )));
    }
    if run.entries.windows(2).any(|w| w[0].seq >= w[1].seq) {
        return Err(damaged("entries out of sequence order".into()));
    }
    let writers: Vec<[Arc<str>; 3]> = run
        .writers
        .into_iter()
        .map(|w| {
            [
                Arc::from(w.member_id),
                Arc::from(w.client_id),
                Arc::from(w.client_host),
            ]
        })
        .collect();
    run.entries
        .into_iter()
        .map(|e| {
            let [member_id, client_id, client_host] = writers
                .get(e.writer as usize)
                .ok_or_else(|| damaged(format!("entry {}: unknown writer {}", e.seq, e.writer)))?
                .clone();
            let kind = HistoryKind::from_number(e.kind).ok_or_else(|| {
                damaged(format!("entry {}: unknown kind number {}", e.seq, e.kind))
            })?;
            Ok(HistoryEntry {
                seq: e.seq,
                kind,
                offset: e.offset,
                metadata: e.metadata,
                at_ms: e.at_ms,
                member_id,
                client_id,
                client_host,
                generation: e.generation,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: u64, member: &str) -> HistoryEntry {
        HistoryEntry {
            seq,
            kind: HistoryKind::Commit,
            offset: 40 + seq as i64,
            metadata: (seq == 12).then(|| "m".into()),
            at_ms: 7,
            member_id: member.into(),
            client_id: "c".into(),
            client_host: "h".into(),
            generation: -1,
        }
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Entries 12 (by "a", metadata "m") and 13 (by "a"): one writer, two entries.
    const HISTORY_RUN_V1_HEX: &str = concat!(
        "0d00000000000000",     // last_seq 13
        "0100000000000000",     // one writer
        "010000000000000061",   // member_id "a"
        "010000000000000063",   // client_id "c"
        "010000000000000068",   // client_host "h"
        "0200000000000000",     // two entries
        "0c00000000000000",     // seq 12
        "00",                   // kind: commit
        "3400000000000000",     // offset 52
        "0101000000000000006d", // metadata Some("m")
        "0700000000000000",     // at_ms 7
        "00000000",             // writer 0
        "ffffffff",             // generation -1
        "0d00000000000000",     // seq 13
        "00",                   // kind: commit
        "3500000000000000",     // offset 53
        "00",                   // metadata None
        "0700000000000000",     // at_ms 7
        "00000000",             // writer 0
        "ffffffff",             // generation -1
    );

    /// Store format 6's history value, byte for byte (as `format_is_pinned`).
    #[test]
    fn the_run_format_is_pinned() {
        let entries = vec![entry(12, "a"), entry(13, "a")];
        let (first, bytes) = encode_history_run(&entries).expect("encodes");
        assert_eq!(first, 12);
        assert_eq!(hex(&bytes), HISTORY_RUN_V1_HEX);
        assert_eq!(history_run_last_seq(&bytes), Some(13));
        assert_eq!(decode_history_run(12, &bytes).expect("decodes"), entries);
    }

    /// Writers are stored once each, whichever order they come in, and come back shared.
    #[test]
    fn writers_are_stored_once_and_shared_on_decoding() {
        let entries = vec![
            entry(1, "a"),
            entry(2, "b"),
            entry(3, "a"),
            entry(4, "b"),
            entry(5, "b"),
        ];
        let (_, bytes) = encode_history_run(&entries).expect("encodes");
        let (_, one) = encode_history_run(&entries[..1]).expect("encodes");
        let (_, two) = encode_history_run(&entries[..2]).expect("encodes");
        let per_entry = two.len() - one.len() - (3 * 9);
        assert_eq!(
            bytes.len(),
            two.len() + 3 * per_entry,
            "no writer stored twice"
        );
        let decoded = decode_history_run(1, &bytes).expect("decodes");
        assert_eq!(decoded, entries);
        assert!(Arc::ptr_eq(&decoded[0].member_id, &decoded[2].member_id));
        assert!(Arc::ptr_eq(&decoded[1].client_id, &decoded[4].client_id));
    }

    #[test]
    fn an_empty_or_unordered_run_is_not_encoded() {
        assert!(encode_history_run(&[]).is_err());
        assert!(encode_history_run(&[entry(2, "a"), entry(2, "a")]).is_err());
        assert!(encode_history_run(&[entry(3, "a"), entry(2, "a")]).is_err());
    }

    /// A key that disagrees with the value, and values whose sequence numbers, writer index or
    /// kind are not what a run can hold, are refused.
    #[test]
    fn inconsistent_runs_are_refused() {
        let (_, bytes) = encode_history_run(&[entry(12, "a"), entry(13, "a")]).expect("encodes");
        assert!(
            decode_history_run(11, &bytes).is_err(),
            "the key's first seq"
        );
        let mut last = bytes.clone();
        last[0] = 14;
        assert!(decode_history_run(12, &last).is_err(), "last_seq");
        let writer_at = HISTORY_RUN_V1_HEX.find("00000000ffffffff").expect("writer") / 2;
        let mut writer = bytes.clone();
        writer[writer_at] = 1;
        assert!(decode_history_run(12, &writer).is_err(), "writer index");
        let kind_at = 8 + 8 + 3 * 9 + 8 + 8;
        let mut kind = bytes.clone();
        kind[kind_at] = 3;
        assert!(decode_history_run(12, &kind).is_err(), "kind");
        let mut order = bytes;
        let second_seq_at = HISTORY_RUN_V1_HEX
            .rfind("0d00000000000000")
            .expect("seq 13")
            / 2;
        order[second_seq_at] = 12;
        assert!(decode_history_run(12, &order).is_err(), "rising seq");
    }

    /// Every byte changed to each of a few values: entries or an error, never a panic; a length
    /// made huge is an error, not an allocation.
    #[test]
    fn damaged_runs_never_panic() {
        let (_, run) = encode_history_run(&[entry(12, "a"), entry(13, "b")]).expect("encodes");
        for at in 0..run.len() {
            for value in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                let mut damaged = run.clone();
                damaged[at] = value;
                let _ = decode_history_run(12, &damaged);
                let _ = history_run_last_seq(&damaged);
            }
        }
        for len in 0..run.len() {
            assert!(decode_history_run(12, &run[..len]).is_err(), "{len}");
        }
        assert_eq!(history_run_last_seq(&run[..7]), None);
        let mut huge = run;
        // The writers' count, after last_seq.
        huge[8..16].copy_from_slice(&(1u64 << 62).to_le_bytes());
        assert!(decode_history_run(12, &huge).is_err());
    }
}
