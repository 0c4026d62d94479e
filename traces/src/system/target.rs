//! Which system a replay builds: [`ReplayTarget`] names it, [`build`] makes it.

use super::device::DeviceSystem;
use super::host::{HostSystem, OpRunners};
use super::interface::{SetupError, System};
use crate::prescan::Prescan;
use csd_device::Profile;
use csd_hostfs::ndp::DesignKind;
use serde::{Deserialize, Serialize};

/// What a trace replays on: a host design or the bare device. Named as in reports and on
/// the command line (`frag-s`, `frag-m`, `fsr`, `lightfs`, `device`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReplayTarget {
    Host(DesignKind),
    Device,
}

impl ReplayTarget {
    /// The host designs, in report order: what `all` means.
    pub const HOSTS: [ReplayTarget; 4] = [
        ReplayTarget::Host(DesignKind::FragS),
        ReplayTarget::Host(DesignKind::FragM),
        ReplayTarget::Host(DesignKind::Fsr),
        ReplayTarget::Host(DesignKind::LightFs),
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReplayTarget::Host(d) => d.name(),
            ReplayTarget::Device => "device",
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
        if s == "device" {
            return Ok(ReplayTarget::Device);
        }
        s.parse::<DesignKind>()
            .map(ReplayTarget::Host)
            .map_err(|_| {
                format!("unknown design '{s}' (expected frag-s, frag-m, fsr, lightfs or device)")
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
    })
}
