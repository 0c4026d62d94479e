//! The windowed replay pipeline (SIFT §3.3.5, §4.3.4): turns a batch's surviving state into
//! I/O. Survivors are sorted by source location, cut into windows of bounded source bytes
//! (64 MiB by default), and inside each window adjacent reads are merged and the writes,
//! sorted by destination, are merged too. Replay semantics do not change — only the number
//! and shape of requests.

use super::coalesce::{Fragment, ReplaySource};
use serde::Serialize;

/// One replay request: `blocks` consecutive blocks at `at` in `area`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Request {
    pub area: Area,
    pub at: u64,
    pub blocks: u64,
}

/// The namespace's three regions (SIFT §2.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Area {
    FileSystem,
    Staging,
    Journal,
}

impl From<ReplaySource> for Area {
    fn from(s: ReplaySource) -> Area {
        match s {
            ReplaySource::Staging => Area::Staging,
            ReplaySource::Journal => Area::Journal,
        }
    }
}

/// One window: its reads (merged, source order) and writes (merged, destination order).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Window {
    pub reads: Vec<Request>,
    pub writes: Vec<Request>,
    pub blocks: u64,
}

/// The replay plan of one batch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReplayPlan {
    pub windows: Vec<Window>,
}

impl ReplayPlan {
    pub fn read_requests(&self) -> u64 {
        self.windows.iter().map(|w| w.reads.len() as u64).sum()
    }

    pub fn write_requests(&self) -> u64 {
        self.windows.iter().map(|w| w.writes.len() as u64).sum()
    }

    pub fn blocks(&self) -> u64 {
        self.windows.iter().map(|w| w.blocks).sum()
    }
}

/// Plans the replay of `survivors` (`(logical start, fragment)`), `window_blocks` source
/// blocks per window. A fragment larger than a window is split.
pub fn plan(
    survivors: impl IntoIterator<Item = (u64, Fragment)>,
    window_blocks: u64,
) -> ReplayPlan {
    let window_blocks = window_blocks.max(1);
    // (source area, source block, destination block, blocks), in source order.
    let mut pieces: Vec<(Area, u64, u64, u64)> = survivors
        .into_iter()
        .map(|(s, f)| (Area::from(f.source), f.src_block, s, f.end - s))
        .collect();
    pieces.sort_unstable();
    let mut plan = ReplayPlan::default();
    let mut window = Window::default();
    let mut writes: Vec<(u64, u64)> = Vec::new();
    let flush = |window: &mut Window, writes: &mut Vec<(u64, u64)>, plan: &mut ReplayPlan| {
        if window.blocks == 0 {
            return;
        }
        writes.sort_unstable();
        for &(at, blocks) in writes.iter() {
            push_merged(&mut window.writes, Area::FileSystem, at, blocks);
        }
        writes.clear();
        plan.windows.push(std::mem::take(window));
    };
    for (area, mut src, mut dst, mut left) in pieces {
        while left > 0 {
            let room = window_blocks - window.blocks;
            let n = left.min(room);
            push_merged(&mut window.reads, area, src, n);
            writes.push((dst, n));
            window.blocks += n;
            src += n;
            dst += n;
            left -= n;
            if window.blocks == window_blocks {
                flush(&mut window, &mut writes, &mut plan);
            }
        }
    }
    flush(&mut window, &mut writes, &mut plan);
    plan
}

fn push_merged(requests: &mut Vec<Request>, area: Area, at: u64, blocks: u64) {
    if let Some(last) = requests.last_mut() {
        if last.area == area && last.at + last.blocks == at {
            last.blocks += blocks;
            return;
        }
    }
    requests.push(Request { area, at, blocks });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_merge_reads_by_source_and_writes_by_destination() {
        // Destination order differs from source order; sources are contiguous.
        let frag = |end, src_block| Fragment {
            end,
            source: ReplaySource::Journal,
            src_block,
        };
        let survivors = vec![
            (100, frag(102, 10)),
            (50, frag(52, 12)),
            (102, frag(104, 14)),
        ];
        let p = plan(survivors.clone(), 1024);
        assert_eq!(p.windows.len(), 1);
        assert_eq!(p.read_requests(), 1, "journal blocks 10..16 are one read");
        assert_eq!(p.write_requests(), 2, "50..52 and 100..104");
        assert_eq!(p.blocks(), 6);
        let small = plan(survivors, 4);
        assert_eq!(small.windows.len(), 2);
        assert!(small.windows.iter().all(|w| w.blocks <= 4));
        assert_eq!(small.blocks(), 6);
    }
}
