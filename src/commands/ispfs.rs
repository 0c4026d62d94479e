//! `csd ispfs`: ISPFS's evaluation on its PCM board (`pcm-zynq`).
//!
//! `query` is the word query of Figs. 8–9: the ISP engine through a directory's command
//! file against a software search through an EXT4-like page cache, per file size. `iozone`
//! is Fig. 7: ISPFS's POSIX path against an EXT4-like one over the same medium (DRAM, as
//! the paper ran it, or the PCM board).

use anyhow::bail;
use csd_device::Profile;
use csd_hostfs::ispfs::iozone::{self, Interface, IozoneReport, IozoneSpec, Medium, Test};
use csd_hostfs::ispfs::query::{self, QueryReport, QuerySpec};
use csd_runtime::WasmStages;
use csd_traces::report::Report;
use csd_traces::spec::{SystemKind, SystemSpec};
use csd_traces::store::NewRun;

#[derive(clap::Args, Debug)]
pub struct IspfsArgs {
    #[command(subcommand)]
    pub command: IspfsCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum IspfsCommand {
    /// The word query (ISPFS Figs. 8–9): search speed, I/O requests, host CPU and memory of
    /// the ISP engine and of a software search, per file size.
    ///
    /// Example: csd ispfs query --sizes 0.1m,1m,10m,100m
    Query(QueryArgs),
    /// iozone's rewrite, reread, random write and random read (ISPFS Fig. 7) through ISPFS
    /// and through an EXT4-like path over the same medium, per file and record size.
    ///
    /// Example: csd ispfs iozone --files 1m,100m --records 4k,1m --medium pcm
    Iozone(IozoneArgs),
}

#[derive(clap::Args, Debug)]
pub struct IozoneArgs {
    /// File sizes (binary units: 1m = 1 MiB), at most 256 MiB. The paper's is 256 MB.
    #[arg(long, value_delimiter = ',', default_value = "256m")]
    pub files: Vec<String>,
    /// Record sizes (binary units), 512 bytes to 16 MiB; a record larger than a file is
    /// skipped. The default is the paper's 1 KiB to 16 MiB.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1k,2k,4k,8k,16k,32k,64k,128k,256k,512k,1m,2m,4m,8m,16m"
    )]
    pub records: Vec<String>,
    /// Where both file systems keep the file: `dram`, as the paper ran Fig. 7 (ISPFS in a
    /// mapped region, EXT4 on a RAM disk sharing the host's memory with its page cache), or
    /// `pcm`, ISPFS's board (writes wait for the PCM's program time).
    #[arg(long, default_value = "dram")]
    pub medium: Medium,
    /// How iozone reaches the file: `posix` (a read or write call per record), `mmap`
    /// (`iozone -B`: records copied into and out of a mapping of the file), or both, as the
    /// paper ran Fig. 7.
    #[arg(long, value_delimiter = ',', default_value = "posix,mmap")]
    pub interface: Vec<Interface>,
    /// Device profile (ISPFS's board is pcm-zynq).
    #[arg(long, default_value = "pcm-zynq")]
    pub profile: String,
    /// Seed of the random tests' order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: super::runs::StoreArgs,
}

#[derive(clap::Args, Debug)]
pub struct QueryArgs {
    /// File sizes: bytes, or with k/m suffixes in decimal units (0.1m = 100,000 bytes), at
    /// most 256 MiB each.
    #[arg(long, value_delimiter = ',', default_value = "0.1m,1m,10m,100m")]
    pub sizes: Vec<String>,
    /// The keywords: up to four words of exactly 4 bytes (the engine compares 32-bit words).
    #[arg(long, value_delimiter = ',', default_value = "data,disk,page,file")]
    pub words: Vec<String>,
    /// Bytes per read() of the software solution.
    #[arg(long, default_value_t = 4096)]
    pub read_size: u64,
    /// Device profile (ISPFS's board is pcm-zynq).
    #[arg(long, default_value = "pcm-zynq")]
    pub profile: String,
    /// Seed of the files' text.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: super::runs::StoreArgs,
}

/// `100000`, `100k`, `0.1m`: decimal units, as the paper gives its word-query file sizes.
pub fn parse_size(s: &str) -> anyhow::Result<u64> {
    size_in(s, 1e3, query::MAX_QUERY_BYTES)
}

/// A size with k, m or g in units of `unit`, from 1 byte to `max`.
fn size_in(s: &str, unit: f64, max: u64) -> anyhow::Result<u64> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = match t.as_bytes().last() {
        Some(b'k') => (&t[..t.len() - 1], unit),
        Some(b'm') => (&t[..t.len() - 1], unit * unit),
        Some(b'g') => (&t[..t.len() - 1], unit * unit * unit),
        _ => (&t[..], 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| anyhow::anyhow!("size '{s}': expected bytes or a number with k, m or g"))?;
    let bytes = v * mult;
    if !(bytes >= 1.0 && bytes <= max as f64) {
        bail!("size '{s}': 1 byte to {max} bytes");
    }
    Ok(bytes.round() as u64)
}

pub fn iozone_spec(args: &IozoneArgs) -> anyhow::Result<IozoneSpec> {
    let list = |v: &[String], max| {
        v.iter()
            .map(|s| size_in(s, 1024.0, max))
            .collect::<anyhow::Result<Vec<u64>>>()
    };
    Ok(IozoneSpec {
        file_bytes: list(&args.files, iozone::MAX_FILE_BYTES)?,
        record_bytes: list(&args.records, iozone::MAX_RECORD_BYTES)?,
        medium: args.medium,
        interfaces: args.interface.clone(),
    })
}

/// Runs the iozone comparison.
pub fn measure_iozone(
    profile: &Profile,
    spec: &IozoneSpec,
    seed: u64,
    progress: bool,
) -> anyhow::Result<IozoneReport> {
    let n = spec.file_bytes.len() * spec.record_bytes.len();
    let bar = bar(progress, n, "(file, record) sizes");
    let report = iozone::compare(profile, spec, seed, || bar.inc(1))?;
    bar.finish_and_clear();
    Ok(report)
}

fn run_iozone(args: &IozoneArgs) -> anyhow::Result<()> {
    let profile = Profile::load(&args.profile)?;
    let spec = iozone_spec(args)?;
    args.store.check()?;
    let report = measure_iozone(&profile, &spec, args.seed, true)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_iozone(&report);
    }
    let kind = SystemKind::IspfsIozone { spec };
    args.store
        .save_and_say(new_run(&profile, args.seed, Report::Iozone(report), kind))
}

fn print_iozone(r: &IozoneReport) {
    println!(
        "ISPFS Fig. 7: iozone through ISPFS and an EXT4-like path on {}, the file in {}",
        r.profile,
        match r.spec.medium {
            Medium::Dram => "DRAM (EXT4 on a RAM disk)",
            Medium::Pcm => "the PCM board",
        }
    );
    println!("\n{:83}{:-^40}", "", " what EXT4 did ");
    println!(
        "{:<13} {:<5} {:>10} {:>10} {:>13} {:>13} {:>10}   {:>9} {:>9} {:>9} {:>10}",
        "test",
        "via",
        "file",
        "record",
        "ISPFS MB/s",
        "EXT4 MB/s",
        "ISPFS/EXT4",
        "pages in",
        "pages out",
        "faults",
        "waited ms"
    );
    for p in &r.points {
        println!(
            "{:<13} {:<5} {:>10} {:>10} {:>13.2} {:>13.2} {:>9.2}x   {:>9} {:>9} {:>9} {:>10.1}",
            p.test.name(),
            p.interface.name(),
            binary(p.file_bytes),
            binary(p.record_bytes),
            p.ispfs_mb_per_sec,
            p.ext4_mb_per_sec,
            p.ratio(),
            p.ext4.pages_read,
            p.ext4.pages_written_back,
            p.ext4.faults,
            p.ext4.throttled_ns as f64 / 1e6
        );
    }
    println!(
        "\npages in: read from the medium into EXT4's page cache (misses, readahead, a page\n\
         read before a partial write, or before a write through a mapping); pages out: written\n\
         back by the flusher; faults: through the mapping; waited: the writer held past the\n\
         dirty limit. ISPFS copies each record's bytes once, and through a mapping faults once\n\
         per page.\n"
    );
    for i in Interface::ALL {
        for t in Test::ALL {
            if let Some(m) = r.mean_ratio_through(t, i) {
                println!("mean ISPFS/EXT4 {:<13} {:<5} {m:.2}x", t.name(), i.name());
            }
        }
    }
}

fn binary(b: u64) -> String {
    match b {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

pub fn query_spec(args: &QueryArgs) -> anyhow::Result<QuerySpec> {
    Ok(QuerySpec {
        sizes: args
            .sizes
            .iter()
            .map(|s| parse_size(s))
            .collect::<anyhow::Result<_>>()?,
        keywords: args.words.clone(),
        read_bytes: args.read_size,
    })
}

/// Runs the word query with the built-in `search` stage as the host's software.
pub fn measure_query(
    profile: &Profile,
    spec: &QuerySpec,
    seed: u64,
    progress: bool,
) -> anyhow::Result<QueryReport> {
    let mut runner = WasmStages::new(csd::builtin::STAGES)?;
    let bar = bar(progress, spec.sizes.len(), "file sizes");
    let report = query::compare(profile, spec, seed, &mut runner, || bar.inc(1))?;
    bar.finish_and_clear();
    Ok(report)
}

/// The run an ISPFS comparison is saved as (`csd ispfs` and `csd repro ispfs`).
pub fn new_run(profile: &Profile, seed: u64, report: Report, kind: SystemKind) -> NewRun {
    let designs = match report {
        Report::Iozone(_) => ["ispfs", "ext4"],
        _ => ["isp", "software"],
    };
    NewRun {
        trace: None,
        profile: profile.name.clone(),
        designs: designs.map(String::from).to_vec(),
        seed,
        report,
        spec: Some(SystemSpec::new(profile.clone(), seed, kind)),
        sweep: None,
    }
}

/// A progress bar over `len` points, or a hidden one.
pub(super) fn bar(progress: bool, len: usize, what: &str) -> indicatif::ProgressBar {
    if !progress {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{{spinner}} [{{elapsed_precise}}] {{bar:40}} {{pos}}/{{len}} {what}"
        ))
        .expect("a valid template"),
    );
    bar
}

pub fn run(args: &IspfsArgs) -> anyhow::Result<()> {
    match &args.command {
        IspfsCommand::Query(a) => run_query(a),
        IspfsCommand::Iozone(a) => run_iozone(a),
    }
}

fn run_query(args: &QueryArgs) -> anyhow::Result<()> {
    let profile = Profile::load(&args.profile)?;
    let spec = query_spec(args)?;
    args.store.check()?;
    let report = measure_query(&profile, &spec, args.seed, true)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_query(&report);
    }
    let kind = SystemKind::IspfsQuery { spec };
    args.store
        .save_and_say(new_run(&profile, args.seed, Report::Ispfs(report), kind))
}

fn print_query(r: &QueryReport) {
    println!(
        "ISPFS Figs. 8-9: word query for {} on {}",
        r.spec.keywords.join(", "),
        r.profile
    );
    println!(
        "engine: {:.1} MB/s from the board's timing, {:.2} µs setup per instruction; host search: {:.1} fuel per byte",
        r.engine_mb_per_sec,
        r.engine_setup_ns as f64 / 1e3,
        r.search_fuel_per_byte
    );
    println!(
        "\n{:>10}  {:<9} {:>10} {:>11} {:>9} {:>9} {:>9} {:>8} {:>11}  found",
        "file",
        "solution",
        "MB/s",
        "time",
        "syscalls",
        "blk reqs",
        "I/O reqs",
        "host CPU",
        "host mem"
    );
    for p in &r.points {
        for (name, s) in [("isp", &p.isp), ("software", &p.software)] {
            println!(
                "{:>10}  {:<9} {:>10.2} {:>11} {:>9} {:>9} {:>9} {:>7.2}% {:>11}  {:?}",
                size(p.bytes),
                name,
                s.mb_per_sec,
                time(s.search_ns),
                s.syscalls,
                s.block_requests,
                s.io_requests,
                s.host_cpu_share * 100.0,
                size(s.host_memory_bytes),
                s.found
            );
        }
    }
    let (isp, sw) = r.mean_speeds();
    println!(
        "\nmean speed: ISP {isp:.1} MB/s, software {sw:.2} MB/s: {:.1}x",
        isp / sw.max(f64::MIN_POSITIVE)
    );
    if let Some(p) = r.points.iter().max_by_key(|p| p.bytes) {
        let (a, b) = (p.isp.io_requests, p.software.io_requests);
        println!(
            "I/O requests at {}: ISP {a} system calls, software {b} block requests ({:.0}% fewer)",
            size(p.bytes),
            100.0 * (1.0 - a as f64 / b.max(1) as f64)
        );
    }
    let h = &r.host_io;
    println!(
        "host 4 KiB reads of the PCM: {} alone; during the largest query mean {}, max {} ({} reads; the engine took {:.2}x as long)",
        time(h.idle_ns),
        time(h.mean_during_query_ns),
        time(h.max_during_query_ns),
        h.requests,
        h.engine_slowdown
    );
}

fn size(b: u64) -> String {
    if b >= 1_000_000 {
        format!("{:.1} MB", b as f64 / 1e6)
    } else if b >= 1000 {
        format!("{:.1} kB", b as f64 / 1e3)
    } else {
        format!("{b} B")
    }
}

fn time(ns: u64) -> String {
    match ns {
        n if n >= 1_000_000_000 => format!("{:.2} s", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.2} ms", n as f64 / 1e6),
        n if n >= 1000 => format!("{:.2} µs", n as f64 / 1e3),
        n => format!("{n} ns"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_decimal_units() {
        assert_eq!(parse_size("0.1m").unwrap(), 100_000);
        assert_eq!(parse_size("100M").unwrap(), 100_000_000);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("2k").unwrap(), 2000);
        for bad in ["0", "-1m", "1g", "x", "nanm", ""] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
