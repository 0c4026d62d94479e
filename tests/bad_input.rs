//! Bad input and hostile tasks at the `csd` binary: each case must end with a clear error (or
//! a clean result), an exit code of 0 or 1 — never a signal, never 101 — and bounded wall time
//! and peak memory. The child's peak RSS comes from `wait4`, so it is the child's own.

mod common;

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Ran {
    /// The exit code; `None` if a signal ended it.
    code: Option<i32>,
    signal: Option<i32>,
    wall: Duration,
    peak_rss_mib: u64,
    stdout: String,
    stderr: String,
}

fn data_home() -> PathBuf {
    common::scratch_dir().join("data")
}

fn hostile(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/hostile")
        .join(name)
        .display()
        .to_string()
}

/// Runs csd with `args`, capturing its output, wall time and peak RSS.
fn csd(args: &[&str]) -> Ran {
    csd_within(args, None)
}

/// [`csd`] with its address space limited to `max_bytes` (`RLIMIT_AS`), as in a container
/// or under `ulimit -v`: what cannot be mapped must be refused, not abort the process.
fn csd_within(args: &[&str], max_bytes: Option<u64>) -> Ran {
    use std::os::unix::process::CommandExt;
    let started = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_csd"));
    if let Some(max) = max_bytes {
        let limit = libc::rlimit {
            rlim_cur: max,
            rlim_max: max,
        };
        // SAFETY: setrlimit is async-signal-safe, and the closure touches nothing else.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_AS, &limit) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    }
    // Reaped with wait4 below (for its rusage), not Child::wait.
    #[allow(clippy::zombie_processes)]
    let mut child = cmd
        .args(args)
        .env_remove("RUST_LOG")
        .env("XDG_DATA_HOME", data_home())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("csd starts");
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let mut stderr = String::new();
    let _ = err.read_to_string(&mut stderr);
    let stdout = reader.join().expect("reader thread");
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value to be filled in by wait4.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, which nothing else reaps (we never call child.wait).
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4");
    let status = std::process::ExitStatus::from_raw(status);
    Ran {
        code: status.code(),
        signal: status.signal(),
        wall: started.elapsed(),
        peak_rss_mib: usage.ru_maxrss as u64 / 1024,
        stdout,
        stderr,
    }
}

/// Checks the run ended by itself with `code`, within `secs` and `mib`.
#[track_caller]
fn bounded(r: &Ran, code: i32, secs: u64, mib: u64) {
    assert_eq!(
        r.signal, None,
        "killed by signal {:?} (an abort, not an error): {}",
        r.signal, r.stderr
    );
    assert_eq!(
        r.code,
        Some(code),
        "stdout: {}\nstderr: {}",
        r.stdout,
        r.stderr
    );
    assert!(
        r.wall < Duration::from_secs(secs),
        "took {:?} (bound {secs} s)",
        r.wall
    );
    assert!(
        r.peak_rss_mib < mib,
        "peak RSS {} MiB (bound {mib} MiB)",
        r.peak_rss_mib
    );
}

fn input_dir() -> PathBuf {
    let dir = data_home().join("input");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), b"some bytes to read\n".repeat(100)).unwrap();
    dir
}

#[test]
fn an_accelerator_over_the_whole_device_is_refused_by_the_budget_not_allocated() {
    // Block mode: the "file" is the device (952 GiB on cosmos-plus). It used to allocate
    // all of it on the host and abort.
    let dir = input_dir();
    let r = csd(&[
        "run",
        &hostile("grep_block.wat"),
        "--exec",
        "block",
        "--import",
        dir.to_str().unwrap(),
        "--no-store",
    ]);
    bounded(&r, 1, 30, 300);
    assert!(
        r.stderr.contains("host call `accel_grep` costs"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_small_write_at_a_far_offset_costs_the_host_nothing_in_proportion() {
    let export = data_home().join("export-far");
    let r = csd(&[
        "run",
        &hostile("farwrite.wat"),
        "--file",
        "/out/f:w",
        "--export",
        export.to_str().unwrap(),
        "--no-store",
    ]);
    bounded(&r, 0, 30, 300);
    assert!(r.stdout.contains("committed"), "{}", r.stdout);
    // The exported file has the task's size but holds (almost) no disk blocks: sparse.
    let meta = std::fs::metadata(export.join("out/f")).unwrap();
    assert_eq!(meta.len(), 500_000_000_005);
    use std::os::unix::fs::MetadataExt;
    assert!(
        meta.blocks() * 512 < 16 << 20,
        "export took {} bytes of disk",
        meta.blocks() * 512
    );
}

#[test]
fn loops_of_host_calls_end_within_the_default_budget() {
    let dir = input_dir();
    for (task, extra) in [
        ("logloop.wat", vec![]),
        ("readloop.wat", vec!["--import", dir.to_str().unwrap()]),
    ] {
        let task = hostile(task);
        let mut args = vec!["run", &task, "--no-store"];
        args.extend(extra);
        let r = csd(&args);
        bounded(&r, 1, 60, 300);
        assert!(r.stderr.contains("budget"), "{task}: {}", r.stderr);
    }
}

#[test]
fn the_wall_clock_backstop_stops_a_task_whose_budget_would_last_for_hours() {
    let r = csd(&[
        "run",
        &hostile("spin.wat"),
        "--fuel",
        "100000000000000",
        "--wall-clock-s",
        "1",
        "--no-store",
    ]);
    bounded(&r, 1, 20, 300);
    assert!(
        r.stderr.contains("wall-clock limit of 1000 ms"),
        "{}",
        r.stderr
    );
}

#[test]
fn random_bytes_as_a_module_are_named_as_what_they_are() {
    let path = data_home().join("random.wasm");
    std::fs::create_dir_all(data_home()).unwrap();
    let bytes: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 0x80)
        .collect();
    std::fs::write(&path, bytes).unwrap();
    let r = csd(&["run", path.to_str().unwrap(), "--no-store"]);
    bounded(&r, 1, 30, 300);
    assert!(
        r.stderr.contains("neither a WebAssembly binary") && !r.stderr.contains("UTF-8"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_memory_cap_past_what_wasm_can_address_is_refused() {
    let r = csd(&["run", "grep", "--memory", "100t", "--no-store"]);
    bounded(&r, 1, 30, 300);
    assert!(r.stderr.contains("--memory 100"), "{}", r.stderr);
    assert!(r.stderr.contains("largest task memory"), "{}", r.stderr);
}

#[test]
fn an_import_with_a_symlink_cycle_ends() {
    let dir = data_home().join("cycle");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/file.txt"), b"hello\n").unwrap();
    let link = dir.join("sub/back");
    if !link.exists() {
        std::os::unix::fs::symlink(&dir, &link).unwrap();
    }
    // By default the link is not followed, and the user is told.
    let r = csd(&[
        "run",
        "checksum",
        "--import",
        dir.to_str().unwrap(),
        "--no-store",
    ]);
    bounded(&r, 0, 60, 300);
    assert!(r.stdout.contains("1 file(s)"), "{}", r.stdout);
    assert!(r.stderr.contains("skipped 1 symbolic link"), "{}", r.stderr);
    // Followed, the cycle still ends.
    let r = csd(&[
        "run",
        "checksum",
        "--import",
        dir.to_str().unwrap(),
        "--follow-links",
        "--no-store",
    ]);
    bounded(&r, 0, 60, 300);
    assert!(r.stdout.contains("1 file(s)"), "{}", r.stdout);
}

const HEADER: &str = r#"{"format":"csd-trace","version":1,"source":"test","clock":"ns"}"#;

/// Writes a trace of `lines` under the header and returns its path.
fn trace(name: &str, lines: &[String]) -> String {
    let dir = data_home().join("traces");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let mut text = String::from(HEADER);
    for l in lines {
        text.push('\n');
        text.push_str(l);
    }
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn open_line(path: &str) -> String {
    format!(r#"{{"t":1,"pid":1,"op":"open","path":"{path}","flags":"O_WRONLY|O_CREAT","ret":3}}"#)
}

#[test]
fn offsets_and_lengths_past_what_a_call_or_the_device_can_take_fail_per_event() {
    let cases = [
        // (name, second line, op, reason)
        (
            "huge-write",
            r#"{"t":2,"pid":1,"op":"write","fd":3,"len":500000000000}"#,
            "write",
            "MAX_RW_COUNT",
        ),
        (
            "max-len",
            r#"{"t":2,"pid":1,"op":"write","fd":3,"len":18446744073709551615}"#,
            "write",
            "MAX_RW_COUNT",
        ),
        (
            "wrap",
            r#"{"t":2,"pid":1,"op":"pwrite","fd":3,"off":18446744073709551615,"len":10}"#,
            "pwrite",
            "beyond the device",
        ),
        (
            "far-read",
            r#"{"t":2,"pid":1,"op":"pread","fd":3,"off":900000000000,"len":4096,"ret":0}"#,
            "pread",
            "",
        ),
    ];
    // A file the trace reads 4 KiB of at 900 GB existed at that size: it is made with that
    // page written, not 900 GB of them (this aborted, then took 900 MB and 11 s).
    let t = trace(
        "far-read-data.trace",
        &[r#"{"t":1,"pid":1,"op":"pread","fd":3,"path":"/in/f","off":900000000000,"len":4096,"ret":4096}"#
            .to_string()],
    );
    let r = csd(&["replay", &t, "--no-store", "--design", "lightfs", "--json"]);
    bounded(&r, 0, 30, 300);
    let report: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON report");
    assert_eq!(
        report["designs"][0]["latency"]["pread"]["count"].as_u64(),
        Some(1)
    );
    for (name, line, op, reason) in cases {
        let t = trace(
            &format!("{name}.trace"),
            &[open_line("/a/f"), line.to_string()],
        );
        let r = csd(&["replay", &t, "--no-store", "--design", "frag-s", "--json"]);
        bounded(&r, 0, 30, 300);
        let report: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON report");
        let design = &report["designs"][0];
        let failed = design["latency"][op]["failed"]
            .as_u64()
            .unwrap_or_else(|| panic!("{name}: no {op} row in {}", design["latency"]));
        if reason.is_empty() {
            // A read at end of file is no error: it returns nothing, quickly.
            assert_eq!(failed, 0, "{name}");
            continue;
        }
        assert_eq!(failed, 1, "{name}");
        let first = design["first_errors"][op]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no first error for {op}"));
        assert!(first.contains(reason), "{name}: {first}");
        // The replay went on: the open before it counted.
        assert_eq!(
            design["latency"]["open"]["count"].as_u64(),
            Some(1),
            "{name}"
        );
    }
}

#[test]
fn a_deep_path_costs_linear_time_and_paths_past_the_kernels_limits_are_refused() {
    let deep = format!("/{}", vec!["d"; 2000].join("/"));
    let t = trace(
        "deep.trace",
        &[format!(
            r#"{{"t":1,"pid":1,"op":"mkdir","path":"{deep}","ret":0}}"#
        )],
    );
    let r = csd(&["replay", &t, "--no-store", "--design", "frag-s"]);
    bounded(&r, 0, 20, 300);
    assert!(r.stdout.contains("mkdir"), "{}", r.stdout);

    let too_long = format!("/{}", vec!["d"; 2100].join("/"));
    let long_name = format!("/a/{}", "n".repeat(256));
    for (path, what) in [
        (too_long.as_str(), "PATH_MAX"),
        (long_name.as_str(), "NAME_MAX"),
        ("relative/path", "relative"),
    ] {
        let t = trace(
            "bad-path.trace",
            &[format!(
                r#"{{"t":1,"pid":1,"op":"mkdir","path":"{path}","ret":0}}"#
            )],
        );
        for cmd in ["check", "replay"] {
            let args: Vec<&str> = if cmd == "check" {
                vec!["trace", "check", &t]
            } else {
                vec!["replay", &t, "--no-store"]
            };
            let r = csd(&args);
            bounded(&r, 1, 20, 300);
            assert!(
                r.stderr.contains("line 2") && r.stderr.contains(what),
                "{cmd} {what}: {}",
                r.stderr
            );
            assert_eq!(
                r.stderr.matches("line 2").count(),
                1,
                "{cmd}: said once: {}",
                r.stderr
            );
            assert!(
                r.stderr.len() < 1000,
                "{cmd}: error cut short: {}",
                r.stderr
            );
        }
    }
}

#[test]
fn a_huge_or_binary_line_is_refused_and_quoted_short() {
    let long = format!(
        r#"{{"t":1,"pid":1,"op":"stat","path":"/x","junk":"{}"}}"#,
        "z".repeat(10 << 20)
    );
    let t = trace("long-line.trace", &[long]);
    let r = csd(&["trace", "check", &t]);
    bounded(&r, 1, 20, 300);
    assert!(
        r.stderr.contains("line 2") && r.stderr.contains("longer than"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.len() < 1000, "{}", r.stderr.len());

    let path = data_home().join("traces/binary.trace");
    let mut bytes = HEADER.as_bytes().to_vec();
    bytes.push(b'\n');
    bytes.extend((0..5000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8 | 0x80));
    std::fs::write(&path, bytes).unwrap();
    let r = csd(&["trace", "check", path.to_str().unwrap()]);
    bounded(&r, 1, 20, 300);
    assert!(
        r.stderr.contains("line 2") && r.stderr.contains("not UTF-8"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.len() < 1000, "{}", r.stderr.len());
}

#[test]
fn importers_refuse_empty_fio_logs_and_count_what_they_skip() {
    let dir = data_home().join("imports");
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.log");
    std::fs::write(&empty, b"").unwrap();
    let r = csd(&[
        "trace",
        "import",
        "--from",
        "fio-iolog3",
        empty.to_str().unwrap(),
    ]);
    bounded(&r, 1, 20, 300);
    assert!(
        r.stderr.contains("no 'fio version 3 iolog' header"),
        "{}",
        r.stderr
    );

    let strace = dir.join("neg.strace");
    std::fs::write(
        &strace,
        "100 1700000000.000001 pread64(3</data/f>, \"\", 10, -5) = -1 EINVAL (Invalid argument)\n\
         100 1700000000.000002 ftruncate(3</data/f>, 99999999999999999999) = -1 EFBIG (File too large)\n\
         100 1700000000.000003 pread64(3</data/f>, \"abc\", 3, 0) = 3\n",
    )
    .unwrap();
    let out = dir.join("neg.trace");
    let r = csd(&[
        "trace",
        "import",
        "--from",
        "strace",
        strace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    bounded(&r, 0, 20, 300);
    assert!(r.stderr.contains("1 events from 3 lines"), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("skipped 1 call(s): pread64: negative offset"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("skipped 1 call(s): ftruncate: length over 2^63-1"),
        "{}",
        r.stderr
    );
}

/// A geometry the process cannot hold is refused with the table it could not get, and one
/// whose die count overflows is refused before anything multiplies it: exit 1, never an
/// abort, in a process whose address space is limited to 2 GiB.
#[test]
fn a_geometry_too_large_for_the_process_is_refused_not_an_abort() {
    std::fs::create_dir_all(data_home()).unwrap();
    let cosmos = include_str!("../device/profiles/cosmos-plus.toml");
    let cases = [
        // 2^30 physical pages: legal, but its tables need more than 2 GiB of address space.
        (
            "huge.toml",
            cosmos.replace("blocks_per_plane = 4096", "blocks_per_plane = 65536"),
            "too large for this process",
        ),
        // 2^32 dies: the product overflows a u32.
        (
            "dies.toml",
            cosmos
                .replace("channels = 8", "channels = 65536")
                .replace("dies_per_channel = 8", "dies_per_channel = 65536"),
            "dies_per_channel",
        ),
    ];
    for (name, text, says) in cases {
        assert_ne!(text, cosmos, "{name}: the replacement must apply");
        let profile = data_home().join(name);
        std::fs::write(&profile, text).unwrap();
        let r = csd_within(
            &[
                "device",
                "run",
                "--profile",
                profile.to_str().unwrap(),
                "--size",
                "16m",
            ],
            Some(2 << 30),
        );
        bounded(&r, 1, 30, 600);
        assert!(r.stderr.contains(says), "{name}: {}", r.stderr);
    }
}

/// An NDP data set within `csd ndp`'s bounds that the process has no memory for is refused
/// before it is made, naming what it needs, where a failed allocation would abort.
#[test]
fn an_ndp_data_set_larger_than_memory_is_refused_not_aborted() {
    let r = csd_within(
        &["ndp", "--files", "1", "--size", "3g", "--no-store"],
        Some(2 << 30),
    );
    bounded(&r, 1, 30, 600);
    assert!(
        r.stderr.contains("1 files of 3 GiB needs about"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("ulimit -v"), "{}", r.stderr);
}

/// Under an address-space limit the pooling allocator cannot reserve its slots (tens of
/// GiB): tasks then get their memory on demand, with a warning, and compute the same result
/// with the same fuel, so the report is byte-identical.
#[test]
fn tasks_run_the_same_when_the_address_space_is_limited() {
    let free = csd(&["run", "stats64", "--json", "--no-store"]);
    bounded(&free, 0, 60, 600);
    let limited = csd_within(&["run", "stats64", "--json", "--no-store"], Some(8 << 30));
    bounded(&limited, 0, 60, 600);
    assert!(
        limited.stderr.contains("memory on demand"),
        "{}",
        limited.stderr
    );
    assert_eq!(limited.stdout, free.stdout);
}

/// StorageFS keeps file contents, so the firmware and fusion designs hold no more than the
/// device does: writes far into many files fail one by one once it is full, and writes or
/// cuts past a file's limit are refused, in bounded time and memory.
#[test]
fn storagefs_holds_no_more_than_its_device_and_refuses_what_passes_a_file() {
    let profile = data_home().join("small-optane.toml");
    std::fs::create_dir_all(data_home()).unwrap();
    let text = include_str!("../device/profiles/optane-csd.toml")
        .replace("blocks_per_plane = 1024", "blocks_per_plane = 256")
        .replace("pages_per_block = 256", "pages_per_block = 64")
        .replace("name = \"optane-csd\"", "name = \"small-optane\"");
    std::fs::write(&profile, text).unwrap();
    let mut lines = Vec::new();
    for i in 0..8 {
        let fd = 3 + i;
        lines.push(format!(
            r#"{{"t":{},"pid":1,"op":"open","path":"/f{i}","flags":"O_WRONLY|O_CREAT","ret":{fd}}}"#,
            10 * i
        ));
        lines.push(format!(
            r#"{{"t":{},"pid":1,"op":"pwrite","fd":{fd},"off":60000000,"len":1,"ret":1}}"#,
            10 * i + 1
        ));
    }
    lines.push(r#"{"t":100,"pid":1,"op":"pwrite","fd":3,"off":70000000,"len":1,"ret":1}"#.into());
    lines.push(
        r#"{"t":101,"pid":1,"op":"truncate","path":"/f0","len":18446744073709551615}"#.into(),
    );
    let t = trace("storagefs-full.trace", &lines);
    let r = csd(&[
        "replay",
        &t,
        "--no-store",
        "--design",
        "fusion",
        "--profile",
        profile.to_str().unwrap(),
        "--json",
    ]);
    bounded(&r, 0, 30, 600);
    let report: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON report");
    let d = &report["designs"][0];
    // 128 MiB of device: two files of 60 MB fit, the other six do not; the far write fails.
    assert_eq!(d["latency"]["pwrite"]["count"].as_u64(), Some(2), "{d}");
    assert_eq!(d["latency"]["pwrite"]["failed"].as_u64(), Some(7), "{d}");
    let first = d["first_errors"]["pwrite"].as_str().unwrap();
    assert!(first.contains("StorageFS is full"), "{first}");
    assert_eq!(d["latency"]["truncate"]["failed"].as_u64(), Some(1), "{d}");
    assert!(d["fusion"]["bytes"].as_u64().unwrap() <= 128 << 20, "{d}");
}

#[test]
fn an_ndp_data_set_past_its_bounds_is_refused_before_it_is_allocated() {
    // Each used to abort on a failed allocation: 4.8 TB of file names, then 1 TB of data.
    for (args, says) in [
        (&["--files", "99999999999"][..], "holds at most 1000000"),
        (
            &["--files", "10", "--size", "100g"][..],
            "more than an NDP data set may hold",
        ),
        (&["--sweep", "size=4k,100g"][..], "100 files of 100 GiB"),
    ] {
        let r = csd(&[&["ndp", "--no-store"][..], args].concat());
        bounded(&r, 1, 10, 100);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
    }
}

/// Counts and sizes a command loops over or holds in memory have bounds, refused by name
/// before anything runs (each used to run for days or abort on a failed allocation).
#[test]
fn counts_and_sizes_past_their_bounds_are_refused_up_front() {
    for (args, says) in [
        (
            &["txbench", "--requests", "1000000000000"][..],
            "--requests",
        ),
        (&["bench", "tasks", "--size", "1t"][..], "held in memory"),
        (
            &["bench", "tasks", "--invocations", "4000000000"][..],
            "--invocations",
        ),
        (&["bench", "replay", "--events", "0"][..], "--events"),
    ] {
        let r = csd(args);
        bounded(&r, 2, 10, 100);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
    }
}
