//! The vocabulary of held-back writes in a result ([`HeldWrites`], [`Change`]): what a
//! run changed under its writable roots while those changes were kept in a private
//! layer, and what became of them. Kept here so the result carries them without
//! importing `crate::layer`, which lists and applies them (and re-exports these).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The most changes listed in a result; the rest are counted as `truncated` (applying
/// is not bounded by it).
pub const MAX_LISTED_CHANGES: usize = 10_000;

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    /// It did not exist on the host.
    Created,
    /// It existed and was replaced or written (content, mode, times, or another type).
    Modified,
    /// It existed and was removed (a directory with everything in it).
    Removed,
}

/// The type of file a change leaves (or, for a removal, removes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A named pipe.
    Fifo,
    /// A device node or socket (never applied).
    Other,
}

/// One path the run changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The host path (canonical root joined with the path under it).
    pub path: PathBuf,
    /// Created, modified or removed.
    pub change: ChangeKind,
    /// The type of file.
    pub kind: EntryKind,
}

/// A change that was not (or could not be) applied, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// The host path.
    pub path: PathBuf,
    /// Why (a device node, a conflict with a concurrent change on the host, ...).
    pub why: String,
}

/// What became of the held-back writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fate {
    /// Applied to the host after the run (no grant was asked for).
    Applied,
    /// Dropped: a grant was asked for, and the workspace stays as it was before the run
    /// (a granted retry starts from there; a refused one leaves nothing half done).
    Discarded,
    /// Dropped: the caller asked for a preview (`--preview`), the host is unchanged.
    Preview,
}

/// The writes a run made under its writable roots while they were held back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldWrites {
    /// Applied, discarded or only previewed.
    pub fate: Fate,
    /// The changes, in path order within each root (at most [`MAX_LISTED_CHANGES`]).
    pub changes: Vec<Change>,
    /// More changes than listed.
    #[serde(default)]
    pub truncated: bool,
    /// Changes not applied (with `fate: applied`) or that would not be (otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
}
