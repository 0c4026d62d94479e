//! The `csd` tool's library half: what its tests and benchmarks share with the binary.

/// The example tasks of `tasks/`, compiled to Wasm by `build.rs` and embedded here.
pub mod isc;
pub mod ndp;
pub mod tasks;
pub mod txapps;

pub mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_tasks.rs"));

    /// The Wasm module of a built-in task.
    pub fn task(name: &str) -> Option<&'static [u8]> {
        BUILTIN_TASKS
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.wasm)
    }
}
