//! Why a Seatbelt plan cannot be made ([`SeatbeltPlanError`], naming the input with
//! [`PathRole`]): a runner error `crate::error` carries, kept here so it does not
//! import the planner (`crate::runner::seatbelt`, which re-exports both).

use crate::mode::Mode;
use std::fmt;
use std::path::PathBuf;

/// Which input a path came from (errors name it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathRole {
    /// [`SeatbeltInput::workspace`](crate::runner::seatbelt::SeatbeltInput::workspace).
    Workspace,
    /// [`SeatbeltInput::writable_roots`](crate::runner::seatbelt::SeatbeltInput::writable_roots), by index.
    WritableRoot(usize),
    /// [`SeatbeltInput::protected`](crate::runner::seatbelt::SeatbeltInput::protected), by index.
    Protected(usize),
    /// [`SeatbeltInput::tmpdir`](crate::runner::seatbelt::SeatbeltInput::tmpdir).
    Tmpdir,
}

impl fmt::Display for PathRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathRole::Workspace => f.write_str("workspace"),
            PathRole::WritableRoot(i) => write!(f, "writable root #{i}"),
            PathRole::Protected(i) => write!(f, "protected path #{i}"),
            PathRole::Tmpdir => f.write_str("TMPDIR"),
        }
    }
}

/// Why a Seatbelt plan cannot be made. Every variant but the first two names the
/// offending path and where it came from; all of them are "this input is wrong",
/// never "this host cannot".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SeatbeltPlanError {
    /// `full-access` is not confined; it runs under the passthrough runner.
    #[error("mode {mode} is not a confined mode: it runs under the passthrough runner, never under Seatbelt")]
    ModeNotConfined {
        /// The mode asked for.
        mode: Mode,
    },
    /// The program to run is empty.
    #[error("the program to run under Seatbelt is empty")]
    EmptyProgram,
    /// A path is relative.
    #[error("{role} {path:?} is relative; Seatbelt parameters must be canonical absolute paths")]
    RelativePath {
        /// Which input.
        role: PathRole,
        /// The path as given.
        path: PathBuf,
    },
    /// A path has `.` or `..` components or a repeated or trailing `/`.
    #[error(
        "{role} {path:?} is not normalized (`.`, `..`, `//` or a trailing `/`); Seatbelt matches resolved paths, so it would never match"
    )]
    NotNormalized {
        /// Which input.
        role: PathRole,
        /// The path as given.
        path: PathBuf,
    },
    /// A path is not valid UTF-8.
    #[error(
        "{role} {path:?} is not valid UTF-8; macOS file systems store names as UTF-8, so it cannot name a macOS file"
    )]
    NotUtf8 {
        /// Which input.
        role: PathRole,
        /// The path as given.
        path: PathBuf,
    },
    /// A path contains a control character (newline, tab, ...).
    #[error(
        "{role} {path:?} contains control character {character:?}; cordon refuses such paths because they could forge lines of the sandbox's denial log"
    )]
    ControlCharacter {
        /// Which input.
        role: PathRole,
        /// The path as given.
        path: PathBuf,
        /// The first control character found.
        character: char,
    },
    /// A path is too long to be opened on macOS.
    #[error("{role} {path:?} is {len} bytes long; macOS paths are shorter than PATH_MAX ({max} bytes with the terminating NUL)")]
    TooLong {
        /// Which input.
        role: PathRole,
        /// The path as given.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
        /// `MACOS_PATH_MAX` of the Seatbelt planner.
        max: usize,
    },
    /// A path starts with `/tmp`, `/var` or `/etc`, symlinks on macOS.
    #[error(
        "{role} {path:?} starts with {symlink}, a symlink to {target} on macOS; Seatbelt matches resolved paths, so pass the canonical path under {target}"
    )]
    SymlinkedPrefix {
        /// Which input.
        role: PathRole,
        /// The path as given.
        path: PathBuf,
        /// The symlinked directory it starts with.
        symlink: &'static str,
        /// Where that symlink points.
        target: &'static str,
    },
}
