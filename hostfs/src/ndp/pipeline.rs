//! The per-file pipeline shared by the host-centric designs (frag-s, frag-m, FSR): each file
//! is a job whose steps (host work, command, DMA, flash read, compute, result) run on one of
//! N host threads, all threads' steps executed in virtual-time order.

use super::cpu::CorePool;
use super::{BytesStamp, Computed, FileOutcome, NdpCompute, NdpError, Stages};
use crate::fs::{FsError, HostFs};
use crate::perms::Cred;
use csd_device::{IoPath, LinkDirection, VirtualTime};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One file on its way through a per-file pipeline.
pub(crate) struct Job {
    pub path: String,
    pub step: u8,
    pub stages: Stages,
    pub ranges: Vec<(u64, u64)>,
    pub size: u64,
    pub data: Vec<u8>,
    /// What the read took, named for the computation's results ([`BytesStamp`]).
    pub stamp: Option<BytesStamp>,
    /// The result the computation kept for those bytes: the read then takes none.
    pub recalled: Option<Computed>,
    pub ret: Vec<u8>,
}

/// Runs per-file jobs on `threads` host threads. `step` performs the job's next step at the
/// given time and returns when it ends, or `None` when the job is finished; steps of all
/// threads are executed in time order, so the device sees requests as they would arrive.
pub(crate) fn drive(
    threads: usize,
    files: Vec<String>,
    start: VirtualTime,
    mut step: impl FnMut(&mut Job, VirtualTime) -> Result<Option<VirtualTime>, NdpError>,
) -> Result<(Vec<FileOutcome>, VirtualTime), NdpError> {
    let mut pending = files.into_iter().enumerate();
    let mut outcomes: Vec<Option<FileOutcome>> = Vec::new();
    // (time, sequence, thread slot); the sequence keeps ties in submission order.
    let mut events = BinaryHeap::new();
    let mut jobs: Vec<Option<(usize, Job)>> = Vec::new();
    let mut seq = 0u64;
    let mut finished = start;
    for slot in 0..threads {
        jobs.push(None);
        events.push(Reverse((start, seq, slot)));
        seq += 1;
    }
    while let Some(Reverse((t, _, slot))) = events.pop() {
        if jobs[slot].is_none() {
            let Some((i, path)) = pending.next() else {
                continue;
            };
            outcomes.push(None);
            jobs[slot] = Some((
                i,
                Job {
                    path,
                    step: 0,
                    stages: Stages::default(),
                    ranges: Vec::new(),
                    size: 0,
                    data: Vec::new(),
                    stamp: None,
                    recalled: None,
                    ret: Vec::new(),
                },
            ));
        }
        let (_, job) = jobs[slot].as_mut().expect("assigned above");
        match step(job, t)? {
            Some(next) => {
                job.step += 1;
                events.push(Reverse((next.max(t), seq, slot)));
            }
            None => {
                let (i, job) = jobs[slot].take().expect("running");
                finished = finished.max(t);
                outcomes[i] = Some(FileOutcome {
                    path: job.path,
                    ret: job.ret,
                    stages: job.stages,
                });
                events.push(Reverse((t, seq, slot)));
            }
        }
        seq += 1;
    }
    let outcomes = outcomes
        .into_iter()
        .map(|o| o.expect("every started job finishes"))
        .collect();
    Ok((outcomes, finished))
}

/// A file-system error in NDP terms (a refused read names the file and the caller).
pub(crate) fn refuse(e: FsError, who: Cred) -> NdpError {
    match e {
        FsError::PermissionDenied { path, .. } => NdpError::PermissionDenied {
            path,
            uid: who.uid,
            aggregated: false,
        },
        e => NdpError::Fs(e),
    }
}

/// The device's half of every per-file design: read the file, compute, return the result.
/// Steps `first..first + 3`; returns `None` for steps past them.
pub(crate) fn device_steps(
    fs: &mut HostFs,
    cpu: &mut CorePool,
    compute: &mut dyn NdpCompute,
    job: &mut Job,
    t: VirtualTime,
    first: u8,
) -> Result<Option<VirtualTime>, NdpError> {
    match job.step - first {
        0 => {
            job.stamp = BytesStamp::of_ranges(fs.device(), &job.ranges, job.size);
            job.recalled = job
                .stamp
                .as_ref()
                .and_then(|s| compute.recall(&job.path, s));
            // Bytes are taken only for a computation that has not seen them yet.
            let fetch = job.recalled.is_none();
            if fetch {
                let allocated: u64 = job.ranges.iter().map(|r| r.1).sum();
                job.data = vec![0u8; allocated as usize];
            }
            let keep = fs.device().ftl().keeps_payloads();
            let c = fs.device_mut().read_ranges(
                IoPath::Internal,
                t,
                &job.ranges,
                (fetch && keep).then_some(&mut job.data[..]),
            )?;
            if fetch {
                // Blocks not allocated yet (delayed allocation) read as zeros.
                job.data.resize(job.size as usize, 0);
            }
            job.stages.read_file_ns += c.done.since(t) as f64;
            Ok(Some(c.done))
        }
        1 => {
            let out = match job.recalled.take() {
                Some(out) => Ok(out),
                None => {
                    let data = std::mem::take(&mut job.data);
                    compute.compute_stamped(&job.path, job.stamp.take(), data)
                }
            };
            let out = out.map_err(|message| NdpError::Compute {
                path: job.path.clone(),
                message,
            })?;
            let done = cpu.run(t, out.compute_ns);
            // The file's own computation is `compute`; waiting for a core other files hold
            // is overhead of how the work was offloaded (LightFS's "others"): eight frag-m
            // threads offloading one file each queue for the device's cores.
            let ran = out.compute_ns.min(done.since(t));
            job.stages.compute_ns += ran as f64;
            job.stages.others_ns += (done.since(t) - ran) as f64;
            job.ret = out.ret;
            Ok(Some(done))
        }
        2 => {
            let c = fs
                .device_mut()
                .host_transfer(LinkDirection::ToHost, t, job.ret.len() as u64);
            job.stages.dma_ns += c.done.since(t) as f64;
            Ok(Some(c.done))
        }
        _ => Ok(None),
    }
}
