//! Page payloads for data mode, stored sparsely: only pages holding a non-zero byte cost
//! memory, so a mostly-empty terabyte device stays cheap while tasks still compute on real
//! bytes. Payloads are keyed by *physical* page, like the flash they model: a stale copy stays
//! readable (through its physical address) until GC erases its block.

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

    /// Stores a freshly programmed page; `None` or all-zero data stores nothing.
    pub fn put(&mut self, ppn: Ppn, data: Option<&[u8]>) {
        match data {
            Some(d) if d.iter().any(|&b| b != 0) => {
                debug_assert_eq!(d.len(), self.page_size);
                self.pages.insert(ppn.0, d.into());
            }
            _ => {
                self.pages.remove(&ppn.0);
            }
        }
    }

    pub fn get(&self, ppn: Ppn, out: &mut [u8]) {
        match self.pages.get(&ppn.0) {
            Some(p) => out.copy_from_slice(&p[..out.len()]),
            None => out.fill(0),
        }
    }

    /// The page's first 8 bytes as a little-endian number (0 for a zero page).
    pub fn tag(&self, ppn: Ppn) -> u64 {
        self.pages
            .get(&ppn.0)
            .and_then(|p| p.get(..8))
            .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
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
