//! `host`: no offload at all, the baseline the offload designs are measured against. The
//! host opens each file the request names, reads it through its page cache (NVMe and PCIe
//! for what is not cached) and runs the same task code on its own CPU (the profile's
//! `host.cpu_ns_per_fuel`), one file after another, as the program whose scans a plan folded
//! did.

use super::{
    expand_paths, DesignKind, FileOutcome, NdpCompute, NdpError, NdpOutcome, NdpRequest,
    OffloadDesign, Stages,
};
use crate::fs::{HostFs, OpenOptions};

/// What one read step moves, so the buffer stays bounded whatever a file's size.
const READ_STEP: u64 = 1 << 20;

#[derive(Default)]
pub struct HostOnly;

impl OffloadDesign for HostOnly {
    fn kind(&self) -> DesignKind {
        DesignKind::HostOnly
    }

    fn offload(
        &mut self,
        fs: &mut HostFs,
        req: &NdpRequest,
        compute: &mut dyn NdpCompute,
    ) -> Result<NdpOutcome, NdpError> {
        let started = fs.clock();
        let mut files = Vec::new();
        for path in expand_paths(fs, req)? {
            let t0 = fs.clock();
            let how = OpenOptions {
                write: false,
                create: None,
            };
            let fd = fs.open(&path, how, req.who)?;
            let t1 = fs.clock();
            let mut data = Vec::new();
            let mut at = 0u64;
            loop {
                let chunk = fs.read(fd, at, READ_STEP)?;
                if chunk.is_empty() {
                    break;
                }
                at += chunk.len() as u64;
                data.extend_from_slice(&chunk);
            }
            fs.close(fd)?;
            let t2 = fs.clock();
            let computed =
                compute
                    .compute_on_host(&path, data)
                    .map_err(|message| NdpError::Compute {
                        path: path.clone(),
                        message,
                    })?;
            let done = t2.after(computed.compute_ns);
            fs.advance_to(done);
            files.push(FileOutcome {
                path,
                ret: computed.ret,
                stages: Stages {
                    // Path lookup and the open: the host's file system, no layout to fetch.
                    others_ns: t1.since(t0) as f64,
                    read_file_ns: t2.since(t1) as f64,
                    compute_ns: computed.compute_ns as f64,
                    ..Stages::default()
                },
            });
        }
        Ok(NdpOutcome {
            design: DesignKind::HostOnly,
            files,
            started,
            finished: fs.clock(),
        })
    }
}
