//! The closed loop: every thread issues its ops back to back, each op a sequence of
//! [`Seg`]s. Host segments run on the thread's own core (the testbed has 64); PCIe transfers
//! and the medium go through the device model's link and die clocks; device-core segments
//! go through StorageFS's scheduler over the profile's cores. One segment is taken per event,
//! in time order, so the device sees requests in the order they happen.

use super::ops::Seg;
use csd_device::storagefs::sched::{CoreScheduler, Job, Policy};
use csd_device::{Device, DeviceError, IoPath, VirtualTime};
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
    ops_done: u64,
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
    let mut sched = CoreScheduler::new(cores, Policy::Fair);
    let mut events: BinaryHeap<Reverse<(VirtualTime, u64, u32)>> = BinaryHeap::new();
    let mut seq = 0u64;
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
        events.push(Reverse((start, t as u64, t)));
    }
    seq += threads as u64;
    let mut m = Measured::default();
    let mut end = start;
    while let Some(Reverse((now, _, t))) = events.pop() {
        for s in sched.dispatch(now) {
            seq += 1;
            events.push(Reverse((s.end, seq, s.job.tenant)));
        }
        let th = &mut state[t as usize];
        // A thread whose device-core segment just ended frees its inode queue.
        if th.next > 0 && matches!(th.segs[th.next - 1], Seg::Core(_)) {
            sched.complete(u64::from(t));
            for s in sched.dispatch(now) {
                seq += 1;
                events.push(Reverse((s.end, seq, s.job.tenant)));
            }
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
            th.segs = plan(t, th.ops_done as u32);
            th.next = 0;
            th.op_started = now;
        }
        let seg = th.segs[th.next].clone();
        th.next += 1;
        let done = match seg {
            Seg::Host(ns) => Some(now.after(ns)),
            Seg::Link { bytes } => {
                Some(device.host_transfer(now.after(pcie_command_ns), bytes).done)
            }
            Seg::Dma { bytes } => Some(device.host_transfer(now, bytes).done),
            Seg::Read(ranges) => Some(
                device
                    .read_ranges(IoPath::Internal, now, &ranges, None)?
                    .done,
            ),
            Seg::Write(ranges) => Some(
                device
                    .write_ranges(IoPath::Internal, now, &ranges, None)?
                    .done,
            ),
            Seg::Core(ns) => {
                seq += 1;
                sched.submit(
                    Job {
                        id: seq,
                        tenant: t,
                        ino: u64::from(t),
                        cost_ns: ns,
                    },
                    now,
                );
                for s in sched.dispatch(now) {
                    seq += 1;
                    events.push(Reverse((s.end, seq, s.job.tenant)));
                }
                None
            }
        };
        if let Some(done) = done {
            seq += 1;
            events.push(Reverse((done, seq, t)));
        }
    }
    m.elapsed_ns = end.since(start);
    Ok(m)
}
