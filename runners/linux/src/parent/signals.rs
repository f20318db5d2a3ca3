//! Process-wide signal settings the parent needs.

/// Ignore `SIGPIPE` in this process, so writing stdin bytes to a command that
/// exited without reading yields `EPIPE` instead of killing cordon. (Rust binaries
/// already do this at startup; library users may not.) Children get the default
/// disposition back in the stage.
pub fn ignore_sigpipe() {
    // SAFETY: installing SIG_IGN for SIGPIPE has no memory-safety implications.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

/// Give `signals` their default disposition in this process again (replacing any
/// handler, the async runtime's included). The CLI does so once its run is over, so
/// that SIGTERM or Ctrl-C end cordon at once while it writes its last output, even to
/// a reader that stopped reading.
pub fn restore_default(signals: &[libc::c_int]) {
    for &sig in signals {
        // SAFETY: SIG_DFL is not a handler: nothing runs in signal context; `sig` is a
        // plain signal number (an invalid one only fails with EINVAL).
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
}

/// End this process by `sig`, as a command killed by it ends (a calling shell tells
/// the two apart: bash stops a loop only when its child died of SIGINT): the default
/// disposition, the signal unblocked in this thread, then raised. Exits with
/// 128 + `sig` should the signal not end the process (one whose default is to be
/// ignored).
pub fn die_by(sig: libc::c_int) -> ! {
    restore_default(&[sig]);
    // SAFETY: a zeroed sigset_t is a valid argument to sigemptyset, which initializes
    // it; the calls only read and write that local set and this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    std::process::exit(128 + sig)
}
