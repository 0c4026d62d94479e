//! `csd persist`: SIFT's persistence path. `backlog` is the manual-checkpoint half of SIFT
//! Table 4: build a durable backlog, run one checkpoint, report the replay work per
//! configuration.

use anyhow::bail;
use csd_device::persist::backlog::{run, Backlog, BacklogReport, BacklogSpec};
use csd_device::persist::service::Config;

#[derive(clap::Subcommand, Debug)]
pub enum PersistCmd {
    /// Manual-checkpoint backlog (SIFT §5.3–5.4): replay work before and after coalescing.
    ///
    /// Example: csd persist backlog --kind sequential-no-reuse --scale 0.05
    Backlog(BacklogArgs),
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
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long)]
    pub json: bool,
}

pub fn run_cmd(cmd: &PersistCmd) -> anyhow::Result<()> {
    match cmd {
        PersistCmd::Backlog(args) => backlog(args),
    }
}

fn backlog(args: &BacklogArgs) -> anyhow::Result<()> {
    let scale = if args.full { 1.0 } else { args.scale };
    if !(scale > 0.0 && scale <= 1.0) {
        bail!("--scale must be in (0, 1], got {scale}");
    }
    let kind = match args.kind {
        Kind::HighOverlap => Backlog::HighOverlap,
        Kind::SequentialNoReuse => Backlog::SequentialNoReuse,
    };
    let spec = BacklogSpec::paper(kind, scale);
    let mut reports: Vec<BacklogReport> = Vec::new();
    for c in &args.config {
        let config = match c {
            ConfigArg::Vanilla => Config::Vanilla,
            ConfigArg::Offload => Config::Offload,
            ConfigArg::Coalesce => Config::Coalesce,
        };
        reports.push(run(kind, spec, config, args.seed)?);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
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
        "\n{:<10} {:>12} {:>12} {:>9} {:>10} {:>10} {:>9} {:>10} {:>10}",
        "config",
        "raw blocks",
        "surviving",
        "removed",
        "raw inodes",
        "surviving",
        "removed",
        "reads",
        "writes"
    );
    for r in &reports {
        let c = &r.checkpoint;
        println!(
            "{:<10} {:>12} {:>12} {:>8.2}% {:>10} {:>10} {:>8.3}% {:>10} {:>10}",
            format!("{:?}", r.config).to_lowercase(),
            c.raw_blocks,
            c.surviving_blocks,
            c.block_reduction_pct(),
            c.raw_inodes,
            c.surviving_inodes,
            c.inode_reduction_pct(),
            c.read_requests,
            c.write_requests
        );
    }
    println!(
        "\n(removed: share of the raw replay work coalescing drops; reads / writes: replay I/O requests after the \
         windowed pipeline. Checkpoint time and the online benchmark need the timing model of \
         the persistence path, still to come.)"
    );
    Ok(())
}
