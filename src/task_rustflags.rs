// Shared by `build.rs` (the built-in tasks, through `include!`) and `csd task build` (a
// user's task), so both build the same kind of module.

/// The rustc flags a task is built with, separated by 0x1f as `CARGO_ENCODED_RUSTFLAGS`
/// wants:
/// - `+simd128`: the kernels' loops vectorise in Wasm as they do natively.
/// - A 64 KiB shadow stack, the default of wasm-ld, wasi-sdk and Emscripten (Rust's wasm32
///   default is 1 MiB). Rust lays the stack out first in linear memory, so a task that
///   outgrows it faults below address 0, a trap, instead of overwriting its data. The
///   smaller memory is also a shorter page scan when the pool resets a freed slot (an
///   empty task's memory is 32 pages instead of 272).
pub const TASK_RUSTFLAGS: &str = "-Ctarget-feature=+simd128\x1f-Clink-arg=-zstack-size=65536";
