//! Finding what to protect: every git directory, gitfile (and its target) and bare
//! repository under a writable root, by a bounded walk (see `resolve_policy`).

use super::gitrepo::Repo;
use super::*;
use std::ffi::OsString;

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

/// Add `path` (and, for a gitdir pointer file, its targets) to `out` if it exists, and
/// the repository it is (a `.git` directory or gitfile) to `repos`.
pub(super) fn collect_protected(path: &Path, out: &mut Vec<PathBuf>, repos: &mut Vec<Repo>) -> Result<(), PolicyError> {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return Ok(()) };
    if meta.file_type().is_symlink() {
        return Err(PolicyError::ProtectedSymlink { path: path.to_path_buf() });
    }
    out.push(path.to_path_buf());
    let is_dot_git = path.file_name().is_some_and(|n| n == ".git");
    let work_tree = path.parent().filter(|_| is_dot_git).map(Path::to_path_buf);
    if meta.is_dir() && is_dot_git {
        repos.push(Repo { git_dir: path.to_path_buf(), work_tree: work_tree.clone() });
    }
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
                    if is_dot_git {
                        repos.push(Repo { git_dir: gitdir.clone(), work_tree });
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
/// them to `out`, without entering the directories in `skip`. Every directory entry
/// read costs one unit of `budget`.
pub(super) fn discover_git_dirs(
    root: &Path,
    skip: &[PathBuf],
    budget: &mut usize,
    out: &mut Vec<PathBuf>,
    repos: &mut Vec<Repo>,
) -> Result<(), PolicyError> {
    let fail =
        |path: &Path, source| PolicyError::Discovery { root: root.to_path_buf(), path: path.to_path_buf(), source };
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        if skip.contains(&dir) {
            continue;
        }
        let entries = match list_dir(&dir) {
            Ok(entries) => entries,
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
            let (name, file_type) = match entry {
                Ok(e) => e,
                Err(e) if vanished(&e) => continue,
                Err(e) => return Err(fail(&dir, e)),
            };
            if *budget == 0 {
                return Err(PolicyError::DiscoveryLimit { root: root.to_path_buf(), limit: MAX_DISCOVERY_ENTRIES });
            }
            *budget -= 1;
            let file_type = match file_type {
                Ok(t) => t,
                Err(e) if vanished(&e) => continue,
                Err(e) => return Err(fail(&dir.join(&name), e)),
            };
            match name.as_bytes() {
                // A repository no path can name cannot be protected (a protected path
                // is mounted by name): refused, as before any search reached it.
                b".git" if too_long(&dir.join(&name)) => return Err(fail(&dir.join(&name), name_too_long())),
                b".git" => {
                    collect_protected(&dir.join(&name), out, repos)?;
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
        if head && objects && refs && too_long(&dir) {
            return Err(fail(&dir, name_too_long()));
        }
        if head && objects && refs {
            // A bare repository (or a git directory under another name): keep it whole.
            repos.push(Repo { git_dir: dir.clone(), work_tree: None });
            out.push(dir);
            continue;
        }
        stack.extend(subdirs.into_iter().map(|n| dir.join(n)));
    }
    Ok(())
}

/// One directory entry read by [`list_dir`]: its name and type (not following a
/// symlink), or why the type could not be read.
type Entry = std::io::Result<(OsString, std::io::Result<DirKind>)>;

/// What the search needs to know of an entry's type.
#[derive(Clone, Copy)]
pub(super) struct DirKind(bool);

impl DirKind {
    pub(super) fn is_dir(self) -> bool {
        self.0
    }
}

/// Whether `path` is too long for a system call to take whole (`PATH_MAX`, the
/// terminating NUL included).
fn too_long(path: &Path) -> bool {
    path.as_os_str().len() >= libc::PATH_MAX as usize
}

fn name_too_long() -> std::io::Error {
    std::io::Error::from_raw_os_error(libc::ENAMETOOLONG)
}

/// The entries of the directory `dir`. On Linux, a directory whose path is longer than
/// a system call takes (a tree a few thousand levels deep, which anyone can make in
/// `/tmp`) is opened a part of the path at a time, each relative to the last (the same
/// walk the kernel does for a shorter path), and read through its descriptor;
/// elsewhere it fails the search like any directory that cannot be read.
fn list_dir(dir: &Path) -> std::io::Result<Box<dyn Iterator<Item = Entry>>> {
    if !too_long(dir) || cfg!(not(target_os = "linux")) {
        let rd = std::fs::read_dir(dir)?;
        return Ok(Box::new(rd.map(|e| e.map(|e| (e.file_name(), e.file_type().map(|t| DirKind(t.is_dir())))))));
    }
    #[cfg(target_os = "linux")]
    return list_long(dir);
    #[cfg(not(target_os = "linux"))]
    unreachable!()
}

/// [`list_dir`] for a path longer than `PATH_MAX`.
#[cfg(target_os = "linux")]
fn list_long(dir: &Path) -> std::io::Result<Box<dyn Iterator<Item = Entry>>> {
    let fd = open_long(dir)?;
    let entries = rustix::fs::Dir::read_from(&fd)?;
    Ok(Box::new(entries.filter_map(move |entry| {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => return Some(Err(e.into())),
        };
        let name = std::ffi::OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            return None;
        }
        let kind = match entry.file_type() {
            rustix::fs::FileType::Unknown => rustix::fs::statat(&fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| DirKind(rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory))
                .map_err(Into::into),
            t => Ok(DirKind(t == rustix::fs::FileType::Directory)),
        };
        Some(Ok((name.to_os_string(), kind)))
    })))
}

/// Open the directory `path` (absolute, however long) in parts shorter than
/// `PATH_MAX`, each relative to the directory the last one reached.
#[cfg(target_os = "linux")]
fn open_long(path: &Path) -> std::io::Result<rustix::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let open = |at: Option<&rustix::fd::OwnedFd>, part: &Path| {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        match at {
            Some(fd) => rustix::fs::openat(fd, part, flags, Mode::empty()),
            None => rustix::fs::openat(rustix::fs::CWD, part, flags, Mode::empty()),
        }
    };
    let limit = libc::PATH_MAX as usize / 2;
    let (mut at, mut part) = (None, PathBuf::new());
    for c in path.components() {
        let c = c.as_os_str();
        if !part.as_os_str().is_empty() && part.as_os_str().len() + 1 + c.len() >= limit {
            at = Some(open(at.as_ref(), &part)?);
            part = PathBuf::new();
        }
        part.push(c);
    }
    Ok(open(at.as_ref(), &part)?)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use rustix::fs::{Mode, OFlags};

    /// `levels` nested directories `dd` under `dir`, made one at a time relative to the
    /// last (the whole path is longer than `PATH_MAX`); the bottom one's descriptor.
    fn deep_chain(dir: &Path, levels: usize) -> rustix::fd::OwnedFd {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let mut cur = rustix::fs::open(dir, flags, Mode::empty()).unwrap();
        for _ in 0..levels {
            rustix::fs::mkdirat(&cur, "dd", Mode::from_raw_mode(0o755)).unwrap();
            cur = rustix::fs::openat(&cur, "dd", flags, Mode::empty()).unwrap();
        }
        cur
    }

    /// Removes the deep tree however deep (a temporary directory's own removal might
    /// not, and would leave it in the host's /tmp).
    struct Deep(PathBuf);
    impl Drop for Deep {
        fn drop(&mut self) {
            let _ = crate::layer::apply::remove_storage(&self.0);
        }
    }

    #[test]
    fn an_unsearched_directory_is_not_entered() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("state/held/upper/.git")).unwrap();
        std::fs::create_dir_all(root.join("a/.git")).unwrap();
        let (mut out, mut budget) = (Vec::new(), MAX_DISCOVERY_ENTRIES);
        discover_git_dirs(&root, &[root.join("state")], &mut budget, &mut out, &mut Vec::new()).unwrap();
        assert_eq!(out, vec![root.join("a/.git")]);
        let (mut out, mut budget) = (Vec::new(), MAX_DISCOVERY_ENTRIES);
        discover_git_dirs(&root, &[], &mut budget, &mut out, &mut Vec::new()).unwrap();
        out.sort();
        assert_eq!(out, vec![root.join("a/.git"), root.join("state/held/upper/.git")]);
    }

    #[test]
    fn a_tree_deeper_than_a_path_is_searched_and_a_repository_there_refused() {
        // A tree thousands of levels deep in a writable root (anyone can make one in
        // /tmp) failed every run with INVALID_POLICY ("File name too long"): it is
        // searched by descriptor; only a repository no path can name is refused.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let _deep = Deep(root.join("dd"));
        std::fs::create_dir_all(root.join("a/.git")).unwrap();
        let bottom = deep_chain(&root, 1600);
        rustix::fs::mkdirat(&bottom, "plain", Mode::from_raw_mode(0o755)).unwrap();
        let mut out = Vec::new();
        let mut budget = MAX_DISCOVERY_ENTRIES;
        discover_git_dirs(&root, &[], &mut budget, &mut out, &mut Vec::new()).unwrap();
        assert_eq!(out, vec![root.join("a/.git")]);
        assert!(MAX_DISCOVERY_ENTRIES - budget > 1600, "the deep tree was searched");

        rustix::fs::mkdirat(&bottom, ".git", Mode::from_raw_mode(0o755)).unwrap();
        let mut budget = MAX_DISCOVERY_ENTRIES;
        let err = discover_git_dirs(&root, &[], &mut budget, &mut Vec::new(), &mut Vec::new()).unwrap_err();
        assert!(
            matches!(&err, PolicyError::Discovery { path, source, .. }
                if path.ends_with("dd/.git") && source.raw_os_error() == Some(libc::ENAMETOOLONG)),
            "{err}"
        );
    }
}
