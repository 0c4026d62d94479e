//! Builds the example tasks in `tasks/` to WebAssembly and embeds them in `csd`, so
//! `csd run checksum …` works from any build. The tasks are their own cargo workspace (they
//! target wasm32-unknown-unknown); this runs cargo on it with a separate target directory,
//! always in release mode (fuel counts, and so modelled device time, come from optimised code).

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-unknown-unknown";

include!("src/task_rustflags.rs");

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    let tasks = root.join("tasks");
    println!("cargo:rerun-if-changed=src/task_rustflags.rs");
    for watched in ["tasks", "sdk"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let target_dir = out.join("tasks-target");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "--locked",
        "--target",
        TARGET,
        "--manifest-path",
    ])
    .arg(tasks.join("Cargo.toml"))
    .arg("--target-dir")
    .arg(&target_dir)
    .env("CARGO_ENCODED_RUSTFLAGS", TASK_RUSTFLAGS);
    for var in [
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .expect("running cargo to build the example tasks");
    if !status.success() {
        if !target_installed() {
            panic!(
                "\n\nThe example tasks are compiled to WebAssembly, and the {TARGET} target is \
                 not installed.\nInstall it with:\n\n    rustup target add {TARGET}\n\n"
            );
        }
        panic!(
            "building the example tasks in {} failed (see the errors above)",
            tasks.display()
        );
    }
    let wasm_dir = target_dir.join(TARGET).join("release");
    let mut entries = String::from(
        "/// An example task built into csd.\n\
         pub struct BuiltinTask {\n\
         \x20   pub name: &'static str,\n\
         \x20   pub description: &'static str,\n\
         \x20   /// What it takes as arguments (`[package.metadata.csd] args`); empty: nothing.\n\
         \x20   pub args: &'static str,\n\
         \x20   pub wasm: &'static [u8],\n\
         }\n\n\
         /// The example tasks built into csd, by name.\n\
         pub const BUILTIN_TASKS: &[BuiltinTask] = &[\n",
    );
    for t in task_crates(&tasks) {
        let wasm = wasm_dir.join(format!("{}.wasm", t.name.replace('-', "_")));
        assert!(wasm.exists(), "{} was not built", wasm.display());
        entries.push_str(&format!(
            "    BuiltinTask {{ name: {:?}, description: {:?}, args: {:?}, wasm: include_bytes!({:?}) }},\n",
            t.name,
            t.description,
            t.args,
            wasm.display().to_string()
        ));
    }
    entries.push_str("];\n");
    let stages = wasm_dir.join("stages.wasm");
    assert!(stages.exists(), "{} was not built", stages.display());
    entries.push_str(&format!(
        "\n/// The built-in CISC-op stages (`csd_stage_v1`), one module.\n\
         pub const STAGES: &[u8] = include_bytes!({:?});\n",
        stages.display().to_string()
    ));
    std::fs::write(out.join("builtin_tasks.rs"), entries).expect("writing builtin_tasks.rs");
}

/// What a task crate's manifest says of it.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct TaskCrate {
    name: String,
    description: String,
    args: String,
}

/// Every task crate (members other than `kernels` and `stages`), in name order.
fn task_crates(tasks: &Path) -> Vec<TaskCrate> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(tasks).expect("reading tasks/") {
        let dir = entry.expect("tasks/ entry").path();
        let manifest = dir.join("Cargo.toml");
        // `kernels` is a library; `stages` is the CISC-op stage module, not a task.
        if !manifest.exists() || dir.ends_with("kernels") || dir.ends_with("stages") {
            continue;
        }
        let text = std::fs::read_to_string(&manifest).expect("reading a task manifest");
        // `key = "…"` (or a literal string, `'…'`) on a line of its own.
        let field = |key: &str| {
            text.lines()
                .find_map(|l| {
                    let v = l.strip_prefix(key)?.trim().strip_prefix('=')?.trim();
                    let quote = v.chars().next()?;
                    (quote == '"' || quote == '\'').then(|| v.trim_matches(quote).to_string())
                })
                .unwrap_or_default()
        };
        found.push(TaskCrate {
            name: field("name"),
            description: field("description"),
            args: field("args"),
        });
    }
    found.sort();
    found
}

fn target_installed() -> bool {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    Command::new(rustc)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .is_some_and(|dir| Path::new(dir.trim()).exists())
}
