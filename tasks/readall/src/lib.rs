//! Reads every registered file in `chunk`-byte requests with `depth` of them in flight and computes nothing: `csd bench tasks` compares its virtual time
//! with the profile's internal read bandwidth. Args: `{"chunk": bytes, "depth": n}`
//! (defaults 128 KiB, 32).
use csd_sdk::{serde_json, task, Context, Result};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default = "default_chunk")]
    chunk: usize,
    #[serde(default = "default_depth")]
    depth: usize,
}

fn default_chunk() -> usize {
    128 << 10
}

fn default_depth() -> usize {
    32
}

#[task]
fn run(ctx: Context) -> Result<()> {
    let args: Args = ctx.args_json()?;
    let chunk = args.chunk.clamp(1, 64 << 20);
    let depth = args.depth.clamp(1, csd_sdk::MAX_QUEUE_DEPTH);
    // One buffer per request in flight, reused as each completes: a sliding window of
    // `depth` requests, memory depth × chunk.
    let mut ring: Vec<(Vec<u8>, Option<csd_sdk::Pending>)> =
        (0..depth).map(|_| (vec![0u8; chunk], None)).collect();
    let mut bytes = 0u64;
    for file in ctx.files() {
        let size = file.size();
        let mut offset = 0u64;
        let mut slot = 0usize;
        loop {
            let (buf, pending) = &mut ring[slot];
            if let Some(p) = pending.take() {
                bytes += p.bytes() as u64;
                p.wait();
            }
            if offset < size {
                *pending = Some(file.submit_read(offset, buf));
                offset += chunk as u64;
            } else if ring.iter().all(|(_, p)| p.is_none()) {
                break;
            }
            slot = (slot + 1) % depth;
        }
    }
    csd_sdk::ret_json(&serde_json::json!({ "bytes": bytes }))
}
