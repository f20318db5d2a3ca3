//! Fuzz the request parser of `cordon serve` (src/serve/protocol/): line splitting,
//! JSON-RPC parsing (requests, and the client's answers to the server's `approve`
//! requests), parameter typing, the ceiling clamp and error serialization.
//!
//! Properties checked on every input, beyond "no panic, no hang, no unbounded
//! allocation":
//! - the splitter never yields a line longer than its limit or one holding a newline;
//! - every error response is one line of valid JSON with `jsonrpc`, `id` and
//!   `error.data.code`;
//! - a request that the ceiling accepts is never wider than the ceiling: mode at or
//!   below, working directory inside the workspace, writable roots inside the writable
//!   set, network only if allowed, best effort only from the ceiling.
#![no_main]

use cordon::ceiling::{Ceiling, CeilingArgs};
use cordon::flags::PolicyArgs;
use cordon::mode::Mode;
use cordon::serve::protocol::{
    parse_request, parse_response, response_err, Frame, LineSplitter, Method, RpcError, SERVER_REQUEST_ID_PREFIX,
};
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

const LIMIT: usize = 4096;

/// A workspace with a subdirectory, a `.git` and a symlink that escapes to `/`.
fn ceilings() -> &'static [Ceiling] {
    static C: OnceLock<Vec<Ceiling>> = OnceLock::new();
    C.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("cordon-fuzz-{}", std::process::id()));
        let ws = dir.join("ws");
        let extra = dir.join("extra");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(&extra).unwrap();
        let _ = std::os::unix::fs::symlink("/", ws.join("escape"));
        [Mode::ReadOnly, Mode::WorkspaceWrite, Mode::FullAccess]
            .into_iter()
            .map(|mode| {
                Ceiling::from_args(&CeilingArgs {
                    policy: PolicyArgs {
                        mode: Some(mode),
                        cwd: Some(ws.clone()),
                        writable: vec![extra.clone()],
                        ..PolicyArgs::default()
                    },
                    ..CeilingArgs::default()
                })
                .unwrap()
            })
            .collect()
    })
}

fn check_error_line(line: &[u8]) {
    assert!(!line.contains(&b'\n'), "response spans lines");
    let v: serde_json::Value = serde_json::from_slice(line).expect("error response is not JSON");
    assert_eq!(v["jsonrpc"], "2.0");
    assert!(v.get("id").is_some());
    assert!(v["error"]["data"]["code"].is_string());
    assert!(v["error"]["code"].is_i64());
}

fn check_line(line: &[u8]) {
    // A client's answer to a server request is never also taken as a request.
    if let Some(r) = parse_response(line) {
        assert!(r.id.starts_with(SERVER_REQUEST_ID_PREFIX));
        return;
    }
    match parse_request(line) {
        Err(f) => check_error_line(&response_err(&f.id, &f.error)),
        Ok(incoming) => {
            let id = incoming.id.value();
            assert!(id.is_string() || id.is_number());
            let params = match incoming.method {
                Method::Run(p) | Method::Start(p) => p,
                _ => return,
            };
            for ceiling in ceilings() {
                match ceiling.clamp(params.clone()) {
                    Err(e) => check_error_line(&response_err(&incoming.id, &RpcError::from(e))),
                    Ok(clamped) => {
                        let req = clamped.request;
                        let p = &req.policy;
                        assert!(p.mode <= ceiling.mode, "mode widened");
                        let wd: PathBuf = req.workdir.clone().expect("clamp sets the workdir");
                        assert!(wd.starts_with(&ceiling.workspace), "workdir outside the workspace");
                        assert!(!p.network || ceiling.allows_network(), "network widened");
                        assert_eq!(p.best_effort, ceiling.best_effort);
                        if let Some(set) = ceiling.writable_set() {
                            for r in &p.writable_roots {
                                assert!(
                                    set.iter().any(|w| r.starts_with(w)),
                                    "writable root {r:?} outside the ceiling"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // The whole input as one line.
    check_line(data);

    // The input as a stream, cut into chunks at positions the input itself picks.
    let mut splitter = LineSplitter::new(LIMIT);
    let mut frames = Vec::new();
    let step = 1 + data.first().copied().unwrap_or(0) as usize;
    for chunk in data.chunks(step) {
        splitter.push(chunk, &mut frames);
    }
    splitter.finish(&mut frames);
    for frame in frames {
        match frame {
            Frame::Line(line) => {
                assert!(line.len() <= LIMIT && !line.contains(&b'\n'));
                check_line(&line);
            }
            Frame::TooLong { seen } => assert!(seen > LIMIT),
        }
    }
});
