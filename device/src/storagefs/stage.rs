//! How StorageFS runs a data-processing stage: through a [`StageRunner`], which the runtime
//! implements with wasmtime. The device crate never links a Wasm engine; it only charges the
//! fuel a stage burned to the device CPU.

use csd_sdk::cisc::Stage;

/// A stage's output and the fuel it burned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageRun {
    pub output: Vec<u8>,
    pub fuel: u64,
}

/// Runs CISC-op stages in a sandbox.
pub trait StageRunner {
    /// Runs `stage` over slot `a` (and `b`, empty for one-input stages). An unknown stage, a
    /// trap, an exhausted budget or an output over `max_output` bytes is an `Err` naming it.
    fn run(
        &mut self,
        stage: &Stage,
        a: &[u8],
        b: &[u8],
        max_output: usize,
    ) -> Result<StageRun, String>;
}
