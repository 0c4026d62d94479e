//! Replaying a trace through the host file system, the device and an offload design, in
//! virtual time.
//!
//! Two passes over the trace, both streaming. The first ([`Prescan`]) finds what must exist
//! before the trace starts: files it reads before writing them (with the size its reads need)
//! and their directories. Setup creates those untimed, then the second pass replays every
//! event: each pid is a thread of virtual time. An op starts when its pid's previous op ended,
//! not before the op the trace issued before it (ops start in trace order, so cross-pid
//! dependencies hold), and in `timed` mode not before its recorded timestamp either. One pid's
//! ops never overlap; different pids' ops do, on the device.
//!
//! Latency per op is what the model charges: metadata reads on cold lookups, device reads for
//! data not in the page cache, `fsync` writeback, NDP offloads. A `write` into the page cache
//! costs no device time (csdlab models no host CPU time per syscall).

use crate::format::{Event, IscFile, Op};
use crate::isc::{IscRunner, IscTotals, LentFile};
use crate::reader::{Strictness, TraceError, TraceReader};
use csd_device::{DeviceCounters, IoPath, Profile, VirtualTime};
use csd_hostfs::fs::{Fd, FsError, HostFs, OpenOptions};
use csd_hostfs::namespace::{parent_dir as parent, Ino, NsError};
use csd_hostfs::ndp::{DesignKind, NdpCompute, NdpRequest, OffloadDesign, Stages};
use csd_hostfs::perms::{Cred, Perms};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::BufRead;

/// How a replay paces each pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pace {
    /// As fast as possible: an op starts when its pid's previous op ended.
    Afap,
    /// Honour the trace's timestamps: an op starts no earlier than its recorded time.
    Timed,
}

impl std::str::FromStr for Pace {
    type Err = String;
    fn from_str(s: &str) -> Result<Pace, String> {
        match s {
            "afap" => Ok(Pace::Afap),
            "timed" => Ok(Pace::Timed),
            _ => Err(format!(
                "unknown replay mode '{s}' (expected afap or timed)"
            )),
        }
    }
}

#[derive(Clone, Debug)]
pub struct ReplayOptions {
    pub pace: Pace,
    /// Seeds the page cache's writeback order.
    pub seed: u64,
    pub strictness: Strictness,
}

/// Builds the computation of an `ndp` op from its task name and arguments.
pub type ComputeFactory<'a> = dyn FnMut(&str, &str) -> Result<Box<dyn NdpCompute>, String> + 'a;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("setting up the trace's initial files: {0}")]
    Setup(String),
    #[error("device: {0}")]
    Device(#[from] csd_device::DeviceError),
}

/// A file the trace reads (or opens) before writing it: it existed before the trace began.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NeededFile {
    /// The size the trace's reads imply.
    pub size: u64,
    /// The byte ranges the trace reads (start → end, disjoint, not adjacent): written when
    /// the file is made. The rest is allocated but left unwritten: the trace says nothing of
    /// it, and writing it would cost time and memory in proportion to an offset the trace
    /// chose rather than to what it reads.
    pub read: BTreeMap<u64, u64>,
}

impl NeededFile {
    /// Adds `start..end` to the ranges read, merging it with those it overlaps or touches.
    fn read(&mut self, start: u64, end: u64) {
        self.size = self.size.max(end);
        if start >= end {
            return;
        }
        let (mut start, mut end) = (start, end);
        while let Some((&s, &e)) = self.read.range(..=end).next_back() {
            if e < start {
                break;
            }
            start = start.min(s);
            end = end.max(e);
            self.read.remove(&s);
        }
        self.read.insert(start, end);
    }
}

/// What the trace needs to exist before it starts.
#[derive(Debug, Default)]
pub struct Prescan {
    /// Files read (or opened without creating) before any write.
    pub files: BTreeMap<String, NeededFile>,
    pub dirs: BTreeSet<String>,
    /// Paths the trace itself creates or writes first.
    created: HashSet<String>,
    /// Directories the trace itself makes (setup must not make them first).
    made: HashSet<String>,
    pub events: u64,
}

impl Prescan {
    // Lookups come before inserts throughout: most events name a path already seen, and an
    // insert would allocate its key.
    fn note_dirs(&mut self, path: &str) {
        let mut p = parent(path);
        while let Some(d) = p {
            if d == "/" || self.dirs.contains(d) {
                break;
            }
            self.dirs.insert(d.to_string());
            p = parent(d);
        }
    }

    /// The trace reads `start..end` of `path` (an empty range: it only needs it to exist).
    fn needs(&mut self, path: &str, start: u64, end: u64) {
        if self.created.contains(path) {
            return;
        }
        match self.files.get_mut(path) {
            Some(f) => f.read(start, end),
            None => {
                let mut f = NeededFile::default();
                f.read(start, end);
                self.files.insert(path.to_string(), f);
                self.note_dirs(path);
            }
        }
    }

    fn creates(&mut self, path: &str) {
        if !self.files.contains_key(path) && !self.created.contains(path) {
            self.created.insert(path.to_string());
            self.note_dirs(path);
        }
    }

    /// Reads the whole trace once.
    // Long: one arm per op that creates, reads or removes a file: together they decide which
    // files must exist before the trace starts.
    pub fn run(reader: impl BufRead + Send, strictness: Strictness) -> Result<Prescan, TraceError> {
        let mut s = Prescan::default();
        // Offsets of fds without explicit offsets, to size sequential reads.
        let mut pos: HashMap<(u32, i64), u64> = HashMap::new();
        TraceReader::new(reader, strictness)?.for_each_parsed(|ev| -> Result<(), TraceError> {
            s.events += 1;
            if ev.ret.is_some_and(|r| r < 0) {
                return Ok(());
            }
            let done = ev.ret.map(|r| r.max(0) as u64);
            match &ev.op {
                Op::Open { path, flags } => {
                    if flags.directory {
                        s.dirs.insert(path.clone());
                        s.note_dirs(path);
                    } else if flags.create || flags.truncate {
                        s.creates(path);
                    } else {
                        s.needs(path, 0, 0);
                    }
                    if let Some(fd) = ev.ret {
                        pos.insert((ev.pid, fd), 0);
                    }
                }
                Op::Read { fd, path, off, len } => {
                    let p = pos.entry((ev.pid, *fd)).or_insert(0);
                    let at = off.unwrap_or(*p);
                    let n = done.unwrap_or(*len);
                    // A read that returned nothing hit the end: it says nothing of the size.
                    if n > 0 {
                        s.needs(path, at, at.saturating_add(n));
                    }
                    *p = at.saturating_add(n);
                }
                Op::Pread { path, off, len, .. } => {
                    let n = done.unwrap_or(*len);
                    if n > 0 {
                        s.needs(path, *off, off.saturating_add(n));
                    }
                }
                Op::Write { fd, path, off, len } => {
                    let p = pos.entry((ev.pid, *fd)).or_insert(0);
                    *p = off.unwrap_or(*p).saturating_add(done.unwrap_or(*len));
                    s.creates(path);
                }
                Op::Pwrite { path, .. } | Op::Truncate { path, .. } => s.creates(path),
                Op::Stat { path } | Op::Unlink { path } => s.needs(path, 0, 0),
                Op::Rename { path, to } => {
                    s.needs(path, 0, 0);
                    s.note_dirs(to);
                }
                Op::Mkdir { path } => {
                    if !s.dirs.contains(path) {
                        s.made.insert(path.clone());
                    }
                    s.note_dirs(path);
                }
                Op::Rmdir { path } => {
                    s.dirs.insert(path.clone());
                    s.note_dirs(path);
                }
                Op::Ndp { paths, .. } => {
                    for p in paths {
                        s.note_dirs(p);
                    }
                }
                _ => {}
            }
            Ok(())
        })?;
        // A path used both as a file and a directory is a directory.
        let dirs = s.dirs.clone();
        s.files.retain(|f, _| f != "/" && !dirs.contains(f));
        // Directories the trace makes, and everything below them, are its own to create.
        let made = std::mem::take(&mut s.made);
        // Everything at or below a made directory is a contiguous key range of these sorted
        // sets ("m" itself, then the keys starting "m/"): one range removal per made
        // directory, however deep or many the paths.
        for m in &made {
            s.dirs.remove(m);
            s.files.remove(m);
            let below = format!("{}/", m.trim_end_matches('/'));
            let dirs: Vec<String> = s
                .dirs
                .range(below.clone()..)
                .take_while(|d| d.starts_with(&below))
                .cloned()
                .collect();
            for d in dirs {
                s.dirs.remove(&d);
            }
            let files: Vec<String> = s
                .files
                .range(below.clone()..)
                .take_while(|(f, _)| f.starts_with(&below))
                .map(|(f, _)| f.clone())
                .collect();
            for f in files {
                s.files.remove(&f);
            }
        }
        Ok(s)
    }
}

/// Why one op of the trace could not be replayed.
#[derive(Debug, thiserror::Error)]
enum OpError {
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error(transparent)]
    Ndp(#[from] csd_hostfs::ndp::NdpError),
    #[error("device: {0}")]
    Device(#[from] csd_device::DeviceError),
    #[error("task transaction rolled back: {0}")]
    IscAborted(String),
    #[error("{0}")]
    Range(String),
}

/// Linux's `MAX_RW_COUNT`: the most one read or write system call moves (2 GiB − 4 KiB). A
/// longer request cannot come from a real program, and is refused per event.
pub const MAX_RW_COUNT: u64 = 0x7fff_f000;
/// A replayed read or write moves at most this much per step, so the host's buffers stay
/// small whatever length a trace names (the page cache charges per page, so steps cost
/// the same virtual time as one call).
const DATA_STEP: u64 = 1 << 20;

/// Latency percentiles of one op type, in ns.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct OpLatency {
    pub count: u64,
    pub failed: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    /// The tail SIFT reports for fsync (§5.1.4).
    pub p9999_ns: u64,
    pub max_ns: u64,
}

/// How far a replay has come: events replayed, of the trace's total (known from the prescan).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Progress {
    pub events: u64,
    pub of: u64,
}

/// The offload requests of a replay.
#[derive(Clone, Debug, PartialEq, Default, Serialize, serde::Deserialize)]
pub struct NdpTotals {
    pub requests: u64,
    pub files: u64,
    /// Mean per-file stages over every request.
    pub breakdown: Stages,
    pub pao: f64,
}

/// One design's replay.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct ReplayReport {
    pub design: DesignKind,
    pub events: u64,
    /// Events replayed (not skipped).
    pub ops: u64,
    /// Events not replayed, by reason.
    pub skipped: BTreeMap<String, u64>,
    pub duration_ns: u64,
    pub ops_per_sec: f64,
    pub latency: BTreeMap<String, OpLatency>,
    /// The first error of each op type that failed in the replay (the model refused an op
    /// the traced system performed, e.g. a path that does not exist here).
    pub first_errors: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ndp: Option<NdpTotals>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isc: Option<IscTotals>,
    pub device: DeviceCounters,
}

/// Pages an `isc` op's reservation holds beyond the lent files' own size.
const ISC_SPARE_PAGES: u64 = 64;

/// Who replays: the traces carry no credentials, so everything runs as root.
const WHO: Cred = Cred::ROOT;
const FILE_PERMS: Perms = Perms {
    uid: 0,
    gid: 0,
    mode: 0o644,
};
const DIR_PERMS: Perms = Perms {
    uid: 0,
    gid: 0,
    mode: 0o755,
};

struct OpenFd {
    fd: Fd,
    pos: u64,
}

struct Replayer<'a, 'i> {
    fs: HostFs,
    design: Box<dyn OffloadDesign>,
    compute: &'a mut ComputeFactory<'a>,
    computes: BTreeMap<(String, String), Box<dyn NdpCompute>>,
    isc_runner: Option<&'i mut dyn IscRunner>,
    isc: IscTotals,
    /// What holds the device's place in the file system while a task has it.
    stand_in: Option<csd_device::Device>,
    fds: HashMap<(u32, i64), OpenFd>,
    clocks: HashMap<u32, VirtualTime>,
    hist: BTreeMap<&'static str, (Histogram<u64>, u64)>,
    skipped: BTreeMap<String, u64>,
    first_errors: BTreeMap<String, String>,
    ops: u64,
    ndp: NdpTotals,
    ndp_stage_sum: Stages,
    pace: Pace,
    /// Write payloads (zeros: the device keeps no bytes), reused across writes.
    zeros: Vec<u8>,
}

fn mkdir_p(fs: &mut HostFs, dir: &str) -> Result<(), FsError> {
    // Nearly always the directory is there already: an untimed check, no walk of mkdirs.
    if fs.namespace().find(dir, WHO).is_ok() {
        return Ok(());
    }
    // Down the path once, level by level: walking it from the root at every level made a
    // deep path cost its depth cubed.
    let mut at = String::with_capacity(dir.len());
    let mut ino = Ino::ROOT;
    for c in dir.split('/').filter(|c| !c.is_empty()) {
        at.push('/');
        at.push_str(c);
        ino = match fs.namespace().child(ino, c) {
            Some(child) => child,
            None => fs.mkdir_in(ino, &at, DIR_PERMS, WHO)?,
        };
    }
    Ok(())
}

impl Replayer<'_, '_> {
    fn skip(&mut self, why: &str) {
        *self.skipped.entry(why.to_string()).or_default() += 1;
    }

    fn record(&mut self, op: &'static str, ns: u64, ok: bool) {
        let (h, failed) = self.hist.entry(op).or_insert_with(|| {
            // 1 ns to one hour at 3 significant digits; longer latencies saturate.
            let h = Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                .expect("valid histogram bounds");
            (h, 0)
        });
        if ok {
            h.saturating_record(ns);
        } else {
            *failed += 1;
        }
    }

    /// The hostfs fd for a trace fd, opening `path` implicitly when the trace never showed
    /// the open (an fd inherited from a parent, e.g. a shell redirection).
    /// Opens `path` under the design (so LightFS sees writers), making its directory first
    /// when the open creates the file.
    fn open_path(&mut self, path: &str, how: OpenOptions) -> Result<Fd, OpError> {
        if how.create.is_some() {
            if let Some(p) = parent(path) {
                mkdir_p(&mut self.fs, p)?;
            }
        }
        Ok(self.design.open(&mut self.fs, path, how, WHO)?)
    }

    /// The hostfs fd for a trace fd, opening `path` implicitly when the trace never showed
    /// the open (an fd inherited from a parent, e.g. a shell redirection).
    fn fd_for(
        &mut self,
        pid: u32,
        fd: i64,
        path: &str,
        write: bool,
    ) -> Result<&mut OpenFd, OpError> {
        if !self.fds.contains_key(&(pid, fd)) {
            let how = OpenOptions {
                write,
                create: write.then_some(FILE_PERMS),
            };
            let f = self.open_path(path, how)?;
            self.fds.insert((pid, fd), OpenFd { fd: f, pos: 0 });
        }
        Ok(self.fds.get_mut(&(pid, fd)).expect("inserted"))
    }

    // Long: one arm per trace op, each a call into the host file system or the design.
    fn apply(&mut self, ev: &Event, start: VirtualTime) -> Result<bool, OpError> {
        let fs_done = |r: Result<(), FsError>| r.map(|_| true).map_err(OpError::from);
        match &ev.op {
            Op::Open { path, flags } => {
                if flags.directory {
                    return fs_done(self.fs.lookup(path, WHO).map(|_| ()));
                }
                let how = OpenOptions {
                    write: flags.write,
                    create: flags.create.then_some(FILE_PERMS),
                };
                let f = self.open_path(path, how)?;
                if flags.truncate && flags.write {
                    self.fs.truncate(path, 0, WHO)?;
                }
                if let Some(fd) = ev.ret {
                    if let Some(old) = self.fds.insert((ev.pid, fd), OpenFd { fd: f, pos: 0 }) {
                        let _ = self.design.close(&mut self.fs, old.fd);
                    }
                } else {
                    let _ = self.design.close(&mut self.fs, f);
                }
                Ok(true)
            }
            Op::Close { fd, .. } => {
                if let Some(o) = self.fds.remove(&(ev.pid, *fd)) {
                    self.design.close(&mut self.fs, o.fd)?;
                }
                Ok(true)
            }
            Op::Read { fd, path, off, len } => self.data(ev, *fd, path, *off, *len, false),
            Op::Pread { fd, path, off, len } => self.data(ev, *fd, path, Some(*off), *len, false),
            Op::Write { fd, path, off, len } => self.data(ev, *fd, path, *off, *len, true),
            Op::Pwrite { fd, path, off, len } => self.data(ev, *fd, path, Some(*off), *len, true),
            Op::Fsync { fd, path } | Op::Fdatasync { fd, path } => {
                let f = self.fd_for(ev.pid, *fd, path, false)?.fd;
                fs_done(self.fs.fsync(f))
            }
            Op::Mkdir { path } => {
                if let Some(p) = parent(path) {
                    mkdir_p(&mut self.fs, p)?;
                }
                fs_done(self.fs.mkdir(path, DIR_PERMS, WHO).map(|_| ()))
            }
            Op::Rmdir { path } => fs_done(self.fs.rmdir(path, WHO).map(|_| ())),
            Op::Unlink { path } => fs_done(self.fs.unlink(path, WHO).map(|_| ())),
            Op::Rename { path, to } => {
                if let Some(p) = parent(to) {
                    mkdir_p(&mut self.fs, p)?;
                }
                fs_done(self.fs.rename(path, to, WHO).map(|_| ()))
            }
            Op::Stat { path } => fs_done(self.fs.lookup(path, WHO).map(|_| ())),
            Op::Truncate { path, len } => fs_done(self.fs.truncate(path, *len, WHO)),
            Op::Ndp { task, paths, args } => {
                let key = (task.clone(), args.clone());
                if !self.computes.contains_key(&key) {
                    match (self.compute)(task, args) {
                        Ok(c) => {
                            self.computes.insert(key.clone(), c);
                        }
                        Err(e) => {
                            self.skip(&format!("ndp: {e}"));
                            return Ok(false);
                        }
                    }
                }
                let compute = self.computes.get_mut(&key).expect("inserted");
                let req = NdpRequest {
                    paths: paths.clone(),
                    who: WHO,
                };
                let out = self.design.offload(&mut self.fs, &req, compute.as_mut())?;
                let s = out.summary();
                self.ndp.requests += 1;
                self.ndp.files += s.files as u64;
                // Per-file means back to totals, so requests weigh by their file counts.
                self.ndp_stage_sum.add(&s.breakdown.scale(s.files as f64));
                Ok(true)
            }
            Op::Isc { task, files, args } => self.isc(task, files, args),
            Op::Bread { off, len } => {
                self.block_range(*off, *len)?;
                let c = self
                    .fs
                    .device_mut()
                    .read_at(IoPath::Host, start, *off, *len, None)?;
                self.fs.advance_to(c.done);
                Ok(true)
            }
            Op::Bwrite { off, len } => {
                self.block_range(*off, *len)?;
                let c = self
                    .fs
                    .device_mut()
                    .write_at(IoPath::Host, start, *off, *len, None)?;
                self.fs.advance_to(c.done);
                Ok(true)
            }
        }
    }

    /// Checks a block request against Linux's per-request limit (a larger one cannot be one
    /// request); the device checks its own bounds.
    fn block_range(&self, off: u64, len: u64) -> Result<(), OpError> {
        if len > MAX_RW_COUNT || off.checked_add(len).is_none() {
            return Err(OpError::Range(format!(
                "block request at {off} of {len} bytes is over the per-request maximum of {MAX_RW_COUNT} bytes or overflows"
            )));
        }
        Ok(())
    }

    /// A read or write: at `off` if given (pread/pwrite, or a recorded offset), else at the
    /// fd's position, which it then advances.
    fn data(
        &mut self,
        ev: &Event,
        fd: i64,
        path: &str,
        off: Option<u64>,
        len: u64,
        write: bool,
    ) -> Result<bool, OpError> {
        let n = ev.ret.map_or(len, |r| r.max(0) as u64);
        if n > MAX_RW_COUNT {
            return Err(OpError::Range(format!(
                "length {n} is over Linux's per-call maximum of {MAX_RW_COUNT} bytes (MAX_RW_COUNT)"
            )));
        }
        let positional = matches!(ev.op, Op::Pread { .. } | Op::Pwrite { .. });
        let capacity = self.fs.device().capacity_bytes();
        let o = self.fd_for(ev.pid, fd, path, write)?;
        let at = off.unwrap_or(o.pos);
        let end = at
            .checked_add(n)
            .filter(|&end| end <= capacity)
            .ok_or_else(|| {
                OpError::Range(format!(
                    "offset {at} + length {n} is beyond the device's {capacity} bytes"
                ))
            })?;
        if !positional {
            o.pos = end;
        }
        let f = o.fd;
        let mut pos = at;
        while pos < end {
            let step = (end - pos).min(DATA_STEP);
            if write {
                // Timing-only device: the bytes themselves do not matter.
                if self.zeros.len() < step as usize {
                    self.zeros.resize(step as usize, 0);
                }
                self.fs.write(f, pos, &self.zeros[..step as usize])?;
            } else {
                self.fs.read(f, pos, step)?;
            }
            pos += step;
        }
        Ok(true)
    }

    /// An `isc` op: the files' dirty pages written back and their extents found (`fiemap`),
    /// then the task runs as one transaction on the lent device; a committed task's file
    /// growth becomes the files' new layouts. Files the op writes are created if missing.
    fn isc(&mut self, task: &str, files: &[IscFile], args: &str) -> Result<bool, OpError> {
        if self.isc_runner.is_none() {
            self.skip("isc (no task runtime given to the replay)");
            return Ok(false);
        }
        let mut lent = Vec::with_capacity(files.len());
        let mut inos = Vec::with_capacity(files.len());
        for f in files {
            if f.mode.writable() && self.fs.namespace().find(&f.path, WHO).is_err() {
                if let Some(p) = parent(&f.path) {
                    mkdir_p(&mut self.fs, p)?;
                }
                self.fs.import(&f.path, &[], FILE_PERMS, WHO)?;
            }
            let (r, _) = self.fs.lookup(&f.path, WHO)?;
            self.fs.sync_file(r.ino)?;
            let (size_bytes, runs, _) = self.fs.file_extents(&f.path, WHO)?;
            inos.push(r.ino);
            lent.push(LentFile {
                path: f.path.clone(),
                mode: f.mode,
                id: u64::from(r.ino.0),
                size_bytes,
                extents: runs,
            });
        }
        let mut device = match self.stand_in.take() {
            Some(d) => d,
            None => csd_device::Device::stand_in(self.fs.device().profile())?,
        };
        // Room to grow: as much again as the files hold, and a little for new outputs.
        let pages: u64 = lent.iter().flat_map(|f| &f.extents).map(|e| e.pages).sum();
        let pool = match self.fs.reserve_blocks(pages + ISC_SPARE_PAGES) {
            Ok(pool) => pool,
            Err(e) => {
                self.stand_in = Some(device);
                return Err(e.into());
            }
        };
        self.fs.swap_device(&mut device);
        let runner = self.isc_runner.as_deref_mut().expect("checked above");
        let (back, out) = runner.run(device, self.fs.clock(), task, args, lent, pool);
        let mut device = back;
        self.fs.swap_device(&mut device);
        self.stand_in = Some(device);
        self.fs.release_blocks(&out.pool_left)?;
        for (ino, (size, extents)) in inos.iter().zip(out.files) {
            self.fs.adopt_layout(*ino, size, extents)?;
        }
        self.fs.advance_to(out.done);
        self.isc.requests += 1;
        match out.error {
            None => {
                self.isc.committed += 1;
                Ok(true)
            }
            Some(e) => {
                self.isc.aborted += 1;
                Err(OpError::IscAborted(e))
            }
        }
    }

    fn event(&mut self, ev: &Event) {
        if ev.ret.is_some_and(|r| r < 0) {
            self.skip("failed in the trace");
            return;
        }
        // An op starts when its pid is free, and not before the op the trace issued before
        // it (so a file another pid created already exists): pids overlap while one waits.
        let pid_clock = self
            .clocks
            .get(&ev.pid)
            .copied()
            .unwrap_or(VirtualTime::ZERO);
        let start = match self.pace {
            Pace::Afap => pid_clock,
            Pace::Timed => pid_clock.max(VirtualTime(ev.t)),
        }
        .max(self.fs.op_started());
        self.fs.start_op(start);
        // Background work due by now (kernel flusher; LightFS's updater and block monitor).
        if let Err(e) = self.design.background(&mut self.fs) {
            // The op still runs; the report names what the background work hit.
            self.first_errors
                .entry("background".to_string())
                .or_insert_with(|| e.to_string());
        }
        self.fs.set_clock(start);
        let outcome = self.apply(ev, start);
        let end = self.fs.clock().max(start);
        match outcome {
            Ok(true) => {
                self.ops += 1;
                self.record(ev.op.name(), end.since(start), true);
            }
            Ok(false) => {}
            Err(e) => {
                self.ops += 1;
                self.record(ev.op.name(), 0, false);
                self.first_errors
                    .entry(ev.op.name().to_string())
                    .or_insert_with(|| e.to_string());
            }
        }
        self.clocks.insert(ev.pid, end);
    }
}

/// What runs a trace's offloaded ops: a computation per `ndp` task and arguments, and the
/// task runtime for `isc` ops (without one, they are skipped and counted as such).
pub struct OpRunners<'a> {
    pub compute: &'a mut ComputeFactory<'a>,
    pub isc: Option<&'a mut dyn IscRunner>,
}

/// Replays a trace under one design. `open` gives a fresh reader of the trace for each pass.
pub fn replay<R: BufRead + Send>(
    mut open: impl FnMut() -> std::io::Result<R>,
    profile: &Profile,
    design: DesignKind,
    runners: OpRunners<'_>,
    opts: &ReplayOptions,
    progress: impl FnMut(Progress),
) -> Result<ReplayReport, ReplayError> {
    let scan = Prescan::run(open().map_err(TraceError::Io)?, opts.strictness)?;
    replay_scanned(&scan, open, profile, design, runners, opts, progress)
}

/// [`replay`] after the trace's [`Prescan`]: replaying one trace under several designs scans
/// it once.
pub fn replay_scanned<R: BufRead + Send>(
    scan: &Prescan,
    mut open: impl FnMut() -> std::io::Result<R>,
    profile: &Profile,
    design: DesignKind,
    runners: OpRunners<'_>,
    opts: &ReplayOptions,
    mut progress: impl FnMut(Progress),
) -> Result<ReplayReport, ReplayError> {
    let (fs, d) = prepare(scan, profile, design, opts.seed)?;
    let mut r = Replayer::new(fs, d, runners, opts.pace);
    let reader = TraceReader::new(open().map_err(TraceError::Io)?, opts.strictness)?;
    let mut events = 0u64;
    let skipped = reader.for_each_parsed(|ev| -> Result<(), TraceError> {
        events += 1;
        r.event(ev);
        if events.is_multiple_of(4096) {
            progress(Progress {
                events,
                of: scan.events,
            });
        }
        Ok(())
    })?;
    progress(Progress {
        events,
        of: scan.events,
    });
    for (op, n) in skipped {
        *r.skipped.entry(format!("unknown op {op}")).or_default() += n;
    }
    // Debug builds (every test) end each replay with the whole system's invariants; each
    // mutation already checked what it touched.
    #[cfg(debug_assertions)]
    if let Err(e) = r.fs.check_invariants() {
        panic!("invariant broken after replaying under {design}: {e}");
    }
    Ok(r.report(design, events))
}

/// The system a trace starts on: a formatted host file system over a fresh device of
/// `profile`, holding the files and directories the trace uses without creating them,
/// `design` initialised on it, caches cold, counters and clock at zero.
fn prepare(
    scan: &Prescan,
    profile: &Profile,
    design: DesignKind,
    seed: u64,
) -> Result<(HostFs, Box<dyn OffloadDesign>), ReplayError> {
    let setup = |e: &dyn std::fmt::Display| ReplayError::Setup(e.to_string());
    let device = csd_device::Device::new(profile, csd_device::DataMode::TimingOnly)?;
    let mut fs = HostFs::format(device, DIR_PERMS).map_err(|e| setup(&e))?;
    fs.seed_writeback(seed);
    // Files the trace reads without writing are made first; what they need must fit.
    let needed: u64 = scan.files.values().fold(0, |a, f| a.saturating_add(f.size));
    if needed > fs.device().capacity_bytes() {
        return Err(ReplayError::Setup(format!(
            "the trace reads {needed} bytes of files it never writes (they must exist before it \
             starts), more than the {}-byte device of profile '{}' holds",
            fs.device().capacity_bytes(),
            profile.name
        )));
    }
    make_initial_files(&mut fs, scan).map_err(|e| setup(&e))?;
    let mut d = design.build();
    d.init(&mut fs, "/", WHO).map_err(|e| setup(&e))?;
    d.drop_caches(&mut fs);
    // The trace starts on an idle device with fresh counters.
    fs.device_mut().reset_measurements();
    fs.restart_time();
    Ok((fs, d))
}

/// Makes the directories and files the trace needs to exist before it starts, the files
/// zero-filled where the trace reads them.
fn make_initial_files(fs: &mut HostFs, scan: &Prescan) -> Result<(), FsError> {
    // Only the deepest directories: making one makes its ancestors, and a set of every
    // ancestor of a deep path would otherwise cost its depth squared.
    let mut dirs = scan.dirs.iter().peekable();
    while let Some(d) = dirs.next() {
        let has_child = dirs.peek().is_some_and(|next| {
            next.strip_prefix(d.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
        });
        if !has_child {
            mkdir_p(fs, d)?;
        }
    }
    for (f, needed) in &scan.files {
        if let Some(p) = parent(f) {
            mkdir_p(fs, p)?;
        }
        let read: Vec<(u64, u64)> = needed.read.iter().map(|(&s, &e)| (s, e)).collect();
        match fs.import_zeros(f, needed.size, &read, FILE_PERMS, WHO) {
            // Opened without O_DIRECTORY but created as a directory's parent: a directory.
            Err(FsError::Namespace(NsError::Exists(_) | NsError::NotADirectory(_))) => {}
            r => {
                r?;
            }
        }
    }
    Ok(())
}

impl<'a> Replayer<'a, 'a> {
    fn new(
        fs: HostFs,
        design: Box<dyn OffloadDesign>,
        runners: OpRunners<'a>,
        pace: Pace,
    ) -> Replayer<'a, 'a> {
        Replayer {
            fs,
            design,
            compute: runners.compute,
            computes: BTreeMap::new(),
            isc_runner: runners.isc,
            isc: IscTotals::default(),
            stand_in: None,
            fds: HashMap::new(),
            clocks: HashMap::new(),
            hist: BTreeMap::new(),
            skipped: BTreeMap::new(),
            first_errors: BTreeMap::new(),
            ops: 0,
            ndp: NdpTotals::default(),
            ndp_stage_sum: Stages::default(),
            pace,
            zeros: Vec::new(),
        }
    }

    /// The report of a finished replay of `events` events under `design`.
    fn report(self, design: DesignKind, events: u64) -> ReplayReport {
        let duration = self
            .clocks
            .values()
            .copied()
            .max()
            .unwrap_or(VirtualTime::ZERO);
        let latency = self
            .hist
            .iter()
            .map(|(op, (h, failed))| {
                (
                    op.to_string(),
                    OpLatency {
                        count: h.len(),
                        failed: *failed,
                        mean_ns: if h.is_empty() { 0.0 } else { h.mean() },
                        p50_ns: h.value_at_quantile(0.5),
                        p99_ns: h.value_at_quantile(0.99),
                        p999_ns: h.value_at_quantile(0.999),
                        p9999_ns: h.value_at_quantile(0.9999),
                        max_ns: h.max(),
                    },
                )
            })
            .collect();
        let ndp = (self.ndp.requests > 0).then(|| {
            let breakdown = self.ndp_stage_sum.scale(1.0 / self.ndp.files.max(1) as f64);
            NdpTotals {
                pao: breakdown.pao(),
                breakdown,
                ..self.ndp.clone()
            }
        });
        let secs = duration.0 as f64 / 1e9;
        ReplayReport {
            design,
            events,
            ops: self.ops,
            skipped: self.skipped,
            duration_ns: duration.0,
            ops_per_sec: if secs > 0.0 {
                self.ops as f64 / secs
            } else {
                0.0
            },
            latency,
            first_errors: self.first_errors,
            ndp,
            isc: (self.isc.requests > 0).then_some(self.isc),
            device: self.fs.device().counters(),
        }
    }
}
