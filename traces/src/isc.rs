//! Replaying `isc` ops: a task transaction over files of the replay's own file system.
//!
//! The task runtime sits above this crate (it depends on the traces' consumers, not the other
//! way round), so the replay talks to it through [`IscRunner`]: it writes the files' dirty
//! pages back, lends the device, the files' layouts and a reservation of free blocks to grow
//! them into, and takes back the device, the new layouts and what is left of the reservation.

use csd_device::{Device, Extent, VirtualTime};
use serde::Serialize;

/// One file an `isc` op lends to its task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LentFile {
    pub path: String,
    pub mode: csd_device::FileMode,
    /// The file's inode number: its identity to the device's transactions.
    pub id: u64,
    pub size_bytes: u64,
    /// Where the file lives, in file order.
    pub extents: Vec<Extent>,
}

/// What one task transaction did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IscOutcome {
    /// When the result was back on the host.
    pub done: VirtualTime,
    /// `None`: committed. `Some`: why the task failed or its transaction aborted (nothing it
    /// wrote is visible then).
    pub error: Option<String>,
    /// Every lent file's size and extents afterwards, in the order lent.
    pub files: Vec<(u64, Vec<Extent>)>,
    /// The reservation's runs no file took.
    pub pool_left: Vec<Extent>,
}

/// Runs the task of an `isc` op on a lent device.
pub trait IscRunner {
    /// Runs `task` with `args` as one transaction over `files` on `device`, starting at
    /// `at`; files may grow into `pool`. Returns the device whatever happens.
    fn run(
        &mut self,
        device: Device,
        at: VirtualTime,
        task: &str,
        args: &str,
        files: Vec<LentFile>,
        pool: Vec<Extent>,
    ) -> (Device, IscOutcome);
}

/// `isc` ops of a replay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct IscTotals {
    pub requests: u64,
    pub committed: u64,
    /// The task failed or its transaction aborted: rolled back.
    pub aborted: u64,
}
