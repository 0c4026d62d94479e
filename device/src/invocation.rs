//! What one task invocation on the device reports: its result, its fuel and where its
//! latency went. The task runtime produces it; it lives here, with the device's other
//! vocabulary, so that reports can be read (by the run store, `runs diff`, the dashboard)
//! without linking a Wasm engine.

use crate::txn::ExecMode;
use crate::VirtualTime;
use serde::Serialize;

/// Where one invocation's latency went (LightFS Fig. 3 vocabulary). The stages are
/// sequential, so they add up to the invocation's latency.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Breakdown {
    /// Flash reads of the task's input, on the device's internal path.
    pub read_file_ns: u64,
    /// Device-CPU time (fuel × ns_per_fuel) plus accelerator time.
    pub compute_ns: u64,
    /// Flash writes of the task's output.
    pub write_ns: u64,
    /// Arguments to the device and results back, over PCIe.
    pub dma_ns: u64,
    /// NVMe command handling for the offload request.
    pub others_ns: u64,
}

impl Breakdown {
    pub fn total_ns(&self) -> u64 {
        self.read_file_ns + self.compute_ns + self.write_ns + self.dma_ns + self.others_ns
    }
}

/// What a successful invocation produced.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct TaskReport {
    pub task: String,
    /// The bytes the task returned with `ret_write`.
    #[serde(skip)]
    pub ret: Vec<u8>,
    /// Fuel the task consumed.
    pub fuel: u64,
    pub breakdown: Breakdown,
    pub started: VirtualTime,
    pub finished: VirtualTime,
    pub logs: Vec<String>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub exec: ExecMode,
    /// Runs it took (more than 1 only when a conflict was retried).
    pub attempts: u32,
}

impl TaskReport {
    pub fn latency_ns(&self) -> u64 {
        self.finished.since(self.started)
    }

    /// The return bytes parsed as JSON (what `ret_json` in the SDK writes).
    pub fn ret_json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_slice(&self.ret)
    }
}
