//! Errors of the device model. Every misuse the caller can cause is an error value with the
//! numbers needed to understand it; the model never panics on input.

/// What went wrong in a device operation.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DeviceError {
    #[error("logical page {lpn} is out of range: the device has {logical_pages} logical pages")]
    LpnOutOfRange { lpn: u64, logical_pages: u64 },
    #[error(
        "byte range {offset}..{end} is out of range: the device holds {capacity_bytes} bytes",
        end = offset.saturating_add(*len)
    )]
    ByteRangeOutOfRange {
        offset: u64,
        len: u64,
        capacity_bytes: u64,
    },
    #[error("physical page {ppn} does not exist on this device")]
    PpnOutOfRange { ppn: u32 },
    #[error("block {block} does not exist on this device")]
    BlockOutOfRange { block: u32 },
    #[error(
        "device full beyond over-provisioning: no die can take another page and GC found no \
         reclaimable block ({logical_pages_mapped} logical pages mapped; pinned blocks cannot \
         be reclaimed)"
    )]
    DeviceFull { logical_pages_mapped: u64 },
    #[error("buffer of {got} bytes given where {expected} bytes were needed")]
    BufferSize { expected: u64, got: u64 },
    #[error("this device runs in timing-only mode and keeps no page payloads")]
    PayloadsNotKept,
    #[error("physical page {ppn} has been erased")]
    PageErased { ppn: u32 },
    #[error("physical page {ppn} is not held by a delta mapping")]
    NotADelta { ppn: u32 },
    #[error("block {block} is not pinned")]
    NotPinned { block: u32 },
    #[error("invalid profile field `{field}`: {reason}")]
    InvalidProfile { field: String, reason: String },
    #[error(
        "the geometry is too large for this process: its {table} table needs {} and the \
         memory could not be had (use fewer blocks, or larger pages)",
        bytes.map_or("more bytes than an address can hold".to_string(), |b| format!("{b} bytes"))
    )]
    TableTooLarge {
        table: &'static str,
        bytes: Option<u64>,
    },
}
