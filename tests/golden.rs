//! Golden reports: the JSON every report-producing command prints for a fixed, small input,
//! kept with insta. A refactor that is meant to change no number must leave every one of
//! these byte-identical; a model change updates them deliberately, in the same commit.

mod common;

use std::process::Command;

fn data_home() -> std::path::PathBuf {
    common::scratch_dir().join("data")
}

/// Runs `csd args…` and returns its stdout, with the repository's path (which differs
/// between machines) replaced by `$REPO`.
fn report(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_csd"))
        .args(args)
        .env_remove("RUST_LOG")
        .env("XDG_DATA_HOME", data_home())
        .output()
        .expect("csd runs");
    assert!(
        o.status.success(),
        "csd {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8(o.stdout).expect("reports are UTF-8");
    // Every golden report is JSON: a table's rounding would hide a changed digit.
    let json: serde_json::Value = serde_json::from_str(&out).expect("a --json report parses");
    typed_round_trip(args[0], json);
    out.replace(env!("CARGO_MANIFEST_DIR"), "$REPO")
}

/// The report reads back as its typed kind and serialises to the same JSON: the run store,
/// `runs diff` and the dashboard, which read the typed form, see every field `--json` prints.
fn typed_round_trip(command: &str, json: serde_json::Value) {
    use csd_traces::report::{Report, ReportKind};
    let kind = match command {
        "ndp" => ReportKind::Ndp,
        "txapps" => ReportKind::Txapps,
        "txbench" => ReportKind::Txbench,
        "persist" => ReportKind::Persist,
        "device" => ReportKind::Device,
        "replay" => ReportKind::Replay,
        "run" => ReportKind::Task,
        other => panic!("no report kind for `csd {other}`"),
    };
    let typed = Report::from_json(kind, kind.version(), json.clone());
    assert_eq!(
        typed.unreadable(),
        None,
        "csd {command}'s report reads as {kind}"
    );
    assert_eq!(typed.to_json(), json, "csd {command}'s report round-trips");
}

#[test]
fn ndp_reports_are_unchanged() {
    insta::assert_snapshot!("ndp_warm", report(&["ndp", "--json", "--no-store"]));
    insta::assert_snapshot!(
        "ndp_cold_knn",
        report(&[
            "ndp",
            "--cold",
            "--app",
            "knn",
            "--files",
            "10",
            "--json",
            "--no-store"
        ])
    );
}

#[test]
fn txisc_reports_are_unchanged() {
    insta::assert_snapshot!("txapps", report(&["txapps", "--scale", "0.01", "--json"]));
    // --no-cpu: the real-time CPU measurement is the one figure no run repeats.
    insta::assert_snapshot!(
        "txbench",
        report(&[
            "txbench",
            "--no-cpu",
            "--requests",
            "500",
            "--qd",
            "1,32",
            "--json"
        ])
    );
}

#[test]
fn persist_reports_are_unchanged() {
    insta::assert_snapshot!(
        "persist_backlog",
        report(&[
            "persist",
            "backlog",
            "--scale",
            "0.01",
            "--json",
            "--no-store"
        ])
    );
    insta::assert_snapshot!(
        "persist_online",
        report(&[
            "persist",
            "online",
            "--interval",
            "64",
            "--scale",
            "0.01",
            "--window-s",
            "0.3",
            "--json",
            "--no-store",
        ])
    );
}

#[test]
fn device_reports_are_unchanged() {
    insta::assert_snapshot!(
        "device_randwrite_gc",
        report(&[
            "device",
            "run",
            "--profile",
            "daisyplus-femu",
            "--rw",
            "randwrite",
            "--size",
            "256m",
            "--io",
            "64m",
            "--prefill",
            "--json",
        ])
    );
    insta::assert_snapshot!(
        "device_randrw",
        report(&[
            "device",
            "run",
            "--profile",
            "daisyplus-femu",
            "--rw",
            "randrw",
            "--bs",
            "4k",
            "--qd",
            "4",
            "--size",
            "32m",
            "--io",
            "16m",
            "--seed",
            "9",
            "--json",
        ])
    );
}

#[test]
fn task_reports_are_unchanged() {
    let samples = format!("{}/traces/samples/grep.trace", env!("CARGO_MANIFEST_DIR"));
    insta::assert_snapshot!(
        "task_grep",
        report(&[
            "run",
            "grep",
            "--import",
            &samples,
            "--args",
            r#"{"pattern":"ndp"}"#,
            "--json",
            "--no-store",
        ])
    );
}

#[test]
fn replay_reports_are_unchanged() {
    for sample in ["untar", "ndp-mixed", "sqlite", "grep"] {
        let path = format!(
            "{}/traces/samples/{sample}.trace",
            env!("CARGO_MANIFEST_DIR")
        );
        insta::assert_snapshot!(
            format!("replay_{sample}"),
            report(&["replay", &path, "--json", "--no-store"])
        );
    }
}
