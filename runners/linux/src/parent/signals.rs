//! Process-wide signal settings the parent needs.

/// Ignore `SIGPIPE` in this process, so writing stdin bytes to a command that
/// exited without reading yields `EPIPE` instead of killing cordon. (Rust binaries
/// already do this at startup; library users may not.) Children get the default
/// disposition back in the stage.
pub fn ignore_sigpipe() {
    // SAFETY: installing SIG_IGN for SIGPIPE has no memory-safety implications.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}
