//! The proxy against a local origin (loopback only; names through the test resolver).

use super::*;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener};

/// A local HTTP origin: answers every request `200 hello` and records the heads it got
/// (as text, lines joined by `\n`) and every byte it received.
struct Origin {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
    raw: Arc<Mutex<Vec<u8>>>,
}

impl Origin {
    fn start() -> Origin {
        Origin::on("127.0.0.1:0")
    }

    fn on(addr: &str) -> Origin {
        let l = TcpListener::bind(addr).unwrap();
        let port = l.local_addr().unwrap().port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let (h, w) = (heads.clone(), raw.clone());
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(c) = c else { continue };
                let (h, w) = (h.clone(), w.clone());
                std::thread::spawn(move || {
                    let _ = c.set_read_timeout(Some(Duration::from_secs(20)));
                    let mut r = BufReader::new(c.try_clone().unwrap());
                    let mut c = c;
                    // Record every request head until the client closes (keep-alive,
                    // to show the proxy does not pass a second request on); after a
                    // `Connection: close` request, answer and end the answers only.
                    while let Ok(head) = read_head(&mut r) {
                        w.lock().unwrap().extend_from_slice(&head);
                        let text = String::from_utf8_lossy(&head).trim_end().replace("\r\n", "\n");
                        let close = text.lines().any(|l| l.eq_ignore_ascii_case("connection: close"));
                        let lower = text.to_ascii_lowercase();
                        let length = lower
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length: ").and_then(|n| n.parse::<u64>().ok()));
                        h.lock().unwrap().push(text);
                        let mut body = Vec::new();
                        if lower.contains("transfer-encoding: chunked") {
                            // Through the last chunk (or until the proxy cuts the connection).
                            while !body.ends_with(b"0\r\n\r\n") {
                                let mut line = Vec::new();
                                if r.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
                                    break;
                                }
                                body.extend_from_slice(&line);
                            }
                        } else {
                            let _ = r.by_ref().take(length.unwrap_or(0)).read_to_end(&mut body);
                        }
                        w.lock().unwrap().extend_from_slice(&body);
                        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
                        if close {
                            // Whatever else arrives is recorded too (a chunked body).
                            let _ = c.shutdown(std::net::Shutdown::Write);
                            let mut rest = Vec::new();
                            let _ = r.read_to_end(&mut rest);
                            w.lock().unwrap().extend_from_slice(&rest);
                            return;
                        }
                    }
                });
            }
        });
        Origin { port, heads, raw }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }

    fn raw(&self) -> Vec<u8> {
        self.raw.lock().unwrap().clone()
    }
}

fn proxy(allow: &[String], resolve: &str) -> (Proxy, DenialSink) {
    proxy_on(allow, resolve, Some(Vec::new()))
}

fn proxy_on(allow: &[String], resolve: &str, host_addrs: Option<Vec<IpAddr>>) -> (Proxy, DenialSink) {
    let sink: DenialSink = Arc::default();
    let config = ProxyConfig {
        allow: AllowList::parse(allow).unwrap(),
        test_resolve: Some(TestResolver::parse(resolve)),
        host_addrs,
    };
    (Proxy::start(config, sink.clone()).unwrap(), sink)
}

fn exchange(p: &Proxy, bytes: &[u8]) -> String {
    let mut c = TcpStream::connect(p.addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn denials(sink: &DenialSink) -> Vec<(String, String)> {
    sink.lock().unwrap().snapshot().iter().map(|d| (d.target.clone().unwrap_or_default(), d.evidence.clone())).collect()
}

const MAP: &str = "allowed.test=127.0.0.1,other.test=127.0.0.1,meta.test=169.254.169.254";

#[test]
fn connect_to_an_allowed_name_is_relayed_and_logged() {
    let o = Origin::start();
    let (p, sink) = proxy(&[format!("allowed.test:{}", o.port)], MAP);
    let req = format!("CONNECT allowed.test:{0} HTTP/1.1\r\nHost: allowed.test:{0}\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", o.port);
    let out = exchange(&p, req.as_bytes());
    assert!(out.starts_with("HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK"), "{out}");
    assert!(out.ends_with("hello"), "{out}");
    assert!(denials(&sink).is_empty());
    let log = p.finish();
    assert_eq!(log.entries.len(), 1);
    assert_eq!(log.entries[0].host, "allowed.test");
    assert_eq!(log.entries[0].via, Via::Connect);
}

#[test]
fn refusals_are_answered_and_recorded_without_touching_the_origin() {
    let o = Origin::start();
    let port = o.port;
    let (p, sink) = proxy(&[format!("allowed.test:{port}"), "meta.test".into()], MAP);
    let cases = [
        (
            format!("CONNECT other.test:{port} HTTP/1.1\r\n\r\n"),
            format!("other.test:{port}"),
            "host not in the allow-list",
        ),
        (format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n"), format!("127.0.0.1:{port}"), "a loopback address"),
        (format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n"), format!("localhost:{port}"), "host not in"),
        ("CONNECT 169.254.169.254:443 HTTP/1.1\r\n\r\n".into(), "169.254.169.254:443".into(), "a metadata address"),
        ("CONNECT [fd00:ec2::254]:443 HTTP/1.1\r\n\r\n".into(), "[fd00:ec2::254]:443".into(), "a metadata address"),
        ("CONNECT 151.101.0.223:443 HTTP/1.1\r\n\r\n".into(), "151.101.0.223:443".into(), "IP address not in"),
        ("CONNECT allowed.test:22 HTTP/1.1\r\n\r\n".into(), "allowed.test:22".into(), "port 22 is not allowed"),
        ("CONNECT meta.test:443 HTTP/1.1\r\n\r\n".into(), "meta.test:443".into(), "a metadata address"),
        ("CONNECT allowed.test.evil:443 HTTP/1.1\r\n\r\n".into(), "allowed.test.evil:443".into(), "host not in"),
        // No host cordon could parse: the denial names none (never the text sent).
        (format!("CONNECT x@allowed.test:{port} HTTP/1.1\r\n\r\n"), String::new(), "not a host name"),
        (format!("CONNECT 127.1:{port} HTTP/1.1\r\n\r\n"), String::new(), "not a host name"),
        (format!("CONNECT *.allowed.test:{port} HTTP/1.1\r\n\r\n"), String::new(), "not a host name"),
        (
            format!("CONNECT *.allowed.test:{port} HTTP/1.1\r\nProxy-Authorization: Basic eDp5\r\n\r\n"),
            String::new(),
            "not a host name",
        ),
        (format!("GET http://*.allowed.test:{port}/ HTTP/1.1\r\n\r\n"), String::new(), "not a host name"),
        ("CONNECT 0.0.0.0:443 HTTP/1.1\r\n\r\n".into(), "0.0.0.0:443".into(), "unspecified address"),
        ("CONNECT [::]:443 HTTP/1.1\r\n\r\n".into(), "[::]:443".into(), "unspecified address"),
        (
            format!("CONNECT allowed.test:{port} HTTP/1.1\r\nProxy-Authorization: Basic eDp5\r\n\r\n"),
            format!("allowed.test:{port}"),
            "proxy credentials",
        ),
        (format!("GET http://other.test:{port}/ HTTP/1.1\r\n\r\n"), format!("other.test:{port}"), "host not in"),
        ("GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n".into(), String::new(), "not an absolute http://"),
        (format!("GET https://allowed.test:{port}/ HTTP/1.1\r\n\r\n"), String::new(), "not an absolute http://"),
        (format!("GET http://{}/ HTTP/1.1\r\n\r\n", p.addr()), p.addr().to_string(), "a loopback address"),
    ];
    for (req, target, why) in &cases {
        let out = exchange(&p, req.as_bytes());
        assert!(out.starts_with("HTTP/1.1 403 "), "{req:?}: {out}");
        let d = denials(&sink);
        assert!(
            d.iter().any(|(t, e)| t == target && e.starts_with("proxy refused: ") && e.contains(why)),
            "{req:?}: no denial for {target} with {why:?} in {d:?}"
        );
    }
    assert!(o.heads().is_empty(), "the origin was reached: {:?}", o.heads());
    assert!(p.finish().entries.is_empty());
}

#[test]
fn plain_http_goes_to_the_decided_authority_only() {
    let o = Origin::start();
    let port = o.port;
    let (p, sink) = proxy(&[format!("allowed.test:{port}")], MAP);
    // A Host header naming another site, and a second request that would reach it:
    // the origin sees the decided authority once.
    let req = format!(
        "GET http://allowed.test:{port}/simple/?q=1 HTTP/1.1\r\nHost: other.test\r\nProxy-Connection: keep-alive\r\n\r\n\
         GET /second HTTP/1.1\r\nHost: other.test\r\n\r\n"
    );
    let out = exchange(&p, req.as_bytes());
    assert!(out.starts_with("HTTP/1.1 200 OK") && out.ends_with("hello"), "{out}");
    let heads = o.heads();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(heads[0].starts_with("GET /simple/?q=1 HTTP/1.1\nHost: allowed.test:"), "{}", heads[0]);
    assert!(!heads[0].to_ascii_lowercase().contains("proxy-connection"), "{}", heads[0]);
    assert!(!heads[0].contains("other.test"), "{}", heads[0]);
    assert!(denials(&sink).is_empty());
    assert_eq!(p.finish().entries[0].via, Via::Http);
}

#[test]
fn a_body_is_forwarded_by_its_framing_and_nothing_after_it() {
    let o = Origin::start();
    let port = o.port;
    let (p, _sink) = proxy(&[format!("allowed.test:{port}")], MAP);
    let req = format!(
        "POST http://allowed.test:{port}/up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
         GET /smuggled HTTP/1.1\r\nHost: other.test\r\n\r\n"
    );
    let out = exchange(&p, req.as_bytes());
    assert!(out.ends_with("hello"), "{out}");
    let heads = o.heads();
    assert!(heads.iter().all(|h| !h.contains("smuggled")), "{heads:?}");
}

#[test]
fn socks5_names_are_decided_like_connect() {
    let o = Origin::start();
    let port = o.port;
    let (p, sink) = proxy(&[format!("allowed.test:{port}")], MAP);
    let socks = |host: &[u8], atyp: u8| {
        let mut c = TcpStream::connect(p.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c.write_all(&[5, 1, 0]).unwrap();
        let mut hello = [0u8; 2];
        c.read_exact(&mut hello).unwrap();
        assert_eq!(hello, [5, 0]);
        let mut req = vec![5, 1, 0, atyp];
        if atyp == 3 {
            req.push(host.len() as u8);
        }
        req.extend_from_slice(host);
        req.extend_from_slice(&port.to_be_bytes());
        c.write_all(&req).unwrap();
        let mut reply = [0u8; 10];
        c.read_exact(&mut reply).unwrap();
        (c, reply[1])
    };
    let (mut c, code) = socks(b"allowed.test", 3);
    assert_eq!(code, 0);
    c.write_all(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    assert!(out.ends_with("hello"), "{out}");
    assert_eq!(socks(b"other.test", 3).1, 2);
    assert_eq!(socks(&[127, 0, 0, 1], 1).1, 2);
    let d = denials(&sink);
    assert!(d.iter().any(|(t, _)| *t == format!("other.test:{port}")), "{d:?}");
    assert!(d.iter().any(|(t, _)| *t == format!("127.0.0.1:{port}")), "{d:?}");
    assert_eq!(p.finish().entries.len(), 1);
}

#[test]
fn socks5_offers_connect_without_credentials_only() {
    let o = Origin::start();
    let (p, sink) = proxy(&[format!("allowed.test:{}", o.port)], MAP);
    // Credentials only (a client configured for another proxy): no method accepted.
    let mut c = TcpStream::connect(p.addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(&[5, 1, 2]).unwrap();
    let mut reply = Vec::new();
    let _ = c.read_to_end(&mut reply);
    assert_eq!(reply, [5, 0xff]);
    // BIND (2) and UDP ASSOCIATE (3) are refused and reported.
    for cmd in [2u8, 3] {
        let mut c = TcpStream::connect(p.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c.write_all(&[5, 1, 0]).unwrap();
        let mut hello = [0u8; 2];
        c.read_exact(&mut hello).unwrap();
        let mut req = vec![5, cmd, 0, 3, 12];
        req.extend_from_slice(b"allowed.test");
        req.extend_from_slice(&o.port.to_be_bytes());
        c.write_all(&req).unwrap();
        let mut reply = [0u8; 10];
        c.read_exact(&mut reply).unwrap();
        assert_eq!(reply[1], 7, "command {cmd}");
    }
    assert!(denials(&sink).iter().any(|(_, e)| e.contains("BIND and UDP ASSOCIATE")));
    assert!(o.heads().is_empty());
    assert!(p.finish().entries.is_empty());
}

#[test]
fn loopback_needs_the_test_map_even_for_an_exact_name() {
    let o = Origin::start();
    let port = o.port;
    let sink: DenialSink = Arc::default();
    let config = ProxyConfig {
        allow: AllowList::parse(&[format!("localhost:{port}")]).unwrap(),
        test_resolve: None,
        host_addrs: None,
    };
    let p = Proxy::start(config, sink.clone()).unwrap();
    let out = exchange(&p, format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n").as_bytes());
    assert!(out.starts_with("HTTP/1.1 403 "), "{out}");
    let d = denials(&sink);
    assert!(d.iter().any(|(_, e)| e.contains("resolves to 127.0.0.1, a loopback address")), "{d:?}");
    assert!(o.heads().is_empty());
}

#[test]
fn the_test_map_holds_strict_names_only() {
    let t = TestResolver::parse("a.test=127.0.0.1, b.test=169.254.169.254,bad name=127.0.0.1,c.test=::1,d.test=x");
    assert_eq!(t.lookup("a.test"), Some("127.0.0.1".parse().unwrap()));
    assert_eq!(t.lookup("b.test"), Some("169.254.169.254".parse().unwrap()));
    assert_eq!(t.lookup("c.test"), Some("::1".parse().unwrap()));
    assert_eq!(t.map.len(), 3);
}

#[test]
fn the_client_environment_names_the_proxy_everywhere() {
    let env = client_env("127.0.0.1:4000".parse().unwrap());
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    assert_eq!(get("HTTPS_PROXY"), Some("http://127.0.0.1:4000"));
    assert_eq!(get("http_proxy"), Some("http://127.0.0.1:4000"));
    assert_eq!(get("ALL_PROXY"), Some("socks5h://127.0.0.1:4000"));
    assert_eq!(get("no_proxy"), Some(""));
    assert_eq!(get("npm_config_https_proxy"), Some("http://127.0.0.1:4000"));
    assert_eq!(get("GIT_CONFIG_KEY_0"), Some("http.proxy"));
}

/// The run's denials as recorded, typed.
fn typed(sink: &DenialSink) -> Vec<crate::result::Denial> {
    sink.lock().unwrap().snapshot().to_vec()
}

#[test]
fn malformed_heads_are_refused_with_a_denial_and_reach_nothing() {
    let o = Origin::start();
    let port = o.port;
    let (p, sink) = proxy(&[format!("allowed.test:{port}")], MAP);
    let get = format!("GET http://allowed.test:{port}/ HTTP/1.1\r\n");
    let post = format!("POST http://allowed.test:{port}/ HTTP/1.1\r\n");
    let smuggled = "GET /smuggled HTTP/1.1\r\nHost: other.test\r\n\r\n";
    let cases = [
        // A bare CR ends the header block for lenient origins: the body would be read
        // as a second request.
        format!("{post}X-A: 1\r\rY: 2\r\nContent-Length: {}\r\n\r\n{smuggled}", smuggled.len()),
        format!("{get}X-A: a\0b\r\n\r\n"),
        format!("{get}X-A: 1\r\n folded\r\n\r\n"),
        format!("{get}Host : other.test\r\n\r\n"),
        format!("GET http://allowed.test:{port}/ HTTP/1.1\nHost: a\n\n"),
        format!("GET http://allowed.test:{port}/\x01 HTTP/1.1\r\n\r\n"),
        format!("{post}Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello"),
        format!("{post}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        format!("{post}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
        format!("{post}Content-Length: -1\r\n\r\n"),
        format!("{get}X: {}\r\n\r\n", "a".repeat(MAX_HEAD)),
    ];
    for req in &cases {
        let out = exchange(&p, req.as_bytes());
        assert!(out.starts_with("HTTP/1.1 400 "), "{req:?}: {out}");
    }
    // One denial per distinct problem (the same problem twice is one denial).
    let d = typed(&sink);
    assert_eq!(d.len(), 8, "{d:?}");
    for d in &d {
        assert!(d.evidence.starts_with("proxy refused: malformed request: "), "{d:?}");
        assert!(d.proxy.as_ref().and_then(|p| p.grantable()).is_none(), "{d:?}: a malformed request is never a grant");
    }
    assert!(o.raw().is_empty(), "the origin received: {:?}", String::from_utf8_lossy(&o.raw()));
    assert!(p.finish().entries.is_empty());
}

#[test]
fn the_origin_gets_a_head_rebuilt_from_parsed_fields() {
    let o = Origin::start();
    let port = o.port;
    let (p, sink) = proxy(&[format!("allowed.test:{port}")], MAP);
    let req = format!(
        "POST http://allowed.test:{port}/up?x=1 HTTP/1.1\r\nHost: other.test\r\nUser-Agent:   t/1 \t\r\n\
         Connection: keep-alive, X-Hop\r\nX-Hop: secret\r\nProxy-Connection: keep-alive\r\nUpgrade: h2c\r\n\
         Content-Length: 5\r\n\r\nhelloGET /second HTTP/1.1\r\nHost: other.test\r\n\r\n"
    );
    let out = exchange(&p, req.as_bytes());
    assert!(out.ends_with("hello"), "{out}");
    assert_eq!(
        String::from_utf8_lossy(&o.raw()),
        format!(
            "POST /up?x=1 HTTP/1.1\r\nHost: allowed.test:{port}\r\nUser-Agent: t/1\r\nContent-Length: 5\r\n\
             Connection: close\r\n\r\nhello"
        )
    );
    assert!(typed(&sink).is_empty());
}

#[test]
fn chunked_bodies_are_re_encoded_and_invalid_framing_cut() {
    let o = Origin::start();
    let port = o.port;
    let (p, sink) = proxy(&[format!("allowed.test:{port}")], MAP);
    let head = format!("POST http://allowed.test:{port}/c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    let req = format!(
        "{head}3;ext=\"v\"\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: other.test\r\n\r\n"
    );
    let out = exchange(&p, req.as_bytes());
    assert!(out.ends_with("hello"), "{out}");
    let raw = String::from_utf8_lossy(&o.raw()).into_owned();
    assert_eq!(
        raw,
        format!(
            "POST /c HTTP/1.1\r\nHost: allowed.test:{port}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
             3\r\nabc\r\n0\r\n\r\n"
        ),
        "extensions and trailers dropped, nothing after the body"
    );
    assert!(typed(&sink).is_empty());
    // A chunk whose data overruns its size: the origin gets the head and the valid
    // prefix only, the connection is cut, and the refusal is recorded.
    let o = Origin::start();
    let port = o.port;
    let (p, sink) = proxy(&[format!("allowed.test:{port}")], MAP);
    let head = format!("POST http://allowed.test:{port}/c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    let _ = exchange(&p, format!("{head}5\r\nabc\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n").as_bytes());
    // The body thread records the refusal after the client's connection ends (a
    // bounded wait for that event, not a timing assertion).
    let cut = |d: &[crate::result::Denial]| {
        d.iter().any(|d| d.evidence.contains("malformed request: chunk data not followed by CRLF"))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !cut(&typed(&sink)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(cut(&typed(&sink)), "{:?}", typed(&sink));
    let _ = p.finish();
    let raw = String::from_utf8_lossy(&o.raw()).into_owned();
    assert!(!raw.contains("smuggled") && raw.matches("HTTP/1.1\r\n").count() <= 1, "{raw:?}");
}

/// A non-loopback IPv4 address of this host, if it has one.
fn own_v4() -> Option<std::net::Ipv4Addr> {
    nix::ifaddrs::getifaddrs()
        .ok()?
        .filter_map(|i| i.address?.as_sockaddr_in().map(|a| a.ip()))
        .find(|a| !a.is_loopback() && !a.is_link_local())
}

#[test]
fn the_hosts_own_addresses_are_reached_only_when_listed_exactly() {
    let Some(own) = own_v4() else {
        eprintln!("SKIP the_hosts_own_addresses_are_reached_only_when_listed_exactly: no non-loopback IPv4 address");
        return;
    };
    // A listener on every address of the host: the one a name resolving to the
    // host's own address reaches.
    let o = Origin::on("0.0.0.0:0");
    let port = o.port;
    let map = format!("own.test={own}");
    let range = format!("{}/24:{port}", std::net::Ipv4Addr::from(u32::from(own) & 0xffff_ff00));
    for allow in [vec![format!("own.test:{port}")], vec![format!("own.test:{port}"), range.clone()]] {
        let (p, sink) = proxy_on(&allow, &map, None);
        let out = exchange(&p, format!("CONNECT own.test:{port} HTTP/1.1\r\n\r\n").as_bytes());
        assert!(out.starts_with("HTTP/1.1 403 "), "{allow:?}: {out}");
        let d = denials(&sink);
        assert!(d.iter().any(|(_, e)| e.contains("one of this host's own addresses")), "{allow:?}: {d:?}");
    }
    assert!(o.heads().is_empty(), "the host's own listener was reached: {:?}", o.heads());
    // The exact address opens it (the control: the listener answers).
    let (p, sink) = proxy_on(&[format!("own.test:{port}"), format!("{own}:{port}")], &map, None);
    let out = exchange(&p, format!("GET http://own.test:{port}/ HTTP/1.1\r\n\r\n").as_bytes());
    assert!(out.ends_with("hello"), "{out} {:?}", denials(&sink));
    // And a range opens a special-purpose address that is not the host's (here the
    // same address, with the host's own addresses withheld from the proxy).
    let (p, _) = proxy_on(&[format!("own.test:{port}"), range], &map, Some(Vec::new()));
    let out = exchange(&p, format!("GET http://own.test:{port}/r HTTP/1.1\r\n\r\n").as_bytes());
    assert!(out.ends_with("hello"), "{out}");
    assert_eq!(o.heads().len(), 2, "{:?}", o.heads());
}
