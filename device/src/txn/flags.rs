//! TxISC's L2P flag bit, kept as runs: which LPNs a live snapshot covers, and as which page
//! of which file.
//!
//! A snapshot is registered extent by extent, so the flags are a map of disjoint runs keyed
//! by their first LPN. Registering or releasing a file costs one entry per extent, not per
//! page: a task that grows a file by terabytes in one write (a hole before a far offset)
//! costs the host an entry, not a terabyte's worth of bits.

use super::ids::FileId;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FlagRun {
    /// One past the run's last LPN.
    end: u64,
    file: FileId,
    /// The file page the run's first LPN holds.
    first_page: u64,
}

/// Disjoint runs of flagged LPNs.
#[derive(Clone, Debug, Default)]
pub(crate) struct FlagMap {
    runs: BTreeMap<u64, FlagRun>,
}

impl FlagMap {
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The file and file page `lpn` holds, if a snapshot covers it.
    #[inline]
    pub fn get(&self, lpn: u64) -> Option<(FileId, u64)> {
        let (&start, run) = self.runs.range(..=lpn).next_back()?;
        (lpn < run.end).then(|| (run.file, run.first_page + (lpn - start)))
    }

    /// The first flagged LPN in `start..end` and its file, if any.
    pub fn first_overlap(&self, start: u64, end: u64) -> Option<(u64, FileId)> {
        if let Some((_, run)) = self.runs.range(..=start).next_back() {
            if start < run.end {
                return Some((start, run.file));
            }
        }
        self.runs
            .range(start..end)
            .next()
            .map(|(&lpn, run)| (lpn, run.file))
    }

    /// Flags `start..start + pages` as file pages `first_page..` of `file`. The caller has
    /// checked that no LPN in it is flagged.
    pub fn insert(&mut self, start: u64, pages: u64, file: FileId, first_page: u64) {
        debug_assert!(self.first_overlap(start, start + pages).is_none());
        if pages > 0 {
            let end = start + pages;
            self.runs.insert(
                start,
                FlagRun {
                    end,
                    file,
                    first_page,
                },
            );
        }
    }

    /// Unflags every run that starts in `start..end` (a released snapshot's extent: its runs
    /// lie wholly inside it).
    pub fn remove(&mut self, start: u64, end: u64) {
        let inside: Vec<u64> = self.runs.range(start..end).map(|(&k, _)| k).collect();
        for k in inside {
            self.runs.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_answer_point_and_range_queries() {
        let mut f = FlagMap::default();
        assert!(f.is_empty());
        f.insert(100, 10, FileId(1), 0);
        f.insert(200, 5, FileId(2), 3);
        assert_eq!(f.get(99), None);
        assert_eq!(f.get(100), Some((FileId(1), 0)));
        assert_eq!(f.get(109), Some((FileId(1), 9)));
        assert_eq!(f.get(110), None);
        assert_eq!(f.get(204), Some((FileId(2), 7)));
        assert_eq!(f.first_overlap(0, 100), None);
        assert_eq!(f.first_overlap(0, 101), Some((100, FileId(1))));
        assert_eq!(f.first_overlap(105, 106), Some((105, FileId(1))));
        assert_eq!(f.first_overlap(110, 200), None);
        assert_eq!(f.first_overlap(150, 1 << 40), Some((200, FileId(2))));
        f.remove(100, 110);
        assert_eq!(f.get(105), None);
        assert_eq!(f.get(202), Some((FileId(2), 5)));
        // A terabyte-sized run is one entry.
        f.insert(1 << 20, 1 << 28, FileId(3), 0);
        assert_eq!(f.get((1 << 20) + 12345), Some((FileId(3), 12345)));
    }
}
