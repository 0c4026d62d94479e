//! Like `grep`, but the device's grep engine does the search (LightFS's Grep-ACC): the task
//! only asks and formats the answer.
use csd_sdk::{accel, bail, serde_json, task, Context, Result};

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
        let (count, offsets) = accel::grep(&file, args.pattern.as_bytes(), args.max_offsets);
        total += count;
        files.push(serde_json::json!({ "count": count, "offsets": offsets }));
    }
    csd_sdk::ret_json(&serde_json::json!({ "total": total, "files": files }))
}
