//! Fuzz the proxy's SOCKS5 parser (src/proxy/socks.rs) and the strict host parsing a
//! SOCKS5 domain name then goes through (src/result/network.rs).
//!
//! Properties, beyond "no panic":
//! - a message is recognized exactly when complete: every shorter prefix asks for more
//!   (or fails the same way), and bytes after it change nothing;
//! - it consumes no more than it was given;
//! - a domain name becomes a target only if it is a strict host name or IP literal,
//!   whose text form parses back to the same target (normalization is idempotent),
//!   and a host and port made of it print and parse back unchanged.
#![no_main]

use cordon::proxy::rules::Target;
use cordon::proxy::socks::{parse_greeting, parse_request, Parsed, SocksHost};
use cordon::proxy::HostPort;
use libfuzzer_sys::fuzz_target;

fn check<T: PartialEq + std::fmt::Debug>(data: &[u8], parse: fn(&[u8]) -> Parsed<T>) -> Option<T> {
    let full = parse(data);
    match &full {
        Ok(Some((_, n))) => {
            assert!(*n <= data.len());
            for cut in 0..*n {
                match parse(&data[..cut]) {
                    Ok(None) | Err(_) => {}
                    Ok(Some(_)) => panic!("complete at {cut} before {n}"),
                }
            }
            let mut longer = data[..*n].to_vec();
            longer.extend_from_slice(b"\x05\x01\x00trailing");
            assert_eq!(parse(&longer), full);
        }
        Ok(None) => assert!(data.len() < 2 + 255 + 4 + 2),
        Err(_) => {}
    }
    full.ok().flatten().map(|(v, _)| v)
}

fuzz_target!(|data: &[u8]| {
    let _ = check(data, parse_greeting);
    let Some(req) = check(data, parse_request) else { return };
    let target = match &req.host {
        SocksHost::Ip(ip) => Some(Target::Ip(*ip)),
        SocksHost::Name(n) => std::str::from_utf8(n).ok().and_then(Target::parse),
    };
    let Some(target) = target else { return };
    if let SocksHost::Name(n) = &req.host {
        let text = std::str::from_utf8(n).unwrap();
        assert!(!text.contains(['@', '%', '*', '/', ' ', '\0']), "{text:?} became a target");
    }
    assert_eq!(Target::parse(&target.to_string()).as_ref(), Some(&target));
    if req.port != 0 {
        let hp = HostPort { host: target, port: req.port };
        if let Ok(back) = hp.to_string().parse::<HostPort>() {
            assert_eq!(back, hp);
        }
    }
});
