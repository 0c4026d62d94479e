//! The `k` vectors nearest to `query` across every registered file of 128-dim f32 vectors.
//! Files are streamed: memory is bounded by `k`, not by the files.
use csd_sdk::{bail, serde_json, task, Context, Result};

#[derive(serde::Deserialize)]
struct Args {
    query: Vec<f32>,
    #[serde(default = "default_k")]
    k: usize,
}

fn default_k() -> usize {
    10
}

#[task]
fn run(ctx: Context) -> Result<()> {
    let args: Args = ctx.args_json()?;
    if args.query.len() != csd_kernels::KNN_DIM {
        bail!(
            "query has {} dimensions; expected {}",
            args.query.len(),
            csd_kernels::KNN_DIM
        );
    }
    let mut all = Vec::new();
    for file in ctx.files() {
        let mut knn = csd_kernels::KnnStream::new(&args.query, args.k);
        file.scan(csd_kernels::STREAM_CHUNK, |piece| knn.feed(piece))?;
        for n in knn.finish() {
            all.push((n.distance, file.handle(), n.index));
        }
    }
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    all.truncate(args.k);
    let neighbors: Vec<_> = all
        .iter()
        .map(|&(d, f, i)| serde_json::json!({ "file": f, "index": i, "distance": d }))
        .collect();
    csd_sdk::ret_json(&serde_json::json!({ "neighbors": neighbors }))
}
