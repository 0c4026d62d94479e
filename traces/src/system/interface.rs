//! The contract between a replay and the system it drives: [`System`], what an operation
//! comes to, and the errors a system reports.

use crate::format::Event;
use crate::isc::IscTotals;
use csd_device::{Device, DeviceCounters, IoPath, VirtualTime};
use csd_hostfs::ndp::Stages;
use serde::{Deserialize, Serialize};

/// Linux's `MAX_RW_COUNT`: the most one read or write system call moves (2 GiB − 4 KiB). A
/// longer request cannot come from a real program, and is refused per event.
pub const MAX_RW_COUNT: u64 = 0x7fff_f000;

/// The bytes a read or write call moves: what it returned, else what it asked for, refused
/// past [`MAX_RW_COUNT`].
pub fn rw_count(ev: &Event, len: u64) -> Result<u64, OpError> {
    let n = ev.ret.map_or(len, |r| r.max(0) as u64);
    if n > MAX_RW_COUNT {
        return Err(OpError::Range(format!(
            "length {n} is over Linux's per-call maximum of {MAX_RW_COUNT} bytes (MAX_RW_COUNT)"
        )));
    }
    Ok(n)
}

/// A system under test. Operations begin in time order: each [`System::begin`] is at or
/// after the previous one's start, and the system asserts it.
pub trait System {
    /// Its name in reports: the design (`lightfs`) or `device`.
    fn name(&self) -> String;

    /// When the operation in progress began.
    fn op_started(&self) -> VirtualTime;

    /// Begins the next operation at `start` (never before [`System::op_started`]): background
    /// work due by then runs first. Its failure is returned, and the operation still runs.
    fn begin(&mut self, start: VirtualTime) -> Result<(), String>;

    /// Whether the system takes a `cisc` op whole (FusionFS). A replay hands any other
    /// system the op's events one by one, each timed as its own operation.
    fn fuses(&self) -> bool {
        false
    }

    /// Applies one operation of the trace, begun at `start`.
    fn apply(&mut self, ev: &Event, start: VirtualTime) -> Result<Applied, OpError>;

    /// Whether the system replays a call that failed in the trace for a missing name as the
    /// path walk it made ([`System::walk_missing`]); others skip such calls.
    fn walks_missing(&self) -> bool {
        false
    }

    /// A call that failed in the trace because a name in `path` was missing (`ENOENT`),
    /// begun at `start`: the walk it made before it failed, as far as the path goes here.
    fn walk_missing(&mut self, path: &str, start: VirtualTime) -> Result<Applied, OpError> {
        let _ = (path, start);
        Ok(Applied::Skipped(FAILED_IN_TRACE.to_string()))
    }

    /// When the last operation ended.
    fn clock(&self) -> VirtualTime;

    /// Offload totals and device counters so far.
    fn totals(&self) -> Totals;

    /// Checks every invariant of the system's state; debug replays end with it.
    fn check_invariants(&self) -> Result<(), String>;
}

/// Why a call that failed in the trace is not replayed.
pub const FAILED_IN_TRACE: &str = "failed in the trace";

/// When the operation in progress began and when the last one ended: the clock of a system
/// whose model keeps none of its own (the bare device, StorageFS).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct OpClock {
    pub started: VirtualTime,
    pub ended: VirtualTime,
}

impl OpClock {
    /// Starts the next operation at `start`, never before the one in progress.
    pub fn begin(&mut self, start: VirtualTime) {
        assert!(
            start >= self.started,
            "operations begin in time order: {start:?} after {:?}",
            self.started
        );
        self.started = start;
        self.ended = start;
    }
}

/// What became of an operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    Done,
    /// Not replayed, for this reason (counted apart, not as a failure).
    Skipped(String),
}

/// A system's offload totals and device counters.
#[derive(Clone, Debug, PartialEq)]
pub struct Totals {
    pub ndp: Option<NdpTotals>,
    pub isc: Option<IscTotals>,
    pub fusion: Option<FusionTotals>,
    pub isp: Option<IspTotals>,
    /// The host file system's metadata journal (host designs).
    pub journal: Option<csd_hostfs::journal::JournalStats>,
    pub device: DeviceCounters,
}

/// ISP instructions a replay wrote to command files (the ispfs design).
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IspTotals {
    pub instructions: u64,
    /// Of them, refused by the engine (the reason went back through the command file).
    pub refused: u64,
    /// The engine's busy time, ns.
    pub engine_ns: u64,
    /// When the engine finished the last instruction, ns from the replay's start.
    pub engine_done_ns: u64,
    pub bytes_compared: u64,
    /// What host reads and writes waited for the engine's accesses in flight, ns.
    pub host_wait_ns: u64,
}

/// The offload requests of a replay.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct NdpTotals {
    pub requests: u64,
    pub files: u64,
    /// Mean per-file stages over every request.
    pub breakdown: Stages,
    pub pao: f64,
    /// Files the device read older than the host's copy (`csd_hostfs::ndp::stale_files`).
    #[serde(default)]
    pub stale_files: u64,
}

/// What a StorageFS replay (the firmware and fusion designs) asked of the device.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FusionTotals {
    /// Host↔device round trips.
    pub requests: u64,
    /// Of them, fused CISC ops.
    pub cisc_ops: u64,
    /// Commands StorageFS executed.
    pub commands: u64,
    /// Device-core time, ns (all cores).
    pub device_core_ns: u64,
    /// Fuel the device's stages burned.
    pub device_fuel: u64,
    /// Host CPU time spent modifying data the program read, ns.
    pub host_compute_ns: u64,
    /// What the replay left: names, the bytes their inodes hold (a linked file once), and
    /// a SHA-256 over every path, size and the 64 KiB chunks holding a byte other than
    /// zero, each with its index (fused and unfused replays of one program must leave the
    /// same).
    pub files: u64,
    pub bytes: u64,
    pub contents_sha256: String,
}

/// Why one op of the trace could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    #[error(transparent)]
    Fs(#[from] csd_hostfs::fs::FsError),
    #[error(transparent)]
    Ndp(#[from] csd_hostfs::ndp::NdpError),
    #[error("device: {0}")]
    Device(#[from] csd_device::DeviceError),
    #[error("task transaction rolled back: {0}")]
    IscAborted(String),
    #[error("{0}")]
    Range(String),
    #[error("StorageFS: {0}")]
    Storage(String),
    #[error("{0}")]
    Unsupported(String),
}

/// Why a system could not be set up for a trace.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("setting up the trace's initial files: {0}")]
    Files(String),
    #[error("device: {0}")]
    Device(#[from] csd_device::DeviceError),
    #[error("{0}")]
    Profile(String),
}

/// A block request (`bread`/`bwrite`) on `device` from `start`; returns when it completes.
/// It is checked against Linux's per-request limit (a larger one cannot be one request);
/// the device checks its own bounds.
pub(super) fn block_io(
    device: &mut Device,
    write: bool,
    start: VirtualTime,
    off: u64,
    len: u64,
) -> Result<VirtualTime, OpError> {
    if len > MAX_RW_COUNT || off.checked_add(len).is_none() {
        return Err(OpError::Range(format!(
            "block request at {off} of {len} bytes is over the per-request maximum of {MAX_RW_COUNT} bytes or overflows"
        )));
    }
    let c = if write {
        device.write_at(IoPath::Host, start, off, len, None)?
    } else {
        device.read_at(IoPath::Host, start, off, len, None)?
    };
    Ok(c.done)
}
