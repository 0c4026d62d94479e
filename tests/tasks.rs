//! The example tasks through the real runtime, against independent reference
//! implementations written here (not the kernels the tasks use), on random inputs.

use csd_device::{DataMode, Profile};
use csd_kernels::RECORD_BYTES;
use csd_runtime::{
    Csd, EngineConfig, FileMode, IscContext, Task, TaskEngine, TaskError, TaskLimits, TaskReport,
};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};

fn engine() -> Arc<TaskEngine> {
    static E: OnceLock<Arc<TaskEngine>> = OnceLock::new();
    E.get_or_init(|| {
        Arc::new(
            TaskEngine::new(EngineConfig {
                cache_dir: None,
                ..Default::default()
            })
            .unwrap(),
        )
    })
    .clone()
}

fn task(name: &str) -> Task {
    engine()
        .load(name, csd::builtin::task(name).expect("built-in task"))
        .unwrap()
}

fn device(profile: &str) -> Csd {
    Csd::new(
        &Profile::load(profile).unwrap(),
        DataMode::Payloads,
        engine(),
    )
    .unwrap()
}

/// Imports `files` as /in/0, /in/1, ... and runs `name` over them (plus `extra` files).
fn run_on(
    name: &str,
    files: &[Vec<u8>],
    args: Value,
    extra: &[(&str, FileMode)],
) -> (Csd, TaskReport) {
    run_on_bytes(name, files, args.to_string().into_bytes(), extra)
}

/// [`run_on`] for a task whose arguments are not JSON.
fn run_on_bytes(
    name: &str,
    files: &[Vec<u8>],
    args: Vec<u8>,
    extra: &[(&str, FileMode)],
) -> (Csd, TaskReport) {
    let mut csd = device("daisyplus-femu");
    let mut ctx = IscContext::new();
    for (i, f) in files.iter().enumerate() {
        let path = format!("/in/{i}");
        csd.import(&path, f).unwrap();
        ctx = ctx.file(path, FileMode::Read);
    }
    for (path, mode) in extra {
        ctx = ctx.file(*path, *mode);
    }
    let report = csd.run(&task(name), &ctx.args(args)).unwrap();
    (csd, report)
}

fn ref_sum(data: &[u8], width: usize) -> u64 {
    let mut sum = 0u64;
    let mut i = 0;
    while i + width <= data.len() {
        let mut v = 0u64;
        for b in (0..width).rev() {
            v = (v << 8) | u64::from(data[i + b]);
        }
        sum = sum.wrapping_add(v);
        i += width;
    }
    sum
}

fn ref_crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn ref_grep(hay: &[u8], needle: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        if &hay[i..i + needle.len()] == needle {
            out.push(i as u64);
            i += needle.len();
        } else {
            i += 1;
        }
    }
    out
}

fn text(alphabet: &'static [u8]) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(alphabet), 0..20_000)
}

/// `len` bytes of dots with `NEEDLE` at each of `at`, and where the reference finds it.
fn needles(len: usize, at: &[usize]) -> (Vec<u8>, Vec<u64>) {
    let mut file = vec![b'.'; len];
    for &a in at {
        file[a..a + 6].copy_from_slice(b"NEEDLE");
    }
    let found = ref_grep(&file, b"NEEDLE");
    assert_eq!(
        found.len(),
        at.len(),
        "the fixture places {} matches",
        at.len()
    );
    (file, found)
}

#[test]
fn imported_files_are_on_the_flash_before_a_run_starts() {
    // cosmos-plus's firmware buffers host writes in DRAM; an import stands for data written
    // long before, so a host-only run reads it from the flash, as an in-storage one does.
    let mut csd = device("cosmos-plus");
    csd.import("/in/0", &vec![1u8; 64 << 10]).unwrap();
    assert_eq!(csd.device().buffered_dirty_pages(), 0);
    let before = csd.device().counters().io.flash_page_reads;
    let ctx = IscContext::new()
        .file("/in/0", FileMode::Read)
        .args(b"{}".to_vec())
        .on_host();
    csd.run(&task("stats64"), &ctx).unwrap();
    let read = csd.device().counters().io.flash_page_reads - before;
    assert_eq!(read, 4, "64 KiB in 16 KiB pages");
}

/// The accelerator streams a file through the host in 1 MiB chunks: a match that straddles
/// two chunks is found once, at its offset.
#[test]
fn the_grep_accelerator_finds_matches_across_its_streaming_chunks() {
    const MIB: usize = 1 << 20;
    let (file, expect) = needles(
        3 * MIB + 100,
        &[0, MIB - 3, MIB + 10, 2 * MIB - 1, 2 * MIB + 5, 3 * MIB + 94],
    );
    let mut csd = device("cosmos-plus");
    csd.import("/in/big", &file).unwrap();
    let args = json!({ "pattern": "NEEDLE", "max_offsets": 10 });
    let r = csd
        .run(
            &task("grep-accel"),
            &IscContext::new()
                .file("/in/big", FileMode::Read)
                .args(args.to_string().into_bytes()),
        )
        .unwrap();
    let got = r.ret_json().unwrap();
    assert_eq!(got["total"], json!(expect.len()));
    assert_eq!(got["files"][0]["offsets"], json!(expect));
}

/// `data` cut at `cuts` (any order, any values: those past the end cut at the end).
fn pieces<'a>(data: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|&c| c.min(data.len())).collect();
    at.extend([0, data.len()]);
    at.sort_unstable();
    at.windows(2).map(|w| &data[w[0]..w[1]]).collect()
}

/// `grep`, `knn` and `wordquery` stream a file in 512 KiB chunks: one several times larger
/// than their memory cap is searched whole, matches that straddle chunk boundaries included.
#[test]
fn grep_knn_and_wordquery_stream_files_larger_than_their_memory_cap() {
    const CHUNK: usize = csd_kernels::STREAM_CHUNK;
    let (file, expect) = needles(
        12 * CHUNK + 100,
        &[
            0,
            CHUNK - 3,
            CHUNK + 10,
            2 * CHUNK - 1,
            7 * CHUNK - 5,
            12 * CHUNK + 94,
        ],
    );
    // 128-dimension vectors, the nearest to the query the last one.
    let query = vec![1.0f32; 128];
    let mut vectors: Vec<u8> = Vec::with_capacity(12 * CHUNK);
    for i in 0..12 * CHUNK / 512 {
        let v = if i == 12 * CHUNK / 512 - 1 {
            1.5
        } else {
            3.0 + i as f32
        };
        vectors.extend((0..128).flat_map(|_| v.to_le_bytes()));
    }
    let mut csd = device("cosmos-plus");
    csd.import("/in/text", &file).unwrap();
    csd.import("/in/vectors", &vectors).unwrap();
    let cap = TaskLimits {
        memory_bytes: Some(4 << 20),
        ..TaskLimits::default()
    };
    let grep = IscContext::new()
        .file("/in/text", FileMode::Read)
        .args(
            json!({ "pattern": "NEEDLE", "max_offsets": 10 })
                .to_string()
                .into_bytes(),
        )
        .limits(cap.clone());
    let got = csd.run(&task("grep"), &grep).unwrap().ret_json().unwrap();
    assert_eq!(got["total"], json!(expect.len()));
    assert_eq!(got["files"][0]["offsets"], json!(expect));
    let knn = IscContext::new()
        .file("/in/vectors", FileMode::Read)
        .args(json!({ "query": query, "k": 2 }).to_string().into_bytes())
        .limits(cap.clone());
    let got = csd.run(&task("knn"), &knn).unwrap().ret_json().unwrap();
    let n = &got["neighbors"];
    assert_eq!(n[0]["index"], json!(12 * CHUNK / 512 - 1));
    assert_eq!(n[1]["index"], json!(0));
    // A word query over words that straddle chunks, and one word longer than a chunk.
    let mut words = vec![b' '; 3 * CHUNK];
    words[CHUNK - 2..CHUNK + 3].copy_from_slice(b"alpha");
    words[2 * CHUNK - 10..2 * CHUNK + 10].fill(b'a');
    words[3 * CHUNK - 5..].copy_from_slice(b"alpha");
    csd.import("/in/words", &words).unwrap();
    let query = IscContext::new()
        .file("/in/words", FileMode::Read)
        .args(json!({ "words": ["alpha", "a"] }).to_string().into_bytes())
        .limits(cap);
    let got = csd
        .run(&task("wordquery"), &query)
        .unwrap()
        .ret_json()
        .unwrap();
    let hits = &got["files"][0]["words"];
    assert_eq!(hits[0]["count"], json!(2));
    assert_eq!(hits[0]["addresses"], json!([CHUNK - 2, 3 * CHUNK - 5]));
    assert_eq!(hits[1]["count"], json!(0), "a run of 20 a's is one word");
    // The same file in one piece is over the cap: streaming is what made it fit.
    let whole = IscContext::new()
        .file("/in/text", FileMode::Read)
        .args(json!({ "pattern": "NEEDLE" }).to_string().into_bytes())
        .limits(TaskLimits {
            memory_bytes: Some(4 << 20),
            ..TaskLimits::default()
        });
    let e = csd
        .run(&task("grep-bytewise"), &whole)
        .expect_err("read whole, over the cap");
    assert!(matches!(e, TaskError::MemoryLimit { .. }), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn stats_and_checksum_match_references(files in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40_000), 1..4)) {
        for (name, width) in [("stats32", 4), ("stats64", 8)] {
            let (_, r) = run_on(name, &files, json!({}), &[]);
            let expect = files.iter().fold(0u64, |a, f| a.wrapping_add(ref_sum(f, width)));
            prop_assert_eq!(&r.ret_json().unwrap()["sum"], &json!(expect), "{}", name);
        }
        let (_, r) = run_on("checksum", &files, json!({}), &[]);
        let got = r.ret_json().unwrap();
        for (i, f) in files.iter().enumerate() {
            prop_assert_eq!(&got["files"][i], &json!({ "crc32": ref_crc32(f), "bytes": f.len() }));
        }
    }

    #[test]
    fn grep_on_cpu_and_accelerator_match_the_reference(
        files in prop::collection::vec(text(b"ab c\n"), 1..3),
        pattern in prop::collection::vec(prop::sample::select(b"ab c".as_slice()), 1..4),
    ) {
        let pat = String::from_utf8(pattern.clone()).unwrap();
        let expect: Vec<Value> = files.iter().map(|f| {
            let hits = ref_grep(f, &pattern);
            json!({ "count": hits.len(), "offsets": hits.iter().take(5).collect::<Vec<_>>() })
        }).collect();
        let args = json!({ "pattern": pat, "max_offsets": 5 });
        let (_, cpu) = run_on("grep", &files, args.clone(), &[]);
        prop_assert_eq!(&cpu.ret_json().unwrap()["files"], &json!(expect));
        // The accelerator needs a profile that has one.
        let mut csd = device("cosmos-plus");
        let mut ctx = IscContext::new();
        for (i, f) in files.iter().enumerate() {
            csd.import(&format!("/in/{i}"), f).unwrap();
            ctx = ctx.file(format!("/in/{i}"), FileMode::Read);
        }
        let acc = csd.run(&task("grep-accel"), &ctx.args(args.to_string().into_bytes())).unwrap();
        prop_assert_eq!(acc.ret_json().unwrap(), cpu.ret_json().unwrap());
    }

    #[test]
    fn wordquery_matches_the_reference(
        file in text(b"ab cd_\n."),
        words in prop::collection::vec(prop::sample::select(vec!["a", "b", "ab", "cd", "a_b", "dd"]), 1..5),
    ) {
        let (_, r) = run_on("wordquery", std::slice::from_ref(&file), json!({ "words": words, "max_addresses": 3 }), &[]);
        let got = r.ret_json().unwrap();
        // Reference: split on anything that is not a word byte, remember word start offsets.
        let mut spans = Vec::new();
        let mut start = None;
        for (i, &b) in file.iter().chain(std::iter::once(&b' ')).enumerate() {
            let w = b.is_ascii_alphanumeric() || b == b'_';
            match (w, start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => { spans.push((s, &file[s..i])); start = None; }
                _ => {}
            }
        }
        for (k, word) in words.iter().enumerate() {
            let at: Vec<usize> = spans.iter().filter(|(_, w)| *w == word.as_bytes()).map(|(s, _)| *s).collect();
            prop_assert_eq!(&got["files"][0]["words"][k]["count"], &json!(at.len()));
            prop_assert_eq!(&got["files"][0]["words"][k]["addresses"], &json!(at.iter().take(3).collect::<Vec<_>>()));
        }
    }

    #[test]
    fn knn_matches_the_reference(vectors in prop::collection::vec(prop::collection::vec(-100f32..100f32, 128), 1..60), k in 1usize..8) {
        let query: Vec<f32> = (0..128).map(|i| (i as f32).sin() * 50.0).collect();
        let bytes: Vec<u8> = vectors.iter().flatten().flat_map(|x| x.to_le_bytes()).collect();
        let (_, r) = run_on("knn", &[bytes], json!({ "query": query, "k": k }), &[]);
        let got = r.ret_json().unwrap();
        let mut expect: Vec<(f64, usize)> = vectors.iter().enumerate().map(|(i, v)| {
            (v.iter().zip(&query).map(|(a, b)| f64::from(a - b).powi(2)).sum::<f64>().sqrt(), i)
        }).collect();
        expect.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let n = got["neighbors"].as_array().unwrap();
        prop_assert_eq!(n.len(), k.min(vectors.len()));
        for (g, (d, i)) in n.iter().zip(&expect) {
            let gd = g["distance"].as_f64().unwrap();
            prop_assert!((gd - d).abs() <= 1e-3 * d.max(1.0), "distance {} vs {}", gd, d);
            // Indices agree unless two distances are too close for f32 to order reliably.
            if g["index"] != json!(i) {
                let other = expect.iter().find(|e| json!(e.1) == g["index"]).unwrap();
                prop_assert!((other.0 - d).abs() <= 1e-3 * d.max(1.0));
            }
        }
    }

    #[test]
    fn knn_bin_returns_the_in_order_distances_in_binary(
        files in prop::collection::vec(prop::collection::vec(prop::collection::vec(-100f32..100f32, 128), 0..12), 1..4),
        k in 1u32..8,
    ) {
        let query: Vec<f32> = (0..128).map(|i| (i as f32).cos() * 40.0).collect();
        let args: Vec<u8> = query.iter().flat_map(|x| x.to_le_bytes()).chain(k.to_le_bytes()).collect();
        let bytes: Vec<Vec<u8>> = files.iter()
            .map(|f| f.iter().flatten().flat_map(|x| x.to_le_bytes()).collect())
            .collect();
        let (_, r) = run_on_bytes("knn-bin", &bytes, args, &[]);
        // The paper's loop in f32, one dimension after the other: the task must give these
        // exact bits, ordered by distance, then file, then index.
        let mut expect: Vec<(f32, usize, u64)> = Vec::new();
        for (f, vectors) in files.iter().enumerate() {
            for (i, v) in vectors.iter().enumerate() {
                let d = v.iter().zip(&query).fold(0f32, |s, (a, q)| s + (a - q) * (a - q));
                expect.push((d.sqrt(), f, i as u64));
            }
        }
        expect.sort_by(|a, b| a.0.total_cmp(&b.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        expect.truncate(k as usize);
        prop_assert_eq!(r.ret.len(), expect.len() * 16);
        let mut seen = Vec::new();
        for (got, (d, f, i)) in r.ret.chunks_exact(16).zip(&expect) {
            let handle = u32::from_le_bytes(got[..4].try_into().unwrap());
            let index = u64::from_le_bytes(got[4..12].try_into().unwrap());
            let distance = f32::from_le_bytes(got[12..].try_into().unwrap());
            prop_assert_eq!((distance.to_bits(), index), (d.to_bits(), *i));
            seen.push((handle, *f));
        }
        // Handles are the runtime's numbers for the files, given in registration order.
        for &(h, f) in &seen {
            for &(h2, f2) in &seen {
                prop_assert_eq!(h.cmp(&h2), f.cmp(&f2));
            }
        }
    }

    #[test]
    fn bitmap_decompress_expands_what_was_encoded(runs in prop::collection::vec((0u8..3, 1u32..300), 1..40)) {
        // Build a bitmap from random runs, encode it, and expect exactly the bitmap back.
        let (mut words, mut encoded) = (Vec::<u32>::new(), Vec::<u32>::new());
        for (kind, n) in runs {
            match kind {
                0 | 1 => {
                    words.extend(std::iter::repeat_n(if kind == 1 { u32::MAX } else { 0 }, n as usize));
                    encoded.push(0x8000_0000 | (u32::from(kind) << 30) | n);
                }
                _ => {
                    let lit: Vec<u32> = (0..n).map(|i| i.wrapping_mul(2_654_435_761) | 1).collect();
                    words.extend(&lit);
                    encoded.push(n);
                    encoded.extend(&lit);
                }
            }
        }
        let input: Vec<u8> = encoded.iter().flat_map(|w| w.to_le_bytes()).collect();
        let expect: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let (mut csd, r) = run_on("bitmap-decompress", &[input], json!({}), &[("/out/bits", FileMode::Write)]);
        prop_assert_eq!(&r.ret_json().unwrap()["bytes_out"], &json!(expect.len()));
        prop_assert_eq!(csd.export("/out/bits").unwrap(), expect);
        prop_assert!(r.breakdown.write_ns > 0);
    }

    #[test]
    fn bfs_matches_the_reference(n in 1u32..200, edges in prop::collection::vec((0u32..200, 0u32..200), 0..600), source in 0u32..200) {
        let source = source % n;
        let mut adj = vec![Vec::new(); n as usize];
        for &(a, b) in &edges {
            adj[(a % n) as usize].push(b % n);
        }
        let bytes = csd_kernels::encode_csr(&adj);
        // Reference BFS.
        let mut dist = vec![u32::MAX; n as usize];
        let mut queue = std::collections::VecDeque::from([source]);
        dist[source as usize] = 0;
        while let Some(u) = queue.pop_front() {
            for &v in &adj[u as usize] {
                if dist[v as usize] == u32::MAX { dist[v as usize] = dist[u as usize] + 1; queue.push_back(v); }
            }
        }
        let (mut csd, r) = run_on("bfs", &[bytes], json!({ "source": source }), &[("/out/dist", FileMode::Write)]);
        let out = csd.export("/out/dist").unwrap();
        let got: Vec<u32> = out.chunks_exact(4).map(|w| u32::from_le_bytes(w.try_into().unwrap())).collect();
        prop_assert_eq!(got, dist.clone());
        prop_assert_eq!(&r.ret_json().unwrap()["reached"], &json!(dist.iter().filter(|&&d| d != u32::MAX).count()));
    }
}

/// BFS reads the graph as the search reaches it: a search confined to a small component
/// reads few of a large file's pages, each one synchronous request. A graph whose words
/// point outside it is refused with the reason, and the device keeps serving.
#[test]
fn bfs_reads_only_the_pages_the_search_reaches() {
    // Two components: a 10-node ring, then 20,000 isolated nodes with 4 self-loops each.
    let (ring, rest) = (10u32, 20_000u32);
    let n = ring + rest;
    let mut adj: Vec<Vec<u32>> = (0..ring).map(|u| vec![(u + 1) % ring]).collect();
    adj.extend((ring..n).map(|u| vec![u; 4]));
    let bytes = csd_kernels::encode_csr(&adj);
    let pages = bytes.len().div_ceil(4096) as u64;
    let (_, r) = run_on(
        "bfs",
        std::slice::from_ref(&bytes),
        json!({ "source": 3 }),
        &[],
    );
    let ret = r.ret_json().unwrap();
    assert_eq!(ret["reached"], json!(ring));
    // The header and the ring's offsets share page 0; its edges are on the first target page.
    let reads = ret["page_reads"].as_u64().unwrap();
    assert!(reads <= 3 && pages > 90, "{reads} of {pages} pages read");
    assert!(r.breakdown.read_file_ns > 0);

    // Node 5's only edge now points past the last node.
    let mut bad = bytes;
    let at = 4 * (3 + n as usize + 5);
    bad[at..at + 4].copy_from_slice(&(n + 7).to_le_bytes());
    let mut csd = device("daisyplus-femu");
    csd.import("/g", &bad).unwrap();
    let ctx = IscContext::new()
        .file("/g", FileMode::Read)
        .args(json!({ "source": 0 }).to_string().into_bytes());
    let e = csd.run(&task("bfs"), &ctx).unwrap_err().to_string();
    assert!(
        e.contains(&format!("edge 5 points to node {} of {n}", n + 7)),
        "{e}"
    );
    let ctx = IscContext::new()
        .file("/g", FileMode::Read)
        .args(json!({ "source": ring + 1 }).to_string().into_bytes());
    let ok = csd.run(&task("bfs"), &ctx).unwrap();
    assert_eq!(ok.ret_json().unwrap()["reached"], json!(1));
}

#[test]
fn identical_runs_give_identical_results_breakdowns_and_fuel() {
    let files = vec![(0..50_000u32)
        .flat_map(|i| (i * 7).to_le_bytes())
        .collect::<Vec<u8>>()];
    let (_, a) = run_on("checksum", &files, json!({}), &[]);
    let (_, b) = run_on("checksum", &files, json!({}), &[]);
    assert_eq!(
        (a.ret, a.fuel, a.breakdown, a.finished),
        (b.ret, b.fuel, b.breakdown, b.finished)
    );
}

#[test]
fn stats64_over_16_kib_costs_table_iii_time_on_cosmos_plus() {
    // The calibration point of cosmos-plus's device CPU (LightFS Table III: STATS64, 25 µs).
    // If this fails after a toolchain change, the fuel count moved: recalibrate ns_per_fuel.
    let mut csd = device("cosmos-plus");
    let data: Vec<u8> = (0..16384u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    csd.import("/f", &data).unwrap();
    let r = csd
        .run(
            &task("stats64"),
            &IscContext::new().file("/f", FileMode::Read),
        )
        .unwrap();
    let us = r.breakdown.compute_ns as f64 / 1e3;
    assert!(
        (24.0..26.0).contains(&us),
        "stats64 compute {us} µs, fuel {}",
        r.fuel
    );
}

fn hostile(action: &str, limits: TaskLimits) -> TaskError {
    let mut csd = device("daisyplus-femu");
    csd.import("/keep", b"precious").unwrap();
    let ctx = IscContext::new()
        .args(json!({ "do": action }).to_string().into_bytes())
        .limits(limits);
    let err = csd
        .run(&task("hostile"), &ctx)
        .expect_err("hostile task fails");
    // The device keeps serving: a healthy task runs and the data is intact.
    let ok = csd
        .run(
            &task("checksum"),
            &IscContext::new().file("/keep", FileMode::Read),
        )
        .unwrap();
    assert_eq!(
        ok.ret_json().unwrap()["files"][0]["crc32"],
        json!(ref_crc32(b"precious"))
    );
    err
}

#[test]
fn a_rust_panic_reports_its_message_and_location() {
    let e = hostile("panic", TaskLimits::default()).to_string();
    assert!(
        e.starts_with("task panicked: index out of bounds: the len is 3 but the index is 7"),
        "{e}"
    );
    assert!(e.contains("hostile/src/lib.rs"), "{e}");
}

#[test]
fn a_rust_memory_bomb_hits_the_cap() {
    let e = hostile(
        "bomb",
        TaskLimits {
            memory_bytes: Some(64 << 20),
            ..TaskLimits::default()
        },
    );
    assert!(
        matches!(e, TaskError::MemoryLimit { cap, .. } if cap == 64 << 20),
        "{e}"
    );
}

#[test]
fn a_rust_endless_loop_exhausts_fuel() {
    let e = hostile(
        "loop",
        TaskLimits {
            fuel: 2_000_000,
            ..TaskLimits::default()
        },
    );
    assert!(
        matches!(
            e,
            TaskError::FuelExhausted {
                budget: 2_000_000,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_rust_runaway_recursion_is_stopped() {
    let e = hostile("recurse", TaskLimits::default());
    // Rust's shadow stack lives in linear memory: whichever of it or the Wasm stack runs out
    // first stops the task, as a stack overflow or an out-of-bounds access.
    assert!(
        matches!(e, TaskError::StackOverflow | TaskError::Trap(_)),
        "{e}"
    );
}

#[test]
fn a_frame_bigger_than_the_task_stack_traps_instead_of_overwriting_data() {
    // Tasks are built with a 64 KiB stack laid out first in linear memory
    // (src/task_rustflags.rs), so an overflow leaves the memory rather than reach the data.
    let e = hostile("big-frame", TaskLimits::default());
    assert!(
        matches!(&e, TaskError::Trap(m) if m.contains("out of bounds") && m.contains("stack overflow")),
        "{e}"
    );
}

#[test]
fn a_task_error_reaches_the_host() {
    let e = hostile("fail", TaskLimits::default()).to_string();
    assert_eq!(e, "task failed (run returned 1): refusing on purpose");
}

#[test]
fn bad_arguments_are_reported_by_the_task() {
    let mut csd = device("daisyplus-femu");
    csd.import("/f", b"x").unwrap();
    let ctx = IscContext::new()
        .file("/f", FileMode::Read)
        .args(b"{\"pattern\": 7}".to_vec());
    let e = csd.run(&task("grep"), &ctx).unwrap_err().to_string();
    assert!(
        e.contains("bad arguments: invalid type: integer `7`, expected a string"),
        "{e}"
    );
}

/// TxISC's atomicity through the real runtime: a task that writes and then fails leaves
/// nothing behind as a transaction (the default), and its partial output under FileISC.
#[test]
fn a_failed_transaction_is_rolled_back_and_a_file_isc_task_is_not() {
    use csd_runtime::ExecMode;
    for exec in [ExecMode::Tx, ExecMode::File] {
        let mut csd = device("daisyplus-femu");
        csd.import("/out", b"precious data").unwrap();
        let ctx = IscContext::new()
            .file("/out", FileMode::ReadWrite)
            .file("/new", FileMode::Write)
            .exec(exec)
            .args(json!({ "do": "write-then-fail" }).to_string().into_bytes());
        let e = csd.run(&task("hostile"), &ctx).unwrap_err().to_string();
        assert_eq!(e, "task failed (run returned 1): failing after a write");
        let after = csd.export("/out").unwrap();
        match exec {
            ExecMode::Tx => {
                assert_eq!(after, b"precious data", "rolled back");
                assert!(
                    csd.volume().layout("/new").is_err(),
                    "created file forgotten"
                );
                let stats = csd.device().txn_stats();
                assert_eq!(
                    (stats.aborted, stats.snapshots, stats.delta_pages),
                    (1, 0, 0)
                );
            }
            _ => assert_eq!(after, b"partial output", "FileISC keeps the partial write"),
        }
        csd.device().check_invariants().unwrap();
        // The device keeps serving, transactionally.
        let ok = csd
            .run(
                &task("checksum"),
                &IscContext::new().file("/out", FileMode::Read),
            )
            .unwrap();
        assert_eq!(
            ok.ret_json().unwrap()["files"][0]["crc32"],
            json!(ref_crc32(&after))
        );
    }
}

/// Merges sorted runs of records with a reference: newest run wins per key.
fn ref_compact(runs: &[Vec<(u64, u8)>]) -> Vec<(u64, u8)> {
    let mut newest = std::collections::BTreeMap::new();
    for run in runs {
        for &(k, v) in run {
            newest.insert(k, v);
        }
    }
    newest.into_iter().collect()
}

fn encode_run(run: &[(u64, u8)]) -> Vec<u8> {
    run.iter()
        .flat_map(|&(k, v)| {
            let mut r = k.to_le_bytes().to_vec();
            r.extend_from_slice(&[v; RECORD_BYTES - 8]);
            r
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn compact_matches_the_reference(
        runs in prop::collection::vec(prop::collection::btree_set(0u64..500, 0..200), 1..5),
        max_output in 64usize..4096,
    ) {
        let runs: Vec<Vec<(u64, u8)>> = runs
            .iter()
            .enumerate()
            .map(|(i, keys)| keys.iter().map(|&k| (k, i as u8 + 1)).collect())
            .collect();
        let expect = ref_compact(&runs);
        let files: Vec<Vec<u8>> = runs.iter().map(|r| encode_run(r)).collect();
        let per_file = (max_output / RECORD_BYTES).max(1) * RECORD_BYTES;
        let outputs = (expect.len() * RECORD_BYTES).div_ceil(per_file).max(1);
        let names: Vec<String> = (0..outputs).map(|i| format!("/out/{i}")).collect();
        let outs: Vec<(&str, FileMode)> = names.iter().map(|n| (n.as_str(), FileMode::Write)).collect();
        let (mut csd, r) = run_on(
            "compact",
            &files,
            json!({ "inputs": files.len(), "max_output_bytes": max_output }),
            &outs,
        );
        let mut got = Vec::new();
        for n in &names {
            let bytes = csd.export(n).unwrap();
            prop_assert!(bytes.len() <= per_file);
            got.extend(bytes.chunks_exact(RECORD_BYTES).map(|c| (u64::from_le_bytes(c[..8].try_into().unwrap()), c[8])));
        }
        prop_assert_eq!(&got, &expect);
        prop_assert_eq!(r.ret_json().unwrap()["records_out"].as_u64().unwrap(), expect.len() as u64);
    }
}

/// A compaction that runs out of output files fails after writing some: as a transaction
/// it leaves nothing behind; as a FileISC task it leaves a half-written output.
#[test]
fn a_failed_compaction_writes_no_output_as_a_transaction() {
    use csd_runtime::ExecMode;
    for exec in [ExecMode::Tx, ExecMode::File] {
        let mut csd = device("daisyplus-femu");
        let runs = [
            encode_run(&[(1, 1), (2, 1), (3, 1)]),
            encode_run(&[(2, 2), (9, 2)]),
        ];
        csd.import("/a", &runs[0]).unwrap();
        csd.import("/b", &runs[1]).unwrap();
        csd.import("/out0", b"old output").unwrap();
        let ctx = IscContext::new()
            .file("/a", FileMode::Read)
            .file("/b", FileMode::Read)
            .file("/out0", FileMode::Write)
            .exec(exec)
            .args(
                json!({ "inputs": 2, "max_output_bytes": 2 * RECORD_BYTES })
                    .to_string()
                    .into_bytes(),
            );
        let e = csd.run(&task("compact"), &ctx).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "does not fit in the 1 registered files of {} bytes",
                2 * RECORD_BYTES
            )),
            "{e}"
        );
        let out = csd.export("/out0").unwrap();
        if exec == ExecMode::Tx {
            assert_eq!(out, b"old output");
        } else {
            assert_eq!(
                out.len(),
                2 * RECORD_BYTES,
                "FileISC keeps the first output file"
            );
            assert_eq!(out[..8], 1u64.to_le_bytes());
        }
    }
}

/// TxISC §V-C in the model: the three applications run as transactions at (almost) FileISC's
/// speed, and their results agree across placements.
#[test]
fn applications_run_as_transactions_at_file_isc_speed() {
    use csd::txapps::{measure, scaled_sizes, App, Placement};
    let profile = Profile::load("daisyplus-femu").unwrap();
    let sizes = scaled_sizes(1.0 / 256.0);
    for app in App::ALL {
        let runs = measure(app, &sizes, &profile, &engine(), 3).unwrap();
        assert_eq!(runs.len(), 3);
        let (tx, file, host) = (&runs[0], &runs[1], &runs[2]);
        assert_eq!(
            (tx.placement, host.placement),
            (Placement::Tx, Placement::HostOnly)
        );
        assert_eq!(tx.result, file.result, "{app:?}");
        assert_eq!(tx.result, host.result, "{app:?}");
        let kept = file.latency_ns as f64 / tx.latency_ns as f64;
        assert!(
            kept > 0.99 && kept <= 1.0,
            "{app:?}: tx keeps {kept} of file"
        );
        assert!(
            host.breakdown.compute_ns < tx.breakdown.compute_ns,
            "the host CPU is faster than the device's"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A streamed grep finds what one pass over the whole file finds, whatever the pieces:
    /// shorter than the needle, empty, or cutting a match (the alphabet makes overlapping
    /// candidates such as `aa` in `aaa` common).
    #[test]
    fn grep_in_any_pieces_finds_what_a_whole_file_search_finds(
        hay in text(b"aab"),
        needle in prop::collection::vec(prop::sample::select(b"ab".as_slice()), 1..7),
        cuts in prop::collection::vec(0usize..20_000, 0..40),
        max in 0usize..6,
    ) {
        let expect = ref_grep(&hay, &needle);
        let mut grep = csd_kernels::GrepStream::new(&needle, max);
        for piece in pieces(&hay, &cuts) {
            grep.feed(piece);
        }
        let (count, offsets) = grep.finish();
        prop_assert_eq!(count, expect.len() as u64);
        prop_assert_eq!(offsets, expect.iter().take(max).copied().collect::<Vec<_>>());
    }

    /// A streamed word query finds what one pass over the whole text finds, words cut
    /// anywhere, those longer than every keyword included.
    #[test]
    fn word_query_in_any_pieces_finds_what_the_whole_text_gives(
        text in text(b"ab cd_\n.ab"),
        words in prop::collection::vec(prop::sample::select(vec!["a", "b", "ab", "cd", "a_b", "ababab"]), 1..5),
        cuts in prop::collection::vec(0usize..20_000, 0..40),
        max in 0usize..5,
    ) {
        let keys: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        let mut query = csd_kernels::WordQueryStream::new(&keys, max);
        for piece in pieces(&text, &cuts) {
            query.feed(piece);
        }
        prop_assert_eq!(query.finish(), csd_kernels::word_query(&text, &keys, max));
    }

    /// A streamed KNN finds the neighbours the whole file gives, vectors cut anywhere.
    #[test]
    fn knn_in_any_pieces_finds_the_whole_files_neighbours(
        values in prop::collection::vec(-100f32..100f32, 0..128 * 40),
        cuts in prop::collection::vec(0usize..20_480, 0..20),
        k in 1usize..6,
    ) {
        let query: Vec<f32> = (0..128).map(|i| (i as f32).cos() * 40.0).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut knn = csd_kernels::KnnStream::new(&query, k);
        for piece in pieces(&bytes, &cuts) {
            knn.feed(piece);
        }
        let streamed = knn.finish();
        prop_assert_eq!(&streamed, &csd_kernels::knn(&bytes, &query, k));
        // `knn` is the stream fed once: check both against every distance, sorted.
        let mut all: Vec<(f32, u64)> = bytes
            .chunks_exact(128 * 4)
            .enumerate()
            .map(|(i, v)| (csd_kernels::l2_squared(v, &query), i as u64))
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let brute: Vec<csd_kernels::Neighbor> = all
            .iter()
            .take(k)
            .map(|&(d, index)| csd_kernels::Neighbor { index, distance: d.sqrt() })
            .collect();
        prop_assert_eq!(streamed, brute);
    }
}
