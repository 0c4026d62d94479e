//! The report of any kind, and each kind's layout version.

use super::ndp::NdpRun;
use super::persist::PersistRun;
use super::replay::ReplayRun;
use super::task::TaskRun;
use super::txisc::{TxappsRun, TxbenchRun};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The kinds of report, one per report-producing command (and `Unreadable`'s record of
/// which kind it was stored as).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportKind {
    /// `csd replay`.
    Replay,
    /// `csd ndp` (and `csd repro`'s LightFS runs).
    Ndp,
    /// `csd run`: one task invocation.
    Task,
    /// `csd txbench`: TxISC Fig. 3.
    Txbench,
    /// `csd txapps`: TxISC Figs. 4–5.
    Txapps,
    /// `csd persist online|backlog`.
    Persist,
    /// `csd device run`.
    Device,
    /// `csd repro`: the papers' figures against ours.
    Repro,
    /// `csd fusion`: FusionFS Fig. 3.
    Fusion,
    /// `csd ispfs query`: ISPFS Figs. 8–9.
    Ispfs,
    /// `csd ispfs iozone`: ISPFS Fig. 7.
    Iozone,
    /// Stored by csd before report kinds were split (TxISC's runs were one kind); such a
    /// report loads as [`Report::Unreadable`].
    Txisc,
}

impl ReportKind {
    /// The version of this kind's layout. Raise it with any change a reader of the old
    /// layout would misread (a field renamed, removed or changing meaning); an added
    /// optional field does not need it.
    pub fn version(self) -> u32 {
        match self {
            ReportKind::Replay
            | ReportKind::Ndp
            | ReportKind::Task
            | ReportKind::Txbench
            | ReportKind::Txapps
            | ReportKind::Persist
            | ReportKind::Device
            | ReportKind::Repro
            | ReportKind::Fusion
            | ReportKind::Ispfs
            | ReportKind::Iozone => 1,
            ReportKind::Txisc => 0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ReportKind::Replay => "replay",
            ReportKind::Ndp => "ndp",
            ReportKind::Task => "task",
            ReportKind::Txbench => "txbench",
            ReportKind::Txapps => "txapps",
            ReportKind::Persist => "persist",
            ReportKind::Device => "device",
            ReportKind::Repro => "repro",
            ReportKind::Fusion => "fusion",
            ReportKind::Ispfs => "ispfs",
            ReportKind::Iozone => "iozone",
            ReportKind::Txisc => "txisc",
        }
    }
}

impl std::fmt::Display for ReportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One run's report.
#[derive(Clone, Debug, PartialEq)]
pub enum Report {
    Replay(ReplayRun),
    Ndp(NdpRun),
    Task(TaskRun),
    Txbench(TxbenchRun),
    Txapps(TxappsRun),
    Persist(PersistRun),
    Device(csd_device::synth::SynthReport),
    Repro(crate::repro::Report),
    Fusion(csd_hostfs::fusion::FusionReport),
    Ispfs(csd_hostfs::ispfs::query::QueryReport),
    Iozone(csd_hostfs::ispfs::iozone::IozoneReport),
    /// A stored report this csd cannot read as its kind: kept as stored, with the reason.
    Unreadable(Unreadable),
}

/// A report serialises as its kind's layout alone: the kind is stored beside it.
impl Serialize for Report {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Report::Replay(r) => r.serialize(s),
            Report::Ndp(r) => r.serialize(s),
            Report::Task(r) => r.serialize(s),
            Report::Txbench(r) => r.serialize(s),
            Report::Txapps(r) => r.serialize(s),
            Report::Persist(r) => r.serialize(s),
            Report::Device(r) => r.serialize(s),
            Report::Repro(r) => r.serialize(s),
            Report::Fusion(r) => r.serialize(s),
            Report::Ispfs(r) => r.serialize(s),
            Report::Iozone(r) => r.serialize(s),
            Report::Unreadable(u) => u.json.serialize(s),
        }
    }
}

/// A stored report that did not parse as its kind's current layout.
#[derive(Clone, Debug, PartialEq)]
pub struct Unreadable {
    pub kind: ReportKind,
    /// The layout version it was stored with (0: before versions were kept).
    pub version: u32,
    pub why: String,
    pub json: Value,
}

impl Report {
    pub fn kind(&self) -> ReportKind {
        match self {
            Report::Replay(_) => ReportKind::Replay,
            Report::Ndp(_) => ReportKind::Ndp,
            Report::Task(_) => ReportKind::Task,
            Report::Txbench(_) => ReportKind::Txbench,
            Report::Txapps(_) => ReportKind::Txapps,
            Report::Persist(_) => ReportKind::Persist,
            Report::Device(_) => ReportKind::Device,
            Report::Repro(_) => ReportKind::Repro,
            Report::Fusion(_) => ReportKind::Fusion,
            Report::Ispfs(_) => ReportKind::Ispfs,
            Report::Iozone(_) => ReportKind::Iozone,
            Report::Unreadable(u) => u.kind,
        }
    }

    /// The layout version this report is in: its kind's current one, or an unreadable
    /// report's own.
    pub fn version(&self) -> u32 {
        match self {
            Report::Unreadable(u) => u.version,
            r => r.kind().version(),
        }
    }

    /// The report as `--json` prints it (an unreadable one as it was stored).
    pub fn to_json(&self) -> Value {
        // Every report type serialises to a JSON tree: string keys, numbers (a NaN becomes
        // null, as serde_json writes it).
        serde_json::to_value(self).expect("report types serialise to JSON")
    }

    /// Reads a report stored as `kind` with layout `version`. Never fails: a report of
    /// another version, or one that does not parse, is [`Report::Unreadable`].
    pub fn from_json(kind: ReportKind, version: u32, json: Value) -> Report {
        let unreadable = |why: String| {
            Report::Unreadable(Unreadable {
                kind,
                version,
                why,
                json: json.clone(),
            })
        };
        let current = kind.version();
        // Version 0 means "stored before versions were kept": no layout changed when they
        // began, so such a report is read as the first version.
        let same = version == current || (version == 0 && current == 1);
        let parsed = match kind {
            _ if current == 0 => {
                return unreadable(format!(
                    "'{kind}' reports were stored by an older csd and are no longer read"
                ))
            }
            _ if !same && version > current => {
                return unreadable(format!(
                    "stored by a newer csd ({kind} report layout v{version}; this csd reads v{current})"
                ))
            }
            _ if !same => {
                return unreadable(format!(
                    "{kind} report layout v{version} is older than this csd's v{current}"
                ))
            }
            ReportKind::Replay => ReplayRun::deserialize(&json).map(Report::Replay),
            ReportKind::Ndp => NdpRun::deserialize(&json).map(Report::Ndp),
            ReportKind::Task => TaskRun::deserialize(&json).map(Report::Task),
            ReportKind::Txbench => TxbenchRun::deserialize(&json).map(Report::Txbench),
            ReportKind::Txapps => TxappsRun::deserialize(&json).map(Report::Txapps),
            ReportKind::Persist => PersistRun::deserialize(&json).map(Report::Persist),
            ReportKind::Device => {
                csd_device::synth::SynthReport::deserialize(&json).map(Report::Device)
            }
            ReportKind::Repro => crate::repro::Report::deserialize(&json).map(Report::Repro),
            ReportKind::Fusion => {
                csd_hostfs::fusion::FusionReport::deserialize(&json).map(Report::Fusion)
            }
            ReportKind::Ispfs => {
                csd_hostfs::ispfs::query::QueryReport::deserialize(&json).map(Report::Ispfs)
            }
            ReportKind::Iozone => {
                csd_hostfs::ispfs::iozone::IozoneReport::deserialize(&json).map(Report::Iozone)
            }
            ReportKind::Txisc => Err(serde::de::Error::custom("no layout")),
        };
        parsed.unwrap_or_else(|e| unreadable(format!("a {kind} report this csd cannot read: {e}")))
    }

    /// Why this report cannot be compared or charted, if it cannot.
    pub fn unreadable(&self) -> Option<&str> {
        match self {
            Report::Unreadable(u) => Some(&u.why),
            _ => None,
        }
    }
}
