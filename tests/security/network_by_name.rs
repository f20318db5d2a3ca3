//! `--allow-host`: hosts by name through cordon's own proxy (docs/network.md).
//!
//! Loopback only: the origins are servers of this test process on 127.0.0.1, reached
//! under test-only names that cordon's proxy resolves through its test map
//! (`CORDON_TEST_RESOLVE`, read by debug builds only). Judged by effect: what the
//! origin received, what arrived in the workspace, and traps that must stay silent.

use super::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// The test map: two names on the same loopback server, and one that resolves to the
/// metadata address (which must be refused after resolution even when listed).
const TEST_MAP: &str = "allowed.test=127.0.0.1,other.test=127.0.0.1,meta.test=169.254.169.254";

/// A loopback HTTP origin serving the files under `root` (`index.html` for a
/// directory); records `METHOD PATH host=HOST`
/// for every request it gets.
struct Origin {
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
}

impl Origin {
    fn start(root: PathBuf) -> Origin {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let log2 = log.clone();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut conn) = conn else { continue };
                let root = root.clone();
                let log = log2.clone();
                std::thread::spawn(move || {
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut r = BufReader::new(conn.try_clone().unwrap());
                    let mut head = Vec::new();
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let line = line.trim_end().to_string();
                        if line.is_empty() {
                            break;
                        }
                        head.push(line);
                    }
                    let mut parts = head[0].split(' ');
                    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                    let host = head
                        .iter()
                        .find_map(|l| l.strip_prefix("Host: ").or_else(|| l.strip_prefix("host: ")))
                        .unwrap_or("");
                    log.lock().unwrap().push(format!("{method} {target} host={host}"));
                    let path = target.split(['?', '#']).next().unwrap_or("/").trim_start_matches('/');
                    let mut file = root.join(path);
                    if file.is_dir() {
                        file = file.join("index.html");
                    }
                    let body = (!path.contains("..")).then(|| fs::read(&file).ok()).flatten();
                    let _ = match body {
                        Some(b) => conn
                            .write_all(
                                format!(
                                    "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                    if file.extension().is_some_and(|e| e == "html") { "text/html" } else { "application/octet-stream" },
                                    b.len()
                                )
                                    .as_bytes(),
                            )
                            .and_then(|_| conn.write_all(&b)),
                        None => {
                            conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                        }
                    };
                });
            }
        });
        Origin { port, log }
    }

    fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// Options for a run that may reach `hosts` by name.
fn by_name(c: &Ctx, hosts: &[String]) -> RunOpts {
    let mut o = c.opts(WORKSPACE_WRITE);
    for h in hosts {
        o.extra_args.push("--allow-host".into());
        o.extra_args.push(h.clone());
    }
    o.env.push(("CORDON_TEST_RESOLVE".into(), TEST_MAP.into()));
    o
}

/// The run's denials as (target, evidence).
fn denials(out: &CordonOut) -> Vec<(String, String)> {
    out.j()["sandbox"]["denials"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|d| {
                    (d["target"].as_str().unwrap_or("").to_string(), d["evidence"].as_str().unwrap_or("").to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

fn need(tool: &str) -> Result<PathBuf, Skip> {
    for dir in ["/usr/bin", "/bin", "/usr/local/bin"] {
        let p = Path::new(dir).join(tool);
        if p.exists() {
            return Ok(p);
        }
    }
    Err(Skip(format!("no {tool} on this host")))
}

// The allowed name is fetched through the proxy (the positive control: the origin
// saw it, the bytes arrived, the result lists it); a second name on the same server,
// IP literals, localhost, the metadata address (as a literal and as the resolution of
// a listed name), a CONNECT to another port and a chained-proxy request are each
// refused by the proxy, reported as denials, and never reach a server.
case!(net_by_name_allows_only_the_listed_name, |c| {
    need("curl")?;
    let files = c.root.join("origin");
    fs::create_dir_all(&files).unwrap();
    let tag = format!("fetched-{}", c.unique());
    fs::write(files.join("hello.txt"), &tag).unwrap();
    let origin = Origin::start(files);
    let port = origin.port;
    let trap = TcpTrap::v4();
    let o = by_name(c, &[format!("allowed.test:{port}"), "meta.test".into()]);
    let t = trap.port_s();
    let script = format!(
        "curl -sS -o got.txt http://allowed.test:{port}/hello.txt; echo allowed=$?
         curl -sS -f http://other.test:{port}/hello.txt; echo other=$?
         curl -sS -f http://127.0.0.1:{port}/hello.txt; echo ip=$?
         curl -sS -f http://localhost:{port}/hello.txt; echo localhost=$?
         curl -sS -f http://169.254.169.254/latest/meta-data/; echo metadata=$?
         curl -sS -f http://meta.test/latest/meta-data/; echo meta_name=$?
         curl -sS -f -p http://allowed.test:{t}/; echo other_port=$?
         curl -sS -f -U u:p http://allowed.test:{port}/chained; echo chained=$?"
    );
    let out = c.sh(&o, &script)?;
    let text = out.out();
    assert!(text.contains("allowed=0"), "the allowed name was not fetched: {out:?}");
    assert_eq!(fs::read_to_string(c.ws.join("got.txt")).unwrap_or_default(), tag, "{out:?}");
    for refused in ["other", "ip", "localhost", "metadata", "meta_name", "other_port", "chained"] {
        assert!(!text.contains(&format!("{refused}=0")), "{refused} succeeded: {out:?}");
    }
    // The origin saw exactly the allowed request, under the allowed name.
    assert_eq!(origin.requests(), [format!("GET /hello.txt host=allowed.test:{port}")], "{out:?}");
    trap.assert_untouched("CONNECT to a port the pattern does not allow");
    let log = &out.j()["sandbox"]["network_log"]["entries"];
    assert_eq!(log.as_array().map(Vec::len), Some(1), "{out:?}");
    assert_eq!(log[0]["host"], "allowed.test");
    let d = denials(&out);
    for (target, why) in [
        (format!("other.test:{port}"), "host not in the allow-list"),
        (format!("127.0.0.1:{port}"), "127.0.0.1 is a loopback address"),
        (format!("localhost:{port}"), "host not in the allow-list"),
        ("169.254.169.254:80".to_string(), "169.254.169.254 is a metadata address"),
        ("meta.test:80".to_string(), "resolves to 169.254.169.254, a metadata address"),
        (format!("allowed.test:{t}"), "port"),
        (format!("allowed.test:{port}"), "proxy credentials"),
    ] {
        assert!(
            d.iter().any(|(dt, e)| *dt == target && e.starts_with("proxy refused: ") && e.contains(why)),
            "no denial for {target} ({why}): {d:?}"
        );
    }
});

// A program that ignores the proxy variables gets nothing: a direct TCP connect, TCP
// Fast Open (which connects without connect()), UDP (DNS included) and listening are
// refused inside (the errno the probe saw) and the loopback listeners receive
// nothing. The host control: the same probes reach the same listeners without cordon.
case!(net_by_name_direct_connections_get_nothing, |c| {
    let o = by_name(c, &["allowed.test".into()]);
    let t = TcpTrap::v4();
    c.host_probe("tcp", &["127.0.0.1", &t.port_s()]).assert_ok("host control: TCP");
    assert!(t.connected_within(1000), "host control: the listener saw no connection");
    let r = c.probe_with(&o, "tcp", &["127.0.0.1", &t.port_s()])?;
    r.assert_refused_with(&["EACCES"], "direct TCP connect with --allow-host");
    t.assert_untouched("direct TCP connect with --allow-host");
    let d = denials(r.run.as_ref().unwrap());
    assert!(
        d.iter().any(|(target, e)| *target == format!("inet:127.0.0.1:{}", t.port) && e.contains("cordon's proxy")),
        "the direct connect was not reported: {d:?}"
    );
    let f = TcpTrap::v4();
    let host_tfo = c.host_probe("tfo", &["127.0.0.1", &f.port_s()]);
    if host_tfo.ok {
        assert!(f.connected_within(1000), "host control: TCP Fast Open reached no listener");
    }
    c.probe_with(&o, "tfo", &["127.0.0.1", &f.port_s()])?
        .assert_refused_with(&["EACCES"], "TCP Fast Open with --allow-host");
    f.assert_untouched("TCP Fast Open with --allow-host");
    let u = UdpTrap::v4();
    c.host_probe("udp", &["127.0.0.1", &u.port_s()]).assert_ok("host control: UDP");
    assert!(u.received(), "host control: no datagram");
    let u = UdpTrap::v4();
    c.probe_with(&o, "udp", &["127.0.0.1", &u.port_s()])?.assert_refused_with(&["EACCES"], "UDP with --allow-host");
    c.probe_with(&o, "dns", &["127.0.0.1", &u.port_s()])?.assert_refused_with(&["EACCES"], "DNS with --allow-host");
    u.assert_untouched("UDP with --allow-host");
    c.probe_with(&o, "listen", &["127.0.0.1", "0", "100"])?
        .assert_refused_with(&["EACCES"], "listening with --allow-host");
    c.probe_with(&o, "mptcp", &["127.0.0.1", &t.port_s()])?
        .assert_refused_with(&["EACCES", "EPROTONOSUPPORT"], "MPTCP with --allow-host");
    t.assert_untouched("MPTCP with --allow-host");
});

// Real clients through the proxy: git clones over http, and curl fetches over HTTPS
// (a CONNECT tunnel to a self-signed loopback server).
case!(net_by_name_git_clone_and_https, |c| {
    let git = need("git")?;
    let openssl = need("openssl")?;
    need("curl")?;
    // A bare repository served by the origin (git's "dumb" http protocol).
    let files = c.root.join("origin");
    fs::create_dir_all(&files).unwrap();
    let src = c.root.join("src");
    let tag = format!("commit-{}", c.unique());
    let run = |args: &[&str], dir: &Path| {
        let st = std::process::Command::new(&git)
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(st.status.success(), "git {args:?}: {st:?}");
    };
    fs::create_dir_all(&src).unwrap();
    run(&["init", "-q", "."], &src);
    fs::write(src.join("README"), &tag).unwrap();
    run(&["add", "README"], &src);
    run(&["commit", "-q", "-m", "x"], &src);
    run(&["clone", "-q", "--bare", s(&src), s(&files.join("repo.git"))], &c.root);
    run(&["update-server-info"], &files.join("repo.git"));
    let origin = Origin::start(files.clone());
    // A self-signed HTTPS server (openssl s_server -WWW serves files of its cwd).
    let tls = c.root.join("tls");
    fs::create_dir_all(&tls).unwrap();
    let secret = format!("tls-{}", c.unique());
    fs::write(tls.join("hello.txt"), &secret).unwrap();
    let st = std::process::Command::new(&openssl)
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-out", "c.pem"])
        .args(["-subj", "/CN=allowed.test", "-days", "1"])
        .current_dir(&tls)
        .output()
        .unwrap();
    assert!(st.status.success(), "openssl req: {st:?}");
    let tls_port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = std::process::Command::new(&openssl)
        .args(["s_server", "-quiet", "-WWW", "-cert", "c.pem", "-key", "k.pem", "-accept"])
        .arg(format!("127.0.0.1:{tls_port}"))
        .current_dir(&tls)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Bounded wait until it listens (startup, not a timing assertion).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", tls_port)).is_err() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let port = origin.port;
    let o = by_name(c, &[format!("allowed.test:{port}"), format!("allowed.test:{tls_port}")]);
    let script = format!(
        "git clone -q http://allowed.test:{port}/repo.git clone; echo git=$?
         curl -sS -k -o tls.txt https://allowed.test:{tls_port}/hello.txt; echo https=$?"
    );
    let out = c.sh(&o, &script);
    let _ = server.kill();
    let _ = server.wait();
    let out = out?;
    assert!(out.out().contains("git=0"), "git clone through the proxy failed: {out:?}");
    assert_eq!(fs::read_to_string(c.ws.join("clone/README")).unwrap_or_default(), tag, "{out:?}");
    assert!(
        origin.requests().iter().all(|r| r.ends_with(&format!("host=allowed.test:{port}"))),
        "{:?}",
        origin.requests()
    );
    assert!(out.out().contains("https=0"), "HTTPS through the proxy failed: {out:?}");
    assert_eq!(fs::read_to_string(c.ws.join("tls.txt")).unwrap_or_default(), secret, "{out:?}");
    let log = out.j()["sandbox"]["network_log"]["entries"].as_array().cloned().unwrap_or_default();
    assert!(log.iter().any(|e| e["via"] == "connect" && e["port"] == tls_port), "{out:?}");
    assert!(log.iter().any(|e| e["via"] == "http" && e["port"] == port), "{out:?}");
});

// pip against a local index through the proxy: the allowed index name serves the
// project page and the wheel; the same index under another name is refused.
case!(net_by_name_pip_download, |c| {
    let py = Path::new("/usr/bin/python3");
    let has_pip = py.exists()
        && std::process::Command::new(py).args(["-m", "pip", "--version"]).output().is_ok_and(|o| o.status.success());
    if !has_pip {
        return Err(Skip("no /usr/bin/python3 with pip".into()));
    }
    let files = c.root.join("origin");
    let project = files.join("simple/tinypkg");
    fs::create_dir_all(&project).unwrap();
    fs::create_dir_all(files.join("files")).unwrap();
    let wheel = "tinypkg-0.1-py3-none-any.whl";
    // A minimal valid wheel (metadata only).
    let build = format!(
        "import zipfile\nz = zipfile.ZipFile({:?}, 'w')\n\
         z.writestr('tinypkg/__init__.py', '')\n\
         z.writestr('tinypkg-0.1.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: tinypkg\\nVersion: 0.1\\n')\n\
         z.writestr('tinypkg-0.1.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
         z.writestr('tinypkg-0.1.dist-info/RECORD', '')\nz.close()\n",
        s(&files.join("files").join(wheel))
    );
    let st = std::process::Command::new(py).args(["-c", &build]).output().unwrap();
    assert!(st.status.success(), "building the wheel: {st:?}");
    fs::write(
        project.join("index.html"),
        format!("<!DOCTYPE html><html><body><a href=\"../../files/{wheel}\">{wheel}</a></body></html>"),
    )
    .unwrap();
    let origin = Origin::start(files);
    let port = origin.port;
    let o = by_name(c, &[format!("allowed.test:{port}")]);
    let pip = |name: &str, dest: &str| {
        format!(
            "/usr/bin/python3 -m pip download --no-cache-dir --disable-pip-version-check --retries 0 --timeout 20 \
             --no-deps -d {dest} --trusted-host {name} --index-url http://{name}:{port}/simple/ tinypkg; echo {dest}=$?"
        )
    };
    let script = format!("{}\n{}", pip("allowed.test", "dl"), pip("other.test", "dl2"));
    let out = c.sh(&o, &script)?;
    assert!(out.out().contains("dl=0"), "pip download through the proxy failed: {out:?}");
    assert!(c.ws.join("dl").join(wheel).is_file(), "the wheel did not arrive: {out:?}");
    assert!(!out.out().contains("dl2=0"), "pip reached the index under another name: {out:?}");
    assert!(!c.ws.join("dl2").join(wheel).exists());
    let reqs = origin.requests();
    assert!(reqs.iter().all(|r| r.ends_with(&format!("host=allowed.test:{port}"))), "{reqs:?}");
    assert!(reqs.iter().any(|r| r.contains(wheel)), "{reqs:?}");
    let d = denials(&out);
    assert!(d.iter().any(|(t, e)| *t == format!("other.test:{port}") && e.starts_with("proxy refused: ")), "{d:?}");
});

// npm against a local registry stand-in (a packument served by the origin): the
// allowed registry name answers, the same registry under another name is refused.
case!(net_by_name_npm_registry, |c| {
    need("npm")?;
    let files = c.root.join("origin");
    fs::create_dir_all(&files).unwrap();
    let origin = Origin::start(files.clone());
    let port = origin.port;
    let version = format!("0.1.{}", std::process::id() % 1000);
    fs::write(
        files.join("tinypkg"),
        format!(
            "{{\"name\":\"tinypkg\",\"dist-tags\":{{\"latest\":\"{version}\"}},\"versions\":{{\"{version}\":\
             {{\"name\":\"tinypkg\",\"version\":\"{version}\",\"dist\":{{\"tarball\":\
             \"http://allowed.test:{port}/tinypkg.tgz\"}}}}}}}}"
        ),
    )
    .unwrap();
    let o = by_name(c, &[format!("allowed.test:{port}")]);
    let npm = |name: &str, tag: &str| {
        format!(
            "npm view tinypkg version --registry http://{name}:{port}/ --cache ./npmcache-{tag} --fetch-retries 0 \
             --fetch-timeout 20000; echo {tag}=$?"
        )
    };
    let out = c.sh(&o, &format!("{}\n{}", npm("allowed.test", "allowed"), npm("other.test", "other")))?;
    assert!(out.out().contains("allowed=0") && out.out().contains(&version), "npm through the proxy: {out:?}");
    assert!(!out.out().contains("other=0"), "npm reached the registry under another name: {out:?}");
    let reqs = origin.requests();
    assert!(!reqs.is_empty() && reqs.iter().all(|r| r.ends_with(&format!("host=allowed.test:{port}"))), "{reqs:?}");
    let d = denials(&out);
    assert!(d.iter().any(|(t, e)| *t == format!("other.test:{port}") && e.starts_with("proxy refused: ")), "{d:?}");
});

// Escalation asks for exactly one host: a name the proxy refused is granted for one
// retry (through `--approver`), and the retry reaches that name through the proxy —
// with the network still off (a direct connection in the same retry gets nothing) and
// the grant in the audit log.
case!(net_by_name_approver_grants_exactly_one_host, |c| {
    need("curl")?;
    let files = c.root.join("origin-grant");
    fs::create_dir_all(&files).unwrap();
    let tag = format!("granted-{}", c.unique());
    fs::write(files.join("hello.txt"), &tag).unwrap();
    let origin = Origin::start(files);
    let port = origin.port;
    let trap = TcpTrap::v4();
    let gov = c.root.join("gov-grant");
    c.mkdir(&gov);
    let dump = gov.join("request.json");
    let approver = c.file(&gov.join("approve.sh"), &format!("#!/bin/sh\ncat > '{}'\nexit 0\n", dump.display()));
    set_mode(&approver, 0o755);
    let log = gov.join("audit.jsonl");
    let mut o = by_name(c, &[format!("allowed.test:{port}")]);
    o.extra_args.extend([
        "--approver".into(),
        approver.display().to_string(),
        "--audit-log".into(),
        log.display().to_string(),
    ]);
    let t = trap.port_s();
    // The direct attempt runs only in the retry (once the granted fetch worked): in the
    // first run it would be a second, different denial, and no narrow grant covers two.
    // The script fails without the file: a run that succeeded is never escalated.
    let script = format!(
        "curl -sS -f -o got.txt http://other.test:{port}/hello.txt; echo other=$?
         if [ \"$(cat got.txt 2>/dev/null)\" = {tag} ]; then
             (exec 3<>/dev/tcp/127.0.0.1/{t}) 2>/dev/null; echo direct=$?
         fi
         [ \"$(cat got.txt 2>/dev/null)\" = {tag} ]"
    );
    let out = c.cordon(&o, &["/bin/bash", "-c", &script])?;
    let text = out.out();
    assert_eq!(fs::read_to_string(c.ws.join("got.txt")).unwrap_or_default(), tag, "the retry did not fetch: {out:?}");
    assert!(text.contains("other=0"), "{out:?}");
    assert!(!text.contains("direct=0"), "a direct connection succeeded: {out:?}");
    trap.assert_untouched("direct connection in the granted retry");
    assert!(
        origin.requests().iter().any(|r| r == &format!("GET /hello.txt host=other.test:{port}")),
        "the origin never saw the granted name: {:?}",
        origin.requests()
    );
    let req: serde_json::Value =
        serde_json::from_str(fs::read_to_string(&dump).unwrap_or_default().trim()).unwrap_or_default();
    assert_eq!(req["grant"]["kind"], "host", "the request asks for one host: {req}");
    assert_eq!(req["grant"]["host"], format!("other.test:{port}"), "the request names the host: {req}");
    assert!(fs::read_to_string(&log).unwrap_or_default().contains(&format!("other.test:{port}")), "audit log");
    assert_eq!(out.j()["sandbox"]["mode"], "workspace-write", "still confined: {out:?}");
});

/// A script fragment that sends `$1` (printf `%b` escapes: `\r`, `\n`, `\0`, `\xHH`)
/// to cordon's proxy over a raw connection and prints the answer: the command speaking
/// to the proxy directly, as a hostile one would.
const RAW_PROXY: &str = r#"trap '' PIPE; P=${HTTP_PROXY#http://}
send() { exec 3<>"/dev/tcp/${P%:*}/${P##*:}" || return 1; printf '%b' "$1" >&3; timeout 20 cat <&3; exec 3<&-; echo; }
"#;

// A grant names exactly one host, the one the proxy parsed and would have connected
// to; the raw text of a refused request (a wildcard with proxy credentials, a SOCKS5
// BIND of a wildcard, a malformed authority) and an address the proxy never connects
// to (0.0.0.0) are never offered as a host grant. Judged by the request JSON the
// approver received (it refuses every request), and by a listener that must receive
// nothing. The control: a plain refused name is offered as exactly that host.
case!(net_by_name_host_grants_name_exactly_one_parsed_host, |c| {
    let trap = TcpTrap::v4();
    let t = trap.port_s();
    let gov = c.root.join("gov-parsed");
    c.mkdir(&gov);
    let dump = gov.join("requests.jsonl");
    let approver = c.file(
        &gov.join("refuse.sh"),
        &format!("#!/bin/sh\ncat >> '{}'\necho >> '{}'\nexit 1\n", dump.display(), dump.display()),
    );
    set_mode(&approver, 0o755);
    let log = gov.join("audit.jsonl");
    let p = trap.port.to_be_bytes();
    let cases: Vec<(&str, String)> = vec![
        (
            "wildcard with credentials",
            format!("CONNECT *.allowed.test:{t} HTTP/1.1\\r\\nProxy-Authorization: Basic eDp5\\r\\n\\r\\n"),
        ),
        ("wildcard", format!("CONNECT *.allowed.test:{t} HTTP/1.1\\r\\n\\r\\n")),
        (
            "absolute wildcard",
            format!("GET http://*.allowed.test:{t}/ HTTP/1.1\\r\\nProxy-Authorization: Basic eDp5\\r\\n\\r\\n"),
        ),
        ("credentials", format!("CONNECT other.test:{t} HTTP/1.1\\r\\nProxy-Authorization: Basic eDp5\\r\\n\\r\\n")),
        ("unspecified", format!("CONNECT 0.0.0.0:{t} HTTP/1.1\\r\\n\\r\\n")),
        // Addresses that reach the host or its cloud: opened only by listing them.
        ("loopback", format!("CONNECT 127.0.0.1:{t} HTTP/1.1\\r\\n\\r\\n")),
        ("metadata", "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\\r\\n\\r\\n".to_string()),
        ("socks bind", format!("\\x05\\x01\\x00\\x05\\x02\\x00\\x03\\x0e*.allowed.test\\x{:02x}\\x{:02x}", p[0], p[1])),
        ("control", format!("CONNECT other.test:{t} HTTP/1.1\\r\\n\\r\\n")),
    ];
    for (what, req) in &cases {
        let _ = fs::remove_file(&dump);
        let mut o = by_name(c, &["allowed.test:1".into()]);
        o.extra_args.extend([
            "--approver".into(),
            approver.display().to_string(),
            "--audit-log".into(),
            log.display().to_string(),
        ]);
        let out = c.cordon(&o, &["/bin/bash", "-c", &format!("{RAW_PROXY}send '{req}'; exit 1")])?;
        let asked: Vec<serde_json::Value> = fs::read_to_string(&dump)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(!asked.is_empty(), "{what}: the approver was not asked: {out:?}");
        for req in &asked {
            let grant = &req["grant"];
            if *what == "control" {
                assert_eq!(grant["kind"], "host", "{what}: {req}");
                assert_eq!(grant["host"], format!("other.test:{t}"), "{what}: exactly one host: {req}");
            } else {
                assert_ne!(grant["kind"], "host", "{what}: a host grant from text the command sent: {req}");
            }
        }
    }
    trap.assert_untouched("a refused request or its refused grant");
});

/// A non-loopback address of this host whose class the proxy would otherwise let an
/// exact name reach (private or global), if it has one.
fn own_reachable_v4() -> Option<std::net::Ipv4Addr> {
    nix::ifaddrs::getifaddrs().ok()?.filter_map(|i| i.address?.as_sockaddr_in().map(|a| a.ip())).find(|a| {
        let o = a.octets();
        let benchmarking = o[0] == 198 && (o[1] & 0xfe) == 18;
        !(a.is_loopback() || a.is_link_local() || a.is_documentation() || a.is_unspecified() || benchmarking)
    })
}

// The unspecified addresses connect to loopback and the host's own addresses reach its
// own listeners: `0.0.0.0:P` and `[::]:P` are refused as patterns, as literals and as
// what a listed name resolves to, and a listed name resolving to one of the host's own
// addresses reaches nothing; listeners on 127.0.0.1:P, [::1]:P and 0.0.0.0:Q receive
// nothing. The control: the host's own address listed exactly is reached.
case!(net_by_name_unspecified_and_own_addresses_reach_nothing, |c| {
    need("curl")?;
    let t4 = TcpTrap::v4();
    let t6 = TcpTrap::v6().ok();
    let (p4, p6) = (t4.port, t6.as_ref().map_or(0, |t| t.port));
    let mut o = by_name(c, &[format!("0.0.0.0:{p4}")]);
    o.expect_error = true;
    // Refused as a pattern (no run), or refused by the proxy.
    let out = c.cordon(&o, &["/bin/sh", "-c", &format!("curl -sS -f -p http://0.0.0.0:{p4}/; echo zero=$?")])?;
    assert!(out.json.is_none() || !out.out().contains("zero=0"), "{out:?}");
    if let Some(t6) = &t6 {
        let mut o = by_name(c, &[format!("[::]:{p6}")]);
        o.expect_error = true;
        let out = c.cordon(&o, &["/bin/sh", "-c", &format!("curl -sS -f -p 'http://[::]:{p6}/'; echo zero=$?")])?;
        assert!(out.json.is_none() || !out.out().contains("zero=0"), "{out:?}");
        t6.assert_untouched("[::] as a pattern");
    }
    // Names resolving to the unspecified addresses, and the literals, with the
    // loopback ports listed by name.
    let mut o = by_name(c, &[format!("zero.test:{p4}"), format!("zero6.test:{p6}")]);
    o.env.retain(|(k, _)| k != "CORDON_TEST_RESOLVE");
    o.env.push(("CORDON_TEST_RESOLVE".into(), "zero.test=0.0.0.0,zero6.test=::".into()));
    let script = format!(
        "curl -sS -f -p http://zero.test:{p4}/; echo name=$?
         curl -sS -f -p http://zero6.test:{p6}/; echo name6=$?
         curl -sS -f -p http://0.0.0.0:{p4}/; echo literal=$?
         curl -sS -f -p 'http://[::ffff:0.0.0.0]:{p4}/'; echo mapped=$?"
    );
    let out = c.sh(&o, &script)?;
    for what in ["name", "name6", "literal", "mapped"] {
        assert!(!out.out().contains(&format!("{what}=0")), "{what}: {out:?}");
    }
    let d = denials(&out);
    assert!(d.iter().any(|(t, e)| *t == format!("zero.test:{p4}") && e.contains("unspecified address")), "{d:?}");
    t4.assert_untouched("0.0.0.0 through the proxy");
    if let Some(t6) = &t6 {
        t6.assert_untouched("[::] through the proxy");
    }
    // The host's own address, by name: nothing; listed exactly: reached.
    let Some(own) = own_reachable_v4() else {
        eprintln!("note: no private or global IPv4 address on this host; the own-address part is not run");
        return Ok(());
    };
    let l = TcpListener::bind("0.0.0.0:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let q = l.local_addr().unwrap().port();
    let mut o = by_name(c, &[format!("own.test:{q}")]);
    o.env.retain(|(k, _)| k != "CORDON_TEST_RESOLVE");
    o.env.push(("CORDON_TEST_RESOLVE".into(), format!("own.test={own}")));
    let script = format!(
        "curl -sS -f -m 10 -p http://own.test:{q}/; echo own=$?
         curl -sS -f -m 10 -p http://{own}:{q}/; echo literal=$?"
    );
    let out = c.sh(&o, &script)?;
    assert!(!out.out().contains("own=0") && !out.out().contains("literal=0"), "{out:?}");
    assert!(l.accept().is_err(), "this host's own address {own} reached its listener: {out:?}");
    let d = denials(&out);
    assert!(d.iter().any(|(t, e)| *t == format!("own.test:{q}") && e.contains("this host's own addresses")), "{d:?}");
    // The literal is refused for what it is (never "not in the allow-list", which a
    // host grant could lift).
    assert!(d.iter().any(|(t, e)| *t == format!("{own}:{q}") && e.contains("this host's own addresses")), "{d:?}");
    let o = by_name(c, &[format!("{own}:{q}")]);
    let _ = c.sh(&o, &format!("curl -sS -m 5 -p http://{own}:{q}/; echo exact=$?"))?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut reached = false;
    while !reached && std::time::Instant::now() < deadline {
        reached = l.accept().is_ok();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(reached, "control: the host's own address {own}:{q}, listed exactly, was not reached");
});

/// A loopback origin that records every byte of every connection (the head, the body
/// by its framing, and whatever follows within a short read), then answers `200`.
struct RawOrigin {
    port: u16,
    conns: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl RawOrigin {
    fn start() -> RawOrigin {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let conns = Arc::new(Mutex::new(Vec::new()));
        let c2 = conns.clone();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut conn) = conn else { continue };
                let conns = c2.clone();
                std::thread::spawn(move || {
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut got = Vec::new();
                    let mut buf = [0u8; 4096];
                    // Through the head, then the body by its framing (as the origin
                    // reads it), then a last short read for anything smuggled after it.
                    let mut settled = false;
                    loop {
                        let head_end = got.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
                        if let (Some(end), false) = (head_end, settled) {
                            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
                            let body = &got[end..];
                            let complete = match head.split("content-length: ").nth(1) {
                                Some(n) => n
                                    .split("\r\n")
                                    .next()
                                    .and_then(|n| n.trim().parse::<usize>().ok())
                                    .is_some_and(|n| body.len() >= n),
                                None if head.contains("transfer-encoding: chunked") => body.ends_with(b"0\r\n\r\n"),
                                None => true,
                            };
                            if complete {
                                settled = true;
                                let _ = conn.set_read_timeout(Some(Duration::from_millis(300)));
                            }
                        }
                        match conn.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    conns.lock().unwrap().push(got);
                    let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
                });
            }
        });
        RawOrigin { port, conns }
    }

    fn conns(&self) -> Vec<String> {
        self.conns.lock().unwrap().iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect()
    }
}

// The proxy parses HTTP strictly and rebuilds what it sends: a bare CR (which ends the
// header block for lenient origins such as Python's http.server, so a body would be
// read as a second request), NUL, folding, a bare LF, ambiguous framing and a chunk
// whose data overruns its size are refused and reported; the origin receives only
// well-formed, rebuilt requests, one per connection, never the smuggled one. The
// controls: a body by length and a chunked body arrive rebuilt.
case!(net_by_name_http_is_parsed_strictly, |c| {
    let origin = RawOrigin::start();
    let port = origin.port;
    let smuggled = "GET /smuggled HTTP/1.1\\r\\nHost: other.test\\r\\n\\r\\n";
    let smuggled_len = smuggled.replace("\\r\\n", "..").len();
    let post = format!("POST http://allowed.test:{port}/p HTTP/1.1\\r\\nHost: allowed.test\\r\\n");
    let cases = [
        format!("{post}X-A: 1\\r\\rHost: other.test\\r\\nContent-Length: {smuggled_len}\\r\\n\\r\\n{smuggled}"),
        format!("{post}X-A: a\\0b\\r\\nContent-Length: {smuggled_len}\\r\\n\\r\\n{smuggled}"),
        format!("{post}X-A: 1\\r\\n Host: other.test\\r\\nContent-Length: {smuggled_len}\\r\\n\\r\\n{smuggled}"),
        format!("POST http://allowed.test:{port}/p HTTP/1.1\\nContent-Length: {smuggled_len}\\n\\n{smuggled}"),
        format!("{post}Content-Length: 0\\r\\nContent-Length: {smuggled_len}\\r\\n\\r\\n{smuggled}"),
        format!(
            "{post}Content-Length: {smuggled_len}\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\n{smuggled}"
        ),
        format!("{post}Transfer-Encoding: gzip, chunked\\r\\n\\r\\n0\\r\\n\\r\\n{smuggled}"),
        format!("{post}Transfer-Encoding: chunked\\r\\n\\r\\n5\\r\\nabc\\r\\n0\\r\\n\\r\\n{smuggled}"),
        format!("{post}Transfer-Encoding: chunked\\r\\n\\r\\n3;x=\\r\\r\\nabc\\r\\n0\\r\\n\\r\\n{smuggled}"),
        // Controls.
        format!("{post}Content-Length: 5\\r\\n\\r\\nhello"),
        format!("{post}Transfer-Encoding: chunked\\r\\n\\r\\n3\\r\\nabc\\r\\n0\\r\\n\\r\\n"),
    ];
    let script: String = std::iter::once(RAW_PROXY.to_string())
        .chain(cases.iter().enumerate().map(|(i, r)| format!("echo case{i}; send '{r}'\n")))
        .collect();
    let o = by_name(c, &[format!("allowed.test:{port}")]);
    let out = c.cordon(&o, &["/bin/bash", "-c", &script])?;
    let conns = origin.conns();
    for conn in &conns {
        assert!(!conn.contains("smuggled") && !conn.contains("other.test"), "a smuggled request arrived: {conn:?}");
        assert_eq!(conn.matches(" HTTP/1.1\r\n").count(), 1, "not one request: {conn:?}");
        let bare_cr = conn.as_bytes().windows(2).any(|w| w[0] == b'\r' && w[1] != b'\n');
        assert!(!bare_cr && !conn.contains('\0') && !conn.contains("\r\n "), "not well-formed: {conn:?}");
    }
    let host = format!("Host: allowed.test:{port}");
    let want = [
        format!("POST /p HTTP/1.1\r\n{host}\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"),
        format!("POST /p HTTP/1.1\r\n{host}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
    ];
    for w in &want {
        assert!(conns.contains(w), "control not received as rebuilt: {w:?} in {conns:?}; {out:?}");
    }
    // The two chunked bodies with invalid framing reached the origin as an incomplete
    // request at most (the rebuilt head, perhaps chunks cordon re-encoded, never the
    // last chunk), the connection then cut.
    assert!(conns.len() <= want.len() + 2, "{conns:?}");
    let chunked_head = format!("POST /p HTTP/1.1\r\n{host}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    for conn in conns.iter().filter(|c| !want.contains(c)) {
        assert!(conn.starts_with(&chunked_head) && !conn.ends_with("0\r\n\r\n"), "{conn:?}");
    }
    let d = denials(&out);
    assert!(d.iter().filter(|(_, e)| e.starts_with("proxy refused: malformed request")).count() >= 5, "{d:?}");
});
