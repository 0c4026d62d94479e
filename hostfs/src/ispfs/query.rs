//! ISPFS's word-query evaluation (ISPFS §5.2–5.3, Figs. 8–9): four keywords counted in one
//! file, by the ISP engine through the command file, and by software on the host.
//!
//! - **ISP**: the application opens the directory's command file, writes one `Search`, then
//!   reads the status every `isp.poll_interval_ns` until the flag is set, and closes it.
//!   The speed is the file's size over the engine's time, as the paper's hardware timer
//!   measures it. The host's CPU does the system calls and ISPFS's name lookup; the rest of
//!   the time it sleeps.
//! - **Software**: the application opens the file and reads it through an EXT4-like page
//!   cache over the same PCM: readahead issues block requests of at most
//!   `isp.readahead_bytes`, each through the block layer and a RAM-disk-like driver that
//!   copies from the medium with the CPU (programmed I/O, `isp.host_pio_bytes_per_sec`);
//!   then the page-cache work per page, the copy to the user buffer, and the search itself,
//!   the `search` stage run once per keyword in the host CPU's Wasm sandbox and costed by
//!   its fuel (`host.cpu_ns_per_fuel`). Every one of these is CPU time, so the host CPU is
//!   busy throughout.
//!
//! Both solutions count the same words in the same bytes, and must agree. The paper counts
//! the software solution's block requests (blktrace) and the ISP solution's system calls;
//! both are reported, with the other count beside each.

use super::{Ispfs, IspfsError, COMMAND_FILE};
use crate::perms::{Cred, Perms};
use csd_device::isp::engine::{HostRequest, BLOCK_BYTES};
use csd_device::isp::{Search, KEYWORDS, SEARCH_BYTES};
use csd_device::rng::SimRng;
use csd_device::storagefs::StageRunner;
use csd_device::Profile;
use csd_sdk::cisc::Stage;
use serde::{Deserialize, Serialize};

/// The largest file a query point may have (the paper's largest is 100 MB).
pub const MAX_QUERY_BYTES: u64 = 256 << 20;
/// The most points one comparison runs.
pub const MAX_POINTS: usize = 16;
/// Bytes of one `search` stage call (a slot; the next call overlaps it by 3 bytes).
const SEARCH_CHUNK: usize = 512 << 10;

/// What to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuerySpec {
    /// File sizes, bytes.
    pub sizes: Vec<u64>,
    /// The four keywords, 4 bytes each.
    pub keywords: Vec<String>,
    /// Bytes per `read` call of the software solution.
    pub read_bytes: u64,
}

impl QuerySpec {
    /// The paper's run: four words, 0.1 MB to 100 MB, read in 4 KiB calls (stdio's buffer).
    pub fn paper() -> QuerySpec {
        QuerySpec {
            sizes: vec![100_000, 1_000_000, 10_000_000, 100_000_000],
            keywords: ["data", "disk", "page", "file"].map(String::from).to_vec(),
            read_bytes: 4096,
        }
    }

    fn check(&self) -> Result<[u32; KEYWORDS], IspfsError> {
        let bad = IspfsError::Spec;
        if self.sizes.is_empty() || self.sizes.len() > MAX_POINTS {
            return Err(bad(format!("1 to {MAX_POINTS} file sizes")));
        }
        if let Some(s) = self.sizes.iter().find(|&&s| s == 0 || s > MAX_QUERY_BYTES) {
            return Err(bad(format!(
                "file size {s}: sizes are 1 byte to {MAX_QUERY_BYTES} bytes"
            )));
        }
        if self.read_bytes == 0 || self.read_bytes > 64 << 20 {
            return Err(bad("the read size must be 1 byte to 64 MiB".into()));
        }
        if self.keywords.is_empty() || self.keywords.len() > KEYWORDS {
            return Err(bad(format!("1 to {KEYWORDS} keywords")));
        }
        let mut keys = [0u32; KEYWORDS];
        for (k, w) in keys.iter_mut().zip(&self.keywords) {
            let b: [u8; 4] = w
                .as_bytes()
                .try_into()
                .map_err(|_| bad(format!("keyword '{w}': the engine compares 4-byte words")))?;
            *k = u32::from_le_bytes(b);
        }
        Ok(keys)
    }
}

/// One solution at one file size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Solution {
    /// Search time, ns (ISP: the engine's timer; software: open to the end of the search).
    pub search_ns: u64,
    pub mb_per_sec: f64,
    /// What the application waited in all (ISP: until its poll saw the flag).
    pub elapsed_ns: u64,
    pub syscalls: u64,
    /// Requests to the block layer (0 on ISPFS, which has none).
    pub block_requests: u64,
    /// The I/O requests as the paper counts them: block requests for software, system
    /// calls for ISP.
    pub io_requests: u64,
    pub host_cpu_ns: u64,
    /// Host CPU time over elapsed time.
    pub host_cpu_share: f64,
    /// Host memory the query holds: the page cache and buffer, or the instruction.
    pub host_memory_bytes: u64,
    /// Matches per keyword.
    pub found: Vec<u32>,
}

/// Both solutions at one file size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueryPoint {
    pub bytes: u64,
    pub isp: Solution,
    pub software: Solution,
}

/// Host 4 KiB reads of the PCM alone and during the largest query.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostIo {
    pub requests: u64,
    pub idle_ns: u64,
    pub mean_during_query_ns: u64,
    pub max_during_query_ns: u64,
    /// The engine's time with the host's requests, over its time alone.
    pub engine_slowdown: f64,
}

/// The comparison's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueryReport {
    pub profile: String,
    pub spec: QuerySpec,
    /// The engine's streaming speed from the board's parameters, MB/s.
    pub engine_mb_per_sec: f64,
    pub engine_setup_ns: u64,
    /// Fuel the host's search burned per byte (all keywords).
    pub search_fuel_per_byte: f64,
    pub points: Vec<QueryPoint>,
    pub host_io: HostIo,
}

impl QueryReport {
    /// Mean speeds over the points (the paper's "average speed"), ISP and software.
    pub fn mean_speeds(&self) -> (f64, f64) {
        let n = self.points.len().max(1) as f64;
        let sum = |f: fn(&QueryPoint) -> f64| self.points.iter().map(f).sum::<f64>() / n;
        (sum(|p| p.isp.mb_per_sec), sum(|p| p.software.mb_per_sec))
    }
}

/// Writes each size's file on a fresh ISPFS and runs both solutions over it.
pub fn compare(
    profile: &Profile,
    spec: &QuerySpec,
    seed: u64,
    runner: &mut dyn StageRunner,
    mut progress: impl FnMut(),
) -> Result<QueryReport, IspfsError> {
    let keys = spec.check()?;
    let ns_per_fuel = profile.host.cpu_ns_per_fuel.ok_or_else(|| {
        IspfsError::NoEngine(format!(
            "{} (it gives no host.cpu_ns_per_fuel)",
            profile.name
        ))
    })?;
    let open = Perms {
        uid: 0,
        gid: 0,
        mode: 0o755,
    };
    let mut fs = Ispfs::format(profile, open)?;
    let mut points = Vec::new();
    let mut fuel = (0u64, 0u64);
    for (i, &size) in spec.sizes.iter().enumerate() {
        let name = format!("words-{i}.txt");
        let text = words(size, seed.wrapping_add(i as u64));
        fs.fs_mut()
            .put_file(&format!("/{name}"), &text, open, Cred::ROOT)?;
        let isp = isp(&mut fs, profile, &keys, &name, size)?;
        let (software, burned) = software(profile, spec, &keys, &text, ns_per_fuel, runner)?;
        fuel = (fuel.0 + burned, fuel.1 + size);
        if software.found != isp.found {
            return Err(IspfsError::Spec(format!(
                "the engine found {:?} and the software search {:?} in the same {size} bytes",
                isp.found, software.found
            )));
        }
        points.push(QueryPoint {
            bytes: size,
            isp,
            software,
        });
        progress();
    }
    let engine = fs.engine();
    let largest = spec.sizes.iter().copied().max().unwrap_or(1);
    Ok(QueryReport {
        profile: profile.name.clone(),
        spec: spec.clone(),
        engine_mb_per_sec: engine.bytes_per_sec() / 1e6,
        engine_setup_ns: engine.setup_ns().round() as u64,
        search_fuel_per_byte: fuel.0 as f64 / fuel.1.max(1) as f64,
        points,
        host_io: host_io(engine, largest, seed),
    })
}

/// The ISP solution: open the command file, write the instruction, poll, close.
fn isp(
    fs: &mut Ispfs,
    profile: &Profile,
    keys: &[u32; KEYWORDS],
    name: &str,
    size: u64,
) -> Result<Solution, IspfsError> {
    let len = u32::try_from(size).unwrap_or(u32::MAX);
    let bytes = Search::word_query(keys, name, 0, len)
        .and_then(|s| s.encode())
        .map_err(|e| IspfsError::Spec(e.to_string()))?;
    let cmd = format!("/{COMMAND_FILE}");
    let o = fs.write_command(&cmd, &bytes, Cred::ROOT, None)?.clone();
    if let Some(e) = &o.error {
        return Err(IspfsError::Spec(format!("{cmd}: {e}")));
    }
    let poll = fs.engine().costs().poll_interval_ns.max(1);
    let polls = o.engine_ns.div_ceil(poll).max(1);
    let syscalls = 3 + polls; // open, write, the polls' reads, close
    let host = &profile.host;
    // Each call, and ISPFS's lookup of the filename on the write.
    let cpu = syscalls * host.syscall_ns + 2 * host.path_component_ns;
    let elapsed = cpu + polls * poll;
    Ok(Solution {
        search_ns: o.engine_ns,
        mb_per_sec: size as f64 / o.engine_ns.max(1) as f64 * 1e3,
        elapsed_ns: elapsed,
        syscalls,
        block_requests: 0,
        io_requests: syscalls,
        host_cpu_ns: cpu,
        host_cpu_share: cpu as f64 / elapsed.max(1) as f64,
        host_memory_bytes: SEARCH_BYTES as u64,
        found: o
            .search
            .cnt
            .iter()
            .take(keys.iter().filter(|&&k| k != 0).count())
            .copied()
            .collect(),
    })
}

/// The software solution over the same bytes; also returns the fuel its search burned.
fn software(
    profile: &Profile,
    spec: &QuerySpec,
    keys: &[u32; KEYWORDS],
    text: &[u8],
    ns_per_fuel: f64,
    runner: &mut dyn StageRunner,
) -> Result<(Solution, u64), IspfsError> {
    let isp = profile
        .isp
        .as_ref()
        .ok_or_else(|| IspfsError::NoEngine(profile.name.clone()))?;
    let host = &profile.host;
    let size = text.len() as u64;
    let pages = size.div_ceil(BLOCK_BYTES);
    // Readahead's requests, and the inode and indirect blocks read before them.
    let block_requests =
        size.div_ceil(isp.readahead_bytes) + 1 + csd_device::isp::engine::indirect_blocks(pages);
    // open, the reads (the last one finds the end), close.
    let syscalls = 2 + size.div_ceil(spec.read_bytes) + 1;
    let (found, fuel) = search(runner, keys, text)?;
    let engine = csd_device::isp::Engine::new(isp);
    let medium_ns = super::board_copy_ns(profile, &engine, size);
    let ns = block_requests as f64 * isp.block_request_ns as f64
        + medium_ns
        + (pages * host.page_cache_page_ns) as f64
        + size as f64 * 1e9 / host.copy_bytes_per_sec as f64
        + (syscalls * host.syscall_ns) as f64
        + fuel as f64 * ns_per_fuel;
    let ns = ns.round() as u64;
    Ok((
        Solution {
            search_ns: ns,
            mb_per_sec: size as f64 / ns.max(1) as f64 * 1e3,
            elapsed_ns: ns,
            syscalls,
            block_requests,
            io_requests: block_requests,
            host_cpu_ns: ns,
            host_cpu_share: 1.0,
            host_memory_bytes: pages * BLOCK_BYTES + spec.read_bytes,
            found,
        },
        fuel,
    ))
}

/// Counts each keyword with the `search` stage, chunk by chunk (chunks overlap by 3 bytes
/// so a keyword across a boundary is counted once); returns the counts and the fuel.
fn search(
    runner: &mut dyn StageRunner,
    keys: &[u32; KEYWORDS],
    text: &[u8],
) -> Result<(Vec<u32>, u64), IspfsError> {
    let fail = IspfsError::Spec;
    let mut found = Vec::new();
    let mut fuel = 0u64;
    for k in keys.iter().filter(|&&k| k != 0) {
        let needle = k.to_le_bytes();
        let mut n = 0u64;
        let mut at = 0;
        while at < text.len() {
            let end = (at + SEARCH_CHUNK + 3).min(text.len());
            let run = runner
                .run(&Stage::Search, &text[at..end], &needle, 8)
                .map_err(|e| fail(format!("the host's search stage: {e}")))?;
            let count: [u8; 8] = run.output.as_slice().try_into().map_err(|_| {
                fail(format!(
                    "the search stage returned {} bytes, not 8",
                    run.output.len()
                ))
            })?;
            n += u64::from_le_bytes(count);
            fuel += run.fuel;
            at += SEARCH_CHUNK;
        }
        found.push(u32::try_from(n).unwrap_or(u32::MAX));
    }
    Ok((found, fuel))
}

/// A host reader doing 4 KiB reads with 20–80 µs of think time between them (seeded), alone
/// and during an instruction over `bytes`. A read is the CPU's copy out of the board
/// ([`Engine::host_copy_ns`](csd_device::isp::Engine::host_copy_ns)); only its accesses at
/// the controllers meet the engine's.
fn host_io(engine: &csd_device::isp::Engine, bytes: u64, seed: u64) -> HostIo {
    let blocks = bytes.div_ceil(BLOCK_BYTES);
    let alone = engine.instruction_ns(bytes, blocks);
    let idle = engine.host_copy_ns(4096);
    // The copy's time beyond its controller accesses, which the engine does not see.
    let pio = (idle.round() as u64).saturating_sub(engine.host_ns(4096).round() as u64);
    let mut rng = SimRng::new(seed);
    let mut reqs = Vec::new();
    let mut at = 0.0f64;
    while at < alone as f64 && reqs.len() < 100_000 {
        reqs.push(HostRequest {
            at_ns: at.round() as u64,
            bytes: 4096,
        });
        at += idle + 20_000.0 + rng.below(60_000) as f64;
    }
    let n = reqs.len().max(1) as u64;
    let s = engine.shared(bytes, blocks, &reqs);
    let sum: u64 = s.host_latency_ns.iter().sum();
    HostIo {
        requests: n,
        idle_ns: idle.round() as u64,
        mean_during_query_ns: sum / n + pio,
        max_during_query_ns: s.host_latency_ns.iter().copied().max().unwrap_or(0) + pio,
        engine_slowdown: s.engine_ns as f64 / alone.max(1) as f64,
    }
}

/// `size` bytes of text: words from a small vocabulary, some holding the paper-run's
/// keywords, separated by spaces and line breaks (seeded).
pub fn words(size: u64, seed: u64) -> Vec<u8> {
    const VOCAB: &[&str] = &[
        "data",
        "disk",
        "page",
        "file",
        "storage",
        "memory",
        "the",
        "of",
        "and",
        "query",
        "engine",
        "system",
        "filesystem",
        "database",
        "paged",
        "datum",
        "to",
        "a",
        "in",
        "controller",
        "phase",
        "change",
        "host",
        "processing",
    ];
    let mut rng = SimRng::new(seed);
    let mut out = Vec::with_capacity(size as usize);
    while (out.len() as u64) < size {
        let w = VOCAB[rng.below(VOCAB.len() as u64) as usize];
        out.extend_from_slice(w.as_bytes());
        out.push(if rng.below(12) == 0 { b'\n' } else { b' ' });
    }
    out.truncate(size as usize);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use csd_device::storagefs::StageRun;

    /// The `search` stage's algorithm, natively, at one fuel per byte compared.
    struct NativeSearch;

    impl StageRunner for NativeSearch {
        fn run(&mut self, stage: &Stage, a: &[u8], b: &[u8], _: usize) -> Result<StageRun, String> {
            assert_eq!(stage, &Stage::Search);
            let n = a.windows(b.len()).filter(|w| *w == b).count() as u64;
            Ok(StageRun {
                output: n.to_le_bytes().to_vec(),
                fuel: a.len() as u64,
            })
        }
    }

    #[test]
    fn both_solutions_find_the_same_words_and_isp_needs_fewer_requests() {
        let profile = Profile::load("pcm-zynq").unwrap();
        let spec = QuerySpec {
            sizes: vec![100_000, 3_000_000],
            ..QuerySpec::paper()
        };
        let r = compare(&profile, &spec, 7, &mut NativeSearch, || {}).unwrap();
        assert_eq!(r.points.len(), 2);
        for p in &r.points {
            assert!(p.isp.found.iter().all(|&c| c > 0), "{:?}", p.isp.found);
            assert_eq!(p.isp.found, p.software.found);
            assert!(p.isp.host_cpu_share < 0.03, "{}", p.isp.host_cpu_share);
            assert_eq!(p.software.host_cpu_share, 1.0);
            assert!(p.isp.host_memory_bytes < p.software.host_memory_bytes);
        }
        // The engine's speed holds at every size (its setup is small).
        let big = &r.points[1];
        // A small file needs few block requests; a large one many more than ISP's calls.
        assert!(big.isp.io_requests * 4 < big.software.io_requests);
        assert!((big.isp.mb_per_sec / r.engine_mb_per_sec - 1.0).abs() < 0.01);
        // Host reads during the query wait at most one engine access: its request's
        // crossing into the controllers' clock (2 cycles at 250 MHz) and the access (213 ns).
        assert!(
            r.host_io.max_during_query_ns > r.host_io.idle_ns,
            "{:?}",
            r.host_io
        );
        assert!(r.host_io.max_during_query_ns <= r.host_io.idle_ns + 8 + 214);
        assert!((r.search_fuel_per_byte - 4.0).abs() < 0.001);
    }

    /// The software solution's loading moves the file out of the board by the CPU's
    /// programmed I/O: halving that rate adds the file's size over the new rate less the old
    /// one's, to the nanosecond (the controllers, at 84 MB/s, stay faster than either).
    #[test]
    fn the_software_loads_the_file_by_programmed_io() {
        let mut profile = Profile::load("pcm-zynq").unwrap();
        let spec = QuerySpec {
            sizes: vec![2_000_000],
            ..QuerySpec::paper()
        };
        let time = |p: &Profile| {
            let r = compare(p, &spec, 3, &mut NativeSearch, || {}).unwrap();
            r.points[0].software.elapsed_ns as f64
        };
        let rate = profile.isp.as_ref().unwrap().host_pio_bytes_per_sec as f64;
        let before = time(&profile);
        profile.isp.as_mut().unwrap().host_pio_bytes_per_sec /= 2;
        let after = time(&profile);
        let more = 2e6 * 1e9 / (rate / 2.0) - 2e6 * 1e9 / rate;
        assert!(
            (after - before - more).abs() <= 1.0,
            "{before} {after} {more}"
        );
    }

    #[test]
    fn bad_specs_are_refused_by_name() {
        let profile = Profile::load("pcm-zynq").unwrap();
        for (spec, want) in [
            (
                QuerySpec {
                    sizes: vec![0],
                    ..QuerySpec::paper()
                },
                "file size 0",
            ),
            (
                QuerySpec {
                    keywords: vec!["toolong".into()],
                    ..QuerySpec::paper()
                },
                "keyword 'toolong'",
            ),
            (
                QuerySpec {
                    keywords: vec!["a".into(); 5],
                    ..QuerySpec::paper()
                },
                "1 to 4 keywords",
            ),
        ] {
            let e = compare(&profile, &spec, 1, &mut NativeSearch, || {})
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
        }
        let e = compare(
            &Profile::load("cosmos-plus").unwrap(),
            &QuerySpec::paper(),
            1,
            &mut NativeSearch,
            || {},
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("[isp]"), "{e}");
    }
}
