//! `csd repro`: the README's table is what the command prints, the same run prints the same
//! table, and each paper's figures move when a profile value they depend on moves.

mod common;

use std::process::{Command, Output};

fn csd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_csd"))
        .args(args)
        .env_remove("RUST_LOG")
        .env("XDG_DATA_HOME", common::scratch_dir().join("data"))
        .output()
        .expect("csd runs")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "csd failed ({:?}): {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// `(id, ours)` of every line `csd repro … --json` prints.
fn ours(args: &[&str]) -> Vec<(String, Option<f64>)> {
    let mut all = vec!["repro", "--json", "--no-store"];
    all.extend_from_slice(args);
    let report: serde_json::Value = serde_json::from_str(&ok(&csd(&all))).unwrap();
    report["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["id"].as_str().unwrap().to_string(),
                l["ours_value"].as_f64(),
            )
        })
        .collect()
}

fn value(lines: &[(String, Option<f64>)], id: &str) -> f64 {
    lines
        .iter()
        .find(|l| l.0 == id)
        .and_then(|l| l.1)
        .unwrap_or_else(|| panic!("no value for {id} in {lines:?}"))
}

#[test]
fn the_readme_holds_what_csd_repro_prints() {
    let printed = ok(&csd(&["repro", "all", "--markdown", "--no-store"]));
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let (begin, end) = (
        "<!-- csd repro all --markdown -->\n",
        "<!-- end of csd repro -->",
    );
    let from = readme.find(begin).expect("README marks the repro table") + begin.len();
    let to = from
        + readme[from..]
            .find(end)
            .expect("README ends the repro table");
    assert_eq!(
        readme[from..to].trim(),
        printed.trim(),
        "README.md's table differs from `csd repro all --markdown`: paste the command's output"
    );
    assert!(printed.contains("| LightFS |") && printed.contains("| SIFT |"));
    // Every ✗ names what the model lacks (issue 17): a new one without a cause fails here.
    let failed = printed.lines().filter(|l| l.ends_with("| ✗ |")).count();
    assert!(
        failed > 0 && printed.contains("What each ✗ lacks"),
        "{printed}"
    );
    assert!(
        !printed.contains("no cause given"),
        "a ✗ line has no cause: add one to its paper's LACKS in src/commands/repro/"
    );
}

#[test]
fn two_runs_print_the_same_lines() {
    let args = ["txisc", "--only", "txisc.fig3"];
    assert_eq!(ours(&args), ours(&args));
}

#[test]
fn a_profile_value_moves_the_figures_that_depend_on_it() {
    // LightFS: filefrag's cost is frag-s's retrieval, so its PAO.
    let only = ["lightfs", "--only", "lightfs.fig3a.warm"];
    let base = value(&ours(&only), "lightfs.fig3a.warm.frag-s");
    let mut slower = only.to_vec();
    slower.extend(["--set", "cosmos-plus:host.fiemap_ns=150000"]);
    let moved = value(&ours(&slower), "lightfs.fig3a.warm.frag-s");
    assert!(moved > base + 5.0, "PAO {base} -> {moved}");

    // TxISC: with flash timing off, the firmware's per-request work is the baseline the
    // delta-mapping cost is compared with.
    let only = ["txisc", "--only", "txisc.fig3.off.w100.block"];
    let base = value(&ours(&only), "txisc.fig3.off.w100.block");
    let mut heavier = only.to_vec();
    heavier.extend(["--set", "daisyplus-femu:device_cpu.request_ns=12000"]);
    let moved = value(&ours(&heavier), "txisc.fig3.off.w100.block");
    assert!(moved < base * 0.5, "drop {base} -> {moved}");

    // SIFT: the coalesced checkpoint's per-record cost is most of its replay.
    let only = ["sift", "--only", "sift.s54"];
    let base = value(&ours(&only), "sift.s54.speedup");
    let mut costly = only.to_vec();
    costly.extend([
        "--set",
        "bluefield2-pm1735:persist.coalesce_record_ns=60000",
    ]);
    let moved = value(&ours(&costly), "sift.s54.speedup");
    assert!(moved < base * 0.8, "speedup {base} -> {moved}");

    // FusionFS: its largest gain is over ext4-DAX, whose kernel path pays the FS's work.
    let only = ["fusionfs", "--only", "fusionfs.fig3.max-gain"];
    let base = value(&ours(&only), "fusionfs.fig3.max-gain");
    let mut heavier = only.to_vec();
    heavier.extend(["--set", "optane-csd:fusion.kernel_fs_op_ns=5000"]);
    let moved = value(&ours(&heavier), "fusionfs.fig3.max-gain");
    assert!(moved > base * 1.3, "gain {base} -> {moved}");
}

#[test]
fn a_bad_override_names_the_field_and_runs_nothing() {
    let o = csd(&[
        "repro",
        "txisc",
        "--no-store",
        "--set",
        "daisyplus-femu:device_cpu.nope=1",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("device_cpu.nope"), "{err}");
    assert!(o.stdout.is_empty());
    let o = csd(&[
        "repro",
        "txisc",
        "--no-store",
        "--set",
        "daisyplus-femu:timing.page_read_ns=0",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("page_read_ns"));
}

/// `--explain` names each figure under the prefix with the profile parameters behind it and
/// their sources, and for a ✗ what the model lacks.
#[test]
fn explain_gives_a_figures_parameters_and_a_failures_cause() {
    let explained = ok(&csd(&["repro", "txisc", "--explain", "txisc.fig3"]));
    let report: serde_json::Value = serde_json::from_str(&ok(&csd(&[
        "repro",
        "txisc",
        "--only",
        "txisc.fig3",
        "--json",
        "--no-store",
    ])))
    .unwrap();
    let lines = report["lines"].as_array().unwrap();
    assert!(!lines.is_empty());
    for l in lines {
        let id = l["id"].as_str().unwrap();
        assert!(explained.contains(&format!("{id} — ")), "{id}: {explained}");
        if l["verdict"] == "fail" {
            let why = l["lacks"].as_str().expect("a ✗ line has a cause");
            assert!(explained.contains(why), "{id}: {explained}");
        }
    }
    assert!(explained.contains("device_cpu.request_ns = ") && explained.contains("source: "));
}
