//! The path arguments of each write-intent syscall and what the syscall does with them
//! (its [`Role`]), read from the notification (and, for `openat2`, the task's memory).

/// What a removal removes (the kernel's own errors come first for the wrong kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rm {
    /// `unlink`: anything but a directory.
    File,
    /// `rmdir` (`AT_REMOVEDIR`): an empty directory.
    Dir,
    /// A rename's source: either.
    Any,
}

/// One path argument of a syscall, and what the syscall does with it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Role {
    /// Opened with these flags (`O_CREAT` may create the last component).
    Open(u64),
    /// A new entry is made in its directory (mkdir, mknod, link/symlink/rename target).
    Create,
    /// The entry is removed from its directory (unlink, rmdir, rename source).
    Remove(Rm),
    /// A rename's destination: a new entry, or an existing one replaced.
    Replace,
    /// The object's content changes (truncate).
    Content,
    /// The object's metadata changes (chmod, chown, utimes, xattrs); `true`: the link
    /// itself (no following).
    Meta(bool),
    /// A hard link's existing file: nothing is written to it, but a source that does
    /// not exist fails the call first; `true`: a symbolic link there is followed.
    Source(bool),
}

impl Role {
    /// Whether the kernel follows a symbolic link in the last component for this use.
    pub(super) fn follows_last(self) -> bool {
        match self {
            Role::Open(flags) => flags & (libc::O_NOFOLLOW | libc::O_EXCL) as u64 == 0,
            Role::Content => true,
            Role::Meta(nofollow) => !nofollow,
            Role::Source(follow) => follow,
            Role::Create | Role::Remove(_) | Role::Replace => false,
        }
    }
}

/// The path arguments of a write-intent syscall: (dirfd, pointer, role).
pub(super) fn path_args(name: &str, a: [u64; 6], pid: u32) -> Option<Vec<(i64, u64, Role)>> {
    let cwd = libc::AT_FDCWD as i64;
    let fd = |x: u64| x as i32 as i64;
    Some(match name {
        "open" => vec![(cwd, a[0], Role::Open(a[1]))],
        "openat" => vec![(fd(a[0]), a[1], Role::Open(a[2]))],
        "openat2" => {
            // struct open_how { u64 flags; u64 mode; u64 resolve; } of size a[3]. With
            // RESOLVE_* flags (or a size the kernel refuses) the kernel resolves
            // differently or fails first: not judged.
            if a[3] < 24 || a[3] > 4096 {
                return None;
            }
            let mut how = [0u8; 24];
            if crate::tracee::read_task_memory(pid, a[2], &mut how)? != 24 {
                return None;
            }
            let word = |i: usize| u64::from_ne_bytes(how[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
            if word(2) != 0 {
                return None;
            }
            vec![(fd(a[0]), a[1], Role::Open(word(0)))]
        }
        "creat" => vec![(cwd, a[0], Role::Open((libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64))],
        "mkdir" | "mknod" => vec![(cwd, a[0], Role::Create)],
        "mkdirat" | "mknodat" => vec![(fd(a[0]), a[1], Role::Create)],
        "unlink" => vec![(cwd, a[0], Role::Remove(Rm::File))],
        "rmdir" => vec![(cwd, a[0], Role::Remove(Rm::Dir))],
        "unlinkat" => {
            let rm = if a[2] & libc::AT_REMOVEDIR as u64 != 0 { Rm::Dir } else { Rm::File };
            vec![(fd(a[0]), a[1], Role::Remove(rm))]
        }
        "rename" => vec![(cwd, a[0], Role::Remove(Rm::Any)), (cwd, a[1], Role::Replace)],
        "renameat" | "renameat2" => vec![(fd(a[0]), a[1], Role::Remove(Rm::Any)), (fd(a[2]), a[3], Role::Replace)],
        "link" => vec![(cwd, a[0], Role::Source(false)), (cwd, a[1], Role::Create)],
        "linkat" => {
            let new = (fd(a[2]), a[3], Role::Create);
            // AT_EMPTY_PATH: the source is the descriptor itself.
            if a[4] & libc::AT_EMPTY_PATH as u64 != 0 {
                vec![new]
            } else {
                vec![(fd(a[0]), a[1], Role::Source(a[4] & libc::AT_SYMLINK_FOLLOW as u64 != 0)), new]
            }
        }
        "symlink" => vec![(cwd, a[1], Role::Create)],
        "symlinkat" => vec![(fd(a[1]), a[2], Role::Create)],
        "truncate" => vec![(cwd, a[0], Role::Content)],
        "chmod" | "chown" | "utime" | "utimes" | "setxattr" | "removexattr" => vec![(cwd, a[0], Role::Meta(false))],
        "lchown" | "lsetxattr" | "lremovexattr" => vec![(cwd, a[0], Role::Meta(true))],
        "fchmodat" | "futimesat" => vec![(fd(a[0]), a[1], Role::Meta(false))],
        "fchmodat2" => vec![(fd(a[0]), a[1], Role::Meta(a[3] & libc::AT_SYMLINK_NOFOLLOW as u64 != 0))],
        "fchownat" => {
            if a[4] & libc::AT_EMPTY_PATH as u64 != 0 {
                return None;
            }
            vec![(fd(a[0]), a[1], Role::Meta(a[4] & libc::AT_SYMLINK_NOFOLLOW as u64 != 0))]
        }
        "utimensat" => {
            if a[1] == 0 {
                return None; // the descriptor itself
            }
            vec![(fd(a[0]), a[1], Role::Meta(a[3] & libc::AT_SYMLINK_NOFOLLOW as u64 != 0))]
        }
        _ => return None,
    })
}

pub(super) fn role_text(role: Role) -> String {
    match role {
        Role::Open(flags) => {
            let mut v = Vec::new();
            match flags & libc::O_ACCMODE as u64 {
                1 => v.push("O_WRONLY"),
                2 => v.push("O_RDWR"),
                _ => v.push("O_RDONLY"),
            }
            if flags & libc::O_CREAT as u64 != 0 {
                v.push("O_CREAT");
            }
            if flags & libc::O_TRUNC as u64 != 0 {
                v.push("O_TRUNC");
            }
            v.join("|")
        }
        Role::Create => "new entry".into(),
        Role::Remove(_) => "removal".into(),
        Role::Replace => "new or replaced entry".into(),
        Role::Content => "content".into(),
        Role::Meta(_) => "metadata".into(),
        Role::Source(_) => "link source".into(),
    }
}

pub(super) fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EROFS => "EROFS",
        libc::EACCES => "EACCES",
        _ => "an error",
    }
}
