//! `cordon serve` driven by a real client in another language: the Python script
//! `tests/clients/serve_client.py` (standard library only) speaks the protocol over
//! pipes and judges effects from outside the sandbox.
//!
//! One test per scenario: concurrent runs, kill, malformed lines, an oversized line,
//! and closing stdin killing every child. Python is `CORDON_TEST_PYTHON` or `python3`;
//! a host that cannot run confined modes or has no Python prints `SKIP <test>: <reason>`
//! (a panic with `CORDON_MUST_ENFORCE=1`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

const CORDON: &str = env!("CARGO_BIN_EXE_cordon");

fn must_enforce() -> bool {
    std::env::var("CORDON_MUST_ENFORCE").is_ok_and(|v| v == "1")
}

fn skip_or_fail(test: &str, reason: &str) {
    if must_enforce() {
        panic!("CORDON_MUST_ENFORCE=1 but {test} would be skipped: {reason}");
    }
    println!("SKIP {test}: {reason}");
    eprintln!("SKIP {test}: {reason}");
}

fn python() -> Option<PathBuf> {
    let candidate = std::env::var_os("CORDON_TEST_PYTHON").map(PathBuf::from).unwrap_or_else(|| "python3".into());
    Command::new(&candidate).arg("-c").arg("import sys").output().ok()?.status.success().then_some(candidate)
}

/// A workspace (with `sub/` and `.git/`) and an outside directory, both outside `/tmp`
/// (which is private inside the sandbox). Removed on drop.
struct Dirs {
    root: PathBuf,
}

impl Dirs {
    fn new(name: &str) -> Dirs {
        static N: AtomicU32 = AtomicU32::new(0);
        let base = std::env::var_os("CORDON_TEST_DIR").map(PathBuf::from).unwrap_or_else(|| "/var/tmp".into());
        let root =
            base.join(format!("cordon-serve-{}-{}-{name}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(root.join("ws/sub")).unwrap();
        std::fs::create_dir_all(root.join("ws/.git")).unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        Dirs { root }
    }
    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }
    fn outside(&self) -> PathBuf {
        self.root.join("outside")
    }
}

impl Drop for Dirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Whether confined runs work here (else the reason).
fn confined_works(ws: &Path) -> Result<(), String> {
    let out = Command::new(CORDON)
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

fn scenario(test: &str, name: &str) {
    let dirs = Dirs::new(name);
    let Some(py) = python() else {
        return skip_or_fail(test, "no Python (set CORDON_TEST_PYTHON or install python3)");
    };
    if let Err(reason) = confined_works(&dirs.ws()) {
        return skip_or_fail(test, &reason);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/serve_client.py");
    let out = Command::new(py)
        .arg(script)
        .arg("--cordon")
        .arg(CORDON)
        .arg("--workspace")
        .arg(dirs.ws())
        .arg("--outside")
        .arg(dirs.outside())
        .arg(name)
        .output()
        .expect("running the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    assert!(out.status.success(), "scenario {name} failed ({}):\n{stdout}\n{stderr}", out.status);
    assert!(stdout.lines().any(|l| l.starts_with("ok ")), "scenario {name} checked nothing:\n{stdout}");
}

#[test]
fn serve_concurrent_runs() {
    scenario("serve_concurrent_runs", "concurrent");
}

#[test]
fn serve_kill_background() {
    scenario("serve_kill_background", "kill");
}

#[test]
fn serve_malformed_lines() {
    scenario("serve_malformed_lines", "malformed");
}

#[test]
fn serve_oversized_line() {
    scenario("serve_oversized_line", "oversized");
}

#[test]
fn serve_closing_stdin_kills_children() {
    scenario("serve_closing_stdin_kills_children", "eof-kills");
}

/// `echo REQ | cordon serve`: end of input must not abort the request it carried. The
/// run answers with its real result every time (it used to race the shutdown: some
/// runs came back aborted, some with no answer at all).
#[test]
fn serve_piped_request_gets_its_real_result() {
    const TRIES: usize = 200;
    let dirs = Dirs::new("piped");
    if let Err(reason) = confined_works(&dirs.ws()) {
        return skip_or_fail("serve_piped_request_gets_its_real_result", &reason);
    }
    let request = br#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"run","params":{"command":"echo piped"}}
"#;
    for i in 0..TRIES {
        let mut child = Command::new(CORDON)
            .args(["serve", "--mode", "workspace-write", "--cwd"])
            .arg(dirs.ws())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(request).unwrap();
        } // closed: end of input right after the request
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().next().unwrap_or_else(|| panic!("try {i}: no answer at all"));
        assert!(line.contains(r#""id":18446744073709551616,"#), "try {i}: id not echoed exactly: {line}");
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let r = &v["result"];
        assert_eq!(r["exit_code"], 0, "try {i}: {line}");
        assert_eq!(r["aborted"], false, "try {i}: {line}");
        assert_eq!(r["stdout"]["text"], "piped\n", "try {i}: {line}");
    }
}
