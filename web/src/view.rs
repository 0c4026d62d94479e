//! What a stored report looks like to the dashboard's charts.
//!
//! Reports are stored exactly as `--json` prints them (replay: `designs[]`; `csd ndp`:
//! `points[].designs[]`). This module reads both into one shape, so the front end draws
//! charts without knowing where the numbers came from. Numbers are passed through, never
//! recomputed: a PAO label shows the report's `pao`.

use csd_traces::store::StoredRun;
use serde::Serialize;
use serde_json::Value;

/// The stages of LightFS Fig. 3, in the order they stack.
const STAGES: [&str; 5] = ["retrieve_layout", "dma", "read_file", "compute", "others"];

#[derive(Clone, Debug, Default, Serialize)]
pub struct RunView {
    /// Stacked latency breakdowns (one chart per replay, one per data point of `csd ndp`).
    pub breakdowns: Vec<BreakdownChart>,
    /// Per design, each op type's latency percentiles (replays).
    pub latency: Vec<DesignLatency>,
    /// fsync tails per design, when the trace has fsyncs (SIFT §5.1.4).
    pub fsync: Vec<FsyncTail>,
    /// Replay reduction per design, when the report carries one (persistence designs).
    pub reduction: Vec<Reduction>,
    /// Device counters per design.
    pub device: Vec<DesignCounters>,
}

#[derive(Clone, Debug, Serialize)]
pub struct BreakdownChart {
    pub title: String,
    /// What a bar's height is: mean per-file latency of an offload request.
    pub unit: &'static str,
    pub bars: Vec<Bar>,
}

/// One design's mean latency, split into stages, with its PAO.
#[derive(Clone, Debug, Serialize)]
pub struct Bar {
    pub design: String,
    pub stages: Vec<Stage>,
    pub total_ns: f64,
    /// Percentage of additional overhead, 0–1 (LightFS §III).
    pub pao: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Stage {
    pub name: String,
    pub ns: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct DesignLatency {
    pub design: String,
    pub ops: Vec<OpRow>,
}

#[derive(Clone, Debug, Serialize)]
pub struct OpRow {
    pub op: String,
    pub count: u64,
    pub failed: u64,
    pub p50_ns: f64,
    pub p99_ns: f64,
    pub p999_ns: f64,
    pub max_ns: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct FsyncTail {
    pub design: String,
    pub count: u64,
    pub p50_ns: f64,
    pub p99_ns: f64,
    pub p9999_ns: f64,
    pub max_ns: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Reduction {
    pub design: String,
    /// Fraction of the baseline's replay work avoided, 0–1.
    pub reduction: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct DesignCounters {
    pub design: String,
    pub counters: Vec<(String, f64)>,
}

/// A headline number for the runs table.
#[derive(Clone, Debug, Serialize)]
pub struct Headline {
    pub design: String,
    pub label: &'static str,
    pub value: f64,
    pub unit: &'static str,
}

use csd_traces::store::number_at as num;

fn name_of(v: &Value) -> String {
    v.get("design")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string()
}

fn bar(design: String, d: &Value) -> Option<Bar> {
    let breakdown = d.get("breakdown")?.as_object()?;
    let pao = d.get("pao")?.as_f64()?;
    // Known stages in Fig. 3's order, then any others a future design reports.
    let mut names: Vec<String> = STAGES.iter().map(|s| s.to_string()).collect();
    for k in breakdown.keys() {
        let k = k.trim_end_matches("_ns");
        if !names.iter().any(|n| n == k) {
            names.push(k.to_string());
        }
    }
    let stages: Vec<Stage> = names
        .into_iter()
        .filter_map(|name| {
            let ns = breakdown.get(&format!("{name}_ns"))?.as_f64()?;
            Some(Stage { name, ns })
        })
        .collect();
    Some(Bar {
        design,
        total_ns: stages.iter().map(|s| s.ns).sum(),
        stages,
        pao,
    })
}

fn replay_designs(report: &Value) -> &[Value] {
    report
        .get("designs")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn ndp_points(report: &Value) -> &[Value] {
    report
        .get("points")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

impl RunView {
    pub fn of(run: &StoredRun) -> RunView {
        let mut v = RunView::default();
        let designs = replay_designs(&run.report);
        let bars: Vec<Bar> = designs
            .iter()
            .filter_map(|d| bar(name_of(d), d.get("ndp")?))
            .collect();
        if !bars.is_empty() {
            v.breakdowns.push(BreakdownChart {
                title: "offload requests in the trace".into(),
                unit: "mean µs per file",
                bars,
            });
        }
        for d in designs {
            let design = name_of(d);
            if let Some(lat) = d.get("latency").and_then(Value::as_object) {
                let ops = lat
                    .iter()
                    .map(|(op, l)| OpRow {
                        op: op.clone(),
                        count: num(l, &["count"]).unwrap_or(0.0) as u64,
                        failed: num(l, &["failed"]).unwrap_or(0.0) as u64,
                        p50_ns: num(l, &["p50_ns"]).unwrap_or(0.0),
                        p99_ns: num(l, &["p99_ns"]).unwrap_or(0.0),
                        p999_ns: num(l, &["p999_ns"]).unwrap_or(0.0),
                        max_ns: num(l, &["max_ns"]).unwrap_or(0.0),
                    })
                    .collect();
                if let Some(f) = lat.get("fsync") {
                    v.fsync.push(FsyncTail {
                        design: design.clone(),
                        count: num(f, &["count"]).unwrap_or(0.0) as u64,
                        p50_ns: num(f, &["p50_ns"]).unwrap_or(0.0),
                        p99_ns: num(f, &["p99_ns"]).unwrap_or(0.0),
                        // Reports from before p99.99 was kept show p99.9 there.
                        p9999_ns: num(f, &["p9999_ns"])
                            .or_else(|| num(f, &["p999_ns"]))
                            .unwrap_or(0.0),
                        max_ns: num(f, &["max_ns"]).unwrap_or(0.0),
                    });
                }
                v.latency.push(DesignLatency {
                    design: design.clone(),
                    ops,
                });
            }
            if let Some(r) = num(d, &["replay_reduction"]) {
                v.reduction.push(Reduction {
                    design: design.clone(),
                    reduction: r,
                });
            }
            if let Some(dev) = d.get("device") {
                let mut counters = Vec::new();
                for group in ["io", "ftl"] {
                    if let Some(g) = dev.get(group).and_then(Value::as_object) {
                        for (k, x) in g {
                            if let Some(x) = x.as_f64() {
                                counters.push((k.clone(), x));
                            }
                        }
                    }
                }
                if let Some(w) = num(dev, &["waf"]) {
                    counters.push(("waf".into(), w));
                }
                v.device.push(DesignCounters { design, counters });
            }
        }
        for p in ndp_points(&run.report) {
            let files = num(p, &["files"]).unwrap_or(0.0);
            let size = num(p, &["size_bytes"]).unwrap_or(0.0);
            let bars: Vec<Bar> = p
                .get("designs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|d| bar(name_of(d), d))
                .collect();
            if !bars.is_empty() {
                v.breakdowns.push(BreakdownChart {
                    title: format!("{files} files × {size} B"),
                    unit: "mean µs per file",
                    bars,
                });
            }
        }
        v
    }
}

/// The numbers the runs table shows for a run, per design.
pub fn headlines(run: &StoredRun) -> Vec<Headline> {
    let mut out = Vec::new();
    for d in replay_designs(&run.report) {
        if let Some(x) = num(d, &["ops_per_sec"]) {
            out.push(Headline {
                design: name_of(d),
                label: "throughput",
                value: x,
                unit: "ops/s",
            });
        }
        if let Some(x) = num(d, &["ndp", "pao"]) {
            out.push(Headline {
                design: name_of(d),
                label: "PAO",
                value: x,
                unit: "ratio",
            });
        }
    }
    if let Some(p) = ndp_points(&run.report).first() {
        for d in p
            .get("designs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(x) = num(d, &["mean_latency_ns"]) {
                out.push(Headline {
                    design: name_of(d),
                    label: "latency",
                    value: x,
                    unit: "ns",
                });
            }
        }
    }
    out
}
