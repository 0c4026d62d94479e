//! FusionFS's comparison (FusionFS §2, Fig. 3): append-CRC-write and read-modify-write of
//! 4 KiB records, one file per thread, under five file-system designs on the same Optane
//! medium:
//!
//! - `kernel-dax` (ext4-DAX): every call is a system call and the kernel's write path; an
//!   append also journals its size change.
//! - `nova`: a system call per call and NOVA's per-inode log; writes go copy-on-write to a
//!   fresh page, and a log entry follows each.
//! - `user-direct` (SplitFS): data moves by loads and stores from user space; appends add the
//!   staging and relink work the kernel does for them.
//! - `firmware` (CrossFS): every call is a request to StorageFS on the device: the added PCIe
//!   delay, its DMA, and the file-system work on a device core.
//! - `fusion`: the whole sequence is one CISC op: one request, and the CRC or XOR on the
//!   device.
//!
//! Costs are the profile's (`[host]`, `[fusion]`, `[device_cpu]`, the PCIe link and the
//! medium's timing) and what the real ops measure when run ([`ops::measure`]); nothing is
//! set per figure. The medium, the PCIe link and the device cores are shared by all threads;
//! each thread has its own host core.

mod design;
pub mod ops;
mod sim;

pub use design::{CpuSpeed, Design, FusionError, Workload};

use csd_device::storagefs::StageRunner;
use csd_device::{DataMode, Device, Profile};
use ops::{Place, RECORD};
use serde::{Deserialize, Serialize};

/// The most threads and ops a run takes (the medium must hold every thread's file).
pub const MAX_THREADS: u32 = 64;
pub const MAX_OPS_PER_THREAD: u32 = 100_000;

/// One design at one thread count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub threads: u32,
    pub ops_per_sec: f64,
    /// Record bytes per second (4 KiB per op).
    pub mb_per_sec: f64,
    pub mean_latency_ns: f64,
}

/// One design's throughput across thread counts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    pub design: Design,
    pub speed: CpuSpeed,
    /// Host-CPU time of the op's data processing where the host does it (0 for fusion).
    pub host_compute_ns: u64,
    /// Device-core time of one op's requests (firmware: its calls summed; fusion: its one
    /// CISC op; 0 for the host designs).
    pub device_core_ns: u64,
    pub points: Vec<Point>,
}

impl Curve {
    /// The curve's label: the design, with `-slow` for slow device cores.
    pub fn label(&self) -> String {
        match self.speed {
            CpuSpeed::Fast => self.design.name().to_string(),
            CpuSpeed::Slow => format!("{}-slow", self.design.name()),
        }
    }
}

/// The comparison's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FusionReport {
    pub profile: String,
    pub workload: Workload,
    pub ops_per_thread: u32,
    pub threads: Vec<u32>,
    pub curves: Vec<Curve>,
}

impl FusionReport {
    /// At the largest thread count, every curve that runs at `speed` (the host designs, and
    /// the device designs at that speed) with its throughput.
    pub fn at_max_threads(&self, speed: CpuSpeed) -> impl Iterator<Item = (f64, &Curve)> {
        self.curves
            .iter()
            .filter(move |c| !c.design.on_device() || c.speed == speed)
            .filter_map(|c| Some((c.points.last()?.ops_per_sec, c)))
    }

    /// At the largest thread count: fusion's throughput over the best other design at the
    /// same device-core speed, and that design.
    pub fn gain(&self, speed: CpuSpeed) -> Option<(f64, String)> {
        let fusion = self
            .at_max_threads(speed)
            .find(|(_, c)| c.design == Design::Fusion)?
            .0;
        let (best, c) = self
            .at_max_threads(speed)
            .filter(|(_, c)| c.design != Design::Fusion)
            .max_by(|a, b| a.0.total_cmp(&b.0))?;
        Some((fusion / best, c.label()))
    }
}

/// What to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FusionSpec {
    pub workload: Workload,
    pub threads: Vec<u32>,
    pub ops_per_thread: u32,
    pub speeds: Vec<CpuSpeed>,
    pub designs: Vec<Design>,
}

/// Runs every design at every thread count (and device-core speed for the designs that use
/// the device's cores). `progress` is called after each point.
pub fn compare(
    profile: &Profile,
    spec: &FusionSpec,
    runner: &mut dyn StageRunner,
    mut progress: impl FnMut(),
) -> Result<FusionReport, FusionError> {
    let max_threads = spec.threads.iter().copied().max().unwrap_or(0);
    if spec.threads.is_empty() || max_threads == 0 || max_threads > MAX_THREADS {
        return Err(FusionError::Bounds(format!(
            "thread counts must be 1 to {MAX_THREADS}"
        )));
    }
    if spec.ops_per_thread == 0 || spec.ops_per_thread > MAX_OPS_PER_THREAD {
        return Err(FusionError::Bounds(format!(
            "ops per thread must be 1 to {MAX_OPS_PER_THREAD}"
        )));
    }
    let mut curves = Vec::new();
    for &design in &spec.designs {
        let speeds: &[CpuSpeed] = if design.on_device() {
            &spec.speeds
        } else {
            &[CpuSpeed::Fast]
        };
        for &speed in speeds {
            let costs = ops::measure(profile, spec.workload, speed, runner)?;
            let mut points = Vec::new();
            for &threads in &spec.threads {
                points.push(point(profile, spec, design, &costs, threads)?);
                progress();
            }
            curves.push(Curve {
                design,
                speed,
                host_compute_ns: if design == Design::Fusion {
                    0
                } else {
                    costs.host_compute_ns
                },
                device_core_ns: match design {
                    Design::Fusion => costs.fusion_op_core_ns,
                    Design::Firmware => costs.firmware_call_core_ns.iter().sum(),
                    _ => 0,
                },
                points,
            });
        }
    }
    Ok(FusionReport {
        profile: profile.name.clone(),
        workload: spec.workload,
        ops_per_thread: spec.ops_per_thread,
        threads: spec.threads.clone(),
        curves,
    })
}

fn point(
    profile: &Profile,
    spec: &FusionSpec,
    design: Design,
    costs: &ops::Costs,
    threads: u32,
) -> Result<Point, FusionError> {
    let mut device = Device::new(profile, DataMode::TimingOnly)?;
    // Each thread's file, its copy-on-write pages and its log get their own regions.
    let file_bytes = u64::from(spec.ops_per_thread) * RECORD;
    let region = 2 * file_bytes + u64::from(spec.ops_per_thread) * 2 * 128 + RECORD;
    let needed = region * u64::from(threads);
    if needed > device.capacity_bytes() {
        return Err(FusionError::Bounds(format!(
            "{threads} threads x {} ops need {needed} bytes, more than the profile's {} (use fewer ops)",
            spec.ops_per_thread,
            device.capacity_bytes()
        )));
    }
    let place = |t: u32, k: u32| {
        let base = u64::from(t) * region;
        let k = u64::from(k);
        Place {
            record: base + k * RECORD,
            fresh: base + file_bytes + k * RECORD,
            log: base + 2 * file_bytes + k * 2 * 128,
        }
    };
    if spec.workload == Workload::ReadModifyWrite {
        // The files exist before the measured run.
        for t in 0..threads {
            let at = device.idle_at();
            device.write_ranges(
                csd_device::IoPath::Internal,
                at,
                &[(place(t, 0).record, file_bytes)],
                None,
            )?;
        }
        device.reset_measurements();
    }
    let pcie = profile.host_interface.pcie_command_ns;
    let cores = profile.device_cpu.cores as usize;
    let m = sim::run(
        &mut device,
        cores,
        pcie,
        threads,
        spec.ops_per_thread,
        |t, k| ops::plan(design, spec.workload, place(t, k), costs),
    )?;
    let secs = m.elapsed_ns.max(1) as f64 / 1e9;
    Ok(Point {
        threads,
        ops_per_sec: m.ops as f64 / secs,
        mb_per_sec: (m.ops * RECORD) as f64 / secs / 1e6,
        mean_latency_ns: m.latency_sum_ns as f64 / m.ops.max(1) as f64,
    })
}
