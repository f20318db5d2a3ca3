//! `--allow-host`: hosts by name through cordon's own proxy (docs/network.md).
//!
//! Loopback only: the origins are servers of this test process on 127.0.0.1, reached
//! under test-only names that cordon's proxy resolves through its test map
//! (`CORDON_TEST_RESOLVE`, read by debug builds only). Judged by effect: what the
//! origin received, what arrived in the workspace, and traps that must stay silent.

use super::*;
use std::io::{BufRead, BufReader, Write};
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
        (format!("127.0.0.1:{port}"), "IP address not in the allow-list"),
        (format!("localhost:{port}"), "host not in the allow-list"),
        ("169.254.169.254:80".to_string(), "IP address not in the allow-list"),
        ("meta.test:80".to_string(), "resolves to a metadata address"),
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
