//! The private directories of a run: cordon's state directory kept read-only inside
//! a writable root, the run's `$HOME/.cache` pinned (and made in cordon's own home),
//! the kept layers of `--cache-dir` and the directories they are pinned in.

use super::*;
use std::os::unix::fs::OpenOptionsExt;

impl Executor {
    /// The run's policy with cordon's state directory kept read-only when it lies in a
    /// writable root (a workspace of `/tmp` holds it): it is added to the protected
    /// paths, which the mount layer re-attaches read-only and the write judge knows.
    /// Without a mount layer it cannot be, and the run is refused (as is a writable
    /// root inside the state directory).
    pub(super) fn keep_state_dir_read_only(
        &self,
        policy: &crate::policy::ExecutionPolicy,
        runner: RunnerKind,
    ) -> Result<crate::policy::ExecutionPolicy, CordonError> {
        let mut policy = policy.clone();
        if !policy.mode.is_confined() {
            return Ok(policy);
        }
        let state = &self.state_dir;
        let refuse = |root: PathBuf| crate::error::PolicyError::StateDirWritable { state_dir: state.clone(), root };
        if let Some(root) = policy.writable().into_iter().find(|w| w.starts_with(state)) {
            return Err(refuse(root).into());
        }
        if let Some(root) = policy.writable().into_iter().find(|w| state.starts_with(w)) {
            let mount_layer = runner == RunnerKind::Bwrap || self.host.namespaces.available();
            if !mount_layer {
                return Err(refuse(root).into());
            }
            if !policy.protected.iter().any(|p| state.starts_with(p)) {
                policy.protected.push(state.clone());
            }
        }
        Ok(policy)
    }
}

/// Pin the run's `$HOME/.cache` (`HOME` from the run's environment) when it is a real
/// directory on the host, and return its canonical path; `None` otherwise (no `HOME`,
/// a relative one, no such directory, or `.cache` itself a symlink). A home that is the
/// caller's own directory and has none gets one first (mode 0700, as XDG tools make
/// it): `mkdir -p ~/.cache/x` then works inside, in the run's private layer. Only
/// cordon's own `HOME`: a request's environment (`--env HOME=/etc`, a serve client's
/// `env`) names any directory, and must not make cordon write there.
pub(super) fn pin_home_cache(pins: &mut crate::pin::Pins, env: &[(OsString, OsString)], euid: u32) -> Option<PathBuf> {
    let home = env.iter().find(|(k, _)| k == "HOME").map(|(_, v)| PathBuf::from(v))?;
    if !home.is_absolute() {
        return None;
    }
    let cache = home.join(".cache");
    if std::fs::symlink_metadata(&cache).is_err() && std::env::var_os("HOME").is_some_and(|own| home == Path::new(&own))
    {
        make_home_cache(&home, euid);
    }
    pin_private_dir(pins, &cache)
}

/// Where a run keeps what it adds to the private layer over `layered` with the cache
/// directory `cache_dir` (see [`crate::request::CACHE_DIR_LAYERS`]): the upper and
/// work directories `LAYERS/NAME/{upper,work}` (made 0700 when missing; `NAME` is the
/// layered path with `/` and every byte but `[A-Za-z0-9._-]` escaped as `%XX`), pinned,
/// when this run gets `NAME/lock` (`flock`, held until the run ends); a run that finds
/// the lock taken reads the kept upper directory as a layer above the host's and keeps
/// nothing. [`crate::runner::Keep::Discard`] when the cache directory's filesystem is
/// not one overlayfs takes as an upper layer for certain (a network or FUSE
/// filesystem), or anything is amiss (a symlink, a name too long).
pub(super) fn keep_layer(
    cache_dir: &Path,
    layered: &Path,
    pins: &mut crate::pin::Pins,
    locks: &mut Vec<std::fs::File>,
) -> crate::runner::Keep {
    use crate::runner::Keep;
    if !upper_capable(cache_dir) {
        return Keep::Discard;
    }
    let mut name = String::new();
    for b in layered.as_os_str().as_bytes() {
        match *b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-' => name.push(char::from(*b)),
            other => name.push_str(&format!("%{other:02X}")),
        }
    }
    if name.len() > KEPT_LAYER_NAME_MAX {
        return Keep::Discard;
    }
    let dir = cache_dir.join(crate::request::CACHE_DIR_LAYERS).join(name);
    let (upper, work) = (dir.join("upper"), dir.join("work"));
    let mk = |p: &Path| match std::fs::DirBuilder::new().mode(0o700).create(p) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    };
    let made = mk(&cache_dir.join(crate::request::CACHE_DIR_LAYERS))
        .and_then(|_| mk(&dir))
        .and_then(|_| mk(&upper))
        .and_then(|_| mk(&work));
    if made.is_err() {
        return Keep::Discard;
    }
    // The overlay's root shows its upper directory's mode: the host directory's.
    if let Ok(m) = std::fs::metadata(layered) {
        let _ = std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(m.mode() & 0o7777));
    }
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join("lock"));
    let Ok(lock) = lock else { return Keep::Discard };
    #[allow(deprecated, reason = "nix 0.32's Flock guard type takes the file by value; this one is kept for the run")]
    let held = nix::fcntl::flock(lock.as_raw_fd(), nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok();
    if held && pins.add(&upper).is_ok() && pins.add(&work).is_ok() {
        locks.push(lock);
        return Keep::Upper { upper, work };
    }
    if !held && pins.add(&upper).is_ok() {
        return Keep::ReadUpper { upper };
    }
    Keep::Discard
}

/// The longest name of a kept layer's directory (below `NAME_MAX`).
pub(super) const KEPT_LAYER_NAME_MAX: usize = 200;

/// Whether the filesystem holding `dir` is one overlayfs takes as an upper layer
/// (xattrs, whiteouts, `O_TMPFILE`, rename): ext2/3/4, XFS, Btrfs, F2FS, tmpfs. Never
/// off Linux (no overlayfs).
#[cfg(not(target_os = "linux"))]
pub(super) fn upper_capable(_dir: &Path) -> bool {
    false
}

/// See the other-OS version above.
#[cfg(target_os = "linux")]
pub(super) fn upper_capable(dir: &Path) -> bool {
    const EXT: i64 = 0xEF53;
    const XFS: i64 = 0x5846_5342;
    const BTRFS: i64 = 0x9123_683E;
    const F2FS: i64 = 0xF2F5_2010;
    const TMPFS: i64 = 0x0102_1994;
    nix::sys::statfs::statfs(dir).is_ok_and(|s| {
        #[allow(clippy::useless_conversion, reason = "the field's type differs between architectures")]
        let kind = i64::from(s.filesystem_type().0);
        [EXT, XFS, BTRFS, F2FS, TMPFS].contains(&kind)
    })
}

/// Create `HOME/.cache` (0700) when `HOME` (canonical, opened without following
/// symlinks) is a directory owned by `euid`; nothing otherwise (another user's home, a
/// container's foreign `HOME`). Failures are ignored: the run then has no cache layer.
pub(super) fn make_home_cache(home: &Path, euid: u32) {
    let Some(fd) = home.canonicalize().ok().and_then(|h| crate::pin::open_no_symlinks(&h).ok()) else { return };
    let mine =
        nix::sys::stat::fstat(&fd).is_ok_and(|st| st.st_uid == euid && st.st_mode & libc::S_IFMT == libc::S_IFDIR);
    if mine {
        let _ = nix::sys::stat::mkdirat(&fd, ".cache", nix::sys::stat::Mode::from_bits_truncate(0o700));
    }
}

/// Pin the host directory `dir` for a private layer and return its canonical path;
/// `None` when it is not a real directory (missing, or itself a symlink). The common
/// case costs one `openat2` and one `fstat`; only a path reached through a symlinked
/// ancestor is canonicalized first, and `dir` itself is never followed.
pub(super) fn pin_private_dir(pins: &mut crate::pin::Pins, dir: &Path) -> Option<PathBuf> {
    let (parent, name) = (dir.parent()?, dir.file_name()?);
    let normal = dir.components().all(|c| matches!(c, std::path::Component::RootDir | std::path::Component::Normal(_)));
    let path = if normal { dir.to_path_buf() } else { parent.canonicalize().ok()?.join(name) };
    let path = match pins.add(&path) {
        Ok(()) => path,
        Err(crate::error::PolicyError::Changed { source, .. })
            if normal && source.raw_os_error() == Some(libc::ELOOP) =>
        {
            let real = parent.canonicalize().ok()?.join(name);
            pins.add(&real).ok()?;
            real
        }
        Err(_) => return None,
    };
    let fd = pins.fd(&path)?;
    nix::sys::stat::fstat(fd).ok().filter(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR).map(|_| path)
}
