//! What StorageFS keeps in place on the medium: the namespace and every inode's data. A
//! [`Redo`] record is one change to it; applying one twice is the same as applying it once,
//! so recovery may redo any record it is unsure of.

pub use super::data::FileData;
use super::error::FsError;
use serde::Serialize;
use std::collections::BTreeMap;

/// The largest file StorageFS keeps, hostfs's (ext4's with 4 KiB blocks): offsets past it
/// are refused. A file's memory is what was written to it ([`FileData`]), not its size.
pub const MAX_FILE_BYTES: u64 = 16 << 40;
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
/// A symbolic link's mode: its type bits (`S_IFLNK`) and everyone's permissions, as Linux
/// gives a link. Its data is its target.
pub const SYMLINK_MODE: u16 = 0o120_777;
/// The longest symbolic link target (`PATH_MAX` less its NUL).
pub const MAX_TARGET_BYTES: usize = 4095;

/// Whether `mode` is a symbolic link's.
pub fn is_symlink(mode: u16) -> bool {
    mode & 0o170_000 == 0o120_000
}

/// One inode: its owner, mode, the names that reach it, and its bytes.
///
/// An inode no name reaches (`links` 0) lives on while a descriptor holds it, as POSIX
/// requires of a file unlinked while open; the last close frees it ([`Redo::Free`]), and
/// recovery frees any such orphan a crash left ([`Medium::free_orphans`]), as ext4's orphan
/// list does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Inode {
    pub owner: u32,
    pub mode: u16,
    pub links: u32,
    pub data: FileData,
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
    /// `path` (inode `ino`) removed; the inode stays, with one name fewer.
    Unlink { path: String, ino: Ino },
    /// One more name, `path`, for inode `ino` (a hard link).
    Link { path: String, ino: Ino },
    /// Inode `ino`, which no name reaches and no descriptor holds, freed with its bytes.
    Free { ino: Ino },
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
            Redo::Create { path, .. } | Redo::Unlink { path, .. } | Redo::Link { path, .. } => {
                path.len() as u64 + 16
            }
            Redo::Truncate { .. } | Redo::Free { .. } => 16,
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
    /// Bytes all files hold, by their sizes (kept as records apply, so a bound on it costs
    /// nothing).
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
    /// existing inode, a link of a name already there, an unlink of a missing name or a free
    /// of a freed inode changes nothing.
    pub fn apply(&mut self, redo: &Redo) -> Result<(), FsError> {
        match redo {
            Redo::Write { ino, offset, bytes } => {
                let end = write_end(*ino, *offset, bytes.len())?;
                let inode = self.inodes.get_mut(ino).ok_or_else(|| {
                    FsError::Corrupt(format!("a write to missing inode {}", ino.0))
                })?;
                self.bytes += end.saturating_sub(inode.data.len());
                inode.data.write(*offset, bytes);
            }
            Redo::Create {
                path,
                ino,
                owner,
                mode,
            } => {
                // Redone over an inode that is still there, only the name comes back.
                self.inodes.entry(*ino).or_insert(Inode {
                    owner: *owner,
                    mode: *mode,
                    links: 0,
                    data: FileData::default(),
                });
                self.name(path, *ino);
                self.next_ino = self.next_ino.max(ino.0 + 1);
            }
            Redo::Unlink { path, ino } => self.unname(path, *ino),
            Redo::Link { path, ino } => {
                if !self.name(path, *ino) {
                    return Err(FsError::Corrupt(format!(
                        "a link to missing inode {}",
                        ino.0
                    )));
                }
            }
            Redo::Free { ino } => {
                if self.inodes.get(ino).is_some_and(|i| i.links == 0) {
                    let gone = self.inodes.remove(ino).expect("checked above");
                    self.bytes -= gone.data.len();
                }
            }
            Redo::Truncate { ino, len } => {
                let end = write_end(*ino, *len, 0)?;
                let inode = self.inodes.get_mut(ino).ok_or_else(|| {
                    FsError::Corrupt(format!("a truncate of missing inode {}", ino.0))
                })?;
                self.bytes = self.bytes - inode.data.len() + end;
                inode.data.truncate(end);
            }
            // Redone after it happened, `from` no longer names `ino`: only `to` is set.
            Redo::Rename { from, to, ino } => {
                self.unname(from, *ino);
                self.name(to, *ino);
            }
        }
        Ok(())
    }

    /// Takes `path` from `ino`, if it names it.
    fn unname(&mut self, path: &str, ino: Ino) {
        if self.names.get(path) == Some(&ino) {
            self.names.remove(path);
            if let Some(i) = self.inodes.get_mut(&ino) {
                i.links = i.links.saturating_sub(1);
            }
        }
    }

    /// Makes `path` a name of `ino` (taking it from a file it named; the resolver unlinks
    /// such a file first). False if `ino` is gone.
    fn name(&mut self, path: &str, ino: Ino) -> bool {
        let Some(inode) = self.inodes.get_mut(&ino) else {
            return false;
        };
        if self.names.get(path) != Some(&ino) {
            inode.links += 1;
            if let Some(old) = self.names.insert(path.to_string(), ino) {
                if let Some(i) = self.inodes.get_mut(&old) {
                    i.links = i.links.saturating_sub(1);
                }
            }
        }
        true
    }

    /// Frees every inode no name reaches: after a crash no descriptor holds one. Returns how
    /// many it freed.
    pub fn free_orphans(&mut self) -> u64 {
        let orphans: Vec<Ino> = self
            .inodes
            .iter()
            .filter(|(_, i)| i.links == 0)
            .map(|(ino, _)| *ino)
            .collect();
        for ino in &orphans {
            let gone = self.inodes.remove(ino).expect("listed above");
            self.bytes -= gone.data.len();
        }
        orphans.len() as u64
    }

    /// Every inode's `links` counts the names that reach it, and every name reaches an inode.
    pub fn check_links(&self) -> Result<(), String> {
        let mut counted: BTreeMap<Ino, u32> = BTreeMap::new();
        for (path, ino) in &self.names {
            if !self.inodes.contains_key(ino) {
                return Err(format!("{path} names missing inode {}", ino.0));
            }
            *counted.entry(*ino).or_default() += 1;
        }
        for (ino, i) in &self.inodes {
            let n = counted.get(ino).copied().unwrap_or(0);
            if i.links != n {
                return Err(format!(
                    "inode {} counts {} names, {n} reach it",
                    ino.0, i.links
                ));
            }
        }
        Ok(())
    }
}
