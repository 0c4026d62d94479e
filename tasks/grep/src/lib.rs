//! Counts `pattern` in every registered file and reports the first offsets (memchr's memmem
//! does the searching: ordinary crates work inside tasks). Files are streamed, so one larger
//! than the device's memory is searched too, and the device reads ahead while it searches.
use csd_sdk::{bail, serde_json, task, Context, Result};

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
        let mut grep = csd_kernels::GrepStream::new(pattern, args.max_offsets);
        file.scan(csd_kernels::STREAM_CHUNK, |piece| grep.feed(piece))?;
        let (count, offsets) = grep.finish();
        total += count;
        files.push(serde_json::json!({ "count": count, "offsets": offsets }));
    }
    csd_sdk::ret_json(&serde_json::json!({ "total": total, "files": files }))
}
