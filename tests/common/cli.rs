//! Running the `cordon` binary from a test: [`cordon`] (one invocation with a hang
//! deadline, both output streams collected), [`run_bounded`] (any command, same
//! deadline), and whether this host can confine at all ([`confined_unavailable`],
//! [`confined_works`]).

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Hard ceiling for one cordon invocation; a hang is a failure, never a wait.
pub const CORDON_DEADLINE: Duration = Duration::from_secs(60);

/// The cordon binary under test: this build's, or `CORDON_TEST_BIN` (to show that a
/// CLI case fails against an older build: `CORDON_TEST_BIN=/old/cordon cargo test`).
pub fn cordon_bin() -> String {
    std::env::var("CORDON_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_cordon").to_string())
}

/// What a bounded command left behind.
pub struct Bounded {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Spawns `cmd` (stdout and stderr must be piped) and waits with a hard deadline
/// ([`CORDON_DEADLINE`]); never hangs the suite. Panics, naming `desc`, when the command
/// outlives the deadline or something it left behind still holds its output pipes 10 s
/// after it exited (a process that outlived the run).
pub fn run_bounded(mut cmd: Command, desc: &str) -> Bounded {
    let mut child: Child = cmd.spawn().unwrap_or_else(|e| panic!("spawn `{desc}`: {e}"));
    let rx_out = reader(child.stdout.take().expect("stdout piped"));
    let rx_err = reader(child.stderr.take().expect("stderr piped"));
    let deadline = Instant::now() + CORDON_DEADLINE;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`{desc}` did not finish within {CORDON_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    // The command has exited; its pipes must close now. Something still holding them
    // open is a process that outlived the run.
    let grab = |rx: mpsc::Receiver<Vec<u8>>, which: &str| {
        let v = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| {
            panic!("`{desc}`: {which} still open 10 s after cordon exited: a process outlived the run")
        });
        String::from_utf8_lossy(&v).into_owned()
    };
    Bounded { status, stdout: grab(rx_out, "stdout"), stderr: grab(rx_err, "stderr") }
}

fn reader(mut r: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut v = vec![];
        let _ = r.read_to_end(&mut v);
        let _ = tx.send(v);
    });
    rx
}

/// One `cordon` invocation: its exit status and both output streams.
pub struct CliOut {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CliOut {
    /// The last line of stdout as JSON (`--json` prints one object, last).
    #[track_caller]
    pub fn json(&self) -> Value {
        let line = self.stdout.lines().last().unwrap_or_else(|| panic!("no JSON on stdout; stderr: {}", self.stderr));
        serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {:?}; stderr: {}", self.stdout, self.stderr))
    }

    /// `error.code` of the JSON on stdout.
    #[track_caller]
    pub fn error_code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap_or_else(|| panic!("no error.code: {}", self.stdout)).to_string()
    }
}

/// Runs `cordon ARGS` in `cwd` with `env` added (stdin from /dev/null) under the hang
/// deadline; panics if cordon itself dies of a signal.
pub fn cordon(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> CliOut {
    let mut cmd = Command::new(cordon_bin());
    cmd.args(args).current_dir(cwd).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.envs(env.iter().copied());
    let out = run_bounded(cmd, &format!("cordon {}", args.join(" ")));
    let code =
        out.status.code().unwrap_or_else(|| panic!("cordon itself died: {:?}; stderr: {}", out.status, out.stderr));
    CliOut { code, stdout: out.stdout, stderr: out.stderr }
}

/// Why the confined modes (read-only, workspace-write) cannot be enforced here, if
/// they cannot: the library's runner selection in hard mode, as `cordon run` does it.
pub fn confined_unavailable() -> Option<String> {
    use cordon::{ExecutionPolicy, HostFacts, Mode, RunnerChoice};
    let host = HostFacts::detect();
    [Mode::ReadOnly, Mode::WorkspaceWrite].into_iter().find_map(|mode| {
        let policy = ExecutionPolicy {
            mode,
            workspace: super::scratch_base(),
            writable_roots: vec![],
            protected: vec![],
            network: false,
            best_effort: false,
            accept_gaps: Vec::new(),
            allow_unix_sockets: Vec::new(),
            allow_hosts: Default::default(),
            git: Default::default(),
        };
        cordon::runner::select(&policy, &host, RunnerChoice::Auto)
            .err()
            .map(|e| format!("{mode} cannot be enforced here: {e}"))
    })
}

/// Whether `cordon run --mode workspace-write` works in `ws` (else cordon's answer).
pub fn confined_works(ws: &Path) -> Result<(), String> {
    let out = Command::new(cordon_bin())
        .args(["run", "--json", "--mode", "workspace-write", "--cwd"])
        .arg(ws)
        .args(["--", "true"])
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("cordon run cannot confine here: {}", String::from_utf8_lossy(&out.stdout)))
    }
}

/// Run one scenario of a Python client under `tests/clients/` (`client`, e.g.
/// `serve_client.py`) with `py` against this cordon, in `dirs`' workspace and outside
/// directory; the scenario must succeed and check something (print a line `ok ...`).
/// Skips (loudly) where the confined modes cannot run.
pub fn client_scenario(test: &str, py: &Path, client: &str, dirs: &crate::common::VarTmp, name: &str) {
    if let Err(reason) = confined_works(&dirs.ws()) {
        return crate::common::skip_or_fail(test, &reason);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients").join(client);
    let out = Command::new(py)
        .arg(script)
        .arg("--cordon")
        .arg(cordon_bin())
        .arg("--workspace")
        .arg(dirs.ws())
        .arg("--outside")
        .arg(dirs.outside())
        .arg(name)
        .output()
        .unwrap_or_else(|e| panic!("running {client}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    assert!(out.status.success(), "scenario {name} failed ({}):\n{stdout}\n{stderr}", out.status);
    assert!(stdout.lines().any(|l| l.starts_with("ok ")), "scenario {name} checked nothing:\n{stdout}");
}
