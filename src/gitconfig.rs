//! The run's private global git config.
//!
//! In the confined modes the home directory is read-only, so `git config --global`
//! fails (`could not lock config file ~/.gitconfig`), and it must: a command that could
//! write the real `~/.gitconfig` would plant `core.hooksPath`, `core.fsmonitor` or an
//! alias that runs its code on the host the next time anyone uses git there. Instead a
//! confined run's `GIT_CONFIG_GLOBAL` names `.gitconfig` in its private temp dir
//! (discarded with it; see `runner::PlanInput::git_config`), which includes the global
//! configuration git would have read, so `user.name` and friends still answer.
//!
//! 1. **Whether** ([`wanted`], pure): always in a confined mode, unless the caller
//!    already pointed `GIT_CONFIG_GLOBAL` at an absolute path inside a writable root
//!    (a usable location of the caller's choosing is kept, as with the private caches).
//! 2. **From where** ([`sources`], pure): with `GIT_CONFIG_GLOBAL` set, only that file
//!    (git reads nothing else then); otherwise
//!    `${XDG_CONFIG_HOME:-$HOME/.config}/git/config`, then `$HOME/.gitconfig`, in the
//!    order git reads them.
//! 3. **The seed** ([`seed`], pure): an `[include]` of each source. cordon reads none
//!    of them: git does, inside the sandbox, with the command's own view and
//!    credentials. (A copy made by cordon would be a confused deputy: as root it reads
//!    files the capability-less command cannot, and it sees the host's `/tmp` and
//!    `~/.cache` that the command's private ones hide.) A missing source is skipped by
//!    git; a relative include inside a source still resolves against that source's
//!    own directory.
//! 4. **Only what the command may read** ([`refused_to_command`], the one I/O here: an
//!    access check, no read): git skips its own global files when it may not read them
//!    (`EACCES`), but dies on an `[include]` it may not read. A source the command
//!    would be refused (a `$HOME` the run's user cannot search: `HOME` kept across
//!    `sudo -u` or `setpriv`, a container's foreign home) is left out of the seed, so
//!    the confined git reads what the same user's unconfined git reads. The check runs
//!    with the command's permissions: as root, without root's permission overrides
//!    (the command has no capabilities).
//!
//! What it does not do: answer `git config --global --get` from the real files (git
//! does not follow includes when asked for one file; `git config --get`, commits and
//! every other reader do). Changes made during the run go to the private file and are
//! discarded with it; the real files are never written.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

fn var<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a Path> {
    env.iter().find(|(k, _)| k == name).map(|(_, v)| Path::new(v)).filter(|v| !v.as_os_str().is_empty())
}

/// Whether a confined run gets a private global git config (pure): yes, unless the
/// caller's `GIT_CONFIG_GLOBAL` is an absolute path (without `..`) inside one of the
/// `writable` roots.
pub fn wanted(env: &[(OsString, OsString)], writable: &[PathBuf]) -> bool {
    var(env, "GIT_CONFIG_GLOBAL").is_none_or(|p| !crate::env::in_writable_root(p.as_os_str(), writable))
}

/// The files git reads as its global configuration for `env`, in order (pure).
/// Relative locations are left out: they would resolve against cordon's directory.
pub fn sources(env: &[(OsString, OsString)]) -> Vec<PathBuf> {
    if let Some(p) = var(env, "GIT_CONFIG_GLOBAL") {
        return [p.to_path_buf()].into_iter().filter(|p| p.is_absolute()).collect();
    }
    let home = var(env, "HOME");
    let xdg = match var(env, "XDG_CONFIG_HOME") {
        Some(x) => Some(x.join("git/config")),
        None => home.map(|h| h.join(".config/git/config")),
    };
    xdg.into_iter().chain(home.map(|h| h.join(".gitconfig"))).filter(|p| p.is_absolute()).collect()
}

/// Whether the command would be refused reading `path` (`EACCES`: git then dies on an
/// `[include]` of it, where it skips the same file as its own global config). Checked
/// with `faccessat(R_OK, AT_EACCESS)` as the caller, with root's permission overrides
/// (`CAP_DAC_OVERRIDE`, `CAP_DAC_READ_SEARCH`, `CAP_FOWNER`) dropped from this thread
/// for the check and put back after: the command has none. Nothing is read. Any
/// other answer (readable, missing: git skips a missing include) keeps the source.
pub fn refused_to_command(path: &Path) -> bool {
    #[cfg(target_os = "linux")]
    let dropped = cordon_stage::drop_thread_permission_overrides().is_ok();
    let r = nix::unistd::faccessat(
        nix::fcntl::AT_FDCWD,
        path,
        nix::unistd::AccessFlags::R_OK,
        nix::fcntl::AtFlags::AT_EACCESS,
    );
    #[cfg(target_os = "linux")]
    if dropped {
        let _ = cordon_stage::restore_thread_permission_overrides();
    }
    r == Err(nix::errno::Errno::EACCES)
}

/// The seed of the private config (pure): an `[include]` of each of `sources`, in
/// order (those a config value can name: no newline; quotes and backslashes escaped). Empty when
/// there is no source: git then creates the file on its first write.
pub fn seed(sources: &[PathBuf]) -> Vec<u8> {
    let paths: Vec<&[u8]> = sources.iter().map(|p| p.as_os_str().as_bytes()).filter(|b| !b.contains(&b'\n')).collect();
    if paths.is_empty() {
        return Vec::new();
    }
    let mut out =
        b"# cordon: the run's private global git config (the real files are included, never written)\n[include]\n"
            .to_vec();
    for bytes in paths {
        out.extend_from_slice(b"\tpath = \"");
        for &b in bytes {
            if b == b'"' || b == b'\\' {
                out.push(b'\\');
            }
            out.push(b);
        }
        out.extend_from_slice(b"\"\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    #[test]
    fn a_callers_location_in_a_writable_root_is_kept() {
        let ws = [PathBuf::from("/w/ws")];
        assert!(wanted(&env(&[("HOME", "/h")]), &ws));
        assert!(wanted(&env(&[("GIT_CONFIG_GLOBAL", "/h/.gitconfig")]), &ws), "the read-only home is replaced");
        assert!(wanted(&env(&[("GIT_CONFIG_GLOBAL", "/w/ws/../x")]), &ws), "`..` is never trusted");
        assert!(wanted(&env(&[("GIT_CONFIG_GLOBAL", "rel/cfg")]), &ws));
        assert!(!wanted(&env(&[("GIT_CONFIG_GLOBAL", "/w/ws/.gitconfig")]), &ws));
    }

    #[test]
    fn sources_follow_gits_order() {
        let p = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(sources(&env(&[("HOME", "/h")])), p(&["/h/.config/git/config", "/h/.gitconfig"]));
        assert_eq!(sources(&env(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "/x")])), p(&["/x/git/config", "/h/.gitconfig"]));
        assert_eq!(sources(&env(&[("HOME", "/h"), ("GIT_CONFIG_GLOBAL", "/g")])), p(&["/g"]));
        assert_eq!(sources(&env(&[("HOME", "rel")])), p(&[]));
        assert_eq!(sources(&env(&[])), p(&[]));
    }

    #[test]
    fn the_seed_includes_every_source_in_order_and_reads_none() {
        let text = |v: &[&str]| String::from_utf8(seed(&v.iter().map(PathBuf::from).collect::<Vec<_>>())).unwrap();
        assert_eq!(text(&[]), "", "no source: nothing to write");
        let t = text(&["/x/git/config", "/h/.gitconfig"]);
        let a = t.find("\tpath = \"/x/git/config\"\n").unwrap_or_else(|| panic!("{t}"));
        let b = t.find("\tpath = \"/h/.gitconfig\"\n").unwrap_or_else(|| panic!("{t}"));
        assert!(t.contains("[include]\n") && a < b, "git's order: {t}");
        // Paths are values in git's syntax: quotes and backslashes escaped, a newline
        // (which would start a new line of config) left out.
        let t = text(&["/h/a\"b\\c", "/h/new\nline", "/proc/self/environ"]);
        assert!(t.contains("\tpath = \"/h/a\\\"b\\\\c\"\n"), "{t}");
        assert!(!t.contains("new"), "{t}");
        // Never read here: even a procfs path is only named (git, in the sandbox, reads
        // the command's own).
        assert!(t.contains("\tpath = \"/proc/self/environ\"\n"), "{t}");
    }

    #[test]
    fn only_a_refused_source_is_left_out() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        let locked = dir.path().join("locked");
        std::fs::create_dir(&open).unwrap();
        std::fs::create_dir(&locked).unwrap();
        std::fs::write(open.join("config"), "x").unwrap();
        std::fs::write(locked.join("config"), "x").unwrap();
        // Not even its owner may search it (root too, once its overrides are dropped).
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        assert!(refused_to_command(&locked.join("config")));
        assert!(!refused_to_command(&open.join("config")));
        assert!(!refused_to_command(&open.join("missing")), "git skips a missing include itself");
        // The check gave root's overrides back: this thread reads the locked file.
        if nix::unistd::geteuid().is_root() {
            assert!(std::fs::read(locked.join("config")).is_ok());
        }
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
}
