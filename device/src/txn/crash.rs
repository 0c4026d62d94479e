//! Crash checking of the transaction layer: a seeded workload (host writes inside and
//! outside snapshots, task begins, reads, writes, commits and aborts, with GC throughout) runs
//! once with the persist log on, checking isolation as it goes; then every crash point is
//! rebuilt from the log under a [`CrashModel`], recovered (TxISC §III-D) and compared with an
//! oracle: every LPN holds what the acknowledged operations left, and the operation in flight
//! is all or nothing.
//!
//! Flash writes (programs, erases, FTL journal entries) complete some time after they are
//! issued, so under [`CrashModel::Reorder`] those since the last barrier may be lost in any
//! combination; the task table and delta records are capacitor-backed and durable at once.
//! A torn program fails its ECC and reads as unprogrammed (a lost program); a torn erase
//! leaves half of its block's pages unreadable.
//!
//! The log is checked against the device's own durable state after every operation, so a
//! durable change the log missed is caught at the operation that made it.

use super::*;
use crate::addr::Lpn;
use crate::crash::{
    judge, last_steps, states, CrashModel, CrashReport, CrashState, Found, Violation,
};
use crate::device::{DataMode, IoPath};
use crate::durable::{recover, DurableImage};
use crate::geometry::Geometry;
use crate::profile::{FtlPolicy, Profile};
use crate::rng::SimRng;

pub(crate) const PAGE: usize = 512;
/// LPNs the workloads touch: files and plain host data.
pub(crate) const UNIVERSE: u64 = 56;
pub(crate) const FILES: u64 = 3;
pub(crate) const PPB: u32 = 4;

/// 2 dies × 24 blocks × 4 pages: a few hundred writes run GC many times.
pub(crate) fn tiny() -> Profile {
    let mut p = Profile::load("daisyplus-femu").expect("built-in");
    p.geometry = Geometry {
        channels: 2,
        dies_per_channel: 1,
        planes_per_die: 1,
        blocks_per_plane: 24,
        pages_per_block: PPB,
        page_size_bytes: PAGE as u32,
        over_provisioning: 0.3,
    };
    p.ftl = FtlPolicy {
        gc_low_watermark_blocks: 2,
        gc_high_watermark_blocks: 3,
    };
    p.validate().expect("a valid tiny geometry");
    p
}

pub(crate) fn page_with(tag: u64) -> Vec<u8> {
    let mut v = vec![0xA5u8; PAGE];
    v[..8].copy_from_slice(&tag.to_le_bytes());
    v
}

/// File `f` is 6 pages in two extents: LPNs 8f..8f+3 and 8f+30..8f+33.
pub(crate) fn extents(f: u64) -> Vec<Extent> {
    vec![
        Extent {
            first: Lpn(8 * f),
            pages: 3,
        },
        Extent {
            first: Lpn(8 * f + 30),
            pages: 3,
        },
    ]
}

pub(crate) fn lpn_of(f: u64, page: u64) -> u64 {
    if page < 3 {
        8 * f + page
    } else {
        8 * f + 30 + page - 3
    }
}

/// LPN → tag, 0 for never written.
pub(crate) type View = crate::crash::Versions;

struct Running {
    id: TaskId,
    /// (file, page) → tag of its latest write.
    writes: BTreeMap<(u64, u64), u64>,
}

/// What a seeded workload did: the log and the oracle's view after each acknowledged op.
pub(crate) struct Run {
    pub(crate) log: Vec<PersistStep>,
    /// `views[m]`: the durable view once ops `0..m` were acknowledged.
    pub(crate) views: Vec<View>,
    /// What each operation was, for a violation's report.
    ops: Vec<String>,
    pub(crate) device: Device,
    pub(crate) isolation_checks: u64,
}

fn tag_of(buf: &[u8]) -> u64 {
    u64::from_le_bytes(buf[..8].try_into().expect("pages hold 8 bytes"))
}

/// Runs `ops` random operations: host writes (inside and outside snapshots), task begins,
/// reads, writes, commits and aborts, with GC throughout. Checks isolation as it goes, and
/// after every operation that the persist log holds exactly the device's durable state. A
/// failed check is returned as the violation it is, with the operations that led to it.
// Long: one match arm per random operation, each checking isolation where it happens.
pub(crate) fn workload(seed: u64, ops: usize, fault: Option<TxFault>) -> Result<Run, Violation> {
    let mut dev = Device::new(&tiny(), DataMode::Payloads).expect("tiny device");
    dev.txn.fault = fault;
    dev.ftl.record_persist_log();
    let mut rng = SimRng::new(seed);
    let mut view = View::new();
    let mut views = vec![view.clone()];
    let mut names: Vec<String> = Vec::with_capacity(ops);
    let mut logged = DurableImage::new(PPB);
    let mut applied = 0;
    let mut running: Vec<Running> = Vec::new();
    // Tags of writes by tasks that have not committed (or never will).
    let mut uncommitted: BTreeMap<u64, TaskId> = BTreeMap::new();
    let mut next_tag = 1u64;
    let mut checks = 0;
    let t = VirtualTime::ZERO;
    for op in 0..ops {
        let fail = |names: &[String], problem: String| Violation {
            seed,
            acked: op,
            steps: last_steps(names, 8),
            crash: "no crash: found while running the workload".into(),
            problem,
        };
        let roll = rng.below(100);
        let idle = running.is_empty() && roll >= 45;
        let name = if roll < 30 || idle {
            // Host write of one page: durable once acknowledged, visible to the host at once.
            let lpn = rng.below(UNIVERSE);
            let tag = next_tag;
            next_tag += 1;
            dev.write(IoPath::Host, t, Lpn(lpn), 1, Some(&page_with(tag)))
                .map_err(|e| fail(&names, format!("host write: {e}")))?;
            view.insert(lpn, tag);
            format!("host writes LPN {lpn} (version {tag})")
        } else if roll < 45 && running.len() < 3 {
            let id = dev.tx_begin();
            let mut files = Vec::new();
            for f in 0..FILES {
                if rng.below(2) == 0 || f == FILES - 1 {
                    dev.tx_register(id, FileId(f), &extents(f))
                        .map_err(|e| fail(&names, format!("register: {e}")))?;
                    files.push(f);
                }
            }
            running.push(Running {
                id,
                writes: BTreeMap::new(),
            });
            format!("{id} begins over files {files:?}")
        } else if roll < 75 && !running.is_empty() {
            let i = rng.below(running.len() as u64) as usize;
            let f = FILES - 1 - rng.below(2).min(FILES - 1);
            let page = rng.below(6);
            let task = &mut running[i];
            if !dev.txn.tasks[&task.id].files.contains(&FileId(f)) {
                dev.tx_register(task.id, FileId(f), &extents(f))
                    .map_err(|e| fail(&names, format!("register: {e}")))?;
            }
            if rng.below(2) == 0 {
                let tag = next_tag;
                next_tag += 1;
                match dev.tx_write(
                    task.id,
                    FileId(f),
                    t,
                    page * PAGE as u64,
                    PAGE as u64,
                    Some(&page_with(tag)),
                ) {
                    Ok(_) => {
                        task.writes.insert((f, page), tag);
                        uncommitted.insert(tag, task.id);
                        format!("{} writes file {f} page {page} (version {tag})", task.id)
                    }
                    Err(TxError::Conflict { with, .. }) if with != task.id => format!(
                        "{} writes file {f} page {page}: refused, {with} changed it",
                        task.id
                    ),
                    Err(e) => return Err(fail(&names, format!("task write: {e}"))),
                }
            } else {
                let mut buf = vec![0u8; PAGE];
                dev.tx_read(
                    task.id,
                    FileId(f),
                    t,
                    page * PAGE as u64,
                    PAGE as u64,
                    Some(&mut buf),
                )
                .map_err(|e| fail(&names, format!("task read: {e}")))?;
                let tag = tag_of(&buf);
                if let Some(&own) = task.writes.get(&(f, page)) {
                    if tag != own {
                        return Err(fail(
                            &names,
                            format!("{} read version {tag}, not its own write {own}", task.id),
                        ));
                    }
                }
                if let Some(&writer) = uncommitted.get(&tag) {
                    if writer != task.id {
                        return Err(fail(
                            &names,
                            format!("{} read uncommitted data of {writer}", task.id),
                        ));
                    }
                }
                checks += 1;
                format!("{} reads file {f} page {page}", task.id)
            }
        } else if !running.is_empty() {
            let i = rng.below(running.len() as u64) as usize;
            let task = running.swap_remove(i);
            if rng.below(4) == 0 {
                dev.tx_abort(task.id, t)
                    .map_err(|e| fail(&names, format!("abort: {e}")))?;
                format!("{} aborts", task.id)
            } else if dev.tx_commit(task.id, t).is_ok() {
                for (&(f, page), &tag) in &task.writes {
                    view.insert(lpn_of(f, page), tag);
                    uncommitted.remove(&tag);
                }
                format!("{} commits", task.id)
            } else {
                format!("{} loses a conflict at commit", task.id)
            }
        } else {
            "nothing to do".to_string()
        };
        names.push(name);
        // The host never sees uncommitted task data, and always its own acknowledged writes.
        let probe = rng.below(UNIVERSE);
        let mut buf = vec![0u8; PAGE];
        dev.read(IoPath::Host, t, Lpn(probe), 1, Some(&mut buf))
            .map_err(|e| fail(&names, format!("host read: {e}")))?;
        let seen = tag_of(&buf);
        let want = view.get(&probe).copied().unwrap_or(0);
        if seen != want {
            return Err(fail(
                &names,
                format!("host read of LPN {probe} saw version {seen}, not {want}"),
            ));
        }
        checks += 1;
        dev.check_invariants()
            .map_err(|e| fail(&names, format!("device invariant: {e}")))?;
        dev.ftl.log_step(PersistStep::Mark(op as u64));
        // Every durable change this op made is in the log: the image the log builds is the
        // device's durable state.
        let log = dev.ftl.persist_log().expect("recording");
        for s in &log[applied..] {
            logged.apply(s);
        }
        applied = log.len();
        if logged != dev.durable_image() {
            return Err(fail(
                &names,
                "the persist log misses a durable change this operation made".into(),
            ));
        }
        views.push(view.clone());
    }
    let log = dev.ftl.persist_log().expect("recording").to_vec();
    Ok(Run {
        log,
        views,
        ops: names,
        device: dev,
        isolation_checks: checks,
    })
}

/// The view a recovered image presents.
pub(crate) fn recovered_view(image: &DurableImage) -> Result<View, String> {
    let l2p = recover(image).map_err(|e| e.to_string())?;
    let mut view = View::new();
    for (&lpn, &ppn) in &l2p {
        let oob = image
            .oob
            .get(&ppn)
            .ok_or(format!("LPN {lpn} maps to erased page {ppn}"))?;
        if oob.lpn != lpn {
            return Err(format!("L2P says {lpn} -> {ppn}, its OOB says {}", oob.lpn));
        }
        if u64::from(lpn) < UNIVERSE && oob.tag != 0 {
            view.insert(u64::from(lpn), oob.tag);
        }
    }
    Ok(view)
}

/// The medium after a crash: the durable image plus the kept flash writes in flight.
fn crash_image(durable: &DurableImage, window: &[PersistStep], state: &CrashState) -> DurableImage {
    let mut image = durable.clone();
    for (i, step) in window.iter().enumerate() {
        if !state.keep[i] {
            continue;
        }
        match (state.torn, step) {
            // A torn erase: half the block's pages unreadable, the rest as they were.
            (Some((t, first_half)), PersistStep::Erase { block }) if t == i => {
                let first = block * image.pages_per_block;
                let half = image.pages_per_block / 2;
                let lost = if first_half {
                    first..first + half
                } else {
                    first + half..first + image.pages_per_block
                };
                for p in lost {
                    image.oob.remove(&p);
                }
            }
            // A torn program or journal page fails its ECC: as if never written.
            (Some((t, _)), _) if t == i => {}
            _ => image.apply(step),
        }
    }
    image
}

/// Crashes at every durable step of `run` under `model` and recovers each crash state.
fn enumerate(run: &Run, seed: u64, model: CrashModel) -> Found {
    let mut rng = SimRng::new(seed ^ 0x7c15_c4a5);
    let mut durable = DurableImage::new(PPB);
    let mut window: Vec<PersistStep> = Vec::new();
    let mut acked = 0usize;
    let mut found = Found::default();
    let mut check = |durable: &DurableImage, window: &[PersistStep], acked: usize, at: usize| {
        for state in states(model, window.len(), &mut rng) {
            let image = crash_image(durable, window, &state);
            let before = &run.views[acked];
            let after = run.views.get(acked + 1).unwrap_or(before);
            let problem = judge(recovered_view(&image), before, after, "LPN");
            found.record(problem, |problem| Violation {
                seed,
                acked,
                steps: last_steps(&run.ops[..(acked + 1).min(run.ops.len())], 8),
                crash: format!("crash before persist step {at}: {}", state.describe()),
                problem,
            });
        }
    };
    for (at, step) in run.log.iter().enumerate() {
        match step {
            PersistStep::Mark(_) | PersistStep::Barrier => {
                for s in window.drain(..) {
                    durable.apply(&s);
                }
                if matches!(step, PersistStep::Mark(_)) {
                    acked += 1;
                }
            }
            s => {
                check(&durable, &window, acked, at);
                if s.is_flash() && model != CrashModel::InOrder {
                    window.push(*s);
                } else {
                    durable.apply(s);
                }
            }
        }
    }
    check(&durable, &window, acked, run.log.len());
    found
}

/// Runs the TxISC crash check: `seeds` workloads of `ops` operations, every crash state of
/// `model`; `fault` breaks the commit order on purpose.
pub fn check(
    seeds: std::ops::Range<u64>,
    ops: usize,
    model: CrashModel,
    fault: Option<TxFault>,
) -> CrashReport {
    let mut report = CrashReport {
        mechanism: "txisc".into(),
        config: fault.map_or("tx".into(), |f| format!("tx with fault {f:?}")),
        model,
        seeds: seeds.end.saturating_sub(seeds.start),
        ops_per_seed: ops,
        points: 0,
        violations: 0,
        first_violation: None,
        coverage: Vec::new(),
    };
    let (mut checks, mut erased, mut committed, mut aborted) = (0, 0, 0, 0);
    for seed in seeds {
        let run = match workload(seed, ops, fault) {
            Ok(run) => run,
            Err(v) => {
                report.violations += 1;
                report.first_violation.get_or_insert(v);
                continue;
            }
        };
        checks += run.isolation_checks;
        erased += run.device.counters().ftl.blocks_erased;
        let s = run.device.txn_stats();
        committed += s.committed;
        aborted += s.aborted;
        let found = enumerate(&run, seed, model);
        report.points += found.points;
        report.violations += found.violations;
        if report.first_violation.is_none() {
            report.first_violation = found.first;
        }
    }
    report.coverage = vec![
        ("isolation checks".into(), checks),
        ("GC erases".into(), erased),
        ("commits".into(), committed),
        ("aborts".into(), aborted),
    ];
    report
}
