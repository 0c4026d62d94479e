//! Crash checking of the split persistence path (see [`super::crash`]): every configuration,
//! in order and with writes reordered and torn between flushes, and the broken orders the
//! checker must catch.

use super::crash::{block_with, check, ns, recovered_view, View, BB};
use super::service::{Blocks, Config, MemBlocks, OrderFault, Sift};
use crate::crash::CrashModel;
use crate::rng::SimRng;
use std::sync::Arc;

const REORDER_TORN: CrashModel = CrashModel::Reorder { torn: true };

#[test]
fn every_crash_point_recovers_every_acknowledged_fsync() {
    for config in [Config::Vanilla, Config::Offload, Config::Coalesce] {
        for model in [CrashModel::InOrder, REORDER_TORN] {
            let r = check(config, 0..30, 150, model, None);
            assert_eq!(
                r.violations, 0,
                "{config:?} {model:?}: {:#?}",
                r.first_violation
            );
            println!(
                "{config:?}, {}: {} crash points, coverage {:?}",
                model.describe(),
                r.points,
                r.coverage
            );
            let count = |k: &str| r.coverage.iter().find(|c| c.0 == k).unwrap().1;
            assert!(
                r.points >= 10_000,
                "{config:?} {model:?}: {} points",
                r.points
            );
            assert!(count("checkpoints") > 50 && count("staging-ring wraps") > 10);
            assert_eq!(
                count("synchronous reclaims"),
                0,
                "the driver's reclaim keeps fsync from reclaiming"
            );
        }
    }
}

#[test]
fn reclaiming_before_replay_is_caught_in_order_and_reordered() {
    for model in [CrashModel::InOrder, REORDER_TORN] {
        let r = check(
            Config::Coalesce,
            0..30,
            150,
            model,
            Some(OrderFault::ReclaimBeforeReplay),
        );
        println!(
            "reclaim before replay, {}: {} violations",
            model.describe(),
            r.violations
        );
        assert!(r.violations > 0, "{model:?}");
        let v = r.first_violation.unwrap();
        assert!(!v.steps.is_empty() && !v.problem.is_empty());
    }
}

#[test]
fn an_fsync_acknowledged_before_its_fence_is_caught_only_when_writes_reorder() {
    // With a power-loss-protected cache the missing flush is harmless; with a volatile one,
    // an acknowledged fsync can vanish. The checker must tell the two apart.
    let fault = Some(OrderFault::AckBeforeFence);
    let in_order = check(Config::Offload, 0..10, 150, CrashModel::InOrder, fault);
    assert_eq!(in_order.violations, 0, "{:#?}", in_order.first_violation);
    let reordered = check(
        Config::Offload,
        0..10,
        150,
        CrashModel::Reorder { torn: false },
        fault,
    );
    println!(
        "ack before fence, reordered: {} violations",
        reordered.violations
    );
    assert!(reordered.violations > 0);
}

/// With no background reclaim at all, fsync reclaims synchronously when the staging ring is
/// full, and everything acknowledged survives a crash at the end.
#[test]
fn a_full_staging_ring_is_reclaimed_synchronously() {
    let n = ns();
    for config in [Config::Vanilla, Config::Offload, Config::Coalesce] {
        let mut sift = Sift::format(
            n,
            MemBlocks {
                block_bytes: BB,
                ..Default::default()
            },
            config,
        );
        let mut rng = SimRng::new(9);
        let mut acked = View::new();
        for t in 1..=400u64 {
            let (f, b) = (rng.below(3) as u32, rng.below(n.file_blocks));
            sift.write(f, b, &block_with(t), &block_with(t)).unwrap();
            sift.fsync(f).unwrap();
            acked.insert(n.data_block(f, b), t);
            acked.insert(n.inode_block(f), t);
        }
        assert!(
            sift.sync_reclaims() > 10,
            "{config:?}: {}",
            sift.sync_reclaims()
        );
        let recovered = recovered_view(sift.blocks.clone(), config).unwrap();
        assert_eq!(recovered, acked, "{config:?}");
    }
}

/// The trait's plain read-then-write definitions, over a [`MemBlocks`]: what its sharing
/// overrides must agree with.
struct Plain(MemBlocks);

impl Blocks for Plain {
    fn block_bytes(&self) -> u64 {
        self.0.block_bytes()
    }
    fn read(&mut self, block: u64) -> Vec<u8> {
        self.0.read(block)
    }
    fn write(&mut self, block: u64, data: &[u8]) {
        self.0.write(block, data)
    }
}

#[test]
fn shared_writes_copies_and_hashes_agree_with_plain_reads_and_writes() {
    let empty = MemBlocks {
        block_bytes: 64,
        log: Some(Vec::new()),
        ..Default::default()
    };
    let (mut shared, mut plain) = (empty.clone(), Plain(empty));
    let bytes: [&[u8]; 4] = [&[7, 0, 3], &[7, 0, 3, 0, 0], &[], &[1; 64]];
    for (block, b) in bytes.into_iter().enumerate() {
        let data: Arc<[u8]> = Arc::from(b);
        shared.write_shared(block as u64, &data);
        plain.write_shared(block as u64, &data);
    }
    // From a written block, a trimmed one, an empty one and one never written.
    for (from, to) in [(0, 10), (1, 11), (2, 12), (40, 13)] {
        shared.copy(from, to);
        plain.copy(from, to);
    }
    assert_eq!(shared.blocks, plain.0.blocks);
    assert_eq!(shared.log, plain.0.log);
    assert_eq!(shared.read(1), [&[7, 0, 3][..], &[0; 61]].concat());
    for block in [0, 1, 2, 3, 10, 13, 40] {
        let (mut a, mut b) = (crc32fast::Hasher::new(), crc32fast::Hasher::new());
        shared.hash(block, &mut a);
        plain.hash(block, &mut b);
        let whole = crc32fast::hash(&shared.read(block));
        assert_eq!(
            (a.finalize(), b.finalize()),
            (whole, whole),
            "block {block}"
        );
    }
}

#[test]
fn a_write_larger_than_a_block_is_refused() {
    let mut sift = Sift::format(
        ns(),
        MemBlocks {
            block_bytes: BB,
            ..Default::default()
        },
        Config::Coalesce,
    );
    let big = vec![1u8; BB as usize + 1];
    let err = sift.write(0, 0, &big, &block_with(1)).unwrap_err();
    assert!(err.to_string().contains("does not fit"), "{err}");
    assert_eq!(sift.unjournaled_blocks(), 0, "nothing was dirtied");
}
