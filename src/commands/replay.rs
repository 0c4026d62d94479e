//! `csd replay`: a trace through the host file system, the device and each design.

use anyhow::Context;
use csd::ndp::TaskCompute;
use csd_device::Profile;
use csd_hostfs::ndp::NdpCompute;
use csd_traces::replay::{replay, Pace, ReplayOptions, ReplayReport};
use csd_traces::store::{NewRun, RunKind, RunStore, TraceRef};
use csd_traces::Strictness;
use serde::Serialize;
use std::io::BufRead;
use std::path::PathBuf;

/// The sample replayed when no trace is given.
pub const SAMPLE_NAME: &str = "untar.trace";
const SAMPLE: &str = include_str!("../../traces/samples/untar.trace");

#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The trace (csd trace format). Without one, the bundled sample (`traces/samples/untar.trace`:
    /// unpacking a source tarball) is replayed.
    pub trace: Option<PathBuf>,
    /// Device profile.
    #[arg(long, default_value = "cosmos-plus")]
    pub profile: String,
    /// Designs to compare: `all` or a comma-separated list of frag-s, frag-m, fsr, lightfs.
    #[arg(long, default_value = "all")]
    pub design: String,
    /// `afap`: each pid as fast as possible, keeping its order; `timed`: not before each
    /// event's recorded time.
    #[arg(long, default_value = "afap")]
    pub mode: Pace,
    /// Seed of the page cache's writeback order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Skip and count unknown ops instead of failing.
    #[arg(long)]
    pub lenient: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: super::runs::StoreArgs,
}

#[derive(Serialize)]
struct Report<'a> {
    trace: String,
    profile: &'a str,
    mode: Pace,
    seed: u64,
    designs: Vec<ReplayReport>,
}

/// Opens the trace afresh for each pass of each replay.
type Opener = Box<dyn FnMut() -> std::io::Result<Box<dyn BufRead>>>;

/// The trace to replay: a file, a trace stored with `csd trace add` (by id or name), or the
/// bundled sample. Returns how to open it and its reference for the run store.
fn open_trace(args: &ReplayArgs) -> anyhow::Result<(Opener, TraceRef)> {
    let bytes: std::sync::Arc<Vec<u8>>;
    let name = match &args.trace {
        None => {
            bytes = std::sync::Arc::new(SAMPLE.as_bytes().to_vec());
            format!("(sample) {SAMPLE_NAME}")
        }
        Some(p) if p.exists() => {
            let p = p.clone();
            let id = file_id(&p)?;
            let opener: Opener = Box::new(move || {
                Ok(Box::new(std::io::BufReader::new(std::fs::File::open(&p)?)) as Box<dyn BufRead>)
            });
            return Ok((
                opener,
                TraceRef {
                    id,
                    name: args.trace.as_ref().expect("some").display().to_string(),
                },
            ));
        }
        Some(p) => {
            let key = p.display().to_string();
            let stored = if args.store.no_store {
                None
            } else {
                RunStore::open(&args.store.path())
                    .ok()
                    .and_then(|s| s.trace(&key).ok())
            };
            let Some((meta, b)) = stored else {
                anyhow::bail!("opening {key}: no such file, and no trace of that id or name in the run store (csd trace add stores one)");
            };
            bytes = std::sync::Arc::new(b);
            meta.name
        }
    };
    let id = csd_traces::store::trace_id(&bytes);
    let opener: Opener = Box::new(move || {
        Ok(Box::new(std::io::Cursor::new(bytes.clone().as_ref().clone())) as Box<dyn BufRead>)
    });
    Ok((opener, TraceRef { id, name }))
}

/// The content id of a trace file, hashed as a stream.
fn file_id(p: &std::path::Path) -> anyhow::Result<String> {
    let f = std::fs::File::open(p).with_context(|| format!("opening {}", p.display()))?;
    csd_traces::store::trace_id_of(f).with_context(|| format!("reading {}", p.display()))
}

pub fn run(args: &ReplayArgs) -> anyhow::Result<()> {
    let profile = Profile::load(&args.profile)?;
    let kinds = super::ndp::designs(&args.design)?;
    let engine = super::task::engine()?;
    let opts = ReplayOptions {
        pace: args.mode,
        seed: args.seed,
        strictness: if args.lenient {
            Strictness::Lenient
        } else {
            Strictness::Strict
        },
    };
    // Open the store first: a busy store is an error before any work is done.
    args.store.check()?;
    let (mut open, trace_ref) = open_trace(args)?;
    let name = trace_ref.name.clone();
    let mut designs = Vec::new();
    for kind in kinds {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                .expect("static template"),
        );
        let mut factory = |task: &str, task_args: &str| -> Result<Box<dyn NdpCompute>, String> {
            let wasm = csd::builtin::task(task)
                .ok_or_else(|| format!("unknown task '{task}' (ndp ops name built-in tasks)"))?;
            TaskCompute::new(
                engine.clone(),
                task,
                wasm,
                task_args.as_bytes().to_vec(),
                &profile,
            )
            .map(|c| Box::new(c) as Box<dyn NdpCompute>)
            .map_err(|e| format!("{e:#}"))
        };
        let started = std::time::Instant::now();
        let report = replay(&mut open, &profile, kind, &mut factory, &opts, |n| {
            // Show progress only once a replay has run for a second.
            if started.elapsed().as_secs() >= 1 {
                bar.set_message(format!("{kind}: {n} events"));
                bar.tick();
            }
        })
        .with_context(|| format!("replaying {name} under {kind}"))?;
        bar.finish_and_clear();
        designs.push(report);
    }
    let report = Report {
        trace: name,
        profile: &profile.name,
        mode: args.mode,
        seed: args.seed,
        designs,
    };
    args.store.save_and_say(NewRun {
        kind: RunKind::Replay,
        trace: Some(trace_ref),
        profile: profile.name.clone(),
        designs: report
            .designs
            .iter()
            .map(|d| d.design.to_string())
            .collect(),
        seed: args.seed,
        report: serde_json::to_value(&report)?,
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report);
    }
    Ok(())
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

fn print(r: &Report) {
    println!(
        "replay of {} · profile {} · mode {:?} · seed {}",
        r.trace, r.profile, r.mode, r.seed
    );
    for d in &r.designs {
        println!(
            "\n{}: {} ops of {} events in {} virtual ({:.0} ops/s) · flash reads {} · programs {} · erases {} · WAF {:.2}",
            d.design,
            d.ops,
            d.events,
            crate::units::fmt_duration(d.duration_ns),
            d.ops_per_sec,
            d.device.io.flash_page_reads,
            d.device.io.flash_page_programs,
            d.device.ftl.blocks_erased,
            d.device.waf
        );
        println!(
            "  {:<10} {:>8} {:>7} {:>10} {:>10} {:>10} {:>10}",
            "op", "count", "failed", "p50 µs", "p99 µs", "p99.9 µs", "max µs"
        );
        for (op, l) in &d.latency {
            println!(
                "  {:<10} {:>8} {:>7} {:>10} {:>10} {:>10} {:>10}",
                op,
                l.count,
                l.failed,
                us(l.p50_ns),
                us(l.p99_ns),
                us(l.p999_ns),
                us(l.max_ns)
            );
        }
        if let Some(n) = &d.ndp {
            let b = &n.breakdown;
            println!(
                "  ndp: {} request(s), {} file(s); per file µs: retrieve {:.1} · dma {:.1} · read {:.1} · compute {:.1} · others {:.1} · PAO {:.1}%",
                n.requests,
                n.files,
                b.retrieve_layout_ns / 1e3,
                b.dma_ns / 1e3,
                b.read_file_ns / 1e3,
                b.compute_ns / 1e3,
                b.others_ns / 1e3,
                n.pao * 100.0
            );
        }
        for (op, e) in &d.first_errors {
            println!("  first failed {op}: {e}");
        }
        for (why, n) in &d.skipped {
            println!("  skipped {n}: {why}");
        }
    }
}
