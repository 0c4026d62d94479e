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
    /// Grouped bar charts of `csd persist` runs (throughput over the fsync-interval sweep,
    /// host CPU cost, checkpoint time).
    pub charts: Vec<GroupedChart>,
    /// `csd repro`: the papers' figures against ours, one table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repro: Option<csd_traces::repro::Report>,
}

/// Bars grouped by design, one bar per series in each group.
#[derive(Clone, Debug, Serialize)]
pub struct GroupedChart {
    pub title: String,
    pub unit: &'static str,
    pub series: Vec<String>,
    pub groups: Vec<Group>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Group {
    pub design: String,
    /// One value per series, in the series' order; `None` where the report has none (no
    /// foreground progress has no CPU cost per Kops/s), drawn as no bar rather than a zero.
    pub values: Vec<Option<f64>>,
}

impl GroupedChart {
    /// A chart of `runs`' `value`, grouped by configuration, one series per fsync interval
    /// (online sweeps) or a single series `label` (backlogs).
    fn of_persist(
        title: &str,
        unit: &'static str,
        label: &str,
        runs: &[Value],
        value: impl Fn(&Value) -> Option<f64>,
    ) -> GroupedChart {
        let config = |r: &Value| {
            r.get("config")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string()
        };
        let series_of = |r: &Value| {
            num(r, &["spec", "interval"]).map_or(label.to_string(), |i| format!("i={i}"))
        };
        let mut chart = GroupedChart {
            title: title.to_string(),
            unit,
            series: Vec::new(),
            groups: Vec::new(),
        };
        for r in runs {
            let s = series_of(r);
            if !chart.series.contains(&s) {
                chart.series.push(s);
            }
            let c = config(r);
            if !chart.groups.iter().any(|g| g.design == c) {
                chart.groups.push(Group {
                    design: c,
                    values: Vec::new(),
                });
            }
        }
        for g in &mut chart.groups {
            g.values = chart
                .series
                .iter()
                .map(|s| {
                    runs.iter()
                        .find(|r| config(r) == g.design && &series_of(r) == s)
                        .and_then(&value)
                })
                .collect();
        }
        chart
    }
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

use csd_traces::store::{number_at as num, persist_label, persist_runs};

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
    // Long: one branch per report kind the dashboard draws.
    pub fn of(run: &StoredRun) -> RunView {
        let mut v = RunView::default();
        if run.kind == csd_traces::store::RunKind::Repro {
            // A report that does not parse (an older csd's) falls back to its raw JSON.
            v.repro = serde_json::from_value(run.report.clone()).ok();
            return v;
        }
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
        v.add_persist(&run.report);
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

impl RunView {
    /// `csd persist` runs: online sweeps give fsync tails and throughput and CPU-cost
    /// charts; backlogs give replay reduction and checkpoint time.
    fn add_persist(&mut self, report: &Value) {
        let runs = persist_runs(report);
        if runs.is_empty() {
            return;
        }
        let online = report.get("workload").and_then(Value::as_str) == Some("online");
        if online {
            for r in runs {
                let us = |k: &str| num(r, &["fsync", k]).unwrap_or(0.0) * 1e3;
                self.fsync.push(FsyncTail {
                    design: persist_label(r),
                    count: num(r, &["fsync", "samples"]).unwrap_or(0.0) as u64,
                    p50_ns: us("p50_us"),
                    p99_ns: us("p99_us"),
                    p9999_ns: us("p9999_us"),
                    max_ns: us("max_us"),
                });
            }
            self.charts.push(GroupedChart::of_persist(
                "foreground throughput (write + fsync)",
                "Kops/s",
                "throughput",
                runs,
                |r| num(r, &["kops"]),
            ));
            self.charts.push(GroupedChart::of_persist(
                "host CPU cost per Kops/s (SIFT eq. 1)",
                "%/Kops/s",
                "cost",
                runs,
                |r| num(r, &["cpu_cost"]),
            ));
        } else {
            for r in runs {
                let raw = num(r, &["checkpoint", "raw_blocks"]).unwrap_or(0.0);
                let left = num(r, &["checkpoint", "surviving_blocks"]).unwrap_or(0.0);
                if raw > 0.0 {
                    self.reduction.push(Reduction {
                        design: persist_label(r),
                        reduction: 1.0 - left / raw,
                    });
                }
            }
            self.charts.push(GroupedChart::of_persist(
                "manual checkpoint time",
                "ms",
                "checkpoint",
                runs,
                |r| num(r, &["checkpoint_ms"]),
            ));
        }
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
    for r in persist_runs(&run.report) {
        let (label, value, unit) = match num(r, &["kops"]) {
            Some(k) => ("throughput", k * 1e3, "ops/s"),
            None => match num(r, &["checkpoint_ms"]) {
                Some(ms) => ("checkpoint", ms, "ms"),
                None => continue,
            },
        };
        out.push(Headline {
            design: persist_label(r),
            label,
            value,
            unit,
        });
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
