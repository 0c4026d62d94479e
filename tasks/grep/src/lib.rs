//! Counts `pattern` in every registered file and reports the first offsets (memchr's memmem
//! does the searching: ordinary crates work inside tasks). Files are streamed, so one larger
//! than the device's memory is searched too, and the device reads ahead while it searches.
use csd_sdk::{bail, serde_json, task, Context, Result};
use std::ops::ControlFlow;

#[derive(serde::Deserialize)]
struct Args {
    pattern: String,
    #[serde(default = "default_max")]
    max_offsets: usize,
}

fn default_max() -> usize {
    16
}

#[task]
fn run(ctx: Context) -> Result<()> {
    let args: Args = ctx.args_json()?;
    if args.pattern.is_empty() {
        bail!("pattern must not be empty");
    }
    let mut files = Vec::new();
    let mut total = 0;
    for file in ctx.files() {
        let pattern = args.pattern.as_bytes();
        // A file that fits in one chunk is read whole: streaming would gain it no overlap
        // and cost it allocations, instructions its device time would count.
        let (count, offsets) = if file.size() <= csd_kernels::STREAM_CHUNK as u64 {
            csd_kernels::grep(&file.read_to_end()?, pattern, args.max_offsets)
        } else {
            let mut grep = csd_kernels::GrepStream::new(pattern, args.max_offsets);
            file.try_for_each_chunk(csd_kernels::STREAM_CHUNK, |_, chunk| {
                grep.feed(chunk);
                Ok(ControlFlow::Continue(()))
            })?;
            grep.finish()
        };
        total += count;
        files.push(serde_json::json!({ "count": count, "offsets": offsets }));
    }
    csd_sdk::ret_json(&serde_json::json!({ "total": total, "files": files }))
}
