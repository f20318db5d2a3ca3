//! Test support shared by every suite (each test binary includes it as `mod common`).
//!
//! - Skips ([`skip_or_fail`], [`Skip`]): a test that cannot be judged on this host prints
//!   `SKIP <test>: <reason>` on the terminal, or fails when `CORDON_MUST_ENFORCE=1`.
//! - [`cli`]: running the `cordon` binary with a hang deadline ([`cli::cordon`]), and
//!   whether this host can confine at all.
//! - [`golden`]: golden-file comparison for the planner suites.
//! - `sandbox` (Linux only, re-exported here): the security suite's harness: the probe
//!   program, identities (root and `CORDON_TEST_USER`), per-case directories ([`Ctx`]),
//!   effect observers. See its module docs.
//!
//! Why skips bypass libtest's capture: libtest captures what the print macros write
//! (`print!`, `eprint!`: `std::io::set_output_capture`), so a `println!("SKIP ...")`
//! shows only for a failing test, and a suite whose cases all skipped reports nothing
//! but "ok". A write to the process's standard error handle (`std::io::stderr()`) is
//! not captured: it goes straight to fd 2 (checked with rustc 1.95: `println!` and
//! `eprintln!` stay hidden without `--nocapture`, `stderr().write_all` and a raw write
//! to fd 2 show, from the test thread and from threads it spawns).
#![allow(dead_code)]

pub mod cli;
pub mod golden;
#[cfg(target_os = "linux")]
mod sandbox;
#[cfg(target_os = "linux")]
#[allow(unused_imports)] // used by the suites that include the harness
pub use sandbox::*;

use std::io::Write;
use std::path::PathBuf;

/// `PATH` for commands the tests start with a controlled environment.
pub const PATH_ENV: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Set to `1` (CI does) to turn every skip into a failure.
pub const MUST_ENFORCE_ENV: &str = "CORDON_MUST_ENFORCE";

/// A reason this case cannot be judged on this host.
#[derive(Debug)]
pub struct Skip(pub String);

impl<E: std::fmt::Display> From<E> for Skip {
    fn from(e: E) -> Self {
        Skip(e.to_string())
    }
}

/// Whether `CORDON_MUST_ENFORCE=1`: a host that cannot judge a case is a failure.
pub fn must_enforce() -> bool {
    std::env::var(MUST_ENFORCE_ENV).is_ok_and(|v| v == "1")
}

/// Prints `SKIP <test>: <reason>` on the terminal (past libtest's capture), or panics
/// when `CORDON_MUST_ENFORCE=1`.
#[track_caller]
pub fn skip_or_fail(test: &str, reason: &str) {
    if must_enforce() {
        panic!("{MUST_ENFORCE_ENV}=1 but {test} would be skipped: {reason}");
    }
    loud(&format!("SKIP {test}: {reason}"));
}

/// Prints `SKIP <test>: <reason>` on the terminal and never fails, not even under
/// `CORDON_MUST_ENFORCE=1`: only for a precondition that says nothing about the host's
/// enforcement (the case needs root to switch uid, a tool the test itself drives).
pub fn skip_regardless(test: &str, reason: &str) {
    loud(&format!("SKIP {test}: {reason}"));
}

/// Writes one line to the process's standard error handle, which libtest does not
/// capture (it captures only the print macros): skips, notes, traces.
pub fn loud(line: &str) {
    // One write per line, so lines from parallel tests do not interleave.
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// The first `prog` in `PATH` (or the standard `PATH` when it is unset).
pub fn find_in_path(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| PATH_ENV.into());
    std::env::split_paths(&path).map(|d| d.join(prog)).find(|p| p.is_file())
}

/// Directories a confined run does not see as the host's: its private `/tmp`,
/// `/dev/shm` and `~/.cache` layers (README, "What a command sees").
const RUN_PRIVATE_DIRS: [&str; 2] = ["/tmp", "/dev/shm"];

/// Where the tests' scratch directories live: cargo's per-package test scratch
/// directory (`CARGO_TARGET_TMPDIR`) unless it lies where a confined run has a private
/// layer of its own (a target directory under `/tmp`, where a newcomer's clone often
/// is: a path there means something else inside the sandbox), then `$CORDON_TEST_DIR`
/// or `/var/tmp`.
pub fn scratch_base() -> PathBuf {
    let target_tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let canonical = target_tmp.canonicalize().unwrap_or_else(|_| target_tmp.clone());
    if RUN_PRIVATE_DIRS.iter().any(|d| canonical.starts_with(d)) {
        std::env::var_os("CORDON_TEST_DIR").map(PathBuf::from).unwrap_or_else(|| "/var/tmp".into())
    } else {
        target_tmp
    }
}

/// A temporary directory under [`scratch_base`], named `cordon-<tag>-...`; removed on
/// drop.
pub fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("cordon-{tag}-")).tempdir_in(scratch_base()).expect("create a temp dir")
}

/// A scratch tree outside `/tmp` (which is private inside the sandbox):
/// `$CORDON_TEST_DIR` or `/var/tmp`, `/cordon-<tag>-<pid>-<n>`, with `ws/` (holding
/// `sub/` and `.git/`) and `outside/`. Removed on drop.
pub struct VarTmp {
    pub root: PathBuf,
}

impl VarTmp {
    pub fn new(tag: &str) -> VarTmp {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let base = std::env::var_os("CORDON_TEST_DIR").map(PathBuf::from).unwrap_or_else(|| "/var/tmp".into());
        let n = N.fetch_add(1, Ordering::Relaxed);
        let root = base.join(format!("cordon-{tag}-{}-{n}", std::process::id()));
        for d in ["ws/sub", "ws/.git", "outside"] {
            std::fs::create_dir_all(root.join(d)).unwrap_or_else(|e| panic!("mkdir {}/{d}: {e}", root.display()));
        }
        VarTmp { root }
    }

    /// The workspace (a `.git` directory and `sub/` inside).
    pub fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    /// A directory outside the workspace.
    pub fn outside(&self) -> PathBuf {
        self.root.join("outside")
    }
}

impl Drop for VarTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
