//! `csd bench sweep`: the wall-time speedup of `csd sweep --jobs N` over `--jobs 1` on the
//! same 16-point grid, each run as the command users run, a child process into a fresh run
//! store.
//!
//! The grid is NDP requests (LightFS §IV's setting) over 4 designs × 4 seeds: points of
//! similar length (45–65 ms each on the development machine), long enough that the pool's
//! start and the stores' saves are a small part of the time. The two commands alternate,
//! three times each, and each one's fastest run counts, so a slow moment of a shared machine
//! does not decide the ratio.

use anyhow::Context;
use csd_traces::sweep::SweepSpec;
use serde::Serialize;
use std::time::Instant;

/// Runs of each command, alternating.
const ROUNDS: usize = 3;

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
    // A bad --files or --size is refused here, before anything runs.
    SweepSpec::parse(&text)?;
    let mut points = 0;
    let dir = tempfile::tempdir()?;
    let spec = dir.path().join("bench.toml");
    std::fs::write(&spec, text)?;
    let exe = std::env::current_exe().context("locating the csd executable")?;
    let mut best = [f64::INFINITY; 2];
    for round in 0..ROUNDS {
        for (i, workers) in [1, jobs].into_iter().enumerate() {
            let store = dir.path().join(format!("store-{round}-{i}"));
            let t0 = Instant::now();
            let out = std::process::Command::new(&exe)
                .arg("sweep")
                .arg(&spec)
                .args(["--jobs", &workers.to_string(), "--json", "--store"])
                .arg(&store)
                .output()
                .context("running csd sweep")?;
            let wall = t0.elapsed().as_secs_f64();
            anyhow::ensure!(
                out.status.success(),
                "the benchmark's sweep failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let summary: serde_json::Value = serde_json::from_slice(&out.stdout)?;
            points = summary["points"].as_u64().unwrap_or(0) as usize;
            anyhow::ensure!(
                points > 0
                    && summary["ran"] == points
                    && summary["failed"].as_array().is_some_and(Vec::is_empty),
                "the benchmark's sweep ran {} of {points} points",
                summary["ran"]
            );
            best[i] = best[i].min(wall);
        }
    }
    let r = Result {
        points,
        jobs,
        serial_s: best[0],
        parallel_s: best[1],
        speedup: best[0] / best[1],
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
            // Three decimals: at two, 1.697× printed as 1.70× beside "below target".
            "  speedup {:.3}× (target ≥ {TARGET}× with 2 jobs on 2 cores){}",
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
