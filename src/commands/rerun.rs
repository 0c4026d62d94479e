//! `csd runs rerun`: rebuild a stored run's system from its spec and check that it
//! reproduces the stored report byte for byte.

use super::replay::{replay_all, Opener, SAMPLES};
use super::runs::StoreArgs;
use anyhow::{bail, Context};
use csd::ndp::NdpTask;
use csd::tasks::{Paths, ResolvedTask, Resolver};
use csd_traces::replay::ReplayOptions;
use csd_traces::report::{PersistRun, Report};
use csd_traces::spec::{SystemKind, SystemSpec};
use csd_traces::store::{trace_id, StoredRun, TraceRef};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// What a rerun found.
#[derive(Serialize)]
struct Outcome {
    run: String,
    identical: bool,
    report_bytes: usize,
    /// The first differing places, as JSON paths with the stored and the new value.
    differences: Vec<(String, Value, Value)>,
}

pub fn run(id: &str, store: &StoreArgs, json: bool) -> anyhow::Result<()> {
    // The store is held only while reading: the rerun itself may take long.
    let (stored, trace_bytes, modules) = {
        let s = super::runs::open(store)?;
        let stored = s.get(id)?;
        let spec = spec_of(&stored)?;
        // The stored tasks the run used, by the content id it recorded: a name that moved
        // to another module since still reruns the module the run ran.
        let modules: Modules = spec
            .tasks
            .iter()
            .filter_map(|t| {
                let (_, wasm) = s.task(&t.id).ok()?;
                Some((t.reference.clone(), (t.id.clone(), wasm)))
            })
            .collect();
        let bytes = match &spec.system {
            SystemKind::Replay { trace, .. } => s.trace(&trace.id).ok().map(|(_, b)| b),
            SystemKind::Ndp { .. }
            | SystemKind::PersistOnline { .. }
            | SystemKind::PersistBacklog { .. }
            | SystemKind::Txbench { .. }
            | SystemKind::Txapps { .. }
            | SystemKind::Fusion { .. }
            | SystemKind::IspfsQuery { .. }
            | SystemKind::IspfsIozone { .. } => None,
        };
        (stored, bytes, modules)
    };
    let spec = spec_of(&stored)?;
    if let Some(why) = stored.report.unreadable() {
        bail!("run {id}'s stored report cannot be compared: {why}");
    }
    let (stored_json, new_json) = (
        stored.report.to_json(),
        reproduce(id, &spec, trace_bytes, &modules)?.to_json(),
    );
    let (old, new) = (
        serde_json::to_string(&stored_json)?,
        serde_json::to_string(&new_json)?,
    );
    let mut differences = Vec::new();
    differ("", &stored_json, &new_json, &mut differences);
    let outcome = Outcome {
        run: id.to_string(),
        identical: old == new,
        report_bytes: old.len(),
        differences,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
    } else if outcome.identical {
        println!(
            "{id} reproduced: the report is byte-identical ({} bytes)",
            outcome.report_bytes
        );
    } else {
        println!("{id} did not reproduce; first differences (stored → now):");
        for (path, a, b) in &outcome.differences {
            println!("  {path}: {a} → {b}");
        }
    }
    if !outcome.identical {
        bail!("run {id} did not reproduce its stored report");
    }
    Ok(())
}

/// Runs the system `spec` describes and returns its report as `--json` prints it: a stored
/// run again (`csd runs rerun`), or a sweep's point (`csd sweep`). `id` names it in errors.
// Long: one arm per system kind, each calling the function its command runs.
pub(super) fn reproduce(
    id: &str,
    spec: &SystemSpec,
    trace_bytes: Option<Vec<u8>>,
    modules: &Modules,
) -> anyhow::Result<Report> {
    let stored = |name: &str| modules.get(name).cloned();
    let resolver = Resolver {
        stored: &stored,
        paths: Paths::Allowed,
    };
    Ok(match &spec.system {
        SystemKind::Replay {
            trace,
            designs,
            pace,
            strictness,
        } => {
            let mut open = opener(trace, trace_bytes)?;
            let opts = ReplayOptions {
                pace: *pace,
                seed: spec.seed,
                strictness: *strictness,
            };
            let (_, run) = replay_all(
                &mut open,
                trace,
                &spec.profile,
                designs,
                &opts,
                &resolver,
                |_, _, _| {},
            )
            .with_context(|| format!("running {id}"))?;
            // The trace's tasks resolved again: each must be the module the run ran.
            for t in run.spec.iter().flat_map(|s| &s.tasks) {
                same_id(id, spec, &t.reference, &t.id)?;
            }
            run.report
        }
        SystemKind::Ndp {
            app,
            args,
            content,
            designs,
            points,
            cold,
        } => {
            let task = NdpTask::new(app, args.as_deref(), *content, &resolver)
                .with_context(|| format!("run {id} names task '{app}'"))?;
            same_task(id, spec, app, &task.task)?;
            let plan = points.iter().map(|&(n, s)| (None, n, s)).collect();
            let report =
                super::ndp::measure_plan(&spec.profile, &task, designs, plan, *cold, spec.seed)
                    .with_context(|| format!("running {id}"))?;
            Report::Ndp(report)
        }
        SystemKind::PersistOnline { runs } => {
            let reports = super::persist::online_runs(&spec.profile, runs, spec.seed)
                .with_context(|| format!("running {id}"))?;
            Report::Persist(PersistRun::Online(reports))
        }
        SystemKind::PersistBacklog {
            backlog,
            sizes,
            configs,
        } => {
            let reports =
                super::persist::backlog_runs(&spec.profile, *backlog, *sizes, configs, spec.seed)
                    .with_context(|| format!("running {id}"))?;
            Report::Persist(PersistRun::Backlog(reports))
        }
        SystemKind::Txbench {
            file_bytes,
            points,
            off_points,
        } => Report::Txbench(
            super::txbench::rerun(&spec.profile, *file_bytes, points, off_points, spec.seed)
                .with_context(|| format!("running {id}"))?,
        ),
        SystemKind::Txapps { sizes, apps } => Report::Txapps(
            super::txapps::measure_apps(&spec.profile, *sizes, apps, spec.seed)
                .with_context(|| format!("running {id}"))?,
        ),
        SystemKind::Fusion { spec: fusion } => Report::Fusion(
            super::fusion::measure(&spec.profile, fusion, false)
                .with_context(|| format!("running {id}"))?,
        ),
        SystemKind::IspfsQuery { spec: query } => Report::Ispfs(
            super::ispfs::measure_query(&spec.profile, query, spec.seed, false)
                .with_context(|| format!("running {id}"))?,
        ),
        SystemKind::IspfsIozone { spec: grid } => Report::Iozone(
            super::ispfs::measure_iozone(&spec.profile, grid, spec.seed, false)
                .with_context(|| format!("running {id}"))?,
        ),
    })
}

/// Task modules kept in the store, by the reference a run named them with: (id, module).
pub(super) type Modules = BTreeMap<String, (String, Vec<u8>)>;

/// Refuses to go on when the module `reference` resolves to now is not the one the run ran
/// (a module file rebuilt, or a built-in changed with csd).
fn same_task(
    id: &str,
    spec: &SystemSpec,
    reference: &str,
    now: &ResolvedTask,
) -> anyhow::Result<()> {
    same_id(id, spec, reference, &now.id)
}

fn same_id(id: &str, spec: &SystemSpec, reference: &str, now: &str) -> anyhow::Result<()> {
    if let Some(then) = spec.tasks.iter().find(|t| t.reference == reference) {
        if then.id != now {
            bail!(
                "task '{reference}' changed since run {id}: the run ran module {}, it is now {now}",
                then.id
            );
        }
    }
    Ok(())
}

fn spec_of(run: &StoredRun) -> anyhow::Result<SystemSpec> {
    let Some(spec) = run.spec.clone() else {
        bail!(
            "run {} keeps no system spec, so it cannot be rebuilt: it was stored by an older \
             csd, or by a command whose runs do not keep one (csd run and csd repro's own \
             table; every experiment behind a csd repro line does)",
            run.id
        );
    };
    spec.check_version()
        .map_err(|e| anyhow::anyhow!("run {}: {e}", run.id))?;
    Ok(spec)
}

/// The trace a replay run used: from the run store, a bundled sample, or the file it was
/// replayed from, whichever still has its content id.
fn opener(trace: &TraceRef, stored: Option<Vec<u8>>) -> anyhow::Result<Opener> {
    let bytes = match stored {
        Some(b) => b,
        None => match SAMPLES
            .iter()
            .find(|(_, text)| trace_id(text.as_bytes()) == trace.id)
        {
            Some((_, text)) => text.as_bytes().to_vec(),
            None => {
                let from_file = std::fs::read(&trace.name).ok();
                match from_file.filter(|b| trace_id(b) == trace.id) {
                    Some(b) => b,
                    None => bail!(
                        "the trace {} ({}) is not in the run store, not a bundled sample, and \
                         the file of that name is gone or changed; `csd trace add` keeps a \
                         trace for reruns",
                        trace.name,
                        trace.id
                    ),
                }
            }
        },
    };
    let bytes = std::sync::Arc::new(bytes);
    Ok(Box::new(move || {
        Ok(Box::new(std::io::Cursor::new(bytes.as_ref().clone()))
            as Box<dyn std::io::BufRead + Send>)
    }))
}

/// At most this many differences are listed.
const MAX_DIFFERENCES: usize = 10;

/// Collects where `a` and `b` differ, as JSON paths.
fn differ(path: &str, a: &Value, b: &Value, out: &mut Vec<(String, Value, Value)>) {
    if out.len() >= MAX_DIFFERENCES || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                differ(&format!("{path}.{k}"), va, vb, out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                differ(&format!("{path}[{i}]"), va, vb, out);
            }
        }
        _ => out.push((path.to_string(), a.clone(), b.clone())),
    }
}
