//! Sockets with any family, type and protocol number, and addresses passed as the raw
//! bytes of a `struct sockaddr_*` (the caller builds them: the point is to try what
//! `std` would never produce).

use super::{cvt, own_fd};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// A socket address as the kernel reads it: the bytes of a `struct sockaddr_*`, kept
/// aligned like `sockaddr_storage`.
#[repr(C, align(8))]
#[derive(Clone, Debug)]
pub struct RawAddr {
    buf: [u8; 128],
    len: usize,
}

impl RawAddr {
    /// An address from its bytes (at most 128, the size of `sockaddr_storage`).
    pub fn new(bytes: &[u8]) -> Option<RawAddr> {
        let mut buf = [0u8; 128];
        buf.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(RawAddr { buf, len: bytes.len() })
    }

    fn ptr(&self) -> *const libc::sockaddr {
        self.buf.as_ptr().cast()
    }

    fn socklen(&self) -> libc::socklen_t {
        // At most 128 (checked in `new`).
        libc::socklen_t::try_from(self.len).unwrap_or(0)
    }
}

/// `socket(family, ty | SOCK_CLOEXEC, proto)`.
pub fn socket(family: i32, ty: i32, proto: i32) -> io::Result<OwnedFd> {
    // SAFETY: socket takes integers.
    own_fd(unsafe { libc::socket(family, ty | libc::SOCK_CLOEXEC, proto) }.into())
}

/// `socketpair(family, ty | SOCK_CLOEXEC, 0)`.
pub fn socketpair(family: i32, ty: i32) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut sv = [0i32; 2];
    // SAFETY: socketpair writes two fds into the local array.
    cvt(unsafe { libc::socketpair(family, ty | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr()) }.into())?;
    Ok((own_fd(sv[0].into())?, own_fd(sv[1].into())?))
}

/// `connect(fd, addr)`.
pub fn connect(fd: BorrowedFd<'_>, addr: &RawAddr) -> io::Result<()> {
    // SAFETY: the kernel reads `socklen()` bytes of the address buffer.
    cvt(unsafe { libc::connect(fd.as_raw_fd(), addr.ptr(), addr.socklen()) }.into()).map(drop)
}

/// `bind(fd, addr)`.
pub fn bind(fd: BorrowedFd<'_>, addr: &RawAddr) -> io::Result<()> {
    // SAFETY: the kernel reads `socklen()` bytes of the address buffer.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), addr.ptr(), addr.socklen()) }.into()).map(drop)
}

/// `listen(fd, backlog)`.
pub fn listen(fd: BorrowedFd<'_>, backlog: i32) -> io::Result<()> {
    // SAFETY: listen takes integers.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) }.into()).map(drop)
}

/// `accept4(fd, NULL, NULL, SOCK_CLOEXEC)`.
pub fn accept(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: no address buffer is passed.
    own_fd(
        unsafe { libc::accept4(fd.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC) }.into(),
    )
}

/// `sendto(fd, data, flags | MSG_NOSIGNAL, addr)`; without an address, a plain send.
pub fn send_to(fd: BorrowedFd<'_>, data: &[u8], flags: i32, addr: Option<&RawAddr>) -> io::Result<usize> {
    let (p, l) = addr.map_or((std::ptr::null(), 0), |a| (a.ptr(), a.socklen()));
    // SAFETY: `data` is valid for its length; the address (if any) is valid for `l`
    // bytes.
    let n = unsafe { libc::sendto(fd.as_raw_fd(), data.as_ptr().cast(), data.len(), flags | libc::MSG_NOSIGNAL, p, l) };
    Ok(usize::try_from(cvt(n as libc::c_long)?).unwrap_or(0))
}

/// `sendmmsg` of one message carrying `data` to `addr`.
pub fn sendmmsg_to(fd: BorrowedFd<'_>, data: &[u8], addr: &RawAddr) -> io::Result<usize> {
    let mut name = addr.clone();
    let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() };
    // SAFETY: mmsghdr is plain data; all-zero is a valid value.
    let mut msg: libc::mmsghdr = unsafe { std::mem::zeroed() };
    msg.msg_hdr.msg_name = name.buf.as_mut_ptr().cast();
    msg.msg_hdr.msg_namelen = addr.socklen();
    msg.msg_hdr.msg_iov = &mut iov;
    msg.msg_hdr.msg_iovlen = 1;
    // SAFETY: one message header whose name, iovec and data all outlive the call; the
    // kernel only reads the data.
    let n = unsafe { libc::sendmmsg(fd.as_raw_fd(), &mut msg, 1, libc::MSG_NOSIGNAL) };
    Ok(usize::try_from(cvt(n.into())?).unwrap_or(0))
}

/// `recv(fd, buf, flags)`.
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8], flags: i32) -> io::Result<usize> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), flags) };
    Ok(usize::try_from(cvt(n as libc::c_long)?).unwrap_or(0))
}

/// `setsockopt(fd, level, name, &value, sizeof(int))`.
pub fn set_int_option(fd: BorrowedFd<'_>, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: the kernel reads one int from the local.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const i32).cast(),
            4, // sizeof(int)
        )
    };
    cvt(r.into()).map(drop)
}
