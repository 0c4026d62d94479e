//! The first pass of a replay: what must exist before the trace starts.
//!
//! Files the trace reads (or opens without creating) before it writes them, with the byte
//! ranges its reads need, and their directories. Setup creates those, untimed, before the
//! second pass replays every event.

use crate::format::{Event, Op};
use crate::reader::{Strictness, TraceError, TraceReader};
use csd_hostfs::namespace::parent_dir as parent;
use foldhash::{HashMap, HashMapExt, HashSet};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;

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
    /// The directories above each name a call failed to find (`ENOENT`): each was a
    /// directory if it existed, since a file there would have failed the call with
    /// `ENOTDIR`. A path the trace otherwise only shows existing (a `stat`) is one.
    dir_hints: HashSet<String>,
    /// Paths the trace removed (unlinked, removed as directories, renamed away). A failed
    /// lookup after a removal says what the path is *then*, not what setup must make: `rm
    /// -rf` a tree holding a file `f`, then fail to find `f/x` once `f` is gone, and `f` was
    /// still a file at the start.
    removed: HashSet<String>,
    /// Directories the trace renamed: new name → old. A path below a new name is the path
    /// below the old one that existed (or was made) before, so setup makes that one.
    renamed_dirs: BTreeMap<String, String>,
    /// Symbolic links the trace made (at most [`MAX_LINKS`]): path → target. A path through
    /// one names what the link points to, so setup makes that, never a directory where the
    /// trace will make the link.
    links: HashMap<String, String>,
    pub events: u64,
    /// The tasks the trace's `ndp` and `isc` ops name (at most [`MAX_TASKS`]), resolved
    /// before the replay starts.
    pub tasks: BTreeSet<String>,
}

/// The most distinct tasks a trace's ops may name: a replay resolves each before it starts
/// (an op naming one past these is not replayed, and says so).
pub const MAX_TASKS: usize = 64;

/// The most directory renames prescan follows (memory stays bounded on any trace); paths
/// below a directory renamed after these are taken as they are named.
pub const MAX_DIR_RENAMES: usize = 4096;

/// The most renames undone for one path (a directory renamed, and renamed again...).
const MAX_RENAME_CHAIN: usize = 64;

/// The most symbolic links prescan follows through (memory stays bounded on any trace);
/// paths through a link made after these are taken as they are named.
pub const MAX_LINKS: usize = 4096;

/// Offers `path`'s directories, nearest first and the root excluded, to `add`, which says
/// whether each was new: the walk up stops at the first that was not (those above it were
/// added with it).
fn new_ancestors(path: &str, mut add: impl FnMut(&str) -> bool) {
    let mut p = parent(path);
    while let Some(d) = p {
        if d == "/" || !add(d) {
            break;
        }
        p = parent(d);
    }
}

impl Prescan {
    /// `path` with the links the trace made that it goes through followed, as a walk
    /// follows them: those above its last component, and that one too if `last`. A cycle
    /// (the walk would fail, `ELOOP`) leaves it as named.
    fn through_links<'p>(&self, path: &'p str, last: bool) -> Cow<'p, str> {
        if self.links.is_empty() {
            return Cow::Borrowed(path);
        }
        crate::links::follow(path, last, |p| self.links.get(p).cloned())
            .map_or(Cow::Borrowed(path), |f| f.path)
    }

    /// Whether a walk of `path` meets more links than it may follow.
    fn loops(&self, path: &str) -> bool {
        crate::links::follow(path, true, |p| self.links.get(p).cloned()).is_err()
    }

    /// What setup knows `path` as: the links the trace made that it goes through followed,
    /// then the name it had before the trace renamed a directory at or above it (each such
    /// rename undone, nearest first).
    fn origin<'p>(&self, path: &'p str) -> Cow<'p, str> {
        let mut p = self.through_links(path, false);
        if self.renamed_dirs.is_empty() {
            return p;
        }
        for _ in 0..MAX_RENAME_CHAIN {
            let mut at = Some(p.as_ref());
            let mut hit = None;
            while let Some(a) = at.filter(|a| *a != "/") {
                if let Some(old) = self.renamed_dirs.get(a) {
                    hit = Some(format!("{old}{}", &p[a.len()..]));
                    break;
                }
                at = parent(a);
            }
            match hit {
                Some(h) => p = Cow::Owned(h),
                None => break,
            }
        }
        p
    }

    // Lookups come before inserts throughout: most events name a path already seen, and an
    // insert would allocate its key.
    fn note_dirs(&mut self, path: &str) {
        let path = self.origin(path);
        let dirs = &mut self.dirs;
        new_ancestors(&path, |d| !dirs.contains(d) && dirs.insert(d.to_string()));
    }

    /// `path` is a directory that existed (or that the trace made), and so are those above.
    fn is_dir(&mut self, path: &str) {
        let origin = self.origin(path);
        if !self.dirs.contains(origin.as_ref()) {
            let origin = origin.into_owned();
            self.dirs.insert(origin);
        }
        self.note_dirs(path);
    }

    /// Notes the directories above `path`, which a call failed to find, in `dir_hints`:
    /// those the trace has not removed by now (those it has are not the ones setup makes).
    fn note_dir_hints(&mut self, path: &str) {
        let path = self.origin(path);
        let (hints, removed) = (&mut self.dir_hints, &self.removed);
        // Removals only grow, so an ancestor already noted had its own ancestors noted or
        // skipped then as they would be now: the walk stops there.
        new_ancestors(&path, |d| {
            !hints.contains(d) && (removed.contains(d) || hints.insert(d.to_string()))
        });
    }

    fn removes(&mut self, path: &str) {
        let origin = self.origin(path);
        if !self.removed.contains(origin.as_ref()) {
            self.removed.insert(origin.into_owned());
        }
    }

    /// The trace reads `start..end` of `path` (an empty range: it only needs it to exist).
    fn needs(&mut self, path: &str, start: u64, end: u64) {
        let origin = self.origin(path);
        let path = origin.as_ref();
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

    fn names_task(&mut self, task: &str) {
        if self.tasks.len() < MAX_TASKS && !self.tasks.contains(task) {
            self.tasks.insert(task.to_string());
        }
    }

    fn creates(&mut self, path: &str) {
        let origin = self.origin(path);
        let path = origin.as_ref();
        // The hash set first: a trace writes mostly files it made, and the ordered map's
        // string comparisons cost more.
        if !self.created.contains(path) && !self.files.contains_key(path) {
            self.created.insert(path.to_string());
            self.note_dirs(path);
        }
    }

    /// Notes what one event needs to exist, and where its fd's offset moves.
    // Long: one arm per op that creates, reads or removes a file: together they decide which
    // files must exist before the trace starts.
    fn visit(&mut self, pos: &mut HashMap<(u32, i64), u64>, ev: &Event) {
        if ev.ret.is_some_and(|r| r < 0) {
            if let Some(path) = crate::replay::missing_name_path(ev) {
                self.note_dir_hints(path);
            }
            return;
        }
        // A path through a cycle of the trace's links fails its walk (`ELOOP`): it names
        // nothing to make.
        if !self.links.is_empty() && ev.op.walked_path().is_some_and(|p| self.loops(p)) {
            return;
        }
        let done = ev.ret.map(|r| r.max(0) as u64);
        match &ev.op {
            Op::Open { path, flags } => {
                // An open follows a link at the end (a creating one too, to the file it
                // makes or finds).
                let path = self.through_links(path, !(flags.path && flags.nofollow));
                if flags.directory {
                    self.is_dir(&path);
                } else if flags.create || flags.truncate {
                    self.creates(&path);
                } else {
                    self.needs(&path, 0, 0);
                }
                if let Some(fd) = ev.ret {
                    pos.insert((ev.fd_table(), fd), 0);
                }
            }
            Op::Read { fd, path, off, len } => {
                let p = pos.entry((ev.fd_table(), *fd)).or_insert(0);
                let at = off.unwrap_or(*p);
                let n = done.unwrap_or(*len);
                // A read that returned nothing hit the end: it says nothing of the size.
                if n > 0 {
                    self.needs(path, at, at.saturating_add(n));
                }
                *p = at.saturating_add(n);
            }
            Op::Pread { path, off, len, .. } => {
                let n = done.unwrap_or(*len);
                if n > 0 {
                    self.needs(path, *off, off.saturating_add(n));
                }
            }
            Op::Write {
                fd, path, off, len, ..
            } => {
                let p = pos.entry((ev.fd_table(), *fd)).or_insert(0);
                *p = off.unwrap_or(*p).saturating_add(done.unwrap_or(*len));
                self.creates(path);
            }
            Op::Pwrite { path, .. }
            | Op::Truncate { path, .. }
            | Op::Fallocate { path, .. }
            | Op::Mknod { path } => self.creates(path),
            // A store past a mapped file's end faults: a file the trace did not make was at
            // least as long as the range taken as stored (made so, its bytes unwritten).
            Op::MappedWrite { path, off, len, .. } => {
                let end = off.saturating_add(*len);
                self.needs(path, end, end)
            }
            Op::Symlink { path, target } => {
                self.creates(path);
                if self.links.len() < MAX_LINKS && !self.links.contains_key(path) {
                    self.links.insert(path.clone(), target.clone());
                }
            }
            // A stat (and chmod) follows a link at the end: what it names existed.
            Op::Stat { path }
            | Op::Setattr {
                path,
                nofollow: false,
            } => {
                let path = self.through_links(path, true);
                self.needs(&path, 0, 0)
            }
            Op::Setattr {
                path,
                nofollow: true,
            } => self.needs(path, 0, 0),
            Op::Lstat { path } => self.needs(path, 0, 0),
            Op::Unlink { path } => {
                self.needs(path, 0, 0);
                self.removes(path);
            }
            // A directory renamed: what is later named below `to` was below `path`. A file
            // renamed (or linked): the trace makes `to`, and ops on it later find that file,
            // so setup must not make one first (it would be a file the trace never had).
            Op::Rename { path, to } => {
                let from = self.origin(path).into_owned();
                let dir = self.dirs.contains(&from) || self.made.contains(&from);
                if dir && self.renamed_dirs.len() < MAX_DIR_RENAMES {
                    self.note_dirs(to);
                    self.renamed_dirs.insert(to.clone(), from);
                } else {
                    self.needs(path, 0, 0);
                    self.removes(path);
                    self.creates(to);
                }
            }
            // `ln -L` names what the link leads to: that existed.
            Op::Link { path, to, follow } => {
                let path = self.through_links(path, *follow);
                self.needs(&path, 0, 0);
                self.creates(to);
            }
            Op::Mkdir { path } => {
                let origin = self.origin(path);
                if !self.dirs.contains(origin.as_ref()) {
                    self.made.insert(origin.into_owned());
                }
                self.note_dirs(path);
            }
            Op::Rmdir { path } => {
                self.is_dir(path);
                self.removes(path);
            }
            Op::Readdir { path } => {
                let path = self.through_links(path, true);
                self.is_dir(&path)
            }
            Op::Ndp {
                paths, task, sizes, ..
            } => {
                for p in paths {
                    self.note_dirs(p);
                }
                // Files a folded scan read: they existed, at the size it read.
                for (p, &size) in paths.iter().zip(sizes) {
                    self.needs(p, 0, size);
                }
                self.names_task(task);
            }
            Op::Isc { task, .. } => self.names_task(task),
            Op::Cisc { ops, .. } => ops.iter().for_each(|e| self.visit(pos, e)),
            _ => {}
        }
    }

    /// Reads the whole trace once.
    pub fn run(reader: impl BufRead + Send, strictness: Strictness) -> Result<Prescan, TraceError> {
        let mut s = Prescan::default();
        // Offsets of fds without explicit offsets, to size sequential reads.
        let mut pos: HashMap<(u32, i64), u64> = HashMap::new();
        TraceReader::new(reader, strictness)?.for_each_parsed_wide(
            |_, ev| -> Result<(), TraceError> {
                s.events += 1;
                s.visit(&mut pos, ev);
                Ok(())
            },
        )?;
        // A path that existed and had a name looked for below it is a directory (gcc stats
        // each include directory, then fails to find most headers in it).
        let hinted: Vec<String> = s
            .files
            .keys()
            .filter(|f| s.dir_hints.contains(f.as_str()))
            .cloned()
            .collect();
        for f in hinted {
            s.files.remove(&f);
            s.dirs.insert(f);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(events: &[&str]) -> Prescan {
        let mut text = String::from(r#"{"format":"csd-trace","version":1,"clock":"ns"}"#);
        for e in events {
            text.push('\n');
            text.push_str(e);
        }
        Prescan::run(text.as_bytes(), Strictness::Strict).expect("a valid trace")
    }

    #[test]
    fn a_renamed_file_is_the_traces_own_and_its_source_must_exist() {
        let s = scan(&[
            r#"{"t":1,"pid":1,"op":"open","path":"/w/a","flags":"O_WRONLY|O_CREAT","ret":3}"#,
            r#"{"t":2,"pid":1,"op":"close","fd":3,"ret":0}"#,
            r#"{"t":3,"pid":1,"op":"rename","path":"/w/a","to":"/w/b"}"#,
            r#"{"t":4,"pid":1,"op":"stat","path":"/w/b"}"#,
            r#"{"t":5,"pid":1,"op":"unlink","path":"/w/b"}"#,
            r#"{"t":6,"pid":1,"op":"rename","path":"/old/x","to":"/new/y"}"#,
            r#"{"t":7,"pid":1,"op":"stat","path":"/new/y"}"#,
        ]);
        let files: Vec<&str> = s.files.keys().map(String::as_str).collect();
        assert_eq!(
            files,
            ["/old/x"],
            "only the file the trace found is made first"
        );
        let dirs: Vec<&str> = s.dirs.iter().map(String::as_str).collect();
        assert_eq!(dirs, ["/new", "/old", "/w"]);
    }

    #[test]
    fn what_a_renamed_directory_holds_was_below_its_old_name() {
        // `mv src moved` (twice), then files read under the last name: they existed under
        // the first, and the new names are the trace's own. A directory the trace made and
        // renamed keeps everything below it the trace's own.
        let s = scan(&[
            r#"{"t":1,"pid":1,"op":"readdir","path":"/w/src"}"#,
            r#"{"t":2,"pid":1,"op":"rename","path":"/w/src","to":"/w/mid"}"#,
            r#"{"t":3,"pid":1,"op":"rename","path":"/w/mid","to":"/x/moved"}"#,
            r#"{"t":4,"pid":1,"op":"open","path":"/x/moved/lib.rs","flags":"O_RDONLY","ret":3}"#,
            r#"{"t":5,"pid":1,"op":"read","fd":3,"path":"/x/moved/lib.rs","len":100,"ret":100}"#,
            r#"{"t":6,"pid":1,"op":"readdir","path":"/x/moved/sub"}"#,
            r#"{"t":7,"pid":1,"op":"mkdir","path":"/t"}"#,
            r#"{"t":8,"pid":1,"op":"rename","path":"/t","to":"/u"}"#,
            r#"{"t":9,"pid":1,"op":"stat","path":"/u/f"}"#,
        ]);
        let files: Vec<(&str, u64)> = s.files.iter().map(|(f, n)| (f.as_str(), n.size)).collect();
        assert_eq!(files, [("/w/src/lib.rs", 100)]);
        let dirs: Vec<&str> = s.dirs.iter().map(String::as_str).collect();
        assert_eq!(dirs, ["/w", "/w/src", "/w/src/sub", "/x"]);
    }

    #[test]
    fn a_path_that_exists_and_misses_a_name_below_is_a_directory() {
        // gcc: a stat of an include directory, then headers not found in it; a name
        // missing below a path never seen to exist makes nothing.
        let s = scan(&[
            r#"{"t":1,"pid":1,"op":"stat","path":"/usr/local/include","ret":0}"#,
            r#"{"t":2,"pid":1,"op":"open","path":"/usr/local/include/stdio.h","flags":"O_RDONLY","ret":-1,"errno":"ENOENT"}"#,
            r#"{"t":3,"pid":1,"op":"stat","path":"/opt/none/x","ret":-2}"#,
            r#"{"t":4,"pid":1,"op":"stat","path":"/etc/hosts","ret":0}"#,
            r#"{"t":5,"pid":1,"op":"stat","path":"/etc/passwd","ret":-13}"#,
        ]);
        let files: Vec<&str> = s.files.keys().map(String::as_str).collect();
        assert_eq!(files, ["/etc/hosts"]);
        let dirs: Vec<&str> = s.dirs.iter().map(String::as_str).collect();
        assert_eq!(dirs, ["/etc", "/usr", "/usr/local", "/usr/local/include"]);
    }

    #[test]
    fn a_name_missing_below_a_removed_file_does_not_make_it_a_directory() {
        // `rm -rf w; cargo new w/hello`: rm unlinks the old `w/hello/Cargo.toml`, then cargo
        // looks for `Cargo.toml/Cargo.toml` before writing the new one. The old one was a
        // file; a hint before any removal still counts.
        let s = scan(&[
            r#"{"t":1,"pid":1,"op":"stat","path":"/w/a/b","ret":-2}"#,
            r#"{"t":2,"pid":1,"op":"stat","path":"/w/a","ret":0}"#,
            r#"{"t":3,"pid":1,"op":"unlink","path":"/w/hello/Cargo.toml"}"#,
            r#"{"t":4,"pid":1,"op":"rmdir","path":"/w/hello"}"#,
            r#"{"t":5,"pid":1,"op":"mkdir","path":"/w/hello"}"#,
            r#"{"t":6,"pid":1,"op":"stat","path":"/w/hello/Cargo.toml/Cargo.toml","ret":-2}"#,
        ]);
        let files: Vec<&str> = s.files.keys().map(String::as_str).collect();
        assert_eq!(files, ["/w/hello/Cargo.toml"]);
        let dirs: Vec<&str> = s.dirs.iter().map(String::as_str).collect();
        assert_eq!(dirs, ["/w", "/w/a", "/w/hello"]);
    }
}
