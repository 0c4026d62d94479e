//! Typed reports: what each kind of run reports, exactly as `--json` prints it and the run
//! store keeps it.
//!
//! Every report-producing command builds one of these types and serialises it; the run store
//! parses a stored report back into the same type, and `runs diff` and the dashboard read
//! fields, never JSON keys. A report kind's layout carries a version ([`ReportKind::version`]):
//! a stored report of another version, or one that no longer parses, loads as
//! [`Report::Unreadable`], which keeps its JSON (so `runs show` still prints it and nothing
//! stored is lost) and says why it cannot be compared or charted.

mod headline;
mod kind;
mod ndp;
mod persist;
mod replay;
mod task;
mod txisc;

pub use headline::{diff, higher_is_better, DesignDelta, Headline, MetricDelta, NotComparable};
pub use kind::{Report, ReportKind, Unreadable};
pub use ndp::{NdpDesign, NdpPoint, NdpRun};
pub use persist::{online_label, PersistRun};
pub use replay::ReplayRun;
pub use task::TaskRun;
pub use txisc::{AppRun, CpuPoint, Placement, Sizes, TxApp, TxappsRun, TxbenchRun};
