//! The bubblewrap planner, tested on every OS, plus end-to-end runs on Linux.
//!
//! 1. Golden tests: the complete plan for each case (bwrap's argv, what cordon's
//!    stage does before bwrap runs, the enforcement report) is compared with
//!    `tests/golden/bwrap/<case>.plan`; refused inputs with the messages in
//!    `errors.txt`. `CORDON_UPDATE_GOLDEN=1 cargo test --test planner bwrap_golden::`
//!    rewrites them (review the diff before committing).
//! 2. Invariants checked on every planned case: the argv parses the way bubblewrap
//!    parses it (every option with its exact arity, no path taken for an option), the
//!    mount order, bind sources equal to their targets, and the stage settings.
//! 3. End-to-end (`e2e_*`, Linux with bubblewrap): the cordon binary runs real
//!    commands with `--runner bwrap`, as the current user and, when that is root, as
//!    `nobody` too (`CORDON_TEST_USER`). Without bubblewrap they print
//!    `SKIP <test>: <reason>`; with `CORDON_MUST_ENFORCE=1` they fail instead.

use cordon::host::{HostFacts, Namespaces};
use cordon::mode::Mode;
use cordon::policy::{BindAccess, ExecutionPolicy};
use cordon::runner::bwrap::{BwrapRunner, SECCOMP_CHILD_FD};
use cordon::runner::{
    EnvFd, EnvFdFormat, Keep, LaunchPlan, MountStep, PlanInput, PrivateDir, Runner, RunnerKind, SeccompDelivery,
};
use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::common::golden::{self, updating};
/// The bubblewrap path the golden plans use.
const BWRAP: &str = "/usr/bin/bwrap";
/// The cordon executable the golden plans use as the stage helper.
const STAGE_HELPER: &str = "/opt/cordon/bin/cordon";

fn repo_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Compare `actual` with the golden file `name` (see `common::golden`).
fn check_golden(name: &str, actual: &str) {
    golden::check_golden(&repo_path("tests/golden/bwrap"), name, actual);
}

// ------------------------------------------------------------------ cases

#[derive(Clone)]
struct Case {
    name: &'static str,
    host: HostFacts,
    policy: ExecutionPolicy,
    program: PathBuf,
    argv: Vec<OsString>,
    cwd: PathBuf,
    new_session: bool,
    /// The home's cache (first), then other private directories.
    private_dirs: Vec<PathBuf>,
    git_config: Option<Vec<u8>>,
}

fn user_host() -> HostFacts {
    HostFacts {
        os: "linux",
        kernel_landlock_abi: 7,
        landlock_abi: 7,
        landlock_abi_cap: None,
        seccomp: true,
        euid: 1000,
        egid: 1000,
        namespaces: Namespaces::UserNamespace,
        overlay: cordon::host::Overlay::Available,
        net_namespace: cordon::host::NetNamespace::Available,
        bwrap: Some(BWRAP.into()),
        proc_mount: Default::default(),
        disabled_runners: vec![],
        stage_helper: Some(STAGE_HELPER.into()),
    }
}

fn root_host() -> HostFacts {
    HostFacts { euid: 0, egid: 0, namespaces: Namespaces::Direct, ..user_host() }
}

impl Case {
    fn new(name: &'static str, mode: Mode) -> Case {
        let ws = PathBuf::from("/home/dev/project");
        Case {
            name,
            host: user_host(),
            policy: ExecutionPolicy {
                mode,
                workspace: ws.clone(),
                writable_roots: Vec::new(),
                protected: Vec::new(),
                network: false,
                best_effort: false,
                accept_gaps: Vec::new(),
                allow_unix_sockets: Vec::new(),
                allow_hosts: Default::default(),
                git: Default::default(),
            },
            program: "/usr/bin/bash".into(),
            argv: vec!["bash".into(), "-c".into(), "make test".into()],
            cwd: ws,
            new_session: true,
            private_dirs: Vec::new(),
            git_config: None,
        }
    }

    fn with_workspace(mut self, ws: impl Into<PathBuf>) -> Case {
        self.policy.workspace = ws.into();
        self.cwd = self.policy.workspace.clone();
        self
    }

    fn input(&self) -> PlanInput<'_> {
        PlanInput {
            policy: &self.policy,
            host: &self.host,
            program: self.program.clone(),
            argv: self.argv.clone(),
            cwd: self.cwd.clone(),
            run_dir: "/tmp/cordon-1000/run-1-1-00000000".into(),
            new_session: self.new_session,
            tmpfs_size: None,
            private_dirs: self
                .private_dirs
                .iter()
                .enumerate()
                .map(|(i, p)| PrivateDir { path: p.clone(), keep: Keep::Discard, home_cache: i == 0 })
                .collect(),
            git_config: self.git_config.clone(),
            held: None,
            state_dir: Some("/tmp/cordon-1000".into()),
        }
    }
}

fn os(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

fn planned_cases() -> Vec<Case> {
    let mut cases = Vec::new();

    cases.push(Case::new("read_only", Mode::ReadOnly));

    // Two writable roots, one under /tmp (bound after the private tmpfs, onto a
    // mount point bubblewrap creates in it), and .git re-bound read-only last.
    let mut c = Case::new("workspace_write", Mode::WorkspaceWrite);
    c.policy.writable_roots = vec!["/srv/cache/sccache".into(), "/tmp/cordon-out".into()];
    c.policy.protected = vec!["/home/dev/project/.git".into()];
    cases.push(c.clone());

    // The same as root: no user namespace in the stage (bubblewrap uses root's own
    // capabilities, then drops them with --cap-drop ALL).
    c.name = "workspace_write_as_root";
    c.host = root_host();
    cases.push(c);

    let mut c = Case::new("network_on", Mode::WorkspaceWrite);
    c.policy.protected = vec!["/home/dev/project/.git".into()];
    c.policy.network = true;
    c.program = "/usr/bin/curl".into();
    c.argv = vec!["curl".into(), "-fsS".into(), "https://example.com/".into()];
    cases.push(c);

    // Hosts by name: the network namespace is shared (the supervisor connects the
    // command's socket to cordon's proxy on loopback) and the plan asks for the
    // proxy_only filter.
    let mut c = Case::new("allow_host", Mode::WorkspaceWrite);
    c.policy.allow_hosts = cordon::proxy::AllowList::parse(&["pypi.org", "*.pythonhosted.org"]).unwrap();
    c.program = "/usr/bin/pip".into();
    c.argv = vec!["pip".into(), "download".into(), "requests".into()];
    cases.push(c);

    // Nested roots and protected paths: shallow first, protected after every bind.
    let mut c = Case::new("nested_roots_and_protected", Mode::WorkspaceWrite);
    c.policy.writable_roots = vec!["/srv/shared".into(), "/srv/shared/deep/out".into()];
    c.policy.protected = vec![
        "/home/dev/project/vendor/lib/.git".into(),
        "/home/dev/project/.git".into(),
        "/srv/shared/tools/.git".into(),
    ];
    cases.push(c);

    // A read-only workspace under /tmp is bound read-only after the private tmpfs.
    cases.push(Case::new("read_only_workspace_under_tmp", Mode::ReadOnly).with_workspace("/tmp/checkout"));

    // A caller that keeps its session (interactive job control): no --new-session;
    // TIOCSTI and TIOCLINUX stay refused by the seccomp filter.
    let mut c = Case::new("keep_session", Mode::WorkspaceWrite);
    c.new_session = false;
    cases.push(c);

    // The workspace is /tmp itself: the host's /tmp is bound over the private one as
    // the caller asked, and TMPDIR moves to the private /dev/shm (no gap).
    let mut c = Case::new("workspace_is_tmp", Mode::WorkspaceWrite).with_workspace("/tmp");
    c.policy.protected = vec!["/tmp/.git".into()];
    cases.push(c);

    // Spaces, quotes, `;`, `=`, a component starting with `-`, a newline, non-UTF-8:
    // all fine, since each path is one argv element that bubblewrap never parses.
    // The program and its arguments may hold anything and follow `--`.
    let mut c =
        Case::new("awkward_paths", Mode::WorkspaceWrite).with_workspace(r#"/home/dev/My "Project" (copy) 'v2' a=b; c"#);
    c.policy.writable_roots =
        vec!["/home/dev/--bind / -rf".into(), "/srv/line one\nline two".into(), os(b"/srv/caf\xe9 latin-1")];
    c.policy.protected = vec![r#"/home/dev/My "Project" (copy) 'v2' a=b; c/.git"#.into()];
    c.program = "/home/dev/bin/-my tool".into();
    c.argv = vec!["-my tool".into(), "--".into(), "--ro-bind".into(), "line\none".into()];
    cases.push(c);

    // No stage helper configured (a library user who set none): bubblewrap installs
    // cordon's filter itself and the report names the fs-write gap (FIFOs).
    let mut c = Case::new("no_stage_helper", Mode::WorkspaceWrite);
    c.host.stage_helper = None;
    cases.push(c);

    // Landlock ABI 1 (or none): the helper is left out, the same gap.
    let mut c = Case::new("landlock_abi_1", Mode::ReadOnly);
    c.host.landlock_abi = 1;
    c.host.landlock_abi_cap = Some(1);
    cases.push(c);

    // The home's cache directory and a toolchain home get private layers (cordon's
    // stage mounts them, bubblewrap binds them), writable through checked Landlock
    // rules in the helper; the private global git config is copied in with `--file`
    // from an fd after the binds, and GIT_CONFIG_GLOBAL names it.
    let mut c = Case::new("home_cache_and_git_config", Mode::WorkspaceWrite);
    c.private_dirs = vec!["/home/dev/.cache".into(), "/home/dev/.cargo".into()];
    c.git_config = Some(b"[user]\n\tname = Dev\n".to_vec());
    c.policy.protected = vec!["/home/dev/project/.git".into()];
    cases.push(c);

    // A workspace inside the home's cache is the caller's tree: no tmpfs hides it. An
    // empty seed writes no file (git creates it on its first write).
    let mut c =
        Case::new("home_cache_holds_the_workspace", Mode::WorkspaceWrite).with_workspace("/home/dev/.cache/proj");
    c.private_dirs = vec!["/home/dev/.cache".into()];
    c.git_config = Some(Vec::new());
    cases.push(c);

    // Without overlayfs: fresh tmpfs mounts on /tmp, /dev/shm and the home's cache
    // (0700) made by bubblewrap, which hide the host's files there (the plan names
    // them); toolchain homes stay read-only.
    let mut c = Case::new("no_overlay", Mode::WorkspaceWrite);
    c.host.overlay = cordon::host::Overlay::Unavailable { reason: "test".into() };
    c.private_dirs = vec!["/home/dev/.cache".into(), "/home/dev/.cargo".into()];
    c.policy.writable_roots = vec!["/tmp/cordon-out".into()];
    cases.push(c);

    // No network namespace can be made (a profile refusing CLONE_NEWNET alone):
    // `--share-net`, no loopback filter, no socket diagnostics; the network stays off
    // by the `network_off` filter.
    let mut c = Case::new("no_net_namespace", Mode::WorkspaceWrite);
    c.host.net_namespace = cordon::host::NetNamespace::Unavailable { reason: "test".into() };
    cases.push(c);

    // ABI 3: no TCP rule, no scopes, no audit flag; nothing else changes.
    let mut c = Case::new("landlock_abi_3", Mode::ReadOnly);
    c.host.landlock_abi = 3;
    cases.push(c);

    cases
}

fn refused_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    cases.push(Case::new("full_access", Mode::FullAccess));

    let mut c = Case::new("relative_root", Mode::WorkspaceWrite);
    c.policy.writable_roots = vec!["build".into()];
    cases.push(c);

    let mut c = Case::new("dotdot_protected", Mode::WorkspaceWrite);
    c.policy.protected = vec!["/home/dev/project/sub/../.git".into()];
    cases.push(c);

    let mut c = Case::new("trailing_slash_root", Mode::WorkspaceWrite);
    c.policy.writable_roots = vec!["/srv/out/".into()];
    cases.push(c);

    let mut c = Case::new("nul_in_root", Mode::WorkspaceWrite);
    c.policy.writable_roots = vec![os(b"/srv/a\0b")];
    cases.push(c);

    let mut c = Case::new("relative_program", Mode::ReadOnly);
    c.program = "bin/tool".into();
    cases.push(c);

    // Only without overlayfs: a private layer shows the host's /tmp.
    let mut c = Case::new("cwd_hidden_by_private_tmp", Mode::WorkspaceWrite);
    c.cwd = "/tmp/elsewhere".into();
    c.host.overlay = cordon::host::Overlay::Unavailable { reason: "test".into() };
    cases.push(c);

    let mut c = Case::new("no_bwrap", Mode::WorkspaceWrite);
    c.host.bwrap = None;
    cases.push(c);

    let mut c = Case::new("no_namespaces", Mode::WorkspaceWrite);
    c.host.namespaces = Namespaces::Unavailable {
        reason: "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)"
            .into(),
    };
    cases.push(c);

    let mut c = Case::new("no_seccomp", Mode::ReadOnly);
    c.host.seccomp = false;
    cases.push(c);

    cases
}

fn render(case: &Case, plan: &LaunchPlan) -> String {
    let mut out = String::new();
    let host = &case.host;
    writeln!(out, "# {}: the bwrap runner's launch plan.", case.name).unwrap();
    writeln!(
        out,
        "# host: euid {} namespaces {:?}; policy: mode {} network {}",
        host.euid, host.namespaces, case.policy.mode, case.policy.network
    )
    .unwrap();
    writeln!(out, "# program cordon's stage executes: {:?}", plan.program).unwrap();
    writeln!(out, "# its argv, one element per line, Rust-quoted:").unwrap();
    for (i, arg) in plan.argv.iter().enumerate() {
        writeln!(out, "[{i}] {arg:?}").unwrap();
    }
    writeln!(out, "# cordon's stage, before bwrap runs:").unwrap();
    let ns = plan.namespaces;
    writeln!(out, "namespaces: user={} mount={} pid={} ipc={}", ns.user, ns.mount, ns.pid, ns.ipc).unwrap();
    writeln!(out, "mounts: {:?}", plan.mounts).unwrap();
    writeln!(out, "new_session: {}", plan.new_session).unwrap();
    writeln!(out, "no_new_privs: {}", plan.no_new_privs).unwrap();
    writeln!(out, "drop_capabilities: {}", plan.drop_capabilities).unwrap();
    writeln!(out, "landlock: {}", if plan.landlock.is_some() { "yes" } else { "none" }).unwrap();
    writeln!(out, "seccomp: {:?}", plan.seccomp).unwrap();
    writeln!(out, "the command's environment: {:?} (bwrap itself gets none)", plan.env_fd).unwrap();
    match &plan.stage_helper {
        Some(h) => {
            writeln!(out, "# the stage helper bubblewrap executes (Landlock, then seccomp, then the command):")
                .unwrap();
            writeln!(out, "helper: {:?} supervised {}", h.exe, h.supervised).unwrap();
            let l = &h.landlock;
            writeln!(out, "helper landlock: abi {} restrict_flags {}", l.abi, l.restrict_flags).unwrap();
            writeln!(out, "  read {:?}", l.read).unwrap();
            writeln!(out, "  write {:?}", l.write).unwrap();
            writeln!(out, "  write_in_child {:?}", l.write_in_child).unwrap();
            writeln!(out, "  write_in_child_tmpfs {:?}", l.write_in_child_tmpfs).unwrap();
            writeln!(out, "  devices {:?}", l.devices).unwrap();
            writeln!(
                out,
                "  deny_tcp {} scope_abstract_unix {} scope_signals {}",
                l.deny_tcp, l.scope_abstract_unix, l.scope_signals
            )
            .unwrap();
        }
        None => writeln!(out, "helper: none").unwrap(),
    }
    writeln!(out, "cwd: {:?}", plan.cwd).unwrap();
    for (k, v) in &plan.env {
        writeln!(out, "env: {k}={v:?}").unwrap();
    }
    writeln!(out, "needs_run_dir: {}", plan.needs_run_dir).unwrap();
    for f in &plan.seed_files {
        writeln!(out, "seed file: {:?} ({} bytes) by {:?}", f.path, f.content.len(), f.by).unwrap();
    }
    writeln!(out, "# enforcement: {:?}", plan.enforcement.level).unwrap();
    for g in &plan.enforcement.gaps {
        writeln!(out, "gap {}: {}", g.restriction, g.reason).unwrap();
    }
    out
}

// -------------------------------------------------------------- invariants

/// bubblewrap's options by arity (bubblewrap 0.8 `--help`), as far as cordon uses
/// them. Anything else starting with `-` before `--` is an error, as in bubblewrap.
fn arity(opt: &str) -> Option<usize> {
    Some(match opt {
        "--unshare-all" | "--share-net" | "--die-with-parent" | "--new-session" | "--as-pid-1" => 0,
        "--cap-drop" | "--seccomp" | "--dev" | "--proc" | "--remount-ro" | "--tmpfs" | "--perms" | "--chdir"
        | "--args" => 1,
        "--bind" | "--ro-bind" | "--bind-fd" | "--ro-bind-fd" | "--setenv" | "--file" => 2,
        _ => return None,
    })
}

/// The argv split the way bubblewrap reads it: options with their arguments, then the
/// command after `--`.
fn parse(argv: &[OsString]) -> (Vec<(String, Vec<OsString>)>, Vec<OsString>) {
    let mut opts = Vec::new();
    let mut i = 1;
    loop {
        let arg = argv[i].to_str().expect("option names are ASCII");
        i += 1;
        if arg == "--" {
            return (opts, argv[i..].to_vec());
        }
        let n = arity(arg).unwrap_or_else(|| panic!("bubblewrap would reject option {arg:?}"));
        opts.push((arg.to_string(), argv[i..i + n].to_vec()));
        i += n;
    }
}

fn check_plan_invariants(case: &Case, plan: &LaunchPlan) {
    let name = case.name;
    assert_eq!(plan.runner, RunnerKind::Bwrap);
    assert_eq!(plan.program, Path::new(BWRAP), "{name}");
    assert_eq!(plan.argv[0], BWRAP, "{name}");
    let (opts, command) = parse(&plan.argv);
    let helper = plan.stage_helper.is_some();
    let stage_possible = case.host.stage_helper.is_some() && case.host.landlock_abi >= 2;
    assert_eq!(helper, stage_possible, "{name}: the helper runs iff it exists and Landlock is usable");
    if helper {
        // bubblewrap executes the helper, which executes the command with its own argv[0].
        assert_eq!(command[0], "/proc/self/fd/6", "{name}");
        assert_eq!(command[1], "__stage", "{name}");
        let sep = command.iter().skip(2).position(|a| a == "--").expect("helper options end with --") + 2;
        assert_eq!(command[sep + 1], case.program.as_os_str(), "{name}: the program follows the helper's --");
        assert_eq!(command[sep + 2..], case.argv[..], "{name}: the whole argv follows the program");
        let h = plan.stage_helper.as_ref().unwrap();
        assert_eq!(h.landlock.read, [PathBuf::from("/")], "{name}");
        // Landlock grants no writes beneath the private tmpfs that holds a read-only
        // workspace (rules accumulate across the mount attached there, and a
        // read-only mount does not stop FIFOs), so no fs-write gap remains.
        let granted: Vec<PathBuf> = ["/tmp", "/dev/shm"]
            .iter()
            .filter(|t| case.policy.mode != Mode::ReadOnly || !case.policy.workspace.starts_with(t))
            .map(PathBuf::from)
            .collect();
        assert_eq!(h.landlock.write_in_child, granted, "{name}");
        assert!(!plan.enforcement.gaps.iter().any(|g| g.restriction == "fs-write"), "{name}: no fs-write gap");
    } else {
        assert_eq!(command[0], case.program.as_os_str(), "{name}: the program follows --");
        assert_eq!(command[1..], case.argv[1..], "{name}: the arguments follow the program");
        assert!(plan.enforcement.gaps.iter().any(|g| g.restriction == "fs-write"), "{name}: fs-write gap");
    }

    // TMPDIR is the private /tmp, or the private /dev/shm for a workspace under /tmp.
    let tmpdir = if case.policy.workspace.starts_with("/tmp") { "/dev/shm" } else { "/tmp" };
    let has = |o: &str, args: &[&str]| {
        opts.iter().any(|(k, v)| k == o && v.iter().map(|a| a.to_str().unwrap_or("")).eq(args.iter().copied()))
    };
    for (o, a) in [
        ("--unshare-all", &[][..]),
        ("--die-with-parent", &[]),
        ("--cap-drop", &["ALL"]),
        ("--setenv", &["TMPDIR", tmpdir]),
    ] {
        assert!(has(o, a), "{name}: missing {o} {a:?}");
    }
    // Without the helper bubblewrap installs cordon's filter; with it the helper does,
    // after Landlock (bubblewrap's filter would refuse nothing the helper needs, but
    // one filter is enough).
    assert_eq!(has("--seccomp", &["3"]), !helper, "{name}: --seccomp 3 iff no helper");
    // The command's environment never reaches bubblewrap's or the helper's own
    // environment: it travels in fd 7 (read by the helper, or `--args 7` for bubblewrap).
    assert_eq!(has("--args", &["7"]), !helper, "{name}: --args 7 iff no helper");
    let format = if helper { EnvFdFormat::Entries } else { EnvFdFormat::BwrapSetenv };
    assert_eq!(plan.env_fd, Some(EnvFd { child_fd: 7, format }), "{name}");
    let shares_net = case.policy.network || case.policy.network_by_proxy() || !case.host.net_namespace.available();
    assert_eq!(
        has("--share-net", &[]),
        shares_net,
        "{name}: --share-net iff network, hosts by name or no network namespace"
    );
    // The run's own loopback only in a namespace of its own, judged by a supervisor,
    // and the result says so.
    let loopback = plan.seccomp.is_some_and(|s| s.loopback && s.supervise);
    assert_eq!(loopback, !shares_net && helper, "{name}: the loopback filter iff its own namespace");
    let own = matches!(plan.local_ipc, Some(cordon::LocalIpc::OwnNamespace));
    assert_eq!(own, loopback, "{name}: the result's local_ipc follows the plan");
    let proxy = plan.seccomp.is_some_and(|s| s.proxy);
    assert_eq!(proxy, case.policy.network_by_proxy(), "{name}: the proxy_only filter iff hosts by name");
    assert_eq!(has("--new-session", &[]), case.new_session, "{name}: --new-session iff a new session");
    assert!(!has("--as-pid-1", &[]), "{name}: bubblewrap's pid 1 reaps");

    // Mount order.
    let pos = |o: &str, first: Option<&Path>| {
        opts.iter()
            .position(|(k, v)| k == o && first.is_none_or(|f| v.first().map(PathBuf::from).as_deref() == Some(f)))
            .unwrap_or_else(|| panic!("{name}: {o} {first:?} missing"))
    };
    let root = pos("--ro-bind", Some(Path::new("/")));
    let dev = pos("--dev", None);
    let proc_ = pos("--proc", None);
    let proc_ro = pos("--remount-ro", Some(Path::new("/proc")));
    assert_eq!(proc_ro, proc_ + 1, "{name}: /proc read-only right after it is mounted");
    // /tmp and /dev/shm: private layers cordon's stage made, bound by path, or
    // without overlayfs fresh tmpfs mounts (mode 1777). Then the home's directories:
    // bound layers, or without overlayfs a tmpfs on the cache alone (0700). None where
    // the policy exposes a path (the workspace under the cache, here).
    let overlay = case.host.overlay.available();
    let private = if overlay { "--bind" } else { "--tmpfs" };
    let tmpfs: Vec<usize> = opts
        .iter()
        .enumerate()
        .filter(|(_, (k, v))| k == private && (!overlay || v.first() == v.get(1)))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(opts[tmpfs[0]].1[0], "/tmp", "{name}");
    assert_eq!(opts[tmpfs[1]].1[0], "/dev/shm", "{name}");
    if !overlay {
        for t in &tmpfs[..2] {
            assert_eq!(opts[t - 1], ("--perms".to_string(), vec![OsString::from("1777")]), "{name}: tmpfs mode");
        }
    }
    let layers: Vec<PathBuf> = case
        .private_dirs
        .iter()
        .enumerate()
        .filter(|(i, h)| (overlay || *i == 0) && !case.policy.workspace.starts_with(h))
        .map(|(_, h)| h.clone())
        .collect();
    assert_eq!(tmpfs.len(), 2 + layers.len(), "{name}: {tmpfs:?}");
    for (t, h) in tmpfs[2..].iter().zip(&layers) {
        assert_eq!(opts[*t].1[0], h.as_os_str(), "{name}");
        if !overlay {
            assert_eq!(opts[t - 1], ("--perms".to_string(), vec![OsString::from("0700")]), "{name}");
        }
    }
    if let Some(h) = &plan.stage_helper {
        assert_eq!(h.landlock.write_in_child_tmpfs, layers, "{name}");
    }
    let hidden: Vec<PathBuf> = if overlay {
        Vec::new()
    } else {
        ["/tmp", "/dev/shm"].iter().map(PathBuf::from).chain(layers.iter().cloned()).collect()
    };
    assert_eq!(plan.hidden, hidden, "{name}");
    assert!(root < dev && dev < proc_ && proc_ < tmpfs[0] && tmpfs[0] < tmpfs[1], "{name}: base mounts order");

    // Binds: every source is the parent's pinned fd for the target path (never a path
    // bubblewrap re-resolves); exposed paths after the tmpfs, shallow first, each once
    // with the right flag; protected paths read-only after every writable bind.
    assert!(
        !opts
            .iter()
            .enumerate()
            .any(|(i, (k, _))| (k == "--bind" || k == "--ro-bind") && i != root && !(overlay && tmpfs.contains(&i))),
        "{name}: a bind by path other than a private layer"
    );
    let binds: Vec<(usize, &str, PathBuf)> = opts
        .iter()
        .enumerate()
        .filter(|(_, (k, _))| k == "--bind-fd" || k == "--ro-bind-fd")
        .map(|(i, (k, v))| {
            let target = PathBuf::from(&v[1]);
            let fd: i32 = v[0].to_str().and_then(|f| f.parse().ok()).unwrap_or_else(|| panic!("{name}: {k} fd"));
            assert!(
                plan.path_fds.iter().any(|(p, f, w)| *p == target && *f == fd && *w == (k == "--bind-fd")),
                "{name}: {k} {fd} {target:?} is not a pinned fd of the plan: {:?}",
                plan.path_fds
            );
            assert!(fd > SECCOMP_CHILD_FD, "{name}: {k} fd {fd} collides with stdio or the seccomp fd");
            (i, if k == "--bind-fd" { "--bind" } else { "--ro-bind" }, target)
        })
        .collect();
    assert_eq!(binds.len(), plan.path_fds.len(), "{name}: every passed fd is bound once");
    let writes = case.policy.mode >= Mode::WorkspaceWrite;
    let mut exposed: Vec<(PathBuf, bool)> = vec![(case.policy.workspace.clone(), writes)];
    exposed.extend(case.policy.writable_roots.iter().map(|r| (r.clone(), true)));
    let mut last_exposed = 0;
    let mut depth = 0;
    for (p, writable) in &exposed {
        let (i, flag, _) = binds.iter().find(|(_, _, b)| b == p).unwrap_or_else(|| panic!("{name}: {p:?} not bound"));
        assert!(*i > tmpfs[1], "{name}: {p:?} bound before the private tmpfs");
        assert_eq!(*flag, if *writable { "--bind" } else { "--ro-bind" }, "{name}: {p:?}");
        last_exposed = last_exposed.max(*i);
    }
    for (_, _, p) in binds.iter().take(exposed.len()) {
        let d = p.components().count();
        assert!(d >= depth, "{name}: exposed paths are not shallow first");
        depth = d;
    }
    // Protected paths are attached read-only by cordon's stage, over the finished view
    // (after every writable root), and come along beneath the exposed binds.
    let last_writable = plan.mounts.iter().rposition(|m| matches!(m, MountStep::Writable { .. }));
    for p in &case.policy.protected {
        let at = plan
            .mounts
            .iter()
            .position(|m| *m == MountStep::BindOver { target: p.clone(), access: BindAccess::ReadOnly })
            .unwrap_or_else(|| panic!("{name}: protected {p:?} not attached read-only by the stage"));
        assert!(Some(at) > last_writable, "{name}: protected {p:?} attached before a writable root");
        assert!(!binds.iter().any(|(_, _, b)| b == p), "{name}: protected {p:?} bound by bubblewrap");
    }
    let _ = last_exposed;
    assert_eq!(binds.len(), exposed.len(), "{name}: unexpected binds");
    let chdir = opts.iter().find(|(k, _)| k == "--chdir").map(|(_, v)| v[0].clone());
    assert_eq!(chdir.as_deref(), Some(case.cwd.as_os_str()), "{name}: --chdir");
    assert!(pos("--chdir", None) > binds.last().map_or(0, |b| b.0), "{name}: --chdir after the mounts");

    // What cordon's stage does before bubblewrap.
    assert_eq!(plan.mounts, cordon::runner::bwrap::stage_mounts(&case.input()), "{name}");
    assert_eq!(plan.mounts.first(), Some(&MountStep::MakeRootPrivate), "{name}");
    let ro = plan.mounts.iter().position(|m| *m == MountStep::ReadOnlyRecursive).expect("the tree read-only");
    for (i, m) in plan.mounts.iter().enumerate() {
        match m {
            MountStep::Clone { source, .. } => assert!(
                binds.iter().any(|(_, _, b)| b == source) && i < ro,
                "{name}: the stage clones only bound paths, before the tree goes read-only"
            ),
            MountStep::Writable { target } => assert!(
                i > ro
                    && (target == Path::new("/proc")
                        || binds.iter().any(|(_, f, b)| b == target && *f == "--bind")
                        || (overlay && tmpfs.iter().any(|t| opts[*t].1[0] == target.as_os_str()))),
                "{name}: only /proc, writable binds and private layers are writable again: {target:?}"
            ),
            // Private layers, each bound by bubblewrap and made before the tree goes
            // read-only (each is writable again after, above).
            MountStep::Staging { .. } => assert!(overlay && i < ro, "{name}: staging tmpfs"),
            MountStep::Overlay { target, .. } => assert!(
                overlay
                    && i < ro
                    && tmpfs.iter().any(|t| opts[*t].1[0] == target.as_os_str())
                    && plan.mounts[ro..].contains(&MountStep::Writable { target: target.clone() }),
                "{name}: a private layer {target:?} that bubblewrap binds"
            ),
            _ => {}
        }
    }
    assert!(
        plan.namespaces.mount && plan.namespaces.pid && !plan.namespaces.ipc,
        "{name}: cordon's init holds the run"
    );
    assert_eq!(plan.namespaces.user, case.host.namespaces == Namespaces::UserNamespace, "{name}");
    assert!(plan.landlock.is_none(), "{name}: the stage installs nothing");
    let seccomp = plan.seccomp.unwrap_or_else(|| panic!("{name}: cordon's seccomp program"));
    assert_eq!(seccomp.delivery, SeccompDelivery::Fd { child_fd: SECCOMP_CHILD_FD }, "{name}: passed, not installed");
    assert_eq!(seccomp.network, case.policy.network, "{name}");
    assert_eq!(seccomp.supervise, plan.stage_helper.as_ref().is_some_and(|h| h.supervised), "{name}");
    assert!(!plan.drop_capabilities && plan.no_new_privs, "{name}");
    assert_eq!(plan.new_session, case.new_session, "{name}");
    let mut env = vec![("TMPDIR".to_string(), tmpdir.to_string())];
    if case.git_config.is_some() {
        env.push(("GIT_CONFIG_GLOBAL".to_string(), format!("{tmpdir}/.gitconfig-run-1-1-00000000")));
    }
    assert_eq!(plan.env, env, "{name}");
    // A seeded git config is copied in by bubblewrap from an fd after every bind.
    let files: Vec<&(String, Vec<OsString>)> = opts.iter().filter(|(k, _)| k == "--file").collect();
    let seeded = case.git_config.as_ref().is_some_and(|c| !c.is_empty());
    assert_eq!(files.len(), usize::from(seeded), "{name}: {files:?}");
    for (_, v) in files {
        let fd: i32 = v[0].to_str().and_then(|f| f.parse().ok()).unwrap();
        assert!(plan.path_fds.iter().all(|(_, f, _)| *f < fd), "{name}: the seed fd follows the bind fds");
        assert_eq!(v[1], OsString::from(format!("{tmpdir}/.gitconfig-run-1-1-00000000")), "{name}");
        assert_eq!(plan.seed_files.len(), 1, "{name}");
        assert_eq!(plan.seed_files[0].by, cordon::runner::SeedBy::Fd { child_fd: fd }, "{name}");
    }
    assert!(!plan.needs_run_dir, "{name}");
    assert!(
        !plan.enforcement.gaps.iter().any(|g| g.restriction == "denial-audit"),
        "{name}: denial-audit is the landlock runner's promise"
    );
}

#[test]
fn golden_plans() {
    for case in planned_cases() {
        let plan = BwrapRunner.plan(&case.input()).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        check_plan_invariants(&case, &plan);
        check_golden(&format!("{}.plan", case.name), &render(&case, &plan));
    }
}

/// Control characters in an error message (a NUL or newline in a path) as escapes,
/// so the golden file stays one readable line per case.
fn escape_controls(msg: &str) -> String {
    msg.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

#[test]
fn golden_refusals() {
    let mut out = String::from("# Inputs the bwrap planner refuses, one per line: case: error message\n");
    for case in refused_cases() {
        match BwrapRunner.plan(&case.input()) {
            Ok(_) => panic!("{}: planned, but must be refused", case.name),
            Err(e) => writeln!(out, "{}: {}", case.name, escape_controls(&e.to_string())).unwrap(),
        }
    }
    check_golden("errors.txt", &out);
}

#[test]
fn no_golden_file_is_stale() {
    if updating() {
        return;
    }
    let mut expected: BTreeSet<String> = BTreeSet::from(["errors.txt".to_string()]);
    for case in planned_cases() {
        expected.insert(format!("{}.plan", case.name));
    }
    let dir = repo_path("tests/golden/bwrap");
    let found: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(found, expected, "golden files without a case (or cases without a file) in {}", dir.display());
}

#[test]
fn enforcement_names_only_the_real_gaps() {
    let case = Case::new("e", Mode::WorkspaceWrite);
    let e = BwrapRunner.enforcement(&case.policy, &case.host);
    let names: Vec<&str> = e.gaps.iter().map(|g| g.restriction.as_str()).collect();
    assert!(names.is_empty(), "{names:?}");
    assert_eq!(e.level, cordon::EnforcementLevel::Full);
    // A writable root that contains /dev/shm exposes the host's directory.
    let mut c = case.clone();
    c.policy.writable_roots = vec!["/dev".into()];
    let names: Vec<String> =
        BwrapRunner.enforcement(&c.policy, &c.host).gaps.into_iter().map(|g| g.restriction.name()).collect();
    assert_eq!(names, ["private-tmp"]);
    // A root merely under /tmp is fine: it is bound onto the private tmpfs.
    c.policy.writable_roots = vec!["/tmp/out".into()];
    let names: Vec<String> =
        BwrapRunner.enforcement(&c.policy, &c.host).gaps.into_iter().map(|g| g.restriction.name()).collect();
    assert!(names.is_empty(), "{names:?}");
}

#[test]
fn plan_is_pure_and_deterministic() {
    for case in planned_cases() {
        let a = BwrapRunner.plan(&case.input()).unwrap();
        let b = BwrapRunner.plan(&case.input()).unwrap();
        assert_eq!(a, b, "{}", case.name);
    }
}

// --------------------------------------------------------------- end to end

#[cfg(target_os = "linux")]
mod e2e {
    use crate::common::{find_in_path, skip_or_fail};
    use serde_json::Value;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;
    use std::process::{Command, Stdio};

    /// Whether bubblewrap runs can be tested here; skips loudly (or fails under
    /// `CORDON_MUST_ENFORCE=1`) when not.
    fn ready(test: &str) -> bool {
        let reason = if find_in_path("bwrap").is_none() {
            Some("bubblewrap (bwrap) is not installed")
        } else if std::fs::read_to_string("/proc/sys/user/max_user_namespaces").is_ok_and(|v| v.trim() == "0")
            && euid_from_proc() != 0
        {
            Some("user namespaces are disabled")
        } else {
            None
        };
        match reason {
            None => true,
            Some(r) => {
                skip_or_fail(test, r);
                false
            }
        }
    }

    fn euid_from_proc() -> u32 {
        // From /proc, so the test needs no libc call.
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| l.strip_prefix("Uid:").map(|r| r.split_whitespace().nth(1).map(str::to_string)))
            })
            .flatten()
            .and_then(|u| u.parse().ok())
            .unwrap_or(u32::MAX)
    }

    /// Who runs cordon: the current user, and `nobody` as well when that is root.
    #[derive(Clone)]
    struct Identity {
        name: String,
        /// `su` target when not the current user.
        su: Option<String>,
    }

    fn identities() -> Vec<Identity> {
        let mut ids = vec![Identity { name: "self".into(), su: None }];
        if euid_from_proc() == 0 {
            let user = std::env::var("CORDON_TEST_USER").unwrap_or_else(|_| "nobody".into());
            ids.push(Identity { name: user.clone(), su: Some(user) });
        }
        ids
    }

    /// A scratch area every identity can use: the cordon binary, a workspace (a git
    /// repository), a writable root under /tmp and a directory outside.
    struct Scratch {
        dir: PathBuf,
        cordon: PathBuf,
        ws: PathBuf,
        root_under_tmp: PathBuf,
        outside: PathBuf,
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
            let _ = std::fs::remove_dir_all(&self.root_under_tmp);
        }
    }

    fn scratch(id: &Identity, tag: &str) -> Scratch {
        let unique = format!("cordon-bwrap-e2e-{}-{tag}-{}", std::process::id(), id.name);
        let dir = PathBuf::from("/var/tmp").join(&unique);
        let root_under_tmp = PathBuf::from("/tmp").join(format!("{unique}-root"));
        let ws = dir.join("ws");
        let outside = dir.join("outside");
        for d in [&dir, &ws, &outside, &root_under_tmp] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        let cordon = dir.join("cordon");
        std::fs::copy(env!("CARGO_BIN_EXE_cordon"), &cordon).unwrap();
        std::fs::set_permissions(&cordon, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::write(ws.join(".git/config"), "original\n").unwrap();
        for p in [ws.join(".git"), ws.join(".git/config")] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(if p.is_dir() { 0o777 } else { 0o666 }))
                .unwrap();
        }
        if let Some(user) = &id.su {
            for d in [&dir, &root_under_tmp] {
                let st = Command::new("chown").args(["-R", user]).arg(d).status().unwrap();
                assert!(st.success(), "chown -R {user} {}", d.display());
            }
        }
        Scratch { dir, cordon, ws: ws.canonicalize().unwrap(), root_under_tmp, outside }
    }

    /// `cordon run --runner bwrap --best-effort --json` as `id`, in the workspace.
    fn cordon(id: &Identity, s: &Scratch, extra: &[&str], script: &str) -> Value {
        let mut args: Vec<String> =
            ["run", "--runner", "bwrap", "--best-effort", "--json", "--timeout", "30"].map(String::from).to_vec();
        args.extend(extra.iter().map(|a| a.to_string()));
        args.extend(["--", "/bin/bash", "-c", script].map(String::from));
        let mut cmd = match &id.su {
            None => {
                let mut c = Command::new(&s.cordon);
                c.args(&args);
                c
            }
            Some(user) => {
                let quoted: Vec<String> =
                    std::iter::once(s.cordon.display().to_string()).chain(args).map(|a| shell_quote(&a)).collect();
                let mut c = Command::new("su");
                c.args(["-s", "/bin/sh", user, "-c", &quoted.join(" ")]);
                c
            }
        };
        cmd.current_dir(&s.ws).env("CORDON_DISABLE_RUNNERS", "landlock").stdin(Stdio::null());
        // Tests copy the binary concurrently: a copy's write fd can linger in another
        // test's forked child for an instant, so exec may briefly see ETXTBSY.
        let mut tries = 0;
        let out = loop {
            match cmd.output() {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => break other.unwrap(),
            }
        };
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
        })
    }

    fn shell_quote(s: &str) -> String {
        format!("'{}'", s.replace('\'', r"'\''"))
    }

    fn stdout(v: &Value) -> &str {
        v["stdout"]["text"].as_str().unwrap_or("")
    }

    fn line<'a>(v: &'a Value, key: &str) -> &'a str {
        stdout(v).lines().find_map(|l| l.strip_prefix(key)).unwrap_or_else(|| panic!("no `{key}` line in {v}"))
    }

    #[test]
    fn e2e_privileges_fds_and_seccomp() {
        if !ready("e2e_privileges_fds_and_seccomp") {
            return;
        }
        for id in identities() {
            let s = scratch(&id, "priv");
            let script = "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status | tr -d '\\t'; \
                          echo fds=$(ls /proc/self/fd | tr '\\n' ' '); echo ppid_name=$(cat /proc/1/comm); \
                          unshare -U true 2>/dev/null; echo unshare=$?; \
                          (cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern) 2>&1 | grep -o 'Read-only file system' | sed 's/^/sysctl=/';";
            let v = cordon(&id, &s, &[], script);
            let who = &id.name;
            assert_eq!(v["sandbox"]["runner"], "bwrap", "{who}: {v}");
            assert_eq!(v["exit_code"], 0, "{who}: {v}");
            for cap in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
                assert_eq!(line(&v, cap), "0000000000000000", "{who}: {cap}");
            }
            assert_eq!(line(&v, "NoNewPrivs:"), "1", "{who}");
            assert_eq!(line(&v, "Seccomp:"), "2", "{who}: filter mode");
            // ls's own directory fd is the 4th; nothing else crosses.
            assert_eq!(line(&v, "fds="), "0 1 2 3", "{who}: only stdio (and ls's dir fd)");
            assert_eq!(line(&v, "ppid_name="), "bwrap", "{who}: bubblewrap's reaper is pid 1");
            assert_eq!(line(&v, "unshare="), "1", "{who}: no new namespaces inside");
            // Writing the current value back would be harmless; it must not get that far.
            assert_eq!(line(&v, "sysctl="), "Read-only file system", "{who}: /proc/sys is read-only");
        }
    }

    #[test]
    fn e2e_files_tmp_and_protected_paths() {
        if !ready("e2e_files_tmp_and_protected_paths") {
            return;
        }
        for id in identities() {
            let s = scratch(&id, "files");
            let host_tmp_file = PathBuf::from(format!("/tmp/cordon-bwrap-e2e-{}-{}", std::process::id(), id.name));
            // A host file in /tmp: readable inside, a change to it stays private.
            let marker = PathBuf::from(format!("/tmp/cordon-bwrap-e2e-{}-{}-host", std::process::id(), id.name));
            std::fs::write(&marker, "host\n").unwrap();
            std::fs::set_permissions(&marker, std::fs::Permissions::from_mode(0o666)).unwrap();
            // Owned by the identity and its group (a user namespace maps no other owner
            // or group, so a change to such a file is refused there: EOVERFLOW).
            if let Some(user) = &id.su {
                assert!(Command::new("chown").arg(format!("{user}:")).arg(&marker).status().unwrap().success());
            }
            let script = format!(
                "step() {{ n=$1; shift; if \"$@\" 2>/dev/null; then echo \"OK $n\"; else echo \"DENIED $n\"; fi; }}\n\
                 step ws_write sh -c 'echo x > in-ws'\n\
                 step root_write sh -c 'echo x > {root}/in-root'\n\
                 step outside_write sh -c 'echo x > {outside}/o'\n\
                 step outside_chmod chmod 700 {outside}\n\
                 step git_write sh -c 'echo x >> .git/config'\n\
                 step git_rename mv .git moved\n\
                 step tmp_write sh -c 'echo x > $TMPDIR/t'\n\
                 step host_tmp_write sh -c 'echo x > {host_tmp}'\n\
                 step shm_write sh -c 'echo x > /dev/shm/s'\n\
                 echo marker=$(cat {marker})\n\
                 step marker_write sh -c 'echo private > {marker}'\n\
                 echo marker_after=$(cat {marker})\n\
                 echo tmpdir=$TMPDIR\n\
                 echo tmp_listing=$(ls -A /tmp | tr '\\n' ' ')\n",
                root = s.root_under_tmp.display(),
                outside = s.outside.display(),
                host_tmp = host_tmp_file.display(),
                marker = marker.display(),
            );
            let v = cordon(&id, &s, &["--writable", s.root_under_tmp.to_str().unwrap()], &script);
            let who = &id.name;
            let out = stdout(&v);
            for (step, allowed) in [
                ("ws_write", true),
                ("root_write", true),
                ("outside_write", false),
                ("outside_chmod", false),
                ("git_write", false),
                ("git_rename", false),
                ("tmp_write", true),
                ("host_tmp_write", true),
                ("shm_write", true),
                ("marker_write", true),
            ] {
                let want = format!("{} {step}", if allowed { "OK" } else { "DENIED" });
                assert!(out.lines().any(|l| l == want), "{who}: expected `{want}` in:\n{out}");
            }
            assert_eq!(line(&v, "tmpdir="), "/tmp", "{who}");
            // The host's /tmp is readable through the run's private layer, which also
            // holds what the run made there.
            assert_eq!(line(&v, "marker="), "host", "{who}");
            assert_eq!(line(&v, "marker_after="), "private", "{who}");
            let listing: std::collections::BTreeSet<&str> = line(&v, "tmp_listing=").split_whitespace().collect();
            let root_name = s.root_under_tmp.file_name().unwrap().to_string_lossy().into_owned();
            let host_tmp_name = host_tmp_file.file_name().unwrap().to_string_lossy().into_owned();
            let marker_name = marker.file_name().unwrap().to_string_lossy().into_owned();
            for n in [root_name.as_str(), host_tmp_name.as_str(), "t", marker_name.as_str()] {
                assert!(listing.contains(n), "{who}: {n} missing from /tmp: {listing:?}");
            }
            assert_eq!(std::fs::read_to_string(&marker).unwrap(), "host\n", "{who}: the host's file changed");
            let _ = std::fs::remove_file(&marker);
            // By effect, from outside.
            assert!(s.ws.join("in-ws").is_file(), "{who}");
            assert!(s.root_under_tmp.join("in-root").is_file(), "{who}: the root under /tmp is the host's");
            assert!(!s.outside.join("o").exists(), "{who}");
            assert_eq!(std::fs::read_to_string(s.ws.join(".git/config")).unwrap(), "original\n", "{who}");
            assert!(s.ws.join(".git").is_dir() && !s.ws.join("moved").exists(), "{who}");
            assert!(!host_tmp_file.exists(), "{who}: a write to /tmp inside reached the host's /tmp");
            let mode = std::fs::metadata(&s.outside).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o777, "{who}");
        }
    }

    #[test]
    fn e2e_network_follows_the_flag() {
        if !ready("e2e_network_follows_the_flag") {
            return;
        }
        for id in identities() {
            for network in [false, true] {
                let s = scratch(&id, if network { "net-on" } else { "net-off" });
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let port = listener.local_addr().unwrap().port();
                // A pathname unix socket of an outside "daemon" (docker.sock-style).
                let sock = s.dir.join("daemon.sock");
                let daemon = std::os::unix::net::UnixListener::bind(&sock).unwrap();
                std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
                let script = format!(
                    "if echo hi > /dev/tcp/127.0.0.1/{port}; then echo connect=ok; else echo connect=denied; fi 2>&1; \
                     python3 -c 'import socket\ntry:\n s = socket.socket(socket.AF_UNIX)\n s.connect(\"{sock}\")\n print(\"unix=ok\")\nexcept OSError as e:\n print(\"unix=\"+str(e.errno))' 2>/dev/null || echo unix=nopython",
                    sock = sock.display()
                );
                let extra: &[&str] = if network { &["--network"] } else { &[] };
                let v = cordon(&id, &s, extra, &script);
                let who = format!("{} network={network}", id.name);
                assert_eq!(line(&v, "connect="), if network { "ok" } else { "denied" }, "{who}: {v}");
                let unix = line(&v, "unix=");
                if unix != "nopython" {
                    // EACCES either way: the filter's network-off rules (connect), and with
                    // the network on its host_unix_closed rules (socket): --network is IP only.
                    assert_eq!(unix, "13", "{who}: unix connect to an outside daemon");
                }
                listener.set_nonblocking(true).unwrap();
                assert_eq!(listener.accept().is_ok(), network, "{who}: a TCP connection arrived iff allowed");
                daemon.set_nonblocking(true).unwrap();
                if unix != "nopython" {
                    assert!(daemon.accept().is_err(), "{who}: a unix connection reached the outside daemon");
                }
            }
        }
    }

    #[test]
    fn e2e_nothing_outlives_the_run() {
        if !ready("e2e_nothing_outlives_the_run") {
            return;
        }
        for id in identities() {
            let s = scratch(&id, "life");
            let tag = format!("{}{}", 7000 + std::process::id() % 1000, id.name.len());
            let script =
                format!("sleep {tag}1 & setsid sleep {tag}2 & nohup sleep {tag}3 >/dev/null 2>&1 & echo started");
            let v = cordon(&id, &s, &[], &script);
            assert_eq!(v["exit_code"], 0, "{v}");
            std::thread::sleep(std::time::Duration::from_millis(300));
            let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
            let ps = String::from_utf8_lossy(&ps.stdout);
            assert!(!ps.contains(&format!("sleep {tag}")), "{}: a process outlived the run:\n{ps}", id.name);
        }
    }
}
