//! `csd replay`: a trace through the host file system, the device and each design.

use crate::units::us;
use anyhow::Context;
use csd::ndp::TaskCompute;
use csd::tasks::{Paths, Resolver};
use csd_device::Profile;
use csd_hostfs::ndp::NdpCompute;
use csd_traces::reader::Feed;
use csd_traces::replay::{
    replay_fed, OpRunners, Pace, Prescan, Progress, ReplayError, ReplayOptions, ReplayReport,
    ReplayTarget,
};
use csd_traces::report::{ReplayRun, Report};
use csd_traces::spec::{SystemKind, SystemSpec};
use csd_traces::store::{NewRun, RunStore, TraceRef};
use csd_traces::{Strictness, TraceError};
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;

/// The sample replayed when no trace is given.
pub const SAMPLE_NAME: &str = "untar.trace";

/// The main job's program and plan: `grep -rn` over a source tree, its scans offloaded.
pub const MAIN_TRACE: &str = "grep-src.trace";
pub const MAIN_PLAN: &str = "grep-src.plan.toml";

/// The offload plans compiled into csd (`traces/samples/*.plan.toml`), usable by name.
pub const SAMPLE_PLANS: [(&str, &str); 1] = [(
    "grep-src.plan.toml",
    include_str!("../../traces/samples/grep-src.plan.toml"),
)];

/// The sample traces compiled into csd (`traces/samples/`), replayable by name.
pub const SAMPLES: [(&str, &str); 7] = [
    (
        "untar.trace",
        include_str!("../../traces/samples/untar.trace"),
    ),
    (
        "sqlite.trace",
        include_str!("../../traces/samples/sqlite.trace"),
    ),
    (
        "grep.trace",
        include_str!("../../traces/samples/grep.trace"),
    ),
    (
        "ndp-mixed.trace",
        include_str!("../../traces/samples/ndp-mixed.trace"),
    ),
    (
        "grep-src.trace",
        include_str!("../../traces/samples/grep-src.trace"),
    ),
    (
        "sqlite-inserts.trace",
        include_str!("../../traces/samples/sqlite-inserts.trace"),
    ),
    (
        "ispfs-query.trace",
        include_str!("../../traces/samples/ispfs-query.trace"),
    ),
];

pub fn sample(name: &str) -> Option<&'static str> {
    SAMPLES
        .iter()
        .find(|(n, _)| *n == name || n.strip_suffix(".trace") == Some(name))
        .map(|(_, s)| *s)
}

#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The trace (csd trace format): a file, a trace stored with `csd trace add` (id or
    /// name), or a bundled sample (untar, sqlite, sqlite-inserts, grep, grep-src,
    /// ndp-mixed, ispfs-query). Without one, the
    /// `untar` sample (unpacking a source tarball) is replayed.
    pub trace: Option<PathBuf>,
    /// Device profile [default: cosmos-plus; optane-csd when every design is firmware or
    /// fusion; pcm-zynq when it is ispfs].
    #[arg(long)]
    pub profile: Option<String>,
    /// Designs to compare, comma-separated: frag-s, frag-m, fsr, lightfs (`all` is these
    /// four), host (no offload: the host reads and computes itself, the baseline), device
    /// (the bare device, for block traces), and FusionFS's firmware file system: firmware
    /// (one device round trip per file operation) and fusion (a `csd trace fuse`d trace's
    /// CISC ops as one round trip each), and ispfs (ISPFS on PCM: no page cache, and writes
    /// to a directory's `.isp` command file run as ISP instructions).
    #[arg(long, default_value = "all")]
    pub design: String,
    /// `afap`: each pid as fast as possible, keeping its order; `timed`: not before each
    /// event's recorded time.
    #[arg(long, default_value = "afap")]
    pub mode: Pace,
    /// Seed of the page cache's writeback order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Skip and count unknown ops instead of failing.
    #[arg(long)]
    pub lenient: bool,
    /// Fold the trace's host-side scans into `ndp` requests first, as this offload plan
    /// says (a TOML file, or a bundled plan by name): see `csd trace offload --help`.
    #[arg(long, value_name = "PLAN")]
    pub offload: Option<PathBuf>,
    /// Print each design's per-op latency percentiles after the summary (a replay that
    /// offloads nothing prints them anyway).
    #[arg(long)]
    pub detail: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also serve the dashboard on this address while replaying: follow the progress in the
    /// browser, then see the result (the server keeps running until Ctrl-C). The result is
    /// shown there, so --json and --detail do not go with it.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:7878",
          conflicts_with_all = ["json", "detail"])]
    pub serve: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub store: super::runs::StoreArgs,
}

impl ReplayArgs {
    /// The profile asked for, or the default for the designs asked for.
    pub fn profile_name(&self) -> anyhow::Result<String> {
        if let Some(p) = &self.profile {
            return Ok(p.clone());
        }
        let targets = targets(&self.design)?;
        Ok(if targets.iter().all(|t| t.on_storagefs()) {
            "optane-csd"
        } else if targets.iter().all(|t| *t == ReplayTarget::Ispfs) {
            "pcm-zynq"
        } else {
            "cosmos-plus"
        }
        .to_string())
    }
}

/// Opens the trace afresh for each pass of each replay.
pub type Opener = Box<dyn FnMut() -> std::io::Result<Box<dyn BufRead + Send>>>;

/// Trace bytes held once and read by every pass without a copy.
struct Shared(Arc<Vec<u8>>);

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// Opens a trace held in memory (a sample, a stored trace, a folded one).
pub fn in_memory(bytes: Arc<Vec<u8>>) -> Opener {
    Box::new(move || {
        let pass = std::io::Cursor::new(Shared(bytes.clone()));
        Ok(Box::new(pass) as Box<dyn BufRead + Send>)
    })
}

/// The trace to replay: a file, a trace stored with `csd trace add` (by id or name, looked
/// up with `stored`), a bundled sample by name, or (`None`) the default sample. Returns how
/// to open it and its reference for the run store.
pub fn open_trace(
    trace: Option<&std::path::Path>,
    stored: impl FnOnce(&str) -> Option<(String, Vec<u8>)>,
) -> anyhow::Result<(Opener, TraceRef)> {
    match trace {
        None => open_named(SAMPLE_NAME, |_| None),
        Some(p) if p.is_file() => {
            let p = p.to_path_buf();
            let id = file_id(&p)?;
            let name = p.display().to_string();
            let opener: Opener = Box::new(move || {
                Ok(Box::new(std::io::BufReader::new(std::fs::File::open(&p)?))
                    as Box<dyn BufRead + Send>)
            });
            Ok((opener, TraceRef { id, name }))
        }
        // Not a file: a stored trace or a sample, whose error says all three were tried.
        Some(p) => open_named(&p.display().to_string(), stored),
    }
}

/// A trace by name, never a file: one stored in the run store (looked up with `stored`) or
/// a bundled sample. What the dashboard's replay form may name.
pub fn open_named(
    key: &str,
    stored: impl FnOnce(&str) -> Option<(String, Vec<u8>)>,
) -> anyhow::Result<(Opener, TraceRef)> {
    let (name, bytes) = match stored(key) {
        Some(found) => found,
        None => match sample(key) {
            Some(s) => (format!("(sample) {key}"), s.as_bytes().to_vec()),
            None => anyhow::bail!(
                "no trace '{key}': no such file, no trace of that id or name in the run store (csd trace add stores one), and no bundled sample of that name ({})",
                SAMPLES.map(|(n, _)| n).join(", ")
            ),
        },
    };
    let id = csd_traces::store::trace_id(&bytes);
    Ok((in_memory(Arc::new(bytes)), TraceRef { id, name }))
}

/// The content id of a trace file, hashed as a stream.
fn file_id(p: &std::path::Path) -> anyhow::Result<String> {
    let f = std::fs::File::open(p).with_context(|| format!("opening {}", p.display()))?;
    csd_traces::store::trace_id_of(f).with_context(|| format!("reading {}", p.display()))
}

/// Replays one trace under each design: what `csd replay` and the dashboard's replay form
/// run. `progress` hears (design index, design, progress) of the first design not yet done.
///
/// Designs are independent (each has its own device, file system and runners), so they run
/// side by side, [`TOGETHER`] at a time, on one reading of the trace
/// ([`csd_traces::reader::feed`]): one after another, each parsed the trace again, and
/// parsing was a third of each. Each design's report is the one it would give alone, and
/// the first failing design (in the order given) is the error reported.
// Long: the prescan, then the designs in groups, each with the runners it needs.
pub fn replay_all(
    open: &mut Opener,
    trace: &TraceRef,
    profile: &Profile,
    kinds: &[ReplayTarget],
    opts: &ReplayOptions,
    resolver: &Resolver<'_>,
    progress: impl FnMut(usize, ReplayTarget, Progress),
) -> anyhow::Result<(ReplayRun, NewRun)> {
    let engine = super::task::engine()?;
    // One prescan (the first pass) serves every design.
    let scan = (|| Prescan::run(open()?, opts.strictness))()
        .with_context(|| format!("reading {}", trace.name))?;
    // Every task the trace names, resolved before the replay starts.
    let library = Arc::new(resolver.library(scan.tasks.iter().map(String::as_str)));
    type Heard = std::sync::mpsc::Sender<(usize, Option<Progress>)>;
    let run_one = |i: usize, feed: Feed, heard: &Heard| -> anyhow::Result<ReplayReport> {
        let kind = kinds[i];
        let mut factory = |task: &str, task_args: &str| -> Result<Box<dyn NdpCompute>, String> {
            let t = library.get(task)?;
            TaskCompute::new(
                engine.clone(),
                &t.name,
                &t.wasm,
                task_args.as_bytes().to_vec(),
                profile,
            )
            .map(|c| Box::new(c) as Box<dyn NdpCompute>)
            .map_err(|e| format!("{e:#}"))
        };
        let mut isc = csd::isc::TaskRunner::new(engine.clone(), profile, library.clone());
        // A design that fails ends the group's reading for all: the command fails with it,
        // so the others' replays would be thrown away.
        let stop = feed.stopper();
        let mut stages = if kind.on_storagefs() || kind == ReplayTarget::Ispfs {
            match csd_runtime::WasmStages::new(csd::builtin::STAGES) {
                Ok(s) => Some(s),
                Err(e) => {
                    stop.stop();
                    return Err(e);
                }
            }
        } else {
            None
        };
        let replayed = replay_fed(
            &scan,
            feed,
            profile,
            kind,
            OpRunners {
                compute: &mut factory,
                isc: Some(&mut isc),
                stages: stages
                    .as_mut()
                    .map(|s| s as &mut dyn csd_device::storagefs::StageRunner),
            },
            opts,
            |p| {
                let _ = heard.send((i, Some(p)));
            },
        );
        if replayed.is_err() {
            stop.stop();
        }
        replayed.with_context(|| format!("replaying {} under {kind}", trace.name))
    };
    let mut shown = Shown {
        progress,
        kinds,
        latest: vec![None; kinds.len()],
        done: vec![false; kinds.len()],
    };
    let mut designs = Vec::new();
    for (g, group) in kinds.chunks(TOGETHER).enumerate() {
        let reader = open().with_context(|| format!("reading {}", trace.name))?;
        let (heard, hear) = std::sync::mpsc::channel();
        let reports = csd_traces::reader::feed(
            reader,
            opts.strictness,
            group.len(),
            |j, feed| {
                let i = g * TOGETHER + j;
                // Says the design is done however it ends, a panic included.
                let done = Done(i, heard.clone());
                run_one(i, feed, &done.1)
            },
            || {
                let mut left = group.len();
                while left > 0 {
                    match hear.recv() {
                        Ok((i, Some(p))) => shown.heard(i, p),
                        Ok((i, None)) => {
                            shown.finished(i);
                            left -= 1;
                        }
                        Err(_) => break,
                    }
                }
            },
        );
        // The design that failed, not one it stopped.
        let stopped = |e: &anyhow::Error| {
            matches!(
                e.downcast_ref::<ReplayError>(),
                Some(ReplayError::Trace(TraceError::Stopped))
            )
        };
        let mut reports = reports;
        if let Some(at) = reports
            .iter()
            .position(|r| r.as_ref().is_err_and(|e| !stopped(e)))
        {
            // An error, found above: `?` returns it.
            reports.swap_remove(at)?;
        }
        for report in reports {
            designs.push(report?);
        }
    }
    let report = ReplayRun {
        trace: trace.name.clone(),
        profile: profile.name.clone(),
        mode: opts.pace,
        seed: opts.seed,
        designs,
    };
    let mut spec = SystemSpec::new(
        profile.clone(),
        opts.seed,
        SystemKind::Replay {
            trace: trace.clone(),
            designs: kinds.to_vec(),
            pace: opts.pace,
            strictness: opts.strictness,
        },
    );
    spec.tasks = library.user_tasks();
    let run = NewRun {
        spec: Some(spec),
        trace: Some(trace.clone()),
        profile: profile.name.clone(),
        designs: report
            .designs
            .iter()
            .map(|d| d.design.to_string())
            .collect(),
        seed: opts.seed,
        report: Report::Replay(report.clone()),
        sweep: None,
    };
    Ok((report, run))
}

/// The most designs [`replay_all`] replays on one reading of the trace. Each applies events
/// on a thread of its own, beside one parsing thread: four designs replayed a 1 M-event
/// trace in 1.14 s on two cores together, in 1.46 s two at a time and 1.75 s one after
/// another (each with its own parser), holding 70, 45 and 53 MiB at most. More designs
/// at once hold more systems; past this many, the rest wait for another reading. A design
/// runs one task at a time, so eight stay within the task engine's pool of 16 slots.
const TOGETHER: usize = 8;

/// Tells [`replay_all`]'s progress loop that design `.0` is done when dropped.
struct Done(usize, std::sync::mpsc::Sender<(usize, Option<Progress>)>);

impl Drop for Done {
    fn drop(&mut self) {
        let _ = self.1.send((self.0, None));
    }
}

/// What [`replay_all`] shows of designs running side by side: the progress of the first
/// one not yet done, so a bar moves forward through the designs in order.
struct Shown<'a, F> {
    progress: F,
    kinds: &'a [ReplayTarget],
    latest: Vec<Option<Progress>>,
    done: Vec<bool>,
}

impl<F: FnMut(usize, ReplayTarget, Progress)> Shown<'_, F> {
    fn first_running(&self) -> Option<usize> {
        self.done.iter().position(|d| !d)
    }

    fn heard(&mut self, i: usize, p: Progress) {
        self.latest[i] = Some(p);
        if self.first_running() == Some(i) {
            (self.progress)(i, self.kinds[i], p);
        }
    }

    /// Design `i` is done: the next one not done shows where it has got to.
    fn finished(&mut self, i: usize) {
        self.done[i] = true;
        if let Some(j) = self.first_running() {
            if let Some(p) = self.latest[j] {
                (self.progress)(j, self.kinds[j], p);
            }
        }
    }
}

pub fn options(mode: Pace, seed: u64, lenient: bool) -> ReplayOptions {
    ReplayOptions {
        pace: mode,
        seed,
        strictness: Strictness::lenient_if(lenient),
    }
}

/// Replays and prints (`--serve` is dispatched to [`super::serve::replay_and_serve`] before
/// this, so the dashboard depends on the replay command and not the other way round).
pub fn run(args: &ReplayArgs) -> anyhow::Result<()> {
    // A built-in profile, a file, or one kept in the run store.
    let profile_name = args.profile_name()?;
    let profile = match Profile::load(&profile_name) {
        Err(csd_device::ProfileError::Unknown { .. }) if !args.store.no_store => {
            let store = args.store.clone();
            super::profiles::named(&profile_name, |name| {
                super::runs::open(&store).ok()?.profile_text(name).ok()
            })?
        }
        other => other?,
    };
    let kinds = targets(&args.design)?;
    let opts = options(args.mode, args.seed, args.lenient);
    // Open the store first: a busy store is an error before any work is done.
    args.store.check()?;
    let store_path = (!args.store.no_store).then(|| args.store.path());
    let (mut open, trace_ref) = open_trace(args.trace.as_deref(), |key| {
        let s = RunStore::open_waiting(&store_path?, super::runs::store_patience(), || {}).ok()?;
        s.trace(key).ok().map(|(meta, b)| (meta.name, b))
    })?;
    let (mut open, trace_ref, folded) = match &args.offload {
        Some(plan) => {
            let (open, trace_ref, report, bytes) =
                super::offload::fold_opened(&mut open, &trace_ref, plan)?;
            if !args.json {
                super::offload::say(&report);
            }
            (open, trace_ref, Some(bytes))
        }
        None => (open, trace_ref, None),
    };
    let bar = indicatif::ProgressBar::hidden();
    let started = std::time::Instant::now();
    let stored = super::runs::stored_tasks(&args.store);
    let resolver = Resolver {
        stored: &stored,
        paths: Paths::Allowed,
    };
    let (report, run) = replay_all(
        &mut open,
        &trace_ref,
        &profile,
        &kinds,
        &opts,
        &resolver,
        |_, kind, p| {
            // A bar only once a replay has run for a second.
            if bar.is_hidden() && started.elapsed().as_secs() >= 1 {
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{spinner} [{elapsed_precise}] {msg} {bar:40} {human_pos}/{human_len} events",
                    )
                    .expect("static template"),
                );
            }
            bar.set_length(p.of);
            bar.set_position(p.events);
            bar.set_message(kind.to_string());
        },
    )?;
    bar.finish_and_clear();
    show(args, &report)?;
    // A folded trace is kept in the store with the run, so `csd runs rerun` finds it.
    if let (Some(bytes), false) = (folded, args.store.no_store) {
        super::runs::open(&args.store)?.add_trace(&trace_ref.name, &bytes)?;
    }
    args.store.save_and_say(run)
}

/// Prints the report: JSON, or the summary and (with `--detail`, or when nothing was
/// offloaded) the per-op tables.
fn show(args: &ReplayArgs, report: &ReplayRun) -> anyhow::Result<()> {
    if args.json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        // A replay that offloaded something leads with the summary; one that did not has
        // nothing to summarise beyond its per-op tables.
        let offloaded = report.designs.iter().any(|d| d.ndp.is_some());
        if offloaded {
            super::summary::print(report);
        }
        if args.detail || !offloaded {
            print(report);
            let hosts = report
                .designs
                .iter()
                .filter(|d| ReplayTarget::HOSTS.contains(&d.design))
                .count();
            // In-storage ops of other kinds (a TxISC `isc`, a FusionFS `cisc`) are offloaded
            // work too.
            let in_storage = report.designs.iter().any(|d| {
                d.latency
                    .keys()
                    .any(|op| op.as_str() == "isc" || op.as_str() == "cisc")
            });
            if !offloaded && !in_storage && hosts > 1 {
                println!(
                    "\n(nothing in this trace is offloaded, so the offload designs differ only in \
                     how they keep metadata; --offload PLAN folds a recorded program's scans \
                     into ndp requests: see csd trace offload --help)"
                );
            }
        } else {
            print_failures(report);
            println!(
                "\n(per-op latency percentiles: --detail; the run in the dashboard: csd serve)"
            );
        }
    }
    Ok(())
}

fn print(r: &ReplayRun) {
    println!(
        "replay of {} · profile {} · mode {} · seed {}",
        r.trace, r.profile, r.mode, r.seed
    );
    for d in &r.designs {
        // With the firmware's data buffer, writes are programmed when evicted: say how much
        // it served, or "programs 0" after many writes reads as a fault.
        let buffer = match d.device.io.data_buffer_hits {
            0 => String::new(),
            n => format!(" · data-buffer hits {n}"),
        };
        println!(
            "\n{}: {} ops of {} events in {} virtual ({:.0} ops/s) · flash reads {} · programs {} · erases {}{buffer} · WAF {:.2}",
            d.design,
            d.ops,
            d.events,
            crate::units::fmt_duration(d.duration_ns),
            d.ops_per_sec,
            d.device.io.flash_page_reads,
            d.device.io.flash_page_programs,
            d.device.ftl.blocks_erased,
            d.device.waf
        );
        // As wide as the longest op name (`sync_file_range`), ten at least.
        let w = d
            .latency
            .keys()
            .map(|op| op.len())
            .max()
            .unwrap_or(0)
            .max(10);
        println!(
            "  {:<w$} {:>8} {:>7} {:>10} {:>10} {:>10} {:>10}",
            "op", "count", "failed", "p50 µs", "p99 µs", "p99.9 µs", "max µs"
        );
        for (op, l) in &d.latency {
            println!(
                "  {:<w$} {:>8} {:>7} {:>10} {:>10} {:>10} {:>10}",
                op,
                l.count,
                l.failed,
                us(l.p50_ns),
                us(l.p99_ns),
                us(l.p999_ns),
                us(l.max_ns)
            );
        }
        print_totals(d);
    }
    print_fused_against_unfused(r);
}

/// Under one design's latency table: what its offloads, tasks, StorageFS, ISP engine and
/// journal did, and which ops failed or were skipped.
fn print_totals(d: &csd_traces::replay::ReplayReport) {
    if let Some(n) = &d.ndp {
        let b = &n.breakdown;
        println!(
            "  ndp: {} request(s), {} file(s); per file µs: retrieve {:.1} · dma {:.1} · read {:.1} · compute {:.1} · others {:.1} · PAO {:.1}%",
            n.requests,
            n.files,
            b.retrieve_layout_ns / 1e3,
            b.dma_ns / 1e3,
            b.read_file_ns / 1e3,
            b.compute_ns / 1e3,
            b.others_ns / 1e3,
            n.pao * 100.0
        );
        if n.stale_files > 0 {
            println!(
                "  ndp: {} file read(s) older than the host's copy (dirty pages, or metadata still in the journal)",
                n.stale_files
            );
        }
    }
    if let Some(i) = &d.isc {
        println!(
            "  isc: {} task transaction(s), {} committed, {} rolled back",
            i.requests, i.committed, i.aborted
        );
    }
    if let Some(f) = &d.fusion {
        print_storagefs(f);
    }
    if let Some(i) = &d.isp {
        println!(
            "  isp: {} instruction(s) through command files, {} refused; engine busy {:.3} ms over {} bytes, done at {:.3} ms; host I/O waited {:.3} µs for it",
            i.instructions,
            i.refused,
            i.engine_ns as f64 / 1e6,
            i.bytes_compared,
            i.engine_done_ns as f64 / 1e6,
            i.host_wait_ns as f64 / 1e3
        );
    }
    if let Some(j) = &d.journal {
        println!(
            "  journal: {} commit(s), {} log block(s); {} metadata block(s) written home ({} when the log was full)",
            j.commits, j.log_blocks, j.checkpointed, j.full_log_checkpoints
        );
    }
    for (op, e) in &d.first_errors {
        println!("  first failed {op}: {e}");
    }
    if d.missing_walks > 0 {
        println!(
            "  {} call(s) that failed in the trace for a missing name replayed as the path walk they made",
            d.missing_walks
        );
    }
    for (why, n) in &d.skipped {
        println!("  skipped {n}: {why}");
    }
}

/// Under the summary, what the per-op tables would show of ops the model refused: a design
/// whose NDP requests all failed has no figures in the summary, and this says why.
fn print_failures(r: &ReplayRun) {
    let mut first = true;
    for d in &r.designs {
        for (op, e) in &d.first_errors {
            let failed = d.latency.get(op).map_or(0, |l| l.failed);
            if first {
                println!();
                first = false;
            }
            println!("{}: {failed} {op} op(s) failed; the first: {e}", d.design);
        }
    }
}

/// The systems `spec` names: a comma-separated list of designs, where `all` stands for
/// the four offload designs (`all,host` adds the host-only baseline).
pub fn targets(spec: &str) -> anyhow::Result<Vec<ReplayTarget>> {
    let mut out = Vec::new();
    for d in spec.split(',').map(str::trim) {
        let named = if d == "all" {
            ReplayTarget::HOSTS.to_vec()
        } else {
            vec![d.parse::<ReplayTarget>().map_err(anyhow::Error::msg)?]
        };
        for t in named {
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    Ok(out)
}

/// What a StorageFS replay (firmware, fusion) asked of the device and left behind.
fn print_storagefs(f: &csd_traces::system::FusionTotals) {
    println!(
            "  storagefs: {} round trip(s), {} of them CISC ops · {} command(s) · device cores {} µs · stage fuel {} · host modifying {} µs",
            f.requests,
            f.cisc_ops,
            f.commands,
            us(f.device_core_ns),
            f.device_fuel,
            us(f.host_compute_ns)
        );
    println!(
        "  left {} file(s), {} · contents sha256 {}",
        f.files,
        crate::units::fmt_bytes(f.bytes),
        &f.contents_sha256[..16.min(f.contents_sha256.len())]
    );
}

/// With both StorageFS designs in the run: the fused replay against the unfused one.
fn print_fused_against_unfused(r: &ReplayRun) {
    let on = |t: ReplayTarget| r.designs.iter().find(|d| d.design == t);
    if let (Some(unfused), Some(fused)) = (on(ReplayTarget::Firmware), on(ReplayTarget::Fusion)) {
        let trips =
            |d: &csd_traces::replay::ReplayReport| d.fusion.as_ref().map_or(0, |f| f.requests);
        println!(
            "\nfused against unfused: {} → {} ({:.2}× the unfused speed) · round trips {} → {}",
            crate::units::fmt_duration(unfused.duration_ns),
            crate::units::fmt_duration(fused.duration_ns),
            unfused.duration_ns as f64 / fused.duration_ns.max(1) as f64,
            trips(unfused),
            trips(fused)
        );
        let digest = |d: &csd_traces::replay::ReplayReport| {
            d.fusion.as_ref().map(|f| f.contents_sha256.clone())
        };
        println!(
            "final contents: {}",
            if digest(unfused) == digest(fused) {
                "the same, byte for byte"
            } else {
                "DIFFERENT (a fused op did not do what its events did)"
            }
        );
    }
}
