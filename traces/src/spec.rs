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

/// What synthetic files hold, for an NDP task that is not one of LightFS's applications.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Content {
    /// Random 64-bit integers (what STATS sums).
    Integers,
    /// Real `f32`s (KNN's vectors).
    Floats,
    /// Log-like text with matches for `ERROR` (grep's).
    Text,
}

impl std::str::FromStr for Content {
    type Err = String;

    fn from_str(s: &str) -> Result<Content, String> {
        match s {
            "integers" => Ok(Content::Integers),
            "floats" => Ok(Content::Floats),
            "text" => Ok(Content::Text),
            _ => Err(format!(
                "unknown content '{s}' (expected integers, floats or text)"
            )),
        }
    }
}

/// A task a run used that is not built in (a module file or a stored task), by the
/// reference the run named it with and the content id of the module it ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRef {
    pub reference: String,
    pub id: String,
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
    /// The user tasks the run named (its built-in tasks are part of csd's version). A rerun
    /// refuses to go on when one's module changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<TaskRef>,
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
        /// The task reference (a built-in application's name, or any task's).
        app: String,
        /// The task's arguments, when the run gave them (else the application's own).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        args: Option<String>,
        /// The synthetic files' contents, when the run chose them (else the application's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Content>,
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
    /// device per (execution mode, point) (`csd txbench`, and `csd repro`'s Fig. 3 runs,
    /// whose profile says whether flash timing is on). `off_points` run again on the
    /// profile with flash timing off (`csd txbench`'s second half).
    Txbench {
        file_bytes: u64,
        points: Vec<(ExecMode, Point)>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        off_points: Vec<(ExecMode, Point)>,
    },
    /// TxISC's applications, each under every placement (`csd txapps`, `csd repro`'s §V-C
    /// run).
    Txapps { sizes: Sizes, apps: Vec<TxApp> },
    /// FusionFS's design comparison (`csd fusion`).
    Fusion {
        spec: csd_hostfs::fusion::FusionSpec,
    },
    /// ISPFS's word query, engine against software, per file size (`csd ispfs query`).
    IspfsQuery {
        spec: csd_hostfs::ispfs::query::QuerySpec,
    },
    /// ISPFS's iozone comparison with an EXT4-like path (`csd ispfs iozone`).
    IspfsIozone {
        spec: csd_hostfs::ispfs::iozone::IozoneSpec,
    },
}

impl SystemSpec {
    pub fn new(profile: Profile, seed: u64, system: SystemKind) -> SystemSpec {
        SystemSpec {
            version: SPEC_VERSION,
            profile,
            seed,
            system,
            tasks: Vec::new(),
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
