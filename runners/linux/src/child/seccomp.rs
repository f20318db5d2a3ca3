//! Step 12: seccomp, last. The parent's BPF programs are installed in plan order; with
//! a notify socket, the last one is installed with `SECCOMP_FILTER_FLAG_NEW_LISTENER`
//! and the listener fd is handed back to the parent over that socket (`SCM_RIGHTS`),
//! then closed, so the command never holds it.
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
                if let Err(e) = send_fd(sock, listener) {
                    fail(
                        p,
                        Step::Seccomp,
                        e,
                        u32::try_from(i).unwrap_or(u32::MAX).saturating_add(detail::SECCOMP_SEND_LISTENER),
                    );
                }
            }
            // SAFETY: closing the listener fd this step just received.
            unsafe { libc::close(listener) };
        }
    }
}

/// Send `fd` over the unix socket `sock` with `SCM_RIGHTS` (raw syscalls only).
fn send_fd(sock: RawFd, fd: RawFd) -> Result<(), i32> {
    let mut control = CmsgBuf { buf: [0; 64] };
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr() as *mut libc::c_void, iov_len: 1 };
    // SAFETY: building a msghdr over local buffers; CMSG_* macros compute offsets
    // within `control`, which is large enough for one int payload.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.buf.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = libc::CMSG_SPACE(RawFd::BITS / 8) as usize;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(RawFd::BITS / 8) as usize;
        std::ptr::copy_nonoverlapping(
            &fd as *const RawFd as *const u8,
            libc::CMSG_DATA(cmsg),
            std::mem::size_of::<RawFd>(),
        );
        if libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) < 0 {
            return Err(errno());
        }
    }
    Ok(())
}
