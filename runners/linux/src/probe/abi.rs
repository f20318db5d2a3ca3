//! The other system-call entry points of an x86_64 kernel: the i386 ABI (`int 0x80`
//! from a 64-bit process, arguments truncated to 32 bits, so pointers must lie below
//! 4 GiB) and the x32 ABI (syscall numbers with bit 30 set). A filter that checks only
//! native numbers would let these through. Elsewhere every function answers `ENOSYS`
//! and [`SUPPORTED`] is false.

use std::io;

/// Whether this architecture has the entry points (x86_64 only).
pub const SUPPORTED: bool = cfg!(target_arch = "x86_64");

#[cfg(target_arch = "x86_64")]
mod imp {
    use std::arch::asm;
    use std::io;

    const X32_SYSCALL_BIT: i64 = 0x4000_0000;
    // i386 system call numbers.
    const I386_GETPID: i64 = 20;
    const I386_SOCKETCALL: i64 = 102;
    const I386_UNSHARE: i64 = 310;
    const I386_SOCKET: i64 = 359;
    const I386_CONNECT: i64 = 362;
    const I386_SENDTO: i64 = 369;

    fn check(ret: i64) -> io::Result<i64> {
        if (-4095..0).contains(&ret) {
            Err(io::Error::from_raw_os_error(i32::try_from(-ret).unwrap_or(libc::EINVAL)))
        } else {
            Ok(ret)
        }
    }

    /// `int 0x80` with three arguments (ebx, ecx, edx).
    fn int80(nr: i64, a: u32, b: u32, c: u32) -> i64 {
        let ret: i64;
        // SAFETY: the i386 entry point reads the registers as arguments; the calls made
        // here (getpid, unshare, socket, connect, socketcall) read at most the memory
        // the callers point them at (a live low page). rbx is reserved by the compiler,
        // so it is saved and restored around the trap; the kernel clobbers r8-r11.
        unsafe {
            asm!(
                "push rbx",
                "mov ebx, {a:e}",
                "int 0x80",
                "pop rbx",
                a = in(reg) a,
                inout("rax") nr => ret,
                in("rcx") u64::from(b),
                in("rdx") u64::from(c),
                out("r8") _, out("r9") _, out("r10") _, out("r11") _,
            );
        }
        ret
    }

    /// `int 0x80` with six arguments (ebx, ecx, edx, esi, edi, ebp).
    fn int80_6(nr: i64, args: [u32; 6]) -> i64 {
        let ret: i64;
        // SAFETY: as in `int80`; rbp (the frame pointer) is saved and restored too.
        unsafe {
            asm!(
                "push rbx",
                "push rbp",
                "mov ebx, {a:e}",
                "mov ebp, {f:e}",
                "int 0x80",
                "pop rbp",
                "pop rbx",
                a = in(reg) args[0],
                f = in(reg) args[5],
                inout("rax") nr => ret,
                in("rcx") u64::from(args[1]),
                in("rdx") u64::from(args[2]),
                in("rsi") u64::from(args[3]),
                in("rdi") u64::from(args[4]),
                out("r8") _, out("r9") _, out("r10") _, out("r11") _,
            );
        }
        ret
    }

    /// One page below 4 GiB, unmapped on drop.
    struct LowPage(*mut u8);

    impl LowPage {
        fn new() -> io::Result<LowPage> {
            // SAFETY: an anonymous private mapping the kernel places; no existing
            // memory is touched.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            Ok(LowPage(p.cast()))
        }

        /// Copies `data` to `offset` and returns its 32-bit address.
        fn put(&self, offset: usize, data: &[u8]) -> u32 {
            assert!(offset + data.len() <= 4096);
            // SAFETY: the range lies inside the live, writable 4096-byte page.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.0.add(offset), data.len()) };
            // MAP_32BIT places the page below 2 GiB.
            u32::try_from(self.0 as usize + offset).unwrap_or(0)
        }
    }

    impl Drop for LowPage {
        fn drop(&mut self) {
            // SAFETY: the page mapped in `new`, unmapped once.
            unsafe { libc::munmap(self.0.cast(), 4096) };
        }
    }

    /// A descriptor the kernel returned (small and non-negative) as a 32-bit argument.
    fn fd32(ret: i64) -> u32 {
        u32::try_from(ret).unwrap_or(u32::MAX)
    }

    fn sockaddr_in_loopback(port: u16) -> [u8; 16] {
        let mut sa = [0u8; 16];
        sa[..2].copy_from_slice(&2u16.to_ne_bytes()); // AF_INET
        sa[2..4].copy_from_slice(&port.to_be_bytes());
        sa[4..8].copy_from_slice(&[127, 0, 0, 1]);
        sa
    }

    pub fn i386_getpid() -> io::Result<i64> {
        check(int80(I386_GETPID, 0, 0, 0))
    }

    pub fn i386_unshare(flags: i32) -> io::Result<()> {
        check(int80(I386_UNSHARE, flags as u32, 0, 0)).map(drop)
    }

    pub fn i386_udp4(port: u16, via_socketcall: bool) -> io::Result<()> {
        let page = LowPage::new()?;
        let sa = page.put(0, &sockaddr_in_loopback(port));
        let payload = page.put(64, b"X");
        if via_socketcall {
            let words = |w: &[u32]| w.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
            let args = page.put(128, &words(&[libc::AF_INET as u32, libc::SOCK_DGRAM as u32, 0]));
            let s = fd32(check(int80(I386_SOCKETCALL, 1 /* SYS_SOCKET */, args, 0))?);
            let args = page.put(256, &words(&[s, payload, 1, 0, sa, 16]));
            check(int80(I386_SOCKETCALL, 11 /* SYS_SENDTO */, args, 0))?;
        } else {
            let s = fd32(check(int80(I386_SOCKET, libc::AF_INET as u32, libc::SOCK_DGRAM as u32, 0))?);
            check(int80_6(I386_SENDTO, [s, payload, 1, 0, sa, 16]))?;
        }
        Ok(())
    }

    pub fn i386_tcp4(port: u16) -> io::Result<()> {
        let page = LowPage::new()?;
        let sa = page.put(0, &sockaddr_in_loopback(port));
        let s = fd32(check(int80(I386_SOCKET, libc::AF_INET as u32, libc::SOCK_STREAM as u32, 0))?);
        check(int80(I386_CONNECT, s, sa, 16)).map(drop)
    }

    pub fn x32_getpid() -> io::Result<i64> {
        // SAFETY: getpid (x32 number) takes no arguments.
        let r = unsafe { libc::syscall(X32_SYSCALL_BIT | libc::SYS_getpid) };
        super::super::cvt(r)
    }

    pub fn x32_unshare(flags: i32) -> io::Result<()> {
        // SAFETY: unshare (x32 number) takes an integer.
        super::super::cvt(unsafe { libc::syscall(X32_SYSCALL_BIT | libc::SYS_unshare, flags) }).map(drop)
    }

    pub fn x32_udp4(port: u16) -> io::Result<()> {
        // SAFETY: socket (x32 number) takes integers.
        let s = super::super::cvt(unsafe {
            libc::syscall(X32_SYSCALL_BIT | libc::SYS_socket, libc::AF_INET, libc::SOCK_DGRAM, 0)
        })?;
        let sa = sockaddr_in_loopback(port);
        // SAFETY: sendto (x32 number) reads one payload byte and the local address.
        let r = unsafe { libc::syscall(X32_SYSCALL_BIT | libc::SYS_sendto, s, b"X".as_ptr(), 1, 0, sa.as_ptr(), 16) };
        // SAFETY: closing the socket created above.
        unsafe { libc::close(i32::try_from(s).unwrap_or(-1)) };
        super::super::cvt(r).map(drop)
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    use std::io;
    fn none<T>() -> io::Result<T> {
        Err(io::Error::from_raw_os_error(libc::ENOSYS))
    }
    pub fn i386_getpid() -> io::Result<i64> {
        none()
    }
    pub fn i386_unshare(_: i32) -> io::Result<()> {
        none()
    }
    pub fn i386_udp4(_: u16, _: bool) -> io::Result<()> {
        none()
    }
    pub fn i386_tcp4(_: u16) -> io::Result<()> {
        none()
    }
    pub fn x32_getpid() -> io::Result<i64> {
        none()
    }
    pub fn x32_unshare(_: i32) -> io::Result<()> {
        none()
    }
    pub fn x32_udp4(_: u16) -> io::Result<()> {
        none()
    }
}

/// `getpid` through the i386 entry point: the pid, or the refusal.
pub fn i386_getpid() -> io::Result<i64> {
    imp::i386_getpid()
}

/// `unshare(flags)` through the i386 entry point.
pub fn i386_unshare(flags: i32) -> io::Result<()> {
    imp::i386_unshare(flags)
}

/// One UDP datagram to `127.0.0.1:port` through the i386 entry point (`socket` +
/// `sendto`, or both through `socketcall`).
pub fn i386_udp4(port: u16, via_socketcall: bool) -> io::Result<()> {
    imp::i386_udp4(port, via_socketcall)
}

/// A TCP connect to `127.0.0.1:port` through the i386 entry point.
pub fn i386_tcp4(port: u16) -> io::Result<()> {
    imp::i386_tcp4(port)
}

/// `getpid` with its x32 number.
pub fn x32_getpid() -> io::Result<i64> {
    imp::x32_getpid()
}

/// `unshare(flags)` with its x32 number.
pub fn x32_unshare(flags: i32) -> io::Result<()> {
    imp::x32_unshare(flags)
}

/// One UDP datagram to `127.0.0.1:port` with x32 numbers.
pub fn x32_udp4(port: u16) -> io::Result<()> {
    imp::x32_udp4(port)
}
