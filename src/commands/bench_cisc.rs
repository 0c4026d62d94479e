//! `csd bench cisc`: how many CISC ops StorageFS executes per second of wall time, on one
//! core, with the stages running in wasmtime: the speed of the firmware-file-system model
//! itself, not a modelled figure. Its log rotates and is unlinked every 1024 ops, so the
//! process keeps freed memory (`memory::keep_freed_memory`, as `csd sweep` does): otherwise
//! glibc returns each log to the kernel and the next faults it in again.

use csd_device::storagefs::{Credentials, StorageFs};
use csd_runtime::WasmStages;
use csd_sdk::cisc::{append_crc_write, read_modify_write, FileRef, TxGrain};
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct CiscArgs {
    /// Ops per measurement.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u32).range(1..=100_000_000))]
    pub ops: u32,
    /// Record size of each op.
    #[arg(long, default_value = "4k", value_parser = crate::units::parse_size_in_memory)]
    pub size: u64,
    /// Timed repetitions (the best is reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    #[arg(long)]
    pub json: bool,
}

#[derive(serde::Serialize)]
struct Row {
    op: String,
    grain: String,
    ops: u32,
    ops_per_sec: f64,
    ns_per_op: f64,
}

/// Records per log file: like a key-value store's write-ahead log, the log rotates to a new
/// file and the old one is unlinked, so the model's memory stays bounded by one log.
const FILE_OPS: u32 = 1_024;

pub fn run(args: &CiscArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=1 << 20).contains(&args.size),
        "--size must be 1 byte to 1 MiB (one slot)"
    );
    anyhow::ensure!(args.ops > 0, "--ops must be at least 1");
    let mut runner = WasmStages::new(csd::builtin::STAGES)?;
    let who = Credentials { uid: 1 };
    let data = vec![0x61u8; args.size as usize];
    let mut rows = Vec::new();
    for (name, grain) in [
        ("append-crc-write", TxGrain::Macro),
        ("append-crc-write", TxGrain::Micro),
        ("read-modify-write", TxGrain::Macro),
    ] {
        let mut best = f64::INFINITY;
        for _ in 0..args.repeat.max(1) {
            let mut fs = StorageFs::new();
            let mut fd = fs.open(who, "/bench.0", true, &mut runner)?;
            if name == "read-modify-write" {
                let seed = append_crc_write(FileRef::Fd(fd), data.clone(), grain)?;
                fs.submit(who, &seed, &mut runner)?;
            }
            let t0 = Instant::now();
            for k in 0..args.ops {
                let op = if name == "read-modify-write" {
                    read_modify_write(FileRef::Fd(fd), 0, data.clone(), grain)?
                } else {
                    if k > 0 && k % FILE_OPS == 0 {
                        let old = format!("/bench.{}", k - FILE_OPS);
                        fs.close(who, fd)?;
                        fd = fs.open(who, &format!("/bench.{k}"), true, &mut runner)?;
                        let mut b = csd_sdk::cisc::CiscBuilder::new();
                        b.unlink(&old);
                        fs.submit(who, &b.build()?, &mut runner)?;
                    }
                    append_crc_write(FileRef::Fd(fd), data.clone(), grain)?
                };
                fs.submit(who, &op, &mut runner)?;
            }
            best = best.min(t0.elapsed().as_secs_f64());
        }
        rows.push(Row {
            op: name.into(),
            grain: format!("{grain:?}Tx"),
            ops: args.ops,
            ops_per_sec: f64::from(args.ops) / best,
            ns_per_op: best * 1e9 / f64::from(args.ops),
        });
    }
    if args.json {
        super::machine::print_json_rows("rows", &rows)?;
        return Ok(());
    }
    println!(
        "StorageFS CISC ops, {} B records, stages in wasmtime, one core (best of {}):",
        args.size, args.repeat
    );
    for r in &rows {
        println!(
            "  {:<18} {:<8} {:>12.0} ops/s  {:>8.0} ns/op",
            r.op, r.grain, r.ops_per_sec, r.ns_per_op
        );
    }
    Ok(())
}
