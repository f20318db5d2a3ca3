//! The macOS `seatbelt` runner, in two halves: [`plan`], the pure planner that turns a
//! policy and a command into the exact `sandbox-exec` argv (golden-tested on every
//! OS), and [`runner`], the runner seam that wraps that argv in a launch plan and
//! reports the enforcement Seatbelt reaches.
//!
//! The executor launches the plan directly (`exec::direct`); what only a Mac can
//! confirm is listed in docs/seatbelt.md.

#[cfg(test)]
pub(crate) mod launch_tests;
pub mod plan;
pub mod runner;
pub mod violations;

pub use plan::{
    plan_seatbelt, PathRole, SeatbeltInput, SeatbeltPlan, SeatbeltPlanError, INDEX_TOKEN, MACOS_PATH_MAX,
    MACOS_SYMLINKED_DIRS, PARAM_PROTECTED_ANCESTOR_PREFIX, PARAM_PROTECTED_PREFIX, PARAM_TMPDIR, PARAM_WORKSPACE,
    PARAM_WRITABLE_ROOT_PREFIX, PROFILE_SNIPPETS, SANDBOX_EXEC_PATH,
};
pub use runner::{seatbelt_gaps, SandboxExec, SeatbeltRunner, SANDBOX_EXEC};
