//! `frag-s` and `frag-m`: the host-centric way (LightFS §IV-A). Per file, a host thread asks
//! the file system for the extents (`filefrag`, i.e. `fiemap`), sends an NVMe command whose
//! layout the device fetches by DMA, and waits while the device reads the file, computes and
//! returns the result. `frag-m` runs N such threads, which compete for the host link, the
//! flash and the device CPU.

use super::cpu::CorePool;
use super::pipeline::{device_steps, drive, refuse};
use super::{
    expand_paths, layout_bytes, DesignKind, NdpCompute, NdpError, NdpOutcome, NdpRequest,
    OffloadDesign,
};
use crate::fs::{byte_ranges, HostFs};
use csd_device::LinkDirection;

/// frag-m's thread count: the Cosmos+ OpenSSD's I/O queue count, where LightFS found frag-m
/// at its best.
pub const FRAG_M_THREADS: usize = 8;

pub struct Frag {
    threads: usize,
}

impl Frag {
    pub fn new(threads: usize) -> Frag {
        Frag {
            threads: threads.max(1),
        }
    }
}

impl OffloadDesign for Frag {
    fn kind(&self) -> DesignKind {
        if self.threads == 1 {
            DesignKind::FragS
        } else {
            DesignKind::FragM
        }
    }

    fn offload(
        &mut self,
        fs: &mut HostFs,
        req: &NdpRequest,
        compute: &mut dyn NdpCompute,
    ) -> Result<NdpOutcome, NdpError> {
        let started = fs.clock();
        let files = expand_paths(fs, req)?;
        let nvme_ns = fs.device().profile().host_interface.nvme_command_ns;
        let mut cpu = CorePool::new(fs.device().profile().device_cpu.cores);
        // The firmware handles each file's command on its command cores: frag-m's threads
        // send theirs together and queue there (LightFS §II-B: frag-m "cannot eliminate
        // ... individually sending requests for each file").
        let mut firmware = CorePool::new(fs.device().profile().host_interface.command_cores);
        let args_bytes = compute.args_bytes();
        let bs = fs.namespace().layout().block_bytes;
        let who = req.who;
        let (files, finished) = drive(self.threads, files, started, |job, t| {
            match job.step {
                // The host thread: filefrag.
                0 => {
                    fs.set_clock(t);
                    let (size, extents, cost) = fs
                        .file_extents(&job.path, who)
                        .map_err(|e| refuse(e, who))?;
                    job.size = size;
                    job.ranges = byte_ranges(&extents, bs, size);
                    job.stages.retrieve_layout_ns += cost.ns as f64;
                    Ok(Some(t.after(cost.ns)))
                }
                // The NVMe command.
                1 => {
                    let done = firmware.run(t, nvme_ns);
                    job.stages.others_ns += done.since(t) as f64;
                    Ok(Some(done))
                }
                // The device fetches the layout (and arguments) from host memory.
                2 => {
                    let bytes = layout_bytes(job.ranges.len()) + args_bytes;
                    let c = fs
                        .device_mut()
                        .host_transfer(LinkDirection::ToDevice, t, bytes);
                    job.stages.dma_ns += c.done.since(t) as f64;
                    Ok(Some(c.done))
                }
                _ => device_steps(fs, &mut cpu, compute, job, t, 3),
            }
        })?;
        fs.advance_to(finished);
        Ok(NdpOutcome {
            design: self.kind(),
            files,
            started,
            finished,
        })
    }
}
