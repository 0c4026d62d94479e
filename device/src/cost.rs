//! Hardware-cost models: the device CPU that runs tasks, and fixed-function accelerators.
//!
//! LightFS Table III times its applications on the Cosmos+ OpenSSD's embedded ARM core and on a
//! grep accelerator. csdlab runs tasks as WebAssembly and counts *fuel* (about one unit per Wasm
//! instruction); a profile turns fuel into device-CPU time with `ns_per_fuel`, calibrated once
//! per profile and documented there. Accelerators compute natively and charge
//! `setup_ns + ceil(bytes / unit_bytes) × ns_per_unit`. Numbers live in profiles, never here.

use serde::{Deserialize, Serialize};

/// The embedded CPU that runs in-storage tasks, from a profile's `[device_cpu]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceCpu {
    /// e.g. "ARM Cortex-A9 @ 1 GHz".
    pub model: String,
    /// Cores available to tasks.
    pub cores: u32,
    /// Device-CPU nanoseconds per unit of Wasm fuel.
    pub ns_per_fuel: f64,
    /// Device DRAM: the default cap on a task's linear memory.
    pub dram_bytes: u64,
    /// Firmware time to examine one metadata entry (a directory entry while resolving a path
    /// in the device, a `.ndpmeta` entry while retrieving layouts).
    pub metadata_entry_ns: u64,
    /// Firmware time to handle one in-storage I/O request before its flash commands go out
    /// (dequeue, translate, issue), booked on the firmware core: what remains of a request
    /// when flash timing is off (TxISC §V-B). 0 where the profile does not model it.
    #[serde(default)]
    pub request_ns: u64,
    /// Firmware time to step over one entry of a small structure that stays in the core's
    /// caches: an extent in a snapshot's extent array, a node of a delta-mapping tree of a few
    /// thousand entries. `metadata_entry_ns` prices an entry fetched from DRAM (a random L2P
    /// slot, a directory block); a cached one costs a fraction of that. Absent: the profile
    /// does not tell them apart, and both cost `metadata_entry_ns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_entry_ns: Option<u64>,
    /// Firmware time to record one delta mapping (TxISC §III-B): take an entry from the
    /// allocator, fill it, link it into the snapshot's tree and rebalance it. 0 where the
    /// profile does not model it.
    #[serde(default, skip_serializing_if = "crate::timing::is_zero")]
    pub delta_record_ns: u64,
}

impl DeviceCpu {
    /// See [`DeviceCpu::cached_entry_ns`].
    pub fn cached_entry_ns(&self) -> u64 {
        self.cached_entry_ns.unwrap_or(self.metadata_entry_ns)
    }

    /// Compute time of `fuel` units, rounded to the nearest nanosecond.
    pub fn compute_ns(&self, fuel: u64) -> u64 {
        (fuel as f64 * self.ns_per_fuel).round() as u64
    }
}

/// A fixed-function engine: cost grows in whole units of input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accelerator {
    pub unit_bytes: u64,
    pub ns_per_unit: u64,
    #[serde(default)]
    pub setup_ns: u64,
}

impl Accelerator {
    pub fn cost_ns(&self, bytes: u64) -> u64 {
        self.setup_ns + bytes.div_ceil(self.unit_bytes.max(1)) * self.ns_per_unit
    }
}

/// The accelerators a profile's device has, from its `[accelerators.*]` tables.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accelerators {
    /// String search (LightFS's Grep-ACC; ISPFS's word-query engine).
    pub grep: Option<Accelerator>,
    /// Streaming integer sums (STATS).
    pub stats: Option<Accelerator>,
}

/// Host-side software costs of the testbed's file system, from a profile's `[host]` table
/// (LightFS Table V gives filefrag's latency on ext4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCosts {
    /// CPU time of one `fiemap`/filefrag call whose metadata is cached.
    pub fiemap_ns: u64,
    /// CPU time to look up one path component in the host's metadata cache.
    pub path_component_ns: u64,
    /// CPU time for LightFS-Host to look up one path component in its own user-space
    /// `.ndpmeta` cache.
    pub index_lookup_ns: u64,
    /// Host-CPU nanoseconds per unit of Wasm fuel, for running a task's code on the host
    /// instead of in the device (TxISC's host-only baselines). Absent where the testbed's
    /// host CPU is not characterised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ns_per_fuel: Option<f64>,
    /// CPU time of one `read`/`write` system call on the host, apart from its copy: what a
    /// host-only run pays per file I/O call that an in-storage task does not.
    #[serde(default = "default_syscall_ns")]
    pub syscall_ns: u64,
    /// Bandwidth of one host core copying between the page cache and a user buffer.
    #[serde(default = "default_copy_bytes_per_sec")]
    pub copy_bytes_per_sec: u64,
    /// Kernel work per 4 KiB page a buffered `read`/`write` touches, beyond the copy: finding
    /// or allocating the page-cache page, locking it, marking it dirty or up to date, the
    /// file system's block mapping (ext4's delayed allocation). 0 where not modelled.
    #[serde(default)]
    pub page_cache_page_ns: u64,
    /// A page fault on a mapped file, apart from the file system's work for the page: the
    /// exception's entry and exit, the VMA lookup, the page-table update. 0 where not
    /// modelled (then nothing that maps files can be run on the profile).
    #[serde(default)]
    pub page_fault_ns: u64,
}

/// The host file systems FusionFS is compared with, and its device cores' two speeds, from a
/// profile's `[fusion]` table (`csd fusion`). Each is a cost of software the profile's
/// testbed ran; the profile says where each comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FusionCosts {
    /// The device cores' clock in the default (fast) configuration; `device_cpu.ns_per_fuel`
    /// and `device_cpu.request_ns` are at this clock.
    pub fast_clock_ghz: f64,
    /// The clock of the slow-device-CPU study: device-core times scale by fast / slow.
    pub slow_clock_ghz: f64,
    /// ext4-DAX's in-kernel work per `read`/`write` beyond the system call itself: VFS, the
    /// inode lock, DAX's block mapping.
    pub kernel_fs_op_ns: u64,
    /// The journal work of an op that changes metadata (an append's size and block
    /// allocation), done under the file system's one journal lock.
    pub journal_ns: u64,
    /// NOVA's in-kernel work per op beyond the system call: its per-inode log and radix tree,
    /// the copy-on-write page allocation.
    pub nova_fs_op_ns: u64,
    /// The log entry NOVA persists per write (plus the log tail it updates).
    pub nova_log_bytes: u64,
    /// SplitFS's user-space work per data op (its mapping lookup), with no system call.
    pub user_lib_op_ns: u64,
    /// What an append adds in SplitFS: its staging file's bookkeeping and its share of the
    /// relink that moves staged blocks into the file (the metadata op the kernel does).
    pub user_append_ns: u64,
}

/// The host's page (x86-64's and ARMv7's): what a fault maps and what the page cache works
/// in, whatever the file system's block (16 KiB on `cosmos-plus`, 512 B on `optane-csd`).
pub const HOST_PAGE_BYTES: u64 = 4096;

/// The host pages `off..off + len` of a file touches.
pub fn host_pages(off: u64, len: u64) -> u64 {
    match len {
        0 => 0,
        _ => off.saturating_add(len).div_ceil(HOST_PAGE_BYTES) - off / HOST_PAGE_BYTES,
    }
}

impl HostCosts {
    /// What a page fault on a mapped file costs the host: `page_fault_ns`, or, where the
    /// profile gives none, a system call's entry and exit (`syscall_ns`), the assumption
    /// `pcm-zynq` makes for its own fault.
    pub fn fault_or_syscall_ns(&self) -> u64 {
        match self.page_fault_ns {
            0 => self.syscall_ns,
            ns => ns,
        }
    }

    /// The page cache's work for `off..off + len` of a file beyond the copy:
    /// `page_cache_page_ns` per host page.
    pub fn page_cache_ns(&self, off: u64, len: u64) -> u64 {
        host_pages(off, len).saturating_mul(self.page_cache_page_ns)
    }

    /// The faults that map `off..off + len` of a file: one per host page, each
    /// [`HostCosts::fault_or_syscall_ns`].
    pub fn faults_ns(&self, off: u64, len: u64) -> u64 {
        host_pages(off, len).saturating_mul(self.fault_or_syscall_ns())
    }
}

/// A profile that does not say: about a microsecond for entry, VFS and file-system work of
/// a cached `read`/`write` (lmbench's `lat_syscall read` on a current Xeon is 0.1–0.3 µs for
/// a null read; a page-cache hit adds the VFS and page lookups).
fn default_syscall_ns() -> u64 {
    1000
}

/// A profile that does not say: ~10 GB/s, one core's `copy_user` bandwidth on a server CPU.
fn default_copy_bytes_per_sec() -> u64 {
    10_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_round_up_to_units() {
        let a = Accelerator {
            unit_bytes: 16384,
            ns_per_unit: 203_000,
            setup_ns: 500,
        };
        assert_eq!(a.cost_ns(1), 203_500);
        assert_eq!(a.cost_ns(16384), 203_500);
        assert_eq!(a.cost_ns(16385), 406_500);
        let cpu = DeviceCpu {
            model: "x".into(),
            cores: 1,
            ns_per_fuel: 1.5,
            dram_bytes: 1,
            metadata_entry_ns: 1,
            request_ns: 0,
            cached_entry_ns: None,
            delta_record_ns: 0,
        };
        assert_eq!(cpu.compute_ns(3), 5);
    }

    #[test]
    fn host_costs_count_host_pages_not_file_system_blocks() {
        assert_eq!(host_pages(0, 0), 0);
        assert_eq!(host_pages(4095, 2), 2);
        assert_eq!(
            host_pages(16384, 16384),
            4,
            "one 16 KiB block is four faults"
        );
        assert_eq!(host_pages(u64::MAX - 1, 10), 1, "no overflow at the end");
        let mut host = crate::Profile::load("cosmos-plus").unwrap().host;
        (host.syscall_ns, host.page_cache_page_ns, host.page_fault_ns) = (700, 100, 0);
        assert_eq!(
            host.faults_ns(0, 8192),
            1400,
            "a syscall's cost where no fault is given"
        );
        assert_eq!(host.page_cache_ns(100, 8192), 300);
    }
}
