//! Where no layer can hold a run's writes back (no mount namespace, no overlayfs), what
//! the run changed is found by comparing its writable roots before and after it: each
//! entry's type, inode, size, mode and modification and change times, read without
//! following symlinks. The approver is shown the result; the changes are already on
//! the host.
//!
//! What it does not do: see a change that keeps all of those (a rewrite within the
//! same nanosecond tick that keeps the size), look inside protected paths (read-only
//! in the run anyway) or list more than [`MAX_SNAPSHOT_ENTRIES`] entries per call (past
//! that the comparison gives up and says so).

use super::{Change, ChangeKind, EntryKind, MAX_LISTED_CHANGES};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The most entries one snapshot reads, over all roots: a bound on the cost (a stat per
/// entry, before and after the run).
pub const MAX_SNAPSHOT_ENTRIES: usize = 200_000;

/// What a snapshot keeps per entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Facts {
    kind: EntryKind,
    ino: u64,
    size: u64,
    mode: u32,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// The entries under a set of roots, by path.
#[derive(Debug, Default)]
pub struct Snapshot {
    entries: BTreeMap<PathBuf, Facts>,
    /// It gave up: more than [`MAX_SNAPSHOT_ENTRIES`] entries.
    pub incomplete: bool,
}

fn kind_of(ft: std::fs::FileType) -> EntryKind {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_symlink() {
        EntryKind::Symlink
    } else if ft.is_dir() {
        EntryKind::Dir
    } else if ft.is_file() {
        EntryKind::File
    } else if ft.is_fifo() {
        EntryKind::Fifo
    } else {
        EntryKind::Other
    }
}

impl Snapshot {
    /// Read every entry under `roots`, skipping `skip` (and what is under them).
    pub fn take(roots: &[PathBuf], skip: &[PathBuf]) -> Snapshot {
        let mut s = Snapshot::default();
        let mut stack: Vec<PathBuf> = roots.to_vec();
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries.flatten() {
                let path = e.path();
                if skip.iter().any(|p| path.starts_with(p)) {
                    continue;
                }
                let Ok(m) = std::fs::symlink_metadata(&path) else { continue };
                if s.entries.len() >= MAX_SNAPSHOT_ENTRIES {
                    s.incomplete = true;
                    return s;
                }
                let kind = kind_of(m.file_type());
                if kind == EntryKind::Dir {
                    stack.push(path.clone());
                }
                s.entries.insert(
                    path,
                    Facts {
                        kind,
                        ino: m.ino(),
                        size: m.size(),
                        mode: m.mode(),
                        mtime: (m.mtime(), m.mtime_nsec()),
                        ctime: (m.ctime(), m.ctime_nsec()),
                    },
                );
            }
        }
        s
    }

    /// What changed from `self` to `after`: created, modified and removed entries (a
    /// removed or created directory is listed once, not with its contents; a directory
    /// counts as modified only when its mode changed), at most [`MAX_LISTED_CHANGES`];
    /// the flag says more were found.
    pub fn changes(&self, after: &Snapshot) -> (Vec<Change>, bool) {
        let mut out = Vec::new();
        let mut truncated = false;
        let mut push = |path: &Path, change, kind| {
            if out.len() < MAX_LISTED_CHANGES {
                out.push(Change { path: path.to_path_buf(), change, kind });
            } else {
                truncated = true;
            }
        };
        let mut gone_dirs: Vec<&Path> = Vec::new();
        for (path, old) in &self.entries {
            if gone_dirs.iter().any(|d| path.starts_with(d)) {
                continue;
            }
            match after.entries.get(path) {
                None => {
                    if old.kind == EntryKind::Dir {
                        gone_dirs.push(path);
                    }
                    push(path, ChangeKind::Removed, old.kind);
                }
                Some(new) if new.kind != old.kind || new.ino != old.ino => push(path, ChangeKind::Modified, new.kind),
                Some(new) if new.kind == EntryKind::Dir => {
                    if new.mode != old.mode {
                        push(path, ChangeKind::Modified, new.kind);
                    }
                }
                Some(new) if new != old => push(path, ChangeKind::Modified, new.kind),
                Some(_) => {}
            }
        }
        let mut new_dirs: Vec<&Path> = Vec::new();
        for (path, new) in &after.entries {
            if self.entries.contains_key(path) || new_dirs.iter().any(|d| path.starts_with(d)) {
                continue;
            }
            if new.kind == EntryKind::Dir {
                new_dirs.push(path);
            }
            push(path, ChangeKind::Created, new.kind);
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        (out, truncated || self.incomplete || after.incomplete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_pair_names_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        for d in ["keep", "gone/inner", ".git"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        for f in ["a", "b", "keep/k", "gone/inner/g", ".git/HEAD"] {
            std::fs::write(ws.join(f), "x").unwrap();
        }
        let skip = vec![ws.join(".git")];
        let before = Snapshot::take(std::slice::from_ref(&ws), &skip);
        std::fs::write(ws.join("a"), "longer").unwrap();
        std::fs::remove_file(ws.join("b")).unwrap();
        std::fs::remove_dir_all(ws.join("gone")).unwrap();
        std::fs::create_dir_all(ws.join("new/deep")).unwrap();
        std::fs::write(ws.join("new/deep/n"), "n").unwrap();
        std::fs::write(ws.join("c"), "c").unwrap();
        std::fs::write(ws.join(".git/HEAD"), "changed").unwrap();
        let after = Snapshot::take(std::slice::from_ref(&ws), &skip);
        let (changes, truncated) = before.changes(&after);
        let got: Vec<(String, ChangeKind)> =
            changes.iter().map(|c| (c.path.strip_prefix(&ws).unwrap().display().to_string(), c.change)).collect();
        assert!(!truncated);
        assert_eq!(
            got,
            vec![
                ("a".into(), ChangeKind::Modified),
                ("b".into(), ChangeKind::Removed),
                ("c".into(), ChangeKind::Created),
                ("gone".into(), ChangeKind::Removed),
                ("new".into(), ChangeKind::Created),
            ]
        );
    }
}
