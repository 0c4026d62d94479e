//! The closed loop: every thread issues its ops back to back, each op a sequence of
//! [`Seg`]s. Host segments run on the thread's own core (the testbed has 64); PCIe transfers
//! and the medium go through the device model's link and die clocks; device-core segments
//! go through StorageFS's scheduler over the profile's cores. One segment is taken per event,
//! in time order, so the device sees requests in the order they happen.

use super::ops::Seg;
use csd_device::storagefs::sched::{CoreScheduler, Job, Policy};
use csd_device::{Device, DeviceError, IoPath, LinkDirection, VirtualTime};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What one run measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    pub ops: u64,
    pub elapsed_ns: u64,
    pub latency_sum_ns: u64,
}

struct Thread {
    ops_left: u32,
    segs: Vec<Seg>,
    next: usize,
    op_started: VirtualTime,
    ops_done: u32,
}

/// The shared resources and the event queue: `(time, sequence, thread)`.
struct Sim<'d> {
    device: &'d mut Device,
    sched: CoreScheduler,
    pcie_command_ns: u64,
    events: BinaryHeap<Reverse<(VirtualTime, u64, u32)>>,
    seq: u64,
}

impl Sim<'_> {
    fn wake(&mut self, thread: u32, at: VirtualTime) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, thread)));
    }

    /// Places waiting device-core work and wakes each thread when its work will be done.
    fn dispatch(&mut self, now: VirtualTime) {
        for s in self.sched.dispatch(now) {
            self.wake(s.job.tenant, s.end);
        }
    }

    /// Starts `seg` for `thread` at `now`: when it will end, or `None` when a device core
    /// will say.
    fn start(
        &mut self,
        thread: u32,
        seg: &Seg,
        now: VirtualTime,
    ) -> Result<Option<VirtualTime>, DeviceError> {
        let d = &mut *self.device;
        Ok(Some(match seg {
            Seg::Host(ns) => now.after(*ns),
            Seg::Link { bytes } => {
                d.host_transfer(
                    LinkDirection::ToDevice,
                    now.after(self.pcie_command_ns),
                    *bytes,
                )
                .done
            }
            Seg::Dma { bytes } => d.host_transfer(LinkDirection::ToHost, now, *bytes).done,
            Seg::Read(ranges) => d.read_ranges(IoPath::Internal, now, ranges, None)?.done,
            Seg::Write(ranges) => d.write_ranges(IoPath::Internal, now, ranges, None)?.done,
            Seg::Core(ns) => {
                self.seq += 1;
                let job = Job {
                    id: self.seq,
                    tenant: thread,
                    ino: u64::from(thread),
                    cost_ns: *ns,
                };
                self.sched.submit(job, now);
                self.dispatch(now);
                return Ok(None);
            }
        }))
    }
}

/// Runs `threads` closed loops of `ops` ops each; `plan(thread, k)` gives op `k`'s segments.
pub fn run(
    device: &mut Device,
    cores: usize,
    pcie_command_ns: u64,
    threads: u32,
    ops: u32,
    mut plan: impl FnMut(u32, u32) -> Vec<Seg>,
) -> Result<Measured, DeviceError> {
    let start = device.idle_at();
    let mut sim = Sim {
        device,
        sched: CoreScheduler::new(cores, Policy::Fair),
        pcie_command_ns,
        events: BinaryHeap::new(),
        seq: 0,
    };
    let mut state: Vec<Thread> = (0..threads)
        .map(|t| Thread {
            ops_left: ops,
            segs: plan(t, 0),
            next: 0,
            op_started: start,
            ops_done: 0,
        })
        .collect();
    for t in 0..threads {
        sim.wake(t, start);
    }
    let mut m = Measured::default();
    let mut end = start;
    while let Some(Reverse((now, _, t))) = sim.events.pop() {
        sim.dispatch(now);
        let th = &mut state[t as usize];
        // A thread whose device-core segment just ended frees its inode queue.
        if th.next > 0 && matches!(th.segs[th.next - 1], Seg::Core(_)) {
            sim.sched.complete(u64::from(t));
            sim.dispatch(now);
        }
        if th.next == th.segs.len() {
            m.ops += 1;
            m.latency_sum_ns += now.since(th.op_started);
            end = end.max(now);
            th.ops_done += 1;
            th.ops_left -= 1;
            if th.ops_left == 0 {
                continue;
            }
            th.segs = plan(t, th.ops_done);
            th.next = 0;
            th.op_started = now;
        }
        th.next += 1;
        let seg = th.segs[th.next - 1].clone();
        if let Some(done) = sim.start(t, &seg, now)? {
            sim.wake(t, done);
        }
    }
    m.elapsed_ns = end.since(start);
    Ok(m)
}
