//! What survives a power loss, and how the mapping is rebuilt from it.
//!
//! Durable state is the flash itself (each programmed page's OOB record), the FTL's journals
//! (trims, and the P2L persisted for applied TxISC deltas) and the capacitor-backed DRAM region
//! of TxISC §III-D (the global task table and the delta mappings). Everything else — the L2P,
//! valid bits, block lists, pins, snapshot descriptors' extents — is rebuilt.
//!
//! Every change to durable state is one [`PersistStep`]. The FTL can record them in order
//! ([`crate::Ftl::record_persist_log`]); a [`DurableImage`] built from any prefix of that log
//! is exactly what a crash at that point leaves behind, so a crash checker explores every
//! crash point of a workload from one run. [`recover`] is the recovery the device itself runs
//! ([`crate::Device::power_cycle`]).

use crate::txn::ids::TaskId;
use serde::Serialize;
use std::collections::BTreeMap;

/// A programmed page's out-of-band record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OobRecord {
    pub lpn: u32,
    /// Global program/mapping sequence number: the newest wins on recovery.
    pub seq: u64,
    /// Written for a delta mapping: the LPN is only a hint until the delta is applied.
    pub delta: bool,
    /// The page's first 8 bytes (little endian): lets a checker tell versions apart.
    pub tag: u64,
}

/// A delta mapping entry as the capacitor-backed region holds it, one per page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DeltaRecord {
    pub lpn: u32,
    pub task: TaskId,
    pub ts: u64,
}

/// One change to durable state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum PersistStep {
    Program {
        ppn: u32,
        oob: OobRecord,
    },
    Erase {
        block: u32,
    },
    Trim {
        lpn: u32,
        seq: u64,
    },
    TrimDrop {
        lpn: u32,
    },
    /// The P2L of an applied delta page, persisted to the mapping journal.
    P2l {
        lpn: u32,
        ppn: u32,
        seq: u64,
    },
    P2lDrop {
        lpn: u32,
    },
    TaskBegin {
        task: TaskId,
    },
    /// The task table's commit timestamp: the commit point.
    TaskCommit {
        task: TaskId,
        ts: u64,
    },
    TaskEnd {
        task: TaskId,
    },
    DeltaPut {
        ppn: u32,
        delta: DeltaRecord,
    },
    DeltaDrop {
        ppn: u32,
    },
    /// Not a durable change: the firmware waits here until every flash write before it
    /// (programs, erases, journal entries) has completed. Without one, a power loss may
    /// leave any subset of the flash writes in flight; capacitor-backed updates (task table,
    /// delta records) are durable at once.
    Barrier,
    /// Not a durable change: a checker's marker that its operation `n` was acknowledged
    /// (its flash writes had completed: a barrier too).
    Mark(u64),
}

impl PersistStep {
    /// A write to flash, which completes some time after it is issued (a crash may lose it
    /// unless a barrier followed). The rest live in capacitor-backed DRAM.
    pub fn is_flash(&self) -> bool {
        matches!(
            self,
            PersistStep::Program { .. }
                | PersistStep::Erase { .. }
                | PersistStep::Trim { .. }
                | PersistStep::TrimDrop { .. }
                | PersistStep::P2l { .. }
                | PersistStep::P2lDrop { .. }
        )
    }
}

/// Durable state at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DurableImage {
    pub pages_per_block: u32,
    /// OOB of every programmed, not yet erased page.
    pub oob: BTreeMap<u32, OobRecord>,
    pub trims: BTreeMap<u32, u64>,
    /// LPN → (sequence number, page) for applied delta pages.
    pub p2l: BTreeMap<u32, (u64, u32)>,
    /// The global task table: live tasks and their commit timestamp once committed.
    pub tasks: BTreeMap<TaskId, Option<u64>>,
    /// Delta mappings by page.
    pub deltas: BTreeMap<u32, DeltaRecord>,
}

impl DurableImage {
    pub fn new(pages_per_block: u32) -> Self {
        DurableImage {
            pages_per_block,
            ..Default::default()
        }
    }

    /// Applies one step, as the device did when it took it.
    pub fn apply(&mut self, step: &PersistStep) {
        match *step {
            PersistStep::Program { ppn, oob } => {
                self.oob.insert(ppn, oob);
            }
            PersistStep::Erase { block } => {
                let first = block * self.pages_per_block;
                let doomed: Vec<u32> = self
                    .oob
                    .range(first..first + self.pages_per_block)
                    .map(|(&p, _)| p)
                    .collect();
                for p in doomed {
                    self.oob.remove(&p);
                }
            }
            PersistStep::Trim { lpn, seq } => {
                self.trims.insert(lpn, seq);
            }
            PersistStep::TrimDrop { lpn } => {
                self.trims.remove(&lpn);
            }
            PersistStep::P2l { lpn, ppn, seq } => {
                self.p2l.insert(lpn, (seq, ppn));
            }
            PersistStep::P2lDrop { lpn } => {
                self.p2l.remove(&lpn);
            }
            PersistStep::TaskBegin { task } => {
                self.tasks.insert(task, None);
            }
            PersistStep::TaskCommit { task, ts } => {
                self.tasks.insert(task, Some(ts));
            }
            PersistStep::TaskEnd { task } => {
                self.tasks.remove(&task);
            }
            PersistStep::DeltaPut { ppn, delta } => {
                self.deltas.insert(ppn, delta);
            }
            PersistStep::DeltaDrop { ppn } => {
                self.deltas.remove(&ppn);
            }
            PersistStep::Barrier | PersistStep::Mark(_) => {}
        }
    }
}

/// Why a durable image cannot be recovered: it contradicts itself.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecoveryError {
    #[error("delta mapping of {lpn} names page {ppn}, whose OOB does not hold a delta for it")]
    DanglingDelta { lpn: u32, ppn: u32 },
}

/// Rebuilds the L2P (LPN → page) from a durable image, TxISC §III-D: the newest OOB record
/// (or persisted P2L) of each LPN unless trimmed later; then the delta mappings in timestamp
/// order — host entries always, a task's entries iff the task table says it committed after
/// they were written. Uncommitted tasks' pages are left unmapped: garbage for GC.
pub fn recover(image: &DurableImage) -> Result<BTreeMap<u32, u32>, RecoveryError> {
    let mut newest: BTreeMap<u32, (u64, u32)> = BTreeMap::new();
    let mut offer = |lpn: u32, seq: u64, ppn: u32| {
        let e = newest.entry(lpn).or_insert((0, ppn));
        if seq > e.0 {
            *e = (seq, ppn);
        }
    };
    for (&ppn, oob) in &image.oob {
        if !oob.delta {
            offer(oob.lpn, oob.seq, ppn);
        }
    }
    for (&lpn, &(seq, ppn)) in &image.p2l {
        // A journal entry whose page was since erased or reused is obsolete.
        if image.oob.get(&ppn).is_some_and(|o| o.delta && o.lpn == lpn) {
            offer(lpn, seq, ppn);
        }
    }
    let mut l2p: BTreeMap<u32, u32> = newest
        .into_iter()
        .filter(|(lpn, (seq, _))| image.trims.get(lpn).is_none_or(|t| t < seq))
        .map(|(lpn, (_, ppn))| (lpn, ppn))
        .collect();
    let mut applicable: Vec<(u64, u32, u32)> = Vec::new();
    for (&ppn, d) in &image.deltas {
        let committed = d.task == TaskId::HOST
            || image
                .tasks
                .get(&d.task)
                .copied()
                .flatten()
                .is_some_and(|commit| d.ts < commit);
        if committed {
            match image.oob.get(&ppn) {
                Some(o) if o.delta && o.lpn == d.lpn => applicable.push((d.ts, d.lpn, ppn)),
                _ => return Err(RecoveryError::DanglingDelta { lpn: d.lpn, ppn }),
            }
        }
    }
    applicable.sort_unstable();
    for (_, lpn, ppn) in applicable {
        l2p.insert(lpn, ppn);
    }
    Ok(l2p)
}
