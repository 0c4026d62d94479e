//! `csd runs`: the run store.

use anyhow::Context;
use csd_traces::report::diff;
use csd_traces::store::{default_store_path, NewRun, RunStore, StoreError};
use std::path::PathBuf;

/// Where the run store is, for commands that read it or keep a trace, profile or task in
/// it: they make no run, so they have no `--no-store`.
#[derive(clap::Args, Debug, Clone)]
pub struct StorePath {
    /// The run store (default: $XDG_DATA_HOME/csdlab/runs, else ~/.local/share/csdlab/runs).
    #[arg(long, value_name = "PATH")]
    pub store: Option<PathBuf>,
}

impl StorePath {
    pub fn path(&self) -> PathBuf {
        self.args().path()
    }

    pub fn args(&self) -> StoreArgs {
        StoreArgs {
            store: self.store.clone(),
            no_store: false,
        }
    }
}

/// Where results are kept.
#[derive(clap::Args, Debug, Clone)]
pub struct StoreArgs {
    /// The run store (default: $XDG_DATA_HOME/csdlab/runs, else ~/.local/share/csdlab/runs).
    #[arg(long, value_name = "PATH")]
    pub store: Option<PathBuf>,
    /// Do not save this run.
    #[arg(long, conflicts_with = "store")]
    pub no_store: bool,
}

impl StoreArgs {
    pub fn path(&self) -> PathBuf {
        self.store.clone().unwrap_or_else(default_store_path)
    }

    /// Checks, before any work, that results can be saved (unless `--no-store`): a path that
    /// cannot hold a store is an error now, not after a long run. The store is not kept open,
    /// so other csd processes can use it meanwhile.
    pub fn check(&self) -> anyhow::Result<()> {
        self.check_and_keep().map(drop)
    }

    /// [`StoreArgs::check`], returning the store it opened, if it opened one (not with
    /// `--no-store`, nor when another process holds it now), for a caller that saves soon.
    pub fn check_and_keep(&self) -> anyhow::Result<Option<RunStore>> {
        if self.no_store {
            return Ok(None);
        }
        match RunStore::open(&self.path()) {
            Ok(s) => Ok(Some(s)),
            Err(StoreError::Busy { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Saves a finished run (unless `--no-store`) and tells the user where it went. Another
    /// csd process holds the store only while it saves or reads, so a busy store is waited
    /// for (saying so); one that stays busy gets the run spooled to a file beside it, which
    /// the next csd to open the store imports. Call it after the report is printed.
    pub fn save_and_say(&self, run: NewRun) -> anyhow::Result<()> {
        self.save_for_id(run).map(|_| ())
    }

    /// [`StoreArgs::save_and_say`], returning the run's id when it was stored (not with
    /// `--no-store`, nor when it was spooled).
    pub fn save_for_id(&self, run: NewRun) -> anyhow::Result<Option<String>> {
        if self.no_store {
            return Ok(None);
        }
        let path = self.path();
        let patience = store_patience();
        let waiting = || {
            eprintln!(
                "csd: the run store at {} is in use by another csd process; waiting up to {:.0} s to save (CSD_STORE_WAIT)",
                path.display(),
                patience.as_secs_f64()
            )
        };
        match RunStore::open_waiting(&path, patience, waiting) {
            Ok(store) => {
                let saved = store.save(run)?;
                eprintln!("csd: saved as run {} in {}", saved.id, path.display());
                Ok(Some(saved.id))
            }
            Err(StoreError::Busy { .. }) => {
                let file = csd_traces::store::spool(&path, &run)
                    .with_context(|| format!("spooling the run beside {}", path.display()))?;
                eprintln!(
                    "csd: the run store stayed busy; the run was spooled to {} and the next csd to open the store will store it",
                    file.display()
                );
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// How long csd waits for a run store another csd process holds: `CSD_STORE_WAIT` seconds
/// (default 20, at most a day). A save that waits this long in vain spools its run instead.
pub fn store_patience() -> std::time::Duration {
    const DAY: f64 = 86_400.0;
    let secs = std::env::var("CSD_STORE_WAIT")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(20.0, |s| s.min(DAY));
    std::time::Duration::from_secs_f64(secs)
}

#[derive(clap::Subcommand, Debug)]
pub enum RunsCmd {
    /// List stored runs. A sweep's points are counted, not listed, unless --all or --sweep
    /// asks for them (--json lists every run).
    List {
        /// Only the runs of this sweep (`csd sweep`).
        #[arg(long)]
        sweep: Option<String>,
        /// List sweep points too.
        #[arg(long, conflicts_with = "sweep")]
        all: bool,
        #[command(flatten)]
        store: StorePath,
        #[arg(long)]
        json: bool,
    },
    /// Show one run's full report.
    Show {
        id: String,
        /// Print the stored record (report included) as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StorePath,
    },
    /// Compare two runs design by design (b − a).
    Diff {
        a: String,
        b: String,
        #[command(flatten)]
        store: StorePath,
        #[arg(long)]
        json: bool,
    },
    /// Rebuild a run's system from its stored spec, run it again and check that the
    /// report is byte-identical to the stored one (exit 1 if it is not).
    ///
    /// Replay runs keep their spec: the whole profile, the seed, the designs, the pacing and
    /// the trace's content id. The trace is found in the run store, among the bundled
    /// samples, or at the path it was replayed from, and refused if its content changed.
    /// `csd ndp` runs on synthetic files keep theirs too (the files are made from the seed),
    /// and so do `csd persist` runs.
    Rerun {
        id: String,
        #[command(flatten)]
        store: StorePath,
        #[arg(long)]
        json: bool,
    },
    /// Write runs to a portable file (JSON Lines), with the sweeps they belong to and the
    /// stored traces and task modules they need to be rerun.
    ///
    /// Example: csd runs export --sweep gc-study -o shard0.runs
    Export {
        /// Runs to export (r1 r2 …); with neither these nor --sweep, every run.
        ids: Vec<String>,
        /// Export every run of this sweep.
        #[arg(long)]
        sweep: Option<String>,
        /// The file to write ("-": standard output).
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        #[command(flatten)]
        store: StorePath,
    },
    /// Merge exported runs into this store. A run the store already holds (the same
    /// content, or the same sweep point) is not stored again; a file that does not parse is
    /// refused whole, naming its bad line, and nothing is stored.
    Import {
        /// Files written by `csd runs export`.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StorePath,
    },
    /// Delete a run.
    Rm {
        id: String,
        #[command(flatten)]
        store: StorePath,
    },
}

/// How a command looks a task name up in the run store: opening it for each lookup (a run
/// names few tasks), and never with `--no-store`.
pub fn stored_tasks(s: &StoreArgs) -> impl Fn(&str) -> Option<(String, Vec<u8>)> + '_ {
    move |name| {
        if s.no_store {
            return None;
        }
        let store = open(s).ok()?;
        let (meta, wasm) = store.task(name).ok()?;
        Some((meta.id, wasm))
    }
}

/// Opens the store for a read, waiting for another csd process (the dashboard, a replay
/// saving) to let go of it.
pub fn open(s: &StoreArgs) -> anyhow::Result<RunStore> {
    open_store(s).map_err(Into::into)
}

/// [`open`] with the store's own error, for callers that act on `StoreError::Busy`.
pub fn open_store(s: &StoreArgs) -> Result<RunStore, csd_traces::store::StoreError> {
    RunStore::open_waiting(&s.path(), store_patience(), || {})
}

pub fn run(cmd: &RunsCmd) -> anyhow::Result<()> {
    match cmd {
        RunsCmd::List {
            sweep,
            all,
            store,
            json,
        } => list(sweep.as_deref(), *all, store, *json),
        RunsCmd::Show { id, store, json } => {
            let r = open(&store.args())?.get(id)?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print_run(&r);
            }
            Ok(())
        }
        RunsCmd::Diff { a, b, store, json } => print_diff(a, b, &store.args(), *json),
        RunsCmd::Rerun { id, store, json } => super::rerun::run(id, &store.args(), *json),
        RunsCmd::Export {
            ids,
            sweep,
            output,
            store,
        } => export(ids, sweep.as_deref(), output, &store.args()),
        RunsCmd::Import { files, json, store } => import(files, *json, &store.args()),
        RunsCmd::Rm { id, store } => {
            open(&store.args())?
                .remove(id)
                .with_context(|| format!("removing {id}"))?;
            println!("removed {id}");
            Ok(())
        }
    }
}

fn export(
    ids: &[String],
    sweep: Option<&str>,
    output: &std::path::Path,
    store: &StoreArgs,
) -> anyhow::Result<()> {
    let s = open(store)?;
    let mut runs = match sweep {
        Some(name) => {
            s.sweep(name)?;
            s.sweep_runs(name)?
        }
        None if ids.is_empty() => s.list()?,
        None => Vec::new(),
    };
    for id in ids {
        if !runs.iter().any(|r| &r.id == id) {
            runs.push(s.get(id)?);
        }
    }
    let moved = if output.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        csd_traces::exchange::export(&s, &runs, &mut out)?
    } else {
        // Written beside, then renamed: an interrupted export leaves no half file.
        let tmp = output.with_extension("partial");
        let file =
            std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut out = std::io::BufWriter::new(file);
        let moved = csd_traces::exchange::export(&s, &runs, &mut out)?;
        std::io::Write::flush(&mut out)?;
        std::fs::rename(&tmp, output).with_context(|| format!("writing {}", output.display()))?;
        moved
    };
    eprintln!(
        "exported {} run(s), {} sweep(s), {} trace(s), {} task module(s) to {}",
        moved.runs,
        moved.sweeps,
        moved.traces,
        moved.tasks,
        output.display()
    );
    Ok(())
}

fn import(files: &[PathBuf], json: bool, store: &StoreArgs) -> anyhow::Result<()> {
    let s = open(store)?;
    let mut all = Vec::new();
    for file in files {
        let moved = csd_traces::exchange::import(&s, || {
            let f = std::fs::File::open(file)?;
            Ok(Box::new(std::io::BufReader::new(f)) as Box<dyn std::io::BufRead>)
        })
        .with_context(|| format!("importing {}", file.display()))?;
        if !json {
            println!(
                "{}: {} run(s) added, {} already held; {} sweep(s), {} trace(s), {} task module(s)",
                file.display(),
                moved.runs,
                moved.duplicates,
                moved.sweeps,
                moved.traces,
                moved.tasks
            );
        }
        all.push((file.display().to_string(), moved));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    }
    Ok(())
}

/// `csd runs diff`: the headline numbers of the designs both runs have.
fn print_diff(a: &str, b: &str, store: &StoreArgs, json: bool) -> anyhow::Result<()> {
    let s = open(store)?;
    let (ra, rb) = (s.get(a)?, s.get(b)?);
    let d = diff(&ra.report, &rb.report).with_context(|| format!("comparing {a} with {b}"))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&d)?);
        return Ok(());
    }
    if d.is_empty() {
        println!("{a} and {b} have no design in common");
    }
    for dd in d {
        println!("{}", dd.design);
        for m in dd.metrics {
            let rel = m
                .relative
                .map_or(String::new(), |r| format!(" ({:+.1}%)", r * 100.0));
            let verdict = match m.better {
                Some(true) => "  better",
                Some(false) => "  worse",
                None => "",
            };
            // Nanoseconds read as microseconds, as in every other table (--json keeps ns).
            let (label, show): (String, fn(f64) -> String) = match m.metric.strip_suffix("_ns") {
                Some(base) => (format!("{base} (µs)"), |x| format!("{:.1}", x / 1e3)),
                None => (m.metric.clone(), number),
            };
            let delta = show(m.delta);
            let delta = if m.delta > 0.0 {
                format!("+{delta}")
            } else {
                delta
            };
            println!(
                "  {label:<28} {:>14} → {:>14}  {delta}{rel}{verdict}",
                show(m.a),
                show(m.b),
            );
        }
    }
    Ok(())
}

/// `csd runs list`: a sweep's points are counted per sweep unless `sweep` or `all` asks for
/// them; `--json` lists every run.
fn list(sweep: Option<&str>, all: bool, store: &StorePath, json: bool) -> anyhow::Result<()> {
    let s = open(&store.args())?;
    let runs = match sweep {
        Some(name) => {
            s.sweep(name)?;
            s.sweep_runs(name)?
        }
        None => s.list()?,
    };
    if json {
        let brief: Vec<_> = runs
            .iter()
            .map(|r| {
                serde_json::json!({"id": r.id, "kind": r.kind(), "trace": r.trace,
                    "profile": r.profile, "designs": r.designs, "seed": r.seed,
                    "csd_version": r.csd_version, "stored_at": r.stored_at,
                    "sweep": r.sweep})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&brief)?);
        return Ok(());
    }
    if runs.is_empty() {
        println!(
            "no runs in {} yet: `csd replay` or `csd ndp` saves one",
            s.path().display()
        );
        return Ok(());
    }
    if sweep.is_some() || all {
        print_list(&runs);
        return Ok(());
    }
    let (points, runs): (Vec<_>, Vec<_>) = runs.into_iter().partition(|r| r.sweep.is_some());
    if !runs.is_empty() {
        print_list(&runs);
    }
    let mut by_sweep: std::collections::BTreeMap<&str, usize> = Default::default();
    for p in &points {
        let tag = p.sweep.as_ref().expect("partitioned");
        *by_sweep.entry(tag.sweep.as_str()).or_default() += 1;
    }
    for (name, n) in by_sweep {
        println!("{n} run(s) are points of sweep {name}: csd runs list --sweep {name}");
    }
    Ok(())
}

/// `csd runs list`'s table.
fn print_list(runs: &[csd_traces::store::StoredRun]) {
    let rows: Vec<[String; 6]> = runs
        .iter()
        .map(|r| {
            let trace = r.trace.as_ref().map_or("-".to_string(), |t| t.name.clone());
            let kind = match r.report.unreadable() {
                Some(_) => format!("{} (unreadable)", r.kind()),
                None => r.kind().to_string(),
            };
            [
                r.id.clone(),
                utc(r.stored_at),
                kind,
                r.profile.clone(),
                trace,
                r.designs.join(","),
            ]
        })
        .collect();
    // Columns as wide as their widest cell: profile and trace names vary a lot.
    let head = ["id", "stored (UTC)", "kind", "profile", "trace", "designs"].map(String::from);
    let width = |c: usize| {
        rows.iter()
            .chain([&head])
            .map(|r| r[c].chars().count())
            .max()
            .unwrap_or(0)
    };
    let w = [width(0), width(1), width(2), width(3), width(4)];
    for r in std::iter::once(&head).chain(&rows) {
        println!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {:<w4$}  {}",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            r[5],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3],
            w4 = w[4]
        );
    }
}

/// A count as an integer, anything else with three decimals.
fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x:.3}")
    }
}

/// `csd runs show`: what ran, then each design's headline numbers.
fn print_run(r: &csd_traces::store::StoredRun) {
    println!("run {} · {} · profile {}", r.id, r.kind(), r.profile);
    if let Some(t) = &r.trace {
        println!("  trace      {} ({})", t.name, t.id);
    }
    println!("  designs    {}", r.designs.join(", "));
    println!("  seed       {}", r.seed);
    if let Some(tag) = &r.sweep {
        println!(
            "  sweep      {} point {} ({})",
            tag.sweep,
            tag.key,
            tag.label()
        );
    }
    println!(
        "  stored     {} UTC by csd {}",
        utc(r.stored_at),
        r.csd_version
    );
    match &r.spec {
        Some(spec) => {
            println!(
                "  rerun      yes: it keeps its system spec (csd runs rerun {})",
                r.id
            );
            for t in &spec.tasks {
                println!("  task       {} ({})", t.reference, t.id);
            }
        }
        None => println!("  rerun      no: this kind of run keeps no system spec"),
    }
    if let Some(why) = r.report.unreadable() {
        println!("\n  {why}; `--json` shows it as stored");
        return;
    }
    for h in r.report.headlines() {
        println!("\n{}", h.design);
        for (metric, value) in &h.metrics {
            println!("  {metric:<30} {}", number(*value));
        }
    }
    println!("\n(the whole report: csd runs show {} --json)", r.id);
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM` (UTC), without a date library: the
/// civil-from-days algorithm (Howard Hinnant's).
fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let (hh, mm) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn epoch_seconds_read_as_utc_dates() {
        assert_eq!(super::utc(0), "1970-01-01 00:00");
        assert_eq!(super::utc(951_782_400), "2000-02-29 00:00");
        assert_eq!(super::utc(1_795_486_980), "2026-11-24 02:23");
    }
}
