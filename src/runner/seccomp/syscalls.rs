//! The syscall names the profiles may use, and their numbers on this architecture.

/// Syscalls that exist only on some architectures: absent elsewhere, so nothing to
/// refuse there.
pub(super) const ARCH_SPECIFIC: [&str; 18] = [
    "ioperm",
    "iopl",
    "renameat",
    "open",
    "creat",
    "mkdir",
    "mknod",
    "unlink",
    "rmdir",
    "rename",
    "link",
    "symlink",
    "chmod",
    "chown",
    "lchown",
    "utime",
    "utimes",
    "futimesat",
];

/// The number of a syscall the profile may name.
pub fn syscall_number(name: &str) -> Option<i64> {
    Some(match name {
        "acct" => libc::SYS_acct,
        "add_key" => libc::SYS_add_key,
        "bind" => libc::SYS_bind,
        "bpf" => libc::SYS_bpf,
        "chroot" => libc::SYS_chroot,
        "clock_adjtime" => libc::SYS_clock_adjtime,
        "clock_settime" => libc::SYS_clock_settime,
        "clone" => libc::SYS_clone,
        "clone3" => libc::SYS_clone3,
        "connect" => libc::SYS_connect,
        "delete_module" => libc::SYS_delete_module,
        "finit_module" => libc::SYS_finit_module,
        "fsconfig" => libc::SYS_fsconfig,
        "fsmount" => libc::SYS_fsmount,
        "fsopen" => libc::SYS_fsopen,
        "fspick" => libc::SYS_fspick,
        "init_module" => libc::SYS_init_module,
        "io_uring_enter" => libc::SYS_io_uring_enter,
        "io_uring_register" => libc::SYS_io_uring_register,
        "io_uring_setup" => libc::SYS_io_uring_setup,
        "ioctl" => libc::SYS_ioctl,
        #[cfg(target_arch = "x86_64")]
        "ioperm" => libc::SYS_ioperm,
        #[cfg(target_arch = "x86_64")]
        "iopl" => libc::SYS_iopl,
        "kcmp" => libc::SYS_kcmp,
        "kexec_file_load" => libc::SYS_kexec_file_load,
        "kexec_load" => libc::SYS_kexec_load,
        "keyctl" => libc::SYS_keyctl,
        "mount" => libc::SYS_mount,
        "mount_setattr" => libc::SYS_mount_setattr,
        "move_mount" => libc::SYS_move_mount,
        "open_by_handle_at" => libc::SYS_open_by_handle_at,
        "open_tree" => libc::SYS_open_tree,
        "perf_event_open" => libc::SYS_perf_event_open,
        "personality" => libc::SYS_personality,
        "pidfd_getfd" => libc::SYS_pidfd_getfd,
        "pivot_root" => libc::SYS_pivot_root,
        "prlimit64" => libc::SYS_prlimit64,
        "setpriority" => libc::SYS_setpriority,
        "ioprio_set" => libc::SYS_ioprio_set,
        "sched_setscheduler" => libc::SYS_sched_setscheduler,
        "sched_setparam" => libc::SYS_sched_setparam,
        "sched_setattr" => libc::SYS_sched_setattr,
        "process_vm_readv" => libc::SYS_process_vm_readv,
        "process_vm_writev" => libc::SYS_process_vm_writev,
        "ptrace" => libc::SYS_ptrace,
        "quotactl" => libc::SYS_quotactl,
        "reboot" => libc::SYS_reboot,
        "request_key" => libc::SYS_request_key,
        "setns" => libc::SYS_setns,
        "settimeofday" => libc::SYS_settimeofday,
        "socket" => libc::SYS_socket,
        "socketpair" => libc::SYS_socketpair,
        "swapoff" => libc::SYS_swapoff,
        "swapon" => libc::SYS_swapon,
        "umount2" => libc::SYS_umount2,
        "unshare" => libc::SYS_unshare,
        "userfaultfd" => libc::SYS_userfaultfd,
        "memfd_secret" => libc::SYS_memfd_secret,
        "listen" => libc::SYS_listen,
        "sendto" => libc::SYS_sendto,
        "sendmsg" => libc::SYS_sendmsg,
        "sendmmsg" => libc::SYS_sendmmsg,
        "vhangup" => libc::SYS_vhangup,
        #[cfg(target_arch = "x86_64")]
        "open" => libc::SYS_open,
        #[cfg(target_arch = "x86_64")]
        "creat" => libc::SYS_creat,
        #[cfg(target_arch = "x86_64")]
        "mkdir" => libc::SYS_mkdir,
        #[cfg(target_arch = "x86_64")]
        "mknod" => libc::SYS_mknod,
        #[cfg(target_arch = "x86_64")]
        "unlink" => libc::SYS_unlink,
        #[cfg(target_arch = "x86_64")]
        "rmdir" => libc::SYS_rmdir,
        #[cfg(target_arch = "x86_64")]
        "rename" => libc::SYS_rename,
        #[cfg(target_arch = "x86_64")]
        "link" => libc::SYS_link,
        #[cfg(target_arch = "x86_64")]
        "symlink" => libc::SYS_symlink,
        #[cfg(target_arch = "x86_64")]
        "chmod" => libc::SYS_chmod,
        #[cfg(target_arch = "x86_64")]
        "chown" => libc::SYS_chown,
        #[cfg(target_arch = "x86_64")]
        "lchown" => libc::SYS_lchown,
        #[cfg(target_arch = "x86_64")]
        "utime" => libc::SYS_utime,
        #[cfg(target_arch = "x86_64")]
        "utimes" => libc::SYS_utimes,
        #[cfg(target_arch = "x86_64")]
        "futimesat" => libc::SYS_futimesat,
        "openat" => libc::SYS_openat,
        "openat2" => libc::SYS_openat2,
        "mkdirat" => libc::SYS_mkdirat,
        "mknodat" => libc::SYS_mknodat,
        "unlinkat" => libc::SYS_unlinkat,
        #[cfg(target_arch = "x86_64")]
        "renameat" => libc::SYS_renameat,
        "renameat2" => libc::SYS_renameat2,
        "linkat" => libc::SYS_linkat,
        "symlinkat" => libc::SYS_symlinkat,
        "truncate" => libc::SYS_truncate,
        "fchmodat" => libc::SYS_fchmodat,
        "fchmodat2" => libc::SYS_fchmodat2,
        "fchownat" => libc::SYS_fchownat,
        "utimensat" => libc::SYS_utimensat,
        "setxattr" => libc::SYS_setxattr,
        "lsetxattr" => libc::SYS_lsetxattr,
        "removexattr" => libc::SYS_removexattr,
        "lremovexattr" => libc::SYS_lremovexattr,
        _ => return None,
    })
}
