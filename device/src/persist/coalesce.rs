//! Cross-transaction replay reduction (SIFT §3.3, §4.3): the range tree that keeps a
//! ready-prefix batch's final visible state under *late-write-wins*, and the inode
//! deduplication table.
//!
//! The tree holds non-overlapping fragments keyed by their first logical block. Inserting an
//! interval trims the fragment that straddles its start, removes the ones it covers, keeps
//! the residue of one that runs past its end, and merges with neighbours whose logical and
//! source ranges both continue it. Each overlap costs O(log n) plus O(1) restructuring, so a
//! batch of N intervals with M overlap events costs O(N log N + M) — never the pairwise
//! O(N²) of comparing every update with every other.

use serde::Serialize;
use std::collections::BTreeMap;

/// Where a version of a block can be read during replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum ReplaySource {
    /// A foreground staging transaction's body in the staging ring.
    Staging,
    /// A background journal transaction's body in the journal area.
    Journal,
}

/// One surviving piece of final visible state: logical blocks `start..end` are read from
/// `source` starting at `src_block`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Fragment {
    pub end: u64,
    pub source: ReplaySource,
    pub src_block: u64,
}

/// What coalescing saw and kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CoalesceStats {
    /// Interval updates inserted (the thesis' update records, "tags").
    pub raw_intervals: u64,
    pub raw_blocks: u64,
    /// Fragments trimmed, removed or split by a later write.
    pub overlap_events: u64,
    pub surviving_fragments: u64,
    pub surviving_blocks: u64,
}

impl CoalesceStats {
    /// Share of raw block replay removed, in percent.
    pub fn block_reduction_pct(&self) -> f64 {
        reduction(self.raw_blocks, self.surviving_blocks)
    }

    pub fn interval_reduction_pct(&self) -> f64 {
        reduction(self.raw_intervals, self.surviving_fragments)
    }
}

pub(crate) fn reduction(raw: u64, kept: u64) -> f64 {
    if raw == 0 {
        0.0
    } else {
        (1.0 - kept as f64 / raw as f64) * 100.0
    }
}

/// The range tree of one batch. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct RangeTree {
    map: BTreeMap<u64, Fragment>,
    raw_intervals: u64,
    raw_blocks: u64,
    overlap_events: u64,
    surviving_blocks: u64,
}

impl RangeTree {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that logical blocks `start..start + len` were written, their new version
    /// readable from `source` at `src_block`. Later inserts win.
    ///
    /// The common case of a replay set, one block rewritten where a one-block fragment lies
    /// and nothing merges, costs one tree search ([`RangeTree::rewrite_one`]); any other
    /// costs three or more.
    pub fn insert(&mut self, start: u64, len: u64, source: ReplaySource, src_block: u64) {
        if len == 1 && self.rewrite_one(start, source, src_block) {
            return;
        }
        self.insert_general(start, len, source, src_block);
    }

    /// Block `start` rewritten over a fragment that is exactly that block, with neither
    /// neighbour continuing the new version: the fragment is replaced in place. One search
    /// from the right finds the right neighbour, the fragment and the left neighbour, which
    /// lie next to each other in the tree. Returns false, changing nothing, in any other case.
    fn rewrite_one(&mut self, start: u64, source: ReplaySource, src_block: u64) -> bool {
        let Some(end) = start.checked_add(1) else {
            return false;
        };
        let mut it = self.map.range_mut(..=end);
        let mut at = it.next_back();
        let mut right = None;
        if let Some((&k, f)) = &at {
            if k == end {
                right = Some(**f);
                at = it.next_back();
            }
        }
        let Some((&s, f)) = at else {
            return false;
        };
        if s != start || f.end != end {
            return false;
        }
        let continues = |ls: u64, l: &Fragment| {
            l.end == start && l.source == source && l.src_block + (start - ls) == src_block
        };
        if it.next_back().is_some_and(|(&ls, l)| continues(ls, l)) {
            return false;
        }
        if right
            .is_some_and(|r| r.source == source && src_block.checked_add(1) == Some(r.src_block))
        {
            return false;
        }
        *f = Fragment {
            end,
            source,
            src_block,
        };
        self.raw_intervals += 1;
        self.raw_blocks += 1;
        self.overlap_events += 1;
        #[cfg(debug_assertions)]
        if let Err(e) = self.check_around(start, end) {
            panic!("range tree invariant broken by rewrite {start}: {e}");
        }
        true
    }

    /// Any insert: see [`RangeTree::insert`].
    // Long: the interval update's cases (trim the left, drop the covered, keep a residue, merge
    // both sides) must see each other's state.
    fn insert_general(&mut self, start: u64, len: u64, source: ReplaySource, src_block: u64) {
        if len == 0 {
            return;
        }
        let end = start + len;
        self.raw_intervals += 1;
        self.raw_blocks += len;
        let new = Fragment {
            end,
            source,
            src_block,
        };
        // The fragment before `start`: trim it if it straddles `start` (keeping a residue if
        // it also runs past `end`), and remember it for merging.
        let mut left = None;
        let mut residue = None;
        if let Some((&s, f)) = self.map.range_mut(..start).next_back() {
            if f.end > start {
                let old = *f;
                f.end = start;
                self.overlap_events += 1;
                self.surviving_blocks -= old.end.min(end) - start;
                if old.end > end {
                    residue = Some(Fragment {
                        src_block: old.src_block + (end - s),
                        ..old
                    });
                }
            }
            left = Some((s, *f));
        }
        // Fragments starting inside the new interval: the first one's slot is reused if it
        // starts exactly at `start`, the others are removed; a residue past `end` stays.
        let mut placed = false;
        let mut from = start;
        while from < end {
            let Some((&s, f)) = self.map.range_mut(from..end).next() else {
                break;
            };
            let old = *f;
            self.overlap_events += 1;
            self.surviving_blocks -= old.end.min(end) - s;
            if old.end > end {
                residue = Some(Fragment {
                    src_block: old.src_block + (end - s),
                    ..old
                });
            }
            if s == start {
                *f = new;
                placed = true;
            } else {
                self.map.remove(&s);
            }
            from = old.end.max(s + 1);
        }
        if let Some(r) = residue {
            self.map.insert(end, r);
        }
        if !placed {
            self.map.insert(start, new);
        }
        self.surviving_blocks += len;
        // Merge with a left neighbour that this continues, logically and in its source.
        let mut key = start;
        let mut merged = new;
        if let Some((s, l)) = left {
            if l.end == start && l.source == source && l.src_block + (start - s) == src_block {
                self.map.remove(&start);
                let l = self.map.get_mut(&s).expect("left neighbour");
                l.end = end;
                key = s;
                merged = *l;
            }
        }
        // And with a right neighbour that continues it.
        if let Some(right) = self.map.get(&end).copied() {
            if right.source == merged.source && merged.src_block + (end - key) == right.src_block {
                self.map.remove(&end);
                self.map.get_mut(&key).expect("just placed").end = right.end;
            }
        }
        #[cfg(debug_assertions)]
        if let Err(e) = self.check_around(start, end) {
            panic!("range tree invariant broken by insert {start}..{end}: {e}");
        }
    }

    /// The fragments from the one before `start` to the first at or after `end`: each is
    /// non-empty and ends at or before the next begins. What one insert can change.
    #[cfg(debug_assertions)]
    fn check_around(&self, start: u64, end: u64) -> Result<(), String> {
        let from = self
            .map
            .range(..start)
            .next_back()
            .map_or(start, |(&s, _)| s);
        let to = self.map.range(end..).next().map_or(end, |(&s, _)| s);
        Self::check_run(self.map.range(from..=to))
    }

    fn check_run<'a>(run: impl Iterator<Item = (&'a u64, &'a Fragment)>) -> Result<(), String> {
        let mut prev_end = None;
        for (&s, f) in run {
            if f.end <= s {
                return Err(format!("empty fragment at {s} (ends at {})", f.end));
            }
            if prev_end.is_some_and(|e| e > s) {
                return Err(format!("fragment at {s} overlaps the one before"));
            }
            prev_end = Some(f.end);
        }
        Ok(())
    }

    /// Every invariant: fragments non-empty, ordered and disjoint, and the surviving-block
    /// count equal to what they cover. O(fragments), for tests.
    pub fn check(&self) -> Result<(), String> {
        Self::check_run(self.map.iter())?;
        let covered: u64 = self.map.iter().map(|(&s, f)| f.end - s).sum();
        if covered != self.surviving_blocks {
            return Err(format!(
                "fragments cover {covered} blocks, the count says {}",
                self.surviving_blocks
            ));
        }
        Ok(())
    }

    /// The surviving fragments in logical order, as `(start, fragment)`.
    pub fn iter(&self) -> impl Iterator<Item = (u64, Fragment)> + '_ {
        self.map.iter().map(|(&s, &f)| (s, f))
    }

    pub fn stats(&self) -> CoalesceStats {
        CoalesceStats {
            raw_intervals: self.raw_intervals,
            raw_blocks: self.raw_blocks,
            overlap_events: self.overlap_events,
            surviving_fragments: self.map.len() as u64,
            surviving_blocks: self.surviving_blocks,
        }
    }
}

/// Key of an inode update: the metadata block holding the inode and the inode's slot in it
/// (SIFT §4.3.3's composite key of block address and inode-block identity).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct InodeKey {
    pub block: u64,
    pub slot: u32,
}

/// Batch-scoped inode deduplication: open addressing with linear probing; inserting a key
/// again overwrites it, so only each inode's final version survives.
#[derive(Clone, Debug)]
pub struct InodeDedup<V> {
    slots: Vec<Option<(InodeKey, V)>>,
    len: usize,
    raw: u64,
}

impl<V: Copy> Default for InodeDedup<V> {
    fn default() -> Self {
        InodeDedup {
            slots: vec![None; 16],
            len: 0,
            raw: 0,
        }
    }
}

impl<V: Copy> InodeDedup<V> {
    fn probe_start(&self, key: InodeKey) -> usize {
        // A fixed multiplicative hash: deterministic on every machine.
        let h = (key.block ^ (u64::from(key.slot) << 48)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> 32) as usize & (self.slots.len() - 1)
    }

    /// Records `value` as the latest version of `key`.
    pub fn insert(&mut self, key: InodeKey, value: V) {
        self.raw += 1;
        if (self.len + 1) * 10 > self.slots.len() * 7 {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = self.probe_start(key);
        loop {
            match &mut self.slots[i] {
                Some((k, v)) if *k == key => {
                    *v = value;
                    return;
                }
                Some(_) => i = (i + 1) & mask,
                slot @ None => {
                    *slot = Some((key, value));
                    self.len += 1;
                    return;
                }
            }
        }
    }

    fn grow(&mut self) {
        let doubled = vec![None; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        self.len = 0;
        let raw = self.raw;
        for (k, v) in old.into_iter().flatten() {
            self.insert(k, v);
        }
        self.raw = raw;
    }

    pub fn get(&self, key: InodeKey) -> Option<V> {
        let mask = self.slots.len() - 1;
        let mut i = self.probe_start(key);
        loop {
            match &self.slots[i] {
                Some((k, v)) if *k == key => return Some(*v),
                Some(_) => i = (i + 1) & mask,
                None => return None,
            }
        }
    }

    /// Updates inserted.
    pub fn raw(&self) -> u64 {
        self.raw
    }

    /// Inodes whose final version survives.
    pub fn surviving(&self) -> usize {
        self.len
    }

    /// The survivors, ordered by key so replay is deterministic.
    pub fn survivors(&self) -> Vec<(InodeKey, V)> {
        let mut v: Vec<(InodeKey, V)> = self.slots.iter().flatten().copied().collect();
        v.sort_by_key(|(k, _)| (k.block, k.slot));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The brute force: the last writer of every block, and where it put it.
    fn last_writer(
        intervals: &[(u64, u64, ReplaySource, u64)],
    ) -> BTreeMap<u64, (ReplaySource, u64)> {
        let mut m = BTreeMap::new();
        for &(start, len, source, src) in intervals {
            for i in 0..len {
                m.insert(start + i, (source, src + i));
            }
        }
        m
    }

    fn interval() -> impl Strategy<Value = (u64, u64, ReplaySource, u64)> {
        (
            0u64..200,
            1u64..40,
            prop_oneof![Just(ReplaySource::Staging), Just(ReplaySource::Journal)],
            0u64..10_000,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        /// Random interval streams: the coalesced set equals the brute-force "last writer per
        /// block" map, fragments never overlap, adjacent mergeable fragments are merged, and
        /// the statistics add up.
        #[test]
        fn coalescing_equals_last_writer_per_block(
            intervals in prop::collection::vec(interval(), 0..120),
            contiguous_runs in any::<bool>(),
        ) {
            // Half the cases write sequential runs from one source, to exercise merging.
            let intervals: Vec<_> = if contiguous_runs {
                intervals.iter().enumerate().map(|(i, &(s, l, src, _))| (s, l, src, s + 1000 * (i as u64 % 2))).collect()
            } else {
                intervals
            };
            let mut tree = RangeTree::new();
            for &(s, l, src, b) in &intervals {
                tree.insert(s, l, src, b);
            }
            let mut got = BTreeMap::new();
            let mut prev: Option<(u64, Fragment)> = None;
            for (s, f) in tree.iter() {
                prop_assert!(f.end > s, "empty fragment at {}", s);
                if let Some((ps, pf)) = prev {
                    prop_assert!(pf.end <= s, "fragments overlap");
                    let mergeable = pf.end == s && pf.source == f.source && pf.src_block + (s - ps) == f.src_block;
                    prop_assert!(!mergeable, "unmerged neighbours at {}", s);
                }
                for i in s..f.end {
                    got.insert(i, (f.source, f.src_block + (i - s)));
                }
                prev = Some((s, f));
            }
            prop_assert_eq!(&got, &last_writer(&intervals));
            let st = tree.stats();
            prop_assert_eq!(st.surviving_blocks, got.len() as u64);
            prop_assert_eq!(st.raw_blocks, intervals.iter().map(|i| i.1).sum::<u64>());
            prop_assert_eq!(st.raw_intervals, intervals.len() as u64);
            prop_assert_eq!(tree.check(), Ok(()));
        }

        /// One-block rewrites take the one-search path where they can; the tree and every
        /// statistic are what the general path gives.
        #[test]
        fn the_one_block_path_is_the_general_path(
            intervals in prop::collection::vec(
                (0u64..40, 1u64..3, prop_oneof![Just(ReplaySource::Staging), Just(ReplaySource::Journal)], 0u64..60),
                0..300,
            ),
        ) {
            let (mut fast, mut general) = (RangeTree::new(), RangeTree::new());
            for &(s, l, src, b) in &intervals {
                fast.insert(s, l, src, b);
                general.insert_general(s, l, src, b);
            }
            prop_assert_eq!(fast.iter().collect::<Vec<_>>(), general.iter().collect::<Vec<_>>());
            prop_assert_eq!(fast.stats(), general.stats());
            prop_assert_eq!(fast.check(), Ok(()));
        }

        #[test]
        fn inode_dedup_keeps_the_last_version(updates in prop::collection::vec((0u64..50, 0u32..4, any::<u32>()), 0..500)) {
            let mut table = InodeDedup::default();
            let mut reference = BTreeMap::new();
            for &(block, slot, v) in &updates {
                table.insert(InodeKey { block, slot }, v);
                reference.insert((block, slot), v);
            }
            prop_assert_eq!(table.raw(), updates.len() as u64);
            prop_assert_eq!(table.surviving(), reference.len());
            let survivors: Vec<((u64, u32), u32)> = table.survivors().into_iter().map(|(k, v)| ((k.block, k.slot), v)).collect();
            prop_assert_eq!(survivors, reference.into_iter().collect::<Vec<_>>());
        }
    }
}
