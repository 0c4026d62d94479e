//! SIFT's persistence service (split persistence and the coalescing checkpointer): the
//! pieces that stand on their own so far.
//!
//! - [`ring`]: `StagingRing`, the persistent circular staging area.
//! - [`coalesce`]: `RangeTree` (late-write-wins over a ready-prefix batch) and `InodeDedup`.
//! - [`window`]: the windowed replay pipeline that turns survivors into merged I/O.
//! - [`layout`]: the namespace's regions and the on-disk records (descriptors, commits, gap
//!   markers, superblock), each checksummed and sequence-numbered.
//! - [`service`]: `Sift`, the split persistence path (staging, journaling, ordered
//!   checkpointing, reclaim) and its recovery, over any `Blocks` store.
//! - [`backlog`]: SIFT §5.3–5.4's manual-checkpoint backlogs (high-overlap, sequential
//!   no-reuse) and their replay statistics.
//! - [`protocol`]: the five states of a staged update as types (publish-after-fix,
//!   wait-not-skip, reclaim only after apply).

pub mod backlog;
pub mod coalesce;
pub mod layout;
pub mod protocol;
pub mod ring;
pub mod service;
pub mod window;

#[cfg(test)]
mod tests;

pub use coalesce::{CoalesceStats, Fragment, InodeDedup, InodeKey, RangeTree, Source};
pub use protocol::{Readiness, StagedUpdate};
pub use ring::{RingError, RingExtent, StagingRing};
pub use window::{plan, Area, ReplayPlan, Request, Window};
