//! The staging ring (SIFT §4.2.1): a persistent circular region of the device holding
//! foreground staging transactions.
//!
//! `head` is where the next allocation starts, `tail` the oldest block still needed. One
//! sentinel block always stays free, so `head == tail` only ever means *empty*. An allocation
//! is contiguous; when it does not fit before the end of the ring, the blocks up to the end
//! become a *gap* (remembered by a gap marker) and the allocation starts at block 0. An
//! allocation (plus any gap) must be strictly smaller than the free space including the
//! sentinel, i.e. it may use at most `free()` blocks. Reclamation releases the oldest blocks
//! first and is clamped: the tail never passes the head.

use serde::Serialize;

/// A contiguous run of ring blocks given to one staging transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RingExtent {
    pub start: u64,
    pub len: u64,
    /// Blocks skipped at the end of the ring before this extent (0 unless it wrapped).
    pub gap: u64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RingError {
    #[error("staging ring full: {need} blocks needed (with a {gap}-block wrap gap), {free} free")]
    Full { need: u64, gap: u64, free: u64 },
    #[error("a staging transaction needs at least one block")]
    Empty,
    #[error("a {len}-block staging transaction can never fit a {capacity}-block ring")]
    TooLarge { len: u64, capacity: u64 },
}

/// The ring's persistent state: capacity, head, tail and the gap marker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StagingRing {
    capacity: u64,
    head: u64,
    tail: u64,
    /// Where the newest wrap's gap begins (the old head), until the tail passes it.
    gap_at: Option<u64>,
}

impl StagingRing {
    /// A ring of `capacity` blocks (at least 2: one is the sentinel).
    pub fn new(capacity: u64) -> StagingRing {
        StagingRing {
            capacity: capacity.max(2),
            head: 0,
            tail: 0,
            gap_at: None,
        }
    }

    /// An empty ring whose head and tail sit at `pos` (after recovery, where the last scan
    /// ended).
    pub fn reset_at(&mut self, pos: u64) {
        self.head = pos % self.capacity;
        self.tail = self.head;
        self.gap_at = None;
        self.debug_check();
    }

    /// Head and tail lie in the ring; the sentinel block is never used; while a gap marker is
    /// set, the head has wrapped below the tail.
    pub fn check(&self) -> Result<(), String> {
        if self.capacity < 2 || self.head >= self.capacity || self.tail >= self.capacity {
            return Err(format!(
                "head {} / tail {} outside a {}-block ring",
                self.head, self.tail, self.capacity
            ));
        }
        if self.used() > self.capacity - 1 {
            return Err(format!(
                "{} blocks used: the sentinel is taken",
                self.used()
            ));
        }
        if let Some(g) = self.gap_at {
            // The head wrapped below the tail (the gap counts as used, so they never meet).
            if g >= self.capacity || self.head >= self.tail {
                return Err(format!(
                    "gap at {g} with tail {} and head {} in a {}-block ring",
                    self.tail, self.head, self.capacity
                ));
            }
        }
        Ok(())
    }

    /// [`StagingRing::check`] after every mutation, in debug builds.
    #[inline]
    fn debug_check(&self) {
        #[cfg(debug_assertions)]
        if let Err(e) = self.check() {
            panic!("staging ring invariant broken: {e}");
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn head(&self) -> u64 {
        self.head
    }

    pub fn tail(&self) -> u64 {
        self.tail
    }

    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    /// Blocks between tail and head (gap included).
    pub fn used(&self) -> u64 {
        (self.head + self.capacity - self.tail) % self.capacity
    }

    /// Blocks an allocation may take: everything but the used blocks and the sentinel.
    pub fn free(&self) -> u64 {
        self.capacity - 1 - self.used()
    }

    /// Allocates `len` contiguous blocks, wrapping (and leaving a gap) if needed.
    pub fn alloc(&mut self, len: u64) -> Result<RingExtent, RingError> {
        if len == 0 {
            return Err(RingError::Empty);
        }
        if len >= self.capacity {
            return Err(RingError::TooLarge {
                len,
                capacity: self.capacity,
            });
        }
        let to_end = self.capacity - self.head;
        let gap = if len <= to_end { 0 } else { to_end };
        let free = self.free();
        // A wrap is only possible while the tail is not at block 0 ahead of the gap: the
        // extent [0, len) must lie strictly below the tail.
        if gap + len > free || (gap > 0 && len >= self.tail) {
            return Err(RingError::Full {
                need: len,
                gap,
                free,
            });
        }
        let start = if gap > 0 {
            self.gap_at = Some(self.head);
            0
        } else {
            self.head
        };
        self.head = (start + len) % self.capacity;
        self.debug_check();
        Ok(RingExtent { start, len, gap })
    }

    /// Releases up to `blocks` of the oldest used blocks; a gap counts as used and is
    /// released with the blocks before it. Clamped: returns how many were released, never
    /// more than were used.
    pub fn reclaim(&mut self, blocks: u64) -> u64 {
        let mut left = blocks.min(self.used());
        let released = left;
        while left > 0 {
            if let Some(g) = self.gap_at {
                if self.tail <= g {
                    // Release up to the gap, then the gap itself in one step.
                    let upto_gap = g - self.tail;
                    if left < upto_gap {
                        self.tail += left;
                        self.debug_check();
                        return released;
                    }
                    left -= upto_gap;
                    let gap_len = self.capacity - g;
                    let step = left.min(gap_len);
                    left -= step;
                    if step == gap_len {
                        self.tail = 0;
                        self.gap_at = None;
                    } else {
                        self.tail = g + step;
                    }
                    continue;
                }
            }
            self.tail = (self.tail + left) % self.capacity;
            left = 0;
        }
        // A tail that wrapped to the head or below it has passed the gap (from inside it).
        if self.tail <= self.head {
            self.gap_at = None;
        }
        self.debug_check();
        released
    }

    /// Releases everything up to and including `extent` (which must be live): the checkpoint
    /// finished with the transaction it holds and all older ones. Returns blocks released.
    pub fn reclaim_through(&mut self, extent: &RingExtent) -> u64 {
        let end = (extent.start + extent.len) % self.capacity;
        let upto = (end + self.capacity - self.tail) % self.capacity;
        self.reclaim(if upto == 0 && !self.is_empty() {
            self.used()
        } else {
            upto
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// The reference: an occupancy map and the FIFO order in which blocks (gap blocks
    /// included) were taken. It decides placement by the same rule, but checks room block by
    /// block instead of with head/tail arithmetic.
    struct Reference {
        capacity: u64,
        head: u64,
        order: VecDeque<u64>,
        occupied: Vec<bool>,
    }

    impl Reference {
        fn alloc(&mut self, len: u64) -> Option<RingExtent> {
            if len == 0 || len >= self.capacity {
                return None;
            }
            let to_end = self.capacity - self.head;
            let (gap, start) = if len <= to_end {
                (0, self.head)
            } else {
                (to_end, 0)
            };
            let gap_blocks = self.head..self.head + gap;
            let blocks = start..start + len;
            let room = self.order.len() as u64 + gap + len < self.capacity;
            let free = gap_blocks
                .clone()
                .chain(blocks.clone())
                .all(|b| !self.occupied[b as usize]);
            if !room || !free {
                return None;
            }
            for b in gap_blocks.chain(blocks) {
                self.occupied[b as usize] = true;
                self.order.push_back(b);
            }
            self.head = (start + len) % self.capacity;
            Some(RingExtent { start, len, gap })
        }

        fn reclaim(&mut self, n: u64) -> u64 {
            let n = n.min(self.order.len() as u64);
            for _ in 0..n {
                let b = self.order.pop_front().expect("counted");
                self.occupied[b as usize] = false;
            }
            n
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Alloc(u64),
        Reclaim(u64),
        ReclaimOldest,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u64..14).prop_map(Op::Alloc),
            1 => (0u64..30).prop_map(Op::Reclaim),
            2 => Just(Op::ReclaimOldest),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        /// Random alloc / reclaim / wrap sequences against the reference: the same allocations
        /// succeed at the same places, reclaim is clamped, the sentinel is never used and
        /// empty means head == tail.
        #[test]
        fn the_ring_agrees_with_a_reference(capacity in 2u64..40, ops in prop::collection::vec(op(), 1..200)) {
            let mut ring = StagingRing::new(capacity);
            let mut reference = Reference {
                capacity,
                head: 0,
                order: VecDeque::new(),
                occupied: vec![false; capacity as usize],
            };
            let mut live: VecDeque<RingExtent> = VecDeque::new();
            for op in ops {
                match op {
                    Op::Alloc(len) => {
                        let before = ring.clone();
                        let got = ring.alloc(len).ok();
                        prop_assert_eq!(got, reference.alloc(len), "alloc {} from {:?}", len, before);
                        match got {
                            Some(e) => live.push_back(e),
                            None => prop_assert_eq!(&ring, &before, "a refused alloc changes nothing"),
                        }
                    }
                    Op::Reclaim(n) => {
                        prop_assert_eq!(ring.reclaim(n), reference.reclaim(n));
                    }
                    Op::ReclaimOldest => {
                        // Only extents the raw reclaims have not already released.
                        while let Some(e) = live.pop_front() {
                            if reference.occupied[(e.start + e.len - 1) as usize] {
                                let upto = reference.order.iter().position(|&b| b == e.start + e.len - 1).unwrap() as u64 + 1;
                                prop_assert_eq!(ring.reclaim_through(&e), upto);
                                reference.reclaim(upto);
                                break;
                            }
                        }
                    }
                }
                prop_assert_eq!(ring.used(), reference.order.len() as u64);
                prop_assert!(ring.used() < capacity, "the sentinel stays free");
                prop_assert_eq!(ring.is_empty(), reference.order.is_empty());
                prop_assert_eq!(ring.head(), reference.head);
                prop_assert_eq!(ring.check(), Ok(()));
            }
        }
    }

    #[test]
    fn full_is_never_confused_with_empty() {
        let mut r = StagingRing::new(8);
        assert!(r.is_empty());
        let a = r.alloc(7).unwrap(); // all but the sentinel
        assert_eq!(r.free(), 0);
        assert!(!r.is_empty(), "full is not empty");
        assert!(matches!(r.alloc(1), Err(RingError::Full { .. })));
        assert_eq!(r.reclaim_through(&a), 7);
        assert!(r.is_empty());
        // Wrap: head at 7, 1 block to the end; a 3-block alloc leaves a 1-block gap.
        let b = r.alloc(3).unwrap();
        assert_eq!((b.start, b.gap), (0, 1));
        assert_eq!(r.used(), 4);
        assert_eq!(r.reclaim(100), 4, "clamped to what is used");
        assert!(r.is_empty());
    }
}
