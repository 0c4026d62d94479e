//! Offload plans: what a fold removes, what it keeps, and where it puts the `ndp` ops.

use csd_traces::offload::{Fold, FoldReport, Folder, Plan};
use csd_traces::{Event, Op, OpenFlags};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

fn ev(t: u64, pid: u32, op: Op, ret: Option<i64>) -> Event {
    Event {
        t,
        pid,
        fds_of: None,
        op,
        ret,
        dur: None,
        extra: BTreeMap::new(),
    }
}

fn plan(extra: &str) -> Folder {
    Plan::parse(&format!(
        "[[rule]]\ntask = \"grep\"\nargs = '{{\"pattern\":\"x\"}}'\npaths = [\"/src/**\"]\n{extra}"
    ))
    .unwrap()
    .folder()
    .unwrap()
}

fn fold(folder: &Folder, events: &[Event]) -> (Vec<Event>, FoldReport) {
    let mut f: Fold<'_> = folder.fold();
    let mut out = Vec::new();
    for e in events {
        out.extend(f.push(e.clone()));
    }
    let (rest, report) = f.finish();
    out.extend(rest);
    (out, report)
}

/// What one pid does next, for the generator.
#[derive(Clone, Debug)]
enum Step {
    /// Open, stat, read to the end in chunks, close: a scan of `/src/…` or `/other/…`.
    Scan { src: bool, file: u8, size: u32 },
    /// Open and read only part of it.
    Partial { file: u8 },
    /// Write a file.
    Write { file: u8 },
    /// Stat something unrelated.
    Stat { file: u8 },
    /// Open a directory (as `grep -r` does).
    Dir,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (any::<bool>(), 0u8..12, 0u32..200_000)
            .prop_map(|(src, file, size)| Step::Scan { src, file, size }),
        1 => (0u8..12).prop_map(|file| Step::Partial { file }),
        1 => (0u8..12).prop_map(|file| Step::Write { file }),
        1 => (0u8..12).prop_map(|file| Step::Stat { file }),
        1 => Just(Step::Dir),
    ]
}

/// One pid's events for its steps (timestamps are filled in when interleaved).
fn events_of(pid: u32, steps: &[Step]) -> Vec<Vec<Event>> {
    let ro = OpenFlags::parse("O_RDONLY");
    steps
        .iter()
        .map(|s| {
            let e = |op, ret| ev(0, pid, op, ret);
            match *s {
                Step::Scan { src, file, size } => {
                    let path = format!("/{}/f{file}.c", if src { "src" } else { "other" });
                    let mut v = vec![
                        e(
                            Op::Open {
                                path: path.clone(),
                                flags: ro,
                            },
                            Some(3),
                        ),
                        e(Op::Stat { path: path.clone() }, Some(0)),
                    ];
                    let chunk = 65_536u64;
                    let mut left = u64::from(size);
                    loop {
                        let n = left.min(chunk);
                        v.push(e(
                            Op::Read {
                                fd: 3,
                                path: path.clone(),
                                off: None,
                                len: chunk,
                            },
                            Some(n as i64),
                        ));
                        left -= n;
                        if n < chunk {
                            break;
                        }
                    }
                    v.push(e(Op::Close { fd: 3, path }, Some(0)));
                    v
                }
                Step::Partial { file } => {
                    let path = format!("/src/p{file}.c");
                    vec![
                        e(
                            Op::Open {
                                path: path.clone(),
                                flags: ro,
                            },
                            Some(4),
                        ),
                        e(
                            Op::Read {
                                fd: 4,
                                path: path.clone(),
                                off: None,
                                len: 4096,
                            },
                            Some(4096),
                        ),
                        e(Op::Close { fd: 4, path }, Some(0)),
                    ]
                }
                Step::Write { file } => {
                    let path = format!("/src/out{file}");
                    vec![
                        e(
                            Op::Open {
                                path: path.clone(),
                                flags: OpenFlags::parse("O_WRONLY|O_CREAT"),
                            },
                            Some(5),
                        ),
                        e(
                            Op::Write {
                                fd: 5,
                                path: path.clone(),
                                off: None,
                                len: 100,
                                append: false,
                            },
                            Some(100),
                        ),
                        e(Op::Close { fd: 5, path }, Some(0)),
                    ]
                }
                Step::Stat { file } => vec![e(
                    Op::Stat {
                        path: format!("/etc/x{file}"),
                    },
                    Some(0),
                )],
                Step::Dir => vec![e(
                    Op::Open {
                        path: "/src".into(),
                        flags: OpenFlags::parse("O_RDONLY|O_DIRECTORY"),
                    },
                    Some(6),
                )],
            }
        })
        .collect()
}

/// Interleaves the pids' steps (each step's events stay together, as one pid's calls are
/// sequential) in the order `picks` chooses, numbering events by their position.
fn interleave(mut per_pid: Vec<Vec<Vec<Event>>>, picks: &[usize]) -> Vec<Event> {
    for p in &mut per_pid {
        p.reverse();
    }
    let mut out = Vec::new();
    let mut i = 0;
    while per_pid.iter().any(|p| !p.is_empty()) {
        let live: Vec<usize> = (0..per_pid.len())
            .filter(|&k| !per_pid[k].is_empty())
            .collect();
        let k = live[picks.get(i).copied().unwrap_or(0) % live.len()];
        i += 1;
        for mut e in per_pid[k].pop().expect("live") {
            e.t = out.len() as u64;
            out.push(e);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every event outside the folded scans survives, in order, per pid; what was removed
    /// is exactly the scans of files an `ndp` op of the same pid names, at the size read.
    #[test]
    fn folding_keeps_every_other_event_in_order(
        a in prop::collection::vec(step(), 0..30),
        b in prop::collection::vec(step(), 0..30),
        picks in prop::collection::vec(0usize..8, 0..80),
        batch in 1usize..6,
    ) {
        let trace = interleave(vec![events_of(10, &a), events_of(20, &b)], &picks);
        let folder = plan(&format!("batch = {batch}"));
        let (out, report) = fold(&folder, &trace);
        // Deterministic.
        prop_assert_eq!(&fold(&folder, &trace).0, &out);
        let kept: BTreeSet<u64> = out.iter().filter(|e| !matches!(e.op, Op::Ndp { .. })).map(|e| e.t).collect();
        for pid in [10, 20] {
            let ins: Vec<u64> = trace.iter().filter(|e| e.pid == pid).map(|e| e.t).collect();
            let outs: Vec<u64> = out
                .iter()
                .filter(|e| e.pid == pid && !matches!(e.op, Op::Ndp { .. }))
                .map(|e| e.t)
                .collect();
            // In order: the kept events are the input's, minus the removed ones.
            let expect: Vec<u64> = ins.iter().copied().filter(|t| kept.contains(t)).collect();
            prop_assert_eq!(outs, expect);
            // Removed events are scan events of files this pid's ndp ops name.
            let mut named: BTreeMap<String, u64> = BTreeMap::new();
            for e in out.iter().filter(|e| e.pid == pid) {
                if let Op::Ndp { paths, sizes, task, .. } = &e.op {
                    prop_assert_eq!(task.as_str(), "grep");
                    prop_assert!(paths.len() <= batch);
                    prop_assert_eq!(paths.len(), sizes.len());
                    for (p, s) in paths.iter().zip(sizes) {
                        *named.entry(p.clone()).or_default() += s;
                    }
                }
            }
            let mut read: BTreeMap<String, u64> = BTreeMap::new();
            for e in trace.iter().filter(|e| e.pid == pid && !kept.contains(&e.t)) {
                let path = match &e.op {
                    Op::Open { path, .. } | Op::Stat { path } | Op::Close { path, .. } => path,
                    Op::Read { path, .. } => {
                        *read.entry(path.clone()).or_default() += e.ret.unwrap_or(0) as u64;
                        path
                    }
                    other => return Err(TestCaseError::fail(format!("removed a {other:?}"))),
                };
                prop_assert!(path.starts_with("/src/f"), "removed {path}");
                prop_assert!(named.contains_key(path), "{path} removed but no ndp op names it");
            }
            for (p, s) in &named {
                prop_assert_eq!(read.get(p).copied().unwrap_or(0), *s, "size of {}", p);
            }
        }
        let folded: u64 = report.rules.iter().map(|r| r.files).sum();
        let ndps = out.iter().filter(|e| matches!(e.op, Op::Ndp { .. })).count() as u64;
        prop_assert_eq!(report.rules[0].requests, ndps);
        prop_assert!(folded >= ndps);
        prop_assert_eq!(report.events_out, out.len() as u64);
    }
}

/// A batch ends where the program wrote: the `ndp` op of the scans before a write comes
/// before it, and the scans after it start another.
#[test]
fn a_write_ends_a_batch_and_stays_in_place() {
    let steps = [
        Step::Scan {
            src: true,
            file: 1,
            size: 10,
        },
        Step::Scan {
            src: true,
            file: 2,
            size: 70_000,
        },
        Step::Write { file: 1 },
        Step::Scan {
            src: true,
            file: 3,
            size: 5,
        },
        Step::Scan {
            src: false,
            file: 4,
            size: 5,
        },
        Step::Partial { file: 5 },
    ];
    let trace = interleave(vec![events_of(1, &steps)], &[]);
    let (out, report) = fold(&plan(""), &trace);
    let ops: Vec<&str> = out.iter().map(|e| e.op.name()).collect();
    assert_eq!(
        ops,
        [
            "ndp", "open", "write", "close", "ndp", "open", "stat", "read", "close", "open",
            "read", "close"
        ]
    );
    let Op::Ndp { paths, sizes, .. } = &out[0].op else {
        unreachable!()
    };
    assert_eq!(paths, &["/src/f1.c", "/src/f2.c"]);
    assert_eq!(sizes, &[10, 70_000]);
    assert_eq!(out[0].t, 0, "placed where the first scan began");
    let r = &report.rules[0];
    assert_eq!((r.files, r.requests, r.bytes), (3, 2, 70_015));
    assert_eq!(report.kept_scans, 1, "the partial read stays on the host");
}

#[test]
fn bad_plans_are_refused_by_name() {
    for (text, says) in [
        ("", "no rules"),
        ("[[rule]]\ntask = \"grep\"\npaths = []", "has no paths"),
        (
            "[[rule]]\ntask = \"grep\"\npaths = [\"src/*\"]",
            "not absolute",
        ),
        ("[[rule]]\ntask = \"grep\"\npaths = [\"/a/[\"]", "path glob"),
        (
            "[[rule]]\ntask = \"grep\"\npaths = [\"/a\"]\nbatch = 0",
            "batch must be",
        ),
        (
            "[[rule]]\ntask = \"grep\"\npaths = [\"/a\"]\ncolour = 1",
            "unknown field",
        ),
    ] {
        let e = Plan::parse(text).and_then(|p| p.folder().map(|_| ()));
        let msg = e.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains(says), "{text:?}: {msg}");
    }
}

#[test]
fn a_rule_that_takes_nothing_is_told_what_the_program_opened_instead() {
    let ro = OpenFlags::parse("O_RDONLY");
    let open = |t, path: &str, fd| {
        ev(
            t,
            1,
            Op::Open {
                path: path.into(),
                flags: ro,
            },
            Some(fd),
        )
    };
    let close = |t, path: &str| {
        ev(
            t,
            1,
            Op::Close {
                fd: 3,
                path: path.into(),
            },
            Some(0),
        )
    };
    let events = [
        open(1, "/usr/lib/libc.so.6", 3),
        close(2, "/usr/lib/libc.so.6"),
        open(3, "/home/me/notes.txt", 3),
        close(4, "/home/me/notes.txt"),
        open(5, "/home/me/notes.txt", 3),
        close(6, "/home/me/notes.txt"),
        // A failed open opened nothing.
        open(7, "/home/me/gone.txt", -2),
    ];
    let (out, report) = fold(&plan(""), &events);
    assert_eq!(out.len(), events.len(), "nothing is folded");
    assert_eq!(report.rules[0].files, 0);
    assert_eq!(report.rules[0].paths, ["/src/**"]);
    assert_eq!(report.unmatched_opens, 3);
    // The library is counted, not shown; a path is shown once.
    assert_eq!(report.unmatched_examples, ["/home/me/notes.txt"]);
}
