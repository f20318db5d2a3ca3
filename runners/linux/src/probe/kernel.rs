//! Kernel surfaces a confined command must not reach: keyrings, mounts and the mount
//! API, namespaces, SysV and POSIX IPC, `bpf`, `perf_event_open`, `userfaultfd`,
//! `io_uring`, the host and domain names.

use super::{cvt, own_fd};
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// `KEY_SPEC_USER_KEYRING`: the caller's user keyring (shared by every process of
/// the uid, in and out of the sandbox unless something separates them).
pub const USER_KEYRING: i32 = -4;
/// `KEY_SPEC_SESSION_KEYRING`.
pub const SESSION_KEYRING: i32 = -3;

/// `add_key("user", desc, payload, keyring)`: the new key's serial.
pub fn add_key(desc: &CStr, payload: &[u8], keyring: i32) -> io::Result<i32> {
    // SAFETY: NUL-terminated type and description; `payload` valid for its length.
    let r = unsafe {
        libc::syscall(libc::SYS_add_key, c"user".as_ptr(), desc.as_ptr(), payload.as_ptr(), payload.len(), keyring)
    };
    i32::try_from(cvt(r)?).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `keyctl(KEYCTL_SEARCH, keyring, "user", desc, 0)`: a key's serial.
pub fn key_search(keyring: i32, desc: &CStr) -> io::Result<i32> {
    const KEYCTL_SEARCH: i32 = 10;
    // SAFETY: NUL-terminated type and description.
    let r = unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_SEARCH, keyring, c"user".as_ptr(), desc.as_ptr(), 0) };
    i32::try_from(cvt(r)?).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `keyctl(KEYCTL_READ, key)`: the payload (at most 4 KiB).
pub fn key_read(key: i32) -> io::Result<Vec<u8>> {
    const KEYCTL_READ: i32 = 11;
    let mut buf = vec![0u8; 4096];
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    let n = unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_READ, key, buf.as_mut_ptr(), buf.len()) };
    let n = usize::try_from(cvt(n)?).unwrap_or(0);
    buf.truncate(n.min(4096));
    Ok(buf)
}

/// `keyctl(KEYCTL_INVALIDATE, key)`.
pub fn key_invalidate(key: i32) -> io::Result<()> {
    const KEYCTL_INVALIDATE: i32 = 21;
    // SAFETY: integer arguments.
    cvt(unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_INVALIDATE, key) }).map(drop)
}

/// `keyctl(KEYCTL_JOIN_SESSION_KEYRING, name)`: join (or create) a named session keyring.
pub fn key_join_session(name: &CStr) -> io::Result<i32> {
    const KEYCTL_JOIN_SESSION_KEYRING: i32 = 1;
    // SAFETY: a NUL-terminated name.
    let r = unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, name.as_ptr()) };
    i32::try_from(cvt(r)?).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `mount(source, target, fstype, flags, data)`.
pub fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> io::Result<()> {
    let p = |c: Option<&CStr>| c.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: NUL-terminated strings or null pointers.
    let r = unsafe { libc::mount(p(source), target.as_ptr(), p(fstype), flags, p(data).cast()) };
    cvt(r.into()).map(drop)
}

/// `umount2(target, flags)`.
pub fn umount(target: &CStr, flags: i32) -> io::Result<()> {
    // SAFETY: a NUL-terminated path.
    cvt(unsafe { libc::umount2(target.as_ptr(), flags) }.into()).map(drop)
}

/// `fsopen(fstype, 0)`: a file-system context of the new mount API.
pub fn fsopen(fstype: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name.
    own_fd(unsafe { libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), 0) })
}

/// `open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | AT_RECURSIVE)`: a detached copy of
/// the mount tree at `path`.
pub fn open_tree_clone(path: &CStr) -> io::Result<OwnedFd> {
    const OPEN_TREE_CLONE: u32 = 1;
    let flags = OPEN_TREE_CLONE | libc::AT_RECURSIVE as u32 | libc::O_CLOEXEC as u32;
    // SAFETY: a NUL-terminated path.
    own_fd(unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) })
}

/// `mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, {attr_clr})`: clears mount
/// attributes (such as `MOUNT_ATTR_RDONLY`) on a detached or attached tree.
pub fn mount_clear_attr(fd: BorrowedFd<'_>, clear: u64) -> io::Result<()> {
    let attr = crate::sys::MountAttr { attr_set: 0, attr_clr: clear, propagation: 0, userns_fd: 0 };
    let flags = (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as u32;
    // SAFETY: an empty path with AT_EMPTY_PATH and a local attribute struct whose size
    // is passed.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &attr as *const crate::sys::MountAttr,
            std::mem::size_of::<crate::sys::MountAttr>(),
        )
    })
    .map(drop)
}

/// `move_mount(fd, "", AT_FDCWD, to, MOVE_MOUNT_F_EMPTY_PATH)`: attaches a detached tree.
pub fn move_mount(fd: BorrowedFd<'_>, to: &CStr) -> io::Result<()> {
    const MOVE_MOUNT_F_EMPTY_PATH: u32 = 4;
    // SAFETY: an empty source path with F_EMPTY_PATH and a NUL-terminated target.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// `chroot(path)`.
pub fn chroot(path: &CStr) -> io::Result<()> {
    // SAFETY: a NUL-terminated path.
    cvt(unsafe { libc::chroot(path.as_ptr()) }.into()).map(drop)
}

/// `unshare(flags)`.
pub fn unshare(flags: i32) -> io::Result<()> {
    // SAFETY: unshare takes integers.
    cvt(unsafe { libc::unshare(flags) }.into()).map(drop)
}

/// `setns(fd, nstype)`.
pub fn setns(fd: BorrowedFd<'_>, nstype: i32) -> io::Result<()> {
    // SAFETY: setns takes an fd and an integer.
    cvt(unsafe { libc::setns(fd.as_raw_fd(), nstype) }.into()).map(drop)
}

/// `sethostname(name)`.
pub fn set_hostname(name: &[u8]) -> io::Result<()> {
    // SAFETY: `name` is valid for its length.
    cvt(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) }.into()).map(drop)
}

/// `setdomainname(name)`.
pub fn set_domainname(name: &[u8]) -> io::Result<()> {
    // SAFETY: `name` is valid for its length.
    cvt(unsafe { libc::setdomainname(name.as_ptr().cast(), name.len()) }.into()).map(drop)
}

/// `shmget(key, size, flags)`: a SysV shared-memory segment's id.
pub fn shm_get(key: i32, size: usize, flags: i32) -> io::Result<i32> {
    // SAFETY: shmget takes integers.
    let id = unsafe { libc::shmget(key, size, flags) };
    cvt(id.into()).map(|_| id)
}

/// Attaches segment `id` read-only and copies its first `len` bytes.
pub fn shm_read(id: i32, len: usize) -> io::Result<Vec<u8>> {
    let mut ds = std::mem::MaybeUninit::<libc::shmid_ds>::zeroed();
    // SAFETY: IPC_STAT writes into the local struct.
    cvt(unsafe { libc::shmctl(id, libc::IPC_STAT, ds.as_mut_ptr()) }.into())?;
    // SAFETY: the kernel initialised it (IPC_STAT succeeded).
    let size = unsafe { ds.assume_init() }.shm_segsz;
    // SAFETY: attach read-only at an address the kernel picks.
    let p = unsafe { libc::shmat(id, std::ptr::null(), libc::SHM_RDONLY) };
    if p as isize == -1 {
        return Err(io::Error::last_os_error());
    }
    let n = len.min(size);
    // SAFETY: the mapping is at least `size` bytes long and readable; detached below.
    let out = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) }.to_vec();
    // SAFETY: `p` is the address shmat returned.
    unsafe { libc::shmdt(p) };
    Ok(out)
}

/// Attaches segment `id` read-write and copies `data` to its start (at most its size).
pub fn shm_write(id: i32, data: &[u8]) -> io::Result<()> {
    let mut ds = std::mem::MaybeUninit::<libc::shmid_ds>::zeroed();
    // SAFETY: IPC_STAT writes into the local struct.
    cvt(unsafe { libc::shmctl(id, libc::IPC_STAT, ds.as_mut_ptr()) }.into())?;
    // SAFETY: the kernel initialised it (IPC_STAT succeeded).
    let size = unsafe { ds.assume_init() }.shm_segsz;
    // SAFETY: attach read-write at an address the kernel picks.
    let p = unsafe { libc::shmat(id, std::ptr::null(), 0) };
    if p as isize == -1 {
        return Err(io::Error::last_os_error());
    }
    let n = data.len().min(size);
    // SAFETY: the mapping is at least `size` bytes long and writable; `data` does not
    // overlap it; detached below.
    unsafe {
        std::ptr::copy_nonoverlapping(data.as_ptr(), p.cast::<u8>(), n);
        libc::shmdt(p);
    }
    Ok(())
}

/// `shmctl(id, IPC_RMID)`.
pub fn shm_remove(id: i32) -> io::Result<()> {
    // SAFETY: IPC_RMID takes no buffer.
    cvt(unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) }.into()).map(drop)
}

/// `msgget(key, flags)`.
pub fn msg_get(key: i32, flags: i32) -> io::Result<i32> {
    // SAFETY: msgget takes integers.
    let id = unsafe { libc::msgget(key, flags) };
    cvt(id.into()).map(|_| id)
}

/// `msgctl(id, IPC_RMID)`.
pub fn msg_remove(id: i32) -> io::Result<()> {
    // SAFETY: IPC_RMID takes no buffer.
    cvt(unsafe { libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()) }.into()).map(drop)
}

/// `semget(key, 1, flags)`.
pub fn sem_get(key: i32, flags: i32) -> io::Result<i32> {
    // SAFETY: semget takes integers.
    let id = unsafe { libc::semget(key, 1, flags) };
    cvt(id.into()).map(|_| id)
}

/// `semctl(id, 0, IPC_RMID)`.
pub fn sem_remove(id: i32) -> io::Result<()> {
    // SAFETY: IPC_RMID takes no further argument.
    cvt(unsafe { libc::semctl(id, 0, libc::IPC_RMID) }.into()).map(drop)
}

/// `mq_open(name, flags, 0600, NULL)`; the queue descriptor is a file descriptor on
/// Linux.
pub fn mq_open(name: &CStr, flags: i32) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name; the variadic mode and a null attribute pointer
    // are read only with O_CREAT.
    own_fd(
        unsafe {
            libc::mq_open(
                name.as_ptr(),
                flags | libc::O_CLOEXEC,
                0o600 as libc::mode_t,
                std::ptr::null::<libc::mq_attr>(),
            )
        }
        .into(),
    )
}

/// `mq_unlink(name)`.
pub fn mq_unlink(name: &CStr) -> io::Result<()> {
    // SAFETY: a NUL-terminated name.
    cvt(unsafe { libc::mq_unlink(name.as_ptr()) }.into()).map(drop)
}

/// `bpf(BPF_MAP_CREATE)` of a one-entry array map.
pub fn bpf_map_create() -> io::Result<OwnedFd> {
    const BPF_MAP_CREATE: i32 = 0;
    const BPF_MAP_TYPE_ARRAY: u32 = 2;
    // The head of `union bpf_attr` for BPF_MAP_CREATE, padded to the size the kernel
    // accepts (it requires the unused tail to be zero).
    let mut attr = [0u32; 32];
    attr[0] = BPF_MAP_TYPE_ARRAY;
    attr[1] = 4; // key_size
    attr[2] = 4; // value_size
    attr[3] = 1; // max_entries
                 // SAFETY: the kernel reads the local attribute buffer of the size passed.
    own_fd(unsafe { libc::syscall(libc::SYS_bpf, BPF_MAP_CREATE, attr.as_ptr(), std::mem::size_of_val(&attr)) })
}

/// `perf_event_open` of a software task-clock counter on this process.
pub fn perf_event_open_self() -> io::Result<OwnedFd> {
    // `struct perf_event_attr` (PERF_ATTR_SIZE_VER0 is 64 bytes; the kernel accepts
    // larger zero-padded structs): type, size, config, then the flag bits.
    let mut attr = [0u64; 16];
    const PERF_TYPE_SOFTWARE: u64 = 1;
    const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
    let size = std::mem::size_of_val(&attr) as u64;
    attr[0] = PERF_TYPE_SOFTWARE | (size << 32);
    attr[1] = PERF_COUNT_SW_TASK_CLOCK;
    // flags word (offset 40): disabled (bit 0), exclude_kernel (bit 5), exclude_hv (bit 6).
    attr[5] = 1 | (1 << 5) | (1 << 6);
    // SAFETY: the kernel reads the local attribute buffer; pid 0 (self), cpu -1.
    own_fd(unsafe { libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), 0, -1, -1, 0) })
}

/// `userfaultfd(O_CLOEXEC | UFFD_USER_MODE_ONLY)`.
pub fn userfaultfd() -> io::Result<OwnedFd> {
    const UFFD_USER_MODE_ONLY: i32 = 1;
    // SAFETY: integer flags.
    own_fd(unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | UFFD_USER_MODE_ONLY) })
}

/// `io_uring_setup(4, params)`: an io_uring instance (rings not mapped).
pub fn io_uring_setup() -> io::Result<OwnedFd> {
    // `struct io_uring_params` is 120 bytes; zero asks for the defaults.
    let mut params = [0u64; 15];
    // SAFETY: the kernel reads and writes the local params buffer (120 bytes).
    own_fd(unsafe { libc::syscall(libc::SYS_io_uring_setup, 4, params.as_mut_ptr()) })
}
