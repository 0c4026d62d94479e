//! SIFT's persistence service (split persistence and the coalescing checkpointer): the
//! pieces that stand on their own so far.
//!
//! - [`ring`]: `StagingRing`, the persistent circular staging area.
//! - [`coalesce`]: `RangeTree` (late-write-wins over a ready-prefix batch) and `InodeDedup`.
//! - [`window`]: the windowed replay pipeline that turns survivors into merged I/O.

pub mod coalesce;
pub mod ring;
pub mod window;

pub use coalesce::{CoalesceStats, Fragment, InodeDedup, InodeKey, RangeTree, Source};
pub use ring::{RingError, RingExtent, StagingRing};
pub use window::{plan, Area, ReplayPlan, Request, Window};
