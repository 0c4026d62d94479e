//! Flash and host-interface timing: latencies from the profile, and per-resource busy-until
//! clocks in virtual time (the FEMU approach).
//!
//! An operation reserves the resources it needs in the order it needs them; requests on
//! different dies therefore overlap, requests on one die serialize, and dies sharing a channel
//! contend for its transfers. There is no event loop and no async runtime here: reserving is a
//! handful of comparisons, which is what makes millions of simulated operations per second
//! possible.
//!
//! Dies are FIFO busy-until clocks: a die executes its commands in order. Channels and the
//! host link are [`Timeline`]s that remember their reserved intervals, because their users
//! book them at different offsets into the future: a read books its channel transfer after the
//! page is sensed (tens of µs ahead), and its DMA after that. With a plain busy-until clock a
//! write issued a microsecond later would queue behind that future transfer although the bus
//! is idle until then; a timeline lets it use the gap.
//!
//! The host link has one timeline per direction: PCIe is dual-simplex (each lane is a pair of
//! differential pairs, one each way), so a read's data flowing to the host never waits for a
//! write's flowing to the device. A profile whose link is simplex (`host_interface.simplex`,
//! ISPFS's FMC connector) shares one timeline between them.

use crate::addr::{ChannelId, DieId, VirtualTime};
use crate::ftl::GcWork;
use serde::{Deserialize, Serialize};

/// NAND array timing, from a profile's `[timing]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlashTiming {
    pub page_read_ns: u64,
    pub page_program_ns: u64,
    pub block_erase_ns: u64,
    /// Bytes per second one channel (flash bus) moves between a die and the controller.
    pub channel_bytes_per_sec: u64,
    /// Emulation platforms only (FEMU-style, flash backed by DRAM): bytes per second one
    /// page moves between the backing store and the firmware's buffer. The copy runs beside
    /// the emulated NAND latency, so it shows only when flash timing is off (TxISC §V-B),
    /// where it is the "hardware" that bounds deep queues. 0: not an emulation platform.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub backend_bytes_per_sec: u64,
    /// Byte-addressable media only (PCM): the smallest unit the medium programs in place.
    /// A write that covers part of a page then programs the units it touches, at the page's
    /// program rate, and reads nothing: the page's other bytes stay where they are. 0 (NAND):
    /// a partial page is read, merged and programmed whole.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub program_unit_bytes: u64,
}

impl FlashTiming {
    /// The bytes a partial-page write programs on a byte-addressable medium: the program
    /// units that `a..b` (offsets within one page) touches; `None` on NAND.
    pub fn stored_bytes(&self, a: u64, b: u64) -> Option<u64> {
        let unit = self.program_unit_bytes;
        (unit > 0).then(|| b.div_ceil(unit) * unit - a / unit * unit)
    }
}

/// For `skip_serializing_if`: a cost of 0 is a cost the profile does not model.
pub(crate) fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Host interface costs, from a profile's `[host_interface]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostInterface {
    /// Human-readable link description, e.g. "NVMe over PCIe 3.0 x8".
    pub link: String,
    /// Controller firmware cost of handling one NVMe command (fetch, parse, complete).
    pub nvme_command_ns: u64,
    /// Firmware cores that handle NVMe commands: commands arriving together queue for them
    /// (an NDP offload sends one command per file under frag-s, frag-m and FSR).
    #[serde(default = "one_core")]
    pub command_cores: u32,
    /// Fixed latency a command pays on the link (doorbell, descriptor fetch, completion write).
    pub pcie_command_ns: u64,
    /// Effective DMA bandwidth of the link in each direction, shared by all commands moving
    /// data that way.
    pub pcie_bytes_per_sec: u64,
    /// Both directions share the link's one data path (ISPFS's FMC connector), rather than a
    /// path each way as PCIe has. Absent: full duplex. (Always written out, so `csd repro
    /// --set` can name it on any profile.)
    #[serde(default)]
    pub simplex: bool,
}

/// Which way a DMA moves data over the host link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkDirection {
    /// Host memory to the device: written data, commands' arguments, layouts, paths.
    ToDevice,
    /// The device to host memory: read data, a task's results.
    ToHost,
}

fn one_core() -> u32 {
    1
}

/// A power-loss-protected DRAM write buffer, from a profile's optional `[write_cache]` table:
/// a write is durable, and acknowledged, once the buffer holds it; its flash programs run
/// behind. When the buffer is full, a write waits for earlier programs to drain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteCache {
    pub bytes: u64,
    /// Firmware time to accept a write into the buffer.
    pub accept_ns: u64,
}

/// Nanoseconds to move `bytes` at `bytes_per_sec`, rounded up so no transfer is free.
pub fn transfer_ns(bytes: u64, bytes_per_sec: u64) -> u64 {
    debug_assert!(bytes_per_sec > 0);
    let ns = (u128::from(bytes) * 1_000_000_000).div_ceil(u128::from(bytes_per_sec));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Reserved intervals of a shared resource, so a later request can use an earlier idle gap.
///
/// Requests reach a resource out of time order: a read books its DMA at its future flash
/// completion, a design's background work (a `sync`'s writes, an index written after a
/// close) books the device ahead of the host's clock, and the host's next request, earlier,
/// must still find the gaps between those bookings, as a link or channel idle then would
/// serve it. So bookings are not dropped by time, only by number: the latest
/// [`TIMELINE_BOOKINGS_MAX`] are kept. (Until 30 November bookings that ended before the
/// latest submission were dropped and nothing could be booked before them: a request the
/// host submitted after a background chain reached further waited for the chain's past.)
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    busy: std::collections::VecDeque<(u64, u64)>,
}

/// Most bookings a [`Timeline`] remembers. Beyond it the two earliest merge, giving up the gap
/// between them: lookups stay O(log bound) even when a caller submits a burst at one instant,
/// at the price of not back-filling gaps that far in the past of the booking horizon.
pub const TIMELINE_BOOKINGS_MAX: usize = 64;

impl Timeline {
    /// Books `duration_ns` at the earliest time ≥ `at` the resource is free for that long.
    /// Returns the start of the booking.
    pub fn reserve(&mut self, at: VirtualTime, duration_ns: u64) -> VirtualTime {
        let mut start = at.0;
        if duration_ns == 0 {
            return VirtualTime(start);
        }
        match self.busy.back_mut() {
            // Common cases: nothing booked beyond `start`.
            None => self
                .busy
                .push_back((start, start.saturating_add(duration_ns))),
            Some(last) if last.1 == start => last.1 = start.saturating_add(duration_ns),
            Some(last) if last.1 < start => self
                .busy
                .push_back((start, start.saturating_add(duration_ns))),
            Some(_) => {
                // The first booking still busy at `start`, then the first gap long enough.
                let mut slot = self.busy.partition_point(|&(_, e)| e <= start);
                while let Some(&(s, e)) = self.busy.get(slot) {
                    if s >= start.saturating_add(duration_ns) {
                        break;
                    }
                    start = start.max(e);
                    slot += 1;
                }
                let end = start.saturating_add(duration_ns);
                // Coalesce with touching neighbours so back-to-back bookings stay one interval.
                let joins_prev = slot > 0 && self.busy[slot - 1].1 == start;
                let joins_next = slot < self.busy.len() && self.busy[slot].0 == end;
                match (joins_prev, joins_next) {
                    (true, true) => {
                        self.busy[slot - 1].1 = self.busy[slot].1;
                        self.busy.remove(slot);
                    }
                    (true, false) => self.busy[slot - 1].1 = end,
                    (false, true) => self.busy[slot].0 = start,
                    (false, false) => self.busy.insert(slot, (start, end)),
                }
            }
        }
        if self.busy.len() > TIMELINE_BOOKINGS_MAX {
            let (first_start, _) = self.busy.pop_front().expect("over the bound");
            self.busy.front_mut().expect("over the bound").0 = first_start;
        }
        debug_assert!(self
            .busy
            .iter()
            .zip(self.busy.iter().skip(1))
            .all(|(x, y)| x.1 <= y.0));
        VirtualTime(start)
    }

    /// When the last booking ends.
    pub fn horizon(&self) -> VirtualTime {
        VirtualTime(self.busy.back().map_or(0, |&(_, e)| e))
    }
}

/// Busy-until clocks of every die; timelines of every channel and of the host link.
#[derive(Clone, Debug)]
pub struct BusyClocks {
    die_free: Vec<VirtualTime>,
    channels: Vec<Timeline>,
    /// The host link's two directions; a simplex link uses only `to_device`.
    to_device: Timeline,
    to_host: Timeline,
    simplex: bool,
    page_read_ns: u64,
    page_program_ns: u64,
    block_erase_ns: u64,
    page_transfer_ns: u64,
    channel_bytes_per_sec: u64,
    page_size_bytes: u64,
    pcie_command_ns: u64,
    pcie_bytes_per_sec: u64,
}

impl BusyClocks {
    pub fn new(
        dies: u32,
        channels: u32,
        page_size_bytes: u32,
        timing: &FlashTiming,
        host: &HostInterface,
    ) -> Self {
        BusyClocks {
            die_free: vec![VirtualTime::ZERO; dies as usize],
            channels: vec![Timeline::default(); channels as usize],
            to_device: Timeline::default(),
            to_host: Timeline::default(),
            simplex: host.simplex,
            page_read_ns: timing.page_read_ns,
            page_program_ns: timing.page_program_ns,
            block_erase_ns: timing.block_erase_ns,
            page_transfer_ns: transfer_ns(u64::from(page_size_bytes), timing.channel_bytes_per_sec),
            channel_bytes_per_sec: timing.channel_bytes_per_sec,
            page_size_bytes: u64::from(page_size_bytes),
            pcie_command_ns: host.pcie_command_ns,
            pcie_bytes_per_sec: host.pcie_bytes_per_sec,
        }
    }

    /// Page read: the die senses the page into its data register, then the channel moves it
    /// out. With ONFI's cache read the page passes to the cache register as its transfer
    /// starts, so the die senses the next page while this one crosses the channel: a die
    /// reading back to back is busy t_read per page, not t_read + transfer.
    pub fn read_page(&mut self, die: DieId, channel: ChannelId, at: VirtualTime) -> VirtualTime {
        let d = die.0 as usize;
        let sensed = at.max(self.die_free[d]).after(self.page_read_ns);
        let moving = self.channels[channel.0 as usize].reserve(sensed, self.page_transfer_ns);
        self.die_free[d] = moving;
        moving.after(self.page_transfer_ns)
    }

    /// Page program: the channel moves the data into the die's register (once the die is
    /// free to accept it), then the die programs it.
    pub fn program_page(&mut self, die: DieId, channel: ChannelId, at: VirtualTime) -> VirtualTime {
        self.program(
            die,
            channel,
            at,
            self.page_transfer_ns,
            self.page_program_ns,
        )
    }

    /// An in-place store of `bytes` (whole program units, less than a page) on a
    /// byte-addressable medium: a page program of only those bytes, the channel moving them
    /// and the die programming them at the page's rate.
    pub fn store_bytes(
        &mut self,
        die: DieId,
        channel: ChannelId,
        at: VirtualTime,
        bytes: u64,
    ) -> VirtualTime {
        let move_ns = transfer_ns(bytes, self.channel_bytes_per_sec);
        let program_ns = (u128::from(self.page_program_ns) * u128::from(bytes))
            .div_ceil(u128::from(self.page_size_bytes.max(1)));
        let program_ns = u64::try_from(program_ns).unwrap_or(u64::MAX);
        self.program(die, channel, at, move_ns, program_ns)
    }

    fn program(
        &mut self,
        die: DieId,
        channel: ChannelId,
        at: VirtualTime,
        move_ns: u64,
        program_ns: u64,
    ) -> VirtualTime {
        let d = die.0 as usize;
        let loaded = self.channels[channel.0 as usize]
            .reserve(at.max(self.die_free[d]), move_ns)
            .after(move_ns);
        let done = loaded.after(program_ns);
        self.die_free[d] = done;
        done
    }

    /// Charges a GC pass to its die, after `at`: every migrated page is a copyback (read into
    /// the die's register, program from it; the channel is not used), then the erases.
    pub fn collect_garbage(&mut self, work: &GcWork, at: VirtualTime) -> VirtualTime {
        let d = work.die as usize;
        let busy_ns = u64::from(work.pages_migrated) * (self.page_read_ns + self.page_program_ns)
            + u64::from(work.blocks_erased) * self.block_erase_ns;
        let done = at.max(self.die_free[d]).after(busy_ns);
        self.die_free[d] = done;
        done
    }

    pub fn erase_block(&mut self, die: DieId, at: VirtualTime) -> VirtualTime {
        let d = die.0 as usize;
        let done = at.max(self.die_free[d]).after(self.block_erase_ns);
        self.die_free[d] = done;
        done
    }

    /// A DMA of `bytes` over the host link in direction `dir`, starting no earlier than `at`;
    /// returns when it completes, including the wait for the link and the per-command latency.
    pub fn dma(&mut self, dir: LinkDirection, at: VirtualTime, bytes: u64) -> VirtualTime {
        let stream_ns = transfer_ns(bytes, self.pcie_bytes_per_sec);
        let link = match dir {
            LinkDirection::ToHost if !self.simplex => &mut self.to_host,
            _ => &mut self.to_device,
        };
        // The per-command latency is pipelined: it does not occupy the link's bandwidth.
        link.reserve(at, stream_ns)
            .after(stream_ns + self.pcie_command_ns)
    }

    /// The latest time any resource is busy until: when the device falls idle.
    pub fn horizon(&self) -> VirtualTime {
        let dies = self
            .die_free
            .iter()
            .copied()
            .max()
            .unwrap_or(VirtualTime::ZERO);
        let channels = self
            .channels
            .iter()
            .map(Timeline::horizon)
            .max()
            .unwrap_or(VirtualTime::ZERO);
        dies.max(channels)
            .max(self.to_device.horizon())
            .max(self.to_host.horizon())
    }

    /// Forgets all reservations (used after preconditioning, so measurements start idle).
    pub fn reset(&mut self) {
        self.die_free.fill(VirtualTime::ZERO);
        self.channels.fill(Timeline::default());
        self.to_device = Timeline::default();
        self.to_host = Timeline::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clocks() -> BusyClocks {
        let t = FlashTiming {
            page_read_ns: 80_000,
            page_program_ns: 400_000,
            block_erase_ns: 4_000_000,
            channel_bytes_per_sec: 1_000_000_000,
            backend_bytes_per_sec: 0,
            program_unit_bytes: 0,
        };
        let h = HostInterface {
            link: "test".into(),
            nvme_command_ns: 1_000,
            command_cores: 1,
            pcie_command_ns: 500,
            pcie_bytes_per_sec: 4_000_000_000,
            simplex: false,
        };
        BusyClocks::new(4, 2, 4096, &t, &h)
    }

    /// PCIe is dual-simplex: data to the host does not wait for data to the device. The FMC
    /// link ISPFS runs over is simplex, and there the two take turns.
    #[test]
    fn a_duplex_link_moves_both_ways_at_once() {
        let at = VirtualTime::ZERO;
        let one_way = 1_000_000 + 500; // 4 MB at 4 GB/s, and the command latency
        let mut c = clocks();
        assert_eq!(c.dma(LinkDirection::ToDevice, at, 4_000_000).ns(), one_way);
        assert_eq!(c.dma(LinkDirection::ToHost, at, 4_000_000).ns(), one_way);
        assert_eq!(
            c.dma(LinkDirection::ToHost, at, 4_000_000).ns(),
            one_way + 1_000_000,
            "one direction is still shared"
        );
        c.simplex = true;
        c.reset();
        assert_eq!(c.dma(LinkDirection::ToDevice, at, 4_000_000).ns(), one_way);
        assert_eq!(
            c.dma(LinkDirection::ToHost, at, 4_000_000).ns(),
            one_way + 1_000_000
        );
    }

    #[test]
    fn transfer_rounds_up() {
        assert_eq!(transfer_ns(4096, 1_000_000_000), 4096);
        assert_eq!(transfer_ns(1, 3_000_000_000), 1);
        assert_eq!(transfer_ns(0, 3), 0);
    }

    #[test]
    fn same_die_serializes_and_other_die_overlaps() {
        let mut c = clocks();
        let a = c.read_page(DieId(0), ChannelId(0), VirtualTime::ZERO);
        let b = c.read_page(DieId(0), ChannelId(0), VirtualTime::ZERO);
        assert_eq!(a.ns(), 80_000 + 4096);
        // Cache read: the second sense starts as the first page's transfer does.
        assert_eq!(b.ns(), 2 * 80_000 + 4096);
        // Die 2 is on channel 1: fully parallel with die 0.
        let d = c.read_page(DieId(2), ChannelId(1), VirtualTime::ZERO);
        assert_eq!(d.ns(), 80_000 + 4096);
    }

    #[test]
    fn dies_on_one_channel_share_its_transfers() {
        let mut c = clocks();
        let a = c.read_page(DieId(0), ChannelId(0), VirtualTime::ZERO);
        let b = c.read_page(DieId(1), ChannelId(0), VirtualTime::ZERO);
        assert_eq!(a.ns(), 84_096);
        assert_eq!(
            b.ns(),
            84_096 + 4096,
            "second transfer waits for the channel"
        );
    }

    #[test]
    fn program_then_erase_serialize_on_die() {
        let mut c = clocks();
        let p = c.program_page(DieId(1), ChannelId(0), VirtualTime::ZERO);
        assert_eq!(p.ns(), 4096 + 400_000);
        let e = c.erase_block(DieId(1), VirtualTime::ZERO);
        assert_eq!(e.ns(), p.ns() + 4_000_000);
        let work = GcWork {
            die: 1,
            pages_migrated: 3,
            blocks_erased: 1,
        };
        let g = c.collect_garbage(&work, VirtualTime::ZERO);
        assert_eq!(g.ns(), e.ns() + 3 * 480_000 + 4_000_000);
        assert_eq!(c.horizon(), g);
    }

    #[test]
    fn a_transfer_uses_an_idle_gap_before_a_future_booking() {
        let mut c = clocks();
        // Die 0 reads: its transfer is booked on channel 0 at 80 µs.
        let r = c.read_page(DieId(0), ChannelId(0), VirtualTime::ZERO);
        assert_eq!(r.ns(), 84_096);
        // Die 1 (same channel) programs at 1 µs: the channel is idle until 80 µs.
        let p = c.program_page(DieId(1), ChannelId(0), VirtualTime(1_000));
        assert_eq!(p.ns(), 1_000 + 4096 + 400_000);
        // A third transfer that does not fit before 80 µs goes after the booked one.
        let mut t = Timeline::default();
        let z = VirtualTime::ZERO;
        assert_eq!(t.reserve(VirtualTime(80), 10).ns(), 80);
        assert_eq!(t.reserve(z, 50).ns(), 0);
        assert_eq!(t.reserve(z, 40).ns(), 90, "30 ns gap too small");
        assert_eq!(t.reserve(VirtualTime(50), 30).ns(), 50, "exact fit");
        assert_eq!(t.horizon().ns(), 130);
        // A booking far ahead leaves the gaps before it to requests that arrive later but
        // start earlier, as background work booked ahead of the host's clock does.
        assert_eq!(t.reserve(VirtualTime(1_000), 5).ns(), 1_000);
        assert_eq!(t.reserve(VirtualTime(140), 5).ns(), 140);
        assert_eq!(t.reserve(z, 5).ns(), 130);
        assert_eq!(t.reserve(VirtualTime(500), 5).ns(), 500);
    }

    #[test]
    fn a_burst_at_one_instant_keeps_the_timeline_bounded() {
        let mut t = Timeline::default();
        let z = VirtualTime::ZERO;
        // Bookings with gaps, all submitted at time zero, in reverse order of start.
        for i in (0..1_000u64).rev() {
            t.reserve(VirtualTime(i * 100), 10);
        }
        assert!(t.busy.len() <= TIMELINE_BOOKINGS_MAX);
        // Never overlapping, even after merges.
        assert!(t
            .busy
            .iter()
            .zip(t.busy.iter().skip(1))
            .all(|(a, b)| a.1 <= b.0));
        // Back-to-back bookings coalesce into one interval.
        let mut u = Timeline::default();
        for _ in 0..10_000 {
            u.reserve(z, 7);
        }
        assert_eq!(u.busy.len(), 1);
        assert_eq!(u.horizon().ns(), 70_000);
    }
}
