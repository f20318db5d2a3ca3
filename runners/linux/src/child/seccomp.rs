//! Step 12: seccomp, last. The parent's BPF programs are installed in plan order; with
//! a notify socket, the last one is installed with `SECCOMP_FILTER_FLAG_NEW_LISTENER`
//! and the listener fd is handed back to the parent over that socket (`SCM_RIGHTS`),
//! then closed, so the command never holds it. With `unix_diag`, a socket diagnostics
//! socket of the command's network namespace travels in the same message.
//!
//! What it does not do: compile the programs (the parent does) or answer
//! notifications (the parent's [`notify`](crate::notify)).

use std::os::fd::RawFd;

use super::prepared::{fail, Prepared};
use crate::status::{detail, Step};
use crate::sys::{errno, CmsgBuf};

/// `SECCOMP_FILTER_FLAG_NEW_LISTENER`.
const SECCOMP_FILTER_FLAG_NEW_LISTENER: libc::c_ulong = 1 << 3;

/// Step 12: install every filter; hand the last one's listener back when asked.
pub(super) fn install_filters(p: &Prepared<'_>) {
    let plan = p.plan;
    let last = p.filters.len().saturating_sub(1);
    // The socket diagnostics socket, made before any filter (they refuse netlink): its
    // network namespace is the command's, whose unix sockets it lists.
    let diag = if plan.unix_diag && plan.notify_socket.is_some() {
        // SAFETY: socket with integer arguments; the fd is closed after the hand-back.
        let fd =
            unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_SOCK_DIAG) };
        if fd < 0 {
            fail(p, Step::Network, errno(), detail::NETWORK_UNIX_DIAG);
        }
        Some(fd)
    } else {
        None
    };
    for (i, prog) in p.filters.iter().enumerate() {
        let listen = i == last && plan.notify_socket.is_some();
        let flags: libc::c_ulong = if listen { SECCOMP_FILTER_FLAG_NEW_LISTENER } else { 0 };
        // SAFETY: seccomp(SET_MODE_FILTER) with a sock_fprog pointing at a BPF program
        // the parent compiled and still owns.
        let r = unsafe {
            libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, flags, prog as *const libc::sock_fprog)
        };
        if r < 0 {
            fail(p, Step::Seccomp, errno(), u32::try_from(i).unwrap_or(u32::MAX));
        }
        if listen {
            #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
            let listener = r as RawFd;
            if let Some(sock) = plan.notify_socket {
                let both = [listener, diag.unwrap_or(-1)];
                let fds = if diag.is_some() { &both[..] } else { &both[..1] };
                if let Err(e) = send_fds(sock, fds) {
                    fail(
                        p,
                        Step::Seccomp,
                        e,
                        u32::try_from(i).unwrap_or(u32::MAX).saturating_add(detail::SECCOMP_SEND_LISTENER),
                    );
                }
            }
            // SAFETY: closing the listener fd this step just received, and the
            // diagnostics socket made above.
            unsafe {
                libc::close(listener);
                if let Some(d) = diag {
                    libc::close(d);
                }
            }
        }
    }
}

/// The most fds one hand-back carries (the listener and the diagnostics socket).
const MAX_FDS: usize = 2;

/// Send `fds` (at most [`MAX_FDS`]) over the unix socket `sock` in one `SCM_RIGHTS`
/// message (raw syscalls only).
fn send_fds(sock: RawFd, fds: &[RawFd]) -> Result<(), i32> {
    if fds.is_empty() || fds.len() > MAX_FDS {
        return Err(libc::EINVAL);
    }
    let mut control = CmsgBuf { buf: [0; 64] };
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr() as *mut libc::c_void, iov_len: 1 };
    #[allow(clippy::cast_possible_truncation, reason = "at most MAX_FDS ints")]
    let payload = std::mem::size_of_val(fds) as u32;
    // SAFETY: building a msghdr over local buffers; CMSG_* macros compute offsets
    // within `control`, which is large enough for MAX_FDS int payloads.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.buf.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = libc::CMSG_SPACE(payload) as usize;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(payload) as usize;
        std::ptr::copy_nonoverlapping(fds.as_ptr() as *const u8, libc::CMSG_DATA(cmsg), payload as usize);
        if libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) < 0 {
            return Err(errno());
        }
    }
    Ok(())
}
