//! The metadata journal: jbd2 as ext4 runs it by default (`data=ordered`).
//!
//! A metadata change does not write anything: the changed block joins the *running
//! transaction* in memory, so a `mkdir` or a `create` costs the host's CPU time, not a flash
//! program. The transaction *commits* when `fsync` needs it, on `sync`, when it grows to a
//! quarter of the journal, or when it has run for the commit interval (5 s, kjournald's
//! timer). A commit writes descriptor blocks and a copy of each changed block into the
//! journal's next blocks, waits for them, then writes the commit block: two flash programs
//! in a row, whatever the transaction holds. Only then are the blocks written to their home
//! locations (a *checkpoint*): by the flusher once they have been dirty for its expiry, by
//! `sync`, or at once when the journal has no room left for the next commit.
//!
//! Without a journal, every metadata change would cost a flash program on the caller's
//! critical path: a replayed `tar x` paid 1.4 ms per `mkdir` on cosmos-plus, where ext4 pays
//! microseconds. This module only plans; `HostFs` issues the writes it names.

use crate::alloc::Extent;
use crate::namespace::Ino;
use csd_device::VirtualTime;
// Hash sets, not ordered ones: every metadata change lands here (a replay spent a tenth of
// its time in these trees), and the two places that list them sort what they take. Fx has
// no random seed, so nothing here depends on the process.
use rustc_hash::{FxHashMap, FxHashSet};

/// kjournald commits a transaction once it is this old (`JBD2_DEFAULT_MAX_COMMIT_AGE`, ext4's
/// `commit=5` mount default).
pub const COMMIT_INTERVAL_NS: u64 = 5_000_000_000;

/// Bytes of a descriptor block's header (`journal_header_t`) and tail (its checksum).
const DESCRIPTOR_OVERHEAD_BYTES: u64 = 12 + 4;
/// Bytes of one block tag with 64-bit block numbers and checksums (`journal_block_tag3_t`).
const TAG_BYTES: u64 = 16;

/// The size of the journal `mke2fs` makes for a file system of `capacity_bytes`
/// (e2fsprogs' `ext2fs_default_journal_size`, lib/ext2fs/mkjournal.c, 4 KiB blocks).
pub fn default_bytes(capacity_bytes: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    match capacity_bytes {
        c if c < 128 * MIB => 4 * MIB,
        c if c < GIB => 16 * MIB,
        c if c < 2 * GIB => 32 * MIB,
        c if c < 16 * GIB => 64 * MIB,
        c if c < 32 * GIB => 128 * MIB,
        c if c < 64 * GIB => 256 * MIB,
        c if c < 128 * GIB => 512 * MIB,
        _ => GIB,
    }
}

/// What one commit writes: the log blocks (descriptors and copies) as runs of device
/// blocks, then the commit block once they are on the device. `checkpoint` lists blocks to
/// write home first, when the log had no room for this commit.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Commit {
    pub checkpoint: Vec<u64>,
    pub log: Vec<Extent>,
    pub commit_block: u64,
    /// The metadata blocks this commit makes durable.
    pub blocks: Vec<u64>,
}

/// How much the journal did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JournalStats {
    pub commits: u64,
    /// Descriptor, copy and commit blocks written to the log.
    pub log_blocks: u64,
    /// Metadata blocks written to their home locations.
    pub checkpointed: u64,
    /// Commits that had to wait for a checkpoint because the log was full.
    pub full_log_checkpoints: u64,
}

#[derive(Debug)]
pub struct Journal {
    /// The log's device blocks, in log order.
    area: Vec<Extent>,
    len: u64,
    tags_per_descriptor: u64,
    /// The next log block to write, as an index into the log.
    head: u64,
    /// Log blocks written since the log was last empty (every committed block home).
    used: u64,
    running: FxHashSet<u64>,
    running_since: Option<VirtualTime>,
    /// Inodes the running transaction changed at all (a write's timestamps too), and those
    /// it changed in a way `fdatasync` must make durable (created, resized, blocks
    /// allocated): ext4's `i_sync_tid` and `i_datasync_tid` naming the running transaction.
    changed: FxHashSet<Ino>,
    changed_for_data: FxHashSet<Ino>,
    /// Inodes whose size, blocks or existence changed since their inode block last went
    /// home, with that block: what a reader of the flash would find out of date.
    unhomed_inodes: FxHashMap<Ino, u64>,
    /// Committed blocks not yet written home, with when their commit completed.
    unhomed: FxHashMap<u64, VirtualTime>,
    stats: JournalStats,
}

impl Journal {
    /// A journal over `area`, for file-system blocks of `block_bytes`; `None` if the area
    /// holds fewer than four blocks (a descriptor, a copy, a commit block, and room).
    pub fn new(area: Vec<Extent>, block_bytes: u64) -> Option<Journal> {
        let len: u64 = area.iter().map(|e| e.pages).sum();
        if len < 4 {
            return None;
        }
        Some(Journal {
            area,
            len,
            tags_per_descriptor: (block_bytes.saturating_sub(DESCRIPTOR_OVERHEAD_BYTES)
                / TAG_BYTES)
                .max(1),
            head: 0,
            used: 0,
            running: FxHashSet::default(),
            running_since: None,
            changed: FxHashSet::default(),
            changed_for_data: FxHashSet::default(),
            unhomed_inodes: FxHashMap::default(),
            unhomed: FxHashMap::default(),
            stats: JournalStats::default(),
        })
    }

    pub fn stats(&self) -> JournalStats {
        self.stats
    }

    /// The most blocks one transaction may change (jbd2's `j_max_transaction_buffers`, a
    /// quarter of the log), so that any commit fits once the log is empty.
    pub fn max_transaction(&self) -> u64 {
        (self.len / 4).saturating_sub(2).max(1)
    }

    /// Log blocks a commit of `n` changed blocks writes: descriptors, copies, commit block.
    pub fn log_blocks_for(&self, n: u64) -> u64 {
        n.div_ceil(self.tags_per_descriptor) + n + 1
    }

    /// `block` was changed at `now`: it joins the running transaction.
    pub fn add(&mut self, block: u64, now: VirtualTime) {
        self.running.insert(block);
        self.running_since.get_or_insert(now);
    }

    pub fn is_running(&self, block: u64) -> bool {
        self.running.contains(&block)
    }

    /// Inode `ino`, in inode-table block `block`, changed: `for_data` if an `fdatasync`
    /// must wait for the change (its size or blocks), not only an `fsync` (its
    /// timestamps). The block joins the transaction apart.
    pub fn inode_changed(&mut self, ino: Ino, block: u64, for_data: bool) {
        self.changed.insert(ino);
        if for_data {
            self.changed_for_data.insert(ino);
            self.unhomed_inodes.insert(ino, block);
        }
    }

    /// Whether inode `ino`'s size, blocks or existence changed since its block last went
    /// home: the flash holds an older inode, or none.
    pub fn inode_held(&self, ino: Ino) -> bool {
        self.unhomed_inodes.contains_key(&ino)
    }

    /// Whether syncing `ino` (`data_only`: `fdatasync`) must wait for a commit: the running
    /// transaction changed it in a way that sync makes durable.
    pub fn must_commit_for(&self, ino: Ino, data_only: bool) -> bool {
        if data_only {
            self.changed_for_data.contains(&ino)
        } else {
            self.changed.contains(&ino)
        }
    }

    /// Whether the running transaction is full and must commit now.
    pub fn full(&self) -> bool {
        self.running.len() as u64 >= self.max_transaction()
    }

    /// When kjournald's timer fired for the running transaction, if it has by `now`: the
    /// commit interval after the transaction's first change.
    pub fn timer_fired(&self, now: VirtualTime) -> Option<VirtualTime> {
        let fired = self.running_since?.after(COMMIT_INTERVAL_NS);
        (fired <= now).then_some(fired)
    }

    /// Whether `block` is dirty in memory (changed and not yet home): the cache must keep
    /// it, as `drop_caches` keeps dirty buffers.
    pub fn holds(&self, block: u64) -> bool {
        self.running.contains(&block) || self.unhomed.contains_key(&block)
    }

    /// Every block changed and not yet home.
    pub fn held(&self) -> impl Iterator<Item = u64> + '_ {
        self.running.iter().chain(self.unhomed.keys()).copied()
    }

    /// Closes the running transaction and places it in the log; `None` if it changed
    /// nothing. The caller writes what the plan names, then calls [`Journal::committed`].
    pub fn plan_commit(&mut self) -> Option<Commit> {
        if self.running.is_empty() {
            return None;
        }
        let mut blocks: Vec<u64> = self.running.drain().collect();
        blocks.sort_unstable();
        self.running_since = None;
        self.changed.clear();
        self.changed_for_data.clear();
        let need = self.log_blocks_for(blocks.len() as u64);
        let mut checkpoint = Vec::new();
        if self.used + need > self.len {
            checkpoint = self.take_unhomed(|_| true);
            self.stats.full_log_checkpoints += 1;
        }
        let mut log: Vec<Extent> = Vec::new();
        for _ in 0..need - 1 {
            let b = self.lba(self.head);
            match log.last_mut() {
                Some(run) if run.end() == b => run.pages += 1,
                _ => log.push(Extent::new(b, 1)),
            }
            self.advance();
        }
        let commit_block = self.lba(self.head);
        self.advance();
        self.used += need;
        self.stats.commits += 1;
        self.stats.log_blocks += need;
        Some(Commit {
            checkpoint,
            log,
            commit_block,
            blocks,
        })
    }

    /// The commit of `blocks` completed at `at`: they wait to be written home.
    pub fn committed(&mut self, blocks: &[u64], at: VirtualTime) {
        for &b in blocks {
            self.unhomed.entry(b).or_insert(at);
        }
    }

    /// Takes the committed blocks whose commit completed at or before `before`, to write
    /// them home (the flusher's pass over expired dirty buffers).
    pub fn take_expired(&mut self, before: VirtualTime) -> Vec<u64> {
        self.take_unhomed(|at| at <= before)
    }

    /// Takes every committed block, to write them home (`sync`).
    pub fn take_all(&mut self) -> Vec<u64> {
        self.take_unhomed(|_| true)
    }

    fn take_unhomed(&mut self, pick: impl Fn(VirtualTime) -> bool) -> Vec<u64> {
        let mut taken: Vec<u64> = Vec::new();
        self.unhomed.retain(|&b, &mut at| {
            let take = pick(at);
            if take {
                taken.push(b);
            }
            !take
        });
        taken.sort_unstable();
        // An inode is home once its block is, unless the running transaction changed the
        // block again.
        let running = &self.running;
        self.unhomed_inodes
            .retain(|_, b| taken.binary_search(b).is_err() || running.contains(b));
        self.stats.checkpointed += taken.len() as u64;
        if self.unhomed.is_empty() {
            // Every committed block is home: the log's tail catches up with its head.
            self.used = 0;
        }
        taken
    }

    /// The device block of log index `i` (below the log's length).
    fn lba(&self, mut i: u64) -> u64 {
        for e in &self.area {
            if i < e.pages {
                return e.first.0 + i;
            }
            i -= e.pages;
        }
        unreachable!("log index past the log's {} blocks", self.len)
    }

    fn advance(&mut self) {
        self.head = (self.head + 1) % self.len;
    }

    /// The log never holds more than its length; the head lies inside it; a transaction
    /// never outgrows what one commit can place.
    pub fn check(&self) -> Result<(), String> {
        if self.used > self.len || self.head >= self.len {
            return Err(format!(
                "journal: {} log blocks in use, head at {}, of {}",
                self.used, self.head, self.len
            ));
        }
        if self.log_blocks_for(self.running.len() as u64) > self.len {
            return Err(format!(
                "journal: a running transaction of {} blocks cannot fit the {}-block log",
                self.running.len(),
                self.len
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ns: u64) -> VirtualTime {
        VirtualTime::ZERO.after(ns)
    }

    #[test]
    fn a_commit_writes_descriptors_copies_then_the_commit_block_in_log_order() {
        // 4 KiB blocks: 255 tags per descriptor, so 300 blocks need two descriptors.
        let mut j = Journal::new(vec![Extent::new(1000, 2000)], 4096).unwrap();
        for b in 0..300 {
            j.add(5000 + b, t(0));
        }
        let c = j.plan_commit().expect("something to commit");
        assert_eq!(c.log, vec![Extent::new(1000, 302)]);
        assert_eq!(c.commit_block, 1302);
        assert_eq!(c.blocks.len(), 300);
        assert!(c.checkpoint.is_empty());
        assert!(j.plan_commit().is_none(), "nothing changed since");
        j.committed(&c.blocks, t(10));
        assert!(j.holds(5000) && !j.is_running(5000));
    }

    #[test]
    fn a_full_log_checkpoints_before_it_wraps() {
        // Two extents: the log continues in the second, then wraps to the first.
        let mut j = Journal::new(vec![Extent::new(100, 8), Extent::new(500, 8)], 4096).unwrap();
        for round in 0..3u64 {
            j.add(9000 + round, t(round));
            j.add(9100 + round, t(round));
            let c = j.plan_commit().unwrap();
            // Four log blocks each: a descriptor, two copies, the commit block.
            let wrote: u64 = c.log.iter().map(|e| e.pages).sum::<u64>() + 1;
            assert_eq!(wrote, 4);
            assert!(c.checkpoint.is_empty(), "room left in the log");
            j.committed(&c.blocks, t(round));
        }
        // The fourth commit fills the log exactly; the fifth must checkpoint first.
        j.add(1, t(9));
        let c = j.plan_commit().unwrap();
        assert!(c.checkpoint.is_empty());
        assert_eq!(c.log, vec![Extent::new(504, 2)]);
        assert_eq!(c.commit_block, 506);
        j.committed(&c.blocks, t(9));
        j.add(2, t(10));
        let c = j.plan_commit().unwrap();
        assert_eq!(
            c.checkpoint.len(),
            7,
            "every committed block goes home first"
        );
        assert_eq!(c.log, vec![Extent::new(507, 1), Extent::new(100, 1)]);
        assert_eq!(c.commit_block, 101, "the log wrapped to its start");
        assert_eq!(j.stats().full_log_checkpoints, 1);
        j.check().unwrap();
    }

    #[test]
    fn the_timer_and_the_size_limit_make_a_transaction_due() {
        let mut j = Journal::new(vec![Extent::new(0, 64)], 4096).unwrap();
        let fired = t(1_000 + COMMIT_INTERVAL_NS);
        assert_eq!(
            j.timer_fired(t(u64::MAX / 2)),
            None,
            "no transaction, no timer"
        );
        j.add(7, t(1_000));
        assert_eq!(j.timer_fired(t(1_000 + COMMIT_INTERVAL_NS - 1)), None);
        assert_eq!(j.timer_fired(fired), Some(fired));
        assert_eq!(j.timer_fired(t(9 * COMMIT_INTERVAL_NS)), Some(fired));
        assert!(!j.full());
        for b in 0..j.max_transaction() {
            j.add(100 + b, t(2_000));
        }
        assert!(j.full(), "a quarter of the log is a full transaction");
    }

    #[test]
    fn expired_blocks_go_home_and_free_the_log() {
        let mut j = Journal::new(vec![Extent::new(0, 64)], 4096).unwrap();
        j.add(10, t(0));
        let c = j.plan_commit().unwrap();
        j.committed(&c.blocks, t(100));
        j.add(11, t(200));
        let c = j.plan_commit().unwrap();
        j.committed(&c.blocks, t(300));
        assert_eq!(j.take_expired(t(150)), vec![10]);
        assert!(!j.holds(10) && j.holds(11));
        assert_eq!(j.take_all(), vec![11]);
        assert_eq!(j.used, 0);
        assert_eq!(j.stats().checkpointed, 2);
    }

    #[test]
    fn fdatasync_waits_only_for_size_and_block_changes() {
        let mut j = Journal::new(vec![Extent::new(0, 64)], 4096).unwrap();
        j.add(3, t(0));
        j.inode_changed(Ino(12), 3, false);
        j.inode_changed(Ino(13), 3, true);
        assert!(j.must_commit_for(Ino(12), false));
        assert!(!j.must_commit_for(Ino(12), true), "timestamps only");
        assert!(j.must_commit_for(Ino(13), true) && j.must_commit_for(Ino(13), false));
        assert!(!j.must_commit_for(Ino(14), false));
        let c = j.plan_commit().unwrap();
        assert!(!j.must_commit_for(Ino(13), false), "committed");
        j.committed(&c.blocks, t(5));
        assert!(
            j.inode_held(Ino(13)) && !j.inode_held(Ino(12)),
            "not home yet"
        );
        j.take_all();
        assert!(!j.inode_held(Ino(13)), "home");
    }

    #[test]
    fn a_log_too_small_for_one_commit_is_refused() {
        assert!(Journal::new(vec![Extent::new(0, 3)], 4096).is_none());
        assert!(Journal::new(Vec::new(), 4096).is_none());
    }

    #[test]
    fn the_default_size_follows_mke2fs() {
        assert_eq!(default_bytes(64 << 20), 4 << 20);
        assert_eq!(default_bytes(64 << 30), 512 << 20);
        assert_eq!(default_bytes(1 << 40), 1 << 30);
    }
}
