//! ISPFS (ISPFS §3.1, §3.4): a file system on byte-addressable PCM with a command file in
//! every directory, through which plain `write`s and `read`s offload work to the ISP engine.
//!
//! The command file is virtual: an inode and no data blocks ([`COMMAND_FILE`] in each
//! directory). Writing a `Search` instruction to it does not store anything. ISPFS
//! intercepts the write, resolves the target (a filename in the same directory, or an inode
//! number) to its physical extents, and starts the engine ([`csd_device::isp::Engine`]),
//! which compares the file's real bytes. Reading the command file returns the instruction
//! with its results (`cnt`, `addr`, `flag`, `us`). An instruction the engine cannot run
//! comes back with an error code in `flag` ([`IspError::code`]) and its reason in
//! [`Outcome::error`]; the file system itself keeps serving.
//!
//! The same channel is a generic offload interface: a [`Scmd::Stage`] instruction names a
//! CISC-op stage (a built-in, or `task:export` of a Wasm task) in its keyword bytes; ISPFS
//! reads the range through the controllers and runs the stage through a [`StageRunner`] on
//! the board's CPU, costed by its fuel, and returns its output in the results region.
//!
//! [`query`] is the paper's word-query evaluation (Figs. 8–9): this path against a software
//! search through an EXT4-like page cache.

pub mod iozone;
pub mod query;

use crate::fs::{file_ranges, FsError, HostFs};
use crate::namespace::{Ino, InodeKind};
use crate::perms::{Access, Cred, Perms};
use csd_device::isp::{
    engine::BLOCK_BYTES, Engine, IspError, Scmd, Search, WordQuery, FLAG_DONE, SEARCH_BYTES,
};
use csd_device::storagefs::StageRunner;
use csd_device::{DataMode, Device, Profile};
use csd_sdk::cisc::{Stage, MAX_SLOT_BYTES};
use std::collections::BTreeMap;

/// The command file's name in every directory.
pub const COMMAND_FILE: &str = ".isp";

/// A host CPU's copy of `bytes` between its memory and the board, ns: no faster than the FMC
/// link (`host_interface.pcie_bytes_per_sec`), the controllers or the CPU's programmed I/O
/// ([`Engine::host_copy_ns`]).
pub fn board_copy_ns(profile: &Profile, engine: &Engine, bytes: u64) -> f64 {
    let link = bytes as f64 * 1e9 / profile.host_interface.pcie_bytes_per_sec as f64;
    link.max(engine.host_copy_ns(bytes))
}

/// The most bytes the engine model holds at once while it streams a file (its comparison
/// is chunked, so a file of any size costs this much memory).
const CHUNK_BYTES: u64 = 1 << 20;

/// Why an ISPFS call failed (as opposed to an instruction the engine refused, which is
/// read back through the command file).
#[derive(Debug, thiserror::Error)]
pub enum IspfsError {
    #[error(
        "profile '{0}' has no [isp] table: it does not describe ISPFS's PCM board (use pcm-zynq)"
    )]
    NoEngine(String),
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error("device: {0}")]
    Device(#[from] csd_device::DeviceError),
    #[error("'{0}' is not a command file (every directory has one, named {COMMAND_FILE})")]
    NotCommandFile(String),
    #[error("nothing was written to '{0}' yet")]
    NothingWritten(String),
    /// A comparison that cannot run as asked.
    #[error("{0}")]
    Spec(String),
}

/// The most output a stage instruction may produce.
const STAGE_OUTPUT_MAX: usize = 64 << 10;

/// An instruction's target, resolved: its range clipped to the file, and where it lies.
struct Target {
    name: String,
    offset: u64,
    len: u64,
    /// The file's blocks (its indirect blocks are what the engine reads to map it).
    blocks: u64,
    ranges: Vec<(u64, u64)>,
}

/// What the last instruction written to a command file came to.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The instruction with its results filled in (or its error code in `flag`).
    pub search: Search,
    pub error: Option<IspError>,
    /// The engine's time, ns (0 for a refused instruction).
    pub engine_ns: u64,
    /// Bytes the engine compared.
    pub bytes: u64,
}

/// ISPFS over a PCM device.
pub struct Ispfs {
    fs: HostFs,
    engine: Engine,
    /// Each directory's results buffer: the last instruction written to its command file.
    results: BTreeMap<Ino, Outcome>,
    /// Bytes the engine model compares per chunk it reads.
    chunk_bytes: u64,
    /// The board CPU's ns per unit of Wasm fuel, for stage instructions.
    ns_per_fuel: f64,
}

impl Ispfs {
    /// Formats a fresh PCM device of `profile` (which must describe the ISP engine).
    pub fn format(profile: &Profile, root: Perms) -> Result<Ispfs, IspfsError> {
        let costs = profile
            .isp
            .as_ref()
            .ok_or_else(|| IspfsError::NoEngine(profile.name.clone()))?;
        let device = Device::new(profile, DataMode::Payloads)?;
        Ok(Ispfs {
            fs: HostFs::format(device, root)?,
            engine: Engine::new(costs),
            results: BTreeMap::new(),
            chunk_bytes: CHUNK_BYTES,
            ns_per_fuel: profile.device_cpu.ns_per_fuel,
        })
    }

    pub fn fs(&self) -> &HostFs {
        &self.fs
    }

    pub fn fs_mut(&mut self) -> &mut HostFs {
        &mut self.fs
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Streams files to the comparison in chunks of `bytes` (1 to 1 MiB; default 1 MiB). The
    /// results never depend on it; tests use small chunks so that keywords straddle them.
    pub fn set_chunk_bytes(&mut self, bytes: u64) {
        self.chunk_bytes = bytes.clamp(1, CHUNK_BYTES);
    }

    /// The directory whose command file `path` names, if it names one.
    pub fn command_dir(path: &str) -> Option<&str> {
        let dir = path.strip_suffix(COMMAND_FILE)?;
        match dir {
            "" | "/" => Some("/"),
            d => d.strip_suffix('/').filter(|d| !d.is_empty()),
        }
    }

    /// A `write` of `bytes` to the command file at `path` by `who`: parses the instruction
    /// and runs it. A bad instruction is not an `Err`: it is kept, with its reason, for the
    /// next read, as the engine would. Stage instructions run on `runner` (without one they
    /// are refused).
    pub fn write_command(
        &mut self,
        path: &str,
        bytes: &[u8],
        who: Cred,
        runner: Option<&mut dyn StageRunner>,
    ) -> Result<&Outcome, IspfsError> {
        let dir =
            Ispfs::command_dir(path).ok_or_else(|| IspfsError::NotCommandFile(path.to_string()))?;
        let (r, _) = self.fs.lookup(dir, who)?;
        if self.fs.file_layout(r.ino).is_some() {
            return Err(IspfsError::NotCommandFile(path.to_string()));
        }
        let outcome = match Search::decode(bytes) {
            Err(e) => refused(Search::default(), e),
            Ok(search) => match self.run(dir, &search, who, runner) {
                Ok(o) => o,
                Err(e) => refused(search, e),
            },
        };
        Ok(self.results.entry(r.ino).insert_entry(outcome).into_mut())
    }

    /// A `read` of the command file at `path`: the last instruction with its results.
    pub fn read_command(
        &mut self,
        path: &str,
        who: Cred,
    ) -> Result<[u8; SEARCH_BYTES], IspfsError> {
        Ok(encode_result(&self.outcome(path, who)?.search))
    }

    /// The last instruction written to the command file at `path`, and its outcome.
    pub fn outcome(&mut self, path: &str, who: Cred) -> Result<&Outcome, IspfsError> {
        let dir =
            Ispfs::command_dir(path).ok_or_else(|| IspfsError::NotCommandFile(path.to_string()))?;
        let (r, _) = self.fs.lookup(dir, who)?;
        self.results
            .get(&r.ino)
            .ok_or_else(|| IspfsError::NothingWritten(path.to_string()))
    }

    /// Checks an instruction, resolves its target in `dir`, and runs it.
    fn run(
        &mut self,
        dir: &str,
        search: &Search,
        who: Cred,
        runner: Option<&mut dyn StageRunner>,
    ) -> Result<Outcome, IspError> {
        let scmd = search.check()?;
        let t = self.resolve(dir, search, who)?;
        let mut done = search.clone();
        let (engine_ns, bytes) = match scmd {
            Scmd::WordQuery => {
                let mut q = WordQuery::new(search.keyword, t.offset);
                self.stream(&t, |chunk| q.feed(chunk))?;
                done.cnt = q.cnt;
                done.addr = q.addr;
                (self.engine.instruction_ns(t.len, t.blocks), q.bytes)
            }
            Scmd::Stage => {
                let runner = runner.ok_or_else(|| {
                    IspError::Stage("this ISPFS has no stage runner: only word queries run".into())
                })?;
                let (output, ns) = self.stage(search, &t, runner)?;
                done.set_stage_output(&output);
                (ns, t.len)
            }
        };
        done.flag = FLAG_DONE;
        done.us = u32::try_from(engine_ns.div_ceil(1000)).unwrap_or(u32::MAX);
        Ok(Outcome {
            search: done,
            error: None,
            engine_ns,
            bytes,
        })
    }

    /// A stage instruction: the range read by the Zynq's CPU (through the controllers, by
    /// programmed I/O: [`Engine::host_copy_ns`]), then the stage's Wasm on that CPU, costed
    /// by its fuel (`device_cpu.ns_per_fuel`).
    fn stage(
        &mut self,
        search: &Search,
        t: &Target,
        runner: &mut dyn StageRunner,
    ) -> Result<(Vec<u8>, u64), IspError> {
        let name = search.stage_name()?;
        let stage = Stage::parse(&name)
            .filter(|s| s.takes(1))
            .ok_or_else(|| IspError::Stage(format!("'{name}' is not a one-input stage")))?;
        if t.len > MAX_SLOT_BYTES as u64 {
            return Err(IspError::Stage(format!(
                "a stage takes at most {MAX_SLOT_BYTES} bytes; the range holds {}",
                t.len
            )));
        }
        let mut input = Vec::with_capacity(t.len as usize);
        self.stream(t, |chunk| input.extend_from_slice(chunk))?;
        let run = runner
            .run(&stage, &input, &[], STAGE_OUTPUT_MAX)
            .map_err(|e| IspError::Stage(format!("'{name}': {e}")))?;
        let ns = self.engine.setup_ns()
            + self.engine.host_copy_ns(t.len)
            + run.fuel as f64 * self.ns_per_fuel;
        Ok((run.output, ns.round() as u64))
    }

    /// Resolves an instruction's target in `dir` and clips its range to the file.
    fn resolve(&mut self, dir: &str, search: &Search, who: Cred) -> Result<Target, IspError> {
        let ino = self.target(dir, search, who)?;
        let inode = self
            .fs
            .namespace()
            .inode(ino)
            .ok_or(IspError::NoSuchInode(ino.0))?;
        let name = format!("inode {}", ino.0);
        if !inode.perms.allows(who, Access::Read) {
            return Err(IspError::PermissionDenied(name));
        }
        let InodeKind::File {
            size_bytes,
            extents,
            ..
        } = &inode.kind
        else {
            return Err(IspError::NotAFile(name));
        };
        let size = *size_bytes;
        let offset = u64::from(search.offset);
        if offset >= size {
            return Err(IspError::PastEnd {
                offset: search.offset,
                size,
            });
        }
        // The engine covers what the file holds of the range.
        let len = u64::from(search.len).min(size - offset);
        let bs = self.fs.namespace().layout().block_bytes;
        Ok(Target {
            name,
            offset,
            len,
            blocks: size.div_ceil(BLOCK_BYTES),
            ranges: file_ranges(extents, bs, offset, len),
        })
    }

    /// Feeds the target's bytes to `f` in chunks of at most `chunk_bytes`.
    fn stream(&self, t: &Target, mut f: impl FnMut(&[u8])) -> Result<(), IspError> {
        let mut buf = Vec::new();
        for &(at, n) in &t.ranges {
            let mut done = 0;
            while done < n {
                let take = (n - done).min(self.chunk_bytes);
                buf.resize(take as usize, 0);
                self.fs
                    .device()
                    .peek_ranges(&[(at + done, take)], &mut buf)
                    .map_err(|e| IspError::NotAFile(format!("{}: {e}", t.name)))?;
                f(&buf);
                done += take;
            }
        }
        Ok(())
    }

    /// The instruction's target: its filename in `dir`, else its inode number.
    fn target(&mut self, dir: &str, search: &Search, who: Cred) -> Result<Ino, IspError> {
        if search.filename.is_empty() {
            return Ok(Ino(search.ino));
        }
        if search.filename.contains('/') || search.filename == COMMAND_FILE {
            return Err(IspError::NotAFile(search.filename.clone()));
        }
        let path = match dir {
            "/" => format!("/{}", search.filename),
            d => format!("{d}/{}", search.filename),
        };
        match self.fs.lookup(&path, who) {
            Ok((r, _)) => Ok(r.ino),
            Err(FsError::PermissionDenied { path, .. }) => Err(IspError::PermissionDenied(path)),
            Err(_) => Err(IspError::NoSuchFile(search.filename.clone())),
        }
    }
}

fn refused(mut search: Search, e: IspError) -> Outcome {
    search.flag = e.code();
    search.cnt = [0; 4];
    search.us = 0;
    Outcome {
        search,
        error: Some(e),
        engine_ns: 0,
        bytes: 0,
    }
}

/// The structure a read returns. A refused instruction's own bytes may not encode (a
/// filename that never fit); its results still do, with the filename left out.
fn encode_result(s: &Search) -> [u8; SEARCH_BYTES] {
    s.encode().unwrap_or_else(|_| {
        let mut bare = s.clone();
        bare.filename.clear();
        bare.encode().unwrap_or([0; SEARCH_BYTES])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER: Cred = Cred {
        uid: 1000,
        gid: 1000,
    };

    fn fs_with(files: &[(&str, &[u8], u16)]) -> Ispfs {
        let profile = Profile::load("pcm-zynq").unwrap();
        let mut fs = Ispfs::format(
            &profile,
            Perms {
                uid: 0,
                gid: 0,
                mode: 0o777,
            },
        )
        .unwrap();
        for (path, data, mode) in files {
            let perms = Perms {
                uid: 0,
                gid: 0,
                mode: *mode,
            };
            fs.fs_mut().put_file(path, data, perms, Cred::ROOT).unwrap();
        }
        fs
    }

    fn key(s: &[u8; 4]) -> u32 {
        u32::from_le_bytes(*s)
    }

    #[test]
    fn a_word_query_through_the_command_file_finds_the_words() {
        let text = b"the cat sat on the mat; the end".repeat(300);
        let mut fs = fs_with(&[("/notes.txt", &text, 0o644)]);
        let s = Search::word_query(&[key(b"the "), key(b"mat;")], "notes.txt", 0, u32::MAX - 1)
            .unwrap();
        fs.write_command("/.isp", &s.encode().unwrap(), USER, None)
            .unwrap();
        let back = Search::decode(&fs.read_command("/.isp", USER).unwrap()).unwrap();
        assert_eq!(back.flag, FLAG_DONE);
        assert_eq!(back.cnt, [900, 300, 0, 0]);
        assert_eq!(back.addr[1][0], 19);
        assert!(back.us > 0);
        let o = fs.outcome("/.isp", USER).unwrap();
        assert_eq!(o.bytes, text.len() as u64);
        assert!(o.error.is_none());
    }

    #[test]
    fn bad_instructions_come_back_with_a_reason_and_the_file_system_serves_on() {
        let mut fs = fs_with(&[("/a", b"abcdabcd", 0o644), ("/secret", b"abcd", 0o600)]);
        fs.fs_mut()
            .mkdir(
                "/d",
                Perms {
                    uid: 0,
                    gid: 0,
                    mode: 0o755,
                },
                Cred::ROOT,
            )
            .unwrap();
        let good = Search::word_query(&[key(b"abcd")], "a", 0, 8).unwrap();
        let mut cases: Vec<(Vec<u8>, &str)> = Vec::new();
        let mut zero = good.clone();
        zero.len = 0;
        cases.push((zero.encode().unwrap().to_vec(), "0 bytes"));
        let mut scmd = good.clone();
        scmd.scmd = 77;
        cases.push((scmd.encode().unwrap().to_vec(), "unknown scmd 77"));
        let mut ino = good.clone();
        ino.filename.clear();
        ino.ino = 999_999;
        cases.push((ino.encode().unwrap().to_vec(), "no file has inode 999999"));
        let mut long = good.encode().unwrap().to_vec();
        long[20..52].fill(b'x'); // 32 bytes, no NUL: fits exactly; 33 cannot be written
        cases.push((long, "no file 'xxxx"));
        let mut five = good.encode().unwrap().to_vec();
        five.splice(20..20, key(b"efgh").to_le_bytes());
        cases.push((five, "a fifth keyword"));
        let mut secret = good.clone();
        secret.filename = "secret".into();
        cases.push((secret.encode().unwrap().to_vec(), "permission denied"));
        let mut dir = good.clone();
        dir.filename = "d".into();
        cases.push((dir.encode().unwrap().to_vec(), "not a regular file"));
        let mut past = good.clone();
        past.offset = 8;
        cases.push((past.encode().unwrap().to_vec(), "past the file's end"));
        for (bytes, want) in cases {
            let o = fs.write_command("/.isp", &bytes, USER, None).unwrap();
            let e = o.error.as_ref().expect("refused").to_string();
            assert!(e.contains(want), "{e:?} should say {want:?}");
            let back = Search::decode(&fs.read_command("/.isp", USER).unwrap()).unwrap();
            assert!(back.flag > FLAG_DONE, "flag {}", back.flag);
            // And the next good instruction runs.
            fs.write_command("/.isp", &good.encode().unwrap(), USER, None)
                .unwrap();
            let back = Search::decode(&fs.read_command("/.isp", USER).unwrap()).unwrap();
            assert_eq!((back.flag, back.cnt[0]), (FLAG_DONE, 2));
        }
        // The command file of a subdirectory names that directory's files.
        let o = fs
            .write_command("/d/.isp", &good.encode().unwrap(), USER, None)
            .unwrap();
        assert!(o
            .error
            .as_ref()
            .unwrap()
            .to_string()
            .contains("no file 'a'"));
        assert!(matches!(
            fs.write_command("/a", &good.encode().unwrap(), USER, None),
            Err(IspfsError::NotCommandFile(_))
        ));
        assert!(matches!(
            fs.write_command("/nodir/.isp", &good.encode().unwrap(), USER, None),
            Err(IspfsError::Fs(_))
        ));
        fs.fs().check_invariants().unwrap();
    }

    /// Every occurrence of `key` in `data[offset..offset + len]`, at any alignment (a
    /// keyword of 0 is an unused slot).
    fn plain(data: &[u8], key: u32, offset: usize, len: usize) -> (u32, Vec<u32>) {
        if key == 0 {
            return (0, Vec::new());
        }
        let end = (offset + len).min(data.len());
        let at: Vec<u32> = (offset..end.saturating_sub(3))
            .filter(|&i| data[i..i + 4] == key.to_le_bytes())
            .map(|i| i as u32)
            .collect();
        (at.len() as u32, at.into_iter().take(4).collect())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        #[test]
        fn the_command_file_finds_what_a_plain_search_finds(
            data in proptest::collection::vec(0u8..3, 4..20_000),
            picks in proptest::collection::vec(0usize..20_000, 3),
            chunk in 1u64..64,
            offset in 0usize..4000,
            len in 1u32..30_000,
            // Another file written first and removed, so this one may lie in pieces.
            gap in 0usize..3,
        ) {
            let mut fs = fs_with(&[]);
            let open = Perms { uid: 0, gid: 0, mode: 0o644 };
            for i in 0..gap {
                fs.fs_mut().put_file(&format!("/pad{i}"), &[1; 5000], open, Cred::ROOT).unwrap();
            }
            fs.fs_mut().put_file("/pad9", &[1; 9000], open, Cred::ROOT).unwrap();
            fs.fs_mut().unlink("/pad0", Cred::ROOT).ok();
            fs.fs_mut().put_file("/f", &data, open, Cred::ROOT).unwrap();
            fs.set_chunk_bytes(chunk);
            let offset = offset % data.len();
            let mut keys = [0u32; 4];
            for (k, p) in keys.iter_mut().zip(&picks) {
                let at = p % (data.len() - 3);
                *k = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
            }
            keys[3] = 0x0202_0101;
            let s = Search::word_query(&keys, "f", offset as u32, len).unwrap();
            fs.write_command("/.isp", &s.encode().unwrap(), USER, None).unwrap();
            let back = Search::decode(&fs.read_command("/.isp", USER).unwrap()).unwrap();
            proptest::prop_assert_eq!(back.flag, FLAG_DONE);
            for (k, key) in keys.iter().enumerate() {
                let (cnt, addrs) = plain(&data, *key, offset, len as usize);
                proptest::prop_assert_eq!(back.cnt[k], cnt, "keyword {}", k);
                proptest::prop_assert_eq!(&back.addr[k][..addrs.len()], &addrs[..]);
            }
        }
    }

    #[test]
    fn command_files_are_named_per_directory() {
        assert_eq!(Ispfs::command_dir("/.isp"), Some("/"));
        assert_eq!(Ispfs::command_dir(".isp"), Some("/"));
        assert_eq!(Ispfs::command_dir("/data/logs/.isp"), Some("/data/logs"));
        assert_eq!(Ispfs::command_dir("/data/x.isp"), None);
        assert_eq!(Ispfs::command_dir("/data/.ispx"), None);
    }
}
