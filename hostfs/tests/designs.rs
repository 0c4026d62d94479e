//! The offload designs over a real (simulated) device: `.ndpmeta` trees built on flash and
//! read back, corrupt indexes refused, permission checks, and the metadata locker.
//!
//! The computation here is a plain byte sum so these tests need no Wasm engine; the `csd`
//! crate's tests run the same designs with the real tasks.

use csd_device::{DataMode, Device, Profile};
use csd_hostfs::fs::{HostFs, OpenOptions};
use csd_hostfs::namespace::InodeKind;
use csd_hostfs::ndp::lightfs::LightFs;
use csd_hostfs::ndp::{
    BytesStamp, Computed, DesignKind, NdpCompute, NdpError, NdpRequest, OffloadDesign,
    StampedResults, NDPMETA_NAME,
};
use csd_hostfs::ndpmeta::{EntryKind, Layout, NdpMeta};
use csd_hostfs::perms::{Cred, Perms};
use proptest::prelude::*;

const ME: Cred = Cred {
    uid: 1000,
    gid: 1000,
};
const OTHER: Cred = Cred {
    uid: 2000,
    gid: 2000,
};
const DIR: Perms = Perms {
    uid: 1000,
    gid: 1000,
    mode: 0o755,
};
const SHARED: Perms = Perms {
    uid: 1000,
    gid: 1000,
    mode: 0o644,
};
const PRIVATE: Perms = Perms {
    uid: 1000,
    gid: 1000,
    mode: 0o600,
};

/// Sums the bytes it is given; 1 µs per KiB.
struct ByteSum;

impl NdpCompute for ByteSum {
    fn compute(&mut self, _path: &str, data: Vec<u8>) -> Result<Computed, String> {
        let sum: u64 = data.iter().map(|&b| u64::from(b)).sum();
        Ok(Computed {
            ret: sum.to_le_bytes().to_vec(),
            compute_ns: data.len() as u64,
        })
    }
}

/// [`ByteSum`] keeping its results by stamp, as the `csd` crate's task memo does, and
/// counting what it summed and what it recalled.
#[derive(Default)]
struct KeepingSum {
    kept: StampedResults,
    summed: usize,
    recalled: usize,
}

impl NdpCompute for KeepingSum {
    fn compute(&mut self, path: &str, data: Vec<u8>) -> Result<Computed, String> {
        self.summed += 1;
        ByteSum.compute(path, data)
    }

    fn recall(&mut self, path: &str, stamp: &BytesStamp) -> Option<Computed> {
        let c = self.kept.get(path, stamp)?;
        self.recalled += 1;
        Some(c)
    }

    fn compute_stamped(
        &mut self,
        path: &str,
        stamp: Option<BytesStamp>,
        data: Vec<u8>,
    ) -> Result<Computed, String> {
        let c = self.compute(path, data)?;
        if let Some(stamp) = stamp {
            self.kept.keep(path, stamp, c.clone());
        }
        Ok(c)
    }
}

fn fs() -> HostFs {
    let p = Profile::load("cosmos-plus").unwrap();
    HostFs::format(Device::new(&p, DataMode::Payloads).unwrap(), DIR).unwrap()
}

fn sum_of(data: &[u8]) -> Vec<u8> {
    data.iter()
        .map(|&b| u64::from(b))
        .sum::<u64>()
        .to_le_bytes()
        .to_vec()
}

/// A directory tree: (path, Some(size) for a file / None for a directory), parents first.
fn tree() -> impl Strategy<Value = Vec<(String, Option<usize>)>> {
    let name = prop_oneof![
        3 => "[a-z0-9]{1,12}",
        1 => "[a-zA-Z0-9_-]{33,200}",
    ];
    prop::collection::vec(
        (name, 0usize..4, prop::option::weighted(0.7, 0usize..40_000)),
        1..30,
    )
    .prop_map(|items| {
        let mut dirs = vec!["/t".to_string()];
        let mut out = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (name, parent, size) in items {
            let parent = dirs[parent % dirs.len()].clone();
            let path = format!("{parent}/{name}");
            if !seen.insert(path.clone()) {
                continue;
            }
            if size.is_none() {
                dirs.push(path.clone());
            }
            out.push((path, size));
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Every directory's `.ndpmeta`, read back from flash, describes exactly what the
    /// namespace holds: names (long ones included), inos, lengths, kinds, extents, and for a
    /// subdirectory the location of its own `.ndpmeta`.
    #[test]
    fn ndpmeta_trees_round_trip_through_flash(items in tree()) {
        let mut fs = fs();
        fs.mkdir("/t", DIR, ME).unwrap();
        for (path, size) in &items {
            match size {
                Some(n) => { fs.import(path, &vec![7u8; *n], SHARED, ME).unwrap(); }
                None => { fs.mkdir(path, DIR, ME).unwrap(); }
            }
        }
        let mut design = LightFs::default();
        design.init(&mut fs, "/t", ME).unwrap();
        prop_assert_eq!(fs.check_invariants(), Ok(()));
        let mut dirs = vec!["/t".to_string()];
        dirs.extend(items.iter().filter(|i| i.1.is_none()).map(|i| i.0.clone()));
        for dir in dirs {
            let bytes = fs.read_file(&format!("{dir}/{NDPMETA_NAME}"), ME).unwrap();
            let meta = NdpMeta::decode(&bytes).unwrap();
            let (r, _) = fs.lookup(&dir, ME).unwrap();
            let ns = fs.namespace();
            let children: Vec<(String, u32, InodeKind)> = ns
                .readdir(r.ino)
                .unwrap()
                .iter()
                .filter(|e| e.name != NDPMETA_NAME)
                .map(|e| (e.name.clone(), e.ino.0, ns.inode(e.ino).unwrap().kind.clone()))
                .collect();
            prop_assert_eq!(meta.entries.len(), children.len());
            for (e, (name, ino, kind)) in meta.entries.iter().zip(children) {
                prop_assert_eq!(&e.name, &name);
                prop_assert_eq!(e.ino, u64::from(ino));
                match kind {
                    InodeKind::File { size_bytes, extents, .. } => {
                        prop_assert_eq!(e.kind, EntryKind::File);
                        prop_assert_eq!(e.length, size_bytes);
                        let Layout::Extents(x) = &e.layout else { panic!("small files fit") };
                        prop_assert_eq!(x.len(), extents.len());
                        for (a, b) in x.iter().zip(&extents) {
                            prop_assert_eq!(u64::from(a.first_block), b.first.0);
                            prop_assert_eq!(u64::from(a.blocks), b.pages);
                        }
                    }
                    InodeKind::Dir { .. } => {
                        prop_assert_eq!(e.kind, EntryKind::Dir);
                        // The entry locates the subdirectory's own index.
                        let sub = format!("{dir}/{name}/{NDPMETA_NAME}");
                        let (sub_extents, _) = fs.fiemap(&sub, ME).unwrap();
                        let Layout::Extents(x) = &e.layout else { panic!("indexes are small") };
                        prop_assert_eq!(
                            x.iter().map(|a| (u64::from(a.first_block), u64::from(a.blocks))).collect::<Vec<_>>(),
                            sub_extents.iter().map(|r| (r.first.0, r.pages)).collect::<Vec<_>>()
                        );
                        prop_assert_eq!(e.length, fs.read_file(&sub, ME).unwrap().len() as u64);
                    }
                    InodeKind::Symlink { .. } => unreachable!("the test makes no links"),
                }
            }
        }
    }
}

fn populated(perms: &[Perms]) -> HostFs {
    let mut fs = fs();
    fs.mkdir("/d", DIR, ME).unwrap();
    for (i, p) in perms.iter().enumerate() {
        fs.import(&format!("/d/f{i}"), &[i as u8; 5000], *p, ME)
            .unwrap();
    }
    fs
}

fn request(who: Cred) -> NdpRequest {
    NdpRequest {
        paths: vec!["/d".into()],
        who,
    }
}

#[test]
fn every_design_computes_the_same_results() {
    let mut expected = None;
    for kind in DesignKind::ALL {
        let mut fs = populated(&[SHARED; 12]);
        let mut d = kind.build();
        d.init(&mut fs, "/d", ME).unwrap();
        let out = d.offload(&mut fs, &request(ME), &mut ByteSum).unwrap();
        let rets: Vec<_> = out
            .files
            .iter()
            .map(|f| (f.path.clone(), f.ret.clone()))
            .collect();
        assert_eq!(rets.len(), 12, "{kind}");
        assert_eq!(rets[3].1, sum_of(&[3u8; 5000]), "{kind}");
        match &expected {
            None => expected = Some(rets),
            Some(e) => assert_eq!(e, &rets, "{kind}"),
        }
        let s = out.summary();
        assert!(
            s.mean_latency_ns > 0.0 && s.pao > 0.0 && s.pao < 1.0,
            "{kind}: {s:?}"
        );
        let total = s.breakdown.total_ns();
        assert!(
            (total - s.mean_latency_ns).abs() < 1.0,
            "{kind}: stages add up"
        );
    }
}

/// A request run again on an unchanged device finds every file's result by the stamp of
/// its read and takes no bytes, and reports exactly what computing them again reports; a
/// write in between makes every file read and computed again.
#[test]
fn a_repeated_request_recalls_its_results_until_the_device_changes() {
    for kind in DesignKind::ALL {
        let mut runs = Vec::new();
        for keep in [false, true] {
            let mut fs = populated(&[SHARED; 12]);
            let mut d = kind.build();
            d.init(&mut fs, "/d", ME).unwrap();
            let mut memo = KeepingSum::default();
            let mut offload = |fs: &mut HostFs, d: &mut Box<dyn OffloadDesign>| {
                let compute: &mut dyn NdpCompute = if keep { &mut memo } else { &mut ByteSum };
                d.offload(fs, &request(ME), compute).unwrap()
            };
            offload(&mut fs, &mut d);
            let again = offload(&mut fs, &mut d);
            let other = OpenOptions::WRITE;
            let fd = d.open(&mut fs, "/d/f3", other, ME).unwrap();
            fs.write(fd, 0, &[200u8; 5000]).unwrap();
            // On flash before the close, so LightFS's locker lets the new version go at once.
            fs.sync().unwrap();
            d.close(&mut fs, fd).unwrap();
            let changed = offload(&mut fs, &mut d);
            if keep {
                assert_eq!((memo.summed, memo.recalled), (24, 12), "{kind}");
            }
            assert_eq!(changed.files[3].ret, sum_of(&[200u8; 5000]), "{kind}");
            runs.push((again, changed));
        }
        for (plain, kept) in [(&runs[0].0, &runs[1].0), (&runs[0].1, &runs[1].1)] {
            let view = |o: &csd_hostfs::ndp::NdpOutcome| {
                o.files
                    .iter()
                    .map(|f| (f.path.clone(), f.ret.clone(), f.stages))
                    .collect::<Vec<_>>()
            };
            assert_eq!(view(plain), view(kept), "{kind}");
        }
    }
}

/// The locker's shadow pages are stamped by physical page: a result kept for a locked
/// file's old version is never served for the new one, nor the other way round.
#[test]
fn recalled_results_follow_the_locker() {
    let (mut fs, mut d, one) = locked_pair();
    let mut memo = KeepingSum::default();
    let mut ret = |d: &mut LightFs, fs: &mut HostFs| {
        // Twice: the second run recalls what the first computed.
        let first = d.offload(fs, &one, &mut memo).unwrap().files[0].ret.clone();
        let second = d.offload(fs, &one, &mut memo).unwrap().files[0].ret.clone();
        assert_eq!(first, second);
        first
    };
    let (old, new) = (sum_of(&[1u8; 5000]), sum_of(&[9u8; 5000]));
    assert_eq!(ret(&mut d, &mut fs), old);
    let fd = d.open(&mut fs, "/d/f1", OpenOptions::WRITE, ME).unwrap();
    fs.write(fd, 0, &[9u8; 5000]).unwrap();
    fs.sync().unwrap();
    // Locked: its shadow pages hold the old version.
    assert_eq!(ret(&mut d, &mut fs), old);
    d.close(&mut fs, fd).unwrap();
    assert_eq!(ret(&mut d, &mut fs), new);
    assert_eq!(memo.recalled, 3, "each second run was a recall");
}

#[test]
fn aggregated_permissions_refuse_a_directory_in_one_check() {
    for kind in DesignKind::ALL {
        let mut fs = populated(&[PRIVATE; 5]);
        let mut d = kind.build();
        d.init(&mut fs, "/d", ME).unwrap();
        let e = d
            .offload(&mut fs, &request(OTHER), &mut ByteSum)
            .unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(e, NdpError::PermissionDenied { uid: 2000, .. }),
            "{kind}: {msg}"
        );
        if kind == DesignKind::LightFs {
            assert!(
                matches!(
                    e,
                    NdpError::PermissionDenied {
                        aggregated: true,
                        ..
                    }
                ),
                "{msg}"
            );
            assert!(msg.contains("aggregated permissions"), "{msg}");
        }
        // The owner may.
        assert!(
            d.offload(&mut fs, &request(ME), &mut ByteSum).is_ok(),
            "{kind}"
        );
    }
}

#[test]
fn mixed_permissions_are_checked_file_by_file() {
    let mut perms = [SHARED; 6];
    perms[4] = PRIVATE;
    let mut fs = populated(&perms);
    let mut d = LightFs::default();
    d.init(&mut fs, "/d", ME).unwrap();
    let e = d
        .offload(&mut fs, &request(OTHER), &mut ByteSum)
        .unwrap_err();
    assert!(
        matches!(&e, NdpError::PermissionDenied { path, aggregated: false, .. } if path == "/d/f4"),
        "{e}"
    );
    // A single readable file of the same directory is fine.
    let one = NdpRequest {
        paths: vec!["/d/f1".into()],
        who: OTHER,
    };
    assert_eq!(
        d.offload(&mut fs, &one, &mut ByteSum).unwrap().files.len(),
        1
    );
}

#[test]
fn a_corrupt_ndpmeta_is_reported_not_trusted() {
    let mut fs = populated(&[SHARED; 3]);
    let mut d = LightFs::default();
    d.init(&mut fs, "/d", ME).unwrap();
    // Flip one byte of the index on flash, behind the file system's back.
    let (extents, _) = fs.fiemap(&format!("/d/{NDPMETA_NAME}"), ME).unwrap();
    let block = extents[0].first;
    let ps = fs.device().page_size() as usize;
    let mut page = vec![0u8; ps];
    let t = fs.clock();
    fs.device_mut()
        .read(csd_device::IoPath::Host, t, block, 1, Some(&mut page))
        .unwrap();
    page[200] ^= 0x40;
    fs.device_mut()
        .write(csd_device::IoPath::Host, t, block, 1, Some(&page))
        .unwrap();
    d.drop_caches(&mut fs);
    let e = d.offload(&mut fs, &request(ME), &mut ByteSum).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, NdpError::Index { .. }), "{msg}");
    assert!(msg.contains("checksum mismatch"), "{msg}");
    // A writer cannot slip past the locker because the index is unreadable.
    let e = d
        .open(&mut fs, "/d/f0", OpenOptions::WRITE, ME)
        .unwrap_err();
    assert!(e.to_string().contains("checksum mismatch"), "{e}");
}

/// Two files under LightFS, and a request for the second.
fn locked_pair() -> (HostFs, LightFs, NdpRequest) {
    let mut fs = populated(&[SHARED; 2]);
    let mut d = LightFs::default();
    d.init(&mut fs, "/d", ME).unwrap();
    let one = NdpRequest {
        paths: vec!["/d/f1".into()],
        who: ME,
    };
    (fs, d, one)
}

#[test]
fn the_locker_serves_the_old_version_until_the_new_one_is_on_flash() {
    let (mut fs, mut d, one) = locked_pair();
    let pinned = |fs: &HostFs| {
        (0..fs.device().geometry().blocks())
            .filter(|&b| fs.device().ftl().is_pinned(csd_device::BlockId(b)))
            .count()
    };
    let old = sum_of(&[1u8; 5000]);
    let new = sum_of(&[9u8; 5000]);
    let fd = d.open(&mut fs, "/d/f1", OpenOptions::WRITE, ME).unwrap();
    fs.write(fd, 0, &[9u8; 5000]).unwrap();
    // The page reaches flash while the file is still open: the locker's shadow pages win,
    // and their flash block may not be erased.
    fs.sync().unwrap();
    assert_eq!(fs.read_file("/d/f1", ME).unwrap(), vec![9u8; 5000]);
    let ret = |d: &mut LightFs, fs: &mut HostFs| {
        d.offload(fs, &one, &mut ByteSum).unwrap().files[0]
            .ret
            .clone()
    };
    assert_eq!(ret(&mut d, &mut fs), old);
    assert_eq!(pinned(&fs), 1);
    // Closing a file whose blocks are all on flash: the host retrieves the layout, the
    // device has seen every block, so the update trigger unlocks at once (§III-C2).
    d.close(&mut fs, fd).unwrap();
    assert_eq!(ret(&mut d, &mut fs), new);
    assert_eq!(pinned(&fs), 0, "unlocking releases the GC-forbid pins");

    // A file closed with pages still dirty stays locked until the periodic updater's sync.
    let fd = d.open(&mut fs, "/d/f1", OpenOptions::WRITE, ME).unwrap();
    fs.write(fd, 0, &[1u8; 5000]).unwrap();
    d.close(&mut fs, fd).unwrap();
    assert_eq!(ret(&mut d, &mut fs), new);
    assert_eq!(pinned(&fs), 1);
    fs.advance_to(fs.clock().after(csd_hostfs::ndp::lightfs::SYNC_INTERVAL_NS));
    d.background(&mut fs).unwrap();
    assert_eq!(ret(&mut d, &mut fs), old);
    assert_eq!(pinned(&fs), 0);
    // And the index on flash says so for a cold restart.
    d.drop_caches(&mut fs);
    assert_eq!(ret(&mut d, &mut fs), old);
}

#[test]
fn files_created_in_an_indexed_directory_join_the_index_at_sync() {
    let mut fs = populated(&[SHARED; 2]);
    let mut d = LightFs::default();
    d.init(&mut fs, "/d", ME).unwrap();
    let how = OpenOptions {
        write: true,
        create: Some(SHARED),
    };
    let fd = d.open(&mut fs, "/d/new", how, ME).unwrap();
    fs.write(fd, 0, &[5u8; 70_000]).unwrap();
    d.close(&mut fs, fd).unwrap();
    assert_eq!(
        d.offload(&mut fs, &request(ME), &mut ByteSum)
            .unwrap()
            .files
            .len(),
        2
    );
    // Named before the update synchronizer ran, the new file is refused as not indexed yet,
    // not as missing: the host has it.
    let named = NdpRequest {
        paths: vec!["/d/new".into()],
        who: ME,
    };
    let e = d.offload(&mut fs, &named, &mut ByteSum).unwrap_err();
    assert!(
        matches!(&e, NdpError::NotYetIndexed { path } if path == "/d/new"),
        "{e}"
    );
    let missing = NdpRequest {
        paths: vec!["/d/absent".into()],
        who: ME,
    };
    let e = d.offload(&mut fs, &missing, &mut ByteSum).unwrap_err();
    assert!(e.to_string().contains("no such file"), "{e}");
    fs.advance_to(fs.clock().after(csd_hostfs::ndp::lightfs::SYNC_INTERVAL_NS));
    d.background(&mut fs).unwrap();
    let out = d.offload(&mut fs, &request(ME), &mut ByteSum).unwrap();
    assert_eq!(out.files.len(), 3);
    assert_eq!(out.files[2].ret, sum_of(&[5u8; 70_000]));
    assert_eq!(
        d.offload(&mut fs, &named, &mut ByteSum)
            .unwrap()
            .files
            .len(),
        1
    );
    let fp = d.footprint().unwrap();
    assert!(fp.host_bytes > 0 && fp.device_bytes > 0);
}

#[test]
fn directories_made_after_init_join_the_index() {
    for mode in [DataMode::Payloads, DataMode::TimingOnly] {
        made_after_init(mode);
    }
}

fn made_after_init(mode: DataMode) {
    let p = Profile::load("cosmos-plus").unwrap();
    let mut fs = HostFs::format(Device::new(&p, mode).unwrap(), DIR).unwrap();
    let payloads = mode == DataMode::Payloads;
    let mut d = LightFs::default();
    d.init(&mut fs, "/", ME).unwrap();
    d.drop_caches(&mut fs);
    fs.mkdir("/data", DIR, ME).unwrap();
    fs.mkdir("/data/deep", DIR, ME).unwrap();
    let how = OpenOptions {
        write: true,
        create: Some(SHARED),
    };
    for name in ["/data/a", "/data/deep/b"] {
        let fd = d.open(&mut fs, name, how, ME).unwrap();
        fs.write(fd, 0, &[4u8; 3000]).unwrap();
        fs.fsync(fd).unwrap();
        // Closing a file with nothing left to write back updates the index at once.
        d.close(&mut fs, fd).unwrap();
    }
    for (path, files) in [("/data", 1), ("/data/deep", 1), ("/data/deep/b", 1)] {
        let req = NdpRequest {
            paths: vec![path.into()],
            who: ME,
        };
        let out = d.offload(&mut fs, &req, &mut ByteSum).unwrap();
        assert_eq!(out.files.len(), files, "{path}");
        if payloads {
            assert_eq!(out.files[0].ret, sum_of(&[4u8; 3000]));
        }
    }
}

/// The host baseline reads every file through the page cache and computes on the host: the
/// same results as the offload designs, its reads on the host path, no layout retrieval.
#[test]
fn the_host_baseline_reads_and_computes_on_the_host() {
    struct HostSum;
    impl NdpCompute for HostSum {
        fn compute(&mut self, _: &str, _: Vec<u8>) -> Result<Computed, String> {
            Err("the host baseline never offloads".into())
        }
        fn compute_on_host(&mut self, path: &str, data: Vec<u8>) -> Result<Computed, String> {
            ByteSum.compute(path, data)
        }
    }
    let mut fs = fs();
    fs.mkdir("/h", DIR, ME).unwrap();
    let files: Vec<(String, Vec<u8>)> = (0..5u8)
        .map(|i| (format!("/h/f{i}"), vec![i; 5000 + usize::from(i) * 7000]))
        .collect();
    for (p, d) in &files {
        fs.import(p, d, SHARED, ME).unwrap();
    }
    let before = fs.device().counters().io;
    let mut design = DesignKind::HostOnly.build();
    assert_eq!(design.kind().to_string(), "host");
    let req = NdpRequest {
        paths: vec!["/h".into()],
        who: ME,
    };
    let out = design.offload(&mut fs, &req, &mut HostSum).unwrap();
    assert_eq!(out.files.len(), files.len());
    for f in &out.files {
        let (_, data) = files.iter().find(|(p, _)| *p == f.path).unwrap();
        assert_eq!(f.ret, sum_of(data), "{}", f.path);
        assert_eq!(f.stages.retrieve_layout_ns, 0.0);
        assert_eq!(f.stages.compute_ns, data.len() as f64);
        assert!(f.stages.read_file_ns > 0.0, "{}: read from flash", f.path);
    }
    let after = fs.device().counters().io;
    assert!(
        after.host_bytes_read > before.host_bytes_read,
        "the data crossed to the host"
    );
    assert_eq!(after.internal_bytes_read, before.internal_bytes_read);
    // A computation without a host model is refused, naming the file.
    let mut fs2 = fs;
    let e = DesignKind::HostOnly
        .build()
        .offload(&mut fs2, &req, &mut ByteSum)
        .unwrap_err();
    assert!(e.to_string().contains("no host CPU model"), "{e}");
}

/// LightFS on a cold start: LightFS-Host loads every index when it starts (§III-C), and
/// LightFS-CSD reads a request's missing indexes level by level, the directories of one
/// depth together. So a request over files in eight sibling directories waits for eight
/// overlapping index reads (sharing the flash channels), not eight in a row.
#[test]
fn a_cold_request_reads_the_indexes_of_one_level_together() {
    let retrieval = |dirs: usize| -> f64 {
        let mut fs = fs();
        fs.mkdir("/t", DIR, ME).unwrap();
        for i in 0..8 {
            fs.mkdir(&format!("/t/s{i}"), DIR, ME).unwrap();
            fs.import(&format!("/t/s{i}/f"), &[i as u8; 3000], SHARED, ME)
                .unwrap();
        }
        let mut d = LightFs::default();
        d.init(&mut fs, "/t", ME).unwrap();
        d.drop_caches(&mut fs);
        let req = NdpRequest {
            paths: (0..dirs).map(|i| format!("/t/s{i}/f")).collect(),
            who: ME,
        };
        let out = d.offload(&mut fs, &req, &mut ByteSum).unwrap();
        assert_eq!(out.files.len(), dirs);
        for (i, f) in out.files.iter().enumerate() {
            assert_eq!(f.ret, sum_of(&[i as u8; 3000]), "{}", f.path);
        }
        // Each file carries an even share of the request's layout retrieval.
        out.files.iter().map(|f| f.stages.retrieve_layout_ns).sum()
    };
    let (one, eight) = (retrieval(1), retrieval(8));
    assert!(one > 0.0, "the cold device reads the subdirectory's index");
    // One after another they would take eight times as long as one.
    assert!(
        eight < 4.0 * one,
        "eight sibling indexes cost {eight} ns against {one} ns for one"
    );
}

/// Renames and unlinks only mark LightFS's caches stale; the next request rebuilds them
/// once. It must then see what every other design sees: the surviving files under their
/// new names, with their data.
#[test]
fn a_storm_of_renames_and_unlinks_leaves_the_index_as_the_namespace() {
    let storm = |d: &mut dyn OffloadDesign, fs: &mut HostFs| {
        for i in 0..6 {
            d.rename(fs, &format!("/d/f{i}"), &format!("/d/g{i}"), ME)
                .unwrap();
            if i % 2 == 0 {
                d.unlink(fs, &format!("/d/g{i}"), ME).unwrap();
            }
        }
        d.unlink(fs, "/d/f11", ME).unwrap();
        // Over a name the storm left: the replaced file is gone.
        d.rename(fs, "/d/f10", "/d/g1", ME).unwrap();
    };
    let mut seen = Vec::new();
    for kind in [DesignKind::LightFs, DesignKind::FragS] {
        let mut fs = populated(&[SHARED; 12]);
        let mut d = kind.build();
        d.init(&mut fs, "/d", ME).unwrap();
        // Both caches hold the directory before the storm.
        d.offload(&mut fs, &request(ME), &mut ByteSum).unwrap();
        storm(d.as_mut(), &mut fs);
        let out = d.offload(&mut fs, &request(ME), &mut ByteSum).unwrap();
        let mut rets: Vec<_> = out
            .files
            .iter()
            .map(|f| (f.path.clone(), f.ret.clone()))
            .collect();
        rets.sort();
        let named = NdpRequest {
            paths: vec!["/d/g3".into()],
            who: ME,
        };
        let one = d.offload(&mut fs, &named, &mut ByteSum).unwrap();
        assert_eq!(one.files[0].ret, sum_of(&[3u8; 5000]), "{kind}");
        let gone = NdpRequest {
            paths: vec!["/d/g0".into()],
            who: ME,
        };
        assert!(d.offload(&mut fs, &gone, &mut ByteSum).is_err(), "{kind}");
        seen.push(rets);
    }
    let names: Vec<&str> = seen[0].iter().map(|r| r.0.as_str()).collect();
    assert_eq!(
        names,
        ["/d/f6", "/d/f7", "/d/f8", "/d/f9", "/d/g1", "/d/g3", "/d/g5"]
    );
    let g1 = &seen[0][4];
    assert_eq!(g1.1, sum_of(&[10u8; 5000]), "f10 replaced g1");
    assert_eq!(seen[0], seen[1], "LightFS and frag-s see the same files");
}
