//! The sled run store: ids, persistence, the single-process lock, diffs, traces.

use csd_traces::store::{diff, NewRun, RunKind, RunStore, StoreError};
use serde_json::json;

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("csd-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn run(duration: u64, pao: f64) -> NewRun {
    NewRun {
        spec: None,
        kind: RunKind::Replay,
        trace: None,
        profile: "cosmos-plus".into(),
        designs: vec!["frag-s".into(), "lightfs".into()],
        seed: 1,
        report: json!({"designs": [
            {"design": "frag-s", "duration_ns": duration, "ops_per_sec": 10.0,
             "latency": {"read": {"p50_ns": 100, "p99_ns": 200}}, "ndp": {"pao": pao}},
            {"design": "lightfs", "duration_ns": duration / 2, "ops_per_sec": 20.0}
        ]}),
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
    assert_eq!(all[0].report["designs"][0]["duration_ns"], 1000);
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
    let d = diff(&a, &b);
    assert_eq!(d.len(), 2);
    let frag = d.iter().find(|x| x.design == "frag-s").unwrap();
    let dur = frag.metrics.iter().find(|m| m.0 == "duration_ns").unwrap();
    assert_eq!((dur.1, dur.2, dur.3), (1000.0, 1500.0, 500.0));
    assert_eq!(dur.4, Some(0.5));
    let pao = frag.metrics.iter().find(|m| m.0 == "ndp.pao").unwrap();
    assert_eq!(pao.3, -0.25);
    assert!(frag.metrics.iter().any(|m| m.0 == "read.p99_ns"));
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
    assert!(matches!(s.trace("nope"), Err(StoreError::NoTrace(_))));
}

/// A stored report reads back exactly as it was printed: every f64 to its last digit (a
/// rerun compares reports byte for byte), and a run's system spec with it.
#[test]
fn reports_and_specs_round_trip_exactly() {
    use csd_traces::replay::Pace;
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
    r.report = json!({ "values": values });
    let spec = SystemSpec::new(
        csd_device::Profile::load("cosmos-plus").unwrap(),
        7,
        SystemKind::Replay {
            trace: TraceRef {
                id: "sha256:0011223344556677".into(),
                name: "t".into(),
            },
            designs: vec![csd_hostfs::ndp::DesignKind::LightFs],
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
