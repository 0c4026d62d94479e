//! Page payloads for data mode, stored sparsely: only pages holding a non-zero byte cost
//! memory, and a page keeps only what comes before its trailing zeros (a 1 KiB file in a
//! 16 KiB page costs 1 KiB, not 16), so a mostly-empty terabyte device, or a device of many
//! small files, stays cheap while tasks still compute on real bytes. Payloads are keyed by
//! *physical* page, like the flash they model: a stale copy stays readable (through its
//! physical address) until GC erases its block.
//!
//! A page kept at more than half its size takes a slot in a [`Slab`] of 2 MiB instead of an
//! allocation of its own. The slabs are 2 MiB-aligned and hinted to transparent huge pages:
//! a fresh process placing a data set (a sweep point's 25 MB) faults its payloads in a few
//! huge pages at a time instead of 4 KiB at a time (two thirds of a sweep worker's first-point
//! page faults were these), and copies out of them miss the TLB less.

use super::huge;
use crate::addr::Ppn;
use std::alloc::Layout;
use std::collections::HashMap;

/// Bytes of a slab, and its alignment: one huge page.
const SLAB_BYTES: usize = 2 << 20;

#[derive(Debug)]
pub struct PageStore {
    page_size: usize,
    // Hash order is never observed: only point lookups, inserts and removes.
    pages: HashMap<u32, Payload>,
    slabs: Vec<Slab>,
    /// Slots given back, reused before a new one is cut.
    free_slots: Vec<u32>,
    /// Slots cut so far from `slabs` (the next new one is this).
    cut: u32,
}

#[derive(Debug)]
enum Payload {
    /// Slot `slot`, its first `len` bytes.
    Slot { slot: u32, len: u32 },
    /// A short page: its bytes in an allocation of their own.
    Short(Box<[u8]>),
}

impl PageStore {
    pub fn new(page_size: usize) -> Self {
        PageStore {
            page_size,
            pages: HashMap::new(),
            slabs: Vec::new(),
            free_slots: Vec::new(),
            cut: 0,
        }
    }

    /// Slots a slab holds: none when a page does not fit one (every page is then short).
    fn slots_per_slab(&self) -> usize {
        if self.page_size == 0 || !SLAB_BYTES.is_multiple_of(self.page_size) {
            0
        } else {
            SLAB_BYTES / self.page_size
        }
    }

    /// Stores a freshly programmed page up to its last non-zero byte; `None` or all-zero
    /// data stores nothing.
    pub fn put(&mut self, ppn: Ppn, data: Option<&[u8]>) {
        debug_assert!(data.is_none_or(|d| d.len() == self.page_size));
        let old = match data.map(|d| &d[..kept_len(d)]) {
            Some(kept) if !kept.is_empty() => {
                let payload = self.payload_of(kept);
                self.pages.insert(ppn.0, payload)
            }
            _ => self.pages.remove(&ppn.0),
        };
        self.release(old);
    }

    /// `kept` as a payload: a slot when it fills more than half a page.
    fn payload_of(&mut self, kept: &[u8]) -> Payload {
        let per_slab = self.slots_per_slab();
        if per_slab == 0 || kept.len() * 2 <= self.page_size {
            return Payload::Short(kept.into());
        }
        let slot = match self.free_slots.pop() {
            Some(slot) => slot,
            None => {
                if self.cut as usize == self.slabs.len() * per_slab {
                    self.slabs.push(Slab::new());
                }
                self.cut += 1;
                self.cut - 1
            }
        };
        let (slab, at) = self.place(slot);
        self.slabs[slab].write(at, kept);
        Payload::Slot {
            slot,
            len: kept.len() as u32,
        }
    }

    fn release(&mut self, payload: Option<Payload>) {
        if let Some(Payload::Slot { slot, .. }) = payload {
            self.free_slots.push(slot);
        }
    }

    /// Where slot `slot` starts: its slab and the offset in it.
    fn place(&self, slot: u32) -> (usize, usize) {
        let per_slab = self.slots_per_slab();
        (
            slot as usize / per_slab,
            slot as usize % per_slab * self.page_size,
        )
    }

    fn kept(&self, ppn: Ppn) -> &[u8] {
        match self.pages.get(&ppn.0) {
            None => &[],
            Some(Payload::Short(b)) => b,
            Some(&Payload::Slot { slot, len }) => {
                let (slab, at) = self.place(slot);
                self.slabs[slab].read(at, len as usize)
            }
        }
    }

    /// The page's first `out.len()` bytes (at most a page).
    pub fn get(&self, ppn: Ppn, out: &mut [u8]) {
        let kept = self.kept(ppn);
        let n = kept.len().min(out.len());
        out[..n].copy_from_slice(&kept[..n]);
        out[n..].fill(0);
    }

    /// The page's first 8 bytes as a little-endian number (0 for a zero page).
    pub fn tag(&self, ppn: Ppn) -> u64 {
        let mut first = [0u8; 8];
        self.get(ppn, &mut first);
        u64::from_le_bytes(first)
    }

    /// GC copied a page: the payload moves with it (the old copy is erased right after).
    pub fn relocate(&mut self, from: Ppn, to: Ppn) {
        let old = match self.pages.remove(&from.0) {
            Some(p) => self.pages.insert(to.0, p),
            None => self.pages.remove(&to.0),
        };
        self.release(old);
    }

    /// Erase: payloads of the block's pages are gone.
    pub fn drop_range(&mut self, ppns: std::ops::Range<u32>) {
        if self.pages.is_empty() {
            return;
        }
        for p in ppns {
            let old = self.pages.remove(&p);
            self.release(old);
        }
    }

    /// Pages holding a payload (non-zero content).
    pub fn stored_pages(&self) -> usize {
        self.pages.len()
    }
}

impl Clone for PageStore {
    fn clone(&self) -> Self {
        // Slots keep their numbers, so the payloads clone as they are.
        let pages = self
            .pages
            .iter()
            .map(|(&ppn, p)| {
                let p = match p {
                    Payload::Short(b) => Payload::Short(b.clone()),
                    &Payload::Slot { slot, len } => Payload::Slot { slot, len },
                };
                (ppn, p)
            })
            .collect();
        PageStore {
            page_size: self.page_size,
            pages,
            slabs: self.slabs.iter().map(Slab::copy).collect(),
            free_slots: self.free_slots.clone(),
            cut: self.cut,
        }
    }
}

/// 2 MiB of payload slots, 2 MiB-aligned and hinted to transparent huge pages before any
/// is touched. Its bytes start uninitialised (or hold an earlier store's): a slot is read
/// only up to what was written to it.
///
/// On Linux a slab is a mapping of its own, and a dropped one goes to a process-wide pool
/// for the next store: commands that build device after device (a sweep's points) then
/// reuse the same huge pages instead of faulting fresh ones in, as the heap would. Aligned
/// blocks this size from the allocator fragmented its heap: a 16-point sweep peaked at
/// 154 MiB instead of 56.
struct Slab {
    ptr: std::ptr::NonNull<u8>,
    /// A mapping (pooled on drop) rather than an allocation.
    mapped: bool,
}

// SAFETY: a slab owns its bytes exclusively, as a `Box<[u8]>` does.
unsafe impl Send for Slab {}
// SAFETY: shared access only reads, as through `&[u8]`.
unsafe impl Sync for Slab {}

/// Slabs kept for reuse at most: 512 MiB.
const POOL_SLABS: usize = 256;

/// Mapped slabs no store holds, by address.
static POOL: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

impl Slab {
    fn layout() -> Layout {
        Layout::from_size_align(SLAB_BYTES, SLAB_BYTES).expect("a power of two")
    }

    fn new() -> Slab {
        let pooled = POOL.lock().map(|mut p| p.pop()).unwrap_or(None);
        if let Some(ptr) = pooled.and_then(|a| std::ptr::NonNull::new(a as *mut u8)) {
            return Slab { ptr, mapped: true };
        }
        if let Some(ptr) = map_slab() {
            return Slab { ptr, mapped: true };
        }
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(Self::layout()) };
        let Some(ptr) = std::ptr::NonNull::new(ptr) else {
            std::alloc::handle_alloc_error(Self::layout())
        };
        huge::advise_bytes(ptr.as_ptr(), SLAB_BYTES);
        Slab { ptr, mapped: false }
    }

    fn copy(&self) -> Slab {
        let slab = Slab::new();
        // SAFETY: both hold SLAB_BYTES and do not overlap; an untyped copy may copy bytes
        // never written (they stay unwritten in the copy).
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), slab.ptr.as_ptr(), SLAB_BYTES) };
        slab
    }

    /// Writes `bytes` at `at`, within the slab.
    fn write(&mut self, at: usize, bytes: &[u8]) {
        assert!(at <= SLAB_BYTES && bytes.len() <= SLAB_BYTES - at);
        // SAFETY: checked to lie inside the slab, which `&mut self` lets us write.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.as_ptr().add(at), bytes.len())
        };
    }

    /// `len` bytes at `at`, which [`Slab::write`] wrote.
    fn read(&self, at: usize, len: usize) -> &[u8] {
        assert!(at <= SLAB_BYTES && len <= SLAB_BYTES - at);
        // SAFETY: inside the slab, and written: a payload names only the bytes written to
        // its slot.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(at), len) }
    }
}

/// A fresh 2 MiB-aligned private mapping of SLAB_BYTES, hinted to huge pages; `None` where
/// the kernel refuses it (the caller then allocates).
#[cfg(target_os = "linux")]
fn map_slab() -> Option<std::ptr::NonNull<u8>> {
    // Twice the size, then the unaligned ends given back.
    let span = 2 * SLAB_BYTES;
    let start = super::zeroed::map_zeroed(span)?.as_ptr() as usize;
    let aligned = start.next_multiple_of(SLAB_BYTES);
    let (head, tail) = (aligned - start, start + span - (aligned + SLAB_BYTES));
    // SAFETY: both ranges lie inside the mapping just made, outside the slab kept.
    unsafe {
        if head > 0 {
            libc::munmap(start as *mut libc::c_void, head);
        }
        if tail > 0 {
            libc::munmap((aligned + SLAB_BYTES) as *mut libc::c_void, tail);
        }
    }
    huge::advise_bytes(aligned as *const u8, SLAB_BYTES);
    std::ptr::NonNull::new(aligned as *mut u8)
}

#[cfg(not(target_os = "linux"))]
fn map_slab() -> Option<std::ptr::NonNull<u8>> {
    None
}

impl Drop for Slab {
    fn drop(&mut self) {
        if !self.mapped {
            // SAFETY: allocated in `new` with this layout, freed once.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Self::layout()) };
            return;
        }
        let address = self.ptr.as_ptr() as usize;
        if let Ok(mut pool) = POOL.lock() {
            if pool.len() < POOL_SLABS {
                pool.push(address);
                return;
            }
        }
        #[cfg(target_os = "linux")]
        // SAFETY: the mapping was made by `map_slab` with this length; no store holds it.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), SLAB_BYTES);
        }
    }
}

impl std::fmt::Debug for Slab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Slab")
    }
}

/// Bytes of `d` up to its last non-zero one: zero 64-byte blocks are skipped from the end
/// a block at a time (a vectorised OR), then bytes (a byte loop over a small file's page
/// was an eighth of `csd ndp`'s time, and over SIFT's blocks half of `csd repro sift`'s).
pub(crate) fn kept_len(d: &[u8]) -> usize {
    let mut end = d.len();
    while end >= 64 && d[end - 64..end].iter().fold(0u8, |a, &b| a | b) == 0 {
        end -= 64;
    }
    d[..end].iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_reads_back_whole_however_much_of_it_is_kept() {
        let mut s = PageStore::new(64);
        let mut short = [0u8; 64];
        short[..3].copy_from_slice(&[7, 0, 9]);
        let mut tail = [0u8; 64];
        tail[63] = 1;
        s.put(Ppn(1), Some(&short));
        s.put(Ppn(2), Some(&tail));
        s.put(Ppn(3), Some(&[0u8; 64]));
        assert_eq!(s.stored_pages(), 2, "a zero page keeps nothing");
        for (ppn, want) in [(1, short), (2, tail), (3, [0u8; 64]), (4, [0u8; 64])] {
            let mut out = [0xffu8; 64];
            s.get(Ppn(ppn), &mut out);
            assert_eq!(out, want, "page {ppn}");
        }
        assert_eq!(s.tag(Ppn(1)), 0x09_00_07);
        assert_eq!(s.tag(Ppn(2)), 0);
        // A prefix read of a short page, and a page overwritten with zeros.
        let mut head = [0xffu8; 2];
        s.get(Ppn(1), &mut head);
        assert_eq!(head, [7, 0]);
        s.put(Ppn(1), None);
        assert_eq!(s.stored_pages(), 1);
    }

    /// Puts, relocations and erases in any order read back as a plain map of the same
    /// pages does, for short pages and slotted ones, and in a clone; freed slots are reused.
    #[test]
    fn payloads_read_back_through_any_history() {
        use crate::rng::SimRng;
        for page in [64usize, 4096, 16384] {
            let mut rng = SimRng::new(page as u64);
            let mut store = PageStore::new(page);
            let mut model: HashMap<u32, Vec<u8>> = HashMap::new();
            for step in 0..4000u32 {
                let ppn = rng.below(300) as u32;
                match rng.below(10) {
                    0..=5 => {
                        let mut d = vec![0u8; page];
                        let len = rng.below(page as u64 + 1) as usize;
                        for b in &mut d[..len] {
                            *b = rng.below(256) as u8;
                        }
                        store.put(Ppn(ppn), Some(&d));
                        d.truncate(kept_len(&d));
                        if d.is_empty() {
                            model.remove(&ppn);
                        } else {
                            model.insert(ppn, d);
                        }
                    }
                    6..=7 => {
                        let to = rng.below(300) as u32;
                        store.relocate(Ppn(ppn), Ppn(to));
                        match model.remove(&ppn) {
                            Some(d) => model.insert(to, d),
                            None => model.remove(&to),
                        };
                    }
                    _ => {
                        store.drop_range(ppn..ppn + 4);
                        for p in ppn..ppn + 4 {
                            model.remove(&p);
                        }
                    }
                }
                if step % 500 == 499 {
                    let copy = store.clone();
                    for p in 0..310u32 {
                        let mut want = model.get(&p).cloned().unwrap_or_default();
                        want.resize(page, 0);
                        for s in [&store, &copy] {
                            let mut out = vec![0xAAu8; page];
                            s.get(Ppn(p), &mut out);
                            assert_eq!(out, want, "page size {page}, step {step}, ppn {p}");
                        }
                    }
                    assert_eq!(store.stored_pages(), model.len());
                }
            }
            // Slots are reused: never more cut than pages held at once could need.
            let per_slab = store.slots_per_slab().max(1);
            assert!(store.cut as usize <= 310, "{} slots cut", store.cut);
            assert!(store.slabs.len() <= 310usize.div_ceil(per_slab));
        }
    }

    #[test]
    fn kept_len_ends_at_the_last_non_zero_byte() {
        let mut d = vec![0u8; 200];
        assert_eq!(kept_len(&d), 0);
        for at in [0, 1, 63, 64, 65, 127, 128, 135, 136, 199] {
            d.fill(0);
            d[at] = 1;
            assert_eq!(kept_len(&d), at + 1, "non-zero byte at {at}");
            d[0] = 2;
            assert_eq!(kept_len(&d), at + 1, "and one at 0");
        }
    }
}
