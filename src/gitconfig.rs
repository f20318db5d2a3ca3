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
}
