//! Named host lists for common ecosystems, at their old path: they live with policy
//! (`crate::policy::presets`).

pub use crate::policy::presets::*;
