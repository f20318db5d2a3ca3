//! `cordon audit`: the security regression suite as a product. It runs a battery of
//! escape probes and positive controls against cordon's own runners and modes on
//! this host (or through another sandbox's command prefix), judges each by its effect
//! outside the sandbox, and reports one verdict per probe, target and identity.
//!
//! How a probe is judged (docs/audit.md):
//! 1. Its **host control** runs first: the same operation directly on the host, as
//!    the same identity, in a fresh fixture. Its observers must see the effect, or the
//!    probe cannot fail and its verdicts are skips, never passes.
//! 2. Then once per target: a fresh fixture, the probe inside the sandbox, the
//!    observers outside. An attack passes when no observer saw its effect; a control
//!    passes when every observer saw it.
//!
//! Modules: `catalog` (the probes), `probe` (the program that runs inside), `fixture`
//! (a job's directories and planted objects), `watch` (the observers), `exec` (running
//! one job on one target as one identity), `report` (text, table, JSON, JUnit).
//!
//! What it does not do: change the host beyond its own directory (every object it
//! plants outside that directory, a key, an IPC object, a file in `/tmp`, is removed
//! after the job, and processes carrying a job's marker are killed), send traffic
//! anywhere but the loopback listeners it starts, or judge by exit codes alone.

pub(crate) mod catalog;
pub(crate) mod exec;
pub(crate) mod fixture;
pub mod probe;
pub mod report;
pub(crate) mod watch;

pub use exec::split_words;

use catalog::{Control, Expect, Plan, Probe};
use exec::{Identity, Invocation, RunOutput, Target};
use fixture::{Fixture, Skip};
use report::{Outcome, Verdict};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::mode::Mode;
use crate::vocab::RunnerKind;

/// `PATH` for everything the audit starts.
pub(crate) const PATH_ENV: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What to audit.
#[derive(Clone, Debug)]
pub struct Options {
    /// cordon's runners to audit (ignored with a wrapper).
    pub runners: Vec<RunnerKind>,
    /// The modes to audit.
    pub modes: Vec<Mode>,
    /// Another sandbox's command prefix (`{ws}` stands for the workspace).
    pub wrapper: Option<Vec<String>>,
    /// Also run everything as this unprivileged user (needs root).
    pub as_user: Option<String>,
    /// Only probes whose id (`class/name`) starts with one of these.
    pub only: Vec<String>,
    /// Jobs run at once.
    pub jobs: usize,
    /// Where the audit's directory is made (not `/tmp`, which is private inside).
    pub base: PathBuf,
    /// The cordon executable (this one).
    pub cordon: PathBuf,
    /// Keep the directories of failed jobs (to reproduce them by hand).
    pub keep_failed: bool,
}

/// The audit could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// `--as` needs root (to switch to the user) and a non-root user.
    #[error("--as {user}: {why}")]
    Identity {
        /// The user asked for.
        user: String,
        /// Why it cannot be used.
        why: String,
    },
    /// A file-system step of the setup failed.
    #[error("{what} {path}: {source}")]
    Setup {
        /// The step.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Nothing to run.
    #[error("no probe matches {0:?}")]
    NoProbes(Vec<String>),
}

/// The identities: the caller, and `--as USER`.
fn identities(opts: &Options) -> Result<Vec<Identity>, AuditError> {
    let me = cordon_stage::host::euid();
    let name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(me))
        .ok()
        .flatten()
        .map_or_else(|| me.to_string(), |u| u.name);
    let mut v = vec![Identity { name, uid: me, gid: cordon_stage::host::egid() }];
    if let Some(user) = &opts.as_user {
        let err = |why: &str| AuditError::Identity { user: user.clone(), why: why.into() };
        if me != 0 {
            return Err(err("switching users needs the audit to run as root"));
        }
        let u = nix::unistd::User::from_name(user).ok().flatten().ok_or_else(|| err("no such user"))?;
        if u.uid.is_root() {
            return Err(err("must be an unprivileged user"));
        }
        v.push(Identity { name: u.name, uid: u.uid.as_raw(), gid: u.gid.as_raw() });
    }
    Ok(v)
}

/// The targets: the wrapper, or each runner in each mode.
fn targets(opts: &Options) -> Vec<Target> {
    if let Some(prefix) = &opts.wrapper {
        return opts.modes.iter().map(|m| Target::Wrapper { prefix: prefix.clone(), mode: *m }).collect();
    }
    opts.runners.iter().flat_map(|r| opts.modes.iter().map(move |m| Target::Cordon { runner: *r, mode: *m })).collect()
}

/// The audit's own directory and the probe program copies in it.
struct Workdir {
    dir: PathBuf,
    programs: fixture::Programs,
}

fn set_mode(p: &Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(mode))
}

fn workdir(opts: &Options) -> Result<Workdir, AuditError> {
    fn setup(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> AuditError {
        let path = path.to_path_buf();
        move |source| AuditError::Setup { what, path, source }
    }
    // Directories of earlier audits whose process is gone.
    if let Ok(rd) = std::fs::read_dir(&opts.base) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = n.strip_prefix("cordon-audit-") {
                if pid.bytes().all(|b| b.is_ascii_digit()) && !Path::new("/proc").join(pid).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
    }
    let dir = opts.base.join(format!("cordon-audit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(setup("create", &dir))?;
    set_mode(&dir, 0o755).map_err(setup("chmod", &dir))?;
    // A copy every identity can execute (the checkout may live under /root).
    let cordon = dir.join("cordon");
    std::fs::copy(&opts.cordon, &cordon).map_err(setup("copy the cordon binary to", &cordon))?;
    set_mode(&cordon, 0o755).map_err(setup("chmod", &cordon))?;
    let cordon_suid = (cordon_stage::host::euid() == 0)
        .then(|| {
            let p = dir.join("cordon-suid");
            std::fs::copy(&opts.cordon, &p).ok()?;
            std::os::unix::fs::chown(&p, Some(0), Some(0)).ok()?;
            set_mode(&p, 0o4755).ok()?;
            Some(p)
        })
        .flatten();
    let fcaps = (cordon_stage::host::euid() == 0).then(|| file_caps_copy(&opts.cordon, &dir).ok()).flatten();
    Ok(Workdir { dir, programs: fixture::Programs { cordon, suid: cordon_suid, fcaps } })
}

/// A copy of the probe program carrying file capabilities (`cap_dac_override+ep`).
fn file_caps_copy(from: &Path, dir: &Path) -> std::io::Result<PathBuf> {
    let copy = dir.join("cordon-fcaps");
    std::fs::copy(from, &copy)?;
    set_mode(&copy, 0o755)?;
    // struct vfs_cap_data, revision 2, effective: permitted = CAP_DAC_OVERRIDE (bit 1).
    let mut v = vec![];
    for word in [0x0200_0000u32 | 1, 2, 0, 0, 0] {
        v.extend_from_slice(&word.to_le_bytes());
    }
    let c = std::ffi::CString::new(copy.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    cordon_stage::probe::set_xattr(&c, c"security.capability", &v, false)?;
    Ok(copy)
}

/// Everything a worker needs.
struct Shared<'a> {
    probes: &'a [Probe],
    targets: &'a [Target],
    work: &'a Workdir,
    opts: &'a Options,
    locks: Mutex<HashMap<&'static str, Arc<Mutex<()>>>>,
    confined: Mutex<HashMap<(String, u32), Result<(), String>>>,
    counter: std::sync::atomic::AtomicUsize,
    spawned: Mutex<Vec<u32>>,
}

/// The battery as text: one line per probe (what it tries, what it proves) and the
/// number of probes per class.
pub fn listing() -> String {
    report::Report::catalog_text(&catalog::all())
}

/// Runs the audit; `on_verdict` sees each verdict as it is reached.
pub fn run(opts: &Options, on_verdict: &(dyn Fn(&Verdict) + Sync)) -> Result<report::Report, AuditError> {
    let started = Instant::now();
    let ids = identities(opts)?;
    let targets = targets(opts);
    let probes: Vec<Probe> = catalog::all()
        .into_iter()
        .filter(|p| opts.only.is_empty() || opts.only.iter().any(|o| p.id().starts_with(o.as_str())))
        .collect();
    if probes.is_empty() {
        return Err(AuditError::NoProbes(opts.only.clone()));
    }
    let mounts_before = mount_lines();
    let work = workdir(opts)?;
    let shared = Shared {
        probes: &probes,
        targets: &targets,
        work: &work,
        opts,
        locks: Mutex::new(HashMap::new()),
        confined: Mutex::new(HashMap::new()),
        counter: std::sync::atomic::AtomicUsize::new(0),
        spawned: Mutex::new(vec![]),
    };
    // The longest groups first (burning CPU, waiting for late writers, git fixtures), so
    // that they do not make the tail of the run.
    let weight = |p: &Probe| match p.class {
        catalog::Class::Limits => 0,
        catalog::Class::Lifetime => 1,
        catalog::Class::Git => 2,
        _ => 3,
    };
    let mut order: Vec<usize> = (0..probes.len()).collect();
    order.sort_by_key(|i| weight(&probes[*i]));
    let queue: Mutex<VecDeque<(usize, Identity)>> =
        Mutex::new(order.into_iter().flat_map(|i| ids.iter().map(move |id| (i, id.clone()))).collect());
    let verdicts = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..opts.jobs.max(1) {
            scope.spawn(|| {
                // The guard must drop before the group runs (a `while let` on the lock
                // would hold it through the body).
                let next = || queue.lock().map(|mut q| q.pop_front()).ok().flatten();
                while let Some((i, id)) = next() {
                    for v in run_group(&shared, i, &id) {
                        on_verdict(&v);
                        if let Ok(mut all) = verdicts.lock() {
                            all.push(v);
                        }
                    }
                }
            });
        }
    });
    let mut leftovers = leftover_processes(&work.dir);
    leftovers.extend(leftover_mounts(&mounts_before, &work.dir));
    leftovers.extend(leftover_cgroups(&shared.spawned.lock().map(|v| v.clone()).unwrap_or_default()));
    if !opts.keep_failed || std::fs::read_dir(&work.dir).map(|d| d.count() <= 2).unwrap_or(true) {
        let _ = std::fs::remove_dir_all(&work.dir);
    }
    let mut verdicts = verdicts.into_inner().unwrap_or_default();
    let order: HashMap<String, usize> = probes.iter().enumerate().map(|(i, p)| (p.id(), i)).collect();
    let col: HashMap<String, usize> = targets.iter().enumerate().map(|(i, t)| (t.name(), i)).collect();
    verdicts.sort_by_key(|v| (order.get(&v.probe).copied(), v.identity.clone(), col.get(&v.target).copied()));
    Ok(report::Report::new(
        &probes,
        &targets,
        &ids,
        verdicts,
        leftovers,
        started.elapsed(),
        opts.keep_failed.then(|| work.dir.clone()),
    ))
}

/// The host control, then every target, for one probe and one identity.
fn run_group(sh: &Shared<'_>, i: usize, id: &Identity) -> Vec<Verdict> {
    let probe = &sh.probes[i];
    let verdict = |t: &Target, outcome: Outcome, detail: String, argv: Vec<String>, elapsed: Duration| Verdict {
        probe: probe.id(),
        class: probe.class,
        target: t.name(),
        identity: id.name.clone(),
        outcome,
        detail,
        command: argv,
        elapsed_ms: elapsed.as_millis() as u64,
    };
    let control = run_job(sh, probe, id, &Target::Host);
    let skip_all = |why: String| -> Vec<Verdict> {
        sh.targets.iter().map(|t| verdict(t, Outcome::Skip, why.clone(), vec![], Duration::ZERO)).collect()
    };
    match control {
        Job::Skipped(why) => return skip_all(why),
        Job::Ran { judgement: Err(why), .. } => {
            return skip_all(format!("the host control did not show the effect, so this probe cannot fail here: {why}"))
        }
        Job::Ran { judgement: Ok(_), .. } => {}
    }
    sh.targets
        .iter()
        .map(|t| match run_job(sh, probe, id, t) {
            Job::Skipped(why) => verdict(t, Outcome::Skip, why, vec![], Duration::ZERO),
            Job::Ran { judgement: Ok(what), argv, elapsed } => verdict(t, Outcome::Pass, what, argv, elapsed),
            Job::Ran { judgement: Err(why), argv, elapsed } => {
                let outcome = if why.starts_with(ERROR_MARK) { Outcome::Error } else { Outcome::Fail };
                verdict(t, outcome, why.trim_start_matches(ERROR_MARK).to_string(), argv, elapsed)
            }
        })
        .collect()
}

/// Marks a judgement that is an error of the run (it did not happen), not an escape.
const ERROR_MARK: &str = "\u{1}";

enum Job {
    Skipped(String),
    Ran { judgement: Result<String, String>, argv: Vec<String>, elapsed: Duration },
}

/// One job: fixture, setup, run, settle, judge, clean up.
fn run_job(sh: &Shared<'_>, probe: &Probe, id: &Identity, target: &Target) -> Job {
    let is_host = *target == Target::Host;
    let (mut plan, fx) = match setup(sh, probe, id, target) {
        Ok(x) => x,
        Err(why) => return Job::Skipped(why),
    };
    if plan.dangerous && id.is_root() && !is_host {
        if let Err(why) = confined(sh, id, target) {
            cleanup(plan, &fx.root, false);
            return Job::Skipped(format!("not attempted: as root it could change the host, and this sandbox {why}"));
        }
    }
    // Jobs sharing host state (a domain name, a keyring, the machine's memory) run one
    // at a time, their setup included: it records the state the watches compare with.
    let lock = plan.lock.map(|name| {
        let mut locks = sh.locks.lock().unwrap_or_else(|e| e.into_inner());
        locks.entry(name).or_default().clone()
    });
    let _guard = lock.as_ref().map(|l| l.lock().unwrap_or_else(|e| e.into_inner()));
    let fx = if lock.is_some() {
        cleanup(plan, &fx.root, false);
        match setup(sh, probe, id, target) {
            Ok((p, f)) => {
                plan = p;
                f
            }
            Err(why) => return Job::Skipped(why),
        }
    } else {
        fx
    };
    let (run_target, argv) = match (&plan.control, is_host) {
        (Control::Argv(a), true) => (Target::Host, a.clone()),
        (Control::Cordon(mode, a), true) => {
            let runner = sh.opts.runners.first().copied().unwrap_or(RunnerKind::Landlock);
            (Target::Cordon { runner, mode: *mode }, a.clone())
        }
        _ => (target.clone(), plan.argv.clone()),
    };
    let deadline = plan.deadline;
    let inv = Invocation {
        cordon: &sh.work.programs.cordon,
        argv,
        cordon_flags: std::mem::take(&mut plan.cordon_flags),
        cwd: fx.ws.clone(),
        env: environment(&fx, &plan),
        stdin: plan.stdin.take(),
        fds: std::mem::take(&mut plan.fds),
        deadline,
    };
    let full = exec::command_line(&run_target, &inv);
    let out = exec::run(&run_target, id, inv, &sh.spawned);
    if !plan.settle.is_zero() {
        std::thread::sleep(plan.settle);
    }
    let judgement = if is_host { judge_control(&mut plan, &out) } else { judge(&mut plan, &out) };
    let failed = judgement.is_err() && !is_host;
    cleanup(plan, &fx.root, failed && sh.opts.keep_failed);
    Job::Ran { judgement, argv: full, elapsed: out.elapsed }
}

/// A fresh fixture for one job and the probe's plan for it (`Err`: a skip, with the
/// fixture already removed).
fn setup(sh: &Shared<'_>, probe: &Probe, id: &Identity, target: &Target) -> Result<(Plan, Fixture), String> {
    let n = sh.counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let root = sh.work.dir.join(format!("{n}-{}", probe.id().replace('/', "-")));
    let fx = Fixture::new(root.clone(), id.clone(), target.clone(), &sh.work.programs);
    match (probe.setup)(&fx) {
        Ok(p) => Ok((p, fx)),
        Err(Skip(why)) => {
            let _ = std::fs::remove_dir_all(&root);
            Err(why)
        }
    }
}

/// The run's environment: a plain one (the caller's is never passed on), the job's
/// `HOME`, and the probe's own variables.
fn environment(fx: &Fixture, plan: &Plan) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".to_string(), PATH_ENV.to_string()),
        ("HOME".to_string(), fx.home.display().to_string()),
        ("LANG".to_string(), "C".to_string()),
        ("USER".to_string(), fx.id.name.clone()),
    ];
    env.extend(plan.env.iter().cloned());
    env
}

fn cleanup(mut plan: Plan, root: &Path, keep: bool) {
    for w in plan.watches.iter_mut() {
        w.cleanup();
    }
    for f in plan.cleanups.drain(..) {
        f();
    }
    drop(plan);
    if !keep {
        let _ = std::fs::remove_dir_all(root);
    }
}

/// Whether `target` holds no privilege as `id` (asked once per target and identity):
/// the `privileged` probe must not work there.
fn confined(sh: &Shared<'_>, id: &Identity, target: &Target) -> Result<(), String> {
    let key = (target.name(), id.uid);
    // Held for the check: one check per target and identity, never two at once.
    let mut cache = sh.confined.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = cache.get(&key) {
        return r.clone();
    }
    let n = sh.counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = sh.work.dir.join(format!("{n}-confined"));
    let fx = Fixture::new(dir.clone(), id.clone(), target.clone(), &sh.work.programs);
    let inv = Invocation {
        cordon: &sh.work.programs.cordon,
        argv: catalog::probe_argv(&fx, "privileged", &[]),
        cordon_flags: vec![],
        cwd: fx.ws.clone(),
        env: environment(&fx, &Plan::argv(vec![])),
        stdin: None,
        fds: vec![],
        deadline: catalog::DEADLINE,
    };
    let out = exec::run(target, id, inv, &sh.spawned);
    let _ = std::fs::remove_dir_all(&dir);
    let r = match (&out.refused, &out.line) {
        (Some(why), _) => Err(format!("did not run a command ({why})")),
        (None, Some(l)) if !l.ok => Ok(()),
        (None, Some(l)) => Err(format!("holds privilege ({})", l.detail)),
        (None, None) => Err("did not report its privileges".into()),
    };
    cache.insert(key, r.clone());
    r
}

/// The program was refused at `execve` (cordon's `PROGRAM_NOT_EXECUTABLE`, or a
/// wrapper's exit 126 with the kernel's refusal on stderr).
fn exec_refused(out: &RunOutput) -> bool {
    match &out.refused {
        Some(why) => why.starts_with("PROGRAM_NOT_EXECUTABLE"),
        None => {
            out.line.is_none()
                && out.exit_code == Some(126)
                && (out.stderr.contains("Operation not permitted") || out.stderr.contains("Permission denied"))
        }
    }
}

/// What the probe saw inside, in a few words.
fn inside(out: &RunOutput) -> String {
    match (&out.line, out.signal) {
        (_, Some(sig)) => format!("killed by {}", signal_name(sig)),
        (Some(l), None) if l.ok => format!("{}: worked", l.op),
        (Some(l), None) => format!("{}: {} ({})", l.op, l.errname, exec::tail(&l.detail)),
        (None, None) if out.timed_out => "still running at the deadline".into(),
        (None, None) => format!("exit {}", out.exit_code.map_or("?".into(), |c| c.to_string())),
    }
}

fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig).map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_string())
}

/// The verdict inside the sandbox: `Ok(what held or worked)` or `Err(what escaped or
/// broke)`; an `Err` starting with [`ERROR_MARK`] means the probe did not run.
fn judge(plan: &mut Plan, out: &RunOutput) -> Result<String, String> {
    if plan.exec_refusal_holds && exec_refused(out) {
        return Ok(format!(
            "held: the sandbox refused to execute it ({})",
            out.refused.clone().unwrap_or_else(|| exec::tail(&out.stderr))
        ));
    }
    if let Some(why) = &out.refused {
        return Err(format!("{ERROR_MARK}the target did not run the probe: {why}"));
    }
    let seen: Vec<Option<String>> = plan.watches.iter_mut().map(|w| w.effect(out)).collect();
    match plan.expect {
        Expect::Stopped => {
            let effects: Vec<String> = seen.into_iter().flatten().collect();
            if !effects.is_empty() {
                return Err(format!("escaped: {} [inside: {}]", effects.join("; "), inside(out)));
            }
            if plan.prints_line && out.line.is_none() && out.signal.is_none() {
                return Err(format!(
                    "{ERROR_MARK}the probe did not report ({}; stderr: {})",
                    inside(out),
                    exec::tail(&out.stderr)
                ));
            }
            Ok(format!("held: {}", inside(out)))
        }
        Expect::Works => {
            let missing = seen.iter().filter(|s| s.is_none()).count();
            if missing == 0 {
                Ok(format!("worked: {}", seen.into_iter().flatten().collect::<Vec<_>>().join("; ")))
            } else {
                Err(format!(
                    "control broken: {missing} of {} observer(s) saw nothing [inside: {}; stderr: {}]",
                    seen.len(),
                    inside(out),
                    exec::tail(&out.stderr)
                ))
            }
        }
    }
}

/// The host control: the observers must see the effect (any of them for an attack,
/// all of them for a control).
fn judge_control(plan: &mut Plan, out: &RunOutput) -> Result<String, String> {
    if let Some(why) = &out.refused {
        return Err(format!("the control did not run: {why}"));
    }
    if std::env::var_os("CORDON_AUDIT_DEBUG").is_some() {
        eprintln!("DEBUG control {out:?}");
    }
    let seen: Vec<Option<String>> = plan.watches.iter_mut().map(|w| w.effect(out)).collect();
    let shown = match plan.expect {
        Expect::Stopped => seen.iter().any(Option::is_some),
        Expect::Works => seen.iter().all(Option::is_some),
    };
    if shown {
        Ok(seen.into_iter().flatten().collect::<Vec<_>>().join("; "))
    } else {
        Err(format!("nothing observed [{}]", inside(out)))
    }
}

/// Lines of this process's `/proc/self/mountinfo`.
fn mount_lines() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default().lines().map(String::from).collect()
}

/// Mounts on the host that name the audit's directory and were not there before.
fn leftover_mounts(before: &[String], dir: &Path) -> Vec<String> {
    let d = dir.display().to_string();
    mount_lines()
        .into_iter()
        .filter(|l| l.contains(&d) && !before.contains(l))
        .map(|l| format!("mount left behind: {l}"))
        .collect()
}

/// Processes whose command line names the audit's directory, killed (they are the
/// audit's own: every probe runs from there).
fn leftover_processes(dir: &Path) -> Vec<String> {
    let d = dir.display().to_string();
    let pids = watch::pids_with(&d);
    for pid in &pids {
        let _ = cordon_stage::probe::proc::kill(*pid, libc::SIGKILL);
    }
    pids.into_iter().map(|p| format!("process {p} left running (killed)")).collect()
}

/// Per-run cgroups of the `cordon run` processes the audit started, still present.
/// cordon makes them under its own cgroup (each v1 hierarchy's, the unified one's, or
/// `cordon/` at the unified root), which is the audit's: only there is looked at, so
/// another user's runs that happen to reuse a pid are not counted.
fn leftover_cgroups(pids: &[u32]) -> Vec<String> {
    let prefixes: Vec<String> = pids.iter().map(|p| format!("{}{p}-", crate::limits::CGROUP_PREFIX)).collect();
    if prefixes.is_empty() {
        return vec![];
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut bases: Vec<PathBuf> = vec![];
    for line in own.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or("/"));
        let rel = path.trim_start_matches('/');
        if controllers.is_empty() {
            for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
                bases.push(Path::new(root).join(rel));
                bases.push(Path::new(root).join("cordon"));
            }
        } else {
            for c in controllers.split(',') {
                let c = c.trim_start_matches("name=");
                bases.push(Path::new("/sys/fs/cgroup").join(c).join(rel));
            }
            bases.push(Path::new("/sys/fs/cgroup").join(controllers).join(rel));
        }
    }
    bases.sort();
    bases.dedup();
    // A run's cgroup is removed once the run is over: empty and still there a second
    // later is left behind (a live one belongs to someone else's run with a reused pid,
    // at a shared level of a hierarchy such as the root of `pids`).
    let candidates = |bases: &[PathBuf]| -> Vec<PathBuf> {
        let mut v = vec![];
        for base in bases {
            let Ok(rd) = std::fs::read_dir(base) else { continue };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let empty = std::fs::read_to_string(e.path().join("cgroup.procs")).is_ok_and(|t| t.trim().is_empty());
                if prefixes.iter().any(|p| name.starts_with(p.as_str())) && empty {
                    v.push(e.path());
                }
            }
        }
        v
    };
    let first = candidates(&bases);
    if first.is_empty() {
        return vec![];
    }
    std::thread::sleep(Duration::from_secs(1));
    let again = candidates(&bases);
    first.into_iter().filter(|p| again.contains(p)).map(|p| format!("cgroup left behind: {}", p.display())).collect()
}
