//! The `Search` instruction of ISPFS Fig. 5, as the host writes it to a command file and
//! reads it back: little-endian `u32`s and a 32-byte filename, 152 bytes in all.
//!
//! ```text
//! u32 scmd; u32 keyword[4]; char filename[32]; u32 ino; u32 offset; u32 len;
//! u32 cnt[4]; u32 addr[4][4]; u32 flag; u32 us;
//! ```
//!
//! A keyword is one 32-bit word, matched at any byte alignment; a keyword of 0 is an unused
//! slot. The filename (NUL-padded) names the file in the command file's directory; with an
//! empty filename, `ino` does. `cnt`, `addr`, `flag` and `us` are the engine's to fill.

use std::fmt;

/// Bytes of one `Search` instruction.
pub const SEARCH_BYTES: usize = 4 + 16 + 32 + 4 + 4 + 4 + 16 + 64 + 4 + 4;
/// Keywords one instruction queries.
pub const KEYWORDS: usize = 4;
/// The filename field's size.
pub const FILENAME_BYTES: usize = 32;

/// What an instruction asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scmd {
    /// Count the keywords and report where the first ones are.
    WordQuery,
    /// Run a CISC-op stage (a built-in or `task:export` of a Wasm task) over the range; its
    /// name fills the 16 keyword bytes, its output comes back in the results.
    Stage,
}

impl Scmd {
    pub const fn code(self) -> u32 {
        match self {
            Scmd::WordQuery => 1,
            Scmd::Stage => 2,
        }
    }

    pub fn from_code(code: u32) -> Option<Scmd> {
        match code {
            1 => Some(Scmd::WordQuery),
            2 => Some(Scmd::Stage),
            _ => None,
        }
    }
}

/// Bytes of a stage's name (the keyword field's).
pub const STAGE_NAME_BYTES: usize = 4 * KEYWORDS;
/// Bytes of a stage's output the results region holds after its length (`cnt[0]`).
pub const STAGE_OUTPUT_BYTES: usize = 4 * (KEYWORDS - 1) + 4 * KEYWORDS * 4;

/// Why an instruction is refused (the engine reports it through the command file's read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IspError {
    /// Not a whole `Search` structure.
    Size {
        bytes: usize,
    },
    UnknownScmd {
        code: u32,
    },
    NoKeywords,
    TooManyKeywords {
        given: usize,
    },
    ZeroLength,
    /// The filename does not fit its 32-byte field, or is not UTF-8.
    Filename(String),
    /// `offset + len` overflows.
    Range {
        offset: u32,
        len: u32,
    },
    /// No file of that name in the command file's directory.
    NoSuchFile(String),
    /// No file has that inode number.
    NoSuchInode(u32),
    /// The target is a directory, or the command file itself.
    NotAFile(String),
    /// The submitting application may not read the target.
    PermissionDenied(String),
    /// The range starts at or past the file's end.
    PastEnd {
        offset: u32,
        size: u64,
    },
    /// A stage instruction the engine cannot run: its name, its input, or the stage failed.
    Stage(String),
}

impl IspError {
    /// The code the engine leaves in `flag` for a refused instruction ([`FLAG_DONE`] means
    /// the results are valid, 0 that nothing ran).
    pub fn code(&self) -> u32 {
        0x100
            + match self {
                IspError::Size { .. } => 1,
                IspError::UnknownScmd { .. } => 2,
                IspError::NoKeywords => 3,
                IspError::TooManyKeywords { .. } => 4,
                IspError::ZeroLength => 5,
                IspError::Filename(_) => 6,
                IspError::Range { .. } => 7,
                IspError::NoSuchFile(_) => 8,
                IspError::NoSuchInode(_) => 9,
                IspError::NotAFile(_) => 10,
                IspError::PermissionDenied(_) => 11,
                IspError::PastEnd { .. } => 12,
                IspError::Stage(_) => 13,
            }
    }
}

/// `flag` once an instruction's results are valid.
pub const FLAG_DONE: u32 = 1;

impl fmt::Display for IspError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IspError::Size { bytes } if *bytes == SEARCH_BYTES + 4 => write!(
                f,
                "an instruction is {SEARCH_BYTES} bytes (a Search structure), not {bytes}: \
                 a fifth keyword does not fit its {KEYWORDS} slots"
            ),
            IspError::Size { bytes } => write!(
                f,
                "an instruction is {SEARCH_BYTES} bytes (a Search structure), not {bytes}"
            ),
            IspError::UnknownScmd { code } => write!(f, "unknown scmd {code}"),
            IspError::NoKeywords => write!(f, "the instruction queries no keyword"),
            IspError::TooManyKeywords { given } => {
                write!(
                    f,
                    "{given} keywords; an instruction holds at most {KEYWORDS}"
                )
            }
            IspError::ZeroLength => write!(f, "the instruction covers 0 bytes"),
            IspError::Filename(why) => write!(f, "filename: {why}"),
            IspError::Range { offset, len } => {
                write!(f, "offset {offset} + length {len} overflows 32 bits")
            }
            IspError::NoSuchFile(name) => write!(f, "no file '{name}' in this directory"),
            IspError::NoSuchInode(ino) => write!(f, "no file has inode {ino}"),
            IspError::NotAFile(what) => write!(f, "'{what}' is not a regular file"),
            IspError::PermissionDenied(what) => {
                write!(f, "permission denied: the caller may not read '{what}'")
            }
            IspError::PastEnd { offset, size } => {
                write!(
                    f,
                    "offset {offset} is at or past the file's end ({size} bytes)"
                )
            }
            IspError::Stage(why) => write!(f, "stage: {why}"),
        }
    }
}

impl std::error::Error for IspError {}

/// One `Search` instruction and, once the engine ran it, its results.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Search {
    pub scmd: u32,
    pub keyword: [u32; KEYWORDS],
    pub filename: String,
    pub ino: u32,
    pub offset: u32,
    pub len: u32,
    pub cnt: [u32; KEYWORDS],
    pub addr: [[u32; super::MAX_ADDRS]; KEYWORDS],
    /// 1 once the results are valid (the paper's completion flag); an error code otherwise.
    pub flag: u32,
    /// The engine's time, in µs.
    pub us: u32,
}

impl Search {
    /// A word query over `len` bytes at `offset` of `filename` (in the command file's
    /// directory), checked as the engine checks it.
    pub fn word_query(
        keywords: &[u32],
        filename: &str,
        offset: u32,
        len: u32,
    ) -> Result<Search, IspError> {
        if keywords.len() > KEYWORDS {
            return Err(IspError::TooManyKeywords {
                given: keywords.len(),
            });
        }
        let mut keyword = [0; KEYWORDS];
        keyword[..keywords.len()].copy_from_slice(keywords);
        let s = Search {
            scmd: Scmd::WordQuery.code(),
            keyword,
            filename: filename.to_string(),
            offset,
            len,
            ..Search::default()
        };
        s.check()?;
        Ok(s)
    }

    /// An instruction that runs `stage` (at most [`STAGE_NAME_BYTES`] bytes: a built-in such
    /// as `crc32`, or `task:export`) over `len` bytes at `offset` of `filename`.
    pub fn stage(stage: &str, filename: &str, offset: u32, len: u32) -> Result<Search, IspError> {
        let s = Search {
            scmd: Scmd::Stage.code(),
            keyword: Search::stage_keywords(stage)?,
            filename: filename.to_string(),
            offset,
            len,
            ..Search::default()
        };
        s.check()?;
        Ok(s)
    }

    /// A stage's name as a stage instruction carries it: NUL-padded in the keyword bytes.
    pub fn stage_keywords(stage: &str) -> Result<[u32; KEYWORDS], IspError> {
        let name = stage.as_bytes();
        if name.is_empty() || name.len() > STAGE_NAME_BYTES || name.contains(&0) {
            return Err(IspError::Stage(format!(
                "a stage name is 1 to {STAGE_NAME_BYTES} bytes without NUL, not '{}'",
                stage.escape_debug()
            )));
        }
        let mut bytes = [0u8; STAGE_NAME_BYTES];
        bytes[..name.len()].copy_from_slice(name);
        let mut keyword = [0; KEYWORDS];
        for (k, c) in keyword.iter_mut().zip(bytes.chunks_exact(4)) {
            *k = u32::from_le_bytes(c.try_into().expect("4 bytes"));
        }
        Ok(keyword)
    }

    /// The stage a [`Scmd::Stage`] instruction names (its keyword bytes up to the first NUL).
    pub fn stage_name(&self) -> Result<String, IspError> {
        let bytes: Vec<u8> = self.keyword.iter().flat_map(|k| k.to_le_bytes()).collect();
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        let name = std::str::from_utf8(&bytes[..end])
            .map_err(|_| IspError::Stage("the stage name is not UTF-8".into()))?;
        if name.is_empty() {
            return Err(IspError::Stage("no stage named".into()));
        }
        Ok(name.to_string())
    }

    /// Puts a stage's output in the results: its length in `cnt[0]`, then as many of its
    /// bytes as fit ([`STAGE_OUTPUT_BYTES`]) through `cnt[1..]` and `addr`.
    pub fn set_stage_output(&mut self, output: &[u8]) {
        self.cnt[0] = u32::try_from(output.len()).unwrap_or(u32::MAX);
        let mut region = [0u8; STAGE_OUTPUT_BYTES];
        let n = output.len().min(STAGE_OUTPUT_BYTES);
        region[..n].copy_from_slice(&output[..n]);
        let mut words = region
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")));
        for c in self.cnt.iter_mut().skip(1) {
            *c = words.next().unwrap_or(0);
        }
        for a in self.addr.iter_mut().flatten() {
            *a = words.next().unwrap_or(0);
        }
    }

    /// The stage output the results hold (at most [`STAGE_OUTPUT_BYTES`] of it).
    pub fn stage_output(&self) -> Vec<u8> {
        let bytes: Vec<u8> = self.cnt[1..]
            .iter()
            .chain(self.addr.iter().flatten())
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let n = (self.cnt[0] as usize).min(STAGE_OUTPUT_BYTES);
        bytes[..n].to_vec()
    }

    /// The checks the engine makes before it starts.
    pub fn check(&self) -> Result<Scmd, IspError> {
        let scmd = Scmd::from_code(self.scmd).ok_or(IspError::UnknownScmd { code: self.scmd })?;
        if scmd == Scmd::Stage {
            self.stage_name()?;
        } else if self.keyword.iter().all(|&k| k == 0) {
            return Err(IspError::NoKeywords);
        }
        if self.len == 0 {
            return Err(IspError::ZeroLength);
        }
        if self.offset.checked_add(self.len).is_none() {
            return Err(IspError::Range {
                offset: self.offset,
                len: self.len,
            });
        }
        if self.filename.len() > FILENAME_BYTES {
            return Err(IspError::Filename(format!(
                "'{}' is {} bytes; the field holds {FILENAME_BYTES}",
                self.filename,
                self.filename.len()
            )));
        }
        Ok(scmd)
    }

    /// The structure's bytes.
    pub fn encode(&self) -> Result<[u8; SEARCH_BYTES], IspError> {
        if self.filename.len() > FILENAME_BYTES || self.filename.contains('\0') {
            return Err(IspError::Filename(format!(
                "'{}' does not fit {FILENAME_BYTES} NUL-padded bytes",
                self.filename.escape_debug()
            )));
        }
        let mut out = [0u8; SEARCH_BYTES];
        let mut w = Writer {
            out: &mut out,
            at: 0,
        };
        w.u32(self.scmd);
        self.keyword.iter().for_each(|&k| w.u32(k));
        w.bytes(self.filename.as_bytes(), FILENAME_BYTES);
        for v in [self.ino, self.offset, self.len] {
            w.u32(v);
        }
        self.cnt.iter().for_each(|&c| w.u32(c));
        self.addr.iter().flatten().for_each(|&a| w.u32(a));
        w.u32(self.flag);
        w.u32(self.us);
        Ok(out)
    }

    /// Reads a structure a host wrote; only its size and filename are checked here.
    pub fn decode(bytes: &[u8]) -> Result<Search, IspError> {
        let bytes: &[u8; SEARCH_BYTES] = bytes
            .try_into()
            .map_err(|_| IspError::Size { bytes: bytes.len() })?;
        let mut r = Reader { bytes, at: 0 };
        let scmd = r.u32();
        let keyword = [r.u32(), r.u32(), r.u32(), r.u32()];
        let name = r.take(FILENAME_BYTES);
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(FILENAME_BYTES)];
        let filename = std::str::from_utf8(name)
            .map_err(|_| IspError::Filename("not UTF-8".into()))?
            .to_string();
        let (ino, offset, len) = (r.u32(), r.u32(), r.u32());
        let cnt = [r.u32(), r.u32(), r.u32(), r.u32()];
        let mut addr = [[0; super::MAX_ADDRS]; KEYWORDS];
        for a in addr.iter_mut().flatten() {
            *a = r.u32();
        }
        Ok(Search {
            scmd,
            keyword,
            filename,
            ino,
            offset,
            len,
            cnt,
            addr,
            flag: r.u32(),
            us: r.u32(),
        })
    }
}

struct Writer<'a> {
    out: &'a mut [u8; SEARCH_BYTES],
    at: usize,
}

impl Writer<'_> {
    fn u32(&mut self, v: u32) {
        self.out[self.at..self.at + 4].copy_from_slice(&v.to_le_bytes());
        self.at += 4;
    }

    fn bytes(&mut self, b: &[u8], field: usize) {
        self.out[self.at..self.at + b.len()].copy_from_slice(b);
        self.at += field;
    }
}

struct Reader<'a> {
    bytes: &'a [u8; SEARCH_BYTES],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> &'a [u8] {
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        s
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().expect("4 bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_round_trips_through_its_152_bytes() {
        let mut s = Search::word_query(&[0x6f6c6c65, 7], "notes.txt", 16, 4096).unwrap();
        s.cnt = [3, 1, 0, 0];
        s.addr[0] = [16, 40, 900, 0];
        s.flag = 1;
        s.us = 55;
        let bytes = s.encode().unwrap();
        assert_eq!(bytes.len(), SEARCH_BYTES);
        assert_eq!(SEARCH_BYTES, 152);
        assert_eq!(Search::decode(&bytes).unwrap(), s);
        assert_eq!(s.check(), Ok(Scmd::WordQuery));
    }

    #[test]
    fn a_stage_instruction_names_its_stage_and_carries_its_output() {
        let mut s = Search::stage("crc32", "log", 0, 4096).unwrap();
        assert_eq!(s.check(), Ok(Scmd::Stage));
        assert_eq!(s.stage_name().unwrap(), "crc32");
        let back = Search::decode(&s.encode().unwrap()).unwrap();
        assert_eq!(back.stage_name().unwrap(), "crc32");
        let out: Vec<u8> = (0..100).collect();
        s.set_stage_output(&out);
        assert_eq!(s.cnt[0], 100);
        assert_eq!(s.stage_output(), out[..STAGE_OUTPUT_BYTES].to_vec());
        s.set_stage_output(&[7, 8, 9]);
        assert_eq!(s.stage_output(), vec![7, 8, 9]);
        assert!(Search::stage("", "f", 0, 1).is_err());
        assert!(Search::stage("seventeen-bytes!!", "f", 0, 1).is_err());
    }

    #[test]
    fn malformed_instructions_are_named() {
        let long = "x".repeat(33);
        assert_eq!(
            Search::word_query(&[1, 2, 3, 4, 5], "f", 0, 1),
            Err(IspError::TooManyKeywords { given: 5 })
        );
        assert_eq!(
            Search::word_query(&[1], "f", 0, 0),
            Err(IspError::ZeroLength)
        );
        assert_eq!(
            Search::word_query(&[], "f", 0, 1),
            Err(IspError::NoKeywords)
        );
        assert!(matches!(
            Search::word_query(&[1], &long, 0, 1),
            Err(IspError::Filename(_))
        ));
        assert_eq!(
            Search::word_query(&[1], "f", u32::MAX, 2),
            Err(IspError::Range {
                offset: u32::MAX,
                len: 2
            })
        );
        let mut s = Search::word_query(&[1], "f", 0, 1).unwrap();
        s.scmd = 9;
        assert_eq!(s.check(), Err(IspError::UnknownScmd { code: 9 }));
        assert_eq!(Search::decode(&[0; 10]), Err(IspError::Size { bytes: 10 }));
        let mut bytes = s.encode().unwrap();
        bytes[20] = 0xff; // the filename's first byte: not UTF-8
        assert!(matches!(Search::decode(&bytes), Err(IspError::Filename(_))));
    }
}
