//! `csd trace offload` and `csd replay --offload`: a recorded program's scans folded into
//! `ndp` requests by an offload plan; and `csd trace fuse`, its file-op runs fused into
//! CISC ops.

use super::replay::{in_memory, Opener, SAMPLE_PLANS};
use anyhow::Context;
use csd_traces::offload::{FoldReport, Folder, Plan};
use csd_traces::store::TraceRef;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

/// Reads and checks a plan: a file, or a bundled plan by name.
pub fn load_plan(path: &Path) -> anyhow::Result<Folder> {
    let (_, text) = plan_text(path)?;
    parse_plan(&text, &path.display().to_string())
}

fn parse_plan(text: &str, name: &str) -> anyhow::Result<Folder> {
    let plan = Plan::parse(text).with_context(|| format!("in {name}"))?;
    plan.folder().with_context(|| format!("in {name}"))
}

/// A plan's file name and text: the file at `path`, else the bundled plan of that name.
fn plan_text(path: &Path) -> anyhow::Result<(String, String)> {
    if path.is_file() {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the offload plan {}", path.display()))?;
        let name = path.file_name().map_or(path.display().to_string(), |n| {
            n.to_string_lossy().into_owned()
        });
        return Ok((name, text));
    }
    let name = path.display().to_string();
    bundled_plan(&name)
        .map(|(file, text)| (file.to_string(), text.to_string()))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no offload plan '{name}': no such file, and no bundled plan of that name ({})",
                SAMPLE_PLANS.map(|(n, _)| n).join(", ")
            )
        })
}

/// The bundled plan `name` names (with or without `.plan.toml`): its file name and text.
fn bundled_plan(name: &str) -> Option<(&'static str, &'static str)> {
    SAMPLE_PLANS
        .iter()
        .find(|(n, _)| *n == name || n.strip_suffix(".plan.toml") == Some(name))
        .copied()
}

/// What a trace folded in memory gives a replay: how to open it, its reference
/// (`<trace> offloaded by <plan>`), what the fold did and its bytes.
pub type Folded = (Opener, TraceRef, FoldReport, Arc<Vec<u8>>);

/// Folds an opened trace under `plan` (a file, or a bundled plan by name) into memory.
pub fn fold_opened(open: &mut Opener, trace: &TraceRef, plan: &Path) -> anyhow::Result<Folded> {
    let (name, text) = plan_text(plan)?;
    let folder = parse_plan(&text, &plan.display().to_string())?;
    fold_with(open, trace, &folder, &name)
}

/// Folds an opened trace under the bundled plan `name` only: never a file, for requests
/// from the dashboard, which must not name files on the server's host.
pub fn fold_opened_bundled(
    open: &mut Opener,
    trace: &TraceRef,
    name: &str,
) -> anyhow::Result<Folded> {
    let (file, text) = bundled_plan(name).ok_or_else(|| {
        anyhow::anyhow!(
            "no bundled offload plan '{name}' (a request names one of: {})",
            SAMPLE_PLANS.map(|(n, _)| n).join(", ")
        )
    })?;
    fold_with(open, trace, &parse_plan(text, file)?, file)
}

fn fold_with(
    open: &mut Opener,
    trace: &TraceRef,
    folder: &Folder,
    plan_name: &str,
) -> anyhow::Result<Folded> {
    let mut out = Capped(Vec::new());
    let input = open().with_context(|| format!("reading {}", trace.name))?;
    let report = csd_traces::offload::fold_trace(input, folder, &mut out)
        .with_context(|| format!("folding {}", trace.name))?;
    let bytes = Arc::new(out.0);
    let folded = TraceRef {
        id: csd_traces::store::trace_id(&bytes),
        name: format!(
            "{} offloaded by {plan_name}",
            trace.name.trim_start_matches("(sample) ")
        ),
    };
    Ok((in_memory(bytes.clone()), folded, report, bytes))
}

/// The most a folded trace `csd replay --offload` keeps in memory may hold; a larger one is
/// folded to a file with `csd trace offload -o` and replayed from there.
pub const MAX_IN_MEMORY: usize = 256 << 20;

/// A buffer that refuses to grow past [`MAX_IN_MEMORY`].
struct Capped(Vec<u8>);

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + buf.len() > MAX_IN_MEMORY {
            return Err(std::io::Error::other(format!(
                "the folded trace is over {} in memory: fold it to a file with `csd trace \
                 offload -o FILE` and replay that",
                crate::units::fmt_bytes(MAX_IN_MEMORY as u64)
            )));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes `out` through `write`, beside its final name, and renames it once complete: a
/// failed transform leaves what was there.
fn write_beside<T>(
    out: &Path,
    write: impl FnOnce(BufWriter<File>) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".partial-{}", std::process::id()));
    let partial = out.with_file_name(name);
    let sink = BufWriter::new(
        File::create(&partial).with_context(|| format!("creating {}", partial.display()))?,
    );
    match write(sink) {
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

/// Folds `trace` into `out` (written beside it and renamed once complete, so a failed fold
/// leaves what was there).
pub fn fold_to(trace: &Path, folder: &Folder, out: &Path) -> anyhow::Result<FoldReport> {
    let input =
        BufReader::new(File::open(trace).with_context(|| format!("opening {}", trace.display()))?);
    write_beside(out, |sink| {
        csd_traces::offload::fold_trace(input, folder, sink)
            .with_context(|| format!("folding {}", trace.display()))
    })
}

/// `csd trace fuse`: a trace file, or a bundled sample by name, fused into `out` (or
/// standard output).
pub fn fuse(trace: &Path, out: Option<&Path>, json: bool) -> anyhow::Result<()> {
    let input: Box<dyn std::io::BufRead + Send> = if trace.is_file() {
        Box::new(BufReader::new(
            File::open(trace).with_context(|| format!("opening {}", trace.display()))?,
        ))
    } else {
        let name = trace.display().to_string();
        let text = super::replay::sample(&name).ok_or_else(|| {
            anyhow::anyhow!(
                "no trace '{name}': no such file, and no bundled sample of that name ({})",
                super::replay::SAMPLES.map(|(n, _)| n).join(", ")
            )
        })?;
        Box::new(text.as_bytes())
    };
    let fuse = |sink: &mut dyn Write| {
        csd_traces::fuse::fuse_trace(input, sink)
            .with_context(|| format!("fusing {}", trace.display()))
    };
    let report = match out {
        Some(out) => write_beside(out, |mut sink| fuse(&mut sink))?,
        None => {
            let mut sink = BufWriter::new(std::io::stdout().lock());
            let r = fuse(&mut sink)?;
            sink.flush()?;
            r
        }
    };
    if json {
        eprintln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    for (pattern, n) in &report.ops {
        eprintln!(
            "csd: {n} {} op(s) from {} events",
            pattern.name(),
            report.events_fused.get(pattern).copied().unwrap_or(0)
        );
    }
    if report.ops.is_empty() {
        eprintln!("csd: nothing in the trace is fusible");
    }
    eprintln!(
        "csd: {} events in, {} out; the fused ops write {}",
        report.events_in,
        report.events_out,
        crate::units::fmt_bytes(report.bytes_written)
    );
    Ok(())
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
    for rule in r.rules.iter().filter(|rule| rule.files == 0) {
        eprintln!(
            "csd: rule '{}' took no file: none the program opened read-only matched its paths ({})",
            rule.rule,
            rule.paths.join(", ")
        );
    }
    if r.rules.iter().any(|rule| rule.files == 0) && !r.unmatched_examples.is_empty() {
        eprintln!(
            "csd: {} read-only open(s) matched no rule, e.g. {}",
            r.unmatched_opens,
            r.unmatched_examples.join(", ")
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
