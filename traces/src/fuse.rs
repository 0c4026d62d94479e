//! Fusing a recorded program (`csd trace fuse`): the runs of one pid's file operations that
//! FusionFS would submit as one CISC op become `cisc` ops.
//!
//! Three patterns are fused (FusionFS §3):
//!
//! - [`FusePattern::OpenWriteSyncClose`]: `open`, writes, `fsync`, `close` of one file;
//! - [`FusePattern::WriteSync`]: writes to one open file up to its `fsync`/`fdatasync`
//!   (reads of the same file in between go along: a database reads its journal's tail);
//! - [`FusePattern::ReadModifyWrite`]: a `pread` and the `pwrite` of the same range right
//!   after it, outside a synced run.
//!
//! A *candidate* is a run of consecutive events of one pid on one fd. Any other event of
//! that pid ends it, and so does an event of another pid naming its file: the fused op takes
//! the place of its first event, so nothing that could see the file may move across it. A
//! candidate ends with a *decision*: its longest prefix ending in a sync (with a write in it)
//! becomes a `write-sync` op, adjacent `pread`/`pwrite` pairs of the same range after it
//! become `read-modify-write` ops, and the rest stays as it was. An `open` … `close` run
//! whose last write was synced is decided at its `close`.
//!
//! An op must fit what a CISC op can carry ([`csd_sdk::cisc`]): 32 commands, 16 slots,
//! 8 host buffers, 1 MiB per buffer. A run that outgrows it before its sync drops its oldest
//! events (they stay unfused). The fold streams, with its queue bounded by [`MAX_PENDING`].

use crate::decision::DecisionQueue;
use crate::format::{Event, FusePattern, Op, MAX_CISC_EVENTS};
use csd_sdk::cisc::{MAX_COMMANDS, MAX_INPUTS, MAX_SLOTS, MAX_SLOT_BYTES};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Events that may wait for a decision at once; past this, the oldest candidate is decided.
pub const MAX_PENDING: usize = 1 << 16;
/// The longest path an `open` inside a fused op may name (StorageFS's limit).
pub const MAX_FUSED_PATH: usize = csd_device::storagefs::medium::MAX_PATH_BYTES;

/// What one event costs a CISC op: commands, slots, host buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Budget {
    commands: usize,
    slots: usize,
    inputs: usize,
}

impl Budget {
    /// As the replay translates it: a write is a host buffer and a `pwrite` (and, after a
    /// read of its range, a stage that modifies); a read is a `pread` and a `return`.
    fn of(op: &Op) -> Budget {
        match op {
            Op::Write { .. } | Op::Pwrite { .. } => Budget {
                commands: 2,
                slots: 2,
                inputs: 1,
            },
            Op::Read { .. } | Op::Pread { .. } => Budget {
                commands: 2,
                slots: 1,
                inputs: 0,
            },
            _ => Budget {
                commands: 1,
                ..Budget::default()
            },
        }
    }

    fn plus(self, o: Budget) -> Budget {
        Budget {
            commands: self.commands + o.commands,
            slots: self.slots + o.slots,
            inputs: self.inputs + o.inputs,
        }
    }

    fn fits(self, events: usize) -> bool {
        events <= MAX_CISC_EVENTS
            && self.commands <= MAX_COMMANDS
            && self.slots <= MAX_SLOTS as usize
            && self.inputs <= MAX_INPUTS
    }
}

/// What the fold did, per pattern.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FuseReport {
    pub events_in: u64,
    pub events_out: u64,
    /// `cisc` ops written, by pattern.
    pub ops: BTreeMap<FusePattern, u64>,
    /// Events folded into them, by pattern.
    pub events_fused: BTreeMap<FusePattern, u64>,
    /// Bytes their writes carry.
    pub bytes_written: u64,
}

impl FuseReport {
    pub fn fused_ops(&self) -> u64 {
        self.ops.values().sum()
    }
}

enum Slot {
    Ready(Event),
    /// Held by a candidate until it is decided.
    Held,
    /// Folded into a `cisc` op placed earlier.
    Gone,
}

/// A run of one pid's events on one fd.
struct Candidate {
    fd: i64,
    path: String,
    /// It began with the `open` that returned `fd`.
    opened: bool,
    events: Vec<(u64, Event)>,
    budget: Budget,
    /// Events up to and including the last sync.
    synced: usize,
}

impl Candidate {
    fn start(at: u64, ev: Event, fd: i64, path: String) -> Candidate {
        let opened = matches!(ev.op, Op::Open { .. });
        Candidate {
            fd,
            path,
            opened,
            budget: Budget::of(&ev.op),
            events: vec![(at, ev)],
            synced: 0,
        }
    }
}

/// Folds a stream of events. Feed every event in trace order with [`Fuser::push`]; each
/// call returns the events decided so far, in order; [`Fuser::finish`] returns the rest.
#[derive(Default)]
pub struct Fuser {
    queue: DecisionQueue<Slot>,
    pending: HashMap<u32, Candidate>,
    report: FuseReport,
}

/// Whether `op` names `path` (so it may not move across a fused op on it).
fn names(op: &Op, path: &str) -> bool {
    match op {
        Op::Open { path: p, .. }
        | Op::Mkdir { path: p }
        | Op::Rmdir { path: p }
        | Op::Unlink { path: p }
        | Op::Stat { path: p }
        | Op::Lstat { path: p }
        | Op::Setattr { path: p, .. }
        | Op::Symlink { path: p, .. }
        | Op::Truncate { path: p, .. }
        | Op::MappedWrite { path: p, .. }
        | Op::Mknod { path: p } => p == path,
        Op::Rename { path: p, to } | Op::Link { path: p, to, .. } => p == path || to == path,
        // A listing sees the files created or removed in the directory.
        Op::Readdir { path: dir } => {
            dir == path || csd_hostfs::namespace::parent_dir(path).is_some_and(|p| p == dir)
        }
        Op::Ndp { paths, .. } => paths.iter().any(|p| p == path),
        Op::Isc { files, .. } => files.iter().any(|f| f.path == path),
        Op::Cisc { ops, .. } => ops.iter().any(|e| names(&e.op, path)),
        Op::Bread { .. } | Op::Bwrite { .. } => false,
        other => other.fd_path().is_some_and(|(_, p)| p == path),
    }
}

/// The bytes a write moves (what it returned, else what it asked).
fn written(ev: &Event) -> Option<u64> {
    match ev.op {
        Op::Write { len, .. } | Op::Pwrite { len, .. } => {
            Some(ev.ret.map_or(len, |r| r.max(0) as u64))
        }
        _ => None,
    }
}

/// Whether a data op can go into a CISC op: it did not fail and fits one slot.
fn fusible_data(ev: &Event) -> bool {
    let len = match ev.op {
        Op::Write { len, .. }
        | Op::Pwrite { len, .. }
        | Op::Read { len, .. }
        | Op::Pread { len, .. } => len,
        // Not an op a CISC op carries: it ends the candidate.
        Op::Fallocate { .. } | Op::SyncFileRange { .. } | Op::MappedWrite { .. } => return false,
        _ => return true,
    };
    len <= MAX_SLOT_BYTES as u64
}

impl Fuser {
    pub fn new() -> Fuser {
        Fuser::default()
    }

    pub fn report(&self) -> &FuseReport {
        &self.report
    }

    /// Takes one event; returns the events now decided, in order.
    pub fn push(&mut self, ev: Event) -> Vec<Event> {
        self.report.events_in += 1;
        // Another pid's candidate on a file this event names is decided first.
        let touched: Vec<u32> = self
            .pending
            .iter()
            .filter(|(pid, c)| **pid != ev.pid && names(&ev.op, &c.path))
            .map(|(pid, _)| *pid)
            .collect();
        for pid in touched {
            self.decide(pid);
        }
        self.step(ev);
        while self.queue.len() > MAX_PENDING {
            let Some(oldest) = self
                .pending
                .iter()
                .min_by_key(|(_, c)| c.events[0].0)
                .map(|(pid, _)| *pid)
            else {
                break;
            };
            self.decide(oldest);
        }
        self.drain()
    }

    /// The rest, once the trace has ended.
    pub fn finish(mut self) -> (Vec<Event>, FuseReport) {
        let mut pids: Vec<u32> = self.pending.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            self.decide(pid);
        }
        let out = self.drain();
        (out, self.report)
    }

    /// One event of its pid: it extends the pid's candidate, completes it, or ends it and
    /// perhaps starts the next.
    fn step(&mut self, ev: Event) {
        let pid = ev.pid;
        let failed = ev.ret.is_some_and(|r| r < 0);
        if let Some(c) = self.pending.get(&pid) {
            let same_fd = ev.op.fd_path().is_some_and(|(fd, _)| fd == c.fd);
            let last_was_sync = c.synced == c.events.len();
            let closes = matches!(ev.op, Op::Close { .. }) && same_fd;
            let wrote = c.events.iter().any(|(_, e)| written(e).is_some());
            if closes && !failed && c.opened && last_was_sync && wrote {
                let at = self.queue.push(Slot::Held);
                let mut c = self.pending.remove(&pid).expect("checked");
                c.events.push((at, ev));
                let n = c.events.len();
                self.fuse(&mut c.events, 0..n, FusePattern::OpenWriteSyncClose);
                return;
            }
            let joins = same_fd && !closes && !failed && fusible_data(&ev);
            if !joins {
                self.decide(pid);
                return self.step(ev);
            }
            let budget = Budget::of(&ev.op);
            if !c.budget.plus(budget).fits(c.events.len() + 1) {
                if c.synced > 0 {
                    self.decide(pid);
                    return self.step(ev);
                }
                self.shed(pid, budget);
            }
            let sync = matches!(ev.op, Op::Fsync { .. } | Op::Fdatasync { .. });
            let at = self.queue.push(Slot::Held);
            let c = self
                .pending
                .get_mut(&pid)
                .expect("shedding keeps the candidate");
            c.budget = c.budget.plus(budget);
            c.events.push((at, ev));
            if sync {
                c.synced = c.events.len();
            }
            return;
        }
        // No candidate: an open for writing, a write or a pread may start one.
        let starts = !failed
            && fusible_data(&ev)
            && match &ev.op {
                Op::Open { path, flags } => {
                    flags.write
                        && !flags.directory
                        && !flags.path
                        && ev.ret.is_some()
                        && path.len() <= MAX_FUSED_PATH
                }
                Op::Write { .. } | Op::Pwrite { .. } | Op::Pread { .. } => true,
                _ => false,
            };
        if !starts {
            self.queue.push(Slot::Ready(ev));
            return;
        }
        let (fd, path) = match &ev.op {
            Op::Open { path, .. } => (ev.ret.unwrap_or(-1), path.clone()),
            op => {
                let (fd, path) = op.fd_path().expect("a data op");
                (fd, path.to_string())
            }
        };
        let at = self.queue.push(Slot::Held);
        self.pending.insert(pid, Candidate::start(at, ev, fd, path));
    }

    /// Releases a candidate's oldest events (unfused) until `more` fits; an `open` released
    /// turns it into a plain run.
    fn shed(&mut self, pid: u32, more: Budget) {
        let c = self.pending.get_mut(&pid).expect("called for a candidate");
        let mut released = Vec::new();
        while !c.events.is_empty() && !c.budget.plus(more).fits(c.events.len() + 1) {
            let (at, ev) = c.events.remove(0);
            c.budget = Budget {
                commands: c.budget.commands - Budget::of(&ev.op).commands,
                slots: c.budget.slots - Budget::of(&ev.op).slots,
                inputs: c.budget.inputs - Budget::of(&ev.op).inputs,
            };
            c.opened = false;
            released.push((at, ev));
        }
        for (at, ev) in released {
            *self.queue.at(at) = Slot::Ready(ev);
        }
    }

    /// Decides `pid`'s candidate: its synced prefix becomes a `write-sync` op, `pread`/
    /// `pwrite` pairs of one range after it become `read-modify-write` ops, the rest stays.
    fn decide(&mut self, pid: u32) {
        let Some(mut c) = self.pending.remove(&pid) else {
            return;
        };
        let first = usize::from(c.opened);
        let mut i = first;
        if c.synced > first
            && c.events[first..c.synced]
                .iter()
                .any(|(_, e)| written(e).is_some())
        {
            self.fuse(&mut c.events, first..c.synced, FusePattern::WriteSync);
            i = c.synced;
        }
        while i + 1 < c.events.len() {
            let pair = match (&c.events[i].1.op, &c.events[i + 1].1.op) {
                (Op::Pread { off: a, len: n, .. }, Op::Pwrite { off: b, len: m, .. }) => {
                    a == b && n == m
                }
                _ => false,
            };
            if pair {
                self.fuse(&mut c.events, i..i + 2, FusePattern::ReadModifyWrite);
                i += 2;
            } else {
                i += 1;
            }
        }
        for (at, ev) in c.events.drain(..) {
            if matches!(self.queue.get(at), Some(Slot::Held)) {
                *self.queue.at(at) = Slot::Ready(ev);
            }
        }
    }

    /// Replaces `events[range]` with one `cisc` op at the first one's place. The events are
    /// taken (left as placeholders the decision skips).
    fn fuse(
        &mut self,
        events: &mut [(u64, Event)],
        range: std::ops::Range<usize>,
        pattern: FusePattern,
    ) {
        let first_at = events[range.start].0;
        let mut ops = Vec::with_capacity(range.len());
        for (at, ev) in &mut events[range] {
            *self.queue.at(*at) = Slot::Gone;
            ops.push(std::mem::replace(ev, placeholder()));
        }
        let first = &ops[0];
        let last = &ops[ops.len() - 1];
        let dur = last
            .dur
            .map(|d| last.t.saturating_add(d).saturating_sub(first.t));
        self.report.bytes_written += ops.iter().filter_map(written).sum::<u64>();
        *self.report.ops.entry(pattern).or_default() += 1;
        *self.report.events_fused.entry(pattern).or_default() += ops.len() as u64;
        let cisc = Event {
            t: first.t,
            pid: first.pid,
            fds_of: first.fds_of,
            ret: Some(0),
            dur,
            extra: BTreeMap::new(),
            op: Op::Cisc { pattern, ops },
        };
        *self.queue.at(first_at) = Slot::Ready(cisc);
    }

    /// The decided events at the queue's front.
    fn drain(&mut self) -> Vec<Event> {
        let out: Vec<Event> = self
            .queue
            .drain(|s| !matches!(s, Slot::Held))
            .into_iter()
            .filter_map(|s| match s {
                Slot::Ready(ev) => Some(ev),
                _ => None,
            })
            .collect();
        self.report.events_out += out.len() as u64;
        out
    }
}

/// What a fused event leaves in its candidate (never written: its slot is `Gone`).
fn placeholder() -> Event {
    Event {
        t: 0,
        pid: 0,
        fds_of: None,
        op: Op::Stat {
            path: String::new(),
        },
        ret: None,
        dur: None,
        extra: BTreeMap::new(),
    }
}

/// Fuses the trace `input` into `out`: the input's header (noting that it was fused), then
/// the events, fusible runs as `cisc` ops.
pub fn fuse_trace(
    input: impl std::io::BufRead + Send,
    out: impl std::io::Write,
) -> Result<FuseReport, crate::offload::FoldError> {
    let mut reader = crate::reader::TraceReader::new(input, crate::reader::Strictness::Strict)?;
    let mut header = reader.header().clone();
    header.extra.insert(
        "fused".into(),
        serde_json::Value::from(FusePattern::ALL.map(FusePattern::name).to_vec()),
    );
    let mut w = crate::TraceWriter::new(out, &header)?;
    let mut fuser = Fuser::new();
    for ev in reader.by_ref() {
        for e in fuser.push(ev?) {
            w.write(&e)?;
        }
    }
    let (rest, report) = fuser.finish();
    for e in rest {
        w.write(&e)?;
    }
    w.finish()?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::OpenFlags;

    fn ev(t: u64, pid: u32, op: Op, ret: i64) -> Event {
        Event {
            t,
            pid,
            fds_of: None,
            op,
            ret: Some(ret),
            dur: Some(1),
            extra: BTreeMap::new(),
        }
    }

    fn open(t: u64, pid: u32, path: &str, fd: i64) -> Event {
        let flags = OpenFlags::parse("O_RDWR|O_CREAT");
        ev(
            t,
            pid,
            Op::Open {
                path: path.into(),
                flags,
            },
            fd,
        )
    }

    fn pwrite(t: u64, pid: u32, fd: i64, path: &str, off: u64, len: u64) -> Event {
        let path = path.into();
        ev(t, pid, Op::Pwrite { fd, path, off, len }, len as i64)
    }

    fn pread(t: u64, pid: u32, fd: i64, path: &str, off: u64, len: u64) -> Event {
        let path = path.into();
        ev(t, pid, Op::Pread { fd, path, off, len }, len as i64)
    }

    fn fsync(t: u64, pid: u32, fd: i64, path: &str) -> Event {
        ev(
            t,
            pid,
            Op::Fdatasync {
                fd,
                path: path.into(),
            },
            0,
        )
    }

    fn close(t: u64, pid: u32, fd: i64, path: &str) -> Event {
        ev(
            t,
            pid,
            Op::Close {
                fd,
                path: path.into(),
            },
            0,
        )
    }

    fn fuse(events: Vec<Event>) -> (Vec<Event>, FuseReport) {
        let mut f = Fuser::new();
        let mut out: Vec<Event> = events.into_iter().flat_map(|e| f.push(e)).collect();
        let (rest, report) = f.finish();
        out.extend(rest);
        (out, report)
    }

    fn patterns(out: &[Event]) -> Vec<Option<FusePattern>> {
        out.iter()
            .map(|e| match &e.op {
                Op::Cisc { pattern, .. } => Some(*pattern),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn each_pattern_becomes_one_cisc_op() {
        let f = "/f";
        let (out, report) = fuse(vec![
            open(1, 7, f, 3),
            pwrite(2, 7, 3, f, 0, 100),
            fsync(3, 7, 3, f),
            close(4, 7, 3, f),
            open(5, 7, f, 3),
            ev(6, 7, Op::Stat { path: f.into() }, 0),
            pwrite(7, 7, 3, f, 0, 10),
            pread(8, 7, 3, f, 10, 10),
            fsync(9, 7, 3, f),
            pread(10, 7, 3, f, 0, 64),
            pwrite(11, 7, 3, f, 0, 64),
            close(12, 7, 3, f),
        ]);
        use FusePattern::*;
        assert_eq!(
            patterns(&out),
            vec![
                Some(OpenWriteSyncClose),
                None,
                None,
                Some(WriteSync),
                Some(ReadModifyWrite),
                None
            ]
        );
        assert_eq!((report.events_in, report.events_out), (12, 6));
        assert_eq!(report.bytes_written, 174);
        let Op::Cisc { ops, .. } = &out[0].op else {
            unreachable!()
        };
        assert_eq!(ops.len(), 4, "the open, write, sync and close");
        assert_eq!(out[0].t, 1, "the op takes its first event's place");
    }

    #[test]
    fn another_pid_naming_the_file_ends_a_run_before_it() {
        let f = "/f";
        let (out, _) = fuse(vec![
            open(1, 1, f, 3),
            pwrite(2, 1, 3, f, 0, 10),
            ev(3, 2, Op::Stat { path: f.into() }, 0),
            fsync(4, 1, 3, f),
            ev(
                5,
                2,
                Op::Stat {
                    path: "/other".into(),
                },
                0,
            ),
            close(6, 1, 3, f),
        ]);
        // The stat of /f stops the open…close run; its fsync alone is no op. The stat of
        // another file does not.
        assert!(patterns(&out).iter().all(Option::is_none), "{out:?}");
        assert_eq!(
            out.iter().map(|e| e.t).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6]
        );

        let (out, _) = fuse(vec![
            pwrite(1, 1, 3, f, 0, 10),
            ev(
                2,
                2,
                Op::Stat {
                    path: "/other".into(),
                },
                0,
            ),
            fsync(3, 1, 3, f),
        ]);
        assert_eq!(out.len(), 2);
        assert_eq!(patterns(&out)[0], Some(FusePattern::WriteSync));
        assert_eq!(out[1].t, 2, "the other pid's event follows the fused op");
    }

    #[test]
    fn a_run_too_long_for_one_op_sheds_its_oldest_writes() {
        let f = "/f";
        let mut events: Vec<Event> = (0..20).map(|i| pwrite(i, 1, 3, f, i * 10, 10)).collect();
        events.push(fsync(20, 1, 3, f));
        let (out, report) = fuse(events);
        // Eight host buffers per op: the last eight writes and the sync are fused.
        assert_eq!(out.len(), 13);
        assert!(patterns(&out)[..12].iter().all(Option::is_none));
        let Op::Cisc { ops, .. } = &out[12].op else {
            unreachable!()
        };
        assert_eq!(ops.len(), 9);
        assert_eq!(ops[0].t, 12);
        assert_eq!(report.fused_ops(), 1);
    }

    #[test]
    fn failed_and_oversized_calls_are_not_fused() {
        let f = "/f";
        let mut bad = pwrite(1, 1, 3, f, 0, 10);
        bad.ret = Some(-5);
        let big = pwrite(3, 1, 3, f, 0, MAX_SLOT_BYTES as u64 + 1);
        let (out, report) = fuse(vec![bad, fsync(2, 1, 3, f), big, fsync(4, 1, 3, f)]);
        assert_eq!(report.fused_ops(), 0);
        assert_eq!(out.len(), 4);
    }
}
