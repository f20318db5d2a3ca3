//! The integration suites that drive cordon through its library API and its binary
//! (`cordon run`, `serve`, `mcp`, `session`), in one test binary: one link instead of
//! one per suite. Each suite is a module; run one with its path as the filter, e.g.
//! `cargo test --test integration executor::` (or one case:
//! `cargo test --test integration escalation::cli_ask_`).
//!
//! - [`executor`]: process lifecycle, bounded capture, env scrub, the `cordon run` CLI
//!   contract;
//! - [`escalation`], [`session`]: one-shot escalation and approvers; session overrides;
//! - [`serve`], [`mcp`]: the line protocol and the MCP server driven by Python clients;
//! - [`spill`]: spill files on disk;
//! - [`record`]: the recorded CLI and protocol outputs (`tests/record/`);
//! - [`local_ipc`]: a test suite's loopback servers, unix sockets and multiprocessing
//!   with the network off, through `run`, `serve` and `mcp`;
//! - [`review_regressions`]: findings of the security review, judged by effect;
//! - [`audit`]: `cordon audit` on a few probes, against cordon and against no sandbox.
//!
//! Not here: the security suite (`tests/security.rs`, its own binary so that
//! `cargo test --test security <filter>` stays the way to run it), the lifecycle suite
//! (`tests/lifecycle.rs`: it makes the test process a child subreaper, a process-wide
//! setting that must not see other suites' orphans), the planner suites
//! (`tests/planner/`) and the denial corpus (`tests/denials_corpus.rs`).

#[path = "../common/mod.rs"]
mod common;

mod audit;
mod escalation;
mod executor;
mod local_ipc;
mod mcp;
mod record;
mod review_regressions;
mod serve;
mod session;
mod spill;
