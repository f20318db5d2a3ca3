//! The two approvers: [`ProgramApprover`] (a policy program, pinned, run with a fixed
//! environment) and [`TerminalApprover`] (a question on the terminal).

use super::*;

/// Asks a policy program: the request as one JSON line on its stdin, then end-of-file;
/// exit status 0 grants, anything else (including failing to start, a signal or
/// [`APPROVER_TIMEOUT`]) refuses. Its stdout goes to cordon's stderr so it cannot
/// corrupt `--json` output.
///
/// The program (and the interpreter its `#!` line names) is resolved once, when the
/// approver is made: to a canonical path, pinned by device and inode. It is started by
/// that canonical path — never the path as given, which may pass through a symlink —
/// after checking it still names the pinned file, with a fixed environment
/// ([`APPROVER_PATH`] and a few locale/identity variables from cordon's) and `/` as its
/// working directory. [`Approver::governing`] hands the program and interpreter to the
/// governing-file check, so neither may lie inside or be reached through a writable
/// root. It runs unsandboxed: it is the caller's policy agent.
#[derive(Debug, Clone)]
pub struct ProgramApprover {
    program: PathBuf,
    canonical: PathBuf,
    interpreters: Vec<PathBuf>,
    pins: Vec<FilePin>,
    timeout: Duration,
}

/// A file the approver depends on, by canonical path and identity.
#[derive(Debug, Clone)]
struct FilePin {
    kind: GoverningKind,
    canonical: PathBuf,
    dev: u64,
    ino: u64,
}

impl FilePin {
    fn new(kind: GoverningKind, path: &Path) -> std::io::Result<FilePin> {
        let file = open_governing(kind, path, OpenFor::Pin).map_err(std::io::Error::other)?;
        let meta = file.metadata()?;
        let canonical = crate::session::canonical_location(path)?;
        Ok(FilePin { kind, canonical, dev: meta.dev(), ino: meta.ino() })
    }

    /// The canonical path still names the pinned file (opened without following any
    /// symlink).
    fn verify(&self) -> Result<(), String> {
        let file = open_governing(self.kind, &self.canonical, OpenFor::Pin).map_err(|e| e.to_string())?;
        let meta = file.metadata().map_err(|e| e.to_string())?;
        if (meta.dev(), meta.ino()) != (self.dev, self.ino) {
            return Err(format!("the {} `{}` was replaced after it was checked", self.kind, self.canonical.display()));
        }
        Ok(())
    }
}

/// The interpreter a `#!` line names: `[interpreter]`, or for `#!/usr/bin/env NAME`
/// `[env, NAME resolved on APPROVER_PATH]`. `None` for a file without `#!`.
pub(super) fn shebang_interpreters(head: &[u8]) -> std::io::Result<Option<Vec<PathBuf>>> {
    let Some(rest) = head.strip_prefix(b"#!") else { return Ok(None) };
    let line = rest.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let not_found = |what: String| std::io::Error::new(std::io::ErrorKind::NotFound, what);
    let interp = PathBuf::from(words.next().ok_or_else(|| not_found("an empty #! line".into()))?);
    let mut out = vec![interp.clone()];
    if interp.file_name().is_some_and(|n| n == "env") {
        // env's options (-S splits the rest into words) and NAME=VALUE assignments come
        // before the program name.
        let name = words
            .find(|w| !w.starts_with('-') && !w.contains('='))
            .ok_or_else(|| not_found(format!("no program after {} in the #! line", interp.display())))?;
        let found = if name.contains('/') {
            PathBuf::from(name)
        } else {
            APPROVER_PATH
                .split(':')
                .map(|d| Path::new(d).join(name))
                .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
                .ok_or_else(|| not_found(format!("`{name}` (from the #! line) is not on {APPROVER_PATH}")))?
        };
        out.push(found);
    }
    Ok(Some(out))
}

impl ProgramApprover {
    /// An approver running `program` (a path, or a name looked up on `PATH`), resolved
    /// now — to its canonical path and, through its `#!` line, its interpreter — and
    /// pinned, so the file checked is the file that runs.
    pub fn find(program: &Path) -> std::io::Result<ProgramApprover> {
        let found = if program.as_os_str().as_bytes().contains(&b'/') {
            program.to_path_buf()
        } else {
            which::which(program).map_err(|e| std::io::Error::new(std::io::ErrorKind::NotFound, e.to_string()))?
        };
        let program = std::path::absolute(&found)?;
        let canonical = crate::session::canonical_location(&program)?;
        let pin = FilePin::new(GoverningKind::ApproverProgram, &canonical)?;
        let mut head = Vec::with_capacity(256);
        let file = std::fs::File::open(&canonical)?;
        let meta = file.metadata()?;
        if (meta.dev(), meta.ino()) != (pin.dev, pin.ino) {
            return Err(std::io::Error::other(format!("`{}` changed while it was being read", canonical.display())));
        }
        file.take(256).read_to_end(&mut head)?;
        let interpreters = shebang_interpreters(&head)?.unwrap_or_default();
        let mut pins = vec![pin];
        for i in &interpreters {
            pins.push(FilePin::new(GoverningKind::ApproverInterpreter, i)?);
        }
        Ok(ProgramApprover { program, canonical, interpreters, pins, timeout: APPROVER_TIMEOUT })
    }

    /// Use `timeout` instead of [`APPROVER_TIMEOUT`].
    pub fn with_timeout(mut self, timeout: Duration) -> ProgramApprover {
        self.timeout = timeout;
        self
    }

    /// The absolute path of the program, as given.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The canonical path it is started by.
    pub fn canonical(&self) -> &Path {
        &self.canonical
    }

    async fn run(&self, req: &EscalationRequest) -> Decision {
        for pin in &self.pins {
            if let Err(why) = pin.verify() {
                return Decision::refuse(format!("not started: {why}"));
            }
        }
        let mut input = match serde_json::to_vec(req) {
            Ok(v) => v,
            Err(e) => return Decision::refuse(format!("cannot encode the request: {e}")),
        };
        input.push(b'\n');
        let stdout = match std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned() {
            Ok(fd) => std::process::Stdio::from(fd),
            Err(_) => std::process::Stdio::null(),
        };
        let mut command = tokio::process::Command::new(&self.canonical);
        command.env_clear().env("PATH", APPROVER_PATH).current_dir("/");
        for k in APPROVER_ENV_KEEP {
            if let Some(v) = std::env::var_os(k) {
                command.env(k, v);
            }
        }
        let child = command.stdin(std::process::Stdio::piped()).stdout(stdout).kill_on_drop(true).spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => return Decision::refuse(format!("cannot start {}: {e}", self.canonical.display())),
        };
        let mut stdin = child.stdin.take();
        let talk = async {
            if let Some(mut s) = stdin.take() {
                // A program that decides without reading is fine (EPIPE is ignored).
                let _ = tokio::io::AsyncWriteExt::write_all(&mut s, &input).await;
            }
            child.wait().await
        };
        match tokio::time::timeout(self.timeout, talk).await {
            Err(_) => Decision::refuse(format!("no answer within {} s", self.timeout.as_secs())),
            Ok(Err(e)) => Decision::refuse(format!("waiting for the program: {e}")),
            Ok(Ok(status)) if status.success() => Decision::grant("program exited with status 0"),
            Ok(Ok(status)) => Decision::refuse(format!("program {status}")),
        }
    }
}

impl Approver for ProgramApprover {
    fn info(&self) -> ApproverInfo {
        ApproverInfo { kind: "program".into(), detail: Some(self.program.display().to_string()) }
    }

    fn decide<'a>(&'a self, req: &'a EscalationRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(self.run(req))
    }

    fn governing(&self) -> Vec<(GoverningKind, PathBuf)> {
        std::iter::once((GoverningKind::ApproverProgram, self.program.clone()))
            .chain(self.interpreters.iter().map(|i| (GoverningKind::ApproverInterpreter, i.clone())))
            .collect()
    }
}

/// Asks a person on the terminal (default `/dev/tty`, never stdin or stdout). It first
/// resets the terminal ([`TERMINAL_RESET`]: whatever scroll region, colours, hidden
/// cursor or alternate screen the command left is undone), repeats the tail of the
/// denied run's output with control characters escaped, then shows the command, the
/// denials with their evidence, the proposed mode and the fingerprint, escaped too, so
/// the command cannot repaint or hide the prompt. Only `y` or `yes` grants; an empty
/// answer, end of input, no terminal or anything else refuses. Type-ahead is discarded
/// before asking.
///
/// This protects the prompt only if the command could not write to the terminal
/// meanwhile: the CLI captures the first run's output under `--ask` and gives the
/// command no terminal descriptor (docs/escalation.md).
#[derive(Debug, Clone)]
pub struct TerminalApprover {
    tty: PathBuf,
    first_output: std::sync::Arc<Mutex<Option<String>>>,
}

impl Default for TerminalApprover {
    fn default() -> Self {
        TerminalApprover::on(DEFAULT_TTY)
    }
}

impl TerminalApprover {
    /// Ask on `tty` instead of `/dev/tty`.
    pub fn on(tty: impl Into<PathBuf>) -> TerminalApprover {
        TerminalApprover { tty: tty.into(), first_output: Default::default() }
    }

    fn ask_blocking(tty: &Path, prompt: &str) -> Decision {
        let file = match std::fs::OpenOptions::new().read(true).write(true).open(tty) {
            Ok(f) => f,
            Err(e) => return Decision::refuse(format!("no terminal to ask on ({}: {e})", tty.display())),
        };
        let _ = nix::sys::termios::tcflush(&file, nix::sys::termios::FlushArg::TCIFLUSH);
        let text = format!("{TERMINAL_RESET}{prompt}");
        if let Err(e) = (&file).write_all(text.as_bytes()).and_then(|_| (&file).flush()) {
            return Decision::refuse(format!("cannot write to {}: {e}", tty.display()));
        }
        let mut line = String::new();
        match std::io::BufReader::new(std::io::Read::take(&file, MAX_ANSWER)).read_line(&mut line) {
            Ok(0) => Decision::refuse("end of input (the default is no)"),
            Err(e) => Decision::refuse(format!("reading {}: {e}", tty.display())),
            Ok(_) => match line.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => Decision::grant(format!("answered \"{}\" on {}", line.trim(), tty.display())),
                "" => Decision::refuse("empty answer (the default is no)"),
                other => Decision::refuse(format!("answered \"{}\"", printable(other))),
            },
        }
    }
}

impl Approver for TerminalApprover {
    fn info(&self) -> ApproverInfo {
        ApproverInfo { kind: "terminal".into(), detail: Some(self.tty.display().to_string()) }
    }

    fn first_run(&self, result: &RunResult) {
        let mut shown = String::new();
        for (name, text) in [("stdout", &result.stdout.text), ("stderr", &result.stderr.text)] {
            if text.is_empty() {
                continue;
            }
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(PROMPT_OUTPUT_LINES);
            shown.push_str(&format!(
                "cordon: the denied run's {name} (last {} lines, control characters escaped):\n",
                lines.len() - from
            ));
            for line in &lines[from..] {
                shown.push_str(&format!("  | {}\n", clip(&printable(line), PROMPT_LINE)));
            }
        }
        *self.first_output.lock().unwrap_or_else(|p| p.into_inner()) = Some(shown);
    }

    fn decide<'a>(&'a self, req: &'a EscalationRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        let shown = self.first_output.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_default();
        let prompt = format!("{shown}{}", terminal_prompt(req));
        let tty = self.tty.clone();
        Box::pin(async move {
            // A plain thread, not the blocking pool: if the caller stops waiting (abort),
            // a thread blocked on the terminal must not hold up runtime shutdown.
            let (tx, rx) = tokio::sync::oneshot::channel();
            let spawned = std::thread::Builder::new()
                .name("cordon-ask".into())
                .spawn(move || drop(tx.send(TerminalApprover::ask_blocking(&tty, &prompt))));
            match spawned {
                Err(e) => Decision::refuse(format!("cannot start the prompt thread: {e}")),
                Ok(_) => rx.await.unwrap_or_else(|_| Decision::refuse("the prompt ended without an answer")),
            }
        })
    }
}
