//! What one invocation may use, and what it does when its transaction loses a conflict.

use serde::Serialize;

/// What a transaction that loses a conflict does (TxISC §III-A: "the task that arrives later
/// can optionally retry or abort").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum ConflictPolicy {
    #[default]
    Abort,
    /// Run the task again from a fresh snapshot, up to `attempts` runs in all.
    Retry { attempts: u32 },
}

/// Per-invocation limits. A task that exceeds one is stopped with a [`crate::TaskError`].
#[derive(Clone, Debug, Serialize)]
pub struct TaskLimits {
    /// Compute budget in fuel (about one unit per Wasm instruction).
    pub fuel: u64,
    /// Linear-memory cap; `None` uses the profile's device DRAM.
    pub memory_bytes: Option<u64>,
    /// Largest return value a task may produce.
    pub max_return_bytes: u64,
    /// Real time one invocation may take before it is stopped: a backstop for whatever
    /// fuel does not bound. Generous, since hitting it makes a run depend on the machine.
    pub wall_clock_ms: u64,
}

impl Default for TaskLimits {
    fn default() -> Self {
        TaskLimits {
            fuel: 20_000_000_000,
            memory_bytes: None,
            max_return_bytes: 16 << 20,
            wall_clock_ms: 120_000,
        }
    }
}
