//! Launching one run: streams, the runner's plan, the spawn, the supervisor and the
//! collectors (`Executor::launch`). Two spawn paths: the stage (`start_staged`, Linux:
//! the plan materialized and spawned by `cordon_stage`, with the seccomp supervisor)
//! and the direct spawn (`super::direct`: the `seatbelt` runner, and every runner off
//! Linux).

use super::finish::ExitWatch;
use super::relay::{Relay, Stream};
#[cfg(target_os = "linux")]
use super::supervision::{start_proxy, write_rules};
use super::*;
use std::os::unix::fs::OpenOptionsExt;

/// Where a run's denials are recorded (the seccomp supervisor's sink on Linux).
#[cfg(target_os = "linux")]
pub(super) type DenialSink = crate::denials::DenialSink;
/// Where a run's denials are recorded (nothing records them off Linux yet).
#[cfg(not(target_os = "linux"))]
pub(super) type DenialSink = Arc<Mutex<Vec<Denial>>>;

/// What the run's supervisor could not judge (see `SandboxFacts::unobserved`).
pub(super) fn take_unobserved(sink: &DenialSink) -> Option<crate::result::Unobserved> {
    #[cfg(target_os = "linux")]
    return sink.lock().unwrap_or_else(|p| p.into_inner()).unobserved();
    #[cfg(not(target_os = "linux"))]
    return {
        let _ = sink;
        None
    };
}

/// The run's denials, in the order recorded (bounded on Linux).
pub(super) fn take_denials(sink: &DenialSink) -> Vec<Denial> {
    let mut recorded = sink.lock().unwrap_or_else(|p| p.into_inner());
    #[cfg(target_os = "linux")]
    return std::mem::take(&mut *recorded).into_vec();
    #[cfg(not(target_os = "linux"))]
    return std::mem::take(&mut *recorded);
}

pub(super) async fn drain(fd: OwnedFd, capture: StreamCapture) {
    let Ok(mut rx) = tokio::net::unix::pipe::Receiver::from_owned_fd(fd) else { return };
    // `read_buf` fills spare capacity without zeroing it first.
    let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    loop {
        buf.clear();
        match rx.read_buf(&mut buf).await {
            Ok(0) => break,
            Ok(_) => capture.push(&buf),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
}

/// What a confined command may be handed of the caller's stdio descriptor `fd`.
///
/// An anonymous pipe or a socket as it is. Anything else is an inode on one of the
/// host's own mounts, not on the sandbox's read-only view: holding it, the command
/// could `fchmod` it (or `chmod` it through `/proc/self/fd/N`) when it owns it, i.e.
/// as root for every root-owned file (a setuid binary of its making, a host
/// `/dev/null` no one else may open); change its times or extended attributes; and
/// with Landlock below ABI 2 or 3 write, truncate it or create entries under a
/// directory outside its writable roots (found by attack reviews). So a regular file,
/// a directory or a named FIFO is relayed through a pipe; a character device the
/// command would own (cordon as root) is replaced: `/dev/null` by [`root_null`], any
/// other (a terminal) by the same device through a private read-only mount; where
/// neither can be had it is relayed, except an unprivileged user's own terminal,
/// which an interactive command needs as it is (its owner may change its mode:
/// docs/guarantees.md). A device the command does not own it cannot chmod.
#[allow(
    clippy::cast_possible_wrap,
    clippy::unnecessary_cast,
    reason = "f_type and st_uid widths differ between platforms"
)]
fn handover(fd: &OwnedFd, state_dir: &Path) -> Handover {
    use nix::sys::stat::SFlag;
    #[cfg(not(target_os = "linux"))]
    let _ = state_dir;
    /// `PIPEFS_MAGIC` from `<linux/magic.h>`.
    #[cfg(target_os = "linux")]
    const PIPEFS_MAGIC: i64 = 0x5049_5045;
    let Ok(st) = nix::sys::stat::fstat(fd) else { return Handover::Relay };
    let Ok(flags) = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL) else { return Handover::Relay };
    #[cfg(not(target_os = "linux"))]
    let _ = flags;
    // A path, not an open stream (of a socket file, say): nothing to read or write.
    #[cfg(target_os = "linux")]
    if flags & libc::O_PATH != 0 {
        return Handover::Relay;
    }
    let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    if kind == SFlag::S_IFSOCK {
        return Handover::Keep;
    }
    if kind == SFlag::S_IFIFO {
        // An anonymous pipe lives on pipefs, a named FIFO on a host file system.
        #[cfg(target_os = "linux")]
        let anonymous = nix::sys::statfs::fstatfs(fd).is_ok_and(|f| f.filesystem_type().0 as i64 == PIPEFS_MAGIC);
        // (macOS: not told apart; a named FIFO is rare and a relay of every pipe costly.)
        #[cfg(not(target_os = "linux"))]
        let anonymous = true;
        return if anonymous { Handover::Keep } else { Handover::Relay };
    }
    if kind != SFlag::S_IFCHR {
        return Handover::Relay;
    }
    if st.st_uid as u32 != nix::unistd::geteuid().as_raw() {
        return Handover::Keep;
    }
    #[cfg(target_os = "linux")]
    {
        // `/dev/null` (the usual `> /dev/null`) as the default stdin is: one open,
        // where a reopen costs ~0.15 ms (it makes a mount).
        let replaced = if st.st_rdev == libc::makedev(1, 3) { root_null(state_dir) } else { None };
        if let Some(fd) = replaced.or_else(|| cordon_stage::fds::reopen_read_only_mount(fd.as_raw_fd(), flags).ok()) {
            return Handover::Reopened(fd);
        }
    }
    // A terminal the command would own and no read-only mount for it: as root every
    // shared terminal node (`/dev/tty` without a controlling terminal, a pty master)
    // is root's, so it is relayed too, at the cost of the command's terminal; an
    // unprivileged user's own terminal is handed over (docs/guarantees.md).
    if nix::unistd::isatty(fd).unwrap_or(false) && !nix::unistd::geteuid().is_root() {
        Handover::Keep
    } else {
        Handover::Relay
    }
}

/// See [`handover`].
enum Handover {
    Keep,
    Relay,
    /// The same device, through a private read-only mount (Linux).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Reopened(OwnedFd),
}

/// The command's stdout and stderr for a confined live run ([`handover`]): each to
/// be relayed replaced by a pipe whose contents cordon copies to it (recorded in
/// `relays` as `(pipe's read end, destination, stream)`). Both the same file
/// (`> f 2>&1`): one pipe for both, so that their order is kept.
fn relay_files(
    out: [OwnedFd; 2],
    state_dir: &Path,
    relays: &mut Vec<(OwnedFd, OwnedFd, Stream)>,
) -> Result<[OwnedFd; 2], CordonError> {
    let same_file = |a: &OwnedFd, b: &OwnedFd| match (nix::sys::stat::fstat(a), nix::sys::stat::fstat(b)) {
        (Ok(x), Ok(y)) => x.st_dev == y.st_dev && x.st_ino == y.st_ino,
        _ => false,
    };
    let [o, e] = out;
    let (ho, he) = (handover(&o, state_dir), handover(&e, state_dir));
    if matches!((&ho, &he), (Handover::Relay, Handover::Relay)) && same_file(&o, &e) {
        let (r, w) = pipe()?;
        let w = above_stdio(w)?;
        let w2 = dup_cloexec(w.as_fd()).map_err(|e| CordonError::io("duplicating a pipe", e))?;
        relays.push((r, o, Stream::Stdout));
        drop(e);
        return Ok([w, w2]);
    }
    let mut one = |fd: OwnedFd, h: Handover, stream: Stream| -> Result<OwnedFd, CordonError> {
        match h {
            Handover::Keep => Ok(fd),
            Handover::Reopened(ro) => above_stdio(ro),
            Handover::Relay => {
                let (r, w) = pipe()?;
                relays.push((r, fd, stream));
                above_stdio(w)
            }
        }
    };
    Ok([one(o, ho, Stream::Stdout)?, one(e, he, Stream::Stderr)?])
}

/// The command's stdin when the caller gives none: `/dev/null`, which a command
/// running as root could `fchmod` through the host's mount of it ([`handover`]). So a
/// confined run as root gets [`root_null`], or where that cannot be had an empty pipe
/// (also end-of-file at once; some tools, e.g. ripgrep, treat a pipe as input to read
/// instead of the directory).
fn null_stdin(confined: bool, state_dir: &Path) -> Result<OwnedFd, CordonError> {
    if !confined || !nix::unistd::geteuid().is_root() {
        let null = std::fs::File::open("/dev/null").map_err(|e| CordonError::io("opening /dev/null", e))?;
        return above_stdio(null.into());
    }
    match root_null(state_dir) {
        Some(fd) => above_stdio(fd),
        None => above_stdio(pipe()?.0),
    }
}

/// A null device a command running as root may hold without reaching the host's:
/// cordon's own node ([`private_null`]), else the host's `/dev/null` through this
/// process's read-only mount of it ([`read_only_null`]).
fn root_null(state_dir: &Path) -> Option<OwnedFd> {
    if let Some(fd) = private_null(state_dir) {
        return Some(fd);
    }
    #[cfg(target_os = "linux")]
    if let Some(fd) = read_only_null() {
        return dup_cloexec(fd.as_fd()).ok();
    }
    None
}

/// cordon's own null device (root only): a node `null` (character device 1:3) in
/// cordon's private state directory, made once with `mknod` and opened for reading
/// and writing. It behaves as `/dev/null` and is a character device (as tools such as
/// ripgrep expect of an empty stdin), and it is no one else's: a command that changes
/// its mode or times changes nothing the host uses. One `open`, where a read-only
/// reopen of the host's node makes a mount (~0.15 ms). `None` when it cannot be made
/// or opened (the state directory on a `nodev` file system) or is not that device.
#[cfg(not(target_os = "linux"))]
fn private_null(_state_dir: &Path) -> Option<OwnedFd> {
    None
}

/// The Linux implementation of the above (`mknod` of the null device's number).
#[cfg(target_os = "linux")]
fn private_null(state_dir: &Path) -> Option<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = state_dir.join("null");
    let open = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOCTTY)
            .open(&path)
    };
    let file = match open() {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let kind = nix::sys::stat::SFlag::S_IFCHR;
            let mode = nix::sys::stat::Mode::from_bits_truncate(0o666);
            let _ = nix::sys::stat::mknod(&path, kind, mode, nix::sys::stat::makedev(1, 3));
            open().ok()?
        }
        Err(_) => return None,
    };
    let st = nix::sys::stat::fstat(&file).ok()?;
    let is_char = nix::sys::stat::SFlag::from_bits_truncate(st.st_mode) & nix::sys::stat::SFlag::S_IFMT
        == nix::sys::stat::SFlag::S_IFCHR;
    (is_char && st.st_rdev == nix::sys::stat::makedev(1, 3)).then(|| file.into())
}

/// The host's `/dev/null`, open for reading and writing through a private read-only
/// mount ([`cordon_stage::fds::reopen_read_only_mount`]), made once per process and
/// shared by every run's stdio that is `/dev/null` (it has no state to share). `None`
/// where no such mount can be made (no `CAP_SYS_ADMIN`).
#[cfg(target_os = "linux")]
fn read_only_null() -> Option<&'static OwnedFd> {
    static READ_ONLY_NULL: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    READ_ONLY_NULL
        .get_or_init(|| {
            let null = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null").ok()?;
            cordon_stage::fds::reopen_read_only_mount(null.as_raw_fd(), libc::O_RDWR).ok()
        })
        .as_ref()
}

pub(super) fn pipe() -> Result<(OwnedFd, OwnedFd), CordonError> {
    #[cfg(target_os = "linux")]
    let pipe = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC);
    // macOS has no pipe2: close-on-exec is set right after (every spawn off Linux
    // goes through `direct`, whose spawn closes what is not close-on-exec too).
    #[cfg(not(target_os = "linux"))]
    let pipe = nix::unistd::pipe().and_then(|(r, w)| {
        for fd in [&r, &w] {
            nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC))?;
        }
        Ok((r, w))
    });
    pipe.map_err(|e| CordonError::io("creating a pipe", std::io::Error::from_raw_os_error(e as i32)))
}

/// Duplicate `fd`, close-on-exec, to a number above 2.
pub(super) fn dup_cloexec(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
    #[cfg(target_os = "linux")]
    return cordon_stage::fds::dup_cloexec(fd.as_raw_fd());
    // std duplicates with F_DUPFD_CLOEXEC from 3 upwards.
    #[cfg(not(target_os = "linux"))]
    return fd.try_clone_to_owned();
}

/// Duplicate `fd` to a number above 2 (the stage requires it), close-on-exec.
pub(super) fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, CordonError> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    dup_cloexec(fd.as_fd()).map_err(|e| CordonError::io("duplicating a descriptor", e))
}

/// Everything a started process needs to finish its run.
pub(super) struct Launched {
    /// cordon's egress proxy (`--allow-host` runs) and where it records refusals.
    #[cfg(target_os = "linux")]
    pub(super) proxy: Option<(crate::proxy::Proxy, crate::denials::DenialSink)>,
    pub(super) pid: i32,
    /// The bwrap stage helper's status pipe (see `cordon_stage::helper`).
    #[cfg(target_os = "linux")]
    pub(super) helper_status: Option<OwnedFd>,
    pub(super) exit_status: Option<OwnedFd>,
    #[cfg(target_os = "linux")]
    pub(super) supervisor: Option<crate::denials::Supervisor>,
    pub(super) denials: DenialSink,
    pub(super) policy: crate::policy::ExecutionPolicy,
    /// Host directories the command saw empty (see `LaunchPlan::hidden`).
    pub(super) hidden: Vec<PathBuf>,
    /// The locks of the kept layers this run writes (see `keep_layer`), released when
    /// the run is over.
    pub(super) layer_locks: Vec<std::fs::File>,
    #[cfg(target_os = "linux")]
    pub(super) workdir: PathBuf,
    pub(super) exit_watch: ExitWatch,
    pub(super) selection: Selection,
    pub(super) enforcement: crate::result::Enforcement,
    pub(super) stdout: StreamCapture,
    pub(super) stderr: StreamCapture,
    pub(super) collectors: Vec<tokio::task::JoinHandle<()>>,
    /// Copies of relayed stdout and stderr (see `super::relay`).
    pub(super) relays: Vec<Relay>,
    /// The copy of relayed stdin, stopped at the run's end.
    pub(super) stdin_relay: Option<Relay>,
    pub(super) stdin_writer: Option<tokio::task::JoinHandle<()>>,
    pub(super) run_dir: Option<PathBuf>,
    pub(super) limits: crate::limits::RunLimits,
    pub(super) guard: KillOnDrop,
}

impl Executor {
    pub(super) async fn launch(&self, spec: &Spec) -> Result<Launched, CordonError> {
        self.launch_with(spec, None).await
    }

    /// [`Executor::launch`], holding the run's writes back in `held`'s storage when the
    /// runner can (see `Executor::run_held_until`).
    pub(super) async fn launch_with(
        &self,
        spec: &Spec,
        held: Option<crate::runner::HeldInput>,
    ) -> Result<Launched, CordonError> {
        let selection = runner::select(&spec.policy, &self.host, spec.runner)?;
        let policy = self.keep_state_dir_read_only(&spec.policy, selection.runner)?;
        let policy = &policy;
        // Every checked path, opened once without following symlinks; the plan's
        // grants, mounts and chdir are tied to these files (see `crate::pin`).
        let mut pins = policy.pin(&spec.workdir)?;
        // Allowed host unix sockets, pinned now: the supervisor connects to these files.
        #[cfg(target_os = "linux")]
        let allowed_sockets = policy
            .allow_unix_sockets
            .iter()
            .map(|p| {
                crate::denials::AllowedSocket::pin(p)
                    .map_err(|source| crate::error::PolicyError::Changed { path: p.clone(), source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let program = resolve_program(&spec.argv[0], &spec.env, &spec.workdir)?;

        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let run_dir_path = self.state_dir.join(format!("run-{}-{id}-{:08x}", std::process::id(), random_u32()));

        let interactive = spec.stdin == Stdin::Inherit && std::io::IsTerminal::is_terminal(&std::io::stdin());
        // The home's directories a run gets a private layer over, pinned, for the
        // runners with a mount layer (see `runner::landlock::private_dirs`).
        let mount_layer = selection.runner == RunnerKind::Bwrap
            || (selection.runner == RunnerKind::Landlock && self.host.namespaces.available());
        let mut private_dirs: Vec<crate::runner::PrivateDir> = Vec::new();
        let mut missing_homes = Vec::new();
        // Each kept layer's lock, held for the run (see `keep_layer`).
        let mut layer_locks: Vec<std::fs::File> = Vec::new();
        if policy.mode.is_confined() {
            let overlay = mount_layer && self.host.overlay.available();
            // Without overlayfs the cache's layer is an empty tmpfs: a variable that
            // names a place in it (`PLAYWRIGHT_BROWSERS_PATH`, a `PATH` entry of a tool
            // installed there) keeps the host's cache visible, read-only, instead.
            if mount_layer && (overlay || !crate::env::names_home_cache(&spec.env)) {
                if let Some(path) = pin_home_cache(&mut pins, &spec.env, self.host.euid) {
                    private_dirs.push(crate::runner::PrivateDir {
                        path,
                        keep: crate::runner::Keep::Discard,
                        home_cache: true,
                    });
                }
            }
            // The toolchain homes: a private layer over each that exists; one that does
            // not is made in the run's private base instead (`env::private_cache_env`).
            for (_, home) in crate::env::toolchain_homes(&spec.env) {
                match overlay.then(|| pin_private_dir(&mut pins, &home)).flatten() {
                    Some(path) => private_dirs.push(crate::runner::PrivateDir {
                        path,
                        keep: crate::runner::Keep::Discard,
                        home_cache: false,
                    }),
                    None if std::fs::symlink_metadata(&home).is_err() => missing_homes.push(home),
                    None => {}
                }
            }
            // With a cache directory, what the run adds to each layer is kept there.
            if let Some(dir) = spec.cache_dir.as_ref().filter(|_| overlay) {
                for d in &mut private_dirs {
                    d.keep = keep_layer(dir, &d.path, &mut pins, &mut layer_locks);
                }
            }
        }
        // The run's private global git config (see `crate::gitconfig`).
        let git_config = (policy.mode.is_confined() && crate::gitconfig::wanted(&spec.env, &policy.writable()))
            .then(|| crate::gitconfig::seed(&crate::gitconfig::sources(&spec.env)));
        let input = PlanInput {
            policy,
            host: &self.host,
            program,
            argv: spec.argv.clone(),
            cwd: spec.workdir.clone(),
            run_dir: run_dir_path.clone(),
            new_session: !interactive,
            tmpfs_size: Some(spec.limits.tmpfs_size()),
            private_dirs: private_dirs.clone(),
            git_config,
            held: match held {
                Some(h) if selection.runner == RunnerKind::Landlock => {
                    pins.add(&h.storage)?;
                    Some(h)
                }
                _ => None,
            },
            state_dir: Some(self.state_dir.clone()),
        };
        crate::phases::mark("pins_program");
        let plan = selection.plan(&input).map_err(|e| CordonError::runner_failed(selection.runner, e))?;
        // Resource limits: the run's cgroups (best available), then the rlimits that
        // cover what they do not. A gap in a limit the caller set refuses to run
        // unless the policy allows best effort.
        let cg_name = format!("{}{}-{id}-{:08x}", crate::limits::CGROUP_PREFIX, std::process::id(), random_u32());
        let userns = plan.namespaces.user || selection.runner == RunnerKind::Bwrap;
        // The launch path: the stage (Linux) or the direct spawn (`seatbelt`, and every
        // runner off Linux); the direct one has no supervisor and applies no limits.
        let direct = direct::is_direct(selection.runner);
        if direct && !spec.policy.allow_unix_sockets.is_empty() && spec.policy.mode.is_confined() {
            let reason = format!("{}; it cannot grant host unix sockets", direct::NO_SUPERVISOR);
            let reasons = vec![crate::error::RunnerReason { runner: selection.runner, reason }];
            return Err(CordonError::SandboxUnavailable { mode: spec.policy.mode, reasons });
        }
        crate::phases::mark("plan");
        let limits = if direct {
            crate::limits::RunLimits::unapplied(&spec.limits, direct::NO_LIMITS)
        } else {
            crate::limits::RunLimits::prepare(&self.cgroups, &cg_name, &spec.limits, self.host.euid, userns)
        };
        crate::phases::mark("run_cgroups");
        let mut enforcement = plan.enforcement.clone();
        let limit_gaps = limits.explicit_gaps();
        let refused: Vec<_> = limit_gaps.iter().filter(|(r, _)| !policy.accept_gaps.contains(r)).collect();
        if !refused.is_empty() && policy.mode.is_confined() && !policy.best_effort {
            let why: Vec<String> = refused.iter().map(|(r, w)| format!("{} ({w})", r.name())).collect();
            let reason = format!("cannot fully enforce: {}", why.join(", "));
            let reasons = vec![crate::error::RunnerReason { runner: selection.runner, reason }];
            return Err(CordonError::SandboxUnavailable { mode: policy.mode, reasons });
        }
        for (r, reason) in limit_gaps {
            if enforcement.level == crate::result::EnforcementLevel::Full {
                enforcement.level = crate::result::EnforcementLevel::Partial;
            }
            enforcement.gaps.push(crate::result::Gap { restriction: r, reason });
        }
        let run_dir = if plan.needs_run_dir {
            let mk = |p: &Path| std::fs::DirBuilder::new().mode(0o700).create(p);
            mk(&run_dir_path)
                .and_then(|_| mk(&run_dir_path.join("tmp")))
                .and_then(|_| mk(&run_dir_path.join("shm")))
                .map_err(|e| CordonError::io(format!("creating the per-run directory {}", run_dir_path.display()), e))?;
            // Seeded files in the private temp dir, which is a host directory here.
            for f in plan.seed_files.iter().filter(|f| f.by == crate::runner::SeedBy::Executor) {
                let written = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&f.path)
                    .and_then(|mut file| std::io::Write::write_all(&mut file, &f.content));
                if let Err(e) = written {
                    let _ = std::fs::remove_dir_all(&run_dir_path);
                    return Err(CordonError::io(format!("writing {}", f.path.display()), e));
                }
            }
            Some(run_dir_path)
        } else {
            None
        };
        let mut env = spec.env.clone();
        for (k, v) in &plan.env {
            env.retain(|(name, _)| name != k.as_str());
            env.push((k.into(), v.into()));
        }
        // Private cache and state locations under the run's private TMPDIR (discarded
        // with it), or the caller's cache directory: the home directory is read-only
        // (see `crate::env::PRIVATE_CACHE_VARS`).
        if policy.mode.is_confined() {
            let tmpdir = plan.env.iter().find(|(k, _)| k == "TMPDIR").map(|(_, v)| PathBuf::from(v));
            // Where the command writes privately: its tmpfs mounts and layers. With a
            // cache directory, only the layers whose changes are kept count: a cache
            // variable whose default lies in another goes into the cache directory.
            let not_kept: Vec<&Path> = private_dirs
                .iter()
                .filter(|d| spec.cache_dir.is_some() && !matches!(d.keep, crate::runner::Keep::Upper { .. }))
                .map(|d| d.path.as_path())
                .collect();
            let layers: Vec<PathBuf> =
                plan.private_mounts().into_iter().filter(|p| !not_kept.contains(&p.as_path())).collect();
            let writable = policy.writable();
            let view = crate::env::PrivateView { writable: &writable, layers: &layers, missing_homes: &missing_homes };
            let kept = spec.cache_dir.as_ref().map(|d| d.join(crate::request::CACHE_DIR_CACHES));
            // npm's debug log, which its error message names, is kept there too.
            if let Some(k) = &kept {
                if !env.iter().any(|(name, _)| name == "npm_config_logs_dir") {
                    env.push(("npm_config_logs_dir".into(), k.join("npm-logs").into_os_string()));
                }
            }
            if let Some(base) = kept.or(tmpdir) {
                let private = crate::env::private_cache_env(&base, &env, view);
                for (k, v) in private {
                    env.retain(|(name, _)| *name != k);
                    env.push((k, v));
                }
            }
        }
        // Network off looks like a machine without a network (ENETUNREACH); npm retries
        // that for more than a minute by default. Unless the caller chose otherwise,
        // it gives up at once (docs/denials.md).
        if policy.mode.is_confined() && !policy.network && policy.allow_hosts.is_empty() {
            for (k, v) in OFFLINE_ENV {
                if !env.iter().any(|(name, _)| name == k) {
                    env.push((k.into(), v.into()));
                }
            }
        }
        // cordon's egress proxy for `--allow-host` (the command reaches nothing else).
        #[cfg(target_os = "linux")]
        let proxy = start_proxy(&plan, spec, selection.runner, &mut env)?;

        // Streams.
        let mut stdin_relay: Option<(OwnedFd, OwnedFd)> = None;
        let (stdin_fd, stdin_writer_fd): (OwnedFd, Option<OwnedFd>) = match &spec.stdin {
            Stdin::Null => (null_stdin(policy.mode.is_confined(), &self.state_dir)?, None),
            Stdin::Bytes(_) => {
                let (r, w) = pipe()?;
                (above_stdio(r)?, Some(w))
            }
            Stdin::Inherit => {
                let own = dup_cloexec(std::io::stdin().as_fd()).map_err(|e| CordonError::io("duplicating stdin", e))?;
                // A file (or directory) would hand the command the host's own mount
                // of it: see `handover`. It reads a pipe cordon fills instead.
                match if policy.mode.is_confined() { handover(&own, &self.state_dir) } else { Handover::Keep } {
                    Handover::Keep => (own, None),
                    Handover::Reopened(ro) => (above_stdio(ro)?, None),
                    Handover::Relay => {
                        let (r, w) = pipe()?;
                        stdin_relay = Some((own, w));
                        (above_stdio(r)?, None)
                    }
                }
            }
        };
        // Spill names carry cordon's pid: the startup sweep leaves a live writer's alone.
        let pid_tag = std::process::id();
        let spill = (spec.output == Output::Capture).then_some(self.state_dir.as_path());
        let stdout = StreamCapture::new(spec.output_cap, spec.spill_cap, spill, &format!("out-{pid_tag}-{id}-"));
        let stderr = StreamCapture::new(spec.output_cap, spec.spill_cap, spill, &format!("err-{pid_tag}-{id}-"));
        let mut readers = Vec::new();
        let mut relays: Vec<(OwnedFd, OwnedFd, Stream)> = Vec::new();
        let child_out: [OwnedFd; 2] = match spec.output {
            Output::Capture => {
                let (r1, w1) = pipe()?;
                let (r2, w2) = pipe()?;
                #[cfg(target_os = "linux")]
                let _ = nix::fcntl::fcntl(&w1, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
                readers.push((r1, stdout.clone()));
                readers.push((r2, stderr.clone()));
                [above_stdio(w1)?, above_stdio(w2)?]
            }
            Output::Inherit => {
                let out =
                    dup_cloexec(std::io::stdout().as_fd()).map_err(|e| CordonError::io("duplicating stdout", e))?;
                let err =
                    dup_cloexec(std::io::stderr().as_fd()).map_err(|e| CordonError::io("duplicating stderr", e))?;
                if policy.mode.is_confined() {
                    relay_files([out, err], &self.state_dir, &mut relays)?
                } else {
                    [out, err]
                }
            }
        };
        crate::phases::mark("env_streams");
        let denials: DenialSink = Arc::default();
        let spawn_direct = || {
            direct::start(&plan, &env, [&stdin_fd, &child_out[0], &child_out[1]])
                .map_err(|e| direct::spawn_error(e, selection.runner))
        };
        #[cfg(target_os = "linux")]
        let started = if direct {
            spawn_direct()
        } else {
            self.start_staged(Staged {
                spec,
                policy,
                proxy: proxy.as_ref().map(|(p, _)| p.addr()),
                plan: &plan,
                env: &env,
                stdio: [stdin_fd.as_raw_fd(), child_out[0].as_raw_fd(), child_out[1].as_raw_fd()],
                // The terminals the command inherits (device numbers): the runners
                // grant them, so the write judge must not refuse them.
                terminals: [stdin_fd.as_fd(), child_out[0].as_fd(), child_out[1].as_fd()]
                    .into_iter()
                    .filter_map(|fd| nix::sys::stat::fstat(fd).ok())
                    .filter(|st| st.st_mode & libc::S_IFMT == libc::S_IFCHR)
                    .map(|st| st.st_rdev)
                    .collect(),
                pins: &pins,
                limits: &limits,
                runner: selection.runner,
                allowed_sockets,
                denials: &denials,
            })
            .await
        };
        #[cfg(not(target_os = "linux"))]
        let started = spawn_direct();
        crate::phases::mark("spawn");
        // The child has its copies now (or failed); close ours.
        drop(pins);
        drop(stdin_fd);
        drop(child_out);
        let started = match started {
            Ok(s) => s,
            Err(e) => {
                if let Some(dir) = &run_dir {
                    let _ = std::fs::remove_dir_all(dir);
                }
                return Err(e);
            }
        };
        let pid = started.pid;
        self.registry.running.lock().unwrap_or_else(|p| p.into_inner()).insert(id, (pid, started.supervised));
        let guard =
            KillOnDrop { pid, supervised: started.supervised, armed: true, registry: self.registry.clone(), id };
        #[cfg(target_os = "linux")]
        let supervisor = match started.supervision {
            Some((source, supervision)) => match crate::denials::start(source, supervision) {
                Ok(s) => Some(s),
                Err(e) => {
                    // Without a supervisor the child's observed syscalls would fail
                    // with ENOSYS: stop it; nothing useful ran.
                    drop(guard);
                    if let Some(dir) = &run_dir {
                        let _ = std::fs::remove_dir_all(dir);
                    }
                    return Err(CordonError::io("starting the seccomp supervisor", e));
                }
            },
            None => None,
        };
        crate::phases::mark("supervisor");
        let collectors = readers.into_iter().map(|(fd, cap)| tokio::spawn(drain(fd, cap))).collect();
        let relays = relays.into_iter().map(|(from, to, stream)| Relay::start(from, to, stream)).collect();
        let stdin_relay = stdin_relay.map(|(from, to)| Relay::start(from, to, Stream::Stdin));
        let stdin_writer = match (&spec.stdin, stdin_writer_fd) {
            (Stdin::Bytes(bytes), Some(w)) => {
                let bytes = bytes.clone();
                Some(tokio::spawn(async move {
                    if let Ok(mut tx) = tokio::net::unix::pipe::Sender::from_owned_fd(w) {
                        // EPIPE (the command exited without reading) is harmless.
                        let _ = tx.write_all(&bytes).await;
                    }
                }))
            }
            _ => None,
        };
        Ok(Launched {
            pid,
            #[cfg(target_os = "linux")]
            proxy,
            #[cfg(target_os = "linux")]
            helper_status: started.helper_status,
            exit_status: started.exit_status,
            #[cfg(target_os = "linux")]
            supervisor,
            denials,
            // The call's own policy is what the result reports (cordon's state directory,
            // protected above for this run only, is not a path a grant could open).
            policy: spec.policy.clone(),
            #[cfg(target_os = "linux")]
            workdir: spec.workdir.clone(),
            exit_watch: started.exit_watch,
            enforcement,
            hidden: plan.hidden.clone(),
            layer_locks,
            selection,
            stdout,
            stderr,
            collectors,
            relays,
            stdin_relay,
            stdin_writer,
            run_dir,
            limits,
            guard,
        })
    }
}

/// A started run's leader, by either launch path.
pub(super) struct Started {
    pub(super) pid: i32,
    /// The leader is the stage's supervising init (Linux, no pid namespace).
    pub(super) supervised: bool,
    pub(super) exit_watch: ExitWatch,
    /// The command's own wait status, written by its init (the stage's spawn).
    pub(super) exit_status: Option<OwnedFd>,
    /// The bwrap stage helper's status pipe (see `cordon_stage::helper`).
    #[cfg(target_os = "linux")]
    pub(super) helper_status: Option<OwnedFd>,
    /// Where the seccomp supervisor gets its listener, and what it judges.
    #[cfg(target_os = "linux")]
    pub(super) supervision: Option<(crate::denials::ListenerSource, crate::denials::Supervision)>,
}

/// What the stage's launch (Linux) needs from `Executor::launch`.
#[cfg(target_os = "linux")]
pub(super) struct Staged<'a> {
    pub(super) spec: &'a Spec,
    /// The run's policy (the spec's, with cordon's state directory protected when a
    /// writable root holds it).
    pub(super) policy: &'a crate::policy::ExecutionPolicy,
    /// The run's egress proxy address (`--allow-host`), for the supervisor.
    pub(super) proxy: Option<std::net::SocketAddr>,
    pub(super) plan: &'a crate::runner::LaunchPlan,
    pub(super) env: &'a [(OsString, OsString)],
    pub(super) stdio: [std::os::fd::RawFd; 3],
    pub(super) terminals: Vec<u64>,
    pub(super) pins: &'a crate::pin::Pins,
    pub(super) limits: &'a crate::limits::RunLimits,
    pub(super) runner: RunnerKind,
    pub(super) allowed_sockets: Vec<crate::denials::AllowedSocket>,
    pub(super) denials: &'a DenialSink,
}

#[cfg(target_os = "linux")]
impl Executor {
    /// Launch through the child-side stage (`cordon_stage::spawn`): the `landlock`,
    /// `bwrap` and `passthrough` runners on Linux.
    pub(super) async fn start_staged(&self, s: Staged<'_>) -> Result<Started, CordonError> {
        let Staged { spec, policy, proxy, plan, env, stdio, terminals, pins, limits, runner, allowed_sockets, denials } =
            s;
        // The landlock runner's stage (and the bwrap runner's stage helper) hands its
        // seccomp listener to a supervisor in this process, which records refused
        // network and process syscalls as evidence.
        let notify_pair = if plan.seccomp.is_some_and(|s| s.supervise) {
            Some(
                cordon_stage::notify::socketpair()
                    .map_err(|e| CordonError::io("creating the notification socket", e))?,
            )
        } else {
            None
        };
        let materialized = stage::materialize(
            plan,
            env,
            stdio,
            &self.host,
            notify_pair.as_ref().map(|(_, child)| child.as_raw_fd()),
            pins,
            spec.observe_writes,
        )
        .map_err(|e| CordonError::runner_failed(runner, e))?;
        let supervised_stage = materialized.stage.notify_socket.is_some();
        let observed = materialized.observed;
        let passed_fds = materialized.keep;
        let helper_status = materialized.helper_status;
        let helper_notify = materialized.helper_notify;
        let mut stage_plan = materialized.stage;
        stage_plan.limits = limits.child();
        crate::phases::mark("stage_plan");

        // Spawning blocks for the child's stage (about a millisecond). Alone, it is done
        // inline (no thread hop); with other runs in flight, on the spawner thread while
        // this runtime serves them.
        let others_running = !self.registry.running.lock().unwrap_or_else(|p| p.into_inner()).is_empty();
        let spawned = if others_running {
            spawn_beside(stage_plan, !plan.namespaces.pid).await
        } else {
            cordon_stage::spawn(stage_plan)
        };
        drop(passed_fds);
        let mut helper_socket = None;
        let listener = match notify_pair {
            Some((parent_end, child_end)) if supervised_stage && spawned.is_ok() => {
                drop(child_end);
                Some(cordon_stage::notify::recv_fd(parent_end.as_fd()))
            }
            // The helper sends its listener only once bubblewrap has built the
            // sandbox: received by the supervisor task.
            Some((parent_end, child_end)) if helper_notify && spawned.is_ok() => {
                drop(child_end);
                helper_socket = Some(parent_end);
                None
            }
            _ => None,
        };
        let spawned = spawned.map_err(|e| spawn_error(e, runner, &spec.argv[0]))?;
        let pid = spawned.pid;
        // Without a pid namespace the stage's init is a supervising subreaper.
        let supervised = !plan.namespaces.pid;
        // `AsyncFd::new` is deprecated because a bare `RawFd` could be closed under it;
        // an `OwnedFd` that the `AsyncFd` owns cannot, and `register` needs `unsafe`.
        #[allow(deprecated)]
        let pidfd = match AsyncFd::new(spawned.pidfd) {
            Ok(fd) => fd,
            Err(e) => {
                end_runs_now(&[(pid, supervised)]);
                return Err(CordonError::io("watching the child", e));
            }
        };
        let allowed_sockets: Arc<[crate::denials::AllowedSocket]> = allowed_sockets.into();
        let write_rules = spec.observe_writes.then(|| {
            let mut rules = write_rules(plan, policy);
            rules.terminals = terminals;
            rules
        });
        let supervision = crate::denials::Supervision {
            observed,
            sink: denials.clone(),
            allowed: allowed_sockets,
            writes: write_rules.map(crate::writes::WriteJudge::new),
            proxy,
        };
        let source = match listener {
            Some(Ok(l)) => Some(crate::denials::ListenerSource::Listener(l)),
            Some(Err(e)) => {
                // The child installed a notifying filter: without a supervisor its
                // observed syscalls would fail with ENOSYS. Stop it; nothing useful ran.
                end_runs_now(&[(pid, supervised)]);
                return Err(CordonError::runner_failed(runner, crate::runner::RunnerFailure::SeccompListener(e)));
            }
            None => helper_socket.map(crate::denials::ListenerSource::Socket),
        };
        Ok(Started {
            pid,
            supervised,
            exit_watch: ExitWatch::Pidfd(pidfd),
            exit_status: spawned.exit_status,
            helper_status,
            supervision: source.map(|src| (src, supervision)),
        })
    }
}

impl Executor {
    /// The run's policy with cordon's state directory kept read-only when it lies in a
    /// writable root (a workspace of `/tmp` holds it): it is added to the protected
    /// paths, which the mount layer re-attaches read-only and the write judge knows.
    /// Without a mount layer it cannot be, and the run is refused (as is a writable
    /// root inside the state directory).
    fn keep_state_dir_read_only(
        &self,
        policy: &crate::policy::ExecutionPolicy,
        runner: RunnerKind,
    ) -> Result<crate::policy::ExecutionPolicy, CordonError> {
        let mut policy = policy.clone();
        if !policy.mode.is_confined() {
            return Ok(policy);
        }
        let state = &self.state_dir;
        let refuse = |root: PathBuf| crate::error::PolicyError::StateDirWritable { state_dir: state.clone(), root };
        if let Some(root) = policy.writable().into_iter().find(|w| w.starts_with(state)) {
            return Err(refuse(root).into());
        }
        if let Some(root) = policy.writable().into_iter().find(|w| state.starts_with(w)) {
            let mount_layer = runner == RunnerKind::Bwrap || self.host.namespaces.available();
            if !mount_layer {
                return Err(refuse(root).into());
            }
            if !policy.protected.iter().any(|p| state.starts_with(p)) {
                policy.protected.push(state.clone());
            }
        }
        Ok(policy)
    }
}

/// Pin the run's `$HOME/.cache` (`HOME` from the run's environment) when it is a real
/// directory on the host, and return its canonical path; `None` otherwise (no `HOME`,
/// a relative one, no such directory, or `.cache` itself a symlink). A home that is the
/// caller's own directory and has none gets one first (mode 0700, as XDG tools make
/// it): `mkdir -p ~/.cache/x` then works inside, in the run's private layer. Only
/// cordon's own `HOME`: a request's environment (`--env HOME=/etc`, a serve client's
/// `env`) names any directory, and must not make cordon write there.
fn pin_home_cache(pins: &mut crate::pin::Pins, env: &[(OsString, OsString)], euid: u32) -> Option<PathBuf> {
    let home = env.iter().find(|(k, _)| k == "HOME").map(|(_, v)| PathBuf::from(v))?;
    if !home.is_absolute() {
        return None;
    }
    let cache = home.join(".cache");
    if std::fs::symlink_metadata(&cache).is_err() && std::env::var_os("HOME").is_some_and(|own| home == Path::new(&own))
    {
        make_home_cache(&home, euid);
    }
    pin_private_dir(pins, &cache)
}

/// Where a run keeps what it adds to the private layer over `layered` with the cache
/// directory `cache_dir` (see [`crate::request::CACHE_DIR_LAYERS`]): the upper and
/// work directories `LAYERS/NAME/{upper,work}` (made 0700 when missing; `NAME` is the
/// layered path with `/` and every byte but `[A-Za-z0-9._-]` escaped as `%XX`), pinned,
/// when this run gets `NAME/lock` (`flock`, held until the run ends); a run that finds
/// the lock taken reads the kept upper directory as a layer above the host's and keeps
/// nothing. [`crate::runner::Keep::Discard`] when the cache directory's filesystem is
/// not one overlayfs takes as an upper layer for certain (a network or FUSE
/// filesystem), or anything is amiss (a symlink, a name too long).
fn keep_layer(
    cache_dir: &Path,
    layered: &Path,
    pins: &mut crate::pin::Pins,
    locks: &mut Vec<std::fs::File>,
) -> crate::runner::Keep {
    use crate::runner::Keep;
    if !upper_capable(cache_dir) {
        return Keep::Discard;
    }
    let mut name = String::new();
    for b in layered.as_os_str().as_bytes() {
        match *b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-' => name.push(char::from(*b)),
            other => name.push_str(&format!("%{other:02X}")),
        }
    }
    if name.len() > KEPT_LAYER_NAME_MAX {
        return Keep::Discard;
    }
    let dir = cache_dir.join(crate::request::CACHE_DIR_LAYERS).join(name);
    let (upper, work) = (dir.join("upper"), dir.join("work"));
    let mk = |p: &Path| match std::fs::DirBuilder::new().mode(0o700).create(p) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    };
    let made = mk(&cache_dir.join(crate::request::CACHE_DIR_LAYERS))
        .and_then(|_| mk(&dir))
        .and_then(|_| mk(&upper))
        .and_then(|_| mk(&work));
    if made.is_err() {
        return Keep::Discard;
    }
    // The overlay's root shows its upper directory's mode: the host directory's.
    if let Ok(m) = std::fs::metadata(layered) {
        let _ = std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(m.mode() & 0o7777));
    }
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join("lock"));
    let Ok(lock) = lock else { return Keep::Discard };
    #[allow(deprecated, reason = "nix 0.32's Flock guard type takes the file by value; this one is kept for the run")]
    let held = nix::fcntl::flock(lock.as_raw_fd(), nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok();
    if held && pins.add(&upper).is_ok() && pins.add(&work).is_ok() {
        locks.push(lock);
        return Keep::Upper { upper, work };
    }
    if !held && pins.add(&upper).is_ok() {
        return Keep::ReadUpper { upper };
    }
    Keep::Discard
}

/// The longest name of a kept layer's directory (below `NAME_MAX`).
const KEPT_LAYER_NAME_MAX: usize = 200;

/// Whether the filesystem holding `dir` is one overlayfs takes as an upper layer
/// (xattrs, whiteouts, `O_TMPFILE`, rename): ext2/3/4, XFS, Btrfs, F2FS, tmpfs. Never
/// off Linux (no overlayfs).
#[cfg(not(target_os = "linux"))]
fn upper_capable(_dir: &Path) -> bool {
    false
}

/// See the other-OS version above.
#[cfg(target_os = "linux")]
fn upper_capable(dir: &Path) -> bool {
    const EXT: i64 = 0xEF53;
    const XFS: i64 = 0x5846_5342;
    const BTRFS: i64 = 0x9123_683E;
    const F2FS: i64 = 0xF2F5_2010;
    const TMPFS: i64 = 0x0102_1994;
    nix::sys::statfs::statfs(dir).is_ok_and(|s| {
        #[allow(clippy::useless_conversion, reason = "the field's type differs between architectures")]
        let kind = i64::from(s.filesystem_type().0);
        [EXT, XFS, BTRFS, F2FS, TMPFS].contains(&kind)
    })
}

/// Create `HOME/.cache` (0700) when `HOME` (canonical, opened without following
/// symlinks) is a directory owned by `euid`; nothing otherwise (another user's home, a
/// container's foreign `HOME`). Failures are ignored: the run then has no cache layer.
fn make_home_cache(home: &Path, euid: u32) {
    let Some(fd) = home.canonicalize().ok().and_then(|h| crate::pin::open_no_symlinks(&h).ok()) else { return };
    let mine =
        nix::sys::stat::fstat(&fd).is_ok_and(|st| st.st_uid == euid && st.st_mode & libc::S_IFMT == libc::S_IFDIR);
    if mine {
        let _ = nix::sys::stat::mkdirat(&fd, ".cache", nix::sys::stat::Mode::from_bits_truncate(0o700));
    }
}

/// Pin the host directory `dir` for a private layer and return its canonical path;
/// `None` when it is not a real directory (missing, or itself a symlink). The common
/// case costs one `openat2` and one `fstat`; only a path reached through a symlinked
/// ancestor is canonicalized first, and `dir` itself is never followed.
fn pin_private_dir(pins: &mut crate::pin::Pins, dir: &Path) -> Option<PathBuf> {
    let (parent, name) = (dir.parent()?, dir.file_name()?);
    let normal = dir.components().all(|c| matches!(c, std::path::Component::RootDir | std::path::Component::Normal(_)));
    let path = if normal { dir.to_path_buf() } else { parent.canonicalize().ok()?.join(name) };
    let path = match pins.add(&path) {
        Ok(()) => path,
        Err(crate::error::PolicyError::Changed { source, .. })
            if normal && source.raw_os_error() == Some(libc::ELOOP) =>
        {
            let real = parent.canonicalize().ok()?.join(name);
            pins.add(&real).ok()?;
            real
        }
        Err(_) => return None,
    };
    let fd = pins.fd(&path)?;
    nix::sys::stat::fstat(fd).ok().filter(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR).map(|_| path)
}

/// Variables set for a confined run with the network off, unless the caller set them.
pub(super) const OFFLINE_ENV: [(&str, &str); 2] = [("npm_config_fetch_retries", "0"), ("PIP_RETRIES", "0")];

/// A random number for unique names (not a secret: names are created exclusively).
pub(super) fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    let _ = getrandom_bytes(&mut b);
    u32::from_ne_bytes(b)
}

/// Random bytes: the `getrandom` system call on Linux (no file to open), else
/// `/dev/urandom`.
pub(super) fn getrandom_bytes(buf: &mut [u8]) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    if cordon_stage::host::random_bytes(buf) {
        return Ok(());
    }
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

/// Spawn on the stage's spawner thread and wait without blocking the runtime. If this
/// future is dropped before it has taken the spawned run, that run is ended (nothing
/// else would know of it). `supervised`: the run has no pid namespace (its init is a
/// supervising subreaper).
///
/// The plan names the caller's descriptors by number (stdio, passed fds, the
/// notification socket, cgroup attach files), and they must stay open until the
/// spawner is done with it: were they closed early, another run's new descriptors
/// could take those numbers. So a drop of this future before then waits for the
/// spawner (about a millisecond); being the innermost awaited future, it is dropped
/// before the caller's locals that own those descriptors.
#[cfg(target_os = "linux")]
async fn spawn_beside(plan: cordon_stage::StagePlan, supervised: bool) -> Result<cordon_stage::Spawned, SpawnError> {
    // Declared before the channel, so dropped after it: a dropped future closes the
    // channel first (a run in it, or one the reply can no longer deliver, is ended by
    // `Undelivered`'s drop), then waits for the spawner.
    let (finished, spawn_over) = std::sync::mpsc::channel::<()>();
    let _wait_on_drop = WaitForSpawn(spawn_over);
    let (tx, rx) = tokio::sync::oneshot::channel();
    cordon_stage::spawn_queued(
        plan,
        Box::new(move |outcome| {
            // Dropped when this reply ends (or is dropped unrun): the spawn is over,
            // and an orphan ended.
            let _finished = finished;
            let _ = tx.send(outcome.map(|s| Undelivered { spawned: Some(s), supervised }));
        }),
    )?;
    match rx.await {
        Ok(outcome) => outcome.and_then(|mut u| {
            u.spawned.take().ok_or_else(|| SpawnError::Parent {
                what: "taking the spawned run",
                source: std::io::Error::other("delivered twice"),
            })
        }),
        Err(_) => Err(SpawnError::Parent {
            what: "waiting for the spawner thread",
            source: std::io::Error::other("spawner thread is gone"),
        }),
    }
}

/// A spawned run on its way to the future that awaits it (see [`spawn_beside`]): if
/// it is dropped undelivered (that future was dropped first), the run is ended, since
/// nothing else knows of it.
#[cfg(target_os = "linux")]
struct Undelivered {
    spawned: Option<cordon_stage::Spawned>,
    supervised: bool,
}

#[cfg(target_os = "linux")]
impl Drop for Undelivered {
    fn drop(&mut self) {
        if let Some(orphan) = self.spawned.take() {
            end_runs_now(&[(orphan.pid, self.supervised)]);
        }
    }
}

/// Held by the awaiting future: its drop waits until the spawner's reply is over (the
/// reply holds the only sender and never sends: `recv` returns once it is dropped).
#[cfg(target_os = "linux")]
struct WaitForSpawn(std::sync::mpsc::Receiver<()>);

#[cfg(target_os = "linux")]
impl Drop for WaitForSpawn {
    fn drop(&mut self) {
        let _ = self.0.recv();
    }
}

#[cfg(target_os = "linux")]
pub(super) fn spawn_error(e: SpawnError, runner: RunnerKind, argv0: &OsStr) -> CordonError {
    let program = argv0.to_string_lossy().into_owned();
    match e {
        SpawnError::Stage(f) if f.step == Step::Exec && f.errno == libc::ENOENT => {
            CordonError::ProgramNotFound { program }
        }
        SpawnError::Stage(f) if f.step == Step::Exec && f.errno == libc::E2BIG => {
            CordonError::ArgumentListTooLong { program }
        }
        SpawnError::Stage(f)
            if f.step == Step::Exec && matches!(f.errno, libc::EACCES | libc::ENOEXEC | libc::EPERM) =>
        {
            CordonError::ProgramNotExecutable { program, source: std::io::Error::from_raw_os_error(f.errno) }
        }
        SpawnError::Stage(f) => {
            // Namespaces or mounts the host facts promised failed: the cached canary
            // answer is stale (the container's settings changed), so the next cordon
            // process asks the kernel again. This run still fails closed.
            if matches!(f.step, Step::Clone | Step::IdMaps | Step::Mount) {
                crate::host::forget_canary(cordon_stage::host::euid());
            }
            CordonError::runner_failed(runner, crate::runner::RunnerFailure::Stage(f))
        }
        SpawnError::Parent { what, source } => CordonError::io(what, source),
    }
}
