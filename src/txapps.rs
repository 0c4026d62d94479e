//! TxISC §V-C's application case studies (Fig. 4–5): bitmap decompression, graph BFS and LSM
//! compaction, each run in the device as a transaction (`tx`), in the device without one
//! (`file`, FileISC), and host-only (the same task code on the host CPU model, its I/O over
//! NVMe and PCIe). Inputs are synthetic and seeded; sizes scale down from the paper's so the
//! default finishes in seconds.

use anyhow::Context;
use csd_device::rng::SimRng;
use csd_device::{DataMode, Profile};
use csd_runtime::{Csd, ExecMode, FileMode, IscContext, TaskEngine};
use std::sync::Arc;

pub use csd_traces::report::{AppRun, Placement, Sizes, TxApp as App};

/// Bytes of one sorted run to compact at the paper's scale.
const RUN_BYTES: u64 = 8 << 20;

/// Input sizes at `scale` of the paper's.
pub fn scaled_sizes(scale: f64) -> Sizes {
    let s = |x: f64| (x * scale).max(1.0);
    Sizes {
        bitmap_output_bytes: s(256.0 * 1048576.0) as u64,
        graph_nodes: s(4_847_571.0) as u32,
        graph_degree: 14,
        runs: 4,
        run_records: s(RUN_BYTES as f64 / csd_kernels::RECORD_BYTES as f64) as u32,
    }
}

/// One application's input files, its output registrations and arguments.
pub struct Workload {
    pub inputs: Vec<(String, Vec<u8>)>,
    pub outputs: Vec<String>,
    pub args: serde_json::Value,
    /// The arguments of the host-only run, where the host program's I/O differs.
    pub host_args: serde_json::Value,
    /// What the throughput counts (bytes of output, of graph, of runs).
    pub work_bytes: u64,
}

/// Builds `app`'s synthetic input, seeded.
// Long: one arm per application's seeded input.
pub fn workload(app: App, sizes: &Sizes, seed: u64) -> Workload {
    let mut rng = SimRng::new(seed);
    match app {
        App::BitmapDecompress => {
            // ~5 % of the output in literal words, the rest in fills of up to 127 words:
            // about the paper's 16:1.
            let mut words: Vec<u32> = Vec::new();
            let mut out = 0u64;
            while out < sizes.bitmap_output_bytes {
                if rng.below(100) < 17 {
                    let n = 1 + rng.below(32) as u32;
                    words.push(n);
                    words.extend((0..n).map(|_| rng.below(u64::from(u32::MAX)) as u32 | 1));
                    out += 4 * u64::from(n);
                } else {
                    let n = 1 + rng.below(127) as u32;
                    words.push(0x8000_0000 | ((rng.below(2) as u32) << 30) | n);
                    out += 4 * u64::from(n);
                }
            }
            Workload {
                inputs: vec![("/bitmap.rle".into(), le_words(&words))],
                outputs: vec!["/bitmap.out".into()],
                args: serde_json::json!({}),
                host_args: serde_json::json!({}),
                work_bytes: out,
            }
        }
        App::Bfs => {
            let n = sizes.graph_nodes;
            let mut adj: Vec<Vec<u32>> = vec![Vec::new(); n as usize];
            for (u, list) in adj.iter_mut().enumerate() {
                let degree = rng.below(2 * u64::from(sizes.graph_degree) + 1);
                for _ in 0..degree {
                    // Half the edges stay near their source (communities), half go anywhere.
                    let v = if rng.below(2) == 0 {
                        (u as u64 + rng.below(1000)) % u64::from(n)
                    } else {
                        rng.below(u64::from(n))
                    };
                    list.push(v as u32);
                }
            }
            let bytes = csd_kernels::encode_csr(&adj);
            let work = bytes.len() as u64;
            Workload {
                inputs: vec![("/graph.csr".into(), bytes)],
                outputs: vec!["/graph.dist".into()],
                args: serde_json::json!({ "source": 0 }),
                host_args: serde_json::json!({ "source": 0 }),
                work_bytes: work,
            }
        }
        App::Compact => {
            let space = 3 * u64::from(sizes.run_records);
            let mut inputs = Vec::new();
            for r in 0..sizes.runs {
                let mut keys: Vec<u64> = (0..sizes.run_records).map(|_| rng.below(space)).collect();
                keys.sort_unstable();
                keys.dedup();
                let mut run = Vec::with_capacity(keys.len() * csd_kernels::RECORD_BYTES);
                for k in keys {
                    run.extend_from_slice(&k.to_le_bytes());
                    run.extend_from_slice(&[r as u8 + 1; csd_kernels::RECORD_BYTES - 8]);
                }
                inputs.push((format!("/sst/{r:06}.ldb"), run));
            }
            let total: u64 = inputs.iter().map(|(_, d)| d.len() as u64).sum();
            // LevelDB's max_file_size (at the default 1/16 scale the output fits in one).
            let max_output = 2u64 << 20;
            let outputs = (0..total.div_ceil(max_output) + 1)
                .map(|i| format!("/sst/out-{i:06}.ldb"))
                .collect();
            let args =
                serde_json::json!({ "inputs": inputs.len(), "max_output_bytes": max_output });
            // Host-only is LevelDB's own compaction, which syncs each finished table.
            let mut host_args = args.clone();
            host_args["sync_tables"] = true.into();
            Workload {
                args,
                host_args,
                inputs,
                outputs,
                work_bytes: total,
            }
        }
    }
}

fn le_words(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Runs `app` once per placement on fresh devices with the same input.
pub fn measure(
    app: App,
    sizes: &Sizes,
    profile: &Profile,
    engine: &Arc<TaskEngine>,
    seed: u64,
) -> anyhow::Result<Vec<AppRun>> {
    let w = workload(app, sizes, seed);
    let module = crate::builtin::task(app.task()).context("built-in task")?;
    let task = engine.load(app.task(), module)?;
    let mut out = Vec::new();
    for placement in [Placement::Tx, Placement::File, Placement::HostOnly] {
        let mut csd = Csd::new(profile, DataMode::Payloads, engine.clone())?;
        for (path, data) in &w.inputs {
            csd.import(path, data)?;
        }
        let mut ctx = IscContext::new();
        for (path, _) in &w.inputs {
            ctx = ctx.file(path, FileMode::Read);
        }
        for path in &w.outputs {
            ctx = ctx.file(path, FileMode::Write);
        }
        let args = match placement {
            Placement::HostOnly => &w.host_args,
            Placement::Tx | Placement::File => &w.args,
        };
        ctx = ctx.args(args.to_string().into_bytes());
        ctx = match placement {
            Placement::Tx => ctx.exec(ExecMode::Tx),
            Placement::File => ctx.exec(ExecMode::File),
            Placement::HostOnly => ctx.on_host(),
        };
        let r = csd
            .run(&task, &ctx)
            .with_context(|| format!("{} ({placement:?})", app.task()))?;
        let b = r.breakdown;
        let latency = r.latency_ns();
        out.push(AppRun {
            app,
            placement,
            latency_ns: latency,
            mb_per_s: w.work_bytes as f64 / (latency.max(1) as f64 / 1e9) / 1e6,
            breakdown: b,
            io_share: (b.total_ns() - b.compute_ns) as f64 / b.total_ns().max(1) as f64,
            result: r.ret_json().unwrap_or(serde_json::Value::Null),
        });
    }
    Ok(out)
}
