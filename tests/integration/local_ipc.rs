//! Local IPC with the network off: a test suite of the run's own (Python's `unittest`,
//! standard library only) starts an HTTP server on 127.0.0.1 and on ::1 and fetches
//! from it, binds and connects a unix socket (in the workspace under workspace-write,
//! in the private `TMPDIR` under read-only), and uses `multiprocessing.Manager` and a
//! `multiprocessing.Pool`; and the one-liner of issue 26. Each must pass with nothing
//! local reported as a denial, through `cordon run` (both runners, both confined modes, as the caller
//! and, when the suite runs as root, as `CORDON_TEST_USER`), `cordon serve` and
//! `cordon mcp` (`tests/clients/mcp_client.py`, scenario `ipc`).
//!
//! What the host keeps closed is the security suite's (`net_loopback_*`,
//! `net_host_socket_in_the_workspace_*`, `net_a_run_cannot_reach_*`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::cli::{client_scenario, confined_works, cordon_bin, run_bounded};
use crate::common::{find_in_path, skip_or_fail, skip_regardless, VarTmp, PATH_ENV};

/// The test suite the runs execute (`python3 ipc_suite.py SOCKDIR`).
const SUITE: &str = r#"import http.server, multiprocessing, os, socket, sys, threading, unittest, urllib.request

SOCK_DIR = sys.argv.pop(1)


class V6Server(http.server.HTTPServer):
    address_family = socket.AF_INET6


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class LocalIpc(unittest.TestCase):
    def serve_and_fetch(self, cls, host, url_host):
        srv = cls((host, 0), Quiet)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        try:
            with urllib.request.urlopen("http://%s:%d/ipc_suite.py" % (url_host, srv.server_port), timeout=10) as r:
                self.assertEqual(r.status, 200)
                self.assertIn(b"class LocalIpc", r.read())
        finally:
            srv.shutdown()
            srv.server_close()

    def test_http_server_on_ipv4_loopback(self):
        self.serve_and_fetch(http.server.HTTPServer, "127.0.0.1", "127.0.0.1")

    def test_http_server_on_ipv6_loopback(self):
        self.serve_and_fetch(V6Server, "::1", "[::1]")

    def test_unix_socket_bound_and_connected(self):
        path = os.path.join(SOCK_DIR, "ipc-%d.sock" % os.getpid())
        server = socket.socket(socket.AF_UNIX)
        server.bind(path)
        server.listen()
        client = socket.socket(socket.AF_UNIX)
        client.connect(path)
        peer, _ = server.accept()
        client.sendall(b"ping")
        self.assertEqual(peer.recv(4), b"ping")
        for s in (peer, client, server):
            s.close()
        os.unlink(path)

    def test_multiprocessing_manager(self):
        with multiprocessing.Manager() as mgr:
            d = mgr.dict()
            d[1] = 2
            self.assertEqual(dict(d), {1: 2})

    def test_multiprocessing_pool(self):
        with multiprocessing.Pool(2) as pool:
            self.assertEqual(pool.map(abs, [-1, -2, -3]), [1, 2, 3])


if __name__ == "__main__":
    unittest.main()
"#;

/// The one-liner of issue 26.
const MANAGER_ONE_LINER: &str = "import multiprocessing as m; mgr=m.Manager(); d=mgr.dict(); d[1]=2; print(d)";

/// `/usr/bin/python3` or whichever `python3` the standard `PATH` finds (one an
/// unprivileged user can execute, unlike a root-only pyenv shim).
fn python3() -> Option<PathBuf> {
    std::env::split_paths(PATH_ENV).map(|d| d.join("python3")).find(|p| p.is_file())
}

/// An identity to run as: `None` is the caller; `Some((name, uid, gid))` another user.
type Who = Option<(String, u32, u32)>;

/// The caller, and `CORDON_TEST_USER` when the suite runs as root.
fn identities() -> Vec<Who> {
    let mut v: Vec<Who> = vec![None];
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        if let Ok(name) = std::env::var("CORDON_TEST_USER") {
            let out = Command::new("id").args(["-u", &name]).output().ok();
            let uid = out.and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<u32>().ok());
            let out = Command::new("id").args(["-g", &name]).output().ok();
            let gid = out.and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<u32>().ok());
            if let (Some(uid), Some(gid)) = (uid, gid) {
                v.push(Some((name, uid, gid)));
            }
        }
    }
    v
}

/// A scratch tree whose workspace holds the suite, owned by `who`, with a copy of the
/// cordon binary every user can execute.
fn setup(tag: &str, who: &Who) -> (VarTmp, PathBuf) {
    let dirs = VarTmp::new(tag);
    std::fs::write(dirs.ws().join("ipc_suite.py"), SUITE).unwrap();
    let bin = dirs.root.join("cordon");
    std::fs::copy(cordon_bin(), &bin).unwrap();
    for (p, mode) in [(&dirs.root, 0o755), (&bin, 0o755)] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    if let Some((_, uid, gid)) = who {
        for p in [dirs.ws(), dirs.ws().join("ipc_suite.py"), dirs.ws().join("sub"), dirs.ws().join(".git")] {
            std::os::unix::fs::chown(&p, Some(*uid), Some(*gid)).unwrap();
        }
    }
    (dirs, bin)
}

/// `cordon run --json ARGS` in `ws` as `who`, with the standard `PATH`.
fn cordon_as(who: &Who, bin: &Path, ws: &Path, args: &[&str]) -> serde_json::Value {
    let mut cmd = match who {
        None => Command::new(bin),
        Some((_, uid, gid)) => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid", &uid.to_string(), "--regid", &gid.to_string(), "--clear-groups"]).arg(bin);
            c
        }
    };
    cmd.arg("run").arg("--json").args(args).current_dir(ws);
    // HOME outside the workspace (a workspace that holds the home is refused).
    cmd.env_clear().env("PATH", PATH_ENV).env("LANG", "C.UTF-8").env("HOME", ws.parent().unwrap().join("outside"));
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let out = run_bounded(cmd, &format!("cordon run {}", args.join(" ")));
    serde_json::from_str(out.stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", out.stdout, out.stderr))
}

/// The run passed, and nothing local was reported as a denial: no loopback address,
/// no unix socket. (A name lookup is a denial of its own, and a fair one: Python's
/// `http.server` resolves its address's name, and for `::1` glibc asks the DNS server
/// the host names, which the run cannot reach.)
fn assert_clean(j: &serde_json::Value, what: &str) {
    assert_eq!(j["exit_code"], 0, "{what}: {j}");
    let local = |t: &str| t.starts_with("unix:") || t.starts_with("inet:127.") || t.starts_with("inet6:[::");
    let denials = j["sandbox"]["denials"].as_array().cloned().unwrap_or_default();
    for d in &denials {
        let t = d["target"].as_str().unwrap_or("");
        assert!(d["kind"] == "network" && !local(t), "{what}: local IPC was reported as a denial: {d}\n{j}");
        assert!(t.ends_with(":53"), "{what}: a denial other than a name lookup: {d}\n{j}");
    }
}

#[test]
fn local_ipc_test_suite_passes_in_every_confined_mode_on_both_runners() {
    let test = "local_ipc_test_suite_passes_in_every_confined_mode_on_both_runners";
    let Some(py) = python3() else { return skip_or_fail(test, "no python3 on the standard PATH") };
    let mut runners = vec!["landlock"];
    if find_in_path("bwrap").is_some() {
        runners.push("bwrap");
    } else {
        skip_or_fail(&format!("{test} [bwrap]"), "bubblewrap is not installed");
    }
    let whos = identities();
    if whos.len() == 1 {
        skip_regardless(&format!("{test} [unprivileged]"), "needs root and CORDON_TEST_USER to switch users");
    }
    for who in &whos {
        let (dirs, bin) = setup("ipc", who);
        if who.is_none() {
            if let Err(reason) = confined_works(&dirs.ws()) {
                return skip_or_fail(test, &reason);
            }
        }
        let ws = dirs.ws();
        let name = who.as_ref().map_or("the caller", |w| w.0.as_str());
        let py = py.to_str().unwrap();
        for runner in &runners {
            for mode in ["workspace-write", "read-only"] {
                // Sockets in the workspace where it is writable, else in the private TMPDIR.
                let sock_dir = if mode == "workspace-write" { "." } else { "/tmp" };
                let what = format!("{name}, {runner}, {mode}");
                let base = ["--mode", mode, "--runner", runner, "--"];
                let j = cordon_as(who, &bin, &ws, &[&base[..], &[py, "ipc_suite.py", sock_dir, "-v"]].concat());
                assert_clean(&j, &what);
                let err = j["stderr"]["text"].as_str().unwrap_or("");
                assert!(err.contains("Ran 5 tests") && err.trim_end().ends_with("OK"), "{what}: {j}");
                let j = cordon_as(who, &bin, &ws, &[&base[..], &[py, "-c", MANAGER_ONE_LINER]].concat());
                assert_clean(&j, &format!("{what}: the Manager one-liner"));
                assert_eq!(j["stdout"]["text"], "{1: 2}\n", "{what}: {j}");
            }
        }
    }
}

#[test]
fn local_ipc_through_serve_on_both_runners() {
    use std::io::{BufRead, Write};
    let test = "local_ipc_through_serve_on_both_runners";
    let Some(py) = python3() else { return skip_or_fail(test, "no python3 on the standard PATH") };
    let (dirs, _) = setup("ipc-serve", &None);
    if let Err(reason) = confined_works(&dirs.ws()) {
        return skip_or_fail(test, &reason);
    }
    let mut runners = vec![("landlock", "")];
    if find_in_path("bwrap").is_some() {
        runners.push(("bwrap", "landlock"));
    } else {
        skip_or_fail(&format!("{test} [bwrap]"), "bubblewrap is not installed");
    }
    for (runner, disabled) in runners {
        let mut child = Command::new(cordon_bin())
            .args(["serve", "--mode", "workspace-write", "--cwd"])
            .arg(dirs.ws())
            .env("PATH", PATH_ENV)
            .env("CORDON_DISABLE_RUNNERS", disabled)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let command = format!("{} ipc_suite.py . && {} -c '{MANAGER_ONE_LINER}'", py.display(), py.display());
        let req = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "run", "params": {"command": command}});
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{req}").unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        drop(stdin);
        let _ = child.wait();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let r = &v["result"];
        assert_eq!(r["sandbox"]["runner"], runner, "{line}");
        assert_clean(r, &format!("serve on {runner}"));
        assert_eq!(r["stdout"]["text"], "{1: 2}\n", "{line}");
    }
}

#[test]
fn local_ipc_through_mcp() {
    let test = "local_ipc_through_mcp";
    let py = match std::env::var_os("CORDON_TEST_PYTHON").map(PathBuf::from).or_else(python3) {
        Some(p) if Command::new(&p).args(["-c", "import mcp"]).output().is_ok_and(|o| o.status.success()) => p,
        _ => return skip_or_fail(test, "no Python with the MCP SDK (set CORDON_TEST_PYTHON)"),
    };
    let (dirs, _) = setup("ipc-mcp", &None);
    client_scenario(test, &py, "mcp_client.py", &dirs, "ipc");
}
