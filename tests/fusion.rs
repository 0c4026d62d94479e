//! FusionFS in the device: CISC ops on StorageFS with real Wasm stages, crash consistency at
//! both grains, refused ops that change nothing, and fair device cores.

use csd::builtin::STAGES;
use csd_device::storagefs::crash::{enumerate, CrashPlan, RecoveryCosts};
use csd_device::storagefs::sched::{jain_index, CoreScheduler, Job, Policy};
use csd_device::storagefs::{recover, Credentials, DurableImage, FsError, OrderFault, StorageFs};
use csd_device::VirtualTime;
use csd_runtime::WasmStages;
use csd_sdk::cisc::*;

fn costs() -> RecoveryCosts {
    RecoveryCosts::of(&csd_device::Profile::load("optane-csd").unwrap())
}

const ALICE: Credentials = Credentials { uid: 1 };
const BOB: Credentials = Credentials { uid: 2 };

fn runner() -> WasmStages {
    let mut r = WasmStages::new(STAGES).unwrap().with_fuel(50_000_000);
    // A user stage module: one stage that traps, one that never ends, one that doubles.
    let wat = r#"(module
        (memory (export "memory") 2)
        (global $next (mut i32) (i32.const 1024))
        (func (export "stage_alloc") (param i32) (result i32)
            (local $p i32)
            (local.set $p (global.get $next))
            (global.set $next (i32.add (global.get $next) (local.get 0)))
            (local.get $p))
        (func (export "stage_free") (param i32 i32))
        (func (export "boom") (param i32 i32 i32 i32) (result i64) unreachable)
        (func (export "spin") (param i32 i32 i32 i32) (result i64) (loop $l (br $l)) (i64.const 0))
        (func (export "echo") (param i32 i32 i32 i32) (result i64)
            (i64.or (i64.shl (i64.extend_i32_u (local.get 0)) (i64.const 32))
                    (i64.extend_i32_u (local.get 1)))))"#;
    r.add_module("mine", wat.as_bytes()).unwrap();
    r
}

proptest::proptest! {
    /// The `crc32` stage's slicing-by-8 is crc32fast's CRC-32 at every length and alignment
    /// (the eight-byte loop, the tail, and both together).
    #[test]
    fn slicing_by_8_is_crc32(
        data in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
        skip in 0usize..8,
    ) {
        let d = &data[skip.min(data.len())..];
        proptest::prop_assert_eq!(csd_kernels::crc32_slice_by_8(d), crc32fast::hash(d));
    }

    /// The checksum task streams it over reads that end anywhere, mid-word included.
    #[test]
    fn slicing_by_8_streamed_in_pieces_is_crc32(
        data in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
        cuts in proptest::collection::vec(0usize..300, 0..6),
    ) {
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
        cuts.sort_unstable();
        let mut crc = csd_kernels::Crc32Slice8::new();
        let mut from = 0;
        for cut in cuts.into_iter().chain([data.len()]) {
            crc.update(&data[from..cut]);
            from = cut;
        }
        proptest::prop_assert_eq!(crc.finalize(), crc32fast::hash(&data));
    }
}

#[test]
fn the_prebuilt_ops_do_what_they_say_on_the_device() {
    let mut r = runner();
    let mut fs = StorageFs::new();
    let wal = fs.open(ALICE, "/wal", true, &mut r).unwrap();
    let data = b"hello, storage".to_vec();
    let op = append_crc_write(FileRef::Fd(wal), data.clone(), TxGrain::Macro).unwrap();
    let done = fs.submit(ALICE, &op, &mut r).unwrap();
    assert!(done.cost.fuel > 0, "the CRC ran as Wasm and burned fuel");
    let mut want = data.clone();
    want.extend(crc32fast::hash(&data).to_le_bytes());
    assert_eq!(fs.contents("/wal").unwrap(), want.as_slice());

    let op = read_modify_write(FileRef::Fd(wal), 0, vec![0xff; 5], TxGrain::Micro).unwrap();
    fs.submit(ALICE, &op, &mut r).unwrap();
    let flipped: Vec<u8> = data[..5].iter().map(|b| b ^ 0xff).collect();
    assert_eq!(&fs.contents("/wal").unwrap()[..5], flipped.as_slice());

    let text = b"abcabcabcabc the quick brown fox ".repeat(50);
    let op = open_write_sync_close("/blob", text.clone(), TxGrain::Macro).unwrap();
    fs.submit(ALICE, &op, &mut r).unwrap();
    // Compress on the device, store, and read back decompressed.
    let mut b = CiscBuilder::new();
    let f = b.open("/blob", false);
    let plain = b.pread(f, 0, text.len() as u32);
    let packed = b.process(Stage::Compress, &[plain]);
    let g = b.open("/blob.lz4", true);
    b.write(g, packed).close(g).close(f).ret(packed);
    let out = fs.submit(ALICE, &b.build().unwrap(), &mut r).unwrap();
    assert!(
        out.returned[0].len() < text.len() / 4,
        "lz4 compresses repeated text"
    );
    let z = fs.open(ALICE, "/blob.lz4", false, &mut r).unwrap();
    let len = fs.contents("/blob.lz4").unwrap().len() as u32;
    let op = read_decompress(FileRef::Fd(z), 0, len).unwrap();
    assert_eq!(fs.submit(ALICE, &op, &mut r).unwrap().returned, vec![text]);

    // Sort, search and multiply: real results.
    let mut b = CiscBuilder::new();
    let nums = b.input(
        [9u32, 3, 7, 1]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
    );
    let needle = b.input(3u32.to_le_bytes().to_vec());
    let sorted = b.process(Stage::Sort, &[nums]);
    let hits = b.process(Stage::Search, &[nums, needle]);
    let tripled = b.process(Stage::Multiply, &[sorted, needle]);
    b.ret(sorted).ret(hits).ret(tripled);
    let out = fs
        .submit(ALICE, &b.build().unwrap(), &mut r)
        .unwrap()
        .returned;
    let words = |v: &[u8]| -> Vec<u32> {
        v.chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    assert_eq!(words(&out[0]), vec![1, 3, 7, 9]);
    assert_eq!(u64::from_le_bytes(out[1].clone().try_into().unwrap()), 1);
    assert_eq!(words(&out[2]), vec![3, 9, 21, 27]);
}

/// Truncate cuts (what a later write past the cut leaves is zeros, in one op too), rename
/// moves a file over another and frees the one it replaced, and both check who asks.
#[test]
fn truncate_and_rename_do_what_posix_says() {
    let mut r = runner();
    let mut fs = StorageFs::new();
    let op = open_write_sync_close("/a", vec![7; 100], TxGrain::Macro).unwrap();
    fs.submit(ALICE, &op, &mut r).unwrap();
    let mut b = CiscBuilder::new();
    let f = b.open("/a", false);
    let five = b.input(vec![1; 5]);
    b.truncate(f, 10).pwrite(f, 50, five);
    let read = b.pread(f, 0, 100);
    b.ret(read).close(f);
    let done = fs.submit(ALICE, &b.build().unwrap(), &mut r).unwrap();
    let mut want = vec![7; 10];
    want.resize(50, 0);
    want.extend([1; 5]);
    assert_eq!(
        done.returned,
        vec![want.clone()],
        "the op reads its own cut"
    );
    assert_eq!(fs.contents("/a").unwrap(), want.as_slice());

    let op = open_write_sync_close("/b", vec![9; 3], TxGrain::Micro).unwrap();
    fs.submit(ALICE, &op, &mut r).unwrap();
    let inodes = fs.medium().inodes.len();
    let mut b = CiscBuilder::new();
    b.rename("/a", "/b");
    fs.submit(ALICE, &b.build().unwrap(), &mut r).unwrap();
    assert_eq!(fs.contents("/b").unwrap(), want.as_slice());
    assert!(fs.contents("/a").is_none());
    assert_eq!(
        fs.medium().inodes.len(),
        inodes - 1,
        "the replaced file is freed"
    );

    // Bob may not move or cut Alice's file; a missing source and a cut past the file limit
    // are named. Nothing changes.
    let before = fs.medium().clone();
    let mut b = CiscBuilder::new();
    b.rename("/b", "/c");
    assert!(matches!(
        refused(&mut fs, BOB, &b.build().unwrap(), &mut r),
        FsError::Permission { .. }
    ));
    let mut b = CiscBuilder::new();
    b.rename("/nope", "/c");
    assert!(matches!(
        refused(&mut fs, ALICE, &b.build().unwrap(), &mut r),
        FsError::NotFound { .. }
    ));
    let mut b = CiscBuilder::new();
    let f = b.open("/b", false);
    b.truncate(f, u64::MAX).close(f);
    assert!(matches!(
        refused(&mut fs, ALICE, &b.build().unwrap(), &mut r),
        FsError::Limit { .. }
    ));
    assert_eq!(fs.medium(), &before);
}

/// A file unlinked while a descriptor holds it lives on, nameless, until its last close
/// (POSIX; SQLite's and `tmpfile(3)`'s temporary files), and a crash frees it.
#[test]
fn a_file_unlinked_while_open_lives_until_its_last_close() {
    let mut r = runner();
    let mut fs = StorageFs::new();
    let fd = fs.open(ALICE, "/tmp/etilqs_1", true, &mut r).unwrap();
    let other = fs.open(ALICE, "/tmp/etilqs_1", false, &mut r).unwrap();
    let mut b = CiscBuilder::new();
    b.unlink("/tmp/etilqs_1");
    fs.submit(ALICE, &b.build().unwrap(), &mut r).unwrap();
    assert!(fs.contents("/tmp/etilqs_1").is_none(), "the name is gone");
    let mut b = CiscBuilder::new();
    let data = b.input(vec![5; 3000]);
    b.pwrite(FileRef::Fd(fd), 0, data);
    let back = b.pread(FileRef::Fd(other), 1000, 10);
    b.ret(back);
    let done = fs.submit(ALICE, &b.build().unwrap(), &mut r).unwrap();
    assert_eq!(
        done.returned,
        vec![vec![5; 10]],
        "both descriptors reach it"
    );
    assert_eq!(fs.medium().bytes(), 3000);
    fs.medium().check_links().unwrap();

    // A crash now: no descriptor survives it, so recovery frees the orphan.
    let mut image = DurableImage {
        medium: fs.medium().clone(),
        ..DurableImage::default()
    };
    recover(&mut image, &mut r).unwrap();
    assert!(image.medium.inodes.is_empty());
    assert_eq!(image.medium.bytes(), 0);

    // Without one, the first close keeps it and the last frees it.
    assert_eq!(fs.close(ALICE, fd).unwrap(), None);
    assert_eq!(fs.medium().inodes.len(), 1);
    let mut b = CiscBuilder::new();
    b.close(FileRef::Fd(other));
    let done = fs.submit(ALICE, &b.build().unwrap(), &mut r).unwrap();
    assert!(fs.medium().inodes.is_empty(), "{:?}", done.steps);
    assert_eq!(fs.medium().bytes(), 0);
    fs.medium().check_links().unwrap();
}

/// A hard link is a second name of one inode: the file goes with its last name, a taken
/// name or another tenant's file is refused, and a rename between two names of one file
/// does nothing.
#[test]
fn a_hard_link_names_one_file_twice() {
    let mut r = runner();
    let mut fs = StorageFs::new();
    let op = open_write_sync_close("/git/tmp_obj", vec![3; 500], TxGrain::Macro).unwrap();
    fs.submit(ALICE, &op, &mut r).unwrap();
    let op = open_write_sync_close("/git/other", vec![4; 50], TxGrain::Macro).unwrap();
    fs.submit(ALICE, &op, &mut r).unwrap();
    let before = fs.medium().clone();
    for (who, to, refusal) in [
        (ALICE, "/git/other", "exists"),
        (BOB, "/git/8695e0", "may not link"),
    ] {
        let mut b = CiscBuilder::new();
        b.link("/git/tmp_obj", to);
        let e = refused(&mut fs, who, &b.build().unwrap(), &mut r);
        assert!(e.to_string().contains(refusal), "{e}");
    }
    assert_eq!(fs.medium(), &before, "a refused link changes nothing");

    let mut b = CiscBuilder::new();
    b.grain(TxGrain::Micro);
    b.link("/git/tmp_obj", "/git/8695e0");
    fs.submit(ALICE, &b.build().unwrap(), &mut r).unwrap();
    let mut b = CiscBuilder::new();
    b.rename("/git/tmp_obj", "/git/8695e0");
    fs.submit(ALICE, &b.build().unwrap(), &mut r).unwrap();
    assert_eq!(
        fs.medium().names.len(),
        3,
        "a rename between two names does nothing"
    );
    fs.medium().check_links().unwrap();
    let mut b = CiscBuilder::new();
    b.unlink("/git/tmp_obj");
    fs.submit(ALICE, &b.build().unwrap(), &mut r).unwrap();
    assert_eq!(fs.contents("/git/8695e0").unwrap(), &[3; 500][..]);
    let mut b = CiscBuilder::new();
    b.rename("/git/other", "/git/8695e0");
    fs.submit(ALICE, &b.build().unwrap(), &mut r).unwrap();
    assert_eq!(
        fs.medium().inodes.len(),
        1,
        "the linked file went with its last name"
    );
    assert_eq!(fs.medium().bytes(), 50);
    fs.medium().check_links().unwrap();
}

/// A symbolic link is an inode holding its target, looked up and removed like a file, but
/// never opened: StorageFS does not follow links.
#[test]
fn a_symbolic_link_holds_its_target_and_is_not_followed() {
    let mut r = runner();
    let mut fs = StorageFs::new();
    let mut b = CiscBuilder::new();
    b.symlink("../bin/python3.12", "/venv/bin/python");
    fs.submit(ALICE, &b.build().unwrap(), &mut r).unwrap();
    assert_eq!(
        fs.contents("/venv/bin/python").unwrap(),
        b"../bin/python3.12"
    );
    // A target past PATH_MAX does not fit an op's page either: refused whichever says so.
    let long = "x".repeat(4096);
    for (target, path, refusal) in [
        ("elsewhere", "/venv/bin/python", "exists"),
        ("", "/venv/empty", "target"),
        (long.as_str(), "/venv/long", "page"),
    ] {
        let op = CiscOp {
            commands: vec![Command::Symlink {
                target: target.into(),
                path: path.into(),
            }],
            ..CiscOp::default()
        };
        let e = refused(&mut fs, ALICE, &op, &mut r);
        assert!(e.to_string().contains(refusal), "{e}");
    }
    let mut b = CiscBuilder::new();
    let f = b.open("/venv/bin/python", false);
    b.close(f);
    let e = refused(&mut fs, ALICE, &b.build().unwrap(), &mut r);
    assert!(matches!(e, FsError::Symlink { .. }), "{e}");
    let mut b = CiscBuilder::new();
    b.unlink("/venv/bin/python");
    fs.submit(ALICE, &b.build().unwrap(), &mut r).unwrap();
    assert!(fs.medium().inodes.is_empty());
    fs.medium().check_links().unwrap();
}

#[test]
fn ten_thousand_crash_points_recover_as_each_grain_promises() {
    let mut r = runner();
    let plan = CrashPlan {
        seed: 7,
        runs: 40,
        ops: 40,
        fault: None,
    };
    let report = enumerate(&plan, &costs(), &mut r).unwrap();
    assert!(report.points() >= 10_000, "{} points", report.points());
    assert_eq!(report.violations(), 0, "{:?}", report.first_violation);
    // Both grains were exercised, and recovery had real work at both.
    assert!(report.macro_tx.recovery.redone > 0 && report.macro_tx.recovery.discarded > 0);
    assert!(report.micro_tx.recovery.rolled_forward > 0);
    assert!(
        report.micro_tx.recovery.fuel > 0,
        "MicroTx recovery re-ran stages on the device"
    );
    // Both grains report a recovery time; finishing ops costs MicroTx compute.
    assert!(report.macro_tx.mean_recovery_ns() > 0.0);
    assert!(report.micro_tx.max_recovery_ns > 0);
}

#[test]
fn a_broken_persistence_order_is_caught_by_the_checker() {
    let mut r = runner();
    for fault in [OrderFault::DoneBeforeData, OrderFault::ApplyBeforeCommit] {
        let plan = CrashPlan {
            seed: 3,
            runs: 4,
            ops: 20,
            fault: Some(fault),
        };
        let report = enumerate(&plan, &costs(), &mut r).unwrap();
        assert!(report.violations() > 0, "{fault:?} went unnoticed");
        let why = report.first_violation.unwrap();
        assert!(why.contains("crash after step"), "{why}");
    }
}

/// Submits `op` and requires it to be refused with nothing changed.
fn refused(fs: &mut StorageFs, who: Credentials, op: &CiscOp, r: &mut WasmStages) -> FsError {
    let before = fs.medium().clone();
    let e = fs.submit(who, op, r).unwrap_err();
    assert_eq!(fs.medium(), &before, "a refused op changed the medium: {e}");
    e
}

#[test]
fn bad_ops_are_refused_whole_and_change_nothing() {
    let mut r = runner();
    let mut fs = StorageFs::new();
    let wal = FileRef::Fd(fs.open(ALICE, "/wal", true, &mut r).unwrap());
    fs.submit(
        ALICE,
        &append_crc_write(wal, b"seed".to_vec(), TxGrain::Macro).unwrap(),
        &mut r,
    )
    .unwrap();

    // 33 commands.
    let mut op = append_crc_write(wal, vec![1; 8], TxGrain::Macro).unwrap();
    while op.commands.len() < 33 {
        op.commands.push(op.commands[0].clone());
    }
    let e = refused(&mut fs, ALICE, &op, &mut r);
    assert!(e.to_string().contains("at most 32 commands"), "{e}");

    // A slot read before it was written.
    let op = CiscOp {
        commands: vec![Command::Append {
            file: wal,
            from: Slot(5),
        }],
        ..CiscOp::default()
    };
    let e = refused(&mut fs, ALICE, &op, &mut r);
    assert!(e.to_string().contains("reads slot 5 before"), "{e}");

    // An unknown stage, after a command that would have appended.
    for (grain, export) in [
        (TxGrain::Macro, "nosuch"),
        (TxGrain::Micro, "boom"),
        (TxGrain::Micro, "spin"),
    ] {
        let mut b = CiscBuilder::new();
        b.grain(grain);
        let d = b.input(vec![1; 16]);
        b.append(wal, d);
        let out = b.process(
            Stage::User {
                task: "mine".into(),
                export: export.into(),
            },
            &[d],
        );
        b.append(wal, out);
        let e = refused(&mut fs, ALICE, &b.build().unwrap(), &mut r);
        assert!(e.to_string().contains("stage mine:"), "{e}");
        match export {
            "nosuch" => assert!(e.to_string().contains("no stage export"), "{e}"),
            "boom" => assert!(e.to_string().contains("unreachable"), "{e}"),
            _ => assert!(e.to_string().contains("fuel"), "{e}"),
        }
    }
    let mut b = CiscBuilder::new();
    let d = b.input(vec![1]);
    b.process(
        Stage::User {
            task: "absent".into(),
            export: "f".into(),
        },
        &[d],
    );
    let e = refused(&mut fs, ALICE, &b.build().unwrap(), &mut r);
    assert!(
        e.to_string().contains("no stage module named 'absent'"),
        "{e}"
    );

    // The device keeps serving after the trap and the endless loop.
    let mut b = CiscBuilder::new();
    let d = b.input(vec![4, 2]);
    let e = b.process(
        Stage::User {
            task: "mine".into(),
            export: "echo".into(),
        },
        &[d],
    );
    b.ret(e);
    assert_eq!(
        fs.submit(ALICE, &b.build().unwrap(), &mut r)
            .unwrap()
            .returned,
        vec![vec![4, 2]]
    );

    // A command on a file the tenant may not write: Bob reads Alice's log, may not append.
    let bob_fd = fs.open(BOB, "/wal", false, &mut r).unwrap();
    let mut b = CiscBuilder::new();
    let d = b.input(vec![9; 4]);
    let f = b.open("/bob-own", true);
    b.write(f, d).close(f);
    b.append(FileRef::Fd(bob_fd), d);
    let e = refused(&mut fs, BOB, &b.build().unwrap(), &mut r);
    assert!(e.to_string().contains("uid 2 may not write /wal"), "{e}");
    assert!(
        fs.contents("/bob-own").is_none(),
        "the op's first commands were rolled back"
    );
    // Someone else's descriptor is not Bob's.
    let op = append_crc_write(FileRef::Fd(77), vec![1], TxGrain::Macro).unwrap();
    let e = refused(&mut fs, BOB, &op, &mut r);
    assert!(matches!(e, FsError::BadDescriptor { .. }), "{e}");
    // Offsets past the file limit are refused, never allocated.
    let mut b = CiscBuilder::new();
    let d = b.input(vec![1]);
    b.pwrite(wal, u64::MAX - 1, d);
    let e = refused(&mut fs, ALICE, &b.build().unwrap(), &mut r);
    assert!(e.to_string().contains("file limit"), "{e}");
}

/// Device-core time of one op, as StorageFS runs it: its stages' fuel at optane-csd's
/// device CPU, plus the request and the entries it examines.
fn core_ns(op: &CiscOp) -> u64 {
    let profile = csd_device::Profile::load("optane-csd").unwrap();
    let cpu = &profile.device_cpu;
    let mut r = runner();
    let mut fs = StorageFs::new();
    let fd = fs.open(ALICE, "/f", true, &mut r).unwrap();
    let seed = append_crc_write(FileRef::Fd(fd), vec![7; 65536], TxGrain::Macro).unwrap();
    fs.submit(ALICE, &seed, &mut r).unwrap();
    let done = fs.submit(ALICE, op, &mut r).unwrap();
    cpu.request_ns + done.cost.entries * cpu.metadata_entry_ns + cpu.compute_ns(done.cost.fuel)
}

/// The two tenants' ops, in device-core ns: A compresses 64 KiB into a new file, B appends
/// a 64-byte record and its CRC.
fn heavy_and_light() -> (u64, u64) {
    let mut b = CiscBuilder::new();
    let f = b.open("/f", false);
    let block = b.pread(f, 0, 65536);
    let packed = b.process(Stage::Compress, &[block]);
    let out = b.open("/f.lz4", true);
    b.write(out, packed).close(out).close(f);
    let heavy = core_ns(&b.finish().unwrap());
    let small = append_crc_write(FileRef::Fd(0), vec![1; 64], TxGrain::Macro).unwrap();
    (heavy, core_ns(&small))
}

/// Tenant A floods compress ops; tenant B sends small appends every 20 µs. Returns B's p99
/// latency.
fn flood(policy: Policy, (heavy, light): (u64, u64)) -> u64 {
    let mut s = CoreScheduler::new(4, policy);
    let mut id = 0;
    let mut job = |tenant, ino, cost_ns| {
        id += 1;
        Job {
            id,
            tenant,
            ino,
            cost_ns,
        }
    };
    // A queues 400 compress ops on 16 inodes from the start.
    for k in 0..400 {
        s.submit(job(1, k % 16, heavy), VirtualTime::ZERO);
    }
    let mut arrivals: Vec<(u64, Job)> = (0..500)
        .map(|k| (k * 20_000, job(2, 100 + k % 4, light)))
        .collect();
    arrivals.reverse();
    let mut running: Vec<(VirtualTime, Job)> = Vec::new();
    let mut latency = Vec::new();
    let mut now = VirtualTime::ZERO;
    let mut submitted_at = std::collections::BTreeMap::new();
    loop {
        while arrivals.last().is_some_and(|(t, _)| *t <= now.ns()) {
            let (t, j) = arrivals.pop().unwrap();
            submitted_at.insert(j.id, t);
            s.submit(j, VirtualTime(t));
        }
        running.retain(|(end, j)| {
            if *end <= now {
                s.complete(j.ino);
                if let Some(t) = submitted_at.get(&j.id) {
                    latency.push(end.ns() - t);
                }
                false
            } else {
                true
            }
        });
        for st in s.dispatch(now) {
            running.push((st.end, st.job));
        }
        let next = running
            .iter()
            .map(|(e, _)| e.ns())
            .chain(arrivals.last().map(|(t, _)| *t))
            .min();
        match next {
            Some(t) => now = VirtualTime(t),
            None => break,
        }
    }
    latency.sort_unstable();
    latency[latency.len() * 99 / 100]
}

#[test]
fn a_tenant_flooding_compress_ops_does_not_starve_small_appends() {
    let (heavy, light) = heavy_and_light();
    assert!(
        heavy > 20 * light,
        "compress {heavy} ns vs append {light} ns"
    );
    let fifo_p99 = flood(Policy::Fifo, (heavy, light));
    let fair_p99 = flood(Policy::Fair, (heavy, light));
    // Under fair queueing B's op has the smallest tag as soon as it arrives, so it waits
    // at most until one core finishes the heavy op it holds: one heavy op plus its own.
    assert!(
        fair_p99 <= heavy + light,
        "B's p99 {fair_p99} ns under fair queueing"
    );
    assert!(
        fifo_p99 > 10 * fair_p99,
        "FIFO starves B: p99 {fifo_p99} ns"
    );
}

#[test]
fn equal_weights_get_equal_device_cpu_shares() {
    // Both tenants backlogged: A with compress ops, B with small appends on as many inodes,
    // each with twice the work its fair half of 4 cores x 5 ms needs.
    let (heavy, light) = heavy_and_light();
    let window = 5_000_000;
    let mut s = CoreScheduler::new(4, Policy::Fair);
    let mut id = 0;
    for (tenant, cost_ns) in [(1u32, heavy), (2, light)] {
        for k in 0..2 * 4 * window / 2 / cost_ns + 1 {
            id += 1;
            let ino = u64::from(tenant) * 100 + k % 8;
            s.submit(
                Job {
                    id,
                    tenant,
                    ino,
                    cost_ns,
                },
                VirtualTime::ZERO,
            );
        }
    }
    let mut served = [0u64; 2];
    let mut running: Vec<(VirtualTime, u64)> = Vec::new();
    let mut now = VirtualTime::ZERO;
    while now.ns() < window {
        running.retain(|(end, ino)| {
            if *end <= now {
                s.complete(*ino);
                false
            } else {
                true
            }
        });
        for st in s.dispatch(now) {
            served[(st.job.tenant - 1) as usize] += st.end.ns().min(window) - st.start.ns();
            running.push((st.end, st.job.ino));
        }
        now = VirtualTime(running.iter().map(|(e, _)| e.ns()).min().unwrap());
    }
    let j = jain_index(&[served[0] as f64, served[1] as f64]);
    assert!(j >= 0.9, "Jain index {j} (shares {served:?})");
    // FIFO over the same backlog hands nearly all the CPU to the heavy tenant.
    let mut f = CoreScheduler::new(4, Policy::Fifo);
    for k in 0..200u64 {
        f.submit(
            Job {
                id: 2 * k,
                tenant: 1,
                ino: k % 8,
                cost_ns: 100_000,
            },
            VirtualTime(k),
        );
        f.submit(
            Job {
                id: 2 * k + 1,
                tenant: 2,
                ino: 100 + k % 8,
                cost_ns: 2_000,
            },
            VirtualTime(k),
        );
    }
    let mut shares = [0u64; 2];
    for st in f.dispatch(VirtualTime(1_000)) {
        shares[(st.job.tenant - 1) as usize] += st.job.cost_ns;
    }
    assert!(jain_index(&[shares[0] as f64, shares[1] as f64]) < 0.9);
}

/// One action of a generated program: what a process does with its files.
#[derive(Clone, Debug)]
enum Act {
    /// `how`: 0–1 appends, 2 truncates, else plain.
    Open {
        path: u8,
        how: u8,
    },
    Write {
        fd: u8,
        len: u16,
    },
    Pwrite {
        fd: u8,
        off: u16,
        len: u16,
    },
    Read {
        fd: u8,
        len: u16,
    },
    Pread {
        fd: u8,
        off: u16,
        len: u16,
    },
    /// A pread and the pwrite of the same range.
    Modify {
        fd: u8,
        off: u16,
        len: u16,
    },
    Sync {
        fd: u8,
    },
    Close {
        fd: u8,
    },
    Stat {
        path: u8,
    },
    Unlink {
        path: u8,
    },
    Rename {
        from: u8,
        to: u8,
    },
    Truncate {
        path: u8,
        len: u16,
    },
}

fn act() -> impl proptest::strategy::Strategy<Value = Act> {
    use proptest::prelude::*;
    let len = 0u16..6000;
    prop_oneof![
        (0u8..3, 0u8..10).prop_map(|(path, how)| Act::Open { path, how }),
        (any::<u8>(), len.clone()).prop_map(|(fd, len)| Act::Write { fd, len }),
        (any::<u8>(), 0u16..20000, len.clone()).prop_map(|(fd, off, len)| Act::Pwrite {
            fd,
            off,
            len
        }),
        (any::<u8>(), len.clone()).prop_map(|(fd, len)| Act::Read { fd, len }),
        (any::<u8>(), 0u16..20000, len.clone()).prop_map(|(fd, off, len)| Act::Pread {
            fd,
            off,
            len
        }),
        (any::<u8>(), 0u16..20000, len).prop_map(|(fd, off, len)| Act::Modify { fd, off, len }),
        any::<u8>().prop_map(|fd| Act::Sync { fd }),
        any::<u8>().prop_map(|fd| Act::Close { fd }),
        (0u8..3).prop_map(|path| Act::Stat { path }),
        (0u8..3).prop_map(|path| Act::Unlink { path }),
        (0u8..3, 0u8..3).prop_map(|(from, to)| Act::Rename { from, to }),
        (0u8..3, 0u16..20000).prop_map(|(path, len)| Act::Truncate { path, len }),
    ]
}

/// A valid trace of `acts`, each by one of three processes: fds name open files, files are
/// stat, cut, renamed or unlinked only when they exist, and unlinked or replaced only when
/// no process holds them open.
fn program(acts: &[(u32, Act)]) -> Vec<u8> {
    use csd_traces::{Event, Header, Op, OpenFlags, TraceWriter};
    use std::collections::BTreeMap;
    let mut open: BTreeMap<u32, Vec<(i64, String)>> = BTreeMap::new();
    let mut next_fd: BTreeMap<u32, i64> = BTreeMap::new();
    let mut exists = std::collections::BTreeSet::new();
    let mut events = Vec::new();
    let mut t = 0;
    let mut push = |pid: u32, op: Op, ret: i64| {
        t += 1000;
        events.push(Event {
            t,
            pid,
            fds_of: None,
            op,
            ret: Some(ret),
            dur: Some(500),
            extra: BTreeMap::new(),
        });
    };
    for (pid, a) in acts {
        let pid = *pid;
        let fds = open.entry(pid).or_default();
        let pick = |fd: u8| (!fds.is_empty()).then(|| fds[fd as usize % fds.len()].clone());
        match *a {
            Act::Open { path, how } => {
                let path = format!("/data/f{path}");
                let fd = next_fd.entry(pid).or_insert(3);
                let flags = OpenFlags::parse(match how {
                    0 | 1 => "O_RDWR|O_CREAT|O_APPEND",
                    2 => "O_RDWR|O_CREAT|O_TRUNC",
                    _ => "O_RDWR|O_CREAT",
                });
                fds.push((*fd, path.clone()));
                exists.insert(path.clone());
                push(pid, Op::Open { path, flags }, *fd);
                *fd += 1;
            }
            Act::Write { fd, len } | Act::Read { fd, len } => {
                let Some((fd, path)) = pick(fd) else { continue };
                let len = u64::from(len);
                let op = if matches!(a, Act::Write { .. }) {
                    Op::Write {
                        fd,
                        path,
                        off: None,
                        len,
                        append: false,
                    }
                } else {
                    Op::Read {
                        fd,
                        path,
                        off: None,
                        len,
                    }
                };
                push(pid, op, len as i64);
            }
            Act::Pwrite { fd, off, len }
            | Act::Pread { fd, off, len }
            | Act::Modify { fd, off, len } => {
                let Some((fd, path)) = pick(fd) else { continue };
                let (off, len) = (u64::from(off), u64::from(len));
                if !matches!(a, Act::Pwrite { .. }) {
                    push(
                        pid,
                        Op::Pread {
                            fd,
                            path: path.clone(),
                            off,
                            len,
                        },
                        len as i64,
                    );
                }
                if !matches!(a, Act::Pread { .. }) {
                    push(pid, Op::Pwrite { fd, path, off, len }, len as i64);
                }
            }
            Act::Sync { fd } => {
                let Some((fd, path)) = pick(fd) else { continue };
                push(pid, Op::Fdatasync { fd, path }, 0);
            }
            Act::Close { fd } => {
                let Some((fd, path)) = pick(fd) else { continue };
                fds.retain(|(f, _)| *f != fd);
                push(pid, Op::Close { fd, path }, 0);
            }
            Act::Stat { path } => {
                let path = format!("/data/f{path}");
                if exists.contains(&path) {
                    push(pid, Op::Stat { path }, 0);
                }
            }
            Act::Unlink { path } => {
                let path = format!("/data/f{path}");
                if open.values().flatten().any(|(_, p)| *p == path) || !exists.remove(&path) {
                    continue;
                }
                push(pid, Op::Unlink { path }, 0);
            }
            Act::Rename { from, to } => {
                let (path, to) = (format!("/data/f{from}"), format!("/data/f{to}"));
                // StorageFS frees a replaced file at once: none may be open.
                if !exists.contains(&path) || open.values().flatten().any(|(_, p)| *p == to) {
                    continue;
                }
                exists.remove(&path);
                exists.insert(to.clone());
                // Open fds follow the file (as `strace -y` names them afterwards).
                for (_, p) in open.values_mut().flatten() {
                    if *p == path {
                        *p = to.clone();
                    }
                }
                push(pid, Op::Rename { path, to }, 0);
            }
            Act::Truncate { path, len } => {
                let path = format!("/data/f{path}");
                if exists.contains(&path) {
                    push(
                        pid,
                        Op::Truncate {
                            path,
                            len: u64::from(len),
                        },
                        0,
                    );
                }
            }
        }
    }
    let mut w = TraceWriter::new(Vec::new(), &Header::new("synthetic")).unwrap();
    for e in &events {
        w.write(e).unwrap();
    }
    w.finish().unwrap()
}

fn replay_on(
    trace: &[u8],
    target: csd_traces::replay::ReplayTarget,
    stages: &mut WasmStages,
) -> csd_traces::replay::ReplayReport {
    use csd_traces::replay::{replay, OpRunners, Pace, ReplayOptions};
    let profile = csd_device::Profile::load("optane-csd").unwrap();
    let mut compute = |_: &str, _: &str| -> Result<Box<dyn csd_hostfs::ndp::NdpCompute>, String> {
        Err("no ndp ops here".into())
    };
    let opts = ReplayOptions {
        pace: Pace::Afap,
        seed: 7,
        strictness: csd_traces::Strictness::Strict,
    };
    let runners = OpRunners {
        compute: &mut compute,
        isc: None,
        stages: Some(stages),
    };
    replay(|| Ok(trace), &profile, target, runners, &opts, |_| {}).unwrap()
}

#[test]
fn a_fused_replay_leaves_every_file_as_the_unfused_one_does() {
    use csd_traces::replay::ReplayTarget;
    use proptest::test_runner::{Config, TestRunner};
    let stages = std::cell::RefCell::new(WasmStages::new(STAGES).unwrap());
    let fused_ops = std::cell::Cell::new(0u64);
    let mut runner = TestRunner::new(Config::with_cases(24));
    let programs = proptest::collection::vec((0u32..3, act()), 1..120);
    runner
        .run(&programs, |acts| {
            let trace = program(&acts);
            let mut fused = Vec::new();
            let report = csd_traces::fuse::fuse_trace(&trace[..], &mut fused).unwrap();
            fused_ops.set(fused_ops.get() + report.fused_ops());
            let stages = &mut *stages.borrow_mut();
            let unfused = replay_on(&trace, ReplayTarget::Fusion, stages);
            let whole = replay_on(&fused, ReplayTarget::Fusion, stages);
            let expanded = replay_on(&fused, ReplayTarget::Firmware, stages);
            let f = |r: &csd_traces::replay::ReplayReport| r.fusion.clone().unwrap();
            proptest::prop_assert!(
                unfused.first_errors.is_empty(),
                "{:?}",
                unfused.first_errors
            );
            proptest::prop_assert!(whole.first_errors.is_empty(), "{:?}", whole.first_errors);
            proptest::prop_assert_eq!(
                (f(&whole).files, f(&whole).bytes, f(&whole).contents_sha256),
                (
                    f(&unfused).files,
                    f(&unfused).bytes,
                    f(&unfused).contents_sha256
                )
            );
            // Replayed event by event, the fused trace is the program again (other
            // processes' events may have moved past a fused op, never on its files).
            proptest::prop_assert_eq!(f(&expanded).contents_sha256, f(&unfused).contents_sha256);
            proptest::prop_assert_eq!(f(&expanded).cisc_ops, 0);
            proptest::prop_assert_eq!(f(&whole).cisc_ops, report.fused_ops());
            Ok(())
        })
        .unwrap();
    assert!(
        fused_ops.get() > 24,
        "the programs exercise fusion: {} ops",
        fused_ops.get()
    );
}

/// A `cisc` op may leave a file it opened open (a hand-written trace can): the program
/// goes on using the descriptor after it, and the file is what the events did, fused or not.
#[test]
fn a_file_a_cisc_op_leaves_open_stays_open_as_it_is() {
    use csd_traces::replay::ReplayTarget;
    let trace = concat!(
        "{\"format\":\"csd-trace\",\"version\":1}\n",
        "{\"t\":1,\"pid\":1,\"op\":\"cisc\",\"pattern\":\"write-sync\",\"ops\":[",
        "{\"t\":1,\"pid\":1,\"op\":\"open\",\"path\":\"/d/f\",\"flags\":\"O_RDWR|O_CREAT|O_TRUNC\",\"ret\":3},",
        "{\"t\":2,\"pid\":1,\"op\":\"pwrite\",\"fd\":3,\"path\":\"/d/f\",\"off\":0,\"len\":100,\"ret\":100},",
        "{\"t\":3,\"pid\":1,\"op\":\"fsync\",\"fd\":3,\"path\":\"/d/f\",\"ret\":0}],\"ret\":0}\n",
        "{\"t\":4,\"pid\":1,\"op\":\"pwrite\",\"fd\":3,\"path\":\"/d/f\",\"off\":100,\"len\":50,\"ret\":50}\n",
        "{\"t\":5,\"pid\":1,\"op\":\"close\",\"fd\":3,\"path\":\"/d/f\",\"ret\":0}\n",
    )
    .as_bytes();
    let mut stages = WasmStages::new(STAGES).unwrap();
    let fused = replay_on(trace, ReplayTarget::Fusion, &mut stages);
    let unfused = replay_on(trace, ReplayTarget::Firmware, &mut stages);
    assert!(fused.first_errors.is_empty(), "{:?}", fused.first_errors);
    let (f, u) = (fused.fusion.unwrap(), unfused.fusion.unwrap());
    assert_eq!((f.files, f.bytes), (1, 150));
    assert_eq!(f.cisc_ops, 1);
    assert_eq!(f.contents_sha256, u.contents_sha256);
}
