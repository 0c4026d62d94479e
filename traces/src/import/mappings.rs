//! Shared writable mappings of files (`mmap` with `MAP_SHARED` and `PROT_WRITE`), per
//! address space.
//!
//! A program's stores through such a mapping make no system call, so strace cannot show
//! them; the kernel writes the dirty pages back to the file. Linkers (lld, gold, mold, the
//! one rustc runs) size their output with `ftruncate`, map it and store every byte, and
//! SQLite's WAL index lives in a mapped `-shm` file. What such a program wrote is taken to be
//! every page of the range a mapping releases or syncs: a `munmap` or `msync` of it, or the
//! end of its address space (the last exit, or an `execve`). That is an upper bound (the
//! stores strace cannot see may have touched fewer pages, and a range synced and then
//! unmapped counts twice), and exact for the linkers' pattern.

use std::collections::{BTreeMap, HashMap};

/// Mappings an address space may hold: a bound on memory whatever a trace does (Linux's
/// default `vm.max_map_count` is 65,530 per process, of every kind).
const MAX_MAPPINGS: usize = 1 << 16;

/// `len` bytes of the file at `path` from offset `off`: what a mapping maps, and what it
/// released or synced (each page taken as stored).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    pub path: String,
    pub off: u64,
    pub len: u64,
}

/// Every address space's shared writable mappings of files, by start address.
#[derive(Default)]
pub struct Mappings {
    spaces: HashMap<u32, BTreeMap<u64, Written>>,
}

impl Mappings {
    /// `space` maps `len` bytes of `path` from file offset `off` at `addr`. A mapping made
    /// over part of another replaces that part (`MAP_FIXED`), which is then released
    /// unwritten: the kernel keeps its dirty pages in the page cache, and the range is
    /// counted when the new mapping goes.
    pub fn map(&mut self, space: u32, addr: u64, len: u64, path: String, off: u64) -> bool {
        let Some(end) = addr.checked_add(len).filter(|_| len > 0) else {
            return false;
        };
        let maps = self.spaces.entry(space).or_default();
        cut(maps, addr, end);
        if maps.len() >= MAX_MAPPINGS {
            return false;
        }
        maps.insert(addr, Written { path, off, len });
        true
    }

    /// `munmap(addr, len)`: the parts of `space`'s mappings in the range are written and
    /// gone; what lies outside it stays mapped.
    pub fn unmap(&mut self, space: u32, addr: u64, len: u64) -> Vec<Written> {
        let Some(maps) = self.spaces.get_mut(&space) else {
            return Vec::new();
        };
        let end = addr.saturating_add(len);
        let written = overlaps(maps, addr, end);
        cut(maps, addr, end);
        written
    }

    /// `msync(addr, len)`: the parts of `space`'s mappings in the range are written; they
    /// stay mapped.
    pub fn sync(&self, space: u32, addr: u64, len: u64) -> Vec<Written> {
        self.spaces.get(&space).map_or_else(Vec::new, |maps| {
            overlaps(maps, addr, addr.saturating_add(len))
        })
    }

    /// The address space is gone (its last exit, or an `execve`): every mapping it held is
    /// written.
    pub fn drop_space(&mut self, space: u32) -> Vec<Written> {
        let maps = self.spaces.remove(&space).unwrap_or_default();
        maps.into_values().collect()
    }

    /// `from` was renamed to `to`: mappings of it, or of a file below it, follow.
    pub fn rename(&mut self, from: &str, to: &str) {
        for m in self.spaces.values_mut().flat_map(|maps| maps.values_mut()) {
            if let Some(rest) = m.path.strip_prefix(from) {
                if rest.is_empty() || rest.starts_with('/') {
                    m.path = format!("{to}{rest}");
                }
            }
        }
    }

    /// `path` was unlinked: a file with no name left has its dirty pages dropped unwritten
    /// when its last user goes, so its mappings write nothing. (A file with a second hard
    /// link would still be written; the trace's replay of such a write would name the gone
    /// name, so it is dropped as well.)
    pub fn unlink(&mut self, path: &str) {
        for maps in self.spaces.values_mut() {
            maps.retain(|_, m| m.path != path);
        }
    }
}

/// The parts of `maps` in `addr..end`, as file ranges.
fn overlaps(maps: &BTreeMap<u64, Written>, addr: u64, end: u64) -> Vec<Written> {
    let mut out = Vec::new();
    // A mapping starting before `addr` may reach into the range.
    let first = maps.range(..addr).next_back().map_or(addr, |(&a, _)| a);
    for (&start, m) in maps.range(first..end) {
        let (from, to) = (start.max(addr), (start + m.len).min(end));
        if from < to {
            out.push(Written {
                path: m.path.clone(),
                off: m.off.saturating_add(from - start),
                len: to - from,
            });
        }
    }
    out
}

/// Removes `addr..end` from `maps`, keeping what lies on either side of it.
fn cut(maps: &mut BTreeMap<u64, Written>, addr: u64, end: u64) {
    let first = maps.range(..addr).next_back().map_or(addr, |(&a, _)| a);
    let hit: Vec<u64> = maps
        .range(first..end)
        .filter(|(&start, m)| start + m.len > addr)
        .map(|(&start, _)| start)
        .collect();
    for start in hit {
        let m = maps.remove(&start).expect("listed above");
        let stop = start + m.len;
        if start < addr {
            let before = Written {
                len: addr - start,
                ..m.clone()
            };
            maps.insert(start, before);
        }
        if stop > end {
            let after = Written {
                off: m.off.saturating_add(end - start),
                len: stop - end,
                path: m.path,
            };
            maps.insert(end, after);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(path: &str, off: u64, len: u64) -> Written {
        Written {
            path: path.into(),
            off,
            len,
        }
    }

    #[test]
    fn an_unmap_writes_the_part_it_releases_and_keeps_the_rest() {
        let mut m = Mappings::default();
        assert!(m.map(1, 0x1000, 0x4000, "/f".into(), 8192));
        assert_eq!(
            m.unmap(1, 0x2000, 0x1000),
            vec![w("/f", 8192 + 0x1000, 0x1000)]
        );
        // The two sides are still mapped, at their own file offsets.
        assert_eq!(
            m.sync(1, 0, u64::MAX),
            vec![w("/f", 8192, 0x1000), w("/f", 8192 + 0x2000, 0x2000)]
        );
        assert_eq!(m.unmap(1, 0x2000, 0x1000), vec![]);
        assert_eq!(m.drop_space(1).len(), 2);
        assert_eq!(m.drop_space(1), vec![]);
    }

    #[test]
    fn a_mapping_follows_a_rename_and_an_unlink_drops_it() {
        let mut m = Mappings::default();
        m.map(1, 0x1000, 0x1000, "/d/a.tmp".into(), 0);
        m.map(2, 0x1000, 0x1000, "/d/b".into(), 0);
        m.rename("/d/a.tmp", "/d/a");
        m.rename("/d", "/e");
        assert_eq!(m.unmap(1, 0x1000, 0x1000), vec![w("/e/a", 0, 0x1000)]);
        m.unlink("/e/b");
        assert_eq!(m.drop_space(2), vec![]);
    }

    #[test]
    fn a_fixed_mapping_over_another_replaces_that_part() {
        let mut m = Mappings::default();
        m.map(1, 0x1000, 0x3000, "/a".into(), 0);
        m.map(1, 0x2000, 0x1000, "/b".into(), 0);
        // In address order.
        assert_eq!(
            m.drop_space(1),
            vec![
                w("/a", 0, 0x1000),
                w("/b", 0, 0x1000),
                w("/a", 0x2000, 0x1000)
            ]
        );
    }

    #[test]
    fn ranges_that_overflow_or_are_empty_are_refused() {
        let mut m = Mappings::default();
        assert!(!m.map(1, u64::MAX - 10, 100, "/a".into(), 0));
        assert!(!m.map(1, 0x1000, 0, "/a".into(), 0));
        assert_eq!(m.unmap(1, u64::MAX - 10, u64::MAX), vec![]);
    }
}
