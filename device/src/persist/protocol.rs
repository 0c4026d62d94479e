//! SIFT's synchronization protocol (§3.4) as types: a staged update moves through five states,
//! and the methods below are the only way to move it. Each state is its own type, so code that
//! publishes before the staging address is fixed, replays before descriptor and commit are
//! validated, or reclaims before the update was applied does not compile.
//!
//! ```text
//! Unstaged --fix(address)--> Staged --journal(txn)--> Journaled
//!     --validate(descriptor, commit)--> ReplayEligible --reclaim(applied)--> Reclaimed
//! ```
//!
//! *publish-after-fix*: only a `Staged` update can be published to background assembly.
//! *wait-not-skip*: `validate` on a not-yet-valid update hands the update back to wait on; it
//! never drops it from the replay order.

use super::ring::RingExtent;
use std::marker::PhantomData;

/// Type-level states.
pub mod state {
    #[derive(Debug)]
    pub struct Unstaged;
    #[derive(Debug)]
    pub struct Staged;
    #[derive(Debug)]
    pub struct Journaled;
    #[derive(Debug)]
    pub struct ReplayEligible;
    #[derive(Debug)]
    pub struct Reclaimed;
}

/// A foreground staging transaction's identity: which file, which fsync, where it is staged
/// and which background journal transaction references it.
#[derive(Debug)]
pub struct StagedUpdate<S> {
    pub inode: u64,
    /// Per-file sequence of the fsync that produced it.
    pub seq: u64,
    extent: Option<RingExtent>,
    journal_txn: Option<u64>,
    /// The checkpoint batch that applied it.
    batch: Option<u64>,
    _state: PhantomData<S>,
}

/// What the persistence service reads back before replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Readiness {
    /// The descriptor block names this transaction (inode, sequence, length).
    pub descriptor_valid: bool,
    /// The commit block is present and matches the descriptor.
    pub commit_valid: bool,
}

/// The checkpointer's receipt that a batch's surviving state reached the file-system area;
/// reclaiming an update needs one.
#[derive(Debug)]
pub struct Applied {
    batch: u64,
}

impl Applied {
    pub fn new(batch: u64) -> Applied {
        Applied { batch }
    }
}

impl StagedUpdate<state::Unstaged> {
    pub fn new(inode: u64, seq: u64) -> Self {
        StagedUpdate {
            inode,
            seq,
            extent: None,
            journal_txn: None,
            batch: None,
            _state: PhantomData,
        }
    }

    /// The staging address is fixed and the minimum metadata is durable.
    pub fn fix(self, extent: RingExtent) -> StagedUpdate<state::Staged> {
        StagedUpdate {
            extent: Some(extent),
            ..self.into_state()
        }
    }
}

impl StagedUpdate<state::Staged> {
    /// *publish-after-fix*: the staging address background assembly may capture.
    pub fn published_extent(&self) -> RingExtent {
        self.extent.expect("a staged update has a fixed extent")
    }

    /// A durable background journal transaction now references this update.
    pub fn journal(self, txn: u64) -> StagedUpdate<state::Journaled> {
        StagedUpdate {
            journal_txn: Some(txn),
            ..self.into_state()
        }
    }
}

impl StagedUpdate<state::Journaled> {
    /// Where it is staged (fixed since `Staged`), for revalidation.
    pub fn staged_extent(&self) -> RingExtent {
        self.extent.expect("fixed when staged")
    }

    pub fn journal_txn(&self) -> u64 {
        self.journal_txn
            .expect("a journaled update names its journal transaction")
    }

    /// Replay eligibility needs both the descriptor and the commit block valid. If either is
    /// not (yet), the update comes back unchanged to wait and revalidate: *wait-not-skip*.
    pub fn validate(
        self,
        readiness: Readiness,
    ) -> Result<StagedUpdate<state::ReplayEligible>, StagedUpdate<state::Journaled>> {
        if readiness.descriptor_valid && readiness.commit_valid {
            Ok(self.into_state())
        } else {
            Err(self)
        }
    }
}

impl StagedUpdate<state::ReplayEligible> {
    pub fn extent(&self) -> RingExtent {
        self.extent.expect("fixed when staged")
    }

    /// Checkpointing applied it: its staging space may be released.
    pub fn reclaim(self, applied: &Applied) -> StagedUpdate<state::Reclaimed> {
        StagedUpdate {
            batch: Some(applied.batch),
            ..self.into_state()
        }
    }
}

impl StagedUpdate<state::Reclaimed> {
    /// The checkpoint batch that applied it.
    pub fn batch(&self) -> u64 {
        self.batch.expect("reclaimed by a checkpoint")
    }
}

impl<S> StagedUpdate<S> {
    fn into_state<T>(self) -> StagedUpdate<T> {
        StagedUpdate {
            inode: self.inode,
            seq: self.seq,
            extent: self.extent,
            journal_txn: self.journal_txn,
            batch: self.batch,
            _state: PhantomData,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_walks_the_five_states_and_waits_instead_of_skipping() {
        let extent = RingExtent {
            start: 4,
            len: 3,
            gap: 0,
        };
        let u = StagedUpdate::new(7, 1).fix(extent);
        assert_eq!(u.published_extent(), extent, "published only once fixed");
        let j = u.journal(12);
        assert_eq!(j.journal_txn(), 12);
        // Commit block not yet valid: the update comes back to wait, not dropped.
        let j = j
            .validate(Readiness {
                descriptor_valid: true,
                commit_valid: false,
            })
            .expect_err("not replay-eligible yet");
        let e = j
            .validate(Readiness {
                descriptor_valid: true,
                commit_valid: true,
            })
            .expect("both valid");
        assert_eq!(e.extent(), extent);
        let r = e.reclaim(&Applied::new(3));
        assert_eq!((r.inode, r.seq, r.batch()), (7, 1, 3));
    }
}
