//! Which system a replay builds: [`ReplayTarget`] names it, [`build`] makes it.

use super::device::DeviceSystem;
use super::fusion::FusionSystem;
use super::host::{HostSystem, OpRunners};
use super::interface::{SetupError, System};
use crate::prescan::Prescan;
use csd_device::Profile;
use csd_hostfs::ndp::DesignKind;
use serde::{Deserialize, Serialize};

/// What a trace replays on: a host design, the bare device, or FusionFS's StorageFS. Named
/// as in reports and on the command line (`frag-s`, `frag-m`, `fsr`, `lightfs`, `device`,
/// `firmware`, `fusion`, `ispfs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReplayTarget {
    Host(DesignKind),
    Device,
    /// StorageFS, one round trip per file operation (CrossFS-like).
    Firmware,
    /// StorageFS, a trace's `cisc` ops as one round trip each (FusionFS).
    Fusion,
    /// ISPFS on PCM, with command files (ISPFS).
    Ispfs,
}

impl ReplayTarget {
    /// The host designs, in report order: what `all` means.
    pub const HOSTS: [ReplayTarget; 4] = [
        ReplayTarget::Host(DesignKind::FragS),
        ReplayTarget::Host(DesignKind::FragM),
        ReplayTarget::Host(DesignKind::Fsr),
        ReplayTarget::Host(DesignKind::LightFs),
    ];

    /// Every system a replay can name: the host designs, the host alone, the bare device,
    /// StorageFS unfused and fused, and ISPFS.
    pub const ALL: [ReplayTarget; 9] = [
        ReplayTarget::Host(DesignKind::FragS),
        ReplayTarget::Host(DesignKind::FragM),
        ReplayTarget::Host(DesignKind::Fsr),
        ReplayTarget::Host(DesignKind::LightFs),
        ReplayTarget::Host(DesignKind::HostOnly),
        ReplayTarget::Device,
        ReplayTarget::Firmware,
        ReplayTarget::Fusion,
        ReplayTarget::Ispfs,
    ];

    /// Whether it replays on StorageFS, the file system in the device (firmware, fusion).
    pub fn on_storagefs(self) -> bool {
        matches!(self, ReplayTarget::Firmware | ReplayTarget::Fusion)
    }

    pub fn name(self) -> &'static str {
        match self {
            ReplayTarget::Host(d) => d.name(),
            ReplayTarget::Device => "device",
            ReplayTarget::Firmware => "firmware",
            ReplayTarget::Fusion => "fusion",
            ReplayTarget::Ispfs => "ispfs",
        }
    }
}

impl std::fmt::Display for ReplayTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ReplayTarget {
    type Err = String;

    fn from_str(s: &str) -> Result<ReplayTarget, String> {
        match s {
            "device" => return Ok(ReplayTarget::Device),
            "firmware" => return Ok(ReplayTarget::Firmware),
            "fusion" => return Ok(ReplayTarget::Fusion),
            "ispfs" => return Ok(ReplayTarget::Ispfs),
            _ => {}
        }
        s.parse::<DesignKind>()
            .map(ReplayTarget::Host)
            .map_err(|_| {
                let names: Vec<&str> = ReplayTarget::ALL.iter().map(|t| t.name()).collect();
                format!(
                    "unknown design '{s}' (expected one of {})",
                    names.join(", ")
                )
            })
    }
}

impl Serialize for ReplayTarget {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for ReplayTarget {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ReplayTarget, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Builds the system `target` names, ready for `scan`'s trace.
pub fn build<'a>(
    target: ReplayTarget,
    scan: &Prescan,
    profile: &Profile,
    seed: u64,
    runners: OpRunners<'a>,
) -> Result<Box<dyn System + 'a>, SetupError> {
    Ok(match target {
        ReplayTarget::Host(design) => {
            Box::new(HostSystem::new(scan, profile, design, seed, runners)?)
        }
        ReplayTarget::Device => Box::new(DeviceSystem::new(profile)?),
        ReplayTarget::Ispfs => Box::new(super::ispfs::IspfsSystem::new(
            scan,
            profile,
            runners.stages,
        )?),
        ReplayTarget::Firmware | ReplayTarget::Fusion => {
            let stages = runners.stages.ok_or_else(|| {
                SetupError::Profile(format!(
                    "the {target} design needs a stage runner to replay"
                ))
            })?;
            Box::new(FusionSystem::new(
                scan,
                profile,
                seed,
                stages,
                target == ReplayTarget::Fusion,
            )?)
        }
    })
}
