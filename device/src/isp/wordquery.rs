//! What the word-query engine computes: for each of up to four 32-bit keywords, how many
//! times its four little-endian bytes occur in the file's range (at any byte alignment,
//! overlapping occurrences counted), and the file offsets of the first [`MAX_ADDRS`].
//!
//! The engine sees the range as the controller delivers it, chunk by chunk; a keyword may
//! straddle two chunks, so the last three bytes of each chunk are carried into the next
//! comparison. The result does not depend on how the range was cut.

use super::instruction::KEYWORDS;

/// Match addresses the engine reports per keyword (the paper's `addr[4][4]`).
pub const MAX_ADDRS: usize = 4;

/// A word query in progress.
#[derive(Clone, Debug)]
pub struct WordQuery {
    keywords: [u32; KEYWORDS],
    /// The file offset of the next byte fed.
    at: u64,
    /// The last up to three bytes fed, which a match may start in.
    tail: Vec<u8>,
    pub cnt: [u32; KEYWORDS],
    pub addr: [[u32; MAX_ADDRS]; KEYWORDS],
    /// Bytes compared.
    pub bytes: u64,
}

impl WordQuery {
    /// A query for `keywords` (0: an unused slot) over a range starting at file offset
    /// `offset`.
    pub fn new(keywords: [u32; KEYWORDS], offset: u64) -> WordQuery {
        WordQuery {
            keywords,
            at: offset,
            tail: Vec::with_capacity(3),
            cnt: [0; KEYWORDS],
            addr: [[0; MAX_ADDRS]; KEYWORDS],
            bytes: 0,
        }
    }

    /// Compares the next `chunk` of the range.
    pub fn feed(&mut self, chunk: &[u8]) {
        // Windows that start in the carried tail and end in this chunk, then the chunk's own.
        let carried = self.tail.len();
        let mut joint = std::mem::take(&mut self.tail);
        joint.extend_from_slice(&chunk[..chunk.len().min(3)]);
        self.scan(&joint, self.at - carried as u64, carried);
        self.scan(chunk, self.at, chunk.len());
        // The last three bytes seen: where the next chunk's straddling windows start.
        self.tail = if chunk.len() >= 3 {
            chunk[chunk.len() - 3..].to_vec()
        } else {
            joint[joint.len().saturating_sub(3)..].to_vec()
        };
        self.at += chunk.len() as u64;
        self.bytes += chunk.len() as u64;
    }

    /// Counts matches of windows starting at `bytes[..starts]` (file offset `base`).
    fn scan(&mut self, bytes: &[u8], base: u64, starts: usize) {
        for (i, w) in bytes.windows(4).take(starts).enumerate() {
            let word = u32::from_le_bytes(w.try_into().expect("4 bytes"));
            for k in 0..KEYWORDS {
                if self.keywords[k] != 0 && self.keywords[k] == word {
                    let n = self.cnt[k] as usize;
                    if n < MAX_ADDRS {
                        self.addr[k][n] = u32::try_from(base + i as u64).unwrap_or(u32::MAX);
                    }
                    self.cnt[k] = self.cnt[k].saturating_add(1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every alignment of the whole range at once: what any cut must agree with.
    fn plain(data: &[u8], keys: [u32; KEYWORDS], offset: u64) -> WordQuery {
        let mut q = WordQuery::new(keys, offset);
        q.scan(data, offset, data.len());
        q
    }

    proptest! {
        #[test]
        fn any_cut_finds_what_a_plain_search_finds(
            data in proptest::collection::vec(0u8..4, 0..300),
            picks in proptest::collection::vec(any::<usize>(), 4),
            cuts in proptest::collection::vec(0usize..40, 0..20),
        ) {
            // Keywords taken from the data (so they occur), and one that may not.
            let mut keys = [0u32; KEYWORDS];
            for (k, p) in keys.iter_mut().zip(&picks).take(3) {
                if data.len() >= 4 {
                    let at = p % (data.len() - 3);
                    *k = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
                }
            }
            keys[3] = 0x0302_0100;
            let want = plain(&data, keys, 7);
            let mut q = WordQuery::new(keys, 7);
            let mut rest = &data[..];
            for c in cuts {
                let c = c.min(rest.len());
                q.feed(&rest[..c]);
                rest = &rest[c..];
            }
            q.feed(rest);
            prop_assert_eq!(q.cnt, want.cnt);
            prop_assert_eq!(q.addr, want.addr);
            prop_assert_eq!(q.bytes, data.len() as u64);
        }
    }

    #[test]
    fn a_keyword_straddling_chunks_is_found_once() {
        let data = b"xxABCDyyABCD";
        let key = u32::from_le_bytes(*b"ABCD");
        for cut in 0..=data.len() {
            let mut q = WordQuery::new([key, 0, 0, 0], 100);
            q.feed(&data[..cut]);
            q.feed(&data[cut..]);
            assert_eq!(q.cnt[0], 2, "cut at {cut}");
            assert_eq!(&q.addr[0][..2], &[102, 108], "cut at {cut}");
        }
    }
}
