//! The `k` vectors nearest to `query` across every registered file of 128-dim f32 vectors.
//! Files are streamed: memory is bounded by `k`, not by the files.
use csd_sdk::{bail, serde_json, task, Context, Result};
use std::ops::ControlFlow;

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
        // A file that fits in one chunk is read whole (see the grep task).
        let nearest = if file.size() <= csd_kernels::STREAM_CHUNK as u64 {
            csd_kernels::knn(&file.read_to_end()?, &args.query, args.k)
        } else {
            let mut knn = csd_kernels::KnnStream::new(&args.query, args.k);
            file.try_for_each_chunk(csd_kernels::STREAM_CHUNK, |_, chunk| {
                knn.feed(chunk);
                Ok(ControlFlow::Continue(()))
            })?;
            knn.finish()
        };
        for n in nearest {
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
