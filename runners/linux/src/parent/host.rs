//! Host facts only raw syscalls can read.

/// The Landlock ABI version the running kernel offers (0: none or disabled).
pub fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only returns a number.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).unwrap_or(0)
}

/// Whether seccomp filter mode is available (`PR_GET_SECCOMP` answers).
pub fn seccomp_available() -> bool {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}

/// The calling thread's seccomp mode (`PR_GET_SECCOMP`: 0 none, 2 filter) and
/// `no_new_privs` bit (`PR_GET_NO_NEW_PRIVS`); -1 where the kernel does not answer.
pub fn seccomp_and_no_new_privs() -> (i32, i32) {
    // SAFETY: prctl with integer arguments only.
    unsafe { (libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0), libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)) }
}

/// The effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// The effective gid.
pub fn egid() -> u32 {
    // SAFETY: getegid cannot fail.
    unsafe { libc::getegid() }
}

/// This process's effective capability set (`capget(2)`, version 3: no `/proc` read).
pub fn effective_capabilities() -> Option<u64> {
    let mut data = crate::child::caps::NO_CAPS;
    crate::child::caps::get_own(&mut data).then(|| u64::from(data[0].effective) | (u64::from(data[1].effective) << 32))
}

/// Total usable RAM in bytes (`sysinfo(2)`: the figure `/proc/meminfo` calls
/// `MemTotal`), or `None` when the call fails.
pub fn total_ram() -> Option<u64> {
    // SAFETY: a zeroed sysinfo struct is a valid value for the kernel to overwrite.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: sysinfo writes into the local struct.
    if unsafe { libc::sysinfo(&mut si) } != 0 || si.totalram == 0 {
        return None;
    }
    #[allow(clippy::useless_conversion, reason = "the kernel's unsigned long is 32 bits on 32-bit targets")]
    let total = u64::from(si.totalram);
    Some(total.saturating_mul(u64::from(si.mem_unit.max(1))))
}

/// Fill `buf` from the kernel's random pool (`getrandom(2)`); false when it could not.
pub fn random_bytes(buf: &mut [u8]) -> bool {
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: getrandom writes at most the remaining length into the tail of `buf`.
        let n = unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        match usize::try_from(n) {
            Ok(n) if n > 0 => filled += n,
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return false,
        }
    }
    true
}
