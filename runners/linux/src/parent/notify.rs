//! seccomp user notifications: the parent-side half (receive the listener, read
//! notifications, answer them). cordon answers with an error (a refusal), with
//! `CONTINUE` (the kernel then runs the syscall and its own layers decide: a refusal
//! is never lifted), or with the result of a `connect` it performed itself on the
//! command's socket object ([`take_socket`], [`connect_socket`]) to an address it chose
//! (an allowed unix socket's path, the proxy, the run's own loopback or socket). So the classic time-of-check/
//! time-of-use problem of reading the target's memory cannot widen anything: what is
//! read decides the report and may add a refusal, never an allowance.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// One notification: the syscall a sandboxed task is blocked in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notification {
    /// Cookie to answer with.
    pub id: u64,
    /// The task's pid, in the listener owner's pid namespace.
    pub pid: u32,
    /// Syscall number.
    pub nr: i32,
    /// `AUDIT_ARCH_*`.
    pub arch: u32,
    /// Raw arguments.
    pub args: [u64; 6],
}

#[repr(C)]
#[derive(Default)]
struct SeccompData {
    nr: i32,
    arch: u32,
    instruction_pointer: u64,
    args: [u64; 6],
}

#[repr(C)]
#[derive(Default)]
struct SeccompNotif {
    id: u64,
    pid: u32,
    flags: u32,
    data: SeccompData,
}

#[repr(C)]
struct SeccompNotifResp {
    id: u64,
    val: i64,
    error: i32,
    flags: u32,
}

const IOC_WRITE_READ: u64 = 3;
const IOC_WRITE: u64 = 1;
const fn ioc(dir: u64, nr: u64, size: u64) -> u64 {
    (dir << 30) | (size << 16) | ((b'!' as u64) << 8) | nr
}
const NOTIF_RECV: u64 = ioc(IOC_WRITE_READ, 0, std::mem::size_of::<SeccompNotif>() as u64);
const NOTIF_SEND: u64 = ioc(IOC_WRITE_READ, 1, std::mem::size_of::<SeccompNotifResp>() as u64);
const NOTIF_ID_VALID: u64 = ioc(IOC_WRITE, 2, 8);

/// A close-on-exec `AF_UNIX` socket pair for handing over the listener.
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair fills a two-element array.
    let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds are fresh and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Receive one fd sent with `SCM_RIGHTS` (non-blocking: the child sent it before
/// `spawn` returned); any other fd in the message is closed.
pub fn recv_fd(sock: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    recv_fds(sock).map(|mut fds| fds.swap_remove(0))
}

/// The most fds [`recv_fds`] takes from one message.
const MAX_FDS: usize = 2;

/// Receive the fds sent with `SCM_RIGHTS` in one message (at least one, at most two:
/// the seccomp listener, then the socket diagnostics socket of the command's network
/// namespace when the plan asked for it); non-blocking.
pub fn recv_fds(sock: BorrowedFd<'_>) -> io::Result<Vec<OwnedFd>> {
    let mut control = crate::sys::CmsgBuf { buf: [0; 64] };
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr() as *mut libc::c_void, iov_len: 1 };
    let int = std::mem::size_of::<RawFd>();
    // SAFETY: recvmsg into local buffers; the control message is parsed with the
    // CMSG_* macros within the buffer's bounds and checked for type and length; every
    // fd it carries is owned at once (so none leaks on an error below).
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.buf.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = control.buf.len();
        let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
            || (*cmsg).cmsg_len < libc::CMSG_LEN(RawFd::BITS / 8) as usize
        {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "no descriptor in the message"));
        }
        let payload = ((*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize) / int;
        let mut fds = Vec::with_capacity(payload.min(MAX_FDS));
        for i in 0..payload {
            let mut fd: RawFd = -1;
            std::ptr::copy_nonoverlapping(libc::CMSG_DATA(cmsg).add(i * int), &mut fd as *mut RawFd as *mut u8, int);
            if fd >= 0 {
                fds.push(OwnedFd::from_raw_fd(fd));
            }
        }
        if fds.len() != payload || fds.is_empty() || fds.len() > MAX_FDS {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "bad descriptors in the message"));
        }
        Ok(fds)
    }
}

/// Receive the next notification (call when the listener is readable).
pub fn recv(listener: BorrowedFd<'_>) -> io::Result<Notification> {
    let mut n = SeccompNotif::default();
    // SAFETY: ioctl(NOTIF_RECV) fills a zeroed struct of the size the request encodes.
    let r = unsafe { libc::ioctl(listener.as_raw_fd(), NOTIF_RECV as _, &mut n as *mut SeccompNotif) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Notification { id: n.id, pid: n.pid, nr: n.data.nr, arch: n.data.arch, args: n.data.args })
}

/// Whether notification `id` is still pending (its task has not died or been
/// interrupted): check after reading the task's memory.
pub fn id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    let mut id = id;
    // SAFETY: ioctl(NOTIF_ID_VALID) reads a u64.
    unsafe { libc::ioctl(listener.as_raw_fd(), NOTIF_ID_VALID as _, &mut id as *mut u64) == 0 }
}

/// Complete the syscall with return value `val` (no error): the supervisor did the
/// work itself (see [`connect_on_behalf`]).
pub fn respond_value(listener: BorrowedFd<'_>, id: u64, val: i64) -> io::Result<()> {
    let mut resp = SeccompNotifResp { id, val, error: 0, flags: 0 };
    // SAFETY: ioctl(NOTIF_SEND) reads a response struct of the encoded size.
    let r = unsafe { libc::ioctl(listener.as_raw_fd(), NOTIF_SEND as _, &mut resp as *mut SeccompNotifResp) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `PIDFD_THREAD` (`O_EXCL`, Linux 6.9): a pidfd for a thread, so that
/// `pidfd_getfd` reads that thread's own descriptor table.
const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

/// Connect the socket `fd` of thread `tid` (blocked in a notified `connect()`) to
/// `addr`, a complete `sockaddr` the supervisor chose: the socket is taken with
/// `pidfd_getfd` from that thread's descriptor table (the same open file, so the
/// command's socket is the one that connects) and connected here, never letting the
/// kernel re-read the command's memory. The connect runs non-blocking and is waited
/// for in slices of [`CONNECT_SLICE_MS`]; between slices `still_waiting()` is asked
/// (the supervisor answers whether the command is still blocked in the call), so a
/// peer that never accepts cannot hold the supervisor after the command is gone. The
/// socket's own file flags are restored before returning.
pub fn connect_on_behalf(tid: u32, fd: u64, addr: &[u8], still_waiting: impl Fn() -> bool) -> io::Result<()> {
    let sock = take_socket(tid, fd)?;
    connect_socket(sock.as_fd(), addr, still_waiting)
}

/// The open file behind descriptor `fd` of thread `tid` (blocked in a notified
/// syscall), duplicated into this process with `pidfd_getfd` from that thread's own
/// descriptor table: the object the command named, whatever the number names later.
pub fn take_socket(tid: u32, fd: u64) -> io::Result<OwnedFd> {
    let target_fd = i32::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    let tid = libc::pid_t::try_from(tid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    let pidfd = match pidfd_open(tid, PIDFD_THREAD) {
        Ok(fd) => fd,
        // Before Linux 6.9 the flag is unknown.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => leader_sharing_files(tid)?,
        Err(e) => return Err(e),
    };
    // SAFETY: pidfd_getfd with integer arguments.
    let sock = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target_fd, 0) };
    if sock < 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
    // SAFETY: the kernel returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(sock as RawFd) })
}

fn pidfd_open(pid: libc::pid_t, flags: libc::c_uint) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
    // SAFETY: the kernel returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `KCMP_FILES` from `<linux/kcmp.h>`.
const KCMP_FILES: libc::c_int = 2;

/// Without `PIDFD_THREAD` (before Linux 6.9) only a thread-group leader has a pidfd:
/// the leader's of `tid`, when `tid` shares its descriptor table (`kcmp(KCMP_FILES)`;
/// threads made by `pthread_create` always do, and the command cannot unshare it:
/// seccomp refuses `unshare`). Otherwise `EINVAL`: never another table than the
/// thread's own.
pub(crate) fn leader_sharing_files(tid: libc::pid_t) -> io::Result<OwnedFd> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
    let tgid = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse::<libc::pid_t>().ok())
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
    if tgid != tid {
        // SAFETY: kcmp with integer arguments.
        let same = unsafe { libc::syscall(libc::SYS_kcmp, tgid, tid, KCMP_FILES, 0, 0) };
        if same != 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
    }
    pidfd_open(tgid, 0)
}

/// Connect `sock` (taken from the command with [`take_socket`]) to `addr`, a complete
/// `sockaddr` the supervisor chose, waiting as [`connect_on_behalf`] describes.
pub fn connect_socket(sock: BorrowedFd<'_>, addr: &[u8], still_waiting: impl Fn() -> bool) -> io::Result<()> {
    let len = libc::socklen_t::try_from(addr.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    if addr.len() < 2 || addr.len() > std::mem::size_of::<libc::sockaddr_storage>() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // A properly aligned copy of the address.
    // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    // SAFETY: copying `addr.len()` bytes (checked above to fit) into the storage.
    unsafe {
        std::ptr::copy_nonoverlapping(addr.as_ptr(), &mut storage as *mut _ as *mut u8, addr.len());
    }
    // SAFETY: fcntl(F_GETFL) on a borrowed, open fd.
    let flags = unsafe { libc::fcntl(sock.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let blocking = flags & libc::O_NONBLOCK == 0;
    // SAFETY: fcntl(F_SETFL) on a borrowed, open fd (the flag is restored below).
    if blocking && unsafe { libc::fcntl(sock.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let result = connect_wait(sock, &storage, len, blocking, &still_waiting);
    if blocking {
        // SAFETY: fcntl(F_SETFL) restoring the flags read above.
        unsafe { libc::fcntl(sock.as_raw_fd(), libc::F_SETFL, flags) };
    }
    result
}

/// How long one wait for a pending connect lasts before the supervisor checks that
/// the command is still waiting for it.
pub const CONNECT_SLICE_MS: i32 = 100;

fn connect_wait(
    sock: BorrowedFd<'_>,
    storage: &libc::sockaddr_storage,
    len: libc::socklen_t,
    blocking: bool,
    still_waiting: &impl Fn() -> bool,
) -> io::Result<()> {
    loop {
        // SAFETY: connect with a valid socket and an address of the given length.
        let r = unsafe {
            libc::connect(sock.as_raw_fd(), storage as *const libc::sockaddr_storage as *const libc::sockaddr, len)
        };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        let pending = matches!(e.raw_os_error(), Some(libc::EINPROGRESS) | Some(libc::EAGAIN) | Some(libc::EALREADY));
        if !blocking || !pending {
            // A non-blocking socket gets the kernel's own answer (EINPROGRESS ...).
            return Err(e);
        }
        // The command asked for a blocking connect: wait for it, in slices.
        if !still_waiting() {
            return Err(io::Error::from_raw_os_error(libc::EINTR));
        }
        if e.raw_os_error() == Some(libc::EAGAIN) {
            // A unix listener's full backlog: nothing to poll on; try again later.
            std::thread::sleep(std::time::Duration::from_millis(CONNECT_SLICE_MS.unsigned_abs().into()));
            continue;
        }
        loop {
            let mut p = libc::pollfd { fd: sock.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
            // SAFETY: poll on one pollfd we own.
            let n = unsafe { libc::poll(&mut p, 1, CONNECT_SLICE_MS) };
            if n > 0 {
                break;
            }
            if !still_waiting() {
                return Err(io::Error::from_raw_os_error(libc::EINTR));
            }
        }
        // TCP: the outcome is in SO_ERROR.
        {
            let mut err: libc::c_int = 0;
            let mut l = libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).unwrap_or(4);
            // SAFETY: getsockopt into a local int of the given size.
            let r = unsafe {
                libc::getsockopt(
                    sock.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_ERROR,
                    &mut err as *mut libc::c_int as *mut libc::c_void,
                    &mut l,
                )
            };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
            return if err == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(err)) };
        }
    }
}

/// Fail the syscall with `errno`.
pub fn respond_error(listener: BorrowedFd<'_>, id: u64, errno: i32) -> io::Result<()> {
    // A refusal must carry an errno: 0 would make the syscall report success.
    let errno = if errno > 0 { errno } else { libc::EPERM };
    let mut resp = SeccompNotifResp { id, val: 0, error: -errno, flags: 0 };
    // SAFETY: ioctl(NOTIF_SEND) reads a response struct of the encoded size.
    let r = unsafe { libc::ioctl(listener.as_raw_fd(), NOTIF_SEND as _, &mut resp as *mut SeccompNotifResp) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `SECCOMP_USER_NOTIF_FLAG_CONTINUE`.
const FLAG_CONTINUE: u32 = 1;
/// `SECCOMP_IOCTL_NOTIF_SET_FLAGS`.
const NOTIF_SET_FLAGS: u64 = ioc(IOC_WRITE, 4, 8);
/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6).
const FD_SYNC_WAKE_UP: u64 = 1;

/// Let the kernel run the syscall as if no filter had asked (the supervisor adds no
/// refusal). The kernel's own checks (Landlock, mounts, permissions) still apply:
/// they run after this answer, on the memory the task holds then.
pub fn respond_continue(listener: BorrowedFd<'_>, id: u64) -> io::Result<()> {
    let mut resp = SeccompNotifResp { id, val: 0, error: 0, flags: FLAG_CONTINUE };
    // SAFETY: ioctl(NOTIF_SEND) reads a response struct of the encoded size.
    let r = unsafe { libc::ioctl(listener.as_raw_fd(), NOTIF_SEND as _, &mut resp as *mut SeccompNotifResp) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Ask the kernel to wake the supervisor and the notifying task synchronously (on
/// the same CPU): several times cheaper per notification when one supervisor thread
/// answers one task at a time. Fails harmlessly (`EINVAL`) before Linux 6.6.
pub fn set_sync_wakeup(listener: BorrowedFd<'_>) -> io::Result<()> {
    // The kernel takes the flags as the ioctl's argument itself, not through a pointer
    // (a pointer's value is refused as unknown flags: EINVAL).
    // SAFETY: ioctl(NOTIF_SET_FLAGS) with an integer argument.
    let r = unsafe { libc::ioctl(listener.as_raw_fd(), NOTIF_SET_FLAGS as _, FD_SYNC_WAKE_UP as libc::c_ulong) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `process_vm_readv` was refused while `/proc/<pid>/mem` worked (a container's
/// seccomp profile, Docker's default among them, refuses the former without
/// `CAP_SYS_PTRACE`): later reads go straight to the file.
static VM_READV_REFUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Read up to `buf.len()` bytes of task `pid`'s memory at `addr`: one
/// `process_vm_readv`, or, where that system call is refused (`EPERM`, `ENOSYS`: a
/// seccomp profile), a `pread` of `/proc/<pid>/mem` (the kernel's same ptrace-mode
/// check, through the file system: allowed to the tracer-like parent cordon is). A
/// read that crosses into an unmapped page returns what it got before it. Returns
/// the number of bytes read.
pub fn read_memory(pid: u32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    use std::sync::atomic::Ordering::Relaxed;
    if buf.is_empty() {
        return Ok(0);
    }
    if VM_READV_REFUSED.load(Relaxed) {
        return read_proc_mem(pid, addr, buf);
    }
    match vm_readv(pid, addr, buf) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::ENOSYS)) => {
            let n = read_proc_mem(pid, addr, buf)?;
            VM_READV_REFUSED.store(true, Relaxed);
            Ok(n)
        }
        other => other,
    }
}

fn vm_readv(pid: u32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    let local = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
    let Ok(addr) = usize::try_from(addr) else {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: the local iovec covers `buf`, which outlives the call; the remote one
    // is only read by the kernel, in the other process, with its own checks.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// `pread` of `/proc/<pid>/mem` at `addr` (no system call beyond open, pread, close).
fn read_proc_mem(pid: u32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(format!("/proc/{pid}/mem"))?;
    file.read_at(buf, addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_pidfd_thread_a_thread_is_named_by_its_leader_when_it_shares_the_table() {
        use std::os::fd::AsFd;
        let file = std::fs::File::open("/proc/self/status").unwrap();
        let raw = file.as_raw_fd();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no arguments.
            tx.send(unsafe { libc::gettid() }).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
        });
        let tid = rx.recv().unwrap();
        let pidfd = leader_sharing_files(tid).unwrap();
        // SAFETY: pidfd_getfd with integer arguments.
        let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), raw, 0) };
        assert!(got >= 0, "{}", io::Error::last_os_error());
        #[allow(clippy::cast_possible_truncation)]
        // SAFETY: a fresh fd.
        let got = unsafe { OwnedFd::from_raw_fd(got as RawFd) };
        let id = |fd: BorrowedFd<'_>| crate::FileIdentity::of_fd(fd.as_raw_fd()).unwrap();
        assert_eq!(id(got.as_fd()), id(file.as_fd()));
        t.join().unwrap();
    }
}
