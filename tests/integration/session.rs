//! Session overrides: the event log, the pure fold, narrowing, and the guard that keeps
//! governing files out of the runs they govern.
//!
//! What it covers:
//! - properties over random event sequences (a small xorshift generator, fixed seeds so
//!   failures reproduce): the fold is the last `set-mode` or the default, deterministic,
//!   a homomorphism over concatenation (folding a log in two steps equals folding it
//!   once), and unaffected by what is appended after a prefix beyond its own events;
//!   narrowing never widens and is the ladder's `min`;
//! - the JSON-lines format round trip and append-only growth through the CLI
//!   (`cordon session set-mode` / `show`);
//! - `cordon run --session`: the run's mode is the session's, `--mode` only narrows it,
//!   a missing or corrupt session fails closed;
//! - session files inside a writable root (workspace in workspace-write, a `--writable`
//!   root, through a symlink, not yet existing, hard-linked) are refused with an error
//!   naming both paths, before anything runs.
//!
//! Runs that need confinement print `SKIP <test>: <reason>` when this host cannot
//! enforce the modes, and fail instead when `CORDON_MUST_ENFORCE=1`.

use crate::common::cli::{confined_unavailable, CliOut};
use crate::common::{skip_or_fail, temp_dir};
use cordon::policy::{resolve_policy, PolicyRequest};
use cordon::session::{self, GoverningFileError, GoverningFiles, GoverningKind, SessionChange, SessionEvent};
use cordon::Mode;
use serde_json::Value;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

// ------------------------------------------------------------------ properties

/// xorshift64*: tiny, deterministic, good enough to shuffle test inputs.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn mode(&mut self) -> Mode {
        Mode::ALL[self.below(3) as usize]
    }

    fn events(&mut self) -> Vec<SessionEvent> {
        let n = self.below(12);
        (0..n)
            .map(|i| SessionEvent { at: format!("t{i}"), change: SessionChange::SetMode { mode: self.mode() } })
            .collect()
    }
}

const SEEDS: std::ops::Range<u64> = 1..2_001;

#[test]
fn fold_is_the_last_set_mode_or_the_default() {
    for seed in SEEDS {
        let mut rng = XorShift(seed);
        let (default, events) = (rng.mode(), rng.events());
        let expected = events
            .iter()
            .rev()
            .find_map(|e| match e.change {
                SessionChange::SetMode { mode } => Some(mode),
                SessionChange::Grant { .. } => None,
            })
            .unwrap_or(default);
        assert_eq!(session::effective_mode(default, &events), expected, "seed {seed}");
        assert_eq!(session::effective_mode(default, &events), session::effective_mode(default, &events.clone()));
    }
}

#[test]
fn fold_over_a_concatenation_is_a_fold_of_folds() {
    for seed in SEEDS {
        let mut rng = XorShift(seed);
        let (default, a, b) = (rng.mode(), rng.events(), rng.events());
        let whole: Vec<SessionEvent> = a.iter().chain(&b).cloned().collect();
        let stepwise = session::effective_mode(session::effective_mode(default, &a), &b);
        assert_eq!(session::effective_mode(default, &whole), stepwise, "seed {seed}");
    }
}

#[test]
fn narrowing_never_widens() {
    for seed in SEEDS {
        let mut rng = XorShift(seed);
        let (default, events) = (rng.mode(), rng.events());
        let sess = session::effective_mode(default, &events);
        let requested = if rng.below(4) == 0 { None } else { Some(rng.mode()) };
        let run = session::narrow(sess, requested);
        assert!(run <= sess, "seed {seed}: {run} wider than the session's {sess}");
        if let Some(r) = requested {
            assert!(run <= r, "seed {seed}: {run} wider than requested {r}");
            assert_eq!(run, r.min(sess));
        } else {
            assert_eq!(run, sess);
        }
        assert_eq!(session::narrow(run, requested), run, "idempotent");
    }
}

#[test]
fn log_text_round_trips_and_parses_to_the_same_fold() {
    for seed in SEEDS.take(200) {
        let mut rng = XorShift(seed);
        let events = rng.events();
        let text: String = events.iter().map(|e| serde_json::to_string(e).unwrap() + "\n").collect();
        let parsed = session::parse_events(Path::new("s"), &text).unwrap();
        assert_eq!(parsed, events);
    }
}

// ------------------------------------------------------------------ CLI helpers

/// True when the case should return early (after a loud skip, or a failure under
/// `CORDON_MUST_ENFORCE=1`): this host cannot enforce the confined modes.
fn skip(test: &str) -> bool {
    match confined_unavailable() {
        None => false,
        Some(reason) => {
            skip_or_fail(test, &reason);
            true
        }
    }
}

struct Dirs {
    _root: TempDir,
    ws: PathBuf,
    gov: PathBuf,
}

fn dirs(tag: &str) -> Dirs {
    let root = temp_dir(&format!("session-{tag}"));
    let base = root.path().canonicalize().unwrap();
    let (ws, gov) = (base.join("ws"), base.join("gov"));
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&gov).unwrap();
    Dirs { _root: root, ws, gov }
}

fn cordon(args: &[&str], cwd: &Path) -> CliOut {
    crate::common::cli::cordon(args, cwd, &[])
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

// ------------------------------------------------------------------ CLI

#[test]
fn set_mode_appends_and_show_reports_the_fold() {
    let d = dirs("cli");
    let file = d.gov.join("session.jsonl");
    assert_eq!(cordon(&["session", "show", s(&file)], &d.ws).code, 1, "a missing session is an error");
    let mut previous = Vec::new();
    for mode in ["read-only", "full-access", "workspace-write", "read-only"] {
        assert_eq!(cordon(&["session", "set-mode", s(&file), mode], &d.ws).code, 0);
        let now = std::fs::read(&file).unwrap();
        assert!(now.starts_with(&previous) && now.len() > previous.len(), "append-only");
        previous = now;
    }
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 4);
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "set-mode");
    assert_eq!(last["mode"], "read-only");
    assert!(last["at"].as_str().unwrap().ends_with('Z'));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);

    let v = cordon(&["session", "show", s(&file), "--json"], &d.ws).json();
    assert_eq!(v["effective_mode"], "read-only");
    assert_eq!(v["default_mode"], "workspace-write");
    let modes: Vec<&str> = v["events"].as_array().unwrap().iter().map(|e| e["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["read-only", "full-access", "workspace-write", "read-only"]);
    let text = cordon(&["session", "show", s(&file)], &d.ws).stdout;
    assert!(text.starts_with("effective mode: read-only\n") && text.contains("set-mode full-access"), "{text}");

    assert_eq!(cordon(&["session", "set-mode", s(&file), "root"], &d.ws).code, 2, "unknown mode");
}

#[test]
fn corrupt_sessions_fail_closed() {
    let d = dirs("corrupt");
    let file = d.gov.join("session.jsonl");
    std::fs::write(&file, "{\"at\":\"x\",\"event\":\"set-mode\",\"mode\":\"read-only\"}\n{\"event\":\"widen\"}\n")
        .unwrap();
    let out = cordon(&["run", "--json", "--session", s(&file), "--", "true"], &d.ws);
    assert_eq!(out.code, 125);
    assert_eq!(out.json()["error"]["code"], "SESSION_MALFORMED");
    assert!(out.json()["error"]["message"].as_str().unwrap().contains("line 2"));
    let before = std::fs::read(&file).unwrap();
    assert_eq!(cordon(&["session", "set-mode", s(&file), "read-only"], &d.ws).code, 1, "no append to a corrupt log");
    assert_eq!(std::fs::read(&file).unwrap(), before);
    let out = cordon(&["run", "--json", "--session", s(&d.gov.join("typo.jsonl")), "--", "true"], &d.ws);
    assert_eq!(out.json()["error"]["code"], "SESSION_NOT_FOUND", "a typo never falls back to the default");
}

#[test]
fn run_uses_the_session_mode_and_mode_only_narrows() {
    if skip("run_uses_the_session_mode_and_mode_only_narrows") {
        return;
    }
    let d = dirs("run");
    let file = d.gov.join("session.jsonl");
    let write = |name: &str| format!("echo x > {name}");
    // Session read-only: no write, even when --mode asks for more.
    cordon(&["session", "set-mode", s(&file), "read-only"], &d.ws);
    for (extra, name) in [(None, "a"), (Some("workspace-write"), "b"), (Some("full-access"), "c")] {
        let mut args = vec!["run", "--json", "--session", s(&file)];
        if let Some(m) = extra {
            args.extend(["--mode", m]);
        }
        let cmd = write(name);
        args.extend(["-c", &cmd]);
        let out = cordon(&args, &d.ws);
        assert_eq!(out.json()["sandbox"]["mode"], "read-only", "{extra:?}");
        assert!(!d.ws.join(name).exists(), "{extra:?}: read-only must not write");
        if extra.is_some() {
            assert!(out.stderr.contains("narrowed to the session's mode read-only"), "{}", out.stderr);
        }
    }
    // Session workspace-write: --mode read-only narrows it.
    cordon(&["session", "set-mode", s(&file), "workspace-write"], &d.ws);
    let out = cordon(&["run", "--json", "--session", s(&file), "-c", &write("d")], &d.ws);
    assert_eq!(out.json()["sandbox"]["mode"], "workspace-write");
    assert!(d.ws.join("d").exists());
    let out = cordon(&["run", "--json", "--session", s(&file), "--mode", "read-only", "-c", &write("e")], &d.ws);
    assert_eq!(out.json()["sandbox"]["mode"], "read-only");
    assert!(!d.ws.join("e").exists());
}

#[test]
fn session_files_inside_a_writable_root_are_refused() {
    let d = dirs("guard");
    let extra = d.gov.join("extra");
    std::fs::create_dir(&extra).unwrap();
    let marker = d.gov.join("ran");
    let cmd = format!("echo > '{}'", marker.display());
    let in_ws = d.ws.join("session.jsonl");
    cordon(&["session", "set-mode", s(&in_ws), "workspace-write"], &d.ws);
    let in_extra = extra.join("session.jsonl");
    cordon(&["session", "set-mode", s(&in_extra), "workspace-write"], &d.ws);
    let link = d.gov.join("link.jsonl"); // outside, but pointing into the workspace
    std::os::unix::fs::symlink(&in_ws, &link).unwrap();

    let cases: Vec<(Vec<&str>, &Path)> = vec![
        (vec!["--session", s(&in_ws)], &d.ws),
        (vec!["--session", s(&link)], &d.ws),
        (vec!["--session", s(&in_extra), "--writable", s(&extra)], &extra),
    ];
    for (flags, root) in cases {
        let mut args = vec!["run", "--json"];
        args.extend(flags.iter().copied());
        args.extend(["-c", &cmd]);
        let out = cordon(&args, &d.ws);
        assert_eq!(out.code, 125, "{flags:?}: {}", out.stderr);
        let err = &out.json()["error"];
        assert_eq!(err["code"], "GOVERNING_FILE_WRITABLE", "{flags:?}");
        let msg = err["message"].as_str().unwrap();
        assert!(msg.contains("session file") && msg.contains(flags[1]) && msg.contains(s(root)), "{msg}");
    }
    assert!(!marker.exists(), "nothing ran");
}

fn policy(mode: Mode, ws: &Path, roots: &[&Path]) -> cordon::ExecutionPolicy {
    let req =
        PolicyRequest { mode, writable_roots: roots.iter().map(|r| r.to_path_buf()).collect(), ..Default::default() };
    resolve_policy(&req, ws).unwrap()
}

#[test]
fn guard_judges_canonical_locations() {
    let d = dirs("guard-lib");
    let mut gov = GoverningFiles::new();
    // Not created yet, below a missing directory inside the workspace, reached via `..`.
    let sneaky = d.gov.join("../ws/later/../new.jsonl");
    gov.add(GoverningKind::AuditLog, &sneaky);
    let err = gov.check(&policy(Mode::WorkspaceWrite, &d.ws, &[])).unwrap_err();
    match &err {
        GoverningFileError::InsideWritableRoot { canonical, root, .. } => {
            assert_eq!(canonical, &d.ws.join("new.jsonl"));
            assert_eq!(root, &d.ws);
        }
        other => panic!("{other}"),
    }
    // In every mode: another call in the same workspace could write it.
    assert!(gov.check(&policy(Mode::ReadOnly, &d.ws, &[])).is_err());
    assert!(gov.check(&policy(Mode::FullAccess, &d.ws, &[])).is_err());

    // A second hard link could sit in a writable root.
    let file = d.gov.join("session.jsonl");
    std::fs::write(&file, "").unwrap();
    std::fs::hard_link(&file, d.ws.join("alias")).unwrap();
    let mut gov = GoverningFiles::new();
    gov.add(GoverningKind::SessionFile, &file);
    let err = gov.check(&policy(Mode::ReadOnly, &d.ws, &[])).unwrap_err();
    assert!(matches!(err, GoverningFileError::HardLinked { links: 2, .. }), "{err}");
    assert_eq!(err.code(), "GOVERNING_FILE_WRITABLE");

    // Outside every root: fine.
    let mut gov = GoverningFiles::new();
    gov.add(GoverningKind::SessionFile, d.gov.join("ok.jsonl"));
    assert!(gov.check(&policy(Mode::WorkspaceWrite, &d.ws, &[])).is_ok());
}
