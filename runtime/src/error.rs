//! Why a task could not run, or was stopped. Every variant says what happened in terms a task
//! author can act on; the device is left serving after each of them.

use crate::volume::VolumeError;
use csd_device::DeviceError;

#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("not a valid WebAssembly module: {0}")]
    InvalidModule(String),
    #[error(
        "the module does not export {what} (a csd task exports `memory` and `run: () -> i32`)"
    )]
    MissingExport { what: &'static str },
    #[error("the module imports `{module}.{name}`, which csd does not provide (the task ABI is module `csd_v1`: {known})")]
    UnknownImport {
        module: String,
        name: String,
        known: String,
    },
    #[error("the task used up its compute budget of {budget} fuel (about {approx_ms} ms of device CPU): {hint}")]
    FuelExhausted {
        budget: u64,
        approx_ms: u64,
        /// What the task was doing, as far as the host saw: an endless loop, or a lot of I/O
        /// (host calls cost fuel per byte).
        hint: String,
    },
    #[error("host call `{call}` costs {cost} fuel (a call plus the {bytes} bytes it moves) but only {left} of the task's budget of {budget} fuel is left")]
    HostCallBudget {
        call: &'static str,
        bytes: u64,
        cost: u64,
        left: u64,
        budget: u64,
    },
    #[error("the task ran past its wall-clock limit of {limit_ms} ms and was stopped (the backstop behind its fuel budget)")]
    WallClock { limit_ms: u64 },
    #[error("the task tried to grow its memory to {wanted} bytes, over its cap of {cap} bytes (a task that reads a whole file holds all of it; `File::for_each_chunk` streams one)")]
    MemoryLimit { wanted: u64, cap: u64 },
    #[error("the task overflowed its call stack (deep recursion?)")]
    StackOverflow,
    #[error("host call `{call}`: guest range {ptr}..{end} is outside the task's {memory_bytes}-byte memory", end = *ptr as u64 + *len as u64)]
    BadPointer {
        call: &'static str,
        ptr: u32,
        len: u32,
        memory_bytes: u64,
    },
    #[error("host call `{call}`: file handle {handle} is not registered (this invocation registered {registered} file(s))")]
    BadHandle {
        call: &'static str,
        handle: i32,
        registered: usize,
    },
    #[error("host call `{call}`: file '{path}' (handle {handle}) is registered {mode}; {refused} refused")]
    ModeDenied {
        call: &'static str,
        handle: i32,
        path: String,
        mode: &'static str,
        refused: &'static str,
    },
    #[error("host call `{call}`: {reason}")]
    BadArgument { call: &'static str, reason: String },
    #[error("the task's return value exceeds the {cap}-byte limit")]
    ReturnTooLarge { cap: u64 },
    #[error("the device has no {0} accelerator in this profile")]
    NoAccelerator(&'static str),
    #[error("task panicked: {0}")]
    Panicked(String),
    #[error("task failed (run returned {code}){}", message.as_ref().map(|m| format!(": {m}")).unwrap_or_default())]
    Failed { code: i32, message: Option<String> },
    #[error("task trapped: {0}")]
    Trap(String),
    #[error(transparent)]
    Volume(#[from] VolumeError),
    #[error("transaction aborted: {0}")]
    Tx(#[from] csd_device::TxError),
    #[error("device: {0}")]
    Device(#[from] DeviceError),
    #[error("module cache: {0}")]
    Cache(String),
    #[error("wasm engine: {0}")]
    Engine(String),
}
