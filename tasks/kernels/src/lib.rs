//! Compute kernels of the example tasks. Plain functions over byte slices, so the same code
//! runs natively (as the benchmark's baseline) and inside a task (compiled to Wasm).
//! Ordinary crates work in tasks: `grep` uses `memchr`, the CISC-op `compress`
//! stage uses `lz4_flex`.

/// The chunk the streaming tasks (`stats32`, `stats64`, `checksum`; `grep`, `knn` and
/// `wordquery` on files larger than it) read a file in, and the native baseline of `csd
/// bench tasks` reads the same file in.
pub const STREAM_CHUNK: usize = 512 << 10;

/// Sum of the data as little-endian u32s, wrapping in u64 (LightFS's STATS32).
pub fn stats32(data: &[u8]) -> u64 {
    sum_words::<4>(data)
}

/// Sum of the data as little-endian u64s, wrapping (LightFS's STATS64).
pub fn stats64(data: &[u8]) -> u64 {
    sum_words::<8>(data)
}

/// Wrapping sum of `W`-byte little-endian words (a trailing partial word is ignored).
///
/// Eight independent accumulators per 64-byte block: the loop vectorises natively and in
/// Wasm SIMD, and in Wasm it runs one fuel-metered block per 64 bytes instead of per word.
fn sum_words<const W: usize>(data: &[u8]) -> u64 {
    let word = |b: &[u8]| -> u64 {
        let mut v = [0u8; 8];
        v[..W].copy_from_slice(&b[..W]);
        u64::from_le_bytes(v)
    };
    let mut acc = [0u64; 8];
    let mut blocks = data.chunks_exact(64);
    for block in &mut blocks {
        for (lane, a) in acc.iter_mut().enumerate() {
            for w in block[lane * 8..lane * 8 + 8].chunks_exact(W) {
                *a = a.wrapping_add(word(w));
            }
        }
    }
    let mut sum = acc.iter().fold(0u64, |x, &y| x.wrapping_add(y));
    for w in blocks.remainder().chunks_exact(W) {
        sum = sum.wrapping_add(word(w));
    }
    sum
}

/// Dimensions of a KNN vector (LightFS's KNN: 128-dimensional f32 vectors).
pub const KNN_DIM: usize = 128;

/// One nearest neighbour: vector index in its file and L2 distance to the query.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Neighbor {
    pub index: u64,
    pub distance: f32,
}

/// Squared L2 distance of one little-endian f32 vector (`KNN_DIM * 4` bytes) to `query`.
pub fn l2_squared(vector: &[u8], query: &[f32]) -> f32 {
    // Eight independent accumulators, dimension i into accumulator i % 8: a fixed order
    // (identical results natively and in Wasm) that still lets the compiler vectorise.
    let mut acc = [0f32; 8];
    let dims = (vector.len() / 4).min(query.len());
    let whole = dims / 8 * 8;
    // Eight dimensions a step, so the accumulators are two 4-lane vectors and a step is a
    // handful of vector instructions (in Wasm, fewer loop headers, each a fuel check).
    for (v, q) in vector[..whole * 4]
        .chunks_exact(32)
        .zip(query[..whole].chunks_exact(8))
    {
        for (j, a) in acc.iter_mut().enumerate() {
            let d = f32::from_le_bytes([v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]]) - q[j];
            *a += d * d;
        }
    }
    for i in whole..dims {
        let v = &vector[4 * i..4 * i + 4];
        let d = f32::from_le_bytes([v[0], v[1], v[2], v[3]]) - query[i];
        acc[i % 8] += d * d;
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

/// Squared L2 distance summed in order, one dimension after the other: the textbook loop
/// LightFS's KNN runs (its Table III time), where [`l2_squared`] keeps eight accumulators.
pub fn l2_squared_in_order(vector: &[u8], query: &[f32]) -> f32 {
    let mut sum = 0f32;
    for (v, q) in vector.chunks_exact(4).zip(query) {
        let d = f32::from_le_bytes([v[0], v[1], v[2], v[3]]) - q;
        sum += d * d;
    }
    sum
}

/// The `k` vectors of `data` closest to `query`, nearest first (ties: lower index first).
/// `data` holds consecutive vectors; a trailing partial vector is ignored.
pub fn knn(data: &[u8], query: &[f32], k: usize) -> Vec<Neighbor> {
    let mut stream = KnnStream::new(query, k);
    stream.feed(data);
    stream.finish()
}

/// Bytes of one KNN vector.
const KNN_VECTOR_BYTES: usize = KNN_DIM * 4;

/// [`knn`] over a file that arrives in pieces (a task's streamed reads): the same
/// neighbours, in memory bounded by `k` rather than by the file. A vector split between two
/// pieces is joined; a trailing partial vector is ignored, as [`knn`] ignores it.
pub struct KnnStream<'q> {
    query: &'q [f32],
    k: usize,
    best: Vec<(f32, u64)>,
    /// Index of the next whole vector.
    next: u64,
    /// The first bytes of a vector the last piece cut off.
    partial: Vec<u8>,
}

impl<'q> KnnStream<'q> {
    pub fn new(query: &'q [f32], k: usize) -> KnnStream<'q> {
        KnnStream {
            query,
            k,
            // `k` is the caller's: the list grows with the neighbours actually found.
            best: Vec::with_capacity(k.min(1024) + 1),
            next: 0,
            partial: Vec::new(),
        }
    }

    pub fn feed(&mut self, mut data: &[u8]) {
        if !self.partial.is_empty() {
            let take = (KNN_VECTOR_BYTES - self.partial.len()).min(data.len());
            self.partial.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.partial.len() < KNN_VECTOR_BYTES {
                return;
            }
            let joined = std::mem::take(&mut self.partial);
            self.offer(&joined);
            self.partial = joined;
            self.partial.clear();
        }
        // State in locals: a vector costs the task what it costs in `knn`'s loop.
        let (query, k, mut index) = (self.query, self.k, self.next);
        let mut best = std::mem::take(&mut self.best);
        let mut vectors = data.chunks_exact(KNN_VECTOR_BYTES);
        for v in &mut vectors {
            keep_nearest(&mut best, k, l2_squared(v, query), index);
            index += 1;
        }
        (self.best, self.next) = (best, index);
        self.partial.extend_from_slice(vectors.remainder());
    }

    fn offer(&mut self, vector: &[u8]) {
        let index = self.next;
        self.next += 1;
        keep_nearest(
            &mut self.best,
            self.k,
            l2_squared(vector, self.query),
            index,
        );
    }

    /// The neighbours, nearest first.
    pub fn finish(self) -> Vec<Neighbor> {
        into_neighbors(self.best)
    }
}

/// Inserts a vector at distance `d` into `best`, the `k` nearest so far in order, unless
/// it is no nearer than all of them.
#[inline(always)]
fn keep_nearest(best: &mut Vec<(f32, u64)>, k: usize, d: f32, index: u64) {
    // `total_cmp` orders NaN too (after every number), so corrupt vectors cannot make the
    // result depend on comparison quirks.
    if best.len() == k
        && best
            .last()
            .is_some_and(|&(worst, _)| d.total_cmp(&worst).is_ge())
    {
        return;
    }
    let at = best.partition_point(|&(bd, _)| bd.total_cmp(&d).is_le());
    best.insert(at, (d, index));
    best.truncate(k);
}

fn into_neighbors(best: Vec<(f32, u64)>) -> Vec<Neighbor> {
    best.into_iter()
        .map(|(d, index)| Neighbor {
            index,
            distance: d.sqrt(),
        })
        .collect()
}

/// [`knn`] with the distances summed in order ([`l2_squared_in_order`]).
pub fn knn_in_order(data: &[u8], query: &[f32], k: usize) -> Vec<Neighbor> {
    let mut best: Vec<(f32, u64)> = Vec::with_capacity(k.min(1024) + 1);
    for (index, v) in data.chunks_exact(KNN_VECTOR_BYTES).enumerate() {
        keep_nearest(&mut best, k, l2_squared_in_order(v, query), index as u64);
    }
    into_neighbors(best)
}

/// Non-overlapping occurrences of `needle`: the count and the first `max_offsets` offsets.
/// An empty needle occurs nowhere.
pub fn grep(haystack: &[u8], needle: &[u8], max_offsets: usize) -> (u64, Vec<u64>) {
    let mut stream = GrepStream::new(needle, max_offsets);
    stream.feed(haystack);
    stream.finish()
}

/// [`grep`] over a file that arrives in pieces (a task's streamed reads): the same count
/// and offsets, a match that straddles two pieces included, in memory bounded by the
/// needle rather than by the file.
pub struct GrepStream<'n> {
    finder: memchr::memmem::Finder<'n>,
    found: Found,
    /// File offset of the next piece.
    fed: u64,
    /// The last bytes fed that no match covers and a match may still start in: fewer than
    /// the needle's length.
    carry: Vec<u8>,
    /// Scratch: the carry joined with the next piece's first bytes.
    window: Vec<u8>,
}

impl<'n> GrepStream<'n> {
    pub fn new(needle: &'n [u8], max_offsets: usize) -> GrepStream<'n> {
        GrepStream {
            finder: memchr::memmem::Finder::new(needle),
            found: Found {
                max_offsets,
                count: 0,
                offsets: Vec::new(),
            },
            fed: 0,
            carry: Vec::new(),
            window: Vec::new(),
        }
    }

    /// Searches the next piece of the file. Matches are non-overlapping and found left to
    /// right, as in one pass over the whole file: the carry starts where the last match
    /// ended, so a match starting in it is the one that pass would find next.
    pub fn feed(&mut self, piece: &[u8]) {
        let m = self.finder.needle().len();
        if m == 0 {
            return;
        }
        let base = self.fed;
        self.fed += piece.len() as u64;
        // Positions below are in the carry followed by the piece.
        let c = self.carry.len();
        let mut end = 0;
        if c > 0 {
            // A match starting in the carry ends within the piece's first m - 1 bytes.
            self.window.clear();
            self.window.extend_from_slice(&self.carry);
            self.window
                .extend_from_slice(&piece[..piece.len().min(m - 1)]);
            if let Some(p) = self.finder.find(&self.window).filter(|&p| p < c) {
                self.found.record(base - c as u64 + p as u64);
                end = p + m;
            }
        }
        let from = end.saturating_sub(c);
        // The count in a local, the offset arithmetic only for offsets kept: a match costs
        // the task few instructions (its fuel is its modelled device time).
        let (mut count, mut last) = (self.found.count, None);
        let found = &mut self.found;
        for at in self.finder.find_iter(&piece[from..]) {
            if found.offsets.len() < found.max_offsets {
                found.offsets.push(base + (from + at) as u64);
            }
            count += 1;
            last = Some(at);
        }
        found.count = count;
        if let Some(at) = last {
            end = c + from + at + m;
        }
        // Keep what a match may still start in: past the last match, at most m - 1 bytes.
        let start = end.max((c + piece.len()).saturating_sub(m - 1));
        if start < c {
            // The piece was shorter than m - 1: the carry grows, still below m bytes.
            self.carry.drain(..start);
            self.carry.extend_from_slice(piece);
        } else {
            self.carry.clear();
            self.carry.extend_from_slice(&piece[start - c..]);
        }
    }

    /// The count and the first offsets.
    pub fn finish(self) -> (u64, Vec<u64>) {
        (self.found.count, self.found.offsets)
    }
}

/// What a grep found: every match counted, the first `max_offsets` kept.
struct Found {
    max_offsets: usize,
    count: u64,
    offsets: Vec<u64>,
}

impl Found {
    fn record(&mut self, at: u64) {
        if self.offsets.len() < self.max_offsets {
            self.offsets.push(at);
        }
        self.count += 1;
    }
}

/// The same count as [`grep`] with the textbook byte-wise matcher the LightFS paper's
/// Grep-ARM runs on the device CPU: at every position, compare the pattern byte by byte.
/// Kept beside the memchr version so the model can be checked against the paper's
/// algorithm (LightFS Table III) while tasks keep the fast one.
pub fn grep_bytewise(haystack: &[u8], needle: &[u8], max_offsets: usize) -> (u64, Vec<u64>) {
    let mut count = 0u64;
    let mut offsets = Vec::new();
    if needle.is_empty() || needle.len() > haystack.len() {
        return (0, offsets);
    }
    for at in 0..=haystack.len() - needle.len() {
        let mut j = 0;
        while j < needle.len() && haystack[at + j] == needle[j] {
            j += 1;
        }
        if j == needle.len() {
            if offsets.len() < max_offsets {
                offsets.push(at as u64);
            }
            count += 1;
        }
    }
    (count, offsets)
}

/// CRC-32 (IEEE) of the data.
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// The eight 256-entry tables of slicing-by-8 CRC-32 (IEEE, reflected), built at compile
/// time: table `s` advances a byte's contribution by `s` further bytes.
const fn slice_by_8_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut s = 1;
        while s < 8 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            s += 1;
        }
        i += 1;
    }
    t
}

static SLICE_BY_8: [[u32; 256]; 8] = slice_by_8_tables();

/// CRC-32 (IEEE) by slicing-by-8, the same value as [`crc32`]. This is the algorithm of the
/// Linux kernel's generic `crc32_le`/`__crc32c_le` (`CRC_LE_BITS = 64`), which FusionFS's
/// StorageFS calls for append-CRC-write; the CISC-op `crc32` stage runs it because in Wasm it
/// takes about a quarter fewer instructions per byte than crc32fast's slicing-by-16, whose
/// table addressing Wasm cannot fold into its loads.
pub fn crc32_slice_by_8(data: &[u8]) -> u32 {
    let mut crc = Crc32Slice8::new();
    crc.update(data);
    crc.finalize()
}

/// [`crc32_slice_by_8`] over data that arrives in pieces (a task's streamed reads).
#[derive(Clone, Copy, Debug)]
pub struct Crc32Slice8 {
    crc: u32,
}

impl Default for Crc32Slice8 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32Slice8 {
    pub fn new() -> Crc32Slice8 {
        Crc32Slice8 { crc: !0 }
    }

    #[inline]
    pub fn update(&mut self, data: &[u8]) {
        let t = &SLICE_BY_8;
        let mut crc = self.crc;
        let mut words = data.chunks_exact(8);
        for w in &mut words {
            let lo = u32::from_le_bytes([w[0], w[1], w[2], w[3]]) ^ crc;
            let hi = u32::from_le_bytes([w[4], w[5], w[6], w[7]]);
            crc = t[7][(lo & 0xff) as usize]
                ^ t[6][((lo >> 8) & 0xff) as usize]
                ^ t[5][((lo >> 16) & 0xff) as usize]
                ^ t[4][(lo >> 24) as usize]
                ^ t[3][(hi & 0xff) as usize]
                ^ t[2][((hi >> 8) & 0xff) as usize]
                ^ t[1][((hi >> 16) & 0xff) as usize]
                ^ t[0][(hi >> 24) as usize];
        }
        for &b in words.remainder() {
            crc = t[0][((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
        }
        self.crc = crc;
    }

    pub fn finalize(self) -> u32 {
        !self.crc
    }
}

/// Hits of one keyword in a word query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WordHits {
    pub count: u64,
    pub addresses: Vec<u64>,
}

/// The most keywords one query takes (ISPFS's word-query instruction carries four).
pub const MAX_QUERY_WORDS: usize = 4;

/// ISPFS word query: for each keyword, how often it occurs as a whole word and the byte
/// addresses of its first `max_addresses` occurrences. Words are maximal runs of ASCII
/// letters, digits and `_`; matching is exact.
pub fn word_query(text: &[u8], keywords: &[&[u8]], max_addresses: usize) -> Vec<WordHits> {
    let mut query = WordQueryStream::new(keywords, max_addresses);
    query.feed(text);
    query.finish()
}

/// [`word_query`] over a file that arrives in pieces (a task's streamed reads): the same
/// counts and addresses, a word cut between pieces included. Memory is bounded by the
/// longest keyword: of a word still open at a piece's end only its first bytes are kept,
/// and none once it is longer than every keyword (it can match none).
pub struct WordQueryStream<'k> {
    keywords: &'k [&'k [u8]],
    max_addresses: usize,
    hits: Vec<WordHits>,
    /// File offset of the next piece.
    fed: u64,
    /// The word open at the last piece's end: where it began, and its bytes (`None` once it
    /// is longer than every keyword).
    open: Option<(u64, Option<Vec<u8>>)>,
    longest: usize,
}

impl<'k> WordQueryStream<'k> {
    pub fn new(keywords: &'k [&'k [u8]], max_addresses: usize) -> WordQueryStream<'k> {
        WordQueryStream {
            keywords,
            max_addresses,
            hits: vec![
                WordHits {
                    count: 0,
                    addresses: Vec::new()
                };
                keywords.len()
            ],
            fed: 0,
            open: None,
            longest: keywords.iter().map(|k| k.len()).max().unwrap_or(0),
        }
    }

    pub fn feed(&mut self, piece: &[u8]) {
        let base = self.fed;
        self.fed += piece.len() as u64;
        let mut i = 0;
        if let Some((start, bytes)) = self.open.take() {
            // The word open before this piece goes on to the first byte that is not a word's.
            let end = piece
                .iter()
                .position(|&b| !is_word_byte(b))
                .unwrap_or(piece.len());
            let bytes = bytes.and_then(|mut b| {
                (b.len() + end <= self.longest).then(|| {
                    b.extend_from_slice(&piece[..end]);
                    b
                })
            });
            if end == piece.len() {
                self.open = Some((start, bytes));
                return;
            }
            if let Some(word) = bytes {
                self.record(&word, start);
            }
            i = end;
        }
        while i < piece.len() {
            if !is_word_byte(piece[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < piece.len() && is_word_byte(piece[i]) {
                i += 1;
            }
            let word = &piece[start..i];
            if i == piece.len() {
                let kept = (word.len() <= self.longest).then(|| word.to_vec());
                self.open = Some((base + start as u64, kept));
                return;
            }
            self.record(word, base + start as u64);
        }
    }

    fn record(&mut self, word: &[u8], at: u64) {
        for (k, h) in self.keywords.iter().zip(self.hits.iter_mut()) {
            if *k == word {
                h.count += 1;
                if h.addresses.len() < self.max_addresses {
                    h.addresses.push(at);
                }
            }
        }
    }

    /// The hits per keyword, in the keywords' order.
    pub fn finish(mut self) -> Vec<WordHits> {
        if let Some((start, Some(word))) = self.open.take() {
            self.record(&word, start);
        }
        self.hits
    }
}

/// A byte of a word in a word query: ASCII letters, digits and `_`.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Decompresses a word-aligned run-length-encoded bitmap, handing the output to `emit` in
/// pieces. Returns the number of output bytes.
///
/// Input: little-endian u32 words. A word with bit 31 set is a *fill*: bit 30 is the fill
/// bit and bits 0–29 count output words (32 bits each) of all-zeros or all-ones. A word with
/// bit 31 clear is a *literal header*: its value counts the u32 words that follow, copied to
/// the output as they are.
pub fn rle_bitmap_decompress(input: &[u8], mut emit: impl FnMut(&[u8])) -> Result<u64, String> {
    if input.len() % 4 != 0 {
        return Err(format!(
            "input length {} is not a multiple of 4",
            input.len()
        ));
    }
    let words: Vec<u32> = input
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let mut out = Vec::with_capacity(1 << 16);
    let mut total = 0u64;
    let mut flush = |out: &mut Vec<u8>, total: &mut u64| {
        *total += out.len() as u64;
        emit(out);
        out.clear();
    };
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        i += 1;
        if w & 0x8000_0000 != 0 {
            let byte = if w & 0x4000_0000 != 0 { 0xff } else { 0x00 };
            let mut remaining = u64::from(w & 0x3fff_ffff) * 4;
            while remaining > 0 {
                let room = (out.capacity() - out.len()).max(4) as u64;
                let n = remaining.min(room) as usize;
                out.resize(out.len() + n, byte);
                remaining -= n as u64;
                if out.len() >= 1 << 16 {
                    flush(&mut out, &mut total);
                }
            }
        } else {
            let n = w as usize;
            let Some(literals) = words.get(i..i + n) else {
                return Err(format!(
                    "literal run of {n} words at word {} runs past the end",
                    i - 1
                ));
            };
            for l in literals {
                out.extend_from_slice(&l.to_le_bytes());
                if out.len() >= 1 << 16 {
                    flush(&mut out, &mut total);
                }
            }
            i += n;
        }
    }
    if !out.is_empty() {
        flush(&mut out, &mut total);
    }
    Ok(total)
}

/// Bytes a CSR graph is read in: the host page cache's page, and a block of the file.
pub const GRAPH_PAGE_BYTES: usize = 4096;

/// A graph in compressed sparse row form, as stored in a file (little-endian u32
/// `node_count`, `edge_count`, then `node_count + 1` offsets, then `edge_count` targets),
/// read the way a BFS over `pread` reads it: a page at a time, when the search first needs
/// a word in it. Which vertex comes next depends on the bytes just read, so each miss is
/// one synchronous read of [`GRAPH_PAGE_BYTES`]; a page once read is kept.
pub struct PagedCsr<R> {
    read: R,
    size: u64,
    pages: Vec<Option<Box<[u8]>>>,
    pub nodes: u32,
    pub edges: u32,
    /// Pages read so far (the search's I/O requests).
    pub reads: u64,
}

impl<R: FnMut(u64, &mut [u8]) -> usize> PagedCsr<R> {
    /// Opens a graph file of `size` bytes whose bytes at an offset `read` fills in (returning
    /// how many it got); checks the header against the size.
    pub fn open(size: u64, read: R) -> Result<PagedCsr<R>, String> {
        if size < 8 {
            return Err("graph file shorter than its 8-byte header".into());
        }
        let pages = usize::try_from(size.div_ceil(GRAPH_PAGE_BYTES as u64))
            .map_err(|_| format!("graph file of {size} bytes is too large"))?;
        let mut g = PagedCsr {
            read,
            size,
            pages: (0..pages).map(|_| None).collect(),
            nodes: 0,
            edges: 0,
            reads: 0,
        };
        let (nodes, edges) = (g.word(0)?, g.word(1)?);
        let need = 8 + 4 * (u64::from(nodes) + 1 + u64::from(edges));
        if size != need {
            return Err(format!(
                "graph file is {size} bytes; {nodes} nodes and {edges} edges need {need}"
            ));
        }
        g.nodes = nodes;
        g.edges = edges;
        Ok(g)
    }

    /// The little-endian u32 at word `index` of the file, reading its page on a miss.
    fn word(&mut self, index: u64) -> Result<u32, String> {
        let off = index
            .checked_mul(4)
            .filter(|o| o.checked_add(4).is_some_and(|end| end <= self.size))
            .ok_or_else(|| format!("word {index} is past the graph file's end"))?;
        let page = (off / GRAPH_PAGE_BYTES as u64) as usize;
        let at = (off % GRAPH_PAGE_BYTES as u64) as usize;
        let slot = &mut self.pages[page];
        let bytes = match slot {
            Some(bytes) => bytes,
            None => {
                let len = (self.size - page as u64 * GRAPH_PAGE_BYTES as u64)
                    .min(GRAPH_PAGE_BYTES as u64) as usize;
                let mut buf = vec![0u8; len].into_boxed_slice();
                let got = (self.read)(page as u64 * GRAPH_PAGE_BYTES as u64, &mut buf);
                self.reads += 1;
                if got < len {
                    return Err(format!(
                        "graph file ended early: page {page} gave {got} of {len} bytes"
                    ));
                }
                slot.insert(buf)
            }
        };
        // Words are 4-aligned and pages 4 KiB, so a word never straddles two pages.
        Ok(u32::from_le_bytes([
            bytes[at],
            bytes[at + 1],
            bytes[at + 2],
            bytes[at + 3],
        ]))
    }

    /// Node `node`'s edges as a range of edge indices, checked against the edge count.
    fn edge_range(&mut self, node: u32) -> Result<(u32, u32), String> {
        let (a, b) = (
            self.word(2 + u64::from(node))?,
            self.word(3 + u64::from(node))?,
        );
        if a > b || b > self.edges {
            return Err(format!(
                "offsets of node {node} ({a}..{b}) are out of order or past {} edges",
                self.edges
            ));
        }
        Ok((a, b))
    }

    /// The target of edge `e`, checked to be a node.
    fn target(&mut self, e: u32) -> Result<u32, String> {
        let v = self.word(3 + u64::from(self.nodes) + u64::from(e))?;
        if v >= self.nodes {
            return Err(format!("edge {e} points to node {v} of {}", self.nodes));
        }
        Ok(v)
    }
}

/// A graph's adjacency lists in the file form [`PagedCsr`] reads.
pub fn encode_csr(adj: &[Vec<u32>]) -> Vec<u8> {
    let edges: usize = adj.iter().map(Vec::len).sum();
    let mut words = Vec::with_capacity(3 + adj.len() + edges);
    words.extend([adj.len() as u32, edges as u32]);
    let mut off = 0u32;
    for a in adj {
        words.push(off);
        off += a.len() as u32;
    }
    words.push(off);
    words.extend(adj.iter().flatten());
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Distance marking an unreachable node.
pub const UNREACHABLE: u32 = u32::MAX;

/// Breadth-first search: hop distance of every node from `source`, reading the graph's pages
/// as the search reaches them.
pub fn bfs<R: FnMut(u64, &mut [u8]) -> usize>(
    graph: &mut PagedCsr<R>,
    source: u32,
) -> Result<Vec<u32>, String> {
    if source >= graph.nodes {
        return Err(format!(
            "source {source} is not a node (the graph has {})",
            graph.nodes
        ));
    }
    let mut dist = vec![UNREACHABLE; graph.nodes as usize];
    let mut frontier = vec![source];
    dist[source as usize] = 0;
    let mut depth = 0;
    while !frontier.is_empty() {
        depth += 1;
        let mut next = Vec::new();
        for &u in &frontier {
            let (a, b) = graph.edge_range(u)?;
            for e in a..b {
                let v = graph.target(e)?;
                if dist[v as usize] == UNREACHABLE {
                    dist[v as usize] = depth;
                    next.push(v);
                }
            }
        }
        frontier = next;
    }
    Ok(dist)
}

/// Bytes of one record of a sorted run: db_bench's default entry (the workload TxISC §V-C
/// compacts), a 16-byte key and a 100-byte value, plus LevelDB's 8-byte sequence and type
/// tag. The key orders by its first 8 bytes, read as a little-endian u64.
pub const RECORD_BYTES: usize = 124;

/// LSM compaction (LevelDB-style, simplified): merges sorted runs of fixed-size records into
/// one sorted run without duplicate keys. Runs are given oldest first; for a key present in
/// several runs the newest run's record survives. Calls `emit` with each surviving record in
/// key order; returns how many records were read.
pub fn compact_runs(runs: &[&[u8]], mut emit: impl FnMut(&[u8])) -> Result<u64, String> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let key = |run: &[u8], i: usize| {
        let r = &run[i * RECORD_BYTES..i * RECORD_BYTES + 8];
        u64::from_le_bytes(r.try_into().expect("8 bytes"))
    };
    for (n, run) in runs.iter().enumerate() {
        if run.len() % RECORD_BYTES != 0 {
            return Err(format!(
                "run {n} is {} bytes, not a multiple of {RECORD_BYTES}-byte records",
                run.len()
            ));
        }
        for i in 1..run.len() / RECORD_BYTES {
            if key(run, i - 1) >= key(run, i) {
                return Err(format!("run {n} is not sorted at record {i}"));
            }
        }
    }
    // Min-heap on (key, newest run first) so the first record of each key is the newest.
    let mut heap: BinaryHeap<Reverse<(u64, Reverse<usize>, usize)>> = BinaryHeap::new();
    for (n, run) in runs.iter().enumerate() {
        if !run.is_empty() {
            heap.push(Reverse((key(run, 0), Reverse(n), 0)));
        }
    }
    let mut read = 0u64;
    let mut last = None;
    while let Some(Reverse((k, Reverse(n), i))) = heap.pop() {
        read += 1;
        let run = runs[n];
        if last != Some(k) {
            emit(&run[i * RECORD_BYTES..(i + 1) * RECORD_BYTES]);
            last = Some(k);
        }
        if (i + 1) * RECORD_BYTES < run.len() {
            heap.push(Reverse((key(run, i + 1), Reverse(n), i + 1)));
        }
    }
    Ok(read)
}
