//! The status record: how the child tells the parent which step failed.
//!
//! A record is [`STATUS_RECORD_LEN`] bytes: the [`Step`] number, the errno and a step
//! detail, each 4 bytes in native byte order. The child writes it with one raw
//! `write` to a close-on-exec pipe and exits with [`STAGE_SETUP_FAILED_EXIT`].

use std::io;
use std::os::fd::RawFd;

/// Exit status of a child whose stage failed before `execve` (the status pipe says why).
pub const STAGE_SETUP_FAILED_EXIT: i32 = 125;

/// One step of the child's contract; its number travels in a [`StageFailure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Step {
    /// `clone` itself (reported by the parent side).
    Clone = 0,
    /// `PR_SET_PDEATHSIG`.
    ParentDeathSignal = 1,
    /// Resetting signal dispositions and mask.
    Signals = 2,
    /// `setsid`.
    NewSession = 3,
    /// Writing the user-namespace id maps.
    IdMaps = 4,
    /// A mount operation (the detail is its index in the plan).
    Mount = 5,
    /// Installing stdin/stdout/stderr.
    Stdio = 6,
    /// Marking inherited fds close-on-exec.
    CloseFds = 7,
    /// `chdir` to the working directory.
    Chdir = 8,
    /// `PR_SET_NO_NEW_PRIVS`.
    NoNewPrivs = 9,
    /// `landlock_restrict_self`.
    Landlock = 10,
    /// Dropping capabilities.
    Capabilities = 11,
    /// Installing a seccomp filter (the detail is its index).
    Seccomp = 12,
    /// `execve`.
    Exec = 13,
    /// Applying [`ChildLimits`](crate::ChildLimits) (the detail: 0 cgroup, 1 rlimit, 2 oom_score_adj,
    /// plus 16 × the index).
    Limits = 14,
}

impl Step {
    fn from_u32(v: u32) -> Option<Step> {
        use Step::*;
        Some(match v {
            0 => Clone,
            1 => ParentDeathSignal,
            2 => Signals,
            3 => NewSession,
            4 => IdMaps,
            5 => Mount,
            6 => Stdio,
            7 => CloseFds,
            8 => Chdir,
            9 => NoNewPrivs,
            10 => Landlock,
            11 => Capabilities,
            12 => Seccomp,
            13 => Exec,
            14 => Limits,
            _ => return None,
        })
    }

    /// A stable lower-case name for messages and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Step::Clone => "clone",
            Step::ParentDeathSignal => "parent-death-signal",
            Step::Signals => "signals",
            Step::NewSession => "new-session",
            Step::IdMaps => "id-maps",
            Step::Mount => "mount",
            Step::Stdio => "stdio",
            Step::CloseFds => "close-fds",
            Step::Chdir => "chdir",
            Step::NoNewPrivs => "no-new-privs",
            Step::Landlock => "landlock",
            Step::Capabilities => "capabilities",
            Step::Seccomp => "seccomp",
            Step::Exec => "exec",
            Step::Limits => "limits",
        }
    }
}

/// Why the child did not reach the command: the step, the errno and a step detail
/// (the mount or filter index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageFailure {
    /// The step that failed.
    pub step: Step,
    /// The errno the failing call returned.
    pub errno: i32,
    /// Index of the failing mount operation or seccomp filter; 0 otherwise.
    pub detail: u32,
}

impl std::fmt::Display for StageFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "sandbox setup step `{}` (#{}) failed: {}",
            self.step.name(),
            self.detail,
            io::Error::from_raw_os_error(self.errno)
        )
    }
}

/// Size of one status record: step, errno, detail (native-endian `u32`, `i32`, `u32`).
pub const STATUS_RECORD_LEN: usize = 12;

/// Write one status record (raw syscall only).
pub(crate) fn write_record(fd: RawFd, step: Step, errno: i32, detail: u32) {
    let mut record = [0u8; STATUS_RECORD_LEN];
    record[0..4].copy_from_slice(&(step as u32).to_ne_bytes());
    record[4..8].copy_from_slice(&errno.to_ne_bytes());
    record[8..12].copy_from_slice(&detail.to_ne_bytes());
    // SAFETY: write(2) is async-signal-safe; the buffer is local.
    unsafe { libc::write(fd, record.as_ptr() as *const libc::c_void, record.len()) };
}

/// Decode one status record written by the stage or the helper.
pub(crate) fn decode_record(record: &[u8; STATUS_RECORD_LEN]) -> StageFailure {
    let step = u32::from_ne_bytes([record[0], record[1], record[2], record[3]]);
    let errno = i32::from_ne_bytes([record[4], record[5], record[6], record[7]]);
    let detail = u32::from_ne_bytes([record[8], record[9], record[10], record[11]]);
    StageFailure { step: Step::from_u32(step).unwrap_or(Step::Exec), errno, detail }
}
