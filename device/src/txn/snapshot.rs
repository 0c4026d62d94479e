//! The snapshot descriptor of TxISC §III-B: one per registered file, shared by every task
//! working on it. It holds the file's extents (file page → LPN, as the host resolved them at
//! registration) and the delta mappings of changed pages, keyed by file offset.

use super::ids::TaskId;
use crate::addr::{Extent, Lpn, Ppn};
use std::collections::{BTreeMap, BTreeSet};

/// A delta mapping may cover at most this many consecutive file pages (TxISC §V-B).
pub const MAX_DELTA_PAGES: usize = 128;

/// Bytes of one delta-mapping entry in TxISC's firmware (§V-B: 1 B task ID, 4 B offset, 1 B
/// length, 4 B PPA, 4 B timestamp, 8 B tree node). One entry holds one PPA and one
/// timestamp, so it maps pages consecutive in the file *and* on flash, written together.
pub const TXISC_ENTRY_BYTES: u64 = 22;

/// One changed page: its new copy and when it was written (the transaction clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeltaPage {
    pub ppn: Ppn,
    pub ts: u64,
}

/// Consecutive file pages one writer changed: where their new copies are on flash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeltaEntry {
    /// `pages[i]` holds file page `start + i`.
    pub pages: Vec<DeltaPage>,
}

/// Delta mappings keyed by file offset, one ordered map per writer. Entries of different
/// writers may overlap (a host write and a task write to the same page are a conflict found
/// at commit); entries of one writer never do, so "writer's page at offset" is one descent.
/// (TxISC keeps a single red-black tree for all writers; per-writer maps make the common
/// lookups O(log n) without scanning past other writers' entries.)
#[derive(Clone, Debug, Default)]
pub struct DeltaTree {
    writers: BTreeMap<TaskId, BTreeMap<u64, DeltaEntry>>,
    entries: usize,
}

impl DeltaTree {
    /// `writer`'s entry covering file page `page`, as `(start, entry)`.
    fn entry_of(&self, writer: TaskId, page: u64) -> Option<(u64, &DeltaEntry)> {
        let (&start, e) = self.writers.get(&writer)?.range(..=page).next_back()?;
        (page < start + e.pages.len() as u64).then_some((start, e))
    }

    /// Writers other than `writer` with an entry overlapping file pages `first..end`.
    pub fn other_writers(
        &self,
        writer: TaskId,
        first: u64,
        end: u64,
    ) -> impl Iterator<Item = TaskId> + '_ {
        self.writers
            .iter()
            .filter(move |(w, _)| **w != writer)
            .filter(move |(_, m)| {
                let before = m
                    .range(..first)
                    .next_back()
                    .is_some_and(|(s, e)| s + e.pages.len() as u64 > first);
                before || m.range(first..end).next().is_some()
            })
            .map(|(w, _)| *w)
    }

    /// `writer`'s pages within file pages `first..end`, as `(file page, delta page)`.
    pub fn pages_in(&self, writer: TaskId, first: u64, end: u64) -> Vec<(u64, DeltaPage)> {
        let Some(m) = self.writers.get(&writer) else {
            return Vec::new();
        };
        let from = m.range(..=first).next_back().map_or(first, |(&s, _)| s);
        m.range(from..end)
            .flat_map(|(&s, e)| {
                e.pages
                    .iter()
                    .enumerate()
                    .map(move |(i, p)| (s + i as u64, *p))
            })
            .filter(|(page, _)| (first..end).contains(page))
            .collect()
    }

    /// `writer`'s page for file page `page`, if it wrote one.
    pub fn page_of(&self, writer: TaskId, page: u64) -> Option<Ppn> {
        self.entry_of(writer, page)
            .map(|(start, e)| e.pages[(page - start) as usize].ppn)
    }

    /// Records that `writer` wrote file page `page` to `ppn` at `ts`; returns the page it
    /// replaces (the writer's previous copy), which becomes garbage.
    pub fn put(&mut self, writer: TaskId, page: u64, ppn: Ppn, ts: u64) -> Option<Ppn> {
        let replaced = self.put_unchecked(writer, page, ppn, ts);
        self.debug_check(writer, page);
        replaced
    }

    fn put_unchecked(&mut self, writer: TaskId, page: u64, ppn: Ppn, ts: u64) -> Option<Ppn> {
        let m = self.writers.entry(writer).or_default();
        if let Some((&start, e)) = m.range_mut(..=page).next_back() {
            let len = e.pages.len() as u64;
            if page < start + len {
                let slot = &mut e.pages[(page - start) as usize];
                return Some(std::mem::replace(slot, DeltaPage { ppn, ts }).ppn);
            }
            // Extend the entry that ends just before `page`, if it has room.
            if page == start + len && e.pages.len() < MAX_DELTA_PAGES {
                e.pages.push(DeltaPage { ppn, ts });
                return None;
            }
        }
        m.insert(
            page,
            DeltaEntry {
                pages: vec![DeltaPage { ppn, ts }],
            },
        );
        self.entries += 1;
        None
    }

    /// Removes `writer`'s copy of file page `page`, splitting its entry if needed.
    pub fn remove_page(&mut self, writer: TaskId, page: u64) -> Option<DeltaPage> {
        let (start, _) = self.entry_of(writer, page)?;
        let m = self.writers.get_mut(&writer).expect("just found");
        let mut e = m.remove(&start).expect("just found");
        self.entries -= 1;
        let i = (page - start) as usize;
        let tail = e.pages.split_off(i + 1);
        let removed = e.pages.pop().expect("page lies in the entry");
        if !e.pages.is_empty() {
            m.insert(start, e);
            self.entries += 1;
        }
        if !tail.is_empty() {
            m.insert(page + 1, DeltaEntry { pages: tail });
            self.entries += 1;
        }
        if m.is_empty() {
            self.writers.remove(&writer);
        }
        self.debug_check(writer, page);
        Some(removed)
    }

    /// What one change at `writer`'s `page` can break, in debug builds: the entries next to
    /// it and the entry count.
    #[inline]
    fn debug_check(&self, _writer: TaskId, _page: u64) {
        #[cfg(debug_assertions)]
        {
            let around = self.writers.get(&_writer).map_or(Ok(()), |m| {
                let from = m.range(.._page).next_back().map_or(_page, |(&s, _)| s);
                Self::check_entries(m.range(from..=_page.saturating_add(1)))
            });
            if let Err(e) = around.and_then(|()| self.check_count()) {
                panic!("delta tree invariant broken at {_writer:?} page {_page}: {e}");
            }
        }
    }

    /// One writer's entries: each holds 1..=MAX_DELTA_PAGES pages and ends before the next
    /// begins.
    fn check_entries<'a>(
        entries: impl Iterator<Item = (&'a u64, &'a DeltaEntry)>,
    ) -> Result<(), String> {
        let mut prev_end = None;
        for (&s, e) in entries {
            let n = e.pages.len();
            if n == 0 || n > MAX_DELTA_PAGES {
                return Err(format!("entry at page {s} holds {n} pages"));
            }
            if prev_end.is_some_and(|end| end > s) {
                return Err(format!("entry at page {s} overlaps the one before"));
            }
            prev_end = Some(s + n as u64);
        }
        Ok(())
    }

    /// The entry count matches the writers' maps, and no writer is kept without entries.
    fn check_count(&self) -> Result<(), String> {
        let counted: usize = self.writers.values().map(BTreeMap::len).sum();
        if counted != self.entries || self.writers.values().any(BTreeMap::is_empty) {
            return Err(format!(
                "{counted} entries in {} writers' maps, the count says {}",
                self.writers.len(),
                self.entries
            ));
        }
        Ok(())
    }

    /// Every invariant of every writer's entries. O(entries), for tests.
    pub fn check(&self) -> Result<(), String> {
        for m in self.writers.values() {
            Self::check_entries(m.iter())?;
        }
        self.check_count()
    }

    /// Removes and returns every entry of `writer`, as `(first file page, entry)`.
    pub fn take(&mut self, writer: TaskId) -> Vec<(u64, DeltaEntry)> {
        let taken: Vec<(u64, DeltaEntry)> = self
            .writers
            .remove(&writer)
            .map(|m| m.into_iter().collect())
            .unwrap_or_default();
        self.entries -= taken.len();
        #[cfg(debug_assertions)]
        if let Err(e) = self.check_count() {
            panic!("delta tree invariant broken taking {writer:?}'s entries: {e}");
        }
        taken
    }

    /// The file page ranges `writer` changed.
    pub fn ranges_of(&self, writer: TaskId) -> Vec<(u64, u64)> {
        self.writers.get(&writer).map_or_else(Vec::new, |m| {
            m.iter()
                .map(|(&s, e)| (s, s + e.pages.len() as u64))
                .collect()
        })
    }

    /// Entries `writer` holds.
    pub fn entries_of(&self, writer: TaskId) -> usize {
        self.writers.get(&writer).map_or(0, BTreeMap::len)
    }

    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Every entry as `(first file page, writer, entry)`.
    pub fn iter(&self) -> impl Iterator<Item = (u64, TaskId, &DeltaEntry)> + '_ {
        self.writers
            .iter()
            .flat_map(|(&w, m)| m.iter().map(move |(&s, e)| (s, w, e)))
    }

    /// Pages mapped by all entries.
    pub fn pages(&self) -> usize {
        self.iter().map(|(_, _, e)| e.pages.len()).sum()
    }

    /// Entries TxISC's firmware would hold for these mappings (see [`TXISC_ENTRY_BYTES`]):
    /// one per run of pages on consecutive flash pages with one timestamp. The model keeps a
    /// copy per page instead, so it can hold any layout; its own memory is not the device's.
    pub fn firmware_entries(&self) -> u64 {
        self.iter()
            .map(|(_, _, e)| {
                let starts = e
                    .pages
                    .windows(2)
                    .filter(|w| w[1].ppn.0 != w[0].ppn.0.wrapping_add(1) || w[1].ts != w[0].ts);
                1 + starts.count() as u64
            })
            .sum()
    }
}

/// Pages `first..end` committed by `task` at `ts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommittedRange {
    pub first: u64,
    pub end: u64,
    pub ts: u64,
    pub task: TaskId,
}

/// One registered file's snapshot: see the module docs.
#[derive(Clone, Debug, Default)]
pub struct SnapshotDescriptor {
    extents: Vec<Extent>,
    /// File pages covered by `extents`, so lookups need no sum.
    pages: u64,
    pub deltas: DeltaTree,
    /// Tasks that registered the file and have not finished.
    pub users: BTreeSet<TaskId>,
    /// Page ranges committed by tasks while the snapshot lived, with their commit timestamp:
    /// a task that started before such a commit and wrote the same pages loses
    /// (first committer wins).
    pub committed: Vec<CommittedRange>,
}

impl SnapshotDescriptor {
    /// Appends extents; returns each with the file page its first LPN holds.
    pub fn extend(&mut self, extents: &[Extent]) -> Vec<(u64, Extent)> {
        let mut added = Vec::with_capacity(extents.len());
        for e in extents {
            added.push((self.pages, *e));
            self.pages += e.pages;
            match self.extents.last_mut() {
                Some(last) if last.first.0 + last.pages == e.first.0 => last.pages += e.pages,
                _ => self.extents.push(*e),
            }
        }
        #[cfg(debug_assertions)]
        if let Err(e) = self.check() {
            panic!("snapshot descriptor invariant broken: {e}");
        }
        added
    }

    /// The page count is the extents' sum, and contiguous extents are merged. With
    /// [`DeltaTree::check`] of its deltas, every invariant of the snapshot.
    pub fn check(&self) -> Result<(), String> {
        let sum: u64 = self.extents.iter().map(|e| e.pages).sum();
        if sum != self.pages {
            return Err(format!(
                "extents hold {sum} pages, the count says {}",
                self.pages
            ));
        }
        if let Some(w) = self.extents.windows(2).find(|w| w[0].end() == w[1].first.0) {
            return Err(format!("extents {:?} and {:?} are not merged", w[0], w[1]));
        }
        self.deltas.check()
    }

    pub fn pages(&self) -> u64 {
        self.pages
    }

    pub fn extents(&self) -> &[Extent] {
        &self.extents
    }

    /// The LPN holding file page `page` (clean data), and how many extents the lookup
    /// examined (firmware cost).
    pub fn lpn_of(&self, page: u64) -> Option<(Lpn, u64)> {
        let mut base = 0;
        for (i, e) in self.extents.iter().enumerate() {
            if page < base + e.pages {
                return Some((Lpn(e.first.0 + page - base), i as u64 + 1));
            }
            base += e.pages;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TxISC's firmware entry holds one PPA and one timestamp: a write of consecutive flash
    /// pages is one entry, pages that are not consecutive on flash or not written together
    /// are one each, whatever the model's own entries hold.
    #[test]
    fn firmware_entries_need_contiguous_flash_and_one_write() {
        let mut t = DeltaTree::default();
        let a = TaskId(1);
        for i in 0..4 {
            t.put(a, i, Ppn(100 + i as u32), 1); // one write, four flash-contiguous pages
        }
        assert_eq!((t.len(), t.firmware_entries()), (1, 1));
        t.put(a, 4, Ppn(104), 2); // contiguous on flash, a later write
        t.put(a, 5, Ppn(900), 2); // same write, elsewhere on flash
        assert_eq!((t.len(), t.firmware_entries()), (1, 3));
        t.put(TaskId::HOST, 20, Ppn(901), 2); // another writer: its own entry
        assert_eq!((t.len(), t.firmware_entries()), (2, 4));
    }

    #[test]
    fn a_writer_extends_its_entry_and_replaces_its_own_pages() {
        let mut t = DeltaTree::default();
        let a = TaskId(1);
        assert_eq!(t.put(a, 10, Ppn(100), 1), None);
        assert_eq!(t.put(a, 11, Ppn(101), 2), None);
        assert_eq!(t.len(), 1, "page 11 extends the entry of page 10");
        assert_eq!(t.put(a, 10, Ppn(200), 3), Some(Ppn(100)));
        assert_eq!(t.page_of(a, 10), Some(Ppn(200)));
        assert_eq!(t.page_of(a, 11), Some(Ppn(101)));
        t.put(TaskId::HOST, 11, Ppn(300), 4);
        assert_eq!(
            t.other_writers(a, 11, 12).collect::<Vec<_>>(),
            vec![TaskId::HOST]
        );
        assert_eq!(
            t.other_writers(TaskId::HOST, 0, 11).collect::<Vec<_>>(),
            vec![a]
        );
        assert_eq!(t.other_writers(TaskId::HOST, 12, 20).count(), 0);
        assert_eq!(t.pages_in(a, 11, 13).len(), 1, "only page 11 in 11..13");
        assert_eq!(t.ranges_of(a), vec![(10, 12)]);
        for p in 12..12 + MAX_DELTA_PAGES as u64 {
            t.put(a, p, Ppn(p as u32 + 1000), 5);
        }
        assert_eq!(t.ranges_of(a).len(), 2, "an entry maps at most 128 pages");
        assert_eq!(t.page_of(a, 139), Some(Ppn(1139)));
        let host = t.remove_page(TaskId::HOST, 11).unwrap();
        assert_eq!(host.ppn, Ppn(300));
        assert_eq!(t.remove_page(a, 50).unwrap().ppn, Ppn(1050));
        assert_eq!(
            t.ranges_of(a),
            vec![(10, 50), (51, 138), (138, 140)],
            "split around page 50"
        );
        assert_eq!(t.page_of(a, 51), Some(Ppn(1051)));
        assert_eq!(t.take(a).len(), 3);
        assert!(t.is_empty());
    }
}
