//! The run's private global git config.
//!
//! In the confined modes the home directory is read-only, so `git config --global`
//! fails (`could not lock config file ~/.gitconfig`), and it must: a command that could
//! write the real `~/.gitconfig` would plant `core.hooksPath`, `core.fsmonitor` or an
//! alias that runs its code on the host the next time anyone uses git there. Instead a
//! confined run's `GIT_CONFIG_GLOBAL` names `.gitconfig` in its private temp dir
//! (discarded with it; see `runner::PlanInput::git_config`), seeded with a copy of the
//! global configuration git would have read, so `user.name` and friends still answer.
//!
//! 1. **Whether** ([`wanted`], pure): always in a confined mode, unless the caller
//!    already pointed `GIT_CONFIG_GLOBAL` at an absolute path inside a writable root
//!    (a usable location of the caller's choosing is kept, as with the private caches).
//! 2. **From where** ([`sources`], pure): with `GIT_CONFIG_GLOBAL` set, only that file
//!    (git reads nothing else then); otherwise
//!    `${XDG_CONFIG_HOME:-$HOME/.config}/git/config`, then `$HOME/.gitconfig`, in the
//!    order git reads them.
//! 3. **The seed** ([`seed`], two `open`s when neither file exists): the regular files
//!    among the sources, concatenated, read from the host as the caller. Above
//!    [`MAX_SEED`] bytes in all, the seed is an `[include]` of each source instead of a
//!    copy (reads work as before; `git config --global --get` does not follow includes,
//!    so it no longer answers from them).
//!
//! What it does not do: rewrite what it copies. An `[include] path = relative` in a
//! copied file resolves against the private temp dir, not against the file's own
//! directory as before (absolute and `~/` paths behave as before). Changes made during
//! the run are discarded with it; the real files are never written.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The most a seed copies (all sources together); above it the seed includes them.
/// Real global configs are a few KiB; the bound keeps a huge or growing file from
/// costing every run.
pub const MAX_SEED: u64 = 1 << 20;

fn var<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a Path> {
    env.iter().find(|(k, _)| k == name).map(|(_, v)| Path::new(v)).filter(|v| !v.as_os_str().is_empty())
}

/// Whether a confined run gets a private global git config (pure): yes, unless the
/// caller's `GIT_CONFIG_GLOBAL` is an absolute path (without `..`) inside one of the
/// `writable` roots.
pub fn wanted(env: &[(OsString, OsString)], writable: &[PathBuf]) -> bool {
    let Some(p) = var(env, "GIT_CONFIG_GLOBAL") else { return true };
    let usable = p.is_absolute()
        && !p.components().any(|c| c == Component::ParentDir)
        && writable.iter().any(|w| p.starts_with(w));
    !usable
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

/// The seed of the private config: the regular files among `sources`, concatenated
/// (each ending in a newline); over [`MAX_SEED`] in all, an `[include]` of each
/// instead. Empty when none exists (or none can be read): git then creates the file
/// on its first write.
pub fn seed(sources: &[PathBuf]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut present = Vec::new();
    let mut copied = true;
    for path in sources {
        let Some(file) = open_source(path) else { continue };
        let Ok(meta) = file.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        present.push(path);
        if !copied {
            continue;
        }
        let room = MAX_SEED.saturating_sub(out.len() as u64);
        let start = out.len();
        if meta.len() > room || file.take(room + 1).read_to_end(&mut out).is_err() || (out.len() - start) as u64 > room
        {
            copied = false;
            continue;
        }
        if out.len() > start && !out.ends_with(b"\n") {
            out.push(b'\n');
        }
    }
    if copied {
        return out;
    }
    include_all(&present)
}

/// Open a source for reading: non-blocking (a FIFO planted at the path cannot stall
/// the run), and on Linux never through a magic link (`/proc/self/fd/N` names files
/// cordon holds open: other runs' output) nor on procfs or sysfs (`/proc/self/environ`
/// is cordon's own environment, credentials the scrub kept from the command
/// included). The paths come from the request's environment, so they are the
/// caller's choice, and cordon reads them with its own view of the system.
fn open_source(path: &Path) -> Option<std::fs::File> {
    #[cfg(target_os = "linux")]
    {
        use nix::sys::statfs::{fstatfs, PROC_SUPER_MAGIC, SYSFS_MAGIC};
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
        let file = std::fs::File::from(cordon_stage::open_read_no_magiclinks(libc::AT_FDCWD, &c).ok()?);
        let fs = fstatfs(&file).ok()?.filesystem_type();
        (fs != PROC_SUPER_MAGIC && fs != SYSFS_MAGIC).then_some(file)
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).ok()
    }
}

/// An `[include]` of each of `paths` (those a config value can name: no newline).
fn include_all(paths: &[&PathBuf]) -> Vec<u8> {
    let mut out =
        b"# cordon: the global git config is over 1 MiB, so it is included rather than copied\n[include]\n".to_vec();
    for p in paths {
        let bytes = p.as_os_str().as_bytes();
        if bytes.contains(&b'\n') {
            continue;
        }
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
    fn the_seed_copies_in_order_and_includes_when_too_large() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, missing) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("none"));
        std::fs::write(&a, "[user]\n\tname = A").unwrap();
        std::fs::write(&b, "[core]\n\teditor = vi\n").unwrap();
        assert_eq!(seed(&[a.clone(), missing.clone(), b.clone()]), b"[user]\n\tname = A\n[core]\n\teditor = vi\n");
        assert!(seed(std::slice::from_ref(&missing)).is_empty(), "nothing to copy: nothing to write");
        // A directory or a FIFO is not read; nor is cordon's own view of itself
        // (procfs, or a magic link to a file cordon holds open).
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(seed(&[dir.path().to_path_buf(), fifo]).is_empty());
        #[cfg(target_os = "linux")]
        {
            let held = std::fs::File::open(&b).unwrap();
            let magic = PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&held)));
            assert!(seed(&[PathBuf::from("/proc/self/environ"), magic]).is_empty());
            let link = dir.path().join("link");
            std::os::unix::fs::symlink(&b, &link).unwrap();
            assert!(!seed(&[link]).is_empty(), "an ordinary symlink (a dotfile manager's) is followed");
        }
        // Over the bound: every present source is included instead.
        std::fs::write(&b, vec![b'#'; MAX_SEED as usize]).unwrap();
        let text = String::from_utf8(seed(&[a.clone(), missing, b.clone()])).unwrap();
        assert!(text.contains("[include]"), "{text}");
        assert!(text.contains(&format!("\tpath = \"{}\"\n", a.display())), "{text}");
        assert!(text.contains(&format!("\tpath = \"{}\"\n", b.display())), "{text}");
        assert!(text.len() < 4096);
    }
}
