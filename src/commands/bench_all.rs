//! `csd bench all`: every benchmark, each run in a fresh process, `--runs` times, summed up as
//! one table of figures against their targets. It is the README's "Measured figures" for the
//! machine it runs on (`--markdown` prints that table's rows), so those figures have a command
//! behind them as `csd repro`'s do.
//!
//! Wall-time figures vary from run to run on a shared machine, so each figure is the range over
//! the runs, and a target is met in all of them, none, or some ("2 of 3"). The benchmarks run
//! as child processes, as users run them: a process's heap, page cache state and peak RSS are
//! its own benchmark's.

use super::machine::Machine;
use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::Value;

#[derive(clap::Args, Debug)]
pub struct AllArgs {
    /// Runs of each benchmark, each in a fresh process; the table gives each figure's range.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,
    /// Small inputs, to check the command and the benchmarks quickly: its figures are not
    /// comparable with the targets, and none is judged.
    #[arg(long)]
    pub quick: bool,
    /// Run only these benchmarks (repeatable; default: all six).
    #[arg(long = "only", value_name = "BENCH", value_parser = ["ftl", "tasks", "replay", "coalesce", "sweep", "cisc"])]
    pub only: Vec<String>,
    /// Print the table as Markdown rows, the README's.
    #[arg(long, conflicts_with = "json")]
    pub markdown: bool,
    #[arg(long)]
    pub json: bool,
}

/// One `csd bench` command and the arguments of its quick form.
struct Bench {
    name: &'static str,
    quick: &'static [&'static str],
}

const BENCHES: [Bench; 6] = [
    Bench {
        name: "ftl",
        quick: &[
            "--writes",
            "200000",
            "--rss-writes",
            "20000",
            "--run-bytes",
            "16m",
        ],
    },
    Bench {
        name: "tasks",
        quick: &["--size", "1m", "--repeat", "1", "--invocations", "100"],
    },
    Bench {
        name: "replay",
        quick: &["--events", "20000"],
    },
    Bench {
        name: "coalesce",
        quick: &["--intervals", "40000", "--repeat", "1"],
    },
    Bench {
        name: "sweep",
        quick: &["--files", "4", "--size", "16k"],
    },
    Bench {
        name: "cisc",
        quick: &["--ops", "2000", "--repeat", "1"],
    },
];

/// How a figure is printed.
#[derive(Clone, Copy, Serialize, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Unit {
    /// Per second, printed in millions.
    MegaPerSec,
    /// Per second, printed in thousands.
    KiloPerSec,
    Bytes,
    /// A ratio, printed with its ×.
    Times,
    Nanos,
    Seconds,
}

/// What a figure must be to meet its issue's bar.
#[derive(Clone, Copy, Serialize, Debug)]
#[serde(rename_all = "snake_case")]
enum Target {
    AtLeast(f64),
    AtMost(f64),
    Below(f64),
}

impl Target {
    fn met(self, v: f64) -> bool {
        match self {
            Target::AtLeast(t) => v >= t,
            Target::AtMost(t) => v <= t,
            Target::Below(t) => v < t,
        }
    }
}

/// One line of the table: a figure read out of one benchmark's `--json` report.
pub(super) struct Figure {
    pub(super) id: &'static str,
    what: &'static str,
    pub(super) bench: &'static str,
    unit: Unit,
    target: Option<Target>,
    /// The target as the issue states it.
    target_text: &'static str,
    pub(super) value: fn(&Value) -> Option<f64>,
}

/// The row of `rows` whose `key` fields equal `want`, then its `field`.
fn row(v: &Value, rows: &str, want: &[(&str, &str)], field: &str) -> Option<f64> {
    v[rows]
        .as_array()?
        .iter()
        .find(|r| want.iter().all(|(k, w)| r[*k].as_str() == Some(*w)))?[field]
        .as_f64()
}

fn kernel_ratio(v: &Value, kernel: &str) -> Option<f64> {
    row(v, "kernels", &[("kernel", kernel)], "ratio")
}

fn cisc_rate(v: &Value, op: &str, grain: &str) -> Option<f64> {
    row(v, "rows", &[("op", op), ("grain", grain)], "ops_per_sec")
}

/// One row of [`FIGURES`]; `target` is `None` for a figure reported with no bar of its own.
const fn figure(
    id: &'static str,
    what: &'static str,
    bench: &'static str,
    unit: Unit,
    target: Option<Target>,
    target_text: &'static str,
    value: fn(&Value) -> Option<f64>,
) -> Figure {
    Figure {
        id,
        what,
        bench,
        unit,
        target,
        target_text,
        value,
    }
}

const WASM_BAR: Option<Target> = Some(Target::AtMost(1.2));
const CISC_BAR: Option<Target> = Some(Target::AtLeast(200e3));

/// The figures, in the README's order. Targets are issue 22's (the CISC ops' is issue 20's,
/// the 1 TiB device's issue 3's).
#[rustfmt::skip]
pub(super) const FIGURES: [Figure; 14] = [
    figure("ftl.alone", "4 KiB random page writes, GC active at 90 % (WAF 3.3), FTL alone", "ftl",
        Unit::MegaPerSec, None, "—", |v| v["throughput"]["ftl_writes_per_sec"].as_f64()),
    figure("ftl.timing", "the same with timing, one core", "ftl",
        Unit::MegaPerSec, Some(Target::AtLeast(10e6)), "≥ 10 M/s",
        |v| v["throughput"]["device_writes_per_sec"].as_f64()),
    figure("ftl.rss", "peak RSS, 1 TiB device after 1 M random writes, timing only", "ftl",
        Unit::Bytes, Some(Target::Below(256.0 * 1024.0 * 1024.0)), "< 256 MiB",
        |v| v["memory"]["rss_peak_bytes"].as_f64()),
    figure("ftl.sustained_rss", "peak RSS, 60 GiB sustained overwrite", "ftl",
        Unit::Bytes, None, "flat in run length", |v| v["sustained"]["rss_peak_bytes"].as_f64()),
    figure("tasks.stats64", "Wasm task / the same kernel native: stats64", "tasks",
        Unit::Times, WASM_BAR, "≤ 1.2×", |v| kernel_ratio(v, "stats64")),
    figure("tasks.checksum", "… checksum", "tasks",
        Unit::Times, WASM_BAR, "≤ 1.2×", |v| kernel_ratio(v, "checksum")),
    figure("tasks.grep", "… grep", "tasks",
        Unit::Times, WASM_BAR, "≤ 1.2×", |v| kernel_ratio(v, "grep")),
    figure("tasks.knn", "… knn", "tasks",
        Unit::Times, WASM_BAR, "≤ 1.2×", |v| kernel_ratio(v, "knn")),
    figure("tasks.invocation", "empty task invocation (instantiate, call, tear down), median", "tasks",
        Unit::Nanos, Some(Target::AtMost(5000.0)), "≤ 5 µs", |v| v["invoke_empty_median_ns"].as_f64()),
    figure("replay.events", "replay of a 1 M-event metadata trace", "replay",
        Unit::MegaPerSec, Some(Target::AtLeast(2e6)), "≥ 2 M/s", |v| v["events_per_sec"].as_f64()),
    figure("coalesce.full", "SIFT's 5.26 M-update coalescing set", "coalesce",
        Unit::Seconds, Some(Target::Below(1.0)), "< 1 s",
        |v| Some(v["points"].as_array()?.last()?["wall_ms"].as_f64()? / 1e3)),
    figure("sweep.speedup", "`csd sweep --jobs 2` over `--jobs 1`, 16 points", "sweep",
        Unit::Times, Some(Target::AtLeast(1.7)), "≥ 1.7×", |v| v["speedup"].as_f64()),
    figure("cisc.macro", "4 KiB append-CRC-write CISC ops, MacroTx, one core", "cisc",
        Unit::KiloPerSec, CISC_BAR, "≥ 200 k/s (issue 20)",
        |v| cisc_rate(v, "append-crc-write", "MacroTx")),
    figure("cisc.micro", "… MicroTx", "cisc",
        Unit::KiloPerSec, CISC_BAR, "≥ 200 k/s (issue 20)",
        |v| cisc_rate(v, "append-crc-write", "MicroTx")),
];

/// One figure over the runs.
#[derive(Serialize, Debug)]
struct Measured {
    id: &'static str,
    what: &'static str,
    bench: &'static str,
    unit: Unit,
    values: Vec<f64>,
    min: f64,
    max: f64,
    target: Option<Target>,
    target_text: &'static str,
    /// Runs that met the target; none when there is no target or the run was `--quick`.
    runs_meeting: Option<u32>,
}

impl Measured {
    /// "5.72–5.93 M/s", the unit once; one number where the runs print alike.
    fn range(&self) -> String {
        let (lo, unit) = fmt_value(self.unit, self.min);
        let (hi, _) = fmt_value(self.unit, self.max);
        if lo == hi {
            format!("{lo}{unit}")
        } else {
            format!("{lo}–{hi}{unit}")
        }
    }

    fn met(&self, runs: u32) -> String {
        match self.runs_meeting {
            None => String::new(),
            Some(n) if n == runs => "✓".into(),
            Some(0) => "✗".into(),
            Some(n) => format!("{n} of {runs} runs"),
        }
    }
}

/// A value in its unit: the number as printed, and the unit after it.
fn fmt_value(unit: Unit, v: f64) -> (String, &'static str) {
    match unit {
        Unit::MegaPerSec => (format!("{:.2}", v / 1e6), " M/s"),
        Unit::KiloPerSec => (format!("{:.0}", v / 1e3), " k/s"),
        Unit::Bytes => (format!("{:.1}", v / (1024.0 * 1024.0)), " MiB"),
        Unit::Times => (format!("{v:.2}"), "×"),
        Unit::Nanos => (format!("{:.1}", v / 1e3), " µs"),
        Unit::Seconds => (format!("{v:.2}"), " s"),
    }
}

#[derive(Serialize)]
struct Report {
    runs: u32,
    quick: bool,
    /// The machine's memory latency as [`memory_latency_ns`] measures it, over
    /// `probe_bytes`; none where the process had no room for the probe.
    memory_latency_ns: Option<f64>,
    probe_bytes: usize,
    figures: Vec<Measured>,
}

/// Bytes the latency probe chases through: beyond any last-level cache in sight (`--quick`
/// chases less, to be quick, and says so).
const PROBE_BYTES: usize = 128 << 20;
const QUICK_PROBE_BYTES: usize = 8 << 20;

/// The machine's latency for a load that misses every cache and the TLB: nanoseconds per hop
/// of a pointer chase through one random cycle over `bytes` of 4 KiB pages, each load
/// depending on the one before. The FTL and the replay wait on such misses (L2P slots, the
/// host file system's maps), so this says how much of a difference between two machines'
/// figures is their memory's, not the code's. `None` where the process has no room for it
/// ([`super::memory::Room`]; the reservation is fallible too, so a limit the room missed
/// skips the probe rather than aborting).
fn memory_latency_ns(bytes: usize) -> Option<f64> {
    if !super::memory::Room::now().fits(bytes as u64) {
        return None;
    }
    let n = bytes / std::mem::size_of::<u32>();
    let mut next: Vec<u32> = Vec::new();
    next.try_reserve_exact(n).ok()?;
    next.extend(0..n as u32);
    // Sattolo's shuffle: one cycle through every slot, so the chase visits them all.
    let mut rng = csd_device::rng::SimRng::new(7);
    for i in (1..n).rev() {
        let j = rng.below(i as u64) as usize;
        next.swap(i, j);
    }
    let hops = n.min(4_000_000) as u32;
    let mut at = 0u32;
    let start = std::time::Instant::now();
    for _ in 0..hops {
        at = next[at as usize];
    }
    let ns = start.elapsed().as_nanos() as f64 / f64::from(hops);
    // Keeps the chase from being optimised away.
    std::hint::black_box(at);
    Some(ns)
}

/// Runs `csd bench NAME --json` in a fresh process and returns its report.
fn run_once(bench: &Bench, quick: bool) -> anyhow::Result<Value> {
    let exe = std::env::current_exe().context("locating the csd executable")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["bench", bench.name, "--json"]);
    if quick {
        cmd.args(bench.quick);
    }
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running csd bench {}", bench.name))?;
    if !out.status.success() {
        bail!(
            "csd bench {} failed: {}",
            bench.name,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout)
        .with_context(|| format!("reading csd bench {}'s report", bench.name))
}

/// Every figure of the benchmarks chosen, over `runs` runs of each: the benchmarks take turns
/// (run 1 of each, then run 2 of each), so a slow spell of the machine spreads over them all.
fn measure(args: &AllArgs) -> anyhow::Result<Vec<Measured>> {
    let chosen: Vec<&Bench> = BENCHES
        .iter()
        .filter(|b| args.only.is_empty() || args.only.iter().any(|o| o == b.name))
        .collect();
    let bar = indicatif::ProgressBar::new(u64::from(args.runs) * chosen.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} benchmark runs: {msg}",
        )
        .expect("static template"),
    );
    let mut values: Vec<Vec<f64>> = vec![Vec::new(); FIGURES.len()];
    for _ in 0..args.runs {
        for bench in &chosen {
            bar.set_message(bench.name);
            let report = run_once(bench, args.quick)?;
            for (i, f) in FIGURES.iter().enumerate() {
                if f.bench != bench.name {
                    continue;
                }
                let v = (f.value)(&report).with_context(|| {
                    format!("csd bench {}'s report has no figure for {}", f.bench, f.id)
                })?;
                values[i].push(v);
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(FIGURES
        .iter()
        .zip(values)
        .filter(|(_, v)| !v.is_empty())
        .map(|(f, values)| {
            let min = values.iter().copied().fold(f64::INFINITY, f64::min);
            let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let runs_meeting = match (f.target, args.quick) {
                (Some(t), false) => Some(values.iter().filter(|&&v| t.met(v)).count() as u32),
                _ => None,
            };
            Measured {
                id: f.id,
                what: f.what,
                bench: f.bench,
                unit: f.unit,
                values,
                min,
                max,
                target: f.target,
                target_text: f.target_text,
                runs_meeting,
            }
        })
        .collect())
}

pub fn run(args: &AllArgs) -> anyhow::Result<()> {
    // Before the benchmarks, while nothing else of ours runs.
    let probe_bytes = if args.quick {
        QUICK_PROBE_BYTES
    } else {
        PROBE_BYTES
    };
    let latency = memory_latency_ns(probe_bytes);
    let figures = measure(args)?;
    if args.json {
        return super::machine::print_json(&Report {
            runs: args.runs,
            quick: args.quick,
            memory_latency_ns: latency,
            probe_bytes,
            figures,
        });
    }
    let latency = match latency {
        Some(ns) => format!(
            "memory latency {ns:.0} ns (a dependent load through {} MiB on 4 KiB pages, {})",
            probe_bytes >> 20,
            if args.quick {
                "which a cache may hold: --quick"
            } else {
                "past the caches and the TLB"
            }
        ),
        None => format!(
            "memory latency not measured (no room for {} MiB)",
            probe_bytes >> 20
        ),
    };
    print!("{}", table(&figures, args, &Machine::this(), &latency));
    Ok(())
}

fn table(figures: &[Measured], args: &AllArgs, machine: &Machine, latency: &str) -> String {
    let runs = args.runs;
    let plural = if runs == 1 { "" } else { "s" };
    let mut out = String::new();
    if args.markdown {
        out.push_str(&format!(
            "| what | `csd bench` | {machine}; {latency} ({runs} run{plural}) | target | met |\n|---|---|---|---|---|\n"
        ));
        for m in figures {
            out.push_str(&format!(
                "| {} | `{}` | {} | {} | {} |\n",
                m.what,
                m.bench,
                m.range(),
                m.target_text,
                m.met(runs)
            ));
        }
        return out;
    }
    out.push_str(&format!("machine: {machine}\n         {latency}\n\n"));
    out.push_str(&format!(
        "csd bench all: {runs} run{plural} of each benchmark, each in a fresh process{}\n",
        if args.quick {
            " (--quick: small inputs, figures not comparable with the targets)"
        } else {
            ""
        }
    ));
    let width = figures
        .iter()
        .map(|m| m.what.chars().count())
        .max()
        .unwrap_or(0);
    for m in figures {
        let pad = width - m.what.chars().count();
        let line = format!(
            "  {}{}  {:<9} {:<22} {:<22} {}",
            m.what,
            " ".repeat(pad),
            m.bench,
            m.range(),
            m.target_text,
            m.met(runs)
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(unit: Unit, values: &[f64], target: Option<Target>) -> Measured {
        Measured {
            id: "x",
            what: "x",
            bench: "ftl",
            unit,
            values: values.to_vec(),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            target,
            target_text: "",
            runs_meeting: target.map(|t| values.iter().filter(|&&v| t.met(v)).count() as u32),
        }
    }

    #[test]
    fn a_range_prints_its_unit_once() {
        let m = measured(Unit::MegaPerSec, &[5.72e6, 5.93e6], None);
        assert_eq!(m.range(), "5.72–5.93 M/s");
        let m = measured(Unit::Times, &[1.44, 1.65], None);
        assert_eq!(m.range(), "1.44–1.65×");
        let m = measured(Unit::Nanos, &[5600.0, 5600.0], None);
        assert_eq!(m.range(), "5.6 µs");
    }

    #[test]
    fn a_target_is_met_in_all_runs_none_or_some() {
        let at_least = Some(Target::AtLeast(1.7));
        assert_eq!(measured(Unit::Times, &[1.8, 1.9], at_least).met(2), "✓");
        assert_eq!(measured(Unit::Times, &[1.6, 1.5], at_least).met(2), "✗");
        assert_eq!(
            measured(Unit::Times, &[1.6, 1.8, 1.75], at_least).met(3),
            "2 of 3 runs"
        );
        // A bound is inclusive where the issue says ≤ and strict where it says <.
        assert!(Target::AtMost(1.2).met(1.2));
        assert!(!Target::Below(1.0).met(1.0));
        assert_eq!(measured(Unit::Times, &[3.0], None).met(1), "");
    }

    /// Every figure names a benchmark `csd bench all` runs.
    #[test]
    fn every_figure_comes_from_a_benchmark() {
        for f in &FIGURES {
            assert!(BENCHES.iter().any(|b| b.name == f.bench), "{}", f.id);
        }
    }
}
