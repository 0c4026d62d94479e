//! A C program built against `include/csd_cisc.h` and this crate's static library encodes
//! the same pages as the Rust SDK, and has bad ops refused with a reason.

use csd_sdk::cisc::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where cargo put this crate's static library: in `deps` beside the test binary, with a
/// hash in its name (a `cargo build` also copies it one level up). The newest is the one
/// built for this test.
fn staticlib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let up = deps.parent().unwrap();
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = [deps, up]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("libcsd_sdk_capi") && name.ends_with(".a")
        })
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p).unwrap_or_else(|| {
        panic!(
            "no libcsd_sdk_capi*.a in {} or {}",
            deps.display(),
            up.display()
        )
    })
}

fn rust_pages() -> Vec<Vec<u8>> {
    let mut b = CiscBuilder::new();
    b.grain(TxGrain::Micro);
    let data = b.input(b"a log record".to_vec());
    b.append(FileRef::Fd(3), data);
    let crc = b.process(Stage::Crc32, &[data]);
    b.append(FileRef::Fd(3), crc);
    let first = b.finish().unwrap().encode().unwrap();

    let mut b = CiscBuilder::new();
    let src = b.open("/db/000007.sst", false);
    let block = b.pread(src, 0, 65536);
    let packed = b.process(Stage::Compress, &[block]);
    let out = b.open("/db/000007.tmp", true);
    b.truncate(out, 0)
        .write(out, packed)
        .fsync(out)
        .close(out)
        .close(src)
        .rename("/db/000007.tmp", "/db/000007.lz4")
        .ret(packed);
    vec![first, b.finish().unwrap().encode().unwrap()]
}

#[test]
fn a_c_program_encodes_the_pages_rust_does() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("csd-cisc-ops");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .arg("-std=c99")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/ops.c"))
        .arg(staticlib())
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("running {cc}: {e}"));
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let pages: Vec<Vec<u8>> = String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            (0..l.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&l[i..i + 2], 16).unwrap())
                .collect()
        })
        .collect();
    assert_eq!(pages, rust_pages());
}
