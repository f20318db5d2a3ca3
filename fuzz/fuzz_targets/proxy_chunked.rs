//! Fuzz the proxy's chunked-body decoder (src/proxy/http.rs). The first input byte
//! picks how the rest is cut into feeds (as reads from a socket would cut it).
//!
//! Properties, beyond "no panic, no hang, no unbounded allocation":
//! - cut anywhere, the decoder yields the same data, consumes the same number of bytes
//!   and reaches the same end (done, error or wanting more) as fed in one piece and
//!   byte by byte: its decision does not depend on how the bytes arrived;
//! - it never consumes past the body's end;
//! - what cordon re-encodes from the decoded data decodes back to the same data and
//!   ends exactly at its own end.
#![no_main]

use cordon::proxy::http::{encode_chunk, ChunkedDecoder};
use libfuzzer_sys::fuzz_target;

const TRAILER: usize = 16 * 1024;

#[derive(Debug, PartialEq)]
enum End {
    Done,
    Error,
    More,
}

/// Feed `input` in pieces of `step` bytes; (data, consumed, end).
fn decode(input: &[u8], step: usize) -> (Vec<u8>, usize, End) {
    let mut d = ChunkedDecoder::new(TRAILER);
    let (mut data, mut used) = (Vec::new(), 0);
    for piece in input.chunks(step.max(1)) {
        match d.feed(piece, &mut data) {
            Err(_) => return (data, used, End::Error),
            Ok(n) => {
                assert!(n <= piece.len());
                used += n;
                if d.is_done() {
                    return (data, used, End::Done);
                }
                assert_eq!(n, piece.len(), "stopped early without being done");
            }
        }
    }
    (data, used, End::More)
}

fuzz_target!(|input: &[u8]| {
    let Some((&cut, body)) = input.split_first() else { return };
    let whole = decode(body, body.len());
    let bytewise = decode(body, 1);
    let cut_up = decode(body, usize::from(cut) + 1);
    // An error may be found with less data decoded when the bytes come in one piece
    // (the feed that errs drops its own data); the end and, when done, everything agree.
    assert_eq!(whole.2, bytewise.2);
    assert_eq!(whole.2, cut_up.2);
    if whole.2 == End::Done {
        assert_eq!(whole, bytewise);
        assert_eq!(whole, cut_up);
        let mut re = Vec::new();
        for piece in whole.0.chunks(usize::from(cut) + 1) {
            re.extend_from_slice(&encode_chunk(piece));
        }
        re.extend_from_slice(&encode_chunk(&[]));
        re.extend_from_slice(b"GET /after HTTP/1.1\r\n\r\n");
        let again = decode(&re, re.len());
        assert_eq!(again.2, End::Done);
        assert_eq!(again.0, whole.0);
        assert_eq!(&re[again.1..], b"GET /after HTTP/1.1\r\n\r\n");
    }
});
