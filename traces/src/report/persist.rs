//! `csd persist`'s report: SIFT's persistence configurations under one workload.

use csd_device::persist::backlog::BacklogReport;
use csd_device::persist::online::OnlineReport;
use serde::{Deserialize, Serialize};

/// The workload's name beside its runs, so a stored report says what it is:
/// `{"workload": "online"|"backlog", "runs": [...]}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "workload", content = "runs", rename_all = "lowercase")]
pub enum PersistRun {
    /// One run per (sizes and interval, configuration) of the online pressure benchmark.
    Online(Vec<OnlineReport>),
    /// One manual checkpoint of the backlog per configuration.
    Backlog(Vec<BacklogReport>),
}

/// A persist run's configuration name, with the background fsync interval for online runs
/// (`coalesce i=128`): how `runs diff` and the dashboard label it.
pub fn online_label(r: &OnlineReport) -> String {
    format!("{} i={}", r.config.name(), r.spec.interval)
}
