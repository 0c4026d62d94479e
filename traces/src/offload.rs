//! Offload plans: what-if analysis of a recorded program (`csd trace offload`).
//!
//! A plan names scans a program did on the host and the task that would do them in the
//! device instead. Folding rewrites the trace: each scanned file's `open`/`stat`/`read`/
//! `close` events disappear, and one `ndp` op over a batch of those files appears where the
//! batch's first scan began. Everything else stays, in order.
//!
//! A *scan* is one file opened read-only, read sequentially from its start to its end, and
//! closed, by one pid, with nothing but reads (and `stat`s of it) on that fd in between.
//! A *batch* is the scans one pid does under one rule with no write-like event of that pid
//! between them (a write, a create, an `fsync`, an unlink, another offload, …): the program's
//! own order decides where a batch ends, so a write never moves past a scan it followed.
//!
//! The fold streams: events wait in a queue only while a scan or batch they belong to is
//! undecided, and the queue is bounded ([`MAX_PENDING`]): past it, open batches close and
//! undecided scans stay as they are.

use crate::decision::DecisionQueue;
use crate::format::{Event, Op};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Events that may wait for a decision at once; past this, pending work is settled.
pub const MAX_PENDING: usize = 1 << 20;
/// The most files one `ndp` op may carry (a rule's `batch` is capped at this).
pub const MAX_BATCH: usize = 4096;
/// Files per `ndp` op unless a rule says otherwise.
pub const DEFAULT_BATCH: usize = 256;
/// The most rules a plan may hold.
pub const MAX_RULES: usize = 64;
/// The most scans that may be open at once; a file opened past this is not a candidate.
pub const MAX_OPEN_SCANS: usize = 1024;

/// A plan: the rules, tried in order; the first that matches a scan takes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    #[serde(rename = "rule", default)]
    pub rules: Vec<Rule>,
}

/// One rule: which scans, and the task that replaces them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// A label for the fold's summary (default: the task's name).
    #[serde(default)]
    pub name: Option<String>,
    /// The task the `ndp` ops name (a built-in, a stored task or a module path).
    pub task: String,
    /// The task's arguments.
    #[serde(default)]
    pub args: String,
    /// Globs of the files the rule takes (`*` stays within a directory, `**` crosses them).
    pub paths: Vec<String>,
    /// Only this process's scans.
    #[serde(default)]
    pub pid: Option<u32>,
    /// Most files per `ndp` op.
    #[serde(default)]
    pub batch: Option<usize>,
}

impl Rule {
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.task)
    }
}

/// Why a plan cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("the plan is not valid TOML for an offload plan: {0}")]
    Toml(String),
    #[error("the plan has no rules: add a [[rule]] with a task and paths")]
    Empty,
    #[error("the plan has {0} rules; at most {MAX_RULES} are allowed")]
    TooMany(usize),
    #[error("rule {rule} ('{label}'): {problem}")]
    Rule {
        rule: usize,
        label: String,
        problem: String,
    },
}

/// A checked plan, its globs compiled.
pub struct Folder {
    rules: Vec<(Rule, Vec<glob::Pattern>)>,
}

impl Plan {
    pub fn parse(text: &str) -> Result<Plan, PlanError> {
        toml::from_str(text).map_err(|e| PlanError::Toml(e.to_string()))
    }

    /// Checks every rule and compiles its globs.
    pub fn folder(&self) -> Result<Folder, PlanError> {
        if self.rules.is_empty() {
            return Err(PlanError::Empty);
        }
        if self.rules.len() > MAX_RULES {
            return Err(PlanError::TooMany(self.rules.len()));
        }
        let mut rules = Vec::with_capacity(self.rules.len());
        for (i, r) in self.rules.iter().enumerate() {
            let bad = |problem: String| PlanError::Rule {
                rule: i + 1,
                label: r.label().to_string(),
                problem,
            };
            if r.task.is_empty() {
                return Err(bad("names no task".into()));
            }
            if r.paths.is_empty() {
                return Err(bad("has no paths: give globs such as \"/src/**\"".into()));
            }
            if let Some(b) = r.batch {
                if b == 0 || b > MAX_BATCH {
                    return Err(bad(format!("batch must be in 1..={MAX_BATCH}, got {b}")));
                }
            }
            let globs = r
                .paths
                .iter()
                .map(|p| {
                    if !p.starts_with('/') {
                        return Err(bad(format!("path glob '{p}' is not absolute")));
                    }
                    glob::Pattern::new(p).map_err(|e| bad(format!("path glob '{p}': {e}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            rules.push((r.clone(), globs));
        }
        Ok(Folder { rules })
    }
}

/// What a fold did under one rule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RuleFold {
    pub rule: String,
    pub task: String,
    /// The rule's path globs, to say what it looked for when it took nothing.
    pub paths: Vec<String>,
    /// Files whose scans were folded.
    pub files: u64,
    /// Trace events removed (each scan's open, stats, reads and close).
    pub events: u64,
    /// Bytes those scans read.
    pub bytes: u64,
    /// `ndp` ops written.
    pub requests: u64,
}

/// What a fold did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FoldReport {
    pub events_in: u64,
    pub events_out: u64,
    pub rules: Vec<RuleFold>,
    /// Scans a rule's paths matched that were not folded (not read whole and sequentially),
    /// so they stay on the host.
    pub kept_scans: u64,
    /// Successful read-only opens of files no rule's paths take.
    pub unmatched_opens: u64,
    /// The first few distinct such paths, to show what a plan's globs missed.
    pub unmatched_examples: Vec<String>,
}

/// Paths [`FoldReport::unmatched_examples`] keeps.
const UNMATCHED_EXAMPLES: usize = 3;

/// Where the files every process opens live (the dynamic loader's cache, shared libraries,
/// locale data, the kernel's views): never a plan's target, so never an example.
const SYSTEM_DIRS: [&str; 8] = [
    "/etc/", "/usr/", "/lib/", "/lib64/", "/proc/", "/sys/", "/dev/", "/run/",
];

/// A scan in progress: a matching file opened read-only by one pid.
struct Scan {
    /// The pid that opened it: its batch is that pid's.
    pid: u32,
    rule: usize,
    path: String,
    /// Queue positions of its events.
    slots: Vec<u64>,
    /// Bytes read so far, in order from 0.
    pos: u64,
    /// A read came back short or empty: the file's end was reached.
    at_end: bool,
    /// Something disqualified it (a seek, a read past a gap, another op on its fd).
    spoiled: bool,
}

/// An open batch: one pid's folded scans under one rule.
struct Batch {
    rule: usize,
    pid: u32,
    /// The queue position of its placeholder (the first scan's open).
    slot: u64,
    t: u64,
    paths: Vec<String>,
    sizes: Vec<u64>,
}

enum Slot {
    Keep(Event),
    Drop,
    /// Waits for its scan's decision.
    Scan(Event),
    /// A batch's `ndp` op, written once the batch closes.
    Batch,
    Done(Event),
}

/// Folds a stream of events. Feed every event in trace order with [`Fold::push`]; each call
/// returns the events decided so far, in order; [`Fold::finish`] returns the rest.
pub struct Fold<'f> {
    folder: &'f Folder,
    queue: DecisionQueue<Slot>,
    scans: HashMap<(u32, i64), Scan>,
    /// Open batches by (pid, rule), and their contents by id.
    open: HashMap<(u32, usize), u64>,
    batches: HashMap<u64, Batch>,
    next_batch: u64,
    report: FoldReport,
}

impl Folder {
    pub fn fold(&self) -> Fold<'_> {
        Fold {
            folder: self,
            queue: DecisionQueue::default(),
            scans: HashMap::new(),
            open: HashMap::new(),
            batches: HashMap::new(),
            next_batch: 0,
            report: FoldReport {
                rules: self
                    .rules
                    .iter()
                    .map(|(r, _)| RuleFold {
                        rule: r.label().to_string(),
                        task: r.task.clone(),
                        paths: r.paths.clone(),
                        ..RuleFold::default()
                    })
                    .collect(),
                ..FoldReport::default()
            },
        }
    }

    /// The first rule that takes `path` opened by `pid`.
    fn rule_for(&self, pid: u32, path: &str) -> Option<usize> {
        let opts = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        self.rules.iter().position(|(r, globs)| {
            r.pid.is_none_or(|p| p == pid) && globs.iter().any(|g| g.matches_with(path, opts))
        })
    }
}

/// Whether `op` changes what a later scan could see, or is an offload itself: a batch of
/// the same pid ends before it.
fn breaks_batch(op: &Op) -> bool {
    match op {
        Op::Open { flags, .. } => flags.write || flags.create || flags.truncate,
        Op::Write { .. }
        | Op::Pwrite { .. }
        | Op::Fsync { .. }
        | Op::Fdatasync { .. }
        | Op::SyncFileRange { .. }
        | Op::Sync
        | Op::Mkdir { .. }
        | Op::Rmdir { .. }
        | Op::Unlink { .. }
        | Op::Rename { .. }
        | Op::Link { .. }
        | Op::Symlink { .. }
        | Op::Truncate { .. }
        | Op::Fallocate { .. }
        | Op::MappedWrite { .. }
        | Op::Mknod { .. }
        | Op::Setattr { .. }
        | Op::Ndp { .. }
        | Op::Isc { .. }
        | Op::Cisc { .. }
        | Op::Bwrite { .. } => true,
        Op::Close { .. }
        | Op::Read { .. }
        | Op::Pread { .. }
        | Op::Stat { .. }
        | Op::Lstat { .. }
        | Op::Fstat { .. }
        | Op::Readdir { .. } => false,
        Op::Bread { .. } => false,
    }
}

impl Fold<'_> {
    /// Takes one event; returns the events now decided, in order.
    pub fn push(&mut self, ev: Event) -> Vec<Event> {
        self.report.events_in += 1;
        // Scans are keyed by the fd's table: a thread may read what its sibling opened.
        let table = ev.fd_table();
        let on_scan = |fd: &i64| self.scans.contains_key(&(table, *fd));
        match &ev.op {
            // A failed call did nothing: it stays, and neither starts nor spoils anything.
            _ if ev.ret.is_some_and(|r| r < 0) => {
                self.queue.push(Slot::Keep(ev));
            }
            Op::Open { flags, .. }
                if !(flags.write
                    || flags.create
                    || flags.truncate
                    || flags.directory
                    || flags.path) =>
            {
                self.open_read_only(ev)
            }
            Op::Read { fd, .. } | Op::Pread { fd, .. } if on_scan(fd) => self.read(ev),
            Op::Stat { .. } => self.stat(ev),
            Op::Close { fd, .. } if on_scan(fd) => {
                let key = (table, *fd);
                let at = self.queue.push(Slot::Scan(ev));
                self.scans.get_mut(&key).expect("checked").slots.push(at);
                self.settle_scan(key, true);
            }
            _ => self.other(ev),
        }
        if self.queue.len() > MAX_PENDING {
            self.settle_everything();
        }
        self.drain()
    }

    /// A read-only open: a scan begins when a rule takes the file.
    fn open_read_only(&mut self, ev: Event) {
        let Op::Open { path, .. } = &ev.op else {
            unreachable!("called for opens")
        };
        let (pid, fd) = (ev.pid, ev.ret.unwrap_or(-1));
        let key = (ev.fd_table(), fd);
        let room = self.scans.len() < MAX_OPEN_SCANS;
        let rule = (fd >= 0 && room)
            .then(|| self.folder.rule_for(pid, path))
            .flatten();
        let Some(rule) = rule else {
            if fd >= 0 && room {
                let r = &mut self.report;
                r.unmatched_opens += 1;
                // A program's own files, not the loader's and libraries' every program opens;
                // looked at only while examples are wanted.
                if r.unmatched_examples.len() < UNMATCHED_EXAMPLES
                    && !SYSTEM_DIRS.iter().any(|d| path.starts_with(d))
                    && !r.unmatched_examples.contains(path)
                {
                    r.unmatched_examples.push(path.clone());
                }
            }
            self.queue.push(Slot::Keep(ev));
            return;
        };
        // A reused fd without a close in between: the old scan is not whole.
        self.settle_scan(key, false);
        let path = path.clone();
        let at = self.queue.push(Slot::Scan(ev));
        let scan = Scan {
            pid,
            rule,
            path,
            slots: vec![at],
            pos: 0,
            at_end: false,
            spoiled: false,
        };
        self.scans.insert(key, scan);
    }

    /// A read on a scanned fd: in order from where the last one ended, or the scan is
    /// spoiled; a short read marks the file's end.
    fn read(&mut self, ev: Event) {
        let (fd, len, explicit) = match &ev.op {
            Op::Pread { fd, len, off, .. } => (*fd, *len, Some(*off)),
            Op::Read { fd, len, off, .. } => (*fd, *len, *off),
            _ => unreachable!("called for reads"),
        };
        let key = (ev.fd_table(), fd);
        let n = ev.ret.map_or(len, |r| r.max(0) as u64);
        let at = self.queue.push(Slot::Scan(ev));
        let scan = self.scans.get_mut(&key).expect("called for scanned fds");
        scan.slots.push(at);
        if explicit.is_some_and(|o| o != scan.pos) || scan.at_end && n > 0 {
            scan.spoiled = true;
        }
        scan.pos = scan.pos.saturating_add(n);
        if n < len {
            scan.at_end = true;
        }
    }

    /// A stat of a file being scanned belongs to the scan (programs stat what they opened);
    /// any other stays.
    fn stat(&mut self, ev: Event) {
        let Op::Stat { path } = &ev.op else {
            unreachable!("called for stats")
        };
        let key = self
            .scans
            .iter()
            .filter(|((_, _), s)| s.pid == ev.pid && s.path == *path)
            .map(|(k, _)| *k)
            .min();
        match key {
            Some(key) => {
                let at = self.queue.push(Slot::Scan(ev));
                self.scans.get_mut(&key).expect("found").slots.push(at);
            }
            None => {
                self.queue.push(Slot::Keep(ev));
            }
        }
    }

    /// Any other event stays; on a scanned fd it spoils the scan, and a write-like one ends
    /// its pid's batches.
    fn other(&mut self, ev: Event) {
        let fd = ev.op.fd();
        if let Some(s) = fd.and_then(|fd| self.scans.get_mut(&(ev.fd_table(), fd))) {
            s.spoiled = true;
        }
        if breaks_batch(&ev.op) {
            self.close_batches_of(ev.pid);
        }
        self.queue.push(Slot::Keep(ev));
    }

    /// Decides a scan: folded into its pid's batch under its rule when `closed` and it read
    /// the whole file in order; else its events stay.
    fn settle_scan(&mut self, key: (u32, i64), closed: bool) {
        let Some(scan) = self.scans.remove(&key) else {
            return;
        };
        // A file past what one request may read stays on the host.
        let whole =
            closed && !scan.spoiled && scan.at_end && scan.pos <= crate::format::MAX_NDP_FILE_BYTES;
        if !whole {
            self.report.kept_scans += 1;
            for &at in &scan.slots {
                self.unpend(at);
            }
            return;
        }
        let (pid, rule) = (scan.pid, scan.rule);
        let limit = self.folder.rules[rule].0.batch.unwrap_or(DEFAULT_BATCH);
        let id = match self.open.get(&(pid, rule)) {
            Some(&id) if self.batches[&id].paths.len() < limit => id,
            _ => {
                self.close_batch(pid, rule);
                let first = scan.slots[0];
                let t = match self.queue.at(first) {
                    Slot::Scan(ev) => ev.t,
                    _ => unreachable!("a scan's first slot is its open"),
                };
                let id = self.next_batch;
                self.next_batch += 1;
                self.batches.insert(
                    id,
                    Batch {
                        rule,
                        pid,
                        slot: first,
                        t,
                        paths: Vec::new(),
                        sizes: Vec::new(),
                    },
                );
                self.open.insert((pid, rule), id);
                *self.queue.at(first) = Slot::Batch;
                id
            }
        };
        let batch = self.batches.get_mut(&id).expect("open");
        batch.paths.push(scan.path);
        batch.sizes.push(scan.pos);
        let r = &mut self.report.rules[rule];
        r.files += 1;
        r.bytes += scan.pos;
        r.events += scan.slots.len() as u64;
        for &at in &scan.slots {
            if !matches!(self.queue.at(at), Slot::Batch) {
                *self.queue.at(at) = Slot::Drop;
            }
        }
    }

    /// A slot of a scan that stays: its event is kept where it was.
    fn unpend(&mut self, at: u64) {
        let slot = self.queue.at(at);
        if matches!(slot, Slot::Scan(_)) {
            if let Slot::Scan(ev) = std::mem::replace(slot, Slot::Drop) {
                *slot = Slot::Keep(ev);
            }
        }
    }

    fn close_batches_of(&mut self, pid: u32) {
        let rules: Vec<usize> = self
            .open
            .keys()
            .filter(|(p, _)| *p == pid)
            .map(|&(_, r)| r)
            .collect();
        for r in rules {
            self.close_batch(pid, r);
        }
    }

    /// Writes the batch's `ndp` op into its placeholder.
    fn close_batch(&mut self, pid: u32, rule: usize) {
        let Some(id) = self.open.remove(&(pid, rule)) else {
            return;
        };
        let b = self.batches.remove(&id).expect("open batches are kept");
        let r = &self.folder.rules[b.rule].0;
        self.report.rules[rule].requests += 1;
        let ev = Event {
            t: b.t,
            pid: b.pid,
            fds_of: None,
            op: Op::Ndp {
                task: r.task.clone(),
                paths: b.paths,
                args: r.args.clone(),
                sizes: b.sizes,
            },
            ret: None,
            dur: None,
            extra: BTreeMap::new(),
        };
        *self.queue.at(b.slot) = Slot::Done(ev);
    }

    /// Past [`MAX_PENDING`]: every scan still open stays as it is, every batch closes.
    fn settle_everything(&mut self) {
        let keys: Vec<_> = self.scans.keys().copied().collect();
        for k in keys {
            self.settle_scan(k, false);
        }
        let open: Vec<_> = self.open.keys().copied().collect();
        for (pid, rule) in open {
            self.close_batch(pid, rule);
        }
    }

    /// The decided events at the front of the queue.
    fn drain(&mut self) -> Vec<Event> {
        let out: Vec<Event> = self
            .queue
            .drain(|s| !matches!(s, Slot::Scan(..) | Slot::Batch))
            .into_iter()
            .filter_map(|s| match s {
                Slot::Keep(ev) | Slot::Done(ev) => Some(ev),
                _ => None,
            })
            .collect();
        self.report.events_out += out.len() as u64;
        out
    }

    /// Ends the stream: scans never closed stay, open batches close. Returns the last
    /// events and what the fold did.
    pub fn finish(mut self) -> (Vec<Event>, FoldReport) {
        self.settle_everything();
        let rest = self.drain();
        debug_assert!(self.queue.is_empty(), "every slot is decided at the end");
        (rest, self.report)
    }
}

/// Why a trace could not be folded.
#[derive(Debug, thiserror::Error)]
pub enum FoldError {
    #[error(transparent)]
    Trace(#[from] crate::reader::TraceError),
    #[error("writing the folded trace: {0}")]
    Write(#[from] std::io::Error),
}

/// Folds the trace `input` under `folder` into `out`: the input's header (noting the plan's
/// rules), then the folded events.
pub fn fold_trace(
    input: impl std::io::BufRead + Send,
    folder: &Folder,
    out: impl std::io::Write,
) -> Result<FoldReport, FoldError> {
    let mut reader = crate::reader::TraceReader::new(input, crate::reader::Strictness::Strict)?;
    let mut header = reader.header().clone();
    let rules: Vec<String> = folder
        .rules
        .iter()
        .map(|(r, _)| format!("{} → {}", r.paths.join(" "), r.task))
        .collect();
    header
        .extra
        .insert("offloaded".into(), serde_json::Value::from(rules));
    let mut w = crate::TraceWriter::new(out, &header)?;
    let mut fold = folder.fold();
    for ev in reader.by_ref() {
        for e in fold.push(ev?) {
            w.write(&e)?;
        }
    }
    let (rest, report) = fold.finish();
    for e in rest {
        w.write(&e)?;
    }
    w.finish()?;
    Ok(report)
}
