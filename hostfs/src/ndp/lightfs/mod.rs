//! LightFS (the paper's design): a `.ndpmeta` index per directory shared by host and device,
//! one request per NDP operation carrying an ino list, batch layout retrieval in the device,
//! and the metadata locker + update synchronizer that keep NDP reads consistent with files
//! being written through the host's page cache.
//!
//! LightFS-Host lives in this module: its metadata cache (names, inos, permissions: only what
//! path → ino-list conversion and permission checks need), write notifications on opens for
//! writing, the unsync list and the periodic updater, and the rewriting of `.ndpmeta` files
//! up the tree. A close changes the index in memory only; its `.ndpmeta` is written by the
//! periodic updater (§III-E), or sooner when the device is about to read it from flash.
//! LightFS-CSD is [`csd`]; the index format is [`crate::ndpmeta`].

pub mod csd;
pub mod index;

use self::csd::{DevEntry, FileData, LightFsCsd, Target};
use self::index::{build_tree, write_index, DirIndex, Durability};
use super::cpu::CorePool;
use super::{
    BytesStamp, DesignKind, FileOutcome, Footprint, NdpCompute, NdpError, NdpOutcome, NdpRequest,
    OffloadDesign, Stages, NDPMETA_NAME,
};
use crate::alloc::Extent;
use crate::fs::{byte_ranges, Fd, FsError, HostFs, Link, OpenOptions};
use crate::namespace::{parent_dir, Ino};
use crate::ndpmeta::{EntryKind, Layout, NdpMeta};
use crate::perms::{Access, Cred, Perms};
use csd_device::{IoPath, LinkDirection, VirtualTime};
use std::collections::{BTreeMap, BTreeSet};

/// How often LightFS-Host's periodic updater runs `sync` on closed files. The paper gives no
/// period; this is the kernel flusher's wake-up interval.
pub const SYNC_INTERVAL_NS: u64 = 5_000_000_000;

/// Bytes one host cache entry holds: the 32-byte name field (plus any longer name), ino (8),
/// flags (2), and the entry's permissions (8) only when the directory's differ.
const HOST_ENTRY_BYTES: u64 = 32 + 8 + 2;
/// Per cached directory: aggregated uid/gid/mode (10), file count (4), the directory's ino (8).
const HOST_DIR_BYTES: u64 = 10 + 4 + 8;

#[derive(Clone, Debug)]
struct HostEntry {
    name: String,
    ino: u64,
    kind: EntryKind,
    perms: Perms,
    too_fragmented: bool,
}

#[derive(Clone, Debug)]
struct HostDir {
    path: String,
    aggregated: Option<Perms>,
    entries: Vec<HostEntry>,
}

/// A file written since its last synchronisation.
#[derive(Clone, Debug)]
struct Unsync {
    dir: Ino,
    /// The directory's path (it may not be indexed yet).
    dir_path: String,
    closed: bool,
    /// Not in the index yet (created during the session).
    new: bool,
}

struct State {
    root_path: String,
    root: Ino,
    /// Each indexed directory's `.ndpmeta`, as the host last wrote it.
    indexes: BTreeMap<Ino, DirIndex>,
    host: BTreeMap<u64, HostDir>,
    csd: LightFsCsd,
    unsync: BTreeMap<Ino, Unsync>,
    /// Directories whose index changed in memory since its `.ndpmeta` was written (dir →
    /// path): the periodic updater writes each once (§III-E), not every close.
    pending: BTreeMap<Ino, String>,
    /// Indexed directories whose entries changed since both caches last took them: they are
    /// rebuilt once, when a cache is next read ([`State::settle`]), not on every change.
    stale: BTreeSet<Ino>,
    last_sync: VirtualTime,
    who: Cred,
}

#[derive(Default)]
pub struct LightFs {
    state: Option<State>,
}

/// What the host's resolution of a request produced.
struct Resolved {
    ino_list: Vec<u64>,
    files: Vec<(String, HostEntry)>,
}

/// Where [`State::walk`] ended.
enum Walk {
    Found(Resolved),
    /// Only the last component is missing: the ino list of the directory it would be in.
    MissingLast(Vec<u64>),
}

impl State {
    /// The host cache's view of `dir`, read from its `.ndpmeta` on flash on a miss.
    /// LightFS-Host runs on a user-space NVMe driver (UNVMe, §IV-A) and knows where each
    /// index lives (the root's from initialisation, the others from their parent's entry), so
    /// it reads the blocks directly instead of looking the file up through the kernel.
    fn host_dir(&mut self, fs: &mut HostFs, dir: u64) -> Result<&HostDir, NdpError> {
        if !self.host.contains_key(&dir) {
            let at = fs.clock();
            let (done, view) = self.read_host_index(fs, dir, at)?;
            fs.advance_to(done);
            self.host.insert(dir, view);
        }
        Ok(&self.host[&dir])
    }

    /// Reads directory `dir`'s `.ndpmeta` from `at` without waiting for it: when the read
    /// completes, and the host cache's view of it.
    fn read_host_index(
        &self,
        fs: &mut HostFs,
        dir: u64,
        at: VirtualTime,
    ) -> Result<(VirtualTime, HostDir), NdpError> {
        let index = self
            .indexes
            .get(&Ino(dir as u32))
            .ok_or(NdpError::NotInitialised { design: "lightfs" })?;
        let bs = fs.namespace().layout().block_bytes;
        let ranges = byte_ranges(&index.extents, bs, index.bytes);
        let mut bytes = vec![0u8; index.bytes as usize];
        let keep = fs.device().ftl().keeps_payloads();
        let c = fs.device_mut().read_ranges(
            IoPath::Host,
            at,
            &ranges,
            keep.then_some(&mut bytes[..]),
        )?;
        if !keep {
            // Timing-only device: the read is timed, the bytes are the ones written.
            bytes = index.encoded.clone();
        }
        let meta_path = format!("{}/{NDPMETA_NAME}", index.path.trim_end_matches('/'));
        let meta = NdpMeta::decode(&bytes).map_err(|source| NdpError::Index {
            path: meta_path,
            source,
        })?;
        Ok((c.done, host_view(index.path.clone(), &meta)))
    }

    /// What LightFS loads when it starts: LightFS-Host reads every `.ndpmeta` into its
    /// metadata cache, all reads in flight at once ("in subsequent system startups, LightFS
    /// read the .ndpmeta file from the underlying file system to build the metadata cache",
    /// §III-C), and LightFS-CSD reads the root's (§III-F); the device's other directories are
    /// read level by level on a miss.
    fn startup(&mut self, fs: &mut HostFs) -> Result<(), NdpError> {
        let at = fs.clock();
        let mut end = at;
        let dirs: Vec<u64> = self.indexes.keys().map(|d| u64::from(d.0)).collect();
        for dir in dirs {
            let (done, view) = self.read_host_index(fs, dir, at)?;
            end = end.max(done);
            self.host.insert(dir, view);
        }
        fs.advance_to(end);
        let t = fs.clock();
        let root = u64::from(self.root.0);
        let done = self.csd.dispatch(fs.device_mut(), t, &[root])?;
        fs.advance_to(done.1.at);
        Ok(())
    }

    /// `path` below the LightFS root (`""` for the root itself), if it is in the tree.
    fn relative<'p>(&self, path: &'p str) -> Option<&'p str> {
        path.strip_prefix(self.root_path.trim_end_matches('/'))
            .filter(|r| r.is_empty() || r.starts_with('/'))
    }

    /// Path → ino list and the files it covers, from the host cache; checks permissions
    /// (the directory's aggregated permissions once when it has them, else file by file).
    fn resolve(&mut self, fs: &mut HostFs, path: &str, who: Cred) -> Result<Resolved, NdpError> {
        match self.walk(fs, path, who, false)? {
            Walk::Found(r) => Ok(r),
            Walk::MissingLast(_) => unreachable!("a walk that may not stop short did"),
        }
    }

    /// [`State::resolve`], or, when only the last component is missing (`or_parent`), the
    /// ino list of the directory it would be in: an open that creates a file locks that
    /// directory, and walking the path twice, once to miss and once for the parent, was a
    /// visible share of a replay.
    // Long: the host cache's walk and the two permission paths (aggregated, per file) in one
    // pass over the directory.
    fn walk(
        &mut self,
        fs: &mut HostFs,
        path: &str,
        who: Cred,
        or_parent: bool,
    ) -> Result<Walk, NdpError> {
        self.settle(fs)?;
        let rel = self.relative(path).ok_or_else(|| {
            NdpError::Fs(FsError::Namespace(crate::namespace::NsError::NotFound(
                format!("{path} (outside the LightFS tree {})", self.root_path),
            )))
        })?;
        let component_ns = fs.costs().index_lookup_ns;
        let mut ino_list = vec![u64::from(self.root.0)];
        let mut dir = u64::from(self.root.0);
        // The last entry walked: the directory it is in, its index there, its kind.
        let mut target: Option<(u64, usize, EntryKind)> = None;
        let mut cpu_ns = 0;
        let mut names = rel.split('/').filter(|c| !c.is_empty()).peekable();
        while let Some(name) = names.next() {
            if target.is_some_and(|(_, _, kind)| kind == EntryKind::File) {
                return Err(FsError::Namespace(crate::namespace::NsError::NotADirectory(
                    path.to_string(),
                ))
                .into());
            }
            let d = self.host_dir(fs, dir)?;
            let Some(k) = d.entries.iter().position(|e| e.name == name) else {
                // The directory is the last one walked, as the walk of the parent's path
                // finds it (a path ending in '/' has no parent apart from itself).
                if or_parent && names.peek().is_none() && !path.ends_with('/') {
                    fs.advance_to(fs.clock().after(cpu_ns));
                    return Ok(Walk::MissingLast(ino_list));
                }
                return Err(NdpError::Fs(FsError::Namespace(
                    crate::namespace::NsError::NotFound(path.to_string()),
                )));
            };
            let e = &d.entries[k];
            if e.kind == EntryKind::Dir && !e.perms.allows(who, Access::Execute) {
                return Err(NdpError::PermissionDenied {
                    path: path.to_string(),
                    uid: who.uid,
                    aggregated: false,
                });
            }
            cpu_ns += component_ns;
            ino_list.push(e.ino);
            target = Some((dir, k, e.kind));
            if e.kind == EntryKind::Dir {
                dir = e.ino;
            }
        }
        let files = match target {
            Some((parent, k, EntryKind::File)) => {
                let e = self.host[&parent].entries[k].clone();
                if !e.perms.allows(who, Access::Read) {
                    return Err(NdpError::PermissionDenied {
                        path: path.to_string(),
                        uid: who.uid,
                        aggregated: false,
                    });
                }
                vec![(path.to_string(), e)]
            }
            _ => {
                let d = self.host_dir(fs, dir)?.clone();
                let base = d.path.trim_end_matches('/').to_string();
                let files: Vec<(String, HostEntry)> = d
                    .entries
                    .into_iter()
                    .filter(|e| e.kind == EntryKind::File)
                    .map(|e| (format!("{base}/{}", e.name), e))
                    .collect();
                match d.aggregated {
                    // One check for the whole directory (LightFS §III-B1).
                    Some(p) => {
                        cpu_ns += component_ns;
                        if !p.allows(who, Access::Read) {
                            return Err(NdpError::PermissionDenied {
                                path: path.to_string(),
                                uid: who.uid,
                                aggregated: true,
                            });
                        }
                    }
                    None => {
                        cpu_ns += component_ns * files.len() as u64;
                        if let Some((p, _)) = files
                            .iter()
                            .find(|(_, e)| !e.perms.allows(who, Access::Read))
                        {
                            return Err(NdpError::PermissionDenied {
                                path: p.clone(),
                                uid: who.uid,
                                aggregated: false,
                            });
                        }
                    }
                }
                files
            }
        };
        fs.advance_to(fs.clock().after(cpu_ns));
        Ok(Walk::Found(Resolved { ino_list, files }))
    }

    /// The block monitor sees what reached the flash; the update trigger unlocks and updates
    /// finished files; the host then rewrites the `.ndpmeta` files up the tree.
    fn monitor(&mut self, fs: &mut HostFs) -> Result<(), NdpError> {
        // Even with nothing new written, a file whose expected blocks had all arrived before
        // the updater's message is ready now.
        let written = fs.take_written();
        let updated = self.csd.observe_writes(fs.device_mut(), written)?;
        let mut dirs = BTreeMap::new();
        for (ino, _, _) in updated {
            if let Some(u) = self.unsync.remove(&Ino(ino as u32)) {
                dirs.insert(u.dir, u.dir_path);
            }
        }
        for (dir, path) in dirs {
            self.refresh(fs, dir, &path)?;
        }
        Ok(())
    }

    /// The host's in-memory update of `dir`'s index (§III-B: about 5 µs while the file is
    /// in memory): both caches take the new entries before they are next read, and the
    /// `.ndpmeta` waits for the periodic updater. A directory not indexed yet gets its
    /// `.ndpmeta` now, linked into its parent's: until then neither the host nor the device
    /// can find it.
    fn refresh(&mut self, fs: &mut HostFs, dir: Ino, path: &str) -> Result<(), NdpError> {
        if !self.indexes.contains_key(&dir) {
            return self.index_dir(fs, dir, path);
        }
        self.stale.insert(dir);
        self.pending.insert(dir, path.to_string());
        Ok(())
    }

    /// Rebuilds both caches of every stale directory from the namespace. Every change to a
    /// directory marks it; this runs before a cache is read, so a storm of renames or unlinks
    /// in one large directory costs one rebuild, not one per change (each is linear in the
    /// directory). What the caches then hold is what a rebuild after the last change gave.
    fn settle(&mut self, fs: &HostFs) -> Result<(), NdpError> {
        while let Some(dir) = self.stale.pop_first() {
            let Some(path) = self.indexes.get(&dir).map(|i| i.path.clone()) else {
                continue;
            };
            let indexes = &self.indexes;
            let built = index::build_index(fs, dir, &path, |ino| {
                indexes.get(&ino).map(|b| (b.extents.clone(), b.bytes))
            })?;
            self.refresh_caches(dir, path, &built.meta);
        }
        Ok(())
    }

    /// Directory `dir`, the parent of `path`, lost or gained an entry: its index is refreshed
    /// in memory, if LightFS indexes it.
    fn parent_changed(&mut self, fs: &mut HostFs, dir: Ino, path: &str) -> Result<(), NdpError> {
        if self.indexes.contains_key(&dir) {
            self.refresh(fs, dir, parent_dir(path).unwrap_or("/"))?;
        }
        Ok(())
    }

    /// Directory `dir` is gone: LightFS forgets its index and caches.
    fn forget(&mut self, dir: Ino) {
        self.indexes.remove(&dir);
        self.stale.remove(&dir);
        self.host.remove(&u64::from(dir.0));
        self.pending.remove(&dir);
        self.csd.forget_dir(u64::from(dir.0));
    }

    /// `ino` moved from `from` to `to`, into directory `dir`: a file waiting for its sync is
    /// indexed in its new directory; a directory's index, and every index below it, live
    /// under the new path.
    fn moved(&mut self, fs: &HostFs, ino: Ino, dir: Ino, from: &str, to: &str) {
        if let Some(u) = self.unsync.get_mut(&ino) {
            u.dir = dir;
            u.dir_path = parent_dir(to).unwrap_or("/").to_string();
        }
        if !fs.namespace().inode(ino).is_some_and(|i| i.is_dir()) {
            return;
        }
        let from = from.trim_end_matches('/');
        let to = to.trim_end_matches('/');
        let renamed = |p: &str| -> Option<String> {
            let rest = p.strip_prefix(from)?;
            (rest.is_empty() || rest.starts_with('/')).then(|| format!("{to}{rest}"))
        };
        for index in self.indexes.values_mut() {
            if let Some(p) = renamed(&index.path) {
                index.path = p;
            }
        }
        for dir in self.host.values_mut() {
            if let Some(p) = renamed(&dir.path) {
                dir.path = p;
            }
        }
        for p in self.pending.values_mut() {
            if let Some(n) = renamed(p) {
                *p = n;
            }
        }
        for u in self.unsync.values_mut() {
            if let Some(n) = renamed(&u.dir_path) {
                u.dir_path = n;
            }
        }
    }

    /// Whether the device would read directory `dir`'s index from flash older than the
    /// host's: it changed since it was written, and the device has not cached it.
    fn stale_on_flash(&self, dir: u64) -> bool {
        self.pending.contains_key(&Ino(dir as u32)) && !self.csd.is_cached(dir)
    }

    /// Writes every pending `.ndpmeta` (and, where one moves, its parents'). The host's
    /// clock does not wait: like `sync`, the writes are pushed to the device together, whose
    /// dies book them, so a later read of the same blocks waits behind them. (Until 30
    /// November each directory's index was pushed when the one before it had been written,
    /// so an open that had to read the last of 30 waited for all 30 programs.)
    fn flush(&mut self, fs: &mut HostFs) -> Result<(), NdpError> {
        let at = fs.clock();
        let mut written = at;
        while let Some((dir, path)) = self.pending.pop_first() {
            fs.set_clock(at);
            if let Err(e) = self.index_dir(fs, dir, &path) {
                // Still to write: the next sync tries again.
                self.pending.insert(dir, path);
                fs.set_clock(at);
                return Err(e);
            }
            written = written.max(fs.clock());
        }
        // One journal commit for every index the sync wrote, once their data is on the
        // device (ordered mode). Until 30 November each index was committed on its own.
        fs.set_clock(written);
        let committed = fs.commit_journal();
        fs.set_clock(at);
        Ok(committed?)
    }

    /// Both caches take `dir`'s entries from `meta`: the host's view of the directory, and
    /// the device's cached entries (the update trigger's write, §III-E).
    fn refresh_caches(&mut self, dir: Ino, path: String, meta: &NdpMeta) {
        self.stale.remove(&dir);
        self.host.insert(u64::from(dir.0), host_view(path, meta));
        let entries = meta.entries.iter().map(|e| DevEntry {
            ino: e.ino,
            kind: e.kind,
            length: e.length,
            layout: e.layout.clone(),
        });
        self.csd.refresh_dir(u64::from(dir.0), entries);
    }

    /// Rewrites `dir`'s `.ndpmeta` and refreshes both caches; while an index moves or changes
    /// size, its parent's entry changes too, up to the root (LightFS §III-E stops when an
    /// index is rewritten in place; ours also records the length, so a size change climbs).
    fn rewrite_up(&mut self, fs: &mut HostFs, mut dir: Ino) -> Result<(), NdpError> {
        loop {
            let Some(path) = self.indexes.get(&dir).map(|i| i.path.clone()) else {
                return Ok(());
            };
            let old_bytes = self.indexes.get(&dir).map(|i| i.bytes);
            let indexes = &self.indexes;
            let (index, moved) =
                write_index(fs, dir, &path, self.who, Durability::Batched, |ino| {
                    indexes.get(&ino).map(|b| (b.extents.clone(), b.bytes))
                })?;
            // The parent's entry holds this index's extents *and* length.
            let moved = moved || old_bytes != Some(index.bytes);
            self.csd
                .note_written(u64::from(dir.0), index.encoded.clone());
            self.refresh_caches(dir, path, &index.meta);
            let (extents, bytes) = (index.extents.clone(), index.bytes);
            self.indexes.insert(dir, index);
            if dir == self.root {
                self.csd.set_root(bytes, extents);
                return Ok(());
            }
            // The parent's entry for this directory holds the index's location and size.
            self.csd.update_entry(u64::from(dir.0), bytes, &extents);
            if !moved {
                return Ok(());
            }
            dir = fs
                .namespace()
                .inode(dir)
                .map(|i| i.parent)
                .unwrap_or(self.root);
        }
    }

    /// The periodic updater (Fig. 7 ⑤⑥): `sync` each closed file of the unsync list, tell
    /// the device its new layout and the blocks to wait for. `sync` pushes every file's
    /// pages together, then the indexes, then commits the journal once (§III-B: unlike
    /// `fsync` it does not block). Until 30 November each file was pushed once the one
    /// before it was written, and each committed on its own, as `fsync` does.
    fn periodic_update(&mut self, fs: &mut HostFs) -> Result<(), NdpError> {
        let closed: Vec<Ino> = self
            .unsync
            .iter()
            .filter(|(_, u)| u.closed)
            .map(|(&i, _)| i)
            .collect();
        let at = fs.clock();
        let mut pushed = at;
        for ino in closed {
            fs.set_clock(at);
            self.update_file(fs, ino)?;
            pushed = pushed.max(fs.clock());
        }
        fs.set_clock(pushed);
        self.monitor(fs)?;
        self.flush(fs)
    }

    /// Synchronises one closed file: `sync` allocates and pushes its blocks; a locked file
    /// waits for the block monitor, an unlocked one (new, or never indexed) joins the index
    /// right away.
    fn update_file(&mut self, fs: &mut HostFs, ino: Ino) -> Result<(), NdpError> {
        let Some(u) = self.unsync.get(&ino).cloned() else {
            return Ok(());
        };
        let pending = fs.prepare_writeback(ino)?;
        let (length, extents) = fs
            .file_layout(ino)
            .map(|(l, e)| (l, e.to_vec()))
            .unwrap_or_default();
        if u.new || !self.csd.is_locked(u64::from(ino.0)) {
            fs.write_back_file(ino)?;
            // The monitor must still see these blocks for other locked files.
            self.unsync.remove(&ino);
            self.refresh(fs, u.dir, &u.dir_path)?;
            return Ok(());
        }
        self.csd.expect(
            u64::from(ino.0),
            length,
            extents,
            pending.into_iter().collect(),
        );
        fs.write_back_file(ino).map_err(NdpError::from)
    }

    /// Rewrites `dir`'s index, first indexing it (and any unindexed ancestors) if the
    /// directory was created after initialisation.
    fn index_dir(&mut self, fs: &mut HostFs, dir: Ino, path: &str) -> Result<(), NdpError> {
        if self.indexes.contains_key(&dir) || self.relative(path).is_none() {
            return self.rewrite_up(fs, dir);
        }
        // The unindexed directories from `dir` up to the first indexed ancestor.
        let mut chain = Vec::new();
        let (mut d, mut p) = (dir, path.to_string());
        while !self.indexes.contains_key(&d) {
            if fs.namespace().inode(d).is_none() {
                return Ok(()); // removed since
            }
            let parent = fs.namespace().inode(d).map_or(self.root, |i| i.parent);
            chain.push((d, p.clone()));
            p = parent_dir(&p).unwrap_or("/").to_string();
            if d == parent {
                break;
            }
            d = parent;
        }
        // Deepest first: a parent's entry points at its child's index.
        for (d, p) in chain {
            let indexes = &self.indexes;
            let (index, _) = write_index(fs, d, &p, self.who, Durability::Batched, |ino| {
                indexes.get(&ino).map(|b| (b.extents.clone(), b.bytes))
            })?;
            self.csd.note_written(u64::from(d.0), index.encoded.clone());
            self.indexes.insert(d, index);
        }
        self.rewrite_up(fs, d)
    }
}

/// The host's fields of a decoded `.ndpmeta`.
fn host_view(path: String, meta: &NdpMeta) -> HostDir {
    HostDir {
        path,
        aggregated: meta.aggregated,
        entries: meta
            .entries
            .iter()
            .map(|e| HostEntry {
                name: e.name.clone(),
                ino: e.ino,
                kind: e.kind,
                perms: e.perms,
                too_fragmented: e.layout == Layout::TooFragmented,
            })
            .collect(),
    }
}

impl LightFs {
    fn state(&mut self) -> Result<&mut State, NdpError> {
        self.state
            .as_mut()
            .ok_or(NdpError::NotInitialised { design: "lightfs" })
    }
}

impl OffloadDesign for LightFs {
    fn kind(&self) -> DesignKind {
        DesignKind::LightFs
    }

    /// Builds every `.ndpmeta` under `root` bottom-up and `fsync`s them; the device then
    /// reads the root's index into its cache.
    fn init(&mut self, fs: &mut HostFs, root: &str, who: Cred) -> Result<(), NdpError> {
        fs.watch_writes();
        let built = build_tree(fs, root, who)?;
        let root_index = built.last().expect("the root is always built");
        let root_ino = root_index.dir;
        let entry_ns = fs.device().profile().device_cpu.metadata_entry_ns;
        let bs = fs.namespace().layout().block_bytes;
        let mut csd = LightFsCsd::new(
            u64::from(root_ino.0),
            (root_index.bytes, root_index.extents.clone()),
            entry_ns,
            bs,
        );
        for b in &built {
            csd.note_written(u64::from(b.dir.0), b.encoded.clone());
        }
        let mut state = State {
            root_path: root.to_string(),
            root: root_ino,
            indexes: built.into_iter().map(|b| (b.dir, b)).collect(),
            host: BTreeMap::new(),
            csd,
            unsync: BTreeMap::new(),
            pending: BTreeMap::new(),
            stale: BTreeSet::new(),
            last_sync: fs.clock(),
            who,
        };
        state.startup(fs)?;
        self.state = Some(state);
        Ok(())
    }

    /// libLightFS's open: a write notification locks the file in the device before the
    /// application may write (Fig. 6 ①–⑤), and the file joins the unsync list.
    fn open(
        &mut self,
        fs: &mut HostFs,
        path: &str,
        how: OpenOptions,
        who: Cred,
    ) -> Result<Fd, NdpError> {
        let Some(st) = self.state.as_mut() else {
            return Ok(fs.open(path, how, who)?);
        };
        if !how.write {
            return Ok(fs.open(path, how, who)?);
        }
        let in_tree = st.relative(path).is_some();
        // A file the index does not know yet needs no lock; any other failure (a corrupt
        // index, a refused permission) must stop the open, or the file would go unlocked.
        // Before a write the device caches each level of the file's path (§III-E), so the
        // update synchronizer can refresh the entries the write changes: a file already
        // indexed is locked along its ino list, a new one's directory is cached.
        let walked = if in_tree {
            match st.walk(fs, path, who, true) {
                Ok(w) => Some(w),
                Err(NdpError::Fs(FsError::Namespace(crate::namespace::NsError::NotFound(_)))) => {
                    None
                }
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        let existing = matches!(walked, Some(Walk::Found(_)));
        let levels = walked.map(|w| match w {
            Walk::Found(r) => r.ino_list,
            Walk::MissingLast(list) => list,
        });
        if let Some(list) = levels {
            // A directory the device must read from flash has to be there as the host last
            // changed it.
            if list.iter().any(|&d| st.stale_on_flash(d)) {
                st.flush(fs)?;
            }
            let p = fs.device().profile().host_interface.nvme_command_ns;
            let at = fs.clock().after(p);
            let at = fs
                .device_mut()
                .host_transfer(LinkDirection::ToDevice, at, 8 * list.len() as u64)
                .done;
            let done = if existing {
                st.csd.lock(fs.device_mut(), at, &list)?
            } else {
                st.csd.prefetch(fs.device_mut(), at, &[list])?
            };
            fs.advance_to(done.at);
        }
        let fd = fs.open(path, how, who)?;
        if in_tree {
            let ino = fs.fd_ino(fd)?;
            let dir_path = parent_dir(path).unwrap_or("/").to_string();
            // The directory of the name it was opened by: a file with hard links has others,
            // and its inode keeps only the first.
            let dir = match fs.namespace().inode(ino) {
                Some(i) if i.links == 1 => i.parent,
                _ => fs.namespace().find(&dir_path, who).unwrap_or(st.root),
            };
            let entry = st.unsync.entry(ino).or_insert(Unsync {
                dir,
                dir_path,
                closed: false,
                new: !existing,
            });
            entry.closed = false;
        }
        Ok(fd)
    }

    fn close(&mut self, fs: &mut HostFs, fd: Fd) -> Result<(), NdpError> {
        let ino = fs.close(fd)?;
        if let Some(st) = self.state.as_mut() {
            // The last close of a file unlinked while open freed it: nothing to index.
            if fs.namespace().inode(ino).is_none() {
                st.unsync.remove(&ino);
                return Ok(());
            }
            if !fs.open_for_write(ino) {
                if let Some(u) = st.unsync.get_mut(&ino) {
                    u.closed = true;
                    // §III-C2: after close the host retrieves the layout (in memory, ~5 µs)
                    // and updates the metadata. A file with nothing left to write back is
                    // synchronised now; others wait for the periodic updater's `sync`.
                    if !fs.page_cache().is_dirty(ino) {
                        // The index is updated in memory, in the closing thread; its
                        // `.ndpmeta` waits for the periodic updater (§III-B: the periodic
                        // sync does not block). Only a directory's first index is written
                        // now, and the closing thread does not wait for it either.
                        let closed_at = fs.clock();
                        let entries = fs.namespace().readdir(u.dir).map_or(1, |e| e.len() as u64);
                        st.update_file(fs, ino)?;
                        st.monitor(fs)?;
                        let cpu = entries * fs.costs().index_lookup_ns;
                        fs.set_clock(closed_at.after(cpu));
                    }
                }
            }
        }
        Ok(())
    }

    /// The directory's index drops the entry in memory, as a close updates it (§III-B).
    fn unlink(&mut self, fs: &mut HostFs, path: &str, who: Cred) -> Result<(), NdpError> {
        let gone = fs.unlink(path, who)?;
        if let Some(st) = self.state.as_mut() {
            if gone.inode_freed {
                st.unsync.remove(&gone.ino);
            }
            st.parent_changed(fs, gone.parent, path)?;
        }
        Ok(())
    }

    /// A directory LightFS indexed holds its `.ndpmeta`: when that is all it holds, the
    /// index goes first, so the directory is empty to the kernel.
    fn rmdir(&mut self, fs: &mut HostFs, path: &str, who: Cred) -> Result<(), NdpError> {
        let dir = fs.namespace().find(path, who);
        if let (Some(st), Ok(dir)) = (self.state.as_mut(), dir) {
            // Listing the directory only when LightFS indexed it.
            let only_index = st.indexes.contains_key(&dir)
                && fs
                    .namespace()
                    .readdir(dir)
                    .is_some_and(|e| e.iter().all(|e| e.name == NDPMETA_NAME));
            if only_index {
                let meta = format!("{}/{NDPMETA_NAME}", path.trim_end_matches('/'));
                fs.unlink(&meta, who)?;
                st.forget(dir);
            }
        }
        let gone = fs.rmdir(path, who)?;
        if let Some(st) = self.state.as_mut() {
            st.parent_changed(fs, gone.parent, path)?;
        }
        Ok(())
    }

    /// Both directories' indexes change; a directory moved keeps its index, under its new
    /// path.
    fn rename(&mut self, fs: &mut HostFs, from: &str, to: &str, who: Cred) -> Result<(), NdpError> {
        let r = fs.rename(from, to, who)?;
        if let Some(st) = self.state.as_mut() {
            // A file the rename replaced is gone, written back or not (unless it keeps
            // another name).
            if let Some(gone) = r.replaced.as_ref().filter(|g| g.inode_freed) {
                st.unsync.remove(&gone.ino);
            }
            st.moved(fs, r.ino, r.new_parent, from, to);
            st.parent_changed(fs, r.old_parent, from)?;
            st.parent_changed(fs, r.new_parent, to)?;
        }
        Ok(())
    }

    /// The new name's directory lists the file in its index. (The index of another
    /// directory naming it is refreshed when that directory next changes.)
    fn link(&mut self, fs: &mut HostFs, link: Link<'_>, who: Cred) -> Result<(), NdpError> {
        let l = link.apply(fs, who)?;
        if let Some(st) = self.state.as_mut() {
            st.parent_changed(fs, l.parent, link.to)?;
        }
        Ok(())
    }

    fn background(&mut self, fs: &mut HostFs) -> Result<(), NdpError> {
        fs.run_flusher()?;
        let Some(st) = self.state.as_mut() else {
            return Ok(());
        };
        st.monitor(fs)?;
        if fs.clock().since(st.last_sync) >= SYNC_INTERVAL_NS {
            st.last_sync = fs.clock();
            st.periodic_update(fs)?;
        }
        Ok(())
    }

    /// The kernel's caches dropped and LightFS restarted: its caches hold what its startup
    /// loads ([`State::startup`]), nothing more. A startup read that fails leaves the cache
    /// to be filled on demand, where the failure is reported.
    fn drop_caches(&mut self, fs: &mut HostFs) {
        // As `sync` before dropping caches: pending indexes reach the flash first (one that
        // fails stays pending for the next sync).
        if let Some(st) = self.state.as_mut() {
            let _ = st.flush(fs);
        }
        fs.cold_start();
        if let Some(st) = self.state.as_mut() {
            // The caches are gone, so nothing is left to rebuild: startup and misses refill
            // them from the indexes on flash.
            st.stale.clear();
            st.host.clear();
            st.csd.drop_cache();
            if st.startup(fs).is_err() {
                st.host.clear();
                st.csd.drop_cache();
            }
        }
    }

    fn footprint(&self) -> Option<Footprint> {
        let st = self.state.as_ref()?;
        let host_bytes = st
            .host
            .values()
            .map(|d| {
                HOST_DIR_BYTES
                    + d.entries
                        .iter()
                        .map(|e| {
                            HOST_ENTRY_BYTES
                                + (e.name.len() as u64).saturating_sub(32)
                                + if d.aggregated.is_some() { 0 } else { 8 }
                        })
                        .sum::<u64>()
            })
            .sum();
        Some(Footprint {
            host_bytes,
            device_bytes: st.csd.footprint_bytes(),
        })
    }

    /// One request for every file it names (LightFS §III-C): the host resolves paths to ino
    /// lists, one NVMe command carries them, the device finds every layout in its
    /// `.ndpmeta` cache and reads all files at once, then computes them in the order their
    /// reads complete.
    fn offload(
        &mut self,
        fs: &mut HostFs,
        req: &NdpRequest,
        compute: &mut dyn NdpCompute,
    ) -> Result<NdpOutcome, NdpError> {
        let st = self.state()?;
        st.monitor(fs)?;
        // The device reads the `.ndpmeta` of every directory it has not cached: pending
        // indexes it would read stale are pushed first (the host does not wait for them).
        if st.pending.keys().any(|d| st.stale_on_flash(u64::from(d.0))) {
            st.flush(fs)?;
        }
        let started = fs.clock();
        let plan = st.plan_on_host(fs, req)?;
        let host_done = fs.clock();
        let commanded = host_done.after(fs.device().profile().host_interface.nvme_command_ns);
        let received = fs
            .device_mut()
            .host_transfer(
                LinkDirection::ToDevice,
                commanded,
                plan.request_bytes(compute.args_bytes()),
            )
            .done;
        // LightFS-CSD: batch layout retrieval (the batch's indexes level by level), then
        // every read at once.
        let mut targets: Vec<Target> = Vec::new();
        let mut t = st.csd.prefetch(fs.device_mut(), received, &plan.lists)?.at;
        for list in &plan.lists {
            let (found, done) = st.csd.dispatch(fs.device_mut(), t, list)?;
            t = done.at;
            targets.extend(
                found
                    .into_iter()
                    .filter(|f| plan.names.contains_key(&f.ino)),
            );
        }
        if targets.is_empty() {
            return Err(NdpError::NoFiles(req.paths.join(", ")));
        }
        let retrieved = t;
        let reads = targets
            .iter()
            .map(|target| read_target(fs, target, &plan.host_layouts, retrieved))
            .collect::<Result<Vec<_>, NdpError>>()?;
        let (mut files, finished) =
            compute_in_read_order(fs, &targets, &plan, &reads, retrieved, compute)?;
        // What the request shared (the host's resolution, the command, the layout lookups)
        // is split evenly over its files.
        let n = targets.len() as f64;
        for f in &mut files {
            f.stages.retrieve_layout_ns =
                (host_done.since(started) + retrieved.since(received)) as f64 / n;
            f.stages.dma_ns += received.since(commanded) as f64 / n;
            f.stages.others_ns = commanded.since(host_done) as f64 / n;
        }
        fs.advance_to(finished);
        Ok(NdpOutcome {
            design: DesignKind::LightFs,
            files,
            started,
            finished,
        })
    }
}

/// What LightFS-Host sends for a request: an ino list per path, the files' names, and the
/// layouts of the files the index gave up on (found with `filefrag`).
struct HostPlan {
    lists: Vec<Vec<u64>>,
    names: BTreeMap<u64, String>,
    host_layouts: BTreeMap<u64, Vec<Extent>>,
}

impl HostPlan {
    /// Bytes the request carries to the device: the ino lists, the host's layouts and the
    /// computation's arguments.
    fn request_bytes(&self, args_bytes: u64) -> u64 {
        let lists: u64 = self.lists.iter().map(|l| 8 * l.len() as u64 + 8).sum();
        let layouts: u64 = self
            .host_layouts
            .values()
            .map(|x| super::layout_bytes(x.len()))
            .sum();
        lists + layouts + args_bytes
    }
}

impl State {
    /// LightFS-Host: permissions, path → ino lists, `filefrag` only for files the index
    /// gave up on.
    /// A path the index lacks but the host has, because the file (or a directory above it)
    /// is new and not synced yet, is named as such; other errors pass unchanged.
    fn why_unindexed(&self, fs: &HostFs, path: &str, e: NdpError) -> NdpError {
        let NdpError::Fs(FsError::Namespace(crate::namespace::NsError::NotFound(_))) = &e else {
            return e;
        };
        let Ok(r) = fs.namespace().resolve(path, self.who) else {
            return e;
        };
        let new = |ino: &Ino| self.unsync.get(ino).is_some_and(|u| u.new);
        if r.ino_list.iter().skip(1).any(new) {
            NdpError::NotYetIndexed {
                path: path.to_string(),
            }
        } else {
            e
        }
    }

    fn plan_on_host(&mut self, fs: &mut HostFs, req: &NdpRequest) -> Result<HostPlan, NdpError> {
        let mut plan = HostPlan {
            lists: Vec::new(),
            names: BTreeMap::new(),
            host_layouts: BTreeMap::new(),
        };
        for p in &req.paths {
            let r = self
                .resolve(fs, p, req.who)
                .map_err(|e| self.why_unindexed(fs, p, e))?;
            for (path, e) in &r.files {
                plan.names.insert(e.ino, path.clone());
                if e.too_fragmented {
                    let (_, extents, _) = fs
                        .file_extents(path, req.who)
                        .map_err(|e| super::pipeline::refuse(e, req.who))?;
                    plan.host_layouts.insert(e.ino, extents);
                }
            }
            plan.lists.push(r.ino_list);
        }
        Ok(plan)
    }
}

/// A target's read: when it completes, and the byte ranges read (none for shadow pages,
/// which are read by physical page), kept so the bytes are taken from the same ranges.
struct TargetRead {
    done: VirtualTime,
    ranges: Vec<(u64, u64)>,
}

/// Reads one target file on the device's internal path from `at`: through its shadow pages
/// when it is locked, else through its extents (or the host's layout). The bytes are taken
/// when the file is computed ([`target_bytes`]): a request holds one file's bytes at a time,
/// not its whole data set.
fn read_target(
    fs: &mut HostFs,
    target: &Target,
    host_layouts: &BTreeMap<u64, Vec<Extent>>,
    at: VirtualTime,
) -> Result<TargetRead, NdpError> {
    Ok(match &target.source {
        FileData::Shadow(pages) => {
            let ppns: Vec<_> = pages.iter().flatten().copied().collect();
            let c = fs.device_mut().read_physical_pages(at, &ppns, None)?;
            TargetRead {
                done: c.done,
                ranges: Vec::new(),
            }
        }
        FileData::Extents(_) | FileData::FromHost => {
            let bs = fs.namespace().layout().block_bytes;
            let runs = match &target.source {
                FileData::Extents(r) => r,
                _ => host_layouts.get(&target.ino).map_or(&[][..], Vec::as_slice),
            };
            let ranges = byte_ranges(runs, bs, target.length);
            let c = fs
                .device_mut()
                .read_ranges(IoPath::Internal, at, &ranges, None)?;
            TargetRead {
                done: c.done,
                ranges,
            }
        }
    })
}

/// The bytes [`read_target`] read, taken without booking time again (nothing writes in
/// between); zeros in timing-only mode. Unmapped pages of a snapshot read as zeros.
fn target_bytes(fs: &HostFs, target: &Target, read: &TargetRead) -> Result<Vec<u8>, NdpError> {
    let len = usize::try_from(target.length).unwrap_or(usize::MAX);
    if !fs.device().ftl().keeps_payloads() {
        return Ok(vec![0; len]);
    }
    let bs = fs.namespace().layout().block_bytes as usize;
    let mut data = match &target.source {
        FileData::Shadow(pages) => {
            let mut data = vec![0u8; pages.len() * bs];
            for (page, ppn) in data.chunks_mut(bs).zip(pages) {
                if let Some(ppn) = ppn {
                    fs.device().peek_physical_page(*ppn, page)?;
                }
            }
            data
        }
        FileData::Extents(_) | FileData::FromHost => {
            let mut data = vec![0u8; read.ranges.iter().map(|r| r.1).sum::<u64>() as usize];
            fs.device().peek_ranges(&read.ranges, &mut data)?;
            data
        }
    };
    data.resize(len, 0);
    Ok(data)
}

/// What [`target_bytes`] would take, named without taking it.
fn target_stamp(fs: &HostFs, target: &Target, read: &TargetRead) -> Option<BytesStamp> {
    match &target.source {
        FileData::Shadow(pages) => BytesStamp::of_pages(fs.device(), pages, target.length),
        FileData::Extents(_) | FileData::FromHost => {
            BytesStamp::of_ranges(fs.device(), &read.ranges, target.length)
        }
    }
}

/// Computes the files in the order their reads complete, on the device cores; each result
/// goes back by DMA as soon as it is ready (the DMA engine overlaps the next computation),
/// and one NVMe completion ends the request. Returns each file's outcome, in target order,
/// and when the last result was back.
fn compute_in_read_order(
    fs: &mut HostFs,
    targets: &[Target],
    plan: &HostPlan,
    reads: &[TargetRead],
    retrieved: VirtualTime,
    compute: &mut dyn NdpCompute,
) -> Result<(Vec<FileOutcome>, VirtualTime), NdpError> {
    let mut cpu = CorePool::new(fs.device().profile().device_cpu.cores);
    let mut order: Vec<usize> = (0..targets.len()).collect();
    order.sort_by_key(|&i| (reads[i].done, i));
    let mut files: Vec<Option<FileOutcome>> = vec![None; targets.len()];
    let mut finished = retrieved;
    for i in order {
        let path = plan.names[&targets[i].ino].clone();
        let read_done = reads[i].done;
        let stamp = target_stamp(fs, &targets[i], &reads[i]);
        let out = match stamp.as_ref().and_then(|s| compute.recall(&path, s)) {
            Some(out) => Ok(out),
            None => {
                let data = target_bytes(fs, &targets[i], &reads[i])?;
                compute.compute_stamped(&path, stamp, data)
            }
        };
        let out = out.map_err(|message| NdpError::Compute {
            path: path.clone(),
            message,
        })?;
        let done = cpu.run(read_done, out.compute_ns);
        let returned = fs
            .device_mut()
            .host_transfer(LinkDirection::ToHost, done, out.ret.len() as u64)
            .done;
        finished = finished.max(returned);
        files[i] = Some(FileOutcome {
            path,
            ret: out.ret,
            stages: Stages {
                read_file_ns: read_done.since(retrieved) as f64,
                compute_ns: done.since(read_done) as f64,
                dma_ns: returned.since(done) as f64,
                ..Stages::default()
            },
        });
    }
    let files = files
        .into_iter()
        .map(|f| f.expect("every target computed"))
        .collect();
    Ok((files, finished))
}
