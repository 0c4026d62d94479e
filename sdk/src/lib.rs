//! # csd-sdk: what a task author uses (to come)
//!
//! Guest-side safe wrappers over the `csd_v1` ABI (`args()`, `File::read_at`, `ret()`, `log!`)
//! for tasks compiled to `wasm32-unknown-unknown`. Depends on no other csdlab crate.
