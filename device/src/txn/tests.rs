//! Isolation and crash consistency of the transaction layer, against an oracle.
//!
//! The crash checker runs a seeded workload once with the persist log on, then rebuilds the
//! durable image step by step: a crash before step `k` leaves exactly the first `k` steps.
//! At each point it recovers and compares every LPN's content with the oracle's view after
//! the acknowledged operations — or, for the one operation in flight, after it, all or
//! nothing.

use super::*;
use crate::addr::Lpn;
use crate::device::{DataMode, IoPath};
use crate::durable::{recover, DurableImage};
use crate::geometry::Geometry;
use crate::profile::{FtlPolicy, Profile};
use crate::rng::SimRng;

const PAGE: usize = 512;
/// LPNs the workloads touch: files and plain host data.
const UNIVERSE: u64 = 56;
const FILES: u64 = 3;
const PPB: u32 = 4;

/// 2 dies × 24 blocks × 4 pages: a few hundred writes run GC many times.
fn tiny() -> Profile {
    let mut p = Profile::load("daisyplus-femu").unwrap();
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
    p.validate().unwrap();
    p
}

fn page_with(tag: u64) -> Vec<u8> {
    let mut v = vec![0xA5u8; PAGE];
    v[..8].copy_from_slice(&tag.to_le_bytes());
    v
}

/// File `f` is 6 pages in two extents: LPNs 8f..8f+3 and 8f+30..8f+33.
fn extents(f: u64) -> Vec<Extent> {
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

fn lpn_of(f: u64, page: u64) -> u64 {
    if page < 3 {
        8 * f + page
    } else {
        8 * f + 30 + page - 3
    }
}

/// LPN → tag, 0 for never written.
type View = BTreeMap<u64, u64>;

struct Running {
    id: TaskId,
    /// (file, page) → tag of its latest write.
    writes: BTreeMap<(u64, u64), u64>,
}

/// What a seeded workload did: the log and the oracle's view after each acknowledged op.
struct Run {
    log: Vec<PersistStep>,
    /// `views[m]`: the durable view once ops `0..m` were acknowledged.
    views: Vec<View>,
    device: Device,
    isolation_checks: u64,
}

/// Runs `ops` random operations: host writes (inside and outside snapshots), task begins,
/// reads, writes, commits and aborts, with GC throughout. Checks isolation as it goes.
fn workload(seed: u64, ops: usize, broken: bool) -> Run {
    let mut dev = Device::new(&tiny(), DataMode::Payloads).unwrap();
    dev.txn.fault = broken.then_some(TxFault::MappingsBeforeCommit);
    dev.ftl.record_persist_log();
    let mut rng = SimRng::new(seed);
    let mut view = View::new();
    let mut views = vec![view.clone()];
    let mut running: Vec<Running> = Vec::new();
    // Tags of writes by tasks that have not committed (or never will).
    let mut uncommitted: BTreeMap<u64, TaskId> = BTreeMap::new();
    let mut next_tag = 1u64;
    let mut checks = 0;
    let t = VirtualTime::ZERO;
    for op in 0..ops {
        let roll = rng.below(100);
        let idle = running.is_empty() && roll >= 45;
        if roll < 30 || idle {
            // Host write of one page: durable once acknowledged, visible to the host at once.
            let lpn = rng.below(UNIVERSE);
            let tag = next_tag;
            next_tag += 1;
            dev.write(IoPath::Host, t, Lpn(lpn), 1, Some(&page_with(tag)))
                .unwrap();
            view.insert(lpn, tag);
        } else if roll < 45 && running.len() < 3 {
            let id = dev.tx_begin();
            for f in 0..FILES {
                if rng.below(2) == 0 || f == FILES - 1 {
                    dev.tx_register(id, FileId(f), &extents(f)).unwrap();
                }
            }
            running.push(Running {
                id,
                writes: BTreeMap::new(),
            });
        } else if roll < 75 && !running.is_empty() {
            let i = rng.below(running.len() as u64) as usize;
            let f = FILES - 1 - rng.below(2).min(FILES - 1);
            let page = rng.below(6);
            let task = &mut running[i];
            if !dev.txn.tasks[&task.id].files.contains(&FileId(f)) {
                dev.tx_register(task.id, FileId(f), &extents(f)).unwrap();
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
                    }
                    Err(TxError::Conflict { with, .. }) => assert_ne!(with, task.id),
                    Err(e) => panic!("{e}"),
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
                .unwrap();
                let tag = u64::from_le_bytes(buf[..8].try_into().unwrap());
                if let Some(&own) = task.writes.get(&(f, page)) {
                    assert_eq!(tag, own, "seed {seed}: {} must read its own write", task.id);
                }
                if let Some(&writer) = uncommitted.get(&tag) {
                    assert_eq!(
                        writer, task.id,
                        "seed {seed}: {} read uncommitted data of {writer}",
                        task.id
                    );
                }
                checks += 1;
            }
        } else if !running.is_empty() {
            let i = rng.below(running.len() as u64) as usize;
            let task = running.swap_remove(i);
            if rng.below(4) == 0 {
                dev.tx_abort(task.id, t).unwrap();
            } else if dev.tx_commit(task.id, t).is_ok() {
                for (&(f, page), &tag) in &task.writes {
                    view.insert(lpn_of(f, page), tag);
                    uncommitted.remove(&tag);
                }
            }
        }
        // The host never sees uncommitted task data, and always its own acknowledged writes.
        let probe = rng.below(UNIVERSE);
        let mut buf = vec![0u8; PAGE];
        dev.read(IoPath::Host, t, Lpn(probe), 1, Some(&mut buf))
            .unwrap();
        let seen = u64::from_le_bytes(buf[..8].try_into().unwrap());
        assert_eq!(
            seen,
            view.get(&probe).copied().unwrap_or(0),
            "seed {seed} op {op}: host read of {probe}"
        );
        checks += 1;
        dev.ftl
            .check_invariants()
            .unwrap_or_else(|e| panic!("seed {seed} op {op}: {e}"));
        dev.ftl.log_step(PersistStep::Mark(op as u64));
        views.push(view.clone());
    }
    let log = dev.ftl.persist_log().unwrap().to_vec();
    Run {
        log,
        views,
        device: dev,
        isolation_checks: checks,
    }
}

/// The view a recovered image presents.
fn recovered_view(image: &DurableImage) -> Result<View, String> {
    let l2p = recover(image).map_err(|e| e.to_string())?;
    let mut view = View::new();
    for (&lpn, &ppn) in &l2p {
        let oob = image
            .oob
            .get(&ppn)
            .ok_or(format!("{lpn} maps to erased page {ppn}"))?;
        if oob.lpn != lpn {
            return Err(format!("L2P says {lpn} -> {ppn}, its OOB says {}", oob.lpn));
        }
        if u64::from(lpn) < UNIVERSE && oob.tag != 0 {
            view.insert(u64::from(lpn), oob.tag);
        }
    }
    Ok(view)
}

/// Crashes before every durable step of `run` and recovers; returns (crash points,
/// violations) with the first violation described.
fn enumerate_crashes(run: &Run, pages_per_block: u32) -> (u64, Vec<String>) {
    let mut image = DurableImage::new(pages_per_block);
    let mut acked = 0usize;
    let mut points = 0;
    let mut violations = Vec::new();
    let mut check = |image: &DurableImage, acked: usize| {
        let before = &run.views[acked];
        let after = run.views.get(acked + 1).unwrap_or(before);
        match recovered_view(image) {
            Ok(v) if v == *before || v == *after => {}
            Ok(v) => {
                let diff = |want: &View| {
                    (0..UNIVERSE)
                        .filter(|l| v.get(l) != want.get(l))
                        .map(|l| format!("{l}: {:?} not {:?}", v.get(&l), want.get(&l)))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                violations.push(format!(
                    "after {acked} acknowledged ops: recovered differs from the state before \
                     the op in flight ({}) and after it ({})",
                    diff(before),
                    diff(after)
                ))
            }
            Err(e) => violations.push(format!("after {acked} acknowledged ops: {e}")),
        }
    };
    for step in &run.log {
        if let PersistStep::Mark(_) = step {
            acked += 1;
            continue;
        }
        check(&image, acked);
        points += 1;
        image.apply(step);
    }
    check(&image, acked);
    (points + 1, violations)
}

#[test]
fn every_crash_point_recovers_committed_and_only_committed_data() {
    let mut points = 0;
    let mut checks = 0;
    let mut erased = 0;
    let mut stats = TxnStats::default();
    for seed in 0..40 {
        let run = workload(seed, 400, false);
        checks += run.isolation_checks;
        erased += run.device.counters().ftl.blocks_erased;
        let s = run.device.txn_stats();
        stats.committed += s.committed;
        stats.aborted += s.aborted;
        stats.conflicts += s.conflicts;
        // The log is complete: replaying it gives the live durable state.
        let mut image = DurableImage::new(PPB);
        for s in &run.log {
            image.apply(s);
        }
        assert_eq!(
            image,
            run.device.durable_image(),
            "seed {seed}: log misses a step"
        );
        let (n, violations) = enumerate_crashes(&run, PPB);
        assert!(violations.is_empty(), "seed {seed}: {}", violations[0]);
        points += n;
    }
    println!(
        "crash points explored: {points}, isolation checks: {checks}, GC erases: {erased}, \
         commits: {}",
        stats.committed
    );
    assert!(points > 5_000, "only {points} crash points");
    assert!(erased > 100, "the workloads must run GC ({erased} erases)");
}

#[test]
fn a_broken_commit_order_is_caught() {
    let mut caught = 0;
    for seed in 0..40 {
        let run = workload(seed, 400, true);
        let (_, violations) = enumerate_crashes(&run, PPB);
        caught += violations.len();
    }
    println!("violations found with mappings persisted before the commit point: {caught}");
    assert!(
        caught > 0,
        "the crash checker must catch a broken commit order"
    );
}

#[test]
fn power_cycle_rolls_back_running_tasks_and_keeps_serving() {
    for seed in 0..20 {
        let mut run = workload(seed, 150, false);
        let expected = run.views.last().unwrap().clone();
        let dev = &mut run.device;
        let report = dev.power_cycle().unwrap();
        dev.ftl
            .check_invariants()
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(
            dev.ftl.live_delta_pages(),
            0,
            "seed {seed}: delta pages leaked"
        );
        assert_eq!(dev.txn_stats().running_tasks, 0);
        let mut buf = vec![0u8; PAGE];
        for lpn in 0..UNIVERSE {
            dev.read(IoPath::Host, VirtualTime::ZERO, Lpn(lpn), 1, Some(&mut buf))
                .unwrap();
            let tag = u64::from_le_bytes(buf[..8].try_into().unwrap());
            assert_eq!(
                tag,
                expected.get(&lpn).copied().unwrap_or(0),
                "seed {seed}: {lpn} after {report:?}"
            );
        }
        // A second crash right after recovery loses nothing: its P2L was persisted.
        let again = recovered_view(&dev.durable_image()).unwrap();
        assert_eq!(again, expected, "seed {seed}");
        // And it keeps serving transactions.
        let task = dev.tx_begin();
        dev.tx_register(task, FileId(0), &extents(0)).unwrap();
        dev.tx_write(
            task,
            FileId(0),
            VirtualTime::ZERO,
            0,
            PAGE as u64,
            Some(&page_with(u64::MAX)),
        )
        .unwrap();
        dev.tx_commit(task, VirtualTime::ZERO).unwrap();
        dev.read(IoPath::Host, VirtualTime::ZERO, Lpn(0), 1, Some(&mut buf))
            .unwrap();
        assert_eq!(buf, page_with(u64::MAX));
        dev.ftl.check_invariants().unwrap();
    }
}

#[test]
fn overlapping_writers_exactly_one_commits() {
    // Every interleaving of two tasks' begin / write / commit on one page.
    let steps = ["b1", "w1", "c1", "b2", "w2", "c2"];
    let mut orders = 0;
    for perm in permutations(6) {
        let order: Vec<&str> = perm.iter().map(|&i| steps[i]).collect();
        let pos = |s: &str| order.iter().position(|x| *x == s).unwrap();
        let well_formed = pos("b1") < pos("w1") && pos("w1") < pos("c1");
        let well_formed = well_formed && pos("b2") < pos("w2") && pos("w2") < pos("c2");
        // Only concurrent tasks overlap: serial ones may both commit.
        let concurrent = pos("b1") < pos("c2") && pos("b2") < pos("c1");
        if !well_formed || !concurrent {
            continue;
        }
        orders += 1;
        let mut dev = Device::new(&tiny(), DataMode::Payloads).unwrap();
        let t = VirtualTime::ZERO;
        let mut ids = [TaskId(0); 2];
        let mut alive = [true; 2];
        let mut committed = 0;
        for s in &order {
            let k = (s.as_bytes()[1] - b'1') as usize;
            match s.as_bytes()[0] {
                b'b' => {
                    ids[k] = dev.tx_begin();
                    dev.tx_register(ids[k], FileId(0), &extents(0)).unwrap();
                }
                b'w' => {
                    if dev
                        .tx_write(
                            ids[k],
                            FileId(0),
                            t,
                            0,
                            PAGE as u64,
                            Some(&page_with(k as u64 + 7)),
                        )
                        .is_err()
                    {
                        dev.tx_abort(ids[k], t).unwrap();
                        alive[k] = false;
                    }
                }
                _ => {
                    if alive[k] && dev.tx_commit(ids[k], t).is_ok() {
                        committed += 1;
                    }
                }
            }
        }
        assert_eq!(committed, 1, "order {order:?}");
        dev.ftl.check_invariants().unwrap();
        assert_eq!(dev.ftl.live_delta_pages(), 0);
    }
    assert_eq!(orders, 18);
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

#[test]
fn host_writes_inside_a_snapshot_are_invisible_to_the_task_and_conflict_at_commit() {
    let mut dev = Device::new(&tiny(), DataMode::Payloads).unwrap();
    let t = VirtualTime::ZERO;
    dev.write(IoPath::Host, t, Lpn(0), 1, Some(&page_with(1)))
        .unwrap();
    let task = dev.tx_begin();
    dev.tx_register(task, FileId(0), &extents(0)).unwrap();
    dev.write(IoPath::Host, t, Lpn(0), 1, Some(&page_with(2)))
        .unwrap();
    let mut buf = vec![0u8; PAGE];
    dev.tx_read(task, FileId(0), t, 0, PAGE as u64, Some(&mut buf))
        .unwrap();
    assert_eq!(
        buf,
        page_with(1),
        "the task sees its snapshot, not the host's new write"
    );
    dev.read(IoPath::Host, t, Lpn(0), 1, Some(&mut buf))
        .unwrap();
    assert_eq!(buf, page_with(2), "the host sees its own write");
    dev.tx_write(task, FileId(0), t, 100, 8, Some(&9u64.to_le_bytes()))
        .unwrap();
    let e = dev.tx_commit(task, t).unwrap_err();
    assert!(
        matches!(
            e,
            TxError::Conflict {
                with: TaskId::HOST,
                page: 0,
                ..
            }
        ),
        "{e}"
    );
    dev.read(IoPath::Host, t, Lpn(0), 1, Some(&mut buf))
        .unwrap();
    assert_eq!(
        buf,
        page_with(2),
        "the aborted task left nothing; the host delta was applied"
    );
    assert_eq!(dev.txn_stats().snapshots, 0);
    dev.ftl.check_invariants().unwrap();

    // A host trim inside a snapshot is a host write of zeros.
    let task = dev.tx_begin();
    dev.tx_register(task, FileId(0), &extents(0)).unwrap();
    dev.trim(IoPath::Host, t, Lpn(0), 1).unwrap();
    dev.tx_read(task, FileId(0), t, 0, PAGE as u64, Some(&mut buf))
        .unwrap();
    assert_eq!(buf, page_with(2), "the task still sees its snapshot");
    dev.read(IoPath::Host, t, Lpn(0), 1, Some(&mut buf))
        .unwrap();
    assert!(buf.iter().all(|&b| b == 0), "the host sees the trim");
    dev.tx_commit(task, t).unwrap();
    dev.read(IoPath::Host, t, Lpn(0), 1, Some(&mut buf))
        .unwrap();
    assert!(
        buf.iter().all(|&b| b == 0),
        "and keeps seeing it after the snapshot ends"
    );
    dev.ftl.check_invariants().unwrap();
}

#[test]
fn a_page_belongs_to_one_snapshot_only() {
    let mut dev = Device::new(&tiny(), DataMode::Payloads).unwrap();
    let task = dev.tx_begin();
    dev.tx_register(task, FileId(0), &extents(0)).unwrap();
    let e = dev
        .tx_register(task, FileId(9), &extents(0)[..1])
        .unwrap_err();
    assert_eq!(
        e,
        TxError::SharedLpn {
            lpn: 0,
            file: FileId(9),
            other: FileId(0)
        }
    );
    let twice = [extents(1)[0], extents(1)[0]];
    assert!(matches!(
        dev.tx_register(task, FileId(1), &twice),
        Err(TxError::SharedLpn { .. })
    ));
    // Nothing changed: the task still commits, and registering the same file again with its
    // extents (a file that did not grow) is fine.
    dev.tx_register(task, FileId(0), &extents(0)).unwrap();
    dev.tx_commit(task, VirtualTime::ZERO).unwrap();
    assert_eq!(dev.txn_stats().snapshots, 0);
}
