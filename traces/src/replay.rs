//! Replaying a trace through a [`System`] (a host design, or the bare device), in virtual
//! time.
//!
//! Two passes over the trace, both streaming. The first ([`Prescan`]) finds what must exist
//! before the trace starts: files it reads before writing them (with the size its reads need)
//! and their directories. Setup creates those untimed, then the second pass replays every
//! event: each pid is a thread of virtual time. An op starts when its pid's previous op ended,
//! not before the op the trace issued before it (ops start in trace order, so cross-pid
//! dependencies hold), and in `timed` mode not before its recorded timestamp either. One pid's
//! ops never overlap; different pids' ops do, on the device.
//!
//! Latency per op is what the model charges: metadata reads on cold lookups, device reads for
//! data not in the page cache, `fsync` writeback, NDP offloads. A `write` into the page cache
//! costs no device time (csdlab models no host CPU time per syscall).

use crate::format::{Event, Op, OPS};
use crate::isc::IscTotals;
use crate::reader::{Feed, Strictness, TraceError, TraceReader};
use crate::system::{build, Applied, FusionTotals, SetupError, System, FAILED_IN_TRACE};
use csd_device::{DeviceCounters, Profile, VirtualTime};
use foldhash::{HashMap, HashMapExt};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::BufRead;

pub use crate::prescan::{NeededFile, Prescan};
pub use crate::system::{ComputeFactory, NdpTotals, OpRunners, ReplayTarget, MAX_RW_COUNT};

/// How a replay paces each pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pace {
    /// As fast as possible: an op starts when its pid's previous op ended.
    Afap,
    /// Honour the trace's timestamps: an op starts no earlier than its recorded time.
    Timed,
}

impl std::fmt::Display for Pace {
    /// The name `--mode` takes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Pace::Afap => "afap",
            Pace::Timed => "timed",
        })
    }
}

impl std::str::FromStr for Pace {
    type Err = String;
    fn from_str(s: &str) -> Result<Pace, String> {
        match s {
            "afap" => Ok(Pace::Afap),
            "timed" => Ok(Pace::Timed),
            _ => Err(format!(
                "unknown replay mode '{s}' (expected afap or timed)"
            )),
        }
    }
}

#[derive(Clone, Debug)]
pub struct ReplayOptions {
    pub pace: Pace,
    /// Seeds the page cache's writeback order.
    pub seed: u64,
    pub strictness: Strictness,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error(transparent)]
    Setup(#[from] SetupError),
}

/// Latency percentiles of one op type, in ns.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct OpLatency {
    pub count: u64,
    pub failed: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    /// The tail SIFT reports for fsync (§5.1.4).
    pub p9999_ns: u64,
    pub max_ns: u64,
}

/// How far a replay has come: events replayed, of the trace's total (known from the prescan).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Progress {
    pub events: u64,
    pub of: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One design's replay.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct ReplayReport {
    pub design: ReplayTarget,
    pub events: u64,
    /// Events replayed (not skipped).
    pub ops: u64,
    /// Events not replayed, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Of the ops replayed, calls that failed in the trace because a name was missing
    /// (`ENOENT`: a `stat` of a file that is not there, say), replayed as the path walk
    /// they made; their latencies count under their op's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub missing_walks: u64,
    pub duration_ns: u64,
    pub ops_per_sec: f64,
    pub latency: BTreeMap<String, OpLatency>,
    /// The first error of each op type that failed in the replay (the model refused an op
    /// the traced system performed, e.g. a path that does not exist here).
    pub first_errors: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ndp: Option<NdpTotals>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isc: Option<IscTotals>,
    /// StorageFS's round trips and device work (the firmware and fusion designs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fusion: Option<FusionTotals>,
    /// ISP instructions written to command files (the ispfs design).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isp: Option<crate::system::IspTotals>,
    /// What the host file system's metadata journal wrote (host designs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<csd_hostfs::journal::JournalStats>,
    pub device: DeviceCounters,
}

/// The path a call that failed in the trace with `ENOENT` walked, for the ops that walk one
/// (a `rename`'s source).
pub(crate) fn missing_name_path(ev: &Event) -> Option<&str> {
    let enoent = ev.ret == Some(-2)
        || ev.extra.get("errno").and_then(serde_json::Value::as_str) == Some("ENOENT");
    if !enoent {
        return None;
    }
    ev.op.walked_path()
}

/// The trace's side of a replay: each pid's clock, latencies, skips and errors. The system
/// does the rest.
struct Replayer<'s> {
    system: Box<dyn System + 's>,
    clocks: HashMap<u32, VirtualTime>,
    /// Latencies and failures by [`Op::index`] (a tree keyed by the op's name cost a visible
    /// share of a replay in string comparisons).
    hist: [Option<(Histogram<u64>, u64)>; OPS.len()],
    skipped: BTreeMap<String, u64>,
    first_errors: BTreeMap<String, String>,
    ops: u64,
    missing_walks: u64,
    pace: Pace,
}

impl<'s> Replayer<'s> {
    fn new(system: Box<dyn System + 's>, pace: Pace) -> Replayer<'s> {
        Replayer {
            system,
            clocks: HashMap::new(),
            hist: std::array::from_fn(|_| None),
            skipped: BTreeMap::new(),
            first_errors: BTreeMap::new(),
            ops: 0,
            missing_walks: 0,
            pace,
        }
    }

    fn skip(&mut self, why: &str) {
        *self.skipped.entry(why.to_string()).or_default() += 1;
    }

    fn record(&mut self, op: &Op, ns: u64, ok: bool) {
        let (h, failed) = self.hist[op.index()].get_or_insert_with(|| {
            // 1 ns to one hour at 3 significant digits; longer latencies saturate.
            let h = Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                .expect("valid histogram bounds");
            (h, 0)
        });
        if ok {
            h.saturating_record(ns);
        } else {
            *failed += 1;
        }
    }

    fn event(&mut self, ev: &Event) {
        if let Op::Cisc { ops, .. } = &ev.op {
            if !self.system.fuses() {
                ops.iter().for_each(|e| self.event(e));
                return;
            }
        }
        // A call that failed in the trace is not replayed, unless a missing name failed it
        // and the system can walk the path as far as it went.
        let missing = match ev.ret.is_some_and(|r| r < 0) {
            false => None,
            true => match missing_name_path(ev).filter(|_| self.system.walks_missing()) {
                Some(path) => Some(path),
                None => {
                    self.skip(FAILED_IN_TRACE);
                    return;
                }
            },
        };
        // An op starts when its pid is free, and not before the op the trace issued before
        // it (so a file another pid created already exists): pids overlap while one waits.
        let pid_clock = self
            .clocks
            .get(&ev.pid)
            .copied()
            .unwrap_or(VirtualTime::ZERO);
        let start = match self.pace {
            Pace::Afap => pid_clock,
            Pace::Timed => pid_clock.max(VirtualTime(ev.t)),
        }
        .max(self.system.op_started());
        if let Err(e) = self.system.begin(start) {
            // The op still runs; the report names what the background work hit.
            self.first_errors
                .entry("background".to_string())
                .or_insert(e);
        }
        let outcome = match missing {
            Some(path) => self.system.walk_missing(path, start),
            None => self.system.apply(ev, start),
        };
        let end = self.system.clock().max(start);
        match outcome {
            Ok(Applied::Done) => {
                self.ops += 1;
                self.missing_walks += u64::from(missing.is_some());
                self.record(&ev.op, end.since(start), true);
            }
            Ok(Applied::Skipped(why)) => self.skip(&why),
            Err(e) => {
                self.ops += 1;
                self.record(&ev.op, 0, false);
                self.first_errors
                    .entry(ev.op.name().to_string())
                    .or_insert_with(|| e.to_string());
            }
        }
        self.clocks.insert(ev.pid, end);
    }

    /// The report of a finished replay of `events` events under `design`.
    fn report(self, design: ReplayTarget, events: u64) -> ReplayReport {
        let duration = self
            .clocks
            .values()
            .copied()
            .max()
            .unwrap_or(VirtualTime::ZERO);
        let latency = OPS
            .iter()
            .zip(&self.hist)
            .filter_map(|(op, h)| Some((op, h.as_ref()?)))
            .map(|(op, (h, failed))| {
                (
                    op.to_string(),
                    OpLatency {
                        count: h.len(),
                        failed: *failed,
                        mean_ns: if h.is_empty() { 0.0 } else { h.mean() },
                        p50_ns: h.value_at_quantile(0.5),
                        p99_ns: h.value_at_quantile(0.99),
                        p999_ns: h.value_at_quantile(0.999),
                        p9999_ns: h.value_at_quantile(0.9999),
                        max_ns: h.max(),
                    },
                )
            })
            .collect();
        let totals = self.system.totals();
        let secs = duration.0 as f64 / 1e9;
        ReplayReport {
            design,
            events,
            ops: self.ops,
            skipped: self.skipped,
            missing_walks: self.missing_walks,
            duration_ns: duration.0,
            ops_per_sec: if secs > 0.0 {
                self.ops as f64 / secs
            } else {
                0.0
            },
            latency,
            first_errors: self.first_errors,
            ndp: totals.ndp,
            isc: totals.isc,
            fusion: totals.fusion,
            isp: totals.isp,
            journal: totals.journal,
            device: totals.device,
        }
    }
}

/// Replays a trace under one design. `open` gives a fresh reader of the trace for each pass.
pub fn replay<R: BufRead + Send>(
    mut open: impl FnMut() -> std::io::Result<R>,
    profile: &Profile,
    design: ReplayTarget,
    runners: OpRunners<'_>,
    opts: &ReplayOptions,
    progress: impl FnMut(Progress),
) -> Result<ReplayReport, ReplayError> {
    let scan = Prescan::run(open().map_err(TraceError::Io)?, opts.strictness)?;
    replay_scanned(&scan, open, profile, design, runners, opts, progress)
}

/// [`replay`]'s second pass, after the trace's [`Prescan`] (which a caller timing the two
/// passes apart runs itself): builds the design's system and replays a fresh reading of
/// the trace on it.
pub fn replay_scanned<R: BufRead + Send>(
    scan: &Prescan,
    mut open: impl FnMut() -> std::io::Result<R>,
    profile: &Profile,
    design: ReplayTarget,
    runners: OpRunners<'_>,
    opts: &ReplayOptions,
    progress: impl FnMut(Progress),
) -> Result<ReplayReport, ReplayError> {
    replay_with(scan, profile, design, runners, opts, progress, |apply| {
        let reader = TraceReader::new(open().map_err(TraceError::Io)?, opts.strictness)?;
        reader.for_each_parsed(|ev| -> Result<(), TraceError> {
            apply(ev);
            Ok(())
        })
    })
}

/// [`replay`] after the trace's [`Prescan`], of the events a [`Feed`] hands over: one
/// prescan and one reading of the trace shared by several designs replaying side by side
/// ([`crate::reader::feed`]).
pub fn replay_fed(
    scan: &Prescan,
    feed: Feed,
    profile: &Profile,
    design: ReplayTarget,
    runners: OpRunners<'_>,
    opts: &ReplayOptions,
    progress: impl FnMut(Progress),
) -> Result<ReplayReport, ReplayError> {
    replay_with(scan, profile, design, runners, opts, progress, |apply| {
        feed.for_each(apply)
    })
}

/// Builds the design's system, then replays what `read` hands to it (returning the unknown
/// ops it skipped).
fn replay_with(
    scan: &Prescan,
    profile: &Profile,
    design: ReplayTarget,
    runners: OpRunners<'_>,
    opts: &ReplayOptions,
    mut progress: impl FnMut(Progress),
    read: impl FnOnce(&mut dyn FnMut(&Event)) -> Result<BTreeMap<String, u64>, TraceError>,
) -> Result<ReplayReport, ReplayError> {
    let system = build(design, scan, profile, opts.seed, runners)?;
    let mut r = Replayer::new(system, opts.pace);
    let mut events = 0u64;
    let skipped = read(&mut |ev| {
        events += 1;
        r.event(ev);
        if events.is_multiple_of(4096) {
            progress(Progress {
                events,
                of: scan.events,
            });
        }
    })?;
    progress(Progress {
        events,
        of: scan.events,
    });
    for (op, n) in skipped {
        *r.skipped.entry(format!("unknown op {op}")).or_default() += n;
    }
    // Debug builds (every test) end each replay with the whole system's invariants; each
    // mutation already checked what it touched.
    #[cfg(debug_assertions)]
    if let Err(e) = r.system.check_invariants() {
        panic!("invariant broken after replaying under {design}: {e}");
    }
    Ok(r.report(design, events))
}
