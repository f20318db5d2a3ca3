//! The `seatbelt` runner's launch, end to end on any OS: the executor runs the real
//! plan through the direct launch (`exec::direct`), with the [`super::SandboxExec`]
//! seam pointed at `tests/fake-sandbox-exec/sandbox-exec`, which records its argv,
//! environment, working directory and process group and then runs the command
//! (unconfined: these tests check the launch, not Seatbelt). Golden files in
//! `tests/golden/seatbelt-launch/` hold the exact argv and environment
//! (`CORDON_UPDATE_GOLDEN=1` rewrites them).

use super::runner::test_fake;
use crate::error::CordonError;
use crate::mode::Mode;
use crate::policy::PolicyRequest;
use crate::request::{ExecutorConfig, Request};
use crate::runner::RunnerFailure;
use crate::vocab::{EnforcementLevel, Restriction, RunnerChoice, RunnerKind};
use crate::Executor;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

const FAKE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fake-sandbox-exec/sandbox-exec");
const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/seatbelt-launch");

/// One case's directories, outside `/tmp` (the planner refuses paths under the
/// directories that are symlinks on macOS): `ws` (the workspace), `state` (cordon's
/// state directory), `fake` (a private copy of the fake and its records).
struct Fixture {
    _base: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    state: PathBuf,
    fake: PathBuf,
}

/// A fresh directory for one test whose canonical path the planner accepts: under
/// `target/seatbelt-launch-tests` of the checkout, or, for a checkout under a
/// directory that is a symlink on macOS (a newcomer's clone in `/tmp` or `/var/tmp`),
/// under the first of the system temp directory (canonical: on macOS
/// `/private/var/folders/...`) and `/dev/shm` that lies outside those prefixes.
/// Removed on drop.
pub(crate) fn scratch(prefix: &str) -> tempfile::TempDir {
    let outside_symlinks = |p: &Path| {
        let p = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        !super::plan::MACOS_SYMLINKED_DIRS.iter().any(|(link, _)| p.starts_with(link))
    };
    let in_checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("seatbelt-launch-tests");
    // A checkout and temp dir under /tmp or /var leave the home itself (the directory
    // made there is removed on drop; a workspace may not lie in a dot directory such
    // as ~/.cache); /dev/shm (a system directory no workspace may be in) is the last
    // resort.
    let mut candidates = vec![(in_checkout, true), (std::env::temp_dir(), false)];
    candidates.extend(std::env::var_os("HOME").map(|h| (PathBuf::from(h), false)));
    candidates.push((PathBuf::from("/dev/shm"), false));
    let parent = candidates
        .iter()
        .find(|(dir, make)| {
            outside_symlinks(dir) && if *make { std::fs::create_dir_all(dir).is_ok() } else { dir.is_dir() }
        })
        .map(|(dir, _)| dir)
        .unwrap_or_else(|| panic!("no scratch directory outside /tmp, /var and /etc among {candidates:?}"));
    let dir = tempfile::Builder::new().prefix(&format!("cordon-seatbelt-{prefix}-")).tempdir_in(parent).unwrap();
    assert!(outside_symlinks(dir.path()), "{:?} resolves under a macOS symlink", dir.path());
    dir
}

fn fixture() -> Fixture {
    let base = scratch("case");
    let root = base.path().canonicalize().unwrap();
    let (ws, state, fake) = (root.join("ws"), root.join("state"), root.join("fake"));
    // Both writable roots hold a repository of their own: where the scratch directory
    // lies inside another repository (a checkout's target/), git run in a root without
    // one would find a planted `.git` first, and the plan names that path too.
    for d in [&ws, &state, &fake, &root.join("extra"), &ws.join(".git"), &root.join("extra/.git")] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(root.join("extra/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::copy(FAKE, fake.join("sandbox-exec")).unwrap();
    Fixture { _base: base, root, ws, state, fake }
}

impl Fixture {
    fn executor(&self) -> Executor {
        let ambient = [("PATH", "/usr/bin:/bin"), ("HOME", "/nonexistent"), ("LANG", "C"), ("API_TOKEN", "s3cr3t")];
        Executor::new(ExecutorConfig {
            state_dir: Some(self.state.clone()),
            ambient_env: Some(ambient.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()),
            ..ExecutorConfig::default()
        })
        .unwrap()
    }

    fn request(&self, argv: &[&str], best_effort: bool) -> Request {
        let mut req = Request::argv(argv.iter().copied());
        req.workdir = Some(self.ws.clone());
        req.runner = RunnerChoice::Only(RunnerKind::Seatbelt);
        req.policy = PolicyRequest {
            mode: Mode::WorkspaceWrite,
            best_effort,
            writable_roots: vec![self.root.join("extra")],
            ..PolicyRequest::default()
        };
        req
    }

    fn record(&self, name: &str) -> Vec<String> {
        let raw = std::fs::read(self.fake.join(name)).unwrap();
        raw.split(|b| *b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect()
    }

    /// Machine-specific parts of a recorded value replaced by placeholders.
    fn normalize(&self, s: &str) -> String {
        let s = s
            .replace(&self.ws.display().to_string(), "<WS>")
            .replace(&self.state.display().to_string(), "<STATE>")
            .replace(&self.root.join("extra").display().to_string(), "<EXTRA>");
        // The per-run directory: <STATE>/cordon-<euid>/run-<cordon pid>-<run id>-<random>.
        let Some(i) = s.find("<STATE>/") else { return s };
        let Some(j) = s[i..].find("/run-").map(|j| i + j) else { return s };
        let rest = &s[j + "/run-".len()..];
        let end = rest.find('/').unwrap_or(rest.len());
        format!("{}<STATE>/<EUID>/run-<ID>{}", &s[..i], &rest[end..])
    }
}

fn check_golden(name: &str, actual: &str) {
    let path = Path::new(GOLDEN).join(name);
    if std::env::var("CORDON_UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(GOLDEN).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run with CORDON_UPDATE_GOLDEN=1 to create it", path.display()));
    assert_eq!(expected, actual, "{} differs (CORDON_UPDATE_GOLDEN=1 rewrites it; review the diff)", path.display());
}

#[tokio::test]
async fn launch_passes_the_planned_argv_profile_and_parameters_to_sandbox_exec() {
    let f = fixture();
    let _fake = test_fake::install(&f.fake.join("sandbox-exec"));
    let exec = f.executor();
    let spec = exec.resolve(f.request(&["/bin/sh", "-c", "echo out; echo err >&2; exit 3"], true)).unwrap();
    let expected_plan = {
        let sel = crate::runner::select(&spec.policy, exec.host(), spec.runner).unwrap();
        let input = crate::runner::PlanInput {
            policy: &spec.policy,
            host: exec.host(),
            program: PathBuf::from("/bin/sh"),
            argv: spec.argv.clone(),
            cwd: spec.workdir.clone(),
            run_dir: f.root.join("unused"),
            new_session: true,
            tmpfs_size: None,
            private_dirs: Vec::new(),
            git_config: None,
            held: None,
            state_dir: None,
        };
        sel.plan(&input).unwrap()
    };
    let result = exec.run(spec).await.unwrap();

    // The command ran, through the fake, and its result came back.
    assert_eq!(result.exit_code, Some(3));
    assert_eq!(result.stdout.text, "out\n");
    assert_eq!(result.stderr.text, "err\n");
    assert_eq!(result.sandbox.runner, RunnerKind::Seatbelt);
    assert!(!result.sandbox.runner_failed);
    // The argv is the planner's, option for option (argv[0] aside: a script cannot
    // see it), and the profile is passed whole as data.
    let argv = f.record("argv");
    let planned: Vec<String> = expected_plan.argv[1..].iter().map(|a| a.to_string_lossy().into_owned()).collect();
    assert_eq!(argv.len(), planned.len());
    assert_eq!(argv[0], "-p");
    assert_eq!(argv[1], planned[1], "the profile text is passed unchanged");
    assert!(!argv[1].contains(&f.ws.display().to_string()), "no path is spliced into the profile");
    let mut golden: String = argv
        .iter()
        .enumerate()
        .map(|(i, a)| if i == 1 { "<profile: launch.sb>\n".to_string() } else { format!("{:?}\n", f.normalize(a)) })
        .collect();
    golden.insert_str(0, &format!("{:?}\n", expected_plan.argv[0]));
    check_golden("launch.argv", &golden);
    check_golden("launch.sb", &argv[1]);
    // Every path travels as a -D parameter; TMPDIR is the run's private directory.
    let tmpdir = argv.iter().find_map(|a| a.strip_prefix("TMPDIR=")).unwrap();
    assert!(tmpdir.starts_with(&f.state.display().to_string()) && tmpdir.ends_with("/tmp"), "{tmpdir}");
    assert!(argv.contains(&format!("WORKSPACE={}", f.ws.display())));
    assert!(argv.contains(&format!("WRITABLE_ROOT_0={}", f.root.join("extra").display())));
    assert!(argv.contains(&format!("PROTECTED_1={}", f.ws.join(".git").display())));
    assert!(argv.contains(&format!("PROTECTED_0={}", f.root.join("extra/.git").display())));
    // The private TMPDIR existed for the run and is gone after it.
    assert!(!Path::new(tmpdir).exists());
    // The environment is exactly the run's: scrubbed, TMPDIR private, offline hints.
    let env: Vec<String> = f
        .record("env")
        .into_iter()
        .filter(|kv| !["PWD=", "SHLVL=", "OLDPWD=", "_="].iter().any(|p| kv.starts_with(p)))
        .map(|kv| f.normalize(&kv))
        .collect();
    assert!(!env.iter().any(|kv| kv.contains("s3cr3t")), "the scrub removed the token: {env:?}");
    let mut env_sorted = env.clone();
    env_sorted.sort();
    check_golden("launch.env", &env_sorted.iter().map(|kv| format!("{kv:?}\n")).collect::<String>());
    // The working directory is the workspace; the run leads its own process group.
    assert_eq!(std::fs::read_to_string(f.fake.join("cwd")).unwrap().trim_end(), f.ws.display().to_string());
    let pgid = std::fs::read_to_string(f.fake.join("pgid")).unwrap();
    let (pid, group) = pgid.trim().split_once(' ').unwrap();
    assert_eq!(pid, group, "sandbox-exec leads its own process group");
    // Enforcement is honest: what Seatbelt (and this launch) cannot do is a named gap.
    assert_eq!(result.sandbox.enforcement.level, EnforcementLevel::Partial);
    let gaps: Vec<Restriction> = result.sandbox.enforcement.gaps.iter().map(|g| g.restriction).collect();
    for r in [Restriction::ProcessLifetime, Restriction::FdIsolation, Restriction::DenialAudit] {
        assert!(gaps.contains(&r), "{r} is a gap: {gaps:?}");
    }
    let limits = result.limits.unwrap();
    assert_eq!(limits.memory_by, crate::limits::Mechanism::None);
    assert_eq!(limits.pids_by, crate::limits::Mechanism::None);
    // No evidence was collected, so nothing is claimed denied.
    assert!(!result.sandbox.denied && result.sandbox.denials.is_empty());
}

#[tokio::test]
async fn a_deadline_terminates_the_whole_group_through_sandbox_exec() {
    let f = fixture();
    let _fake = test_fake::install(&f.fake.join("sandbox-exec"));
    let exec = f.executor();
    let child_file = f.ws.join("child");
    let script = format!("sleep 60 & echo $! > '{}'; wait", child_file.display());
    let mut req = f.request(&["/bin/sh", "-c", &script], true);
    req.timeout = Some(Duration::from_millis(500));
    let spec = exec.resolve(req).unwrap();
    let result = exec.run(spec).await.unwrap();
    assert!(result.timed_out, "{result:?}");
    assert_eq!(result.signal, Some(libc::SIGTERM));
    // The background child was in the run's group: it was ended too (observed from
    // outside: the pid is gone or a zombie awaiting its new parent).
    let pid: i32 = std::fs::read_to_string(&child_file).unwrap().trim().parse().unwrap();
    // A zombie (Linux: state `Z` in /proc) has ended; elsewhere, a pid that no longer
    // exists (its new parent reaped it).
    let alive = || match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok(),
    };
    let start = std::time::Instant::now();
    while alive() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(), "the run's background child {pid} outlived the run");
}

#[tokio::test]
async fn hard_mode_refuses_what_seatbelt_cannot_enforce() {
    let f = fixture();
    let _fake = test_fake::install(&f.fake.join("sandbox-exec"));
    let exec = f.executor();
    let spec = exec.resolve(f.request(&["/bin/sh", "-c", "touch ran"], false)).unwrap();
    let err = exec.run(spec).await.unwrap_err();
    assert_eq!(err.code(), "SANDBOX_UNAVAILABLE", "{err}");
    let reasons = err.runner_reasons();
    assert!(reasons.iter().any(|r| r.reason.contains("fd-isolation") && r.reason.contains("process-lifetime")));
    // Nothing ran: neither the fake nor the command.
    assert!(!f.fake.join("argv").exists() && !f.ws.join("ran").exists());
}

#[tokio::test]
async fn a_missing_sandbox_exec_fails_the_runner_and_runs_nothing() {
    let f = fixture();
    let _fake = test_fake::install(&f.fake.join("missing"));
    let exec = f.executor();
    let spec = exec.resolve(f.request(&["/bin/sh", "-c", "touch ran"], true)).unwrap();
    match exec.run(spec).await {
        Err(CordonError::RunnerFailed {
            runner: RunnerKind::Seatbelt,
            source: RunnerFailure::Spawn { program, .. },
        }) => {
            assert_eq!(program, f.fake.join("missing"))
        }
        other => panic!("expected RUNNER_FAILED: {other:?}"),
    }
    assert!(!f.ws.join("ran").exists());
}

#[tokio::test]
async fn without_the_fake_only_macos_offers_seatbelt_and_the_binary_is_absolute() {
    assert_eq!(super::SandboxExec::binary(), Path::new("/usr/bin/sandbox-exec"));
    assert!(!super::SandboxExec::faked());
    if cfg!(target_os = "macos") {
        return;
    }
    let f = fixture();
    let exec = f.executor();
    let spec = exec.resolve(f.request(&["/bin/true"], true)).unwrap();
    let err = exec.run(spec).await.unwrap_err();
    assert_eq!(err.code(), "SANDBOX_UNAVAILABLE", "{err}");
    assert!(err.runner_reasons().iter().any(|r| r.reason.contains("macOS-only")));
}

#[tokio::test]
async fn allowed_host_sockets_are_refused_not_silently_dropped() {
    let f = fixture();
    let _fake = test_fake::install(&f.fake.join("sandbox-exec"));
    let socket = f.root.join("daemon.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let exec = f.executor();
    let mut req = f.request(&["/bin/sh", "-c", "touch ran"], true);
    req.policy.allow_unix_sockets = vec![socket];
    let spec = exec.resolve(req).unwrap();
    let err = exec.run(spec).await.unwrap_err();
    assert_eq!(err.code(), "SANDBOX_UNAVAILABLE", "{err}");
    assert!(err.runner_reasons().iter().any(|r| r.reason.contains("cannot grant host unix sockets")), "{err}");
    assert!(!f.fake.join("argv").exists() && !f.ws.join("ran").exists());
}

/// Issue 25 finding 9: a program named relative to the working directory (`./x.sh`,
/// `sub/../x.sh`) runs: the planner is given the normalized path, which it accepts.
#[tokio::test]
async fn a_program_path_relative_to_the_workspace_runs() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    let _fake = test_fake::install(&f.fake.join("sandbox-exec"));
    let exec = f.executor();
    std::fs::create_dir(f.ws.join("sub")).unwrap();
    let script = f.ws.join("x.sh");
    std::fs::write(&script, "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    for program in ["./x.sh", "sub/../x.sh"] {
        let spec = exec.resolve(f.request(&[program], true)).unwrap();
        let result = exec.run(spec).await.unwrap_or_else(|e| panic!("{program}: {e}"));
        assert_eq!(result.exit_code, Some(0), "{program}: {result:?}");
        assert_eq!(result.stdout.text, "ran\n", "{program}");
    }
}
