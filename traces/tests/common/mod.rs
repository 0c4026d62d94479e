//! What the replay test binaries share.

use csd_device::storagefs::{StageRun, StageRunner};
use csd_hostfs::ndp::{Computed, NdpCompute};
use csd_sdk::cisc::Stage;

/// A stage runner without a Wasm engine: its output is the head of its input (up to 64
/// bytes), a fuel per byte it took.
pub struct Echo;

impl StageRunner for Echo {
    fn run(&mut self, _: &Stage, a: &[u8], b: &[u8], max: usize) -> Result<StageRun, String> {
        Ok(StageRun {
            output: a[..a.len().min(max).min(64)].to_vec(),
            fuel: (a.len() + b.len()) as u64,
        })
    }
}

/// An NDP computation that returns the bytes it was given, costing 25 µs of device CPU.
pub struct Sum;

impl NdpCompute for Sum {
    fn compute(&mut self, _path: &str, data: Vec<u8>) -> Result<Computed, String> {
        Ok(Computed {
            ret: (data.len() as u64).to_le_bytes().to_vec(),
            compute_ns: 25_000,
        })
    }
}
