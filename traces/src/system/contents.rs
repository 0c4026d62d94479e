//! What a replayed write writes, for systems that keep file contents (StorageFS).
//!
//! A trace records lengths, not bytes, so the replay makes the bytes up, deterministically:
//! the `k`-th write to a path writes a pattern drawn from `(seed, path, k)`. A write of
//! exactly the range its pid read just before is a *modification* of what it read: it writes
//! the bytes read XOR the pattern. Fused and unfused replays follow the same rule (the fused
//! one runs the XOR as a device stage), so the two must leave every file the same; the
//! property tests check that they do.

use std::collections::HashMap;

/// The most bytes of one read a replay keeps to modify (one CISC slot).
pub const MAX_KEPT_READ: usize = csd_sdk::cisc::MAX_SLOT_BYTES;

/// FNV-1a, 64 bits: a path's stable hash (std's hasher may change between releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// SplitMix64's output function.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `len` bytes of the pattern keyed by `key`.
pub fn pattern(key: u64, len: usize) -> Vec<u8> {
    pattern_at(key, 0, len)
}

/// `len` bytes of the pattern keyed by `key`, from byte `start` of it: each 8-byte word
/// is drawn from its own index, so any range is made without the bytes before it.
pub fn pattern_at(key: u64, start: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut i = start / 8;
    let mut skip = (start % 8) as usize;
    while out.len() < len {
        let word = mix(key.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        let take = (len - out.len()).min(8 - skip);
        out.extend_from_slice(&word.to_le_bytes()[skip..skip + take]);
        skip = 0;
        i += 1;
    }
    out
}

/// The patterns writes draw, per path.
#[derive(Debug, Default)]
pub struct Contents {
    seed: u64,
    writes: HashMap<String, u64>,
}

impl Contents {
    pub fn new(seed: u64) -> Contents {
        Contents {
            seed,
            writes: HashMap::new(),
        }
    }

    /// Bytes `start..start + len` of what a file the trace did not create holds when it
    /// starts.
    pub fn initial(&self, path: &str, start: u64, len: usize) -> Vec<u8> {
        pattern_at(mix(self.seed ^ fnv1a(path.as_bytes())), start, len)
    }

    /// The pattern of the next write to `path` (`len` bytes): the write's own counter moves on.
    pub fn next_write(&mut self, path: &str, len: usize) -> Vec<u8> {
        let k = self.writes.entry(path.to_string()).or_default();
        *k += 1;
        let key = mix(self.seed ^ fnv1a(path.as_bytes()) ^ mix(*k));
        pattern(key, len)
    }
}

/// The last read of a pid, kept so that a write of the same range modifies it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptRead {
    pub path: String,
    pub offset: u64,
    /// The length the trace read (the data may be shorter, at the file's end).
    pub len: u64,
    pub data: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_keyed_by_seed_path_and_write() {
        let mut a = Contents::new(1);
        let mut b = Contents::new(1);
        let first = a.next_write("/f", 100);
        assert_eq!(first, b.next_write("/f", 100));
        assert_ne!(first, a.next_write("/f", 100), "the second write differs");
        assert_ne!(first, b.next_write("/g", 100), "another path differs");
        assert_ne!(
            first,
            Contents::new(2).next_write("/f", 100),
            "another seed differs"
        );
        assert_eq!(pattern(7, 13), pattern(7, 20)[..13]);
        for (start, len) in [(0, 20), (3, 9), (8, 8), (13, 40)] {
            assert_eq!(
                pattern_at(7, start, len),
                pattern(7, 60)[start as usize..][..len]
            );
        }
    }
}
