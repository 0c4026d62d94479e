//! The sled run store: ids, persistence, the single-process lock, diffs, traces.

use csd_hostfs::ndp::DesignKind;
use csd_traces::replay::{NdpTotals, OpLatency, Pace, ReplayReport};
use csd_traces::report::{diff, ReplayRun, Report, ReportKind};
use csd_traces::store::{NewRun, RunStore, StoreError};
use serde_json::json;

thread_local! {
    /// The running test's directory, removed when it ends (libtest gives each test a
    /// thread of its own).
    static SCRATCH: tempfile::TempDir = tempfile::Builder::new()
        .prefix("csd-store-")
        .tempdir()
        .expect("creating a test's scratch directory");
}

/// A path for a store in the running test's directory, not yet created.
fn scratch(name: &str) -> std::path::PathBuf {
    SCRATCH.with(|d| d.path().join(name))
}

fn design(design: DesignKind, duration_ns: u64, ops_per_sec: f64) -> ReplayReport {
    ReplayReport {
        design: csd_traces::replay::ReplayTarget::Host(design),
        events: 10,
        ops: 10,
        skipped: Default::default(),
        missing_walks: 0,
        duration_ns,
        ops_per_sec,
        latency: Default::default(),
        first_errors: Default::default(),
        ndp: None,
        isc: None,
        fusion: None,
        isp: None,
        journal: None,
        device: Default::default(),
    }
}

fn run(duration: u64, pao: f64) -> NewRun {
    let mut frag = design(DesignKind::FragS, duration, 10.0);
    let read = OpLatency {
        count: 4,
        failed: 0,
        mean_ns: 120.0,
        p50_ns: 100,
        p99_ns: 200,
        p999_ns: 200,
        p9999_ns: 200,
        max_ns: 200,
    };
    frag.latency.insert("read".into(), read);
    frag.ndp = Some(NdpTotals {
        requests: 1,
        files: 2,
        breakdown: Default::default(),
        pao,
        stale_files: 0,
    });
    NewRun {
        spec: None,
        trace: None,
        profile: "cosmos-plus".into(),
        designs: vec!["frag-s".into(), "lightfs".into()],
        seed: 1,
        report: Report::Replay(ReplayRun {
            trace: "t".into(),
            profile: "cosmos-plus".into(),
            mode: Pace::Timed,
            seed: 1,
            designs: vec![frag, design(DesignKind::LightFs, duration / 2, 20.0)],
        }),
        sweep: None,
    }
}

fn replay(r: &Report) -> &ReplayRun {
    match r {
        Report::Replay(r) => r,
        other => panic!("not a replay: {other:?}"),
    }
}

#[test]
fn runs_persist_with_stable_ids() {
    let dir = scratch("ids");
    {
        let s = RunStore::open(&dir).unwrap();
        assert_eq!(s.save(run(1000, 0.5)).unwrap().id, "r1");
        assert_eq!(s.save(run(2000, 0.4)).unwrap().id, "r2");
        s.remove("r2").unwrap();
        assert!(matches!(s.remove("r2"), Err(StoreError::NoRun(_))));
        assert!(matches!(s.get("x7"), Err(StoreError::BadId(_))));
    }
    let s = RunStore::open(&dir).unwrap();
    assert_eq!(
        s.save(run(3000, 0.3)).unwrap().id,
        "r3",
        "ids are never reused"
    );
    let all = s.list().unwrap();
    assert_eq!(
        all.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["r1", "r3"]
    );
    assert_eq!(replay(&all[0].report).designs[0].duration_ns, 1000);
    assert_eq!(all[0].kind(), ReportKind::Replay);
    assert_eq!(all[0].csd_version, env!("CARGO_PKG_VERSION"));
}

#[test]
fn a_second_opener_is_told_the_store_is_busy() {
    let dir = scratch("busy");
    let _first = RunStore::open(&dir).unwrap();
    let e = RunStore::open(&dir).err().expect("locked");
    assert!(matches!(e, StoreError::Busy { .. }), "{e}");
    assert!(e.to_string().contains("in use by another csd process"));
}

#[test]
fn diffs_are_per_design() {
    let dir = scratch("diff");
    let s = RunStore::open(&dir).unwrap();
    let a = s.save(run(1000, 0.5)).unwrap();
    let b = s.save(run(1500, 0.25)).unwrap();
    let d = diff(&a.report, &b.report).unwrap();
    assert_eq!(d.len(), 2);
    let frag = d.iter().find(|x| x.design == "frag-s").unwrap();
    let dur = frag
        .metrics
        .iter()
        .find(|m| m.metric == "duration_ns")
        .unwrap();
    assert_eq!((dur.a, dur.b, dur.delta), (1000.0, 1500.0, 500.0));
    assert_eq!(dur.relative, Some(0.5));
    assert_eq!(dur.better, Some(false), "a longer replay is worse");
    let pao = frag.metrics.iter().find(|m| m.metric == "ndp.pao").unwrap();
    assert_eq!(pao.delta, -0.25);
    assert_eq!(pao.better, Some(true), "less overhead is better");
    let ops = frag
        .metrics
        .iter()
        .find(|m| m.metric == "ops_per_sec")
        .unwrap();
    assert_eq!(ops.better, None, "unchanged");
    assert!(frag.metrics.iter().any(|m| m.metric == "read.p99_ns"));
    let light = d.iter().find(|x| x.design == "lightfs").unwrap();
    assert!(
        !light.metrics.iter().any(|m| m.metric == "ndp.pao"),
        "a design without offload requests has no PAO to compare"
    );
}

#[test]
fn traces_are_stored_by_content() {
    let dir = scratch("traces");
    let s = RunStore::open(&dir).unwrap();
    let t = s.add_trace("a.trace", b"hello").unwrap();
    assert!(t.id.starts_with("sha256:"));
    assert_eq!(s.add_trace("again.trace", b"hello").unwrap().id, t.id);
    assert_eq!(s.trace(&t.id).unwrap().1, b"hello");
    assert_eq!(s.trace("again.trace").unwrap().1, b"hello");
    assert_eq!(
        s.trace("again").unwrap().1,
        b"hello",
        "named without its suffix"
    );
    assert!(matches!(s.trace("nope"), Err(StoreError::NoTrace(_))));
}

/// A stored report reads back exactly as it was printed: every f64 to its last digit (a
/// rerun compares reports byte for byte), and a run's system spec with it.
#[test]
fn reports_and_specs_round_trip_exactly() {
    use csd_traces::spec::{SystemKind, SystemSpec};
    use csd_traces::store::TraceRef;
    let dir = scratch("exact");
    let s = RunStore::open(&dir).unwrap();
    // Values whose shortest decimal form a fast float parser misreads in the last bit.
    let values = [
        990.242287531702,
        488792.9545454546,
        367.04183478110525,
        0.1 + 0.2,
    ];
    let mut r = run(1000, 0.5);
    let Report::Replay(rr) = &mut r.report else {
        unreachable!()
    };
    for (i, v) in values.iter().enumerate() {
        let mut d = design(DesignKind::Fsr, 1, *v);
        d.events = i as u64;
        rr.designs.push(d);
    }
    let spec = SystemSpec::new(
        csd_device::Profile::load("cosmos-plus").unwrap(),
        7,
        SystemKind::Replay {
            trace: TraceRef {
                id: "sha256:0011223344556677".into(),
                name: "t".into(),
            },
            designs: vec![csd_traces::replay::ReplayTarget::Host(DesignKind::LightFs)],
            pace: Pace::Timed,
            strictness: csd_traces::Strictness::Lenient,
        },
    );
    r.spec = Some(spec.clone());
    let printed = serde_json::to_string(&r.report).unwrap();
    let id = s.save(r).unwrap().id;
    let back = s.get(&id).unwrap();
    assert_eq!(serde_json::to_string(&back.report).unwrap(), printed);
    assert_eq!(back.spec, Some(spec));
}

/// Runs stored by an older csd, in a layout this one does not read, still load: kept as
/// stored (so `runs show` prints them and nothing is lost) and refused by name where they
/// would be compared or charted.
#[test]
fn reports_of_another_layout_load_as_unreadable() {
    let dir = scratch("layouts");
    let spool = csd_traces::store::spool_dir(&dir);
    std::fs::create_dir_all(&spool).unwrap();
    let record = |kind: &str, version: u32, report: serde_json::Value| {
        json!({"kind": kind, "trace": null, "profile": "p", "designs": [], "seed": 1,
               "report": report, "report_version": version})
    };
    // Session-8 TxISC runs, one kind for two layouts.
    let old = json!({"experiment": "timing on", "flash_timing_on": []});
    let files = [
        record("txisc", 0, old.clone()),
        // A replay report missing its designs.
        record("replay", 1, json!({"trace": "t"})),
        // A layout from the future.
        record("ndp", 99, json!({"points": []})),
    ];
    for (i, f) in files.iter().enumerate() {
        let path = spool.join(format!("run-{i:024}-1.json"));
        std::fs::write(path, serde_json::to_vec(f).unwrap()).unwrap();
    }
    let s = RunStore::open(&dir).unwrap();
    let all = s.list().unwrap();
    assert_eq!(all.len(), 3, "every spooled run was stored");
    let why: Vec<String> = all
        .iter()
        .map(|r| r.report.unreadable().expect("unreadable").to_string())
        .collect();
    assert!(why[0].contains("older csd"), "{}", why[0]);
    assert!(why[1].contains("missing field `profile`"), "{}", why[1]);
    assert!(
        why[2].contains("newer csd") && why[2].contains("v99"),
        "{}",
        why[2]
    );
    assert_eq!(all[0].kind(), ReportKind::Txisc);
    assert_eq!(all[0].report.to_json(), old, "kept exactly as stored");
    // Stored again, it keeps its kind and version.
    let back: csd_traces::store::StoredRun =
        serde_json::from_str(&serde_json::to_string(&all[2]).unwrap()).unwrap();
    assert_eq!(back.report.version(), 99);
    let good = s.save(run(1000, 0.5)).unwrap();
    let e = diff(&good.report, &all[1].report).unwrap_err();
    assert!(e.to_string().contains("cannot read"), "{e}");
}

#[test]
fn tasks_are_kept_by_content_and_found_by_name_or_id() {
    let dir = scratch("tasks");
    let s = RunStore::open(&dir).unwrap();
    let one = s.add_task("mine", b"module one").unwrap();
    assert!(one.id.starts_with("sha256:"));
    let two = s.add_task("mine", b"module two").unwrap();
    assert_ne!(one.id, two.id);
    assert_eq!(s.task("mine").unwrap().1, b"module two", "the name moved");
    assert_eq!(
        s.task(&one.id).unwrap().1,
        b"module one",
        "the old module stays, by id"
    );
    assert_eq!(s.tasks().unwrap().len(), 1);
    assert!(matches!(s.task("theirs"), Err(StoreError::NoTask(_))));
}
