//! The numbers worth comparing in a report, per design: what `csd runs diff` and the
//! dashboard's comparison put side by side.

use super::kind::Report;
use super::persist::online_label;
use super::persist::PersistRun;
use csd_hostfs::ndp::Stages;
use serde::Serialize;

/// One design's (or configuration's, or application's) headline numbers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Headline {
    /// What ran: a design (`lightfs`), a design at a data point (`lightfs (100 × 16384 B)`),
    /// a configuration (`coalesce i=128`), a task or an application placement.
    pub design: String,
    pub metrics: Vec<(String, f64)>,
}

/// What changed from run `a` to run `b` for one design present in both.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DesignDelta {
    pub design: String,
    pub metrics: Vec<MetricDelta>,
}

/// One number in both runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MetricDelta {
    pub metric: String,
    pub a: f64,
    pub b: f64,
    /// `b − a`.
    pub delta: f64,
    /// `(b − a) / a`, when `a` is not zero.
    pub relative: Option<f64>,
    /// Whether `b` is better than `a` (higher throughput, lower latency, overhead, work…);
    /// `None` when the values are equal or the metric has no better direction.
    pub better: Option<bool>,
}

/// Whether a higher value of `metric` is better (`Some(true)`), worse (`Some(false)`), or
/// neither.
pub fn higher_is_better(metric: &str) -> Option<bool> {
    let m = metric.rsplit('.').next().unwrap_or(metric);
    if [
        "ops_per_sec",
        "mb_per_s",
        "kops",
        "iops",
        "bandwidth_bytes_per_sec",
    ]
    .contains(&m)
    {
        return Some(true);
    }
    let lower = m.ends_with("_ns")
        || m.ends_with("_us")
        || m.ends_with("_ms")
        || [
            "pao",
            "waf",
            "fuel",
            "io_share",
            "host_cpu_pct",
            "cpu_cost",
            "flash_page_reads",
            "flash_page_programs",
            "surviving_blocks",
            "write_requests",
            "stale_files",
            "commits",
            "log_blocks",
        ]
        .contains(&m);
    lower.then_some(false)
}

/// Why two reports cannot be compared.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotComparable(pub String);

impl Report {
    /// The report's headline numbers, per design.
    // Long: one arm per report kind, each listing its numbers.
    pub fn headlines(&self) -> Vec<Headline> {
        let h = |design: String, metrics: Vec<(&str, f64)>| Headline {
            design,
            metrics: metrics
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        };
        match self {
            Report::Replay(r) => r
                .designs
                .iter()
                .map(|d| {
                    let mut m = vec![
                        ("duration_ns", d.duration_ns as f64),
                        ("ops_per_sec", d.ops_per_sec),
                    ];
                    if let Some(ndp) = &d.ndp {
                        m.push(("ndp.pao", ndp.pao));
                        m.extend(stages(NDP_STAGES, &ndp.breakdown));
                        m.push(("ndp.stale_files", ndp.stale_files as f64));
                    }
                    if let Some(j) = &d.journal {
                        m.push(("journal.commits", j.commits as f64));
                        m.push(("journal.log_blocks", j.log_blocks as f64));
                    }
                    m.push(("device.waf", d.device.waf));
                    m.push((
                        "device.flash_page_reads",
                        d.device.io.flash_page_reads as f64,
                    ));
                    m.push((
                        "device.flash_page_programs",
                        d.device.io.flash_page_programs as f64,
                    ));
                    let mut out = h(d.design.to_string(), m);
                    for (op, l) in &d.latency {
                        out.metrics.push((format!("{op}.p50_ns"), l.p50_ns as f64));
                        out.metrics.push((format!("{op}.p99_ns"), l.p99_ns as f64));
                    }
                    out
                })
                .collect(),
            Report::Ndp(r) => r
                .points
                .iter()
                .flat_map(|p| {
                    p.designs.iter().map(move |d| {
                        h(
                            format!("{} ({} × {} B)", d.design, p.files, p.size_bytes),
                            [
                                ("mean_latency_ns", d.summary.mean_latency_ns),
                                ("pao", d.summary.pao),
                            ]
                            .into_iter()
                            .chain(stages(STAGES, &d.summary.breakdown))
                            .collect(),
                        )
                    })
                })
                .collect(),
            Report::Task(r) => {
                let b = &r.report.breakdown;
                vec![h(
                    r.report.task.clone(),
                    vec![
                        ("latency_ns", r.latency_ns as f64),
                        ("fuel", r.report.fuel as f64),
                        ("read_file_ns", b.read_file_ns as f64),
                        ("compute_ns", b.compute_ns as f64),
                        ("write_ns", b.write_ns as f64),
                        ("dma_ns", b.dma_ns as f64),
                        ("others_ns", b.others_ns as f64),
                    ],
                )]
            }
            Report::Txbench(r) => r
                .flash_timing_on
                .iter()
                .map(|m| {
                    h(
                        format!("{:?} w={}% qd={}", m.mode, m.write_pct, m.qd).to_lowercase(),
                        vec![
                            ("mb_per_s", m.mb_per_s),
                            ("virtual_ns", m.virtual_ns as f64),
                            ("commit_ns", m.commit_ns as f64),
                        ],
                    )
                })
                .collect(),
            Report::Txapps(r) => r
                .runs
                .iter()
                .map(|a| {
                    h(
                        format!("{} {}", a.app.task(), a.placement.name()),
                        vec![
                            ("latency_ns", a.latency_ns as f64),
                            ("mb_per_s", a.mb_per_s),
                            ("io_share", a.io_share),
                        ],
                    )
                })
                .collect(),
            Report::Persist(PersistRun::Online(runs)) => runs
                .iter()
                .map(|r| {
                    let mut m = vec![
                        ("kops", r.kops),
                        ("fsync.p50_us", r.fsync.p50_us),
                        ("fsync.p9999_us", r.fsync.p9999_us),
                        ("host_cpu_pct", r.host_cpu_pct),
                    ];
                    if let Some(c) = r.cpu_cost {
                        m.push(("cpu_cost", c));
                    }
                    h(online_label(r), m)
                })
                .collect(),
            Report::Persist(PersistRun::Backlog(runs)) => runs
                .iter()
                .map(|r| {
                    h(
                        r.config.name().to_string(),
                        vec![
                            ("checkpoint_ms", r.checkpoint_ms),
                            (
                                "checkpoint.surviving_blocks",
                                r.checkpoint.surviving_blocks as f64,
                            ),
                            (
                                "checkpoint.write_requests",
                                r.checkpoint.write_requests as f64,
                            ),
                        ],
                    )
                })
                .collect(),
            Report::Device(r) => vec![h(
                r.rw.to_string(),
                vec![
                    ("iops", r.iops),
                    ("bandwidth_bytes_per_sec", r.bandwidth_bytes_per_sec),
                    ("latency.p50_ns", r.latency.p50_ns as f64),
                    ("latency.p99_ns", r.latency.p99_ns as f64),
                    ("waf", r.counters.waf),
                ],
            )],
            Report::Repro(r) => r
                .lines
                .iter()
                .filter_map(|l| Some(h(l.id.clone(), vec![("ours", l.ours_value?)])))
                .collect(),
            Report::Fusion(r) => r
                .curves
                .iter()
                .map(|c| Headline {
                    design: c.label(),
                    metrics: c
                        .points
                        .iter()
                        .map(|p| (format!("t{}.ops_per_sec", p.threads), p.ops_per_sec))
                        .collect(),
                })
                .collect(),
            Report::Ispfs(r) => ["isp", "software"]
                .into_iter()
                .map(|design| Headline {
                    design: design.to_string(),
                    metrics: r
                        .points
                        .iter()
                        .map(|p| {
                            let s = if design == "isp" { &p.isp } else { &p.software };
                            (format!("{}B.mb_per_sec", p.bytes), s.mb_per_sec)
                        })
                        .collect(),
                })
                .collect(),
            Report::Iozone(r) => ["ispfs", "ext4"]
                .into_iter()
                .map(|design| Headline {
                    design: design.to_string(),
                    metrics: r
                        .points
                        .iter()
                        .map(|p| {
                            let v = if design == "ispfs" {
                                p.ispfs_mb_per_sec
                            } else {
                                p.ext4_mb_per_sec
                            };
                            let key = format!(
                                "{}.{}B.{}B.mb_per_sec",
                                p.test.name(),
                                p.file_bytes,
                                p.record_bytes
                            );
                            (key, v)
                        })
                        .collect(),
                })
                .collect(),
            Report::Unreadable(_) => Vec::new(),
        }
    }
}

/// The metric names of a mean per-file breakdown's stages: as `csd ndp` reports them, and
/// under a replay's `ndp.` totals.
const STAGES: [&str; 5] = [
    "retrieve_layout_ns",
    "dma_ns",
    "read_file_ns",
    "compute_ns",
    "others_ns",
];
const NDP_STAGES: [&str; 5] = [
    "ndp.retrieve_layout_ns",
    "ndp.dma_ns",
    "ndp.read_file_ns",
    "ndp.compute_ns",
    "ndp.others_ns",
];

/// A breakdown's stages as metrics named by `names`.
fn stages(names: [&'static str; 5], b: &Stages) -> Vec<(&'static str, f64)> {
    let ns = [
        b.retrieve_layout_ns,
        b.dma_ns,
        b.read_file_ns,
        b.compute_ns,
        b.others_ns,
    ];
    names.into_iter().zip(ns).collect()
}

/// What changed from `a` to `b`, design by design (designs present in both).
pub fn diff(a: &Report, b: &Report) -> Result<Vec<DesignDelta>, NotComparable> {
    for r in [a, b] {
        if let Some(why) = r.unreadable() {
            return Err(NotComparable(why.to_string()));
        }
    }
    let hb = b.headlines();
    let mut out = Vec::new();
    for ha in a.headlines() {
        let Some(mb) = hb.iter().find(|h| h.design == ha.design) else {
            continue;
        };
        let metrics = ha
            .metrics
            .into_iter()
            .filter_map(|(metric, a)| {
                let b = mb.metrics.iter().find(|(k, _)| *k == metric)?.1;
                let better = match higher_is_better(&metric) {
                    _ if a == b => None,
                    Some(up) => Some(up == (b > a)),
                    None => None,
                };
                Some(MetricDelta {
                    relative: (a != 0.0).then(|| (b - a) / a),
                    delta: b - a,
                    better,
                    metric,
                    a,
                    b,
                })
            })
            .collect();
        out.push(DesignDelta {
            design: ha.design,
            metrics,
        });
    }
    Ok(out)
}
