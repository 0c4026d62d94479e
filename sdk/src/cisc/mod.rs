//! CISC ops (FusionFS §1): a vector of at most [`MAX_COMMANDS`] file-I/O and data-processing
//! commands that the host submits to the device's firmware file system as one request.
//!
//! This is FusionFS's *UserLib* side and the ABI reference: [`CiscOp`] is what an application
//! builds ([`CiscBuilder`], or a pre-built op such as [`append_crc_write`]), and
//! [`CiscOp::encode`] lays it out in the extended-NVMe page the device decodes
//! ([`CiscOp::decode`]). Commands pass data along numbered [`Slot`]s: host buffers fill the
//! first slots, and each read or stage writes one, so the output of one command feeds the
//! next (append → CRC → append).
//!
//! An op is checked when it is built and again when it is decoded, so the device never runs
//! one that reads a slot before it was written, uses a handle it never opened or does not fit
//! its page.

mod builder;
mod command;
mod encode;
mod error;
mod prebuilt;

pub use builder::CiscBuilder;
pub use command::{
    CiscOp, Command, FileRef, Slot, Stage, TxGrain, MAX_COMMANDS, MAX_HANDLES, MAX_INPUTS,
    MAX_SLOTS, MAX_SLOT_BYTES, OP_PAGE_BYTES,
};
pub use error::CiscError;
pub use prebuilt::{append_crc_write, open_write_sync_close, read_decompress, read_modify_write};
