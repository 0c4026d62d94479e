//! The code's shape, checked: no two modules of a crate import each other, and a function
//! longer than `MAX_LINES` says why it is one function (a `// Long:` comment just above it).
//! Both are read from the sources, not the compiler: `use crate::…`, `use super::…` and a
//! parent's `use child::…`, and functions by the indentation of their closing brace (the
//! code is rustfmt-formatted, which CI checks).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The library and binary sources of every crate; tests and the Wasm tasks are out of scope.
const CRATES: [&str; 7] = [
    "device/src",
    "hostfs/src",
    "runtime/src",
    "traces/src",
    "web/src",
    "sdk/src",
    "src",
];

/// Above this many lines a function needs a `// Long:` comment saying why.
const MAX_LINES: usize = 80;

type Module = (String, Vec<String>);

fn sources() -> Vec<(Module, PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for krate in CRATES {
        let mut stack = vec![root.join(krate)];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let rel = path.strip_prefix(root.join(krate)).unwrap();
                    let mut parts: Vec<String> = rel
                        .iter()
                        .map(|p| p.to_string_lossy().into_owned())
                        .collect();
                    let file = parts.pop().unwrap();
                    if !["mod.rs", "lib.rs", "main.rs"].contains(&file.as_str()) {
                        parts.push(file.trim_end_matches(".rs").to_string());
                    }
                    let text = std::fs::read_to_string(&path).unwrap();
                    out.push(((krate.to_string(), parts), path, text));
                }
            }
        }
    }
    out
}

/// The source without its unit-test module (tests may import anything).
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]\nmod tests")
        .map_or(text, |k| &text[..k])
}

/// The paths of the `use` declarations (`pub` or not) that start a line, each without its
/// `use` and `;`.
fn use_statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        let rest = ["use ", "pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .find_map(|p| t.strip_prefix(p));
        let Some(rest) = rest else {
            continue;
        };
        let mut stmt = rest.to_string();
        while !stmt.contains(';') {
            match lines.next() {
                Some(l) => stmt.push_str(l.trim()),
                None => break,
            }
        }
        out.push(stmt.split(';').next().unwrap_or("").trim().to_string());
    }
    out
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.to_string()];
    };
    let prefix = tree[..open].trim_end_matches("::");
    let inner = &tree[open + 1..tree.rfind('}').unwrap()];
    let (mut parts, mut depth, mut cur) = (Vec::new(), 0, String::new());
    for ch in inner.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    parts.push(cur);
    parts
        .iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand(p))
        .map(|e| {
            if prefix.is_empty() {
                e
            } else {
                format!("{prefix}::{e}")
            }
        })
        .collect()
}

#[test]
fn no_two_modules_of_a_crate_import_each_other() {
    let files = sources();
    let modules: BTreeSet<Module> = files.iter().map(|(m, _, _)| m.clone()).collect();
    let mut edges: BTreeSet<(Module, Module)> = BTreeSet::new();
    for ((krate, path), file, text) in &files {
        let text = without_tests(text);
        let is_dir = ["mod.rs", "lib.rs", "main.rs"]
            .iter()
            .any(|n| file.ends_with(n));
        for stmt in use_statements(text) {
            let used = stmt.as_str();
            let (base, rest) = if let Some(r) = used.strip_prefix("crate::") {
                (Vec::new(), r)
            } else if used.starts_with("super::") {
                // Each `super::` is one level up.
                let (mut base, mut r) = (path.clone(), used);
                while let Some(up) = r.strip_prefix("super::") {
                    base.pop();
                    r = up;
                }
                (base, r)
            } else if is_dir {
                // A parent importing from its own child (`use child::…`); an external
                // crate's path names no child and resolves to the module itself.
                (path.clone(), used)
            } else {
                continue;
            };
            for p in expand(rest) {
                let p = p.split(" as ").next().unwrap();
                let mut cand = base.clone();
                cand.extend(
                    p.split("::")
                        .map(str::trim)
                        .filter(|s| !s.is_empty() && *s != "self" && *s != "*")
                        .map(String::from),
                );
                let target = (0..=cand.len())
                    .rev()
                    .map(|k| (krate.clone(), cand[..k].to_vec()))
                    .find(|m| modules.contains(m));
                if let Some(t) = target.filter(|t| *t != (krate.clone(), path.clone())) {
                    edges.insert(((krate.clone(), path.clone()), t));
                }
            }
        }
    }
    let cycles: Vec<String> = edges
        .iter()
        .filter(|(a, b)| a < b && edges.contains(&(b.clone(), a.clone())))
        .map(|(a, b)| {
            format!(
                "{}::{} <-> {}::{}",
                a.0,
                a.1.join("::"),
                b.0,
                b.1.join("::")
            )
        })
        .collect();
    assert!(
        edges.len() > 100,
        "the import scan found only {} edges: it is not reading the sources",
        edges.len()
    );
    assert!(
        cycles.is_empty(),
        "modules importing each other: {cycles:#?}"
    );
}

#[test]
fn a_long_function_says_why_it_is_one() {
    let mut unexplained = Vec::new();
    let mut functions = 0;
    for (_, file, text) in sources() {
        let lines: Vec<&str> = without_tests(&text).lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let body = line.trim_start();
            let indent = line.len() - body.len();
            let is_fn = [
                "fn ",
                "pub fn ",
                "pub(crate) fn ",
                "pub(super) fn ",
                "async fn ",
            ]
            .iter()
            .any(|p| body.starts_with(p));
            if !is_fn || line.trim_end().ends_with(';') {
                continue;
            }
            functions += 1;
            let closing = " ".repeat(indent) + "}";
            let Some(len) = lines[i..].iter().position(|l| l.trim_end() == closing) else {
                continue;
            };
            let why = lines[i.saturating_sub(6)..i]
                .iter()
                .any(|l| l.contains("// Long:"));
            if len + 1 > MAX_LINES && !why {
                unexplained.push(format!("{}:{} ({} lines)", file.display(), i + 1, len + 1));
            }
        }
    }
    assert!(functions > 500, "found only {functions} functions");
    assert!(
        unexplained.is_empty(),
        "functions over {MAX_LINES} lines without a `// Long:` comment saying why: {unexplained:#?}"
    );
}
