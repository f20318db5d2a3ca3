//! The `bwrap` runner (Linux fallback): bubblewrap, then cordon's stage helper inside it.
//!
//! cordon's child stage executes `bwrap` (found in a system directory by the host facts,
//! never on `PATH`: see `crate::host::BWRAP_CANDIDATES`) as the
//! program; bubblewrap builds the sandbox and then executes cordon's **stage helper**
//! (the `cordon` binary, [`STAGE_HELPER_ARG`]), which applies Landlock and cordon's
//! seccomp filter inside the finished sandbox and executes the command. Planning
//! ([`bwrap_args`], [`BwrapRunner::plan`]) is pure and golden-tested
//! (`tests/bwrap_golden.rs`); `docs/bwrap.md` explains every argument and each
//! restriction's verdict.
//!
//! # Layers
//!
//! - **cordon's stage** (before `bwrap` runs): parent-death signal, new session,
//!   only stdio plus the passed fds inherited (the seccomp program as fd 3, the
//!   command's environment as fd 7 and, with the helper, the Landlock ruleset, the
//!   helper's status pipe and the cordon executable as fds 4 to 6 and the
//!   supervisor's socket as fd 8), `no_new_privs`,
//!   an **empty environment** for `bwrap` (the request's variables, `LD_PRELOAD`
//!   among them, must not act on a process that is not confined yet), and a private
//!   mount namespace (with a user namespace when not root) whose propagation is private.
//!   The last point matters: bubblewrap marks its mounts as *slaves* of the host's,
//!   so on a host with shared mounts (every systemd host) a filesystem mounted on the
//!   host during the run would appear inside the sandbox, writable. Behind cordon's
//!   private namespace nothing propagates in. The stage neither drops capabilities
//!   (bubblewrap running as root needs them to build its namespaces) nor applies
//!   Landlock (it refuses mount operations to a restricted task) nor installs
//!   seccomp (the filter refuses the `mount`/`unshare` calls bubblewrap makes).
//! - **bubblewrap**: `--unshare-all` (user, ipc, pid, net, uts, cgroup namespaces;
//!   `--share-net` keeps the host's network namespace only when the policy allows the
//!   network, reaches hosts by name through cordon's proxy, or the host cannot make a
//!   network namespace, where the `network_off` filter keeps the network off), the whole tree
//!   read-only (`--ro-bind / /`, every bind `nodev`), a minimal `/dev`, a fresh
//!   read-only `/proc`, private tmpfs on `/tmp`, `/dev/shm` and the home's cache
//!   directory, the private global git config (`--file`), the workspace and writable roots
//!   bound writable on top (shallow first) from cordon's stage's view, with the
//!   protected paths (read-only) and the directories on the way to them beneath,
//!   `--cap-drop ALL`, `--die-with-parent`, `--new-session`; then it executes
//!   `/proc/self/fd/6` (the cordon executable, so it need not be visible inside).
//! - **the stage helper** (`cordon_stage::helper`): the landlock runner's Landlock
//!   rules (`landlock::landlock_plan`; the parent builds the ruleset, the
//!   helper adds the rules for its private `/tmp` and `/dev/shm`), so a FIFO outside
//!   the writable roots cannot be opened for writing — a read-only bind does not stop
//!   that; capabilities verified empty; cordon's seccomp filter last, its listener
//!   handed to cordon's supervisor (refused network and process syscalls become
//!   denials with evidence); a success record on its status pipe; `execve`. A failed step, or no success record, makes
//!   the run `runner_failed`; the command never runs unconfined.
//!
//! Without a helper ([`crate::ExecutorConfig::stage_helper`] unset, nothing
//! registered) or below Landlock ABI [`STAGE_MIN_LANDLOCK_ABI`], bubblewrap installs
//! the filter itself (`--seccomp 3`), executes the command directly, and the runner
//! declares an `fs-write` gap, so hard mode refuses it.
//!
//! # What it does not do
//!
//! - `denial-audit` is not promised (see `Restriction::DenialAudit`): most refusals come
//!   from read-only binds and seccomp, which leave no kernel audit record.
//! - Without the helper, setup happens after `bwrap` was executed: a bubblewrap failure
//!   (no namespaces, a bind source that vanished) is reported by bubblewrap on the
//!   command's stderr as `bwrap: ...` with exit status 1, after the executor considers
//!   the command started. See `docs/bwrap.md` for how the executor can tell the two
//!   apart. (With the helper, its missing success record says so.)
//! - bubblewrap reports a command killed by signal N as exit status 128+N.
//! - Without the helper the command's `argv[0]` is its absolute path (bubblewrap 0.8
//!   has no `--argv0`); the helper passes the caller's `argv[0]`.
//! - It does not hide files from reading, nor limit CPU, memory or disk use.

use super::error::PlanError;
use super::landlock::{
    hidden_dirs, hide_steps, landlock_plan, own_network, private_dir_steps, private_dirs, private_tmp_steps,
    sandbox_tmpdir, PrivateTmp,
};
use super::plan::{
    enforcement_from_gaps, EnvFd, EnvFdFormat, LaunchPlan, MountStep, NamespacePlan, PlanInput, Runner,
    SeccompDelivery, SeccompPlan, SeedBy, SeedFile, StageHelperPlan,
};
use crate::host::{HostFacts, Namespaces};
use crate::mode::Mode;
use crate::policy::ExecutionPolicy;
use crate::result::Enforcement;
use crate::vocab::{ProbeStatus, Restriction, RunnerKind};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

mod args;
use args::check_path;
pub use args::{binds, bwrap_args, BIND_FD_BASE};

/// The fd number of the seccomp program in the child (the first fd after stdio).
pub const SECCOMP_CHILD_FD: i32 = 3;

/// The fd number of the command's environment in the child (`cordon_stage::helper::ENV_FD`;
/// without the helper, bubblewrap's `--args` fd).
pub const ENV_CHILD_FD: i32 = 7;

/// Private tmpfs mounts, in the order they are mounted (mode 1777, like the host's).
pub const PRIVATE_TMPFS: [&str; 2] = ["/tmp", "/dev/shm"];

/// What to tell someone whose host has no bubblewrap.
pub const INSTALL_HINT: &str = "install bubblewrap (apt-get install bubblewrap)";

/// The `bwrap` runner.
#[derive(Debug, Clone, Copy, Default)]
pub struct BwrapRunner;

/// The hidden first argument that makes the `cordon` binary act as the stage helper.
pub const STAGE_HELPER_ARG: &str = "__stage";

/// How bubblewrap executes the helper: the cordon executable inherited at
/// `cordon_stage::helper::EXE_FD`, through the sandbox's own fresh `/proc`.
pub const STAGE_HELPER_EXEC: &str = "/proc/self/fd/6";

/// The lowest Landlock ABI the helper applies: ABI 1 refuses every cross-directory
/// rename and link once filesystem rights are handled (see the landlock runner).
pub const STAGE_MIN_LANDLOCK_ABI: u32 = 2;

// The registry lives with the host facts (which read it); re-exported here, next to
// the helper it names.
pub use crate::host::{register_stage_helper, registered_stage_helper};

/// Why the helper cannot apply Landlock inside bubblewrap on `host`, if it cannot.
fn stage_unavailable(host: &HostFacts) -> Option<String> {
    if host.stage_helper.is_none() {
        return Some("no cordon stage helper is configured to apply Landlock inside bubblewrap".into());
    }
    let abi = host.landlock_abi;
    match abi {
        0 => Some("this host has no usable Landlock to apply inside bubblewrap".into()),
        a if a < STAGE_MIN_LANDLOCK_ABI => Some(format!(
            "Landlock ABI {a} < {STAGE_MIN_LANDLOCK_ABI} is left out (it refuses every cross-directory rename)"
        )),
        _ => None,
    }
}

/// The stage helper's plan for `input`, when it can run on its host (pure).
fn stage_helper_plan(input: &PlanInput<'_>) -> Option<StageHelperPlan> {
    let host = input.host;
    if stage_unavailable(host).is_some() {
        return None;
    }
    let exe = host.stage_helper.clone()?;
    let own_net = own_net(input);
    Some(StageHelperPlan {
        exe,
        landlock: landlock_plan(
            input.policy,
            host.landlock_abi,
            PrivateTmp::InChild,
            private_dirs(input).into_iter().map(|d| d.path).collect(),
            own_net,
        ),
        supervised: true,
        checks: input
            .policy
            .self_binds()
            .into_iter()
            .map(|(p, a)| (p, a == crate::policy::BindAccess::ReadOnly))
            .collect(),
        unix_diag: own_net,
    })
}

/// Whether the run has a network namespace of bubblewrap's making with its loopback
/// up (local IPC, judged by the helper's supervisor): the network off, no proxy, and a
/// host that can make one (pure). Otherwise `--share-net` keeps the host's, where the
/// policy's filter (`network_off`, `proxy_only`) or the open network applies.
fn own_net(input: &PlanInput<'_>) -> bool {
    own_network(input.policy) && input.host.net_namespace.available()
}

/// The fd number bubblewrap's `--file` reads the seeded files from: the first after
/// the bind sources (pure).
fn seed_fd(policy: &ExecutionPolicy) -> i32 {
    BIND_FD_BASE + i32::try_from(binds(policy).len()).unwrap_or(i32::MAX - BIND_FD_BASE)
}

/// The run's seeded files and the variables naming them (pure): see
/// [`PlanInput::git_config_in`].
fn seeds(input: &PlanInput<'_>) -> (Vec<(String, String)>, Vec<SeedFile>) {
    let tmpdir = Path::new(sandbox_tmpdir(input.policy));
    input.git_config_in(tmpdir, SeedBy::Fd { child_fd: seed_fd(input.policy) })
}

/// The gaps of the bwrap runner for `policy` on `host` (pure; assumes
/// [`BwrapRunner::probe`] passed, i.e. namespaces and seccomp are available and
/// bubblewrap is installed).
///
/// - `fs-write` without the stage helper (none configured, or Landlock below ABI
///   [`STAGE_MIN_LANDLOCK_ABI`], which `CORDON_LANDLOCK_ABI_MAX` emulates): a
///   read-only bind stops writes to regular files but not opening an existing FIFO
///   for writing, so bytes reach a host reader (as root, `/run/initctl`).
/// - `private-tmp` when an extra writable root is `/tmp`, `/dev/shm` or one of their
///   ancestors, since binding it exposes the host's directory over the private tmpfs
///   (a workspace there is what the caller asked for, and `TMPDIR` moves to the other
///   tmpfs: see `landlock::shared_private_tmpfs`).
///
/// (`denial-audit` is the landlock runner's own promise and not requested here.)
pub fn bwrap_gaps(policy: &ExecutionPolicy, host: &HostFacts) -> Vec<(Restriction, String)> {
    let mut gaps = Vec::new();
    for r in Restriction::requested_by(policy) {
        let gap = match r {
            Restriction::FsWrite => stage_unavailable(host).map(|why| {
                format!(
                    "FIFOs outside the writable roots stay writable (read-only binds do not cover special files) \
                     because {why}"
                )
            }),
            Restriction::PrivateTmp => super::landlock::shared_private_tmpfs(policy).map(|p| {
                format!(
                    "{} is bound into the sandbox over the private tmpfs, so the host's directory is shared",
                    p.display()
                )
            }),
            _ => None,
        };
        if let Some(reason) = gap {
            gaps.push((r, reason));
        }
    }
    gaps
}

/// The paths bound on top of the read-only root, shallow first, with whether each is
/// writable: the workspace (writable in `workspace-write`; bound read-only in
/// `read-only` so that a workspace under `/tmp` stays visible) and the writable roots.
pub fn exposed(policy: &ExecutionPolicy) -> Vec<(PathBuf, bool)> {
    let writes = policy.mode >= Mode::WorkspaceWrite;
    let mut out: Vec<(PathBuf, bool)> = std::iter::once((policy.workspace.clone(), writes))
        .chain(policy.writable_roots.iter().map(|r| (r.clone(), true)))
        .collect();
    out.sort_by_key(|(p, _)| p.components().count());
    out
}

/// What cordon's stage mounts before it executes bubblewrap (pure), in its private
/// mount namespace: private propagation; identity-checked clones of every exposed path
/// attached over themselves (shallow first), with the private layers over `/tmp`,
/// `/dev/shm` and the home's directories where overlayfs works; then the whole tree
/// read-only except `/proc` (bubblewrap writes its user namespace's id maps there),
/// the private layers and the writable roots (nodev, nosuid); then the protected layout (protected paths read-only, paths
/// a grant reopened writable, directories on the way to them made mount points:
/// [`ExecutionPolicy::self_binds`]). The materializer then reopens each bind source
/// in this view, so bubblewrap's `--bind-fd` carries these mounts beneath it (it keeps
/// a read-only submount read-only).
///
/// bubblewrap resolves its bind destinations itself, following symlinks, and creates
/// the missing ones (a directory, or an empty file for a file bind) through its view
/// of the old root. A concurrent run that swaps a workspace directory for a symlink
/// to `/oldroot/...` between cordon's check and bubblewrap's setup could otherwise
/// make bubblewrap create entries anywhere on the host. With the tree read-only
/// here, such a creation fails (`EROFS`) and bubblewrap gives up before the command
/// runs; inside the writable roots it can only create what the command could.
pub fn stage_mounts(input: &PlanInput<'_>) -> Vec<MountStep> {
    let policy = input.policy;
    let exposed = exposed(policy);
    let (clones, attach) = super::plan::clone_and_attach(exposed.iter().map(|(p, _)| p));
    let overlay = input.host.overlay.available();
    let mut steps = vec![MountStep::MakeRootPrivate];
    steps.extend(clones);
    // bubblewrap runs in the stage's pid namespace and reads `/proc/<its child>/ns`
    // there: the stage's `/proc` must be that namespace's (the host's names other
    // processes by the same numbers, or none: a container's often has no pid 3). The
    // probe makes this runner unavailable where no fresh procfs can be mounted.
    steps.push(MountStep::Proc { required: true });
    // The private layers bubblewrap binds (`--bind`), as the landlock runner makes
    // them: `/tmp` and `/dev/shm` before the exposed paths are attached (one may live
    // there, and the stage's own `chdir` checks it), the home's directories after;
    // all writable again once the tree went read-only (bubblewrap, in a user
    // namespace of its own, could not make a read-only mount of this namespace
    // writable again).
    if overlay {
        let paths: Vec<PathBuf> = exposed.iter().map(|(p, _)| p.clone()).collect();
        steps.extend(private_tmp_steps(input, &paths));
    }
    steps.extend(attach);
    let (layers, layers_after) =
        if overlay { private_dir_steps(input, &private_dirs(input)) } else { (Vec::new(), Vec::new()) };
    steps.extend(layers);
    // cordon's state directory, hidden as the landlock runner hides it.
    steps.extend(hide_steps(input));
    steps.push(MountStep::ReadOnlyRecursive);
    steps.push(MountStep::Writable { target: PathBuf::from("/proc") });
    if overlay {
        steps.extend(layers_after);
        for t in PRIVATE_TMPFS {
            steps.push(MountStep::Writable { target: PathBuf::from(t) });
        }
    }
    for (p, _) in &exposed {
        steps.push(MountStep::NoDevNoSuid { target: p.clone() });
    }
    for (p, writable) in &exposed {
        if *writable {
            steps.push(MountStep::Writable { target: p.clone() });
        }
    }
    steps.extend(super::plan::self_bind_steps(policy));
    steps
}

impl Runner for BwrapRunner {
    fn kind(&self) -> RunnerKind {
        RunnerKind::Bwrap
    }

    fn probe(&self, host: &HostFacts) -> ProbeStatus {
        if host.os != "linux" {
            return ProbeStatus::Unsupported(format!("bubblewrap is Linux-only (this is {})", host.os));
        }
        if host.bwrap.is_none() {
            return ProbeStatus::Unavailable(format!("bubblewrap (`bwrap`) is not installed in a trusted system directory (/usr/bin, /usr/local/bin, /bin: owned by root, not writable by others); {INSTALL_HINT}"));
        }
        if !host.seccomp {
            return ProbeStatus::Unavailable(
                "seccomp filters are not available in this kernel, so bubblewrap cannot install cordon's filter".into(),
            );
        }
        if let Namespaces::Unavailable { reason } = &host.namespaces {
            return ProbeStatus::Unavailable(format!(
                "bubblewrap needs namespaces and this host cannot create them: {reason} (a setuid bwrap does not \
                 help: cordon sets no_new_privs before it executes bwrap, which disables the setuid bit)"
            ));
        }
        if let crate::host::ProcMount::Refused { reason } = &host.proc_mount {
            return ProbeStatus::Unavailable(format!(
                "bubblewrap mounts a fresh /proc for its pid namespace: {reason}"
            ));
        }
        ProbeStatus::Available
    }

    fn enforcement(&self, policy: &ExecutionPolicy, host: &HostFacts) -> Enforcement {
        enforcement_from_gaps(bwrap_gaps(policy, host))
    }

    fn plan_with(&self, input: &PlanInput<'_>, enforcement: Enforcement) -> Result<LaunchPlan, PlanError> {
        let Some(bwrap) = input.host.bwrap.clone() else {
            return Err(PlanError::Unavailable(format!("bubblewrap (`bwrap`) is not installed in a trusted system directory (/usr/bin, /usr/local/bin, /bin: owned by root, not writable by others); {INSTALL_HINT}")));
        };
        check_path("bwrap", &bwrap)?;
        let mut argv = vec![bwrap.as_os_str().to_owned()];
        argv.extend(bwrap_args(input)?);
        let policy = input.policy;
        let stage_helper = stage_helper_plan(input);
        let local_ipc =
            super::landlock::local_ipc(policy, input.host, stage_helper.as_ref().is_some_and(|h| h.supervised));
        let (git_env, seed_files) = seeds(input);
        let mut env = vec![("TMPDIR".into(), sandbox_tmpdir(policy).into())];
        env.extend(git_env);
        Ok(LaunchPlan {
            runner: RunnerKind::Bwrap,
            program: bwrap,
            argv,
            env,
            cwd: input.cwd.clone(),
            // Cut mount propagation from the host before bubblewrap runs (see the
            // module docs); a user namespace provides the right to do so when not root.
            // A pid namespace with cordon's init as its pid 1: bubblewrap's monitor
            // exits as soon as the command does, while its own init may still be
            // tearing the sandbox down (and, killed by its parent-death signal, would
            // be left as a zombie for the host's init). cordon's init exits with the
            // monitor, and the kernel then ends everything below it before cordon
            // reaps the init: nothing of the run outlives the result.
            namespaces: NamespacePlan {
                user: matches!(input.host.namespaces, Namespaces::UserNamespace),
                mount: true,
                pid: true,
                ipc: false,
                // bubblewrap makes the run's own (`--unshare-all`) and brings its
                // loopback up.
                net: false,
            },
            mounts: stage_mounts(input),
            landlock: None,
            seccomp: Some(SeccompPlan {
                network: policy.network,
                unix_allowlist: !policy.allow_unix_sockets.is_empty(),
                proxy: policy.network_by_proxy(),
                // bubblewrap's own network namespace (`--unshare-all` without
                // `--share-net`), its loopback up; judged by the helper's supervisor.
                loopback: own_net(input),
                delivery: SeccompDelivery::Fd { child_fd: SECCOMP_CHILD_FD },
                // The stage helper hands its listener over; bubblewrap itself does not.
                supervise: stage_helper.as_ref().is_some_and(|h| h.supervised),
            }),
            path_fds: binds(policy),
            env_fd: Some(EnvFd {
                child_fd: ENV_CHILD_FD,
                format: if stage_helper.is_some() { EnvFdFormat::Entries } else { EnvFdFormat::BwrapSetenv },
            }),
            stage_helper,
            drop_capabilities: false,
            no_new_privs: true,
            new_session: input.new_session,
            needs_run_dir: false,
            seed_files,
            hidden: hidden_dirs(input),
            local_ipc,
            enforcement,
        })
    }
}

/// Why the helper's arguments were refused (they come from cordon's own plan, so
/// this only happens when the binary is run by hand).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HelperArgsError {
    /// An option the helper does not know, or one without its value.
    #[error("stage helper: bad or incomplete option `{option}`")]
    Option {
        /// The option.
        option: String,
    },
    /// No command after `--`.
    #[error("stage helper: no command after `--`")]
    NoCommand,
    /// A NUL byte in an argument.
    #[error("stage helper: an argument contains a NUL byte")]
    Nul,
}

/// Parse the helper's arguments (everything after [`STAGE_HELPER_ARG`]) into its plan
/// (pure): `--abi N --restrict-flags F [--write-in-child PATH]... [--write-in-tmpfs
/// PATH]... [--notify [--unix-diag]] -- PROGRAM ARGV...`.
pub fn parse_helper_args(args: &[OsString]) -> Result<cordon_stage::helper::HelperPlan, HelperArgsError> {
    use std::ffi::CString;
    let cstr = |s: &std::ffi::OsStr| CString::new(s.as_bytes()).map_err(|_| HelperArgsError::Nul);
    let bad = |o: &OsString| HelperArgsError::Option { option: o.to_string_lossy().into_owned() };
    let (mut abi, mut flags, mut late, mut late_tmpfs, mut notify) = (None, None, Vec::new(), Vec::new(), false);
    let mut unix_diag = false;
    let mut it = args.iter();
    loop {
        let Some(opt) = it.next() else { return Err(HelperArgsError::NoCommand) };
        let mut value = || it.next().ok_or_else(|| bad(opt));
        match opt.to_str() {
            Some("--") => break,
            Some("--abi") => abi = Some(value()?.to_str().and_then(|v| v.parse::<u32>().ok()).ok_or_else(|| bad(opt))?),
            Some("--restrict-flags") => {
                flags = Some(value()?.to_str().and_then(|v| v.parse::<u32>().ok()).ok_or_else(|| bad(opt))?)
            }
            Some("--write-in-child") => late.push(value()?.clone()),
            Some("--write-in-tmpfs") => late_tmpfs.push(value()?.clone()),
            Some("--notify") => notify = true,
            Some("--unix-diag") => unix_diag = true,
            _ => return Err(bad(opt)),
        }
    }
    let (Some(abi), Some(restrict_flags)) = (abi, flags) else {
        return Err(HelperArgsError::Option { option: "--abi/--restrict-flags".into() });
    };
    let rest: Vec<&OsString> = it.collect();
    let (Some(program), Some(_)) = (rest.first(), rest.get(1)) else { return Err(HelperArgsError::NoCommand) };
    let bits = super::stage::write_access(abi).bits();
    Ok(cordon_stage::helper::HelperPlan {
        restrict_flags,
        late_landlock_rules: late.iter().map(|p| Ok((cstr(p)?, bits))).collect::<Result<_, _>>()?,
        late_landlock_tmpfs_rules: late_tmpfs.iter().map(|p| Ok((cstr(p)?, bits))).collect::<Result<_, _>>()?,
        program: cstr(program)?,
        argv: rest[1..].iter().map(|a| cstr(a)).collect::<Result<_, _>>()?,
        notify,
        unix_diag,
    })
}

/// The stage helper's entry point: the `cordon` binary calls it when its first
/// argument is [`STAGE_HELPER_ARG`]. Applies Landlock, the capability check and
/// cordon's seccomp filter inside the finished sandbox, then executes the command
/// (see `cordon_stage::helper`). Never returns; on any failure it reports on the
/// status pipe and exits with `cordon_stage::STAGE_SETUP_FAILED_EXIT`.
pub fn stage_helper_main(args: Vec<OsString>) -> ! {
    match parse_helper_args(&args) {
        Ok(plan) => cordon_stage::helper::run(plan),
        Err(e) => {
            eprintln!("cordon: {e}");
            cordon_stage::helper::refuse_arguments()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_arguments_round_trip_from_the_plan() {
        let host = HostFacts {
            os: "linux",
            kernel_landlock_abi: 7,
            landlock_abi: 7,
            landlock_abi_cap: None,
            seccomp: true,
            euid: 1000,
            egid: 1000,
            namespaces: Namespaces::UserNamespace,
            overlay: crate::host::Overlay::Available,
            net_namespace: crate::host::NetNamespace::Available,
            bwrap: Some("/usr/bin/bwrap".into()),
            proc_mount: Default::default(),
            disabled_runners: vec![],
            stage_helper: Some("/opt/cordon".into()),
        };
        let policy = ExecutionPolicy {
            mode: Mode::WorkspaceWrite,
            workspace: "/home/u/p".into(),
            writable_roots: vec![],
            protected: vec![],
            network: false,
            best_effort: false,
            accept_gaps: Vec::new(),
            allow_unix_sockets: Vec::new(),
            allow_hosts: Default::default(),
            git: Default::default(),
        };
        let input = PlanInput {
            policy: &policy,
            host: &host,
            program: "/bin/echo".into(),
            argv: vec!["echo".into(), "--".into(), "-x".into()],
            cwd: "/home/u/p".into(),
            run_dir: "/tmp/r".into(),
            new_session: true,
            tmpfs_size: None,
            private_dirs: Vec::new(),
            git_config: None,
            held: None,
            state_dir: None,
        };
        let args = bwrap_args(&input).unwrap();
        let at = args.iter().position(|a| a == STAGE_HELPER_ARG).unwrap();
        assert_eq!(args[at - 1], STAGE_HELPER_EXEC);
        let plan = parse_helper_args(&args[at + 1..]).unwrap();
        assert_eq!(plan.program.as_bytes(), b"/bin/echo");
        let argv: Vec<&[u8]> = plan.argv.iter().map(|a| a.as_bytes()).collect();
        assert_eq!(argv, [&b"echo"[..], b"--", b"-x"], "the caller's argv[0] and a later `--` survive");
        assert_eq!(plan.restrict_flags, super::super::landlock::LANDLOCK_LOG_NEW_EXEC_ON);
        let late: Vec<&[u8]> = plan.late_landlock_rules.iter().map(|(p, _)| p.as_bytes()).collect();
        assert_eq!(late, [&b"/tmp"[..], b"/dev/shm"]);
        assert!(plan.notify);
        // Refused: unknown options, a missing command, a missing value.
        for bad in [&["--bogus", "--", "/bin/x", "x"][..], &["--abi", "7", "--restrict-flags", "0", "--"], &["--abi"]] {
            let bad: Vec<OsString> = bad.iter().map(OsString::from).collect();
            assert!(parse_helper_args(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn probe_names_the_missing_piece() {
        let mut host = HostFacts {
            os: "linux",
            kernel_landlock_abi: 0,
            landlock_abi: 0,
            landlock_abi_cap: None,
            seccomp: true,
            euid: 1000,
            egid: 1000,
            namespaces: Namespaces::UserNamespace,
            overlay: crate::host::Overlay::Available,
            net_namespace: crate::host::NetNamespace::Available,
            bwrap: Some("/usr/bin/bwrap".into()),
            proc_mount: Default::default(),
            disabled_runners: vec![],
            stage_helper: None,
        };
        assert_eq!(BwrapRunner.probe(&host), ProbeStatus::Available);
        host.namespaces = Namespaces::Unavailable { reason: "blocked".into() };
        assert!(matches!(BwrapRunner.probe(&host), ProbeStatus::Unavailable(r) if r.contains("blocked")));
        host.namespaces = Namespaces::Direct;
        host.seccomp = false;
        assert!(matches!(BwrapRunner.probe(&host), ProbeStatus::Unavailable(r) if r.contains("seccomp")));
        host.seccomp = true;
        host.bwrap = None;
        assert!(
            matches!(BwrapRunner.probe(&host), ProbeStatus::Unavailable(r) if r.contains("apt-get install bubblewrap"))
        );
        host.os = "macos";
        assert!(matches!(BwrapRunner.probe(&host), ProbeStatus::Unsupported(_)));
    }
}
