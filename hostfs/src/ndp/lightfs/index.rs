//! Building `.ndpmeta` files (LightFS §III-C1): depth-first, bottom-up, because a directory's
//! entry for a subdirectory holds the extents of that subdirectory's own `.ndpmeta`.

use super::super::{NdpError, NDPMETA_NAME};
use crate::alloc::Extent;
use crate::fs::HostFs;
use crate::namespace::{Ino, InodeKind};
use crate::ndpmeta::{BlockExtent, EntryKind, Layout, NdpEntry, NdpMeta, MAX_EXTENTS};
use crate::perms::{Cred, Perms};

/// Where a directory's `.ndpmeta` lives and what it says.
#[derive(Clone, Debug)]
pub struct DirIndex {
    pub dir: Ino,
    pub path: String,
    pub meta_ino: Ino,
    pub meta: NdpMeta,
    pub extents: Vec<Extent>,
    pub bytes: u64,
    /// The encoded file as written.
    pub encoded: Vec<u8>,
}

/// A file's or `.ndpmeta`'s extents as Table I stores them, or "too fragmented".
pub fn layout_of(extents: &[Extent]) -> Layout {
    if extents.len() > MAX_EXTENTS {
        return Layout::TooFragmented;
    }
    let fits = extents
        .iter()
        .all(|r| r.first.0 <= u64::from(u32::MAX) && r.pages <= u64::from(u32::MAX));
    if !fits {
        return Layout::TooFragmented;
    }
    Layout::Extents(
        extents
            .iter()
            .map(|r| BlockExtent {
                first_block: r.first.0 as u32,
                blocks: r.pages as u32,
            })
            .collect(),
    )
}

pub fn runs_of(extents: &[BlockExtent]) -> Vec<Extent> {
    extents
        .iter()
        .map(|e| Extent::new(u64::from(e.first_block), u64::from(e.blocks)))
        .collect()
}

/// The `.ndpmeta` entry describing child `ino` of a directory, given the indexes already
/// built for subdirectories.
pub fn entry_for(
    fs: &HostFs,
    name: &str,
    ino: Ino,
    sub: impl Fn(Ino) -> Option<(Vec<Extent>, u64)>,
) -> Option<NdpEntry> {
    let inode = fs.namespace().inode(ino)?;
    let (kind, length, layout) = match &inode.kind {
        InodeKind::File {
            size_bytes,
            extents,
            ..
        } => (EntryKind::File, *size_bytes, layout_of(extents)),
        InodeKind::Dir { .. } => {
            let (extents, bytes) = sub(ino)?;
            (EntryKind::Dir, bytes, layout_of(&extents))
        }
        // A link has no data for a task to read: the index leaves it out.
        InodeKind::Symlink { .. } => return None,
    };
    Some(NdpEntry {
        name: name.to_string(),
        kind,
        ino: u64::from(ino.0),
        length,
        perms: inode.perms,
        layout,
    })
}

/// `dir`'s `.ndpmeta` as the namespace stands now: its entries, encoded, and where and with
/// which permissions it is written.
pub struct BuiltIndex {
    pub meta: NdpMeta,
    pub encoded: Vec<u8>,
    meta_path: String,
    perms: Perms,
}

/// Builds the `.ndpmeta` of `dir` from the namespace in memory, with `sub` giving the index
/// location of each subdirectory (a subdirectory without one is left out).
pub fn build_index(
    fs: &HostFs,
    dir: Ino,
    path: &str,
    sub: impl Fn(Ino) -> Option<(Vec<Extent>, u64)>,
) -> Result<BuiltIndex, NdpError> {
    let ns = fs.namespace();
    let dir_perms = ns.inode(dir).map(|i| i.perms).unwrap_or(Perms {
        uid: 0,
        gid: 0,
        mode: 0o755,
    });
    let entries: Vec<NdpEntry> = ns
        .entries_of(dir)
        .filter(|e| e.name != NDPMETA_NAME)
        .filter_map(|e| entry_for(fs, &e.name, e.ino, &sub))
        .collect();
    let meta = NdpMeta::new(entries);
    let meta_path = format!("{}/{NDPMETA_NAME}", path.trim_end_matches('/'));
    let encoded = meta.encode().map_err(|source| NdpError::Index {
        path: meta_path.clone(),
        source,
    })?;
    let perms = Perms {
        mode: dir_perms.mode & 0o666,
        ..dir_perms
    };
    Ok(BuiltIndex {
        meta,
        encoded,
        meta_path,
        perms,
    })
}

/// How an index write reaches the flash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Written and `fsync`ed on its own: startup's indexes (§III-B's initialisation).
    Fsync,
    /// Every later write (the updater's, a new directory's first index): its inode waits
    /// for the next journal commit, which a `sync` makes once after all of them.
    Batched,
}

/// Writes (or rewrites) the `.ndpmeta` of `dir` from the namespace (see [`build_index`]).
/// Returns the index and whether its extents moved.
pub fn write_index(
    fs: &mut HostFs,
    dir: Ino,
    path: &str,
    who: Cred,
    durability: Durability,
    sub: impl Fn(Ino) -> Option<(Vec<Extent>, u64)>,
) -> Result<(DirIndex, bool), NdpError> {
    let b = build_index(fs, dir, path, sub)?;
    let (meta_ino, moved) = match durability {
        Durability::Fsync => fs.put_file(&b.meta_path, &b.encoded, b.perms, who)?,
        Durability::Batched => fs.put_file_unsynced(&b.meta_path, &b.encoded, b.perms, who)?,
    };
    let extents = fs.file_layout(meta_ino).expect("just written").1.to_vec();
    Ok((
        DirIndex {
            dir,
            path: path.to_string(),
            meta_ino,
            meta: b.meta,
            extents,
            bytes: b.encoded.len() as u64,
            encoded: b.encoded,
        },
        moved,
    ))
}

/// Builds every `.ndpmeta` under `root`, children before parents. Returns them root last.
pub fn build_tree(fs: &mut HostFs, root: &str, who: Cred) -> Result<Vec<DirIndex>, NdpError> {
    let (r, _) = fs.lookup(root, who)?;
    let mut order = Vec::new();
    // Depth-first post-order without recursion: (dir, path, children pushed?).
    let mut stack = vec![(r.ino, root.trim_end_matches('/').to_string(), false)];
    while let Some((dir, path, expanded)) = stack.pop() {
        if expanded {
            order.push((dir, path));
            continue;
        }
        stack.push((dir, path.clone(), true));
        let ns = fs.namespace();
        for e in ns.entries_of(dir).rev() {
            if ns.inode(e.ino).is_some_and(|i| i.is_dir()) {
                stack.push((e.ino, format!("{path}/{}", e.name), false));
            }
        }
    }
    let mut built: Vec<DirIndex> = Vec::new();
    for (dir, path) in order {
        let path = if path.is_empty() {
            "/".to_string()
        } else {
            path
        };
        let (index, _) = write_index(fs, dir, &path, who, Durability::Fsync, |ino| {
            built
                .iter()
                .find(|b| b.dir == ino)
                .map(|b| (b.extents.clone(), b.bytes))
        })?;
        built.push(index);
    }
    Ok(built)
}
