//! Crash-state enumeration shared by the crash checkers of TxISC ([`crate::txn::crash`]) and
//! SIFT ([`crate::persist::crash`]), in the manner of ALICE and CrashMonkey.
//!
//! A checker runs a seeded workload once, logging every durable write with the fences
//! (flushes, barriers) the protocol issued and a marker per acknowledged operation. A crash
//! state is then built from the log:
//!
//! - [`CrashModel::InOrder`]: writes reach the medium in issue order (a power-loss-protected
//!   write cache): a crash leaves a prefix of the log.
//! - [`CrashModel::Reorder`]: writes issued since the last fence may reach the medium in any
//!   order, or not at all (a volatile write cache lost at power failure): a crash leaves
//!   everything before the last fence plus any subset of what followed it. With `torn`, one
//!   of those writes may also land half old, half new (at sector granularity).
//!
//! Every state is recovered and compared with an oracle: what was acknowledged must be there,
//! and the one operation in flight is all or nothing.

use crate::rng::SimRng;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What a recovered medium holds, as a checker sees it: a version per unit (block or LPN).
pub type Versions = BTreeMap<u64, u64>;

/// Judges one recovered crash state: `None` if it equals the oracle's state before or after
/// the operation in flight, else what differs (each `unit` that is neither).
pub fn judge(
    recovered: Result<Versions, String>,
    before: &Versions,
    after: &Versions,
    unit: &str,
) -> Option<String> {
    let v = match recovered {
        Ok(v) if v == *before || v == *after => return None,
        Ok(v) => v,
        Err(e) => return Some(format!("recovery failed: {e}")),
    };
    let keys: BTreeSet<&u64> = before.keys().chain(after.keys()).chain(v.keys()).collect();
    let wrong: Vec<String> = keys
        .into_iter()
        .filter(|k| v.get(k) != before.get(k) && v.get(k) != after.get(k))
        .map(|k| {
            format!(
                "{unit} {k} recovered as version {:?} (before the op {:?}, after it {:?})",
                v.get(k),
                before.get(k),
                after.get(k)
            )
        })
        .collect();
    Some(wrong.join("; "))
}

/// What enumerating one workload's crash states found.
#[derive(Debug, Default)]
pub struct Found {
    pub points: u64,
    pub violations: u64,
    pub first: Option<Violation>,
}

impl Found {
    /// Counts one crash state and, if `problem`, its violation (kept if it is the first).
    pub fn record(&mut self, problem: Option<String>, violation: impl FnOnce(String) -> Violation) {
        self.points += 1;
        if let Some(p) = problem {
            self.violations += 1;
            if self.first.is_none() {
                self.first = Some(violation(p));
            }
        }
    }
}

/// What a power failure may do to writes in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrashModel {
    /// Writes persist in issue order: a crash leaves a prefix.
    InOrder,
    /// Writes since the last fence persist in any subset; `torn`: one may persist torn.
    Reorder { torn: bool },
}

impl CrashModel {
    pub fn describe(self) -> &'static str {
        match self {
            CrashModel::InOrder => "in order (prefixes of the write log)",
            CrashModel::Reorder { torn: false } => {
                "reordered between fences (any subset of the writes since the last fence)"
            }
            CrashModel::Reorder { torn: true } => {
                "reordered between fences, and torn writes (one write half old, half new)"
            }
        }
    }
}

/// The first violation a checker found, with what led to it.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    pub seed: u64,
    /// Operations acknowledged before the crash.
    pub acked: usize,
    /// The workload's operations up to and including the one in flight (the last few).
    pub steps: Vec<String>,
    /// Which writes in flight the crash state kept, dropped or tore.
    pub crash: String,
    pub problem: String,
}

/// What a crash-check run found.
#[derive(Clone, Debug, Serialize)]
pub struct CrashReport {
    pub mechanism: String,
    pub config: String,
    pub model: CrashModel,
    pub seeds: u64,
    pub ops_per_seed: usize,
    /// Crash states recovered and checked.
    pub points: u64,
    pub violations: u64,
    pub first_violation: Option<Violation>,
    /// Mechanism-specific counts that show the workload exercised what matters (GC erases,
    /// checkpoints, ring wraps, commits…).
    pub coverage: Vec<(String, u64)>,
}

/// Which of the writes in flight a crash state keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashState {
    /// One flag per write in flight, in issue order.
    pub keep: Vec<bool>,
    /// A kept write that lands torn, and whether its first half is the new one.
    pub torn: Option<(usize, bool)>,
}

impl CrashState {
    /// All writes in flight kept: what a prefix crash leaves.
    pub fn all(n: usize) -> CrashState {
        CrashState {
            keep: vec![true; n],
            torn: None,
        }
    }

    pub fn describe(&self) -> String {
        if self.keep.is_empty() {
            return "no writes in flight".into();
        }
        let marks: String = self
            .keep
            .iter()
            .enumerate()
            .map(|(i, &k)| match self.torn {
                Some((t, _)) if t == i => 'T',
                _ if k => '1',
                _ => '0',
            })
            .collect();
        format!("writes in flight since the last fence, kept (1), lost (0), torn (T): {marks}")
    }
}

/// Subsets tried exhaustively up to this many writes in flight; past it, sampled.
const EXHAUSTIVE_UP_TO: usize = 4;
/// Sampled subsets per crash point when there are more writes in flight.
const SAMPLES: usize = 12;

/// The crash states to try when `n` writes are in flight: under `InOrder`, all of them
/// (the prefix); under `Reorder`, every subset for small `n`, else the empty and full sets
/// and seeded random ones, plus (with `torn`) a torn variant of some writes.
pub fn states(model: CrashModel, n: usize, rng: &mut SimRng) -> Vec<CrashState> {
    let CrashModel::Reorder { torn } = model else {
        return vec![CrashState::all(n)];
    };
    let mut out = Vec::new();
    if n <= EXHAUSTIVE_UP_TO {
        for mask in 0u32..(1 << n) {
            out.push(CrashState {
                keep: (0..n).map(|i| mask & (1 << i) != 0).collect(),
                torn: None,
            });
        }
    } else {
        out.push(CrashState {
            keep: vec![false; n],
            torn: None,
        });
        out.push(CrashState::all(n));
        for _ in 0..SAMPLES {
            out.push(CrashState {
                keep: (0..n).map(|_| rng.below(2) == 1).collect(),
                torn: None,
            });
        }
    }
    if torn && n > 0 {
        // A torn write lands with everything issued before it in this window.
        for _ in 0..n.min(3) {
            let i = rng.below(n as u64) as usize;
            let mut keep = vec![false; n];
            keep[..=i].fill(true);
            out.push(CrashState {
                keep,
                torn: Some((i, rng.below(2) == 0)),
            });
        }
    }
    out
}

/// `new` torn over `old` at half the block (sector granularity): the first half from one,
/// the rest from the other.
pub fn tear(old: &[u8], new: &[u8], new_first: bool) -> Vec<u8> {
    let len = old.len().max(new.len());
    let half = len / 2;
    let byte = |v: &[u8], i: usize| v.get(i).copied().unwrap_or(0);
    (0..len)
        .map(|i| {
            let from_new = (i < half) == new_first;
            byte(if from_new { new } else { old }, i)
        })
        .collect()
}

/// The last `n` of `steps`, for a violation's report.
pub fn last_steps(steps: &[String], n: usize) -> Vec<String> {
    let from = steps.len().saturating_sub(n);
    steps[from..]
        .iter()
        .enumerate()
        .map(|(i, s)| format!("op {}: {s}", from + i))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reorder_tries_every_subset_of_a_short_window_and_samples_a_long_one() {
        let mut rng = SimRng::new(1);
        let s = states(CrashModel::Reorder { torn: false }, 3, &mut rng);
        assert_eq!(s.len(), 8);
        let s = states(CrashModel::Reorder { torn: true }, 9, &mut rng);
        assert!(s.iter().any(|c| c.keep.iter().all(|&k| !k)));
        assert!(s.iter().any(|c| c.keep.iter().all(|&k| k)));
        assert_eq!(s.iter().filter(|c| c.torn.is_some()).count(), 3);
        assert_eq!(
            states(CrashModel::InOrder, 5, &mut rng),
            vec![CrashState::all(5)]
        );
        assert_eq!(tear(&[1, 1, 1, 1], &[2, 2, 2, 2], true), vec![2, 2, 1, 1]);
        assert_eq!(tear(&[1, 1, 1, 1], &[2, 2, 2, 2], false), vec![1, 1, 2, 2]);
    }
}
