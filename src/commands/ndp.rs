//! `csd ndp`: LightFS §IV's microbenchmark over the four offload designs.

use super::memory;
use crate::units::parse_size;
use anyhow::{bail, Context};
use csd::ndp::{measure, synthetic_of, Content, DataSet, Files, NdpTask};
use csd::tasks::{Origin, Paths, Resolver};
use csd_device::Profile;
use csd_hostfs::ndp::DesignKind;
use csd_traces::report::{NdpPoint, NdpRun, Report};
use csd_traces::spec::{SystemKind, SystemSpec};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct NdpArgs {
    /// Device profile (LightFS's testbed is cosmos-plus).
    #[arg(long, default_value = "cosmos-plus")]
    pub profile: String,
    /// The task: one of LightFS Table III's applications (stats32, stats64, knn, knn-bin,
    /// grep, grep-accel, grep-bytewise), another built-in task, a task kept with `csd task
    /// add`, or a path to a .wasm module.
    #[arg(long, default_value = "stats64")]
    pub app: String,
    /// The task's arguments [default: the application's own; none for other tasks].
    #[arg(long)]
    pub args: Option<String>,
    /// What the synthetic files hold: integers, floats or text [default: what the
    /// application works on; text for other tasks].
    #[arg(long)]
    pub content: Option<Content>,
    /// Number of files in the directory the request processes (at most 1 000 000, and
    /// 4 GiB in all: every byte is held in memory).
    #[arg(long, default_value_t = 100)]
    pub files: usize,
    /// Size of each file (e.g. 4k, 16k, 1m).
    #[arg(long, default_value = "16k", value_parser = parse_size)]
    pub size: u64,
    /// Designs to compare: `all` or a comma-separated list of frag-s, frag-m, fsr, lightfs.
    #[arg(long, default_value = "all")]
    pub design: String,
    /// Cold caches: drop every host and device metadata cache before the request (LightFS's
    /// "without warmup"). By default one unmeasured request warms them first.
    #[arg(long)]
    pub cold: bool,
    /// Repeat over a parameter: `files=1,10,100,1000` or `size=4k,16k,64k,256k`.
    #[arg(long)]
    pub sweep: Option<String>,
    /// Use the regular files of this host directory instead of synthetic ones.
    #[arg(long, conflicts_with = "sweep")]
    pub import: Option<PathBuf>,
    /// Seed of the synthetic file contents.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: super::runs::StoreArgs,
}

pub fn designs(spec: &str) -> anyhow::Result<Vec<DesignKind>> {
    if spec == "all" {
        return Ok(DesignKind::ALL.to_vec());
    }
    let mut out = Vec::new();
    for d in spec.split(',') {
        let d: DesignKind = d.trim().parse().map_err(anyhow::Error::msg)?;
        if !out.contains(&d) {
            out.push(d);
        }
    }
    Ok(out)
}

/// (files, size) points of the run.
fn points(args: &NdpArgs) -> anyhow::Result<Vec<(usize, u64)>> {
    let Some(sweep) = &args.sweep else {
        return Ok(vec![(args.files, args.size)]);
    };
    let Some((what, values)) = sweep.split_once('=') else {
        bail!("--sweep '{sweep}': expected files=N,N,… or size=S,S,…");
    };
    let values: Vec<&str> = values.split(',').map(str::trim).collect();
    match what {
        "files" => values
            .iter()
            .map(|v| {
                v.parse::<usize>()
                    .ok()
                    .filter(|&n| n > 0)
                    .map(|n| (n, args.size))
                    .with_context(|| format!("--sweep files: '{v}' is not a positive count"))
            })
            .collect(),
        "size" => values
            .iter()
            .map(|v| {
                parse_size(v)
                    .map_err(anyhow::Error::msg)
                    .map(|s| (args.files, s))
                    .with_context(|| format!("--sweep size: '{v}'"))
            })
            .collect(),
        other => bail!("--sweep {other}=…: can sweep `files` or `size`"),
    }
}

/// The most files one NDP data set may hold.
pub const MAX_DATA_FILES: usize = 1_000_000;
/// The most bytes one NDP data set may hold: a data-mode run keeps every byte in memory
/// at least twice while it measures (the device's pages, and the files as a design reads
/// them; see [`memory_needed`]).
pub const MAX_DATA_BYTES: u64 = 4 << 30;

/// About what measuring a data set of `total` bytes keeps in memory at its peak: the
/// device's pages and the bytes a design has read (a whole file, or a batch of them), a
/// held copy of the set when `held`, and an eighth more with 64 MiB for the rest (the
/// device's maps, the task's memory). Measured: 6.03 GiB for one 2 GiB file held and read
/// by each of four designs in turn.
fn memory_needed(total: u64, held: bool) -> u64 {
    let copies = if held { 3 } else { 2 };
    total
        .saturating_mul(copies)
        .saturating_add(total / 8)
        .saturating_add(64 << 20)
}

/// Refuses a data set of `files` files of `size` bytes each that [`MAX_DATA_FILES`] or
/// [`MAX_DATA_BYTES`] forbid, before anything is allocated for it.
pub fn check_data_set(files: usize, size: u64) -> anyhow::Result<()> {
    check_totals(files, (files as u64).checked_mul(size), || {
        format!("{files} files of {}", crate::units::fmt_bytes(size))
    })
}

/// The bounds of [`check_data_set`] on `files` files of `total` bytes in all (`None`: past
/// what a u64 counts); `what` names the data set in the error.
fn check_totals(
    files: usize,
    total: Option<u64>,
    what: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    if files > MAX_DATA_FILES {
        bail!("{files} files: an NDP data set holds at most {MAX_DATA_FILES}");
    }
    if total.is_none_or(|t| t > MAX_DATA_BYTES) {
        bail!(
            "{} make more than an NDP data set may hold ({}: a data-mode run keeps every \
             byte in memory)",
            what(),
            crate::units::fmt_bytes(MAX_DATA_BYTES)
        );
    }
    Ok(())
}

fn import_dir(dir: &PathBuf) -> anyhow::Result<DataSet> {
    let mut files = Vec::new();
    let mut bytes = 0u64;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.len() > 255 || name.contains('/') {
                continue;
            }
            // Sized before it is read: a directory too large is refused, not loaded.
            bytes = bytes.saturating_add(entry.metadata()?.len());
            check_totals(files.len() + 1, Some(bytes), || {
                format!("the files of {}", dir.display())
            })?;
            files.push((name, std::fs::read(entry.path())?));
        }
    }
    files.sort();
    if files.is_empty() {
        bail!("{} holds no regular files", dir.display());
    }
    Ok(files)
}

pub fn run(args: &NdpArgs) -> anyhow::Result<()> {
    let profile = Profile::load(&args.profile)?;
    let kinds = designs(&args.design)?;
    args.store.check()?;
    if args.files == 0 {
        bail!("--files must be at least 1");
    }
    let plan: Vec<(Option<DataSet>, usize, u64)> = match &args.import {
        Some(dir) => {
            let data = import_dir(dir)?;
            let (n, size) = (
                data.len(),
                data.iter().map(|f| f.1.len() as u64).sum::<u64>(),
            );
            vec![(Some(data), n, size / n as u64)]
        }
        None => {
            let points = points(args)?;
            // Every point checked before the first runs: a bad last point fails at once.
            for &(n, s) in &points {
                check_data_set(n, s)?;
            }
            points.into_iter().map(|(n, s)| (None, n, s)).collect()
        }
    };
    let task = NdpTask::new(
        &args.app,
        args.args.as_deref(),
        args.content,
        &Resolver {
            stored: &super::runs::stored_tasks(&args.store),
            paths: Paths::Allowed,
        },
    )?;
    // Synthetic files are rebuilt from the seed; imported ones are not kept, so such a run
    // keeps no spec to rebuild it from.
    let spec = args.import.is_none().then(|| {
        let mut spec = SystemSpec::new(
            profile.clone(),
            args.seed,
            SystemKind::Ndp {
                app: args.app.clone(),
                args: args.args.clone(),
                content: args.content,
                designs: kinds.clone(),
                points: plan.iter().map(|&(_, n, s)| (n, s)).collect(),
                cold: args.cold,
            },
        );
        if task.task.origin != Origin::Builtin {
            spec.tasks.push(task.task.task_ref(&args.app));
        }
        spec
    });
    let report = measure_plan(&profile, &task, &kinds, plan, args.cold, args.seed)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_tables(&report);
    }
    args.store.save_and_say(csd_traces::store::NewRun {
        spec,
        trace: None,
        profile: profile.name.clone(),
        designs: kinds.iter().map(|k| k.to_string()).collect(),
        seed: args.seed,
        report: Report::Ndp(report),
        sweep: None,
    })
}

/// Measures every design at every (files, size) point of `plan`, on the given files or on
/// synthetic ones made from `seed`: what `csd ndp` runs and `csd runs rerun` repeats.
pub fn measure_plan(
    profile: &Profile,
    task: &NdpTask,
    kinds: &[DesignKind],
    plan: Vec<(Option<DataSet>, usize, u64)>,
    cold: bool,
    seed: u64,
) -> anyhow::Result<NdpRun> {
    let engine = super::task::engine()?;
    let mut compute = task.compute(engine, profile)?;
    if kinds.len() == 1 && plan.len() == 1 {
        compute = compute.within_one_device();
    }
    let mut report = NdpRun {
        profile: profile.name.clone(),
        app: task.reference.clone(),
        cold,
        points: Vec::new(),
    };
    // One step per design and point; indicatif draws nothing when stderr is not a terminal.
    let bar = indicatif::ProgressBar::new(plan.len() as u64 * kinds.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
        )
        .expect("static template"),
    );
    for (data, files, size) in plan {
        let held: DataSet;
        let placed = match data {
            Some(d) => {
                // The set itself is in memory already.
                let total = d.iter().map(|(_, b)| b.len() as u64).sum();
                memory::Room::now().ensure(memory_needed(total, false), || {
                    format!("an NDP data set of {}", crate::units::fmt_bytes(total))
                })?;
                held = d;
                Files::Set(&held)
            }
            None => {
                check_data_set(files, size)?;
                let synthetic = Files::Synthetic {
                    content: task.content,
                    count: files,
                    size: size as usize,
                    seed,
                };
                // One design places the files once: they are made as they are placed.
                // More share one copy rather than make them again each, where memory holds
                // the copy too (the bytes are the same either way: only time and memory
                // differ).
                let total = files as u64 * size;
                let room = memory::Room::now();
                let share = kinds.len() > 1 && room.fits(memory_needed(total, true));
                room.ensure(memory_needed(total, share), || {
                    format!("{files} files of {}", crate::units::fmt_bytes(size))
                })?;
                if share {
                    held = synthetic_of(task.content, files, size as usize, seed);
                    Files::Set(&held)
                } else {
                    synthetic
                }
            }
        };
        let mut results = Vec::new();
        for &kind in kinds {
            bar.set_message(format!(
                "{kind} · {files} × {}",
                crate::units::fmt_bytes(size)
            ));
            results.push(measure(profile, placed, kind, &mut compute, cold)?);
            bar.inc(1);
        }
        report.points.push(NdpPoint::new(files, size, results));
    }
    bar.finish_and_clear();
    Ok(report)
}

fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1000.0)
}

fn print_tables(r: &NdpRun) {
    println!(
        "NDP offload · profile {} · app {} · {}",
        r.profile,
        r.app,
        if r.cold { "cold caches" } else { "warm caches" }
    );
    for p in &r.points {
        println!(
            "\n{} file(s) × {} — mean per-file latency and breakdown (µs)",
            p.files,
            crate::units::fmt_bytes(p.size_bytes)
        );
        println!(
            "{:<8} {:>9} {:>9} {:>8} {:>9} {:>9} {:>8} {:>7} {:>9}",
            "design", "latency", "retrieve", "dma", "read", "compute", "others", "PAO", "lightfs×"
        );
        for d in &p.designs {
            let b = &d.summary.breakdown;
            let speedup = p
                .speedup_of_lightfs
                .iter()
                .find(|s| s.0 == d.design)
                .map_or("-".to_string(), |s| format!("{:.2}", s.1));
            println!(
                "{:<8} {:>9} {:>9} {:>8} {:>9} {:>9} {:>8} {:>6.1}% {:>9}",
                d.design.name(),
                us(d.summary.mean_latency_ns),
                us(b.retrieve_layout_ns),
                us(b.dma_ns),
                us(b.read_file_ns),
                us(b.compute_ns),
                us(b.others_ns),
                d.summary.pao * 100.0,
                speedup
            );
        }
        if let Some(f) = p.designs.iter().find_map(|d| d.footprint) {
            println!(
                "lightfs metadata caches: host {} · device {}",
                crate::units::fmt_bytes(f.host_bytes),
                crate::units::fmt_bytes(f.device_bytes)
            );
        }
    }
}
