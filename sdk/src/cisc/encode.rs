//! The op's page: FusionFS's extended NVMe command, laid out little endian.
//!
//! ```text
//! header    16 B   "CISC", version, grain, commands, inputs, string-table length
//! inputs     8 B × n   slot, 3 reserved, length u32  (the buffers travel as their own DMA)
//! commands  32 B × n   opcode, file kind, slot a, slot b, slot out, flags, stage, handle,
//!                      file u32, length u32, offset u64, string offset u16, length u16
//! strings              paths and user-stage names
//! ```
//!
//! Decoding trusts nothing: every length and offset is checked against the page, and the
//! decoded op is validated like a built one.

use super::command::{CiscOp, Command, FileRef, Slot, Stage, TxGrain, OP_PAGE_BYTES};
use super::error::CiscError;

const MAGIC: &[u8; 4] = b"CISC";
const VERSION: u8 = 1;
const HEADER: usize = 16;
const INPUT: usize = 8;
const COMMAND: usize = 32;
const NONE: u8 = 0xFF;

/// Opcodes, in the NVMe-extension's vendor range.
mod opcode {
    pub const OPEN: u8 = 0x81;
    pub const READ: u8 = 0x82;
    pub const PREAD: u8 = 0x83;
    pub const WRITE: u8 = 0x84;
    pub const PWRITE: u8 = 0x85;
    pub const APPEND: u8 = 0x86;
    pub const FSYNC: u8 = 0x87;
    pub const CLOSE: u8 = 0x88;
    pub const UNLINK: u8 = 0x89;
    pub const PROCESS: u8 = 0x8A;
    pub const RETURN: u8 = 0x8B;
    pub const TRUNCATE: u8 = 0x8C;
    pub const RENAME: u8 = 0x8D;
    pub const LINK: u8 = 0x8E;
    pub const SYMLINK: u8 = 0x8F;
}

const BUILT_IN: [Stage; 7] = [
    Stage::Crc32,
    Stage::Compress,
    Stage::Decompress,
    Stage::Search,
    Stage::Sort,
    Stage::Xor,
    Stage::Multiply,
];

/// One command's fixed-size entry, before it is packed.
#[derive(Default)]
struct Entry {
    opcode: u8,
    file: Option<FileRef>,
    a: Option<Slot>,
    b: Option<Slot>,
    out: Option<Slot>,
    flags: u8,
    stage: u8,
    handle: u8,
    len: u32,
    offset: u64,
    text: Option<String>,
}

impl CiscOp {
    /// The encoded size in bytes (header, inputs, commands and strings).
    pub fn encoded_len(&self) -> usize {
        let strings: usize = self.commands.iter().map(text_len).sum();
        HEADER + INPUT * self.inputs.len() + COMMAND * self.commands.len() + strings
    }

    /// The op's page, exactly [`OP_PAGE_BYTES`] long. Validates first.
    pub fn encode(&self) -> Result<Vec<u8>, CiscError> {
        self.validate()?;
        let mut page = vec![0u8; OP_PAGE_BYTES];
        let strings_at = HEADER + INPUT * self.inputs.len() + COMMAND * self.commands.len();
        let mut strings = Vec::new();
        for (i, (slot, data)) in self.inputs.iter().enumerate() {
            let at = HEADER + INPUT * i;
            page[at] = slot.0;
            page[at + 4..at + 8].copy_from_slice(&(data.len() as u32).to_le_bytes());
        }
        for (i, c) in self.commands.iter().enumerate() {
            let e = entry(c);
            let at = HEADER + INPUT * self.inputs.len() + COMMAND * i;
            let (kind, file) = match e.file {
                None => (0, 0),
                Some(FileRef::Fd(fd)) => (1, fd),
                Some(FileRef::Handle(h)) => (2, u32::from(h)),
            };
            let slot = |s: Option<Slot>| s.map_or(NONE, |s| s.0);
            page[at..at + 8].copy_from_slice(&[
                e.opcode,
                kind,
                slot(e.a),
                slot(e.b),
                slot(e.out),
                e.flags,
                e.stage,
                e.handle,
            ]);
            page[at + 8..at + 12].copy_from_slice(&file.to_le_bytes());
            page[at + 12..at + 16].copy_from_slice(&e.len.to_le_bytes());
            page[at + 16..at + 24].copy_from_slice(&e.offset.to_le_bytes());
            if let Some(text) = e.text {
                let off = strings.len() as u16;
                page[at + 24..at + 26].copy_from_slice(&off.to_le_bytes());
                page[at + 26..at + 28].copy_from_slice(&(text.len() as u16).to_le_bytes());
                strings.extend_from_slice(text.as_bytes());
            }
        }
        page[..4].copy_from_slice(MAGIC);
        page[4] = VERSION;
        page[5] = match self.grain {
            TxGrain::Macro => 0,
            TxGrain::Micro => 1,
        };
        page[6] = self.commands.len() as u8;
        page[7] = self.inputs.len() as u8;
        page[8..10].copy_from_slice(&(strings.len() as u16).to_le_bytes());
        page[strings_at..strings_at + strings.len()].copy_from_slice(&strings);
        Ok(page)
    }

    /// Decodes a page and the host buffers it describes (in input order), and validates
    /// the result.
    pub fn decode(page: &[u8], buffers: Vec<Vec<u8>>) -> Result<CiscOp, CiscError> {
        let bad = |why: &str| CiscError::Malformed(why.to_string());
        if page.len() < HEADER || page.len() > OP_PAGE_BYTES {
            return Err(bad("the page is not between 16 and 4096 bytes"));
        }
        if &page[..4] != MAGIC {
            return Err(bad("no CISC magic"));
        }
        if page[4] != VERSION {
            return Err(CiscError::Malformed(format!(
                "version {} (known: 1)",
                page[4]
            )));
        }
        let grain = match page[5] {
            0 => TxGrain::Macro,
            1 => TxGrain::Micro,
            g => return Err(CiscError::Malformed(format!("transaction grain {g}"))),
        };
        let (n, inputs) = (page[6] as usize, page[7] as usize);
        let strings_len = u16::from_le_bytes([page[8], page[9]]) as usize;
        let strings_at = HEADER + INPUT * inputs + COMMAND * n;
        let strings = page
            .get(strings_at..strings_at + strings_len)
            .ok_or_else(|| bad("the string table runs past the page"))?;
        if buffers.len() != inputs {
            return Err(CiscError::Malformed(format!(
                "the page names {inputs} host buffers, {} came with it",
                buffers.len()
            )));
        }
        let mut op = CiscOp {
            grain,
            ..CiscOp::default()
        };
        for (i, data) in buffers.into_iter().enumerate() {
            let at = HEADER + INPUT * i;
            let len = u32::from_le_bytes(page[at + 4..at + 8].try_into().expect("4 bytes"));
            if len as usize != data.len() {
                return Err(CiscError::Malformed(format!(
                    "host buffer {i} is {} bytes, the page says {len}",
                    data.len()
                )));
            }
            op.inputs.push((Slot(page[at]), data));
        }
        for i in 0..n {
            let at = HEADER + INPUT * inputs + COMMAND * i;
            op.commands
                .push(decode_command(i, &page[at..at + COMMAND], strings)?);
        }
        op.validate()?;
        Ok(op)
    }
}

// Long: one arm per command, each naming the fields its opcode uses.
fn entry(c: &Command) -> Entry {
    use opcode::*;
    match c {
        Command::Open { path, create, into } => Entry {
            opcode: OPEN,
            flags: u8::from(*create),
            handle: *into,
            text: Some(path.clone()),
            ..Entry::default()
        },
        Command::Read { file, len, into } => Entry {
            opcode: READ,
            file: Some(*file),
            len: *len,
            out: Some(*into),
            ..Entry::default()
        },
        Command::Pread {
            file,
            offset,
            len,
            into,
        } => Entry {
            opcode: PREAD,
            file: Some(*file),
            offset: *offset,
            len: *len,
            out: Some(*into),
            ..Entry::default()
        },
        Command::Write { file, from } => io(WRITE, *file, *from, 0),
        Command::Pwrite { file, offset, from } => io(PWRITE, *file, *from, *offset),
        Command::Append { file, from } => io(APPEND, *file, *from, 0),
        Command::Fsync { file } => Entry {
            opcode: FSYNC,
            file: Some(*file),
            ..Entry::default()
        },
        Command::Close { file } => Entry {
            opcode: CLOSE,
            file: Some(*file),
            ..Entry::default()
        },
        Command::Unlink { path } => Entry {
            opcode: UNLINK,
            text: Some(path.clone()),
            ..Entry::default()
        },
        Command::Truncate { file, len } => Entry {
            opcode: TRUNCATE,
            file: Some(*file),
            offset: *len,
            ..Entry::default()
        },
        // Both paths in one string, split at a NUL (which no path holds).
        Command::Rename { from, to } => Entry {
            opcode: RENAME,
            text: Some(format!("{from}\0{to}")),
            ..Entry::default()
        },
        Command::Link { from, to } => Entry {
            opcode: LINK,
            text: Some(format!("{from}\0{to}")),
            ..Entry::default()
        },
        Command::Symlink { target, path } => Entry {
            opcode: SYMLINK,
            text: Some(format!("{target}\0{path}")),
            ..Entry::default()
        },
        Command::Process {
            stage,
            inputs,
            into,
        } => {
            let code = BUILT_IN.iter().position(|s| s == stage);
            Entry {
                opcode: PROCESS,
                a: inputs.first().copied(),
                b: inputs.get(1).copied(),
                out: Some(*into),
                flags: inputs.len() as u8,
                stage: code.map_or(0, |k| k as u8 + 1),
                text: code.is_none().then(|| stage.name()),
                ..Entry::default()
            }
        }
        Command::Return { from } => Entry {
            opcode: RETURN,
            a: Some(*from),
            ..Entry::default()
        },
    }
}

/// The bytes a command puts in the string table (what `entry` would, without building it).
fn text_len(c: &Command) -> usize {
    match c {
        Command::Open { path, .. } | Command::Unlink { path } => path.len(),
        Command::Rename { from, to }
        | Command::Link { from, to }
        | Command::Symlink {
            target: from,
            path: to,
        } => from.len() + 1 + to.len(),
        Command::Process {
            stage: Stage::User { task, export },
            ..
        } => task.len() + 1 + export.len(),
        _ => 0,
    }
}

fn io(opcode: u8, file: FileRef, from: Slot, offset: u64) -> Entry {
    Entry {
        opcode,
        file: Some(file),
        a: Some(from),
        offset,
        ..Entry::default()
    }
}

// Long: one arm per opcode, each reading the fields that opcode uses.
fn decode_command(i: usize, e: &[u8], strings: &[u8]) -> Result<Command, CiscError> {
    use opcode::*;
    let malformed = |why: String| CiscError::Malformed(format!("command {i}: {why}"));
    let slot = |b: u8| (b != NONE).then_some(Slot(b));
    let need = |b: u8, what: &str| slot(b).ok_or_else(|| malformed(format!("no {what} slot")));
    let fd = u32::from_le_bytes(e[8..12].try_into().expect("4 bytes"));
    let file = || match e[1] {
        1 => Ok(FileRef::Fd(fd)),
        2 => u8::try_from(fd)
            .map(FileRef::Handle)
            .map_err(|_| malformed(format!("handle {fd}"))),
        k => Err(malformed(format!("file kind {k}"))),
    };
    let len = u32::from_le_bytes(e[12..16].try_into().expect("4 bytes"));
    let offset = u64::from_le_bytes(e[16..24].try_into().expect("8 bytes"));
    let text = || {
        let off = u16::from_le_bytes([e[24], e[25]]) as usize;
        let n = u16::from_le_bytes([e[26], e[27]]) as usize;
        let bytes = strings
            .get(off..off + n)
            .ok_or_else(|| malformed("its string runs past the string table".into()))?;
        String::from_utf8(bytes.to_vec()).map_err(|_| malformed("a string is not UTF-8".into()))
    };
    Ok(match e[0] {
        OPEN => Command::Open {
            path: text()?,
            create: e[5] & 1 == 1,
            into: e[7],
        },
        READ => Command::Read {
            file: file()?,
            len,
            into: need(e[4], "output")?,
        },
        PREAD => Command::Pread {
            file: file()?,
            offset,
            len,
            into: need(e[4], "output")?,
        },
        WRITE => Command::Write {
            file: file()?,
            from: need(e[2], "input")?,
        },
        PWRITE => Command::Pwrite {
            file: file()?,
            offset,
            from: need(e[2], "input")?,
        },
        APPEND => Command::Append {
            file: file()?,
            from: need(e[2], "input")?,
        },
        FSYNC => Command::Fsync { file: file()? },
        CLOSE => Command::Close { file: file()? },
        UNLINK => Command::Unlink { path: text()? },
        TRUNCATE => Command::Truncate {
            file: file()?,
            len: offset,
        },
        RENAME | LINK | SYMLINK => {
            let both = text()?;
            let (from, to) = both
                .split_once('\0')
                .ok_or_else(|| malformed("a rename, link or symlink names one path".into()))?;
            let (from, to) = (from.into(), to.into());
            match e[0] {
                RENAME => Command::Rename { from, to },
                LINK => Command::Link { from, to },
                _ => Command::Symlink {
                    target: from,
                    path: to,
                },
            }
        }
        PROCESS => {
            let stage = match e[6] {
                0 => {
                    let name = text()?;
                    Stage::parse(&name).ok_or(CiscError::UnknownStage { command: i, name })?
                }
                k => BUILT_IN.get(k as usize - 1).cloned().ok_or_else(|| {
                    CiscError::UnknownStage {
                        command: i,
                        name: format!("built-in #{k}"),
                    }
                })?,
            };
            let inputs = [e[2], e[3]]
                .into_iter()
                .take(e[5] as usize)
                .map(|b| need(b, "input"))
                .collect::<Result<Vec<_>, _>>()?;
            if e[5] as usize > 2 {
                return Err(malformed(format!("{} stage inputs", e[5])));
            }
            Command::Process {
                stage,
                inputs,
                into: need(e[4], "output")?,
            }
        }
        RETURN => Command::Return {
            from: need(e[2], "input")?,
        },
        k => return Err(malformed(format!("unknown opcode {k:#04x}"))),
    })
}
