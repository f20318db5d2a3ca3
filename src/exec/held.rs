//! Runs whose writes are held back ([`Executor::run_held_until`]): the writes a run
//! makes under its writable roots, kept in a private copy-on-write layer where the
//! runner can give it one, and applied or discarded when the caller decides
//! ([`Held::settle`]); where it cannot, what the run changed on the host, found by
//! comparing snapshots ([`crate::layer::snapshot`]).
//!
//! What it does not do: choose when to hold (escalation and `--preview` do) or plan the
//! layer's mounts (the runners do).

use super::*;
use crate::layer::snapshot::Snapshot;
use crate::layer::{Change, Fate, HeldWrites};
#[cfg(target_os = "linux")]
use launch::random_u32;

/// A run's writes under its writable roots, from [`Executor::run_held_until`].
#[derive(Debug)]
#[non_exhaustive]
pub enum Held {
    /// Nothing the run could write outside its private directories (read-only,
    /// full-access runs are not held).
    Nothing,
    /// No layer here: the run wrote to the host directly, and these are the changes
    /// it made (compared from snapshots before and after it).
    Direct {
        /// What changed.
        changes: Vec<Change>,
        /// More changes than listed, or too many files to compare.
        truncated: bool,
        /// Why the writes could not be held back.
        why: String,
    },
    /// The writes are held in private layers over the writable roots; nothing reached
    /// the host yet. Dropped without [`Held::settle`], they are discarded.
    #[cfg(target_os = "linux")]
    Layer(HeldLayer),
}

/// The private layers of one run (Linux): their storage, removed when this is dropped.
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub struct HeldLayer {
    /// The run's storage directory (an upper and a work directory per root).
    pub(crate) storage: PathBuf,
    /// One layer per writable root.
    pub(crate) layers: Vec<crate::layer::apply::Layer>,
    /// The run's policy: once applied, its sentinels are checked on the host as at
    /// the end of a run that is not held ([`crate::policy::seal`]).
    pub(crate) policy: Box<crate::policy::ExecutionPolicy>,
}

#[cfg(target_os = "linux")]
impl HeldLayer {
    fn changes(&self) -> (Vec<Change>, bool, Vec<crate::layer::Skipped>) {
        let (mut changes, mut truncated, mut skipped) = (Vec::new(), false, Vec::new());
        for l in &self.layers {
            match crate::layer::apply::scan(l) {
                Ok(a) => {
                    changes.extend(a.changes);
                    truncated |= a.truncated;
                    skipped.extend(a.skipped);
                }
                Err(e) => skipped.push(crate::layer::Skipped { path: l.root.clone(), why: format!("listing: {e}") }),
            }
        }
        (changes, truncated, skipped)
    }

    fn apply(&self) -> HeldWrites {
        let (mut changes, mut truncated, mut skipped) = (Vec::new(), false, Vec::new());
        for l in &self.layers {
            match crate::layer::apply::apply(l) {
                Ok(a) => {
                    changes.extend(a.changes);
                    truncated |= a.truncated;
                    skipped.extend(a.skipped);
                }
                Err(e) => {
                    skipped.push(crate::layer::Skipped { path: l.root.clone(), why: format!("not applied: {e}") })
                }
            }
        }
        // What host git would now read that the run planted (the check at the run's end
        // saw the host before the writes were applied): applying skips the sentinels
        // themselves, not a symlink on the way to one (an included file, a hooks
        // directory) or a tracked file made a repository.
        for q in crate::policy::seal(&self.policy) {
            let why = match &q.moved_to {
                Some(to) => format!("applied, then moved aside to {}: {}", to.display(), q.kind),
                None => format!("applied, and NOT moved aside, review it: {}", q.kind),
            };
            skipped.push(crate::layer::Skipped { path: q.path, why });
        }
        HeldWrites { fate: Fate::Applied, changes, truncated, skipped }
    }
}

#[cfg(target_os = "linux")]
impl Drop for HeldLayer {
    fn drop(&mut self) {
        let _ = crate::layer::apply::remove_storage(&self.storage);
    }
}

impl Held {
    /// What the run changed (held back or on the host), and whether the list is cut.
    pub fn changes(&self) -> (Vec<Change>, bool) {
        match self {
            Held::Nothing => (Vec::new(), false),
            Held::Direct { changes, truncated, .. } => (changes.clone(), *truncated),
            #[cfg(target_os = "linux")]
            Held::Layer(l) => {
                let (c, t, _) = l.changes();
                (c, t)
            }
        }
    }

    /// Whether the writes are held back (none reached the host).
    pub fn held_back(&self) -> bool {
        #[cfg(target_os = "linux")]
        if let Held::Layer(_) = self {
            return true;
        }
        false
    }

    /// Apply the held writes to the host (`Fate::Applied`), or drop them
    /// (`Fate::Discarded`, or `Fate::Preview` for a preview). `None` when nothing was
    /// held back (nothing writable, or no layer: the writes are on the host already).
    pub fn settle(self, fate: Fate) -> Option<HeldWrites> {
        #[cfg(not(target_os = "linux"))]
        let _ = fate;
        match self {
            Held::Nothing | Held::Direct { .. } => None,
            #[cfg(target_os = "linux")]
            Held::Layer(l) => Some(match fate {
                Fate::Applied => l.apply(),
                Fate::Discarded | Fate::Preview => {
                    let (changes, truncated, skipped) = l.changes();
                    HeldWrites { fate, changes, truncated, skipped }
                }
            }),
        }
    }
}

impl Executor {
    /// Run `spec` with its writes under the writable roots held back where this host
    /// and runner can (a private overlay per root, see docs/escalation.md): the result,
    /// and the [`Held`] writes to apply or discard. Where they cannot be held, the run
    /// writes to the host as [`Executor::run_until`] does, and [`Held::Direct`] lists
    /// what it changed. Read-only and full-access runs are not held ([`Held::Nothing`]).
    pub async fn run_held_until(
        &self,
        spec: Spec,
        abort: impl Future<Output = ()>,
    ) -> Result<(RunResult, Held), CordonError> {
        if spec.policy.mode != Mode::WorkspaceWrite {
            return Ok((self.run_until(spec, abort).await?, Held::Nothing));
        }
        let roots = spec.policy.writable();
        match self.can_hold(&spec) {
            #[cfg(target_os = "linux")]
            Ok(()) => self.run_in_layers(spec, roots, abort).await,
            #[cfg(not(target_os = "linux"))]
            Ok(()) => unreachable!("can_hold is never Ok off Linux"),
            Err(why) => {
                let mut skip = spec.policy.protected.clone();
                skip.push(self.state_dir.clone());
                let before = Snapshot::take(&roots, &skip);
                let result = self.run_until(spec, abort).await?;
                let after = Snapshot::take(&roots, &skip);
                let (changes, truncated) = before.changes(&after);
                Ok((result, Held::Direct { changes, truncated, why }))
            }
        }
    }

    #[cfg(target_os = "linux")]
    async fn run_in_layers(
        &self,
        spec: Spec,
        roots: Vec<PathBuf>,
        abort: impl Future<Output = ()>,
    ) -> Result<(RunResult, Held), CordonError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let storage = self.state_dir.join(format!("held-{}-{id}-{:08x}", std::process::id(), random_u32()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&storage)
            .map_err(|source| CordonError::Io { what: format!("creating {}", storage.display()), source })?;
        let mut layers = Vec::new();
        for (i, root) in roots.iter().enumerate() {
            let m = std::fs::symlink_metadata(root)
                .map_err(|source| CordonError::Io { what: format!("reading {}", root.display()), source })?;
            // Never applied: protected paths, and where host git would read what does not
            // exist yet (a sentinel: a repository planted at a registered submodule path
            // would reach the host here, after the check at the run's end).
            let skip = spec
                .policy
                .protected
                .iter()
                .chain(spec.policy.git.sentinels.iter().map(|s| &s.path))
                .filter_map(|p| p.strip_prefix(root).ok().map(Path::to_path_buf))
                .collect();
            layers.push(crate::layer::apply::Layer {
                root: root.clone(),
                root_id: (m.dev(), m.ino()),
                upper: storage.join(runner::held_dirs(i).0),
                skip,
                // As the stage mounts it (`runner::stage::overlay_options`).
                userxattr: matches!(self.host.namespaces, crate::host::Namespaces::UserNamespace),
            });
        }
        // Owns the storage from here: removed on every way out unless settled.
        let held = HeldLayer { storage: storage.clone(), layers, policy: Box::new(spec.policy.clone()) };
        let protected_files =
            spec.policy.protected.iter().filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())).cloned();
        let input = runner::HeldInput { storage, protected_files: protected_files.collect() };
        let timeout = spec.timeout;
        let output_mode = spec.output;
        let launched = self.launch_with(&spec, Some(input)).await?;
        let result = finish(launched, timeout, output_mode, &self.config, abort, None, spec.policy.mode).await;
        Ok((result, Held::Layer(held)))
    }

    /// `Ok` when [`Executor::run_held_until`] would hold `spec`'s writes back in a
    /// private layer, else why not (the writes would go to the host).
    pub fn can_hold(&self, spec: &Spec) -> Result<(), String> {
        let policy = &spec.policy;
        if policy.mode != Mode::WorkspaceWrite {
            return Err(format!("{} runs write nothing that could be held back", policy.mode));
        }
        if !cfg!(target_os = "linux") {
            return Err("private layers need Linux (overlayfs)".into());
        }
        let selection = runner::select(policy, &self.host, spec.runner).map_err(|e| e.to_string())?;
        if selection.runner != RunnerKind::Landlock {
            return Err(format!(
                "the {} runner does not hold writes back (the landlock runner does)",
                selection.runner
            ));
        }
        if !self.host.namespaces.available() {
            return Err("no mount namespace here".into());
        }
        if let crate::host::Overlay::Unavailable { reason } = &self.host.overlay {
            return Err(format!("no overlayfs here ({reason})"));
        }
        let roots = policy.writable();
        if roots.iter().any(|r| roots.iter().any(|o| o != r && r.starts_with(o))) {
            return Err("a writable root lies inside another".into());
        }
        if roots.iter().any(|r| self.state_dir.starts_with(r) || r.starts_with(&self.state_dir)) {
            return Err(format!("cordon's state directory {} is inside a writable root", self.state_dir.display()));
        }
        // A layer over a root shows the directory beneath a host mount inside it, not
        // what is mounted there (and an unprivileged overlay refuses such a root).
        #[cfg(target_os = "linux")]
        if let Some(m) = mount_inside(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default(), &roots) {
            return Err(format!(
                "a host mount ({}) lies inside a writable root: a layer would hide what is mounted there",
                m.display()
            ));
        }
        Ok(())
    }
}

/// The first mount point in `mountinfo` (the text of `/proc/self/mountinfo`) that lies
/// strictly inside one of `roots` (pure).
#[cfg(target_os = "linux")]
fn mount_inside(mountinfo: &str, roots: &[PathBuf]) -> Option<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|point| PathBuf::from(crate::limits::unescape_mountinfo(point)))
        .find(|point| roots.iter().any(|r| point != r && point.starts_with(r)))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn mounts_inside_a_root_are_found() {
        let mi = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                  30 22 8:1 /vol /home/u/ws\\040x/data rw shared:2 - ext4 /dev/sda1 rw\n\
                  31 22 0:5 / /home/u/ws rw - tmpfs t rw\n\
                  32 22 0:6 / /home/u/wsother rw - tmpfs t rw\n";
        let roots = |r: &str| vec![PathBuf::from(r)];
        assert_eq!(mount_inside(mi, &roots("/home/u/ws x")), Some(PathBuf::from("/home/u/ws x/data")));
        assert_eq!(mount_inside(mi, &roots("/home/u/ws")), None, "the root's own mount and a sibling are not inside");
        assert_eq!(mount_inside(mi, &roots("/srv")), None);
    }
}
