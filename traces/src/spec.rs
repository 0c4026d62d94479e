//! `SystemSpec`: everything that decides a run's numbers, kept with the run so that
//! `csd runs rerun` can rebuild the system and check that it reproduces the stored report
//! byte for byte.
//!
//! The profile is kept whole, not by name: a built-in profile changes with csdlab and a
//! stored one can be replaced, and either would make an old run unrepeatable for reasons
//! that have nothing to do with the model. The trace is kept by content id; its bytes stay
//! where they were (the run store, a bundled sample, or the file), and a rerun refuses a
//! trace whose content no longer matches.

use crate::replay::Pace;
use crate::report::{Sizes, TxApp};
use crate::Strictness;
use csd_device::persist::backlog::{Backlog, BacklogSpec};
use csd_device::persist::online::OnlineSpec;
use csd_device::persist::service::Config;
use csd_device::txn::bench::Point;
use csd_device::txn::ExecMode;
use csd_device::Profile;
use csd_hostfs::ndp::DesignKind;
use serde::{Deserialize, Serialize};

/// A trace by content id (`sha256:` + hex) and the name it was replayed under.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceRef {
    pub id: String,
    pub name: String,
}

/// The version of [`SystemSpec`]'s layout. A stored spec of another version is refused
/// with a message, never misread.
pub const SPEC_VERSION: u32 = 1;

/// A system under test, fully: its profile, its seed and what runs on it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SystemSpec {
    pub version: u32,
    pub profile: Profile,
    pub seed: u64,
    pub system: SystemKind,
}

/// What runs on the device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum SystemKind {
    /// A trace through the host file system under each offload design (`csd replay`).
    Replay {
        trace: TraceRef,
        designs: Vec<crate::system::ReplayTarget>,
        pace: Pace,
        strictness: Strictness,
    },
    /// One NDP request over a directory of synthetic files (made from the seed), per
    /// design and per (files, size) point (`csd ndp`).
    Ndp {
        /// The built-in application's task name.
        app: String,
        designs: Vec<DesignKind>,
        points: Vec<(usize, u64)>,
        cold: bool,
    },
    /// SIFT's online pressure benchmark, one run per (sizes and interval, configuration)
    /// (`csd persist online`).
    PersistOnline { runs: Vec<(OnlineSpec, Config)> },
    /// SIFT's manual-checkpoint backlog under each configuration (`csd persist backlog`).
    PersistBacklog {
        backlog: Backlog,
        sizes: BacklogSpec,
        configs: Vec<Config>,
    },
    /// TxISC's read/write task over a file of `file_bytes`, one fresh copy of the written
    /// device per (execution mode, point) (`csd repro`'s Fig. 3 runs; the profile says
    /// whether flash timing is on).
    Txbench {
        file_bytes: u64,
        points: Vec<(ExecMode, Point)>,
    },
    /// TxISC's applications, each under every placement (`csd repro`'s §V-C run).
    Txapps { sizes: Sizes, apps: Vec<TxApp> },
}

impl SystemSpec {
    pub fn new(profile: Profile, seed: u64, system: SystemKind) -> SystemSpec {
        SystemSpec {
            version: SPEC_VERSION,
            profile,
            seed,
            system,
        }
    }

    /// Refuses a spec this csdlab cannot rebuild exactly.
    pub fn check_version(&self) -> Result<(), String> {
        if self.version == SPEC_VERSION {
            Ok(())
        } else {
            Err(format!(
                "the run's system spec has layout version {}, this csd reads version {SPEC_VERSION}",
                self.version
            ))
        }
    }
}
