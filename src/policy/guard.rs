//! What keeps host git from running what a command planted, beyond the read-only
//! protected paths: [`GitGuard`] (part of every [`ExecutionPolicy`]), the narrow git
//! grant ([`ExecutionPolicy::grant_write`]) and the check when a run ends ([`seal`]).
//!
//! Paths that exist when a call is resolved are kept read-only by the runners (the
//! kernel refuses, whatever the command does). A path that does not exist cannot be
//! mounted over, so where host git would look for one that the command could create
//! (a `.git` at a registered submodule path, a granted git directory's `commondir` or
//! `hooks`), it is a [`Sentinel`]: when the run ends — nothing of it runs any more —
//! a sentinel that exists is moved aside (renamed next to where it was, never
//! deleted) and reported as a denial. Runs in flight at the same time in the same
//! workspace (`cordon serve`) are each checked when they end; a cordon killed with
//! `SIGKILL` during a run checks nothing (docs/guarantees.md).

use super::{gitfmt, ExecutionPolicy};
use serde::Serialize;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The entries of a git directory from which host git takes configuration or
/// commands to run: a grant of the git directory never makes them writable (each
/// needs a grant of its own): the configuration, the hooks, other repositories' git
/// directories (`modules`), and the pointer that would send host git to another
/// configuration (`commondir`). `info` is not among them: attributes there only pick
/// filters and drivers the configuration defines (as a work tree's `.gitattributes`
/// may), and `git gc` writes `info/refs`.
pub const GIT_COMMAND_SOURCES: [&str; 5] = ["config", "config.worktree", "hooks", "modules", "commondir"];

/// See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GitGuard {
    /// Paths made writable again inside (or as) a protected path by a grant: each is
    /// attached writable over itself, so it cannot be renamed or replaced either.
    pub reopened: Vec<PathBuf>,
    /// Paths that must not exist when the run ends.
    pub sentinels: Vec<Sentinel>,
    /// The index of each granted git directory with the gitlinks it held: a gitlink
    /// the run adds whose directory holds a repository is moved aside when it ends.
    #[serde(skip)]
    pub indexes: Vec<IndexSeal>,
    /// The work trees of the protected repositories that reach into a writable root:
    /// a file the index tracks there that the run turned into a repository (a
    /// directory with a `.git`) is moved aside when it ends ([`SentinelKind::Tracked`]).
    #[serde(skip)]
    pub trees: Vec<TreeSeal>,
}

impl GitGuard {
    /// Nothing beyond the protected paths.
    pub fn is_empty(&self) -> bool {
        self.reopened.is_empty() && self.sentinels.is_empty() && self.indexes.is_empty() && self.trees.is_empty()
    }
}

/// A protected repository's work tree and the git directory holding its index (see
/// [`GitGuard::trees`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeSeal {
    /// The git directory whose `index` lists the tracked paths (for a linked worktree
    /// or a submodule, its own).
    pub git_dir: PathBuf,
    /// The work tree the paths are relative to.
    pub work_tree: PathBuf,
    /// Object name length (20, or 32 for SHA-256).
    pub hash_len: usize,
}

/// A path that must not exist when the run ends (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sentinel {
    /// The path.
    pub path: PathBuf,
    /// The writable root it lies in (checked from there down).
    pub root: PathBuf,
    /// Host git follows symlinks on the way to it (a config include, a hooks
    /// directory): a symlink that appears on the way is moved aside too. Otherwise
    /// (a submodule's `.git`) git does not look beyond a symlink, and neither does the
    /// check.
    pub follows_links: bool,
    /// Why host git reads it.
    pub kind: SentinelKind,
}

/// Why host git reads a [`Sentinel`]'s path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SentinelKind {
    /// A registered submodule path's `.git`.
    Submodule,
    /// A linked worktree's `.git`.
    Worktree,
    /// `.git` in a writable root that lies inside a repository: git run there finds it
    /// first.
    Discovery,
    /// A configuration file an existing one includes.
    Config,
    /// `core.hooksPath`.
    Hooks,
    /// A program the configuration names by path.
    Program,
    /// An entry of a granted git directory that host git reads configuration or
    /// commands from ([`GIT_COMMAND_SOURCES`]).
    GitDir,
    /// The `.git` of a path the index tracks as a file: host git's `commit -a` (`add
    /// -u`) records a tracked file that became a repository as a submodule, silently,
    /// and runs git there from then on.
    Tracked,
}

impl std::fmt::Display for SentinelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SentinelKind::Submodule => "a registered submodule path, where host git runs git in the superproject",
            SentinelKind::Worktree => "a linked worktree's git directory pointer",
            SentinelKind::Discovery => "the first .git host git finds when run in this directory",
            SentinelKind::Config => "a configuration file host git includes",
            SentinelKind::Hooks => "the hooks directory host git's core.hooksPath names",
            SentinelKind::Program => "a program host git's configuration runs",
            SentinelKind::GitDir => "a git directory entry host git reads configuration or hooks from",
            SentinelKind::Tracked => {
                "a tracked file made a repository, which host git's commit -a records as a submodule and runs"
            }
        })
    }
}

/// A granted git directory's index, as it was when the call was resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSeal {
    /// The git directory.
    pub git_dir: PathBuf,
    /// Its work tree.
    pub work_tree: PathBuf,
    /// The writable root the work tree lies in.
    pub root: PathBuf,
    /// Object name length (20, or 32 for SHA-256).
    pub hash_len: usize,
    /// The gitlinks it held.
    pub gitlinks: Vec<Vec<u8>>,
}

/// Whether `dir` is a git directory (a `HEAD` file and `objects/` or a `commondir`).
pub fn is_git_dir(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join("HEAD")).is_ok_and(|m| m.is_file())
        && (dir.join("objects").is_dir() || dir.join("commondir").is_file())
}

/// The object name length of a repository (its `extensions.objectFormat`).
fn hash_len(git_dir: &Path) -> usize {
    let common = match std::fs::read(git_dir.join("commondir")) {
        Ok(c) => super::lexical_normalize(git_dir, Path::new(OsStr::from_bytes(c.trim_ascii()))),
        Err(_) => git_dir.to_path_buf(),
    };
    let text = std::fs::read(common.join("config")).unwrap_or_default();
    let sha256 = gitfmt::parse_config(&text).iter().any(|e| {
        e.section == "extensions"
            && e.key == "objectformat"
            && e.value.as_deref().is_some_and(|v| v.eq_ignore_ascii_case(b"sha256"))
    });
    if sha256 {
        32
    } else {
        20
    }
}

/// The work tree of git directory `git_dir`: `core.worktree` (submodules' git
/// directories name theirs), the directory of a `.git`, or the one a linked worktree's
/// `gitdir` file names.
fn work_tree_of(git_dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read(git_dir.join("config")).unwrap_or_default();
    let configured = gitfmt::parse_config(&text)
        .into_iter()
        .filter(|e| e.section == "core" && e.subsection.is_none() && e.key == "worktree")
        .filter_map(|e| e.value)
        .next_back();
    if let Some(w) = configured {
        return Some(super::lexical_normalize(git_dir, Path::new(OsStr::from_bytes(&w))));
    }
    if git_dir.file_name() == Some(OsStr::new(".git")) {
        return git_dir.parent().map(Path::to_path_buf);
    }
    let pointer = std::fs::read(git_dir.join("gitdir")).ok()?;
    let line = pointer.split(|b| *b == b'\n').next()?.trim_ascii();
    super::lexical_normalize(git_dir, Path::new(OsStr::from_bytes(line))).parent().map(Path::to_path_buf)
}

impl ExecutionPolicy {
    /// Let this call write `path` after all (a narrow grant, or a session's standing
    /// one), if it is protected or lies inside a protected path (else nothing
    /// changes). `path` is attached writable over itself (so it cannot be renamed
    /// away either). When `path` is a git directory, the grant is as narrow as git's
    /// own write commands: everything in it becomes writable (objects, refs, logs, the
    /// index, `HEAD`, the state of a merge or rebase, its linked worktrees' own
    /// directories) except [`GIT_COMMAND_SOURCES`], which stay read-only when they
    /// exist and are checked when the run ends when they do not ([`seal`]), as is
    /// every gitlink the run adds to its index. Granting one of those entries itself
    /// opens that entry (and only it).
    pub fn grant_write(&mut self, path: &Path) {
        let listed = self.protected.iter().any(|p| p == path);
        let inside = self.protected.iter().any(|p| p != path && path.starts_with(p));
        if !listed && !inside {
            return;
        }
        self.protected.retain(|p| p != path);
        if !self.git.reopened.iter().any(|p| p == path) {
            self.git.reopened.push(path.to_path_buf());
        }
        let Some(root) = self.writable().into_iter().find(|w| path.starts_with(w)) else { return };
        if !is_git_dir(path) {
            return;
        }
        // A linked worktree's own directory is the same repository's.
        let worktrees = path.join("worktrees");
        self.protected.retain(|p| p.parent() != Some(worktrees.as_path()));
        // (A main git directory has no `commondir`: one the run creates would send
        // host git to another configuration.)
        let mut sources: Vec<PathBuf> = GIT_COMMAND_SOURCES.iter().map(|n| path.join(n)).collect();
        if let Ok(rd) = std::fs::read_dir(&worktrees) {
            for e in rd.flatten() {
                for n in ["config.worktree", "commondir"] {
                    sources.push(e.path().join(n));
                }
            }
        }
        // And whatever its configuration names inside it (an included file, a hooks
        // directory, a program kept in the git directory).
        let top = work_tree_of(path).unwrap_or_else(|| path.to_path_buf());
        sources.extend(
            super::gitrepo::configured_paths(path, &top).into_iter().filter(|p| p.starts_with(path) && p != path),
        );
        for p in sources {
            if p.symlink_metadata().is_ok() {
                if !self.protected.contains(&p) {
                    self.protected.push(p);
                }
            } else if !self.git.sentinels.iter().any(|s| s.path == p) {
                self.git.sentinels.push(Sentinel {
                    path: p,
                    root: root.clone(),
                    follows_links: true,
                    kind: SentinelKind::GitDir,
                });
            }
        }
        self.protected.sort();
        if let Some(work_tree) = work_tree_of(path) {
            let hash_len = hash_len(path);
            let gitlinks = index_gitlinks(path, hash_len);
            if let Some(root) = self.writable().into_iter().find(|w| work_tree.starts_with(w)) {
                self.git.indexes.push(IndexSeal { git_dir: path.to_path_buf(), work_tree, root, hash_len, gitlinks });
            }
        }
    }
}

/// How a path of [`ExecutionPolicy::self_binds`] is attached over itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BindAccess {
    /// Read-only: a protected path.
    ReadOnly,
    /// Writable, inside or as a protected path: a path a grant reopened.
    Writable,
    /// As the tree around it: a directory on the way to a protected path, made a
    /// mount point only so that it cannot be renamed, replaced or removed (which
    /// would move the protected path away and leave its place to a planted one).
    Same,
}

impl ExecutionPolicy {
    /// Every path a runner with a mount layer attaches over itself, shallow first, so
    /// that each deeper one lands on top (pure): the protected paths read-only (one
    /// inside a read-only one only when a reopened path lies between them), the
    /// reopened ones writable, and every directory on the way to one of them inside
    /// the writable roots that is not a mount point already and not inside a
    /// read-only one ([`BindAccess::Same`]).
    pub fn self_binds(&self) -> Vec<(PathBuf, BindAccess)> {
        let depth = |p: &Path| p.components().count();
        let mut items: Vec<(PathBuf, BindAccess)> = self
            .protected
            .iter()
            .map(|p| (p.clone(), BindAccess::ReadOnly))
            .chain(self.git.reopened.iter().map(|p| (p.clone(), BindAccess::Writable)))
            .collect();
        items.sort_by(|a, b| (depth(&a.0), &a.0).cmp(&(depth(&b.0), &b.0)));
        // The innermost attached path at (unless `strict`) or above `p`: a lookup per
        // ancestor, so that thousands of repositories stay cheap.
        let enclosing = |kept: &HashMap<&Path, BindAccess>, p: &Path, strict: bool| {
            p.ancestors().skip(usize::from(strict)).find_map(|a| kept.get(a).copied())
        };
        let mut map: HashMap<&Path, BindAccess> = HashMap::new();
        let mut kept: Vec<(PathBuf, BindAccess)> = Vec::new();
        for (p, a) in &items {
            if *a == BindAccess::ReadOnly && enclosing(&map, p, true) == Some(BindAccess::ReadOnly) {
                continue;
            }
            if map.insert(p.as_path(), *a).is_none() {
                kept.push((p.clone(), *a));
            }
        }
        let roots = self.writable();
        let root_set: std::collections::HashSet<&Path> = roots.iter().map(PathBuf::as_path).collect();
        let mut seen: std::collections::HashSet<&Path> = std::collections::HashSet::new();
        let mut ancestors: Vec<PathBuf> = Vec::new();
        for (p, _) in &items {
            if !map.contains_key(p.as_path()) {
                continue;
            }
            for a in p.ancestors().skip(1) {
                if root_set.contains(a) || !roots.iter().any(|w| a.starts_with(w)) {
                    // A writable root is a mount point already; above it, nothing moves.
                    if root_set.contains(a) {
                        continue;
                    }
                    break;
                }
                if map.contains_key(a) || enclosing(&map, a, false) == Some(BindAccess::ReadOnly) {
                    continue;
                }
                if !seen.insert(a) {
                    break; // this one and everything above it done already
                }
                ancestors.push(a.to_path_buf());
            }
        }
        kept.extend(ancestors.into_iter().map(|a| (a, BindAccess::Same)));
        kept.sort_by(|a, b| (depth(&a.0), &a.0).cmp(&(depth(&b.0), &b.0)));
        kept
    }
}

/// The gitlinks of `git_dir`'s index and shared index; nothing when unreadable.
fn index_gitlinks(git_dir: &Path, hash_len: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let Ok(bytes) = std::fs::read(git_dir.join("index")) else { return out };
    let Ok(parsed) = gitfmt::index_gitlinks(&bytes, hash_len) else { return out };
    out.extend(parsed.gitlinks);
    if let Some(hex) = parsed.shared {
        if let Ok(bytes) = std::fs::read(git_dir.join(format!("sharedindex.{hex}"))) {
            out.extend(gitfmt::index_gitlinks(&bytes, hash_len).map(|p| p.gitlinks).unwrap_or_default());
        }
    }
    out.retain(|p| gitfmt::sane_repo_path(p));
    out
}

/// A sentinel found when the run ended, and where it was moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// Where host git would have read it.
    pub path: PathBuf,
    /// Where it is now (`None`: it could not be moved, and is still there).
    pub moved_to: Option<PathBuf>,
    /// Why host git reads it.
    pub kind: SentinelKind,
}

/// Check `policy`'s sentinels (and the gitlinks its granted indexes gained) once the
/// run has ended; move each one found aside (see the module docs).
pub fn seal(policy: &ExecutionPolicy) -> Vec<Quarantined> {
    let mut out = Vec::new();
    for s in &policy.git.sentinels {
        check(s, &mut out);
    }
    for ix in &policy.git.indexes {
        let now = index_gitlinks(&ix.git_dir, ix.hash_len);
        for g in now.iter().filter(|g| !ix.gitlinks.contains(g)) {
            let path = ix.work_tree.join(OsStr::from_bytes(g)).join(".git");
            let s = Sentinel { path, root: ix.root.clone(), follows_links: false, kind: SentinelKind::Submodule };
            check(&s, &mut out);
        }
    }
    if !policy.git.trees.is_empty() {
        let roots = policy.writable();
        let protected: std::collections::HashSet<&Path> = policy.protected.iter().map(PathBuf::as_path).collect();
        for t in &policy.git.trees {
            super::tracked::check_tracked(t, &roots, &protected, &mut out);
        }
    }
    out
}

/// Walk from the sentinel's root to it without following symlinks; move aside what
/// host git would read.
pub(super) fn check(s: &Sentinel, out: &mut Vec<Quarantined>) {
    let Ok(rel) = s.path.strip_prefix(&s.root) else { return };
    let comps: Vec<&OsStr> = rel.iter().collect();
    let Ok(mut dir) = Dir::open_root(&s.root) else { return };
    for (i, name) in comps.iter().enumerate() {
        let last = i + 1 == comps.len();
        // A directory whose owner took its own search permission away hides what lies
        // in it: given back (the run has ended), then looked at again.
        let kind = match dir.kind(name) {
            Ok(k) => k,
            Err(e) if e.raw_os_error() == Some(libc::EACCES) && dir.give_back_access() => match dir.kind(name) {
                Ok(k) => k,
                Err(_) => return,
            },
            Err(_) => return,
        };
        let found = match kind {
            Kind::Link => s.follows_links || last,
            Kind::Dir if !last => false,
            Kind::Other if !last => return,
            _ => true,
        };
        if found {
            // Likewise write permission, without which the entry cannot be renamed.
            let moved_to = dir.move_aside(name).or_else(|e| {
                let refused = matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM));
                if refused && dir.give_back_access() {
                    dir.move_aside(name)
                } else {
                    Err(e)
                }
            });
            let moved_to = moved_to.ok();
            out.push(Quarantined { path: dir.path.join(name), moved_to, kind: s.kind });
            return;
        }
        if kind == Kind::Link {
            return;
        }
        let Ok(next) = dir.child(name) else { return };
        dir = next;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    Link,
    Other,
}

/// A directory reached without following symlinks (an open descriptor on Linux, so
/// that a concurrent rename elsewhere cannot redirect the move).
pub(super) struct Dir {
    path: PathBuf,
    #[cfg(target_os = "linux")]
    fd: std::os::fd::OwnedFd,
}

impl Dir {
    #[cfg(target_os = "linux")]
    fn open_root(root: &Path) -> std::io::Result<Dir> {
        Ok(Dir { path: root.to_path_buf(), fd: crate::pin::open_no_symlinks(root)? })
    }
    #[cfg(not(target_os = "linux"))]
    fn open_root(root: &Path) -> std::io::Result<Dir> {
        crate::pin::open_no_symlinks(root)?;
        Ok(Dir { path: root.to_path_buf() })
    }

    #[cfg(target_os = "linux")]
    fn kind(&self, name: &OsStr) -> std::io::Result<Kind> {
        use nix::sys::stat::{fstatat, SFlag};
        let st = fstatat(&self.fd, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)?;
        Ok(match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
            SFlag::S_IFDIR => Kind::Dir,
            SFlag::S_IFLNK => Kind::Link,
            _ => Kind::Other,
        })
    }
    #[cfg(not(target_os = "linux"))]
    fn kind(&self, name: &OsStr) -> std::io::Result<Kind> {
        let m = std::fs::symlink_metadata(self.path.join(name))?;
        Ok(if m.file_type().is_symlink() {
            Kind::Link
        } else if m.is_dir() {
            Kind::Dir
        } else {
            Kind::Other
        })
    }

    /// Give the directory's owner read, write and search permission again if any is
    /// missing (a command can take them from a directory it made, so that cordon can
    /// neither see nor move what it planted inside); `true` when the mode changed.
    /// Only the caller's own directory can be changed. Through the descriptor on Linux
    /// (the path a name reaches could have changed).
    pub(super) fn give_back_access(&self) -> bool {
        use std::os::unix::fs::PermissionsExt;
        let target = self.proc_path();
        let Ok(m) = std::fs::metadata(&target) else { return false };
        let mode = m.permissions().mode() & 0o7777;
        if !m.is_dir() || mode & 0o700 == 0o700 {
            return false;
        }
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode | 0o700)).is_ok()
    }

    /// A path that names this directory: its descriptor's on Linux.
    #[cfg(target_os = "linux")]
    pub(super) fn proc_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&self.fd)))
    }
    #[cfg(not(target_os = "linux"))]
    pub(super) fn proc_path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The directory `rel` below the writable root `root`, reached without following a
    /// symlink, access given back on the way where it was taken.
    pub(super) fn walk_to(root: &Path, rel: &Path) -> Option<Dir> {
        let mut dir = Dir::open_root(root).ok()?;
        for name in rel.iter() {
            let next = dir.child(name).or_else(|e| {
                if e.raw_os_error() == Some(libc::EACCES) && dir.give_back_access() {
                    dir.child(name)
                } else {
                    Err(e)
                }
            });
            dir = next.ok()?;
        }
        Some(dir)
    }

    #[cfg(target_os = "linux")]
    fn child(&self, name: &OsStr) -> std::io::Result<Dir> {
        use nix::fcntl::{openat, OFlag};
        use nix::sys::stat::Mode;
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = openat(&self.fd, name, flags, Mode::empty()).map_err(std::io::Error::from)?;
        Ok(Dir { path: self.path.join(name), fd })
    }
    #[cfg(not(target_os = "linux"))]
    fn child(&self, name: &OsStr) -> std::io::Result<Dir> {
        Ok(Dir { path: self.path.join(name) })
    }

    /// Rename `name` to `NAME.cordon-quarantine-SECONDS-PID-RANDOM` in this directory,
    /// never over an existing entry. The random part is what a command cannot guess:
    /// the seconds and cordon's pid it can (`GIT_CONFIG_GLOBAL` names the pid), and
    /// names made in advance for every attempt kept its plant where it was.
    fn move_aside(&self, name: &OsStr) -> std::io::Result<PathBuf> {
        use std::hash::{BuildHasher, Hasher};
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let mut last = std::io::Error::from_raw_os_error(libc::EEXIST);
        for n in 0..100u32 {
            // std's hasher keys come from the operating system's random source.
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u32(n);
            let mut to = name.to_os_string();
            to.push(format!(".cordon-quarantine-{secs}-{}-{:016x}", std::process::id(), h.finish()));
            match self.rename_noreplace(name, &to) {
                Ok(()) => return Ok(self.path.join(to)),
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    #[cfg(target_os = "linux")]
    fn rename_noreplace(&self, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
        use nix::fcntl::{renameat2, RenameFlags};
        renameat2(&self.fd, from, &self.fd, to, RenameFlags::RENAME_NOREPLACE).map_err(std::io::Error::from)
    }
    #[cfg(not(target_os = "linux"))]
    fn rename_noreplace(&self, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
        let target = self.path.join(to);
        if target.symlink_metadata().is_ok() {
            return Err(std::io::Error::from_raw_os_error(libc::EEXIST));
        }
        std::fs::rename(self.path.join(from), target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sentinel(root: &Path, rel: &str, follows_links: bool) -> Sentinel {
        Sentinel { path: root.join(rel), root: root.to_path_buf(), follows_links, kind: SentinelKind::Submodule }
    }

    #[test]
    fn self_binds_layout() {
        let mut p = ExecutionPolicy::for_tests(Path::new("/ws"));
        p.writable_roots = vec!["/ws/nested".into()];
        p.protected = ["/ws/.git", "/ws/.git/modules/a", "/ws/.git/modules/b", "/ws/lib/x/.git", "/ws/nested/r/.git"]
            .iter()
            .map(PathBuf::from)
            .chain(["/ws/.git/modules/b/config", "/ws/.git/modules/b/hooks"].iter().map(PathBuf::from))
            .collect();
        p.git.reopened = vec!["/ws/.git/modules/b".into()];
        use BindAccess::*;
        let got: Vec<(String, BindAccess)> =
            p.self_binds().into_iter().map(|(p, a)| (p.display().to_string(), a)).collect();
        let want: Vec<(String, BindAccess)> = [
            ("/ws/lib", Same),
            ("/ws/.git", ReadOnly),
            ("/ws/lib/x", Same),
            ("/ws/nested/r", Same),
            ("/ws/.git/modules/b", Writable),
            ("/ws/lib/x/.git", ReadOnly),
            ("/ws/nested/r/.git", ReadOnly),
            ("/ws/.git/modules/b/config", ReadOnly),
            ("/ws/.git/modules/b/hooks", ReadOnly),
        ]
        .iter()
        .map(|(p, a)| (p.to_string(), *a))
        .collect();
        let mut want = want;
        want.sort_by(|a, b| {
            (Path::new(&a.0).components().count(), &a.0).cmp(&(Path::new(&b.0).components().count(), &b.0))
        });
        assert_eq!(got, want);
    }

    #[test]
    fn seal_moves_aside_what_appeared_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("sub/.git")).unwrap();
        std::fs::create_dir_all(root.join("real/m/.git")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("lnk")).unwrap();
        std::fs::create_dir_all(root.join("inc")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("inc/d")).unwrap();
        let mut p = ExecutionPolicy::for_tests(&root);
        p.git.sentinels = vec![
            sentinel(&root, "sub/.git", false),
            sentinel(&root, "lnk/m/.git", false), // git does not look beyond a symlink
            sentinel(&root, "inc/d/x.cfg", true), // but follows one to an include
            sentinel(&root, "missing/.git", false),
        ];
        let q = seal(&p);
        assert_eq!(
            q.iter().map(|q| q.path.clone()).collect::<Vec<_>>(),
            vec![root.join("sub/.git"), root.join("inc/d")]
        );
        assert!(!root.join("sub/.git").exists() && !root.join("inc/d").exists());
        assert!(q.iter().all(|q| q.moved_to.as_ref().is_some_and(|m| m.exists())));
        assert!(root.join("real/m/.git").exists() && root.join("lnk").exists());
        // Nothing left to move: nothing reported.
        assert!(seal(&p).is_empty());
    }

    #[test]
    fn a_git_dir_grant_opens_git_files_only() {
        let have_git = std::process::Command::new("git").arg("--version").output().is_ok_and(|o| o.status.success());
        if !have_git {
            eprintln!("SKIP a_git_dir_grant_opens_git_files_only: no git");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let ok = std::process::Command::new("git")
            .args(["init", "-q", "."])
            .current_dir(&ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap();
        assert!(ok.success());
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        // A file the configuration includes from inside the git directory.
        let mut config = std::fs::read_to_string(ws.join(".git/config")).unwrap();
        config.push_str("[include]\n\tpath = extra.cfg\n");
        std::fs::write(ws.join(".git/config"), config).unwrap();
        std::fs::write(ws.join(".git/extra.cfg"), "").unwrap();
        let req = super::super::PolicyRequest { unprotected: vec![ws.join(".git")], ..Default::default() };
        let p = super::super::resolve_policy(&req, &ws).unwrap();
        assert_eq!(p.git.reopened, vec![ws.join(".git")]);
        for kept in [".git/config", ".git/hooks", ".git/extra.cfg"] {
            assert!(p.protected.contains(&ws.join(kept)), "{kept}: {:?}", p.protected);
        }
        assert!(!p.protected.contains(&ws.join(".git")));
        let sentinels: Vec<PathBuf> = p.git.sentinels.iter().map(|s| s.path.clone()).collect();
        assert!(sentinels.contains(&ws.join(".git/commondir")), "{sentinels:?}");
        assert_eq!(p.git.indexes.len(), 1);
        assert_eq!(p.git.indexes[0].work_tree, ws);
        // The layout: the git directory a writable mount of its own, its sources on top.
        let binds = p.self_binds();
        let at = |q: &str| binds.iter().position(|(b, _)| b == &ws.join(q)).unwrap();
        assert_eq!(binds[at(".git")].1, BindAccess::Writable);
        assert_eq!(binds[at(".git/hooks")].1, BindAccess::ReadOnly);
        assert!(at(".git") < at(".git/hooks"));
        // An entry alone: opened inside the still read-only git directory.
        let req = super::super::PolicyRequest { unprotected: vec![ws.join(".git/hooks")], ..Default::default() };
        let p = super::super::resolve_policy(&req, &ws).unwrap();
        assert!(p.protected.contains(&ws.join(".git")) && p.git.reopened == vec![ws.join(".git/hooks")]);
        // A path that is neither protected nor inside one changes nothing.
        let mut q = p.clone();
        q.grant_write(&ws.join("elsewhere"));
        assert_eq!(q, p);
    }
}
