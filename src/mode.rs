//! The mode ladder: `read-only` < `workspace-write` < `full-access`.
//!
//! The order is part of the contract: widening checks and clamps compare rungs with
//! `<`, `min` and `max`. Modes govern file effects; network is off in every rung below
//! `full-access` unless the policy explicitly allows it.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// One rung of the mode ladder, narrowest first. `Ord` follows the ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Read and execute everywhere the host allows; write only a private temp dir.
    ReadOnly,
    /// Additionally write the workspace and the extra writable roots.
    WorkspaceWrite,
    /// No confinement at all (the passthrough runner).
    FullAccess,
}

impl Mode {
    /// Every rung, narrowest first.
    pub const ALL: [Mode; 3] = [Mode::ReadOnly, Mode::WorkspaceWrite, Mode::FullAccess];

    /// The exact string form (`read-only`, `workspace-write`, `full-access`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::FullAccess => "full-access",
        }
    }

    /// Whether this mode needs OS confinement (everything below `full-access`).
    pub fn is_confined(self) -> bool {
        self < Mode::FullAccess
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not one of the three mode names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode `{given}` (expected read-only, workspace-write or full-access)")]
pub struct ParseModeError {
    /// What was given.
    pub given: String,
}

impl FromStr for Mode {
    type Err = ParseModeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| ParseModeError { given: s.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladder_is_ordered() {
        assert!(Mode::ReadOnly < Mode::WorkspaceWrite);
        assert!(Mode::WorkspaceWrite < Mode::FullAccess);
        assert_eq!(Mode::FullAccess.min(Mode::ReadOnly), Mode::ReadOnly);
    }

    #[test]
    fn round_trips_exact_strings() {
        for m in Mode::ALL {
            assert_eq!(m.as_str().parse::<Mode>().unwrap(), m);
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{}\"", m.as_str()));
        }
        assert!("Read-Only".parse::<Mode>().is_err());
        assert!("readonly".parse::<Mode>().is_err());
    }
}
