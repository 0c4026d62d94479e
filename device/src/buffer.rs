//! The Cosmos+ OpenSSD's DRAM data buffer, as its GreedyFTL firmware keeps it
//! (`lru_buffer.c`, v2.7 and later): host NVMe reads and writes go through it a logical page
//! (a "slice") at a time, and it decides which of them touch the flash.
//!
//! - The buffer is split by die, `lpn % dies`, each part an LRU list of
//!   `entries_per_die` pages (`BUF_ENTRY_NUM_PER_DIE`, 16).
//! - A page found there (a hit) is served from DRAM: a read is a DMA out of it; a write a DMA
//!   into it that marks it dirty. Nothing is read or programmed.
//! - A miss takes the least recently used entry of its part. A dirty one is programmed first
//!   (`PmWrite`), and the new request's transfer waits for that program: they share the
//!   entry. Then a read is read into the entry from the flash; a write of part of a page
//!   reads the rest first (`PrePmRead`).
//! - A write is acknowledged once its data is in the buffer. Dirty pages stay there until
//!   evicted: nothing writes them back on idle, and the firmware completes a flush at once.
//!
//! Only host commands use it. The firmware's own accesses (an in-storage task's reads, GC,
//! TxISC's deltas) go to the flash, and a page they write is dropped from the buffer so a
//! later host read does not find the older copy.
//!
//! The model keeps what the buffer holds, not its bytes: the FTL maps a written page at
//! once (reads return it, whatever the buffer's state), and what the buffer changes is when
//! the dies are busy.

use crate::addr::Lpn;
use serde::{Deserialize, Serialize};

/// A profile's `[data_buffer]` table: GreedyFTL's per-die LRU data buffer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataBuffer {
    /// Logical pages each die's part holds.
    pub entries_per_die: u32,
}

impl DataBuffer {
    /// The buffer's DRAM on a device of geometry `g`: every die's part, a page an entry.
    pub fn bytes(&self, g: &crate::geometry::Geometry) -> u64 {
        u64::from(self.entries_per_die) * u64::from(g.dies()) * u64::from(g.page_size_bytes)
    }
}

/// Most pages one die's part may hold: a buffer this large is no longer the firmware's.
pub const MAX_ENTRIES_PER_DIE: u32 = 4096;

#[derive(Clone, Copy, Debug)]
struct Entry {
    lpn: u64,
    dirty: bool,
}

/// What the buffer did for one page of a host command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Served from DRAM.
    Hit,
    /// Taken into an entry whose dirty page, if any, must be programmed first.
    Miss { evicted: Option<Lpn> },
}

/// The buffer's contents: per die part, most recently used first.
#[derive(Clone, Debug)]
pub(crate) struct BufferState {
    per_die: usize,
    parts: Vec<Vec<Entry>>,
}

impl BufferState {
    pub(crate) fn new(dies: u32, table: &DataBuffer) -> BufferState {
        BufferState {
            per_die: table.entries_per_die as usize,
            parts: vec![Vec::new(); dies.max(1) as usize],
        }
    }

    fn part(&mut self, lpn: Lpn) -> &mut Vec<Entry> {
        let n = self.parts.len() as u64;
        &mut self.parts[(lpn.0 % n) as usize]
    }

    /// A host command's access to `lpn` (`write`: it leaves the page dirty).
    pub(crate) fn access(&mut self, lpn: Lpn, write: bool) -> Lookup {
        let per_die = self.per_die;
        let part = self.part(lpn);
        if let Some(i) = part.iter().position(|e| e.lpn == lpn.0) {
            let mut e = part.remove(i);
            e.dirty |= write;
            part.insert(0, e);
            return Lookup::Hit;
        }
        let evicted = if part.len() >= per_die {
            part.pop().filter(|e| e.dirty).map(|e| Lpn(e.lpn))
        } else {
            None
        };
        part.insert(
            0,
            Entry {
                lpn: lpn.0,
                dirty: write,
            },
        );
        Lookup::Miss { evicted }
    }

    /// `lpn`'s buffered copy is stale (the firmware wrote the page, or it was trimmed).
    pub(crate) fn forget(&mut self, lpn: Lpn) {
        let part = self.part(lpn);
        if let Some(i) = part.iter().position(|e| e.lpn == lpn.0) {
            part.remove(i);
        }
    }

    /// Empties the buffer as a device idle long enough, then restarted, would have it: the
    /// dirty pages written back off the timeline.
    pub(crate) fn settle(&mut self) {
        self.parts.iter_mut().for_each(Vec::clear);
    }

    /// Dirty pages the buffer holds.
    pub(crate) fn dirty(&self) -> u64 {
        self.parts.iter().flatten().filter(|e| e.dirty).count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_evicts_its_least_recently_used_page_and_reports_it_only_when_dirty() {
        let mut b = BufferState::new(2, &DataBuffer { entries_per_die: 2 });
        // Die 0 holds even pages: 0 (written), 2 (read).
        assert_eq!(b.access(Lpn(0), true), Lookup::Miss { evicted: None });
        assert_eq!(b.access(Lpn(2), false), Lookup::Miss { evicted: None });
        // Die 1 is apart.
        assert_eq!(b.access(Lpn(1), true), Lookup::Miss { evicted: None });
        // 0 is used again, so 2 is the least recent: clean, nothing to program.
        assert_eq!(b.access(Lpn(0), false), Lookup::Hit);
        assert_eq!(b.access(Lpn(4), true), Lookup::Miss { evicted: None });
        // Now 0 is the least recent, and dirty.
        assert_eq!(
            b.access(Lpn(6), false),
            Lookup::Miss {
                evicted: Some(Lpn(0))
            }
        );
        assert_eq!(b.dirty(), 2, "4 and 1");
        b.forget(Lpn(4));
        assert_eq!(b.dirty(), 1);
        assert_eq!(b.access(Lpn(8), false), Lookup::Miss { evicted: None });
        b.settle();
        assert_eq!(b.dirty(), 0);
        assert_eq!(b.access(Lpn(1), false), Lookup::Miss { evicted: None });
    }
}
