//! The trace format: round trips, and malformed input reported with its line number.

use csd_traces::{
    Event, Header, IscFile, Op, OpenFlags, Strictness, SyncRangeFlags, TraceError, TraceReader,
    TraceWriter,
};
use std::collections::BTreeMap;

fn ev(t: u64, pid: u32, op: Op, ret: Option<i64>) -> Event {
    Event {
        t,
        pid,
        fds_of: None,
        op,
        ret,
        dur: Some(900),
        extra: BTreeMap::new(),
    }
}

fn read_all(text: &str, s: Strictness) -> Result<Vec<Event>, TraceError> {
    TraceReader::new(text.as_bytes(), s)?.collect()
}

const HEADER: &str = r#"{"format":"csd-trace","version":1,"source":"test","clock":"ns"}"#;

#[test]
fn every_op_round_trips() {
    let p = |s: &str| s.to_string();
    let mut extra = BTreeMap::new();
    extra.insert("comm".to_string(), serde_json::json!("sqlite3"));
    let events = vec![
        ev(
            0,
            7,
            Op::Open {
                path: p("/d/a b\"c"),
                flags: OpenFlags::parse("O_RDWR|O_CREAT|O_TRUNC"),
            },
            Some(3),
        ),
        ev(
            1,
            7,
            Op::Write {
                fd: 3,
                path: p("/d/a b\"c"),
                off: None,
                len: 4096,
                append: false,
            },
            Some(4096),
        ),
        ev(
            1,
            7,
            Op::Write {
                fd: 3,
                path: p("/d/a b\"c"),
                off: Some(4096),
                len: 10,
                append: true,
            },
            Some(10),
        ),
        ev(
            2,
            7,
            Op::Pwrite {
                fd: 3,
                path: p("/d/a b\"c"),
                off: 8192,
                len: 512,
            },
            Some(512),
        ),
        ev(
            3,
            7,
            Op::Read {
                fd: 3,
                path: p("/d/a b\"c"),
                off: Some(0),
                len: 10,
            },
            Some(10),
        ),
        ev(
            4,
            7,
            Op::Pread {
                fd: 3,
                path: p("/d/a b\"c"),
                off: 1,
                len: 2,
            },
            Some(2),
        ),
        ev(
            5,
            7,
            Op::Fsync {
                fd: 3,
                path: p("/d/a b\"c"),
            },
            Some(0),
        ),
        ev(
            6,
            7,
            Op::Fdatasync {
                fd: 3,
                path: p("/d/a b\"c"),
            },
            Some(0),
        ),
        ev(
            7,
            7,
            Op::Close {
                fd: 3,
                path: p("/d/a b\"c"),
            },
            Some(0),
        ),
        ev(8, 8, Op::Mkdir { path: p("/e") }, None),
        ev(
            9,
            8,
            Op::Rename {
                path: p("/d/a b\"c"),
                to: p("/e/x"),
            },
            Some(0),
        ),
        ev(10, 8, Op::Stat { path: p("/e/x") }, Some(-1)),
        ev(10, 8, Op::Lstat { path: p("/e/l") }, Some(0)),
        ev(10, 8, Op::Readdir { path: p("/e") }, Some(48)),
        ev(
            10,
            8,
            Op::Open {
                path: p("/e/log"),
                flags: OpenFlags::parse("O_WRONLY|O_APPEND|O_DIRECT|O_DSYNC|O_SYNC"),
            },
            Some(5),
        ),
        ev(
            10,
            8,
            Op::Setattr {
                path: p("/e/x"),
                nofollow: false,
            },
            Some(0),
        ),
        ev(
            10,
            8,
            Op::Setattr {
                path: p("/e/l"),
                nofollow: true,
            },
            Some(0),
        ),
        ev(
            10,
            8,
            Op::Open {
                path: p("/e/l"),
                flags: OpenFlags::parse("O_RDONLY|O_PATH|O_NOFOLLOW"),
            },
            Some(6),
        ),
        ev(
            10,
            8,
            Op::Fstat {
                fd: 5,
                path: p("/e/x"),
            },
            Some(0),
        ),
        ev(
            10,
            8,
            Op::Link {
                path: p("/e/x"),
                to: p("/d/x y"),
                follow: false,
            },
            Some(0),
        ),
        ev(
            10,
            8,
            Op::Link {
                path: p("/e/l"),
                to: p("/d/z"),
                follow: true,
            },
            Some(0),
        ),
        ev(
            10,
            8,
            Op::Symlink {
                path: p("/e/l"),
                target: p("../d/a b\"c"),
            },
            Some(0),
        ),
        ev(
            10,
            8,
            Op::Fallocate {
                fd: 5,
                path: p("/e/log"),
                off: 0,
                len: 1 << 20,
                keep_size: true,
            },
            Some(0),
        ),
        ev(
            10,
            8,
            Op::SyncFileRange {
                fd: 5,
                path: p("/e/log"),
                off: 0,
                len: 0,
                flags: SyncRangeFlags {
                    wait_before: true,
                    write: true,
                    wait_after: false,
                },
            },
            Some(0),
        ),
        ev(
            10,
            8,
            Op::Fallocate {
                fd: 5,
                path: p("/e/log"),
                off: 4096,
                len: 8192,
                keep_size: false,
            },
            Some(0),
        ),
        ev(
            11,
            8,
            Op::Truncate {
                path: p("/e/x"),
                len: 100,
            },
            Some(0),
        ),
        ev(
            11,
            8,
            Op::MappedWrite {
                path: p("/e/x"),
                off: 4096,
                len: 10000,
                sync: false,
            },
            Some(0),
        ),
        ev(
            11,
            8,
            Op::MappedWrite {
                path: p("/e/x"),
                off: 0,
                len: 1,
                sync: true,
            },
            Some(0),
        ),
        ev(12, 8, Op::Mknod { path: p("/e/fifo") }, Some(0)),
        ev(12, 8, Op::Unlink { path: p("/e/x") }, Some(0)),
        ev(13, 8, Op::Rmdir { path: p("/e") }, Some(0)),
        ev(
            14,
            9,
            Op::Ndp {
                task: p("stats64"),
                paths: vec![p("/data"), p("/x")],
                args: p("{\"k\":1}"),
                sizes: Vec::new(),
            },
            None,
        ),
        ev(
            14,
            9,
            Op::Ndp {
                task: p("grep"),
                paths: vec![p("/src/a.c"), p("/src/b.c")],
                args: String::new(),
                sizes: vec![4096, 17],
            },
            None,
        ),
        ev(
            15,
            9,
            Op::Isc {
                task: p("grep"),
                files: vec![
                    IscFile {
                        path: p("/l"),
                        mode: csd_device::FileMode::Read,
                    },
                    IscFile {
                        path: p("/o"),
                        mode: csd_device::FileMode::Write,
                    },
                ],
                args: p(""),
            },
            None,
        ),
        ev(
            16,
            10,
            Op::Bread {
                off: 4096,
                len: 8192,
            },
            None,
        ),
        Event {
            extra,
            ..ev(17, 10, Op::Bwrite { off: 0, len: 512 }, None)
        },
        // A thread's event names the table it shares.
        Event {
            fds_of: Some(7),
            ..ev(
                18,
                11,
                Op::Close {
                    fd: 3,
                    path: "/a".into(),
                },
                Some(0),
            )
        },
    ];
    let mut w = TraceWriter::new(Vec::new(), &Header::new("test")).unwrap();
    for e in &events {
        w.write(e).unwrap();
    }
    assert_eq!(w.events(), events.len() as u64);
    let text = String::from_utf8(w.finish().unwrap()).unwrap();
    let back = read_all(&text, Strictness::Strict).unwrap();
    assert_eq!(back, events);
    // Writing what was read gives the same bytes.
    let mut w = TraceWriter::new(Vec::new(), &Header::new("test")).unwrap();
    for e in &back {
        w.write(e).unwrap();
    }
    assert_eq!(String::from_utf8(w.finish().unwrap()).unwrap(), text);
}

#[test]
fn fds_resolve_to_the_path_their_open_returned() {
    let text = format!(
        "{HEADER}\n{}\n{}\n{}\n",
        r#"{"t":0,"pid":1,"op":"open","path":"/a","flags":"O_WRONLY","ret":5}"#,
        r#"{"t":1,"pid":1,"op":"write","fd":5,"len":10,"ret":10}"#,
        r#"{"t":2,"pid":1,"op":"close","fd":5}"#
    );
    let evs = read_all(&text, Strictness::Strict).unwrap();
    assert_eq!(
        evs[1].op,
        Op::Write {
            fd: 5,
            path: "/a".into(),
            off: None,
            len: 10,
            append: false,
        }
    );
    // After close, the fd is gone.
    let text = format!(
        "{text}{}\n",
        r#"{"t":3,"pid":1,"op":"read","fd":5,"len":1}"#
    );
    let e = read_all(&text, Strictness::Strict).unwrap_err().to_string();
    assert!(
        e.contains("line 5") && e.contains("fd 5 of pid 1 is not open"),
        "{e}"
    );
}

#[test]
fn malformed_lines_name_their_line_and_problem() {
    let cases: &[(&str, &str)] = &[
        (
            r#"{"t":1,"pid":1,"op":"write","fd":3,"len":4"#,
            "line 2: not valid JSON",
        ),
        ("this is not json", "line 2: not valid JSON"),
        (r#"[1,2]"#, "line 2: an event must be a JSON object"),
        (
            r#"{"t":1,"pid":1,"op":"frobnicate"}"#,
            "line 2: unknown op \"frobnicate\"",
        ),
        (
            r#"{"t":1,"pid":1,"op":"pwrite","fd":3,"path":"/a","off":0,"len":-5}"#,
            "line 2: field \"len\" is negative (-5)",
        ),
        (
            r#"{"t":1,"pid":1,"op":"read","fd":9,"len":5}"#,
            "line 2: fd 9 of pid 1 is not open",
        ),
        (
            r#"{"t":1,"pid":1,"op":"write","fd":-1,"path":"/a","len":5}"#,
            "line 2: field \"fd\" is negative",
        ),
        (
            r#"{"t":1,"pid":1,"op":"write","fd":1,"path":"/a","len":5,"append":"yes"}"#,
            "line 2: field \"append\" must be true or false, got \"yes\"",
        ),
        (
            r#"{"t":1,"pid":1,"op":"mapped_write","path":"/a","off":0,"len":5,"sync":1}"#,
            "line 2: field \"sync\" must be true or false, got 1",
        ),
        (
            r#"{"t":1,"pid":1,"op":"setattr","path":"/a","nofollow":"yes"}"#,
            "line 2: field \"nofollow\" must be true or false, got \"yes\"",
        ),
        (
            r#"{"t":1,"pid":1,"op":"link","path":"/a","to":"/b","follow":0}"#,
            "line 2: field \"follow\" must be true or false, got 0",
        ),
        (
            r#"{"t":1,"pid":1,"op":"mapped_write","path":"/a","len":5}"#,
            "line 2: missing field \"off\"",
        ),
        (
            r#"{"pid":1,"op":"mkdir","path":"/a"}"#,
            "line 2: missing field \"t\"",
        ),
        (
            r#"{"t":1,"pid":1,"op":"mkdir"}"#,
            "line 2: missing field \"path\"",
        ),
        (
            r#"{"t":1,"pid":1,"op":"mkdir","path":""}"#,
            "line 2: field \"path\" is an empty path",
        ),
        (
            r#"{"t":"soon","pid":1,"op":"mkdir","path":"/a"}"#,
            "line 2: field \"t\" must be a non-negative integer",
        ),
        (
            r#"{"t":1,"pid":1,"op":"ndp","task":"x","paths":[]}"#,
            "line 2: field \"paths\" must be a non-empty array",
        ),
        (
            r#"{"t":1,"pid":1,"op":"ndp","task":"x","paths":["/a","/b"],"sizes":[1]}"#,
            "line 2: field \"sizes\" must be an array of one byte count per path (2)",
        ),
        (
            r#"{"t":1,"pid":1,"op":"ndp","task":"x","paths":["/a"],"sizes":[900000000000]}"#,
            "line 2: \"sizes\" holds 900000000000, over the 4294967296-byte limit",
        ),
        (
            r#"{"t":1,"pid":1,"op":"isc","task":"x","files":[{"path":"/a","mode":"x"}]}"#,
            "line 2: each of \"files\"",
        ),
    ];
    for (line, want) in cases {
        let text = format!("{HEADER}\n{line}\n");
        let e = read_all(&text, Strictness::Strict).unwrap_err().to_string();
        assert!(e.contains(want), "{line}: got '{e}', want '{want}'");
    }
    // Header problems are line 1.
    for (header, want) in [
        ("", "line 1: the trace is empty"),
        (
            r#"{"format":"csd-trace","version":2}"#,
            "trace version 2 is not supported",
        ),
        (
            r#"{"format":"other","version":1}"#,
            "header format is \"other\"",
        ),
        (r#"{"version":1}"#, "not a csd trace?"),
        (
            r#"{"format":"csd-trace","version":1,"clock":"us"}"#,
            "only \"ns\"",
        ),
    ] {
        let e = TraceReader::new(header.as_bytes(), Strictness::Strict)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(want), "{header}: got '{e}'");
    }
}

#[test]
fn lenient_mode_counts_unknown_ops_instead_of_failing() {
    let text = format!(
        "{HEADER}\n{}\n{}\n{}\n\n{}\n",
        r#"{"t":1,"pid":1,"op":"mmap","len":4096}"#,
        r#"{"t":2,"pid":1,"op":"mkdir","path":"/a","future_field":[1,2]}"#,
        r#"{"t":3,"pid":1,"op":"mmap"}"#,
        r#"{"t":4,"pid":1,"op":"ioctl"}"#
    );
    let mut r = TraceReader::new(text.as_bytes(), Strictness::Lenient).unwrap();
    let evs: Vec<Event> = r.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(
        evs[0].extra["future_field"],
        serde_json::json!([1, 2]),
        "unknown fields are kept"
    );
    assert_eq!(r.skipped().get("mmap"), Some(&2));
    assert_eq!(r.skipped().get("ioctl"), Some(&1));
    assert_eq!(r.header().source, "test");
}
