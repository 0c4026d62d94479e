//! The host file system over the simulated device: namespace, extent allocator and the host's
//! metadata cache, with every metadata block really living on flash.
//!
//! Creating a file or directory writes its inode-table block and its parent's directory block
//! through the device, so those pages are mapped on flash; a lookup whose blocks are not in the
//! host's metadata cache reads them back through the device, one level after another (each
//! level needs the previous one). That is why a cold `fiemap` costs hundreds of microseconds
//! and a warm one only the host's CPU time (LightFS Table V).
//!
//! Files are written two ways: `import` places a whole file durably (building a data set), and
//! `open`/`write`/`close` go through the page cache ([`crate::pagecache`]): overwrites stay in
//! place (same logical blocks, as ext4 does), new blocks are allocated at writeback (delayed
//! allocation), and dirty pages reach the device later and out of order, so a reader that
//! bypasses the host — an NDP request — can see a file half old, half new (LightFS §II-D).

use crate::alloc::{Extent, ExtentAllocator};
use crate::journal::{Journal, JournalStats};
use crate::namespace::{
    CreateAt, Ino, InodeKind, Linked, MetaLayout, MetaWrite, Namespace, NewKind, NewName, NsError,
    Removed, Renamed, Resolution,
};
use crate::pagecache::{PageCache, WritebackPolicy};
use crate::perms::{Access, Cred, Perms};
use csd_device::{Device, DeviceError, HostCosts, IoPath, Lpn, VirtualTime};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};

/// The superblock's block.
const SUPERBLOCK: u64 = 0;
/// ext4 allocates one inode per 16 KiB of capacity by default.
const BYTES_PER_INODE: u64 = 16 << 10;

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error(transparent)]
    Namespace(#[from] NsError),
    #[error("device: {0}")]
    Device(#[from] DeviceError),
    #[error("permission denied: {access} access to '{path}'")]
    PermissionDenied { path: String, access: &'static str },
    #[error("'{0}' is a directory")]
    IsADirectory(String),
    #[error("the device ({0} blocks) is too small for a file system")]
    TooSmall(u64),
    #[error("bad file descriptor {0}")]
    BadFd(u32),
    #[error("file descriptor {0} refers to a file that no longer exists")]
    Stale(u32),
    #[error("file descriptor {fd} ('{path}') is not open for {access}")]
    FdMode {
        fd: u32,
        path: String,
        access: &'static str,
    },
    #[error("fallocate of 0 bytes at offset {offset} on file descriptor {fd}: the length must be positive")]
    EmptyAllocation { fd: u32, offset: u64 },
    #[error("offset {offset} + length {len} is past the largest file size ({max} bytes, ext4's with 4 KiB blocks)")]
    FileTooLarge { offset: u64, len: u64, max: u64 },
}

/// The largest file this file system holds: ext4's limit with 4 KiB blocks (16 TiB). An
/// offset or size past it is refused (`EFBIG`), so no arithmetic on it can overflow.
pub const MAX_FILE_BYTES: u64 = 16 << 40;

/// `offset + len`, if it stays within [`MAX_FILE_BYTES`].
pub fn file_end(offset: u64, len: u64) -> Result<u64, FsError> {
    offset
        .checked_add(len)
        .filter(|&end| end <= MAX_FILE_BYTES)
        .ok_or(FsError::FileTooLarge {
            offset,
            len,
            max: MAX_FILE_BYTES,
        })
}

/// `runs` split after their first `pages` pages: those pages' runs, and the rest.
fn split_runs(runs: &[Extent], pages: u64) -> (Vec<Extent>, Vec<Extent>) {
    let (mut head, mut tail, mut seen) = (Vec::new(), Vec::new(), 0u64);
    for run in runs {
        if seen >= pages {
            tail.push(*run);
        } else if seen + run.pages > pages {
            let k = pages - seen;
            head.push(Extent::new(run.first.0, k));
            tail.push(Extent::new(run.first.0 + k, run.pages - k));
        } else {
            head.push(*run);
        }
        seen += run.pages;
    }
    (head, tail)
}

/// An open file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fd(pub u32);

/// A file [`HostFs::import_all`] creates: its bytes (borrowed, or made for it and dropped
/// once written, so a caller can make files one at a time), or (timing-only) its size and
/// the byte ranges `(start, end)` to write, as zero pages rounded out to whole blocks.
#[derive(Clone, Debug)]
pub enum NewFile<'a> {
    Bytes(&'a [u8]),
    Owned(Vec<u8>),
    Zeros {
        size: u64,
        written: &'a [(u64, u64)],
    },
}

impl NewFile<'_> {
    pub fn size(&self) -> u64 {
        match self {
            NewFile::Bytes(b) => b.len() as u64,
            NewFile::Owned(b) => b.len() as u64,
            NewFile::Zeros { size, .. } => *size,
        }
    }
}

/// How to open a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    pub write: bool,
    /// Create the file (with `perms`) if it does not exist.
    pub create: Option<Perms>,
}

impl OpenOptions {
    pub const READ: OpenOptions = OpenOptions {
        write: false,
        create: None,
    };
    pub const WRITE: OpenOptions = OpenOptions {
        write: true,
        create: None,
    };
}

#[derive(Clone, Debug)]
struct OpenFile {
    ino: Ino,
    path: String,
    write: bool,
}

/// What a lookup cost: metadata blocks read from flash, cache hits, and time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LookupCost {
    pub metadata_reads: u32,
    pub cache_hits: u32,
    pub ns: u64,
}

pub struct HostFs {
    device: Device,
    ns: Namespace,
    alloc: ExtentAllocator,
    /// Metadata blocks (inode-table and directory blocks) in the host's cache, with the time
    /// each one's read completes: a lookup that needs a block still being read waits for it
    /// (as on a locked buffer head) instead of reading it again or finding it early.
    cached: FxHashMap<u64, VirtualTime>,
    costs: HostCosts,
    clock: VirtualTime,
    /// When the current operation started. Operations start in time order, so this never
    /// moves back; the actors inside one (frag-m's threads, the flusher) act at or after it,
    /// while `clock`, the acting actor's own time, may move back to an earlier actor's.
    epoch: VirtualTime,
    /// The latest time an actor had reached when the clock last moved back to another's: a
    /// replay's pids overlap, so a page one dirtied may be later than another's now, never
    /// later than this or the clock.
    reached: VirtualTime,
    cache: PageCache,
    policy: WritebackPolicy,
    /// When the flusher last ran.
    flushed_at: VirtualTime,
    fds: BTreeMap<Fd, OpenFile>,
    next_fd: u32,
    /// Data blocks written to the device, in order: what a device-side block monitor sees.
    /// Recorded only once someone asks for them (`watch_writes`), so designs without a
    /// monitor do not accumulate them.
    written: Vec<u64>,
    watch_writes: bool,
    /// With a journal, metadata changes commit through it ([`crate::journal`]); without
    /// one, each is written in place before the change returns.
    journal: Option<Journal>,
}

impl HostFs {
    /// Formats `device` (one file-system block per flash page) with an empty root directory.
    pub fn format(device: Device, root: Perms) -> Result<HostFs, FsError> {
        let block_bytes = device.page_size();
        let blocks = device.logical_pages();
        let inode_count =
            (blocks * block_bytes / BYTES_PER_INODE).clamp(64, u64::from(u32::MAX / 2)) as u32;
        let layout = MetaLayout {
            block_bytes,
            inode_bytes: 256,
            inode_table_first_block: 1,
            inode_count,
        };
        let data_start = layout.inode_table_first_block + layout.inode_table_blocks();
        if data_start + 16 > blocks {
            return Err(FsError::TooSmall(blocks));
        }
        let mut alloc = ExtentAllocator::new(data_start, blocks - data_start);
        let ns = Namespace::new(layout, root, &mut alloc)?;
        let costs = device.profile().host.clone();
        let mut fs = HostFs {
            device,
            ns,
            alloc,
            cached: FxHashMap::default(),
            costs,
            clock: VirtualTime::ZERO,
            epoch: VirtualTime::ZERO,
            reached: VirtualTime::ZERO,
            cache: PageCache::new(0),
            policy: WritebackPolicy::default(),
            flushed_at: VirtualTime::ZERO,
            fds: BTreeMap::new(),
            next_fd: 3,
            written: Vec::new(),
            watch_writes: false,
            journal: None,
        };
        let root_blocks = fs.own_blocks(Ino::ROOT);
        fs.write_meta(
            [layout.whole(SUPERBLOCK), layout.inode_write(Ino::ROOT)]
                .into_iter()
                .chain(root_blocks.into_iter().map(|b| layout.whole(b))),
        )?;
        Ok(fs)
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Blocks no file, directory or reservation holds.
    pub fn free_blocks(&self) -> u64 {
        self.alloc.free_blocks()
    }

    pub fn namespace(&self) -> &Namespace {
        &self.ns
    }

    pub fn clock(&self) -> VirtualTime {
        self.clock
    }

    /// Starts an operation at `t`: operations start in time order (asserted in debug
    /// builds), so time itself only moves forward.
    pub fn start_op(&mut self, t: VirtualTime) {
        debug_assert!(
            t >= self.epoch,
            "an operation starts at {t:?}, before the previous one's start {:?}: time moved back",
            self.epoch
        );
        self.epoch = self.epoch.max(t);
        self.reached = self.reached.max(self.clock);
        self.clock = t;
    }

    /// Sets the time of the actor about to act within the current operation. Concurrent
    /// actors (frag-m's host threads, the flusher) are simulated one step at a time, so this
    /// may move the clock back to an earlier actor's time, never before the operation began
    /// (asserted in debug builds).
    pub fn set_clock(&mut self, t: VirtualTime) {
        debug_assert!(
            t >= self.epoch,
            "an actor acts at {t:?}, before its operation started at {:?}",
            self.epoch
        );
        self.reached = self.reached.max(self.clock);
        self.clock = t;
    }

    /// When the current operation started (the latest [`HostFs::start_op`]).
    pub fn op_started(&self) -> VirtualTime {
        self.epoch
    }

    /// Starts time over at zero with an idle host (before a trace begins: setting it up is
    /// not part of it). The device's measurements are reset apart. Metadata still cached is
    /// ready at zero: the reads that brought it in belong to the old timeline (keeping
    /// their times made an ISPFS replay's first lookup wait 161 ms for its setup's writes).
    pub fn restart_time(&mut self) {
        self.epoch = VirtualTime::ZERO;
        self.clock = VirtualTime::ZERO;
        self.reached = VirtualTime::ZERO;
        for ready in self.cached.values_mut() {
            *ready = VirtualTime::ZERO;
        }
    }

    /// Moves the host's clock forward to `t` (never back): another actor's time has passed.
    pub fn advance_to(&mut self, t: VirtualTime) {
        self.clock = self.clock.max(t);
    }

    /// The device, for device-side models (LightFS-CSD, FSR) that act at the host's clock.
    pub fn device_mut(&mut self) -> &mut Device {
        &mut self.device
    }

    pub fn costs(&self) -> &HostCosts {
        &self.costs
    }

    /// Restarts the writeback order from `seed`.
    pub fn seed_writeback(&mut self, seed: u64) {
        self.cache.reseed(seed);
    }

    pub fn set_writeback_policy(&mut self, policy: WritebackPolicy) {
        self.policy = policy;
    }

    pub fn page_cache(&self) -> &PageCache {
        &self.cache
    }

    /// Metadata blocks the host has cached.
    pub fn cached_metadata_blocks(&self) -> usize {
        self.cached.len()
    }

    /// Empties the host's metadata cache (`echo 2 > /proc/sys/vm/drop_caches`), apart from
    /// blocks the journal has not yet written home: the kernel drops only clean buffers.
    pub fn drop_caches(&mut self) {
        match &self.journal {
            Some(j) => self.cached.retain(|&b, _| j.holds(b)),
            None => self.cached.clear(),
        }
    }

    /// A cold start: [`HostFs::drop_caches`], and the device's data buffer emptied as after
    /// a long idle and a restart ([`csd_device::Device::settle_data_buffer`]), so metadata
    /// and data are read from the flash.
    pub fn cold_start(&mut self) {
        self.drop_caches();
        self.device.settle_data_buffer();
    }

    /// From now on, metadata changes go through an ext4 journal of `mke2fs`'s default size
    /// for this device, in ordered mode ([`crate::journal`]), instead of each being written
    /// in place before it returns. Its log takes free blocks.
    pub fn enable_journal(&mut self) -> Result<(), FsError> {
        if self.journal.is_some() {
            return Ok(());
        }
        let bs = self.ns.layout().block_bytes;
        let capacity = self.device.capacity_bytes();
        // Never more than an eighth of what is free, so a small device keeps room for files.
        let blocks = (crate::journal::default_bytes(capacity) / bs)
            .min(self.alloc.free_blocks() / 8)
            .max(16);
        let area = self.alloc.allocate(blocks, None).map_err(NsError::from)?;
        let journal =
            Journal::new(area, bs).ok_or(FsError::TooSmall(self.device.logical_pages()))?;
        self.journal = Some(journal);
        Ok(())
    }

    /// What the journal has done, if there is one.
    pub fn journal_stats(&self) -> Option<JournalStats> {
        self.journal.as_ref().map(Journal::stats)
    }

    /// Whether inode `ino`'s size, blocks or existence changed since its inode block was
    /// last written home (the change waits in the journal), so a reader of the flash would
    /// find it out of date or missing.
    pub fn journal_holds_inode(&self, ino: Ino) -> bool {
        self.journal.as_ref().is_some_and(|j| j.inode_held(ino))
    }

    /// The blocks a directory or a long link was made with.
    fn own_blocks(&self, ino: Ino) -> Vec<u64> {
        match &self.ns.inode(ino).map(|i| &i.kind) {
            Some(InodeKind::Dir { blocks, .. } | InodeKind::Symlink { blocks, .. }) => {
                blocks.iter().flat_map(|r| r.first.0..r.end()).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Metadata changed: with a journal their blocks join its running transaction (and
    /// commit at once if it is full); without one they are written through the device
    /// before this returns. Either way the cache holds them, as a write would leave them.
    fn write_meta(&mut self, writes: impl IntoIterator<Item = MetaWrite>) -> Result<(), FsError> {
        if self.journal.is_none() {
            return self.store_meta(writes);
        }
        let now = self.clock;
        for b in writes.into_iter().map(|w| w.block) {
            let full = self.journal.as_mut().is_some_and(|j| {
                j.add(b, now);
                j.full()
            });
            let ready = self.cached.entry(b).or_insert(now);
            *ready = (*ready).min(now);
            if full {
                // jbd2 makes the handle that filled the transaction wait for its commit.
                self.commit(true)?;
            }
        }
        Ok(())
    }

    /// Metadata written in place, without a journal. A block device takes whole blocks
    /// ([`HostFs::write_in_place`]); a byte-addressable medium (ISPFS's PCM, whose file
    /// system stores metadata with the CPU's stores, ISPFS §3.1) takes each block's changed
    /// bytes, from the first to the last, as one request per block, all submitted at the
    /// clock; the clock moves to when the last one completed.
    fn store_meta(&mut self, writes: impl IntoIterator<Item = MetaWrite>) -> Result<(), FsError> {
        if self.device.profile().timing.program_unit_bytes == 0 {
            return self.write_in_place(writes.into_iter().map(|w| w.block));
        }
        let bs = self.ns.layout().block_bytes;
        let mut writes: Vec<MetaWrite> = writes.into_iter().collect();
        writes.sort_unstable();
        let at = self.clock;
        let mut done = at;
        for same in writes.chunk_by(|a, b| a.block == b.block) {
            let block = same[0].block;
            let first = same.iter().map(|w| w.offset).min().unwrap_or(0).min(bs);
            let end = same
                .iter()
                .map(|w| w.offset.saturating_add(w.len))
                .max()
                .unwrap_or(0);
            let end = end.clamp(first, bs);
            // A block of the file system's own layout: inside the device.
            let range = [(block * bs + first, end - first)];
            done = done.max(
                self.device
                    .write_ranges(IoPath::Host, at, &range, None)?
                    .done,
            );
            self.cached.insert(block, at);
        }
        self.clock = done;
        Ok(())
    }

    /// Writes metadata blocks to their home locations, all submitted at the clock; the
    /// clock moves to when the last one completed.
    fn write_in_place(&mut self, blocks: impl IntoIterator<Item = u64>) -> Result<(), FsError> {
        let at = self.clock;
        let mut done = at;
        // Each block once, in order (a sorted Vec: a BTreeSet per call cost more than the rest).
        let mut blocks: Vec<u64> = blocks.into_iter().collect();
        blocks.sort_unstable();
        blocks.dedup();
        for b in blocks {
            done = done.max(self.device.write(IoPath::Host, at, Lpn(b), 1, None)?.done);
            self.cached.insert(b, at);
        }
        self.clock = done;
        Ok(())
    }

    /// Inode `ino` changed (`for_data`: its size or blocks, not only its timestamps): with
    /// a journal, what decides whether its `fsync` or `fdatasync` waits for a commit.
    fn inode_changed(&mut self, ino: Ino, for_data: bool) -> Result<(), FsError> {
        let Some(j) = &mut self.journal else {
            return Ok(());
        };
        let block = self.ns.layout().inode_block(ino);
        j.inode_changed(ino, block, for_data);
        if !j.is_running(block) {
            self.write_meta([self.ns.layout().inode_write(ino)])?;
        }
        Ok(())
    }

    /// Commits the journal's running transaction (nothing without a journal or a change):
    /// first, if the log is full, the blocks it holds go home; then the descriptors and
    /// copies go to the log; the commit block follows once they are on the device. With
    /// `wait` the caller waits for the commit block (`fsync`); otherwise the commit is
    /// kjournald's and the clock stays.
    fn commit(&mut self, wait: bool) -> Result<(), FsError> {
        self.commit_as_of(wait, None).map(|_| ())
    }

    /// [`HostFs::commit`], for a commit that belongs to moment `as_of` (kjournald's timer,
    /// passed already): its writes go to the device now, whose timelines only move
    /// forward, but the flusher's expiry counts from `as_of`. Returns when the commit block
    /// is on the device, if there was anything to commit.
    fn commit_as_of(
        &mut self,
        wait: bool,
        as_of: Option<VirtualTime>,
    ) -> Result<Option<VirtualTime>, FsError> {
        let Some(plan) = self.journal.as_mut().and_then(Journal::plan_commit) else {
            return Ok(None);
        };
        let start = self.clock;
        if !plan.checkpoint.is_empty() {
            self.write_in_place(plan.checkpoint.iter().copied())?;
        }
        let at = self.clock;
        let mut logged = at;
        for run in &plan.log {
            let c = self
                .device
                .write(IoPath::Host, at, Lpn(run.first.0), run.pages, None)?;
            logged = logged.max(c.done);
        }
        let done = self
            .device
            .write(IoPath::Host, logged, Lpn(plan.commit_block), 1, None)?
            .done;
        if let Some(j) = &mut self.journal {
            j.committed(&plan.blocks, as_of.map_or(done, |t| t.min(done)));
        }
        self.clock = if wait { done } else { start };
        Ok(Some(done))
    }

    /// The journal's background work due by the clock, which it leaves where it was:
    /// kjournald's commit of a transaction older than the commit interval, and the
    /// flusher's writes of committed blocks dirty for longer than its expiry, at the
    /// flusher's last wake-up `last_wake`.
    fn journal_background(&mut self, last_wake: Option<VirtualTime>) -> Result<(), FsError> {
        let now = self.clock;
        // A block goes home only once the commit that logged it is on the device.
        let mut home_at = now;
        if let Some(fired) = self.journal.as_ref().and_then(|j| j.timer_fired(now)) {
            if let Some(done) = self.commit_as_of(false, Some(fired))? {
                home_at = home_at.max(done);
            }
        }
        let expire = self.policy.expire_ns;
        let home = match (&mut self.journal, last_wake) {
            (Some(j), Some(wake)) if wake.ns() >= expire => {
                j.take_expired(VirtualTime(wake.ns() - expire))
            }
            _ => return Ok(()),
        };
        if !home.is_empty() {
            self.clock = home_at;
            self.write_in_place(home)?;
            self.clock = now;
        }
        Ok(())
    }

    /// Creates `path` after the walk that finds its name free (`filename_create`: the
    /// parent's walk and a search of it), charged as a lookup; a name that is there costs
    /// its lookup and is refused.
    fn create(
        &mut self,
        path: &str,
        kind: NewKind,
        perms: Perms,
        who: Cred,
    ) -> Result<Ino, FsError> {
        let dir = match self.ns.resolve_or_parent(path, who)? {
            Ok(there) => {
                self.charge_lookup(there)?;
                return Err(NsError::Exists(path.to_string()).into());
            }
            Err(dir) => self.charge_lookup(dir)?.0.ino,
        };
        let ino = self
            .ns
            .create_in(dir, path, kind, perms, who, &mut self.alloc)?;
        self.write_created(ino)?;
        Ok(ino)
    }

    /// Writes what creating `ino` changed: its inode, its parent's, the parent's directory
    /// block that took the entry, and a new directory's own block.
    fn write_created(&mut self, ino: Ino) -> Result<(), FsError> {
        let parent = self.ns.inode(ino).expect("just created").parent;
        let layout = *self.ns.layout();
        let mut writes = vec![layout.inode_write(ino), layout.inode_write(parent)];
        writes.extend(self.ns.entry_write(parent, ino));
        writes.extend(self.own_blocks(ino).into_iter().map(|b| layout.whole(b)));
        self.write_meta(writes)?;
        self.inode_changed(ino, true)?;
        self.inode_changed(parent, true)
    }

    pub fn mkdir(&mut self, path: &str, perms: Perms, who: Cred) -> Result<Ino, FsError> {
        self.create(path, NewKind::Dir, perms, who)
    }

    /// `mknod`: a special file (a FIFO, a socket, a device node) at `path`, an inode and its
    /// name with no data, written as a create is. It is kept as an empty file: what passes
    /// through one is not the file system's.
    pub fn mknod(&mut self, path: &str, perms: Perms, who: Cred) -> Result<Ino, FsError> {
        self.create(path, NewKind::File, perms, who)
    }

    /// `symlink`: a link at `path` to `target` (kept as given, 1 to 4095 bytes), written as
    /// a create is. ext4 keeps a target of up to 59 bytes in the inode; a longer one takes a
    /// block, written here with the inode (ext4 writes it through the page cache).
    pub fn symlink(
        &mut self,
        path: &str,
        target: &str,
        perms: Perms,
        who: Cred,
    ) -> Result<Ino, FsError> {
        self.create(path, NewKind::Symlink { target }, perms, who)
    }

    /// [`HostFs::mkdir`] of `path` in `parent`, the directory the caller resolved `path`'s
    /// parent to: `mkdir -p` goes down a path once instead of walking it at every level.
    pub fn mkdir_in(
        &mut self,
        parent: Ino,
        path: &str,
        perms: Perms,
        who: Cred,
    ) -> Result<Ino, FsError> {
        let ino = self
            .ns
            .create_in(parent, path, NewKind::Dir, perms, who, &mut self.alloc)?;
        self.write_created(ino)?;
        Ok(ino)
    }

    /// Creates `path` with `data`, allocates its blocks (contiguous where the free space
    /// allows) and writes it through the device; the file is durable on return.
    pub fn import(
        &mut self,
        path: &str,
        data: &[u8],
        perms: Perms,
        who: Cred,
    ) -> Result<Ino, FsError> {
        let ino = self.create(path, NewKind::File, perms, who)?;
        let bs = self.ns.layout().block_bytes;
        let runs = self
            .alloc
            .allocate((data.len() as u64).div_ceil(bs), None)
            .map_err(NsError::from)?;
        self.place(ino, runs, data)?;
        Ok(ino)
    }

    /// Creates every file of `files`, in order, as a program that copied them in and then
    /// called `sync` leaves them: the namespace first, then all their data in block order
    /// (delayed allocation gives them contiguous extents, and writeback sends them as one
    /// stream), then each changed metadata block once, as an ordered journal commit would.
    /// The flash stripes consecutive pages over its channels, so the files spread over all
    /// of them. [`HostFs::import`] instead writes each file's metadata as it goes, which puts
    /// a few metadata pages between consecutive files' data and so decides which channels
    /// the data lands on. Durable on return.
    pub fn import_all<'a>(
        &mut self,
        files: impl IntoIterator<Item = (&'a str, NewFile<'a>)>,
        perms: Perms,
        who: Cred,
    ) -> Result<Vec<Ino>, FsError> {
        let bs = self.ns.layout().block_bytes;
        let keep = self.device.ftl().keeps_payloads();
        let layout = *self.ns.layout();
        // Each directory's blocks once at the end: a directory of n files has about n/64
        // blocks, so adding them per file would hold n²/64 block numbers.
        let mut meta = Vec::new();
        let mut parents = BTreeSet::new();
        let mut inos = Vec::new();
        let mut written = self.clock;
        for (path, file) in files {
            let size = file.size();
            file_end(0, size)?;
            let ino = self
                .ns
                .create(path, NewKind::File, perms, who, &mut self.alloc)?;
            let runs = self
                .alloc
                .allocate(size.div_ceil(bs), None)
                .map_err(NsError::from)?;
            let (ranges, payload) = match &file {
                NewFile::Bytes(data) => (byte_ranges(&runs, bs, size), keep.then_some(*data)),
                NewFile::Owned(data) => (
                    byte_ranges(&runs, bs, size),
                    keep.then_some(data.as_slice()),
                ),
                NewFile::Zeros { written, .. } => {
                    let mut ranges = Vec::new();
                    for &(start, end) in written.iter() {
                        let end = end.min(size);
                        if start < end {
                            let first = start / bs * bs;
                            let last = end.div_ceil(bs) * bs;
                            ranges.extend(file_ranges(&runs, bs, first, last - first));
                        }
                    }
                    (ranges, None)
                }
            };
            let c = self
                .device
                .write_ranges(IoPath::Host, self.clock, &ranges, payload)?;
            written = written.max(c.done);
            self.ns.set_file_layout(ino, size, runs)?;
            meta.push(layout.inode_write(ino));
            parents.insert(self.ns.inode(ino).expect("just created").parent);
            inos.push(ino);
        }
        for parent in parents {
            meta.push(layout.inode_write(parent));
            meta.extend(self.own_blocks(parent).into_iter().map(|b| layout.whole(b)));
        }
        // Ordered journaling: the metadata commits once the data is on the device.
        self.clock = written;
        self.write_meta(meta)?;
        self.commit(true)?;
        Ok(inos)
    }

    /// Writes `data` into `runs` through the device and waits, then records the file's layout
    /// and writes its inode.
    fn place(&mut self, ino: Ino, runs: Vec<Extent>, data: &[u8]) -> Result<(), FsError> {
        let bs = self.ns.layout().block_bytes;
        let keep = self.device.ftl().keeps_payloads();
        let ranges = byte_ranges(&runs, bs, data.len() as u64);
        let c =
            self.device
                .write_ranges(IoPath::Host, self.clock, &ranges, keep.then_some(data))?;
        self.clock = c.done;
        self.ns.set_file_layout(ino, data.len() as u64, runs)?;
        self.write_meta([self.ns.layout().inode_write(ino)])
    }

    /// Commits the journal's running transaction and waits for it, as `sync` does once the
    /// data it wrote is on the device.
    pub fn commit_journal(&mut self) -> Result<(), FsError> {
        self.commit(true)
    }

    /// Resolves `path`, reading every metadata block the host does not have cached through
    /// the device, one after another, and charging the host's per-component CPU time.
    /// Symbolic links are followed, the last component's too (`stat`).
    pub fn lookup(&mut self, path: &str, who: Cred) -> Result<(Resolution, LookupCost), FsError> {
        let r = self.ns.resolve(path, who)?;
        self.charge_lookup(r)
    }

    /// [`HostFs::lookup`] that resolves a link at the end of `path` to the link itself
    /// (`lstat`, `readlink`; and the walk `unlink`, `rename` and `link` make to their
    /// source).
    pub fn lookup_nofollow(
        &mut self,
        path: &str,
        who: Cred,
    ) -> Result<(Resolution, LookupCost), FsError> {
        let r = self.ns.resolve_nofollow(path, who)?;
        self.charge_lookup(r)
    }

    /// A lookup of a path that may not be there (a call that failed with `ENOENT`): the walk
    /// as far as it goes, each directory's inode block and the block its search for the next
    /// name reads (ext4's `ext4_find_entry`), the directory lacking the name included,
    /// charged as [`HostFs::lookup`] charges one that finds its file.
    pub fn lookup_partial(&mut self, path: &str, who: Cred) -> Result<LookupCost, FsError> {
        let r = self.ns.resolve_partial(path, who)?;
        Ok(self.charge_lookup(r)?.1)
    }

    /// What a lookup that resolved to `r` costs: the path's components, and each metadata
    /// block it read that the cache did not hold.
    fn charge_lookup(&mut self, r: Resolution) -> Result<(Resolution, LookupCost), FsError> {
        let start = self.clock;
        let names = r.ino_list.len() as u64 - 1 + r.detour;
        let mut t = start.after(self.costs.path_component_ns * names.max(1));
        let mut cost = LookupCost::default();
        for m in &r.reads {
            if let Some(&ready) = self.cached.get(&m.block()) {
                t = t.max(ready);
                cost.cache_hits += 1;
            } else {
                t = self
                    .device
                    .read(IoPath::Host, t, Lpn(m.block()), 1, None)?
                    .done;
                self.cached.insert(m.block(), t);
                cost.metadata_reads += 1;
            }
        }
        cost.ns = t.since(start);
        self.clock = t;
        Ok((r, cost))
    }

    /// Whether `who` may list `ino` (resolved from `path`): a directory it may read.
    fn check_listable(&self, ino: Ino, path: &str, who: Cred) -> Result<(), FsError> {
        let inode = self.ns.inode(ino).expect("resolved");
        if !inode.is_dir() {
            return Err(FsError::Namespace(NsError::NotADirectory(path.to_string())));
        }
        if !inode.perms.allows(who, Access::Read) {
            return Err(FsError::PermissionDenied {
                path: path.to_string(),
                access: Access::Read.name(),
            });
        }
        Ok(())
    }

    /// A directory listed to its end (`getdents64` until it returns 0): the path walk, every
    /// block of the directory's entries read through the metadata cache, one after another,
    /// and each entry, "." and ".." included, copied to the caller as a `linux_dirent64`.
    /// Returns how many entries it listed, and what the listing cost.
    pub fn readdir(&mut self, path: &str, who: Cred) -> Result<(u64, LookupCost), FsError> {
        let mut r = self.ns.resolve(path, who)?;
        self.check_listable(r.ino, path, who)?;
        let dirent64 = crate::namespace::dirent64_bytes;
        let (entries, bytes) = self
            .ns
            .entries_of(r.ino)
            .fold((2, dirent64(1) + dirent64(2)), |(n, b), e| {
                (n + 1, b + dirent64(e.name.len()))
            });
        r.reads.extend(self.ns.dir_reads(r.ino));
        let (_, mut cost) = self.charge_lookup(r)?;
        let copy = csd_device::transfer_ns(bytes, self.costs.copy_bytes_per_sec);
        self.clock = self.clock.after(copy);
        cost.ns += copy;
        Ok((entries, cost))
    }

    /// An inode's attributes changed (`chmod`, `chown`, `utimensat`, an extended attribute):
    /// the path walk, then the inode dirtied as any change to it is, so the next commit (or,
    /// without a journal, a write in place) writes its block. Only its owner or root may.
    pub fn setattr(&mut self, path: &str, who: Cred) -> Result<(), FsError> {
        let (r, _) = self.lookup(path, who)?;
        self.change_attrs(r, path, who)
    }

    /// [`HostFs::setattr`] of a symbolic link at the end of `path` itself (`lchown`,
    /// `utimensat` with `AT_SYMLINK_NOFOLLOW`).
    pub fn lsetattr(&mut self, path: &str, who: Cred) -> Result<(), FsError> {
        let (r, _) = self.lookup_nofollow(path, who)?;
        self.change_attrs(r, path, who)
    }

    fn change_attrs(&mut self, r: Resolution, path: &str, who: Cred) -> Result<(), FsError> {
        let inode = self.ns.inode(r.ino).expect("resolved");
        if who != Cred::ROOT && inode.perms.uid != who.uid {
            return Err(FsError::PermissionDenied {
                path: path.to_string(),
                access: "owner's",
            });
        }
        self.write_meta([self.ns.layout().inode_write(r.ino)])?;
        self.inode_changed(r.ino, false)
    }

    /// `filefrag`: the extents of a file the caller may read, and what finding them cost.
    pub fn fiemap(&mut self, path: &str, who: Cred) -> Result<(Vec<Extent>, LookupCost), FsError> {
        let (_, extents, cost) = self.file_extents(path, who)?;
        Ok((extents, cost))
    }

    /// Looks up a readable file: its size, extents, and the cost of `fiemap` (lookup + CPU).
    pub fn file_extents(
        &mut self,
        path: &str,
        who: Cred,
    ) -> Result<(u64, Vec<Extent>, LookupCost), FsError> {
        let (r, mut cost) = self.lookup(path, who)?;
        let inode = self.ns.inode(r.ino).expect("resolved");
        let InodeKind::File {
            size_bytes,
            extents,
            ..
        } = &inode.kind
        else {
            return Err(FsError::IsADirectory(path.to_string()));
        };
        if !inode.perms.allows(who, Access::Read) {
            return Err(FsError::PermissionDenied {
                path: path.to_string(),
                access: Access::Read.name(),
            });
        }
        let found = (*size_bytes, extents.clone());
        self.clock = self.clock.after(self.costs.fiemap_ns);
        cost.ns += self.costs.fiemap_ns;
        Ok((found.0, found.1, cost))
    }

    /// Reads a whole file as the flash holds it, bypassing the page cache (what a reader on
    /// the device side sees; data mode keeps the bytes). Bytes written but not yet given
    /// blocks (delayed allocation holds them in the page cache) read as zeros: the flash
    /// holds nothing of them.
    pub fn read_file(&mut self, path: &str, who: Cred) -> Result<Vec<u8>, FsError> {
        let (size_bytes, extents, _) = self.file_extents(path, who)?;
        let bs = self.ns.layout().block_bytes;
        let mut out = vec![0u8; size_bytes as usize];
        let on_flash = extents.iter().map(|r| r.pages * bs).sum::<u64>();
        let ranges = byte_ranges(&extents, bs, size_bytes.min(on_flash));
        let held = ranges.iter().map(|r| r.1).sum::<u64>() as usize;
        let keep = self.device.ftl().keeps_payloads();
        let c = self.device.read_ranges(
            IoPath::Host,
            self.clock,
            &ranges,
            keep.then_some(&mut out[..held]),
        )?;
        self.clock = c.done;
        Ok(out)
    }
}

/// Whole-file helpers for building data sets and index files.
impl HostFs {
    /// The regular files directly inside directory `path` (names in directory order), for a
    /// caller who may list it. Names starting with `.ndpmeta` are LightFS's own and skipped.
    pub fn list_files(&mut self, path: &str, who: Cred) -> Result<Vec<(String, Ino)>, FsError> {
        let (r, _) = self.lookup(path, who)?;
        self.check_listable(r.ino, path, who)?;
        let base = path.trim_end_matches('/');
        Ok(self
            .ns
            .entries_of(r.ino)
            .filter(|e| e.name != crate::ndp::NDPMETA_NAME)
            .filter(|e| self.ns.inode(e.ino).is_some_and(|i| !i.is_dir()))
            .map(|e| (format!("{base}/{}", e.name), e.ino))
            .collect())
    }

    /// Writes `data` as the whole content of `path` straight to the device and waits
    /// (`O_DIRECT` + `fsync`), creating the file if needed. Blocks are reused in place when
    /// the size in blocks is unchanged, else reallocated. Returns the file's ino and whether
    /// its extents changed.
    pub fn put_file(
        &mut self,
        path: &str,
        data: &[u8],
        perms: Perms,
        who: Cred,
    ) -> Result<(Ino, bool), FsError> {
        let put = self.put_file_unsynced(path, data, perms, who)?;
        // Durable on return: with a journal, that is a commit.
        self.commit(true)?;
        Ok(put)
    }

    /// [`HostFs::put_file`] whose inode change waits in the journal for the next commit
    /// ([`HostFs::commit_journal`]): one of many files a `sync` writes before its one commit.
    pub fn put_file_unsynced(
        &mut self,
        path: &str,
        data: &[u8],
        perms: Perms,
        who: Cred,
    ) -> Result<(Ino, bool), FsError> {
        let ino = match self.lookup(path, who) {
            Ok((r, _)) => r.ino,
            Err(FsError::Namespace(NsError::NotFound(_))) => {
                self.create(path, NewKind::File, perms, who)?
            }
            Err(e) => return Err(e),
        };
        let bs = self.ns.layout().block_bytes;
        let (_, old) = self
            .file_layout(ino)
            .ok_or_else(|| FsError::IsADirectory(path.to_string()))?;
        let old = old.to_vec();
        let need = (data.len() as u64).div_ceil(bs);
        let moved = old.iter().map(|r| r.pages).sum::<u64>() != need;
        let runs = if moved {
            for r in &old {
                self.alloc.free(*r).map_err(NsError::from)?;
            }
            self.alloc.allocate(need, None).map_err(NsError::from)?
        } else {
            old
        };
        self.place(ino, runs, data)?;
        Ok((ino, moved))
    }
}

/// Namespace changes: each writes the metadata blocks it touches through the device.
impl HostFs {
    fn free_runs(&mut self, runs: &[Extent]) -> Result<(), FsError> {
        for r in runs {
            self.alloc.free(*r).map_err(NsError::from)?;
        }
        Ok(())
    }

    /// `unlink` or `rmdir`, after the walk to the name and its inode (`filename_parentat`,
    /// then the victim's lookup), charged as a lookup.
    fn remove(&mut self, path: &str, dir: bool, who: Cred) -> Result<Removed, FsError> {
        let (walked, _) = self.lookup_nofollow(path, who)?;
        let r = self.ns.remove_resolved(path, &walked, dir, who)?;
        if r.inode_freed {
            self.free_runs(&r.blocks)?;
            self.cache.forget(r.ino);
            self.debug_check_cache(r.ino);
        }
        let layout = *self.ns.layout();
        let writes = [
            layout.inode_write(r.ino),
            layout.inode_write(r.parent),
            layout.entry_header(r.dir_block),
        ];
        self.write_meta(writes)?;
        // The directory's entries changed: an `fsync` of it must commit.
        self.inode_changed(r.parent, true)?;
        Ok(r)
    }

    /// `unlink`: removes a name; with a file's last, the file goes, its blocks freed and its
    /// dirty pages dropped. Says which inode lost it and from which directory, so callers
    /// need not look the path up again.
    pub fn unlink(&mut self, path: &str, who: Cred) -> Result<Removed, FsError> {
        self.remove(path, false, who)
    }

    /// `rmdir`: removes an empty directory.
    pub fn rmdir(&mut self, path: &str, who: Cred) -> Result<Removed, FsError> {
        self.remove(path, true, who)
    }

    /// `rename`: moves a file or directory, replacing a file at the destination. Says what
    /// moved between which directories, and what it replaced.
    ///
    /// Both paths are walked first, as `renameat2` walks each to its parent and looks up
    /// both names: the source to its inode, the destination as far as it goes.
    pub fn rename(&mut self, from: &str, to: &str, who: Cred) -> Result<Renamed, FsError> {
        let (walked, _) = self.lookup_nofollow(from, who)?;
        self.lookup_partial(to, who)?;
        let r = self
            .ns
            .rename_resolved(from, &walked, to, who, &mut self.alloc)?;
        if let Some(gone) = r.replaced.as_ref().filter(|g| g.inode_freed) {
            self.free_runs(&gone.blocks)?;
            self.cache.forget(gone.ino);
        }
        if r.dir_blocks.is_empty() {
            return Ok(r); // two names of one file: nothing changed
        }
        let layout = *self.ns.layout();
        let mut writes = vec![
            layout.inode_write(r.ino),
            layout.inode_write(r.old_parent),
            layout.inode_write(r.new_parent),
        ];
        writes.extend(r.dir_blocks.iter().map(|&b| layout.entry_header(b)));
        writes.extend(self.ns.entry_write(r.new_parent, r.ino));
        self.write_meta(writes)?;
        self.inode_changed(r.old_parent, true)?;
        self.inode_changed(r.new_parent, true)?;
        Ok(r)
    }

    /// `link`: gives the file or symbolic link `from` the further name `to`. As ext4, it
    /// writes the inode (its link count and ctime), the new name's directory block, and that
    /// directory's inode; an `fsync` of either must commit.
    ///
    /// The source is walked to its inode and the new name as far as it goes first
    /// (`linkat`'s `filename_lookup`, then `filename_create`), each charged as a lookup.
    pub fn link(&mut self, from: &str, to: &str, who: Cred) -> Result<Linked, FsError> {
        self.link_as(from, to, who, false)
    }

    fn link_as(
        &mut self,
        from: &str,
        to: &str,
        who: Cred,
        follow: bool,
    ) -> Result<Linked, FsError> {
        match follow {
            true => self.lookup(from, who)?,
            false => self.lookup_nofollow(from, who)?,
        };
        self.lookup_partial(to, who)?;
        let l = self.ns.link(from, to, who, &mut self.alloc, follow)?;
        let layout = *self.ns.layout();
        let entry = self.ns.entry_write(l.parent, l.ino);
        self.write_meta([
            layout.inode_write(l.ino),
            layout.inode_write(l.parent),
            entry.unwrap_or(layout.entry_header(l.dir_block)),
        ])?;
        self.inode_changed(l.ino, false)?;
        self.inode_changed(l.parent, true)?;
        Ok(l)
    }

    /// `fallocate` with mode 0 (`keep_size` false) or `FALLOC_FL_KEEP_SIZE`: sets blocks
    /// aside for the file through `offset + len`, so its writes there need no allocation at
    /// writeback and land in one place, and (without `keep_size`) makes it that long. As
    /// ext4's unwritten extents, the blocks read as zeros, without I/O, until written; the
    /// extent tree's change is journaled (or written in place) now, and the writeback that
    /// first writes a block changes it again (ext4's conversion of unwritten extents).
    pub fn fallocate(
        &mut self,
        fd: Fd,
        offset: u64,
        len: u64,
        keep_size: bool,
    ) -> Result<(), FsError> {
        self.writable(fd)?;
        if len == 0 {
            return Err(FsError::EmptyAllocation { fd: fd.0, offset });
        }
        let end = file_end(offset, len)?;
        let (ino, size, extents) = self.live_layout(fd)?;
        let want = end.div_ceil(self.ns.layout().block_bytes);
        let reserved = self.ns.reserved_mut(ino)?;
        let have: u64 = extents.iter().chain(reserved.iter()).map(|r| r.pages).sum();
        let allocated = want > have;
        if allocated {
            let goal = reserved.last().or(extents.last()).map(Extent::end);
            let runs = self
                .alloc
                .allocate(want - have, goal)
                .map_err(NsError::from)?;
            let reserved = self.ns.reserved_mut(ino)?;
            for r in runs {
                match reserved.last_mut() {
                    Some(l) if l.end() == r.first.0 => l.pages += r.pages,
                    _ => reserved.push(r),
                }
            }
        }
        let grew = !keep_size && end > size;
        if grew {
            self.ns.set_file_layout(ino, end, extents)?;
        }
        if allocated || grew {
            self.write_meta([self.ns.layout().inode_write(ino)])?;
        }
        // Its ctime and mtime change whatever it allocated (`file_modified`).
        self.inode_changed(ino, allocated || grew)
    }

    /// `truncate`: sets a file's size; blocks past the new end are freed and their dirty
    /// pages dropped.
    pub fn truncate(&mut self, path: &str, len: u64, who: Cred) -> Result<(), FsError> {
        file_end(0, len)?;
        let (r, _) = self.lookup(path, who)?;
        let inode = self.ns.inode(r.ino).expect("resolved");
        if !inode.perms.allows(who, Access::Write) {
            return Err(FsError::PermissionDenied {
                path: path.to_string(),
                access: Access::Write.name(),
            });
        }
        let Some((size, extents)) = self.file_layout(r.ino) else {
            return Err(FsError::IsADirectory(path.to_string()));
        };
        let extents = extents.to_vec();
        let bs = self.ns.layout().block_bytes;
        let keep_blocks = len.div_ceil(bs);
        let (kept, freed) = split_runs(&extents, keep_blocks);
        self.free_runs(&freed)?;
        // Blocks fallocate set aside past the end go too, unless the file grows (ext4
        // truncates past i_size only when the size does not rise).
        if len <= size {
            let have: u64 = kept.iter().map(|r| r.pages).sum();
            let reserved = self.ns.reserved_mut(r.ino)?;
            let (still, gone) = split_runs(reserved, keep_blocks.saturating_sub(have));
            *reserved = still;
            self.free_runs(&gone)?;
        }
        self.cache.forget_from(r.ino, keep_blocks);
        self.ns.set_file_layout(r.ino, len, kept)?;
        self.write_meta([self.ns.layout().inode_write(r.ino)])?;
        self.inode_changed(r.ino, true)?;
        self.debug_check_cache(r.ino);
        Ok(())
    }

    /// One file's dirty pages: each lies inside the file's size, holds a whole block (when
    /// payloads are kept) and was dirtied no later than any actor has reached. A file that is
    /// gone has none.
    fn check_cache_of(&self, ino: Ino) -> Result<(), String> {
        let bs = self.ns.layout().block_bytes;
        let blocks = match self.file_layout(ino) {
            Some((size, _)) => size.div_ceil(bs),
            None => 0,
        };
        for index in self.cache.dirty_blocks(ino) {
            if index >= blocks {
                return Err(format!(
                    "dirty block {index} of {ino:?} lies past its {blocks} blocks"
                ));
            }
            let page = self.cache.get(ino, index).expect("listed as dirty");
            if page.data.as_ref().is_some_and(|d| d.len() as u64 != bs) {
                return Err(format!("dirty block {index} of {ino:?} is not {bs} bytes"));
            }
            if page.dirtied > self.clock.max(self.reached) {
                return Err(format!(
                    "dirty block {index} of {ino:?} was dirtied in the future"
                ));
            }
        }
        Ok(())
    }

    /// [`HostFs::check_cache_of`] after each write, truncation and removal, in debug builds.
    #[inline]
    fn debug_check_cache(&self, _ino: Ino) {
        #[cfg(debug_assertions)]
        if let Err(e) = self.check_cache_of(_ino) {
            panic!("page cache invariant broken: {e}");
        }
    }

    /// The namespace's invariants hold; every dirty page belongs to a live file and passes
    /// [`HostFs::check_cache_of`]; the journal's blocks not yet home are cached; and the device's own invariants hold.
    /// O(dirty pages + device), for tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.ns.check_invariants()?;
        let mut inos: Vec<Ino> = self.cache.iter().map(|(ino, _, _)| ino).collect();
        inos.dedup();
        for ino in inos {
            if self.file_layout(ino).is_none() {
                return Err(format!("dirty pages of {ino:?}, which is not a file"));
            }
            self.check_cache_of(ino)?;
        }
        if let Some(j) = &self.journal {
            j.check()?;
            if let Some(b) = j.held().find(|b| !self.cached.contains_key(b)) {
                return Err(format!(
                    "metadata block {b} is dirty in the journal but not in the host's cache"
                ));
            }
        }
        self.device.check_invariants()
    }
}

/// File I/O through the page cache.
impl HostFs {
    fn open_file(&self, fd: Fd) -> Result<&OpenFile, FsError> {
        self.fds.get(&fd).ok_or(FsError::BadFd(fd.0))
    }

    /// `fd`'s open file, if it was opened for writing.
    fn writable(&self, fd: Fd) -> Result<&OpenFile, FsError> {
        let f = self.open_file(fd)?;
        if !f.write {
            return Err(FsError::FdMode {
                fd: fd.0,
                path: f.path.clone(),
                access: "writing",
            });
        }
        Ok(f)
    }

    /// Opens (or creates) a file for reading or writing, following symbolic links.
    pub fn open(&mut self, path: &str, how: OpenOptions, who: Cred) -> Result<Fd, FsError> {
        let ino = match how.create {
            None => self.lookup(path, who)?.0.ino,
            // One walk finds the file or the directory to create it in, and costs what it
            // read either way. Through a dangling link it is the link's target that is
            // created, as Linux does.
            Some(perms) => match self.ns.resolve_for_create(path, who)? {
                CreateAt::Found(r) => self.charge_lookup(r)?.0.ino,
                CreateAt::Missing { dir, target } => {
                    let dir = self.charge_lookup(dir)?.0.ino;
                    let (kind, alloc) = (NewKind::File, &mut self.alloc);
                    let ino = match target {
                        None => self.ns.create_in(dir, path, kind, perms, who, alloc)?,
                        // The link's target directory, which the path does not spell, is
                        // named by the link in errors.
                        Some(name) => {
                            let at = NewName {
                                dir,
                                name: &name,
                                path,
                                dir_path: path,
                            };
                            self.ns.create_named(at, kind, perms, who, alloc)?
                        }
                    };
                    self.write_created(ino)?;
                    ino
                }
            },
        };
        let inode = self.ns.inode(ino).expect("resolved");
        if inode.is_dir() && how.write {
            return Err(FsError::IsADirectory(path.to_string()));
        }
        let access = if how.write {
            Access::Write
        } else {
            Access::Read
        };
        if !inode.perms.allows(who, access) {
            return Err(FsError::PermissionDenied {
                path: path.to_string(),
                access: access.name(),
            });
        }
        Ok(self.new_fd(ino, path, how.write))
    }

    /// A new descriptor on `ino`, which holds the inode until its close.
    fn new_fd(&mut self, ino: Ino, path: &str, write: bool) -> Fd {
        let fd = Fd(self.next_fd);
        self.next_fd += 1;
        self.ns.hold(ino);
        let file = OpenFile {
            ino,
            path: path.to_string(),
            write,
        };
        self.fds.insert(fd, file);
        fd
    }

    /// A descriptor on the file a shared mapping holds, for writing its pages: the mapping
    /// took the inode when it was made, so nothing is walked, checked or charged, and no
    /// design sees an open (the kernel writes a mapping's pages through the inode).
    pub fn open_mapped(&mut self, path: &str) -> Result<Fd, FsError> {
        let ino = self.ns.find(path, Cred::ROOT)?;
        if self.file_layout(ino).is_none() {
            return Err(FsError::IsADirectory(path.to_string()));
        }
        Ok(self.new_fd(ino, path, true))
    }

    /// The inode an open file refers to.
    pub fn fd_ino(&self, fd: Fd) -> Result<Ino, FsError> {
        Ok(self.open_file(fd)?.ino)
    }

    /// The size of the file `fd` refers to (bytes written so far, dirty or not): where an
    /// `O_APPEND` write lands.
    pub fn fd_size(&self, fd: Fd) -> Result<u64, FsError> {
        let ino = self.open_file(fd)?.ino;
        let (size, _) = self.file_layout(ino).ok_or(FsError::Stale(fd.0))?;
        Ok(size)
    }

    /// The size and extents of the file `fd` refers to. A file unlinked while open lives on
    /// until its last close, as POSIX keeps it (`Stale` guards a descriptor whose inode is
    /// gone all the same, which no call here brings about).
    fn live_layout(&self, fd: Fd) -> Result<(Ino, u64, Vec<Extent>), FsError> {
        let ino = self.open_file(fd)?.ino;
        let (size, extents) = self.file_layout(ino).ok_or(FsError::Stale(fd.0))?;
        Ok((ino, size, extents.to_vec()))
    }

    /// A file's size (bytes written so far, dirty or not) and allocated extents.
    pub fn file_layout(&self, ino: Ino) -> Option<(u64, &[Extent])> {
        match &self.ns.inode(ino)?.kind {
            InodeKind::File {
                size_bytes,
                extents,
                ..
            } => Some((*size_bytes, extents)),
            InodeKind::Dir { .. } | InodeKind::Symlink { .. } => None,
        }
    }

    /// The device block holding block `index` of a file, if allocated.
    fn block_of(&self, ino: Ino, index: u64) -> Option<u64> {
        let (_, extents) = self.file_layout(ino)?;
        let mut skip = index;
        for r in extents {
            if skip < r.pages {
                return Some(r.first.0 + skip);
            }
            skip -= r.pages;
        }
        None
    }

    /// A block's current contents as the host sees them: dirty page, else the device.
    fn host_block(&mut self, ino: Ino, index: u64) -> Result<Vec<u8>, FsError> {
        let bs = self.ns.layout().block_bytes as usize;
        if let Some(p) = self.cache.get(ino, index) {
            return Ok(p.data.clone().unwrap_or_else(|| vec![0; bs]));
        }
        let mut buf = vec![0u8; bs];
        let keep = self.device.ftl().keeps_payloads();
        self.read_uncached(ino, index, keep.then_some(&mut buf[..]))?;
        Ok(buf)
    }

    /// Reads a block the page cache lacks from the device, into `out` when given (a block
    /// never allocated is zeros, read without I/O).
    fn read_uncached(
        &mut self,
        ino: Ino,
        index: u64,
        out: Option<&mut [u8]>,
    ) -> Result<(), FsError> {
        if let Some(block) = self.block_of(ino, index) {
            let c = self
                .device
                .read(IoPath::Host, self.clock, Lpn(block), 1, out)?;
            self.clock = c.done;
        }
        Ok(())
    }

    /// Writes `data` at `offset` into the page cache. Nothing reaches the device until
    /// writeback; blocks past the allocated end are allocated then (delayed allocation).
    pub fn write(&mut self, fd: Fd, offset: u64, data: &[u8]) -> Result<(), FsError> {
        let ino = self.writable(fd)?.ino;
        self.live_layout(fd)?;
        let bs = self.ns.layout().block_bytes;
        let keep = self.device.ftl().keeps_payloads();
        let end = file_end(offset, data.len() as u64)?;
        let mut pos = offset;
        while pos < end {
            let index = pos / bs;
            let within = pos % bs;
            let n = (bs - within).min(end - pos);
            let page = if keep {
                let from = (pos - offset) as usize;
                let src = &data[from..from + n as usize];
                if n == bs {
                    // A whole block: copied as it is, not zeroed first.
                    Some(src.to_vec())
                } else {
                    let mut block = self.host_block(ino, index)?;
                    block[within as usize..(within + n) as usize].copy_from_slice(src);
                    Some(block)
                }
            } else {
                // Timing only: a partial block's read-modify-write reads it, into nothing.
                if n < bs && self.cache.get(ino, index).is_none() {
                    self.read_uncached(ino, index, None)?;
                }
                None
            };
            self.cache.dirty(ino, index, page, self.clock);
            pos += n;
        }
        let (_, size, extents) = self.live_layout(fd)?;
        let grew = end > size;
        if grew {
            self.ns.set_file_layout(ino, end, extents)?;
        }
        // The write's new mtime (and size) dirty the inode: an `fsync` commits it.
        self.inode_changed(ino, grew)?;
        self.debug_check_cache(ino);
        Ok(())
    }

    /// What a write fault on a mapping of `fd`'s file reads of `offset..offset + len`: each
    /// block the page cache lacks that is on the device, into nothing (the stores that follow
    /// replace it). A hole is zeros, read without I/O.
    pub fn fault_in(&mut self, fd: Fd, offset: u64, len: u64) -> Result<(), FsError> {
        let ino = self.open_file(fd)?.ino;
        let bs = self.ns.layout().block_bytes;
        let end = file_end(offset, len)?;
        for index in offset / bs..end.div_ceil(bs) {
            if self.cache.get(ino, index).is_none() {
                self.read_uncached(ino, index, None)?;
            }
        }
        Ok(())
    }

    /// Reads up to `len` bytes at `offset` as the host sees the file (dirty pages included).
    pub fn read(&mut self, fd: Fd, offset: u64, len: u64) -> Result<Vec<u8>, FsError> {
        let (ino, size, _) = self.live_layout(fd)?;
        let end = offset.saturating_add(len).min(size);
        let bs = self.ns.layout().block_bytes;
        let mut out = Vec::with_capacity(end.saturating_sub(offset) as usize);
        let mut pos = offset;
        while pos < end {
            let block = self.host_block(ino, pos / bs)?;
            let within = (pos % bs) as usize;
            let n = ((bs - pos % bs).min(end - pos)) as usize;
            out.extend_from_slice(&block[within..within + n]);
            pos += n as u64;
        }
        Ok(out)
    }

    /// Closes a file. Like POSIX `close`, this does not write anything back.
    ///
    /// The last close of a file unlinked (or renamed over) while open frees it: its blocks,
    /// its dirty pages dropped unwritten, and its inode, written as ext4's orphan cleanup
    /// writes it.
    pub fn close(&mut self, fd: Fd) -> Result<Ino, FsError> {
        let ino = self
            .fds
            .remove(&fd)
            .map(|f| f.ino)
            .ok_or(FsError::BadFd(fd.0))?;
        if let Some(blocks) = self.ns.release(ino) {
            self.free_runs(&blocks)?;
            self.cache.forget(ino);
            self.write_meta([self.ns.layout().inode_write(ino)])?;
            self.debug_check_cache(ino);
        }
        Ok(ino)
    }

    /// Whether any descriptor has `ino` open for writing.
    pub fn open_for_write(&self, ino: Ino) -> bool {
        self.fds.values().any(|f| f.ino == ino && f.write)
    }

    /// Allocates device blocks for every dirty block of `ino` past its allocated end, as
    /// ext4's delayed allocation does when writeback starts. Returns whether the layout
    /// changed (the inode block must be written too).
    fn allocate_delayed(&mut self, ino: Ino) -> Result<bool, FsError> {
        match self.cache.dirty_blocks(ino).last() {
            Some(&last) => self.allocate_through(ino, last),
            None => Ok(false),
        }
    }

    /// Gives the file blocks up to block index `last`, if it lacks them; says whether it
    /// took any.
    fn allocate_through(&mut self, ino: Ino, last: u64) -> Result<bool, FsError> {
        let Some((size, extents)) = self.file_layout(ino) else {
            return Ok(false);
        };
        let have: u64 = extents.iter().map(|r| r.pages).sum();
        if last < have {
            return Ok(false);
        }
        let mut extents = extents.to_vec();
        let need = last + 1 - have;
        // Blocks fallocate set aside come first; only what they lack is allocated now.
        let reserved = self.ns.reserved_mut(ino)?;
        let (mut runs, rest) = split_runs(reserved, need);
        *reserved = rest;
        let taken: u64 = runs.iter().map(|r| r.pages).sum();
        if taken < need {
            let goal = runs.last().or(extents.last()).map(Extent::end);
            runs.extend(
                self.alloc
                    .allocate(need - taken, goal)
                    .map_err(NsError::from)?,
            );
        }
        for r in runs {
            match extents.last_mut() {
                Some(l) if l.end() == r.first.0 => l.pages += r.pages,
                _ => extents.push(r),
            }
        }
        self.ns.set_file_layout(ino, size, extents)?;
        Ok(true)
    }

    /// Writes the given dirty pages to the device, each as its own command, all submitted at
    /// the host's clock; returns when the last one completed.
    fn write_back(&mut self, pages: &[(Ino, u64)]) -> Result<VirtualTime, FsError> {
        let at = self.clock;
        let mut done = at;
        let mut inodes = BTreeSet::new();
        for &(ino, _) in pages {
            if self.allocate_delayed(ino)? {
                let inode = self.ns.layout().inode_write(ino);
                inodes.insert(inode);
                if let Some(j) = &mut self.journal {
                    j.inode_changed(ino, inode.block, true);
                }
            }
        }
        for &(ino, index) in pages {
            let Some(page) = self.cache.take(ino, index) else {
                continue;
            };
            // Allocated above, unless the file went away in between.
            let Some(block) = self.block_of(ino, index) else {
                continue;
            };
            let c = self
                .device
                .write(IoPath::Host, at, Lpn(block), 1, page.data.as_deref())?;
            if self.watch_writes {
                self.written.push(block);
            }
            done = done.max(c.done);
        }
        let clock = self.clock;
        self.write_meta(inodes)?;
        done = done.max(self.clock);
        self.clock = clock;
        Ok(done)
    }

    /// Starts writeback of one file the way `sync` does: allocates its delayed blocks and
    /// returns the logical blocks about to be written (LightFS's periodic updater sends these
    /// with the new layout so the device knows what to wait for).
    pub fn prepare_writeback(&mut self, ino: Ino) -> Result<Vec<u64>, FsError> {
        if self.allocate_delayed(ino)? {
            let clock = self.clock;
            self.write_meta([self.ns.layout().inode_write(ino)])?;
            self.inode_changed(ino, true)?;
            self.clock = clock;
        }
        Ok(self
            .cache
            .dirty_blocks(ino)
            .into_iter()
            .filter_map(|i| self.block_of(ino, i))
            .collect())
    }

    /// `fsync`: writes back the file's dirty pages (in the block layer's order) and waits.
    pub fn fsync(&mut self, fd: Fd) -> Result<(), FsError> {
        let ino = self.open_file(fd)?.ino;
        self.sync_file(ino)
    }

    /// `fdatasync`: as `fsync`, but a change to the inode's timestamps alone does not make
    /// it wait for a journal commit.
    pub fn fdatasync(&mut self, fd: Fd) -> Result<(), FsError> {
        let ino = self.open_file(fd)?.ino;
        self.sync_ino(ino, true)
    }

    /// Writes back one file's dirty pages and waits (what `fsync` and LightFS-Host's periodic
    /// updater do).
    pub fn sync_file(&mut self, ino: Ino) -> Result<(), FsError> {
        self.sync_ino(ino, false)
    }

    fn sync_ino(&mut self, ino: Ino, data_only: bool) -> Result<(), FsError> {
        self.write_back_file(ino)?;
        self.commit_for(ino, data_only)
    }

    /// Writes back every dirty page of the file and waits, committing nothing: what `sync`
    /// does for each file before its one journal commit ([`HostFs::commit_journal`]).
    pub fn write_back_file(&mut self, ino: Ino) -> Result<(), FsError> {
        let pages = self.cache.pick_file(ino);
        self.clock = self.write_back(&pages)?;
        Ok(())
    }

    /// ext4_sync_file: if the running transaction holds a change to the file this sync must
    /// make durable, jbd2 commits that transaction, all of it, and the caller waits.
    fn commit_for(&mut self, ino: Ino, data_only: bool) -> Result<(), FsError> {
        if self
            .journal
            .as_ref()
            .is_some_and(|j| j.must_commit_for(ino, data_only))
        {
            self.commit(true)?;
        }
        Ok(())
    }

    /// A write that is on the device when it returns, with no page cache: what a file
    /// system on byte-addressable memory does (ISPFS §3.1 reaches PCM with the CPU's stores).
    /// Blocks the range lacks are allocated at once (there is nothing to delay allocation
    /// for), the bytes go to the device as one request of their ranges (a byte-addressable
    /// medium stores only those bytes), then the inode: all of it when the file took blocks,
    /// else its size and times.
    pub fn store(&mut self, fd: Fd, offset: u64, data: &[u8]) -> Result<(), FsError> {
        let ino = self.writable(fd)?.ino;
        let len = data.len() as u64;
        let end = file_end(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        // Pages an earlier buffered write left dirty go first, or they would overwrite this.
        self.flush_range(fd, offset, len)?;
        let bs = self.ns.layout().block_bytes;
        let allocated = self.allocate_through(ino, (end - 1) / bs)?;
        let (_, size, extents) = self.live_layout(fd)?;
        let ranges = file_ranges(&extents, bs, offset, len);
        let keep = self.device.ftl().keeps_payloads();
        let c =
            self.device
                .write_ranges(IoPath::Host, self.clock, &ranges, keep.then_some(data))?;
        self.clock = c.done;
        let grew = end > size;
        if grew {
            self.ns.set_file_layout(ino, end, extents)?;
        }
        let layout = self.ns.layout();
        let inode = if allocated {
            layout.inode_write(ino)
        } else {
            layout.inode_times(ino)
        };
        self.write_meta([inode])?;
        self.inode_changed(ino, grew)
    }

    /// Writes back the file's dirty pages in `offset..offset + len`, in file order, and
    /// waits for them (Linux's `filemap_write_and_wait_range`). An `O_DIRECT` write's bytes
    /// reach the device so before it returns (staged by [`HostFs::write`], whose
    /// read-modify-write of a partial block stands in for the device's own), and a direct
    /// read first makes the device's copy current. New blocks are allocated here, and the
    /// new size and blocks join the running transaction as a buffered write's do.
    pub fn flush_range(&mut self, fd: Fd, offset: u64, len: u64) -> Result<(), FsError> {
        let ino = self.open_file(fd)?.ino;
        let bs = self.ns.layout().block_bytes;
        let end = file_end(offset, len)?;
        let pages = self.cache.dirty_in(ino, offset / bs..end.div_ceil(bs));
        if !pages.is_empty() {
            self.clock = self.write_back(&pages)?;
        }
        Ok(())
    }

    /// `sync_file_range`: with `write` (`SYNC_FILE_RANGE_WRITE`) the file's dirty pages in
    /// `offset..offset + len` (`len` 0: to the end of the file) start their writeback, in
    /// file order; with `wait_after` the caller waits until they are on the device. Nothing
    /// is committed: new blocks are allocated and join the running transaction, as at any
    /// writeback, but no metadata is made durable (the man page's warning). The page cache
    /// keeps no pages under writeback, so there is nothing for `SYNC_FILE_RANGE_WAIT_BEFORE`,
    /// or a wait without a write, to wait for.
    pub fn sync_file_range(
        &mut self,
        fd: Fd,
        offset: u64,
        len: u64,
        write: bool,
        wait_after: bool,
    ) -> Result<(), FsError> {
        let ino = self.open_file(fd)?.ino;
        let bs = self.ns.layout().block_bytes;
        let end = match len {
            0 => file_end(offset, 0).map(|_| MAX_FILE_BYTES)?,
            _ => file_end(offset, len)?,
        };
        let pages = self.cache.dirty_in(ino, offset / bs..end.div_ceil(bs));
        if write && !pages.is_empty() {
            let done = self.write_back(&pages)?;
            if wait_after {
                self.clock = done;
            }
        }
        Ok(())
    }

    /// What a write through an `O_DSYNC` (`data_only`) or `O_SYNC` fd waits for after it:
    /// its range written back, then the commit `fdatasync` or `fsync` would wait for
    /// (Linux's `generic_write_sync`).
    pub fn sync_written(
        &mut self,
        fd: Fd,
        offset: u64,
        len: u64,
        data_only: bool,
    ) -> Result<(), FsError> {
        self.flush_range(fd, offset, len)?;
        let ino = self.open_file(fd)?.ino;
        self.commit_for(ino, data_only)
    }

    /// `sync`: writes back every dirty page and waits.
    pub fn sync(&mut self) -> Result<(), FsError> {
        let pages = self.cache.pick(usize::MAX, |_, _| true);
        self.clock = self.write_back(&pages)?;
        // Then the journal: commit, and every committed block home (`sync_blockdev`).
        self.commit(true)?;
        if let Some(home) = self.journal.as_mut().map(Journal::take_all) {
            self.write_in_place(home)?;
        }
        Ok(())
    }

    /// One partial writeback pass: up to `max_pages` dirty pages, chosen and ordered by the
    /// seeded generator, reach the device. The host does not wait for them. Returns how many
    /// were written.
    pub fn writeback_some(&mut self, max_pages: usize) -> Result<usize, FsError> {
        let pages = self.cache.pick(max_pages, |_, _| true);
        self.write_back(&pages)?;
        Ok(pages.len())
    }

    /// Runs the kernel flusher up to the host's clock: pages that had been dirty for longer
    /// than the expiry at one of its wake-ups are written back, in random order. They are
    /// submitted now rather than at the wake-up (the device has already served later
    /// commands, and its timelines only move forward). Returns pages written.
    pub fn run_flusher(&mut self) -> Result<usize, FsError> {
        let interval = self.policy.interval_ns.max(1);
        let wakes = self.clock.since(self.flushed_at) / interval;
        if wakes == 0 {
            self.journal_background(None)?;
            return Ok(0);
        }
        let last_wake = self.flushed_at.after(wakes * interval);
        self.flushed_at = last_wake;
        self.journal_background(Some(last_wake))?;
        let expire = self.policy.expire_ns;
        let pages = self
            .cache
            .pick(usize::MAX, |_, p| last_wake.since(p.dirtied) >= expire);
        self.write_back(&pages)?;
        Ok(pages.len())
    }

    /// Starts recording the data blocks written back, for [`HostFs::take_written`].
    pub fn watch_writes(&mut self) {
        self.watch_writes = true;
    }

    /// Device blocks written back since the last call, in order: the stream of write
    /// commands a device-side block monitor observes (after [`HostFs::watch_writes`]).
    pub fn take_written(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.written)
    }
}

/// The device byte ranges holding file bytes `offset..offset + len` of a file laid out in
/// `runs` (which must cover them).
pub fn file_ranges(runs: &[Extent], block_bytes: u64, offset: u64, len: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let (mut at, end) = (offset, offset + len);
    let mut run_start = 0u64;
    for r in runs {
        let run_end = run_start + r.pages * block_bytes;
        if at < end && at < run_end {
            let to = end.min(run_end);
            out.push((r.first.0 * block_bytes + (at - run_start), to - at));
            at = to;
        }
        run_start = run_end;
    }
    out
}

/// The device byte ranges holding the first `len` bytes of a file laid out in `runs`.
pub fn byte_ranges(runs: &[Extent], block_bytes: u64, len: u64) -> Vec<(u64, u64)> {
    file_ranges(runs, block_bytes, 0, len)
}

/// Lending files to a task that runs on the device (a trace's `isc` op, TxISC): the host
/// writes the files' dirty pages back ([`HostFs::sync_file`]), lends the device and a
/// reservation of free blocks to the task runtime, and takes back the device, what was left
/// of the reservation and the files' new layouts.
impl HostFs {
    /// Reserves up to `blocks` free blocks for device-side growth of files.
    pub fn reserve_blocks(&mut self, blocks: u64) -> Result<Vec<Extent>, FsError> {
        let blocks = blocks.min(self.alloc.free_blocks());
        Ok(self.alloc.allocate(blocks, None).map_err(NsError::from)?)
    }

    /// Returns blocks of a reservation the task did not use.
    pub fn release_blocks(&mut self, runs: &[Extent]) -> Result<(), FsError> {
        self.free_runs(runs)
    }

    /// Takes a device-side task's growth of `ino` into the file system: its size and extents
    /// (the old ones, then blocks from a reservation). Writes the inode block.
    pub fn adopt_layout(
        &mut self,
        ino: Ino,
        size_bytes: u64,
        extents: Vec<Extent>,
    ) -> Result<(), FsError> {
        self.ns.set_file_layout(ino, size_bytes, extents)?;
        self.write_meta([self.ns.layout().inode_write(ino)])?;
        self.inode_changed(ino, true)
    }

    /// Lends the device, by value, to `f` (the task runtime, whose wasmtime store must own
    /// what it works on) and takes back the device `f` returns. Nothing stands in for it
    /// meanwhile: a panic inside `f` (a bug) aborts the process.
    pub fn lend_device<R>(&mut self, f: impl FnOnce(Device) -> (R, Device)) -> R {
        replace_with::replace_with_or_abort_and_return(&mut self.device, f)
    }
}

/// One `link` or `linkat` call: `from` takes the further name `to`. With `follow`
/// (`AT_SYMLINK_FOLLOW`, `ln -L`) a symbolic link at the end of `from` is followed and the
/// file it leads to takes the name; without, as `link(2)`, the link itself does.
#[derive(Clone, Copy, Debug)]
pub struct Link<'a> {
    pub from: &'a str,
    pub to: &'a str,
    pub follow: bool,
}

impl Link<'_> {
    /// Makes the name in `fs` ([`HostFs::link`]).
    pub fn apply(self, fs: &mut HostFs, who: Cred) -> Result<Linked, FsError> {
        fs.link_as(self.from, self.to, who, self.follow)
    }
}
