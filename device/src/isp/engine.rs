//! The ISP engine's timing (ISPFS §3.2–3.3, §4, Fig. 4): one finite-state machine per
//! instruction, beside the PCM data path, reading the file through the LPDDR2-NVM
//! controllers and comparing what they deliver.
//!
//! The engine's speed is not a parameter. It follows from the board:
//!
//! - One **access** fills every chip's row data buffer at once: the two controllers run in
//!   parallel (a 64-bit bus), each reading one group of two 16-bit chips in lockstep
//!   (§3.3). An access therefore moves `row_buffer_bytes × chips_per_group × controllers`
//!   bytes and takes as long as one chip takes to sense and burst one row buffer, which is
//!   `row_buffer_bytes / chip_read_bytes_per_sec` (§4: ~150 MB/s per chip at 250 MHz).
//! - The **comparators** take the delivered bytes at `comparator_bytes_per_cycle` per cycle
//!   of the fabric clock: a byte-serial 32-bit window compared against all four keywords in
//!   parallel, which is what matching at any byte alignment needs.
//! - The FSM **fetches, then compares**: it has no second buffer, so the two do not overlap.
//! - The FSM and the controllers run on **different clocks**, so a fetch's request and its
//!   data each cross between them through a synchroniser: `cdc_sync_cycles` cycles of the
//!   receiving clock each way, on top of the access.
//!
//! Before the first access the FSM decodes the instruction (`setup_cycles`) and reads the
//! file's inode and indirect blocks to find its physical addresses (ISPFS: "calculate the
//! file content's block address through the inode number"). So an instruction's time is a
//! constant plus a term linear in the bytes it covers.
//!
//! Host requests come first (§3.2: "read and write operations can preempt the LPDDR2-NVM
//! controller ... but the ISP engine continues running"): a host request waits at most for
//! the access in flight, and the engine's next fetch waits for the host's.

use serde::{Deserialize, Serialize};

/// The board's parameters the engine's timing follows from: a profile's `[isp]` table,
/// each value with its source under `[assumptions]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IspCosts {
    /// The LPDDR2-NVM interface clock the controllers run the chips at, MHz.
    pub controller_clock_mhz: f64,
    /// One PCM chip's data bus, bits.
    pub chip_bus_bits: u32,
    /// Chips read in lockstep as one wider bus (a group).
    pub chips_per_group: u32,
    /// Controllers reading in parallel, one group each at a time.
    pub controllers: u32,
    /// Bytes one chip's row data buffer holds: what one activation senses.
    pub row_buffer_bytes: u32,
    /// One chip's sequential read throughput, one row buffer at a time, bytes/s.
    pub chip_read_bytes_per_sec: u64,
    /// The clock of the engine's state machines and comparators, MHz.
    pub fabric_clock_mhz: f64,
    /// Bytes the comparators take per fabric cycle.
    pub comparator_bytes_per_cycle: u32,
    /// Fabric cycles to decode an instruction and start its FSM.
    pub setup_cycles: u32,
    /// Synchroniser stages a signal passes crossing between the fabric and controller
    /// clocks, counted in cycles of the receiving clock: a read request crosses into the
    /// controller's domain, its data back into the fabric's. Profiles written before it
    /// existed read as 0 (crossings free), so runs saved then re-run unchanged.
    #[serde(default)]
    pub cdc_sync_cycles: u32,
    /// How long an application waits between reads of the command file's status, ns.
    pub poll_interval_ns: u64,
    /// The EXT4-like path's CPU time per block request: the generic block layer, the I/O
    /// scheduler and the RAM-disk driver, ns.
    pub block_request_ns: u64,
    /// The largest read the EXT4-like path's readahead issues, bytes.
    pub readahead_bytes: u64,
    /// The host memory its kernel and user space keep resident, which neither the page
    /// cache nor a RAM disk can use, bytes.
    pub host_resident_bytes: u64,
    /// How fast the host CPU moves bytes to and from the board with its own loads and
    /// stores (programmed I/O: no DMA engine serves the board), bytes/s. Profiles written
    /// before it existed read as 0: not bounded.
    #[serde(default)]
    pub host_pio_bytes_per_sec: u64,
}

impl IspCosts {
    /// The host CPU's programmed I/O of `bytes` to or from the board, ns (0 when not
    /// bounded).
    pub fn pio_ns(&self, bytes: u64) -> f64 {
        match self.host_pio_bytes_per_sec {
            0 => 0.0,
            rate => bytes as f64 * 1e9 / rate as f64,
        }
    }

    /// Checks the values; returns `(field, reason)`.
    pub fn check(&self) -> Result<(), (String, String)> {
        for (field, v) in [
            ("controller_clock_mhz", self.controller_clock_mhz),
            ("fabric_clock_mhz", self.fabric_clock_mhz),
        ] {
            if !(v > 0.0 && v <= 100_000.0) {
                return Err((
                    format!("isp.{field}"),
                    "must be between 0 and 100,000 MHz".into(),
                ));
            }
        }
        for (field, v) in [
            ("chip_bus_bits", u64::from(self.chip_bus_bits)),
            ("chips_per_group", u64::from(self.chips_per_group)),
            ("controllers", u64::from(self.controllers)),
            ("row_buffer_bytes", u64::from(self.row_buffer_bytes)),
            ("chip_read_bytes_per_sec", self.chip_read_bytes_per_sec),
            (
                "comparator_bytes_per_cycle",
                u64::from(self.comparator_bytes_per_cycle),
            ),
            ("readahead_bytes", self.readahead_bytes),
        ] {
            if v == 0 {
                return Err((format!("isp.{field}"), "must be greater than 0".into()));
            }
        }
        if self.chips_per_group > 64 || self.controllers > 64 || self.row_buffer_bytes > 1 << 20 {
            return Err((
                "isp".into(),
                "chips_per_group and controllers must be at most 64, row_buffer_bytes at most 1 MiB"
                    .into(),
            ));
        }
        if self.host_pio_bytes_per_sec > 0 && self.host_pio_bytes_per_sec < 1 << 10 {
            return Err((
                "isp.host_pio_bytes_per_sec".into(),
                "must be 0 (not bounded) or at least 1 KiB/s".into(),
            ));
        }
        if self.cdc_sync_cycles > 16 {
            return Err((
                "isp.cdc_sync_cycles".into(),
                "must be at most 16 (a synchroniser has two or three stages)".into(),
            ));
        }
        // A chip cannot deliver faster than its bus: the burst alone bounds the access.
        let e = Engine::new(self);
        if e.burst_ns() > e.access_ns() {
            return Err((
                "isp.chip_read_bytes_per_sec".into(),
                format!(
                    "{} B/s is faster than a {}-bit DDR bus at {} MHz carries",
                    self.chip_read_bytes_per_sec, self.chip_bus_bits, self.controller_clock_mhz
                ),
            ));
        }
        Ok(())
    }
}

/// Bytes of an inode as the engine reads it, and of one indirect block of 4-byte block
/// pointers (ISPFS is built on EXT2: 4 KiB blocks, 12 direct pointers).
pub const INODE_BYTES: u64 = 128;
pub const BLOCK_BYTES: u64 = 4096;
const DIRECT_POINTERS: u64 = 12;
const POINTERS_PER_BLOCK: u64 = BLOCK_BYTES / 4;

/// Indirect blocks EXT2 needs to map `blocks` data blocks (single, double and triple
/// indirection).
pub fn indirect_blocks(blocks: u64) -> u64 {
    let mut rest = blocks.saturating_sub(DIRECT_POINTERS);
    let p = POINTERS_PER_BLOCK;
    let mut n = 0;
    // Single indirect.
    if rest > 0 {
        n += 1;
        rest = rest.saturating_sub(p);
    }
    // Double: one top block and one per p data blocks.
    if rest > 0 {
        let d = rest.min(p * p);
        n += 1 + d.div_ceil(p);
        rest -= d;
    }
    // Triple: one top, one per p² and one per p data blocks.
    if rest > 0 {
        n += 1 + rest.div_ceil(p * p) + rest.div_ceil(p);
    }
    n
}

/// The engine's timing, derived from [`IspCosts`].
#[derive(Clone, Debug, PartialEq)]
pub struct Engine {
    costs: IspCosts,
}

/// One host request to the PCM while the engine runs: when it arrives and how many bytes
/// it moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostRequest {
    pub at_ns: u64,
    pub bytes: u64,
}

/// An instruction run beside host requests: when the engine finished, and each host
/// request's latency (in the order given).
#[derive(Clone, Debug, PartialEq)]
pub struct Shared {
    pub engine_ns: u64,
    pub host_latency_ns: Vec<u64>,
}

impl Engine {
    pub fn new(costs: &IspCosts) -> Engine {
        Engine {
            costs: costs.clone(),
        }
    }

    pub fn costs(&self) -> &IspCosts {
        &self.costs
    }

    /// Bytes one access delivers: every chip's row buffer.
    pub fn bytes_per_access(&self) -> u64 {
        let c = &self.costs;
        u64::from(c.row_buffer_bytes) * u64::from(c.chips_per_group) * u64::from(c.controllers)
    }

    /// One access: a chip sensing and bursting one row buffer, all chips in parallel.
    pub fn access_ns(&self) -> f64 {
        f64::from(self.costs.row_buffer_bytes) * 1e9 / self.costs.chip_read_bytes_per_sec as f64
    }

    /// The burst alone: one row buffer over one chip's DDR bus.
    pub fn burst_ns(&self) -> f64 {
        let bytes_per_ns =
            f64::from(self.costs.chip_bus_bits) / 8.0 * 2.0 * self.costs.controller_clock_mhz / 1e3;
        f64::from(self.costs.row_buffer_bytes) / bytes_per_ns
    }

    /// A read request crossing into the controllers' clock domain.
    pub fn request_crossing_ns(&self) -> f64 {
        f64::from(self.costs.cdc_sync_cycles) * 1e3 / self.costs.controller_clock_mhz
    }

    /// How long a step holds the controllers: from its request's arrival to the end of the
    /// access.
    fn held_ns(&self) -> f64 {
        self.request_crossing_ns() + self.access_ns()
    }

    /// Both crossings of one fetch: the request into the controllers' domain, the data
    /// back into the fabric's.
    pub fn crossing_ns(&self) -> f64 {
        self.request_crossing_ns()
            + f64::from(self.costs.cdc_sync_cycles) * 1e3 / self.costs.fabric_clock_mhz
    }

    /// The comparators' time for one access's bytes.
    pub fn compare_ns(&self) -> f64 {
        let cycles =
            self.bytes_per_access() as f64 / f64::from(self.costs.comparator_bytes_per_cycle);
        cycles * 1e3 / self.costs.fabric_clock_mhz
    }

    /// One FSM step: fetch (the request crossing over, the access, the data crossing
    /// back), then compare.
    pub fn step_ns(&self) -> f64 {
        self.access_ns() + self.crossing_ns() + self.compare_ns()
    }

    /// The engine's streaming speed, bytes/s.
    pub fn bytes_per_sec(&self) -> f64 {
        self.bytes_per_access() as f64 * 1e9 / self.step_ns()
    }

    /// The per-instruction constant: decoding, and reading the inode.
    pub fn setup_ns(&self) -> f64 {
        f64::from(self.costs.setup_cycles) * 1e3 / self.costs.fabric_clock_mhz
            + self.fetch_ns(INODE_BYTES)
    }

    /// Reading `bytes` of metadata (no comparing).
    fn fetch_ns(&self, bytes: u64) -> f64 {
        bytes.div_ceil(self.bytes_per_access()) as f64 * (self.access_ns() + self.crossing_ns())
    }

    /// An instruction over `len` bytes of a file of `file_blocks` blocks: setup, the
    /// indirect blocks that map it, then one step per access.
    pub fn instruction_ns(&self, len: u64, file_blocks: u64) -> u64 {
        let map = self.fetch_ns(indirect_blocks(file_blocks).saturating_mul(BLOCK_BYTES));
        let steps = len.div_ceil(self.bytes_per_access()) as f64 * self.step_ns();
        (self.setup_ns() + map + steps).round() as u64
    }

    /// A host request alone on the controllers: its bytes, one access per
    /// [`Engine::bytes_per_access`] (the host's requests cross clock domains too).
    pub fn host_ns(&self, bytes: u64) -> f64 {
        self.fetch_ns(bytes.max(1))
    }

    /// A host CPU's copy of `bytes` between its memory and the board: its accesses at the
    /// controllers ([`Engine::host_ns`]) or its programmed I/O, whichever takes longer (each
    /// load or store is one bus transaction that waits for the controller's answer).
    pub fn host_copy_ns(&self, bytes: u64) -> f64 {
        self.host_ns(bytes).max(self.costs.pio_ns(bytes))
    }

    /// How long a host request waits when it arrives `since_ns` after an instruction's
    /// first fetch began (the engine streaming without pause since): the rest of the access
    /// in flight or about to start, if one is.
    pub fn wait_ns(&self, since_ns: f64) -> f64 {
        let phase = since_ns.max(0.0) % self.step_ns();
        (self.held_ns() - phase).max(0.0)
    }

    /// Runs an instruction of `len` bytes from time 0 while `host` requests (in arrival
    /// order) arrive. A host request waits only for the engine's access in flight; the
    /// engine's next access waits for the host's.
    pub fn shared(&self, len: u64, file_blocks: u64, host: &[HostRequest]) -> Shared {
        let steps = len.div_ceil(self.bytes_per_access());
        let held = self.held_ns();
        let step = self.step_ns();
        // Step k's fetch starts at `origin + k × step`; each host request that delays a fetch
        // moves the origin of the steps after it.
        let alone = self.instruction_ns(len, file_blocks) as f64;
        let mut origin = alone - steps as f64 * step;
        let mut controller_free = 0.0f64;
        let mut latency = Vec::with_capacity(host.len());
        for r in host {
            let t = r.at_ns as f64;
            let mut start = t.max(controller_free);
            // The first engine fetch not yet begun at `start`; a fetch under way finishes.
            let next_fetch = if start < origin {
                0
            } else {
                let k = ((start - origin) / step).floor() as u64;
                let fetch_end = origin + k as f64 * step + held;
                if k < steps && start < fetch_end {
                    start = fetch_end;
                }
                k.saturating_add(1)
            };
            let end = start + self.host_ns(r.bytes);
            controller_free = end;
            if next_fetch < steps {
                let next = origin + next_fetch as f64 * step;
                if next < end {
                    origin += end - next;
                }
            }
            latency.push((end - t).round() as u64);
        }
        Shared {
            engine_ns: (origin + steps as f64 * step).round() as u64,
            host_latency_ns: latency,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board() -> IspCosts {
        crate::Profile::load("pcm-zynq")
            .unwrap()
            .isp
            .expect("pcm-zynq has an [isp] table")
    }

    #[test]
    fn the_engine_speed_follows_from_the_board() {
        let e = Engine::new(&board());
        // 32 B per chip, 4 chips: 128 B per access of 213.3 ns, its request and data crossing
        // two-stage synchronisers (2 cycles at 250 MHz, 2 at 100 MHz), compared at 1 B per
        // 10 ns.
        assert_eq!(e.bytes_per_access(), 128);
        assert!((e.access_ns() - 213.33).abs() < 0.01, "{}", e.access_ns());
        assert!((e.crossing_ns() - 28.0).abs() < 1e-9, "{}", e.crossing_ns());
        assert!((e.compare_ns() - 1280.0).abs() < 1e-9);
        let mbs = e.bytes_per_sec() / 1e6;
        assert!((mbs - 84.14).abs() < 0.01, "{mbs}");
        assert!(e.burst_ns() < e.access_ns());
        // Without the crossings, the access and the compare alone.
        let mut free = board();
        free.cdc_sync_cycles = 0;
        let mbs = Engine::new(&free).bytes_per_sec() / 1e6;
        assert!((mbs - 85.71).abs() < 0.01, "{mbs}");
    }

    #[test]
    fn instruction_time_is_linear_in_length_with_a_constant_setup() {
        let e = Engine::new(&board());
        // Least squares over file sizes from 100 KB to 100 MB (whole files).
        let sizes: Vec<u64> = (0..40).map(|i| 100_000 + i * 2_500_000).collect();
        let pts: Vec<(f64, f64)> = sizes
            .iter()
            .map(|&s| {
                (
                    s as f64,
                    e.instruction_ns(s, s.div_ceil(BLOCK_BYTES)) as f64,
                )
            })
            .collect();
        let n = pts.len() as f64;
        let (sx, sy) = pts.iter().fold((0.0, 0.0), |a, p| (a.0 + p.0, a.1 + p.1));
        let (mx, my) = (sx / n, sy / n);
        let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let syy: f64 = pts.iter().map(|p| (p.1 - my).powi(2)).sum();
        let slope = sxy / sxx;
        let intercept = my - slope * mx;
        let r2 = sxy * sxy / (sxx * syy);
        assert!(r2 > 0.999_999, "r² {r2}");
        // The slope is the streaming speed (indirect blocks add under 0.1 %), the intercept
        // the setup, within the double-indirect top block and the double-indirect step of the
        // map (two blocks' reads) and the rounding of per-access steps.
        let per_byte = 1e9 / e.bytes_per_sec();
        assert!(
            (slope / per_byte - 1.0).abs() < 0.001,
            "{slope} vs {per_byte}"
        );
        let slack = 2.0 * e.host_ns(BLOCK_BYTES) + 2.0 * e.step_ns();
        assert!(
            (intercept - e.setup_ns()).abs() < slack,
            "{intercept} vs {} (± {slack})",
            e.setup_ns()
        );
        assert!(e.setup_ns() > 0.0);
    }

    #[test]
    fn indirect_blocks_follow_ext2() {
        assert_eq!(indirect_blocks(12), 0);
        assert_eq!(indirect_blocks(13), 1);
        assert_eq!(indirect_blocks(12 + 1024), 1);
        assert_eq!(indirect_blocks(12 + 1025), 3);
        assert_eq!(indirect_blocks(12 + 1024 + 1024 * 1024), 1 + 1 + 1024);
        assert!(indirect_blocks(u64::MAX) > 0);
    }

    #[test]
    fn host_requests_wait_at_most_one_access() {
        let e = Engine::new(&board());
        let len = 10 << 20;
        let alone = e.instruction_ns(len, len / BLOCK_BYTES);
        // A 4 KiB host read about every 37 µs, from inside the setup to past the end. A
        // request re-aligns the engine's steps to its end, so a fixed period would meet every
        // step at one phase: a pseudo-random delay of up to 1.5 µs (an engine step) spreads
        // them over the step, and some arrive during an access.
        let host: Vec<HostRequest> = (0..4000u64)
            .map(|i| HostRequest {
                at_ns: 500 + i * 37_003 + i.wrapping_mul(2_654_435_761) % 1_500,
                bytes: 4096,
            })
            .collect();
        let s = e.shared(len, len / BLOCK_BYTES, &host);
        let idle = e.host_ns(4096);
        for (i, l) in s.host_latency_ns.iter().enumerate() {
            assert!(
                (*l as f64) <= idle + e.held_ns() + 1.0,
                "request {i}: {l} ns against {idle} idle"
            );
        }
        // Some waited, and the engine lost at most the host's time.
        assert!(s.host_latency_ns.iter().any(|&l| l as f64 > idle + 1.0));
        assert!(s.engine_ns >= alone);
        let host_total: f64 = idle * host.len() as f64;
        assert!((s.engine_ns - alone) as f64 <= host_total + 1.0);
        // With no host requests, nothing changes.
        assert_eq!(e.shared(len, len / BLOCK_BYTES, &[]).engine_ns, alone);
    }

    /// The host's copy moves at its programmed I/O where that is slower than the
    /// controllers, as on the board (25 MB/s against 84); unbounded, at the controllers.
    #[test]
    fn a_host_copy_is_bounded_by_the_cpus_programmed_io() {
        let c = board();
        let e = Engine::new(&c);
        let mib = 1 << 20;
        assert!(c.host_pio_bytes_per_sec > 0);
        let pio = mib as f64 * 1e9 / c.host_pio_bytes_per_sec as f64;
        assert!(pio > e.host_ns(mib));
        assert_eq!(e.host_copy_ns(mib), pio);
        let mut free = board();
        free.host_pio_bytes_per_sec = 0;
        assert_eq!(Engine::new(&free).host_copy_ns(mib), e.host_ns(mib));
        free.host_pio_bytes_per_sec = 1;
        assert!(free
            .check()
            .unwrap_err()
            .0
            .contains("host_pio_bytes_per_sec"));
    }

    #[test]
    fn a_chip_faster_than_its_bus_is_refused() {
        let mut c = board();
        c.chip_read_bytes_per_sec = 10_000_000_000;
        assert!(c.check().unwrap_err().0.contains("chip_read_bytes_per_sec"));
        let mut c = board();
        c.fabric_clock_mhz = 0.0;
        assert!(c.check().is_err());
    }
}
