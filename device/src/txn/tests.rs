//! Isolation and crash consistency of the transaction layer (see [`super::crash`]): the
//! crash checker in order and with flash writes reordered and torn between barriers, the
//! broken orders it must catch, and recovery on a live device.

use super::crash::{check, extents, page_with, recovered_view, tiny, workload, PAGE, UNIVERSE};
use super::*;
use crate::addr::Lpn;
use crate::crash::CrashModel;
use crate::device::{DataMode, IoPath};

#[test]
fn every_crash_point_recovers_committed_and_only_committed_data() {
    for model in [CrashModel::InOrder, CrashModel::Reorder { torn: true }] {
        let r = check(0..40, 400, model, None);
        assert_eq!(r.violations, 0, "{model:?}: {:#?}", r.first_violation);
        println!(
            "{}: {} crash points, coverage {:?}",
            model.describe(),
            r.points,
            r.coverage
        );
        let count = |k: &str| r.coverage.iter().find(|c| c.0 == k).unwrap().1;
        assert!(
            r.points >= 10_000,
            "{model:?}: only {} crash points",
            r.points
        );
        assert!(count("GC erases") > 100, "the workloads must run GC");
        assert!(count("commits") > 100 && count("aborts") > 10);
    }
}

#[test]
fn broken_commit_orders_are_caught() {
    // Mappings persisted before the commit point: caught even in order.
    let r = check(
        0..40,
        400,
        CrashModel::InOrder,
        Some(TxFault::MappingsBeforeCommit),
    );
    println!(
        "mappings before the commit point: {} violations",
        r.violations
    );
    assert!(r.violations > 0);
    // A delta record that does not wait for its page: harmless in order, caught once flash
    // writes can land after it.
    let fault = Some(TxFault::RecordBeforePage);
    let in_order = check(0..40, 400, CrashModel::InOrder, fault);
    assert_eq!(in_order.violations, 0, "{:#?}", in_order.first_violation);
    let reordered = check(0..40, 400, CrashModel::Reorder { torn: false }, fault);
    println!(
        "record before page, reordered: {} violations",
        reordered.violations
    );
    assert!(reordered.violations > 0);
    let v = reordered.first_violation.unwrap();
    assert!(!v.steps.is_empty() && v.crash.contains("kept"), "{v:?}");
}

#[test]
fn power_cycle_rolls_back_running_tasks_and_keeps_serving() {
    for seed in 0..20 {
        let mut run = workload(seed, 150, None).unwrap();
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
        dev.check_invariants().unwrap();
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
        dev.check_invariants().unwrap();
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
    dev.check_invariants().unwrap();

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
    dev.check_invariants().unwrap();
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

/// Whole pages are read in place and partial ones through scratch: every split of a file's
/// bytes reads back the same through a transaction (`tx_read`, `tx_peek`) and, for the
/// first extent, through plain device reads (`read_ranges`, `peek_ranges`).
#[test]
fn reads_of_any_span_return_the_files_bytes() {
    let mut dev = Device::new(&tiny(), DataMode::Payloads).unwrap();
    let t = VirtualTime::ZERO;
    let ext = extents(0);
    let mut file = Vec::new();
    for (i, lpn) in ext
        .iter()
        .flat_map(|e| (0..e.pages).map(move |k| e.first.0 + k))
        .enumerate()
    {
        let mut page = page_with(i as u64 + 1);
        page[PAGE / 2..].fill(i as u8 + 0x10);
        dev.write(IoPath::Host, t, Lpn(lpn), 1, Some(&page))
            .unwrap();
        file.extend_from_slice(&page);
    }
    let task = dev.tx_begin();
    dev.tx_register(task, FileId(0), &ext).unwrap();
    let p = PAGE as u64;
    for (offset, len) in [
        (0, 6 * p),
        (0, p),
        (p, 2 * p),
        (3, 5),
        (p - 3, 6),
        (p / 2, 4 * p),
        (2 * p + 1, 3 * p - 2),
        (5 * p, p),
    ] {
        let want = &file[offset as usize..(offset + len) as usize];
        let mut got = vec![0xEEu8; len as usize];
        dev.tx_read(task, FileId(0), t, offset, len, Some(&mut got))
            .unwrap();
        assert_eq!(got, want, "tx_read {offset}+{len}");
        got.fill(0xEE);
        dev.tx_peek(task, FileId(0), offset, &mut got).unwrap();
        assert_eq!(got, want, "tx_peek {offset}+{len}");
        // The first extent is LPNs 0..3: device byte offsets equal file offsets there.
        if offset + len <= 3 * p {
            got.fill(0xEE);
            dev.read_ranges(IoPath::Internal, t, &[(offset, len)], Some(&mut got))
                .unwrap();
            assert_eq!(got, want, "read_ranges {offset}+{len}");
            got.fill(0xEE);
            dev.peek_ranges(&[(offset, len)], &mut got).unwrap();
            assert_eq!(got, want, "peek_ranges {offset}+{len}");
        }
    }
    dev.tx_commit(task, t).unwrap();
}
