//! Sweeps: a grid of runs over traces, tasks, profiles, designs and seeds (`csd sweep`).
//!
//! A sweep is written as a TOML [`SweepSpec`]. Every point of its grid is one run of *one*
//! design: the smallest unit that can be skipped when done, handed to another machine, or
//! drawn on a chart. Each point is saved as an ordinary run carrying a [`SweepTag`].
//!
//! A point's key is the digest of the [`SystemSpec`] it runs: the whole profile, the trace's
//! content id, the design, the seed. "The same point" therefore means "the same numbers".
//! A re-run skips exactly the points whose numbers are already stored. A profile edited
//! between two runs of a sweep makes new points, never a silent mix of old and new.
//!
//! Shards are slices of the grid's order (`index % count`), so `--shard I/N` on N machines
//! covers every point once without the machines talking to each other.

use crate::spec::SystemSpec;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// At most this many points in one sweep: a grid is the product of its axes, and a typo
/// in one axis must not queue a million runs.
pub const MAX_POINTS: usize = 10_000;

/// At most this many values on one axis.
pub const MAX_AXIS_VALUES: usize = 1_000;

/// A sweep as its TOML file describes it. Names are resolved by the command: traces as
/// `csd replay` resolves them, tasks as `csd ndp --app` does, profiles as `--profile`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// The sweep's id in the run store: letters, digits, `.`, `_` and `-`. Running a spec
    /// of the same name again resumes it (or extends it, when axes grew).
    pub name: String,
    /// Traces to replay (files, stored traces, bundled samples). Each makes replay points.
    #[serde(default)]
    pub traces: Vec<String>,
    /// NDP tasks (built-in applications, stored tasks, module files). Each makes `csd ndp`
    /// points over synthetic files.
    #[serde(default)]
    pub tasks: Vec<String>,
    #[serde(default = "default_profiles")]
    pub profiles: Vec<String>,
    /// Designs: replay targets for traces (`all` is frag-s, frag-m, fsr and lightfs), NDP
    /// designs for tasks.
    #[serde(default = "default_designs")]
    pub designs: Vec<String>,
    #[serde(default = "default_seeds")]
    pub seeds: Vec<u64>,
    /// NDP points: how many files per request.
    #[serde(default = "default_files")]
    pub files: Vec<usize>,
    /// NDP points: each file's size (`16k`, `1m`, …).
    #[serde(default = "default_sizes")]
    pub sizes: Vec<String>,
    /// NDP points: start with a cold page cache.
    #[serde(default)]
    pub cold: bool,
    /// Replay pacing: `afap` or `timed`.
    #[serde(default = "default_mode")]
    pub mode: crate::replay::Pace,
    /// Replays skip and count unknown ops instead of failing.
    #[serde(default)]
    pub lenient: bool,
    #[serde(default)]
    pub chart: ChartSpec,
}

/// What the dashboard's sweep page draws first (it offers every other metric and axis).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChartSpec {
    /// The swept axis on the x axis; by default the first axis with more than one value.
    pub axis: Option<Axis>,
    /// A headline metric (`duration_ns`, `ndp.pao`, `fsync.p99_ns`, …); by default
    /// `duration_ns` for replays and `lightfs.mean_ns`-style latency for NDP points.
    pub metric: Option<String>,
}

fn default_profiles() -> Vec<String> {
    vec![csd_device::profile::DEFAULT_PROFILE.to_string()]
}
fn default_designs() -> Vec<String> {
    vec!["all".to_string()]
}
fn default_seeds() -> Vec<u64> {
    vec![1]
}
fn default_files() -> Vec<usize> {
    vec![100]
}
fn default_sizes() -> Vec<String> {
    vec!["16k".to_string()]
}
fn default_mode() -> crate::replay::Pace {
    crate::replay::Pace::Afap
}

/// A parameter a sweep varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    Trace,
    Task,
    Profile,
    Design,
    Seed,
    Files,
    Size,
}

impl Axis {
    pub const ALL: [Axis; 7] = [
        Axis::Trace,
        Axis::Task,
        Axis::Profile,
        Axis::Design,
        Axis::Seed,
        Axis::Files,
        Axis::Size,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Axis::Trace => "trace",
            Axis::Task => "task",
            Axis::Profile => "profile",
            Axis::Design => "design",
            Axis::Seed => "seed",
            Axis::Files => "files",
            Axis::Size => "size",
        }
    }
}

impl std::fmt::Display for Axis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Axis {
    type Err = String;
    fn from_str(s: &str) -> Result<Axis, String> {
        Axis::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown axis '{s}' (expected one of: {})",
                    Axis::ALL.map(Axis::name).join(", ")
                )
            })
    }
}

/// Why a sweep spec is refused.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("the sweep spec does not parse: {0}")]
    Parse(String),
    #[error(
        "the sweep's name '{0}' may hold only letters, digits, '.', '_' and '-' (1 to 64 of them)"
    )]
    Name(String),
    #[error("the sweep names no traces and no tasks: give `traces = [...]` (replays) or `tasks = [...]` (NDP requests)")]
    Empty,
    #[error("the sweep's `{axis}` axis is empty")]
    EmptyAxis { axis: &'static str },
    #[error("the sweep's `{axis}` axis has {n} values; at most {MAX_AXIS_VALUES}")]
    LongAxis { axis: &'static str, n: usize },
    #[error("the sweep's grid has more than {MAX_POINTS} points; split it into several sweeps")]
    TooLarge,
    #[error("bad shard '{0}': write it as I/N with 0 ≤ I < N (for example 0/4)")]
    Shard(String),
}

impl SweepSpec {
    /// Parses and checks a spec's TOML text.
    pub fn parse(text: &str) -> Result<SweepSpec, SweepError> {
        let spec: SweepSpec = toml::from_str(text).map_err(|e| SweepError::Parse(e.to_string()))?;
        spec.check()?;
        Ok(spec)
    }

    fn check(&self) -> Result<(), SweepError> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if !name_ok {
            return Err(SweepError::Name(self.name.clone()));
        }
        if self.traces.is_empty() && self.tasks.is_empty() {
            return Err(SweepError::Empty);
        }
        let mut axes = vec![
            ("profiles", self.profiles.len()),
            ("designs", self.designs.len()),
            ("seeds", self.seeds.len()),
            ("traces", self.traces.len()),
            ("tasks", self.tasks.len()),
        ];
        if !self.tasks.is_empty() {
            axes.push(("files", self.files.len()));
            axes.push(("sizes", self.sizes.len()));
        }
        for (axis, n) in axes {
            if n > MAX_AXIS_VALUES {
                return Err(SweepError::LongAxis { axis, n });
            }
            if n == 0 && !matches!(axis, "traces" | "tasks") {
                return Err(SweepError::EmptyAxis { axis });
            }
        }
        Ok(())
    }
}

/// Which slice of the grid a process runs: points whose index in the grid's order is
/// `index` modulo `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    pub fn holds(self, point: usize) -> bool {
        point % self.count == self.index
    }
}

impl std::str::FromStr for Shard {
    type Err = SweepError;
    fn from_str(s: &str) -> Result<Shard, SweepError> {
        let bad = || SweepError::Shard(s.to_string());
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            i.trim().parse::<usize>().map_err(|_| bad())?,
            n.trim().parse::<usize>().map_err(|_| bad())?,
        );
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

/// What makes a run a sweep's point: the sweep, the point's key, and its parameters by axis
/// (in axis order) for tables and charts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepTag {
    pub sweep: String,
    pub key: String,
    pub params: Vec<(Axis, String)>,
}

impl SweepTag {
    pub fn param(&self, axis: Axis) -> Option<&str> {
        self.params
            .iter()
            .find(|(a, _)| *a == axis)
            .map(|(_, v)| v.as_str())
    }

    /// `trace=untar design=lightfs seed=1`.
    pub fn label(&self) -> String {
        self.params
            .iter()
            .map(|(a, v)| format!("{a}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A sweep as the store keeps it: its spec, and how many points its whole grid has (all
/// shards), so a page can say how much of it is done.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepRecord {
    pub spec: SweepSpec,
    pub points: usize,
}

/// A point's key: `p` and the first 16 bytes of the SHA-256 of its system spec's JSON.
pub fn point_key(spec: &SystemSpec) -> String {
    let json = serde_json::to_vec(spec).expect("a system spec serialises");
    let digest = Sha256::digest(&json);
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("p{hex}")
}

/// The number of points of a grid with these axis lengths, or an error past [`MAX_POINTS`].
pub fn grid_size(axes: &[usize]) -> Result<usize, SweepError> {
    axes.iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))
        .filter(|&n| n <= MAX_POINTS)
        .ok_or(SweepError::TooLarge)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_parses_with_defaults_and_bad_ones_are_named() {
        let s = SweepSpec::parse("name = \"a\"\ntraces = [\"untar\"]\nseeds = [1, 2]\n").unwrap();
        assert_eq!(s.profiles, vec!["cosmos-plus"]);
        assert_eq!(s.designs, vec!["all"]);
        assert_eq!(s.seeds, vec![1, 2]);
        let e = SweepSpec::parse("name = \"a b\"\ntraces = [\"x\"]").unwrap_err();
        assert!(e.to_string().contains("'a b'"), "{e}");
        let e = SweepSpec::parse("name = \"a\"").unwrap_err();
        assert!(matches!(e, SweepError::Empty), "{e}");
        let e = SweepSpec::parse("name = \"a\"\ntraces = [\"x\"]\nseeds = []").unwrap_err();
        assert!(e.to_string().contains("seeds"), "{e}");
        let e = SweepSpec::parse("name = \"a\"\ntraces = [\"x\"]\nsedes = [1]").unwrap_err();
        assert!(e.to_string().contains("sedes"), "{e}");
        let e = SweepSpec::parse("name = \"a\"\ntraces = [\"x\"]\n[chart]\naxis = \"colour\"")
            .unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
    }

    #[test]
    fn shards_partition_the_grid() {
        for count in 1..6 {
            for point in 0..40 {
                let holders = (0..count)
                    .filter(|&index| Shard { index, count }.holds(point))
                    .count();
                assert_eq!(holders, 1);
            }
        }
        assert_eq!(
            "2/4".parse::<Shard>().unwrap(),
            Shard { index: 2, count: 4 }
        );
        for bad in ["4/4", "1/0", "x/2", "3", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn grids_past_the_bound_are_refused_without_overflow() {
        assert_eq!(grid_size(&[4, 4, 1]).unwrap(), 16);
        assert!(grid_size(&[1000, 1000]).is_err());
        assert!(grid_size(&[usize::MAX, 2]).is_err());
    }
}
