//! Streaming trace reading: one line at a time (memory does not grow with the trace), fds
//! resolved to paths, every problem reported with its line number.

use crate::format::{parse_event, Event, Header, Op, Parsed};
use foldhash::{HashMap, HashMapExt};
use std::collections::BTreeMap;
use std::io::{BufRead, Read};

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("line {line}: {problem}")]
    Malformed { line: u64, problem: String },
    #[error("line {line}: unknown op \"{op}\" (known: {known}; --lenient skips and counts unknown ops)", known = crate::format::OPS.join(" "))]
    UnknownOp { line: u64, op: String },
    #[error("reading the trace: {0}")]
    Io(#[from] std::io::Error),
}

/// What to do with an op this csdlab does not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strictness {
    /// An unknown op is an error.
    Strict,
    /// Unknown ops are skipped and counted ([`TraceReader::skipped`]).
    Lenient,
}

/// The longest line a trace may have. Real events are a few hundred bytes (an `ndp` op over
/// many files a few hundred KiB); a longer line is refused before it is held in memory.
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// Linux's PATH_MAX: the longest path a system call takes, terminating NUL included.
pub const PATH_MAX: usize = 4096;
/// Linux's NAME_MAX: the longest path component.
pub const NAME_MAX: usize = 255;
/// How much of an offending text an error message quotes.
const QUOTE_BYTES: usize = 200;

/// `text` cut to about [`QUOTE_BYTES`] (on a character boundary), saying how much was left
/// out: an error about a 10 MB line should not print the line.
pub fn quote(text: &str) -> String {
    quote_within(text, QUOTE_BYTES)
}

/// `text` cut to about `max` bytes, as [`quote`].
pub fn quote_within(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let cut = text.floor_char_boundary(max);
    format!("{}… ({} more bytes)", &text[..cut], text.len() - cut)
}

/// A whole problem message: long enough for a quoted value and what is said about it.
fn cut_problem(problem: &str) -> String {
    quote_within(problem, 2 * QUOTE_BYTES)
}

/// Reads one line of at most [`MAX_LINE_BYTES`] into `buf` (without its newline); `Ok(false)`
/// at the end of the input. A longer line is an error that says so; [`line_text`] checks
/// that the line is text.
pub(crate) fn read_bounded_line(
    input: &mut impl BufRead,
    buf: &mut Vec<u8>,
) -> Result<bool, String> {
    buf.clear();
    let n = input
        .by_ref()
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', buf)
        .map_err(|e| format!("reading the trace: {e}"))?;
    if n == 0 {
        return Ok(false);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if buf.len() > MAX_LINE_BYTES {
        return Err(format!(
            "the line is longer than {MAX_LINE_BYTES} bytes (is this a trace?)"
        ));
    }
    Ok(true)
}

/// A line read by [`read_bounded_line`] as text, or an error saying where it is not UTF-8.
fn line_text(buf: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(buf).map_err(|e| {
        format!(
            "the line is not UTF-8 text (invalid byte at column {}; is this a trace?)",
            e.valid_up_to() + 1
        )
    })
}

/// Checks a path as the kernel would: absolute, at most [`PATH_MAX`] bytes, components of at
/// most [`NAME_MAX`], no NUL.
pub fn check_path(path: &str) -> Result<(), String> {
    let short = |p: &str| quote_within(p, 80);
    if !path.starts_with('/') {
        return Err(format!(
            "path \"{}\" is relative: trace paths are absolute",
            short(path)
        ));
    }
    if path.len() >= PATH_MAX {
        return Err(format!(
            "path \"{}\" is {} bytes, over PATH_MAX ({PATH_MAX})",
            short(path),
            path.len()
        ));
    }
    // One pass over the bytes for both checks: this runs for every path of every event.
    let mut component = 0..0;
    for (i, &b) in path.as_bytes().iter().enumerate() {
        match b {
            0 => return Err(format!("path \"{}\" contains a NUL byte", short(path))),
            b'/' => component = i + 1..i + 1,
            _ => component.end = i + 1,
        }
        if component.len() > NAME_MAX {
            // A NUL anywhere is the first thing wrong with a path.
            if path.as_bytes()[i..].contains(&0) {
                return Err(format!("path \"{}\" contains a NUL byte", short(path)));
            }
            let rest = &path[component.start..];
            let c = &rest[..rest.find('/').unwrap_or(rest.len())];
            return Err(format!(
                "path component \"{}\" is {} bytes, over NAME_MAX ({NAME_MAX})",
                short(c),
                c.len()
            ));
        }
    }
    Ok(())
}

/// Checks every path an event names, with [`check_path`] (no allocation: this runs for every
/// event of a replay).
fn check_event_paths(op: &Op) -> Result<(), String> {
    let one = match op {
        Op::Open { path, .. }
        | Op::Close { path, .. }
        | Op::Read { path, .. }
        | Op::Write { path, .. }
        | Op::Pread { path, .. }
        | Op::Pwrite { path, .. }
        | Op::Fsync { path, .. }
        | Op::Fdatasync { path, .. }
        | Op::Mkdir { path }
        | Op::Rmdir { path }
        | Op::Unlink { path }
        | Op::Stat { path }
        | Op::Truncate { path, .. } => path,
        Op::Rename { path, to } => return check_path(path).and_then(|()| check_path(to)),
        Op::Ndp { paths, .. } => return paths.iter().try_for_each(|p| check_path(p)),
        Op::Isc { files, .. } => return files.iter().try_for_each(|f| check_path(&f.path)),
        Op::Cisc { ops, .. } => return ops.iter().try_for_each(|e| check_event_paths(&e.op)),
        Op::Sync | Op::Bread { .. } | Op::Bwrite { .. } => return Ok(()),
    };
    check_path(one)
}

/// Reads a trace line by line.
pub struct TraceReader<R> {
    input: R,
    header: Header,
    line: u64,
    buf: Vec<u8>,
    strictness: Strictness,
    /// Open fds per pid → path.
    fds: HashMap<(u32, i64), String>,
    skipped: BTreeMap<String, u64>,
    done: bool,
}

impl<R: BufRead> TraceReader<R> {
    /// Reads and checks the header.
    pub fn new(mut input: R, strictness: Strictness) -> Result<TraceReader<R>, TraceError> {
        let mut buf = Vec::new();
        let malformed = |problem: String| TraceError::Malformed {
            line: 1,
            problem: cut_problem(&problem),
        };
        if !read_bounded_line(&mut input, &mut buf).map_err(malformed)? {
            return Err(malformed(
                "the trace is empty (expected a header line)".into(),
            ));
        }
        let text = line_text(&buf).map_err(malformed)?;
        let header = Header::parse(text.trim_end()).map_err(malformed)?;
        Ok(TraceReader {
            input,
            header,
            line: 1,
            buf,
            strictness,
            fds: HashMap::new(),
            skipped: BTreeMap::new(),
            done: false,
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Unknown ops skipped so far (lenient mode), by name.
    pub fn skipped(&self) -> &BTreeMap<String, u64> {
        &self.skipped
    }

    /// The line number of the last line read.
    pub fn line(&self) -> u64 {
        self.line
    }

    fn malformed(&self, problem: String) -> TraceError {
        TraceError::Malformed {
            line: self.line,
            problem: cut_problem(&problem),
        }
    }

    /// Fills in the path of an fd op and keeps the fd table current.
    fn resolve(&mut self, ev: &mut Event) -> Result<(), TraceError> {
        if let Op::Cisc { ops, .. } = &mut ev.op {
            return ops.iter_mut().try_for_each(|e| self.resolve(e));
        }
        if let Op::Open { path, .. } = &ev.op {
            if let Some(fd) = ev.ret.filter(|&r| r >= 0) {
                self.fds.insert((ev.pid, fd), path.clone());
            }
            return Ok(());
        }
        let Some(fd) = ev.op.fd() else {
            return Ok(());
        };
        let key = (ev.pid, fd);
        let path = match &mut ev.op {
            Op::Close { path, .. }
            | Op::Read { path, .. }
            | Op::Write { path, .. }
            | Op::Pread { path, .. }
            | Op::Pwrite { path, .. }
            | Op::Fsync { path, .. }
            | Op::Fdatasync { path, .. } => path,
            _ => unreachable!("fd ops only"),
        };
        // The fd table's path is cloned only into an event that names none.
        let known = self.fds.get(&key);
        if path.is_empty() {
            match known {
                Some(p) => *path = p.clone(),
                None => {
                    return Err(self.malformed(format!(
                        "fd {fd} of pid {} is not open (no open returned it and the event names no path)",
                        ev.pid
                    )))
                }
            }
        } else if known.map(String::as_str) != Some(path.as_str()) {
            // Recorders that know each fd's path (strace -y) need no open event.
            self.fds.insert(key, path.clone());
        }
        if matches!(ev.op, Op::Close { .. }) {
            self.fds.remove(&key);
        }
        Ok(())
    }

    /// Checks the event's paths (see [`check_path`]); what the replay would refuse, `trace
    /// check` refuses too.
    fn check_paths(&self, ev: &Event) -> Result<(), TraceError> {
        check_event_paths(&ev.op).map_err(|p| self.malformed(p))
    }

    fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
        loop {
            self.line += 1;
            match read_bounded_line(&mut self.input, &mut self.buf) {
                Ok(true) => {}
                Ok(false) => {
                    self.line -= 1;
                    return Ok(None);
                }
                Err(problem) => return Err(self.malformed(problem)),
            }
            let text = match line_text(&self.buf) {
                Ok(text) => text.trim(),
                Err(problem) => return Err(self.malformed(problem)),
            };
            if text.is_empty() {
                continue;
            }
            match parse_event(text) {
                Ok(Parsed::Event(mut ev)) => {
                    self.resolve(&mut ev)?;
                    self.check_paths(&ev)?;
                    return Ok(Some(ev));
                }
                Ok(Parsed::UnknownOp(op)) => match self.strictness {
                    Strictness::Strict => {
                        return Err(TraceError::UnknownOp {
                            line: self.line,
                            op,
                        })
                    }
                    Strictness::Lenient => *self.skipped.entry(op).or_default() += 1,
                },
                Err(problem) => return Err(self.malformed(problem)),
            }
        }
    }
}

/// Events per batch handed from the parsing thread to the consumer.
const BATCH: usize = 1024;
/// Batches in flight: the parser runs at most this far ahead, so memory stays flat.
const DEPTH: usize = 4;

impl<R: BufRead + Send> TraceReader<R> {
    /// Hands every event to `apply`, in order, while a second thread parses ahead: parsing
    /// is a third of a replay's work and runs beside the rest. Batches go back to the parsing
    /// thread to be dropped there, so every event's strings are allocated and freed by one
    /// thread (freeing another thread's allocations made the pipeline slower than none).
    /// Stops at the first error, the parser's or `apply`'s. Returns the unknown ops skipped
    /// (lenient mode), by name.
    pub fn for_each_parsed<E: From<TraceError>>(
        self,
        mut apply: impl FnMut(&Event) -> Result<(), E>,
    ) -> Result<BTreeMap<String, u64>, E> {
        type Batch = Vec<Result<Event, TraceError>>;
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(DEPTH);
            let (back, returned) = std::sync::mpsc::channel::<Batch>();
            let parser = s.spawn(move || {
                let mut reader = self;
                let mut batch: Batch = Vec::with_capacity(BATCH);
                loop {
                    let ev = reader.next();
                    let end = ev.as_ref().is_none_or(Result::is_err);
                    batch.extend(ev);
                    if batch.len() == BATCH || end {
                        if tx.send(batch).is_err() || end {
                            // Done, or the consumer hung up (it failed).
                            break;
                        }
                        batch = match returned.try_recv() {
                            Ok(mut old) => {
                                old.clear();
                                old
                            }
                            Err(_) => Vec::with_capacity(BATCH),
                        };
                    }
                }
                drop(tx);
                // Drop what the consumer hands back until it is done.
                while returned.recv().is_ok() {}
                reader.skipped
            });
            let applied = (|| {
                for batch in rx.iter() {
                    for ev in &batch {
                        match ev {
                            Ok(ev) => apply(ev)?,
                            Err(e) => return Err(E::from(clone_error(e))),
                        }
                    }
                    let _ = back.send(batch);
                }
                Ok(())
            })();
            // The parser stops at its next send once the receiver is gone.
            drop(rx);
            drop(back);
            let skipped = parser
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            applied.map(|()| skipped)
        })
    }
}

/// A parse error handed over from the parsing thread (`io::Error` is not `Clone`).
fn clone_error(e: &TraceError) -> TraceError {
    match e {
        TraceError::Malformed { line, problem } => TraceError::Malformed {
            line: *line,
            problem: problem.clone(),
        },
        TraceError::UnknownOp { line, op } => TraceError::UnknownOp {
            line: *line,
            op: op.clone(),
        },
        TraceError::Io(io) => TraceError::Io(std::io::Error::new(io.kind(), io.to_string())),
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<Event, TraceError>;

    /// The next event; after an error, `None`.
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_event() {
            Ok(Some(ev)) => Some(Ok(ev)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The checks `check_path` makes in one pass, written the obvious way.
    fn check_path_reference(path: &str) -> Result<(), String> {
        let short = |p: &str| quote_within(p, 80);
        if !path.starts_with('/') || path.len() >= PATH_MAX {
            // Checked before the byte pass, the same way.
            return check_path(path);
        }
        if path.contains('\0') {
            return Err(format!("path \"{}\" contains a NUL byte", short(path)));
        }
        if let Some(c) = path.split('/').find(|c| c.len() > NAME_MAX) {
            return Err(format!(
                "path component \"{}\" is {} bytes, over NAME_MAX ({NAME_MAX})",
                short(c),
                c.len()
            ));
        }
        Ok(())
    }

    /// Paths of runs of one byte (`/`, `a`, NUL, `é`), long enough to cross NAME_MAX.
    fn path() -> impl Strategy<Value = String> {
        let run = (prop::sample::select(vec!["/", "a", "\0", "é"]), 1usize..300);
        prop::collection::vec(run, 0..8)
            .prop_map(|runs| runs.iter().map(|(s, n)| s.repeat(*n)).collect())
    }

    proptest! {
        #[test]
        fn check_path_agrees_with_its_reference(p in path()) {
            prop_assert_eq!(check_path(&p), check_path_reference(&p));
        }
    }
}
