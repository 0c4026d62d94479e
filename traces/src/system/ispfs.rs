//! ISPFS as a system under test (`--design ispfs`): the trace's file operations on ISPFS
//! over the PCM board, and its writes to a directory's command file (`.isp`) run as ISP
//! instructions on the engine.
//!
//! ISPFS has no page cache (ISPFS §3.1). A `read` is a system call and one copy from the
//! PCM at the slowest of the CPU's copy, the FMC link and the PCM controllers; a `write` is
//! a system call and the PCM's program time for the bytes it stores, then its inode's
//! ([`csd_hostfs::fs::HostFs::store`]), and no less than the same copy the other way. Namespace operations are hostfs's without a journal,
//! on the same device: each stores the inode and entry bytes it changes (ISPFS is EXT2's
//! layout reached with the CPU's loads and stores, §3.1).
//!
//! A write to a command file carries its instruction in the event's `search` field (see
//! `traces/FORMAT.md`): traces hold no data, so a write without one sends 152 zero bytes,
//! which the engine refuses as it would. The instruction is checked and its target resolved
//! at the write; the engine then runs in the background, one instruction at a time, while
//! the trace goes on. A read of the command file costs a system call and a 152-byte copy.
//! The replay's `isp` totals count instructions, refusals, the engine's busy time and the
//! bytes it compared.

use super::interface::{
    rw_count, Applied, IspTotals, OpError, SetupError, System, Totals, FAILED_IN_TRACE,
};
use crate::format::{Event, Op};
use crate::prescan::Prescan;
use csd_device::isp::{Scmd, Search, SEARCH_BYTES};
use csd_device::storagefs::StageRunner;
use csd_device::{IoPath, Profile, VirtualTime};
use csd_hostfs::fs::{file_end, Fd, FsError, Link, OpenOptions};
use csd_hostfs::ispfs::Ispfs;
use csd_hostfs::namespace::parent_dir as parent;
use csd_hostfs::perms::{Cred, Perms};
use serde::Deserialize;
use std::collections::HashMap;

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
/// A write moves at most this much per device request, so buffers stay small.
const DATA_STEP: u64 = 1 << 20;

/// The `search` field of a write to a command file: the instruction the program wrote.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchField {
    #[serde(default = "word_query")]
    scmd: u32,
    /// Up to four 4-byte keywords (more are kept, for the engine to refuse).
    #[serde(default)]
    keywords: Vec<String>,
    /// A stage to run instead of a word query (a built-in or `task:export`).
    #[serde(default)]
    stage: Option<String>,
    #[serde(default)]
    file: String,
    #[serde(default)]
    ino: u32,
    #[serde(default)]
    off: u32,
    len: u32,
}

fn word_query() -> u32 {
    1
}

/// The instruction bytes an event writes to a command file.
fn instruction(ev: &Event) -> Result<Vec<u8>, OpError> {
    let Some(v) = ev.extra.get("search") else {
        return Ok(vec![0; SEARCH_BYTES]);
    };
    let f = SearchField::deserialize(v)
        .map_err(|e| OpError::Unsupported(format!("the write's search field: {e}")))?;
    if let Some(stage) = &f.stage {
        if !f.keywords.is_empty() {
            return Err(OpError::Unsupported(
                "the write's search field: a stage instruction has no keywords".into(),
            ));
        }
        // Laid out as the program would; what the engine makes of it is its business.
        let keyword = Search::stage_keywords(stage)
            .map_err(|e| OpError::Unsupported(format!("search {e}")))?;
        let s = Search {
            scmd: Scmd::Stage.code(),
            keyword,
            filename: f.file,
            ino: f.ino,
            offset: f.off,
            len: f.len,
            ..Search::default()
        };
        return s
            .encode()
            .map(|b| b.to_vec())
            .map_err(|e| OpError::Unsupported(format!("search: {e}")));
    }
    let mut keys = Vec::new();
    for k in &f.keywords {
        let b: [u8; 4] = k.as_bytes().try_into().map_err(|_| {
            OpError::Unsupported(format!(
                "search keyword '{k}': the engine compares 4-byte words"
            ))
        })?;
        keys.push(u32::from_le_bytes(b));
    }
    // Encoded as the program would lay it out; what the engine makes of it is its business.
    let mut s = Search {
        scmd: f.scmd,
        filename: f.file,
        ino: f.ino,
        offset: f.off,
        len: f.len,
        ..Search::default()
    };
    let mut bytes = Vec::with_capacity(SEARCH_BYTES + 16);
    for (slot, k) in s.keyword.iter_mut().zip(&keys) {
        *slot = *k;
    }
    let encoded = s
        .encode()
        .map_err(|e| OpError::Unsupported(format!("search: {e}")))?;
    bytes.extend_from_slice(&encoded);
    // A fifth keyword onwards: the program's structure was longer than the engine's.
    for k in keys.iter().skip(4) {
        bytes.splice(20..20, k.to_le_bytes());
    }
    Ok(bytes)
}

enum TraceFd {
    /// `append`: opened with `O_APPEND`, so every write lands at the end of the file.
    File {
        fd: csd_hostfs::fs::Fd,
        pos: u64,
        append: bool,
    },
    Command {
        path: String,
    },
}

/// ISPFS over the PCM board, replaying a trace.
pub struct IspfsSystem<'a> {
    fs: Ispfs,
    /// Runs stage instructions (without one they are refused, as by a board without it).
    stages: Option<&'a mut dyn StageRunner>,
    profile: Profile,
    /// The trace's open files, by (fd table, trace fd).
    fds: HashMap<(u32, i64), TraceFd>,
    /// When the engine's current run of instructions began fetching, and when it finishes
    /// the instructions it was given so far.
    engine_origin: VirtualTime,
    engine_free: VirtualTime,
    isp: IspTotals,
    zeros: Vec<u8>,
    known_dirs: super::host::KnownDirs,
}

impl<'a> IspfsSystem<'a> {
    pub fn new(
        scan: &Prescan,
        profile: &Profile,
        stages: Option<&'a mut dyn StageRunner>,
    ) -> Result<IspfsSystem<'a>, SetupError> {
        // ISPFS has no page cache: hostfs's stands in only for bytes on their way to the
        // PCM, written through at once, and this system charges none of its per-page work
        // (`host.page_cache_page_ns` is the host designs' cost, charged by `HostSystem`).
        let mut fs = Ispfs::format(profile, DIR_PERMS).map_err(|e| match e {
            csd_hostfs::ispfs::IspfsError::NoEngine(name) => SetupError::Profile(format!(
                "the ispfs design needs a profile with an [isp] table; '{name}' has none (use pcm-zynq)"
            )),
            e => SetupError::Files(e.to_string()),
        })?;
        let needed: u64 = scan.files.values().fold(0, |a, f| a.saturating_add(f.size));
        if needed > fs.fs().device().capacity_bytes() {
            return Err(SetupError::Files(format!(
                "the trace reads {needed} bytes of files it never writes, more than the {}-byte PCM of '{}' holds",
                fs.fs().device().capacity_bytes(),
                profile.name
            )));
        }
        super::host::make_initial_files(fs.fs_mut(), scan)
            .map_err(|e| SetupError::Files(e.to_string()))?;
        fs.fs_mut().device_mut().reset_measurements();
        fs.fs_mut().restart_time();
        Ok(IspfsSystem {
            fs,
            stages,
            profile: profile.clone(),
            fds: HashMap::new(),
            engine_origin: VirtualTime::ZERO,
            engine_free: VirtualTime::ZERO,
            isp: IspTotals::default(),
            zeros: Vec::new(),
            known_dirs: Default::default(),
        })
    }

    fn cpu(&mut self, ns: u64) {
        let t = self.fs.fs().clock().after(ns);
        self.fs.fs_mut().advance_to(t);
    }

    /// A host access of `bytes` to the PCM: while the engine runs, it waits for the engine's
    /// access in flight, and the engine waits for it (ISPFS §3.2: host requests come first).
    fn host_access(&mut self, bytes: u64) {
        let now = self.fs.fs().clock();
        if now >= self.engine_origin && now < self.engine_free {
            let e = self.fs.engine();
            let wait = e.wait_ns(now.since(self.engine_origin) as f64).round() as u64;
            let busy = e.host_ns(bytes).round() as u64;
            self.engine_free = self.engine_free.after(busy);
            self.isp.host_wait_ns += wait;
            self.cpu(wait);
        }
    }

    /// One copy between a user buffer and the PCM.
    fn copy_ns(&self, bytes: u64) -> u64 {
        let cpu = bytes as f64 * 1e9 / self.profile.host.copy_bytes_per_sec as f64;
        let board = csd_hostfs::ispfs::board_copy_ns(&self.profile, self.fs.engine(), bytes);
        cpu.max(board).round() as u64
    }

    fn open(&mut self, path: &str, write: bool, create: bool) -> Result<TraceFd, OpError> {
        if let Some(dir) = Ispfs::command_dir(path) {
            self.fs.fs_mut().lookup(dir, WHO)?;
            return Ok(TraceFd::Command {
                path: path.to_string(),
            });
        }
        if create {
            if let Some(p) = parent(path) {
                self.known_dirs.mkdir_p(self.fs.fs_mut(), p)?;
            }
        }
        let how = OpenOptions {
            write,
            create: create.then_some(FILE_PERMS),
        };
        let fd = self.fs.fs_mut().open(path, how, WHO)?;
        Ok(TraceFd::File {
            fd,
            pos: 0,
            append: false,
        })
    }

    fn command_write(&mut self, ev: &Event, path: &str) -> Result<Applied, OpError> {
        let bytes = instruction(ev)?;
        self.cpu(self.profile.host.syscall_ns + 2 * self.profile.host.path_component_ns);
        let o = self
            .fs
            .write_command(
                path,
                &bytes,
                WHO,
                self.stages
                    .as_mut()
                    .map(|s| &mut **s as &mut dyn StageRunner),
            )
            .map_err(|e| OpError::Unsupported(e.to_string()))?;
        let (refused, ns, bytes) = (o.error.is_some(), o.engine_ns, o.bytes);
        self.isp.instructions += 1;
        if refused {
            self.isp.refused += 1;
        } else {
            let now = self.fs.fs().clock();
            if now >= self.engine_free {
                let setup = self.fs.engine().setup_ns().round() as u64;
                self.engine_origin = now.after(setup);
            }
            self.engine_free = self.engine_free.max(now).after(ns);
            self.isp.engine_ns += ns;
            self.isp.bytes_compared += bytes;
        }
        Ok(Applied::Done)
    }

    /// A trace fd the trace never showed opened (inherited): opened here first, for
    /// writing (and created) when the op writes.
    fn implicit_open(
        &mut self,
        table: u32,
        fd: i64,
        path: &str,
        write: bool,
    ) -> Result<(), OpError> {
        if !self.fds.contains_key(&(table, fd)) {
            let f = self.open(path, write, write)?;
            self.fds.insert((table, fd), f);
        }
        Ok(())
    }

    // Long: a read or a write on a file or a command file, with the trace's bounds checks.
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
        self.implicit_open(ev.fd_table(), fd, path, write)?;
        let positional = matches!(ev.op, Op::Pread { .. } | Op::Pwrite { .. });
        let (f, at) = match self.fds.get_mut(&(ev.fd_table(), fd)) {
            Some(TraceFd::Command { path }) => {
                let path = path.clone();
                if write {
                    return self.command_write(ev, &path);
                }
                let copy = self.copy_ns(SEARCH_BYTES as u64);
                self.cpu(self.profile.host.syscall_ns + copy);
                return Ok(Applied::Done);
            }
            Some(TraceFd::File { fd, pos, append }) => {
                let at = if write && (*append || ev.appends()) {
                    self.fs.fs().fd_size(*fd)?
                } else {
                    off.unwrap_or(*pos)
                };
                let end = file_end(at, n)?;
                if !positional {
                    *pos = end;
                }
                (*fd, at)
            }
            None => unreachable!("opened above"),
        };
        let end = file_end(at, n)?;
        let capacity = self.fs.fs().device().capacity_bytes();
        if end > capacity {
            return Err(OpError::Range(format!(
                "offset {at} + length {n} is beyond the PCM's {capacity} bytes"
            )));
        }
        self.cpu(self.profile.host.syscall_ns);
        if !write {
            let ino = self.fs.fs().fd_ino(f)?;
            let size = self.fs.fs().file_layout(ino).map_or(0, |(s, _)| s);
            let bytes = end.min(size).saturating_sub(at);
            self.host_access(bytes);
            let copy = self.copy_ns(bytes);
            self.cpu(copy);
            return Ok(Applied::Done);
        }
        self.store(f, at, end)?;
        Ok(Applied::Done)
    }

    /// The CPU's stores of `at..end` into the file `f`, through to the PCM: they cross the
    /// board's port as its loads do, so they take no less than that copy, as in `csd ispfs
    /// iozone --medium pcm`.
    fn store(&mut self, f: Fd, at: u64, end: u64) -> Result<(), OpError> {
        let n = end.saturating_sub(at);
        self.host_access(n);
        let copied = self.fs.fs().clock().after(self.copy_ns(n));
        let mut pos = at;
        while pos < end {
            let step = (end - pos).min(DATA_STEP);
            if self.zeros.len() < step as usize {
                self.zeros.resize(step as usize, 0);
            }
            // Stored through: the PCM has the bytes when the call returns.
            self.fs
                .fs_mut()
                .store(f, pos, &self.zeros[..step as usize])?;
            pos += step;
        }
        self.fs.fs_mut().advance_to(copied);
        Ok(())
    }

    /// Stores through a shared mapping of `path`: ISPFS maps the PCM itself (no page cache,
    /// execute in place), so each page of `off..off + len` within the file costs a fault
    /// that maps it and the stores reach the PCM as they are made; `msync` has nothing left
    /// to write.
    fn mapped_write(&mut self, path: &str, off: u64, len: u64) -> Result<Applied, OpError> {
        self.cpu(self.profile.host.syscall_ns);
        let f = self.fs.fs_mut().open_mapped(path)?;
        let end = off.saturating_add(len).min(self.fs.fs().fd_size(f)?);
        if end > off {
            self.cpu(self.profile.host.faults_ns(off, end - off));
            self.store(f, off, end)?;
        }
        self.fs.fs_mut().close(f)?;
        Ok(Applied::Done)
    }

    // Long: one arm per trace op.
    fn apply_op(&mut self, ev: &Event) -> Result<Applied, OpError> {
        let syscall = self.profile.host.syscall_ns;
        let done = |r: Result<(), FsError>| r.map(|_| Applied::Done).map_err(OpError::from);
        match &ev.op {
            Op::Open { path, flags } => {
                self.cpu(syscall);
                if let Some(walked) = super::host::walk_only(self.fs.fs_mut(), path, flags) {
                    return done(walked);
                }
                // As on the host: `O_TRUNC` truncates only a file that was there.
                let existed =
                    flags.truncate && self.fs.fs_mut().namespace().find(path, WHO).is_ok();
                let mut f = self.open(path, flags.write, flags.create)?;
                if let TraceFd::File { append, .. } = &mut f {
                    *append = flags.append;
                }
                if flags.write && existed && matches!(f, TraceFd::File { .. }) {
                    self.fs.fs_mut().truncate(path, 0, WHO)?;
                }
                match ev.ret {
                    Some(fd) => {
                        if let Some(TraceFd::File { fd, .. }) =
                            self.fds.insert((ev.fd_table(), fd), f)
                        {
                            let _ = self.fs.fs_mut().close(fd);
                        }
                    }
                    None => {
                        if let TraceFd::File { fd, .. } = f {
                            let _ = self.fs.fs_mut().close(fd);
                        }
                    }
                }
                Ok(Applied::Done)
            }
            Op::Close { fd, .. } => {
                self.cpu(syscall);
                if let Some(TraceFd::File { fd, .. }) = self.fds.remove(&(ev.fd_table(), *fd)) {
                    self.fs.fs_mut().close(fd)?;
                }
                Ok(Applied::Done)
            }
            Op::Read { fd, path, off, len } => self.data(ev, *fd, path, *off, *len, false),
            Op::Pread { fd, path, off, len } => self.data(ev, *fd, path, Some(*off), *len, false),
            Op::Write {
                fd, path, off, len, ..
            } => self.data(ev, *fd, path, *off, *len, true),
            Op::Pwrite { fd, path, off, len } => self.data(ev, *fd, path, Some(*off), *len, true),
            // Writes are already on the PCM, and an open file's attributes in memory: the
            // call is all these cost.
            Op::Fsync { .. }
            | Op::Fdatasync { .. }
            | Op::SyncFileRange { .. }
            | Op::Sync
            | Op::Fstat { .. } => {
                self.cpu(syscall);
                Ok(Applied::Done)
            }
            Op::Mkdir { path } => {
                self.cpu(syscall);
                if let Some(p) = parent(path) {
                    self.known_dirs.mkdir_p(self.fs.fs_mut(), p)?;
                }
                done(self.fs.fs_mut().mkdir(path, DIR_PERMS, WHO).map(|_| ()))
            }
            Op::Mknod { path } => {
                self.cpu(syscall);
                if let Some(p) = parent(path) {
                    self.known_dirs.mkdir_p(self.fs.fs_mut(), p)?;
                }
                done(self.fs.fs_mut().mknod(path, FILE_PERMS, WHO).map(|_| ()))
            }
            Op::Rmdir { path } => {
                self.cpu(syscall);
                done(self.fs.fs_mut().rmdir(path, WHO).map(|_| ()))
            }
            Op::Unlink { path } => {
                self.cpu(syscall);
                done(self.fs.fs_mut().unlink(path, WHO).map(|_| ()))
            }
            Op::Rename { path, to } => {
                self.cpu(syscall);
                done(self.fs.fs_mut().rename(path, to, WHO).map(|_| ()))
            }
            Op::Stat { path } => {
                self.cpu(syscall);
                if let Some(dir) = Ispfs::command_dir(path) {
                    return done(self.fs.fs_mut().lookup(dir, WHO).map(|_| ()));
                }
                done(self.fs.fs_mut().lookup(path, WHO).map(|_| ()))
            }
            Op::Lstat { path } => {
                self.cpu(syscall);
                done(self.fs.fs_mut().lookup_nofollow(path, WHO).map(|_| ()))
            }
            Op::Link { path, to, follow } => {
                self.cpu(syscall);
                if let Some(p) = parent(to) {
                    self.known_dirs.mkdir_p(self.fs.fs_mut(), p)?;
                }
                let link = Link {
                    from: path,
                    to,
                    follow: *follow,
                };
                done(link.apply(self.fs.fs_mut(), WHO).map(|_| ()))
            }
            Op::Symlink { path, target } => {
                self.cpu(syscall);
                if let Some(p) = parent(path) {
                    self.known_dirs.mkdir_p(self.fs.fs_mut(), p)?;
                }
                let link = self
                    .fs
                    .fs_mut()
                    .symlink(path, target, super::host::LINK_PERMS, WHO);
                done(link.map(|_| ()))
            }
            Op::Readdir { path } => {
                self.cpu(syscall);
                done(self.fs.fs_mut().readdir(path, WHO).map(|_| ()))
            }
            Op::Setattr { path, nofollow } => {
                self.cpu(syscall);
                match nofollow {
                    true => done(self.fs.fs_mut().lsetattr(path, WHO)),
                    false => done(self.fs.fs_mut().setattr(path, WHO)),
                }
            }
            Op::Truncate { path, len } => {
                self.cpu(syscall);
                done(self.fs.fs_mut().truncate(path, *len, WHO))
            }
            Op::MappedWrite { path, off, len, .. } => self.mapped_write(path, *off, *len),
            Op::Fallocate {
                fd,
                path,
                off,
                len,
                keep_size,
            } => {
                self.cpu(syscall);
                self.implicit_open(ev.fd_table(), *fd, path, true)?;
                let f = match self.fds.get(&(ev.fd_table(), *fd)) {
                    Some(TraceFd::File { fd, .. }) => *fd,
                    _ => {
                        return Err(OpError::Unsupported(format!(
                            "fallocate of {path}: a command file has no blocks"
                        )))
                    }
                };
                let fs = self.fs.fs_mut();
                fs.fallocate(f, *off, *len, *keep_size)?;
                // As a write's, its change is on the PCM when the call returns.
                let ino = fs.fd_ino(f)?;
                done(fs.sync_file(ino))
            }
            Op::Cisc { ops, .. } => {
                for e in ops {
                    if let Applied::Skipped(why) = self.apply_op(e)? {
                        return Ok(Applied::Skipped(why));
                    }
                }
                Ok(Applied::Done)
            }
            Op::Ndp { .. } | Op::Isc { .. } => Ok(Applied::Skipped(format!(
                "{} (ISPFS offloads through its command files)",
                ev.op.name()
            ))),
            Op::Bread { off, len } | Op::Bwrite { off, len } => {
                let write = matches!(ev.op, Op::Bwrite { .. });
                let at = self.fs.fs().clock();
                let d = self.fs.fs_mut().device_mut();
                let c = if write {
                    d.write_at(IoPath::Internal, at, *off, *len, None)
                } else {
                    d.read_at(IoPath::Internal, at, *off, *len, None)
                }?;
                self.fs.fs_mut().advance_to(c.done);
                Ok(Applied::Done)
            }
        }
    }
}

impl System for IspfsSystem<'_> {
    fn name(&self) -> String {
        "ispfs".into()
    }

    fn op_started(&self) -> VirtualTime {
        self.fs.fs().op_started()
    }

    fn begin(&mut self, start: VirtualTime) -> Result<(), String> {
        self.fs.fs_mut().start_op(start);
        self.fs.fs_mut().set_clock(start);
        Ok(())
    }

    fn apply(&mut self, ev: &Event, _start: VirtualTime) -> Result<Applied, OpError> {
        self.apply_op(ev)
    }

    fn walks_missing(&self) -> bool {
        true
    }

    /// As on the host: the system call, then the walk as far as the path goes.
    fn walk_missing(&mut self, path: &str, _start: VirtualTime) -> Result<Applied, OpError> {
        self.cpu(self.profile.host.syscall_ns);
        Ok(match self.fs.fs_mut().lookup_partial(path, WHO) {
            Ok(_) => Applied::Done,
            Err(_) => Applied::Skipped(FAILED_IN_TRACE.to_string()),
        })
    }

    fn clock(&self) -> VirtualTime {
        self.fs.fs().clock()
    }

    fn totals(&self) -> Totals {
        let mut isp = self.isp.clone();
        isp.engine_done_ns = self.engine_free.since(VirtualTime::ZERO);
        Totals {
            ndp: None,
            isc: None,
            fusion: None,
            isp: (isp.instructions > 0).then_some(isp),
            journal: None,
            device: self.fs.fs().device().counters(),
        }
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.fs.fs().check_invariants().map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(line: &str) -> Event {
        match crate::format::parse_event(line).unwrap() {
            crate::format::Parsed::Event(e) => e,
            crate::format::Parsed::UnknownOp(op) => panic!("unknown op {op}"),
        }
    }

    #[test]
    fn the_search_field_becomes_the_instruction() {
        let ev = event(
            r#"{"t":0,"pid":1,"op":"write","fd":3,"path":"/d/.isp","len":152,"search":{"keywords":["data","disk"],"file":"words.txt","len":1000}}"#,
        );
        let s = Search::decode(&instruction(&ev).unwrap()).unwrap();
        assert_eq!(s.filename, "words.txt");
        assert_eq!(s.keyword[0], u32::from_le_bytes(*b"data"));
        assert_eq!((s.scmd, s.len), (1, 1000));
        // Five keywords make a structure the engine cannot take; a bad field is named.
        let five = event(
            r#"{"t":0,"pid":1,"op":"write","fd":3,"path":"/d/.isp","len":156,"search":{"keywords":["aaaa","bbbb","cccc","dddd","eeee"],"file":"f","len":1}}"#,
        );
        assert_eq!(instruction(&five).unwrap().len(), SEARCH_BYTES + 4);
        let bad = event(
            r#"{"t":0,"pid":1,"op":"write","fd":3,"path":"/d/.isp","len":152,"search":{"keywords":["toolong"],"len":1}}"#,
        );
        assert!(instruction(&bad)
            .unwrap_err()
            .to_string()
            .contains("toolong"));
        let none = event(r#"{"t":0,"pid":1,"op":"write","fd":3,"path":"/d/.isp","len":152}"#);
        assert_eq!(instruction(&none).unwrap(), vec![0; SEARCH_BYTES]);
    }
}
