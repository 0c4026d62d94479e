//! `csd bench`: speed and memory of the model itself, measured in wall time and RSS.
//!
//! These are the only numbers in csdlab that depend on the machine; they live here, never in
//! tests. Each run prints the measured figure beside its target as a ratio.

use super::memory::proc_status_bytes;
use crate::units::{fmt_bytes, thousands};
use anyhow::{bail, Context};
use csd_device::rng::SimRng;
use csd_device::{DataMode, Device, Ftl, IoPath, Lpn, Profile, VirtualTime};
use serde::{Deserialize, Serialize};
use std::time::Instant;

#[derive(clap::Subcommand, Debug)]
pub enum BenchCmd {
    /// All six benchmarks, each run in a fresh process `--runs` times (about 4 minutes a
    /// round): one table of figures against their targets, the README's "Measured figures".
    All(super::bench_all::AllArgs),
    /// FTL speed with GC active at high utilisation, and peak memory of a 1 TiB device.
    Ftl(FtlArgs),
    /// Native vs Wasm speed of the task kernels, and the cost of one task invocation.
    Tasks(TasksArgs),
    /// SIFT's range-tree coalescing on the 5.26 M-update high-overlap replay set (wall time).
    Coalesce(super::bench_coalesce::CoalesceArgs),
    /// CISC ops StorageFS executes per second of wall time (stages in wasmtime, one core).
    Cisc(super::bench_cisc::CiscArgs),
    /// Replay speed (events/s) on a metadata-heavy trace, and memory against trace length.
    Replay(super::bench_replay::ReplayBenchArgs),
    /// Wall-time speedup of `csd sweep --jobs N` over `--jobs 1` on a 16-point grid.
    Sweep(super::bench_sweep::SweepBenchArgs),
    /// (internal) one replay measurement, run in a fresh process.
    #[command(hide = true)]
    ReplayChild(super::bench_replay::ReplayChildArgs),
    /// (internal) the memory half of `bench ftl`, run in a fresh process.
    #[command(hide = true)]
    FtlRss(RssArgs),
    /// (internal) the sustained-overwrite half of `bench ftl`, run in a fresh process.
    #[command(hide = true)]
    FtlRunRss(RunRssArgs),
}

#[derive(clap::Args, Debug)]
pub struct FtlArgs {
    /// Random page writes to time (after fill and warm-up).
    #[arg(long, default_value_t = 10_000_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000_000))]
    pub writes: u64,
    /// Fraction of the logical space filled before the random writes (utilisation).
    #[arg(long, default_value_t = 0.9)]
    pub fill: f64,
    /// Random writes for the memory measurement.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000_000))]
    pub rss_writes: u64,
    /// Profile for the memory measurement.
    #[arg(long, default_value = "cosmos-plus")]
    pub rss_profile: String,
    /// Bytes of the sustained overwrite whose peak memory is measured (`csd device run
    /// --profile daisyplus-femu --rw randwrite --bs 16k --qd 32 --prefill` over 59 GiB);
    /// 0 skips it.
    #[arg(long, default_value = "60g", value_parser = crate::units::parse_size)]
    pub run_bytes: u64,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct RunRssArgs {
    #[arg(long)]
    pub io: u64,
}

/// The sustained overwrite's peak memory, and the requests it simulated per wall second.
#[derive(Serialize, Deserialize, Debug)]
struct RunRssReport {
    profile: String,
    region_bytes: u64,
    io_bytes: u64,
    requests: u64,
    rss_peak_bytes: u64,
    wall_ms: u64,
}

#[derive(clap::Args, Debug)]
pub struct TasksArgs {
    /// Input size for each kernel.
    #[arg(long, default_value = "64m", value_parser = crate::units::parse_size_in_memory)]
    pub size: u64,
    /// Timed repetitions per kernel (the best is reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Invocations of the empty task to time (each latency is kept for the percentiles).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub invocations: u32,
    /// Time only these kernels (repeatable; default: all four), e.g. to profile one alone.
    #[arg(long = "kernel", value_name = "KERNEL", value_parser = ["stats64", "checksum", "grep", "knn"])]
    pub kernels: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct RssArgs {
    #[arg(long)]
    pub profile: String,
    #[arg(long)]
    pub writes: u64,
}

/// Targets: ≥ 10 M simulated page writes/s (issue 22; issue 3 asked for 5 M); < 256 MiB for
/// the 1 TiB run (issue 3).
const TARGET_WRITES_PER_SEC: f64 = 10e6;
const TARGET_RSS_BYTES: u64 = 256 << 20;

#[derive(Serialize, Deserialize, Debug)]
struct RssReport {
    profile: String,
    physical_bytes: u64,
    logical_pages: u64,
    writes: u64,
    rss_baseline_bytes: u64,
    rss_peak_bytes: u64,
    l2p_heap_bytes: u64,
}

#[derive(Serialize, Debug)]
struct ThroughputReport {
    geometry: String,
    page_size_bytes: u32,
    utilisation: f64,
    writes: u64,
    ftl_writes_per_sec: f64,
    device_writes_per_sec: f64,
    waf: f64,
    gc_victims: u64,
    target_writes_per_sec: f64,
}

#[derive(Serialize, Debug)]
struct FtlBenchReport {
    throughput: ThroughputReport,
    memory: RssReport,
    target_rss_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    sustained: Option<RunRssReport>,
}

pub fn run(cmd: &BenchCmd) -> anyhow::Result<()> {
    // Tables name their machine first; `--json` reports carry it (`machine::print_json`).
    let table = match cmd {
        BenchCmd::Ftl(a) => !a.json,
        BenchCmd::Tasks(a) => !a.json,
        BenchCmd::Coalesce(a) => !a.json,
        BenchCmd::Cisc(a) => !a.json,
        BenchCmd::Replay(a) => !a.json,
        BenchCmd::Sweep(a) => !a.json,
        // It names the machine itself (its Markdown rows carry it in their header).
        BenchCmd::All(_) => false,
        BenchCmd::ReplayChild(_) | BenchCmd::FtlRss(_) | BenchCmd::FtlRunRss(_) => false,
    };
    if table {
        println!("machine: {}\n", super::machine::Machine::this());
    }
    match cmd {
        BenchCmd::All(args) => super::bench_all::run(args),
        BenchCmd::Ftl(args) => ftl(args),
        BenchCmd::Tasks(args) => tasks(args),
        BenchCmd::Coalesce(args) => super::bench_coalesce::run(args),
        BenchCmd::Cisc(args) => super::bench_cisc::run(args),
        BenchCmd::Replay(args) => super::bench_replay::run(args),
        BenchCmd::Sweep(args) => super::bench_sweep::run(args),
        BenchCmd::ReplayChild(args) => super::bench_replay::run_child(args),
        BenchCmd::FtlRss(args) => {
            let report = rss_child(args)?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
        BenchCmd::FtlRunRss(args) => {
            let report = run_rss_child(args.io)?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
    }
}

/// The throughput geometry: `daisyplus-femu` (TxISC Table I) with 4 KiB pages, so every
/// simulated write is a 4 KiB random write.
fn throughput_profile() -> anyhow::Result<Profile> {
    let mut p = Profile::load("daisyplus-femu")?;
    p.geometry.page_size_bytes = 4096;
    p.validate()
        .map_err(|(f, r)| anyhow::anyhow!("bench profile: {f}: {r}"))?;
    Ok(p)
}

fn ftl(args: &FtlArgs) -> anyhow::Result<()> {
    if !(0.0..1.0).contains(&args.fill) {
        bail!("--fill must be a fraction below 1, got {}", args.fill);
    }
    let throughput = throughput(args)?;
    let memory = spawn_rss_child(&args.rss_profile, args.rss_writes)?;
    let sustained = if args.run_bytes > 0 {
        Some(spawn_child(&[
            "bench",
            "ftl-run-rss",
            "--io",
            &args.run_bytes.to_string(),
        ])?)
    } else {
        None
    };
    let report = FtlBenchReport {
        throughput,
        memory,
        target_rss_bytes: TARGET_RSS_BYTES,
        sustained,
    };
    if args.json {
        super::machine::print_json(&report)?;
    } else {
        print_ftl(&report);
    }
    Ok(())
}

fn print_ftl(report: &FtlBenchReport) {
    let t = &report.throughput;
    let m = &report.memory;
    println!("csd bench ftl");
    println!();
    println!(
        "  throughput: {}, {:.0}% full, {} random 4 KiB page writes with GC active",
        t.geometry,
        t.utilisation * 100.0,
        thousands(t.writes)
    );
    println!(
        "    FTL only          {:>7.2} M writes/s   {:.2}x the {:.0} M/s target",
        t.ftl_writes_per_sec / 1e6,
        t.ftl_writes_per_sec / t.target_writes_per_sec,
        t.target_writes_per_sec / 1e6
    );
    println!(
        "    FTL + timing      {:>7.2} M writes/s   {:.2}x the target",
        t.device_writes_per_sec / 1e6,
        t.device_writes_per_sec / t.target_writes_per_sec
    );
    println!(
        "    WAF {:.2}, {} GC victims during the timed writes",
        t.waf,
        thousands(t.gc_victims)
    );
    println!();
    println!(
        "  memory: {} ({} raw, {} logical pages), {} random writes, timing-only",
        m.profile,
        fmt_bytes(m.physical_bytes),
        thousands(m.logical_pages),
        thousands(m.writes)
    );
    println!(
        "    peak RSS          {:>10}   {:.2}x the {} target (process baseline {})",
        fmt_bytes(m.rss_peak_bytes),
        m.rss_peak_bytes as f64 / TARGET_RSS_BYTES as f64,
        fmt_bytes(TARGET_RSS_BYTES),
        fmt_bytes(m.rss_baseline_bytes)
    );
    println!("    L2P heap          {:>10}", fmt_bytes(m.l2p_heap_bytes));
    if let Some(r) = &report.sustained {
        println!();
        println!(
            "  sustained overwrite: {} of 16 KiB random writes at QD 32 over {} of {} (prefilled)",
            fmt_bytes(r.io_bytes),
            fmt_bytes(r.region_bytes),
            r.profile
        );
        println!(
            "    peak RSS          {:>10}   {} requests in {:.1} s of wall time, prefill included",
            fmt_bytes(r.rss_peak_bytes),
            thousands(r.requests),
            r.wall_ms as f64 / 1e3
        );
    }
}

/// Requests the throughput benchmark's queue holds ahead of the one being written.
const LOOKAHEAD: usize = 16;

/// Fills `fill` of the logical space, warms GC up with one pass of random writes, then
/// times `writes` more.
fn throughput(args: &FtlArgs) -> anyhow::Result<ThroughputReport> {
    let p = throughput_profile()?;
    let g = &p.geometry;
    let hot = (g.logical_pages() as f64 * args.fill) as u64;
    let bar = super::device::progress_bar(2 * (hot * 2 + args.writes), "page writes");

    let mut ftl = Ftl::new(g, &p.ftl, false)?;
    let mut rng = SimRng::new(42);
    for lpn in 0..hot {
        ftl.write(Lpn(lpn), None)?;
    }
    for _ in 0..hot {
        ftl.write(Lpn(rng.below(hot)), None)?;
    }
    bar.inc(2 * hot);
    ftl.reset_counters();
    let start = Instant::now();
    // The requests waiting in a queue of LOOKAHEAD: the FTL is told of each when it enters
    // (its L2P slot) and again halfway (its old page), as firmware sees its submission queue.
    let mut queue: std::collections::VecDeque<u64> =
        (0..LOOKAHEAD).map(|_| rng.below(hot)).collect();
    for _ in 0..args.writes {
        let lpn = queue.pop_front().expect("the queue is never empty");
        let next = rng.below(hot);
        ftl.prefetch(Lpn(next));
        queue.push_back(next);
        ftl.prefetch_mapping(Lpn(queue[LOOKAHEAD / 2]));
        ftl.write(Lpn(lpn), None)?;
    }
    let ftl_secs = start.elapsed().as_secs_f64();
    bar.inc(args.writes);
    let counters = ftl.counters();
    drop(ftl);

    let mut dev = Device::new(&p, DataMode::TimingOnly)?;
    let mut rng = SimRng::new(42);
    let mut t = VirtualTime::ZERO;
    for lpn in 0..hot {
        dev.write(IoPath::Internal, t, Lpn(lpn), 1, None)?;
    }
    for _ in 0..hot {
        t = dev
            .write(IoPath::Internal, t, Lpn(rng.below(hot)), 1, None)?
            .done;
    }
    bar.inc(2 * hot);
    let start = Instant::now();
    let mut queue: std::collections::VecDeque<u64> =
        (0..LOOKAHEAD).map(|_| rng.below(hot)).collect();
    for _ in 0..args.writes {
        let lpn = queue.pop_front().expect("the queue is never empty");
        let next = rng.below(hot);
        dev.prefetch(Lpn(next));
        queue.push_back(next);
        dev.prefetch_mapping(Lpn(queue[LOOKAHEAD / 2]));
        t = dev.write(IoPath::Internal, t, Lpn(lpn), 1, None)?.done;
    }
    let dev_secs = start.elapsed().as_secs_f64();
    bar.finish_and_clear();
    Ok(ThroughputReport {
        geometry: format!(
            "{} geometry with 4 KiB pages ({} raw)",
            p.name,
            fmt_bytes(g.physical_bytes())
        ),
        page_size_bytes: g.page_size_bytes,
        utilisation: hot as f64 / g.logical_pages() as f64,
        writes: args.writes,
        ftl_writes_per_sec: args.writes as f64 / ftl_secs,
        device_writes_per_sec: args.writes as f64 / dev_secs,
        waf: counters.waf(),
        gc_victims: counters.gc_victims,
        target_writes_per_sec: TARGET_WRITES_PER_SEC,
    })
}

/// Runs the memory measurement in a fresh process so its peak RSS is the device's alone.
fn spawn_rss_child(profile: &str, writes: u64) -> anyhow::Result<RssReport> {
    let writes = writes.to_string();
    spawn_child(&[
        "bench",
        "ftl-rss",
        "--profile",
        profile,
        "--writes",
        &writes,
    ])
}

/// Runs `csd ARGS` in a fresh process (so its peak RSS is its own) and reads its JSON.
fn spawn_child<T: serde::de::DeserializeOwned>(args: &[&str]) -> anyhow::Result<T> {
    let exe = std::env::current_exe().context("locating the csd executable")?;
    let out = std::process::Command::new(exe)
        .args(args)
        .output()
        .context("running the memory benchmark child process")?;
    if !out.status.success() {
        bail!(
            "memory benchmark failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).context("reading the memory benchmark's report")
}

/// The sustained overwrite of issue 22: TxISC's 64 GiB device at 93 % of its logical space,
/// `io` bytes of 16 KiB random writes at QD 32, GC active.
fn run_rss_child(io: u64) -> anyhow::Result<RunRssReport> {
    use csd_device::synth::{RwPattern, SynthJob};
    let p = Profile::load("daisyplus-femu")?;
    let mut dev = Device::new(&p, DataMode::TimingOnly)?;
    let region = (59u64 << 30).min(dev.capacity_bytes());
    let job = SynthJob {
        rw: RwPattern::RandWrite,
        block_size_bytes: 16 << 10,
        queue_depth: 32,
        region_bytes: region,
        io_bytes: io,
        read_percent: 0,
        seed: 1,
        prefill: true,
    };
    let start = Instant::now();
    let r = job.run(&mut dev, &mut |_, _| {})?;
    Ok(RunRssReport {
        profile: p.name.clone(),
        region_bytes: region,
        io_bytes: io,
        requests: r.ops,
        rss_peak_bytes: proc_status_bytes("VmHWM")?,
        wall_ms: start.elapsed().as_millis() as u64,
    })
}

fn rss_child(args: &RssArgs) -> anyhow::Result<RssReport> {
    let rss_baseline_bytes = proc_status_bytes("VmRSS")?;
    let p = Profile::load(&args.profile)?;
    let mut dev = Device::new(&p, DataMode::TimingOnly)?;
    let logical = dev.logical_pages();
    let mut rng = SimRng::new(7);
    let mut t = VirtualTime::ZERO;
    for _ in 0..args.writes {
        t = dev
            .write(IoPath::Host, t, Lpn(rng.below(logical)), 1, None)?
            .done;
    }
    Ok(RssReport {
        profile: p.name.clone(),
        physical_bytes: p.geometry.physical_bytes(),
        logical_pages: logical,
        writes: args.writes,
        rss_baseline_bytes,
        rss_peak_bytes: proc_status_bytes("VmHWM")?,
        l2p_heap_bytes: dev.ftl().l2p().heap_bytes() as u64,
    })
}

/// Targets from issue 22: Wasm within 1.2× of native per kernel; an invocation within 5 µs
/// (issue 4 asked for 1.5× and 20 µs).
const TARGET_WASM_RATIO: f64 = 1.2;
const TARGET_INVOKE_NS: f64 = 5_000.0;

#[derive(Serialize, Debug)]
struct KernelTiming {
    kernel: &'static str,
    /// The kernel alone on data in host memory.
    native_kernel_only_ns: u64,
    /// Device reads (same pattern as the task) plus the kernel, natively.
    native_ns: u64,
    wasm_ns: u64,
    ratio: f64,
}

#[derive(Serialize, Debug)]
struct TasksReport {
    input_bytes: u64,
    /// On `cosmos-plus` (channel-bound) and `daisyplus-femu` (die-bound).
    batched_read: Vec<BatchedRead>,
    /// CRC-32 natively with the CPU's carry-less multiply (not available to Wasm).
    native_hardware_crc32_ns: u64,
    kernels: Vec<KernelTiming>,
    invoke_empty_median_ns: u64,
    invoke_empty_p99_ns: u64,
    target_ratio: f64,
    target_invoke_ns: f64,
    /// `pooling`, or `on-demand` where the pool's address space was refused: the Wasm
    /// times depend on it.
    allocation: &'static str,
}

/// A task reading a whole file in batched requests, against the profile's internal read
/// bandwidth: virtual time, so the same on every machine.
#[derive(Serialize, Debug)]
pub struct BatchedRead {
    pub profile: String,
    pub bytes: u64,
    pub chunk_bytes: u64,
    pub depth: u32,
    pub virtual_ns: u64,
    pub achieved_bytes_per_sec: f64,
    /// dies × page size / t_read: what the dies can sense.
    pub die_bytes_per_sec: f64,
    /// channels × channel bandwidth: what the buses can move.
    pub channel_bytes_per_sec: f64,
    /// The lower of the two: where reads saturate.
    pub internal_bytes_per_sec: f64,
    pub ratio: f64,
}

/// Runs the `readall` task over `path` at queue depth `depth` in 128 KiB requests.
pub fn batched_read(
    csd: &mut csd_runtime::Csd,
    engine: &std::sync::Arc<csd_runtime::TaskEngine>,
    path: &str,
    depth: u32,
) -> anyhow::Result<BatchedRead> {
    use csd_runtime::{FileMode, IscContext};
    let chunk: u64 = 128 << 10;
    let task = engine.load("readall", csd::builtin::task("readall").expect("built-in"))?;
    let ctx = IscContext::new()
        .file(path, FileMode::Read)
        .args(format!(r#"{{"chunk":{chunk},"depth":{depth}}}"#).into_bytes());
    let report = csd.run(&task, &ctx)?;
    let bytes = report.ret_json()?["bytes"].as_u64().unwrap_or(0);
    let virtual_ns = report.breakdown.read_file_ns.max(1);
    let p = csd.profile();
    let die = f64::from(p.geometry.dies()) * p.geometry.page_size_bytes as f64
        / (p.timing.page_read_ns as f64 / 1e9);
    let channel = f64::from(p.geometry.channels) * p.timing.channel_bytes_per_sec as f64;
    let internal = die.min(channel);
    let achieved = bytes as f64 / (virtual_ns as f64 / 1e9);
    Ok(BatchedRead {
        profile: p.name.clone(),
        bytes,
        die_bytes_per_sec: die,
        channel_bytes_per_sec: channel,
        chunk_bytes: chunk,
        depth,
        virtual_ns,
        achieved_bytes_per_sec: achieved,
        internal_bytes_per_sec: internal,
        ratio: achieved / internal,
    })
}

/// The best of `repeat` wall-clock timings of `f`.
fn best_of<T>(repeat: u32, mut f: impl FnMut() -> anyhow::Result<T>) -> anyhow::Result<(u64, T)> {
    let mut best = u64::MAX;
    let mut last = None;
    for _ in 0..repeat.max(1) {
        let start = Instant::now();
        let out = f()?;
        best = best.min(start.elapsed().as_nanos() as u64);
        last = Some(out);
    }
    Ok((best, last.expect("at least one run")))
}

/// A benchmark kernel run natively, fed the input a piece at a time as its task is. The
/// checksum task runs slicing-by-8 (Wasm has no carry-less multiply), so the like-for-like
/// native baseline does too; the hardware CRC is reported apart.
enum NativeKernel<'q> {
    Stats64(u64),
    Checksum(csd_kernels::Crc32Slice8),
    Grep(Box<csd_kernels::GrepStream<'static>>),
    Knn(csd_kernels::KnnStream<'q>),
}

impl<'q> NativeKernel<'q> {
    fn new(name: &str, query: &'q [f32]) -> NativeKernel<'q> {
        match name {
            "stats64" => NativeKernel::Stats64(0),
            "checksum" => NativeKernel::Checksum(csd_kernels::Crc32Slice8::new()),
            "grep" => NativeKernel::Grep(Box::new(csd_kernels::GrepStream::new(b"ERROR", 16))),
            _ => NativeKernel::Knn(csd_kernels::KnnStream::new(query, 10)),
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        match self {
            NativeKernel::Stats64(sum) => *sum = sum.wrapping_add(csd_kernels::stats64(bytes)),
            NativeKernel::Checksum(crc) => crc.update(bytes),
            NativeKernel::Grep(grep) => grep.feed(bytes),
            NativeKernel::Knn(knn) => knn.feed(bytes),
        }
    }

    /// The result as the task reports it, to check the two sides agree.
    fn finish(self) -> serde_json::Value {
        match self {
            NativeKernel::Stats64(sum) => serde_json::json!(sum),
            NativeKernel::Checksum(crc) => serde_json::json!(crc.finalize()),
            NativeKernel::Grep(grep) => serde_json::json!(grep.finish().0),
            NativeKernel::Knn(knn) => serde_json::json!(knn.finish().first().map(|n| n.index)),
        }
    }
}
// Long: the input, then one native and one Wasm measurement per kernel side by side, so the
// comparison stays like for like.
fn tasks(args: &TasksArgs) -> anyhow::Result<()> {
    use csd_runtime::{Csd, FileMode, IscContext};
    let engine = super::task::engine()?;
    let profile = Profile::load("cosmos-plus")?;
    let mut csd = Csd::new(&profile, DataMode::Payloads, engine.clone())?;
    // Deterministic pseudo-random input with some text in it, so grep has matches.
    let mut rng = SimRng::new(11);
    let mut data: Vec<u8> = (0..args.size / 8)
        .flat_map(|_| rng.next_u64().to_le_bytes())
        .collect();
    for at in (0..data.len().saturating_sub(64)).step_by(4096) {
        data[at..at + 5].copy_from_slice(b"ERROR");
    }
    csd.import("/bench/input", &data)?;
    // KNN reads vectors: give it real floats (random bytes would be full of NaNs).
    let vectors: Vec<u8> = (0..args.size / 4)
        .flat_map(|_| ((rng.below(2000) as f32) / 10.0 - 100.0).to_le_bytes())
        .collect();
    csd.import("/bench/vectors", &vectors)?;
    let query: Vec<f32> = (0..csd_kernels::KNN_DIM).map(|i| i as f32 / 7.0).collect();
    let query_json = serde_json::json!({ "query": query, "k": 10 }).to_string();
    let grep_json = r#"{"pattern":"ERROR"}"#.to_string();
    let cases: [(&'static str, String); 4] = [
        ("stats64", String::new()),
        ("checksum", String::new()),
        ("grep", grep_json),
        ("knn", query_json),
    ];
    let mut kernels = Vec::new();
    let chosen = |name: &str| args.kernels.is_empty() || args.kernels.iter().any(|k| k == name);
    for (name, task_args) in cases.into_iter().filter(|(name, _)| chosen(name)) {
        let task = engine.load(name, csd::builtin::task(name).expect("built-in"))?;
        let input = if name == "knn" {
            "/bench/vectors"
        } else {
            "/bench/input"
        };
        let ctx = IscContext::new()
            .file(input, FileMode::Read)
            .args(task_args.into_bytes());
        let (wasm_ns, report) = best_of(args.repeat, || Ok(csd.run(&task, &ctx)?))?;
        // Native end to end: the same kernel code compiled for the host, fed by the same
        // device reads in the same pattern as the task (`STREAM_CHUNK` at a time, into a
        // buffer of one chunk made for the run, as the task makes its ring).
        let (native_ns, native) = best_of(args.repeat, || {
            let mut buf = vec![0u8; csd_kernels::STREAM_CHUNK];
            let mut kernel = NativeKernel::new(name, &query);
            let mut off = 0u64;
            loop {
                let n = csd.read_at(input, off, &mut buf)?;
                if n == 0 {
                    break;
                }
                kernel.feed(&buf[..n]);
                off += n as u64;
            }
            Ok(kernel.finish())
        })?;
        // The kernel alone, on data already in host memory: how much of both totals is I/O.
        // (The bytes are those imported above, still in host memory.)
        let bytes: &[u8] = if name == "knn" { &vectors } else { &data };
        let (kernel_ns, _) = best_of(args.repeat, || {
            let mut kernel = NativeKernel::new(name, &query);
            kernel.feed(bytes);
            Ok(kernel.finish())
        })?;
        let wasm = report.ret_json()?;
        let agrees = match name {
            "stats64" => wasm["sum"] == native,
            "checksum" => wasm["files"][0]["crc32"] == native,
            "grep" => wasm["total"] == native,
            _ => wasm["neighbors"][0]["index"] == native,
        };
        if !agrees {
            bail!("{name}: Wasm and native results differ ({wasm} vs {native})");
        }
        kernels.push(KernelTiming {
            kernel: name,
            native_kernel_only_ns: kernel_ns,
            native_ns,
            wasm_ns,
            ratio: wasm_ns as f64 / native_ns as f64,
        });
    }
    let (hw_crc_ns, _) = best_of(args.repeat, || Ok(csd_kernels::crc32(&data)))?;
    let mut femu = Csd::new(
        &Profile::load("daisyplus-femu")?,
        DataMode::Payloads,
        engine.clone(),
    )?;
    femu.import("/bench/input", &data)?;
    let batched_read = vec![
        batched_read(&mut csd, &engine, "/bench/input", 32)?,
        batched_read(&mut femu, &engine, "/bench/input", 32)?,
    ];
    let empty = engine.load("empty", csd::builtin::task("empty").expect("built-in"))?;
    let ctx = IscContext::new();
    for _ in 0..100 {
        csd.run(&empty, &ctx)?; // warm up the pool slots and caches
    }
    let mut samples = Vec::with_capacity(args.invocations as usize);
    for _ in 0..args.invocations.max(1) {
        let start = Instant::now();
        csd.run(&empty, &ctx)?;
        samples.push(start.elapsed().as_nanos() as u64);
    }
    samples.sort_unstable();
    let report = TasksReport {
        input_bytes: data.len() as u64,
        batched_read,
        native_hardware_crc32_ns: hw_crc_ns,
        kernels,
        invoke_empty_median_ns: samples[samples.len() / 2],
        invoke_empty_p99_ns: samples[samples.len() * 99 / 100],
        target_ratio: TARGET_WASM_RATIO,
        target_invoke_ns: TARGET_INVOKE_NS,
        allocation: match engine.config().allocation {
            csd_runtime::Allocation::Pooling => "pooling",
            csd_runtime::Allocation::OnDemand => "on-demand",
        },
    };
    if args.json {
        super::machine::print_json(&report)?;
        return Ok(());
    }
    println!(
        "csd bench tasks: {} input, best of {}",
        fmt_bytes(report.input_bytes),
        args.repeat
    );
    println!();
    println!(
        "  native: the kernel compiled for the host, fed by the same device reads as the task"
    );
    println!(
        "  wasm:   the task invocation (reads through the runtime, kernel in Wasm; {} allocator)",
        report.allocation
    );
    println!();
    println!(
        "  {:<10} {:>14} {:>12} {:>12} {:>8}   (target ratio ≤ {TARGET_WASM_RATIO})",
        "kernel", "kernel-only ms", "native ms", "wasm ms", "ratio"
    );
    for k in &report.kernels {
        println!(
            "  {:<10} {:>14.2} {:>12.2} {:>12.2} {:>8.2}",
            k.kernel,
            k.native_kernel_only_ns as f64 / 1e6,
            k.native_ns as f64 / 1e6,
            k.wasm_ns as f64 / 1e6,
            k.ratio
        );
    }
    if report.kernels.iter().any(|k| k.kernel == "checksum") {
        println!(
            "  (checksum runs slicing-by-8 on both sides; with the CPU's carry-less multiply \
             the kernel alone takes {:.2} ms)",
            report.native_hardware_crc32_ns as f64 / 1e6
        );
    }
    println!();
    println!(
        "  a task reading {} in 128 KiB requests at queue depth 32 (virtual time; target ≥ 80%):",
        fmt_bytes(report.input_bytes)
    );
    for b in &report.batched_read {
        println!(
            "  {:<15} {:>6.0} MB/s = {:>5.1}% of the internal read bandwidth {:.0} MB/s \
             (dies × page / t_read {:.0}, channels × channel bandwidth {:.0})",
            b.profile,
            b.achieved_bytes_per_sec / 1e6,
            100.0 * b.ratio,
            b.internal_bytes_per_sec / 1e6,
            b.die_bytes_per_sec / 1e6,
            b.channel_bytes_per_sec / 1e6,
        );
    }
    println!();
    println!(
        "  empty task invocation: median {:.1} µs, p99 {:.1} µs ({:.2}x the {:.0} µs target)",
        report.invoke_empty_median_ns as f64 / 1e3,
        report.invoke_empty_p99_ns as f64 / 1e3,
        report.invoke_empty_median_ns as f64 / TARGET_INVOKE_NS,
        TARGET_INVOKE_NS / 1e3
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `csd bench all` finds every `ftl` figure in the report `csd bench ftl --json` prints
    /// (the other benchmarks' are checked by running them, in `tests/cli.rs`; this one takes
    /// minutes in a test build).
    #[test]
    fn bench_all_reads_every_ftl_figure() {
        let report = FtlBenchReport {
            throughput: ThroughputReport {
                geometry: String::new(),
                page_size_bytes: 4096,
                utilisation: 0.9,
                writes: 1,
                ftl_writes_per_sec: 1.0,
                device_writes_per_sec: 2.0,
                waf: 3.3,
                gc_victims: 1,
                target_writes_per_sec: TARGET_WRITES_PER_SEC,
            },
            memory: RssReport {
                profile: String::new(),
                physical_bytes: 1,
                logical_pages: 1,
                writes: 1,
                rss_baseline_bytes: 1,
                rss_peak_bytes: 3,
                l2p_heap_bytes: 1,
            },
            target_rss_bytes: TARGET_RSS_BYTES,
            sustained: Some(RunRssReport {
                profile: String::new(),
                region_bytes: 1,
                io_bytes: 1,
                requests: 1,
                rss_peak_bytes: 4,
                wall_ms: 1,
            }),
        };
        let v = serde_json::to_value(&report).unwrap();
        let read: Vec<f64> = super::super::bench_all::FIGURES
            .iter()
            .filter(|f| f.bench == "ftl")
            .map(|f| (f.value)(&v).unwrap_or_else(|| panic!("no {}", f.id)))
            .collect();
        assert_eq!(read, [1.0, 2.0, 3.0, 4.0]);
    }

    /// Issue 17's bar for batched task I/O: a 64 MiB read at queue depth 32 within 20 % of
    /// the internal read bandwidth, in virtual time (so this is not a timing test).
    #[test]
    fn a_batched_read_reaches_the_internal_bandwidth() {
        let engine = super::super::task::engine().unwrap();
        for profile in ["daisyplus-femu", "cosmos-plus"] {
            let p = Profile::load(profile).unwrap();
            let mut csd = csd_runtime::Csd::new(&p, DataMode::Payloads, engine.clone()).unwrap();
            csd.import("/in", &vec![7u8; 64 << 20]).unwrap();
            let b = batched_read(&mut csd, &engine, "/in", 32).unwrap();
            assert_eq!(b.bytes, 64 << 20);
            assert!(b.ratio >= 0.8, "{profile}: {b:?}");
            // One request at a time (its 8 pages on 8 dies) cannot get there: the batching
            // is what does it.
            let one = batched_read(&mut csd, &engine, "/in", 1).unwrap();
            assert!(
                one.ratio < 0.75 * b.ratio,
                "{profile}: QD 1 {one:?} vs QD 32 {b:?}"
            );
        }
    }
}
