//! Where host git looks besides the git directories themselves (see
//! [`super::GitGuard`]): for every repository the search found under a writable root,
//! and every repository enclosing one, the paths host git will read configuration,
//! hooks or programs from when the user runs it there later:
//!
//! 1. **registered submodule paths**: every gitlink of the repository's index (and of
//!    the shared index of a split one) and every `submodule.*.path` of the work tree's
//!    `.gitmodules`, checked out or not: `git status`, `git diff` and `git commit` in
//!    the superproject run git inside each populated one (its `core.fsmonitor`, its
//!    own submodules);
//! 2. **linked worktrees** (`worktrees/*/gitdir` of the common directory): git run
//!    there reads the `.git` it finds;
//! 3. **the work tree of a writable root that lies inside a repository**: git run in
//!    that directory finds a `.git` created there before the enclosing one;
//! 4. **paths the configuration names** (the repository's `config`, `config.worktree`,
//!    the host's system and global files, and every file they include, whatever the
//!    `includeIf` condition): included files, `core.hooksPath`, and programs named by
//!    a path (the first word of `core.fsmonitor`, `core.editor`, `core.pager`,
//!    `core.sshCommand`, `diff.external`, `gpg.program`, filters, textconv and merge
//!    drivers, `!` aliases, ...; relative ones against the work tree);
//! 5. **every path the index tracks as a file** in a work tree reaching into a
//!    writable root: host git's `commit -a` (`add -u`) silently records a tracked file
//!    that became a directory holding a repository as a submodule, and every `git
//!    status` after that runs git in it. Too many to watch one by one, these are
//!    checked when the run ends from the index itself ([`super::TreeSeal`]): such a
//!    `.git` that was not there before is moved aside.
//!
//! Each such path of 1 to 4 inside a writable root that exists (without a symlink inside the
//! root on the way) is kept read-only like a git directory; one that does not exist
//! becomes a [`super::Sentinel`]: it must still not exist when the run ends (else it
//! is moved aside, see [`super::seal`]). A configuration path that reaches into a
//! writable root through a symlink there is refused: the command could re-point it.
//!
//! What it does not do: parse shell command strings beyond their first word, or
//! protect a repository the command creates in a directory host git does not look at
//! from a protected repository (the command's own content).

use super::gitfmt::{index_gitlinks, parse_config, sane_repo_path, ConfigEntry, IndexError};
use super::{lexical_normalize, GitFileError, PolicyError, Sentinel, SentinelKind, TreeSeal};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A repository found by the search (or enclosing a writable root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Repo {
    /// Its git directory (for a linked worktree or a submodule, the per-tree one).
    pub git_dir: PathBuf,
    /// The directory holding its `.git` (none for a bare repository).
    pub work_tree: Option<PathBuf>,
}

/// What the analysis adds to a policy.
#[derive(Debug, Default)]
pub(super) struct Registered {
    /// Existing paths to keep read-only.
    pub protect: Vec<PathBuf>,
    /// Paths that must not exist when the run ends.
    pub sentinels: Vec<Sentinel>,
    /// Work trees reaching into a writable root, whose tracked files must not become
    /// repositories (checked when the run ends: [`super::seal`]).
    pub trees: Vec<TreeSeal>,
}

/// Include depth git follows (its own bound).
const MAX_INCLUDE_DEPTH: usize = 10;

/// Keys whose value is a command whose first word may be a program path, by
/// section and key (any subsection: `filter.<driver>.clean`, `gpg.ssh.program`,
/// `credential.<url>.helper`); every key of `alias` (when it starts with `!`) and
/// `pager`.
const PROGRAM_KEYS: [(&str, &str); 18] = [
    ("core", "fsmonitor"),
    ("core", "editor"),
    ("core", "pager"),
    ("core", "sshcommand"),
    ("core", "askpass"),
    ("sequence", "editor"),
    ("diff", "external"),
    ("diff", "textconv"),
    ("diff", "command"),
    ("gpg", "program"),
    ("credential", "helper"),
    ("filter", "clean"),
    ("filter", "smudge"),
    ("filter", "process"),
    ("merge", "driver"),
    ("interactive", "difffilter"),
    ("difftool", "cmd"),
    ("mergetool", "cmd"),
];

/// Whether `section.key = value` names a program host git may run.
fn names_program(section: &str, key: &str, value: &[u8]) -> bool {
    match section {
        "alias" => value.starts_with(b"!"),
        "pager" => true,
        "core" if key == "fsmonitor" => !matches!(value.to_ascii_lowercase().as_slice(), b"true" | b"false"),
        _ => PROGRAM_KEYS.iter().any(|(s, k)| *s == section && *k == key),
    }
}

/// Values read from a chain of config files.
#[derive(Debug, Default)]
struct ConfigFacts {
    /// Every file read (the first, then each include), existing or not.
    files: Vec<PathBuf>,
    worktrees: Vec<Vec<u8>>,
    hooks_paths: Vec<Vec<u8>>,
    programs: Vec<Vec<u8>>,
    sha256: bool,
}

/// Read `file` and what it includes into `facts` (depth-bounded, each file once).
fn read_config(file: &Path, home: Option<&Path>, facts: &mut ConfigFacts, depth: usize) {
    if depth > MAX_INCLUDE_DEPTH || facts.files.contains(&file.to_path_buf()) {
        return;
    }
    facts.files.push(file.to_path_buf());
    let Ok(text) = std::fs::read(file) else { return };
    let dir = file.parent().unwrap_or(Path::new("/"));
    for ConfigEntry { section, key, value, .. } in parse_config(&text) {
        let Some(value) = value else { continue };
        match (section.as_str(), key.as_str()) {
            ("include", "path") | ("includeif", "path") => {
                if let Some(p) = expand(&value, dir, home) {
                    read_config(&p, home, facts, depth + 1);
                }
            }
            ("core", "worktree") => facts.worktrees.push(value),
            ("core", "hookspath") => facts.hooks_paths.push(value),
            ("extensions", "objectformat") => facts.sha256 = value.eq_ignore_ascii_case(b"sha256"),
            (s, k) => {
                if names_program(s, k, &value) {
                    facts.programs.push(value);
                }
            }
        }
    }
}

/// A config path value made absolute: `~/` against `home`, relative against `base`
/// (git's `interpolate_path`; `~user/` and `%(prefix)/` are not expanded and skipped).
fn expand(value: &[u8], base: &Path, home: Option<&Path>) -> Option<PathBuf> {
    if value.is_empty() || value.contains(&0) {
        return None;
    }
    if let Some(rest) = value.strip_prefix(b"~/") {
        return Some(lexical_normalize(home?, Path::new(OsStr::from_bytes(rest))));
    }
    if value.starts_with(b"~") || value.starts_with(b"%(") {
        return None;
    }
    Some(lexical_normalize(base, Path::new(OsStr::from_bytes(value))))
}

/// The program path a command value names, if its first word is a path (contains a
/// `/`): a leading `!` (aliases) dropped, a quoted first word unquoted.
fn program_word(value: &[u8]) -> Option<&[u8]> {
    let v = value.strip_prefix(b"!").unwrap_or(value);
    let v = v.trim_ascii_start();
    let word = match v.first() {
        Some(q @ (b'"' | b'\'')) => v[1..].split(|c| c == q).next()?,
        _ => v.split(|c| c.is_ascii_whitespace()).next()?,
    };
    word.contains(&b'/').then_some(word)
}

/// How a path inside a writable root looks, walked from that root without following
/// symlinks.
enum Walk {
    /// It exists as a directory.
    Dir,
    /// It exists as a regular file.
    File,
    /// It exists as something else (a FIFO, a socket, a device node).
    Special,
    /// A component (or the path itself) is a symlink.
    Link,
    /// A component is missing.
    Missing,
}

fn walk(root: &Path, path: &Path) -> Walk {
    let Ok(rel) = path.strip_prefix(root) else { return Walk::Missing };
    let mut cur = root.to_path_buf();
    let mut comps = rel.components().peekable();
    while let Some(c) = comps.next() {
        cur.push(c);
        let Ok(m) = std::fs::symlink_metadata(&cur) else { return Walk::Missing };
        let t = m.file_type();
        if t.is_symlink() {
            return Walk::Link;
        }
        if comps.peek().is_none() {
            return if t.is_dir() {
                Walk::Dir
            } else if t.is_file() {
                Walk::File
            } else {
                Walk::Special
            };
        }
        if !t.is_dir() {
            return Walk::Missing;
        }
    }
    Walk::Dir
}

/// The analysis of one call (see the module docs): `repos` found by the search,
/// `writable` the writable roots (outermost first does not matter), `protected` what
/// the search protects already.
pub(super) fn registered(
    repos: &[Repo],
    writable: &[&Path],
    protected: &[PathBuf],
    host: &HostGit,
) -> Result<Registered, PolicyError> {
    let protected: std::collections::HashSet<&Path> = protected.iter().map(PathBuf::as_path).collect();
    let mut a = Analysis { writable, protected, out: Registered::default() };
    let mut all: Vec<Repo> = repos.to_vec();
    // Repositories enclosing a writable root (their git directory lies outside it).
    for w in writable {
        if let Some(r) = enclosing_repo(w) {
            if w.join(".git").symlink_metadata().is_err() {
                a.sentinel(w.join(".git"), SentinelKind::Discovery, false);
            }
            if !all.contains(&r) {
                all.push(r);
            }
        }
    }
    // The host's own configuration: includes and absolute paths once, relative ones
    // per work tree.
    let mut global = ConfigFacts::default();
    for f in &host.files {
        read_config(f, host.home.as_deref(), &mut global, 0);
    }
    a.config_files(&global.files)?;
    let mut commons: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    for repo in &all {
        let common = match std::fs::read(repo.git_dir.join("commondir")) {
            Ok(c) => lexical_normalize(&repo.git_dir, Path::new(OsStr::from_bytes(c.trim_ascii()))),
            Err(_) => repo.git_dir.clone(),
        };
        let mut facts = ConfigFacts::default();
        read_config(&common.join("config"), host.home.as_deref(), &mut facts, 0);
        read_config(&repo.git_dir.join("config.worktree"), host.home.as_deref(), &mut facts, 0);
        a.config_files(&facts.files)?;
        let mut trees: Vec<PathBuf> = repo.work_tree.iter().cloned().collect();
        for w in &facts.worktrees {
            if let Some(t) = expand(w, &repo.git_dir, host.home.as_deref()) {
                trees.push(t);
            }
        }
        // Hooks and programs run from the top of the work tree (the git directory of
        // a bare repository).
        let top = trees.first().cloned().unwrap_or_else(|| repo.git_dir.clone());
        for v in facts.hooks_paths.iter().chain(global.hooks_paths.iter()) {
            if let Some(p) = expand(v, &top, host.home.as_deref()) {
                a.config_path(p, SentinelKind::Hooks, "core.hooksPath")?;
            }
        }
        for v in facts.programs.iter().chain(global.programs.iter()) {
            if let Some(p) = program_word(v).and_then(|w| expand(w, &top, host.home.as_deref())) {
                a.config_path(p, SentinelKind::Program, "a program git's configuration names")?;
            }
        }
        let hash_len = if facts.sha256 { 32 } else { 20 };
        let gitlinks = read_gitlinks(&repo.git_dir, hash_len)?;
        for tree in &trees {
            // 5. A tracked file the run turns into a repository: `git commit -a` records
            // it as a submodule (see `super::tracked`).
            if writable.iter().any(|w| tree.starts_with(w) || w.starts_with(tree)) {
                a.out.trees.push(TreeSeal { git_dir: repo.git_dir.clone(), work_tree: tree.clone(), hash_len });
            }
            for g in &gitlinks {
                a.submodule(tree.join(OsStr::from_bytes(g)), true);
            }
            for p in gitmodules_paths(&tree.join(".gitmodules")) {
                a.submodule(tree.join(OsStr::from_bytes(&p)), false);
            }
        }
        if !commons.contains(&common) {
            for wt in linked_worktrees(&common) {
                if wt.symlink_metadata().is_err() {
                    a.sentinel(wt, SentinelKind::Worktree, false);
                }
            }
            commons.insert(common);
        }
    }
    let mut out = a.out;
    out.protect.sort();
    out.protect.dedup();
    out.sentinels.sort_by(|x, y| x.path.cmp(&y.path));
    out.sentinels.dedup_by(|x, y| x.path == y.path);
    out.trees.sort_by(|x, y| (&x.git_dir, &x.work_tree).cmp(&(&y.git_dir, &y.work_tree)));
    out.trees.dedup();
    Ok(out)
}

/// Every path the configuration of git directory `git_dir` names (included files,
/// `core.hooksPath`, programs named by path; relative ones against `top`, its work
/// tree or itself), for a grant of `git_dir` to keep the ones inside it read-only.
pub(super) fn configured_paths(git_dir: &Path, top: &Path) -> Vec<PathBuf> {
    let host = HostGit::detect();
    let home = host.home.as_deref();
    let mut facts = ConfigFacts::default();
    read_config(&git_dir.join("config"), home, &mut facts, 0);
    read_config(&git_dir.join("config.worktree"), home, &mut facts, 0);
    let mut out = facts.files.clone();
    out.extend(facts.hooks_paths.iter().filter_map(|v| expand(v, top, home)));
    out.extend(facts.programs.iter().filter_map(|v| program_word(v).and_then(|w| expand(w, top, home))));
    out
}

/// The host git's own configuration files (system and global), for [`registered`].
#[derive(Debug, Clone, Default)]
pub(crate) struct HostGit {
    /// The files host git reads before a repository's own (missing ones are skipped).
    pub files: Vec<PathBuf>,
    /// `$HOME`, for `~/` in paths.
    pub home: Option<PathBuf>,
}

impl HostGit {
    /// From cordon's own environment (the user's host git runs with the same one):
    /// `GIT_CONFIG_SYSTEM` or `/etc/gitconfig` unless `GIT_CONFIG_NOSYSTEM`, then the
    /// global files as [`crate::gitconfig::sources`] finds them.
    pub fn detect() -> HostGit {
        let env: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os().collect();
        let var = |n: &str| env.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()).filter(|v| !v.is_empty());
        let mut files = Vec::new();
        let nosystem = var("GIT_CONFIG_NOSYSTEM").is_some_and(|v| !matches!(v.as_bytes(), b"0" | b"false"));
        if !nosystem {
            files.push(var("GIT_CONFIG_SYSTEM").map(PathBuf::from).unwrap_or_else(|| "/etc/gitconfig".into()));
        }
        files.extend(crate::gitconfig::sources(&env));
        HostGit { files, home: var("HOME").map(PathBuf::from) }
    }
}

struct Analysis<'a> {
    writable: &'a [&'a Path],
    protected: std::collections::HashSet<&'a Path>,
    out: Registered,
}

impl Analysis<'_> {
    /// The writable root `p` lies in (the outermost), unless `p` is already protected.
    fn root_of(&self, p: &Path) -> Option<PathBuf> {
        if p.ancestors().any(|a| self.protected.contains(a)) {
            return None;
        }
        let mut roots: Vec<&&Path> = self.writable.iter().filter(|w| p.starts_with(w) && p != **w).collect();
        roots.sort_by_key(|w| w.components().count());
        roots.first().map(|w| w.to_path_buf())
    }

    fn sentinel(&mut self, path: PathBuf, kind: SentinelKind, follows_links: bool) {
        if let Some(root) = self.root_of(&path) {
            self.out.sentinels.push(Sentinel { path, root, follows_links, kind });
        }
    }

    /// A registered submodule path: read-only when it exists without a `.git` (only
    /// for an index gitlink: a `.gitmodules` entry alone makes git look nowhere until
    /// one exists), a sentinel on its `.git` otherwise.
    fn submodule(&mut self, path: PathBuf, gitlink: bool) {
        let Some(root) = self.root_of(&path) else { return };
        match walk(&root, &path) {
            // Found (and protected, or refused as a symlink) by the search.
            Walk::Dir if path.join(".git").symlink_metadata().is_ok() => {}
            Walk::Dir | Walk::File if gitlink => self.out.protect.push(path),
            _ => self.sentinel(path.join(".git"), SentinelKind::Submodule, false),
        }
    }

    /// Every config file read: kept read-only (or a sentinel) when in a writable root.
    fn config_files(&mut self, files: &[PathBuf]) -> Result<(), PolicyError> {
        for f in files {
            self.config_path(f.clone(), SentinelKind::Config, "an included configuration file")?;
        }
        Ok(())
    }

    /// A path the configuration names: read-only when it exists, a sentinel when not,
    /// refused when it reaches into a writable root through a symlink there.
    fn config_path(&mut self, p: PathBuf, kind: SentinelKind, what: &'static str) -> Result<(), PolicyError> {
        // Inside a protected path (a repository's own `config`): read-only already (and
        // a missing one cannot be created there), unless it is a symlink out of it.
        if p.ancestors().skip(1).any(|a| self.protected.contains(a))
            && !std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink())
        {
            return Ok(());
        }
        // Resolve the existing part physically, as git's open() will.
        let mut existing = p.clone();
        let mut rest = Vec::new();
        while existing.symlink_metadata().is_err() {
            let Some(name) = existing.file_name() else { break };
            rest.push(name.to_os_string());
            existing.pop();
        }
        let mut real = existing.canonicalize().unwrap_or(existing);
        rest.iter().rev().for_each(|n| real.push(n));
        let lexical_root = self.writable.iter().any(|w| p.starts_with(w));
        if lexical_root && real != p {
            return Err(PolicyError::GitConfigLink { path: p, resolved: real, what });
        }
        let Some(root) = self.root_of(&real) else { return Ok(()) };
        match walk(&root, &real) {
            Walk::Dir | Walk::File => self.out.protect.push(real),
            Walk::Missing => self.sentinel(real, kind, true),
            Walk::Link | Walk::Special => {
                return Err(PolicyError::GitConfigLink { path: p, resolved: real, what });
            }
        }
        Ok(())
    }
}

/// The repository whose work tree holds `dir` (canonical), found the way git's
/// discovery would from there: the nearest ancestor (not `dir` itself) with a `.git`.
fn enclosing_repo(dir: &Path) -> Option<Repo> {
    for a in dir.ancestors().skip(1) {
        let dot = a.join(".git");
        let Ok(m) = dot.symlink_metadata() else { continue };
        let git_dir = if m.is_file() {
            let text = std::fs::read(&dot).ok()?;
            let line = text.split(|b| *b == b'\n').find_map(|l| l.strip_prefix(b"gitdir:"))?;
            lexical_normalize(a, Path::new(OsStr::from_bytes(line.trim_ascii())))
        } else {
            dot.canonicalize().ok()?
        };
        return Some(Repo { git_dir, work_tree: Some(a.to_path_buf()) });
    }
    None
}

/// An index file's identity for [`GITLINK_CACHE`]: device, inode, size, and the
/// modification and change times in nanoseconds. git replaces its index by renaming a
/// new file over it (a new inode), and any other write changes the times.
type IndexKey = (u64, u64, u64, i128, i128);

/// Gitlinks of indexes read by this process, by path, with the identity they were read
/// at (a long-lived `cordon serve`/`mcp` resolves the same workspace twice per request;
/// a repository's index can be megabytes). Bounded: cleared past
/// [`GITLINK_CACHE_ENTRIES`].
static GITLINK_CACHE: std::sync::Mutex<Option<GitlinkCache>> = std::sync::Mutex::new(None);

/// See [`GITLINK_CACHE`].
type GitlinkCache = std::collections::HashMap<PathBuf, (IndexKey, Vec<Vec<u8>>)>;

/// Indexes [`GITLINK_CACHE`] keeps.
const GITLINK_CACHE_ENTRIES: usize = 256;

fn index_key(path: &Path) -> Option<IndexKey> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    Some((m.dev(), m.ino(), m.size(), ns(m.mtime(), m.mtime_nsec()), ns(m.ctime(), m.ctime_nsec())))
}

/// Gitlinks of the index in `git_dir` (and of its shared index). A missing or
/// unreadable index (another user's repository) registers nothing: host git, as the
/// same user, reads nothing there either. Served from [`GITLINK_CACHE`] while both
/// files are unchanged.
fn read_gitlinks(git_dir: &Path, hash_len: usize) -> Result<Vec<Vec<u8>>, PolicyError> {
    let path = git_dir.join("index");
    let Some(key) = index_key(&path) else { return Ok(Vec::new()) };
    let cached = GITLINK_CACHE.lock().ok().and_then(|c| c.as_ref()?.get(&path).cloned());
    if let Some((k, links)) = cached {
        // The shared index of a split index is named by a hash of its content and never
        // rewritten, so the main index's identity covers both.
        if k == key {
            return Ok(links);
        }
    }
    let links = read_gitlinks_uncached(git_dir, hash_len)?;
    // Only when nothing changed while it was read.
    if index_key(&path) == Some(key) {
        if let Ok(mut c) = GITLINK_CACHE.lock() {
            let map = c.get_or_insert_with(std::collections::HashMap::new);
            if map.len() >= GITLINK_CACHE_ENTRIES {
                map.clear();
            }
            map.insert(path, (key, links.clone()));
        }
    }
    Ok(links)
}

fn read_gitlinks_uncached(git_dir: &Path, hash_len: usize) -> Result<Vec<Vec<u8>>, PolicyError> {
    let mut out = Vec::new();
    let path = git_dir.join("index");
    let Some(bytes) = read_optional(&path)? else { return Ok(out) };
    let parsed = index_gitlinks(&bytes, hash_len).map_err(|e| bad_index(&path, e))?;
    out.extend(parsed.gitlinks);
    if let Some(hex) = parsed.shared {
        let shared = git_dir.join(format!("sharedindex.{hex}"));
        if let Some(bytes) = read_optional(&shared)? {
            out.extend(index_gitlinks(&bytes, hash_len).map_err(|e| bad_index(&shared, e))?.gitlinks);
        }
    }
    out.retain(|p| sane_repo_path(p));
    Ok(out)
}

fn bad_index(path: &Path, e: IndexError) -> PolicyError {
    PolicyError::GitFile { path: path.to_path_buf(), why: GitFileError::Index(e) }
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, PolicyError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR | libc::EACCES)) => Ok(None),
        Err(e) => Err(PolicyError::GitFile { path: path.to_path_buf(), why: GitFileError::Io(e) }),
    }
}

/// `submodule.*.path` values of a `.gitmodules` file that git would accept.
fn gitmodules_paths(file: &Path) -> Vec<Vec<u8>> {
    let Ok(text) = std::fs::read(file) else { return Vec::new() };
    parse_config(&text)
        .into_iter()
        .filter(|e| e.section == "submodule" && e.subsection.is_some() && e.key == "path")
        .filter_map(|e| e.value)
        .filter(|p| sane_repo_path(p))
        .collect()
}

/// The `.git` paths of the linked worktrees registered in a common git directory.
fn linked_worktrees(common: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(common.join("worktrees")) else { return Vec::new() };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let Ok(text) = std::fs::read(e.path().join("gitdir")) else { continue };
        let line = text.split(|b| *b == b'\n').next().unwrap_or_default().trim_ascii();
        if line.is_empty() || line.contains(&0) {
            continue;
        }
        out.push(lexical_normalize(&e.path(), Path::new(OsStr::from_bytes(line))));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_words() {
        assert_eq!(program_word(b"./tools/watch --x"), Some(&b"./tools/watch"[..]));
        assert_eq!(program_word(b"!\"/a b/c\" x"), Some(&b"/a b/c"[..]));
        assert_eq!(program_word(b"  !sh -c 'x/y'"), None);
        assert_eq!(program_word(b"vim"), None);
    }

    #[test]
    fn expand_paths() {
        let home = Path::new("/home/u");
        assert_eq!(expand(b"~/x", Path::new("/r"), Some(home)), Some("/home/u/x".into()));
        assert_eq!(expand(b"../x", Path::new("/r/.git"), Some(home)), Some("/r/x".into()));
        assert_eq!(expand(b"/abs", Path::new("/r"), None), Some("/abs".into()));
        assert_eq!(expand(b"~bob/x", Path::new("/r"), Some(home)), None);
        assert_eq!(expand(b"~/x", Path::new("/r"), None), None);
    }

    use crate::mode::Mode;
    use crate::policy::{resolve_policy, PolicyRequest};
    use std::process::Command;

    /// Run git in `dir` with a fixed identity and no host configuration.
    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .args(["-c", "protocol.file.allow=always", "-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn have_git() -> bool {
        Command::new("git").arg("--version").output().is_ok_and(|o| o.status.success())
    }

    /// The index parser agrees with git on every index format git writes.
    #[test]
    fn index_gitlinks_match_git_for_every_format() {
        if !have_git() {
            eprintln!("SKIP index_gitlinks_match_git_for_every_format: no git");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        for format in ["sha1", "sha256"] {
            let repo = base.join(format);
            std::fs::create_dir_all(&repo).unwrap();
            git(&repo, &["init", "-q", &format!("--object-format={format}")]);
            std::fs::write(repo.join("a"), "a").unwrap();
            let oid = if format == "sha1" { "1".repeat(40) } else { "1".repeat(64) };
            for p in ["lib/one", "lib/two", "z/deep/three"] {
                git(&repo, &["update-index", "--add", "--cacheinfo", &format!("160000,{oid},{p}")]);
            }
            git(&repo, &["add", "a"]);
            let hash = if format == "sha1" { 20 } else { 32 };
            let want: Vec<Vec<u8>> =
                ["lib/one", "lib/two", "z/deep/three"].iter().map(|p| p.as_bytes().to_vec()).collect();
            for version in ["2", "3", "4"] {
                git(&repo, &["update-index", "--index-version", version]);
                assert_eq!(read_gitlinks(&repo.join(".git"), hash).unwrap(), want, "{format} v{version}");
            }
            git(&repo, &["update-index", "--split-index"]);
            git(&repo, &["update-index", "--add", "--cacheinfo", &format!("160000,{oid},later")]);
            let mut got = read_gitlinks(&repo.join(".git"), hash).unwrap();
            got.sort();
            got.dedup();
            let mut want = want.clone();
            want.push(b"later".to_vec());
            want.sort();
            assert_eq!(got, want, "{format} split");
        }
    }

    fn sentinels(p: &crate::policy::ExecutionPolicy) -> Vec<PathBuf> {
        p.git.sentinels.iter().map(|s| s.path.clone()).collect()
    }

    #[test]
    fn protects_where_host_git_looks_from_a_superproject() {
        if !have_git() {
            eprintln!("SKIP protects_where_host_git_looks_from_a_superproject: no git");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let src = base.join("src");
        std::fs::create_dir_all(&src).unwrap();
        git(&src, &["init", "-q"]);
        git(&src, &["commit", "-q", "--allow-empty", "-m", "s"]);
        let sup = base.join("sup");
        std::fs::create_dir_all(&sup).unwrap();
        git(&sup, &["init", "-q"]);
        for p in ["mods/in", "mods/out", "gone"] {
            git(&sup, &["submodule", "add", "-q", src.to_str().unwrap(), p]);
        }
        git(&sup, &["commit", "-q", "-m", "subs"]);
        let ws = base.join("ws");
        git(&base, &["clone", "-q", sup.to_str().unwrap(), "ws"]);
        git(&ws, &["submodule", "update", "-q", "--init", "mods/in"]);
        std::fs::remove_dir(ws.join("gone")).unwrap();
        // A gitlink without a .gitmodules entry, and a linked worktree inside and one gone.
        git(&ws, &["update-index", "--add", "--cacheinfo", &format!("160000,{},bare-link", "2".repeat(40))]);
        git(&ws, &["worktree", "add", "-q", "wt"]);
        git(&ws, &["worktree", "add", "-q", "wt-gone", "-b", "x"]);
        std::fs::remove_dir_all(ws.join("wt-gone")).unwrap();
        // Configuration naming paths in the workspace.
        std::fs::write(ws.join("shared.inc"), "[core]\n\teditor = ./tools/ed\n").unwrap();
        git(&ws, &["config", "include.path", "../shared.inc"]);
        git(&ws, &["config", "includeIf.onbranch:nope.path", "../missing.inc"]);
        std::fs::create_dir_all(ws.join(".githooks")).unwrap();
        git(&ws, &["config", "core.hooksPath", ".githooks"]);

        let p = resolve_policy(&PolicyRequest { mode: Mode::WorkspaceWrite, ..Default::default() }, &ws).unwrap();
        for want in [".git", "mods/in/.git", "mods/out", ".githooks", "shared.inc", "wt/.git"] {
            assert!(p.protected.contains(&ws.join(want)), "{want} not in {:?}", p.protected);
        }
        // Missing paths are sentinels.
        let s = sentinels(&p);
        for want in ["gone/.git", "bare-link/.git", "wt-gone/.git", "missing.inc", "tools/ed"] {
            assert!(s.contains(&ws.join(want)), "{want} not in {s:?}");
        }
        // Nothing that git would not look at.
        assert!(!p.protected.contains(&ws.join("mods")), "{:?}", p.protected);

        // A writable root inside the superproject: git run there finds a new `.git`
        // first, and the superproject's registered paths inside it still count.
        let p = resolve_policy(&PolicyRequest { mode: Mode::WorkspaceWrite, ..Default::default() }, &ws.join("mods"))
            .unwrap();
        assert!(sentinels(&p).contains(&ws.join("mods/.git")), "{:?}", sentinels(&p));
        assert!(p.protected.contains(&ws.join("mods/out")), "{:?}", p.protected);
    }

    #[test]
    fn config_paths_through_workspace_symlinks_are_refused() {
        if !have_git() {
            eprintln!("SKIP config_paths_through_workspace_symlinks_are_refused: no git");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir_all(ws.join("real")).unwrap();
        git(&ws, &["init", "-q"]);
        std::os::unix::fs::symlink(ws.join("real"), ws.join("hooks-link")).unwrap();
        git(&ws, &["config", "core.hooksPath", "hooks-link"]);
        let err = resolve_policy(&PolicyRequest::default(), &ws).unwrap_err();
        assert!(matches!(err, PolicyError::GitConfigLink { .. }), "{err}");
    }
}
