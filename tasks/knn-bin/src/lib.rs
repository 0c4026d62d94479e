//! The `k` vectors nearest to a query across every registered file of 128-dim f32 vectors,
//! with the query passed as LightFS's KNN takes it: 128 little-endian f32 (512 bytes), then
//! an optional little-endian u32 `k` (default 10), and the distance summed dimension by
//! dimension as the paper's loop does. `knn` is the fast variant: a JSON query and eight
//! accumulators.
//!
//! The result is binary too, nearest first: per neighbour 16 bytes, the file's handle (u32),
//! the vector's index in it (u64) and its L2 distance (f32), all little-endian. A JSON
//! result cost more than the distances on a 16 KiB file (about 6,900 fuel per neighbour,
//! 155,257 fuel in all against 86,361 now), text formatting the paper's task, which hands
//! its distances to a C host, does not do; `csd repro` times this task against Table III.
use csd_sdk::{bail, task, Context, Result};

#[task]
fn run(ctx: Context) -> Result<()> {
    let args = ctx.args();
    let dim = csd_kernels::KNN_DIM;
    if args.len() != dim * 4 && args.len() != dim * 4 + 4 {
        bail!(
            "query is {} bytes; expected {} (128 f32) or {} (and a u32 k)",
            args.len(),
            dim * 4,
            dim * 4 + 4
        );
    }
    let query: Vec<f32> = args[..dim * 4]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let k = match args.get(dim * 4..) {
        Some(b) if b.len() == 4 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize,
        _ => 10,
    };
    let mut all = Vec::new();
    for file in ctx.files() {
        let data = file.read_to_end()?;
        for n in csd_kernels::knn_in_order(&data, &query, k) {
            all.push((n.distance, file.handle(), n.index));
        }
    }
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    all.truncate(k);
    let mut out = Vec::with_capacity(all.len() * 16);
    for (distance, file, index) in all {
        out.extend_from_slice(&(file as u32).to_le_bytes());
        out.extend_from_slice(&index.to_le_bytes());
        out.extend_from_slice(&distance.to_le_bytes());
    }
    csd_sdk::ret(&out);
    Ok(())
}
