//! Crash-point enumeration for StorageFS: every durable step of every op of a seeded
//! workload is a crash point. Each point's image is recovered and compared with an oracle
//! that ran the op without a crash:
//!
//! - MacroTx: the medium equals the state before the op or after it, never a mix.
//! - MicroTx: the medium equals the state after the op whenever its operational log was
//!   durable, and the state before it otherwise.
//! - Always: every record an `append_crc_write` left in a log file verifies, and every
//!   inode counts the names that reach it.

use super::journal::{recover, DurableImage, FsStep, OrderFault, Recovery};
use super::medium::{Credentials, FileData, Medium};
use super::stage::StageRunner;
use super::StorageFs;
use crate::rng::SimRng;
use csd_sdk::cisc::{self, CiscBuilder, FileRef, Stage, TxGrain};
use serde::Serialize;

/// Log files: only `append_crc_write` records go there, so each can be verified.
const LOGS: [&str; 2] = ["/wal/0", "/wal/1"];
/// Data files: read-modify-write, open-write-sync-close and pipelines go there.
const DATA: [&str; 3] = ["/data/a", "/data/b", "/data/c"];

/// What to enumerate.
#[derive(Clone, Copy, Debug)]
pub struct CrashPlan {
    pub seed: u64,
    /// Fresh file systems, each running `ops` ops.
    pub runs: u32,
    pub ops: u32,
    /// Break an ordering rule, to show the checker catches it.
    pub fault: Option<OrderFault>,
}

/// What recovery costs the device, to turn its work into time.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RecoveryCosts {
    /// Firmware time per log record read.
    pub record_ns: u64,
    /// Device-CPU time per unit of fuel (stages re-run by MicroTx recovery).
    pub ns_per_fuel: f64,
    /// The medium's write bandwidth.
    pub write_bytes_per_sec: u64,
}

impl RecoveryCosts {
    /// From a profile: its firmware entry cost, device CPU and all dies programming at once.
    pub fn of(profile: &crate::Profile) -> RecoveryCosts {
        let g = &profile.geometry;
        let dies = u64::from(g.dies());
        let page = u64::from(g.page_size_bytes);
        RecoveryCosts {
            record_ns: profile.device_cpu.metadata_entry_ns,
            ns_per_fuel: profile.device_cpu.ns_per_fuel,
            write_bytes_per_sec: (dies * page * 1_000_000_000)
                .checked_div(profile.timing.page_program_ns)
                .unwrap_or(u64::MAX)
                .max(1),
        }
    }

    /// The time of one recovery.
    pub fn ns(&self, r: &Recovery) -> u64 {
        r.records * self.record_ns
            + (r.fuel as f64 * self.ns_per_fuel).round() as u64
            + crate::transfer_ns(r.bytes_written, self.write_bytes_per_sec)
    }
}

/// Recovery work summed over the crash points of one grain.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GrainSummary {
    pub points: u64,
    pub violations: u64,
    /// Points where recovery had something to do.
    pub recoveries: u64,
    pub recovery: Recovery,
    /// Recovery time summed over the points that recovered something, and the longest.
    pub recovery_ns: u64,
    pub max_recovery_ns: u64,
}

impl GrainSummary {
    /// Mean recovery time over the crash points where recovery had work.
    pub fn mean_recovery_ns(&self) -> f64 {
        self.recovery_ns as f64 / self.recoveries.max(1) as f64
    }
}

/// The enumeration's result.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CrashReport {
    pub ops: u64,
    pub macro_tx: GrainSummary,
    pub micro_tx: GrainSummary,
    /// The first violation found, described.
    pub first_violation: Option<String>,
}

impl CrashReport {
    pub fn points(&self) -> u64 {
        self.macro_tx.points + self.micro_tx.points
    }
    pub fn violations(&self) -> u64 {
        self.macro_tx.violations + self.micro_tx.violations
    }
}

/// Runs the plan and checks every crash point.
pub fn enumerate(
    plan: &CrashPlan,
    costs: &RecoveryCosts,
    runner: &mut dyn StageRunner,
) -> Result<CrashReport, String> {
    let mut report = CrashReport::default();
    let mut rng = SimRng::new(plan.seed);
    let who = Credentials { uid: 1 };
    for run in 0..plan.runs {
        let mut fs = StorageFs::new();
        fs.inject_fault(plan.fault);
        let mut fds = Vec::new();
        for path in LOGS.iter().chain(DATA.iter()) {
            fds.push(
                fs.open(who, path, true, runner)
                    .map_err(|e| e.to_string())?,
            );
        }
        for k in 0..plan.ops {
            let grain = if rng.next_u64().is_multiple_of(2) {
                TxGrain::Macro
            } else {
                TxGrain::Micro
            };
            let op = random_op(&mut rng, &fds, grain, k).map_err(|e| e.to_string())?;
            let before = fs.medium().clone();
            let done = fs
                .submit(who, &op, runner)
                .map_err(|e| format!("run {run}, op {k}: {e}"))?;
            let after = fs.medium().clone();
            check_op(
                &before,
                &after,
                &done.steps,
                grain,
                costs,
                runner,
                &mut report,
            )
            .map_err(|e| format!("run {run}, op {k}: {e}"))?;
            report.ops += 1;
        }
    }
    Ok(report)
}

fn check_op(
    before: &Medium,
    after: &Medium,
    steps: &[FsStep],
    grain: TxGrain,
    costs: &RecoveryCosts,
    runner: &mut dyn StageRunner,
    report: &mut CrashReport,
) -> Result<(), String> {
    let mut image = DurableImage {
        medium: before.clone(),
        ..DurableImage::default()
    };
    let mut logged = false;
    for k in 0..=steps.len() {
        if k > 0 {
            image.persist(&steps[k - 1]).map_err(|e| e.to_string())?;
            logged |= matches!(steps[k - 1], FsStep::OpLog { .. });
        }
        let mut crashed = image.clone();
        let (rec, verdict) = match recover(&mut crashed, runner) {
            Ok(rec) => (rec, judge(&crashed.medium, before, after, grain, logged)),
            Err(e) => (Recovery::default(), Some(format!("recovery failed: {e}"))),
        };
        let summary = match grain {
            TxGrain::Macro => &mut report.macro_tx,
            TxGrain::Micro => &mut report.micro_tx,
        };
        summary.points += 1;
        if rec != Recovery::default() {
            summary.recoveries += 1;
            let ns = costs.ns(&rec);
            summary.recovery_ns += ns;
            summary.max_recovery_ns = summary.max_recovery_ns.max(ns);
            add(&mut summary.recovery, &rec);
        }
        if let Some(why) = verdict {
            summary.violations += 1;
            report.first_violation.get_or_insert_with(|| {
                format!(
                    "{grain:?}Tx, crash after step {k} of {}: {why}",
                    steps.len()
                )
            });
        }
    }
    Ok(())
}

/// Adds one recovery's work to a sum (every field is a count).
fn add(sum: &mut Recovery, r: &Recovery) {
    sum.redone += r.redone;
    sum.discarded += r.discarded;
    sum.rolled_forward += r.rolled_forward;
    sum.commands_rerun += r.commands_rerun;
    sum.records += r.records;
    sum.bytes_written += r.bytes_written;
    sum.fuel += r.fuel;
}

/// `None` if the recovered medium is what the grain promises, else why not.
fn judge(
    got: &Medium,
    before: &Medium,
    after: &Medium,
    grain: TxGrain,
    logged: bool,
) -> Option<String> {
    if let Some(bad) = bad_record(got) {
        return Some(bad);
    }
    if let Err(e) = got.check_links() {
        return Some(format!("the recovered namespace: {e}"));
    }
    let ok = match grain {
        TxGrain::Macro => got == before || got == after,
        TxGrain::Micro if logged => got == after,
        TxGrain::Micro => got == before,
    };
    if ok {
        return None;
    }
    let differs = |m: &Medium| {
        m.names
            .keys()
            .chain(got.names.keys())
            .find(|p| file(m, p) != file(got, p))
            .cloned()
            .unwrap_or_else(|| "the namespace".into())
    };
    Some(match (grain, logged) {
        (TxGrain::Macro, _) => format!(
            "a mix of before and after ({} differs from before, {} from after)",
            differs(before),
            differs(after)
        ),
        (TxGrain::Micro, true) => {
            format!(
                "the op was logged but {} is not as the op left it",
                differs(after)
            )
        }
        (TxGrain::Micro, false) => {
            format!("the op was never logged but {} changed", differs(before))
        }
    })
}

fn file<'m>(m: &'m Medium, path: &str) -> Option<&'m FileData> {
    m.lookup(path)
        .and_then(|i| m.inodes.get(&i))
        .map(|i| &i.data)
}

/// The first record of a log file whose CRC does not verify (records are a u32 length, the
/// payload, and the CRC-32 of length and payload).
fn bad_record(m: &Medium) -> Option<String> {
    for path in LOGS {
        let Some(data) = file(m, path).map(FileData::to_vec) else {
            continue;
        };
        let mut at = 0usize;
        while at < data.len() {
            let Some(len) = data.get(at..at + 4) else {
                return Some(format!("{path}: a torn length at byte {at}"));
            };
            let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
            let body = data.get(at..at + 4 + len);
            let crc = data.get(at + 4 + len..at + 8 + len);
            match (body, crc) {
                (Some(b), Some(c)) if crc32fast::hash(b).to_le_bytes() == c => at += 8 + len,
                _ => return Some(format!("{path}: the record at byte {at} does not verify")),
            }
        }
    }
    None
}

/// One of the pre-built ops, or a custom pipeline, on one of the workload's files.
fn random_op(
    rng: &mut SimRng,
    fds: &[u32],
    grain: TxGrain,
    k: u32,
) -> Result<cisc::CiscOp, cisc::CiscError> {
    let data_fd = |rng: &mut SimRng| {
        FileRef::Fd(fds[LOGS.len() + (rng.next_u64() % DATA.len() as u64) as usize])
    };
    match rng.next_u64() % 6 {
        0 | 1 => {
            let len = 1 + (rng.next_u64() % 300) as usize;
            let mut record = (len as u32).to_le_bytes().to_vec();
            record.extend((0..len).map(|i| (i as u64 ^ rng.next_u64()) as u8));
            let log = FileRef::Fd(fds[(rng.next_u64() % LOGS.len() as u64) as usize]);
            cisc::append_crc_write(log, record, grain)
        }
        2 => {
            let off = rng.next_u64() % 256;
            let mask: Vec<u8> = (0..64).map(|_| rng.next_u64() as u8).collect();
            cisc::read_modify_write(data_fd(rng), off, mask, grain)
        }
        3 => {
            let path = format!("/kv/{:03}", rng.next_u64() % 8);
            let data = format!("value {k}").into_bytes();
            cisc::open_write_sync_close(&path, data, grain)
        }
        5 => {
            // A key rewritten through a temporary file renamed over it, or (git's way) an
            // object written to a temporary file that is linked to its name and unlinked;
            // and a data file cut.
            let key = format!("/kv/{:03}", rng.next_u64() % 8);
            let tmp = format!("{key}.tmp");
            let mut b = CiscBuilder::new();
            b.grain(grain);
            let data = b.input(format!("new value {k}").into_bytes());
            let h = b.open(&tmp, true);
            b.truncate(h, 0).pwrite(h, 0, data).close(h);
            if rng.next_u64().is_multiple_of(2) {
                b.rename(&tmp, &key);
            } else {
                b.link(&tmp, &format!("/objects/{k}")).unlink(&tmp);
            }
            b.truncate(data_fd(rng), 64 + rng.next_u64() % 256);
            b.build()
        }
        _ => {
            // read → compress → append, then the same data multiplied back in place.
            let file = data_fd(rng);
            let mut b = CiscBuilder::new();
            b.grain(grain);
            let factor = b.input(3u32.to_le_bytes().to_vec());
            let old = b.pread(file, 0, 128);
            let packed = b.process(Stage::Compress, &[old]);
            b.append(file, packed);
            let scaled = b.process(Stage::Multiply, &[old, factor]);
            b.pwrite(file, 0, scaled);
            b.build()
        }
    }
}
