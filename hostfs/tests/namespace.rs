//! Path resolution reports the ino list and exactly the metadata blocks a level-by-level lookup
//! reads; permissions are checked on the way.

use csd_hostfs::alloc::ExtentAllocator;
use csd_hostfs::namespace::*;
use csd_hostfs::perms::{Cred, Perms};

const LAYOUT: MetaLayout = MetaLayout {
    block_bytes: 4096,
    inode_bytes: 256,
    inode_table_first_block: 1,
    inode_count: 4096,
};

const ME: Cred = Cred {
    uid: 1000,
    gid: 1000,
};
const MINE: Perms = Perms {
    uid: 1000,
    gid: 1000,
    mode: 0o755,
};

fn fresh() -> (Namespace, ExtentAllocator) {
    let data_start = LAYOUT.inode_table_first_block + LAYOUT.inode_table_blocks();
    let mut alloc = ExtentAllocator::new(data_start, 100_000);
    let ns = Namespace::new(LAYOUT, MINE, &mut alloc).unwrap();
    (ns, alloc)
}

/// A resolution's reads, spelt short: `i2` inode 2's block, `d2.0` directory 2's block 0,
/// `l7` link 7's target block.
fn read_kinds(r: &Resolution) -> Vec<String> {
    r.reads
        .iter()
        .map(|m| match m {
            MetaRead::Inode { ino, .. } => format!("i{}", ino.0),
            MetaRead::Dir { dir, index, .. } => format!("d{}.{index}", dir.0),
            MetaRead::Link { ino, .. } => format!("l{}", ino.0),
        })
        .collect()
}

#[test]
fn resolution_reads_each_level_and_returns_the_ino_list() {
    let (mut ns, mut alloc) = fresh();
    let a = ns.create("/a", NewKind::Dir, MINE, ME, &mut alloc).unwrap();
    let b = ns
        .create("/a/b", NewKind::Dir, MINE, ME, &mut alloc)
        .unwrap();
    let f = ns
        .create("/a/b/f.dat", NewKind::File, MINE, ME, &mut alloc)
        .unwrap();
    let r = ns.resolve("/a/b/f.dat", ME).unwrap();
    assert_eq!(r.ino, f);
    assert_eq!(r.ino_list, vec![Ino::ROOT, a, b, f]);
    // Per level: the directory's inode block, then its (single) directory block; then the
    // target's inode block.
    let kinds = read_kinds(&r);
    assert_eq!(kinds, ["i2", "d2.0", "i3", "d3.0", "i4", "d4.0", "i5"]);
    // Through a link to /a/b with a long target (a block of its own): the link's entry is
    // found, its inode and target block read, then the walk restarts at the root.
    let target = format!("/a/b{}", "/".repeat(60));
    let link = ns
        .create(
            "/l",
            NewKind::Symlink { target: &target },
            MINE,
            ME,
            &mut alloc,
        )
        .unwrap();
    let r = ns.resolve("/l/f.dat", ME).unwrap();
    assert_eq!(r.ino, f);
    assert_eq!(r.ino_list, vec![Ino::ROOT, a, b, f]);
    assert_eq!(r.detour, 1);
    let kinds = read_kinds(&r);
    let l = format!("i{}", link.0);
    let lb = format!("l{}", link.0);
    assert_eq!(
        kinds,
        ["i2", "d2.0", &l, &lb, "i2", "d2.0", "i3", "d3.0", "i4", "d4.0", "i5"]
    );
    // Not followed at the end when asked not to: the link itself.
    assert_eq!(ns.resolve_nofollow("/l", ME).unwrap().ino, link);
    assert_eq!(ns.resolve("/l", ME).unwrap().ino, b);
    // 16 inodes of 256 bytes share a 4 KiB inode-table block.
    assert_eq!(LAYOUT.inode_block(Ino(2)), LAYOUT.inode_block(Ino(15)));
    assert_ne!(LAYOUT.inode_block(Ino(15)), LAYOUT.inode_block(Ino(16)));
    assert_eq!(
        ns.resolve("/", ME).unwrap().reads.len(),
        1,
        "the root's inode only"
    );
}

/// `/file-0000000000000000000` …: 24-byte names, so 32-byte entries, 127 in the root's first
/// 4 KiB block (after "." and "..") and 128 in each next one.
fn name(i: usize) -> String {
    format!("/file-{i:019}")
}

fn root_with_600_files() -> (Namespace, ExtentAllocator) {
    let (mut ns, mut alloc) = fresh();
    for i in 0..600 {
        ns.create(&name(i), NewKind::File, MINE, ME, &mut alloc)
            .unwrap();
    }
    (ns, alloc)
}

/// The block of its directory that holds `path`'s entry, as a lookup finds it (1-based);
/// usize::MAX when the name is not there. A lookup reads that block only, after the hash
/// index's root when the directory has more than one block (ext4's dir_index).
fn dir_reads(ns: &Namespace, path: &str) -> usize {
    ns.resolve(path, ME).map_or(usize::MAX, |r| {
        let dirs: Vec<u64> = r
            .reads
            .iter()
            .filter_map(|m| match m {
                MetaRead::Dir { index, .. } => Some(*index),
                _ => None,
            })
            .collect();
        assert!(
            dirs.len() <= 2,
            "a lookup reads at most the index root and one leaf"
        );
        assert_eq!(
            dirs[0], 0,
            "the first block read is the directory's first (its index root)"
        );
        *dirs.last().unwrap() as usize + 1
    })
}

#[test]
fn big_directories_spill_into_more_blocks_and_lookups_read_one_leaf() {
    let (ns, _) = root_with_600_files();
    assert_eq!(dirent_bytes(24), 32);
    assert_eq!(dir_reads(&ns, &name(0)), 1);
    assert_eq!(dir_reads(&ns, &name(126)), 1);
    assert_eq!(dir_reads(&ns, &name(127)), 2);
    assert_eq!(dir_reads(&ns, &name(599)), 5);
    assert!(matches!(ns.resolve("/nope", ME), Err(NsError::NotFound(p)) if p == "/nope"));
    // The root's blocks were allocated next to each other: one extent.
    let InodeKind::Dir { blocks, .. } = &ns.inode(Ino::ROOT).unwrap().kind else {
        panic!()
    };
    assert_eq!(blocks.iter().map(|r| r.pages).sum::<u64>(), 5);
}

#[test]
fn removed_entries_leave_the_others_in_place_and_their_room_is_reused() {
    let (mut ns, mut alloc) = root_with_600_files();
    let first_block = ns.entry_block(Ino::ROOT, ns.find(&name(0), ME).unwrap());
    let mut changed = std::collections::BTreeSet::new();
    for i in 0..127 {
        changed.insert(ns.remove(&name(i), false, ME).unwrap().dir_block);
    }
    // Only the block that held them changed; nothing moved up (ext4 folds a removed dirent
    // into its neighbour), and the directory keeps its five blocks.
    assert_eq!(
        changed.into_iter().collect::<Vec<_>>(),
        Vec::from_iter(first_block)
    );
    assert_eq!(dir_reads(&ns, &name(127)), 2);
    assert_eq!(dir_reads(&ns, &name(599)), 5);
    assert_eq!(ns.dir_block_count(Ino::ROOT), 5);
    // A new entry takes the first block with room: the emptied first one.
    let f = ns
        .create("/new", NewKind::File, MINE, ME, &mut alloc)
        .unwrap();
    assert_eq!(dir_reads(&ns, "/new"), 1);
    assert_eq!(ns.entry_block(Ino::ROOT, f), first_block);
    // A rename adds the new name where there is room and removes the old one: two blocks
    // change, and no other entry moves.
    let r = ns.rename(&name(300), "/moved", ME, &mut alloc).unwrap();
    assert_eq!(dir_reads(&ns, "/moved"), 1);
    assert_eq!(dir_reads(&ns, &name(301)), 3);
    assert_eq!(dir_reads(&ns, &name(300)), usize::MAX);
    assert_eq!(r.dir_blocks.len(), 2);
    assert!(r.dir_blocks.contains(&first_block.unwrap()));
    ns.check_invariants().unwrap();
}

#[test]
fn a_rename_over_a_file_reuses_its_entry() {
    let (mut ns, mut alloc) = root_with_600_files();
    let moved = ns.find(&name(5), ME).unwrap();
    let r = ns.rename(&name(5), &name(400), ME, &mut alloc).unwrap();
    assert_eq!(
        r.replaced.as_ref().map(|g| g.dir_block),
        Some(r.dir_blocks[0])
    );
    assert_eq!(ns.find(&name(400), ME).unwrap(), moved);
    assert_eq!(
        dir_reads(&ns, &name(400)),
        4,
        "the entry stays in its block"
    );
    assert!(ns.find(&name(5), ME).is_err());
    ns.check_invariants().unwrap();
}

#[test]
fn churn_in_a_directory_does_not_grow_it() {
    // Create, rename, unlink over a bounded set of names, as a replayed build or mail
    // spool does: the freed room is reused, so the directory stays the size it needs.
    let (mut ns, mut alloc) = fresh();
    for round in 0..50 {
        for i in 0..200 {
            ns.create(&name(i), NewKind::File, MINE, ME, &mut alloc)
                .unwrap();
        }
        for i in 0..200 {
            let to = format!("/renamed-{i:016}-{round:02}");
            ns.rename(&name(i), &to, ME, &mut alloc).unwrap();
            ns.remove(&to, false, ME).unwrap();
        }
    }
    assert!(ns.dir_block_count(Ino::ROOT) <= 4);
    ns.check_invariants().unwrap();
}

#[test]
fn permissions_are_checked_on_the_way() {
    let (mut ns, mut alloc) = fresh();
    let private = Perms {
        mode: 0o700,
        ..MINE
    };
    ns.create("/home", NewKind::Dir, private, ME, &mut alloc)
        .unwrap();
    ns.create("/home/notes", NewKind::File, MINE, ME, &mut alloc)
        .unwrap();
    let stranger = Cred {
        uid: 2000,
        gid: 2000,
    };
    assert_eq!(
        ns.resolve("/home/notes", stranger),
        Err(NsError::PermissionDenied {
            path: "/home".into(),
            access: "search"
        })
    );
    assert!(ns.resolve("/home/notes", Cred::ROOT).is_ok());
    let e = ns
        .create("/home/x", NewKind::File, MINE, stranger, &mut alloc)
        .unwrap_err();
    assert!(e.to_string().starts_with("permission denied"), "{e}");
    let read_only_root = Perms {
        mode: 0o555,
        ..MINE
    };
    let mut alloc2 = ExtentAllocator::new(100, 100);
    let mut ns2 = Namespace::new(LAYOUT, read_only_root, &mut alloc2).unwrap();
    assert!(matches!(
        ns2.create("/x", NewKind::File, MINE, ME, &mut alloc2),
        Err(NsError::PermissionDenied {
            access: "write",
            ..
        })
    ));
}

#[test]
fn bad_requests_are_clear_errors() {
    let (mut ns, mut alloc) = fresh();
    ns.create("/f", NewKind::File, MINE, ME, &mut alloc)
        .unwrap();
    let cases = [
        (
            ns.create("/f", NewKind::File, MINE, ME, &mut alloc)
                .unwrap_err(),
            "'/f' already exists",
        ),
        (
            ns.create("/f/g", NewKind::File, MINE, ME, &mut alloc)
                .unwrap_err(),
            "'/f' is not a directory",
        ),
        (
            ns.create("/x/g", NewKind::File, MINE, ME, &mut alloc)
                .unwrap_err(),
            "no such file or directory: '/x'",
        ),
        (
            ns.create("relative", NewKind::File, MINE, ME, &mut alloc)
                .unwrap_err(),
            "not a valid path",
        ),
        (
            ns.create("/a/../b", NewKind::File, MINE, ME, &mut alloc)
                .unwrap_err(),
            "not a valid path",
        ),
        (
            ns.create(
                &format!("/{}", "n".repeat(256)),
                NewKind::File,
                MINE,
                ME,
                &mut alloc,
            )
            .unwrap_err(),
            "longer than 255",
        ),
    ];
    for (e, expected) in cases {
        assert!(e.to_string().contains(expected), "{e}");
    }
    let mut tiny = ExtentAllocator::new(100, 1);
    let mut ns3 = Namespace::new(LAYOUT, MINE, &mut tiny).unwrap();
    let e = ns3
        .create("/d", NewKind::Dir, MINE, ME, &mut tiny)
        .unwrap_err();
    assert!(e.to_string().starts_with("no space"), "{e}");
    assert_eq!(
        tiny.free_blocks(),
        0,
        "nothing leaked, nothing double-freed"
    );
}

#[test]
fn file_layouts_are_recorded() {
    let (mut ns, mut alloc) = fresh();
    let f = ns
        .create("/f", NewKind::File, MINE, ME, &mut alloc)
        .unwrap();
    let runs = alloc.allocate(4, None).unwrap();
    ns.set_file_layout(f, 16_000, runs.clone()).unwrap();
    assert_eq!(
        ns.inode(f).unwrap().kind,
        InodeKind::File {
            size_bytes: 16_000,
            extents: runs,
            reserved: vec![],
        }
    );
    assert!(ns.set_file_layout(Ino::ROOT, 1, vec![]).is_err());
}

#[test]
fn resolve_or_parent_finds_the_file_or_the_directory_to_create_it_in() {
    let (mut ns, mut alloc) = fresh();
    let a = ns.create("/a", NewKind::Dir, MINE, ME, &mut alloc).unwrap();
    let f = ns
        .create("/a/f", NewKind::File, MINE, ME, &mut alloc)
        .unwrap();
    // There: the same resolution a lookup gives.
    assert_eq!(
        ns.resolve_or_parent("/a/f", ME).unwrap().unwrap(),
        ns.resolve("/a/f", ME).unwrap()
    );
    assert_eq!(ns.resolve_or_parent("/a/f", ME).unwrap().unwrap().ino, f);
    // Only the last component missing: its directory, reached by the walk a lookup of the
    // missing name makes.
    assert_eq!(
        ns.resolve_or_parent("/a/g", ME).unwrap().unwrap_err().ino,
        a
    );
    assert_eq!(
        ns.resolve_or_parent("/a/g", ME).unwrap().unwrap_err(),
        ns.resolve_partial("/a/g", ME).unwrap()
    );
    assert_eq!(
        ns.resolve_or_parent("/g", ME).unwrap().unwrap_err().ino,
        Ino::ROOT
    );
    // Anything else is the error a lookup gives.
    for bad in ["/b/g", "/a/f/g", "relative", "/a/../f"] {
        assert_eq!(
            ns.resolve_or_parent(bad, ME).unwrap_err().to_string(),
            ns.resolve(bad, ME).unwrap_err().to_string(),
            "{bad}"
        );
    }
    let locked = ns
        .create(
            "/locked",
            NewKind::Dir,
            Perms {
                mode: 0o700,
                ..MINE
            },
            ME,
            &mut alloc,
        )
        .unwrap();
    let stranger = Cred { uid: 7, gid: 7 };
    assert_ne!(locked, Ino::ROOT);
    assert_eq!(
        ns.resolve_or_parent("/locked/x", stranger)
            .unwrap_err()
            .to_string(),
        ns.resolve("/locked/x", stranger).unwrap_err().to_string()
    );
}

/// `unlink` and `rename` after the walk they are charged (`*_resolved`) change the namespace
/// as the versions that walk again do: through a link in the middle of the path, on a link
/// at its end (the link goes, not its target), and refusing what those refuse.
#[test]
fn removal_and_rename_after_a_walk_match_the_walking_versions() {
    let (mut ns, mut alloc) = fresh();
    ns.create("/a", NewKind::Dir, MINE, ME, &mut alloc).unwrap();
    ns.create("/a/d", NewKind::Dir, MINE, ME, &mut alloc)
        .unwrap();
    for f in ["/a/f", "/a/g", "/a/d/h"] {
        ns.create(f, NewKind::File, MINE, ME, &mut alloc).unwrap();
    }
    ns.create(
        "/l",
        NewKind::Symlink { target: "/a" },
        MINE,
        ME,
        &mut alloc,
    )
    .unwrap();
    ns.create(
        "/a/lf",
        NewKind::Symlink { target: "f" },
        MINE,
        ME,
        &mut alloc,
    )
    .unwrap();
    let other = Cred { uid: 7, gid: 7 };
    for (path, dir, who) in [
        ("/l/f", false, ME),
        ("/a/lf", false, ME),
        ("/a/d", true, ME),
        ("/a/d/h", false, ME),
        ("/a/g", false, other),
    ] {
        let (mut walking, mut after_walk) = (ns.clone(), ns.clone());
        let expected = walking.remove(path, dir, who);
        let got = match after_walk.resolve_nofollow(path, who) {
            Ok(r) => after_walk.remove_resolved(path, &r, dir, who),
            Err(e) => Err(e),
        };
        assert_eq!(got, expected, "{path}");
        assert_eq!(
            after_walk.resolve_nofollow(path, ME).is_ok(),
            walking.resolve_nofollow(path, ME).is_ok(),
            "{path}"
        );
    }
    for (from, to, who) in [
        ("/l/f", "/a/f2", ME),
        ("/a/lf", "/a/lf2", ME),
        ("/a/d/h", "/a/h", ME),
        ("/a/g", "/a/f", ME),
        ("/a/g", "/a/g2", other),
        ("/a", "/a/d/x", ME),
    ] {
        let (mut walking, mut after_walk) = (ns.clone(), ns.clone());
        let (mut a1, mut a2) = (alloc.clone(), alloc.clone());
        let expected = walking.rename(from, to, who, &mut a1);
        let got = match after_walk.resolve_nofollow(from, who) {
            Ok(r) => after_walk.rename_resolved(from, &r, to, who, &mut a2),
            Err(e) => Err(e),
        };
        assert_eq!(got, expected, "{from} -> {to}");
        for p in [from, to] {
            assert_eq!(
                after_walk.resolve_nofollow(p, ME).map(|r| r.ino),
                walking.resolve_nofollow(p, ME).map(|r| r.ino),
                "{p}"
            );
        }
    }
}

/// Paths over three names, up to three levels: small enough that random ops keep meeting
/// each other's directories, links and files.
fn small_path() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    proptest::collection::vec(prop::sample::select(vec!["a", "b", "l"]), 1..=3)
        .prop_map(|parts| format!("/{}", parts.join("/")))
}

#[derive(Clone, Debug)]
enum NsOp {
    Mkdir(String),
    Create(String),
    Symlink(String, String),
    Remove(String, bool),
    Rename(String, String),
}

fn ns_op() -> impl proptest::strategy::Strategy<Value = NsOp> {
    use proptest::prelude::*;
    prop_oneof![
        small_path().prop_map(NsOp::Mkdir),
        small_path().prop_map(NsOp::Create),
        (small_path(), small_path()).prop_map(|(p, t)| NsOp::Symlink(p, t)),
        (small_path(), any::<bool>()).prop_map(|(p, d)| NsOp::Remove(p, d)),
        (small_path(), small_path()).prop_map(|(f, t)| NsOp::Rename(f, t)),
    ]
}

proptest::proptest! {
    // Many cases: a rename over a link that a known path went through takes a few ops in a
    // row to meet by chance (the run takes well under a second).
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(8192))]

    /// What `dir_names_version` promises its callers (the replay's memo of directories it
    /// made sure of): while it stays the same, every path that resolved to a directory
    /// still resolves to that directory, whatever files, links and directories come and go.
    #[test]
    fn a_directory_found_stays_until_the_dir_names_version_changes(
        ops in proptest::collection::vec(ns_op(), 1..60)
    ) {
        let (mut ns, mut alloc) = fresh();
        let mut known: std::collections::BTreeMap<String, Ino> = Default::default();
        let mut version = ns.dir_names_version();
        for op in ops {
            let _ = match &op {
                NsOp::Mkdir(p) => ns.create(p, NewKind::Dir, MINE, ME, &mut alloc).map(|_| ()),
                NsOp::Create(p) => ns.create(p, NewKind::File, MINE, ME, &mut alloc).map(|_| ()),
                NsOp::Symlink(p, t) => ns
                    .create(p, NewKind::Symlink { target: t }, MINE, ME, &mut alloc)
                    .map(|_| ()),
                NsOp::Remove(p, dir) => ns.remove(p, *dir, ME).map(|_| ()),
                NsOp::Rename(f, t) => ns.rename(f, t, ME, &mut alloc).map(|_| ()),
            };
            if ns.dir_names_version() != version {
                version = ns.dir_names_version();
                known.clear();
            }
            for (path, ino) in &known {
                proptest::prop_assert_eq!(ns.find(path, ME).ok(), Some(*ino), "{} after {:?}", path, op);
            }
            for path in ["/a", "/b", "/l", "/a/a", "/a/b", "/a/l", "/l/a", "/l/l", "/b/a/l"] {
                if let Ok(ino) = ns.find(path, ME) {
                    if ns.inode(ino).is_some_and(|i| i.is_dir()) {
                        known.entry(path.to_string()).or_insert(ino);
                    }
                }
            }
        }
    }
}
