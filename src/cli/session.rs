//! `cordon session set-mode` / `cordon session show`.

use super::{emit, print_json, SessionCmd};
use std::io::Write;
use std::process::ExitCode;

/// `cordon session set-mode` / `cordon session show`.
pub(crate) fn session_cmd(cmd: SessionCmd) -> ExitCode {
    use cordon::escalation::printable;
    use cordon::session::{self, SessionChange, SessionError, DEFAULT_SESSION_MODE};
    let fail = |e: SessionError| {
        errln!("cordon: error[{}]: {e}", e.code());
        ExitCode::FAILURE
    };
    match cmd {
        SessionCmd::SetMode { file, mode } => {
            // Appending to a corrupt log would hide the corruption behind a valid line.
            match session::read_events(&file) {
                Ok(_) | Err(SessionError::NotFound { .. }) => {}
                Err(e) => return fail(e),
            }
            match session::append_event(&file, &session::SessionEvent::set_mode(mode)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            }
        }
        SessionCmd::Grant { file, what, path } => {
            use cordon::escalation::Grant;
            let grant = match (what.as_str(), path) {
                ("network", None) => Grant::Network,
                // One exact host and port, normalized (never a wildcard or a range).
                ("host", h) => match h.as_deref().and_then(|h| h.to_str()).map(str::parse::<cordon::proxy::HostPort>) {
                    Some(Ok(exact)) => Grant::Host { host: exact.to_string() },
                    _ => {
                        errln!(
                            "cordon: error[INVALID_REQUEST]: `session grant FILE host HOST:PORT` needs one exact host \
                             and port (`pypi.org:443`, `10.0.0.5:8080`, `[fd00::1]:443`)"
                        );
                        return ExitCode::FAILURE;
                    }
                },
                ("write", Some(p)) if p.is_absolute() => Grant::Write { path: p.canonicalize().unwrap_or(p) },
                ("write", _) => {
                    errln!("cordon: error[INVALID_REQUEST]: `session grant FILE write PATH` needs an absolute PATH");
                    return ExitCode::FAILURE;
                }
                _ => {
                    errln!("cordon: error[INVALID_REQUEST]: `session grant FILE network` takes no path");
                    return ExitCode::FAILURE;
                }
            };
            match session::read_events(&file) {
                Ok(_) | Err(SessionError::NotFound { .. }) => {}
                Err(e) => return fail(e),
            }
            match session::append_event(&file, &session::SessionEvent::grant(grant)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            }
        }
        SessionCmd::Show { file, json } => {
            let events = match session::read_events(&file) {
                Ok(e) => e,
                Err(e) => return fail(e),
            };
            let mode = session::effective_mode(DEFAULT_SESSION_MODE, &events);
            if json {
                let obj = serde_json::json!({
                    "file": file, "effective_mode": mode, "default_mode": DEFAULT_SESSION_MODE,
                    "grants": session::standing_grants(&events), "events": events,
                });
                print_json(&obj);
            } else {
                let mut text = format!("effective mode: {mode}\n");
                text.push_str(&format!("history ({} events, starting from {DEFAULT_SESSION_MODE}):\n", events.len()));
                for e in &events {
                    match &e.change {
                        SessionChange::SetMode { mode } => {
                            text.push_str(&format!("  {}  set-mode {mode}\n", printable(&e.at)))
                        }
                        SessionChange::Grant { grant } => {
                            text.push_str(&format!("  {}  grant {}\n", printable(&e.at), printable(&grant.to_string())))
                        }
                    }
                }
                // A closed pipe (`| head`) ends the output quietly.
                let _ = emit(text.as_bytes());
            }
            ExitCode::SUCCESS
        }
    }
}
