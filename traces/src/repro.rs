//! `csd repro`'s report: one line per headline figure of a paper, our value beside the
//! paper's and a verdict. Typed here, beside the run store, so the CLI that writes it and the
//! dashboard that draws it read the same structure.

use serde::{Deserialize, Serialize};

/// Values within this fraction of the paper's pass.
pub const VALUE_TOLERANCE: f64 = 0.15;

/// How a line is judged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Check {
    /// Ours within ±[`VALUE_TOLERANCE`] of the paper's value.
    Value,
    /// Ours inside the paper's range, `lo..=hi`, widened by the tolerance.
    Range { lo: f64, hi: f64 },
    /// The paper's sign or ranking, stated as text; passes when ours states the same.
    Trend,
    /// The paper's value is an input to the model (a calibration point, a latency from a
    /// table, an accelerator's measured throughput): shown, never a pass.
    Input,
    /// csdlab does not model this yet.
    NotModelled,
}

/// The outcome of a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Pass,
    Fail,
    Input,
    NotModelled,
}

impl Verdict {
    pub fn mark(self) -> &'static str {
        match self {
            Verdict::Pass => "✓",
            Verdict::Fail => "✗",
            Verdict::Input => "input",
            Verdict::NotModelled => "not modelled",
        }
    }
}

/// One headline figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// A short stable name (`lightfs.fig3b.pao.frag-m`), for `--explain`.
    pub id: String,
    pub paper: String,
    /// Figure, table or section.
    pub figure: String,
    pub what: String,
    pub unit: String,
    /// The paper's value (absent for trends, which `paper_text` states).
    pub paper_value: Option<f64>,
    pub paper_text: String,
    pub ours_value: Option<f64>,
    pub ours_text: String,
    /// ours / paper.
    pub ratio: Option<f64>,
    pub check: Check,
    pub verdict: Verdict,
    /// The experiment the value came from (an index into [`Report::experiments`]).
    pub experiment: Option<usize>,
    /// Profile fields the figure depends on (`table.field`), for `--explain`.
    pub params: Vec<String>,
    /// For a ✗: what the model lacks that the figure needs, in one line. Runs stored before
    /// it existed have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lacks: Option<String>,
}

/// One experiment behind some lines, saved as its own run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Experiment {
    pub paper: String,
    pub name: String,
    pub profile: String,
    /// How the experiment was scaled down from the paper's, if it was.
    pub scale: Option<String>,
    /// The run it was saved as, when it was.
    pub run: Option<String>,
}

/// A whole `csd repro` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub papers: Vec<String>,
    pub seed: u64,
    pub lines: Vec<Line>,
    pub experiments: Vec<Experiment>,
}

impl Report {
    /// Lines that are judged (neither inputs nor unmodelled) and pass, and all judged lines.
    pub fn score(&self) -> (usize, usize) {
        let judged = self
            .lines
            .iter()
            .filter(|l| matches!(l.verdict, Verdict::Pass | Verdict::Fail));
        let (pass, all) = judged.fold((0, 0), |(p, a), l| {
            (p + usize::from(l.verdict == Verdict::Pass), a + 1)
        });
        (pass, all)
    }
}

/// Judges a numeric line.
pub fn judge_value(check: &Check, paper: f64, ours: f64) -> Verdict {
    let within = |lo: f64, hi: f64| {
        ours.is_finite()
            && ours >= lo * (1.0 - VALUE_TOLERANCE)
            && ours <= hi * (1.0 + VALUE_TOLERANCE)
    };
    match check {
        Check::Input => Verdict::Input,
        Check::NotModelled => Verdict::NotModelled,
        Check::Value => {
            if within(paper, paper) {
                Verdict::Pass
            } else {
                Verdict::Fail
            }
        }
        Check::Range { lo, hi } => {
            if within(*lo, *hi) {
                Verdict::Pass
            } else {
                Verdict::Fail
            }
        }
        Check::Trend => Verdict::Fail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_pass_within_the_tolerance_and_inputs_never_pass() {
        assert_eq!(judge_value(&Check::Value, 100.0, 114.9), Verdict::Pass);
        assert_eq!(judge_value(&Check::Value, 100.0, 85.1), Verdict::Pass);
        assert_eq!(judge_value(&Check::Value, 100.0, 115.1), Verdict::Fail);
        assert_eq!(judge_value(&Check::Value, 100.0, f64::NAN), Verdict::Fail);
        assert_eq!(judge_value(&Check::Input, 100.0, 100.0), Verdict::Input);
        let range = Check::Range {
            lo: 0.001,
            hi: 0.134,
        };
        assert_eq!(judge_value(&range, 0.0, 0.1), Verdict::Pass);
        assert_eq!(judge_value(&range, 0.0, 0.287), Verdict::Fail);
    }
}
