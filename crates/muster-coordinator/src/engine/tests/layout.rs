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

/// What a member's quota unit costs it (report it with `--nocapture`).
#[test]
fn member_sizes() {
    println!(
        "Member<u32> = {} bytes, Member<[u8; 64]> = {} bytes, Option<QuotaSlot> = {} bytes",
        std::mem::size_of::<Member<u32>>(),
        std::mem::size_of::<Member<[u8; 64]>>(),
        std::mem::size_of::<Option<crate::quota::QuotaSlot>>(),
    );
}
