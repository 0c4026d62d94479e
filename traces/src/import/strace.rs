//! strace text (`strace -f -ttt -T -y -s0`) to csd trace events.
//!
//! One line per syscall: an optional pid, an absolute timestamp, then
//! `name(args) = ret <duration>`. A call another thread interrupted is split into
//! `name(args <unfinished ...>` and, later, `<... name resumed>rest) = ret <dur>`; the two halves
//! are joined per pid and the event keeps the time the call started. `-y` prints every fd with
//! its path (`3</tmp/a>`, `AT_FDCWD</home/u>`), so relative paths are resolved and fd events
//! carry their file. Syscalls that touch no regular file (pipes, sockets, `/proc`, `/dev`,
//! memory management, signals) are ignored.
//!
//! Beyond one event per call:
//! - a copy the kernel makes between two files (`copy_file_range`, which `cp` and `cat` use
//!   since coreutils 9, `sendfile`, `splice`) is a read of the source and a write of the
//!   destination, each of the bytes the call moved;
//! - an `lseek` has no event, but gives the fd's next read or write its offset;
//! - an fd the kernel closes with no `close` call (at an exit, an `execve` with
//!   `FD_CLOEXEC`, under a `dup2`, in a `close_range`) is closed by a `close` event, where a
//!   replay holds it open (see [`super::descriptions`]);
//! - a directory's listing is one `readdir`, at its first `getdents64`;
//! - a relative path resolves against the working directory, which `AT_FDCWD</dir>` shows
//!   and `chdir` and `fchdir` change, and which a new process inherits;
//! - `symlink` and `symlinkat` make a `symlink`, its target kept as given; `link` and
//!   `linkat` a `link` (git names each object it writes this way);
//! - an fd on a file unlinked while open (`5</tmp/x>(deleted)`) names the file as it was,
//!   and an `O_TMPFILE` open, a file with no name, is a create of the name `-y` shows
//!   (`/tmp/#1234`) and its unlink at once;
//! - `fstat` (and `statx` or `newfstatat` of an empty path) is an `fstat`, which walks no
//!   path; `access` walks a path as `stat` does, and is a `stat`; `lstat`, `readlink` and
//!   a stat with `AT_SYMLINK_NOFOLLOW` do not follow a link at the end, and are `lstat`s
//!   (a `readlink` refused with `EINVAL`, of a path that is not a link, a successful one);
//!   reading extended attributes (`getxattr`, `listxattr` and their `l` and `f` forms) walks
//!   and looks as the matching stat does, whether or not the attribute is there;
//!   `chmod`, `chown`, `utimensat` and the extended-attribute calls are `setattr`s;
//! - `fallocate` (and `posix_fallocate`, which calls it) is carried in mode 0 and
//!   `FALLOC_FL_KEEP_SIZE`, the two that set blocks aside, and `sync_file_range` (which
//!   PostgreSQL's checkpointer and RocksDB's `bytes_per_sync` use) with its flags;
//! - a shared writable `mmap` of a file, whose stores make no system call, becomes a
//!   `mapped_write` of the range it releases or syncs (`munmap`, `msync`, the end of its
//!   address space; see [`super::mappings`]);
//! - calls that change files in ways a trace cannot carry (`fallocate`'s other modes, which
//!   punch, zero, collapse or insert ranges, a link to an fd's file, a rename that
//!   exchanges two names, I/O submitted through io_uring or AIO) are counted under their
//!   reason.

use super::descriptions::{Closed, Descriptions};
use super::mappings::{Mappings, Written};
use super::ImportError;
use crate::format::{Event, Op, OpenFlags, SyncRangeFlags};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Every system call the converter reads: `csd trace record` asks strace for these alone
/// (`-e trace=`, with `--seccomp-bpf` so the program stops for nothing else), which traces
/// a program at a fraction of the cost of stopping it at every call. A call that makes no
/// event but moves what the importer follows (`clone`, `dup2`, `lseek`, `chdir`, `mmap`,
/// `execve`…) is here too; a test holds the list to the converter's match arms.
pub const RECORDED_CALLS: &[&str] = &[
    "_llseek",
    "access",
    "bind",
    "chdir",
    "chmod",
    "chown",
    "clone",
    "clone3",
    "close",
    "close_range",
    "connect",
    "copy_file_range",
    "creat",
    "dup",
    "dup2",
    "dup3",
    "execve",
    "execveat",
    "faccessat",
    "faccessat2",
    "fallocate",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "fchown",
    "fchownat",
    "fcntl",
    "fcntl64",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "fork",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstat64",
    "fstatat64",
    "fsync",
    "ftruncate",
    "futimesat",
    "getdents",
    "getdents64",
    "getxattr",
    "io_submit",
    "io_uring_enter",
    "ioctl",
    "lchown",
    "lgetxattr",
    "link",
    "linkat",
    "listxattr",
    "llistxattr",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lstat",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "mmap",
    "mmap2",
    "mremap",
    "msync",
    "munmap",
    "newfstatat",
    "open",
    "openat",
    "openat2",
    "pread64",
    "preadv",
    "preadv2",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readlink",
    "readlinkat",
    "readv",
    "removexattr",
    "rename",
    "renameat",
    "renameat2",
    "rmdir",
    "sendfile",
    "sendfile64",
    "setxattr",
    "splice",
    "stat",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "sync_file_range2",
    "syncfs",
    "truncate",
    "unlink",
    "unlinkat",
    "unshare",
    "utime",
    "utimensat",
    "utimes",
    "vfork",
    "write",
    "writev",
];

/// strace's `-e trace=` value for [`RECORDED_CALLS`]: each name marked `?`, so a call this
/// machine's architecture lacks (`mmap2` on x86-64) is not an error.
pub fn strace_filter() -> String {
    let marked: Vec<String> = RECORDED_CALLS.iter().map(|c| format!("?{c}")).collect();
    marked.join(",")
}

#[derive(Default)]
pub struct StraceConverter {
    origin: Option<u64>,
    /// Unfinished calls by pid: (syscall, start time in ns, argument text so far).
    pending: HashMap<u32, (String, u64, String)>,
    /// The last working directory seen per fs context ([`StraceConverter::fs_of`]), from
    /// `AT_FDCWD</dir>`, `chdir` and `fchdir`.
    cwd: HashMap<u32, String>,
    /// The thread whose working directory each thread shares, where it is not its own: a
    /// `clone` with `CLONE_FS` (every thread) shares its creator's, so one thread's `chdir`
    /// moves its siblings too.
    fs_shares: HashMap<u32, u32>,
    /// Calls not converted, by reason.
    skipped: std::collections::BTreeMap<String, u64>,
    /// Every fd table's open file descriptions, shared by `dup` and `fork`: where a read or
    /// write starts, which the trace records on the event when another fd or an `lseek`
    /// moved the description last (strace shows no positions).
    files: Descriptions,
    /// The line's write went to the end of its file through an `O_APPEND` description, by
    /// an fd that did not open it: its event says so (`append`).
    appends: bool,
    /// Directory fds a listing is going through, by (fd table, fd): its first `getdents64` is the
    /// trace's `readdir`, the calls that continue it are not.
    listing: HashSet<(u32, i64)>,
    /// The fd table each thread uses, where it is not its own: a `clone` with `CLONE_FILES`
    /// (a thread) shares its parent's, an `execve` gets one of its own. `files` and
    /// `listing` are keyed by the table, as an fd's position and listing are the open
    /// file's, which every sharer moves.
    tables: HashMap<u32, u32>,
    /// Shared writable mappings of files, by address space: what they release or sync
    /// becomes `mapped_write` events.
    mappings: Mappings,
    /// The address space each thread uses, where it is not its own: a `clone` with
    /// `CLONE_VM` (a thread, a `vfork` child until its `execve`) shares its creator's.
    spaces: HashMap<u32, u32>,
    /// What the line's call released or synced of a mapping, with whether the caller waits
    /// (`MS_SYNC`): the line's `mapped_write` events, in [`StraceConverter::take_implied`].
    written: Vec<(Written, bool)>,
    /// Fds a replay holds open that the line's call closed with no `close` (an exit, an
    /// `execve`, a `dup2` over one, `close_range`), by (fd table, fd, path): the line's
    /// `close` events, after its `mapped_write`s.
    closed: Vec<(u32, i64, String)>,
    /// Fd tables and address spaces whose first owner exited while threads still used
    /// them: the last user's exit drops them.
    gone_tables: HashSet<u32>,
    gone_spaces: HashSet<u32>,
    /// The events the last line implied, beyond its call's own.
    implied: Vec<Event>,
    /// Special files `mknod` made (FIFOs, sockets, device nodes), by path: what a read or
    /// write through one moves is not file data, and the trace does not carry it.
    special: HashSet<String>,
}

/// What one strace line becomes: most calls one event, a copy between two files
/// (`copy_file_range`, `sendfile`, `splice`) a read of one and a write of the other.
pub type LineEvents = [Option<Event>; 2];

/// `pid` exits: if it was the last to use what it owned or shared (`sharers`: a sharer's
/// pid → the owner's), the owner's id, whose table or address space goes. An owner that
/// exits before its sharers is kept in `gone` until the last of them does.
fn last_user(sharers: &mut HashMap<u32, u32>, gone: &mut HashSet<u32>, pid: u32) -> Option<u32> {
    let owner = sharers.remove(&pid).unwrap_or(pid);
    if sharers.values().any(|&o| o == owner) {
        if owner == pid {
            gone.insert(pid);
        }
        return None;
    }
    (owner == pid || gone.remove(&owner)).then_some(owner)
}

fn err(line: u64, problem: impl Into<String>) -> ImportError {
    ImportError {
        format: "strace",
        line,
        problem: problem.into(),
    }
}

/// Whether a `clone`'s flags (its `flags=` argument, or the field of `clone3`'s struct)
/// hold `flag`.
fn clone_flag(args: &[String], flag: &str) -> bool {
    args.iter()
        .any(|a| a.split(['|', '=', ',', '{', '}', ' ']).any(|w| w == flag))
}

/// `1795376906.680789` → ns.
fn parse_ts(s: &str) -> Option<u64> {
    let (sec, frac) = s.split_once('.').unwrap_or((s, ""));
    if sec.is_empty()
        || !sec.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 9
    {
        return None;
    }
    let sec: u64 = sec.parse().ok()?;
    let mut ns: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    for _ in frac.len()..9 {
        ns *= 10;
    }
    sec.checked_mul(1_000_000_000)?.checked_add(ns)
}

/// Splits `a, "b,c", {d, e}, 3</x,y>` at top-level commas.
fn split_args(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut depth, mut in_str, mut esc, mut in_angle) = (0i32, false, false, false);
    for c in s.chars() {
        if in_str {
            cur.push(c);
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        if in_angle {
            cur.push(c);
            if c == '>' {
                in_angle = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                cur.push(c);
            }
            '<' if cur.ends_with(|p: char| p.is_ascii_digit() || p == 'D') => {
                in_angle = true;
                cur.push(c);
            }
            '[' | '{' | '(' => {
                depth += 1;
                cur.push(c);
            }
            ']' | '}' | ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth <= 0 => out.push(std::mem::take(&mut cur).trim().to_string()),
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// A C-escaped, double-quoted strace string.
fn unquote(s: &str) -> Option<String> {
    let inner = s.strip_prefix('"')?;
    let inner = inner.strip_suffix("...").unwrap_or(inner);
    let inner = inner.strip_suffix('"')?;
    let mut out = Vec::new();
    let b = inner.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = *b.get(i + 1)?;
        i += 2;
        match c {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'v' => out.push(0x0b),
            b'f' => out.push(0x0c),
            b'x' => {
                let h = inner.get(i..i + 2)?;
                out.push(u8::from_str_radix(h, 16).ok()?);
                i += 2;
            }
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                let mut n = 1;
                while n < 3 && i < b.len() && (b'0'..=b'7').contains(&b[i]) {
                    v = v * 8 + u32::from(b[i] - b'0');
                    i += 1;
                    n += 1;
                }
                out.push(u8::try_from(v).ok()?);
            }
            other => out.push(other),
        }
    }
    String::from_utf8(out).ok()
}

/// An address or a length as strace prints them: `0x7f3d4635b000` or `4344552`.
fn address(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// `3</tmp/a>` → (3, Some("/tmp/a")); `AT_FDCWD</x>` → (-100, Some("/x")); `3` → (3, None).
/// An fd on a file unlinked while open, `3</tmp/a>(deleted)`, names the file as it was.
fn fd_arg(s: &str) -> Option<(i64, Option<String>)> {
    let (num, path) = match s.split_once('<') {
        Some((n, rest)) => (n, Some(decorated_path(rest)?.to_string())),
        None => (s, None),
    };
    let fd = if num == "AT_FDCWD" {
        -100
    } else {
        num.parse().ok()?
    };
    Some((fd, path))
}

/// The path in `-y`'s decoration after its `<`: up to the closing `>`, which a file
/// unlinked while open follows with `(deleted)`.
fn decorated_path(rest: &str) -> Option<&str> {
    rest.strip_suffix("(deleted)")
        .unwrap_or(rest)
        .strip_suffix('>')
}

/// Whether an open call asked for `O_TMPFILE`: its flags, not its path, say so.
fn tmpfile(name: &str, a: &[String]) -> bool {
    let flags = match name {
        "open" => a.get(1),
        "openat" | "openat2" => a.get(2),
        _ => None,
    };
    flags.is_some_and(|f| f.contains("O_TMPFILE"))
}

/// An offset strace read through a pointer: `[4096]`, or `[4096] => [8192]` where it also
/// shows the value the call left (sendfile; `[4096 => 8192]` accepted too). The value before
/// the call.
fn pointed_offset(s: &str) -> Option<u64> {
    let before = s.split(" => ").next()?;
    let inner = before.strip_prefix('[')?;
    inner
        .strip_suffix(']')
        .unwrap_or(inner)
        .trim()
        .parse::<i64>()
        .ok()
        .and_then(|v| u64::try_from(v).ok())
}

/// An fd argument on a file a replay has: `3</tmp/a>` → (3, "/tmp/a"); a pipe, a socket,
/// `/dev` or an fd strace printed without its path is none.
fn file_fd(arg: &str) -> Option<(i64, String)> {
    let (fd, path) = fd_arg(arg)?;
    let path = path?;
    replayable(&path).then_some((fd, path))
}

/// A path csdlab replays: absolute, and not a pseudo file system or device.
fn replayable(path: &str) -> bool {
    path.starts_with('/')
        && !["/proc/", "/sys/", "/dev/", "/run/"]
            .iter()
            .any(|p| path.starts_with(p) || path == p.trim_end_matches('/'))
}

/// Joins a possibly relative path onto a directory and normalises `.`/`..`.
fn absolute(dir: Option<&str>, path: &str) -> String {
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{}/{path}", dir.unwrap_or("/"))
    };
    crate::links::normalize(&joined)
}

/// Splits `args) = result` (strace pads short calls: `brk(NULL)        = 0x…`) into the
/// argument text and the result text.
fn split_result(s: &str) -> Option<(&str, &str)> {
    let mut end = s.len();
    while let Some(i) = s[..end].rfind("= ") {
        let before = s[..i].trim_end();
        if let Some(args) = before.strip_suffix(')') {
            return Some((args, &s[i + 2..]));
        }
        end = i;
    }
    None
}

/// The result part: `= 3</tmp/a> <0.000044>` → (ret, fd path, errno, dur ns).
struct Outcome {
    ret: Option<i64>,
    path: Option<String>,
    errno: Option<String>,
    dur: Option<u64>,
}

fn parse_outcome(s: &str) -> Option<Outcome> {
    let s = s.trim();
    let (body, dur) = match s.rfind(" <") {
        Some(i) if s.ends_with('>') => {
            let d = &s[i + 2..s.len() - 1];
            match parse_ts(d) {
                Some(ns) => (&s[..i], Some(ns)),
                None => (s, None),
            }
        }
        _ => (s, None),
    };
    let body = body.trim();
    if body.starts_with('?') {
        return Some(Outcome {
            ret: None,
            path: None,
            errno: None,
            dur,
        });
    }
    let mut words = body.splitn(2, ' ');
    let first = words.next()?;
    let (num, path) = match first.split_once('<') {
        Some((n, p)) => (n, decorated_path(p).map(str::to_string)),
        None => (first, None),
    };
    // A result is the kernel's return register. strace prints some unsigned (an address, the
    // register `rt_sigreturn` restores), so a value past `i64::MAX` is read as that register.
    let ret = if num.starts_with("0x") {
        address(num).map(|r| r as i64)
    } else {
        num.parse()
            .ok()
            .or_else(|| num.parse::<u64>().ok().map(|r| r as i64))
    }?;
    let errno = words
        .next()
        .and_then(|w| w.split_whitespace().next())
        .filter(|w| w.starts_with('E'))
        .map(str::to_string);
    Some(Outcome {
        ret: Some(ret),
        path,
        errno,
        dur,
    })
}

impl StraceConverter {
    // Long: strace's line shapes (unfinished, resumed, signals, exits) in one place, in the
    // order they must be tried.
    pub fn line(&mut self, line: u64, text: &str) -> Result<LineEvents, ImportError> {
        let text = text.trim_end();
        if text.trim().is_empty() {
            return Ok([None, None]);
        }
        // `[pid 12] ts …`, `12 ts …` or `ts …`.
        let (pid, rest) = if let Some(r) = text.strip_prefix("[pid ") {
            let (p, r) = r
                .split_once(']')
                .ok_or_else(|| err(line, "unterminated [pid …]"))?;
            (
                p.trim()
                    .parse::<u32>()
                    .map_err(|_| err(line, format!("bad pid '{p}'")))?,
                r.trim_start(),
            )
        } else {
            let (first, r) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
            if !first.contains('.') && first.bytes().all(|b| b.is_ascii_digit()) {
                let pid = first
                    .parse::<u32>()
                    .map_err(|_| err(line, format!("bad pid '{first}'")))?;
                (pid, r.trim_start())
            } else {
                (0, text)
            }
        };
        let (ts, call) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let ts = parse_ts(ts).ok_or_else(|| {
            err(
                line,
                format!("expected an absolute timestamp (strace -ttt), got '{ts}'"),
            )
        })?;
        let origin = *self.origin.get_or_insert(ts);
        let call = call.trim_start();
        self.implied.clear();
        if call.starts_with("+++ exited") || call.starts_with("+++ killed") {
            self.exit(pid);
            self.implied_events(pid, ts.saturating_sub(origin));
            return Ok([None, None]);
        }
        if call.starts_with("+++") || call.starts_with("---") || call.is_empty() {
            return Ok([None, None]);
        }
        let (name, args, outcome_text, t) = if let Some(r) = call.strip_prefix("<... ") {
            let (name, tail) = r
                .split_once(" resumed>")
                .ok_or_else(|| err(line, "a '<...' line without 'resumed>'"))?;
            let Some((_, start, prefix)) = self.pending.remove(&pid) else {
                // Its start was before the trace began: nothing to join with.
                return Ok([None, None]);
            };
            let (tail_args, outcome) =
                split_result(tail).ok_or_else(|| err(line, "resumed call without '= result'"))?;
            (
                name.to_string(),
                format!("{prefix}{tail_args}"),
                outcome.to_string(),
                start,
            )
        } else {
            let open = call
                .find('(')
                .ok_or_else(|| err(line, "expected 'syscall(args) = result'"))?;
            let name = &call[..open];
            // strace names a call it cannot identify `???` (a thread caught mid-exec, a
            // number its tables lack): nothing in it is the file system's.
            if name == "???" {
                return Ok([None, None]);
            }
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(err(line, format!("'{name}' is not a syscall name")));
            }
            let body = &call[open + 1..];
            if let Some(before) = body.strip_suffix("<unfinished ...>") {
                self.pending
                    .insert(pid, (name.to_string(), ts, before.to_string()));
                return Ok([None, None]);
            }
            let (args, outcome) =
                split_result(body).ok_or_else(|| err(line, "expected 'syscall(args) = result'"))?;
            (name.to_string(), args.to_string(), outcome.to_string(), ts)
        };
        let mut outcome = parse_outcome(&outcome_text)
            .ok_or_else(|| err(line, format!("cannot read the result '{outcome_text}'")))?;
        // A `readlink` of a path that is not a link walked all of it before refusing: for a
        // replay it is an `lstat` that succeeded (gcc's realpath asks it of every directory).
        // Likewise an extended attribute asked for and not there (`ENODATA`), or past the
        // caller's buffer (`ERANGE`): the walk and the inode's look were made (`ls -l` asks
        // for two of every entry).
        let walked = match outcome.errno.as_deref() {
            Some("EINVAL") => name.starts_with("readlink"),
            Some("ENODATA" | "ERANGE" | "EOPNOTSUPP") => name.contains("xattr"),
            _ => false,
        };
        if walked {
            outcome.ret = Some(0);
            outcome.errno = None;
        }
        let t = t.saturating_sub(origin);
        let args = split_args(&args);
        self.appends = false;
        let ops = match name.as_str() {
            "copy_file_range" | "sendfile" | "sendfile64" | "splice" => {
                self.copy(pid, &name, &args, &outcome)
            }
            _ => match self.convert(pid, &name, &args, &outcome) {
                // A file made with no name (`O_TMPFILE`; -y shows it as `/tmp/#1234`,
                // deleted): a create of that name in its directory, unlinked at once.
                Some(Op::Open { path, flags })
                    if tmpfile(&name, &args) && outcome.ret.is_some_and(|r| r >= 0) =>
                {
                    if outcome.path.is_none() {
                        self.skip(format!("{name}: O_TMPFILE without the file's name (-y)"));
                        return Ok([None, None]);
                    }
                    let made = OpenFlags {
                        create: true,
                        ..flags
                    };
                    let unlink = Op::Unlink { path: path.clone() };
                    [Some(Op::Open { path, flags: made }), Some(unlink)]
                }
                op => [op, None],
            },
        };
        let fds_of = self.tables.get(&pid).copied();
        let event = |mut op: Op| {
            let mut extra = BTreeMap::new();
            if let Some(e) = outcome.errno.clone() {
                extra.insert("errno".to_string(), serde_json::Value::String(e));
            }
            if let Op::Write { append, .. } = &mut op {
                *append = self.appends;
            }
            Event {
                t,
                pid,
                fds_of,
                op,
                ret: outcome.ret,
                dur: outcome.dur,
                extra,
            }
        };
        let [first, second] = ops.map(|op| op.map(event));
        // A mapping follows its file's name, and a file unlinked has nothing written back;
        // so does a special file's kind.
        if outcome.ret == Some(0) {
            match first.as_ref().map(|e| &e.op) {
                Some(Op::Rename { path, to }) => {
                    self.mappings.rename(path, to);
                    if self.special.remove(path) {
                        self.special.insert(to.clone());
                    }
                }
                Some(Op::Unlink { path }) => {
                    self.mappings.unlink(path);
                    self.special.remove(path);
                }
                _ => {}
            }
        }
        // Bytes through a FIFO or a socket are not a file's.
        let file_data = |e: &Event| match &e.op {
            Op::Read { path, .. }
            | Op::Write { path, .. }
            | Op::Pread { path, .. }
            | Op::Pwrite { path, .. } => !self.special.contains(path),
            _ => true,
        };
        let (first, second) = (first.filter(file_data), second.filter(file_data));
        // A replay opens an fd at the first event that uses it (an `fstat` opens nothing, a
        // call that failed is not replayed, a directory's or an `O_PATH` open only walks its
        // path).
        let table = self.table(pid);
        for e in first.iter().chain(&second) {
            let named = match &e.op {
                Op::Open { path, flags } if !flags.directory && !flags.path => {
                    e.ret.filter(|&fd| fd >= 0).map(|fd| (fd, path.as_str()))
                }
                Op::Fstat { .. } | Op::Close { .. } => None,
                op => op.fd_path().filter(|_| e.ret.is_none_or(|r| r >= 0)),
            };
            if let Some((fd, path)) = named {
                self.files.replays(table, fd, path);
            }
        }
        self.implied_events(pid, t);
        // A second event is a call of its own: a copy's write returns what the read does,
        // an O_TMPFILE's unlink succeeds.
        let second = second.map(|mut e| {
            if let Op::Unlink { .. } = e.op {
                e.ret = Some(0);
            }
            e
        });
        Ok([first, second])
    }

    /// The directory a `*at` call's dirfd names (or the cwd), remembering the cwd.
    fn dir_of(&mut self, pid: u32, dirfd: Option<&String>) -> Option<String> {
        let (fd, path) = dirfd.and_then(|a| fd_arg(a))?;
        if fd == -100 {
            let fs = self.fs_of(pid);
            if let Some(p) = &path {
                self.cwd.insert(fs, p.clone());
            }
            return path.or_else(|| self.cwd.get(&fs).cloned());
        }
        path
    }

    fn path_arg(
        &mut self,
        pid: u32,
        dirfd: Option<&String>,
        arg: Option<&String>,
    ) -> Option<String> {
        let p = unquote(arg?)?;
        let dir = match dirfd {
            Some(_) => self.dir_of(pid, dirfd),
            None => self.cwd.get(&self.fs_of(pid)).cloned(),
        };
        let abs = absolute(dir.as_deref(), &p);
        replayable(&abs).then_some(abs)
    }

    /// The first argument as an fd on a file a replay has (`3</tmp/a>`).
    fn fd_file(args: &[String]) -> Option<(i64, String)> {
        file_fd(args.first()?)
    }

    /// Counts a call under `why`, as one the trace does not carry.
    fn skip(&mut self, why: String) {
        *self.skipped.entry(why).or_default() += 1;
    }

    /// Whose working directory `pid` uses: its creator's if it shares it, else its own.
    fn fs_of(&self, pid: u32) -> u32 {
        self.fs_shares.get(&pid).copied().unwrap_or(pid)
    }

    /// `pid` stops sharing its fd table (`files`) or its working directory (`fs`): what it
    /// shared becomes its own copy.
    fn unshare(&mut self, pid: u32, files: bool, fs: bool) {
        if let Some(shared) = files.then(|| self.tables.remove(&pid)).flatten() {
            self.files.fork(shared, pid);
        }
        if let Some(shared) = fs.then(|| self.fs_shares.remove(&pid)).flatten() {
            if let Some(cwd) = self.cwd.get(&shared).cloned() {
                self.cwd.insert(pid, cwd);
            }
        }
    }

    /// Whose fd table `pid` uses: its creator's if it shares it, else its own.
    fn table(&self, pid: u32) -> u32 {
        self.tables.get(&pid).copied().unwrap_or(pid)
    }

    /// A new file at fd number `fd` (or none): what was known of the old one is gone.
    fn forget_fd(&mut self, pid: u32, fd: i64) {
        self.files.close(self.table(pid), fd);
        self.listing.remove(&(self.table(pid), fd));
    }

    /// `pid` exited: the fd table and the address space it was the last to use go with
    /// it, what the mappings held written back and every fd closed.
    fn exit(&mut self, pid: u32) {
        self.pending.remove(&pid);
        if let Some(space) = last_user(&mut self.spaces, &mut self.gone_spaces, pid) {
            let gone = self.mappings.drop_space(space);
            self.written.extend(gone.into_iter().map(|w| (w, false)));
        }
        if let Some(table) = last_user(&mut self.tables, &mut self.gone_tables, pid) {
            let closed = self.files.drop_table(table);
            self.kernel_closed(table, closed);
            self.listing.retain(|&(t, _)| t != table);
        }
    }

    /// Fds of `table` the kernel closed: those a replay holds become `close` events.
    fn kernel_closed(&mut self, table: u32, closed: Vec<Closed>) {
        for (fd, path) in closed {
            self.listing.remove(&(table, fd));
            if let Some(path) = path {
                self.closed.push((table, fd, path));
            }
        }
    }

    /// Whose address space `pid` uses: its creator's if it shares it, else its own.
    fn space(&self, pid: u32) -> u32 {
        self.spaces.get(&pid).copied().unwrap_or(pid)
    }

    /// The line's releases and syncs of mappings, as `mapped_write` events of `pid` at `t`,
    /// then the fds it closed with no `close`, as `close` events (the order of the kernel's
    /// `do_exit`: the address space goes before the files).
    fn implied_events(&mut self, pid: u32, t: u64) {
        let fds_of = self.tables.get(&pid).copied();
        for (w, sync) in self.written.drain(..) {
            self.implied.push(Event {
                t,
                pid,
                fds_of,
                op: Op::MappedWrite {
                    path: w.path,
                    off: w.off,
                    len: w.len,
                    sync,
                },
                ret: Some(0),
                dur: None,
                extra: BTreeMap::new(),
            });
        }
        for (table, fd, path) in self.closed.drain(..) {
            self.implied.push(Event {
                t,
                pid,
                fds_of: (table != pid).then_some(table),
                op: Op::Close { fd, path },
                ret: Some(0),
                dur: None,
                extra: BTreeMap::new(),
            });
        }
    }

    /// The events the line just converted implied beyond its call's own, to follow them:
    /// `mapped_write`s of what a `munmap`, an `msync`, or the exit or `execve` that ended an
    /// address space wrote through mappings, and `close`s of the fds an exit, an `execve`
    /// (`FD_CLOEXEC`), a `dup2` or a `close_range` closed.
    pub fn take_implied(&mut self) -> std::vec::Drain<'_, Event> {
        self.implied.drain(..)
    }

    /// Where a read or write through `fd` without an offset of its own starts, where the
    /// replay could not know it ([`Descriptions::start`]); `moved`: what it moved, if it
    /// succeeded.
    fn position(&mut self, pid: u32, fd: i64, write: bool, moved: Option<u64>) -> Option<u64> {
        let start = self.files.start(self.table(pid), fd, write, moved);
        self.appends |= start.append;
        start.off
    }

    /// `copy_file_range(in, off_in, out, off_out, len, flags)`, `splice` (the same layout; one
    /// side is a pipe) or `sendfile(out, in, offset, count)`: a read of the source and a write
    /// of the destination, each of what the call moved, where that side is a regular file.
    fn copy(&mut self, pid: u32, name: &str, a: &[String], out: &Outcome) -> [Option<Op>; 2] {
        let moved = out.ret.filter(|&r| r >= 0).map(|r| r as u64);
        let (src, src_off, dst, dst_off) = match name {
            "sendfile" | "sendfile64" => (a.get(1), a.get(2), a.first(), None),
            _ => (a.first(), a.get(1), a.get(2), a.get(3)),
        };
        // An offset strace could not read (it prints the pointer): the whole call is skipped.
        let offset = |text: Option<&String>| match text.map(String::as_str) {
            None | Some("NULL") => Some(None),
            Some(text) => pointed_offset(text).map(Some),
        };
        let (Some(src_off), Some(dst_off)) = (offset(src_off), offset(dst_off)) else {
            self.skip(format!("{name}: offset is not a number"));
            return [None, None];
        };
        [(src, src_off, false), (dst, dst_off, true)].map(|(fd, off, write)| {
            let (fd, path) = file_fd(fd?)?;
            let len = moved.unwrap_or(0);
            Some(match (off, write) {
                (Some(off), false) => Op::Pread { fd, path, off, len },
                (Some(off), true) => Op::Pwrite { fd, path, off, len },
                (None, false) => Op::Read {
                    off: self.position(pid, fd, false, moved),
                    fd,
                    path,
                    len,
                },
                (None, true) => Op::Write {
                    off: self.position(pid, fd, true, moved),
                    fd,
                    path,
                    len,
                    append: false,
                },
            })
        })
    }

    /// The calls skipped so far, by reason (each also counted as an ignored line).
    pub fn take_skipped(&mut self) -> std::collections::BTreeMap<String, u64> {
        std::mem::take(&mut self.skipped)
    }

    /// Argument `i` as an offset or length: a number in 0..2⁶³ (what the kernel's signed
    /// `loff_t` holds). Anything else is a call the trace cannot carry, counted under its
    /// reason.
    fn num(&mut self, name: &str, a: &[String], i: usize, what: &str) -> Option<u64> {
        let why = match a.get(i)?.trim().parse::<i128>() {
            Ok(v) if (0..=i128::from(i64::MAX)).contains(&v) => return Some(v as u64),
            Ok(v) if v < 0 => format!("{name}: negative {what}"),
            Ok(_) => format!("{name}: {what} over 2^63-1"),
            Err(_) => format!("{name}: {what} is not a number"),
        };
        *self.skipped.entry(why).or_default() += 1;
        None
    }

    // Long: one arm per system call the importer understands.
    fn convert(&mut self, pid: u32, name: &str, a: &[String], out: &Outcome) -> Option<Op> {
        let ok_len = || out.ret.filter(|&r| r >= 0).map(|r| r as u64);
        match name {
            "open" | "openat" | "openat2" | "creat" => {
                let (dirfd, path, flags) = match name {
                    "openat" => (a.first(), a.get(1), a.get(2).cloned().unwrap_or_default()),
                    // `{flags=O_RDONLY|O_CLOEXEC, mode=0, resolve=RESOLVE_NO_SYMLINKS}`
                    "openat2" => {
                        let how = a.get(2).map_or("", String::as_str);
                        let flags = how
                            .split_once("flags=")
                            .map_or("", |(_, rest)| rest.split([',', '}']).next().unwrap_or(""));
                        (a.first(), a.get(1), flags.to_string())
                    }
                    "creat" => (None, a.first(), "O_WRONLY|O_CREAT|O_TRUNC".into()),
                    _ => (None, a.first(), a.get(1).cloned().unwrap_or_default()),
                };
                if let Some(fd) = out.ret.filter(|&r| r >= 0) {
                    self.forget_fd(pid, fd);
                    let (append, cloexec) =
                        (flags.contains("O_APPEND"), flags.contains("O_CLOEXEC"));
                    self.files.open(self.table(pid), fd, append, cloexec);
                }
                let path = match out.path.clone().filter(|p| p.starts_with('/')) {
                    Some(p) => replayable(&p).then_some(p)?,
                    None => self.path_arg(pid, dirfd, path)?,
                };
                Some(Op::Open {
                    path,
                    flags: OpenFlags::parse(&flags),
                })
            }
            "close" => {
                if let Some((fd, _)) = a.first().and_then(|f| fd_arg(f)) {
                    self.forget_fd(pid, fd);
                }
                Self::fd_file(a).map(|(fd, path)| Op::Close { fd, path })
            }
            // The offset the fd's next read or write starts at: `lseek` returns it,
            // `_llseek` (32-bit) writes it through its third argument.
            "lseek" | "_llseek" => {
                let (fd, _) = Self::fd_file(a)?;
                let at = match name {
                    "lseek" => ok_len(),
                    _ => ok_len().and(a.get(2).and_then(|p| pointed_offset(p))),
                };
                if let Some(at) = at {
                    self.files.seek(self.table(pid), fd, at);
                    // `rewinddir` seeks to 0: the next getdents64 lists again.
                    self.listing.remove(&(self.table(pid), fd));
                }
                None
            }
            // The working directory, which the relative paths of calls without a dirfd
            // resolve against (`mkdir -p a/b` opens `a`, fchdirs into it, then makes `b`):
            // changed by chdir and fchdir, and inherited by a new process or thread.
            "chdir" if out.ret == Some(0) => {
                let to = unquote(a.first()?)?;
                let fs = self.fs_of(pid);
                let cwd = absolute(self.cwd.get(&fs).map(String::as_str), &to);
                self.cwd.insert(fs, cwd);
                None
            }
            "fchdir" if out.ret == Some(0) => {
                let (_, dir) = fd_arg(a.first()?)?;
                self.cwd.insert(self.fs_of(pid), dir?);
                None
            }
            "clone" | "clone3" | "fork" | "vfork" => {
                let child = u32::try_from(out.ret.filter(|&r| r > 0)?).ok()?;
                // A reused thread id starts afresh; a thread shares its creator's fd table
                // and working directory, a new process has copies.
                self.tables.remove(&child);
                self.fs_shares.remove(&child);
                self.spaces.remove(&child);
                self.gone_tables.remove(&child);
                self.gone_spaces.remove(&child);
                if clone_flag(a, "CLONE_VM") || name == "vfork" {
                    self.spaces.insert(child, self.space(pid));
                }
                if clone_flag(a, "CLONE_FILES") {
                    let table = self.table(pid);
                    self.tables.insert(child, table);
                } else {
                    self.files.fork(self.table(pid), child);
                }
                let fs = self.fs_of(pid);
                if clone_flag(a, "CLONE_FS") {
                    self.fs_shares.insert(child, fs);
                } else {
                    let cwd = self.cwd.get(&fs)?.clone();
                    self.cwd.entry(child).or_insert(cwd);
                }
                None
            }
            // `execve` unshares the fd table (`unshare_files`): the program starts with a copy.
            // Its other threads are gone, so its working directory is its own from here.
            "execve" | "execveat" if out.ret == Some(0) => {
                self.unshare(pid, true, true);
                // A new address space: one it owned is gone, with its mappings (a `vfork`
                // child leaves its parent's as it was).
                if self.spaces.remove(&pid).is_none() {
                    self.spaces.retain(|_, s| *s != pid);
                    let gone = self.mappings.drop_space(pid);
                    self.written.extend(gone.into_iter().map(|w| (w, false)));
                }
                let table = self.table(pid);
                let closed = self.files.exec(table);
                self.kernel_closed(table, closed);
                None
            }
            // A thread that asks for its own fd table or working directory gets a copy.
            "unshare" if out.ret == Some(0) => {
                self.unshare(pid, clone_flag(a, "CLONE_FILES"), clone_flag(a, "CLONE_FS"));
                None
            }
            // A new fd number for the old one's description: what was there is closed. Its
            // `FD_CLOEXEC` is `dup3`'s `O_CLOEXEC` or `F_DUPFD_CLOEXEC`'s; `F_SETFD` sets it.
            "dup" | "dup2" | "dup3" | "fcntl" | "fcntl64" => {
                let table = self.table(pid);
                let old = a.first().and_then(|f| fd_arg(f)).map(|(fd, _)| fd)?;
                let command = a.get(1).map_or("", String::as_str);
                if name.starts_with("fcntl") && command == "F_SETFD" && out.ret == Some(0) {
                    let on = a.get(2).is_some_and(|f| f.contains("FD_CLOEXEC"));
                    self.files.set_cloexec(table, old, on);
                }
                let dups = !name.starts_with("fcntl") || command.starts_with("F_DUPFD");
                let new = out.ret.filter(|&r| r >= 0 && dups)?;
                let cloexec = match name {
                    "dup3" => a.get(2).is_some_and(|f| f.contains("O_CLOEXEC")),
                    _ => command == "F_DUPFD_CLOEXEC",
                };
                self.listing.remove(&(table, new));
                if let Some(path) = self.files.dup(table, old, new, cloexec) {
                    self.closed.push((table, new, path));
                }
                None
            }
            // `close_range(first, last, flags)`, which glibc's `closefrom` calls (a child
            // closing what it must not pass on, before its `execve`).
            "close_range" if out.ret == Some(0) => {
                // Unsigned in the kernel: `~0U` prints as 4294967295 (or -1, read as an int).
                let bound = |i: usize| {
                    let (fd, _) = fd_arg(a.get(i)?.trim())?;
                    Some(if fd < 0 { i64::from(u32::MAX) } else { fd })
                };
                let (first, last) = (bound(0)?, bound(1)?);
                let flags = a.get(2).map_or("", String::as_str);
                if flags.contains("CLOSE_RANGE_UNSHARE") {
                    self.unshare(pid, true, false);
                }
                let table = self.table(pid);
                let cloexec = flags.contains("CLOSE_RANGE_CLOEXEC");
                let closed = self.files.close_range(table, first, last, cloexec);
                self.kernel_closed(table, closed);
                None
            }
            // A listing from the start: the first call of each pass over the directory.
            "getdents" | "getdents64" => {
                let (fd, path) = Self::fd_file(a)?;
                if self.listing.contains(&(self.table(pid), fd)) {
                    return None;
                }
                if ok_len().is_some() {
                    self.listing.insert((self.table(pid), fd));
                }
                Some(Op::Readdir { path })
            }
            // `posix_fallocate` makes the same call with mode 0.
            "fallocate" => {
                let (fd, path) = Self::fd_file(a)?;
                let keep_size = match a.get(1).map(String::as_str) {
                    Some("0") => false,
                    Some("FALLOC_FL_KEEP_SIZE") => true,
                    mode => {
                        if out.ret == Some(0) {
                            let mode = mode.unwrap_or("?");
                            self.skip(format!("fallocate: mode {mode} is not modelled"));
                        }
                        return None;
                    }
                };
                let off = self.num(name, a, 2, "offset")?;
                let len = self.num(name, a, 3, "length")?;
                Some(Op::Fallocate {
                    fd,
                    path,
                    off,
                    len,
                    keep_size,
                })
            }
            // `sync_file_range2` (ARM, PowerPC) takes its flags second.
            "sync_file_range" | "sync_file_range2" => {
                let (fd, path) = Self::fd_file(a)?;
                let (off, len, flags) = match name {
                    "sync_file_range" => (1, 2, 3),
                    _ => (2, 3, 1),
                };
                let flags = match SyncRangeFlags::parse(a.get(flags)?) {
                    Ok(f) => f,
                    Err(e) => {
                        if out.ret == Some(0) {
                            self.skip(format!("{name}: {e}"));
                        }
                        return None;
                    }
                };
                let off = self.num(name, a, off, "offset")?;
                let len = self.num(name, a, len, "length")?;
                Some(Op::SyncFileRange {
                    fd,
                    path,
                    off,
                    len,
                    flags,
                })
            }
            // Stores through a shared writable mapping reach the file with no system call:
            // the range is written when the mapping is released or synced (`Mappings`).
            "mmap" | "mmap2" => {
                let (prot, flags) = (a.get(2)?, a.get(3)?);
                let (_, path) = file_fd(a.get(4)?)?;
                let addr = out.ret.filter(|&r| r >= 0)? as u64;
                if !(prot.contains("PROT_WRITE") && flags.contains("MAP_SHARED")) {
                    return None;
                }
                let len = self.num(name, a, 1, "length")?;
                // strace prints the offset in hex past 0 (`0x1000`); `mmap2` counts it in
                // 4096-byte units.
                let off = address(a.get(5)?).filter(|&o| o <= i64::MAX as u64);
                let off = off.and_then(|o| match name {
                    "mmap2" => o.checked_mul(4096),
                    _ => Some(o),
                });
                let Some(off) = off else {
                    self.skip(format!("{name}: offset is not a number"));
                    return None;
                };
                if !self.mappings.map(self.space(pid), addr, len, path, off) {
                    self.skip(format!("{name}: a mapping past the address space's bounds"));
                }
                None
            }
            "munmap" if out.ret == Some(0) => {
                let (addr, len) = (address(a.first()?)?, address(a.get(1)?)?);
                let gone = self.mappings.unmap(self.space(pid), addr, len);
                self.written.extend(gone.into_iter().map(|w| (w, false)));
                None
            }
            // `MS_SYNC` waits for the writeback; `MS_ASYNC` (a no-op since Linux 2.6.19) and
            // `MS_INVALIDATE` leave it to the kernel's flusher.
            "msync" if out.ret == Some(0) => {
                let (addr, len) = (address(a.first()?)?, address(a.get(1)?)?);
                let sync = a.get(2).is_some_and(|f| f.contains("MS_SYNC"));
                let synced = self.mappings.sync(self.space(pid), addr, len);
                self.written.extend(synced.into_iter().map(|w| (w, sync)));
                None
            }
            // A mapping moved or resized keeps its file: what it held at the old address is
            // now at the new one (the dirty pages stay in the page cache); a tail it shrank
            // off is released.
            "mremap" => {
                let (old, old_len) = (address(a.first()?)?, address(a.get(1)?)?);
                let new = out.ret.filter(|&r| r >= 0)? as u64;
                let new_len = address(a.get(2)?)?;
                let space = self.space(pid);
                if new_len < old_len {
                    let tail = old.saturating_add(new_len);
                    let gone = self.mappings.unmap(space, tail, old_len - new_len);
                    self.written.extend(gone.into_iter().map(|w| (w, false)));
                }
                let kept = old_len.min(new_len);
                let mut moved = self.mappings.unmap(space, old, kept).into_iter();
                if let Some(w) = moved.next() {
                    self.mappings.map(space, new, new_len, w.path, w.off);
                }
                None
            }
            "read" | "write" | "readv" | "writev" => {
                let (fd, path) = Self::fd_file(a)?;
                // A vector call's length is what it moved; a plain one's is its count.
                let len = if name.ends_with('v') {
                    ok_len().unwrap_or(0)
                } else {
                    self.num(name, a, 2, "length")?
                };
                let write = !name.starts_with("read");
                let moved = ok_len();
                let off = self.position(pid, fd, write, moved);
                Some(if name.starts_with("read") {
                    Op::Read { fd, path, off, len }
                } else {
                    Op::Write {
                        fd,
                        path,
                        off,
                        len,
                        append: false,
                    }
                })
            }
            "pread64" | "pwrite64" | "preadv" | "pwritev" | "preadv2" | "pwritev2" => {
                let (fd, path) = Self::fd_file(a)?;
                let vectored = name.contains('v');
                let off = self.num(name, a, 3, "offset")?;
                let len = if vectored {
                    ok_len().unwrap_or(0)
                } else {
                    self.num(name, a, 2, "length")?
                };
                Some(if name.starts_with("pread") {
                    Op::Pread { fd, path, off, len }
                } else {
                    Op::Pwrite { fd, path, off, len }
                })
            }
            "fsync" => Self::fd_file(a).map(|(fd, path)| Op::Fsync { fd, path }),
            "fdatasync" => Self::fd_file(a).map(|(fd, path)| Op::Fdatasync { fd, path }),
            // syncfs(fd) syncs the file system holding fd; the replay has one.
            "sync" | "syncfs" => Some(Op::Sync),
            "mkdir" => self
                .path_arg(pid, None, a.first())
                .map(|path| Op::Mkdir { path }),
            // `mknod` and `mknodat` (`mkfifo` calls the latter): an inode and a name. A
            // regular file made so is an empty one; any other kind's I/O is not the file's.
            "mknod" | "mknodat" => {
                let (dirfd, at) = match name {
                    "mknodat" => (a.first(), 1),
                    _ => (None, 0),
                };
                let path = self.path_arg(pid, dirfd, a.get(at))?;
                let mode = a.get(at + 1)?;
                let regular = !["S_IFIFO", "S_IFSOCK", "S_IFCHR", "S_IFBLK"]
                    .iter()
                    .any(|k| mode.contains(k));
                if !regular && out.ret == Some(0) {
                    self.special.insert(path.clone());
                }
                Some(Op::Mknod { path })
            }
            "mkdirat" => self
                .path_arg(pid, a.first(), a.get(1))
                .map(|path| Op::Mkdir { path }),
            "rmdir" => self
                .path_arg(pid, None, a.first())
                .map(|path| Op::Rmdir { path }),
            "unlink" => self
                .path_arg(pid, None, a.first())
                .map(|path| Op::Unlink { path }),
            "unlinkat" => {
                let path = self.path_arg(pid, a.first(), a.get(1))?;
                Some(if a.get(2).is_some_and(|f| f.contains("AT_REMOVEDIR")) {
                    Op::Rmdir { path }
                } else {
                    Op::Unlink { path }
                })
            }
            "rename" => {
                let path = self.path_arg(pid, None, a.first())?;
                let to = self.path_arg(pid, None, a.get(1))?;
                Some(Op::Rename { path, to })
            }
            "renameat" | "renameat2" => {
                let path = self.path_arg(pid, a.first(), a.get(1))?;
                let to = self.path_arg(pid, a.get(2), a.get(3))?;
                // An exchange keeps both names: as a rename it would remove `to`.
                if a.get(4).is_some_and(|f| f.contains("RENAME_EXCHANGE")) {
                    self.skip(format!("{name}: RENAME_EXCHANGE is not modelled"));
                    return None;
                }
                Some(Op::Rename { path, to })
            }
            // A Unix socket bound to a path is a name in its directory (an `S_IFSOCK`
            // inode), and connecting to it walks that path. An abstract one (`@"…"`) has none.
            "bind" | "connect" => {
                let path = a.get(1)?.split_once("sun_path=\"")?.1;
                let path = path.get(..path.rfind('"')?)?;
                let path = self.path_arg(pid, None, Some(&format!("\"{path}\"")))?;
                if name == "connect" {
                    return Some(Op::Stat { path });
                }
                if out.ret == Some(0) {
                    self.special.insert(path.clone());
                }
                Some(Op::Mknod { path })
            }
            // A reflink shares the source's blocks with no read or write strace can show.
            "ioctl" if out.ret == Some(0) => {
                let request = a.get(1)?;
                if request == "FICLONE" || request == "FICLONERANGE" {
                    self.skip(format!("ioctl: {request} (a reflink copy) is not modelled"));
                }
                None
            }
            // I/O submitted through a ring or an AIO context makes no call strace can show.
            "io_uring_enter" | "io_submit" => {
                let through = match name {
                    "io_submit" => "Linux AIO",
                    _ => "io_uring",
                };
                if self.num(name, a, 1, "count").is_some_and(|n| n > 0) {
                    self.skip(format!(
                        "{name}: I/O submitted through {through} is not traced"
                    ));
                }
                None
            }
            "stat" => self
                .path_arg(pid, None, a.first())
                .map(|path| Op::Stat { path }),
            "lstat" => self
                .path_arg(pid, None, a.first())
                .map(|path| Op::Lstat { path }),
            "newfstatat" | "fstatat64" | "statx" => {
                if a.get(1).is_some_and(|p| p == "\"\"") {
                    // fstat through AT_EMPTY_PATH: the fd's own file, no walk. Of AT_FDCWD
                    // it is the working directory, which no trace fd names: a stat of it.
                    return Self::fd_file(a).map(|(fd, path)| match fd {
                        0.. => Op::Fstat { fd, path },
                        _ => Op::Stat { path },
                    });
                }
                let flags = a.get(if name == "statx" { 2 } else { 3 });
                let nofollow = flags.is_some_and(|f| f.contains("AT_SYMLINK_NOFOLLOW"));
                self.path_arg(pid, a.first(), a.get(1))
                    .map(|path| match nofollow {
                        true => Op::Lstat { path },
                        false => Op::Stat { path },
                    })
            }
            "fstat" | "fstat64" => Self::fd_file(a).map(|(fd, path)| Op::Fstat { fd, path }),
            // A path walk and a look at the inode: `access` follows a link at the end, as
            // `stat` does; `readlink` reads the link itself, as `lstat` does.
            "access" => self
                .path_arg(pid, None, a.first())
                .map(|path| Op::Stat { path }),
            "readlink" => self
                .path_arg(pid, None, a.first())
                .map(|path| Op::Lstat { path }),
            "faccessat" | "faccessat2" => self
                .path_arg(pid, a.first(), a.get(1))
                .map(|path| Op::Stat { path }),
            "readlinkat" => self
                .path_arg(pid, a.first(), a.get(1))
                .map(|path| Op::Lstat { path }),
            // Reading extended attributes (`ls -l` for ACLs and SELinux labels, `cp -a`): the
            // walk and a look at the inode, as a stat makes.
            "getxattr" | "listxattr" => self
                .path_arg(pid, None, a.first())
                .map(|path| Op::Stat { path }),
            "lgetxattr" | "llistxattr" => self
                .path_arg(pid, None, a.first())
                .map(|path| Op::Lstat { path }),
            "fgetxattr" | "flistxattr" => Self::fd_file(a).map(|(fd, path)| Op::Fstat { fd, path }),
            // Changes to an inode's attributes, by path or by fd.
            "chmod" | "fchmod" | "fchmodat" | "fchmodat2" | "chown" | "fchown" | "lchown"
            | "fchownat" | "utime" | "utimes" | "utimensat" | "futimesat" | "setxattr"
            | "lsetxattr" | "fsetxattr" | "removexattr" | "lremovexattr" | "fremovexattr" => {
                let file = match name {
                    "fchmodat" | "fchmodat2" | "fchownat" | "utimensat" | "futimesat" => {
                        match a.get(1).map(String::as_str) {
                            // utimensat(fd, NULL, …): the fd's own file.
                            Some("NULL") => Self::fd_file(a).map(|(_, p)| p),
                            _ => self.path_arg(pid, a.first(), a.get(1)),
                        }
                    }
                    _ if name.starts_with('f') => Self::fd_file(a).map(|(_, p)| p),
                    _ => self.path_arg(pid, None, a.first()),
                };
                // `lchown`, `lsetxattr`, and an `*at` call with `AT_SYMLINK_NOFOLLOW` (tar
                // setting an extracted link's times and owner) change the link itself.
                let nofollow = name.starts_with('l')
                    || a.iter().skip(2).any(|f| f.contains("AT_SYMLINK_NOFOLLOW"));
                file.map(|path| Op::Setattr { path, nofollow })
            }
            // The target as the program gave it (a link's target is not resolved).
            "symlink" | "symlinkat" => {
                let target = unquote(a.first()?)?;
                let path = match name {
                    "symlink" => self.path_arg(pid, None, a.get(1)),
                    _ => self.path_arg(pid, a.get(1), a.get(2)),
                }?;
                Some(Op::Symlink { path, target })
            }
            // A further name for a file. `link` does not follow a symbolic link at the end of
            // its source; `linkat` does with AT_SYMLINK_FOLLOW (`ln -L`).
            "link" => {
                let path = self.path_arg(pid, None, a.first())?;
                let to = self.path_arg(pid, None, a.get(1))?;
                Some(Op::Link {
                    path,
                    to,
                    follow: false,
                })
            }
            "linkat" => {
                // Naming an fd's file (an O_TMPFILE made visible): the fd's file was never
                // named in the trace, so there is nothing to link.
                if a.get(4).is_some_and(|f| f.contains("AT_EMPTY_PATH")) {
                    self.skip(format!(
                        "{name}: linking an fd (AT_EMPTY_PATH) is not modelled"
                    ));
                    return None;
                }
                let path = self.path_arg(pid, a.first(), a.get(1))?;
                let to = self.path_arg(pid, a.get(2), a.get(3))?;
                let follow = a.get(4).is_some_and(|f| f.contains("AT_SYMLINK_FOLLOW"));
                Some(Op::Link { path, to, follow })
            }
            "truncate" => {
                let path = self.path_arg(pid, None, a.first())?;
                let len = self.num(name, a, 1, "length")?;
                Some(Op::Truncate { path, len })
            }
            "ftruncate" => {
                let (_, path) = Self::fd_file(a)?;
                let len = self.num(name, a, 1, "length")?;
                Some(Op::Truncate { path, len })
            }
            _ => None,
        }
    }
}
