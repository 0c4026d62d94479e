//! SIFT's persistence service (split persistence and the coalescing checkpointer): the
//! pieces that stand on their own so far.
//!
//! - [`ring`]: `StagingRing`, the persistent circular staging area.
//! - [`coalesce`]: `RangeTree` (late-write-wins over a ready-prefix batch) and `InodeDedup`.
//! - [`window`]: the windowed replay pipeline that turns survivors into merged I/O.
//! - [`protocol`]: the five states of a staged update as types (publish-after-fix,
//!   wait-not-skip, reclaim only after apply).

pub mod coalesce;
pub mod protocol;
pub mod ring;
pub mod window;

pub use coalesce::{CoalesceStats, Fragment, InodeDedup, InodeKey, RangeTree, Source};
pub use protocol::{Readiness, StageState, StagedUpdate};
pub use ring::{RingError, RingExtent, StagingRing};
pub use window::{plan, Area, ReplayPlan, Request, Window};
