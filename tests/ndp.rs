//! LightFS's findings, asserted in the model with the real Wasm tasks, and the consistency
//! problem of LightFS §II-D: a writer racing NDP reads through the page cache.

mod common;

use csd::ndp::{
    measure, synthetic, App, Files, NdpDesign, TaskCompute, DATA_DIR, OWNER, OWNER_PERMS,
};
use csd_device::rng::SimRng;
use csd_device::{DataMode, Device, Profile};
use csd_hostfs::fs::{HostFs, OpenOptions};
use csd_hostfs::ndp::{DesignKind, NdpCompute, NdpRequest};
use csd_runtime::{EngineConfig, TaskEngine};
use std::sync::Arc;

fn compute(app: App, profile: &Profile) -> TaskCompute {
    let engine = Arc::new(TaskEngine::new(EngineConfig::default()).unwrap());
    let wasm = csd::builtin::task(app.task()).unwrap();
    TaskCompute::new(engine, app.task(), wasm, app.args(), profile).unwrap()
}

/// Every design on `files` × `size`; (design, mean latency, PAO).
fn run_all(
    profile: &Profile,
    c: &mut TaskCompute,
    app: App,
    files: usize,
    size: usize,
    cold: bool,
) -> Vec<NdpDesign> {
    let data = synthetic(app, files, size, 3);
    DesignKind::ALL
        .iter()
        .map(|&k| measure(profile, Files::Set(&data), k, c, cold).unwrap())
        .collect()
}

fn mean(rs: &[NdpDesign], k: DesignKind) -> f64 {
    rs.iter()
        .find(|r| r.design == k)
        .unwrap()
        .summary
        .mean_latency_ns
}

fn speedups(rs: &[NdpDesign]) -> Vec<(DesignKind, f64)> {
    let l = mean(rs, DesignKind::LightFs);
    rs.iter()
        .filter(|r| r.design != DesignKind::LightFs)
        .map(|r| (r.design, r.summary.mean_latency_ns / l))
        .collect()
}

#[test]
fn lightfs_findings_hold_in_the_model() {
    let profile = Profile::load("cosmos-plus").unwrap();
    for app in [App::Stats64, App::Knn, App::GrepAccel] {
        let mut c = compute(app, &profile);
        // File count: 16 KiB files.
        let mut by_count = Vec::new();
        for files in [1, 10, 100, 300] {
            for cold in [false, true] {
                let rs = run_all(&profile, &mut c, app, files, 16 << 10, cold);
                for (k, s) in speedups(&rs) {
                    assert!(
                        s >= 1.0,
                        "{app:?} {files} files cold={cold}: lightfs slower than {k} ({s})"
                    );
                }
                if files >= 100 {
                    assert!(
                        mean(&rs, DesignKind::FragM) < mean(&rs, DesignKind::FragS),
                        "{app:?} {files} files: frag-m should beat frag-s"
                    );
                }
                if !cold {
                    by_count.push(speedups(&rs));
                }
            }
        }
        // LightFS's advantage over the per-file designs grows with the file count.
        for k in [DesignKind::FragS, DesignKind::Fsr] {
            let s: Vec<f64> = by_count
                .iter()
                .map(|v| v.iter().find(|x| x.0 == k).unwrap().1)
                .collect();
            assert!(
                s.windows(2).all(|w| w[1] >= w[0] * 0.999),
                "{app:?} vs {k}: {s:?}"
            );
            assert!(s[3] > s[0] * 1.2, "{app:?} vs {k}: {s:?}");
        }
        // File size: 100 files; from the flash page size (16 KiB) up the advantage shrinks.
        let mut by_size = Vec::new();
        for size in [16usize << 10, 64 << 10, 256 << 10] {
            let rs = run_all(&profile, &mut c, app, 100, size, false);
            let s = speedups(&rs);
            assert!(s.iter().all(|x| x.1 >= 1.0), "{app:?} {size} B: {s:?}");
            by_size.push(s);
        }
        for i in 0..3 {
            let s: Vec<f64> = by_size.iter().map(|v| v[i].1).collect();
            assert!(
                s.windows(2).all(|w| w[1] <= w[0] * 1.001),
                "{app:?} vs {:?}: {s:?}",
                by_size[0][i].0
            );
        }
    }
}

/// Dropped caches cost every host-centric design metadata reads. LightFS loads its indexes
/// when it starts (the host all of them, the device the root's, §III-C), so a request over
/// the files of its root directory costs the same after a restart.
#[test]
fn cold_caches_raise_every_designs_pao_but_lightfs_starts_warm() {
    let profile = Profile::load("cosmos-plus").unwrap();
    let mut c = compute(App::Stats64, &profile);
    for files in [1, 100] {
        let warm = run_all(&profile, &mut c, App::Stats64, files, 16 << 10, false);
        let cold = run_all(&profile, &mut c, App::Stats64, files, 16 << 10, true);
        for (w, k) in warm.iter().zip(&cold) {
            if w.design == DesignKind::LightFs {
                assert_eq!(k.summary, w.summary, "lightfs with {files} file(s)");
                continue;
            }
            assert!(
                k.summary.pao > w.summary.pao,
                "{} with {files} file(s): cold PAO {} <= warm {}",
                w.design,
                k.summary.pao,
                w.summary.pao
            );
        }
    }
}

/// What stats64 returns for a file's contents.
fn stats_of(c: &mut TaskCompute, data: &[u8]) -> Vec<u8> {
    c.compute("/x", data.to_vec()).unwrap().ret
}

/// One seeded interleaving: a writer rewrites a file through the page cache (opened under
/// the design, so LightFS gets its write notification), while the kernel flusher writes
/// pages back in random order and NDP requests read the file. Returns every NDP result.
fn race(kind: DesignKind, seed: u64, c: &mut TaskCompute, old: &[u8], new: &[u8]) -> Vec<Vec<u8>> {
    let profile = Profile::load("cosmos-plus").unwrap();
    let mut fs = HostFs::format(
        Device::new(&profile, DataMode::Payloads).unwrap(),
        OWNER_PERMS,
    )
    .unwrap();
    fs.mkdir(DATA_DIR, OWNER_PERMS, OWNER).unwrap();
    let path = format!("{DATA_DIR}/target");
    fs.import(&path, old, OWNER_PERMS, OWNER).unwrap();
    fs.import(
        &format!("{DATA_DIR}/other"),
        &old[..4096],
        OWNER_PERMS,
        OWNER,
    )
    .unwrap();
    let mut design = kind.build();
    design.init(&mut fs, DATA_DIR, OWNER).unwrap();
    fs.seed_writeback(seed);
    let mut rng = SimRng::new(seed);
    let req = NdpRequest {
        paths: vec![path.clone()],
        who: OWNER,
    };
    let mut results = Vec::new();
    let fd = design
        .open(&mut fs, &path, OpenOptions::WRITE, OWNER)
        .unwrap();
    let mut written = 0usize;
    let mut open = true;
    for _ in 0..40 {
        match rng.below(5) {
            // The writer writes its next chunk (pages of 16 KiB, in order), then closes.
            0 | 1 if open => {
                let end = (written + 16384 * (1 + rng.below(3) as usize)).min(new.len());
                fs.write(fd, written as u64, &new[written..end]).unwrap();
                written = end;
                if written == new.len() {
                    design.close(&mut fs, fd).unwrap();
                    open = false;
                }
            }
            // A writeback pass reaches part of the dirty pages.
            2 => {
                fs.writeback_some(1 + rng.below(3) as usize).unwrap();
            }
            // Time passes: background work (the flusher; LightFS's updater and monitor).
            3 => {
                fs.advance_to(fs.clock().after(rng.below(8_000_000_000)));
                design.background(&mut fs).unwrap();
            }
            _ => {
                let out = design.offload(&mut fs, &req, c).unwrap();
                results.push(out.files[0].ret.clone());
            }
        }
    }
    if open {
        fs.write(fd, written as u64, &new[written..]).unwrap();
        design.close(&mut fs, fd).unwrap();
    }
    // Eventually everything is on flash and synchronised.
    fs.advance_to(fs.clock().after(60_000_000_000));
    design.background(&mut fs).unwrap();
    fs.sync().unwrap();
    design.background(&mut fs).unwrap();
    results.push(
        design.offload(&mut fs, &req, c).unwrap().files[0]
            .ret
            .clone(),
    );
    results
}

#[test]
fn lightfs_never_shows_a_torn_file_and_frag_s_can() {
    let profile = Profile::load("cosmos-plus").unwrap();
    let mut c = compute(App::Stats64, &profile);
    let mut rng = SimRng::new(99);
    let old = App::Stats64.content(8 * 16384, &mut rng);
    let new = App::Stats64.content(8 * 16384, &mut rng);
    let (old_r, new_r) = (stats_of(&mut c, &old), stats_of(&mut c, &new));
    assert_ne!(old_r, new_r);
    let mut torn_seeds = Vec::new();
    let mut saw_new_while_racing = false;
    for seed in 0..40 {
        let light = race(DesignKind::LightFs, seed, &mut c, &old, &new);
        for r in &light {
            assert!(
                *r == old_r || *r == new_r,
                "lightfs seed {seed}: a torn read"
            );
        }
        assert_eq!(
            light.last().unwrap(),
            &new_r,
            "lightfs seed {seed}: the new version wins in the end"
        );
        saw_new_while_racing |= light[..light.len() - 1].contains(&new_r);
        let frag = race(DesignKind::FragS, seed, &mut c, &old, &new);
        if frag.iter().any(|r| *r != old_r && *r != new_r) {
            torn_seeds.push(seed);
        }
        assert_eq!(frag.last().unwrap(), &new_r);
    }
    assert!(
        !torn_seeds.is_empty(),
        "no interleaving tore the file under frag-s: the model cannot show LightFS §II-D"
    );
    assert!(
        saw_new_while_racing,
        "the update synchronizer should publish the new version mid-run"
    );
    eprintln!(
        "frag-s read a torn file under {} of 40 seeds",
        torn_seeds.len()
    );
}

/// `csd replay` of a program that offloads over files it found, and `csd ndp` over the same
/// files, time each design's request alike (issue 17: the two must agree on the same files).
/// Both lay a data set out as `cp` and `sync` leave it (`HostFs::import_all`), so the flash
/// holds the same files on the same channels.
#[test]
fn csd_ndp_and_csd_replay_agree_on_the_same_files() {
    let files = 20;
    let paths: Vec<String> = (0..files).map(|i| format!("{DATA_DIR}/f{i:05}")).collect();
    let mut trace = String::from("{\"format\":\"csd-trace\",\"version\":1,\"clock\":\"ns\"}\n");
    for t in 0..3 {
        let op = serde_json::json!({
            "t": t * 1000, "pid": 1, "op": "ndp", "task": "stats64",
            "paths": paths, "sizes": vec![16384; files],
        });
        trace.push_str(&format!("{op}\n"));
    }
    let dir = common::scratch_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("agree.trace");
    std::fs::write(&path, trace).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_csd"))
        .args([
            "replay",
            path.to_str().unwrap(),
            "--design",
            "all",
            "--no-store",
            "--json",
        ])
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replay: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let profile = Profile::load("cosmos-plus").unwrap();
    let mut c = compute(App::Stats64, &profile);
    let data = synthetic(App::Stats64, files, 16 << 10, 3);
    let req = NdpRequest {
        paths: paths.clone(),
        who: OWNER,
    };
    for kind in DesignKind::ALL {
        let (mut fs, mut design) = csd::ndp::prepare(&profile, Files::Set(&data), kind).unwrap();
        design.offload(&mut fs, &req, &mut c).unwrap(); // warms the caches, as `csd ndp` does
        let warm = design.offload(&mut fs, &req, &mut c).unwrap().summary();
        let name = kind.to_string();
        let replayed = replay["designs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["design"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} missing from the replay"));
        let ndp_op = &replayed["latency"]["ndp"];
        assert_eq!(ndp_op["count"], 3, "{name}: {ndp_op}");
        // The replay's first request finds the device's caches cold; the median is warm.
        // Its histogram rounds to within 0.1 %.
        let median = ndp_op["p50_ns"].as_f64().unwrap();
        let ratio = median / warm.makespan_ns as f64;
        assert!(
            (0.995..=1.005).contains(&ratio),
            "{name}: replay {median} ns, csd ndp {} ns",
            warm.makespan_ns
        );
    }
}

/// Synthetic files made one at a time as they are placed give every design the run the same
/// files held in memory give it.
#[test]
fn files_made_as_placed_run_as_the_held_set_does() {
    let profile = Profile::load("cosmos-plus").unwrap();
    let mut c = compute(App::Stats64, &profile);
    let app = App::Stats64;
    let (count, size, seed) = (12, 40_000, 9);
    let held = csd::ndp::synthetic_of(app.content_kind(), count, size, seed);
    let made = Files::Synthetic {
        content: app.content_kind(),
        count,
        size,
        seed,
    };
    // The same bytes land in the same files...
    let (mut fs, _) = csd::ndp::prepare(&profile, made, DesignKind::LightFs).unwrap();
    for (name, bytes) in &held {
        let path = format!("{DATA_DIR}/{name}");
        assert_eq!(&fs.read_file(&path, OWNER).unwrap(), bytes, "{path}");
    }
    // ...and every design's figures are the same.
    for kind in DesignKind::ALL {
        let a = measure(&profile, Files::Set(&held), kind, &mut c, false).unwrap();
        let b = measure(&profile, made, kind, &mut c, false).unwrap();
        assert_eq!(a, b, "{kind}");
    }
}
