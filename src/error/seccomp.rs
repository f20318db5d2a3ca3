//! Why a seccomp program could not be built ([`SeccompError`]): a runner error
//! `crate::error` carries, kept here so it does not import the compiler
//! (`crate::runner::seccomp`, which re-exports it; `build.rs` includes this file too).

/// Why the filter could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SeccompError {
    /// This architecture has no filter.
    #[error("seccomp filters are not built for architecture {0}")]
    UnsupportedArch(&'static str),
    /// The profile is malformed.
    #[error("seccomp profile is malformed: {0}")]
    Profile(String),
    /// A filter is missing from the profile.
    #[error("seccomp profile lacks filter `{0}`")]
    Missing(&'static str),
    /// A syscall name is unknown.
    #[error("seccomp profile names unknown syscall `{0}`")]
    UnknownSyscall(String),
    /// A jump would not fit in 8 bits.
    #[error("seccomp program too long for its jumps")]
    TooLong,
    /// A syscall has rules in two filters that are installed together. The kernel would
    /// answer it with the action of highest precedence and, for equal actions, the data
    /// of the most recently installed filter; one merged program cannot say which the
    /// profile meant, so the profile must name each syscall in one filter only.
    #[error("seccomp profile names syscall `{syscall}` in two filters, `{first}` and `{second}`")]
    DuplicateSyscall {
        /// The syscall.
        syscall: String,
        /// The filter that named it first.
        first: &'static str,
        /// The filter that named it again.
        second: &'static str,
    },
}
