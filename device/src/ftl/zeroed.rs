//! Zero-initialised tables that cost memory only where they are written.
//!
//! The FTL's per-page tables (OOB records, valid and delta bitmaps) and the L2P's slabs are
//! sized for the whole device: hundreds of MiB for a terabyte, of which a short run touches
//! a few pages. The kernel hands out anonymous mappings as shared zero pages and backs a page
//! only when it is written, so a table mapped this way costs nothing until used.
//!
//! `vec![0; n]` gets that only while the allocator maps large blocks afresh. Commands that
//! build one device after another keep freed memory in glibc's heap instead
//! (`csd`'s `memory::keep_freed_memory`), and there `calloc` must clear a recycled block
//! itself: every page of every table written with zeros, and faulted in first on a fresh
//! process. On a sweep's NDP point (a 1 TiB `cosmos-plus` device, 1,600 pages written) that
//! was 32 MiB cleared per device and a third of a worker's first-point page faults. So large
//! tables are mapped here directly, whatever the allocator does.

use std::ops::{Deref, DerefMut};

/// Element types whose all-zero bit pattern is a valid value.
///
/// # Safety
/// An implementation promises that: a table starts as zeroed memory read as `T`s.
pub(crate) unsafe trait Zeroable: Copy {}
// SAFETY: every bit pattern is an integer.
unsafe impl Zeroable for u32 {}
// SAFETY: as above.
unsafe impl Zeroable for u64 {}

/// Tables smaller than this come from the allocator: a mapping costs a system call and at
/// least a page.
const MAP_AT_BYTES: usize = 1 << 20;

/// A fixed-length table of `T`, all zeros when made.
///
/// Holds its elements as raw parts whichever way they were allocated, so indexing costs
/// what a `Box<[T]>`'s does: no branch on the FTL's per-page paths.
pub(crate) struct Zeroed<T: Zeroable> {
    ptr: std::ptr::NonNull<T>,
    len: usize,
    /// A mapping of our own (unmapped on drop) rather than a leaked `Box<[T]>`.
    mapped: bool,
}

// SAFETY: the table owns its elements exclusively, as a `Box<[T]>` does.
unsafe impl<T: Zeroable + Send> Send for Zeroed<T> {}
// SAFETY: shared access only reads, as through `&[T]`.
unsafe impl<T: Zeroable + Sync> Sync for Zeroed<T> {}

/// A table the process could not have: the bytes it needed (`None`: more than an address
/// holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TooLarge(pub Option<usize>);

impl<T: Zeroable> Zeroed<T> {
    /// `len` zeros; out of memory is fatal, as for a `Vec` (for tables of a fixed size).
    pub fn new(len: usize) -> Zeroed<T> {
        Zeroed::try_new(len).unwrap_or_else(|_| {
            std::alloc::handle_alloc_error(
                std::alloc::Layout::array::<T>(len).unwrap_or(std::alloc::Layout::new::<T>()),
            )
        })
    }

    /// `len` zeros, or the bytes that could not be had: for tables whose size a profile
    /// chose, which must be refused with an error rather than abort the process.
    pub fn try_new(len: usize) -> Result<Zeroed<T>, TooLarge> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or(TooLarge(None))?;
        #[cfg(target_os = "linux")]
        if bytes >= MAP_AT_BYTES {
            if let Some(ptr) = map_zeroed(bytes) {
                return Ok(Zeroed {
                    ptr: ptr.cast(),
                    len,
                    mapped: true,
                });
            }
        }
        let mut v = Vec::new();
        v.try_reserve_exact(len)
            .map_err(|_| TooLarge(Some(bytes)))?;
        v.resize(len, zero::<T>());
        let ptr = std::ptr::NonNull::from(Box::leak(v.into_boxed_slice())).cast();
        Ok(Zeroed {
            ptr,
            len,
            mapped: false,
        })
    }
}

/// The all-zero `T`.
fn zero<T: Zeroable>() -> T {
    // SAFETY: `Zeroable` is implemented only for types valid at all-zero bits.
    unsafe { std::mem::zeroed() }
}

/// A private anonymous mapping of `bytes`, or `None` if the kernel refuses it (the caller
/// then allocates as usual).
#[cfg(target_os = "linux")]
pub(super) fn map_zeroed(bytes: usize) -> Option<std::ptr::NonNull<u8>> {
    // SAFETY: a fresh anonymous mapping aliases nothing; the kernel picks the address.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return None;
    }
    std::ptr::NonNull::new(ptr.cast())
}

impl<T: Zeroable> Deref for Zeroed<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised (zero or written) `T`s, aligned (a page, or
        // a `Box<[T]>`), owned by `self` and living as long as it.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> DerefMut for Zeroed<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> Drop for Zeroed<T> {
    fn drop(&mut self) {
        if !self.mapped {
            // SAFETY: `ptr` and `len` came from `Box::leak` of a `Box<[T]>` in `new`.
            drop(unsafe {
                Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                    self.ptr.as_ptr(),
                    self.len,
                ))
            });
            return;
        }
        #[cfg(target_os = "linux")]
        // SAFETY: the mapping was made in `new` with this length and is unmapped once.
        unsafe {
            libc::munmap(
                self.ptr.as_ptr().cast(),
                self.len * std::mem::size_of::<T>(),
            );
        }
    }
}

/// A copy comes from the allocator, as a `Vec`'s would: its every page is written anyway, and
/// a command that clones devices one after another (`csd txbench`'s grid) reuses the heap's
/// pages where a fresh mapping would fault each one in again (3.4× slower, measured).
impl<T: Zeroable> Clone for Zeroed<T> {
    fn clone(&self) -> Self {
        let copy: Box<[T]> = (**self).into();
        let len = copy.len();
        Zeroed {
            ptr: std::ptr::NonNull::from(Box::leak(copy)).cast(),
            len,
            mapped: false,
        }
    }
}

impl<T: Zeroable + std::fmt::Debug> std::fmt::Debug for Zeroed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A table is millions of entries: its size says enough.
        write!(f, "Zeroed[{}; {}]", std::any::type_name::<T>(), self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_mapped_tables_start_zero_and_keep_what_is_written() {
        for len in [0usize, 3, MAP_AT_BYTES / 8 + 5] {
            let mut t: Zeroed<u64> = Zeroed::new(len);
            assert_eq!(t.len(), len);
            assert!(t.iter().all(|&v| v == 0));
            if len > 0 {
                t[len - 1] = 7;
                t[0] = 9;
                let c = t.clone();
                assert_eq!((c[0], c[len - 1]), (9, 7));
                assert!(c[1..len - 1].iter().all(|&v| v == 0));
            }
        }
    }
}
