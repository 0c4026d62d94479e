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

fn fs(profile: &str) -> HostFs {
    let p = Profile::load(profile).unwrap();
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
    assert_eq!(extents[0].blocks, 7);
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
