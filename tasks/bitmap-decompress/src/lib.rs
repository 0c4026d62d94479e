//! Expands the word-aligned RLE bitmap in file 0 into file 1 (see
//! `csd_kernels::rle_bitmap_decompress` for the format), appending 64 KiB at a time.
use csd_sdk::{bail, serde_json, task, Context, Result};

#[task]
fn run(ctx: Context) -> Result<()> {
    if ctx.file_count() != 2 {
        bail!(
            "register the compressed bitmap (r) and the output file (w), got {} files",
            ctx.file_count()
        );
    }
    let (input, output) = (ctx.file(0)?, ctx.file(1)?);
    let compressed = input.read_to_end()?;
    // Output pieces are written behind: decompression goes on while they are programmed.
    let mut out = output.appender(16);
    let written = csd_kernels::rle_bitmap_decompress(&compressed, |piece| out.append(piece))
        .map_err(csd_sdk::Error::msg)?;
    out.finish();
    csd_sdk::ret_json(&serde_json::json!({ "bytes_in": compressed.len(), "bytes_out": written }))
}
