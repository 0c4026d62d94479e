//! `csd bench replay`: how fast the replay engine runs a metadata-heavy trace, and whether
//! its memory stays flat as the trace grows.

use anyhow::{bail, Context};
use csd_device::Profile;
use csd_hostfs::ndp::NdpCompute;
use csd_traces::prescan::Prescan;
use csd_traces::replay::ReplayTarget;
use csd_traces::replay::{replay_scanned, OpRunners, Pace, ReplayOptions};
use csd_traces::Strictness;
use serde::{Deserialize, Serialize};
use std::io::{BufReader, Read, Write};

/// Target from issue 22 (issue 6 asked for 1 M).
const TARGET_EVENTS_PER_SEC: f64 = 2e6;

#[derive(clap::Args, Debug)]
pub struct ReplayBenchArgs {
    /// Events in the synthetic trace, at most 50 M (it is written to a temporary file, ~100
    /// bytes an event).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=50_000_000))]
    pub events: u64,
    /// Design to replay under.
    #[arg(long, default_value = "lightfs")]
    pub design: ReplayTarget,
    #[arg(long, default_value = "cosmos-plus")]
    pub profile: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct ReplayChildArgs {
    /// The trace file to replay (written by the parent beforehand).
    #[arg(long)]
    pub trace: std::path::PathBuf,
    #[arg(long)]
    pub design: ReplayTarget,
    #[arg(long)]
    pub profile: String,
}

/// A metadata-heavy trace generated on the fly (constant memory): 4 pids, each looping over
/// create, write 4 KiB, close, stat, rename, unlink over 1024 names in 16 directories of its
/// own. The file system it builds, and the set of paths, stay the same size however long the
/// trace is, so memory that grows with the length would be the replay engine's own.
struct Synthetic {
    total: u64,
    next: u64,
    line: Vec<u8>,
    at: usize,
    header_done: bool,
}

impl Synthetic {
    fn new(total: u64) -> Synthetic {
        Synthetic {
            total,
            next: 0,
            line: Vec::new(),
            at: 0,
            header_done: false,
        }
    }

    fn fill(&mut self) {
        use std::fmt::Write as _;
        let mut s = String::new();
        if !self.header_done {
            self.header_done = true;
            s.push_str(r#"{"format":"csd-trace","version":1,"source":"synthetic","clock":"ns"}"#);
        } else {
            let i = self.next;
            self.next += 1;
            let pid = i % 4;
            let k = i / 4; // this pid's step
                           // 16 directories × 64 names per pid, reused: a bounded file system.
            let file = (k / 7) % 1024;
            let dir = file % 16;
            let d = format!("/bench/p{pid}/d{dir}");
            let t = i * 1000;
            let _ = match k % 7 {
                0 if k / 7 < 16 => {
                    write!(s, r#"{{"t":{t},"pid":{pid},"op":"mkdir","path":"{d}"}}"#)
                }
                0 => write!(s, r#"{{"t":{t},"pid":{pid},"op":"stat","path":"{d}"}}"#),
                1 => write!(
                    s,
                    r#"{{"t":{t},"pid":{pid},"op":"open","path":"{d}/f{file}","flags":"O_WRONLY|O_CREAT|O_TRUNC","ret":3}}"#
                ),
                2 => write!(
                    s,
                    r#"{{"t":{t},"pid":{pid},"op":"write","fd":3,"len":4096,"ret":4096}}"#
                ),
                3 => write!(s, r#"{{"t":{t},"pid":{pid},"op":"close","fd":3,"ret":0}}"#),
                4 => write!(
                    s,
                    r#"{{"t":{t},"pid":{pid},"op":"stat","path":"{d}/f{file}"}}"#
                ),
                5 => write!(
                    s,
                    r#"{{"t":{t},"pid":{pid},"op":"rename","path":"{d}/f{file}","to":"{d}/g{file}"}}"#
                ),
                _ => write!(
                    s,
                    r#"{{"t":{t},"pid":{pid},"op":"unlink","path":"{d}/g{file}"}}"#
                ),
            };
        }
        s.push('\n');
        self.line = s.into_bytes();
        self.at = 0;
    }
}

impl Read for Synthetic {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.line.len() {
            if self.header_done && self.next == self.total {
                return Ok(0);
            }
            self.fill();
        }
        let n = buf.len().min(self.line.len() - self.at);
        buf[..n].copy_from_slice(&self.line[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[derive(Serialize, Deserialize)]
struct ChildReport {
    events: u64,
    wall_ns: u64,
    /// Of `wall_ns`, the first pass's (the pre-scan).
    prescan_ns: u64,
    ops: u64,
    rss_peak_bytes: u64,
}

fn child(args: &ReplayChildArgs) -> anyhow::Result<ChildReport> {
    let profile = Profile::load(&args.profile)?;
    let mut factory = |t: &str, _: &str| -> Result<Box<dyn NdpCompute>, String> {
        Err(format!("no ndp ops expected (got {t})"))
    };
    let opts = ReplayOptions {
        pace: Pace::Afap,
        seed: 1,
        strictness: Strictness::Strict,
    };
    let open = || -> std::io::Result<_> {
        Ok(BufReader::with_capacity(
            1 << 16,
            std::fs::File::open(&args.trace)?,
        ))
    };
    // What `replay` does, the two passes timed apart.
    let started = std::time::Instant::now();
    let scan = Prescan::run(open()?, opts.strictness)?;
    let prescan_ns = started.elapsed().as_nanos() as u64;
    let r = replay_scanned(
        &scan,
        open,
        &profile,
        args.design,
        OpRunners {
            compute: &mut factory,
            isc: None,
            stages: None,
        },
        &opts,
        |_| {},
    )?;
    let wall_ns = started.elapsed().as_nanos() as u64;
    if let Some((op, e)) = r.first_errors.iter().next() {
        bail!("the benchmark trace failed to replay: {op}: {e}");
    }
    Ok(ChildReport {
        events: r.events,
        wall_ns,
        prescan_ns,
        ops: r.ops,
        rss_peak_bytes: super::memory::proc_status_bytes("VmHWM")?,
    })
}

pub fn run_child(args: &ReplayChildArgs) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string(&child(args)?)?);
    Ok(())
}

/// Writes an `events`-long synthetic trace to a temporary file and replays it in a child.
/// The trace is written before the clock starts: what is timed is the replay of a trace
/// file, as users run it, not the generator.
fn spawn(events: u64, args: &ReplayBenchArgs) -> anyhow::Result<ChildReport> {
    let dir = tempfile::tempdir().context("creating a directory for the benchmark trace")?;
    let trace = dir.path().join("bench.trace");
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(&trace).context("writing the benchmark trace")?,
    );
    std::io::copy(&mut Synthetic::new(events), &mut out)
        .and_then(|_| out.flush())
        .context("writing the benchmark trace")?;
    drop(out);
    let exe = std::env::current_exe().context("locating the csd executable")?;
    let out = std::process::Command::new(exe)
        .args(["bench", "replay-child", "--trace"])
        .arg(&trace)
        .args(["--design", args.design.name(), "--profile", &args.profile])
        .output()
        .context("running the replay benchmark child process")?;
    if !out.status.success() {
        bail!(
            "replay benchmark failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).context("reading the replay benchmark's report")
}

#[derive(Serialize)]
struct Report {
    design: ReplayTarget,
    profile: String,
    events: u64,
    wall_s: f64,
    /// Of `wall_s`, the pre-scan's (parsing on every core) and the replay pass's (one thread
    /// applying the events, one parsing beside it).
    prescan_s: f64,
    replay_pass_s: f64,
    events_per_sec: f64,
    target_events_per_sec: f64,
    ratio_to_target: f64,
    rss_peak_quarter_bytes: u64,
    rss_peak_full_bytes: u64,
    rss_growth_ratio: f64,
}

pub fn run(args: &ReplayBenchArgs) -> anyhow::Result<()> {
    // Each size in a fresh process, so each peak RSS is that replay's own.
    let quarter = spawn((args.events / 4).max(1), args)?;
    let full = spawn(args.events, args)?;
    let eps = full.events as f64 / (full.wall_ns as f64 / 1e9);
    let r = Report {
        design: args.design,
        profile: args.profile.clone(),
        events: full.events,
        wall_s: full.wall_ns as f64 / 1e9,
        prescan_s: full.prescan_ns as f64 / 1e9,
        replay_pass_s: full.wall_ns.saturating_sub(full.prescan_ns) as f64 / 1e9,
        events_per_sec: eps,
        target_events_per_sec: TARGET_EVENTS_PER_SEC,
        ratio_to_target: eps / TARGET_EVENTS_PER_SEC,
        rss_peak_quarter_bytes: quarter.rss_peak_bytes,
        rss_peak_full_bytes: full.rss_peak_bytes,
        rss_growth_ratio: full.rss_peak_bytes as f64 / quarter.rss_peak_bytes.max(1) as f64,
    };
    if args.json {
        super::machine::print_json(&r)?;
        return Ok(());
    }
    println!(
        "replay of a metadata-heavy synthetic trace under {} on {} (both passes; the pre-scan parses on every core, the replay pass applies on one thread and parses on another):",
        r.design, r.profile
    );
    println!(
        "  {} events in {:.2} s: {:.0} events/s ({:.2}× the {:.0} target)",
        r.events, r.wall_s, r.events_per_sec, r.ratio_to_target, r.target_events_per_sec
    );
    println!(
        "  of which the pre-scan {:.2} s, the replay pass {:.2} s",
        r.prescan_s, r.replay_pass_s
    );
    println!(
        "  peak RSS: {} at {} events, {} at {} events ({:.2}×: memory {} with trace length;\n  \
         the device model keeps 12 B of OOB state per flash page programmed, until the flash wraps)",
        crate::units::fmt_bytes(r.rss_peak_quarter_bytes),
        quarter.events,
        crate::units::fmt_bytes(r.rss_peak_full_bytes),
        full.events,
        r.rss_growth_ratio,
        if r.rss_growth_ratio < 1.1 {
            "flat"
        } else {
            "grows"
        }
    );
    Ok(())
}
