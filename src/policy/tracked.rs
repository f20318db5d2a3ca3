//! The end-of-run check of tracked files (see [`super::GitGuard::trees`]): host git's
//! `commit -a` (`add -u`) records a tracked file that became a directory holding a
//! repository as a submodule, silently, and runs git there from then on.

use super::guard::{check, Dir};
use super::{gitfmt, Quarantined, Sentinel, SentinelKind, TreeSeal};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Every path `tree`'s index tracks as anything but a gitlink that is a directory now
/// and holds a `.git` that was not there when the run started (a protected path): that
/// `.git` is moved aside. Cheap for a large index: each directory holding tracked files
/// is read once (its entries' types), and only a subdirectory there is looked into
/// (one `lstat` of its `.git`); the walk without symlinks only for what is found.
pub(super) fn check_tracked(
    tree: &TreeSeal,
    roots: &[PathBuf],
    protected: &std::collections::HashSet<&Path>,
    out: &mut Vec<Quarantined>,
) {
    use std::collections::HashSet;
    let read = |name: &str| std::fs::read(tree.git_dir.join(name)).ok();
    let Some(main) = read("index") else { return };
    let tracked_file = |mode: u32, rel: &[u8]| mode != 0o160000 && gitfmt::sane_repo_path(rel);
    // The directories holding tracked files (the index is sorted: a parent repeats).
    let mut dirs: HashSet<Vec<u8>> = HashSet::new();
    let mut last: Option<Vec<u8>> = None;
    let mut each_dir = |mode: u32, rel: &[u8]| {
        if !tracked_file(mode, rel) {
            return;
        }
        let parent = rel.iter().rposition(|b| *b == b'/').map_or(&rel[..0], |i| &rel[..i]);
        if last.as_deref() != Some(parent) {
            last = Some(parent.to_vec());
            dirs.insert(parent.to_vec());
        }
    };
    let Ok(shared) = gitfmt::index_entries(&main, tree.hash_len, &mut each_dir) else { return };
    let shared = shared.and_then(|hex| read(&format!("sharedindex.{hex}")));
    if let Some(bytes) = &shared {
        let _ = gitfmt::index_entries(bytes, tree.hash_len, &mut each_dir);
    }
    let indexes: Vec<&[u8]> = std::iter::once(main.as_slice()).chain(shared.as_deref()).collect();
    // Subdirectories there holding a `.git` now.
    let mut candidates: HashSet<Vec<u8>> = HashSet::new();
    let root_of = |p: &Path| -> Option<&PathBuf> {
        roots.iter().filter(|w| p.starts_with(w)).min_by_key(|w| w.components().count())
    };
    for dir in &dirs {
        let path = tree.work_tree.join(OsStr::from_bytes(dir));
        // Kept open while its entries are looked at through its descriptor's path.
        let mut walked: Option<Dir> = None;
        let rd = match std::fs::read_dir(&path) {
            Ok(rd) => rd,
            // Its owner's permission taken away: given back on a walk without symlinks.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                let Some(root) = root_of(&path) else { continue };
                let Some(d) = Dir::walk_to(root, path.strip_prefix(root).unwrap_or(Path::new(""))) else { continue };
                d.give_back_access();
                let Ok(rd) = std::fs::read_dir(walked.insert(d).proc_path()) else { continue };
                rd
            }
            Err(_) => continue,
        };
        for e in rd.flatten() {
            // A subdirectory that cannot be searched may hide a `.git`: `check` looks.
            let git = e.path().join(".git").symlink_metadata();
            let maybe = git.is_ok() || git.is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied);
            if e.file_type().is_ok_and(|t| t.is_dir()) && maybe {
                let mut rel = dir.clone();
                if !rel.is_empty() {
                    rel.push(b'/');
                }
                rel.extend_from_slice(e.file_name().as_bytes());
                candidates.insert(rel);
            }
        }
    }
    if candidates.is_empty() {
        return;
    }
    let mut found = Vec::new();
    for bytes in &indexes {
        let _ = gitfmt::index_entries(bytes, tree.hash_len, |mode, rel| {
            if tracked_file(mode, rel) && candidates.contains(rel) {
                found.push(tree.work_tree.join(OsStr::from_bytes(rel)));
            }
        });
    }
    found.sort();
    found.dedup();
    for path in found {
        let dot_git = path.join(".git");
        if protected.contains(dot_git.as_path()) {
            continue;
        }
        // The outermost writable root holding it (the walk starts there).
        let Some(root) =
            roots.iter().filter(|w| path.starts_with(w) && path != **w).min_by_key(|w| w.components().count())
        else {
            continue;
        };
        let s = Sentinel { path: dot_git, root: root.clone(), follows_links: false, kind: SentinelKind::Tracked };
        check(&s, out);
    }
}
