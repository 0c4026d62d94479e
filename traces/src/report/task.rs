//! `csd run`'s report: one task invocation.

use csd_device::invocation::TaskReport;
use serde::{Deserialize, Serialize};

/// One task run on imported files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskRun {
    pub profile: String,
    /// The device paths the task was given.
    pub files: Vec<String>,
    /// What the task returned, as JSON (a string when it returned something else).
    pub result: serde_json::Value,
    pub latency_ns: u64,
    #[serde(flatten)]
    pub report: TaskReport,
}
