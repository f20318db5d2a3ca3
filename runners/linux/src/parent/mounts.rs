//! One mount without `/proc/self/mountinfo`: `statx` of its mount point for the mount
//! id, then `statmount(2)` (Linux 6.8) for that mount's type, root and options. The
//! kernel formats every mount of the namespace for a `mountinfo` read; cordon's cgroup
//! layout asks about the two or three mounts it uses (`cordon::limits`). `None` on any
//! doubt (an older kernel, a path that is not a mount's root): the caller reads
//! `mountinfo` then.

use std::ffi::CString;
use std::path::PathBuf;

/// `statmount`'s number: the same in every architecture's unified system call table.
const SYS_STATMOUNT: libc::c_long = 457;
/// `struct mnt_id_req` as first published (`MNT_ID_REQ_SIZE_VER0`, 24 bytes).
#[repr(C)]
struct MntIdReq {
    size: u32,
    spare: u32,
    mnt_id: u64,
    param: u64,
}
const MNT_ID_REQ_SIZE_VER0: u32 = 24;
const _: () = assert!(std::mem::size_of::<MntIdReq>() == MNT_ID_REQ_SIZE_VER0 as usize);
const STATMOUNT_MNT_ROOT: u64 = 0x08;
const STATMOUNT_MNT_POINT: u64 = 0x10;
const STATMOUNT_FS_TYPE: u64 = 0x20;
const STATMOUNT_MNT_OPTS: u64 = 0x80;
/// `sizeof(struct statmount)`, where its string area (`str[]`) starts: fixed at 512
/// bytes since 6.8 (new fields take spare room).
const HEADER: usize = 512;
// Offsets in `struct statmount` of the fields read.
const OFF_MNT_OPTS: usize = 4;
const OFF_MASK: usize = 8;
const OFF_FS_TYPE: usize = 36;
const OFF_MNT_ROOT: usize = 104;
const OFF_MNT_POINT: usize = 108;

/// One mount, as `mountinfo` would show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The file system type (`cgroup`, `cgroup2`, `tmpfs`).
    pub fs_type: String,
    /// The mount's root within its file system (`mountinfo`'s 4th field).
    pub root: String,
    /// Where it is mounted, as seen from cordon's root.
    pub point: PathBuf,
    /// The super block's options (for a v1 cgroup: its controllers), comma separated.
    pub opts: String,
}

/// The mount whose root is `path` (symlinks followed), or `None` when `path` is not a
/// mount's root or the kernel cannot say (no `statmount`, no unique mount ids).
pub fn mount_at(path: &str) -> Option<Mount> {
    let cpath = CString::new(path).ok()?;
    // SAFETY: an all-zero `statx` is a valid value (plain integers).
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a valid NUL-terminated path and a `statx` the kernel fills.
    let r = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            cpath.as_ptr(),
            libc::AT_NO_AUTOMOUNT | libc::AT_STATX_DONT_SYNC,
            libc::STATX_MNT_ID_UNIQUE,
            &mut stx,
        )
    };
    let mount_root = libc::STATX_ATTR_MOUNT_ROOT as u64;
    if r != 0
        || stx.stx_mask & libc::STATX_MNT_ID_UNIQUE == 0
        || stx.stx_attributes_mask & mount_root == 0
        || stx.stx_attributes & mount_root == 0
    {
        return None;
    }
    let req = MntIdReq {
        size: MNT_ID_REQ_SIZE_VER0,
        spare: 0,
        mnt_id: stx.stx_mnt_id,
        param: STATMOUNT_MNT_ROOT | STATMOUNT_MNT_POINT | STATMOUNT_FS_TYPE | STATMOUNT_MNT_OPTS,
    };
    // 8-byte aligned, room for the header and the four short strings (a mount point
    // longer than this fails with EOVERFLOW: then `mountinfo` answers).
    let mut buf = [0u64; 512];
    // SAFETY: `req` is a valid request and `buf` is writable for the size given.
    let r = unsafe {
        libc::syscall(SYS_STATMOUNT, &req as *const MntIdReq, buf.as_mut_ptr(), std::mem::size_of_val(&buf), 0u32)
    };
    if r != 0 {
        return None;
    }
    // SAFETY: the u64 array viewed as its bytes.
    let bytes: &[u8] = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), std::mem::size_of_val(&buf)) };
    parse(bytes)
}

/// The fields of a filled `struct statmount` (pure): type, root and point must all be
/// there; options may be absent (a mount without any).
fn parse(buf: &[u8]) -> Option<Mount> {
    let u32_at = |off: usize| -> Option<u32> { Some(u32::from_ne_bytes(buf.get(off..off + 4)?.try_into().ok()?)) };
    let mask = u64::from_ne_bytes(buf.get(OFF_MASK..OFF_MASK + 8)?.try_into().ok()?);
    let string = |off: usize| -> Option<String> {
        let start = HEADER + u32_at(off)? as usize;
        let rest = buf.get(start..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        String::from_utf8(rest[..end].to_vec()).ok()
    };
    let wanted = STATMOUNT_MNT_ROOT | STATMOUNT_MNT_POINT | STATMOUNT_FS_TYPE;
    if mask & wanted != wanted {
        return None;
    }
    Some(Mount {
        fs_type: string(OFF_FS_TYPE)?,
        root: string(OFF_MNT_ROOT)?,
        point: PathBuf::from(string(OFF_MNT_POINT)?),
        opts: if mask & STATMOUNT_MNT_OPTS != 0 { string(OFF_MNT_OPTS)? } else { String::new() },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reads_the_strings_at_their_offsets_and_requires_type_root_and_point() {
        let mut buf = vec![0u8; HEADER + 64];
        let put32 = |b: &mut Vec<u8>, off: usize, v: u32| b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        let strings = b"cgroup\0/\0/sys/fs/cgroup/memory\0rw,memory\0";
        buf[HEADER..HEADER + strings.len()].copy_from_slice(strings);
        put32(&mut buf, OFF_FS_TYPE, 0);
        put32(&mut buf, OFF_MNT_ROOT, 7);
        put32(&mut buf, OFF_MNT_POINT, 9);
        put32(&mut buf, OFF_MNT_OPTS, 31);
        let all = STATMOUNT_MNT_ROOT | STATMOUNT_MNT_POINT | STATMOUNT_FS_TYPE | STATMOUNT_MNT_OPTS;
        buf[OFF_MASK..OFF_MASK + 8].copy_from_slice(&all.to_ne_bytes());
        let m = parse(&buf).unwrap();
        assert_eq!(m.fs_type, "cgroup");
        assert_eq!(m.root, "/");
        assert_eq!(m.point, PathBuf::from("/sys/fs/cgroup/memory"));
        assert_eq!(m.opts, "rw,memory");
        // Options not given: empty. The mount point not given: no answer.
        buf[OFF_MASK..OFF_MASK + 8].copy_from_slice(&(all & !STATMOUNT_MNT_OPTS).to_ne_bytes());
        assert_eq!(parse(&buf).unwrap().opts, "");
        buf[OFF_MASK..OFF_MASK + 8].copy_from_slice(&(all & !STATMOUNT_MNT_POINT).to_ne_bytes());
        assert_eq!(parse(&buf), None);
    }

    #[test]
    fn a_directory_that_is_not_a_mount_root_has_no_mount() {
        let dir = std::env::temp_dir().join(format!("cordon-mounts-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let found = mount_at(dir.to_str().unwrap());
        std::fs::remove_dir(&dir).unwrap();
        assert_eq!(found, None);
        assert_eq!(mount_at("/nonexistent/cordon"), None);
    }
}
