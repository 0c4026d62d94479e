//! Huge-page hints for the FTL's large tables.
//!
//! The L2P is read at random, one slot per request. With 4 KiB pages nearly every access
//! also misses the TLB, and inside a virtual machine a TLB miss walks two page tables. Where
//! the kernel leaves transparent huge pages to `madvise` (a common default), the L2P's slabs
//! ask for them. The OOB arrays are not hinted: they are written at each die's write front
//! and read a block at a time, and a huge page per front would cost up to 2 MiB per die and
//! array on a mostly empty terabyte device. A hint only: contents and results never depend
//! on it, and where it is refused nothing changes.

/// Huge page size the hint aligns to.
const HUGE: usize = 2 << 20;

/// Asks the kernel to back the 2 MiB-aligned interior of `table` with huge pages.
pub(crate) fn advise<T>(table: &[T]) {
    advise_bytes(table.as_ptr().cast(), std::mem::size_of_val(table));
}

/// The same for the `len` bytes at `at`, written or not.
pub(crate) fn advise_bytes(at: *const u8, len: usize) {
    let start = at as usize;
    let end = start.saturating_add(len);
    let (lo, hi) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
    if hi <= lo {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: madvise only advises on how to back pages of this process's own mapping (the
    // range lies inside the caller's allocation); MADV_HUGEPAGE never changes their contents.
    unsafe {
        libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
    }
}
