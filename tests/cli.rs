//! End-to-end tests of the `csd` binary: determinism, errors, and report snapshots.

mod common;

use std::process::{Command, Output};

/// Where the tests' runs are saved: never the user's own store.
fn test_data_home() -> std::path::PathBuf {
    common::scratch_dir().join("data")
}

fn csd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_csd"))
        .args(args)
        .env_remove("RUST_LOG")
        .env("XDG_DATA_HOME", test_data_home())
        .output()
        .expect("csd runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

const SMALL_MIXED: &[&str] = &[
    "device",
    "run",
    "--profile",
    "daisyplus-femu",
    "--rw",
    "randrw",
    "--bs",
    "16k",
    "--qd",
    "8",
    "--size",
    "32m",
    "--io",
    "64m",
    "--seed",
    "3",
];

#[test]
fn same_command_and_seed_print_byte_identical_output() {
    for extra in [&[][..], &["--json"][..]] {
        let args: Vec<&str> = SMALL_MIXED.iter().chain(extra).copied().collect();
        let a = csd(&args);
        let b = csd(&args);
        assert!(a.status.success(), "{}", stderr(&a));
        assert!(!a.stdout.is_empty());
        assert_eq!(a.stdout, b.stdout, "two runs differ");
    }
    // And the seed matters.
    let mut other: Vec<&str> = SMALL_MIXED.to_vec();
    *other.last_mut().unwrap() = "4";
    assert_ne!(csd(SMALL_MIXED).stdout, csd(&other).stdout);
}

#[test]
fn small_run_report_snapshot() {
    let o = csd(SMALL_MIXED);
    assert!(o.status.success(), "{}", stderr(&o));
    insta::assert_snapshot!(stdout(&o));
}

#[test]
fn json_report_has_the_headline_numbers() {
    let o = csd(&[
        "device",
        "run",
        "--profile",
        "daisyplus-femu",
        "--rw",
        "randwrite",
        "--bs",
        "16k",
        "--qd",
        "1",
        "--size",
        "16m",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ops"], 1024);
    assert_eq!(v["rw"], "randwrite");
    // QD 1 writes: 400 µs program plus NVMe, DMA and channel overheads.
    let p50 = v["latency"]["p50_ns"].as_u64().unwrap();
    assert!((400_000..460_000).contains(&p50), "{p50}");
    assert!(v["iops"].as_f64().unwrap() > 2000.0);
    assert_eq!(v["counters"]["waf"], 1.0);
}

/// The main job replays the bundled program with its plan and leads with the summary:
/// one row per design with its breakdown and PAO, then the verdict.
#[test]
fn bare_csd_runs_the_default_job() {
    let o = csd(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("grep-src.trace offloaded by grep-src.plan.toml"),
        "{out}"
    );
    assert!(out.contains("89 file(s) offloaded"), "{out}");
    for design in ["frag-s ", "frag-m ", "fsr ", "lightfs "] {
        let row = out.lines().find(|l| l.starts_with(design));
        let row = row.unwrap_or_else(|| panic!("no row for {design}: {out}"));
        assert!(row.trim_end().ends_with('%'), "{row}");
    }
    assert!(
        out.contains("finishes the offloaded requests first"),
        "{out}"
    );
    // The host-only baseline ran too, and every design is measured against it.
    let host = out
        .lines()
        .find(|l| l.starts_with("host "))
        .expect("a host row");
    assert!(host.contains(" 1.00× "), "{host}");
    assert!(out.contains("faster than the host alone"), "{out}");
    // The per-op tables are behind --detail.
    assert!(!out.contains("p99.9 µs"), "{out}");
    assert!(stderr(&o).contains("default job"));
    // `csd --help` names the job it runs, so the two cannot drift apart.
    let help = stdout(&csd(&["--help"])).replace('\n', " ");
    assert!(
        help.contains("`csd replay grep-src.trace --offload grep-src.plan.toml --design all,host`"),
        "{help}"
    );
    // The README's quick start shows the table exactly as it prints.
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let shown = readme
        .split("<!-- csd (the main job) -->\n```text\n")
        .nth(1)
        .and_then(|r| r.split("```\n<!-- end of csd -->").next())
        .expect("the README shows the main job's table");
    let table: String = out
        .lines()
        .take_while(|l| !l.starts_with("(per-op"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        shown.trim_end(),
        table.trim_end(),
        "README's quick start is stale"
    );
}

/// `csd trace offload` on the bundled program and plan: the stated files folded, the
/// same bytes every time, and the replay's breakdowns differ by design with LightFS's PAO
/// the lowest (LightFS Fig. 3).
#[test]
fn the_bundled_program_offloads_and_lightfs_has_the_lowest_pao() {
    let dir = scratch("offload");
    let repo = env!("CARGO_MANIFEST_DIR");
    let trace = format!("{repo}/traces/samples/grep-src.trace");
    let plan = format!("{repo}/traces/samples/grep-src.plan.toml");
    let mut outs = Vec::new();
    for i in 0..2 {
        let out = dir.join(format!("folded{i}.trace"));
        let o = csd(&[
            "trace",
            "offload",
            &trace,
            "--plan",
            &plan,
            "-o",
            out.to_str().unwrap(),
            "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let report: serde_json::Value = serde_json::from_slice(&o.stderr).unwrap();
        assert_eq!(report["rules"][0]["files"], 89, "{report}");
        assert_eq!(report["rules"][0]["requests"], 1, "{report}");
        assert_eq!(report["events_in"], 594);
        outs.push(std::fs::read(&out).unwrap());
    }
    assert_eq!(outs[0], outs[1], "folding is deterministic");
    let folded = dir.join("folded0.trace");
    let o = csd(&["replay", folded.to_str().unwrap(), "--json", "--no-store"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut paos = Vec::new();
    for d in v["designs"].as_array().unwrap() {
        assert_eq!(d["ndp"]["files"], 89, "{d}");
        assert!(d["first_errors"].as_object().unwrap().is_empty(), "{d}");
        paos.push((
            d["design"].as_str().unwrap().to_string(),
            d["ndp"]["pao"].as_f64().unwrap(),
        ));
    }
    let lowest = paos.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
    assert_eq!(lowest.0, "lightfs", "{paos:?}");
    let distinct: std::collections::BTreeSet<u64> =
        paos.iter().map(|p| (p.1 * 1e6) as u64).collect();
    assert_eq!(
        distinct.len(),
        4,
        "the breakdowns differ by design: {paos:?}"
    );
    // The same through `csd replay --offload`, by the bundled plan's name; the folded trace
    // is kept with the run, which reruns byte for byte.
    let store = dir.join("store");
    let o = csd(&[
        "replay",
        "grep-src",
        "--offload",
        "grep-src",
        "--store",
        store.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let again = csd(&["runs", "rerun", "r1", "--store", store.to_str().unwrap()]);
    assert!(again.status.success(), "{}", stderr(&again));
    // A bad plan is refused by name.
    std::fs::write(
        dir.join("bad.toml"),
        "[[rule]]\ntask = \"grep\"\npaths = [\"rel/*\"]\n",
    )
    .unwrap();
    let bad = csd(&[
        "trace",
        "offload",
        &trace,
        "--plan",
        dir.join("bad.toml").to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("not absolute"), "{}", stderr(&bad));
}

#[test]
fn profiles_lists_every_builtin_profile() {
    let o = csd(&["profiles"]);
    assert!(o.status.success());
    let out = stdout(&o);
    for name in [
        "daisyplus-femu",
        "cosmos-plus",
        "bluefield2-pm1735",
        "optane-csd",
        "pcm-zynq",
    ] {
        assert!(out.contains(name), "{name} missing:\n{out}");
    }
    let json: serde_json::Value =
        serde_json::from_slice(&csd(&["profiles", "--json"]).stdout).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 5);
    assert_eq!(json[0]["page_read_ns"], 80_000);
    // How each buffers writes: Cosmos+'s firmware's 16 pages a die over 64 dies of 16 KiB.
    let buffer = |name: &str| {
        let row = json.as_array().unwrap().iter().find(|r| r["name"] == name);
        row.unwrap()["write_buffer"].clone()
    };
    assert_eq!(buffer("daisyplus-femu")["kind"], "none");
    assert_eq!(buffer("cosmos-plus")["kind"], "data_buffer");
    assert_eq!(buffer("cosmos-plus")["bytes"], 16 << 20);
    assert_eq!(buffer("bluefield2-pm1735")["kind"], "write_cache");
    assert!(out.contains("16 MiB LRU"), "{out}");
}

/// `csd profiles show` prints a profile's own text, so a user can start from one; a kept
/// profile is listed beside the built-in ones.
#[test]
fn a_profile_shown_edited_and_kept_is_listed_as_stored() {
    let dir = scratch("profiles-show");
    let store = dir.join("store");
    let _ = std::fs::remove_dir_all(&store);
    let st = store.to_str().unwrap();
    let shown = csd(&["profiles", "show", "cosmos-plus", "--store", st]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let source = format!(
        "{}/device/profiles/cosmos-plus.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    assert_eq!(stdout(&shown), std::fs::read_to_string(source).unwrap());
    assert!(!store.exists(), "showing a built-in profile makes no store");
    let mine = stdout(&shown)
        .replace("name = \"cosmos-plus\"", "name = \"my-cosmos\"")
        .replace("page_read_ns = 50000", "page_read_ns = 40000");
    let file = dir.join("mine.toml");
    std::fs::write(&file, &mine).unwrap();
    let add = csd(&["profiles", "add", file.to_str().unwrap(), "--store", st]);
    assert!(add.status.success(), "{}", stderr(&add));
    let list = csd(&["profiles", "--json", "--store", st]);
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let last = rows.as_array().unwrap().last().unwrap();
    assert_eq!(last["name"], "my-cosmos");
    assert_eq!(last["origin"], "stored");
    assert_eq!(last["page_read_ns"], 40_000);
    assert_eq!(rows[0]["origin"], "built-in");
    let again = csd(&["profiles", "show", "my-cosmos", "--store", st]);
    assert_eq!(stdout(&again), mine);
    let unknown = csd(&["profiles", "show", "warp-drive", "--store", st]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        stderr(&unknown).contains("unknown profile 'warp-drive'"),
        "{}",
        stderr(&unknown)
    );
}

#[test]
fn bad_input_gets_a_clear_error_and_a_failing_exit_code() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["device", "run", "--profile", "warp-drive"],
            "unknown profile 'warp-drive'",
        ),
        (&["device", "run", "--bs", "lots"], "'lots' is not a size"),
        (
            &["device", "run", "--bs", "3", "--size", "1m"],
            "block size (3 bytes) must be a whole number of 512-byte logical blocks",
        ),
        (
            &["device", "run", "--bs", "0"],
            "block size (0 bytes) must be a whole number",
        ),
        (
            &["device", "run", "--rw", "sideways"],
            "unknown pattern 'sideways'",
        ),
        (
            &["device", "run", "--qd", "0"],
            "queue depth must be at least 1",
        ),
        (
            &["device", "run", "--size", "1t"],
            "exceeds the device's logical capacity",
        ),
        (
            &["device", "run", "--profile", "/nonexistent/p.toml"],
            "reading profile /nonexistent/p.toml",
        ),
        // The dashboard shows a served replay's result: flags for the terminal's output
        // are refused with it, not ignored.
        (
            &["replay", "--serve", "127.0.0.1:0", "--json"],
            "'--serve [<ADDR>]' cannot be used with '--json'",
        ),
        (&["replay", "--detail", "--serve"], "cannot be used with"),
    ];
    for (args, expected) in cases {
        let o = csd(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        let err = stderr(&o);
        assert!(
            err.contains(expected),
            "{args:?}: expected {expected:?} in:\n{err}"
        );
        assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    }
}

#[test]
fn a_malformed_profile_file_names_field_and_line() {
    let dir = common::scratch_dir().join("profile");
    std::fs::create_dir_all(&dir).unwrap();
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/device/profiles/daisyplus-femu.toml"
    ))
    .unwrap()
    .replace("page_read_ns = 80000", "page_read_ns = -5");
    let path = dir.join("broken.toml");
    std::fs::write(&path, &src).unwrap();
    let o = csd(&["device", "run", "--profile", path.to_str().unwrap()]);
    let err = stderr(&o);
    let line = src.lines().position(|l| l.contains("= -5")).unwrap() + 1;
    assert!(!o.status.success());
    assert!(err.contains(&format!("line {line}")), "{err}");
    assert!(
        err.contains("page_read_ns") || err.contains("invalid value"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Runs csd with a private module cache, so tests never touch the user's.
fn csd_cached(args: &[&str], cache: &std::path::Path) -> Output {
    csd_cached_with(args, cache, &[])
}

/// [`csd_cached`] with more environment variables set.
fn csd_cached_with(args: &[&str], cache: &std::path::Path, env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_csd"))
        .args(args)
        .env_remove("RUST_LOG")
        .env("XDG_CACHE_HOME", cache)
        .env("XDG_DATA_HOME", test_data_home())
        .envs(env.iter().copied())
        .output()
        .expect("csd runs")
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = common::scratch_dir().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn csd_run_imports_a_directory_and_runs_a_builtin_task() {
    let dir = scratch("run");
    std::fs::create_dir_all(dir.join("logs/old")).unwrap();
    std::fs::write(dir.join("logs/a.log"), "ok\nERROR one\nok\n").unwrap();
    std::fs::write(dir.join("logs/old/b.log"), "ERROR two ERROR three\n").unwrap();
    let logs = dir.join("logs");
    let args = [
        "run",
        "grep",
        "--import",
        logs.to_str().unwrap(),
        "--path",
        "/logs",
        "--args",
        r#"{"pattern":"ERROR"}"#,
        "--json",
    ];
    let o = csd_cached(&args, &dir.join("cache"));
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["files"],
        serde_json::json!(["/logs/a.log", "/logs/old/b.log"])
    );
    assert_eq!(v["result"]["total"], 3);
    assert_eq!(
        v["result"]["files"][1]["offsets"],
        serde_json::json!([0, 10])
    );
    let b = &v["breakdown"];
    let sum: u64 = [
        "read_file_ns",
        "compute_ns",
        "write_ns",
        "dma_ns",
        "others_ns",
    ]
    .iter()
    .map(|k| b[k].as_u64().unwrap())
    .sum();
    assert_eq!(sum, v["latency_ns"].as_u64().unwrap());
    // The table names the files in the order the task's per-file results follow.
    let table = csd_cached(&args[..args.len() - 1], &dir.join("cache"));
    assert!(
        stdout(&table).contains("  files    0 /logs/a.log · 1 /logs/old/b.log\n"),
        "{}",
        stdout(&table)
    );
    // --import twice: both land under --path; two that would collide are refused.
    std::fs::write(dir.join("c.log"), "ERROR four\n").unwrap();
    let c = dir.join("c.log");
    let two = csd_cached(
        &[
            "run",
            "grep",
            "--import",
            logs.to_str().unwrap(),
            "--import",
            c.to_str().unwrap(),
            "--path",
            "/logs",
            "--args",
            r#"{"pattern":"ERROR"}"#,
            "--json",
            "--no-store",
        ],
        &dir.join("cache"),
    );
    assert!(two.status.success(), "{}", stderr(&two));
    let v: serde_json::Value = serde_json::from_slice(&two.stdout).unwrap();
    assert_eq!(v["result"]["total"], 4, "{v}");
    let clash = csd_cached(
        &[
            "run",
            "grep",
            "--import",
            c.to_str().unwrap(),
            "--import",
            c.to_str().unwrap(),
            "--no-store",
        ],
        &dir.join("cache"),
    );
    assert_eq!(clash.status.code(), Some(1));
    assert!(
        stderr(&clash).contains("both land at"),
        "{}",
        stderr(&clash)
    );
    // Second run: compiled module from the disk cache, byte-identical report.
    let again = csd_cached(&args, &dir.join("cache"));
    assert_eq!(o.stdout, again.stdout);
    assert!(
        std::fs::read_dir(dir.join("cache/csdlab/modules"))
            .unwrap()
            .count()
            >= 1
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn csd_run_writes_output_files_and_exports_them() {
    let dir = scratch("export");
    // A fill of 3 all-ones words, then a literal of 1 word.
    let words: [u32; 3] = [0xC000_0003, 1, 0xDEAD_BEEF];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(dir.join("bits.rle"), bytes).unwrap();
    let input = dir.join("bits.rle");
    let out = dir.join("out");
    let o = csd_cached(
        &[
            "run",
            "bitmap-decompress",
            "--import",
            input.to_str().unwrap(),
            "--file",
            "/out/bits:w",
            "--export",
            out.to_str().unwrap(),
        ],
        &dir.join("cache"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let mut expect = vec![0xFFu8; 12];
    expect.extend(0xDEAD_BEEFu32.to_le_bytes());
    assert_eq!(std::fs::read(out.join("out/bits")).unwrap(), expect);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn csd_tasks_lists_the_builtin_tasks() {
    let o = csd(&["tasks"]);
    assert!(o.status.success());
    let out = stdout(&o);
    for t in [
        "stats32",
        "stats64",
        "knn",
        "grep",
        "grep-accel",
        "checksum",
        "wordquery",
        "bitmap-decompress",
        "bfs",
    ] {
        assert!(
            out.lines().any(|l| l.trim_start().starts_with(t)),
            "{t} missing:\n{out}"
        );
    }
    // Each task's example arguments that are JSON run as shown, on a file of text.
    let dir = scratch("tasks-args");
    std::fs::write(
        dir.join("notes.txt"),
        "the data disk is full\nERROR page file\n",
    )
    .unwrap();
    let listed: serde_json::Value =
        serde_json::from_slice(&csd(&["tasks", "--json"]).stdout).unwrap();
    let mut ran = Vec::new();
    for t in listed.as_array().unwrap() {
        let (name, args) = (
            t["name"].as_str().unwrap(),
            t["args"].as_str().unwrap_or(""),
        );
        // The rest need files of their own formats (a graph, sorted runs, vectors) or are
        // the sandbox's tests.
        if ![
            "grep",
            "grep-accel",
            "grep-bytewise",
            "wordquery",
            "readall",
        ]
        .contains(&name)
        {
            continue;
        }
        let o = csd(&[
            "run",
            name,
            "--import",
            dir.join("notes.txt").to_str().unwrap(),
            "--args",
            args,
            "--no-store",
        ]);
        assert!(o.status.success(), "{name} {args}: {}", stderr(&o));
        ran.push(name);
    }
    assert_eq!(ran.len(), 5, "{listed}");
}

/// A task with binary arguments and a binary result: the query comes from a file, and the
/// result, not being JSON or text, is shown as its length and hex.
#[test]
fn csd_run_hands_a_binary_query_from_a_file_and_shows_a_binary_result() {
    let dir = scratch("binary-args");
    std::fs::create_dir_all(dir.join("vectors")).unwrap();
    // Three vectors of 128 f32: all 0, all 1, all 3; the query is all 1.
    let vectors: Vec<u8> = [0f32, 1.0, 3.0]
        .iter()
        .flat_map(|&x| std::iter::repeat_n(x, 128))
        .flat_map(f32::to_le_bytes)
        .collect();
    std::fs::write(dir.join("vectors/v"), &vectors).unwrap();
    let query: Vec<u8> = std::iter::repeat_n(1f32, 128)
        .flat_map(f32::to_le_bytes)
        .chain(2u32.to_le_bytes())
        .collect();
    std::fs::write(dir.join("query"), &query).unwrap();
    let (v, q) = (dir.join("vectors"), dir.join("query"));
    let o = csd_cached(
        &[
            "run",
            "knn-bin",
            "--import",
            v.to_str().unwrap(),
            "--args-file",
            q.to_str().unwrap(),
            "--json",
            "--no-store",
        ],
        &dir.join("cache"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // k = 2: vector 1 at distance 0, then vector 0 at sqrt(128): 16 bytes each.
    assert_eq!(r["result"]["binary_bytes"], 32, "{}", r["result"]);
    let hex = r["result"]["hex"].as_str().unwrap();
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let index = |n: usize| u64::from_le_bytes(bytes[n * 16 + 4..n * 16 + 12].try_into().unwrap());
    let distance =
        |n: usize| f32::from_le_bytes(bytes[n * 16 + 12..n * 16 + 16].try_into().unwrap());
    assert_eq!((index(0), distance(0)), (1, 0.0));
    assert_eq!((index(1), distance(1)), (0, 128f32.sqrt()));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn csd_run_errors_are_clear() {
    let dir = scratch("errors");
    std::fs::write(dir.join("garbage.wasm"), b"definitely not wasm").unwrap();
    std::fs::write(dir.join("f"), b"x").unwrap();
    let f = dir.join("f");
    let f = f.to_str().unwrap();
    let garbage = dir.join("garbage.wasm");
    let cache = dir.join("cache");
    // Sparse: one byte over what --args-file hands a task.
    let huge = dir.join("huge-args");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len((16 << 20) + 1)
        .unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", "frobnicate"], "unknown task 'frobnicate'"),
        (
            vec!["run", garbage.to_str().unwrap()],
            "not a valid WebAssembly module",
        ),
        (
            vec!["run", "grep", "--import", "/no/such/dir"],
            "--import /no/such/dir",
        ),
        (
            vec!["run", "grep", "--import", f, "--args", "{}"],
            "bad arguments: missing field `pattern`",
        ),
        (
            vec!["run", "grep", "--import", f, "--file", "/x"],
            "expected PATH:MODE",
        ),
        (
            vec![
                "run",
                "knn-bin",
                "--import",
                f,
                "--args-file",
                "/no/such/query",
            ],
            "reading the task's arguments from /no/such/query",
        ),
        (
            vec!["run", "knn-bin", "--args", "x", "--args-file", f],
            "cannot be used with",
        ),
        (
            vec![
                "run",
                "knn-bin",
                "--import",
                f,
                "--args-file",
                huge.to_str().unwrap(),
            ],
            "is larger than 16 MiB",
        ),
        (
            vec![
                "run",
                "hostile",
                "--args",
                r#"{"do":"loop"}"#,
                "--fuel",
                "100000",
            ],
            "used up its compute budget",
        ),
        (
            vec![
                "run",
                "grep-accel",
                "--profile",
                "daisyplus-femu",
                "--import",
                f,
                "--args",
                r#"{"pattern":"x"}"#,
            ],
            "no grep accelerator",
        ),
    ];
    for (args, expected) in cases {
        let o = csd_cached(&args, &cache);
        let err = stderr(&o);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(
            err.contains(expected),
            "{args:?}: expected {expected:?} in:\n{err}"
        );
        assert!(!err.contains("panicked"), "{args:?}:\n{err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn csd_ndp_reports_every_design_deterministically() {
    let cache = scratch("ndp-cache");
    let args = ["ndp", "--files", "20", "--size", "16k", "--app", "stats32"];
    let a = csd_cached(&args, &cache);
    assert!(a.status.success(), "{}", stderr(&a));
    assert_eq!(
        a.stdout,
        csd_cached(&args, &cache).stdout,
        "two runs differ"
    );
    insta::assert_snapshot!(stdout(&a));

    let sweep = [
        "ndp",
        "--sweep",
        "files=1,10",
        "--design",
        "frag-s,lightfs",
        "--json",
    ];
    let o = csd_cached(&sweep, &cache);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for p in points {
        let designs = p["designs"].as_array().unwrap();
        assert_eq!(designs.len(), 2);
        let speedup = p["speedup_of_lightfs"][0][1].as_f64().unwrap();
        assert!(speedup >= 1.0, "{p}");
        for d in designs {
            let pao = d["pao"].as_f64().unwrap();
            assert!((0.0..1.0).contains(&pao), "{d}");
        }
    }

    // A real directory of files.
    let dir = scratch("ndp-import");
    for i in 0..5 {
        std::fs::write(
            dir.join(format!("part{i}.log")),
            "ERROR disk\nINFO ok\n".repeat(200),
        )
        .unwrap();
    }
    let o = csd_cached(
        &[
            "ndp",
            "--import",
            dir.to_str().unwrap(),
            "--app",
            "grep",
            "--json",
        ],
        &cache,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["points"][0]["files"], 5);
}

#[test]
fn csd_ndp_errors_are_clear() {
    let cache = scratch("ndp-errors");
    for (args, expect) in [
        (
            &["ndp", "--design", "frag-x"][..],
            "unknown design 'frag-x'",
        ),
        (
            &["ndp", "--sweep", "depth=3"][..],
            "can sweep `files` or `size`",
        ),
        (
            &["ndp", "--sweep", "files=1,zero"][..],
            "'zero' is not a positive count",
        ),
        (&["ndp", "--files", "0"][..], "--files must be at least 1"),
        (
            &["ndp", "--import", "/nonexistent/csd"][..],
            "/nonexistent/csd",
        ),
        (&["ndp", "--profile", "nope"][..], "nope"),
    ] {
        let o = csd_cached(args, &cache);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(stderr(&o).contains(expect), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn a_recording_whose_conversion_fails_keeps_its_strace_log() {
    // A stand-in strace that writes a log the importer refuses at its second line: the
    // command has run, so its log is kept and named, and no trace is written.
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("record-keeps");
    let bin = dir.join("bin");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let fake = bin.join("strace");
    std::fs::write(
        &fake,
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = -o ] && out=\"$2\"; shift; done\n\
         printf '7 1000.000100 mkdir(\"/w/d\", 0777) = 0 <0.000010>\\n7 not-a-time x\\n' > \"$out\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = dir.join("t.trace");
    let o = csd_cached_with(
        &["trace", "record", "-o", out.to_str().unwrap(), "--", "true"],
        &dir.join("cache"),
        &[("PATH", &path), ("TMPDIR", tmp.to_str().unwrap())],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("strace line 2"), "{err}");
    let kept: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(err.contains(&kept[0].display().to_string()), "{err}");
    assert!(std::fs::read_to_string(&kept[0]).unwrap().contains("mkdir"));
    assert!(!out.exists(), "no trace from a failed conversion");
}

#[test]
fn csd_trace_records_imports_and_checks() {
    let dir = scratch("trace");
    let out = dir.join("t.trace");
    // `cp` of 100 000 bytes: coreutils 9 copies with copy_file_range, older ones read and
    // write; either way the trace carries the bytes.
    std::fs::write(dir.join("big"), vec![7u8; 100_000]).unwrap();
    let script = format!(
        "mkdir {d}/w && echo hello > {d}/w/a && cat {d}/w/a > /dev/null && cp {d}/big {d}/w/big && rm {d}/w/a {d}/w/big && rmdir {d}/w",
        d = dir.display()
    );
    // strace stops the program at the calls the importer reads alone, unless asked for all:
    // its log is shorter, and the trace holds the same events.
    let record = |out: &std::path::Path, all: bool| {
        let log = out.with_extension("strace");
        let mut args = vec!["trace", "record", "-o", out.to_str().unwrap()];
        args.extend(["--keep-strace", log.to_str().unwrap()]);
        args.extend(all.then_some("--all-calls"));
        args.extend(["--", "sh", "-c", &script]);
        let o = csd(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let o = csd(&["trace", "check", out.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let lines = std::fs::read_to_string(&log).unwrap().lines().count();
        (
            serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap(),
            lines,
        )
    };
    let (v, filtered) = record(&out, false);
    let (all, every_call) = record(&dir.join("all.trace"), true);
    assert!(
        filtered < every_call,
        "{filtered} strace lines against {every_call}"
    );
    for key in ["by_op", "bytes_read", "bytes_written"] {
        assert_eq!(v[key], all[key], "{key}");
    }
    for op in ["mkdir", "unlink", "rmdir", "write"] {
        assert!(
            v["by_op"][op].as_u64().unwrap_or(0) >= 1,
            "{op} missing: {v}"
        );
    }
    assert_eq!(v["source"], "strace");
    assert!(
        v["bytes_written"].as_u64().unwrap() >= 100_006,
        "the copy's bytes: {v}"
    );

    let msr = dir.join("x.csv");
    std::fs::write(&msr, "1,h,0,Read,0,4096,10\n2,h,0,Write,4096,4096,10\n").unwrap();
    let conv = dir.join("x.trace");
    let o = csd(&[
        "trace",
        "import",
        "--from",
        "msr",
        msr.to_str().unwrap(),
        "-o",
        conv.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = csd(&["trace", "check", conv.to_str().unwrap()]);
    assert!(stdout(&o).contains("2 events"), "{}", stdout(&o));

    // A thread (`fds_of`) shares its process's fd table, and the summary says so.
    let threads = dir.join("threads.trace");
    std::fs::write(
        &threads,
        concat!(
            "{\"format\":\"csd-trace\",\"version\":1}\n",
            "{\"t\":1,\"pid\":1,\"op\":\"open\",\"path\":\"/a\",\"flags\":\"O_RDONLY\",\"ret\":3}\n",
            "{\"t\":2,\"pid\":2,\"fds_of\":1,\"op\":\"close\",\"fd\":3,\"path\":\"/a\"}\n",
            "{\"t\":3,\"pid\":4,\"op\":\"stat\",\"path\":\"/a\"}\n",
        ),
    )
    .unwrap();
    let o = csd(&["trace", "check", threads.to_str().unwrap()]);
    assert!(
        stdout(&o).contains("3 events from 3 pid(s) (2 fd table(s))"),
        "{}",
        stdout(&o)
    );

    // Errors name the file and line.
    std::fs::write(&msr, "1,h,0,Read,0,4096,10\n2,h,0,Trim,0,1,1\n").unwrap();
    let o = csd(&[
        "trace",
        "import",
        "--from",
        "msr",
        msr.to_str().unwrap(),
        "-o",
        conv.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("msr line 2"), "{}", stderr(&o));
    let bad = dir.join("bad.trace");
    std::fs::write(
        &bad,
        "{\"format\":\"csd-trace\",\"version\":1}\n{\"t\":1,\"pid\":1,\"op\":\"mmap\"}\n",
    )
    .unwrap();
    let o = csd(&["trace", "check", bad.to_str().unwrap()]);
    assert!(
        stderr(&o).contains("line 2: unknown op \"mmap\""),
        "{}",
        stderr(&o)
    );
    let o = csd(&["trace", "check", bad.to_str().unwrap(), "--lenient"]);
    assert!(o.status.success());
    assert!(
        stdout(&o).contains("skipped unknown op mmap: 1"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_design_that_cannot_be_built_fails_the_replay_with_its_own_error() {
    // fusion needs a [fusion] table cosmos-plus lacks; the designs beside it are stopped,
    // and the error is fusion's, not theirs.
    let path = format!("{}/traces/samples/untar.trace", env!("CARGO_MANIFEST_DIR"));
    let o = csd(&[
        "replay",
        path.as_str(),
        "--design",
        "frag-s,fusion,lightfs",
        "--profile",
        "cosmos-plus",
        "--no-store",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("under fusion"), "{err}");
    assert!(err.contains("[fusion] table"), "{err}");
    assert!(!err.contains("stopped"), "{err}");
}

#[test]
fn replays_are_deterministic_and_snapshotted() {
    let cache = scratch("replay-cache");
    for sample in [
        "traces/samples/untar.trace",
        "traces/samples/ndp-mixed.trace",
        "traces/samples/sqlite.trace",
        "traces/samples/grep.trace",
    ] {
        let path = format!("{}/{sample}", env!("CARGO_MANIFEST_DIR"));
        let args = ["replay", path.as_str(), "--json"];
        let a = csd_cached(&args, &cache);
        assert!(a.status.success(), "{}", stderr(&a));
        assert_eq!(
            a.stdout,
            csd_cached(&args, &cache).stdout,
            "{sample}: two replays differ"
        );
        let v: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
        let designs = v["designs"].as_array().unwrap();
        assert_eq!(designs.len(), 4);
        // The designs replay side by side on one reading of the trace; each report is the
        // one the design gives alone.
        for d in designs {
            let name = d["design"].as_str().unwrap();
            let alone = csd_cached(
                &["replay", path.as_str(), "--design", name, "--json"],
                &cache,
            );
            assert_eq!(alone.status.code(), Some(0), "{sample}: {name} alone");
            let alone: serde_json::Value = serde_json::from_slice(&alone.stdout).unwrap();
            assert_eq!(&alone["designs"][0], d, "{sample}: {name} alone differs");
        }
        for d in designs {
            assert!(d["ops"].as_u64().unwrap() > 0, "{d}");
            assert!(
                d["first_errors"].as_object().unwrap().is_empty(),
                "{sample}: {d}"
            );
        }
        let human = csd_cached(
            &["replay", path.as_str(), "--design", "frag-s,lightfs"],
            &cache,
        );
        assert!(human.status.success(), "{}", stderr(&human));
        // The trace path differs between machines; the report below it must not.
        let report = stdout(&human).replace(&path, sample);
        insta::assert_snapshot!(sample.replace(['/', '.'], "_"), report);
    }
    let ndp = csd_cached(
        &[
            "replay",
            &format!(
                "{}/traces/samples/ndp-mixed.trace",
                env!("CARGO_MANIFEST_DIR")
            ),
            "--json",
        ],
        &cache,
    );
    let v: serde_json::Value = serde_json::from_slice(&ndp.stdout).unwrap();
    for d in v["designs"].as_array().unwrap() {
        assert_eq!(d["ndp"]["requests"], 3, "{d}");
        assert_eq!(
            d["isc"]["committed"], 1,
            "the sample's grep transaction: {d}"
        );
        assert!(d["skipped"].as_object().unwrap().is_empty(), "{d}");
    }
    // Errors name the trace and the line.
    let dir = scratch("replay-bad");
    let bad = dir.join("bad.trace");
    std::fs::write(&bad, "{\"format\":\"csd-trace\",\"version\":1}\n{\"t\":1,\"pid\":1,\"op\":\"read\",\"fd\":4,\"len\":1}\n").unwrap();
    let o = csd_cached(&["replay", bad.to_str().unwrap()], &cache);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("line 2: fd 4 of pid 1 is not open"),
        "{}",
        stderr(&o)
    );
    let o = csd_cached(&["replay", "/nonexistent.trace"], &cache);
    assert!(stderr(&o).contains("/nonexistent.trace"), "{}", stderr(&o));
}

#[test]
fn runs_are_stored_listed_compared_and_removed() {
    let cache = scratch("runs-cache");
    let store = scratch("runs-store");
    let st = store.to_str().unwrap();
    let sample = format!(
        "{}/traces/samples/ndp-mixed.trace",
        env!("CARGO_MANIFEST_DIR")
    );
    for seed in ["1", "2"] {
        let o = csd_cached(
            &[
                "replay",
                &sample,
                "--store",
                st,
                "--seed",
                seed,
                "--design",
                "frag-s,lightfs",
            ],
            &cache,
        );
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stderr(&o).contains("saved as run r"), "{}", stderr(&o));
    }
    let o = csd_cached(&["ndp", "--files", "5", "--store", st], &cache);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = csd_cached(&["runs", "list", "--store", st, "--json"], &cache);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["r1", "r2", "r3"]);
    assert_eq!(v[0]["trace"]["name"], sample.as_str());
    assert!(v[0]["trace"]["id"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(v[2]["kind"], "ndp");
    let o = csd_cached(&["runs", "show", "--json", "r2", "--store", st], &cache);
    let shown: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(shown["seed"], 2);
    let text = csd_cached(&["runs", "show", "r2", "--store", st], &cache);
    let text = stdout(&text);
    assert!(text.starts_with("run r2 · replay · profile"), "{text}");
    assert!(text.contains("ops_per_sec"), "{text}");
    assert_eq!(shown["report"]["designs"].as_array().unwrap().len(), 2);
    let o = csd_cached(&["runs", "diff", "r1", "r2", "--store", st], &cache);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("frag-s") && out.contains("lightfs") && out.contains("duration (µs)"),
        "{out}"
    );
    let o = csd_cached(&["runs", "rm", "r1", "--store", st], &cache);
    assert!(o.status.success());
    let o = csd_cached(&["runs", "show", "r1", "--store", st], &cache);
    assert!(stderr(&o).contains("no run 'r1'"), "{}", stderr(&o));

    // A replay that fails at its last line saves nothing.
    let dir = scratch("runs-fail");
    let bad = dir.join("late-error.trace");
    let mut text = std::fs::read_to_string(&sample).unwrap();
    text.push_str("{\"t\":999999999,\"pid\":1,\"op\":\"write\",\"fd\":77,\"len\":1}\n");
    std::fs::write(&bad, text).unwrap();
    let o = csd_cached(&["replay", bad.to_str().unwrap(), "--store", st], &cache);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("fd 77 of pid 1 is not open"),
        "{}",
        stderr(&o)
    );
    let o = csd_cached(&["runs", "list", "--store", st, "--json"], &cache);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2, "{v}");

    // A replay killed midway leaves a readable store whose runs are all complete.
    let mut child = Command::new(env!("CARGO_BIN_EXE_csd"))
        .args(["replay", &sample, "--store", st])
        .env("XDG_CACHE_HOME", &cache)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let o = csd_cached(&["runs", "list", "--store", st, "--json"], &cache);
    assert!(o.status.success(), "{}", stderr(&o));
    for r in serde_json::from_slice::<serde_json::Value>(&o.stdout)
        .unwrap()
        .as_array()
        .unwrap()
    {
        let id = r["id"].as_str().unwrap();
        let full = csd_cached(&["runs", "show", "--json", id, "--store", st], &cache);
        let full: serde_json::Value = serde_json::from_slice(&full.stdout).unwrap();
        assert!(full["report"].is_object(), "{id} is incomplete");
    }

    // While another process holds the store, runs commands say so (after a short wait: the
    // default 20 s was most of this file's time).
    let held = csd_traces::store::RunStore::open(&store).unwrap();
    let o = csd_cached_with(
        &["runs", "list", "--store", st],
        &cache,
        &[("CSD_STORE_WAIT", "0.5")],
    );
    assert!(
        stderr(&o).contains("in use by another csd process"),
        "{}",
        stderr(&o)
    );
    drop(held);

    // Stored traces replay by name.
    let o = csd_cached(&["trace", "add", &sample, "--store", st], &cache);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = csd_cached(
        &[
            "replay",
            "ndp-mixed.trace",
            "--store",
            st,
            "--design",
            "fsr",
        ],
        &cache,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("ndp-mixed.trace · profile"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn task_runs_are_saved_too() {
    let cache = scratch("task-store-cache");
    let store = scratch("task-store");
    let data = scratch("task-store-data");
    std::fs::write(data.join("a.log"), "ERROR one\nok\nERROR two\n").unwrap();
    let o = csd_cached(
        &[
            "run",
            "grep",
            "--import",
            data.to_str().unwrap(),
            "--args",
            r#"{"pattern":"ERROR"}"#,
            "--store",
            store.to_str().unwrap(),
        ],
        &cache,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = csd_cached(
        &[
            "runs",
            "show",
            "--json",
            "r1",
            "--store",
            store.to_str().unwrap(),
        ],
        &cache,
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["kind"], "task");
    assert_eq!(v["report"]["result"]["total"], 2, "{v}");
    // --no-store leaves the store alone.
    let o = csd_cached(
        &[
            "run",
            "grep",
            "--import",
            data.to_str().unwrap(),
            "--args",
            r#"{"pattern":"ERROR"}"#,
            "--no-store",
        ],
        &cache,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("saved as run"));
}

/// `csd txbench`: both virtual-time halves are deterministic and have TxISC Fig. 3's shape
/// (with flash timing off only the firmware's work and the backing store's copies are left,
/// and transactions cost the firmware more);
/// timing the simulator measures all three modes.
#[test]
fn txbench_compares_the_three_modes() {
    let args = [
        "txbench",
        "--writes",
        "0,100",
        "--qd",
        "1,16",
        "--requests",
        "2048",
        "--file-size",
        "64m",
        "--cpu-requests",
        "2000",
        "--repeat",
        "1",
        "--json",
    ];
    let o = csd(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let on = v["flash_timing_on"].as_array().unwrap();
    assert_eq!(on.len(), 2 * 2 * 3, "writes × qd × modes");
    for point in on.chunks(3) {
        let bw: Vec<f64> = point
            .iter()
            .map(|m| m["mb_per_s"].as_f64().unwrap())
            .collect();
        let modes: Vec<&str> = point.iter().map(|m| m["mode"].as_str().unwrap()).collect();
        assert_eq!(modes, ["tx", "file", "block"]);
        assert!(bw[0] <= bw[1] && bw[1] <= bw[2], "{point:?}");
        assert!(
            bw[0] > 0.98 * bw[2],
            "tx within 2 % of block with flash timing on: {point:?}"
        );
    }
    let off = v["flash_timing_off_model"].as_array().unwrap();
    assert_eq!(off.len(), 2 * 2 * 3, "writes × qd × modes");
    for point in off.chunks(3) {
        let bw: Vec<f64> = point
            .iter()
            .map(|m| m["mb_per_s"].as_f64().unwrap())
            .collect();
        assert!(bw[0] <= bw[1] && bw[1] < bw[2], "{point:?}");
        // Nothing but firmware work and the backing store's copies are left: far above the
        // flash-bound bandwidths, and never past the one port the copies cross (5.33 GB/s).
        assert!(
            bw[2] > 10.0 * on[2]["mb_per_s"].as_f64().unwrap(),
            "{point:?}"
        );
        assert!(bw[2] <= 5328.0 * 1.0001, "{point:?}");
    }
    // (writes, qd) in order: 0 % at QD 1 and 16, then 100 % at QD 1 and 16.
    let mb = |i: usize| off[i]["mb_per_s"].as_f64().unwrap();
    assert!(
        mb(5) > 1.5 * mb(2),
        "deep queues overlap firmware and copies: {off:?}"
    );
    let drop = |p: &[serde_json::Value]| {
        1.0 - p[0]["mb_per_s"].as_f64().unwrap() / p[1]["mb_per_s"].as_f64().unwrap()
    };
    assert!(
        drop(&off[6..9]) > drop(&off[0..3]),
        "writes cost transactions more than reads: {off:?}"
    );
    assert_eq!(v["flash_timing_off"].as_array().unwrap().len(), 2 * 3);
    // Virtual-time results do not depend on the machine or the run.
    let again: serde_json::Value = serde_json::from_slice(&csd(&args).stdout).unwrap();
    assert_eq!(v["flash_timing_on"], again["flash_timing_on"]);
    assert_eq!(v["flash_timing_off_model"], again["flash_timing_off_model"]);
    for (bad, says) in [
        (["--qd", "0"], "--qd 0: a queue depth is at least 1"),
        (
            ["--writes", "200"],
            "--writes 200: a write percentage is 0 to 100",
        ),
    ] {
        let e = csd(&[&["txbench"][..], &bad[..]].concat());
        assert_eq!(e.status.code(), Some(1), "{}", stderr(&e));
        assert!(stderr(&e).contains(says), "{}", stderr(&e));
    }
}

/// `csd bench tasks --kernel` times only the kernels it names (to profile one alone), and
/// its Wasm and native results still had to agree for it to print anything.
#[test]
fn bench_tasks_times_only_the_kernels_named() {
    let o = csd(&[
        "bench",
        "tasks",
        "--size",
        "1m",
        "--repeat",
        "1",
        "--invocations",
        "10",
        "--kernel",
        "stats64",
        "--kernel",
        "knn",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = v["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kernel"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["stats64", "knn"]);
    // Wall-time figures name the machine that measured them.
    assert!(v["machine"]["logical_cpus"].as_u64().unwrap() >= 1, "{v}");
    assert!(!v["machine"]["cpu"].as_str().unwrap().is_empty(), "{v}");
    for k in v["kernels"].as_array().unwrap() {
        assert!(k["wasm_ns"].as_u64().unwrap() > 0, "{k}");
        assert!(k["native_ns"].as_u64().unwrap() > 0, "{k}");
    }
    let bad = csd(&["bench", "tasks", "--kernel", "sort"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("sort"), "{}", stderr(&bad));
}

/// `csd bench coalesce` runs its three sizes and reports the reduction it measured.
#[test]
fn bench_coalesce_reports_three_sizes() {
    let o = csd(&[
        "bench",
        "coalesce",
        "--intervals",
        "40000",
        "--repeat",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let points = v["points"].as_array().unwrap();
    let sizes: Vec<u64> = points
        .iter()
        .map(|p| p["intervals"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [10_000, 20_000, 40_000]);
    for p in points {
        let kept = p["surviving_blocks"].as_u64().unwrap();
        assert!(kept > 0 && kept < p["intervals"].as_u64().unwrap(), "{p}");
    }
}

/// `csd bench replay` says how long each of its two passes took.
#[test]
fn bench_replay_splits_its_time_between_the_two_passes() {
    let o = csd(&["bench", "replay", "--events", "4000", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let secs = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("no {k}: {v}"));
    let (wall, prescan, pass) = (secs("wall_s"), secs("prescan_s"), secs("replay_pass_s"));
    // Each pass measured in the child, the pre-scan no longer than the whole it is part of.
    assert!(prescan > 0.0 && pass > 0.0, "{v}");
    assert!(prescan < wall, "{v}");
    assert_eq!(v["events"], 4000, "{v}");
}

/// `csd bench all` runs each benchmark it names in a fresh process, `--runs` times, and reads
/// every figure out of each report; `--quick` judges none, and `--markdown` prints the
/// README's rows.
#[test]
fn bench_all_reads_every_figure_of_the_benchmarks_it_runs() {
    // Every benchmark but `ftl`, which takes minutes in a test build (its figures are read
    // from its report's type in a unit test).
    let o = csd(&[
        "bench", "all", "--quick", "--runs", "2", "--only", "tasks", "--only", "replay", "--only",
        "coalesce", "--only", "sweep", "--only", "cisc", "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["machine"]["logical_cpus"].as_u64().unwrap() >= 1, "{v}");
    assert!(v["memory_latency_ns"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(v["probe_bytes"], 8 << 20, "--quick chases less: {v}");
    let figures = v["figures"].as_array().unwrap();
    let ids: Vec<&str> = figures.iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "tasks.stats64",
            "tasks.checksum",
            "tasks.grep",
            "tasks.knn",
            "tasks.invocation",
            "replay.events",
            "coalesce.full",
            "sweep.speedup",
            "cisc.macro",
            "cisc.micro"
        ]
    );
    for f in figures {
        let values: Vec<f64> = f["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(values.len(), 2, "one value a run: {f}");
        assert!(values.iter().all(|&x| x > 0.0), "{f}");
        let (min, max) = (f["min"].as_f64().unwrap(), f["max"].as_f64().unwrap());
        assert!(values.iter().all(|&x| min <= x && x <= max), "{f}");
        assert!(f["runs_meeting"].is_null(), "--quick judges nothing: {f}");
    }

    let md = csd(&[
        "bench",
        "all",
        "--quick",
        "--runs",
        "1",
        "--only",
        "coalesce",
        "--markdown",
    ]);
    assert!(md.status.success(), "{}", stderr(&md));
    let text = stdout(&md);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("| what | `csd bench` | "), "{text}");
    assert!(lines[0].ends_with(" (1 run) | target | met |"), "{text}");
    assert!(
        lines[2].starts_with("| SIFT's 5.26 M-update coalescing set | `coalesce` | "),
        "{text}"
    );
    assert!(lines[2].ends_with(" s | < 1 s |  |"), "{text}");

    for bad in [&["--runs", "0"][..], &["--only", "everything"][..]] {
        let o = csd(&[&["bench", "all"][..], bad].concat());
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(bad[1]), "{}", stderr(&o));
    }
}

/// `csd persist backlog`: the same backlog checkpointed raw and coalesced; each run is saved,
/// and two runs compare configuration by configuration.
#[test]
fn persist_backlog_compares_raw_and_coalesced_replay() {
    let dir = scratch("persist-store");
    let st = dir.join("store");
    let st = st.to_str().unwrap();
    let o = csd(&[
        "persist", "backlog", "--scale", "0.005", "--json", "--store", st,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(out["workload"], "backlog");
    let v = &out["runs"];
    let (offload, coalesce) = (&v[0]["checkpoint"], &v[1]["checkpoint"]);
    assert_eq!(v[0]["config"], "offload");
    assert_eq!(offload["raw_blocks"], coalesce["raw_blocks"], "one backlog");
    assert_eq!(offload["surviving_blocks"], offload["raw_blocks"]);
    // unwrap: comparing Options would pass when a field is missing (None < Some).
    assert!(
        coalesce["surviving_blocks"].as_u64().unwrap()
            < offload["surviving_blocks"].as_u64().unwrap()
    );
    assert_eq!(coalesce["surviving_inodes"], 4);
    assert!(v[1]["checkpoint_ms"].as_f64().unwrap() < v[0]["checkpoint_ms"].as_f64().unwrap());
    let o = csd(&["runs", "show", "r1", "--json", "--store", st]);
    let stored: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(stored["kind"], "persist");
    assert_eq!(
        stored["designs"],
        serde_json::json!(["offload", "coalesce"])
    );
    assert_eq!(stored["report"], out, "stored exactly as --json prints it");
    let o = csd(&[
        "persist",
        "backlog",
        "--scale",
        "0.005",
        "--kind",
        "sequential-no-reuse",
        "--store",
        st,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = csd(&["runs", "diff", "r1", "r2", "--store", st]);
    let diff = stdout(&o);
    assert!(
        diff.contains("coalesce") && diff.contains("checkpoint_ms"),
        "{diff}"
    );
    let e = csd(&["persist", "backlog", "--scale", "2"]);
    assert!(
        stderr(&e).contains("--scale must be in (0, 1]"),
        "{}",
        stderr(&e)
    );
}

/// `csd persist online`: one point of the sweep, offload and coalesce, as JSON; bad input
/// is named.
#[test]
fn persist_online_reports_throughput_latency_and_cpu_cost() {
    let o = csd(&[
        "persist",
        "online",
        "--interval",
        "64",
        "--config",
        "offload,coalesce",
        "--scale",
        "0.008",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(out["workload"], "online");
    let v = &out["runs"];
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert_eq!(v[1]["config"], "coalesce");
    assert!(
        v[1]["kops"].as_f64().unwrap() > v[0]["kops"].as_f64().unwrap(),
        "{v}"
    );
    for r in v.as_array().unwrap() {
        assert!(r["fsync"]["p50_us"].as_f64().unwrap() > 0.0);
        assert!(r["cpu_cost"].as_f64().unwrap() > 0.0);
    }
    let e = csd(&["persist", "online", "--profile", "cosmos-plus"]);
    assert!(stderr(&e).contains("no [persist] table"), "{}", stderr(&e));
}

/// A trace's `isc` ops run their tasks as transactions over the replay's own files: an
/// output the op writes is created, failing tasks are rolled back and reported (one after
/// writing), and later ops find the files. (Replayed data is zeros — traces carry no
/// bytes — so the decompression's output stays empty.)
#[test]
fn replayed_isc_ops_run_task_transactions_on_the_replayed_files() {
    let dir = scratch("isc-replay");
    let trace = dir.join("isc.trace");
    let lines = [
        r#"{"format":"csd-trace","version":1,"source":"test","clock":"ns"}"#,
        r#"{"t":0,"pid":1,"op":"mkdir","path":"/d"}"#,
        r#"{"t":1000,"pid":1,"op":"open","path":"/d/run0","flags":"O_WRONLY|O_CREAT","ret":3}"#,
        r#"{"t":2000,"pid":1,"op":"write","fd":3,"len":65536,"ret":65536}"#,
        r#"{"t":3000,"pid":1,"op":"close","fd":3,"ret":0}"#,
        r#"{"t":4000,"pid":1,"op":"isc","task":"bitmap-decompress","files":[{"path":"/d/run0","mode":"r"},{"path":"/d/out","mode":"w"}]}"#,
        r#"{"t":5000,"pid":1,"op":"isc","task":"bitmap-decompress","files":[{"path":"/d/run0","mode":"r"}]}"#,
        r#"{"t":5500,"pid":1,"op":"isc","task":"hostile","files":[{"path":"/d/out","mode":"w"}],"args":"{\"do\":\"write-then-fail\"}"}"#,
        r#"{"t":6000,"pid":1,"op":"stat","path":"/d/out"}"#,
        r#"{"t":7000,"pid":1,"op":"isc","task":"checksum","files":[{"path":"/d/out","mode":"r"}]}"#,
    ];
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let store = dir.join("store");
    let o = csd(&[
        "replay",
        trace.to_str().unwrap(),
        "--design",
        "frag-s",
        "--store",
        store.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let d = &v["designs"][0];
    assert_eq!(d["isc"]["requests"], 4, "{d}");
    assert_eq!(d["isc"]["committed"], 2, "{d}");
    assert_eq!(d["isc"]["aborted"], 2, "{d}");
    let err = d["first_errors"]["isc"].as_str().unwrap();
    assert!(err.contains("register the compressed bitmap"), "{err}");
    assert!(d["first_errors"].get("stat").is_none(), "{d}");
    assert_eq!(d["latency"]["isc"]["failed"], 2);
    // The failing task's write reached the flash (as a delta the abort dropped).
    let internal = d["device"]["io"]["internal_bytes_written"]
        .as_u64()
        .unwrap();
    assert!(internal > 0, "{d}");
    assert!(d["latency"]["isc"]["p50_ns"].as_u64().unwrap() > 0);
}

#[test]
fn a_finished_run_is_printed_and_spooled_when_the_store_stays_busy() {
    let dir = test_data_home().join("busy");
    let _ = std::fs::remove_dir_all(&dir);
    let store = dir.join("runs");
    let held = csd_traces::store::RunStore::open(&store).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_csd"))
        .args([
            "replay",
            "ndp-mixed",
            "--design",
            "frag-s",
            "--json",
            "--store",
        ])
        .arg(&store)
        .env("CSD_STORE_WAIT", "0.5")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the report");
    assert_eq!(report["designs"][0]["design"], "frag-s");
    assert!(stderr(&out).contains("waiting up to"), "{}", stderr(&out));
    assert!(stderr(&out).contains("spooled to"), "{}", stderr(&out));
    assert!(held.list().unwrap().is_empty());
    drop(held);
    // The next csd to open the store stores the spooled run.
    let list = Command::new(env!("CARGO_BIN_EXE_csd"))
        .args(["runs", "list", "--json", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(list.status.success(), "{}", stderr(&list));
    assert!(
        stderr(&list).contains("stored the spooled run"),
        "{}",
        stderr(&list)
    );
    let runs: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 1);
    assert_eq!(runs[0]["designs"][0], "frag-s");
    let spool = csd_traces::store::spool_dir(&store);
    assert_eq!(
        std::fs::read_dir(spool).unwrap().count(),
        0,
        "spool emptied"
    );
}

#[test]
fn crashcheck_explores_both_mechanisms_and_catches_a_broken_order() {
    let out = csd(&["crashcheck", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let reports: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let reports = reports.as_array().unwrap();
    assert_eq!(reports.len(), 4, "txisc and sift's three configurations");
    for r in reports {
        assert_eq!(r["model"]["reorder"]["torn"], true, "{r}");
        assert!(r["points"].as_u64().unwrap() >= 10_000, "{r}");
        assert_eq!(r["violations"].as_u64().unwrap(), 0, "{r}");
    }
    assert_eq!(reports[0]["mechanism"], "txisc");
    for (mechanism, fault) in [
        ("txisc", "record-before-page"),
        ("sift", "ack-before-fence"),
    ] {
        let out = csd(&["crashcheck", mechanism, "--fault", fault, "--seeds", "5"]);
        assert_eq!(out.status.code(), Some(1), "{mechanism}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("first violation"), "{text}");
        assert!(text.contains("op ") && text.contains("→"), "{text}");
    }
}

/// `csd runs rerun` rebuilds a replay run from its stored spec and reproduces the report byte
/// for byte; it refuses a run whose trace changed, and one that keeps no spec, with exit 1.
#[test]
fn runs_rerun_reproduces_a_replay_and_refuses_what_it_cannot() {
    let dir = scratch("rerun");
    let store = dir.join("store");
    let store = store.to_str().unwrap();
    let cache = scratch("rerun-cache");
    // A trace that is neither stored nor a bundled sample: the rerun reads the file again.
    let trace = dir.join("t.trace");
    let mut text = std::fs::read_to_string(format!(
        "{}/traces/samples/grep.trace",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    text.push_str(
        "{\"t\":58475000,\"pid\":9602,\"op\":\"mkdir\",\"path\":\"/zz\",\"ret\":0,\"dur\":3000}\n",
    );
    std::fs::write(&trace, &text).unwrap();
    let t = trace.to_str().unwrap();
    let saved = csd_cached(&["replay", t, "--seed", "5", "--store", store], &cache);
    assert!(saved.status.success(), "{}", stderr(&saved));
    let again = csd_cached(&["runs", "rerun", "r1", "--store", store, "--json"], &cache);
    assert!(again.status.success(), "{}", stderr(&again));
    let v: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(v["identical"], true, "{v}");
    assert!(v["report_bytes"].as_u64().unwrap() > 1000);

    // The trace changed under the run: refused, naming it.
    text.push_str(
        "{\"t\":58476000,\"pid\":9602,\"op\":\"mkdir\",\"path\":\"/zy\",\"ret\":0,\"dur\":3000}\n",
    );
    std::fs::write(&trace, &text).unwrap();
    let changed = csd_cached(&["runs", "rerun", "r1", "--store", store], &cache);
    assert_eq!(changed.status.code(), Some(1));
    assert!(
        stderr(&changed).contains("gone or changed"),
        "{}",
        stderr(&changed)
    );

    // csd ndp on synthetic files and both csd persist workloads keep their specs too: each
    // run is saved as the next id and reruns to the same bytes.
    let runs: [&[&str]; 3] = [
        &["ndp", "--files", "3", "--app", "knn", "--cold"],
        &["persist", "backlog", "--scale", "0.01"],
        &[
            "persist",
            "online",
            "--interval",
            "64",
            "--scale",
            "0.01",
            "--window-s",
            "0.3",
        ],
    ];
    for (i, args) in runs.iter().enumerate() {
        let id = format!("r{}", i + 2);
        let saved = csd_cached(&[*args, &["--store", store][..]].concat(), &cache);
        assert!(saved.status.success(), "{args:?}: {}", stderr(&saved));
        let again = csd_cached(&["runs", "rerun", &id, "--store", store], &cache);
        assert!(again.status.success(), "{args:?}: {}", stderr(&again));
        assert!(
            stdout(&again).contains("byte-identical"),
            "{args:?}: {}",
            stdout(&again)
        );
    }

    // A kind of run that keeps no spec yet (a task run on imported files): refused with the
    // reason.
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("a.log"), "ERROR one\nok\n").unwrap();
    let task = csd_cached(
        &[
            "run",
            "grep",
            "--import",
            data.to_str().unwrap(),
            "--args",
            r#"{"pattern":"ERROR"}"#,
            "--store",
            store,
        ],
        &cache,
    );
    assert!(task.status.success(), "{}", stderr(&task));
    let no_spec = csd_cached(&["runs", "rerun", "r5", "--store", store], &cache);
    assert_eq!(no_spec.status.code(), Some(1));
    assert!(
        stderr(&no_spec).contains("keeps no system spec"),
        "{}",
        stderr(&no_spec)
    );

    // The experiments behind csd repro's lines keep theirs (here TxISC Fig. 3's, r6);
    // the table itself (r7) is their summary and keeps none.
    let repro = csd_cached(
        &[
            "repro",
            "txisc",
            "--only",
            "txisc.fig3.on",
            "--store",
            store,
        ],
        &cache,
    );
    assert!(repro.status.success(), "{}", stderr(&repro));
    let again = csd_cached(&["runs", "rerun", "r6", "--store", store], &cache);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stdout(&again).contains("byte-identical"),
        "{}",
        stdout(&again)
    );
    let table = csd_cached(&["runs", "rerun", "r7", "--store", store], &cache);
    assert_eq!(table.status.code(), Some(1));
}

/// TxISC's two commands save their runs like every experiment, and each reruns byte for
/// byte from its spec: txbench's flash-timing-off half included, its timing of the simulator
/// (this machine's) left out.
#[test]
fn txisc_commands_store_runs_that_rerun() {
    let dir = scratch("txisc-store");
    let store = dir.join("runs");
    let store = store.to_str().unwrap();
    let cache = scratch("txisc-store-cache");
    let bench = csd_cached(
        &[
            "txbench",
            "--writes",
            "50,100",
            "--qd",
            "1,8",
            "--requests",
            "300",
            "--file-size",
            "32m",
            "--cpu-requests",
            "300",
            "--repeat",
            "1",
            "--json",
            "--store",
            store,
        ],
        &cache,
    );
    assert!(bench.status.success(), "{}", stderr(&bench));
    assert!(
        stderr(&bench).contains("saved as run r1"),
        "{}",
        stderr(&bench)
    );
    let printed: serde_json::Value = serde_json::from_slice(&bench.stdout).unwrap();
    assert_eq!(printed["flash_timing_off"].as_array().unwrap().len(), 2 * 3);
    let apps = csd_cached(
        &[
            "txapps", "--app", "bfs", "--scale", "0.01", "--store", store,
        ],
        &cache,
    );
    assert!(apps.status.success(), "{}", stderr(&apps));
    assert!(
        stderr(&apps).contains("saved as run r2"),
        "{}",
        stderr(&apps)
    );
    let shown = csd_cached(&["runs", "show", "r1", "--store", store, "--json"], &cache);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let run: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let report = &run["report"];
    assert_eq!(report["flash_timing_off"].as_array().unwrap().len(), 0);
    assert_eq!(
        report["flash_timing_off_model"],
        printed["flash_timing_off_model"]
    );
    for id in ["r1", "r2"] {
        let again = csd_cached(&["runs", "rerun", id, "--store", store], &cache);
        assert!(again.status.success(), "{id}: {}", stderr(&again));
        assert!(
            stdout(&again).contains("byte-identical"),
            "{id}: {}",
            stdout(&again)
        );
    }
}

/// Issue 19's path for a researcher's own offload: a task crate built with `csd task build`,
/// kept with `csd task add`, then named by `csd ndp --app`, by an `ndp` op of a trace that
/// `csd replay` runs, and by `csd run`; every run is stored, keeps the module's id, and
/// `csd runs diff` compares two task runs stage by stage.
#[test]
fn a_users_own_task_reaches_ndp_replay_and_run() {
    let dir = scratch("own-task");
    let store = dir.join("store");
    let store = store.to_str().unwrap();
    let cache = scratch("own-task-cache");
    let repo = env!("CARGO_MANIFEST_DIR");
    let krate = dir.join("bytesum");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        format!(
            "[package]\nname = \"bytesum\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [lib]\ncrate-type = [\"cdylib\"]\n\n\
             [dependencies]\ncsd-sdk = {{ path = \"{repo}/sdk\" }}\n\n\
             [workspace]\n\n[profile.release]\nopt-level = 3\npanic = \"abort\"\n"
        ),
    )
    .unwrap();
    // The example tasks' lock file pins the SDK's dependencies to versions known to build.
    std::fs::copy(format!("{repo}/tasks/Cargo.lock"), krate.join("Cargo.lock")).unwrap();
    std::fs::write(
        krate.join("src/lib.rs"),
        r#"use csd_sdk::{serde_json, task, Context, ControlFlow, Deserialize, Result};

/// Arguments derived with the SDK's own serde: the crate depends on nothing else.
#[derive(Deserialize)]
#[serde(crate = "csd_sdk::serde")]
struct Args {
    #[serde(default)]
    stop_after: Option<u64>,
}

#[task]
fn run(ctx: Context) -> Result<()> {
    let args: Args = ctx.args_json()?;
    let (mut files, mut sum, mut seen) = (0u64, 0u64, 0u64);
    for file in ctx.files() {
        files += 1;
        file.try_for_each_chunk(64 << 10, |_, chunk| {
            for b in chunk {
                sum = sum.wrapping_mul(31).wrapping_add(u64::from(*b));
            }
            seen += chunk.len() as u64;
            Ok(match args.stop_after {
                Some(n) if seen >= n => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            })
        })?;
    }
    csd_sdk::warn!("read {seen} bytes");
    csd_sdk::ret_json(&serde_json::json!({ "files": files, "sum": sum, "seen": seen }))
}
"#,
    )
    .unwrap();
    // A target directory that outlives the test, so a second run builds nothing.
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("own-task-target");
    let built = Command::new(env!("CARGO_BIN_EXE_csd"))
        .args(["task", "build"])
        .arg(&krate)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", stderr(&built));
    let wasm = stdout(&built).trim().to_string();
    assert!(wasm.ends_with("bytesum.wasm"), "{wasm}");

    // Kept by name; a built-in's name is refused.
    let add = csd_cached(&["task", "add", "bytesum", &wasm, "--store", store], &cache);
    assert!(add.status.success(), "{}", stderr(&add));
    let clash = csd_cached(&["task", "add", "grep", &wasm, "--store", store], &cache);
    assert_eq!(clash.status.code(), Some(1));
    assert!(stderr(&clash).contains("built-in"), "{}", stderr(&clash));
    let list = csd_cached(&["tasks", "--json", "--store", store], &cache);
    let tasks: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let ours = tasks
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "bytesum")
        .expect("csd tasks lists the stored task");
    assert_eq!(ours["origin"], "stored");
    let id = ours["id"].as_str().unwrap().to_string();

    // 1. csd ndp --app bytesum (r1): every design ran it, and the run names its module.
    let ndp = csd_cached(
        &["ndp", "--app", "bytesum", "--files", "8", "--store", store],
        &cache,
    );
    assert!(ndp.status.success(), "{}", stderr(&ndp));
    let r1 = show(store, "r1", &cache);
    assert_eq!(r1["report"]["app"], "bytesum");
    assert_eq!(
        r1["report"]["points"][0]["designs"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    assert_eq!(r1["spec"]["tasks"][0]["id"], id.as_str(), "{r1}");

    // 2. A trace whose ndp op names it, replayed (r2): breakdowns, no skipped op.
    let trace = dir.join("own.trace");
    let mut lines = vec![
        r#"{"format":"csd-trace","version":1,"source":"test","clock":"ns"}"#.to_string(),
        r#"{"t":0,"pid":1,"op":"mkdir","path":"/d"}"#.to_string(),
    ];
    for i in 0..4 {
        lines.push(format!(
            r#"{{"t":{},"pid":1,"op":"open","path":"/d/f{i}","flags":"O_WRONLY|O_CREAT","ret":3}}"#,
            10 + 10 * i
        ));
        lines.push(format!(
            r#"{{"t":{},"pid":1,"op":"write","fd":3,"len":65536,"ret":65536}}"#,
            11 + 10 * i
        ));
        lines.push(format!(
            r#"{{"t":{},"pid":1,"op":"close","fd":3}}"#,
            12 + 10 * i
        ));
    }
    // Ten seconds later: LightFS's periodic updater has indexed the new files by then (an
    // earlier request sees the directory as it was last synchronised: not there yet).
    lines.push(
        r#"{"t":10000000000,"pid":1,"op":"ndp","task":"bytesum","paths":["/d"]}"#.to_string(),
    );
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let check = csd_cached(
        &["trace", "check", trace.to_str().unwrap(), "--store", store],
        &cache,
    );
    assert!(check.status.success(), "{}", stderr(&check));
    let replay = csd_cached(
        &[
            "replay",
            trace.to_str().unwrap(),
            "--mode",
            "timed",
            "--store",
            store,
        ],
        &cache,
    );
    assert!(replay.status.success(), "{}", stderr(&replay));
    let r2 = show(store, "r2", &cache);
    for d in r2["report"]["designs"].as_array().unwrap() {
        assert_eq!(d["ndp"]["requests"], 1, "{d}");
        assert!(d["skipped"].as_object().unwrap().is_empty(), "{d}");
    }
    assert_eq!(r2["spec"]["tasks"][0]["reference"], "bytesum");

    // 3. Two task runs (r3 on the device, r4 host-only), compared stage by stage.
    let data = dir.join("data.bin");
    std::fs::write(&data, vec![7u8; 256 << 10]).unwrap();
    for extra in [&[][..], &["--on-host", "--profile", "daisyplus-femu"][..]] {
        let mut args = vec!["run", "bytesum", "--import", data.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--store", store]);
        let o = csd_cached(&args, &cache);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let diff = csd_cached(
        &["runs", "diff", "r3", "r4", "--json", "--store", store],
        &cache,
    );
    assert!(diff.status.success(), "{}", stderr(&diff));
    let d: serde_json::Value = serde_json::from_slice(&diff.stdout).unwrap();
    let metrics: Vec<&str> = d[0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["metric"].as_str().unwrap())
        .collect();
    for stage in ["read_file_ns", "compute_ns", "dma_ns", "others_ns"] {
        assert!(metrics.contains(&stage), "{metrics:?}");
    }

    // The SDK's early stop and levelled logs: told to stop after 64 KiB of the 256 KiB
    // file, the task reads one chunk and says so at warn level.
    let stop = csd_cached(
        &[
            "run",
            "bytesum",
            "--import",
            data.to_str().unwrap(),
            "--args",
            r#"{"stop_after":65536}"#,
            "--json",
            "--store",
            store,
        ],
        &cache,
    );
    assert!(stop.status.success(), "{}", stderr(&stop));
    let v: serde_json::Value = serde_json::from_slice(&stop.stdout).unwrap();
    assert_eq!(v["result"]["seen"], 65536, "{v}");
    assert_eq!(v["logs"][0], "[warn] read 65536 bytes", "{v}");
    assert!(
        stderr(&stop).contains("read 65536 bytes"),
        "warnings show without RUST_LOG"
    );
    let full = show(store, "r3", &cache);
    assert_eq!(full["report"]["result"]["seen"], 256 << 10);
    // The ndp run reruns from its spec with the module it recorded, even after the name
    // moves to another module.
    let moved = csd_cached(
        &[
            "task",
            "add",
            "bytesum",
            &format!("{repo}/tests/hostile/spin.wat"),
            "--store",
            store,
        ],
        &cache,
    );
    assert!(moved.status.success(), "{}", stderr(&moved));
    let again = csd_cached(&["runs", "rerun", "r1", "--store", store], &cache);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stdout(&again).contains("byte-identical"),
        "{}",
        stdout(&again)
    );
}

fn show(store: &str, id: &str, cache: &std::path::Path) -> serde_json::Value {
    let o = csd_cached(&["runs", "show", "--json", id, "--store", store], cache);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `--no-store` keeps csd away from the store entirely: a trace kept there is not found.
#[test]
fn no_store_also_stops_reading_stored_traces() {
    let dir = scratch("no-store-read");
    let t = dir.join("kept-only.trace");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/traces/samples/grep.trace"),
        &t,
    )
    .unwrap();
    let store = dir.join("store");
    let st = store.to_str().unwrap();
    let add = csd(&["trace", "add", t.to_str().unwrap(), "--store", st]);
    assert!(add.status.success(), "{}", stderr(&add));
    std::fs::remove_file(&t).unwrap();
    // By its name, without the suffix, from the store.
    let found = csd(&["replay", "kept-only", "--store", st, "--json"]);
    assert!(found.status.success(), "{}", stderr(&found));
    let not = csd(&["replay", "kept-only", "--no-store"]);
    assert_eq!(not.status.code(), Some(1));
    assert!(
        stderr(&not).contains("no trace 'kept-only'"),
        "{}",
        stderr(&not)
    );
}

/// `csd fusion` compares the five designs from the profile's costs, deterministically; the
/// run is stored and reruns byte for byte; bad input is named and runs nothing.
#[test]
fn fusion_compares_the_designs_and_refuses_bad_input() {
    let dir = scratch("fusion");
    let store = dir.join("store");
    let store = store.to_str().unwrap();
    let args = [
        "fusion",
        "--workload",
        "read-modify-write",
        "--threads",
        "1,4",
        "--ops",
        "200",
        "--json",
    ];
    let first = csd(&[&args[..], &["--store", store]].concat());
    assert!(first.status.success(), "{}", stderr(&first));
    let again = csd(&[&args[..], &["--no-store"]].concat());
    assert_eq!(
        first.stdout, again.stdout,
        "the same spec gives the same report"
    );
    let r: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    let curves = r["curves"].as_array().unwrap();
    assert_eq!(
        curves.len(),
        7,
        "3 host designs, firmware and fusion at two speeds"
    );
    let at = |design: &str, speed: &str, k: usize| {
        curves
            .iter()
            .find(|c| c["design"] == design && c["speed"] == speed)
            .unwrap()["points"][k]["ops_per_sec"]
            .as_f64()
            .unwrap()
    };
    // One round trip and no system calls: fusion leads the kernel and firmware designs.
    for other in ["kernel-dax", "nova", "firmware"] {
        assert!(
            at("fusion", "fast", 0) > at(other, "fast", 0),
            "fusion vs {other}"
        );
    }
    // Slow device cores cost fusion throughput.
    for k in 0..2 {
        assert!(at("fusion", "slow", k) < at("fusion", "fast", k));
    }
    let rerun = csd(&["runs", "rerun", "r1", "--store", store]);
    assert!(
        stdout(&rerun).contains("byte-identical"),
        "{}",
        stdout(&rerun)
    );

    let bad: &[(&[&str], &str)] = &[
        (
            &["fusion", "--threads", "0"],
            "thread counts must be 1 to 64",
        ),
        (
            &["fusion", "--threads", "65"],
            "thread counts must be 1 to 64",
        ),
        (&["fusion", "--ops", "0"], "ops per thread"),
        (&["fusion", "--design", "ext5"], "unknown design 'ext5'"),
        (&["fusion", "--profile", "cosmos-plus"], "no [fusion] table"),
    ];
    for (args, message) in bad {
        let o = csd(&[&args[..], &["--no-store"]].concat());
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?} printed a result");
    }
}

/// FusionFS Fig. 3 at 16 threads: fusion ahead of every other design on append-CRC-write
/// (it writes each record once, so its 4 device cores bind it above the medium's limit for
/// the host designs' two writes), level with the best on read-modify-write (every design
/// meets the medium there), the gain over the best printed; slow device cores narrow it.
#[test]
fn fusion_leads_at_16_threads_on_append_crc_write_and_is_level_on_rmw() {
    for (workload, least_gain) in [("append-crc-write", 1.1), ("read-modify-write", 0.99)] {
        let args = [
            "fusion",
            "--workload",
            workload,
            "--threads",
            "16",
            "--ops",
            "200",
            "--no-store",
        ];
        let out = csd(&[&args[..], &["--json"]].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let ops = |c: &serde_json::Value| c["points"][0]["ops_per_sec"].as_f64().unwrap();
        let curves = r["curves"].as_array().unwrap();
        let fusion = curves
            .iter()
            .find(|c| c["design"] == "fusion" && c["speed"] == "fast")
            .map(ops)
            .unwrap();
        // Host designs run at "fast"; the device designs' slow curves are compared apart.
        for c in curves
            .iter()
            .filter(|c| c["speed"] == "fast" && c["design"] != "fusion")
        {
            assert!(
                fusion >= least_gain * ops(c),
                "{workload}: fusion {fusion} vs {c}"
            );
        }
        let text = stdout(&csd(&args));
        let gain = |speed: &str| -> f64 {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("at 16 threads: fusion{speed} / best other")))
                .unwrap_or_else(|| panic!("no gain line for fusion{speed}:\n{text}"));
            line.rsplit(' ')
                .next()
                .unwrap()
                .trim_end_matches('x')
                .parse()
                .unwrap()
        };
        assert!(gain("") >= least_gain, "{workload}:\n{text}");
        assert!(gain("-slow") < gain(""), "{workload}:\n{text}");
    }
}

#[test]
fn crashcheck_fusion_checks_both_grains_and_catches_a_broken_order() {
    let out = csd(&["crashcheck", "fusion", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let points =
        r["macro_tx"]["points"].as_u64().unwrap() + r["micro_tx"]["points"].as_u64().unwrap();
    assert!(points >= 10_000, "{points} crash states");
    assert_eq!(r["macro_tx"]["violations"], 0);
    assert_eq!(r["micro_tx"]["violations"], 0);
    assert!(
        r["micro_tx"]["recovery"]["rolled_forward"]
            .as_u64()
            .unwrap()
            > 0
    );
    for fault in ["done-before-data", "apply-before-commit"] {
        let o = csd(&["crashcheck", "fusion", "--fault", fault, "--seeds", "3"]);
        assert_eq!(o.status.code(), Some(1), "{fault}: {}", stderr(&o));
        assert!(stdout(&o).contains("first violation"), "{}", stdout(&o));
    }
    let o = csd(&["crashcheck", "fusion", "--model", "reorder"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("in order"), "{}", stderr(&o));
}

/// `csd trace fuse` of the bundled SQLite recording is deterministic, and `csd replay` of
/// the result sets the fused replay beside the unfused one: fewer round trips, less time,
/// the same files. Bad input is named.
#[test]
fn trace_fuse_is_deterministic_and_replays_against_the_unfused_program() {
    let dir = scratch("fuse");
    let (a, b) = (dir.join("a.trace"), dir.join("b.trace"));
    let fuse = |out: &std::path::Path| {
        csd(&[
            "trace",
            "fuse",
            "sqlite-inserts",
            "--json",
            "-o",
            out.to_str().unwrap(),
        ])
    };
    let (ra, rb) = (fuse(&a), fuse(&b));
    assert!(ra.status.success(), "{}", stderr(&ra));
    assert_eq!(ra.stderr, rb.stderr, "the same report");
    assert_eq!(
        std::fs::read(&a).unwrap(),
        std::fs::read(&b).unwrap(),
        "byte-identical traces"
    );
    let report: serde_json::Value = serde_json::from_slice(&ra.stderr).unwrap();
    let fused = report["ops"]["write-sync"].as_u64().unwrap();
    assert!(fused > 0, "a database's commits are fusible: {report}");
    assert_eq!(
        report["events_in"].as_u64().unwrap() - report["events_out"].as_u64().unwrap(),
        report["events_fused"]["write-sync"].as_u64().unwrap() - fused,
        "each op replaces its events"
    );

    let replay = csd(&[
        "replay",
        a.to_str().unwrap(),
        "--design",
        "firmware,fusion",
        "--json",
        "--no-store",
    ]);
    assert!(replay.status.success(), "{}", stderr(&replay));
    let r: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(r["profile"], "optane-csd", "the designs' default profile");
    let (unfused, whole) = (&r["designs"][0], &r["designs"][1]);
    assert_eq!(
        (unfused["design"].as_str(), whole["design"].as_str()),
        (Some("firmware"), Some("fusion"))
    );
    assert_eq!(whole["fusion"]["cisc_ops"].as_u64(), Some(fused));
    assert_eq!(unfused["fusion"]["cisc_ops"].as_u64(), Some(0));
    assert!(whole["fusion"]["requests"].as_u64() < unfused["fusion"]["requests"].as_u64());
    assert!(whole["duration_ns"].as_u64() < unfused["duration_ns"].as_u64());
    assert_eq!(
        whole["fusion"]["contents_sha256"],
        unfused["fusion"]["contents_sha256"]
    );
    assert!(
        whole["first_errors"].as_object().unwrap().is_empty(),
        "{}",
        whole["first_errors"]
    );
    let text = csd(&[
        "replay",
        a.to_str().unwrap(),
        "--design",
        "firmware,fusion",
        "--no-store",
    ]);
    assert!(
        stdout(&text).contains("final contents: the same, byte for byte"),
        "{}",
        stdout(&text)
    );

    let broken = dir.join("broken.trace");
    std::fs::write(
        &broken,
        "{\"format\":\"csd-trace\",\"version\":1}\n{\"t\":1,\"pid\":1,\"op\":\"cisc\",\"pattern\":\"write-sync\",\"ops\":[{\"t\":1,\"pid\":1,\"op\":\"mkdir\",\"path\":\"/d\"}]}\n",
    )
    .unwrap();
    let bad: &[(&[&str], &str)] = &[
        (
            &["trace", "fuse", "/no/such.trace"],
            "no trace '/no/such.trace'",
        ),
        (&["trace", "fuse", broken.to_str().unwrap()], "line 2"),
        (
            &[
                "replay",
                broken.to_str().unwrap(),
                "--design",
                "fusion",
                "--no-store",
            ],
            "is a mkdir",
        ),
        (
            &[
                "replay",
                "sqlite",
                "--design",
                "fusion",
                "--profile",
                "cosmos-plus",
                "--no-store",
            ],
            "no [fusion] table",
        ),
    ];
    for (args, message) in bad {
        let o = csd(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
    }
}

/// `csd ispfs query` reports both solutions per size with the real `search` stage on the
/// host, is deterministic, is saved and reruns byte for byte; bad input is named.
#[test]
fn ispfs_query_compares_the_engine_with_software_and_refuses_bad_input() {
    let dir = scratch("ispfs");
    let store = dir.join("store");
    let store = store.to_str().unwrap();
    let args = ["ispfs", "query", "--sizes", "20k,300k", "--json"];
    let first = csd(&[&args[..], &["--store", store]].concat());
    assert!(first.status.success(), "{}", stderr(&first));
    let again = csd(&[&args[..], &["--no-store"]].concat());
    assert_eq!(
        first.stdout, again.stdout,
        "the same spec gives the same report"
    );
    let r: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    let points = r["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for p in points {
        let (isp, sw) = (&p["isp"], &p["software"]);
        assert_eq!(isp["found"], sw["found"], "both count the same words");
        assert!(isp["found"][0].as_u64().unwrap() > 0);
        assert!(isp["mb_per_sec"].as_f64().unwrap() > 5.0 * sw["mb_per_sec"].as_f64().unwrap());
        assert!(isp["host_cpu_share"].as_f64().unwrap() < 0.03);
        assert!(sw["host_memory_bytes"].as_u64().unwrap() >= p["bytes"].as_u64().unwrap());
    }
    // The software's requests grow with the file; ISP's stay a handful of calls.
    let sw_reqs = |i: usize| points[i]["software"]["io_requests"].as_u64().unwrap();
    assert!(sw_reqs(1) > sw_reqs(0));
    assert!(points[1]["isp"]["io_requests"].as_u64().unwrap() <= 5);
    let rerun = csd(&["runs", "rerun", "r1", "--store", store]);
    assert!(
        stdout(&rerun).contains("byte-identical"),
        "{}",
        stdout(&rerun)
    );
    let table = csd(&["ispfs", "query", "--sizes", "20k", "--no-store"]);
    assert!(
        stdout(&table).contains("mean speed: ISP"),
        "{}",
        stdout(&table)
    );

    let bad: &[(&[&str], &str)] = &[
        (&["ispfs", "query", "--sizes", "0"], "size '0'"),
        (&["ispfs", "query", "--sizes", "1g"], "size '1g'"),
        (&["ispfs", "query", "--words", "abcde"], "keyword 'abcde'"),
        (
            &["ispfs", "query", "--words", "a,b,c,d,e"],
            "1 to 4 keywords",
        ),
        (
            &["ispfs", "query", "--profile", "cosmos-plus"],
            "no [isp] table",
        ),
        (&["ispfs", "query", "--read-size", "0"], "read size"),
    ];
    for (args, message) in bad {
        let o = csd(&[&args[..], &["--no-store"]].concat());
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?} printed a result");
    }
}

/// `csd ispfs iozone` compares ISPFS with the EXT4-like path per test and size,
/// deterministically, is saved and reruns; bad sizes are named.
#[test]
fn ispfs_iozone_compares_both_paths_and_refuses_bad_sizes() {
    let dir = scratch("iozone");
    let store = dir.join("store");
    let store = store.to_str().unwrap();
    let args = [
        "ispfs",
        "iozone",
        "--files",
        "1m",
        "--records",
        "4k,1m",
        "--json",
    ];
    let first = csd(&[&args[..], &["--store", store]].concat());
    assert!(first.status.success(), "{}", stderr(&first));
    let again = csd(&[&args[..], &["--no-store"]].concat());
    assert_eq!(first.stdout, again.stdout);
    let r: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    let points = r["points"].as_array().unwrap();
    assert_eq!(
        points.len(),
        16,
        "4 tests at 2 record sizes through 2 interfaces"
    );
    assert_eq!(
        r["spec"]["interfaces"],
        serde_json::json!(["posix", "mmap"])
    );
    let faults = |via: &str| {
        points
            .iter()
            .filter(|p| p["interface"] == via)
            .map(|p| p["ext4"]["faults"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(faults("posix"), 0);
    assert!(faults("mmap") > 0);
    for p in points {
        let (i, e) = (
            p["ispfs_mb_per_sec"].as_f64().unwrap(),
            p["ext4_mb_per_sec"].as_f64().unwrap(),
        );
        if p["test"] == "reread" || p["test"] == "random-read" {
            assert!(i > e, "ISPFS reads skip the page cache: {p}");
        }
    }
    let rerun = csd(&["runs", "rerun", "r1", "--store", store]);
    assert!(
        stdout(&rerun).contains("byte-identical"),
        "{}",
        stdout(&rerun)
    );
    // On the PCM board ISPFS's writes wait for the PCM's programs; over DRAM (§5.1's
    // set-up, the default) they do not.
    let on_pcm = csd(&[&args[..], &["--medium", "pcm", "--no-store"]].concat());
    assert!(on_pcm.status.success(), "{}", stderr(&on_pcm));
    let on_pcm: serde_json::Value = serde_json::from_slice(&on_pcm.stdout).unwrap();
    assert_eq!(r["spec"]["medium"], "dram");
    assert_eq!(on_pcm["spec"]["medium"], "pcm");
    let rewrite = |r: &serde_json::Value| {
        r["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["test"] == "rewrite" && p["record_bytes"] == 4096)
            .map(|p| p["ispfs_mb_per_sec"].as_f64().unwrap())
            .unwrap()
    };
    assert!(rewrite(&r) > 10.0 * rewrite(&on_pcm));
    let tape = csd(&["ispfs", "iozone", "--medium", "tape", "--no-store"]);
    assert_eq!(tape.status.code(), Some(2));
    assert!(stderr(&tape).contains("'tape'"), "{}", stderr(&tape));
    let dax = csd(&["ispfs", "iozone", "--interface", "dax", "--no-store"]);
    assert_eq!(dax.status.code(), Some(2));
    assert!(stderr(&dax).contains("posix or mmap"), "{}", stderr(&dax));
    let bad: &[(&[&str], &str)] = &[
        (&["ispfs", "iozone", "--files", "1g"], "size '1g'"),
        (&["ispfs", "iozone", "--records", "0"], "size '0'"),
        (
            &["ispfs", "iozone", "--files", "4k", "--records", "8k"],
            "(file, record) pairs",
        ),
        (
            &["ispfs", "iozone", "--profile", "optane-csd"],
            "no [isp] table",
        ),
    ];
    for (args, message) in bad {
        let o = csd(&[&args[..], &["--no-store"]].concat());
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
    }
}

/// The bundled ISPFS sample replays on `--design ispfs` (default profile pcm-zynq): its
/// command-file writes run as ISP instructions, the refused ones are counted, host reads
/// during the query wait for the engine, and the replay is deterministic.
#[test]
fn the_ispfs_sample_runs_its_instructions_through_command_files() {
    let args = [
        "replay",
        "ispfs-query",
        "--design",
        "ispfs",
        "--json",
        "--no-store",
    ];
    let a = csd(&args);
    assert!(a.status.success(), "{}", stderr(&a));
    assert_eq!(a.stdout, csd(&args).stdout, "two replays differ");
    let v: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(v["profile"], "pcm-zynq");
    let d = &v["designs"][0];
    assert_eq!(d["ops"], 1173);
    assert!(d["first_errors"].as_object().unwrap().is_empty(), "{d}");
    let isp = &d["isp"];
    // A word query over 4 MiB, a CRC-32 stage over 64 KiB, and two refused.
    assert_eq!(isp["instructions"], 4);
    assert_eq!(isp["refused"], 2);
    assert_eq!(isp["bytes_compared"], (4 << 20) + (64 << 10));
    assert!(isp["engine_ns"].as_u64().unwrap() > 40_000_000, "{isp}");
    assert!(isp["host_wait_ns"].as_u64().unwrap() > 0, "{isp}");
    // A profile without the engine is refused by name.
    let o = csd(&[
        "replay",
        "ispfs-query",
        "--design",
        "ispfs",
        "--profile",
        "cosmos-plus",
        "--no-store",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("[isp] table"), "{}", stderr(&o));
}

/// A replay's summary says which ops the model refused and why: without it, a design whose
/// requests all failed would only show an empty row.
#[test]
fn the_replay_summary_names_the_ops_that_failed() {
    let dir = scratch("failed-ops");
    let trace = dir.join("t.trace");
    std::fs::write(
        &trace,
        concat!(
            r#"{"format":"csd-trace","version":1,"clock":"ns"}"#,
            "\n",
            r#"{"t":0,"pid":1,"op":"ndp","task":"stats64","paths":["/d/a"],"sizes":[16384]}"#,
            "\n",
            r#"{"t":1000,"pid":1,"op":"mkdir","path":"/twice"}"#,
            "\n",
            r#"{"t":2000,"pid":1,"op":"mkdir","path":"/twice"}"#,
            "\n",
        ),
    )
    .unwrap();
    let o = csd(&[
        "replay",
        trace.to_str().unwrap(),
        "--design",
        "frag-s,lightfs",
        "--no-store",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for design in ["frag-s", "lightfs"] {
        let line = format!("{design}: 1 mkdir op(s) failed; the first: ");
        let said = out.lines().find(|l| l.starts_with(&line));
        let said = said.unwrap_or_else(|| panic!("no '{line}' in:\n{out}"));
        assert!(said.contains("/twice"), "{said}");
    }
}

/// A program that removes and renames files between two scans: LightFS's index follows
/// `unlink`, `rename` and `rmdir` (its `.ndpmeta` goes with an emptied directory), so it
/// offers the scans the files frag-s finds, and refuses nothing the file system allows.
/// Writes `trace` into `dir`, replays it with `args` (and `--no-store --json`), removes
/// `dir`, and returns the report, after checking that the replay succeeded.
fn replay_json(dir: &std::path::Path, trace: &str, args: &[&str]) -> serde_json::Value {
    let path = dir.join("t.trace");
    std::fs::write(&path, trace).unwrap();
    let mut all = vec!["replay", path.to_str().unwrap(), "--no-store", "--json"];
    all.extend_from_slice(args);
    let o = csd(&all);
    let _ = std::fs::remove_dir_all(dir);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn lightfs_follows_unlink_rename_and_rmdir() {
    let dir = scratch("lightfs-unlink");
    let mut trace = String::from("{\"format\":\"csd-trace\",\"version\":1,\"clock\":\"ns\"}\n");
    let mut t = 0;
    let mut ev = |op: String| {
        trace.push_str(&format!("{{\"t\":{t},\"pid\":1,{op}}}\n"));
        t += 1000;
    };
    ev(r#""op":"mkdir","path":"/d""#.into());
    ev(r#""op":"mkdir","path":"/d/sub""#.into());
    for i in 0..4 {
        ev(format!(
            r#""op":"open","path":"/d/f{i}","flags":"O_WRONLY|O_CREAT","ret":3"#
        ));
        ev(r#""op":"write","fd":3,"len":16384,"ret":16384"#.into());
        ev(r#""op":"fsync","fd":3,"ret":0"#.into());
        ev(r#""op":"close","fd":3,"ret":0"#.into());
    }
    // A file closed in /d/sub has LightFS index it (its `.ndpmeta`), and goes again.
    ev(r#""op":"open","path":"/d/sub/x","flags":"O_WRONLY|O_CREAT","ret":3"#.into());
    ev(r#""op":"close","fd":3,"ret":0"#.into());
    let scan = r#""op":"ndp","task":"stats64","paths":["/d"]"#;
    ev(scan.into());
    ev(r#""op":"unlink","path":"/d/sub/x""#.into());
    ev(r#""op":"unlink","path":"/d/f1""#.into());
    ev(r#""op":"rename","path":"/d/f2","to":"/d/sub/f2""#.into());
    ev(scan.into());
    ev(r#""op":"rename","path":"/d/sub/f2","to":"/d/g2""#.into());
    ev(r#""op":"rmdir","path":"/d/sub""#.into());
    ev(scan.into());
    let r = replay_json(&dir, &trace, &["--design", "frag-s,lightfs"]);
    for d in r["designs"].as_array().unwrap() {
        assert_eq!(d["first_errors"], serde_json::json!({}), "{}", d["design"]);
        // 4 files, then 2 (f1 gone, f2 moved down), then 3 (f2 back as g2).
        assert_eq!(d["ndp"]["requests"], 3, "{}", d["design"]);
        assert_eq!(d["ndp"]["files"], 9, "{}", d["design"]);
    }
}

/// A scan of files the program wrote and fsynced a moment ago: their data is on flash, but
/// their inodes wait in the journal, so FSR (which reads the on-flash metadata) reads them
/// stale; a file written and not synced is stale for frag-s too; LightFS reads a file only
/// once its updater has synced it. 40 s later kjournald and the flusher have written everything home, except the inode of
/// the file the flusher has only just written back.
#[test]
fn the_replay_counts_files_the_device_read_older_than_the_host_had_them() {
    let dir = scratch("stale-reads");
    let mut trace = String::from("{\"format\":\"csd-trace\",\"version\":1,\"clock\":\"ns\"}\n");
    let mut t = 0u64;
    let mut ev = |op: &str, at: Option<u64>| {
        t = at.unwrap_or(t + 1000);
        trace.push_str(&format!("{{\"t\":{t},\"pid\":1,{op}}}\n"));
    };
    ev(r#""op":"mkdir","path":"/d""#, None);
    for i in 0..3 {
        ev(
            &format!(r#""op":"open","path":"/d/f{i}","flags":"O_WRONLY|O_CREAT","ret":3"#),
            None,
        );
        ev(r#""op":"write","fd":3,"len":16384,"ret":16384"#, None);
        if i < 2 {
            ev(r#""op":"fsync","fd":3,"ret":0"#, None);
        }
        ev(r#""op":"close","fd":3,"ret":0"#, None);
    }
    let scan = r#""op":"ndp","task":"stats64","paths":["/d"]"#;
    ev(scan, None);
    ev(scan, Some(40_000_000_000));
    let r = replay_json(
        &dir,
        &trace,
        &["--design", "frag-s,fsr,lightfs", "--mode", "timed"],
    );
    let ndp = |design: &str| {
        let d = r["designs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["design"] == design)
            .unwrap();
        let n = &d["ndp"];
        (
            n["files"].as_u64().unwrap(),
            n["stale_files"].as_u64().unwrap(),
        )
    };
    assert_eq!(
        ndp("frag-s"),
        (6, 1),
        "first scan: f2's data is in the page cache"
    );
    assert_eq!(
        ndp("fsr"),
        (6, 3 + 1),
        "first scan: no new inode is home; then f2's"
    );
    // LightFS leaves f2 out of the first scan: its updater has not synced it yet.
    assert_eq!(ndp("lightfs"), (2 + 3, 0));
}

/// A traced `sync` writes back every dirty page, commits the journal and writes every
/// metadata block home: a scan after it reads nothing stale, under any design.
#[test]
fn a_replayed_sync_leaves_nothing_for_the_device_to_read_stale() {
    let dir = scratch("sync-op");
    let mut trace = String::from("{\"format\":\"csd-trace\",\"version\":1,\"clock\":\"ns\"}\n");
    let mut t = 0;
    let mut ev = |op: &str| {
        t += 1000;
        trace.push_str(&format!("{{\"t\":{t},\"pid\":1,{op}}}\n"));
    };
    ev(r#""op":"mkdir","path":"/d""#);
    for i in 0..3 {
        ev(&format!(
            r#""op":"open","path":"/d/f{i}","flags":"O_WRONLY|O_CREAT","ret":3"#
        ));
        ev(r#""op":"write","fd":3,"len":16384,"ret":16384"#);
        ev(r#""op":"close","fd":3,"ret":0"#);
    }
    ev(r#""op":"sync""#);
    ev(r#""op":"ndp","task":"stats64","paths":["/d"]"#);
    let r = replay_json(&dir, &trace, &["--design", "frag-s,fsr"]);
    for d in r["designs"].as_array().unwrap() {
        assert_eq!(d["ndp"]["files"], 3, "{}", d["design"]);
        assert_eq!(d["ndp"]["stale_files"], 0, "{}", d["design"]);
        let j = &d["journal"];
        assert_eq!(j["commits"], 1, "{}", d["design"]);
        assert!(j["checkpointed"].as_u64().unwrap() >= 3, "{j}");
        assert_eq!(d["latency"]["sync"]["count"], 1);
    }
}

/// `csd bench sweep` times `csd sweep` on one worker and on two, and says what it measured
/// and where the parallel run's time goes.
#[test]
fn bench_sweep_times_both_worker_counts() {
    let o = csd(&[
        "bench", "sweep", "--files", "2", "--size", "4k", "--jobs", "2", "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["points"], 16, "{v}");
    assert_eq!(v["jobs"], 2, "{v}");
    let (one, two) = (
        v["serial_s"].as_f64().unwrap(),
        v["parallel_s"].as_f64().unwrap(),
    );
    assert!(one > 0.0 && two > 0.0, "{v}");
    assert!(
        (v["speedup"].as_f64().unwrap() - one / two).abs() < 1e-9,
        "{v}"
    );
    // The breakdown: one worker's time is its fixed part and 16 points; two workers with
    // no contention would pay the fixed part side by side and 8 points each.
    let (point, fixed) = (
        v["per_point_s"].as_f64().unwrap(),
        v["fixed_s"].as_f64().unwrap(),
    );
    assert!(point >= 0.0 && fixed >= 0.0, "{v}");
    assert!(
        (v["uncontended_parallel_s"].as_f64().unwrap() - (fixed + 8.0 * point)).abs() < 1e-9,
        "{v}"
    );
    let bad = csd(&["bench", "sweep", "--size", "lots"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("lots"), "{}", stderr(&bad));
}

/// `CSD_PERFMAP=1` makes wasmtime name a task's compiled functions for `perf` in
/// `/tmp/perf-PID.map`, and changes nothing the run reports.
#[test]
fn perfmap_names_a_tasks_functions_and_changes_no_result() {
    let input = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let args = ["run", "stats64", "--import", input, "--no-store", "--json"];
    let plain = csd(&args);
    let child = Command::new(env!("CARGO_BIN_EXE_csd"))
        .args(args)
        .env_remove("RUST_LOG")
        .env("XDG_DATA_HOME", test_data_home())
        .env("CSD_PERFMAP", "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("csd runs");
    let map = std::path::PathBuf::from(format!("/tmp/perf-{}.map", child.id()));
    let mapped = child.wait_with_output().expect("csd ends");
    let names = std::fs::read_to_string(&map).unwrap_or_default();
    let _ = std::fs::remove_file(&map);
    assert!(plain.status.success() && mapped.status.success());
    assert_eq!(
        stdout(&plain),
        stdout(&mapped),
        "the same report either way"
    );
    assert!(
        names.lines().any(|l| l.ends_with(" run")),
        "the task's entry point is named in {}: {names}",
        map.display()
    );
}
