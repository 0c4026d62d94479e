//! ISPFS's command file as a generic offload channel: stage instructions run real Wasm (a
//! built-in stage or a user module's export) over a file's bytes, and a hostile one is
//! refused with its reason while the file system keeps serving.

use csd::builtin::STAGES;
use csd_device::isp::{Search, FLAG_DONE};
use csd_device::Profile;
use csd_hostfs::ispfs::Ispfs;
use csd_hostfs::perms::{Cred, Perms};
use csd_runtime::WasmStages;

const USER: Cred = Cred {
    uid: 1000,
    gid: 1000,
};

fn runner() -> WasmStages {
    let mut r = WasmStages::new(STAGES).unwrap().with_fuel(20_000_000);
    // A user module: a stage that traps, one that never ends.
    let wat = r#"(module
        (memory (export "memory") 2)
        (func (export "stage_alloc") (param i32) (result i32) (i32.const 1024))
        (func (export "stage_free") (param i32 i32))
        (func (export "boom") (param i32 i32 i32 i32) (result i64) unreachable)
        (func (export "spin") (param i32 i32 i32 i32) (result i64) (loop $l (br $l)) (i64.const 0)))"#;
    r.add_module("mine", wat.as_bytes()).unwrap();
    r
}

fn ispfs() -> Ispfs {
    let open = Perms {
        uid: 0,
        gid: 0,
        mode: 0o755,
    };
    Ispfs::format(&Profile::load("pcm-zynq").unwrap(), open).unwrap()
}

#[test]
fn a_stage_instruction_runs_wasm_over_the_file_and_a_hostile_one_is_refused() {
    let mut fs = ispfs();
    let mut r = runner();
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let perms = Perms {
        uid: 0,
        gid: 0,
        mode: 0o644,
    };
    fs.fs_mut()
        .put_file("/log.bin", &data, perms, Cred::ROOT)
        .unwrap();
    let crc = Search::stage("crc32", "log.bin", 100, 5000).unwrap();
    let o = fs
        .write_command("/.isp", &crc.encode().unwrap(), USER, Some(&mut r))
        .unwrap()
        .clone();
    assert!(o.error.is_none(), "{:?}", o.error);
    let back = Search::decode(&fs.read_command("/.isp", USER).unwrap()).unwrap();
    assert_eq!(back.flag, FLAG_DONE);
    assert_eq!(back.cnt[0], 4, "a CRC-32 is 4 bytes");
    assert_eq!(
        back.stage_output(),
        crc32fast::hash(&data[100..5100]).to_le_bytes().to_vec()
    );
    assert!(o.engine_ns > 0 && back.us > 0);

    // Refused, each with its reason, and the next instruction still runs.
    for (stage, want) in [
        ("mine:boom", "mine:boom"),
        ("mine:spin", "mine:spin"),
        ("mine:nothing", "mine:nothing"),
        ("xor", "not a one-input stage"),
        ("nosuch", "not a one-input stage"),
    ] {
        let s = Search::stage(stage, "log.bin", 0, 64).unwrap();
        let o = fs
            .write_command("/.isp", &s.encode().unwrap(), USER, Some(&mut r))
            .unwrap();
        let e = o.error.as_ref().expect("refused").to_string();
        assert!(e.contains(want), "{stage}: {e}");
        let back = Search::decode(&fs.read_command("/.isp", USER).unwrap()).unwrap();
        assert!(back.flag > FLAG_DONE);
        let o = fs
            .write_command("/.isp", &crc.encode().unwrap(), USER, Some(&mut r))
            .unwrap();
        assert!(o.error.is_none(), "after {stage}: {:?}", o.error);
    }
    // Without a runner, a stage instruction is refused by name; a word query still runs.
    let o = fs
        .write_command("/.isp", &crc.encode().unwrap(), USER, None)
        .unwrap();
    assert!(o
        .error
        .as_ref()
        .unwrap()
        .to_string()
        .contains("no stage runner"));
    fs.fs().check_invariants().unwrap();
}
