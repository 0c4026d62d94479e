//! The EXT4-like path's page cache over one file (the baseline of ISPFS §5.1): which pages
//! are cached, least recently used first, and which are dirty, in file order (the order the
//! flusher writes them back in).

use std::collections::BTreeSet;

const NIL: u32 = u32::MAX;

pub(super) struct PageCache {
    /// The LRU list's links, per page: towards the oldest (evicted first) and the newest.
    older: Vec<u32>,
    newer: Vec<u32>,
    cached: Vec<bool>,
    oldest: u32,
    newest: u32,
    len: u32,
    capacity: u32,
    dirty: BTreeSet<u32>,
}

impl PageCache {
    /// The cache after a sequential pass over a `pages`-page file: its last `capacity`
    /// pages cached and clean, the lowest-addressed the oldest.
    pub fn after_a_pass(pages: u32, capacity: u32) -> PageCache {
        let n = pages as usize;
        let mut c = PageCache {
            older: vec![NIL; n],
            newer: vec![NIL; n],
            cached: vec![false; n],
            oldest: NIL,
            newest: NIL,
            len: 0,
            capacity: capacity.max(1),
            dirty: BTreeSet::new(),
        };
        for p in pages.saturating_sub(c.capacity)..pages {
            c.insert(p);
        }
        c
    }

    /// Pages in the file.
    pub fn pages(&self) -> u32 {
        self.cached.len() as u32
    }

    pub fn len(&self) -> u32 {
        self.len
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    pub fn contains(&self, p: u32) -> bool {
        self.cached.get(p as usize).copied().unwrap_or(false)
    }

    /// Makes a cached page the most recently used.
    pub fn touch(&mut self, p: u32) {
        if self.contains(p) {
            self.unlink(p);
            self.push_newest(p);
        }
    }

    /// Caches a page of the file, evicting the least recently used clean page if full;
    /// returns the page evicted (a mapping of it is then gone too).
    pub fn insert(&mut self, p: u32) -> Option<u32> {
        if p >= self.pages() || self.contains(p) {
            return None;
        }
        let evicted = if self.len >= self.capacity {
            self.evict_one()
        } else {
            None
        };
        self.cached[p as usize] = true;
        self.len += 1;
        self.push_newest(p);
        evicted
    }

    /// Reclaim: the oldest clean page goes; a dirty one met on the way is rotated to the
    /// newest end instead, as the kernel rotates pages under writeback.
    fn evict_one(&mut self) -> Option<u32> {
        for _ in 0..self.len {
            let p = self.oldest;
            if p == NIL {
                return None;
            }
            self.unlink(p);
            if self.dirty.contains(&p) {
                self.push_newest(p);
            } else {
                self.cached[p as usize] = false;
                self.len -= 1;
                return Some(p);
            }
        }
        None
    }

    /// Marks a cached page dirty; true if it was clean.
    pub fn mark_dirty(&mut self, p: u32) -> bool {
        self.contains(p) && self.dirty.insert(p)
    }

    pub fn is_dirty(&self, p: u32) -> bool {
        self.dirty.contains(&p)
    }

    pub fn clean(&mut self, p: u32) {
        self.dirty.remove(&p);
    }

    pub fn dirty_pages(&self) -> u64 {
        self.dirty.len() as u64
    }

    /// The first dirty page at or after `from`, wrapping to the file's start.
    pub fn next_dirty(&self, from: u32) -> Option<u32> {
        self.dirty
            .range(from..)
            .next()
            .or_else(|| self.dirty.iter().next())
            .copied()
    }

    fn unlink(&mut self, p: u32) {
        let (o, n) = (self.older[p as usize], self.newer[p as usize]);
        match o {
            NIL => self.oldest = n,
            o => self.newer[o as usize] = n,
        }
        match n {
            NIL => self.newest = o,
            n => self.older[n as usize] = o,
        }
        self.older[p as usize] = NIL;
        self.newer[p as usize] = NIL;
    }

    fn push_newest(&mut self, p: u32) {
        self.older[p as usize] = self.newest;
        self.newer[p as usize] = NIL;
        match self.newest {
            NIL => self.oldest = p,
            n => self.newer[n as usize] = p,
        }
        self.newest = p;
    }

    /// The LRU list holds exactly the cached pages, each once, and no more than fit; every
    /// dirty page is cached.
    #[cfg(test)]
    fn assert_invariants(&self) {
        let mut seen = 0u32;
        let mut p = self.oldest;
        let mut prev = NIL;
        while p != NIL {
            assert!(self.cached[p as usize], "page {p} listed but not cached");
            assert_eq!(self.older[p as usize], prev);
            seen += 1;
            assert!(seen <= self.len, "the list loops");
            prev = p;
            p = self.newer[p as usize];
        }
        assert_eq!(prev, self.newest);
        assert_eq!(seen, self.len);
        assert!(self.len <= self.capacity);
        assert_eq!(
            self.cached.iter().filter(|&&c| c).count(),
            self.len as usize
        );
        assert!(self.dirty.iter().all(|&d| self.contains(d)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_leaves_the_files_end_cached_and_a_scan_evicts_oldest_first() {
        let mut c = PageCache::after_a_pass(10, 4);
        c.assert_invariants();
        assert!((0..6).all(|p| !c.contains(p)) && (6..10).all(|p| c.contains(p)));
        // Reading from the start again evicts what the pass cached first: a sequential
        // scan of a file larger than the cache misses every page.
        c.insert(0);
        assert!(!c.contains(6) && c.contains(7));
        c.touch(7);
        c.insert(1);
        assert!(c.contains(7) && !c.contains(8), "a touched page is kept");
        c.assert_invariants();
    }

    #[test]
    fn dirty_pages_are_rotated_not_evicted_and_written_back_in_file_order() {
        let mut c = PageCache::after_a_pass(8, 3);
        for p in [5, 6] {
            assert!(c.mark_dirty(p));
        }
        assert!(!c.mark_dirty(5), "already dirty");
        assert!(!c.mark_dirty(0), "not cached");
        c.insert(0);
        c.insert(1);
        c.assert_invariants();
        assert!(c.contains(5) && c.contains(6), "dirty pages stay cached");
        assert!(!c.contains(7) && !c.contains(0) && c.contains(1));
        assert_eq!(c.dirty_pages(), 2);
        assert_eq!(c.next_dirty(6), Some(6));
        assert_eq!(c.next_dirty(7), Some(5), "the flusher wraps to the start");
        c.clean(5);
        c.clean(6);
        assert_eq!(c.next_dirty(0), None);
        c.insert(2);
        c.assert_invariants();
        assert_eq!(c.len(), c.capacity());
    }
}
