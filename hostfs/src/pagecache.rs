//! The host page cache: dirty file blocks waiting for writeback.
//!
//! Writes land here and reach the device later, in an order the application does not choose
//! (LightFS §II-D): the kernel's flusher picks expired pages, `sync` pushes everything, and
//! within one pass the order is whatever the block layer makes of it. csdlab draws that order
//! from a seeded generator, so a run is repeatable and a test can search seeds for the
//! interleaving that tears a file.

use crate::namespace::Ino;
use csd_device::rng::SimRng;
use csd_device::VirtualTime;
use std::collections::BTreeMap;

/// When the kernel flusher writes dirty pages back (Linux's `dirty_expire_centisecs` and
/// `dirty_writeback_centisecs` defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct WritebackPolicy {
    /// A page dirty for longer than this is written back by the next flusher pass.
    pub expire_ns: u64,
    /// The flusher wakes up this often.
    pub interval_ns: u64,
}

impl Default for WritebackPolicy {
    fn default() -> Self {
        WritebackPolicy {
            expire_ns: 30_000_000_000,
            interval_ns: 5_000_000_000,
        }
    }
}

/// One dirty file block.
#[derive(Clone, Debug)]
pub struct DirtyPage {
    /// The block's new contents (`None` when the device keeps no payloads).
    pub data: Option<Vec<u8>>,
    /// When the page first became dirty.
    pub dirtied: VirtualTime,
}

/// Dirty blocks by (file, block index within the file).
#[derive(Debug)]
pub struct PageCache {
    dirty: BTreeMap<(Ino, u64), DirtyPage>,
    rng: SimRng,
}

impl PageCache {
    pub fn new(seed: u64) -> PageCache {
        PageCache {
            dirty: BTreeMap::new(),
            rng: SimRng::new(seed),
        }
    }

    /// Restarts the writeback order from `seed`.
    pub fn reseed(&mut self, seed: u64) {
        self.rng = SimRng::new(seed);
    }

    pub fn get(&self, ino: Ino, index: u64) -> Option<&DirtyPage> {
        self.dirty.get(&(ino, index))
    }

    /// Records new contents for a block; a page already dirty keeps its first-dirtied time.
    pub fn dirty(&mut self, ino: Ino, index: u64, data: Option<Vec<u8>>, at: VirtualTime) {
        self.dirty
            .entry((ino, index))
            .and_modify(|p| p.data = data.clone())
            .or_insert(DirtyPage { data, dirtied: at });
    }

    pub fn take(&mut self, ino: Ino, index: u64) -> Option<DirtyPage> {
        self.dirty.remove(&(ino, index))
    }

    /// Drops every dirty page of a file that no longer exists.
    pub fn forget(&mut self, ino: Ino) {
        self.forget_from(ino, 0);
    }

    /// Drops a file's dirty pages from block `first` on (a truncation).
    pub fn forget_from(&mut self, ino: Ino, first: u64) {
        let gone: Vec<(Ino, u64)> = self
            .dirty
            .range((ino, first)..=(ino, u64::MAX))
            .map(|(&k, _)| k)
            .collect();
        for k in gone {
            self.dirty.remove(&k);
        }
    }

    pub fn len(&self) -> usize {
        self.dirty.len()
    }

    /// Every dirty page as `(file, block index, page)`, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (Ino, u64, &DirtyPage)> + '_ {
        self.dirty.iter().map(|(&(ino, i), p)| (ino, i, p))
    }

    pub fn is_empty(&self) -> bool {
        self.dirty.is_empty()
    }

    /// Dirty block indexes of one file, ascending.
    pub fn dirty_blocks(&self, ino: Ino) -> Vec<u64> {
        self.dirty
            .range((ino, 0)..=(ino, u64::MAX))
            .map(|(&(_, i), _)| i)
            .collect()
    }

    /// The file's dirty pages with block indexes in `blocks`, ascending.
    pub fn dirty_in(&self, ino: Ino, blocks: std::ops::Range<u64>) -> Vec<(Ino, u64)> {
        if blocks.is_empty() {
            return Vec::new();
        }
        self.dirty
            .range((ino, blocks.start)..(ino, blocks.end))
            .map(|(&k, _)| k)
            .collect()
    }

    pub fn is_dirty(&self, ino: Ino) -> bool {
        self.dirty
            .range((ino, 0)..=(ino, u64::MAX))
            .next()
            .is_some()
    }

    /// Up to `n` dirty pages for which `eligible` holds, in a seeded random order: the order
    /// in which one writeback pass would reach the device.
    pub fn pick(
        &mut self,
        n: usize,
        eligible: impl Fn(Ino, &DirtyPage) -> bool,
    ) -> Vec<(Ino, u64)> {
        let mut keys: Vec<(Ino, u64)> = self
            .dirty
            .iter()
            .filter(|(k, p)| eligible(k.0, p))
            .map(|(&k, _)| k)
            .collect();
        shuffle(&mut keys, &mut self.rng);
        keys.truncate(n);
        keys
    }

    /// A file's dirty pages in a seeded random order (what `fsync` submits).
    pub fn pick_file(&mut self, ino: Ino) -> Vec<(Ino, u64)> {
        let mut keys: Vec<(Ino, u64)> = self
            .dirty_blocks(ino)
            .into_iter()
            .map(|i| (ino, i))
            .collect();
        shuffle(&mut keys, &mut self.rng);
        keys
    }
}

/// Fisher–Yates with the simulation's generator.
fn shuffle<T>(items: &mut [T], rng: &mut SimRng) {
    for i in (1..items.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        items.swap(i, j);
    }
}
