//! Crash checking of the split persistence path: seeded workloads (writes, fsyncs,
//! background journaling with in-flight handoffs, checkpoints, ring wrap-around) crashed at
//! every write under a [`CrashModel`], recovered, and compared with an oracle. Each block must
//! hold the newest version that was durable (every acknowledged fsync's data at its latest
//! version), and the operation in flight is all or nothing.
//!
//! The namespace is tiny (three 8-block files, 40- and 48-block rings, 1 KiB blocks) so a few
//! hundred operations wrap the rings and checkpoint many times.

use super::layout::SiftLayout;
use super::service::{Blocks, Config, LogEntry, MemBlocks, OrderFault, Sift};
use crate::crash::{
    judge, last_steps, states, tear, CrashModel, CrashReport, CrashState, Found, Violation,
};
use crate::rng::SimRng;
use std::collections::BTreeMap;
use std::sync::Arc;

pub(crate) const BB: u64 = 1024;

pub(crate) fn ns() -> SiftLayout {
    SiftLayout {
        block_bytes: BB,
        files: 3,
        file_blocks: 8,
        staging_blocks: 40,
        journal_blocks: 48,
    }
}

pub(crate) fn block_with(tag: u64) -> Vec<u8> {
    let mut v = vec![0x5Au8; BB as usize];
    v[..8].copy_from_slice(&tag.to_le_bytes());
    v
}

/// FS block → newest durable version.
pub(crate) type View = crate::crash::Versions;

/// One seeded workload: the write log and the oracle's view after each acknowledged op.
pub(crate) struct Run {
    log: Vec<LogEntry>,
    views: Vec<View>,
    ops: Vec<String>,
    base: MemBlocks,
    pub(crate) checkpoints: u64,
    pub(crate) wraps: u64,
    pub(crate) sync_reclaims: u64,
}

/// Runs `ops` random operations on a fresh namespace under `config`.
// Long: one match arm per random operation of the workload.
pub(crate) fn workload(seed: u64, ops: usize, config: Config, fault: Option<OrderFault>) -> Run {
    let n = ns();
    let mut sift = Sift::format(
        n,
        MemBlocks {
            block_bytes: BB,
            ..Default::default()
        },
        config,
    );
    sift.fault = fault;
    let base = sift.blocks.clone();
    sift.blocks.log = Some(Vec::new());
    let mut rng = SimRng::new(seed);
    let mut next = 1u64;
    let mut view = View::new();
    let mut views = vec![view.clone()];
    let mut names = Vec::with_capacity(ops);
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
        // what is published, then checkpoint it. A wrap can cost up to a transaction's
        // length in gap, hence twice the largest one.
        if (30..75).contains(&roll) && sift.staging_free() < 2 * (3 + n.file_blocks) {
            roll = if sift.pending_checkpoint() > 0 {
                99
            } else if handoff.is_none() {
                80
            } else {
                90
            };
        }
        let name = if roll < 45 {
            let b = rng.below(n.file_blocks);
            let t = next;
            next += 1;
            inode[file as usize] = t;
            sift.write(file, b, &block_with(t), &block_with(t))
                .expect("in range");
            unstaged[file as usize].insert(b, t);
            unjournaled[file as usize].insert(b, t);
            format!("write file {file} block {b} (version {t})")
        } else if roll < 75 {
            sift.fsync(file).expect("the driver keeps room");
            let f = file as usize;
            let mut body = std::mem::take(&mut claimed[f]);
            body.extend(std::mem::take(&mut unstaged[f]));
            for (b, t) in body {
                durable(&mut view, n.data_block(file, b), t);
            }
            durable(&mut view, n.inode_block(file), inode[f]);
            format!("fsync file {file}")
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
            "journal handoff".to_string()
        } else if roll < 93 {
            if sift.journal_finish().is_err() {
                // Journal ring full: checkpoint first (its own op), finish next time.
                sift.checkpoint().expect("checkpoint");
                checkpoints += 1;
                "checkpoint (journal ring full)".to_string()
            } else if let Some(h) = handoff.take() {
                for &(block, t) in &h {
                    durable(&mut view, block, t);
                }
                for c in &mut claimed {
                    c.retain(|b, t| !h.iter().any(|&(_, ht)| ht == *t) || *b == u64::MAX);
                }
                "journal commit".to_string()
            } else {
                "journal commit (nothing claimed)".to_string()
            }
        } else {
            sift.checkpoint().expect("checkpoint");
            checkpoints += 1;
            "checkpoint".to_string()
        };
        let head = sift.staging_head();
        if head < last_head {
            wraps += 1;
        }
        last_head = head;
        sift.blocks
            .log
            .as_mut()
            .expect("logging")
            .push(LogEntry::Ack(name.clone()));
        names.push(name);
        views.push(view.clone());
    }
    Run {
        log: sift.blocks.log.take().expect("logging"),
        views,
        ops: names,
        base,
        checkpoints,
        wraps,
        sync_reclaims: sift.sync_reclaims(),
    }
}

/// The view a recovered image presents.
pub(crate) fn recovered_view(image: MemBlocks, config: Config) -> Result<View, String> {
    let n = ns();
    let sift = Sift::recover(n, image, config).map_err(|e| e.to_string())?;
    let mut view = View::new();
    for f in 0..n.files {
        let blocks = (0..n.file_blocks).map(|b| n.data_block(f, b));
        for block in std::iter::once(n.inode_block(f)).chain(blocks) {
            // The version in its first 8 bytes; the whole block is not needed.
            let t = u64::from_le_bytes(sift.blocks.head(block));
            if t != 0 && t != 0x5A5A_5A5A_5A5A_5A5A {
                view.insert(block, t);
            }
        }
    }
    Ok(view)
}

/// Crashes at every write of `run` under `model`; recovers each crash state.
pub(crate) fn enumerate(run: &Run, seed: u64, config: Config, model: CrashModel) -> Found {
    let mut rng = SimRng::new(seed ^ 0x5eed_c4a5);
    let mut durable = run.base.clone();
    let mut window: Vec<(u64, Arc<[u8]>)> = Vec::new();
    let mut acked = 0;
    let mut found = Found::default();
    let mut check = |durable: &MemBlocks, window: &[(u64, Arc<[u8]>)], acked: usize, at: usize| {
        for state in states(model, window.len(), &mut rng) {
            let image = crash_image(durable, window, &state);
            let before = &run.views[acked];
            let after = run.views.get(acked + 1).unwrap_or(before);
            let problem = judge(recovered_view(image, config), before, after, "block");
            found.record(problem, |problem| Violation {
                seed,
                acked,
                steps: last_steps(&run.ops[..(acked + 1).min(run.ops.len())], 8),
                crash: format!("crash before log entry {at}: {}", state.describe()),
                problem,
            });
        }
    };
    for (at, entry) in run.log.iter().enumerate() {
        match entry {
            LogEntry::Ack(_) => acked += 1,
            LogEntry::Flush => {
                for (b, d) in window.drain(..) {
                    durable.put_stored(b, &d);
                }
            }
            LogEntry::Write { block, data } => {
                check(&durable, &window, acked, at);
                if model == CrashModel::InOrder {
                    durable.put_stored(*block, data);
                } else {
                    window.push((*block, Arc::clone(data)));
                }
            }
        }
    }
    check(&durable, &window, acked, run.log.len());
    found
}

/// The medium after a crash: what was durable, plus the kept writes in flight in order.
fn crash_image(durable: &MemBlocks, window: &[(u64, Arc<[u8]>)], state: &CrashState) -> MemBlocks {
    let mut image = MemBlocks {
        block_bytes: durable.block_bytes,
        blocks: durable.blocks.clone(),
        ..Default::default()
    };
    for (i, (b, d)) in window.iter().enumerate() {
        if !state.keep[i] {
            continue;
        }
        match state.torn {
            Some((t, new_first)) if t == i => {
                let old = image.read(*b);
                let mut new = d.to_vec();
                new.resize(BB as usize, 0);
                image.put(*b, &tear(&old, &new, new_first));
            }
            _ => image.put_stored(*b, d),
        }
    }
    image
}

/// Runs the SIFT crash check: `seeds` workloads of `ops` operations under `config`, every
/// crash state of `model`; `fault` breaks the protocol's order on purpose.
pub fn check(
    config: Config,
    seeds: std::ops::Range<u64>,
    ops: usize,
    model: CrashModel,
    fault: Option<OrderFault>,
) -> CrashReport {
    let mut report = CrashReport {
        mechanism: "sift".into(),
        config: format!("{config:?}").to_lowercase(),
        model,
        seeds: seeds.end.saturating_sub(seeds.start),
        ops_per_seed: ops,
        points: 0,
        violations: 0,
        first_violation: None,
        coverage: Vec::new(),
    };
    let (mut checkpoints, mut wraps, mut sync) = (0, 0, 0);
    for seed in seeds {
        let run = workload(seed, ops, config, fault);
        checkpoints += run.checkpoints;
        wraps += run.wraps;
        sync += run.sync_reclaims;
        let found = enumerate(&run, seed, config, model);
        report.points += found.points;
        report.violations += found.violations;
        if report.first_violation.is_none() {
            report.first_violation = found.first;
        }
    }
    report.coverage = vec![
        ("checkpoints".into(), checkpoints),
        ("staging-ring wraps".into(), wraps),
        ("synchronous reclaims".into(), sync),
    ];
    if let Some(f) = fault {
        report.config = format!("{} with fault {f:?}", report.config);
    }
    report
}
