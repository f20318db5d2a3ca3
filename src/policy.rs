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
//! - A writable root given through a symlink is refused (`SymlinkRoot`,
//!   [`real_writable_path`]; serve/mcp apply the same check to request roots): a link
//!   inside a workspace may have been planted by an earlier sandboxed run to redirect
//!   the grant. The workspace (the working directory) may be reached through a
//!   symlink, as shells do: it is resolved once, pinned, and the result reports the
//!   resolved paths (`sandbox.writable_roots`, `sandbox.protected`); serve and mcp
//!   also require it to resolve inside the ceiling. Callers that take a working
//!   directory from a model should pass a canonical path or use a ceiling.
//! - `/` can never be writable, nor the home directory itself; a workspace of `/` or
//!   `$HOME` is refused in `workspace-write`.
//! - Protected subpaths default to `.git`. For a `.git` pointer file (worktrees,
//!   submodules) the file and the directory it points to (and that directory's
//!   `commondir`) are protected. A protected path that is a symlink is refused in
//!   `workspace-write` (the link itself could be replaced).
//! - A writable root inside a protected path is refused.
//!
//! What it does not do: it does not decide how a runner enforces the policy.

use crate::error::PolicyError;
use crate::mode::Mode;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The default protected subpaths of a workspace.
pub const DEFAULT_PROTECTED: [&str; 1] = [".git"];

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
    /// Protected subpaths, relative to the workspace (default `.git`).
    pub protected: Vec<PathBuf>,
}

impl Default for PolicyRequest {
    fn default() -> Self {
        PolicyRequest {
            mode: Mode::WorkspaceWrite,
            writable_roots: Vec::new(),
            network: false,
            best_effort: false,
            protected: DEFAULT_PROTECTED.iter().map(PathBuf::from).collect(),
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
    /// anyway).
    pub protected: Vec<PathBuf>,
    /// Network allowed.
    pub network: bool,
    /// Best effort allowed.
    pub best_effort: bool,
}

impl ExecutionPolicy {
    /// Every directory the command may write (workspace first), per the mode.
    pub fn writable(&self) -> Vec<PathBuf> {
        match self.mode {
            Mode::ReadOnly => Vec::new(),
            _ => std::iter::once(self.workspace.clone()).chain(self.writable_roots.iter().cloned()).collect(),
        }
    }

    /// Whether network restrictions apply.
    pub fn network_restricted(&self) -> bool {
        self.mode.is_confined() && !self.network
    }
}

/// `path` made absolute (against the process's working directory) and normalized
/// lexically: `.` dropped, `..` taken off the end. Without symlinks this is the
/// canonical path, so comparing the two tells whether a symlink was followed.
pub fn lexical_absolute(path: &Path) -> PathBuf {
    let base = if path.is_absolute() { PathBuf::new() } else { std::env::current_dir().unwrap_or_default() };
    let mut out = PathBuf::from("/");
    for c in base.join(path).components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// Canonicalize a path that will become writable, refusing one that passes through a
/// symlink: a link inside a workspace may have been planted by an earlier sandboxed
/// run to redirect the grant (the same rule for the CLI, the library, serve and mcp).
pub fn real_writable_path(given: &Path, canonical: &Path) -> Result<(), PolicyError> {
    if lexical_absolute(given) != canonical {
        return Err(PolicyError::SymlinkRoot { path: given.to_path_buf(), resolved: canonical.to_path_buf() });
    }
    Ok(())
}

fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from).and_then(|h| h.canonicalize().ok())
}

fn too_wide(path: &Path, home: Option<&Path>) -> Option<&'static str> {
    if path == Path::new("/") {
        return Some("it is the root of the filesystem");
    }
    if Some(path) == home {
        return Some("it is the home directory (dotfiles there configure other programs)");
    }
    None
}

/// Resolve a request against the filesystem (canonicalizes paths; reads `.git` files).
pub fn resolve_policy(req: &PolicyRequest, workspace: &Path) -> Result<ExecutionPolicy, PolicyError> {
    let ws =
        workspace.canonicalize().map_err(|source| PolicyError::Workspace { path: workspace.to_path_buf(), source })?;
    if !ws.is_dir() {
        return Err(PolicyError::Workspace {
            path: workspace.to_path_buf(),
            source: std::io::Error::from_raw_os_error(libc::ENOTDIR),
        });
    }
    let home = home_dir();
    let writes = req.mode >= Mode::WorkspaceWrite;
    if writes && req.mode.is_confined() {
        if let Some(why) = too_wide(&ws, home.as_deref()) {
            return Err(PolicyError::TooWide { path: ws, why });
        }
    }

    let mut roots = Vec::new();
    for root in &req.writable_roots {
        if !root.is_absolute() {
            return Err(PolicyError::RelativeRoot { path: root.clone() });
        }
        let canon = root.canonicalize().map_err(|source| PolicyError::Root { path: root.clone(), source })?;
        real_writable_path(root, &canon)?;
        if !canon.is_dir() {
            return Err(PolicyError::Root {
                path: root.clone(),
                source: std::io::Error::from_raw_os_error(libc::ENOTDIR),
            });
        }
        if let Some(why) = too_wide(&canon, home.as_deref()) {
            return Err(PolicyError::TooWide { path: canon, why });
        }
        if canon != ws && !roots.contains(&canon) {
            roots.push(canon);
        }
    }
    roots.sort();

    let mut protected = Vec::new();
    if writes && req.mode.is_confined() {
        let writable: Vec<&Path> = std::iter::once(ws.as_path()).chain(roots.iter().map(|r| r.as_path())).collect();
        for base in &writable {
            for rel in &req.protected {
                collect_protected(&base.join(rel), &mut protected)?;
            }
        }
        protected.retain(|p: &PathBuf| writable.iter().any(|w| p.starts_with(w)));
        protected.sort();
        protected.dedup();
        for root in &roots {
            if let Some(p) = protected.iter().find(|p| root.starts_with(p)) {
                return Err(PolicyError::RootInsideProtected { root: root.clone(), protected: p.clone() });
            }
        }
    }

    Ok(ExecutionPolicy {
        mode: req.mode,
        workspace: ws,
        writable_roots: if writes { roots } else { Vec::new() },
        protected,
        network: req.network,
        best_effort: req.best_effort,
    })
}

/// Add `path` (and, for a gitdir pointer file, its targets) to `out` if it exists.
fn collect_protected(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), PolicyError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(matches!(resolve_policy(&req(Mode::WorkspaceWrite), Path::new("/")), Err(PolicyError::TooWide { .. })));
        assert!(resolve_policy(&req(Mode::ReadOnly), Path::new("/")).is_ok());
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
}
