//! Per-block bookkeeping: state, valid-page counts, pins (the GC-forbid set), wear, and the
//! per-die structures GC needs — free lists and greedy victim buckets.
//!
//! Greedy GC wants "the closed block with the fewest valid pages" thousands of times per
//! second. Closed, unpinned blocks therefore live in intrusive doubly linked lists bucketed by
//! valid-page count, one set of buckets per die: invalidating a page moves its block one
//! bucket down in O(1), and picking a victim scans at most `pages_per_block + 1` bucket heads.

use super::zeroed::{TooLarge, Zeroable, Zeroed};
use std::collections::VecDeque;
use std::ops::Range;

pub(crate) const NIL: u32 = u32::MAX;

/// Zero is `Free`: a fresh table is all zeros (see [`BlockMeta`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum BlockState {
    /// Erased, on its die's free list.
    Free = 0,
    /// Being filled by the die's write pointer.
    Open,
    /// Fully programmed.
    Closed,
}

/// One block's entry. All zeros is an erased block that was never used, so the table is a
/// [`Zeroed`] one: a terabyte device's quarter million entries cost memory, and a new device
/// time, only for the blocks it writes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockMeta {
    pub state: BlockState,
    /// Pages programmed so far (the write pointer inside the block).
    pub written: u32,
    pub valid: u32,
    /// Holders of a GC-forbid pin; the block is never erased while this is non-zero.
    pub pins: u32,
    pub erases: u32,
    /// Bucket neighbours, bit-inverted so that zero is [`NIL`].
    prev_inv: u32,
    next_inv: u32,
    in_bucket: bool,
    /// The die holding the block, set when it is opened, so finding it is not a division on
    /// every bucket move (blocks per die is rarely a power of two). Only blocks opened since
    /// the table was made are ever filed, erased or asked for it.
    die: u32,
}

// SAFETY: all zeros is a valid entry: `Free` (`repr(u8)`, discriminant 0), nothing written,
// no pins, no neighbours (`!0 == NIL`), not filed (`false`).
unsafe impl Zeroable for BlockMeta {}

impl BlockMeta {
    #[inline]
    fn prev(&self) -> u32 {
        !self.prev_inv
    }

    #[inline]
    fn next(&self) -> u32 {
        !self.next_inv
    }

    #[inline]
    fn set_prev(&mut self, b: u32) {
        self.prev_inv = !b;
    }

    #[inline]
    fn set_next(&mut self, b: u32) {
        self.next_inv = !b;
    }
}

#[derive(Clone, Debug)]
pub(crate) struct DieBlocks {
    /// Blocks never used yet, handed out in order before any erased one: a range rather than
    /// a list of a quarter million numbers on a terabyte device.
    fresh: Range<u32>,
    /// Erased blocks, oldest erase first (FIFO allocation rotates wear across blocks).
    free: VecDeque<u32>,
    /// The block the die's write pointer is filling, if any.
    pub open: Option<u32>,
    /// `heads[v]`: first closed, unpinned block with `v` valid pages.
    heads: Vec<u32>,
}

impl DieBlocks {
    /// Free blocks: never used, or erased.
    #[inline]
    pub fn free_len(&self) -> usize {
        self.fresh.len() + self.free.len()
    }

    /// The next free block: the fresh ones in order, then the erased ones in erase order.
    #[inline]
    pub fn take_free(&mut self) -> Option<u32> {
        self.fresh.next().or_else(|| self.free.pop_front())
    }

    /// No free block until [`DieBlocks::push_free`] adds one (a restore rebuilding the lists).
    pub fn clear_free(&mut self) {
        self.fresh = 0..0;
        self.free.clear();
    }

    pub fn push_free(&mut self, block: u32) {
        self.free.push_back(block);
    }
}

#[derive(Clone, Debug)]
pub(crate) struct BlockTable {
    pub blocks: Zeroed<BlockMeta>,
    pub dies: Vec<DieBlocks>,
}

impl BlockTable {
    pub fn new(dies: u32, blocks_per_die: u32, pages_per_block: u32) -> Result<Self, TooLarge> {
        Ok(BlockTable {
            blocks: Zeroed::try_new(dies as usize * blocks_per_die as usize)?,
            dies: (0..dies)
                .map(|d| DieBlocks {
                    fresh: d * blocks_per_die..(d + 1) * blocks_per_die,
                    free: VecDeque::new(),
                    open: None,
                    heads: vec![NIL; pages_per_block as usize + 1],
                })
                .collect(),
        })
    }

    /// Makes `block`, just taken from `die`'s free blocks, that die's open block.
    pub fn open(&mut self, die: usize, block: u32) {
        let b = &mut self.blocks[block as usize];
        b.state = BlockState::Open;
        b.die = die as u32;
        self.dies[die].open = Some(block);
    }

    /// Files `block` of `die`, already written full, as closed (a restore rebuilding the
    /// table).
    pub fn restore_closed(&mut self, die: usize, block: u32) {
        self.blocks[block as usize].die = die as u32;
        self.close(block);
    }

    #[inline]
    pub fn die_of(&self, block: u32) -> usize {
        self.blocks[block as usize].die as usize
    }

    /// A block belongs in a bucket iff it is closed and not pinned.
    #[inline]
    fn eligible(&self, block: u32) -> bool {
        let b = &self.blocks[block as usize];
        b.state == BlockState::Closed && b.pins == 0
    }

    fn link(&mut self, block: u32) {
        debug_assert!(!self.blocks[block as usize].in_bucket);
        let die = self.die_of(block);
        let v = self.blocks[block as usize].valid as usize;
        let head = self.dies[die].heads[v];
        {
            let b = &mut self.blocks[block as usize];
            b.set_prev(NIL);
            b.set_next(head);
            b.in_bucket = true;
        }
        if head != NIL {
            self.blocks[head as usize].set_prev(block);
        }
        self.dies[die].heads[v] = block;
    }

    fn unlink(&mut self, block: u32) {
        debug_assert!(self.blocks[block as usize].in_bucket);
        let die = self.die_of(block);
        let (prev, next, v) = {
            let b = &self.blocks[block as usize];
            (b.prev(), b.next(), b.valid as usize)
        };
        if prev != NIL {
            self.blocks[prev as usize].set_next(next);
        } else {
            self.dies[die].heads[v] = next;
        }
        if next != NIL {
            self.blocks[next as usize].set_prev(prev);
        }
        let b = &mut self.blocks[block as usize];
        b.set_prev(NIL);
        b.set_next(NIL);
        b.in_bucket = false;
    }

    /// Re-files `block` after a state, pin or valid-count change.
    fn refile(&mut self, block: u32, change: impl FnOnce(&mut BlockMeta)) {
        if self.blocks[block as usize].in_bucket {
            self.unlink(block);
        }
        change(&mut self.blocks[block as usize]);
        if self.eligible(block) {
            self.link(block);
        }
    }

    /// Fetches `block`'s entry into the cache ahead of an update ([`super::Ftl::prefetch_mapping`]).
    #[inline]
    pub fn prefetch(&self, block: u32) {
        if let Some(b) = self.blocks.get(block as usize) {
            super::prefetch_read(b as *const _);
        }
    }

    pub fn page_invalidated(&mut self, block: u32) {
        self.refile(block, |b| {
            debug_assert!(b.valid > 0);
            b.valid -= 1;
        });
    }

    pub fn close(&mut self, block: u32) {
        self.refile(block, |b| b.state = BlockState::Closed);
    }

    pub fn pin(&mut self, block: u32) {
        self.refile(block, |b| b.pins += 1);
    }

    pub fn unpin(&mut self, block: u32) {
        self.refile(block, |b| b.pins -= 1);
    }

    /// Greedy victim: the eligible block of `die` with the fewest valid pages, if any has at
    /// least one invalid page (migrating a fully valid block reclaims nothing).
    pub fn pick_victim(&self, die: usize, pages_per_block: u32) -> Option<u32> {
        let heads = &self.dies[die].heads;
        heads[..pages_per_block as usize]
            .iter()
            .copied()
            .find(|&h| h != NIL)
    }

    /// Takes `victim` out of the buckets before GC migrates it.
    pub fn start_reclaim(&mut self, victim: u32) {
        self.unlink(victim);
    }

    /// Marks an erased block free; it goes to the back of its die's free list (FIFO
    /// allocation rotates wear across blocks).
    pub fn erased(&mut self, block: u32) {
        let die = self.die_of(block);
        let b = &mut self.blocks[block as usize];
        debug_assert_eq!(b.valid, 0);
        debug_assert_eq!(b.pins, 0);
        b.state = BlockState::Free;
        b.written = 0;
        b.erases += 1;
        self.dies[die].push_free(block);
    }

    /// Checks the bucket lists against the block states; used by `Ftl::check_invariants`.
    pub fn check(&self) -> Result<(), String> {
        for (die, d) in self.dies.iter().enumerate() {
            for (v, &head) in d.heads.iter().enumerate() {
                let mut prev = NIL;
                let mut cur = head;
                while cur != NIL {
                    let b = &self.blocks[cur as usize];
                    if self.die_of(cur) != die || b.valid as usize != v || !self.eligible(cur) {
                        return Err(format!("block {cur} misfiled in die {die} bucket {v}"));
                    }
                    if b.prev() != prev {
                        return Err(format!("block {cur}: broken back link"));
                    }
                    prev = cur;
                    cur = b.next();
                }
            }
        }
        for (i, b) in self.blocks.iter().enumerate() {
            if b.in_bucket != self.eligible(i as u32) {
                return Err(format!(
                    "block {i}: bucket membership {} wrong",
                    b.in_bucket
                ));
            }
        }
        Ok(())
    }
}
