//! Memory layout: what one group and one member cost.

use super::*;

/// A group keeps one `Member` per consumer, idle or not: keep the box in jemalloc's 192-byte
/// size class, whatever the reply token.
#[test]
fn member_record_stays_small() {
    assert!(std::mem::size_of::<Member<u32>>() <= 192);
    assert!(std::mem::size_of::<Member<[u8; 64]>>() <= 192);
    assert_eq!(std::mem::size_of::<ProcessKeys>(), 0);
}

/// Every group with members keeps an `Insight` (its rebalance journal) for as long as it
/// lives: what only a rebalance in progress needs is boxed, the entries are kept encoded
/// (`journal_entries.rs`).
#[test]
fn a_groups_journal_state_stays_small() {
    // 208 bytes on x86_64 (jemalloc's 224-byte class); 480 before the boxing.
    let size = std::mem::size_of::<super::super::journal::Insight>();
    assert!(size <= 224, "{size}");
}
