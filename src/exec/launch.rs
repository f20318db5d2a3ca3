//! Launching one run: streams, the runner's plan, the spawn, the supervisor and the
//! collectors (`Executor::launch`). Two spawn paths: the stage (`start_staged`, Linux:
//! the plan materialized and spawned by `cordon_stage`, with the seccomp supervisor)
//! and the direct spawn (`super::direct`: the `seatbelt` runner, and every runner off
//! Linux).

use super::finish::ExitWatch;
use super::private_dirs::*;
use super::relay::{Relay, Stream};
#[cfg(target_os = "linux")]
use super::staged::*;
use super::streams::*;
#[cfg(target_os = "linux")]
use super::supervision::start_proxy;
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
    /// The local IPC the command had (see `LaunchPlan::local_ipc`).
    pub(super) local_ipc: Option<crate::vocab::LocalIpc>,
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
        let git_config =
            (policy.mode.is_confined() && crate::gitconfig::wanted(&spec.env, &policy.writable())).then(|| {
                let mut sources = crate::gitconfig::sources(&spec.env);
                sources.retain(|p| !crate::gitconfig::refused_to_command(p));
                crate::gitconfig::seed(&sources)
            });
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
            local_ipc: plan.local_ipc.clone(),
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
