//! The replay summary `csd replay` (and so the main job, `csd`) prints first: per design,
//! the total time, the offloaded requests' time, their mean per-file breakdown and PAO, the
//! speedup over the host-only baseline when it ran, and which design wins.

use crate::units::fmt_duration;
use csd_traces::replay::{ReplayReport, ReplayTarget};
use csd_traces::report::ReplayRun;

/// The time a design's `ndp` requests took in all (their latencies summed).
fn offloaded_ns(d: &ReplayReport) -> Option<f64> {
    let l = d.latency.get("ndp")?;
    (l.count > 0).then_some(l.mean_ns * l.count as f64)
}

fn is_host(d: &ReplayReport) -> bool {
    d.design == ReplayTarget::Host(csd_hostfs::ndp::DesignKind::HostOnly)
}

fn ms(ns: f64) -> String {
    fmt_duration(ns.round() as u64)
}

// Long: one table, its header, one row per design, then the verdict, in print order.
pub fn print(r: &ReplayRun) {
    let files = r
        .designs
        .iter()
        .find_map(|d| d.ndp.as_ref())
        .map(|n| (n.requests, n.files));
    println!(
        "{} · profile {} · {} · seed {}",
        r.trace, r.profile, r.mode, r.seed
    );
    match files {
        Some((req, f)) => println!("{f} file(s) offloaded in {req} ndp request(s)\n"),
        None => println!("no ndp requests\n"),
    }
    // The host-only baseline's time for the same requests, when it ran.
    let host = r.designs.iter().find(|d| is_host(d)).and_then(offloaded_ns);
    println!(
        "{:<8} {:>10} {:>10} {:>8}   {:>8} {:>7} {:>8} {:>8} {:>7} {:>6}",
        "design",
        "total",
        "offloaded",
        "vs host",
        "layout",
        "dma",
        "read",
        "compute",
        "others",
        "PAO"
    );
    println!("{:<41}{:-^50}", "", " mean per file, µs ");
    for d in &r.designs {
        let total = fmt_duration(d.duration_ns);
        match (&d.ndp, offloaded_ns(d)) {
            (Some(n), Some(off)) => {
                let b = &n.breakdown;
                let speedup = host.map_or("-".to_string(), |h| format!("{:.2}×", h / off.max(1.0)));
                println!(
                    "{:<8} {:>10} {:>10} {:>8}   {:>8.1} {:>7.1} {:>8.1} {:>8.1} {:>7.1} {:>5.1}%",
                    d.design.to_string(),
                    total,
                    ms(off),
                    speedup,
                    b.retrieve_layout_ns / 1e3,
                    b.dma_ns / 1e3,
                    b.read_file_ns / 1e3,
                    b.compute_ns / 1e3,
                    b.others_ns / 1e3,
                    n.pao * 100.0
                );
            }
            _ => println!("{:<8} {:>10} {:>10}", d.design.to_string(), total, "-"),
        }
    }
    verdict(r, host);
}

/// Which design finishes the offloaded requests first, by how much (over the host-only
/// baseline, when it ran, and over the other designs), and whose overhead is lowest.
fn verdict(r: &ReplayRun, host: Option<f64>) {
    let mut timed: Vec<(&ReplayReport, f64)> = r
        .designs
        .iter()
        .filter(|d| !is_host(d))
        .filter_map(|d| Some((d, offloaded_ns(d)?)))
        .collect();
    if timed.is_empty() {
        return;
    }
    timed.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (best, t) = timed[0];
    let mut against: Vec<String> = host
        .map(|h| format!("{:.2}× faster than the host alone", h / t.max(1.0)))
        .into_iter()
        .collect();
    against.extend(
        timed[1..]
            .iter()
            .map(|(d, x)| format!("{:.2}× faster than {}", x / t.max(1.0), d.design)),
    );
    if !against.is_empty() {
        println!(
            "\n{} finishes the offloaded requests first: {}.",
            best.design,
            against.join(", ")
        );
    }
    let lowest = r
        .designs
        .iter()
        .filter(|d| !is_host(d))
        .filter_map(|d| Some((d, d.ndp.as_ref()?.pao)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((d, pao)) = lowest {
        println!(
            "{} spends the least on overhead (PAO {:.1}%: layout retrieval, DMA and command handling as a share of each file's time).",
            d.design,
            pao * 100.0
        );
    }
    let stale: Vec<String> = r
        .designs
        .iter()
        .filter_map(|d| {
            let n = d.ndp.as_ref()?;
            (n.stale_files > 0).then(|| format!("{} {} of {}", d.design, n.stale_files, n.files))
        })
        .collect();
    if !stale.is_empty() {
        println!(
            "stale reads: {} file(s) read older than the host's copy (dirty pages, or under fsr metadata still in the journal): their results may not be the program's (LightFS §II-D); lightfs reads a file only once its updater has synced it.",
            stale.join(", ")
        );
    }
}
