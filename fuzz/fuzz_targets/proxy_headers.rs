//! Fuzz the proxy's header-field parser and framing (src/proxy/http.rs): the input is
//! the field block of a request (between a fixed request line and the final CRLF).
//!
//! Properties, beyond "no panic, no hang":
//! - every parsed field has a token name and a value without CR, LF, NUL or other
//!   controls (tab allowed), trimmed of spaces and tabs;
//! - the framing is one of none, one length or chunked, never both;
//! - the head cordon rebuilds holds no bare CR or LF, no folded line, no `Proxy-*`,
//!   `Connection`-nominated or framing field of the client's, exactly one `Host`
//!   (cordon's) and ends with the single CRLF CRLF; parsed again, it has the same
//!   framing, and its other fields are some of the client's, unchanged, in order.
#![no_main]

use cordon::proxy::http::{origin_head, parse_head, Framing};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut head = b"POST http://allowed.test/p HTTP/1.1\r\n".to_vec();
    head.extend_from_slice(data);
    head.extend_from_slice(b"\r\n");
    let Ok(h) = parse_head(&head) else { return };
    for f in &h.fields {
        assert!(!f.name.is_empty() && f.name.bytes().all(|b| b.is_ascii_graphic() && b != b':'));
        assert!(f.value.iter().all(|b| *b == b'\t' || !b.is_ascii_control()));
        assert!(!f.value.starts_with(b" ") && !f.value.ends_with(b" "));
        assert!(!f.value.starts_with(b"\t") && !f.value.ends_with(b"\t"));
    }
    let Ok(framing) = h.framing() else { return };
    let out = origin_head(&h, "/p", "allowed.test", framing);
    assert!(out.ends_with(b"\r\n\r\n"));
    assert_eq!(out.windows(4).filter(|w| w == b"\r\n\r\n").count(), 1);
    for (i, b) in out.iter().enumerate() {
        match b {
            b'\r' => assert_eq!(out.get(i + 1), Some(&b'\n'), "bare CR"),
            b'\n' => assert_eq!(out[i - 1], b'\r', "bare LF"),
            _ => {}
        }
    }
    assert!(!out.windows(3).any(|w| w == b"\r\n " || w == b"\r\n\t"), "folded line");
    let again = parse_head(&out).expect("the rebuilt head parses");
    assert_eq!(again.framing(), Ok(framing));
    assert_eq!(again.fields_named("host").count(), 1);
    for f in &again.fields {
        let n = f.name.to_ascii_lowercase();
        assert!(!n.starts_with("proxy-") && n != "upgrade" && n != "te" && n != "keep-alive", "{n}");
    }
    let framing_fields = again.fields_named("content-length").count() + again.fields_named("transfer-encoding").count();
    assert_eq!(framing_fields, usize::from(framing != Framing::None));
    // cordon's fields aside, the rebuilt fields are some of the client's, with the
    // same values, in the same order.
    let mut original = h.fields.iter();
    for f in again.fields.iter().filter(|f| {
        let n = f.name.to_ascii_lowercase();
        !matches!(n.as_str(), "host" | "connection" | "content-length" | "transfer-encoding")
    }) {
        assert!(original.any(|o| o == f), "{f:?} is not one of the client's fields, in order");
    }
});
