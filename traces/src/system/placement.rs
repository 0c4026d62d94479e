//! Where StorageFS's files lie on the device: each inode's bytes in runs of device pages,
//! handed out by hostfs's extent allocator as the file grows (so an appended file stays
//! contiguous, as in ext4) and freed when it is unlinked.

use csd_device::storagefs::Ino;
use csd_device::Extent;
use csd_hostfs::alloc::{AllocError, ExtentAllocator};
use std::collections::HashMap;

#[derive(Debug)]
pub struct Placement {
    alloc: ExtentAllocator,
    page: u64,
    files: HashMap<Ino, Vec<Extent>>,
}

impl Placement {
    /// Every page of a device of `pages` pages of `page` bytes is free.
    pub fn new(pages: u64, page: u64) -> Placement {
        Placement {
            alloc: ExtentAllocator::new(0, pages),
            page: page.max(1),
            files: HashMap::new(),
        }
    }

    /// The device byte ranges of `len` bytes at `offset` of `ino`, allocating what the file
    /// does not have yet.
    pub fn ranges(
        &mut self,
        ino: Ino,
        offset: u64,
        len: u64,
    ) -> Result<Vec<(u64, u64)>, AllocError> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let end = offset.saturating_add(len);
        let need = end.div_ceil(self.page);
        let runs = self.files.entry(ino).or_default();
        let have: u64 = runs.iter().map(|r| r.pages).sum();
        if need > have {
            let goal = runs.last().map(|r| r.end());
            let more = self.alloc.allocate(need - have, goal)?;
            runs.extend(more);
        }
        // Walk the runs, clipping each to [offset, end).
        let mut out = Vec::new();
        let mut file_at = 0u64;
        for r in runs.iter() {
            let run_bytes = r.pages * self.page;
            let (lo, hi) = (file_at, file_at + run_bytes);
            let (a, b) = (offset.max(lo), end.min(hi));
            if a < b {
                let dev = r.first.0 * self.page + (a - lo);
                match out.last_mut() {
                    Some((s, l)) if *s + *l == dev => *l += b - a,
                    _ => out.push((dev, b - a)),
                }
            }
            file_at = hi;
            if file_at >= end {
                break;
            }
        }
        Ok(out)
    }

    /// Frees an unlinked inode's pages.
    pub fn free(&mut self, ino: Ino) -> Result<(), AllocError> {
        for r in self.files.remove(&ino).unwrap_or_default() {
            self.alloc.free(r)?;
        }
        Ok(())
    }

    #[cfg(test)]
    fn free_pages(&self) -> u64 {
        self.alloc.free_blocks()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_grow_in_place_and_free_their_pages() {
        let mut p = Placement::new(100, 512);
        assert_eq!(p.ranges(Ino(1), 0, 1000).unwrap(), vec![(0, 1000)]);
        assert_eq!(p.ranges(Ino(2), 0, 512).unwrap(), vec![(1024, 512)]);
        // Ino 1 grows past its two pages: its next page is not adjacent any more.
        assert_eq!(
            p.ranges(Ino(1), 1000, 100).unwrap(),
            vec![(1000, 24), (1536, 76)]
        );
        assert_eq!(p.free_pages(), 96);
        p.free(Ino(1)).unwrap();
        assert_eq!(p.free_pages(), 99);
        assert!(p.ranges(Ino(3), 0, 100 * 512).is_err(), "no room");
    }
}
