//! Two of git's file formats, read the way git reads them, for what host git will act
//! on (pure: bytes in, values out):
//!
//! - the **config syntax** ([`parse_config`]): `config`, `config.worktree`, included
//!   files and `.gitmodules` — sections, quoted subsections, the legacy
//!   `[section.sub]` form, values with quotes, escapes, continuation lines and
//!   comments. Parsing stops at the first malformed line (git itself refuses to run
//!   with such a file, so nothing after it takes effect);
//! - the **index** ([`index_gitlinks`]): versions 2, 3 and 4 (path prefix
//!   compression), SHA-1 and SHA-256 entries, the split index's `link` extension (the
//!   shared index it names holds the rest of the entries). [`index_entries`] gives
//!   every entry's mode and path; [`index_gitlinks`] collects the gitlinks (mode
//!   `160000`: submodules).
//!
//! What it does not do: interpret conditions (`includeIf` is taken whatever its
//! condition: a path that might be included is treated as included), expand paths
//! (the caller does, with the including file's directory), or read files.

/// One `section[.subsection].key [= value]` of a config file. `section` and `key` are
/// lowercase (git compares them without case); `subsection` is as written (quoted
/// subsections are case-sensitive; a legacy `[a.B]` one is lowercased, as git does);
/// `value` is `None` for a bare key (a boolean true).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Section name, lowercase.
    pub section: String,
    /// Subsection, if any.
    pub subsection: Option<Vec<u8>>,
    /// Key name, lowercase.
    pub key: String,
    /// The value after unquoting and unescaping.
    pub value: Option<Vec<u8>>,
}

/// Every entry of a config file, in order, up to the first malformed line.
pub fn parse_config(text: &[u8]) -> Vec<ConfigEntry> {
    let mut p = Cursor { s: text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text), i: 0 };
    let mut out = Vec::new();
    let mut section: Option<(String, Option<Vec<u8>>)> = None;
    loop {
        p.skip_while(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'));
        let Some(c) = p.peek() else { break };
        match c {
            b'#' | b';' => p.skip_line(),
            b'[' => {
                p.i += 1;
                match p.section_header() {
                    Some(s) => section = Some(s),
                    None => break,
                }
            }
            c if c.is_ascii_alphabetic() => {
                let Some((sec, sub)) = &section else { break };
                let key = p.take_while(|c| c.is_ascii_alphanumeric() || c == b'-').to_ascii_lowercase();
                p.skip_while(|c| matches!(c, b' ' | b'\t' | b'\r'));
                let value = match p.peek() {
                    None | Some(b'\n') => None,
                    Some(b'#' | b';') => {
                        p.skip_line();
                        None
                    }
                    Some(b'=') => {
                        p.i += 1;
                        match p.value() {
                            Some(v) => Some(v),
                            None => break,
                        }
                    }
                    Some(_) => break,
                };
                out.push(ConfigEntry {
                    section: sec.clone(),
                    subsection: sub.clone(),
                    key: String::from_utf8_lossy(&key).into_owned(),
                    value,
                });
            }
            _ => break,
        }
    }
    out
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn skip_while(&mut self, f: impl Fn(u8) -> bool) {
        while self.peek().is_some_and(&f) {
            self.i += 1;
        }
    }
    fn take_while(&mut self, f: impl Fn(u8) -> bool) -> Vec<u8> {
        let start = self.i;
        self.skip_while(f);
        self.s[start..self.i].to_vec()
    }
    fn skip_line(&mut self) {
        self.skip_while(|c| c != b'\n');
    }

    /// After `[`: `name]`, `name "sub"]` or the legacy `name.sub]`.
    fn section_header(&mut self) -> Option<(String, Option<Vec<u8>>)> {
        let name = self.take_while(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.');
        if name.is_empty() {
            return None;
        }
        let mut name = String::from_utf8(name).ok()?.to_ascii_lowercase();
        match self.peek()? {
            b']' => {
                self.i += 1;
                // Legacy `[section.subsection]`: the subsection is lowercased.
                if let Some(dot) = name.find('.') {
                    let sub = name.as_bytes()[dot + 1..].to_vec();
                    name.truncate(dot);
                    return Some((name, Some(sub)));
                }
                Some((name, None))
            }
            b' ' | b'\t' => {
                if name.contains('.') {
                    return None;
                }
                self.skip_while(|c| c == b' ' || c == b'\t');
                if self.peek()? != b'"' {
                    return None;
                }
                self.i += 1;
                let mut sub = Vec::new();
                loop {
                    match self.peek()? {
                        b'\n' => return None,
                        b'"' => {
                            self.i += 1;
                            break;
                        }
                        b'\\' => {
                            self.i += 1;
                            let c = self.peek()?;
                            if c == b'\n' {
                                return None;
                            }
                            sub.push(c);
                            self.i += 1;
                        }
                        c => {
                            sub.push(c);
                            self.i += 1;
                        }
                    }
                }
                (self.peek()? == b']').then(|| {
                    self.i += 1;
                    (name, Some(sub))
                })
            }
            _ => None,
        }
    }

    /// After `=`: the value to the end of its (possibly continued) line.
    fn value(&mut self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut quoted = false;
        let mut spaces = 0usize;
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                b'\n' if quoted => return None,
                b'\n' => break,
                b'#' | b';' if !quoted => {
                    self.skip_line();
                    break;
                }
                b' ' | b'\t' | b'\r' if !quoted => {
                    if !out.is_empty() {
                        spaces += 1;
                    }
                }
                b'\\' => {
                    let e = self.peek()?;
                    self.i += 1;
                    let ch = match e {
                        b'\n' => continue,
                        b't' => b'\t',
                        b'b' => 8,
                        b'n' => b'\n',
                        b'\\' | b'"' => e,
                        _ => return None,
                    };
                    out.extend(std::iter::repeat_n(b' ', std::mem::take(&mut spaces)));
                    out.push(ch);
                }
                b'"' => {
                    out.extend(std::iter::repeat_n(b' ', std::mem::take(&mut spaces)));
                    quoted = !quoted;
                }
                c => {
                    out.extend(std::iter::repeat_n(b' ', std::mem::take(&mut spaces)));
                    out.push(c);
                }
            }
        }
        (!quoted).then_some(out)
    }
}

pub use crate::error::IndexError;

/// What an index holds for host git's submodule recursion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexGitlinks {
    /// Paths (relative to the work tree, as stored) of gitlink entries.
    pub gitlinks: Vec<Vec<u8>>,
    /// With a split index, the hash (hex) of the shared index that holds the other
    /// entries (`sharedindex.<hex>` in the git directory).
    pub shared: Option<String>,
}

/// Mode of a gitlink entry.
const GITLINK: u32 = 0o160000;
/// Bytes of an entry before its object name: ctime, mtime, dev, ino, mode, uid, gid,
/// size (4 bytes each, the times as seconds and nanoseconds).
const ENTRY_STAT: usize = 40;

/// Read an index file's gitlinks (see the module docs). `hash_len` is 20 (SHA-1) or 32
/// (SHA-256), as the repository's `extensions.objectFormat` says.
pub fn index_gitlinks(bytes: &[u8], hash_len: usize) -> Result<IndexGitlinks, IndexError> {
    let mut gitlinks = Vec::new();
    let shared = index_entries(bytes, hash_len, |mode, path| {
        if mode == GITLINK {
            gitlinks.push(path.to_vec());
        }
    })?;
    Ok(IndexGitlinks { gitlinks, shared })
}

/// Call `each` with the mode and path of every entry of an index file, in order (no
/// copy of a path is made); the shared index a split index names (its hash, hex), if
/// any. `hash_len` as for [`index_gitlinks`].
pub fn index_entries(
    bytes: &[u8],
    hash_len: usize,
    mut each: impl FnMut(u32, &[u8]),
) -> Result<Option<String>, IndexError> {
    let be32 = |at: usize| -> Result<u32, IndexError> {
        let b = bytes.get(at..at + 4).ok_or(IndexError::Truncated)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    if bytes.len() < 12 + hash_len || &bytes[..4] != b"DIRC" {
        return Err(IndexError::Format);
    }
    let version = be32(4)?;
    if !(2..=4).contains(&version) {
        return Err(IndexError::Format);
    }
    let count = be32(8)? as usize;
    let end = bytes.len() - hash_len; // the trailing checksum
    let mut at = 12usize;
    let mut shared = None;
    // Version 4 compresses each path against the previous one: kept in one buffer.
    let mut prev: Vec<u8> = Vec::new();
    for _ in 0..count {
        let start = at;
        let mode = be32(start + 24)?;
        let flags_at = start + ENTRY_STAT + hash_len;
        let flags = bytes.get(flags_at..flags_at + 2).ok_or(IndexError::Truncated)?;
        let flags = u16::from_be_bytes([flags[0], flags[1]]);
        at = flags_at + 2;
        if version >= 3 && flags & 0x4000 != 0 {
            at += 2; // extended flags
        }
        if version == 4 {
            // A varint (bytes to drop from the previous path), then the rest, NUL-ended.
            let mut strip: usize = 0;
            loop {
                let c = *bytes.get(at).ok_or(IndexError::Truncated)?;
                at += 1;
                strip = strip.checked_add((c & 0x7f) as usize).ok_or(IndexError::Truncated)?;
                if c & 0x80 == 0 {
                    break;
                }
                strip = strip.checked_add(1).and_then(|s| s.checked_mul(128)).ok_or(IndexError::Truncated)?;
            }
            let rest = bytes.get(at..end).ok_or(IndexError::Truncated)?;
            let nul = rest.iter().position(|b| *b == 0).ok_or(IndexError::Truncated)?;
            let keep = prev.len().checked_sub(strip).ok_or(IndexError::Truncated)?;
            prev.truncate(keep);
            prev.extend_from_slice(&rest[..nul]);
            at += nul + 1;
            each(mode, &prev);
        } else {
            // The name length is in the flags unless it is 0xFFF or more; the entry is a
            // multiple of 8 bytes with 1 to 8 NULs after the path.
            let short = (flags & 0x0fff) as usize;
            let len = if short < 0x0fff {
                if bytes.get(at + short) != Some(&0) {
                    return Err(IndexError::Truncated);
                }
                short
            } else {
                let rest = bytes.get(at..end).ok_or(IndexError::Truncated)?;
                rest.iter().position(|b| *b == 0).ok_or(IndexError::Truncated)?
            };
            each(mode, bytes.get(at..at + len).ok_or(IndexError::Truncated)?);
            let size = at + len - start;
            at = start + ((size + 8) & !7);
        }
        if at > end {
            return Err(IndexError::Truncated);
        }
    }
    // Extensions: a 4-byte signature and a 4-byte size each, until the checksum.
    while at + 8 <= end {
        let sig = &bytes[at..at + 4];
        let size = be32(at + 4)? as usize;
        let data = bytes.get(at + 8..at + 8 + size).ok_or(IndexError::Truncated)?;
        if sig == b"link" && data.len() >= hash_len {
            let hex: String = data[..hash_len].iter().map(|b| format!("{b:02x}")).collect();
            shared = Some(hex);
        }
        at += 8 + size;
    }
    Ok(shared)
}

/// Whether a path from an index or `.gitmodules` is one git itself would accept for a
/// submodule: relative, no empty, `.` or `..` component, no `.git` component (any
/// case), no NUL or backslash.
pub fn sane_repo_path(p: &[u8]) -> bool {
    !p.is_empty()
        && !p.contains(&0)
        && !p.contains(&b'\\')
        && p.split(|b| *b == b'/').all(|c| !c.is_empty() && c != b"." && c != b".." && !c.eq_ignore_ascii_case(b".git"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str) -> Vec<(String, Option<String>, String, Option<String>)> {
        parse_config(text.as_bytes())
            .into_iter()
            .map(|e| {
                let s = |v: Option<Vec<u8>>| v.map(|b| String::from_utf8(b).unwrap());
                (e.section, s(e.subsection), e.key, s(e.value))
            })
            .collect()
    }

    fn e(
        sec: &str,
        sub: Option<&str>,
        key: &str,
        val: Option<&str>,
    ) -> (String, Option<String>, String, Option<String>) {
        (sec.into(), sub.map(Into::into), key.into(), val.map(Into::into))
    }

    #[test]
    fn config_sections_keys_and_values() {
        let text = "\u{feff}# comment\n[core]\n\tbare = false ; trailing\n\tFSMonitor = \"a b\"  c  # x\n\
                    [Submodule \"Lib/X\"]\n\tpath = lib/x\n[include]path=../x.inc\n[submodule.Legacy]\n\
                    \turl = u\\\n  v\n\tflag\n[includeIf \"gitdir:~/w/\"]\n path = \"q\\\"uote\\\\\"\n";
        assert_eq!(
            entries(text),
            vec![
                e("core", None, "bare", Some("false")),
                e("core", None, "fsmonitor", Some("a b  c")),
                e("submodule", Some("Lib/X"), "path", Some("lib/x")),
                e("include", None, "path", Some("../x.inc")),
                e("submodule", Some("legacy"), "url", Some("u  v")),
                e("submodule", Some("legacy"), "flag", None),
                e("includeif", Some("gitdir:~/w/"), "path", Some("q\"uote\\")),
            ]
        );
    }

    #[test]
    fn config_stops_at_the_first_malformed_line() {
        assert_eq!(entries("[core]\nx = 1\n= bad\n[core]\ny = 2\n"), vec![e("core", None, "x", Some("1"))]);
        assert_eq!(entries("x = 1\n"), vec![]);
        assert_eq!(entries("[core]\nx = \"open\ny = 2\n"), vec![]);
        assert_eq!(entries("[core]\nx = a\\q\n"), vec![]);
        assert_eq!(entries("[a \"b]\n"), vec![]);
    }

    #[test]
    fn config_never_panics_on_arbitrary_bytes() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2000 {
            let len = (seed % 64) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let alphabet = b"[]\"\\ \t\n=#;ab.-\rD";
                    alphabet[(seed % alphabet.len() as u64) as usize]
                })
                .collect();
            let _ = parse_config(&bytes);
            let _ = index_gitlinks(&bytes, 20);
        }
    }

    #[test]
    fn sane_paths_only() {
        for ok in ["a", "a/b", "lib/x.git2", "dot.dir/x"] {
            assert!(sane_repo_path(ok.as_bytes()), "{ok}");
        }
        for bad in ["", "/a", "a/", "a//b", "./a", "a/../b", ".git", "a/.GIT/b", "a\\b"] {
            assert!(!sane_repo_path(bad.as_bytes()), "{bad}");
        }
    }

    /// Build an index of `version` with (mode, path) entries, as git writes it.
    fn index(version: u32, hash_len: usize, items: &[(u32, &str)], link: Option<&[u8]>) -> Vec<u8> {
        let mut out = b"DIRC".to_vec();
        out.extend_from_slice(&version.to_be_bytes());
        out.extend_from_slice(&(items.len() as u32).to_be_bytes());
        let mut prev: &str = "";
        for (mode, path) in items {
            let start = out.len();
            let mut stat = [0u8; ENTRY_STAT];
            stat[24..28].copy_from_slice(&mode.to_be_bytes());
            out.extend_from_slice(&stat);
            out.extend(std::iter::repeat_n(0xab, hash_len));
            out.extend_from_slice(&(path.len().min(0xfff) as u16).to_be_bytes());
            if version == 4 {
                let common = prev.bytes().zip(path.bytes()).take_while(|(a, b)| a == b).count();
                let strip = prev.len() - common;
                assert!(strip < 128);
                out.push(strip as u8);
                out.extend_from_slice(&path.as_bytes()[common..]);
                out.push(0);
            } else {
                out.extend_from_slice(path.as_bytes());
                let len = out.len() - start;
                out.extend(std::iter::repeat_n(0, ((len + 8) & !7) - len));
            }
            prev = path;
        }
        if let Some(h) = link {
            out.extend_from_slice(b"link");
            out.extend_from_slice(&(h.len() as u32 + 4).to_be_bytes());
            out.extend_from_slice(h);
            out.extend_from_slice(&[0, 0, 0, 0]);
        }
        out.extend(std::iter::repeat_n(0xcd, hash_len));
        out
    }

    #[test]
    fn index_versions_and_hashes() {
        let items = [(0o100644, "a.txt"), (GITLINK, "lib/sub"), (0o100644, "lib/subfile"), (GITLINK, "x")];
        for version in [2, 3, 4] {
            for hash in [20, 32] {
                let got = index_gitlinks(&index(version, hash, &items, None), hash).unwrap();
                assert_eq!(got.gitlinks, vec![b"lib/sub".to_vec(), b"x".to_vec()], "v{version} h{hash}");
                assert_eq!(got.shared, None);
            }
        }
        let link = [0x12u8; 20];
        let got = index_gitlinks(&index(2, 20, &items[..1], Some(&link)), 20).unwrap();
        assert_eq!(got.shared.as_deref(), Some("1212121212121212121212121212121212121212"));
    }

    #[test]
    fn index_refuses_what_it_cannot_read() {
        assert_eq!(index_gitlinks(b"DIRX\0\0\0\x02\0\0\0\0", 20), Err(IndexError::Format));
        let mut v5 = index(2, 20, &[], None);
        v5[7] = 5;
        assert_eq!(index_gitlinks(&v5, 20), Err(IndexError::Format));
        let good = index(2, 20, &[(GITLINK, "a")], None);
        for cut in 12..good.len() - 20 {
            let mut short = good[..cut].to_vec();
            short.extend(std::iter::repeat_n(0xcd, 20));
            assert!(index_gitlinks(&short, 20).is_err() || cut >= good.len() - 20, "{cut}");
        }
    }
}
