//! LightFS §III-B, Table I: the `.ndpmeta` index file, one per directory.
//!
//! A `.ndpmeta` summarises a directory for near-data processing: a header with the aggregated
//! permissions of its entries, then one 128-byte entry per file or subdirectory with its name,
//! extents, ino, length, permissions and flags. A subdirectory's entry holds the extents of
//! *that* directory's `.ndpmeta`, so the device can walk the tree without the host. Names
//! longer than the 32-byte field continue in the following slots; files with more extents
//! than fit are marked so the host falls back to `filefrag`.
//!
//! Layout (all integers little-endian; one slot = 128 bytes):
//!
//! ```text
//! header slot   0 magic "NDPMETA\0"   8 version u16   10 header flags u16 (bit 0: aggregated
//!               permissions valid)   12 uid u32   16 gid u32   20 mode u16   (Table I: 10 B)
//!               24 size u32 (Table I)   28 file count u32 (Table I)   32 slot count u32
//!               36 crc32 of the whole file with this field zeroed   40..128 zero
//! entry slot    0 name [32] (NUL-padded)   32 extents: 8 × (first block u32, blocks u32)
//!               96 ino u64   104 length u64   112 uid u24, gid u24, mode u16 (Table I: 8 B)
//!               120 flags u16   122..128 zero
//! continuation  0 name bytes [120]   120 flags u16 (CONTINUATION, NAME_CONTINUES if more
//!               follow)   122..128 zero
//! ```
//!
//! csdlab adds the magic, version, slot count and checksum to Table I's header fields: a
//! device must never follow extents out of a corrupt index, so [`NdpMeta::decode`] verifies
//! everything before returning anything.

/// Bytes per header slot, entry and continuation slot.
pub const SLOT_BYTES: usize = 128;
/// Bytes of the name field in an entry.
pub const NAME_FIELD_BYTES: usize = 32;
/// Name bytes a continuation slot carries.
pub const CONTINUATION_NAME_BYTES: usize = 120;
/// Extents an entry can hold; more means "use filefrag".
pub const MAX_EXTENTS: usize = 8;
/// Longest name (POSIX NAME_MAX).
pub const MAX_NAME_BYTES: usize = 255;
/// Largest uid/gid an entry can store (24 bits: Table I's 8-byte permissions field).
pub const MAX_ID: u32 = (1 << 24) - 1;

const MAGIC: &[u8; 8] = b"NDPMETA\0";
const VERSION: u16 = 1;
const HEADER_PERMS_VALID: u16 = 1;

const FLAG_DIR: u16 = 1 << 0;
const FLAG_NAME_CONTINUES: u16 = 1 << 1;
const FLAG_TOO_FRAGMENTED: u16 = 1 << 2;
const FLAG_CONTINUATION: u16 = 1 << 3;
const KNOWN_FLAGS: u16 = FLAG_DIR | FLAG_NAME_CONTINUES | FLAG_TOO_FRAGMENTED | FLAG_CONTINUATION;

pub use crate::perms::Perms;
use std::collections::HashSet;

/// A run of consecutive file-system blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockExtent {
    pub first_block: u32,
    pub blocks: u32,
}

/// Where an entry's data is: its extents, or a note that there were too many to store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// For a file, its data; for a subdirectory, its own `.ndpmeta`.
    Extents(Vec<BlockExtent>),
    /// More than [`MAX_EXTENTS`]: not a small file; the host asks `filefrag` instead.
    TooFragmented,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
}

/// One file or subdirectory of the directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NdpEntry {
    pub name: String,
    pub kind: EntryKind,
    pub ino: u64,
    pub length: u64,
    pub perms: Perms,
    pub layout: Layout,
}

/// A decoded `.ndpmeta`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NdpMeta {
    /// The permissions every entry shares, if they all share one (LightFS checks these once
    /// instead of file by file).
    pub aggregated: Option<Perms>,
    pub entries: Vec<NdpEntry>,
}

/// Why a `.ndpmeta` could not be written or was not trusted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NdpMetaError {
    #[error(".ndpmeta is {0} bytes: not a whole number of 128-byte slots with a header")]
    BadLength(usize),
    #[error(".ndpmeta has no NDPMETA magic: not an index file")]
    BadMagic,
    #[error(".ndpmeta version {0} is not supported (this csdlab reads version 1)")]
    UnsupportedVersion(u16),
    #[error(".ndpmeta header says {header} bytes but the file has {actual}")]
    SizeMismatch { header: u32, actual: usize },
    #[error(
        ".ndpmeta checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): corrupt"
    )]
    Checksum { stored: u32, computed: u32 },
    #[error(".ndpmeta slot {slot}: {reason}")]
    BadSlot { slot: usize, reason: String },
    #[error(".ndpmeta header: {0}")]
    BadHeader(String),
    #[error("cannot store entry '{name}': {reason}")]
    Unencodable { name: String, reason: String },
}

impl NdpMeta {
    /// An index over `entries`, with the aggregated permissions filled in when they agree.
    pub fn new(entries: Vec<NdpEntry>) -> NdpMeta {
        let first = entries.first().map(|e| e.perms);
        let aggregated = first.filter(|p| entries.iter().all(|e| e.perms == *p));
        NdpMeta {
            aggregated,
            entries,
        }
    }

    /// Slots an entry occupies: one, plus continuations for a long name.
    fn slots_for(name: &str) -> usize {
        1 + name
            .len()
            .saturating_sub(NAME_FIELD_BYTES)
            .div_ceil(CONTINUATION_NAME_BYTES)
    }

    /// Size of the encoded file in bytes.
    pub fn encoded_len(&self) -> usize {
        SLOT_BYTES
            * (1 + self
                .entries
                .iter()
                .map(|e| Self::slots_for(&e.name))
                .sum::<usize>())
    }

    pub fn encode(&self) -> Result<Vec<u8>, NdpMetaError> {
        if self
            .aggregated
            .is_some_and(|p| self.entries.iter().any(|e| e.perms != p))
        {
            return Err(NdpMetaError::BadHeader(
                "aggregated permissions differ from an entry's".into(),
            ));
        }
        let len = self.encoded_len();
        let mut out = vec![0u8; len];
        let mut seen = HashSet::with_capacity(self.entries.len());
        for e in &self.entries {
            check_entry(e, &mut seen)?;
        }
        let header = &mut out[..SLOT_BYTES];
        header[0..8].copy_from_slice(MAGIC);
        put16(header, 8, VERSION);
        if let Some(p) = self.aggregated {
            put16(header, 10, HEADER_PERMS_VALID);
            put32(header, 12, p.uid);
            put32(header, 16, p.gid);
            put16(header, 20, p.mode);
        }
        put32(header, 24, len as u32);
        put32(header, 28, self.entries.len() as u32);
        put32(header, 32, (len / SLOT_BYTES - 1) as u32);
        let mut slot = 1;
        for e in &self.entries {
            let s = &mut out[slot * SLOT_BYTES..(slot + 1) * SLOT_BYTES];
            let name = e.name.as_bytes();
            let head = &name[..name.len().min(NAME_FIELD_BYTES)];
            s[..head.len()].copy_from_slice(head);
            let mut flags = if e.kind == EntryKind::Dir {
                FLAG_DIR
            } else {
                0
            };
            match &e.layout {
                Layout::Extents(extents) => {
                    for (k, x) in extents.iter().enumerate() {
                        put32(s, 32 + 8 * k, x.first_block);
                        put32(s, 36 + 8 * k, x.blocks);
                    }
                }
                Layout::TooFragmented => flags |= FLAG_TOO_FRAGMENTED,
            }
            put64(s, 96, e.ino);
            put64(s, 104, e.length);
            put24(s, 112, e.perms.uid);
            put24(s, 115, e.perms.gid);
            put16(s, 118, e.perms.mode);
            let rest = &name[head.len()..];
            if !rest.is_empty() {
                flags |= FLAG_NAME_CONTINUES;
            }
            put16(s, 120, flags);
            slot += 1;
            let pieces = rest.len().div_ceil(CONTINUATION_NAME_BYTES);
            for (k, piece) in rest.chunks(CONTINUATION_NAME_BYTES).enumerate() {
                let c = &mut out[slot * SLOT_BYTES..(slot + 1) * SLOT_BYTES];
                c[..piece.len()].copy_from_slice(piece);
                let more = if k + 1 < pieces {
                    FLAG_NAME_CONTINUES
                } else {
                    0
                };
                put16(c, 120, FLAG_CONTINUATION | more);
                slot += 1;
            }
        }
        let crc = crc32fast::hash(&out);
        put32(&mut out, 36, crc);
        Ok(out)
    }

    /// Decodes and verifies a `.ndpmeta`; nothing is returned from a file that fails a check.
    // Long: the header and each slot's fields are checked in the on-disk order of LightFS Table
    // I, each with its own error.
    pub fn decode(bytes: &[u8]) -> Result<NdpMeta, NdpMetaError> {
        if bytes.len() < SLOT_BYTES || !bytes.len().is_multiple_of(SLOT_BYTES) {
            return Err(NdpMetaError::BadLength(bytes.len()));
        }
        if &bytes[0..8] != MAGIC {
            return Err(NdpMetaError::BadMagic);
        }
        let version = get16(bytes, 8);
        if version != VERSION {
            return Err(NdpMetaError::UnsupportedVersion(version));
        }
        let size = get32(bytes, 24);
        if size as usize != bytes.len() {
            return Err(NdpMetaError::SizeMismatch {
                header: size,
                actual: bytes.len(),
            });
        }
        let stored = get32(bytes, 36);
        let mut zeroed = bytes.to_vec();
        put32(&mut zeroed, 36, 0);
        let computed = crc32fast::hash(&zeroed);
        if stored != computed {
            return Err(NdpMetaError::Checksum { stored, computed });
        }
        let slots = bytes.len() / SLOT_BYTES - 1;
        if get32(bytes, 32) as usize != slots {
            return Err(NdpMetaError::BadHeader(format!(
                "slot count {} but the file holds {slots}",
                get32(bytes, 32)
            )));
        }
        let header_flags = get16(bytes, 10);
        if header_flags & !HEADER_PERMS_VALID != 0 || bytes[40..SLOT_BYTES].iter().any(|&b| b != 0)
        {
            return Err(NdpMetaError::BadHeader(
                "unknown flags or non-zero reserved bytes".into(),
            ));
        }
        let aggregated = (header_flags & HEADER_PERMS_VALID != 0).then(|| Perms {
            uid: get32(bytes, 12),
            gid: get32(bytes, 16),
            mode: get16(bytes, 20),
        });
        let mut entries: Vec<NdpEntry> = Vec::new();
        let mut seen = HashSet::new();
        let mut slot = 1;
        while slot <= slots {
            let s = &bytes[slot * SLOT_BYTES..(slot + 1) * SLOT_BYTES];
            let bad = |reason: &str| NdpMetaError::BadSlot {
                slot,
                reason: reason.to_string(),
            };
            let flags = get16(s, 120);
            if flags & !KNOWN_FLAGS != 0 || s[122..].iter().any(|&b| b != 0) {
                return Err(bad("unknown flags or non-zero reserved bytes"));
            }
            if flags & FLAG_CONTINUATION != 0 {
                return Err(bad("continuation slot without an entry before it"));
            }
            let mut name = nul_trimmed(&s[..NAME_FIELD_BYTES]).to_vec();
            let field_full = name.len() == NAME_FIELD_BYTES;
            let mut continues = flags & FLAG_NAME_CONTINUES != 0;
            if continues && !field_full {
                return Err(bad("name marked as continuing but its field is not full"));
            }
            let layout = if flags & FLAG_TOO_FRAGMENTED != 0 {
                if s[32..96].iter().any(|&b| b != 0) {
                    return Err(bad("too fragmented yet extents stored"));
                }
                Layout::TooFragmented
            } else {
                let mut extents = Vec::new();
                let mut ended = false;
                for k in 0..MAX_EXTENTS {
                    let x = BlockExtent {
                        first_block: get32(s, 32 + 8 * k),
                        blocks: get32(s, 36 + 8 * k),
                    };
                    match (x.blocks, ended) {
                        (0, _) if x.first_block != 0 => {
                            return Err(bad("empty extent with a start block"))
                        }
                        (0, _) => ended = true,
                        (_, true) => return Err(bad("extent after an empty one")),
                        _ => extents.push(x),
                    }
                }
                Layout::Extents(extents)
            };
            let entry_slot = slot;
            slot += 1;
            while continues {
                if slot > slots {
                    return Err(NdpMetaError::BadSlot {
                        slot: entry_slot,
                        reason: "name continues past the end".into(),
                    });
                }
                let c = &bytes[slot * SLOT_BYTES..(slot + 1) * SLOT_BYTES];
                let cflags = get16(c, 120);
                if cflags & !(FLAG_CONTINUATION | FLAG_NAME_CONTINUES) != 0
                    || cflags & FLAG_CONTINUATION == 0
                    || c[122..].iter().any(|&b| b != 0)
                {
                    return Err(NdpMetaError::BadSlot {
                        slot,
                        reason: "expected a name continuation".into(),
                    });
                }
                let piece = nul_trimmed(&c[..CONTINUATION_NAME_BYTES]);
                continues = cflags & FLAG_NAME_CONTINUES != 0;
                if piece.is_empty() || (continues && piece.len() != CONTINUATION_NAME_BYTES) {
                    return Err(NdpMetaError::BadSlot {
                        slot,
                        reason: "name continuation of the wrong length".into(),
                    });
                }
                name.extend_from_slice(piece);
                slot += 1;
            }
            let name = String::from_utf8(name).map_err(|_| NdpMetaError::BadSlot {
                slot: entry_slot,
                reason: "name is not UTF-8".into(),
            })?;
            let perms = Perms {
                uid: get24(s, 112),
                gid: get24(s, 115),
                mode: get16(s, 118),
            };
            let entry = NdpEntry {
                kind: if flags & FLAG_DIR != 0 {
                    EntryKind::Dir
                } else {
                    EntryKind::File
                },
                ino: get64(s, 96),
                length: get64(s, 104),
                perms,
                layout,
                name,
            };
            check_entry(&entry, &mut seen).map_err(|e| NdpMetaError::BadSlot {
                slot: entry_slot,
                reason: e.to_string(),
            })?;
            entries.push(entry);
        }
        if get32(bytes, 28) as usize != entries.len() {
            return Err(NdpMetaError::BadHeader(format!(
                "file count {} but {} entries",
                get32(bytes, 28),
                entries.len()
            )));
        }
        if aggregated.is_some_and(|p| entries.iter().any(|e| e.perms != p)) {
            return Err(NdpMetaError::BadHeader(
                "aggregated permissions differ from an entry's".into(),
            ));
        }
        Ok(NdpMeta {
            aggregated,
            entries,
        })
    }
}

/// What every entry must satisfy, both to be written and to be trusted when read; `seen`
/// holds the names of the entries before it. (A set, not a scan of those entries: a scan
/// made the index of a 50 000-file directory cost 1.2 G name comparisons each way.)
fn check_entry(e: &NdpEntry, seen: &mut HashSet<String>) -> Result<(), NdpMetaError> {
    let fail = |reason: String| {
        Err(NdpMetaError::Unencodable {
            name: e.name.clone(),
            reason,
        })
    };
    if e.name.is_empty() || e.name.len() > MAX_NAME_BYTES {
        return fail(format!("names are 1 to {MAX_NAME_BYTES} bytes"));
    }
    if e.name.contains(['/', '\0']) || e.name == "." || e.name == ".." {
        return fail("not a valid file name".into());
    }
    if e.perms.uid > MAX_ID || e.perms.gid > MAX_ID {
        return fail(format!(
            "uid/gid above {MAX_ID} do not fit the 24-bit fields"
        ));
    }
    if let Layout::Extents(x) = &e.layout {
        if x.len() > MAX_EXTENTS {
            return fail(format!(
                "{} extents; store Layout::TooFragmented beyond {MAX_EXTENTS}",
                x.len()
            ));
        }
        if x.iter().any(|x| x.blocks == 0) {
            return fail("an extent of zero blocks".into());
        }
    }
    if !seen.insert(e.name.clone()) {
        return fail("duplicate name in the directory".into());
    }
    Ok(())
}

fn nul_trimmed(b: &[u8]) -> &[u8] {
    &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put24(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 3].copy_from_slice(&v.to_le_bytes()[..3]);
}
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
fn get16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn get24(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], 0])
}
fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn get64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
