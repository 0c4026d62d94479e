//! [`BlockMap`]: the blocks of a [`super::MemBlocks`] image by number.
//!
//! The persistence path writes its rings sequentially and replays into clustered file blocks,
//! so neighbouring block numbers are touched together. A map keyed by block scatters them:
//! a B-tree's lookups cost a sixth of `csd repro sift`, and a hash map's a quarter, in cache
//! misses. Here consecutive blocks share a chunk of slots, allocated when one of them is
//! first written (an image of a few scattered blocks stays small), found through a small
//! directory that stays in cache.

use std::collections::HashMap;
use std::sync::Arc;

/// Block slots per chunk: 4 KiB of slots, so a ring's run of writes fills whole chunks.
const CHUNK: usize = 256;

type Chunk = [Option<Arc<[u8]>>; CHUNK];

/// Stored blocks by number (see the module doc). Two maps are equal when the same writes
/// made them: a chunk is never dropped once allocated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockMap {
    // Only looked up, never walked: a fixed hasher keeps nothing dependent on a seed.
    chunks: HashMap<u64, Box<Chunk>, foldhash::fast::FixedState>,
}

impl BlockMap {
    fn split(block: u64) -> (u64, usize) {
        (block / CHUNK as u64, (block % CHUNK as u64) as usize)
    }

    /// The bytes stored at `block`, if it was written.
    pub fn get(&self, block: &u64) -> Option<&Arc<[u8]>> {
        let (chunk, slot) = Self::split(*block);
        self.chunks.get(&chunk)?[slot].as_ref()
    }

    /// Stores `data` at `block`; returns what was there.
    pub fn insert(&mut self, block: u64, data: Arc<[u8]>) -> Option<Arc<[u8]>> {
        let (chunk, slot) = Self::split(block);
        self.chunks
            .entry(chunk)
            .or_insert_with(|| Box::new(std::array::from_fn(|_| None)))[slot]
            .replace(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_read_back_what_was_last_written_across_chunks() {
        let mut m = BlockMap::default();
        let bytes = |b: u8| -> Arc<[u8]> { Arc::from(&[b][..]) };
        let blocks = [0, 1, 255, 256, 257, 1 << 40, u64::MAX];
        for (i, &b) in blocks.iter().enumerate() {
            assert_eq!(m.insert(b, bytes(i as u8)), None);
        }
        assert_eq!(
            m.insert(256, bytes(99)),
            Some(bytes(3)),
            "the old bytes come back"
        );
        for (i, &b) in blocks.iter().enumerate() {
            let want = if b == 256 { 99 } else { i as u8 };
            assert_eq!(m.get(&b), Some(&bytes(want)), "block {b}");
        }
        assert_eq!(m.get(&2), None);
        assert_eq!(m.get(&(u64::MAX - 1)), None);
    }
}
