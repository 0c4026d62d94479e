//! SIFT's persistence service (split persistence and the coalescing checkpointer).
//!
//! The functional path (`service`) decides *what* is written where; the timing layer
//! (`timed`, `online`) decides *when* and on whose CPU, so the crash-checked code is the
//! code that is measured.
//!
//! - [`ring`]: `StagingRing`, the persistent circular staging area.
//! - [`coalesce`]: `RangeTree` (late-write-wins over a ready-prefix batch) and `InodeDedup`.
//! - [`window`]: the windowed replay pipeline that turns survivors into merged I/O.
//! - [`layout`]: `SiftLayout`, the persistence area's regions and the on-disk records (descriptors, commits, gap
//!   markers, superblock), each checksummed and sequence-numbered.
//! - [`service`]: `Sift`, the split persistence path (staging, journaling, ordered
//!   checkpointing, reclaim) and its recovery, over any `Blocks` store.
//! - [`cost`]: `PersistCosts` (a profile's `[persist]` table) and `Executor`, the host or
//!   device placement of the background path (SIFT Table 3).
//! - [`timed`]: `Chain`, dependent steps in virtual time with SPDK-style polled CPU
//!   accounting, and `CheckpointJob`, a checkpoint's validate / build / replay / reclaim
//!   phases on an executor's workers.
//! - [`online`]: SIFT §5.2's online pressure benchmark (foreground fsync stream, background
//!   writers, journal thread, watermark and synchronous reclaim) in virtual time.
//! - [`backlog`]: SIFT §5.3–5.4's manual-checkpoint backlogs (high-overlap, sequential
//!   no-reuse), their replay statistics and the checkpoint's time.
//! - [`crash`]: the crash checker (seeded workloads crashed at every write, in order or
//!   reordered and torn between flushes, recovered and compared with an oracle).
//! - [`protocol`]: the five states of a staged update as types (publish-after-fix,
//!   wait-not-skip, reclaim only after apply).

pub mod backlog;
pub mod blockmap;
pub mod coalesce;
pub mod cost;
pub mod crash;
pub mod layout;
pub mod online;
pub mod protocol;
pub mod ring;
pub mod service;
pub mod timed;
pub mod window;
pub mod zeros;

#[cfg(test)]
mod tests;

pub use coalesce::{CoalesceStats, Fragment, InodeDedup, InodeKey, RangeTree, ReplaySource};
pub use cost::{Executor, PersistCosts, Placement};
pub use protocol::{Readiness, StagedUpdate};
pub use ring::{RingError, RingExtent, StagingRing};
pub use window::{plan, Area, ReplayPlan, Request, Window};
