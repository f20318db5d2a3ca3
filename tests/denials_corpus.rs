//! The denial report (`sandbox.denied`, `sandbox.denials`) scored against a labeled
//! corpus, `tests/corpus/denials.json`, run under the real runners through the CLI.
//!
//! The corpus is written from the classes of what can happen, not from what an
//! implementation happens to see: plain refused writes, silent refusals (error
//! discarded, tolerated, reworded, localized, hidden by a pipeline or a later exit
//! code), writes through symlinks, forged look-alikes (printed lines, replayed logs,
//! self-sent signals), process-level refusals, network refusals and local IPC that is
//! allowed, and ordinary work and failures. Each entry is labeled by what really happens
//! under the mode's rules; a refusal the host alone would make is not the sandbox's
//! denial. The `about` field of the corpus documents every entry field and placeholder.
//!
//! Every entry runs once per runner ([`common::test_runners`]) and per identity (root and
//! the unprivileged `CORDON_TEST_USER` when run as root, as the security suite does),
//! with its own workspace and outside directory owned by that identity. Per runner ×
//! identity the test scores precision and recall of `denied`, the kind accuracy on true
//! denials, and the false positives among the forged look-alikes separately, prints a
//! table straight to fd 2 (not captured) and writes it, with one line per entry, to
//! `CORDON_CORPUS_REPORT` when set. It asserts precision 1.00, recall ≥ 0.95, kind
//! accuracy ≥ 0.95 and no forged positive for every combination.
//!
//! Effects are judged from outside as well, whatever the labels: a confined run never
//! changes the outside directory, the protected `.git` (`workspace-write`) or the
//! workspace (`read-only`); no loopback listener (TCP v4/v6, UDP, unix) receives
//! anything; `creates`/`absent` paths are checked.
//!
//! Entries needing a tool that is not installed are skipped and listed; under
//! `CORDON_MUST_ENFORCE=1` that fails only for tools `.ci/run` installs.
//! `CORDON_CORPUS_JOBS` sets the number of entries run in parallel (default 4);
//! `CORDON_CORPUS_ONLY` (comma-separated ids) runs a subset.
#![cfg(target_os = "linux")]

mod common;

use common::{each_identity, must_enforce, Ctx, Skip, TcpTrap, UnixTrap, PATH_ENV};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const CORPUS: &str = include_str!("corpus/denials.json");
/// The CI entry point: the tools it installs are the ones whose absence fails the run.
const CI_RUN: &str = include_str!("../.ci/run");
/// Seconds a run may take when the entry names no timeout (cordon's `--timeout`).
const DEFAULT_TIMEOUT: u64 = 20;
/// Extra seconds the harness waits beyond an entry's timeout before it calls cordon hung.
const HANG_MARGIN: u64 = 60;
/// Entries run in parallel (each runs its runner × identity combinations in turn).
const DEFAULT_JOBS: usize = 6;

/// Lines an earlier run might have logged ({OLDLOG}); replaying them is not a denial.
const OLD_LOG: &str = "\
touch: cannot touch '{OUT}/a': Read-only file system
/bin/bash: line 1: {OUT}/b: Read-only file system
Error: EROFS: read-only file system, open '{OUT}/c'
mkdir: cannot create directory '{OUT}/d': Permission denied
curl: (7) Failed to connect to 127.0.0.1 port 80 after 0 ms: Couldn't connect to server
strace: ptrace(PTRACE_TRACEME, ...): Operation not permitted
";

/// One labeled corpus entry (see the corpus's `about`).
struct Entry {
    id: String,
    class: String,
    mode: String,
    command: String,
    expect_denied: bool,
    kind: Option<String>,
    also: Vec<String>,
    needs: Vec<String>,
    setup: Option<String>,
    root_setup: Option<String>,
    identity: Option<String>,
    creates: Vec<String>,
    absent: Vec<String>,
    /// Replay the command on the host as the positive control (see [`host_control`]).
    host_control: bool,
    /// Extra paths the host control watches for the write the sandbox refuses.
    host_watch: Vec<String>,
    timeout: u64,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// Every field an entry may carry (a misspelt one would silently do nothing).
const FIELDS: &[&str] = &[
    "id",
    "class",
    "mode",
    "command",
    "expect",
    "kind",
    "also",
    "needs",
    "setup",
    "root_setup",
    "identity",
    "creates",
    "absent",
    "host_control",
    "host_watch",
    "timeout",
    "why",
];
/// The classes of event the corpus covers, each with at least [`MIN_PER_CLASS`] entries.
const CLASSES: &[&str] =
    &["refused-write", "silent", "symlink", "forged", "process", "network", "network-ok", "ordinary"];
const MIN_PER_CLASS: usize = 5;
const KINDS: &[&str] = &["file-write", "file-read", "network", "process", "other"];
const MODES: &[&str] = &["read-only", "workspace-write", "full-access"];

fn parse_corpus() -> Vec<Entry> {
    let corpus: Value = serde_json::from_str(CORPUS).expect("tests/corpus/denials.json is valid JSON");
    let entries = corpus["entries"].as_array().expect("corpus has entries");
    let mut seen = std::collections::HashSet::new();
    entries
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().map(String::from);
            let id = s("id").expect("entry has an id");
            assert!(seen.insert(id.clone()), "duplicate corpus id {id}");
            for k in e.as_object().expect("entry is an object").keys() {
                assert!(FIELDS.contains(&k.as_str()), "{id}: unknown field {k:?}");
            }
            let class = s("class").unwrap_or_default();
            assert!(CLASSES.contains(&class.as_str()), "{id}: unknown class {class:?}");
            let mode = s("mode").unwrap_or_default();
            assert!(MODES.contains(&mode.as_str()), "{id}: unknown mode {mode:?}");
            for k in s("kind").into_iter().chain(strings(&e["also"])) {
                assert!(KINDS.contains(&k.as_str()), "{id}: unknown kind {k:?}");
            }
            let expect = s("expect").unwrap_or_default();
            assert!(expect == "denied" || expect == "not-denied", "{id}: expect is {expect:?}");
            let kind = s("kind");
            assert_eq!(expect == "denied", kind.is_some(), "{id}: a denied entry names its kind, others none");
            let identity = s("identity");
            assert!(identity.as_deref().is_none_or(|i| i == "root" || i == "user"), "{id}: identity is {identity:?}");
            Entry {
                class,
                mode,
                command: s("command").unwrap_or_else(|| panic!("{id}: no command")),
                expect_denied: expect == "denied",
                kind,
                also: strings(&e["also"]),
                needs: strings(&e["needs"]),
                setup: s("setup"),
                root_setup: s("root_setup"),
                identity,
                creates: strings(&e["creates"]),
                absent: strings(&e["absent"]),
                host_control: e["host_control"].as_bool().unwrap_or(true),
                host_watch: strings(&e["host_watch"]),
                timeout: e["timeout"].as_u64().unwrap_or(DEFAULT_TIMEOUT),
                id,
            }
        })
        .collect()
}

/// Tools `.ci/run` makes sure of (`command -v TOOL ... || need+=(...)`), plus python3
/// (checked there by path).
fn ci_tools() -> Vec<String> {
    let mut tools: Vec<String> = CI_RUN
        .lines()
        .filter(|l| l.contains("need+="))
        .filter_map(|l| l.split("command -v ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(String::from)
        .collect();
    tools.push("python3".into());
    tools
}

/// Whether `tool` is on the PATH the confined command gets.
fn have(tool: &str) -> bool {
    PATH_ENV.split(':').any(|d| Path::new(d).join(tool).is_file())
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Verdict {
    Tp,
    Fn,
    Fp,
    Tn,
}

/// One entry run under one runner as one identity.
struct Outcome {
    entry: usize,
    runner: String,
    identity: String,
    verdict: Verdict,
    kind_ok: bool,
    denials: String,
    /// The end of the command's stderr, for judging a label by eye.
    stderr: String,
    exit: String,
}

/// Characters of stderr kept per run in the report.
const STDERR_TAIL: usize = 160;

fn tail(s: &str) -> String {
    let s = s.trim_end().replace('\n', " | ");
    let n = s.chars().count();
    s.chars().skip(n.saturating_sub(STDERR_TAIL)).collect()
}

/// One entry's directories, prepared on the host as the identity: the workspace (a git
/// repository with `file.txt`), the outside directory (`existing`, `old.log`), the
/// entry's setup.
struct Tree {
    ws: PathBuf,
    out: PathBuf,
    oldlog: PathBuf,
    port: String,
    sock: PathBuf,
    home: PathBuf,
}

impl Tree {
    fn prepare(ctx: &Ctx, e: &Entry, ws: &Path, out: &Path, traps: &Traps) -> Tree {
        ctx.mkdir(ws);
        ctx.mkdir(out);
        let git = "git init -q -b main . && echo 'a line' > file.txt && git add file.txt && \
                   git -c user.name=t -c user.email=t@t commit -q -m init";
        host_sh_in(ctx, ws, git);
        ctx.file(&out.join("existing"), "a original\n");
        let oldlog = ctx.file(&out.join("old.log"), &OLD_LOG.replace("{OUT}", &out.display().to_string()));
        let tree = Tree {
            ws: ws.to_path_buf(),
            out: out.to_path_buf(),
            oldlog,
            port: traps.tcp.port_s(),
            sock: traps.unix_path.clone(),
            home: ctx.id.home.clone(),
        };
        if let Some(script) = &e.root_setup {
            let st = Command::new("/bin/sh").arg("-c").arg(tree.subst(script)).current_dir(ws).status().unwrap();
            assert!(st.success(), "{}: root_setup failed: {script}", e.id);
        }
        if let Some(script) = &e.setup {
            host_sh_in(ctx, ws, &tree.subst(script));
        }
        tree
    }

    fn subst(&self, s: &str) -> String {
        s.replace("{WS}", &self.ws.display().to_string())
            .replace("{OUT}", &self.out.display().to_string())
            .replace("{OLDLOG}", &self.oldlog.display().to_string())
            .replace("{PORT}", &self.port)
            .replace("{SOCK}", &self.sock.display().to_string())
            .replace("{HOME}", &self.home.display().to_string())
    }

    /// What a run in `mode` may not change: outside, and the workspace (`read-only`) or
    /// its protected `.git` (`workspace-write`).
    fn watched(&self, mode: &str) -> Vec<PathBuf> {
        match mode {
            "read-only" => vec![self.out.clone(), self.ws.clone()],
            "workspace-write" => vec![self.out.clone(), self.ws.join(".git")],
            _ => vec![],
        }
    }
}

/// `sh -c SCRIPT` on the host as the identity in `dir`; panics if it fails.
fn host_sh_in(ctx: &Ctx, dir: &Path, script: &str) {
    let out = ctx.host_cmd("/bin/sh").arg("-c").arg(script).current_dir(dir).output().unwrap();
    assert!(
        out.status.success(),
        "host setup `{script}` failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The positive control behind a `denied` label: the same command, run directly on the
/// host as the identity in a twin tree, does what the sandbox must refuse — otherwise
/// the host alone would refuse it, or the command never tries, and the label is wrong.
/// For `file-write` the host run must change the outside directory, the protected
/// `.git` (`workspace-write`), the workspace (`read-only`) or a `host_watch` path; for
/// `process` it must succeed. Entries naming `absent` paths (shared host places) or
/// `"host_control": false` (e.g. a real mount) are not replayed; network entries neither
/// (the listeners answer nothing, so a client on the host would wait out its timeout).
/// `Some(problem)` when the control fails.
fn host_control(ctx: &Ctx, e: &Entry) -> Option<String> {
    let kind = e.kind.as_deref().filter(|k| *k == "file-write" || *k == "process")?;
    if !e.expect_denied || !e.absent.is_empty() || !e.host_control {
        return None;
    }
    let twin = ctx.root.join("host");
    let traps = Traps::new_at(ctx, &twin.join("trap.sock"));
    let tree = Tree::prepare(ctx, e, &twin.join("ws"), &twin.join("outside"), &traps);
    let mut watched = tree.watched(&e.mode);
    watched.extend(e.host_watch.iter().map(|p| PathBuf::from(tree.subst(p))));
    let before: Vec<_> = watched.iter().map(|p| snapshot(p)).collect();
    let status = ctx
        .host_cmd("/bin/bash")
        .arg("-c")
        .arg(tree.subst(&e.command))
        .current_dir(&tree.ws)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let status = match status {
        Ok(s) => s,
        Err(err) => return Some(format!("host control did not run: {err}")),
    };
    if kind == "process" {
        return (!status.success()).then(|| {
            format!("host control: on the host the command fails too ({status}), so the label `denied` is wrong")
        });
    }
    let changed = watched.iter().zip(&before).any(|(p, b)| !diff(b, &snapshot(p)).is_empty());
    (!changed).then(|| {
        format!(
            "host control: run on the host the command changes nothing in {watched:?}, so the label `denied` is wrong"
        )
    })
}

#[derive(Default)]
struct Shared {
    outcomes: Vec<Outcome>,
    /// Effects seen from outside that a confined run must never have.
    effects: Vec<String>,
    /// The harness could not judge an entry (setup failed, cordon refused, ...).
    errors: Vec<String>,
    /// (entry id, reason)
    skipped: Vec<(String, String)>,
}

/// Every path below `root` (not following links) with its metadata and content.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else { continue };
        let content = if m.file_type().is_symlink() {
            format!("-> {:?}", std::fs::read_link(&p).ok())
        } else if m.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
            String::new()
        } else if m.is_file() {
            format!("{:?}", String::from_utf8_lossy(&std::fs::read(&p).unwrap_or_default()))
        } else {
            String::from("special")
        };
        let desc = format!(
            "mode {:o} uid {} gid {} ino {} nlink {} mtime {}.{} ctime {}.{} {content}",
            m.mode(),
            m.uid(),
            m.gid(),
            m.ino(),
            m.nlink(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec()
        );
        out.insert(p, desc);
    }
    out
}

fn diff(before: &BTreeMap<PathBuf, String>, after: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let mut d = vec![];
    for (p, b) in before {
        match after.get(p) {
            None => d.push(format!("{} removed", p.display())),
            Some(a) if a != b => d.push(format!("{} changed: {b} -> {a}", p.display())),
            _ => {}
        }
    }
    d.extend(after.keys().filter(|p| !before.contains_key(*p)).map(|p| format!("{} created", p.display())));
    d
}

/// Listeners the confined command might reach; none may receive anything.
struct Traps {
    tcp: TcpTrap,
    tcp6: Option<TcpListener>,
    udp: Option<UdpSocket>,
    unix: UnixTrap,
    unix_path: PathBuf,
}

impl Traps {
    fn new(ctx: &Ctx) -> Traps {
        Traps::new_at(ctx, &ctx.root.join("trap.sock"))
    }

    fn new_at(ctx: &Ctx, unix_path: &Path) -> Traps {
        let tcp = TcpTrap::v4();
        let tcp6 = TcpListener::bind(("::1", tcp.port)).ok();
        if let Some(l) = &tcp6 {
            l.set_nonblocking(true).unwrap();
        }
        let udp = UdpSocket::bind(("127.0.0.1", tcp.port)).ok();
        if let Some(u) = &udp {
            u.set_nonblocking(true).unwrap();
        }
        if let Some(dir) = unix_path.parent() {
            ctx.mkdir(dir);
        }
        let unix = UnixTrap::stream_path(ctx, unix_path);
        Traps { tcp, tcp6, udp, unix, unix_path: unix_path.to_path_buf() }
    }

    /// What reached a listener. The run is over, so a connection or datagram is already
    /// queued: no waiting.
    fn reached(&self) -> Vec<&'static str> {
        let mut hit = vec![];
        if self.tcp.connected_within(0) {
            hit.push("the IPv4 TCP listener");
        }
        if self.tcp6.as_ref().is_some_and(|l| l.accept().is_ok()) {
            hit.push("the IPv6 TCP listener");
        }
        if self.udp.as_ref().is_some_and(|u| u.recv_from(&mut [0u8; 64]).is_ok()) {
            hit.push("the UDP socket");
        }
        if self.unix.touched_within(0) {
            hit.push("the unix socket");
        }
        hit
    }
}

/// `cordon run --json` as the identity, bounded by the entry's timeout plus a margin.
fn run_cordon(ctx: &Ctx, e: &Entry, command: &str) -> Result<Value, String> {
    let mut cmd = Command::new(&ctx.suite.cordon);
    cmd.env_clear().env("PATH", PATH_ENV).env("LANG", "C").env("USER", &ctx.id.name);
    ctx.id.apply(&mut cmd);
    cmd.args(["run", "--json", "--mode", &e.mode, "--timeout", &e.timeout.to_string()]);
    if e.mode != "full-access" {
        cmd.args(["--runner", &ctx.runner]);
    }
    cmd.arg("--cwd").arg(&ctx.ws).arg("-c").arg(command);
    cmd.current_dir(&ctx.ws).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = cmd.spawn().map_err(|err| format!("spawn cordon: {err}"))?;
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = vec![];
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + Duration::from_secs(e.timeout + HANG_MARGIN);
    loop {
        if child.try_wait().map_err(|err| err.to_string())?.is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("cordon did not finish within {}s", e.timeout + HANG_MARGIN));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = reader.join().unwrap();
    serde_json::from_slice(&out).map_err(|err| format!("not JSON ({err}): {}", String::from_utf8_lossy(&out)))
}

fn identity_label(ctx: &Ctx) -> &'static str {
    if ctx.id.is_root() {
        "root"
    } else {
        "user"
    }
}

fn run_entry(ctx: &Ctx, idx: usize, e: &Entry, shared: &Mutex<Shared>) -> Result<(), Skip> {
    let who = identity_label(ctx);
    if e.identity.as_deref().is_some_and(|i| i != who) {
        return Ok(());
    }
    let tag = format!("{} [{} as {who}]", e.id, ctx.runner);
    // SAFETY: geteuid has no preconditions and cannot fail.
    let am_root = unsafe { libc::geteuid() } == 0;
    if e.root_setup.is_some() && !am_root {
        shared.lock().unwrap().skipped.push((tag, "root_setup needs the harness to run as root".into()));
        return Ok(());
    }

    let traps = Traps::new(ctx);
    let tree = Tree::prepare(ctx, e, &ctx.ws, &ctx.outside, &traps);
    let subst = |s: &str| tree.subst(s);

    let confined = e.mode != "full-access";
    // What a confined run must leave untouched.
    let watched = tree.watched(&e.mode);
    let before: Vec<_> = watched.iter().map(|p| snapshot(p)).collect();

    let command = subst(&e.command);
    let j = match run_cordon(ctx, e, &command) {
        Ok(j) => j,
        Err(err) => {
            shared.lock().unwrap().errors.push(format!("{tag}: {err}"));
            return Ok(());
        }
    };
    if let Some(err) = j.get("error") {
        if err["code"] == "SANDBOX_UNAVAILABLE" {
            return Err(Skip(format!("cordon reports SANDBOX_UNAVAILABLE: {err}")));
        }
        shared.lock().unwrap().errors.push(format!("{tag}: cordon refused to run: {j}"));
        return Ok(());
    }

    let mut effects = vec![];
    if confined {
        for (p, b) in watched.iter().zip(&before) {
            effects.extend(diff(b, &snapshot(p)).into_iter().map(|d| format!("{tag}: {d}")));
        }
        effects.extend(traps.reached().into_iter().map(|t| format!("{tag}: {t} was reached")));
    }
    for p in &e.creates {
        let p = subst(p);
        if std::fs::symlink_metadata(&p).is_err() {
            effects.push(format!("{tag}: {p} should exist after the run (the ordinary work did not happen)"));
        }
    }
    for p in &e.absent {
        let p = subst(p);
        if std::fs::symlink_metadata(&p).is_ok() {
            effects.push(format!("{tag}: {p} exists after the run"));
            let _ = std::fs::remove_file(&p);
        }
    }

    // The host replay does not depend on the runner: once per identity.
    let first_runner = common::test_runners().first() == Some(&ctx.runner);
    if let Some(problem) = first_runner.then(|| host_control(ctx, e)).flatten() {
        effects.push(format!("{tag}: {problem}"));
    }

    let sandbox = &j["sandbox"];
    let list = sandbox["denials"].as_array().cloned().unwrap_or_default();
    let denied = sandbox["denied"].as_bool().unwrap_or(false) || !list.is_empty();
    let kinds: Vec<&str> = list.iter().map(|d| d["kind"].as_str().unwrap_or("")).collect();
    let verdict = match (e.expect_denied, denied) {
        (true, true) => Verdict::Tp,
        (true, false) => Verdict::Fn,
        (false, true) => Verdict::Fp,
        (false, false) => Verdict::Tn,
    };
    let kind_ok = e
        .kind
        .as_deref()
        .is_some_and(|want| kinds.contains(&want) && kinds.iter().all(|k| *k == want || e.also.iter().any(|a| a == k)));
    let exit = match (j["exit_code"].as_i64(), &j["signal"], j["timed_out"].as_bool()) {
        (_, _, Some(true)) => "timeout".to_string(),
        (Some(c), _, _) => format!("exit {c}"),
        (None, s, _) => format!("signal {s}"),
    };
    let mut sh = shared.lock().unwrap();
    sh.effects.extend(effects);
    sh.outcomes.push(Outcome {
        entry: idx,
        runner: ctx.runner.clone(),
        identity: who.into(),
        verdict,
        kind_ok,
        denials: serde_json::to_string(&sandbox["denials"]).unwrap(),
        stderr: tail(j["stderr"]["text"].as_str().unwrap_or("")),
        exit,
    });
    Ok(())
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

/// Scores of one runner × identity.
#[derive(Default)]
struct Score {
    tp: usize,
    fneg: usize,
    fp: usize,
    tn: usize,
    kind_ok: usize,
    forged: usize,
    forged_fp: usize,
}

impl Score {
    fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }
    fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fneg)
    }
    fn kind(&self) -> f64 {
        ratio(self.kind_ok, self.tp)
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

/// Writes straight to fd 2: libtest captures the print macros, not the raw stream.
fn to_terminal(text: &str) {
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// The corpus itself, without running anything: known fields, classes, kinds and modes,
/// unique ids, a kind on every denied entry, and every class covered.
#[test]
fn corpus_is_well_formed() {
    let entries = parse_corpus();
    assert!(entries.len() >= 100, "the corpus has only {} entries", entries.len());
    for c in CLASSES {
        let n = entries.iter().filter(|e| e.class == *c).count();
        assert!(n >= MIN_PER_CLASS, "class {c} has {n} entries, want at least {MIN_PER_CLASS}");
    }
    for e in &entries {
        assert!(!e.command.trim().is_empty(), "{}: empty command", e.id);
        assert!(e.expect_denied || e.also.is_empty(), "{}: `also` on a not-denied entry", e.id);
    }
}

#[test]
fn denial_report_corpus() {
    let test = "denial_report_corpus";
    let entries = parse_corpus();
    let only: Option<Vec<String>> =
        std::env::var("CORDON_CORPUS_ONLY").ok().map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let ci = ci_tools();
    let shared = Mutex::new(Shared::default());
    let mut missing_ci = vec![];
    let mut todo = vec![];
    for (i, e) in entries.iter().enumerate() {
        if only.as_ref().is_some_and(|o| !o.contains(&e.id)) {
            continue;
        }
        if let Some(t) = e.needs.iter().find(|t| !have(t)) {
            if ci.contains(t) {
                missing_ci.push(format!("{} needs `{t}`, which .ci/run installs", e.id));
            }
            shared.lock().unwrap().skipped.push((e.id.clone(), format!("`{t}` is not installed")));
            continue;
        }
        todo.push(i);
    }
    if let Err(Skip(why)) = common::suite() {
        common::skip_or_fail(test, &why);
        return;
    }

    let jobs = std::env::var("CORDON_CORPUS_JOBS").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_JOBS).max(1);
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                while let Some(&i) = todo.get(next.fetch_add(1, Ordering::SeqCst)) {
                    let e = &entries[i];
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        each_identity(&format!("corpus-{}", e.id), |ctx| run_entry(ctx, i, e, &shared));
                    }));
                    if let Err(p) = r {
                        let mut sh = shared.lock().unwrap_or_else(|poison| poison.into_inner());
                        sh.errors.push(format!("{}: {}", e.id, panic_text(p.as_ref())));
                    }
                }
            });
        }
    });
    let sh = shared.into_inner().unwrap_or_else(|poison| poison.into_inner());

    // Score per runner × identity, in a stable order.
    let mut combos: Vec<(String, String)> = vec![];
    for o in &sh.outcomes {
        if !combos.contains(&(o.runner.clone(), o.identity.clone())) {
            combos.push((o.runner.clone(), o.identity.clone()));
        }
    }
    let order = common::test_runners();
    combos.sort_by_key(|(r, i)| (order.iter().position(|x| x == r), i.clone()));
    let mut classes: Vec<&str> = entries.iter().map(|e| e.class.as_str()).collect();
    classes.dedup();
    classes.sort();
    classes.dedup();

    let mut table = String::new();
    let mut detail = String::new();
    let mut failures = vec![];
    let mut below_target = vec![];
    table.push_str(&format!(
        "denial corpus: {} entries, {} runs\n{:<9} {:<5} {:>4} {:>4} {:>4} {:>4} {:>4} {:>9} {:>7} {:>6} {:>10}\n",
        entries.len(),
        sh.outcomes.len(),
        "runner",
        "who",
        "runs",
        "TP",
        "FN",
        "FP",
        "TN",
        "precision",
        "recall",
        "kind",
        "forged-FP"
    ));
    let mut class_rows = String::new();
    for (runner, who) in &combos {
        let mut sc = Score::default();
        let mut outs: Vec<&Outcome> =
            sh.outcomes.iter().filter(|o| &o.runner == runner && &o.identity == who).collect();
        outs.sort_by_key(|o| o.entry);
        let mut per_class: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for o in &outs {
            let e = &entries[o.entry];
            let forged = e.class == "forged";
            match o.verdict {
                Verdict::Tp => sc.tp += 1,
                Verdict::Fn => sc.fneg += 1,
                Verdict::Fp => sc.fp += 1,
                Verdict::Tn => sc.tn += 1,
            }
            if o.verdict == Verdict::Tp && o.kind_ok {
                sc.kind_ok += 1;
            }
            if forged {
                sc.forged += 1;
                if o.verdict == Verdict::Fp {
                    sc.forged_fp += 1;
                }
            }
            let right = matches!(o.verdict, Verdict::Tn) || (o.verdict == Verdict::Tp && o.kind_ok);
            let c = per_class.entry(e.class.as_str()).or_default();
            c.1 += 1;
            if !right {
                c.0 += 1;
            }
            let mark = match (o.verdict, o.kind_ok) {
                (Verdict::Tp, false) => "KIND",
                (Verdict::Tp, true) => "TP",
                (Verdict::Fn, _) => "FN",
                (Verdict::Fp, _) => "FP",
                (Verdict::Tn, _) => "TN",
            };
            let line = format!(
                "{mark:<4} {runner}/{who} {:<38} {:<14} {:<15} want={:<10} {:<10} denials={} stderr={:?}",
                e.id,
                e.class,
                e.mode,
                e.kind.as_deref().unwrap_or("none"),
                o.exit,
                o.denials,
                o.stderr
            );
            if !right {
                failures.push(line.clone());
            }
            detail.push_str(&line);
            detail.push('\n');
        }
        table.push_str(&format!(
            "{runner:<9} {who:<5} {:>4} {:>4} {:>4} {:>4} {:>4} {:>9.3} {:>7.3} {:>6.3} {:>6}/{:<3}\n",
            outs.len(),
            sc.tp,
            sc.fneg,
            sc.fp,
            sc.tn,
            sc.precision(),
            sc.recall(),
            sc.kind(),
            sc.forged_fp,
            sc.forged
        ));
        let row: Vec<String> =
            classes.iter().filter_map(|c| per_class.get(c).map(|(w, n)| format!("{c} {w}/{n}"))).collect();
        class_rows.push_str(&format!("  {runner}/{who} wrong by class: {}\n", row.join(", ")));
        let ok = sc.precision() >= 1.0 && sc.recall() >= 0.95 && sc.kind() >= 0.95 && sc.forged_fp == 0;
        if !ok {
            below_target.push(format!(
                "{runner}/{who}: precision {:.3} (want 1.000), recall {:.3} (want >= 0.95), kind {:.3} (want >= 0.95), forged positives {}",
                sc.precision(),
                sc.recall(),
                sc.kind(),
                sc.forged_fp
            ));
        }
    }
    table.push_str(&class_rows);
    if !sh.skipped.is_empty() {
        let list: Vec<String> = sh.skipped.iter().map(|(id, why)| format!("{id} ({why})")).collect();
        table.push_str(&format!("skipped: {}\n", list.join(", ")));
    }
    let mut report = table;
    if !failures.is_empty() {
        report.push_str(&format!("wrong ({}):\n{}\n", failures.len(), failures.join("\n")));
    }
    if !below_target.is_empty() {
        report.push_str(&format!("below target:\n{}\n", below_target.join("\n")));
    }
    to_terminal(&report);
    println!("{detail}");
    if let Ok(path) = std::env::var("CORDON_CORPUS_REPORT") {
        std::fs::write(&path, format!("{report}\nevery run:\n{detail}"))
            .unwrap_or_else(|err| panic!("write CORDON_CORPUS_REPORT={path}: {err}"));
    }

    assert!(sh.errors.is_empty(), "the harness could not judge some entries:\n{}", sh.errors.join("\n"));
    assert!(sh.effects.is_empty(), "a confined run had an effect outside:\n{}", sh.effects.join("\n"));
    assert!(
        !must_enforce() || missing_ci.is_empty(),
        "CORDON_MUST_ENFORCE=1 but tools .ci/run installs are missing:\n{}",
        missing_ci.join("\n")
    );
    assert!(!combos.is_empty() || todo.is_empty(), "no runner × identity ran");
    assert!(below_target.is_empty(), "denial report below target:\n{report}");
}
