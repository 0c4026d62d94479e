//! CRC-32 of every registered file, streamed through slicing-by-8 (the algorithm of the
//! Linux kernel's generic `crc32_le`, and of the CISC-op `crc32` stage): in Wasm it takes a
//! quarter fewer instructions per byte than crc32fast's slicing-by-16.
use csd_sdk::{serde_json, task, Context, Result};

#[task]
fn run(ctx: Context) -> Result<()> {
    let mut files = Vec::new();
    for file in ctx.files() {
        let mut crc = csd_kernels::Crc32Slice8::new();
        let mut bytes = 0u64;
        file.for_each_chunk(csd_kernels::STREAM_CHUNK, |_, chunk| {
            crc.update(chunk);
            bytes += chunk.len() as u64;
        });
        files.push(serde_json::json!({ "crc32": crc.finalize(), "bytes": bytes }));
    }
    csd_sdk::ret_json(&serde_json::json!({ "files": files }))
}
