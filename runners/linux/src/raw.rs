//! System calls that never touch `errno` or any other thread-local state: the
//! instruction itself, the result returned as `-errno` on failure.
//!
//! The init shares cordon's memory (see `init`): it runs on its own stack but with the
//! thread-local storage of the thread that cloned it, so a C library wrapper that fails
//! would write that thread's `errno` while it runs on. Once the parent has resumed, the
//! init makes system calls only through this module.
//!
//! [`SHARED_INIT`] says whether this architecture has them; elsewhere the functions
//! below go through the C library and the init is a fork-style copy instead.
//!
//! What it does not do: retry on `EINTR`, or decide what a failure means.

/// The init is cloned with `CLONE_VM` (no copy of cordon's memory) on architectures
/// where this module issues the system call instruction itself.
pub(crate) const SHARED_INIT: bool =
    cfg!(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64"));

/// One system call with up to six arguments; `-errno` on failure.
///
/// # Safety
/// The caller passes arguments that are valid for `nr` (pointers to live memory of
/// the right size).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::cast_possible_truncation, reason = "64-bit targets: c_long and isize are both 64 bits")]
unsafe fn syscall6(nr: libc::c_long, a: usize, b: usize, c: usize, d: usize, e: usize, f: usize) -> isize {
    let ret: isize;
    // SAFETY: the `syscall` instruction with the x86_64 Linux calling convention; the
    // kernel clobbers rcx and r11 only; memory may be read or written (no `nomem`).
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a, in("rsi") b, in("rdx") c, in("r10") d, in("r8") e, in("r9") f,
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

#[cfg(target_arch = "aarch64")]
#[inline(always)]
#[allow(clippy::cast_possible_truncation, reason = "64-bit targets: c_long and isize are both 64 bits")]
unsafe fn syscall6(nr: libc::c_long, a: usize, b: usize, c: usize, d: usize, e: usize, f: usize) -> isize {
    let ret: isize;
    // SAFETY: `svc 0` with the arm64 Linux calling convention (number in x8, result in x0).
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") nr,
            inlateout("x0") a as isize => ret,
            in("x1") b, in("x2") c, in("x3") d, in("x4") e, in("x5") f,
            options(nostack),
        );
    }
    ret
}

#[cfg(target_arch = "riscv64")]
#[inline(always)]
#[allow(clippy::cast_possible_truncation, reason = "64-bit targets: c_long and isize are both 64 bits")]
unsafe fn syscall6(nr: libc::c_long, a: usize, b: usize, c: usize, d: usize, e: usize, f: usize) -> isize {
    let ret: isize;
    // SAFETY: `ecall` with the RISC-V Linux calling convention (number in a7, result in a0).
    unsafe {
        core::arch::asm!(
            "ecall",
            in("a7") nr,
            inlateout("a0") a as isize => ret,
            in("a1") b, in("a2") c, in("a3") d, in("a4") e, in("a5") f,
            options(nostack),
        );
    }
    ret
}

/// Elsewhere: the C library's `syscall`, which sets `errno` (the init is not shared
/// there, so that `errno` is its own).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
#[inline(always)]
unsafe fn syscall6(nr: libc::c_long, a: usize, b: usize, c: usize, d: usize, e: usize, f: usize) -> isize {
    // SAFETY: forwarded as is; the caller upholds the syscall's contract.
    let r = unsafe { libc::syscall(nr, a, b, c, d, e, f) };
    if r < 0 {
        -(crate::sys::errno() as isize)
    } else {
        r as isize
    }
}

/// `wait4(pid, status, options, NULL)`.
pub(crate) fn wait4(pid: libc::pid_t, status: &mut libc::c_int, options: libc::c_int) -> isize {
    // SAFETY: wait4 writes one int to `status`, which is a live exclusive reference.
    unsafe { syscall6(libc::SYS_wait4, pid as usize, status as *mut libc::c_int as usize, options as usize, 0, 0, 0) }
}

/// `kill(pid, sig)`.
pub(crate) fn kill(pid: libc::pid_t, sig: libc::c_int) -> isize {
    // SAFETY: integer arguments only.
    unsafe { syscall6(libc::SYS_kill, pid as usize, sig as usize, 0, 0, 0, 0) }
}

/// `getpid()`.
pub(crate) fn getpid() -> libc::pid_t {
    // SAFETY: no arguments; cannot fail.
    let r = unsafe { syscall6(libc::SYS_getpid, 0, 0, 0, 0, 0, 0) };
    #[allow(clippy::cast_possible_truncation, reason = "a pid is an int widened to long")]
    let pid = r as libc::pid_t;
    pid
}

/// `getppid()`.
pub(crate) fn getppid() -> libc::pid_t {
    // SAFETY: no arguments; cannot fail.
    let r = unsafe { syscall6(libc::SYS_getppid, 0, 0, 0, 0, 0, 0) };
    #[allow(clippy::cast_possible_truncation, reason = "a pid is an int widened to long")]
    let pid = r as libc::pid_t;
    pid
}

/// `openat(AT_FDCWD, path, flags)` for reading or writing an existing file.
pub(crate) fn open(path: &std::ffi::CStr, flags: libc::c_int) -> isize {
    // SAFETY: a NUL-terminated path; no mode is needed without O_CREAT.
    unsafe { syscall6(libc::SYS_openat, libc::AT_FDCWD as usize, path.as_ptr() as usize, flags as usize, 0, 0, 0) }
}

/// `read(fd, buf)`.
pub(crate) fn read(fd: libc::c_int, buf: &mut [u8]) -> isize {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    unsafe { syscall6(libc::SYS_read, fd as usize, buf.as_mut_ptr() as usize, buf.len(), 0, 0, 0) }
}

/// `write(fd, buf)`.
pub(crate) fn write(fd: libc::c_int, buf: &[u8]) -> isize {
    // SAFETY: the kernel reads at most `buf.len()` bytes from `buf`.
    unsafe { syscall6(libc::SYS_write, fd as usize, buf.as_ptr() as usize, buf.len(), 0, 0, 0) }
}

/// `close(fd)`.
pub(crate) fn close(fd: libc::c_int) -> isize {
    // SAFETY: integer argument only.
    unsafe { syscall6(libc::SYS_close, fd as usize, 0, 0, 0, 0, 0) }
}

/// `close_range(first, last, 0)`.
pub(crate) fn close_range(first: u32, last: u32) -> isize {
    // SAFETY: integer arguments only.
    unsafe { syscall6(libc::SYS_close_range, first as usize, last as usize, 0, 0, 0, 0) }
}

/// Clear the signal mask (`rt_sigprocmask(SIG_SETMASK, {}, NULL)`).
pub(crate) fn unblock_all_signals() -> isize {
    // The kernel's sigset is 64 bits on every architecture built here.
    let empty: u64 = 0;
    // SAFETY: the kernel reads 8 bytes from `empty`; no old set is requested.
    unsafe {
        syscall6(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK as usize,
            &empty as *const u64 as usize,
            0,
            std::mem::size_of::<u64>(),
            0,
            0,
        )
    }
}

/// `exit_group(code)`: ends this process.
pub(crate) fn exit(code: libc::c_int) -> ! {
    loop {
        // SAFETY: exit_group does not return.
        unsafe { syscall6(libc::SYS_exit_group, code as usize, 0, 0, 0, 0, 0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_come_back_as_negative_errno_and_leave_errno_alone() {
        // SAFETY: setting this thread's errno to a sentinel.
        unsafe { *libc::__errno_location() = 12345 };
        assert_eq!(close(-1), -(libc::EBADF as isize));
        assert_eq!(kill(i32::MAX, 0), -(libc::ESRCH as isize));
        let mut status = 0;
        assert_eq!(wait4(i32::MAX, &mut status, libc::WNOHANG), -(libc::ECHILD as isize));
        if SHARED_INIT {
            assert_eq!(crate::sys::errno(), 12345, "a raw call wrote errno");
        }
    }

    #[test]
    fn the_calls_do_what_their_names_say() {
        // SAFETY: getpid/getppid cannot fail.
        unsafe {
            assert_eq!(getpid(), libc::getpid());
            assert_eq!(getppid(), libc::getppid());
        }
        let fd = open(c"/proc/self/stat", libc::O_RDONLY | libc::O_CLOEXEC);
        assert!(fd >= 0, "{fd}");
        #[allow(clippy::cast_possible_truncation, reason = "an fd")]
        let fd = fd as libc::c_int;
        let mut buf = [0u8; 64];
        let n = read(fd, &mut buf);
        assert!(n > 0);
        let text = String::from_utf8_lossy(&buf[..n as usize]);
        assert!(text.starts_with(&getpid().to_string()), "{text}");
        assert_eq!(close(fd), 0);
        let mut pipe = [0; 2];
        // SAFETY: a two-element array for pipe to fill.
        assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
        assert_eq!(write(pipe[1], b"abc"), 3);
        assert_eq!(read(pipe[0], &mut buf), 3);
        assert_eq!(&buf[..3], b"abc");
        assert_eq!(close_range(pipe[1] as u32, pipe[1] as u32), 0);
        assert_eq!(close(pipe[1]), -(libc::EBADF as isize));
        assert_eq!(close(pipe[0]), 0);
    }
}
