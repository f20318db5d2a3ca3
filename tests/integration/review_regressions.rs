//! Regressions for findings of the security review, judged by effect:
//! - a datagram `socketpair()` must not reach a unix socket outside (network off);
//! - a flood of refused syscalls must not starve cordon's deadline;
//! - the command must not change the limits of pid 1 (its init);
//! - a tree deeper than a path can name in a writable root must not refuse the run.

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{find_in_path, skip_or_fail, VarTmp};

/// Skips loudly (or fails under `CORDON_MUST_ENFORCE=1`); true, for `&&` chains.
fn skip(test: &str, why: &str) -> bool {
    skip_or_fail(test, why);
    true
}

fn have(tool: &str) -> bool {
    find_in_path(tool).is_some()
}

/// A scratch directory outside /tmp (which is private inside the sandbox).
fn scratch(tag: &str) -> VarTmp {
    VarTmp::new(&format!("rr-{tag}"))
}

/// `cordon run --json --cwd WS ARGS...`: the result (or error) object.
fn cordon(ws: &Path, args: &[&str]) -> serde_json::Value {
    let ws_s = ws.to_str().unwrap();
    let mut all = vec!["run", "--json", "--cwd", ws_s];
    all.extend_from_slice(args);
    crate::common::cli::cordon(&all, ws, &[]).json()
}

fn confined_available(test: &str, ws: &Path) -> bool {
    let j = cordon(ws, &["--mode", "read-only", "--", "true"]);
    if j.get("error").is_some() {
        return !skip(test, &format!("confined runs unavailable: {j}"));
    }
    true
}

#[test]
fn datagram_socketpair_cannot_reach_an_outside_unix_socket() {
    let test = "datagram_socketpair_cannot_reach_an_outside_unix_socket";
    let d = scratch("dgram");
    if !confined_available(test, &d.root) || (!have("python3") && skip(test, "python3 is not installed")) {
        return;
    }
    let sock = d.root.join("outside.sock");
    let listener = UnixDatagram::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    // Control: the same send from outside the sandbox arrives.
    let script = format!(
        "import socket\na, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\na.sendto(b'escaped', '{}')\n",
        sock.display()
    );
    let control = Command::new("python3").args(["-c", &script]).status().unwrap();
    assert!(control.success());
    let mut buf = [0u8; 32];
    assert!(listener.recv(&mut buf).is_ok(), "control: the host send did not arrive");
    for mode in ["read-only", "workspace-write"] {
        let j = cordon(&d.root, &["--mode", mode, "--", "python3", "-c", &script]);
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            listener.recv(&mut buf).is_err(),
            "{mode}: a datagram from the sandbox reached the outside socket: {j}"
        );
        assert_eq!(j["sandbox"]["denied"], true, "{mode}: the refusal must be reported: {j}");
    }
}

#[test]
fn a_flood_of_refused_syscalls_does_not_starve_the_deadline() {
    let test = "a_flood_of_refused_syscalls_does_not_starve_the_deadline";
    let d = scratch("flood");
    if !confined_available(test, &d.root) || (!have("cc") && skip(test, "cc is not installed")) {
        return;
    }
    let src = d.root.join("flood.c");
    std::fs::write(
        &src,
        "#include <pthread.h>\n#include <sys/socket.h>\n#include <unistd.h>\n\
         static void *f(void *a) { (void)a; for (;;) { int s = socket(AF_INET, SOCK_STREAM, 0); if (s >= 0) close(s); } return 0; }\n\
         int main(void) { pthread_t t; for (int i = 0; i < 256; i++) pthread_create(&t, 0, f, 0); pause(); return 0; }\n",
    )
    .unwrap();
    let ok = Command::new("cc").args(["-O2", "-pthread", "-o"]).arg(d.root.join("flood")).arg(&src).status().unwrap();
    assert!(ok.success(), "compiling the flood program");
    let start = Instant::now();
    let j = cordon(&d.root, &["--mode", "workspace-write", "--timeout", "1", "--", "./flood"]);
    // Only catches a hang: the deadline plus the kill grace is about 4 s at most.
    assert!(start.elapsed() < Duration::from_secs(30), "the run outlived its deadline by far: {:?}", start.elapsed());
    assert_eq!(j["timed_out"], true, "{j}");
}

#[test]
fn the_command_cannot_limit_its_init() {
    let test = "the_command_cannot_limit_its_init";
    let d = scratch("prlimit");
    if !confined_available(test, &d.root) || (!have("python3") && skip(test, "python3 is not installed")) {
        return;
    }
    let script = "import resource\ntry:\n    resource.prlimit(1, resource.RLIMIT_CPU, (1, 1))\n    print('changed')\nexcept OSError as e:\n    print('refused', e.errno)\n";
    let j = cordon(&d.root, &["--mode", "workspace-write", "--", "python3", "-c", script]);
    assert_eq!(j["stdout"]["text"], "refused 1\n", "{j}");
    assert_eq!(j["exit_code"], 0, "{j}");
}

#[test]
fn a_tree_deeper_than_a_path_does_not_refuse_the_run() {
    // A leftover tree thousands of levels deep (a crashed cordon's held storage in
    // /tmp, or anyone's) made every workspace-write run whose writable roots held it
    // fail with INVALID_POLICY: the git-directory search could not name its bottom.
    // It is searched by descriptor; a repository down there, which no protected path
    // could name, still refuses the run.
    let test = "a_tree_deeper_than_a_path_does_not_refuse_the_run";
    let d = scratch("deep");
    if !confined_available(test, &d.root) {
        return;
    }
    struct Rm(std::path::PathBuf);
    impl Drop for Rm {
        fn drop(&mut self) {
            // GNU rm removes a tree of any depth.
            let _ = Command::new("rm").arg("-rf").arg(&self.0).status();
        }
    }
    let _rm = Rm(d.root.join("d"));
    let bottom = crate::spill::deep_chain(&d.root, 3000);
    let j = cordon(&d.root, &["--mode", "workspace-write", "--", "sh", "-c", "echo ok > made"]);
    assert_eq!(j["exit_code"], 0, "{j}");
    assert_eq!(std::fs::read_to_string(d.root.join("made")).unwrap(), "ok\n", "control: the run wrote: {j}");
    // SAFETY: mkdirat relative to a directory descriptor we own.
    let made = unsafe { libc::mkdirat(std::os::fd::AsRawFd::as_raw_fd(&bottom), c".git".as_ptr(), 0o755) };
    assert_eq!(made, 0, "mkdirat .git");
    std::fs::remove_file(d.root.join("made")).unwrap();
    let j = cordon(&d.root, &["--mode", "workspace-write", "--", "sh", "-c", "echo ok > made"]);
    assert_eq!(j["error"]["code"], "INVALID_POLICY", "{j}");
    assert!(!d.root.join("made").exists(), "the refused run ran");
}
