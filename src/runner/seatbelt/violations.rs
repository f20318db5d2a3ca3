//! Seatbelt's violation reports, read as denial evidence: the pure half of the macOS
//! denial channel (docs/seatbelt.md, "Denials on macOS").
//!
//! The kernel reports each refused operation to the unified log, one message per
//! event: `Sandbox: <process>(<pid>) deny(<count>) <operation> <target>`, for example
//! `Sandbox: touch(4242) deny(1) file-write-create /private/tmp/x`. [`parse_violation`]
//! reads one such message; [`attribute`] keeps the reports of the run's own processes
//! and turns them into [`Denial`]s, whose evidence is the kernel's message.
//!
//! What it does not do: read the log (`log show --style ndjson --predicate 'sender ==
//! "Sandbox"' --start <spawn time>`, run by the executor after the run, is the
//! planned I/O half, to be built and verified on a Mac), or know which pids belong to
//! the run (the caller passes them). Nothing here reads the command's output: a line
//! the command prints is never a report.
//!
//! A limitation: the process name in the message is the command's choice (the name
//! of the file it executed, up to 16 bytes), so a name holding `) deny(` can shift the
//! parse of that message. The report itself is still the kernel's; the log's own
//! `processID` field, which the I/O half reads alongside the message, is the pid to
//! trust, and a mismatch with the parsed pid drops the message.

use crate::result::{Denial, DenialKind};

/// The prefix of every Seatbelt violation message.
pub const VIOLATION_PREFIX: &str = "Sandbox: ";

/// One violation report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The process name the kernel gave.
    pub process: String,
    /// Its pid.
    pub pid: u32,
    /// The Seatbelt operation refused (`file-write-create`, `network-outbound`, ...).
    pub operation: String,
    /// The path or address, when the report names one.
    pub target: Option<String>,
}

/// Parse one log message; `None` if it is not a well-formed violation report.
pub fn parse_violation(message: &str) -> Option<Violation> {
    let rest = message.trim_end().strip_prefix(VIOLATION_PREFIX)?;
    // The process name may itself hold parentheses and spaces: the pid is the last
    // parenthesized number before " deny(".
    let deny_at = rest.find(") deny(")?;
    let head = &rest[..deny_at];
    let open = head.rfind('(')?;
    let process = head[..open].to_string();
    let pid = head[open + 1..].parse::<u32>().ok()?;
    let after = &rest[deny_at + ") deny(".len()..];
    let close = after.find(") ")?;
    after[..close].parse::<u32>().ok()?;
    let mut words = after[close + 2..].splitn(2, ' ');
    let operation = words.next().filter(|o| !o.is_empty())?.to_string();
    let target = words.next().map(str::trim).filter(|t| !t.is_empty()).map(String::from);
    Some(Violation { process, pid, operation, target })
}

/// The denial kind of a Seatbelt operation.
pub fn kind_of(operation: &str) -> DenialKind {
    if operation.starts_with("file-write") || operation == "file-link" || operation == "file-clone" {
        DenialKind::FileWrite
    } else if operation.starts_with("file-read") {
        DenialKind::FileRead
    } else if operation.starts_with("network") || operation.starts_with("system-socket") {
        DenialKind::Network
    } else if operation.starts_with("signal")
        || operation.starts_with("process-info")
        || operation == "mach-priv-task-port"
    {
        DenialKind::Process
    } else {
        DenialKind::Other
    }
}

/// The denials among `messages` that the run's processes (`run_pids`) provoked, in
/// order, one per distinct operation and target.
pub fn attribute<'a>(messages: impl IntoIterator<Item = &'a str>, run_pids: &[u32]) -> Vec<Denial> {
    let mut out: Vec<Denial> = Vec::new();
    for v in messages.into_iter().filter_map(parse_violation).filter(|v| run_pids.contains(&v.pid)) {
        let kind = kind_of(&v.operation);
        if out.iter().any(|d| d.kind == kind && d.target == v.target && d.evidence.contains(&v.operation)) {
            continue;
        }
        let evidence = format!("Seatbelt refused {} ({}, pid {})", v.operation, v.process, v.pid);
        out.push(Denial { kind, target: v.target, evidence, line: None, proxy: None });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_message() {
        let v = parse_violation("Sandbox: touch(4242) deny(1) file-write-create /private/tmp/x y").unwrap();
        assert_eq!(
            v,
            Violation {
                process: "touch".into(),
                pid: 4242,
                operation: "file-write-create".into(),
                target: Some("/private/tmp/x y".into()),
            }
        );
        let v = parse_violation("Sandbox: Python (helper)(77) deny(3) network-outbound 1.1.1.1:443").unwrap();
        assert_eq!((v.process.as_str(), v.pid, v.target.as_deref()), ("Python (helper)", 77, Some("1.1.1.1:443")));
        let v = parse_violation("Sandbox: sh(5) deny(1) mach-lookup").unwrap();
        assert_eq!((v.operation.as_str(), v.target), ("mach-lookup", None));
    }

    #[test]
    fn refuses_what_is_not_a_report() {
        for m in [
            "",
            "sandbox: touch(1) deny(1) file-write-create /x",
            "Sandbox: touch deny(1) file-write-create /x",
            "Sandbox: touch(x) deny(1) file-write-create /x",
            "Sandbox: touch(1) allow(1) file-write-create /x",
            "Sandbox: touch(1) deny(z) file-write-create /x",
            "Sandbox: touch(1) deny(1) ",
        ] {
            assert_eq!(parse_violation(m), None, "{m:?}");
        }
    }

    #[test]
    fn kinds_follow_the_operation() {
        assert_eq!(kind_of("file-write-unlink"), DenialKind::FileWrite);
        assert_eq!(kind_of("file-link"), DenialKind::FileWrite);
        assert_eq!(kind_of("file-read-data"), DenialKind::FileRead);
        assert_eq!(kind_of("network-outbound"), DenialKind::Network);
        assert_eq!(kind_of("signal"), DenialKind::Process);
        assert_eq!(kind_of("sysctl-write"), DenialKind::Other);
    }

    #[test]
    fn only_the_runs_pids_count_and_duplicates_fold() {
        let log = [
            "Sandbox: touch(10) deny(1) file-write-create /private/tmp/a",
            "Sandbox: touch(10) deny(1) file-write-create /private/tmp/a",
            "Sandbox: curl(11) deny(1) network-outbound 1.1.1.1:443",
            "Sandbox: other(99) deny(1) file-write-create /private/tmp/b",
        ];
        let d = attribute(log, &[10, 11]);
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!((d[0].kind, d[0].target.as_deref()), (DenialKind::FileWrite, Some("/private/tmp/a")));
        assert_eq!(d[1].kind, DenialKind::Network);
        assert!(d.iter().all(|x| x.line.is_none()));
        assert!(attribute(log, &[]).is_empty());
    }
}
