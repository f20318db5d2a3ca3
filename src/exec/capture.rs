//! Bounded output capture: keep the tail of a stream in memory, spill the complete
//! stream to a private file, and serve incremental reads.
//!
//! Memory per stream is bounded by twice the tail cap whatever the output size. The
//! spill file is created exclusively (`O_EXCL`, mode 0600) with a random name in a
//! private 0700 directory; its bytes are exactly the stream's bytes (non-UTF-8
//! included). A spill that fails (a write or close error, `ENOSPC`) stops spilling and
//! withholds the path; the tail is still returned.
//!
//! Spill files are kept only when they hold something the tail does not (the tail was
//! truncated, or the bytes are not valid UTF-8); otherwise they are removed and
//! `spill_path` is null.
//!
//! What it does not do: it does not read pipes itself (the executor drains them).

use crate::result::CollectedOutput;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One stream's capture state.
#[derive(Debug)]
struct StreamState {
    cap: usize,
    spill_dir: Option<PathBuf>,
    prefix: String,
    tail: Vec<u8>,
    total: u64,
    spill: Option<(File, PathBuf)>,
    spill_failed: bool,
    all_utf8: bool,
    pending_utf8: Vec<u8>,
    finished: Option<CollectedOutput>,
}

/// A shared, bounded capture of one stream.
#[derive(Debug, Clone)]
pub struct StreamCapture {
    inner: Arc<Mutex<StreamState>>,
}

/// New bytes since the last incremental read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Increment {
    /// The new bytes still held in memory.
    pub bytes: Vec<u8>,
    /// Some unread bytes were dropped from memory before this read (see the spill file).
    pub lossy: bool,
}

impl StreamCapture {
    /// A capture keeping at most `cap` bytes of tail, spilling into a new file in
    /// `spill_dir` (when given) named with `prefix` and a random suffix. The file is
    /// created lazily, the first time the stream holds more than the tail can (or at
    /// the end, for output that is not valid UTF-8), so small outputs touch no disk.
    pub fn new(cap: usize, spill_dir: Option<&Path>, prefix: &str) -> StreamCapture {
        StreamCapture {
            inner: Arc::new(Mutex::new(StreamState {
                cap,
                spill_dir: spill_dir.map(Path::to_path_buf),
                prefix: prefix.to_string(),
                tail: Vec::new(),
                total: 0,
                spill: None,
                spill_failed: spill_dir.is_none(),
                all_utf8: true,
                pending_utf8: Vec::new(),
                finished: None,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StreamState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Append bytes read from the stream.
    pub fn push(&self, bytes: &[u8]) {
        let mut s = self.lock();
        if bytes.is_empty() || s.finished.is_some() {
            return;
        }
        if s.spill.is_none() && !s.spill_failed && s.total + bytes.len() as u64 > s.cap as u64 {
            // Everything so far is still in the tail: start the spill with it.
            open_spill(&mut s);
        }
        if let Some((file, _)) = s.spill.as_mut() {
            if file.write_all(bytes).is_err() {
                s.spill_failed = true;
                if let Some((_, path)) = s.spill.take() {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
        if s.all_utf8 {
            track_utf8(&mut s, bytes);
        }
        s.total += bytes.len() as u64;
        let cap = s.cap;
        if bytes.len() >= cap {
            s.tail.clear();
            s.tail.extend_from_slice(&bytes[bytes.len() - cap..]);
        } else {
            s.tail.extend_from_slice(bytes);
            if s.tail.len() > cap.saturating_mul(2).max(cap + 4096) {
                let excess = s.tail.len() - cap;
                s.tail.drain(..excess);
            }
        }
    }

    /// Total bytes seen so far.
    pub fn total(&self) -> u64 {
        self.lock().total
    }

    /// Bytes after absolute offset `*cursor`, advancing it.
    pub fn read_since(&self, cursor: &mut u64) -> Increment {
        let s = self.lock();
        let held = s.tail.len().min(s.cap) as u64;
        let start = s.total - held;
        let lossy = *cursor < start;
        let from = (*cursor).max(start);
        let offset = (s.tail.len() as u64 - (s.total - from)) as usize;
        let bytes = s.tail[offset..].to_vec();
        *cursor = s.total;
        Increment { bytes, lossy }
    }

    /// The spill file's path while spilling works (and, after the stream finished,
    /// the kept file's path).
    pub fn spill_path(&self) -> Option<PathBuf> {
        let s = self.lock();
        if let Some(done) = &s.finished {
            return done.spill_path.clone();
        }
        if s.spill_failed {
            None
        } else {
            s.spill.as_ref().map(|(_, p)| p.clone())
        }
    }

    /// Close the spill file and produce the collected output (idempotent).
    pub fn finish(&self) -> CollectedOutput {
        let mut s = self.lock();
        if let Some(done) = &s.finished {
            return done.clone();
        }
        if !s.pending_utf8.is_empty() {
            s.all_utf8 = false;
        }
        if !s.all_utf8 && s.spill.is_none() && !s.spill_failed {
            // Not valid UTF-8: the text is lossy, so keep the exact bytes in a file.
            open_spill(&mut s);
        }
        let held = s.tail.len().min(s.cap);
        let tail_start = s.tail.len() - held;
        let truncated = s.total > held as u64;
        let text = String::from_utf8_lossy(&s.tail[tail_start..]).into_owned();
        let mut spill_path = None;
        if let Some((file, path)) = s.spill.take() {
            // A close error (e.g. delayed ENOSPC on some filesystems) withholds the path.
            let ok = !s.spill_failed && close_file(file);
            let keep = ok && (truncated || !s.all_utf8);
            if keep {
                spill_path = Some(path);
            } else {
                let _ = std::fs::remove_file(&path);
            }
        }
        let out = CollectedOutput { text, truncated, spill_path };
        s.finished = Some(out.clone());
        out
    }

    /// Simulate a failed spill (tests): the path must be withheld.
    #[doc(hidden)]
    pub fn fail_spill_for_tests(&self) {
        self.lock().spill_failed = true;
    }
}

/// Create the spill file and write the bytes held so far (the whole stream: this
/// runs before the tail first drops anything).
fn open_spill(s: &mut StreamState) {
    let Some(dir) = s.spill_dir.clone() else {
        s.spill_failed = true;
        return;
    };
    let created = tempfile::Builder::new()
        .prefix(&s.prefix)
        .rand_bytes(12)
        .tempfile_in(&dir)
        .and_then(|f| f.keep().map_err(|e| e.error));
    match created {
        Ok((mut file, path)) => {
            if file.write_all(&s.tail).is_ok() {
                s.spill = Some((file, path));
            } else {
                let _ = std::fs::remove_file(&path);
                s.spill_failed = true;
            }
        }
        Err(_) => s.spill_failed = true,
    }
}

fn close_file(file: File) -> bool {
    use std::os::fd::IntoRawFd;
    let fd = file.into_raw_fd();
    nix::unistd::close(fd).is_ok()
}

/// Track whether the stream so far is valid UTF-8, across chunk boundaries.
fn track_utf8(s: &mut StreamState, bytes: &[u8]) {
    let mut buf = std::mem::take(&mut s.pending_utf8);
    buf.extend_from_slice(bytes);
    match std::str::from_utf8(&buf) {
        Ok(_) => {}
        Err(e) => {
            if e.error_len().is_some() || buf.len() - e.valid_up_to() > 3 {
                s.all_utf8 = false;
            } else {
                s.pending_utf8 = buf[e.valid_up_to()..].to_vec();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_is_the_last_cap_bytes_and_memory_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let c = StreamCapture::new(10, Some(dir.path()), "out-");
        for i in 0..1000u32 {
            c.push(format!("{i:04}\n").as_bytes());
            assert!(c.lock().tail.len() <= 10 + 4096 + 5);
        }
        let out = c.finish();
        assert_eq!(out.text, "0998\n0999\n");
        assert!(out.truncated);
        let spilled = std::fs::read(out.spill_path.unwrap()).unwrap();
        assert_eq!(spilled.len(), 5000);
    }

    #[test]
    fn small_utf8_output_keeps_no_spill_file() {
        let dir = tempfile::tempdir().unwrap();
        let c = StreamCapture::new(100, Some(dir.path()), "out-");
        c.push("héllo".as_bytes());
        let out = c.finish();
        assert_eq!(out.text, "héllo");
        assert!(!out.truncated);
        assert_eq!(out.spill_path, None);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn non_utf8_output_keeps_exact_bytes_in_the_spill() {
        let dir = tempfile::tempdir().unwrap();
        let c = StreamCapture::new(100, Some(dir.path()), "out-");
        c.push(&[0xff, 0x00, b'a', 0xc3]);
        let out = c.finish();
        assert!(!out.truncated);
        assert_eq!(std::fs::read(out.spill_path.unwrap()).unwrap(), vec![0xff, 0x00, b'a', 0xc3]);
    }

    #[test]
    fn utf8_split_across_chunks_is_still_utf8() {
        let dir = tempfile::tempdir().unwrap();
        let c = StreamCapture::new(100, Some(dir.path()), "out-");
        let e = "é".as_bytes();
        c.push(&e[..1]);
        c.push(&e[1..]);
        assert_eq!(c.finish().spill_path, None);
    }

    #[test]
    fn failed_spill_withholds_the_path_but_keeps_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let c = StreamCapture::new(4, Some(dir.path()), "out-");
        c.push(b"abcdefgh");
        c.fail_spill_for_tests();
        let out = c.finish();
        assert_eq!(out.text, "efgh");
        assert!(out.truncated);
        assert_eq!(out.spill_path, None);
    }

    #[test]
    fn spill_on_a_full_device_withholds_the_path() {
        // /dev/full answers every write with ENOSPC.
        let c = StreamCapture::new(4, None, "out-");
        {
            let f = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
            let mut s = c.lock();
            s.spill = Some((f, PathBuf::from("/dev/full-not-a-real-spill")));
            s.spill_failed = false;
        }
        c.push(b"abcdefgh");
        let out = c.finish();
        assert_eq!(out.spill_path, None);
        assert_eq!(out.text, "efgh");
    }

    #[test]
    fn incremental_reads_return_only_new_bytes_and_flag_losses() {
        let c = StreamCapture::new(4, None, "out-");
        let mut cur = 0;
        c.push(b"ab");
        assert_eq!(c.read_since(&mut cur), Increment { bytes: b"ab".to_vec(), lossy: false });
        assert_eq!(c.read_since(&mut cur), Increment { bytes: vec![], lossy: false });
        c.push(b"cdefgh");
        let inc = c.read_since(&mut cur);
        assert_eq!(inc.bytes, b"efgh".to_vec());
        assert!(inc.lossy);
        c.push(b"ij");
        assert_eq!(c.read_since(&mut cur), Increment { bytes: b"ij".to_vec(), lossy: false });
    }
}
