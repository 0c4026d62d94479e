//! `csd sweep SPEC.toml`: a grid of runs over traces, tasks, profiles, designs and seeds,
//! one worker per core, each point saved as a run tagged with the sweep.
//!
//! A point is planned as the [`SystemSpec`] that `csd runs rerun` would rebuild, and run by
//! the same code ([`super::rerun::reproduce`]): a sweep point and a rerun of it cannot
//! disagree about what the system was.

use super::rerun::{reproduce, Modules};
use super::runs::StoreArgs;
use super::sweep_worker::{share_modules, Job, Worker};
use anyhow::{bail, Context};
use csd::ndp::NdpTask;
use csd::tasks::{Origin, Paths, Resolver};
use csd_device::Profile;
use csd_traces::report::Report;
use csd_traces::spec::{SystemKind, SystemSpec, TraceRef};
use csd_traces::store::{NewRun, RunStore, Saved, StoreError};
use csd_traces::sweep::{grid_size, point_key, Axis, Shard, SweepRecord, SweepSpec, SweepTag};
use csd_traces::Strictness;
use serde::Serialize;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// The sweep's spec (TOML): its name, and the values of each axis. Example in
    /// `examples/sweep.toml`; every key is described in the README's "Sweeps".
    pub spec: PathBuf,
    /// Points run at once [default: one per core].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub jobs: Option<u16>,
    /// Run only the points whose index in the grid is I modulo N (0 ≤ I < N), so N machines
    /// share a sweep: `--shard $SLURM_ARRAY_TASK_ID/N` in a Slurm job array (`--array=0-(N-1)`),
    /// `--shard $JOB_COMPLETION_INDEX/N` in a Kubernetes Indexed Job. Then `csd runs export`
    /// each shard's store and `csd runs import` them into one.
    #[arg(long, value_name = "I/N", default_value = "0/1")]
    pub shard: Shard,
    /// Plan the grid and print it, running nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print a JSON summary instead of a line per point.
    #[arg(long)]
    pub json: bool,
    /// The run store (default: $XDG_DATA_HOME/csdlab/runs, else ~/.local/share/csdlab/runs).
    #[arg(long, value_name = "PATH")]
    pub store: Option<PathBuf>,
}

/// One point of the grid, ready to run.
pub struct Point {
    pub tag: SweepTag,
    pub system: SystemSpec,
    trace: Option<(TraceRef, Arc<Vec<u8>>)>,
    design: String,
}

/// A sweep's grid, planned.
pub struct Plan {
    pub spec: SweepSpec,
    pub points: Vec<Point>,
    modules: Modules,
    /// Trace files the spec named, kept in the run store when the sweep runs, so its runs
    /// can be rerun and exported with them.
    files: Vec<(TraceRef, Arc<Vec<u8>>)>,
}

/// What a sweep did, as `--json` prints it.
#[derive(Serialize)]
pub struct Summary {
    pub sweep: String,
    /// Points in the whole grid, and in this shard.
    pub points: usize,
    pub in_shard: usize,
    /// Points of this shard already in the store before this run.
    pub done_before: usize,
    pub ran: usize,
    pub failed: Vec<(String, String)>,
    /// This shard's points: key, parameters, run id (when stored).
    pub runs: Vec<(String, String, Option<String>)>,
    /// The chart's metric across its axis, over every point stored (what the dashboard's
    /// sweep page draws first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<csd_web::sweep::SweepTable>,
}

/// The sweep's table: a row per series, a column per value of the axis; a cell over several
/// seeds shows their mean and spread.
fn print_table(t: &csd_web::sweep::SweepTable) {
    if t.series.is_empty() {
        return;
    }
    // PAO as a percentage and nanoseconds as microseconds, as the dashboard shows them.
    let show: fn(f64) -> String = if t.metric == "pao" {
        |v| format!("{}%", number(v * 100.0))
    } else if t.metric.ends_with("_ns") {
        |v| format!("{} µs", number(v / 1e3))
    } else {
        number
    };
    let cell = |c: &Option<csd_web::sweep::Cell>| match c {
        None => "–".to_string(),
        Some(c) if c.runs.len() > 1 => {
            format!("{} ({}–{})", show(c.mean), show(c.min), show(c.max))
        }
        Some(c) => show(c.mean),
    };
    let rows: Vec<(String, Vec<String>)> = t
        .series
        .iter()
        .map(|s| (s.name.clone(), s.cells.iter().map(cell).collect()))
        .collect();
    let first = rows
        .iter()
        .map(|(n, _)| n.chars().count())
        .chain([t.axis.name().len() + 2])
        .max()
        .unwrap_or(0);
    let widths: Vec<usize> = (0..t.xs.len())
        .map(|i| {
            rows.iter()
                .map(|(_, c)| c[i].chars().count())
                .chain([t.xs[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    println!("\n{} by {}:", t.metric, t.axis);
    let head: Vec<String> =
        t.xs.iter()
            .zip(&widths)
            .map(|(x, w)| format!("{x:>w$}"))
            .collect();
    println!("{:<first$}  {}", format!("{} →", t.axis), head.join("  "));
    for (name, cells) in &rows {
        let cells: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect();
        println!("{name:<first$}  {}", cells.join("  "));
    }
}

/// A metric's value as a table shows it: integers whole, others to four significant digits.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let digits = (4 - v.abs().log10().floor() as i32 - 1).clamp(0, 6) as usize;
        format!("{v:.digits$}")
    }
}

pub fn run(args: &SweepArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.spec)
        .with_context(|| format!("reading the sweep spec {}", args.spec.display()))?;
    let spec = SweepSpec::parse(&text).with_context(|| format!("in {}", args.spec.display()))?;
    let store = StoreArgs {
        store: args.store.clone(),
        no_store: false,
    };
    let jobs = args.jobs.map_or_else(default_jobs, usize::from);
    // Worker processes start now, so their start overlaps the planning and the store's
    // opening below, the serial part of a sweep. Failing to start them matters only if the
    // sweep turns out to need them.
    let crew = (jobs > 1 && !args.dry_run).then(|| Crew::start(jobs));
    // Trace files named relative to the spec are found beside it, wherever csd runs.
    let base = args.spec.parent().unwrap_or(std::path::Path::new(""));
    // The plan opens the store itself for what the spec names from it (tasks, profiles,
    // traces), so it comes before the store is held.
    let plan = plan(spec, base, &store)?;
    // Results must be savable before any point runs; the store opened to check it is kept
    // for the sweep's first saves (opening sled is milliseconds of the sweep's serial part).
    let mut lease = Lease::new(&store);
    lease.try_hold()?;
    if args.dry_run {
        for (i, p) in plan.points.iter().enumerate() {
            let mark = if args.shard.holds(i) {
                ""
            } else {
                " (other shard)"
            };
            println!("{i:>5}  {}  {}{mark}", p.tag.key, p.tag.label());
        }
        return Ok(());
    }
    let mut summary = execute(&plan, &mut lease, args.shard, jobs, crew, !args.json)?;
    let table = {
        // The store the last saves held, if its lease is not over: opening sled again
        // (its flush and fsyncs) was a tenth of a short sweep's wall time.
        let s = lease.get()?;
        let view = csd_web::sweep::SweepView::of(
            &s.sweep(&plan.spec.name)?,
            &s.sweep_runs(&plan.spec.name)?,
        );
        view.table(view.axis, &view.metric)
    };
    if args.json {
        summary.table = Some(table);
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_table(&table);
        println!(
            "sweep {}: {} point(s) in this shard of {}; {} already stored, {} run now, {} failed \
             (the dashboard: csd serve, then /sweeps/{})",
            summary.sweep,
            summary.in_shard,
            summary.points,
            summary.done_before,
            summary.ran,
            summary.failed.len(),
            summary.sweep
        );
    }
    if !summary.failed.is_empty() {
        bail!(
            "{} point(s) of sweep {} failed; the others are stored, and running the sweep \
             again runs only what is missing",
            summary.failed.len(),
            summary.sweep
        );
    }
    Ok(())
}

pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Resolves every name in `spec` and lays out its grid in a fixed order: traces then tasks,
/// then profiles, designs, seeds (and files, sizes for tasks).
// Long: one loop nest per point kind, each building its system spec.
pub fn plan(spec: SweepSpec, base: &std::path::Path, store: &StoreArgs) -> anyhow::Result<Plan> {
    let profiles: Vec<Profile> = spec
        .profiles
        .iter()
        .map(|name| load_profile(name, store))
        .collect::<anyhow::Result<_>>()?;
    let strictness = Strictness::lenient_if(spec.lenient);
    let replay_designs: Vec<_> = spec
        .designs
        .iter()
        .filter(|_| !spec.traces.is_empty())
        .map(|d| super::replay::targets(d).with_context(|| format!("the sweep's design '{d}'")))
        .collect::<anyhow::Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    let replay_designs = dedup(&replay_designs);
    let ndp_designs: Vec<_> = spec
        .designs
        .iter()
        .filter(|_| !spec.tasks.is_empty())
        .map(|d| {
            super::ndp::designs(d)
                .with_context(|| format!("the sweep's design '{d}' (for its tasks)"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    let ndp_designs = dedup(&ndp_designs);
    // The grid's size with `all` expanded, before anything is loaded.
    let replay_axes = [
        spec.traces.len(),
        spec.profiles.len(),
        replay_designs.len(),
        spec.seeds.len(),
    ];
    let ndp_axes = [
        spec.tasks.len(),
        spec.profiles.len(),
        ndp_designs.len(),
        spec.seeds.len(),
        spec.files.len(),
        spec.sizes.len(),
    ];
    grid_size(&replay_axes)?
        .checked_add(grid_size(&ndp_axes)?)
        .filter(|&n| n <= csd_traces::sweep::MAX_POINTS)
        .ok_or(csd_traces::sweep::SweepError::TooLarge)?;
    let mut points = Vec::new();
    let traces = spec
        .traces
        .iter()
        .map(|t| load_trace(t, base, store))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for ((label, tref, bytes, _), profile) in traces
        .iter()
        .flat_map(|t| profiles.iter().map(move |p| (t, p)))
    {
        for &design in &replay_designs {
            for &seed in &spec.seeds {
                let system = SystemSpec::new(
                    profile.clone(),
                    seed,
                    SystemKind::Replay {
                        trace: tref.clone(),
                        designs: vec![design],
                        pace: spec.mode,
                        strictness,
                    },
                );
                let params = vec![
                    (Axis::Trace, label.clone()),
                    (Axis::Profile, profile.name.clone()),
                    (Axis::Design, design.to_string()),
                    (Axis::Seed, seed.to_string()),
                ];
                points.push(point(
                    &spec.name,
                    system,
                    params,
                    Some((tref.clone(), bytes.clone())),
                ));
            }
        }
    }
    let mut modules = Modules::new();
    if !spec.tasks.is_empty() {
        let sizes = spec
            .sizes
            .iter()
            .map(|s| {
                crate::units::parse_size(s)
                    .map_err(|e| anyhow::anyhow!("the sweep's size '{s}': {e}"))
            })
            .collect::<anyhow::Result<Vec<u64>>>()?;
        if let Some(&0) = spec.files.iter().find(|&&n| n == 0) {
            bail!("the sweep's `files` must each be at least 1");
        }
        let stored = super::runs::stored_tasks(store);
        let resolver = Resolver {
            stored: &stored,
            paths: Paths::Allowed,
        };
        for app in &spec.tasks {
            let task = NdpTask::new(app, None, None, &resolver)
                .with_context(|| format!("the sweep's task '{app}'"))?;
            let task_ref = (task.task.origin != Origin::Builtin).then(|| task.task.task_ref(app));
            if let Some(t) = &task_ref {
                if let Some(found) = stored(app) {
                    modules.insert(app.clone(), (t.id.clone(), found.1));
                }
            }
            for profile in &profiles {
                for &design in &ndp_designs {
                    for &seed in &spec.seeds {
                        for &files in &spec.files {
                            for (size_label, &size) in spec.sizes.iter().zip(&sizes) {
                                let mut system = SystemSpec::new(
                                    profile.clone(),
                                    seed,
                                    SystemKind::Ndp {
                                        app: app.clone(),
                                        args: None,
                                        content: None,
                                        designs: vec![design],
                                        points: vec![(files, size)],
                                        cold: spec.cold,
                                    },
                                );
                                system.tasks.extend(task_ref.clone());
                                let params = vec![
                                    (Axis::Task, app.clone()),
                                    (Axis::Profile, profile.name.clone()),
                                    (Axis::Design, design.to_string()),
                                    (Axis::Seed, seed.to_string()),
                                    (Axis::Files, files.to_string()),
                                    (Axis::Size, size_label.clone()),
                                ];
                                points.push(point(&spec.name, system, params, None));
                            }
                        }
                    }
                }
            }
        }
    }
    let files = traces
        .iter()
        .filter(|(.., from_file)| *from_file)
        .map(|(_, tref, bytes, _)| (tref.clone(), bytes.clone()))
        .collect();
    Ok(Plan {
        spec,
        points,
        modules,
        files,
    })
}

fn dedup<T: PartialEq + Copy>(v: &[T]) -> Vec<T> {
    let mut out = Vec::new();
    for &x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

fn point(
    sweep: &str,
    system: SystemSpec,
    params: Vec<(Axis, String)>,
    trace: Option<(TraceRef, Arc<Vec<u8>>)>,
) -> Point {
    let design = params
        .iter()
        .find(|(a, _)| *a == Axis::Design)
        .map(|(_, d)| d.clone())
        .unwrap_or_default();
    Point {
        tag: SweepTag {
            sweep: sweep.to_string(),
            key: point_key(&system),
            params,
        },
        system,
        trace,
        design,
    }
}

/// A profile by name: built in, a file, or kept in the run store.
pub fn load_profile(name: &str, store: &StoreArgs) -> anyhow::Result<Profile> {
    match Profile::load(name) {
        Err(csd_device::ProfileError::Unknown { .. }) if !store.no_store => {
            super::profiles::named(name, |n| {
                super::runs::open(store).ok()?.profile_text(n).ok()
            })
        }
        other => Ok(other?),
    }
}

/// A loaded trace: the name the spec gave it, its reference, its bytes, and whether it came
/// from a file (then kept in the run store when the sweep runs).
type Loaded = (String, TraceRef, Arc<Vec<u8>>, bool);

/// A trace's bytes, by what the spec named: a file (a relative path is looked up beside the
/// spec first, then in the working directory), a stored trace or a sample.
fn load_trace(name: &str, base: &std::path::Path, store: &StoreArgs) -> anyhow::Result<Loaded> {
    let beside = base.join(name);
    let path = if beside.is_file() {
        beside.as_path()
    } else {
        std::path::Path::new(name)
    };
    let (mut open, tref) = super::replay::open_trace(Some(path), |key| {
        let s = super::runs::open(store).ok()?;
        s.trace(key).ok().map(|(meta, b)| (meta.name, b))
    })
    .with_context(|| format!("the sweep's trace '{name}'"))?;
    let mut bytes = Vec::new();
    open()
        .and_then(|mut r| r.read_to_end(&mut bytes))
        .with_context(|| format!("reading the sweep's trace '{name}'"))?;
    Ok((name.to_string(), tref, Arc::new(bytes), path.is_file()))
}

/// Runs this shard's missing points on `jobs` workers, saving each as it finishes.
// Long: the skip, the worker pool and the saving loop, which share the progress bar.
fn execute(
    plan: &Plan,
    lease: &mut Lease,
    shard: Shard,
    jobs: usize,
    crew: Option<anyhow::Result<Crew>>,
    say: bool,
) -> anyhow::Result<Summary> {
    let name = &plan.spec.name;
    let done = {
        let s = lease.get()?;
        s.put_sweep(&SweepRecord {
            spec: plan.spec.clone(),
            points: plan.points.len(),
        })?;
        for (tref, bytes) in &plan.files {
            s.add_trace(&tref.name, bytes)?;
        }
        s.points(name)?
    };
    let mine: Vec<&Point> = plan
        .points
        .iter()
        .enumerate()
        .filter(|(i, _)| shard.holds(*i))
        .map(|(_, p)| p)
        .collect();
    let todo: Vec<&Point> = mine
        .iter()
        .copied()
        .filter(|p| !done.contains_key(&p.tag.key))
        .collect();
    let mut summary = Summary {
        sweep: name.clone(),
        points: plan.points.len(),
        in_shard: mine.len(),
        done_before: mine.len() - todo.len(),
        ran: 0,
        failed: Vec::new(),
        runs: Vec::new(),
        table: None,
    };
    let bar = super::ispfs::bar(true, todo.len(), "points  {msg}");
    let next = AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel::<Outcome>();
    let mut saved: std::collections::BTreeMap<String, String> = done;
    let workers = jobs.min(todo.len());
    let mut unstarted = 0usize;
    // More than one worker: processes (see `sweep_worker` for why), sharing the sweep's
    // modules and traces through a directory. Otherwise the crew is not needed.
    let (shared, mut started) = match crew {
        Some(crew) if workers > 1 => {
            let (shared, started) = crew?.board(plan, &todo, workers)?;
            (Some(shared), started)
        }
        Some(Ok(crew)) => {
            crew.dismiss();
            (None, Vec::new())
        }
        Some(Err(_)) | None => (None, Vec::new()),
    };
    std::thread::scope(|scope| -> anyhow::Result<()> {
        for _ in 0..workers {
            let tx = tx.clone();
            let first = started.pop();
            let (next, todo, shared) = (&next, &todo, shared.as_ref());
            scope.spawn(move || work(next, todo, shared, first, plan, &tx));
        }
        drop(tx);
        loop {
            // The store is let go once it has been held long enough, here or on a save.
            let received = match lease.left() {
                Some(left) => match rx.recv_timeout(left) {
                    Err(RecvTimeoutError::Timeout) => {
                        lease.release();
                        continue;
                    }
                    other => other.ok(),
                },
                None => {
                    lease.release();
                    rx.recv().ok()
                }
            };
            let Some((i, result)) = received else { break };
            let Some(&p) = todo.get(i) else {
                // Not a point's: a worker that could not start.
                if let Err(e) = result {
                    bar.suspend(|| eprintln!("csd: {e:#}"));
                    unstarted += 1;
                    summary.failed.push(("(worker)".into(), format!("{e:#}")));
                }
                continue;
            };
            bar.inc(1);
            bar.set_message(p.tag.label());
            match result {
                Ok(report) => {
                    let where_to = save(lease, p, report)?;
                    summary.ran += 1;
                    if say {
                        let place = match &where_to {
                            Stored::Saved(Saved::New(r)) => format!("stored as {}", r.id),
                            Stored::Saved(Saved::Existing(id)) => {
                                format!("already stored as {id}")
                            }
                            Spooled(file) => format!("spooled to {}", file.display()),
                        };
                        bar.suspend(|| {
                            println!(
                                "point {}/{} {place}: {}",
                                summary.ran,
                                todo.len(),
                                p.tag.label()
                            )
                        });
                    }
                    match where_to {
                        Stored::Saved(Saved::New(r)) => saved.insert(p.tag.key.clone(), r.id),
                        Stored::Saved(Saved::Existing(id)) => saved.insert(p.tag.key.clone(), id),
                        Spooled(_) => None,
                    };
                }
                Err(e) => {
                    bar.suspend(|| eprintln!("csd: {:#}", e));
                    summary.failed.push((p.tag.label(), format!("{e:#}")));
                }
            }
        }
        Ok(())
    })?;
    // Points no worker took (every worker process failed to start) are failures too.
    let answered = summary.ran + summary.failed.len() - unstarted;
    if answered < todo.len() {
        let missing = todo.len() - answered;
        summary.failed.push((
            format!("{missing} point(s)"),
            "not run: no worker process could be started".into(),
        ));
    }
    bar.finish_and_clear();
    summary.runs = mine
        .iter()
        .map(|p| {
            (
                p.tag.key.clone(),
                p.tag.label(),
                saved.get(&p.tag.key).cloned(),
            )
        })
        .collect();
    Ok(summary)
}

/// An outcome for the saving loop: a point's index, or `usize::MAX` for a worker that
/// could not start.
type Outcome = (usize, anyhow::Result<Report>);

/// One thread of the pool: takes points until none are left, runs each on its worker
/// process (`first`, started with the crew; in-process when there is none) and hands the
/// outcome to the saving loop.
fn work(
    next: &AtomicUsize,
    todo: &[&Point],
    shared: Option<&Shared>,
    first: Option<anyhow::Result<Worker>>,
    plan: &Plan,
    tx: &std::sync::mpsc::Sender<Outcome>,
) {
    let mut worker = match first {
        Some(Ok(w)) => Some(w),
        Some(Err(e)) => {
            let _ = tx.send((usize::MAX, Err(e.context("starting a worker"))));
            return;
        }
        None => None,
    };
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(p) = todo.get(i) else { return };
        let label = format!("point {}", p.tag.label());
        let result = match (&mut worker, shared) {
            (Some(w), Some(s)) => {
                let job = Job {
                    label,
                    system: p.system.clone(),
                    trace: s.trace_of(p),
                };
                match w.run(&job) {
                    Ok(result) => result,
                    // The worker is gone (killed, out of memory): this point fails, and a
                    // fresh worker takes the next one.
                    Err(e) => match Worker::spawn(s.dir.path()) {
                        Ok(fresh) => {
                            *w = fresh;
                            Err(e.context("its worker process failed"))
                        }
                        Err(again) => {
                            let e = e.context(format!(
                                "its worker process failed, and no other starts: {again:#}"
                            ));
                            let _ = tx.send((i, Err(e)));
                            return;
                        }
                    },
                }
            }
            _ => {
                let bytes = p.trace.as_ref().map(|(_, b)| b.as_ref().clone());
                reproduce(&label, &p.system, bytes, &plan.modules)
            }
        };
        if tx.send((i, result)).is_err() {
            return;
        }
    }
}

/// The sweep's modules and traces in a directory the worker processes read.
struct Shared {
    /// Locked while the sweep runs, so a later sweep removes it only if this one was killed.
    dir: crate::scratch::Scratch,
    /// Each trace's file, by the address of its bytes (points share one `Arc` per trace).
    traces: std::collections::HashMap<usize, PathBuf>,
}

impl Shared {
    fn trace_of(&self, p: &Point) -> Option<PathBuf> {
        let (_, bytes) = p.trace.as_ref()?;
        self.traces.get(&(Arc::as_ptr(bytes) as usize)).cloned()
    }
}

/// The worker processes of a sweep with more than one job, started before it plans: a
/// worker's start (its process, wasmtime's engine) is some 14 ms, as long as the planning
/// and the store's opening it now overlaps. They wait for their first point, and read the
/// modules and traces then, from the directory they were given.
struct Crew {
    dir: crate::scratch::Scratch,
    workers: Vec<anyhow::Result<Worker>>,
}

impl Crew {
    fn start(jobs: usize) -> anyhow::Result<Crew> {
        let dir = crate::scratch::Scratch::new("csd-sweep-")
            .context("creating a directory for the sweep's workers")?;
        let workers = (0..jobs).map(|_| Worker::spawn(dir.path())).collect();
        Ok(Crew { dir, workers })
    }

    /// Stops every worker: the sweep runs in-process, or has nothing to run.
    fn dismiss(self) {
        self.workers.into_iter().flatten().for_each(Worker::dismiss);
    }

    /// Writes what `todo`'s points need into the directory, and hands out `n` workers; the
    /// others are stopped.
    fn board(
        mut self,
        plan: &Plan,
        todo: &[&Point],
        n: usize,
    ) -> anyhow::Result<(Shared, Vec<anyhow::Result<Worker>>)> {
        let dir = self.dir.path();
        share_modules(dir, &plan.modules).context("writing the sweep's task modules")?;
        let mut traces = std::collections::HashMap::new();
        for (_, bytes) in todo.iter().filter_map(|p| p.trace.as_ref()) {
            let key = Arc::as_ptr(bytes) as usize;
            if !traces.contains_key(&key) {
                let path = dir.join(format!("trace-{}.trace", traces.len()));
                std::fs::write(&path, bytes.as_slice())
                    .context("writing a trace for the workers")?;
                traces.insert(key, path);
            }
        }
        let spare = self.workers.split_off(n.min(self.workers.len()));
        spare.into_iter().flatten().for_each(Worker::dismiss);
        let shared = Shared {
            dir: self.dir,
            traces,
        };
        Ok((shared, self.workers))
    }
}

/// Where a point went: into the store, or (the store busy) to its spool.
enum Stored {
    Saved(Saved),
    Spooled(PathBuf),
}
use Stored::Spooled;

/// How long the sweep keeps the run store open across saves.
const STORE_LEASE: Duration = Duration::from_millis(500);

/// The run store, kept open across the saves of points that finish close together and let go
/// after [`STORE_LEASE`]. Opening sled starts its thread pool and flusher each time: about
/// 4 % of a two-worker sweep's CPU when each of its 16 short points opened it, CPU the
/// workers needed. Holding it for the whole
/// sweep would keep the dashboard and other sweeps out for hours; they wait for it up to
/// `CSD_STORE_WAIT`, far longer than the lease.
struct Lease<'a> {
    store: &'a StoreArgs,
    held: Option<(RunStore, Instant)>,
}

impl<'a> Lease<'a> {
    fn new(store: &'a StoreArgs) -> Lease<'a> {
        Lease { store, held: None }
    }

    /// The store: the one held while the lease lasts, else opened anew (waiting for another
    /// process as every csd does).
    fn get(&mut self) -> Result<&RunStore, StoreError> {
        if self.left().is_none() {
            self.release();
            self.held = Some((super::runs::open_store(self.store)?, Instant::now()));
        }
        Ok(&self.held.as_ref().expect("opened above").0)
    }

    /// [`StoreArgs::check`], keeping the store it opened: a path that cannot hold a store is
    /// an error; a store another process holds now is waited for later, at the first save.
    fn try_hold(&mut self) -> anyhow::Result<()> {
        self.held = self.store.check_and_keep()?.map(|s| (s, Instant::now()));
        Ok(())
    }

    /// What is left of the lease, if the store is held and the lease not over.
    fn left(&self) -> Option<Duration> {
        let (_, since) = self.held.as_ref()?;
        STORE_LEASE
            .checked_sub(since.elapsed())
            .filter(|d| !d.is_zero())
    }

    fn release(&mut self) {
        self.held = None;
    }
}

/// Stores one point's run (a point stored meanwhile by another process of the same sweep is
/// not stored twice), or spools it when another process keeps the store busy.
fn save(lease: &mut Lease, p: &Point, report: Report) -> anyhow::Result<Stored> {
    let run = NewRun {
        trace: p.trace.as_ref().map(|(t, _)| t.clone()),
        profile: p.system.profile.name.clone(),
        designs: vec![p.design.clone()],
        seed: p.system.seed,
        report,
        spec: Some(p.system.clone()),
        sweep: Some(p.tag.clone()),
    };
    match lease.get() {
        Ok(s) => Ok(Stored::Saved(s.insert(run)?)),
        // A store another process keeps busy gets the point spooled beside it, tag and all:
        // the next csd to open the store stores it (once, as a point).
        Err(StoreError::Busy { .. }) => {
            let path = lease.store.path();
            let file = csd_traces::store::spool(&path, &run)
                .with_context(|| format!("spooling a point beside {}", path.display()))?;
            Ok(Spooled(file))
        }
        Err(e) => Err(e.into()),
    }
}
