//! The errors of the runners: why a runner could not plan ([`PlanError`]), why a plan
//! could not be materialized ([`MaterializeError`]), and what broke between
//! selection and `execve` ([`RunnerFailure`]). They live in `crate::error` (below the
//! runners, so no import goes both ways); this module keeps their path.

pub use crate::error::runner::{MaterializeError, PlanError, RunnerFailure};
