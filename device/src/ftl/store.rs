//! Page payloads for data mode, stored sparsely: only pages holding a non-zero byte cost
//! memory, and a page keeps only what comes before its trailing zeros (a 1 KiB file in a
//! 16 KiB page costs 1 KiB, not 16), so a mostly-empty terabyte device, or a device of many
//! small files, stays cheap while tasks still compute on real bytes. Payloads are keyed by
//! *physical* page, like the flash they model: a stale copy stays readable (through its
//! physical address) until GC erases its block.

use crate::addr::Ppn;
use std::collections::HashMap;

#[derive(Clone, Debug)]
pub struct PageStore {
    page_size: usize,
    // Hash order is never observed: only point lookups, inserts and removes.
    pages: HashMap<u32, Box<[u8]>>,
}

impl PageStore {
    pub fn new(page_size: usize) -> Self {
        PageStore {
            page_size,
            pages: HashMap::new(),
        }
    }

    /// Stores a freshly programmed page up to its last non-zero byte; `None` or all-zero
    /// data stores nothing.
    pub fn put(&mut self, ppn: Ppn, data: Option<&[u8]>) {
        debug_assert!(data.is_none_or(|d| d.len() == self.page_size));
        match data.map(|d| &d[..kept_len(d)]) {
            Some(kept) if !kept.is_empty() => {
                self.pages.insert(ppn.0, kept.into());
            }
            _ => {
                self.pages.remove(&ppn.0);
            }
        }
    }

    /// The page's first `out.len()` bytes (at most a page).
    pub fn get(&self, ppn: Ppn, out: &mut [u8]) {
        let kept: &[u8] = self.pages.get(&ppn.0).map_or(&[], |p| p);
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
        match self.pages.remove(&from.0) {
            Some(p) => {
                self.pages.insert(to.0, p);
            }
            None => {
                self.pages.remove(&to.0);
            }
        }
    }

    /// Erase: payloads of the block's pages are gone.
    pub fn drop_range(&mut self, ppns: std::ops::Range<u32>) {
        if self.pages.is_empty() {
            return;
        }
        for p in ppns {
            self.pages.remove(&p);
        }
    }

    /// Pages holding a payload (non-zero content).
    pub fn stored_pages(&self) -> usize {
        self.pages.len()
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
