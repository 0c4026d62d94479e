//! A sweep as the dashboard draws it and `csd sweep` prints it: every stored point with its
//! parameters and headline numbers ([`SweepView`]), and one metric across one swept axis
//! ([`SweepTable`]): a line per design (and per value of every other varied axis but the
//! seed), each cell the mean over seeds with their spread.

use csd_traces::store::StoredRun;
use csd_traces::sweep::{Axis, SweepRecord};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Serialize)]
pub struct SweepView {
    pub name: String,
    /// Points of the whole grid (every shard), and how many are stored here.
    pub points: usize,
    pub stored: usize,
    /// Each axis the sweep varies, with its values in the spec's order.
    pub axes: Vec<AxisValues>,
    /// Every metric a point reports, in the first point's order.
    pub metrics: Vec<String>,
    /// What the chart shows first: the spec's choice, else the first axis with more than
    /// one value (designs aside) and the first metric.
    pub axis: Axis,
    pub metric: String,
    pub runs: Vec<PointView>,
}

/// One metric across one axis.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepTable {
    pub axis: Axis,
    pub metric: String,
    /// The axis' values, in the spec's order: the columns.
    pub xs: Vec<String>,
    pub series: Vec<Series>,
}

/// One line of a [`SweepTable`]: a design, with the other varied axes' values.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Series {
    pub name: String,
    /// One cell per x; `None` where no stored point has the metric.
    pub cells: Vec<Option<Cell>>,
}

/// The points of one series at one x: the mean of their metric (over seeds, unless the
/// seed is the axis), its spread, and the runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cell {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub runs: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct AxisValues {
    pub axis: Axis,
    pub values: Vec<String>,
}

/// One stored point.
#[derive(Clone, Debug, Serialize)]
pub struct PointView {
    pub run: String,
    pub params: BTreeMap<Axis, String>,
    pub metrics: BTreeMap<String, f64>,
}

/// A one-line list entry for the runs page.
#[derive(Clone, Debug, Serialize)]
pub struct SweepSummary {
    pub name: String,
    pub points: usize,
    pub stored: usize,
}

impl SweepSummary {
    pub fn of(record: &SweepRecord, stored: usize) -> SweepSummary {
        SweepSummary {
            name: record.spec.name.clone(),
            points: record.points,
            stored,
        }
    }
}

impl SweepView {
    pub fn of(record: &SweepRecord, runs: &[StoredRun]) -> SweepView {
        let mut points: Vec<PointView> = Vec::new();
        let mut metrics: Vec<String> = Vec::new();
        for run in runs {
            let Some(tag) = &run.sweep else { continue };
            // A point runs one design (at one data point), so its first headline is it.
            let Some(h) = run.report.headlines().into_iter().next() else {
                continue;
            };
            for (m, _) in &h.metrics {
                if !metrics.contains(m) {
                    metrics.push(m.clone());
                }
            }
            points.push(PointView {
                run: run.id.clone(),
                params: tag.params.iter().cloned().collect(),
                metrics: h
                    .metrics
                    .into_iter()
                    .filter(|(_, v)| v.is_finite())
                    .collect(),
            });
        }
        let spec = &record.spec;
        let axes = axes(spec, &points);
        let metric = spec
            .chart
            .metric
            .clone()
            .filter(|m| metrics.contains(m))
            .or_else(|| metrics.first().cloned())
            .unwrap_or_default();
        let has = |a: Axis| axes.iter().any(|x: &AxisValues| x.axis == a);
        let axis = spec
            .chart
            .axis
            .filter(|&a| has(a))
            .or_else(|| {
                axes.iter()
                    .find(|x| x.axis != Axis::Design && x.values.len() > 1)
                    .map(|x| x.axis)
            })
            .or_else(|| axes.iter().find(|x| x.axis != Axis::Design).map(|x| x.axis))
            .unwrap_or(Axis::Design);
        SweepView {
            name: spec.name.clone(),
            points: record.points,
            stored: points.len(),
            axes,
            metrics,
            axis,
            metric,
            runs: points,
        }
    }
}

impl SweepView {
    /// `metric` across `axis`: a series per design and per value of every other axis with
    /// more than one value, the seed aside (cells average over it unless it is the axis).
    pub fn table(&self, axis: Axis, metric: &str) -> SweepTable {
        let xs = self
            .axes
            .iter()
            .find(|a| a.axis == axis)
            .map(|a| a.values.clone())
            .unwrap_or_default();
        let others: Vec<Axis> = self
            .axes
            .iter()
            .filter(|a| {
                a.axis != axis
                    && a.axis != Axis::Seed
                    && a.axis != Axis::Design
                    && a.values.len() > 1
            })
            .map(|a| a.axis)
            .collect();
        // Per series, per x: the points' (value, run).
        type Points = Vec<Vec<(f64, String)>>;
        let mut series: Vec<(String, Points)> = Vec::new();
        for p in &self.runs {
            let (Some(&value), Some(x)) = (p.metrics.get(metric), p.params.get(&axis)) else {
                continue;
            };
            let Some(i) = xs.iter().position(|v| v == x) else {
                continue;
            };
            let name = std::iter::once(p.params.get(&Axis::Design).cloned())
                .chain(
                    others
                        .iter()
                        .map(|a| p.params.get(a).map(|v| format!("{a}={v}"))),
                )
                .flatten()
                .collect::<Vec<_>>()
                .join(" ");
            let at = match series.iter().position(|(n, _)| *n == name) {
                Some(at) => at,
                None => {
                    series.push((name, vec![Vec::new(); xs.len()]));
                    series.len() - 1
                }
            };
            series[at].1[i].push((value, p.run.clone()));
        }
        SweepTable {
            axis,
            metric: metric.to_string(),
            xs,
            series: series
                .into_iter()
                .map(|(name, cells)| Series {
                    name,
                    cells: cells
                        .into_iter()
                        .map(|c| {
                            (!c.is_empty()).then(|| Cell {
                                mean: c.iter().map(|(v, _)| v).sum::<f64>() / c.len() as f64,
                                min: c.iter().map(|(v, _)| *v).fold(f64::INFINITY, f64::min),
                                max: c.iter().map(|(v, _)| *v).fold(f64::NEG_INFINITY, f64::max),
                                runs: c.into_iter().map(|(_, r)| r).collect(),
                            })
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// Each axis with a value in a stored point: values as the spec lists them, then any a
/// stored point has besides (designs are named as the points name them, `all` expanded).
fn axes(spec: &csd_traces::sweep::SweepSpec, points: &[PointView]) -> Vec<AxisValues> {
    let listed: [(Axis, Vec<String>); 7] = [
        (Axis::Trace, spec.traces.clone()),
        (Axis::Task, spec.tasks.clone()),
        (Axis::Profile, spec.profiles.clone()),
        (Axis::Design, Vec::new()),
        (Axis::Seed, spec.seeds.iter().map(u64::to_string).collect()),
        (
            Axis::Files,
            spec.files.iter().map(usize::to_string).collect(),
        ),
        (Axis::Size, spec.sizes.clone()),
    ];
    listed
        .into_iter()
        .map(|(axis, listed)| {
            let mut values: Vec<String> = listed
                .into_iter()
                .filter(|v| points.iter().any(|p| p.params.get(&axis) == Some(v)))
                .collect();
            for p in points {
                if let Some(v) = p.params.get(&axis) {
                    if !values.contains(v) {
                        values.push(v.clone());
                    }
                }
            }
            AxisValues { axis, values }
        })
        .filter(|a| !a.values.is_empty())
        .collect()
}
