//! A StorageFS file's bytes, kept in fixed chunks.
//!
//! A chunk holds only the bytes up to the last one written in it: what lies past them, and
//! every chunk never written, reads as zeros and takes no memory. So what a file costs the
//! simulator is what was written to it, not its size (a replay that reads the last page of a
//! 140 MB library makes that page, not 140 MB), and an append neither zeroes nor faults in
//! memory it has not reached yet (a log that grows a record at a time, the CISC ops' common
//! case). Equality is of the bytes, however they are chunked.

use serde::Serialize;
use std::collections::BTreeMap;

/// Bytes a chunk holds at most.
pub const CHUNK: u64 = 64 << 10;

#[derive(Clone, Debug, Default, Serialize)]
pub struct FileData {
    len: u64,
    /// Chunk index → its bytes from the chunk's start to the last one written (at most
    /// `CHUNK`; never empty). Bytes past them read as zeros.
    chunks: BTreeMap<u64, Vec<u8>>,
}

impl FileData {
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Memory the bytes take: what the chunks reserved.
    pub fn held(&self) -> u64 {
        self.chunks.values().map(|c| c.capacity() as u64).sum()
    }

    /// Writes `bytes` at `offset`; the file grows to cover them. The caller checked that
    /// `offset + bytes.len()` fits the file-size bound.
    pub fn write(&mut self, offset: u64, bytes: &[u8]) {
        let mut at = offset;
        let mut rest = bytes;
        while !rest.is_empty() {
            let (index, within) = (at / CHUNK, (at % CHUNK) as usize);
            let n = rest.len().min(CHUNK as usize - within);
            let chunk = self.chunks.entry(index).or_default();
            let end = within + n;
            if end > chunk.capacity() {
                // Grow by doubling, as a vector does, but never past a chunk.
                let want = end.max(2 * chunk.capacity()).min(CHUNK as usize);
                chunk.reserve_exact(want - chunk.len());
            }
            if within > chunk.len() {
                chunk.resize(within, 0);
            }
            // What overlaps the bytes held is overwritten in place, the rest appended.
            let overlap = chunk.len().min(end) - within;
            chunk[within..within + overlap].copy_from_slice(&rest[..overlap]);
            chunk.extend_from_slice(&rest[overlap..n]);
            rest = &rest[n..];
            at += n as u64;
        }
        self.len = self.len.max(offset + bytes.len() as u64);
    }

    /// Sets the size to `len`: cut (the bytes past it gone, so a later growth reads zeros
    /// there) or grown with zeros.
    pub fn truncate(&mut self, len: u64) {
        if len < self.len {
            let first_gone = len.div_ceil(CHUNK);
            self.chunks.split_off(&first_gone);
            let within = (len % CHUNK) as usize;
            if within > 0 {
                if let Some(last) = self.chunks.get_mut(&(len / CHUNK)) {
                    last.truncate(within);
                }
            }
        }
        self.len = len;
    }

    /// Up to `len` bytes at `offset` (fewer at the end of the file).
    pub fn read(&self, offset: u64, len: u64) -> Vec<u8> {
        let (a, b) = (
            offset.min(self.len),
            offset.saturating_add(len).min(self.len),
        );
        let mut out = vec![0; (b - a) as usize];
        for (&index, chunk) in self.chunks.range(a / CHUNK..b.div_ceil(CHUNK)) {
            let start = index * CHUNK;
            let (from, to) = (a.max(start), b.min(start + chunk.len() as u64));
            if from < to {
                out[(from - a) as usize..(to - a) as usize]
                    .copy_from_slice(&chunk[(from - start) as usize..(to - start) as usize]);
            }
        }
        out
    }

    /// The whole file (for small files: tests, symbolic link targets, logs).
    pub fn to_vec(&self) -> Vec<u8> {
        self.read(0, self.len)
    }

    /// Each chunk's bytes up to its last byte other than zero, for the chunks that hold
    /// one, in order (the rest of each chunk is zeros): what equality and a replay's
    /// contents digest compare, so two files of the same bytes agree however they were
    /// written.
    pub fn nonzero_chunks(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        self.chunks.iter().filter_map(|(&i, c)| {
            let end = c.iter().rposition(|&b| b != 0)? + 1;
            Some((i, &c[..end]))
        })
    }
}

impl PartialEq for FileData {
    fn eq(&self, other: &FileData) -> bool {
        self.len == other.len && self.nonzero_chunks().eq(other.nonzero_chunks())
    }
}

impl Eq for FileData {}

impl From<&[u8]> for FileData {
    fn from(bytes: &[u8]) -> FileData {
        let mut d = FileData::default();
        d.write(0, bytes);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a plain vector: writes anywhere (across chunk boundaries), cuts and
        /// growths, then every read and equality.
        #[test]
        fn chunked_bytes_read_as_a_plain_vector_would(
            steps in proptest::collection::vec(
                (any::<bool>(), 0u64..4 * CHUNK, proptest::collection::vec(any::<u8>(), 0..3000)),
                1..40,
            ),
            reads in proptest::collection::vec((0u64..5 * CHUNK, 0u64..3 * CHUNK), 1..10),
        ) {
            let (mut d, mut v) = (FileData::default(), Vec::<u8>::new());
            for (cut, at, bytes) in &steps {
                if *cut {
                    d.truncate(*at);
                    v.resize(*at as usize, 0);
                } else {
                    d.write(*at, bytes);
                    let end = *at as usize + bytes.len();
                    if v.len() < end {
                        v.resize(end, 0);
                    }
                    v[*at as usize..end].copy_from_slice(bytes);
                }
                prop_assert_eq!(d.len(), v.len() as u64);
            }
            for (at, len) in reads {
                let a = (at as usize).min(v.len());
                let b = (at.saturating_add(len) as usize).min(v.len());
                prop_assert_eq!(d.read(at, len), v[a..b].to_vec());
            }
            prop_assert_eq!(d.to_vec(), v.clone());
            prop_assert!(d == FileData::from(&v[..]));
            // What the contents digest hashes: each listed chunk, padded with zeros, is the
            // chunk's bytes as read, and a chunk not listed reads as zeros.
            let listed: Vec<(u64, Vec<u8>)> =
                d.nonzero_chunks().map(|(i, c)| (i, c.to_vec())).collect();
            for i in 0..v.len().div_ceil(CHUNK as usize) as u64 {
                let mut whole = d.read(i * CHUNK, CHUNK);
                whole.resize(CHUNK as usize, 0);
                match listed.iter().find(|(j, _)| *j == i) {
                    Some((_, c)) => {
                        prop_assert_ne!(c.last(), Some(&0));
                        prop_assert_eq!(&whole[..c.len()], &c[..]);
                        prop_assert!(whole[c.len()..].iter().all(|&b| b == 0));
                    }
                    None => prop_assert!(whole.iter().all(|&b| b == 0)),
                }
            }
        }
    }

    #[test]
    fn a_sparse_file_holds_only_what_was_written() {
        let mut d = FileData::default();
        d.write(140_000_000, b"tail");
        assert_eq!(d.len(), 140_000_004);
        assert_eq!(d.held(), 140_000_004 % CHUNK);
        assert_eq!(d.read(139_999_998, 10), b"\0\0tail");
        // Zeros written equal zeros never written.
        let mut z = FileData::default();
        z.write(0, &[0; 10]);
        z.write(140_000_000, b"tail");
        assert_eq!(z, d);
        d.truncate(3);
        assert_eq!(d.held(), 0);
    }

    #[test]
    fn an_append_holds_what_it_wrote_not_a_whole_chunk() {
        let mut d = FileData::default();
        d.write(0, &[7; 4096]);
        assert!(d.held() < CHUNK, "held {}", d.held());
        for k in 1..40u64 {
            d.write(k * 4096, &[k as u8; 4096]);
        }
        // 40 records over three chunks: two full, the third holding 8 of them.
        assert_eq!(d.held(), 2 * CHUNK + 8 * 4096);
        assert_eq!(d.read(39 * 4096, 4096), vec![39; 4096]);
        // A write that leaves a gap reads zeros in it.
        d.write(3 * CHUNK + 100, b"x");
        assert_eq!(d.read(3 * CHUNK + 98, 3), b"\0\0x");
    }
}
