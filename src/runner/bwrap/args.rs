//! bubblewrap's argument list for a run (pure): the path check every argument path
//! passes, the binds of the exposed paths, and [`bwrap_args`] itself.

use super::{
    exposed, own_net, seeds, stage_helper_plan, ENV_CHILD_FD, PRIVATE_TMPFS, SECCOMP_CHILD_FD, STAGE_HELPER_ARG,
    STAGE_HELPER_EXEC,
};
use crate::policy::ExecutionPolicy;
use crate::runner::error::PlanError;
use crate::runner::landlock::{private_dirs, sandbox_tmpdir};
use crate::runner::plan::{PlanInput, SeedBy};
use crate::vocab::RunnerKind;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// A path bubblewrap may be given: absolute, normalized (no `.`, `..`, `//` or
/// trailing `/`), without NUL. Any other byte (spaces, quotes, a leading `-` in a
/// component, newlines, non-UTF-8) is fine: each path is one argv element, never
/// parsed.
pub(super) fn check_path(role: &'static str, p: &Path) -> Result<(), PlanError> {
    let err = |why: &'static str| PlanError::Path { runner: RunnerKind::Bwrap, path: p.to_path_buf(), why };
    let bytes = p.as_os_str().as_bytes();
    if !p.is_absolute() {
        return Err(err(match role {
            "program" => "the program must be an absolute path",
            _ => "bubblewrap needs absolute, canonical paths",
        }));
    }
    if bytes.contains(&0) {
        return Err(err("a path cannot contain a NUL byte"));
    }
    let normal = p.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    let rebuilt: PathBuf = p.components().collect();
    if !normal || rebuilt.as_os_str().as_bytes() != bytes {
        return Err(err("the path is not normalized (`.`, `..`, `//` or a trailing `/`); pass the canonical path"));
    }
    Ok(())
}

fn push(args: &mut Vec<OsString>, items: &[&str]) {
    args.extend(items.iter().map(OsString::from));
}

/// The first fd number of the bind sources in the child (after the seccomp program).
pub const BIND_FD_BASE: i32 = cordon_stage::helper::CHECKS_FD + 1;

/// Every bind on top of the read-only root, in bubblewrap's order, with the fd number
/// its source has in the child and whether it is writable (pure): the exposed paths,
/// shallow first. The sources are the parent's pinned fds (`crate::pin`), reopened by
/// cordon's stage in its own view after its mounts (so the protected layout beneath
/// comes along, read-only where it is), so bubblewrap binds exactly the directories
/// that were checked (`--bind-fd`), never a path re-resolved later.
pub fn binds(policy: &ExecutionPolicy) -> Vec<(PathBuf, i32, bool)> {
    exposed(policy).into_iter().zip(BIND_FD_BASE..).map(|((p, writable), fd)| (p, fd, writable)).collect()
}

/// bubblewrap's arguments for `input` (pure): everything after `argv[0]`, ending
/// with `--`, the program and its arguments. Order matters, as bubblewrap applies
/// its mount operations in argument order:
///
/// 1. namespaces and process options (`--unshare-all`, `--share-net` with network or hosts by name
///    or without network namespaces,
///    `--die-with-parent`, `--new-session` unless the caller keeps its session,
///    `--cap-drop ALL`, and `--seccomp 3` only without the stage helper);
/// 2. `--ro-bind / /`, `--dev /dev`, `--proc /proc`, `--remount-ro /proc` (see
///    [`bwrap_args`]'s note on `/proc/sys`);
/// 3. `--size N --perms 1777 --tmpfs /tmp`, the same for `/dev/shm` (`--size` when
///    the run bounds its tmpfs, see [`PlanInput::tmpfs_size`]), then `--perms 0700
///    --tmpfs` on the home's cache directory when it gets one
///    (`landlock::private_dirs`);
/// 4. the exposed paths ([`exposed`]), shallow first: after the tmpfs, so one that
///    lives under `/tmp` is bound onto a mount point bubblewrap creates there
///    (`--bind-fd N P`, or `--ro-bind-fd N P` for a read-only workspace: the pinned
///    sources, reopened by cordon's stage with the protected layout attached beneath
///    them, which bubblewrap keeps: see [`binds`] and [`stage_mounts`](super::stage_mounts));
/// 5. the seeded files (`--perms 0600 --file FD DEST`: the private global git
///    config, see [`PlanInput::git_config`]);
/// 6. `--chdir`, `--setenv TMPDIR /tmp`, `--`, then with the helper
///    `/proc/self/fd/6 __stage --abi N --restrict-flags F --write-in-child /tmp
///    --write-in-child /dev/shm [--write-in-tmpfs HOME_CACHE] --notify -- PROGRAM
///    ARGV...` (the whole argv, `argv[0]` included), without it the program and its
///    arguments.
///
/// `--remount-ro /proc` closes a root escape: bubblewrap's fresh procfs is writable
/// and its own cover of `/proc/sys` is skipped (the directory answers `EACCES` to its
/// `access(W_OK)` probe), while the kernel lets any process whose euid is the
/// host's uid 0 write most sysctls without a capability, e.g. `kernel.core_pattern`,
/// which names a program the kernel runs as root on the next crash. The whole procfs
/// is read-only, as it is under the landlock runner.
pub fn bwrap_args(input: &PlanInput<'_>) -> Result<Vec<OsString>, PlanError> {
    let policy = input.policy;
    if !policy.mode.is_confined() {
        return Err(PlanError::Unavailable(format!(
            "mode {} runs unconfined under the passthrough runner, never under bubblewrap",
            policy.mode
        )));
    }
    check_path("program", &input.program)?;
    check_path("cwd", &input.cwd)?;
    let exposed = exposed(policy);
    for (p, _) in &exposed {
        check_path("exposed", p)?;
    }
    for p in &policy.protected {
        check_path("protected", p)?;
    }
    // The working directory must exist inside: under a private tmpfs only what is
    // bound there is visible.
    let hidden = !input.host.overlay.available() && PRIVATE_TMPFS.iter().any(|t| input.cwd.starts_with(t));
    if hidden && !exposed.iter().any(|(p, _)| input.cwd.starts_with(p)) {
        return Err(PlanError::Path {
            runner: RunnerKind::Bwrap,
            path: input.cwd.clone(),
            why: "the working directory lies under a private tmpfs (/tmp, /dev/shm) outside the workspace, so it \
                  would not exist inside the sandbox",
        });
    }

    let mut args: Vec<OsString> = Vec::new();
    push(&mut args, &["--unshare-all"]);
    // With hosts by name (`--allow-host`) the command's sockets must be in cordon's
    // network namespace, where the supervisor connects them to cordon's proxy on
    // loopback; the `proxy_only` seccomp filter (no UDP, raw, bind, listen; every
    // connect() supervised) and the stage helper's Landlock TCP rules are the
    // barrier then, as on the landlock runner, which has no network namespace.
    // A host that cannot make a network namespace (see `HostFacts::net_namespace`)
    // keeps a network-off run in the host's too: the `network_off` filter refuses IP
    // and unix connects there, as on the landlock runner.
    if !own_net(input) {
        push(&mut args, &["--share-net"]);
    }
    push(&mut args, &["--die-with-parent"]);
    if input.new_session {
        push(&mut args, &["--new-session"]);
    }
    let helper = stage_helper_plan(input);
    push(&mut args, &["--cap-drop", "ALL"]);
    if helper.is_none() {
        // bubblewrap installs the filter, and sets the command's environment from
        // `--setenv` arguments it reads (and closes) from the fd.
        push(&mut args, &["--seccomp", &SECCOMP_CHILD_FD.to_string(), "--args", &ENV_CHILD_FD.to_string()]);
    }
    push(&mut args, &["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--remount-ro", "/proc"]);
    let overlay = input.host.overlay.available();
    if overlay {
        // cordon's stage made them (private layers over the host's directories).
        for t in PRIVATE_TMPFS {
            push(&mut args, &["--bind", t, t]);
        }
    } else {
        for t in PRIVATE_TMPFS {
            if let Some(size) = input.tmpfs_size {
                push(&mut args, &["--size", &size.to_string()]);
            }
            push(&mut args, &["--perms", "1777", "--tmpfs", t]);
        }
    }
    for dir in private_dirs(input) {
        check_path("private directory", &dir.path)?;
        if overlay {
            args.push("--bind".into());
            args.push(dir.path.clone().into_os_string());
            args.push(dir.path.into_os_string());
        } else {
            if let Some(size) = input.tmpfs_size {
                push(&mut args, &["--size", &size.to_string()]);
            }
            push(&mut args, &["--perms", "0700", "--tmpfs"]);
            args.push(dir.path.into_os_string());
        }
    }
    for (p, fd, writable) in binds(policy) {
        args.push(if writable { "--bind-fd" } else { "--ro-bind-fd" }.into());
        args.push(fd.to_string().into());
        args.push(p.into_os_string());
    }
    for f in seeds(input).1 {
        let SeedBy::Fd { child_fd } = f.by else { continue };
        push(&mut args, &["--perms", "0600", "--file", &child_fd.to_string()]);
        args.push(f.path.into_os_string());
    }
    args.push("--chdir".into());
    args.push(input.cwd.as_os_str().to_owned());
    push(&mut args, &["--setenv", "TMPDIR", sandbox_tmpdir(policy), "--"]);
    match &helper {
        Some(h) => {
            push(&mut args, &[STAGE_HELPER_EXEC, STAGE_HELPER_ARG]);
            push(&mut args, &["--abi", &h.landlock.abi.to_string()]);
            push(&mut args, &["--restrict-flags", &h.landlock.restrict_flags.to_string()]);
            for p in &h.landlock.write_in_child {
                args.push("--write-in-child".into());
                args.push(p.as_os_str().to_owned());
            }
            for p in &h.landlock.write_in_child_tmpfs {
                args.push("--write-in-tmpfs".into());
                args.push(p.as_os_str().to_owned());
            }
            if h.supervised {
                args.push("--notify".into());
            }
            if h.supervised && h.unix_diag {
                args.push("--unix-diag".into());
            }
            args.push("--".into());
            args.push(input.program.as_os_str().to_owned());
            args.extend(input.argv.iter().cloned());
        }
        None => {
            args.push(input.program.as_os_str().to_owned());
            args.extend(input.argv.iter().skip(1).cloned());
        }
    }
    Ok(args)
}
