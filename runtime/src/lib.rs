//! # csd-runtime: in-storage task execution (to come)
//!
//! The wasmtime embedding: module cache, the `csd_v1` task ABI, per-invocation limits (fuel,
//! memory, stack), task invocations as transactions (TxISC / FileISC / BlockISC) and CISC-op
//! pipelines (FusionFS). Never sees a physical address: file I/O goes through `csd_device`.
