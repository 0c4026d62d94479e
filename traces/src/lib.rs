//! # csd-traces: file-system and block traces
//!
//! The csd trace format ([`format`], documented for users in `traces/FORMAT.md`): JSON Lines
//! with a versioned header. [`TraceReader`] streams a trace in constant memory, resolving
//! file descriptors to paths and naming the line of every problem; [`TraceWriter`] writes one.
//! [`import`] converts strace output and block traces (fio iolog v3, MSR Cambridge, DiskSim).
//!
//! [`replay`] replays a trace through hostfs, the device and an offload design in virtual
//! time ([`isc`]: its task transactions, through a runner the task runtime provides);
//! [`store`] keeps every run (and stored traces) in an embedded sled database.

mod decision;
pub mod exchange;
pub mod format;
pub mod fuse;
pub mod import;
pub mod isc;
pub mod links;
pub mod offload;
pub mod prescan;
pub mod reader;
pub mod replay;
pub mod report;
pub mod repro;
pub mod spec;
pub mod store;
pub mod sweep;
pub mod system;
mod writer;

pub use format::{Event, FusePattern, Header, IscFile, Op, OpenFlags, SyncRangeFlags};
pub use reader::{Strictness, TraceError, TraceReader};
pub use writer::TraceWriter;
