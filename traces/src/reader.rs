//! Streaming trace reading: one line at a time (memory does not grow with the trace), fds
//! resolved to paths, every problem reported with its line number.

use crate::format::{parse_event, Event, Header, Op, Parsed};
use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strictness {
    /// An unknown op is an error.
    Strict,
    /// Unknown ops are skipped and counted ([`TraceReader::skipped`]).
    Lenient,
}

/// Reads a trace line by line.
pub struct TraceReader<R> {
    input: R,
    header: Header,
    line: u64,
    buf: String,
    strictness: Strictness,
    /// Open fds per pid → path.
    fds: HashMap<(u32, i64), String>,
    skipped: BTreeMap<String, u64>,
    done: bool,
}

impl<R: BufRead> TraceReader<R> {
    /// Reads and checks the header.
    pub fn new(mut input: R, strictness: Strictness) -> Result<TraceReader<R>, TraceError> {
        let mut buf = String::new();
        if input.read_line(&mut buf)? == 0 {
            return Err(TraceError::Malformed {
                line: 1,
                problem: "the trace is empty (expected a header line)".into(),
            });
        }
        let header = Header::parse(buf.trim_end())
            .map_err(|problem| TraceError::Malformed { line: 1, problem })?;
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
            problem,
        }
    }

    /// Fills in the path of an fd op and keeps the fd table current.
    fn resolve(&mut self, ev: &mut Event) -> Result<(), TraceError> {
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
        let known = self.fds.get(&key).cloned();
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
        if path.is_empty() {
            match known {
                Some(p) => *path = p,
                None => {
                    return Err(self.malformed(format!(
                        "fd {fd} of pid {} is not open (no open returned it and the event names no path)",
                        ev.pid
                    )))
                }
            }
        } else if known.as_deref() != Some(path.as_str()) {
            // Recorders that know each fd's path (strace -y) need no open event.
            self.fds.insert(key, path.clone());
        }
        if matches!(ev.op, Op::Close { .. }) {
            self.fds.remove(&key);
        }
        Ok(())
    }

    fn next_event(&mut self) -> Result<Option<Event>, TraceError> {
        loop {
            self.buf.clear();
            if self.input.read_line(&mut self.buf)? == 0 {
                return Ok(None);
            }
            self.line += 1;
            let text = self.buf.trim();
            if text.is_empty() {
                continue;
            }
            match parse_event(text) {
                Ok(Parsed::Event(mut ev)) => {
                    self.resolve(&mut ev)?;
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
