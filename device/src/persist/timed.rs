//! The persistence path in virtual time: chains of dependent steps, and a checkpoint's replay
//! spread over an executor's workers.
//!
//! Every step submits its I/O at its own start time and the next step starts when it ends.
//! A driver that always advances the chain with the earliest clock therefore submits I/O in
//! time order, which the device's busy clocks need to share dies and links fairly.
//!
//! CPU accounting follows SIFT's prototype, which polls an SPDK queue: a thread waiting on
//! its own I/O keeps its core busy, so every step's whole duration is charged to the side
//! (host or device) whose thread runs it. Only a thread parked on a condition (an fsync
//! waiting for reclaim credits) costs nothing.

use super::cost::{Executor, PersistCosts, Placement};
use super::service::{CheckpointIo, Replay, SiftError};
use crate::device::{DataMode, Device, IoPath};
use crate::{DeviceError, LinkDirection, Profile, VirtualTime};
use std::collections::VecDeque;

/// Why a timed run of the persistence path failed.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("profile '{0}' has no [persist] table: the persistence path's CPU costs are unknown")]
    NoCosts(String),
    #[error("persistence path: {0}")]
    Sift(#[from] SiftError),
    #[error("device: {0}")]
    Device(#[from] DeviceError),
    #[error("the model stalled at {0} ns with every thread waiting (a bug in the trigger policy)")]
    Stalled(u64),
}

impl PersistError {
    /// The profile's `[persist]` costs, or the error naming the profile that lacks them.
    pub fn costs(profile: &Profile) -> Result<PersistCosts, PersistError> {
        profile
            .persist
            .clone()
            .ok_or_else(|| PersistError::NoCosts(profile.name.clone()))
    }
}

/// What one step does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// CPU work for this many nanoseconds.
    Cpu(u64),
    /// A PCIe transfer that is not block I/O (a snapshot buffer shipped to the device).
    Transfer(u64),
    /// Block requests `(first block, blocks)`, all submitted together; the step ends with
    /// the last completion.
    Read(IoPath, Vec<(u64, u64)>),
    Write(IoPath, Vec<(u64, u64)>),
}

/// One step and the side whose thread runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub by: Placement,
    pub op: Op,
}

/// Busy time charged to the host and the device inside a measurement window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuUse {
    pub from: VirtualTime,
    pub to: VirtualTime,
    pub host_ns: u64,
    pub device_ns: u64,
}

impl CpuUse {
    /// Charges `[start, end)`, clipped to the window, to `by`.
    pub fn charge(&mut self, by: Placement, start: VirtualTime, end: VirtualTime) {
        let (s, e) = (start.0.max(self.from.0), end.0.min(self.to.0));
        if e > s {
            match by {
                Placement::Host => self.host_ns += e - s,
                Placement::Device => self.device_ns += e - s,
            }
        }
    }
}

/// Steps run one after another.
#[derive(Clone, Debug, Default)]
pub struct Chain {
    steps: VecDeque<Step>,
    pub clock: VirtualTime,
}

impl Chain {
    pub fn new(at: VirtualTime, steps: impl IntoIterator<Item = Step>) -> Chain {
        Chain {
            steps: steps.into_iter().collect(),
            clock: at,
        }
    }

    pub fn is_done(&self) -> bool {
        self.steps.is_empty()
    }

    /// Runs the next step at the chain's clock.
    pub fn step(
        &mut self,
        dev: &mut Device,
        block_bytes: u64,
        cpu: &mut CpuUse,
    ) -> Result<(), DeviceError> {
        let Some(step) = self.steps.pop_front() else {
            return Ok(());
        };
        let at = self.clock;
        let end = match &step.op {
            Op::Cpu(ns) => at.after(*ns),
            Op::Transfer(bytes) => dev.host_transfer(LinkDirection::ToDevice, at, *bytes).done,
            Op::Read(path, reqs) | Op::Write(path, reqs) => {
                let write = matches!(step.op, Op::Write(..));
                let mut end = at;
                for &(block, n) in reqs {
                    let range = [(block * block_bytes, n * block_bytes)];
                    let c = if write {
                        dev.write_ranges(*path, at, &range, None)?
                    } else {
                        dev.read_ranges(*path, at, &range, None)?
                    };
                    end = end.max(c.done);
                }
                end
            }
        };
        cpu.charge(step.by, at, end);
        self.clock = end;
        Ok(())
    }
}

/// The phases of a checkpoint, separated by barriers: validate the referenced staged
/// transactions (wait-not-skip), build the range tree (coalesce only), replay, then the
/// superblock write that reclaims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Validate(usize),
    /// `true` once the build unit is handed out.
    Build(bool),
    Replay(usize),
    Superblock(bool),
    Finished,
}

/// One checkpoint replaying on an executor's workers in virtual time.
#[derive(Debug)]
pub struct CheckpointJob {
    io: CheckpointIo,
    exec: Executor,
    block_bytes: u64,
    build_ns: u64,
    phase: Phase,
    workers: Vec<Option<Chain>>,
    /// When the current phase's last unit ended so far.
    phase_end: VirtualTime,
    pub done_at: Option<VirtualTime>,
}

impl CheckpointJob {
    /// A checkpoint starting at `at`; `build_ns` is the coalescing engine's CPU time to build
    /// the range tree over the batch (used only for a coalesced replay).
    pub fn new(
        io: CheckpointIo,
        exec: Executor,
        block_bytes: u64,
        build_ns: u64,
        at: VirtualTime,
    ) -> CheckpointJob {
        let mut job = CheckpointJob {
            io,
            exec,
            block_bytes,
            build_ns,
            phase: Phase::Validate(0),
            workers: vec![None; exec.workers.max(1) as usize],
            phase_end: at,
            done_at: None,
        };
        job.fill(at);
        job
    }

    /// The earliest worker clock: when the job next submits something.
    pub fn next_time(&self) -> Option<VirtualTime> {
        self.workers.iter().flatten().map(|c| c.clock).min()
    }

    pub fn step(&mut self, dev: &mut Device, cpu: &mut CpuUse) -> Result<(), DeviceError> {
        let Some(w) = (0..self.workers.len())
            .filter(|&i| self.workers[i].is_some())
            .min_by_key(|&i| self.workers[i].as_ref().map(|c| c.clock))
        else {
            return Ok(());
        };
        let chain = self.workers[w].as_mut().expect("picked a running worker");
        chain.step(dev, self.block_bytes, cpu)?;
        if chain.is_done() {
            let at = chain.clock;
            self.phase_end = self.phase_end.max(at);
            self.workers[w] = self.next_unit().map(|steps| Chain::new(at, steps));
            if self.workers.iter().all(Option::is_none) {
                self.advance();
                let at = self.phase_end;
                self.fill(at);
            }
        }
        Ok(())
    }

    /// Gives every idle worker a unit of the current phase, moving on to the next phase
    /// while this one has none.
    fn fill(&mut self, at: VirtualTime) {
        loop {
            for w in 0..self.workers.len() {
                if self.workers[w].is_none() {
                    self.workers[w] = self.next_unit().map(|s| Chain::new(at, s));
                }
            }
            if self.workers.iter().any(Option::is_some) || self.phase == Phase::Finished {
                break;
            }
            self.advance();
        }
        if self.phase == Phase::Finished && self.workers.iter().all(Option::is_none) {
            self.done_at = Some(self.phase_end);
        }
    }

    fn advance(&mut self) {
        self.phase = match self.phase {
            Phase::Validate(_) => match self.io.replay {
                Replay::Windows(_) => Phase::Build(false),
                Replay::Raw(_) => Phase::Replay(0),
            },
            Phase::Build(_) => Phase::Replay(0),
            Phase::Replay(_) => Phase::Superblock(false),
            Phase::Superblock(_) | Phase::Finished => Phase::Finished,
        };
    }

    /// The next unit of work of the current phase, as steps, or `None` at its end.
    fn next_unit(&mut self) -> Option<Vec<Step>> {
        let e = self.exec;
        let by = e.placement;
        let path = e.path();
        let bb = self.block_bytes;
        let step = |op| Step { by, op };
        match &mut self.phase {
            Phase::Validate(i) => {
                let &(block, n) = self.io.validate.get(*i)?;
                *i += 1;
                Some(vec![
                    step(Op::Cpu(e.io_ns + e.copy_ns(n * bb))),
                    step(Op::Read(path, vec![(block, n)])),
                ])
            }
            Phase::Build(handed) => {
                if std::mem::replace(handed, true) {
                    return None;
                }
                Some(vec![step(Op::Cpu(self.build_ns))])
            }
            Phase::Replay(i) => match &self.io.replay {
                Replay::Raw(records) => {
                    let &(src, dst) = records.get(*i)?;
                    *i += 1;
                    Some(vec![
                        step(Op::Cpu(e.record_ns + e.copy_ns(bb) + 2 * e.io_ns)),
                        step(Op::Read(path, vec![(src, 1)])),
                        step(Op::Write(path, vec![(dst, 1)])),
                    ])
                }
                Replay::Windows(units) => {
                    let u = units.get(*i)?;
                    *i += 1;
                    let blocks: u64 = u.writes.iter().map(|w| w.1).sum();
                    let requests = (u.reads.len() + u.writes.len()) as u64;
                    Some(vec![
                        step(Op::Cpu(e.copy_ns(blocks * bb) + requests * e.io_ns)),
                        step(Op::Read(path, u.reads.clone())),
                        step(Op::Write(path, u.writes.clone())),
                    ])
                }
            },
            Phase::Superblock(handed) => {
                if std::mem::replace(handed, true) {
                    return None;
                }
                Some(vec![
                    step(Op::Cpu(e.io_ns)),
                    step(Op::Write(path, vec![(self.io.superblock, 1)])),
                ])
            }
            Phase::Finished => None,
        }
    }

    /// Runs the job to its end without other traffic; returns when it finished.
    pub fn run(mut self, dev: &mut Device, cpu: &mut CpuUse) -> Result<VirtualTime, DeviceError> {
        while self.done_at.is_none() {
            self.step(dev, cpu)?;
        }
        Ok(self.done_at.expect("loop ends when done"))
    }
}

/// A device with `profile`'s channels, dies, timing and write cache whose logical space
/// holds `bytes` twice over: the namespace fits with room to spare, as on the paper's
/// 3.2 TB drive, while the model stays small. Blocks shrink to 256 mapping units so even a
/// small device keeps enough blocks per die for GC.
pub fn device_for(profile: &Profile, bytes: u64) -> Result<Device, DeviceError> {
    let mut p = profile.clone();
    let g = &mut p.geometry;
    g.pages_per_block = g.pages_per_block.min(256);
    let unit = u64::from(g.dies())
        * u64::from(g.planes_per_die)
        * u64::from(g.pages_per_block)
        * u64::from(g.page_size_bytes);
    let logical_per_unit = ((unit as f64) * (1.0 - g.over_provisioning)).max(1.0);
    let units = ((2 * bytes) as f64 / logical_per_unit).ceil() as u64 + 1;
    g.blocks_per_plane = u32::try_from(units.max(64)).unwrap_or(u32::MAX);
    Device::new(&p, DataMode::TimingOnly)
}
