//! What one op of a FusionFS benchmark costs under each design, as the segments a thread
//! goes through. The costs come from the profile (host software, PCIe, device cores) and from
//! running the real ops: stage fuel from the Wasm stages, StorageFS's work from executing the
//! CISC op (or each of its commands, for the firmware design) on a [`StorageFs`].

use super::design::{CpuSpeed, Design, FusionError, Workload};
use csd_device::storagefs::{Credentials, StageRunner, StorageFs};
use csd_device::{FusionCosts, Profile};
use csd_sdk::cisc::{self, CiscOp, FileRef, Stage, TxGrain};

/// Bytes of one record (FusionFS's benchmarks use 4 KiB blocks); append-CRC-write carries
/// this much data less the 4-byte CRC.
pub const RECORD: u64 = 4096;
const CRC: u64 = 4;

/// One step of an op, in the order a thread goes through them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    /// Work on the thread's own host core.
    Host(u64),
    /// A request crossing PCIe: the added delay, then `bytes` of DMA.
    Link {
        bytes: u64,
    },
    /// Data coming back over PCIe (no added delay: it answers a request).
    Dma {
        bytes: u64,
    },
    /// Work on a device core, scheduled across the device's cores.
    Core(u64),
    /// The medium: a read or a write of byte ranges, as one request.
    Read(Vec<(u64, u64)>),
    Write(Vec<(u64, u64)>),
}

/// Per-op costs that do not depend on where in the file the op lands.
#[derive(Clone, Debug)]
pub struct Costs {
    pub host: HostPart,
    pub fusion: FusionCosts,
    /// Device-core time of each StorageFS request, at the chosen clock.
    pub fusion_op_core_ns: u64,
    /// The fusion op's core time before its medium read (RMW: request and lookup) and after.
    pub fusion_pre_read_core_ns: u64,
    /// The firmware design's device-core time of each call of the op, in order.
    pub firmware_call_core_ns: [u64; 2],
    /// Host CPU time of the data processing (CRC or XOR) the app does itself.
    pub host_compute_ns: u64,
}

#[derive(Clone, Debug)]
pub struct HostPart {
    pub syscall_ns: u64,
}

/// Scales a device-core time measured at the fast clock to `speed`.
fn at_clock(ns: f64, f: &FusionCosts, speed: CpuSpeed) -> u64 {
    let scale = match speed {
        CpuSpeed::Fast => 1.0,
        CpuSpeed::Slow => f.fast_clock_ghz / f.slow_clock_ghz,
    };
    (ns * scale).round() as u64
}

/// StorageFS's device-core time for one submitted op, at the fast clock: taking the request
/// off its queue, the entries it examines, its stages, and copying its journal or op log
/// into device RAM (the medium gets only the in-place data).
pub fn core_ns(profile: &Profile, done: &csd_device::storagefs::Submitted) -> f64 {
    let cpu = &profile.device_cpu;
    cpu.request_ns as f64
        + (done.cost.entries * cpu.metadata_entry_ns) as f64
        + done.cost.fuel as f64 * cpu.ns_per_fuel
        + done.cost.log_bytes as f64 * 1e9 / profile.host.copy_bytes_per_sec as f64
}

/// Runs the workload's op once on a scratch StorageFS (and its commands one by one) to
/// measure what StorageFS and the stages cost.
pub fn measure(
    profile: &Profile,
    workload: Workload,
    speed: CpuSpeed,
    runner: &mut dyn StageRunner,
) -> Result<Costs, FusionError> {
    let fusion = profile
        .fusion
        .clone()
        .ok_or_else(|| FusionError::Profile(profile.name.clone()))?;
    let host_ns_per_fuel = profile
        .host
        .cpu_ns_per_fuel
        .ok_or_else(|| FusionError::Profile(profile.name.clone()))?;
    let who = Credentials { uid: 1 };
    let fs_err = |e: csd_device::storagefs::FsError| FusionError::Op(e.to_string());
    let mut fs = StorageFs::new();
    let fd = fs.open(who, "/bench", true, runner).map_err(fs_err)?;
    let file = FileRef::Fd(fd);
    let block: Vec<u8> = (0..RECORD).map(|i| (i * 7 % 251) as u8).collect();
    // A first block, so read-modify-write has something to read.
    fs.submit(who, &single_append(file, block.clone()), runner)
        .map_err(fs_err)?;
    let (op, commands, host_stage) = match workload {
        Workload::AppendCrcWrite => {
            let data = block[..(RECORD - CRC) as usize].to_vec();
            let op = cisc::append_crc_write(file, data.clone(), TxGrain::Macro)?;
            let commands = vec![
                single_append(file, data.clone()),
                single_append(file, vec![0; 4]),
            ];
            (op, commands, (Stage::Crc32, data, Vec::new()))
        }
        Workload::ReadModifyWrite => {
            let mask = vec![0x5a; RECORD as usize];
            let op = cisc::read_modify_write(file, 0, mask.clone(), TxGrain::Macro)?;
            let mut b = cisc::CiscBuilder::new();
            b.pread(file, 0, RECORD as u32);
            let read = b.build()?;
            let mut b = cisc::CiscBuilder::new();
            let d = b.input(mask.clone());
            b.pwrite(file, 0, d);
            (
                op,
                vec![read, b.build()?],
                (Stage::Xor, block.clone(), mask),
            )
        }
    };
    let fused = fs.submit(who, &op, runner).map_err(fs_err)?;
    let mut firmware = [0u64; 2];
    for (ns, c) in firmware.iter_mut().zip(&commands) {
        let done = fs.submit(who, c, runner).map_err(fs_err)?;
        *ns = at_clock(core_ns(profile, &done), &fusion, speed);
    }
    let (stage, a, b) = host_stage;
    let host_fuel = runner
        .run(&stage, &a, &b, cisc::MAX_SLOT_BYTES)
        .map_err(FusionError::Op)?
        .fuel;
    let fused_ns = core_ns(profile, &fused);
    let cpu = &profile.device_cpu;
    let pre_read = (cpu.request_ns + 2 * cpu.metadata_entry_ns) as f64;
    Ok(Costs {
        host: HostPart {
            syscall_ns: profile.host.syscall_ns,
        },
        fusion_op_core_ns: at_clock(fused_ns, &fusion, speed),
        fusion_pre_read_core_ns: at_clock(pre_read.min(fused_ns), &fusion, speed),
        firmware_call_core_ns: firmware,
        host_compute_ns: (host_fuel as f64 * host_ns_per_fuel).round() as u64,
        fusion,
    })
}

fn single_append(file: FileRef, data: Vec<u8>) -> CiscOp {
    let mut b = cisc::CiscBuilder::new();
    let d = b.input(data);
    b.append(file, d);
    b.build().expect("a one-command op is valid")
}

/// Where op `k` of a thread lands: the byte offset of its record, and for NOVA the offset of
/// a fresh copy-on-write page and of its log entry.
#[derive(Clone, Copy, Debug)]
pub struct Place {
    pub record: u64,
    pub fresh: u64,
    pub log: u64,
}

/// The segments of one op.
// Long: one arm per design and workload, each the sequence of calls that design makes.
pub fn plan(design: Design, workload: Workload, at: Place, c: &Costs) -> Vec<Seg> {
    use Seg::*;
    let f = &c.fusion;
    let sys = c.host.syscall_ns;
    let data = RECORD - CRC;
    let (rec, crc_at) = (at.record, at.record + data);
    let nova_log = |off: u64| Write(vec![(off, f.nova_log_bytes)]);
    match (design, workload) {
        (Design::KernelDax, Workload::AppendCrcWrite) => vec![
            Host(c.host_compute_ns + sys + f.kernel_fs_op_ns + f.journal_ns),
            Write(vec![(rec, data)]),
            Host(sys + f.kernel_fs_op_ns + f.journal_ns),
            Write(vec![(crc_at, CRC)]),
        ],
        (Design::KernelDax, Workload::ReadModifyWrite) => vec![
            Host(sys + f.kernel_fs_op_ns),
            Read(vec![(rec, RECORD)]),
            Host(c.host_compute_ns + sys + f.kernel_fs_op_ns),
            Write(vec![(rec, RECORD)]),
        ],
        // NOVA never writes in place: an append of a partial page copies the page.
        (Design::Nova, Workload::AppendCrcWrite) => vec![
            Host(c.host_compute_ns + sys + f.nova_fs_op_ns),
            Write(vec![(rec, data)]),
            nova_log(at.log),
            Host(sys + f.nova_fs_op_ns),
            Read(vec![(rec, data)]),
            Write(vec![(at.fresh, RECORD)]),
            nova_log(at.log + f.nova_log_bytes),
        ],
        (Design::Nova, Workload::ReadModifyWrite) => vec![
            Host(sys + f.nova_fs_op_ns),
            Read(vec![(rec, RECORD)]),
            Host(c.host_compute_ns + sys + f.nova_fs_op_ns),
            Write(vec![(at.fresh, RECORD)]),
            nova_log(at.log),
        ],
        (Design::UserDirect, Workload::AppendCrcWrite) => vec![
            Host(c.host_compute_ns + f.user_lib_op_ns + f.user_append_ns),
            Write(vec![(rec, data)]),
            Host(f.user_lib_op_ns + f.user_append_ns),
            Write(vec![(crc_at, CRC)]),
        ],
        (Design::UserDirect, Workload::ReadModifyWrite) => vec![
            Host(f.user_lib_op_ns),
            Read(vec![(rec, RECORD)]),
            Host(c.host_compute_ns + f.user_lib_op_ns),
            Write(vec![(rec, RECORD)]),
        ],
        (Design::Firmware, Workload::AppendCrcWrite) => vec![
            Host(c.host_compute_ns),
            Link { bytes: data },
            Core(c.firmware_call_core_ns[0]),
            Write(vec![(rec, data)]),
            Link { bytes: CRC },
            Core(c.firmware_call_core_ns[1]),
            Write(vec![(crc_at, CRC)]),
        ],
        (Design::Firmware, Workload::ReadModifyWrite) => vec![
            Link { bytes: 0 },
            Core(c.firmware_call_core_ns[0]),
            Read(vec![(rec, RECORD)]),
            Dma { bytes: RECORD },
            Host(c.host_compute_ns),
            Link { bytes: RECORD },
            Core(c.firmware_call_core_ns[1]),
            Write(vec![(rec, RECORD)]),
        ],
        // StorageFS puts the CRC at the end of the block's buffer in device RAM and writes the
        // record once (FusionFS's `vfio_devfs_put_checksum`), where the host-side designs make
        // two writes, the second a 4-byte read-modify-write of the medium.
        (Design::Fusion, Workload::AppendCrcWrite) => vec![
            Link { bytes: data },
            Core(c.fusion_op_core_ns),
            Write(vec![(rec, RECORD)]),
        ],
        (Design::Fusion, Workload::ReadModifyWrite) => vec![
            Link { bytes: RECORD },
            Core(c.fusion_pre_read_core_ns),
            Read(vec![(rec, RECORD)]),
            Core(c.fusion_op_core_ns - c.fusion_pre_read_core_ns),
            Write(vec![(rec, RECORD)]),
        ],
    }
}
