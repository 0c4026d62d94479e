//! LSM compaction (TxISC §V-C's LevelDB case, with fixed 32-byte records): merges the sorted
//! runs in files `0..inputs` (oldest first) into new sorted files, the remaining registered
//! files, each at most `max_output_bytes`. Returns which outputs it filled. As a transaction,
//! either every output is written or none is.
use csd_sdk::{bail, serde_json, task, Context, Result};

#[derive(serde::Deserialize)]
struct Args {
    inputs: usize,
    #[serde(default = "default_max")]
    max_output_bytes: usize,
}

fn default_max() -> usize {
    2 << 20
}

#[task]
fn run(ctx: Context) -> Result<()> {
    let args: Args = ctx.args_json()?;
    let outputs = ctx.file_count().saturating_sub(args.inputs);
    if args.inputs == 0 || outputs == 0 {
        bail!(
            "register the input runs then the output files: {} files for {} inputs",
            ctx.file_count(),
            args.inputs
        );
    }
    let per_file =
        (args.max_output_bytes / csd_kernels::RECORD_BYTES).max(1) * csd_kernels::RECORD_BYTES;
    // The runs are read together, so the device serves them on all its dies at once.
    let files = (0..args.inputs)
        .map(|i| ctx.file(i))
        .collect::<Result<Vec<_>>>()?;
    let mut runs = files
        .iter()
        .map(|f| {
            Ok(vec![
                0u8;
                usize::try_from(f.size())
                    .map_err(|_| csd_sdk::Error::msg("run too large"))?
            ])
        })
        .collect::<Result<Vec<_>>>()?;
    let mut requests: Vec<_> = files
        .iter()
        .zip(runs.iter_mut())
        .map(|(f, buf)| (*f, 0u64, buf.as_mut_slice()))
        .collect();
    csd_sdk::read_many(&mut requests, csd_sdk::MAX_QUEUE_DEPTH);
    let slices: Vec<&[u8]> = runs.iter().map(Vec::as_slice).collect();
    let mut merged = Vec::new();
    let read = csd_kernels::compact_runs(&slices, |r| merged.extend_from_slice(r))
        .map_err(csd_sdk::Error::msg)?;
    // Output files are written as they fill, like LevelDB's compaction; running out of
    // registered outputs fails the task after some were written (a transaction undoes them).
    let chunks = merged.len().div_ceil(per_file);
    for (i, chunk) in merged.chunks(per_file).enumerate() {
        if i == outputs {
            bail!(
                "{} bytes of output need {chunks} files of {per_file} bytes, {outputs} registered",
                merged.len()
            );
        }
        // Written behind: the next output is formatted while this one is programmed.
        let _ = ctx.file(args.inputs + i)?.submit_write(Some(0), chunk);
    }
    csd_sdk::wait_all();
    csd_sdk::ret_json(&serde_json::json!({
        "records_in": read,
        "records_out": merged.len() / csd_kernels::RECORD_BYTES,
        "outputs_used": chunks,
    }))
}
