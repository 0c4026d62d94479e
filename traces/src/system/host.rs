//! The host systems: a host file system (hostfs: page cache, writeback, metadata caches)
//! over the device, with an offload design (frag-s, frag-m, FSR or LightFS) that runs the
//! trace's `ndp` ops, and the task runtime for its `isc` ops.

use super::interface::{
    block_io, rw_count, Applied, NdpTotals, OpError, SetupError, System, Totals, FAILED_IN_TRACE,
};
use crate::format::{Event, IscFile, Op, OpenFlags};
use crate::isc::{IscRunner, IscTotals, LentFile};
use crate::prescan::Prescan;
use csd_device::{Profile, VirtualTime};
use csd_hostfs::fs::{Fd, FsError, HostFs, Link, NewFile, OpenOptions};
use csd_hostfs::namespace::{parent_dir as parent, Ino};
use csd_hostfs::ndp::{stale_files, DesignKind, NdpCompute, NdpRequest, OffloadDesign, Stages};
use csd_hostfs::perms::{Cred, Perms};
use foldhash::{HashMap, HashMapExt};
use std::collections::BTreeMap;

/// Builds the computation of an `ndp` op from its task name and arguments.
pub type ComputeFactory<'a> = dyn FnMut(&str, &str) -> Result<Box<dyn NdpCompute>, String> + 'a;

/// What runs a trace's offloaded ops: a computation per `ndp` task and arguments, and the
/// task runtime for `isc` ops (without one, they are skipped and counted as such).
pub struct OpRunners<'a> {
    pub compute: &'a mut ComputeFactory<'a>,
    pub isc: Option<&'a mut dyn IscRunner>,
    /// Runs CISC-op stages (the firmware and fusion designs need it).
    pub stages: Option<&'a mut dyn csd_device::storagefs::StageRunner>,
}

/// A replayed read or write moves at most this much per step, so the host's buffers stay
/// small whatever length a trace names (the page cache charges per page, so steps cost
/// the same virtual time as one call).
const DATA_STEP: u64 = 1 << 20;

/// Whether `op` is one system call of the traced program: block-level events are not, an
/// offload request is the design's own path, and a CISC op pays for each call inside it.
fn is_syscall(op: &Op) -> bool {
    !matches!(
        op,
        Op::Ndp { .. } | Op::Isc { .. } | Op::Cisc { .. } | Op::Bread { .. } | Op::Bwrite { .. }
    )
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
/// A symbolic link's: Linux gives every link 0777 (its target's decide).
pub(super) const LINK_PERMS: Perms = Perms {
    uid: 0,
    gid: 0,
    mode: 0o777,
};

struct OpenFd {
    fd: Fd,
    pos: u64,
    /// How it was opened: with `O_APPEND` every write lands at the end of the file (Linux
    /// appends even for `pwrite`); with `O_DIRECT` reads and writes bypass the page cache;
    /// with `O_DSYNC` or `O_SYNC` a write waits until it is durable.
    flags: OpenFlags,
}

/// A host file system over the device, under one offload design.
pub struct HostSystem<'a> {
    fs: HostFs,
    design: Box<dyn OffloadDesign>,
    compute: &'a mut ComputeFactory<'a>,
    computes: BTreeMap<(String, String), Box<dyn NdpCompute>>,
    isc_runner: Option<&'a mut dyn IscRunner>,
    isc: IscTotals,
    /// The trace's open files, by (fd table, trace fd): the kernel's fd tables.
    fds: HashMap<(u32, i64), OpenFd>,
    ndp: NdpTotals,
    ndp_stage_sum: Stages,
    /// Write payloads (zeros: the device keeps no bytes), reused across writes.
    zeros: Vec<u8>,
    known_dirs: KnownDirs,
}

/// An open that only walks its path: a directory's (`O_DIRECTORY`), or an `O_PATH` one, to
/// a symbolic link itself with `O_NOFOLLOW`. `None` for an open of a file for I/O.
pub(super) fn walk_only(
    fs: &mut HostFs,
    path: &str,
    flags: &OpenFlags,
) -> Option<Result<(), FsError>> {
    if !(flags.directory || flags.path) {
        return None;
    }
    let found = match flags.path && flags.nofollow {
        true => fs.lookup_nofollow(path, WHO),
        false => fs.lookup(path, WHO),
    };
    Some(found.map(|_| ()))
}

/// Makes `dir` and any missing directory above it, as `mkdir -p`; returns its inode (or
/// that of whatever is there already under its name).
pub(super) fn mkdir_p(fs: &mut HostFs, dir: &str) -> Result<Ino, FsError> {
    // Nearly always the directory is there already: an untimed check, no walk of mkdirs.
    if let Ok(ino) = fs.namespace().find(dir, WHO) {
        return Ok(ino);
    }
    // Down the path once, level by level: walking it from the root at every level made a
    // deep path cost its depth cubed.
    let mut at = String::with_capacity(dir.len());
    let mut ino = Ino::ROOT;
    for c in dir.split('/').filter(|c| !c.is_empty()) {
        at.push('/');
        at.push_str(c);
        let ns = fs.namespace();
        ino = match ns.child(ino, c) {
            // A symbolic link on the way: what it names, as a walk of the path so far finds.
            Some(child) if ns.inode(child).is_some_and(|i| i.is_symlink()) => {
                ns.find(&at, WHO).map_err(FsError::from)?
            }
            Some(child) => child,
            None => fs.mkdir_in(ino, &at, DIR_PERMS, WHO)?,
        };
    }
    Ok(ino)
}

/// Directories [`mkdir_p`] found (or made) by path, so the check before each creating call
/// does not walk the same path again: a replay makes it before every creating open,
/// rename and link, and nearly always finds the directory there. Valid while the
/// namespace's [`dir_names_version`](csd_hostfs::namespace::Namespace::dir_names_version)
/// is the one they were found at; at most [`MAX_KNOWN_DIRS`] are kept.
#[derive(Default)]
pub(super) struct KnownDirs {
    version: u64,
    dirs: HashMap<String, Ino>,
}

/// Bounds [`KnownDirs`]: past it the memo starts again empty.
const MAX_KNOWN_DIRS: usize = 4096;

impl KnownDirs {
    /// [`mkdir_p`] of `dir`, unless it was found before and no directory or link has lost
    /// a name since.
    pub(super) fn mkdir_p(&mut self, fs: &mut HostFs, dir: &str) -> Result<Ino, FsError> {
        let version = fs.namespace().dir_names_version();
        if version != self.version {
            self.dirs.clear();
            self.version = version;
        }
        if let Some(&ino) = self.dirs.get(dir) {
            return Ok(ino);
        }
        let ino = mkdir_p(fs, dir)?;
        // Only a directory: a file there may go without changing the version.
        if fs.namespace().inode(ino).is_some_and(|i| i.is_dir()) {
            if self.dirs.len() >= MAX_KNOWN_DIRS {
                self.dirs.clear();
            }
            self.dirs.insert(dir.to_string(), ino);
        }
        Ok(ino)
    }
}

impl<'a> HostSystem<'a> {
    /// The system a trace starts on: a formatted host file system over a fresh device of
    /// `profile`, holding the files and directories the trace uses without creating them,
    /// `design` initialised on it, caches cold, counters and clock at zero.
    pub fn new(
        scan: &Prescan,
        profile: &Profile,
        design: DesignKind,
        seed: u64,
        runners: OpRunners<'a>,
    ) -> Result<HostSystem<'a>, SetupError> {
        let (fs, design) = prepare(scan, profile, design, seed)?;
        Ok(HostSystem {
            fs,
            design,
            compute: runners.compute,
            computes: BTreeMap::new(),
            isc_runner: runners.isc,
            isc: IscTotals::default(),
            fds: HashMap::new(),
            ndp: NdpTotals::default(),
            ndp_stage_sum: Stages::default(),
            zeros: Vec::new(),
            known_dirs: KnownDirs::default(),
        })
    }

    /// Opens `path` under the design (so LightFS sees writers), making its directory first
    /// when the open creates the file.
    fn open_path(&mut self, path: &str, how: OpenOptions) -> Result<Fd, OpError> {
        if how.create.is_some() {
            if let Some(p) = parent(path) {
                self.known_dirs.mkdir_p(&mut self.fs, p)?;
            }
        }
        Ok(self.design.open(&mut self.fs, path, how, WHO)?)
    }

    /// The hostfs fd for a trace fd, opening `path` implicitly when the trace never showed
    /// the open (an fd inherited from a parent, e.g. a shell redirection).
    fn fd_for(
        &mut self,
        table: u32,
        fd: i64,
        path: &str,
        write: bool,
    ) -> Result<&mut OpenFd, OpError> {
        if !self.fds.contains_key(&(table, fd)) {
            let how = OpenOptions {
                write,
                create: write.then_some(FILE_PERMS),
            };
            let f = self.open_path(path, how)?;
            self.fds.insert(
                (table, fd),
                OpenFd {
                    fd: f,
                    pos: 0,
                    flags: OpenFlags::default(),
                },
            );
        }
        Ok(self.fds.get_mut(&(table, fd)).expect("inserted"))
    }

    // Long: one arm per trace op, each a call into the host file system or the design.
    fn apply_op(&mut self, ev: &Event, start: VirtualTime) -> Result<Applied, OpError> {
        let fs_done = |r: Result<(), FsError>| r.map(|_| Applied::Done).map_err(OpError::from);
        if is_syscall(&ev.op) {
            // The kernel's entry and exit and the argument's lookup, before the file
            // system's own work; a call that fails pays them too.
            let t = self.fs.clock().after(self.fs.costs().syscall_ns);
            self.fs.advance_to(t);
        }
        match &ev.op {
            Op::Open { path, flags } => {
                if let Some(walked) = walk_only(&mut self.fs, path, flags) {
                    return fs_done(walked);
                }
                let how = OpenOptions {
                    write: flags.write,
                    create: flags.create.then_some(FILE_PERMS),
                };
                // A creating open makes a missing parent (see `open_path`); the parent's inode
                // then says whether the file is there without walking the path again.
                let dir = match (how.create, parent(path)) {
                    (Some(_), Some(p)) => Some(self.known_dirs.mkdir_p(&mut self.fs, p)?),
                    _ => None,
                };
                // Linux truncates only a file that was there: one the open creates is
                // already empty, and `O_TRUNC` on it changes nothing (`do_open`).
                let truncate = flags.truncate
                    && flags.write
                    && match dir {
                        Some(dir) => {
                            let name = path.rsplit('/').next().unwrap_or(path);
                            self.fs.namespace().child(dir, name).is_some()
                        }
                        None => self.fs.namespace().find(path, WHO).is_ok(),
                    };
                let f = self.design.open(&mut self.fs, path, how, WHO)?;
                if truncate {
                    self.fs.truncate(path, 0, WHO)?;
                }
                if let Some(fd) = ev.ret {
                    let opened = OpenFd {
                        fd: f,
                        pos: 0,
                        flags: *flags,
                    };
                    if let Some(old) = self.fds.insert((ev.fd_table(), fd), opened) {
                        let _ = self.design.close(&mut self.fs, old.fd);
                    }
                } else {
                    let _ = self.design.close(&mut self.fs, f);
                }
                Ok(Applied::Done)
            }
            Op::Close { fd, .. } => {
                if let Some(o) = self.fds.remove(&(ev.fd_table(), *fd)) {
                    self.design.close(&mut self.fs, o.fd)?;
                }
                Ok(Applied::Done)
            }
            Op::Read { fd, path, off, len } => self.data(ev, *fd, path, *off, *len, false),
            Op::Pread { fd, path, off, len } => self.data(ev, *fd, path, Some(*off), *len, false),
            Op::Write {
                fd, path, off, len, ..
            } => self.data(ev, *fd, path, *off, *len, true),
            Op::Pwrite { fd, path, off, len } => self.data(ev, *fd, path, Some(*off), *len, true),
            Op::Fsync { fd, path } => {
                let f = self.fd_for(ev.fd_table(), *fd, path, false)?.fd;
                fs_done(self.fs.fsync(f))
            }
            Op::Fdatasync { fd, path } => {
                let f = self.fd_for(ev.fd_table(), *fd, path, false)?.fd;
                fs_done(self.fs.fdatasync(f))
            }
            Op::Sync => fs_done(self.fs.sync()),
            Op::Mkdir { path } => {
                if let Some(p) = parent(path) {
                    self.known_dirs.mkdir_p(&mut self.fs, p)?;
                }
                fs_done(self.fs.mkdir(path, DIR_PERMS, WHO).map(|_| ()))
            }
            Op::Mknod { path } => {
                if let Some(p) = parent(path) {
                    self.known_dirs.mkdir_p(&mut self.fs, p)?;
                }
                fs_done(self.fs.mknod(path, FILE_PERMS, WHO).map(|_| ()))
            }
            Op::Rmdir { path } => {
                self.design.rmdir(&mut self.fs, path, WHO)?;
                Ok(Applied::Done)
            }
            Op::Unlink { path } => {
                self.design.unlink(&mut self.fs, path, WHO)?;
                Ok(Applied::Done)
            }
            Op::Rename { path, to } => {
                if let Some(p) = parent(to) {
                    self.known_dirs.mkdir_p(&mut self.fs, p)?;
                }
                self.design.rename(&mut self.fs, path, to, WHO)?;
                Ok(Applied::Done)
            }
            Op::Link { path, to, follow } => {
                if let Some(p) = parent(to) {
                    self.known_dirs.mkdir_p(&mut self.fs, p)?;
                }
                let link = Link {
                    from: path,
                    to,
                    follow: *follow,
                };
                self.design.link(&mut self.fs, link, WHO)?;
                Ok(Applied::Done)
            }
            Op::Symlink { path, target } => {
                if let Some(p) = parent(path) {
                    self.known_dirs.mkdir_p(&mut self.fs, p)?;
                }
                fs_done(self.fs.symlink(path, target, LINK_PERMS, WHO).map(|_| ()))
            }
            Op::Stat { path } => fs_done(self.fs.lookup(path, WHO).map(|_| ())),
            Op::Lstat { path } => fs_done(self.fs.lookup_nofollow(path, WHO).map(|_| ())),
            // The inode is in memory with its open file: the call is all it costs.
            Op::Fstat { .. } => Ok(Applied::Done),
            Op::Readdir { path } => fs_done(self.fs.readdir(path, WHO).map(|_| ())),
            Op::Setattr { path, nofollow } => match nofollow {
                true => fs_done(self.fs.lsetattr(path, WHO)),
                false => fs_done(self.fs.setattr(path, WHO)),
            },
            Op::Truncate { path, len } => fs_done(self.fs.truncate(path, *len, WHO)),
            Op::Fallocate {
                fd,
                path,
                off,
                len,
                keep_size,
            } => {
                let f = self.fd_for(ev.fd_table(), *fd, path, true)?.fd;
                fs_done(self.fs.fallocate(f, *off, *len, *keep_size))
            }
            Op::SyncFileRange {
                fd,
                path,
                off,
                len,
                flags,
            } => {
                let f = self.fd_for(ev.fd_table(), *fd, path, false)?.fd;
                fs_done(
                    self.fs
                        .sync_file_range(f, *off, *len, flags.write, flags.wait_after),
                )
            }
            Op::MappedWrite {
                path,
                off,
                len,
                sync,
            } => self.mapped_write(path, *off, *len, *sync),
            Op::Ndp {
                task, paths, args, ..
            } => {
                let key = (task.clone(), args.clone());
                if !self.computes.contains_key(&key) {
                    match (self.compute)(task, args) {
                        Ok(c) => {
                            self.computes.insert(key.clone(), c);
                        }
                        Err(e) => return Ok(Applied::Skipped(format!("ndp: {e}"))),
                    }
                }
                let compute = self.computes.get_mut(&key).expect("inserted");
                let req = NdpRequest {
                    paths: paths.clone(),
                    who: WHO,
                };
                let stale = stale_files(&self.fs, self.design.kind(), &req)?;
                let out = self.design.offload(&mut self.fs, &req, compute.as_mut())?;
                self.ndp.stale_files += stale;
                let s = out.summary();
                self.ndp.requests += 1;
                self.ndp.files += s.files as u64;
                // Per-file means back to totals, so requests weigh by their file counts.
                self.ndp_stage_sum.add(&s.breakdown.scale(s.files as f64));
                Ok(Applied::Done)
            }
            Op::Isc { task, files, args } => self.isc(task, files, args),
            // A host file system has no CISC ops: the events run one after another (the
            // replay hands them over one by one; this serves a direct caller the same way).
            Op::Cisc { ops, .. } => {
                for e in ops {
                    let at = self.fs.clock();
                    if let Applied::Skipped(why) = self.apply_op(e, at)? {
                        return Ok(Applied::Skipped(why));
                    }
                }
                Ok(Applied::Done)
            }
            Op::Bread { off, len } => {
                let done = block_io(self.fs.device_mut(), false, start, *off, *len)?;
                self.fs.advance_to(done);
                Ok(Applied::Done)
            }
            Op::Bwrite { off, len } => {
                let done = block_io(self.fs.device_mut(), true, start, *off, *len)?;
                self.fs.advance_to(done);
                Ok(Applied::Done)
            }
        }
    }

    /// A read or write: at `off` if given (pread/pwrite, or a recorded offset), else at the
    /// fd's position, which it then advances. A write through an `O_APPEND` fd lands at the
    /// end of the file whatever the offset, as Linux does (even for `pwrite`). Through an
    /// `O_DIRECT` fd the bytes move between the device and the caller's buffer by DMA: no
    /// copy, no page-cache work, and a write is on the device when it returns. Through an
    /// `O_DSYNC` or `O_SYNC` fd a write then waits as `fdatasync` or `fsync` would.
    fn data(
        &mut self,
        ev: &Event,
        fd: i64,
        path: &str,
        off: Option<u64>,
        len: u64,
        write: bool,
    ) -> Result<Applied, OpError> {
        let n = rw_count(ev, len)?;
        let positional = matches!(ev.op, Op::Pread { .. } | Op::Pwrite { .. });
        let capacity = self.fs.device().capacity_bytes();
        let o = self.fd_for(ev.fd_table(), fd, path, write)?;
        let (f, flags) = (o.fd, o.flags);
        // Only an append needs the file system (its size), and so the fd table again.
        let (at, o) = if write && (flags.append || ev.appends()) {
            let size = self.fs.fd_size(f)?;
            (
                size,
                self.fds
                    .get_mut(&(ev.fd_table(), fd))
                    .expect("opened above"),
            )
        } else {
            (off.unwrap_or(o.pos), o)
        };
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
        if flags.direct && !write {
            self.fs.flush_range(f, at, n)?;
        }
        // A read stops at the end of the file (Linux's `filemap_read`): past it, nothing is
        // copied.
        let end = if write {
            end
        } else {
            end.min(self.fs.fd_size(f)?.max(at))
        };
        let mut pos = at;
        while pos < end {
            let step = (end - pos).min(DATA_STEP);
            // The copy between the user's buffer and the page cache, and the cache's work per
            // page it touches, on the calling thread.
            if !flags.direct {
                let costs = self.fs.costs();
                let cpu = csd_device::transfer_ns(step, costs.copy_bytes_per_sec)
                    .saturating_add(costs.page_cache_ns(pos, step));
                let t = self.fs.clock().after(cpu);
                self.fs.advance_to(t);
            }
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
        if write && flags.direct {
            self.fs.flush_range(f, at, n)?;
        }
        if write && (flags.dsync || flags.sync) {
            self.fs.sync_written(f, at, n, !flags.sync)?;
        }
        Ok(Applied::Done)
    }

    /// Stores through a shared mapping of `path`, each page of `off..off + len` within the
    /// file written: per 4 KiB host page a write fault and the page cache's work (a block
    /// read first if it is on the device and not cached, as `filemap_fault` reads it), but
    /// no copy (the
    /// program stores into the page itself) and no design's open (the mapping holds the
    /// inode). With `sync` (`msync(MS_SYNC)`) the range is then written back and waited for.
    fn mapped_write(
        &mut self,
        path: &str,
        off: u64,
        len: u64,
        sync: bool,
    ) -> Result<Applied, OpError> {
        let f = self.fs.open_mapped(path)?;
        let end = off.saturating_add(len).min(self.fs.fd_size(f)?);
        let mut pos = off;
        while pos < end {
            let step = (end - pos).min(DATA_STEP);
            let costs = self.fs.costs();
            let cpu = costs
                .faults_ns(pos, step)
                .saturating_add(costs.page_cache_ns(pos, step));
            let t = self.fs.clock().after(cpu);
            self.fs.advance_to(t);
            // The fault reads what the device holds of the pages, then the stores dirty them.
            self.fs.fault_in(f, pos, step)?;
            if self.zeros.len() < step as usize {
                self.zeros.resize(step as usize, 0);
            }
            self.fs.write(f, pos, &self.zeros[..step as usize])?;
            pos += step;
        }
        if sync && end > off {
            self.fs.sync_written(f, off, end - off, true)?;
        }
        self.fs.close(f)?;
        Ok(Applied::Done)
    }

    /// An `isc` op: the files' dirty pages written back and their extents found (`fiemap`),
    /// then the task runs as one transaction on the lent device; a committed task's file
    /// growth becomes the files' new layouts. Files the op writes are created if missing.
    fn isc(&mut self, task: &str, files: &[IscFile], args: &str) -> Result<Applied, OpError> {
        if self.isc_runner.is_none() {
            return Ok(Applied::Skipped(
                "isc (no task runtime given to the replay)".to_string(),
            ));
        }
        let mut lent = Vec::with_capacity(files.len());
        let mut inos = Vec::with_capacity(files.len());
        for f in files {
            if f.mode.writable() && self.fs.namespace().find(&f.path, WHO).is_err() {
                if let Some(p) = parent(&f.path) {
                    self.known_dirs.mkdir_p(&mut self.fs, p)?;
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
        // Room to grow: as much again as the files hold, and a little for new outputs.
        let pages: u64 = lent.iter().flat_map(|f| &f.extents).map(|e| e.pages).sum();
        let pool = self.fs.reserve_blocks(pages + ISC_SPARE_PAGES)?;
        let Some(runner) = self.isc_runner.as_deref_mut() else {
            unreachable!("checked above");
        };
        let at = self.fs.clock();
        let out = self.fs.lend_device(|device| {
            let (device, out) = runner.run(device, at, task, args, lent, pool);
            (out, device)
        });
        self.fs.release_blocks(&out.pool_left)?;
        for (ino, (size, extents)) in inos.iter().zip(out.files) {
            self.fs.adopt_layout(*ino, size, extents)?;
        }
        self.fs.advance_to(out.done);
        self.isc.requests += 1;
        match out.error {
            None => {
                self.isc.committed += 1;
                Ok(Applied::Done)
            }
            Some(e) => {
                self.isc.aborted += 1;
                Err(OpError::IscAborted(e))
            }
        }
    }
}

impl System for HostSystem<'_> {
    fn name(&self) -> String {
        self.design.kind().to_string()
    }

    fn op_started(&self) -> VirtualTime {
        self.fs.op_started()
    }

    fn begin(&mut self, start: VirtualTime) -> Result<(), String> {
        self.fs.start_op(start);
        // Background work due by now (kernel flusher; LightFS's updater and block monitor).
        let background = self
            .design
            .background(&mut self.fs)
            .map_err(|e| e.to_string());
        self.fs.set_clock(start);
        background
    }

    fn apply(&mut self, ev: &Event, start: VirtualTime) -> Result<Applied, OpError> {
        self.apply_op(ev, start)
    }

    fn walks_missing(&self) -> bool {
        true
    }

    /// The system call, then the kernel's walk: each level's metadata blocks, the directory
    /// that lacks the name searched (a negative dentry is not modelled: a second miss
    /// finds those blocks cached and pays the walk's CPU).
    fn walk_missing(&mut self, path: &str, _start: VirtualTime) -> Result<Applied, OpError> {
        let t = self.fs.clock().after(self.fs.costs().syscall_ns);
        self.fs.advance_to(t);
        Ok(match self.fs.lookup_partial(path, WHO) {
            Ok(_) => Applied::Done,
            Err(_) => Applied::Skipped(FAILED_IN_TRACE.to_string()),
        })
    }

    fn clock(&self) -> VirtualTime {
        self.fs.clock()
    }

    fn totals(&self) -> Totals {
        let ndp = (self.ndp.requests > 0).then(|| {
            let breakdown = self.ndp_stage_sum.scale(1.0 / self.ndp.files.max(1) as f64);
            NdpTotals {
                pao: breakdown.pao(),
                breakdown,
                ..self.ndp.clone()
            }
        });
        Totals {
            ndp,
            isc: (self.isc.requests > 0).then(|| self.isc.clone()),
            fusion: None,
            isp: None,
            journal: self.fs.journal_stats(),
            device: self.fs.device().counters(),
        }
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.fs.check_invariants().map_err(|e| e.to_string())
    }
}

/// The system a trace starts on: a formatted host file system over a fresh device of
/// `profile`, holding the files and directories the trace uses without creating them,
/// `design` initialised on it, caches cold (LightFS restarted: only what its startup loads),
/// counters and clock at zero.
fn prepare(
    scan: &Prescan,
    profile: &Profile,
    design: DesignKind,
    seed: u64,
) -> Result<(HostFs, Box<dyn OffloadDesign>), SetupError> {
    let setup = |e: &dyn std::fmt::Display| SetupError::Files(e.to_string());
    let device = csd_device::Device::new(profile, csd_device::DataMode::TimingOnly)?;
    let mut fs = HostFs::format(device, DIR_PERMS).map_err(|e| setup(&e))?;
    fs.seed_writeback(seed);
    // Files the trace reads without writing are made first; what they need must fit.
    let needed: u64 = scan.files.values().fold(0, |a, f| a.saturating_add(f.size));
    if needed > fs.device().capacity_bytes() {
        return Err(SetupError::Files(format!(
            "the trace reads {needed} bytes of files it never writes (they must exist before it \
             starts), more than the {}-byte device of profile '{}' holds",
            fs.device().capacity_bytes(),
            profile.name
        )));
    }
    make_initial_files(&mut fs, scan).map_err(|e| setup(&e))?;
    let mut d = design.build();
    d.init(&mut fs, "/", WHO).map_err(|e| setup(&e))?;
    // The trace runs on ext4 as mounted: metadata through its journal.
    fs.enable_journal().map_err(|e| setup(&e))?;
    d.drop_caches(&mut fs);
    // The trace starts on an idle device with fresh counters.
    fs.device_mut().reset_measurements();
    fs.restart_time();
    Ok((fs, d))
}

/// Makes the directories and files the trace needs to exist before it starts, the files
/// zero-filled where the trace reads them.
pub(super) fn make_initial_files(fs: &mut HostFs, scan: &Prescan) -> Result<(), FsError> {
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
    for f in scan.files.keys() {
        if let Some(p) = parent(f) {
            mkdir_p(fs, p)?;
        }
    }
    // Opened without O_DIRECTORY but made a directory as another file's parent: skipped.
    let files: Vec<_> = scan
        .files
        .iter()
        .filter(|(f, _)| fs.namespace().find(f, WHO).is_err())
        .collect();
    let written: Vec<Vec<(u64, u64)>> = files
        .iter()
        .map(|(_, needed)| needed.read.iter().map(|(&s, &e)| (s, e)).collect())
        .collect();
    // As `cp` and `sync` leave them: the data in one stream, then the metadata.
    let new = files.iter().zip(&written).map(|((f, needed), written)| {
        let size = needed.size;
        (f.as_str(), NewFile::Zeros { size, written })
    });
    fs.import_all(new, FILE_PERMS, WHO)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use csd_device::{DataMode, Device};

    /// Whatever the namespace did in between, the memo gives what a walk gives: the
    /// directory there now, made again once the one it knew was renamed or removed, and
    /// never a file it once found under the name.
    #[test]
    fn known_dirs_answer_as_mkdir_p_does_after_directories_move() {
        let profile = Profile::load("cosmos-plus").unwrap();
        let device = Device::new(&profile, DataMode::TimingOnly).unwrap();
        let mut fs = HostFs::format(device, DIR_PERMS).unwrap();
        let mut known = KnownDirs::default();
        let made = known.mkdir_p(&mut fs, "/a/b").unwrap();
        assert_eq!(known.mkdir_p(&mut fs, "/a/b").unwrap(), made);
        // A file's comings and goings leave the memo alone.
        fs.import("/a/b/f", &[], FILE_PERMS, WHO).unwrap();
        fs.unlink("/a/b/f", WHO).unwrap();
        assert_eq!(known.mkdir_p(&mut fs, "/a/b").unwrap(), made);
        // The directory moves away: the path is made again, as mkdir_p would.
        fs.rename("/a", "/moved", WHO).unwrap();
        let again = known.mkdir_p(&mut fs, "/a/b").unwrap();
        assert_ne!(again, made);
        assert_eq!(fs.namespace().find("/a/b", WHO).unwrap(), again);
        assert_eq!(fs.namespace().find("/moved/b", WHO).unwrap(), made);
        // A file under the name is what mkdir_p returns, and is not remembered: once it is
        // gone (which changes no version) the directory made there is the answer.
        fs.import("/c", &[], FILE_PERMS, WHO).unwrap();
        let file = known.mkdir_p(&mut fs, "/c").unwrap();
        assert!(!fs.namespace().inode(file).unwrap().is_dir());
        fs.unlink("/c", WHO).unwrap();
        fs.mkdir("/c", DIR_PERMS, WHO).unwrap();
        let dir = known.mkdir_p(&mut fs, "/c").unwrap();
        assert!(fs.namespace().inode(dir).unwrap().is_dir());
        // Past the bound the memo starts again, and still answers.
        for i in 0..MAX_KNOWN_DIRS + 1 {
            known.mkdir_p(&mut fs, &format!("/many/{i}")).unwrap();
        }
        assert!(known.dirs.len() <= MAX_KNOWN_DIRS);
        assert_eq!(known.mkdir_p(&mut fs, "/moved/b").unwrap(), made);
    }
}
