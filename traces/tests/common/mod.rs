//! What the replay test binaries share.

use csd_hostfs::ndp::{Computed, NdpCompute};

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
