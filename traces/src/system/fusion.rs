//! FusionFS as a system under test: the trace's file operations go to StorageFS, the
//! firmware file system, with no host file system in front. Two designs share it:
//!
//! - `firmware` (CrossFS-like): every file operation is its own host↔device round trip, a
//!   one-command op; a program that modifies data it read does so on the host;
//! - `fusion`: a `cisc` op of the trace (see [`crate::fuse`]) is one round trip carrying all
//!   its commands, its modifications run as a device stage; other operations go as in
//!   `firmware`.
//!
//! A round trip costs what `csd fusion` charges (the profile's `[fusion]` table and device
//! CPU): the UserLib's per-call work and any host computation, the PCIe command delay and
//! the DMA of the op's buffers, StorageFS's device-core time as measured by running the op,
//! the medium's reads and writes through the device model, and the DMA of what it returns.
//! Device cores are shared by every pid of the trace.
//!
//! StorageFS keeps bytes, so this system writes real contents ([`super::contents`]) and
//! fused and unfused replays can be compared byte for byte. Its namespace is flat (a path is
//! a name, directories have no inodes): `mkdir`, `rmdir`, a directory's `open`/`fsync`/
//! `close` and `stat` are lookups on the device.

use super::contents::{Contents, KeptRead, MAX_KEPT_READ};
use super::interface::{Applied, FusionTotals, OpClock, OpError, SetupError, System, Totals};
use super::placement::Placement;
use crate::format::{Event, Op, OpenFlags};
use crate::prescan::Prescan;
use csd_device::storagefs::data::CHUNK;
use csd_device::storagefs::medium::is_symlink;
use csd_device::storagefs::{
    Credentials, FsStep, Redo, StageRunner, StorageFs, Submitted, MAX_FILE_BYTES,
};
use csd_device::{DataMode, Device, IoPath, LinkDirection, Profile, VirtualTime};
use csd_hostfs::fusion::ops::core_ns;
use csd_sdk::cisc::{
    CiscBuilder, FileRef, Slot, Stage, MAX_COMMANDS, MAX_INPUTS, MAX_SLOT_BYTES, OP_PAGE_BYTES,
};
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap};

/// Who replays: the traces carry no credentials.
const WHO: Credentials = Credentials { uid: 0 };
/// Bytes of a `stat` answer DMA'd back.
const STAT_BYTES: u64 = 144;
/// The most data one round trip carries: one slot per host buffer.
const CALL_BYTES: u64 = (MAX_INPUTS * MAX_SLOT_BYTES) as u64;

/// A trace fd, as StorageFS knows it.
#[derive(Clone, Debug)]
enum TraceFd {
    File {
        fd: u32,
        append: bool,
        pos: u64,
    },
    /// A directory: StorageFS keeps none, so it names only a path.
    Dir,
}

/// Where a data op lands.
struct Span {
    file: FileRef,
    append: bool,
    at: u64,
    n: u64,
    end: u64,
}

/// A read whose data a later write of the same op may modify, on the device.
struct InOpRead {
    path: String,
    offset: u64,
    len: u64,
    slot: Slot,
}

/// One round trip being put together: a CISC op and the host's own work for it.
#[derive(Default)]
struct Call {
    b: CiscBuilder,
    host_ns: u64,
    in_bytes: u64,
    /// Files this op opens, by trace fd.
    handles: HashMap<i64, (FileRef, bool, u64)>,
    /// The op's previous event was this read.
    last_read: Option<InOpRead>,
    /// Reads whose data is returned, in order: (path, offset, trace length), for the pid's
    /// kept read.
    returns: Vec<(String, u64, u64)>,
    /// The op's last event was a read, whose return is the last one.
    ends_in_read: bool,
    /// Events translated into it so far.
    events: usize,
    /// What its writes and cuts would leave each file holding, and the bytes they add.
    sizes: HashMap<String, u64>,
    growth: u64,
}

impl Call {
    /// Notes that `path` will end at least at `end` (`cut`: exactly at it).
    fn grows(&mut self, fs: &StorageFs, path: &str, end: u64, cut: bool) {
        let size = self
            .sizes
            .entry(path.to_string())
            .or_insert_with(|| fs.size(path).unwrap_or(0));
        self.growth += end.saturating_sub(*size);
        *size = if cut { end } else { (*size).max(end) };
    }

    /// `data` written to `file` one slot at a time: at `at` onwards, or appended (`None`).
    fn write_slots(&mut self, file: FileRef, at: Option<u64>, data: &[u8]) {
        for (i, chunk) in data.chunks(MAX_SLOT_BYTES).enumerate() {
            let s = self.b.input(chunk.to_vec());
            match at {
                Some(at) => self.b.pwrite(file, at + (i * MAX_SLOT_BYTES) as u64, s),
                None => self.b.append(file, s),
            };
        }
    }

    fn size(&self, fs: &StorageFs, path: &str) -> u64 {
        self.sizes
            .get(path)
            .copied()
            .unwrap_or_else(|| fs.size(path).unwrap_or(0))
    }
}

/// The costs of a round trip that do not depend on the op.
#[derive(Clone, Debug)]
struct CallCosts {
    user_lib_op_ns: u64,
    pcie_command_ns: u64,
    request_ns: u64,
    metadata_entry_ns: u64,
    host_ns_per_fuel: f64,
}

/// The names a lookup of `path` examines in StorageFS: one per component.
fn path_entries(path: &str) -> u64 {
    path.split('/').filter(|c| !c.is_empty()).count() as u64
}

/// StorageFS over the device, replaying fused ops whole (`fusion`) or not (`firmware`).
pub struct FusionSystem<'a> {
    fs: StorageFs,
    device: Device,
    profile: Profile,
    runner: &'a mut dyn StageRunner,
    fuses: bool,
    costs: CallCosts,
    /// The trace's open files, by (fd table, trace fd).
    fds: HashMap<(u32, i64), TraceFd>,
    dirs: BTreeSet<String>,
    placement: Placement,
    contents: Contents,
    kept: HashMap<u32, KeptRead>,
    /// When each device core is next free.
    cores: Vec<VirtualTime>,
    clock: OpClock,
    totals: FusionTotals,
    /// Whether the trace has made a symbolic link: until then no path needs following.
    links: bool,
}

fn storage(e: csd_device::storagefs::FsError) -> OpError {
    OpError::Storage(e.to_string())
}

/// The bytes a data op moves (what it returned, else what it asked), at most what one round
/// trip carries.
fn call_bytes(ev: &Event, len: u64) -> Result<u64, OpError> {
    let n = ev.ret.map_or(len, |r| r.max(0) as u64);
    if n > CALL_BYTES {
        return Err(OpError::Range(format!(
            "{} of {n} bytes: one StorageFS call carries at most {CALL_BYTES} ({MAX_INPUTS} buffers of {MAX_SLOT_BYTES})",
            ev.op.name()
        )));
    }
    Ok(n)
}

/// Every ancestor directory of `path` (`/a/b/c` → `/a`, `/a/b`).
/// The names directly inside the directory `prefix` (ending in '/') among sorted paths,
/// given the first path at or after a key: each child's own subtree is stepped over in one
/// seek ('0' follows '/'), so a listing costs its entries, not everything beneath them.
fn children<'a>(
    prefix: &'a str,
    first_from: impl Fn(&str) -> Option<&'a str> + 'a,
) -> impl Iterator<Item = &'a str> + 'a {
    let mut from = prefix.to_string();
    std::iter::from_fn(move || loop {
        let rest = first_from(&from)?.strip_prefix(prefix)?;
        match rest.split_once('/') {
            Some((child, _)) => from = format!("{prefix}{child}0"),
            None => {
                from = format!("{prefix}{rest}\0");
                if !rest.is_empty() {
                    return Some(rest);
                }
            }
        }
    })
}

fn parents(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/')
        .map(move |(i, _)| &path[..i])
        .filter(|p| !p.is_empty())
}

impl<'a> FusionSystem<'a> {
    /// StorageFS on a fresh device of `profile`, holding the files the trace uses without
    /// creating them (their contents drawn from `seed`), clock and counters at zero.
    pub fn new(
        scan: &Prescan,
        profile: &Profile,
        seed: u64,
        runner: &'a mut dyn StageRunner,
        fuses: bool,
    ) -> Result<FusionSystem<'a>, SetupError> {
        let needs = |what: &str| {
            SetupError::Profile(format!(
                "profile '{}' has no {what}; the firmware and fusion designs need one (try --profile optane-csd)",
                profile.name
            ))
        };
        let fusion = profile
            .fusion
            .as_ref()
            .ok_or_else(|| needs("[fusion] table"))?;
        let host_ns_per_fuel = profile
            .host
            .cpu_ns_per_fuel
            .ok_or_else(|| needs("host.cpu_ns_per_fuel"))?;
        let device = Device::new(profile, DataMode::TimingOnly)?;
        let placement = Placement::new(
            device.capacity_bytes() / device.page_size(),
            device.page_size(),
        );
        let mut sys = FusionSystem {
            fs: StorageFs::new(),
            placement,
            device,
            runner,
            fuses,
            costs: CallCosts {
                user_lib_op_ns: fusion.user_lib_op_ns,
                pcie_command_ns: profile.host_interface.pcie_command_ns,
                request_ns: profile.device_cpu.request_ns,
                metadata_entry_ns: profile.device_cpu.metadata_entry_ns,
                host_ns_per_fuel,
            },
            profile: profile.clone(),
            fds: HashMap::new(),
            dirs: scan.dirs.iter().cloned().collect(),
            contents: Contents::new(seed),
            kept: HashMap::new(),
            cores: vec![VirtualTime::ZERO; profile.device_cpu.cores.max(1) as usize],
            clock: OpClock::default(),
            totals: FusionTotals::default(),
            links: false,
        };
        sys.make_initial_files(scan)?;
        sys.device.reset_measurements();
        sys.totals = FusionTotals::default();
        Ok(sys)
    }

    /// The files the trace reads without creating them, with their initial contents.
    fn make_initial_files(&mut self, scan: &Prescan) -> Result<(), SetupError> {
        let setup = |e: &dyn std::fmt::Display| SetupError::Files(e.to_string());
        let needed: u64 = scan.files.values().fold(0, |a, f| a.saturating_add(f.size));
        if needed > self.device.capacity_bytes() {
            return Err(SetupError::Files(format!(
                "the trace reads {needed} bytes of files it never writes, more than the {}-byte device of profile '{}' holds",
                self.device.capacity_bytes(),
                self.profile.name
            )));
        }
        // As hostfs's setup: the file is its size, and only the ranges the trace reads are
        // written (the rest reads as zeros, and costs no memory).
        for (path, f) in &scan.files {
            if f.size > MAX_FILE_BYTES {
                return Err(SetupError::Files(format!(
                    "{path} must hold {} bytes before the trace starts; StorageFS files hold at most {MAX_FILE_BYTES}",
                    f.size
                )));
            }
            for p in parents(path) {
                self.dirs.insert(p.to_string());
            }
            let fd = self
                .fs
                .open(WHO, path, true, self.runner)
                .map_err(|e| setup(&e))?;
            if f.size > 0 {
                let mut b = CiscBuilder::new();
                b.truncate(FileRef::Fd(fd), f.size);
                let op = b.finish().map_err(|e| setup(&e))?;
                self.fs
                    .submit(WHO, &op, self.runner)
                    .map_err(|e| setup(&e))?;
            }
            let pieces = f.read.iter().flat_map(|(&start, &end)| {
                (start..end)
                    .step_by(MAX_SLOT_BYTES)
                    .map(move |at| (at, (end - at).min(MAX_SLOT_BYTES as u64)))
            });
            for (at, len) in pieces {
                let mut b = CiscBuilder::new();
                let s = b.input(self.contents.initial(path, at, len as usize));
                b.pwrite(FileRef::Fd(fd), at, s);
                let op = b.finish().map_err(|e| setup(&e))?;
                let done = self
                    .fs
                    .submit(WHO, &op, self.runner)
                    .map_err(|e| setup(&e))?;
                let ranges = self.placed_writes(&done).map_err(|e| setup(&e))?;
                self.device
                    .write_ranges(IoPath::Host, VirtualTime::ZERO, &ranges, None)?;
            }
            self.fs.close(WHO, fd).map_err(|e| setup(&e))?;
        }
        Ok(())
    }

    /// StorageFS, for checks of what the replay left.
    pub fn storage(&self) -> &StorageFs {
        &self.fs
    }

    /// Closes StorageFS descriptor `fd`; the pages of a file its close freed go too.
    fn close_fd(&mut self, fd: u32) -> Result<(), OpError> {
        if let Some(ino) = self.fs.close(WHO, fd).map_err(storage)? {
            self.placement
                .free(ino)
                .map_err(|e| OpError::Storage(e.to_string()))?;
        }
        Ok(())
    }

    /// The device byte ranges an op's in-place writes land on; freed files' pages freed.
    fn placed_writes(&mut self, done: &Submitted) -> Result<Vec<(u64, u64)>, OpError> {
        let mut ranges = Vec::new();
        for s in &done.steps {
            match s {
                FsStep::Apply(Redo::Write { ino, offset, bytes }) => ranges.extend(
                    self.placement
                        .ranges(*ino, *offset, bytes.len() as u64)
                        .map_err(|e| OpError::Storage(e.to_string()))?,
                ),
                FsStep::Apply(Redo::Free { ino }) => self
                    .placement
                    .free(*ino)
                    .map_err(|e| OpError::Storage(e.to_string()))?,
                _ => {}
            }
        }
        Ok(ranges)
    }

    /// `ns` of work on the first device core free at `at`; when it ends.
    fn on_core(&mut self, at: VirtualTime, ns: u64) -> VirtualTime {
        let core = (0..self.cores.len())
            .min_by_key(|&i| self.cores[i])
            .expect("at least one core");
        let end = self.cores[core].max(at).after(ns);
        self.cores[core] = end;
        self.totals.device_core_ns += ns;
        end
    }

    /// A round trip that only looks up names (`entries` of them) and returns `out` bytes.
    fn lookup_call(&mut self, at: VirtualTime, entries: u64, out: u64) -> VirtualTime {
        self.totals.requests += 1;
        let t = at.after(self.costs.user_lib_op_ns);
        let t = self
            .device
            .host_transfer(
                LinkDirection::ToDevice,
                t.after(self.costs.pcie_command_ns),
                0,
            )
            .done;
        let ns = self.costs.request_ns + entries * self.costs.metadata_entry_ns;
        let t = self.on_core(t, ns);
        if out > 0 {
            self.device
                .host_transfer(LinkDirection::ToHost, t, out)
                .done
        } else {
            t
        }
    }

    /// Times a submitted op as one round trip from `at`.
    fn time(
        &mut self,
        at: VirtualTime,
        done: &Submitted,
        host_ns: u64,
        in_bytes: u64,
    ) -> Result<VirtualTime, OpError> {
        self.totals.requests += 1;
        self.totals.commands += done.cost.commands;
        self.totals.device_fuel += done.cost.fuel;
        self.totals.host_compute_ns += host_ns;
        let mut reads = Vec::new();
        for &(ino, offset, n) in &done.reads {
            reads.extend(
                self.placement
                    .ranges(ino, offset, n)
                    .map_err(|e| OpError::Storage(e.to_string()))?,
            );
        }
        let writes = self.placed_writes(done)?;
        let t = at.after(self.costs.user_lib_op_ns + host_ns);
        let t = self
            .device
            .host_transfer(
                LinkDirection::ToDevice,
                t.after(self.costs.pcie_command_ns),
                in_bytes,
            )
            .done;
        let core = core_ns(&self.profile, done).round() as u64;
        let mut t = self.on_core(t, core);
        if !reads.is_empty() {
            t = self
                .device
                .read_ranges(IoPath::Internal, t, &reads, None)?
                .done;
        }
        if !writes.is_empty() {
            t = self
                .device
                .write_ranges(IoPath::Internal, t, &writes, None)?
                .done;
        }
        let out: u64 = done.returned.iter().map(|r| r.len() as u64).sum();
        if out > 0 {
            t = self
                .device
                .host_transfer(LinkDirection::ToHost, t, out)
                .done;
        }
        Ok(t)
    }

    /// Submits `call` from `at`, keeps the pid's last read, and returns when it is done.
    fn submit(&mut self, pid: u32, call: Call, at: VirtualTime) -> Result<VirtualTime, OpError> {
        // StorageFS keeps its files in memory here: no more than the device holds.
        let held = self.fs.medium().bytes();
        let room = self.device.capacity_bytes();
        if held.saturating_add(call.growth) > room {
            return Err(OpError::Range(format!(
                "StorageFS is full: its files hold {held} bytes and the op would add {}, past the {room}-byte device",
                call.growth
            )));
        }
        let op = call
            .b
            .finish()
            .map_err(|e| OpError::Storage(format!("the op is not valid: {e}")))?;
        let done = self.fs.submit(WHO, &op, self.runner).map_err(storage)?;
        let end = self.time(at, &done, call.host_ns, call.in_bytes)?;
        self.kept.remove(&pid);
        if call.ends_in_read {
            if let (Some((path, offset, len)), Some(data)) =
                (call.returns.last(), done.returned.last())
            {
                self.kept.insert(
                    pid,
                    KeptRead {
                        path: path.clone(),
                        offset: *offset,
                        len: *len,
                        data: data.clone(),
                    },
                );
            }
        }
        Ok(end)
    }

    /// The file a data op names, from the op's own handles or the fds of `pid`'s table
    /// ([`Event::fd_table`]).
    fn file(&self, call: &Call, pid: u32, fd: i64) -> Result<(FileRef, bool, u64), OpError> {
        if let Some(h) = call.handles.get(&fd) {
            return Ok(*h);
        }
        match self.fds.get(&(pid, fd)) {
            Some(TraceFd::File { fd, append, pos }) => Ok((FileRef::Fd(*fd), *append, *pos)),
            Some(TraceFd::Dir) => Err(OpError::Unsupported(format!(
                "fd {fd} is a directory: StorageFS keeps no directory data"
            ))),
            None => Err(OpError::Range(format!(
                "fd {fd} of pid {pid} is not open here"
            ))),
        }
    }

    fn set_pos(&mut self, call: &mut Call, pid: u32, fd: i64, pos: u64) {
        if let Some(h) = call.handles.get_mut(&fd) {
            h.2 = pos;
        } else if let Some(TraceFd::File { pos: p, .. }) = self.fds.get_mut(&(pid, fd)) {
            *p = pos;
        }
    }

    /// Adds one event's commands to `call`.
    // Long: one arm per file operation a CISC op can carry.
    fn translate(&mut self, call: &mut Call, ev: &Event) -> Result<(), OpError> {
        let previous = call.last_read.take();
        call.ends_in_read = false;
        call.events += 1;
        match &ev.op {
            Op::Open { path, flags } => {
                let file = call.b.open(path, flags.create);
                if flags.truncate && flags.write {
                    call.b.truncate(file, 0);
                    call.grows(&self.fs, path, 0, true);
                }
                for p in parents(path) {
                    self.dirs.insert(p.to_string());
                }
                let fd = ev.ret.unwrap_or(-1);
                call.handles.insert(fd, (file, flags.append, 0));
            }
            Op::Close { fd, .. } => {
                let (file, ..) = self.file(call, ev.fd_table(), *fd)?;
                call.b.close(file);
                if call.handles.remove(fd).is_none() {
                    self.fds.remove(&(ev.fd_table(), *fd));
                }
            }
            Op::Fsync { fd, .. } | Op::Fdatasync { fd, .. } => {
                let (file, ..) = self.file(call, ev.fd_table(), *fd)?;
                call.b.fsync(file);
            }
            Op::Read { fd, path, off, len } => self.read(call, ev, *fd, path, *off, *len)?,
            Op::Pread { fd, path, off, len } => self.read(call, ev, *fd, path, Some(*off), *len)?,
            Op::Write {
                fd, path, off, len, ..
            } => self.write(call, ev, *fd, path, *off, *len, previous)?,
            Op::Pwrite { fd, path, off, len } => {
                self.write(call, ev, *fd, path, Some(*off), *len, previous)?
            }
            other => {
                return Err(OpError::Unsupported(format!(
                    "{} cannot be part of a CISC op",
                    other.name()
                )))
            }
        }
        Ok(())
    }

    /// Where a data op lands: its file, at `off` or the fd's position (which a `read` or
    /// `write` then moves past it).
    fn span(
        &mut self,
        call: &mut Call,
        ev: &Event,
        fd: i64,
        off: Option<u64>,
        len: u64,
    ) -> Result<Span, OpError> {
        let n = call_bytes(ev, len)?;
        let (file, append, pos) = self.file(call, ev.fd_table(), fd)?;
        let append = append || ev.appends();
        let at = off.unwrap_or(pos);
        let end = at
            .checked_add(n)
            .filter(|&e| e <= MAX_FILE_BYTES)
            .ok_or_else(|| {
                OpError::Range(format!(
                    "{} of {n} bytes at {at} is past StorageFS's {MAX_FILE_BYTES}-byte files",
                    ev.op.name()
                ))
            })?;
        if matches!(ev.op, Op::Read { .. } | Op::Write { .. }) {
            self.set_pos(call, ev.fd_table(), fd, end);
        }
        Ok(Span {
            file,
            append,
            at,
            n,
            end,
        })
    }

    /// A read into slots, returned to the host.
    fn read(
        &mut self,
        call: &mut Call,
        ev: &Event,
        fd: i64,
        path: &str,
        off: Option<u64>,
        len: u64,
    ) -> Result<(), OpError> {
        let Span {
            file, at, n, end, ..
        } = self.span(call, ev, fd, off, len)?;
        let mut o = at;
        let mut last = None;
        while o < end || last.is_none() {
            let step = (end - o).min(MAX_SLOT_BYTES as u64);
            let s = call.b.pread(file, o, step as u32);
            call.b.ret(s);
            last = Some(s);
            o += step;
            if step == 0 {
                break;
            }
        }
        call.returns.push((path.to_string(), at, n));
        call.ends_in_read = n as usize <= MAX_KEPT_READ;
        if let (Some(slot), true) = (last, n as usize <= MAX_KEPT_READ) {
            call.last_read = Some(InOpRead {
                path: path.to_string(),
                offset: at,
                len: n,
                slot,
            });
        }
        Ok(())
    }

    /// A write of the next pattern, or, right after a read of the same range, of that read
    /// modified (on the device when the read is in this op, on the host when it came back
    /// earlier).
    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        call: &mut Call,
        ev: &Event,
        fd: i64,
        path: &str,
        off: Option<u64>,
        len: u64,
        previous: Option<InOpRead>,
    ) -> Result<(), OpError> {
        let Span {
            file,
            append,
            at,
            n,
            end,
        } = self.span(call, ev, fd, off, len)?;
        if append {
            let size = call.size(&self.fs, path);
            call.grows(&self.fs, path, size.saturating_add(n), false);
        } else {
            call.grows(&self.fs, path, end, false);
        }
        let modifies = |p: &str, o: u64, l: u64| !append && p == path && o == at && l == n;
        let pattern = self.contents.next_write(path, n as usize);
        call.in_bytes += n;
        if let Some(r) = previous.filter(|r| modifies(&r.path, r.offset, r.len)) {
            let p = call.b.input(pattern);
            let out = call.b.process(Stage::Xor, &[p, r.slot]);
            call.b.pwrite(file, at, out);
            return Ok(());
        }
        // Only the op's first event follows the pid's previous op directly.
        let first = call.events == 1;
        let kept = self
            .kept
            .get(&ev.pid)
            .filter(|k| first && modifies(&k.path, k.offset, k.len));
        let data = match kept {
            Some(k) => {
                // The program modifies what it read, on its own CPU.
                let run = self
                    .runner
                    .run(&Stage::Xor, &pattern, &k.data, MAX_SLOT_BYTES)
                    .map_err(OpError::Storage)?;
                call.host_ns += (run.fuel as f64 * self.costs.host_ns_per_fuel).round() as u64;
                run.output
            }
            None => pattern,
        };
        call.write_slots(file, (!append).then_some(at), &data);
        if data.is_empty() {
            let s = call.b.input(Vec::new());
            call.b.pwrite(file, at, s);
        }
        Ok(())
    }
}

impl FusionSystem<'_> {
    /// `ev` with the symbolic links StorageFS holds followed on each path it names, as POSIX
    /// resolution follows them (a link at the end only for the calls that follow one), and
    /// the names looked up beyond the resolved paths'.
    fn follow_links(&self, ev: &Event) -> Result<(Event, u64), OpError> {
        let medium = self.fs.medium();
        let target_of = |p: &str| {
            let inode = medium.inodes.get(&medium.lookup(p)?)?;
            is_symlink(inode.mode)
                .then(|| String::from_utf8(inode.data.to_vec()).ok())
                .flatten()
        };
        let mut detour = 0;
        let mut follow = |path: &mut String, last: bool| -> Result<(), OpError> {
            let f = crate::links::follow(path, last, target_of).map_err(OpError::Storage)?;
            detour += f.detour;
            if let std::borrow::Cow::Owned(p) = f.path {
                *path = p;
            }
            Ok(())
        };
        let mut ev = ev.clone();
        match &mut ev.op {
            Op::Open { path, flags } => follow(path, !(flags.path && flags.nofollow))?,
            Op::Setattr { path, nofollow } => follow(path, !*nofollow)?,
            Op::Stat { path }
            | Op::Readdir { path }
            | Op::Truncate { path, .. }
            | Op::MappedWrite { path, .. } => follow(path, true)?,
            Op::Lstat { path }
            | Op::Unlink { path }
            | Op::Rmdir { path }
            | Op::Mkdir { path }
            | Op::Mknod { path }
            | Op::Symlink { path, .. } => follow(path, false)?,
            Op::Rename { path, to } => {
                follow(path, false)?;
                follow(to, false)?;
            }
            Op::Link {
                path,
                to,
                follow: last,
            } => {
                follow(path, *last)?;
                follow(to, false)?;
            }
            Op::Cisc { ops, .. } => {
                for e in ops.iter_mut() {
                    let (resolved, d) = self.follow_links(e)?;
                    *e = resolved;
                    detour += d;
                }
            }
            _ => {}
        }
        Ok((ev, detour))
    }

    /// A RISC-style open: one round trip; a directory is only looked up.
    fn open(
        &mut self,
        ev: &Event,
        path: &str,
        flags: &OpenFlags,
        at: VirtualTime,
    ) -> Result<VirtualTime, OpError> {
        let entries = path_entries(path);
        // An `O_PATH` fd, like a directory's, names what the walk found and moves no data.
        if flags.directory || flags.path || self.dirs.contains(path) || path == "/" {
            let end = self.lookup_call(at, entries, 0);
            if let Some(fd) = ev.ret {
                self.fds.insert((ev.fd_table(), fd), TraceFd::Dir);
            }
            return Ok(end);
        }
        let truncate = flags.truncate && flags.write;
        let (fd, done) = self
            .fs
            .open_costed(WHO, path, flags.create, truncate, self.runner)
            .map_err(storage)?;
        for p in parents(path) {
            self.dirs.insert(p.to_string());
        }
        let end = self.time(at, &done, 0, path.len() as u64)?;
        match ev.ret {
            Some(tfd) => {
                let f = TraceFd::File {
                    fd,
                    append: flags.append,
                    pos: 0,
                };
                if let Some(TraceFd::File { fd: old, .. }) =
                    self.fds.insert((ev.fd_table(), tfd), f)
                {
                    self.close_fd(old)?;
                }
            }
            None => self.close_fd(fd)?,
        }
        Ok(end)
    }

    /// A trace fd the trace never showed opened (inherited): opened here first, as its own
    /// round trip.
    fn implicit_open(&mut self, ev: &Event, at: VirtualTime) -> Result<VirtualTime, OpError> {
        let Some((fd, path)) = ev.op.fd_path() else {
            return Ok(at);
        };
        if self.fds.contains_key(&(ev.fd_table(), fd)) {
            return Ok(at);
        }
        let write = matches!(
            ev.op,
            Op::Write { .. } | Op::Pwrite { .. } | Op::Fallocate { .. }
        );
        let open = Event {
            op: Op::Open {
                path: path.to_string(),
                flags: OpenFlags {
                    read: true,
                    write,
                    create: write,
                    ..OpenFlags::default()
                },
            },
            ret: Some(fd),
            ..ev.clone()
        };
        let Op::Open { path, flags } = &open.op else {
            unreachable!("built above")
        };
        self.open(&open, path, flags, at)
    }

    /// One event that is not a fused op: its own round trip (or none, for what StorageFS
    /// keeps no state of).
    // Long: one arm per trace op, each a StorageFS call or a lookup.
    fn apply_single(&mut self, ev: &Event, at: VirtualTime) -> Result<VirtualTime, OpError> {
        let entries = path_entries;
        match &ev.op {
            Op::Open { path, flags } => {
                self.kept.remove(&ev.pid);
                self.open(ev, path, flags, at)
            }
            Op::Close { fd, .. }
                if matches!(
                    self.fds.get(&(ev.fd_table(), *fd)),
                    Some(TraceFd::Dir) | None
                ) =>
            {
                self.kept.remove(&ev.pid);
                self.fds.remove(&(ev.fd_table(), *fd));
                Ok(self.lookup_call(at, 0, 0))
            }
            Op::Fsync { fd, .. } | Op::Fdatasync { fd, .. }
                if matches!(self.fds.get(&(ev.fd_table(), *fd)), Some(TraceFd::Dir)) =>
            {
                // StorageFS journals its namespace with every op: a directory has nothing
                // left to flush.
                self.kept.remove(&ev.pid);
                Ok(self.lookup_call(at, 0, 0))
            }
            // The attributes live on the device: a round trip through the open handle, with
            // no path to look up.
            Op::Fstat { .. } => {
                self.kept.remove(&ev.pid);
                Ok(self.lookup_call(at, 0, STAT_BYTES))
            }
            Op::Close { .. }
            | Op::Read { .. }
            | Op::Write { .. }
            | Op::Pread { .. }
            | Op::Pwrite { .. }
            | Op::Fsync { .. }
            | Op::Fdatasync { .. } => {
                let at = self.implicit_open(ev, at)?;
                let mut call = Call::default();
                self.translate(&mut call, ev)?;
                self.submit(ev.pid, call, at)
            }
            Op::Cisc { ops, .. } => {
                let mut t = at;
                for e in ops {
                    t = self.apply_single(e, t)?;
                }
                Ok(t)
            }
            // StorageFS's ops are durable when they return: `sync` has nothing to write.
            Op::Sync | Op::SyncFileRange { .. } => {
                self.kept.remove(&ev.pid);
                Ok(self.lookup_call(at, 0, 0))
            }
            Op::Unlink { path } => {
                self.kept.remove(&ev.pid);
                let mut call = Call::default();
                call.b.unlink(path);
                self.submit(ev.pid, call, at)
            }
            // StorageFS keeps no attributes beyond what it journals per op: a change to them is
            // a round trip that finds the inode, as a stat is.
            Op::Stat { path } | Op::Lstat { path } | Op::Setattr { path, .. } => {
                self.kept.remove(&ev.pid);
                if self.fs.medium().lookup(path).is_none()
                    && !self.dirs.contains(path)
                    && path != "/"
                {
                    return Err(OpError::Storage(format!(
                        "{} of {path}: no such file or directory",
                        ev.op.name()
                    )));
                }
                let out = match ev.op {
                    Op::Stat { .. } | Op::Lstat { .. } => STAT_BYTES,
                    _ => 0,
                };
                Ok(self.lookup_call(at, entries(path), out))
            }
            // StorageFS keeps a flat namespace of paths (and the trace's directories): a
            // listing looks up the directory and examines each name directly in it.
            Op::Readdir { path } => {
                self.kept.remove(&ev.pid);
                if !self.dirs.contains(path) && path != "/" {
                    return Err(OpError::Storage(format!(
                        "readdir of {path}: no such directory"
                    )));
                }
                let prefix = format!("{}/", path.trim_end_matches('/'));
                let names = &self.fs.medium().names;
                let files = children(&prefix, |from| {
                    names
                        .range(from.to_string()..)
                        .next()
                        .map(|(p, _)| p.as_str())
                });
                let dirs = children(&prefix, |from| {
                    self.dirs
                        .range(from.to_string()..)
                        .next()
                        .map(String::as_str)
                });
                let (n, bytes) = files.chain(dirs).fold((0u64, 0u64), |(n, b), name| {
                    (n + 1, b + csd_hostfs::namespace::dirent64_bytes(name.len()))
                });
                Ok(self.lookup_call(at, entries(path) + n, bytes))
            }
            Op::Mkdir { path } => {
                self.kept.remove(&ev.pid);
                if self.fs.medium().lookup(path).is_some() || !self.dirs.insert(path.clone()) {
                    return Err(OpError::Storage(format!("mkdir of {path}: it exists")));
                }
                for p in parents(path) {
                    self.dirs.insert(p.to_string());
                }
                Ok(self.lookup_call(at, entries(path), 0))
            }
            Op::Rmdir { path } => {
                self.kept.remove(&ev.pid);
                let below = format!("{}/", path.trim_end_matches('/'));
                let has_file = self
                    .fs
                    .medium()
                    .names
                    .range(below.clone()..)
                    .next()
                    .is_some_and(|(n, _)| n.starts_with(&below));
                let has_dir = self
                    .dirs
                    .range(below.clone()..)
                    .next()
                    .is_some_and(|d| d.starts_with(&below));
                if has_file || has_dir {
                    return Err(OpError::Storage(format!("rmdir of {path}: not empty")));
                }
                if !self.dirs.remove(path) {
                    return Err(OpError::Storage(format!(
                        "rmdir of {path}: no such directory"
                    )));
                }
                Ok(self.lookup_call(at, entries(path), 0))
            }
            Op::Symlink { path, target } => {
                self.kept.remove(&ev.pid);
                for p in parents(path) {
                    self.dirs.insert(p.to_string());
                }
                let mut call = Call::default();
                call.b.symlink(target, path);
                call.grows(&self.fs, path, target.len() as u64, true);
                let end = self.submit(ev.pid, call, at)?;
                self.links = true;
                Ok(end)
            }
            Op::Rename { path, to } if self.dirs.contains(path) => {
                self.kept.remove(&ev.pid);
                self.rename_dir(ev.pid, path, to, at)
            }
            Op::Rename { path, to } | Op::Link { path, to, .. } => {
                self.kept.remove(&ev.pid);
                for p in parents(to) {
                    self.dirs.insert(p.to_string());
                }
                let mut call = Call::default();
                match ev.op {
                    Op::Rename { .. } => call.b.rename(path, to),
                    _ => call.b.link(path, to),
                };
                self.submit(ev.pid, call, at)
            }
            // StorageFS keeps a file's bytes, not its blocks: there is nothing to set aside, and
            // only a size that grows changes the file (a truncate through the fd).
            Op::Fallocate {
                fd,
                path,
                off,
                len,
                keep_size,
            } => {
                self.kept.remove(&ev.pid);
                let end = off
                    .checked_add(*len)
                    .filter(|&e| e <= MAX_FILE_BYTES)
                    .ok_or_else(|| {
                        OpError::Range(format!(
                            "fallocate of {len} bytes at {off} is past StorageFS's {MAX_FILE_BYTES}-byte files"
                        ))
                    })?;
                let at = self.implicit_open(ev, at)?;
                let mut call = Call::default();
                let (file, ..) = self.file(&call, ev.fd_table(), *fd)?;
                if *keep_size || end <= call.size(&self.fs, path) {
                    return Ok(self.lookup_call(at, 0, 0));
                }
                call.events += 1;
                call.b.truncate(file, end);
                call.grows(&self.fs, path, end, true);
                self.submit(ev.pid, call, at)
            }
            // An inode and a name: a create and its close, one round trip.
            Op::Mknod { path } => {
                self.kept.remove(&ev.pid);
                if self.fs.medium().lookup(path).is_some() || self.dirs.contains(path) {
                    return Err(OpError::Storage(format!("mknod of {path}: it exists")));
                }
                for p in parents(path) {
                    self.dirs.insert(p.to_string());
                }
                let mut call = Call::default();
                let h = call.b.open(path, true);
                call.b.close(h);
                call.grows(&self.fs, path, 0, true);
                self.submit(ev.pid, call, at)
            }
            // By path: the op opens the file for itself, one round trip in all.
            Op::Truncate { path, len } => {
                self.kept.remove(&ev.pid);
                if *len > MAX_FILE_BYTES {
                    return Err(OpError::Range(format!(
                        "truncate of {path} to {len} bytes: StorageFS files hold at most {MAX_FILE_BYTES}"
                    )));
                }
                let mut call = Call::default();
                let h = call.b.open(path, false);
                call.b.truncate(h, *len).close(h);
                call.grows(&self.fs, path, *len, true);
                self.submit(ev.pid, call, at)
            }
            // StorageFS has no host page cache to map: a mapping's stores reach it as writes
            // by path, a round trip for each call's worth, each opening the file for itself
            // (as `truncate` does). Bytes past the file's end are not written.
            Op::MappedWrite { path, off, len, .. } => {
                self.kept.remove(&ev.pid);
                let Some(size) = self.fs.size(path) else {
                    return Err(OpError::Storage(format!(
                        "mapped write of {path}: no such file"
                    )));
                };
                let end = off.saturating_add(*len).min(size);
                if end <= *off {
                    return Ok(self.lookup_call(at, entries(path), 0));
                }
                let (mut t, mut pos) = (at, *off);
                while pos < end {
                    let n = (end - pos).min(CALL_BYTES);
                    let mut call = Call::default();
                    call.events += 1;
                    call.in_bytes += n;
                    let h = call.b.open(path, false);
                    let data = self.contents.next_write(path, n as usize);
                    call.write_slots(h, Some(pos), &data);
                    call.b.close(h);
                    t = self.submit(ev.pid, call, t)?;
                    pos += n;
                }
                Ok(t)
            }
            Op::Ndp { .. } | Op::Isc { .. } | Op::Bread { .. } | Op::Bwrite { .. } => {
                unreachable!("skipped in apply")
            }
        }
    }

    /// A directory renamed: StorageFS's namespace is flat (a path is a name), so every file
    /// under it is renamed, as many to a round trip as one op's page holds (at most
    /// [`MAX_COMMANDS`], their names within [`OP_PAGE_BYTES`]), and the trace's directories
    /// under it move with it. As `rename(2)`, the new name may be an empty directory, not
    /// a file, a directory with entries, or a place inside the directory itself.
    fn rename_dir(
        &mut self,
        pid: u32,
        from: &str,
        to: &str,
        at: VirtualTime,
    ) -> Result<VirtualTime, OpError> {
        let refuse = |why: &str| Err(OpError::Storage(format!("rename of {from} to {to}: {why}")));
        let below = |dir: &str| format!("{}/", dir.trim_end_matches('/'));
        let (old, new) = (below(from), below(to));
        if new.starts_with(&old) {
            return refuse("the new name is inside the directory");
        }
        if self.fs.medium().lookup(to).is_some() {
            return refuse("the new name is a file");
        }
        let names = &self.fs.medium().names;
        let holds = |prefix: &str| {
            let file = names.range(prefix.to_string()..).next();
            let dir = self.dirs.range(prefix.to_string()..).next();
            file.is_some_and(|(n, _)| n.starts_with(prefix))
                || dir.is_some_and(|d| d.starts_with(prefix))
        };
        if self.dirs.contains(to) && holds(&new) {
            return refuse("the new name is a directory that is not empty");
        }
        let moved: Vec<(String, String)> = names
            .range(old.clone()..)
            .take_while(|(n, _)| n.starts_with(&old))
            .map(|(n, _)| (n.clone(), format!("{new}{}", &n[old.len()..])))
            .collect();
        let dirs: Vec<String> = self
            .dirs
            .range(old.clone()..)
            .take_while(|d| d.starts_with(&old))
            .cloned()
            .collect();
        for d in dirs {
            self.dirs.remove(&d);
            self.dirs.insert(format!("{new}{}", &d[old.len()..]));
        }
        self.dirs.remove(from);
        self.dirs.insert(to.to_string());
        for p in parents(to) {
            self.dirs.insert(p.to_string());
        }
        if moved.is_empty() {
            return Ok(self.lookup_call(at, path_entries(from) + path_entries(to), 0));
        }
        // Long names fill the page before 32 commands do (a cargo build's incremental
        // directory: 200-byte paths, 9 KiB for 32 renames).
        let empty = CiscBuilder::new().encoded_len();
        let mut t = at;
        let mut call = Call::default();
        let mut commands = 0;
        for (a, b) in &moved {
            let mut one = CiscBuilder::new();
            one.rename(a, b);
            let adds = one.encoded_len() - empty;
            let full = commands == MAX_COMMANDS || call.b.encoded_len() + adds > OP_PAGE_BYTES;
            if commands > 0 && full {
                t = self.submit(pid, std::mem::take(&mut call), t)?;
                commands = 0;
            }
            call.b.rename(a, b);
            commands += 1;
        }
        self.submit(pid, call, t)
    }

    /// A fused op: one round trip carrying every event's commands.
    fn apply_fused(
        &mut self,
        ev: &Event,
        ops: &[Event],
        at: VirtualTime,
    ) -> Result<VirtualTime, OpError> {
        let mut t = at;
        for e in ops {
            if !matches!(e.op, Op::Open { .. }) {
                let opened_here = ops
                    .iter()
                    .any(|o| matches!(o.op, Op::Open { .. }) && o.ret == e.op.fd());
                if !opened_here {
                    t = self.implicit_open(e, t)?;
                }
            }
        }
        let mut call = Call::default();
        for e in ops {
            self.translate(&mut call, e)?;
        }
        // The op's opens that it did not close stay open as the pid's fds: StorageFS closes
        // an op's own handles when it ends, so they are opened again, as the program holds them.
        let left: Vec<i64> = call.handles.keys().copied().collect();
        let end = self.submit(ev.pid, call, t)?;
        self.totals.cisc_ops += 1;
        let mut end = end;
        for fd in left {
            if let Some(Op::Open { path, flags }) =
                ops.iter().find(|o| o.ret == Some(fd)).map(|o| &o.op)
            {
                // Opened again as it is now: it exists, and its cut is done.
                let again = OpenFlags {
                    create: false,
                    truncate: false,
                    ..*flags
                };
                let reopen = Event {
                    op: Op::Open {
                        path: path.clone(),
                        flags: again,
                    },
                    ret: Some(fd),
                    ..ev.clone()
                };
                end = self.open(&reopen, path, &again, end)?;
            }
        }
        Ok(end)
    }
}

impl System for FusionSystem<'_> {
    fn name(&self) -> String {
        if self.fuses { "fusion" } else { "firmware" }.to_string()
    }

    fn op_started(&self) -> VirtualTime {
        self.clock.started
    }

    fn begin(&mut self, start: VirtualTime) -> Result<(), String> {
        self.clock.begin(start);
        Ok(())
    }

    fn fuses(&self) -> bool {
        self.fuses
    }

    fn apply(&mut self, ev: &Event, start: VirtualTime) -> Result<Applied, OpError> {
        if matches!(
            ev.op,
            Op::Ndp { .. } | Op::Isc { .. } | Op::Bread { .. } | Op::Bwrite { .. }
        ) {
            return Ok(Applied::Skipped(format!(
                "{} (StorageFS replays file operations)",
                ev.op.name()
            )));
        }
        // StorageFS follows the links on a path as it looks the path up: each name up to a
        // link is an entry examined on the device core, before the rest of the call.
        let followed;
        let names_paths = ev.op.walked_path().is_some() || matches!(ev.op, Op::Cisc { .. });
        let (ev, start) = match self.links && names_paths {
            false => (ev, start),
            true => {
                let (resolved, detour) = self.follow_links(ev)?;
                followed = resolved;
                let start = match detour {
                    0 => start,
                    n => self.on_core(start, n * self.costs.metadata_entry_ns),
                };
                (&followed, start)
            }
        };
        let end = match &ev.op {
            Op::Cisc { ops, .. } if self.fuses => self.apply_fused(ev, ops, start)?,
            _ => self.apply_single(ev, start)?,
        };
        self.clock.ended = end.max(start);
        Ok(Applied::Done)
    }

    fn walks_missing(&self) -> bool {
        true
    }

    /// A round trip that looks the path up in StorageFS's namespace and finds nothing.
    fn walk_missing(&mut self, path: &str, start: VirtualTime) -> Result<Applied, OpError> {
        let entries = path_entries(path);
        let end = self.lookup_call(start, entries, 0);
        self.clock.ended = end.max(start);
        Ok(Applied::Done)
    }

    fn clock(&self) -> VirtualTime {
        self.clock.ended
    }

    fn totals(&self) -> Totals {
        static ZERO_CHUNK: [u8; CHUNK as usize] = [0; CHUNK as usize];
        let medium = self.fs.medium();
        let mut sha = Sha256::new();
        for (path, ino) in &medium.names {
            let data = medium.inodes.get(ino).map(|i| &i.data);
            sha.update((path.len() as u64).to_le_bytes());
            sha.update(path.as_bytes());
            sha.update(data.map_or(0, |d| d.len()).to_le_bytes());
            // The chunks holding a byte other than zero, each with its place: the bytes,
            // however written, at a cost in what the file holds rather than its size. Each
            // is hashed whole, its zeros too, so a digest stays what it was when chunks
            // were held whole and stored runs still compare.
            for (index, chunk) in data.iter().flat_map(|d| d.nonzero_chunks()) {
                sha.update(index.to_le_bytes());
                sha.update(chunk);
                sha.update(&ZERO_CHUNK[chunk.len()..]);
            }
        }
        let digest: String = sha.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Totals {
            ndp: None,
            isc: None,
            fusion: Some(FusionTotals {
                files: medium.names.len() as u64,
                // Each inode once, however many names it has (and files still open after
                // their last name went).
                bytes: medium.bytes(),
                contents_sha256: digest,
                ..self.totals.clone()
            }),
            isp: None,
            journal: None,
            device: self.device.counters(),
        }
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.device.check_invariants().map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::children;
    use std::cell::Cell;
    use std::collections::BTreeSet;

    #[test]
    fn a_listing_steps_over_each_childs_subtree() {
        let mut paths: BTreeSet<String> = ["/a/x", "/a/y.z", "/a/z", "/ab", "/b"]
            .into_iter()
            .map(String::from)
            .collect();
        // A child directory with a thousand files beneath it.
        paths.extend((0..1000).map(|i| format!("/a/y/{i}")));
        let seeks = Cell::new(0);
        let got: Vec<&str> = children("/a/", |from| {
            seeks.set(seeks.get() + 1);
            paths.range(from.to_string()..).next().map(String::as_str)
        })
        .collect();
        assert_eq!(
            got,
            ["x", "y.z", "z"],
            "y is a directory, listed from the dirs"
        );
        assert!(seeks.get() <= 6, "{} seeks", seeks.get());
        assert_eq!(
            children("/", |from| paths
                .range(from.to_string()..)
                .next()
                .map(String::as_str))
            .collect::<Vec<_>>(),
            ["ab", "b"]
        );
    }
}
