//! What the supervisor recorded: bounded, distinct denials ([`Recorded`]), their text
//! bounds, and the command's own stderr lines linked to them ([`link_lines`]).

use crate::result::{Denial, DenialKind};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// At most this many denials are kept per run: the first [`KEPT_FIRST`] and the
/// latest ones; the rest are counted in a last entry of kind `other`.
pub const MAX_DENIALS: usize = 64;

/// Of [`MAX_DENIALS`], how many of the first are kept (the others are the latest).
pub const KEPT_FIRST: usize = 48;

/// The longest target or evidence text a denial carries (characters): text the
/// command provoked is shown to approvers and models, and must not be able to push
/// cordon's own lines off a screen.
pub const MAX_DENIAL_TEXT: usize = 240;

/// Cut a denial's target and evidence to [`MAX_DENIAL_TEXT`] characters (marked `…`).
pub fn bound_text(d: &mut Denial) {
    fn cut(s: &mut String) {
        if let Some((i, _)) = s.char_indices().nth(MAX_DENIAL_TEXT) {
            s.truncate(i);
            s.push('…');
        }
    }
    cut(&mut d.evidence);
    if let Some(t) = d.target.as_mut() {
        cut(t);
    }
}

/// What the supervisor recorded: distinct denials, bounded (see [`MAX_DENIALS`]).
#[derive(Debug, Default)]
pub struct Recorded {
    first: Vec<Denial>,
    latest: std::collections::VecDeque<Denial>,
    dropped: usize,
    /// Syscalls the supervisor could not judge (it could not read their arguments):
    /// how many, and the first errno.
    pub(crate) unread: Option<(u64, i32)>,
}

impl Recorded {
    pub(super) fn push(&mut self, d: Denial) {
        // Distinct by kind and target; a refusal of cordon's proxy (which may name no
        // target) by its evidence too, which is cordon's own text from a short list.
        let same =
            |e: &Denial| e.kind == d.kind && e.target == d.target && (d.proxy.is_none() || e.evidence == d.evidence);
        if self.first.iter().any(same) || self.latest.iter().any(same) {
            return;
        }
        // The first of every kind is always kept (a flood of one kind must not hide
        // another), then the first ones, then the latest.
        let new_kind = !self.first.iter().chain(self.latest.iter()).any(|e| e.kind == d.kind);
        if self.first.len() < KEPT_FIRST || new_kind {
            self.first.push(d);
            return;
        }
        // One slot is kept for the count of the dropped.
        if self.first.len() + self.latest.len() >= MAX_DENIALS - 1 {
            if self.latest.pop_front().is_none() {
                self.dropped += 1;
                return;
            }
            self.dropped += 1;
        }
        self.latest.push_back(d);
    }

    /// A copy of what is recorded so far (without the count of the dropped).
    #[cfg(test)]
    pub(crate) fn snapshot(&self) -> Vec<Denial> {
        self.first.iter().chain(self.latest.iter()).cloned().collect()
    }

    /// What the run's result says of the syscalls the supervisor could not judge.
    pub fn unobserved(&self) -> Option<crate::result::Unobserved> {
        self.unread.map(|(syscalls, errno)| crate::result::Unobserved {
            syscalls,
            reason: format!(
                "cordon's supervisor could not read the arguments of {syscalls} observed syscall(s) from the \
                 command's memory ({}); a refusal among them may be missing from denials, and without a mount \
                 namespace a write into a protected path among them was not refused",
                std::io::Error::from_raw_os_error(errno)
            ),
        })
    }

    /// The denials in the order seen (the first ones, then the latest), with one last
    /// entry counting those dropped in between.
    pub fn into_vec(self) -> Vec<Denial> {
        let mut v = self.first;
        v.extend(self.latest);
        if self.dropped > 0 {
            v.push(Denial {
                kind: DenialKind::Other,
                target: None,
                evidence: format!(
                    "seccomp supervisor: {} more distinct denials between the first ones and the latest \
                     are not listed",
                    self.dropped
                ),
                line: None,
                proxy: None,
            });
        }
        v
    }
}

/// Where the supervisor records what it saw.
pub type DenialSink = Arc<Mutex<Recorded>>;

/// Record a denial (once per kind and target; bounded, see [`MAX_DENIALS`]). Also used by
/// cordon's egress proxy (`crate::proxy`), whose refusals are denials of the same run.
pub(crate) fn record(sink: &DenialSink, d: Denial) {
    push(sink, d)
}

pub(super) fn push(sink: &DenialSink, d: Denial) {
    sink.lock().unwrap_or_else(|p| p.into_inner()).push(d);
}

/// Link each denial to the command's own diagnostic line about it, when its stderr
/// has one: a line naming the refused path (as given or relative to the working
/// directory) for a file write; a line about the network for a network denial. The
/// text never creates, removes or changes a denial: a command may print anything.
pub fn link_lines(denials: &mut [Denial], stderr: &str, workdir: &Path) {
    const NETWORK_WORDS: [&str; 6] =
        ["resolve", "unreachable", "connect", "Network", "network", "Name or service not known"];
    for d in denials.iter_mut() {
        let line = match (d.kind, d.target.as_deref()) {
            (DenialKind::FileWrite, Some(target)) => {
                let path = Path::new(target);
                let rel = path.strip_prefix(workdir).ok().map(|r| r.display().to_string());
                // The path as the command gave it (`... asked as `link/b``).
                let asked = d.evidence.rsplit_once("asked as `").and_then(|(_, a)| a.strip_suffix('`'));
                stderr
                    .lines()
                    .find(|l| [Some(target), rel.as_deref(), asked].into_iter().flatten().any(|r| names_path(l, r)))
            }
            (DenialKind::Network, _) => stderr.lines().find(|l| NETWORK_WORDS.iter().any(|w| l.contains(w))),
            _ => None,
        };
        if let Some(l) = line {
            let mut l = l.trim().to_string();
            if let Some((i, _)) = l.char_indices().nth(MAX_DENIAL_TEXT) {
                l.truncate(i);
                l.push('…');
            }
            d.line = Some(l);
        }
    }
}

/// Whether `line` names `path` as a whole word (not as part of a longer name).
pub(super) fn names_path(line: &str, path: &str) -> bool {
    if path.is_empty() {
        return false;
    }
    let bounded = |c: Option<char>| c.is_none_or(|c| c.is_whitespace() || "'\"`‘’:,()[]".contains(c));
    line.match_indices(path)
        .any(|(i, _)| bounded(line[..i].chars().next_back()) && bounded(line[i + path.len()..].chars().next()))
}
