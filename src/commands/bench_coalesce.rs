//! `csd bench coalesce`: the coalescing engine alone on SIFT §5.3's high-overlap raw replay
//! set (5.26 M one-block interval updates from 4 threads writing 4 KiB blocks uniformly in a
//! 64 MiB hotset each), at 1/4, 1/2 and the full size, to show N log N growth.

use csd_device::persist::{RangeTree, ReplaySource};
use csd_device::rng::SimRng;
use serde::Serialize;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct CoalesceArgs {
    /// Interval updates in the full set (the thesis' raw replay set: 5.26 M).
    #[arg(long, default_value_t = 5_260_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub intervals: u64,
    /// Timed repetitions per size; the fastest is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Point {
    intervals: u64,
    wall_ms: f64,
    ns_per_interval: f64,
    surviving_blocks: u64,
    block_reduction_pct: f64,
    /// Growth of the wall time against the quarter-size point, and what N log N predicts.
    growth: f64,
    n_log_n_growth: f64,
}

/// Thread `t`'s file starts at 2 GiB × t (in 4 KiB blocks); its hotset is its first 64 MiB.
fn updates(n: u64, seed: u64) -> Vec<(u64, u64)> {
    const FILE_BLOCKS: u64 = (2 << 30) / 4096;
    const HOT_BLOCKS: u64 = (64 << 20) / 4096;
    let mut rng = SimRng::new(seed);
    (0..n)
        .map(|i| {
            let t = i % 4;
            // Journal blocks are appended in commit order.
            (t * FILE_BLOCKS + rng.below(HOT_BLOCKS), i)
        })
        .collect()
}

pub fn run(args: &CoalesceArgs) -> anyhow::Result<()> {
    let sizes = [args.intervals / 4, args.intervals / 2, args.intervals];
    let mut points: Vec<Point> = Vec::new();
    for &n in &sizes {
        let input = updates(n, args.seed);
        let mut best = f64::INFINITY;
        let mut stats = None;
        for _ in 0..args.repeat.max(1) {
            let t0 = Instant::now();
            let mut tree = RangeTree::new();
            for &(block, src) in &input {
                tree.insert(block, 1, ReplaySource::Journal, src);
            }
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            best = best.min(ms);
            stats = Some(tree.stats());
        }
        let st = stats.expect("at least one repetition");
        let base = points
            .first()
            .map_or((n, best), |p| (p.intervals, p.wall_ms));
        let nlogn = |x: u64| x as f64 * (x.max(2) as f64).log2();
        points.push(Point {
            intervals: n,
            wall_ms: best,
            ns_per_interval: best * 1e6 / n.max(1) as f64,
            surviving_blocks: st.surviving_blocks,
            block_reduction_pct: st.block_reduction_pct(),
            growth: best / base.1,
            n_log_n_growth: nlogn(n) / nlogn(base.0),
        });
    }
    if args.json {
        super::machine::print_json_rows("points", &points)?;
        return Ok(());
    }
    println!(
        "Range-tree coalescing of one-block updates in 4 × 64 MiB hotsets (SIFT §5.3), one core"
    );
    println!(
        "{:>12} {:>10} {:>10} {:>12} {:>10} {:>8} {:>11}",
        "intervals", "wall ms", "ns each", "surviving", "reduction", "growth", "N log N"
    );
    for p in &points {
        println!(
            "{:>12} {:>10.1} {:>10.1} {:>12} {:>9.2}% {:>7.2}× {:>10.2}×",
            p.intervals,
            p.wall_ms,
            p.ns_per_interval,
            p.surviving_blocks,
            p.block_reduction_pct,
            p.growth,
            p.n_log_n_growth
        );
    }
    let full = points.last().expect("three sizes");
    println!(
        "full set: {:.2} s against a 1 s target ({:.2}×)",
        full.wall_ms / 1e3,
        1000.0 / full.wall_ms
    );
    Ok(())
}
