//! The doctor's proxy check (`--allow-host`, Linux): a loopback origin the doctor
//! starts, listed exactly, must receive the command's request through cordon's proxy,
//! and what the proxy forwarded is checked.

use super::*;

/// The path the doctor's loopback origin serves.
const PROXY_CANARY_PATH: &str = "/cordon-doctor";
/// The proxy check's run deadline, and how long its origin waits for the request.
const PROXY_CANARY_DEADLINE: Duration = Duration::from_secs(20);

/// A loopback origin for [`check_proxy`]: serves one request, records its head.
struct CanaryOrigin {
    port: u16,
    heads: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
}

impl CanaryOrigin {
    fn start(answer: String) -> std::io::Result<CanaryOrigin> {
        use std::io::{Read, Write};
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = heads.clone();
        listener.set_nonblocking(true)?;
        std::thread::Builder::new().name("cordon-doctor-origin".into()).spawn(move || {
            // One request, within the run's deadline (then the thread ends).
            let deadline = std::time::Instant::now() + PROXY_CANARY_DEADLINE;
            let mut conn = loop {
                match listener.accept() {
                    Ok((c, _)) => break c,
                    Err(_) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                    Err(_) => return,
                }
            };
            let _ = conn.set_nonblocking(false);
            let _ = conn.set_read_timeout(Some(PROXY_CANARY_DEADLINE));
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < crate::proxy::MAX_HEAD {
                match conn.read(&mut b) {
                    Ok(1) => head.push(b[0]),
                    _ => break,
                }
            }
            seen.lock().unwrap_or_else(|p| p.into_inner()).push(head);
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
        })?;
        Ok(CanaryOrigin { port, heads })
    }

    fn heads(&self) -> Vec<Vec<u8>> {
        self.heads.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// cordon's egress proxy end to end, in `workspace-write` with the `auto` runner:
/// `--allow-host 127.0.0.1:PORT` for a loopback origin the doctor starts. The command
/// asks the proxy for the origin (a plain-HTTP request in absolute form, with a
/// `Host` header naming another site) and for a second loopback listener that is not
/// listed. Judged by effect: the origin received exactly the head cordon rebuilds
/// (origin form, `Host` the listed authority, `Connection: close`), the answer
/// arrived in the workspace, the second listener received nothing.
pub(super) async fn check_proxy(host: &HostFacts) -> ModeReport {
    let mut report = ModeReport {
        mode: Mode::WorkspaceWrite,
        runner: None,
        level: None,
        gaps: Vec::new(),
        error: None,
        canaries: Vec::new(),
        works: false,
    };
    let base = Path::new(DOCTOR_SCRATCH_BASE);
    let scratch = tempfile::Builder::new().prefix("cordon-doctor-proxy-").tempdir_in(if base.is_dir() {
        base.to_path_buf()
    } else {
        std::env::temp_dir()
    });
    let scratch = match scratch {
        Ok(d) => d,
        Err(e) => {
            report.error = Some(format!("cannot create a scratch directory: {e}"));
            return report;
        }
    };
    // The answer the command must receive: the scratch directory's random name.
    let nonce = scratch.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (origin, trap) = match (CanaryOrigin::start(nonce.clone()), TcpListener::bind("127.0.0.1:0")) {
        (Ok(o), Ok(t)) => (o, t),
        (Err(e), _) | (_, Err(e)) => {
            report.error = Some(format!("cannot start a loopback listener: {e}"));
            return report;
        }
    };
    let _ = trap.set_nonblocking(true);
    let trap_port = trap.local_addr().map(|a| a.port()).unwrap_or(0);
    let answer = scratch.path().join("answer");
    let script = format!(
        "P=${{HTTP_PROXY#http://}}
         exec 3<>\"/dev/tcp/${{P%:*}}/${{P##*:}}\" && \
         printf 'GET http://127.0.0.1:{port}{PROXY_CANARY_PATH} HTTP/1.1\\r\\nHost: other.invalid\\r\\n\\r\\n' >&3 && \
         cat <&3 > '{answer}'; exec 3<&-
         exec 4<>\"/dev/tcp/${{P%:*}}/${{P##*:}}\" && \
         printf 'CONNECT 127.0.0.1:{trap_port} HTTP/1.1\\r\\n\\r\\n' >&4 && cat <&4 > /dev/null; exec 4<&-",
        port = origin.port,
        answer = answer.display()
    );
    let allowed: crate::proxy::HostPattern = match format!("127.0.0.1:{}", origin.port).parse() {
        Ok(p) => p,
        Err(e) => {
            report.error = Some(e.to_string());
            return report;
        }
    };
    let mut req = Request::new(Command::Shell(script));
    req.workdir = Some(scratch.path().to_path_buf());
    req.policy = PolicyRequest { mode: Mode::WorkspaceWrite, allow_hosts: vec![allowed], ..PolicyRequest::default() };
    req.timeout = Some(PROXY_CANARY_DEADLINE);
    let exec = match Executor::with_host(ExecutorConfig::default(), host.clone()) {
        Ok(e) => e,
        Err(e) => {
            report.error = Some(e.to_string());
            return report;
        }
    };
    let result = match exec.resolve(req) {
        Ok(spec) => exec.run(spec).await,
        Err(e) => Err(e),
    };
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            report.error = Some(format!("{}: {e}", e.code()));
            return report;
        }
    };
    report.runner = Some(result.sandbox.runner);
    report.level =
        serde_json::to_value(result.sandbox.enforcement.level).ok().and_then(|v| v.as_str().map(String::from));
    report.gaps = result.sandbox.enforcement.gaps.clone();
    let heads = origin.heads();
    let want =
        format!("GET {PROXY_CANARY_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n", origin.port);
    let got = std::fs::read_to_string(&answer).unwrap_or_default();
    let reached = heads.len() == 1 && heads[0] == want.as_bytes() && got.ends_with(&nonce);
    report.canaries.push(Canary {
        name: "reach a listed host through cordon's proxy",
        expect: "allowed",
        ok: reached,
        detail: match heads.as_slice() {
            [] => "the origin received nothing".into(),
            [h] if h == want.as_bytes() && got.ends_with(&nonce) => {
                "one rebuilt request arrived and was answered".into()
            }
            [h] if h == want.as_bytes() => "the request arrived; its answer did not reach the command".into(),
            [h] => format!("the origin received another head: {:?}", String::from_utf8_lossy(h)),
            hs => format!("the origin received {} requests", hs.len()),
        },
    });
    let trapped = trap.accept().is_ok();
    report.canaries.push(Canary {
        name: "reach a host that is not listed through cordon's proxy",
        expect: "denied",
        ok: !trapped,
        detail: if trapped {
            "the listener received a connection".into()
        } else {
            "the listener received nothing".into()
        },
    });
    report.works = report.canaries.iter().all(|c| c.ok) && report.level.as_deref() == Some("full");
    report
}
