//! What StorageFS keeps in place on the medium: the namespace and every inode's data. A
//! [`Redo`] record is one change to it; applying one twice is the same as applying it once,
//! so recovery may redo any record it is unsure of.

use super::error::FsError;
use serde::Serialize;
use std::collections::BTreeMap;

/// The largest file StorageFS keeps: offsets past it are refused, never allocated.
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// Files one StorageFS holds.
pub const MAX_FILES: usize = 1 << 16;
/// The longest path.
pub const MAX_PATH_BYTES: usize = 1024;

/// Bytes shared between a slot, the op's records and its log: one copy of the data however
/// many records name it. A stage's output or a read becomes one without a copy.
pub use bytes::Bytes;

/// An inode number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Ino(pub u64);

/// A tenant's identity, as the device checks it on every command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Credentials {
    pub uid: u32,
}

/// Permission bits: the owner's and everyone else's (a Unix mode without groups).
pub const OWNER_READ: u16 = 0o400;
pub const OWNER_WRITE: u16 = 0o200;
pub const OTHER_READ: u16 = 0o004;
pub const OTHER_WRITE: u16 = 0o002;
/// The mode a created file gets: the owner reads and writes, others read.
pub const DEFAULT_MODE: u16 = 0o644;

/// One inode: its owner, mode and bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Inode {
    pub owner: u32,
    pub mode: u16,
    pub data: Vec<u8>,
}

/// Whether `who` may read (or, with `write`, write) a file of `owner` with `mode`.
pub fn permits(owner: u32, mode: u16, who: Credentials, write: bool) -> bool {
    let bit = match (who.uid == owner, write) {
        (true, false) => OWNER_READ,
        (true, true) => OWNER_WRITE,
        (false, false) => OTHER_READ,
        (false, true) => OTHER_WRITE,
    };
    mode & bit != 0
}

/// One change to the medium.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Redo {
    /// Bytes at an offset (the file grows to cover them).
    Write { ino: Ino, offset: u64, bytes: Bytes },
    /// A new, empty inode under `path`.
    Create {
        path: String,
        ino: Ino,
        owner: u32,
        mode: u16,
    },
    /// `path` (inode `ino`) removed.
    Unlink { path: String, ino: Ino },
    /// The inode's size set to `len` (cut, or grown with zeros).
    Truncate { ino: Ino, len: u64 },
    /// Inode `ino` moved from `from` to `to` (a file at `to` was unlinked by a record before).
    Rename { from: String, to: String, ino: Ino },
}

impl Redo {
    /// Bytes the record moves to the medium.
    pub fn bytes(&self) -> u64 {
        match self {
            Redo::Write { bytes, .. } => bytes.len() as u64,
            Redo::Create { path, .. } | Redo::Unlink { path, .. } => path.len() as u64 + 16,
            Redo::Truncate { .. } => 16,
            Redo::Rename { from, to, .. } => (from.len() + to.len()) as u64 + 16,
        }
    }
}

/// Where a write of `len` bytes at `offset` ends, if the file may grow that far.
pub fn write_end(ino: Ino, offset: u64, len: usize) -> Result<u64, FsError> {
    offset
        .checked_add(len as u64)
        .filter(|&e| e <= MAX_FILE_BYTES)
        .ok_or(FsError::TooLarge { ino: ino.0 })
}

/// The namespace and the inodes: the durable state of StorageFS.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Medium {
    pub names: BTreeMap<String, Ino>,
    pub inodes: BTreeMap<Ino, Inode>,
    pub next_ino: u64,
    /// Bytes all files hold (kept as records apply, so a bound on it costs nothing).
    bytes: u64,
}

impl Medium {
    pub fn lookup(&self, path: &str) -> Option<Ino> {
        self.names.get(path).copied()
    }

    /// Bytes all files hold.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Applies one record. Idempotent: a write rewrites the same bytes, a create of an
    /// existing inode or an unlink of a missing name changes nothing.
    pub fn apply(&mut self, redo: &Redo) -> Result<(), FsError> {
        match redo {
            Redo::Write { ino, offset, bytes } => {
                let end = write_end(*ino, *offset, bytes.len())?;
                let inode = self.inodes.get_mut(ino).ok_or_else(|| {
                    FsError::Corrupt(format!("a write to missing inode {}", ino.0))
                })?;
                self.bytes += end.saturating_sub(inode.data.len() as u64);
                if *offset as usize == inode.data.len() {
                    // An append: no zero fill to overwrite.
                    inode.data.extend_from_slice(bytes);
                } else {
                    if inode.data.len() < end as usize {
                        inode.data.resize(end as usize, 0);
                    }
                    inode.data[*offset as usize..end as usize].copy_from_slice(bytes);
                }
            }
            Redo::Create {
                path,
                ino,
                owner,
                mode,
            } => {
                self.names.insert(path.clone(), *ino);
                self.inodes.entry(*ino).or_insert(Inode {
                    owner: *owner,
                    mode: *mode,
                    data: Vec::new(),
                });
                self.next_ino = self.next_ino.max(ino.0 + 1);
            }
            Redo::Unlink { path, ino } => {
                if self.names.get(path) == Some(ino) {
                    self.names.remove(path);
                }
                // An inode no name reaches is freed (StorageFS keeps no open-unlinked files
                // across a crash).
                if !self.names.values().any(|i| i == ino) {
                    if let Some(gone) = self.inodes.remove(ino) {
                        self.bytes -= gone.data.len() as u64;
                    }
                }
            }
            Redo::Truncate { ino, len } => {
                let end = write_end(*ino, *len, 0)?;
                let inode = self.inodes.get_mut(ino).ok_or_else(|| {
                    FsError::Corrupt(format!("a truncate of missing inode {}", ino.0))
                })?;
                self.bytes = self.bytes - inode.data.len() as u64 + end;
                inode.data.resize(end as usize, 0);
            }
            Redo::Rename { from, to, ino } => {
                // Redone after it happened, `from` no longer names `ino`: only `to` is set.
                if self.names.get(from) == Some(ino) {
                    self.names.remove(from);
                }
                if self.inodes.contains_key(ino) {
                    self.names.insert(to.clone(), *ino);
                }
            }
        }
        Ok(())
    }
}
