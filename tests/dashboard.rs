//! `csd serve`: the API over a real store, and the dashboard in real headless Chromium
//! (driven through chromedriver).

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CSD: &str = env!("CARGO_BIN_EXE_csd");

/// A child process killed when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// A store with one replay of the bundled `ndp-mixed` sample under every design.
fn fixture_store(name: &str) -> PathBuf {
    let d = scratch(name);
    let store = d.join("store");
    let out = Command::new(CSD)
        .args(["replay", "ndp-mixed", "--json", "--store"])
        .arg(&store)
        .env("XDG_CACHE_HOME", d.join("cache"))
        .output()
        .expect("run csd replay");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    store
}

/// Starts `csd serve` on a free port; returns the server and its base URL.
fn serve(store: &Path) -> (Killed, String) {
    let mut child = Command::new(CSD)
        .args(["serve", "--addr", "127.0.0.1:0", "--store"])
        .arg(store)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start csd serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the server's first line");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .trim_end_matches('/')
        .to_string();
    (Killed(child), url)
}

/// One HTTP/1.1 request, raw, so tests can send what browsers would not (`/../`, huge
/// bodies). Returns (status, body).
fn http(base: &str, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    let host = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(host).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    // The server may answer (413) before reading a huge body; a failed write is fine then.
    let _ = s.write_all(body);
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    // Chunked bodies: keep the JSON/HTML between the chunk sizes.
    let body = if text
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 || after.len() < n {
                break;
            }
            out.push_str(&after[..n]);
            rest = after[n..].trim_start_matches("\r\n");
        }
        out
    } else {
        body.to_string()
    };
    (status, body)
}

fn get_json(base: &str, path: &str) -> (u16, Value) {
    let (status, body) = http(base, "GET", path, b"");
    let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
    (status, v)
}

#[test]
fn api_answers_runs_errors_and_refuses_what_it_should() {
    let store = fixture_store("api");
    let (_server, base) = serve(&store);

    let (status, runs) = get_json(&base, "/api/runs");
    assert_eq!(status, 200);
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1);
    assert_eq!(runs["runs"][0]["id"], "r1");

    let (status, run) = get_json(&base, "/api/runs/r1");
    assert_eq!(status, 200);
    let bars = run["view"]["breakdowns"][0]["bars"].as_array().unwrap();
    assert_eq!(bars.len(), 4, "one bar per design");
    for (bar, d) in bars
        .iter()
        .zip(run["run"]["report"]["designs"].as_array().unwrap())
    {
        assert_eq!(bar["design"], d["design"]);
        assert_eq!(bar["pao"], d["ndp"]["pao"], "PAO passes through unchanged");
    }

    // Unknown run: 404 with a JSON error; malformed ids: 400.
    let (status, e) = get_json(&base, "/api/runs/r99");
    assert_eq!(status, 404);
    assert!(e["error"].as_str().unwrap().contains("no run 'r99'"), "{e}");
    for bad in ["/api/runs/x1", "/api/runs/r0", "/api/runs/r1/diff/banana"] {
        let (status, e) = get_json(&base, bad);
        assert_eq!(status, 400, "{bad}: {e}");
        assert!(e["error"].as_str().unwrap().contains("not a run id"), "{e}");
    }
    let (status, _) = get_json(&base, "/api/nothing-here");
    assert_eq!(status, 404);

    // A diff of a run with itself: every delta is zero.
    let (status, d) = get_json(&base, "/api/runs/r1/diff/r1");
    assert_eq!(status, 200);
    assert_eq!(d["designs"].as_array().unwrap().len(), 4);
    assert!(d["designs"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["delta"] == 0.0));

    let (status, p) = get_json(&base, "/api/profiles");
    assert_eq!(status, 200);
    assert!(p
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "cosmos-plus"));

    // Oversized and malformed requests: 4xx, nothing started.
    let huge = vec![b'x'; 1 << 20];
    let (status, _) = http(&base, "POST", "/api/replays", &huge);
    assert_eq!(status, 413);
    let (status, body) = http(&base, "POST", "/api/replays", b"{\"trace\": 3}");
    assert!((400..500).contains(&status), "{status} {body}");
    let (_, jobs) = get_json(&base, "/api/replays");
    assert_eq!(jobs.as_array().unwrap().len(), 0);

    // Paths that climb never leave the embedded assets.
    for path in [
        "/assets/../Cargo.toml",
        "/assets/..%2f..%2fCargo.toml",
        "/../../etc/passwd",
        "/assets/%2e%2e/%2e%2e/etc/passwd",
    ] {
        let (status, body) = http(&base, "GET", path, b"");
        assert_eq!(status, 404, "{path}: {body}");
        assert!(
            !body.contains("[package]") && !body.contains("root:"),
            "{path}"
        );
    }
    let (status, js) = http(&base, "GET", "/assets/app.js", b"");
    assert_eq!(status, 200);
    assert!(js.contains("breakdownChart"));
}

#[test]
fn a_replay_started_through_the_api_is_stored() {
    let store = scratch("api-replay").join("store");
    let (_server, base) = serve(&store);
    let req = br#"{"trace":"ndp-mixed","profile":"cosmos-plus","designs":["lightfs"],"seed":3}"#;
    let (status, body) = http(&base, "POST", "/api/replays", req);
    assert_eq!(status, 202, "{body}");
    let job: Value = serde_json::from_str(&body).unwrap();
    let id = job["job"].as_str().unwrap().to_string();
    // Poll until it finishes (bounded: the sample replays in well under a minute).
    let started = Instant::now();
    let done = loop {
        let (_, j) = get_json(&base, &format!("/api/replays/{id}"));
        if j["state"] == "done" || j["state"] == "failed" {
            break j;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "replay job hung"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(done["state"], "done", "{done}");
    let (status, run) = get_json(
        &base,
        &format!("/api/runs/{}", done["run"].as_str().unwrap()),
    );
    assert_eq!(status, 200);
    assert_eq!(run["run"]["seed"], 3);
    assert_eq!(run["run"]["designs"][0], "lightfs");

    // A job naming a file on the server's disk is refused: requests name stored traces or samples.
    let bad = br#"{"trace":"/etc/passwd","profile":"cosmos-plus","designs":["lightfs"]}"#;
    let (_, body) = http(&base, "POST", "/api/replays", bad);
    let job: Value = serde_json::from_str(&body).unwrap();
    let id = job["job"].as_str().unwrap();
    let failed = loop {
        let (_, j) = get_json(&base, &format!("/api/replays/{id}"));
        if j["state"] == "done" || j["state"] == "failed" {
            break j;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(failed["state"], "failed");
    assert!(failed["error"]
        .as_str()
        .unwrap()
        .contains("no bundled sample"));
}

/// The main job's trace folded by its plan, replayed under lightfs.
const OFFLOADED_LIGHTFS: [&str; 6] = [
    "replay",
    "grep-src",
    "--offload",
    "grep-src",
    "--design",
    "lightfs",
];

/// The lightfs report `csd replay` prints for [`OFFLOADED_LIGHTFS`].
fn cli_offloaded_lightfs() -> Value {
    let out = Command::new(CSD)
        .args(OFFLOADED_LIGHTFS)
        .args(["--json", "--no-store"])
        .output()
        .expect("run csd replay");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["designs"][0].clone()
}

#[test]
fn a_replay_can_fold_its_trace_by_a_bundled_plan_and_never_one_on_disk() {
    let store = scratch("api-offload").join("store");
    let (_server, base) = serve(&store);
    let (_, choices) = get_json(&base, "/api/traces");
    assert_eq!(choices["plans"], serde_json::json!(["grep-src.plan.toml"]));
    assert!(
        choices["designs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == "fusion"),
        "{choices}"
    );
    let (status, job) = post_replay(
        &base,
        r#"{"trace":"grep-src","profile":"cosmos-plus","designs":["lightfs"],"offload":"grep-src"}"#,
    );
    assert_eq!(status, 202, "{job}");
    let done = finished(&base, job["job"].as_str().unwrap());
    assert_eq!(done["state"], "done", "{done}");
    let (_, run) = get_json(
        &base,
        &format!("/api/runs/{}", done["run"].as_str().unwrap()),
    );
    let name = run["run"]["trace"]["name"].as_str().unwrap();
    assert!(name.ends_with("offloaded by grep-src.plan.toml"), "{name}");
    // The same replay as the CLI's, to the nanosecond.
    let ours = &run["run"]["report"]["designs"][0];
    let cli = cli_offloaded_lightfs();
    assert!(ours["ndp"]["requests"].as_u64().unwrap() > 0, "{ours}");
    assert_eq!(ours["duration_ns"], cli["duration_ns"]);
    assert_eq!(ours["ndp"], cli["ndp"]);
    // The folded trace is kept in the store, so the run can be replayed again.
    let (_, again) = post_replay(
        &base,
        &format!(
            r#"{{"trace":"{}","profile":"cosmos-plus","designs":["lightfs"]}}"#,
            run["run"]["trace"]["id"].as_str().unwrap()
        ),
    );
    let again = finished(&base, again["job"].as_str().unwrap());
    assert_eq!(again["state"], "done", "{again}");

    // A plan is named, never read from the server's disk.
    let plan = format!(
        "{}/traces/samples/grep-src.plan.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let (_, job) = post_replay(
        &base,
        &format!(
            r#"{{"trace":"grep-src","profile":"cosmos-plus","designs":["lightfs"],"offload":"{plan}"}}"#
        ),
    );
    let failed = finished(&base, job["job"].as_str().unwrap());
    assert_eq!(failed["state"], "failed", "{failed}");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("no bundled offload plan"),
        "{failed}"
    );
}

#[test]
fn a_lenient_replay_skips_the_ops_a_strict_one_fails_on() {
    let store = scratch("api-lenient").join("store");
    let lines = [
        r#"{"t":0,"pid":1,"op":"mkdir","path":"/d"}"#,
        r#"{"t":1,"pid":1,"op":"mmap","path":"/d"}"#,
    ];
    stored_trace_with(&store, "mmap.trace", &lines, &["--lenient"]);
    // Without --lenient, `csd trace add` refuses the unknown op.
    let refused = Command::new(CSD)
        .args(["trace", "add", "--store"])
        .arg(&store)
        .arg(store.parent().unwrap().join("mmap.trace"))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("unknown op \"mmap\""), "{why}");
    let (_server, base) = serve(&store);
    let body = |lenient: bool| {
        format!(
            r#"{{"trace":"mmap.trace","profile":"cosmos-plus","designs":["host"],"lenient":{lenient}}}"#
        )
    };
    let (_, strict) = post_replay(&base, &body(false));
    let strict = finished(&base, strict["job"].as_str().unwrap());
    assert_eq!(strict["state"], "failed", "{strict}");
    assert!(
        strict["error"].as_str().unwrap().contains("unknown op"),
        "{strict}"
    );
    let (_, lenient) = post_replay(&base, &body(true));
    let lenient = finished(&base, lenient["job"].as_str().unwrap());
    assert_eq!(lenient["state"], "done", "{lenient}");
}

#[test]
fn replay_serve_folds_the_trace_by_its_plan_as_a_plain_replay_does() {
    let store = scratch("replay-serve").join("store");
    let child = Command::new(CSD)
        .args(OFFLOADED_LIGHTFS)
        .args(["--serve", "127.0.0.1:0", "--store"])
        .arg(&store)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start csd replay --serve");
    let mut child = Killed(child);
    let mut lines = BufReader::new(child.0.stdout.take().expect("stdout")).lines();
    // "csd: saved as run r1: http://ADDR/runs/r1", after the line naming the job.
    let saved = loop {
        let line = lines
            .next()
            .expect("the server ends its output only when killed")
            .unwrap();
        if line.starts_with("csd: saved as run") {
            break line;
        }
        assert!(!line.contains("failed"), "{line}");
    };
    let url = saved.rsplit(' ').next().unwrap();
    let (base, run) = url.split_once("/runs/").unwrap();
    let (_, run) = get_json(base, &format!("/api/runs/{run}"));
    let name = run["run"]["trace"]["name"].as_str().unwrap();
    assert!(name.ends_with("offloaded by grep-src.plan.toml"), "{name}");
    let cli = cli_offloaded_lightfs();
    assert_eq!(
        run["run"]["report"]["designs"][0]["duration_ns"],
        cli["duration_ns"]
    );
}

/// Polls job `id` until it is done or failed (bounded).
fn finished(base: &str, id: &str) -> Value {
    let started = Instant::now();
    loop {
        let (_, j) = get_json(base, &format!("/api/replays/{id}"));
        if j["state"] == "done" || j["state"] == "failed" {
            return j;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "job {id} hung: {j}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn post_replay(base: &str, body: &str) -> (u16, Value) {
    let (status, text) = http(base, "POST", "/api/replays", body.as_bytes());
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (status, v)
}

/// A trace stored in `store` (before the server starts, which does not hold the store).
fn stored_trace(store: &Path, name: &str, lines: &[&str]) {
    stored_trace_with(store, name, lines, &[]);
}

/// [`stored_trace`] with more arguments to `csd trace add`.
fn stored_trace_with(store: &Path, name: &str, lines: &[&str], args: &[&str]) {
    let dir = store.parent().expect("scratch dir");
    let path = dir.join(name);
    let mut text =
        String::from(r#"{"format":"csd-trace","version":1,"source":"test","clock":"ns"}"#);
    for l in lines {
        text.push('\n');
        text.push_str(l);
    }
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    let out = Command::new(CSD)
        .args(["trace", "add"])
        .args(args)
        .arg(&path)
        .arg("--store")
        .arg(store)
        .output()
        .expect("csd trace add");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn requests_name_built_in_or_stored_profiles_and_never_a_file() {
    let store = scratch("api-profiles").join("store");
    // A profile of one's own, kept in the store by name.
    let mine = store.parent().unwrap().join("mine.toml");
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/device/profiles/pcm-zynq.toml"
    ))
    .unwrap()
    .replacen("name = \"pcm-zynq\"", "name = \"my-pcm\"", 1);
    std::fs::write(&mine, text).unwrap();
    let out = Command::new(CSD)
        .args(["profiles", "add"])
        .arg(&mine)
        .arg("--store")
        .arg(&store)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_server, base) = serve(&store);
    let (_, choices) = get_json(&base, "/api/traces");
    assert!(choices["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p == "my-pcm"));
    let (status, job) = post_replay(
        &base,
        r#"{"trace":"ndp-mixed","profile":"my-pcm","designs":["frag-s"]}"#,
    );
    assert_eq!(status, 202, "{job}");
    let j = finished(&base, job["job"].as_str().unwrap());
    assert_eq!(j["state"], "done", "{j}");
    let mut answers = Vec::new();
    for profile in [
        "/dev/zero",
        "/etc/passwd",
        "/no/such/profile.toml",
        "../../x.toml",
    ] {
        let req = format!(r#"{{"trace":"ndp-mixed","profile":"{profile}","designs":["lightfs"]}}"#);
        let (status, job) = post_replay(&base, &req);
        assert_eq!(status, 202, "{job}");
        let j = finished(&base, job["job"].as_str().unwrap());
        assert_eq!(j["state"], "failed", "{profile}: {j}");
        let e = j["error"].as_str().unwrap();
        assert!(e.contains("unknown profile"), "{profile}: {e}");
        answers.push(e.replace(profile, "P"));
    }
    // One answer whatever the path names: nothing tells whether a host file exists.
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
}

#[test]
fn a_hostile_stored_trace_fails_its_job_and_the_server_serves_on() {
    let store = scratch("api-hostile").join("store");
    stored_trace(
        &store,
        "hostile.trace",
        &[
            r#"{"t":1,"pid":1,"op":"pread","fd":3,"path":"/in/f","off":900000000000,"len":4096,"ret":4096}"#,
            r#"{"t":2,"pid":1,"op":"open","path":"/o","flags":"O_WRONLY|O_CREAT","ret":4}"#,
            r#"{"t":3,"pid":1,"op":"write","fd":4,"len":500000000000}"#,
        ],
    );
    stored_trace(
        &store,
        "writes.trace",
        &[
            r#"{"t":1,"pid":1,"op":"open","path":"/o","flags":"O_WRONLY|O_CREAT","ret":4}"#,
            r#"{"t":2,"pid":1,"op":"write","fd":4,"len":500000000000}"#,
            r#"{"t":3,"pid":1,"op":"pwrite","fd":4,"off":18446744073709551615,"len":9}"#,
        ],
    );
    let (server, base) = serve(&store);
    // On the 1 GiB pcm-zynq the 900 GB file the trace reads cannot exist: the job fails.
    let (_, job) = post_replay(
        &base,
        r#"{"trace":"hostile.trace","profile":"pcm-zynq","designs":["lightfs"]}"#,
    );
    let j = finished(&base, job["job"].as_str().unwrap());
    assert_eq!(j["state"], "failed", "{j}");
    assert!(j["error"].as_str().unwrap().contains("more than"), "{j}");
    // Out-of-range requests are per-event failures: the replay finishes and is stored.
    let (_, job) = post_replay(
        &base,
        r#"{"trace":"writes.trace","profile":"pcm-zynq","designs":["frag-s"]}"#,
    );
    let j = finished(&base, job["job"].as_str().unwrap());
    assert_eq!(j["state"], "done", "{j}");
    let (status, run) = get_json(&base, &format!("/api/runs/{}", j["run"].as_str().unwrap()));
    assert_eq!(status, 200);
    let latency = &run["run"]["report"]["designs"][0]["latency"];
    assert_eq!(latency["write"]["failed"].as_u64().unwrap(), 1, "{latency}");
    assert_eq!(
        latency["pwrite"]["failed"].as_u64().unwrap(),
        1,
        "{latency}"
    );
    // Still serving, same process.
    let (status, _) = get_json(&base, "/api/runs");
    assert_eq!(status, 200);
    assert!(std::path::Path::new(&format!("/proc/{}", server.0.id())).exists());
}

/// Threads of process `pid` now.
fn threads(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

#[test]
fn replay_jobs_queue_one_per_core_refuse_a_flood_and_are_pruned() {
    let store = scratch("api-queue").join("store");
    stored_trace(
        &store,
        "tiny.trace",
        &[r#"{"t":1,"pid":1,"op":"mkdir","path":"/a"}"#],
    );
    let (server, base) = serve(&store);
    // The flood replays a sample under every design, slow enough that the queue fills
    // however fast the machine answers requests.
    let flood = r#"{"trace":"ndp-mixed","profile":"cosmos-plus","designs":["all"]}"#;
    let req = r#"{"trace":"tiny.trace","profile":"pcm-zynq","designs":["frag-s"]}"#;
    let (mut accepted, mut refused) = (0, 0);
    let mut last = String::new();
    for _ in 0..200 {
        let (status, v) = post_replay(&base, flood);
        match status {
            202 => {
                accepted += 1;
                last = v["job"].as_str().unwrap().to_string();
            }
            429 => {
                refused += 1;
                assert!(v["error"].as_str().unwrap().contains("waiting"), "{v}");
            }
            s => panic!("{s}: {v}"),
        }
        // The flood never makes a thread per request.
        assert!(
            threads(server.0.id()) < 64,
            "{} threads",
            threads(server.0.id())
        );
    }
    assert!(
        refused > 0,
        "200 requests at once must meet the queue's limit"
    );
    assert!(accepted >= 16, "{accepted} accepted");
    finished(&base, &last);
    // Keep feeding it until more than the table keeps have run; it remembers the last 100.
    let mut total = accepted;
    while total <= 130 {
        let (status, v) = post_replay(&base, req);
        if status == 202 {
            total += 1;
            last = v["job"].as_str().unwrap().to_string();
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    finished(&base, &last);
    // Until every job has finished (the one before the last may still be running).
    let started = Instant::now();
    let jobs = loop {
        let (_, jobs) = get_json(&base, "/api/replays");
        let jobs = jobs.as_array().unwrap().clone();
        if jobs
            .iter()
            .all(|j| j["state"] == "done" || j["state"] == "failed")
        {
            break jobs;
        }
        assert!(started.elapsed() < Duration::from_secs(300), "jobs hung");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(jobs.len() <= 100, "{} jobs kept", jobs.len());
    assert!(
        jobs.iter().all(|j| j["state"] == "done"),
        "every tiny replay succeeds"
    );
    assert_eq!(
        jobs.last().unwrap()["id"],
        last.as_str(),
        "the newest are kept"
    );
}

#[test]
fn cli_reads_work_while_the_dashboard_polls_the_store() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let store = fixture_store("api-contention");
    let (_server, base) = serve(&store);
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let polls = std::sync::Arc::new(AtomicU64::new(0));
    let poller = {
        let (base, stop, polls) = (base.clone(), stop.clone(), polls.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let (status, _) = get_json(&base, "/api/runs");
                assert_eq!(status, 200);
                polls.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // At least 30 CLI reads, and on until the dashboard was polled 10 times meanwhile: a
    // busy machine slows the poller, never the count of reads that overlapped it.
    let before = polls.load(Ordering::Relaxed);
    let mut calls = 0;
    while calls < 30 || polls.load(Ordering::Relaxed) - before <= 10 {
        assert!(
            calls < 1000,
            "the dashboard was polled {} times in {calls} CLI reads",
            polls.load(Ordering::Relaxed) - before
        );
        let args: &[&str] = if calls % 3 == 0 {
            &["runs", "show", "r1", "--store"]
        } else {
            &["runs", "list", "--store"]
        };
        let out = Command::new(CSD).args(args).arg(&store).output().unwrap();
        assert!(
            out.status.success(),
            "call {calls}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("r1"));
        calls += 1;
    }
    stop.store(true, Ordering::Relaxed);
    poller.join().unwrap();
}

// ---- the browser -----------------------------------------------------------------------

fn find_program(env: &str, names: &[&str]) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for n in names {
            let p = dir.join(n);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "{} not found (set {env}); the README's setup installs Debian's chromium and chromium-driver",
        names.join(" or ")
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// chromedriver on a free port, once it accepts connections.
fn chromedriver() -> (Killed, u16) {
    let driver = find_program("CSD_CHROMEDRIVER", &["chromedriver"]);
    let port = free_port();
    let child = Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let child = Killed(child);
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "chromedriver did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, port)
}

/// Waits (at most 30 s) for the element `locator` finds, failing with `what` if it never
/// appears.
async fn appears(
    c: &fantoccini::Client,
    locator: fantoccini::Locator<'_>,
    what: &str,
) -> fantoccini::elements::Element {
    c.wait()
        .at_most(Duration::from_secs(30))
        .for_element(locator)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// The text of the element `css` finds (which must be on the page).
/// An element's attribute `name`, which it must have.
async fn attr_of(e: &fantoccini::elements::Element, name: &str) -> String {
    e.attr(name)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("the element has no {name}"))
}

/// An element's attribute `name` read as a number.
async fn number_of(e: &fantoccini::elements::Element, name: &str) -> f64 {
    let v = attr_of(e, name).await;
    v.parse()
        .unwrap_or_else(|err| panic!("{name}={v:?} is not a number: {err}"))
}

async fn text_of(c: &fantoccini::Client, css: &str) -> String {
    c.find(fantoccini::Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .unwrap()
}

/// Every element `css` finds, once the first has appeared (see [`appears`]).
async fn all_appear(
    c: &fantoccini::Client,
    css: &str,
    what: &str,
) -> Vec<fantoccini::elements::Element> {
    appears(c, fantoccini::Locator::Css(css), what).await;
    c.find_all(fantoccini::Locator::Css(css)).await.unwrap()
}

async fn browser(port: u16, profile_dir: &Path) -> fantoccini::Client {
    let chromium = find_program("CSD_CHROMIUM", &["chromium", "chromium-browser"]);
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--window-size=1100,1300",
                format!("--user-data-dir={}", profile_dir.display()),
            ],
        }),
    );
    fantoccini::ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("connect to chromedriver")
}

#[test]
fn run_detail_page_draws_one_bar_per_design_with_the_apis_pao() {
    use fantoccini::Locator;
    let store = fixture_store("browser");
    let (_server, base) = serve(&store);
    let (_, run) = get_json(&base, "/api/runs/r1");
    let bars = run["view"]["breakdowns"][0]["bars"]
        .as_array()
        .unwrap()
        .clone();
    // Every (op, design) with its p50 and p99 in µs, as the latency chart should draw them.
    let mut ranges: Vec<(String, String, f64, f64)> = Vec::new();
    for d in run["view"]["latency"].as_array().unwrap() {
        for o in d["ops"].as_array().unwrap() {
            ranges.push((
                o["op"].as_str().unwrap().to_string(),
                d["design"].as_str().unwrap().to_string(),
                o["p50_ns"].as_f64().unwrap() / 1e3,
                o["p99_ns"].as_f64().unwrap() / 1e3,
            ));
        }
    }
    assert!(ranges.len() > 5, "{}", run["view"]);
    let out = Command::new(CSD)
        .args([
            "persist",
            "online",
            "--interval",
            "32,64",
            "--scale",
            "0.004",
        ])
        .args(["--config", "offload,coalesce", "--store"])
        .arg(&store)
        .output()
        .expect("run csd persist online");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, persist) = get_json(&base, "/api/runs/r2");
    let persist = persist["run"].clone();
    // A `csd repro` run: its two experiments are stored first (r3, r4), then itself (r5).
    let out = Command::new(CSD)
        .args(["repro", "txisc", "--only", "txisc.fig3", "--store"])
        .arg(&store)
        .output()
        .expect("run csd repro");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, repro) = get_json(&base, "/api/runs/r5");
    let repro_lines = repro["view"]["repro"]["lines"].as_array().unwrap().clone();
    assert_eq!(repro["run"]["kind"], "repro");
    assert!(repro_lines.len() >= 5, "{repro}");
    // The TxISC experiment behind it is a typed txbench report.
    let (_, fig3) = get_json(&base, "/api/runs/r3");
    assert_eq!(fig3["run"]["kind"], "txbench", "{fig3}");
    // A task run (`csd run`): its invocation's stages, one bar, no PAO.
    let sample = format!("{}/traces/samples/grep.trace", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(CSD)
        .args([
            "run",
            "grep",
            "--import",
            &sample,
            "--args",
            r#"{"pattern":"open"}"#,
        ])
        .arg("--store")
        .arg(&store)
        .env("XDG_CACHE_HOME", scratch("browser-task-cache"))
        .output()
        .expect("run csd run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // An offloaded replay of the bundled program (r7): the main job's run.
    let out = Command::new(CSD)
        .args(["replay", "grep-src", "--offload", "grep-src", "--store"])
        .arg(&store)
        .output()
        .expect("run csd replay --offload");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A `csd fusion` comparison (r8): grouped bars, one per design and thread count.
    let out = Command::new(CSD)
        .args(["fusion", "--threads", "1,2", "--ops", "50", "--store"])
        .arg(&store)
        .output()
        .expect("run csd fusion");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, fusion) = get_json(&base, "/api/runs/r8");
    assert_eq!(fusion["run"]["kind"], "fusion", "{fusion}");
    let fusion_curves = fusion["run"]["report"]["curves"].as_array().unwrap().len();
    // A fused SQLite recording replayed unfused and fused on StorageFS (r9): round trips
    // and time as grouped bars, fused against unfused.
    let fused = scratch("browser-fused").join("inserts.trace");
    let out = Command::new(CSD)
        .args(["trace", "fuse", "sqlite", "-o"])
        .arg(&fused)
        .output()
        .expect("run csd trace fuse");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(CSD)
        .arg("replay")
        .arg(&fused)
        .args(["--design", "firmware,fusion", "--store"])
        .arg(&store)
        .output()
        .expect("run csd replay of the fused trace");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, storagefs) = get_json(&base, "/api/runs/r9");
    let trips = storagefs["view"]["charts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["title"] == "StorageFS host↔device round trips")
        .unwrap_or_else(|| panic!("{}", storagefs["view"]))
        .clone();
    let all = |k: usize| trips["groups"][k]["values"][0].as_f64().unwrap();
    assert_eq!(trips["groups"][0]["design"], "firmware");
    assert!(all(1) < all(0), "fused ops make fewer round trips: {trips}");
    // SQLite commits with fdatasync: its tails are charted per design, as fsync's are.
    let tails = storagefs["view"]["fsync"].as_array().unwrap().clone();
    let designs = storagefs["run"]["report"]["designs"].as_array().unwrap();
    assert_eq!(tails.len(), designs.len(), "{tails:?}");
    for (t, d) in tails.iter().zip(designs) {
        assert_eq!(t["call"], "fdatasync");
        assert_eq!(t["design"], d["design"]);
        assert_eq!(t["count"], d["latency"]["fdatasync"]["count"]);
        assert!(t["count"].as_u64().unwrap() > 0, "{t}");
    }
    // ISPFS's word query (r10) and iozone (r11): speed, requests and host CPU per file size;
    // throughput per test.
    for args in [
        &["ispfs", "query", "--sizes", "20k,50k"][..],
        &["ispfs", "iozone", "--files", "1m", "--records", "4k"][..],
    ] {
        let out = Command::new(CSD)
            .args(args)
            .arg("--store")
            .arg(&store)
            .output()
            .expect("run csd ispfs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A sweep (r12–r15): two designs across two file counts, drawn as one line per design.
    let spec = scratch("sweep").join("sweep.toml");
    std::fs::write(
        &spec,
        "name = \"dash\"\ntasks = [\"stats64\"]\ndesigns = [\"fsr\", \"lightfs\"]\n\
         files = [1, 4]\nsizes = [\"4k\"]\n[chart]\naxis = \"files\"\nmetric = \"pao\"\n",
    )
    .unwrap();
    let out = Command::new(CSD)
        .arg("sweep")
        .arg(&spec)
        .arg("--store")
        .arg(&store)
        .output()
        .expect("run csd sweep");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (status, sweeps) = get_json(&base, "/api/sweeps");
    assert_eq!(status, 200);
    assert_eq!(sweeps[0]["name"], "dash", "{sweeps}");
    assert_eq!(sweeps[0]["stored"], 4, "{sweeps}");
    let (_, sweep) = get_json(&base, "/api/sweeps/dash");
    assert_eq!(sweep["metric"], "pao", "{sweep}");
    assert_eq!(sweep["runs"].as_array().unwrap().len(), 4, "{sweep}");
    let pao_of = |design: &str, files: &str| {
        sweep["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["params"]["design"] == design && r["params"]["files"] == files)
            .unwrap_or_else(|| panic!("{sweep}"))["metrics"]["pao"]
            .as_f64()
            .unwrap()
    };
    let lightfs_pao = pao_of("lightfs", "4");
    let (status, _) = get_json(&base, "/api/sweeps/nope");
    assert_eq!(status, 404);
    // The table the page draws (and `csd sweep` prints): a line per design, a column per
    // file count, each cell the point's value.
    let table = &sweep["table"];
    assert_eq!(table["axis"], "files", "{table}");
    assert_eq!(table["xs"], serde_json::json!(["1", "4"]), "{table}");
    let lightfs = table["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "lightfs")
        .unwrap_or_else(|| panic!("{table}"));
    assert_eq!(lightfs["cells"][1]["mean"].as_f64().unwrap(), lightfs_pao);
    let (status, bad) = get_json(&base, "/api/sweeps/dash?axis=colour");
    assert_eq!(status, 400, "{bad}");
    let (status, bad) = get_json(&base, "/api/sweeps/dash?metric=warp");
    assert_eq!(status, 400, "{bad}");
    let (_, query) = get_json(&base, "/api/runs/r10");
    assert_eq!(query["run"]["kind"], "ispfs", "{query}");
    let speed = query["view"]["charts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["title"] == "word query: search speed by file size")
        .unwrap_or_else(|| panic!("{}", query["view"]))
        .clone();
    assert_eq!(speed["groups"][0]["design"], "isp");
    let at = |g: usize| speed["groups"][g]["values"][1].as_f64().unwrap();
    assert!(at(0) > at(1), "the engine searches faster: {speed}");
    let (_, iozone) = get_json(&base, "/api/runs/r11");
    assert_eq!(iozone["run"]["kind"], "iozone", "{iozone}");
    assert_eq!(iozone["view"]["charts"].as_array().unwrap().len(), 4);
    let (_, task) = get_json(&base, "/api/runs/r6");
    assert_eq!(task["run"]["kind"], "task", "{task}");
    let task_bar = task["view"]["breakdowns"][0]["bars"][0].clone();
    assert!(task_bar["pao"].is_null(), "{task_bar}");
    let task_total = task_bar["total_ns"].as_f64().unwrap();
    assert_eq!(
        task_total,
        task["run"]["report"]["latency_ns"].as_f64().unwrap(),
        "an invocation's stages add up to its latency"
    );
    let empty = scratch("browser-empty").join("store");
    let (_empty_server, empty_base) = serve(&empty);
    let one = fixture_store("browser-one");
    // A second run to compare the first with: the same sample under another seed.
    let out = Command::new(CSD)
        .args(["replay", "ndp-mixed", "--seed", "2", "--json", "--store"])
        .arg(&one)
        .output()
        .expect("run csd replay");
    assert!(out.status.success());
    let (_one_server, one_base) = serve(&one);
    let (_driver, port) = chromedriver();
    let profile = scratch("browser-profile");

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = browser(port, &profile).await;
        c.goto(&format!("{base}/runs/r1")).await.unwrap();
        let drawn = all_appear(&c, "svg.breakdown g.bar", "the breakdown chart appears").await;
        assert_eq!(drawn.len(), bars.len(), "one bar per design");
        for (g, bar) in drawn.iter().zip(&bars) {
            let design = g.attr("data-design").await.unwrap();
            assert_eq!(design.as_deref(), bar["design"].as_str());
            let label = g
                .find(Locator::Css("text.pao-label"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let pao = bar["pao"].as_f64().unwrap();
            assert_eq!(label, format!("PAO {:.1}%", pao * 100.0), "{design:?}");
            let segments = g.find_all(Locator::Css("rect")).await.unwrap();
            assert_eq!(segments.len(), bar["stages"].as_array().unwrap().len());
        }
        // The numbers are in a table beneath the chart too.
        let table = text_of(&c, "table.breakdown-table").await;
        for bar in &bars {
            assert!(table.contains(bar["design"].as_str().unwrap()));
        }
        // The op latency chart: a p50-to-p99 range per op and design, the API's numbers.
        let mut drawn_ranges = Vec::new();
        for g in c
            .find_all(Locator::Css("svg.latency-range g.op-range"))
            .await
            .unwrap()
        {
            drawn_ranges.push((
                attr_of(&g, "data-op").await,
                attr_of(&g, "data-design").await,
                number_of(&g, "data-p50").await,
                number_of(&g, "data-p99").await,
            ));
        }
        assert_eq!(drawn_ranges.len(), ranges.len());
        for r in &ranges {
            assert!(
                drawn_ranges.iter().any(|d| d.0 == r.0
                    && d.1 == r.1
                    && (d.2 - r.2).abs() < 1e-9
                    && (d.3 - r.3).abs() < 1e-9),
                "{r:?} not drawn: {drawn_ranges:?}"
            );
        }
        let png = c.screenshot().await.unwrap();
        assert!(png.starts_with(b"\x89PNG"));
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
        std::fs::create_dir_all(&shots).unwrap();
        std::fs::write(shots.join("run-detail.png"), &png).unwrap();

        // An empty store says how to make a run.
        c.goto(&format!("{empty_base}/")).await.unwrap();
        let empty = c
            .wait()
            .at_most(Duration::from_secs(30))
            .for_element(Locator::Css(".empty"))
            .await
            .expect("the empty state appears")
            .text()
            .await
            .unwrap();
        assert!(empty.contains("No runs yet"), "{empty}");
        assert!(empty.contains("csd replay"), "{empty}");

        // A store without sweeps: the runs table alone (a page's left-out part once printed
        // "null" above it), each run's headline a line per design.
        c.goto(&format!("{one_base}/")).await.unwrap();
        appears(&c, Locator::Css("#runs tbody tr"), "the runs table appears").await;
        let page = text_of(&c, "#main").await;
        assert!(!page.contains("null"), "{page}");
        let (_, listed) = get_json(&one_base, "/api/runs");
        let designs: Vec<String> = listed["runs"][0]["designs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap().to_string())
            .collect();
        let mut lines = Vec::new();
        for line in c.find_all(Locator::Css("#runs .headline")).await.unwrap() {
            lines.push(attr_of(&line, "data-design").await);
        }
        assert_eq!(lines.len(), 2 * designs.len(), "{lines:?}");
        assert_eq!(
            lines[..designs.len()],
            designs,
            "a headline line per design, in order"
        );

        // Two runs compared: their first metric (the replay's duration) charted side by
        // side per design, in µs, as the diff API has it in ns.
        let (_, diff) = get_json(&one_base, "/api/runs/r1/diff/r2");
        c.goto(&format!("{one_base}/compare/r1/r2")).await.unwrap();
        let bars = all_appear(&c, "#compare-chart rect", "the comparison chart appears").await;
        let shared = diff["designs"].as_array().unwrap();
        assert_eq!(bars.len(), 2 * shared.len());
        for bar in &bars {
            let design = attr_of(bar, "data-group").await;
            let run = attr_of(bar, "data-series").await;
            let value = number_of(bar, "data-value").await;
            let metric = &shared
                .iter()
                .find(|d| d["design"] == design.as_str())
                .unwrap()["metrics"][0];
            assert_eq!(metric["metric"], "duration_ns");
            let ns = metric[if run == "r1" { "a" } else { "b" }]
                .as_f64()
                .unwrap();
            assert!(
                (value - ns / 1000.0).abs() < 1e-9,
                "{design} {run}: {value} against {ns} ns"
            );
        }

        // A `csd persist online` sweep: one bar per configuration and interval, each bar's
        // height the report's throughput.
        c.goto(&format!("{base}/runs/r2")).await.unwrap();
        appears(
            &c,
            Locator::Css("svg.grouped rect"),
            "the throughput chart appears",
        )
        .await;
        let chart = c
            .find(Locator::Css(
                r#"svg.grouped[aria-label="foreground throughput (write + fsync)"]"#,
            ))
            .await
            .expect("a throughput chart");
        let mut titles = Vec::new();
        for bar in chart.find_all(Locator::Css("rect")).await.unwrap() {
            let t = bar.find(Locator::Css("title")).await.unwrap();
            titles.push(t.html(true).await.unwrap());
        }
        // (label, throughput): the page rounds with JavaScript's toFixed, so the numbers
        // are compared to the report's within that rounding, not as strings.
        let split = |t: &str| {
            let (label, v) = t.rsplit_once(": ").expect("label: value");
            (label.to_string(), v.parse::<f64>().expect("a number"))
        };
        let mut shown: Vec<(String, f64)> = titles.iter().map(|t| split(t)).collect();
        let mut expect: Vec<(String, f64)> = persist["report"]["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let (config, i) = (r["config"].as_str().unwrap(), &r["spec"]["interval"]);
                (format!("{config} i={i}"), r["kops"].as_f64().unwrap())
            })
            .collect();
        shown.sort_by(|a, b| a.0.cmp(&b.0));
        expect.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            shown.iter().map(|s| &s.0).collect::<Vec<_>>(),
            expect.iter().map(|s| &s.0).collect::<Vec<_>>(),
            "one bar per configuration and interval"
        );
        for (s, e) in shown.iter().zip(&expect) {
            assert!((s.1 - e.1).abs() <= 0.006, "{s:?} vs {e:?}");
        }

        // The repro run: one table row per line, each linking to its experiment's run.
        c.goto(&format!("{base}/runs/r5")).await.unwrap();
        let rows = all_appear(&c, "table#repro tbody tr", "the repro table appears").await;
        assert_eq!(rows.len(), repro_lines.len(), "one row per line");
        let mut links = Vec::new();
        for a in c
            .find_all(Locator::Css("table#repro tbody tr a"))
            .await
            .unwrap()
        {
            links.push(a.attr("href").await.unwrap().unwrap_or_default());
        }
        assert_eq!(links.len(), repro_lines.len(), "every line links its run");
        assert!(
            links.iter().all(|l| l == "/runs/r3" || l == "/runs/r4"),
            "{links:?}"
        );
        // Under it, each ✗'s cause, naming the lines it explains.
        let failed: Vec<&str> = repro_lines
            .iter()
            .filter(|l| l["verdict"] == "fail")
            .map(|l| l["id"].as_str().unwrap())
            .collect();
        let causes = c
            .find_all(Locator::Css("ul#repro-causes li"))
            .await
            .unwrap();
        let mut shown = String::new();
        for li in &causes {
            shown.push_str(&li.text().await.unwrap());
        }
        assert!(
            !failed.is_empty() && failed.iter().all(|id| shown.contains(id)),
            "{failed:?} in {shown}"
        );

        // The task run: one bar of its stages, no PAO label (a task has no offload overhead
        // of the LightFS kind to report).
        c.goto(&format!("{base}/runs/r6")).await.unwrap();
        let drawn = all_appear(&c, "svg.breakdown g.bar", "the task's breakdown appears").await;
        assert_eq!(drawn.len(), 1, "one bar for one invocation");
        assert!(drawn[0]
            .find_all(Locator::Css("text.pao-label"))
            .await
            .unwrap()
            .is_empty());
        let page = text_of(&c, "main").await;
        assert!(!page.contains("no charts yet"), "{page}");

        // The fused replay: two charts of two designs, two series each, and the fdatasync
        // tails of the two designs, four percentiles each.
        c.goto(&format!("{base}/runs/r9")).await.unwrap();
        let bars = all_appear(&c, "svg.grouped rect", "the StorageFS charts appear").await;
        assert_eq!(bars.len(), 8 + 8);
        let tails = c
            .find_all(Locator::Css(
                r#"svg.grouped[aria-label="fdatasync latency"] rect"#,
            ))
            .await
            .unwrap();
        assert_eq!(tails.len(), 8);
        let page = text_of(&c, "main").await;
        assert!(page.contains("StorageFS host↔device round trips"), "{page}");
        assert!(page.contains("fdatasync tail latency"), "{page}");

        // The fusion run: FusionFS Fig. 3 as grouped bars, a bar per design and thread count.
        c.goto(&format!("{base}/runs/r8")).await.unwrap();
        let bars = all_appear(&c, "svg.grouped rect", "the fusion chart appears").await;
        assert_eq!(
            bars.len(),
            fusion_curves * 2,
            "one bar per design and thread count"
        );

        // The word query: three charts, each a bar per solution and file size.
        c.goto(&format!("{base}/runs/r10")).await.unwrap();
        let bars = all_appear(&c, "svg.grouped rect", "the word-query charts appear").await;
        assert_eq!(bars.len(), 3 * 2 * 2);
        let page = text_of(&c, "main").await;
        assert!(
            page.to_lowercase().contains("host cpu utilisation"),
            "{page}"
        );

        // The sweep: one line per design, a point per file count, the spec's metric first;
        // its table holds the API's numbers, and another metric redraws it.
        c.goto(&format!("{base}/sweeps/dash")).await.unwrap();
        appears(
            &c,
            Locator::Css("svg.sweep circle"),
            "the sweep chart appears",
        )
        .await;
        let lines = c
            .find_all(Locator::Css("svg.sweep g.series"))
            .await
            .unwrap();
        assert_eq!(lines.len(), 2, "one line per design");
        let dots = c.find_all(Locator::Css("svg.sweep circle")).await.unwrap();
        assert_eq!(dots.len(), 4, "a point per design and file count");
        let dot = c
            .find(Locator::Css(
                "g.series[data-series='lightfs'] circle[data-x='4']",
            ))
            .await
            .unwrap();
        let shown = number_of(&dot, "data-value").await;
        assert!(
            (shown - lightfs_pao).abs() < 1e-12,
            "{shown} against {lightfs_pao}"
        );
        let title = c.find(Locator::Css("#sweep-chart h3")).await.unwrap();
        assert_eq!(title.text().await.unwrap(), "pao by files");
        // The table shows PAO as a percentage, to three significant digits.
        let percent = lightfs_pao * 100.0;
        let decimals = (2 - percent.abs().log10().floor() as i32).max(0) as usize;
        let shown: f64 = format!("{percent:.decimals$}").parse().unwrap();
        let table = text_of(&c, "#sweep-table").await;
        assert!(
            table.contains(&format!("{shown}%")),
            "{shown}% not in {table}"
        );
        c.find(Locator::Css(
            "#sweep-metric option[value='mean_latency_ns']",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
        c.wait()
            .at_most(Duration::from_secs(30))
            .for_element(Locator::XPath(
                "//div[@id='sweep-chart']/h3[text()='mean_latency_ns by files']",
            ))
            .await
            .expect("another metric redraws the chart");
        c.goto(&format!("{base}/runs/r15")).await.unwrap();
        let of = c
            .wait()
            .at_most(Duration::from_secs(30))
            .for_element(Locator::Css("#sweep-of a"))
            .await
            .expect("a sweep point links its sweep");
        assert_eq!(of.text().await.unwrap(), "dash");
        c.goto(&base).await.unwrap();
        appears(
            &c,
            Locator::Css("#sweeps a[data-sweep='dash']"),
            "the runs page lists the sweep",
        )
        .await;
        // Its points are left out of the runs table until asked for.
        let (_, all) = get_json(&base, "/api/runs");
        let all = all["runs"].as_array().unwrap();
        let points = all.iter().filter(|r| !r["sweep"].is_null()).count();
        assert_eq!(points, 4);
        let rows = c.find_all(Locator::Css("#runs tbody tr")).await.unwrap();
        assert_eq!(rows.len(), all.len() - points);
        c.find(Locator::Css("#with-points"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let rows = c.find_all(Locator::Css("#runs tbody tr")).await.unwrap();
        assert_eq!(rows.len(), all.len());
        c.close().await.unwrap();
    });
}
