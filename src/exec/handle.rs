//! A background process started by `Executor::start`: its [`Handle`] (status, exit,
//! incremental output reads, kill) and what a read returns.

use super::*;

/// The status of a background process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Still running.
    Running,
    /// Finished (exited, killed, timed out or aborted).
    Exited,
}

/// New output of a background process since the previous read.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct OutputRead {
    /// New stdout bytes (lossy UTF-8).
    pub stdout: String,
    /// New stderr bytes (lossy UTF-8).
    pub stderr: String,
    /// Some unread bytes were dropped from memory; the spill files have them.
    pub lossy: bool,
    /// The complete stdout, while spilling works.
    pub stdout_spill: Option<PathBuf>,
    /// The complete stderr, while spilling works.
    pub stderr_spill: Option<PathBuf>,
}

#[derive(Debug)]
pub(super) struct HandleShared {
    pub(super) pid: i32,
    pub(super) stdout: StreamCapture,
    pub(super) stderr: StreamCapture,
    pub(super) cursors: Mutex<(u64, u64)>,
    pub(super) abort: watch::Sender<bool>,
    pub(super) result: watch::Receiver<Option<RunResult>>,
}

/// A background process started by [`Executor::start`].
#[derive(Debug, Clone)]
pub struct Handle {
    pub(super) shared: Arc<HandleShared>,
}

impl Handle {
    /// The pid of the run's process-group leader as the host sees it: the run's init
    /// (pid 1 of its pid namespace when confined; otherwise a supervising subreaper
    /// whose child is the command). Signals to its group reach the command.
    pub fn pid(&self) -> i32 {
        self.shared.pid
    }

    /// Running or exited.
    pub fn status(&self) -> Status {
        if self.shared.result.borrow().is_some() {
            Status::Exited
        } else {
            Status::Running
        }
    }

    /// The exit code, once exited normally.
    pub fn exit_code(&self) -> Option<i32> {
        self.shared.result.borrow().as_ref().and_then(|r| r.exit_code)
    }

    /// The terminating signal, once killed by one.
    pub fn signal(&self) -> Option<i32> {
        self.shared.result.borrow().as_ref().and_then(|r| r.signal)
    }

    /// Resolves with the result when the process has finished. Never fails.
    pub fn done(&self) -> impl Future<Output = RunResult> + Send + 'static {
        let mut rx = self.shared.result.clone();
        async move {
            loop {
                if let Some(r) = rx.borrow_and_update().clone() {
                    return r;
                }
                if rx.changed().await.is_err() {
                    // The task is gone without a result: only possible if the runtime
                    // shut down; report what we know.
                    if let Some(r) = rx.borrow().clone() {
                        return r;
                    }
                    std::future::pending::<()>().await;
                }
            }
        }
    }

    /// Output produced since the previous call (only what is new).
    pub fn read_output(&self) -> OutputRead {
        let mut cur = self.shared.cursors.lock().unwrap_or_else(|p| p.into_inner());
        let Increment { bytes: out, lossy: lo } = self.shared.stdout.read_since(&mut cur.0);
        let Increment { bytes: err, lossy: le } = self.shared.stderr.read_since(&mut cur.1);
        OutputRead {
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
            lossy: lo || le,
            stdout_spill: self.shared.stdout.spill_path(),
            stderr_spill: self.shared.stderr.spill_path(),
        }
    }

    /// Stop the process (SIGTERM, grace, SIGKILL to its group). Returns false when it
    /// had already finished. Calling it again is harmless.
    pub fn kill(&self) -> bool {
        if self.status() == Status::Exited {
            return false;
        }
        let _ = self.shared.abort.send(true);
        true
    }
}
