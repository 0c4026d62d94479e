//! `csd trace`: record programs, convert foreign traces, check traces.

use anyhow::{bail, Context};
use csd_traces::import::{convert, ImportFormat};
use csd_traces::{Header, Strictness, TraceError, TraceReader, TraceWriter};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(clap::Subcommand, Debug)]
pub enum TraceCmd {
    /// Run a command under strace and save what it did to files as a csd trace.
    ///
    /// strace stops the program only at the system calls the trace is made of (files,
    /// descriptors, mappings, processes), through a seccomp filter where the kernel allows
    /// one, so the program runs slowed down less than under a plain `strace -f`.
    ///
    /// Example: csd trace record -o untar.trace -- tar xf linux.tar.gz
    Record {
        /// Where to write the trace.
        #[arg(short, long)]
        out: PathBuf,
        /// Also keep strace's own output here.
        #[arg(long)]
        keep_strace: Option<PathBuf>,
        /// Trace every system call, not only those the trace is made of (for a complete
        /// `--keep-strace` log; the program runs slower).
        #[arg(long)]
        all_calls: bool,
        /// The command and its arguments.
        #[arg(required = true, last = true)]
        command: Vec<String>,
    },
    /// Convert a trace from another tool (strace text, fio iolog v3, MSR Cambridge CSV,
    /// DiskSim ASCII) into a csd trace.
    Import {
        /// The input's format: strace (text of `strace -f -ttt -T -y -s0`), fio-iolog3,
        /// msr (MSR Cambridge CSV) or disksim (DiskSim ASCII).
        #[arg(long, value_parser = ["strace", "fio-iolog3", "msr", "disksim"])]
        from: String,
        /// The foreign trace.
        input: PathBuf,
        /// Where to write the csd trace (default: standard output).
        #[arg(short, long)]
        out: Option<PathBuf>,
    },
    /// Store a trace in the run store, so `csd replay` can name it by id or name.
    ///
    /// The trace is read end to end first, and refused with the first bad line.
    Add {
        trace: PathBuf,
        /// Accept ops csd does not know (a recording may hold some): a replay of the trace
        /// then needs --lenient (the dashboard's replay form has the same choice).
        #[arg(long)]
        lenient: bool,
        #[command(flatten)]
        store: super::runs::StorePath,
    },
    /// Fold the host-side scans of a recorded trace into `ndp` requests, as an offload
    /// plan says: what-if analysis of a real program.
    ///
    /// A plan is TOML: `[[rule]]` tables, each with a `task`, its `args`, the `paths` globs
    /// of the files it takes (`*` within a directory, `**` across them) and optionally a
    /// `pid` and a `batch` size. Each file a rule matches that the program opened
    /// read-only, read to its end in order and closed becomes part of one `ndp` op, placed
    /// where the batch's first scan began; everything else stays, in order.
    ///
    /// Example: csd trace offload traces/samples/grep-src.trace --plan
    /// traces/samples/grep-src.plan.toml -o /tmp/offloaded.trace
    Offload {
        trace: PathBuf,
        /// The offload plan (TOML).
        #[arg(long)]
        plan: PathBuf,
        /// Where to write the folded trace (default: standard output).
        #[arg(short, long)]
        out: Option<PathBuf>,
        /// Print what was folded as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Fuse a recorded program's fusible runs into FusionFS CISC ops (`cisc` events).
    ///
    /// Three patterns of one process on one file are fused: open, writes, fsync, close;
    /// writes (and reads) up to an fsync or fdatasync; a pread and the pwrite of the same
    /// range right after it (the modification then runs on the device). Each fused op takes
    /// the place of its first event; an event of another process naming the file ends a run
    /// first, so nothing that could see the file moves. Replay the result with `--design
    /// firmware,fusion` to compare it unfused and fused.
    ///
    /// Example: csd trace fuse traces/samples/sqlite.trace -o /tmp/sqlite.fused.trace
    Fuse {
        trace: PathBuf,
        /// Where to write the fused trace (default: standard output).
        #[arg(short, long)]
        out: Option<PathBuf>,
        /// Print what was fused as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Read a csd trace completely and summarise it (events per op, pids, time span).
    ///
    /// Every task its `ndp` and `isc` ops name must resolve (a built-in task, one kept with
    /// `csd task add`, or a module file): one that does not is an error naming its line.
    Check {
        trace: PathBuf,
        /// Skip and count unknown ops instead of failing on them.
        #[arg(long)]
        lenient: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: super::runs::StorePath,
    },
}

pub fn run(cmd: &TraceCmd) -> anyhow::Result<()> {
    match cmd {
        TraceCmd::Record {
            out,
            keep_strace,
            all_calls,
            command,
        } => record(out, keep_strace.as_deref(), *all_calls, command),
        TraceCmd::Import { from, input, out } => {
            let from: ImportFormat = from.parse().map_err(anyhow::Error::msg)?;
            import(from, input, out.as_deref())
        }
        TraceCmd::Add {
            trace,
            lenient,
            store,
        } => add(trace, *lenient, store),
        TraceCmd::Check {
            trace,
            lenient,
            json,
            store,
        } => check(trace, *lenient, *json, store),
        TraceCmd::Offload {
            trace,
            plan,
            out,
            json,
        } => super::offload::run(trace, plan, out.as_deref(), *json),
        TraceCmd::Fuse { trace, out, json } => super::offload::fuse(trace, out.as_deref(), *json),
    }
}

/// Converts `input` into a csd trace at `out` (or stdout).
fn write_converted(
    source: ImportFormat,
    input: &Path,
    out: Option<&Path>,
    header: Header,
) -> anyhow::Result<csd_traces::import::ImportStats> {
    let reader =
        BufReader::new(File::open(input).with_context(|| format!("opening {}", input.display()))?);
    // A file output is written beside its final name and renamed once complete: a failed
    // conversion leaves whatever was there before untouched.
    let partial = out.map(|p| {
        let mut name = p.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".partial-{}", std::process::id()));
        p.with_file_name(name)
    });
    let sink: Box<dyn Write> = match &partial {
        Some(p) => Box::new(BufWriter::new(
            File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    };
    let mut w = TraceWriter::new(sink, &header)?;
    let converted = convert(source, reader, |e| w.write(&e))
        .with_context(|| format!("converting {}", input.display()))
        .and_then(|stats| Ok(w.finish().map(|_| stats)?));
    match (converted, &partial, out) {
        (Ok(stats), Some(tmp), Some(dest)) => {
            std::fs::rename(tmp, dest)
                .with_context(|| format!("moving the trace to {}", dest.display()))?;
            Ok(stats)
        }
        (Err(e), Some(tmp), _) => {
            let _ = std::fs::remove_file(tmp);
            Err(e)
        }
        (result, _, _) => result,
    }
}

fn import(from: ImportFormat, input: &Path, out: Option<&Path>) -> anyhow::Result<()> {
    let mut header = Header::new(from.name());
    header
        .extra
        .insert("imported_from".into(), input.display().to_string().into());
    let stats = write_converted(from, input, out, header)?;
    eprintln!(
        "csd: {} events from {} lines ({} lines carried nothing to replay)",
        stats.events, stats.lines, stats.ignored
    );
    print_skipped(&stats);
    Ok(())
}

/// What the trace does not carry, by reason: a replay of it misses these calls. And what
/// it carries as an upper bound: the stores through shared mappings.
fn print_skipped(stats: &csd_traces::import::ImportStats) {
    for (why, n) in &stats.skipped {
        eprintln!("csd: skipped {n} call(s): {why}");
    }
    if stats.mapped_writes > 0 {
        eprintln!(
            "csd: note: {} mapped write(s) of at most {}: strace cannot see stores through a \
             shared mapping, so each page of a range unmapped or synced is taken as written",
            stats.mapped_writes,
            crate::units::fmt_bytes(stats.mapped_bytes)
        );
    }
}

fn record(out: &Path, keep: Option<&Path>, all: bool, command: &[String]) -> anyhow::Result<()> {
    let raw = match keep {
        Some(p) => p.to_path_buf(),
        None => std::env::temp_dir().join(format!("csd-record-{}.strace", std::process::id())),
    };
    let mut strace = Command::new("strace");
    strace.args(["-f", "-ttt", "-T", "-y", "-s0"]);
    if !all {
        // Where the kernel refuses the filter, strace stops at every call as before.
        let calls = csd_traces::import::strace::strace_filter();
        strace.args(["--seccomp-bpf", "-e", &format!("trace={calls}")]);
    }
    let status = strace
        .arg("-o")
        .arg(&raw)
        .arg("--")
        .args(command)
        .status()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => anyhow::anyhow!(
                "strace is not installed (csd trace record runs the command under strace; e.g. apt-get install strace)"
            ),
            _ => anyhow::Error::new(e).context("starting strace"),
        })?;
    if !raw.exists() {
        bail!(
            "strace produced no output (exit status {status}); is ptrace allowed here? \
             (an strace older than 5.3 lacks --seccomp-bpf: try --all-calls)"
        );
    }
    let mut header = Header::new("strace");
    header
        .extra
        .insert("command".into(), command.join(" ").into());
    let stats = match write_converted(ImportFormat::Strace, &raw, Some(out), header) {
        Ok(stats) => stats,
        // The command may have run for hours: its strace log is kept for `csd trace import`
        // once the importer reads it, rather than lost with the failed conversion.
        Err(e) => return Err(e.context(format!("the raw strace log is kept at {}", raw.display()))),
    };
    if keep.is_none() {
        let _ = std::fs::remove_file(&raw);
    }
    eprintln!(
        "csd: recorded {} file-system events from `{}` into {}",
        stats.events,
        command.join(" "),
        out.display()
    );
    print_skipped(&stats);
    if !status.success() {
        eprintln!("csd: note: the command exited with {status}; its trace is kept");
    }
    Ok(())
}

#[derive(Serialize)]
struct Summary {
    source: String,
    events: u64,
    by_op: BTreeMap<&'static str, u64>,
    pids: usize,
    /// Distinct fd tables: fewer than `pids` where threads share one (`fds_of`).
    fd_tables: usize,
    span_ns: u64,
    bytes_read: u64,
    bytes_written: u64,
    /// The ranges `mapped_write` events name (before the replay cuts them at each file's
    /// end): what stores through shared mappings wrote at most.
    bytes_mapped: u64,
    skipped_unknown_ops: BTreeMap<String, u64>,
}

impl Summary {
    /// The bytes `ev` (each event of a CISC op) reads, writes or stores through a mapping.
    fn count_bytes(&mut self, ev: &csd_traces::Event) {
        use csd_traces::Op;
        let inner = match &ev.op {
            Op::Cisc { ops, .. } => ops.as_slice(),
            _ => std::slice::from_ref(ev),
        };
        for e in inner {
            match e.op {
                Op::Read { len, .. } | Op::Pread { len, .. } | Op::Bread { len, .. } => {
                    self.bytes_read += len
                }
                Op::Write { len, .. } | Op::Pwrite { len, .. } | Op::Bwrite { len, .. } => {
                    self.bytes_written += len
                }
                Op::MappedWrite { len, .. } => self.bytes_mapped += len,
                _ => {}
            }
        }
    }
}

/// The tasks a trace's ops name, each resolved once.
struct TaskCheck<'a> {
    resolver: csd::tasks::Resolver<'a>,
    seen: BTreeMap<String, Result<(), String>>,
}

impl TaskCheck<'_> {
    /// An `ndp` or `isc` op's task must resolve; why not, if it does not.
    fn check(&mut self, op: &csd_traces::Op) -> Result<(), String> {
        let (csd_traces::Op::Ndp { task, .. } | csd_traces::Op::Isc { task, .. }) = op else {
            return Ok(());
        };
        let resolver = &self.resolver;
        let known = self.seen.entry(task.clone()).or_insert_with(|| {
            resolver
                .resolve(task)
                .map(|_| ())
                .map_err(|e| format!("{e:#}"))
        });
        known
            .clone()
            .map_err(|e| format!("the {} op names a task that cannot be run: {e}", op.name()))
    }
}

fn check(
    path: &Path,
    lenient: bool,
    json: bool,
    store: &super::runs::StorePath,
) -> anyhow::Result<()> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let strictness = Strictness::lenient_if(lenient);
    let reader = TraceReader::new(BufReader::new(file), strictness)
        .with_context(|| format!("reading {}", path.display()))?;
    let mut s = Summary {
        source: reader.header().source.clone(),
        events: 0,
        by_op: BTreeMap::new(),
        pids: 0,
        fd_tables: 0,
        span_ns: 0,
        bytes_read: 0,
        bytes_written: 0,
        bytes_mapped: 0,
        skipped_unknown_ops: BTreeMap::new(),
    };
    let mut pids = std::collections::BTreeSet::new();
    let mut tables = std::collections::BTreeSet::new();
    // Each task an `ndp` or `isc` op names must resolve, as a replay would resolve it.
    let store = store.args();
    let stored = super::runs::stored_tasks(&store);
    let mut tasks = TaskCheck {
        resolver: csd::tasks::Resolver {
            stored: &stored,
            paths: csd::tasks::Paths::Allowed,
        },
        seen: BTreeMap::new(),
    };
    // Parsed on every core: checking a trace of millions of events is a wait otherwise.
    let checked = reader.for_each_parsed_wide(|line, ev| -> Result<(), Refused> {
        if let Err(e) = tasks.check(&ev.op) {
            return Err(Refused::Task(line, e));
        }
        s.events += 1;
        *s.by_op.entry(ev.op.name()).or_default() += 1;
        pids.insert(ev.pid);
        tables.insert(ev.fd_table());
        s.span_ns = s.span_ns.max(ev.t + ev.dur.unwrap_or(0));
        s.count_bytes(ev);
        Ok(())
    });
    s.skipped_unknown_ops = match checked {
        Ok(skipped) => skipped,
        Err(Refused::Trace(e)) => {
            return Err(e).with_context(|| format!("reading {}", path.display()))
        }
        Err(Refused::Task(line, e)) => bail!("{} line {line}: {e}", path.display()),
    };
    s.pids = pids.len();
    s.fd_tables = tables.len();
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print_summary(path, &s);
    }
    Ok(())
}

/// Why `trace check` refused a trace: a line the reader refused, or a task no replay could
/// run.
enum Refused {
    Trace(TraceError),
    Task(u64, String),
}

impl From<TraceError> for Refused {
    fn from(e: TraceError) -> Refused {
        Refused::Trace(e)
    }
}

fn print_summary(path: &Path, s: &Summary) {
    // Threads that share an fd table are named: their fds are one another's.
    let tables = match s.fd_tables < s.pids {
        true => format!(" ({} fd table(s))", s.fd_tables),
        false => String::new(),
    };
    println!(
        "{}: {} events from {} pid(s){tables} over {}, source {}",
        path.display(),
        s.events,
        s.pids,
        crate::units::fmt_duration(s.span_ns),
        s.source
    );
    let mapped = match s.bytes_mapped {
        0 => String::new(),
        n => format!(" · through mappings at most {}", crate::units::fmt_bytes(n)),
    };
    println!(
        "  read {} · written {}{mapped}",
        crate::units::fmt_bytes(s.bytes_read),
        crate::units::fmt_bytes(s.bytes_written)
    );
    // As wide as the longest op name (`sync_file_range`), ten at least.
    let w = s.by_op.keys().map(|op| op.len()).max().unwrap_or(0).max(10);
    for (op, n) in &s.by_op {
        println!("  {op:<w$} {n}");
    }
    for (op, n) in &s.skipped_unknown_ops {
        println!("  skipped unknown op {op}: {n}");
    }
}

fn add(path: &Path, lenient: bool, store: &super::runs::StorePath) -> anyhow::Result<()> {
    // Check it first: the store keeps only traces that read end to end.
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut events = 0u64;
    let strictness = Strictness::lenient_if(lenient);
    TraceReader::new(BufReader::new(file), strictness)
        .and_then(|r| {
            r.for_each_parsed_wide(|_, _| -> Result<(), TraceError> {
                events += 1;
                Ok(())
            })
        })
        .with_context(|| format!("reading {}", path.display()))?;
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let s = super::runs::open(&store.args())?;
    let t = s.add_trace(&name, &bytes)?;
    println!(
        "{} {} ({} events) stored in {}",
        t.id,
        t.name,
        events,
        s.path().display()
    );
    Ok(())
}
