//! Systems under test: what a trace's operations run on.
//!
//! A [`System`] owns everything it simulates (its device, its clock, its file system or
//! systems) and applies a trace's operations one at a time, each begun at a virtual time the
//! replay chose. The replay ([`crate::replay`]) keeps only the trace's bookkeeping: each
//! pid's clock, latencies, skips and errors. Two kinds exist:
//!
//! - [`HostSystem`]: hostfs over the device, under one offload design (frag-s, frag-m,
//!   FSR, LightFS), with the task runtime for `isc` ops;
//! - [`DeviceSystem`]: the bare device, for block traces (`bread`, `bwrite`);
//! - [`FusionSystem`]: FusionFS's StorageFS in the device, taking file operations itself
//!   with no `HostFs` in front: `firmware` (one round trip per operation) or `fusion` (a
//!   trace's `cisc` ops whole).
//! - [`IspfsSystem`]: ISPFS on the PCM board, no page cache, its command files running the
//!   trace's ISP instructions on the engine.

pub mod contents;
mod device;
mod fusion;
mod host;
mod interface;
mod ispfs;
mod placement;
mod target;

pub use device::DeviceSystem;
pub use fusion::FusionSystem;
pub use host::{ComputeFactory, HostSystem, OpRunners};
pub use interface::{
    Applied, FusionTotals, IspTotals, NdpTotals, OpError, SetupError, System, Totals,
    FAILED_IN_TRACE, MAX_RW_COUNT,
};
pub use ispfs::IspfsSystem;
pub use target::{build, ReplayTarget};
