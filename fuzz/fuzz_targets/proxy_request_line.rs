//! Fuzz the proxy's request-line parser (src/proxy/http.rs): the input is a request
//! line (ended here by CRLF CRLF), parsed as the proxy parses a head, then its target.
//!
//! Properties, beyond "no panic, no hang":
//! - a parsed line has a token method, a target of visible ASCII, version 1.0 or 1.1;
//! - an absolute target yields a path starting with `/`, a non-empty host, a port from
//!   1 to 65535, and a host and path free of whitespace and controls;
//! - the head cordon rebuilds from it parses again to the same method and path, with
//!   exactly one CRLF CRLF, at its end, and no other CR or LF.
#![no_main]

use cordon::proxy::http::{origin_head, parse_head, proxy_target, Framing, ProxyTarget};
use libfuzzer_sys::fuzz_target;

fn visible(s: &str) -> bool {
    s.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

fuzz_target!(|data: &[u8]| {
    let mut head = data.to_vec();
    head.extend_from_slice(b"\r\n\r\n");
    let Ok(h) = parse_head(&head) else { return };
    assert!(!h.method.is_empty() && visible(&h.method) && visible(&h.target));
    assert!(h.minor <= 1);
    if !data.contains(&b'\n') {
        assert!(h.fields.is_empty(), "a request line alone has no fields");
    }
    let Ok(Some(target)) = proxy_target(&h) else { return };
    let (host, port, path) = match target {
        ProxyTarget::Tunnel { host, port } => (host, port, "/".to_string()),
        ProxyTarget::Absolute { host, port, path } => (host, port, path),
    };
    assert!(!host.is_empty() && visible(&host) && port >= 1 && path.starts_with('/') && visible(&path));
    let out = origin_head(&h, &path, &format!("{host}:{port}"), Framing::None);
    assert!(out.ends_with(b"\r\n\r\n"));
    assert_eq!(out.windows(4).filter(|w| w == b"\r\n\r\n").count(), 1);
    let again = parse_head(&out).expect("the rebuilt head parses");
    assert_eq!((again.method.as_str(), again.target.as_str(), again.minor), (h.method.as_str(), path.as_str(), 1));
});
