//! Removing a tree without following a symlink or crossing a mount point: a removed
//! host entry when applying ([`remove_tree`], bounded by [`MAX_DEPTH`]), and a run's
//! held storage, however deep a command made it ([`remove_storage`]: no recursion,
//! no descriptor per level, directories nobody may read made readable through an
//! `O_PATH` descriptor first).

use super::*;

/// Remove `name` in `dir`: a directory with everything in it, through directory
/// descriptors opened without following symlinks (a symlink is removed, never
/// followed) or crossing a mount point (`EXDEV`). `depth` is how deep `name` lies
/// below the root: a tree reaching past [`MAX_DEPTH`] is not removed (`ELOOP`; what
/// was removed before stays removed).
pub(crate) fn remove_tree(dir: BorrowedFd<'_>, name: &OsStr, depth: usize) -> Result<(), Errno> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Err(Errno::ISDIR) => {}
        other => return other,
    }
    if depth > MAX_DEPTH {
        return Err(Errno::LOOP);
    }
    let sub = open_dir_at(dir, name)?;
    // Make it searchable and writable first (the command may have left it read-only).
    let _ = rustix::fs::fchmod(&sub, Mode::from_raw_mode(0o700));
    for child in names(sub.as_fd())? {
        remove_tree(sub.as_fd(), &child, depth + 1)?;
    }
    rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)
}

/// Remove the directory `path` and everything in it, without following symlinks (the
/// layer's private storage when it is no longer needed, or one a killed cordon left).
/// However deep the tree (the command made it), with two descriptors at a time and no
/// recursion: the walk goes down to a directory it can empty and back up through
/// `..` (the storage is cordon's private directory: nothing else moves it meanwhile).
/// A directory is made searchable and writable before it is opened (overlayfs leaves
/// its work directory mode 0, which its owner cannot open without privilege).
pub(crate) fn remove_storage(path: &Path) -> std::io::Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::other("not a removable path"));
    };
    let top = rustix::fs::openat(
        rustix::fs::CWD,
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno_io)?;
    remove_deep(top.as_fd(), name).map_err(errno_io)
}

/// See [`remove_storage`].
fn remove_deep(top: BorrowedFd<'_>, name: &OsStr) -> Result<(), Errno> {
    // Open the directory `name` in `dir` (never through a symlink) and make it writable
    // for its owner (the command may have left it read-only). One nobody may read
    // (overlayfs's mode-0 work directory) is reached by an `O_PATH` descriptor first and
    // made readable through it: never by name, which could be a symlink by then.
    let enter = |dir: BorrowedFd<'_>, name: &OsStr| -> Result<OwnedFd, Errno> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
            Err(Errno::ACCESS) => {
                let flags_path = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                let path = rustix::fs::openat(dir, name, flags_path, Mode::empty())?;
                let magic = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&path));
                rustix::fs::chmodat(rustix::fs::CWD, magic.as_str(), Mode::from_raw_mode(0o700), AtFlags::empty())?;
                rustix::fs::openat(rustix::fs::CWD, magic.as_str(), flags & !OFlags::NOFOLLOW, Mode::empty())?
            }
            other => other?,
        };
        let _ = rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700));
        Ok(fd)
    };
    match rustix::fs::unlinkat(top, name, AtFlags::empty()) {
        Err(Errno::ISDIR) => {}
        other => return other,
    }
    let mut cur = enter(top, name)?;
    let mut depth = 0usize;
    loop {
        let mut down = None;
        for child in names(cur.as_fd())? {
            match rustix::fs::unlinkat(&cur, child.as_os_str(), AtFlags::empty()) {
                Err(Errno::ISDIR) => {}
                other => {
                    other?;
                    continue;
                }
            }
            match rustix::fs::unlinkat(&cur, child.as_os_str(), AtFlags::REMOVEDIR) {
                Ok(()) => {}
                Err(Errno::NOTEMPTY | Errno::EXIST) => {
                    down = Some(child);
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        match down {
            Some(child) => {
                cur = enter(cur.as_fd(), &child)?;
                depth += 1;
            }
            // `cur` is empty: back up; its parent removes it on the next pass.
            None if depth > 0 => {
                cur = rustix::fs::openat(
                    &cur,
                    "..",
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )?;
                depth -= 1;
            }
            None => return rustix::fs::unlinkat(top, name, AtFlags::REMOVEDIR),
        }
    }
}
