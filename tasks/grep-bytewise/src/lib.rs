//! Counts `pattern` in every registered file with a byte-wise matcher: LightFS's Grep-ARM
//! algorithm (Table III), for comparing the model with the paper. `grep` is the same task
//! with memchr's search. Same arguments and result as `grep`.
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
        let data = file.read_to_end()?;
        let (count, offsets) =
            csd_kernels::grep_bytewise(&data, args.pattern.as_bytes(), args.max_offsets);
        total += count;
        files.push(serde_json::json!({ "count": count, "offsets": offsets }));
    }
    csd_sdk::ret_json(&serde_json::json!({ "total": total, "files": files }))
}
