//! ISPFS's word query: up to four keywords, whole-word matches, counts and first addresses,
//! per registered file. A file over one chunk is streamed, as ISPFS's engine streams it.
use csd_sdk::{bail, serde_json, task, Context, Result};

#[derive(serde::Deserialize)]
struct Args {
    words: Vec<String>,
    #[serde(default = "default_max")]
    max_addresses: usize,
}

fn default_max() -> usize {
    8
}

#[task]
fn run(ctx: Context) -> Result<()> {
    let args: Args = ctx.args_json()?;
    if args.words.is_empty() || args.words.len() > csd_kernels::MAX_QUERY_WORDS {
        bail!(
            "a word query takes 1 to {} words, got {}",
            csd_kernels::MAX_QUERY_WORDS,
            args.words.len()
        );
    }
    let keys: Vec<&[u8]> = args.words.iter().map(|w| w.as_bytes()).collect();
    let mut files = Vec::new();
    for file in ctx.files() {
        let mut query = csd_kernels::WordQueryStream::new(&keys, args.max_addresses);
        file.scan(csd_kernels::STREAM_CHUNK, |piece| query.feed(piece))?;
        let hits = query.finish();
        let words: Vec<_> = args
            .words
            .iter()
            .zip(hits)
            .map(|(w, h)| serde_json::json!({ "word": w, "count": h.count, "addresses": h.addresses }))
            .collect();
        files.push(serde_json::json!({ "words": words }));
    }
    csd_sdk::ret_json(&serde_json::json!({ "files": files }))
}
