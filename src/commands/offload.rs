//! `csd trace offload` and `csd replay --offload`: a recorded program's scans folded into
//! `ndp` requests by an offload plan.

use anyhow::Context;
use csd_traces::offload::{FoldReport, Folder, Plan};
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Reads and checks a plan file.
pub fn load_plan(path: &Path) -> anyhow::Result<Folder> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the offload plan {}", path.display()))?;
    let plan = Plan::parse(&text).with_context(|| format!("in {}", path.display()))?;
    plan.folder()
        .with_context(|| format!("in {}", path.display()))
}

/// Folds `trace` into `out` (written beside it and renamed once complete, so a failed fold
/// leaves what was there).
pub fn fold_to(trace: &Path, folder: &Folder, out: &Path) -> anyhow::Result<FoldReport> {
    let input =
        BufReader::new(File::open(trace).with_context(|| format!("opening {}", trace.display()))?);
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".partial-{}", std::process::id()));
    let partial = out.with_file_name(name);
    let sink = BufWriter::new(
        File::create(&partial).with_context(|| format!("creating {}", partial.display()))?,
    );
    let folded = csd_traces::offload::fold_trace(input, folder, sink)
        .with_context(|| format!("folding {}", trace.display()));
    match folded {
        Ok(report) => {
            std::fs::rename(&partial, out)
                .with_context(|| format!("moving the trace to {}", out.display()))?;
            Ok(report)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            Err(e)
        }
    }
}

pub fn run(trace: &Path, plan: &Path, out: Option<&Path>, json: bool) -> anyhow::Result<()> {
    let folder = load_plan(plan)?;
    let report = match out {
        Some(out) => fold_to(trace, &folder, out)?,
        None => {
            let input = BufReader::new(
                File::open(trace).with_context(|| format!("opening {}", trace.display()))?,
            );
            let stdout = std::io::stdout().lock();
            let mut sink = BufWriter::new(stdout);
            let r = csd_traces::offload::fold_trace(input, &folder, &mut sink)
                .with_context(|| format!("folding {}", trace.display()))?;
            sink.flush()?;
            r
        }
    };
    if json {
        eprintln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        say(&report);
    }
    Ok(())
}

/// What the fold did, per rule, on stderr (stdout may carry the trace).
pub fn say(r: &FoldReport) {
    for rule in &r.rules {
        eprintln!(
            "csd: rule '{}': {} files ({} events, {}) folded into {} ndp request(s) of task '{}'",
            rule.rule,
            rule.files,
            rule.events,
            crate::units::fmt_bytes(rule.bytes),
            rule.requests,
            rule.task
        );
    }
    if r.kept_scans > 0 {
        eprintln!(
            "csd: {} matching file(s) were not read whole and in order, so they stay on the host",
            r.kept_scans
        );
    }
    eprintln!("csd: {} events in, {} out", r.events_in, r.events_out);
}

/// Where `csd replay --offload` keeps a folded trace: in the cache, named by the trace's
/// and the plan's content, so a second replay of the same pair folds nothing again.
#[allow(dead_code)] // wired into `csd replay --offload` next
pub fn cached_fold(trace: &Path, plan: &Path) -> anyhow::Result<(PathBuf, Option<FoldReport>)> {
    let folder = load_plan(plan)?;
    let trace_id = csd_traces::store::trace_id_of(
        File::open(trace).with_context(|| format!("opening {}", trace.display()))?,
    )?;
    let plan_id = csd_traces::store::trace_id(&std::fs::read(plan)?);
    let key = csd_traces::store::trace_id(format!("{trace_id}+{plan_id}").as_bytes());
    // Beside the compiled-module cache ($XDG_CACHE_HOME/csdlab), else the temp directory.
    let dir = csd_runtime::default_cache_dir()
        .and_then(|d| d.parent().map(Path::to_path_buf))
        .unwrap_or_else(std::env::temp_dir)
        .join("offloaded");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let stem = trace
        .file_stem()
        .map_or("trace".into(), |s| s.to_string_lossy().into_owned());
    let out = dir.join(format!(
        "{stem}.offloaded-{}.trace",
        &key.trim_start_matches("sha256:")[..16]
    ));
    if out.exists() {
        return Ok((out, None));
    }
    let report = fold_to(trace, &folder, &out)?;
    Ok((out, Some(report)))
}
