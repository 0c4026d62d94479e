//! The device's embedded cores as a shared resource: NDP computations and firmware metadata
//! work queue for them (LightFS's Cosmos+ runs tasks on one Cortex-A9 core).

use csd_device::VirtualTime;

/// `cores` cores, each free from some time on; work goes to the core that frees up first.
#[derive(Clone, Debug)]
pub struct CorePool {
    free_at: Vec<VirtualTime>,
}

impl CorePool {
    pub fn new(cores: u32) -> CorePool {
        CorePool {
            free_at: vec![VirtualTime::ZERO; cores.max(1) as usize],
        }
    }

    /// Runs `ns` of work that is ready at `ready`; returns when it finishes.
    pub fn run(&mut self, ready: VirtualTime, ns: u64) -> VirtualTime {
        let core = self
            .free_at
            .iter_mut()
            .min_by_key(|t| **t)
            .expect("at least one core");
        let done = ready.max(*core).after(ns);
        *core = done;
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_queues_for_the_first_free_core() {
        let mut p = CorePool::new(2);
        let t = VirtualTime::ZERO;
        assert_eq!(p.run(t, 10), VirtualTime(10));
        assert_eq!(p.run(t, 10), VirtualTime(10));
        assert_eq!(p.run(t, 10), VirtualTime(20), "third job waits for a core");
        assert_eq!(p.run(VirtualTime(100), 5), VirtualTime(105));
    }
}
