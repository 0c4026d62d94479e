//! Streaming trace reading: one line at a time (memory does not grow with the trace), fds
//! resolved to paths, every problem reported with its line number.

use crate::format::{parse_event, Event, Header, Op, Parsed};
use foldhash::HashMap;
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
    /// A [`feed`] stopped on a consumer's word ([`FeedStop::stop`]) before the trace ended.
    #[error("stopped before the end of the trace: another consumer of the same reading failed")]
    Stopped,
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

impl Strictness {
    /// What a `--lenient` flag asks for.
    pub fn lenient_if(lenient: bool) -> Strictness {
        if lenient {
            Strictness::Lenient
        } else {
            Strictness::Strict
        }
    }
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
    append_bounded_line(input, buf)
}

/// [`read_bounded_line`], appending the line to `text` (a batch of lines read back to back).
fn append_bounded_line(input: &mut impl BufRead, text: &mut Vec<u8>) -> Result<bool, String> {
    let start = text.len();
    let n = input
        .by_ref()
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', text)
        .map_err(|e| format!("reading the trace: {e}"))?;
    if n == 0 {
        return Ok(false);
    }
    if text.last() == Some(&b'\n') {
        text.pop();
    } else if text.len() - start > MAX_LINE_BYTES {
        text.truncate(start);
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
/// A symbolic link's target: 1 to PATH_MAX − 1 bytes with no NUL, relative or absolute (it is
/// kept, not walked).
fn check_link_target(target: &str) -> Result<(), String> {
    if target.is_empty() {
        return Err("a symlink's target is empty".into());
    }
    if target.len() >= PATH_MAX {
        return Err(format!(
            "a symlink's target is {} bytes, over PATH_MAX ({PATH_MAX})",
            target.len()
        ));
    }
    if target.contains('\0') {
        return Err("a symlink's target contains a NUL byte".into());
    }
    Ok(())
}

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
    check_paths(op, false)
}

/// [`check_event_paths`] before the fds are resolved: an fd op's path the line leaves empty
/// is left out (the reader fills it from the table, which holds only paths already checked).
/// Run by each parser of [`TraceReader::for_each_parsed_wide`], so the consumer, which
/// must take every line in turn, has less to do.
fn check_named_paths(op: &Op) -> Result<(), String> {
    check_paths(op, true)
}

fn check_paths(op: &Op, unresolved: bool) -> Result<(), String> {
    if unresolved && op.fd_path().is_some_and(|(_, path)| path.is_empty()) {
        return Ok(());
    }
    let one = match op {
        Op::Open { path, .. }
        | Op::Close { path, .. }
        | Op::Read { path, .. }
        | Op::Write { path, .. }
        | Op::Pread { path, .. }
        | Op::Pwrite { path, .. }
        | Op::Fsync { path, .. }
        | Op::Fdatasync { path, .. }
        | Op::Fstat { path, .. }
        | Op::Fallocate { path, .. }
        | Op::SyncFileRange { path, .. }
        | Op::Mkdir { path }
        | Op::Rmdir { path }
        | Op::Unlink { path }
        | Op::Stat { path }
        | Op::Lstat { path }
        | Op::Readdir { path }
        | Op::Setattr { path, .. }
        | Op::Truncate { path, .. }
        | Op::MappedWrite { path, .. }
        | Op::Mknod { path } => path,
        Op::Rename { path, to } | Op::Link { path, to, .. } => {
            return check_path(path).and_then(|()| check_path(to))
        }
        Op::Symlink { path, target } => {
            return check_path(path).and_then(|()| check_link_target(target))
        }
        Op::Ndp { paths, .. } => return paths.iter().try_for_each(|p| check_path(p)),
        Op::Isc { files, .. } => return files.iter().try_for_each(|f| check_path(&f.path)),
        Op::Cisc { ops, .. } => return ops.iter().try_for_each(|e| check_paths(&e.op, unresolved)),
        Op::Sync | Op::Bread { .. } | Op::Bwrite { .. } => return Ok(()),
    };
    check_path(one)
}

/// Open fds per fd table ([`Event::fd_table`]) → path: what fills in the path of an event
/// that names only its fd.
#[derive(Default)]
struct FdTable(HashMap<(u32, i64), String>);

impl FdTable {
    /// Fills in the path of an fd op and keeps the table current.
    fn resolve(&mut self, ev: &mut Event) -> Result<(), String> {
        if let Op::Cisc { ops, .. } = &mut ev.op {
            return ops.iter_mut().try_for_each(|e| self.resolve(e));
        }
        if let Op::Open { path, .. } = &ev.op {
            if let Some(fd) = ev.ret.filter(|&r| r >= 0) {
                self.0.insert((ev.fd_table(), fd), path.clone());
            }
            return Ok(());
        }
        let closes = matches!(ev.op, Op::Close { .. });
        let table = ev.fd_table();
        let Some((fd, path)) = ev.op.fd_path_mut() else {
            return Ok(());
        };
        let key = (table, fd);
        // The fd table's path is cloned only into an event that names none, and a close
        // takes it.
        if path.is_empty() && closes {
            if let Some(p) = self.0.remove(&key) {
                *path = p;
                return Ok(());
            }
        }
        let known = self.0.get(&key);
        if path.is_empty() {
            match known {
                Some(p) => *path = p.clone(),
                None => {
                    return Err(format!(
                        "fd {fd} of pid {table} is not open (no open returned it and the event names no path)"
                    ))
                }
            }
        } else if known.map(String::as_str) != Some(path.as_str()) {
            // Recorders that know each fd's path (strace -y) need no open event.
            self.0.insert(key, path.clone());
        }
        if closes {
            self.0.remove(&key);
        }
        Ok(())
    }
}

/// Reads a trace line by line.
pub struct TraceReader<R> {
    input: R,
    header: Header,
    line: u64,
    buf: Vec<u8>,
    strictness: Strictness,
    fds: FdTable,
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
            fds: FdTable::default(),
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
        self.fds.resolve(ev).map_err(|p| self.malformed(p))
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

/// Lines (or events) per batch handed from one thread to the next...
const BATCH: usize = 1024;
/// ...or fewer, once their text passes this: lines may be up to [`MAX_LINE_BYTES`] long, and
/// memory must stay flat whatever the trace holds.
const BATCH_BYTES: usize = 256 << 10;
/// Batches in flight per parsing thread: parsing runs at most this far ahead, so memory
/// stays flat.
const DEPTH: usize = 4;
/// The most parsing threads [`TraceReader::for_each_parsed_wide`] starts.
const MAX_PARSERS: usize = 4;

/// Lines read back to back, for one parser.
#[derive(Default)]
struct Lines {
    /// The number of the first line.
    first: u64,
    text: Vec<u8>,
    /// Where each line ends in `text`.
    ends: Vec<usize>,
    /// Why reading stopped after the last line, if it failed.
    failed: Option<String>,
}

/// One line's outcome, from a parser.
struct ParsedLine {
    line: u64,
    /// What it held, or why it is malformed.
    parsed: Result<Parsed, String>,
    /// Whether the paths it names are valid ([`check_named_paths`]).
    paths: Result<(), String>,
}

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
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Fed>(DEPTH);
            let (back, returned) = std::sync::mpsc::channel::<Fed>();
            s.spawn(move || {
                let mut reader = self;
                send_batches(&mut reader, |fed| {
                    // Done, or the consumer hung up (it failed).
                    let last = fed.end.is_some();
                    if tx.send(fed).is_err() || last {
                        return None;
                    }
                    Some(returned.try_recv().map_or_else(
                        |_| Vec::with_capacity(BATCH),
                        |mut old| {
                            old.events.clear();
                            old.events
                        },
                    ))
                });
                drop(tx);
                // Drop what the consumer hands back until it is done.
                while returned.recv().is_ok() {}
            });
            let applied = (|| {
                for mut batch in rx.iter() {
                    for ev in &batch.events {
                        apply(ev)?;
                    }
                    if let Some(end) = batch.end.take() {
                        return end.map_err(E::from);
                    }
                    let _ = back.send(batch);
                }
                Err(E::from(stopped_early()))
            })();
            // The parser stops at its next send once the receiver is gone.
            drop(rx);
            drop(back);
            applied
        })
    }

    /// [`TraceReader::for_each_parsed`] for a consumer that does little (a prescan), on
    /// every core: parsing is nearly all of such a pass, and one parsing thread left the
    /// other cores idle. One thread reads lines into batches; parsers, one per core (at most
    /// `MAX_PARSERS`, 4), take the batches in turn; the consumer takes them back in the same
    /// turn, resolves fds (in trace order, as it must) and applies. A consumer that needs a
    /// core of its own (a replay) is slower this way: the parsers take turns on its core,
    /// and the fds are resolved on it. `apply` is given each event's line number too.
    pub fn for_each_parsed_wide<E: From<TraceError>>(
        self,
        mut apply: impl FnMut(u64, &Event) -> Result<(), E>,
    ) -> Result<BTreeMap<String, u64>, E> {
        use std::sync::mpsc::{channel, sync_channel, Receiver, SyncSender};
        let parsers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, MAX_PARSERS);
        let TraceReader {
            mut input,
            line,
            strictness,
            mut fds,
            mut skipped,
            done,
            ..
        } = self;
        std::thread::scope(|s| {
            let mut to_parsers: Vec<SyncSender<Lines>> = Vec::new();
            let mut from_parsers: Vec<Receiver<Vec<ParsedLine>>> = Vec::new();
            let mut back: Vec<std::sync::mpsc::Sender<Vec<ParsedLine>>> = Vec::new();
            let (recycle, recycled) = channel::<Lines>();
            for _ in 0..parsers {
                let (tx_lines, rx_lines) = sync_channel::<Lines>(DEPTH);
                let (tx_parsed, rx_parsed) = sync_channel::<Vec<ParsedLine>>(DEPTH);
                let (tx_back, rx_back) = channel::<Vec<ParsedLine>>();
                let recycle = recycle.clone();
                s.spawn(move || parse_batches(rx_lines, tx_parsed, rx_back, recycle));
                to_parsers.push(tx_lines);
                from_parsers.push(rx_parsed);
                back.push(tx_back);
            }
            drop(recycle);
            // The reader: batches of lines to the parsers in turn.
            s.spawn(move || read_lines(&mut input, line + 1, done, &to_parsers, &recycled));
            let applied = (|| {
                for turn in (0..parsers).cycle() {
                    let Ok(mut batch) = from_parsers[turn].recv() else {
                        break;
                    };
                    for parsed in &mut batch {
                        let line = parsed.line;
                        let event = take_parsed(parsed, strictness, &mut fds, &mut skipped)?;
                        if let Some(ev) = event {
                            apply(line, ev)?;
                        }
                    }
                    let _ = back[turn].send(batch);
                }
                Ok(())
            })();
            // The parsers stop at their next send once the consumer is gone, and the reader
            // at its next send to a parser that stopped.
            drop(from_parsers);
            drop(back);
            applied.map(|()| skipped)
        })
    }
}

/// The reading thread of [`TraceReader::for_each_parsed_wide`]: batches of lines, numbered
/// from `next`, to the parsers in turn, until the input ends or fails, or the consumer stops
/// (its parsers then stop taking batches).
fn read_lines(
    input: &mut impl BufRead,
    mut next: u64,
    mut ended: bool,
    to_parsers: &[std::sync::mpsc::SyncSender<Lines>],
    recycled: &std::sync::mpsc::Receiver<Lines>,
) {
    for to in to_parsers.iter().cycle() {
        if ended {
            break;
        }
        let mut batch = recycled.try_recv().unwrap_or_default();
        batch.first = next;
        batch.text.clear();
        batch.ends.clear();
        batch.failed = None;
        while !ended && batch.ends.len() < BATCH && batch.text.len() < BATCH_BYTES {
            match append_bounded_line(input, &mut batch.text) {
                Ok(true) => batch.ends.push(batch.text.len()),
                Ok(false) => ended = true,
                Err(problem) => {
                    batch.failed = Some(problem);
                    ended = true;
                }
            }
        }
        next += batch.ends.len() as u64;
        if (batch.ends.is_empty() && batch.failed.is_none()) || to.send(batch).is_err() {
            break;
        }
    }
}

/// One parsed line, in trace order: its event with the fd resolved and the paths checked
/// (`None` for an unknown op skipped), or the line's error. The fd is resolved before the
/// paths' verdict counts, as the one-thread reader checks them.
fn take_parsed<'e>(
    parsed: &'e mut ParsedLine,
    strictness: Strictness,
    fds: &mut FdTable,
    skipped: &mut BTreeMap<String, u64>,
) -> Result<Option<&'e Event>, TraceError> {
    let line = parsed.line;
    let malformed = |problem: String| TraceError::Malformed {
        line,
        problem: cut_problem(&problem),
    };
    match &mut parsed.parsed {
        Ok(Parsed::Event(ev)) => {
            fds.resolve(ev).map_err(malformed)?;
            parsed.paths.clone().map_err(malformed)?;
            Ok(Some(ev))
        }
        Ok(Parsed::UnknownOp(op)) => match strictness {
            Strictness::Strict => Err(TraceError::UnknownOp {
                line,
                op: op.clone(),
            }),
            Strictness::Lenient => {
                *skipped.entry(op.clone()).or_default() += 1;
                Ok(None)
            }
        },
        Err(problem) => Err(malformed(problem.clone())),
    }
}

/// A batch of events that [`feed`] hands to every consumer: the events, then, in the last
/// batch, how the reading ended.
struct Fed {
    events: Vec<Event>,
    end: Option<Result<BTreeMap<String, u64>, TraceError>>,
}

/// One consumer's share of a [`feed`]: every event of the trace, in order.
pub struct Feed {
    batches: std::sync::mpsc::Receiver<std::sync::Arc<Fed>>,
    back: std::sync::mpsc::Sender<std::sync::Arc<Fed>>,
    stop: FeedStop,
}

/// Stops a [`feed`] for every consumer: the reading ends at the next batch, and each
/// consumer's [`Feed::for_each`] returns [`TraceError::Stopped`]. A consumer that fails when
/// the others' work is wasted without it (a design of `csd replay` that cannot be built)
/// says so at once, rather than after the others have read the whole trace.
#[derive(Clone)]
pub struct FeedStop(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl FeedStop {
    pub fn stop(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn stopped(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Feed {
    /// A handle that stops the whole feed (see [`FeedStop`]), kept past the feed itself.
    pub fn stopper(&self) -> FeedStop {
        self.stop.clone()
    }

    /// Hands every event to `apply`, in order; then the unknown ops skipped (lenient mode),
    /// or the first error in the trace, after the events before it.
    pub fn for_each(
        self,
        mut apply: impl FnMut(&Event),
    ) -> Result<BTreeMap<String, u64>, TraceError> {
        for batch in self.batches.iter() {
            batch.events.iter().for_each(&mut apply);
            let end = batch.end.as_ref().map(|end| match end {
                Ok(skipped) => Ok(skipped.clone()),
                Err(e) => Err(clone_error(e)),
            });
            // Back to the parsing thread, which allocated it, to be freed there.
            let _ = self.back.send(batch);
            if let Some(end) = end {
                return end;
            }
        }
        Err(stopped_early())
    }
}

/// What a consumer is told when the parsing thread ended without saying how the reading did
/// (it panicked: the scope then re-raises the panic).
fn stopped_early() -> TraceError {
    TraceError::Io(std::io::Error::other(
        "the trace's parsing thread stopped early",
    ))
}

/// Reads `reader` to its end in batches for another thread: at most [`BATCH`] events or
/// [`BATCH_BYTES`] of their lines, the last one saying how the reading ended. `send` takes
/// each and returns the (empty) buffer for the next, or `None` to stop.
fn send_batches<R: BufRead>(
    reader: &mut TraceReader<R>,
    mut send: impl FnMut(Fed) -> Option<Vec<Event>>,
) {
    let mut events = Vec::with_capacity(BATCH);
    let mut text = 0;
    loop {
        let (ev, end) = match reader.next() {
            Some(Ok(ev)) => (Some(ev), None),
            Some(Err(e)) => (None, Some(Err(e))),
            None => (None, Some(Ok(reader.skipped.clone()))),
        };
        events.extend(ev);
        text += reader.buf.len();
        if events.len() == BATCH || text >= BATCH_BYTES || end.is_some() {
            text = 0;
            match send(Fed { events, end }) {
                Some(next) => events = next,
                None => return,
            }
        }
    }
}

/// Parses a trace once for `n` consumers on threads of their own: `consume(i, feed)` runs
/// for each `i` at once, all taking the same events from one parsing thread, while `main`
/// runs on the calling thread (to hear what the consumers report). Returns what each
/// consumer returned, in order.
///
/// Replaying one trace under several designs parsed it once per design, and the parse was
/// a third of each replay's work. Consumers move in step, each at most `DEPTH` (4) batches
/// behind the parser, so memory stays flat; one that returns without draining its feed (a
/// design that could not be built) is left out of the rest. A header that does not parse
/// is each consumer's error, as a bad line is.
pub fn feed<R: BufRead + Send, T: Send>(
    input: R,
    strictness: Strictness,
    n: usize,
    consume: impl Fn(usize, Feed) -> T + Sync,
    main: impl FnOnce(),
) -> Vec<T> {
    use std::sync::mpsc::{channel, sync_channel};
    use std::sync::Arc;
    let (back, returned) = channel::<Arc<Fed>>();
    let stop = FeedStop(Arc::default());
    let mut to = Vec::new();
    let mut feeds = Vec::new();
    for _ in 0..n {
        let (tx, rx) = sync_channel::<Arc<Fed>>(DEPTH);
        to.push(Some(tx));
        feeds.push(Feed {
            batches: rx,
            back: back.clone(),
            stop: stop.clone(),
        });
    }
    drop(back);
    std::thread::scope(|s| {
        s.spawn(move || parse_for_feed(input, strictness, to, returned, stop));
        let consume = &consume;
        let handles: Vec<_> = feeds
            .into_iter()
            .enumerate()
            .map(|(i, feed)| s.spawn(move || consume(i, feed)))
            .collect();
        main();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

/// The parsing thread of [`feed`]: batches of events to every consumer still taking them,
/// then the batches they hand back, freed here where they were made.
fn parse_for_feed<R: BufRead>(
    input: R,
    strictness: Strictness,
    mut to: Vec<Option<std::sync::mpsc::SyncSender<std::sync::Arc<Fed>>>>,
    returned: std::sync::mpsc::Receiver<std::sync::Arc<Fed>>,
    stop: FeedStop,
) {
    // Sends to every consumer still taking batches; false once none is.
    let mut send = |fed: Fed| {
        let fed = std::sync::Arc::new(fed);
        for slot in to.iter_mut() {
            if slot
                .as_ref()
                .is_some_and(|tx| tx.send(fed.clone()).is_err())
            {
                *slot = None;
            }
        }
        while returned.try_recv().is_ok() {}
        to.iter().any(Option::is_some)
    };
    match TraceReader::new(input, strictness) {
        Err(e) => {
            send(Fed {
                events: Vec::new(),
                end: Some(Err(e)),
            });
        }
        Ok(mut reader) => send_batches(&mut reader, |mut fed| {
            if stop.stopped() {
                fed.events.clear();
                fed.end = Some(Err(TraceError::Stopped));
            }
            let last = fed.end.is_some();
            (send(fed) && !last).then(|| Vec::with_capacity(BATCH))
        }),
    }
    drop(to);
    // The consumers hang up as they finish; what they hand back until then is freed here.
    while returned.recv().is_ok() {}
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
        TraceError::Stopped => TraceError::Stopped,
    }
}

/// A parsing thread: parses the batches of lines it is given, in order, and drops the
/// batches of events the consumer hands back.
fn parse_batches(
    lines: std::sync::mpsc::Receiver<Lines>,
    parsed: std::sync::mpsc::SyncSender<Vec<ParsedLine>>,
    returned: std::sync::mpsc::Receiver<Vec<ParsedLine>>,
    recycle: std::sync::mpsc::Sender<Lines>,
) {
    for batch in lines.iter() {
        let mut out = returned.try_recv().unwrap_or_default();
        out.clear();
        let mut start = 0;
        for (i, &end) in batch.ends.iter().enumerate() {
            let line = batch.first + i as u64;
            let outcome = line_text(&batch.text[start..end]).and_then(|text| {
                let text = text.trim();
                (!text.is_empty()).then(|| parse_event(text)).transpose()
            });
            start = end;
            let parsed = match outcome {
                Ok(None) => continue,
                Ok(Some(p)) => Ok(p),
                Err(problem) => Err(problem),
            };
            let paths = match &parsed {
                Ok(Parsed::Event(ev)) => check_named_paths(&ev.op),
                _ => Ok(()),
            };
            out.push(ParsedLine {
                line,
                parsed,
                paths,
            });
        }
        if let Some(problem) = &batch.failed {
            out.push(ParsedLine {
                line: batch.first + batch.ends.len() as u64,
                parsed: Err(problem.clone()),
                paths: Ok(()),
            });
        }
        let _ = recycle.send(batch);
        if parsed.send(out).is_err() {
            break;
        }
    }
    drop(parsed);
    // Drop what the consumer hands back until it is done.
    while returned.recv().is_ok() {}
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

    /// What a read gives: the events handed over, then the skipped ops or the error.
    type Outcome = (Vec<Event>, Result<BTreeMap<String, u64>, String>);

    fn read_with(input: &[u8], strictness: Strictness, how: &str) -> Outcome {
        let reader = match TraceReader::new(input, strictness) {
            Ok(r) => r,
            Err(e) => return (Vec::new(), Err(e.to_string())),
        };
        let mut events = Vec::new();
        let end = match how {
            "iterator" => {
                let mut reader = reader;
                let mut failed = None;
                for ev in reader.by_ref() {
                    match ev {
                        Ok(ev) => events.push(ev),
                        Err(e) => failed = Some(e.to_string()),
                    }
                }
                failed.map_or_else(|| Ok(reader.skipped().clone()), Err)
            }
            "one parser" => reader
                .for_each_parsed(|ev| -> Result<(), TraceError> {
                    events.push(ev.clone());
                    Ok(())
                })
                .map_err(|e| e.to_string()),
            _ => reader
                .for_each_parsed_wide(|_, ev| -> Result<(), TraceError> {
                    events.push(ev.clone());
                    Ok(())
                })
                .map_err(|e| e.to_string()),
        };
        (events, end)
    }

    /// A trace of `lines` events, a blank line now and then, with `bad` in place of event `at`.
    fn trace_with(lines: usize, at: usize, bad: &[u8]) -> Vec<u8> {
        let mut t = br#"{"format":"csd-trace","version":1}"#.to_vec();
        t.push(b'\n');
        for i in 0..lines {
            let pid = (i / 4) % 3; // one pid per open, write, stat, close
            if i % 97 == 5 {
                t.push(b'\n');
            }
            let line = if i == at {
                bad.to_vec()
            } else {
                match i % 4 {
                    0 => format!(r#"{{"t":{i},"pid":{pid},"op":"open","path":"/d/f{i}","flags":"O_WRONLY|O_CREAT","ret":7}}"#),
                    1 => format!(r#"{{"t":{i},"pid":{pid},"op":"write","fd":7,"len":10}}"#),
                    2 => format!(r#"{{"t":{i},"pid":{pid},"op":"stat","path":"/d/f{i}","x":[1,2]}}"#),
                    _ => format!(r#"{{"t":{i},"pid":{pid},"op":"close","fd":7}}"#),
                }
                .into_bytes()
            };
            t.extend_from_slice(&line);
            t.push(b'\n');
        }
        t
    }

    #[test]
    fn every_way_of_reading_gives_the_same_events_and_the_same_first_error() {
        let long = vec![b' '; MAX_LINE_BYTES + 10];
        let bad: [&[u8]; 10] = [
            b"{\"t\":1,\"pid\":1,\"op\":\"stat\"",
            br#"{"t":1,"pid":9,"op":"frobnicate","path":"/x"}"#,
            br#"{"t":1,"pid":9,"op":"close","fd":12}"#,
            br#"{"t":1,"pid":1,"op":"stat","path":"relative"}"#,
            // An fd op that names its own (bad) path, and one that leaves it to the table.
            br#"{"t":1,"pid":9,"op":"write","fd":12,"path":"relative","len":1}"#,
            br#"{"t":1,"pid":9,"op":"write","fd":12,"len":1}"#,
            // A CISC op whose events fail both ways: the fd first, as one thread finds it.
            br#"{"t":1,"pid":9,"op":"cisc","pattern":"write-sync","ops":[{"t":1,"pid":9,"op":"write","fd":4,"path":"rel","len":1},{"t":1,"pid":9,"op":"fsync","fd":12}]}"#,
            b"{\"t\":1,\"pid\":1,\"op\":\"stat\",\"path\":\"/\xff\"}",
            &long,
            br#"{"t":1,"pid":1,"op":"stat","path":"/fine"}"#,
        ];
        // Around the batch boundaries of the parsing threads.
        for (lines, at) in [
            (0, 0),
            (5, 2),
            (1023, 1022),
            (1024, 1023),
            (1025, 1024),
            (5000, 2049),
            (5000, 4999),
            (9000, 8500),
        ] {
            for b in bad {
                let input = trace_with(lines, at, b);
                for strictness in [Strictness::Strict, Strictness::Lenient] {
                    let want = read_with(&input, strictness, "iterator");
                    for how in ["one parser", "wide"] {
                        let got = read_with(&input, strictness, how);
                        assert_eq!(
                            got.0.len(),
                            want.0.len(),
                            "{lines} lines, bad at {at}, {how}"
                        );
                        assert!(
                            got.0 == want.0,
                            "{lines} lines, bad at {at}, {how}: events differ"
                        );
                        assert_eq!(got.1, want.1, "{lines} lines, bad at {at}, {how}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_feed_hands_every_consumer_what_one_reader_gives_and_leaves_out_one_that_quits() {
        let long = vec![b' '; MAX_LINE_BYTES + 10];
        let bad: [&[u8]; 3] = [
            br#"{"t":1,"pid":9,"op":"close","fd":12}"#,
            &long,
            br#"{"t":1,"pid":1,"op":"stat","path":"/fine"}"#,
        ];
        for (lines, at) in [(0, 0), (1023, 1022), (3000, 2049), (5000, 4999)] {
            for b in bad {
                let input = trace_with(lines, at, b);
                for strictness in [Strictness::Strict, Strictness::Lenient] {
                    let want = read_with(&input, strictness, "iterator");
                    let mut main_ran = false;
                    let got = feed(
                        &input[..],
                        strictness,
                        3,
                        |i, f| {
                            if i == 1 {
                                return None; // quits without reading: the others go on
                            }
                            let mut events = Vec::new();
                            let end = f.for_each(|ev| events.push(ev.clone()));
                            Some((events, end.map_err(|e| e.to_string())))
                        },
                        || main_ran = true,
                    );
                    assert!(main_ran);
                    assert!(got[1].is_none());
                    for g in [&got[0], &got[2]] {
                        let g = g.as_ref().expect("consumed");
                        assert!(g.0 == want.0, "{lines} lines, bad at {at}: events differ");
                        assert_eq!(g.1, want.1, "{lines} lines, bad at {at}");
                    }
                }
            }
        }
        // A header that does not parse is every consumer's error.
        let got = feed(
            &b"not a header\n"[..],
            Strictness::Strict,
            2,
            |_, f| f.for_each(|_| {}).unwrap_err().to_string(),
            || {},
        );
        assert_eq!(got[0], got[1]);
        assert!(got[0].starts_with("line 1:"), "{}", got[0]);
    }

    #[test]
    fn the_wide_reader_numbers_each_event_by_its_line() {
        // Blank lines (every 97th) make line numbers and event counts part ways.
        let input = trace_with(5000, usize::MAX, b"");
        let mut reader = TraceReader::new(&input[..], Strictness::Strict).unwrap();
        let mut want = Vec::new();
        while let Some(ev) = reader.next() {
            ev.unwrap();
            want.push(reader.line());
        }
        let mut got = Vec::new();
        TraceReader::new(&input[..], Strictness::Strict)
            .unwrap()
            .for_each_parsed_wide(|line, _| -> Result<(), TraceError> {
                got.push(line);
                Ok(())
            })
            .unwrap();
        assert!(
            want.len() == 5000 && want.last() > Some(&5001),
            "{:?}",
            want.last()
        );
        assert_eq!(got, want);
    }

    #[test]
    fn a_consumer_that_stops_the_feed_ends_the_reading_for_all() {
        let lines = 100 * BATCH;
        let input = trace_with(lines, usize::MAX, b"");
        let got = feed(
            &input[..],
            Strictness::Strict,
            2,
            |i, f| {
                if i == 0 {
                    // Fails before reading anything, and stops the others.
                    f.stopper().stop();
                    return (0, "failed".to_string());
                }
                let mut n = 0usize;
                let end = f.for_each(|_| n += 1);
                (
                    n,
                    end.map_or_else(|e| e.to_string(), |_| "read it all".into()),
                )
            },
            || {},
        );
        assert_eq!(got[0].1, "failed");
        assert_eq!(got[1].1, TraceError::Stopped.to_string());
        // The parser had at most its queue to each consumer in flight when it stopped.
        assert!(
            got[1].0 <= (2 * DEPTH + 2) * BATCH,
            "{} of {lines}",
            got[1].0
        );
        // Without a stop, the same reading reaches the end for the consumer that reads.
        let got = feed(
            &input[..],
            Strictness::Strict,
            2,
            |i, f| {
                if i == 0 {
                    return 0;
                }
                let mut n = 0usize;
                f.for_each(|_| n += 1).expect("reads to the end");
                n
            },
            || {},
        );
        assert_eq!(
            got[1],
            read_with(&input, Strictness::Strict, "iterator").0.len()
        );
    }

    /// A reader that fails after `left` bytes.
    struct Failing<'a> {
        bytes: &'a [u8],
        left: usize,
    }

    impl Read for Failing<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.left == 0 {
                return Err(std::io::Error::other("the disk went away"));
            }
            let n = buf.len().min(self.left).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            self.left -= n;
            Ok(n)
        }
    }

    #[test]
    fn a_read_that_fails_midway_is_reported_at_its_line_by_both_pipelines() {
        let input = trace_with(3000, usize::MAX, b"");
        for left in [100, 70_000, 150_001] {
            let reader = |left| {
                let r = std::io::BufReader::with_capacity(
                    4096,
                    Failing {
                        bytes: &input,
                        left,
                    },
                );
                TraceReader::new(r, Strictness::Strict).unwrap()
            };
            let mut n = [0usize; 2];
            let one = reader(left)
                .for_each_parsed(|_| -> Result<(), TraceError> {
                    n[0] += 1;
                    Ok(())
                })
                .unwrap_err()
                .to_string();
            let wide = reader(left)
                .for_each_parsed_wide(|_, _| -> Result<(), TraceError> {
                    n[1] += 1;
                    Ok(())
                })
                .unwrap_err()
                .to_string();
            assert!(one.contains("the disk went away"), "{one}");
            assert_eq!(one, wide);
            assert_eq!(n[0], n[1]);
        }
    }

    proptest! {
        #[test]
        fn check_path_agrees_with_its_reference(p in path()) {
            prop_assert_eq!(check_path(&p), check_path_reference(&p));
        }
    }
}
