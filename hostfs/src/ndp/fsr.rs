//! FSR: in-storage file-system resolution (LightFS §IV-A, ref. 12). Per file, the host sends the
//! path; the device resolves it itself, reading the inode and directory blocks of each level
//! from flash (one after another: each level's block number comes from the previous level)
//! unless its own DRAM still holds them, then reads the file and computes.

use super::cpu::CorePool;
use super::pipeline::{device_steps, drive, refuse};
use super::{
    expand_paths, DesignKind, NdpCompute, NdpError, NdpOutcome, NdpRequest, OffloadDesign,
};
use crate::fs::{byte_ranges, FsError, HostFs};
use crate::namespace::InodeKind;
use crate::perms::Access;
use csd_device::{IoPath, LinkDirection, Lpn};
use std::collections::BTreeSet;

#[derive(Default)]
pub struct Fsr {
    /// Metadata blocks in the device's DRAM.
    cached: BTreeSet<u64>,
}

impl OffloadDesign for Fsr {
    fn kind(&self) -> DesignKind {
        DesignKind::Fsr
    }

    fn drop_caches(&mut self, fs: &mut HostFs) {
        fs.cold_start();
        self.cached.clear();
    }

    // Long: FSR's request in order (path over PCIe, the device's path walk with its cache, the
    // read, the compute), each charged where it happens.
    fn offload(
        &mut self,
        fs: &mut HostFs,
        req: &NdpRequest,
        compute: &mut dyn NdpCompute,
    ) -> Result<NdpOutcome, NdpError> {
        let started = fs.clock();
        let files = expand_paths(fs, req)?;
        let profile = fs.device().profile().clone();
        let nvme_ns = profile.host_interface.nvme_command_ns;
        let entry_ns = profile.device_cpu.metadata_entry_ns;
        let mut cpu = CorePool::new(profile.device_cpu.cores);
        let mut firmware = CorePool::new(profile.host_interface.command_cores);
        let args_bytes = compute.args_bytes();
        let bs = fs.namespace().layout().block_bytes;
        let who = req.who;
        let cached = &mut self.cached;
        let (files, finished) = drive(1, files, started, |job, t| match job.step {
            0 => {
                let done = firmware.run(t, nvme_ns);
                job.stages.others_ns += done.since(t) as f64;
                Ok(Some(done))
            }
            // The path string (NUL-terminated) and arguments cross PCIe.
            1 => {
                let bytes = job.path.len() as u64 + 1 + args_bytes;
                let c = fs
                    .device_mut()
                    .host_transfer(LinkDirection::ToDevice, t, bytes);
                job.stages.dma_ns += c.done.since(t) as f64;
                Ok(Some(c.done))
            }
            // The device walks the path.
            2 => {
                let r = fs
                    .namespace()
                    .resolve(&job.path, who)
                    .map_err(|e| refuse(FsError::Namespace(e), who))?;
                let ns = fs.namespace();
                let inode = ns.inode(r.ino).expect("resolved");
                let InodeKind::File {
                    size_bytes,
                    extents,
                    ..
                } = &inode.kind
                else {
                    return Err(FsError::IsADirectory(job.path.clone()).into());
                };
                if !inode.perms.allows(who, Access::Read) {
                    return Err(refuse(
                        FsError::PermissionDenied {
                            path: job.path.clone(),
                            access: Access::Read.name(),
                        },
                        who,
                    ));
                }
                job.size = *size_bytes;
                job.ranges = byte_ranges(extents, bs, *size_bytes);
                // Entries examined: every inode parsed on the way, then in each directory a
                // scan up to the wanted name: of the whole directory when it has one block, of
                // the leaf block it hashes to (after a binary search of the index) when it is
                // larger, as the namespace reads it.
                let mut examined = r.reads.len() as u64;
                for (&dir, at) in r.ino_list.iter().zip(&r.positions) {
                    // The entries before this one in its block: the whole scan of a
                    // one-block directory, the leaf's scan after the index of a larger one.
                    let before = at.index as u64;
                    let blocks = ns.dir_block_count(dir);
                    examined += if blocks <= 1 {
                        1 + before
                    } else {
                        u64::from(blocks.ilog2()) + 1 + before
                    };
                }
                let mut at = t;
                for m in &r.reads {
                    if cached.insert(m.block()) {
                        at = fs
                            .device_mut()
                            .read(IoPath::Internal, at, Lpn(m.block()), 1, None)?
                            .done;
                    }
                }
                let done = cpu.run(at, examined * entry_ns);
                job.stages.retrieve_layout_ns += done.since(t) as f64;
                Ok(Some(done))
            }
            _ => device_steps(fs, &mut cpu, compute, job, t, 3),
        })?;
        fs.advance_to(finished);
        Ok(NdpOutcome {
            design: DesignKind::Fsr,
            files,
            started,
            finished,
        })
    }
}
