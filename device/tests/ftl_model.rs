//! The FTL against a plain in-memory reference map, under random write / overwrite / trim /
//! read / pin / unpin sequences long enough to force many GC cycles. After every step: reads
//! return the last written data, L2P and P2L agree, no pinned block has been erased, and the
//! L2P rebuilt from OOB equals the live one.

use csd_device::{
    BlockId, DataMode, Device, DeviceError, FtlPolicy, Geometry, IoPath, Lpn, Profile, VirtualTime,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

const PAGE: usize = 512;

/// A tiny device: 4 dies × 32 blocks × 8 pages, so a few thousand writes cycle GC many times.
fn tiny_profile() -> Profile {
    let mut p = Profile::load("daisyplus-femu").unwrap();
    p.geometry = Geometry {
        channels: 2,
        dies_per_channel: 2,
        planes_per_die: 1,
        blocks_per_plane: 32,
        pages_per_block: 8,
        page_size_bytes: PAGE as u32,
        over_provisioning: 0.2,
    };
    p.ftl = FtlPolicy {
        gc_low_watermark_blocks: 2,
        gc_high_watermark_blocks: 3,
    };
    p.validate().unwrap();
    p
}

fn content(lpn: u64, version: u32) -> Vec<u8> {
    let mut v = vec![0u8; PAGE];
    for (i, b) in v.iter_mut().enumerate() {
        *b = (lpn as u32 ^ version.wrapping_mul(2_654_435_761) ^ i as u32) as u8;
    }
    v[0] = 1; // never an all-zero page, so payload storage is exercised
    v
}

#[derive(Clone, Debug)]
enum Op {
    Write(u64),
    Trim(u64),
    Read(u64),
    Pin(u32),
    Unpin(usize),
}

fn ops(logical: u64, blocks: u32) -> impl Strategy<Value = Vec<Op>> {
    // Writes to a hot quarter and to the whole space, so blocks age unevenly and GC must
    // choose victims rather than take whatever comes.
    let op = prop_oneof![
        12 => (0..logical).prop_map(Op::Write),
        12 => (0..logical / 4).prop_map(Op::Write),
        2 => (0..logical).prop_map(Op::Trim),
        4 => (0..logical).prop_map(Op::Read),
        1 => (0..blocks).prop_map(Op::Pin),
        1 => (0usize..4).prop_map(Op::Unpin),
    ];
    prop::collection::vec(op, 2000..4000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn ftl_matches_reference_map(ops in ops(819, 128)) {
        let profile = tiny_profile();
        let mut dev = Device::new(&profile, DataMode::Payloads).unwrap();
        prop_assert_eq!(dev.logical_pages(), 819);
        let mut reference: BTreeMap<u64, u32> = BTreeMap::new();
        let mut pinned: Vec<(BlockId, u32)> = Vec::new();
        let mut version = 0u32;
        let mut t = VirtualTime::ZERO;
        let mut buf = vec![0u8; PAGE];
        for op in &ops {
            match *op {
                Op::Write(lpn) => {
                    version += 1;
                    let c = dev.write(IoPath::Internal, t, Lpn(lpn), 1, Some(&content(lpn, version)))
                        .expect("a device with free space accepts writes");
                    t = c.done;
                    reference.insert(lpn, version);
                }
                Op::Trim(lpn) => {
                    dev.trim(IoPath::Internal, t, Lpn(lpn), 1).unwrap();
                    reference.remove(&lpn);
                }
                Op::Read(lpn) => {
                    dev.read(IoPath::Internal, t, Lpn(lpn), 1, Some(&mut buf)).unwrap();
                    match reference.get(&lpn) {
                        Some(&v) => prop_assert_eq!(&buf, &content(lpn, v), "lpn {}", lpn),
                        None => prop_assert!(buf.iter().all(|&b| b == 0), "trimmed/unwritten lpn {} reads zeros", lpn),
                    }
                }
                Op::Pin(block) if pinned.len() < 3 => {
                    dev.pin_block(BlockId(block)).unwrap();
                    pinned.push((BlockId(block), dev.ftl().erase_count(BlockId(block))));
                }
                Op::Pin(_) => {}
                Op::Unpin(i) if i < pinned.len() => {
                    let (block, _) = pinned.remove(i);
                    dev.unpin_block(block).unwrap();
                }
                Op::Unpin(_) => {}
            }
            if let Err(e) = dev.check_invariants() {
                prop_assert!(false, "invariant broken after {:?}: {}", op, e);
            }
            for &(block, erases) in &pinned {
                prop_assert_eq!(dev.ftl().erase_count(block), erases, "pinned {} was erased", block);
            }
            let rebuilt = dev.ftl().rebuild_l2p();
            prop_assert!(rebuilt.iter().eq(dev.ftl().l2p().iter()), "L2P rebuilt from OOB differs after {:?}", op);
        }
        // Every LPN reads back as the reference says, at the end too.
        for lpn in 0..dev.logical_pages() {
            dev.read(IoPath::Internal, t, Lpn(lpn), 1, Some(&mut buf)).unwrap();
            match reference.get(&lpn) {
                Some(&v) => prop_assert_eq!(&buf, &content(lpn, v)),
                None => prop_assert!(buf.iter().all(|&b| b == 0)),
            }
        }
        let c = dev.counters();
        prop_assert!(c.ftl.gc_victims >= 20, "GC cycled only {} times", c.ftl.gc_victims);
        prop_assert!(c.waf > 1.0);
    }
}

#[test]
fn pinned_blocks_fill_the_device_and_the_error_says_so() {
    let profile = tiny_profile();
    let mut dev = Device::new(&profile, DataMode::Payloads).unwrap();
    let geo = dev.geometry().clone();
    let mut t = VirtualTime::ZERO;
    let mut failure = None;
    // Overwrite a small hot set forever while pinning every block as soon as it holds data:
    // GC may never erase anything, so space runs out although little is live.
    'outer: for round in 0..10_000u32 {
        for lpn in 0..16u64 {
            match dev.write(IoPath::Internal, t, Lpn(lpn), 1, Some(&content(lpn, round))) {
                Ok(c) => t = c.done,
                Err(e) => {
                    failure = Some((e, round));
                    break 'outer;
                }
            }
            let block = geo.block_of(dev.ftl().lookup(Lpn(lpn)).unwrap().unwrap());
            if !dev.ftl().is_pinned(block) {
                dev.pin_block(block).unwrap();
            }
        }
    }
    let (err, round) = failure.expect("the device must fill up");
    assert!(matches!(err, DeviceError::DeviceFull { .. }), "{err}");
    assert!(err
        .to_string()
        .contains("device full beyond over-provisioning"));
    assert_eq!(
        dev.ftl().counters().blocks_erased,
        0,
        "no pinned block erased"
    );
    // Everything written before the failure is still readable.
    let mut buf = vec![0u8; PAGE];
    dev.read(IoPath::Internal, t, Lpn(0), 1, Some(&mut buf))
        .unwrap();
    assert!(buf == content(0, round) || buf == content(0, round - 1));
    dev.check_invariants().unwrap();
}

#[test]
fn out_of_range_and_misuse_are_errors() {
    let mut dev = Device::new(&tiny_profile(), DataMode::TimingOnly).unwrap();
    let n = dev.logical_pages();
    let t = VirtualTime::ZERO;
    let e = dev.write(IoPath::Host, t, Lpn(n), 1, None).unwrap_err();
    assert_eq!(
        e,
        DeviceError::LpnOutOfRange {
            lpn: n,
            logical_pages: n
        }
    );
    assert!(e.to_string().contains("out of range"), "{e}");
    assert!(dev.read(IoPath::Host, t, Lpn(n - 1), 2, None).is_err());
    assert!(dev.read(IoPath::Host, t, Lpn(u64::MAX), 2, None).is_err());
    let cap = dev.capacity_bytes();
    assert!(matches!(
        dev.write_at(IoPath::Host, t, cap - 10, 11, None),
        Err(DeviceError::ByteRangeOutOfRange { .. })
    ));
    let mut buf = vec![0u8; PAGE];
    assert_eq!(
        dev.read(IoPath::Host, t, Lpn(0), 1, Some(&mut buf)),
        Err(DeviceError::PayloadsNotKept)
    );
    assert!(matches!(
        dev.unpin_block(BlockId(0)),
        Err(DeviceError::NotPinned { block: 0 })
    ));
    assert!(matches!(
        dev.pin_block(BlockId(1 << 20)),
        Err(DeviceError::BlockOutOfRange { .. })
    ));
    // Nothing above changed the device.
    assert_eq!(dev.ftl().l2p().len(), 0);
}

#[test]
fn unaligned_byte_writes_read_modify_write() {
    let mut dev = Device::new(&tiny_profile(), DataMode::Payloads).unwrap();
    let t = VirtualTime::ZERO;
    let base: Vec<u8> = (0..3 * PAGE).map(|i| (i % 251) as u8 + 1).collect();
    dev.write_at(IoPath::Host, t, 0, base.len() as u64, Some(&base))
        .unwrap();
    let patch = vec![0xEE; 700];
    let c = dev
        .write_at(IoPath::Host, t, 300, 700, Some(&patch))
        .unwrap();
    assert_eq!(
        dev.counters().io.read_modify_writes,
        2,
        "head and tail pages are partial"
    );
    assert_eq!(c.nvme_ns + c.dma_ns + c.flash_ns, c.latency_ns());
    let mut expect = base.clone();
    expect[300..1000].copy_from_slice(&patch);
    let mut back = vec![0u8; 1200];
    dev.read_at(IoPath::Host, c.done, 100, 1200, Some(&mut back))
        .unwrap();
    assert_eq!(back, expect[100..1300]);
}

#[test]
fn scattered_ranges_are_one_request() {
    let mut dev = Device::new(&tiny_profile(), DataMode::Payloads).unwrap();
    let t = VirtualTime::ZERO;
    let data: Vec<u8> = (0..1500u32).map(|i| (i % 200) as u8 + 1).collect();
    // Two ranges far apart, one of them unaligned: written and read back as single requests.
    let ranges = [(100u64, 1000u64), (40 * PAGE as u64, 500u64)];
    let w = dev
        .write_ranges(IoPath::Host, t, &ranges, Some(&data))
        .unwrap();
    assert_eq!(dev.counters().io.host_commands, 1, "one NVMe command");
    assert_eq!(w.nvme_ns + w.dma_ns + w.flash_ns, w.latency_ns());
    let mut back = vec![0u8; 1500];
    dev.read_ranges(IoPath::Host, w.done, &ranges, Some(&mut back))
        .unwrap();
    assert_eq!(dev.counters().io.host_commands, 2);
    assert_eq!(back, data);
    // Out of range anywhere in the list: nothing is written.
    let before = dev.ftl().l2p().len();
    let bad = [(0u64, 10u64), (dev.capacity_bytes(), 1u64)];
    assert!(dev
        .write_ranges(IoPath::Host, t, &bad, Some(&[1u8; 11]))
        .is_err());
    assert_eq!(dev.ftl().l2p().len(), before);
}
