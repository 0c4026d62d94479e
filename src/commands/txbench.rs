//! `csd txbench`: TxISC §V-B's transaction-overhead microbenchmark (Fig. 3).
//!
//! Two halves, as in the paper, both in virtual time (deterministic), each at every write
//! ratio and queue depth. With flash timing on, bandwidth comes from the device model. With
//! flash timing off, the paper removes every latency simulation so only the firmware's own
//! work remains: here NAND operations and transfers take a nanosecond, and what is left is
//! the firmware core's request handling (`device_cpu.request_ns`), its mapping lookups
//! (`device_cpu.cached_entry_ns` per extent or delta-tree node, `metadata_entry_ns` per L2P
//! entry a commit applies), each delta it records (`device_cpu.delta_record_ns`) and each
//! page's copy to or from the DDR4 backing store (`timing.backend_bytes_per_sec`), the same
//! model `csd repro txisc` judges at QD 1. A third table times the simulator itself on this
//! machine (the only machine-dependent numbers this command prints).

use crate::units::parse_size;
use anyhow::{bail, Context};
use csd_device::txn::bench::{self, without_flash_timing, Bench, Measured, Point};
use csd_device::txn::{delta_entry_bytes, DeltaPage, ExecMode};
use csd_device::Profile;
use csd_traces::report::{CpuPoint, Report, TxbenchRun};
use csd_traces::spec::{SystemKind, SystemSpec};
use csd_traces::store::NewRun;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct TxbenchArgs {
    /// Device profile (TxISC's testbed is daisyplus-femu).
    #[arg(long, default_value = "daisyplus-femu")]
    pub profile: String,
    /// Write percentages to sweep.
    #[arg(long, value_delimiter = ',', default_value = "0,50,100")]
    pub writes: Vec<u32>,
    /// Queue depths to sweep.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
    pub qd: Vec<u32>,
    /// Requests per point, with flash timing on and off.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub requests: u64,
    /// Size of the file the task works on.
    #[arg(long, default_value = "1g", value_parser = parse_size)]
    pub file_size: u64,
    /// Requests per point when timing the simulator on this machine (flash timing off, QD 1).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub cpu_requests: u64,
    /// Timed repetitions per simulator-timing point; the fastest is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Skip timing the simulator on this machine.
    #[arg(long)]
    pub no_cpu: bool,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: super::runs::StoreArgs,
}

pub fn run(args: &TxbenchArgs) -> anyhow::Result<()> {
    if let Some(w) = args.writes.iter().find(|&&w| w > 100) {
        bail!("--writes {w}: a write percentage is 0 to 100");
    }
    if args.qd.contains(&0) {
        bail!("--qd 0: a queue depth is at least 1");
    }
    let profile = Profile::load(&args.profile)?;
    args.store.check()?;
    let point = |mode, write_pct, qd| {
        let p = Point {
            write_pct,
            qd,
            requests: args.requests,
        };
        (mode, p)
    };
    let mut points = Vec::new();
    for &write_pct in &args.writes {
        for &qd in &args.qd {
            points.extend(ExecMode::ALL.map(|mode| point(mode, write_pct, qd)));
        }
    }
    // The same grid with flash timing off (a stored run keeps both lists: older runs had
    // only QD 1 here).
    let off_points = points.clone();
    let stored = rerun(&profile, args.file_size, &points, &off_points, args.seed)?;
    let mut report = stored.clone();
    if !args.no_cpu {
        report.flash_timing_off = time_simulator(&profile, args)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_tables(&report);
    }
    // The simulator's own timing is this machine's, so no rerun could repeat it: the run
    // keeps the virtual-time halves only.
    let system = SystemKind::Txbench {
        file_bytes: args.file_size,
        points,
        off_points,
    };
    args.store.save_and_say(NewRun {
        trace: None,
        profile: profile.name.clone(),
        designs: ExecMode::ALL.iter().map(|m| m.name().to_string()).collect(),
        seed: args.seed,
        report: Report::Txbench(stored),
        spec: Some(SystemSpec::new(profile, args.seed, system)),
        sweep: None,
    })
}

/// The virtual-time report of `points` on `profile` and of `off_points` on it with flash
/// timing off: what `csd txbench` prints and stores, and `csd runs rerun` repeats.
pub fn rerun(
    profile: &Profile,
    file_bytes: u64,
    points: &[(ExecMode, Point)],
    off_points: &[(ExecMode, Point)],
    seed: u64,
) -> anyhow::Result<TxbenchRun> {
    let layout = |p: &Profile| {
        Bench::new(p, file_bytes).with_context(|| format!("laying out a {file_bytes}-byte file"))
    };
    let bench = layout(profile)?;
    let on = measure_points(&bench, points, seed)?;
    let mut report = report(profile, &bench, seed, on, Vec::new());
    if !off_points.is_empty() {
        let off = layout(&without_flash_timing(profile))?;
        report.flash_timing_off_model = measure_points(&off, off_points, seed)?;
    }
    Ok(report)
}

/// This machine's CPU time per request to simulate each write ratio under every mode with
/// flash timing off (the fastest of `--repeat` runs).
fn time_simulator(profile: &Profile, args: &TxbenchArgs) -> anyhow::Result<Vec<CpuPoint>> {
    let bench = Bench::new(profile, args.file_size)
        .with_context(|| format!("laying out a {}-byte file", args.file_size))?;
    let mut off = Vec::new();
    for &write_pct in &args.writes {
        for mode in ExecMode::ALL {
            let point = Point {
                write_pct,
                qd: 1,
                requests: args.cpu_requests,
            };
            let mut best = f64::INFINITY;
            for _ in 0..args.repeat.max(1) {
                let mut dev = bench.device.clone();
                let t0 = Instant::now();
                bench::run(&bench, &mut dev, mode, point, args.seed)?;
                let ns = t0.elapsed().as_nanos() as f64 / args.cpu_requests as f64;
                best = best.min(ns);
            }
            off.push(CpuPoint {
                mode,
                write_pct,
                requests: args.cpu_requests,
                ns_per_request: best,
            });
        }
    }
    Ok(off)
}

/// Measures each (mode, point) in virtual time, each on a fresh copy of `bench`'s device:
/// what `csd txbench` runs with flash timing on, and `csd runs rerun` repeats.
pub fn measure_points(
    bench: &Bench,
    points: &[(ExecMode, Point)],
    seed: u64,
) -> anyhow::Result<Vec<Measured>> {
    points
        .iter()
        .map(|&(mode, point)| {
            let mut dev = bench.device.clone();
            Ok(bench::run(bench, &mut dev, mode, point, seed)?)
        })
        .collect()
}

/// The report of points measured on `bench` (and, timed on this machine, the firmware's CPU
/// time with flash timing off).
pub fn report(
    profile: &Profile,
    bench: &Bench,
    seed: u64,
    on: Vec<Measured>,
    off: Vec<CpuPoint>,
) -> TxbenchRun {
    TxbenchRun {
        profile: profile.name.clone(),
        file_bytes: bench.file_pages * u64::from(profile.geometry.page_size_bytes),
        request_bytes: u64::from(profile.geometry.page_size_bytes),
        seed,
        flash_timing_on: on,
        flash_timing_off_model: Vec::new(),
        flash_timing_off: off,
        delta_entry_bytes: delta_entry_bytes(),
        delta_page_bytes: std::mem::size_of::<DeltaPage>(),
    }
}

/// `1 - a/b` as a percentage: how much slower `a` is than `b` when both are throughputs.
fn drop_pct(a: f64, b: f64) -> f64 {
    (1.0 - a / b) * 100.0
}

fn print_tables(r: &TxbenchRun) {
    println!(
        "In-storage {} KiB random file I/O on {} ({} MiB file), TxISC Fig. 3",
        r.request_bytes >> 10,
        r.profile,
        r.file_bytes >> 20
    );
    print_measured("flash timing on (virtual time; MB/s)", &r.flash_timing_on);
    print_timing_off(r);
    println!(
        "(throughput change of tx relative to file / block: negative = tx slower; \
              tx commit: the commit's share of tx's time)"
    );
    if let Some(m) = r
        .flash_timing_on
        .iter()
        .filter(|m| m.mode == ExecMode::Tx && m.delta_entries > 0)
        .max_by_key(|m| m.delta_pages)
    {
        let written = m.delta_pages * r.request_bytes;
        println!(
            "\ndelta mappings at {}% writes, QD {}: {} entries for {} pages ({} MiB written):\n  \
             in the device (TxISC's 22 B per entry of flash-contiguous pages): {} B, {:.3}%\n  \
             in this simulator ({} B per entry + {} B per page): {} B, {:.3}%",
            m.write_pct,
            m.qd,
            m.delta_entries,
            m.delta_pages,
            written >> 20,
            m.firmware_delta_bytes,
            m.firmware_delta_bytes as f64 / written as f64 * 100.0,
            r.delta_entry_bytes,
            r.delta_page_bytes,
            m.delta_bytes,
            m.delta_bytes as f64 / written as f64 * 100.0,
        );
    }
}

/// One row per (write ratio, queue depth): the three modes' bandwidth, tx's change against
/// the other two, and the commit's share of tx's time.
fn print_measured(title: &str, points: &[Measured]) {
    if points.is_empty() {
        return;
    }
    println!("\n{title}");
    println!(
        "{:>7} {:>4} {:>10} {:>10} {:>10} {:>11} {:>12} {:>10}",
        "writes", "qd", "tx", "file", "block", "tx vs file", "tx vs block", "tx commit"
    );
    for c in points.chunks(3) {
        let (tx, file, block) = (&c[0], &c[1], &c[2]);
        println!(
            "{:>6}% {:>4} {:>10.1} {:>10.1} {:>10.1} {:>10.2}% {:>11.2}% {:>9.1}%",
            tx.write_pct,
            tx.qd,
            tx.mb_per_s,
            file.mb_per_s,
            block.mb_per_s,
            -drop_pct(tx.mb_per_s, file.mb_per_s),
            -drop_pct(tx.mb_per_s, block.mb_per_s),
            tx.commit_ns as f64 / tx.virtual_ns.max(1) as f64 * 100.0,
        );
    }
}

/// The flash-timing-off tables: the model in virtual time, then the simulator's own CPU time.
fn print_timing_off(r: &TxbenchRun) {
    print_measured(
        "flash timing off (virtual time: the firmware core's request handling, mapping \
         lookups and delta records, and each page's copy to or from the backing store; MB/s)",
        &r.flash_timing_off_model,
    );
    if r.flash_timing_off.is_empty() {
        return;
    }
    println!(
        "\nthe simulator's own CPU time per request with flash timing off (this machine, QD 1; \
         ns/request; not a device figure)"
    );
    println!(
        "{:>7} {:>10} {:>10} {:>10} {:>11} {:>12}",
        "writes", "tx", "file", "block", "tx vs file", "tx vs block"
    );
    for c in r.flash_timing_off.chunks(3) {
        let [tx, file, block] = [0, 1, 2].map(|i| c[i].ns_per_request);
        // The change in throughput, as in the tables above: requests per ns.
        println!(
            "{:>6}% {tx:>10.0} {file:>10.0} {block:>10.0} {:>10.1}% {:>11.1}%",
            c[0].write_pct,
            -drop_pct(1.0 / tx, 1.0 / file),
            -drop_pct(1.0 / tx, 1.0 / block),
        );
    }
}
