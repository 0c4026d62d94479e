//! What can go wrong in a transaction.

use super::ids::{FileId, TaskId};
use crate::durable::RecoveryError;
use crate::error::DeviceError;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TxError {
    #[error("{task} conflicts with {with} on page {page} of {file}")]
    Conflict {
        task: TaskId,
        with: TaskId,
        file: FileId,
        page: u64,
    },
    #[error("{0} is not running")]
    NotRunning(TaskId),
    #[error("{task} did not register {file}")]
    NotRegistered { task: TaskId, file: FileId },
    #[error("logical page {lpn} of {file} already belongs to {other}'s snapshot")]
    SharedLpn {
        lpn: u64,
        file: FileId,
        other: FileId,
    },
    #[error("page {page} lies beyond the {pages} pages registered for {file}")]
    BeyondExtents { file: FileId, page: u64, pages: u64 },
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("recovery failed: {0}")]
    Recovery(#[from] RecoveryError),
    #[error("{task} failed ({cause}) and could not be rolled back: {abort}")]
    AbortFailed {
        task: TaskId,
        cause: String,
        abort: Box<TxError>,
    },
}
