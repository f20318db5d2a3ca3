//! The probe program: `cordon __probe OP [ARGS...]` attempts ONE operation and prints
//! one JSON line, `{"op":…,"ok":…,"errno":N,"errname":"EACCES","detail":"…"}`.
//!
//! `cordon audit` runs it inside the sandbox under test (through `cordon run`, or
//! through another sandbox's command prefix) and directly on the host (the control),
//! then judges the effect from outside; the line says what the kernel answered inside,
//! for the report. The `cordon` binary itself is the probe, so the audit needs nothing
//! the host does not already have.
//!
//! Exit status: 0 the operation worked, 1 refused or failed, 2 usage error (a bug in
//! the catalog), 3 unsupported on this architecture. A fatal signal (`SIGSYS` from a
//! filter) kills it without a line; the audit sees the signal.
//!
//! Operation families live in `fs` (files and metadata), `net` (sockets), `proc`
//! (processes, lifetime, resources) and `sys` (privilege, namespaces, keyrings,
//! terminals, system-call entry points, IPC, environment). Raw system calls come from
//! the stage crate's `probe` module; this module has no `unsafe`.
//!
//! An argument containing `@ppid` has it replaced by the probe's parent pid (the
//! run's init, when the probe is the command itself).

mod fs;
mod net;
mod proc;
mod sys;

use serde::Serialize;
use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;

/// The hidden subcommand that runs the probe program.
pub const SUBCOMMAND: &str = "__probe";

/// Exit status: the operation worked.
pub const EXIT_OK: i32 = 0;
/// Exit status: refused or failed.
pub const EXIT_REFUSED: i32 = 1;
/// Exit status: a usage error (a bug in the catalog, never a verdict).
pub const EXIT_USAGE: i32 = 2;
/// Exit status: unsupported on this architecture.
pub const EXIT_UNSUPPORTED: i32 = 3;

/// The bytes most write operations write.
pub(crate) const DEFAULT_DATA: &str = "cordon-probe-was-here\n";

/// Why an operation did not complete.
pub(crate) enum Fail {
    /// The kernel refused a step.
    Os { step: String, err: io::Error },
    /// The arguments were wrong (a catalog bug).
    Usage(String),
    /// Not possible on this architecture.
    Unsupported(String),
}

/// An operation's outcome.
pub(crate) type Outcome = Result<(), Fail>;

/// Attaches a step name to a system call's error.
pub(crate) trait Step<T> {
    fn step(self, step: &str) -> Result<T, Fail>;
}

impl<T> Step<T> for io::Result<T> {
    fn step(self, step: &str) -> Result<T, Fail> {
        self.map_err(|err| Fail::Os { step: step.to_string(), err })
    }
}

/// The running operation: its arguments and the detail it accumulates.
pub(crate) struct Op {
    args: Vec<OsString>,
    /// Free text for the report (notes, what was read, earlier refused steps).
    pub(crate) detail: String,
}

impl Op {
    /// Argument `i` (0 is the first after the operation's name).
    pub(crate) fn arg(&self, i: usize) -> Result<&std::ffi::OsStr, Fail> {
        self.args.get(i).map(|a| a.as_os_str()).ok_or_else(|| Fail::Usage(format!("missing argument {}", i + 1)))
    }

    /// Argument `i` as UTF-8 text.
    pub(crate) fn text(&self, i: usize) -> Result<&str, Fail> {
        self.arg(i)?.to_str().ok_or_else(|| Fail::Usage(format!("argument {} is not UTF-8", i + 1)))
    }

    /// Argument `i`, or `default` when absent.
    pub(crate) fn text_or<'a>(&'a self, i: usize, default: &'a str) -> &'a str {
        self.args.get(i).and_then(|a| a.to_str()).unwrap_or(default)
    }

    /// Argument `i` as a C string (a path for the raw calls).
    pub(crate) fn cstr(&self, i: usize) -> Result<CString, Fail> {
        CString::new(self.arg(i)?.as_bytes()).map_err(|_| Fail::Usage(format!("argument {} has a NUL", i + 1)))
    }

    /// Argument `i` as a number (decimal or `0x` hex).
    pub(crate) fn num<T: TryFrom<i128>>(&self, i: usize) -> Result<T, Fail> {
        let t = self.text(i)?;
        let v = match t.strip_prefix("0x") {
            Some(h) => i128::from_str_radix(h, 16),
            None => t.parse::<i128>(),
        };
        v.ok()
            .and_then(|v| T::try_from(v).ok())
            .ok_or_else(|| Fail::Usage(format!("argument {} is not a number", i + 1)))
    }

    /// Argument count.
    pub(crate) fn len(&self) -> usize {
        self.args.len()
    }

    /// Appends a note (`"; "`-separated).
    pub(crate) fn note(&mut self, text: impl AsRef<str>) {
        if !self.detail.is_empty() {
            self.detail.push_str("; ");
        }
        self.detail.push_str(text.as_ref());
    }
}

/// One operation: its name and its implementation.
pub(crate) type OpFn = fn(&mut Op) -> Outcome;

/// The line the probe prints.
#[derive(Serialize)]
struct Line<'a> {
    op: &'a str,
    ok: bool,
    errno: i32,
    errname: String,
    detail: &'a str,
}

/// The symbolic name of an errno (`EACCES`), or `E<n>`.
pub fn errno_name(n: i32) -> String {
    let e = nix::errno::Errno::from_raw(n);
    if e == nix::errno::Errno::UnknownErrno {
        format!("E{n}")
    } else {
        format!("{e:?}")
    }
}

fn find(op: &str) -> Option<OpFn> {
    [fs::OPS, net::OPS, proc::OPS, sys::OPS]
        .iter()
        .flat_map(|t| t.iter())
        .find(|(name, _)| *name == op)
        .map(|(_, f)| *f)
}

/// Every operation name (for the catalog's self-check).
pub fn operation_names() -> Vec<&'static str> {
    [fs::OPS, net::OPS, proc::OPS, sys::OPS].iter().flat_map(|t| t.iter()).map(|(n, _)| *n).collect()
}

/// `cordon __probe OP [ARGS...]`: runs the operation, prints its line, exits.
pub fn main(args: Vec<OsString>) -> ! {
    let mut it = args.into_iter();
    let op_name = it.next().map(|o| o.to_string_lossy().into_owned()).unwrap_or_default();
    let ppid = std::os::unix::process::parent_id().to_string();
    let args = it
        .map(|a| match a.to_str() {
            Some(t) if t.contains("@ppid") => OsString::from(t.replace("@ppid", &ppid)),
            _ => a,
        })
        .collect();
    let mut op = Op { args, detail: String::new() };
    let outcome = match find(&op_name) {
        Some(f) => f(&mut op),
        None => Err(Fail::Usage(format!("unknown operation {op_name:?}"))),
    };
    let (ok, errno, errname, code) = match outcome {
        Ok(()) => (true, 0, String::new(), EXIT_OK),
        Err(Fail::Os { step, err }) => {
            let n = err.raw_os_error().unwrap_or(0);
            op.note(format!("{step}: {err}"));
            (false, n, errno_name(n), EXIT_REFUSED)
        }
        Err(Fail::Usage(m)) => {
            op.note(format!("usage: {m}"));
            (false, 0, "USAGE".into(), EXIT_USAGE)
        }
        Err(Fail::Unsupported(m)) => {
            op.note(format!("unsupported: {m}"));
            (false, libc::ENOSYS, "UNSUPPORTED".into(), EXIT_UNSUPPORTED)
        }
    };
    let line = Line { op: &op_name, ok, errno, errname, detail: &op.detail };
    let mut text = serde_json::to_string(&line).unwrap_or_default();
    text.push('\n');
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
    std::process::exit(code)
}
