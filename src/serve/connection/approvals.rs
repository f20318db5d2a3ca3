//! Who a connection may ask for a narrow grant besides its own client (`--approver`),
//! where every decision is recorded (`--audit-log`), and what a foreground run that
//! may have asked returns.

use super::*;

/// Who a connection may ask for a denied call's narrow grant besides its own client,
/// and where every decision is recorded (`--approver`, `--audit-log`).
#[derive(Debug, Default)]
pub struct Approvals {
    pub(super) program: Option<ProgramApprover>,
    pub(super) audit: Option<AuditLog>,
}

impl Approvals {
    /// From the server flags: the approver program resolved and pinned now, the audit
    /// log at `--audit-log` or the default location (`None` without `HOME`: then
    /// nobody is ever asked, since a decision must be recorded).
    pub fn from_args(args: &crate::flags::ApprovalArgs) -> Result<Approvals, RpcError> {
        let program = match &args.approver {
            None => None,
            Some(p) => Some(ProgramApprover::find(p).map_err(|e| {
                RpcError::new(
                    codes::CORDON_ERROR,
                    "APPROVER_NOT_FOUND",
                    format!("approver program `{}`: {e}", p.display()),
                )
            })?),
        };
        let audit = args.audit_log.clone().or_else(AuditLog::default_path).map(AuditLog::new);
        Ok(Approvals { program, audit })
    }

    /// The `--approver` program, if any.
    pub fn program(&self) -> Option<&ProgramApprover> {
        self.program.as_ref()
    }
}

/// A foreground run that may have asked for a narrow grant ([`Connection::run_approved`]).
#[derive(Debug)]
pub struct Approved {
    /// The first run, and the request, decision and retry when someone was asked.
    pub outcome: EscalatedOutcome,
    /// A grant that would have let a failed run through but that nobody could be asked
    /// for, and why nobody could.
    pub unasked: Option<(Grant, String)>,
}
