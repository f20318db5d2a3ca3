//! Execution policy: mode, workspace, writable roots, protected subpaths, network.
//!
//! A [`PolicyRequest`] is what the caller asked for; [`resolve_policy`] turns it into an
//! immutable [`ExecutionPolicy`] with every path canonical (symlinks resolved), duplicate
//! roots merged and dangerous requests refused. Resolution never widens: the resolved
//! mode is the requested mode and every writable root is a requested one.
//!
//! Decisions (tested below and documented in docs/architecture.md):
//! - Writable roots must be absolute, existing directories; duplicates (after
//!   canonicalization, including the workspace itself) are merged silently.
//! - A writable root whose resolution follows a symlink lying inside the workspace or
//!   another writable root is refused (`SymlinkRoot`, [`real_writable_path`];
//!   serve/mcp apply the same check against the ceiling): such a link may have been
//!   planted by an earlier sandboxed run to redirect the grant. Host symlinks outside
//!   every writable location (`/home -> /var/home`) are followed. The workspace (the working directory) may be reached through a
//!   symlink, as shells do: it is resolved once, pinned, and the result reports the
//!   resolved paths (`sandbox.writable_roots`, `sandbox.protected`); serve and mcp
//!   also require it to resolve inside the ceiling. Callers that take a working
//!   directory from a model should pass a canonical path or use a ceiling.
//! - How wide a writable root may be ([`too_wide`], a pure function of the path, the
//!   home directories and the flag; the same rule for the workspace in
//!   `workspace-write`):
//!   1. never `/`;
//!   2. never a home directory or an ancestor of one. The homes are the caller's
//!      (`$HOME` and the password database's entry for the effective uid, both
//!      canonical) and, from `/etc/passwd`, uid 0's and every account whose shell is
//!      not `nologin`/`false` ([`passwd_homes`]);
//!   3. never a configuration location of one of those homes, or anything inside one:
//!      every top-level dot-directory (`~/.ssh`, `~/.config`, `~/.local`, `~/.gnupg`,
//!      `~/.bashrc.d`, ...) plus `~/bin` (on `PATH` by default) and `~/Library`
//!      (macOS launch agents) ([`HOME_CONFIG_DIRS`]);
//!   4. unless [`PolicyRequest::allow_system_root`] is set, never a system directory
//!      ([`SYSTEM_DIRS`]), anything inside one or anything containing one. `/tmp`,
//!      `/var/tmp` and their subdirectories are not system directories. A path inside
//!      the caller's own password-database home (`/root/project` for uid 0) is exempt
//!      from this rule only (rules 2 and 3 still apply).
//!
//!   Accounts known only to other NSS sources (LDAP, systemd-homed) count through the
//!   caller's own entry only.
//! - Protected paths, in `workspace-write` only: each relative path of
//!   [`PolicyRequest::protected`] (default `.git`) under each writable root, plus every
//!   git directory and gitfile found under each writable root when the call is
//!   resolved ([`MAX_DISCOVERY_ENTRIES`] bounds the search). What counts: any entry
//!   named `.git` (a directory, or a gitfile together with the directory its
//!   `gitdir:` line names and that directory's `commondir`: submodules, linked
//!   worktrees, `--separate-git-dir`), and any directory holding `HEAD`, `objects/`
//!   and `refs/` (a bare repository). The search reads directories without following
//!   symlinks and does not descend into a git directory it found; it skips a
//!   directory the caller cannot search (nothing under it is reachable by the command,
//!   which runs as the same user without capabilities), protects whole a directory it
//!   may search but not list (a git directory could hide under a name it cannot see;
//!   `/tmp` often holds such directories of other users), skips an entry that vanishes
//!   while it is read, reads a directory deeper than `PATH_MAX` by descriptor (a
//!   repository there, which no protected path could name, is refused) and fails closed
//!   on any other error. A protected path that is a symlink is refused (the link itself
//!   could be replaced). Then every place host git will look from those repositories
//!   (and from one enclosing a writable root) is added: registered submodule paths,
//!   linked worktrees, a writable root's own `.git` inside a repository, the files and
//!   directories its configuration names (`gitrepo`). What exists is protected; what
//!   does not is a [`Sentinel`], checked when the run ends ([`seal`]). Each path in
//!   [`PolicyRequest::unprotected`] (a session's standing `write` grant) is then
//!   opened as [`ExecutionPolicy::grant_write`] says (a git directory: git's own files
//!   only).
//! - A writable root (or the workspace, in `workspace-write`) that is or lies inside a
//!   protected path or a git directory is refused, as is a policy with more than
//!   [`MAX_PROTECTED`] protected paths.
//!
//! What it does not do: it does not decide how a runner enforces the policy (the
//! runners attach [`ExecutionPolicy::self_binds`]), and it cannot protect a repository
//! the command creates where host git does not look from a protected repository (that
//! is the command's own content; `git` run later in such a directory reads its config).

use crate::error::{GitFileError, PolicyError, WidthReason};
use crate::mode::Mode;
use serde::{Deserialize, Serialize};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

mod git;
mod gitfmt;
mod gitrepo;
mod guard;
pub mod hosts;
pub mod presets;
mod tracked;
use git::*;
pub use gitfmt::IndexError;
pub use guard::{
    is_git_dir, seal, BindAccess, GitGuard, IndexSeal, Quarantined, Sentinel, SentinelKind, TreeSeal,
    GIT_COMMAND_SOURCES,
};

/// The default protected subpaths of a workspace.
pub const DEFAULT_PROTECTED: [&str; 1] = [".git"];

/// Entries the git-directory search visits per call, over all writable roots. A
/// bound on the time a policy takes to resolve (about 1 µs per entry measured by
/// `bench/policy_walk.py`, see docs/architecture.md); past it the call fails closed with
/// [`PolicyError::DiscoveryLimit`] naming the root.
pub const MAX_DISCOVERY_ENTRIES: usize = 1_000_000;

/// Protected paths per policy: each is one mount (plus, at most, one for each
/// directory on the way to it) that the child attaches one at a time, holding no
/// descriptor per path, so the bound is about time, not descriptors: a workspace of
/// 1 000 clones costs about 2 000 mounts (docs/performance.md has the figures). Past
/// it the call fails closed (`TooManyProtected`): pass a narrower directory.
pub const MAX_PROTECTED: usize = 10_000;

/// Directories of a home that configure programs the user runs later (besides every
/// top-level dot-directory): `bin` is on `PATH` in the default shell profiles,
/// `Library` holds macOS launch agents.
pub const HOME_CONFIG_DIRS: [&str; 2] = ["bin", "Library"];

/// System directories (canonical spellings, Linux and macOS) that no writable root may
/// be, lie inside or contain unless [`PolicyRequest::allow_system_root`] is set: code
/// and configuration the host runs, its state, and the kernel's interfaces.
pub const SYSTEM_DIRS: [&str; 34] = [
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/nix",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/snap",
    "/sys",
    "/usr",
    "/var/backups",
    "/var/cache",
    "/var/db",
    "/var/lib",
    "/var/local",
    "/var/lock",
    "/var/log",
    "/var/mail",
    "/var/opt",
    "/var/run",
    "/var/spool",
    "/Applications",
    "/Library",
    "/System",
    "/private/etc",
    "/private/var/db",
    "/private/var/root",
];

/// What the caller asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PolicyRequest {
    /// The rung of the ladder.
    pub mode: Mode,
    /// Extra writable roots (absolute paths).
    pub writable_roots: Vec<PathBuf>,
    /// Allow network access below `full-access`.
    pub network: bool,
    /// Run even if the host cannot enforce every restriction (gaps are reported).
    pub best_effort: bool,
    /// Run when every restriction the host cannot enforce is one of these (a named
    /// profile's gaps, e.g. [`crate::CONTAINER_GAPS`]); any other gap still
    /// refuses the run unless `best_effort`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accept_gaps: Vec<crate::vocab::Restriction>,
    /// Protected subpaths, relative to the workspace (default `.git`).
    pub protected: Vec<PathBuf>,
    /// Allow a writable root that is, lies inside or contains a system directory
    /// ([`SYSTEM_DIRS`]). The home-directory rules still apply.
    pub allow_system_root: bool,
    /// Host unix sockets (absolute paths of existing socket files) the command may
    /// connect to by path, in any confined mode. Every other unix socket to the host
    /// stays closed. cordon's seccomp supervisor performs each allowed `connect()`
    /// itself, to the path named here (never to a path read back from the command).
    pub allow_unix_sockets: Vec<PathBuf>,
    /// Protected paths (absolute, as the resolved policy names them) the caller lets
    /// this call write after all: each is taken out of the protected set, exactly, if
    /// it is in it (a standing `write` grant of a session, see [`crate::session`]).
    pub unprotected: Vec<PathBuf>,
    /// Hosts the command may reach by name (`--allow-host`: `pypi.org`,
    /// `*.pythonhosted.org`, optional `:port`), in confined modes with the network off:
    /// through cordon's own proxy only, never directly (docs/network.md). Empty:
    /// nothing (the network stays off).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_hosts: Vec<hosts::HostPattern>,
    /// Directories the git-directory search does not enter: cordon's own state
    /// directory, which every Linux runner hides from the command (an empty read-only
    /// tmpfs), so nothing the command does can put a repository there, while other
    /// runs' held storage in it comes and goes as it is read. Set by the executor,
    /// never from a request's text (not deserialized).
    #[serde(skip)]
    pub unsearched: Vec<PathBuf>,
}

impl Default for PolicyRequest {
    fn default() -> Self {
        PolicyRequest {
            mode: Mode::WorkspaceWrite,
            writable_roots: Vec::new(),
            network: false,
            best_effort: false,
            accept_gaps: Vec::new(),
            protected: DEFAULT_PROTECTED.iter().map(PathBuf::from).collect(),
            allow_system_root: false,
            allow_unix_sockets: Vec::new(),
            unprotected: Vec::new(),
            allow_hosts: Vec::new(),
            unsearched: Vec::new(),
        }
    }
}

/// The resolved, immutable policy of one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecutionPolicy {
    /// The rung of the ladder.
    pub mode: Mode,
    /// The canonical workspace.
    pub workspace: PathBuf,
    /// Canonical writable roots, excluding the workspace, sorted, deduplicated. Empty
    /// in `read-only`.
    pub writable_roots: Vec<PathBuf>,
    /// Canonical protected paths that lie inside a writable root (others are read-only
    /// anyway): directories and files (gitfiles).
    pub protected: Vec<PathBuf>,
    /// Network allowed.
    pub network: bool,
    /// Best effort allowed.
    pub best_effort: bool,
    /// Gaps the caller accepts (sorted; see [`PolicyRequest::accept_gaps`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accept_gaps: Vec<crate::vocab::Restriction>,
    /// Host unix sockets the command may connect to by path (canonical socket files;
    /// confined modes; see [`PolicyRequest::allow_unix_sockets`]).
    pub allow_unix_sockets: Vec<PathBuf>,
    /// Hosts reachable through cordon's proxy (confined modes with the network off;
    /// empty otherwise; see [`PolicyRequest::allow_hosts`]).
    #[serde(skip_serializing_if = "hosts::AllowList::is_empty")]
    pub allow_hosts: hosts::AllowList,
    /// Where else host git would read what a command plants: paths reopened by a
    /// grant, sentinels checked when the run ends ([`GitGuard`]).
    #[serde(skip_serializing_if = "GitGuard::is_empty")]
    pub git: GitGuard,
}

impl ExecutionPolicy {
    /// Pin the workspace, the writable roots, `workdir` and the protected layout
    /// (protected paths, reopened ones and the directories on the way to them:
    /// [`ExecutionPolicy::self_binds`], by identity only), each opened without following
    /// a symlink in any component (`crate::pin`).
    pub(crate) fn pin(&self, workdir: &Path) -> Result<crate::pin::Pins, PolicyError> {
        let mut pins = crate::pin::Pins::default();
        let paths = std::iter::once(&self.workspace)
            .chain(self.writable_roots.iter())
            .chain(std::iter::once(&workdir.to_path_buf()))
            .cloned()
            .collect::<Vec<_>>();
        for path in paths {
            pins.add(&path)?;
        }
        for path in self.protected.iter().cloned().chain(self.self_binds().into_iter().map(|(p, _)| p)) {
            pins.add_identity(&path)?;
        }
        Ok(pins)
    }

    /// Every directory the command may write (workspace first), per the mode.
    pub fn writable(&self) -> Vec<PathBuf> {
        match self.mode {
            Mode::ReadOnly => Vec::new(),
            _ => std::iter::once(self.workspace.clone()).chain(self.writable_roots.iter().cloned()).collect(),
        }
    }

    /// A workspace-write policy on `ws` that protects nothing (tests).
    #[cfg(test)]
    pub(crate) fn for_tests(ws: &Path) -> ExecutionPolicy {
        ExecutionPolicy {
            mode: Mode::WorkspaceWrite,
            workspace: ws.to_path_buf(),
            writable_roots: Vec::new(),
            protected: Vec::new(),
            network: false,
            best_effort: false,
            allow_unix_sockets: Vec::new(),
            allow_hosts: Default::default(),
            accept_gaps: Vec::new(),
            git: GitGuard::default(),
        }
    }

    /// Whether network restrictions apply.
    pub fn network_restricted(&self) -> bool {
        self.mode.is_confined() && !self.network
    }

    /// Whether the command reaches some hosts by name through cordon's proxy (and
    /// nothing else on the network).
    pub fn network_by_proxy(&self) -> bool {
        self.network_restricted() && !self.allow_hosts.is_empty()
    }
}

/// `path` joined to `base` when relative, with `.` dropped and `..` applied lexically
/// (without touching the filesystem). Without symlinks this is the canonical path.
pub(crate) fn lexical_normalize(base: &Path, path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in base.join(path).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// `path` made absolute against the process's working directory and normalized
/// lexically (`lexical_normalize`), so comparing it with the canonical path tells
/// whether a symlink was followed.
pub fn lexical_absolute(path: &Path) -> PathBuf {
    lexical_normalize(&std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")), path)
}

/// Refuse a path that will become writable when resolving it follows a symlink that
/// lies inside `writable` (directories a sandboxed run could write: the workspace, the
/// other requested roots, a server's ceiling). Such a link may have been planted by an
/// earlier run to redirect the grant (`--writable ws/build/out` with `build/out ->
/// /elsewhere`). Links elsewhere (host layout such as `/home -> /var/home`, or
/// macOS's `/tmp -> /private/tmp`) are followed: no sandboxed run could have made
/// them. The same rule for the CLI, the library, serve and mcp.
pub fn real_writable_path(given: &Path, canonical: &Path, writable: &[PathBuf]) -> Result<(), PolicyError> {
    if lexical_absolute(given) == canonical {
        return Ok(());
    }
    let refuse = || PolicyError::SymlinkRoot { path: given.to_path_buf(), resolved: canonical.to_path_buf() };
    let mut cur = PathBuf::from("/");
    for c in lexical_components(given) {
        match c {
            std::path::Component::ParentDir => {
                cur.pop();
            }
            std::path::Component::Normal(n) => {
                let next = cur.join(n);
                match std::fs::symlink_metadata(&next) {
                    Ok(m) if m.file_type().is_symlink() => {
                        if writable.iter().any(|w| cur.starts_with(w)) {
                            return Err(refuse());
                        }
                        cur = next.canonicalize().map_err(|_| refuse())?;
                    }
                    _ => cur = next,
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The components of `path` made absolute against the working directory (`..` kept:
/// they are resolved physically by [`real_writable_path`]).
fn lexical_components(path: &Path) -> Vec<std::path::Component<'_>> {
    let mut v = Vec::new();
    if !path.is_absolute() {
        // Relative paths are resolved by the caller before they get here; treat
        // them as below `/` so that nothing is skipped.
        v.push(std::path::Component::RootDir);
    }
    v.extend(path.components());
    v
}

/// The home directories the width rules compare against (canonical where they exist).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Homes {
    /// `$HOME` of the caller.
    pub env: Option<PathBuf>,
    /// The password database's home of the effective uid.
    pub account: Option<PathBuf>,
    /// uid 0's and every login account's home from `/etc/passwd`.
    pub others: Vec<PathBuf>,
}

impl Homes {
    /// Read `$HOME`, the password database and `/etc/passwd`.
    pub fn detect() -> Homes {
        let env = std::env::var_os("HOME").and_then(|h| canonical_home(Path::new(&h)));
        let passwd = std::fs::read("/etc/passwd").unwrap_or_default();
        let euid = nix::unistd::geteuid();
        // The account's entry in /etc/passwd when it has one; the name service
        // otherwise (a directory account). Asking the name service first would cost
        // the same file read plus its configuration and an nscd probe on every run.
        let account = match passwd_home_of(&passwd, euid.as_raw()) {
            Some(home) => home,
            None => nix::unistd::User::from_uid(euid).ok().flatten().map(|u| u.dir),
        }
        .and_then(|h| canonical_home(&h));
        let others = passwd_homes(&passwd).iter().filter_map(|h| canonical_home(h)).collect();
        Homes { env, account, others }
    }

    fn all(&self) -> impl Iterator<Item = &Path> {
        self.env.iter().chain(self.account.iter()).chain(self.others.iter()).map(PathBuf::as_path)
    }
}

/// An absolute home, canonical when it exists (lexical otherwise: a home that does not
/// exist yet still must not become writable); `None` for `/`, empty or relative.
fn canonical_home(h: &Path) -> Option<PathBuf> {
    if !h.is_absolute() {
        return None;
    }
    let p = h.canonicalize().unwrap_or_else(|_| lexical_normalize(Path::new("/"), h));
    (p != Path::new("/")).then_some(p)
}

/// The first `/etc/passwd` entry with user id `uid`, as the C library finds it (ids
/// compared as numbers): `Some(its home)`, `Some(None)` when that entry has an empty
/// home, `None` when no entry has the id (pure).
pub fn passwd_home_of(text: &[u8], uid: u32) -> Option<Option<PathBuf>> {
    text.split(|b| *b == b'\n').find_map(|line| {
        let fields: Vec<&[u8]> = line.split(|b| *b == b':').collect();
        let [name, _, id, _, _, home, _] = fields[..] else { return None };
        let id: u32 = std::str::from_utf8(id).ok()?.parse().ok()?;
        (!name.starts_with(b"#") && id == uid)
            .then(|| (!home.is_empty()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(home))))
    })
}

/// The homes of uid 0 and of every login account (shell not `nologin` or `false`; an
/// empty shell means `/bin/sh`) in `/etc/passwd` text (pure).
pub fn passwd_homes(text: &[u8]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for line in text.split(|b| *b == b'\n') {
        let fields: Vec<&[u8]> = line.split(|b| *b == b':').collect();
        let [name, _, uid, _, _, home, shell] = fields[..] else { continue };
        if name.starts_with(b"#") || home.is_empty() {
            continue;
        }
        let shell_name = shell.rsplit(|b| *b == b'/').next().unwrap_or_default();
        let login = !matches!(shell_name, b"nologin" | b"false");
        if uid == b"0" || login {
            let home = PathBuf::from(std::ffi::OsStr::from_bytes(home));
            if !out.contains(&home) {
                out.push(home);
            }
        }
    }
    out
}

/// Why `path` (canonical) is too wide to be writable, or `None` (pure; the rules are
/// in the module docs).
pub fn too_wide(path: &Path, homes: &Homes, allow_system_root: bool) -> Option<WidthReason> {
    if path == Path::new("/") {
        return Some(WidthReason::FilesystemRoot);
    }
    if let Some(home) = homes.all().find(|h| h.starts_with(path)) {
        return Some(WidthReason::ContainsHome { home: home.to_path_buf() });
    }
    for home in homes.all() {
        let Ok(rel) = path.strip_prefix(home) else { continue };
        if let Some(Component::Normal(first)) = rel.components().next() {
            let config = first.as_bytes().starts_with(b".") || HOME_CONFIG_DIRS.iter().any(|d| first == *d);
            if config {
                return Some(WidthReason::HomeConfig { dir: home.join(first) });
            }
        }
    }
    if allow_system_root || homes.account.as_deref().is_some_and(|h| path.starts_with(h)) {
        return None;
    }
    SYSTEM_DIRS
        .iter()
        .map(Path::new)
        .find(|d| path.starts_with(d) || d.starts_with(path))
        .map(|d| WidthReason::SystemDir { dir: d.to_path_buf() })
}

/// Resolve a request against the filesystem (canonicalizes paths; reads the password
/// database, `.git` files and the writable roots' directories).
pub fn resolve_policy(req: &PolicyRequest, workspace: &Path) -> Result<ExecutionPolicy, PolicyError> {
    let ws =
        workspace.canonicalize().map_err(|source| PolicyError::Workspace { path: workspace.to_path_buf(), source })?;
    if !ws.is_dir() {
        return Err(PolicyError::Workspace {
            path: workspace.to_path_buf(),
            source: std::io::Error::from_raw_os_error(libc::ENOTDIR),
        });
    }
    let homes = Homes::detect();
    let writes = req.mode >= Mode::WorkspaceWrite;
    if writes && req.mode.is_confined() {
        if let Some(why) = too_wide(&ws, &homes, req.allow_system_root) {
            return Err(PolicyError::WorkspaceTooWide { path: ws, why });
        }
    }

    let mut roots = Vec::new();
    for root in &req.writable_roots {
        if !root.is_absolute() {
            return Err(PolicyError::RelativeRoot { path: root.clone() });
        }
        let canon = root.canonicalize().map_err(|source| PolicyError::Root { path: root.clone(), source })?;
        let writable: Vec<PathBuf> = std::iter::once(ws.clone())
            .chain(req.writable_roots.iter().filter(|r| *r != root).filter_map(|r| r.canonicalize().ok()))
            .collect();
        real_writable_path(root, &canon, &writable)?;
        if !canon.is_dir() {
            return Err(PolicyError::Root {
                path: root.clone(),
                source: std::io::Error::from_raw_os_error(libc::ENOTDIR),
            });
        }
        if let Some(why) = too_wide(&canon, &homes, req.allow_system_root) {
            return Err(PolicyError::TooWide { path: canon, why });
        }
        if canon != ws && !roots.contains(&canon) {
            roots.push(canon);
        }
    }
    roots.sort();

    let mut protected = Vec::new();
    let mut guard = GitGuard::default();
    if writes && req.mode.is_confined() {
        let writable: Vec<&Path> = std::iter::once(ws.as_path()).chain(roots.iter().map(|r| r.as_path())).collect();
        for w in &writable {
            if let Some(git) = enclosing_git_dir(w) {
                return Err(PolicyError::RootInsideProtected { root: w.to_path_buf(), protected: git });
            }
        }
        let mut repos = Vec::new();
        for base in &writable {
            for rel in &req.protected {
                collect_protected(&base.join(rel), &mut protected, &mut repos)?;
            }
        }
        let mut budget = MAX_DISCOVERY_ENTRIES;
        for base in writable.iter().filter(|b| !writable.iter().any(|o| o != *b && b.starts_with(o))) {
            discover_git_dirs(base, &req.unsearched, &mut budget, &mut protected, &mut repos)?;
            protected.sort();
            protected.dedup();
            if protected.len() > MAX_PROTECTED {
                return Err(PolicyError::TooManyProtected { root: base.to_path_buf(), limit: MAX_PROTECTED });
            }
        }
        protected.retain(|p: &PathBuf| writable.iter().any(|w| p.starts_with(w)));
        repos.sort_by(|a, b| a.git_dir.cmp(&b.git_dir));
        repos.dedup();
        // Where host git looks besides (docs/architecture.md, "What is protected").
        let registered = gitrepo::registered(&repos, &writable, &protected, &gitrepo::HostGit::detect())?;
        protected.extend(registered.protect);
        protected.sort();
        protected.dedup();
        if protected.len() > MAX_PROTECTED {
            return Err(PolicyError::TooManyProtected { root: ws.clone(), limit: MAX_PROTECTED });
        }
        guard.sentinels = registered.sentinels;
        guard.trees = registered.trees;
        for w in &writable {
            if let Some(p) = protected.iter().find(|p| w.starts_with(p)) {
                return Err(PolicyError::RootInsideProtected { root: w.to_path_buf(), protected: p.clone() });
            }
        }
    }

    let mut allow_unix_sockets = Vec::new();
    for sock in &req.allow_unix_sockets {
        let bad = |why: &'static str| PolicyError::UnixSocket { path: sock.clone(), why };
        if !sock.is_absolute() {
            return Err(bad("it must be an absolute path"));
        }
        let canon = sock.canonicalize().map_err(|_| bad("it does not exist"))?;
        use std::os::unix::fs::FileTypeExt;
        if !std::fs::metadata(&canon).is_ok_and(|m| m.file_type().is_socket()) {
            return Err(bad("it is not a unix socket"));
        }
        // A socket in a directory a sandboxed run can write could be replaced there
        // (by a link to another daemon's socket) between the check and the connect.
        let writable_dirs = std::iter::once(&ws).chain(roots.iter());
        if writable_dirs.clone().any(|w| canon.starts_with(w)) {
            return Err(bad("it lies inside the workspace or a writable root, where a command could replace it"));
        }
        if !allow_unix_sockets.contains(&canon) {
            allow_unix_sockets.push(canon);
        }
    }
    allow_unix_sockets.sort();
    // Hosts by name only make sense where the network is otherwise off.
    if !req.allow_hosts.is_empty() && req.network && req.mode.is_confined() {
        return Err(PolicyError::AllowHostsWithNetwork);
    }
    let allow_hosts = if req.mode.is_confined() {
        hosts::AllowList::new(req.allow_hosts.clone())
    } else {
        hosts::AllowList::default()
    };

    let mut policy = ExecutionPolicy {
        mode: req.mode,
        workspace: ws,
        writable_roots: if writes { roots } else { Vec::new() },
        protected,
        network: req.network,
        best_effort: req.best_effort,
        accept_gaps: {
            let mut g = req.accept_gaps.clone();
            g.sort();
            g.dedup();
            g
        },
        allow_unix_sockets: if req.mode.is_confined() { allow_unix_sockets } else { Vec::new() },
        allow_hosts,
        git: guard,
    };
    // Standing grants (a session's `write`): each taken out of the protected set, as
    // narrowly as [`ExecutionPolicy::grant_write`] says.
    for path in &req.unprotected {
        policy.grant_write(path);
    }
    Ok(policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinked_roots_refused_only_when_the_link_is_in_a_writable_location() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("real/ws/out")).unwrap();
        std::fs::create_dir_all(base.join("elsewhere")).unwrap();
        // A host-layout link above everything writable (`/home -> /var/home`).
        std::os::unix::fs::symlink(base.join("real"), base.join("home")).unwrap();
        let given = base.join("home/ws/out");
        let canon = given.canonicalize().unwrap();
        assert!(real_writable_path(&given, &canon, &[base.join("real/ws")]).is_ok());
        // A link inside the workspace (planted by an earlier run).
        std::os::unix::fs::symlink(base.join("elsewhere"), base.join("real/ws/planted")).unwrap();
        let given = base.join("real/ws/planted");
        let canon = given.canonicalize().unwrap();
        assert!(matches!(
            real_writable_path(&given, &canon, &[base.join("real/ws")]),
            Err(PolicyError::SymlinkRoot { .. })
        ));
        // The same link through the host-layout prefix is still refused.
        let given = base.join("home/ws/planted");
        assert!(real_writable_path(&given, &canon, &[base.join("real/ws")]).is_err());
        // And allowed when nothing around it is writable.
        assert!(real_writable_path(&base.join("real/ws/planted"), &canon, &[]).is_ok());
    }

    fn req(mode: Mode) -> PolicyRequest {
        PolicyRequest { mode, ..PolicyRequest::default() }
    }

    #[test]
    fn canonicalizes_workspace_through_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let p = resolve_policy(&req(Mode::WorkspaceWrite), &link).unwrap();
        assert_eq!(p.workspace, real.canonicalize().unwrap());
    }

    #[test]
    fn never_wider_than_requested() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::create_dir(&a).unwrap();
        for mode in Mode::ALL {
            let mut r = req(mode);
            r.writable_roots = vec![a.clone(), a.clone()];
            let p = resolve_policy(&r, dir.path()).unwrap();
            assert_eq!(p.mode, mode);
            assert!(p.writable_roots.len() <= 1);
            for root in &p.writable_roots {
                assert!(r.writable_roots.iter().any(|q| q.canonicalize().unwrap() == *root));
            }
            if mode == Mode::ReadOnly {
                assert!(p.writable().is_empty());
            }
        }
    }

    #[test]
    fn refuses_bad_roots() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = req(Mode::WorkspaceWrite);
        r.writable_roots = vec!["relative".into()];
        assert!(matches!(resolve_policy(&r, dir.path()), Err(PolicyError::RelativeRoot { .. })));
        r.writable_roots = vec![dir.path().join("missing")];
        assert!(matches!(resolve_policy(&r, dir.path()), Err(PolicyError::Root { .. })));
        r.writable_roots = vec!["/".into()];
        assert!(matches!(resolve_policy(&r, dir.path()), Err(PolicyError::TooWide { .. })));
        let err = resolve_policy(&req(Mode::WorkspaceWrite), Path::new("/")).unwrap_err();
        assert!(matches!(err, PolicyError::WorkspaceTooWide { .. }), "{err}");
        // The refusal of a workspace names the ways on.
        let text = err.to_string();
        assert!(text.contains("--cwd DIR") && text.contains("--mode read-only"), "{text}");
        assert!(resolve_policy(&req(Mode::ReadOnly), Path::new("/")).is_ok());
    }

    #[test]
    fn unprotected_takes_out_exactly_that_path() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        for d in [".git", "sub/.git"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        let mut r = req(Mode::WorkspaceWrite);
        r.unprotected = vec![ws.join(".git"), ws.join("nowhere")];
        let p = resolve_policy(&r, &ws).unwrap();
        assert_eq!(p.protected, vec![ws.join("sub/.git")]);
    }

    #[test]
    fn protects_git_and_refuses_roots_inside_it() {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path().join(".git");
        std::fs::create_dir_all(git.join("hooks")).unwrap();
        let p = resolve_policy(&req(Mode::WorkspaceWrite), dir.path()).unwrap();
        assert_eq!(p.protected, vec![git.canonicalize().unwrap()]);
        let mut r = req(Mode::WorkspaceWrite);
        r.writable_roots = vec![git.join("hooks")];
        assert!(matches!(resolve_policy(&r, dir.path()), Err(PolicyError::RootInsideProtected { .. })));
    }

    #[test]
    fn follows_gitdir_pointer_files() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let real = dir.path().join("ws/modules/x");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::write(ws.join(".git"), "gitdir: modules/x\n").unwrap();
        let p = resolve_policy(&req(Mode::WorkspaceWrite), &ws).unwrap();
        assert!(p.protected.contains(&ws.canonicalize().unwrap().join(".git")));
        assert!(p.protected.contains(&real.canonicalize().unwrap()));
    }

    #[test]
    fn refuses_symlinked_git_in_workspace_write() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::os::unix::fs::symlink(&elsewhere, ws.join(".git")).unwrap();
        assert!(matches!(resolve_policy(&req(Mode::WorkspaceWrite), &ws), Err(PolicyError::ProtectedSymlink { .. })));
        assert!(resolve_policy(&req(Mode::ReadOnly), &ws).is_ok());
    }

    fn homes(env: &str, account: &str, others: &[&str]) -> Homes {
        Homes {
            env: (!env.is_empty()).then(|| env.into()),
            account: (!account.is_empty()).then(|| account.into()),
            others: others.iter().map(PathBuf::from).collect(),
        }
    }

    fn why(path: &str, h: &Homes, allow: bool) -> Option<WidthReason> {
        too_wide(Path::new(path), h, allow)
    }

    #[test]
    fn width_refuses_root_homes_and_their_ancestors() {
        let h = homes("/var/tmp/h/u", "/home/u", &["/root", "/home/alice"]);
        assert_eq!(why("/", &h, true), Some(WidthReason::FilesystemRoot));
        for (path, home) in [
            ("/var/tmp/h/u", "/var/tmp/h/u"),
            ("/var/tmp/h", "/var/tmp/h/u"),
            ("/var/tmp", "/var/tmp/h/u"),
            ("/home/u", "/home/u"),
            ("/home", "/home/u"),
            ("/home/alice", "/home/alice"),
        ] {
            // The flag never lifts the home rules.
            for allow in [false, true] {
                assert_eq!(why(path, &h, allow), Some(WidthReason::ContainsHome { home: home.into() }), "{path}");
            }
        }
        // Inside a home, outside its configuration: fine.
        for ok in ["/home/u/src", "/home/u/src/.hidden-in-project", "/var/tmp/h/u/proj", "/home/alice/work"] {
            assert_eq!(why(ok, &h, false), None, "{ok}");
        }
        // Without $HOME the account's home still counts.
        let h = homes("", "/home/u", &[]);
        assert_eq!(why("/home", &h, false), Some(WidthReason::ContainsHome { home: "/home/u".into() }));
    }

    #[test]
    fn width_refuses_home_configuration_locations() {
        let h = homes("/home/u", "/home/u", &["/home/alice"]);
        for (path, dir) in [
            ("/home/u/.ssh", "/home/u/.ssh"),
            ("/home/u/.config", "/home/u/.config"),
            ("/home/u/.config/systemd/user", "/home/u/.config"),
            ("/home/u/.local/bin", "/home/u/.local"),
            ("/home/u/.gnupg", "/home/u/.gnupg"),
            ("/home/u/bin", "/home/u/bin"),
            ("/home/u/Library/LaunchAgents", "/home/u/Library"),
            ("/home/alice/.ssh", "/home/alice/.ssh"),
        ] {
            assert_eq!(why(path, &h, true), Some(WidthReason::HomeConfig { dir: dir.into() }), "{path}");
        }
    }

    #[test]
    fn width_refuses_system_directories_unless_allowed() {
        let h = homes("/home/u", "/home/u", &[]);
        for (path, dir) in [
            ("/etc", "/etc"),
            ("/etc/cron.d", "/etc"),
            ("/usr/local/src", "/usr"),
            ("/var", "/var/backups"),
            ("/var/lib/app", "/var/lib"),
            ("/var/spool/cron", "/var/spool"),
            ("/root", "/root"),
            ("/root/x", "/root"),
            ("/dev/shm", "/dev"),
            ("/proc", "/proc"),
            ("/sys/fs/cgroup", "/sys"),
            ("/run/user/1000", "/run"),
            ("/lib64", "/lib64"),
            ("/boot", "/boot"),
            ("/private", "/private/etc"),
        ] {
            assert_eq!(why(path, &h, false), Some(WidthReason::SystemDir { dir: dir.into() }), "{path}");
            assert_eq!(why(path, &h, true), None, "{path} with the flag");
        }
        for ok in ["/tmp", "/tmp/x", "/var/tmp", "/var/tmp/build", "/srv/data", "/work/repo", "/private/tmp"] {
            assert_eq!(why(ok, &h, false), None, "{ok}");
        }
    }

    #[test]
    fn width_exempts_only_the_callers_account_home_from_the_system_rule() {
        // uid 0 working in /root/project: the system rule yields, the home rules do not.
        let root = homes("", "/root", &["/root"]);
        assert_eq!(why("/root/project", &root, false), None);
        assert_eq!(why("/root", &root, false), Some(WidthReason::ContainsHome { home: "/root".into() }));
        assert_eq!(why("/root/.ssh", &root, false), Some(WidthReason::HomeConfig { dir: "/root/.ssh".into() }));
        // Another user: /root/project is a system location.
        let user = homes("/home/u", "/home/u", &["/root"]);
        assert_eq!(why("/root/project", &user, false), Some(WidthReason::SystemDir { dir: "/root".into() }));
        // $HOME alone does not exempt (an account's home inside /var/lib stays refused).
        let odd = homes("/var/lib/svc", "/home/u", &[]);
        assert_eq!(why("/var/lib/svc/data", &odd, false), Some(WidthReason::SystemDir { dir: "/var/lib".into() }));
    }

    #[test]
    fn passwd_homes_keep_root_and_login_accounts() {
        let text = b"root:x:0:0:root:/root:/bin/bash\n\
            daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
            sync:x:4:65534:sync:/bin:/bin/sync\n\
            nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
            svc:x:997:997::/var/lib/svc:/bin/false\n\
            alice:x:1000:1000::/home/alice:/bin/zsh\n\
            old:x:1001:1001::/home/old:\n\
            # comment\n\
            broken:line\n";
        assert_eq!(
            passwd_homes(text),
            ["/root", "/bin", "/home/alice", "/home/old"].iter().map(PathBuf::from).collect::<Vec<_>>()
        );
    }

    #[test]
    fn passwd_home_of_finds_the_first_entry_of_a_uid() {
        let text = b"root:x:0:0:root:/root:/bin/bash\n\
            #ghost:x:1000:1000::/home/ghost:/bin/sh\n\
            svc:x:997:997::/var/lib/svc:/bin/false\n\
            alice:x:1000:1000::/home/alice:/bin/zsh\n\
            alias:x:1000:1000::/home/alias:/bin/zsh\n\
            nohome:x:1002:1002:::/bin/sh\n\
            later:x:1002:1002::/home/later:/bin/sh\n\
            padded:x:01004:1004::/home/padded:/bin/sh\n\
            broken:1003\n";
        let home = |p: &str| Some(Some(PathBuf::from(p)));
        assert_eq!(passwd_home_of(text, 0), home("/root"));
        assert_eq!(passwd_home_of(text, 997), home("/var/lib/svc"));
        // The first entry of a shared id, not a commented-out one before it.
        assert_eq!(passwd_home_of(text, 1000), home("/home/alice"));
        // The first entry has no home: that is the answer, not a later entry's.
        assert_eq!(passwd_home_of(text, 1002), Some(None));
        // Ids are numbers (as the C library reads them); a malformed line is skipped.
        assert_eq!(passwd_home_of(text, 1004), home("/home/padded"));
        assert_eq!(passwd_home_of(text, 1003), None);
        assert_eq!(passwd_home_of(text, 10), None);
    }

    /// A directory that looks like a git directory to the search.
    fn fake_git_dir(dir: &Path) {
        std::fs::create_dir_all(dir.join("objects")).unwrap();
        std::fs::create_dir_all(dir.join("refs")).unwrap();
        std::fs::create_dir_all(dir.join("hooks")).unwrap();
        std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    }

    #[test]
    fn protects_every_git_dir_and_gitfile_under_each_writable_root() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let ws = base.join("ws");
        fake_git_dir(&ws.join(".git"));
        fake_git_dir(&ws.join(".git/modules/sub"));
        fake_git_dir(&ws.join("pkg/.git"));
        fake_git_dir(&ws.join("deep/a/b/c/.git"));
        fake_git_dir(&ws.join("vendor/lib.git")); // bare
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(ws.join("sub/.git"), "gitdir: ../.git/modules/sub\n").unwrap();
        // A linked worktree whose gitdir lives in another writable root.
        let other = base.join("other");
        fake_git_dir(&other.join("repo/.git"));
        fake_git_dir(&other.join("repo/.git/worktrees/wt"));
        std::fs::write(other.join("repo/.git/worktrees/wt/commondir"), "../..\n").unwrap();
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        std::fs::write(ws.join("wt/.git"), format!("gitdir: {}\n", other.join("repo/.git/worktrees/wt").display()))
            .unwrap();
        // Not followed: a symlink to a directory holding a repository outside every root.
        fake_git_dir(&base.join("outside/.git"));
        std::os::unix::fs::symlink(base.join("outside"), ws.join("link")).unwrap();

        let mut r = req(Mode::WorkspaceWrite);
        r.writable_roots = vec![other.clone()];
        let p = resolve_policy(&r, &ws).unwrap();
        let want: Vec<PathBuf> = [
            "other/repo/.git",
            "other/repo/.git/worktrees/wt",
            "ws/.git",
            "ws/.git/modules/sub",
            "ws/deep/a/b/c/.git",
            "ws/pkg/.git",
            "ws/sub/.git",
            "ws/vendor/lib.git",
            "ws/wt/.git",
        ]
        .iter()
        .map(|p| base.join(p))
        .collect();
        assert_eq!(p.protected, want);
        // Read-only mode protects nothing (nothing is writable).
        assert!(resolve_policy(&req(Mode::ReadOnly), &ws).unwrap().protected.is_empty());
    }

    #[test]
    fn search_does_not_descend_into_git_dirs_and_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fake_git_dir(&root.join("a/.git"));
        for i in 0..50 {
            std::fs::write(root.join("a/.git/objects").join(i.to_string()), "").unwrap();
        }
        std::fs::create_dir_all(root.join("b")).unwrap();
        for i in 0..10 {
            std::fs::write(root.join("b").join(i.to_string()), "").unwrap();
        }
        // root: a, b; a: .git; b: 10 files. The 50 objects are never visited.
        let mut budget = 13;
        let mut out = Vec::new();
        discover_git_dirs(&root, &[], &mut budget, &mut out, &mut Vec::new()).unwrap();
        assert_eq!((budget, out), (0, vec![root.join("a/.git")]));
        let mut budget = 12;
        let err = discover_git_dirs(&root, &[], &mut budget, &mut Vec::new(), &mut Vec::new()).unwrap_err();
        assert!(matches!(&err, PolicyError::DiscoveryLimit { root: r, .. } if *r == root), "{err}");
    }

    #[test]
    fn refuses_nested_symlinked_git_and_too_many_repositories() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("pkg")).unwrap();
        fake_git_dir(&dir.path().join("elsewhere"));
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), ws.join("pkg/.git")).unwrap();
        assert!(matches!(resolve_policy(&req(Mode::WorkspaceWrite), &ws), Err(PolicyError::ProtectedSymlink { .. })));
        std::fs::remove_file(ws.join("pkg/.git")).unwrap();
        // The workspace's own .git is found twice (default `protected` and the search)
        // but counts once.
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        for i in 1..MAX_PROTECTED {
            std::fs::create_dir_all(ws.join(format!("r{i}/.git"))).unwrap();
        }
        assert_eq!(resolve_policy(&req(Mode::WorkspaceWrite), &ws).unwrap().protected.len(), MAX_PROTECTED);
        std::fs::create_dir_all(ws.join("one-more/.git")).unwrap();
        assert!(matches!(resolve_policy(&req(Mode::WorkspaceWrite), &ws), Err(PolicyError::TooManyProtected { .. })));
    }

    #[test]
    fn refuses_roots_that_are_or_lie_inside_git_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fake_git_dir(&ws.join(".git"));
        fake_git_dir(&dir.path().join("bare.git"));
        for cwd in
            [ws.join(".git"), ws.join(".git/hooks"), dir.path().join("bare.git"), dir.path().join("bare.git/refs")]
        {
            let err = resolve_policy(&req(Mode::WorkspaceWrite), &cwd).unwrap_err();
            assert!(matches!(err, PolicyError::RootInsideProtected { .. }), "{}: {err}", cwd.display());
            assert!(resolve_policy(&req(Mode::ReadOnly), &cwd).is_ok());
        }
        let mut r = req(Mode::WorkspaceWrite);
        r.writable_roots = vec![dir.path().join("bare.git")];
        assert!(matches!(resolve_policy(&r, &ws), Err(PolicyError::RootInsideProtected { .. })));
        // A gitfile pointing at the workspace itself cannot turn it read-only silently.
        let ws2 = dir.path().join("ws2");
        std::fs::create_dir_all(ws2.join("sub")).unwrap();
        std::fs::write(ws2.join("sub/.git"), "gitdir: ..\n").unwrap();
        assert!(matches!(
            resolve_policy(&req(Mode::WorkspaceWrite), &ws2),
            Err(PolicyError::RootInsideProtected { .. })
        ));
    }
}
