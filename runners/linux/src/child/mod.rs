//! The child's steps of the contract (see the crate docs), between `clone` and
//! `execve`: the outer steps 1, 2, 4, 5 and 5b (`stage_outer`; an init runs them for
//! itself) and the inner steps 3 and 6 to 13 (`stage_inner`, ending in
//! `confine_and_exec`, which the bwrap helper shares). Mounts, Landlock, capabilities
//! and seccomp (with the listener hand-back) are submodules.
//!
//! Everything here runs in the child: raw, async-signal-safe syscalls on memory the
//! parent prepared (`prepared::Prepared`), no allocation, no locks, no panics. A failed step
//! writes a status record and exits (`prepared::fail`).
//!
//! What it does not do: decide anything. Every value comes from the plan.

use std::io;
use std::os::fd::RawFd;

use crate::contract::FileIdentity;
use crate::status::{detail, write_record, Step};
use crate::sys::{errno, write_file, write_file_at};

pub(crate) mod caps;
mod landlock;
mod mounts;
mod prepared;
mod seccomp;

pub(crate) use prepared::{fail, Prepared};

/// The clone entry point of the child without an init (see `spawn`).
pub(crate) extern "C" fn child_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Prepared` the parent passed to clone; the parent is
    // suspended (CLONE_VFORK) so nothing else touches it.
    let p = unsafe { &mut *(arg as *mut Prepared<'_>) };
    child_stage(p)
}

/// The child side without an init: outer then inner steps. Never returns.
pub(crate) fn child_stage(p: &mut Prepared<'_>) -> ! {
    stage_outer(p, libc::SIGKILL);
    stage_inner(p)
}

/// Steps 1, 2, 4, 5 and 5b: parent-death signal, signal dispositions, identity maps,
/// mounts, the loopback. (The limits of step 1 are the command's own: `stage_inner`.) The signal
/// mask stays full: the init clears its own once its forwarders are installed, the
/// command's process just before `execve`.
pub(crate) fn stage_outer(p: &mut Prepared<'_>, pdeath_signal: libc::c_int) {
    let plan = p.plan;
    // SAFETY (whole function): every call below is a raw, async-signal-safe syscall on
    // memory prepared by the parent before clone; nothing allocates or takes a lock.

    // 1. Parent-death signal.
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, pdeath_signal as libc::c_ulong, 0, 0, 0) } != 0 {
        fail(p, Step::ParentDeathSignal, errno(), detail::PDEATH_SIGNAL);
    }

    // 2. Signals: default dispositions (the mask stays full, see above).
    default_dispositions();

    // 4. Identity maps in a new user namespace.
    if let Some(maps) = &plan.id_maps {
        if let Err(e) = write_file(b"/proc/self/setgroups\0", b"deny") {
            fail(p, Step::IdMaps, e, detail::ID_MAPS_SETGROUPS);
        }
        if let Err(e) = write_file(b"/proc/self/uid_map\0", maps.uid_map.as_bytes()) {
            fail(p, Step::IdMaps, e, detail::ID_MAPS_UID);
        }
        if let Err(e) = write_file(b"/proc/self/gid_map\0", maps.gid_map.as_bytes()) {
            fail(p, Step::IdMaps, e, detail::ID_MAPS_GID);
        }
    }

    // 5. Mounts.
    mounts::apply_mounts(p);

    // 5b. The loopback of the run's own network namespace.
    if plan.loopback_up {
        loopback_up(p);
    }
}

/// Step 5b: `lo` up (`SIOCSIFFLAGS` on a datagram socket of the new namespace; the
/// kernel gives it 127.0.0.1/8 and ::1 as it comes up). Needs `CAP_NET_ADMIN` over
/// the namespace: root, or the owner of the new user namespace, before step 11.
fn loopback_up(p: &Prepared<'_>) {
    // SAFETY: socket with integer arguments; the fd is closed below.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        fail(p, Step::Network, errno(), detail::NETWORK_LOOPBACK_SOCKET);
    }
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    #[allow(clippy::cast_possible_truncation, reason = "IFF_UP | IFF_RUNNING fit in the short ifr_flags")]
    {
        req.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    // SAFETY: ioctl(SIOCSIFFLAGS) reads a local ifreq.
    let r = unsafe { libc::ioctl(s, libc::SIOCSIFFLAGS as _, &req as *const libc::ifreq) };
    let e = errno();
    // SAFETY: closing the socket opened above.
    unsafe { libc::close(s) };
    if r != 0 {
        fail(p, Step::Network, e, detail::NETWORK_LOOPBACK_UP);
    }
}

/// Every signal's disposition back to the default: a handler of cordon's must not run
/// in the stage, and an ignored signal would stay ignored across `execve` (cordon's
/// runtime ignores SIGPIPE: a command would see EPIPE instead of dying of it).
///
/// The system call itself, for every signal: the C library's `signal()` refuses the
/// real-time signals it keeps for itself (32 to 34 in glibc), which a caller may have
/// left ignored too. An all-zero kernel `sigaction` is `SIG_DFL` with no flags and an
/// empty mask on every architecture, whatever the order of its fields.
pub(crate) fn default_dispositions() {
    let default = [0u64; 4];
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: rt_sigaction with a zeroed kernel sigaction (SIG_DFL) and an 8-byte
        // signal set; failures for numbers the kernel does not accept are harmless.
        unsafe { libc::syscall(libc::SYS_rt_sigaction, sig, default.as_ptr(), std::ptr::null_mut::<u64>(), 8usize) };
    }
}

/// Step 1b: join the run's cgroups, set the rlimits, volunteer for the OOM killer.
/// Taken by the process that execs the command, never by a shared init (a fork-style
/// init sets the OOM score for itself first, see `init_stage`): a shared init shares
/// cordon's memory, and the kernel copies an `oom_score_adj` write to every process
/// sharing the writer's memory, and an OOM kill of one (a memory cgroup's, or all of
/// them with `memory.oom.group`) to all of them: cordon included. The init stays in
/// cordon's cgroups, holding nothing the run could use up. (A vfork-style child's
/// `oom_score_adj` write stays its own.)
fn apply_limits(p: &Prepared<'_>) {
    let limits = &p.plan.limits;
    for (i, &fd) in limits.cgroup_procs.iter().enumerate() {
        // SAFETY: write(2) of a static byte to an fd the parent opened for us.
        let n = unsafe { libc::write(fd, b"0".as_ptr() as *const libc::c_void, 1) };
        if n != 1 {
            fail(
                p,
                Step::Limits,
                errno(),
                detail::LIMITS_CGROUP + detail::LIMITS_STRIDE * u32::try_from(i).unwrap_or(0),
            );
        }
    }
    for (i, &(resource, soft, hard)) in limits.rlimits.iter().enumerate() {
        if let Err(e) = lower_own_rlimit(resource, soft, hard) {
            fail(p, Step::Limits, e, detail::LIMITS_RLIMIT + detail::LIMITS_STRIDE * u32::try_from(i).unwrap_or(0));
        }
    }
    // A fork-style init set it for itself already (see `init_stage`).
    let inherited = p.plan.init && !crate::init::shares_memory(p.plan);
    if let Some(adj) = limits.oom_score_adj.filter(|_| !inherited) {
        // Through the /proc opened before the mounts: `self` there is this process
        // as cordon's pid namespace numbers it.
        if let Err(e) = write_file_at(p.proc_dir, b"self/oom_score_adj\0", adj) {
            fail(p, Step::Limits, e, detail::LIMITS_OOM_SCORE_ADJ);
        }
    }
}

/// Lower this process's `resource` limit to `soft`/`hard` (raw `prlimit64`; a limit is
/// never raised: each is capped at the inherited hard limit, and a hard limit left as
/// it was needs no privilege or security-module check). `Err(errno)` on failure.
pub(crate) fn lower_own_rlimit(resource: u32, soft: u64, hard: u64) -> Result<(), i32> {
    let mut old = libc::rlimit64 { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: prlimit64 on ourselves (pid 0) reading into a local struct.
    if unsafe { libc::syscall(libc::SYS_prlimit64, 0, resource, std::ptr::null::<libc::rlimit64>(), &mut old) } != 0 {
        return Err(errno());
    }
    let max = hard.min(old.rlim_max);
    let new = libc::rlimit64 { rlim_cur: soft.min(max), rlim_max: max };
    // SAFETY: prlimit64 on ourselves with a local struct; lowering needs no privilege.
    if unsafe { libc::syscall(libc::SYS_prlimit64, 0, resource, &new, std::ptr::null_mut::<libc::rlimit64>()) } != 0 {
        return Err(errno());
    }
    Ok(())
}

fn unblock_signals(p: &Prepared<'_>) {
    // SAFETY: sigemptyset/sigprocmask on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        if libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut()) != 0 {
            fail(p, Step::Signals, errno(), detail::SIGNALS_MASK);
        }
    }
}

/// Steps 3 and 6 to 13: session, stdio, fds, cwd, no_new_privs, Landlock,
/// capabilities, seccomp, exec. Never returns.
pub(crate) fn stage_inner(p: &mut Prepared<'_>) -> ! {
    let plan = p.plan;
    // 1b. The run's limits, before anything else runs in this process.
    apply_limits(p);
    // (Signals stay blocked until just before execve: this process shares cordon's
    // memory until then, and a core-dumping signal would write it out.)
    // 3. New session, or at least a process group of its own (under a supervising
    // init, the init's group: it took this step).
    if p.join_init_group {
    } else if plan.new_session {
        // SAFETY: setsid has no arguments.
        if unsafe { libc::setsid() } < 0 {
            fail(p, Step::NewSession, errno(), detail::SESSION_SETSID);
        }
    } else {
        // SAFETY: setpgid with integer arguments (0, 0: this process, its own pid).
        if unsafe { libc::setpgid(0, 0) } < 0 {
            fail(p, Step::NewSession, errno(), detail::SESSION_SETPGID);
        }
    }

    // 6. Standard streams.
    for (target, &src) in (0 as RawFd..).zip(plan.stdio.iter()) {
        if src == target {
            // SAFETY: clearing FD_CLOEXEC on an fd the plan says is ours.
            if unsafe { libc::fcntl(src, libc::F_SETFD, 0) } != 0 {
                fail(p, Step::Stdio, errno(), target as u32);
            }
        } else {
            // SAFETY: dup2 between fds; sources are > 2 so no earlier target is reused.
            if unsafe { libc::dup2(src, target) } < 0 {
                fail(p, Step::Stdio, errno(), target as u32);
            }
        }
    }

    // 7. Only stdio (and the plan's passed fds) cross exec: mark everything else
    // close-on-exec. (Marking rather than closing keeps the status pipe and the
    // ruleset fd usable until exec.)
    // SAFETY: close_range with integer arguments.
    let r = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
    if r != 0 {
        fail(p, Step::CloseFds, errno(), detail::CLOSE_FDS_RANGE);
    }
    for &(src, dst) in &plan.pass_fds {
        // SAFETY: dup2/fcntl on fds the plan names; dup2 clears close-on-exec on the
        // new descriptor, and an fd duplicated onto itself is cleared explicitly.
        let r = unsafe {
            if src == dst {
                libc::fcntl(src, libc::F_SETFD, 0)
            } else {
                libc::dup2(src, dst)
            }
        };
        if r < 0 {
            fail(p, Step::CloseFds, errno(), dst as u32);
        }
    }

    // 8. Working directory.
    if plan.cwd_no_symlinks {
        let dir = match crate::sys::open_path_no_symlinks(libc::AT_FDCWD, &plan.cwd) {
            Ok(d) => d,
            Err(e) => fail(p, Step::Chdir, e.raw_os_error().unwrap_or(libc::EIO), detail::CHDIR_CALL),
        };
        // SAFETY: fchdir on the fd opened just above (closed when dropped).
        if unsafe { libc::fchdir(std::os::fd::AsRawFd::as_raw_fd(&dir)) } != 0 {
            fail(p, Step::Chdir, errno(), detail::CHDIR_CALL);
        }
    // SAFETY: chdir with a NUL-terminated path.
    } else if unsafe { libc::chdir(plan.cwd.as_ptr()) } != 0 {
        fail(p, Step::Chdir, errno(), detail::CHDIR_CALL);
    }
    if let Some(want) = plan.cwd_expect {
        // The directory we are in now, whatever path led here: it must be the one
        // the parent pinned (a swapped component lands elsewhere).
        // SAFETY: open with a static NUL-terminated path; the fd is closed below.
        let dot = unsafe { libc::open(c".".as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        let got = if dot < 0 { Err(io::Error::last_os_error()) } else { FileIdentity::of_fd(dot) };
        if dot >= 0 {
            // SAFETY: closing the fd opened just above.
            unsafe { libc::close(dot) };
        }
        match got {
            Ok(got) if got == want => {}
            Ok(_) => fail(p, Step::Chdir, libc::ESTALE, detail::CHDIR_IDENTITY),
            Err(e) => fail(p, Step::Chdir, e.raw_os_error().unwrap_or(libc::EIO), detail::CHDIR_IDENTITY),
        }
    }
    confine_and_exec(p)
}

/// Steps 9 to 13: no_new_privs, Landlock, capabilities, seccomp, exec. Shared by the
/// cloned child and the bwrap runner's stage helper (`helper`). Never returns.
pub(crate) fn confine_and_exec(p: &mut Prepared<'_>) -> ! {
    let plan = p.plan;
    // 9. no_new_privs.
    // SAFETY: prctl with integer arguments.
    if plan.no_new_privs && unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        fail(p, Step::NoNewPrivs, errno(), detail::NO_NEW_PRIVS);
    }

    // 10. Landlock: late rules for child-only trees, then restrict.
    landlock::restrict_self(p);

    // 11. Capabilities.
    if plan.drop_capabilities {
        caps::drop_all_capabilities(p);
    }

    // 12. seccomp, last.
    seccomp::install_filters(p);

    // 13. exec. The helper first says it got this far (see `helper`); a failed
    // execve then adds its failure record after that one.
    if p.ok_record {
        write_record(p.status_fd, Step::Exec, 0, detail::EXEC_CALL);
    }
    // Step 2's empty mask, as late as possible (see `stage_inner`).
    unblock_signals(p);
    // SAFETY: execve with NUL-terminated, null-terminated arrays built before clone.
    unsafe { libc::execve(plan.program.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr()) };
    fail(p, Step::Exec, errno(), detail::EXEC_CALL);
}
