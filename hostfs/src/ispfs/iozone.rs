//! ISPFS's file-system comparison (ISPFS §5.1, Fig. 7): iozone's rewrite, reread, random
//! write and random read through ISPFS and through an EXT4-like path, per file and record
//! size, through POSIX calls or a mapping of the file ([`Interface`]: §5.1 ran both), on the
//! medium the paper ran them on.
//!
//! **The medium.** §5.1: "Because it is hard to implement EXT4 on PCM chips, we used DRAM as a
//! storage medium and mounted EXT4 on the RAMDisk block device to provide equivalent hardware
//! conditions." So by default ([`Medium::Dram`]) both keep the file in the host's DRAM:
//! ISPFS in a region it maps as it maps the board, EXT4 on a RAM disk. The RAM disk's pages
//! come out of the same memory as the page cache (Table 1: 512 MB), so the paper's 256 MB
//! file leaves the page cache room for less than the file: EXT4 runs short of memory, not of
//! medium. [`Medium::Pcm`] runs both over ISPFS's PCM board instead, where ISPFS's writes
//! wait for the PCM's program time: what the board itself would give.
//!
//! - **ISPFS** has no page cache and no block layer (§3.1): a `read` or `write` is a system
//!   call and one copy between the user's buffer and the medium. On the PCM board a read
//!   moves at the slowest of the CPU's copy, the FMC link, and the CPU's programmed I/O or
//!   the PCM controllers ([`Engine::host_copy_ns`]), and a write waits for the device
//!   model's programs.
//! - **EXT4-like**: every call goes through the page cache, paying per 4 KiB page its work
//!   (`host.page_cache_page_ns`) and a copy. A page that is not cached is read through the
//!   block layer (`isp.block_request_ns` per request of at most `isp.readahead_bytes`) and
//!   copied from the RAM disk: sequential reads read ahead a window, random ones only their
//!   record (Linux's on-demand readahead); a write covering part of an uncached page reads it
//!   first. Pages are evicted least recently used first; reclaim rotates a dirty page instead
//!   of evicting it. The flusher thread, on the board's second Cortex-A9, writes dirty pages
//!   back in file order, merging contiguous ones into requests, from the moment they pass
//!   `vm.dirty_background_ratio` of the memory the page cache may use until they are under
//!   it again; past `vm.dirty_ratio` the writer waits for it (`balance_dirty_pages`).
//! - **Through a mapping** (`iozone -B`) a record is a copy into or out of the mapping, with
//!   no system call. ISPFS's fault handler maps the medium's own page: a fault per page
//!   (`host.page_fault_ns`). EXT4 faults as Linux 4.x's `filemap_fault` does ([`Mapping`]):
//!   fault-around for reads, read-around on a miss until `mmap_miss` says misses dominate,
//!   readahead marks, a read before every write fault, `page_mkwrite` and `page_mkclean`.
//!
//! Each test starts as iozone's previous pass leaves it: the file written, the page cache
//! holding as much of its end as fits, clean. As with iozone without `-e`, a test's time does
//! not include flushing what is still dirty at its end. Nothing is set per test: the four
//! tests differ only in their access order.

use super::IspfsError;
use csd_device::isp::engine::BLOCK_BYTES;
use csd_device::isp::{Engine, IspCosts};
use csd_device::rng::SimRng;
use csd_device::{DataMode, Device, IoPath, Profile, VirtualTime};
use serde::{Deserialize, Serialize};

mod page_cache;
use page_cache::PageCache;

/// Linux's default `vm.dirty_ratio` and `vm.dirty_background_ratio`: the shares of the
/// memory the page cache may use that dirty pages may take before the writer must wait, and
/// before the flusher starts.
const DIRTY_RATIO: f64 = 0.20;
const DIRTY_BACKGROUND_RATIO: f64 = 0.10;
/// The least the page cache must be left beside the RAM disk for a comparison to mean
/// anything.
const MIN_CACHE_BYTES: u64 = 16 << 20;
/// The largest file and record, and the most points a run takes.
pub const MAX_FILE_BYTES: u64 = 256 << 20;
pub const MAX_RECORD_BYTES: u64 = 16 << 20;
/// The smallest record: a sector (so a point is at most 512 Ki calls).
pub const MIN_RECORD_BYTES: u64 = 512;
pub const MAX_POINTS: usize = 64;

/// Where both file systems keep the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Medium {
    /// The host's DRAM, as §5.1 ran it: ISPFS in a mapped region, EXT4 on a RAM disk that
    /// shares the host's memory with the page cache.
    #[default]
    Dram,
    /// ISPFS's PCM board, for both.
    Pcm,
}

impl Medium {
    pub fn name(self) -> &'static str {
        match self {
            Medium::Dram => "dram",
            Medium::Pcm => "pcm",
        }
    }

    /// Runs saved before the medium was a choice ran on the board.
    fn saved_before_it_was_named() -> Medium {
        Medium::Pcm
    }
}

impl std::str::FromStr for Medium {
    type Err = String;

    fn from_str(s: &str) -> Result<Medium, String> {
        [Medium::Dram, Medium::Pcm]
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("'{s}' is not a medium: dram or pcm"))
    }
}

/// How iozone reaches the file (§5.1: "we accessed the file with POSIX and MMAP
/// interfaces").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Interface {
    /// A `read` or `write` system call per record.
    #[default]
    Posix,
    /// `iozone -B`: the file is mapped (shared for the write tests) at the start of each test
    /// and every record is copied into or out of the mapping; no system call per record,
    /// a page fault wherever a page is not mapped as the access needs it.
    Mmap,
}

impl Interface {
    pub const ALL: [Interface; 2] = [Interface::Posix, Interface::Mmap];

    pub fn name(self) -> &'static str {
        match self {
            Interface::Posix => "posix",
            Interface::Mmap => "mmap",
        }
    }

    /// Runs saved before the interface was a choice made system calls.
    fn saved_before_it_was_named() -> Vec<Interface> {
        vec![Interface::Posix]
    }
}

impl std::str::FromStr for Interface {
    type Err = String;

    fn from_str(s: &str) -> Result<Interface, String> {
        Interface::ALL
            .into_iter()
            .find(|i| i.name() == s)
            .ok_or_else(|| format!("'{s}' is not an interface: posix or mmap"))
    }
}

/// One of iozone's tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Test {
    Rewrite,
    Reread,
    RandomWrite,
    RandomRead,
}

impl Test {
    pub const ALL: [Test; 4] = [
        Test::Rewrite,
        Test::Reread,
        Test::RandomWrite,
        Test::RandomRead,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Test::Rewrite => "rewrite",
            Test::Reread => "reread",
            Test::RandomWrite => "random-write",
            Test::RandomRead => "random-read",
        }
    }

    pub fn writes(self) -> bool {
        matches!(self, Test::Rewrite | Test::RandomWrite)
    }

    fn random(self) -> bool {
        matches!(self, Test::RandomWrite | Test::RandomRead)
    }
}

/// What to run: every test through every interface at every (file, record) size with
/// record ≤ file, on one medium.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IozoneSpec {
    pub file_bytes: Vec<u64>,
    pub record_bytes: Vec<u64>,
    #[serde(default = "Medium::saved_before_it_was_named")]
    pub medium: Medium,
    #[serde(default = "Interface::saved_before_it_was_named")]
    pub interfaces: Vec<Interface>,
}

impl IozoneSpec {
    /// The paper's grid: a 256 MiB file, records of 1 KiB to 16 MiB, over DRAM, through
    /// both interfaces.
    pub fn default_grid() -> IozoneSpec {
        IozoneSpec {
            file_bytes: vec![MAX_FILE_BYTES],
            record_bytes: (10..=24).map(|s| 1u64 << s).collect(),
            medium: Medium::Dram,
            interfaces: Interface::ALL.to_vec(),
        }
    }

    /// The interfaces to run, each once, POSIX first.
    fn interfaces(&self, profile: &Profile) -> Result<Vec<Interface>, IspfsError> {
        let mut v = self.interfaces.clone();
        v.sort_unstable();
        v.dedup();
        if v.is_empty() {
            return Err(IspfsError::Spec(
                "no interface to run: posix, mmap or both".into(),
            ));
        }
        if v.contains(&Interface::Mmap) && profile.host.page_fault_ns == 0 {
            return Err(IspfsError::Spec(format!(
                "profile '{}' gives no host.page_fault_ns: the mmap interface needs it",
                profile.name
            )));
        }
        Ok(v)
    }

    fn points(&self) -> Result<Vec<(u64, u64)>, IspfsError> {
        let bad = |m: String| Err(IspfsError::Spec(m));
        if let Some(f) = self
            .file_bytes
            .iter()
            .find(|&&f| f == 0 || f > MAX_FILE_BYTES)
        {
            return bad(format!("file size {f}: 1 byte to {MAX_FILE_BYTES} bytes"));
        }
        if let Some(r) = self
            .record_bytes
            .iter()
            .find(|&&r| !(MIN_RECORD_BYTES..=MAX_RECORD_BYTES).contains(&r))
        {
            return bad(format!(
                "record size {r}: {MIN_RECORD_BYTES} bytes to {MAX_RECORD_BYTES} bytes"
            ));
        }
        let points: Vec<(u64, u64)> = self
            .file_bytes
            .iter()
            .flat_map(|&f| self.record_bytes.iter().map(move |&r| (f, r)))
            .filter(|(f, r)| r <= f)
            .collect();
        if points.is_empty() || points.len() > MAX_POINTS {
            return bad(format!(
                "{} (file, record) pairs with record ≤ file: 1 to {MAX_POINTS} are run",
                points.len()
            ));
        }
        Ok(points)
    }
}

/// One test at one (file, record) size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IozonePoint {
    pub test: Test,
    #[serde(default)]
    pub interface: Interface,
    pub file_bytes: u64,
    pub record_bytes: u64,
    pub ispfs_mb_per_sec: f64,
    pub ext4_mb_per_sec: f64,
    /// Where the EXT4-like path's time went (runs saved before it was kept read zeros).
    #[serde(default)]
    pub ext4: Ext4Work,
}

/// What the EXT4-like path did beyond ISPFS's one copy per call: why it was slower.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ext4Work {
    /// Pages read from the medium into the page cache (misses, readahead, and pages read
    /// before a partial write).
    pub pages_read: u64,
    /// Pages the flusher wrote back during the test.
    pub pages_written_back: u64,
    /// Time the writer waited for the flusher past the dirty limit, ns.
    pub throttled_ns: u64,
    /// Page faults taken through the mapping (0 through system calls).
    #[serde(default)]
    pub faults: u64,
}

impl IozonePoint {
    pub fn ratio(&self) -> f64 {
        self.ispfs_mb_per_sec / self.ext4_mb_per_sec.max(f64::MIN_POSITIVE)
    }
}

/// The comparison's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IozoneReport {
    pub profile: String,
    pub spec: IozoneSpec,
    pub points: Vec<IozonePoint>,
}

impl IozoneReport {
    /// ISPFS over EXT4, averaged over a test's points through every interface run (as the
    /// paper averages).
    pub fn mean_ratio(&self, test: Test) -> Option<f64> {
        self.mean_ratio_where(|p| p.test == test)
    }

    /// ISPFS over EXT4, averaged over a test's points through one interface.
    pub fn mean_ratio_through(&self, test: Test, interface: Interface) -> Option<f64> {
        self.mean_ratio_where(|p| p.test == test && p.interface == interface)
    }

    /// ISPFS over EXT4, averaged over the points `keep` selects.
    fn mean_ratio_where(&self, keep: impl Fn(&IozonePoint) -> bool) -> Option<f64> {
        let (sum, n) = self
            .points
            .iter()
            .filter(|p| keep(p))
            .fold((0.0, 0u32), |(sum, n), p| (sum + p.ratio(), n + 1));
        (n > 0).then(|| sum / f64::from(n))
    }
}

/// Runs every test at every point.
pub fn compare(
    profile: &Profile,
    spec: &IozoneSpec,
    seed: u64,
    mut progress: impl FnMut(),
) -> Result<IozoneReport, IspfsError> {
    let costs = profile
        .isp
        .as_ref()
        .ok_or_else(|| IspfsError::NoEngine(profile.name.clone()))?;
    let engine = Engine::new(costs);
    let interfaces = spec.interfaces(profile)?;
    let mut points = Vec::new();
    for (file, record) in spec.points()? {
        // Both interfaces visit the records in the same order.
        let orders = Test::ALL.map(|test| order(test, file, record, seed));
        for &interface in &interfaces {
            for (test, ops) in Test::ALL.into_iter().zip(&orders) {
                let mut entry = Entry::new(profile, interface, file);
                let ispfs = match spec.medium {
                    Medium::Dram => ispfs_dram_ns(profile, &mut entry, ops, record),
                    Medium::Pcm => ispfs_pcm_ns(profile, &engine, &mut entry, test, ops, record)?,
                };
                let (ext4, work) = Ext4::new(profile, costs, spec.medium, interface, file)?
                    .run(test, ops, record)?;
                let mbs = |ns: u64| file as f64 / ns.max(1) as f64 * 1e3;
                points.push(IozonePoint {
                    test,
                    interface,
                    file_bytes: file,
                    record_bytes: record,
                    ispfs_mb_per_sec: mbs(ispfs),
                    ext4_mb_per_sec: mbs(ext4),
                    ext4: work,
                });
            }
        }
        progress();
    }
    Ok(IozoneReport {
        profile: profile.name.clone(),
        spec: spec.clone(),
        points,
    })
}

/// The record offsets a test visits: in order, or each record once in a seeded shuffle.
fn order(test: Test, file: u64, record: u64, seed: u64) -> Vec<u64> {
    let mut ops: Vec<u64> = (0..file / record).map(|i| i * record).collect();
    if test.random() {
        let mut rng = SimRng::new(seed ^ file ^ record.rotate_left(32));
        for i in (1..ops.len()).rev() {
            ops.swap(i, rng.below(i as u64 + 1) as usize);
        }
    }
    ops
}

/// One Cortex-A9 core copying `bytes` between two places in DRAM.
fn copy_ns(profile: &Profile, bytes: u64) -> u64 {
    (bytes as f64 * 1e9 / profile.host.copy_bytes_per_sec as f64).round() as u64
}

/// The device a test writes: fresh, with the file already on it.
fn device_with_file(profile: &Profile, file: u64) -> Result<Device, IspfsError> {
    let mut d = Device::new(profile, DataMode::TimingOnly)?;
    d.write_at(IoPath::Internal, VirtualTime::ZERO, 0, file, None)?;
    d.reset_measurements();
    Ok(d)
}

/// What ISPFS pays to reach the file for one record, besides the copy: a system call, or
/// through a mapping a fault on each page not yet mapped. Its fault handler maps the
/// medium's own page (§5.1: "ISPFS offers a zero-copy technique by modifying the page fault
/// handler"), so a page, once mapped, stays mapped for the test: there is no page cache to
/// evict it and no writeback to write-protect it.
struct Entry {
    interface: Interface,
    syscall_ns: u64,
    fault_ns: u64,
    mapped: Vec<bool>,
}

impl Entry {
    fn new(profile: &Profile, interface: Interface, file: u64) -> Entry {
        let pages = match interface {
            Interface::Posix => 0,
            Interface::Mmap => file.div_ceil(BLOCK_BYTES) as usize,
        };
        Entry {
            interface,
            syscall_ns: profile.host.syscall_ns,
            fault_ns: profile.host.page_fault_ns,
            mapped: vec![false; pages],
        }
    }

    fn ns(&mut self, off: u64, len: u64) -> u64 {
        match self.interface {
            Interface::Posix => self.syscall_ns,
            Interface::Mmap => {
                let mut faults = 0;
                for (p, _) in Ext4::pages(off, len) {
                    if let Some(m) = self.mapped.get_mut(p as usize).filter(|m| !**m) {
                        *m = true;
                        faults += 1;
                    }
                }
                faults * self.fault_ns
            }
        }
    }
}

/// ISPFS over DRAM: one copy per record, reading or writing, and its entry.
fn ispfs_dram_ns(profile: &Profile, entry: &mut Entry, ops: &[u64], record: u64) -> u64 {
    ops.iter()
        .map(|&off| entry.ns(off, record) + copy_ns(profile, record))
        .sum()
}

/// ISPFS on the PCM board: one copy per record and its entry; writes wait for the PCM.
fn ispfs_pcm_ns(
    profile: &Profile,
    engine: &Engine,
    entry: &mut Entry,
    test: Test,
    ops: &[u64],
    record: u64,
) -> Result<u64, IspfsError> {
    let file = ops.len() as u64 * record;
    let copy = |bytes: u64| {
        (copy_ns(profile, bytes) as f64)
            .max(super::board_copy_ns(profile, engine, bytes))
            .round() as u64
    };
    if !test.writes() {
        return Ok(ops
            .iter()
            .map(|&off| entry.ns(off, record) + copy(record))
            .sum());
    }
    let mut d = device_with_file(profile, file)?;
    let mut t = d.idle_at();
    let start = t;
    for &off in ops {
        t = t.after(entry.ns(off, record));
        let c = d.write_at(IoPath::Internal, t, off, record, None)?;
        t = c.done.max(t.after(copy(record)));
    }
    Ok(t.since(start))
}

/// The EXT4-like path over one file: the writer's clock, the flusher's, the page cache,
/// and the medium under the block layer.
struct Ext4<'a> {
    profile: &'a Profile,
    costs: &'a IspCosts,
    cache: PageCache,
    /// The PCM board, when the file lives there; `None` for the RAM disk.
    device: Option<Device>,
    /// Pages past which the flusher starts, and past which the writer waits.
    background_pages: u64,
    limit_pages: u64,
    /// Pages one block request carries at most.
    request_pages: u32,
    /// When the writer is, and when the flusher is free; `flushing` while it writes back.
    now: VirtualTime,
    flusher_free: VirtualTime,
    flushing: bool,
    /// Where the flusher's next pass over the file starts (the inode's `writeback_index`).
    writeback_from: u32,
    /// The test's mapping of the file, through the mmap interface.
    mapping: Option<Mapping>,
    work: Ext4Work,
}

/// How a page of the file is mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Map {
    Unmapped,
    /// Mapped for reading: a write faults (`page_mkwrite`). Writeback leaves a page so.
    ReadOnly,
    Writable,
}

/// The mapping iozone makes for a test, and the file's mmap readahead state (Linux's
/// `filemap_fault`, 4.x): a miss reads around the page unless misses have far outnumbered
/// hits (`mmap_miss`), and a hit on a page marked `PG_readahead` reads the next window.
struct Mapping {
    pages: Vec<Map>,
    /// Pages marked `PG_readahead`: the fault that reaches one reads the next window.
    marked: Vec<bool>,
    mmap_miss: u32,
    /// The last readahead window: first page and size.
    window: (u32, u32),
}

/// Linux's `MMAP_LOTSAMISS`: past this many net misses a fault reads only its page.
const MMAP_LOTSAMISS: u32 = 100;
/// Linux's `fault_around_bytes` (64 KiB) in pages: a read fault also maps the cached pages
/// of its aligned 64 KiB.
const FAULT_AROUND_PAGES: u32 = 16;

impl<'a> Ext4<'a> {
    fn new(
        profile: &'a Profile,
        costs: &'a IspCosts,
        medium: Medium,
        interface: Interface,
        file: u64,
    ) -> Result<Ext4<'a>, IspfsError> {
        let memory = profile.device_cpu.dram_bytes;
        let ram_disk = match medium {
            Medium::Dram => file,
            Medium::Pcm => 0,
        };
        let cache_bytes = memory
            .saturating_sub(costs.host_resident_bytes)
            .saturating_sub(ram_disk);
        if cache_bytes < MIN_CACHE_BYTES {
            return Err(IspfsError::Spec(format!(
                "the host's {memory} bytes of memory less {} resident (isp.host_resident_bytes) \
                 and a {ram_disk}-byte RAM disk leave {cache_bytes} bytes for the page cache: \
                 at least {MIN_CACHE_BYTES} are needed",
                costs.host_resident_bytes
            )));
        }
        let pages = u32::try_from(file.div_ceil(BLOCK_BYTES))
            .map_err(|_| IspfsError::Spec(format!("file size {file}: too many pages")))?;
        let capacity = u32::try_from(cache_bytes / BLOCK_BYTES).unwrap_or(u32::MAX);
        let (device, now) = match medium {
            Medium::Dram => (None, VirtualTime::ZERO),
            Medium::Pcm => {
                let d = device_with_file(profile, file)?;
                let now = d.idle_at();
                (Some(d), now)
            }
        };
        Ok(Ext4 {
            profile,
            costs,
            cache: PageCache::after_a_pass(pages, capacity),
            device,
            background_pages: (capacity as f64 * DIRTY_BACKGROUND_RATIO) as u64,
            limit_pages: (capacity as f64 * DIRTY_RATIO) as u64,
            request_pages: (costs.readahead_bytes / BLOCK_BYTES).clamp(1, u32::MAX as u64) as u32,
            now,
            flusher_free: now,
            flushing: false,
            writeback_from: 0,
            mapping: (interface == Interface::Mmap).then(|| Mapping {
                pages: vec![Map::Unmapped; pages as usize],
                marked: vec![false; pages as usize],
                mmap_miss: 0,
                window: (0, 0),
            }),
            work: Ext4Work::default(),
        })
    }

    /// Runs a test's calls; returns the writer's time and what the path did.
    fn run(mut self, test: Test, ops: &[u64], record: u64) -> Result<(u64, Ext4Work), IspfsError> {
        let start = self.now;
        for &off in ops {
            if self.mapping.is_some() {
                self.access_mapped(off, record, test.writes())?;
                continue;
            }
            self.now = self.now.after(self.profile.host.syscall_ns);
            if test.writes() {
                self.write(off, record)?;
            } else {
                self.read(off, record, !test.random())?;
            }
        }
        debug_assert!(self.cache.len() <= self.cache.capacity());
        #[cfg(debug_assertions)]
        self.check_mapping();
        Ok((self.now.since(start), self.work))
    }

    /// The pages `[off, off + len)` covers, each with the bytes of it covered.
    fn pages(off: u64, len: u64) -> impl Iterator<Item = (u32, u64)> {
        let first = off / BLOCK_BYTES;
        let end = (off + len).div_ceil(BLOCK_BYTES);
        (first..end).map(move |p| {
            let from = (p * BLOCK_BYTES).max(off);
            let to = ((p + 1) * BLOCK_BYTES).min(off + len);
            (p as u32, to - from)
        })
    }

    fn read(&mut self, off: u64, record: u64, sequential: bool) -> Result<(), IspfsError> {
        let file_pages = self.cache.pages();
        for (p, bytes) in Self::pages(off, record) {
            if !self.cache.contains(p) {
                // A miss reads a run of uncached pages in one request: a readahead window
                // when the reads are sequential, the rest of the record when they are not.
                let record_end = (off + record).div_ceil(BLOCK_BYTES) as u32;
                let window_end = if sequential {
                    p.saturating_add(self.request_pages).min(file_pages)
                } else {
                    record_end.min(p.saturating_add(self.request_pages))
                };
                let mut end = p + 1;
                while end < window_end && !self.cache.contains(end) {
                    end += 1;
                }
                self.now = self.block_request(self.now, p, end - p, false)?;
                for q in p..end {
                    self.insert(q);
                }
            }
            self.cache.touch(p);
            self.now = self.now.after(self.page_work_ns(bytes));
        }
        Ok(())
    }

    fn write(&mut self, off: u64, record: u64) -> Result<(), IspfsError> {
        for (p, bytes) in Self::pages(off, record) {
            self.flusher_catch_up()?;
            if self.cache.contains(p) {
                self.cache.touch(p);
            } else {
                if bytes < BLOCK_BYTES {
                    // `block_write_begin`: a partly written page is read first.
                    self.now = self.block_request(self.now, p, 1, false)?;
                }
                // Inserted as the most recently used page.
                self.insert(p);
            }
            self.now = self.now.after(self.page_work_ns(bytes));
            if self.cache.mark_dirty(p) {
                self.balance_dirty_pages()?;
            }
        }
        Ok(())
    }

    /// Caches page `p`; a page reclaim evicts to make room is unmapped too.
    fn insert(&mut self, p: u32) {
        if let (Some(gone), Some(m)) = (self.cache.insert(p), &mut self.mapping) {
            m.pages[gone as usize] = Map::Unmapped;
            m.marked[gone as usize] = false;
        }
    }

    /// Reads the uncached pages of `[from, to)` into the page cache, one block request per
    /// run of them.
    fn read_pages(&mut self, from: u32, to: u32) -> Result<(), IspfsError> {
        let mut p = from;
        while p < to {
            if self.cache.contains(p) {
                p += 1;
                continue;
            }
            let mut end = p + 1;
            while end < to && end - p < self.request_pages && !self.cache.contains(end) {
                end += 1;
            }
            self.now = self.block_request(self.now, p, end - p, false)?;
            for q in p..end {
                self.insert(q);
            }
            p = end;
        }
        Ok(())
    }

    /// One record copied into or out of the mapping: a fault on each page not mapped as the
    /// access needs, then the copy. The copy is the same one ISPFS makes; what EXT4 adds is
    /// in the faults.
    fn access_mapped(&mut self, off: u64, record: u64, write: bool) -> Result<(), IspfsError> {
        let need = if write { Map::Writable } else { Map::ReadOnly };
        for (p, bytes) in Self::pages(off, record) {
            self.flusher_catch_up()?;
            let map = self.mapping.as_ref().map_or(need, |m| m.pages[p as usize]);
            if map < need {
                self.fault(p, map, write)?;
            } else {
                // The access sets the page's referenced bit: reclaim gives a page used through
                // a mapping since its last scan another round (`page_check_references`), as
                // it does one read through a call.
                self.cache.touch(p);
            }
            self.now = self.now.after(copy_ns(self.profile, bytes));
        }
        Ok(())
    }

    /// A fault on page `p` of the mapping (Linux 4.x): a read fault first maps the cached
    /// pages around it (`do_fault_around`) and is done if that mapped `p`; otherwise
    /// `filemap_fault` finds or reads the page, and a write fault makes it writable and
    /// dirty (`page_mkwrite`), which may throttle the writer. A write to a page mapped for
    /// reading only needs the last step.
    fn fault(&mut self, p: u32, map: Map, write: bool) -> Result<(), IspfsError> {
        self.work.faults += 1;
        self.now = self.now.after(self.profile.host.page_fault_ns);
        if !write {
            self.fault_around(p);
            if self.map_of(p) != Map::Unmapped {
                return Ok(());
            }
        }
        if map == Map::Unmapped {
            self.filemap_fault(p)?;
        }
        self.now = self.now.after(self.profile.host.page_cache_page_ns);
        let m = self.mapping.as_mut().expect("faults happen in a mapping");
        m.pages[p as usize] = if write { Map::Writable } else { Map::ReadOnly };
        if write && self.cache.mark_dirty(p) {
            self.balance_dirty_pages()?;
        }
        Ok(())
    }

    /// The mapping's invariants: only cached pages are mapped or marked for readahead, and
    /// a page mapped writable is dirty (writeback write-protects what it cleans).
    #[cfg(debug_assertions)]
    fn check_mapping(&self) {
        let Some(m) = &self.mapping else { return };
        for (p, (&map, &marked)) in (0u32..).zip(m.pages.iter().zip(&m.marked)) {
            assert!(
                map == Map::Unmapped || self.cache.contains(p),
                "page {p} is mapped but not cached"
            );
            assert!(
                !marked || self.cache.contains(p),
                "page {p} is marked but not cached"
            );
            assert!(
                map != Map::Writable || self.cache.is_dirty(p),
                "page {p} is writable but clean"
            );
        }
        assert!(m.mmap_miss <= MMAP_LOTSAMISS * 10);
    }

    fn map_of(&self, p: u32) -> Map {
        self.mapping
            .as_ref()
            .map_or(Map::Unmapped, |m| m.pages[p as usize])
    }

    /// `filemap_map_pages`: maps the cached pages of `p`'s aligned 64 KiB that are not
    /// mapped, skipping a readahead mark (its fault must run the readahead). Each costs its
    /// page-cache work, and counts as a hit against `mmap_miss`.
    fn fault_around(&mut self, p: u32) {
        let start = p - p % FAULT_AROUND_PAGES;
        let end = start
            .saturating_add(FAULT_AROUND_PAGES)
            .min(self.cache.pages());
        let mut mapped = 0;
        let m = self.mapping.as_mut().expect("faults happen in a mapping");
        for q in start..end {
            let i = q as usize;
            if self.cache.contains(q) && m.pages[i] == Map::Unmapped && !m.marked[i] {
                m.pages[i] = Map::ReadOnly;
                m.mmap_miss = m.mmap_miss.saturating_sub(1);
                mapped += 1;
            }
        }
        if self.map_of(p) != Map::Unmapped {
            self.cache.touch(p);
        }
        self.now = self
            .now
            .after(mapped * self.profile.host.page_cache_page_ns);
    }

    /// `filemap_fault` for a page not mapped: a hit counts against `mmap_miss` and, on a
    /// readahead mark, reads the next window; a miss reads around the page (a window of
    /// `readahead_bytes` centred on it, marked a quarter from its end), or only the page
    /// once misses outnumber hits by [`MMAP_LOTSAMISS`].
    fn filemap_fault(&mut self, p: u32) -> Result<(), IspfsError> {
        let ra = self.request_pages;
        let pages = self.cache.pages();
        let m = self.mapping.as_mut().expect("faults happen in a mapping");
        if self.cache.contains(p) {
            m.mmap_miss = m.mmap_miss.saturating_sub(1);
            if std::mem::take(&mut m.marked[p as usize]) {
                // `page_cache_async_readahead` (`ondemand_readahead`): a mark in the last
                // window reads the next one; a mark left by an older window reads from the
                // first page not cached after it, if that is within a window's reach.
                let (w_start, w_size) = m.window;
                let in_window = p >= w_start && p - w_start < w_size;
                let start = if in_window {
                    Some(w_start.saturating_add(w_size))
                } else {
                    (p + 1..pages)
                        .take(ra as usize)
                        .find(|&q| !self.cache.contains(q))
                };
                if let Some(start) = start.filter(|&s| s < pages) {
                    m.window = (start, ra);
                    let end = start.saturating_add(ra).min(pages);
                    if !self.cache.contains(start) {
                        m.marked[start as usize] = true;
                    }
                    self.read_pages(start, end)?;
                }
            }
        } else {
            m.mmap_miss = (m.mmap_miss + 1).min(MMAP_LOTSAMISS * 10);
            if m.mmap_miss > MMAP_LOTSAMISS {
                self.read_pages(p, p + 1)?;
            } else {
                let start = p.saturating_sub(ra / 2);
                let end = start.saturating_add(ra).min(pages);
                m.window = (start, ra);
                // Only a page the window reads is marked.
                let mark = start.saturating_add(ra - ra / 4);
                if mark < end && !self.cache.contains(mark) {
                    m.marked[mark as usize] = true;
                }
                self.read_pages(start, end)?;
            }
        }
        self.cache.touch(p);
        Ok(())
    }

    /// The page cache's work for one page and the copy of its `bytes` to or from the user.
    fn page_work_ns(&self, bytes: u64) -> u64 {
        self.profile.host.page_cache_page_ns + copy_ns(self.profile, bytes)
    }

    /// Starts the flusher once dirty pages pass the background threshold, and makes the
    /// writer wait for it past the limit.
    fn balance_dirty_pages(&mut self) -> Result<(), IspfsError> {
        let dirty = self.cache.dirty_pages();
        if !self.flushing && dirty > self.background_pages {
            self.flushing = true;
            self.flusher_free = self.flusher_free.max(self.now);
        }
        if dirty > self.limit_pages {
            while self.cache.dirty_pages() > self.limit_pages && self.write_back_one_run()? {}
            self.work.throttled_ns += self.flusher_free.ns().saturating_sub(self.now.ns());
            self.now = self.now.max(self.flusher_free);
        }
        Ok(())
    }

    /// The flusher's work up to the writer's present: it runs on the other core.
    fn flusher_catch_up(&mut self) -> Result<(), IspfsError> {
        while self.flushing && self.flusher_free < self.now {
            if !self.write_back_one_run()? || self.cache.dirty_pages() <= self.background_pages {
                self.flushing = false;
            }
        }
        Ok(())
    }

    /// Writes back the next run of contiguous dirty pages in file order (wrapping at the
    /// end), as one block request; false if nothing is dirty.
    fn write_back_one_run(&mut self) -> Result<bool, IspfsError> {
        let Some(first) = self.cache.next_dirty(self.writeback_from) else {
            return Ok(false);
        };
        let mut end = first + 1;
        while end - first < self.request_pages && self.cache.is_dirty(end) {
            end += 1;
        }
        for p in first..end {
            self.cache.clean(p);
            // `page_mkclean`: the next write through the mapping faults again.
            if let Some(m) = &mut self.mapping {
                let map = &mut m.pages[p as usize];
                *map = (*map).min(Map::ReadOnly);
            }
        }
        self.flusher_free = self.block_request(self.flusher_free, first, end - first, true)?;
        self.writeback_from = end;
        Ok(true)
    }

    /// One block request moving `pages` pages from `first` between the page cache and the
    /// medium (`write`: back to it), issued at `at`; returns when it is done. The RAM disk's
    /// driver copies the pages in the submitter's context.
    fn block_request(
        &mut self,
        at: VirtualTime,
        first: u32,
        pages: u32,
        write: bool,
    ) -> Result<VirtualTime, IspfsError> {
        let bytes = u64::from(pages) * BLOCK_BYTES;
        let at = at.after(self.costs.block_request_ns);
        let counter = if write {
            &mut self.work.pages_written_back
        } else {
            &mut self.work.pages_read
        };
        *counter += u64::from(pages);
        let Some(d) = &mut self.device else {
            return Ok(at.after(copy_ns(self.profile, bytes)));
        };
        let off = u64::from(first) * BLOCK_BYTES;
        let c = if write {
            d.write_at(IoPath::Internal, at, off, bytes, None)?
        } else {
            d.read_at(IoPath::Internal, at, off, bytes, None)?
        };
        // The driver's copy to or from the board is the CPU's programmed I/O.
        let pio = at.after(self.costs.pio_ns(bytes).round() as u64);
        Ok(c.done.max(pio))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_the_board_reads_move_at_programmed_io_and_writes_wait_for_the_pcm() {
        let profile = Profile::load("pcm-zynq").unwrap();
        let pio_mbs = profile.isp.as_ref().unwrap().host_pio_bytes_per_sec as f64 / 1e6;
        let spec = IozoneSpec {
            file_bytes: vec![1 << 20],
            record_bytes: vec![4 << 10, 256 << 10],
            medium: Medium::Pcm,
            interfaces: vec![Interface::Posix],
        };
        let r = compare(&profile, &spec, 1, || {}).unwrap();
        assert_eq!(r.points.len(), 8);
        for p in &r.points {
            assert!(p.ispfs_mb_per_sec > 0.0 && p.ext4_mb_per_sec > 0.0);
            if !p.test.writes() {
                // ISPFS copies out of the board by the CPU's own loads, EXT4 out of its page
                // cache in DRAM (the 1 MiB file stays cached), so EXT4 reads faster here.
                assert!(p.ispfs_mb_per_sec < pio_mbs, "{p:?}");
                assert!(p.ispfs_mb_per_sec > 0.95 * pio_mbs, "{p:?}");
                assert!(p.ratio() < 1.0, "{p:?}");
            }
        }
        // Reading in order or at random costs ISPFS the same: no readahead to lose.
        let speed = |t: Test, rec: u64| {
            r.points
                .iter()
                .find(|p| p.test == t && p.record_bytes == rec)
                .unwrap()
                .ispfs_mb_per_sec
        };
        assert_eq!(speed(Test::Reread, 4096), speed(Test::RandomRead, 4096));
        // Larger records spread a write over more of the PCM's dies.
        assert!(speed(Test::Rewrite, 256 << 10) > speed(Test::Rewrite, 4096));
        assert!(r.mean_ratio(Test::Reread).is_some());
        // The same spec and seed, the same report.
        assert_eq!(compare(&profile, &spec, 1, || {}).unwrap(), r);
    }

    /// §5.1's set-up: the RAM disk holding the 256 MiB file leaves the page cache less than
    /// the file, so EXT4 reads it back through the block layer and reads before it writes
    /// part of a page; ISPFS copies once.
    #[test]
    fn over_dram_ispfs_wins_every_test_most_at_small_records() {
        let profile = Profile::load("pcm-zynq").unwrap();
        let spec = IozoneSpec {
            file_bytes: vec![16 << 20, MAX_FILE_BYTES],
            record_bytes: vec![1 << 10, 64 << 10],
            medium: Medium::Dram,
            interfaces: vec![Interface::Posix],
        };
        let r = compare(&profile, &spec, 1, || {}).unwrap();
        assert_eq!(r.points.len(), 16);
        let point = |t: Test, file: u64, rec: u64| {
            r.points
                .iter()
                .find(|p| p.test == t && p.file_bytes == file && p.record_bytes == rec)
                .unwrap()
        };
        for p in &r.points {
            assert!(p.ratio() > 1.0, "ISPFS has no page cache to pay for: {p:?}");
        }
        // Partial pages not cached are read before they are written.
        for t in [Test::Rewrite, Test::RandomWrite] {
            let (small, large) = (
                point(t, MAX_FILE_BYTES, 1 << 10),
                point(t, MAX_FILE_BYTES, 64 << 10),
            );
            assert!(small.ratio() > 2.0 * large.ratio(), "{small:?} {large:?}");
        }
        // A file the page cache holds beside its RAM disk is reread from the cache.
        let (fits, not) = (
            point(Test::Reread, 16 << 20, 64 << 10),
            point(Test::Reread, MAX_FILE_BYTES, 64 << 10),
        );
        assert!(
            fits.ext4_mb_per_sec > 1.3 * not.ext4_mb_per_sec,
            "{fits:?} {not:?}"
        );
        assert_eq!(fits.ext4.pages_read, 0, "{fits:?}");
        assert_eq!(
            not.ext4.pages_read,
            MAX_FILE_BYTES / BLOCK_BYTES,
            "every page misses"
        );
        // Small random writes read their pages first, and the writer waits for the flusher.
        let small = point(Test::RandomWrite, MAX_FILE_BYTES, 1 << 10);
        assert!(small.ext4.pages_read > 0 && small.ext4.pages_written_back > 0);
        assert!(small.ext4.throttled_ns > 0, "{small:?}");
        assert_eq!(fits.ispfs_mb_per_sec, not.ispfs_mb_per_sec);
        // Over DRAM ISPFS writes at copy speed; on the board it waits for the PCM.
        let pcm = compare(
            &profile,
            &IozoneSpec {
                medium: Medium::Pcm,
                interfaces: vec![Interface::Posix],
                file_bytes: vec![16 << 20],
                ..spec.clone()
            },
            1,
            || {},
        )
        .unwrap();
        let on_pcm = pcm
            .points
            .iter()
            .find(|p| p.test == Test::Rewrite && p.record_bytes == 64 << 10)
            .unwrap();
        let on_dram = point(Test::Rewrite, 16 << 20, 64 << 10);
        assert!(on_dram.ispfs_mb_per_sec > 10.0 * on_pcm.ispfs_mb_per_sec);
        assert_eq!(compare(&profile, &spec, 1, || {}).unwrap(), r);
    }

    #[test]
    fn a_ram_disk_the_memory_cannot_hold_beside_a_page_cache_is_refused() {
        let mut profile = Profile::load("pcm-zynq").unwrap();
        profile.device_cpu.dram_bytes = 256 << 20;
        let spec = IozoneSpec {
            file_bytes: vec![200 << 20],
            record_bytes: vec![1 << 20],
            medium: Medium::Dram,
            interfaces: vec![Interface::Posix],
        };
        let e = compare(&profile, &spec, 1, || {}).unwrap_err().to_string();
        assert!(
            e.contains("isp.host_resident_bytes") && e.contains("RAM disk"),
            "{e}"
        );
        // On the board there is no RAM disk.
        let pcm = IozoneSpec {
            medium: Medium::Pcm,
            ..spec
        };
        assert!(compare(&profile, &pcm, 1, || {}).is_ok());
    }

    #[test]
    fn the_shuffle_visits_every_record_once() {
        let mut o = order(Test::RandomRead, 1 << 20, 4096, 3);
        assert_ne!(o, order(Test::Reread, 1 << 20, 4096, 3));
        o.sort_unstable();
        assert_eq!(o, order(Test::Reread, 1 << 20, 4096, 3));
    }

    /// iozone -B over §5.1's set-up: EXT4 must read a page before a write through the
    /// mapping can change it, where a write call of whole pages need not; ISPFS's fault
    /// handler maps the medium's page, one fault per page at any record size.
    #[test]
    fn through_a_mapping_ext4_reads_what_it_writes_and_ispfs_faults_once_per_page() {
        let profile = Profile::load("pcm-zynq").unwrap();
        let spec = IozoneSpec {
            file_bytes: vec![MAX_FILE_BYTES],
            record_bytes: vec![1 << 10, 64 << 10],
            medium: Medium::Dram,
            interfaces: vec![Interface::Mmap, Interface::Posix, Interface::Mmap],
        };
        let r = compare(&profile, &spec, 1, || {}).unwrap();
        assert_eq!(r.points.len(), 16, "each interface once");
        let point = |t: Test, i: Interface, rec: u64| {
            r.points
                .iter()
                .find(|p| p.test == t && p.interface == i && p.record_bytes == rec)
                .unwrap()
        };
        let pages = MAX_FILE_BYTES / BLOCK_BYTES;
        let (posix, mmap) = (
            point(Test::Rewrite, Interface::Posix, 64 << 10),
            point(Test::Rewrite, Interface::Mmap, 64 << 10),
        );
        assert_eq!(posix.ext4.pages_read, 0, "{posix:?}");
        assert_eq!(posix.ext4.faults, 0);
        assert_eq!(mmap.ext4.pages_read, pages, "{mmap:?}");
        assert_eq!(
            mmap.ext4.faults, pages,
            "one write fault per page in one pass"
        );
        assert!(mmap.ratio() > posix.ratio(), "{mmap:?} {posix:?}");
        // A read fault maps the cached pages of its 64 KiB too: a sixteenth of the faults.
        let reread = point(Test::Reread, Interface::Mmap, 64 << 10);
        assert!(reread.ext4.faults <= pages / 16 + 2, "{reread:?}");
        // ISPFS through a mapping: the same speed at every record size, and faster than a
        // system call per 1 KiB record.
        for t in Test::ALL {
            let (small, large) = (
                point(t, Interface::Mmap, 1 << 10),
                point(t, Interface::Mmap, 64 << 10),
            );
            assert_eq!(small.ispfs_mb_per_sec, large.ispfs_mb_per_sec, "{t:?}");
            assert!(small.ispfs_mb_per_sec > point(t, Interface::Posix, 1 << 10).ispfs_mb_per_sec);
        }
        // Small random records through a mapping: every miss reads around its page, and the
        // pages read around are evicted again before most are used.
        let random = point(Test::RandomRead, Interface::Mmap, 1 << 10);
        assert!(
            random.ext4.pages_read > 4 * random.ext4.faults,
            "{random:?}"
        );
        assert!(
            random.ratio() > 4.0 * reread.ratio(),
            "{random:?} {reread:?}"
        );
        assert_eq!(compare(&profile, &spec, 1, || {}).unwrap(), r);
    }

    /// Linux stops reading around a faulting page once misses outnumber hits by
    /// `MMAP_LOTSAMISS`. With a page cache that holds a quarter of the file, random write
    /// faults (which map no neighbours) soon read only their own pages; random read faults
    /// map the cached pages of their 64 KiB, each counted as a hit, and so keep reading
    /// around.
    #[test]
    fn a_mapping_that_mostly_misses_stops_reading_around() {
        let mut profile = Profile::load("pcm-zynq").unwrap();
        let spec = IozoneSpec {
            file_bytes: vec![64 << 20],
            record_bytes: vec![4 << 10],
            medium: Medium::Dram,
            interfaces: vec![Interface::Mmap],
        };
        let costs = profile.isp.clone().unwrap();
        profile.device_cpu.dram_bytes = costs.host_resident_bytes + (64 << 20) + MIN_CACHE_BYTES;
        let r = compare(&profile, &spec, 1, || {}).unwrap();
        let point = |t: Test| r.points.iter().find(|p| p.test == t).unwrap();
        let (write, read) = (point(Test::RandomWrite), point(Test::RandomRead));
        let pages = (64 << 20) / BLOCK_BYTES;
        assert_eq!(write.ext4.faults, pages, "{write:?}");
        // Past the first MMAP_LOTSAMISS misses, only a hit lets one more miss read around.
        assert!(write.ext4.pages_read < pages * 3 / 2, "{write:?}");
        assert!(read.ext4.pages_read > 4 * read.ext4.faults, "{read:?}");
        assert!(read.ext4_mb_per_sec < write.ext4_mb_per_sec);
        // Without a fault cost the mapping cannot be modelled: refused, naming the field.
        profile.host.page_fault_ns = 0;
        let e = compare(&profile, &spec, 1, || {}).unwrap_err().to_string();
        assert!(e.contains("host.page_fault_ns"), "{e}");
    }

    #[test]
    fn bad_grids_are_refused() {
        let p = Profile::load("pcm-zynq").unwrap();
        for (spec, want) in [
            (
                IozoneSpec {
                    file_bytes: vec![0],
                    record_bytes: vec![4096],
                    medium: Medium::Dram,
                    interfaces: vec![Interface::Posix],
                },
                "file size 0",
            ),
            (
                IozoneSpec {
                    file_bytes: vec![4096],
                    record_bytes: vec![1 << 30],
                    medium: Medium::Dram,
                    interfaces: vec![Interface::Posix],
                },
                "record size",
            ),
            (
                IozoneSpec {
                    file_bytes: vec![4096],
                    record_bytes: vec![8192],
                    medium: Medium::Dram,
                    interfaces: vec![Interface::Posix],
                },
                "0 (file, record)",
            ),
            (
                IozoneSpec {
                    file_bytes: vec![MAX_FILE_BYTES],
                    record_bytes: vec![1],
                    medium: Medium::Dram,
                    interfaces: vec![Interface::Posix],
                },
                "record size 1:",
            ),
        ] {
            let e = compare(&p, &spec, 1, || {}).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
