//! Executing a CISC op: each command is first *resolved* against the namespace and the
//! tenant's descriptors (paths to inodes, appends and positional I/O to absolute offsets,
//! permissions checked), then *performed* over a copy-on-write view of the medium. Nothing
//! reaches the medium here: the op's effects are returned, and the caller persists them under
//! the op's transaction grain. A command that fails leaves the view to be dropped, so a
//! failed op changes nothing.
//!
//! A resolved command is idempotent (it names inodes and offsets, never "the end" or "the
//! position"), which is what lets MicroTx recovery perform the rest of an op again.

use super::error::FsError;
use super::medium::{
    is_symlink, write_end, Bytes, Credentials, Ino, Inode, Medium, Redo, DEFAULT_MODE, MAX_FILES,
    MAX_PATH_BYTES, MAX_TARGET_BYTES, SYMLINK_MODE,
};
use super::stage::StageRunner;
use csd_sdk::cisc::{
    CiscOp, Command, FileRef, Slot, Stage, MAX_HANDLES, MAX_SLOTS, MAX_SLOT_BYTES,
};
use serde::Serialize;
use smallvec::SmallVec;
use std::collections::BTreeMap;

/// A command with every name and position resolved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Resolved {
    Read {
        ino: Ino,
        offset: u64,
        len: u32,
        into: Slot,
    },
    Write {
        ino: Ino,
        offset: u64,
        from: Slot,
    },
    Create {
        path: String,
        ino: Ino,
        owner: u32,
        mode: u16,
    },
    Unlink {
        path: String,
        ino: Ino,
    },
    /// `path` made a second name of `ino`.
    Link {
        path: String,
        ino: Ino,
    },
    /// A symbolic link `ino` at `path`, holding `target`.
    Symlink {
        path: String,
        ino: Ino,
        owner: u32,
        target: String,
    },
    Truncate {
        ino: Ino,
        len: u64,
    },
    /// `from` renamed to `to`, unlinking `replaced` (the file `to` named) first.
    Rename {
        from: String,
        to: String,
        ino: Ino,
        replaced: Option<Ino>,
    },
    Stage {
        #[serde(serialize_with = "stage_name")]
        stage: Stage,
        inputs: Vec<Slot>,
        into: Slot,
    },
    /// Opens of existing files, fsync, close, return: nothing to redo.
    Nop,
}

/// A stage as the op log shows it: by its name.
fn stage_name<S: serde::Serializer>(stage: &Stage, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&stage.name())
}

/// What one command did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CmdEffect {
    /// Its records: one, or two for a rename over an existing name (kept inline).
    pub redo: SmallVec<[Redo; 1]>,
    /// The slot it wrote and the value, which MicroTx persists as the command's state.
    pub slot: Option<(Slot, Bytes)>,
    pub fuel: u64,
    pub read_bytes: u64,
    /// Namespace or descriptor entries examined (path lookup, permission check).
    pub entries: u64,
}

/// A whole op's effects, not yet persisted.
#[derive(Debug, Default)]
pub struct Executed {
    pub resolved: Vec<Resolved>,
    pub effects: Vec<CmdEffect>,
    pub returned: Vec<Vec<u8>>,
    /// The op's host buffers as the device received them (MicroTx logs them as they are).
    pub inputs: Vec<(Slot, Bytes)>,
    /// Descriptor positions the op moved, and descriptors it closed: applied once it commits.
    pub positions: Vec<(u32, u64)>,
    pub closed: Vec<u32>,
}

/// An open descriptor of a tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenFile {
    pub ino: Ino,
    pub position: u64,
}

/// An inode's owner, mode, names and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub owner: u32,
    pub mode: u16,
    pub links: u32,
    pub size: u64,
}

impl Meta {
    fn of(i: &Inode) -> Meta {
        Meta {
            owner: i.owner,
            mode: i.mode,
            links: i.links,
            size: i.data.len(),
        }
    }

    fn may(&self, who: Credentials, write: bool) -> bool {
        super::medium::permits(self.owner, self.mode, who, write)
    }
}

/// What performing reads and changes: the live medium (recovery) or a view over it.
pub trait Store {
    fn meta(&self, ino: Ino) -> Option<Meta>;
    /// Up to `len` bytes at `offset` (fewer at the end of the file).
    fn read(&self, ino: Ino, offset: u64, len: u64) -> Vec<u8>;
    fn apply(&mut self, redo: &Redo) -> Result<(), FsError>;
}

impl Store for Medium {
    fn meta(&self, ino: Ino) -> Option<Meta> {
        self.inodes.get(&ino).map(Meta::of)
    }
    fn read(&self, ino: Ino, offset: u64, len: u64) -> Vec<u8> {
        let Some(i) = self.inodes.get(&ino) else {
            return Vec::new();
        };
        i.data.read(offset, len)
    }
    fn apply(&mut self, redo: &Redo) -> Result<(), FsError> {
        Medium::apply(self, redo)
    }
}

/// An inode as an op has changed it so far: its metadata (`None`: freed), whether it was
/// created by the op (so the medium's bytes are not its), and the writes in order.
#[derive(Clone, Debug)]
struct Pending {
    meta: Option<Meta>,
    fresh: bool,
    /// The medium's bytes from here on were truncated away by the op.
    cut: Option<u64>,
    writes: Vec<(u64, Bytes)>,
}

/// A view of the medium with an op's changes on top, kept as changes so that an op never
/// copies a whole file.
struct View<'m> {
    base: &'m Medium,
    inodes: BTreeMap<Ino, Pending>,
    names: BTreeMap<String, Option<Ino>>,
    next_ino: u64,
}

impl View<'_> {
    fn lookup(&self, path: &str) -> Option<Ino> {
        match self.names.get(path) {
            Some(i) => *i,
            None => self.base.lookup(path),
        }
    }

    fn pending(&mut self, ino: Ino) -> Result<&mut Pending, FsError> {
        if !self.inodes.contains_key(&ino) {
            let meta = self
                .base
                .meta(ino)
                .ok_or_else(|| FsError::Corrupt(format!("a write to missing inode {}", ino.0)))?;
            self.inodes.insert(
                ino,
                Pending {
                    meta: Some(meta),
                    fresh: false,
                    cut: None,
                    writes: Vec::new(),
                },
            );
        }
        Ok(self.inodes.get_mut(&ino).expect("inserted above"))
    }

    /// The inode's metadata as the op left it, which must still exist.
    fn meta_mut(&mut self, ino: Ino) -> Result<&mut Meta, FsError> {
        self.pending(ino)?
            .meta
            .as_mut()
            .ok_or_else(|| FsError::Corrupt(format!("inode {} was freed", ino.0)))
    }

    /// Takes `path` from `ino`, if it names it (as [`Medium`] does).
    fn unname(&mut self, path: &str, ino: Ino) -> Result<(), FsError> {
        if self.lookup(path) == Some(ino) {
            self.names.insert(path.to_string(), None);
            let m = self.meta_mut(ino)?;
            m.links = m.links.saturating_sub(1);
        }
        Ok(())
    }

    /// Makes `path` a name of `ino` (as [`Medium`] does).
    fn name(&mut self, path: &str, ino: Ino) -> Result<(), FsError> {
        match self.lookup(path) {
            Some(i) if i == ino => return Ok(()),
            Some(old) => {
                let m = self.meta_mut(old)?;
                m.links = m.links.saturating_sub(1);
            }
            None => {}
        }
        self.meta_mut(ino)?.links += 1;
        self.names.insert(path.to_string(), Some(ino));
        Ok(())
    }
}

impl Store for View<'_> {
    fn meta(&self, ino: Ino) -> Option<Meta> {
        match self.inodes.get(&ino) {
            Some(p) => p.meta,
            None => self.base.meta(ino),
        }
    }

    fn read(&self, ino: Ino, offset: u64, len: u64) -> Vec<u8> {
        let Some(p) = self.inodes.get(&ino) else {
            return self.base.read(ino, offset, len);
        };
        let size = p.meta.map_or(0, |m| m.size);
        let (a, b) = (offset.min(size), offset.saturating_add(len).min(size));
        let base_end = p.cut.map_or(b, |c| c.clamp(a, b));
        let mut out = if p.fresh {
            Vec::new()
        } else {
            self.base.read(ino, a, base_end - a)
        };
        out.resize((b - a) as usize, 0);
        for (at, bytes) in &p.writes {
            let end = at + bytes.len() as u64;
            let (lo, hi) = ((*at).max(a), end.min(b));
            if lo < hi {
                out[(lo - a) as usize..(hi - a) as usize]
                    .copy_from_slice(&bytes[(lo - at) as usize..(hi - at) as usize]);
            }
        }
        out
    }

    fn apply(&mut self, redo: &Redo) -> Result<(), FsError> {
        match redo {
            Redo::Write { ino, offset, bytes } => {
                let end = write_end(*ino, *offset, bytes.len())?;
                let p = self.pending(*ino)?;
                let meta = p.meta.as_mut().ok_or_else(|| {
                    FsError::Corrupt(format!("a write to unlinked inode {}", ino.0))
                })?;
                meta.size = meta.size.max(end);
                p.writes.push((*offset, bytes.clone()));
            }
            Redo::Create {
                path,
                ino,
                owner,
                mode,
            } => {
                self.names.insert(path.clone(), Some(*ino));
                self.inodes.insert(
                    *ino,
                    Pending {
                        meta: Some(Meta {
                            owner: *owner,
                            mode: *mode,
                            links: 1,
                            size: 0,
                        }),
                        fresh: true,
                        cut: None,
                        writes: Vec::new(),
                    },
                );
            }
            Redo::Unlink { path, ino } => self.unname(path, *ino)?,
            Redo::Link { path, ino } => self.name(path, *ino)?,
            Redo::Free { ino } => {
                let p = self.pending(*ino)?;
                if p.meta.is_some_and(|m| m.links == 0) {
                    p.meta = None;
                }
            }
            Redo::Truncate { ino, len } => {
                let end = write_end(*ino, *len, 0)?;
                let p = self.pending(*ino)?;
                let meta = p.meta.as_mut().ok_or_else(|| {
                    FsError::Corrupt(format!("a truncate of unlinked inode {}", ino.0))
                })?;
                // Bytes past the cut are gone: the medium's from here on, and the op's own.
                p.cut = Some(p.cut.map_or(end, |c| c.min(end)).min(meta.size));
                meta.size = end;
                for (at, bytes) in &mut p.writes {
                    let keep = end.saturating_sub(*at).min(bytes.len() as u64) as usize;
                    if keep < bytes.len() {
                        bytes.truncate(keep);
                    }
                }
            }
            Redo::Rename { from, to, ino } => {
                self.unname(from, *ino)?;
                self.name(to, *ino)?;
            }
        }
        Ok(())
    }
}

/// Performs one resolved command over `store`, reading and writing `slots`.
// Long: one arm per resolved command, each a few lines of the same shape.
pub fn perform(
    r: &Resolved,
    store: &mut dyn Store,
    slots: &mut [Option<Bytes>],
    runner: &mut dyn StageRunner,
    command: usize,
) -> Result<CmdEffect, FsError> {
    let slot = |slots: &[Option<Bytes>], s: Slot| -> Result<Bytes, FsError> {
        slots[s.0 as usize].clone().ok_or_else(|| {
            FsError::Corrupt(format!(
                "command {command} reads slot {} that holds nothing",
                s.0
            ))
        })
    };
    let mut e = CmdEffect::default();
    match r {
        Resolved::Read {
            ino,
            offset,
            len,
            into,
        } => {
            if store.meta(*ino).is_none() {
                return Err(FsError::Corrupt(format!("inode {} vanished", ino.0)));
            }
            let bytes = store.read(*ino, *offset, u64::from(*len));
            e.read_bytes = bytes.len() as u64;
            e.slot = Some((*into, bytes.into()));
        }
        Resolved::Write { ino, offset, from } => {
            let redo = Redo::Write {
                ino: *ino,
                offset: *offset,
                bytes: slot(slots, *from)?,
            };
            keep(store, &mut e, redo, command)?;
        }
        Resolved::Create {
            path,
            ino,
            owner,
            mode,
        } => {
            let redo = Redo::Create {
                path: path.clone(),
                ino: *ino,
                owner: *owner,
                mode: *mode,
            };
            keep(store, &mut e, redo, command)?;
        }
        Resolved::Unlink { path, ino } => {
            let redo = Redo::Unlink {
                path: path.clone(),
                ino: *ino,
            };
            keep(store, &mut e, redo, command)?;
        }
        Resolved::Link { path, ino } => {
            let redo = Redo::Link {
                path: path.clone(),
                ino: *ino,
            };
            keep(store, &mut e, redo, command)?;
        }
        // A new inode of the link's mode, and its target written as its data.
        Resolved::Symlink {
            path,
            ino,
            owner,
            target,
        } => {
            for redo in [
                Redo::Create {
                    path: path.clone(),
                    ino: *ino,
                    owner: *owner,
                    mode: SYMLINK_MODE,
                },
                Redo::Write {
                    ino: *ino,
                    offset: 0,
                    bytes: Bytes::copy_from_slice(target.as_bytes()),
                },
            ] {
                keep(store, &mut e, redo, command)?;
            }
        }
        Resolved::Truncate { ino, len } => {
            let redo = Redo::Truncate {
                ino: *ino,
                len: *len,
            };
            keep(store, &mut e, redo, command)?;
        }
        Resolved::Rename {
            from,
            to,
            ino,
            replaced,
        } => {
            if let Some(old) = replaced {
                let redo = Redo::Unlink {
                    path: to.clone(),
                    ino: *old,
                };
                keep(store, &mut e, redo, command)?;
            }
            let redo = Redo::Rename {
                from: from.clone(),
                to: to.clone(),
                ino: *ino,
            };
            keep(store, &mut e, redo, command)?;
        }
        Resolved::Stage {
            stage,
            inputs,
            into,
        } => {
            let a = slot(slots, inputs[0])?;
            let b = match inputs.get(1) {
                Some(s) => slot(slots, *s)?,
                None => Bytes::new(),
            };
            let run = runner
                .run(stage, &a, &b, MAX_SLOT_BYTES)
                .map_err(|why| FsError::Stage {
                    command,
                    stage: stage.name(),
                    why,
                })?;
            e.fuel = run.fuel;
            e.slot = Some((*into, run.output.into()));
        }
        Resolved::Nop => {}
    }
    if let Some((s, v)) = &e.slot {
        slots[s.0 as usize] = Some(v.clone());
    }
    Ok(e)
}

/// Applies `redo` to `store` and keeps it among the command's records (a file grown past
/// its limit is reported at `command`).
fn keep(
    store: &mut dyn Store,
    e: &mut CmdEffect,
    redo: Redo,
    command: usize,
) -> Result<(), FsError> {
    store.apply(&redo).map_err(|x| x.at(command))?;
    e.redo.push(redo);
    Ok(())
}

/// Validates, resolves and performs `op` for `who` over `medium`, without changing it.
pub fn execute(
    op: &CiscOp,
    who: Credentials,
    medium: &Medium,
    fds: &BTreeMap<(u32, u32), OpenFile>,
    runner: &mut dyn StageRunner,
) -> Result<Executed, FsError> {
    op.validate()?;
    let mut view = View {
        base: medium,
        inodes: BTreeMap::new(),
        names: BTreeMap::new(),
        next_ino: medium.next_ino,
    };
    let mut slots: [Option<Bytes>; MAX_SLOTS as usize] = Default::default();
    let mut out = Executed::default();
    for (s, data) in &op.inputs {
        // The host buffer's DMA into device memory: the op's one copy of its input.
        let bytes = Bytes::copy_from_slice(data);
        slots[s.0 as usize] = Some(bytes.clone());
        out.inputs.push((*s, bytes));
    }
    let mut handles: [Option<OpenFile>; MAX_HANDLES as usize] = Default::default();
    let mut positions: BTreeMap<u32, u64> = BTreeMap::new();
    for (k, c) in op.commands.iter().enumerate() {
        let mut resolver = Resolver {
            who,
            fds,
            view: &mut view,
            handles: &mut handles,
            positions: &mut positions,
            slots: &slots,
            command: k,
        };
        let resolved = resolver.resolve(c)?;
        let mut effect = perform(&resolved, &mut view, &mut slots, runner, k)?;
        effect.entries += resolver_entries(c);
        match c {
            Command::Return { from } => out.returned.push(
                slots[from.0 as usize]
                    .as_deref()
                    .unwrap_or_default()
                    .to_vec(),
            ),
            Command::Close {
                file: FileRef::Fd(fd),
            } => out.closed.push(*fd),
            _ => {}
        }
        out.resolved.push(resolved);
        out.effects.push(effect);
    }
    out.positions = positions.into_iter().collect();
    Ok(out)
}

/// Entries a command examines in the firmware: its inode queue and permission check, plus a
/// directory lookup for commands that name a path.
fn resolver_entries(c: &Command) -> u64 {
    match c {
        Command::Open { .. } | Command::Unlink { .. } | Command::Symlink { .. } => 2,
        Command::Rename { .. } | Command::Link { .. } => 3,
        Command::Process { .. } | Command::Return { .. } => 0,
        _ => 1,
    }
}

struct Resolver<'a, 'm> {
    who: Credentials,
    fds: &'a BTreeMap<(u32, u32), OpenFile>,
    view: &'a mut View<'m>,
    handles: &'a mut [Option<OpenFile>; MAX_HANDLES as usize],
    positions: &'a mut BTreeMap<u32, u64>,
    slots: &'a [Option<Bytes>],
    command: usize,
}

impl Resolver<'_, '_> {
    /// A name of `ino` for messages (the first path that reaches it).
    fn path_of(&self, ino: Ino) -> String {
        let overlay = self.view.names.iter().find(|(_, i)| **i == Some(ino));
        let base = || self.view.base.names.iter().find(|(_, i)| **i == ino);
        match overlay.map(|(p, _)| p).or_else(|| base().map(|(p, _)| p)) {
            Some(p) => p.clone(),
            None => format!("inode {}", ino.0),
        }
    }

    /// The file a reference names and its current position.
    fn file(&self, f: FileRef) -> Result<OpenFile, FsError> {
        let k = self.command;
        match f {
            FileRef::Fd(fd) => {
                let open = self
                    .fds
                    .get(&(self.who.uid, fd))
                    .ok_or(FsError::BadDescriptor { command: k, fd })?;
                let position = self.positions.get(&fd).copied().unwrap_or(open.position);
                Ok(OpenFile {
                    ino: open.ino,
                    position,
                })
            }
            FileRef::Handle(h) => self.handles[h as usize]
                .clone()
                .ok_or(FsError::BadDescriptor {
                    command: k,
                    fd: u32::from(h),
                }),
        }
    }

    fn set_position(&mut self, f: FileRef, position: u64) {
        match f {
            FileRef::Fd(fd) => {
                self.positions.insert(fd, position);
            }
            FileRef::Handle(h) => {
                if let Some(o) = self.handles[h as usize].as_mut() {
                    o.position = position;
                }
            }
        }
    }

    fn check(&self, ino: Ino, write: bool) -> Result<(), FsError> {
        let meta = self.view.meta(ino).ok_or_else(|| FsError::NotFound {
            command: self.command,
            path: self.path_of(ino),
        })?;
        if meta.may(self.who, write) {
            Ok(())
        } else {
            Err(FsError::Permission {
                command: self.command,
                uid: self.who.uid,
                need: if write { "write" } else { "read" },
                path: self.path_of(ino),
            })
        }
    }

    fn slot_len(&self, s: Slot) -> u64 {
        self.slots[s.0 as usize]
            .as_ref()
            .map_or(0, |v| v.len() as u64)
    }

    /// The inode `path` names, if the tenant owns it (what removing or moving a name asks:
    /// a flat namespace has no directory to hold write permission on).
    fn owned(&self, path: &str, need: &'static str) -> Result<Ino, FsError> {
        let ino = self.view.lookup(path).ok_or_else(|| FsError::NotFound {
            command: self.command,
            path: path.to_string(),
        })?;
        if self.view.meta(ino).map(|m| m.owner) != Some(self.who.uid) {
            return Err(FsError::Permission {
                command: self.command,
                uid: self.who.uid,
                need,
                path: path.to_string(),
            });
        }
        Ok(ino)
    }

    /// Whether one more inode fits.
    fn room_for_a_file(&self) -> Result<(), FsError> {
        if self.view.base.inodes.len() + self.view.inodes.len() >= MAX_FILES {
            return Err(FsError::Limit {
                command: self.command,
                what: format!("{MAX_FILES} files"),
            });
        }
        Ok(())
    }

    fn end_of(&self, offset: u64, len: u64) -> Result<u64, FsError> {
        offset
            .checked_add(len)
            .filter(|&e| e <= super::medium::MAX_FILE_BYTES)
            .ok_or_else(|| FsError::Limit {
                command: self.command,
                what: format!(
                    "a write at offset {offset} of {len} bytes would pass the {}-byte file limit",
                    super::medium::MAX_FILE_BYTES
                ),
            })
    }

    // Long: one arm per command kind, each resolving and checking that kind.
    fn resolve(&mut self, c: &Command) -> Result<Resolved, FsError> {
        let k = self.command;
        Ok(match c {
            Command::Open { path, create, into } => {
                check_path(path)?;
                let ino = match self.view.lookup(path) {
                    Some(ino) if self.view.meta(ino).is_some_and(|m| is_symlink(m.mode)) => {
                        return Err(FsError::Symlink {
                            command: k,
                            path: path.clone(),
                        })
                    }
                    Some(ino) => {
                        self.check(ino, false)?;
                        self.handles[*into as usize] = Some(OpenFile { ino, position: 0 });
                        return Ok(Resolved::Nop);
                    }
                    None if *create => Ino(self.view.next_ino),
                    None => {
                        return Err(FsError::NotFound {
                            command: k,
                            path: path.clone(),
                        })
                    }
                };
                self.room_for_a_file()?;
                self.view.next_ino += 1;
                self.handles[*into as usize] = Some(OpenFile { ino, position: 0 });
                Resolved::Create {
                    path: path.clone(),
                    ino,
                    owner: self.who.uid,
                    mode: DEFAULT_MODE,
                }
            }
            Command::Read { file, len, into }
            | Command::Pread {
                file, len, into, ..
            } => {
                let open = self.file(*file)?;
                self.check(open.ino, false)?;
                let offset = match c {
                    Command::Pread { offset, .. } => *offset,
                    _ => {
                        let size = self.view.meta(open.ino).map_or(0, |m| m.size);
                        let read = u64::from(*len).min(size.saturating_sub(open.position));
                        self.set_position(*file, open.position + read);
                        open.position
                    }
                };
                if *len as usize > MAX_SLOT_BYTES {
                    return Err(FsError::Limit {
                        command: k,
                        what: format!("a read of {len} bytes is over a slot's {MAX_SLOT_BYTES}"),
                    });
                }
                Resolved::Read {
                    ino: open.ino,
                    offset,
                    len: *len,
                    into: *into,
                }
            }
            Command::Write { file, from }
            | Command::Pwrite { file, from, .. }
            | Command::Append { file, from } => {
                let open = self.file(*file)?;
                self.check(open.ino, true)?;
                let len = self.slot_len(*from);
                let offset = match c {
                    Command::Pwrite { offset, .. } => *offset,
                    Command::Append { .. } => self.view.meta(open.ino).map_or(0, |m| m.size),
                    _ => open.position,
                };
                let end = self.end_of(offset, len)?;
                if matches!(c, Command::Write { .. }) {
                    self.set_position(*file, end);
                }
                Resolved::Write {
                    ino: open.ino,
                    offset,
                    from: *from,
                }
            }
            Command::Fsync { file } => {
                self.file(*file)?;
                Resolved::Nop
            }
            Command::Close { file } => {
                self.file(*file)?;
                if let FileRef::Handle(h) = file {
                    self.handles[*h as usize] = None;
                }
                Resolved::Nop
            }
            Command::Unlink { path } => {
                check_path(path)?;
                let ino = self.owned(path, "unlink")?;
                Resolved::Unlink {
                    path: path.clone(),
                    ino,
                }
            }
            Command::Truncate { file, len } => {
                let open = self.file(*file)?;
                self.check(open.ino, true)?;
                let len = self.end_of(*len, 0)?;
                Resolved::Truncate { ino: open.ino, len }
            }
            Command::Rename { from, to } => {
                check_path(from)?;
                check_path(to)?;
                let ino = self.owned(from, "rename")?;
                let replaced = match self.view.lookup(to) {
                    Some(old) if old != ino => Some(self.owned(to, "replace")?),
                    // Two names of one file: POSIX says the rename does nothing.
                    Some(_) if from != to => return Ok(Resolved::Nop),
                    _ => None,
                };
                Resolved::Rename {
                    from: from.clone(),
                    to: to.clone(),
                    ino,
                    replaced,
                }
            }
            // Linking asks what renaming does: that the tenant owns the file.
            Command::Link { from, to } => {
                check_path(from)?;
                check_path(to)?;
                let ino = self.owned(from, "link")?;
                if self.view.lookup(to).is_some() {
                    return Err(FsError::Exists {
                        command: k,
                        path: to.clone(),
                    });
                }
                Resolved::Link {
                    path: to.clone(),
                    ino,
                }
            }
            Command::Symlink { target, path } => {
                check_path(path)?;
                if target.is_empty() || target.len() > MAX_TARGET_BYTES || target.contains('\0') {
                    return Err(FsError::Limit {
                        command: k,
                        what: format!(
                            "a symbolic link's target is 1 to {MAX_TARGET_BYTES} bytes without a NUL"
                        ),
                    });
                }
                if self.view.lookup(path).is_some() {
                    return Err(FsError::Exists {
                        command: k,
                        path: path.clone(),
                    });
                }
                self.room_for_a_file()?;
                let ino = Ino(self.view.next_ino);
                self.view.next_ino += 1;
                Resolved::Symlink {
                    path: path.clone(),
                    ino,
                    owner: self.who.uid,
                    target: target.clone(),
                }
            }
            Command::Process {
                stage,
                inputs,
                into,
            } => Resolved::Stage {
                stage: stage.clone(),
                inputs: inputs.clone(),
                into: *into,
            },
            Command::Return { .. } => Resolved::Nop,
        })
    }
}

/// Paths are absolute, bounded, and have no empty, `.` or `..` components.
pub fn check_path(path: &str) -> Result<(), FsError> {
    let ok = path.len() <= MAX_PATH_BYTES
        && path.starts_with('/')
        && path.len() > 1
        && path[1..]
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..");
    if ok {
        Ok(())
    } else {
        Err(FsError::BadPath(path.chars().take(64).collect()))
    }
}
