//! What the persistence path costs, and who pays: a profile's optional `[persist]` table.
//!
//! SIFT Table 3's configurations differ in *placement*: `vanilla` runs the longer background
//! path (journaling, checkpointing) on the host, `offload` and `coalesce` on the device's
//! cores. An [`Executor`] is one such placement: a CPU with its per-block and per-request
//! costs, a number of worker threads, and the I/O path its requests take (host requests pay
//! NVMe command handling and a PCIe DMA each way; the device's do not).

use super::service::{CheckpointStats, Config};
use crate::device::IoPath;
use crate::profile::at_most_a_second;
use serde::{Deserialize, Serialize};

// Placement is a cost concern: the service decides what is written, never on whose CPU.
impl Config {
    /// Where the longer background path runs (SIFT Table 3).
    pub fn placement(self) -> Placement {
        match self {
            Config::Vanilla => Placement::Host,
            Config::Offload | Config::Coalesce => Placement::Device,
        }
    }
}

/// CPU costs of SIFT's persistence path on the host and on the device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersistCosts {
    /// Hardware threads of the whole host: CPU utilisation is a share of them (SIFT eq. 1).
    pub host_cores: u32,
    /// Host CPU time of one call into the user-space file system (a buffered write, an fsync).
    pub host_call_ns: u64,
    /// Bytes per second one host core copies and checksums (page cache, snapshot buffers).
    pub host_copy_bytes_per_sec: u64,
    /// Host CPU time to build, submit and complete one NVMe request from user space.
    pub host_io_ns: u64,
    /// Host CPU time to interpret one replay record (locate it, order it).
    pub host_record_ns: u64,
    /// Host threads that replay a checkpoint in the host-journaling baseline.
    pub host_workers: u32,
    /// The same four costs on one device core.
    pub device_copy_bytes_per_sec: u64,
    pub device_io_ns: u64,
    pub device_record_ns: u64,
    /// Device threads that replay a checkpoint.
    pub device_workers: u32,
    /// Device CPU time to insert one raw update record into the coalescing range tree.
    pub coalesce_record_ns: u64,
}

impl PersistCosts {
    /// The field that makes this table unusable, with the reason.
    pub fn check(&self) -> Result<(), (String, String)> {
        for (field, value) in [
            ("host_cores", u64::from(self.host_cores)),
            ("host_copy_bytes_per_sec", self.host_copy_bytes_per_sec),
            ("host_workers", u64::from(self.host_workers)),
            ("device_copy_bytes_per_sec", self.device_copy_bytes_per_sec),
            ("device_workers", u64::from(self.device_workers)),
        ] {
            if value == 0 {
                return Err((format!("persist.{field}"), "must be greater than 0".into()));
            }
        }
        // As the firmware's steps: the path multiplies these by record and request counts
        // (2^32 records × 2 s < 2^64 ns).
        at_most_a_second(
            "persist",
            "one call, request or record",
            &[
                ("host_call_ns", self.host_call_ns),
                ("host_io_ns", self.host_io_ns),
                ("host_record_ns", self.host_record_ns),
                ("device_io_ns", self.device_io_ns),
                ("device_record_ns", self.device_record_ns),
                ("coalesce_record_ns", self.coalesce_record_ns),
            ],
        )
    }
}

impl PersistCosts {
    /// CPU time of the coalescing engine building its range tree over a batch (nothing for
    /// the raw-replay configurations). Every raw record is interpreted (located and put in
    /// staged-before-journaled order, `device_record_ns`, as a raw replay interprets it) and
    /// then inserted (`coalesce_record_ns`), both in the one execution context that feeds
    /// the tree (SIFT §4.3.1–4.3.2): unlike a raw replay's records, these are not spread
    /// over the device's workers.
    pub fn build_ns(&self, config: Config, batch: &CheckpointStats) -> u64 {
        match config {
            Config::Coalesce => {
                batch.raw_records * (self.device_record_ns + self.coalesce_record_ns)
            }
            Config::Vanilla | Config::Offload => 0,
        }
    }
}

/// Where the longer background path runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    Host,
    Device,
}

/// One placement's CPU and I/O path.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Executor {
    pub placement: Placement,
    pub copy_bytes_per_sec: u64,
    pub io_ns: u64,
    pub record_ns: u64,
    pub workers: u32,
}

impl Executor {
    pub fn new(costs: &PersistCosts, placement: Placement) -> Executor {
        match placement {
            Placement::Host => Executor {
                placement,
                copy_bytes_per_sec: costs.host_copy_bytes_per_sec,
                io_ns: costs.host_io_ns,
                record_ns: costs.host_record_ns,
                workers: costs.host_workers,
            },
            Placement::Device => Executor {
                placement,
                copy_bytes_per_sec: costs.device_copy_bytes_per_sec,
                io_ns: costs.device_io_ns,
                record_ns: costs.device_record_ns,
                workers: costs.device_workers,
            },
        }
    }

    /// The I/O path this executor's requests take to the flash.
    pub fn path(&self) -> IoPath {
        match self.placement {
            Placement::Host => IoPath::Host,
            Placement::Device => IoPath::Internal,
        }
    }

    /// CPU time to copy (and checksum) `bytes`.
    pub fn copy_ns(&self, bytes: u64) -> u64 {
        crate::timing::transfer_ns(bytes, self.copy_bytes_per_sec)
    }
}
