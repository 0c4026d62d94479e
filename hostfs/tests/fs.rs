//! The host file system over the device: metadata really lives on flash, cold lookups read it
//! through the device level by level, warm ones hit the host cache.

use csd_device::{DataMode, Device, Profile};
use csd_hostfs::fs::{FsError, HostFs};
use csd_hostfs::perms::{Cred, Perms};

const ME: Cred = Cred {
    uid: 1000,
    gid: 1000,
};
const MINE: Perms = Perms {
    uid: 1000,
    gid: 1000,
    mode: 0o755,
};

/// A file system on `profile` without its firmware's data buffer: these tests read the host
/// file system's order of writes and reads in the device's time and counters, which a
/// buffer acknowledging writes from DRAM and serving recent pages would hide
/// (`cold_lookups_…` checks how the two meet).
fn fs(profile: &str) -> HostFs {
    let p = Profile::load(profile).unwrap().without_data_buffer();
    HostFs::format(Device::new(&p, DataMode::Payloads).unwrap(), MINE).unwrap()
}

#[test]
fn files_read_back_what_was_imported() {
    let mut fs = fs("daisyplus-femu");
    fs.mkdir("/d", MINE, ME).unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    fs.import("/d/f", &data, MINE, ME).unwrap();
    assert_eq!(fs.read_file("/d/f", ME).unwrap(), data);
    // 100 000 bytes in 16 KiB blocks: 7 blocks, one contiguous extent on a fresh volume.
    let (extents, _) = fs.fiemap("/d/f", ME).unwrap();
    assert_eq!(extents.len(), 1);
    assert_eq!(extents[0].pages, 7);
}

#[test]
fn cold_lookups_read_flash_level_by_level_and_warm_ones_do_not() {
    let mut fs = fs("cosmos-plus");
    fs.mkdir("/data", MINE, ME).unwrap();
    fs.import("/data/f", b"hello", MINE, ME).unwrap();
    let host = Profile::load("cosmos-plus").unwrap().host;

    let (_, warm) = fs.fiemap("/data/f", ME).unwrap();
    assert_eq!(warm.metadata_reads, 0, "everything just written is cached");
    assert_eq!(warm.ns, host.fiemap_ns + 2 * host.path_component_ns);

    fs.drop_caches();
    let (_, cold) = fs.fiemap("/data/f", ME).unwrap();
    // Root inode, root dir block, /data inode, /data dir block, file inode: but the root's and
    // /data's and the file's inodes share one inode-table block, read once.
    assert_eq!(cold.metadata_reads + cold.cache_hits, 5);
    assert_eq!(cold.metadata_reads, 3, "{cold:?}");
    assert!(
        cold.ns > warm.ns + 3 * 50_000,
        "each read costs at least tR: {cold:?}"
    );
    let (_, again) = fs.fiemap("/data/f", ME).unwrap();
    assert_eq!(
        again, warm,
        "warm again after the cold lookup filled the cache"
    );

    // With the firmware's data buffer, blocks just written are read back from its DRAM
    // when only the host's caches are dropped; a cold start empties it too.
    let p = Profile::load("cosmos-plus").unwrap();
    assert!(p.data_buffer.is_some());
    let mut fs = HostFs::format(Device::new(&p, DataMode::Payloads).unwrap(), MINE).unwrap();
    fs.mkdir("/data", MINE, ME).unwrap();
    fs.import("/data/f", b"hello", MINE, ME).unwrap();
    fs.drop_caches();
    let reads = fs.device().counters().io.flash_page_reads;
    let (_, buffered) = fs.fiemap("/data/f", ME).unwrap();
    assert_eq!(buffered.metadata_reads, 3, "{buffered:?}");
    assert_eq!(
        fs.device().counters().io.flash_page_reads,
        reads,
        "all hits"
    );
    assert!(buffered.ns < cold.ns, "{buffered:?} against {cold:?}");
    fs.cold_start();
    let (_, restarted) = fs.fiemap("/data/f", ME).unwrap();
    assert_eq!(fs.device().counters().io.flash_page_reads, reads + 3);
    assert_eq!(restarted.ns, cold.ns, "as cold as without a buffer");
}

#[test]
fn fiemap_needs_read_permission_and_a_file() {
    let mut fs = fs("daisyplus-femu");
    fs.import(
        "/secret",
        b"x",
        Perms {
            mode: 0o600,
            ..MINE
        },
        ME,
    )
    .unwrap();
    let other = Cred { uid: 7, gid: 7 };
    let e = fs.fiemap("/secret", other).unwrap_err();
    assert!(
        matches!(e, FsError::PermissionDenied { access: "read", .. }),
        "{e}"
    );
    assert!(fs.fiemap("/secret", ME).is_ok());
    fs.mkdir("/dir", MINE, ME).unwrap();
    assert!(matches!(
        fs.fiemap("/dir", ME),
        Err(FsError::IsADirectory(_))
    ));
    assert!(fs
        .fiemap("/missing", ME)
        .unwrap_err()
        .to_string()
        .contains("no such file"));
}

#[test]
fn lookups_are_deterministic() {
    let run = || {
        let mut fs = fs("cosmos-plus");
        for i in 0..50 {
            fs.import(&format!("/f{i}"), &[i as u8; 3000], MINE, ME)
                .unwrap();
        }
        fs.drop_caches();
        (0..50)
            .map(|i| fs.fiemap(&format!("/f{i}"), ME).unwrap().1)
            .collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

#[test]
fn writes_wait_in_the_page_cache_and_reach_flash_out_of_order() {
    use csd_hostfs::fs::OpenOptions;
    let mut fs = fs("cosmos-plus");
    fs.mkdir("/d", MINE, ME).unwrap();
    let old = vec![1u8; 8 * 16384];
    fs.import("/d/f", &old, MINE, ME).unwrap();
    let (before, _) = fs.fiemap("/d/f", ME).unwrap();

    fs.watch_writes();
    let fd = fs.open("/d/f", OpenOptions::WRITE, ME).unwrap();
    let new = vec![2u8; 8 * 16384];
    fs.write(fd, 0, &new).unwrap();
    // The host sees the new data; the flash still holds the old.
    assert_eq!(fs.read(fd, 0, new.len() as u64).unwrap(), new);
    assert_eq!(fs.read_file("/d/f", ME).unwrap(), old);
    assert_eq!(fs.page_cache().len(), 8);

    // A partial writeback pass leaves the flash copy half old, half new.
    fs.seed_writeback(7);
    assert_eq!(fs.writeback_some(3).unwrap(), 3);
    let torn = fs.read_file("/d/f", ME).unwrap();
    let new_blocks = torn.chunks(16384).filter(|b| b[0] == 2).count();
    assert_eq!(new_blocks, 3, "exactly the written-back blocks are new");
    assert_eq!(fs.take_written().len(), 3);

    // fsync finishes the job; overwrites stayed in place.
    fs.fsync(fd).unwrap();
    assert_eq!(fs.read_file("/d/f", ME).unwrap(), new);
    assert!(fs.page_cache().is_empty());
    assert_eq!(fs.fiemap("/d/f", ME).unwrap().0, before);
    fs.close(fd).unwrap();
    assert!(matches!(fs.close(fd), Err(FsError::BadFd(_))));
}

#[test]
fn appends_are_allocated_at_writeback_and_the_flusher_honours_expiry() {
    use csd_hostfs::fs::OpenOptions;
    let mut fs = fs("cosmos-plus");
    let how = OpenOptions {
        write: true,
        create: Some(MINE),
    };
    let fd = fs.open("/new", how, ME).unwrap();
    fs.write(fd, 0, &[9u8; 40_000]).unwrap();
    // Delayed allocation: no blocks yet.
    assert!(fs.fiemap("/new", ME).unwrap().0.is_empty());
    let t = fs.clock();
    fs.advance_to(t.after(10_000_000_000));
    assert_eq!(fs.run_flusher().unwrap(), 0, "not expired after 10 s");
    fs.advance_to(t.after(40_000_000_000));
    assert_eq!(fs.run_flusher().unwrap(), 3, "three 16 KiB blocks expired");
    let (extents, _) = fs.fiemap("/new", ME).unwrap();
    assert_eq!(extents.iter().map(|r| r.pages).sum::<u64>(), 3);
    assert_eq!(fs.read_file("/new", ME).unwrap(), vec![9u8; 40_000]);
    let ro = fs.open("/new", OpenOptions::READ, ME).unwrap();
    assert!(matches!(fs.write(ro, 0, b"x"), Err(FsError::FdMode { .. })));
}

#[test]
fn unlink_rmdir_rename_and_truncate_change_the_namespace_and_free_space() {
    use csd_hostfs::fs::OpenOptions;
    use csd_hostfs::namespace::NsError;
    let mut fs = fs("cosmos-plus");
    fs.mkdir("/a", MINE, ME).unwrap();
    fs.mkdir("/a/sub", MINE, ME).unwrap();
    fs.mkdir("/b", MINE, ME).unwrap();
    let data = vec![3u8; 5 * 16384];
    fs.import("/a/f", &data, MINE, ME).unwrap();
    fs.import("/b/g", b"old g", MINE, ME).unwrap();

    // rename into another directory, replacing a file there.
    fs.rename("/a/f", "/b/g", ME).unwrap();
    assert_eq!(fs.read_file("/b/g", ME).unwrap(), data);
    assert!(matches!(
        fs.lookup("/a/f", ME),
        Err(FsError::Namespace(NsError::NotFound(_)))
    ));
    // A directory cannot move below itself, nor replace a directory.
    assert!(matches!(
        fs.rename("/a", "/a/sub/x", ME),
        Err(FsError::Namespace(NsError::IntoItself(_)))
    ));
    assert!(matches!(
        fs.rename("/b/g", "/a/sub", ME),
        Err(FsError::Namespace(NsError::Exists(_)))
    ));
    fs.rename("/a/sub", "/b/sub2", ME).unwrap();
    assert!(fs.lookup("/b/sub2", ME).is_ok());

    // truncate frees the blocks past the end.
    fs.truncate("/b/g", 20_000, ME).unwrap();
    assert_eq!(fs.read_file("/b/g", ME).unwrap(), data[..20_000].to_vec());
    assert_eq!(
        fs.fiemap("/b/g", ME)
            .unwrap()
            .0
            .iter()
            .map(|r| r.pages)
            .sum::<u64>(),
        2
    );

    // rmdir refuses a non-empty directory; unlink refuses a directory.
    assert!(matches!(
        fs.rmdir("/b", ME),
        Err(FsError::Namespace(NsError::NotEmpty(_)))
    ));
    assert!(matches!(
        fs.unlink("/b/sub2", ME),
        Err(FsError::Namespace(NsError::IsADirectory(_)))
    ));
    let fd = fs.open("/b/g", OpenOptions::WRITE, ME).unwrap();
    fs.write(fd, 0, b"dirty").unwrap();
    fs.unlink("/b/g", ME).unwrap();
    // Open, it lives on without a name until its last close, which drops its dirty pages.
    assert!(!fs.page_cache().is_empty());
    fs.write(fd, 0, b"x").unwrap();
    fs.close(fd).unwrap();
    assert!(fs.page_cache().is_empty(), "its dirty pages went with it");
    fs.rmdir("/b/sub2", ME).unwrap();
    fs.rmdir("/b", ME).unwrap();
    fs.rmdir("/a", ME).unwrap();
    assert_eq!(
        fs.namespace()
            .readdir(csd_hostfs::namespace::Ino::ROOT)
            .unwrap()
            .len(),
        0
    );
    // Someone else may not remove my files.
    fs.import("/mine", b"x", MINE, ME).unwrap();
    let other = Cred { uid: 5, gid: 5 };
    assert!(matches!(
        fs.unlink("/mine", other),
        Err(FsError::Namespace(NsError::PermissionDenied { .. }))
    ));
}

#[test]
fn removed_inode_numbers_are_reused() {
    let mut fs = fs("cosmos-plus");
    let a = fs.import("/a", b"1", MINE, ME).unwrap();
    let b = fs.import("/b", b"2", MINE, ME).unwrap();
    fs.unlink("/a", ME).unwrap();
    let c = fs.import("/c", b"3", MINE, ME).unwrap();
    assert_eq!(c, a, "the freed number comes back first");
    let d = fs.import("/d", b"4", MINE, ME).unwrap();
    assert!(d.0 > b.0);
    assert_eq!(fs.read_file("/c", ME).unwrap(), b"3");
}

/// Operations start in time order; an actor inside one may go back to an earlier actor's
/// time, never before the operation began. Debug builds assert both.
#[cfg(debug_assertions)]
#[test]
fn time_only_moves_forward() {
    use csd_device::VirtualTime;
    let mut f = fs("cosmos-plus");
    f.start_op(VirtualTime(1_000));
    f.set_clock(VirtualTime(5_000));
    f.set_clock(VirtualTime(1_000)); // another actor of the same operation
    assert_eq!(f.clock(), VirtualTime(1_000));
    f.start_op(VirtualTime(2_000));
    let back = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        f.start_op(VirtualTime(1_500));
    }));
    assert!(
        back.is_err(),
        "an operation starting before the previous one is refused"
    );
    let mut g = fs("cosmos-plus");
    g.start_op(VirtualTime(2_000));
    let early = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        g.set_clock(VirtualTime(1_999));
    }));
    assert!(
        early.is_err(),
        "an actor acting before its operation began is refused"
    );
}

/// Pages the device has programmed for users so far.
fn programmed(fs: &HostFs) -> u64 {
    fs.device().counters().ftl.pages_written
}

#[test]
fn with_a_journal_metadata_changes_cost_no_flash_until_fsync_commits_them() {
    use csd_device::VirtualTime;
    use csd_hostfs::fs::OpenOptions;
    let mut fs = fs("cosmos-plus");
    fs.enable_journal().unwrap();
    let page_ns = Profile::load("cosmos-plus").unwrap().timing.page_program_ns;
    let before = programmed(&fs);
    fs.start_op(VirtualTime(1_000));
    fs.mkdir("/d", MINE, ME).unwrap();
    let how = OpenOptions {
        write: true,
        create: Some(MINE),
    };
    let fd = fs.open("/d/f", how, ME).unwrap();
    fs.write(fd, 0, &[7; 100]).unwrap();
    assert_eq!(
        programmed(&fs),
        before,
        "a mkdir, a create and a write stay in memory"
    );
    // Their walks hit the metadata cache: a path component each (the root for the mkdir,
    // the root for the create), nothing from the device.
    let component = Profile::load("cosmos-plus").unwrap().host.path_component_ns;
    assert_eq!(
        fs.clock(),
        VirtualTime(1_000 + 2 * component),
        "and take no device time"
    );

    fs.fsync(fd).unwrap();
    // The data page; then one descriptor and a copy of each changed block (the inode-table
    // block holding the root's, /d's and f's inodes, the root's and /d's directory blocks);
    // then the commit block, once the copies are on the device.
    let stats = fs.journal_stats().unwrap();
    assert_eq!(stats.commits, 1);
    assert_eq!(stats.log_blocks, 1 + 3 + 1);
    assert_eq!(programmed(&fs), before + 1 + stats.log_blocks);
    let took = fs.clock().since(VirtualTime(1_000));
    assert!(
        took >= 3 * page_ns,
        "data, log, commit block: three programs one after another, {took} ns"
    );

    // Nothing changed since: the next fsync commits nothing.
    let after = programmed(&fs);
    fs.fsync(fd).unwrap();
    assert_eq!(programmed(&fs), after);
    assert_eq!(fs.journal_stats().unwrap().commits, 1);

    // Dirty metadata survives drop_caches: a lookup finds it without reading flash.
    fs.drop_caches();
    let (_, cost) = fs.lookup("/d/f", ME).unwrap();
    assert_eq!(cost.metadata_reads, 0);
    fs.check_invariants().unwrap();
}

#[test]
fn the_journal_commits_every_five_seconds_and_the_flusher_writes_blocks_home() {
    use csd_device::VirtualTime;
    let mut fs = fs("cosmos-plus");
    fs.enable_journal().unwrap();
    let s = 1_000_000_000u64;
    fs.start_op(VirtualTime(s));
    fs.mkdir("/a", MINE, ME).unwrap();
    // The transaction starts with the change, after the mkdir's walk.
    let changed = fs.clock().ns();
    assert!(changed > s);
    // Before the commit interval: nothing.
    fs.start_op(VirtualTime(changed + 5 * s - 1));
    fs.run_flusher().unwrap();
    assert_eq!(fs.journal_stats().unwrap().commits, 0);
    // At 5 s: kjournald commits in the background; the caller's clock does not move.
    fs.start_op(VirtualTime(changed + 5 * s));
    fs.run_flusher().unwrap();
    assert_eq!(fs.journal_stats().unwrap().commits, 1);
    assert_eq!(fs.clock(), VirtualTime(changed + 5 * s));
    assert_eq!(fs.journal_stats().unwrap().checkpointed, 0);
    // Thirty seconds after the commit, the flusher writes the blocks to their homes.
    fs.start_op(VirtualTime(s + 40 * s));
    let before = programmed(&fs);
    fs.run_flusher().unwrap();
    let home = fs.journal_stats().unwrap().checkpointed;
    assert!(
        home >= 2,
        "the inode-table and directory blocks went home: {home}"
    );
    assert_eq!(programmed(&fs), before + home);
    fs.check_invariants().unwrap();
}

#[test]
fn sync_commits_and_writes_every_block_home() {
    let mut fs = fs("cosmos-plus");
    fs.enable_journal().unwrap();
    for i in 0..20 {
        fs.mkdir(&format!("/d{i}"), MINE, ME).unwrap();
    }
    fs.sync().unwrap();
    let stats = fs.journal_stats().unwrap();
    assert_eq!(stats.commits, 1);
    // The inode-table block, the root's directory block and each new directory's own.
    assert_eq!(stats.checkpointed, 2 + 20);
    // Home now: a cold lookup reads them from flash again.
    fs.drop_caches();
    let (_, cost) = fs.lookup("/d7", ME).unwrap();
    assert!(cost.metadata_reads > 0);
}

#[test]
fn after_an_overwrite_fsync_commits_the_new_mtime_and_fdatasync_does_not() {
    use csd_hostfs::fs::OpenOptions;
    let mut fs = fs("cosmos-plus");
    fs.enable_journal().unwrap();
    let how = OpenOptions {
        write: true,
        create: Some(MINE),
    };
    let fd = fs.open("/f", how, ME).unwrap();
    fs.write(fd, 0, &[1; 4096]).unwrap();
    fs.fdatasync(fd).unwrap();
    assert_eq!(
        fs.journal_stats().unwrap().commits,
        1,
        "a new file's size and blocks"
    );
    // Overwrite in place: no new size, no new blocks, only the timestamps change.
    fs.write(fd, 0, &[2; 4096]).unwrap();
    let before = programmed(&fs);
    fs.fdatasync(fd).unwrap();
    assert_eq!(programmed(&fs), before + 1, "the data page alone");
    assert_eq!(fs.journal_stats().unwrap().commits, 1);
    fs.write(fd, 0, &[3; 4096]).unwrap();
    fs.fsync(fd).unwrap();
    assert_eq!(
        fs.journal_stats().unwrap().commits,
        2,
        "fsync makes the mtime durable"
    );
    fs.check_invariants().unwrap();
}

/// After a long idle stretch, kjournald's overdue commit and the flusher's home writes of the
/// same blocks come in one pass: the home writes wait for the commit block, so the device is
/// busy for three programs in a row (log, commit block, home), not two.
#[test]
fn blocks_go_home_only_after_the_commit_that_logged_them() {
    use csd_device::VirtualTime;
    let mut fs = fs("cosmos-plus");
    fs.enable_journal().unwrap();
    let page_ns = Profile::load("cosmos-plus").unwrap().timing.page_program_ns;
    let s = 1_000_000_000u64;
    fs.start_op(VirtualTime(s));
    fs.mkdir("/a", MINE, ME).unwrap();
    let now = VirtualTime(50 * s);
    fs.start_op(now);
    fs.run_flusher().unwrap();
    let stats = fs.journal_stats().unwrap();
    assert_eq!(stats.commits, 1);
    assert!(stats.checkpointed >= 2, "{stats:?}");
    let busy = fs.device().idle_at().since(now);
    assert!(
        busy >= 3 * page_ns,
        "log, commit block, then home: {busy} ns for {page_ns} ns programs"
    );
    fs.check_invariants().unwrap();
}

#[test]
fn a_change_in_a_big_directory_journals_only_the_block_it_touched() {
    use csd_hostfs::fs::OpenOptions;
    let mut fs = fs("cosmos-plus");
    fs.enable_journal().unwrap();
    fs.mkdir("/big", MINE, ME).unwrap();
    let how = OpenOptions {
        write: true,
        create: Some(MINE),
    };
    // 2000 entries of 32 bytes: 16 directory blocks.
    for i in 0..2000 {
        let fd = fs.open(&format!("/big/file-{i:019}"), how, ME).unwrap();
        fs.close(fd).unwrap();
    }
    fs.sync().unwrap();
    let logged = |fs: &HostFs| fs.journal_stats().unwrap().log_blocks;
    let before = logged(&fs);
    // A create, an unlink and a rename, each committed: the descriptor, the inode-table
    // blocks and the one or two directory blocks that hold the entries, never the
    // directory's other blocks.
    let fd = fs.open("/big/new", how, ME).unwrap();
    fs.fsync(fd).unwrap();
    fs.close(fd).unwrap();
    let create = logged(&fs) - before;
    fs.unlink(&format!("/big/file-{:019}", 1500), ME).unwrap();
    fs.sync().unwrap();
    let unlink = logged(&fs) - before - create;
    fs.rename(
        &format!("/big/file-{:019}", 10),
        &format!("/big/file-{:019}", 1999),
        ME,
    )
    .unwrap();
    fs.sync().unwrap();
    let rename = logged(&fs) - before - create - unlink;
    for (op, blocks) in [("create", create), ("unlink", unlink), ("rename", rename)] {
        assert!(
            (2..=5).contains(&blocks),
            "{op} logged {blocks} blocks of a 16-block directory"
        );
    }
    fs.check_invariants().unwrap();
}

#[test]
fn a_listing_reads_every_block_of_the_directory_and_copies_each_entry() {
    let mut fs = fs("cosmos-plus");
    fs.mkdir("/few", MINE, ME).unwrap();
    fs.mkdir("/many", MINE, ME).unwrap();
    fs.import("/few/a", b"x", MINE, ME).unwrap();
    // Long names fill 16 KiB directory blocks: 2000 entries of ~60 bytes take several.
    for i in 0..2000 {
        let name = format!("/many/{i:0>50}");
        fs.import(&name, b"x", MINE, ME).unwrap();
    }
    fs.drop_caches();
    let (n, few) = fs.readdir("/few", ME).unwrap();
    assert_eq!(n, 3, "the file, '.' and '..'");
    let (n, many) = fs.readdir("/many", ME).unwrap();
    assert_eq!(n, 2002);
    let ino = fs.namespace().find("/many", ME).unwrap();
    let blocks = fs.namespace().dir_block_count(ino);
    assert!(blocks >= 4, "{blocks} blocks");
    // The root's blocks are cached by the first listing; /many's inode shares an inode-table
    // block with /few's: what is left is each of its directory blocks.
    assert_eq!(many.metadata_reads as u64, blocks, "{many:?} after {few:?}");
    let host = Profile::load("cosmos-plus").unwrap().host;
    let copy = csd_device::transfer_ns(2002 * 72, host.copy_bytes_per_sec);
    assert!(many.ns >= copy + blocks * 50_000, "{many:?}");
    // Warm, a listing costs its walk and its copy.
    let (_, warm) = fs.readdir("/many", ME).unwrap();
    assert_eq!(warm.metadata_reads, 0);
    assert!(warm.ns < many.ns);

    assert!(matches!(
        fs.readdir("/few/a", ME),
        Err(FsError::Namespace(_))
    ));
    fs.mkdir(
        "/shut",
        Perms {
            mode: 0o300,
            ..MINE
        },
        ME,
    )
    .unwrap();
    assert!(matches!(
        fs.readdir("/shut", ME),
        Err(FsError::PermissionDenied { .. })
    ));
}

#[test]
fn an_attribute_change_dirties_the_inode_for_the_next_commit_and_only_its_owner_may() {
    use csd_hostfs::fs::OpenOptions;
    let mut fs = fs("cosmos-plus");
    fs.enable_journal().unwrap();
    fs.mkdir("/d", MINE, ME).unwrap();
    let how = OpenOptions {
        write: true,
        create: Some(MINE),
    };
    let fd = fs.open("/d/f", how, ME).unwrap();
    fs.write(fd, 0, &[7; 100]).unwrap();
    fs.fsync(fd).unwrap();
    let commits = fs.journal_stats().unwrap().commits;
    // Nothing changed: an fsync commits nothing.
    fs.fsync(fd).unwrap();
    assert_eq!(fs.journal_stats().unwrap().commits, commits);
    // A chmod: the inode's block joins the running transaction, and the fsync commits it.
    let before = programmed(&fs);
    fs.setattr("/d/f", ME).unwrap();
    fs.fsync(fd).unwrap();
    let stats = fs.journal_stats().unwrap();
    assert_eq!(stats.commits, commits + 1);
    assert_eq!(
        programmed(&fs),
        before + 3,
        "a descriptor, the inode block's copy and the commit block"
    );
    let other = Cred {
        uid: 1001,
        gid: 1000,
    };
    assert!(matches!(
        fs.setattr("/d/f", other),
        Err(FsError::PermissionDenied { .. })
    ));
    fs.setattr("/d/f", Cred::ROOT).unwrap();
    assert!(fs.setattr("/d/nope", ME).is_err());
}

/// A file's reserved blocks (fallocate's, not yet written).
fn reserved_of(fs: &HostFs, path: &str) -> Vec<csd_device::Extent> {
    let ino = fs.namespace().find(path, ME).unwrap();
    match &fs.namespace().inode(ino).unwrap().kind {
        csd_hostfs::namespace::InodeKind::File { reserved, .. } => reserved.clone(),
        _ => panic!("{path} is a file"),
    }
}

#[test]
fn fallocated_blocks_read_as_zeros_and_become_the_files_blocks_when_written() {
    use csd_hostfs::fs::OpenOptions;
    let mut fs = fs("cosmos-plus");
    fs.enable_journal().unwrap();
    let bs = 16384u64;
    let how = OpenOptions {
        write: true,
        create: Some(MINE),
    };
    let fd = fs.open("/f", how, ME).unwrap();
    let free = fs.free_blocks();
    // KEEP_SIZE: 8 blocks set aside, the size unchanged.
    fs.fallocate(fd, 0, 8 * bs, true).unwrap();
    assert_eq!(fs.free_blocks(), free - 8);
    assert_eq!(fs.fd_size(fd).unwrap(), 0);
    let reserved = reserved_of(&fs, "/f");
    assert_eq!(reserved.iter().map(|r| r.pages).sum::<u64>(), 8);
    // Another file written and placed in between takes other blocks.
    let other = fs.open("/g", how, ME).unwrap();
    fs.write(other, 0, &vec![1; 3 * bs as usize]).unwrap();
    fs.fsync(other).unwrap();
    // Writeback of the first five blocks puts them in the set-aside blocks, in order.
    let data: Vec<u8> = (0..5 * bs).map(|i| (i % 253) as u8).collect();
    fs.write(fd, 0, &data).unwrap();
    fs.fsync(fd).unwrap();
    let (extents, _) = fs.fiemap("/f", ME).unwrap();
    assert_eq!(extents.len(), 1);
    assert_eq!(extents[0].first, reserved[0].first);
    assert_eq!(extents[0].pages, 5);
    assert_eq!(
        reserved_of(&fs, "/f").iter().map(|r| r.pages).sum::<u64>(),
        3
    );
    assert_eq!(
        fs.free_blocks(),
        free - 8 - 3,
        "no new block for the first file"
    );
    assert_eq!(fs.read_file("/f", ME).unwrap(), data);

    // Mode 0 grows the file: the new bytes read as zeros, without touching flash.
    fs.fallocate(fd, 5 * bs, 4 * bs, false).unwrap();
    assert_eq!(fs.fd_size(fd).unwrap(), 9 * bs);
    assert_eq!(
        fs.free_blocks(),
        free - 9 - 3,
        "one block beyond the eight set aside"
    );
    let commands = fs.device().counters().io.host_commands;
    assert_eq!(
        fs.read(fd, 5 * bs, 4 * bs).unwrap(),
        vec![0; 4 * bs as usize]
    );
    assert_eq!(fs.device().counters().io.host_commands, commands);
    fs.check_invariants().unwrap();

    // A truncate that does not grow the file frees what is set aside past its end; an
    // unlink frees the rest.
    fs.truncate("/f", 9 * bs, ME).unwrap();
    assert_eq!(fs.free_blocks(), free - 9 - 3);
    fs.truncate("/f", 2 * bs, ME).unwrap();
    assert!(reserved_of(&fs, "/f").is_empty());
    assert_eq!(fs.free_blocks(), free - 2 - 3);
    fs.fallocate(fd, 0, 6 * bs, true).unwrap();
    fs.close(fd).unwrap();
    fs.unlink("/f", ME).unwrap();
    assert_eq!(fs.free_blocks(), free - 3);
    fs.check_invariants().unwrap();
}

#[test]
fn fallocate_refuses_a_read_only_fd_an_empty_range_and_more_than_is_free() {
    use csd_hostfs::fs::OpenOptions;
    use csd_hostfs::namespace::NsError;
    let mut fs = fs("cosmos-plus");
    fs.import("/f", b"abc", MINE, ME).unwrap();
    let ro = fs.open("/f", OpenOptions::READ, ME).unwrap();
    assert!(matches!(
        fs.fallocate(ro, 0, 4096, false),
        Err(FsError::FdMode { .. })
    ));
    let fd = fs.open("/f", OpenOptions::WRITE, ME).unwrap();
    assert!(matches!(
        fs.fallocate(fd, 7, 0, false),
        Err(FsError::EmptyAllocation { offset: 7, .. })
    ));
    assert!(matches!(
        fs.fallocate(fd, u64::MAX - 1, 2, false),
        Err(FsError::FileTooLarge { .. })
    ));
    // All the device's blocks and more: refused, and nothing set aside or grown.
    let free = fs.free_blocks();
    let err = fs.fallocate(fd, 0, 1 << 40, false).unwrap_err();
    assert!(
        matches!(err, FsError::Namespace(NsError::NoSpace(_))),
        "{err}"
    );
    assert_eq!(fs.free_blocks(), free);
    assert_eq!(fs.fd_size(fd).unwrap(), 3);
    assert_eq!(fs.read_file("/f", ME).unwrap(), b"abc");
}

#[test]
fn without_a_journal_an_attribute_change_writes_the_inode_in_place() {
    let mut fs = fs("cosmos-plus");
    fs.import("/f", b"abc", MINE, ME).unwrap();
    let before = programmed(&fs);
    fs.setattr("/f", ME).unwrap();
    assert_eq!(programmed(&fs), before + 1, "the inode's block");
}

#[test]
fn sync_file_range_starts_writeback_of_its_range_and_waits_only_when_asked() {
    use csd_hostfs::fs::OpenOptions;
    let program = Profile::load("cosmos-plus").unwrap().timing.page_program_ns;
    let bs = 16384u64;
    // A fresh file of 8 dirty blocks; `write`, `wait_after` as given over blocks 2..6.
    let run = |write: bool, wait_after: bool, len: u64| {
        let mut fs = fs("cosmos-plus");
        fs.enable_journal().unwrap();
        let how = OpenOptions {
            write: true,
            create: Some(MINE),
        };
        let fd = fs.open("/f", how, ME).unwrap();
        fs.write(fd, 0, &vec![5; 8 * bs as usize]).unwrap();
        let (t0, commits, before) = (
            fs.clock(),
            fs.journal_stats().unwrap().commits,
            programmed(&fs),
        );
        fs.sync_file_range(fd, 2 * bs, len, write, wait_after)
            .unwrap();
        assert_eq!(
            fs.journal_stats().unwrap().commits,
            commits,
            "it commits nothing"
        );
        fs.check_invariants().unwrap();
        (
            fs.clock().0 - t0.0,
            programmed(&fs) - before,
            fs.page_cache().len(),
        )
    };
    let (waited, written, left) = run(true, true, 4 * bs);
    assert!(
        waited >= program,
        "waited {waited} ns for a {program} ns program"
    );
    assert_eq!(
        (written, left),
        (4, 4),
        "blocks 2..6 written, the rest still dirty"
    );
    let (waited, written, left) = run(true, false, 4 * bs);
    assert!(
        waited < program / 10,
        "started, not waited for: {waited} ns"
    );
    assert_eq!((written, left), (4, 4));
    // Length 0 runs to the end of the file.
    let (_, written, left) = run(true, true, 0);
    assert_eq!((written, left), (6, 2));
    // A wait without a write has nothing under way to wait for.
    let (waited, written, left) = run(false, true, 0);
    assert_eq!((waited, written, left), (0, 0, 8));
}

#[test]
fn a_lookup_of_a_missing_name_walks_as_far_as_the_path_goes() {
    let mut fs = fs("cosmos-plus");
    fs.mkdir("/data", MINE, ME).unwrap();
    fs.import("/data/f", b"hello", MINE, ME).unwrap();
    fs.drop_caches();
    // Root inode, root dir block, /data's inode, /data's block searched for "nope": the
    // inodes share one inode-table block.
    let miss = fs.lookup_partial("/data/nope", ME).unwrap();
    assert_eq!((miss.metadata_reads, miss.cache_hits), (3, 1), "{miss:?}");
    assert!(
        miss.ns >= 3 * 50_000,
        "each read costs at least tR: {miss:?}"
    );
    // Warm, a miss costs the walk's CPU only.
    let warm = fs.lookup_partial("/data/nope", ME).unwrap();
    assert_eq!((warm.metadata_reads, warm.cache_hits), (0, 4));
    assert!(warm.ns < 50_000, "{warm:?}");
    // A name missing in the middle stops the walk there: the root's block searched.
    fs.drop_caches();
    let early = fs.lookup_partial("/nope/deeper/still", ME).unwrap();
    assert_eq!(early.metadata_reads + early.cache_hits, 2, "{early:?}");
    // A path that is there costs what a lookup does (both warm).
    fs.lookup("/data/f", ME).unwrap();
    let (_, hit) = fs.lookup("/data/f", ME).unwrap();
    assert_eq!(fs.lookup_partial("/data/f", ME).unwrap(), hit);
    // Any other failure is an error: a file in the middle of the path.
    assert!(fs.lookup_partial("/data/f/x", ME).is_err());
}

#[test]
fn a_symbolic_link_is_an_inode_with_its_target_inside_or_in_a_block_of_its_own() {
    use csd_hostfs::fs::OpenOptions;
    use csd_hostfs::namespace::NsError;
    let mut fs = fs("cosmos-plus");
    fs.mkdir("/d", MINE, ME).unwrap();
    fs.import("/d/f", b"data", MINE, ME).unwrap();
    let free = fs.free_blocks();
    // A short target lives in the inode; a long one takes a block.
    fs.symlink("/d/short", "f", MINE, ME).unwrap();
    assert_eq!(fs.free_blocks(), free);
    let long = format!("/d/{}", "x".repeat(200));
    fs.symlink("/d/long", &long, MINE, ME).unwrap();
    assert_eq!(fs.free_blocks(), free - 1);
    assert!(matches!(
        fs.symlink("/d/short", "f", MINE, ME),
        Err(FsError::Namespace(NsError::Exists(_)))
    ));
    for bad in [String::new(), "y".repeat(4096), "a\0b".to_string()] {
        assert!(matches!(
            fs.symlink("/d/bad", &bad, MINE, ME),
            Err(FsError::Namespace(NsError::BadTarget(n))) if n == bad.len()
        ));
    }
    // Listed like any entry; lstat finds the link itself, even a dangling one, where stat
    // follows it and finds nothing.
    let (entries, _) = fs.readdir("/d", ME).unwrap();
    assert_eq!(entries, 2 + 3, "'.', '..', the file and the two links");
    assert!(fs.lookup_nofollow("/d/long", ME).is_ok());
    assert!(matches!(
        fs.lookup("/d/long", ME),
        Err(FsError::Namespace(NsError::NotFound(_)))
    ));
    // Opened, truncated and read through, it is the file it names.
    let fd = fs.open("/d/short", OpenOptions::READ, ME).unwrap();
    assert_eq!(fs.fd_ino(fd).unwrap(), fs.lookup("/d/f", ME).unwrap().0.ino);
    assert_eq!(fs.read(fd, 0, 4).unwrap(), b"data");
    fs.close(fd).unwrap();
    assert_eq!(fs.read_file("/d/short", ME).unwrap(), b"data");
    // A creating open through a dangling link creates what it names, as Linux does; through
    // a link to a directory that is not there, it fails naming the link's path.
    let create = OpenOptions {
        write: true,
        create: Some(MINE),
    };
    let fd = fs.open("/d/long", create, ME).unwrap();
    fs.write(fd, 0, b"made").unwrap();
    fs.fsync(fd).unwrap();
    fs.close(fd).unwrap();
    assert_eq!(fs.read_file(&long, ME).unwrap(), b"made");
    fs.symlink("/d/nowhere", "/d/none/f", MINE, ME).unwrap();
    assert!(matches!(
        fs.open("/d/nowhere", create, ME),
        Err(FsError::Namespace(NsError::NotFound(p))) if p == "/d/nowhere"
    ));
    fs.unlink("/d/nowhere", ME).unwrap();
    fs.unlink(&long, ME).unwrap();
    // A rename over the long link, and an unlink of the short one (the link, not the file
    // it names), free what they held.
    fs.rename("/d/f", "/d/long", ME).unwrap();
    assert_eq!(fs.read_file("/d/long", ME).unwrap(), b"data");
    assert_eq!(fs.free_blocks(), free);
    fs.symlink("/d/f", "long", MINE, ME).unwrap();
    fs.unlink("/d/f", ME).unwrap();
    assert_eq!(fs.read_file("/d/long", ME).unwrap(), b"data");
    fs.unlink("/d/short", ME).unwrap();
    assert_eq!(fs.readdir("/d", ME).unwrap().0, 2 + 1);
    fs.check_invariants().unwrap();
}

#[test]
fn a_path_through_a_link_to_a_directory_is_walked_through_its_target_and_costs_its_reads() {
    use csd_hostfs::fs::OpenOptions;
    use csd_hostfs::namespace::NsError;
    let mut fs = fs("cosmos-plus");
    fs.mkdir("/src", MINE, ME).unwrap();
    fs.mkdir("/src/lib", MINE, ME).unwrap();
    fs.import("/src/lib/a.rs", b"fn a() {}", MINE, ME).unwrap();
    fs.symlink("/soft", "src", MINE, ME).unwrap();
    fs.symlink("/abs", "/src/lib", MINE, ME).unwrap();
    fs.symlink("/src/up", "../src/./lib/", MINE, ME).unwrap();
    let file = fs.lookup("/src/lib/a.rs", ME).unwrap().0.ino;
    for via in [
        "/soft/lib/a.rs",
        "/abs/a.rs",
        "/src/up/a.rs",
        "/soft/up/a.rs",
    ] {
        let (r, _) = fs.lookup(via, ME).unwrap();
        assert_eq!(r.ino, file, "{via}");
        // The ino list is the file's real path, and the names looked up on the way to the
        // link and in its target are counted beside it.
        assert_eq!(r.ino_list.len(), 4, "{via}");
        assert!(r.detour >= 1, "{via}");
    }
    // Writes through a link land in the file it names.
    let fd = fs
        .open(
            "/soft/lib/b.rs",
            OpenOptions {
                write: true,
                create: Some(MINE),
            },
            ME,
        )
        .unwrap();
    fs.write(fd, 0, b"b").unwrap();
    // Until written back, the flash holds nothing of it.
    assert_eq!(fs.read_file("/src/lib/b.rs", ME).unwrap(), b"\0");
    fs.fsync(fd).unwrap();
    fs.close(fd).unwrap();
    assert_eq!(fs.read_file("/src/lib/b.rs", ME).unwrap(), b"b");
    // A walk through a link is dearer than the direct one: the link's inode is read (its
    // inode-table block is the root's here, so no more flash reads), and its names are
    // looked up.
    fs.drop_caches();
    let direct = fs.lookup("/src/lib/a.rs", ME).unwrap().1;
    fs.drop_caches();
    let linked = fs.lookup("/soft/lib/a.rs", ME).unwrap().1;
    let blocks = |c: &csd_hostfs::fs::LookupCost| c.metadata_reads + c.cache_hits;
    assert!(blocks(&linked) > blocks(&direct));
    assert!(linked.metadata_reads >= direct.metadata_reads);
    assert!(linked.ns > direct.ns);
    // A cycle fails after 40 links, whatever the path's length.
    fs.symlink("/loop1", "loop2/x", MINE, ME).unwrap();
    fs.symlink("/loop2", "/loop1", MINE, ME).unwrap();
    assert!(matches!(
        fs.lookup("/loop1/a", ME),
        Err(FsError::Namespace(NsError::Loop(p))) if p == "/loop1/a"
    ));
    // A link in the middle of a path to a file is not a directory.
    fs.symlink("/tofile", "src/lib/a.rs", MINE, ME).unwrap();
    assert!(matches!(
        fs.lookup("/tofile/x", ME),
        Err(FsError::Namespace(NsError::NotADirectory(_)))
    ));
    fs.check_invariants().unwrap();
}

#[test]
fn a_hard_link_is_one_inode_under_two_names_and_goes_with_its_last() {
    use csd_hostfs::fs::OpenOptions;
    use csd_hostfs::namespace::NsError;
    let mut fs = fs("cosmos-plus");
    fs.mkdir("/d", MINE, ME).unwrap();
    fs.mkdir("/e", MINE, ME).unwrap();
    let free = fs.free_blocks();
    fs.import("/d/f", b"data", MINE, ME).unwrap();
    let held = free - fs.free_blocks();
    assert_eq!(held, 1);
    let l = fs.link("/d/f", "/e/g", ME).unwrap();
    assert_eq!(fs.lookup("/e/g", ME).unwrap().0.ino, l.ino);
    assert_eq!(fs.lookup("/d/f", ME).unwrap().0.ino, l.ino);
    assert_eq!(fs.namespace().inode(l.ino).unwrap().links, 2);
    assert_eq!(fs.free_blocks(), free - held, "a name takes no data block");
    // One file: a write through one name is read through the other, from the page cache
    // (still dirty when the first name goes, and kept).
    let fd = fs.open("/e/g", OpenOptions::WRITE, ME).unwrap();
    fs.write(fd, 0, b"DATA").unwrap();
    fs.close(fd).unwrap();
    let gone = fs.unlink("/d/f", ME).unwrap();
    assert!(!gone.inode_freed);
    assert!(gone.blocks.is_empty());
    assert!(fs.page_cache().is_dirty(l.ino));
    let fd = fs.open("/e/g", OpenOptions::READ, ME).unwrap();
    assert_eq!(fs.read(fd, 0, 4).unwrap(), b"DATA");
    fs.close(fd).unwrap();
    fs.sync().unwrap();
    assert_eq!(fs.read_file("/e/g", ME).unwrap(), b"DATA");
    assert_eq!(fs.free_blocks(), free - held);
    fs.check_invariants().unwrap();

    // What ext4 refuses, with nothing changed.
    let refused = [
        (fs.link("/d", "/e/d2", ME), "a directory"),
        (fs.link("/e/g", "/e/g", ME), "an existing name"),
        (fs.link("/d/f", "/e/x", ME), "a missing file"),
        (fs.link("/e/g", "/nodir/x", ME), "a missing directory"),
        (
            fs.link("/e/g", "/d/x", Cred { uid: 7, gid: 7 }),
            "a directory the caller may not write",
        ),
    ];
    for (r, what) in refused {
        let e = r.expect_err(what);
        assert!(
            matches!(
                e,
                FsError::Namespace(
                    NsError::LinkToDirectory(_)
                        | NsError::Exists(_)
                        | NsError::NotFound(_)
                        | NsError::PermissionDenied { .. }
                )
            ),
            "{what}: {e}"
        );
    }
    assert_eq!(fs.namespace().inode(l.ino).unwrap().links, 1);

    // A symbolic link is linked itself, not what it names: `cp -al` copies a tree's links
    // so, and one to a directory is no link to a directory.
    let to_dir = fs.symlink("/e/ld", "/e", MINE, ME).unwrap();
    let l2 = fs.link("/e/ld", "/d/ld2", ME).unwrap();
    assert_eq!(l2.ino, to_dir);
    assert_eq!(fs.namespace().inode(to_dir).unwrap().links, 2);
    assert_eq!(fs.lookup("/d/ld2/g", ME).unwrap().0.ino, l.ino);
    fs.unlink("/d/ld2", ME).unwrap();
    fs.unlink("/e/ld", ME).unwrap();
    fs.check_invariants().unwrap();

    // A rename between two names of one file does nothing; a rename over one name leaves
    // the file its other; the last name takes the blocks with it.
    fs.link("/e/g", "/d/h", ME).unwrap();
    fs.rename("/e/g", "/d/h", ME).unwrap();
    assert!(fs.lookup("/e/g", ME).is_ok() && fs.lookup("/d/h", ME).is_ok());
    fs.import("/d/other", b"other", MINE, ME).unwrap();
    let r = fs.rename("/d/other", "/d/h", ME).unwrap();
    assert!(r.replaced.is_some_and(|g| !g.inode_freed && g.ino == l.ino));
    assert_eq!(fs.read_file("/e/g", ME).unwrap(), b"DATA");
    assert_eq!(fs.read_file("/d/h", ME).unwrap(), b"other");
    fs.check_invariants().unwrap();
    fs.unlink("/d/h", ME).unwrap();
    let last = fs.unlink("/e/g", ME).unwrap();
    assert!(last.inode_freed);
    assert!(fs.namespace().inode(l.ino).is_none());
    assert!(!fs.page_cache().is_dirty(l.ino));
    assert_eq!(fs.free_blocks(), free);
    fs.check_invariants().unwrap();
}

#[test]
fn namespace_changes_pay_the_walks_their_system_calls_make() {
    use csd_device::VirtualTime;
    let mut fs = fs("cosmos-plus");
    // Metadata changes stay in memory: what a change costs is its walk.
    fs.enable_journal().unwrap();
    let component = Profile::load("cosmos-plus").unwrap().host.path_component_ns;
    fs.mkdir("/a", MINE, ME).unwrap();
    fs.mkdir("/a/b", MINE, ME).unwrap();
    for f in ["f", "g", "h"] {
        fs.import(&format!("/a/b/{f}"), b"x", MINE, ME).unwrap();
    }
    fs.sync().unwrap();
    let took = |fs: &mut HostFs, op: &dyn Fn(&mut HostFs)| {
        let t = fs.clock();
        op(fs);
        fs.clock().since(t)
    };
    // Cold, an unlink reads what a stat of the same path reads.
    fs.drop_caches();
    let (_, stat) = fs.lookup("/a/b/g", ME).unwrap();
    assert!(stat.metadata_reads > 0);
    fs.drop_caches();
    let unlink = took(&mut fs, &|fs| {
        fs.unlink("/a/b/g", ME).unwrap();
    });
    assert_eq!(unlink, stat.ns);
    // Warm, a change costs its walks' components: a create's to its directory, a rename's
    // and a link's both paths.
    let mkdir = took(&mut fs, &|fs| {
        fs.mkdir("/a/b/n", MINE, ME).unwrap();
    });
    assert_eq!(mkdir, 2 * component);
    let rename = took(&mut fs, &|fs| {
        fs.rename("/a/b/f", "/a/b/n/f", ME).unwrap();
    });
    assert_eq!(rename, (3 + 3) * component);
    let link = took(&mut fs, &|fs| {
        fs.link("/a/b/h", "/a/l", ME).unwrap();
    });
    assert_eq!(link, (3 + 1) * component);
    // A refused create still walked, to the name it found.
    let t = fs.clock();
    assert!(fs.mkdir("/a/l", MINE, ME).is_err());
    assert_eq!(fs.clock(), VirtualTime(t.ns() + 2 * component));
    fs.check_invariants().unwrap();
}

#[test]
fn a_file_unlinked_while_open_lives_until_its_last_close() {
    use csd_hostfs::fs::OpenOptions;
    let mut fs = fs("cosmos-plus");
    fs.mkdir("/d", MINE, ME).unwrap();
    let free = fs.free_blocks();
    let how = OpenOptions {
        write: true,
        create: Some(MINE),
    };
    // A temporary file as SQLite and tmpfile(3) make one: opened, unlinked, then used.
    let fd = fs.open("/d/tmp", how, ME).unwrap();
    let reader = fs.open("/d/tmp", OpenOptions::READ, ME).unwrap();
    let ino = fs.fd_ino(fd).unwrap();
    let gone = fs.unlink("/d/tmp", ME).unwrap();
    assert!(!gone.inode_freed, "an open file outlives its name");
    assert!(fs.lookup("/d/tmp", ME).is_err());
    fs.write(fd, 0, &[9; 40_000]).unwrap();
    fs.fsync(fd).unwrap();
    assert_eq!(fs.read(reader, 39_990, 100).unwrap(), [9; 10]);
    assert!(fs.free_blocks() < free, "its blocks are allocated");
    fs.check_invariants().unwrap();
    // Closing one descriptor keeps it; the last frees it, blocks and inode.
    fs.close(fd).unwrap();
    assert_eq!(fs.read(reader, 0, 4).unwrap(), [9; 4]);
    fs.close(reader).unwrap();
    assert!(fs.namespace().inode(ino).is_none());
    assert_eq!(fs.free_blocks(), free);
    fs.check_invariants().unwrap();

    // So for a file renamed over while open, and a directory removed while open.
    fs.import("/d/a", b"new", MINE, ME).unwrap();
    fs.import("/d/b", b"old", MINE, ME).unwrap();
    let old = fs.open("/d/b", OpenOptions::READ, ME).unwrap();
    let r = fs.rename("/d/a", "/d/b", ME).unwrap();
    assert!(r.replaced.is_some_and(|g| !g.inode_freed));
    assert_eq!(fs.read(old, 0, 3).unwrap(), b"old");
    assert_eq!(fs.read_file("/d/b", ME).unwrap(), b"new");
    fs.close(old).unwrap();
    fs.mkdir("/d/e", MINE, ME).unwrap();
    let dir = fs.open("/d/e", OpenOptions::READ, ME).unwrap();
    let e = fs.fd_ino(dir).unwrap();
    fs.rmdir("/d/e", ME).unwrap();
    assert!(fs.namespace().inode(e).is_some());
    fs.check_invariants().unwrap();
    fs.close(dir).unwrap();
    assert!(fs.namespace().inode(e).is_none());
    fs.unlink("/d/b", ME).unwrap();
    assert_eq!(fs.free_blocks(), free);
    fs.check_invariants().unwrap();
}

/// What the device stored and read for the file system since `before`.
fn io_since(fs: &HostFs, before: csd_device::IoCounters) -> (u64, u64, u64) {
    let io = fs.device().counters().io;
    (
        io.partial_stores - before.partial_stores,
        io.read_modify_writes - before.read_modify_writes,
        io.flash_page_reads - before.flash_page_reads,
    )
}

#[test]
fn on_pcm_a_namespace_change_stores_only_the_inode_and_entry_bytes_it_changes() {
    use csd_hostfs::fs::OpenOptions;
    let p = Profile::load("pcm-zynq").unwrap();
    let mut nand = fs("cosmos-plus");
    let mut fs = fs("pcm-zynq");
    fs.mkdir("/d", MINE, ME).unwrap();
    let before = fs.device().counters().io;
    let t0 = fs.clock();
    let new = OpenOptions {
        write: true,
        create: Some(MINE),
    };
    fs.open("/d/f", new, ME).unwrap();
    let took = fs.clock().since(t0);
    // The file's inode, its directory's inode and the new entry: stores, none read back.
    let (stores, rmw, reads) = io_since(&fs, before);
    assert!(stores >= 2, "{stores}");
    assert_eq!((rmw, reads), (0, 0));
    // Each store is the few words it changes, not a page's program.
    assert!(took < p.timing.page_program_ns / 4, "{took} ns");
    // A block device is still written whole blocks.
    nand.mkdir("/d", MINE, ME).unwrap();
    let before = nand.device().counters().io;
    nand.open("/d/f", new, ME).unwrap();
    assert_eq!(io_since(&nand, before).0, 0);
}

#[test]
fn a_store_is_on_the_device_when_it_returns_and_keeps_the_page_s_other_bytes() {
    use csd_hostfs::fs::OpenOptions;
    let mut fs = fs("pcm-zynq");
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8 + 1).collect();
    fs.import("/f", &data, MINE, ME).unwrap();
    let fd = fs.open("/f", OpenOptions::WRITE, ME).unwrap();
    // A buffered write first: the store must not be overwritten by its dirty page later.
    fs.write(fd, 4096, b"buffered").unwrap();
    let before = fs.device().counters().io;
    fs.store(fd, 4100, b"STORED").unwrap();
    // Past the end: the file takes a block, and grows.
    fs.store(fd, 12_000, b"tail").unwrap();
    let (stores, rmw, reads) = io_since(&fs, before);
    assert!(stores >= 2, "{stores}");
    assert_eq!((rmw, reads), (0, 0));
    assert_eq!(fs.fd_size(fd).unwrap(), 12_004);
    fs.close(fd).unwrap();
    let mut expect = data.clone();
    expect[4096..4100].copy_from_slice(b"buff");
    expect[4100..4106].copy_from_slice(b"STORED");
    expect.resize(12_000, 0);
    expect.extend_from_slice(b"tail");
    fs.drop_caches();
    assert_eq!(fs.read_file("/f", ME).unwrap(), expect);
}

#[test]
fn a_write_fault_reads_the_blocks_on_the_device_the_page_cache_lacks() {
    use csd_hostfs::fs::OpenOptions;
    let mut fs = fs("cosmos-plus");
    let bs = fs.namespace().layout().block_bytes;
    fs.import("/f", &vec![7u8; 4 * bs as usize], MINE, ME)
        .unwrap();
    fs.sync().unwrap();
    let fd = fs.open_mapped("/f").unwrap();
    fs.write(fd, 0, &vec![1u8; bs as usize]).unwrap();
    fs.truncate("/f", 6 * bs, ME).unwrap();
    let before = fs.device().counters().io;
    // Block 0 is dirty, blocks 1-3 are on the device, blocks 4-5 are a hole.
    fs.fault_in(fd, 0, 6 * bs).unwrap();
    assert_eq!(io_since(&fs, before).2, 3);
    fs.close(fd).unwrap();
    // A mapping holds a file, never a directory.
    assert!(fs.open_mapped("/").is_err());
    let fd = fs.open("/f", OpenOptions::READ, ME).unwrap();
    assert_eq!(fs.read(fd, 0, 4).unwrap(), [1u8; 4]);
    fs.close(fd).unwrap();
    fs.check_invariants().unwrap();
}
