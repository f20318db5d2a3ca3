//! The bwrap runner's stage helper: steps 9 to 13 of the contract, run by a process
//! that bubblewrap executed after it built the sandbox's mounts (Landlock refuses
//! mount operations to a restricted task, so it cannot be applied before bubblewrap).
//!
//! The parent's stage passes its fds through bubblewrap at fixed numbers
//! ([`SECCOMP_FD`], [`RULESET_FD`], [`STATUS_FD`], [`EXE_FD`], [`ENV_FD`]); bubblewrap executes
//! `/proc/self/fd/EXE_FD`, i.e. the cordon binary, which calls [`run`]. In order:
//!
//! 1. every fd above stdio is marked close-on-exec and the executable's fd closed;
//! 2. cordon's seccomp program is read from [`SECCOMP_FD`] (its read offset reaching
//!    the program's length is the parent's evidence that bubblewrap finished), and the
//!    command's environment from [`ENV_FD`]; then every identity in
//!    [`CHECKS_FD`] is verified (each bind destination bubblewrap
//!    resolved is the file cordon pinned, protected ones read-only; the working
//!    directory is the pinned one);
//! 3. `no_new_privs` (already set by the parent's stage; set again, harmless);
//! 4. Landlock: the rules for trees that exist only inside (the private tmpfs) are
//!    added to the parent's ruleset ([`RULESET_FD`]), then `landlock_restrict_self`;
//! 5. capabilities dropped and verified (bubblewrap's `--cap-drop ALL` left none);
//! 6. the seccomp program, last (with a listener sent to cordon's supervisor on
//!    [`NOTIFY_FD`] and closed, when asked; with a socket diagnostics socket of the
//!    sandbox's network namespace beside it, when asked: bubblewrap brought its
//!    loopback up);
//! 7. a success record on [`STATUS_FD`], then `execve`.
//!
//! A failed step writes a [`StageFailure`] record on [`STATUS_FD`] and exits with
//! [`STAGE_SETUP_FAILED_EXIT`]; the command never runs. The parent reads the pipe
//! after the run: a failure record, or no success record at all (bubblewrap or the
//! helper died first), means the sandbox was never complete.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::child::{confine_and_exec, Prepared};
use crate::contract::{ChildLimits, FileIdentity, StagePlan};
use crate::spawn::last_capability;
use crate::status::{
    decode_record, detail, write_record, StageFailure, Step, STAGE_SETUP_FAILED_EXIT, STATUS_RECORD_LEN,
};
use crate::sys::{errno, open_path_no_symlinks};

/// cordon's seccomp program (raw `struct sock_filter` array) in the sandbox.
pub const SECCOMP_FD: RawFd = 3;
/// The Landlock ruleset the parent created (rules bound to host inodes, which
/// bubblewrap's binds share).
pub const RULESET_FD: RawFd = 4;
/// The write end of the helper's status pipe.
pub const STATUS_FD: RawFd = 5;
/// The cordon executable bubblewrap executes as `/proc/self/fd/6`.
pub const EXE_FD: RawFd = 6;
/// The command's environment (`NAME=value` entries, each ending in NUL). The
/// helper itself runs with bubblewrap's near-empty environment: were the command's
/// variables in it, `LD_PRELOAD` and friends would load code into the helper
/// before it confines itself.
pub const ENV_FD: RawFd = 7;
/// A unix socket to cordon's supervisor: with [`HelperPlan::notify`], the seccomp
/// listener is sent on it and closed before `execve` (as in step 12).
pub const NOTIFY_FD: RawFd = 8;
/// The identities to verify inside the finished sandbox before confining: entries
/// `KIND DEV INO PATH`, each ending in NUL, where KIND is `r` (a bind that must be
/// this file and read-only: a protected path), `w` (a bind that must be this file)
/// or `c` (the working directory must be this directory; PATH is `.`). bubblewrap
/// resolves bind destinations itself, so a destination swapped after cordon's check
/// (a concurrent run renaming a directory inside the workspace) is caught here.
pub const CHECKS_FD: RawFd = 9;

/// What the helper does, parsed from its arguments by the caller.
#[derive(Debug)]
pub struct HelperPlan {
    /// `landlock_restrict_self` flags.
    pub restrict_flags: u32,
    /// Landlock rules for trees that exist only inside: path and access bits.
    pub late_landlock_rules: Vec<(CString, u64)>,
    /// Landlock rules for private tmpfs mounts bubblewrap made on host directories
    /// (the home's cache): checked to be a writable tmpfs reached without a symlink
    /// (see `StagePlan::late_landlock_tmpfs_rules`).
    pub late_landlock_tmpfs_rules: Vec<(CString, u64)>,
    /// Absolute path of the command.
    pub program: CString,
    /// The command's `argv`, `argv[0]` included.
    pub argv: Vec<CString>,
    /// Install the seccomp program with a listener and send it on [`NOTIFY_FD`].
    pub notify: bool,
    /// Send a `NETLINK_SOCK_DIAG` socket of the sandbox's network namespace with the
    /// listener (see `StagePlan::unix_diag`).
    pub unix_diag: bool,
}

fn give_up(step: Step, errno: i32, detail: u32) -> ! {
    write_record(STATUS_FD, step, errno, detail);
    // SAFETY: _exit cannot fail.
    unsafe { libc::_exit(STAGE_SETUP_FAILED_EXIT) }
}

/// Report unusable helper arguments (step `exec`, `EINVAL`, detail 1) and exit.
pub fn refuse_arguments() -> ! {
    give_up(Step::Exec, libc::EINVAL, detail::EXEC_HELPER_ARGUMENTS)
}

/// Read `fd` to its end.
fn read_all(fd: RawFd) -> Result<Vec<u8>, i32> {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: read into a local buffer of the given length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if n < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return Err(errno());
        }
        if n == 0 {
            return Ok(bytes);
        }
        bytes.extend_from_slice(&buf[..n as usize]);
    }
}

/// The command's environment from [`ENV_FD`].
fn read_env() -> Result<Vec<CString>, i32> {
    let bytes = read_all(ENV_FD)?;
    if bytes.last().is_some_and(|b| *b != 0) {
        return Err(libc::EINVAL);
    }
    bytes.split(|b| *b == 0).filter(|e| !e.is_empty()).map(|e| CString::new(e).map_err(|_| libc::EINVAL)).collect()
}

/// Check every entry of [`CHECKS_FD`] (see there); a mismatch fails step `mount`
/// (`ESTALE`: another file than the one cordon pinned; `EROFS`: a protected path
/// that is not read-only) with the entry's index as detail.
fn verify_identities() {
    let bytes = match read_all(CHECKS_FD) {
        Ok(b) => b,
        Err(e) => give_up(Step::Mount, e, detail::MOUNT_CHECKS_UNREADABLE),
    };
    for (i, entry) in bytes.split(|b| *b == 0).filter(|e| !e.is_empty()).enumerate() {
        let detail = u32::try_from(i).unwrap_or(u32::MAX);
        let mut parts = entry.splitn(4, |b| *b == b' ');
        let (Some(kind), Some(dev), Some(ino), Some(path)) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            give_up(Step::Mount, libc::EINVAL, detail)
        };
        let num = |b: &[u8]| std::str::from_utf8(b).ok().and_then(|t| t.parse::<u64>().ok());
        let (Some(dev), Some(ino), Ok(path)) = (num(dev), num(ino), CString::new(path)) else {
            give_up(Step::Mount, libc::EINVAL, detail)
        };
        let fd = match open_path_no_symlinks(libc::AT_FDCWD, &path) {
            Ok(fd) => fd,
            Err(e) => give_up(Step::Mount, e.raw_os_error().unwrap_or(libc::EIO), detail),
        };
        match FileIdentity::of_fd(fd.as_raw_fd()) {
            Ok(got) if got == (FileIdentity { dev, ino }) => {}
            Ok(_) => give_up(Step::Mount, libc::ESTALE, detail),
            Err(e) => give_up(Step::Mount, e.raw_os_error().unwrap_or(libc::EIO), detail),
        }
        if kind == b"r" {
            // SAFETY: fstatvfs fills a zeroed, properly sized local struct.
            let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
            // SAFETY: see above; the fd is open.
            if unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut st) } != 0 {
                give_up(Step::Mount, errno(), detail);
            }
            if st.f_flag & libc::ST_RDONLY == 0 {
                give_up(Step::Mount, libc::EROFS, detail);
            }
        }
    }
}

/// Read cordon's seccomp program from [`SECCOMP_FD`].
fn read_program() -> Result<Vec<libc::sock_filter>, i32> {
    let bytes = read_all(SECCOMP_FD)?;
    if bytes.is_empty() || bytes.len() % 8 != 0 || bytes.len() / 8 > u16::MAX as usize {
        return Err(libc::EINVAL);
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| libc::sock_filter {
            code: u16::from_ne_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect())
}

/// Apply the helper's steps (see the module docs) and execute the command.
/// Never returns: on failure it reports on [`STATUS_FD`] and exits.
pub fn run(plan: HelperPlan) -> ! {
    // 1. Only stdio crosses the final exec; the executable's fd goes now.
    // SAFETY: close_range/close with integer arguments.
    let r = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
    if r != 0 {
        give_up(Step::CloseFds, errno(), detail::CLOSE_FDS_RANGE);
    }
    // SAFETY: closing the executable's fd, which nothing in this process uses.
    unsafe { libc::close(EXE_FD) };
    // The helper is cordon's binary, whose runtime ignores SIGPIPE before `main`: the
    // command gets the default dispositions, as under the landlock runner.
    crate::child::default_dispositions();
    // 2. The seccomp program.
    let program = match read_program() {
        Ok(p) => p,
        Err(e) => give_up(Step::Seccomp, e, detail::SECCOMP_HELPER_READ),
    };
    // SAFETY: fcntl(F_GETFD) only checks that the fd is open.
    if unsafe { libc::fcntl(RULESET_FD, libc::F_GETFD) } < 0 {
        give_up(Step::Landlock, errno(), detail::LANDLOCK_HELPER_RULESET);
    }
    // SAFETY: the parent's stage placed the ruleset at RULESET_FD and nothing
    // else in this process owns it.
    let ruleset = unsafe { OwnedFd::from_raw_fd(RULESET_FD) };
    let envp = match read_env() {
        Ok(e) => e,
        Err(e) => give_up(Step::Exec, e, detail::EXEC_HELPER_ENV),
    };
    verify_identities();
    let stage = StagePlan {
        program: plan.program,
        argv: plan.argv,
        envp,
        cwd: c"/".to_owned(),
        cwd_expect: None,
        cwd_no_symlinks: false,
        stdio: [0, 1, 2],
        namespaces: 0,
        id_maps: None,
        mounts: Vec::new(),
        loopback_up: false,
        mount_slots: 0,
        new_session: false,
        init: false,
        init_shares_memory: false,
        no_new_privs: true,
        landlock: Some((ruleset, plan.restrict_flags)),
        late_landlock_rules: plan.late_landlock_rules,
        late_landlock_tmpfs_rules: plan.late_landlock_tmpfs_rules,
        drop_capabilities: true,
        seccomp: vec![program],
        notify_socket: plan.notify.then_some(NOTIFY_FD),
        unix_diag: plan.notify && plan.unix_diag,
        pass_fds: Vec::new(),
        // Inherited from cordon's stage, which applied them before bubblewrap ran.
        limits: ChildLimits::default(),
    };
    let mut argv: Vec<*const libc::c_char> = stage.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = stage.envp.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    let filters = stage
        .seccomp
        .iter()
        .map(|p| {
            // `read_program` refused programs longer than `u16::MAX` instructions.
            let len = u16::try_from(p.len())
                .unwrap_or_else(|_| give_up(Step::Seccomp, libc::EINVAL, detail::SECCOMP_HELPER_TOO_LONG));
            libc::sock_fprog { len, filter: p.as_ptr() as *mut libc::sock_filter }
        })
        .collect();
    let mut prepared = Prepared {
        plan: &stage,
        argv,
        envp,
        slots: Vec::new(),
        filters,
        status_fd: STATUS_FD,
        last_cap: last_capability(),
        exit_fd: -1,
        inner_stack_top: 0,
        ok_record: true,
        join_init_group: false,
        // SAFETY: getpid has no arguments and cannot fail.
        parent_pid: unsafe { libc::getpid() },
        proc_dir: -1,
    };
    // 3 to 7.
    confine_and_exec(&mut prepared)
}

/// What the helper's status pipe says, read by the parent after the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelperStatus {
    /// The helper confined itself completely and called `execve` for the command.
    Executed,
    /// A step failed (the command never ran).
    Failed(StageFailure),
    /// No record: bubblewrap or the helper died before the helper finished (the
    /// command never ran confined by it).
    NeverReached,
}

/// Read every record on the helper's status pipe (without blocking: the pipe is
/// switched to non-blocking mode) and judge them.
pub fn read_status(fd: std::os::fd::BorrowedFd<'_>) -> HelperStatus {
    let raw = fd.as_raw_fd();
    // SAFETY: fcntl with integer arguments on a borrowed, open fd.
    unsafe {
        let flags = libc::fcntl(raw, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(raw, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
    let mut bytes = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        // SAFETY: read into a local buffer of the given length.
        let n = unsafe { libc::read(raw, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            break;
        }
        bytes.extend_from_slice(&buf[..n as usize]);
    }
    judge(&bytes)
}

/// The verdict on the raw bytes of the status pipe (pure).
pub fn judge(bytes: &[u8]) -> HelperStatus {
    let mut status = HelperStatus::NeverReached;
    for chunk in bytes.chunks_exact(STATUS_RECORD_LEN) {
        let mut record = [0u8; STATUS_RECORD_LEN];
        record.copy_from_slice(chunk);
        let f = decode_record(&record);
        status = if f.step == Step::Exec && f.errno == 0 {
            match status {
                HelperStatus::Failed(_) => status,
                _ => HelperStatus::Executed,
            }
        } else {
            HelperStatus::Failed(f)
        };
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(step: Step, errno: i32, detail: u32) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&(step as u32).to_ne_bytes());
        v.extend_from_slice(&errno.to_ne_bytes());
        v.extend_from_slice(&detail.to_ne_bytes());
        v
    }

    #[test]
    fn only_a_clean_success_record_means_executed() {
        assert_eq!(judge(&[]), HelperStatus::NeverReached);
        assert_eq!(judge(&rec(Step::Exec, 0, 0)), HelperStatus::Executed);
        let lock = StageFailure { step: Step::Landlock, errno: libc::EPERM, detail: 0 };
        assert_eq!(judge(&rec(Step::Landlock, libc::EPERM, 0)), HelperStatus::Failed(lock));
        // execve failed after the success record.
        let mut both = rec(Step::Exec, 0, 0);
        both.extend(rec(Step::Exec, libc::ENOENT, 0));
        assert!(matches!(judge(&both), HelperStatus::Failed(f) if f.errno == libc::ENOENT));
        // A torn record is not a success.
        assert_eq!(judge(&rec(Step::Exec, 0, 0)[..8]), HelperStatus::NeverReached);
    }
}
