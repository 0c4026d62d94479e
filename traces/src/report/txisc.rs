//! TxISC's reports: `csd txbench` (Fig. 3) and `csd txapps` (Figs. 4–5).

use csd_device::invocation::Breakdown;
use csd_device::txn::bench::Measured;
use csd_device::txn::ExecMode;
use serde::{Deserialize, Serialize};

/// `csd txbench`: TxISC's read/write task under each execution mode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxbenchRun {
    pub profile: String,
    pub file_bytes: u64,
    pub request_bytes: u64,
    pub seed: u64,
    /// Points measured in virtual time on `profile`. `csd repro` also stores Fig. 3's
    /// timing-off points here, measured on a profile named "… (flash timing off)".
    pub flash_timing_on: Vec<Measured>,
    /// Flash timing off in virtual time (QD 1, on the profile with its NAND operations
    /// and transfers taking a nanosecond): what remains is the firmware's request handling
    /// and mapping work on its core, the model behind `csd repro`'s §V-B drops. Empty in
    /// runs stored before it was added.
    #[serde(default)]
    pub flash_timing_off_model: Vec<Measured>,
    /// This machine's CPU time to simulate a request with flash timing off: the simulator's
    /// own speed, not a device figure. Empty when the run skipped it (`--no-cpu`).
    pub flash_timing_off: Vec<CpuPoint>,
    /// Bytes of one delta entry in this model, and per page it maps.
    pub delta_entry_bytes: usize,
    pub delta_page_bytes: usize,
}

/// Firmware CPU time per request with flash timing off (timed on the machine that ran it:
/// the one figure no run repeats).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuPoint {
    pub mode: ExecMode,
    pub write_pct: u32,
    pub requests: u64,
    pub ns_per_request: f64,
}

/// `csd txapps`: each application under each placement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxappsRun {
    pub profile: String,
    pub sizes: Sizes,
    pub seed: u64,
    pub runs: Vec<AppRun>,
}

/// The three applications of TxISC §V-C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TxApp {
    BitmapDecompress,
    Bfs,
    Compact,
}

impl TxApp {
    pub const ALL: [TxApp; 3] = [TxApp::BitmapDecompress, TxApp::Bfs, TxApp::Compact];

    /// Its built-in task's name (also its name on the command line and in reports).
    pub fn task(self) -> &'static str {
        match self {
            TxApp::BitmapDecompress => "bitmap-decompress",
            TxApp::Bfs => "bfs",
            TxApp::Compact => "compact",
        }
    }
}

impl std::str::FromStr for TxApp {
    type Err = String;

    fn from_str(s: &str) -> Result<TxApp, String> {
        TxApp::ALL
            .into_iter()
            .find(|a| a.task() == s)
            .ok_or_else(|| {
                format!("unknown application '{s}' (expected bitmap-decompress, bfs or compact)")
            })
    }
}

/// Where an application ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    Tx,
    File,
    HostOnly,
}

impl Placement {
    pub fn name(self) -> &'static str {
        match self {
            Placement::Tx => "tx",
            Placement::File => "file",
            Placement::HostOnly => "host-only",
        }
    }
}

/// Input sizes. `scale` 1.0 is the paper's (16 MiB → 256 MiB bitmap; a LiveJournal-sized
/// graph; 4 × 8 MiB runs to compact).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sizes {
    pub bitmap_output_bytes: u64,
    pub graph_nodes: u32,
    pub graph_degree: u32,
    pub runs: u32,
    pub run_records: u32,
}

/// What one application run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppRun {
    pub app: TxApp,
    pub placement: Placement,
    pub latency_ns: u64,
    pub mb_per_s: f64,
    pub breakdown: Breakdown,
    /// Share of the latency spent in I/O (reads, writes, transfers, commands).
    pub io_share: f64,
    pub result: serde_json::Value,
}
