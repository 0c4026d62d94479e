//! The snapshot descriptor of TxISC §III-B: one per registered file, shared by every task
//! working on it. It holds the file's extents (file page → LPN, as the host resolved them at
//! registration) and the delta mappings of changed pages, keyed by file offset.

use super::TaskId;
use crate::addr::{Lpn, Ppn};
use std::collections::{BTreeMap, BTreeSet};

/// A delta mapping may cover at most this many consecutive file pages (TxISC §V-B).
pub const MAX_DELTA_PAGES: usize = 128;

/// A run of consecutive logical pages of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub first: Lpn,
    pub pages: u64,
}

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

/// Delta mappings ordered by (first file page, writer): entries of different writers may
/// overlap (a host write and a task write to the same page are a conflict found at commit),
/// entries of one writer never do.
#[derive(Clone, Debug, Default)]
pub struct DeltaTree {
    entries: BTreeMap<(u64, TaskId), DeltaEntry>,
}

impl DeltaTree {
    /// Entries overlapping file pages `first..end`, as `(start, writer, entry)`.
    pub fn overlapping(
        &self,
        first: u64,
        end: u64,
    ) -> impl Iterator<Item = (u64, TaskId, &DeltaEntry)> + '_ {
        let from = first.saturating_sub(MAX_DELTA_PAGES as u64 - 1);
        self.entries
            .range((from, TaskId(0))..(end, TaskId(0)))
            .filter(move |((start, _), e)| start + e.pages.len() as u64 > first)
            .map(|(&(start, task), e)| (start, task, e))
    }

    /// `writer`'s page for file page `page`, if it wrote one.
    pub fn page_of(&self, writer: TaskId, page: u64) -> Option<Ppn> {
        self.overlapping(page, page + 1)
            .find(|(_, t, _)| *t == writer)
            .map(|(start, _, e)| e.pages[(page - start) as usize].ppn)
    }

    /// Records that `writer` wrote file page `page` to `ppn` at `ts`; returns the page it
    /// replaces (the writer's previous copy), which becomes garbage.
    pub fn put(&mut self, writer: TaskId, page: u64, ppn: Ppn, ts: u64) -> Option<Ppn> {
        let own = self
            .overlapping(page.saturating_sub(1), page + 1)
            .filter(|(_, t, _)| *t == writer)
            .map(|(start, _, e)| (start, e.pages.len() as u64))
            .collect::<Vec<_>>();
        for (start, len) in &own {
            if (*start..start + len).contains(&page) {
                let e = self.entries.get_mut(&(*start, writer)).expect("just found");
                let slot = &mut e.pages[(page - start) as usize];
                return Some(std::mem::replace(slot, DeltaPage { ppn, ts }).ppn);
            }
        }
        // Extend the writer's entry that ends just before `page`, if it has room.
        if let Some((start, _)) = own
            .iter()
            .find(|(s, l)| s + l == page && (*l as usize) < MAX_DELTA_PAGES)
        {
            let e = self.entries.get_mut(&(*start, writer)).expect("just found");
            e.pages.push(DeltaPage { ppn, ts });
            return None;
        }
        self.entries.insert(
            (page, writer),
            DeltaEntry {
                pages: vec![DeltaPage { ppn, ts }],
            },
        );
        None
    }

    /// Removes `writer`'s copy of file page `page`, splitting its entry if needed.
    pub fn remove_page(&mut self, writer: TaskId, page: u64) -> Option<DeltaPage> {
        let (start, _, _) = self
            .overlapping(page, page + 1)
            .find(|(_, t, _)| *t == writer)?;
        let mut e = self.entries.remove(&(start, writer)).expect("just found");
        let i = (page - start) as usize;
        let tail = e.pages.split_off(i + 1);
        let removed = e.pages.pop().expect("page lies in the entry");
        if !e.pages.is_empty() {
            self.entries.insert((start, writer), e);
        }
        if !tail.is_empty() {
            self.entries
                .insert((page + 1, writer), DeltaEntry { pages: tail });
        }
        Some(removed)
    }

    /// Removes and returns every entry of `writer`, as `(first file page, entry)`.
    pub fn take(&mut self, writer: TaskId) -> Vec<(u64, DeltaEntry)> {
        let keys: Vec<(u64, TaskId)> = self
            .entries
            .keys()
            .filter(|(_, t)| *t == writer)
            .copied()
            .collect();
        keys.into_iter()
            .map(|k| (k.0, self.entries.remove(&k).expect("listed")))
            .collect()
    }

    /// The file page ranges `writer` changed.
    pub fn ranges_of(&self, writer: TaskId) -> Vec<(u64, u64)> {
        self.entries
            .iter()
            .filter(|((_, t), _)| *t == writer)
            .map(|(&(s, _), e)| (s, s + e.pages.len() as u64))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every entry as `(first file page, writer, entry)`.
    pub fn iter(&self) -> impl Iterator<Item = (u64, TaskId, &DeltaEntry)> + '_ {
        self.entries.iter().map(|(&(s, t), e)| (s, t, e))
    }

    /// Pages mapped by all entries.
    pub fn pages(&self) -> usize {
        self.entries.values().map(|e| e.pages.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
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
    /// Appends extents; returns the file pages they cover, as `(file page, lpn)`.
    pub fn extend(&mut self, extents: &[Extent]) -> Vec<(u64, Lpn)> {
        let mut added = Vec::new();
        for e in extents {
            for i in 0..e.pages {
                added.push((self.pages + i, Lpn(e.first.0 + i)));
            }
            self.pages += e.pages;
            match self.extents.last_mut() {
                Some(last) if last.first.0 + last.pages == e.first.0 => last.pages += e.pages,
                _ => self.extents.push(*e),
            }
        }
        added
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
        assert_eq!(t.overlapping(11, 12).count(), 2, "writers may overlap");
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
