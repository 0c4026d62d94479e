//! `csd persist`: SIFT's persistence path, the two halves of SIFT Table 4. `online` is the
//! online pressure benchmark (a foreground write+fsync stream beside background writers,
//! swept over the background fsync interval); `backlog` builds a durable backlog, runs one
//! manual checkpoint and reports its replay work and time per configuration.

use anyhow::{bail, Context};
use csd_device::persist::backlog::{run, Backlog, BacklogReport, BacklogSpec};
use csd_device::persist::online::{self, OnlineReport, OnlineSpec};
use csd_device::persist::service::Config;
use csd_device::Profile;
use csd_traces::report::{PersistRun, Report};
use csd_traces::spec::{SystemKind, SystemSpec};
use csd_traces::store::NewRun;

#[derive(clap::Subcommand, Debug)]
pub enum PersistCmd {
    /// Online pressure benchmark (SIFT §5.2): foreground throughput, fsync tail latency and
    /// host CPU cost per configuration, swept over the background fsync interval.
    ///
    /// Example: csd persist online --interval 128 --config offload,coalesce
    Online(OnlineArgs),
    /// Manual-checkpoint backlog (SIFT §5.3–5.4): replay work before and after coalescing,
    /// and the checkpoint's time.
    ///
    /// Example: csd persist backlog --kind sequential-no-reuse --scale 0.05
    Backlog(BacklogArgs),
}

#[derive(clap::Args, Debug)]
pub struct OnlineArgs {
    /// Background writes per background fsync.
    #[arg(long, value_delimiter = ',', default_value = "32,64,128,256")]
    pub interval: Vec<u64>,
    /// Configurations to run at every interval (SIFT Table 3).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "vanilla,offload,coalesce"
    )]
    pub config: Vec<ConfigArg>,
    /// Size relative to Table 4's online profile: hotsets, rings, warmup and window scale
    /// together (1/16: 128 MiB rings, a 1.9 s window).
    #[arg(long, default_value_t = 0.0625)]
    pub scale: f64,
    /// The paper's sizes: 2 GiB rings, 5 s warmup, a 30 s window (about a minute per point).
    #[arg(long, conflicts_with = "scale")]
    pub full: bool,
    /// Measurement window in virtual seconds (default: the paper's 30 s times --scale). A
    /// host-side checkpoint can outlast the paper's window; a longer one shows vanilla's
    /// steady state.
    #[arg(long)]
    pub window_s: Option<f64>,
    #[command(flatten)]
    pub run: RunArgs,
}

/// What both workloads share.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Device profile; it needs a [persist] table of CPU costs.
    #[arg(long, default_value = "bluefield2-pm1735")]
    pub profile: String,
    /// Seed of the workload's random hotset offsets: same seed, same report.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the reports as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: super::runs::StoreArgs,
}

impl RunArgs {
    /// Prints the sweep as JSON when asked and returns it as the run to save (its designs are
    /// the configurations); the tables are the caller's.
    fn print_json(
        &self,
        profile: &str,
        configs: &[ConfigArg],
        output: PersistRun,
        spec: SystemSpec,
    ) -> anyhow::Result<NewRun> {
        let report = Report::Persist(output);
        if self.json {
            println!("{}", serde_json::to_string_pretty(&report.to_json())?);
        }
        Ok(NewRun {
            spec: Some(spec),
            trace: None,
            profile: profile.to_string(),
            designs: configs
                .iter()
                .map(|c| c.config().name().to_string())
                .collect(),
            seed: self.seed,
            report,
            sweep: None,
        })
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Kind {
    HighOverlap,
    SequentialNoReuse,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ConfigArg {
    Vanilla,
    Offload,
    Coalesce,
}

#[derive(clap::Args, Debug)]
pub struct BacklogArgs {
    #[arg(long, value_enum, default_value = "high-overlap")]
    pub kind: Kind,
    /// Configurations to checkpoint the same backlog with.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "offload,coalesce"
    )]
    pub config: Vec<ConfigArg>,
    /// Size relative to the paper's 20 GiB backlog (hotsets scale with it).
    #[arg(long, default_value_t = 0.1)]
    pub scale: f64,
    /// The paper's full 20 GiB backlog (needs several GiB of memory).
    #[arg(long, conflicts_with = "scale")]
    pub full: bool,
    #[command(flatten)]
    pub run: RunArgs,
}

impl ConfigArg {
    fn config(self) -> Config {
        match self {
            ConfigArg::Vanilla => Config::Vanilla,
            ConfigArg::Offload => Config::Offload,
            ConfigArg::Coalesce => Config::Coalesce,
        }
    }
}

/// Runs each (sizes and interval, configuration) of the online benchmark, with a progress
/// bar: what `csd persist online` runs and `csd runs rerun` repeats.
pub fn online_runs(
    profile: &Profile,
    runs: &[(OnlineSpec, Config)],
    seed: u64,
) -> anyhow::Result<Vec<OnlineReport>> {
    let bar = indicatif::ProgressBar::new(runs.len() as u64);
    let mut reports = Vec::with_capacity(runs.len());
    for &(spec, config) in runs {
        bar.set_message(format!("i={} {}", spec.interval, config.name()));
        let r = online::run(profile, config, spec, seed)
            .with_context(|| format!("online run {} at i = {}", config.name(), spec.interval))?;
        reports.push(r);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(reports)
}

/// Runs the backlog under each configuration.
pub fn backlog_runs(
    profile: &Profile,
    kind: Backlog,
    sizes: BacklogSpec,
    configs: &[Config],
    seed: u64,
) -> anyhow::Result<Vec<BacklogReport>> {
    configs
        .iter()
        .map(|&c| run(profile, kind, sizes, c, seed).map_err(Into::into))
        .collect()
}

pub fn run_cmd(cmd: &PersistCmd) -> anyhow::Result<()> {
    match cmd {
        PersistCmd::Online(args) => online_sweep(args),
        PersistCmd::Backlog(args) => backlog(args),
    }
}

fn check_scale(full: bool, scale: f64) -> anyhow::Result<f64> {
    let scale = if full { 1.0 } else { scale };
    if !(scale > 0.0 && scale <= 1.0) {
        bail!("--scale must be in (0, 1], got {scale}");
    }
    Ok(scale)
}

// Long: runs the sweep, prints its table and saves it in one pass over the points.
fn online_sweep(args: &OnlineArgs) -> anyhow::Result<()> {
    let scale = check_scale(args.full, args.scale)?;
    if let Some(bad) = args.interval.iter().find(|&&i| i == 0) {
        bail!("--interval must be at least 1 write per fsync, got {bad}");
    }
    if let Some(w) = args.window_s.filter(|w| !(*w > 0.0 && *w <= 3600.0)) {
        bail!("--window-s must be in (0, 3600] virtual seconds, got {w}");
    }
    let spec_at = |interval| {
        let mut spec = OnlineSpec::paper(interval, scale);
        if let Some(w) = args.window_s {
            spec.measure_ns = (w * 1e9) as u64;
        }
        spec
    };
    let profile = Profile::load(&args.run.profile)?;
    args.run.store.check()?;
    let runs: Vec<(OnlineSpec, Config)> = args
        .interval
        .iter()
        .flat_map(|&i| args.config.iter().map(move |c| (spec_at(i), c.config())))
        .collect();
    let reports = online_runs(&profile, &runs, args.run.seed)?;
    let system = SystemKind::PersistOnline { runs };
    let spec = SystemSpec::new(profile.clone(), args.run.seed, system);
    let stored = args.run.print_json(
        &profile.name,
        &args.config,
        PersistRun::Online(reports.clone()),
        spec,
    )?;
    // The tables first, then the save: a report is printed whatever happens to the save.
    (|| -> anyhow::Result<()> {
        if args.run.json {
            return Ok(());
        }
        let spec = spec_at(args.interval[0]);
        let mib = |blocks: u64| (blocks * spec.block_bytes) as f64 / 1048576.0;
        println!(
        "online pressure on {}: 1 foreground thread (4 KiB write + fsync, {:.1} MiB hotset), {} \
         background writers ({:.1} MiB hotsets), staging {:.0} MiB, journal {:.0} MiB, \
         {:.2} s window after {:.2} s warmup",
        profile.name,
        mib(spec.fg_hot_blocks),
        spec.bg_threads,
        mib(spec.bg_hot_blocks),
        mib(spec.staging_blocks),
        mib(spec.journal_blocks),
        spec.measure_ns as f64 / 1e9,
        spec.warmup_ns as f64 / 1e9
    );
        println!(
            "\n{:>4} {:<9} {:>8} {:>9} {:>9} {:>10} {:>10} {:>7} {:>9} {:>6} {:>7}",
            "i",
            "config",
            "Kops/s",
            "p50 µs",
            "p99 µs",
            "p99.99 ms",
            "max ms",
            "host %",
            "%/Kops/s",
            "ckpts",
            "blocked"
        );
        // No foreground fsync finished in the window: no latency to show.
        let lat = |us: f64, unit: f64, digits: usize| {
            if us > 0.0 {
                format!("{:.*}", digits, us / unit)
            } else {
                "-".into()
            }
        };
        for r in &reports {
            println!(
                "{:>4} {:<9} {:>8.3} {:>9} {:>9} {:>10} {:>10} {:>7.2} {:>9} {:>6} {:>7}",
                r.spec.interval,
                r.config.name(),
                r.kops,
                lat(r.fsync.p50_us, 1.0, 1),
                lat(r.fsync.p99_us, 1.0, 1),
                lat(r.fsync.p9999_us, 1000.0, 2),
                lat(r.fsync.max_us, 1000.0, 2),
                r.host_cpu_pct,
                r.cpu_cost.map_or("-".into(), |c| format!("{c:.2}")),
                r.async_checkpoints + r.sync_checkpoints,
                r.blocked_fsyncs
            );
        }
        println!(
            "\n(host %: average utilisation of the whole host; %/Kops/s: SIFT eq. 1, host CPU per \
         Kops/s of foreground throughput; ckpts: checkpoints started; blocked: fsyncs that \
         waited for reclaim credits; -: no foreground fsync finished in the window. --json has \
         replay statistics and device CPU.)"
        );
        Ok(())
    })()?;
    args.run.store.save_and_say(stored)
}

// Long: runs the backlogs, prints their table and saves them in one pass.
fn backlog(args: &BacklogArgs) -> anyhow::Result<()> {
    let scale = check_scale(args.full, args.scale)?;
    let profile = Profile::load(&args.run.profile)?;
    let kind = match args.kind {
        Kind::HighOverlap => Backlog::HighOverlap,
        Kind::SequentialNoReuse => Backlog::SequentialNoReuse,
    };
    let spec = BacklogSpec::paper(kind, scale);
    args.run.store.check()?;
    let configs: Vec<Config> = args.config.iter().map(|c| c.config()).collect();
    let reports = backlog_runs(&profile, kind, spec, &configs, args.run.seed)?;
    let system = SystemKind::PersistBacklog {
        backlog: kind,
        sizes: spec,
        configs,
    };
    let spec_of_run = SystemSpec::new(profile.clone(), args.run.seed, system);
    let stored = args.run.print_json(
        &profile.name,
        &args.config,
        PersistRun::Backlog(reports.clone()),
        spec_of_run,
    )?;
    // The tables first, then the save: a report is printed whatever happens to the save.
    (|| -> anyhow::Result<()> {
        if args.run.json {
            return Ok(());
        }
        let gib = (spec.writes_per_thread * u64::from(spec.threads) * spec.block_bytes) as f64
            / f64::from(1u32 << 30);
        println!(
            "{} backlog: {} threads × {} writes of {} KiB ({gib:.2} GiB), an fsync every {} \
         writes, then one manual checkpoint",
            match kind {
                Backlog::HighOverlap => "high-overlap",
                Backlog::SequentialNoReuse => "sequential no-reuse",
            },
            spec.threads,
            spec.writes_per_thread,
            spec.block_bytes >> 10,
            spec.writes_per_fsync
        );
        println!(
            "\n{:<10} {:>12} {:>12} {:>9} {:>10} {:>10} {:>9} {:>10} {:>10} {:>12}",
            "config",
            "raw blocks",
            "surviving",
            "removed",
            "raw inodes",
            "surviving",
            "removed",
            "reads",
            "writes",
            "checkpoint"
        );
        for r in &reports {
            let c = &r.checkpoint;
            println!(
                "{:<10} {:>12} {:>12} {:>8.2}% {:>10} {:>10} {:>8.3}% {:>10} {:>10} {:>9.1} ms",
                r.config.name(),
                c.raw_blocks,
                c.surviving_blocks,
                c.block_reduction_pct(),
                c.raw_inodes,
                c.surviving_inodes,
                c.inode_reduction_pct(),
                c.read_requests,
                c.write_requests,
                r.checkpoint_ms
            );
        }
        let time = |c| {
            reports
                .iter()
                .find(|r| r.config == c)
                .map(|r| r.checkpoint_ms)
        };
        if let (Some(o), Some(c)) = (time(Config::Offload), time(Config::Coalesce)) {
            println!("\ncoalesce checkpoints {:.2}× faster than offload", o / c);
        }
        println!(
        "\n(removed: share of the raw replay work coalescing drops; reads / writes: replay I/O \
         requests after the windowed pipeline; checkpoint: the manual checkpoint's virtual time \
         on {}.)",
        profile.name
    );
        Ok(())
    })()?;
    args.run.store.save_and_say(stored)
}
