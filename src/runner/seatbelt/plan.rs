//! Seatbelt planning: the pure half of the macOS `seatbelt` runner.
//!
//! [`plan_seatbelt`] turns a confined mode, the policy's canonical paths and the
//! command into the exact argv of `/usr/bin/sandbox-exec`:
//!
//! ```text
//! /usr/bin/sandbox-exec -p <profile> -D TMPDIR=<dir> [-D WORKSPACE=<dir>]
//!     [-D WRITABLE_ROOT_<i>=<dir> ...] [-D PROTECTED_<i>=<path> ...]
//!     [-D PROTECTED_ANCESTOR_<i>=<dir> ...] -- <program> <args>...
//! ```
//!
//! `-p` carries the profile text and `-D KEY=VALUE` one profile parameter each
//! (sandbox-exec(1)); `--` ends sandbox-exec's options, so a program whose name
//! starts with `-` is still the program. sandbox-exec then executes the program
//! with its arguments inside the sandbox.
//!
//! # The profile
//!
//! The profile text is a concatenation of fixed, commented snippets from
//! `profiles/seatbelt/`, embedded at build time, in this order:
//!
//! 1. `base.sb`, always: `(version 1)`, `(deny default)`, the allows every process
//!    needs, reads everywhere, and writes to the private `TMPDIR`;
//! 2. `write-workspace.sb`, in `workspace-write`: the workspace;
//! 3. `write-roots.sb`, in `workspace-write` with extra roots: one filter line per
//!    root;
//! 4. `network.sb`, when the policy allows network;
//! 5. `protected.sb`: one filter line per protected path (writes denied);
//! 6. `protected-ancestors.sb`: one filter line per directory on the way to a
//!    protected path that lies in a writable location (rename/removal denied).
//!
//! Seatbelt lets the last matching rule decide, which is why the protected denies
//! come after every allow. Snippets 3, 5 and 6 are templates: each line holding
//! [`INDEX_TOKEN`] is emitted once per item with the token replaced by the item's
//! number, and a template with no items is left out (a rule without filters would
//! match every path).
//!
//! **No path ever enters the profile text.** Paths travel only as `-D`
//! parameters and the profile names them with `(param "NAME")`, so spaces, quotes
//! and parentheses in a path cannot change the profile's meaning. The text depends
//! only on the mode, the network flag and the number of roots, protected paths and
//! pinned directories.
//!
//! # Path rules
//!
//! Every path is checked before planning; a refusal is a [`SeatbeltPlanError`]
//! naming the path and its role. A path must be absolute and normalized (no `.`,
//! `..`, repeated or trailing `/`), valid UTF-8 (APFS stores names as UTF-8, so
//! nothing else can be a macOS path), free of control characters (C0, DEL and C1:
//! they would let a path forge lines in the sandbox's denial log), shorter than
//! macOS's `PATH_MAX`, and not under `/tmp`, `/var` or `/etc`, which are symlinks
//! into `/private` on macOS: Seatbelt matches resolved paths, so a rule naming `/var/...` would never
//! match and a protected path spelled that way would silently stay writable.
//!
//! # What it does not do
//!
//! - No I/O: it does not check that the paths exist or are canonical beyond the
//!   checks above (the policy resolver canonicalizes), and it spawns nothing.
//! - It does not confine reads: every mode may read the whole filesystem.
//! - It does not plan `full-access`, which runs under the passthrough runner.
//! - It does not make the command's processes die with the run (Seatbelt has no
//!   process-lifetime containment), close inherited descriptors, or scrub the
//!   environment: those belong to the executor.
//!
//! `docs/seatbelt.md` gives the reasons for each rule and the list of behaviours
//! that only a Mac can confirm.

use crate::mode::Mode;
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

/// The sandbox-exec binary, always by absolute path: a `sandbox-exec` found on
/// `PATH` could be anything.
pub const SANDBOX_EXEC_PATH: &str = "/usr/bin/sandbox-exec";

/// The token a template line carries where the item's number goes.
pub const INDEX_TOKEN: &str = "@INDEX@";

/// Parameter naming the private per-run temp dir (writable in every confined mode).
pub const PARAM_TMPDIR: &str = "TMPDIR";
/// Parameter naming the workspace (writable in `workspace-write`).
pub const PARAM_WORKSPACE: &str = "WORKSPACE";
/// Prefix of the parameters naming extra writable roots (`WRITABLE_ROOT_0`, ...).
pub const PARAM_WRITABLE_ROOT_PREFIX: &str = "WRITABLE_ROOT_";
/// Prefix of the parameters naming protected paths (`PROTECTED_0`, ...).
pub const PARAM_PROTECTED_PREFIX: &str = "PROTECTED_";
/// Prefix of the parameters naming pinned directories on the way to protected paths.
pub const PARAM_PROTECTED_ANCESTOR_PREFIX: &str = "PROTECTED_ANCESTOR_";

/// macOS's `PATH_MAX` (`<sys/syslimits.h>`), counting the terminating NUL: a longer
/// path cannot be opened by name on macOS, so a rule naming one could never match.
pub const MACOS_PATH_MAX: usize = 1024;

/// Top-level directories that are symlinks into `/private` on macOS. Seatbelt
/// matches resolved paths, so a parameter spelled with one of these never matches.
pub const MACOS_SYMLINKED_DIRS: [(&str, &str); 3] =
    [("/tmp", "/private/tmp"), ("/var", "/private/var"), ("/etc", "/private/etc")];

const BASE_SB: &str = include_str!("../../../profiles/seatbelt/base.sb");
const WRITE_WORKSPACE_SB: &str = include_str!("../../../profiles/seatbelt/write-workspace.sb");
const WRITE_ROOTS_SB: &str = include_str!("../../../profiles/seatbelt/write-roots.sb");
const NETWORK_SB: &str = include_str!("../../../profiles/seatbelt/network.sb");
const PROTECTED_SB: &str = include_str!("../../../profiles/seatbelt/protected.sb");
const PROTECTED_ANCESTORS_SB: &str = include_str!("../../../profiles/seatbelt/protected-ancestors.sb");

/// Every embedded snippet, by file name under `profiles/seatbelt/`, in the order
/// the planner concatenates them (tests check each against the file on disk).
pub const PROFILE_SNIPPETS: [(&str, &str); 6] = [
    ("base.sb", BASE_SB),
    ("write-workspace.sb", WRITE_WORKSPACE_SB),
    ("write-roots.sb", WRITE_ROOTS_SB),
    ("network.sb", NETWORK_SB),
    ("protected.sb", PROTECTED_SB),
    ("protected-ancestors.sb", PROTECTED_ANCESTORS_SB),
];

/// What the Seatbelt planner needs, all resolved beforehand (no I/O happens here).
#[derive(Debug, Clone, Copy)]
pub struct SeatbeltInput<'a> {
    /// The confined mode to enforce (`read-only` or `workspace-write`).
    pub mode: Mode,
    /// The workspace, canonical and absolute (writable in `workspace-write`).
    pub workspace: &'a Path,
    /// Extra writable roots, canonical, absolute and deduplicated (used in
    /// `workspace-write` only).
    pub writable_roots: &'a [PathBuf],
    /// Protected subpaths (e.g. `<workspace>/.git`), canonical and absolute; they
    /// stay read-only even inside writable roots.
    pub protected: &'a [PathBuf],
    /// The private per-run temp dir, canonical; writable in every confined mode and
    /// exported to the command as `TMPDIR`.
    pub tmpdir: &'a Path,
    /// Whether the policy allows network access.
    pub network: bool,
    /// The program to run (best an absolute path: sandbox-exec passes it to exec
    /// as given).
    pub program: &'a OsStr,
    /// The program's arguments, without argv\[0\].
    pub args: &'a [OsString],
}

/// A complete, pure launch description for `sandbox-exec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatbeltPlan {
    /// The full argv, `argv[0]` being [`SANDBOX_EXEC_PATH`]; spawn
    /// [`SANDBOX_EXEC_PATH`] with exactly these arguments.
    pub argv: Vec<OsString>,
    /// The profile text (also `argv[2]`).
    pub profile: String,
    /// The profile parameters, in argv order (also passed as `-D KEY=VALUE`).
    pub params: Vec<(String, OsString)>,
    /// Variables the executor must set in the command's environment: `TMPDIR`
    /// pointing at the private temp dir the profile makes writable.
    pub env: Vec<(String, OsString)>,
}

pub use crate::error::seatbelt::{PathRole, SeatbeltPlanError};

/// Check one path against the module's path rules (see the module docs) and return
/// it as UTF-8 text.
fn checked_path(role: PathRole, path: &Path) -> Result<&str, SeatbeltPlanError> {
    let owned = || path.to_path_buf();
    if !path.is_absolute() {
        return Err(SeatbeltPlanError::RelativePath { role, path: owned() });
    }
    let has_dot = path.components().any(|c| matches!(c, Component::CurDir | Component::ParentDir));
    let rebuilt: PathBuf = path.components().collect();
    if has_dot || rebuilt.as_os_str() != path.as_os_str() {
        return Err(SeatbeltPlanError::NotNormalized { role, path: owned() });
    }
    let Some(text) = path.to_str() else {
        return Err(SeatbeltPlanError::NotUtf8 { role, path: owned() });
    };
    if let Some(character) = text.chars().find(|c| c.is_control()) {
        return Err(SeatbeltPlanError::ControlCharacter { role, path: owned(), character });
    }
    if text.len() >= MACOS_PATH_MAX {
        return Err(SeatbeltPlanError::TooLong { role, path: owned(), len: text.len(), max: MACOS_PATH_MAX });
    }
    if let Some(&(symlink, target)) = MACOS_SYMLINKED_DIRS.iter().find(|(link, _)| path.starts_with(link)) {
        return Err(SeatbeltPlanError::SymlinkedPrefix { role, path: owned(), symlink, target });
    }
    Ok(text)
}

/// Append `template` to `out` for `count` items: lines holding [`INDEX_TOKEN`] once
/// per item (token replaced by the item's number), other lines once. Nothing at
/// all when `count` is zero.
fn push_template(out: &mut String, template: &str, count: usize) {
    if count == 0 {
        return;
    }
    out.push('\n');
    for line in template.lines() {
        if line.contains(INDEX_TOKEN) {
            for i in 0..count {
                out.push_str(&line.replace(INDEX_TOKEN, &i.to_string()));
                out.push('\n');
            }
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
}

/// Append a snippet without template lines.
fn push_snippet(out: &mut String, snippet: &str) {
    push_template(out, snippet, 1);
}

/// The directories on the way to each protected path (the path itself excluded)
/// that lie at or below one of `writable`, sorted and deduplicated. Pure path
/// arithmetic: nothing is looked up.
fn protected_ancestors(protected: &[PathBuf], writable: &[&Path]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = protected
        .iter()
        .flat_map(|p| p.ancestors().skip(1))
        .filter(|dir| writable.iter().any(|w| dir.starts_with(w)))
        .map(Path::to_path_buf)
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// Plan a `sandbox-exec` launch (pure; see the module docs for the argv, the
/// profile and the path rules).
///
/// ```
/// use cordon::mode::Mode;
/// use cordon::runner::seatbelt::{plan_seatbelt, SeatbeltInput, SANDBOX_EXEC_PATH};
/// use std::ffi::{OsStr, OsString};
/// use std::path::{Path, PathBuf};
///
/// let protected = [PathBuf::from("/Users/dev/app/.git")];
/// let args = [OsString::from("status")];
/// let plan = plan_seatbelt(&SeatbeltInput {
///     mode: Mode::WorkspaceWrite,
///     workspace: Path::new("/Users/dev/app"),
///     writable_roots: &[],
///     protected: &protected,
///     tmpdir: Path::new("/private/var/folders/x/T/cordon-run"),
///     network: false,
///     program: OsStr::new("/usr/bin/git"),
///     args: &args,
/// })
/// .unwrap();
/// assert_eq!(plan.argv[0], SANDBOX_EXEC_PATH);
/// assert!(plan.profile.contains(r#"(subpath (param "WORKSPACE"))"#));
/// assert!(!plan.profile.contains("/Users/dev"));
/// assert_eq!(plan.argv[plan.argv.len() - 3..], ["--", "/usr/bin/git", "status"]);
/// ```
pub fn plan_seatbelt(input: &SeatbeltInput<'_>) -> Result<SeatbeltPlan, SeatbeltPlanError> {
    let writes_workspace = match input.mode {
        Mode::ReadOnly => false,
        Mode::WorkspaceWrite => true,
        Mode::FullAccess => return Err(SeatbeltPlanError::ModeNotConfined { mode: input.mode }),
    };
    if input.program.is_empty() {
        return Err(SeatbeltPlanError::EmptyProgram);
    }

    // Check every path, used in this mode or not: a malformed input is a bug upstream.
    let tmpdir = checked_path(PathRole::Tmpdir, input.tmpdir)?;
    let workspace = checked_path(PathRole::Workspace, input.workspace)?;
    let roots = input
        .writable_roots
        .iter()
        .enumerate()
        .map(|(i, p)| checked_path(PathRole::WritableRoot(i), p))
        .collect::<Result<Vec<_>, _>>()?;
    let protected = input
        .protected
        .iter()
        .enumerate()
        .map(|(i, p)| checked_path(PathRole::Protected(i), p))
        .collect::<Result<Vec<_>, _>>()?;

    let mut params: Vec<(String, OsString)> = vec![(PARAM_TMPDIR.to_string(), tmpdir.into())];
    let mut writable: Vec<&Path> = vec![input.tmpdir];
    let mut profile = String::from(BASE_SB);
    if writes_workspace {
        params.push((PARAM_WORKSPACE.to_string(), workspace.into()));
        writable.push(input.workspace);
        push_snippet(&mut profile, WRITE_WORKSPACE_SB);
        for (i, root) in roots.iter().enumerate() {
            params.push((format!("{PARAM_WRITABLE_ROOT_PREFIX}{i}"), (*root).into()));
        }
        writable.extend(input.writable_roots.iter().map(PathBuf::as_path));
        push_template(&mut profile, WRITE_ROOTS_SB, roots.len());
    }
    if input.network {
        push_snippet(&mut profile, NETWORK_SB);
    }
    // Protected denies last: the last matching rule decides.
    for (i, path) in protected.iter().enumerate() {
        params.push((format!("{PARAM_PROTECTED_PREFIX}{i}"), (*path).into()));
    }
    push_template(&mut profile, PROTECTED_SB, protected.len());
    let ancestors = protected_ancestors(input.protected, &writable);
    for (i, dir) in ancestors.iter().enumerate() {
        params.push((format!("{PARAM_PROTECTED_ANCESTOR_PREFIX}{i}"), dir.clone().into_os_string()));
    }
    push_template(&mut profile, PROTECTED_ANCESTORS_SB, ancestors.len());

    let mut argv: Vec<OsString> = Vec::with_capacity(4 + 2 * params.len() + input.args.len());
    argv.extend([SANDBOX_EXEC_PATH.into(), "-p".into(), profile.clone().into()]);
    for (key, value) in &params {
        let mut define = OsString::from(format!("{key}="));
        define.push(value);
        argv.extend(["-D".into(), define]);
    }
    argv.push("--".into());
    argv.push(input.program.to_os_string());
    argv.extend(input.args.iter().cloned());

    Ok(SeatbeltPlan { argv, profile, params, env: vec![("TMPDIR".to_string(), tmpdir.into())] })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(mode: Mode, roots: &'a [PathBuf], protected: &'a [PathBuf]) -> SeatbeltInput<'a> {
        SeatbeltInput {
            mode,
            workspace: Path::new("/Users/dev/ws"),
            writable_roots: roots,
            protected,
            tmpdir: Path::new("/private/var/folders/ab/T/run"),
            network: false,
            program: OsStr::new("/bin/sh"),
            args: &[],
        }
    }

    #[test]
    fn template_with_no_items_emits_nothing() {
        let mut out = String::new();
        push_template(&mut out, WRITE_ROOTS_SB, 0);
        assert!(out.is_empty());
    }

    #[test]
    fn template_repeats_only_token_lines() {
        let mut out = String::new();
        push_template(&mut out, "; head\n(allow x\n  (p \"R_@INDEX@\")\n)\n", 3);
        assert_eq!(out, "\n; head\n(allow x\n  (p \"R_0\")\n  (p \"R_1\")\n  (p \"R_2\")\n)\n");
    }

    #[test]
    fn read_only_never_writes_workspace_or_roots() {
        let roots = [PathBuf::from("/Users/dev/cache")];
        let plan = plan_seatbelt(&input(Mode::ReadOnly, &roots, &[])).unwrap();
        assert!(!plan.profile.contains(PARAM_WORKSPACE));
        assert!(!plan.profile.contains(PARAM_WRITABLE_ROOT_PREFIX));
        assert_eq!(plan.params.len(), 1);
    }

    #[test]
    fn ancestors_stop_at_writable_locations() {
        let protected = [PathBuf::from("/Users/dev/ws/sub/.git"), PathBuf::from("/Users/dev/ws/.git")];
        let got = protected_ancestors(&protected, &[Path::new("/Users/dev/ws")]);
        assert_eq!(got, [PathBuf::from("/Users/dev/ws"), PathBuf::from("/Users/dev/ws/sub")]);
        assert!(protected_ancestors(&protected, &[Path::new("/elsewhere")]).is_empty());
    }

    #[test]
    fn path_rules() {
        type IsExpected = fn(&SeatbeltPlanError) -> bool;
        let bad: [(&str, IsExpected); 7] = [
            ("rel/ws", |e| matches!(e, SeatbeltPlanError::RelativePath { .. })),
            ("/Users/a/../b", |e| matches!(e, SeatbeltPlanError::NotNormalized { .. })),
            ("/Users/a/./b", |e| matches!(e, SeatbeltPlanError::NotNormalized { .. })),
            ("/Users//a", |e| matches!(e, SeatbeltPlanError::NotNormalized { .. })),
            ("/Users/a/", |e| matches!(e, SeatbeltPlanError::NotNormalized { .. })),
            ("/Users/a\tb", |e| matches!(e, SeatbeltPlanError::ControlCharacter { character: '\t', .. })),
            ("/var/folders/x", |e| matches!(e, SeatbeltPlanError::SymlinkedPrefix { symlink: "/var", .. })),
        ];
        for (path, is_expected) in bad {
            let err = checked_path(PathRole::Workspace, Path::new(path)).unwrap_err();
            assert!(is_expected(&err), "{path}: {err}");
        }
        let long = format!("/{}", "a".repeat(MACOS_PATH_MAX));
        assert!(matches!(checked_path(PathRole::Tmpdir, Path::new(&long)), Err(SeatbeltPlanError::TooLong { .. })));
        for ok in ["/", "/Users/a b/(c) \"d\" 'e' =f", "/private/var/folders/x", "/tmpfoo", "/Users/é"] {
            assert_eq!(checked_path(PathRole::Workspace, Path::new(ok)).unwrap(), ok);
        }
    }
}
