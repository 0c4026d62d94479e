//! LightFS-CSD: what runs in the device (LightFS §III-C3, D, E).
//!
//! - the **metadata cache**: per directory, only what the device needs from its `.ndpmeta`
//!   (ino, length, flags, extents); filled by reading `.ndpmeta` files from flash level by
//!   level, each verified before it is trusted;
//! - the **NDP task dispatcher**: follows an ino list through the cache and returns the
//!   layouts of the target file or of every file in the target directory;
//! - the **metadata locker**: on a write notification, a shadow address table of the file's
//!   physical pages, and a GC-forbid pin on their flash blocks; NDP reads of a locked file go
//!   to those pages, the file's last consistent version;
//! - the **block monitor** and **update trigger**: once every block the host said it would
//!   write has been seen, the cache gets the new layout and the file is unlocked.

use super::super::NdpError;
use super::index::runs_of;
use crate::alloc::Extent;
use crate::ndpmeta::{EntryKind, Layout, NdpMeta};
use csd_device::{BlockId, Device, IoPath, Lpn, Ppn, VirtualTime};
use std::collections::{BTreeMap, BTreeSet};

/// Bytes one cached entry holds in device DRAM: Table I's extents (64), ino (8), length (8)
/// and flags (2).
pub const DEVICE_ENTRY_BYTES: u64 = 64 + 8 + 8 + 2;

/// What the device caches of one `.ndpmeta` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevEntry {
    pub ino: u64,
    pub kind: EntryKind,
    pub length: u64,
    /// A file's data, or a subdirectory's `.ndpmeta`.
    pub layout: Layout,
}

/// Where to read one file from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileData {
    /// Logical extents (the file is not locked).
    Extents(Vec<Extent>),
    /// The shadow address table of a locked file: its consistent version's physical pages.
    Shadow(Vec<Option<Ppn>>),
    /// The index gave up on this file (too many extents): the host sends the layout.
    FromHost,
}

/// A file the dispatcher found.
#[derive(Clone, Debug)]
pub struct Target {
    pub ino: u64,
    pub length: u64,
    pub source: FileData,
}

/// A locked file's consistent version.
#[derive(Clone, Debug)]
struct ShadowTable {
    pages: Vec<Option<Ppn>>,
    pinned: Vec<BlockId>,
    /// Logical blocks the host said it will write, once the periodic updater has run.
    expected: Option<BTreeSet<u64>>,
    new_layout: Option<(u64, Vec<Extent>)>,
}

#[derive(Debug)]
pub struct LightFsCsd {
    /// The root `.ndpmeta`'s location, handed over at initialisation.
    root: (u64, Vec<Extent>),
    root_ino: u64,
    /// Directory ino → its cached entries. The root's stays (pinned) until a restart.
    cache: BTreeMap<u64, Vec<DevEntry>>,
    locked: BTreeMap<u64, ShadowTable>,
    entry_ns: u64,
    block_bytes: u64,
    /// The `.ndpmeta` bytes as last written, by directory: what flash holds. Used only when
    /// the device keeps no payloads (timing-only runs): the reads are still timed on flash,
    /// the bytes come from here.
    written: BTreeMap<u64, Vec<u8>>,
}

/// The device-side outcome of a step: when it finished and how much device DRAM metadata
/// it read from flash.
#[derive(Clone, Copy, Debug)]
pub struct Done {
    pub at: VirtualTime,
    pub index_reads: u32,
}

impl LightFsCsd {
    pub fn new(
        root_ino: u64,
        root: (u64, Vec<Extent>),
        entry_ns: u64,
        block_bytes: u64,
    ) -> LightFsCsd {
        LightFsCsd {
            root,
            root_ino,
            cache: BTreeMap::new(),
            locked: BTreeMap::new(),
            entry_ns,
            block_bytes,
            written: BTreeMap::new(),
        }
    }

    /// The host wrote directory `dir`'s `.ndpmeta` (see `written`).
    pub fn note_written(&mut self, dir: u64, bytes: Vec<u8>) {
        self.written.insert(dir, bytes);
    }

    /// Whether directory `dir`'s entries are in the device's cache.
    pub fn is_cached(&self, dir: u64) -> bool {
        self.cache.contains_key(&dir)
    }

    /// A restart: every cached entry is gone (locks are not: they guard data on flash).
    pub fn drop_cache(&mut self) {
        self.cache.clear();
    }

    /// Cached entries × bytes each.
    pub fn footprint_bytes(&self) -> u64 {
        self.cache.values().map(|d| d.len() as u64).sum::<u64>() * DEVICE_ENTRY_BYTES
    }

    pub fn is_locked(&self, ino: u64) -> bool {
        self.locked.contains_key(&ino)
    }

    /// Caches, level by level, every directory the ino lists of one request pass through.
    /// At each depth the missing `.ndpmeta`s are read from flash together, so a request
    /// over many directories waits for one flash read per level instead of one per
    /// directory: the index "will be read level by level to build the cache" (LightFS
    /// §III-C3), and the dispatcher holds the whole batch. The firmware core parses them as
    /// their reads complete. A list that leaves the index (an unknown ino, a directory whose
    /// index is not kept) is left to [`LightFsCsd::dispatch`] to report.
    pub fn prefetch(
        &mut self,
        device: &mut Device,
        at: VirtualTime,
        lists: &[Vec<u64>],
    ) -> Result<Done, NdpError> {
        let mut done = Done { at, index_reads: 0 };
        let mut t = self.ensure(device, at, self.root_ino, None, &mut done)?;
        // Each list's inos still to follow, and the directory they start in.
        let mut cursors: Vec<(&[u64], u64)> = lists
            .iter()
            .filter(|l| l.len() > 1)
            .map(|l| (&l[1..], self.root_ino))
            .collect();
        while !cursors.is_empty() {
            let mut wanted: BTreeMap<u64, (u64, Vec<Extent>)> = BTreeMap::new();
            let mut next = Vec::new();
            for (rest, dir) in cursors {
                let Some(e) = self
                    .cache
                    .get(&dir)
                    .and_then(|es| es.iter().find(|e| e.ino == rest[0]))
                else {
                    continue;
                };
                let (EntryKind::Dir, Layout::Extents(x)) = (&e.kind, &e.layout) else {
                    continue;
                };
                if !self.cache.contains_key(&e.ino) {
                    wanted.insert(e.ino, (e.length, runs_of(x)));
                }
                if rest.len() > 1 {
                    next.push((&rest[1..], e.ino));
                }
            }
            let mut reads = Vec::with_capacity(wanted.len());
            for (dir, (length, extents)) in wanted {
                reads.push(self.read_index(device, t, dir, length, &extents)?);
            }
            done.index_reads += reads.len() as u32;
            reads.sort_unstable_by_key(|r| r.0);
            for (read, parse_ns) in reads {
                t = t.max(read).after(parse_ns);
            }
            cursors = next;
        }
        done.at = t;
        Ok(done)
    }

    /// Reads and verifies one `.ndpmeta` from flash from `at`, caching the device's fields;
    /// returns when the read completed and the core time to parse it.
    fn read_index(
        &mut self,
        device: &mut Device,
        at: VirtualTime,
        dir: u64,
        length: u64,
        extents: &[Extent],
    ) -> Result<(VirtualTime, u64), NdpError> {
        let ranges = crate::fs::byte_ranges(extents, self.block_bytes, length);
        let mut bytes = vec![0u8; length as usize];
        let keep = device.ftl().keeps_payloads();
        let c = device.read_ranges(
            IoPath::Internal,
            at,
            &ranges,
            keep.then_some(&mut bytes[..]),
        )?;
        if !keep {
            bytes = self.written.get(&dir).cloned().unwrap_or_default();
        }
        let meta = NdpMeta::decode(&bytes).map_err(|source| NdpError::Index {
            path: format!(".ndpmeta of directory ino {dir}"),
            source,
        })?;
        let entries: Vec<DevEntry> = meta
            .entries
            .into_iter()
            .map(|e| DevEntry {
                ino: e.ino,
                kind: e.kind,
                length: e.length,
                layout: e.layout,
            })
            .collect();
        let parse_ns = entries.len() as u64 * self.entry_ns;
        self.cache.insert(dir, entries);
        Ok((c.done, parse_ns))
    }

    /// Makes sure directory `dir`'s entries are cached, given its `.ndpmeta` location.
    fn ensure(
        &mut self,
        device: &mut Device,
        at: VirtualTime,
        dir: u64,
        index: Option<(u64, Vec<Extent>)>,
        done: &mut Done,
    ) -> Result<VirtualTime, NdpError> {
        if self.cache.contains_key(&dir) {
            return Ok(at);
        }
        let (length, extents) = match index {
            Some(i) => i,
            None if dir == self.root_ino => self.root.clone(),
            None => {
                return Err(NdpError::Index {
                    path: format!("directory ino {dir}"),
                    source: crate::ndpmeta::NdpMetaError::BadHeader(
                        "no location known for this directory's .ndpmeta".into(),
                    ),
                })
            }
        };
        done.index_reads += 1;
        let (read, parse_ns) = self.read_index(device, at, dir, length, &extents)?;
        Ok(read.after(parse_ns))
    }

    /// The dispatcher: follows `ino_list` (root first) and returns the target file, or every
    /// file directly in the target directory, with where to read each.
    pub fn dispatch(
        &mut self,
        device: &mut Device,
        at: VirtualTime,
        ino_list: &[u64],
    ) -> Result<(Vec<Target>, Done), NdpError> {
        let mut done = Done { at, index_reads: 0 };
        let mut t = self.ensure(device, at, self.root_ino, None, &mut done)?;
        let mut dir = self.root_ino;
        let mut examined = 0u64;
        let mut found: Option<DevEntry> = None;
        for &ino in ino_list.iter().skip(1) {
            let entries = &self.cache[&dir];
            let pos = entries
                .iter()
                .position(|e| e.ino == ino)
                .ok_or_else(|| NdpError::Index {
                    path: format!("directory ino {dir}"),
                    source: crate::ndpmeta::NdpMetaError::BadHeader(format!(
                        "no entry for ino {ino}: the index is out of date"
                    )),
                })?;
            examined += pos as u64 + 1;
            let e = entries[pos].clone();
            if e.kind == EntryKind::Dir {
                let index = match &e.layout {
                    Layout::Extents(x) => Some((e.length, runs_of(x))),
                    Layout::TooFragmented => None,
                };
                t = self.ensure(device, t, e.ino, index, &mut done)?;
                dir = e.ino;
            }
            found = Some(e);
        }
        let files: Vec<DevEntry> = match found {
            Some(e) if e.kind == EntryKind::File => vec![e],
            _ => {
                let all: Vec<DevEntry> = self.cache[&dir]
                    .iter()
                    .filter(|e| e.kind == EntryKind::File)
                    .cloned()
                    .collect();
                examined += all.len() as u64;
                all
            }
        };
        let targets = files
            .into_iter()
            .map(|e| {
                let source = match (self.locked.get(&e.ino), &e.layout) {
                    (Some(shadow), _) => FileData::Shadow(shadow.pages.clone()),
                    (None, Layout::Extents(x)) => FileData::Extents(runs_of(x)),
                    (None, Layout::TooFragmented) => FileData::FromHost,
                };
                Target {
                    ino: e.ino,
                    length: e.length,
                    source,
                }
            })
            .collect();
        done.at = t.after(examined * self.entry_ns);
        Ok((targets, done))
    }

    /// Write notification (Fig. 6): records the physical pages of file `ino` (found through
    /// `ino_list`) in a shadow address table and pins their flash blocks against GC.
    pub fn lock(
        &mut self,
        device: &mut Device,
        at: VirtualTime,
        ino_list: &[u64],
    ) -> Result<Done, NdpError> {
        let ino = *ino_list.last().expect("non-empty ino list");
        if self.locked.contains_key(&ino) {
            // Still locked from an earlier write session: that snapshot is the consistent one.
            return Ok(Done { at, index_reads: 0 });
        }
        let (targets, mut done) = self.dispatch(device, at, ino_list)?;
        let mut pages = Vec::new();
        if let Some(Target {
            source: FileData::Extents(runs),
            length,
            ..
        }) = targets.into_iter().find(|t| t.ino == ino)
        {
            let blocks = length.div_ceil(self.block_bytes);
            for lba in runs
                .iter()
                .flat_map(|r| r.first.0..r.end())
                .take(blocks as usize)
            {
                pages.push(device.ftl().lookup(Lpn(lba))?);
            }
        }
        let mut pinned: Vec<BlockId> = pages
            .iter()
            .flatten()
            .map(|&p| device.geometry().block_of(p))
            .collect();
        pinned.sort_unstable();
        pinned.dedup();
        for &b in &pinned {
            device.pin_block(b)?;
        }
        done.at = done.at.after(pages.len() as u64 * self.entry_ns);
        self.locked.insert(
            ino,
            ShadowTable {
                pages,
                pinned,
                expected: None,
                new_layout: None,
            },
        );
        Ok(done)
    }

    /// The periodic updater's message (Fig. 7 ⑥): file `ino`'s new length and extents, and
    /// the logical blocks still to be written.
    pub fn expect(&mut self, ino: u64, length: u64, extents: Vec<Extent>, pending: BTreeSet<u64>) {
        if let Some(s) = self.locked.get_mut(&ino) {
            s.expected = Some(pending);
            s.new_layout = Some((length, extents));
        }
    }

    /// The block monitor: notes written blocks; files whose expected blocks have all arrived
    /// are updated in the cache and unlocked (the update trigger). Returns them with their
    /// new layouts.
    pub fn observe_writes(
        &mut self,
        device: &mut Device,
        written: impl IntoIterator<Item = u64>,
    ) -> Result<Vec<(u64, u64, Vec<Extent>)>, NdpError> {
        if self.locked.is_empty() {
            // Nothing waits for a write: the common case between NDP runs, once per event.
            return Ok(Vec::new());
        }
        let written: Vec<u64> = written.into_iter().collect();
        for s in self.locked.values_mut() {
            if let Some(exp) = &mut s.expected {
                for lba in &written {
                    exp.remove(lba);
                }
            }
        }
        let ready: Vec<u64> = self
            .locked
            .iter()
            .filter(|(_, s)| s.expected.as_ref().is_some_and(|e| e.is_empty()))
            .map(|(&ino, _)| ino)
            .collect();
        let mut updated = Vec::new();
        for ino in ready {
            let s = self.locked.remove(&ino).expect("listed");
            for b in s.pinned {
                device.unpin_block(b)?;
            }
            let (length, extents) = s.new_layout.expect("set with expected");
            self.update_entry(ino, length, &extents);
            updated.push((ino, length, extents));
        }
        Ok(updated)
    }

    /// The update trigger's cache write: the entry for `ino`, wherever it is cached.
    pub fn update_entry(&mut self, ino: u64, length: u64, extents: &[Extent]) {
        for entries in self.cache.values_mut() {
            if let Some(e) = entries.iter_mut().find(|e| e.ino == ino) {
                e.length = length;
                e.layout = super::index::layout_of(extents);
            }
        }
    }

    /// The update trigger's write of a whole directory: if `dir` is cached, its entries
    /// become `entries` (one pass over the directory, where an update per entry searched
    /// every cached directory for it).
    pub fn refresh_dir(&mut self, dir: u64, entries: impl Iterator<Item = DevEntry>) {
        if let Some(cached) = self.cache.get_mut(&dir) {
            cached.clear();
            cached.extend(entries);
        }
    }

    /// Directory `dir` was removed: its cached entries and written index go.
    pub fn forget_dir(&mut self, dir: u64) {
        self.cache.remove(&dir);
        self.written.remove(&dir);
    }

    /// The root's `.ndpmeta` moved.
    pub fn set_root(&mut self, length: u64, extents: Vec<Extent>) {
        self.root = (length, extents);
    }
}
