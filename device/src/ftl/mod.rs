//! Page-level FTL: L2P and P2L, out-of-place writes, greedy GC with over-provisioning, trim,
//! and the GC-forbid set.
//!
//! TxISC §II-A: "the FTL always allocates new flash pages and maps LBAs to new physical page
//! addresses with the L2P table ... garbage collection identifies valid pages using the reverse
//! P2L mapping stored alongside user data in the OOB area." That is what this module does, and
//! nothing more: it knows pages, blocks and dies, but not time. It reports the flash work each
//! call caused ([`WriteOutcome`], [`GcWork`]) and the device charges it to the busy-until clocks.
//!
//! The P2L lives in per-page OOB records `(lpn, seq)`, exactly as on flash: [`Ftl::rebuild_l2p`]
//! reconstructs the L2P from them (newest `seq` per LPN wins; trimmed LPNs stay unmapped thanks
//! to a trim journal), which is the recovery path TxISC builds on.
//!
//! TxISC's delta pages ([`Ftl::write_delta`]) are programmed like any page but stay out of the
//! L2P, in pinned blocks, until [`Ftl::apply_delta`] maps them (persisting their P2L in a
//! journal, since their OOB is only a hint) or [`Ftl::drop_delta`] makes them garbage. With a
//! persist log on, every durable change is recorded as a [`PersistStep`] for crash checkers.
//!
//! Host writes stripe over dies channel-first (die 0 of every channel, then die 1 ...), so
//! consecutive pages land on different channels. GC is per die and migrates within the die
//! (copyback), so each die's share of data stays on it.

mod blocks;
mod huge;
pub mod l2p;
mod store;
mod zeroed;
pub(crate) use store::kept_len;

pub use blocks::BlockState;
use blocks::BlockTable;
pub use l2p::L2p;
pub use store::PageStore;
use zeroed::Zeroed;

use crate::addr::{BlockId, DieId, Lpn, Ppn};
use crate::durable::{DurableImage, OobRecord, PersistStep};
use crate::error::DeviceError;
use crate::geometry::Geometry;
use crate::profile::FtlPolicy;
use serde::Serialize;
use std::collections::BTreeMap;

/// Flash work a GC pass did on one die; the device turns it into die busy time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GcWork {
    pub die: u32,
    pub pages_migrated: u32,
    pub blocks_erased: u32,
}

/// Where a written page landed, and the GC it triggered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteOutcome {
    pub ppn: Ppn,
    pub die: DieId,
    pub gc: Option<GcWork>,
}

/// FTL event counters since creation (or the last [`Ftl::reset_counters`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct FtlCounters {
    /// Pages written on behalf of users (host or in-device tasks).
    pub pages_written: u64,
    /// Pages GC copied to reclaim their blocks.
    pub gc_pages_migrated: u64,
    pub gc_victims: u64,
    pub blocks_erased: u64,
    pub pages_trimmed: u64,
}

impl FtlCounters {
    /// Write amplification: flash programs per user page written (1.0 with no GC).
    pub fn waf(&self) -> f64 {
        if self.pages_written == 0 {
            return 1.0;
        }
        (self.pages_written + self.gc_pages_migrated) as f64 / self.pages_written as f64
    }
}

/// The page-level FTL. See the module docs.
#[derive(Clone, Debug)]
pub struct Ftl {
    geo: Geometry,
    policy: FtlPolicy,
    logical_pages: u64,
    l2p: L2p,
    /// OOB: the LPN each programmed page was written for (P2L).
    oob_lpn: Zeroed<u32>,
    /// OOB: global program sequence number; 0 = never programmed since erase.
    oob_seq: Zeroed<u64>,
    /// One bit per physical page: is it the live copy of its LPN?
    valid: Zeroed<u64>,
    blocks: BlockTable,
    /// Trim journal: LPN → sequence number of its trim (persisted with the mapping metadata).
    trims: BTreeMap<u32, u64>,
    /// Write order over dies, channel-first: die 0 of every channel, then die 1, ... so
    /// consecutive pages land on different channels.
    stripe: Vec<u32>,
    /// Position in `stripe` of the next die to write.
    next_die: u32,
    seq: u64,
    /// Restores after power loss: each may remap pages without a new sequence number.
    restores: u64,
    store: Option<PageStore>,
    counters: FtlCounters,
    /// Reused buffer of a GC victim's live pages.
    gc_scratch: Vec<u32>,
    /// `log2(pages_per_block)` when that is a power of two (it always is on real flash):
    /// a page's block is then a shift, not a division, on every write.
    ppb_shift: Option<u32>,
    /// OOB flag per physical page: programmed for a TxISC delta mapping, so its OOB LPN is
    /// not authoritative until the delta is applied and its P2L persisted.
    oob_delta: Zeroed<u64>,
    /// Valid pages held by a delta mapping and not (yet) in the L2P. Their blocks are pinned.
    live_deltas: Zeroed<u64>,
    live_delta_count: u64,
    /// The P2L persisted for applied deltas: LPN → (sequence number of the apply, page).
    p2l_journal: BTreeMap<u32, (u64, u32)>,
    /// Every persistent step in order, when a crash checker asked for it.
    log: Option<Vec<PersistStep>>,
    /// Valid bits set: mapped LPNs plus live delta pages, kept so the leak check is O(1).
    valid_pages: u64,
    /// What mutations changed since the last check (debug builds check after every one).
    #[cfg(debug_assertions)]
    touched: Touched,
}

/// Blocks and LPNs a mutation changed: the checks that follow it look at these, not at the
/// whole device, so debug builds can afford them after every write.
#[cfg(debug_assertions)]
#[derive(Clone, Debug, Default)]
struct Touched {
    blocks: Vec<u32>,
    lpns: Vec<u32>,
}

/// How many live pages ahead GC prefetches L2P slots: enough to keep a couple of dozen misses
/// in flight (12 was as good while finding a slot's address itself waited on a miss).
const GC_PREFETCH_DISTANCE: usize = 24;

impl Ftl {
    /// A fresh, fully erased device. `keep_payloads` selects data mode (pages hold bytes)
    /// over timing-only mode. A geometry whose tables this process cannot map is refused
    /// with [`DeviceError::TableTooLarge`], not an abort.
    pub fn new(
        geo: &Geometry,
        policy: &FtlPolicy,
        keep_payloads: bool,
    ) -> Result<Self, DeviceError> {
        let physical = geo.physical_pages() as usize;
        let logical_pages = geo.logical_pages();
        fn table<T: zeroed::Zeroable>(
            table: &'static str,
            len: usize,
        ) -> Result<Zeroed<T>, DeviceError> {
            Zeroed::try_new(len).map_err(too_large(table))
        }
        Ok(Ftl {
            geo: geo.clone(),
            policy: policy.clone(),
            logical_pages,
            l2p: L2p::new(logical_pages),
            // Mapped zeroed (`zeroed`): untouched pages cost no RSS, whatever the allocator keeps.
            oob_lpn: table("out-of-band LPN", physical)?,
            oob_seq: table("out-of-band sequence", physical)?,
            valid: table("valid-page bitmap", physical.div_ceil(64))?,
            blocks: BlockTable::new(geo.dies(), geo.blocks_per_die(), geo.pages_per_block)
                .map_err(too_large("block"))?,
            trims: BTreeMap::new(),
            stripe: (0..geo.dies())
                .map(|i| (i % geo.channels) * geo.dies_per_channel + i / geo.channels)
                .collect(),
            next_die: 0,
            seq: 0,
            restores: 0,
            store: keep_payloads.then(|| PageStore::new(geo.page_size_bytes as usize)),
            counters: FtlCounters::default(),
            gc_scratch: Vec::with_capacity(geo.pages_per_block as usize),
            ppb_shift: geo
                .pages_per_block
                .is_power_of_two()
                .then(|| geo.pages_per_block.trailing_zeros()),
            oob_delta: table("delta-page bitmap", physical.div_ceil(64))?,
            live_deltas: table("live-delta bitmap", physical.div_ceil(64))?,
            live_delta_count: 0,
            p2l_journal: BTreeMap::new(),
            log: None,
            valid_pages: 0,
            #[cfg(debug_assertions)]
            touched: Touched::default(),
        })
    }

    /// Starts recording every persistent step (page programs, erases, trim and P2L journal
    /// updates, and what the transaction layer logs through [`Ftl::log_step`]).
    pub fn record_persist_log(&mut self) {
        self.log = Some(Vec::new());
    }

    /// The persistent steps recorded so far.
    pub fn persist_log(&self) -> Option<&[PersistStep]> {
        self.log.as_deref()
    }

    /// Records a persistent step taken outside the FTL (the capacitor-backed task table and
    /// delta mappings live in the transaction layer).
    pub fn log_step(&mut self, step: PersistStep) {
        if let Some(log) = &mut self.log {
            log.push(step);
        }
    }

    /// Waits for every flash write issued so far to complete (see [`PersistStep::Barrier`]).
    pub fn barrier(&mut self) {
        self.log_step(PersistStep::Barrier);
    }

    /// The sequence number the next persistent mapping change will carry.
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// What changes whenever a mapping or a page does (see [`crate::stamp`]): every
    /// program, trim and applied delta takes a sequence number, and a restore remaps
    /// without one.
    pub(crate) fn content_seq(&self) -> (u64, u64) {
        (self.seq, self.restores)
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    pub fn logical_pages(&self) -> u64 {
        self.logical_pages
    }

    pub fn keeps_payloads(&self) -> bool {
        self.store.is_some()
    }

    pub fn counters(&self) -> FtlCounters {
        self.counters
    }

    pub fn reset_counters(&mut self) {
        self.counters = FtlCounters::default();
    }

    pub fn l2p(&self) -> &L2p {
        &self.l2p
    }

    pub fn check_lpn(&self, lpn: Lpn) -> Result<(), DeviceError> {
        if lpn.0 < self.logical_pages {
            Ok(())
        } else {
            Err(DeviceError::LpnOutOfRange {
                lpn: lpn.0,
                logical_pages: self.logical_pages,
            })
        }
    }

    /// The physical page currently holding `lpn`, if mapped.
    pub fn lookup(&self, lpn: Lpn) -> Result<Option<Ppn>, DeviceError> {
        self.check_lpn(lpn)?;
        Ok(self.l2p.get(lpn))
    }

    /// The block holding physical page `ppn`.
    #[inline]
    fn block_of(&self, ppn: u32) -> u32 {
        match self.ppb_shift {
            Some(shift) => ppn >> shift,
            None => ppn / self.geo.pages_per_block,
        }
    }

    #[inline]
    fn is_valid(&self, ppn: u32) -> bool {
        get_bit(&self.valid, ppn)
    }

    #[inline]
    fn set_valid(&mut self, ppn: u32, on: bool) {
        // Every caller flips the bit (a fresh page becomes valid, a valid one stale), so the
        // count follows without reading it on the write path.
        debug_assert_ne!(get_bit(&self.valid, ppn), on, "ppn {ppn} already {on}");
        if on {
            self.valid_pages += 1;
        } else {
            self.valid_pages -= 1;
        }
        set_bit(&mut self.valid, ppn, on);
        #[cfg(debug_assertions)]
        self.touched.blocks.push(self.block_of(ppn));
    }

    /// Notes that `lpn`'s mapping may have changed (debug builds check it after the mutation).
    #[inline]
    fn touch_lpn(&mut self, _lpn: u32) {
        #[cfg(debug_assertions)]
        self.touched.lpns.push(_lpn);
    }

    /// Checks what the last mutation touched: the mappings of its LPNs, the pages and counts
    /// of its blocks, and that no valid page leaked. Debug builds only; a failure is a bug in
    /// the FTL, never bad input, so it panics with the broken invariant.
    #[inline]
    fn check_touched(&mut self) {
        #[cfg(debug_assertions)]
        {
            let mut t = std::mem::take(&mut self.touched);
            t.lpns.sort_unstable();
            t.lpns.dedup();
            t.blocks.sort_unstable();
            t.blocks.dedup();
            let checked = t
                .lpns
                .iter()
                .try_for_each(|&l| self.check_lpn_mapping(Lpn(u64::from(l))))
                .and_then(|()| t.blocks.iter().try_for_each(|&b| self.check_block_pages(b)))
                .and_then(|()| self.check_valid_total());
            if let Err(e) = checked {
                panic!("FTL invariant broken: {e}");
            }
            t.lpns.clear();
            t.blocks.clear();
            self.touched = t;
        }
    }

    /// Marks the old copy of an LPN stale.
    #[inline]
    fn invalidate(&mut self, old: Ppn) {
        debug_assert!(self.is_valid(old.0));
        self.set_valid(old.0, false);
        self.blocks.page_invalidated(self.block_of(old.0));
    }

    /// Programs the next page of `die`'s open block for `lpn`, opening a free block if
    /// needed. `reserve` free blocks are left untouched (GC keeps one for itself).
    fn program(
        &mut self,
        die: usize,
        lpn: u32,
        reserve: usize,
        delta: bool,
        tag: u64,
    ) -> Option<Ppn> {
        let ppb = self.geo.pages_per_block;
        let block = match self.blocks.dies[die].open {
            Some(b) => b,
            None => {
                let d = &mut self.blocks.dies[die];
                if d.free_len() <= reserve {
                    return None;
                }
                let b = d.take_free().expect("free list longer than reserve");
                self.blocks.open(die, b);
                b
            }
        };
        let meta = &mut self.blocks.blocks[block as usize];
        let ppn = block * ppb + meta.written;
        meta.written += 1;
        meta.valid += 1;
        let full = meta.written == ppb;
        let seq = self.next_seq();
        self.oob_lpn[ppn as usize] = lpn;
        self.oob_seq[ppn as usize] = seq;
        self.touch_lpn(lpn);
        set_bit(&mut self.oob_delta, ppn, delta);
        self.set_valid(ppn, true);
        self.log_step(PersistStep::Program {
            ppn,
            oob: OobRecord {
                lpn,
                seq,
                delta,
                tag,
            },
        });
        if full {
            self.blocks.dies[die].open = None;
            self.blocks.close(block);
        }
        Some(Ppn(ppn))
    }

    /// Can a host write be placed on `die` without touching the GC reserve?
    #[inline]
    fn has_room(&self, die: usize) -> bool {
        let d = &self.blocks.dies[die];
        d.open.is_some() || d.free_len() > 1
    }

    /// Writes one logical page out of place. In data mode `data` is the page's new content
    /// (`None` writes a zero page); in timing-only mode it is ignored.
    /// A hint that `lpn` is written or read soon (a request waiting in the submission queue):
    /// its L2P slot is fetched into the CPU cache now. Random requests each miss the cache in
    /// the L2P; hinting a few requests ahead overlaps those misses instead of paying them one
    /// after another. Never changes state, so results do not depend on it.
    #[inline]
    pub fn prefetch(&self, lpn: Lpn) {
        if lpn.0 < self.l2p.logical_pages() {
            self.l2p.prefetch(lpn);
        }
    }

    /// The second step of [`Ftl::prefetch`], a few requests later: the page `lpn` maps to has
    /// its valid bit and its block's entry fetched, which a write flips and updates.
    #[inline]
    pub fn prefetch_mapping(&self, lpn: Lpn) {
        if lpn.0 >= self.l2p.logical_pages() {
            return;
        }
        if let Some(ppn) = self.l2p.get(lpn) {
            prefetch_read(self.valid.as_ptr().wrapping_add((ppn.0 / 64) as usize));
            self.blocks.prefetch(self.block_of(ppn.0));
        }
    }

    pub fn write(&mut self, lpn: Lpn, data: Option<&[u8]>) -> Result<WriteOutcome, DeviceError> {
        self.check_lpn(lpn)?;
        let die = self.pick_die()?;
        let lpn32 = lpn.0 as u32;
        let ppn = self
            .program(die, lpn32, 1, false, tag_of(data))
            .expect("pick_die guaranteed a page");
        if let Some(old) = self.l2p.set(lpn, ppn) {
            self.invalidate(old);
        }
        if !self.trims.is_empty() && self.trims.remove(&lpn32).is_some() {
            self.log_step(PersistStep::TrimDrop { lpn: lpn32 });
        }
        let out = self.finish_write(die, ppn, data);
        self.check_touched();
        out
    }

    /// Programs a page for a TxISC delta mapping: out of place like any write, but the L2P is
    /// left alone (the page is private to its task, or to the host while a snapshot covers the
    /// LPN) and its block is pinned so GC never erases it before [`Ftl::apply_delta`] or
    /// [`Ftl::drop_delta`].
    pub fn write_delta(
        &mut self,
        lpn: Lpn,
        data: Option<&[u8]>,
    ) -> Result<WriteOutcome, DeviceError> {
        self.check_lpn(lpn)?;
        let die = self.pick_die()?;
        let ppn = self
            .program(die, lpn.0 as u32, 1, true, tag_of(data))
            .expect("pick_die guaranteed a page");
        set_bit(&mut self.live_deltas, ppn.0, true);
        self.live_delta_count += 1;
        self.blocks.pin(self.block_of(ppn.0));
        let out = self.finish_write(die, ppn, data);
        self.check_touched();
        out
    }

    /// Makes a delta page the live copy of its LPN (commit, or a snapshot's release for host
    /// deltas) and persists its P2L.
    pub fn apply_delta(&mut self, ppn: Ppn) -> Result<(), DeviceError> {
        self.take_delta(ppn)?;
        let lpn32 = self.oob_lpn[ppn.0 as usize];
        let lpn = Lpn(u64::from(lpn32));
        if let Some(old) = self.l2p.set(lpn, ppn) {
            self.invalidate(old);
        }
        if !self.trims.is_empty() && self.trims.remove(&lpn32).is_some() {
            self.log_step(PersistStep::TrimDrop { lpn: lpn32 });
        }
        let seq = self.next_seq();
        self.p2l_journal.insert(lpn32, (seq, ppn.0));
        self.log_step(PersistStep::P2l {
            lpn: lpn32,
            ppn: ppn.0,
            seq,
        });
        self.touch_lpn(lpn32);
        self.check_touched();
        Ok(())
    }

    /// Persists the P2L of a page recovery mapped from a delta record, before the record is
    /// cleared.
    pub fn journal_p2l(&mut self, ppn: Ppn) {
        let lpn = self.oob_lpn[ppn.0 as usize];
        let seq = self.next_seq();
        self.p2l_journal.insert(lpn, (seq, ppn.0));
        self.log_step(PersistStep::P2l {
            lpn,
            ppn: ppn.0,
            seq,
        });
    }

    /// Drops a delta page (abort): it becomes garbage for GC.
    pub fn drop_delta(&mut self, ppn: Ppn) -> Result<(), DeviceError> {
        self.take_delta(ppn)?;
        self.invalidate(ppn);
        self.check_touched();
        Ok(())
    }

    /// Ends a delta page's private life: clears its mark and releases its block's pin.
    fn take_delta(&mut self, ppn: Ppn) -> Result<(), DeviceError> {
        self.check_ppn(ppn)?;
        if !get_bit(&self.live_deltas, ppn.0) {
            return Err(DeviceError::NotADelta { ppn: ppn.0 });
        }
        set_bit(&mut self.live_deltas, ppn.0, false);
        self.live_delta_count -= 1;
        self.blocks.unpin(self.block_of(ppn.0));
        Ok(())
    }

    /// Valid pages held by delta mappings.
    pub fn live_delta_pages(&self) -> u64 {
        self.live_delta_count
    }

    fn finish_write(
        &mut self,
        die: usize,
        ppn: Ppn,
        data: Option<&[u8]>,
    ) -> Result<WriteOutcome, DeviceError> {
        if let Some(store) = &mut self.store {
            store.put(ppn, data);
        }
        self.counters.pages_written += 1;
        let gc = self.gc_if_needed(die);
        Ok(WriteOutcome {
            ppn,
            die: DieId(die as u32),
            gc,
        })
    }

    /// The next die in channel-first striping order that can take a page without touching
    /// the GC reserve.
    fn pick_die(&mut self) -> Result<usize, DeviceError> {
        let mut die = None;
        let mut cursor = self.next_die;
        for _ in 0..self.stripe.len() {
            let d = self.stripe[cursor as usize] as usize;
            cursor += 1;
            if cursor as usize == self.stripe.len() {
                cursor = 0;
            }
            if self.has_room(d) {
                die = Some(d);
                self.next_die = cursor;
                break;
            }
        }
        die.ok_or(DeviceError::DeviceFull {
            logical_pages_mapped: self.l2p.len(),
        })
    }

    /// Runs foreground GC on `die` if its free blocks fell below the low watermark.
    fn gc_if_needed(&mut self, die: usize) -> Option<GcWork> {
        if self.blocks.dies[die].free_len() >= self.policy.gc_low_watermark_blocks as usize {
            return None;
        }
        let mut work = GcWork {
            die: die as u32,
            ..GcWork::default()
        };
        let ppb = self.geo.pages_per_block;
        while self.blocks.dies[die].free_len() < self.policy.gc_high_watermark_blocks as usize {
            let Some(victim) = self.blocks.pick_victim(die, ppb) else {
                tracing::debug!(die, "GC found no reclaimable block");
                break;
            };
            self.blocks.start_reclaim(victim);
            let first = victim * ppb;
            self.migrate_live(die, victim, &mut work);
            if let Some(store) = &mut self.store {
                store.drop_range(first..first + ppb);
            }
            self.oob_seq[first as usize..(first + ppb) as usize].fill(0);
            fill_bits(&mut self.oob_delta, first..first + ppb, false);
            self.blocks.erased(victim);
            // The copies are programmed before the victim's only copies are erased.
            self.barrier();
            self.log_step(PersistStep::Erase { block: victim });
            work.blocks_erased += 1;
        }
        self.counters.gc_pages_migrated += u64::from(work.pages_migrated);
        self.counters.gc_victims += u64::from(work.blocks_erased);
        self.counters.blocks_erased += u64::from(work.blocks_erased);
        (work.blocks_erased > 0).then_some(work)
    }

    /// Copies `victim`'s live pages into `die`'s open blocks, in page order, and remaps
    /// them: what [`Ftl::program`] and [`L2p::set`] would do page by page, with the
    /// bookkeeping done once per run of pages. The victim's copies go stale together (its
    /// valid bits and count cleared at once), and each destination run's bits, counts and
    /// fill are updated once; GC's copies are most of the flash programs at high utilisation.
    fn migrate_live(&mut self, die: usize, victim: u32, work: &mut GcWork) {
        let ppb = self.geo.pages_per_block;
        let first = victim * ppb;
        // Gather the victim's live pages first so their L2P slots can be prefetched ahead.
        let mut live = std::mem::take(&mut self.gc_scratch);
        live.clear();
        collect_set_bits(&self.valid, first..first + ppb, &mut live);
        fill_bits(&mut self.valid, first..first + ppb, false);
        self.valid_pages -= live.len() as u64;
        self.blocks.blocks[victim as usize].valid = 0;
        #[cfg(debug_assertions)]
        self.touched.blocks.push(victim);
        let mut next = 0;
        while next < live.len() {
            let block = match self.blocks.dies[die].open {
                Some(b) => b,
                None => {
                    // The reserve block guarantees room: a victim has < ppb valid pages.
                    let b = self.blocks.dies[die]
                        .take_free()
                        .expect("GC reserve block guarantees a destination");
                    self.blocks.open(die, b);
                    b
                }
            };
            let written = self.blocks.blocks[block as usize].written;
            let run = ((ppb - written) as usize).min(live.len() - next);
            let base = block * ppb + written;
            for (j, &from) in live[next..next + run].iter().enumerate() {
                if let Some(&ahead) = live.get(next + j + GC_PREFETCH_DISTANCE) {
                    self.l2p
                        .prefetch(Lpn(u64::from(self.oob_lpn[ahead as usize])));
                }
                let to = base + j as u32;
                let lpn = self.oob_lpn[from as usize];
                let seq = self.next_seq();
                self.oob_lpn[to as usize] = lpn;
                self.oob_seq[to as usize] = seq;
                self.touch_lpn(lpn);
                if self.log.is_some() {
                    let tag = self.store.as_ref().map_or(0, |s| s.tag(Ppn(from)));
                    self.log_step(PersistStep::Program {
                        ppn: to,
                        oob: OobRecord {
                            lpn,
                            seq,
                            delta: false,
                            tag,
                        },
                    });
                }
                self.l2p.set(Lpn(u64::from(lpn)), Ppn(to));
                // The plain copy's OOB now speaks for the LPN; the journal entry is obsolete.
                if self.p2l_journal.get(&lpn).is_some_and(|&(_, p)| p == from) {
                    self.p2l_journal.remove(&lpn);
                    self.log_step(PersistStep::P2lDrop { lpn });
                }
                if let Some(store) = &mut self.store {
                    store.relocate(Ppn(from), Ppn(to));
                }
            }
            let to = base..base + run as u32;
            fill_bits(&mut self.oob_delta, to.clone(), false);
            fill_bits(&mut self.valid, to, true);
            self.valid_pages += run as u64;
            #[cfg(debug_assertions)]
            self.touched.blocks.push(block);
            let meta = &mut self.blocks.blocks[block as usize];
            meta.written += run as u32;
            meta.valid += run as u32;
            if meta.written == ppb {
                self.blocks.dies[die].open = None;
                self.blocks.close(block);
            }
            next += run;
        }
        work.pages_migrated += live.len() as u32;
        self.gc_scratch = live;
    }

    /// Reads a logical page: its physical location, and in data mode its bytes into `out`
    /// (zeros for unmapped or never-written pages).
    pub fn read(&self, lpn: Lpn, out: Option<&mut [u8]>) -> Result<Option<Ppn>, DeviceError> {
        let ppn = self.lookup(lpn)?;
        if let Some(out) = out {
            match (&self.store, ppn) {
                (None, _) => return Err(DeviceError::PayloadsNotKept),
                (Some(store), Some(ppn)) => store.get(ppn, out),
                (Some(_), None) => out.fill(0),
            }
        }
        Ok(ppn)
    }

    /// Reads a physical page directly, stale or not, as long as its block has not been erased
    /// (LightFS's metadata locker reads a locked file through such shadow addresses).
    pub fn read_physical(&self, ppn: Ppn, out: &mut [u8]) -> Result<(), DeviceError> {
        self.check_ppn(ppn)?;
        let Some(store) = &self.store else {
            return Err(DeviceError::PayloadsNotKept);
        };
        if self.oob_seq[ppn.0 as usize] == 0 {
            return Err(DeviceError::PageErased { ppn: ppn.0 });
        }
        store.get(ppn, out);
        Ok(())
    }

    fn check_ppn(&self, ppn: Ppn) -> Result<(), DeviceError> {
        if u64::from(ppn.0) < self.geo.physical_pages() {
            Ok(())
        } else {
            Err(DeviceError::PpnOutOfRange { ppn: ppn.0 })
        }
    }

    /// Unmaps a logical page; its physical copy becomes garbage for GC.
    pub fn trim(&mut self, lpn: Lpn) -> Result<bool, DeviceError> {
        self.check_lpn(lpn)?;
        let Some(old) = self.l2p.remove(lpn) else {
            return Ok(false);
        };
        self.invalidate(old);
        let seq = self.next_seq();
        self.trims.insert(lpn.0 as u32, seq);
        self.log_step(PersistStep::Trim {
            lpn: lpn.0 as u32,
            seq,
        });
        self.counters.pages_trimmed += 1;
        self.touch_lpn(lpn.0 as u32);
        self.check_touched();
        Ok(true)
    }

    /// Adds a GC-forbid pin to `block`: GC will not erase it until every pin is released.
    pub fn pin_block(&mut self, block: BlockId) -> Result<(), DeviceError> {
        self.check_block(block)?;
        self.blocks.pin(block.0);
        Ok(())
    }

    pub fn unpin_block(&mut self, block: BlockId) -> Result<(), DeviceError> {
        self.check_block(block)?;
        if self.blocks.blocks[block.0 as usize].pins == 0 {
            return Err(DeviceError::NotPinned { block: block.0 });
        }
        self.blocks.unpin(block.0);
        #[cfg(debug_assertions)]
        self.touched.blocks.push(block.0);
        self.check_touched();
        Ok(())
    }

    pub fn is_pinned(&self, block: BlockId) -> bool {
        self.blocks
            .blocks
            .get(block.0 as usize)
            .is_some_and(|b| b.pins > 0)
    }

    fn check_block(&self, block: BlockId) -> Result<(), DeviceError> {
        if block.0 < self.geo.blocks() {
            Ok(())
        } else {
            Err(DeviceError::BlockOutOfRange { block: block.0 })
        }
    }

    /// How many times `block` has been erased (wear).
    pub fn erase_count(&self, block: BlockId) -> u32 {
        self.blocks.blocks[block.0 as usize].erases
    }

    pub fn block_state(&self, block: BlockId) -> BlockState {
        self.blocks.blocks[block.0 as usize].state
    }

    /// Free blocks on each die.
    pub fn free_blocks(&self) -> Vec<usize> {
        self.blocks.dies.iter().map(|d| d.free_len()).collect()
    }

    /// The durable state of the flash and the FTL's journals (the transaction layer adds its
    /// capacitor-backed region).
    pub fn durable_image(&self) -> DurableImage {
        let ppb = self.geo.pages_per_block;
        let mut image = DurableImage::new(ppb);
        for (b, meta) in self.blocks.blocks.iter().enumerate() {
            let first = b as u32 * ppb;
            for ppn in first..first + meta.written {
                image.oob.insert(
                    ppn,
                    OobRecord {
                        lpn: self.oob_lpn[ppn as usize],
                        seq: self.oob_seq[ppn as usize],
                        delta: get_bit(&self.oob_delta, ppn),
                        tag: self.store.as_ref().map_or(0, |s| s.tag(Ppn(ppn))),
                    },
                );
            }
        }
        image.trims = self.trims.clone();
        image.p2l = self.p2l_journal.clone();
        image
    }

    /// Rebuilds the L2P from what is on flash alone: the OOB `(lpn, seq)` of every programmed
    /// page, the trim journal and the persisted P2L of applied deltas. Equals the live L2P
    /// whenever the FTL is consistent and no delta mapping is outstanding.
    pub fn rebuild_l2p(&self) -> L2p {
        let map = crate::durable::recover(&self.durable_image())
            .expect("an image without delta mappings is always recoverable");
        let mut l2p = L2p::new(self.logical_pages);
        for (lpn, ppn) in map {
            l2p.set(Lpn(u64::from(lpn)), Ppn(ppn));
        }
        l2p
    }

    /// Power came back: rebuilds every volatile structure (L2P, valid bits, block lists, GC
    /// buckets) from the recovered mapping `lpn → ppn`. Pins and delta marks were DRAM state
    /// and are gone; wear counts are kept (the firmware persists them with its metadata).
    pub fn restore(&mut self, mapping: &BTreeMap<u32, u32>) -> Result<(), DeviceError> {
        self.restores += 1;
        let ppb = self.geo.pages_per_block;
        let mut l2p = L2p::new(self.logical_pages);
        self.valid.fill(0);
        self.live_deltas.fill(0);
        self.live_delta_count = 0;
        for (&lpn, &ppn) in mapping {
            let lpn = Lpn(u64::from(lpn));
            self.check_lpn(lpn)?;
            self.check_ppn(Ppn(ppn))?;
            l2p.set(lpn, Ppn(ppn));
            set_bit(&mut self.valid, ppn, true);
        }
        // Counted from the bits: a mapping naming one page twice is caught by the check below,
        // not by a miscount.
        self.valid_pages = self.valid.iter().map(|w| u64::from(w.count_ones())).sum();
        self.l2p = l2p;
        let mut table = BlockTable::new(self.geo.dies(), self.geo.blocks_per_die(), ppb)
            .map_err(too_large("block"))?;
        for d in &mut table.dies {
            d.clear_free();
        }
        let blocks_per_die = self.geo.blocks_per_die();
        for b in 0..self.geo.blocks() {
            let first = b * ppb;
            let written = (first..first + ppb)
                .take_while(|&p| self.oob_seq[p as usize] != 0)
                .count() as u32;
            let valid = (first..first + ppb).filter(|&p| self.is_valid(p)).count() as u32;
            let die = (b / blocks_per_die) as usize;
            let meta = &mut table.blocks[b as usize];
            meta.erases = self.blocks.blocks[b as usize].erases;
            meta.written = written;
            meta.valid = valid;
            if written == 0 {
                table.dies[die].push_free(b);
            } else if written < ppb && table.dies[die].open.is_none() {
                table.open(die, b);
            } else {
                table.restore_closed(die, b);
            }
        }
        self.blocks = table;
        #[cfg(debug_assertions)]
        {
            self.touched = Touched::default();
            if let Err(e) = self.check_invariants() {
                panic!("FTL invariant broken after restore: {e}");
            }
        }
        Ok(())
    }

    /// Checks every cross-structure invariant; O(physical pages), for tests and debug phases.
    ///
    /// - L2P and P2L agree: a mapped LPN points at a valid page whose OOB names that LPN, and
    ///   every valid page is mapped by its OOB LPN (so valid pages == mapped LPNs).
    /// - each block's valid count equals its valid bits; free blocks are empty and unwritten;
    ///   valid pages lie below the block's write pointer.
    /// - the GC buckets hold exactly the closed, unpinned blocks, filed by valid count.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (lpn, _) in self.l2p.iter() {
            self.check_lpn_mapping(lpn)?;
        }
        let mut valid_total = 0u64;
        for b in 0..self.blocks.blocks.len() as u32 {
            self.check_block_pages(b)?;
            valid_total += u64::from(self.blocks.blocks[b as usize].valid);
        }
        if valid_total != self.valid_pages {
            return Err(format!(
                "blocks count {valid_total} valid pages, the bitmap {}",
                self.valid_pages
            ));
        }
        self.check_valid_total()?;
        self.blocks.check()
    }

    /// A mapped LPN points at a valid page, not held by a delta, whose OOB names the LPN.
    fn check_lpn_mapping(&self, lpn: Lpn) -> Result<(), String> {
        let Some(ppn) = self.l2p.get(lpn) else {
            return Ok(());
        };
        if get_bit(&self.live_deltas, ppn.0) {
            return Err(format!("{lpn} maps to {ppn}, a page still held by a delta"));
        }
        if !self.is_valid(ppn.0) {
            return Err(format!("{lpn} maps to invalid {ppn}"));
        }
        if u64::from(self.oob_lpn[ppn.0 as usize]) != lpn.0 {
            return Err(format!(
                "{lpn} -> {ppn} but OOB says lpn {}",
                self.oob_lpn[ppn.0 as usize]
            ));
        }
        Ok(())
    }

    /// Block `b`'s valid count equals its valid bits; valid pages lie below its write pointer
    /// and are mapped by their OOB LPN (or held by a delta, in a pinned block); a free block
    /// holds nothing.
    fn check_block_pages(&self, b: u32) -> Result<(), String> {
        let ppb = self.geo.pages_per_block;
        let meta = &self.blocks.blocks[b as usize];
        let first = b * ppb;
        let mut valid = 0;
        for ppn in first..first + ppb {
            let is_delta = get_bit(&self.live_deltas, ppn);
            if self.is_valid(ppn) {
                valid += 1;
                if ppn - first >= meta.written {
                    return Err(format!("block {b}: valid page above write pointer"));
                }
                let lpn = Lpn(u64::from(self.oob_lpn[ppn as usize]));
                if !is_delta && self.l2p.get(lpn) != Some(Ppn(ppn)) {
                    return Err(format!("valid ppn {ppn} not mapped by its {lpn}"));
                }
                if is_delta && meta.pins == 0 {
                    return Err(format!("delta page {ppn} sits in unpinned block {b}"));
                }
            } else if is_delta {
                return Err(format!("delta page {ppn} is not valid"));
            }
        }
        if valid != meta.valid {
            return Err(format!(
                "block {b}: valid count {} != {valid} bits",
                meta.valid
            ));
        }
        if meta.state == BlockState::Free && (meta.written != 0 || valid != 0) {
            return Err(format!("free block {b} holds data"));
        }
        Ok(())
    }

    /// Every valid page is a mapped LPN's or a live delta's: none leaked.
    fn check_valid_total(&self) -> Result<(), String> {
        if self.valid_pages != self.l2p.len() + self.live_delta_count {
            return Err(format!(
                "{} valid pages but {} mapped LPNs and {} delta pages (a leak)",
                self.valid_pages,
                self.l2p.len(),
                self.live_delta_count
            ));
        }
        Ok(())
    }
}

fn get_bit(bits: &[u64], i: u32) -> bool {
    bits[(i / 64) as usize] & (1 << (i % 64)) != 0
}

/// The error for a table of `table` that this process could not have.
fn too_large(table: &'static str) -> impl Fn(zeroed::TooLarge) -> DeviceError {
    move |zeroed::TooLarge(bytes)| DeviceError::TableTooLarge {
        table,
        bytes: bytes.map(|b| b as u64),
    }
}

#[inline]
fn set_bit(bits: &mut [u64], i: u32, on: bool) {
    let word = &mut bits[(i / 64) as usize];
    if on {
        *word |= 1 << (i % 64);
    } else {
        *word &= !(1 << (i % 64));
    }
}

/// Sets or clears bits `range`: whole words at once, so erasing a block is not one dependent
/// read-modify-write of the same word per page (that loop was a tenth of GC's time).
fn fill_bits(bits: &mut [u64], range: std::ops::Range<u32>, on: bool) {
    let (mut i, end) = (range.start, range.end);
    while i < end && i % 64 != 0 {
        set_bit(bits, i, on);
        i += 1;
    }
    let whole = (end - i) / 64;
    bits[(i / 64) as usize..(i / 64 + whole) as usize].fill(if on { u64::MAX } else { 0 });
    for j in i + whole * 64..end {
        set_bit(bits, j, on);
    }
}

/// Appends the indices of the bits set in `range` to `out`, in order, a word at a time.
fn collect_set_bits(bits: &[u64], range: std::ops::Range<u32>, out: &mut Vec<u32>) {
    let mut i = range.start;
    while i < range.end {
        let word_start = i - i % 64;
        let mut word = bits[(i / 64) as usize] >> (i % 64) << (i % 64);
        let word_end = (word_start + 64).min(range.end);
        if word_end - word_start < 64 {
            word &= (1u64 << (word_end - word_start)) - 1;
        }
        while word != 0 {
            out.push(word_start + word.trailing_zeros());
            word &= word - 1;
        }
        i = word_end;
    }
}

/// A page's version tag for crash checkers: its first 8 bytes.
fn tag_of(data: Option<&[u8]>) -> u64 {
    data.and_then(|d| d.get(..8))
        .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// Fetches the cache line holding `ptr` (a hint: it never faults and changes nothing).
#[inline]
pub(crate) fn prefetch_read<T>(ptr: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it reads no memory architecturally and never faults,
    // whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(ptr as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Ftl {
        let geo = Geometry {
            channels: 2,
            dies_per_channel: 1,
            planes_per_die: 1,
            blocks_per_plane: 8,
            pages_per_block: 4,
            page_size_bytes: 4096,
            over_provisioning: 0.25,
        };
        let policy = FtlPolicy {
            gc_low_watermark_blocks: 2,
            gc_high_watermark_blocks: 3,
        };
        Ftl::new(&geo, &policy, false).expect("a small test geometry")
    }

    #[test]
    fn fill_bits_changes_exactly_its_range() {
        for (start, end) in [(0, 0), (0, 64), (3, 5), (60, 130), (64, 192), (1, 255)] {
            for on in [false, true] {
                let mut bits = vec![if on { 0 } else { u64::MAX }; 4];
                fill_bits(&mut bits, start..end, on);
                for i in 0..256 {
                    assert_eq!(
                        get_bit(&bits, i),
                        (start..end).contains(&i) == on,
                        "{start}..{end} := {on}, bit {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn collect_set_bits_finds_exactly_the_set_bits_of_its_range() {
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        for (start, end) in [
            (0, 0),
            (0, 64),
            (3, 5),
            (60, 130),
            (64, 192),
            (1, 255),
            (0, 256),
        ] {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let bits = [rng, !rng, rng.rotate_left(17), u64::MAX];
            let mut found = Vec::new();
            collect_set_bits(&bits, start..end, &mut found);
            let want: Vec<u32> = (start..end).filter(|&i| get_bit(&bits, i)).collect();
            assert_eq!(found, want, "{start}..{end}");
        }
    }

    #[test]
    fn overwrites_and_gc_keep_every_invariant() {
        let mut ftl = tiny();
        for i in 0..400u64 {
            ftl.write(Lpn(i * 7 % ftl.logical_pages()), None).unwrap();
        }
        ftl.trim(Lpn(3)).unwrap();
        assert!(ftl.counters().gc_victims > 0, "the run must exercise GC");
        ftl.check_invariants().unwrap();
    }

    #[test]
    fn the_full_check_names_a_corrupted_p2l() {
        let mut ftl = tiny();
        let ppn = ftl.write(Lpn(5), None).unwrap().ppn;
        ftl.oob_lpn[ppn.0 as usize] = 6;
        let e = ftl.check_invariants().unwrap_err();
        assert!(e.contains("OOB says lpn 6"), "{e}");
    }

    /// Debug builds check what each mutation touched: a corrupted OOB in the block the next
    /// write lands in is caught at that write, not at the end of a run.
    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "FTL invariant broken")]
    fn debug_builds_catch_a_broken_invariant_at_the_next_write() {
        let mut ftl = tiny();
        let ppn = ftl.write(Lpn(5), None).unwrap().ppn;
        ftl.oob_lpn[ppn.0 as usize] = 6;
        // Two dies, written in turn: the third write lands in the corrupted block.
        ftl.write(Lpn(1), None).unwrap();
        ftl.write(Lpn(2), None).unwrap();
    }
}
