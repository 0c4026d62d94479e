//! CRC-32 of every registered file, streamed through crc32fast's hasher.
use csd_sdk::{serde_json, task, Context, Result};

#[task]
fn run(ctx: Context) -> Result<()> {
    let mut files = Vec::new();
    for file in ctx.files() {
        let mut hasher = crc32fast::Hasher::new();
        let mut bytes = 0u64;
        file.for_each_chunk(512 << 10, |_, chunk| {
            hasher.update(chunk);
            bytes += chunk.len() as u64;
        });
        files.push(serde_json::json!({ "crc32": hasher.finalize(), "bytes": bytes }));
    }
    csd_sdk::ret_json(&serde_json::json!({ "files": files }))
}
