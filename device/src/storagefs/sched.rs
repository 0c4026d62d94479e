//! Device-CPU scheduling across tenants and inode queues (FusionFS §1, "managing in-storage
//! resources ... across tenants").
//!
//! Each inode has its own request queue and serves one op at a time, in order. Across
//! tenants, [`Policy::Fair`] is start-time fair queueing (SFQ, Goyal et al., SIGCOMM'96):
//! each op gets a start tag `max(V, F_tenant)` and a finish tag `start + cost / weight` when
//! it arrives, and a free core takes the dispatchable op with the smallest start tag. Like
//! deficit round robin it bounds how far a tenant can fall behind its weighted share by one
//! op per tenant, but it needs no quantum and no loop over rounds. [`Policy::Fifo`] serves
//! in arrival order, which lets a tenant that floods heavy ops starve one that sends light
//! ones.
//!
//! Time is the caller's: it submits ops at virtual times and asks for dispatches at each
//! event, so a closed-loop driver and an open-loop test use the same scheduler.

use crate::addr::VirtualTime;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// How free cores pick the next op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Fifo,
    Fair,
}

/// One op waiting for a device core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Job {
    pub id: u64,
    pub tenant: u32,
    pub ino: u64,
    pub cost_ns: u64,
}

/// A job placed on a core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Started {
    pub job: Job,
    pub core: usize,
    pub start: VirtualTime,
    pub end: VirtualTime,
}

#[derive(Clone, Copy, Debug)]
struct Queued {
    job: Job,
    arrival: VirtualTime,
    start_tag: u128,
}

/// Tags are in weighted nanoseconds, scaled so integer division loses nothing that matters.
const TAG_SCALE: u128 = 1 << 20;

/// The device cores and the queues in front of them.
#[derive(Debug)]
pub struct CoreScheduler {
    policy: Policy,
    cores: Vec<VirtualTime>,
    weights: BTreeMap<u32, u32>,
    queues: BTreeMap<u64, VecDeque<Queued>>,
    busy: BTreeSet<u64>,
    finish: BTreeMap<u32, u128>,
    virtual_time: u128,
}

impl CoreScheduler {
    pub fn new(cores: usize, policy: Policy) -> CoreScheduler {
        CoreScheduler {
            policy,
            cores: vec![VirtualTime::ZERO; cores.max(1)],
            weights: BTreeMap::new(),
            queues: BTreeMap::new(),
            busy: BTreeSet::new(),
            finish: BTreeMap::new(),
            virtual_time: 0,
        }
    }

    /// A tenant's weight (1 unless set; 0 is taken as 1).
    pub fn set_weight(&mut self, tenant: u32, weight: u32) {
        self.weights.insert(tenant, weight.max(1));
    }

    /// Queues `job` on its inode at `at`.
    pub fn submit(&mut self, job: Job, at: VirtualTime) {
        let w = u128::from(*self.weights.get(&job.tenant).unwrap_or(&1));
        let f = self.finish.entry(job.tenant).or_insert(0);
        let start_tag = (*f).max(self.virtual_time);
        *f = start_tag + u128::from(job.cost_ns) * TAG_SCALE / w;
        self.queues.entry(job.ino).or_default().push_back(Queued {
            job,
            arrival: at,
            start_tag,
        });
    }

    /// The op on `ino` finished: its queue may serve the next one.
    pub fn complete(&mut self, ino: u64) {
        self.busy.remove(&ino);
    }

    /// Whether any op waits.
    pub fn pending(&self) -> bool {
        self.queues.values().any(|q| !q.is_empty())
    }

    /// Places waiting ops on the cores free at `now`.
    pub fn dispatch(&mut self, now: VirtualTime) -> Vec<Started> {
        let mut started = Vec::new();
        while let Some(core) = (0..self.cores.len()).find(|&c| self.cores[c] <= now) {
            let Some(ino) = self.pick() else { break };
            let q = self.queues.get_mut(&ino).expect("picked a queue");
            let next = q.pop_front().expect("picked a non-empty queue");
            if q.is_empty() {
                self.queues.remove(&ino);
            }
            self.virtual_time = self.virtual_time.max(next.start_tag);
            self.busy.insert(ino);
            let end = now.after(next.job.cost_ns);
            self.cores[core] = end;
            started.push(Started {
                job: next.job,
                core,
                start: now,
                end,
            });
        }
        started
    }

    /// The earliest time a core is free.
    pub fn next_free_core(&self) -> VirtualTime {
        self.cores
            .iter()
            .copied()
            .min()
            .unwrap_or(VirtualTime::ZERO)
    }

    /// The inode whose head op goes next, if any can go.
    fn pick(&self) -> Option<u64> {
        self.queues
            .iter()
            .filter(|(ino, q)| !q.is_empty() && !self.busy.contains(ino))
            .map(|(ino, q)| {
                let h = q[0];
                let key = match self.policy {
                    Policy::Fifo => (u128::from(h.arrival.ns()), h.job.id),
                    Policy::Fair => (h.start_tag, h.job.id),
                };
                (key, *ino)
            })
            .min()
            .map(|(_, ino)| ino)
    }
}

/// Jain's fairness index of `shares`: 1 when all are equal, 1/n when one takes everything.
pub fn jain_index(shares: &[f64]) -> f64 {
    let n = shares.len() as f64;
    let sum: f64 = shares.iter().sum();
    let squares: f64 = shares.iter().map(|x| x * x).sum();
    if squares == 0.0 {
        return 1.0;
    }
    sum * sum / (n * squares)
}
