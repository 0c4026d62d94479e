//! The simulated computational SSD: the FTL and the busy-until clocks behind one small API.
//!
//! Every operation takes the virtual time it is issued at and returns a [`Completion`] saying
//! when it finished and where the time went. Two paths reach the flash:
//! [`IoPath::Host`] pays NVMe command handling and PCIe DMA; [`IoPath::Internal`] is the
//! device's own access (an in-storage task, the firmware) and pays only flash time.

use crate::addr::{BlockId, ChannelId, DieId, Lpn, Ppn, VirtualTime};
use crate::buffer::{BufferState, Lookup};
use crate::error::DeviceError;
use crate::ftl::{Ftl, FtlCounters, WriteOutcome};
use crate::geometry::Geometry;
use crate::profile::Profile;
use crate::stamp::{ContentStamp, Instance};
use crate::timing::{BusyClocks, LinkDirection};
use crate::txn::state::Txn;
use serde::Serialize;

/// Whether pages hold real bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum DataMode {
    /// Pages keep their payloads (sparsely: zero pages cost nothing), so tasks compute on real
    /// data and reads return what was written.
    Payloads,
    /// Only mappings and timing are kept, for very large runs.
    TimingOnly,
}

/// Who issues an I/O, which decides the costs on its way to the flash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum IoPath {
    /// An NVMe command from the host: command handling plus a PCIe DMA.
    Host,
    /// The device itself (in-storage task, firmware): flash time only.
    Internal,
}

/// When an operation finished and where its latency went. The stages are sequential, so
/// `nvme_ns + dma_ns + flash_ns == done - submitted` always.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Completion {
    pub submitted: VirtualTime,
    pub done: VirtualTime,
    pub nvme_ns: u64,
    pub dma_ns: u64,
    /// Flash time including waiting for busy dies and channels (and RMW reads).
    pub flash_ns: u64,
}

impl Completion {
    pub fn latency_ns(&self) -> u64 {
        self.done.since(self.submitted)
    }
}

/// I/O counters at the device's interfaces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct IoCounters {
    pub host_commands: u64,
    pub host_bytes_read: u64,
    pub host_bytes_written: u64,
    pub internal_bytes_read: u64,
    pub internal_bytes_written: u64,
    /// Page reads that reached the flash array (unmapped pages do not).
    pub flash_page_reads: u64,
    /// Page programs for user data (GC copybacks are counted by the FTL).
    pub flash_page_programs: u64,
    /// Partial-page writes that had to read the old page first.
    pub read_modify_writes: u64,
    /// Partial-page writes a byte-addressable medium stored in place: only the program
    /// units they touch, nothing read (`timing.program_unit_bytes`).
    #[serde(default, skip_serializing_if = "crate::timing::is_zero")]
    pub partial_stores: u64,
    /// Host pages read or written in the firmware's data buffer without touching the flash
    /// (profiles with a `[data_buffer]`).
    #[serde(default, skip_serializing_if = "crate::timing::is_zero")]
    pub data_buffer_hits: u64,
}

/// Everything counted on a device, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct DeviceCounters {
    pub io: IoCounters,
    pub ftl: FtlCounters,
    pub waf: f64,
}

/// The simulated SSD. See the module docs.
#[derive(Clone, Debug)]
pub struct Device {
    pub(crate) profile: Profile,
    pub(crate) ftl: Ftl,
    pub(crate) clocks: BusyClocks,
    pub(crate) counters: IoCounters,
    /// `channel_of[die]`, precomputed: the hot path avoids a division per page.
    pub(crate) channel_of: Vec<ChannelId>,
    /// TxISC snapshots, delta mappings and the task table (empty unless tasks run as
    /// transactions).
    pub(crate) txn: Txn,
    /// Writes held in the profile's power-loss-protected buffer until their programs finish.
    cache: Option<CacheState>,
    /// The pages in the firmware's DRAM data buffer, for profiles with one.
    buffer: Option<BufferState>,
    /// This device's identity in its [`ContentStamp`]s (a clone draws its own).
    instance: Instance,
}

/// The write buffer's occupancy: writes still waiting for their flash programs.
#[derive(Clone, Debug)]
struct CacheState {
    bytes: u64,
    accept_ns: u64,
    used: u64,
    /// (programs done, bytes), earliest first.
    draining: std::collections::BinaryHeap<std::cmp::Reverse<(VirtualTime, u64)>>,
}

impl CacheState {
    /// The earliest time from `t` at which `bytes` fit: earlier writes drain as their
    /// programs complete.
    fn admit(&mut self, mut t: VirtualTime, bytes: u64) -> VirtualTime {
        while let Some(&std::cmp::Reverse((done, b))) = self.draining.peek() {
            if done > t && self.used + bytes <= self.bytes {
                break;
            }
            t = t.max(done);
            self.used -= b;
            self.draining.pop();
        }
        t
    }

    fn hold(&mut self, until: VirtualTime, bytes: u64) {
        self.used += bytes;
        self.draining.push(std::cmp::Reverse((until, bytes)));
    }
}

impl Device {
    /// A fresh, erased device built from a profile.
    pub fn new(profile: &Profile, mode: DataMode) -> Result<Device, DeviceError> {
        profile
            .validate()
            .map_err(|(field, reason)| DeviceError::InvalidProfile { field, reason })?;
        let g = &profile.geometry;
        Ok(Device {
            ftl: Ftl::new(g, &profile.ftl, mode == DataMode::Payloads)?,
            clocks: BusyClocks::new(
                g.dies(),
                g.channels,
                g.page_size_bytes,
                &profile.timing,
                &profile.host_interface,
            ),
            channel_of: (0..g.dies()).map(|d| g.channel_of_die(DieId(d))).collect(),
            profile: profile.clone(),
            counters: IoCounters::default(),
            txn: Txn::default(),
            cache: profile.write_cache.as_ref().map(|c| CacheState {
                bytes: c.bytes,
                accept_ns: c.accept_ns,
                used: 0,
                draining: Default::default(),
            }),
            buffer: profile
                .data_buffer
                .as_ref()
                .map(|b| BufferState::new(g.dies(), b)),
            instance: Instance::fresh(),
        })
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    pub fn geometry(&self) -> &Geometry {
        &self.profile.geometry
    }

    pub fn page_size(&self) -> u64 {
        u64::from(self.profile.geometry.page_size_bytes)
    }

    pub fn logical_pages(&self) -> u64 {
        self.ftl.logical_pages()
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.logical_pages() * self.page_size()
    }

    /// Read-only view of the FTL (mappings, invariants, wear).
    pub fn ftl(&self) -> &Ftl {
        &self.ftl
    }

    /// The state of what reads return now: reads of the same addresses under equal stamps
    /// return the same bytes. `None` while a TxISC snapshot is registered: a read may then
    /// see the host's deltas, whose life this does not follow.
    pub fn content_stamp(&self) -> Option<ContentStamp> {
        if self.txn.has_snapshots() {
            return None;
        }
        let (seq, restores) = self.ftl.content_seq();
        Some(ContentStamp {
            instance: self.instance.0,
            seq,
            restores,
        })
    }

    /// Every invariant of the FTL and the transaction layer: O(device), for tests. (Debug
    /// builds already check what each mutation touched.)
    pub fn check_invariants(&self) -> Result<(), String> {
        self.ftl.check_invariants()?;
        self.txn.check()
    }

    pub fn counters(&self) -> DeviceCounters {
        let ftl = self.ftl.counters();
        DeviceCounters {
            io: self.counters,
            ftl,
            waf: ftl.waf(),
        }
    }

    /// When the last reserved resource falls idle.
    pub fn idle_at(&self) -> VirtualTime {
        self.clocks.horizon()
    }

    /// Forgets reservations and zeroes counters but keeps the data and mappings: measurement
    /// after preconditioning starts on an idle device at time zero.
    pub fn reset_measurements(&mut self) {
        self.clocks.reset();
        if let Some(c) = &mut self.cache {
            // The buffer's drain times belong to the old timeline.
            c.used = 0;
            c.draining.clear();
        }
        self.settle_data_buffer();
        self.counters = IoCounters::default();
        self.ftl.reset_counters();
    }

    /// Empties the firmware's data buffer as a device left idle, then restarted, has it: its
    /// dirty pages were programmed long before (none of it is booked). A cold measurement
    /// starts so: LightFS's cold runs read their metadata "from the flash" (§IV-C).
    pub fn settle_data_buffer(&mut self) {
        if let Some(b) = &mut self.buffer {
            b.settle();
        }
    }

    /// Dirty pages the firmware's data buffer holds (0 without one): written, acknowledged,
    /// not yet programmed.
    pub fn buffered_dirty_pages(&self) -> u64 {
        self.buffer.as_ref().map_or(0, BufferState::dirty)
    }

    pub fn pin_block(&mut self, block: BlockId) -> Result<(), DeviceError> {
        self.ftl.pin_block(block)
    }

    pub fn unpin_block(&mut self, block: BlockId) -> Result<(), DeviceError> {
        self.ftl.unpin_block(block)
    }

    /// Reads a physical page as it is on flash (stale copies included, until erased).
    pub fn read_physical(&self, ppn: Ppn, out: &mut [u8]) -> Result<(), DeviceError> {
        self.check_buffer(out.len(), self.page_size())?;
        self.ftl.read_physical(ppn, out)
    }

    /// Reads physical pages on the internal path, all issued at `at` (LightFS's metadata locker
    /// reads a locked file through its shadow address table this way). With `out` (data
    /// mode), fills it with the pages back to back; stale copies read as they are on flash.
    pub fn read_physical_pages(
        &mut self,
        at: VirtualTime,
        ppns: &[Ppn],
        mut out: Option<&mut [u8]>,
    ) -> Result<Completion, DeviceError> {
        let ps = self.page_size();
        if let Some(o) = &out {
            self.check_buffer(o.len(), ps * ppns.len() as u64)?;
            if !self.ftl.keeps_payloads() {
                return Err(DeviceError::PayloadsNotKept);
            }
        }
        let t0 = self.front_end(IoPath::Internal, at);
        let mut flash_done = t0;
        for (i, &ppn) in ppns.iter().enumerate() {
            if u64::from(ppn.0) >= self.profile.geometry.physical_pages() {
                return Err(DeviceError::PpnOutOfRange { ppn: ppn.0 });
            }
            if let Some(o) = out.as_deref_mut() {
                let at = i * ps as usize;
                self.ftl.read_physical(ppn, &mut o[at..at + ps as usize])?;
            }
            let die = self.profile.geometry.die_of(ppn);
            self.counters.flash_page_reads += 1;
            let done = self
                .clocks
                .read_page(die, self.channel_of[die.0 as usize], t0);
            flash_done = flash_done.max(done);
        }
        Ok(self.finish_read(IoPath::Internal, at, t0, flash_done, ps * ppns.len() as u64))
    }

    pub(crate) fn check_pages(&self, lpn: Lpn, pages: u64) -> Result<(), DeviceError> {
        let end = lpn.0.checked_add(pages).ok_or(DeviceError::LpnOutOfRange {
            lpn: lpn.0,
            logical_pages: self.logical_pages(),
        })?;
        if end > self.logical_pages() {
            return Err(DeviceError::LpnOutOfRange {
                lpn: lpn.0.max(self.logical_pages()),
                logical_pages: self.logical_pages(),
            });
        }
        Ok(())
    }

    fn check_bytes(&self, offset: u64, len: u64) -> Result<(), DeviceError> {
        let fits = offset
            .checked_add(len)
            .is_some_and(|end| end <= self.capacity_bytes());
        if fits {
            Ok(())
        } else {
            Err(DeviceError::ByteRangeOutOfRange {
                offset,
                len,
                capacity_bytes: self.capacity_bytes(),
            })
        }
    }

    pub(crate) fn check_buffer(&self, got: usize, expected: u64) -> Result<(), DeviceError> {
        if got as u64 == expected {
            Ok(())
        } else {
            Err(DeviceError::BufferSize {
                expected,
                got: got as u64,
            })
        }
    }

    /// Command handling before the flash is touched.
    fn front_end(&mut self, path: IoPath, at: VirtualTime) -> VirtualTime {
        match path {
            IoPath::Host => {
                self.counters.host_commands += 1;
                at.after(self.profile.host_interface.nvme_command_ns)
            }
            IoPath::Internal => at,
        }
    }

    /// The page holding `lpn` for the host and the firmware: the host's delta while a
    /// snapshot covers the LPN and the host wrote it, the L2P otherwise.
    #[inline]
    fn resolve(&self, lpn: Lpn) -> Result<Option<Ppn>, DeviceError> {
        if let Some((file, page)) = self.txn.flagged(lpn) {
            if let Some(ppn) = self.txn.host_page(file, page) {
                return Ok(Some(ppn));
            }
        }
        self.ftl.lookup(lpn)
    }

    fn flash_read_page(
        &mut self,
        lpn: Lpn,
        out: Option<&mut [u8]>,
        ready: VirtualTime,
    ) -> Result<VirtualTime, DeviceError> {
        let ppn = self.resolve(lpn)?;
        self.flash_read_ppn(ppn, out, ready)
    }

    /// Reads physical page `ppn` (`None`: unmapped, answered with zeros by the controller
    /// without touching flash) into `out` if given.
    pub(crate) fn flash_read_ppn(
        &mut self,
        ppn: Option<Ppn>,
        out: Option<&mut [u8]>,
        ready: VirtualTime,
    ) -> Result<VirtualTime, DeviceError> {
        let Some(ppn) = ppn else {
            if let Some(o) = out {
                o.fill(0);
            }
            return Ok(ready);
        };
        if let Some(o) = out {
            self.ftl.read_physical(ppn, o)?;
        }
        let die = self.profile.geometry.die_of(ppn);
        self.counters.flash_page_reads += 1;
        Ok(self
            .clocks
            .read_page(die, self.channel_of[die.0 as usize], ready))
    }

    /// Physical page `ppn`'s bytes into `out` without booking any time (`None`: unmapped,
    /// zeros). Data mode only.
    pub(crate) fn peek_ppn(&self, ppn: Option<Ppn>, out: &mut [u8]) -> Result<(), DeviceError> {
        match ppn {
            Some(ppn) => self.ftl.read_physical(ppn, out),
            None => {
                out.fill(0);
                Ok(())
            }
        }
    }

    /// Programs a delta page for `lpn` (the L2P is left alone); returns the page and when
    /// its program finished.
    pub(crate) fn program_delta(
        &mut self,
        lpn: Lpn,
        data: Option<&[u8]>,
        ready: VirtualTime,
    ) -> Result<(Ppn, VirtualTime), DeviceError> {
        let outcome = self.ftl.write_delta(lpn, data)?;
        Ok((outcome.ppn, self.book(outcome, ready, None)))
    }

    /// Programs `lpn`'s page: whole, or on a byte-addressable medium only the `stored` bytes
    /// of a partial page (whole program units), in place. The FTL remaps the page, its
    /// mapping unit, either way: that is its bookkeeping; the medium's time is the store's.
    /// A page under a TxISC snapshot or task takes its out-of-place delta, a whole page.
    fn flash_write_page(
        &mut self,
        lpn: Lpn,
        data: Option<&[u8]>,
        ready: VirtualTime,
        stored: Option<u64>,
    ) -> Result<VirtualTime, DeviceError> {
        if let Some((file, page)) = self.txn.flagged(lpn) {
            return self.host_delta_write(file, page, lpn, data, ready);
        }
        let outcome = self.ftl.write(lpn, data)?;
        Ok(self.book(outcome, ready, stored))
    }

    /// Books a write's program on its die and channel (a whole page, or `stored` bytes in
    /// place), then the GC it triggered.
    fn book(
        &mut self,
        outcome: WriteOutcome,
        ready: VirtualTime,
        stored: Option<u64>,
    ) -> VirtualTime {
        let channel = self.channel_of[outcome.die.0 as usize];
        let done = match stored {
            Some(bytes) => self.clocks.store_bytes(outcome.die, channel, ready, bytes),
            None => self.clocks.program_page(outcome.die, channel, ready),
        };
        if let Some(gc) = outcome.gc {
            // Foreground GC occupies the die after this program; later I/O to it waits.
            self.clocks.collect_garbage(&gc, done);
        }
        self.counters.flash_page_programs += 1;
        done
    }

    /// How the data buffer takes `lpn` for a command on `path`: `None` where the page
    /// bypasses it (no buffer, the firmware's own I/O, a page under a TxISC snapshot), after
    /// dropping a buffered copy such a write makes stale.
    fn buffered(&mut self, path: IoPath, lpn: Lpn, write: bool) -> Option<Lookup> {
        let buffer = self.buffer.as_mut()?;
        if path == IoPath::Host && self.txn.flagged(lpn).is_none() {
            let lookup = buffer.access(lpn, write);
            if lookup == Lookup::Hit {
                self.counters.data_buffer_hits += 1;
            }
            return Some(lookup);
        }
        if write {
            buffer.forget(lpn);
        }
        None
    }

    /// When a page's data-buffer entry is free from `at`: after the program of the dirty page
    /// a miss evicted (the firmware chains the new transfer behind it), else at once.
    fn entry_free(
        &mut self,
        lookup: Option<Lookup>,
        at: VirtualTime,
    ) -> Result<VirtualTime, DeviceError> {
        let Some(Lookup::Miss { evicted: Some(lpn) }) = lookup else {
            return Ok(at);
        };
        // A page trimmed since it was buffered has nothing left to program.
        let Some(ppn) = self.resolve(lpn)? else {
            return Ok(at);
        };
        let die = self.profile.geometry.die_of(ppn);
        self.counters.flash_page_programs += 1;
        Ok(self
            .clocks
            .program_page(die, self.channel_of[die.0 as usize], at))
    }

    /// A host write of `lpn` into the data buffer, whose data is there at `ready`: the FTL
    /// maps the page now (so reads return it), and its program waits for its eviction. GC the
    /// write triggers runs now.
    fn buffer_write_page(
        &mut self,
        lpn: Lpn,
        data: Option<&[u8]>,
        ready: VirtualTime,
    ) -> Result<VirtualTime, DeviceError> {
        let outcome = self.ftl.write(lpn, data)?;
        if let Some(gc) = outcome.gc {
            self.clocks.collect_garbage(&gc, ready);
        }
        Ok(ready)
    }

    /// Reads `pages` logical pages starting at `lpn`. With `out`, fills it with their bytes
    /// (`pages × page_size` bytes; data mode only).
    pub fn read(
        &mut self,
        path: IoPath,
        at: VirtualTime,
        lpn: Lpn,
        pages: u64,
        out: Option<&mut [u8]>,
    ) -> Result<Completion, DeviceError> {
        self.check_pages(lpn, pages)?;
        let ps = self.page_size();
        self.read_ranges(path, at, &[(lpn.0 * ps, pages * ps)], out)
    }

    fn finish_read(
        &mut self,
        path: IoPath,
        at: VirtualTime,
        t0: VirtualTime,
        flash_done: VirtualTime,
        bytes: u64,
    ) -> Completion {
        let done = match path {
            IoPath::Host => {
                self.counters.host_bytes_read += bytes;
                self.clocks.dma(LinkDirection::ToHost, flash_done, bytes)
            }
            IoPath::Internal => {
                self.counters.internal_bytes_read += bytes;
                flash_done
            }
        };
        Completion {
            submitted: at,
            done,
            nvme_ns: t0.since(at),
            flash_ns: flash_done.since(t0),
            dma_ns: done.since(flash_done),
        }
    }

    /// The data-transfer stage of a write: host data crosses PCIe before it can be programmed.
    fn write_data_ready(&mut self, path: IoPath, t0: VirtualTime, bytes: u64) -> VirtualTime {
        match path {
            IoPath::Host => {
                self.counters.host_bytes_written += bytes;
                self.clocks.dma(LinkDirection::ToDevice, t0, bytes)
            }
            IoPath::Internal => {
                self.counters.internal_bytes_written += bytes;
                t0
            }
        }
    }

    /// Hints that `lpn` will be written or read soon (a request in the submission queue):
    /// see [`Ftl::prefetch`]. Changes nothing.
    #[inline]
    pub fn prefetch(&self, lpn: Lpn) {
        self.ftl.prefetch(lpn);
    }

    /// The second hint for a queued request, a few requests later: see
    /// [`Ftl::prefetch_mapping`]. Changes nothing.
    #[inline]
    pub fn prefetch_mapping(&self, lpn: Lpn) {
        self.ftl.prefetch_mapping(lpn);
    }

    /// Writes `pages` logical pages starting at `lpn`, out of place. In data mode `data` holds
    /// `pages × page_size` bytes (`None` writes zero pages); in timing-only mode it is ignored.
    ///
    /// Pages are written in order; if the device fills up mid-request, the pages before the
    /// failing one stay written (as on a real SSD).
    pub fn write(
        &mut self,
        path: IoPath,
        at: VirtualTime,
        lpn: Lpn,
        pages: u64,
        data: Option<&[u8]>,
    ) -> Result<Completion, DeviceError> {
        self.check_pages(lpn, pages)?;
        let ps = self.page_size();
        // Whole pages: no page is read-modify-written, so each is programmed as it comes,
        // without `write_ranges`' byte arithmetic (the path every page-level write and the
        // FTL benchmark take).
        let total = pages * ps;
        if let Some(d) = data {
            self.check_buffer(d.len(), total)?;
        }
        let front = self.write_front(path, at, total);
        let mut done = front.ready;
        for i in 0..pages {
            let page = Lpn(lpn.0 + i);
            let content = data.map(|d| &d[(i * ps) as usize..((i + 1) * ps) as usize]);
            let lookup = self.buffered(path, page, true);
            let start = self.entry_free(lookup, front.ready)?;
            let page_done = match lookup {
                Some(_) => self.buffer_write_page(page, content, start)?,
                None => self.flash_write_page(page, content, start, None)?,
            };
            done = done.max(page_done);
        }
        Ok(self.write_back(at, &front, done, total))
    }

    /// Reads `len` bytes at byte `offset` of the logical space (any alignment). With `out`
    /// (data mode), fills it.
    pub fn read_at(
        &mut self,
        path: IoPath,
        at: VirtualTime,
        offset: u64,
        len: u64,
        out: Option<&mut [u8]>,
    ) -> Result<Completion, DeviceError> {
        self.read_ranges(path, at, &[(offset, len)], out)
    }

    /// Reads several `(offset, len)` byte ranges as one request (scatter-gather: one NVMe
    /// command, one DMA), all issued at `at` so their pages are read in parallel. With `out`
    /// (data mode), fills it with the ranges back to back.
    pub fn read_ranges(
        &mut self,
        path: IoPath,
        at: VirtualTime,
        ranges: &[(u64, u64)],
        out: Option<&mut [u8]>,
    ) -> Result<Completion, DeviceError> {
        let total = self.check_ranges(ranges)?;
        if let Some(o) = &out {
            self.check_buffer(o.len(), total)?;
            if !self.ftl.keeps_payloads() {
                return Err(DeviceError::PayloadsNotKept);
            }
        }
        let ps = self.page_size();
        let t0 = self.front_end(path, at);
        let mut flash_done = t0;
        let mut scratch = Vec::new();
        let mut out = out;
        let mut base = 0u64;
        for &(offset, len) in ranges.iter().filter(|r| r.1 > 0) {
            for p in offset / ps..=(offset + len - 1) / ps {
                let lpn = Lpn(p);
                let (a, b) = page_span(p, ps, offset, len);
                let dst = (base + p * ps + a - offset) as usize;
                let lookup = self.buffered(path, lpn, false);
                // In the data buffer: the DMA moves it out of DRAM.
                if lookup == Some(Lookup::Hit) {
                    if let Some(o) = out.as_deref_mut() {
                        let ppn = self.resolve(lpn)?;
                        in_place(o, dst, (a, b), ps, &mut scratch, |buf| {
                            self.peek_ppn(ppn, buf)
                        })?;
                    }
                    continue;
                }
                let start = self.entry_free(lookup, t0)?;
                let done = match out.as_deref_mut() {
                    None => self.flash_read_page(lpn, None, start)?,
                    Some(o) => in_place(o, dst, (a, b), ps, &mut scratch, |buf| {
                        self.flash_read_page(lpn, Some(buf), start)
                    })?,
                };
                flash_done = flash_done.max(done);
            }
            base += len;
        }
        Ok(self.finish_read(path, at, t0, flash_done, total))
    }

    /// Physical page `ppn`'s bytes into `out` (one page, as [`Device::read_physical_pages`]
    /// takes them), without booking any time: for a caller that booked the read and takes
    /// the bytes later. Data mode only.
    pub fn peek_physical_page(&self, ppn: Ppn, out: &mut [u8]) -> Result<(), DeviceError> {
        self.check_buffer(out.len(), self.page_size())?;
        self.ftl.read_physical(ppn, out)
    }

    /// The bytes of `ranges` as [`Device::read_ranges`] would return them, without booking
    /// any time: for a caller that booked the read once and consumes the data in bounded
    /// chunks (an accelerator streaming a file). Data mode only.
    pub fn peek_ranges(&self, ranges: &[(u64, u64)], out: &mut [u8]) -> Result<(), DeviceError> {
        let total = self.check_ranges(ranges)?;
        self.check_buffer(out.len(), total)?;
        if !self.ftl.keeps_payloads() {
            return Err(DeviceError::PayloadsNotKept);
        }
        let ps = self.page_size();
        let mut scratch = Vec::new();
        let mut base = 0u64;
        for &(offset, len) in ranges.iter().filter(|r| r.1 > 0) {
            for p in offset / ps..=(offset + len - 1) / ps {
                let (a, b) = page_span(p, ps, offset, len);
                let dst = (base + p * ps + a - offset) as usize;
                let ppn = self.resolve(Lpn(p))?;
                in_place(out, dst, (a, b), ps, &mut scratch, |buf| {
                    self.peek_ppn(ppn, buf)
                })?;
            }
            base += len;
        }
        Ok(())
    }

    /// Checks every range and returns their total length.
    fn check_ranges(&self, ranges: &[(u64, u64)]) -> Result<u64, DeviceError> {
        let mut total = 0u64;
        for &(offset, len) in ranges {
            self.check_bytes(offset, len)?;
            total += len;
        }
        Ok(total)
    }

    /// Writes `len` bytes at byte `offset` (any alignment). Pages the range covers only partly
    /// are read-modify-written: the old page is read from flash first when it is mapped.
    pub fn write_at(
        &mut self,
        path: IoPath,
        at: VirtualTime,
        offset: u64,
        len: u64,
        data: Option<&[u8]>,
    ) -> Result<Completion, DeviceError> {
        self.write_ranges(path, at, &[(offset, len)], data)
    }

    /// Writes several `(offset, len)` byte ranges as one request (one NVMe command, one DMA);
    /// `data` (data mode) holds them back to back. Partly covered pages are
    /// read-modify-written.
    pub fn write_ranges(
        &mut self,
        path: IoPath,
        at: VirtualTime,
        ranges: &[(u64, u64)],
        data: Option<&[u8]>,
    ) -> Result<Completion, DeviceError> {
        let total = self.check_ranges(ranges)?;
        if let Some(d) = data {
            self.check_buffer(d.len(), total)?;
        }
        let ps = self.page_size();
        let payloads = self.ftl.keeps_payloads();
        let front = self.write_front(path, at, total);
        let ready = front.ready;
        let mut done = ready;
        let mut page = vec![0u8; if payloads { ps as usize } else { 0 }];
        let mut base = 0u64;
        for &(offset, len) in ranges.iter().filter(|r| r.1 > 0) {
            for p in offset / ps..=(offset + len - 1) / ps {
                let lpn = Lpn(p);
                let (a, b) = page_span(p, ps, offset, len);
                let src =
                    (base + p * ps + a - offset) as usize..(base + p * ps + b - offset) as usize;
                let partial = a > 0 || b < ps;
                let lookup = self.buffered(path, lpn, true);
                let mut start = self.entry_free(lookup, ready)?;
                // PCM keeps the page's other bytes where they are: nothing is read.
                let stored = (partial && lookup.is_none())
                    .then(|| self.profile.timing.stored_bytes(a, b))
                    .flatten();
                // The rest of a page in the data buffer is merged there: nothing is read.
                let merged = partial && lookup == Some(Lookup::Hit);
                if stored.is_some() || merged {
                    if stored.is_some() {
                        self.counters.partial_stores += 1;
                    }
                    if payloads {
                        let ppn = self.resolve(lpn)?;
                        self.peek_ppn(ppn, &mut page)?;
                    }
                } else if partial && self.resolve(lpn)?.is_some() {
                    self.counters.read_modify_writes += 1;
                    let old = payloads.then_some(page.as_mut_slice());
                    start = self.flash_read_page(lpn, old, start)?;
                } else if partial {
                    page.fill(0);
                }
                let content = if !payloads {
                    None
                } else if partial {
                    match data {
                        Some(d) => page[a as usize..b as usize].copy_from_slice(&d[src]),
                        None => page[a as usize..b as usize].fill(0),
                    }
                    Some(page.as_slice())
                } else {
                    data.map(|d| &d[src])
                };
                let page_done = match lookup {
                    Some(_) => self.buffer_write_page(lpn, content, start)?,
                    None => self.flash_write_page(lpn, content, start, stored)?,
                };
                done = done.max(page_done);
            }
            base += len;
        }
        Ok(self.write_back(at, &front, done, total))
    }

    /// A write request up to its first program: the command, the DMA of its `total` bytes,
    /// and the write buffer's admission.
    fn write_front(&mut self, path: IoPath, at: VirtualTime, total: u64) -> WriteFront {
        let t0 = self.front_end(path, at);
        let transferred = self.write_data_ready(path, t0, total);
        // With a write buffer, programs start once it has room; the write is acknowledged
        // when the buffer holds it, not when the programs finish.
        let (ready, acked) = match self.cache.as_mut() {
            Some(c) => {
                let admitted = c.admit(transferred, total);
                (admitted, Some(admitted.after(c.accept_ns)))
            }
            None => (transferred, None),
        };
        WriteFront {
            t0,
            transferred,
            ready,
            acked,
        }
    }

    /// A write request's completion once its programs end at `done`: the write buffer holds
    /// them, and acknowledges the request at admission.
    fn write_back(
        &mut self,
        at: VirtualTime,
        front: &WriteFront,
        mut done: VirtualTime,
        total: u64,
    ) -> Completion {
        if let (Some(c), Some(acked)) = (self.cache.as_mut(), front.acked) {
            c.hold(done, total);
            done = acked;
        }
        Completion {
            submitted: at,
            done,
            nvme_ns: front.t0.since(at),
            dma_ns: front.transferred.since(front.t0),
            flash_ns: done.since(front.transferred),
        }
    }

    /// A host-link transfer of `bytes` that is not a block I/O (task arguments to the device,
    /// results to the host): books the link's direction `dir` and returns when the DMA
    /// completes.
    pub fn host_transfer(&mut self, dir: LinkDirection, at: VirtualTime, bytes: u64) -> Completion {
        let done = self.clocks.dma(dir, at, bytes);
        Completion {
            submitted: at,
            done,
            nvme_ns: 0,
            dma_ns: done.since(at),
            flash_ns: 0,
        }
    }

    /// Deallocates `pages` logical pages (NVMe Dataset Management / TRIM).
    pub fn trim(
        &mut self,
        path: IoPath,
        at: VirtualTime,
        lpn: Lpn,
        pages: u64,
    ) -> Result<Completion, DeviceError> {
        self.check_pages(lpn, pages)?;
        let t0 = self.front_end(path, at);
        let mut done = t0;
        for i in 0..pages {
            let lpn = Lpn(lpn.0 + i);
            if let Some(b) = &mut self.buffer {
                b.forget(lpn);
            }
            match self.txn.flagged(lpn) {
                // Inside a snapshot a trim is a host write of zeros: the host reads zeros,
                // tasks keep their snapshot, and a task that changed the page conflicts.
                Some((file, page)) => {
                    done = done.max(self.host_delta_write(file, page, lpn, None, t0)?);
                }
                None => {
                    self.ftl.trim(lpn)?;
                }
            }
        }
        Ok(Completion {
            submitted: at,
            done,
            nvme_ns: t0.since(at),
            dma_ns: 0,
            flash_ns: done.since(t0),
        })
    }
}

/// Reads one page for a caller's buffer `out`, of which the page's bytes `a..b` fill
/// `out[dst..]`: a whole page is read straight into `out` (this copy is the hot path of every
/// task's file read), a partial one through a page of `scratch`. Returns what `read` does.
pub(crate) fn in_place<R, E>(
    out: &mut [u8],
    dst: usize,
    (a, b): (u64, u64),
    ps: u64,
    scratch: &mut Vec<u8>,
    read: impl FnOnce(&mut [u8]) -> Result<R, E>,
) -> Result<R, E> {
    if b - a == ps {
        return read(&mut out[dst..dst + ps as usize]);
    }
    scratch.resize(ps as usize, 0);
    let r = read(scratch)?;
    out[dst..dst + (b - a) as usize].copy_from_slice(&scratch[a as usize..b as usize]);
    Ok(r)
}

/// Where a write request stands when its programs may start ([`Device::write_front`]).
struct WriteFront {
    /// The command handled.
    t0: VirtualTime,
    /// Its data on the device.
    transferred: VirtualTime,
    /// Programs may start (the write buffer has room).
    ready: VirtualTime,
    /// When the write buffer acknowledges it, if there is one.
    acked: Option<VirtualTime>,
}

/// The byte span `[a, b)` inside page `p` that the range `offset..offset+len` covers.
fn page_span(p: u64, ps: u64, offset: u64, len: u64) -> (u64, u64) {
    let start = p * ps;
    let a = offset.max(start) - start;
    let b = (offset + len).min(start + ps) - start;
    (a, b)
}
