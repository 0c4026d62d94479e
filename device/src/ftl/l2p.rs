//! The logical-to-physical map (L2P), compact enough for terabyte devices.
//!
//! A flat `Vec<u32>` over 64 M logical pages costs 256 MiB even when almost nothing is written,
//! and 1 M random writes touch nearly every one of its OS pages. So the map is cut into chunks
//! of [`CHUNK`] entries that start *sparse* (a sorted vector of `(offset, ppn)`) and turn
//! *dense* (a plain array) once they hold [`DENSIFY_AT`] entries — the point where a dense
//! chunk is the smaller one per mapped entry. Full devices pay 4 bytes per page; sparsely
//! written ones pay ~8 bytes per written page.

use super::zeroed::Zeroed;
use crate::addr::{Lpn, Ppn};

/// Entries per chunk. A dense chunk is one 4 KiB OS page.
pub const CHUNK: usize = 1024;
/// A sparse chunk turns dense at this many entries (its 8-byte entries then cost as much
/// memory as the dense array's 4-byte slots over half the chunk).
pub const DENSIFY_AT: usize = CHUNK / 4;

/// Dense slots store `ppn + 1`; 0 means unmapped.
const UNMAPPED: u32 = 0;

#[derive(Clone, Debug)]
enum Chunk {
    Sparse(Vec<(u16, u32)>),
    /// The chunk's slots: [`CHUNK`] entries at this index of [`Slabs`].
    Dense(u32),
}

/// Chunks per slab: 8 MiB of dense slots, of which the 2 MiB-aligned interior (at least
/// 6 MiB) is hinted to huge pages.
const SLAB_CHUNKS: usize = 2048;

/// Dense chunks' slots, handed out in order from large slabs instead of one 4 KiB allocation
/// each: random lookups then stay within few (huge) pages, where scattered chunks cost a TLB
/// miss each (twice the page walk in a virtual machine). Dense chunks never turn sparse
/// again, so slots are never freed.
#[derive(Clone, Debug, Default)]
struct Slabs {
    slabs: Vec<Zeroed<u32>>,
    used: usize,
}

impl Slabs {
    /// A fresh chunk of unmapped slots, by index.
    fn take(&mut self) -> u32 {
        if self.used == self.slabs.len() * SLAB_CHUNKS {
            // UNMAPPED is 0: a fresh slab is all unmapped slots, backed as chunks fill.
            let slab = Zeroed::new(SLAB_CHUNKS * CHUNK);
            super::huge::advise(&slab);
            self.slabs.push(slab);
        }
        self.used += 1;
        (self.used - 1) as u32
    }

    #[inline]
    fn chunk(&self, i: u32) -> &[u32] {
        let (s, o) = (i as usize / SLAB_CHUNKS, i as usize % SLAB_CHUNKS * CHUNK);
        &self.slabs[s][o..o + CHUNK]
    }

    #[inline]
    fn chunk_mut(&mut self, i: u32) -> &mut [u32] {
        let (s, o) = (i as usize / SLAB_CHUNKS, i as usize % SLAB_CHUNKS * CHUNK);
        &mut self.slabs[s][o..o + CHUNK]
    }

    /// Bytes of slots in use (a partly used slab's untouched rest is never faulted in).
    fn bytes(&self) -> usize {
        self.used * CHUNK * 4
    }
}

#[derive(Clone, Debug)]
pub struct L2p {
    chunks: Vec<Chunk>,
    /// `chunks[c]`'s slab index when it is dense, else [`NOT_DENSE`]: 4 bytes a chunk where a
    /// [`Chunk`] takes 32, so the lookups on the write path (a host write's, and GC's
    /// prefetches ahead of its copies) find a slot's address in cache instead of waiting on
    /// a miss before they can fetch the slot.
    dense_at: Vec<u32>,
    dense: Slabs,
    logical_pages: u64,
    mapped: u64,
}

/// [`L2p::dense_at`] of a sparse chunk.
const NOT_DENSE: u32 = u32::MAX;

impl L2p {
    pub fn new(logical_pages: u64) -> Self {
        let n = logical_pages.div_ceil(CHUNK as u64) as usize;
        L2p {
            chunks: (0..n).map(|_| Chunk::Sparse(Vec::new())).collect(),
            dense_at: vec![NOT_DENSE; n],
            dense: Slabs::default(),
            logical_pages,
            mapped: 0,
        }
    }

    pub fn logical_pages(&self) -> u64 {
        self.logical_pages
    }

    /// Number of mapped logical pages.
    pub fn len(&self) -> u64 {
        self.mapped
    }

    pub fn is_empty(&self) -> bool {
        self.mapped == 0
    }

    #[inline]
    fn split(lpn: Lpn) -> (usize, u16) {
        (
            (lpn.0 / CHUNK as u64) as usize,
            (lpn.0 % CHUNK as u64) as u16,
        )
    }

    #[inline]
    pub fn get(&self, lpn: Lpn) -> Option<Ppn> {
        debug_assert!(lpn.0 < self.logical_pages);
        let (c, off) = Self::split(lpn);
        match self.dense_at[c] {
            NOT_DENSE => match &self.chunks[c] {
                Chunk::Sparse(entries) => entries
                    .binary_search_by_key(&off, |e| e.0)
                    .ok()
                    .map(|i| Ppn(entries[i].1)),
                Chunk::Dense(_) => unreachable!("dense_at names every dense chunk"),
            },
            d => match self.dense.chunk(d)[off as usize] {
                UNMAPPED => None,
                v => Some(Ppn(v - 1)),
            },
        }
    }

    /// Maps `lpn` to `ppn`, returning the previous mapping.
    #[inline]
    pub fn set(&mut self, lpn: Lpn, ppn: Ppn) -> Option<Ppn> {
        debug_assert!(lpn.0 < self.logical_pages);
        debug_assert!(ppn.0 < u32::MAX);
        let (c, off) = Self::split(lpn);
        // The dense case inline, the sparse one out of line: on a full device every set
        // after the first fill is dense, and GC makes several for each host write.
        let old = match self.dense_at[c] {
            NOT_DENSE => self.set_sparse(c, off, ppn),
            d => {
                let slot = &mut self.dense.chunk_mut(d)[off as usize];
                let old = std::mem::replace(slot, ppn.0 + 1);
                (old != UNMAPPED).then(|| Ppn(old - 1))
            }
        };
        if old.is_none() {
            self.mapped += 1;
        }
        old
    }

    /// [`L2p::set`] in a sparse chunk, which turns dense when it has grown enough.
    #[inline(never)]
    fn set_sparse(&mut self, c: usize, off: u16, ppn: Ppn) -> Option<Ppn> {
        let Chunk::Sparse(entries) = &mut self.chunks[c] else {
            unreachable!("set_sparse is called on sparse chunks only");
        };
        match entries.binary_search_by_key(&off, |e| e.0) {
            Ok(i) => Some(Ppn(std::mem::replace(&mut entries[i].1, ppn.0))),
            Err(i) => {
                entries.insert(i, (off, ppn.0));
                if entries.len() >= DENSIFY_AT {
                    self.densify(c);
                }
                None
            }
        }
    }

    /// Unmaps `lpn`, returning the mapping it had.
    pub fn remove(&mut self, lpn: Lpn) -> Option<Ppn> {
        debug_assert!(lpn.0 < self.logical_pages);
        let (c, off) = Self::split(lpn);
        let old = match &mut self.chunks[c] {
            &mut Chunk::Dense(d) => {
                let slot = &mut self.dense.chunk_mut(d)[off as usize];
                let old = std::mem::replace(slot, UNMAPPED);
                (old != UNMAPPED).then(|| Ppn(old - 1))
            }
            Chunk::Sparse(entries) => entries
                .binary_search_by_key(&off, |e| e.0)
                .ok()
                .map(|i| Ppn(entries.remove(i).1)),
        };
        if old.is_some() {
            self.mapped -= 1;
        }
        old
    }

    /// Hints the CPU to fetch `lpn`'s slot into cache. GC migrates hundreds of pages whose L2P
    /// slots are scattered over the table: prefetching a few ahead overlaps those cache misses
    /// instead of paying them one after another (2× faster GC on large devices).
    #[inline]
    pub fn prefetch(&self, lpn: Lpn) {
        let (c, off) = Self::split(lpn);
        if let Some(&d) = self.dense_at.get(c).filter(|&&d| d != NOT_DENSE) {
            let ptr = self.dense.chunk(d).as_ptr().wrapping_add(off as usize);
            #[cfg(target_arch = "x86_64")]
            // SAFETY: prefetching is only a hint; it never faults and reads no memory
            // architecturally. The pointer is in bounds anyway.
            unsafe {
                std::arch::x86_64::_mm_prefetch(ptr as *const i8, std::arch::x86_64::_MM_HINT_T0);
            }
            #[cfg(not(target_arch = "x86_64"))]
            let _ = ptr;
        }
    }

    fn densify(&mut self, c: usize) {
        let d = self.dense.take();
        let slots = self.dense.chunk_mut(d);
        if let Chunk::Sparse(entries) = &self.chunks[c] {
            for &(off, ppn) in entries {
                slots[off as usize] = ppn + 1;
            }
        }
        self.chunks[c] = Chunk::Dense(d);
        self.dense_at[c] = d;
    }

    /// Whether any LPN in `first..first + pages` is mapped. Costs one step per chunk for the
    /// unwritten ones, so probing a mostly-empty terabyte range is cheap.
    pub fn any_mapped(&self, first: Lpn, pages: u64) -> bool {
        let end = first.0.saturating_add(pages).min(self.logical_pages);
        let mut lpn = first.0;
        while lpn < end {
            let (c, off) = Self::split(Lpn(lpn));
            let chunk_end = ((c as u64 + 1) * CHUNK as u64).min(end);
            let hi = (chunk_end - 1 - c as u64 * CHUNK as u64) as u16;
            let hit = match &self.chunks[c] {
                Chunk::Sparse(entries) => entries.iter().any(|&(o, _)| o >= off && o <= hi),
                &Chunk::Dense(d) => self.dense.chunk(d)[off as usize..=hi as usize]
                    .iter()
                    .any(|&v| v != UNMAPPED),
            };
            if hit {
                return true;
            }
            lpn = chunk_end;
        }
        false
    }

    /// All mappings in ascending LPN order.
    pub fn iter(&self) -> impl Iterator<Item = (Lpn, Ppn)> + '_ {
        self.chunks.iter().enumerate().flat_map(|(c, chunk)| {
            let base = (c * CHUNK) as u64;
            let items: Box<dyn Iterator<Item = (Lpn, Ppn)>> = match chunk {
                &Chunk::Dense(d) => Box::new(
                    self.dense
                        .chunk(d)
                        .iter()
                        .enumerate()
                        .filter(|(_, &v)| v != UNMAPPED)
                        .map(move |(i, &v)| (Lpn(base + i as u64), Ppn(v - 1))),
                ),
                Chunk::Sparse(entries) => Box::new(
                    entries
                        .iter()
                        .map(move |&(off, ppn)| (Lpn(base + u64::from(off)), Ppn(ppn))),
                ),
            };
            items
        })
    }

    /// Approximate heap bytes held by the map (for reports and the memory benchmark).
    pub fn heap_bytes(&self) -> usize {
        let directory = self.chunks.capacity() * std::mem::size_of::<Chunk>()
            + self.dense_at.capacity() * std::mem::size_of::<u32>();
        let payload: usize = self
            .chunks
            .iter()
            .map(|c| match c {
                Chunk::Dense(_) => 0,
                Chunk::Sparse(e) => e.capacity() * std::mem::size_of::<(u16, u32)>(),
            })
            .sum();
        directory + payload + self.dense.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn matches_a_btreemap_across_densification() {
        let n = (CHUNK * 3 + 17) as u64;
        let mut l2p = L2p::new(n);
        let mut reference = BTreeMap::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let lpn = Lpn(x % n);
            if step % 5 == 4 {
                assert_eq!(l2p.remove(lpn), reference.remove(&lpn));
            } else {
                assert_eq!(l2p.set(lpn, Ppn(step)), reference.insert(lpn, Ppn(step)));
            }
            assert_eq!(l2p.get(lpn), reference.get(&lpn).copied());
        }
        assert_eq!(l2p.len(), reference.len() as u64);
        assert!(l2p.iter().eq(reference.into_iter()));
        assert!(
            matches!(l2p.chunks[0], Chunk::Dense(_)),
            "busy chunk densified"
        );
    }

    #[test]
    fn sparse_map_is_small() {
        let mut l2p = L2p::new(64 << 20);
        for i in 0..1000u64 {
            l2p.set(Lpn(i * 65_521), Ppn(i as u32));
        }
        // 64 Ki chunks of directory plus 1000 entries, far below the 256 MiB flat array.
        assert!(l2p.heap_bytes() < 4 << 20, "{}", l2p.heap_bytes());
    }
}
