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
