//! A run's standard streams: the collectors that drain captured output (`drain`),
//! the caller's descriptors handed to the command or relayed through cordon
//! (`handover`, `relay_files`: a named FIFO, a root-owned terminal), the null stdin of
//! a confined run, and the descriptor helpers every launch path uses.

use super::relay::Stream;
use super::*;

pub(super) async fn drain(fd: OwnedFd, capture: StreamCapture) {
    let Ok(mut rx) = tokio::net::unix::pipe::Receiver::from_owned_fd(fd) else { return };
    // `read_buf` fills spare capacity without zeroing it first.
    let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    loop {
        buf.clear();
        match rx.read_buf(&mut buf).await {
            Ok(0) => break,
            Ok(_) => capture.push(&buf),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
}

/// What a confined command may be handed of the caller's stdio descriptor `fd`.
///
/// An anonymous pipe or a socket as it is. Anything else is an inode on one of the
/// host's own mounts, not on the sandbox's read-only view: holding it, the command
/// could `fchmod` it (or `chmod` it through `/proc/self/fd/N`) when it owns it, i.e.
/// as root for every root-owned file (a setuid binary of its making, a host
/// `/dev/null` no one else may open); change its times or extended attributes; and
/// with Landlock below ABI 2 or 3 write, truncate it or create entries under a
/// directory outside its writable roots (found by attack reviews). So a regular file,
/// a directory or a named FIFO is relayed through a pipe; a character device the
/// command would own (cordon as root) is replaced: `/dev/null` by [`root_null`], any
/// other (a terminal) by the same device through a private read-only mount; where
/// neither can be had it is relayed, except an unprivileged user's own terminal,
/// which an interactive command needs as it is (its owner may change its mode:
/// docs/guarantees.md). A device the command does not own it cannot chmod.
#[allow(
    clippy::cast_possible_wrap,
    clippy::unnecessary_cast,
    reason = "f_type and st_uid widths differ between platforms"
)]
pub(super) fn handover(fd: &OwnedFd, state_dir: &Path) -> Handover {
    use nix::sys::stat::SFlag;
    #[cfg(not(target_os = "linux"))]
    let _ = state_dir;
    /// `PIPEFS_MAGIC` from `<linux/magic.h>`.
    #[cfg(target_os = "linux")]
    const PIPEFS_MAGIC: i64 = 0x5049_5045;
    let Ok(st) = nix::sys::stat::fstat(fd) else { return Handover::Relay };
    let Ok(flags) = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL) else { return Handover::Relay };
    #[cfg(not(target_os = "linux"))]
    let _ = flags;
    // A path, not an open stream (of a socket file, say): nothing to read or write.
    #[cfg(target_os = "linux")]
    if flags & libc::O_PATH != 0 {
        return Handover::Relay;
    }
    let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    if kind == SFlag::S_IFSOCK {
        return Handover::Keep;
    }
    if kind == SFlag::S_IFIFO {
        // An anonymous pipe lives on pipefs, a named FIFO on a host file system.
        #[cfg(target_os = "linux")]
        let anonymous = nix::sys::statfs::fstatfs(fd).is_ok_and(|f| f.filesystem_type().0 as i64 == PIPEFS_MAGIC);
        // (macOS: not told apart; a named FIFO is rare and a relay of every pipe costly.)
        #[cfg(not(target_os = "linux"))]
        let anonymous = true;
        return if anonymous { Handover::Keep } else { Handover::Relay };
    }
    if kind != SFlag::S_IFCHR {
        return Handover::Relay;
    }
    if st.st_uid as u32 != nix::unistd::geteuid().as_raw() {
        return Handover::Keep;
    }
    #[cfg(target_os = "linux")]
    {
        // `/dev/null` (the usual `> /dev/null`) as the default stdin is: one open,
        // where a reopen costs ~0.15 ms (it makes a mount).
        let replaced = if st.st_rdev == libc::makedev(1, 3) { root_null(state_dir) } else { None };
        if let Some(fd) = replaced.or_else(|| cordon_stage::fds::reopen_read_only_mount(fd.as_raw_fd(), flags).ok()) {
            return Handover::Reopened(fd);
        }
    }
    // A terminal the command would own and no read-only mount for it: as root every
    // shared terminal node (`/dev/tty` without a controlling terminal, a pty master)
    // is root's, so it is relayed too, at the cost of the command's terminal; an
    // unprivileged user's own terminal is handed over (docs/guarantees.md).
    if nix::unistd::isatty(fd).unwrap_or(false) && !nix::unistd::geteuid().is_root() {
        Handover::Keep
    } else {
        Handover::Relay
    }
}

/// See [`handover`].
pub(super) enum Handover {
    Keep,
    Relay,
    /// The same device, through a private read-only mount (Linux).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Reopened(OwnedFd),
}

/// The command's stdout and stderr for a confined live run ([`handover`]): each to
/// be relayed replaced by a pipe whose contents cordon copies to it (recorded in
/// `relays` as `(pipe's read end, destination, stream)`). Both the same file
/// (`> f 2>&1`): one pipe for both, so that their order is kept.
pub(super) fn relay_files(
    out: [OwnedFd; 2],
    state_dir: &Path,
    relays: &mut Vec<(OwnedFd, OwnedFd, Stream)>,
) -> Result<[OwnedFd; 2], CordonError> {
    let same_file = |a: &OwnedFd, b: &OwnedFd| match (nix::sys::stat::fstat(a), nix::sys::stat::fstat(b)) {
        (Ok(x), Ok(y)) => x.st_dev == y.st_dev && x.st_ino == y.st_ino,
        _ => false,
    };
    let [o, e] = out;
    let (ho, he) = (handover(&o, state_dir), handover(&e, state_dir));
    if matches!((&ho, &he), (Handover::Relay, Handover::Relay)) && same_file(&o, &e) {
        let (r, w) = pipe()?;
        let w = above_stdio(w)?;
        let w2 = dup_cloexec(w.as_fd()).map_err(|e| CordonError::io("duplicating a pipe", e))?;
        relays.push((r, o, Stream::Stdout));
        drop(e);
        return Ok([w, w2]);
    }
    let mut one = |fd: OwnedFd, h: Handover, stream: Stream| -> Result<OwnedFd, CordonError> {
        match h {
            Handover::Keep => Ok(fd),
            Handover::Reopened(ro) => above_stdio(ro),
            Handover::Relay => {
                let (r, w) = pipe()?;
                relays.push((r, fd, stream));
                above_stdio(w)
            }
        }
    };
    Ok([one(o, ho, Stream::Stdout)?, one(e, he, Stream::Stderr)?])
}

/// The command's stdin when the caller gives none: `/dev/null`, which a command
/// running as root could `fchmod` through the host's mount of it ([`handover`]). So a
/// confined run as root gets [`root_null`], or where that cannot be had an empty pipe
/// (also end-of-file at once; some tools, e.g. ripgrep, treat a pipe as input to read
/// instead of the directory).
pub(super) fn null_stdin(confined: bool, state_dir: &Path) -> Result<OwnedFd, CordonError> {
    if !confined || !nix::unistd::geteuid().is_root() {
        let null = std::fs::File::open("/dev/null").map_err(|e| CordonError::io("opening /dev/null", e))?;
        return above_stdio(null.into());
    }
    match root_null(state_dir) {
        Some(fd) => above_stdio(fd),
        None => above_stdio(pipe()?.0),
    }
}

/// A null device a command running as root may hold without reaching the host's:
/// cordon's own node ([`private_null`]), else the host's `/dev/null` through this
/// process's read-only mount of it ([`read_only_null`]).
pub(super) fn root_null(state_dir: &Path) -> Option<OwnedFd> {
    if let Some(fd) = private_null(state_dir) {
        return Some(fd);
    }
    #[cfg(target_os = "linux")]
    if let Some(fd) = read_only_null() {
        return dup_cloexec(fd.as_fd()).ok();
    }
    None
}

/// cordon's own null device (root only): a node `null` (character device 1:3) in
/// cordon's private state directory, made once with `mknod` and opened for reading
/// and writing. It behaves as `/dev/null` and is a character device (as tools such as
/// ripgrep expect of an empty stdin), and it is no one else's: a command that changes
/// its mode or times changes nothing the host uses. One `open`, where a read-only
/// reopen of the host's node makes a mount (~0.15 ms). `None` when it cannot be made
/// or opened (the state directory on a `nodev` file system) or is not that device.
#[cfg(not(target_os = "linux"))]
pub(super) fn private_null(_state_dir: &Path) -> Option<OwnedFd> {
    None
}

/// The Linux implementation of the above (`mknod` of the null device's number).
#[cfg(target_os = "linux")]
pub(super) fn private_null(state_dir: &Path) -> Option<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = state_dir.join("null");
    let open = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOCTTY)
            .open(&path)
    };
    let file = match open() {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let kind = nix::sys::stat::SFlag::S_IFCHR;
            let mode = nix::sys::stat::Mode::from_bits_truncate(0o666);
            let _ = nix::sys::stat::mknod(&path, kind, mode, nix::sys::stat::makedev(1, 3));
            open().ok()?
        }
        Err(_) => return None,
    };
    let st = nix::sys::stat::fstat(&file).ok()?;
    let is_char = nix::sys::stat::SFlag::from_bits_truncate(st.st_mode) & nix::sys::stat::SFlag::S_IFMT
        == nix::sys::stat::SFlag::S_IFCHR;
    (is_char && st.st_rdev == nix::sys::stat::makedev(1, 3)).then(|| file.into())
}

/// The host's `/dev/null`, open for reading and writing through a private read-only
/// mount ([`cordon_stage::fds::reopen_read_only_mount`]), made once per process and
/// shared by every run's stdio that is `/dev/null` (it has no state to share). `None`
/// where no such mount can be made (no `CAP_SYS_ADMIN`).
#[cfg(target_os = "linux")]
pub(super) fn read_only_null() -> Option<&'static OwnedFd> {
    static READ_ONLY_NULL: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    READ_ONLY_NULL
        .get_or_init(|| {
            let null = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null").ok()?;
            cordon_stage::fds::reopen_read_only_mount(null.as_raw_fd(), libc::O_RDWR).ok()
        })
        .as_ref()
}

pub(super) fn pipe() -> Result<(OwnedFd, OwnedFd), CordonError> {
    #[cfg(target_os = "linux")]
    let pipe = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC);
    // macOS has no pipe2: close-on-exec is set right after (every spawn off Linux
    // goes through `direct`, whose spawn closes what is not close-on-exec too).
    #[cfg(not(target_os = "linux"))]
    let pipe = nix::unistd::pipe().and_then(|(r, w)| {
        for fd in [&r, &w] {
            nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC))?;
        }
        Ok((r, w))
    });
    pipe.map_err(|e| CordonError::io("creating a pipe", std::io::Error::from_raw_os_error(e as i32)))
}

/// Duplicate `fd`, close-on-exec, to a number above 2.
pub(super) fn dup_cloexec(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
    #[cfg(target_os = "linux")]
    return cordon_stage::fds::dup_cloexec(fd.as_raw_fd());
    // std duplicates with F_DUPFD_CLOEXEC from 3 upwards.
    #[cfg(not(target_os = "linux"))]
    return fd.try_clone_to_owned();
}

/// Duplicate `fd` to a number above 2 (the stage requires it), close-on-exec.
pub(super) fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, CordonError> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    dup_cloexec(fd.as_fd()).map_err(|e| CordonError::io("duplicating a descriptor", e))
}
