//! `cordon serve`: a long-lived executor speaking newline-delimited JSON-RPC 2.0 over
//! stdin/stdout (reference: docs/protocol.md).
//!
//! Shape: one reader (this task) cuts stdin into lines ([`LineSplitter`], at most
//! [`MAX_LINE_BYTES`] each) and parses them; each request runs in its own task, at
//! most [`MAX_IN_FLIGHT`] at once (beyond that the reader waits: backpressure); every
//! response goes through one writer task, so lines never interleave, and is written
//! as soon as its request completes (responses may come out of order: match them by
//! id). A request task that panicked still gets an `INTERNAL_ERROR` response.
//!
//! Memory: responses waiting for the writer are bounded in bytes, not only in number.
//! A request that can answer with captured output (`run`, `read`) first reserves its
//! output tails (twice its `output_cap`, both streams) from the connection's
//! [`MAX_PENDING_OUTPUT`]; the reservation travels with the response line and is
//! released once the line is written. A client that does not read therefore stops the
//! server from starting further runs (backpressure) instead of growing it: with the
//! default limits its peak RSS stays under [`UNREAD_RSS_BOUND`] (tested).
//!
//! Spill files: a response that names spill files hands them to the client only when
//! it is written; a response that is never written (the client is gone) removes them,
//! and at the end of the connection the spill files of background processes whose
//! paths no written response carried are removed too.
//!
//! Lifecycle: at end of input the server stops reading, kills every background
//! process (nobody can read them any more), lets the foreground requests in flight
//! finish and answers each with its real result, then exits: a piped request always
//! gets its result. On SIGTERM, SIGINT, SIGHUP, or when stdout is gone (a write failed,
//! or `poll` on fd 1 reports the reader closed its end: [`stdout_gone`]), it also aborts
//! the foreground runs. Processes belong to the connection; nothing outlives it.
//!
//! Ids: each response carries its request's id exactly as written (raw JSON text); a
//! request whose id equals one still in flight is refused (`DUPLICATE_ID`), since two
//! answers with one id could not be told apart.
//!
//! A server whose workspace is refused (`INVALID_POLICY`) still starts: it answers
//! every request line with that error (id echoed) until its input ends, so a client
//! reads why instead of a broken pipe ([`serve_refusing`]).
//!
//! What it does not do: it does not decide policy (the [`Ceiling`] does) and writes
//! nothing but protocol lines to stdout (diagnostics go to stderr).

mod approve;
pub mod connection;
pub mod protocol;

use crate::ceiling::{Ceiling, CeilingArgs};
use approve::{ClientAsks, ServeApprover};
pub use connection::{Connection, MAX_IN_FLIGHT};
use protocol::{
    codes, is_blank, parse_request, parse_response, response_err, response_ok, Frame, LineSplitter, Method, RpcError,
    MAX_LINE_BYTES,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

/// A response line for the writer, with what it holds: its share of the connection's
/// output budget and the spill files it names. Dropped unwritten, it removes them.
struct Outgoing {
    line: Vec<u8>,
    _budget: Option<OwnedSemaphorePermit>,
    spills: Vec<PathBuf>,
    delivered: bool,
}

impl Outgoing {
    fn small(line: Vec<u8>) -> Outgoing {
        Outgoing { line, _budget: None, spills: Vec::new(), delivered: false }
    }
}

impl Drop for Outgoing {
    fn drop(&mut self) {
        if !self.delivered {
            for p in &self.spills {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// Exit status when the server cannot start (bad ceiling flags, no runtime).
const EXIT_SETUP_FAILED: u8 = 125;
/// Read chunk from stdin.
const READ_CHUNK: usize = 64 * 1024;
/// Responses queued for the writer before request tasks wait for it.
const OUT_QUEUE: usize = 1024;
/// Output tail bytes (both streams) that responses still in progress or waiting for
/// the writer may hold per connection: room for one run at the largest `output_cap`
/// (16 MiB × 2 streams). A JSON line can be up to 6 bytes per tail byte (`\u0000`),
/// so this bounds a connection's unwritten output near 200 MiB.
pub const MAX_PENDING_OUTPUT: usize = 2 * crate::request::MAX_OUTPUT_CAP;
/// The peak RSS the server stays under (default limits) while a client sends runs of
/// the largest output and reads nothing; docs/protocol.md states it, tests/serve.rs
/// measures it (`VmHWM`).
pub const UNREAD_RSS_BOUND: usize = 512 << 20;
/// How long shutdown waits for in-flight requests to answer after everything was
/// killed (they finish within the executor's kill and drain graces).
const DRAIN_REQUESTS: Duration = Duration::from_secs(10);
/// How long shutdown waits for the last responses to be written.
const WRITER_GRACE: Duration = Duration::from_secs(5);

/// Entry point of `cordon serve`.
pub fn main(args: CeilingArgs) -> ExitCode {
    let ceiling = match Ceiling::from_args(&args) {
        Ok(c) => Ok(c),
        // A refused workspace is the caller's choice, not a broken host: answer it.
        Err(e @ crate::error::CordonError::InvalidPolicy(_)) => Err(RpcError::cordon(&e)),
        Err(e) => {
            eprintln_or_drop!("cordon serve: error[{}]: {}", e.code(), e);
            return ExitCode::from(EXIT_SETUP_FAILED);
        }
    };
    // One thread: a run is mostly waiting (pipes, pidfds), and the spawns go through
    // one thread anyway (the stage's spawner: the parent-death signal must mean
    // "cordon exited").
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln_or_drop!("cordon serve: error[IO_ERROR]: starting the runtime: {e}");
            return ExitCode::from(EXIT_SETUP_FAILED);
        }
    };
    let code = rt.block_on(async move {
        let ceiling = match ceiling {
            Ok(c) => c,
            Err(refused) => {
                eprintln_or_drop!("cordon serve: serving errors only: error[{}]: {}", refused.name, refused.message);
                let (input, output) = rmcp::transport::stdio_pipes();
                serve_refusing(input, output, &refused).await;
                return ExitCode::SUCCESS;
            }
        };
        let conn = Connection::new(ceiling, args.executor_config()).map_err(|e| RpcError::cordon(&e));
        let conn = match conn.and_then(|c| c.with_approvals(connection::Approvals::from_args(&args.approval)?)) {
            Ok(s) => Arc::new(s),
            Err(e) => {
                eprintln_or_drop!("cordon serve: error[{}]: {}", e.name, e.message);
                return ExitCode::from(EXIT_SETUP_FAILED);
            }
        };
        // Non-blocking pipes when stdin/stdout are FIFOs (reopened through /proc, so
        // the O_NONBLOCK flag stays private), else tokio's blocking stdio.
        let (input, output) = rmcp::transport::stdio_pipes();
        serve(input, output, conn, signal_counter(), stdout_gone()).await;
        ExitCode::SUCCESS
    });
    // A blocking stdin read (stdin not a pipe) cannot be cancelled; do not wait on it.
    rt.shutdown_timeout(Duration::from_millis(200));
    code
}

/// Serve one connection until `input` ends or `signals` counts a first signal; then
/// kill and reap every process the connection started and return once all responses
/// are written. A further signal during that shutdown cuts it short: what is still
/// running is SIGKILLed and reaped when the connection is dropped. `closed` resolves
/// when the client closed `output` (see [`stdout_gone`]): the server then stops as
/// after a failed write, at once, aborting the runs in flight.
pub async fn serve<R, W>(
    mut input: R,
    output: W,
    conn: Arc<Connection>,
    mut signals: watch::Receiver<u32>,
    closed: impl std::future::Future<Output = ()> + Send + 'static,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<Outgoing>(OUT_QUEUE);
    let (broken_tx, mut broken) = watch::channel(false);
    let broken_tx = Arc::new(broken_tx);
    let watch_closed = {
        let broken_tx = broken_tx.clone();
        tokio::spawn(async move {
            closed.await;
            let _ = broken_tx.send(true);
        })
    };
    let writer = tokio::spawn(write_loop(output, rx, broken_tx, conn.clone()));
    let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let budget = Arc::new(Semaphore::new(MAX_PENDING_OUTPUT));
    let mut splitter = LineSplitter::new(MAX_LINE_BYTES);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut frames = Vec::new();
    let inflight: InFlight = Arc::default();
    let asks = Arc::new(ClientAsks::new(tx.clone()));
    let seen = *signals.borrow_and_update();
    let mut end_of_input = false;
    loop {
        let read = tokio::select! {
            r = input.read(&mut buf) => r,
            _ = signals.wait_for(|n| *n > seen) => break,
            _ = broken.wait_for(|b| *b) => break,
        };
        let eof = match read {
            Ok(0) => true,
            Ok(n) => {
                splitter.push(&buf[..n], &mut frames);
                false
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln_or_drop!("cordon serve: reading stdin: {e}");
                true
            }
        };
        if eof {
            splitter.finish(&mut frames);
        }
        for frame in frames.drain(..) {
            dispatch_frame(frame, &conn, &tx, &permits, &budget, &inflight, &asks).await;
        }
        if eof {
            end_of_input = true;
            break;
        }
    }
    // Nobody can answer the server's questions any more: each is refused.
    asks.close();
    let seen = *signals.borrow_and_update();
    let graceful = async {
        if end_of_input {
            // Every request read so far is answered with its real result (each run
            // ends by its own deadline at the latest); only background work, which
            // nobody can read any more, is stopped now.
            conn.close_background().await;
            tokio::select! {
                _ = permits.acquire_many(MAX_IN_FLIGHT as u32) => {}
                _ = broken.wait_for(|b| *b) => {}
            }
        }
        conn.shutdown().await;
        let _ = tokio::time::timeout(DRAIN_REQUESTS, permits.acquire_many(MAX_IN_FLIGHT as u32)).await;
    };
    tokio::select! {
        _ = graceful => {}
        _ = signals.wait_for(|n| *n > seen) => eprintln_or_drop!("cordon serve: signalled during shutdown; killing everything now"),
    }
    drop(tx);
    drop(asks);
    watch_closed.abort();
    let _ = tokio::time::timeout(WRITER_GRACE, writer).await;
    // Background output whose path no written response carried reaches nobody now.
    conn.discard_undelivered_spills().await;
}

/// Answer every request line on `input` with `refused` (the server's own policy was
/// refused), until the input ends or the output is gone. Lines that do not parse get
/// their parse error, as in [`serve`].
pub async fn serve_refusing<R, W>(mut input: R, mut output: W, refused: &RpcError)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut splitter = LineSplitter::new(MAX_LINE_BYTES);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut frames = Vec::new();
    loop {
        let n = match input.read(&mut buf).await {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => 0,
        };
        if n == 0 {
            splitter.finish(&mut frames);
        } else {
            splitter.push(&buf[..n], &mut frames);
        }
        for frame in frames.drain(..) {
            let mut line = match frame {
                Frame::Line(line) if is_blank(&line) => continue,
                Frame::Line(line) => match parse_request(&line) {
                    Ok(incoming) => response_err(&incoming.id, refused),
                    Err(f) => response_err(&f.id, &f.error),
                },
                Frame::TooLong { .. } => response_err(&protocol::RequestId::null(), refused),
            };
            line.push(b'\n');
            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                return;
            }
        }
        if n == 0 {
            return;
        }
    }
}

/// The raw ids of the requests in flight.
type InFlight = Arc<std::sync::Mutex<std::collections::HashSet<String>>>;

async fn dispatch_frame(
    frame: Frame,
    conn: &Arc<Connection>,
    tx: &mpsc::Sender<Outgoing>,
    permits: &Arc<Semaphore>,
    budget: &Arc<Semaphore>,
    inflight: &InFlight,
    asks: &Arc<ClientAsks>,
) {
    let line = match frame {
        Frame::TooLong { seen } => {
            let err = RpcError::new(
                codes::PARSE_ERROR,
                "LINE_TOO_LONG",
                format!("request line longer than {MAX_LINE_BYTES} bytes; the rest of the line was discarded"),
            )
            .with("limit", MAX_LINE_BYTES)
            .with("seen", seen);
            let _ = tx.send(Outgoing::small(response_err(&protocol::RequestId::null(), &err))).await;
            return;
        }
        Frame::Line(line) => line,
    };
    if is_blank(&line) {
        return;
    }
    // An answer to one of the server's own requests (`approve`): routed before any
    // permit is taken, so runs waiting for answers never block reading them.
    if let Some(response) = parse_response(&line) {
        asks.answer(response);
        return;
    }
    let incoming = match parse_request(&line) {
        Ok(i) => i,
        Err(f) => {
            let _ = tx.send(Outgoing::small(response_err(&f.id, &f.error))).await;
            return;
        }
    };
    let key = incoming.id.as_str().to_string();
    if !inflight.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone()) {
        let err = RpcError::new(
            codes::INVALID_REQUEST,
            "DUPLICATE_ID",
            format!("a request with id {} is still in flight; ids must be unique", incoming.id.as_str()),
        );
        let _ = tx.send(Outgoing::small(response_err(&incoming.id, &err))).await;
        return;
    }
    let Ok(permit) = permits.clone().acquire_owned().await else { return };
    let conn = conn.clone();
    let tx = tx.clone();
    let inflight = inflight.clone();
    let budget = budget.clone();
    let asks = asks.clone();
    tokio::spawn(async move {
        let id = incoming.id;
        let method = incoming.method;
        // Reserve the output this request may answer with before doing the work: while
        // unwritten responses hold the budget, no further run starts.
        let want = conn.output_reservation(&method).min(MAX_PENDING_OUTPUT);
        let reserved = budget.acquire_many_owned(u32::try_from(want).unwrap_or(u32::MAX)).await.ok();
        // An inner task, so that a panic becomes an error response, not silence.
        let for_id = id.clone();
        let work = tokio::spawn(async move {
            match method {
                Method::Run(p) => {
                    let client = conn.client_approves().map(|name| ServeApprover::new(asks, for_id, name));
                    let client = client.as_ref().map(|a| a as &dyn crate::escalation::Approver);
                    conn.run_approved(p, client).await.and_then(|a| approved_json(&a))
                }
                other => conn.dispatch(other).await,
            }
        });
        let mut spills = Vec::new();
        let line = match work.await {
            Ok(Ok(result)) => {
                collect_spill_paths(&result, &mut spills);
                response_ok(&id, result)
            }
            Ok(Err(err)) => response_err(&id, &err),
            Err(e) => response_err(
                &id,
                &RpcError::new(
                    codes::INTERNAL_ERROR,
                    "INTERNAL_ERROR",
                    format!("the request failed inside cordon: {e}"),
                ),
            ),
        };
        inflight.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
        let _ = tx.send(Outgoing { line, _budget: reserved, spills, delivered: false }).await;
        drop(permit);
    });
}

/// The `run` response of a run that may have asked for a grant: the result that counts
/// (the retry's when it ran) with `escalation` as in `cordon run --json` when the
/// sandbox denied something a grant could help with; a retry that could not start is
/// its error, with `escalation` in `error.data`.
fn approved_json(a: &connection::Approved) -> Result<serde_json::Value, RpcError> {
    let o = &a.outcome;
    let mut report = o.report();
    if let (None, Some((grant, why))) = (&report, &a.unasked) {
        report = Some(serde_json::json!({ "not_offered": why, "grant": grant }));
    }
    if let Some(Err(e)) = &o.retry {
        let err = RpcError::cordon(e);
        return Err(match report {
            Some(r) => err.with("escalation", r),
            None => err,
        });
    }
    let result = o.result().ok_or_else(|| {
        RpcError::new(codes::INTERNAL_ERROR, "INTERNAL_ERROR", "a run with approvals produced no result")
    })?;
    let mut value = serde_json::to_value(result).unwrap_or_default();
    if let Some(r) = report {
        value["escalation"] = r;
    }
    Ok(value)
}

/// The spill files a response names (`spill_path`, `stdout_spill`, `stderr_spill`).
fn collect_spill_paths(v: &serde_json::Value, out: &mut Vec<PathBuf>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("spill_path" | "stdout_spill" | "stderr_spill", serde_json::Value::String(p)) => {
                        out.push(PathBuf::from(p))
                    }
                    _ => collect_spill_paths(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_spill_paths(v, out)),
        _ => {}
    }
}

/// Write response lines in order of completion, batching small ones into one write
/// (a large line is written as is, never copied). A written line's spill files are
/// the client's (recorded in the connection); after a write error, keep draining the
/// queue (so request tasks never block; the dropped lines remove their spill files)
/// and report it.
async fn write_loop<W: AsyncWrite + Unpin>(
    mut out: W,
    mut rx: mpsc::Receiver<Outgoing>,
    broken: Arc<watch::Sender<bool>>,
    conn: Arc<Connection>,
) {
    let mut ok = true;
    let mut batch = Vec::new();
    let mut held: Vec<Outgoing> = Vec::new();
    while let Some(first) = rx.recv().await {
        if !ok {
            continue;
        }
        held.push(first);
        while held.iter().map(|o| o.line.len()).sum::<usize>() < READ_CHUNK {
            match rx.try_recv() {
                Ok(more) => held.push(more),
                Err(_) => break,
            }
        }
        for o in &held {
            if !ok {
                break;
            }
            if o.line.len() >= READ_CHUNK {
                ok = write_batch(&mut out, &mut batch).await
                    && out.write_all(&o.line).await.is_ok()
                    && out.write_all(b"\n").await.is_ok();
            } else {
                batch.extend_from_slice(&o.line);
                batch.push(b'\n');
            }
        }
        ok = ok && write_batch(&mut out, &mut batch).await && out.flush().await.is_ok();
        if ok {
            for o in &mut held {
                conn.mark_delivered(&o.spills);
                o.delivered = true;
            }
        } else {
            let _ = broken.send(true);
        }
        batch.clear();
        held.clear();
    }
    let _ = out.flush().await;
    let _ = out.shutdown().await;
}

async fn write_batch<W: AsyncWrite + Unpin>(out: &mut W, batch: &mut Vec<u8>) -> bool {
    let ok = batch.is_empty() || out.write_all(batch).await.is_ok();
    batch.clear();
    ok
}

/// Counts SIGTERM, SIGINT and SIGHUP. The first stops a server as end of input does;
/// one during the shutdown cuts the graceful part short. Call inside the runtime.
pub fn signal_counter() -> watch::Receiver<u32> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = watch::channel(0u32);
    let handlers = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()), signal(SignalKind::hangup()));
    if let (Ok(mut int), Ok(mut term), Ok(mut hup)) = handlers {
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                    _ = hup.recv() => {}
                }
                tx.send_modify(|n| *n += 1);
            }
        });
    } else {
        eprintln_or_drop!("cordon: cannot install signal handlers; only end of input stops the server");
        // Keep the sender alive so receivers wait forever instead of seeing it closed.
        std::mem::forget(tx);
    }
    rx
}

/// Resolves when fd 1 reports `POLLERR` or `POLLHUP`: the reader of a pipe or socket
/// closed its end (a pipe's write end reports `POLLERR` once no reader is left). Used by
/// `serve`, `mcp` and `cordon run --json`. Never resolves for a file or a terminal that stays open. A thread
/// blocks in `poll` (no events requested: errors and hang-ups are always reported).
pub async fn stdout_gone() {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let watcher = std::thread::Builder::new().name("stdout-watch".into()).spawn(move || {
        let stdout = std::io::stdout();
        loop {
            let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {
                    let r = fds[0].revents().unwrap_or(PollFlags::empty());
                    if r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP) {
                        let _ = tx.send(());
                        return;
                    }
                    if r.contains(PollFlags::POLLNVAL) {
                        return;
                    }
                }
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return,
            }
        }
    });
    if watcher.is_ok() && rx.await.is_ok() {
        return;
    }
    std::future::pending::<()>().await
}
