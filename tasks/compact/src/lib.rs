//! LSM compaction (TxISC §V-C's LevelDB case, with db_bench's default entries at a fixed
//! 124 bytes): merges the sorted runs in files `0..inputs` (oldest first) into new sorted
//! files, the remaining registered files, each at most `max_output_bytes`. Returns which
//! outputs it filled. As a transaction, either every output is written or none is.
use csd_sdk::{bail, serde_json, task, Context, Result};

#[derive(serde::Deserialize)]
struct Args {
    inputs: usize,
    #[serde(default = "default_max")]
    max_output_bytes: usize,
    /// Wait for each output table to be durable before merging on, as LevelDB's compaction
    /// does on a host file system (an `fdatasync` per finished table). In the device a
    /// transaction's commit makes the outputs durable together, so it is off by default.
    #[serde(default)]
    sync_tables: bool,
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
    // Output tables are written as they fill, like LevelDB's compaction: a full table is
    // submitted and the merge goes on while it is programmed. Running out of registered
    // outputs fails the task after some were written (a transaction undoes them).
    let tables = (args.inputs..ctx.file_count())
        .map(|i| ctx.file(i))
        .collect::<Result<Vec<_>>>()?;
    let mut table = Vec::with_capacity(per_file);
    let (mut used, mut out_bytes, mut overflow) = (0usize, 0u64, false);
    // Submits the filled table to the next output file; false when none is left.
    let mut flush = |table: &mut Vec<u8>| {
        let Some(file) = tables.get(used) else {
            return false;
        };
        let pending = file.submit_write(Some(0), table);
        if args.sync_tables {
            pending.wait();
        }
        used += 1;
        table.clear();
        true
    };
    let read = csd_kernels::compact_runs(&slices, |r| {
        if overflow {
            return;
        }
        table.extend_from_slice(r);
        out_bytes += r.len() as u64;
        if table.len() >= per_file {
            overflow = !flush(&mut table);
        }
    })
    .map_err(csd_sdk::Error::msg)?;
    if !overflow && !table.is_empty() {
        overflow = !flush(&mut table);
    }
    if overflow {
        csd_sdk::wait_all();
        bail!("the output does not fit in the {outputs} registered files of {per_file} bytes");
    }
    csd_sdk::wait_all();
    csd_sdk::ret_json(&serde_json::json!({
        "records_in": read,
        "records_out": out_bytes / csd_kernels::RECORD_BYTES as u64,
        "outputs_used": used,
    }))
}
