//! `csd fusion`: FusionFS's comparison (§2, Fig. 3) of five file-system designs on one
//! Optane medium, throughput per thread count.

use anyhow::Context;
use csd_device::Profile;
use csd_hostfs::fusion::{self, CpuSpeed, Design, FusionReport, FusionSpec, Workload};
use csd_runtime::WasmStages;
use csd_traces::report::Report;
use csd_traces::spec::{SystemKind, SystemSpec};
use csd_traces::store::NewRun;

#[derive(clap::Args, Debug)]
pub struct FusionArgs {
    /// The benchmark: append-crc-write or read-modify-write (4 KiB records).
    #[arg(long, value_enum, default_value = "append-crc-write")]
    pub workload: WorkloadArg,
    /// Thread counts (each thread has its own file).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    pub threads: Vec<u32>,
    /// Device-core speed for firmware and fusion: fast (2.7 GHz), slow (1.2 GHz) or both.
    #[arg(long, value_enum, default_value = "both")]
    pub device_cpu: SpeedArg,
    /// Designs to compare (comma-separated), or all.
    #[arg(long, default_value = "all")]
    pub design: String,
    /// Ops each thread issues.
    #[arg(long, default_value_t = 2000)]
    pub ops: u32,
    /// Device profile (FusionFS's testbed is optane-csd).
    #[arg(long, default_value = "optane-csd")]
    pub profile: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: super::runs::StoreArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum WorkloadArg {
    AppendCrcWrite,
    ReadModifyWrite,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum SpeedArg {
    Fast,
    Slow,
    Both,
}

fn designs(list: &str) -> anyhow::Result<Vec<Design>> {
    if list == "all" {
        return Ok(Design::ALL.to_vec());
    }
    list.split(',')
        .map(|n| {
            Design::ALL
                .into_iter()
                .find(|d| d.name() == n.trim())
                .with_context(|| {
                    format!(
                        "unknown design '{n}' (known: kernel-dax, nova, user-direct, firmware, fusion, all)"
                    )
                })
        })
        .collect()
}

pub fn spec(args: &FusionArgs) -> anyhow::Result<FusionSpec> {
    Ok(FusionSpec {
        workload: match args.workload {
            WorkloadArg::AppendCrcWrite => Workload::AppendCrcWrite,
            WorkloadArg::ReadModifyWrite => Workload::ReadModifyWrite,
        },
        threads: args.threads.clone(),
        ops_per_thread: args.ops,
        speeds: match args.device_cpu {
            SpeedArg::Fast => vec![CpuSpeed::Fast],
            SpeedArg::Slow => vec![CpuSpeed::Slow],
            SpeedArg::Both => vec![CpuSpeed::Fast, CpuSpeed::Slow],
        },
        designs: designs(&args.design)?,
    })
}

/// Runs the comparison with the built-in stages.
pub fn measure(
    profile: &Profile,
    spec: &FusionSpec,
    progress: bool,
) -> anyhow::Result<FusionReport> {
    let mut runner = WasmStages::new(csd::builtin::STAGES)?;
    let points: usize = spec
        .designs
        .iter()
        .map(|d| if d.on_device() { spec.speeds.len() } else { 1 })
        .sum::<usize>()
        * spec.threads.len();
    let bar = if progress {
        indicatif::ProgressBar::new(points as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} points",
        )
        .expect("static template"),
    );
    let report = fusion::compare(profile, spec, &mut runner, || bar.inc(1))?;
    bar.finish_and_clear();
    Ok(report)
}

pub fn run(args: &FusionArgs) -> anyhow::Result<()> {
    let profile = Profile::load(&args.profile)?;
    let spec = spec(args)?;
    args.store.check()?;
    let report = measure(&profile, &spec, true)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    let designs = report.curves.iter().map(|c| c.label()).collect();
    args.store.save_and_say(NewRun {
        trace: None,
        profile: profile.name.clone(),
        designs,
        seed: 0,
        report: Report::Fusion(report),
        spec: Some(SystemSpec::new(profile, 0, SystemKind::Fusion { spec })),
        sweep: None,
    })
}

fn print_table(r: &FusionReport) {
    println!(
        "FusionFS Fig. 3: {} of 4 KiB records, one file per thread, on {} ({} ops per thread)",
        r.workload.name(),
        r.profile,
        r.ops_per_thread
    );
    println!("\nthroughput (k ops/s)");
    print!("{:<20}", "design \\ threads");
    for t in &r.threads {
        print!("{t:>10}");
    }
    println!();
    for c in &r.curves {
        print!("{:<20}", c.label());
        for p in &c.points {
            print!("{:>10.1}", p.ops_per_sec / 1e3);
        }
        println!();
    }
    println!("\nper op: host compute (CRC or XOR on the host) and device-core time per request");
    for c in &r.curves {
        println!(
            "  {:<18} host {:>9}  device core {:>9}",
            c.label(),
            fmt_ns(c.host_compute_ns),
            fmt_ns(c.device_core_ns)
        );
    }
    let max = r.threads.last().copied().unwrap_or(0);
    for speed in [CpuSpeed::Fast, CpuSpeed::Slow] {
        if let Some((gain, best)) = r.gain(speed) {
            let which = match speed {
                CpuSpeed::Fast => "fusion",
                CpuSpeed::Slow => "fusion-slow",
            };
            println!("\nat {max} threads: {which} / best other ({best}) = {gain:.2}x");
        }
    }
}

fn fmt_ns(ns: u64) -> String {
    if ns == 0 {
        "-".into()
    } else {
        format!("{:.2} µs", ns as f64 / 1e3)
    }
}
