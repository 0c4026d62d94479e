//! The comparison's vocabulary: designs, workloads, device-core speeds, and its errors.

use csd_sdk::cisc::CiscError;
use serde::{Deserialize, Serialize};

/// A file-system design of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Design {
    KernelDax,
    Nova,
    UserDirect,
    Firmware,
    Fusion,
}

impl Design {
    pub const ALL: [Design; 5] = [
        Design::KernelDax,
        Design::Nova,
        Design::UserDirect,
        Design::Firmware,
        Design::Fusion,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Design::KernelDax => "kernel-dax",
            Design::Nova => "nova",
            Design::UserDirect => "user-direct",
            Design::Firmware => "firmware",
            Design::Fusion => "fusion",
        }
    }

    /// Whether its file-system work runs on the device cores (so their clock matters).
    pub fn on_device(self) -> bool {
        matches!(self, Design::Firmware | Design::Fusion)
    }
}

/// The benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    AppendCrcWrite,
    ReadModifyWrite,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::AppendCrcWrite => "append-crc-write",
            Workload::ReadModifyWrite => "read-modify-write",
        }
    }
}

/// The device cores' clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpuSpeed {
    Fast,
    Slow,
}

/// Why a comparison could not run.
#[derive(Debug, thiserror::Error)]
pub enum FusionError {
    #[error("profile '{0}' has no [fusion] table or no host.cpu_ns_per_fuel: it does not describe FusionFS's testbed (use optane-csd)")]
    Profile(String),
    #[error("{0}")]
    Op(String),
    #[error(transparent)]
    Cisc(#[from] CiscError),
    #[error(transparent)]
    Device(#[from] csd_device::DeviceError),
    #[error("{0}")]
    Bounds(String),
}
