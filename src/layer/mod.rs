//! Held-back writes: what a run changed under its writable roots while those changes
//! were kept in a private copy-on-write layer (an overlay whose lower layer is the
//! root and whose upper layer is private storage of cordon's), listed for the caller
//! and applied to the host only when the caller decides so (docs/escalation.md,
//! "Retry semantics").
//!
//! This module re-exports the vocabulary ([`HeldWrites`], [`Change`]), shared by every OS
//! and kept with the result (`crate::result`) so the result does not import this module.
//! On Linux, the crate's `apply` submodule reads an upper directory and applies it to
//! the host race-safely; [`snapshot`] compares a root's entries before and after a run
//! where no layer can be had.
//!
//! What it does not do: mount anything (the runners plan the layer) or decide when to
//! apply (escalation does).

#[cfg(target_os = "linux")]
pub(crate) mod apply;
pub mod snapshot;

pub use crate::result::held::{Change, ChangeKind, EntryKind, Fate, HeldWrites, Skipped, MAX_LISTED_CHANGES};
