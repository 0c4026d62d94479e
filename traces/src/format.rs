//! The csd trace format: JSON Lines, a versioned header, one event per line
//! (`traces/FORMAT.md` is the reference for users; this module is the code).
//!
//! Events are parsed from a generic JSON object by hand rather than by a derived
//! `Deserialize`: every problem then names the field and what was wrong with it, unknown fields
//! are kept (in [`Event::extra`]) without a second parse, and an unknown `op` can be told
//! apart from a malformed line.

use csd_device::FileMode;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The `format` every header names.
pub const FORMAT: &str = "csd-trace";
/// The version this csdlab reads and writes.
pub const VERSION: u64 = 1;
/// The largest file an `ndp` op's `sizes` may claim: a request reads each file into the
/// device's memory.
pub const MAX_NDP_FILE_BYTES: u64 = 4 << 30;

/// The first line of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    pub version: u64,
    /// Where the events came from: `strace`, `fio-iolog3`, `msr`, `disksim`, `synthetic`, …
    pub source: String,
    /// Other header fields, kept as they were.
    pub extra: BTreeMap<String, Value>,
}

impl Header {
    pub fn new(source: impl Into<String>) -> Header {
        Header {
            version: VERSION,
            source: source.into(),
            extra: BTreeMap::new(),
        }
    }

    pub fn parse(line: &str) -> Result<Header, String> {
        let v: Value =
            serde_json::from_str(line).map_err(|e| format!("header is not JSON: {e}"))?;
        let Value::Object(mut m) = v else {
            return Err("header is not a JSON object".into());
        };
        match m.remove("format") {
            Some(Value::String(f)) if f == FORMAT => {}
            Some(other) => return Err(format!("header format is {other}, expected \"{FORMAT}\"")),
            None => {
                return Err(format!(
                    "header has no \"format\":\"{FORMAT}\" (not a csd trace?)"
                ))
            }
        }
        let version = m
            .remove("version")
            .and_then(|v| v.as_u64())
            .ok_or("header has no integer \"version\"")?;
        if version != VERSION {
            return Err(format!(
                "trace version {version} is not supported (this csd reads version {VERSION})"
            ));
        }
        match m.remove("clock") {
            None => {}
            Some(Value::String(c)) if c == "ns" => {}
            Some(other) => {
                return Err(format!("header clock is {other}; only \"ns\" is supported"))
            }
        }
        let source = match m.remove("source") {
            Some(Value::String(s)) => s,
            None => "unknown".into(),
            Some(other) => return Err(format!("header source must be a string, got {other}")),
        };
        Ok(Header {
            version,
            source,
            extra: m.into_iter().collect(),
        })
    }

    /// The header line: `format`, `version`, `source`, `clock`, then other fields.
    pub fn to_line(&self) -> String {
        let mut s = format!(
            "{{\"format\":\"{FORMAT}\",\"version\":{},\"source\":{},\"clock\":\"ns\"",
            self.version,
            Value::String(self.source.clone())
        );
        for (k, v) in &self.extra {
            let _ = write!(s, ",{}:{v}", Value::String(k.clone()));
        }
        s.push('}');
        s
    }
}

/// How a file is opened (from `O_*` flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenFlags {
    pub read: bool,
    pub write: bool,
    pub create: bool,
    pub truncate: bool,
    pub append: bool,
    pub directory: bool,
    /// `O_PATH`: the open only walks the path and names what it finds (for `fstat`, `*at`
    /// calls, `fchdir`); no file is opened for I/O.
    pub path: bool,
    /// `O_NOFOLLOW`: a symbolic link at the end is not followed. An `O_PATH` open names the
    /// link itself; any other fails there (`ELOOP`), so one that succeeded found no link.
    pub nofollow: bool,
    /// `O_DIRECT`: reads and writes bypass the page cache.
    pub direct: bool,
    /// `O_DSYNC`: each write returns once its data (and the size or blocks it changed) is
    /// durable, as if `fdatasync` followed it.
    pub dsync: bool,
    /// `O_SYNC`: as `O_DSYNC`, with every change to the inode, as if `fsync` followed it.
    pub sync: bool,
}

/// Linux's `open` flags that change nothing csdlab models, accepted as written.
const OTHER_LINUX_FLAGS: [&str; 11] = [
    "O_EXCL",
    "O_NOCTTY",
    "O_NONBLOCK",
    "O_NDELAY",
    "O_RSYNC",
    "O_ASYNC",
    "FASYNC",
    "O_LARGEFILE",
    "O_NOATIME",
    "O_CLOEXEC",
    "O_TMPFILE",
];

impl OpenFlags {
    /// [`OpenFlags::parse`] for a trace: every flag must be one of Linux's `O_*` names or a
    /// number (strace prints bits it cannot name as one), so a misspelt `O_CREATE` is an
    /// error instead of an open that silently does not create.
    pub fn parse_checked(s: &str) -> Result<OpenFlags, String> {
        let mut f = OpenFlags::none();
        for flag in s.split('|').map(str::trim).filter(|f| !f.is_empty()) {
            let number = flag.starts_with(|c: char| c.is_ascii_digit())
                && flag.bytes().all(|b| b.is_ascii_hexdigit() || b == b'x');
            if !f.set(flag) && !number && !OTHER_LINUX_FLAGS.contains(&flag) {
                return Err(format!(
                    "unknown open flag '{flag}' (Linux's O_* names or numbers, joined by '|')"
                ));
            }
        }
        Ok(f)
    }

    /// Parses `O_WRONLY|O_CREAT|O_TRUNC`-style flags; unknown flags are ignored.
    pub fn parse(s: &str) -> OpenFlags {
        let mut f = OpenFlags::none();
        for flag in s.split('|').map(str::trim) {
            f.set(flag);
        }
        f
    }

    /// An open with no flag given: `O_RDONLY` (0).
    fn none() -> OpenFlags {
        OpenFlags {
            read: true,
            ..OpenFlags::default()
        }
    }

    /// Applies one flag the model acts on; false if `flag` is not one.
    fn set(&mut self, flag: &str) -> bool {
        match flag {
            "O_RDONLY" => self.read = true,
            "O_WRONLY" => {
                self.write = true;
                self.read = false;
            }
            "O_RDWR" => {
                self.write = true;
                self.read = true;
            }
            "O_CREAT" => self.create = true,
            "O_TRUNC" => self.truncate = true,
            "O_APPEND" => self.append = true,
            "O_DIRECTORY" => self.directory = true,
            "O_PATH" => self.path = true,
            "O_NOFOLLOW" => self.nofollow = true,
            "O_DIRECT" => self.direct = true,
            "O_DSYNC" => self.dsync = true,
            "O_SYNC" => self.sync = true,
            _ => return false,
        }
        true
    }

    pub fn to_flags(self) -> String {
        let mut s = String::from(match (self.read, self.write) {
            (_, false) => "O_RDONLY",
            (false, true) => "O_WRONLY",
            (true, true) => "O_RDWR",
        });
        for (on, name) in [
            (self.create, "O_CREAT"),
            (self.truncate, "O_TRUNC"),
            (self.append, "O_APPEND"),
            (self.directory, "O_DIRECTORY"),
            (self.path, "O_PATH"),
            (self.nofollow, "O_NOFOLLOW"),
            (self.direct, "O_DIRECT"),
            (self.dsync, "O_DSYNC"),
            (self.sync, "O_SYNC"),
        ] {
            if on {
                s.push('|');
                s.push_str(name);
            }
        }
        s
    }
}

/// How a task invocation (`isc`) uses a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IscFile {
    pub path: String,
    pub mode: FileMode,
}

/// The most events one `cisc` op holds: a CISC op carries at most 32 commands.
pub const MAX_CISC_EVENTS: usize = csd_sdk::cisc::MAX_COMMANDS;

/// Which fusible sequence a `cisc` op is (FusionFS §3's examples of what applications do
/// as several system calls and could submit as one op).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum FusePattern {
    /// `open`, writes, `fsync`, `close` of one file.
    OpenWriteSyncClose,
    /// A run of writes to one open file ending in its `fsync` or `fdatasync`.
    WriteSync,
    /// A `pread` and the `pwrite` of the same range that follows it: the modification runs
    /// on the device.
    ReadModifyWrite,
}

impl FusePattern {
    pub const ALL: [FusePattern; 3] = [
        FusePattern::OpenWriteSyncClose,
        FusePattern::WriteSync,
        FusePattern::ReadModifyWrite,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FusePattern::OpenWriteSyncClose => "open-write-sync-close",
            FusePattern::WriteSync => "write-sync",
            FusePattern::ReadModifyWrite => "read-modify-write",
        }
    }
}

impl std::str::FromStr for FusePattern {
    type Err = String;
    fn from_str(s: &str) -> Result<FusePattern, String> {
        FusePattern::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!("unknown pattern '{s}' (expected open-write-sync-close, write-sync or read-modify-write)")
            })
    }
}

/// What happened. File-descriptor operations carry the path the fd refers to (the reader
/// resolves it from the `open` that returned the fd when the line does not name it).
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Open {
        path: String,
        flags: OpenFlags,
    },
    Close {
        fd: i64,
        path: String,
    },
    /// `read`/`write` at the fd's current offset (`off` is set when the recorder knew it).
    Read {
        fd: i64,
        path: String,
        off: Option<u64>,
        len: u64,
    },
    /// `append`: the write went through an `O_APPEND` open file description by an fd that
    /// did not open it (a shell's `>>` inherited by the command it runs), so it lands at the
    /// end of the file, whatever fd of whichever process the replay opened for it.
    Write {
        fd: i64,
        path: String,
        off: Option<u64>,
        len: u64,
        append: bool,
    },
    Pread {
        fd: i64,
        path: String,
        off: u64,
        len: u64,
    },
    Pwrite {
        fd: i64,
        path: String,
        off: u64,
        len: u64,
    },
    Fsync {
        fd: i64,
        path: String,
    },
    Fdatasync {
        fd: i64,
        path: String,
    },
    /// An open file's attributes read through its fd (`fstat`, or `statx` and `fstatat` of
    /// an empty path): the inode is in memory, and no path is walked.
    Fstat {
        fd: i64,
        path: String,
    },
    /// `sync` or `syncfs`: every dirty page and the metadata journal written back.
    Sync,
    Mkdir {
        path: String,
    },
    Rmdir {
        path: String,
    },
    Unlink {
        path: String,
    },
    Rename {
        path: String,
        to: String,
    },
    /// A hard link: the file (or symbolic link) at `path` takes the further name `to`. With
    /// `follow` (`linkat`'s `AT_SYMLINK_FOLLOW`, `ln -L`) a symbolic link at the end of
    /// `path` is followed, and the file it leads to takes the name.
    Link {
        path: String,
        to: String,
        follow: bool,
    },
    /// A symbolic link made at `path`, pointing to `target` (as given: relative or
    /// absolute, not followed).
    Symlink {
        path: String,
        target: String,
    },
    /// Attributes read through a path (`stat`, `access`): a symbolic link that is the last
    /// component is followed.
    Stat {
        path: String,
    },
    /// Attributes read through a path without following a symbolic link at its end
    /// (`lstat`, `readlink`, `AT_SYMLINK_NOFOLLOW`): a link there is what is read.
    Lstat {
        path: String,
    },
    /// A directory listed to its end (`getdents64` from the start until it returns 0, as
    /// `readdir` does): its entries read.
    Readdir {
        path: String,
    },
    /// An inode's attributes changed (`chmod`, `chown`, `utimensat`, extended attributes),
    /// through its path or an fd (recorded with the fd's path). With `nofollow` (`lchown`,
    /// `AT_SYMLINK_NOFOLLOW`) a symbolic link at the end is the inode changed.
    Setattr {
        path: String,
        nofollow: bool,
    },
    Truncate {
        path: String,
        len: u64,
    },
    /// `fallocate` with mode 0 or `FALLOC_FL_KEEP_SIZE`: blocks set aside for the file
    /// through `off + len` (written later without allocating) and, unless `keep_size`, the
    /// file made at least that long (the new bytes read as zeros).
    Fallocate {
        fd: i64,
        path: String,
        off: u64,
        len: u64,
        keep_size: bool,
    },
    /// `sync_file_range`: the file's dirty pages in `off..off + len` (`len` 0: to its end)
    /// start their writeback (`write`, `SYNC_FILE_RANGE_WRITE`), and the caller waits for
    /// them (`wait_after`); `wait_before` waits for writeback already under way.
    SyncFileRange {
        fd: i64,
        path: String,
        off: u64,
        len: u64,
        flags: SyncRangeFlags,
    },
    /// Stores through a shared writable mapping of `path` (`mmap` with `MAP_SHARED`),
    /// reaching the file in `off..off + len` when the mapping is unmapped or synced
    /// (`munmap`, `msync`, the process's exit): each page there written, as strace cannot
    /// see which stores were made. Bytes past the file's end are not written (a store there
    /// faults). With `sync` (`msync(MS_SYNC)`) the caller waits until they are durable.
    MappedWrite {
        path: String,
        off: u64,
        len: u64,
        sync: bool,
    },
    /// A special file made at `path` (`mknod`, `mkfifo`: a FIFO, a socket, a device node):
    /// an inode and its name, no data. A strace import carries no reads or writes through
    /// one (they move no file data).
    Mknod {
        path: String,
    },
    /// An NDP offload request: `task` over `paths` (files or directories).
    Ndp {
        task: String,
        paths: Vec<String>,
        args: String,
        /// When the paths are files the trace did not create: the bytes each holds (what
        /// the program read of it), so a replay makes them that size. Empty, or one per
        /// path (`csd trace offload` writes it).
        sizes: Vec<u64>,
    },
    /// A transactional task invocation over registered files.
    Isc {
        task: String,
        files: Vec<IscFile>,
        args: String,
    },
    /// A CISC op (FusionFS): a run of one pid's file operations that `csd trace fuse` found
    /// fusible, submitted to the device as one op. `ops` are the original events, in order;
    /// a system without CISC ops replays them one by one.
    Cisc {
        pattern: FusePattern,
        ops: Vec<Event>,
    },
    /// Block-level read of `len` bytes at byte `off` of the device (block traces).
    Bread {
        off: u64,
        len: u64,
    },
    /// Block-level write.
    Bwrite {
        off: u64,
        len: u64,
    },
}

/// `sync_file_range`'s flags, by their Linux names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncRangeFlags {
    /// `SYNC_FILE_RANGE_WAIT_BEFORE`: wait for writeback already under way first.
    pub wait_before: bool,
    /// `SYNC_FILE_RANGE_WRITE`: start writeback of the range's dirty pages.
    pub write: bool,
    /// `SYNC_FILE_RANGE_WAIT_AFTER`: wait until the range's writeback is done.
    pub wait_after: bool,
}

impl SyncRangeFlags {
    const NAMES: [&'static str; 3] = [
        "SYNC_FILE_RANGE_WAIT_BEFORE",
        "SYNC_FILE_RANGE_WRITE",
        "SYNC_FILE_RANGE_WAIT_AFTER",
    ];

    /// Names joined by `|` (strace's spelling); `0` or nothing is no flag. Anything else is
    /// an error naming it.
    pub fn parse(s: &str) -> Result<SyncRangeFlags, String> {
        let mut f = SyncRangeFlags::default();
        for name in s
            .split('|')
            .map(str::trim)
            .filter(|n| !n.is_empty() && *n != "0")
        {
            match name {
                "SYNC_FILE_RANGE_WAIT_BEFORE" => f.wait_before = true,
                "SYNC_FILE_RANGE_WRITE" => f.write = true,
                "SYNC_FILE_RANGE_WAIT_AFTER" => f.wait_after = true,
                other => {
                    return Err(format!(
                        "unknown sync_file_range flag '{other}' (known: {})",
                        Self::NAMES.join(", ")
                    ))
                }
            }
        }
        Ok(f)
    }

    /// The set flags' names joined by `|`, `0` when none is.
    pub fn to_flags(&self) -> String {
        let set = [self.wait_before, self.write, self.wait_after];
        let names: Vec<&str> = Self::NAMES
            .iter()
            .zip(set)
            .filter_map(|(n, on)| on.then_some(*n))
            .collect();
        if names.is_empty() {
            "0".into()
        } else {
            names.join("|")
        }
    }
}

/// Every op name, in the format's spelling.
pub const OPS: &[&str] = &[
    "open",
    "close",
    "read",
    "write",
    "pread",
    "pwrite",
    "fsync",
    "fdatasync",
    "sync",
    "mkdir",
    "rmdir",
    "unlink",
    "rename",
    "stat",
    "truncate",
    "ndp",
    "isc",
    "cisc",
    "bread",
    "bwrite",
    "readdir",
    "setattr",
    "fallocate",
    "sync_file_range",
    "symlink",
    "link",
    "fstat",
    "lstat",
    "mapped_write",
    "mknod",
];

/// The fd ops, binding their `fd` and `path`: one list for [`Op::fd_path`] and
/// [`Op::fd_path_mut`], which differ only in how they borrow.
macro_rules! fd_op {
    ($fd:ident, $path:ident) => {
        Op::Close {
            fd: $fd,
            path: $path,
        } | Op::Read {
            fd: $fd,
            path: $path,
            ..
        } | Op::Write {
            fd: $fd,
            path: $path,
            ..
        } | Op::Pread {
            fd: $fd,
            path: $path,
            ..
        } | Op::Pwrite {
            fd: $fd,
            path: $path,
            ..
        } | Op::Fsync {
            fd: $fd,
            path: $path,
        } | Op::Fdatasync {
            fd: $fd,
            path: $path,
        } | Op::Fstat {
            fd: $fd,
            path: $path,
        } | Op::Fallocate {
            fd: $fd,
            path: $path,
            ..
        } | Op::SyncFileRange {
            fd: $fd,
            path: $path,
            ..
        }
    };
}

impl Op {
    /// This op's place in [`OPS`]: a small dense key, for tables by op.
    pub fn index(&self) -> usize {
        match self {
            Op::Open { .. } => 0,
            Op::Close { .. } => 1,
            Op::Read { .. } => 2,
            Op::Write { .. } => 3,
            Op::Pread { .. } => 4,
            Op::Pwrite { .. } => 5,
            Op::Fsync { .. } => 6,
            Op::Fdatasync { .. } => 7,
            Op::Sync => 8,
            Op::Mkdir { .. } => 9,
            Op::Rmdir { .. } => 10,
            Op::Unlink { .. } => 11,
            Op::Rename { .. } => 12,
            Op::Stat { .. } => 13,
            Op::Truncate { .. } => 14,
            Op::Ndp { .. } => 15,
            Op::Isc { .. } => 16,
            Op::Cisc { .. } => 17,
            Op::Bread { .. } => 18,
            Op::Bwrite { .. } => 19,
            Op::Readdir { .. } => 20,
            Op::Setattr { .. } => 21,
            Op::Fallocate { .. } => 22,
            Op::SyncFileRange { .. } => 23,
            Op::Symlink { .. } => 24,
            Op::Link { .. } => 25,
            Op::Fstat { .. } => 26,
            Op::Lstat { .. } => 27,
            Op::MappedWrite { .. } => 28,
            Op::Mknod { .. } => 29,
        }
    }

    pub fn name(&self) -> &'static str {
        OPS[self.index()]
    }

    /// The fd this op works on and the file's path, if it is an fd op.
    pub fn fd_path(&self) -> Option<(i64, &str)> {
        match self {
            fd_op!(fd, path) => Some((*fd, path)),
            _ => None,
        }
    }

    /// [`Op::fd_path`], the path to fill in (an fd op's line may leave it to the fd table).
    pub fn fd_path_mut(&mut self) -> Option<(i64, &mut String)> {
        match self {
            fd_op!(fd, path) => Some((*fd, path)),
            _ => None,
        }
    }

    /// The path this op walks, for the ops that walk one (a `rename`'s or `link`'s source).
    pub fn walked_path(&self) -> Option<&str> {
        match self {
            Op::Open { path, .. }
            | Op::Stat { path }
            | Op::Lstat { path }
            | Op::Readdir { path }
            | Op::Setattr { path, .. }
            | Op::Truncate { path, .. }
            | Op::Unlink { path }
            | Op::Rmdir { path }
            | Op::Mkdir { path }
            | Op::Mknod { path }
            | Op::Rename { path, .. }
            | Op::Link { path, .. }
            | Op::Symlink { path, .. } => Some(path),
            _ => None,
        }
    }

    /// The fd this op works on, if it is an fd op.
    pub fn fd(&self) -> Option<i64> {
        self.fd_path().map(|(fd, _)| fd)
    }
}

/// One traced operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// When it started, in ns since the trace's start.
    pub t: u64,
    pub pid: u32,
    /// The pid whose file-descriptor table this pid uses, where it is another's: a thread
    /// made with `CLONE_FILES` (every pthread, every Go thread) opens and closes the fds its
    /// siblings use. See [`Event::fd_table`].
    pub fds_of: Option<u32>,
    pub op: Op,
    /// The result as the traced system returned it (bytes, an fd, or `-errno`).
    pub ret: Option<i64>,
    /// How long it took on the traced system, in ns.
    pub dur: Option<u64>,
    /// Fields this csdlab does not know, kept as they were.
    pub extra: BTreeMap<String, Value>,
}

impl Event {
    /// Whose fds this event's `fd` numbers: the table it shares, or its pid's own. Every map
    /// from a trace fd to an open file is keyed by this, not by the pid.
    pub fn fd_table(&self) -> u32 {
        self.fds_of.unwrap_or(self.pid)
    }

    /// A write through an fd another shares that was opened `O_APPEND` ([`Op::Write`]'s
    /// `append`).
    pub fn appends(&self) -> bool {
        matches!(self.op, Op::Write { append: true, .. })
    }
}

/// A parsed line before fd resolution: the event, with `path` possibly empty for fd ops.
#[derive(Debug)]
pub(crate) enum Parsed {
    Event(Event),
    UnknownOp(String),
}

/// Takes fields out of one line's object, naming them in errors.
struct Fields(Map<String, Value>);

impl Fields {
    fn take(&mut self, k: &str) -> Option<Value> {
        self.0.remove(k)
    }

    fn u64(&mut self, k: &str) -> Result<u64, String> {
        match self.take(k) {
            Some(v) => as_u64(k, &v),
            None => Err(format!("missing field \"{k}\"")),
        }
    }

    /// An optional boolean field, false when absent.
    fn flag(&mut self, k: &str) -> Result<bool, String> {
        match self.take(k) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(b),
            Some(v) => Err(format!("field \"{k}\" must be true or false, got {v}")),
        }
    }

    fn opt_u64(&mut self, k: &str) -> Result<Option<u64>, String> {
        self.take(k).map(|v| as_u64(k, &v)).transpose()
    }

    fn i64(&mut self, k: &str) -> Result<i64, String> {
        match self.take(k) {
            Some(v) => v
                .as_i64()
                .ok_or_else(|| format!("field \"{k}\" must be an integer, got {v}")),
            None => Err(format!("missing field \"{k}\"")),
        }
    }

    fn string(&mut self, k: &str) -> Result<String, String> {
        match self.take(k) {
            Some(Value::String(s)) => Ok(s),
            Some(v) => Err(format!("field \"{k}\" must be a string, got {v}")),
            None => Err(format!("missing field \"{k}\"")),
        }
    }

    fn opt_string(&mut self, k: &str) -> Result<Option<String>, String> {
        match self.take(k) {
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(format!("field \"{k}\" must be a string, got {v}")),
            None => Ok(None),
        }
    }

    fn path(&mut self, k: &str) -> Result<String, String> {
        let p = self.string(k)?;
        if p.is_empty() {
            return Err(format!("field \"{k}\" is an empty path"));
        }
        Ok(p)
    }

    /// `args` may be a JSON string or any JSON value (kept as its text).
    fn args(&mut self) -> String {
        match self.take("args") {
            None => String::new(),
            Some(Value::String(s)) => s,
            Some(v) => v.to_string(),
        }
    }
}

fn as_u64(k: &str, v: &Value) -> Result<u64, String> {
    match v.as_u64() {
        Some(n) => Ok(n),
        None if v.as_i64().is_some() => Err(format!("field \"{k}\" is negative ({v})")),
        None => Err(format!(
            "field \"{k}\" must be a non-negative integer, got {v}"
        )),
    }
}

/// The common case, scanned by hand: a flat object of the known fields whose strings have
/// no escapes and whose numbers are plain integers. This is the replay's hot path (serde's
/// derived struct parser took twice as long). Anything else (other ops, unknown or repeated
/// fields, escapes, a field of the wrong type, a missing one) returns `None` and goes through
/// [`parse_event_general`], which keeps unknown fields and words every error.
#[derive(Default)]
struct Fast<'a> {
    t: Option<u64>,
    pid: Option<u32>,
    fds_of: Option<u32>,
    op: Option<&'a str>,
    ret: Option<i64>,
    dur: Option<u64>,
    fd: Option<i64>,
    path: Option<&'a str>,
    to: Option<&'a str>,
    flags: Option<&'a str>,
    off: Option<u64>,
    len: Option<u64>,
}

/// The fields [`Fast`] reads.
#[derive(Clone, Copy)]
enum Key {
    T,
    Pid,
    FdsOf,
    Op,
    Ret,
    Dur,
    Fd,
    Path,
    To,
    Flags,
    Off,
    Len,
}

/// A cursor over one line for [`Fast::scan`].
struct Scan<'a> {
    s: &'a str,
    at: usize,
}

impl<'a> Scan<'a> {
    fn peek(&mut self) -> Option<u8> {
        while let Some(&c) = self.s.as_bytes().get(self.at) {
            if !matches!(c, b' ' | b'\t' | b'\r' | b'\n') {
                return Some(c);
            }
            self.at += 1;
        }
        None
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.at += 1)
    }

    /// A string without escapes or control characters.
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let len = self.s.as_bytes()[start..]
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
        // The stop must be the closing quote itself: `eat` would skip a tab or newline first
        // and accept a string JSON forbids.
        if self.s.as_bytes()[start + len] != b'"' {
            return None;
        }
        self.at = start + len + 1;
        Some(&self.s[start..start + len])
    }

    /// A field name [`Fast`] knows, matched in place; any other name is `None`.
    fn key(&mut self) -> Option<Key> {
        self.eat(b'"')?;
        let (key, len) = match &self.s.as_bytes()[self.at..] {
            [b't', b'"', ..] => (Key::T, 1),
            [b'p', b'i', b'd', b'"', ..] => (Key::Pid, 3),
            [b'o', b'p', b'"', ..] => (Key::Op, 2),
            [b'f', b'd', b's', b'_', b'o', b'f', b'"', ..] => (Key::FdsOf, 6),
            [b'r', b'e', b't', b'"', ..] => (Key::Ret, 3),
            [b'd', b'u', b'r', b'"', ..] => (Key::Dur, 3),
            [b'f', b'd', b'"', ..] => (Key::Fd, 2),
            [b'p', b'a', b't', b'h', b'"', ..] => (Key::Path, 4),
            [b't', b'o', b'"', ..] => (Key::To, 2),
            [b'f', b'l', b'a', b'g', b's', b'"', ..] => (Key::Flags, 5),
            [b'o', b'f', b'f', b'"', ..] => (Key::Off, 3),
            [b'l', b'e', b'n', b'"', ..] => (Key::Len, 3),
            _ => return None,
        };
        self.at += len + 1;
        Some(key)
    }

    /// `null` as `None`, else a value read by `f`.
    fn nullable<T>(&mut self, f: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.s.as_bytes()[self.at..].starts_with(b"null") {
            self.at += 4;
            return Some(None);
        }
        f(self).map(Some)
    }

    /// An integer in JSON's syntax (no leading zeros, no fraction or exponent).
    fn int(&mut self) -> Option<i128> {
        let b = &self.s.as_bytes()[self.at..];
        let neg = b.first() == Some(&b'-');
        let digits = &b[neg as usize..];
        // One pass: the digits' count and value together. u64 arithmetic (i128's is several
        // times slower); 20 digits can overflow it, and no field takes a number that large.
        let mut v = 0u64;
        let mut n = 0;
        for &c in digits {
            if !c.is_ascii_digit() {
                break;
            }
            v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
            n += 1;
        }
        // serde_json reads `-0` as a float: leave it to the general parser.
        if n == 0 || (n > 1 && digits[0] == b'0') || (neg && digits[0] == b'0') {
            return None;
        }
        if matches!(digits.get(n), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        self.at += neg as usize + n;
        let v = i128::from(v);
        Some(if neg { -v } else { v })
    }

    /// An integer that fits `T`.
    fn num<T: TryFrom<i128>>(&mut self) -> Option<T> {
        T::try_from(self.int()?).ok()
    }
}

impl<'a> Fast<'a> {
    fn scan(line: &'a str) -> Option<Fast<'a>> {
        let mut f = Fast::default();
        let mut c = Scan { s: line, at: 0 };
        c.eat(b'{')?;
        loop {
            let key = c.key()?;
            c.eat(b':')?;
            c.peek()?;
            // Each field once: a repeated one goes to the general parser.
            fn set<T>(slot: &mut Option<T>, v: Option<T>) -> Option<()> {
                match (slot.is_some(), v) {
                    (false, Some(v)) => {
                        *slot = Some(v);
                        Some(())
                    }
                    _ => None,
                }
            }
            fn set_opt<T>(slot: &mut Option<T>, v: Option<Option<T>>) -> Option<()> {
                match v? {
                    Some(v) => set(slot, Some(v)),
                    // `ret: null` leaves it unset; reject a repeat all the same.
                    None => slot.is_none().then_some(()),
                }
            }
            match key {
                Key::T => set(&mut f.t, c.num())?,
                Key::Pid => set(&mut f.pid, c.num())?,
                Key::FdsOf => set(&mut f.fds_of, c.num())?,
                Key::Op => set(&mut f.op, c.string())?,
                Key::Ret => set_opt(&mut f.ret, c.nullable(Scan::num))?,
                Key::Dur => set(&mut f.dur, c.num())?,
                Key::Fd => set(&mut f.fd, c.num())?,
                Key::Path => set(&mut f.path, c.string())?,
                Key::To => set(&mut f.to, c.string())?,
                Key::Flags => set(&mut f.flags, c.string())?,
                Key::Off => set(&mut f.off, c.num())?,
                Key::Len => set(&mut f.len, c.num())?,
            }
            match c.peek()? {
                b',' => c.at += 1,
                b'}' => {
                    c.at += 1;
                    break;
                }
                _ => return None,
            }
        }
        c.peek().is_none().then_some(f)
    }
}

// Long: one arm per op on the fast path; the general parser checks the same fields.
fn parse_fast(line: &str) -> Option<Event> {
    let f = Fast::scan(line)?;
    let path = || f.path.filter(|p| !p.is_empty()).map(str::to_string);
    let fd = || f.fd.filter(|&fd| fd >= 0);
    let fd_path = || Some((fd()?, f.path.unwrap_or("").to_string()));
    let op = match f.op? {
        "open" => Op::Open {
            path: path()?,
            flags: OpenFlags::parse_checked(f.flags.unwrap_or("")).ok()?,
        },
        "close" => {
            let (fd, path) = fd_path()?;
            Op::Close { fd, path }
        }
        "read" => {
            let (fd, path) = fd_path()?;
            Op::Read {
                fd,
                path,
                off: f.off,
                len: f.len?,
            }
        }
        "write" => {
            let (fd, path) = fd_path()?;
            Op::Write {
                fd,
                path,
                off: f.off,
                len: f.len?,
                append: false,
            }
        }
        "pread" => {
            let (fd, path) = fd_path()?;
            Op::Pread {
                fd,
                path,
                off: f.off?,
                len: f.len?,
            }
        }
        "pwrite" => {
            let (fd, path) = fd_path()?;
            Op::Pwrite {
                fd,
                path,
                off: f.off?,
                len: f.len?,
            }
        }
        "fsync" => {
            let (fd, path) = fd_path()?;
            Op::Fsync { fd, path }
        }
        "fdatasync" => {
            let (fd, path) = fd_path()?;
            Op::Fdatasync { fd, path }
        }
        "fstat" => {
            let (fd, path) = fd_path()?;
            Op::Fstat { fd, path }
        }
        "sync" => Op::Sync,
        "mkdir" => Op::Mkdir { path: path()? },
        "rmdir" => Op::Rmdir { path: path()? },
        "unlink" => Op::Unlink { path: path()? },
        "stat" => Op::Stat { path: path()? },
        "lstat" => Op::Lstat { path: path()? },
        "readdir" => Op::Readdir { path: path()? },
        "setattr" => Op::Setattr {
            path: path()?,
            nofollow: false,
        },
        "rename" => Op::Rename {
            path: path()?,
            to: f.to.filter(|p| !p.is_empty())?.to_string(),
        },
        "link" => Op::Link {
            path: path()?,
            to: f.to.filter(|p| !p.is_empty())?.to_string(),
            follow: false,
        },
        "truncate" => Op::Truncate {
            path: path()?,
            len: f.len?,
        },
        "bread" => Op::Bread {
            off: f.off?,
            len: f.len?,
        },
        "bwrite" => Op::Bwrite {
            off: f.off?,
            len: f.len?,
        },
        _ => return None,
    };
    // Fields an op does not use make the line ambiguous: let the general parser keep them.
    let used = match &op {
        Op::Open { .. } => f.fd.is_none() && f.to.is_none() && f.off.is_none() && f.len.is_none(),
        Op::Close { .. } | Op::Fsync { .. } | Op::Fdatasync { .. } | Op::Fstat { .. } => {
            f.to.is_none() && f.flags.is_none() && f.off.is_none() && f.len.is_none()
        }
        Op::Read { .. } | Op::Write { .. } | Op::Pread { .. } | Op::Pwrite { .. } => {
            f.to.is_none() && f.flags.is_none()
        }
        Op::Rename { .. } | Op::Link { .. } => {
            f.fd.is_none() && f.flags.is_none() && f.off.is_none() && f.len.is_none()
        }
        Op::Truncate { .. } => {
            f.fd.is_none() && f.to.is_none() && f.flags.is_none() && f.off.is_none()
        }
        Op::Bread { .. } | Op::Bwrite { .. } => {
            f.fd.is_none() && f.path.is_none() && f.to.is_none() && f.flags.is_none()
        }
        Op::Sync => {
            f.fd.is_none()
                && f.path.is_none()
                && f.to.is_none()
                && f.flags.is_none()
                && f.off.is_none()
                && f.len.is_none()
        }
        _ => {
            f.fd.is_none()
                && f.to.is_none()
                && f.flags.is_none()
                && f.off.is_none()
                && f.len.is_none()
        }
    };
    used.then_some(Event {
        t: f.t?,
        pid: f.pid?,
        fds_of: f.fds_of,
        op,
        ret: f.ret,
        dur: f.dur,
        extra: BTreeMap::new(),
    })
}

/// Parses one event line. `Err` is a malformed line; an unknown `op` is `Parsed::UnknownOp`.
pub(crate) fn parse_event(line: &str) -> Result<Parsed, String> {
    match parse_fast(line) {
        Some(ev) => Ok(Parsed::Event(ev)),
        None => parse_event_general(line),
    }
}

fn parse_event_general(line: &str) -> Result<Parsed, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not valid JSON: {e}"))?;
    event_from_json(v, true)
}

/// The events of a `cisc` op: file operations of the op's pid, at most [`MAX_CISC_EVENTS`].
fn cisc_events(v: Option<Value>, pid: u32) -> Result<Vec<Event>, String> {
    let ops = match v {
        Some(Value::Array(a)) if !a.is_empty() && a.len() <= MAX_CISC_EVENTS => a,
        Some(Value::Array(a)) => {
            return Err(format!(
                "field \"ops\" holds {} events; a cisc op holds 1 to {MAX_CISC_EVENTS}",
                a.len()
            ))
        }
        Some(v) => return Err(format!("field \"ops\" must be an array of events, got {v}")),
        None => return Err("missing field \"ops\"".into()),
    };
    ops.into_iter()
        .enumerate()
        .map(|(i, v)| {
            let ev = match event_from_json(v, false) {
                Ok(Parsed::Event(ev)) => ev,
                Ok(Parsed::UnknownOp(op)) => {
                    return Err(format!("event {i} of the cisc op has unknown op '{op}'"))
                }
                Err(e) => return Err(format!("event {i} of the cisc op: {e}")),
            };
            let file_op = matches!(
                ev.op,
                Op::Open { .. }
                    | Op::Close { .. }
                    | Op::Read { .. }
                    | Op::Write { .. }
                    | Op::Pread { .. }
                    | Op::Pwrite { .. }
                    | Op::Fsync { .. }
                    | Op::Fdatasync { .. }
            );
            if !file_op {
                return Err(format!(
                    "event {i} of the cisc op is a {}; a cisc op holds open, close, read, write, pread, pwrite, fsync and fdatasync",
                    ev.op.name()
                ));
            }
            if ev.pid != pid {
                return Err(format!(
                    "event {i} of the cisc op is of pid {}, the op's is {pid}",
                    ev.pid
                ));
            }
            Ok(ev)
        })
        .collect()
}

// Long: one arm per op, each naming the fields it requires.
fn event_from_json(v: Value, top: bool) -> Result<Parsed, String> {
    let Value::Object(m) = v else {
        return Err("an event must be a JSON object".into());
    };
    let mut f = Fields(m);
    let op_name = f.string("op")?;
    let t = f.u64("t")?;
    let pid = f.u64("pid")?;
    let pid = u32::try_from(pid).map_err(|_| format!("pid {pid} does not fit in 32 bits"))?;
    let fds_of = match f.opt_u64("fds_of")? {
        None => None,
        Some(n) => Some(
            u32::try_from(n)
                .map_err(|_| format!("field \"fds_of\" ({n}) does not fit in 32 bits"))?,
        ),
    };
    let ret = match f.take("ret") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_i64()
                .ok_or_else(|| format!("field \"ret\" must be an integer, got {v}"))?,
        ),
    };
    let dur = f.opt_u64("dur")?;
    let fd_path = |f: &mut Fields| -> Result<(i64, String), String> {
        let fd = f.i64("fd")?;
        if fd < 0 {
            return Err(format!("field \"fd\" is negative ({fd})"));
        }
        Ok((fd, f.opt_string("path")?.unwrap_or_default()))
    };
    let op = match op_name.as_str() {
        "open" => {
            let path = f.path("path")?;
            let flags = OpenFlags::parse_checked(&f.opt_string("flags")?.unwrap_or_default())
                .map_err(|e| format!("field \"flags\": {e}"))?;
            Op::Open { path, flags }
        }
        "close" => {
            let (fd, path) = fd_path(&mut f)?;
            Op::Close { fd, path }
        }
        "read" | "write" => {
            let (fd, path) = fd_path(&mut f)?;
            let off = f.opt_u64("off")?;
            let len = f.u64("len")?;
            if op_name == "read" {
                Op::Read { fd, path, off, len }
            } else {
                let append = f.flag("append")?;
                Op::Write {
                    fd,
                    path,
                    off,
                    len,
                    append,
                }
            }
        }
        "pread" | "pwrite" => {
            let (fd, path) = fd_path(&mut f)?;
            let off = f.u64("off")?;
            let len = f.u64("len")?;
            if op_name == "pread" {
                Op::Pread { fd, path, off, len }
            } else {
                Op::Pwrite { fd, path, off, len }
            }
        }
        "fsync" | "fdatasync" | "fstat" => {
            let (fd, path) = fd_path(&mut f)?;
            if op_name == "fsync" {
                Op::Fsync { fd, path }
            } else if op_name == "fdatasync" {
                Op::Fdatasync { fd, path }
            } else {
                Op::Fstat { fd, path }
            }
        }
        "sync" => Op::Sync,
        "mkdir" => Op::Mkdir {
            path: f.path("path")?,
        },
        "mknod" => Op::Mknod {
            path: f.path("path")?,
        },
        "rmdir" => Op::Rmdir {
            path: f.path("path")?,
        },
        "unlink" => Op::Unlink {
            path: f.path("path")?,
        },
        "stat" => Op::Stat {
            path: f.path("path")?,
        },
        "lstat" => Op::Lstat {
            path: f.path("path")?,
        },
        "readdir" => Op::Readdir {
            path: f.path("path")?,
        },
        "setattr" => Op::Setattr {
            path: f.path("path")?,
            nofollow: f.flag("nofollow")?,
        },
        "rename" => Op::Rename {
            path: f.path("path")?,
            to: f.path("to")?,
        },
        "link" => Op::Link {
            path: f.path("path")?,
            to: f.path("to")?,
            follow: f.flag("follow")?,
        },
        "symlink" => Op::Symlink {
            path: f.path("path")?,
            target: f.string("target")?,
        },
        "truncate" => Op::Truncate {
            path: f.path("path")?,
            len: f.u64("len")?,
        },
        "fallocate" => {
            let (fd, path) = fd_path(&mut f)?;
            let keep_size = f.flag("keep_size")?;
            Op::Fallocate {
                fd,
                path,
                off: f.u64("off")?,
                len: f.u64("len")?,
                keep_size,
            }
        }
        "mapped_write" => Op::MappedWrite {
            path: f.path("path")?,
            off: f.u64("off")?,
            len: f.u64("len")?,
            sync: match f.take("sync") {
                None => false,
                Some(Value::Bool(b)) => b,
                Some(v) => return Err(format!("field \"sync\" must be true or false, got {v}")),
            },
        },
        "sync_file_range" => {
            let (fd, path) = fd_path(&mut f)?;
            let flags = SyncRangeFlags::parse(&f.opt_string("flags")?.unwrap_or_default())
                .map_err(|e| format!("field \"flags\": {e}"))?;
            Op::SyncFileRange {
                fd,
                path,
                off: f.u64("off")?,
                len: f.u64("len")?,
                flags,
            }
        }
        "ndp" => {
            let task = f.string("task")?;
            let paths = match f.take("paths") {
                Some(Value::Array(a)) if !a.is_empty() => a
                    .into_iter()
                    .map(|p| match p {
                        Value::String(s) if !s.is_empty() => Ok(s),
                        other => Err(format!(
                            "\"paths\" must hold non-empty strings, got {other}"
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                Some(v) => {
                    return Err(format!(
                        "field \"paths\" must be a non-empty array, got {v}"
                    ))
                }
                None => return Err("missing field \"paths\"".into()),
            };
            let sizes = match f.take("sizes") {
                None => Vec::new(),
                Some(Value::Array(a)) if a.len() == paths.len() => a
                    .into_iter()
                    .map(|x| match x.as_u64() {
                        // An NDP request reads each file into the device's memory: a file
                        // past this is not one a request would take, and would be allocated.
                        Some(n) if n > MAX_NDP_FILE_BYTES => Err(format!(
                            "\"sizes\" holds {n}, over the {MAX_NDP_FILE_BYTES}-byte limit of a file an ndp op reads"
                        )),
                        Some(n) => Ok(n),
                        None => Err(format!("\"sizes\" must hold byte counts, got {x}")),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                Some(v) => {
                    return Err(format!(
                        "field \"sizes\" must be an array of one byte count per path ({}), got {v}",
                        paths.len()
                    ))
                }
            };
            Op::Ndp {
                task,
                paths,
                args: f.args(),
                sizes,
            }
        }
        "isc" => {
            let task = f.string("task")?;
            let files = match f.take("files") {
                Some(Value::Array(a)) => a
                    .into_iter()
                    .map(|x| {
                        let path = x.get("path").and_then(Value::as_str);
                        let mode = x
                            .get("mode")
                            .and_then(Value::as_str)
                            .and_then(|m| m.parse::<FileMode>().ok());
                        match (path, mode) {
                            (Some(p), Some(mode)) if !p.is_empty() => Ok(IscFile {
                                path: p.to_string(),
                                mode,
                            }),
                            _ => Err(format!(
                                "each of \"files\" must be {{\"path\":…,\"mode\":\"r\"|\"w\"|\"rw\"}}, got {x}"
                            )),
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                Some(v) => return Err(format!("field \"files\" must be an array, got {v}")),
                None => return Err("missing field \"files\"".into()),
            };
            Op::Isc {
                task,
                files,
                args: f.args(),
            }
        }
        // One level only: a cisc op's events are plain file operations.
        "cisc" if top => {
            let pattern = f.string("pattern")?.parse::<FusePattern>()?;
            Op::Cisc {
                pattern,
                ops: cisc_events(f.take("ops"), pid)?,
            }
        }
        "cisc" => return Err("a cisc op cannot hold another cisc op".into()),
        "bread" | "bwrite" => {
            let off = f.u64("off")?;
            let len = f.u64("len")?;
            if op_name == "bread" {
                Op::Bread { off, len }
            } else {
                Op::Bwrite { off, len }
            }
        }
        _ => return Ok(Parsed::UnknownOp(op_name)),
    };
    Ok(Parsed::Event(Event {
        t,
        pid,
        fds_of,
        op,
        ret,
        dur,
        extra: f.0.into_iter().collect(),
    }))
}

fn push_str(out: &mut String, key: &str, v: &str) {
    let _ = write!(out, ",\"{key}\":{}", Value::String(v.to_string()));
}

impl Event {
    /// The event as one line of the format (no newline). Key order is fixed: `t`, `pid`,
    /// `op`, `fds_of`, the op's fields, `ret`, `dur`, then unknown fields.
    // Long: one arm per op, each writing its fields in the format's order.
    pub fn to_line(&self) -> String {
        let mut s = String::with_capacity(96);
        let _ = write!(
            s,
            "{{\"t\":{},\"pid\":{},\"op\":\"{}\"",
            self.t,
            self.pid,
            self.op.name()
        );
        if let Some(of) = self.fds_of {
            let _ = write!(s, ",\"fds_of\":{of}");
        }
        match &self.op {
            Op::Open { path, flags } => {
                push_str(&mut s, "path", path);
                push_str(&mut s, "flags", &flags.to_flags());
            }
            Op::Close { fd, path }
            | Op::Fsync { fd, path }
            | Op::Fdatasync { fd, path }
            | Op::Fstat { fd, path } => {
                let _ = write!(s, ",\"fd\":{fd}");
                push_str(&mut s, "path", path);
            }
            Op::Read { fd, path, off, len }
            | Op::Write {
                fd, path, off, len, ..
            } => {
                let _ = write!(s, ",\"fd\":{fd}");
                push_str(&mut s, "path", path);
                if let Some(o) = off {
                    let _ = write!(s, ",\"off\":{o}");
                }
                let _ = write!(s, ",\"len\":{len}");
                if self.appends() {
                    s.push_str(",\"append\":true");
                }
            }
            Op::Pread { fd, path, off, len } | Op::Pwrite { fd, path, off, len } => {
                let _ = write!(s, ",\"fd\":{fd}");
                push_str(&mut s, "path", path);
                let _ = write!(s, ",\"off\":{off},\"len\":{len}");
            }
            Op::Sync => {}
            Op::Mkdir { path }
            | Op::Mknod { path }
            | Op::Rmdir { path }
            | Op::Unlink { path }
            | Op::Stat { path }
            | Op::Lstat { path }
            | Op::Readdir { path } => {
                push_str(&mut s, "path", path);
            }
            Op::Setattr { path, nofollow } => {
                push_str(&mut s, "path", path);
                if *nofollow {
                    s.push_str(",\"nofollow\":true");
                }
            }
            Op::Rename { path, to } => {
                push_str(&mut s, "path", path);
                push_str(&mut s, "to", to);
            }
            Op::Link { path, to, follow } => {
                push_str(&mut s, "path", path);
                push_str(&mut s, "to", to);
                if *follow {
                    s.push_str(",\"follow\":true");
                }
            }
            Op::Symlink { path, target } => {
                push_str(&mut s, "path", path);
                push_str(&mut s, "target", target);
            }
            Op::Truncate { path, len } => {
                push_str(&mut s, "path", path);
                let _ = write!(s, ",\"len\":{len}");
            }
            Op::Fallocate {
                fd,
                path,
                off,
                len,
                keep_size,
            } => {
                let _ = write!(s, ",\"fd\":{fd}");
                push_str(&mut s, "path", path);
                let _ = write!(s, ",\"off\":{off},\"len\":{len}");
                if *keep_size {
                    s.push_str(",\"keep_size\":true");
                }
            }
            Op::SyncFileRange {
                fd,
                path,
                off,
                len,
                flags,
            } => {
                let _ = write!(s, ",\"fd\":{fd}");
                push_str(&mut s, "path", path);
                let _ = write!(s, ",\"off\":{off},\"len\":{len}");
                push_str(&mut s, "flags", &flags.to_flags());
            }
            Op::MappedWrite {
                path,
                off,
                len,
                sync,
            } => {
                push_str(&mut s, "path", path);
                let _ = write!(s, ",\"off\":{off},\"len\":{len}");
                if *sync {
                    s.push_str(",\"sync\":true");
                }
            }
            Op::Ndp {
                task,
                paths,
                args,
                sizes,
            } => {
                push_str(&mut s, "task", task);
                let _ = write!(s, ",\"paths\":{}", Value::from(paths.clone()));
                push_str(&mut s, "args", args);
                if !sizes.is_empty() {
                    let _ = write!(s, ",\"sizes\":{}", Value::from(sizes.clone()));
                }
            }
            Op::Isc { task, files, args } => {
                push_str(&mut s, "task", task);
                let files: Vec<Value> = files
                    .iter()
                    .map(|f| serde_json::json!({"path": f.path, "mode": f.mode}))
                    .collect();
                let _ = write!(s, ",\"files\":{}", Value::from(files));
                push_str(&mut s, "args", args);
            }
            Op::Cisc { pattern, ops } => {
                push_str(&mut s, "pattern", pattern.name());
                s.push_str(",\"ops\":[");
                for (i, ev) in ops.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    s.push_str(&ev.to_line());
                }
                s.push(']');
            }
            Op::Bread { off, len } | Op::Bwrite { off, len } => {
                let _ = write!(s, ",\"off\":{off},\"len\":{len}");
            }
        }
        if let Some(r) = self.ret {
            let _ = write!(s, ",\"ret\":{r}");
        }
        if let Some(d) = self.dur {
            let _ = write!(s, ",\"dur\":{d}");
        }
        for (k, v) in &self.extra {
            let _ = write!(s, ",{}:{v}", Value::String(k.clone()));
        }
        s.push('}');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the fast path accepts, the general parser reads the same way; what it refuses
    /// goes to the general parser.
    #[test]
    fn the_fast_path_agrees_with_the_general_parser() {
        let lines = [
            r#"{"t":1,"pid":2,"op":"open","path":"/a","flags":"O_RDWR|O_CREAT","ret":3,"dur":5}"#,
            r#"{"t":1,"pid":2,"op":"open","path":"/a"}"#,
            r#"{"t":1,"pid":2,"op":"write","fd":3,"path":"/a","off":7,"len":9,"ret":9}"#,
            r#"{"t":1,"pid":2,"op":"read","fd":3,"len":9,"ret":null}"#,
            r#"{"t":1,"pid":2,"op":"pread","fd":3,"path":"/a","off":0,"len":1}"#,
            r#"{"t":1,"pid":2,"op":"pwrite","fd":3,"path":"/aé","off":0,"len":1}"#,
            r#"{"t":1,"pid":2,"op":"fsync","fd":3}"#,
            r#"{"t":1,"pid":2,"op":"fdatasync","fd":3,"path":"/a"}"#,
            r#"{"t":1,"pid":2,"op":"close","fd":3,"path":"/a","ret":0}"#,
            r#"{"t":1,"pid":2,"op":"rename","path":"/a","to":"/b"}"#,
            r#"{"t":1,"pid":2,"op":"truncate","path":"/a","len":0}"#,
            r#"{"t":1,"pid":2,"op":"mkdir","path":"/d"}"#,
            r#"{"t":1,"pid":2,"op":"rmdir","path":"/d"}"#,
            r#"{"t":1,"pid":2,"op":"unlink","path":"/d"}"#,
            r#"{"t":1,"pid":2,"op":"stat","path":"/d"}"#,
            r#"{"t":1,"pid":2,"op":"bread","off":0,"len":512}"#,
            r#"{"t":1,"pid":2,"op":"bwrite","off":0,"len":512,"ret":512}"#,
            r#" { "t" : 1 , "pid":2,"op":"stat","path":"/d","ret":null } "#,
            r#"{"t":18446744073709551615,"pid":2,"op":"stat","path":"/d"}"#,
            r#"{"t":1,"pid":2,"op":"stat","path":"/d","ret":-9223372036854775808}"#,
            // Refused by the fast path, read by the general one:
            r#"{"t":1,"pid":2,"op":"stat","\u0070ath":"/d"}"#,
            r#"{"t":1,"pid":2,"op":"pwrite","fd":3,"path":"/a\u00e9","off":0,"len":1}"#,
            r#"{"t":1,"pid":2,"op":"stat","path":"/d","t":2}"#,
            r#"{"t":1.0,"pid":2,"op":"stat","path":"/d"}"#,
            r#"{"t":1,"pid":2,"op":"stat","path":"/d","ret":-0}"#,
            r#"{"t":1,"pid":2,"op":"mkdir","path":"/d","comm":"sh"}"#,
            r#"{"t":1,"pid":2,"op":"mkdir","path":"/d","len":3}"#,
            r#"{"t":1,"pid":2,"op":"ndp","task":"stats64","paths":["/d"]}"#,
            // Refused by both:
            r#"{"t":1,"pid":2,"op":"stat","path":"/d","dur":null}"#,
            r#"{"t":1,"pid":2,"op":"write","fd":-3,"path":"/a","len":1}"#,
            r#"{"t":1,"pid":2,"op":"mkdir","path":""}"#,
            r#"{"t":-1,"pid":2,"op":"mkdir","path":"/a"}"#,
            r#"{"t":18446744073709551616,"pid":2,"op":"stat","path":"/d"}"#,
            r#"{"t":000000000000000000001,"pid":2,"op":"stat","path":"/d"}"#,
            r#"{"t":1,"pid":2,"op":"stat","pat":"/d"}"#,
            // A raw tab before the closing quote (JSON wants "\t"): found by the property
            // test below.
            "{\"t\":1,\"pid\":2,\"op\":\"stat\",\"path\":\"/\t\"}",
        ];
        let mut fast = 0;
        for l in lines {
            let general = parse_event_general(l);
            if let Some(ev) = parse_fast(l) {
                fast += 1;
                match general {
                    Ok(Parsed::Event(g)) => assert_eq!(ev, g, "{l}"),
                    _ => panic!("fast path accepted what the general parser refuses: {l}"),
                }
            }
        }
        assert_eq!(fast, 20);
    }

    proptest::proptest! {
        /// Lines a byte away from valid ones: whatever the fast path accepts, the general
        /// parser reads the same way.
        #[test]
        fn the_fast_path_agrees_on_near_misses(
            which in 0usize..4,
            at in 0usize..200,
            byte in proptest::prelude::any::<u8>(),
            delete in proptest::prelude::any::<bool>(),
        ) {
            let lines = [
                r#"{"t":10,"pid":2,"op":"open","path":"/a","flags":"O_RDWR|O_CREAT","ret":3}"#,
                r#"{"t":10,"pid":2,"op":"write","fd":3,"path":"/a","off":7,"len":9,"ret":-9}"#,
                r#"{"t":10,"pid":2,"op":"rename","path":"/a","to":"/b","dur":100}"#,
                r#"{"t":10,"pid":2,"op":"bread","off":0,"len":512,"ret":null}"#,
            ];
            let mut b = lines[which].as_bytes().to_vec();
            let at = at % b.len();
            if delete {
                b.remove(at);
            } else {
                b[at] = byte;
            }
            if let Ok(l) = std::str::from_utf8(&b) {
                if let Some(ev) = parse_fast(l) {
                    match parse_event_general(l) {
                        Ok(Parsed::Event(g)) => proptest::prop_assert_eq!(ev, g, "{}", l),
                        other => proptest::prop_assert!(false, "fast accepted {l}, general: {other:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn a_cisc_op_round_trips_and_bad_ones_are_named() {
        let line = r#"{"t":5,"pid":9,"op":"cisc","pattern":"write-sync","ops":[{"t":5,"pid":9,"op":"pwrite","fd":3,"path":"/f","off":0,"len":4,"ret":4},{"t":6,"pid":9,"op":"fsync","fd":3,"path":"/f","ret":0}],"ret":0,"dur":2}"#;
        let Ok(Parsed::Event(ev)) = parse_event(line) else {
            panic!("a cisc op parses")
        };
        let Op::Cisc { pattern, ops } = &ev.op else {
            panic!("it is a cisc op")
        };
        assert_eq!((*pattern, ops.len()), (FusePattern::WriteSync, 2));
        assert_eq!(ev.to_line(), line);

        let bad = |ops: &str| {
            let line =
                format!(r#"{{"t":1,"pid":9,"op":"cisc","pattern":"write-sync","ops":{ops}}}"#);
            parse_event(&line).err().unwrap_or_default()
        };
        let stat = r#"{"t":1,"pid":9,"op":"stat","path":"/f"}"#;
        assert!(bad(&format!("[{stat}]")).contains("is a stat"));
        let other = r#"{"t":1,"pid":8,"op":"fsync","fd":3,"path":"/f"}"#;
        assert!(bad(&format!("[{other}]")).contains("pid 8"));
        assert!(bad(&format!("[{line}]")).contains("another cisc op"));
        assert!(bad("[]").contains("1 to 32"));
        let many = vec![other.replace("8", "9"); 33].join(",");
        assert!(bad(&format!("[{many}]")).contains("33 events"));
        assert!(parse_event(&line.replace("write-sync", "bogus"))
            .unwrap_err()
            .contains("unknown pattern"));
    }

    #[test]
    fn open_flags_are_linux_names_or_numbers() {
        let open = |flags: &str| {
            parse_event(&format!(
                r#"{{"t":1,"pid":2,"op":"open","path":"/a","flags":"{flags}","ret":3}}"#
            ))
        };
        let Ok(Parsed::Event(ev)) = open("O_WRONLY|O_CREAT|O_CLOEXEC|0x8000") else {
            panic!("real flags parse")
        };
        let Op::Open { flags, .. } = ev.op else {
            panic!("an open")
        };
        assert!(flags.write && flags.create && !flags.truncate);
        for typo in ["O_WRONLY|O_CREATE", "O_RDWR|TRUNC", "ace"] {
            let e = open(typo).err().unwrap_or_default();
            assert!(e.contains("unknown open flag"), "{typo}: {e}");
        }
    }
}
