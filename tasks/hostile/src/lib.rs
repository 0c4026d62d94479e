//! A task that misbehaves on request, to test the sandbox with real Rust behaviour:
//! `{"do": "panic" | "bomb" | "loop" | "recurse" | "big-frame" | "fail" | "write-then-fail"}`.
use csd_sdk::{bail, task, Context, Result};

#[derive(serde::Deserialize)]
struct Args {
    #[serde(rename = "do")]
    action: String,
}

#[task]
fn run(ctx: Context) -> Result<()> {
    let args: Args = ctx.args_json()?;
    match args.action.as_str() {
        "panic" => {
            let v = vec![1, 2, 3];
            let i = v.len() + std::hint::black_box(4);
            csd_sdk::log!("about to index {i}");
            let _ = v[i];
        }
        "bomb" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 16 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        "loop" => {
            let mut x = 0u64;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        "recurse" => {
            std::hint::black_box(depth(std::hint::black_box(1)));
        }
        "big-frame" => big_frame(),
        "fail" => bail!("refusing on purpose"),
        "write-then-fail" => {
            // Leaves a partial output behind, then fails: a transaction must roll it back.
            let out = ctx.file(0)?;
            out.write_at(0, b"partial output");
            bail!("failing after a write");
        }
        other => bail!(
            "unknown action {other:?} (expected panic, bomb, loop, recurse, big-frame, fail or write-then-fail)"
        ),
    }
    Ok(())
}

fn depth(n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    1 + depth(std::hint::black_box(n + 1))
}

/// A frame larger than the task's 64 KiB stack. The stack sits below the data in linear
/// memory, so the frame would begin below address 0: its first store traps. (Its own
/// function: in `run`, every action would pay for the frame.)
#[inline(never)]
fn big_frame() {
    let mut frame = [0u8; 128 << 10];
    std::hint::black_box(&mut frame);
}
