//! `csd replay`'s report.

use crate::replay::{Pace, ReplayReport};
use serde::{Deserialize, Serialize};

/// A trace replayed under each design.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayRun {
    /// The name the trace was replayed under.
    pub trace: String,
    pub profile: String,
    pub mode: Pace,
    pub seed: u64,
    pub designs: Vec<ReplayReport>,
}
