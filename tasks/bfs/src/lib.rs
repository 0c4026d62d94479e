//! BFS over the CSR graph in file 0 from `source`; writes the distances (little-endian u32,
//! 0xFFFFFFFF = unreachable) to file 1 when one is registered. The graph is read as the
//! search reaches it, a 4 KiB page per synchronous read (TxISC §V-C: a pointer-chasing
//! workload with small, random I/Os), not loaded whole.
use csd_sdk::{serde_json, task, Context, Result};

#[derive(serde::Deserialize)]
struct Args {
    #[serde(default)]
    source: u32,
}

#[task]
fn run(ctx: Context) -> Result<()> {
    let args: Args = ctx.args_json()?;
    let file = ctx.file(0)?;
    let mut graph = csd_kernels::PagedCsr::open(file.size(), |offset, buf: &mut [u8]| {
        file.read_at(offset, buf)
    })
    .map_err(csd_sdk::Error::msg)?;
    let dist = csd_kernels::bfs(&mut graph, args.source).map_err(csd_sdk::Error::msg)?;
    if ctx.file_count() > 1 {
        let bytes: Vec<u8> = dist.iter().flat_map(|d| d.to_le_bytes()).collect();
        ctx.file(1)?.write_at(0, &bytes);
    }
    let reached = dist
        .iter()
        .filter(|&&d| d != csd_kernels::UNREACHABLE)
        .count();
    let max_depth = dist
        .iter()
        .filter(|&&d| d != csd_kernels::UNREACHABLE)
        .max()
        .copied()
        .unwrap_or(0);
    csd_sdk::ret_json(
        &serde_json::json!({ "nodes": graph.nodes, "reached": reached, "max_depth": max_depth, "page_reads": graph.reads }),
    )
}
