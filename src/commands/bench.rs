//! `csd bench`: speed and memory of the model itself, measured in wall time and RSS.
//!
//! These are the only numbers in csdlab that depend on the machine; they live here, never in
//! tests. Each run prints the measured figure beside its target as a ratio.

use crate::units::{fmt_bytes, thousands};
use anyhow::{bail, Context};
use csd_device::rng::SimRng;
use csd_device::{DataMode, Device, Ftl, IoPath, Lpn, Profile, VirtualTime};
use serde::{Deserialize, Serialize};
use std::time::Instant;

#[derive(clap::Subcommand, Debug)]
pub enum BenchCmd {
    /// FTL speed with GC active at high utilisation, and peak memory of a 1 TiB device.
    Ftl(FtlArgs),
    /// (internal) the memory half of `bench ftl`, run in a fresh process.
    #[command(hide = true)]
    FtlRss(RssArgs),
}

#[derive(clap::Args, Debug)]
pub struct FtlArgs {
    /// Random page writes to time (after fill and warm-up).
    #[arg(long, default_value_t = 10_000_000)]
    pub writes: u64,
    /// Fraction of the logical space filled before the random writes (utilisation).
    #[arg(long, default_value_t = 0.9)]
    pub fill: f64,
    /// Random writes for the memory measurement.
    #[arg(long, default_value_t = 1_000_000)]
    pub rss_writes: u64,
    /// Profile for the memory measurement.
    #[arg(long, default_value = "cosmos-plus")]
    pub rss_profile: String,
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

/// Targets from issue 3 (≥ 5 M simulated page writes/s; < 256 MiB for the 1 TiB run).
const TARGET_WRITES_PER_SEC: f64 = 5e6;
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
}

pub fn run(cmd: &BenchCmd) -> anyhow::Result<()> {
    match cmd {
        BenchCmd::Ftl(args) => ftl(args),
        BenchCmd::FtlRss(args) => {
            let report = rss_child(args)?;
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
    let report = FtlBenchReport {
        throughput,
        memory,
        target_rss_bytes: TARGET_RSS_BYTES,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
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
    Ok(())
}

/// Fills `fill` of the logical space, warms GC up with one pass of random writes, then
/// times `writes` more.
fn throughput(args: &FtlArgs) -> anyhow::Result<ThroughputReport> {
    let p = throughput_profile()?;
    let g = &p.geometry;
    let hot = (g.logical_pages() as f64 * args.fill) as u64;
    let bar = super::device::progress_bar(2 * (hot * 2 + args.writes), "page writes");

    let mut ftl = Ftl::new(g, &p.ftl, false);
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
    for _ in 0..args.writes {
        ftl.write(Lpn(rng.below(hot)), None)?;
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
    for _ in 0..args.writes {
        t = dev
            .write(IoPath::Internal, t, Lpn(rng.below(hot)), 1, None)?
            .done;
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
    let exe = std::env::current_exe().context("locating the csd executable")?;
    let out = std::process::Command::new(exe)
        .args([
            "bench",
            "ftl-rss",
            "--profile",
            profile,
            "--writes",
            &writes.to_string(),
        ])
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

/// A `kB` field of /proc/self/status, in bytes.
fn proc_status_bytes(field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")
        .context("reading /proc/self/status (the memory benchmark needs Linux)")?;
    let line = status
        .lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))
        .with_context(|| format!("no {field} in /proc/self/status"))?;
    let kb: u64 = line[field.len() + 1..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .with_context(|| format!("parsing {line:?}"))?;
    Ok(kb * 1024)
}
