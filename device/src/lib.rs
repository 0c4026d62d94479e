//! # csd-device: a deterministic, virtual-time model of a computational SSD
//!
//! The device owns all flash state and all virtual time. Nothing here reads a wall clock or an
//! unseeded random source, and no iteration order depends on hashing, so the same operations
//! in the same order always produce the same completions — the property every csdlab report
//! and snapshot test relies on.
//!
//! - [`geometry`]: channels × dies × planes × blocks × pages, over-provisioning.
//! - [`timing`]: latencies and the per-die / per-channel / link busy-until clocks.
//! - [`ftl`]: page-level L2P + OOB P2L, out-of-place writes, greedy GC, trim, GC-forbid pins.
//! - [`txn`]: TxISC — snapshot descriptors, delta mappings, the task table, atomic commit.
//! - [`durable`]: what survives a power loss, and recovery from it.
//! - [`persist`]: SIFT's staging ring, range-tree coalescing, inode dedup, windowed replay.
//! - [`storagefs`]: FusionFS's firmware file system: CISC ops, MacroTx/MicroTx, fair cores.
//! - [`profile`]: the TOML device profiles shipped with csdlab.
//! - [`cost`]: device-CPU and accelerator cost models (task compute time).
//! - [`device`]: [`Device`], the API the rest of csdlab uses.
//! - [`synth`]: a fio-like closed-loop workload driver (`csd device run`).
//!
//! ```
//! use csd_device::{DataMode, Device, IoPath, Lpn, Profile, VirtualTime};
//! let profile = Profile::load("daisyplus-femu").unwrap();
//! let mut dev = Device::new(&profile, DataMode::Payloads).unwrap();
//! let page = vec![7u8; dev.page_size() as usize];
//! let w = dev.write(IoPath::Host, VirtualTime::ZERO, Lpn(42), 1, Some(&page)).unwrap();
//! let mut back = vec![0u8; page.len()];
//! let r = dev.read(IoPath::Host, w.done, Lpn(42), 1, Some(&mut back)).unwrap();
//! assert_eq!(back, page);
//! assert!(r.flash_ns >= 80_000, "one 80 µs page read");
//! ```

pub mod addr;
pub mod buffer;
pub mod cost;
pub mod crash;
pub mod device;
pub mod durable;
pub mod error;
pub mod file_mode;
pub mod ftl;
pub mod geometry;
pub mod invocation;
pub mod isp;
pub mod persist;
pub mod profile;
pub mod rng;
pub mod stamp;
pub mod storagefs;
pub mod synth;
pub mod timing;
pub mod txn;

pub use addr::{BlockId, ChannelId, DieId, Extent, Lpn, PageAddr, Ppn, VirtualTime};
pub use cost::{Accelerator, Accelerators, DeviceCpu, FusionCosts, HostCosts};
pub use device::{Completion, DataMode, Device, DeviceCounters, IoCounters, IoPath};
pub use error::DeviceError;
pub use file_mode::FileMode;
pub use ftl::{Ftl, FtlCounters, GcWork};
pub use geometry::Geometry;
pub use profile::{FtlPolicy, Profile, ProfileError};
pub use stamp::ContentStamp;
pub use timing::{transfer_ns, LinkDirection};
pub use txn::{FileId, RecoveryReport, TaskId, TxError, TxnStats};
