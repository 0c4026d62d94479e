//! TxISC's TxFTL: every task invocation is a transaction over snapshots of its files.
//!
//! - A [`SnapshotDescriptor`] per registered file, shared by the tasks using it: the file's
//!   extents plus a [`DeltaTree`] of changed pages keyed by file offset.
//! - A task's writes go to fresh flash pages recorded as delta mappings; the L2P is not touched,
//!   so no one else sees them. Its reads see its own deltas, otherwise clean data.
//! - Host writes to an LPN a snapshot covers (flagged in `flagged`, TxISC's L2P flag bit) are
//!   host deltas: host reads see them, tasks do not.
//! - Conflicts: a task writing a page another running task changed is refused
//!   ([`TxError::Conflict`]; the caller aborts or retries it). At commit, a task that changed a
//!   page the host wrote, or that a task committed, after it started, loses.
//! - Commit: the task table gets the commit timestamp (the commit point), then the deltas are
//!   applied to the L2P and their P2L persisted. Abort: deltas dropped, pages become garbage.
//!   Delta pages sit in pinned blocks, so GC never erases them while they are private.
//! - The task table and delta mappings live in a capacitor-backed region: every change to them
//!   is a [`PersistStep`], and [`crate::durable::recover`] rebuilds the L2P after power loss.
//!
//! Firmware bookkeeping runs on the device's one NVMe/FTL core (TxISC §IV), booked FIFO on
//! that core and priced by where each step's entry lives ([`FirmwareWork`]): the extent
//! array and the delta tree stay in the core's caches (`device_cpu.cached_entry_ns` per
//! entry), an L2P or P2L entry is a DRAM access (`device_cpu.metadata_entry_ns`), and
//! recording a delta mapping costs `device_cpu.delta_record_ns`.

pub mod bench;
pub mod crash;
mod error;
mod flags;
pub(crate) mod ids;
pub mod snapshot;
pub mod state;

pub use error::TxError;
pub use ids::{ExecMode, FileId, TaskId};
use state::TaskEntry;
pub use state::{TxFault, Txn, TxnStats};

pub use snapshot::{
    CommittedRange, DeltaEntry, DeltaPage, DeltaTree, SnapshotDescriptor, MAX_DELTA_PAGES,
};

pub use crate::addr::Extent;
use crate::addr::{DieId, Lpn, Ppn, VirtualTime};
use crate::device::{in_place, Completion, Device};
use crate::durable::{recover, DeltaRecord, DurableImage, PersistStep};
use crate::error::DeviceError;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What a commit applied: the delta pages now live (their records are dropped once their
/// P2L is durable) and the die of the last one.
#[derive(Debug, Default)]
struct AppliedDeltas {
    pages: Vec<u32>,
    last_die: Option<DieId>,
}

/// Firmware work on the mapping structures, counted by what each step costs: where the entry
/// it touches lives, or what it builds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FirmwareWork {
    /// Entries fetched from DRAM (an L2P slot, a P2L record): `metadata_entry_ns` each.
    pub entries: u64,
    /// Entries of structures that stay in the core's caches (a snapshot's extent array, the
    /// delta tree's nodes): `cached_entry_ns` each.
    pub cached: u64,
    /// Delta mappings recorded: `delta_record_ns` each.
    pub records: u64,
}

impl FirmwareWork {
    pub fn entries(n: u64) -> FirmwareWork {
        FirmwareWork {
            entries: n,
            ..FirmwareWork::default()
        }
    }

    pub fn cached(n: u64) -> FirmwareWork {
        FirmwareWork {
            cached: n,
            ..FirmwareWork::default()
        }
    }

    pub fn records(n: u64) -> FirmwareWork {
        FirmwareWork {
            records: n,
            ..FirmwareWork::default()
        }
    }
}

/// Entries a balanced tree of `n` examines for one lookup.
fn tree_probe(n: usize) -> u64 {
    u64::from(usize::BITS - n.leading_zeros()) + 1
}

impl Device {
    pub fn txn_stats(&self) -> TxnStats {
        let mut s = self.txn.stats;
        s.running_tasks = self.txn.tasks.len() as u64;
        s.snapshots = self.txn.snapshots.len() as u64;
        s.delta_entries = 0;
        s.delta_pages = 0;
        s.firmware_delta_bytes = 0;
        for d in self.txn.snapshots.values() {
            s.delta_entries += d.deltas.len() as u64;
            s.delta_pages += d.deltas.pages() as u64;
            s.firmware_delta_bytes += d.deltas.firmware_entries() * snapshot::TXISC_ENTRY_BYTES;
        }
        s.delta_bytes = s.delta_entries * delta_entry_bytes() as u64
            + s.delta_pages * std::mem::size_of::<DeltaPage>() as u64;
        s
    }

    /// Books the handling of one in-storage request (`device_cpu.request_ns`) on the
    /// firmware core from `at`.
    pub fn firmware_request(&mut self, at: VirtualTime) -> VirtualTime {
        let start = at.max(self.txn.firmware_busy);
        let done = start.after(self.profile.device_cpu.request_ns);
        self.txn.firmware_busy = done;
        done
    }

    /// Books `work` on the firmware core from `at`.
    pub fn firmware(&mut self, at: VirtualTime, work: FirmwareWork) -> VirtualTime {
        let cpu = &self.profile.device_cpu;
        let ns = work
            .entries
            .saturating_mul(cpu.metadata_entry_ns)
            .saturating_add(work.cached.saturating_mul(cpu.cached_entry_ns()))
            .saturating_add(work.records.saturating_mul(cpu.delta_record_ns));
        let start = at.max(self.txn.firmware_busy);
        let done = start.after(ns);
        self.txn.firmware_busy = done;
        done
    }

    /// Starts a task: a new entry in the global task table.
    pub fn tx_begin(&mut self) -> TaskId {
        self.txn.next_task += 1;
        let task = TaskId(self.txn.next_task);
        let start_ts = self.txn.tick();
        self.txn.tasks.insert(
            task,
            TaskEntry {
                start_ts,
                files: BTreeSet::new(),
            },
        );
        self.ftl.log_step(PersistStep::TaskBegin { task });
        task
    }

    /// Registers `file` for `task` with the file's current extents (file page order). The
    /// first registration creates the snapshot descriptor and flags its LPNs; later ones share
    /// it and add any pages the file has grown by (an output file a task extends).
    pub fn tx_register(
        &mut self,
        task: TaskId,
        file: FileId,
        extents: &[Extent],
    ) -> Result<(), TxError> {
        self.txn.task(task)?;
        for e in extents {
            self.check_pages(e.first, e.pages)?;
        }
        let known = self
            .txn
            .snapshots
            .get(&file)
            .map_or(0, SnapshotDescriptor::pages);
        // Skip the pages the descriptor already covers; add the rest.
        let mut skip = known;
        let mut tail = Vec::new();
        for e in extents {
            if skip >= e.pages {
                skip -= e.pages;
                continue;
            }
            tail.push(Extent {
                first: Lpn(e.first.0 + skip),
                pages: e.pages - skip,
            });
            skip = 0;
        }
        // A page can belong to one file's snapshot only (and once): refuse before changing
        // anything. Runs are compared, not pages, so the check costs per extent.
        let mut sorted: Vec<(u64, u64)> = tail.iter().map(|e| (e.first.0, e.pages)).collect();
        sorted.sort_unstable();
        for (i, &(first, pages)) in sorted.iter().enumerate() {
            if let Some((lpn, other)) = self.txn.flagged.first_overlap(first, first + pages) {
                return Err(TxError::SharedLpn { lpn, file, other });
            }
            if let Some(&(next, _)) = sorted.get(i + 1) {
                if next < first + pages {
                    return Err(TxError::SharedLpn {
                        lpn: next,
                        file,
                        other: file,
                    });
                }
            }
        }
        let desc = self.txn.snapshots.entry(file).or_default();
        for (page, e) in desc.extend(&tail) {
            self.txn.flagged.insert(e.first.0, e.pages, file, page);
        }
        desc.users.insert(task);
        self.txn
            .tasks
            .get_mut(&task)
            .expect("checked above")
            .files
            .insert(file);
        Ok(())
    }

    /// Where `task` reads file page `page`: its own delta, else the clean copy (extents + L2P;
    /// never a host delta or another task's delta). Also the entries examined.
    fn tx_view(
        &self,
        task: TaskId,
        file: FileId,
        page: u64,
    ) -> Result<(Option<Ppn>, u64), TxError> {
        let desc = self.txn.snapshot(task, file)?;
        let probe = tree_probe(desc.deltas.len());
        if let Some(ppn) = desc.deltas.page_of(task, page) {
            return Ok((Some(ppn), probe));
        }
        let (lpn, examined) = desc.lpn_of(page).ok_or(TxError::BeyondExtents {
            file,
            page,
            pages: desc.pages(),
        })?;
        Ok((self.ftl.lookup(lpn)?, probe + examined))
    }

    /// Reads `len` bytes of `file` at byte `offset` as `task` sees them (see `tx_view`), on the
    /// internal path. With `out` (data mode), fills it.
    pub fn tx_read(
        &mut self,
        task: TaskId,
        file: FileId,
        at: VirtualTime,
        offset: u64,
        len: u64,
        mut out: Option<&mut [u8]>,
    ) -> Result<Completion, TxError> {
        if let Some(o) = &out {
            self.check_buffer(o.len(), len)?;
        }
        let ps = self.page_size();
        let mut views = Vec::new();
        let mut examined = 0;
        for page in page_span(offset, len, ps) {
            let (ppn, n) = self.tx_view(task, file, page)?;
            views.push((page, ppn));
            examined += n;
        }
        let t0 = self.firmware(at, FirmwareWork::cached(examined));
        let mut done = t0;
        let mut scratch = Vec::new();
        for (page, ppn) in views {
            let (a, b, dst) = clip(page, ps, offset, len);
            let ready = match out.as_deref_mut() {
                None => self.flash_read_ppn(ppn, None, t0)?,
                Some(o) => in_place(o, dst, (a, b), ps, &mut scratch, |buf| {
                    self.flash_read_ppn(ppn, Some(buf), t0)
                })?,
            };
            done = done.max(ready);
        }
        self.counters.internal_bytes_read += len;
        Ok(internal_completion(at, t0, done))
    }

    /// The bytes [`Device::tx_read`] would return, without booking any time (see
    /// [`Device::peek_ranges`]). Data mode only.
    pub fn tx_peek(
        &self,
        task: TaskId,
        file: FileId,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), TxError> {
        if !self.ftl.keeps_payloads() {
            return Err(DeviceError::PayloadsNotKept.into());
        }
        let ps = self.page_size();
        let len = out.len() as u64;
        let mut scratch = Vec::new();
        for page in page_span(offset, len, ps) {
            let (ppn, _) = self.tx_view(task, file, page)?;
            let (a, b, dst) = clip(page, ps, offset, len);
            in_place(out, dst, (a, b), ps, &mut scratch, |buf| {
                self.peek_ppn(ppn, buf)
            })?;
        }
        Ok(())
    }

    /// Writes `len` bytes of `file` at byte `offset` for `task`: new pages and delta mappings,
    /// partly covered pages read-modify-written from the task's view. Refused with
    /// [`TxError::Conflict`], changing nothing, if another running task changed one of the
    /// pages.
    // Long: the conflict check must finish before any page is written, so the two passes share
    // their state.
    pub fn tx_write(
        &mut self,
        task: TaskId,
        file: FileId,
        at: VirtualTime,
        offset: u64,
        len: u64,
        data: Option<&[u8]>,
    ) -> Result<Completion, TxError> {
        if let Some(d) = data {
            self.check_buffer(d.len(), len)?;
        }
        let ps = self.page_size();
        let pages: Vec<u64> = page_span(offset, len, ps).collect();
        let mut examined = 0;
        let mut conflict = None;
        {
            let desc = self.txn.snapshot(task, file)?;
            for &page in &pages {
                if page >= desc.pages() {
                    return Err(TxError::BeyondExtents {
                        file,
                        page,
                        pages: desc.pages(),
                    });
                }
                examined += tree_probe(desc.deltas.len());
                if let Some(with) = desc
                    .deltas
                    .other_writers(task, page, page + 1)
                    .find(|w| *w != TaskId::HOST)
                {
                    conflict = Some(TxError::Conflict {
                        task,
                        with,
                        file,
                        page,
                    });
                    break;
                }
            }
        }
        if let Some(e) = conflict {
            self.txn.stats.conflicts += 1;
            return Err(e);
        }
        // Each page's delta entry is allocated, linked and rebalanced as its program is
        // issued; the record that names the page follows the program (`put_delta`), but the
        // firmware's work is the same, so it is booked here with the probes.
        let work = FirmwareWork {
            cached: examined,
            records: pages.len() as u64,
            ..FirmwareWork::default()
        };
        let t0 = self.firmware(at, work);
        let payloads = self.ftl.keeps_payloads();
        let mut buf = vec![0u8; if payloads { ps as usize } else { 0 }];
        let mut done = t0;
        for page in pages {
            let (a, b, src) = clip(page, ps, offset, len);
            let partial = b - a < ps;
            let mut start = t0;
            let (old, _) = self.tx_view(task, file, page)?;
            if partial && old.is_some() {
                self.counters.read_modify_writes += 1;
                start = self.flash_read_ppn(old, payloads.then_some(buf.as_mut_slice()), t0)?;
            } else if partial {
                buf.fill(0);
            }
            let content = match (payloads, data) {
                (false, _) => None,
                (true, Some(d)) if !partial => Some(&d[src..src + ps as usize]),
                (true, d) => {
                    let part = &mut buf[a as usize..b as usize];
                    match d {
                        Some(d) => part.copy_from_slice(&d[src..src + (b - a) as usize]),
                        None => part.fill(0),
                    }
                    Some(buf.as_slice())
                }
            };
            let lpn = self.txn.snapshots[&file]
                .lpn_of(page)
                .expect("checked against the extents")
                .0;
            let (ppn, programmed) = self.program_delta(lpn, content, start)?;
            done = done.max(programmed);
            self.put_delta(task, file, page, lpn, ppn)?;
        }
        self.counters.internal_bytes_written += len;
        Ok(internal_completion(at, t0, done))
    }

    /// Records a delta page in the descriptor and the capacitor-backed region; the writer's
    /// previous copy of the page becomes garbage.
    fn put_delta(
        &mut self,
        writer: TaskId,
        file: FileId,
        page: u64,
        lpn: Lpn,
        ppn: Ppn,
    ) -> Result<(), DeviceError> {
        // The page is programmed before the capacitor-backed record names it: a record of a
        // page a power loss cut short would be a mapping to nothing. (So a commit point,
        // which follows the records, follows the pages too.)
        if self.txn.fault != Some(TxFault::RecordBeforePage) {
            self.ftl.barrier();
        }
        let ts = self.txn.tick();
        let desc = self.txn.snapshots.get_mut(&file).expect("registered");
        let replaced = desc.deltas.put(writer, page, ppn, ts);
        self.ftl.log_step(PersistStep::DeltaPut {
            ppn: ppn.0,
            delta: DeltaRecord {
                lpn: lpn.0 as u32,
                task: writer,
                ts,
            },
        });
        if let Some(old) = replaced {
            self.ftl.log_step(PersistStep::DeltaDrop { ppn: old.0 });
            self.ftl.drop_delta(old)?;
        }
        Ok(())
    }

    /// A host (or FileISC) write to a flagged LPN: a host delta in the file's snapshot.
    pub(crate) fn host_delta_write(
        &mut self,
        file: FileId,
        page: u64,
        lpn: Lpn,
        data: Option<&[u8]>,
        ready: VirtualTime,
    ) -> Result<VirtualTime, DeviceError> {
        // The firmware records the host's delta as it records a task's (TxISC §III-B).
        let ready = self.firmware(ready, FirmwareWork::records(1));
        let (ppn, done) = self.program_delta(lpn, data, ready)?;
        self.put_delta(TaskId::HOST, file, page, lpn, ppn)?;
        Ok(done)
    }

    /// Commits `task`: conflict check, commit timestamp (the commit point), deltas applied to
    /// the L2P with their P2L persisted. A conflict aborts the task and is returned.
    pub fn tx_commit(&mut self, task: TaskId, at: VirtualTime) -> Result<Completion, TxError> {
        let entry = self.txn.task(task)?.clone();
        let (examined, conflict) = self.find_conflict(task, &entry);
        if let Some(e) = conflict {
            self.txn.stats.conflicts += 1;
            self.tx_abort(task, at)?;
            return Err(e);
        }
        let t0 = self.firmware(at, FirmwareWork::cached(examined));
        let ts = self.txn.tick();
        let broken = self.txn.fault == Some(TxFault::MappingsBeforeCommit);
        // The task's delta pages are on flash already: each was before its record (put_delta).
        if !broken {
            self.ftl.log_step(PersistStep::TaskCommit { task, ts });
        }
        let applied = self.apply_deltas(task, &entry, ts)?;
        // The delta records go once the P2L that replaces them is on flash.
        self.ftl.barrier();
        for &ppn in &applied.pages {
            self.ftl.log_step(PersistStep::DeltaDrop { ppn });
        }
        if broken {
            self.ftl.log_step(PersistStep::TaskCommit { task, ts });
        }
        // Applying costs one entry per page; the commit completes then: the task table and
        // the deltas are capacitor-backed, so the P2L is programmed in the background.
        let done = self.firmware(t0, FirmwareWork::entries(applied.pages.len() as u64));
        if let Some(first) = applied.last_die {
            self.program_p2l(first, applied.pages.len() as u64, done);
        }
        self.finish_task(task)?;
        self.txn.stats.committed += 1;
        Ok(internal_completion(at, t0, done))
    }

    /// First committer wins (TxISC §III-C): the first page of `task`'s deltas that a host
    /// write or another task's commit changed after `task` started, and how many entries the
    /// firmware examined to find out.
    fn find_conflict(&self, task: TaskId, entry: &TaskEntry) -> (u64, Option<TxError>) {
        let mut examined = 0;
        let mut conflict = None;
        for &file in &entry.files {
            let desc = &self.txn.snapshots[&file];
            for (first, end) in desc.deltas.ranges_of(task) {
                // One probe into the host's deltas and a scan of recent commits per range.
                examined +=
                    tree_probe(desc.deltas.entries_of(TaskId::HOST)) + desc.committed.len() as u64;
                let host = desc
                    .deltas
                    .pages_in(TaskId::HOST, first, end)
                    .into_iter()
                    .find(|(_, p)| p.ts > entry.start_ts)
                    .map(|(page, _)| (TaskId::HOST, page));
                let committed = desc
                    .committed
                    .iter()
                    .find(|c| c.ts > entry.start_ts && c.first < end && first < c.end)
                    .map(|c| (c.task, c.first.max(first)));
                if let Some((with, page)) = host.or(committed) {
                    conflict.get_or_insert(TxError::Conflict {
                        task,
                        with,
                        file,
                        page,
                    });
                }
            }
        }
        (examined, conflict)
    }

    /// Makes every delta page of `task` the live copy of its LPN (superseding older host
    /// deltas of the same pages) and records the committed ranges at `ts`.
    fn apply_deltas(
        &mut self,
        task: TaskId,
        entry: &TaskEntry,
        ts: u64,
    ) -> Result<AppliedDeltas, TxError> {
        let mut applied = AppliedDeltas::default();
        for &file in &entry.files {
            let taken = self
                .txn
                .snapshots
                .get_mut(&file)
                .expect("registered")
                .deltas
                .take(task);
            let mut ranges = Vec::new();
            for (first, e) in taken {
                ranges.push(CommittedRange {
                    first,
                    end: first + e.pages.len() as u64,
                    ts,
                    task,
                });
                for (i, p) in e.pages.into_iter().enumerate() {
                    // An older host delta of the page is superseded by this commit. It goes
                    // first: recovery applies delta records over the persisted P2L, so it must
                    // never outlive the P2L of the page that replaces it.
                    let desc = self.txn.snapshots.get_mut(&file).expect("registered");
                    if let Some(old) = desc.deltas.remove_page(TaskId::HOST, first + i as u64) {
                        self.ftl.log_step(PersistStep::DeltaDrop { ppn: old.ppn.0 });
                        self.ftl.drop_delta(old.ppn)?;
                    }
                    self.ftl.apply_delta(p.ppn)?;
                    applied.pages.push(p.ppn.0);
                    applied.last_die = Some(self.profile.geometry.die_of(p.ppn));
                }
            }
            self.txn
                .snapshots
                .get_mut(&file)
                .expect("registered")
                .committed
                .extend(ranges);
        }
        Ok(applied)
    }

    /// Programs the P2L of `applied` pages in the background from `at`: one flash page per
    /// 2048 8-byte entries, striped over the dies from `first`, the one that held the last
    /// delta page. It only delays later I/O on those dies.
    fn program_p2l(&mut self, first: DieId, applied: u64, at: VirtualTime) {
        let dies = self.profile.geometry.dies();
        for i in 0..applied.div_ceil(2048) {
            let die = DieId((first.0 + i as u32) % dies);
            let channel = self.channel_of[die.0 as usize];
            self.clocks.program_page(die, channel, at);
        }
    }

    /// Aborts `task`: its delta pages become garbage, nothing it wrote is ever visible.
    pub fn tx_abort(&mut self, task: TaskId, at: VirtualTime) -> Result<Completion, TxError> {
        let entry = self.txn.task(task)?.clone();
        let mut dropped = 0;
        for &file in &entry.files {
            let desc = self.txn.snapshots.get_mut(&file).expect("registered");
            for (_, e) in desc.deltas.take(task) {
                for p in e.pages {
                    self.ftl.log_step(PersistStep::DeltaDrop { ppn: p.ppn.0 });
                    self.ftl.drop_delta(p.ppn)?;
                    dropped += 1;
                }
            }
        }
        let done = self.firmware(at, FirmwareWork::entries(dropped + 1));
        self.finish_task(task)?;
        self.txn.stats.aborted += 1;
        Ok(internal_completion(at, at, done))
    }

    /// Ends a task in the task table and releases its snapshots; the last user of a snapshot
    /// applies the host's deltas and unflags its LPNs.
    fn finish_task(&mut self, task: TaskId) -> Result<(), DeviceError> {
        self.ftl.log_step(PersistStep::TaskEnd { task });
        let entry = self.txn.tasks.remove(&task).expect("running");
        let oldest_start = self.txn.tasks.values().map(|t| t.start_ts).min();
        for file in entry.files {
            let desc = self.txn.snapshots.get_mut(&file).expect("registered");
            desc.users.remove(&task);
            // Commits no running task started before can no longer conflict.
            desc.committed
                .retain(|c| oldest_start.is_some_and(|start| c.ts > start));
            if !desc.users.is_empty() {
                continue;
            }
            let desc = self.txn.snapshots.remove(&file).expect("registered");
            let mut applied = Vec::new();
            for (_, host, e) in desc.deltas.iter() {
                debug_assert_eq!(host, TaskId::HOST, "only host deltas outlive their tasks");
                for p in &e.pages {
                    self.ftl.apply_delta(p.ppn)?;
                    applied.push(p.ppn.0);
                }
            }
            // The records go once the P2L that replaces them is on flash.
            if !applied.is_empty() {
                self.ftl.barrier();
            }
            for ppn in applied {
                self.ftl.log_step(PersistStep::DeltaDrop { ppn });
            }
            for e in desc.extents() {
                self.txn.flagged.remove(e.first.0, e.first.0 + e.pages);
            }
        }
        Ok(())
    }

    /// The durable state now: flash, FTL journals, task table and delta mappings.
    pub fn durable_image(&self) -> DurableImage {
        let mut image = self.ftl.durable_image();
        for &task in self.txn.tasks.keys() {
            image.tasks.insert(task, None);
        }
        for desc in self.txn.snapshots.values() {
            for (start, writer, e) in desc.deltas.iter() {
                for (i, p) in e.pages.iter().enumerate() {
                    let (lpn, _) = desc.lpn_of(start + i as u64).expect("within extents");
                    image.deltas.insert(
                        p.ppn.0,
                        DeltaRecord {
                            lpn: lpn.0 as u32,
                            task: writer,
                            ts: p.ts,
                        },
                    );
                }
            }
        }
        image
    }

    /// Power loss and restart: everything volatile is lost, the L2P is rebuilt from the
    /// durable image (TxISC §III-D), running tasks are rolled back. The recovered mapping's
    /// delta pages get their P2L persisted before the capacitor-backed region is cleared, so a
    /// second crash during recovery loses nothing either.
    pub fn power_cycle(&mut self) -> Result<RecoveryReport, TxError> {
        let image = self.durable_image();
        let mapping = recover(&image)?;
        let applied: Vec<u32> = image
            .deltas
            .keys()
            .copied()
            .filter(|ppn| {
                let d = image.deltas[ppn];
                mapping.get(&d.lpn) == Some(ppn)
            })
            .collect();
        self.ftl.restore(&mapping)?;
        for &ppn in &applied {
            self.ftl.journal_p2l(Ppn(ppn));
        }
        self.ftl.barrier();
        for &ppn in image.deltas.keys() {
            self.ftl.log_step(PersistStep::DeltaDrop { ppn });
        }
        for &task in image.tasks.keys() {
            self.ftl.log_step(PersistStep::TaskEnd { task });
        }
        let rolled_back = image
            .tasks
            .values()
            .filter(|commit| commit.is_none())
            .count() as u64;
        let txn = std::mem::take(&mut self.txn);
        self.txn.next_task = txn.next_task;
        self.txn.clock = txn.clock;
        self.txn.stats = txn.stats;
        self.clocks.reset();
        Ok(RecoveryReport {
            mapped_pages: mapping.len() as u64,
            delta_pages_applied: applied.len() as u64,
            delta_pages_dropped: image.deltas.len() as u64 - applied.len() as u64,
            tasks_rolled_back: rolled_back,
        })
    }
}

/// What a [`Device::power_cycle`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RecoveryReport {
    pub mapped_pages: u64,
    pub delta_pages_applied: u64,
    pub delta_pages_dropped: u64,
    pub tasks_rolled_back: u64,
}

/// Bytes of one delta entry in this model: the tree slot (key + value) and the entry's
/// vector header; its pages cost `size_of::<DeltaPage>()` each on top.
pub fn delta_entry_bytes() -> usize {
    std::mem::size_of::<(u64, DeltaEntry)>()
}

fn page_span(offset: u64, len: u64, ps: u64) -> impl Iterator<Item = u64> {
    let (first, end) = if len == 0 {
        (0, 0)
    } else {
        (offset / ps, (offset + len - 1) / ps + 1)
    };
    first..end
}

/// For file page `page` and the byte range `offset..offset+len`: the covered span `[a, b)`
/// inside the page and where it starts in the caller's buffer.
fn clip(page: u64, ps: u64, offset: u64, len: u64) -> (u64, u64, usize) {
    let start = page * ps;
    let a = offset.max(start) - start;
    let b = (offset + len).min(start + ps) - start;
    (a, b, (start + a - offset) as usize)
}

fn internal_completion(at: VirtualTime, t0: VirtualTime, done: VirtualTime) -> Completion {
    Completion {
        submitted: at,
        done,
        nvme_ns: t0.since(at),
        dma_ns: 0,
        flash_ns: done.since(t0),
    }
}

#[cfg(test)]
mod tests;
