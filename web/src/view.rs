//! What a stored report looks like to the dashboard's charts.
//!
//! A stored run's report is typed ([`Report`]); this module turns each kind into one shape
//! of charts and tables, so the front end draws them without knowing where the numbers came
//! from. Numbers are passed through, never recomputed: a PAO label shows the report's `pao`.

use csd_device::persist::backlog::BacklogReport;
use csd_device::persist::online::OnlineReport;
use csd_hostfs::fusion::FusionReport;
use csd_hostfs::ispfs::iozone::{Interface, IozonePoint, IozoneReport, Test};
use csd_hostfs::ispfs::query::{QueryReport, Solution};
use csd_hostfs::ndp::Stages;
use csd_traces::report::{online_label, AppRun, NdpDesign, PersistRun, ReplayRun, Report, TaskRun};
use csd_traces::store::StoredRun;
use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
pub struct RunView {
    /// Stacked latency breakdowns (one chart per replay, one per data point of `csd ndp`).
    pub breakdowns: Vec<BreakdownChart>,
    /// Per design, each op type's latency percentiles (replays).
    pub latency: Vec<DesignLatency>,
    /// Tails of the durability calls, `fsync` and `fdatasync`, per design and call, when the
    /// trace makes them (SIFT §5.1.4; SQLite commits with `fdatasync`).
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
    /// Why the report cannot be charted (stored by another csd in a layout this one does
    /// not read); the page then shows it as stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
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
    /// A chart of `runs`' `value`, grouped by configuration (`config`), one series per
    /// `series` (the fsync interval of online sweeps, one label for backlogs).
    fn of_persist<R>(
        title: &str,
        unit: &'static str,
        runs: &[R],
        config: impl Fn(&R) -> String,
        series_of: impl Fn(&R) -> String,
        value: impl Fn(&R) -> Option<f64>,
    ) -> GroupedChart {
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
    /// Percentage of additional overhead, 0–1 (LightFS §III), where the report has one.
    pub pao: Option<f64>,
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
    /// `fsync` or `fdatasync`.
    pub call: String,
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

/// The stages of LightFS Fig. 3, in the order they stack.
/// The calls whose tails the dashboard charts: each returns once the file's data is durable.
const DURABILITY_CALLS: [&str; 2] = ["fsync", "fdatasync"];

fn stages_bar(design: String, b: &Stages, pao: f64) -> Bar {
    bar(
        design,
        &[
            ("retrieve_layout", b.retrieve_layout_ns),
            ("dma", b.dma_ns),
            ("read_file", b.read_file_ns),
            ("compute", b.compute_ns),
            ("others", b.others_ns),
        ],
        Some(pao),
    )
}

/// A task invocation's stages (reads, compute, writes, DMA, command handling).
fn invocation_bar(design: String, b: &csd_device::invocation::Breakdown) -> Bar {
    let ns = |x: u64| x as f64;
    bar(
        design,
        &[
            ("read_file", ns(b.read_file_ns)),
            ("compute", ns(b.compute_ns)),
            ("write", ns(b.write_ns)),
            ("dma", ns(b.dma_ns)),
            ("others", ns(b.others_ns)),
        ],
        None,
    )
}

fn bar(design: String, stages: &[(&str, f64)], pao: Option<f64>) -> Bar {
    let stages: Vec<Stage> = stages
        .iter()
        .map(|&(name, ns)| Stage {
            name: name.to_string(),
            ns,
        })
        .collect();
    Bar {
        design,
        total_ns: stages.iter().map(|s| s.ns).sum(),
        stages,
        pao,
    }
}

fn ndp_bar(d: &NdpDesign) -> Bar {
    stages_bar(d.design.to_string(), &d.summary.breakdown, d.summary.pao)
}

impl RunView {
    pub fn of(run: &StoredRun) -> RunView {
        let mut v = RunView::default();
        match &run.report {
            Report::Replay(r) => v.add_replay(r),
            Report::Ndp(r) => {
                for p in &r.points {
                    v.breakdowns.push(BreakdownChart {
                        title: format!("{} files × {} B", p.files, p.size_bytes),
                        unit: "mean µs per file",
                        bars: p.designs.iter().map(ndp_bar).collect(),
                    });
                }
            }
            Report::Task(t) => v.add_task(t),
            Report::Txapps(r) => v.add_txapps(&r.runs),
            Report::Persist(PersistRun::Online(runs)) => v.add_online(runs),
            Report::Persist(PersistRun::Backlog(runs)) => v.add_backlog(runs),
            Report::Repro(r) => v.repro = Some(r.clone()),
            Report::Fusion(r) => v.add_fusion(r),
            Report::Ispfs(r) => v.add_ispfs(r),
            Report::Iozone(r) => v.add_iozone(r),
            Report::Txbench(_) | Report::Device(_) => {}
            Report::Unreadable(u) => v.unreadable = Some(u.why.clone()),
        }
        v
    }

    fn add_replay(&mut self, r: &ReplayRun) {
        let bars: Vec<Bar> = r
            .designs
            .iter()
            .filter_map(|d| {
                let ndp = d.ndp.as_ref()?;
                Some(stages_bar(d.design.to_string(), &ndp.breakdown, ndp.pao))
            })
            .collect();
        if !bars.is_empty() {
            self.breakdowns.push(BreakdownChart {
                title: "offload requests in the trace".into(),
                unit: "mean µs per file",
                bars,
            });
        }
        self.add_storagefs(r);
        for d in &r.designs {
            let design = d.design.to_string();
            let ops = d
                .latency
                .iter()
                .map(|(op, l)| OpRow {
                    op: op.clone(),
                    count: l.count,
                    failed: l.failed,
                    p50_ns: l.p50_ns as f64,
                    p99_ns: l.p99_ns as f64,
                    p999_ns: l.p999_ns as f64,
                    max_ns: l.max_ns as f64,
                })
                .collect();
            for call in DURABILITY_CALLS {
                let Some(f) = d.latency.get(call) else {
                    continue;
                };
                self.fsync.push(FsyncTail {
                    design: design.clone(),
                    call: call.to_string(),
                    count: f.count,
                    p50_ns: f.p50_ns as f64,
                    p99_ns: f.p99_ns as f64,
                    p9999_ns: f.p9999_ns as f64,
                    max_ns: f.max_ns as f64,
                });
            }
            self.latency.push(DesignLatency {
                design: design.clone(),
                ops,
            });
            let (io, ftl) = (&d.device.io, &d.device.ftl);
            let counters = [
                ("host_commands", io.host_commands),
                ("host_bytes_read", io.host_bytes_read),
                ("host_bytes_written", io.host_bytes_written),
                ("internal_bytes_read", io.internal_bytes_read),
                ("internal_bytes_written", io.internal_bytes_written),
                ("flash_page_reads", io.flash_page_reads),
                ("flash_page_programs", io.flash_page_programs),
                ("read_modify_writes", io.read_modify_writes),
                ("data_buffer_hits", io.data_buffer_hits),
                ("pages_written", ftl.pages_written),
                ("gc_pages_migrated", ftl.gc_pages_migrated),
                ("gc_victims", ftl.gc_victims),
                ("blocks_erased", ftl.blocks_erased),
                ("pages_trimmed", ftl.pages_trimmed),
            ]
            .into_iter()
            .map(|(k, x)| (k.to_string(), x as f64))
            .chain([("waf".to_string(), d.device.waf)])
            .collect();
            self.device.push(DesignCounters { design, counters });
        }
    }

    /// The StorageFS designs (firmware, fusion): the replay's time and the device cores'
    /// share of it, and the round trips each made, fused against unfused.
    fn add_storagefs(&mut self, r: &ReplayRun) {
        let on: Vec<_> = r
            .designs
            .iter()
            .filter_map(|d| Some((d.design.to_string(), d.duration_ns, d.fusion.as_ref()?)))
            .collect();
        if on.is_empty() {
            return;
        }
        self.charts.push(GroupedChart {
            title: "StorageFS replay time".into(),
            unit: "µs",
            series: vec!["replay".into(), "device cores".into()],
            groups: on
                .iter()
                .map(|(design, ns, f)| Group {
                    design: design.clone(),
                    values: vec![Some(*ns as f64 / 1e3), Some(f.device_core_ns as f64 / 1e3)],
                })
                .collect(),
        });
        self.charts.push(GroupedChart {
            title: "StorageFS host↔device round trips".into(),
            unit: "requests",
            series: vec!["all".into(), "CISC ops".into()],
            groups: on
                .iter()
                .map(|(design, _, f)| Group {
                    design: design.clone(),
                    values: vec![Some(f.requests as f64), Some(f.cisc_ops as f64)],
                })
                .collect(),
        });
    }

    /// One invocation: where its latency went.
    fn add_task(&mut self, t: &TaskRun) {
        self.breakdowns.push(BreakdownChart {
            title: format!(
                "task {} ({}) · {} fuel, {} read, {} written",
                t.report.task,
                format!("{:?}", t.report.exec).to_lowercase(),
                t.report.fuel,
                t.report.bytes_read,
                t.report.bytes_written
            ),
            unit: "µs",
            bars: vec![invocation_bar(t.report.task.clone(), &t.report.breakdown)],
        });
    }

    /// TxISC's applications: one chart per application, one bar per placement.
    fn add_txapps(&mut self, runs: &[AppRun]) {
        let mut apps: Vec<_> = runs.iter().map(|r| r.app).collect();
        apps.dedup();
        for app in apps {
            self.breakdowns.push(BreakdownChart {
                title: app.task().to_string(),
                unit: "µs",
                bars: runs
                    .iter()
                    .filter(|r| r.app == app)
                    .map(|r| invocation_bar(r.placement.name().to_string(), &r.breakdown))
                    .collect(),
            });
        }
    }

    /// `csd fusion`: throughput per design, one bar per thread count (FusionFS Fig. 3).
    fn add_fusion(&mut self, r: &FusionReport) {
        self.charts.push(GroupedChart {
            title: format!(
                "{}: throughput by design and thread count",
                r.workload.name()
            ),
            unit: "k ops/s",
            series: r
                .threads
                .iter()
                .map(|t| format!("{t} thread{}", if *t == 1 { "" } else { "s" }))
                .collect(),
            groups: r
                .curves
                .iter()
                .map(|c| Group {
                    design: c.label(),
                    values: c.points.iter().map(|p| Some(p.ops_per_sec / 1e3)).collect(),
                })
                .collect(),
        });
    }

    /// `csd ispfs query`: search speed, I/O requests and host CPU of both solutions per file
    /// size (ISPFS Figs. 8–9).
    fn add_ispfs(&mut self, r: &QueryReport) {
        let series: Vec<String> = r.points.iter().map(|p| format!("{} B", p.bytes)).collect();
        let chart = |title: &str, unit: &'static str, f: fn(&Solution) -> f64| GroupedChart {
            title: title.to_string(),
            unit,
            series: series.clone(),
            groups: ["isp", "software"]
                .into_iter()
                .map(|design| Group {
                    design: design.to_string(),
                    values: r
                        .points
                        .iter()
                        .map(|p| Some(f(if design == "isp" { &p.isp } else { &p.software })))
                        .collect(),
                })
                .collect(),
        };
        self.charts.extend([
            chart("word query: search speed by file size", "MB/s", |s| {
                s.mb_per_sec
            }),
            chart(
                "I/O requests (ISP: system calls; software: block requests)",
                "requests",
                |s| s.io_requests as f64,
            ),
            chart("host CPU utilisation", "%", |s| s.host_cpu_share * 100.0),
        ]);
    }

    /// `csd ispfs iozone`: ISPFS and EXT4 throughput per test, one group per (file,
    /// record) size and interface (ISPFS Fig. 7).
    fn add_iozone(&mut self, r: &IozoneReport) {
        for test in Test::ALL {
            let points: Vec<_> = r.points.iter().filter(|p| p.test == test).collect();
            if points.is_empty() {
                continue;
            }
            let series = points
                .iter()
                .map(|p| {
                    format!(
                        "{} KiB of {} KiB, {}",
                        p.record_bytes >> 10,
                        p.file_bytes >> 10,
                        p.interface.name()
                    )
                })
                .collect();
            let group = |design: &str, f: fn(&IozonePoint) -> f64| Group {
                design: design.to_string(),
                values: points.iter().map(|p| Some(f(p))).collect(),
            };
            self.charts.push(GroupedChart {
                title: format!(
                    "iozone {} over {}: throughput by record and file size",
                    test.name(),
                    r.spec.medium.name()
                ),
                unit: "MB/s",
                series,
                groups: vec![
                    group("ispfs", |p| p.ispfs_mb_per_sec),
                    group("ext4", |p| p.ext4_mb_per_sec),
                ],
            });
        }
    }

    /// `csd persist online`: fsync tails, throughput and CPU cost over the interval sweep.
    fn add_online(&mut self, runs: &[OnlineReport]) {
        for r in runs {
            let us = |x: f64| x * 1e3;
            self.fsync.push(FsyncTail {
                call: "fsync".to_string(),
                design: online_label(r),
                count: r.fsync.samples,
                p50_ns: us(r.fsync.p50_us),
                p99_ns: us(r.fsync.p99_us),
                p9999_ns: us(r.fsync.p9999_us),
                max_ns: us(r.fsync.max_us),
            });
        }
        let config = |r: &OnlineReport| r.config.name().to_string();
        let interval = |r: &OnlineReport| format!("i={}", r.spec.interval);
        self.charts.push(GroupedChart::of_persist(
            "foreground throughput (write + fsync)",
            "Kops/s",
            runs,
            config,
            interval,
            |r| Some(r.kops),
        ));
        self.charts.push(GroupedChart::of_persist(
            "host CPU cost per Kops/s (SIFT eq. 1)",
            "%/Kops/s",
            runs,
            config,
            interval,
            |r| r.cpu_cost,
        ));
    }

    /// `csd persist backlog`: replay reduction and checkpoint time per configuration.
    fn add_backlog(&mut self, runs: &[BacklogReport]) {
        for r in runs {
            let c = &r.checkpoint;
            if c.raw_blocks > 0 {
                self.reduction.push(Reduction {
                    design: r.config.name().to_string(),
                    reduction: 1.0 - c.surviving_blocks as f64 / c.raw_blocks as f64,
                });
            }
        }
        self.charts.push(GroupedChart::of_persist(
            "manual checkpoint time",
            "ms",
            runs,
            |r| r.config.name().to_string(),
            |_| "checkpoint".to_string(),
            |r| Some(r.checkpoint_ms),
        ));
    }
}

/// The numbers the runs table shows for a run, per design.
// Long: one arm per report kind.
pub fn headlines(run: &StoredRun) -> Vec<Headline> {
    let h = |design: String, label, value, unit| Headline {
        design,
        label,
        value,
        unit,
    };
    match &run.report {
        Report::Replay(r) => r
            .designs
            .iter()
            .flat_map(|d| {
                let name = d.design.to_string();
                let stale = d.ndp.as_ref().filter(|n| n.stale_files > 0).map(|n| {
                    let files = n.stale_files as f64;
                    h(name.clone(), "stale reads", files, "files")
                });
                std::iter::once(h(name.clone(), "throughput", d.ops_per_sec, "ops/s"))
                    .chain(
                        d.ndp
                            .as_ref()
                            .map(|n| h(name.clone(), "PAO", n.pao, "ratio")),
                    )
                    .chain(stale)
            })
            .collect(),
        Report::Ndp(r) => r.points.first().map_or(Vec::new(), |p| {
            p.designs
                .iter()
                .map(|d| {
                    let name = d.design.to_string();
                    h(name, "latency", d.summary.mean_latency_ns, "ns")
                })
                .collect()
        }),
        Report::Task(t) => vec![h(
            t.report.task.clone(),
            "latency",
            t.latency_ns as f64,
            "ns",
        )],
        Report::Txapps(r) => r
            .runs
            .iter()
            .map(|a| {
                let name = format!("{} {}", a.app.task(), a.placement.name());
                h(name, "latency", a.latency_ns as f64, "ns")
            })
            .collect(),
        Report::Persist(PersistRun::Online(runs)) => runs
            .iter()
            .map(|r| h(online_label(r), "throughput", r.kops * 1e3, "ops/s"))
            .collect(),
        Report::Persist(PersistRun::Backlog(runs)) => runs
            .iter()
            .map(|r| {
                let name = r.config.name().to_string();
                h(name, "checkpoint", r.checkpoint_ms, "ms")
            })
            .collect(),
        Report::Fusion(r) => r
            .curves
            .iter()
            .filter_map(|c| {
                let p = c.points.last()?;
                Some(h(c.label(), "throughput", p.ops_per_sec, "ops/s"))
            })
            .collect(),
        Report::Ispfs(r) => r.points.last().map_or(Vec::new(), |p| {
            vec![
                h("isp".into(), "speed", p.isp.mb_per_sec, "MB/s"),
                h("software".into(), "speed", p.software.mb_per_sec, "MB/s"),
            ]
        }),
        // One headline per test and interface run: the two interfaces differ most on the
        // random tests, which a mean over both would hide.
        Report::Iozone(r) => Interface::ALL
            .into_iter()
            .flat_map(|i| Test::ALL.into_iter().map(move |t| (i, t)))
            .filter_map(|(i, t)| {
                let ratio = r.mean_ratio_through(t, i)?;
                Some(h(
                    format!("ispfs/ext4 {} {}", t.name(), i.name()),
                    "mean ratio",
                    ratio,
                    "x",
                ))
            })
            .collect(),
        Report::Txbench(_) | Report::Device(_) | Report::Repro(_) | Report::Unreadable(_) => {
            Vec::new()
        }
    }
}
