//! Sums every registered file as little-endian u32s, streaming 1 MiB at a time.
use csd_sdk::{task, Context, Result};

#[task]
fn run(ctx: Context) -> Result<()> {
    let (mut sum, mut bytes) = (0u64, 0u64);
    for file in ctx.files() {
        file.for_each_chunk(csd_kernels::STREAM_CHUNK, |_, chunk| {
            sum = sum.wrapping_add(csd_kernels::stats32(chunk));
            bytes += chunk.len() as u64;
        });
    }
    csd_sdk::ret_json(&serde_json::json!({ "files": ctx.file_count(), "bytes": bytes, "sum": sum }))
}
use csd_sdk::serde_json;
