//! Paths through symbolic links, resolved by name.
//!
//! For what keeps names rather than a namespace to walk: prescan (the links a trace made)
//! and StorageFS's flat namespace, which FusionFS's designs replay on. The host file system
//! follows links in its own walk (`csd_hostfs::namespace::Namespace`), reading each.

use csd_hostfs::namespace::{parent_dir, MAX_FOLLOWS};
use std::borrow::Cow;

/// A path with the links on it followed.
#[derive(Debug, PartialEq, Eq)]
pub struct Followed<'p> {
    pub path: Cow<'p, str>,
    /// Names a walk looks up beyond those of the resolved path: for each link, those from
    /// where its target starts (the root, or the link's directory) to the link itself.
    pub detour: u64,
}

/// `path` with its `.` and `..` parts and empty parts resolved away, as an absolute path
/// (`..` at the root stays there): a link's target joined to its directory, or a relative
/// path a traced program gave joined to its working directory, may hold them.
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return "/".to_string();
    }
    parts
        .iter()
        .fold(String::with_capacity(path.len()), |mut s, p| {
            s.push('/');
            s.push_str(p);
            s
        })
}

fn names(path: &str) -> u64 {
    path.split('/').filter(|c| !c.is_empty()).count() as u64
}

/// `path` (absolute, normalized) with the links `target_of` knows followed, as a walk
/// meets them, from the root down: those above its last component, and that one too if
/// `last`. Past [`MAX_FOLLOWS`] links the walk fails, as Linux's does (`ELOOP`).
pub fn follow<'p>(
    path: &'p str,
    last: bool,
    mut target_of: impl FnMut(&str) -> Option<String>,
) -> Result<Followed<'p>, String> {
    let mut p = Cow::Borrowed(path);
    let mut detour = 0;
    for _ in 0..=MAX_FOLLOWS {
        let hit = p
            .match_indices('/')
            .skip(1)
            .map(|(i, _)| i)
            .chain(last.then_some(p.len()))
            .find_map(|end| Some((end, target_of(&p[..end])?)));
        let Some((end, target)) = hit else {
            return Ok(Followed { path: p, detour });
        };
        let link = &p[..end];
        let base = match target.starts_with('/') {
            true => "/",
            false => parent_dir(link).unwrap_or("/"),
        };
        detour += names(link) - names(base);
        p = Cow::Owned(normalize(&format!("{base}/{target}{}", &p[end..])));
    }
    Err(format!(
        "too many levels of symbolic links resolving '{path}' (more than {MAX_FOLLOWS})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn links(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn relative_absolute_and_dotted_targets_resolve_as_a_walk_would() {
        let l = links(&[
            ("/w/soft", "src"),
            ("/w/abs", "/opt/lib"),
            ("/w/up", "../other/./x/"),
            ("/w/bin/py", "py3"),
            ("/w/bin/py3", "/usr/bin/python3"),
        ]);
        fn f<'p>(l: &HashMap<String, String>, p: &'p str, last: bool) -> Followed<'p> {
            follow(p, last, |q| l.get(q).cloned()).unwrap()
        }
        assert_eq!(f(&l, "/w/soft/a.rs", false).path, "/w/src/a.rs");
        assert_eq!(f(&l, "/w/soft/a.rs", false).detour, 1);
        assert_eq!(f(&l, "/w/abs/libc.so", false).path, "/opt/lib/libc.so");
        assert_eq!(f(&l, "/w/abs/libc.so", false).detour, 2);
        assert_eq!(f(&l, "/w/up/y", false).path, "/other/x/y");
        // The last component is followed only when asked, and a chain of links all the way.
        assert_eq!(f(&l, "/w/bin/py", false).path, "/w/bin/py");
        assert_eq!(f(&l, "/w/bin/py", true).path, "/usr/bin/python3");
        assert!(matches!(
            f(&l, "/w/plain/file", true).path,
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_cycle_of_links_fails_after_the_bound() {
        let l = links(&[("/a", "/b"), ("/b", "/a")]);
        let e = follow("/a/x", false, |q| l.get(q).cloned()).unwrap_err();
        assert!(e.contains("too many levels"), "{e}");
    }
}
