//! The status record: how the child tells the parent which step failed.
//!
//! A record is [`STATUS_RECORD_LEN`] bytes: the [`Step`] number, the errno and a step
//! detail, each 4 bytes in native byte order. The child writes it with one raw
//! `write` to a close-on-exec pipe and exits with [`STAGE_SETUP_FAILED_EXIT`]. The
//! detail numbers of every step are named in [`detail`].

use std::io;
use std::os::fd::RawFd;

/// Exit status of a child whose stage failed before `execve` (the status pipe says why).
pub const STAGE_SETUP_FAILED_EXIT: i32 = 125;

/// One step of the child's contract; its number travels in a [`StageFailure`]. Each
/// variant names the [`detail`] numbers it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Step {
    /// `clone` itself: [`detail::CLONE_CHILD`] (reported by the parent side) or
    /// [`detail::CLONE_COMMAND`] (the init's clone of the command).
    Clone = 0,
    /// `PR_SET_PDEATHSIG` ([`detail::PDEATH_SIGNAL`]); the supervising init's
    /// `PR_SET_CHILD_SUBREAPER` ([`detail::PDEATH_SUBREAPER`]).
    ParentDeathSignal = 1,
    /// Resetting signal dispositions and mask ([`detail::SIGNALS_MASK`]).
    Signals = 2,
    /// `setsid` ([`detail::SESSION_SETSID`]), `setpgid` ([`detail::SESSION_SETPGID`]),
    /// or the supervising init's either ([`detail::SESSION_INIT`]).
    NewSession = 3,
    /// Writing the user-namespace id maps ([`detail::ID_MAPS_SETGROUPS`],
    /// [`detail::ID_MAPS_UID`], [`detail::ID_MAPS_GID`]).
    IdMaps = 4,
    /// A mount operation (the detail is its index in the plan); in the bwrap helper, an
    /// identity check (the detail is the entry's index, or
    /// [`detail::MOUNT_CHECKS_UNREADABLE`]).
    Mount = 5,
    /// Installing stdin/stdout/stderr (the detail is the target fd, 0 to 2).
    Stdio = 6,
    /// Marking inherited fds close-on-exec ([`detail::CLOSE_FDS_RANGE`]), or passing
    /// one of the plan's fds (the detail is its number in the child).
    CloseFds = 7,
    /// `chdir` to the working directory ([`detail::CHDIR_CALL`]), or the check of its
    /// pinned identity ([`detail::CHDIR_IDENTITY`]).
    Chdir = 8,
    /// `PR_SET_NO_NEW_PRIVS` ([`detail::NO_NEW_PRIVS`]).
    NoNewPrivs = 9,
    /// `landlock_restrict_self` ([`detail::LANDLOCK_RESTRICT`]), a late rule
    /// ([`detail::LANDLOCK_LATE_OPEN`] or [`detail::LANDLOCK_LATE_ADD`] plus its index),
    /// or the bwrap helper's ruleset fd ([`detail::LANDLOCK_HELPER_RULESET`]).
    Landlock = 10,
    /// Dropping capabilities: the capability number when the bounding set refused to
    /// drop it, else one of the `CAPS_*` numbers of [`detail`].
    Capabilities = 11,
    /// Installing a seccomp filter (the detail is its index; plus
    /// [`detail::SECCOMP_SEND_LISTENER`] when handing its listener back failed), or the
    /// bwrap helper's program ([`detail::SECCOMP_HELPER_READ`],
    /// [`detail::SECCOMP_HELPER_TOO_LONG`]).
    Seccomp = 12,
    /// `execve` ([`detail::EXEC_CALL`]; with errno 0, the bwrap helper's success
    /// record), or the helper's arguments ([`detail::EXEC_HELPER_ARGUMENTS`]) or
    /// environment ([`detail::EXEC_HELPER_ENV`]).
    Exec = 13,
    /// Applying [`ChildLimits`](crate::ChildLimits): [`detail::LIMITS_CGROUP`],
    /// [`detail::LIMITS_RLIMIT`] or [`detail::LIMITS_OOM_SCORE_ADJ`], plus
    /// [`detail::LIMITS_STRIDE`] × the cgroup's or rlimit's index.
    Limits = 14,
    /// The run's own network namespace: bringing its loopback up
    /// ([`detail::NETWORK_LOOPBACK_SOCKET`], [`detail::NETWORK_LOOPBACK_UP`]), or the
    /// socket diagnostics socket sent with the seccomp listener
    /// ([`detail::NETWORK_UNIX_DIAG`]).
    Network = 15,
}

/// The `detail` numbers of a [`StageFailure`], per [`Step`]: which call of the step
/// failed, or which item it was working on. The parent shows them in messages
/// (`step `mount` (#3)`), so a number never changes meaning. Where a step's detail is
/// an index or an fd number, its [`Step`] variant says so.
pub mod detail {
    /// [`Step::Clone`](super::Step::Clone): the parent's clone of the child or the init.
    pub const CLONE_CHILD: u32 = 0;
    /// [`Step::Clone`](super::Step::Clone): the init's clone of the command.
    pub const CLONE_COMMAND: u32 = 1;

    /// [`Step::ParentDeathSignal`](super::Step::ParentDeathSignal): `PR_SET_PDEATHSIG`.
    pub const PDEATH_SIGNAL: u32 = 0;
    /// [`Step::ParentDeathSignal`](super::Step::ParentDeathSignal): the supervising
    /// init's `PR_SET_CHILD_SUBREAPER`.
    pub const PDEATH_SUBREAPER: u32 = 1;

    /// [`Step::Signals`](super::Step::Signals): clearing the signal mask.
    pub const SIGNALS_MASK: u32 = 0;

    /// [`Step::NewSession`](super::Step::NewSession): the command's `setsid`.
    pub const SESSION_SETSID: u32 = 0;
    /// [`Step::NewSession`](super::Step::NewSession): the command's `setpgid(0, 0)`.
    pub const SESSION_SETPGID: u32 = 1;
    /// [`Step::NewSession`](super::Step::NewSession): the supervising init's `setsid`
    /// or `setpgid`.
    pub const SESSION_INIT: u32 = 2;

    /// [`Step::IdMaps`](super::Step::IdMaps): `/proc/self/setgroups`.
    pub const ID_MAPS_SETGROUPS: u32 = 0;
    /// [`Step::IdMaps`](super::Step::IdMaps): `/proc/self/uid_map`.
    pub const ID_MAPS_UID: u32 = 1;
    /// [`Step::IdMaps`](super::Step::IdMaps): `/proc/self/gid_map`.
    pub const ID_MAPS_GID: u32 = 2;

    /// [`Step::Mount`](super::Step::Mount) in the bwrap helper: its identity checks
    /// could not be read.
    pub const MOUNT_CHECKS_UNREADABLE: u32 = u32::MAX;

    /// [`Step::CloseFds`](super::Step::CloseFds): `close_range(3, ~0, CLOEXEC)`.
    pub const CLOSE_FDS_RANGE: u32 = 0;

    /// [`Step::Chdir`](super::Step::Chdir): `chdir`.
    pub const CHDIR_CALL: u32 = 0;
    /// [`Step::Chdir`](super::Step::Chdir): the working directory is not the pinned one
    /// (`ESTALE`), or its identity could not be read.
    pub const CHDIR_IDENTITY: u32 = 1;

    /// [`Step::NoNewPrivs`](super::Step::NoNewPrivs): `PR_SET_NO_NEW_PRIVS`.
    pub const NO_NEW_PRIVS: u32 = 0;

    /// [`Step::Landlock`](super::Step::Landlock): `landlock_restrict_self`.
    pub const LANDLOCK_RESTRICT: u32 = 0;
    /// [`Step::Landlock`](super::Step::Landlock): opening a late rule's path; plus the
    /// rule's index.
    pub const LANDLOCK_LATE_OPEN: u32 = 1000;
    /// [`Step::Landlock`](super::Step::Landlock): `landlock_add_rule` of a late rule;
    /// plus the rule's index.
    pub const LANDLOCK_LATE_ADD: u32 = 2000;
    /// [`Step::Landlock`](super::Step::Landlock): the bwrap helper found no ruleset fd.
    pub const LANDLOCK_HELPER_RULESET: u32 = 3000;

    /// [`Step::Capabilities`](super::Step::Capabilities): the first `capget`. (Below
    /// this, the detail is a capability the bounding set refused to drop.)
    pub const CAPS_GET: u32 = 99;
    /// [`Step::Capabilities`](super::Step::Capabilities): clearing the ambient set.
    pub const CAPS_AMBIENT_CLEAR: u32 = 100;
    /// [`Step::Capabilities`](super::Step::Capabilities): `capset` to empty sets.
    pub const CAPS_SET: u32 = 101;
    /// [`Step::Capabilities`](super::Step::Capabilities): the verifying `capget`.
    pub const CAPS_VERIFY_GET: u32 = 102;
    /// [`Step::Capabilities`](super::Step::Capabilities): a capability is left after
    /// `capset` (`EPERM`).
    pub const CAPS_LEFT: u32 = 103;
    /// [`Step::Capabilities`](super::Step::Capabilities): locking the securebits.
    pub const CAPS_SECUREBITS: u32 = 104;
    /// [`Step::Capabilities`](super::Step::Capabilities): a capability is left in the
    /// bounding set (`EPERM`); plus its number.
    pub const CAPS_BOUNDING_LEFT: u32 = 200;

    /// [`Step::Seccomp`](super::Step::Seccomp): handing the listener back failed; plus
    /// the filter's index.
    pub const SECCOMP_SEND_LISTENER: u32 = 100;
    /// [`Step::Seccomp`](super::Step::Seccomp): the bwrap helper could not read a valid
    /// program.
    pub const SECCOMP_HELPER_READ: u32 = 300;
    /// [`Step::Seccomp`](super::Step::Seccomp): the bwrap helper's program is longer
    /// than `sock_fprog` can describe.
    pub const SECCOMP_HELPER_TOO_LONG: u32 = 301;

    /// [`Step::Exec`](super::Step::Exec): `execve` (and, with errno 0, the bwrap
    /// helper's success record).
    pub const EXEC_CALL: u32 = 0;
    /// [`Step::Exec`](super::Step::Exec): the bwrap helper's arguments are unusable.
    pub const EXEC_HELPER_ARGUMENTS: u32 = 1;
    /// [`Step::Exec`](super::Step::Exec): the bwrap helper could not read the command's
    /// environment.
    pub const EXEC_HELPER_ENV: u32 = 2;

    /// [`Step::Limits`](super::Step::Limits): joining a cgroup (writing `0` to `cgroup.procs` or `tasks`).
    pub const LIMITS_CGROUP: u32 = 0;
    /// [`Step::Limits`](super::Step::Limits): reading or setting an rlimit.
    pub const LIMITS_RLIMIT: u32 = 1;
    /// [`Step::Limits`](super::Step::Limits): writing `oom_score_adj`.
    pub const LIMITS_OOM_SCORE_ADJ: u32 = 2;
    /// [`Step::Limits`](super::Step::Limits): the cgroup's or rlimit's index is added
    /// times this.
    pub const LIMITS_STRIDE: u32 = 16;

    /// [`Step::Network`](super::Step::Network): the socket for the loopback's ioctl.
    pub const NETWORK_LOOPBACK_SOCKET: u32 = 0;
    /// [`Step::Network`](super::Step::Network): `SIOCSIFFLAGS` setting `lo` up.
    pub const NETWORK_LOOPBACK_UP: u32 = 1;
    /// [`Step::Network`](super::Step::Network): the `NETLINK_SOCK_DIAG` socket.
    pub const NETWORK_UNIX_DIAG: u32 = 2;
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
            15 => Network,
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
            Step::Network => "network",
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
    /// Which call of the step failed, or the index of the item it was working on
    /// (see the [`Step`] variant and [`detail`]).
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

/// The bytes of one status record (pure; no allocation, so the child may call it).
pub(crate) fn encode_record(step: Step, errno: i32, detail: u32) -> [u8; STATUS_RECORD_LEN] {
    let mut record = [0u8; STATUS_RECORD_LEN];
    record[0..4].copy_from_slice(&(step as u32).to_ne_bytes());
    record[4..8].copy_from_slice(&errno.to_ne_bytes());
    record[8..12].copy_from_slice(&detail.to_ne_bytes());
    record
}

/// Write one status record (raw syscall only).
pub(crate) fn write_record(fd: RawFd, step: Step, errno: i32, detail: u32) {
    let record = encode_record(step, errno, detail);
    // SAFETY: write(2) is async-signal-safe; the buffer is local.
    unsafe { libc::write(fd, record.as_ptr() as *const libc::c_void, record.len()) };
}

/// Decode one status record written by the stage or the helper (pure). An unknown
/// step number reads as [`Step::Exec`].
pub(crate) fn decode_record(record: &[u8; STATUS_RECORD_LEN]) -> StageFailure {
    let step = u32::from_ne_bytes([record[0], record[1], record[2], record[3]]);
    let errno = i32::from_ne_bytes([record[4], record[5], record[6], record[7]]);
    let detail = u32::from_ne_bytes([record[8], record[9], record[10], record[11]]);
    StageFailure { step: Step::from_u32(step).unwrap_or(Step::Exec), errno, detail }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_STEPS: [Step; 16] = [
        Step::Clone,
        Step::ParentDeathSignal,
        Step::Signals,
        Step::NewSession,
        Step::IdMaps,
        Step::Mount,
        Step::Stdio,
        Step::CloseFds,
        Step::Chdir,
        Step::NoNewPrivs,
        Step::Landlock,
        Step::Capabilities,
        Step::Seccomp,
        Step::Exec,
        Step::Limits,
        Step::Network,
    ];

    #[test]
    fn every_step_survives_encode_and_decode() {
        let details = [
            0,
            1,
            2,
            16,
            detail::CAPS_GET,
            detail::CAPS_BOUNDING_LEFT + 40,
            detail::LANDLOCK_LATE_ADD + 3,
            detail::MOUNT_CHECKS_UNREADABLE,
        ];
        for step in ALL_STEPS {
            for errno in [0, libc::EPERM, libc::ESTALE, i32::MAX, -1] {
                for detail in details {
                    let record = encode_record(step, errno, detail);
                    assert_eq!(decode_record(&record), StageFailure { step, errno, detail });
                }
            }
        }
    }

    #[test]
    fn the_record_layout_is_step_errno_detail_in_native_order() {
        let record = encode_record(Step::Seccomp, libc::EACCES, 7);
        assert_eq!(record[0..4], 12u32.to_ne_bytes());
        assert_eq!(record[4..8], libc::EACCES.to_ne_bytes());
        assert_eq!(record[8..12], 7u32.to_ne_bytes());
    }

    #[test]
    fn step_numbers_are_stable_and_names_unique() {
        for (n, step) in ALL_STEPS.into_iter().enumerate() {
            let n = u32::try_from(n).unwrap();
            assert_eq!(step as u32, n);
            assert_eq!(Step::from_u32(n), Some(step));
        }
        let mut names: Vec<&str> = ALL_STEPS.iter().map(|s| s.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL_STEPS.len());
    }

    #[test]
    fn an_unknown_step_decodes_as_exec() {
        let mut record = encode_record(Step::Mount, libc::ENOENT, 4);
        record[0..4].copy_from_slice(&99u32.to_ne_bytes());
        assert_eq!(decode_record(&record), StageFailure { step: Step::Exec, errno: libc::ENOENT, detail: 4 });
    }

    #[test]
    fn details_of_one_step_do_not_collide() {
        use detail::*;
        let distinct = |v: &[u32]| {
            let mut s = v.to_vec();
            s.sort_unstable();
            s.dedup();
            s.len() == v.len()
        };
        assert!(distinct(&[CLONE_CHILD, CLONE_COMMAND]));
        assert!(distinct(&[PDEATH_SIGNAL, PDEATH_SUBREAPER]));
        assert!(distinct(&[SESSION_SETSID, SESSION_SETPGID, SESSION_INIT]));
        assert!(distinct(&[ID_MAPS_SETGROUPS, ID_MAPS_UID, ID_MAPS_GID]));
        assert!(distinct(&[CHDIR_CALL, CHDIR_IDENTITY]));
        assert!(distinct(&[LIMITS_CGROUP, LIMITS_RLIMIT, LIMITS_OOM_SCORE_ADJ]));
        const _: () = assert!(LIMITS_OOM_SCORE_ADJ < LIMITS_STRIDE);
        assert!(distinct(&[EXEC_CALL, EXEC_HELPER_ARGUMENTS, EXEC_HELPER_ENV]));
        assert!(distinct(&[SECCOMP_HELPER_READ, SECCOMP_HELPER_TOO_LONG]));
        const _: () = assert!(SECCOMP_SEND_LISTENER < SECCOMP_HELPER_READ);
        // Capability numbers (0..=63 today) stay below the named capability details;
        // the bounding-set details sit above them.
        assert!(distinct(&[CAPS_GET, CAPS_AMBIENT_CLEAR, CAPS_SET, CAPS_VERIFY_GET, CAPS_LEFT, CAPS_SECUREBITS]));
        const _: () = assert!(63 < CAPS_GET && CAPS_SECUREBITS < CAPS_BOUNDING_LEFT);
        // Late-rule details are a base plus an index: the ranges do not overlap.
        const _: () = assert!(LANDLOCK_RESTRICT < LANDLOCK_LATE_OPEN);
        const _: () = assert!(LANDLOCK_LATE_OPEN < LANDLOCK_LATE_ADD && LANDLOCK_LATE_ADD < LANDLOCK_HELPER_RULESET);
    }

    #[test]
    fn the_message_names_step_detail_and_errno() {
        let f = StageFailure { step: Step::Mount, errno: libc::ESTALE, detail: 3 };
        let text = f.to_string();
        assert!(text.starts_with("sandbox setup step `mount` (#3) failed: "), "{text}");
    }
}
