//! Asking the user of an MCP client for a denied call's narrow grant: an
//! `elicitation/create` request (a form with one boolean, `approve`) sent to the client
//! over the same connection, for clients that declared form elicitation during an
//! `initialize` handshake (protocol 2025-06-18 to 2025-11-25).
//!
//! The message shows the same facts as `cordon run --ask` ([`approval_text`]): the tail
//! of the denied run's output between two lines carrying a fresh random boundary, then
//! the refused operations, command, cwd, the grant proposed and the call's fingerprint,
//! all escaped. Only an answer `accept` with `{"approve": true}` grants; a decline, a
//! cancel, `approve: false`, an error, a malformed answer or no answer within
//! [`APPROVER_TIMEOUT`] refuses.
//!
//! What it does not do: MCP 2026-07-28 forbids server-to-client requests (it carries
//! elicitation inside a tool result, `InputRequiredResult`, which cordon does not
//! produce yet): such a session has no elicitation here, and the server's
//! `--approver`, if any, is asked instead.

use crate::escalation::{
    approval_text, fresh_boundary, printable, Approver, ApproverInfo, Decision, EscalationRequest, APPROVER_TIMEOUT,
};
use crate::result::RunResult;
use rmcp::model::{ClientResult, ElicitRequest, ElicitRequestParams, ElicitationAction, ServerRequest};
use rmcp::service::{PeerRequestOptions, RequestContext};
use rmcp::{Peer, RoleServer};
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

/// The name of the one field of the form.
const APPROVE_FIELD: &str = "approve";

/// Asks the MCP client's user, through elicitation, for one call's narrow grant.
pub(super) struct ElicitApprover {
    peer: Peer<RoleServer>,
    client: String,
    first: Mutex<Option<RunResult>>,
}

impl ElicitApprover {
    /// An approver for the client of `context`, or why that client cannot be asked.
    pub(super) fn for_request(context: &RequestContext<RoleServer>) -> Result<ElicitApprover, String> {
        let handshake = context.protocol_version().is_some_and(|v| v.has_initialize());
        if !handshake {
            return Err("this MCP session uses protocol 2026-07-28, which cordon cannot elicit through yet".into());
        }
        let info = context.peer.peer_info().ok_or("the client did not initialize")?;
        let form = info.capabilities.elicitation.as_ref().is_some_and(|e| e.form.is_some() || e.url.is_none());
        if !form {
            return Err("the MCP client does not support elicitation (it did not declare the capability)".into());
        }
        let client = format!("{} {}", info.client_info.name, info.client_info.version);
        Ok(ElicitApprover { peer: context.peer.clone(), client, first: Mutex::new(None) })
    }

    async fn ask(&self, req: &EscalationRequest) -> Decision {
        let first = self.first.lock().unwrap_or_else(|p| p.into_inner()).take();
        let boundary = fresh_boundary("cordon-approval-");
        let message = approval_text(req, first.as_ref(), &boundary);
        let params = serde_json::json!({
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {
                    APPROVE_FIELD: {
                        "type": "boolean",
                        "title": "Run it once more with only this allowed",
                        "description": "true: run this exact command once more with the grant shown; \
                                        false or declining: do not",
                        "default": false
                    }
                },
                "required": [APPROVE_FIELD]
            }
        });
        let params: ElicitRequestParams = match serde_json::from_value(params) {
            Ok(p) => p,
            Err(e) => return Decision::refuse(format!("cannot build the elicitation request: {e}")),
        };
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        let options = PeerRequestOptions::with_timeout(APPROVER_TIMEOUT);
        let answer = match self.peer.send_request_with_option(request, options).await {
            Ok(handle) => handle.await_response().await,
            Err(e) => Err(e),
        };
        let client = printable(&self.client);
        match answer {
            Ok(ClientResult::ElicitResult(r)) => match r.action {
                ElicitationAction::Accept => {
                    let approve = r.content.as_ref().and_then(|c| c.get(APPROVE_FIELD));
                    if approve == Some(&serde_json::Value::Bool(true)) {
                        Decision::grant(format!("approved by the user of MCP client {client}"))
                    } else {
                        Decision::refuse(format!("the user of MCP client {client} answered no"))
                    }
                }
                ElicitationAction::Decline => Decision::refuse(format!("declined by the user of MCP client {client}")),
                ElicitationAction::Cancel => Decision::refuse(format!("cancelled by the user of MCP client {client}")),
                _ => Decision::refuse(format!("MCP client {client} answered with an unknown action")),
            },
            Ok(_) => {
                Decision::refuse(format!("MCP client {client} answered something other than an elicitation result"))
            }
            Err(e) => Decision::refuse(format!("asking MCP client {client} failed: {}", printable(&e.to_string()))),
        }
    }
}

impl Approver for ElicitApprover {
    fn info(&self) -> ApproverInfo {
        ApproverInfo { kind: "mcp-elicitation".into(), detail: Some(self.client.clone()) }
    }

    fn decide<'a>(&'a self, req: &'a EscalationRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(self.ask(req))
    }

    fn first_run(&self, result: &RunResult) {
        *self.first.lock().unwrap_or_else(|p| p.into_inner()) = Some(result.clone());
    }
}
