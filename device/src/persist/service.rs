//! The split persistence path (SIFT §3.2) and its recovery, over any block store.
//!
//! Host side (the user-space file system): `write` dirties blocks in the page cache; `fsync`
//! builds a foreground staging transaction — descriptor, inode block, data blocks, and the
//! commit block written last, its fence being the durable point — in the staging ring. It is
//! self-contained: blocks a background journal transaction claimed but has not made durable
//! are captured again. Staging does not clean the page cache for the background path:
//! `journal_begin` is the snapshot-style handoff (claim, as copies, every block written since
//! the last journal transaction — staged or not — and the published staging transactions);
//! `journal_finish` writes the background journal transaction to the journal ring and commits
//! it. `vanilla` and `offload` differ only in where this work runs (the timing model in
//! [`super::online`] puts it on the host or the device); functionally both replay raw.
//!
//! Device side: `checkpoint` takes the ready prefix of committed journal transactions, builds
//! the raw replay set in order (each transaction's referenced staged state before its own
//! journaled updates), replays it raw (`vanilla`, `offload`) or coalesced (`coalesce`: range
//! tree, inode dedup, windowed plan), and only then advances the ring tails in the
//! superblock: space is reclaimed once no recovery needs it.
//!
//! Recovery reads the superblock, scans the journal ring for committed transactions and the
//! staging ring for valid staging transactions (descriptor *and* commit, with matching
//! sequence numbers and body CRC), and replays them in the same order into the file-system
//! area.

use super::blockmap::BlockMap;
use super::coalesce::{reduction, InodeDedup, InodeKey, RangeTree, ReplaySource};
use super::layout::{
    encode_commit, encode_gap, is_commit, is_gap, JournalDesc, SiftLayout, StagingDesc, Superblock,
};
use super::protocol::{state, Applied, Readiness, StagedUpdate};
use super::ring::{RingError, RingExtent, StagingRing};
use super::window;
use super::zeros::ZeroTails;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// A ring region of the namespace, for recovery scans.
struct Ring {
    blocks: u64,
    first: u64,
    kind: u64,
}

impl Ring {
    fn staging(ns: &SiftLayout) -> Ring {
        Ring {
            blocks: ns.staging_blocks,
            first: ns.staging_block(0),
            kind: STAGING,
        }
    }

    fn journal(ns: &SiftLayout) -> Ring {
        Ring {
            blocks: ns.journal_blocks,
            first: ns.journal_block(0),
            kind: JOURNAL,
        }
    }

    /// A wrapped allocation leaves the blocks before the ring's end unused: the gap marker at
    /// their start tells a recovery scan that transaction `seq` continues at position 0.
    fn mark_gap<B: Blocks>(&self, blocks: &mut B, extent: &RingExtent, seq: u64, bb: u64) {
        if extent.gap > 0 {
            blocks.write(self.first + self.blocks - extent.gap, &encode_gap(seq, bb));
        }
    }

    /// The record of sequence `seq` at `pos`: its descriptor (if one decodes with that
    /// sequence number and fits the ring) and whether body and commit block validate.
    fn record_at<B: Blocks, D>(
        &self,
        blocks: &mut B,
        pos: u64,
        seq: u64,
        decode: impl Fn(&[u8]) -> Option<((u64, u64, u32), D)>,
    ) -> Option<(u64, D, Readiness)> {
        let ((s, len, body_crc), d) = decode(&blocks.read(self.first + pos))?;
        if s != seq || len >= self.blocks || pos + len > self.blocks {
            return None;
        }
        let mut crc = crc32fast::Hasher::new();
        for i in 1..len - 1 {
            blocks.hash(self.first + pos + i, &mut crc);
        }
        let commit = blocks.read(self.first + pos + len - 1);
        let readiness = Readiness {
            descriptor_valid: crc.finalize() == body_crc,
            commit_valid: is_commit(&commit, self.kind, seq, body_crc),
        };
        Some((len, d, readiness))
    }

    /// From `(position, sequence)` on: every record that validates, in order, with its
    /// position; a gap marker sends the scan to position 0. Returns them and where the scan
    /// stopped.
    fn scan<B: Blocks, D>(
        &self,
        blocks: &mut B,
        (mut pos, mut seq): (u64, u64),
        decode: impl Fn(&[u8]) -> Option<((u64, u64, u32), D)>,
    ) -> (Vec<(u64, D)>, (u64, u64)) {
        let mut found = Vec::new();
        loop {
            if is_gap(&blocks.read(self.first + pos), seq) {
                pos = 0;
                continue;
            }
            match self.record_at(blocks, pos, seq, &decode) {
                Some((len, d, r)) if r.descriptor_valid && r.commit_valid => {
                    found.push((pos, d));
                    pos = (pos + len) % self.blocks;
                    seq += 1;
                }
                _ => break,
            }
        }
        (found, (pos, seq))
    }
}

/// Polling rounds of wait-not-skip before a staged transaction is declared corrupt.
const WAIT_ROUNDS: u32 = 3;

/// Commit-block kinds.
const STAGING: u64 = 1;
const JOURNAL: u64 = 2;

/// Where the persistence path's blocks live: the device, or a durable image in tests.
pub trait Blocks {
    fn block_bytes(&self) -> u64;
    fn read(&mut self, block: u64) -> Vec<u8>;
    fn write(&mut self, block: u64, data: &[u8]);
    /// Writes a block whose bytes the caller shares: at most a block, the rest zeros (the
    /// path keeps file data without its trailing zeros). A store may keep them uncopied.
    fn write_shared(&mut self, block: u64, data: &Arc<[u8]>) {
        let mut padded = data.to_vec();
        padded.resize(self.block_bytes() as usize, 0);
        self.write(block, &padded);
    }
    /// Writes block `from`'s bytes to block `to`: a checkpoint's replay.
    fn copy(&mut self, from: u64, to: u64) {
        let data = self.read(from);
        self.write(to, &data);
    }
    /// Feeds the block's bytes to `crc`, as [`Blocks::read`] returns them.
    fn hash(&mut self, block: u64, crc: &mut crc32fast::Hasher) {
        crc.update(&self.read(block));
    }
    /// A cache flush (FUA fence): every write before it is durable when it returns. Writes
    /// between two flushes may reach the medium in any order, or not at all, if power fails
    /// (a volatile write cache); the protocol places flushes where its order matters.
    fn flush(&mut self) {}
}

/// One entry of a [`MemBlocks`] write log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogEntry {
    Write {
        block: u64,
        /// The block as stored (trailing zeros trimmed), shared with the image it went to.
        data: Arc<[u8]>,
    },
    Flush,
    /// Not a device event: a checker's marker that an operation was acknowledged.
    Ack(String),
}

/// Durable blocks in memory, optionally logging every write and flush in order (a crash
/// checker rebuilds the medium from any prefix, and reorders what lies between flushes).
/// A block's bytes are shared, never changed in place: a write stores new ones. So the crash
/// checker's images (one per crash state) and the log share every block they have in
/// common; deep copies of whole images were most of `csd crashcheck sift`'s time.
#[derive(Clone, Debug, Default)]
pub struct MemBlocks {
    pub block_bytes: u64,
    pub blocks: BlockMap,
    pub log: Option<Vec<LogEntry>>,
    pub(crate) tails: ZeroTails,
}

impl MemBlocks {
    /// Stores a block as [`Blocks::write`] does, without logging (a checker building images).
    pub fn put(&mut self, block: u64, data: &[u8]) {
        self.blocks.insert(block, trimmed(data));
    }

    /// The block's first `N` bytes (zeros past what it holds), without reading the block:
    /// a checker's look at a block's version.
    pub fn head<const N: usize>(&self, block: u64) -> [u8; N] {
        let mut head = [0u8; N];
        if let Some(d) = self.blocks.get(&block) {
            let n = d.len().min(N);
            head[..n].copy_from_slice(&d[..n]);
        }
        head
    }

    /// Stores bytes [`MemBlocks::put`] stored before (a log entry's), sharing them.
    pub fn put_stored(&mut self, block: u64, data: &Arc<[u8]>) {
        self.blocks.insert(block, Arc::clone(data));
    }

    /// Stores `data` (already without trailing zeros) and logs the write.
    fn store(&mut self, block: u64, data: Arc<[u8]>) {
        if let Some(log) = &mut self.log {
            log.push(LogEntry::Write {
                block,
                data: Arc::clone(&data),
            });
        }
        self.blocks.insert(block, data);
    }
}

/// `data` without its trailing zeros, as a block is stored.
pub(crate) fn trimmed(data: &[u8]) -> Arc<[u8]> {
    Arc::from(&data[..crate::ftl::kept_len(data)])
}

impl Blocks for MemBlocks {
    fn block_bytes(&self) -> u64 {
        self.block_bytes
    }

    fn read(&mut self, block: u64) -> Vec<u8> {
        // One zeroed allocation of the block's size, then the kept bytes: copying them out
        // and padding after would allocate twice.
        let mut b = vec![0; self.block_bytes as usize];
        if let Some(d) = self.blocks.get(&block) {
            let n = d.len().min(b.len());
            b[..n].copy_from_slice(&d[..n]);
        }
        b
    }

    /// Stores the block without its trailing zeros (large backlogs of mostly-empty blocks
    /// stay small); `read` pads them back.
    fn write(&mut self, block: u64, data: &[u8]) {
        self.store(block, trimmed(data));
    }

    /// Shares the caller's bytes when they are already trimmed (file data is kept so), so
    /// staging, journaling and replaying a block copy none of it.
    fn write_shared(&mut self, block: u64, data: &Arc<[u8]>) {
        let end = crate::ftl::kept_len(data);
        let data = if end == data.len() {
            Arc::clone(data)
        } else {
            Arc::from(&data[..end])
        };
        self.store(block, data);
    }

    /// Shares the source's bytes (an absent block is zeros, stored as such).
    fn copy(&mut self, from: u64, to: u64) {
        let data = self
            .blocks
            .get(&from)
            .map_or_else(|| Arc::from(&[][..]), Arc::clone);
        self.store(to, data);
    }

    /// Hashes the kept bytes and the zeros after them, without building the block.
    fn hash(&mut self, block: u64, crc: &mut crc32fast::Hasher) {
        let kept = self.blocks.get(&block).map_or(&[][..], |d| &d[..]);
        let n = kept
            .len()
            .min(usize::try_from(self.block_bytes).unwrap_or(usize::MAX));
        self.tails.hash_padded(crc, &kept[..n], self.block_bytes);
    }

    fn flush(&mut self) {
        if let Some(log) = &mut self.log {
            log.push(LogEntry::Flush);
        }
    }
}

/// A deliberately wrong order, for showing that a crash checker catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OrderFault {
    /// Advance the ring tails in the superblock before the checkpoint's replay (the data
    /// the rings held is lost if power fails in between).
    ReclaimBeforeReplay,
    /// Acknowledge fsync without the flush after its commit block (with a volatile write
    /// cache, an acknowledged fsync can vanish).
    AckBeforeFence,
}

/// The three configurations of SIFT Table 3; one protocol, different checkpoint semantics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Config {
    Vanilla,
    Offload,
    Coalesce,
}

impl Config {
    /// The name reports and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            Config::Vanilla => "vanilla",
            Config::Offload => "offload",
            Config::Coalesce => "coalesce",
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SiftError {
    #[error("file {0} does not exist")]
    NoFile(u32),
    #[error("block {block} is beyond file {file}'s {blocks} blocks")]
    NoBlock { file: u32, block: u64, blocks: u64 },
    #[error("a transaction of {0} blocks cannot be described in one descriptor block")]
    TooLarge(usize),
    #[error("{0}")]
    Ring(#[from] RingError),
    #[error(
        "journal transaction {journal} references staging transaction {staged}, which is not valid"
    )]
    MissingStaged { journal: u64, staged: u64 },
    #[error("the superblock is unreadable")]
    NoSuperblock,
    #[error("a write of {len} bytes does not fit a {block_bytes}-byte block")]
    BlockSize { len: usize, block_bytes: u64 },
}

/// Replay work of one checkpoint (SIFT §4.5's statistics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct CheckpointStats {
    pub journal_txns: u64,
    pub staged_txns: u64,
    pub raw_blocks: u64,
    pub surviving_blocks: u64,
    pub raw_inodes: u64,
    pub surviving_inodes: u64,
    /// Logical update records ("tags").
    pub raw_records: u64,
    pub surviving_records: u64,
    pub read_requests: u64,
    pub write_requests: u64,
    /// Staged updates moved to RECLAIMED by this checkpoint.
    pub reclaimed_txns: u64,
}

impl CheckpointStats {
    /// Adds another checkpoint's work (totals over a run).
    pub fn add(&mut self, o: &CheckpointStats) {
        self.journal_txns += o.journal_txns;
        self.staged_txns += o.staged_txns;
        self.raw_blocks += o.raw_blocks;
        self.surviving_blocks += o.surviving_blocks;
        self.raw_inodes += o.raw_inodes;
        self.surviving_inodes += o.surviving_inodes;
        self.raw_records += o.raw_records;
        self.surviving_records += o.surviving_records;
        self.read_requests += o.read_requests;
        self.write_requests += o.write_requests;
        self.reclaimed_txns += o.reclaimed_txns;
    }

    /// Share of raw data-block replay removed, in percent.
    pub fn block_reduction_pct(&self) -> f64 {
        reduction(self.raw_blocks, self.surviving_blocks)
    }

    /// Share of raw inode replay removed, in percent.
    pub fn inode_reduction_pct(&self) -> f64 {
        reduction(self.raw_inodes, self.surviving_inodes)
    }
}

/// The I/O one checkpoint did, in namespace blocks, for a timing model: the raw replay set
/// it read (staged and journal transactions), its replay, and the superblock write that
/// reclaims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointIo {
    /// `(first block, blocks)` of every staged transaction re-read (descriptor to commit)
    /// and of every journal transaction read (descriptor and journaled updates).
    pub validate: Vec<(u64, u64)>,
    pub replay: Replay,
    pub superblock: u64,
}

/// How a checkpoint replays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Replay {
    /// Raw ordered replay: one `(source, destination)` block copy per update record.
    Raw(Vec<(u64, u64)>),
    /// Coalesced replay: windows of merged reads then merged writes (and one unit per
    /// surviving inode).
    Windows(Vec<ReplayUnit>),
}

/// Reads that must complete before the unit's writes: `(first block, blocks)` requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayUnit {
    pub reads: Vec<(u64, u64)>,
    pub writes: Vec<(u64, u64)>,
}

/// What `checkpoint_begin` leaves for `checkpoint_end`: the replayed batch's ring extents and
/// its staged updates, REPLAY-ELIGIBLE until the reclaim.
#[derive(Debug)]
pub struct PendingReclaim {
    batch: Vec<(u64, RingExtent)>,
    last_staged: Option<(u64, RingExtent)>,
    eligible: Vec<StagedUpdate<state::ReplayEligible>>,
    /// The test-only broken order reclaimed before replaying.
    done: bool,
}

/// A file's pending state in the host's page cache. Staging does not clean pages for the
/// background path: a block written once is both staged by the next fsync and journaled by
/// the next background journal transaction (SIFT §3.3.6's two representations).
/// A block's bytes as written are shared, never changed in place: one write is held by
/// both representations and by a transaction's body without a copy each.
#[derive(Clone, Debug)]
struct FileState {
    /// Written since the file's last fsync.
    unstaged: BTreeMap<u64, Arc<[u8]>>,
    /// Written since the last background journal transaction claimed the file.
    unjournaled: BTreeMap<u64, Arc<[u8]>>,
    /// Claimed by the in-flight background journal transaction, not yet durable.
    claimed: BTreeMap<u64, Arc<[u8]>>,
    inode: Arc<[u8]>,
}

/// One block a checkpoint or a recovery replays: its home in the file-system area and
/// where its newest copy waits (a ring and the position in it).
#[derive(Clone, Copy, Debug)]
struct RawRecord {
    dst: u64,
    source: ReplaySource,
    pos: u64,
    /// An inode block (deduplicated by key when coalescing), not file data.
    inode: bool,
}

impl RawRecord {
    fn source_block(&self, ns: &SiftLayout) -> u64 {
        ring_block(ns, self.source, self.pos)
    }
}

/// The block at position `pos` of the staging or journal ring.
fn ring_block(ns: &SiftLayout, source: ReplaySource, pos: u64) -> u64 {
    match source {
        ReplaySource::Staging => ns.staging_block(pos),
        ReplaySource::Journal => ns.journal_block(pos),
    }
}

/// The records of a staging transaction at ring position `at`: its inode block after the
/// descriptor, then its data blocks.
fn staged_records<'a>(
    ns: &'a SiftLayout,
    at: u64,
    d: &'a StagingDesc,
) -> impl Iterator<Item = RawRecord> + 'a {
    let inode = RawRecord {
        dst: ns.inode_block(d.file),
        source: ReplaySource::Staging,
        pos: at + 1,
        inode: true,
    };
    let data = d.blocks.iter().enumerate().map(move |(i, &b)| RawRecord {
        dst: ns.data_block(d.file, b),
        source: ReplaySource::Staging,
        pos: at + 2 + i as u64,
        inode: false,
    });
    std::iter::once(inode).chain(data)
}

/// The records of a journal transaction at ring position `at`: its inode blocks, then its
/// data blocks, in the order its descriptor lists them.
fn journal_records<'a>(
    ns: &'a SiftLayout,
    at: u64,
    d: &'a JournalDesc,
) -> impl Iterator<Item = RawRecord> + 'a {
    let inodes = d.inodes.iter().map(|&f| (ns.inode_block(f), true));
    let data = d.blocks.iter().map(|&(f, b)| (ns.data_block(f, b), false));
    inodes
        .chain(data)
        .zip(at + 1..)
        .map(|((dst, inode), pos)| RawRecord {
            dst,
            source: ReplaySource::Journal,
            pos,
            inode,
        })
}

/// A checkpoint's batch once gathered: the raw replay set in order, the staged updates it
/// makes eligible for reclaim, and the journal transactions by sequence number and extent.
struct Gathered {
    raw: Vec<RawRecord>,
    eligible: Vec<StagedUpdate<state::ReplayEligible>>,
    journals: Vec<(u64, RingExtent)>,
}

#[derive(Debug)]
struct Journaled {
    desc: JournalDesc,
    extent: RingExtent,
    /// The staged updates it references, oldest first.
    staged: Vec<StagedUpdate<state::Journaled>>,
}

/// The in-flight background journal transaction: its snapshot.
#[derive(Debug)]
struct Handoff {
    staged: Vec<StagedUpdate<state::Staged>>,
    inodes: Vec<(u32, Arc<[u8]>)>,
    blocks: Vec<(u32, u64, Arc<[u8]>)>,
}

/// SIFT's persistence path over `B`. See the module docs.
pub struct Sift<B: Blocks> {
    pub ns: SiftLayout,
    pub blocks: B,
    pub config: Config,
    staging: StagingRing,
    journal: StagingRing,
    next_staging_seq: u64,
    next_journal_seq: u64,
    /// Published staging transactions no journal transaction references yet.
    published: VecDeque<StagedUpdate<state::Staged>>,
    /// Committed journal transactions not yet checkpointed: the ready prefix.
    committed: VecDeque<Journaled>,
    handoff: Option<Handoff>,
    files: Vec<FileState>,
    sb: Superblock,
    pub last_checkpoint: CheckpointStats,
    sync_reclaims: u64,
    checkpoints: u64,
    tails: ZeroTails,
    /// A deliberately wrong order (crash checking only); `None` is SIFT's protocol.
    pub fault: Option<OrderFault>,
}

impl<B: Blocks> Sift<B> {
    /// A fresh namespace: empty rings, zeroed files.
    pub fn format(ns: SiftLayout, mut blocks: B, config: Config) -> Sift<B> {
        let sb = Superblock {
            staging_tail: 0,
            staging_tail_seq: 1,
            journal_tail: 0,
            journal_tail_seq: 1,
        };
        blocks.write(SiftLayout::SUPERBLOCK, &sb.encode(ns.block_bytes));
        blocks.flush();
        Self::with(ns, blocks, config, sb)
    }

    fn with(ns: SiftLayout, blocks: B, config: Config, sb: Superblock) -> Sift<B> {
        let bb = ns.block_bytes as usize;
        let mut staging = StagingRing::new(ns.staging_blocks);
        let mut journal = StagingRing::new(ns.journal_blocks);
        staging.reset_at(sb.staging_tail);
        journal.reset_at(sb.journal_tail);
        Sift {
            files: (0..ns.files)
                .map(|_| FileState {
                    unstaged: BTreeMap::new(),
                    unjournaled: BTreeMap::new(),
                    claimed: BTreeMap::new(),
                    inode: vec![0; bb].into(),
                })
                .collect(),
            ns,
            blocks,
            config,
            staging,
            journal,
            next_staging_seq: sb.staging_tail_seq,
            next_journal_seq: sb.journal_tail_seq,
            published: VecDeque::new(),
            committed: VecDeque::new(),
            handoff: None,
            sb,
            last_checkpoint: CheckpointStats::default(),
            sync_reclaims: 0,
            checkpoints: 0,
            fault: None,
            tails: ZeroTails::default(),
        }
    }

    fn check(&self, file: u32, block: u64) -> Result<(), SiftError> {
        if file >= self.ns.files {
            return Err(SiftError::NoFile(file));
        }
        if block >= self.ns.file_blocks {
            return Err(SiftError::NoBlock {
                file,
                block,
                blocks: self.ns.file_blocks,
            });
        }
        Ok(())
    }

    /// A buffered write of one block; `inode` is the file's new inode block content. Either
    /// may be shorter than a block: the rest is zeros.
    pub fn write(
        &mut self,
        file: u32,
        block: u64,
        data: &[u8],
        inode: &[u8],
    ) -> Result<(), SiftError> {
        self.check(file, block)?;
        let bb = self.ns.block_bytes;
        for bytes in [data, inode] {
            if bytes.len() as u64 > bb {
                return Err(SiftError::BlockSize {
                    len: bytes.len(),
                    block_bytes: bb,
                });
            }
        }
        // Kept without trailing zeros, as the medium stores them: staging, journaling and
        // replay then share these bytes instead of copying and re-trimming a block each time.
        let f = &mut self.files[file as usize];
        let data = trimmed(data);
        f.unstaged.insert(block, Arc::clone(&data));
        f.unjournaled.insert(block, data);
        f.inode = trimmed(inode);
        Ok(())
    }

    pub fn staging_free(&self) -> u64 {
        self.staging.free()
    }

    /// Dirty blocks no background journal transaction has claimed yet, over all files.
    pub fn unjournaled_blocks(&self) -> u64 {
        self.files.iter().map(|f| f.unjournaled.len() as u64).sum()
    }

    pub fn journal_free(&self) -> u64 {
        self.journal.free()
    }

    /// Committed journal transactions waiting for a checkpoint.
    pub fn pending_checkpoint(&self) -> usize {
        self.committed.len()
    }

    pub fn staging_head(&self) -> u64 {
        self.staging.head()
    }

    pub fn journal_head(&self) -> u64 {
        self.journal.head()
    }

    /// Foreground `fsync`: stages the file's unstaged and claimed-but-not-durable blocks with
    /// its inode, self-contained. Returns at the commit fence, with the staging transaction's
    /// ring extent. If the ring is full, reclaims synchronously (journal and checkpoint) first.
    pub fn fsync(&mut self, file: u32) -> Result<RingExtent, SiftError> {
        match self.try_fsync(file) {
            Err(SiftError::Ring(RingError::Full { .. })) => {
                self.reclaim_sync()?;
                self.try_fsync(file)
            }
            r => r,
        }
    }

    /// `fsync` without the emergency reclaim: a full ring is `RingError::Full`, for a caller
    /// that reclaims on its own schedule (the timed model waits for credits in virtual time).
    pub fn try_fsync(&mut self, file: u32) -> Result<RingExtent, SiftError> {
        self.check(file, 0)?;
        let f = &self.files[file as usize];
        let mut body: BTreeMap<u64, Arc<[u8]>> = f.claimed.clone();
        body.extend(f.unstaged.iter().map(|(b, d)| (*b, Arc::clone(d))));
        let inode = Arc::clone(&f.inode);
        if body.len() > self.ns.max_txn_blocks() {
            return Err(SiftError::TooLarge(body.len()));
        }
        let len = 3 + body.len() as u64;
        let extent = self.staging.alloc(len)?;
        let seq = self.next_staging_seq;
        self.next_staging_seq += 1;
        let blocks: Vec<u64> = body.keys().copied().collect();
        let bb = self.ns.block_bytes;
        let mut crc = crc32fast::Hasher::new();
        self.tails.hash_padded(&mut crc, &inode, bb);
        for d in body.values() {
            self.tails.hash_padded(&mut crc, d, bb);
        }
        let desc = StagingDesc {
            seq,
            file,
            blocks,
            body_crc: crc.finalize(),
        };
        Ring::staging(&self.ns).mark_gap(&mut self.blocks, &extent, seq, bb);
        let base = extent.start;
        self.blocks
            .write(self.ns.staging_block(base), &desc.encode(bb));
        // publish-after-fix: the address is fixed and the descriptor durable.
        self.published
            .push_back(StagedUpdate::new(u64::from(file), seq).fix(extent));
        self.blocks
            .write_shared(self.ns.staging_block(base + 1), &inode);
        for (i, d) in body.values().enumerate() {
            self.blocks
                .write_shared(self.ns.staging_block(base + 2 + i as u64), d);
        }
        // Commit block last: after a flush, so it never reaches the medium before the body.
        self.blocks.flush();
        self.blocks.write(
            self.ns.staging_block(base + len - 1),
            &encode_commit(STAGING, seq, desc.body_crc, bb),
        );
        // The final commit fence: fsync's durable point.
        if self.fault != Some(OrderFault::AckBeforeFence) {
            self.blocks.flush();
        }
        // Everything the file had pending is durable in this transaction now, the claimed
        // blocks included: a later fsync must not re-capture them over newer data.
        let f = &mut self.files[file as usize];
        f.unstaged.clear();
        f.claimed.clear();
        Ok(extent)
    }

    /// Snapshot-style handoff: claims every unjournaled block and the published staging
    /// transactions for the next background journal transaction.
    pub fn journal_begin(&mut self) {
        if self.handoff.is_some() {
            return;
        }
        let mut h = Handoff {
            staged: Vec::new(),
            inodes: Vec::new(),
            blocks: Vec::new(),
        };
        // One descriptor block: 5 words of header, 2 per staging reference, 1 per inode, 1 per
        // block. References to the oldest published staging transactions come first (up to
        // half the room: only journaling them lets a checkpoint reclaim staging space), then
        // dirty blocks file by file; what does not fit waits for the next transaction, in
        // order.
        let mut room = self.ns.descriptor_words().saturating_sub(5);
        let take = (room / 4).min(self.published.len());
        room -= 2 * take;
        for (i, f) in self.files.iter_mut().enumerate() {
            if f.unjournaled.is_empty() || room < 2 {
                continue;
            }
            h.inodes.push((i as u32, Arc::clone(&f.inode)));
            room -= 1;
            while room > 0 {
                let Some((b, d)) = f.unjournaled.pop_first() else {
                    break;
                };
                h.blocks.push((i as u32, b, Arc::clone(&d)));
                f.claimed.insert(b, d);
                room -= 1;
            }
        }
        let take = (take + room / 2).min(self.published.len());
        h.staged = self.published.drain(..take).collect();
        self.handoff = Some(h);
    }

    /// Writes and commits the claimed background journal transaction; returns its ring
    /// extent (`None`: nothing was claimed).
    // Long: the journal transaction's steps (descriptor, body, commit, the snapshot handoff)
    // must happen in this order for the crash checker.
    pub fn journal_finish(&mut self) -> Result<Option<RingExtent>, SiftError> {
        let Some(h) = self.handoff.take() else {
            return Ok(None);
        };
        if h.staged.is_empty() && h.blocks.is_empty() {
            return Ok(None);
        }
        let n = h.inodes.len() + h.blocks.len();
        if 5 + h.inodes.len() + h.blocks.len() + 2 * h.staged.len() > self.ns.descriptor_words() {
            // Claimed blocks alone overflow one descriptor block: put everything back.
            for s in h.staged.into_iter().rev() {
                self.published.push_front(s);
            }
            for (f, b, d) in h.blocks {
                let file = &mut self.files[f as usize];
                file.claimed.remove(&b);
                file.unjournaled.entry(b).or_insert(d);
            }
            return Err(SiftError::TooLarge(n));
        }
        let seq = self.next_journal_seq;
        let bb = self.ns.block_bytes;
        let mut crc = crc32fast::Hasher::new();
        for (_, d) in &h.inodes {
            self.tails.hash_padded(&mut crc, d, bb);
        }
        for (_, _, d) in &h.blocks {
            self.tails.hash_padded(&mut crc, d, bb);
        }
        let desc = JournalDesc {
            seq,
            staged: h
                .staged
                .iter()
                .map(|s| (s.seq, s.published_extent().start))
                .collect(),
            inodes: h.inodes.iter().map(|(f, _)| *f).collect(),
            blocks: h.blocks.iter().map(|(f, b, _)| (*f, *b)).collect(),
            body_crc: crc.finalize(),
        };
        let extent = match self.journal.alloc(desc.ring_blocks()) {
            Ok(e) => e,
            Err(e) => {
                self.handoff = Some(h);
                return Err(e.into());
            }
        };
        self.next_journal_seq += 1;
        Ring::journal(&self.ns).mark_gap(&mut self.blocks, &extent, seq, bb);
        let base = extent.start;
        self.blocks
            .write(self.ns.journal_block(base), &desc.encode(bb));
        let body = h
            .inodes
            .iter()
            .map(|(_, d)| d)
            .chain(h.blocks.iter().map(|(_, _, d)| d));
        for (i, d) in body.enumerate() {
            self.blocks
                .write_shared(self.ns.journal_block(base + 1 + i as u64), d);
        }
        self.blocks.flush();
        self.blocks.write(
            self.ns.journal_block(base + desc.ring_blocks() - 1),
            &encode_commit(JOURNAL, seq, desc.body_crc, bb),
        );
        self.blocks.flush();
        // Durable: the claimed copies are no longer needed by later fsyncs.
        for (f, b, d) in &h.blocks {
            let claimed = &mut self.files[*f as usize].claimed;
            // The same bytes: the same write, or (compared) a later one of equal content.
            if claimed
                .get(b)
                .is_some_and(|c| Arc::ptr_eq(c, d) || c[..] == d[..])
            {
                claimed.remove(b);
            }
        }
        self.committed.push_back(Journaled {
            staged: h.staged.into_iter().map(|s| s.journal(seq)).collect(),
            desc,
            extent,
        });
        Ok(Some(extent))
    }

    /// Emergency synchronous reclaim: checkpoint what is committed (freeing journal space),
    /// finish the in-flight handoff, journal what is published, and checkpoint again.
    fn reclaim_sync(&mut self) -> Result<(), SiftError> {
        self.sync_reclaims += 1;
        self.checkpoint()?;
        self.journal_finish()?;
        self.journal_begin();
        self.journal_finish()?;
        self.checkpoint().map(|_| ())
    }

    /// Emergency reclaims fsync had to wait for.
    pub fn sync_reclaims(&self) -> u64 {
        self.sync_reclaims
    }

    /// Ordered checkpointing of the ready prefix: replay, then reclaim.
    pub fn checkpoint(&mut self) -> Result<CheckpointStats, SiftError> {
        let (stats, _, pending) = self.checkpoint_begin(usize::MAX)?;
        self.checkpoint_end(pending);
        Ok(stats)
    }

    /// The first half of a checkpoint: replays the oldest `max_journals` committed journal
    /// transactions (a durable prefix) into the file-system area and returns its statistics,
    /// the I/O it did (for a timing model) and the reclaim still owed. Ring space comes back
    /// only with `checkpoint_end`, so a caller that models the replay's duration keeps the
    /// credits out of reach until then.
    pub fn checkpoint_begin(
        &mut self,
        max_journals: usize,
    ) -> Result<(CheckpointStats, CheckpointIo, PendingReclaim), SiftError> {
        let take = max_journals.min(self.committed.len());
        let batch: Vec<Journaled> = self.committed.drain(..take).collect();
        let mut stats = CheckpointStats {
            journal_txns: batch.len() as u64,
            ..Default::default()
        };
        let mut io = CheckpointIo {
            validate: Vec::new(),
            replay: Replay::Raw(Vec::new()),
            superblock: SiftLayout::SUPERBLOCK,
        };
        let mut pending = PendingReclaim {
            batch: Vec::new(),
            last_staged: None,
            eligible: Vec::new(),
            done: false,
        };
        if batch.is_empty() {
            return Ok((stats, io, pending));
        }
        let gathered = self.gather(batch, &mut stats, &mut io)?;
        let reclaim_first = self.fault == Some(OrderFault::ReclaimBeforeReplay);
        let last_staged = gathered.eligible.last().map(|s| (s.seq, s.extent()));
        if reclaim_first {
            self.reclaim(&gathered.journals, last_staged);
        }
        io.replay = match self.config {
            Config::Vanilla | Config::Offload => self.replay_raw(&gathered.raw, &mut stats),
            Config::Coalesce => self.replay_coalesced(&gathered.raw, &mut stats),
        };
        // The replay is durable before the superblock may drop what it replayed.
        self.blocks.flush();
        stats.reclaimed_txns = gathered.eligible.len() as u64;
        self.last_checkpoint = stats;
        pending.batch = gathered.journals;
        pending.last_staged = last_staged;
        pending.eligible = gathered.eligible;
        pending.done = reclaim_first;
        Ok((stats, io, pending))
    }

    /// A checkpoint's first step: revalidates every staged update the batch references
    /// (*wait-not-skip*), reads each journal transaction, and lists the raw replay set in
    /// order, counting it in `stats` and the reads in `io`.
    fn gather(
        &mut self,
        batch: Vec<Journaled>,
        stats: &mut CheckpointStats,
        io: &mut CheckpointIo,
    ) -> Result<Gathered, SiftError> {
        let mut g = Gathered {
            raw: Vec::new(),
            eligible: Vec::new(),
            journals: Vec::with_capacity(batch.len()),
        };
        for j in batch {
            for s in j.staged {
                stats.staged_txns += 1;
                let (s, desc) = self.revalidate(j.desc.seq, s)?;
                let start = s.extent().start;
                io.validate
                    .push((self.ns.staging_block(start), desc.ring_blocks()));
                g.raw.extend(staged_records(&self.ns, start, &desc));
                g.eligible.push(s);
            }
            // SIFT §4.3.1: the backend reads the journaled updates from the journal area
            // too; with the staged bodies they form the raw replay set, before coalescing.
            io.validate
                .push((self.ns.journal_block(j.extent.start), j.extent.len));
            g.raw
                .extend(journal_records(&self.ns, j.extent.start, &j.desc));
            g.journals.push((j.desc.seq, j.extent));
        }
        stats.raw_records = g.raw.len() as u64;
        stats.raw_inodes = g.raw.iter().filter(|r| r.inode).count() as u64;
        stats.raw_blocks = stats.raw_records - stats.raw_inodes;
        Ok(g)
    }

    /// Replays every raw record in order, one read and one write each (SIFT's vanilla and
    /// offload configurations).
    fn replay_raw(&mut self, raw: &[RawRecord], stats: &mut CheckpointStats) -> Replay {
        let mut records = Vec::with_capacity(raw.len());
        for r in raw {
            let from = self.source_block(r.source, r.pos);
            self.blocks.copy(from, r.dst);
            records.push((from, r.dst));
        }
        stats.surviving_blocks = stats.raw_blocks;
        stats.surviving_inodes = stats.raw_inodes;
        stats.surviving_records = stats.raw_records;
        stats.read_requests = stats.raw_records;
        stats.write_requests = stats.raw_records;
        Replay::Raw(records)
    }

    /// Replays only the last version of each block and inode, merged into windows of large
    /// requests (SIFT's coalescing checkpointer: the range tree, inode dedup, the window
    /// plan).
    fn replay_coalesced(&mut self, raw: &[RawRecord], stats: &mut CheckpointStats) -> Replay {
        let mut tree = RangeTree::new();
        let mut inodes: InodeDedup<(ReplaySource, u64)> = InodeDedup::default();
        for r in raw {
            if r.inode {
                let key = InodeKey {
                    block: r.dst,
                    slot: 0,
                };
                inodes.insert(key, (r.source, r.pos));
            } else {
                tree.insert(r.dst, 1, r.source, r.pos);
            }
        }
        let t = tree.stats();
        stats.surviving_blocks = t.surviving_blocks;
        stats.surviving_inodes = inodes.surviving() as u64;
        stats.surviving_records = t.surviving_fragments + stats.surviving_inodes;
        let plan = window::plan(tree.iter(), (64 << 20) / self.ns.block_bytes);
        stats.read_requests = plan.read_requests() + stats.surviving_inodes;
        stats.write_requests = plan.write_requests() + stats.surviving_inodes;
        let at = |r: &window::Request| match r.area {
            window::Area::FileSystem => (r.at, r.blocks),
            window::Area::Staging => (self.ns.staging_block(r.at), r.blocks),
            window::Area::Journal => (self.ns.journal_block(r.at), r.blocks),
        };
        let mut units: Vec<ReplayUnit> = plan
            .windows
            .iter()
            .map(|w| ReplayUnit {
                reads: w.reads.iter().map(at).collect(),
                writes: w.writes.iter().map(at).collect(),
            })
            .collect();
        for (dst, f) in tree.iter() {
            for i in 0..f.end - dst {
                self.blocks
                    .copy(self.source_block(f.source, f.src_block + i), dst + i);
            }
        }
        for (k, (source, pos)) in inodes.survivors() {
            let from = self.source_block(source, pos);
            self.blocks.copy(from, k.block);
            units.push(ReplayUnit {
                reads: vec![(from, 1)],
                writes: vec![(k.block, 1)],
            });
        }
        Replay::Windows(units)
    }

    /// The second half of a checkpoint, once its replay is durable: advances the ring tails
    /// in the superblock and returns the space as credits. The staged updates become
    /// RECLAIMED.
    pub fn checkpoint_end(&mut self, pending: PendingReclaim) {
        if pending.batch.is_empty() {
            return;
        }
        if !pending.done {
            self.reclaim(&pending.batch, pending.last_staged);
        }
        self.checkpoints += 1;
        let receipt = Applied::new(self.checkpoints);
        let _reclaimed: Vec<StagedUpdate<state::Reclaimed>> = pending
            .eligible
            .into_iter()
            .map(|s| s.reclaim(&receipt))
            .collect();
    }

    fn source_block(&self, src: ReplaySource, pos: u64) -> u64 {
        ring_block(&self.ns, src, pos)
    }

    /// *wait-not-skip*: re-reads a referenced staging transaction until its descriptor and
    /// commit block both validate. The model has no concurrent writer to wait for, so a
    /// transaction that stays invalid after the polling rounds is corruption, reported.
    fn revalidate(
        &mut self,
        journal: u64,
        mut update: StagedUpdate<state::Journaled>,
    ) -> Result<(StagedUpdate<state::ReplayEligible>, StagingDesc), SiftError> {
        let ring = Ring::staging(&self.ns);
        for _ in 0..WAIT_ROUNDS {
            let start = update.staged_extent().start;
            let record = ring.record_at(&mut self.blocks, start, update.seq, |b| {
                StagingDesc::decode(b).map(|d| ((d.seq, d.ring_blocks(), d.body_crc), d))
            });
            let Some((_, desc, readiness)) = record else {
                continue;
            };
            match update.validate(readiness) {
                Ok(eligible) => return Ok((eligible, desc)),
                Err(waiting) => update = waiting,
            }
        }
        Err(SiftError::MissingStaged {
            journal,
            staged: update.seq,
        })
    }

    /// Advances the tails past the batch in the superblock (the reclaim point), then frees
    /// the ring space: credits for later reservations.
    fn reclaim(&mut self, batch: &[(u64, RingExtent)], last_staged: Option<(u64, RingExtent)>) {
        let &(last_seq, last_extent) = batch.last().expect("non-empty batch");
        let mut sb = self.sb;
        sb.journal_tail = (last_extent.start + last_extent.len) % self.ns.journal_blocks;
        sb.journal_tail_seq = last_seq + 1;
        if let Some((seq, e)) = last_staged {
            sb.staging_tail = (e.start + e.len) % self.ns.staging_blocks;
            sb.staging_tail_seq = seq + 1;
        }
        self.blocks
            .write(SiftLayout::SUPERBLOCK, &sb.encode(self.ns.block_bytes));
        self.blocks.flush();
        self.sb = sb;
        self.journal.reclaim_through(&last_extent);
        if let Some((_, e)) = last_staged {
            self.staging.reclaim_through(&e);
        }
    }

    /// After a crash: replays what the journal and staging rings hold into the file-system
    /// area, in order, and starts with empty rings.
    pub fn recover(ns: SiftLayout, mut blocks: B, config: Config) -> Result<Sift<B>, SiftError> {
        let sb = Superblock::decode(&blocks.read(SiftLayout::SUPERBLOCK))
            .ok_or(SiftError::NoSuperblock)?;
        // Committed journal transactions from the journal tail, then the valid staging
        // transactions (descriptor *and* commit: dual readiness) from the staging tail.
        let (journals, journal_end) =
            Ring::journal(&ns).scan(&mut blocks, (sb.journal_tail, sb.journal_tail_seq), |b| {
                JournalDesc::decode(b).map(|d| ((d.seq, d.ring_blocks(), d.body_crc), d))
            });
        let (staged, staging_end) =
            Ring::staging(&ns).scan(&mut blocks, (sb.staging_tail, sb.staging_tail_seq), |b| {
                StagingDesc::decode(b).map(|d| ((d.seq, d.ring_blocks(), d.body_crc), d))
            });
        // Replay: each journal transaction's staged state, then its own blocks; then the
        // staging transactions no committed journal transaction references.
        let mut replayed_through = 0;
        let apply = |blocks: &mut B, records: &mut dyn Iterator<Item = RawRecord>| {
            for r in records {
                blocks.copy(r.source_block(&ns), r.dst);
            }
        };
        for (at, j) in &journals {
            for &(s, _) in &j.staged {
                let (spos, sd) =
                    staged
                        .iter()
                        .find(|(_, d)| d.seq == s)
                        .ok_or(SiftError::MissingStaged {
                            journal: j.seq,
                            staged: s,
                        })?;
                apply(&mut blocks, &mut staged_records(&ns, *spos, sd));
                replayed_through = replayed_through.max(s);
            }
            apply(&mut blocks, &mut journal_records(&ns, *at, j));
        }
        for (spos, sd) in staged.iter().filter(|(_, d)| d.seq > replayed_through) {
            apply(&mut blocks, &mut staged_records(&ns, *spos, sd));
        }
        // Everything is in the file-system area now: start with empty rings past the end.
        blocks.flush();
        let sb = Superblock {
            staging_tail: staging_end.0,
            staging_tail_seq: staging_end.1,
            journal_tail: journal_end.0,
            journal_tail_seq: journal_end.1,
        };
        blocks.write(SiftLayout::SUPERBLOCK, &sb.encode(ns.block_bytes));
        blocks.flush();
        Ok(Self::with(ns, blocks, config, sb))
    }
}
