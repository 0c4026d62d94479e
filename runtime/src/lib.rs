//! # csd-runtime: in-storage tasks on the simulated device
//!
//! Tasks are WebAssembly modules (no WASI) that import the `csd_v1` ABI ([`abi`]) and export
//! `memory` and `run: () -> i32`. The runtime compiles each module once ([`TaskEngine`], with
//! an on-disk cache), instantiates it fresh for every invocation from a pooled slot, enforces
//! per-invocation limits (fuel, memory, return size; wasm stack engine-wide), and routes the
//! task's file I/O through the device model. Every invocation returns its result bytes and a
//! [`Breakdown`] of its latency: `read_file`, `compute` (fuel × the profile's `ns_per_fuel`),
//! `write`, `dma`, `others`.
//!
//! The runtime never sees a physical address: files are byte ranges of the device's logical
//! space, and all flash work goes through `csd_device::Device`.

pub mod abi;
mod engine;
mod error;
mod invoke;
mod limits;

pub mod stages;
pub mod volume;

/// How a task may use a registered file (re-exported: the trace format shares it).
pub use csd_device::FileMode;
pub use engine::{default_cache_dir, Allocation, EngineConfig, Task, TaskEngine};
pub use error::TaskError;
pub use invoke::{
    Breakdown, ConflictPolicy, Csd, ExecMode, IscContext, Storage, TaskLimits, TaskReport,
};
pub use stages::WasmStages;
pub use volume::{Extent, FileLayout, Volume, VolumeError};
