//! Running one probe: the sandbox under test (a target), the identity it runs as,
//! the process it becomes, and what came out.
//!
//! Three kinds of target run the same probe program (`cordon __probe OP ...`):
//! cordon itself (`cordon run --json --mode M --runner R --cwd WS -- ...`), another
//! sandbox's command prefix (`--wrapper`), and the host (no prefix: the control).
//! What it does not do: judge (that is the watches' and the catalog's job).

use crate::mode::Mode;
use crate::vocab::RunnerKind;
use serde::Deserialize;
use std::io::Read;
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where a probe runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `cordon run` with this runner and mode.
    Cordon {
        /// The runner (`--runner`).
        runner: RunnerKind,
        /// The mode (`--mode`).
        mode: Mode,
    },
    /// Another sandbox's command prefix; `{ws}` in it stands for the workspace.
    Wrapper {
        /// The prefix, split into words.
        prefix: Vec<String>,
        /// What the wrapper is meant to allow (decides which controls must work).
        mode: Mode,
    },
    /// Directly on the host: the control.
    Host,
}

impl Target {
    /// The column's name in the report (`landlock/read-only`, `wrapper/workspace-write`).
    pub fn name(&self) -> String {
        match self {
            Target::Cordon { runner, mode } => format!("{}/{}", runner.as_str(), mode.as_str()),
            Target::Wrapper { mode, .. } => format!("wrapper/{}", mode.as_str()),
            Target::Host => "host".into(),
        }
    }

    /// The mode the target enforces (`None` on the host).
    pub fn mode(&self) -> Option<Mode> {
        match self {
            Target::Cordon { mode, .. } | Target::Wrapper { mode, .. } => Some(*mode),
            Target::Host => None,
        }
    }
}

/// Who a probe runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The user name (or `self`).
    pub name: String,
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
}

impl Identity {
    /// Whether it is root.
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }
}

/// The probe program's report line.
#[derive(Clone, Debug, Deserialize)]
pub struct ProbeLine {
    /// The operation.
    pub op: String,
    /// Whether it worked.
    pub ok: bool,
    /// Its name.
    pub errname: String,
    /// Free text.
    pub detail: String,
}

/// Everything a run left that the judges may look at.
#[derive(Clone, Debug, Default)]
pub struct RunOutput {
    /// The probe's line, when it printed one.
    pub line: Option<ProbeLine>,
    /// The fatal signal that ended the command, if any.
    pub signal: Option<i32>,
    /// The command's exit code.
    pub exit_code: Option<i32>,
    /// The command's standard output.
    pub stdout: String,
    /// The command's standard error (for cordon: the command's, not cordon's).
    pub stderr: String,
    /// cordon's run result (`--json`), on a cordon target.
    pub report: Option<serde_json::Value>,
    /// The audit's own deadline stopped the run.
    pub timed_out: bool,
    /// cordon refused to run it (`SANDBOX_UNAVAILABLE`, `INVALID_POLICY`, ...), with
    /// its message; or the target could not be started.
    pub refused: Option<String>,
    /// Wall time of the run.
    pub elapsed: Duration,
}

/// What to run for one probe on one target.
pub struct Invocation<'a> {
    /// The cordon binary (outer `cordon run`, and the probe program inside).
    pub cordon: &'a Path,
    /// The program and its arguments inside the sandbox.
    pub argv: Vec<String>,
    /// Extra `cordon run` flags (ignored for other targets).
    pub cordon_flags: Vec<String>,
    /// Working directory (the workspace).
    pub cwd: PathBuf,
    /// The environment (replaces the audit's).
    pub env: Vec<(String, String)>,
    /// Standard input (default: `/dev/null`).
    pub stdin: Option<OwnedFd>,
    /// Descriptors handed over beyond stdio.
    pub fds: Vec<(OwnedFd, RawFd)>,
    /// The audit's deadline for the whole run.
    pub deadline: Duration,
}

/// The argv for `target` (the program to start first and everything after it).
pub fn command_line(target: &Target, inv: &Invocation<'_>) -> Vec<String> {
    let ws = inv.cwd.display().to_string();
    let mut v = vec![];
    match target {
        Target::Cordon { runner, mode } => {
            let secs = inv.deadline.as_secs().max(2).to_string();
            v.push(inv.cordon.display().to_string());
            v.extend(["run", "--json", "--timeout", &secs, "--mode", mode.as_str()].map(String::from));
            if *mode != Mode::FullAccess {
                v.push("--runner".into());
                v.push(runner.as_str().into());
            }
            v.push("--cwd".into());
            v.push(ws);
            v.extend(inv.cordon_flags.iter().cloned());
            v.push("--".into());
        }
        Target::Wrapper { prefix, .. } => v.extend(prefix.iter().map(|w| w.replace("{ws}", &ws))),
        Target::Host => {}
    }
    v.extend(inv.argv.iter().cloned());
    v
}

/// Reads a pipe to its end (at most 4 MiB kept) on a thread.
fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut out = vec![];
        let mut buf = [0u8; 16384];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            if out.len() < 4 << 20 {
                out.extend_from_slice(&buf[..n]);
            }
        }
        out
    })
}

/// Runs `inv` on `target` as `id` and collects what came out.
pub fn run(target: &Target, id: &Identity, inv: Invocation<'_>, spawned: &std::sync::Mutex<Vec<u32>>) -> RunOutput {
    let argv = command_line(target, &inv);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).current_dir(&inv.cwd).env_clear();
    for (k, v) in &inv.env {
        cmd.env(k, v);
    }
    if id.uid != cordon_stage::host::euid() {
        cmd.uid(id.uid).gid(id.gid);
    }
    cmd.stdin(inv.stdin.map(Stdio::from).unwrap_or_else(Stdio::null));
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    if !inv.fds.is_empty() {
        cordon_stage::probe::inherit_fds(&mut cmd, inv.fds);
    }
    let started = Instant::now();
    // A program copied a moment ago may still be open for writing in a child another
    // thread is forking (ETXTBSY until that child executes): retry briefly.
    let mut tries = 0;
    let mut child = loop {
        match cmd.spawn() {
            Ok(c) => break c,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => {
                return RunOutput { refused: Some(format!("cannot start {}: {e}", argv[0])), ..RunOutput::default() }
            }
        }
    };
    if matches!(target, Target::Cordon { .. }) {
        if let Ok(mut v) = spawned.lock() {
            v.push(child.id());
        }
    }
    let out = child.stdout.take().map(drain);
    let err = child.stderr.take().map(drain);
    let deadline = started + inv.deadline;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if Instant::now() >= deadline => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break None,
        }
    };
    let elapsed = started.elapsed();
    // A process that left the run may hold the pipes; do not wait for it forever.
    let join = |h: Option<std::thread::JoinHandle<Vec<u8>>>| -> String {
        let Some(h) = h else { return String::new() };
        let until = Instant::now() + Duration::from_secs(2);
        while !h.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        if h.is_finished() {
            String::from_utf8_lossy(&h.join().unwrap_or_default()).into_owned()
        } else {
            String::new()
        }
    };
    let (stdout, stderr) = (join(out), join(err));
    let mut r = RunOutput { timed_out, elapsed, ..RunOutput::default() };
    // What a sandbox's pid 1 (bubblewrap's, a shell) reports for a command killed by
    // signal N is exit 128+N: without a probe line, read it as that signal.
    let killed = |r: &mut RunOutput| {
        if r.signal.is_none() && r.line.is_none() {
            if let Some(c @ 129..=159) = r.exit_code {
                r.signal = Some(c - 128);
            }
        }
    };
    match target {
        Target::Cordon { .. } => read_cordon(&mut r, &stdout, &stderr, status.and_then(|s| s.code())),
        _ => {
            r.signal = status.and_then(|s| s.signal());
            r.exit_code = status.and_then(|s| s.code());
            r.line = probe_line(&stdout);
            r.stdout = stdout;
            r.stderr = stderr;
        }
    }
    killed(&mut r);
    r
}

/// The last line of `text` that parses as a probe report.
fn probe_line(text: &str) -> Option<ProbeLine> {
    text.lines().rev().find(|l| l.starts_with("{\"op\"")).and_then(|l| serde_json::from_str(l).ok())
}

/// Signal names cordon writes (`"SIGSYS"`) or numbers.
fn signal_number(v: &serde_json::Value) -> Option<i32> {
    if let Some(n) = v.as_i64() {
        return i32::try_from(n).ok();
    }
    let name = v.as_str()?;
    let name = name.strip_prefix("SIG").unwrap_or(name);
    nix::sys::signal::Signal::iterator().find(|s| s.as_str().strip_prefix("SIG") == Some(name)).map(|s| s as i32)
}

fn read_cordon(r: &mut RunOutput, stdout: &str, stderr: &str, code: Option<i32>) {
    let json: Option<serde_json::Value> = stdout.lines().rev().find_map(|l| serde_json::from_str(l).ok());
    let Some(j) = json else {
        r.refused = Some(format!("cordon printed no result (exit {code:?}): {}", tail(stderr)));
        return;
    };
    if let Some(e) = j.get("error") {
        let code = e.get("code").and_then(|c| c.as_str()).unwrap_or("?");
        let msg = e.get("message").and_then(|c| c.as_str()).unwrap_or("");
        r.refused = Some(format!("{code}: {msg}"));
        r.report = Some(j);
        return;
    }
    if j["sandbox"]["runner_failed"] == true {
        r.refused = Some(format!("RUNNER_FAILED: {}", tail(stderr)));
    }
    r.stdout = j["stdout"]["text"].as_str().unwrap_or("").to_string();
    r.stderr = j["stderr"]["text"].as_str().unwrap_or("").to_string();
    r.exit_code = j["exit_code"].as_i64().and_then(|c| i32::try_from(c).ok());
    r.signal = signal_number(&j["signal"]);
    r.line = probe_line(&r.stdout);
    if j["timed_out"] == true {
        r.timed_out = true;
    }
    r.report = Some(j);
}

/// The last 300 characters of `s`, on one line.
pub fn tail(s: &str) -> String {
    let t: String = s.chars().rev().take(300).collect::<Vec<_>>().into_iter().rev().collect();
    t.replace('\n', " ").trim().to_string()
}

/// Splits a wrapper prefix into words as a POSIX shell would (single quotes, double
/// quotes with `\` escapes, backslashes); no expansion of any kind.
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = vec![];
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err("unterminated single quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => cur.push(c),
                            Some(c) => {
                                cur.push('\\');
                                cur.push(c);
                            }
                            None => return Err("unterminated double quote".into()),
                        },
                        Some(c) => cur.push(c),
                        None => return Err("unterminated double quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => cur.push(c),
                    None => return Err("trailing backslash".into()),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::split_words;

    #[test]
    fn words_split_like_a_shell_without_expansion() {
        assert_eq!(split_words("bwrap --bind {ws} {ws}").unwrap(), ["bwrap", "--bind", "{ws}", "{ws}"]);
        assert_eq!(split_words(r#"a 'b c' "d \"e\" $f" g\ h ''"#).unwrap(), ["a", "b c", "d \"e\" $f", "g h", ""]);
        assert!(split_words("'open").is_err());
        assert!(split_words("x\\").is_err());
    }
}
