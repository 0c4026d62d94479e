//! Crash-point enumeration of the split persistence path: seeded workloads (writes, fsyncs,
//! background journaling with in-flight handoffs, checkpoints, ring wrap-around) crashed
//! before every block write, recovered, and compared with an oracle: each block must hold the
//! newest version that was durable (every acknowledged fsync's data at its latest version), and
//! an operation in flight is all or nothing.

use super::layout::Namespace;
use super::service::{Blocks, Config, MemBlocks, Sift};
use crate::rng::SimRng;
use std::collections::BTreeMap;

const BB: u64 = 1024;
const MARK: u64 = u64::MAX;

fn ns() -> Namespace {
    Namespace {
        block_bytes: BB,
        files: 3,
        file_blocks: 8,
        staging_blocks: 40,
        journal_blocks: 48,
    }
}

fn block_with(tag: u64) -> Vec<u8> {
    let mut v = vec![0x5Au8; BB as usize];
    v[..8].copy_from_slice(&tag.to_le_bytes());
    v
}

fn tag(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().unwrap())
}

/// FS block → newest durable version.
type View = BTreeMap<u64, u64>;

struct Run {
    log: Vec<(u64, Vec<u8>)>,
    views: Vec<View>,
    base: MemBlocks,
    checkpoints: u64,
    wraps: u64,
}

fn workload(seed: u64, ops: usize, config: Config, broken: bool) -> Run {
    let n = ns();
    let mut sift = Sift::format(
        n,
        MemBlocks {
            block_bytes: BB,
            ..Default::default()
        },
        config,
    );
    sift.broken_reclaim_order = broken;
    let base = sift.blocks.clone();
    sift.blocks.log = Some(Vec::new());
    let mut rng = SimRng::new(seed);
    let mut next = 1u64;
    let mut view = View::new();
    let mut views = vec![view.clone()];
    // What each file's dirty / claimed blocks and inode hold, as the oracle sees them.
    let mut unstaged: Vec<BTreeMap<u64, u64>> = vec![BTreeMap::new(); 3];
    let mut unjournaled: Vec<BTreeMap<u64, u64>> = vec![BTreeMap::new(); 3];
    let mut inode = [0u64; 3];
    let mut handoff: Option<Vec<(u64, u64)>> = None;
    let mut claimed: Vec<BTreeMap<u64, u64>> = vec![BTreeMap::new(); 3];
    let (mut checkpoints, mut wraps) = (0, 0);
    let mut last_head = 0;
    let durable = |view: &mut View, block: u64, tag: u64| {
        if tag == 0 {
            return;
        }
        let e = view.entry(block).or_insert(0);
        *e = (*e).max(tag);
    };
    for _ in 0..ops {
        let mut roll = rng.below(100);
        let file = rng.below(3) as u32;
        // Low-watermark reclaim, driven here so that fsync never reclaims inline: journal
        // what is published, then checkpoint it.
        // A wrap can cost up to a transaction's length in gap, hence twice the largest one.
        if (30..75).contains(&roll) && sift.staging_free() < 2 * (3 + n.file_blocks) {
            roll = if sift.pending_checkpoint() > 0 {
                99
            } else if handoff.is_none() {
                80
            } else {
                90
            };
        }
        if roll < 45 {
            let b = rng.below(n.file_blocks);
            let t = next;
            next += 1;
            inode[file as usize] = t;
            sift.write(file, b, &block_with(t), &block_with(t)).unwrap();
            unstaged[file as usize].insert(b, t);
            unjournaled[file as usize].insert(b, t);
        } else if roll < 75 {
            sift.fsync(file).unwrap();
            let f = file as usize;
            let mut body = std::mem::take(&mut claimed[f]);
            body.extend(std::mem::take(&mut unstaged[f]));
            for (b, t) in body {
                durable(&mut view, n.data_block(file, b), t);
            }
            durable(&mut view, n.inode_block(file), inode[f]);
        } else if roll < 85 && handoff.is_none() {
            sift.journal_begin();
            let mut h = Vec::new();
            for f in 0..3 {
                if !unjournaled[f].is_empty() {
                    h.push((n.inode_block(f as u32), inode[f]));
                }
                for (b, t) in std::mem::take(&mut unjournaled[f]) {
                    h.push((n.data_block(f as u32, b), t));
                    claimed[f].insert(b, t);
                }
            }
            handoff = Some(h);
        } else if roll < 93 {
            if sift.journal_finish().is_err() {
                // Journal ring full: checkpoint first (its own op), finish next time.
                sift.checkpoint().unwrap();
                checkpoints += 1;
            } else if let Some(h) = handoff.take() {
                for &(block, t) in &h {
                    durable(&mut view, block, t);
                }
                for c in &mut claimed {
                    c.retain(|b, t| !h.iter().any(|&(_, ht)| ht == *t) || *b == u64::MAX);
                }
            }
        } else {
            sift.checkpoint().unwrap();
            checkpoints += 1;
        }
        let head = sift.staging_head();
        if head < last_head {
            wraps += 1;
        }
        last_head = head;
        sift.blocks.log.as_mut().unwrap().push((MARK, Vec::new()));
        views.push(view.clone());
    }
    assert_eq!(
        sift.sync_reclaims(),
        0,
        "the driver's reclaim keeps fsync from reclaiming"
    );
    Run {
        log: sift.blocks.log.take().unwrap(),
        views,
        base,
        checkpoints,
        wraps,
    }
}

fn recovered_view(image: &MemBlocks) -> Result<View, String> {
    let n = ns();
    let mut sift = Sift::recover(n, image.clone(), Config::Coalesce).map_err(|e| e.to_string())?;
    let mut view = View::new();
    for f in 0..n.files {
        let blocks = (0..n.file_blocks).map(|b| n.data_block(f, b));
        for block in std::iter::once(n.inode_block(f)).chain(blocks) {
            let t = tag(&sift.blocks.read(block));
            if t != 0 && t != 0x5A5A_5A5A_5A5A_5A5A {
                view.insert(block, t);
            }
        }
    }
    Ok(view)
}

/// Crashes before every block write; returns (crash points, violations).
fn enumerate(run: &Run) -> (u64, Vec<String>) {
    let mut image = run.base.clone();
    let mut acked = 0;
    let mut points = 0;
    let mut violations = Vec::new();
    let mut check = |image: &MemBlocks, acked: usize| {
        let before = &run.views[acked];
        let after = run.views.get(acked + 1).unwrap_or(before);
        match recovered_view(image) {
            Ok(v) if v == *before || v == *after => {}
            Ok(v) => {
                let diff: Vec<String> = before
                    .keys()
                    .chain(after.keys())
                    .chain(v.keys())
                    .filter(|k| v.get(k) != before.get(k) && v.get(k) != after.get(k))
                    .map(|k| {
                        format!(
                            "block {k}: {:?} (before {:?}, after {:?})",
                            v.get(k),
                            before.get(k),
                            after.get(k)
                        )
                    })
                    .collect();
                violations.push(format!("after {acked} ops: {}", diff.join("; ")));
            }
            Err(e) => violations.push(format!("after {acked} ops: {e}")),
        }
    };
    for (block, data) in &run.log {
        if *block == MARK {
            acked += 1;
            continue;
        }
        check(&image, acked);
        points += 1;
        image.blocks.insert(*block, data.clone());
    }
    check(&image, acked);
    (points + 1, violations)
}

#[test]
fn every_crash_point_recovers_every_acknowledged_fsync() {
    for config in [Config::Coalesce, Config::Offload] {
        let (mut points, mut checkpoints, mut wraps) = (0, 0, 0);
        for seed in 0..30 {
            let run = workload(seed, 150, config, false);
            let (p, violations) = enumerate(&run);
            assert!(
                violations.is_empty(),
                "{config:?} seed {seed}: {}",
                violations[0]
            );
            points += p;
            checkpoints += run.checkpoints;
            wraps += run.wraps;
        }
        println!("{config:?}: {points} crash points explored, {checkpoints} checkpoints, {wraps} staging-ring wraps");
        assert!(points > 5_000 && checkpoints > 50 && wraps > 10);
    }
}

#[test]
fn reclaiming_before_replay_is_caught() {
    let mut caught = 0;
    for seed in 0..30 {
        caught += enumerate(&workload(seed, 150, Config::Coalesce, true))
            .1
            .len();
    }
    println!("violations with the tail advanced before the replay: {caught}");
    assert!(caught > 0);
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
        let recovered = recovered_view(&sift.blocks).unwrap();
        assert_eq!(recovered, acked, "{config:?}");
    }
}
