//! Does nothing: `csd bench tasks` uses it to measure the cost of one invocation.
use csd_sdk::{task, Context, Result};

#[task]
fn run(_ctx: Context) -> Result<()> {
    Ok(())
}
