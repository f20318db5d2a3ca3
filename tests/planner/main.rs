//! The planner suites, in one test binary: what cordon would do, computed without
//! running anything (plus the bwrap suite's end-to-end runs on Linux). Each suite is a
//! module; run one with its path as the filter, e.g. `cargo test --test planner
//! bwrap_golden::`.
//!
//! - [`bwrap_golden`]: the bubblewrap planner against `tests/golden/bwrap/`, argv
//!   invariants, end-to-end runs under bubblewrap (`e2e::`, Linux);
//! - [`seatbelt_golden`]: the Seatbelt planner against `tests/golden/seatbelt/`, profile
//!   validation, and real runs under `sandbox-exec` (`macos::`, compiled on macOS only);
//! - [`seccomp_differential`]: cordon's seccomp compiler against seccompiler, both run
//!   by the classic-BPF interpreter in `tests/cbpf`.
//!
//! `CORDON_UPDATE_GOLDEN=1 cargo test --test planner` rewrites the golden files of both
//! planners (review the diff before committing).

// The bwrap and seccomp suites (and the BPF interpreter) are Linux suites: their
// planners are compiled on Linux only. On macOS this binary holds the Seatbelt suite.
#[cfg(target_os = "linux")]
#[path = "../cbpf/mod.rs"]
mod cbpf;
#[path = "../common/mod.rs"]
mod common;

#[cfg(target_os = "linux")]
mod bwrap_golden;
mod seatbelt_golden;
#[cfg(target_os = "linux")]
mod seccomp_differential;
