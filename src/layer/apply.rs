//! Reading an overlay's upper directory ([`scan`]) and applying it to the host
//! ([`apply`]), race-safely.
//!
//! The upper directory of an overlay whose lower layer is a writable root holds what
//! the run changed there: new and rewritten files, symlinks and FIFOs (copied up whole:
//! the layer is mounted with `metacopy=off`), directories (copied up to hold a changed
//! child, or new), whiteouts (a character device 0:0, or since Linux 6.7 an empty file
//! with an `overlay.whiteout` xattr: the lower entry was removed), opaque directories
//! (`overlay.opaque` = `y`: the lower directory's contents are hidden, i.e. the
//! directory was removed and made again), under the `trusted.` or, for a layer mounted
//! in a user namespace (`userxattr`), the `user.` xattr prefix. Renamed lower
//! directories would carry `overlay.redirect`; the layer is mounted with
//! `redirect_dir=nofollow`, so a rename of a lower directory fails with `EXDEV` inside the
//! run (tools fall back to copy and delete), and an entry that carries one anyway is
//! skipped, not guessed at.
//!
//! Applying makes each host path equal to what the run saw, entry by entry:
//!
//! 1. The host root is opened without following symlinks and must still be the
//!    directory the run was given (device and inode).
//! 2. Every host directory is reached from there one component at a time, opened
//!    without following a symlink and without crossing a mount point
//!    (`RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV`): a symlink planted on the host
//!    meanwhile is never followed, so nothing lands outside the root; and a host
//!    mount inside the root (a bind mount, a volume) is never entered: the layer
//!    showed the directory beneath it, and the run's view of the root keeps such a
//!    mount read-only.
//! 3. A file, symlink or FIFO is made under a fresh temporary name in its host
//!    directory (`O_CREAT | O_EXCL | O_NOFOLLOW`), given the upper entry's mode (less
//!    setuid and setgid) and times, then renamed over the name: a reader sees the old
//!    or the new file, never half of one, and a hard link on the host to the old file
//!    keeps the old content (no write goes through it). Files that were hard links of
//!    each other in the layer are linked again.
//! 4. A whiteout removes the host entry (a directory with everything in it, through
//!    directory descriptors, never following a symlink); an opaque directory first
//!    removes every host entry the layer does not have.
//! 5. Device nodes and sockets are never made on the host (`skipped`); nothing is ever
//!    done at or under a protected path or another root's mount point, nor is an
//!    ancestor of one removed.
//! 6. Nothing deeper than [`MAX_DEPTH`] directories below the root is applied or
//!    listed (`skipped`): the walk is recursive, and a command can make a tree deep
//!    enough to exhaust cordon's stack or descriptors.
//!
//! Extended attributes are not carried over, and owners are the caller's (cordon's own
//! identity creates every file).
//!
//! What it does not do: it is not atomic as a whole (a crash midway leaves some
//! changes applied), and it does not merge: a file the host changed while the run was
//! going is replaced by the run's version (last writer wins, as without the layer).

use super::{Change, ChangeKind, EntryKind, Skipped, MAX_LISTED_CHANGES};

mod remove;
pub(crate) use remove::{remove_storage, remove_tree};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Timestamps};
use rustix::io::Errno;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The prefix overlayfs uses for its own attributes when mounted with privilege: the
/// command cannot set these (it has no `CAP_SYS_ADMIN`). `user.overlay.` attributes
/// are ordinary user data there, which a command can set: they mean nothing.
const XATTR_TRUSTED: &str = "trusted.overlay.";
/// The prefix in a layer mounted in a user namespace (`userxattr`): overlayfs refuses
/// to let the command set these through the layer.
const XATTR_USER: &str = "user.overlay.";
/// Temporary names of files being applied start with this.
const TEMP_PREFIX: &str = ".cordon-held-";
/// The deepest directory level below a root that is listed, applied or removed: each
/// level costs a few stack frames and two descriptors while the walk is in it (on a
/// 2 MiB thread stack in a debug build, about 600 levels fit), and real trees stay far
/// shallower (a path of 256 one-letter directories is already 512 bytes long).
pub(crate) const MAX_DEPTH: usize = 256;
/// Why an entry below [`MAX_DEPTH`] is skipped.
const TOO_DEEP: &str = "more than 256 directories below the root; not applied";

/// One writable root's layer: where the host root is, where its upper directory is,
/// and what under it is never touched.
#[derive(Debug, Clone)]
pub(crate) struct Layer {
    /// The canonical host root (the overlay's target and lower layer).
    pub root: PathBuf,
    /// Its identity when the run started (device, inode).
    pub root_id: (u64, u64),
    /// The upper directory.
    pub upper: PathBuf,
    /// Paths relative to the root that are never changed, nor their ancestors removed:
    /// protected paths, other roots' mount points.
    pub skip: Vec<PathBuf>,
    /// The layer was mounted in a user namespace (`userxattr`): overlayfs's own
    /// attributes are `user.overlay.*`, else `trusted.overlay.*`. Only the prefix the
    /// layer was mounted with is read: the other is the command's own data.
    pub userxattr: bool,
}

/// What [`apply`] did.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    /// Every change made on the host.
    pub changes: Vec<Change>,
    /// More changes than listed.
    pub truncated: bool,
    /// Changes not made, and why.
    pub skipped: Vec<Skipped>,
}

impl Applied {
    fn push(&mut self, path: PathBuf, change: ChangeKind, kind: EntryKind) {
        if self.changes.len() < MAX_LISTED_CHANGES {
            self.changes.push(Change { path, change, kind });
        } else {
            self.truncated = true;
        }
    }

    fn skip(&mut self, path: PathBuf, why: impl Into<String>) {
        if self.skipped.len() < MAX_LISTED_CHANGES {
            self.skipped.push(Skipped { path, why: why.into() });
        }
    }
}

/// What an upper entry is, for applying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Upper {
    Whiteout,
    Dir {
        opaque: bool,
    },
    File,
    Symlink,
    Fifo,
    /// A device node (not a whiteout) or a socket.
    Special,
    /// Carries an overlay attribute this code does not apply (`redirect`, `metacopy`).
    Unsupported(&'static str),
}

fn errno_io(e: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.raw_os_error())
}

/// Open the directory `name` in `dir`: never through a symlink, never across a mount
/// point (`EXDEV`: a host mount inside a root is not the root's, see step 2).
fn open_dir_at(dir: BorrowedFd<'_>, name: &OsStr) -> Result<OwnedFd, Errno> {
    open_beneath(dir, name)
}

/// Open the directory `rel` (relative, `.` for `dir` itself) beneath `dir` without
/// following a symlink, leaving `dir` or crossing a mount point.
fn open_beneath(dir: BorrowedFd<'_>, rel: impl rustix::path::Arg) -> Result<OwnedFd, Errno> {
    let how = rustix::fs::ResolveFlags::BENEATH
        | rustix::fs::ResolveFlags::NO_SYMLINKS
        | rustix::fs::ResolveFlags::NO_MAGICLINKS
        | rustix::fs::ResolveFlags::NO_XDEV;
    rustix::fs::openat2(dir, rel, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty(), how)
}

/// A failure to reach a host directory, in words (a mount point is named as one).
fn host_dir_error(e: Errno) -> String {
    match e {
        Errno::XDEV => "a mount point on the host (the layer showed the directory beneath it); not applied".into(),
        e => format!("opening the host directory: {e}"),
    }
}

/// The value of overlayfs attribute `name` (without prefix) on `fd`, under the prefix
/// the layer was mounted with.
fn overlay_xattr(fd: BorrowedFd<'_>, name: &str, userxattr: bool) -> Option<Vec<u8>> {
    let prefix = if userxattr { XATTR_USER } else { XATTR_TRUSTED };
    let mut buf = vec![0u8; 256];
    let n = rustix::fs::fgetxattr(fd, format!("{prefix}{name}").as_str(), &mut buf[..]).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// Classify the upper entry `name` in `dir`.
fn classify(dir: BorrowedFd<'_>, name: &OsStr, userxattr: bool) -> Result<(Upper, rustix::fs::Stat), Errno> {
    let overlay_xattr = |fd: BorrowedFd<'_>, attr: &str| overlay_xattr(fd, attr, userxattr);
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::CharacterDevice if st.st_rdev == 0 => Upper::Whiteout,
        FileType::CharacterDevice | FileType::BlockDevice | FileType::Socket | FileType::Unknown => Upper::Special,
        FileType::Symlink => Upper::Symlink,
        FileType::Fifo => Upper::Fifo,
        FileType::Directory => {
            let fd = open_dir_at(dir, name)?;
            if overlay_xattr(fd.as_fd(), "redirect").is_some() {
                Upper::Unsupported("a renamed directory (overlay redirect)")
            } else {
                Upper::Dir { opaque: overlay_xattr(fd.as_fd(), "opaque").is_some_and(|v| v == b"y") }
            }
        }
        FileType::RegularFile => {
            let fd = rustix::fs::openat(dir, name, OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())?;
            if st.st_size == 0 && overlay_xattr(fd.as_fd(), "whiteout").is_some() {
                Upper::Whiteout
            } else if overlay_xattr(fd.as_fd(), "metacopy").is_some() {
                Upper::Unsupported("a metadata-only copy (overlay metacopy)")
            } else {
                Upper::File
            }
        }
    };
    Ok((kind, st))
}

fn entry_kind(st: &rustix::fs::Stat) -> EntryKind {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => EntryKind::File,
        FileType::Directory => EntryKind::Dir,
        FileType::Symlink => EntryKind::Symlink,
        FileType::Fifo => EntryKind::Fifo,
        _ => EntryKind::Other,
    }
}

/// The names in directory `fd`, without `.` and `..`, sorted (a stable order for the
/// change list).
fn names(fd: BorrowedFd<'_>) -> Result<Vec<OsString>, Errno> {
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(fd)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            out.push(OsStr::from_bytes(name).to_os_string());
        }
    }
    out.sort();
    Ok(out)
}

/// How `rel` (relative to the root) stands to the skip list.
fn skip_state(skip: &[PathBuf], rel: &Path) -> (bool, bool) {
    let inside = skip.iter().any(|s| rel.starts_with(s));
    let ancestor = skip.iter().any(|s| s.starts_with(rel) && s != rel);
    (inside, ancestor)
}

/// Open the host root without following any symlink and check it is the directory the
/// run was given.
fn open_root(layer: &Layer) -> std::io::Result<OwnedFd> {
    let how = rustix::fs::ResolveFlags::NO_SYMLINKS | rustix::fs::ResolveFlags::NO_MAGICLINKS;
    let fd = rustix::fs::openat2(
        rustix::fs::CWD,
        &layer.root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        how,
    )
    .map_err(errno_io)?;
    let st = rustix::fs::fstat(&fd).map_err(errno_io)?;
    #[allow(clippy::unnecessary_cast, reason = "st_dev and st_ino are not u64 on every target")]
    if (st.st_dev as u64, st.st_ino as u64) != layer.root_id {
        return Err(std::io::Error::other(format!(
            "`{}` is no longer the directory the run was given",
            layer.root.display()
        )));
    }
    Ok(fd)
}

fn open_upper(layer: &Layer) -> std::io::Result<OwnedFd> {
    let fd = rustix::fs::openat(
        rustix::fs::CWD,
        &layer.upper,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno_io)?;
    Ok(fd)
}

/// The changes the run made under `layer.root` (nothing on the host changes).
pub(crate) fn scan(layer: &Layer) -> std::io::Result<Applied> {
    let upper = open_upper(layer)?;
    let host = open_root(layer).ok();
    let mut out = Applied::default();
    scan_dir(layer, upper.as_fd(), host.as_ref().map(|h| h.as_fd()), Path::new(""), false, 0, &mut out)
        .map_err(errno_io)?;
    Ok(out)
}

fn scan_dir(
    layer: &Layer,
    upper: BorrowedFd<'_>,
    host: Option<BorrowedFd<'_>>,
    rel: &Path,
    opaque: bool,
    depth: usize,
    out: &mut Applied,
) -> Result<(), Errno> {
    if depth > MAX_DEPTH {
        out.skip(layer.root.join(rel), TOO_DEEP);
        return Ok(());
    }
    let upper_names = names(upper)?;
    if opaque {
        // Everything the host has here that the layer does not was removed.
        if let Some(h) = host {
            for name in names(h)? {
                if upper_names.binary_search(&name).is_err() {
                    let st = rustix::fs::statat(h, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)?;
                    out.push(layer.root.join(rel).join(&name), ChangeKind::Removed, entry_kind(&st));
                }
            }
        }
    }
    for name in upper_names {
        let child_rel = rel.join(&name);
        let path = layer.root.join(&child_rel);
        if skip_state(&layer.skip, &child_rel).0 {
            continue;
        }
        let existing = host.and_then(|h| rustix::fs::statat(h, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW).ok());
        let (kind, st) = classify(upper, &name, layer.userxattr)?;
        match kind {
            Upper::Whiteout => {
                if let Some(e) = existing {
                    out.push(path, ChangeKind::Removed, entry_kind(&e));
                }
            }
            Upper::Dir { .. } if depth + 1 > MAX_DEPTH => out.skip(path, TOO_DEEP),
            Upper::Dir { opaque: o } => {
                let host_is_dir = existing.is_some_and(|e| FileType::from_raw_mode(e.st_mode) == FileType::Directory);
                if !host_is_dir {
                    let change = if existing.is_some() { ChangeKind::Modified } else { ChangeKind::Created };
                    out.push(path, change, EntryKind::Dir);
                }
                let sub_upper = open_dir_at(upper, &name)?;
                let sub_host = if host_is_dir { host.and_then(|h| open_dir_at(h, &name).ok()) } else { None };
                let sub_host = sub_host.as_ref().map(|h| h.as_fd());
                scan_dir(layer, sub_upper.as_fd(), sub_host, &child_rel, opaque || o, depth + 1, out)?;
            }
            Upper::Unsupported(why) => out.skip(path, why),
            _ => {
                let change = if existing.is_some() { ChangeKind::Modified } else { ChangeKind::Created };
                out.push(path, change, entry_kind(&st));
            }
        }
    }
    Ok(())
}

/// State kept while applying: the host root, and the files already applied by their
/// inode in the layer (with their path under the root), to link hard links again.
/// Paths, not descriptors: a command can make any number of hard-linked files.
struct Applier<'a> {
    layer: &'a Layer,
    root: OwnedFd,
    out: Applied,
    linked: HashMap<(u64, u64), PathBuf>,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn temp_name() -> OsString {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    OsString::from(format!("{TEMP_PREFIX}{}-{n}", std::process::id()))
}

/// Apply `layer`'s upper directory to the host (see the module docs).
pub(crate) fn apply(layer: &Layer) -> std::io::Result<Applied> {
    let upper = open_upper(layer)?;
    let host = open_root(layer)?;
    let root = rustix::io::fcntl_dupfd_cloexec(&host, 0).map_err(errno_io)?;
    let mut a = Applier { layer, root, out: Applied::default(), linked: HashMap::new() };
    a.dir(upper.as_fd(), host.as_fd(), Path::new(""), false, 0);
    Ok(a.out)
}

impl Applier<'_> {
    fn path(&self, rel: &Path) -> PathBuf {
        self.layer.root.join(rel)
    }

    /// Apply the upper directory `upper` onto the host directory `host` (`rel` under
    /// the root). Failures are recorded per entry; the rest goes on.
    fn dir(&mut self, upper: BorrowedFd<'_>, host: BorrowedFd<'_>, rel: &Path, opaque: bool, depth: usize) {
        if depth > MAX_DEPTH {
            return self.out.skip(self.path(rel), TOO_DEEP);
        }
        let upper_names = match names(upper) {
            Ok(n) => n,
            Err(e) => return self.out.skip(self.path(rel), format!("reading the layer: {e}")),
        };
        if opaque {
            match names(host) {
                Ok(host_names) => {
                    for name in host_names.iter().filter(|n| upper_names.binary_search(n).is_err()) {
                        self.remove(host, name, &rel.join(name));
                    }
                }
                Err(e) => self.out.skip(self.path(rel), format!("reading the host directory: {e}")),
            }
        }
        for name in &upper_names {
            let child_rel = rel.join(name);
            if skip_state(&self.layer.skip, &child_rel).0 {
                continue;
            }
            match classify(upper, name, self.layer.userxattr) {
                Err(e) => self.out.skip(self.path(&child_rel), format!("reading the layer: {e}")),
                Ok((kind, st)) => self.entry(upper, host, name, &child_rel, kind, &st, opaque, depth),
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn entry(
        &mut self,
        upper: BorrowedFd<'_>,
        host: BorrowedFd<'_>,
        name: &OsStr,
        rel: &Path,
        kind: Upper,
        st: &rustix::fs::Stat,
        opaque: bool,
        depth: usize,
    ) {
        let path = self.path(rel);
        match kind {
            Upper::Whiteout => self.remove(host, name, rel),
            Upper::Unsupported(why) => self.out.skip(path, why),
            Upper::Special => self.out.skip(path, "a device node or socket is never made on the host"),
            Upper::Dir { opaque: o } => self.subdir(upper, host, name, rel, st, opaque || o, depth + 1),
            Upper::File | Upper::Symlink | Upper::Fifo => {
                let existed = rustix::fs::statat(host, name, AtFlags::SYMLINK_NOFOLLOW).is_ok();
                match self.place(upper, host, name, rel, kind, st) {
                    Ok(()) => {
                        let change = if existed { ChangeKind::Modified } else { ChangeKind::Created };
                        self.out.push(path, change, entry_kind(st));
                    }
                    Err(why) => self.out.skip(path, why),
                }
            }
        }
    }

    /// A directory of the layer: the host directory made (or kept), then its contents.
    #[allow(clippy::too_many_arguments)]
    fn subdir(
        &mut self,
        upper: BorrowedFd<'_>,
        host: BorrowedFd<'_>,
        name: &OsStr,
        rel: &Path,
        st: &rustix::fs::Stat,
        opaque: bool,
        depth: usize,
    ) {
        if depth > MAX_DEPTH {
            return self.out.skip(self.path(rel), TOO_DEEP);
        }
        let path = self.path(rel);
        let sub_upper = match open_dir_at(upper, name) {
            Ok(fd) => fd,
            Err(e) => return self.out.skip(path, format!("reading the layer: {e}")),
        };
        let mode = Mode::from_raw_mode(st.st_mode & 0o1777);
        let sub_host = match open_dir_at(host, name) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => match self.make_dir(host, name, mode) {
                Ok(fd) => {
                    self.out.push(path.clone(), ChangeKind::Created, EntryKind::Dir);
                    fd
                }
                Err(e) => return self.out.skip(path, format!("making the directory: {e}")),
            },
            // Something else is there: the run replaced it with a directory (then the
            // layer's directory is opaque), or the host changed it meanwhile.
            Err(Errno::NOTDIR | Errno::LOOP) if opaque => {
                self.remove(host, name, rel);
                match self.make_dir(host, name, mode) {
                    Ok(fd) => {
                        self.out.push(path.clone(), ChangeKind::Modified, EntryKind::Dir);
                        fd
                    }
                    Err(e) => return self.out.skip(path, format!("making the directory: {e}")),
                }
            }
            Err(Errno::NOTDIR | Errno::LOOP) => {
                return self.out.skip(path, "no longer a directory on the host (changed while the run went on)")
            }
            Err(e) => return self.out.skip(path, host_dir_error(e)),
        };
        self.dir(sub_upper.as_fd(), sub_host.as_fd(), rel, opaque, depth);
        // The directory's own mode and times, unless it only holds a mount point (its
        // copy in the layer was made for the mount, not by the run). A setgid bit the
        // host directory has stays (a shared group's directory; `mode` never sets it).
        if !skip_state(&self.layer.skip, rel).1 {
            let _ = rustix::fs::fchmod(&sub_host, with_host_setgid(&sub_host, mode));
            let _ = rustix::fs::futimens(&sub_host, &times(st));
        }
    }

    fn make_dir(&self, host: BorrowedFd<'_>, name: &OsStr, mode: Mode) -> Result<OwnedFd, Errno> {
        rustix::fs::mkdirat(host, name, Mode::from_raw_mode(0o700))?;
        let fd = open_dir_at(host, name)?;
        // Inherited from a setgid parent, as without the layer.
        rustix::fs::fchmod(&fd, with_host_setgid(&fd, mode))?;
        Ok(fd)
    }

    /// Make the file, symlink or FIFO `name` of the layer under a temporary name in
    /// `host`, then rename it over `name` (replacing whatever is there).
    fn place(
        &mut self,
        upper: BorrowedFd<'_>,
        host: BorrowedFd<'_>,
        name: &OsStr,
        rel: &Path,
        kind: Upper,
        st: &rustix::fs::Stat,
    ) -> Result<(), String> {
        let tmp = temp_name();
        #[allow(clippy::unnecessary_cast, reason = "st_dev and st_ino are not u64 on every target")]
        let id = (st.st_dev as u64, st.st_ino as u64);
        let made = match kind {
            Upper::File if st.st_nlink > 1 && self.linked.contains_key(&id) => {
                let first = &self.linked[&id];
                let (parent, file) = (first.parent().unwrap_or(Path::new("")), first.file_name().unwrap_or_default());
                let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
                open_beneath(self.root.as_fd(), parent)
                    .and_then(|dir| rustix::fs::linkat(&dir, file, host, tmp.as_os_str(), AtFlags::empty()))
                    .map_err(|e| format!("linking it again: {e}"))
            }
            Upper::File => self.copy_file(upper, host, name, &tmp, st),
            Upper::Symlink => rustix::fs::readlinkat(upper, name, Vec::new())
                .and_then(|target| rustix::fs::symlinkat(target.as_c_str(), host, tmp.as_os_str()))
                .and_then(|()| rustix::fs::utimensat(host, tmp.as_os_str(), &times(st), AtFlags::SYMLINK_NOFOLLOW))
                .map_err(|e| format!("making the symlink: {e}")),
            Upper::Fifo => {
                rustix::fs::mknodat(host, tmp.as_os_str(), FileType::Fifo, Mode::from_raw_mode(st.st_mode & 0o777), 0)
                    .map_err(|e| format!("making the FIFO: {e}"))
            }
            _ => Err("not a file".into()),
        };
        made?;
        let renamed = match rustix::fs::renameat(host, tmp.as_os_str(), host, name) {
            // A directory is there (the run removed it and made a file), or the host
            // made one meanwhile: the run's file replaces it.
            Err(Errno::ISDIR | Errno::NOTEMPTY | Errno::EXIST) => {
                if self.remove_quiet(host, name, rel) {
                    rustix::fs::renameat(host, tmp.as_os_str(), host, name)
                } else {
                    Err(Errno::NOTEMPTY)
                }
            }
            other => other,
        };
        if let Err(e) = renamed {
            let _ = rustix::fs::unlinkat(host, tmp.as_os_str(), AtFlags::empty());
            return Err(format!("putting it in place: {e}"));
        }
        if kind == Upper::File && st.st_nlink > 1 && !self.linked.contains_key(&id) {
            self.linked.insert(id, rel.to_path_buf());
        }
        Ok(())
    }

    fn copy_file(
        &self,
        upper: BorrowedFd<'_>,
        host: BorrowedFd<'_>,
        name: &OsStr,
        tmp: &OsStr,
        st: &rustix::fs::Stat,
    ) -> Result<(), String> {
        let from = rustix::fs::openat(upper, name, OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| format!("reading the layer: {e}"))?;
        let to = rustix::fs::openat(
            host,
            tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| format!("creating it: {e}"))?;
        let (mut from, mut to) = (std::fs::File::from(from), std::fs::File::from(to));
        let done = std::io::copy(&mut from, &mut to)
            .map_err(|e| format!("copying it: {e}"))
            // The mode without setuid and setgid: the layer's file was made by the
            // command, which must not hand a setuid file to whoever runs it next.
            .and_then(|_| rustix::fs::fchmod(&to, Mode::from_raw_mode(st.st_mode & 0o1777)).map_err(|e| e.to_string()))
            .and_then(|()| rustix::fs::futimens(&to, &times(st)).map_err(|e| e.to_string()));
        if done.is_err() {
            let _ = rustix::fs::unlinkat(host, tmp, AtFlags::empty());
        }
        done
    }

    /// Remove the host entry `name` (a directory with its contents), recording it.
    fn remove(&mut self, host: BorrowedFd<'_>, name: &OsStr, rel: &Path) {
        let path = self.path(rel);
        let Ok(st) = rustix::fs::statat(host, name, AtFlags::SYMLINK_NOFOLLOW) else { return };
        let (inside, ancestor) = skip_state(&self.layer.skip, rel);
        if inside || ancestor {
            return self.out.skip(path, "holds a protected path or another root; not removed");
        }
        match remove_tree(host, name, rel.components().count()) {
            Ok(()) => self.out.push(path, ChangeKind::Removed, entry_kind(&st)),
            Err(Errno::XDEV | Errno::BUSY) => self.out.skip(path, "holds a mount point on the host; not removed"),
            Err(e) => self.out.skip(path, format!("removing it: {e}")),
        }
    }

    /// [`Self::remove`] without recording a removal (the name is replaced next).
    fn remove_quiet(&mut self, host: BorrowedFd<'_>, name: &OsStr, rel: &Path) -> bool {
        let (inside, ancestor) = skip_state(&self.layer.skip, rel);
        !inside && !ancestor && remove_tree(host, name, rel.components().count()).is_ok()
    }
}

/// `mode` with the setgid bit the host directory `dir` has now, if any.
fn with_host_setgid(dir: &OwnedFd, mode: Mode) -> Mode {
    let setgid = rustix::fs::fstat(dir).map_or(0, |st| st.st_mode & 0o2000);
    Mode::from_raw_mode(mode.as_raw_mode() | setgid)
}

fn times(st: &rustix::fs::Stat) -> Timestamps {
    #[allow(clippy::unnecessary_cast, reason = "the stat field types differ between targets")]
    Timestamps {
        last_access: rustix::fs::Timespec { tv_sec: st.st_atime as i64, tv_nsec: st.st_atime_nsec as _ },
        last_modification: rustix::fs::Timespec { tv_sec: st.st_mtime as i64, tv_nsec: st.st_mtime_nsec as _ },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// A lower tree, its upper and work directories, and a directory outside.
    struct Tree {
        _dir: tempfile::TempDir,
        lower: PathBuf,
        upper: PathBuf,
        work: PathBuf,
        outside: PathBuf,
    }

    fn tree() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let [lower, upper, work, outside] = ["lower", "upper", "work", "outside"].map(|d| base.join(d));
        for d in [&lower, &upper, &work, &outside] {
            std::fs::create_dir(d).unwrap();
        }
        let w = |p: &str, s: &str| {
            let path = lower.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, s).unwrap();
        };
        for (p, s) in [
            ("a.txt", "a\n"),
            ("b.txt", "b\n"),
            ("gone/g.txt", "g\n"),
            ("redo/old.txt", "old\n"),
            ("exec.sh", "true\n"),
            ("old.txt", "o\n"),
            ("keep/k.txt", "k\n"),
            (".git/HEAD", "ref: refs/heads/main\n"),
            ("sub/s.txt", "s\n"),
        ] {
            w(p, s);
        }
        std::fs::write(outside.join("victim"), "victim\n").unwrap();
        std::fs::hard_link(outside.join("victim"), lower.join("linked.txt")).unwrap();
        Tree { _dir: dir, lower, upper, work, outside }
    }

    /// Run `script` in `t.lower` with an overlay mounted over it (lower = itself), as
    /// the layer would be: through `unshare` (privileged: `-m`; else in a user
    /// namespace with `userxattr`). `None` when this host cannot.
    fn in_overlay(t: &Tree, script: &str, userns: bool) -> Option<()> {
        let mut opts = format!(
            "lowerdir={0},upperdir={1},workdir={2},redirect_dir=nofollow,metacopy=off,index=off",
            t.lower.display(),
            t.upper.display(),
            t.work.display()
        );
        if userns {
            opts.push_str(",userxattr");
        }
        let inner = format!("mount -t overlay overlay -o {opts} {0} && cd {0} && {script}", t.lower.display());
        let flags = if userns { "-Urm" } else { "-m" };
        let out = std::process::Command::new("unshare").args([flags, "sh", "-c", &inner]).output().ok()?;
        if !out.status.success() {
            eprintln!("SKIP overlay ({flags}): {}", String::from_utf8_lossy(&out.stderr));
            return None;
        }
        Some(())
    }

    fn layer(t: &Tree, userxattr: bool) -> Layer {
        let m = std::fs::metadata(&t.lower).unwrap();
        Layer {
            root: t.lower.clone(),
            root_id: (m.dev(), m.ino()),
            upper: t.upper.clone(),
            skip: vec![".git".into()],
            userxattr,
        }
    }

    const SCRIPT: &str = "echo new > new.txt && echo mod >> a.txt && rm b.txt && rm -rf gone \
        && rm -rf redo && mkdir redo && echo y > redo/y.txt && ln -s a.txt newlink && chmod 755 exec.sh \
        && touch -d @1000000000 old.txt && ln new.txt new-hard.txt && mkfifo pipe \
        && echo pwned >> linked.txt && echo x > .git/planted && mkdir -p deep/er && echo d > deep/er/d.txt \
        && mv keep kept \
        && python3 -c 'import os; [os.setxattr(p, n, b\"y\") for p, n in ((\"sub\", \"user.overlay.opaque\"), (\"old.txt\", \"user.overlay.whiteout\"))]' 2>/dev/null; true";

    fn check(userns: bool) {
        let t = tree();
        if in_overlay(&t, SCRIPT, userns).is_none() {
            if std::env::var("CORDON_MUST_ENFORCE").is_ok_and(|v| v == "1") {
                panic!("no overlay here (userns {userns}) under CORDON_MUST_ENFORCE");
            }
            return;
        }
        let l = layer(&t, userns);
        // The host is untouched until applied.
        assert_eq!(std::fs::read_to_string(t.lower.join("a.txt")).unwrap(), "a\n");
        assert!(t.lower.join("b.txt").exists() && !t.lower.join("new.txt").exists());
        let listed = scan(&l).unwrap();
        let has = |p: &str, c: ChangeKind| listed.changes.iter().any(|x| x.path == t.lower.join(p) && x.change == c);
        for (p, c) in [
            ("new.txt", ChangeKind::Created),
            ("a.txt", ChangeKind::Modified),
            ("b.txt", ChangeKind::Removed),
            ("gone", ChangeKind::Removed),
            ("redo/old.txt", ChangeKind::Removed),
            ("redo/y.txt", ChangeKind::Created),
            ("newlink", ChangeKind::Created),
            ("exec.sh", ChangeKind::Modified),
            ("pipe", ChangeKind::Created),
            ("deep", ChangeKind::Created),
            ("deep/er/d.txt", ChangeKind::Created),
            ("kept", ChangeKind::Created),
            ("keep", ChangeKind::Removed),
        ] {
            assert!(has(p, c), "{p} {c:?} missing: {:#?}", listed.changes);
        }
        assert!(!listed.changes.iter().any(|x| x.path.starts_with(t.lower.join(".git"))), "{:#?}", listed.changes);

        let done = apply(&l).unwrap();
        let read = |p: &str| std::fs::read_to_string(t.lower.join(p)).unwrap();
        assert_eq!(read("new.txt"), "new\n");
        assert_eq!(read("a.txt"), "a\nmod\n");
        assert!(!t.lower.join("b.txt").exists() && !t.lower.join("gone").exists());
        assert!(!t.lower.join("redo/old.txt").exists() && read("redo/y.txt") == "y\n");
        assert_eq!(std::fs::read_link(t.lower.join("newlink")).unwrap(), Path::new("a.txt"));
        let mode = |p: &str| std::fs::symlink_metadata(t.lower.join(p)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode("exec.sh"), 0o755);
        assert_eq!(std::fs::metadata(t.lower.join("old.txt")).unwrap().mtime(), 1_000_000_000);
        let ino = |p: &str| std::fs::metadata(t.lower.join(p)).unwrap().ino();
        assert_eq!(ino("new.txt"), ino("new-hard.txt"), "hard links stay linked");
        assert!(std::fs::symlink_metadata(t.lower.join("pipe")).unwrap().file_type().is_fifo_like());
        assert_eq!(read("deep/er/d.txt"), "d\n");
        assert_eq!(read("kept/k.txt"), "k\n");
        // Attributes the command set under the prefix the layer does not use (privileged:
        // `user.overlay.*` is user data) are not overlayfs's: nothing is removed.
        assert_eq!(read("sub/s.txt"), "s\n", "a forged opaque attribute emptied sub/");
        assert!(t.lower.join("old.txt").exists(), "a forged whiteout attribute removed old.txt");
        assert!(!t.lower.join("keep").exists());
        // A host hard link to a file outside keeps the old content: nothing is written
        // through it.
        assert_eq!(read("linked.txt"), "victim\npwned\n");
        assert_eq!(std::fs::read_to_string(t.outside.join("victim")).unwrap(), "victim\n");
        // The protected path is untouched.
        assert!(!t.lower.join(".git/planted").exists());
        assert!(done.skipped.is_empty(), "{:#?}", done.skipped);
        // No temporary names left.
        let leftovers: Vec<_> = std::fs::read_dir(&t.lower)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(TEMP_PREFIX))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        remove_storage(&t.upper).unwrap();
        remove_storage(&t.work).unwrap();
        assert!(!t.upper.exists() && !t.work.exists());
    }

    trait FifoLike {
        fn is_fifo_like(&self) -> bool;
    }
    impl FifoLike for std::fs::FileType {
        fn is_fifo_like(&self) -> bool {
            std::os::unix::fs::FileTypeExt::is_fifo(self)
        }
    }

    fn root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    #[test]
    fn a_layer_is_listed_then_applied_faithfully_privileged() {
        if !root() {
            return eprintln!("SKIP a_layer_is_listed_then_applied_faithfully_privileged: needs root");
        }
        check(false);
    }

    #[test]
    fn a_layer_is_listed_then_applied_faithfully_in_a_user_namespace() {
        check(true);
    }

    #[test]
    fn applying_never_follows_a_symlink_planted_on_the_host_meanwhile() {
        // The run wrote sub/s.txt in its layer; meanwhile (before the apply) the host's
        // sub became a symlink to a directory outside. Nothing lands outside.
        let t = tree();
        if in_overlay(&t, "echo new > sub/s.txt && echo n > sub/n.txt", !root()).is_none() {
            return;
        }
        std::fs::remove_dir_all(t.lower.join("sub")).unwrap();
        std::os::unix::fs::symlink(&t.outside, t.lower.join("sub")).unwrap();
        let done = apply(&layer(&t, !root())).unwrap();
        assert!(!t.outside.join("s.txt").exists() && !t.outside.join("n.txt").exists());
        assert!(done.skipped.iter().any(|s| s.path == t.lower.join("sub")), "{:#?}", done.skipped);
        // A root swapped for another directory is refused whole.
        let mut l = layer(&t, !root());
        l.root_id.1 += 1;
        assert!(apply(&l).is_err());
    }

    #[test]
    fn applying_never_enters_a_host_mount_inside_the_root() {
        // The run wrote into keep/ and removed and remade sub/ in its layer; on the host
        // both are mount points of a directory outside (a volume): applying must
        // neither write into it nor empty it.
        if !root() {
            return eprintln!("SKIP applying_never_enters_a_host_mount_inside_the_root: needs root (a host mount)");
        }
        let t = tree();
        if in_overlay(&t, "echo in > keep/in && rm -rf sub && mkdir sub && echo n > sub/n", false).is_none() {
            return;
        }
        std::fs::write(t.outside.join("kept"), "kept\n").unwrap();
        let mounted: Vec<PathBuf> = ["keep", "sub"].iter().map(|d| t.lower.join(d)).collect();
        for m in &mounted {
            let ok = std::process::Command::new("mount").arg("--bind").arg(&t.outside).arg(m).status();
            assert!(ok.is_ok_and(|s| s.success()), "mount --bind");
        }
        let done = apply(&layer(&t, false));
        for m in &mounted {
            let _ = std::process::Command::new("umount").arg("-l").arg(m).status();
        }
        let done = done.unwrap();
        let mut names: Vec<_> = std::fs::read_dir(&t.outside).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names, ["kept", "victim"], "the layer's changes reached the mounted directory: {done:#?}");
        for m in &mounted {
            assert!(done.skipped.iter().any(|s| &s.path == m), "{} not skipped: {:#?}", m.display(), done.skipped);
        }
    }

    #[test]
    fn a_tree_deeper_than_the_bound_is_skipped_and_its_storage_removed() {
        // A command's tree thousands of levels deep: listing and applying stop at
        // MAX_DEPTH (they exhausted the stack: cordon aborted), say so, and the storage
        // is removed however deep it is (on a thread with a small stack, as a serve
        // worker's).
        let t = tree();
        let script = "python3 -c 'import os\nfor i in range(3000):\n    os.mkdir(\"d\"); os.chdir(\"d\")'";
        if in_overlay(&t, script, !root()).is_none() {
            return;
        }
        let l = layer(&t, !root());
        let (listed, done, removed) = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || {
                let listed = scan(&l).unwrap();
                let done = apply(&l).unwrap();
                (listed, done, remove_storage(&l.upper).is_ok() && remove_storage(&t.work).is_ok() && !l.upper.exists())
            })
            .unwrap()
            .join()
            .expect("no stack overflow");
        for a in [&listed, &done] {
            assert!(a.skipped.iter().any(|s| s.why.contains("more than 256")), "{:?}", a.skipped);
            assert_eq!(a.changes.len(), MAX_DEPTH, "d/ .. d/(256 levels)");
        }
        assert!(removed, "the storage was not removed");
    }
}
