//! The run's own sockets, seen from cordon's supervisor: which unix sockets listen in
//! the run's network namespace (socket diagnostics), what a socket taken from the
//! command is (family, type, network namespace), and a path resolved in the command's
//! own view (its root).
//!
//! What it does not do: decide. The supervisor (`cordon`'s `denials`) compares these
//! facts and performs or refuses a `connect()`.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// `SO_NETNS_COOKIE` from `<asm-generic/socket.h>` (Linux 5.14): the cookie of the
/// network namespace a socket lives in.
const SO_NETNS_COOKIE: libc::c_int = 71;
/// `SOCK_DIAG_BY_FAMILY` from `<linux/sock_diag.h>`.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `UDIAG_SHOW_VFS` from `<linux/unix_diag.h>`: report the bound file's identity.
const UDIAG_SHOW_VFS: u32 = 0x2;
/// `UNIX_DIAG_VFS`, the attribute carrying it.
const UNIX_DIAG_VFS: u16 = 1;
/// `TCP_LISTEN`: the state a listening socket reports (unix ones too).
pub const TCP_LISTEN: u32 = 10;
/// How long one diagnostics answer may take before the query fails, in seconds.
const DIAG_TIMEOUT_S: libc::time_t = 1;

/// `size_of::<T>()` as a `socklen_t` (the option values here are a few bytes).
fn len_of<T>() -> libc::socklen_t {
    libc::socklen_t::try_from(std::mem::size_of::<T>()).unwrap_or(libc::socklen_t::MAX)
}

/// What a socket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketInfo {
    /// `SO_DOMAIN` (`AF_UNIX`, `AF_INET`, ...).
    pub domain: i32,
    /// `SO_TYPE` (`SOCK_STREAM`, ...).
    pub ty: i32,
    /// The cookie of its network namespace (`SO_NETNS_COOKIE`).
    pub netns_cookie: u64,
}

fn sockopt_int(fd: RawFd, opt: libc::c_int) -> io::Result<i32> {
    let mut v: libc::c_int = 0;
    let mut len = len_of::<libc::c_int>();
    // SAFETY: getsockopt into a local int of the given size.
    let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, opt, &mut v as *mut libc::c_int as *mut _, &mut len) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

/// The cookie of the network namespace socket `fd` lives in.
pub fn netns_cookie(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut v: u64 = 0;
    let mut len = len_of::<u64>();
    // SAFETY: getsockopt into a local u64 of the given size.
    let r = unsafe {
        libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, SO_NETNS_COOKIE, &mut v as *mut u64 as *mut _, &mut len)
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

/// Family, type and network namespace of socket `fd`.
pub fn socket_info(fd: BorrowedFd<'_>) -> io::Result<SocketInfo> {
    Ok(SocketInfo {
        domain: sockopt_int(fd.as_raw_fd(), libc::SO_DOMAIN)?,
        ty: sockopt_int(fd.as_raw_fd(), libc::SO_TYPE)?,
        netns_cookie: netns_cookie(fd)?,
    })
}

/// The identity of a file bound by a listening unix socket, as socket diagnostics
/// report it: the kernel's device number (`MKDEV`: major in the top 12 bits, minor in
/// the low 20) and the low 32 bits of the inode number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BoundFile {
    /// `udiag_vfs_dev`.
    pub dev: u32,
    /// `udiag_vfs_ino`.
    pub ino: u32,
}

impl BoundFile {
    /// The identity a file with `st_dev`/`st_ino` would have in a diagnostics answer;
    /// `None` for a device number the kernel's 32-bit form cannot hold.
    pub fn of_stat(dev: u64, ino: u64) -> Option<BoundFile> {
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        if major >= 1 << 12 || minor >= 1 << 20 {
            return None;
        }
        #[allow(clippy::cast_possible_truncation, reason = "the diagnostics carry the inode's low 32 bits")]
        Some(BoundFile { dev: (major << 20) | minor, ino: ino as u32 })
    }
}

/// Prepare a socket diagnostics socket received from the stage: a receive timeout,
/// so a query cannot hold the supervisor.
pub fn prepare_diag(diag: BorrowedFd<'_>) -> io::Result<()> {
    let tv = libc::timeval { tv_sec: DIAG_TIMEOUT_S, tv_usec: 0 };
    // SAFETY: setsockopt with a local timeval of the given size.
    let r = unsafe {
        libc::setsockopt(
            diag.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const _,
            len_of::<libc::timeval>(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The files bound by every listening unix socket of the network namespace that
/// `diag` (a `NETLINK_SOCK_DIAG` socket) was created in: one dump request
/// (`SOCK_DIAG_BY_FAMILY`, `AF_UNIX`, listening sockets, `UDIAG_SHOW_VFS`), read to
/// its end. `seq` tags the request; answers to another (an earlier, abandoned one)
/// are skipped. Abstract and unnamed sockets have no file and are not listed.
pub fn unix_listeners(diag: BorrowedFd<'_>, seq: u32) -> io::Result<Vec<BoundFile>> {
    let mut req = [0u8; 40];
    req[0..4].copy_from_slice(&40u32.to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    #[allow(clippy::cast_possible_truncation, reason = "NLM_F_* fit in 16 bits")]
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    req[6..8].copy_from_slice(&flags.to_ne_bytes());
    req[8..12].copy_from_slice(&seq.to_ne_bytes());
    // struct unix_diag_req: family, protocol, pad, states, ino, show, cookie[2].
    #[allow(clippy::cast_possible_truncation, reason = "AF_UNIX is 1")]
    {
        req[16] = libc::AF_UNIX as u8;
    }
    req[20..24].copy_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes());
    req[28..32].copy_from_slice(&UDIAG_SHOW_VFS.to_ne_bytes());
    req[32..40].fill(0xff);
    let mut out = Vec::new();
    dump(diag, &req, seq, |body| out.extend(bound_file(body)))?;
    Ok(out)
}

/// The local addresses and ports of the IP sockets (`AF_INET` or `AF_INET6`, per
/// `family`; TCP or UDP, per `protocol`) of the network namespace `diag` was created
/// in, in the TCP states `states` (a bit mask, `1 << TCP_LISTEN` for listeners; UDP
/// sockets report `TCP_CLOSE` when unconnected): one `inet_diag` dump, read to its end.
pub fn inet_sockets(
    diag: BorrowedFd<'_>,
    seq: u32,
    family: u8,
    protocol: u8,
    states: u32,
) -> io::Result<Vec<std::net::SocketAddr>> {
    // nlmsghdr (16) + struct inet_diag_req_v2 (56).
    let mut req = [0u8; 72];
    req[0..4].copy_from_slice(&72u32.to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    #[allow(clippy::cast_possible_truncation, reason = "NLM_F_* fit in 16 bits")]
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    req[6..8].copy_from_slice(&flags.to_ne_bytes());
    req[8..12].copy_from_slice(&seq.to_ne_bytes());
    req[16] = family;
    req[17] = protocol;
    req[20..24].copy_from_slice(&states.to_ne_bytes());
    let mut out = Vec::new();
    dump(diag, &req, seq, |body| {
        // struct inet_diag_msg: family, state, timer, retrans, then inet_diag_sockid:
        // sport (be16), dport, src[16], dst[16], if, cookie.
        if body.len() < 24 {
            return;
        }
        let port = u16::from_be_bytes([body[4], body[5]]);
        let ip = match i32::from(body[0]) {
            libc::AF_INET => std::net::IpAddr::from([body[8], body[9], body[10], body[11]]),
            libc::AF_INET6 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(&body[8..24]);
                std::net::IpAddr::from(a)
            }
            _ => return,
        };
        out.push(std::net::SocketAddr::new(ip, port));
    })?;
    Ok(out)
}

/// Send one dump request and read its answers to `NLMSG_DONE`, handing each
/// `SOCK_DIAG_BY_FAMILY` body to `each` (answers to another sequence number are
/// skipped).
fn dump(diag: BorrowedFd<'_>, req: &[u8], seq: u32, mut each: impl FnMut(&[u8])) -> io::Result<()> {
    // SAFETY: send of a local buffer of the given length (to the kernel: a netlink
    // socket's default destination).
    let n = unsafe { libc::send(diag.as_raw_fd(), req.as_ptr() as *const _, req.len(), 0) };
    if n != req.len() as isize {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        // SAFETY: recv into a local buffer of the given length.
        let n = unsafe { libc::recv(diag.as_raw_fd(), buf.as_mut_ptr() as *mut _, buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        let mut msg = &buf[..n.unsigned_abs()];
        if msg.is_empty() {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        while msg.len() >= 16 {
            let len = u32::from_ne_bytes([msg[0], msg[1], msg[2], msg[3]]) as usize;
            let ty = u16::from_ne_bytes([msg[4], msg[5]]);
            let got_seq = u32::from_ne_bytes([msg[8], msg[9], msg[10], msg[11]]);
            if len < 16 || len > msg.len() {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            let body = &msg[16..len];
            if got_seq == seq {
                match i32::from(ty) {
                    libc::NLMSG_DONE => return Ok(()),
                    libc::NLMSG_ERROR => {
                        let code = body.get(..4).map_or(-libc::EIO, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                        return Err(io::Error::from_raw_os_error(if code < 0 { -code } else { libc::EIO }));
                    }
                    _ if ty == SOCK_DIAG_BY_FAMILY => each(body),
                    _ => {}
                }
            }
            let next = (len + 3) & !3;
            msg = msg.get(next..).unwrap_or(&[]);
        }
    }
}

/// The `UNIX_DIAG_VFS` attribute of one answer (`struct unix_diag_msg`, 16 bytes, then
/// attributes aligned to 4).
fn bound_file(body: &[u8]) -> Option<BoundFile> {
    let mut attrs = body.get(16..)?;
    while attrs.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([attrs[0], attrs[1]]));
        let ty = u16::from_ne_bytes([attrs[2], attrs[3]]);
        if len < 4 || len > attrs.len() {
            return None;
        }
        if ty == UNIX_DIAG_VFS && len >= 12 {
            let ino = u32::from_ne_bytes([attrs[4], attrs[5], attrs[6], attrs[7]]);
            let dev = u32::from_ne_bytes([attrs[8], attrs[9], attrs[10], attrs[11]]);
            return Some(BoundFile { dev, ino });
        }
        attrs = attrs.get((len + 3) & !3..).unwrap_or(&[]);
    }
    None
}

/// `openat2(root, path, O_PATH | O_CLOEXEC, RESOLVE_IN_ROOT)`: `path` resolved as a
/// process whose root is `root` resolves it (absolute symbolic links and `..` stay
/// inside; the kernel refuses magic links under this flag), following a last
/// symbolic link as `connect()` does.
pub fn open_in_root(root: BorrowedFd<'_>, path: &CStr) -> io::Result<OwnedFd> {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow { flags: (libc::O_PATH | libc::O_CLOEXEC) as u64, mode: 0, resolve: libc::RESOLVE_IN_ROOT };
    // SAFETY: openat2 with a NUL-terminated path and a local open_how whose size is
    // passed alongside.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
    // SAFETY: the kernel returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_device_number_is_recomputed_from_stat() {
        assert_eq!(BoundFile::of_stat(libc::makedev(0, 27), 5), Some(BoundFile { dev: 27, ino: 5 }));
        assert_eq!(BoundFile::of_stat(libc::makedev(8, 1), 1 << 33 | 7), Some(BoundFile { dev: 8 << 20 | 1, ino: 7 }));
        assert_eq!(BoundFile::of_stat(libc::makedev(0, 300), 1), Some(BoundFile { dev: 300, ino: 1 }));
    }

    #[test]
    fn a_listener_bound_here_is_listed_with_its_file() {
        use std::os::fd::AsFd;
        use std::os::unix::fs::MetadataExt;
        // SAFETY: socket with integer arguments.
        let fd =
            unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_SOCK_DIAG) };
        assert!(fd >= 0, "{}", io::Error::last_os_error());
        // SAFETY: a fresh fd.
        let diag = unsafe { OwnedFd::from_raw_fd(fd) };
        prepare_diag(diag.as_fd()).unwrap();
        let dir = std::env::temp_dir().join(format!("cordon-diag-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("s");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let m = std::fs::metadata(&path).unwrap();
        let want = BoundFile::of_stat(m.dev(), m.ino()).unwrap();
        let got = unix_listeners(diag.as_fd(), 7).unwrap();
        assert!(got.contains(&want), "{want:?} not in {got:?}");
        let info = socket_info(listener.as_fd()).unwrap();
        assert_eq!((info.domain, info.ty), (libc::AF_UNIX, libc::SOCK_STREAM));
        assert_eq!(info.netns_cookie, netns_cookie(diag.as_fd()).unwrap());
        drop(listener);
        assert!(!unix_listeners(diag.as_fd(), 8).unwrap().contains(&want), "a closed listener is still listed");
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = tcp.local_addr().unwrap();
        #[allow(clippy::cast_possible_truncation)]
        let (inet, tcp_proto) = (libc::AF_INET as u8, libc::IPPROTO_TCP as u8);
        let listening = inet_sockets(diag.as_fd(), 9, inet, tcp_proto, 1 << TCP_LISTEN).unwrap();
        assert!(listening.contains(&at), "{at} not in {listening:?}");
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        #[allow(clippy::cast_possible_truncation)]
        let udp_proto = libc::IPPROTO_UDP as u8;
        let bound = inet_sockets(diag.as_fd(), 10, inet, udp_proto, u32::MAX).unwrap();
        assert!(bound.contains(&udp.local_addr().unwrap()), "{bound:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
