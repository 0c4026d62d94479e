//! The in-storage random file I/O microbenchmark of TxISC §V-B (Fig. 3): one task issues
//! 16 KiB (one flash page) random reads and writes to a file at a queue depth, under TxISC,
//! FileISC or BlockISC. Everything here is virtual time; the CLI (`csd txbench`) adds the
//! wall-clock measurement of the firmware code with flash timing off.

use super::error::TxError;
use super::ids::{ExecMode, FileId};
use super::FirmwareWork;
use crate::addr::Extent;
use crate::addr::{Lpn, VirtualTime};
use crate::device::{Completion, DataMode, Device, IoPath};
use crate::profile::Profile;
use crate::rng::SimRng;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// ext4's largest extent, 128 MiB: how the benchmark file is laid out.
const EXTENT_BYTES: u64 = 128 << 20;

/// One benchmark point.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Point {
    pub write_pct: u32,
    pub qd: u32,
    pub requests: u64,
}

/// What one point measured.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Measured {
    pub mode: ExecMode,
    pub write_pct: u32,
    pub qd: u32,
    pub requests: u64,
    /// Virtual time from the first request to the task's commit.
    pub virtual_ns: u64,
    /// Of which the commit (TxISC only): applying the deltas and persisting their P2L.
    pub commit_ns: u64,
    pub mb_per_s: f64,
    /// Delta mappings held just before commit (TxISC only).
    pub delta_entries: u64,
    pub delta_pages: u64,
    pub delta_bytes: u64,
    /// The same mappings in TxISC's firmware format (reports stored before it read as 0).
    #[serde(default)]
    pub firmware_delta_bytes: u64,
}

/// A device holding the benchmark file, written once in full so reads hit flash.
#[derive(Clone)]
pub struct Bench {
    pub device: Device,
    pub extents: Vec<Extent>,
    pub file_pages: u64,
}

impl Bench {
    /// Lays out a `file_bytes` file in 128 MiB extents (every other extent skipped, so the
    /// file is fragmented like an aged file system's) and writes it.
    pub fn new(profile: &Profile, file_bytes: u64) -> Result<Bench, TxError> {
        let mut device = Device::new(profile, DataMode::TimingOnly)?;
        let ps = device.page_size();
        let file_pages = file_bytes.div_ceil(ps).max(1);
        let per_extent = (EXTENT_BYTES / ps).max(1);
        let mut extents = Vec::new();
        let mut left = file_pages;
        let mut lpn = 0;
        while left > 0 {
            let pages = left.min(per_extent);
            extents.push(Extent {
                first: Lpn(lpn),
                pages,
            });
            lpn += 2 * per_extent;
            left -= pages;
        }
        let mut t = VirtualTime::ZERO;
        for e in &extents {
            for chunk in (0..e.pages).step_by(64) {
                let n = (e.pages - chunk).min(64);
                t = device
                    .write(IoPath::Internal, t, Lpn(e.first.0 + chunk), n, None)?
                    .done;
            }
        }
        device.reset_measurements();
        Ok(Bench {
            device,
            extents,
            file_pages,
        })
    }

    /// The LPN of file page `page` and how many extents a lookup examines.
    fn lpn_of(&self, page: u64) -> (Lpn, u64) {
        let mut base = 0;
        for (i, e) in self.extents.iter().enumerate() {
            if page < base + e.pages {
                return (Lpn(e.first.0 + page - base), i as u64 + 1);
            }
            base += e.pages;
        }
        unreachable!("page within the file")
    }
}

/// `profile` with flash timing taken out, as TxISC §V-B does to stress the firmware: NAND
/// operations and channel transfers take a nanosecond, so what remains of each request is
/// the firmware's own work on its core (request handling, extent and delta lookups) and, on
/// an emulation platform, the page's copy to or from the backing store
/// (`timing.backend_bytes_per_sec`).
pub fn without_flash_timing(profile: &Profile) -> Profile {
    let mut p = profile.clone();
    p.timing.page_read_ns = 1;
    p.timing.page_program_ns = 1;
    p.timing.block_erase_ns = 1;
    // A page crosses a channel in a nanosecond (u64::MAX / 1e9 B/s would still take 0.9 µs
    // per 16 KiB page); what moving it costs is the backing store's copy, booked by `run`.
    p.timing.channel_bytes_per_sec =
        u64::from(p.geometry.page_size_bytes).saturating_mul(1_000_000_000);
    p.name = format!("{} (flash timing off)", profile.name);
    p
}

/// An emulation platform's backing store (`timing.backend_bytes_per_sec`): each request's
/// page is copied between it and the firmware's buffer, one copy at a time, beside the
/// emulated NAND latency (FEMU copies at once and completes the request when its emulated
/// time expires). Costs nothing on a profile without one.
struct BackingStore {
    copy_ns: u64,
    free: VirtualTime,
}

impl BackingStore {
    fn of(dev: &Device) -> BackingStore {
        let copy_ns = match dev.profile().timing.backend_bytes_per_sec {
            0 => 0,
            rate => crate::timing::transfer_ns(dev.page_size(), rate),
        };
        BackingStore {
            copy_ns,
            free: VirtualTime::ZERO,
        }
    }

    /// When a one-page request whose flash work completed as `c` is done, its copy included.
    fn complete(&mut self, c: &Completion) -> VirtualTime {
        if self.copy_ns == 0 {
            return c.done;
        }
        let issued = c.submitted.after(c.nvme_ns);
        self.free = issued.max(self.free).after(self.copy_ns);
        c.done.max(self.free)
    }
}

/// Runs one point on `dev` (a clone of `bench.device`): `requests` random one-page I/Os,
/// `write_pct` % writes, `qd` outstanding at a time, then (TxISC) the commit.
pub fn run(
    bench: &Bench,
    dev: &mut Device,
    mode: ExecMode,
    point: Point,
    seed: u64,
) -> Result<Measured, TxError> {
    let ps = dev.page_size();
    let file = FileId(1);
    let task = match mode {
        ExecMode::Tx => {
            let t = dev.tx_begin();
            dev.tx_register(t, file, &bench.extents)?;
            Some(t)
        }
        _ => None,
    };
    let mut rng = SimRng::new(seed);
    // Each queue slot issues its next request when its previous one completes.
    let mut slots: BinaryHeap<Reverse<(VirtualTime, u32)>> = (0..point.qd.max(1))
        .map(|s| Reverse((VirtualTime::ZERO, s)))
        .collect();
    let mut end = VirtualTime::ZERO;
    let mut store = BackingStore::of(dev);
    for _ in 0..point.requests {
        let Reverse((at, slot)) = slots.pop().expect("qd >= 1");
        let page = rng.below(bench.file_pages);
        let write = rng.below(100) < u64::from(point.write_pct);
        // Every mode's request passes through the firmware's request handling first.
        let at = dev.firmware_request(at);
        let done = match (mode, task) {
            (ExecMode::Tx, Some(t)) if write => dev.tx_write(t, file, at, page * ps, ps, None)?,
            (ExecMode::Tx, Some(t)) => dev.tx_read(t, file, at, page * ps, ps, None)?,
            _ => {
                let (lpn, examined) = bench.lpn_of(page);
                // FileISC translates the file offset through the extents on the firmware
                // core; BlockISC tasks already hold LBAs.
                let at = if mode == ExecMode::File {
                    dev.firmware(at, FirmwareWork::cached(examined))
                } else {
                    at
                };
                if write {
                    dev.write(IoPath::Internal, at, lpn, 1, None)?
                } else {
                    dev.read(IoPath::Internal, at, lpn, 1, None)?
                }
            }
        };
        let done = store.complete(&done);
        end = end.max(done);
        slots.push(Reverse((done, slot)));
    }
    let stats = dev.txn_stats();
    let io_end = end;
    if let Some(t) = task {
        end = end.max(dev.tx_commit(t, end)?.done);
    }
    let bytes = point.requests * ps;
    Ok(Measured {
        mode,
        write_pct: point.write_pct,
        qd: point.qd,
        requests: point.requests,
        virtual_ns: end.ns(),
        commit_ns: end.since(io_end),
        mb_per_s: bytes as f64 / (end.ns().max(1) as f64 / 1e9) / 1e6,
        delta_entries: stats.delta_entries,
        delta_pages: stats.delta_pages,
        delta_bytes: stats.delta_bytes,
        firmware_delta_bytes: stats.firmware_delta_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Profile {
        let mut p = Profile::load("daisyplus-femu").unwrap();
        p.geometry.blocks_per_plane = 96;
        p.geometry.over_provisioning = 0.2;
        p.validate().unwrap();
        p
    }

    /// TxISC Fig. 3's shape with flash timing on: transactions cost almost nothing beside
    /// FileISC and BlockISC, writes included, and deeper queues use the dies' parallelism.
    #[test]
    fn transactions_cost_little_with_flash_timing_on() {
        let bench = Bench::new(&small(), 64 << 20).unwrap();
        for write_pct in [0, 100] {
            let point = Point {
                write_pct,
                qd: 8,
                requests: 512,
            };
            let bw = |mode| {
                let mut dev = bench.device.clone();
                run(&bench, &mut dev, mode, point, 7).unwrap()
            };
            let (tx, file, block) = (bw(ExecMode::Tx), bw(ExecMode::File), bw(ExecMode::Block));
            assert!(tx.mb_per_s <= file.mb_per_s && file.mb_per_s <= block.mb_per_s);
            assert!(tx.mb_per_s > 0.97 * block.mb_per_s, "{tx:?} vs {block:?}");
            if write_pct == 100 {
                assert!(tx.delta_pages > 400, "each write is a delta page: {tx:?}");
            }
        }
        let qd1 = run(
            &bench,
            &mut bench.device.clone(),
            ExecMode::Tx,
            Point {
                write_pct: 0,
                qd: 1,
                requests: 256,
            },
            7,
        )
        .unwrap();
        let qd8 = run(
            &bench,
            &mut bench.device.clone(),
            ExecMode::Tx,
            Point {
                write_pct: 0,
                qd: 8,
                requests: 256,
            },
            7,
        )
        .unwrap();
        assert!(qd8.mb_per_s > 4.0 * qd1.mb_per_s, "{qd1:?} {qd8:?}");
    }

    /// With flash timing off, an emulation platform's page still crosses its backing store's
    /// port: at QD 1 each request pays the copy on top of the firmware's work, and deep queues
    /// are bounded by the one port (TxISC §V-B: "the bottleneck shifts to the hardware").
    #[test]
    fn backing_store_copy_remains_with_flash_timing_off() {
        let with_copy = without_flash_timing(&small());
        let mut no_copy = with_copy.clone();
        no_copy.timing.backend_bytes_per_sec = 0;
        no_copy.assumptions.remove("timing.backend_bytes_per_sec");
        let copy_ns = crate::timing::transfer_ns(16384, with_copy.timing.backend_bytes_per_sec);
        assert!(
            copy_ns > 1000,
            "a 16 KiB page takes microseconds: {copy_ns}"
        );
        let measure = |p: &Profile, qd| {
            let bench = Bench::new(p, 64 << 20).unwrap();
            let point = Point {
                write_pct: 100,
                qd,
                requests: 512,
            };
            run(&bench, &mut bench.device.clone(), ExecMode::Block, point, 7).unwrap()
        };
        let (fast, slow) = (measure(&no_copy, 1), measure(&with_copy, 1));
        let per_request = |m: &Measured| m.virtual_ns / m.requests;
        assert!(per_request(&fast) < 4000, "firmware only: {fast:?}");
        assert!(
            per_request(&slow) >= per_request(&fast) + copy_ns - 10,
            "{fast:?} vs {slow:?}"
        );
        // Sixteen requests in flight overlap the firmware with the copies, but never two
        // copies with each other.
        let deep = measure(&with_copy, 16);
        assert!(deep.virtual_ns >= deep.requests * copy_ns, "{deep:?}");
        assert!(deep.virtual_ns < slow.virtual_ns, "{deep:?} vs {slow:?}");
    }

    /// With flash timing off, a TxISC write pays its delta record on top of the tree probe a
    /// read pays too, so the transaction's cost over FileISC grows with the write ratio, and
    /// `delta_record_ns` leaves the all-read point where it was.
    #[test]
    fn delta_records_are_what_writes_add() {
        let profile = without_flash_timing(&small());
        let mut dearer = profile.clone();
        dearer.device_cpu.delta_record_ns += 1000;
        let per_request = |p: &Profile, write_pct, mode| {
            let bench = Bench::new(p, 64 << 20).unwrap();
            let point = Point {
                write_pct,
                qd: 1,
                requests: 512,
            };
            let m = run(&bench, &mut bench.device.clone(), mode, point, 7).unwrap();
            (m.virtual_ns / m.requests) as i64
        };
        let extra = |p: &Profile, write_pct| {
            per_request(p, write_pct, ExecMode::Tx) - per_request(p, write_pct, ExecMode::File)
        };
        assert!(extra(&profile, 100) > extra(&profile, 50));
        assert!(extra(&profile, 50) > extra(&profile, 0));
        assert_eq!(
            extra(&dearer, 0),
            extra(&profile, 0),
            "reads record nothing"
        );
        let grown = extra(&dearer, 100) - extra(&profile, 100);
        assert!(
            (990..=1010).contains(&grown),
            "one record per write: {grown} ns"
        );
    }
}
