//! `cordon serve` asking its client for a denied call's narrow grant: the server's own
//! request `approve`, written on stdout like a response, answered by the client on
//! stdin like a request (docs/protocol.md, "Approval").
//!
//! Only for clients that said `"capabilities": ["approve"]` in `hello`. The request
//! carries the escalation request (the JSON an `--approver` program reads) and the
//! same facts as text for a person ([`approval_text`], the denied run's output fenced
//! by a fresh random boundary, everything escaped). Only `{"result": {"grant": true}}`
//! grants; `grant: false`, an error, a malformed answer, the end of the client's input
//! or no answer within [`APPROVER_TIMEOUT`] refuses.
//!
//! What it does not do: decide anything itself, or read the transport (the serve loop
//! routes each answer here by its id, [`ClientAsks::answer`]).

use super::protocol::{ClientResponse, RequestId, SERVER_REQUEST_ID_PREFIX};
use super::Outgoing;
use crate::escalation::{
    approval_text, fresh_boundary, printable, Approver, ApproverInfo, Decision, EscalationRequest, APPROVER_TIMEOUT,
};
use crate::result::RunResult;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// The server's requests to the client still waiting for an answer.
#[derive(Default)]
struct Pending {
    next: u64,
    waiting: HashMap<String, oneshot::Sender<Result<Value, Value>>>,
    /// The client's input ended: nobody can answer any more.
    closed: bool,
}

/// One connection's channel for asking its client: the writer's queue and the requests
/// waiting for an answer.
pub(super) struct ClientAsks {
    tx: mpsc::Sender<Outgoing>,
    pending: Mutex<Pending>,
}

impl ClientAsks {
    pub(super) fn new(tx: mpsc::Sender<Outgoing>) -> ClientAsks {
        ClientAsks { tx, pending: Mutex::default() }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Route a client's answer to the request waiting for it; an answer nobody waits
    /// for (a late one, a made-up id) is dropped with a note on stderr.
    pub(super) fn answer(&self, response: ClientResponse) {
        match self.pending().waiting.remove(&response.id) {
            Some(tx) => drop(tx.send(response.outcome)),
            None => eprintln_or_drop!(
                "cordon serve: dropped an answer to `{}`, which no request waits for",
                printable(&response.id.chars().take(80).collect::<String>())
            ),
        }
    }

    /// The client's input ended: every waiting request is refused, and later ones are
    /// refused at once.
    pub(super) fn close(&self) {
        let mut p = self.pending();
        p.closed = true;
        p.waiting.clear();
    }

    /// A fresh request id and the receiver of its answer, unless the input has ended.
    fn register(&self) -> Option<(String, oneshot::Receiver<Result<Value, Value>>)> {
        let mut p = self.pending();
        if p.closed {
            return None;
        }
        p.next += 1;
        let id = format!("{SERVER_REQUEST_ID_PREFIX}{}", p.next);
        let (tx, rx) = oneshot::channel();
        p.waiting.insert(id.clone(), tx);
        Some((id, rx))
    }

    fn forget(&self, id: &str) {
        self.pending().waiting.remove(id);
    }
}

/// Asks the `cordon serve` client (and through it, its user) for one call's grant.
pub(super) struct ServeApprover {
    asks: Arc<ClientAsks>,
    /// The id of the `run` request the grant is for.
    for_id: RequestId,
    client: String,
    first: Mutex<Option<RunResult>>,
}

impl ServeApprover {
    pub(super) fn new(asks: Arc<ClientAsks>, for_id: RequestId, client: String) -> ServeApprover {
        ServeApprover { asks, for_id, client, first: Mutex::new(None) }
    }

    async fn ask(&self, req: &EscalationRequest) -> Decision {
        let client = printable(&self.client);
        let Some((id, rx)) = self.asks.register() else {
            return Decision::refuse(format!("the input of client {client} has ended; nobody can answer"));
        };
        let first = self.first.lock().unwrap_or_else(|p| p.into_inner()).take();
        let boundary = fresh_boundary("cordon-approval-");
        let text = approval_text(req, first.as_ref(), &boundary);
        let line = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "approve",
            "params": { "for": &self.for_id, "request": req, "text": text, "boundary": boundary },
        });
        let sent = self.asks.tx.send(Outgoing::small(serde_json::to_vec(&line).unwrap_or_default())).await;
        let decision = match sent {
            Err(_) => Decision::refuse(format!("cannot write to client {client}")),
            Ok(()) => match tokio::time::timeout(APPROVER_TIMEOUT, rx).await {
                Err(_) => {
                    Decision::refuse(format!("no answer from client {client} within {} s", APPROVER_TIMEOUT.as_secs()))
                }
                Ok(Err(_)) => Decision::refuse(format!("the input of client {client} ended before it answered")),
                Ok(Ok(Err(_))) => Decision::refuse(format!("client {client} answered with an error")),
                Ok(Ok(Ok(v))) if v.get("grant") == Some(&Value::Bool(true)) => {
                    Decision::grant(format!("approved through client {client}"))
                }
                Ok(Ok(Ok(_))) => Decision::refuse(format!("client {client} answered no")),
            },
        };
        self.asks.forget(&id);
        decision
    }
}

impl Approver for ServeApprover {
    fn info(&self) -> ApproverInfo {
        ApproverInfo { kind: "serve-client".into(), detail: Some(self.client.clone()) }
    }

    fn decide<'a>(&'a self, req: &'a EscalationRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(self.ask(req))
    }

    fn first_run(&self, result: &RunResult) {
        *self.first.lock().unwrap_or_else(|p| p.into_inner()) = Some(result.clone());
    }
}
