//! A sweep as the dashboard draws it: every stored point with its parameters and its
//! headline numbers. The page picks the metric and the swept axis, and averages over seeds
//! when the seed is not the axis, so switching costs no request.

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
    /// What the spec asked the chart to show first.
    pub axis: Option<Axis>,
    pub metric: String,
    pub runs: Vec<PointView>,
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
        let axes = listed
            .into_iter()
            .map(|(axis, listed)| {
                // Values as the spec lists them, then any a stored point has besides
                // (designs are named as the points name them, `all` expanded).
                let mut values: Vec<String> = listed
                    .into_iter()
                    .filter(|v| points.iter().any(|p| p.params.get(&axis) == Some(v)))
                    .collect();
                for p in &points {
                    if let Some(v) = p.params.get(&axis) {
                        if !values.contains(v) {
                            values.push(v.clone());
                        }
                    }
                }
                AxisValues { axis, values }
            })
            .filter(|a| !a.values.is_empty())
            .collect();
        let metric = spec
            .chart
            .metric
            .clone()
            .filter(|m| metrics.contains(m))
            .or_else(|| metrics.first().cloned())
            .unwrap_or_default();
        SweepView {
            name: spec.name.clone(),
            points: record.points,
            stored: points.len(),
            axes,
            metrics,
            axis: spec.chart.axis,
            metric,
            runs: points,
        }
    }
}
