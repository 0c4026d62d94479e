//! `csd sweep` end to end: shards merged through export/import hold what one whole sweep
//! holds (the whole sweep run in-process, the shards in worker processes); a sweep killed
//! midway resumes with only its missing points; bad specs and bad exports are refused by
//! name with nothing stored.

mod common;

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const CSD: &str = env!("CARGO_BIN_EXE_csd");

fn scratch(name: &str) -> PathBuf {
    let dir = common::scratch_dir().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn csd(args: &[&str]) -> Output {
    Command::new(CSD)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("csd runs")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "csd failed ({:?}): {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// 8 points: a sample replayed under two designs and two seeds, and the same for an NDP
/// task over synthetic files.
const SPEC: &str = r#"
name = "merge"
traces = ["untar"]
tasks = ["stats64"]
designs = ["fsr", "lightfs"]
seeds = [1, 2]
files = [3]
sizes = ["4k"]
"#;

/// The sweep's runs in `store`, by point key: (report JSON, whole tag), via an export.
fn points(store: &Path, sweep: &str) -> BTreeMap<String, (Value, Value)> {
    let out = ok(&csd(&[
        "runs",
        "export",
        "--sweep",
        sweep,
        "-o",
        "-",
        "--store",
        s(store),
    ]));
    let mut lines = out.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["csdlab"], "runs");
    let mut map = BTreeMap::new();
    for line in lines {
        let v: Value = serde_json::from_str(line).unwrap();
        if let Some(run) = v.get("run") {
            let key = run["sweep"]["key"].as_str().unwrap().to_string();
            let dup = map.insert(key, (run["report"].clone(), run["sweep"].clone()));
            assert!(dup.is_none(), "a point exported twice");
        }
    }
    map
}

fn run_count(store: &Path) -> usize {
    let out = ok(&csd(&["runs", "list", "--json", "--store", s(store)]));
    serde_json::from_str::<Vec<Value>>(&out).unwrap().len()
}

#[test]
fn two_shards_imported_hold_what_the_whole_sweep_holds() {
    let dir = scratch("shards");
    let spec = dir.join("spec.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let (whole, a, b, merged) = (
        dir.join("whole"),
        dir.join("a"),
        dir.join("b"),
        dir.join("merged"),
    );
    // The whole sweep on one worker, in-process; the shards on two worker processes each:
    // their points must be stored alike.
    let printed = ok(&csd(&[
        "sweep",
        s(&spec),
        "--shard",
        "0/1",
        "--store",
        s(&whole),
        "--jobs",
        "1",
    ]));
    // Its table of durations by seed reads in µs, as the dashboard's does.
    let table: Vec<&str> = printed
        .lines()
        .skip_while(|l| *l != "duration_ns by seed:")
        .skip(2)
        .take_while(|l| !l.is_empty() && !l.starts_with("sweep "))
        .collect();
    assert!(!table.is_empty(), "{printed}");
    assert!(table.iter().all(|l| l.ends_with(" µs")), "{printed}");
    for (shard, store) in [("0/2", &a), ("1/2", &b)] {
        ok(&csd(&[
            "sweep",
            s(&spec),
            "--shard",
            shard,
            "--store",
            s(store),
            "--jobs",
            "2",
        ]));
    }
    let (pa, pb) = (points(&a, "merge"), points(&b, "merge"));
    assert_eq!(
        (pa.len(), pb.len()),
        (4, 4),
        "each shard runs half the grid"
    );
    assert!(pa.keys().all(|k| !pb.contains_key(k)), "shards overlap");
    let (fa, fb) = (dir.join("a.runs"), dir.join("b.runs"));
    for (store, file) in [(&a, &fa), (&b, &fb)] {
        ok(&csd(&[
            "runs",
            "export",
            "--sweep",
            "merge",
            "-o",
            s(file),
            "--store",
            s(store),
        ]));
    }
    let first = ok(&csd(&[
        "runs",
        "import",
        s(&fa),
        s(&fb),
        "--json",
        "--store",
        s(&merged),
    ]));
    let first: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(first[0][1]["runs"], 4, "{first}");
    assert_eq!(first[1][1]["runs"], 4, "{first}");
    // Importing again, in the other order, adds nothing.
    let again = ok(&csd(&[
        "runs",
        "import",
        s(&fb),
        s(&fa),
        "--json",
        "--store",
        s(&merged),
    ]));
    let again: Value = serde_json::from_str(&again).unwrap();
    for file in 0..2 {
        assert_eq!(again[file][1]["runs"], 0, "{again}");
        assert_eq!(again[file][1]["duplicates"], 4, "{again}");
    }
    assert_eq!(run_count(&merged), 8);
    let listed = ok(&csd(&[
        "runs",
        "list",
        "--sweep",
        "merge",
        "--json",
        "--store",
        s(&merged),
    ]));
    let listed: Vec<Value> = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed.len(), 8);
    // The table counts a sweep's points instead of listing them, unless asked.
    let table = ok(&csd(&["runs", "list", "--store", s(&merged)]));
    assert_eq!(
        table.trim(),
        "8 run(s) are points of sweep merge: csd runs list --sweep merge"
    );
    let table = ok(&csd(&["runs", "list", "--all", "--store", s(&merged)]));
    assert_eq!(table.lines().count(), 1 + 8, "{table}");
    assert!(listed.iter().all(|r| r["sweep"]["sweep"] == "merge"));
    let (one, two) = (points(&whole, "merge"), points(&merged, "merge"));
    assert_eq!(one.len(), 8);
    assert_eq!(one, two, "the merged shards differ from the whole sweep");
    // The merged store knows the sweep: running it there runs nothing.
    let out = ok(&csd(&["sweep", s(&spec), "--json", "--store", s(&merged)]));
    let summary: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["done_before"], 8, "{summary}");
    assert_eq!(summary["ran"], 0, "{summary}");
    // Its table: the replays' duration by seed (the only varied axis), a row per design.
    let table = &summary["table"];
    assert_eq!(table["axis"], "seed", "{table}");
    assert_eq!(table["metric"], "duration_ns", "{table}");
    let rows = table["series"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{table}");
    for row in rows {
        for cell in row["cells"].as_array().unwrap() {
            assert!(cell["mean"].as_f64().unwrap() > 0.0, "{table}");
        }
    }
    // And an imported point reruns byte for byte (its trace is a bundled sample).
    ok(&csd(&["runs", "rerun", "r1", "--store", s(&merged)]));
}

/// A 16-point NDP sweep named `name`, written in `dir`.
fn sixteen_points(dir: &Path, name: &str) -> PathBuf {
    let spec = dir.join("spec.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"{name}\"\ntasks = [\"stats64\"]\ndesigns = [\"all\"]\n\
             seeds = [1, 2, 3, 4]\nfiles = [20]\nsizes = [\"16k\"]\n"
        ),
    )
    .unwrap();
    spec
}

/// Starts `sweep`, waits until it has stored a point, then SIGKILLs it, as the OOM killer
/// would: no destructor runs.
fn kill_after_first_point(sweep: &mut Command) {
    let mut child = sweep
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.contains("stored as"), "{first}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_killed_sweep_resumes_with_only_the_missing_points() {
    let dir = scratch("resume");
    // 16 points, one at a time: killed after the first is stored, most are left.
    let spec = sixteen_points(&dir, "resume");
    let store = dir.join("store");
    kill_after_first_point(Command::new(CSD).args([
        "sweep",
        s(&spec),
        "--jobs",
        "1",
        "--store",
        s(&store),
    ]));
    let stored = points(&store, "resume").len();
    assert!(
        (1..16).contains(&stored),
        "{stored} points stored before the kill"
    );
    let started = Instant::now();
    let out = ok(&csd(&["sweep", s(&spec), "--json", "--store", s(&store)]));
    let summary: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["done_before"], stored, "{summary}");
    assert_eq!(summary["ran"], 16 - stored, "{summary}");
    assert_eq!(points(&store, "resume").len(), 16);
    assert_eq!(run_count(&store), 16, "a point was stored twice");
    assert!(started.elapsed() < Duration::from_secs(300));
}

/// The shared directories of sweep worker processes under `tmp`.
fn shares(tmp: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("csd-sweep-"))
        .collect();
    names.sort();
    names
}

#[test]
fn a_killed_sweep_leaves_its_workers_directory_to_the_next_sweep_to_remove() {
    let dir = scratch("stale");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let spec = sixteen_points(&dir, "stale");
    let store = dir.join("store");
    // A directory whose lock is held (here, by this test) is in use, and one with no lock
    // file yet is one a sweep is still making: neither is the next sweep's to take.
    let (held, making) = ("csd-sweep-held".to_string(), "csd-sweep-making".to_string());
    std::fs::create_dir(tmp.join(&held)).unwrap();
    let lock = std::fs::File::create(tmp.join(&held).join("owner.lock")).unwrap();
    lock.lock().unwrap();
    std::fs::create_dir(tmp.join(&making)).unwrap();
    let sweep = || {
        let mut c = Command::new(CSD);
        c.args(["sweep", s(&spec), "--jobs", "2", "--store", s(&store)])
            .env("TMPDIR", &tmp)
            .env_remove("RUST_LOG");
        c
    };
    kill_after_first_point(&mut sweep());
    let left = shares(&tmp);
    assert_eq!(
        left.len(),
        3,
        "the killed sweep's directory is left: {left:?}"
    );
    let out = sweep().output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(points(&store, "stale").len(), 16);
    assert_eq!(
        shares(&tmp),
        vec![held, making],
        "the killed sweep's directory and the finished sweep's own are gone"
    );
    drop(lock);
}

/// Workers start before the sweep plans; if they cannot (no scratch directory), a sweep with
/// points to run fails naming the directory, and one with nothing left to run succeeds.
#[test]
fn workers_that_cannot_start_matter_only_to_a_sweep_that_needs_them() {
    let dir = scratch("crew");
    let spec = sixteen_points(&dir, "crew");
    let store = dir.join("store");
    let nowhere = dir.join("no-such-tmp");
    let sweep = |tmp: &Path| {
        Command::new(CSD)
            .args(["sweep", s(&spec), "--jobs", "2", "--store", s(&store)])
            .env("TMPDIR", tmp)
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    };
    let refused = sweep(&nowhere);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{err}");
    assert!(
        err.contains("creating a directory for the sweep's workers") && err.contains("no-such-tmp"),
        "{err}"
    );
    assert_eq!(points(&store, "crew").len(), 0);
    ok(&sweep(&dir));
    assert_eq!(points(&store, "crew").len(), 16);
    let again = ok(&sweep(&nowhere));
    assert!(again.contains("16 already stored, 0 run now"), "{again}");
}

#[test]
fn bad_specs_shards_and_exports_are_refused_by_name_and_store_nothing() {
    let dir = scratch("bad");
    let store = dir.join("store");
    let spec = dir.join("spec.toml");
    let refused = |args: &[&str], needle: &str| {
        let t0 = Instant::now();
        let o = csd(args);
        // Refused before any point runs.
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{args:?} took {:?}",
            t0.elapsed()
        );
        // 1: refused by csd; 2: by the command line's parser.
        assert!(
            matches!(o.status.code(), Some(1 | 2)),
            "{args:?}: {:?}",
            o.status
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    };
    for (text, needle) in [
        ("name = \"x\"\ntraces = [\"untar\"]\nseed = [1]\n", "seed"),
        ("name = \"x y\"\ntraces = [\"untar\"]\n", "'x y'"),
        ("name = \"x\"\ntraces = [\"untar\"]\ndesigns = [\"warp\"]\n", "warp"),
        ("name = \"x\"\ntraces = [\"no-such-trace\"]\n", "no-such-trace"),
        ("name = \"x\"\ntasks = [\"stats64\"]\nsizes = [\"12 parsecs\"]\n", "12 parsecs"),
        (
            "name = \"x\"\ntraces = [\"untar\"]\nseeds = [1,2,3,4,5,6,7,8,9,10]\n\
             profiles = [\"cosmos-plus\"]\ndesigns = [\"all\"]\ntasks = [\"stats64\"]\n\
             files = [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26]\n\
             sizes = [\"1k\",\"2k\",\"4k\",\"8k\",\"16k\",\"32k\",\"64k\",\"128k\",\"256k\",\"512k\"]\n",
            "more than 10000 points",
        ),
    ] {
        std::fs::write(&spec, text).unwrap();
        refused(&["sweep", s(&spec), "--store", s(&store)], needle);
    }
    std::fs::write(&spec, "name = \"x\"\ntraces = [\"untar\"]\n").unwrap();
    refused(
        &["sweep", s(&spec), "--shard", "2/2", "--store", s(&store)],
        "2/2",
    );
    refused(&["sweep", s(&dir.join("absent.toml"))], "absent.toml");
    // Garbage to import: named, and the store keeps what it had.
    ok(&csd(&["sweep", s(&spec), "--store", s(&store)]));
    let before = run_count(&store);
    let garbage = dir.join("garbage.runs");
    std::fs::write(&garbage, "not an export\n").unwrap();
    refused(
        &["runs", "import", s(&garbage), "--store", s(&store)],
        "not a csdlab runs export",
    );
    let good = dir.join("good.runs");
    ok(&csd(&[
        "runs",
        "export",
        "-o",
        s(&good),
        "--store",
        s(&store),
    ]));
    let mut text = std::fs::read_to_string(&good).unwrap();
    text.push_str("{\"run\": {\"truncated\n");
    std::fs::write(&garbage, text).unwrap();
    refused(
        &["runs", "import", s(&garbage), "--store", s(&store)],
        "line",
    );
    assert_eq!(run_count(&store), before);
}

#[test]
fn the_example_spec_plans_its_grid() {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sweep.toml");
    let store = scratch("example").join("store");
    let out = ok(&csd(&[
        "sweep",
        s(&spec),
        "--dry-run",
        "--store",
        s(&store),
    ]));
    // 2 traces × 4 designs × 3 seeds, and 2 tasks × 4 designs × 3 seeds × 3 file counts.
    assert_eq!(out.lines().count(), 2 * 4 * 3 + 2 * 4 * 3 * 3, "{out}");
}

#[test]
fn a_trace_file_beside_the_spec_is_found_and_kept_for_reruns() {
    let dir = scratch("beside");
    let study = dir.join("study");
    std::fs::create_dir_all(&study).unwrap();
    std::fs::write(
        study.join("tiny.trace"),
        "{\"format\":\"csd-trace\",\"version\":1,\"source\":\"test\",\"clock\":\"ns\"}\n\
         {\"t\":0,\"pid\":1,\"op\":\"mkdir\",\"path\":\"/d\",\"ret\":0}\n\
         {\"t\":10,\"pid\":1,\"op\":\"stat\",\"path\":\"/d\",\"ret\":0}\n",
    )
    .unwrap();
    std::fs::write(
        study.join("spec.toml"),
        "name = \"beside\"\ntraces = [\"tiny.trace\"]\ndesigns = [\"lightfs\"]\n",
    )
    .unwrap();
    let store = dir.join("store");
    // Run from elsewhere: the trace is found beside the spec, not in the working directory.
    let out = Command::new(CSD)
        .args(["sweep", "study/spec.toml", "--store", s(&store)])
        .current_dir(&dir)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    ok(&out);
    std::fs::remove_file(study.join("tiny.trace")).unwrap();
    // The store kept the trace: the point reruns without the file, and its export carries it.
    ok(&csd(&["runs", "rerun", "r1", "--store", s(&store)]));
    let export = ok(&csd(&[
        "runs",
        "export",
        "--sweep",
        "beside",
        "-o",
        "-",
        "--store",
        s(&store),
    ]));
    assert_eq!(
        export
            .lines()
            .filter(|l| l.starts_with("{\"trace\""))
            .count(),
        1,
        "{export}"
    );
}
