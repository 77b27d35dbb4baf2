//! Which shard a group belongs to: `fnv1a64(group id's UTF-8 bytes) % shards`.
//!
//! The hash is part of the cluster's stored layout (a group's keys carry its shard) and of
//! what every node computes to route a group, so it must never change between builds,
//! platforms or releases: FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3) is
//! fully specified, seedless and endian-free, unlike std's `RandomState`. The
//! `values_are_pinned` test holds it.

const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(OFFSET_BASIS, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
}

/// The shard of `group_id` among `shards` (0 shards is treated as 1: everything in shard 0).
pub fn shard_of(group_id: &str, shards: u32) -> u32 {
    let shards = u64::from(shards.max(1));
    // The remainder is below `shards`, itself a u32.
    u32::try_from(fnv1a64(group_id.as_bytes()) % shards).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::{fnv1a64, shard_of};

    #[test]
    fn values_are_pinned() {
        // Computed independently (Python) from the FNV-1a 64 definition.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"orders"), 0x0012_5d92_50be_8b4c);
        assert_eq!(fnv1a64("grüppe".as_bytes()), 0xba3c_b8ca_0a53_9dfa);
        assert_eq!(shard_of("", 64), 37);
        assert_eq!(shard_of("a", 64), 12);
        assert_eq!(shard_of("orders", 64), 12);
        assert_eq!(shard_of("payments-consumers", 64), 58);
        assert_eq!(shard_of("payments-consumers", 7), 4);
        assert_eq!(shard_of("grüppe", 7), 3);
    }

    #[test]
    fn every_shard_is_in_range_and_used() {
        let mut seen = [false; 64];
        for i in 0..10_000 {
            let shard = shard_of(&format!("group-{i}"), 64);
            seen[shard as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "10 000 groups reach all 64 shards");
        assert_eq!(shard_of("anything", 0), 0);
        assert_eq!(shard_of("anything", 1), 0);
    }
}
