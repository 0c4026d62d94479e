//! The file-system namespace: directories and inodes with owners and permission bits, and path
//! resolution level by level, as ext4 does it without its hashed-directory index.
//!
//! The namespace knows where its metadata lives on the device (inode-table blocks, directory
//! blocks) but does no I/O. [`Namespace::resolve`] reports every metadata block a lookup has
//! to read, in order; the file-system layer charges those reads through the device model
//! unless its metadata cache holds them (a cold lookup really reads flash, a warm one does
//! not). Keeping the two apart is what lets `frag-s`, `fsr` and `lightfs` pay for the same
//! lookup in their own way: on the host, inside the device, or not at all.

use crate::alloc::{AllocError, Extent, ExtentAllocator};
use crate::perms::{Access, Cred, Perms};
use std::collections::HashMap;

/// An inode number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ino(pub u32);

impl Ino {
    /// The root directory (as in ext4: inode 1 is reserved).
    pub const ROOT: Ino = Ino(2);
}

/// Where metadata lives: fixed-size inodes in an inode table at the start of the volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaLayout {
    pub block_bytes: u64,
    /// ext4's default inode size.
    pub inode_bytes: u64,
    pub inode_table_first_block: u64,
    pub inode_count: u32,
}

impl MetaLayout {
    /// The inode-table block holding `ino`.
    pub fn inode_block(&self, ino: Ino) -> u64 {
        self.inode_table_first_block + u64::from(ino.0) * self.inode_bytes / self.block_bytes
    }

    /// Blocks the inode table occupies; data blocks start after it.
    pub fn inode_table_blocks(&self) -> u64 {
        (u64::from(self.inode_count) * self.inode_bytes).div_ceil(self.block_bytes)
    }

    /// The bytes of `ino`'s inode in its inode-table block.
    pub fn inode_write(&self, ino: Ino) -> MetaWrite {
        MetaWrite {
            block: self.inode_block(ino),
            offset: u64::from(ino.0) * self.inode_bytes % self.block_bytes,
            len: self.inode_bytes,
        }
    }

    /// The bytes of `ino`'s inode that a write which took no blocks changes: ext2's `i_size`
    /// through `i_blocks` (bytes 4 to 32: the size, the times, the link and block counts).
    pub fn inode_times(&self, ino: Ino) -> MetaWrite {
        let whole = self.inode_write(ino);
        MetaWrite {
            offset: whole.offset + 4,
            len: 28.min(whole.len.saturating_sub(4)),
            ..whole
        }
    }

    /// All of metadata block `block` (a new directory's first block, which ext2 and ext4
    /// zero whole before writing "." and "..").
    pub fn whole(&self, block: u64) -> MetaWrite {
        MetaWrite {
            block,
            offset: 0,
            len: self.block_bytes,
        }
    }

    /// A directory entry's header in `block` (8 bytes: inode, record length, name length,
    /// type), which removing an entry rewrites (ext4 folds the record into its neighbour's).
    /// Where the entry was is not kept: the header is taken at the block's start.
    pub fn entry_header(&self, block: u64) -> MetaWrite {
        MetaWrite {
            block,
            offset: 0,
            len: 8,
        }
    }
}

/// The bytes of one metadata block a change wrote. A block device is written whole blocks
/// (`block` alone counts); a byte-addressable medium (ISPFS's PCM) stores only these bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MetaWrite {
    pub block: u64,
    pub offset: u64,
    pub len: u64,
}

/// Bytes a directory entry takes in a directory block (ext4: 8-byte header plus the name,
/// rounded up to 4).
pub fn dirent_bytes(name_len: usize) -> u64 {
    (8 + name_len as u64).next_multiple_of(4)
}

/// Bytes a listed entry takes in the caller's buffer (`struct linux_dirent64`: 19 bytes
/// before the name, the name and its NUL, 8-byte aligned): what `getdents64` copies.
pub fn dirent64_bytes(name_len: usize) -> u64 {
    (19 + name_len as u64 + 1).next_multiple_of(8)
}

/// The "." and ".." entries every directory block list starts with.
const DOT_ENTRIES_BYTES: u64 = 12 + 12;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub ino: Ino,
    /// `name`'s FNV-1a hash: lookups scan a directory comparing these, not the names
    /// (a long scan of string compares was the replay's hottest loop).
    hash: u64,
    /// The index of the directory block holding the entry. An entry stays in its block
    /// until it is removed, as an ext4 dirent does.
    block: u64,
}

impl DirEntry {
    /// The directory block holding the entry.
    pub fn block(&self) -> u64 {
        self.block
    }
}

impl DirEntry {
    fn new(name: &str, ino: Ino, block: u64) -> DirEntry {
        DirEntry {
            name: name.to_string(),
            ino,
            hash: name_hash(name),
            block,
        }
    }

    fn bytes(&self) -> u64 {
        dirent_bytes(self.name.len())
    }
}

/// The directory block a new entry of `size` bytes goes into: the first with room for it,
/// as ext4's `add_dirent_to_buf` scans a directory, or `used.len()` (a block to add) when
/// none has. Space a removed entry leaves is reused this way; nothing else moves.
fn block_with_room(used: &[u64], size: u64, block_bytes: u64) -> u64 {
    used.iter()
        .position(|&u| u + size <= block_bytes)
        .unwrap_or(used.len()) as u64
}

/// A directory's entries in on-disk order (by block; within a block, in the order they were
/// added), kept block by block, and once the directory is large, an index of the blocks each
/// name hash is in.
///
/// A lookup in a large directory hashes the name to its blocks, as ext4's htree hashes a name
/// to its leaf block, and searches those blocks' entries only: a directory of 50 000 names
/// costs a lookup what one of a few hundred does. (Every lookup scanned every entry until
/// 27 November, so the files of one large directory took time quadratic in their number.)
/// A small directory is scanned, comparing hashes: that is faster than the index there, and
/// a replay's directories are mostly small. Removing an entry shifts only its block's later
/// entries, as ext4 folds a dirent into its neighbour (one flat list made unlinking every
/// file of a large directory quadratic).
#[derive(Clone, Debug, Default)]
pub struct DirEntries {
    /// Entry lists by directory block (a block index with no entries may be empty or past
    /// the end).
    blocks: Vec<Vec<DirEntry>>,
    len: usize,
    /// Name hash → the blocks holding an entry with that hash (one, but for collisions);
    /// built when the directory first outgrows [`INDEX_FROM`] entries.
    blocks_by_hash: Option<HashMap<u64, Vec<u64>>>,
}

/// Where an entry sits: its directory block, and its place among that block's entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub block: usize,
    pub index: usize,
}

/// Entries past which a directory is indexed.
const INDEX_FROM: usize = 256;

/// Two directories are equal when their entries are: the index is a cache of them.
impl PartialEq for DirEntries {
    fn eq(&self, other: &DirEntries) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for DirEntries {}

impl DirEntries {
    /// Every entry, in on-disk order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &DirEntry> + '_ {
        self.blocks.iter().flatten()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entry at `at` (as [`Resolution::positions`] names it), if there is one.
    pub fn get(&self, at: Slot) -> Option<&DirEntry> {
        self.blocks.get(at.block)?.get(at.index)
    }

    /// Where `name` is.
    fn find(&self, name: &str) -> Option<Slot> {
        let h = name_hash(name);
        let in_block = |block: usize| {
            let index = self
                .blocks
                .get(block)?
                .iter()
                .position(|e| e.hash == h && e.name == name)?;
            Some(Slot { block, index })
        };
        match &self.blocks_by_hash {
            None => (0..self.blocks.len()).find_map(in_block),
            Some(index) => index.get(&h)?.iter().find_map(|&b| in_block(b as usize)),
        }
    }

    /// Puts `entry` (its block chosen by [`block_with_room`]) after the entries already in
    /// its block, and counts its bytes there.
    fn insert(&mut self, used: &mut Vec<u64>, entry: DirEntry) {
        let b = entry.block as usize;
        if b == used.len() {
            used.push(0);
        }
        used[b] += entry.bytes();
        if let Some(index) = &mut self.blocks_by_hash {
            index.entry(entry.hash).or_default().push(entry.block);
        }
        if self.blocks.len() <= b {
            self.blocks.resize_with(b + 1, Vec::new);
        }
        self.blocks[b].push(entry);
        self.len += 1;
        if self.blocks_by_hash.is_none() && self.len > INDEX_FROM {
            self.blocks_by_hash = Some(Self::index_of(self.iter()));
        }
    }

    fn index_of<'a>(entries: impl Iterator<Item = &'a DirEntry>) -> HashMap<u64, Vec<u64>> {
        let mut index: HashMap<u64, Vec<u64>> = HashMap::new();
        for e in entries {
            index.entry(e.hash).or_default().push(e.block);
        }
        index
    }

    /// Takes the entry at `at` out; the others stay where they are (ext4 folds a removed
    /// dirent into its neighbour's record, so only its own block changes). Returns its
    /// block index.
    fn remove_at(&mut self, used: &mut [u64], at: Slot) -> u64 {
        let e = self.blocks[at.block].remove(at.index);
        self.len -= 1;
        used[e.block as usize] -= e.bytes();
        if let Some(index) = &mut self.blocks_by_hash {
            if let Some(blocks) = index.get_mut(&e.hash) {
                if let Some(i) = blocks.iter().position(|&b| b == e.block) {
                    blocks.swap_remove(i);
                }
                if blocks.is_empty() {
                    index.remove(&e.hash);
                }
            }
        }
        e.block
    }

    /// Points the entry at `at` at another inode (a rename over an existing name).
    fn set_ino(&mut self, at: Slot, ino: Ino) {
        self.blocks[at.block][at.index].ino = ino;
    }

    /// Every entry carries its name's hash and sits in the list of its own block, the count
    /// is right, and the index (if built) holds exactly the entries' (hash, block) pairs.
    /// O(entries), for tests.
    fn check_index(&self) -> Result<(), String> {
        if let Some(e) = self.iter().find(|e| e.hash != name_hash(&e.name)) {
            return Err(format!("'{}' carries another name's hash", e.name));
        }
        for (b, list) in self.blocks.iter().enumerate() {
            if let Some(e) = list.iter().find(|e| e.block as usize != b) {
                return Err(format!(
                    "'{}' of block {} is listed in block {b}",
                    e.name, e.block
                ));
            }
        }
        if self.iter().count() != self.len {
            return Err(format!(
                "{} entries counted as {}",
                self.iter().count(),
                self.len
            ));
        }
        let Some(index) = &self.blocks_by_hash else {
            return Ok(());
        };
        let mut want = Self::index_of(self.iter());
        let mut have = index.clone();
        for v in want.values_mut().chain(have.values_mut()) {
            v.sort_unstable();
        }
        if want != have {
            return Err("the name index does not match the entries".into());
        }
        Ok(())
    }
}

fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InodeKind {
    File {
        size_bytes: u64,
        /// The file's blocks in order: block `i` of the file is the `i`-th block of these runs.
        extents: Vec<Extent>,
        /// Blocks `fallocate` set aside for the file's next blocks past `extents`, in order.
        /// They hold nothing yet (ext4's unwritten extents: read as zeros, without I/O) and
        /// join `extents` when writeback first writes them; a file frees them with its own.
        reserved: Vec<Extent>,
    },
    Dir {
        entries: DirEntries,
        blocks: Vec<Extent>,
        /// Bytes in use in each directory block, "." and ".." included in the first: one
        /// per block of `blocks` (a directory never shrinks, as on ext4).
        used: Vec<u64>,
    },
    /// A symbolic link: its target as given (relative or absolute, at most
    /// [`MAX_TARGET_BYTES`]), and the block holding it when it is longer than
    /// [`FAST_SYMLINK_BYTES`] (none: the inode holds it). A walk follows it where POSIX
    /// path resolution does: in the middle of a path always, at its end when asked.
    Symlink {
        target: Box<str>,
        blocks: Vec<Extent>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inode {
    pub ino: Ino,
    /// The directory holding it. A file or link with several names (hard links) keeps the
    /// directory it was created in, which may since have lost that name: ext4 keeps no
    /// parent for files at all, and only directories' are walked up.
    pub parent: Ino,
    /// The names that refer to it (ext4's `i_links_count` for a file; 1 here for a
    /// directory, whose subdirectories' ".." are not counted). It goes when the last goes,
    /// unless it is open: then it lives on, nameless (an orphan), until its last close.
    pub links: u32,
    /// Descriptors open on it (the kernel's reference count), kept by `hold` and `release`.
    pub open: u32,
    pub perms: Perms,
    pub kind: InodeKind,
}

impl Inode {
    pub fn is_dir(&self) -> bool {
        matches!(self.kind, InodeKind::Dir { .. })
    }

    pub fn is_symlink(&self) -> bool {
        matches!(self.kind, InodeKind::Symlink { .. })
    }
}

/// A metadata block a lookup reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaRead {
    /// The inode-table block holding `ino`.
    Inode { ino: Ino, block: u64 },
    /// Block `index` of directory `dir`'s entries.
    Dir { dir: Ino, index: u64, block: u64 },
    /// The block holding symbolic link `ino`'s target (one longer than
    /// [`FAST_SYMLINK_BYTES`]), read to follow it.
    Link { ino: Ino, block: u64 },
}

impl MetaRead {
    pub fn block(&self) -> u64 {
        match *self {
            MetaRead::Inode { block, .. }
            | MetaRead::Dir { block, .. }
            | MetaRead::Link { block, .. } => block,
        }
    }
}

/// What a walk collects for [`Resolution`].
struct Trail {
    ino_list: Vec<Ino>,
    positions: Vec<Slot>,
    reads: Vec<MetaRead>,
    detour: u64,
}

impl Trail {
    /// Starting at the root. Sized for a typical depth: growing these one push at a time was
    /// a visible share of a replay's lookups.
    fn new() -> Trail {
        let mut ino_list = Vec::with_capacity(8);
        ino_list.push(Ino::ROOT);
        Trail {
            ino_list,
            positions: Vec::with_capacity(8),
            reads: Vec::with_capacity(16),
            detour: 0,
        }
    }

    fn into_resolution(self, ino: Ino) -> Resolution {
        Resolution {
            ino,
            ino_list: self.ino_list,
            positions: self.positions,
            reads: self.reads,
            detour: self.detour,
        }
    }
}

/// The outcome of a path lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution {
    pub ino: Ino,
    /// The ino of every level, root first: what LightFS-Host sends the device instead of a path.
    pub ino_list: Vec<Ino>,
    /// Where each level's entry sits in its directory: `positions[i]` is `ino_list[i + 1]`'s,
    /// in directory `ino_list[i]`.
    pub positions: Vec<Slot>,
    /// The metadata blocks the lookup reads, in order.
    pub reads: Vec<MetaRead>,
    /// Components looked up that `ino_list` does not hold: symbolic links followed, the
    /// levels an absolute target or a `..` in one walked back over, each `..`. The walk
    /// looked up `ino_list.len() - 1 + detour` names.
    pub detour: u64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NsError {
    #[error("'{0}' is not a valid path (absolute, '/'-separated, no '.' or '..' parts)")]
    BadPath(String),
    #[error("no such file or directory: '{0}'")]
    NotFound(String),
    #[error("'{0}' is not a directory")]
    NotADirectory(String),
    #[error("'{0}' already exists")]
    Exists(String),
    #[error("permission denied: {access} access to '{path}'")]
    PermissionDenied { path: String, access: &'static str },
    #[error("name '{0}' is longer than 255 bytes")]
    NameTooLong(String),
    #[error("no free inodes (the inode table holds {0})")]
    NoInodes(u32),
    #[error("directory '{0}' is not empty")]
    NotEmpty(String),
    #[error("'{0}' is a directory")]
    IsADirectory(String),
    #[error("cannot move '{0}' into itself")]
    IntoItself(String),
    #[error("'{0}' is a directory: hard links to directories are not allowed")]
    LinkToDirectory(String),
    #[error("'{0}' already has {MAX_LINKS} names, ext4's most")]
    TooManyLinks(String),
    #[error("too many levels of symbolic links resolving '{0}' (more than {MAX_FOLLOWS})")]
    Loop(String),
    #[error("a symbolic link's target of {0} bytes: it must be 1 to {MAX_TARGET_BYTES} bytes without a NUL")]
    BadTarget(usize),
    #[error(transparent)]
    NoSpace(#[from] AllocError),
}

/// What a removal freed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removed {
    pub ino: Ino,
    pub parent: Ino,
    /// Data blocks (a file) or directory blocks (a directory) to give back to the allocator.
    pub blocks: Vec<Extent>,
    /// The parent's directory block that held the entry: the only one the removal changed.
    pub dir_block: u64,
    /// Whether the name was the inode's last, so the inode went with it. A file that keeps
    /// another name (a hard link) keeps its blocks and pages, and `blocks` is empty.
    pub inode_freed: bool,
}

/// What `link` changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Linked {
    /// The inode that took another name.
    pub ino: Ino,
    /// The directory holding the new name.
    pub parent: Ino,
    /// The directory block that took the entry (the directory grew by it if none had room).
    pub dir_block: u64,
}

/// The most names a file may have (ext4's `EXT4_LINK_MAX`).
pub const MAX_LINKS: u32 = 65_000;

/// What a rename changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Renamed {
    pub ino: Ino,
    pub old_parent: Ino,
    pub new_parent: Ino,
    /// The directory blocks the rename changed: the one that held the old entry, the one
    /// that holds the new, and a moved directory's first block (its "..").
    pub dir_blocks: Vec<u64>,
    /// A file the rename replaced.
    pub replaced: Option<Removed>,
}

/// What `create` makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewKind<'a> {
    File,
    Dir,
    /// A symbolic link to this target (1 to [`MAX_TARGET_BYTES`] bytes, no NUL).
    Symlink {
        target: &'a str,
    },
}

/// The longest target ext4 keeps in the inode itself (`i_block`, 15 × 4 bytes, with its
/// NUL): a longer one takes a block of its own.
pub const FAST_SYMLINK_BYTES: u64 = 59;

/// The longest symbolic link target: `PATH_MAX` (4096) with its NUL.
pub const MAX_TARGET_BYTES: usize = 4095;

/// The most symbolic links one path walk follows (Linux's `MAXSYMLINKS`): past it the walk
/// fails with `ELOOP`, so a cycle of links costs a bounded walk.
pub const MAX_FOLLOWS: u32 = 40;

#[derive(Clone, Debug)]
pub struct Namespace {
    layout: MetaLayout,
    inodes: InodeTable,
    next_ino: u32,
    /// Inode numbers freed by removals, reused lowest first (as ext4's bitmap allocator
    /// would), so a long-running workload does not exhaust the inode table.
    free_inos: std::collections::BTreeSet<u32>,
    /// See [`Namespace::dir_names_version`].
    dir_names_version: u64,
}

/// Inodes by number: a slot per number (numbers are dense, freed ones are reused lowest
/// first), so the lookup on every path component is an index, not a tree descent.
#[derive(Clone, Debug, Default)]
struct InodeTable {
    slots: Vec<Option<Inode>>,
    len: usize,
}

impl InodeTable {
    fn with_root(root: Inode) -> InodeTable {
        let mut t = InodeTable::default();
        t.insert(Ino::ROOT, root);
        t
    }

    fn get(&self, ino: &Ino) -> Option<&Inode> {
        self.slots.get(ino.0 as usize)?.as_ref()
    }

    fn get_mut(&mut self, ino: &Ino) -> Option<&mut Inode> {
        self.slots.get_mut(ino.0 as usize)?.as_mut()
    }

    fn insert(&mut self, ino: Ino, inode: Inode) {
        let i = ino.0 as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        if self.slots[i].replace(inode).is_none() {
            self.len += 1;
        }
    }

    fn remove(&mut self, ino: &Ino) -> Option<Inode> {
        let gone = self.slots.get_mut(ino.0 as usize)?.take();
        self.len -= usize::from(gone.is_some());
        gone
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl std::ops::Index<&Ino> for InodeTable {
    type Output = Inode;
    fn index(&self, ino: &Ino) -> &Inode {
        self.get(ino).expect("a live inode number")
    }
}

/// The directory part of an absolute path (`/a/b` → `/a`, `/a` → `/`); `None` for `/` and
/// for paths without a `/`.
pub fn parent_dir(path: &str) -> Option<&str> {
    if path == "/" {
        return None;
    }
    let i = last_slash(path)?;
    Some(if i == 0 { "/" } else { &path[..i] })
}

/// Where `path`'s last '/' is (bytewise, as in [`Components`]).
fn last_slash(path: &str) -> Option<usize> {
    path.bytes().rposition(|b| b == b'/')
}

/// Checks that `path` is absolute, '/'-separated, without empty, `.`, `..` or NUL parts, and
/// returns its components (`/` has none). Checked whole before any walk, so a bad path is
/// `BadPath` whatever exists.
fn components(path: &str) -> Result<Components<'_>, NsError> {
    let bad = || NsError::BadPath(path.to_string());
    if path == "/" {
        return Ok(Components { rest: None });
    }
    let rest = path.strip_prefix('/').ok_or_else(bad)?;
    // A NUL anywhere (one vectorised scan), then each part's shape.
    if rest.as_bytes().contains(&0) {
        return Err(bad());
    }
    if rest
        .as_bytes()
        .split(|&b| b == b'/')
        .any(|c| c.is_empty() || c == b"." || c == b"..")
    {
        return Err(bad());
    }
    Ok(Components { rest: Some(rest) })
}

/// The components of a path [`components`] already accepted, or of a directory above one
/// it accepted (a prefix of a valid path, up to a '/', is valid).
fn components_of_valid(path: &str) -> Components<'_> {
    Components {
        rest: path.strip_prefix('/').filter(|r| !r.is_empty()),
    }
}

/// The '/'-separated parts of a relative path. Splits on the byte: `str::split('/')` compares
/// each candidate through a generic UTF-8 searcher, which was a tenth of a replay's path walk.
struct Components<'a> {
    rest: Option<&'a str>,
}

impl<'a> Iterator for Components<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let rest = self.rest?;
        match rest.bytes().position(|b| b == b'/') {
            Some(i) => {
                self.rest = Some(&rest[i + 1..]);
                Some(&rest[..i])
            }
            None => {
                self.rest = None;
                Some(rest)
            }
        }
    }
}

/// The last component of `path` and its parent directory's path.
fn split_last(path: &str) -> Result<(&str, &str), NsError> {
    components(path)?;
    match parent_dir(path) {
        Some(parent) => Ok((parent, &path[last_slash(path).map_or(0, |i| i + 1)..])),
        None => Err(NsError::Exists("/".into())),
    }
}

/// Where a walk ended: at the inode the path names, or in the directory that lacks only its
/// last component.
enum Walked<'a> {
    Found(Ino),
    /// Only the last name is missing: the directory that lacks it, and the name; `own`
    /// unless it is a link target's last name (the walk followed a dangling link at the end).
    MissingLast {
        dir: Ino,
        name: &'a str,
        own: bool,
    },
}

/// A name to create, in a directory already resolved. `path` and `dir_path` only name the
/// two in errors: the name may be a link target's, apart from the path that led to it.
#[derive(Clone, Copy, Debug)]
pub struct NewName<'p> {
    pub dir: Ino,
    pub name: &'p str,
    pub path: &'p str,
    pub dir_path: &'p str,
}

/// What `open(O_CREAT)` finds at the end of a path, links followed.
#[derive(Debug)]
pub enum CreateAt {
    /// The file (or directory) the path names.
    Found(Resolution),
    /// Nothing: the walk to the directory to create the path's last name in, or, through a
    /// dangling link, the name its target ends in (`target`), as Linux creates it.
    Missing {
        dir: Resolution,
        target: Option<String>,
    },
}

/// Which symbolic links a walk follows: those in the middle of the path always (POSIX path
/// resolution), the last component too only when asked (`stat` follows it, `lstat` not).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Follow {
    Middle,
    Last,
}

/// The components a walk has still to look up: the path's own, and above them the rests of
/// the link targets being followed, the innermost on top (at most [`MAX_FOLLOWS`] deep).
struct Pending<'a> {
    path: Components<'a>,
    links: Vec<Components<'a>>,
}

impl<'a> Pending<'a> {
    /// The next component, and whether it is the path's own (checked whole before the walk)
    /// rather than a link target's (which may hold `.`, `..` and empty parts).
    fn next(&mut self) -> Option<(&'a str, bool)> {
        while let Some(top) = self.links.last_mut() {
            if let Some(part) = top.next() {
                return Some((part, false));
            }
            self.links.pop();
        }
        self.path.next().map(|part| (part, true))
    }

    fn is_empty(&self) -> bool {
        self.path.rest.is_none() && self.links.iter().all(|c| c.rest.is_none())
    }
}

/// `path`'s directory and last name, for a change to that name (the root has none to change).
fn split_changed(path: &str) -> Result<(&str, &str), NsError> {
    match split_last(path) {
        Err(NsError::Exists(_)) => Err(NsError::BadPath(path.to_string())),
        r => r,
    }
}

impl Namespace {
    /// An empty file system: a root directory owned by `root_perms`, its first directory
    /// block taken from `alloc`.
    pub fn new(
        layout: MetaLayout,
        root_perms: Perms,
        alloc: &mut ExtentAllocator,
    ) -> Result<Namespace, NsError> {
        let blocks = alloc.allocate(1, None)?;
        let root = Inode {
            ino: Ino::ROOT,
            parent: Ino::ROOT,
            links: 1,
            open: 0,
            perms: root_perms,
            kind: InodeKind::Dir {
                entries: DirEntries::default(),
                blocks,
                used: vec![DOT_ENTRIES_BYTES],
            },
        };
        Ok(Namespace {
            layout,
            inodes: InodeTable::with_root(root),
            next_ino: Ino::ROOT.0 + 1,
            free_inos: Default::default(),
            dir_names_version: 0,
        })
    }

    pub fn layout(&self) -> &MetaLayout {
        &self.layout
    }

    /// Changes whenever a directory or a symbolic link loses a name (removed, renamed, or
    /// replaced by a rename), and only then: names are only ever added beside existing ones,
    /// so until it changes, a path that resolved to a directory still resolves to it. Lets a
    /// caller remember directories it found without walking their paths again.
    pub fn dir_names_version(&self) -> u64 {
        self.dir_names_version
    }

    pub fn inode(&self, ino: Ino) -> Option<&Inode> {
        self.inodes.get(&ino)
    }

    /// Number of inodes in use (files and directories, root included).
    pub fn inode_count(&self) -> usize {
        self.inodes.len()
    }

    /// Entry `name` of directory `dir`, if both exist.
    fn entry(&self, dir: Ino, name: &str) -> Option<&DirEntry> {
        match &self.inodes.get(&dir)?.kind {
            InodeKind::Dir { entries, .. } => entries.find(name).and_then(|at| entries.get(at)),
            InodeKind::File { .. } | InodeKind::Symlink { .. } => None,
        }
    }

    /// The entries of directory `ino` in on-disk order; none when it is not a directory.
    pub fn entries_of(&self, ino: Ino) -> impl DoubleEndedIterator<Item = &DirEntry> + '_ {
        self.readdir(ino).into_iter().flat_map(DirEntries::iter)
    }

    /// The entries of a directory, in on-disk order.
    pub fn readdir(&self, ino: Ino) -> Option<&DirEntries> {
        match &self.inodes.get(&ino)?.kind {
            InodeKind::Dir { entries, .. } => Some(entries),
            InodeKind::File { .. } | InodeKind::Symlink { .. } => None,
        }
    }

    /// Every inode has as many names as it counts links, one without any is open, and every
    /// name is of a live inode.
    fn check_links(&self) -> Result<(), String> {
        let mut names: HashMap<Ino, u32> = HashMap::new();
        for e in self
            .inodes
            .slots
            .iter()
            .flatten()
            .flat_map(|i| self.entries_of(i.ino))
        {
            if self.inodes.get(&e.ino).is_none() {
                return Err(format!("entry '{}' names free inode {:?}", e.name, e.ino));
            }
            *names.entry(e.ino).or_default() += 1;
        }
        for inode in self.inodes.slots.iter().flatten() {
            let named = names.get(&inode.ino).copied().unwrap_or(0);
            let want = if inode.ino == Ino::ROOT {
                0
            } else {
                inode.links
            };
            if named != want || (inode.is_dir() && inode.links > 1) {
                return Err(format!(
                    "inode {:?} counts {} link(s) but {named} entries name it",
                    inode.ino, inode.links
                ));
            }
            if inode.links == 0 && inode.open == 0 {
                return Err(format!(
                    "inode {:?} has neither a name nor a descriptor",
                    inode.ino
                ));
            }
        }
        Ok(())
    }

    /// Every directory's blocks account for its entries: one `used` count per block, each
    /// the entries' bytes there (with "." and ".." in the first) and within the block, and
    /// the entries in block order; every inode has as many names as it counts links, one
    /// without any is open, and every name is of a live inode. O(entries), for tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.check_links()?;
        for inode in self.inodes.slots.iter().flatten() {
            let InodeKind::Dir {
                entries,
                blocks,
                used,
            } = &inode.kind
            else {
                continue;
            };
            let pages: u64 = blocks.iter().map(|r| r.pages).sum();
            if used.len() as u64 != pages {
                return Err(format!(
                    "directory {:?} has {pages} blocks but counts bytes in {}",
                    inode.ino,
                    used.len()
                ));
            }
            if used.is_empty() {
                return Err(format!("directory {:?} has no block", inode.ino));
            }
            entries
                .check_index()
                .map_err(|e| format!("directory {:?}: {e}", inode.ino))?;
            let mut counted = vec![0u64; used.len()];
            counted[0] = DOT_ENTRIES_BYTES;
            for e in entries.iter() {
                let Some(c) = counted.get_mut(e.block as usize) else {
                    return Err(format!(
                        "directory {:?}: '{}' in block {} of {}",
                        inode.ino,
                        e.name,
                        e.block,
                        used.len()
                    ));
                };
                *c += e.bytes();
            }
            if counted != *used {
                return Err(format!(
                    "directory {:?}: blocks hold {counted:?} bytes, counted {used:?}",
                    inode.ino
                ));
            }
            if let Some(u) = used.iter().find(|&&u| u > self.layout.block_bytes) {
                return Err(format!(
                    "directory {:?}: a block holds {u} bytes",
                    inode.ino
                ));
            }
        }
        Ok(())
    }

    /// Every block of directory `ino`'s entries, in order, as a listing reads them (none for
    /// a file or a free number).
    pub fn dir_reads(&self, ino: Ino) -> Vec<MetaRead> {
        match self.inodes.get(&ino).map(|i| &i.kind) {
            Some(InodeKind::Dir { blocks, used, .. }) => (0..used.len() as u64)
                .map(|index| MetaRead::Dir {
                    dir: ino,
                    index,
                    block: Self::nth_block(blocks, index),
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// How many blocks directory `ino` has (0 for a file or a free number).
    pub fn dir_block_count(&self, ino: Ino) -> u64 {
        match self.inodes.get(&ino).map(|i| &i.kind) {
            Some(InodeKind::Dir { used, .. }) => used.len() as u64,
            _ => 0,
        }
    }

    /// The bytes of `ino`'s entry in directory `dir`: its block, and its place after the
    /// block's earlier entries ("." and ".." first in the first block).
    pub fn entry_write(&self, dir: Ino, ino: Ino) -> Option<MetaWrite> {
        let InodeKind::Dir {
            entries, blocks, ..
        } = &self.inodes.get(&dir)?.kind
        else {
            return None;
        };
        let e = entries.iter().rfind(|e| e.ino == ino)?;
        let b = usize::try_from(e.block).ok()?;
        let before: u64 = entries
            .blocks
            .get(b)?
            .iter()
            .take_while(|x| x.ino != ino)
            .map(DirEntry::bytes)
            .sum();
        let dots = if e.block == 0 { DOT_ENTRIES_BYTES } else { 0 };
        Some(MetaWrite {
            block: Self::nth_block(blocks, e.block),
            offset: dots + before,
            len: e.bytes(),
        })
    }

    /// The device block holding `ino`'s entry in directory `dir`.
    pub fn entry_block(&self, dir: Ino, ino: Ino) -> Option<u64> {
        match &self.inodes.get(&dir)?.kind {
            // From the end: a new entry is most often the last.
            InodeKind::Dir {
                entries, blocks, ..
            } => entries
                .iter()
                .rfind(|e| e.ino == ino)
                .map(|e| Self::nth_block(blocks, e.block)),
            InodeKind::File { .. } | InodeKind::Symlink { .. } => None,
        }
    }

    /// Allocates a directory block near `blocks`' last when `at` is one past them (the
    /// entry about to go there needs a new block).
    fn grow_for(
        alloc: &mut ExtentAllocator,
        blocks: &[Extent],
        used: &[u64],
        at: u64,
    ) -> Result<Vec<Extent>, NsError> {
        if at < used.len() as u64 {
            return Ok(Vec::new());
        }
        Ok(alloc.allocate(1, blocks.last().map(|r| r.end()))?)
    }

    /// Appends freshly allocated runs to a directory's block list.
    fn extend_blocks(blocks: &mut Vec<Extent>, extra: Vec<Extent>) {
        for r in extra {
            match blocks.last_mut() {
                Some(last) if last.end() == r.first.0 => last.pages += r.pages,
                _ => blocks.push(r),
            }
        }
    }

    /// The device block holding block `index` of a run list.
    fn nth_block(runs: &[Extent], mut index: u64) -> u64 {
        for r in runs {
            if index < r.pages {
                return r.first.0 + index;
            }
            index -= r.pages;
        }
        unreachable!("directory blocks cover every entry")
    }

    /// Resolves `path` for `who`, level by level: at each directory, its inode block (to find
    /// its blocks and check search permission), then its directory block (a one-block
    /// directory) or its hash-index root and the leaf block holding the next name (a larger
    /// one, as ext4's dir_index); finally the target's inode block. Symbolic links are
    /// followed, the last component's too (`stat`, `open`).
    pub fn resolve(&self, path: &str, who: Cred) -> Result<Resolution, NsError> {
        self.resolve_as(path, who, Follow::Last)
    }

    /// [`Namespace::resolve`] without following a link that is the last component
    /// (`lstat`, `readlink`, `unlink`, `rename`): it resolves to the link itself.
    pub fn resolve_nofollow(&self, path: &str, who: Cred) -> Result<Resolution, NsError> {
        self.resolve_as(path, who, Follow::Middle)
    }

    fn resolve_as(&self, path: &str, who: Cred, follow: Follow) -> Result<Resolution, NsError> {
        let mut trail = Trail::new();
        match self.walk_to(path, components(path)?, who, Some(&mut trail), follow)? {
            Walked::Found(ino) => Ok(trail.into_resolution(ino)),
            Walked::MissingLast { .. } => Err(NsError::NotFound(path.to_string())),
        }
    }

    /// [`Namespace::resolve_nofollow`], or, when only the last component is missing, the
    /// walk to its parent directory (the resolution's `ino`) and the search there for the
    /// name: what `mkdir` and `symlink` need to find the name or create it in one walk. A
    /// link that is the last component is found, not followed (`open(O_CREAT)` follows it:
    /// [`Namespace::resolve_for_create`]).
    pub fn resolve_or_parent(
        &self,
        path: &str,
        who: Cred,
    ) -> Result<Result<Resolution, Resolution>, NsError> {
        let mut trail = Trail::new();
        Ok(
            match self.walk_to(
                path,
                components(path)?,
                who,
                Some(&mut trail),
                Follow::Middle,
            )? {
                Walked::Found(ino) => Ok(trail.into_resolution(ino)),
                Walked::MissingLast { dir, .. } => Err(trail.into_resolution(dir)),
            },
        )
    }

    /// [`Namespace::resolve`] for `open(O_CREAT)`: a link at the end is followed, and when
    /// what the path names is missing, where to create it (in one walk).
    pub fn resolve_for_create(&self, path: &str, who: Cred) -> Result<CreateAt, NsError> {
        let mut trail = Trail::new();
        Ok(
            match self.walk_to(path, components(path)?, who, Some(&mut trail), Follow::Last)? {
                Walked::Found(ino) => CreateAt::Found(trail.into_resolution(ino)),
                Walked::MissingLast { dir, name, own } => CreateAt::Missing {
                    target: (!own).then(|| name.to_string()),
                    dir: trail.into_resolution(dir),
                },
            },
        )
    }

    /// [`Namespace::resolve`] of a path that may not be there: where a name is missing, the
    /// walk stops at the directory that lacks it, having read what the search for the name
    /// reads there (`ino` is that directory). What a call that failed with `ENOENT` walked.
    /// Any other error (a file in the middle of the path, no search permission) is returned.
    pub fn resolve_partial(&self, path: &str, who: Cred) -> Result<Resolution, NsError> {
        let mut trail = Trail::new();
        let ino = match self.walk_to(path, components(path)?, who, Some(&mut trail), Follow::Last) {
            Ok(Walked::Found(ino)) | Ok(Walked::MissingLast { dir: ino, .. }) => ino,
            Err(NsError::NotFound(_)) => *trail.ino_list.last().expect("the root at least"),
            Err(e) => return Err(e),
        };
        Ok(trail.into_resolution(ino))
    }

    /// The inode `path` names, with the same checks as [`Namespace::resolve`] but without
    /// listing the blocks read: for callers that only ask whether something exists.
    pub fn find(&self, path: &str, who: Cred) -> Result<Ino, NsError> {
        self.walk(path, who, None)
    }

    fn walk(&self, path: &str, who: Cred, trail: Option<&mut Trail>) -> Result<Ino, NsError> {
        self.walk_parts(path, components(path)?, who, trail)
    }

    /// [`Namespace::walk`] of `path`, split into `parts` already checked. A link at the end
    /// is followed: every caller walks a directory (to create or remove a name in it) or a
    /// file to use, never a link itself.
    fn walk_parts(
        &self,
        path: &str,
        parts: Components<'_>,
        who: Cred,
        trail: Option<&mut Trail>,
    ) -> Result<Ino, NsError> {
        match self.walk_to(path, parts, who, trail, Follow::Last)? {
            Walked::Found(ino) => Ok(ino),
            Walked::MissingLast { .. } => Err(NsError::NotFound(path.to_string())),
        }
    }

    /// Walks `path` from the root, checking each directory's kind and search permission,
    /// following symbolic links (at most [`MAX_FOLLOWS`] a walk) and, with a `trail`,
    /// listing the blocks a lookup reads.
    // Long: the checks, the reads listed, the links followed and the missing-last case of each
    // level, in one pass (this is every lookup's hot path).
    fn walk_to<'a>(
        &'a self,
        path: &str,
        parts: Components<'a>,
        who: Cred,
        mut trail: Option<&mut Trail>,
        follow: Follow,
    ) -> Result<Walked<'a>, NsError> {
        let mut pending = Pending {
            path: parts,
            links: Vec::new(),
        };
        let mut ino = Ino::ROOT;
        let mut follows = 0u32;
        // How much of `path` has been walked (components are '/'-separated, never empty).
        let mut walked = 0usize;
        let walked_path = |n: usize| {
            if n == 0 {
                "/".to_string()
            } else {
                path[..n].to_string()
            }
        };
        while let Some((part, own)) = pending.next() {
            // A link's target may hold what a checked path may not.
            if !own && (part.is_empty() || part == ".") {
                continue;
            }
            let dir = &self.inodes[&ino];
            if let Some(t) = trail.as_deref_mut() {
                t.reads.push(MetaRead::Inode {
                    ino,
                    block: self.layout.inode_block(ino),
                });
            }
            let InodeKind::Dir {
                entries,
                blocks,
                used,
            } = &dir.kind
            else {
                return Err(NsError::NotADirectory(walked_path(walked)));
            };
            if !dir.perms.allows(who, Access::Execute) {
                return Err(NsError::PermissionDenied {
                    path: walked_path(walked),
                    access: Access::Execute.name(),
                });
            }
            if own {
                walked += 1 + part.len();
            }
            if !own && part == ".." {
                // ".." is the directory's first entry, in its first block.
                if let Some(t) = trail.as_deref_mut() {
                    t.reads.push(MetaRead::Dir {
                        dir: ino,
                        index: 0,
                        block: Self::nth_block(blocks, 0),
                    });
                    t.detour += 1;
                    if t.ino_list.len() > 1 {
                        t.ino_list.pop();
                        t.positions.pop();
                        t.detour += 1;
                    }
                }
                ino = dir.parent;
                continue;
            }
            let found = entries.find(part);
            if let Some(t) = trail.as_deref_mut() {
                let needed = used.len() as u64;
                let leaf = match found {
                    Some(at) => at.block as u64,
                    None => needed - 1,
                };
                // A one-block directory is scanned; a larger one is hashed, as ext4's
                // dir_index (htree) does: its root block, then the one leaf the name hashes
                // to. Scanning every block up to the name made lookups in a directory of
                // 50 000 files read hundreds of blocks.
                let indices: &[u64] = if needed <= 1 || leaf == 0 {
                    &[0]
                } else {
                    &[0, leaf]
                };
                for &index in indices {
                    t.reads.push(MetaRead::Dir {
                        dir: ino,
                        index,
                        block: Self::nth_block(blocks, index),
                    });
                }
            }
            let Some((at, entry)) = found.and_then(|at| Some((at, entries.get(at)?))) else {
                if pending.is_empty() {
                    return Ok(Walked::MissingLast {
                        dir: ino,
                        name: part,
                        own,
                    });
                }
                return Err(NsError::NotFound(walked_path(walked)));
            };
            let (parent, next) = (ino, entry.ino);
            ino = next;
            if let Some(t) = trail.as_deref_mut() {
                t.ino_list.push(ino);
                t.positions.push(at);
            }
            let InodeKind::Symlink { target, blocks } = &self.inodes[&ino].kind else {
                continue;
            };
            if follow == Follow::Middle && pending.is_empty() {
                break;
            }
            follows += 1;
            if follows > MAX_FOLLOWS {
                return Err(NsError::Loop(path.to_string()));
            }
            // Reading the link: its inode, and the block holding a long target.
            let absolute = target.starts_with('/');
            if let Some(t) = trail.as_deref_mut() {
                t.reads.push(MetaRead::Inode {
                    ino,
                    block: self.layout.inode_block(ino),
                });
                if let Some(b) = blocks.first() {
                    t.reads.push(MetaRead::Link {
                        ino,
                        block: b.first.0,
                    });
                }
                t.ino_list.pop();
                t.positions.pop();
                t.detour += 1;
                if absolute {
                    t.detour += t.ino_list.len() as u64 - 1;
                    t.ino_list.truncate(1);
                    t.positions.clear();
                }
            }
            ino = if absolute { Ino::ROOT } else { parent };
            let rest = target.trim_start_matches('/');
            pending.links.push(Components {
                rest: (!rest.is_empty()).then_some(rest),
            });
        }
        if let Some(t) = trail {
            t.reads.push(MetaRead::Inode {
                ino,
                block: self.layout.inode_block(ino),
            });
        }
        Ok(Walked::Found(ino))
    }

    /// Creates a file or directory at `path` (its parent must exist), owned by `perms`.
    pub fn create(
        &mut self,
        path: &str,
        kind: NewKind<'_>,
        perms: Perms,
        who: Cred,
        alloc: &mut ExtentAllocator,
    ) -> Result<Ino, NsError> {
        let (parent_path, _) = split_last(path)?;
        let parent = self.walk(parent_path, who, None)?;
        self.create_in(parent, path, kind, perms, who, alloc)
    }

    /// The entry `name` of directory `dir`, if both exist: one step of a walk, for callers
    /// that go down a path level by level (`mkdir -p`) instead of resolving it from the root
    /// at every level.
    pub fn child(&self, dir: Ino, name: &str) -> Option<Ino> {
        match &self.inodes.get(&dir)?.kind {
            InodeKind::Dir { entries, .. } => entries
                .find(name)
                .and_then(|at| entries.get(at))
                .map(|e| e.ino),
            InodeKind::File { .. } | InodeKind::Symlink { .. } => None,
        }
    }

    /// [`Namespace::create`] in `parent`, which the caller resolved from `path`'s parent (so
    /// the path is not walked again).
    pub fn create_in(
        &mut self,
        parent: Ino,
        path: &str,
        kind: NewKind<'_>,
        perms: Perms,
        who: Cred,
        alloc: &mut ExtentAllocator,
    ) -> Result<Ino, NsError> {
        // Only the new name is checked here: `create` checked the whole path, and `mkdir -p`
        // checks each name as it goes down (checking the whole path at every level would
        // cost a deep path its depth squared).
        let i = last_slash(path).ok_or_else(|| NsError::BadPath(path.to_string()))?;
        let (dir_path, name) = (if i == 0 { "/" } else { &path[..i] }, &path[i + 1..]);
        let at = NewName {
            dir: parent,
            name,
            path,
            dir_path,
        };
        self.create_named(at, kind, perms, who, alloc)
    }

    /// [`Namespace::create_in`] of a name given apart from the path that led to it: the
    /// target of a dangling link that `open(O_CREAT)` creates.
    // Long: POSIX create's checks (permission, existence, name) then the inode and entry
    // writes, in the order ext4 makes them.
    pub fn create_named(
        &mut self,
        at: NewName<'_>,
        kind: NewKind<'_>,
        perms: Perms,
        who: Cred,
        alloc: &mut ExtentAllocator,
    ) -> Result<Ino, NsError> {
        let NewName {
            dir: parent,
            name,
            path,
            dir_path: parent_path,
        } = at;
        if name.is_empty() || name == "." || name == ".." || name.contains('\0') {
            return Err(NsError::BadPath(path.to_string()));
        }
        if name.len() > 255 {
            return Err(NsError::NameTooLong(name.to_string()));
        }
        if let NewKind::Symlink { target } = kind {
            if target.is_empty() || target.len() > MAX_TARGET_BYTES || target.contains('\0') {
                return Err(NsError::BadTarget(target.len()));
            }
        }
        let parent_inode = self
            .inodes
            .get(&parent)
            .ok_or_else(|| NsError::NotFound(parent_path.to_string()))?;
        let InodeKind::Dir { entries, .. } = &parent_inode.kind else {
            return Err(NsError::NotADirectory(parent_path.to_string()));
        };
        if entries.find(name).is_some() {
            return Err(NsError::Exists(path.to_string()));
        }
        if !parent_inode.perms.allows(who, Access::Write) {
            return Err(NsError::PermissionDenied {
                path: parent_path.to_string(),
                access: Access::Write.name(),
            });
        }
        let ino = match self.free_inos.first() {
            Some(&free) => Ino(free),
            None if self.next_ino < self.layout.inode_count => Ino(self.next_ino),
            None => return Err(NsError::NoInodes(self.layout.inode_count)),
        };
        // The first block with room takes the entry; the directory grows by a block, near its
        // last, when none has.
        let InodeKind::Dir { blocks, used, .. } = &self.inodes[&parent].kind else {
            unreachable!()
        };
        let at = block_with_room(used, dirent_bytes(name.len()), self.layout.block_bytes);
        let extra = Self::grow_for(alloc, blocks, used, at)?;
        let goal = blocks.last().map(|r| r.end());
        let new_kind = match kind {
            NewKind::File => InodeKind::File {
                size_bytes: 0,
                extents: Vec::new(),
                reserved: Vec::new(),
            },
            NewKind::Symlink { target } if target.len() as u64 <= FAST_SYMLINK_BYTES => {
                InodeKind::Symlink {
                    target: target.into(),
                    blocks: Vec::new(),
                }
            }
            NewKind::Symlink { target } => match alloc.allocate(1, goal) {
                Ok(b) => InodeKind::Symlink {
                    target: target.into(),
                    blocks: b,
                },
                Err(e) => {
                    for r in extra {
                        alloc.free(r).expect("just allocated");
                    }
                    return Err(e.into());
                }
            },
            NewKind::Dir => match alloc.allocate(1, goal) {
                Ok(b) => InodeKind::Dir {
                    entries: DirEntries::default(),
                    blocks: b,
                    used: vec![DOT_ENTRIES_BYTES],
                },
                Err(e) => {
                    for r in extra {
                        alloc.free(r).expect("just allocated");
                    }
                    return Err(e.into());
                }
            },
        };
        let InodeKind::Dir {
            entries,
            blocks,
            used,
        } = &mut self.inodes.get_mut(&parent).expect("parent").kind
        else {
            unreachable!()
        };
        entries.insert(used, DirEntry::new(name, ino, at));
        Self::extend_blocks(blocks, extra);
        self.inodes.insert(
            ino,
            Inode {
                ino,
                parent,
                links: 1,
                open: 0,
                perms,
                kind: new_kind,
            },
        );
        if !self.free_inos.remove(&ino.0) {
            self.next_ino += 1;
        }
        Ok(ino)
    }

    /// The parent directory of `path`, its entry name, and the caller's right to change it.
    fn parent_of<'p>(&self, path: &'p str, who: Cred) -> Result<(Ino, &'p str), NsError> {
        let (parent_path, name) = split_changed(path)?;
        // `split_last` checked the whole path, so its directory needs no second check.
        let parent = self.walk_parts(parent_path, components_of_valid(parent_path), who, None)?;
        self.check_parent(parent_path, parent, who)?;
        Ok((parent, name))
    }

    /// [`Namespace::parent_of`] where a walk already made resolved `path` to `r` (not
    /// following a link at its end): the directory holding the name is the walk's last but
    /// one level, so the path is not walked again.
    fn parent_resolved<'p>(
        &self,
        path: &'p str,
        r: &Resolution,
        who: Cred,
    ) -> Result<(Ino, &'p str), NsError> {
        let (parent_path, name) = split_changed(path)?;
        let parent = r
            .ino_list
            .len()
            .checked_sub(2)
            .map(|i| r.ino_list[i])
            .ok_or_else(|| NsError::BadPath(path.to_string()))?;
        self.check_parent(parent_path, parent, who)?;
        Ok((parent, name))
    }

    /// Whether `who` may change the entries of `parent`, the directory `parent_path` names.
    fn check_parent(&self, parent_path: &str, parent: Ino, who: Cred) -> Result<(), NsError> {
        let p = &self.inodes[&parent];
        if !p.is_dir() {
            return Err(NsError::NotADirectory(parent_path.to_string()));
        }
        if !p.perms.allows(who, Access::Write) {
            return Err(NsError::PermissionDenied {
                path: parent_path.to_string(),
                access: Access::Write.name(),
            });
        }
        Ok(())
    }

    /// Takes entry `name` out of directory `dir`; returns the device block that held it.
    fn remove_entry(&mut self, dir: Ino, name: &str) -> Option<u64> {
        match &mut self.inodes.get_mut(&dir)?.kind {
            InodeKind::Dir {
                entries,
                blocks,
                used,
            } => {
                let k = entries.find(name)?;
                let b = entries.remove_at(used, k);
                Some(Self::nth_block(blocks, b))
            }
            InodeKind::File { .. } | InodeKind::Symlink { .. } => None,
        }
    }

    /// `unlink` (`dir == false`) or `rmdir` (`dir == true`, only when empty).
    pub fn remove(&mut self, path: &str, dir: bool, who: Cred) -> Result<Removed, NsError> {
        let (parent, name) = self.parent_of(path, who)?;
        self.remove_in(path, parent, name, dir)
    }

    /// [`Namespace::remove`] of the name a walk already made resolved `path` to (`r`, from
    /// [`Namespace::resolve_nofollow`]): what `unlink` does after the lookup it is charged.
    pub fn remove_resolved(
        &mut self,
        path: &str,
        r: &Resolution,
        dir: bool,
        who: Cred,
    ) -> Result<Removed, NsError> {
        let (parent, name) = self.parent_resolved(path, r, who)?;
        self.remove_in(path, parent, name, dir)
    }

    fn remove_in(
        &mut self,
        path: &str,
        parent: Ino,
        name: &str,
        dir: bool,
    ) -> Result<Removed, NsError> {
        let ino = self
            .entry(parent, name)
            .map(|e| e.ino)
            .ok_or_else(|| NsError::NotFound(path.to_string()))?;
        match &self.inodes[&ino].kind {
            InodeKind::File { .. } | InodeKind::Symlink { .. } if dir => {
                return Err(NsError::NotADirectory(path.to_string()))
            }
            InodeKind::Dir { .. } if !dir => return Err(NsError::IsADirectory(path.to_string())),
            InodeKind::Dir { entries, .. } if !entries.is_empty() => {
                return Err(NsError::NotEmpty(path.to_string()))
            }
            InodeKind::Dir { .. } | InodeKind::Symlink { .. } => self.dir_names_version += 1,
            InodeKind::File { .. } => {}
        }
        let dir_block = self
            .remove_entry(parent, name)
            .expect("found in its parent above");
        let (blocks, inode_freed) = self.drop_link(ino);
        Ok(Removed {
            ino,
            parent,
            blocks,
            dir_block,
            inode_freed,
        })
    }

    /// Takes one name from `ino`, whose entry the caller removed: the inode goes with its
    /// last unless it is open, and then its blocks are returned for the allocator (none
    /// while it has names or descriptors).
    fn drop_link(&mut self, ino: Ino) -> (Vec<Extent>, bool) {
        let inode = self.inodes.get_mut(&ino).expect("named by an entry");
        inode.links -= 1;
        if inode.links > 0 || inode.open > 0 {
            return (Vec::new(), false);
        }
        (self.free_inode(ino), true)
    }

    /// Removes `ino` and returns its blocks.
    fn free_inode(&mut self, ino: Ino) -> Vec<Extent> {
        let blocks = match self.inodes.remove(&ino).expect("a live inode").kind {
            InodeKind::Dir { blocks, .. } | InodeKind::Symlink { blocks, .. } => blocks,
            InodeKind::File {
                mut extents,
                reserved,
                ..
            } => {
                extents.extend(reserved);
                extents
            }
        };
        self.free_inos.insert(ino.0);
        blocks
    }

    /// A descriptor opened `ino`: it lives at least until that descriptor closes.
    pub fn hold(&mut self, ino: Ino) {
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.open += 1;
        }
    }

    /// A descriptor on `ino` closed. The last close of a file whose names are all gone (an
    /// orphan: unlinked, or renamed over, while open) removes it, as ext4's `evict_inode`
    /// does, and returns its blocks for the allocator.
    pub fn release(&mut self, ino: Ino) -> Option<Vec<Extent>> {
        let i = self.inodes.get_mut(&ino)?;
        i.open = i.open.saturating_sub(1);
        (i.open == 0 && i.links == 0).then(|| self.free_inode(ino))
    }

    /// `link`: gives the file or symbolic link `from` the further name `to`, in a directory
    /// the caller may write. ext4 refuses directories and a 65,001st name.
    ///
    /// `link(2)` names a symbolic link itself when the source is one, as `linkat` does
    /// without `AT_SYMLINK_FOLLOW` (`cp -al` copies a tree's links so); with `follow`
    /// (`ln -L`) the file the link leads to takes the name.
    pub fn link(
        &mut self,
        from: &str,
        to: &str,
        who: Cred,
        alloc: &mut ExtentAllocator,
        follow: bool,
    ) -> Result<Linked, NsError> {
        let walk = if follow { Follow::Last } else { Follow::Middle };
        let ino = match self.walk_to(from, components(from)?, who, None, walk)? {
            Walked::Found(ino) => ino,
            Walked::MissingLast { .. } => return Err(NsError::NotFound(from.to_string())),
        };
        let inode = &self.inodes[&ino];
        if inode.is_dir() {
            return Err(NsError::LinkToDirectory(from.to_string()));
        }
        if inode.links >= MAX_LINKS {
            return Err(NsError::TooManyLinks(from.to_string()));
        }
        let (parent, name) = self.parent_of(to, who)?;
        if name.is_empty() || name == "." || name == ".." {
            return Err(NsError::BadPath(to.to_string()));
        }
        if name.len() > 255 {
            return Err(NsError::NameTooLong(name.to_string()));
        }
        if self.entry(parent, name).is_some() {
            return Err(NsError::Exists(to.to_string()));
        }
        let dir_block = self.add_entry(parent, name, ino, alloc)?;
        self.inodes.get_mut(&ino).expect("walked to").links += 1;
        Ok(Linked {
            ino,
            parent,
            dir_block,
        })
    }

    /// Adds entry `name` → `ino` to directory `dir` in the first block with room, growing the
    /// directory by a block when none has (if that fails, nothing has changed); returns the
    /// device block that took it.
    fn add_entry(
        &mut self,
        dir: Ino,
        name: &str,
        ino: Ino,
        alloc: &mut ExtentAllocator,
    ) -> Result<u64, NsError> {
        let block_bytes = self.layout.block_bytes;
        let InodeKind::Dir {
            entries,
            blocks,
            used,
        } = &mut self.inodes.get_mut(&dir).expect("a directory").kind
        else {
            unreachable!("checked to be a directory")
        };
        let at = block_with_room(used, dirent_bytes(name.len()), block_bytes);
        let extra = Self::grow_for(alloc, blocks, used, at)?;
        Self::extend_blocks(blocks, extra);
        entries.insert(used, DirEntry::new(name, ino, at));
        Ok(Self::nth_block(blocks, at))
    }

    /// `rename`: moves `from` to `to`, replacing a file at `to` (not a directory).
    pub fn rename(
        &mut self,
        from: &str,
        to: &str,
        who: Cred,
        alloc: &mut ExtentAllocator,
    ) -> Result<Renamed, NsError> {
        let (old_parent, old_name) = self.parent_of(from, who)?;
        self.rename_in(from, old_parent, old_name, to, who, alloc)
    }

    /// [`Namespace::rename`] of the name a walk already made resolved `from` to (`r`, from
    /// [`Namespace::resolve_nofollow`]): what `rename` does after the lookups it is charged.
    pub fn rename_resolved(
        &mut self,
        from: &str,
        r: &Resolution,
        to: &str,
        who: Cred,
        alloc: &mut ExtentAllocator,
    ) -> Result<Renamed, NsError> {
        let (old_parent, old_name) = self.parent_resolved(from, r, who)?;
        self.rename_in(from, old_parent, old_name, to, who, alloc)
    }

    // Long: POSIX rename's cases (same directory, replace a file, move a directory) each with
    // its checks.
    fn rename_in(
        &mut self,
        from: &str,
        old_parent: Ino,
        old_name: &str,
        to: &str,
        who: Cred,
        alloc: &mut ExtentAllocator,
    ) -> Result<Renamed, NsError> {
        let ino = self
            .entry(old_parent, old_name)
            .map(|e| e.ino)
            .ok_or_else(|| NsError::NotFound(from.to_string()))?;
        if from == to {
            return Ok(Renamed {
                ino,
                old_parent,
                new_parent: old_parent,
                dir_blocks: Vec::new(),
                replaced: None,
            });
        }
        // Within one directory (most renames) its walk and checks are the same as for `from`.
        let (new_parent, new_name) = match split_last(to) {
            Ok((to_dir, name)) if parent_dir(from) == Some(to_dir) => (old_parent, name),
            _ => self.parent_of(to, who)?,
        };
        if new_name.len() > 255 {
            return Err(NsError::NameTooLong(new_name.to_string()));
        }
        // A directory may not move below itself.
        let mut up = new_parent;
        loop {
            if up == ino {
                return Err(NsError::IntoItself(from.to_string()));
            }
            if up == Ino::ROOT {
                break;
            }
            up = self.inodes[&up].parent;
        }
        let existing = self.entry(new_parent, new_name).map(|e| e.ino);
        // Two names of one file: POSIX rename does nothing and succeeds.
        if existing == Some(ino) {
            return Ok(Renamed {
                ino,
                old_parent,
                new_parent,
                dir_blocks: Vec::new(),
                replaced: None,
            });
        }
        if existing.is_some_and(|e| self.inodes[&e].is_dir()) {
            return Err(NsError::Exists(to.to_string()));
        }
        let moved_dir_block = match &self.inodes[&ino].kind {
            InodeKind::Dir { blocks, .. } if new_parent != old_parent => {
                Some(Self::nth_block(blocks, 0))
            }
            _ => None,
        };
        let is_file = |ino: Ino| matches!(self.inodes[&ino].kind, InodeKind::File { .. });
        if !is_file(ino) || existing.is_some_and(|e| !is_file(e)) {
            self.dir_names_version += 1;
        }
        let mut dir_blocks = Vec::with_capacity(3);
        let replaced = match existing {
            // As ext4's rename over a file: the destination's entry now names the moved inode
            // (the same name, in the same place), and the file it named is gone.
            Some(gone) => {
                let (blocks, inode_freed) = self.drop_link(gone);
                let InodeKind::Dir {
                    entries, blocks: b, ..
                } = &mut self.inodes.get_mut(&new_parent).expect("parent").kind
                else {
                    unreachable!("checked to be a directory")
                };
                let at = entries.find(new_name).expect("found above");
                entries.set_ino(at, ino);
                let dir_block = Self::nth_block(b, at.block as u64);
                dir_blocks.push(dir_block);
                Some(Removed {
                    ino: gone,
                    parent: new_parent,
                    blocks,
                    dir_block,
                    inode_freed,
                })
            }
            // Otherwise the new entry is added first, as ext4 does.
            None => {
                dir_blocks.push(self.add_entry(new_parent, new_name, ino, alloc)?);
                None
            }
        };
        let old_block = self
            .remove_entry(old_parent, old_name)
            .expect("found in its parent above");
        if !dir_blocks.contains(&old_block) {
            dir_blocks.push(old_block);
        }
        dir_blocks.extend(moved_dir_block);
        self.inodes.get_mut(&ino).expect("moved").parent = new_parent;
        Ok(Renamed {
            ino,
            old_parent,
            new_parent,
            dir_blocks,
            replaced,
        })
    }

    /// Records a file's size and extents (after allocation or writeback).
    pub fn set_file_layout(
        &mut self,
        ino: Ino,
        size_bytes: u64,
        extents: Vec<Extent>,
    ) -> Result<(), NsError> {
        match self.inodes.get_mut(&ino).map(|i| &mut i.kind) {
            Some(InodeKind::File {
                size_bytes: s,
                extents: e,
                ..
            }) => {
                *s = size_bytes;
                *e = extents;
                Ok(())
            }
            Some(InodeKind::Dir { .. } | InodeKind::Symlink { .. }) => {
                Err(NsError::NotADirectory(format!("ino {}", ino.0)))
            }
            None => Err(NsError::NotFound(format!("ino {}", ino.0))),
        }
    }

    /// A file's reserved blocks (see [`InodeKind::File`]), to extend or take from.
    pub fn reserved_mut(&mut self, ino: Ino) -> Result<&mut Vec<Extent>, NsError> {
        match self.inodes.get_mut(&ino).map(|i| &mut i.kind) {
            Some(InodeKind::File { reserved, .. }) => Ok(reserved),
            Some(InodeKind::Dir { .. } | InodeKind::Symlink { .. }) => {
                Err(NsError::IsADirectory(format!("ino {}", ino.0)))
            }
            None => Err(NsError::NotFound(format!("ino {}", ino.0))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What `components` accepts, written the obvious way.
    fn accepted_reference(path: &str) -> bool {
        if path == "/" {
            return true;
        }
        let Some(rest) = path.strip_prefix('/') else {
            return false;
        };
        !path.as_bytes().contains(&0)
            && rest
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..")
    }

    /// The index finds every name where a scan of the entries does, removals included, and
    /// a slot's index counts the entries before it in its block.
    #[test]
    fn the_name_index_finds_what_a_scan_finds() {
        let scan = |d: &DirEntries, name: &str| {
            let e = d.iter().find(|e| e.name == name)?;
            let index = d
                .iter()
                .filter(|o| o.block == e.block)
                .position(|o| o.name == name)?;
            Some(Slot {
                block: e.block as usize,
                index,
            })
        };
        let mut d = DirEntries::default();
        let mut used = Vec::new();
        for i in 0..3000u64 {
            d.insert(
                &mut used,
                DirEntry::new(&format!("f{i}"), Ino(i as u32 + 10), i / 100),
            );
        }
        assert!(d.blocks_by_hash.is_some(), "3000 entries are indexed");
        for i in (0..3000u64).step_by(2) {
            let k = d.find(&format!("f{i}")).expect("present");
            d.remove_at(&mut used, k);
        }
        d.check_index().unwrap();
        for i in 0..3000u64 {
            let name = format!("f{i}");
            assert_eq!(d.find(&name), scan(&d, &name), "{name}");
            assert_eq!(d.find(&name).is_some(), i % 2 == 1, "{name}");
        }
        assert_eq!(d.find("absent"), None);
    }

    proptest! {
        #[test]
        fn components_accepts_what_its_reference_accepts(
            parts in prop::collection::vec(
                prop::sample::select(vec!["/", ".", "a", "\0", "é", "..", "..."]), 0..10)
        ) {
            let path: String = parts.concat();
            prop_assert_eq!(components(&path).is_ok(), accepted_reference(&path), "{:?}", path);
            if let Ok(c) = components(&path) {
                let got: Vec<&str> = c.collect();
                let want: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}
