//! End-to-end tests of the `csd` binary: determinism, errors, and report snapshots.

use std::process::{Command, Output};

fn csd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_csd"))
        .args(args)
        .env_remove("RUST_LOG")
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
    "device", "run", "--rw", "randrw", "--bs", "16k", "--qd", "8", "--size", "32m", "--io", "64m",
    "--seed", "3",
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

#[test]
fn bare_csd_runs_the_default_job() {
    let o = csd(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("profile daisyplus-femu, randwrite bs=16 KiB qd=32 size=4 GiB"),
        "{out}"
    );
    assert!(out.contains("IOPS"));
    assert!(stderr(&o).contains("default job"));
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
    let dir = std::env::temp_dir().join(format!("csd-cli-test-{}", std::process::id()));
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
