//! What the terminal shows: control characters escaped ([`printable`]) and the
//! prompt text ([`terminal_prompt`]).

use super::*;

pub use crate::vocab::printable;

fn shell_word(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// What the mode allows, in one line, for the prompt.
fn describe(p: &PolicyView) -> String {
    match p.mode {
        Mode::FullAccess => "full-access: NO sandbox; it can change anything you can and use the network".into(),
        Mode::ReadOnly => "read-only: writes only a private temporary directory".into(),
        Mode::WorkspaceWrite => {
            let roots: Vec<String> = std::iter::once(&p.workspace)
                .chain(&p.writable_roots)
                .map(|r| printable(&r.display().to_string()))
                .collect();
            format!("workspace-write: may write {}", roots.join(", "))
        }
    }
}

/// What a write grant of `path` opens, for a person: a git directory opens git's own
/// files only; an entry host git runs commands from says so.
pub fn write_grant_text(path: &Path) -> String {
    let shown = clip(&printable(&path.display().to_string()), PROMPT_LINE);
    let source = path.file_name().is_some_and(|n| crate::policy::GIT_COMMAND_SOURCES.iter().any(|s| n == *s))
        && path.parent().is_some_and(crate::policy::is_git_dir);
    if crate::policy::is_git_dir(path) {
        format!(
            "write git's own files in {shown} (objects, refs, index, logs, HEAD), not its config or hooks, which \
             host git runs"
        )
    } else if source {
        format!("write {shown}, WHICH HOST GIT RUNS: your next git command in this repository executes what it holds")
    } else {
        format!("write {shown}")
    }
}

/// What a narrow grant allows, in one line, for the prompt: the thing granted first.
fn describe_grant(grant: &Grant, mode: Mode) -> String {
    match grant {
        Grant::Write { path } => {
            format!("{} for one retry, nothing else (still {mode}, network unchanged)", write_grant_text(path))
        }
        Grant::Network => format!("the network for one retry, nothing else (still {mode}, files unchanged)"),
        Grant::Host { host } => format!(
            "reach {} through cordon's proxy for one retry, nothing else (still {mode})",
            clip(&printable(host), PROMPT_LINE)
        ),
    }
}

/// The text [`TerminalApprover`] shows: the facts, then the question and `[y/N] `.
pub fn terminal_prompt(req: &EscalationRequest) -> String {
    format!("{}{} [y/N] ", prompt_facts(req), question(req))
}

/// The facts of a request, one line each, all escaped: what was refused (bounded), the
/// justification, the bound files, then the command, cwd, what is proposed and the
/// fingerprint.
fn prompt_facts(req: &EscalationRequest) -> String {
    let command = match &req.command {
        CommandView::Shell(s) => format!("bash -c {}", shell_word(s)),
        CommandView::Argv(v) => v.iter().map(|a| shell_word(a)).collect::<Vec<_>>().join(" "),
    };
    let mut t = String::new();
    match req.trigger {
        Trigger::Denied => t.push_str(&format!("\ncordon: the sandbox ({}) refused part of this command.\n", req.from)),
        Trigger::UpFront => {
            t.push_str(&format!("\ncordon: permission asked to run this command beyond {}.\n", req.from))
        }
    }
    // At most a few denials, each line bounded: text the command provoked must not push
    // cordon's own lines (command, cwd, the question) off the screen.
    for (i, d) in req.denials.iter().take(PROMPT_DENIALS).enumerate() {
        let target = d.target.as_deref().map(|s| format!(" {}", printable(s))).unwrap_or_default();
        let kind = serde_json::to_value(d.kind).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        let label = if i == 0 { "denied:  " } else { "         " };
        let line = format!("{kind}{target} ({})", printable(&d.evidence));
        t.push_str(&format!("  {label} {}\n", clip(&line, PROMPT_LINE)));
    }
    if req.denials.len() > PROMPT_DENIALS {
        t.push_str(&format!("            ... and {} more\n", req.denials.len() - PROMPT_DENIALS));
    }
    if let Some(j) = &req.justification {
        t.push_str(&format!("  reason:   {}\n", printable(j)));
    }
    for (i, f) in req.bound_files.iter().enumerate() {
        let label = if i == 0 { "bound:   " } else { "         " };
        let path = printable(&f.path.display().to_string());
        t.push_str(&format!("  {label} {path} ({} bytes, {})\n", f.size, f.contents));
    }
    if let Some(fc) = req.first_run_changes.as_ref().filter(|fc| !fc.changes.is_empty()) {
        let n = if fc.truncated { format!("{} or more", fc.changes.len()) } else { fc.changes.len().to_string() };
        if fc.held_back {
            t.push_str(&format!(
                "  held:     {n} changes of this run, held back and dropped whatever you answer (a retry starts from \
                 the workspace as it was)\n"
            ));
        } else {
            t.push_str(&format!(
                "  changed:  {n} changes this run already made on the host (no layer here to hold them back; a \
                 retry runs on top of them)\n"
            ));
        }
        for c in fc.changes.iter().take(PROMPT_CHANGES) {
            let what = match c.change {
                crate::layer::ChangeKind::Created => "created",
                crate::layer::ChangeKind::Modified => "modified",
                crate::layer::ChangeKind::Removed => "removed",
            };
            let line = format!("{what} {}", printable(&c.path.display().to_string()));
            t.push_str(&format!("            {}\n", clip(&line, PROMPT_LINE)));
        }
        if fc.changes.len() > PROMPT_CHANGES {
            t.push_str(&format!("            ... and {} more\n", fc.changes.len() - PROMPT_CHANGES));
        }
    }
    // The command and directory once, after the (bounded) lines the command provoked
    // and right above what is proposed and the question: nothing it printed can push
    // them off the screen. The command is shown whole: it is what runs.
    t.push_str(&format!("  command:  {}\n", printable(&command)));
    t.push_str(&format!("  cwd:      {}\n", printable(&req.cwd.display().to_string())));
    let proposed = match &req.grant {
        Some(grant) => describe_grant(grant, req.to),
        None => describe(&req.retry_policy),
    };
    t.push_str(&format!("  proposed: {proposed}\n"));
    t.push_str(&format!("  call:     {}\n", req.fingerprint));
    t
}

/// The question, without its answer hint.
fn question(req: &EscalationRequest) -> String {
    match &req.grant {
        Some(Grant::Write { path }) => format!(
            "Run this exact command once more, allowed to {} (still {}, network unchanged)?",
            write_grant_text(path),
            req.to
        ),
        Some(Grant::Network) => {
            format!("Run this exact command once more with the network on (still {}, files unchanged)?", req.to)
        }
        Some(Grant::Host { host }) => format!(
            "Run this exact command once more, allowed to reach {} through cordon's proxy (still {}, nothing \
             else)?",
            clip(&printable(host), PROMPT_LINE),
            req.to
        ),
        None => format!("Run this exact command once at {}?", req.to),
    }
}

/// A fresh random token for fencing command-chosen text: `prefix` and
/// [`BOUNDARY_BYTES`] bytes in hex from the kernel's random source (else the std
/// hasher's random keys).
pub fn fresh_boundary(prefix: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut bytes = [0u8; BOUNDARY_BYTES];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).is_err() {
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(i);
            chunk.copy_from_slice(&h.finish().to_ne_bytes());
        }
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}{hex}")
}

/// The text shown to a person by an approver that is not the terminal (an MCP
/// client's elicitation, a `cordon serve` client's `approve` request): the same facts
/// as the `--ask` prompt, after the tail of the denied run's output (`first`), which
/// sits between two lines carrying `boundary` (fresh per request: the command cannot
/// close the fence early) and is escaped line by line. Every fact is escaped too, so
/// nothing the command printed or chose (a file name, a socket path) can start a
/// line that reads as cordon's.
pub fn approval_text(req: &EscalationRequest, first: Option<&RunResult>, boundary: &str) -> String {
    let mut t = format!(
        "cordon asks for your approval. Text between the lines <<<{boundary} and >>>{boundary} was printed \
         by the command, not by cordon.\n"
    );
    let streams = first.map(|r| vec![("stdout", r.stdout.text.as_str()), ("stderr", r.stderr.text.as_str())]);
    for (name, text) in streams.unwrap_or_default() {
        if text.is_empty() {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(PROMPT_OUTPUT_LINES);
        t.push_str(&format!("The denied run's {name} (last {} lines, escaped):\n<<<{boundary}\n", lines.len() - from));
        for line in &lines[from..] {
            t.push_str(&clip(&printable(line), PROMPT_LINE));
            t.push('\n');
        }
        t.push_str(&format!(">>>{boundary}\n"));
    }
    t.push_str(prompt_facts(req).trim_start_matches('\n'));
    t.push_str(&question(req));
    t
}

/// Changes of the first run listed in the `--ask` prompt (the rest are counted).
const PROMPT_CHANGES: usize = 8;
/// Denials listed in the `--ask` prompt (the rest are counted).
const PROMPT_DENIALS: usize = 5;
/// The widest prompt line cordon prints for command-provoked text (characters).
pub(super) const PROMPT_LINE: usize = 160;

/// `s` cut to `max` characters, marked with `…`.
pub(super) fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}
