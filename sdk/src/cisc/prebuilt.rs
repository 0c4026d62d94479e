//! The ops FusionFS's UserLib ships pre-built, for the sequences applications issue most.

use super::builder::CiscBuilder;
use super::command::{CiscOp, FileRef, Stage, TxGrain};
use super::error::CiscError;

/// Appends `data`, computes its CRC-32 on the device and appends that too: a log record
/// that verifies itself (LevelDB's and RocksDB's WAL pattern, FusionFS's Fig. 2).
pub fn append_crc_write(file: FileRef, data: Vec<u8>, grain: TxGrain) -> Result<CiscOp, CiscError> {
    let mut b = CiscBuilder::new();
    b.grain(grain);
    let d = b.input(data);
    b.append(file, d);
    let crc = b.process(Stage::Crc32, &[d]);
    b.append(file, crc);
    b.finish()
}

/// Reads `len` bytes at `offset`, XORs them with `mask` on the device (the "modify") and
/// writes the result back in place.
pub fn read_modify_write(
    file: FileRef,
    offset: u64,
    mask: Vec<u8>,
    grain: TxGrain,
) -> Result<CiscOp, CiscError> {
    let len = u32::try_from(mask.len()).map_err(|_| CiscError::InputTooLarge {
        slot: 0,
        bytes: mask.len(),
        max: super::command::MAX_SLOT_BYTES,
    })?;
    let mut b = CiscBuilder::new();
    b.grain(grain);
    let m = b.input(mask);
    let old = b.pread(file, offset, len);
    let new = b.process(Stage::Xor, &[old, m]);
    b.pwrite(file, offset, new);
    b.finish()
}

/// Creates or opens `path`, writes `data`, makes it durable and closes it: the key-value
/// store's insert of FusionFS's Fig. 2(a).
pub fn open_write_sync_close(
    path: &str,
    data: Vec<u8>,
    grain: TxGrain,
) -> Result<CiscOp, CiscError> {
    let mut b = CiscBuilder::new();
    b.grain(grain);
    let d = b.input(data);
    let f = b.open(path, true);
    b.write(f, d).fsync(f).close(f);
    b.finish()
}

/// Reads `len` compressed bytes at `offset`, decompresses them on the device and returns
/// the plain data.
pub fn read_decompress(file: FileRef, offset: u64, len: u32) -> Result<CiscOp, CiscError> {
    let mut b = CiscBuilder::new();
    let packed = b.pread(file, offset, len);
    let plain = b.process(Stage::Decompress, &[packed]);
    b.ret(plain);
    b.finish()
}
