//! Relayed stdio: a copy between one of the caller's stdio descriptors and a pipe of
//! the command's, for streams a confined command may not hold itself (a file, a
//! named FIFO, a root-owned terminal: see `streams::handover`).
//!
//! Each copy runs on a thread of its own (not the runtime's blocking pool: a copy that
//! never ends must not hold up the runtime's shutdown). It waits in `poll` for its
//! source, its destination *and* a stop pipe, and writes to a pipe or a terminal only
//! what `poll` said fits (at most `PIPE_BUF` bytes), so that it can always be stopped:
//! a destination that stops reading (the reader of a named FIFO holding it open
//! without reading) never keeps the run, or cordon, waiting beyond the bound the run's
//! end gives its relays (`finish`). A stopped copy says how many bytes of the command's
//! output it could not deliver (what it held plus what was left in the pipe), and the
//! result reports them (`CollectedOutput::undelivered`).
//!
//! What it does not do: it cannot interrupt a `write` that blocks on a regular file
//! (a hung network file system); such a copy is abandoned with its thread, and what it
//! held is still reported.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a run's end waits for its stdio relays once the command is gone, at most:
/// they end as soon as the destination took the last bytes (a slow reader of a named
/// FIFO, a slow disk). The run's deadline bounds it too (see `finish`).
pub(super) const RELAY_GRACE: Duration = Duration::from_secs(60);

/// How long a stopped copy may take to say what it did not deliver (it only has to
/// wake from `poll` and count what is left in the pipe; one stuck in a blocking write
/// is not waited for).
const STOP_REPORT: Duration = Duration::from_millis(500);

/// The most a stopped copy reads from its pipe to count what it leaves behind: the
/// command is gone, so the pipe holds at most its buffer, but a process that escaped
/// the run could keep writing.
const MAX_COUNTED: u64 = 64 << 20;

/// Which of the command's streams a relay carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stream {
    /// Its stdout (and its stderr too when both are the same file: `> f 2>&1`).
    Stdout,
    /// Its stderr.
    Stderr,
    /// Its stdin (from the caller's stdin).
    Stdin,
}

/// One running copy (see the module docs).
pub(super) struct Relay {
    /// The stream it carries.
    pub(super) stream: Stream,
    /// The copy's own report: the bytes it did not deliver (0 after end-of-file).
    end: Option<tokio::sync::oneshot::Receiver<u64>>,
    /// The report, once received.
    ended: Option<u64>,
    /// Closing it (the write end of the stop pipe) stops the copy.
    stop: Option<OwnedFd>,
    /// Bytes the copy took from its source and has not written yet.
    held: Arc<AtomicU64>,
}

impl Relay {
    /// Start copying `from` to `to`. Without a thread (or a stop pipe) the
    /// descriptors are dropped: the command sees end-of-file or `EPIPE`.
    pub(super) fn start(from: OwnedFd, to: OwnedFd, stream: Stream) -> Relay {
        let held = Arc::new(AtomicU64::new(0));
        let mut relay = Relay { stream, end: None, ended: Some(0), stop: None, held: held.clone() };
        let Ok((stop_rx, stop_tx)) = super::streams::pipe() else { return relay };
        let (tx, rx) = tokio::sync::oneshot::channel::<u64>();
        let copy = move || {
            let undelivered = copy(from, to, &stop_rx, stream, &held);
            let _ = tx.send(undelivered);
        };
        if std::thread::Builder::new().name("cordon-relay".into()).spawn(copy).is_ok() {
            relay.end = Some(rx);
            relay.ended = None;
            relay.stop = Some(stop_tx);
        }
        relay
    }

    /// Resolves once the copy ended by itself (end-of-file, a failed write).
    pub(super) async fn ended(&mut self) {
        if self.ended.is_some() {
            return;
        }
        let Some(rx) = self.end.as_mut() else { return };
        self.ended = Some(rx.await.unwrap_or(0));
        self.end = None;
    }

    /// Stop the copy where it is (if it is still running) and return the bytes of
    /// the command's output it did not deliver.
    pub(super) async fn stop(mut self) -> u64 {
        if let Some(n) = self.ended {
            return n;
        }
        drop(self.stop.take());
        let Some(rx) = self.end.take() else { return 0 };
        match tokio::time::timeout(STOP_REPORT, rx).await {
            Ok(Ok(n)) => n,
            // Stuck in a write that cannot be interrupted: abandoned; what it held is lost.
            _ => self.held.load(Ordering::Relaxed),
        }
    }
}

/// Wait until `fd` is ready for `events` (or has an error or hang-up to report), or
/// until the stop pipe's write end is closed: `false` then.
fn ready(fd: &std::fs::File, events: nix::poll::PollFlags, stop: &OwnedFd) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    loop {
        let mut fds = [PollFd::new(fd.as_fd(), events), PollFd::new(stop.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {
                if fds[1].revents().is_some_and(|r| !r.is_empty()) {
                    return false;
                }
                if fds[0].revents().is_some_and(|r| !r.is_empty()) {
                    return true;
                }
            }
            Err(nix::errno::Errno::EINTR) => {}
            // Nothing to wait with: let the read or write itself answer.
            Err(_) => return true,
        }
    }
}

/// The copy (on its own thread): returns the bytes of the command's output it did not
/// deliver.
fn copy(from: OwnedFd, to: OwnedFd, stop: &OwnedFd, stream: Stream, held: &AtomicU64) -> u64 {
    use nix::poll::PollFlags;
    use std::io::{ErrorKind, Read, Write};
    // A pipe (named or not) or a terminal: write at most what `poll` said fits, so
    // that a write never blocks and the copy can always be stopped. (A pipe reports
    // writable when a whole buffer page is free: `PIPE_BUF` bytes go in at once.)
    let chunk = match nix::sys::stat::fstat(&to) {
        Ok(st) if matches!(st.st_mode & libc::S_IFMT, libc::S_IFIFO | libc::S_IFCHR | libc::S_IFSOCK) => libc::PIPE_BUF,
        _ => super::READ_CHUNK,
    };
    let output = stream != Stream::Stdin;
    let (mut from, mut to) = (std::fs::File::from(from), std::fs::File::from(to));
    let mut buf = vec![0u8; super::READ_CHUNK];
    loop {
        if !ready(&from, PollFlags::POLLIN, stop) {
            return if output { left_in(&mut from) } else { 0 };
        }
        let n = match from.read(&mut buf) {
            Ok(0) => return 0,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock) => continue,
            Err(_) => return 0,
        };
        held.store(n as u64, Ordering::Relaxed);
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            if !ready(&to, PollFlags::POLLOUT, stop) {
                return if output { rest.len() as u64 + left_in(&mut from) } else { 0 };
            }
            match to.write(&rest[..rest.len().min(chunk)]) {
                Ok(0) => return 0,
                Ok(k) => {
                    rest = &rest[k..];
                    held.fetch_sub(k as u64, Ordering::Relaxed);
                }
                Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock) => {}
                // The first failed write ends the copy and closes `from`, as if the
                // command had written there itself: relaying its output, the command
                // gets EPIPE (a full disk fails it instead of being dropped silently;
                // cordon names the error on its stderr); relaying its stdin, the
                // command stopped reading.
                Err(e) => {
                    if output {
                        eprintln!("cordon: the command's output could not be written ({e})");
                    }
                    return 0;
                }
            }
        }
    }
}

/// The bytes still readable from the command's pipe `from` now, read and counted (at
/// most [`MAX_COUNTED`]): what a stopped copy leaves undelivered besides what it held.
fn left_in(from: &mut std::fs::File) -> u64 {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::io::Read;
    let mut buf = vec![0u8; super::READ_CHUNK];
    let mut total = 0u64;
    while total < MAX_COUNTED {
        let mut fds = [PollFd::new(from.as_fd(), PollFlags::POLLIN)];
        if !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(1))
            || !fds[0].revents().is_some_and(|r| r.contains(PollFlags::POLLIN))
        {
            break;
        }
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n as u64,
        }
    }
    total
}
