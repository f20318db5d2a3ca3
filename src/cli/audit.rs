//! `cordon audit`: flags in, the audit's report out (text, `--json`, `--junit FILE`).
//! Exit status: 0 when everything held (every attack stopped, every control worked,
//! nothing left behind), 1 otherwise, 125 when the audit could not start.

use super::EXIT_SETUP_FAILED;
use clap::Args;
use cordon::mode::Mode;
use cordon::RunnerKind;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// The flags of `cordon audit`.
#[derive(Args, Debug)]
pub(crate) struct AuditArgs {
    /// A runner to audit (repeatable): landlock, bwrap. Default: both.
    #[arg(long = "runner", value_name = "RUNNER", value_parser = parse_runner)]
    runners: Vec<RunnerKind>,
    /// A mode to audit (repeatable): read-only, workspace-write. Default: both. For a
    /// wrapper, what it is meant to allow (default: workspace-write).
    #[arg(long = "mode", value_name = "MODE", value_parser = parse_confined_mode)]
    modes: Vec<Mode>,
    /// Audit another sandbox instead: its command prefix, split like a shell line;
    /// `{ws}` stands for the workspace (the probe's working directory), e.g.
    /// 'bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind {ws} {ws} --unshare-net --chdir {ws}'.
    #[arg(long, value_name = "PREFIX")]
    wrapper: Option<String>,
    /// Also run every probe as this unprivileged user (the audit must run as root).
    #[arg(long = "as", value_name = "USER")]
    as_user: Option<String>,
    /// Only probes whose id (class/name) starts with PREFIX (repeatable).
    #[arg(long, value_name = "PREFIX")]
    only: Vec<String>,
    /// Jobs run at once.
    #[arg(long, default_value_t = 12, value_name = "N")]
    jobs: usize,
    /// Where the audit's working directory goes (not under /tmp).
    #[arg(long, default_value = "/var/tmp", value_name = "DIR")]
    dir: PathBuf,
    /// Keep the directories of failed jobs, to reproduce them by hand.
    #[arg(long)]
    keep_failed: bool,
    /// Print the report as one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Also write the report as JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// List the probes (one line each: what it tries, what it proves) and exit.
    #[arg(long)]
    list: bool,
}

fn parse_runner(s: &str) -> Result<RunnerKind, String> {
    match s {
        "landlock" => Ok(RunnerKind::Landlock),
        "bwrap" => Ok(RunnerKind::Bwrap),
        _ => Err("the audit covers cordon's Linux runners: landlock, bwrap".into()),
    }
}

fn parse_confined_mode(s: &str) -> Result<Mode, String> {
    match cordon::flags::parse_mode(s)? {
        Mode::FullAccess => Err("full-access confines nothing: audit read-only or workspace-write".into()),
        m => Ok(m),
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn audit(_: AuditArgs) -> ExitCode {
    errln!("cordon audit: the battery audits Linux sandboxes; it does not run on this OS yet");
    ExitCode::from(EXIT_SETUP_FAILED)
}

#[cfg(target_os = "linux")]
pub(crate) fn audit(args: AuditArgs) -> ExitCode {
    use cordon::audit::{listing, run, Options};
    if args.list {
        outln!("{}", listing().trim_end());
        return ExitCode::SUCCESS;
    }
    let wrapper = match args.wrapper.as_deref().map(cordon::audit::split_words) {
        Some(Ok(w)) if w.is_empty() => {
            errln!("cordon audit: --wrapper is empty");
            return ExitCode::from(2);
        }
        Some(Err(e)) => {
            errln!("cordon audit: --wrapper: {e}");
            return ExitCode::from(2);
        }
        Some(Ok(w)) => Some(w),
        None => None,
    };
    let modes = if !args.modes.is_empty() {
        args.modes
    } else if wrapper.is_some() {
        vec![Mode::WorkspaceWrite]
    } else {
        vec![Mode::ReadOnly, Mode::WorkspaceWrite]
    };
    let runners = if args.runners.is_empty() { vec![RunnerKind::Landlock, RunnerKind::Bwrap] } else { args.runners };
    let opts = Options {
        runners,
        modes,
        wrapper,
        as_user: args.as_user,
        only: args.only,
        jobs: args.jobs,
        base: args.dir,
        cordon: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe")),
        keep_failed: args.keep_failed,
    };
    let report = match run(&opts, &|_| {}) {
        Ok(r) => r,
        Err(e) => {
            errln!("cordon audit: {e}");
            return ExitCode::from(EXIT_SETUP_FAILED);
        }
    };
    if let Some(path) = &args.junit {
        if let Err(e) = std::fs::write(path, report.junit()) {
            errln!("cordon audit: write {}: {e}", path.display());
            return ExitCode::from(EXIT_SETUP_FAILED);
        }
    }
    if args.json {
        outln!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        out!("{}", report.text());
    }
    if report.held() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
