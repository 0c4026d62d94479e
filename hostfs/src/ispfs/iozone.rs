//! ISPFS's file-system comparison (ISPFS §5.1, Fig. 7): iozone's rewrite, reread, random
//! write and random read through ISPFS's POSIX path and through an EXT4-like path, over the
//! same PCM board, per file and record size.
//!
//! - **ISPFS** has no page cache and no block layer (§3.1): a `read` or `write` is a system
//!   call and one copy between the user's buffer and the PCM, which the CPU makes through
//!   the memory-mapped board. A read moves at the slowest of the CPU's copy, the FMC link
//!   and the PCM controllers ([`Engine::host_ns`]); a write waits for the PCM to take the
//!   bytes, which the device model times with the profile's program time and its channel
//!   and die parallelism.
//! - **EXT4-like**: every call goes through the page cache: per 4 KiB page its work
//!   (`host.page_cache_page_ns`) and a copy. iozone's reads follow its writes, so the file
//!   is cached and reads hit. Writes dirty pages; once the dirty pages pass Linux's
//!   `vm.dirty_ratio` (20 % of the host's memory) the writer writes back what it dirties, as
//!   `balance_dirty_pages` makes it: block requests of `isp.readahead_bytes` through the
//!   block layer, then the device's program time.
//!
//! Nothing is set per test: the four tests differ only in their access order.

use super::IspfsError;
use csd_device::isp::engine::BLOCK_BYTES;
use csd_device::isp::Engine;
use csd_device::rng::SimRng;
use csd_device::{DataMode, Device, IoPath, Profile, VirtualTime};
use serde::{Deserialize, Serialize};

/// Linux's default `vm.dirty_ratio`: the share of memory dirty pages may take before a
/// writer must write back itself.
const DIRTY_RATIO: f64 = 0.20;
/// The largest file and record, and the most points a run takes.
pub const MAX_FILE_BYTES: u64 = 256 << 20;
pub const MAX_RECORD_BYTES: u64 = 16 << 20;
/// The smallest record: a sector (so a point is at most 512 Ki calls).
pub const MIN_RECORD_BYTES: u64 = 512;
pub const MAX_POINTS: usize = 64;

/// One of iozone's tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Test {
    Rewrite,
    Reread,
    RandomWrite,
    RandomRead,
}

impl Test {
    pub const ALL: [Test; 4] = [
        Test::Rewrite,
        Test::Reread,
        Test::RandomWrite,
        Test::RandomRead,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Test::Rewrite => "rewrite",
            Test::Reread => "reread",
            Test::RandomWrite => "random-write",
            Test::RandomRead => "random-read",
        }
    }

    pub fn writes(self) -> bool {
        matches!(self, Test::Rewrite | Test::RandomWrite)
    }

    fn random(self) -> bool {
        matches!(self, Test::RandomWrite | Test::RandomRead)
    }
}

/// What to run: every test at every (file, record) size with record ≤ file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IozoneSpec {
    pub file_bytes: Vec<u64>,
    pub record_bytes: Vec<u64>,
}

impl IozoneSpec {
    /// Records of 4 KiB to 1 MiB on files of 1 MiB to 100 MiB (the paper ran 256 MB files
    /// with records of 1 KiB to 16 MiB).
    pub fn default_grid() -> IozoneSpec {
        IozoneSpec {
            file_bytes: vec![1 << 20, 10 << 20, 100 << 20],
            record_bytes: vec![4 << 10, 64 << 10, 1 << 20],
        }
    }

    fn points(&self) -> Result<Vec<(u64, u64)>, IspfsError> {
        let bad = |m: String| Err(IspfsError::Spec(m));
        if let Some(f) = self
            .file_bytes
            .iter()
            .find(|&&f| f == 0 || f > MAX_FILE_BYTES)
        {
            return bad(format!("file size {f}: 1 byte to {MAX_FILE_BYTES} bytes"));
        }
        if let Some(r) = self
            .record_bytes
            .iter()
            .find(|&&r| !(MIN_RECORD_BYTES..=MAX_RECORD_BYTES).contains(&r))
        {
            return bad(format!(
                "record size {r}: {MIN_RECORD_BYTES} bytes to {MAX_RECORD_BYTES} bytes"
            ));
        }
        let points: Vec<(u64, u64)> = self
            .file_bytes
            .iter()
            .flat_map(|&f| self.record_bytes.iter().map(move |&r| (f, r)))
            .filter(|(f, r)| r <= f)
            .collect();
        if points.is_empty() || points.len() > MAX_POINTS {
            return bad(format!(
                "{} (file, record) pairs with record ≤ file: 1 to {MAX_POINTS} are run",
                points.len()
            ));
        }
        Ok(points)
    }
}

/// One test at one (file, record) size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IozonePoint {
    pub test: Test,
    pub file_bytes: u64,
    pub record_bytes: u64,
    pub ispfs_mb_per_sec: f64,
    pub ext4_mb_per_sec: f64,
}

impl IozonePoint {
    pub fn ratio(&self) -> f64 {
        self.ispfs_mb_per_sec / self.ext4_mb_per_sec.max(f64::MIN_POSITIVE)
    }
}

/// The comparison's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IozoneReport {
    pub profile: String,
    pub spec: IozoneSpec,
    pub points: Vec<IozonePoint>,
}

impl IozoneReport {
    /// ISPFS over EXT4, averaged over a test's points (as the paper averages).
    pub fn mean_ratio(&self, test: Test) -> Option<f64> {
        let r: Vec<f64> = self
            .points
            .iter()
            .filter(|p| p.test == test)
            .map(IozonePoint::ratio)
            .collect();
        (!r.is_empty()).then(|| r.iter().sum::<f64>() / r.len() as f64)
    }
}

/// Runs every test at every point.
pub fn compare(
    profile: &Profile,
    spec: &IozoneSpec,
    seed: u64,
    mut progress: impl FnMut(),
) -> Result<IozoneReport, IspfsError> {
    let costs = profile
        .isp
        .as_ref()
        .ok_or_else(|| IspfsError::NoEngine(profile.name.clone()))?;
    let engine = Engine::new(costs);
    let mut points = Vec::new();
    for (file, record) in spec.points()? {
        for test in Test::ALL {
            let ops = order(test, file, record, seed);
            let ispfs = ispfs_ns(profile, &engine, test, &ops, record)?;
            let ext4 = ext4_ns(profile, test, &ops, record)?;
            let mbs = |ns: u64| file as f64 / ns.max(1) as f64 * 1e3;
            points.push(IozonePoint {
                test,
                file_bytes: file,
                record_bytes: record,
                ispfs_mb_per_sec: mbs(ispfs),
                ext4_mb_per_sec: mbs(ext4),
            });
        }
        progress();
    }
    Ok(IozoneReport {
        profile: profile.name.clone(),
        spec: spec.clone(),
        points,
    })
}

/// The record offsets a test visits: in order, or each record once in a seeded shuffle.
fn order(test: Test, file: u64, record: u64, seed: u64) -> Vec<u64> {
    let mut ops: Vec<u64> = (0..file / record).map(|i| i * record).collect();
    if test.random() {
        let mut rng = SimRng::new(seed ^ file ^ record.rotate_left(32));
        for i in (1..ops.len()).rev() {
            ops.swap(i, rng.below(i as u64 + 1) as usize);
        }
    }
    ops
}

/// The device a test writes: fresh, with the file already on it.
fn device_with_file(profile: &Profile, file: u64) -> Result<Device, IspfsError> {
    let mut d = Device::new(profile, DataMode::TimingOnly)?;
    d.write_at(IoPath::Internal, VirtualTime::ZERO, 0, file, None)?;
    d.reset_measurements();
    Ok(d)
}

/// ISPFS: a system call and one copy per call; writes wait for the PCM.
fn ispfs_ns(
    profile: &Profile,
    engine: &Engine,
    test: Test,
    ops: &[u64],
    record: u64,
) -> Result<u64, IspfsError> {
    let host = &profile.host;
    let file = ops.len() as u64 * record;
    let copy = |bytes: u64| {
        let cpu = bytes as f64 * 1e9 / host.copy_bytes_per_sec as f64;
        let link = bytes as f64 * 1e9 / profile.host_interface.pcie_bytes_per_sec as f64;
        cpu.max(link).max(engine.host_ns(bytes)).round() as u64
    };
    if !test.writes() {
        return Ok(ops.len() as u64 * (host.syscall_ns + copy(record)));
    }
    let mut d = device_with_file(profile, file)?;
    let mut t = d.idle_at();
    let start = t;
    for &off in ops {
        t = t.after(host.syscall_ns);
        let c = d.write_at(IoPath::Internal, t, off, record, None)?;
        t = c.done.max(t.after(copy(record)));
    }
    Ok(t.since(start))
}

/// EXT4-like: the page cache on every call; writes past the dirty limit write back.
fn ext4_ns(profile: &Profile, test: Test, ops: &[u64], record: u64) -> Result<u64, IspfsError> {
    let host = &profile.host;
    let isp = profile
        .isp
        .as_ref()
        .ok_or_else(|| IspfsError::NoEngine(profile.name.clone()))?;
    let file = ops.len() as u64 * record;
    let pages = |off: u64| (off + record).div_ceil(BLOCK_BYTES) - off / BLOCK_BYTES;
    let per_call = |off: u64| {
        host.syscall_ns
            + pages(off) * host.page_cache_page_ns
            + (record as f64 * 1e9 / host.copy_bytes_per_sec as f64).round() as u64
    };
    if !test.writes() {
        return Ok(ops.iter().map(|&o| per_call(o)).sum());
    }
    let limit = (profile.device_cpu.dram_bytes as f64 * DIRTY_RATIO) as u64;
    let mut d = device_with_file(profile, file)?;
    let mut t = d.idle_at();
    let start = t;
    let mut dirty = 0u64;
    for &off in ops {
        t = t.after(per_call(off));
        dirty += pages(off) * BLOCK_BYTES;
        if dirty > limit {
            // The writer writes back what it dirtied: block requests, then the programs.
            let requests = record.div_ceil(isp.readahead_bytes);
            t = t.after(requests * isp.block_request_ns);
            t = d.write_at(IoPath::Internal, t, off, record, None)?.done;
        }
    }
    Ok(t.since(start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_favour_ispfs_and_writes_wait_for_the_pcm() {
        let profile = Profile::load("pcm-zynq").unwrap();
        let spec = IozoneSpec {
            file_bytes: vec![1 << 20],
            record_bytes: vec![4 << 10, 256 << 10],
        };
        let r = compare(&profile, &spec, 1, || {}).unwrap();
        assert_eq!(r.points.len(), 8);
        for p in &r.points {
            assert!(p.ispfs_mb_per_sec > 0.0 && p.ext4_mb_per_sec > 0.0);
            if !p.test.writes() {
                // No page-cache work on ISPFS: faster, by the copy's share at most.
                assert!(p.ratio() > 1.0 && p.ratio() < 4.0, "{p:?}");
            }
        }
        // Reading in order or at random costs ISPFS the same: no readahead to lose.
        let speed = |t: Test, rec: u64| {
            r.points
                .iter()
                .find(|p| p.test == t && p.record_bytes == rec)
                .unwrap()
                .ispfs_mb_per_sec
        };
        assert_eq!(speed(Test::Reread, 4096), speed(Test::RandomRead, 4096));
        // Larger records spread a write over more of the PCM's dies.
        assert!(speed(Test::Rewrite, 256 << 10) > speed(Test::Rewrite, 4096));
        assert!(r.mean_ratio(Test::Reread).is_some());
        // The same spec and seed, the same report.
        assert_eq!(compare(&profile, &spec, 1, || {}).unwrap(), r);
    }

    #[test]
    fn the_shuffle_visits_every_record_once() {
        let mut o = order(Test::RandomRead, 1 << 20, 4096, 3);
        assert_ne!(o, order(Test::Reread, 1 << 20, 4096, 3));
        o.sort_unstable();
        assert_eq!(o, order(Test::Reread, 1 << 20, 4096, 3));
    }

    #[test]
    fn bad_grids_are_refused() {
        let p = Profile::load("pcm-zynq").unwrap();
        for (spec, want) in [
            (
                IozoneSpec {
                    file_bytes: vec![0],
                    record_bytes: vec![4096],
                },
                "file size 0",
            ),
            (
                IozoneSpec {
                    file_bytes: vec![4096],
                    record_bytes: vec![1 << 30],
                },
                "record size",
            ),
            (
                IozoneSpec {
                    file_bytes: vec![4096],
                    record_bytes: vec![8192],
                },
                "0 (file, record)",
            ),
            (
                IozoneSpec {
                    file_bytes: vec![MAX_FILE_BYTES],
                    record_bytes: vec![1],
                },
                "record size 1:",
            ),
        ] {
            let e = compare(&p, &spec, 1, || {}).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
