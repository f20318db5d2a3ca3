//! The call fingerprint (FNV-1a 128-bit over a canonical encoding: an identifier,
//! not a MAC) and the files bound into it: by default the named files inside writable
//! roots, with [`EscalationOptions::bind_files`] every named file.

use super::*;

/// A named file's contents, read at approval time.
#[derive(Debug, Clone)]
pub(super) struct BoundFile {
    pub(super) path: PathBuf,
    pub(super) bytes: Vec<u8>,
}

/// A stable identifier of one call under one policy: FNV-1a 128 over a canonical,
/// length-prefixed encoding of the mode, workspace, writable roots, protected paths,
/// network and best-effort flags, the `--allow-host` patterns (when there are any),
/// argv (exact bytes), cwd and the sorted environment variable names. Printed as `fnv1a128:` and 32 hex digits. Not a MAC.
pub fn fingerprint(spec: &Spec) -> String {
    fingerprint_with(spec, &[])
}

/// [`fingerprint`], also covering the exact contents of `bound` files (a list field
/// `bound_files` of path and contents, appended after the others; with no bound files
/// the encoding and value are exactly [`fingerprint`]'s).
pub(super) fn fingerprint_with(spec: &Spec, bound: &[BoundFile]) -> String {
    let mut enc = Encoder(Vec::with_capacity(512));
    enc.0.extend_from_slice(FINGERPRINT_DOMAIN);
    let p = &spec.policy;
    enc.field(b"mode", p.mode.as_str().as_bytes());
    enc.field(b"workspace", p.workspace.as_os_str().as_bytes());
    enc.list(b"writable_roots", p.writable_roots.iter().map(|r| r.as_os_str().as_bytes()));
    enc.list(b"protected", p.protected.iter().map(|r| r.as_os_str().as_bytes()));
    enc.field(b"network", if p.network { b"1" } else { b"0" });
    enc.field(b"best_effort", if p.best_effort { b"1" } else { b"0" });
    // Hosts by name (`--allow-host`) widen what a run reaches: an approval for one list
    // is not an approval for another. Encoded only when present, so fingerprints of
    // calls without them are unchanged.
    if !p.allow_hosts.is_empty() {
        let hosts: Vec<String> = p.allow_hosts.patterns().iter().map(ToString::to_string).collect();
        enc.list(b"allow_hosts", hosts.iter().map(String::as_bytes));
    }
    // Accepted gaps (`--accept-gaps`) let a weaker sandbox run: an approval given where
    // none were accepted is not one for a run that accepts them. Encoded only when
    // present, like the hosts.
    if !p.accept_gaps.is_empty() {
        enc.list(b"accept_gaps", p.accept_gaps.iter().map(|r| r.as_str().as_bytes()));
    }
    enc.list(b"argv", spec.argv.iter().map(|a| a.as_bytes()));
    enc.field(b"cwd", spec.workdir.as_os_str().as_bytes());
    let mut names: Vec<&[u8]> = spec.env.iter().map(|(k, _)| k.as_bytes()).collect();
    names.sort_unstable();
    names.dedup();
    enc.list(b"env_names", names.into_iter());
    if !bound.is_empty() {
        enc.raw(b"bound_files");
        enc.0.extend_from_slice(&(bound.len() as u64).to_be_bytes());
        for f in bound {
            enc.raw(f.path.as_os_str().as_bytes());
            enc.raw(&f.bytes);
        }
    }
    fnv1a128(&enc.0)
}

/// [`fingerprint_with`], also covering a narrow `grant` (a field `grant` naming it,
/// appended last; without one, exactly [`fingerprint_with`]'s value).
pub(super) fn fingerprint_granting(spec: &Spec, bound: &[BoundFile], grant: Option<&Grant>) -> String {
    let Some(grant) = grant else { return fingerprint_with(spec, bound) };
    let base = fingerprint_with(spec, bound);
    let mut enc = Encoder(Vec::with_capacity(128));
    enc.field(b"call", base.as_bytes());
    match grant {
        Grant::Write { path } => enc.field(b"grant-write", path.as_os_str().as_bytes()),
        Grant::Network => enc.field(b"grant-network", b"1"),
        Grant::Host { host } => enc.field(b"grant-host", host.as_bytes()),
    }
    fnv1a128(&enc.0)
}

pub(super) fn fnv1a128(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(FNV128_OFFSET, |h, b| (h ^ u128::from(*b)).wrapping_mul(FNV128_PRIME));
    format!("fnv1a128:{hash:032x}")
}

/// Tag, then length (u64 big-endian), then bytes: no two different inputs encode alike.
struct Encoder(Vec<u8>);

impl Encoder {
    fn raw(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
        self.0.extend_from_slice(bytes);
    }

    fn field(&mut self, tag: &[u8], value: &[u8]) {
        self.raw(tag);
        self.raw(value);
    }

    fn list<'a>(&mut self, tag: &[u8], items: impl ExactSizeIterator<Item = &'a [u8]>) {
        self.raw(tag);
        self.0.extend_from_slice(&(items.len() as u64).to_be_bytes());
        for item in items {
            self.raw(item);
        }
    }
}

/// The words of the command that may name files: for a shell string, its words split
/// on whitespace and shell punctuation; for argv, the arguments (and the program when
/// given as a path). A word `--opt=VALUE` (or `NAME=VALUE`) also names its VALUE.
fn named_words(command: &CommandView) -> Vec<String> {
    let words: Vec<String> = match command {
        CommandView::Shell(s) => s
            .split(|c: char| c.is_whitespace() || ";|&<>()`'\"".contains(c))
            .filter(|w| !w.is_empty())
            .map(String::from)
            .collect(),
        CommandView::Argv(v) => {
            v.iter().enumerate().filter(|(i, a)| *i > 0 || a.contains('/')).map(|(_, a)| a.clone()).collect()
        }
    };
    let mut out = Vec::with_capacity(words.len());
    for w in words {
        if let Some((_, value)) = w.split_once('=').filter(|(_, v)| !v.is_empty()) {
            out.push(value.to_string());
        }
        out.push(w);
    }
    out
}

/// `path` lies inside one of `roots`: as named (`.` and `..` taken lexically, so a
/// symlink inside a root that points out of it counts: the link itself can be
/// re-pointed) or after resolving every symlink.
fn inside_any(path: &Path, roots: &[&Path]) -> bool {
    let mut lexical = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                lexical.pop();
            }
            std::path::Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    let canonical = std::fs::canonicalize(path).ok();
    roots.iter().any(|r| lexical.starts_with(r) || canonical.as_deref().is_some_and(|c| c.starts_with(r)))
}

/// Read the files the command names whose contents the approval is bound to: by
/// default every named regular file inside the call's workspace or a writable root
/// (what the first run, or any other run there, could rewrite); with
/// [`EscalationOptions::bind_files`] every named regular file wherever it lies, and a
/// shell string whose named words may not be the files that run is refused.
pub(super) fn bind(
    command: &CommandView,
    spec: &Spec,
    opts: &EscalationOptions,
) -> Result<Vec<BoundFile>, EscalationError> {
    let strict = opts.bind_files;
    // A shell string that changes directory, quotes, expands or globs would make the
    // named word differ from the file that runs (`cd sub && bash build.sh`,
    // `bash bu''ild.sh`): binding it would approve the wrong bytes. By default the
    // words that can be seen are bound anyway (better than none); strict binding
    // refuses.
    if let (true, CommandView::Shell(sh)) = (strict, command) {
        let tricky = sh.chars().any(|c| "'\"\\$`*?[]{}~".contains(c))
            || sh
                .split(|c: char| c.is_whitespace() || ";|&()".contains(c))
                .any(|w| matches!(w, "cd" | "pushd" | "popd"));
        if tricky {
            return Err(EscalationError::BindFailed {
                path: spec.workdir.clone(),
                why: "--bind-script needs a command whose file names are plain words: no cd, quotes, $, globs or \
                      backquotes (pass the command as argv instead)"
                    .into(),
            });
        }
    }
    let roots: Vec<&Path> = std::iter::once(spec.policy.workspace.as_path())
        .chain(spec.policy.writable_roots.iter().map(PathBuf::as_path))
        .collect();
    let mut out: Vec<BoundFile> = Vec::new();
    for word in named_words(command) {
        let path = spec.workdir.join(&word);
        if out.iter().any(|f| f.path == path) || !std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            continue;
        }
        if !strict && !inside_any(&path, &roots) {
            continue;
        }
        if out.len() == MAX_BOUND_FILES {
            return Err(EscalationError::BindFailed { path, why: format!("more than {MAX_BOUND_FILES} files") });
        }
        let bytes = read_bound(&path).map_err(|why| EscalationError::BindFailed { path: path.clone(), why })?;
        out.push(BoundFile { path, bytes });
    }
    Ok(out)
}

/// A bound file's bytes, read through one descriptor (a regular file, at most
/// [`MAX_BOUND_FILE`] bytes).
fn read_bound(path: &Path) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let mut bytes = Vec::new();
    file.take(MAX_BOUND_FILE + 1).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_BOUND_FILE {
        return Err(format!("larger than {MAX_BOUND_FILE} bytes"));
    }
    Ok(bytes)
}

/// Right before the retry: every bound file still holds exactly the approved bytes.
pub(super) fn recheck(bound: &[BoundFile]) -> Result<(), EscalationError> {
    for f in bound {
        let changed = |why: String| EscalationError::BoundFileChanged { path: f.path.clone(), why };
        let now = read_bound(&f.path).map_err(changed)?;
        if now != f.bytes {
            return Err(changed(format!("its contents are now {}, approved {}", fnv1a128(&now), fnv1a128(&f.bytes))));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Command, Request};

    /// What `bind` picks for `command` run in `ws` (workspace-write), as paths.
    fn bound(ws: &Path, command: CommandView, strict: bool) -> Result<Vec<PathBuf>, String> {
        let exec = crate::exec::Executor::new(crate::request::ExecutorConfig::default()).unwrap();
        let cmd = match &command {
            CommandView::Shell(s) => Command::Shell(s.clone()),
            CommandView::Argv(v) => Command::Argv(v.iter().map(Into::into).collect()),
        };
        let mut req = Request::new(cmd);
        req.workdir = Some(ws.to_path_buf());
        let spec = exec.resolve(req).unwrap();
        let opts = EscalationOptions { bind_files: strict, ..Default::default() };
        bind(&command, &spec, &opts).map(|v| v.into_iter().map(|f| f.path).collect()).map_err(|e| e.to_string())
    }

    #[test]
    fn by_default_the_named_files_inside_writable_roots_are_bound() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (ws, out) = (base.join("ws"), base.join("out"));
        for d in [&ws, &out, &ws.join("sub")] {
            std::fs::create_dir_all(d).unwrap();
        }
        for f in [ws.join("x.sh"), ws.join("t.py"), ws.join("M"), out.join("o.sh")] {
            std::fs::write(f, "true\n").unwrap();
        }
        std::os::unix::fs::symlink(out.join("o.sh"), ws.join("link.sh")).unwrap();
        let sh = |s: &str| CommandView::Shell(s.into());
        let argv = |v: &[&str]| CommandView::Argv(v.iter().map(|s| s.to_string()).collect());
        let o = out.join("o.sh").display().to_string();
        let cases: Vec<(CommandView, Vec<PathBuf>)> = vec![
            (sh("bash x.sh"), vec![ws.join("x.sh")]),
            (sh("./x.sh && python3 t.py"), vec![ws.join("./x.sh"), ws.join("t.py")]),
            (argv(&["./x.sh"]), vec![ws.join("./x.sh")]),
            (argv(&["python3", "t.py"]), vec![ws.join("t.py")]),
            (argv(&["make", "-f", "M"]), vec![ws.join("M")]),
            (sh("make --file=M all"), vec![ws.join("M")]),
            // A link inside the workspace can be re-pointed: bound (its target's bytes).
            (sh("bash link.sh"), vec![ws.join("link.sh")]),
            // Outside every writable root, directories, missing files: not bound.
            (sh(&format!("bash {o}")), vec![]),
            (sh("ls sub missing.sh"), vec![]),
            // By default the plain words of a tricky string are still bound.
            (sh("cd sub && bash 'x.sh'"), vec![ws.join("x.sh")]),
        ];
        for (cmd, want) in cases {
            assert_eq!(bound(&ws, cmd.clone(), false).unwrap(), want, "{cmd:?}");
        }
        // Strict (--bind-script): files outside too; a tricky string is refused.
        assert_eq!(bound(&ws, sh(&format!("bash {o}")), true).unwrap(), vec![out.join("o.sh")]);
        assert!(bound(&ws, sh("cd sub && bash x.sh"), true).unwrap_err().contains("plain words"));
    }
}
