//! The transaction layer's state: snapshots, the flag map, the task table. Plain data with
//! its own invariants; the operations on it are `Device` methods in the parent module, and
//! the device's host path only asks it whether an LPN is flagged.

use super::error::TxError;
use super::flags::FlagMap;
use super::ids::{FileId, TaskId};
use super::snapshot::SnapshotDescriptor;
use crate::addr::{Lpn, Ppn, VirtualTime};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A running task: its snapshot timestamp and the files it registered.
#[derive(Clone, Debug)]
pub(super) struct TaskEntry {
    pub(super) start_ts: u64,
    pub(super) files: BTreeSet<FileId>,
}

/// Delta-mapping memory and counts, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TxnStats {
    pub running_tasks: u64,
    pub snapshots: u64,
    pub delta_entries: u64,
    pub delta_pages: u64,
    /// Bytes the delta mappings occupy in this model's memory (entry, tree slot, pages).
    pub delta_bytes: u64,
    /// Bytes they would occupy in TxISC's firmware (22 B per entry of flash-contiguous
    /// pages written together: `DeltaTree::firmware_entries`), the device's on-board cost.
    pub firmware_delta_bytes: u64,
    pub committed: u64,
    pub aborted: u64,
    pub conflicts: u64,
}

/// The transaction layer's state inside a [`crate::Device`].
#[derive(Clone, Debug, Default)]
pub struct Txn {
    pub(super) snapshots: BTreeMap<FileId, SnapshotDescriptor>,
    /// LPN → (file, file page) for every LPN a live snapshot covers: TxISC's L2P flag bit.
    pub(super) flagged: FlagMap,
    pub(super) tasks: BTreeMap<TaskId, TaskEntry>,
    pub(super) next_task: u32,
    pub(super) clock: u64,
    /// The firmware core's busy-until time.
    pub(super) firmware_busy: VirtualTime,
    pub(super) stats: TxnStats,
    /// A deliberately wrong order (crash checking only); `None` is TxISC's protocol.
    pub(crate) fault: Option<TxFault>,
}

/// A deliberately wrong commit order, for showing that a crash checker catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TxFault {
    /// Persist the mappings before the commit timestamp.
    MappingsBeforeCommit,
    /// Record a delta mapping without waiting for its page to be programmed (the record is
    /// capacitor-backed, the page is not yet on flash).
    RecordBeforePage,
}

impl Txn {
    /// Whether any file is registered: reads of the LPNs a snapshot covers may then see
    /// the host's deltas.
    pub(crate) fn has_snapshots(&self) -> bool {
        !self.snapshots.is_empty()
    }

    /// Every snapshot's invariants, and every user of a snapshot a running task.
    pub fn check(&self) -> Result<(), String> {
        for (file, s) in &self.snapshots {
            s.check().map_err(|e| format!("{file:?}: {e}"))?;
            if let Some(t) = s.users.iter().find(|t| !self.tasks.contains_key(t)) {
                return Err(format!(
                    "{file:?} is registered to {t:?}, which is not running"
                ));
            }
        }
        Ok(())
    }

    pub(super) fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    pub(super) fn task(&self, task: TaskId) -> Result<&TaskEntry, TxError> {
        self.tasks.get(&task).ok_or(TxError::NotRunning(task))
    }

    pub(super) fn snapshot(
        &self,
        task: TaskId,
        file: FileId,
    ) -> Result<&SnapshotDescriptor, TxError> {
        if !self.task(task)?.files.contains(&file) {
            return Err(TxError::NotRegistered { task, file });
        }
        Ok(&self.snapshots[&file])
    }

    /// Is `lpn` covered by a live snapshot? Costs nothing when no snapshot exists.
    #[inline]
    pub(crate) fn flagged(&self, lpn: Lpn) -> Option<(FileId, u64)> {
        if self.flagged.is_empty() {
            return None;
        }
        self.flagged.get(lpn.0)
    }

    /// The host's newest copy of a flagged LPN, if the host wrote it during the snapshot.
    pub(crate) fn host_page(&self, file: FileId, page: u64) -> Option<Ppn> {
        self.snapshots[&file].deltas.page_of(TaskId::HOST, page)
    }
}
