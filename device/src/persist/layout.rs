//! The shared namespace (SIFT §2.5) and the on-disk records of the persistence path.
//!
//! Block 0 is the superblock (ring tails and the sequence numbers found there); then one inode
//! block per file, the files' data blocks (pre-allocated, as in SIFT's benchmarks), the staging
//! ring and the journal ring. Every record names its sequence number, so a scan from a tail
//! recognises exactly the transactions written since, never a stale one from an earlier lap.

use serde::Serialize;

/// Sizes of the three regions, in blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SiftLayout {
    pub block_bytes: u64,
    pub files: u32,
    pub file_blocks: u64,
    pub staging_blocks: u64,
    pub journal_blocks: u64,
}

impl SiftLayout {
    pub const SUPERBLOCK: u64 = 0;

    pub fn inode_block(&self, file: u32) -> u64 {
        1 + u64::from(file)
    }

    pub fn data_block(&self, file: u32, index: u64) -> u64 {
        1 + u64::from(self.files) + u64::from(file) * self.file_blocks + index
    }

    /// First block after the file-system area.
    fn fs_end(&self) -> u64 {
        1 + u64::from(self.files) * (1 + self.file_blocks)
    }

    pub fn staging_block(&self, pos: u64) -> u64 {
        self.fs_end() + pos
    }

    pub fn journal_block(&self, pos: u64) -> u64 {
        self.fs_end() + self.staging_blocks + pos
    }

    pub fn total_blocks(&self) -> u64 {
        self.fs_end() + self.staging_blocks + self.journal_blocks
    }

    /// 8-byte words a descriptor block holds after its magic and before its CRC.
    pub fn descriptor_words(&self) -> usize {
        (self.block_bytes as usize).saturating_sub(16) / 8
    }

    /// Data blocks a staging descriptor can list (4 words of header).
    pub fn max_txn_blocks(&self) -> usize {
        self.descriptor_words().saturating_sub(4)
    }
}

const STAGING_DESC: &[u8; 8] = b"SIFTSTD1";
const COMMIT: &[u8; 8] = b"SIFTCMT1";
const GAP: &[u8; 8] = b"SIFTGAP1";
const JOURNAL_DESC: &[u8; 8] = b"SIFTJD01";
const SUPER: &[u8; 8] = b"SIFTSB01";
const BLOCK_MASK: u64 = (1 << 48) - 1;

/// A foreground staging transaction's descriptor: `[desc][inode][data…][commit]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagingDesc {
    pub seq: u64,
    pub file: u32,
    /// File blocks whose new contents follow the inode block, in order.
    pub blocks: Vec<u64>,
    /// CRC-32 of the inode block and data blocks.
    pub body_crc: u32,
}

impl StagingDesc {
    /// Blocks the transaction occupies in the ring.
    pub fn ring_blocks(&self) -> u64 {
        3 + self.blocks.len() as u64
    }
}

/// A background journal transaction's descriptor: `[desc][inode…][data…][commit]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalDesc {
    pub seq: u64,
    /// Staging transactions it references, as (seq, ring start), oldest first.
    pub staged: Vec<(u64, u64)>,
    /// Files whose inode blocks it carries, in body order.
    pub inodes: Vec<u32>,
    /// (file, block) of the data blocks it carries, in body order.
    pub blocks: Vec<(u32, u64)>,
    pub body_crc: u32,
}

impl JournalDesc {
    /// Blocks the transaction occupies in the ring.
    pub fn ring_blocks(&self) -> u64 {
        2 + (self.inodes.len() + self.blocks.len()) as u64
    }
}

/// Where recovery starts: the ring tails and the sequence numbers expected there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Superblock {
    pub staging_tail: u64,
    pub staging_tail_seq: u64,
    pub journal_tail: u64,
    pub journal_tail_seq: u64,
}

struct Writer(Vec<u8>);

impl Writer {
    fn new(magic: &[u8; 8], block_bytes: u64) -> Writer {
        let mut v = Vec::with_capacity(block_bytes as usize);
        v.extend_from_slice(magic);
        Writer(v)
    }
    fn u64(&mut self, x: u64) -> &mut Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    fn finish(mut self, block_bytes: u64) -> Vec<u8> {
        // A CRC of the record itself, so a torn or stale block never parses.
        let crc = crc32fast::hash(&self.0);
        self.0.extend_from_slice(&u64::from(crc).to_le_bytes());
        assert!(self.0.len() as u64 <= block_bytes, "record fits its block");
        self.0.resize(block_bytes as usize, 0);
        self.0
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// Checks the magic and the record CRC; `words` is how many u64 fields follow the magic.
    fn open(b: &'a [u8], magic: &[u8; 8], words: impl Fn(&[u8]) -> Option<usize>) -> Option<Self> {
        if b.get(..8)? != magic {
            return None;
        }
        let n = words(b)?;
        let end = 8 + 8 * n;
        let crc = u64::from_le_bytes(b.get(end..end + 8)?.try_into().ok()?);
        (u64::from(crc32fast::hash(&b[..end])) == crc).then_some(Reader { b, at: 8 })
    }
    fn u64(&mut self) -> u64 {
        let v = u64::from_le_bytes(self.b[self.at..self.at + 8].try_into().expect("8 bytes"));
        self.at += 8;
        v
    }
}

fn word(b: &[u8], i: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(8 + 8 * i..16 + 8 * i)?.try_into().ok()?,
    ))
}

impl StagingDesc {
    pub fn encode(&self, block_bytes: u64) -> Vec<u8> {
        let mut w = Writer::new(STAGING_DESC, block_bytes);
        w.u64(self.seq)
            .u64(u64::from(self.file))
            .u64(u64::from(self.body_crc))
            .u64(self.blocks.len() as u64);
        for &b in &self.blocks {
            w.u64(b);
        }
        w.finish(block_bytes)
    }

    pub fn decode(b: &[u8]) -> Option<StagingDesc> {
        let mut r = Reader::open(b, STAGING_DESC, |b| Some(4 + word(b, 3)? as usize))?;
        let (seq, file, body_crc, n) = (r.u64(), r.u64() as u32, r.u64() as u32, r.u64());
        let blocks = (0..n).map(|_| r.u64()).collect();
        Some(StagingDesc {
            seq,
            file,
            blocks,
            body_crc,
        })
    }
}

impl JournalDesc {
    pub fn encode(&self, block_bytes: u64) -> Vec<u8> {
        let mut w = Writer::new(JOURNAL_DESC, block_bytes);
        w.u64(self.seq)
            .u64(u64::from(self.body_crc))
            .u64(self.staged.len() as u64)
            .u64(self.inodes.len() as u64)
            .u64(self.blocks.len() as u64);
        for &(s, at) in &self.staged {
            w.u64(s).u64(at);
        }
        for &f in &self.inodes {
            w.u64(u64::from(f));
        }
        // (file, block) packed in one word: 16 bits of file, 48 of block.
        for &(f, b) in &self.blocks {
            w.u64((u64::from(f) << 48) | (b & BLOCK_MASK));
        }
        w.finish(block_bytes)
    }

    pub fn decode(b: &[u8]) -> Option<JournalDesc> {
        let words = |b: &[u8]| {
            let (s, i, d) = (word(b, 2)?, word(b, 3)?, word(b, 4)?);
            Some(5 + 2 * s as usize + i as usize + d as usize)
        };
        let mut r = Reader::open(b, JOURNAL_DESC, words)?;
        let (seq, body_crc) = (r.u64(), r.u64() as u32);
        let (s, i, d) = (r.u64(), r.u64(), r.u64());
        let staged = (0..s).map(|_| (r.u64(), r.u64())).collect();
        let inodes = (0..i).map(|_| r.u64() as u32).collect();
        let blocks = (0..d)
            .map(|_| {
                let w = r.u64();
                ((w >> 48) as u32, w & BLOCK_MASK)
            })
            .collect();
        Some(JournalDesc {
            seq,
            staged,
            inodes,
            blocks,
            body_crc,
        })
    }
}

/// The commit block of staging transaction or journal transaction `seq`.
pub fn encode_commit(kind: u64, seq: u64, body_crc: u32, block_bytes: u64) -> Vec<u8> {
    let mut w = Writer::new(COMMIT, block_bytes);
    w.u64(kind).u64(seq).u64(u64::from(body_crc));
    w.finish(block_bytes)
}

/// Is `b` the commit block of (`kind`, `seq`, `body_crc`)?
pub fn is_commit(b: &[u8], kind: u64, seq: u64, body_crc: u32) -> bool {
    Reader::open(b, COMMIT, |_| Some(3))
        .is_some_and(|mut r| r.u64() == kind && r.u64() == seq && r.u64() == u64::from(body_crc))
}

/// Marks the blocks skipped at the end of a ring before a wrap, for the transaction `seq` that
/// follows at position 0.
pub fn encode_gap(seq: u64, block_bytes: u64) -> Vec<u8> {
    let mut w = Writer::new(GAP, block_bytes);
    w.u64(seq);
    w.finish(block_bytes)
}

pub fn is_gap(b: &[u8], seq: u64) -> bool {
    Reader::open(b, GAP, |_| Some(1)).is_some_and(|mut r| r.u64() == seq)
}

impl Superblock {
    pub fn encode(&self, block_bytes: u64) -> Vec<u8> {
        let mut w = Writer::new(SUPER, block_bytes);
        w.u64(self.staging_tail)
            .u64(self.staging_tail_seq)
            .u64(self.journal_tail)
            .u64(self.journal_tail_seq);
        w.finish(block_bytes)
    }

    pub fn decode(b: &[u8]) -> Option<Superblock> {
        let mut r = Reader::open(b, SUPER, |_| Some(4))?;
        Some(Superblock {
            staging_tail: r.u64(),
            staging_tail_seq: r.u64(),
            journal_tail: r.u64(),
            journal_tail_seq: r.u64(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_reject_corruption() {
        let d = StagingDesc {
            seq: 9,
            file: 2,
            blocks: vec![4, 5, 90],
            body_crc: 0xdead_beef,
        };
        let mut b = d.encode(512);
        assert_eq!(StagingDesc::decode(&b), Some(d.clone()));
        b[20] ^= 1;
        assert_eq!(StagingDesc::decode(&b), None, "a flipped bit is caught");
        let j = JournalDesc {
            seq: 3,
            staged: vec![(9, 40)],
            inodes: vec![2],
            blocks: vec![(2, 4), (1, 7)],
            body_crc: 7,
        };
        assert_eq!(JournalDesc::decode(&j.encode(512)), Some(j));
        assert!(is_commit(&encode_commit(1, 9, 5, 512), 1, 9, 5));
        assert!(
            !is_commit(&encode_commit(1, 9, 5, 512), 1, 10, 5),
            "stale lap"
        );
        assert!(is_gap(&encode_gap(4, 512), 4));
        let s = Superblock {
            staging_tail: 1,
            staging_tail_seq: 2,
            journal_tail: 3,
            journal_tail_seq: 4,
        };
        assert_eq!(Superblock::decode(&s.encode(512)), Some(s));
        assert_eq!(StagingDesc::decode(&vec![0; 512]), None);
    }
}
