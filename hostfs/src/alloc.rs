//! An ext4-like extent allocator over a range of file-system blocks.
//!
//! Free space is a map of free runs (start → length), coalesced on every free, so a fresh or
//! tidy volume hands out one contiguous run per file. Allocation tries, in order: the run that
//! starts exactly at the caller's goal (so an appended file grows in place, like ext4's goal
//! block), the first run at or after the goal that fits whole, the first run anywhere that fits
//! whole, and only then splits the request over the largest runs (fragmentation, which is what
//! makes `filefrag` return many extents on an aged file system).

/// A run of consecutive blocks: a file system block is one device page, so a block run is
/// the device's [`Extent`].
pub use csd_device::Extent;
use std::collections::BTreeMap;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AllocError {
    #[error("no space: {wanted} blocks wanted, {free} free")]
    NoSpace { wanted: u64, free: u64 },
    #[error("freeing blocks {}..{} that are not allocated (double free or out of range)", run.first.0, run.end())]
    NotAllocated { run: Extent },
}

#[derive(Clone, Debug)]
pub struct ExtentAllocator {
    /// Free runs, keyed by first block; never adjacent (they are merged) and never overlapping.
    free: BTreeMap<u64, u64>,
    range: Extent,
    free_blocks: u64,
}

impl ExtentAllocator {
    /// Manages blocks `first .. first + blocks`, all free.
    pub fn new(first: u64, blocks: u64) -> Self {
        let mut free = BTreeMap::new();
        if blocks > 0 {
            free.insert(first, blocks);
        }
        ExtentAllocator {
            free,
            range: Extent::new(first, blocks),
            free_blocks: blocks,
        }
    }

    pub fn free_blocks(&self) -> u64 {
        self.free_blocks
    }

    /// Free runs in block order.
    pub fn free_runs(&self) -> impl Iterator<Item = Extent> + '_ {
        self.free
            .iter()
            .map(|(&first, &blocks)| Extent::new(first, blocks))
    }

    /// Allocates `blocks` blocks, as few runs as possible, near `goal` if given.
    pub fn allocate(&mut self, blocks: u64, goal: Option<u64>) -> Result<Vec<Extent>, AllocError> {
        if blocks > self.free_blocks {
            return Err(AllocError::NoSpace {
                wanted: blocks,
                free: self.free_blocks,
            });
        }
        if blocks == 0 {
            return Ok(Vec::new());
        }
        let whole = goal
            .and_then(|g| self.free.get(&g).filter(|&&len| len >= blocks).map(|_| g))
            .or_else(|| {
                let g = goal.unwrap_or(self.range.first.0);
                self.free
                    .range(g..)
                    .find(|(_, &len)| len >= blocks)
                    .map(|(&s, _)| s)
            })
            .or_else(|| {
                self.free
                    .iter()
                    .find(|(_, &len)| len >= blocks)
                    .map(|(&s, _)| s)
            });
        if let Some(start) = whole {
            return Ok(vec![self.take(start, blocks)]);
        }
        // Fragmented: the largest runs first (ties: lower block first), so the file gets as
        // few extents as this free space allows; returned in block order.
        let mut runs: Vec<(u64, u64)> = self.free.iter().map(|(&s, &l)| (s, l)).collect();
        runs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut out = Vec::new();
        let mut left = blocks;
        for (start, len) in runs {
            let n = len.min(left);
            out.push(self.take(start, n));
            left -= n;
            if left == 0 {
                break;
            }
        }
        out.sort();
        Ok(out)
    }

    /// Takes `n` blocks from the front of the free run starting at `start`.
    fn take(&mut self, start: u64, n: u64) -> Extent {
        let len = self.free.remove(&start).expect("a free run starts here");
        debug_assert!(n <= len);
        if n < len {
            self.free.insert(start + n, len - n);
        }
        self.free_blocks -= n;
        Extent::new(start, n)
    }

    /// Returns a run to free space, merging it with free neighbours.
    pub fn free(&mut self, run: Extent) -> Result<(), AllocError> {
        if run.pages == 0 {
            return Ok(());
        }
        let in_range = run.first.0 >= self.range.first.0 && run.end() <= self.range.end();
        let prev = self
            .free
            .range(..=run.first.0)
            .next_back()
            .map(|(&s, &l)| (s, l));
        let next = self.free.range(run.first.0..).next().map(|(&s, &l)| (s, l));
        let overlaps_prev = prev.is_some_and(|(s, l)| s + l > run.first.0);
        let overlaps_next = next.is_some_and(|(s, _)| s < run.end());
        if !in_range || overlaps_prev || overlaps_next {
            return Err(AllocError::NotAllocated { run });
        }
        let (mut start, mut len) = (run.first.0, run.pages);
        if let Some((s, l)) = prev.filter(|(s, l)| s + l == run.first.0) {
            self.free.remove(&s);
            start = s;
            len += l;
        }
        if let Some((s, l)) = next.filter(|(s, _)| *s == run.end()) {
            self.free.remove(&s);
            len += l;
        }
        self.free.insert(start, len);
        self.free_blocks += run.pages;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tidy_volume_gives_one_run_and_goals_extend_in_place() {
        let mut a = ExtentAllocator::new(100, 1000);
        let f = a.allocate(10, None).unwrap();
        assert_eq!(f, vec![Extent::new(100, 10)]);
        let g = a.allocate(5, None).unwrap();
        assert_eq!(g[0].first.0, 110);
        // Appending to f with a goal right after it cannot extend in place (g is there) ...
        let more = a.allocate(3, Some(f[0].end())).unwrap();
        assert_eq!(more, vec![Extent::new(115, 3)]);
        // ... but after g is freed, the goal block is free and the file grows contiguously.
        a.free(g[0]).unwrap();
        assert_eq!(a.allocate(2, Some(110)).unwrap(), vec![Extent::new(110, 2)]);
        assert_eq!(a.free(Extent::new(110, 1)), Ok(()));
        assert!(matches!(
            a.free(Extent::new(110, 1)),
            Err(AllocError::NotAllocated { .. })
        ));
        assert!(matches!(
            a.free(Extent::new(5000, 1)),
            Err(AllocError::NotAllocated { .. })
        ));
        assert_eq!(
            a.allocate(10_000, None),
            Err(AllocError::NoSpace {
                wanted: 10_000,
                free: a.free_blocks()
            })
        );
    }
}
