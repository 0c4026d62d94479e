//! Importers: a real strace capture, unfinished/resumed pairs, block formats, and garbage.

use csd_traces::import::{convert, ConvertError, ImportFormat};
use csd_traces::{Event, Header, Op, Strictness, TraceReader, TraceWriter};
use proptest::prelude::*;

fn events(source: ImportFormat, text: &str) -> Result<Vec<Event>, ConvertError> {
    let mut out = Vec::new();
    convert(source, text.as_bytes(), |e| {
        out.push(e);
        Ok(())
    })?;
    Ok(out)
}

/// `evs` written as a csd trace and read back: the text, and the events.
fn round_trip(evs: &[Event]) -> (String, Vec<Event>) {
    let mut w = TraceWriter::new(Vec::new(), &Header::new("strace")).unwrap();
    for e in evs {
        w.write(e).unwrap();
    }
    let bytes = w.finish().unwrap();
    let back = TraceReader::new(&bytes[..], Strictness::Strict)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    (String::from_utf8(bytes).unwrap(), back)
}

/// The paths of the events of op `name`, in order.
fn paths_of<'a>(evs: &'a [Event], name: &str) -> Vec<&'a str> {
    evs.iter()
        .filter(|e| e.op.name() == name)
        .filter_map(|e| e.op.walked_path())
        .collect()
}

#[test]
fn a_real_strace_capture_converts_and_reads_back() {
    // `strace -f -ttt -T -y -s0 -o shell.strace sh -c 'mkdir d; echo hi > d/a;
    //  cat d/a > /dev/null; mv d/a d/b; sync d/b; ls d; rm d/b; rmdir d'` in /tmp/st.
    let text = include_str!("fixtures/shell.strace");
    let evs = events(ImportFormat::Strace, text).unwrap();
    let ops: Vec<&Op> = evs.iter().map(|e| &e.op).collect();
    let has = |want: &Op| ops.contains(&want);
    assert!(
        has(&Op::Mkdir {
            path: "/tmp/st/d".into()
        }),
        "relative mkdir resolved with the cwd"
    );
    assert!(ops.iter().any(|o| matches!(o, Op::Open { path, flags } if path == "/tmp/st/d/a" && flags.write && flags.create && flags.truncate)));
    assert!(
        ops.iter()
            .any(|o| matches!(o, Op::Write { fd: 1, path, len: 3, .. } if path == "/tmp/st/d/a")),
        "the shell's redirected stdout"
    );
    assert!(has(&Op::Rename {
        path: "/tmp/st/d/a".into(),
        to: "/tmp/st/d/b".into()
    }));
    assert!(has(&Op::Fsync {
        fd: 3,
        path: "/tmp/st/d/b".into()
    }));
    assert!(has(&Op::Unlink {
        path: "/tmp/st/d/b".into()
    }));
    assert!(has(&Op::Rmdir {
        path: "/tmp/st/d".into()
    }));
    assert!(
        !ops.iter()
            .any(|o| matches!(o, Op::Open { path, .. } if path.starts_with("/proc"))),
        "pseudo files are ignored"
    );
    // Times are relative, non-decreasing per pid, and durations came from -T.
    assert!(
        evs[0].t < 10_000_000,
        "relative to the trace start, not the epoch"
    );
    // Every call's event has its -T duration; the one without is the close the shell's
    // `dup2` made when it put its stdout back over `d/a`, which a replay held open.
    let untimed: Vec<&Op> = evs
        .iter()
        .filter(|e| e.dur.is_none())
        .map(|e| &e.op)
        .collect();
    assert_eq!(
        untimed,
        [&Op::Close {
            fd: 1,
            path: "/tmp/st/d/a".into()
        }]
    );
    // Failed calls keep their errno.
    assert!(evs
        .iter()
        .any(|e| e.ret == Some(-1) && e.extra.get("errno").is_some_and(|v| v == "ENOENT")));

    assert_eq!(round_trip(&evs).1, evs);
}

#[test]
fn unfinished_and_resumed_halves_are_joined() {
    let text = "\
100 1000.000000 openat(AT_FDCWD</w>, \"x\", O_WRONLY|O_CREAT, 0644 <unfinished ...>
101 1000.000100 fsync(4</w/y>) = 0 <0.000200>
100 1000.000300 <... openat resumed>) = 3</w/x> <0.000300>
100 1000.000400 pwrite64(3</w/x>, \"\"..., 4096, 8192) = 4096 <0.000010>
101 1000.000500 <... read resumed>\"\"..., 10) = 10 <0.1>
[pid 102] 1000.000600 unlinkat(AT_FDCWD</w>, \"sub\", AT_REMOVEDIR) = 0 <0.000001>
100 1000.000700 +++ exited with 0 +++
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    // The fourth is the close of /w/x that 100's exit made.
    assert_eq!(evs.len(), 5, "{evs:?}");
    assert_eq!(
        evs[0].op,
        Op::Fsync {
            fd: 4,
            path: "/w/y".into()
        }
    );
    assert_eq!(evs[0].t, 100_000);
    assert!(matches!(&evs[1].op, Op::Open { path, .. } if path == "/w/x"));
    assert_eq!(evs[1].t, 0, "a resumed call keeps its start time");
    assert_eq!(evs[1].dur, Some(300_000));
    assert_eq!(
        evs[2].op,
        Op::Pwrite {
            fd: 3,
            path: "/w/x".into(),
            off: 8192,
            len: 4096
        }
    );
    assert_eq!(
        evs[3].op,
        Op::Rmdir {
            path: "/w/sub".into()
        }
    );
    assert_eq!(evs[3].pid, 102);
}

#[test]
fn block_traces_become_device_reads_and_writes() {
    let fio = "fio version 3 iolog\n2 /dev/nvme0n1 add\n872 /dev/nvme0n1 open\n878 /dev/nvme0n1 write 0 16384\n1878 /dev/nvme0n1 read 4096 4096\n2000 /dev/nvme0n1 close\n";
    let evs = events(ImportFormat::FioIolog3, fio).unwrap();
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[0].op, Op::Bwrite { off: 0, len: 16384 });
    assert_eq!(
        (evs[0].t, evs[1].t),
        (876_000, 1_876_000),
        "µs since the first line"
    );
    let msr = "128166372003061629,hm,0,Read,3154665472,4096,1331\n128166372016382155,hm,0,Write,3154669568,8192,9055\n";
    let evs = events(ImportFormat::Msr, msr).unwrap();
    assert_eq!(
        evs[0].op,
        Op::Bread {
            off: 3154665472,
            len: 4096
        }
    );
    assert_eq!(evs[1].t, (128166372016382155 - 128166372003061629) * 100);
    assert_eq!(evs[1].dur, Some(905_500));
    let disksim = "0.000000 0 1000 8 1\n1.500000 0 2000 16 0\n";
    let evs = events(ImportFormat::Disksim, disksim).unwrap();
    assert_eq!(
        evs[0].op,
        Op::Bread {
            off: 512_000,
            len: 4096
        }
    );
    assert_eq!(
        evs[1].op,
        Op::Bwrite {
            off: 1_024_000,
            len: 8192
        }
    );
    assert_eq!(evs[1].t, 1_500_000);
}

#[test]
fn bad_foreign_lines_name_format_and_line() {
    for (src, text, want) in [
        (
            ImportFormat::FioIolog3,
            "fio version 2 iolog\n",
            "fio-iolog3 line 1: expected the header",
        ),
        (
            ImportFormat::FioIolog3,
            "fio version 3 iolog\n1 f read 0\n",
            "fio-iolog3 line 2: read needs an offset and a length",
        ),
        (
            ImportFormat::FioIolog3,
            "fio version 3 iolog\n1 f read -4 5\n",
            "offset '-4' is not a non-negative integer",
        ),
        (
            ImportFormat::Msr,
            "1,h,0,Read,0,4096\n",
            "msr line 1: expected 7 comma-separated fields",
        ),
        (
            ImportFormat::Msr,
            "1,h,0,Erase,0,4096,1\n",
            "Type 'Erase' is neither Read nor Write",
        ),
        (
            ImportFormat::Msr,
            "5,h,0,Read,0,4096,1\n4,h,0,Read,0,4096,1\n",
            "msr line 2: timestamp 4 runs backwards",
        ),
        (
            ImportFormat::Disksim,
            "0.0 0 x 8 1\n",
            "disksim line 1: lba 'x'",
        ),
        (
            ImportFormat::Strace,
            "garbage here\n",
            "strace line 1: expected an absolute timestamp",
        ),
        (
            ImportFormat::Strace,
            "1 2.5 read(3</a>, \"\", 4)\n",
            "strace line 1: expected 'syscall(args) = result'",
        ),
    ] {
        let e = events(src, text).unwrap_err().to_string();
        assert!(e.contains(want), "{text:?}: got '{e}'");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn importers_never_panic_on_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        for src in ImportFormat::ALL {
            let _ = events(src, &text);
        }
        let _ = TraceReader::new(&bytes[..], Strictness::Lenient).map(|r| r.count());
    }

    #[test]
    fn importers_never_panic_on_plausible_lines(lines in prop::collection::vec(
        prop_oneof![
            "[0-9]{1,5} [0-9]{1,10}\\.[0-9]{0,9} [a-z0-9_]{1,10}\\([^\n]{0,40}",
            "[0-9]{1,5} [0-9]{1,10}\\.[0-9]{1,6} <\\.\\.\\. [a-z]{1,8} resumed>[^\n]{0,30}",
            "[0-9 .,a-zA-Z/<>\"()=-]{0,60}",
            "fio version 3 iolog",
            "[0-9]{1,20},[a-z]{0,3},[0-9]{1,3},(Read|Write|x),[0-9-]{1,21},[0-9]{1,21},[0-9]{1,21}",
        ], 0..20)) {
        let text = lines.join("\n");
        for src in ImportFormat::ALL {
            let _ = events(src, &text);
        }
    }

    /// Opens, dups, forks, exits, seeks and writes in any order, with any fds: every line
    /// converts, and a write's offset, when it has one, is where some description was.
    #[test]
    fn fd_sharing_calls_in_any_order_convert(calls in prop::collection::vec(
        (0u8..8, 1u32..4, 0i64..6, 0i64..6, 0u64..1 << 40), 0..60)) {
        let lines: Vec<String> = calls
            .iter()
            .enumerate()
            .map(|(i, &(kind, pid, a, b, n))| {
                let t = format!("{pid} 1.{i:06}");
                match kind {
                    0 => format!("{t} openat(AT_FDCWD</w>, \"f{b}\", O_WRONLY|O_CREAT, 0666) = {a}</w/f{b}> <0.000001>"),
                    1 => format!("{t} openat(AT_FDCWD</w>, \"f{b}\", O_WRONLY|O_APPEND, 0666) = {a}</w/f{b}> <0.000001>"),
                    2 => format!("{t} dup2({a}</w/f{a}>, {b}) = {b}</w/f{a}> <0.000001>"),
                    3 => format!("{t} write({a}</w/f{a}>, \"\"..., {n}) = {n} <0.000001>"),
                    4 => format!("{t} lseek({a}</w/f{a}>, {n}, SEEK_SET) = {n} <0.000001>"),
                    5 => format!("{t} clone(child_stack=NULL, flags=SIGCHLD) = {} <0.000001>", 1 + b as u32 % 3),
                    6 => format!("{t} +++ exited with 0 +++"),
                    _ => format!("{t} close({a}</w/f{a}>) = 0 <0.000001>"),
                }
            })
            .collect();
        let evs = events(ImportFormat::Strace, &lines.join("\n")).unwrap();
        let writes = calls.iter().filter(|c| c.0 == 3).count();
        prop_assert_eq!(evs.iter().filter(|e| e.op.name() == "write").count(), writes);
        let limit = calls.iter().map(|c| c.4).sum::<u64>();
        for e in &evs {
            if let Op::Write { off: Some(off), .. } = e.op {
                prop_assert!(off <= limit, "{off}");
            }
        }
    }
}

#[test]
fn sync_and_syncfs_become_sync_events_that_round_trip() {
    let text = "\
100 1000.000000 sync() = 0 <0.002000>
100 1000.003000 syncfs(3</w/x>) = 0 <0.001000>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    assert_eq!(evs.len(), 2, "{evs:?}");
    assert!(evs.iter().all(|e| e.op == Op::Sync));
    let (text, back) = round_trip(&evs);
    assert!(text.contains(r#""op":"sync""#), "{text}");
    assert_eq!(back, evs);
}

fn stats(text: &str) -> csd_traces::import::ImportStats {
    convert(ImportFormat::Strace, text.as_bytes(), |_| Ok(())).unwrap()
}

#[test]
fn a_copy_between_files_is_a_read_of_one_and_a_write_of_the_other() {
    // What coreutils 9's `cp` and `cat` do, sendfile to a socket and between files (Python's
    // `shutil.copyfile`; strace 6 prints the offset the call left as `[0] => [8]`, older
    // ones `[0 => 8]`), a splice into a pipe (strace -f -ttt -T -y), and a copy that failed
    // (cp then falls back to read and write).
    let text = "\
7 1000.000000 copy_file_range(3</w/a>, NULL, 4</w/b>, NULL, 9223372035781033984, 0) = 300000 <0.000298>
7 1000.001000 copy_file_range(3</w/a>, [4096], 4</w/b>, [8192], 65536, 0) = 65536 <0.000100>
7 1000.002000 sendfile(5<TCP:[10.0.0.1:80->10.0.0.2:5000]>, 3</w/a>, [0 => 1000], 1000) = 1000 <0.000050>
7 1000.002500 sendfile(4</w/b>, 3</w/a>, [0] => [8], 8388608) = 8 <0.000010>
7 1000.003000 splice(3</w/a>, NULL, 6<pipe:[123]>, NULL, 512, 0) = 512 <0.000010>
7 1000.004000 copy_file_range(3</w/a>, NULL, 8</x/c>, NULL, 100, 0) = -1 EXDEV (Invalid cross-device link) <0.000010>
7 1000.005000 copy_file_range(3</w/a>, 0x7ffd0000, 4</w/b>, NULL, 100, 0) = 100 <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let ops: Vec<&Op> = evs.iter().map(|e| &e.op).collect();
    let a = || "/w/a".to_string();
    let b = || "/w/b".to_string();
    assert_eq!(
        ops,
        [
            &Op::Read {
                fd: 3,
                path: a(),
                off: None,
                len: 300000
            },
            &Op::Write {
                fd: 4,
                path: b(),
                off: None,
                len: 300000,
                append: false,
            },
            &Op::Pread {
                fd: 3,
                path: a(),
                off: 4096,
                len: 65536
            },
            &Op::Pwrite {
                fd: 4,
                path: b(),
                off: 8192,
                len: 65536
            },
            &Op::Pread {
                fd: 3,
                path: a(),
                off: 0,
                len: 1000
            },
            &Op::Pread {
                fd: 3,
                path: a(),
                off: 0,
                len: 8
            },
            &Op::Write {
                fd: 4,
                path: b(),
                off: None,
                len: 8,
                append: false,
            },
            &Op::Read {
                fd: 3,
                path: a(),
                off: None,
                len: 512
            },
            &Op::Read {
                fd: 3,
                path: a(),
                off: None,
                len: 0
            },
            &Op::Write {
                fd: 8,
                path: "/x/c".into(),
                off: None,
                len: 0,
                append: false,
            },
        ],
        "{evs:#?}"
    );
    // Both halves of a copy carry the call's time, result and errno.
    assert_eq!((evs[0].t, evs[1].t), (0, 0));
    assert_eq!((evs[0].ret, evs[1].ret), (Some(300000), Some(300000)));
    assert!(evs[8..]
        .iter()
        .all(|e| e.ret == Some(-1) && e.extra.get("errno").is_some_and(|v| v == "EXDEV")));
    let s = stats(text);
    assert_eq!(s.events, 10);
    assert_eq!(
        s.skipped.get("copy_file_range: offset is not a number"),
        Some(&1),
        "{s:?}"
    );
    assert_eq!(s.ignored, 0, "{s:?}");
}

#[test]
fn an_lseek_gives_the_next_read_or_write_through_its_fd_an_offset() {
    let text = "\
7 1000.000000 lseek(3</w/a>, -5, SEEK_END) = 299995 <0.000010>
7 1000.000100 read(3</w/a>, 0x7ffd0000, 5) = -1 EINTR (Interrupted system call) <0.000010>
7 1000.000200 read(3</w/a>, \"\"..., 5) = 5 <0.000010>
7 1000.000300 read(3</w/a>, \"\", 5) = 0 <0.000010>
7 1000.000400 _llseek(4</w/b>, 0, [4096], SEEK_SET) = 0 <0.000010>
7 1000.000500 close(4</w/b>) = 0 <0.000010>
7 1000.000600 write(4</w/c>, \"\"..., 10) = 10 <0.000010>
8 1000.000700 lseek(3</w/a>, 100, SEEK_SET) = 100 <0.000010>
7 1000.000800 write(3</w/a>, \"\"..., 10) = 10 <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let offs: Vec<(u32, Option<u64>)> = evs
        .iter()
        .filter_map(|e| match &e.op {
            Op::Read { off, .. } | Op::Write { off, .. } => Some((e.pid, *off)),
            _ => None,
        })
        .collect();
    assert_eq!(
        offs,
        [
            (7, Some(299995)), // the failed read leaves the offset for the next one
            (7, Some(299995)),
            (7, None), // the replay follows the fd from there
            (7, None), // a close forgets what an lseek said of the fd number
            (7, None), // another pid's lseek is another fd table's
        ],
        "{evs:#?}"
    );
}

#[test]
fn calls_that_change_files_out_of_the_traces_sight_are_counted_and_attributes_are_setattrs() {
    let text = "\
7 1000.000000 fallocate(3</w/a>, FALLOC_FL_KEEP_SIZE|FALLOC_FL_PUNCH_HOLE, 0, 1048576) = 0 <0.000010>
7 1000.000100 mmap(NULL, 4096, PROT_READ|PROT_WRITE, MAP_SHARED, 3</w/a>, 0) = 0x7f0000000000 <0.000010>
7 1000.000200 mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, 4</usr/lib/libc.so.6>, 0) = 0x7f0000100000 <0.000010>
7 1000.000400 fallocate(6<pipe:[1]>, 0, 0, 10) = -1 ESPIPE (Illegal seek) <0.000010>
7 1000.000500 utimensat(AT_FDCWD</w>, \"a\", [{tv_sec=1, tv_nsec=0}, {tv_sec=1, tv_nsec=0}], AT_SYMLINK_NOFOLLOW) = 0 <0.000010>
7 1000.000600 utimensat(3</w/a>, NULL, NULL, 0) = 0 <0.000010>
7 1000.000700 fchmod(1</dev/pts/0>, 0600) = 0 <0.000010>
7 1000.000800 chmod(\"/w/a\", 0644) = -1 EPERM (Operation not permitted) <0.000010>
7 1000.000900 linkat(3</w/a>, \"\", AT_FDCWD</w>, \"h\", AT_EMPTY_PATH) = 0 <0.000010>
7 1000.001000 io_uring_enter(4<anon_inode:[io_uring]>, 8, 8, IORING_ENTER_GETEVENTS, NULL, 8) = 8 <0.000010>
7 1000.001100 io_uring_enter(4<anon_inode:[io_uring]>, 0, 1, IORING_ENTER_GETEVENTS, NULL, 8) = 0 <0.000010>
7 1000.001200 io_submit(0x7f0000001000, 2, [{aio_lio_opcode=IOCB_CMD_PREAD, aio_fildes=3}]) = 2 <0.000010>
7 1000.001300 renameat2(AT_FDCWD</w>, \"a\", AT_FDCWD</w>, \"b\", RENAME_EXCHANGE) = 0 <0.000010>
";
    let s = stats(text);
    assert_eq!(s.events, 3);
    let n = |why: &str| s.skipped.get(why).copied();
    assert_eq!(
        n("fallocate: mode FALLOC_FL_KEEP_SIZE|FALLOC_FL_PUNCH_HOLE is not modelled"),
        Some(1),
        "{s:?}"
    );
    // A shared writable mapping is carried (its stores become `mapped_write`s, see below);
    // neither it nor a private read-only one (a library) is counted.
    assert!(!s.skipped.keys().any(|k| k.starts_with("mmap")), "{s:?}");
    assert_eq!(
        n("linkat: linking an fd (AT_EMPTY_PATH) is not modelled"),
        Some(1)
    );
    assert_eq!(
        n("io_uring_enter: I/O submitted through io_uring is not traced"),
        Some(1),
        "only the call that submitted: {s:?}"
    );
    assert_eq!(
        n("io_submit: I/O submitted through Linux AIO is not traced"),
        Some(1)
    );
    assert_eq!(n("renameat2: RENAME_EXCHANGE is not modelled"), Some(1));
    assert_eq!(
        s.ignored, 5,
        "the two mappings (nothing released yet), the pipe, the terminal and the ring's wait: {s:?}"
    );
    let setattrs: Vec<(String, Option<i64>)> = events(ImportFormat::Strace, text)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.op {
            Op::Setattr { path, .. } => Some((path, e.ret)),
            _ => None,
        })
        .collect();
    assert_eq!(
        setattrs,
        [
            ("/w/a".to_string(), Some(0)),
            ("/w/a".to_string(), Some(0)),
            ("/w/a".to_string(), Some(-1)),
        ],
        "by path, by fd, and a failed chmod (which the replay skips)"
    );
}

#[test]
fn fallocate_sets_blocks_aside_in_the_two_modes_that_do() {
    // `posix_fallocate` (mode 0), RocksDB's KEEP_SIZE preallocation, one that failed, and a
    // hole punched (counted, not carried).
    let text = "\
7 1000.000000 fallocate(3</w/a>, 0, 0, 1048576) = 0 <0.000010>
7 1000.000100 fallocate(4</w/000012.log>, FALLOC_FL_KEEP_SIZE, 65536, 4194304) = 0 <0.000010>
7 1000.000200 fallocate(3</w/a>, 0, 0, 1099511627776) = -1 ENOSPC (No space left on device) <0.000010>
7 1000.000300 fallocate(3</w/a>, FALLOC_FL_KEEP_SIZE|FALLOC_FL_PUNCH_HOLE, 0, 4096) = 0 <0.000010>
7 1000.000400 fallocate(3</w/a>, 0, -1, 4096) = -1 EINVAL (Invalid argument) <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let got: Vec<(&Op, Option<i64>)> = evs.iter().map(|e| (&e.op, e.ret)).collect();
    let fallocate = |fd, path: &str, off, len, keep_size| Op::Fallocate {
        fd,
        path: path.into(),
        off,
        len,
        keep_size,
    };
    assert_eq!(
        got,
        [
            (&fallocate(3, "/w/a", 0, 1 << 20, false), Some(0)),
            (
                &fallocate(4, "/w/000012.log", 65536, 4 << 20, true),
                Some(0)
            ),
            (&fallocate(3, "/w/a", 0, 1 << 40, false), Some(-1)),
        ]
    );
    let s = stats(text);
    assert_eq!(
        s.skipped
            .get("fallocate: mode FALLOC_FL_KEEP_SIZE|FALLOC_FL_PUNCH_HOLE is not modelled"),
        Some(&1),
        "{s:?}"
    );
    assert_eq!(
        s.skipped.get("fallocate: negative offset"),
        Some(&1),
        "{s:?}"
    );
}

#[test]
fn sync_file_range_keeps_its_range_and_flags() {
    // PostgreSQL's checkpointer (start writeback, do not wait), a full wait, the ARM
    // spelling with its flags second, and flags this csdlab does not know.
    let text = "\
7 1000.000000 sync_file_range(3</pg/base/1/16384>, 0, 262144, SYNC_FILE_RANGE_WRITE) = 0 <0.000010>
7 1000.000100 sync_file_range(3</pg/base/1/16384>, 8192, 0, SYNC_FILE_RANGE_WAIT_BEFORE|SYNC_FILE_RANGE_WRITE|SYNC_FILE_RANGE_WAIT_AFTER) = 0 <0.000010>
7 1000.000200 sync_file_range2(3</pg/base/1/16384>, SYNC_FILE_RANGE_WRITE, 4096, 4096) = 0 <0.000010>
7 1000.000300 sync_file_range(3</pg/base/1/16384>, 0, 0, 0x10) = 0 <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let got: Vec<(u64, u64, String)> = evs
        .iter()
        .map(|e| match &e.op {
            Op::SyncFileRange {
                path,
                off,
                len,
                flags,
                ..
            } => {
                assert_eq!(path, "/pg/base/1/16384");
                (*off, *len, flags.to_flags())
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        got,
        [
            (0, 262144, "SYNC_FILE_RANGE_WRITE".to_string()),
            (
                8192,
                0,
                "SYNC_FILE_RANGE_WAIT_BEFORE|SYNC_FILE_RANGE_WRITE|SYNC_FILE_RANGE_WAIT_AFTER"
                    .to_string()
            ),
            (4096, 4096, "SYNC_FILE_RANGE_WRITE".to_string()),
        ]
    );
    let s = stats(text);
    assert_eq!(s.skipped.len(), 1, "{s:?}");
    assert!(
        s.skipped
            .keys()
            .all(|k| k.contains("unknown sync_file_range flag '0x10'")),
        "{s:?}"
    );
}

#[test]
fn a_hard_link_names_the_file_and_its_new_name() {
    // `ln` uses linkat (`ln -L` with AT_SYMLINK_FOLLOW); git names each object it writes by
    // linking its temporary file.
    let text = "\
7 1000.000000 linkat(AT_FDCWD</w>, \"a\", 3</w/d>, \"b\", 0) = 0 <0.000010>
7 1000.000100 link(\".git/objects/0a/tmp_obj_L1UM2b\", \".git/objects/0a/8695e0\") = 0 <0.000022>
7 1000.000200 linkat(AT_FDCWD</w>, \"a\", AT_FDCWD</w>, \"a\", 0) = -1 EEXIST (File exists) <0.000010>
7 1000.000300 linkat(AT_FDCWD</w>, \"sl\", AT_FDCWD</w>, \"hard\", AT_SYMLINK_FOLLOW) = 0 <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let got: Vec<(&Op, Option<i64>)> = evs.iter().map(|e| (&e.op, e.ret)).collect();
    let link = |path: &str, to: &str| Op::Link {
        path: path.into(),
        to: to.into(),
        follow: false,
    };
    assert_eq!(
        got,
        [
            (&link("/w/a", "/w/d/b"), Some(0)),
            (
                &link(
                    "/w/.git/objects/0a/tmp_obj_L1UM2b",
                    "/w/.git/objects/0a/8695e0"
                ),
                Some(0)
            ),
            (&link("/w/a", "/w/a"), Some(-1)),
            (
                &Op::Link {
                    path: "/w/sl".into(),
                    to: "/w/hard".into(),
                    follow: true,
                },
                Some(0)
            ),
        ]
    );
}

#[test]
fn a_file_unlinked_while_open_keeps_its_calls_and_an_o_tmpfile_is_made_and_unlinked() {
    // SQLite's temporary file (unlinked, then written through its fd, which -y shows as
    // deleted), and Python's TemporaryFile (O_TMPFILE: a file with no name, shown as
    // `/tmp/#1234`).
    let text = "\
7 1000.000000 openat(AT_FDCWD</w>, \"/var/tmp/etilqs_1\", O_RDWR|O_CREAT|O_EXCL, 0600) = 5</var/tmp/etilqs_1> <0.000010>
7 1000.000100 unlink(\"/var/tmp/etilqs_1\") = 0 <0.000010>
7 1000.000200 pwrite64(5</var/tmp/etilqs_1>(deleted), \"\"..., 4096, 0) = 4096 <0.000010>
7 1000.000300 close(5</var/tmp/etilqs_1>(deleted)) = 0 <0.000010>
7 1000.000400 openat(AT_FDCWD</w>, \"/tmp\", O_RDWR|O_EXCL|O_CLOEXEC|O_TMPFILE, 0600) = 3</tmp/#9994286>(deleted) <0.000010>
7 1000.000500 write(3</tmp/#9994286>(deleted), \"\"..., 100) = 100 <0.000010>
7 1000.000600 openat(AT_FDCWD</w>, \"/tmp\", O_RDWR|O_TMPFILE, 0600) = -1 EOPNOTSUPP (Operation not supported) <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let got: Vec<(&str, &str, Option<i64>)> = evs
        .iter()
        .map(|e| {
            let path = match &e.op {
                Op::Open { path, .. }
                | Op::Unlink { path }
                | Op::Pwrite { path, .. }
                | Op::Write { path, .. }
                | Op::Close { path, .. } => path.as_str(),
                _ => "?",
            };
            (e.op.name(), path, e.ret)
        })
        .collect();
    assert_eq!(
        got,
        [
            ("open", "/var/tmp/etilqs_1", Some(5)),
            ("unlink", "/var/tmp/etilqs_1", Some(0)),
            ("pwrite", "/var/tmp/etilqs_1", Some(4096)),
            ("close", "/var/tmp/etilqs_1", Some(0)),
            ("open", "/tmp/#9994286", Some(3)),
            ("unlink", "/tmp/#9994286", Some(0)),
            ("write", "/tmp/#9994286", Some(100)),
            ("open", "/tmp", Some(-1)),
        ],
        "{evs:#?}"
    );
    let Op::Open { flags, .. } = &evs[4].op else {
        unreachable!()
    };
    assert!(flags.create && flags.write, "{flags:?}");
}

#[test]
fn a_symbolic_link_keeps_its_target_as_given() {
    // `ln -s` (symlinkat), an absolute target through symlink(2), and one that failed.
    let text = "\
7 1000.000000 symlinkat(\"../lib/libz.so.1\", AT_FDCWD</w/bin>, \"libz.so\") = 0 <0.000010>
7 1000.000100 symlink(\"/etc/hosts\", \"/w/hosts\") = 0 <0.000010>
7 1000.000200 symlinkat(\"x\", 3</w/d>, \"y\") = -1 EEXIST (File exists) <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let got: Vec<(&Op, Option<i64>)> = evs.iter().map(|e| (&e.op, e.ret)).collect();
    let link = |path: &str, target: &str| Op::Symlink {
        path: path.into(),
        target: target.into(),
    };
    assert_eq!(
        got,
        [
            (&link("/w/bin/libz.so", "../lib/libz.so.1"), Some(0)),
            (&link("/w/hosts", "/etc/hosts"), Some(0)),
            (&link("/w/d/y", "x"), Some(-1)),
        ]
    );
}

#[test]
fn a_directory_listing_is_one_readdir() {
    // `ls`: getdents64 until it returns 0; then `rewinddir` (an lseek to 0) and again; a
    // second directory open at the same fd number after a close.
    let text = "\
7 1000.000000 openat(AT_FDCWD</w>, \"d\", O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY) = 3</w/d> <0.000010>
7 1000.000100 getdents64(3</w/d>, 0x5600 /* 300 entries */, 32768) = 32760 <0.000010>
7 1000.000200 getdents64(3</w/d>, 0x5600 /* 12 entries */, 32768) = 480 <0.000010>
7 1000.000300 getdents64(3</w/d>, 0x5600 /* 0 entries */, 32768) = 0 <0.000010>
7 1000.000400 lseek(3</w/d>, 0, SEEK_SET) = 0 <0.000010>
7 1000.000500 getdents64(3</w/d>, 0x5600 /* 300 entries */, 32768) = 32760 <0.000010>
7 1000.000600 close(3</w/d>) = 0 <0.000010>
7 1000.000700 openat(AT_FDCWD</w>, \"e\", O_RDONLY|O_DIRECTORY) = 3</w/e> <0.000010>
7 1000.000800 getdents64(3</w/e>, 0x5600, 32768) = -1 EACCES (Permission denied) <0.000010>
7 1000.000900 getdents64(3</w/e>, 0x5600 /* 2 entries */, 32768) = 48 <0.000010>
7 1000.001000 getdents64(3</w/e>, 0x5600 /* 0 entries */, 32768) = 0 <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let listed: Vec<(&str, Option<i64>)> = evs
        .iter()
        .filter_map(|e| match &e.op {
            Op::Readdir { path } => Some((path.as_str(), e.ret)),
            _ => None,
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("/w/d", Some(32760)),
            ("/w/d", Some(32760)),
            ("/w/e", Some(-1)),
            ("/w/e", Some(48)),
        ],
        "{evs:#?}"
    );
}

#[test]
fn access_walks_as_stat_readlink_and_nofollow_as_lstat_fstat_not_at_all_and_openat2_opens() {
    let text = "7 1000.000000 access(\"/etc/ld.so.preload\", R_OK) = -1 ENOENT (No such file or directory) <0.000010>
7 1000.000100 faccessat2(AT_FDCWD</w>, \"a\", X_OK, AT_EACCESS) = 0 <0.000010>
7 1000.000200 readlinkat(AT_FDCWD</w>, \"l\", 0x7ffd, 4096) = 1 <0.000010>
7 1000.000220 readlink(\"/usr/lib/gcc\", 0x7ffe08c07040, 1023) = -1 EINVAL (Invalid argument) <0.000055>
7 1000.000230 newfstatat(AT_FDCWD</w>, \"m\", {st_mode=S_IFLNK|0777, st_size=1, ...}, AT_SYMLINK_NOFOLLOW) = 0 <0.000010>
7 1000.000235 newfstatat(AT_FDCWD</w>, \"n\", {st_mode=S_IFREG|0644, st_size=1, ...}, 0) = 0 <0.000010>
7 1000.000240 statx(AT_FDCWD</w>, \"o\", AT_STATX_SYNC_AS_STAT|AT_SYMLINK_NOFOLLOW, STATX_ALL, {stx_mask=STATX_ALL, ...}) = 0 <0.000010>
7 1000.000245 lstat(\"/w/p\", {st_mode=S_IFLNK|0777, st_size=1, ...}) = 0 <0.000010>
7 1000.000250 openat2(AT_FDCWD</w>, \"c\", {flags=O_WRONLY|O_CREAT|O_CLOEXEC, mode=0644, resolve=RESOLVE_NO_SYMLINKS}, 24) = 3</w/c> <0.000010>
7 1000.000300 access(\"/proc/self/exe\", F_OK) = 0 <0.000010>
7 1000.000400 fstat(3</w/c>, {st_mode=S_IFREG|0644, st_size=0, ...}) = 0 <0.000010>
7 1000.000500 statx(3</w/c>, \"\", AT_STATX_SYNC_AS_STAT|AT_EMPTY_PATH, STATX_ALL, {stx_mask=STATX_ALL, ...}) = 0 <0.000010>
7 1000.000600 newfstatat(AT_FDCWD</w/v>, \"\", {st_mode=S_IFDIR|0755, st_size=4096, ...}, AT_EMPTY_PATH) = 0 <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let paths = paths_of(&evs, "stat");
    // The working directory through AT_FDCWD and an empty path: no fd names it.
    assert_eq!(paths, ["/etc/ld.so.preload", "/w/a", "/w/n", "/w/v"]);
    // Those that do not follow a link at the end.
    let lstats = paths_of(&evs, "lstat");
    assert_eq!(lstats, ["/w/l", "/usr/lib/gcc", "/w/m", "/w/o", "/w/p"]);
    // A readlink of what is not a link walked the whole path: an lstat that succeeded.
    let gcc = evs
        .iter()
        .find(|e| matches!(&e.op, Op::Lstat { path } if path == "/usr/lib/gcc"));
    assert_eq!(
        gcc.map(|e| (e.ret, e.extra.get("errno"))),
        Some((Some(0), None))
    );
    // An fstat, however spelt, walks no path: an op of its own, on the fd's file.
    let fstats: Vec<(i64, &str)> = evs
        .iter()
        .filter_map(|e| match &e.op {
            Op::Fstat { fd, path } => Some((*fd, path.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(fstats, [(3, "/w/c"), (3, "/w/c")]);
    // openat2 carries its flags in its `how` struct.
    assert!(
        evs.iter().any(|e| matches!(&e.op, Op::Open { path, flags }
            if path == "/w/c" && flags.write && flags.create && !flags.truncate)),
        "{evs:#?}"
    );
    assert_eq!(evs[0].ret, Some(-1), "a failed access stays failed");
}

#[test]
fn relative_paths_follow_chdir_fchdir_and_a_new_process_inherits_the_directory() {
    // `mkdir -p w/src/lib` opens each level, fchdirs into it and makes the next by a
    // relative path; a shell's cd is a chdir; a child starts where its parent was.
    let text = "7 1000.000000 openat(AT_FDCWD</r>, \"w\", O_RDONLY|O_DIRECTORY) = 3</r/w> <0.000010>
7 1000.000100 fchdir(3</r/w>) = 0 <0.000010>
7 1000.000200 mkdir(\"src\", 0777) = 0 <0.000010>
7 1000.000300 chdir(\"src/../src/.\") = 0 <0.000010>
7 1000.000400 mkdir(\"lib\", 0777) = 0 <0.000010>
7 1000.000450 chdir(\"/nowhere\") = -1 ENOENT (No such file or directory) <0.000010>
7 1000.000500 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLD, child_tidptr=0x7f) = 8 <0.000010>
8 1000.000600 mkdir(\"x\", 0777) = 0 <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let made = paths_of(&evs, "mkdir");
    assert_eq!(made, ["/r/w/src", "/r/w/src/lib", "/r/w/src/x"]);
}

#[test]
fn results_past_i64_max_and_unnamed_calls_are_not_errors() {
    // `rt_sigreturn` hands back whatever register it restored; strace prints it unsigned
    // (seen in a recorded `go build` and `javac`); a call it cannot name is `???`. The lines
    // around them still convert.
    let text = "\
9 1000.000100 rt_sigreturn({mask=[]}) = 11184332474286254648 <0.000011>
9 1000.000150 <... rt_sigreturn resumed>) = 18446744073701163008 <0.000128>
9 1000.000160 ???( <unfinished ...>
9 1000.000170 <... ??? resumed>) = ?
9 1000.000200 mkdir(\"/w/d\", 0777) = 0 <0.000010>
9 1000.000300 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0xffffffffff600000 <0.000005>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    assert_eq!(
        evs.iter().map(|e| &e.op).collect::<Vec<_>>(),
        [&Op::Mkdir {
            path: "/w/d".into()
        }]
    );
}

#[test]
fn threads_share_their_creator_s_fd_table_and_a_fork_or_exec_does_not() {
    // 7 makes thread 8 (CLONE_FILES, as pthreads and Go do), which makes 9 with clone3; 7
    // forks 10, which then runs a new program.
    let text = "\
7 1000.000000 clone(child_stack=0x7f, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS, tls=0x7f) = 8 <0.000050>
8 1000.000100 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD, exit_signal=0, stack=0x7e, stack_size=0x1000}, 88) = 9 <0.000040>
7 1000.000200 lseek(3</w/a>, 100, SEEK_SET) = 100 <0.000010>
9 1000.000300 read(3</w/a>, \"\"..., 50) = 50 <0.000010>
7 1000.000400 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f) = 10 <0.000100>
10 1000.000500 write(3</w/a>, \"\"..., 5) = 5 <0.000010>
10 1000.000600 execve(\"/bin/true\", [\"true\"], 0x7ffd /* 5 vars */) = 0 <0.000300>
10 1000.000700 close(3</w/a>) = 0 <0.000010>
8 1000.000800 close(3</w/a>) = 0 <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let got: Vec<(u32, Option<u32>, &str)> =
        evs.iter().map(|e| (e.pid, e.fds_of, e.op.name())).collect();
    assert_eq!(
        got,
        [
            (9, Some(7), "read"),
            (10, None, "write"),
            (10, None, "close"),
            (8, Some(7), "close"),
        ]
    );
    // The thread's read starts where its sibling's lseek left the shared fd.
    assert!(
        matches!(evs[0].op, Op::Read { off: Some(100), .. }),
        "{:?}",
        evs[0].op
    );
    // The forked child's table is its own, but its fd names the parent's open file: it
    // writes where the thread's read left it.
    assert!(
        matches!(evs[1].op, Op::Write { off: Some(150), .. }),
        "{:?}",
        evs[1].op
    );
}

#[test]
fn fds_a_dup_or_a_fork_shares_carry_the_shared_offset_and_appends_say_so() {
    // A shell runs `{ echo start; seq 100; echo end; } > log`, then `echo x >> app`: it opens
    // log, dup2s it onto fd 1, writes, forks seq (which writes through its copy of fd 1 and
    // exits), writes again; then the same with an O_APPEND open of app.
    let text = "\
100 1.000000 openat(AT_FDCWD</w>, \"log\", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3</w/log> <0.000010>
100 1.000100 dup2(3</w/log>, 1</dev/pts/0>) = 1</w/log> <0.000005>
100 1.000200 close(3</w/log>) = 0 <0.000005>
100 1.000300 write(1</w/log>, \"start\\n\", 6) = 6 <0.000010>
100 1.000400 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f) = 101 <0.000100>
101 1.000500 execve(\"/usr/bin/seq\", [\"seq\", \"100\"], 0x7ffd /* 5 vars */) = 0 <0.000300>
101 1.000600 write(1</w/log>, \"1\\n2\\n\"..., 292) = 292 <0.000010>
101 1.000700 +++ exited with 0 +++
100 1.000800 write(1</w/log>, \"end\\n\", 4) = 4 <0.000010>
100 1.000900 openat(AT_FDCWD</w>, \"app\", O_WRONLY|O_CREAT|O_APPEND, 0666) = 3</w/app> <0.000010>
100 1.001000 dup2(3</w/app>, 1</w/log>) = 1</w/app> <0.000005>
100 1.001100 close(3</w/app>) = 0 <0.000005>
100 1.001200 write(1</w/app>, \"x\\n\", 2) = 2 <0.000010>
100 1.001300 openat(AT_FDCWD</w>, \"own\", O_WRONLY|O_CREAT, 0666) = 3</w/own> <0.000010>
100 1.001400 write(3</w/own>, \"y\", 1) = 1 <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let writes: Vec<(u32, &str, Option<u64>, bool)> = evs
        .iter()
        .filter_map(|e| match &e.op {
            Op::Write { path, off, .. } => Some((e.pid, path.as_str(), *off, e.appends())),
            _ => None,
        })
        .collect();
    assert_eq!(
        writes,
        [
            (100, "/w/log", Some(0), false),
            (101, "/w/log", Some(6), false),
            (100, "/w/log", Some(298), false),
            (100, "/w/app", None, true),
            // An fd that alone names its file needs nothing: the replay follows it.
            (100, "/w/own", None, false),
        ]
    );
    // The field round-trips through the trace format.
    let back = round_trip(&evs).1;
    assert_eq!(back, evs);
    assert_eq!(back.iter().filter(|e| e.appends()).count(), 1);
}

#[test]
fn a_thread_s_chdir_moves_its_siblings_and_not_a_forked_child() {
    // 7's cwd is /w; thread 8 (CLONE_FS) changes it to /w/sub, which 7 then resolves against;
    // the child 9, forked before, keeps /w; after `unshare(CLONE_FS)` 8 moves alone.
    let text = "\
7 1000.000000 chdir(\"/w\") = 0 <0.000010>
7 1000.000100 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f) = 9 <0.000100>
7 1000.000200 clone(child_stack=0x7f, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD, tls=0x7f) = 8 <0.000050>
8 1000.000300 chdir(\"sub\") = 0 <0.000010>
7 1000.000400 mkdir(\"made-by-7\", 0777) = 0 <0.000010>
9 1000.000500 mkdir(\"made-by-9\", 0777) = 0 <0.000010>
8 1000.000600 unshare(CLONE_FS) = 0 <0.000005>
8 1000.000700 chdir(\"/elsewhere\") = 0 <0.000010>
7 1000.000800 mkdir(\"after-unshare\", 0777) = 0 <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let made = paths_of(&evs, "mkdir");
    // Once 8 has a working directory of its own, its chdir moves only itself.
    assert_eq!(
        made,
        ["/w/sub/made-by-7", "/w/made-by-9", "/w/sub/after-unshare"]
    );
}

#[test]
fn stores_through_shared_mappings_are_written_when_a_mapping_is_released_or_synced() {
    // A linker's output (lld's pattern, as rustc runs it): sized, mapped, unmapped, renamed.
    // A thread's msync with MS_SYNC, then the process's exit releases what is still mapped;
    // a vfork child's execve leaves its parent's mappings; a mapping of a file unlinked
    // writes nothing; a private or read-only mapping is not a store.
    let text = "\
7 1000.000000 openat(AT_FDCWD</w>, \"out.tmp\", O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC, 0777) = 3</w/out.tmp> <0.000010>
7 1000.000100 ftruncate(3</w/out.tmp>, 10000) = 0 <0.000010>
7 1000.000200 mmap(NULL, 10000, PROT_READ|PROT_WRITE, MAP_SHARED|MAP_NORESERVE, 3</w/out.tmp>, 0) = 0x7f0000000000 <0.000010>
7 1000.000300 munmap(0x7f0000000000, 10000) = 0 <0.000010>
7 1000.000400 rename(\"/w/out.tmp\", \"/w/out\") = 0 <0.000010>
7 1000.000500 openat(AT_FDCWD</w>, \"db\", O_RDWR) = 4</w/db> <0.000010>
7 1000.000600 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_SHARED, 4</w/db>, 0x1000) = 0x7f0000100000 <0.000010>
7 1000.000700 close(4</w/db>) = 0 <0.000010>
7 1000.000800 clone(child_stack=0x1, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD) = 8 <0.000010>
8 1000.000900 msync(0x7f0000101000, 4096, MS_SYNC) = 0 <0.000010>
7 1000.001000 vfork() = 9 <0.000010>
9 1000.001100 execve(\"/bin/true\", [\"true\"], 0x1 /* 1 var */) = 0 <0.000010>
9 1000.001200 +++ exited with 0 +++
7 1000.001300 mmap(NULL, 4096, PROT_READ|PROT_WRITE, MAP_PRIVATE, 3</w/out.tmp>, 0) = 0x7f0000200000 <0.000010>
7 1000.001400 mmap(NULL, 4096, PROT_READ, MAP_SHARED, 3</w/out.tmp>, 0) = 0x7f0000300000 <0.000010>
7 1000.001500 openat(AT_FDCWD</w>, \"gone\", O_RDWR|O_CREAT, 0644) = 5</w/gone> <0.000010>
7 1000.001600 mmap(NULL, 4096, PROT_READ|PROT_WRITE, MAP_SHARED, 5</w/gone>, 0) = 0x7f0000400000 <0.000010>
7 1000.001700 unlink(\"/w/gone\") = 0 <0.000010>
8 1000.001800 +++ exited with 0 +++
7 1000.001900 +++ exited with 0 +++
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let mapped: Vec<(u32, &str, u64, u64, bool)> = evs
        .iter()
        .filter_map(|e| match &e.op {
            Op::MappedWrite {
                path,
                off,
                len,
                sync,
            } => Some((e.pid, path.as_str(), *off, *len, *sync)),
            _ => None,
        })
        .collect();
    assert_eq!(
        mapped,
        [
            (7, "/w/out.tmp", 0, 10000, false),
            (8, "/w/db", 8192, 4096, true),
            (7, "/w/db", 4096, 8192, false),
        ],
        "{evs:#?}"
    );
    let s = stats(text);
    assert_eq!((s.mapped_writes, s.mapped_bytes), (3, 10000 + 4096 + 8192));
    // Each comes right after the call that released or synced it, at its time.
    let at = |i: usize| (evs[i].op.name(), evs[i].t);
    let first = evs
        .iter()
        .position(|e| e.op.name() == "mapped_write")
        .unwrap();
    assert_eq!(at(first), ("mapped_write", 300_000));
    assert_eq!(at(first + 1), ("rename", 400_000));
    assert_eq!(evs.last().map(|e| e.t), Some(1_900_000));
}

#[test]
fn a_mapping_past_the_address_space_or_with_a_bad_length_is_not_carried() {
    let text = "\
7 1000.000000 mmap(NULL, 18446744073709551615, PROT_READ|PROT_WRITE, MAP_SHARED, 3</w/a>, 0) = 0x7f0000000000 <0.000010>
7 1000.000100 mmap(NULL, -1, PROT_READ|PROT_WRITE, MAP_SHARED, 3</w/a>, 0) = 0x7f0000000000 <0.000010>
7 1000.000200 munmap(0x7f0000000000, 18446744073709551615) = 0 <0.000010>
7 1000.000300 +++ exited with 0 +++
";
    let s = stats(text);
    assert_eq!(s.events, 0, "{s:?}");
    assert_eq!(s.skipped.len(), 2, "{s:?}");
}

#[test]
fn mknod_makes_a_name_and_what_passes_through_a_fifo_is_not_file_data() {
    // `mkfifo` then a shell's `echo hi > fifo & cat fifo`; a regular file made by mknod.
    let text = "\
7 1000.000000 mknodat(AT_FDCWD</w>, \"/w/fifo\", S_IFIFO|0666) = 0 <0.000010>
8 1000.000100 openat(AT_FDCWD</w>, \"/w/fifo\", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3</w/fifo> <0.000010>
9 1000.000200 openat(AT_FDCWD</w>, \"/w/fifo\", O_RDONLY) = 3</w/fifo> <0.000010>
8 1000.000300 write(3</w/fifo>, \"hi\\n\", 3) = 3 <0.000010>
9 1000.000400 read(3</w/fifo>, \"hi\\n\", 131072) = 3 <0.000010>
9 1000.000500 close(3</w/fifo>) = 0 <0.000010>
7 1000.000600 rename(\"/w/fifo\", \"/w/fifo2\") = 0 <0.000010>
9 1000.000700 openat(AT_FDCWD</w>, \"/w/fifo2\", O_RDONLY) = 4</w/fifo2> <0.000010>
9 1000.000800 read(4</w/fifo2>, \"\", 10) = 0 <0.000010>
7 1000.000900 mknod(\"/w/plain\", 0644) = 0 <0.000010>
7 1000.001000 openat(AT_FDCWD</w>, \"/w/plain\", O_RDWR) = 5</w/plain> <0.000010>
7 1000.001100 write(5</w/plain>, \"x\", 1) = 1 <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let ops: Vec<(&str, Option<&str>)> = evs
        .iter()
        .map(|e| {
            (
                e.op.name(),
                e.op.walked_path().or(e.op.fd_path().map(|(_, p)| p)),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            ("mknod", Some("/w/fifo")),
            ("open", Some("/w/fifo")),
            ("open", Some("/w/fifo")),
            ("close", Some("/w/fifo")),
            ("rename", Some("/w/fifo")),
            ("open", Some("/w/fifo2")),
            ("mknod", Some("/w/plain")),
            ("open", Some("/w/plain")),
            ("write", Some("/w/plain")),
        ],
        "{evs:#?}"
    );
}

#[test]
fn a_unix_socket_bound_to_a_path_is_a_name_and_a_reflink_is_counted() {
    let text = "\
7 1000.000000 bind(3<socket:[1]>, {sa_family=AF_UNIX, sun_path=\"/w/s.sock\"}, 21) = 0 <0.000010>
7 1000.000100 connect(4<socket:[2]>, {sa_family=AF_UNIX, sun_path=\"/w/s.sock\"}, 21) = 0 <0.000010>
7 1000.000200 connect(4<socket:[2]>, {sa_family=AF_UNIX, sun_path=\"/w/none\"}, 21) = -1 ENOENT (No such file or directory) <0.000010>
7 1000.000300 bind(5<socket:[3]>, {sa_family=AF_UNIX, sun_path=@\"abstract\"}, 11) = 0 <0.000010>
7 1000.000400 bind(6<socket:[4]>, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr(\"0.0.0.0\")}, 16) = 0 <0.000010>
7 1000.000500 chdir(\"/w/d\") = 0 <0.000010>
7 1000.000600 bind(3<socket:[5]>, {sa_family=AF_UNIX, sun_path=\"rel.sock\"}, 11) = 0 <0.000010>
7 1000.000700 unlink(\"/w/s.sock\") = 0 <0.000010>
7 1000.000800 ioctl(4</w/b>, FICLONE, 3</w/a>) = 0 <0.000010>
7 1000.000900 ioctl(4</w/b>, FICLONE, 3</w/a>) = -1 EOPNOTSUPP (Operation not supported) <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let ops: Vec<(&str, &str, Option<i64>)> = evs
        .iter()
        .map(|e| (e.op.name(), e.op.walked_path().unwrap_or(""), e.ret))
        .collect();
    assert_eq!(
        ops,
        [
            ("mknod", "/w/s.sock", Some(0)),
            ("stat", "/w/s.sock", Some(0)),
            ("stat", "/w/none", Some(-1)),
            ("mknod", "/w/d/rel.sock", Some(0)),
            ("unlink", "/w/s.sock", Some(0)),
        ],
        "{evs:#?}"
    );
    let s = stats(text);
    assert_eq!(
        s.skipped
            .get("ioctl: FICLONE (a reflink copy) is not modelled"),
        Some(&1),
        "only the clone that succeeded: {s:?}"
    );
}

#[test]
fn a_mapping_moved_by_mremap_is_written_from_its_new_place_and_a_shrunk_tail_at_once() {
    let text = "\
7 1000.000000 mmap(NULL, 16384, PROT_READ|PROT_WRITE, MAP_SHARED, 3</w/f>, 0) = 0x7f0000000000 <0.000010>
7 1000.000100 mremap(0x7f0000000000, 16384, 4096, MREMAP_MAYMOVE) = 0x7f0000100000 <0.000010>
7 1000.000200 munmap(0x7f0000000000, 16384) = 0 <0.000010>
7 1000.000300 munmap(0x7f0000100000, 4096) = 0 <0.000010>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let mapped: Vec<(u64, u64, u64)> = evs
        .iter()
        .filter_map(|e| match &e.op {
            Op::MappedWrite { off, len, .. } => Some((e.t, *off, *len)),
            _ => None,
        })
        .collect();
    // The shrunk-off 12 KiB at the mremap, nothing at the old place, the rest at the new.
    assert_eq!(
        mapped,
        [(100_000, 4096, 12288), (300_000, 0, 4096)],
        "{evs:#?}"
    );
}

#[test]
fn the_fds_the_kernel_closes_without_a_close_call_become_closes() {
    // The kernel closes an fd with no `close` call: at an `execve` (FD_CLOEXEC, from
    // O_CLOEXEC or F_SETFD), under a `dup2`, in a `close_range`, and at the exit of the
    // last process or thread using the table. Only fds an event used (a replay holds them
    // open) need a close; an fstat, a directory's open or a failed call opens none.
    let text = "\
100 1.000000 openat(AT_FDCWD</w>, \"log\", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3</w/log> <0.000010>
100 1.000100 dup2(3</w/log>, 1</dev/pts/0>) = 1</w/log> <0.000005>
100 1.000200 close(3</w/log>) = 0 <0.000005>
100 1.000300 write(1</w/log>, \"a\", 1) = 1 <0.000010>
100 1.000400 openat(AT_FDCWD</w>, \"lib.so\", O_RDONLY|O_CLOEXEC) = 3</w/lib.so> <0.000010>
100 1.000500 read(3</w/lib.so>, \"\"..., 832) = 832 <0.000010>
100 1.000600 openat(AT_FDCWD</w>, \"keep\", O_RDONLY) = 4</w/keep> <0.000010>
100 1.000700 openat(AT_FDCWD</w>, \"data\", O_RDONLY) = 5</w/data> <0.000010>
100 1.000800 fcntl(5</w/data>, F_SETFD, FD_CLOEXEC) = 0 <0.000005>
100 1.000900 openat(AT_FDCWD</w>, \"d\", O_RDONLY|O_DIRECTORY|O_CLOEXEC) = 6</w/d> <0.000010>
100 1.001000 fstat(6</w/d>, {st_mode=S_IFDIR|0755, st_size=4096, ...}) = 0 <0.000005>
100 1.001100 execve(\"/bin/prog\", [\"prog\"], 0x7ffd /* 5 vars */) = 0 <0.000300>
100 1.001200 read(4</w/keep>, \"\"..., 10) = 10 <0.000010>
100 1.001300 openat(AT_FDCWD</w>, \"other\", O_WRONLY|O_CREAT, 0666) = 3</w/other> <0.000010>
100 1.001400 write(3</w/other>, \"b\", 1) = 1 <0.000010>
100 1.001500 dup2(3</w/other>, 1</w/log>) = 1</w/other> <0.000005>
100 1.001600 write(1</w/other>, \"c\", 1) = 1 <0.000010>
100 1.001700 openat(AT_FDCWD</w>, \"tmp\", O_RDWR|O_CREAT, 0600) = 5</w/tmp> <0.000010>
100 1.001800 write(5</w/tmp>, \"d\", 1) = 1 <0.000010>
100 1.001900 write(8</w/full>, \"d\", 1) = -1 ENOSPC (No space left on device) <0.000005>
100 1.002000 close_range(3, 4294967295, CLOSE_RANGE_CLOEXEC) = 0 <0.000005>
100 1.002100 close_range(5, 4294967295, 0) = 0 <0.000005>
100 1.002200 +++ exited with 0 +++
200 1.003000 clone(child_stack=0x7f, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD) = 201 <0.000050>
201 1.003100 openat(AT_FDCWD</w>, \"t\", O_WRONLY|O_CREAT, 0666) = 3</w/t> <0.000010>
201 1.003200 write(3</w/t>, \"e\", 1) = 1 <0.000010>
200 1.003300 +++ exited with 0 +++
201 1.003400 +++ exited with 0 +++
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let closes: Vec<(u64, u32, Option<u32>, i64, &str)> = evs
        .iter()
        .filter_map(|e| match &e.op {
            Op::Close { fd, path } => Some((e.t / 1000, e.pid, e.fds_of, *fd, path.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        closes,
        [
            (200, 100, None, 3, "/w/log"),
            // The execve's: lib.so (O_CLOEXEC) and data (F_SETFD); not keep, not the
            // directory, which a replay only walked.
            (1100, 100, None, 3, "/w/lib.so"),
            (1100, 100, None, 5, "/w/data"),
            // The dup2 over fd 1, which a replay held open as log.
            (1500, 100, None, 1, "/w/log"),
            // close_range of 5 and up; 3 is only marked to close at an execve.
            (2100, 100, None, 5, "/w/tmp"),
            // The exit: every fd a replay holds (not 8, whose one call failed).
            (2200, 100, None, 1, "/w/other"),
            (2200, 100, None, 3, "/w/other"),
            (2200, 100, None, 4, "/w/keep"),
            // The thread group's table goes with the last of its threads, whichever is last.
            (3400, 201, Some(200), 3, "/w/t"),
        ]
    );
    // Every close follows its line's own events and the trace reads back.
    assert!(evs.windows(2).all(|w| w[0].t <= w[1].t));
    assert_eq!(round_trip(&evs).1, evs);
}

#[test]
fn csd_trace_record_asks_strace_for_every_call_the_converter_reads() {
    // Each name a match arm of the converter names (`"openat" | "creat" => …`) is a call it
    // reads; a recording that filtered one out would lose its events silently.
    let source = include_str!("../src/import/strace.rs");
    let mut arms = std::collections::BTreeSet::new();
    // A long pattern spans lines, each continued with `| "name"`.
    let mut pattern = String::new();
    for line in source.lines().map(str::trim) {
        let starts = line.starts_with('"') || (line.starts_with("| \"") && !pattern.is_empty());
        if !starts {
            pattern.clear();
            continue;
        }
        let Some((head, _)) = line.split_once("=>") else {
            pattern.push_str(line);
            continue;
        };
        pattern.push_str(head.split(" if ").next().unwrap_or(head));
        for name in std::mem::take(&mut pattern)
            .split('|')
            .map(|n| n.trim().trim_matches('"'))
        {
            if name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            {
                arms.insert(name.to_string());
            }
        }
    }
    let recorded: std::collections::BTreeSet<String> = csd_traces::import::strace::RECORDED_CALLS
        .iter()
        .map(|c| c.to_string())
        .collect();
    assert!(arms.len() > 90, "{arms:?}");
    assert_eq!(
        arms, recorded,
        "the converter's calls and the recorded ones differ"
    );
    let filter = csd_traces::import::strace::strace_filter();
    assert!(
        filter.starts_with("?_llseek,?access,") && filter.ends_with(",?writev"),
        "{filter}"
    );
}

#[test]
fn a_link_s_own_attributes_and_an_o_path_open_do_not_follow_it() {
    // GNU tar extracting a symbolic link: a placeholder file, replaced by the link at the
    // end, whose times and owner are set on the link itself, which it then opens with
    // O_PATH to check it.
    let text = "\
7 1.000000 unlinkat(4</w/x>, \"src/up\", 0) = 0 <0.000021>
7 1.000100 symlinkat(\"../a\", 4</w/x>, \"src/up\") = 0 <0.000052>
7 1.000200 utimensat(4</w/x>, \"src/up\", [UTIME_OMIT, {tv_sec=1, tv_nsec=0}], AT_SYMLINK_NOFOLLOW) = 0 <0.000011>
7 1.000300 fchownat(4</w/x>, \"src/up\", 0, 0, AT_SYMLINK_NOFOLLOW) = 0 <0.000010>
7 1.000400 lchown(\"/w/x/src/up\", 0, 0) = 0 <0.000010>
7 1.000500 chown(\"/w/x/src/up\", 0, 0) = 0 <0.000010>
7 1.000600 openat(4</w/x>, \"src/up\", O_RDONLY|O_NOFOLLOW|O_CLOEXEC|O_PATH) = 3</w/x/src/up> <0.000009>
7 1.000700 +++ exited with 0 +++
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let nofollow: Vec<bool> = evs
        .iter()
        .filter_map(|e| match &e.op {
            Op::Setattr { nofollow, .. } => Some(*nofollow),
            _ => None,
        })
        .collect();
    assert_eq!(nofollow, [true, true, true, false]);
    let open = evs.iter().find_map(|e| match &e.op {
        Op::Open { flags, .. } => Some(*flags),
        _ => None,
    });
    assert!(open.is_some_and(|f| f.path && f.nofollow), "{open:?}");
    // An O_PATH fd holds no file open for a replay: its exit closes nothing.
    assert!(!evs.iter().any(|e| e.op.name() == "close"), "{evs:?}");
    assert_eq!(round_trip(&evs).1, evs);
}

#[test]
fn reading_extended_attributes_walks_as_a_stat_does_even_when_there_is_none() {
    // `ls -l` asks for an SELinux label and an ACL of every entry, most often of files that
    // have neither (ENODATA): the walk and the inode's look were made all the same.
    let text = "\
7 1.000000 lgetxattr(\"/w/a\", \"security.selinux\", 0x55d0, 255) = -1 ENODATA (No data available) <0.000004>
7 1.000100 getxattr(\"/w/a\", \"system.posix_acl_access\", NULL, 0) = -1 ENODATA (No data available) <0.000003>
7 1.000200 flistxattr(3</w/a>, NULL, 0) = 0 <0.000002>
7 1.000300 fgetxattr(3</w/a>, \"user.x\", 0x7ffd, 132) = -1 ENODATA (No data available) <0.000002>
7 1.000400 lgetxattr(\"/w/gone\", \"security.selinux\", 0x55d0, 255) = -1 ENOENT (No such file or directory) <0.000004>
7 1.000500 llistxattr(\"/w/a\", 0x55d0, 256) = 0 <0.000003>
";
    let evs = events(ImportFormat::Strace, text).unwrap();
    let got: Vec<(&str, Option<&str>, Option<i64>)> = evs
        .iter()
        .map(|e| (e.op.name(), e.op.walked_path(), e.ret))
        .collect();
    assert_eq!(
        got,
        [
            ("lstat", Some("/w/a"), Some(0)),
            ("stat", Some("/w/a"), Some(0)),
            ("fstat", None, Some(0)),
            ("fstat", None, Some(0)),
            // A missing name keeps its failure: the replay walks as far as the path goes.
            ("lstat", Some("/w/gone"), Some(-1)),
            ("lstat", Some("/w/a"), Some(0)),
        ]
    );
    assert!(evs[4].extra.get("errno").is_some_and(|e| e == "ENOENT"));
}
