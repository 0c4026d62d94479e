//! LightFS §IV's microbenchmark: one NDP operation over a directory of equal-sized files,
//! offloaded by each design, with the computation run as a real Wasm task on the device CPU.
//!
//! This is where the two halves meet: `csd-hostfs` has the designs and `csd-runtime` runs
//! tasks; `TaskCompute` runs a task over the bytes a design's device side read.

use anyhow::Context as _;
use csd_device::rng::SimRng;
use csd_device::{DataMode, Device, Profile};
use csd_hostfs::fs::{HostFs, NewFile};
use csd_hostfs::ndp::{
    BytesStamp, Computed, DesignKind, NdpCompute, NdpRequest, OffloadDesign, StampedResults,
};
use csd_hostfs::perms::{Cred, Perms};
use csd_runtime::{IscContext, Task, TaskEngine};
use serde::Serialize;
use std::sync::Arc;

use crate::tasks::{ResolvedTask, Resolver};
pub use csd_traces::report::NdpDesign;
pub use csd_traces::spec::Content;

/// The LightFS Table III applications.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
pub enum App {
    #[serde(rename = "stats32")]
    Stats32,
    #[serde(rename = "stats64")]
    Stats64,
    #[serde(rename = "knn")]
    Knn,
    /// Grep on the device's embedded CPU (Grep-ARM).
    #[serde(rename = "grep")]
    Grep,
    /// Grep on the grep accelerator (Grep-ACC).
    #[serde(rename = "grep-accel")]
    GrepAccel,
    /// Grep-ARM with the paper's byte-wise matcher.
    #[serde(rename = "grep-bytewise")]
    GrepBytewise,
    /// KNN with the paper's binary query (no JSON to parse).
    #[serde(rename = "knn-bin")]
    KnnBin,
}

impl App {
    pub fn task(self) -> &'static str {
        match self {
            App::Stats32 => "stats32",
            App::Stats64 => "stats64",
            App::Knn => "knn",
            App::Grep => "grep",
            App::GrepAccel => "grep-accel",
            App::GrepBytewise => "grep-bytewise",
            App::KnnBin => "knn-bin",
        }
    }

    /// The task's arguments.
    pub fn args(self) -> Vec<u8> {
        match self {
            App::Knn => {
                let query: Vec<f32> = (0..csd_kernels::KNN_DIM).map(|i| i as f32 / 7.0).collect();
                serde_json::json!({ "query": query, "k": 10 })
                    .to_string()
                    .into_bytes()
            }
            App::KnnBin => (0..csd_kernels::KNN_DIM)
                .flat_map(|i| (i as f32 / 7.0).to_le_bytes())
                .chain(10u32.to_le_bytes())
                .collect(),
            App::Grep | App::GrepAccel | App::GrepBytewise => br#"{"pattern":"ERROR"}"#.to_vec(),
            App::Stats32 | App::Stats64 => Vec::new(),
        }
    }

    /// The kind of synthetic file its application works on: integers for STATS, real
    /// floats for KNN, text with matches for grep.
    pub fn content_kind(self) -> Content {
        match self {
            App::Knn | App::KnnBin => Content::Floats,
            App::Grep | App::GrepAccel | App::GrepBytewise => Content::Text,
            App::Stats32 | App::Stats64 => Content::Integers,
        }
    }

    /// `bytes` of deterministic file contents the application can work on.
    pub fn content(self, bytes: usize, rng: &mut SimRng) -> Vec<u8> {
        generate(self.content_kind(), bytes, rng)
    }

    /// The built-in application `reference` names, if it names one.
    pub fn named(reference: &str) -> Option<App> {
        <App as clap::ValueEnum>::value_variants()
            .iter()
            .copied()
            .find(|a| a.task() == reference)
    }
}

/// `bytes` of seeded file contents of `kind`: random integers, real floats (random bits
/// would be NaNs), or log-like text with matches for grep's `ERROR`.
pub fn generate(kind: Content, bytes: usize, rng: &mut SimRng) -> Vec<u8> {
    match kind {
        // Word by word into a buffer of known size, then cut: byte by byte through
        // `flat_map(..).take(..)` this was most of a small NDP run's wall time.
        Content::Floats => words(bytes, || {
            ((rng.below(2000) as f32) / 10.0 - 100.0).to_le_bytes()
        }),
        Content::Text => {
            let words: [&[u8]; 6] = [
                b"INFO ",
                b"request ",
                b"served ",
                b"ok\n",
                b"ERROR ",
                b"42 ",
            ];
            let mut out = Vec::with_capacity(bytes + 16);
            while out.len() < bytes {
                out.extend_from_slice(words[rng.below(words.len() as u64) as usize]);
            }
            out.truncate(bytes);
            out
        }
        Content::Integers => words(bytes, || rng.next_u64().to_le_bytes()),
    }
}

/// `bytes` bytes made of the `W`-byte words `next` gives, the last one cut short.
///
/// Into a buffer of the final size, word by word: appending each word checked the capacity
/// every 4 or 8 bytes, which made `csd ndp` over 200 × 256 KiB files take 1.16× as long.
fn words<const W: usize>(bytes: usize, mut next: impl FnMut() -> [u8; W]) -> Vec<u8> {
    let mut out = vec![0u8; bytes.div_ceil(W) * W];
    for word in out.chunks_exact_mut(W) {
        word.copy_from_slice(&next());
    }
    out.truncate(bytes);
    out
}

/// The task of an NDP request: a built-in application or any task reference, with its
/// arguments and the kind of synthetic file it works on.
pub struct NdpTask {
    /// How the run named it (`stats64`, `mytask`, `./t.wasm`).
    pub reference: String,
    pub task: ResolvedTask,
    pub args: Vec<u8>,
    pub content: Content,
}

impl NdpTask {
    /// `reference` resolved; a built-in application brings its own arguments and content,
    /// which `args` and `content` override; any other task gets no arguments and text.
    pub fn new(
        reference: &str,
        args: Option<&str>,
        content: Option<Content>,
        resolver: &Resolver<'_>,
    ) -> anyhow::Result<NdpTask> {
        let app = App::named(reference);
        Ok(NdpTask {
            reference: reference.to_string(),
            task: resolver.resolve(reference)?,
            args: match (args, app) {
                (Some(a), _) => a.as_bytes().to_vec(),
                (None, Some(app)) => app.args(),
                (None, None) => Vec::new(),
            },
            content: content.unwrap_or(app.map_or(Content::Text, App::content_kind)),
        })
    }

    /// The computation on the device CPU model.
    pub fn compute(
        &self,
        engine: Arc<TaskEngine>,
        profile: &Profile,
    ) -> anyhow::Result<TaskCompute> {
        TaskCompute::new(
            engine,
            &self.task.name,
            &self.task.wasm,
            self.args.clone(),
            profile,
        )
    }
}

/// Runs a Wasm task on the device CPU model over data a design has read.
pub struct TaskCompute {
    engine: Arc<TaskEngine>,
    task: Task,
    ctx: IscContext,
    args_len: u64,
    profile: Profile,
    on_device: Memo,
    on_host: Memo,
    /// Whether a result is also kept by its bytes' hash, to be found from another device
    /// (another design, another point of a plan); see [`TaskCompute::within_one_device`].
    by_bytes: bool,
}

/// Results of a task already run, by file. Designs compare one operation over one data set,
/// and a warm measurement runs it twice, so a task meets the same bytes again and again. A
/// task is deterministic (its fuel, so its modelled time, and its result depend only on its
/// arguments and input), so a result is reused, not recomputed: most of `csd ndp --design
/// all`'s and `csd repro lightfs`'s time was the same tasks over the same files.
///
/// Keyed by path, length and a 64-bit hash of the bytes under this process's random key: a
/// wrong reuse needs another content of the same path and length to collide, one chance in
/// 2^64 per lookup (hardware errs more often), and no input can aim for it. A second hash
/// cost a cheap task (stats64) as much as the reuse saved. Failures are not kept (a
/// wall-clock abort is not deterministic), and a task's log lines appear once.
///
/// A result is also kept under the [`BytesStamp`] of the read that took its bytes, when the
/// design gives one: the measured run of a warm measurement then finds it by stamp and takes
/// no bytes at all, where it read and hashed every file a second time.
#[derive(Default)]
struct Memo {
    key: foldhash::quality::RandomState,
    done: std::collections::HashMap<(String, usize, u64), Computed>,
    /// By the stamp of the read that took its bytes.
    stamped: StampedResults,
    kept_bytes: usize,
    /// Tasks actually run, not found again.
    runs: usize,
}

/// What a [`Memo`] may hold: past this, results are computed and not kept.
const MEMO_BYTES: usize = 64 << 20;

impl Memo {
    fn key(&self, path: &str, data: &[u8]) -> (String, usize, u64) {
        use std::hash::BuildHasher;
        (path.to_string(), data.len(), self.key.hash_one(data))
    }

    /// The result for `key`, computing and keeping it if it is new; with no key (bytes not
    /// hashed), computed and not kept by bytes.
    fn get_or(
        &mut self,
        key: Option<(String, usize, u64)>,
        run: impl FnOnce() -> Result<Computed, String>,
    ) -> Result<Computed, String> {
        if let Some(c) = key.as_ref().and_then(|k| self.done.get(k)) {
            return Ok(c.clone());
        }
        let c = run()?;
        self.runs += 1;
        let Some(key) = key else {
            return Ok(c);
        };
        let bytes = key.0.len() + c.ret.len() + 64;
        if self.kept_bytes + bytes <= MEMO_BYTES {
            self.kept_bytes += bytes;
            self.done.insert(key, c.clone());
        }
        Ok(c)
    }

    /// Keeps `c` under `stamp` too, within the same bound.
    fn stamp(&mut self, path: &str, stamp: BytesStamp, c: &Computed) {
        let bytes = path.len() + stamp.heap_bytes() + c.ret.len() + 96;
        if self.kept_bytes + bytes <= MEMO_BYTES {
            self.kept_bytes += bytes;
            self.stamped.keep(path, stamp, c.clone());
        }
    }
}

impl TaskCompute {
    pub fn new(
        engine: Arc<TaskEngine>,
        name: &str,
        wasm: &[u8],
        args: Vec<u8>,
        profile: &Profile,
    ) -> anyhow::Result<TaskCompute> {
        let task = engine
            .load(name, wasm)
            .with_context(|| format!("loading task '{name}'"))?;
        Ok(TaskCompute {
            engine,
            task,
            args_len: args.len() as u64,
            ctx: IscContext::new().args(args),
            profile: profile.clone(),
            on_device: Memo::default(),
            on_host: Memo::default(),
            by_bytes: true,
        })
    }

    /// For a run whose reads all come from one device (one design at one point, as a sweep
    /// point is): results are kept by stamp only, so the bytes a stamped read takes are not
    /// hashed too. Nothing else could meet them again.
    pub fn within_one_device(mut self) -> Self {
        self.by_bytes = false;
        self
    }

    /// The task over `data` on the device, found again by `key` if it has one.
    fn on_device_keyed(
        &mut self,
        key: Option<(String, usize, u64)>,
        path: &str,
        data: Vec<u8>,
    ) -> Result<Computed, String> {
        let task = (&*self.engine, &self.task, &self.ctx);
        let p = &self.profile;
        self.on_device.get_or(key, || {
            run_on(task, path, data, &p.device_cpu, &p.accelerators)
        })
    }
}

/// Runs `task` over one file's bytes on `cpu` with `accelerators`.
fn run_on(
    (engine, task, ctx): (&TaskEngine, &Task, &IscContext),
    path: &str,
    data: Vec<u8>,
    cpu: &csd_device::DeviceCpu,
    accelerators: &csd_device::Accelerators,
) -> Result<Computed, String> {
    let report = engine
        .run_staged(task, vec![(path.to_string(), data)], ctx, cpu, accelerators)
        .map_err(|e| e.to_string())?;
    Ok(Computed {
        compute_ns: report.breakdown.compute_ns,
        ret: report.ret,
    })
}

impl NdpCompute for TaskCompute {
    fn compute(&mut self, path: &str, data: Vec<u8>) -> Result<Computed, String> {
        let key = self.on_device.key(path, &data);
        self.on_device_keyed(Some(key), path, data)
    }

    fn recall(&mut self, path: &str, stamp: &BytesStamp) -> Option<Computed> {
        self.on_device.stamped.get(path, stamp)
    }

    fn compute_stamped(
        &mut self,
        path: &str,
        stamp: Option<BytesStamp>,
        data: Vec<u8>,
    ) -> Result<Computed, String> {
        let Some(stamp) = stamp else {
            return self.compute(path, data);
        };
        let key = self.by_bytes.then(|| self.on_device.key(path, &data));
        let c = self.on_device_keyed(key, path, data)?;
        self.on_device.stamp(path, stamp, &c);
        Ok(c)
    }

    /// The same task on the profile's host CPU, with no accelerator (the host has none).
    fn compute_on_host(&mut self, path: &str, data: Vec<u8>) -> Result<Computed, String> {
        let Some(ns_per_fuel) = self.profile.host.cpu_ns_per_fuel else {
            return Err(format!(
                "profile '{}' does not characterise its host CPU (host.cpu_ns_per_fuel), so the \
                 host baseline cannot be modelled on it",
                self.profile.name
            ));
        };
        let cpu = csd_device::DeviceCpu {
            model: "host CPU".into(),
            ns_per_fuel,
            ..self.profile.device_cpu.clone()
        };
        let key = self.on_host.key(path, &data);
        let task = (&*self.engine, &self.task, &self.ctx);
        self.on_host.get_or(Some(key), || {
            run_on(task, path, data, &cpu, &csd_device::Accelerators::default())
        })
    }

    fn args_bytes(&self) -> u64 {
        self.args_len
    }
}

/// The owner of the benchmark's files.
pub const OWNER: Cred = Cred {
    uid: 1000,
    gid: 1000,
};
pub const OWNER_PERMS: Perms = Perms {
    uid: 1000,
    gid: 1000,
    mode: 0o755,
};
/// Where the data set lives on the device.
pub const DATA_DIR: &str = "/data";

/// Files to place: name and contents.
pub type DataSet = Vec<(String, Vec<u8>)>;

/// `count` files of `size` bytes for `app`, seeded.
pub fn synthetic(app: App, count: usize, size: usize, seed: u64) -> DataSet {
    synthetic_of(app.content_kind(), count, size, seed)
}

/// `count` files of `size` bytes of `content`, seeded.
pub fn synthetic_of(content: Content, count: usize, size: usize, seed: u64) -> DataSet {
    let mut rng = SimRng::new(seed);
    (0..count)
        .map(|i| (file_name(i), generate(content, size, &mut rng)))
        .collect()
}

fn file_name(i: usize) -> String {
    format!("f{i:05}")
}

/// The files an NDP request runs over: a data set held in memory, or synthetic files (as
/// [`synthetic_of`] makes them) made one at a time as they are placed. A run of one design
/// needs no copy of the set: a sweep's point writes and reads back 25 MB less, and a fresh
/// worker faults 25 MB less in.
#[derive(Clone, Copy)]
pub enum Files<'a> {
    Set(&'a DataSet),
    Synthetic {
        content: Content,
        count: usize,
        size: usize,
        seed: u64,
    },
}

/// A fresh device and file system holding `files` in [`DATA_DIR`], with `design`
/// initialised.
pub fn prepare(
    profile: &Profile,
    files: Files,
    kind: DesignKind,
) -> anyhow::Result<(HostFs, Box<dyn OffloadDesign>)> {
    let device = Device::new(profile, DataMode::Payloads)?;
    let mut fs = HostFs::format(device, OWNER_PERMS)?;
    fs.mkdir(DATA_DIR, OWNER_PERMS, OWNER)?;
    // As `cp` and `sync` leave a data set (and a replay the files its trace finds).
    let placed = match files {
        Files::Set(data) => {
            let paths: Vec<String> = data
                .iter()
                .map(|(name, _)| format!("{DATA_DIR}/{name}"))
                .collect();
            let files = paths
                .iter()
                .zip(data)
                .map(|(path, (_, bytes))| (path.as_str(), NewFile::Bytes(bytes)));
            fs.import_all(files, OWNER_PERMS, OWNER)
        }
        Files::Synthetic {
            content,
            count,
            size,
            seed,
        } => {
            let paths: Vec<String> = (0..count)
                .map(|i| format!("{DATA_DIR}/{}", file_name(i)))
                .collect();
            let mut rng = SimRng::new(seed);
            let files = paths.iter().map(|path| {
                (
                    path.as_str(),
                    NewFile::Owned(generate(content, size, &mut rng)),
                )
            });
            fs.import_all(files, OWNER_PERMS, OWNER)
        }
    };
    placed.context("placing the data set")?;
    let mut design = kind.build();
    design.init(&mut fs, DATA_DIR, OWNER)?;
    // The data set was placed long before it is processed: on the flash, not in the
    // firmware's data buffer (the host's caches stay as `cp` left them).
    fs.device_mut().settle_data_buffer();
    Ok((fs, design))
}

/// Runs the operation "process every file of [`DATA_DIR`]" under one design: warm (after a
/// first, unmeasured run) or cold (every metadata cache dropped first).
pub fn measure(
    profile: &Profile,
    files: Files,
    kind: DesignKind,
    compute: &mut dyn NdpCompute,
    cold: bool,
) -> anyhow::Result<NdpDesign> {
    let (mut fs, mut design) = prepare(profile, files, kind)?;
    let req = NdpRequest {
        paths: vec![DATA_DIR.to_string()],
        who: OWNER,
    };
    if cold {
        design.drop_caches(&mut fs);
    } else {
        design.offload(&mut fs, &req, compute)?;
    }
    let outcome = design
        .offload(&mut fs, &req, compute)
        .with_context(|| format!("offloading under {kind}"))?;
    Ok(NdpDesign {
        design: kind,
        summary: outcome.summary(),
        footprint: design.footprint(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built word by word, the data sets are the bytes the seeded definition gives: each word
    /// from the generator in turn, the last one cut at the file's size.
    #[test]
    fn generated_files_are_the_seeded_words_cut_at_their_size() {
        for bytes in [0usize, 1, 7, 8, 4099] {
            let mut rng = SimRng::new(9);
            let floats: Vec<u8> = (0..bytes.div_ceil(4))
                .flat_map(|_| ((rng.below(2000) as f32) / 10.0 - 100.0).to_le_bytes())
                .take(bytes)
                .collect();
            assert_eq!(
                generate(Content::Floats, bytes, &mut SimRng::new(9)),
                floats
            );
            let mut rng = SimRng::new(9);
            let ints: Vec<u8> = (0..bytes.div_ceil(8))
                .flat_map(|_| rng.next_u64().to_le_bytes())
                .take(bytes)
                .collect();
            assert_eq!(
                generate(Content::Integers, bytes, &mut SimRng::new(9)),
                ints
            );
        }
    }
}

#[cfg(test)]
mod memo_tests {
    use super::*;

    fn engine() -> Arc<TaskEngine> {
        Arc::new(
            TaskEngine::new(csd_runtime::EngineConfig {
                cache_dir: None,
                ..Default::default()
            })
            .unwrap(),
        )
    }

    /// A reused result is what running the task again gives; other bytes, another path or
    /// the host CPU are other results.
    #[test]
    fn a_task_over_the_same_bytes_is_run_once_and_gives_the_same_result() {
        let engine = engine();
        let profile = Profile::load("cosmos-plus").unwrap();
        let wasm = crate::builtin::task("stats64").unwrap();
        let mut memo = TaskCompute::new(engine.clone(), "stats64", wasm, vec![], &profile).unwrap();
        let data = generate(Content::Integers, 16 << 10, &mut SimRng::new(3));
        let first = memo.compute("/data/a", data.clone()).unwrap();
        assert_eq!(memo.on_device.done.len(), 1);
        assert_eq!(memo.compute("/data/a", data.clone()).unwrap(), first);
        assert_eq!(memo.on_device.done.len(), 1, "the second run was a reuse");
        let mut fresh = TaskCompute::new(engine, "stats64", wasm, vec![], &profile).unwrap();
        assert_eq!(fresh.compute("/data/a", data.clone()).unwrap(), first);
        let mut other = data.clone();
        other[100] ^= 1;
        assert_ne!(memo.compute("/data/a", other).unwrap().ret, first.ret);
        memo.compute("/data/b", data.clone()).unwrap();
        let host = memo.compute_on_host("/data/a", data).unwrap();
        assert!(host.compute_ns < first.compute_ns, "the host CPU is faster");
        assert_eq!((memo.on_device.done.len(), memo.on_host.done.len()), (3, 1));
    }

    /// A warm measurement of one design on one device runs each file's task once: its
    /// second run finds every result by the stamp of its read, without hashing any bytes,
    /// and reports what a run that hashes them reports.
    #[test]
    fn one_design_runs_each_task_once_and_reports_as_a_shared_memo_does() {
        let engine = engine();
        let profile = Profile::load("cosmos-plus").unwrap();
        let wasm = crate::builtin::task("stats64").unwrap();
        let task = || TaskCompute::new(engine.clone(), "stats64", wasm, vec![], &profile);
        let files = || Files::Synthetic {
            content: Content::Integers,
            count: 6,
            size: 40 << 10,
            seed: 5,
        };
        for kind in DesignKind::ALL {
            let mut alone = task().unwrap().within_one_device();
            let mut shared = task().unwrap();
            let a = measure(&profile, files(), kind, &mut alone, false).unwrap();
            let b = measure(&profile, files(), kind, &mut shared, false).unwrap();
            assert_eq!(alone.on_device.runs, 6, "{kind}: the warm run recalled");
            assert!(alone.on_device.done.is_empty(), "{kind}: nothing hashed");
            assert_eq!(shared.on_device.runs, 6, "{kind}");
            assert_eq!(
                serde_json::to_string(&a.summary).unwrap(),
                serde_json::to_string(&b.summary).unwrap(),
                "{kind}"
            );
        }
    }
}
