//! `csd bench sweep`: the wall-time speedup of a sweep on N workers over one, on the same
//! 16-point grid, each into a fresh run store.
//!
//! The grid is NDP requests (LightFS §IV's setting) over 4 designs × 4 seeds: points of
//! similar length that each take long enough (tenths of a second) that the pool's start and
//! the stores' saves are a small part of the time.

use super::runs::StoreArgs;
use super::sweep::{execute, plan};
use csd_traces::sweep::{Shard, SweepSpec};
use serde::Serialize;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct SweepBenchArgs {
    /// Workers of the parallel run [default: one per core].
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Files per NDP request at each point.
    #[arg(long, default_value_t = 100)]
    pub files: usize,
    /// Each file's size.
    #[arg(long, default_value = "256k")]
    pub size: String,
    #[arg(long)]
    pub json: bool,
}

/// The target on 2 cores (issue 22).
const TARGET: f64 = 1.7;

#[derive(Serialize)]
struct Result {
    points: usize,
    jobs: usize,
    serial_s: f64,
    parallel_s: f64,
    speedup: f64,
    target: f64,
    cores: usize,
}

pub fn run(args: &SweepBenchArgs) -> anyhow::Result<()> {
    let jobs = args.jobs.unwrap_or_else(super::sweep::default_jobs).max(1);
    let text = format!(
        "name = \"bench\"\ntasks = [\"stats64\"]\ndesigns = [\"all\"]\nseeds = [1, 2, 3, 4]\n\
         files = [{}]\nsizes = [\"{}\"]\n",
        args.files, args.size
    );
    let spec = SweepSpec::parse(&text)?;
    let dir = tempfile::tempdir()?;
    let (mut times, mut points) = (Vec::new(), 0);
    for (i, workers) in [1, jobs].into_iter().enumerate() {
        let store = StoreArgs {
            store: Some(dir.path().join(format!("store{i}"))),
            no_store: false,
        };
        let plan = plan(spec.clone(), dir.path(), &store)?;
        points = plan.points.len();
        let t0 = Instant::now();
        let summary = execute(&plan, &store, Shard::WHOLE, workers, false)?;
        times.push(t0.elapsed().as_secs_f64());
        anyhow::ensure!(
            summary.ran == plan.points.len() && summary.failed.is_empty(),
            "the benchmark's sweep ran {} of {} points",
            summary.ran,
            plan.points.len()
        );
    }
    let r = Result {
        points,
        jobs,
        serial_s: times[0],
        parallel_s: times[1],
        speedup: times[0] / times[1],
        target: TARGET,
        cores: super::sweep::default_jobs(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "csd sweep, {} points (stats64 NDP requests, {} × {} files, 4 designs × 4 seeds), {} core(s):",
            r.points, args.files, args.size, r.cores
        );
        println!("  --jobs 1:  {:.2} s", r.serial_s);
        println!("  --jobs {}:  {:.2} s", r.jobs, r.parallel_s);
        println!(
            "  speedup {:.2}× (target ≥ {TARGET}× with 2 jobs on 2 cores){}",
            r.speedup,
            if r.jobs == 2 && r.speedup < TARGET {
                "  ✗ below target"
            } else {
                ""
            }
        );
    }
    Ok(())
}
