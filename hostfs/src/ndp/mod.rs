//! Offloading near-data-processing (NDP) requests: the four designs LightFS compares.
//!
//! An NDP request names files or directories; the device must find where each file lives,
//! read it and run the offloaded computation on it. The designs differ in who finds the
//! layout and how the request travels (LightFS §II-C, §IV-A):
//!
//! - [`frag::Frag`] with one host thread is `frag-s`: per file, `filefrag` on the host, then
//!   an NVMe command whose layout the device fetches by DMA; with N threads it is `frag-m`;
//! - [`fsr::Fsr`]: per file, the host sends the path and the device resolves it itself,
//!   reading directory and inode blocks level by level;
//! - [`lightfs::LightFs`]: one request with an ino list; the device batch-retrieves layouts
//!   from its `.ndpmeta` cache and reads every file at once.
//!
//! Each produces per-file [`Stages`] in LightFS Fig. 3's vocabulary; [`NdpOutcome::summary`]
//! turns them into the mean per-file latency and PAO. The computation itself is behind
//! [`NdpCompute`]: csdlab runs a real Wasm task there (the `csd` crate bridges to the task
//! runtime), so this crate needs no Wasm engine.
//!
//! The device-side halves of FSR and LightFS live here, not in `csd-device`: they parse this
//! file system's directory blocks and `.ndpmeta` files, so they belong with that format. They
//! touch the device only through its public interface, on the internal path.

pub mod cpu;
pub mod frag;
pub mod fsr;
pub mod host;
pub mod lightfs;
mod pipeline;

use crate::fs::{Fd, FsError, HostFs, Link, OpenOptions};
use crate::ndpmeta::NdpMetaError;
use crate::perms::{Access, Cred};
use csd_device::{ContentStamp, Device, DeviceError, Ppn, VirtualTime};
use serde::Serialize;

/// The name of LightFS's per-directory index file.
pub const NDPMETA_NAME: &str = ".ndpmeta";

/// Where one file's time went (LightFS Fig. 3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Stages {
    /// Finding the file's layout: `filefrag` on the host, or reading metadata in the device.
    pub retrieve_layout_ns: f64,
    /// Moving the request (layout, path or ino list) and the result over PCIe.
    pub dma_ns: f64,
    /// Reading the file's data from flash.
    pub read_file_ns: f64,
    /// The computation on the device CPU or accelerator (waiting for it included).
    pub compute_ns: f64,
    /// NVMe command handling and host-side scheduling.
    pub others_ns: f64,
}

impl Stages {
    pub fn total_ns(&self) -> f64 {
        self.retrieve_layout_ns + self.dma_ns + self.read_file_ns + self.compute_ns + self.others_ns
    }

    /// Percentage of additional overhead (LightFS §II-C): layout retrieval, DMA and others
    /// over the total.
    pub fn pao(&self) -> f64 {
        let total = self.total_ns();
        if total == 0.0 {
            0.0
        } else {
            (self.retrieve_layout_ns + self.dma_ns + self.others_ns) / total
        }
    }

    /// Adds another set of stages, stage by stage.
    pub fn add(&mut self, o: &Stages) {
        self.retrieve_layout_ns += o.retrieve_layout_ns;
        self.dma_ns += o.dma_ns;
        self.read_file_ns += o.read_file_ns;
        self.compute_ns += o.compute_ns;
        self.others_ns += o.others_ns;
    }

    /// Every stage multiplied by `k`.
    pub fn scale(&self, k: f64) -> Stages {
        Stages {
            retrieve_layout_ns: self.retrieve_layout_ns * k,
            dma_ns: self.dma_ns * k,
            read_file_ns: self.read_file_ns * k,
            compute_ns: self.compute_ns * k,
            others_ns: self.others_ns * k,
        }
    }
}

/// The result of the offloaded computation on one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Computed {
    /// What the task returned.
    pub ret: Vec<u8>,
    /// Device-CPU plus accelerator time.
    pub compute_ns: u64,
}

/// The bytes a design is about to compute on, named without reading them: the device's
/// [`ContentStamp`], what is read (byte ranges, or the physical pages of a locked file's
/// shadow) and the file's length. Equal stamps mean equal bytes, so a result kept under one
/// is the result for the bytes it names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BytesStamp {
    content: ContentStamp,
    source: StampedSource,
    len: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum StampedSource {
    Ranges(Vec<(u64, u64)>),
    Pages(Vec<Option<u32>>),
}

impl BytesStamp {
    /// `ranges` of the device's logical space, cut or padded with zeros to `len`; `None`
    /// when the device cannot stamp its content.
    pub(crate) fn of_ranges(device: &Device, ranges: &[(u64, u64)], len: u64) -> Option<Self> {
        Some(BytesStamp {
            content: device.content_stamp()?,
            source: StampedSource::Ranges(ranges.to_vec()),
            len,
        })
    }

    /// Physical `pages` (`None`: a hole, read as zeros), cut or padded to `len`.
    pub(crate) fn of_pages(device: &Device, pages: &[Option<Ppn>], len: u64) -> Option<Self> {
        Some(BytesStamp {
            content: device.content_stamp()?,
            source: StampedSource::Pages(pages.iter().map(|p| p.map(|p| p.0)).collect()),
            len,
        })
    }

    /// What keeping this stamp costs beyond its own size.
    pub fn heap_bytes(&self) -> usize {
        match &self.source {
            StampedSource::Ranges(r) => std::mem::size_of_val(r.as_slice()),
            StampedSource::Pages(p) => std::mem::size_of_val(p.as_slice()),
        }
    }
}

/// Results kept under the [`BytesStamp`] of the bytes they were computed over, each with the
/// path it was read for: a task sees its file's path, so the same bytes under another path
/// are another computation. What an [`NdpCompute`] that keeps results recalls from.
#[derive(Default)]
pub struct StampedResults {
    kept: std::collections::HashMap<BytesStamp, (String, Computed)>,
}

impl StampedResults {
    /// The result kept for `path` over the bytes `stamp` names.
    pub fn get(&self, path: &str, stamp: &BytesStamp) -> Option<Computed> {
        match self.kept.get(stamp) {
            Some((p, c)) if p == path => Some(c.clone()),
            _ => None,
        }
    }

    pub fn keep(&mut self, path: &str, stamp: BytesStamp, c: Computed) {
        self.kept.insert(stamp, (path.to_string(), c));
    }
}

/// The offloaded computation: runs on one file's bytes, already in device memory.
pub trait NdpCompute {
    fn compute(&mut self, path: &str, data: Vec<u8>) -> Result<Computed, String>;
    /// The result kept for the bytes `stamp` names, if any: the caller then books the read
    /// but need not take the bytes. A warm measurement reads every file twice.
    fn recall(&mut self, _path: &str, _stamp: &BytesStamp) -> Option<Computed> {
        None
    }
    /// [`NdpCompute::compute`] over the bytes `stamp` names (`None`: the device gave no
    /// stamp), keeping the result for [`NdpCompute::recall`] where the computation keeps
    /// results.
    fn compute_stamped(
        &mut self,
        path: &str,
        _stamp: Option<BytesStamp>,
        data: Vec<u8>,
    ) -> Result<Computed, String> {
        self.compute(path, data)
    }
    /// The same computation on the host's CPU (the `host` baseline); a computation without
    /// a host model refuses.
    fn compute_on_host(&mut self, _path: &str, _data: Vec<u8>) -> Result<Computed, String> {
        Err("this computation has no host CPU model".to_string())
    }
    /// Bytes of arguments the request carries to the device.
    fn args_bytes(&self) -> u64 {
        0
    }
}

/// An NDP request: files and directories (each meaning the regular files directly in it).
#[derive(Clone, Debug)]
pub struct NdpRequest {
    pub paths: Vec<String>,
    pub who: Cred,
}

/// What one file of a request produced.
#[derive(Clone, Debug)]
pub struct FileOutcome {
    pub path: String,
    pub ret: Vec<u8>,
    pub stages: Stages,
}

/// What a request produced, file by file.
#[derive(Clone, Debug)]
pub struct NdpOutcome {
    pub design: DesignKind,
    pub files: Vec<FileOutcome>,
    pub started: VirtualTime,
    pub finished: VirtualTime,
}

/// A design's figures for one request, as LightFS §IV reports them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct NdpSummary {
    pub files: usize,
    /// From the request's start to its last result.
    pub makespan_ns: u64,
    /// Makespan over files: the "average latency of processing each file" of Fig. 8.
    pub mean_latency_ns: f64,
    /// The mean of each stage over files, scaled so the stages add up to `mean_latency_ns`.
    pub breakdown: Stages,
    pub pao: f64,
}

impl NdpOutcome {
    /// Mean per-file latency and its breakdown.
    ///
    /// When files are processed one after another (frag-s, FSR) the per-file stages add up to
    /// the makespan and are reported as they are. When they overlap (frag-m's threads,
    /// LightFS's batch), each file's stages still add up to that file's own latency, but the
    /// files share the wall clock: the mean stages are then scaled by makespan / Σ latency, so
    /// the bar shows each stage's share of the time per file and PAO is unchanged by the
    /// scaling.
    pub fn summary(&self) -> NdpSummary {
        let n = self.files.len().max(1) as f64;
        let makespan = self.finished.since(self.started);
        let mut sum = Stages::default();
        for f in &self.files {
            sum.add(&f.stages);
        }
        let mean = makespan as f64 / n;
        let breakdown = if sum.total_ns() > 0.0 {
            sum.scale(makespan as f64 / sum.total_ns() / n)
        } else {
            sum
        };
        NdpSummary {
            files: self.files.len(),
            makespan_ns: makespan,
            mean_latency_ns: mean,
            breakdown,
            pao: breakdown.pao(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NdpError {
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error("device: {0}")]
    Device(#[from] DeviceError),
    #[error("'{path}': {source}")]
    Index {
        path: String,
        #[source]
        source: NdpMetaError,
    },
    #[error("the computation failed on '{path}': {message}")]
    Compute { path: String, message: String },
    #[error("permission denied: uid {uid} may not read '{path}'{}", if *.aggregated { " (the directory's aggregated permissions refuse it)" } else { "" })]
    PermissionDenied {
        path: String,
        uid: u32,
        aggregated: bool,
    },
    #[error("the request names no files ({0})")]
    NoFiles(String),
    /// LightFS indexes a file it saw created only once its update synchronizer has synced
    /// it (§III-E): until then the device cannot find it, though the host can.
    #[error(
        "'{path}' is not in LightFS's index yet: it was created since the update synchronizer \
         last ran (it syncs closed files every {secs} s; an fsync of the file indexes it at once)",
        secs = lightfs::SYNC_INTERVAL_NS / 1_000_000_000
    )]
    NotYetIndexed { path: String },
    #[error("{design} is not initialised: run init on the directory tree first")]
    NotInitialised { design: &'static str },
}

/// The designs, by name.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
pub enum DesignKind {
    #[serde(rename = "frag-s")]
    FragS,
    #[serde(rename = "frag-m")]
    FragM,
    #[serde(rename = "fsr")]
    Fsr,
    #[serde(rename = "lightfs")]
    LightFs,
    /// No offload: the host reads every file and computes on its own CPU (the baseline).
    #[serde(rename = "host")]
    HostOnly,
}

impl DesignKind {
    pub const ALL: [DesignKind; 4] = [
        DesignKind::FragS,
        DesignKind::FragM,
        DesignKind::Fsr,
        DesignKind::LightFs,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DesignKind::FragS => "frag-s",
            DesignKind::FragM => "frag-m",
            DesignKind::Fsr => "fsr",
            DesignKind::LightFs => "lightfs",
            DesignKind::HostOnly => "host",
        }
    }

    /// A fresh instance of this design with its defaults (frag-m: 8 host threads, the
    /// device's queue count in LightFS §IV-A).
    pub fn build(self) -> Box<dyn OffloadDesign> {
        match self {
            DesignKind::FragS => Box::new(frag::Frag::new(1)),
            DesignKind::FragM => Box::new(frag::Frag::new(frag::FRAG_M_THREADS)),
            DesignKind::Fsr => Box::new(fsr::Fsr::default()),
            DesignKind::LightFs => Box::new(lightfs::LightFs::default()),
            DesignKind::HostOnly => Box::new(host::HostOnly),
        }
    }
}

impl std::fmt::Display for DesignKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DesignKind {
    type Err = String;
    fn from_str(s: &str) -> Result<DesignKind, String> {
        DesignKind::ALL
            .into_iter()
            .chain([DesignKind::HostOnly])
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                format!("unknown design '{s}' (expected frag-s, frag-m, fsr, lightfs or host)")
            })
    }
}

/// Memory a design's metadata caches hold (LightFS §III-B3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Footprint {
    pub host_bytes: u64,
    pub device_bytes: u64,
}

/// One way of offloading NDP requests. Applications' file I/O goes through the design too,
/// because LightFS must see opens for writing and closes (libLightFS intercepts them).
pub trait OffloadDesign {
    fn kind(&self) -> DesignKind;

    /// Prepares the tree under `root` (LightFS builds its `.ndpmeta` files).
    fn init(&mut self, _fs: &mut HostFs, _root: &str, _who: Cred) -> Result<(), NdpError> {
        Ok(())
    }

    fn open(
        &mut self,
        fs: &mut HostFs,
        path: &str,
        how: OpenOptions,
        who: Cred,
    ) -> Result<Fd, NdpError> {
        Ok(fs.open(path, how, who)?)
    }

    fn close(&mut self, fs: &mut HostFs, fd: Fd) -> Result<(), NdpError> {
        fs.close(fd)?;
        Ok(())
    }

    /// `unlink`, `rmdir`, `rename` and `link` go through the design too: LightFS's index
    /// names each directory's entries, and must not offer a file that is gone.
    fn unlink(&mut self, fs: &mut HostFs, path: &str, who: Cred) -> Result<(), NdpError> {
        fs.unlink(path, who)?;
        Ok(())
    }

    fn rmdir(&mut self, fs: &mut HostFs, path: &str, who: Cred) -> Result<(), NdpError> {
        fs.rmdir(path, who)?;
        Ok(())
    }

    fn rename(&mut self, fs: &mut HostFs, from: &str, to: &str, who: Cred) -> Result<(), NdpError> {
        fs.rename(from, to, who)?;
        Ok(())
    }

    /// `link`: a further name for a file (with `follow`, for the file a link at the end of
    /// `from` leads to), which LightFS's index of the new name's directory must list.
    fn link(&mut self, fs: &mut HostFs, link: Link<'_>, who: Cred) -> Result<(), NdpError> {
        link.apply(fs, who)?;
        Ok(())
    }

    /// Background work due by the host's clock: the kernel flusher, and LightFS's periodic
    /// updater and block monitor.
    fn background(&mut self, fs: &mut HostFs) -> Result<(), NdpError> {
        fs.run_flusher()?;
        Ok(())
    }

    /// Empties every metadata cache, host and device, and the device's data buffer (a cold
    /// run).
    fn drop_caches(&mut self, fs: &mut HostFs) {
        fs.cold_start();
    }

    fn offload(
        &mut self,
        fs: &mut HostFs,
        req: &NdpRequest,
        compute: &mut dyn NdpCompute,
    ) -> Result<NdpOutcome, NdpError>;

    fn footprint(&self) -> Option<Footprint> {
        None
    }
}

/// How many of `req`'s files the device reads, under `design`, older than the host's copy:
/// files with dirty pages (data not yet on flash: delayed allocation may not even have
/// given them blocks), and under FSR, whose walk reads the on-flash metadata itself, files
/// whose inode (size, blocks, or the file itself) still waits in the host's journal.
/// frag-s and frag-m take layouts from the host's cache, so only their data can be stale.
/// LightFS reads a file only once its update synchronizer has synced it (§III-B; a newer
/// file is left out of the request until then) and the host baseline reads through its
/// page cache: none for them. This is LightFS §II-D's inconsistency, counted so that a
/// report says when it happened.
pub fn stale_files(fs: &HostFs, design: DesignKind, req: &NdpRequest) -> Result<u64, NdpError> {
    if matches!(design, DesignKind::LightFs | DesignKind::HostOnly) {
        return Ok(0);
    }
    let ns = fs.namespace();
    let mut stale = 0;
    for path in expand_paths(fs, req)? {
        let r = ns.resolve(&path, req.who).map_err(FsError::from)?;
        let dirty_data = fs.page_cache().is_dirty(r.ino);
        let old_metadata = design == DesignKind::Fsr && fs.journal_holds_inode(r.ino);
        stale += u64::from(dirty_data || old_metadata);
    }
    Ok(stale)
}

/// Expands a request's paths into the files it covers, in order. This is the application's
/// own `readdir`, charged nowhere: the per-file lookups that follow read the same directory
/// blocks and pay for them.
fn expand_paths(fs: &HostFs, req: &NdpRequest) -> Result<Vec<String>, NdpError> {
    let ns = fs.namespace();
    let mut files = Vec::new();
    for p in &req.paths {
        let r = ns.resolve(p, req.who).map_err(FsError::from)?;
        let inode = ns.inode(r.ino).expect("resolved");
        if !inode.is_dir() {
            files.push(p.clone());
            continue;
        }
        if !inode.perms.allows(req.who, Access::Read) {
            return Err(NdpError::PermissionDenied {
                path: p.clone(),
                uid: req.who.uid,
                aggregated: false,
            });
        }
        let base = p.trim_end_matches('/');
        for e in ns.entries_of(r.ino) {
            if e.name != NDPMETA_NAME && ns.inode(e.ino).is_some_and(|i| !i.is_dir()) {
                files.push(format!("{base}/{}", e.name));
            }
        }
    }
    if files.is_empty() {
        return Err(NdpError::NoFiles(req.paths.join(", ")));
    }
    Ok(files)
}

/// Bytes an extent list takes in a request: (first block, blocks) as two u64s each.
fn layout_bytes(extents: usize) -> u64 {
    16 * extents as u64
}
