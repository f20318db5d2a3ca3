//! Write evidence: the supervisor's judgement of one write-intent path syscall.
//!
//! When a run observes writes, every path syscall that may change the filesystem
//! (`profiles/seccomp/write_intent.json`) stops in the kernel and asks cordon's
//! supervisor. [`WriteJudge::judge`] resolves the path **in the command's own view**
//! (its root, its working directory or the directory descriptor it passed, symlinks
//! followed the way the kernel follows them, absolute ones inside the command's root)
//! and asks the enforced policy, layer by layer, in the kernel's order:
//!
//! 1. the mount layer: the object's mount is read-only in the command's view → `EROFS`
//!    (only where the run has its own mount namespace: a host mount that is read-only
//!    is the host's refusal, not the sandbox's);
//! 2. Landlock: no ancestor of the object (for a new or removed entry: of its directory)
//!    carries a write rule of the run's ruleset → `EACCES` (for the operations Landlock
//!    handles: opening for writing, creating, removing, renaming, linking, truncating);
//! 3. the host alone: for a caller other than root, the object's own permission bits
//!    must allow the caller to write; otherwise the host would refuse as well and the
//!    refusal is not the sandbox's (the kernel answers it, nothing is recorded). Nor is
//!    removing, renaming or linking something that does not exist: the host fails it
//!    with `ENOENT` (answered here where a read-only mount would say `EROFS` first), and
//!    the call's later paths are not judged ([`Answer::HostFails`]).
//!
//! A refusal is answered by the supervisor with the errno the kernel would give and
//! recorded as a denial; everything else continues into the kernel, whose layers stay
//! the enforcement. The answer can only ever add a refusal: a command that changes its
//! memory after the supervisor read the path gains nothing (the kernel checks again).
//! Anything the judge cannot resolve with certainty (a path that does not exist, procfs,
//! an unreadable argument) continues without a record: precision first.

use crate::result::{Denial, DenialKind};
use std::collections::HashMap;

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

mod args;
mod resolve;
use args::*;
use resolve::*;

/// The file that `path`, as command `pid` passed it, names in the command's own view:
/// an `O_PATH` descriptor, every symbolic link followed (the last one too, as
/// `connect()` follows it; absolute ones inside the command's root, `..` never above
/// it), relative paths from its working directory. `Err` with the errno of the first
/// step that failed (`ENOENT` when the resolution itself gives up).
pub(crate) fn open_in_view(pid: u32, path: &[u8]) -> std::io::Result<OwnedFd> {
    let root = open_path(&format!("/proc/{pid}/root"))?;
    let root_id = id_of_fd(root.as_fd()).ok_or_else(|| std::io::Error::from_raw_os_error(libc::ESRCH))?;
    let base = if path.first() == Some(&b'/') { None } else { Some(open_path(&format!("/proc/{pid}/cwd"))?) };
    let r = resolve(&root, root_id, base, PathBuf::from("/"), path, true)
        .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOENT))?;
    openat_name(r.dir.as_fd(), &r.name, libc::O_PATH | libc::O_NOFOLLOW)
}

/// `O_TMPFILE` (it includes `O_DIRECTORY`).
const O_TMPFILE_BITS: u64 = libc::O_TMPFILE as u64;

/// Directory verdicts kept per run (then the cache starts over).
const MAX_CACHED_DIRS: usize = 4096;

/// A file's identity: device and inode.
type Id = (u64, u64);

/// The rules a write is judged against, taken from the run's plan.
#[derive(Debug, Clone, Default)]
pub struct WriteRules {
    /// Landlock is one of the run's layers (with the ABI it was built for).
    pub landlock_abi: Option<u32>,
    /// Paths beneath which Landlock grants writes, resolved in the host's view.
    pub write: Vec<PathBuf>,
    /// Such paths that exist only in the command's view (private tmpfs, devices).
    pub write_in_view: Vec<PathBuf>,
    /// Protected paths (for the reason a refusal gives).
    pub protected: Vec<PathBuf>,
    /// Paths a grant made writable again inside (or as) a protected path: a write
    /// beneath one is judged as beneath a writable root.
    pub reopened: Vec<PathBuf>,
    /// Directories attached over themselves so that nothing can rename them away (on
    /// the way to a protected path): a rename or removal of one is refused (`EBUSY`).
    pub holders: Vec<PathBuf>,
    /// The run has its own mount namespace (a read-only mount there is the sandbox's).
    pub mount_layer: bool,
    /// The mode refuses writes to the workspace too (for the reason a refusal gives).
    pub read_only_mode: bool,
    /// The command runs without capabilities (a root caller's permission override is
    /// gone, so the permission bits decide for it too).
    pub capabilities_dropped: bool,
    /// Device numbers of the terminals the command inherited (granted by the runners).
    pub terminals: Vec<u64>,
}

/// Why a write was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    Outside,
    Protected,
    /// A directory on the way to a protected path (a mount point).
    Holder,
    /// Root's permission override (`CAP_DAC_OVERRIDE`) is dropped in the sandbox.
    NoCapability,
}

/// A directory's verdict, cached by identity for the run.
#[derive(Debug, Clone, Copy)]
struct DirVerdict {
    granted: bool,
    protected: bool,
}

/// What the supervisor answers.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// Let the kernel run it.
    Continue,
    /// Refuse with this errno; the denial was recorded.
    Refuse(i32),
    /// Fail with the errno the host alone would give (removing or renaming something
    /// that does not exist, where the sandbox's read-only mount would answer `EROFS`
    /// first): not the sandbox's refusal, nothing recorded.
    HostFails(i32),
}

/// One path's verdict (see [`WriteJudge::judge`]).
enum Verdict {
    /// The sandbox refuses it and the host alone would not: this errno, recorded.
    Refuse(i32, PathBuf, Reason),
    /// The host alone fails the whole call at this path (a removal, rename or link of
    /// something that does not exist): nothing is recorded and no later path is judged;
    /// `Some(errno)` is answered where the sandbox would give another error first (a
    /// read-only mount's `EROFS` before `ENOENT`), `None` lets the kernel answer (its
    /// own lookup fails first, as on the host).
    HostFails(Option<i32>),
}

/// One run's judge (owned by its supervisor thread).
pub struct WriteJudge {
    rules: WriteRules,
    granted: Vec<Id>,
    protected: std::collections::HashSet<Id>,
    reopened: std::collections::HashSet<Id>,
    holders: std::collections::HashSet<Id>,
    in_view: Option<(Vec<Id>, Option<u64>)>,
    /// The command's root (one for the whole run: `chroot` and `pivot_root` are refused).
    root: Option<OwnedFd>,
    /// Its identity.
    root_id: Option<Id>,
    dirs: HashMap<(Id, u64), DirVerdict>,
    uid: u32,
}

impl WriteJudge {
    /// A judge for `rules`; identities of the host-view rule paths are taken now.
    pub fn new(rules: WriteRules) -> WriteJudge {
        let ids = |v: &[PathBuf]| v.iter().filter_map(|p| id_of_path(p)).collect::<Vec<_>>();
        let granted = ids(&rules.write);
        let protected = ids(&rules.protected).into_iter().collect();
        let reopened = ids(&rules.reopened).into_iter().collect();
        let holders = ids(&rules.holders).into_iter().collect();
        let uid = nix::unistd::geteuid().as_raw();
        WriteJudge {
            rules,
            granted,
            protected,
            reopened,
            holders,
            in_view: None,
            root: None,
            root_id: None,
            dirs: HashMap::new(),
            uid,
        }
    }

    /// Judge one notification for `name` (a write-intent syscall); record a refusal in
    /// `sink`. `valid` says whether the notification is still pending (checked after
    /// reading the task's memory).
    pub fn judge(
        &mut self,
        name: &str,
        pid: u32,
        args: [u64; 6],
        valid: impl Fn() -> bool,
        sink: &mut dyn FnMut(Denial),
    ) -> Answer {
        let Some(calls) = path_args(name, args, pid) else { return Answer::Continue };
        if self.root.is_none() {
            let Ok(root) = open_path(&format!("/proc/{pid}/root")) else { return Answer::Continue };
            self.in_view = Some(self.resolve_in_view(&root));
            self.root_id = id_of_fd(root.as_fd());
            self.root = Some(root);
        }
        let Some(root) = self.root.take() else { return Answer::Continue };
        let mut verdicts = Vec::new();
        for (dirfd, ptr, role) in calls {
            let Some(path) = read_path(pid, ptr) else {
                self.root = Some(root);
                return Answer::Continue;
            };
            let verdict = if self.plainly_allowed(pid, &root, dirfd, &path, role) {
                None
            } else {
                self.judge_one(pid, &root, dirfd, &path, role)
            };
            // The paths come in the kernel's order: a source that is not there fails
            // the call before anything is done to the others, on the host as well.
            if let Some(Verdict::HostFails(errno)) = verdict {
                self.root = Some(root);
                return errno.map_or(Answer::Continue, Answer::HostFails);
            }
            verdicts.push((verdict, path, role));
        }
        self.root = Some(root);
        // The path was read from memory the command controls: only a notification that
        // is still pending is evidence of what it asked (checked only for a refusal).
        if verdicts.iter().all(|(v, _, _)| v.is_none()) || !valid() {
            return Answer::Continue;
        }
        for (v, path, role) in verdicts {
            if let Some(Verdict::Refuse(errno, target, reason)) = v {
                let asked = String::from_utf8_lossy(&path);
                let asked = if Path::new(&*asked) == target.as_path() {
                    String::new()
                } else {
                    format!("; asked as `{asked}`")
                };
                let why = match reason {
                    Reason::Protected => "a protected path",
                    Reason::Holder => "a directory holding a protected path",
                    Reason::Outside if self.rules.read_only_mode => "read-only mode: outside the private temp dirs",
                    Reason::Outside => "outside the writable roots",
                    Reason::NoCapability => "root's permission override is dropped in the sandbox",
                };
                sink(Denial {
                    kind: DenialKind::FileWrite,
                    target: Some(target.display().to_string()),
                    evidence: format!(
                        "seccomp supervisor: {name}({}) refused with {} ({why}){asked}",
                        role_text(role),
                        errno_name(errno)
                    ),
                    line: None,
                    proxy: None,
                });
                return Answer::Refuse(errno);
            }
        }
        Answer::Continue
    }

    /// Identities that exist only in the command's view: the private temp dirs and the
    /// writable devices; and procfs's device.
    fn resolve_in_view(&self, root: &OwnedFd) -> (Vec<Id>, Option<u64>) {
        let mut ids = Vec::new();
        for p in &self.rules.write_in_view {
            let rel = p.strip_prefix("/").unwrap_or(p);
            if let Ok(fd) = openat_path(root.as_fd(), rel, libc::O_PATH) {
                if let Some(id) = id_of_fd(fd.as_fd()) {
                    ids.push(id);
                }
            }
        }
        let proc_dev = openat_path(root.as_fd(), Path::new("proc"), libc::O_PATH | libc::O_DIRECTORY)
            .ok()
            .and_then(|fd| fstat(fd.as_fd()).map(|s| s.st_dev));
        (ids, proc_dev)
    }

    fn granted(&self, id: Id) -> bool {
        self.granted.contains(&id) || self.in_view.as_ref().is_some_and(|(v, _)| v.contains(&id))
    }

    /// The fast path, taken by nearly every write of ordinary work: the directory the
    /// entry lives in (the kernel's own lookup, one `fstatat`) already has a cached
    /// verdict of "granted, not protected", and nothing else can refuse (the last
    /// component is no symbolic link to follow; for root without its permission
    /// override, the permission bits allow). Only ever answers "continue": anything
    /// else, or anything uncertain, goes through [`Self::judge_one`].
    fn plainly_allowed(&mut self, pid: u32, root: &OwnedFd, dirfd: i64, path: &[u8], role: Role) -> bool {
        if path.is_empty() || path.ends_with(b"/") || path.split(|b| *b == b'/').any(|c| c == b"..") {
            return false;
        }
        if matches!(role, Role::Open(flags) if flags & O_TMPFILE_BITS == O_TMPFILE_BITS) {
            return false;
        }
        let (parent, last) = match path.iter().rposition(|b| *b == b'/') {
            Some(i) => (&path[..i], &path[i + 1..]),
            None => (&b""[..], path),
        };
        if last.is_empty() || last == b"." {
            return false;
        }
        // The directory, as the kernel's own lookup finds it (links in the middle
        // followed: Landlock judges the directory reached).
        let rel_parent: &[u8] = parent.strip_prefix(b"/").unwrap_or(parent);
        let dir_path: Vec<u8> = if path[0] == b'/' {
            if rel_parent.is_empty() {
                b".".to_vec()
            } else {
                rel_parent.to_vec()
            }
        } else {
            let base = if dirfd == libc::AT_FDCWD as i64 {
                format!("/proc/{pid}/cwd")
            } else {
                format!("/proc/{pid}/fd/{}", dirfd as i32)
            };
            let mut p = base.into_bytes();
            if !parent.is_empty() {
                p.push(b'/');
                p.extend_from_slice(parent);
            }
            p
        };
        let at = if path[0] == b'/' { root.as_fd() } else { cwd_sentinel() };
        let Some(dir) = statx_at(at, &dir_path, true) else { return false };
        if self.in_view.as_ref().and_then(|(_, d)| *d).is_none_or(|d| d == dir.dev) {
            return false;
        }
        // Verdicts are per directory *and* mount: the same directory bind-mounted
        // elsewhere is judged there by its own path.
        let Some(v) = self.dirs.get(&((dir.dev, dir.ino), dir.mnt_id)).copied() else { return false };
        if !v.granted || v.protected {
            return false;
        }
        let follow_last = role.follows_last();
        let root_bits = self.uid == 0 && self.rules.capabilities_dropped;
        use nix::unistd::AccessFlags;
        if root_bits && dac_refuses(at, &dir_path, AccessFlags::W_OK | AccessFlags::X_OK, true) {
            return false;
        }
        let mut full = dir_path.clone();
        full.push(b'/');
        full.extend_from_slice(last);
        if let Some(st) = statx_at(at, &full, false) {
            let kind = st.mode & libc::S_IFMT;
            // The entry itself protected (a gitfile `.git`, the `.git` directory), a
            // mount point, or a link to follow: the full judgement.
            if self.protected.contains(&(st.dev, st.ino)) || st.mnt_id != dir.mnt_id || st.dev != dir.dev {
                return false;
            }
            if kind == libc::S_IFLNK && follow_last {
                return false;
            }
            if root_bits && kind == libc::S_IFREG && dac_refuses(at, &full, AccessFlags::W_OK, false) {
                return false;
            }
        } else if matches!(role, Role::Remove(_) | Role::Source(_)) {
            // Nothing to remove, rename or link: the host fails the whole call (the
            // full judgement says so, so that a rename's target is not judged).
            return false;
        }
        true
    }

    /// The verdict for one path: [`Verdict::Refuse`] when the policy refuses it and the
    /// host alone would not, [`Verdict::HostFails`] when the host alone fails the call
    /// here; `None` when the kernel may run it (or it cannot be judged with certainty).
    fn judge_one(&mut self, pid: u32, root: &OwnedFd, dirfd: i64, path: &[u8], role: Role) -> Option<Verdict> {
        if path.is_empty() {
            return None;
        }
        let mut path = path;
        match role {
            // O_PATH drops every other flag: nothing is written.
            Role::Open(flags) if flags & libc::O_PATH as u64 != 0 => return None,
            // O_TMPFILE makes an unnamed file in the directory named: judged as a new
            // entry there.
            Role::Open(flags) if flags & O_TMPFILE_BITS == O_TMPFILE_BITS => {
                let v = self.judge_one(pid, root, dirfd, &[path, b"/.cordon-tmpfile"].concat(), Role::Create);
                // The unnamed file has no name: the target is its directory.
                return v.map(|v| match v {
                    Verdict::Refuse(e, shown, why) => {
                        Verdict::Refuse(e, shown.parent().map(Path::to_path_buf).unwrap_or(shown), why)
                    }
                    other => other,
                });
            }
            // A trailing slash on a file: ENOTDIR or EISDIR from the kernel first.
            Role::Open(_) | Role::Content if path.ends_with(b"/") => return None,
            // `mkdir("d/")`, `rmdir("d/")`, `rename("a/", "b/")`: the entry itself
            // (a link there is not followed; the kernel answers EEXIST or ENOTDIR).
            Role::Create | Role::Remove(_) | Role::Replace | Role::Source(_) => {
                while path.len() > 1 && path.ends_with(b"/") {
                    path = &path[..path.len() - 1];
                }
            }
            _ => {}
        }
        // The base's own path is read only for a refusal's report (`base_link`).
        let (base, base_link) = if path[0] == b'/' {
            (None, None)
        } else {
            let link = if dirfd == libc::AT_FDCWD as i64 {
                format!("/proc/{pid}/cwd")
            } else {
                format!("/proc/{pid}/fd/{}", dirfd as i32)
            };
            (Some(open_path(&link).ok()?), Some(link))
        };
        // The shown path starts at the base's own path, so that `..` climbs out of it.
        let base_shown = match &base_link {
            Some(l) => std::fs::read_link(l).unwrap_or_default(),
            None => PathBuf::from("/"),
        };
        let follow_last = role.follows_last();
        let root_id = self.root_id?;
        let Some(r) = resolve(root, root_id, base, base_shown, path, follow_last) else {
            // A source whose directory cannot be reached fails the call in the kernel's
            // own lookup, before any other path (precision first: nothing is judged).
            return matches!(role, Role::Remove(_) | Role::Source(_)).then_some(Verdict::HostFails(None));
        };
        let proc_dev = self.in_view.as_ref().and_then(|(_, d)| *d);
        let dir_stat = fstat(r.dir.as_fd())?;
        if proc_dev.is_none_or(|d| d == dir_stat.st_dev) {
            return None;
        }
        let last = fstatat_nofollow(r.dir.as_fd(), &r.name);
        // A mount point of the protected layout (a protected path, or a directory on
        // the way to one) cannot be removed, renamed or replaced: the kernel answers
        // EBUSY, recorded here as the sandbox's refusal.
        if matches!(role, Role::Remove(_) | Role::Replace) && self.rules.mount_layer {
            if let Some(st) = &last {
                let id = (st.st_dev, st.st_ino);
                let reason = if self.protected.contains(&id) {
                    Some(Reason::Protected)
                } else if self.holders.contains(&id) || self.reopened.contains(&id) {
                    Some(Reason::Holder)
                } else {
                    None
                };
                let mount_point =
                    statx_at(r.dir.as_fd(), &r.name, false).is_some_and(|e| e.mnt_id != mount_id(r.dir.as_fd()));
                if let (Some(reason), true) = (reason, mount_point) {
                    return Some(Verdict::Refuse(libc::EBUSY, r.shown, reason));
                }
            }
        }
        // What the kernel checks, and on which object.
        enum Check {
            Entry,
            Object(libc::stat),
            MetaOnly(libc::stat),
        }
        let check = match (role, &last) {
            (Role::Open(flags), Some(st)) => {
                let writes = flags & (libc::O_WRONLY | libc::O_RDWR | libc::O_TRUNC) as u64 != 0;
                if !writes {
                    return None;
                }
                // O_NOFOLLOW on a link: ELOOP.
                if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
                    return None;
                }
                if flags & libc::O_CREAT as u64 != 0 && flags & libc::O_EXCL as u64 != 0 {
                    return None; // EEXIST
                }
                let kind = st.st_mode & libc::S_IFMT;
                if kind == libc::S_IFDIR {
                    return None; // EISDIR
                }
                Check::Object(*st)
            }
            (Role::Open(flags), None) => {
                if flags & libc::O_CREAT as u64 == 0 {
                    return None; // ENOENT
                }
                Check::Entry
            }
            (Role::Create, Some(_)) => return None, // EEXIST comes first
            (Role::Create | Role::Replace, None) => Check::Entry,
            (Role::Replace, Some(_)) => Check::Entry,
            (Role::Remove(rm), Some(st)) => {
                let dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
                // The host's own answers: EISDIR, ENOTDIR, ENOTEMPTY, and the sticky
                // bit's EPERM for an entry someone else owns.
                if (rm == Rm::File && dir) || (rm == Rm::Dir && !dir) {
                    return None;
                }
                if dir && rm == Rm::Dir && !dir_is_empty(r.dir.as_fd(), &r.name) {
                    return None;
                }
                let sticky = dir_stat.st_mode & libc::S_ISVTX != 0;
                if self.uid != 0 && sticky && st.st_uid != self.uid && dir_stat.st_uid != self.uid {
                    return None;
                }
                Check::Entry
            }
            // Removing (or renaming) nothing: the host alone answers ENOENT. A read-only
            // mount would answer EROFS first (before the lookup), so the host's answer
            // is given here; elsewhere the kernel's lookup gives it (Landlock asks only
            // once the entry is found). Never the sandbox's denial.
            (Role::Remove(_), None) => {
                let ro = self.rules.mount_layer && mount_read_only(r.dir.as_fd());
                return Some(Verdict::HostFails(ro.then_some(libc::ENOENT)));
            }
            // A link's source: nothing is written to it. Not there: the kernel's lookup
            // of it fails the call first, on the host as well.
            (Role::Source(_), Some(_)) => return None,
            (Role::Source(_), None) => return Some(Verdict::HostFails(None)),
            // truncate(dir): EISDIR.
            (Role::Content, Some(st)) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => return None,
            (Role::Content, Some(st)) => Check::Object(*st),
            // Metadata of another user's file: the host refuses a caller without
            // privileges (EPERM) whatever the sandbox says.
            (Role::Meta(_), Some(st)) if self.uid != 0 && st.st_uid != self.uid => return None,
            (Role::Meta(_), Some(st)) => Check::MetaOnly(*st),
            (Role::Content | Role::Meta(_), None) => return None,
        };
        match check {
            Check::Entry => {
                let v = self.dir_verdict(r.dir.as_fd(), dir_stat)?;
                let reason = if v.protected { Reason::Protected } else { Reason::Outside };
                // A granted directory is on a writable mount in every runner's layout
                // (the writable roots and the private temp dirs are mounted so).
                let ro = (v.protected || !v.granted) && self.rules.mount_layer && mount_read_only(r.dir.as_fd());
                let landlock_refuses = self.rules.landlock_abi.is_some() && (!v.granted || v.protected);
                if !ro && !landlock_refuses {
                    // Root without CAP_DAC_OVERRIDE: the permission bits decide.
                    if self.uid == 0
                        && self.rules.capabilities_dropped
                        && dac_refuses(
                            r.dir.as_fd(),
                            b".",
                            nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
                            true,
                        )
                    {
                        return Some(Verdict::Refuse(libc::EACCES, r.shown, Reason::NoCapability));
                    }
                    return None;
                }
                if !self.host_allows(r.dir.as_fd(), b".", true) {
                    return None;
                }
                let errno = if ro { libc::EROFS } else { libc::EACCES };
                Some(Verdict::Refuse(errno, r.shown, reason))
            }
            Check::Object(st) | Check::MetaOnly(st) => {
                let meta = matches!(check, Check::MetaOnly(_));
                // Terminals: the runners grant the ones the command inherited (and its
                // controlling terminal, /dev/tty), under names this judge does not see
                // (a new devpts inside bubblewrap, which also shows the terminal as
                // /dev/console): known by device number.
                let tty = st.st_mode & libc::S_IFMT == libc::S_IFCHR
                    && (st.st_rdev == libc::makedev(5, 0) || self.rules.terminals.contains(&st.st_rdev));
                if tty {
                    return None;
                }
                let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
                // Beneath a granted, unprotected directory the mount is writable (see
                // the entry case): only elsewhere is the object's own mount asked.
                let dv = self.dir_verdict(r.dir.as_fd(), dir_stat)?;
                let plain = dv.granted && !dv.protected && !self.protected.contains(&(st.st_dev, st.st_ino));
                let ro = !plain && self.rules.mount_layer && (regular || meta) && {
                    let obj = openat_name(r.dir.as_fd(), &r.name, libc::O_PATH | libc::O_NOFOLLOW).ok()?;
                    mount_read_only(obj.as_fd())
                };
                let v = if meta { None } else { Some(self.object_verdict(&st, r.dir.as_fd(), dir_stat)?) };
                let landlock_refuses =
                    !meta && self.rules.landlock_abi.is_some() && v.is_some_and(|v| !v.granted || v.protected);
                if !ro && !landlock_refuses {
                    if !meta
                        && regular
                        && self.uid == 0
                        && self.rules.capabilities_dropped
                        && dac_refuses(r.dir.as_fd(), &r.name, nix::unistd::AccessFlags::W_OK, false)
                    {
                        return Some(Verdict::Refuse(libc::EACCES, r.shown, Reason::NoCapability));
                    }
                    return None;
                }
                if !self.host_allows(r.dir.as_fd(), &r.name, false) {
                    return None;
                }
                let protected = v.is_some_and(|v| v.protected) || self.dir_verdict(r.dir.as_fd(), dir_stat)?.protected;
                let reason = if protected { Reason::Protected } else { Reason::Outside };
                let errno = if ro { libc::EROFS } else { libc::EACCES };
                Some(Verdict::Refuse(errno, r.shown, reason))
            }
        }
    }

    /// The verdict for an existing object: a rule on the object itself, else its
    /// directory's.
    fn object_verdict(&mut self, st: &libc::stat, dir: BorrowedFd<'_>, dir_stat: libc::stat) -> Option<DirVerdict> {
        let id = (st.st_dev, st.st_ino);
        if self.reopened.contains(&id) {
            return Some(DirVerdict { granted: true, protected: false });
        }
        if self.protected.contains(&id) {
            return Some(DirVerdict { granted: true, protected: true });
        }
        if self.granted(id) {
            return Some(DirVerdict { granted: true, protected: false });
        }
        self.dir_verdict(dir, dir_stat)
    }

    /// Walk up from `dir` (in the command's view) to the first directory that carries a
    /// write rule or is protected; cached by identity.
    fn dir_verdict(&mut self, dir: BorrowedFd<'_>, st: libc::stat) -> Option<DirVerdict> {
        let key = ((st.st_dev, st.st_ino), mount_id(dir));
        if let Some(v) = self.dirs.get(&key) {
            return Some(*v);
        }
        let mut cur: OwnedFd = dup(dir)?;
        let mut cur_id = (st.st_dev, st.st_ino);
        let mut verdict = DirVerdict { granted: false, protected: false };
        for _ in 0..4096 {
            if self.reopened.contains(&cur_id) {
                verdict.granted = true;
                break;
            }
            if self.protected.contains(&cur_id) {
                verdict = DirVerdict { granted: true, protected: true };
                break;
            }
            if self.granted(cur_id) {
                verdict.granted = true;
                break;
            }
            let parent = openat_name(cur.as_fd(), b"..", libc::O_PATH | libc::O_DIRECTORY).ok()?;
            let pst = fstat(parent.as_fd())?;
            let pid = (pst.st_dev, pst.st_ino);
            if pid == cur_id {
                break; // the root
            }
            cur = parent;
            cur_id = pid;
        }
        // Bounded: a command making millions of directories must not grow cordon.
        if self.dirs.len() >= MAX_CACHED_DIRS {
            self.dirs.clear();
        }
        self.dirs.insert(key, verdict);
        Some(verdict)
    }

    /// Whether the caller's identity alone may make entries in a directory.
    /// Whether the caller's identity alone may write `name` in `dir` (`dir_entry`:
    /// make or remove entries in the directory itself). Root may; another caller is
    /// asked of the kernel (mode bits and ACLs; this thread has the caller's
    /// credentials, and a read-only mount's answer is not a permission refusal).
    fn host_allows(&self, dir: BorrowedFd<'_>, name: &[u8], dir_entry: bool) -> bool {
        use nix::unistd::AccessFlags;
        let mode = if dir_entry { AccessFlags::W_OK | AccessFlags::X_OK } else { AccessFlags::W_OK };
        self.uid == 0 || !dac_refuses(dir, name, mode, dir_entry)
    }
}
