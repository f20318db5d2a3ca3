//! The init's stack, and the state its signal handlers share with its loop.
//!
//! The init shares cordon's memory ([`SHARED_INIT`](crate::raw::SHARED_INIT)), so it
//! cannot keep its state in statics: the inits of several runs may be alive at once.
//! Each init runs on a stack of its own, [`STACK_SIZE`] bytes aligned to its size. Its
//! [`InitState`] sits at the top of that stack, and code running on it (the init's
//! loop, its signal handlers) finds it from the address of a local
//! ([`state_here`]). The lowest page is a guard: an overflow faults in the init
//! instead of writing into cordon's memory.
//!
//! A stack is reused only once its init has exited: the pool keeps a pidfd for every
//! init that may still run and hands the stack out again when that pidfd is readable
//! (an exited process runs no more code). A stack whose init may still run is never
//! unmapped or reused; when that cannot be tracked, it is leaked.
//!
//! What it does not do: reap, signal or wait for an init.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Mutex;

/// Bytes of one init stack: a power of two, and its alignment (room for a guard of
/// 64 KiB pages; the init touches a few KiB).
pub(crate) const STACK_SIZE: usize = 256 * 1024;
/// Bytes reserved for the [`InitState`] at the top of the stack.
const STATE_RESERVE: usize = 64;
/// Idle stacks kept mapped for the next runs.
const IDLE_MAX: usize = 8;

/// What the init's loop and its signal handlers share.
#[repr(C)]
pub(crate) struct InitState {
    /// The command's pid (in the init's pid namespace), once started.
    pub(crate) child: AtomicI32,
    /// cordon's pid, as the parent saw it before the clone.
    pub(crate) parent: AtomicI32,
    /// The write end of the exit-status pipe.
    pub(crate) exit_fd: AtomicI32,
    /// The command's wait status was written to the exit-status pipe.
    pub(crate) reported: AtomicBool,
}

const _: () = assert!(std::mem::size_of::<InitState>() <= STATE_RESERVE);
const _: () = assert!(STACK_SIZE.is_power_of_two());

/// One init stack (a private anonymous mapping). Dropping it leaks the mapping: only
/// the pool unmaps a stack, and only when no init can be running on it.
pub(crate) struct InitStack {
    base: NonNull<u8>,
}

// SAFETY: the mapping is plain memory owned by this value; nothing in it refers to
// the thread that created it.
unsafe impl Send for InitStack {}

impl InitStack {
    fn map() -> io::Result<Self> {
        let len = 2 * STACK_SIZE;
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let start = addr as usize;
        let base = (start + STACK_SIZE - 1) & !(STACK_SIZE - 1);
        let end = start + len;
        // SAFETY: unmapping the parts of our own mapping outside the aligned window.
        unsafe {
            if base > start {
                libc::munmap(start as *mut libc::c_void, base - start);
            }
            if end > base + STACK_SIZE {
                libc::munmap((base + STACK_SIZE) as *mut libc::c_void, end - (base + STACK_SIZE));
            }
        }
        // SAFETY: sysconf has no memory arguments.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(4096);
        // SAFETY: the guard page is the lowest page of our own mapping.
        if page <= STACK_SIZE / 4 && unsafe { libc::mprotect(base as *mut libc::c_void, page, libc::PROT_NONE) } != 0 {
            let err = io::Error::last_os_error();
            // SAFETY: unmapping our own, unused mapping.
            unsafe { libc::munmap(base as *mut libc::c_void, STACK_SIZE) };
            return Err(err);
        }
        let base = NonNull::new(base as *mut u8).ok_or_else(|| io::Error::other("mmap returned address 0"))?;
        Ok(InitStack { base })
    }

    /// The initial stack pointer for `clone` (16-byte aligned, below the state).
    pub(crate) fn top(&self) -> *mut libc::c_void {
        (self.base.as_ptr() as usize + STACK_SIZE - STATE_RESERVE) as *mut libc::c_void
    }

    /// Reset the state for a new init.
    pub(crate) fn prepare(&self, parent: libc::pid_t, exit_fd: libc::c_int) {
        let state = self.state();
        state.child.store(0, Ordering::Relaxed);
        state.parent.store(parent, Ordering::Relaxed);
        state.exit_fd.store(exit_fd, Ordering::Relaxed);
        state.reported.store(false, Ordering::Relaxed);
    }

    fn state(&self) -> &InitState {
        // SAFETY: the top STATE_RESERVE bytes of the mapping hold an InitState (all its
        // fields are valid for any bit pattern, including the zeroes of a fresh map).
        unsafe { &*(self.top() as *const InitState) }
    }

    /// Unmap. Only for a stack no init can be running on.
    fn unmap(self) {
        // SAFETY: our own mapping, not in use (the caller's promise).
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, STACK_SIZE) };
    }
}

/// The state of the init whose stack the caller is running on. Only for code that
/// runs on an init stack: the init's loop and its signal handlers.
pub(crate) fn state_here() -> &'static InitState {
    let anchor = 0u8;
    let sp = std::hint::black_box(&anchor) as *const u8 as usize;
    let base = sp & !(STACK_SIZE - 1);
    // SAFETY: the caller runs on an init stack (STACK_SIZE-aligned, STACK_SIZE long),
    // whose top STATE_RESERVE bytes hold its InitState for as long as the init runs.
    unsafe { &*((base + STACK_SIZE - STATE_RESERVE) as *const InitState) }
}

struct Pool {
    idle: Vec<InitStack>,
    /// Stacks whose init may still run, with a pidfd for that init.
    busy: Vec<(InitStack, OwnedFd)>,
}

static POOL: Mutex<Pool> = Mutex::new(Pool { idle: Vec::new(), busy: Vec::new() });

fn pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A stack for the next init: an idle one, or a new mapping.
pub(crate) fn take() -> io::Result<InitStack> {
    {
        let mut pool = pool();
        pool.reclaim();
        if let Some(stack) = pool.idle.pop() {
            return Ok(stack);
        }
    }
    InitStack::map()
}

/// The init on `stack` is running (`pidfd` is its pidfd): keep the stack until it
/// exits. Leaked if the pidfd cannot be duplicated.
pub(crate) fn in_use(stack: InitStack, pidfd: &OwnedFd) {
    // Without a pidfd of its own the pool cannot tell when the init is gone: the
    // stack then goes out of scope here without being unmapped (leaked).
    if let Ok(fd) = pidfd.try_clone() {
        pool().busy.push((stack, fd));
    }
}

/// The init on `stack` never started or has been reaped.
pub(crate) fn done(stack: InitStack) {
    let mut pool = pool();
    if pool.idle.len() < IDLE_MAX {
        pool.idle.push(stack);
    } else {
        drop(pool);
        stack.unmap();
    }
}

impl Pool {
    /// Move the stacks of inits that have exited to the idle list (unmapping beyond
    /// [`IDLE_MAX`]).
    fn reclaim(&mut self) {
        if self.busy.is_empty() {
            return;
        }
        let mut fds: Vec<libc::pollfd> = self
            .busy
            .iter()
            .map(|(_, fd)| libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 })
            .collect();
        // SAFETY: poll on a local array of the right length, without waiting.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
        if n <= 0 {
            return;
        }
        for i in (0..fds.len()).rev() {
            // Readable: the init exited; hung up: it was reaped as well (newer kernels).
            if fds[i].revents & (libc::POLLIN | libc::POLLHUP) != 0 {
                let (stack, _pidfd) = self.busy.swap_remove(i);
                if self.idle.len() < IDLE_MAX {
                    self.idle.push(stack);
                } else {
                    stack.unmap();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_is_aligned_guarded_and_its_state_is_found_from_inside() {
        let stack = InitStack::map().expect("map");
        let base = stack.base.as_ptr() as usize;
        assert_eq!(base % STACK_SIZE, 0);
        assert_eq!(stack.top() as usize % 16, 0);
        stack.prepare(42, 7);
        // What `state_here` computes for any address on the stack.
        let from_inside = (base + 4096 + 123) & !(STACK_SIZE - 1);
        assert_eq!(from_inside + STACK_SIZE - STATE_RESERVE, stack.top() as usize);
        assert_eq!(stack.state().parent.load(Ordering::Relaxed), 42);
        assert_eq!(stack.state().exit_fd.load(Ordering::Relaxed), 7);
        // The guard page: mincore-free check through /proc/self/maps.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let guard = maps
            .lines()
            .find(|l| l.starts_with(&format!("{base:x}-")))
            .unwrap_or_else(|| panic!("no mapping at {base:x}:\n{maps}"));
        assert!(guard.contains(" ---p "), "the lowest page is not a guard: {guard}");
        stack.unmap();
    }

    #[test]
    fn a_busy_stack_comes_back_only_after_its_process_exits() {
        let stack = InitStack::map().expect("map");
        let base = stack.base.as_ptr() as usize;
        let mut child = std::process::Command::new("sleep").arg("0.3").spawn().expect("spawn sleep");
        // SAFETY: pidfd_open on our own unreaped child.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0) };
        assert!(fd >= 0);
        #[allow(clippy::cast_possible_truncation, reason = "an fd")]
        // SAFETY: a fresh fd we own.
        let pidfd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) };
        let mut pool = Pool { idle: Vec::new(), busy: vec![(stack, pidfd)] };
        pool.reclaim();
        assert!(pool.idle.is_empty() && pool.busy.len() == 1, "reclaimed while the process runs");
        child.wait().unwrap();
        pool.reclaim();
        assert!(pool.busy.is_empty(), "not reclaimed after the process exited");
        assert_eq!(pool.idle.len(), 1);
        assert_eq!(pool.idle[0].base.as_ptr() as usize, base);
        pool.idle.pop().unwrap().unmap();
    }
}
