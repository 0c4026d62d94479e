//! `csd device run`: a fio-like synthetic driver of the device model.

use crate::units::{fmt_bytes, fmt_duration, fmt_rate, parse_size, thousands, us};
use anyhow::Context;
use csd_device::synth::{LatencySummary, RwPattern, SynthJob, SynthReport};
use csd_device::{DataMode, Device, Profile};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Device profile: a built-in name (see `csd profiles`) or a path to a .toml file.
    #[arg(long, short, default_value = csd_device::profile::DEFAULT_PROFILE)]
    pub profile: String,
    /// Access pattern: read, write, randread, randwrite or randrw.
    #[arg(long, default_value = "randwrite", value_parser = parse_rw)]
    pub rw: RwPattern,
    /// Block size of each request, whole 512-byte logical blocks (e.g. 4k, 16k, 128k).
    #[arg(long, default_value = "16k", value_parser = parse_size)]
    pub bs: u64,
    /// Requests kept in flight.
    #[arg(long, default_value_t = 32)]
    pub qd: u32,
    /// Region addressed, from offset 0 (fio --size).
    #[arg(long, default_value = "4g", value_parser = parse_size)]
    pub size: u64,
    /// Total bytes to transfer (fio --io_size) [default: --size].
    #[arg(long, value_parser = parse_size)]
    pub io: Option<u64>,
    /// Percentage of reads for randrw.
    #[arg(long, default_value_t = 70)]
    pub rwmixread: u32,
    /// Seed of the request generator: the same seed gives the same report.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the whole region once before measuring [default: on for read patterns].
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub prefill: Option<bool>,
    /// Keep page payloads (data mode) instead of timing only.
    #[arg(long)]
    pub data: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write every request's latency to this file, as CSV (`seq,op,submitted_ns,
    /// latency_ns`), streamed as the run goes (the report's percentiles come from
    /// histograms within 0.1 % either way).
    #[arg(long, value_name = "FILE")]
    pub latency_log: Option<std::path::PathBuf>,
}

fn parse_rw(s: &str) -> Result<RwPattern, String> {
    s.parse()
}

pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    let profile = Profile::load(&args.profile)?;
    let mode = if args.data {
        DataMode::Payloads
    } else {
        DataMode::TimingOnly
    };
    let mut dev = Device::new(&profile, mode)?;
    let job = SynthJob {
        rw: args.rw,
        block_size_bytes: args.bs,
        queue_depth: args.qd,
        region_bytes: args.size,
        io_bytes: args.io.unwrap_or(args.size),
        read_percent: args.rwmixread,
        seed: args.seed,
        prefill: args.prefill.unwrap_or(args.rw.reads()),
    };
    tracing::info!(?job, profile = %profile.name, "starting synthetic job");
    let total_ops = job.io_bytes.div_ceil(job.block_size_bytes.max(1));
    let bar = progress_bar(total_ops, "requests");
    let mut log = match &args.latency_log {
        Some(path) => Some(LatencyLog::create(path)?),
        None => None,
    };
    let report = job
        .run_logged(&mut dev, &mut |done, _| bar.set_position(done), &mut |s| {
            if let Some(l) = log.as_mut() {
                l.write(s);
            }
        })
        .with_context(|| format!("running {} on profile '{}'", job.rw, profile.name))?;
    bar.finish_and_clear();
    if let Some(l) = log {
        l.finish()?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(())
}

/// Every request's latency as CSV, buffered; the first write error is kept and reported
/// when the run ends (the run itself does not stop for it).
struct LatencyLog {
    path: std::path::PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    error: Option<std::io::Error>,
}

impl LatencyLog {
    fn create(path: &std::path::Path) -> anyhow::Result<LatencyLog> {
        use std::io::Write;
        let file = std::fs::File::create(path)
            .with_context(|| format!("creating the latency log {}", path.display()))?;
        let mut out = std::io::BufWriter::new(file);
        writeln!(out, "seq,op,submitted_ns,latency_ns")
            .with_context(|| format!("writing the latency log {}", path.display()))?;
        Ok(LatencyLog {
            path: path.to_path_buf(),
            out,
            error: None,
        })
    }

    fn write(&mut self, s: csd_device::synth::LatencySample) {
        use std::io::Write;
        if self.error.is_none() {
            let op = if s.read { "read" } else { "write" };
            if let Err(e) = writeln!(
                self.out,
                "{},{op},{},{}",
                s.seq, s.submitted_ns, s.latency_ns
            ) {
                self.error = Some(e);
            }
        }
    }

    fn finish(mut self) -> anyhow::Result<()> {
        use std::io::Write;
        let flushed = self.out.flush();
        match self.error.take().map_or(flushed, Err) {
            Ok(()) => Ok(()),
            Err(e) => {
                Err(e).with_context(|| format!("writing the latency log {}", self.path.display()))
            }
        }
    }
}

/// A progress bar on stderr for long runs; hidden for short ones and when stderr is not a
/// terminal (indicatif draws nothing then), so piped output stays clean.
pub fn progress_bar(total: u64, what: &str) -> ProgressBar {
    if total < 200_000 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} [{{elapsed_precise}}] {{bar:40}} {{human_pos}}/{{human_len}} {what} ({{eta}} left)"
        ))
        .expect("static template"),
    );
    bar
}

fn latency_row(label: &str, l: &LatencySummary) {
    println!(
        "  {label:<16} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        us(l.mean_ns),
        us(l.min_ns),
        us(l.p50_ns),
        us(l.p99_ns),
        us(l.p999_ns),
        us(l.max_ns)
    );
}

fn print_report(r: &SynthReport) {
    println!(
        "csd device run: profile {}, {} bs={} qd={} size={} seed={}{}",
        r.profile,
        r.rw,
        fmt_bytes(r.block_size_bytes),
        r.queue_depth,
        fmt_bytes(r.region_bytes),
        r.seed,
        if r.prefilled_pages > 0 {
            format!(" (prefilled {} pages)", thousands(r.prefilled_pages))
        } else {
            String::new()
        }
    );
    println!();
    println!("  requests         {}", thousands(r.ops));
    println!("  transferred      {}", fmt_bytes(r.bytes));
    println!("  virtual time     {}", fmt_duration(r.duration_ns));
    println!("  IOPS             {}", fmt_iops(r.iops));
    println!("  bandwidth        {}", fmt_rate(r.bandwidth_bytes_per_sec));
    println!();
    println!(
        "  latency (µs)     {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "mean", "min", "p50", "p99", "p99.9", "max"
    );
    latency_row("all", &r.latency);
    if let (Some(rd), Some(wr)) = (&r.read_latency, &r.write_latency) {
        latency_row("read", rd);
        latency_row("write", wr);
    }
    println!(
        "  stages (mean µs) nvme {}  dma {}  flash {}",
        us(r.stage_means.nvme_ns),
        us(r.stage_means.dma_ns),
        us(r.stage_means.flash_ns)
    );
    println!();
    let c = &r.counters;
    println!(
        "  flash            {} page reads, {} page programs, {} GC copybacks",
        thousands(c.io.flash_page_reads),
        thousands(c.io.flash_page_programs),
        thousands(c.ftl.gc_pages_migrated)
    );
    if c.io.data_buffer_hits > 0 {
        println!(
            "  data buffer      {} host pages served from the firmware's DRAM",
            thousands(c.io.data_buffer_hits)
        );
    }
    println!(
        "  GC               {} victims, {} blocks erased, WAF {:.3}",
        thousands(c.ftl.gc_victims),
        thousands(c.ftl.blocks_erased),
        c.waf
    );
}

/// IOPS as a whole number, or with two decimals below 100 (a run of a few huge requests
/// over seconds printed "0").
fn fmt_iops(iops: f64) -> String {
    if iops < 100.0 {
        format!("{iops:.2}")
    } else {
        thousands(iops.round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::fmt_iops;

    #[test]
    fn iops_below_100_keep_two_decimals() {
        assert_eq!(fmt_iops(0.211), "0.21");
        assert_eq!(fmt_iops(99.994), "99.99");
        assert_eq!(fmt_iops(32_015.4), "32,015");
    }
}
