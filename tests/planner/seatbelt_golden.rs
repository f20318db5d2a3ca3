//! The Seatbelt planner, tested on every OS.
//!
//! 1. Golden tests: the exact `sandbox-exec` argv and profile text for each case are
//!    compared with `tests/golden/seatbelt/<case>.argv` and `<case>.sb`; refused
//!    inputs with the messages in `errors.txt`. `CORDON_UPDATE_GOLDEN=1 cargo test
//!    --test planner seatbelt_golden::` rewrites them (review the diff before
//!    committing).
//! 2. Invariants checked on every planned case: the argv shape, every `(param ..)`
//!    the profile names is passed with `-D` and nothing else is, no path value occurs
//!    in the profile text, and the protected denies come after every allow.
//! 3. Validation of every `profiles/seatbelt/*.sb` file and of every generated
//!    profile (see [`validate_sbpl`]).
//! 4. macOS integration tests (`macos::macos_*`): they run real commands under
//!    `/usr/bin/sandbox-exec`; compiled on macOS only.

use cordon::mode::Mode;
use cordon::runner::seatbelt::{
    plan_seatbelt, SeatbeltInput, SeatbeltPlan, INDEX_TOKEN, PROFILE_SNIPPETS, SANDBOX_EXEC_PATH,
};
use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::common::golden::{self, updating};

/// Path literals a profile may contain: fixed system locations, never a user's
/// files. Matched as the whole literal or as a prefix ending in `/`.
const ALLOWED_PATH_LITERALS: [&str; 9] = [
    "/dev/",
    "/private/var/run/",
    "/private/var/db/",
    "/usr/",
    "/bin/",
    "/sbin/",
    "/System/",
    "/Library/Apple/",
    "/Library/Developer/CommandLineTools/",
];

/// Operations an `(allow ...)` may grant without any filter. Anything else must be
/// scoped: a bare `(allow file-write*)` would undo the whole profile.
const BARE_ALLOWS_OK: [&str; 3] = ["process-exec", "process-fork", "file-read*"];

/// The parameters a snippet may name (templates with the index token).
const KNOWN_PARAMS: [&str; 5] =
    ["TMPDIR", "WORKSPACE", "WRITABLE_ROOT_@INDEX@", "PROTECTED_@INDEX@", "PROTECTED_ANCESTOR_@INDEX@"];

fn repo_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Compare `actual` with the golden file `name` (see `common::golden`).
fn check_golden(name: &str, actual: &str) {
    golden::check_golden(&repo_path("tests/golden/seatbelt"), name, actual);
}

// ------------------------------------------------------------------ cases

struct Case {
    name: &'static str,
    mode: Mode,
    workspace: PathBuf,
    roots: Vec<PathBuf>,
    protected: Vec<PathBuf>,
    tmpdir: PathBuf,
    network: bool,
    program: OsString,
    args: Vec<OsString>,
}

impl Case {
    fn new(name: &'static str, mode: Mode) -> Case {
        Case {
            name,
            mode,
            workspace: "/Users/dev/project".into(),
            roots: Vec::new(),
            protected: Vec::new(),
            tmpdir: "/private/var/folders/zz/x1y2z3/T/cordon-run-7/tmp".into(),
            network: false,
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "make test".into()],
        }
    }

    fn input(&self) -> SeatbeltInput<'_> {
        SeatbeltInput {
            mode: self.mode,
            workspace: &self.workspace,
            writable_roots: &self.roots,
            protected: &self.protected,
            tmpdir: &self.tmpdir,
            network: self.network,
            program: &self.program,
            args: &self.args,
        }
    }
}

fn os(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

fn planned_cases() -> Vec<Case> {
    let mut cases = Vec::new();

    cases.push(Case::new("read_only", Mode::ReadOnly));

    let mut c = Case::new("workspace_write", Mode::WorkspaceWrite);
    c.roots = vec!["/Users/dev/.cache/sccache".into(), "/opt/build-out".into()];
    c.protected = vec!["/Users/dev/project/.git".into()];
    c.program = "/usr/bin/make".into();
    c.args = vec!["-j4".into(), "all".into()];
    cases.push(c);

    // A submodule's .git below the workspace, and a root holding another .git: the
    // directories on the way to each are pinned.
    let mut c = Case::new("workspace_write_nested_protected", Mode::WorkspaceWrite);
    c.roots = vec!["/Users/dev/shared".into()];
    c.protected = vec![
        "/Users/dev/project/.git".into(),
        "/Users/dev/project/vendor/lib/.git".into(),
        "/Users/dev/shared/tools/.git".into(),
    ];
    cases.push(c);

    let mut c = Case::new("network_on", Mode::WorkspaceWrite);
    c.protected = vec!["/Users/dev/project/.git".into()];
    c.network = true;
    c.program = "/usr/bin/curl".into();
    c.args = vec!["-fsS".into(), "https://example.com/".into()];
    cases.push(c);

    let mut c = Case::new("read_only_network_on", Mode::ReadOnly);
    c.network = true;
    cases.push(c);

    // Spaces, quotes, parentheses, `=`, `;`, non-ASCII: all fine, as none of them is
    // ever spliced into the profile. The program and its arguments may hold anything.
    let mut c = Case::new("awkward_paths", Mode::WorkspaceWrite);
    c.workspace = r#"/Users/dev/My "Project" (copy) 'v2' a=b; c"#.into();
    c.roots = vec!["/Users/dev/Build Output".into(), "/Volumes/Données (ext)/cache".into()];
    c.protected = vec![r#"/Users/dev/My "Project" (copy) 'v2' a=b; c/.git"#.into()];
    c.tmpdir = "/private/var/folders/zz/x1y2z3/T/cordon run (1)/tmp".into();
    c.program = "/Users/dev/bin/my tool".into();
    c.args = vec!["--name=\"quoted\"".into(), "line one\nline two".into(), "-p".into(), "--".into()];
    cases.push(c);

    // A program whose name starts with `-` stays the program, thanks to `--`.
    let mut c = Case::new("dash_program", Mode::ReadOnly);
    c.program = "-weird".into();
    c.args = vec!["-p".into(), "(deny default)".into()];
    cases.push(c);

    cases
}

fn refused_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    cases.push(Case::new("full_access", Mode::FullAccess));

    let mut c = Case::new("newline_in_workspace", Mode::WorkspaceWrite);
    c.workspace = "/Users/dev/evil\n(allow default)".into();
    cases.push(c);

    let mut c = Case::new("non_utf8_protected", Mode::WorkspaceWrite);
    c.protected = vec![os(b"/Users/dev/project/caf\xe9/.git")];
    cases.push(c);

    let mut c = Case::new("relative_root", Mode::WorkspaceWrite);
    c.roots = vec!["/Users/dev/ok".into(), "build".into()];
    cases.push(c);

    let mut c = Case::new("dotdot_protected", Mode::WorkspaceWrite);
    c.protected = vec!["/Users/dev/project/sub/../.git".into()];
    cases.push(c);

    let mut c = Case::new("symlinked_tmpdir", Mode::ReadOnly);
    c.tmpdir = "/var/folders/zz/x1y2z3/T/cordon-run-7/tmp".into();
    cases.push(c);

    let mut c = Case::new("tab_in_root", Mode::WorkspaceWrite);
    c.roots = vec!["/Users/dev/a\tb".into()];
    cases.push(c);

    let mut c = Case::new("empty_program", Mode::ReadOnly);
    c.program = OsString::new();
    cases.push(c);

    cases
}

fn render_argv(case: &str, plan: &SeatbeltPlan) -> String {
    let mut out = String::new();
    writeln!(out, "# {case}: the argv of {SANDBOX_EXEC_PATH}, one argument per line, Rust-quoted.").unwrap();
    writeln!(out, "# argv[2] is the profile text, kept in {case}.sb.").unwrap();
    for (i, arg) in plan.argv.iter().enumerate() {
        if i == 2 {
            writeln!(out, "[2] <profile: {case}.sb>").unwrap();
        } else {
            writeln!(out, "[{i}] {arg:?}").unwrap();
        }
    }
    writeln!(out, "# environment the executor sets").unwrap();
    for (key, value) in &plan.env {
        writeln!(out, "{key}={value:?}").unwrap();
    }
    out
}

// -------------------------------------------------------------- invariants

/// SBPL text without its `;` comments (a `;` inside a string literal stays).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let (mut in_string, mut escaped) = (false, false);
        for ch in line.chars() {
            if in_string {
                in_string = escaped || ch != '"';
                escaped = !escaped && ch == '\\';
            } else if ch == ';' {
                break;
            } else {
                in_string = ch == '"';
            }
            out.push(ch);
        }
        out.push('\n');
    }
    out
}

/// Every `(param "NAME")` in the code (not the comments) of SBPL text.
fn param_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let code = strip_comments(text);
    let mut rest = code.as_str();
    while let Some(at) = rest.find("(param \"") {
        rest = &rest[at + "(param \"".len()..];
        let end = rest.find('"').expect("unterminated param name");
        names.insert(rest[..end].to_string());
        rest = &rest[end..];
    }
    names
}

fn check_plan_invariants(case: &Case, plan: &SeatbeltPlan) {
    let name = case.name;
    // Shape: sandbox-exec -p <profile> (-D K=V)* -- program args...
    assert_eq!(plan.argv[0], SANDBOX_EXEC_PATH, "{name}");
    assert_eq!(plan.argv[1], "-p", "{name}");
    assert_eq!(plan.argv[2], OsStr::new(&plan.profile), "{name}");
    let mut at = 3;
    for (key, value) in &plan.params {
        assert_eq!(plan.argv[at], "-D", "{name}: argv[{at}]");
        let mut define = OsString::from(format!("{key}="));
        define.push(value);
        assert_eq!(plan.argv[at + 1], define, "{name}: argv[{}]", at + 1);
        at += 2;
    }
    assert_eq!(plan.argv[at], "--", "{name}");
    assert_eq!(plan.argv[at + 1], case.program, "{name}");
    assert_eq!(plan.argv[at + 2..], case.args[..], "{name}");

    // Every parameter the profile names is passed, and only those.
    let passed: BTreeSet<String> = plan.params.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(passed.len(), plan.params.len(), "{name}: a parameter is passed twice");
    assert_eq!(param_names(&plan.profile), passed, "{name}: profile params vs -D params");

    // No path (no parameter value) ever occurs in the profile text.
    for (key, value) in &plan.params {
        let value = value.to_str().unwrap();
        assert!(!plan.profile.contains(value), "{name}: the value of {key} ({value:?}) is spliced into the profile");
    }
    for path in std::iter::once(&case.workspace).chain(&case.roots).chain(&case.protected) {
        assert!(!plan.profile.contains(path.to_str().unwrap()), "{name}: {path:?} appears in the profile");
    }

    // Protected denies come after every allow (the last matching rule decides).
    if !case.protected.is_empty() {
        let first_deny = plan.profile.find("\n(deny file-write* file-link file-clone").expect("protected deny");
        let last_allow = plan.profile.rfind("\n(allow ").unwrap();
        assert!(last_allow < first_deny, "{name}: an allow rule follows the protected denies");
    }

    // TMPDIR is exported to the command and is the writable temp dir.
    assert_eq!(plan.env, [("TMPDIR".to_string(), case.tmpdir.clone().into_os_string())], "{name}");
    assert_eq!(plan.params[0], ("TMPDIR".to_string(), case.tmpdir.clone().into_os_string()), "{name}");

    let problems = validate_sbpl(&plan.profile, SbplKind::Generated);
    assert!(problems.is_empty(), "{name}: generated profile fails validation:\n{}", problems.join("\n"));
}

#[test]
fn golden_plans() {
    for case in planned_cases() {
        let plan = plan_seatbelt(&case.input()).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        check_plan_invariants(&case, &plan);
        check_golden(&format!("{}.argv", case.name), &render_argv(case.name, &plan));
        check_golden(&format!("{}.sb", case.name), &plan.profile);
    }
}

#[test]
fn golden_refusals() {
    let mut out = String::from("# Inputs the Seatbelt planner refuses, one per line: case: error message\n");
    for case in refused_cases() {
        match plan_seatbelt(&case.input()) {
            Ok(_) => panic!("{}: planned, but must be refused", case.name),
            Err(e) => writeln!(out, "{}: {e}", case.name).unwrap(),
        }
    }
    check_golden("errors.txt", &out);
}

#[test]
fn profile_text_depends_only_on_shape() {
    // Same mode, flags and counts, different paths: identical profile text.
    let mut a = Case::new("a", Mode::WorkspaceWrite);
    a.roots = vec!["/Users/a/r".into()];
    a.protected = vec!["/Users/a/project/.git".into()];
    a.workspace = "/Users/a/project".into();
    let mut b = Case::new("b", Mode::WorkspaceWrite);
    b.roots = vec!["/Volumes/x y/r".into()];
    b.protected = vec!["/Volumes/x y/ws/.git".into()];
    b.workspace = "/Volumes/x y/ws".into();
    let pa = plan_seatbelt(&a.input()).unwrap();
    let pb = plan_seatbelt(&b.input()).unwrap();
    assert_eq!(pa.profile, pb.profile);
    assert_ne!(pa.params, pb.params);
}

#[test]
fn no_golden_file_is_stale() {
    if updating() {
        return;
    }
    let mut expected: BTreeSet<String> = BTreeSet::from(["errors.txt".to_string()]);
    for case in planned_cases() {
        expected.insert(format!("{}.argv", case.name));
        expected.insert(format!("{}.sb", case.name));
    }
    let dir = repo_path("tests/golden/seatbelt");
    let found: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(found, expected, "golden files without a case (delete them) or cases without golden files");
}

// ------------------------------------------------------------ validation

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SbplKind {
    /// `base.sb`: must open with `(version 1)` then `(deny default)`.
    Base,
    /// A snippet appended after base.sb (templates included).
    Snippet,
    /// A complete generated profile.
    Generated,
}

/// One lexed line of SBPL: whether it opens a form outside strings and comments,
/// whether it carries a `;` comment, whether it is only a comment.
struct LineFacts {
    opens_form: bool,
    has_comment: bool,
    comment_only: bool,
}

/// What the lexer found in a text: per-line facts, string literals, top-level forms.
struct Lexed {
    lines: Vec<LineFacts>,
    strings: Vec<String>,
    top_level_forms: Vec<String>,
    errors: Vec<String>,
}

/// A small SBPL lexer: `;` comments to end of line, `"..."` strings and `#"..."`
/// regex literals with `\` escapes, and parentheses.
fn lex(text: &str) -> Lexed {
    let mut lexed = Lexed { lines: Vec::new(), strings: Vec::new(), top_level_forms: Vec::new(), errors: Vec::new() };
    let mut depth: i64 = 0;
    let mut in_string = false;
    let mut escaped = false;
    let mut current_string = String::new();
    let mut form = String::new();
    for (n, line) in text.lines().enumerate() {
        let mut facts = LineFacts { opens_form: false, has_comment: false, comment_only: false };
        let mut code_seen = false;
        for ch in line.chars() {
            if depth > 0 || ch == '(' {
                form.push(ch);
            }
            if in_string {
                if escaped {
                    escaped = false;
                    current_string.push(ch);
                } else if ch == '\\' {
                    escaped = true;
                } else if ch == '"' {
                    in_string = false;
                    lexed.strings.push(std::mem::take(&mut current_string));
                } else {
                    current_string.push(ch);
                }
                continue;
            }
            match ch {
                ';' => {
                    facts.has_comment = true;
                    facts.comment_only = !code_seen;
                    if depth > 0 {
                        form.pop();
                    }
                    break;
                }
                '"' => {
                    in_string = true;
                    code_seen = true;
                }
                '(' => {
                    depth += 1;
                    facts.opens_form = true;
                    code_seen = true;
                }
                ')' => {
                    depth -= 1;
                    code_seen = true;
                    if depth < 0 {
                        lexed.errors.push(format!("line {}: unbalanced `)`", n + 1));
                        depth = 0;
                    } else if depth == 0 {
                        lexed.top_level_forms.push(std::mem::take(&mut form));
                    }
                }
                c if !c.is_whitespace() => code_seen = true,
                _ => {}
            }
        }
        if in_string {
            lexed.errors.push(format!("line {}: string literal spans lines", n + 1));
        }
        if depth > 0 {
            form.push('\n');
        }
        lexed.lines.push(facts);
    }
    if depth != 0 {
        lexed.errors.push(format!("{depth} unclosed `(` at end of text"));
    }
    lexed
}

/// Check one SBPL text; returns the problems found (empty: valid).
///
/// - parentheses balance, strings terminate;
/// - every line that opens a form carries a `;` comment or directly follows a
///   comment-only line;
/// - `(version 1)` then `(deny default)` open base.sb and every generated profile,
///   and appear nowhere else; `(allow default)` appears nowhere;
/// - an `(allow ...)` without a filter grants only [`BARE_ALLOWS_OK`] operations;
/// - every path literal is a fixed system path ([`ALLOWED_PATH_LITERALS`]);
/// - parameters are the known ones; the index token appears only inside a
///   parameter name, and not at all in generated profiles.
fn validate_sbpl(text: &str, kind: SbplKind) -> Vec<String> {
    let lexed = lex(text);
    let mut problems = lexed.errors.clone();

    let mut previous_comment_only = false;
    for (n, (facts, line)) in lexed.lines.iter().zip(text.lines()).enumerate() {
        if facts.opens_form && !facts.has_comment && !previous_comment_only {
            problems.push(format!("line {}: rule without a `;` comment on it or directly above it: {line}", n + 1));
        }
        previous_comment_only = facts.comment_only;
    }

    let normalized: Vec<String> =
        lexed.top_level_forms.iter().map(|f| f.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
    let opens_profile = matches!(kind, SbplKind::Base | SbplKind::Generated);
    if opens_profile {
        if normalized.first().map(String::as_str) != Some("(version 1)") {
            problems.push("the first form is not (version 1)".into());
        }
        if normalized.get(1).map(String::as_str) != Some("(deny default)") {
            problems.push("the second form is not (deny default)".into());
        }
    }
    for (i, form) in normalized.iter().enumerate() {
        let head_allowed = opens_profile && i < 2;
        if !head_allowed && (form.starts_with("(version") || form == "(deny default)") {
            problems.push(format!("`{form}` outside the head of the profile"));
        }
        if form.starts_with("(allow default") {
            problems.push("(allow default) is forbidden".into());
        }
        if let Some(ops) = form.strip_prefix("(allow ") {
            let ops = ops.trim_end_matches(')');
            if !ops.contains('(') {
                for op in ops.split_whitespace() {
                    if !BARE_ALLOWS_OK.contains(&op) {
                        problems.push(format!("`{form}` allows {op} without a filter"));
                    }
                }
            }
        }
    }

    for literal in &lexed.strings {
        let path = literal.strip_prefix('^').unwrap_or(literal);
        if path.starts_with('/') || path.starts_with('~') {
            let fixed = ALLOWED_PATH_LITERALS
                .iter()
                .any(|allowed| path.starts_with(allowed) || Some(path) == allowed.strip_suffix('/'));
            if !fixed {
                problems.push(format!("path literal {literal:?} is not a fixed system path"));
            }
        }
    }

    for name in param_names(text) {
        if !param_is_known(&name, kind) {
            problems.push(format!("unknown parameter {name:?}"));
        }
    }
    for (n, line) in text.lines().enumerate() {
        if line.contains(INDEX_TOKEN) {
            let code = line.split(';').next().unwrap_or("");
            if kind == SbplKind::Generated || !code.contains(&format!("{INDEX_TOKEN}\")")) {
                problems.push(format!("line {}: {INDEX_TOKEN} outside a parameter name: {line}", n + 1));
            }
        }
    }
    problems
}

/// Whether `name` is one of [`KNOWN_PARAMS`]: in a generated profile with the index
/// token replaced by a number, in a snippet verbatim.
fn param_is_known(name: &str, kind: SbplKind) -> bool {
    KNOWN_PARAMS.iter().any(|known| match known.strip_suffix(INDEX_TOKEN) {
        Some(prefix) if kind == SbplKind::Generated => {
            name.strip_prefix(prefix).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        }
        _ => name == *known,
    })
}

#[test]
fn every_profile_file_is_embedded_and_valid() {
    let dir = repo_path("profiles/seatbelt");
    let mut on_disk = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.ends_with(".sb"), "{}: only .sb files belong in profiles/seatbelt", path.display());
        let text = std::fs::read_to_string(&path).unwrap();
        let embedded = PROFILE_SNIPPETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t);
        assert_eq!(embedded, Some(text.as_str()), "{name}: not embedded by the planner, or stale");
        let kind = if name == "base.sb" { SbplKind::Base } else { SbplKind::Snippet };
        let problems = validate_sbpl(&text, kind);
        assert!(problems.is_empty(), "{name}:\n{}", problems.join("\n"));
        // Templates (files with the index token) name exactly one indexed parameter.
        if text.contains(INDEX_TOKEN) {
            let indexed: Vec<String> = param_names(&text).into_iter().filter(|p| p.contains(INDEX_TOKEN)).collect();
            assert_eq!(indexed.len(), 1, "{name}: a template names one indexed parameter, found {indexed:?}");
        }
        on_disk.insert(name);
    }
    let embedded: BTreeSet<String> = PROFILE_SNIPPETS.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(on_disk, embedded, "embedded snippets without a file");
}

#[test]
fn validator_catches_what_it_promises() {
    let cases: [(&str, &str); 9] = [
        ("; c\n(version 1)\n; c\n(deny default)\n; c\n(allow file-write* (subpath \"/Users/me\"))\n", "path literal"),
        ("; c\n(version 1)\n; c\n(deny default)\n(allow process-exec)\n", "without a `;` comment"),
        ("; c\n(version 1)\n; c\n(deny default)\n; c\n(allow file-write*)\n", "without a filter"),
        ("; c\n(version 1)\n; c\n(deny default)\n; c\n(allow process-exec\n", "unclosed"),
        ("; c\n(version 1)\n; c\n(allow default)\n", "(allow default)"),
        ("; c\n(deny default)\n", "(version 1)"),
        (
            "; c\n(version 1)\n; c\n(deny default)\n; c\n(allow file-write* (subpath (param \"HOME\")))\n",
            "unknown parameter",
        ),
        ("; c\n(version 1)\n; c\n(deny default)\n; c\n(allow file-read* (literal \"a;b\")) ; fine\n)\n", "unbalanced"),
        ("; c\n(version 1)\n; c\n(deny default)\n; @INDEX@\n(allow signal (target self))\n", "@INDEX@ outside"),
    ];
    for (text, expected) in cases {
        let problems = validate_sbpl(text, SbplKind::Generated);
        assert!(problems.iter().any(|p| p.contains(expected)), "expected {expected:?} for {text:?}, got {problems:?}");
    }
    let fine = "; c\n(version 1)\n; c\n(deny default)\n; c\n(allow file-write-data\n  (literal \"/dev/null\") ; a \"quoted\" ; comment\n)\n";
    assert_eq!(validate_sbpl(fine, SbplKind::Generated), Vec::<String>::new());
}

// ------------------------------------------------------- macOS integration

/// Real runs under `/usr/bin/sandbox-exec`: compiled on macOS only (elsewhere there is
/// nothing to run them with, and a test that can only skip would count as passed).
#[cfg(target_os = "macos")]
mod macos {
    use super::*;
    use crate::common::skip_or_fail;

    /// Whether `sandbox-exec` is there to run the case; skips loudly (or fails under
    /// `CORDON_MUST_ENFORCE=1`) when not.
    fn macos_ready(test: &str) -> bool {
        if !Path::new(SANDBOX_EXEC_PATH).is_file() {
            skip_or_fail(test, &format!("{SANDBOX_EXEC_PATH} is missing"));
            return false;
        }
        true
    }

    /// A scratch area with canonical paths: a workspace, a private temp dir and a
    /// directory outside both.
    struct Scratch {
        _dir: tempfile::TempDir,
        ws: PathBuf,
        tmp: PathBuf,
        outside: PathBuf,
    }

    fn scratch(ws_name: &str) -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join(ws_name);
        let tmp = root.join("run-tmp");
        let outside = root.join("outside");
        for d in [&ws, &tmp, &outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        Scratch { _dir: dir, ws, tmp, outside }
    }

    /// Run `script` under `sh -c` in a plan built from `s`, returning (stdout, stderr).
    /// The script reports each step as `OK <name>` or `DENIED <name>`.
    fn run_sh(s: &Scratch, mode: Mode, protected: &[PathBuf], network: bool, script: &str) -> (String, String) {
        let args = [OsString::from("-c"), OsString::from(script)];
        let plan = plan_seatbelt(&SeatbeltInput {
            mode,
            workspace: &s.ws,
            writable_roots: &[],
            protected,
            tmpdir: &s.tmp,
            network,
            program: OsStr::new("/bin/sh"),
            args: &args,
        })
        .unwrap();
        let out = std::process::Command::new(SANDBOX_EXEC_PATH)
            .args(&plan.argv[1..])
            .envs(plan.env.iter().map(|(k, v)| (k, v)))
            .env("WS", &s.ws)
            .env("OUTSIDE", &s.outside)
            .current_dir(&s.ws)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    }

    /// A shell step: `step NAME COMMAND...` prints OK or DENIED.
    const STEP_FN: &str =
        "step() { n=$1; shift; if \"$@\" 2>>\"$TMPDIR/err\"; then echo \"OK $n\"; else echo \"DENIED $n\"; fi; }\n";

    fn assert_steps(stdout: &str, expected: &[(&str, bool)]) {
        for (name, allowed) in expected {
            let want = format!("{} {name}", if *allowed { "OK" } else { "DENIED" });
            assert!(stdout.lines().any(|l| l == want), "expected `{want}` in:\n{stdout}");
        }
    }

    #[test]
    fn macos_every_golden_profile_is_accepted() {
        if !macos_ready("macos_every_golden_profile_is_accepted") {
            return;
        }
        // The paths need not exist: sandbox-exec only has to compile the profile and run.
        for mut plan_case in planned_cases() {
            plan_case.program = "/usr/bin/true".into();
            plan_case.args = Vec::new();
            let plan = plan_seatbelt(&plan_case.input()).unwrap();
            let status = std::process::Command::new(SANDBOX_EXEC_PATH).args(&plan.argv[1..]).status().unwrap();
            assert!(status.success(), "{}: sandbox-exec refused the profile ({status})", plan_case.name);
        }
    }

    #[test]
    fn macos_read_only_writes_only_tmpdir() {
        if !macos_ready("macos_read_only_writes_only_tmpdir") {
            return;
        }
        let s = scratch("ws");
        std::fs::write(s.ws.join("f"), "before").unwrap();
        let script = format!(
            "{STEP_FN}step tmp sh -c 'echo x > \"$TMPDIR/t\"'\nstep ws_write sh -c 'echo x > \"$WS/f\"'\n\
         step ws_create sh -c 'echo x > \"$WS/new\"'\nstep outside sh -c 'echo x > \"$OUTSIDE/o\"'\n\
         step host_tmp sh -c 'echo x > /private/tmp/cordon-seatbelt-probe-$$'\nstep whoami whoami\n\
         step uname uname -a\nstep read ls /\nstep devnull sh -c 'echo x > /dev/null'\n"
        );
        let (stdout, _) = run_sh(&s, Mode::ReadOnly, &[], false, &script);
        assert_steps(
            &stdout,
            &[
                ("tmp", true),
                ("ws_write", false),
                ("ws_create", false),
                ("outside", false),
                ("host_tmp", false),
                ("whoami", true),
                ("uname", true),
                ("read", true),
                ("devnull", true),
            ],
        );
        assert_eq!(std::fs::read_to_string(s.ws.join("f")).unwrap(), "before");
        assert!(!s.ws.join("new").exists());
        assert!(!s.outside.join("o").exists());
        let err = std::fs::read_to_string(s.tmp.join("err")).unwrap_or_default();
        assert!(err.contains("Operation not permitted"), "denials must be EPERM from the sandbox:\n{err}");
    }

    #[test]
    fn macos_workspace_write_keeps_protected_paths() {
        if !macos_ready("macos_workspace_write_keeps_protected_paths") {
            return;
        }
        let s = scratch("ws");
        let git = s.ws.join(".git");
        let sub_git = s.ws.join("sub/.git");
        std::fs::create_dir_all(git.join("hooks")).unwrap();
        std::fs::create_dir_all(&sub_git).unwrap();
        std::fs::write(git.join("config"), "original").unwrap();
        std::fs::write(s.outside.join("o"), "original").unwrap();
        let protected = [git.clone(), sub_git.clone()];
        let script = format!(
            "{STEP_FN}cd \"$WS\"\nstep ws_create sh -c 'echo x > new'\nstep ws_rename mv new renamed\n\
         step ws_link ln renamed hard\nstep ws_symlink ln -s renamed soft\nstep ws_clone cp -c renamed cloned\n\
         step ws_chmod chmod 600 renamed\nstep ws_delete rm renamed\nstep ws_mkdir mkdir -p a/b\n\
         step git_write sh -c 'echo x > .git/config'\nstep git_append sh -c 'echo x >> .git/config'\n\
         step git_create sh -c 'echo x > .git/hooks/pre-commit'\nstep git_chmod chmod 777 .git/config\n\
         step git_rename mv .git gone\nstep git_delete rm -rf .git\nstep git_hardlink_out ln .git/config stolen\n\
         step git_write_via_link sh -c 'echo x >> stolen'\nstep git_link_in ln cloned .git/planted\n\
         step ancestor_rename mv sub sub2\nstep outside_write sh -c 'echo x > \"$OUTSIDE/o\"'\n\
         step outside_chmod chmod 777 \"$OUTSIDE/o\"\nstep outside_touch touch -t 200001010000 \"$OUTSIDE/o\"\n"
        );
        let (stdout, _) = run_sh(&s, Mode::WorkspaceWrite, &protected, false, &script);
        assert_steps(
            &stdout,
            &[
                ("ws_create", true),
                ("ws_rename", true),
                ("ws_link", true),
                ("ws_symlink", true),
                ("ws_clone", true),
                ("ws_chmod", true),
                ("ws_delete", true),
                ("ws_mkdir", true),
                ("git_write", false),
                ("git_append", false),
                ("git_create", false),
                ("git_chmod", false),
                ("git_rename", false),
                ("git_delete", false),
                ("git_link_in", false),
                ("ancestor_rename", false),
                ("outside_write", false),
                ("outside_chmod", false),
                ("outside_touch", false),
            ],
        );
        // By effect: whatever the hard-link steps reported, .git/config is untouched.
        assert_eq!(std::fs::read_to_string(git.join("config")).unwrap(), "original");
        assert!(git.join("hooks").is_dir() && !git.join("hooks/pre-commit").exists());
        assert!(sub_git.is_dir());
        assert_eq!(std::fs::read_to_string(s.outside.join("o")).unwrap(), "original");
    }

    #[test]
    fn macos_network_follows_the_flag() {
        if !macos_ready("macos_network_follows_the_flag") {
            return;
        }
        for network in [false, true] {
            let s = scratch("ws");
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let script = format!("{STEP_FN}step connect /bin/bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'\n");
            let (stdout, _) = run_sh(&s, Mode::WorkspaceWrite, &[], network, &script);
            assert_steps(&stdout, &[("connect", network)]);
            listener.set_nonblocking(true).unwrap();
            assert_eq!(listener.accept().is_ok(), network, "network={network}: a connection arrived iff allowed");
        }
    }

    #[test]
    fn macos_awkward_workspace_path() {
        if !macos_ready("macos_awkward_workspace_path") {
            return;
        }
        let s = scratch(r#"my "ws" (copy) 'x' a=b; c"#);
        let script =
            format!("{STEP_FN}step ws sh -c 'echo x > \"$WS/f\"'\nstep outside sh -c 'echo x > \"$OUTSIDE/o\"'\n");
        let (stdout, _) = run_sh(&s, Mode::WorkspaceWrite, &[], false, &script);
        assert_steps(&stdout, &[("ws", true), ("outside", false)]);
        assert!(s.ws.join("f").is_file());
    }
}
