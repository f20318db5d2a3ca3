//! Finding what to protect: every git directory, gitfile (and its target) and bare
//! repository under a writable root, by a bounded walk (see `resolve_policy`).

use super::*;

/// The git directory `path` (canonical) is or lies inside, if any: an ancestor named
/// `.git` or one holding `HEAD`, `objects/` and `refs/`.
pub(super) fn enclosing_git_dir(path: &Path) -> Option<PathBuf> {
    path.ancestors().find(|a| a.file_name().is_some_and(|n| n == ".git") || is_bare_git_dir(a)).map(Path::to_path_buf)
}

pub(super) fn is_bare_git_dir(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join("HEAD")).is_ok_and(|m| !m.is_dir())
        && dir.join("objects").is_dir()
        && dir.join("refs").is_dir()
}

/// Add `path` (and, for a gitdir pointer file, its targets) to `out` if it exists.
pub(super) fn collect_protected(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), PolicyError> {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return Ok(()) };
    if meta.file_type().is_symlink() {
        return Err(PolicyError::ProtectedSymlink { path: path.to_path_buf() });
    }
    out.push(path.to_path_buf());
    if meta.is_file() {
        // A `.git` pointer file: "gitdir: <path>".
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Some(target) = text.lines().find_map(|l| l.strip_prefix("gitdir:")).map(str::trim) {
                let base = path.parent().unwrap_or(Path::new("/"));
                if let Ok(gitdir) = base.join(target).canonicalize() {
                    if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir")) {
                        if let Ok(c) = gitdir.join(common.trim()).canonicalize() {
                            out.push(c);
                        }
                    }
                    out.push(gitdir);
                }
            }
        }
    }
    Ok(())
}

/// An error that means the entry went away while it was being read (nothing to protect).
pub(super) fn vanished(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR))
}

/// Whether the caller (effective ids, ACLs included) may search `dir`.
pub(super) fn searchable(dir: &Path) -> bool {
    nix::unistd::faccessat(nix::fcntl::AT_FDCWD, dir, nix::unistd::AccessFlags::X_OK, nix::fcntl::AtFlags::AT_EACCESS)
        .is_ok()
}

/// Walk `root` for git directories and gitfiles (what counts: the module docs), adding
/// them to `out`. Every directory entry read costs one unit of `budget`.
pub(super) fn discover_git_dirs(root: &Path, budget: &mut usize, out: &mut Vec<PathBuf>) -> Result<(), PolicyError> {
    let fail =
        |path: &Path, source| PolicyError::Discovery { root: root.to_path_buf(), path: path.to_path_buf(), source };
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if vanished(&e) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && !searchable(&dir) => continue,
            // Searchable but not listable: what lies inside is reachable by a name the
            // search cannot see, so the whole directory stays read-only.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && dir != root => {
                out.push(dir);
                continue;
            }
            Err(e) => return Err(fail(&dir, e)),
        };
        let mut subdirs = Vec::new();
        let (mut head, mut objects, mut refs) = (false, false, false);
        for entry in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(e) if vanished(&e) => continue,
                Err(e) => return Err(fail(&dir, e)),
            };
            if *budget == 0 {
                return Err(PolicyError::DiscoveryLimit { root: root.to_path_buf(), limit: MAX_DISCOVERY_ENTRIES });
            }
            *budget -= 1;
            let name = entry.file_name();
            let file_type = match entry.file_type() {
                Ok(t) => t,
                Err(e) if vanished(&e) => continue,
                Err(e) => return Err(fail(&dir.join(&name), e)),
            };
            match name.as_bytes() {
                b".git" => {
                    collect_protected(&dir.join(&name), out)?;
                    continue;
                }
                b"HEAD" => head = !file_type.is_dir(),
                b"objects" => objects = file_type.is_dir(),
                b"refs" => refs = file_type.is_dir(),
                _ => {}
            }
            if file_type.is_dir() {
                subdirs.push(name);
            }
        }
        if head && objects && refs {
            // A bare repository (or a git directory under another name): keep it whole.
            out.push(dir);
            continue;
        }
        stack.extend(subdirs.into_iter().map(|n| dir.join(n)));
    }
    Ok(())
}
