//! Fuzz targets: every importer, and the trace reader followed by a replay, fed hostile input
//! for a bounded time. None may panic; every error names its line and stays short.
//!
//! Each target runs for `CSD_FUZZ_SECS` seconds (default 4) from `CSD_FUZZ_SEED` (default
//! fixed, so CI is reproducible). A failing input is written to the temp directory and named
//! in the panic, with the seed and case number that make it again:
//!
//! ```text
//! CSD_FUZZ_SECS=600 CSD_FUZZ_SEED=7 cargo test --release -p csd-traces --test fuzz
//! ```
//!
//! Inputs mix raw random bytes with lines built from pools of hostile values (offsets and
//! lengths at 2⁶³ and 2⁶⁴ − 1, negative numbers, deep, relative and over-long paths, unknown
//! fds), so a run reaches the converters' and the replay's arithmetic, not only the parsers.
//! Half the replay target's traces are plausible programs with hostile numbers, so they reach
//! what a malformed line never does: ISPFS's engine through a command file and FusionFS's
//! fused CISC ops. The replay cycles through every system a trace can run on.

use csd_device::Profile;
mod common;

use common::{Echo, Sum};
use csd_hostfs::ndp::{DesignKind, NdpCompute};
use csd_traces::import::{convert, ImportFormat};
use csd_traces::replay::{replay, OpRunners, Pace, ReplayOptions, ReplayTarget};
use csd_traces::Strictness;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

/// splitmix64: enough randomness for input generation, reproducible from a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, pool: &[&'a str]) -> &'a str {
        pool[self.below(pool.len())]
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "3",
    "4096",
    "65536",
    "-1",
    "-5",
    "2147479552",
    "2147479553",
    "900000000000",
    "500000000000",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "99999999999999999999",
    "1e9",
    "0x10",
    "",
];

fn paths() -> Vec<String> {
    vec![
        "/a".into(),
        "/a/b".into(),
        "/a/b/c.txt".into(),
        "relative/p".into(),
        "/".into(),
        "".into(),
        "/proc/self/maps".into(),
        "/a/../b".into(),
        format!("/{}", vec!["d"; 300].join("/")),
        format!("/{}", vec!["e"; 2100].join("/")),
        format!("/n/{}", "x".repeat(300)),
        "/sp ace/é".into(),
    ]
}

fn budget() -> Duration {
    let secs = std::env::var("CSD_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4.0);
    Duration::from_secs_f64(secs)
}

fn seed() -> u64 {
    std::env::var("CSD_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x00c5_d1ab)
}

/// Runs `case` on inputs from `generate` until the budget is spent; a panic is reported with
/// the input saved to a file. Returns how many cases ran.
fn fuzz(
    target: &str,
    mut generate: impl FnMut(&mut Rng) -> Vec<u8>,
    mut case: impl FnMut(&[u8]),
) -> u64 {
    let seed = seed();
    let mut rng = Rng(seed);
    let start = Instant::now();
    let mut n = 0u64;
    while n == 0 || start.elapsed() < budget() {
        let input = generate(&mut rng);
        if std::panic::catch_unwind(AssertUnwindSafe(|| case(&input))).is_err() {
            let path = std::env::temp_dir().join(format!("csd-fuzz-{target}-{seed}-{n}.bin"));
            std::fs::write(&path, &input).expect("saving the failing input");
            panic!(
                "fuzz target {target}: case {n} of seed {seed} panicked; input saved to {}",
                path.display()
            );
        }
        n += 1;
    }
    eprintln!("fuzz target {target}: {n} cases in {:?}", start.elapsed());
    n
}

/// An error message must say where, and stay short whatever the input held.
#[track_caller]
fn check_error(e: &str) {
    assert!(e.contains("line "), "no line number: {e}");
    assert!(e.len() < 1200, "error of {} bytes", e.len());
}

/// A text of `lines` lines, each either from `line` or random bytes.
fn text(rng: &mut Rng, mut line: impl FnMut(&mut Rng) -> String) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..rng.below(12) + 1 {
        if rng.below(8) == 0 {
            let n = rng.below(300);
            out.extend(rng.bytes(n));
        } else {
            out.extend(line(rng).into_bytes());
        }
        if rng.below(16) != 0 {
            out.push(b'\n');
        }
    }
    out
}

fn strace_line(rng: &mut Rng) -> String {
    let paths = paths();
    let path = &paths[rng.below(paths.len())];
    let num = |rng: &mut Rng| rng.pick(NUMBERS).to_string();
    let fd = format!("{}<{path}>", rng.pick(&["3", "-1", "99999999999", "x"]));
    let call = match rng.below(32) {
        0 => format!("openat(AT_FDCWD<{path}>, \"{path}\", O_RDONLY)"),
        1 => format!("read({fd}, \"\"..., {})", num(rng)),
        2 => format!("pread64({fd}, \"\", {}, {})", num(rng), num(rng)),
        3 => format!("pwrite64({fd}, \"\", {}, {})", num(rng), num(rng)),
        4 => format!("ftruncate({fd}, {})", num(rng)),
        5 => format!("mkdir(\"{path}\", 0755)"),
        6 => format!("rename(\"{path}\", \"{path}/x\")"),
        7 => format!("write({fd}, \"abc\", {}) <unfinished ...>", num(rng)),
        8 => format!(
            "copy_file_range({fd}, [{}], {fd}, {}, {}, 0)",
            num(rng),
            rng.pick(&["NULL", "[0 => 9]", "0x7ffd", "[x]"]),
            num(rng)
        ),
        9 => format!("sendfile({fd}, {fd}, [{} => 1], {})", num(rng), num(rng)),
        10 => format!("lseek({fd}, {}, SEEK_SET)", num(rng)),
        11 => format!("getdents64({fd}, 0x5600 /* 3 entries */, {})", num(rng)),
        12 => format!(
            "fallocate({fd}, {}, {}, {})",
            rng.pick(&["0", "FALLOC_FL_KEEP_SIZE", "FALLOC_FL_PUNCH_HOLE", "7"]),
            num(rng),
            num(rng)
        ),
        13 => format!(
            "sync_file_range({fd}, {}, {}, {})",
            num(rng),
            num(rng),
            rng.pick(&["SYNC_FILE_RANGE_WRITE", "0", "SYNC_FILE_RANGE_WAIT_AFTER|x"])
        ),
        14 => format!(
            "symlinkat(\"{}\", AT_FDCWD<{path}>, \"{path}/l\")",
            rng.pick(&["x", "", "../../..", "\\0"])
        ),
        16 => format!("fstat({fd}, {{st_mode=S_IFREG|0644, ...}})"),
        15 => format!(
            "linkat(AT_FDCWD<{path}>, \"{}\", {fd}, \"h\", {})",
            rng.pick(&["x", "", "../../..", "\\0"]),
            rng.pick(&["0", "AT_EMPTY_PATH", "AT_SYMLINK_FOLLOW|x"])
        ),
        // What moves open file descriptions between fds and processes.
        17 => format!("dup2({fd}, {})", num(rng)),
        18 => format!(
            "clone(child_stack=NULL, flags={})",
            rng.pick(&[
                "SIGCHLD",
                "CLONE_VM|CLONE_FILES|CLONE_THREAD",
                "CLONE_FILES|x",
                ""
            ])
        ),
        19 => "+++ exited with 0 +++".to_string(),
        20 => "execve(\"/bin/x\", [], 0x0)".to_string(),
        // Shared mappings, whose releases and syncs become `mapped_write`s.
        21 => format!(
            "mmap(NULL, {}, PROT_READ|PROT_WRITE, {}, {fd}, {})",
            num(rng),
            rng.pick(&["MAP_SHARED", "MAP_PRIVATE", "MAP_SHARED|x"]),
            num(rng)
        ),
        22 => format!(
            "munmap({}, {})",
            rng.pick(&["0", "0x1000", "0xffffffffffffffff", "x"]),
            num(rng)
        ),
        23 => format!(
            "msync(0, {}, {})",
            num(rng),
            rng.pick(&["MS_SYNC", "MS_ASYNC", ""])
        ),
        24 => format!("mremap(0, {}, {}, MREMAP_MAYMOVE)", num(rng), num(rng)),
        25 => format!(
            "mknodat(AT_FDCWD<{path}>, \"{path}\", {})",
            rng.pick(&[
                "S_IFIFO|0666",
                "0644",
                "S_IFCHR|0600, makedev(0x1, 0x3)",
                ""
            ])
        ),
        26 => format!(
            "{}({fd}, {{sa_family=AF_UNIX, sun_path={}}}, 21)",
            rng.pick(&["bind", "connect"]),
            rng.pick(&["\"/w/s\"", "@\"x\"", "\"rel\"", "\"", "\"\\\"\""])
        ),
        27 => format!(
            "ioctl({fd}, {}, {fd})",
            rng.pick(&["FICLONE", "FICLONERANGE", "TCGETS"])
        ),
        // What the kernel closes without a `close`: FD_CLOEXEC at an execve, close_range.
        28 => format!(
            "{}({fd}, {}, {})",
            rng.pick(&["fcntl", "dup3", "close_range"]),
            rng.pick(&["F_SETFD", "F_DUPFD_CLOEXEC", "4294967295", "-1", "3", "x"]),
            rng.pick(&[
                "FD_CLOEXEC",
                "O_CLOEXEC",
                "CLOSE_RANGE_CLOEXEC",
                "CLOSE_RANGE_UNSHARE",
                "0",
                ""
            ])
        ),
        29 => format!("openat(AT_FDCWD<{path}>, \"{path}\", O_RDONLY|O_CLOEXEC)"),
        30 => format!(
            "{}(\"{path}\", \"user.x\", NULL, {})",
            rng.pick(&["getxattr", "lgetxattr", "listxattr", "fgetxattr"]),
            num(rng)
        ),
        _ => format!("<... write resumed> ) = {}", num(rng)),
    };
    format!(
        "{} {}.{:06} {call} = {}",
        rng.below(5),
        1_700_000_000 + rng.below(3),
        rng.below(1_000_000),
        rng.pick(&["0", "3", "-1 ENOENT (No such file)", "4096", "?"])
    )
}

fn block_line(rng: &mut Rng, source: ImportFormat) -> String {
    if source == ImportFormat::FioIolog3 && rng.below(6) == 0 {
        return "fio version 3 iolog".into();
    }
    let n: Vec<&str> = (0..4).map(|_| rng.pick(NUMBERS)).collect();
    match source {
        ImportFormat::FioIolog3 => format!("{} /dev/x read {} {}", n[0], n[1], n[2]),
        ImportFormat::Msr => format!("{},h,0,Write,{},{},{}", n[0], n[1], n[2], n[3]),
        _ => format!("{} 0 {} {} 1", n[0], n[1], n[2]),
    }
}

fn importer(source: ImportFormat) {
    let n = fuzz(
        source.name(),
        |rng| {
            text(rng, |rng| match source {
                ImportFormat::Strace => strace_line(rng),
                s => block_line(rng, s),
            })
        },
        |input| {
            let result = convert(source, input, |_| Ok(()));
            if let Err(e) = result {
                check_error(&e.to_string());
            }
        },
    );
    assert!(n > 0);
}

#[test]
fn fuzz_strace_importer() {
    importer(ImportFormat::Strace);
}

#[test]
fn fuzz_fio_importer() {
    importer(ImportFormat::FioIolog3);
}

#[test]
fn fuzz_msr_importer() {
    importer(ImportFormat::Msr);
}

#[test]
fn fuzz_disksim_importer() {
    importer(ImportFormat::Disksim);
}

/// One event line of a csd trace, from pools of hostile values.
fn event_line(rng: &mut Rng) -> String {
    let paths = paths();
    let path = serde_json::to_string(&paths[rng.below(paths.len())]).unwrap();
    let num = |rng: &mut Rng| {
        let n = rng.pick(NUMBERS);
        if n.is_empty() {
            "\"x\"".to_string()
        } else {
            n.to_string()
        }
    };
    let fd = rng.pick(&["3", "4", "-1", "7"]);
    let pid = rng.below(3);
    let op = match rng.below(20) {
        0 => format!(
            r#""op":"open","path":{path},"flags":"{}","ret":{fd}"#,
            rng.pick(&[
                "O_RDONLY",
                "O_WRONLY|O_CREAT",
                "O_RDWR|O_CREAT|O_TRUNC",
                "O_DIRECTORY"
            ])
        ),
        1 => format!(r#""op":"read","fd":{fd},"len":{}"#, num(rng)),
        2 => format!(r#""op":"write","fd":{fd},"len":{}"#, num(rng)),
        3 => format!(
            r#""op":"pread","fd":{fd},"path":{path},"off":{},"len":{},"ret":{}"#,
            num(rng),
            num(rng),
            num(rng)
        ),
        4 => format!(
            r#""op":"pwrite","fd":{fd},"off":{},"len":{}"#,
            num(rng),
            num(rng)
        ),
        5 => format!(r#""op":"mkdir","path":{path}"#),
        6 => format!(r#""op":"truncate","path":{path},"len":{}"#, num(rng)),
        7 => format!(r#""op":"rename","path":{path},"to":"/a/z""#),
        8 => format!(r#""op":"bwrite","off":{},"len":{}"#, num(rng), num(rng)),
        9 => format!(r#""op":"ndp","task":"sum","paths":[{path},"/a/b"]"#),
        10 => format!(r#""op":"close","fd":{fd}"#),
        11 => isp_write(rng, fd, &num),
        12 => cisc(rng, pid, fd, &path, &num),
        13 => format!(r#""op":"readdir","path":{path}"#),
        14 => format!(
            r#""op":"fallocate","fd":{fd},"off":{},"len":{},"keep_size":{}"#,
            num(rng),
            num(rng),
            rng.pick(&["true", "false", "1"])
        ),
        15 => format!(
            r#""op":"sync_file_range","fd":{fd},"off":{},"len":{},"flags":"{}""#,
            num(rng),
            num(rng),
            rng.pick(&["SYNC_FILE_RANGE_WRITE", "0", "O_RDONLY"])
        ),
        16 => format!(
            r#""op":"symlink","path":{path},"target":"{}""#,
            rng.pick(&["t", "", "/a/b", "\\u0000"])
        ),
        18 => format!(r#""op":"fstat","fd":{fd},"path":{path}"#),
        17 => format!(
            r#""op":"link","path":{path},"to":{}"#,
            rng.pick(&["\"/a/h\"", "\"\"", "\"/a/../b\"", "3"])
        ),
        _ => format!(r#""op":"unlink","path":{path}"#),
    };
    format!(r#"{{"t":{},"pid":{pid},{op}}}"#, rng.below(1000))
}

/// An ISP instruction written to a directory's command file (ISPFS; an ordinary file on the
/// other designs). Each field is valid five times in six, else hostile: five keywords or
/// none, keywords of the wrong length, a target that is not there, an unknown `scmd`, a
/// stage instead of keywords.
fn isp_write(rng: &mut Rng, fd: &str, num: &dyn Fn(&mut Rng) -> String) -> String {
    let n = match rng.below(6) {
        0 => *[0, 5].get(rng.below(2)).unwrap(),
        _ => 1 + rng.below(4),
    };
    let keywords: Vec<&str> = (0..n)
        .map(|_| match rng.below(6) {
            0 => rng.pick(&["x", "toolongword", ""]),
            _ => rng.pick(&["data", "disk", "\0ab\0"]),
        })
        .collect();
    let target = match rng.below(6) {
        0 => r#""file":"nothere""#.to_string(),
        1 => format!(r#""ino":{}"#, num(rng)),
        2 => r#""file":"c.txt","stage":"crc32""#.to_string(),
        _ => r#""file":"c.txt""#.to_string(),
    };
    format!(
        r#""op":"pwrite","fd":{fd},"path":"/a/b/.isp","off":0,"len":152,"search":{{"keywords":{},{target},"off":{},"len":{},"scmd":{}}}"#,
        serde_json::to_string(&keywords).unwrap(),
        num(rng),
        num(rng),
        rng.pick(&["1", "1", "1", "1", "1", "0", "7"])
    )
}

/// A FusionFS CISC op: calls submitted to the device as one (on `fusion`; one by one on the
/// other designs), some of a shape its pattern does not allow.
fn cisc(
    rng: &mut Rng,
    pid: usize,
    fd: &str,
    path: &str,
    num: &dyn Fn(&mut Rng) -> String,
) -> String {
    let (off, len) = (num(rng), num(rng));
    let call = |t: u32, op: &str, rest: &str| {
        format!(r#"{{"t":{t},"pid":{pid},"op":"{op}","fd":{fd},"path":{path}{rest}}}"#)
    };
    let (pattern, ops) = match rng.below(3) {
        0 => (
            "write-sync",
            [
                call(
                    1,
                    "pwrite",
                    &format!(r#","off":{off},"len":{len},"ret":{len}"#),
                ),
                call(2, "fdatasync", ""),
            ],
        ),
        1 => (
            "read-modify-write",
            [
                call(
                    1,
                    "pread",
                    &format!(r#","off":{off},"len":{len},"ret":{len}"#),
                ),
                call(
                    2,
                    "pwrite",
                    &format!(r#","off":{off},"len":{len},"ret":{len}"#),
                ),
            ],
        ),
        _ => (
            rng.pick(&["open-write-sync-close", "bogus"]),
            [call(1, "fsync", ""), call(2, "close", "")],
        ),
    };
    format!(
        r#""op":"cisc","pattern":"{pattern}","ops":[{}]"#,
        ops.join(",")
    )
}

/// A trace that reads as valid until its hostile values: the setup a deep path needs (a
/// directory, a file with data in it, its command file open), then calls on them whose
/// numbers come from the hostile pool. Most traces of `event_line`s stop at their first bad
/// line and never reach the engine or a fused op.
fn plausible_trace(rng: &mut Rng) -> Vec<u8> {
    let num = |rng: &mut Rng| match rng.below(3) {
        0 => rng.pick(NUMBERS).to_string(),
        _ => (rng.below(64) * 4096).to_string(),
    };
    let num = |rng: &mut Rng| match num(rng) {
        n if n.is_empty() => "0".to_string(),
        n => n,
    };
    let mut lines = vec![
        r#"{"format":"csd-trace","version":1,"source":"fuzz","clock":"ns"}"#.to_string(),
        r#"{"t":0,"pid":1,"op":"mkdir","path":"/a"}"#.into(),
        r#"{"t":1,"pid":1,"op":"mkdir","path":"/a/b"}"#.into(),
        r#"{"t":2,"pid":1,"op":"open","path":"/a/b/c.txt","flags":"O_RDWR|O_CREAT","ret":3}"#
            .into(),
        r#"{"t":3,"pid":1,"op":"write","fd":3,"len":262144,"ret":262144}"#.into(),
        r#"{"t":4,"pid":1,"op":"open","path":"/a/b/.isp","flags":"O_RDWR","ret":4}"#.into(),
    ];
    let path = r#""/a/b/c.txt""#;
    for t in 5..5 + rng.below(12) as u64 {
        let op = match rng.below(6) {
            0 | 1 => isp_write(rng, "4", &num),
            2 => cisc(rng, 1, "3", path, &num),
            3 => r#""op":"pread","fd":4,"path":"/a/b/.isp","off":0,"len":152"#.to_string(),
            4 => format!(
                r#""op":"pwrite","fd":3,"off":{},"len":{}"#,
                num(rng),
                num(rng)
            ),
            _ => format!(
                r#""op":"pread","fd":3,"off":{},"len":{}"#,
                num(rng),
                num(rng)
            ),
        };
        lines.push(format!(r#"{{"t":{t},"pid":1,{op}}}"#));
    }
    (lines.join("\n") + "\n").into_bytes()
}

#[test]
fn fuzz_trace_reader_then_replay() {
    // The smallest built-in device: files a trace needs before it starts fit or are refused
    // quickly. FusionFS's designs need its testbed's [fusion] table.
    let pcm = Profile::load("pcm-zynq").unwrap();
    let optane = Profile::load("optane-csd").unwrap();
    let opts = ReplayOptions {
        pace: Pace::Afap,
        seed: 1,
        strictness: Strictness::Lenient,
    };
    // Every system a trace can run on: the four offload designs, the host alone, the bare
    // device, ISPFS, and FusionFS's StorageFS with and without CISC ops.
    let mut designs = ReplayTarget::HOSTS
        .iter()
        .copied()
        .chain([
            ReplayTarget::Host(DesignKind::HostOnly),
            ReplayTarget::Device,
            ReplayTarget::Ispfs,
            ReplayTarget::Firmware,
            ReplayTarget::Fusion,
        ])
        .collect::<Vec<_>>()
        .into_iter()
        .cycle();
    let mut stages = Echo;
    // Cases that reached deep paths: an ISP instruction the engine ran, and a fused CISC op.
    let mut reached = [0u64; 2];
    let n = fuzz(
        "replay",
        |rng| {
            if rng.below(2) == 0 {
                return plausible_trace(rng);
            }
            let mut t =
                br#"{"format":"csd-trace","version":1,"source":"fuzz","clock":"ns"}"#.to_vec();
            t.push(b'\n');
            t.extend(text(rng, event_line));
            t
        },
        |input| {
            let mut factory =
                |_: &str, _: &str| -> Result<Box<dyn NdpCompute>, String> { Ok(Box::new(Sum)) };
            let design = designs.next().expect("cycle");
            let profile = if design.on_storagefs() { &optane } else { &pcm };
            match replay(
                || Ok(input),
                profile,
                design,
                OpRunners {
                    compute: &mut factory,
                    isc: None,
                    stages: Some(&mut stages),
                },
                &opts,
                |_| {},
            ) {
                Ok(report) => {
                    let isp = report.isp.as_ref();
                    reached[0] += isp.is_some_and(|i| i.instructions > i.refused) as u64;
                    reached[1] += report.fusion.as_ref().is_some_and(|f| f.cisc_ops > 0) as u64;
                    // A replay invents no op: at most one per event, or per call inside a
                    // `cisc` event that a system takes one call at a time.
                    let done: u64 = report.latency.values().map(|l| l.count + l.failed).sum();
                    let ops = input.windows(5).filter(|w| w == b"\"op\":").count() as u64;
                    assert!(
                        done <= report.events.max(ops),
                        "{done} ops of {} events ({ops} ops written)",
                        report.events
                    );
                }
                Err(csd_traces::replay::ReplayError::Trace(e)) => check_error(&e.to_string()),
                Err(e) => assert!(e.to_string().len() < 1200, "{e}"),
            }
        },
    );
    assert!(n > 0);
    // A fuzz that never gets past the parser tests little: a run of the default length
    // (a thousand cases or more, about one in a hundred reaching each) must reach both deep
    // paths. The cases come from the seed, so a given number of them always reaches as much.
    if n >= 1000 {
        assert!(
            reached.iter().all(|&r| r > 0),
            "of {n} cases, {} ran an ISP instruction and {} a fused CISC op",
            reached[0],
            reached[1]
        );
    }
}
