//! Protected git directories in all their forms: the workspace's `.git`, a gitfile's
//! target, nested repositories, submodules, bare repositories; reached by path, by
//! link, by rename, by mount tricks; and what host git would run later.

use super::{p, s, Class, Plan, Probe};
use crate::audit::fixture::{Fixture, Skip};
use crate::audit::watch::{Check, Sentinel, Tree};
use std::path::{Path, PathBuf};

/// The workspace as a repository; the watch on its whole `.git`.
fn repo(fx: &Fixture) -> Result<(PathBuf, Tree), Skip> {
    let ws = fx.git_repo(&fx.ws)?;
    let git = ws.join(".git");
    let tree = Tree::record(&git);
    Ok((git, tree))
}

/// `op` on paths inside the workspace's `.git`; the whole `.git` must stay as it was.
fn on_git(fx: &Fixture, op: &str, args: impl Fn(&Path) -> Vec<String>) -> Result<Plan, Skip> {
    let (git, tree) = repo(fx)?;
    let a = args(&git);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    Ok(Plan::op(fx, op, &a).watch(tree))
}

const EVIL_CONFIG: &str = "[core]\n\tfsmonitor = touch /tmp/pwned\n\thooksPath = /tmp/evil\n";

pub(super) fn probes() -> Vec<Probe> {
    use Class::Git as G;
    vec![
        p(G, "config-overwrite", "rewrite .git/config (hooksPath, fsmonitor); proves the repository's config is read-only", |fx| {
            on_git(fx, "overwrite", |g| vec![s(&g.join("config")), EVIL_CONFIG.into()])
        }),
        p(G, "hook-create", "create .git/hooks/pre-commit; proves no hook can be planted", |fx| {
            on_git(fx, "create", |g| vec![s(&g.join("hooks/pre-commit")), "#!/bin/sh\ntouch /tmp/pwned\n".into()])
        }),
        p(G, "head-append", "append to .git/HEAD; proves refs cannot be redirected", |fx| on_git(fx, "append", |g| vec![s(&g.join("HEAD"))])),
        p(G, "index-write", "rewrite .git/index; proves the index is protected", |fx| on_git(fx, "write", |g| vec![s(&g.join("index"))])),
        p(G, "unlink-head", "unlink .git/HEAD; proves files in .git cannot be deleted", |fx| on_git(fx, "unlink", |g| vec![s(&g.join("HEAD"))])),
        p(G, "mkdir", "mkdir inside .git; proves nothing new appears in it", |fx| on_git(fx, "mkdir", |g| vec![s(&g.join("evil"))])),
        p(G, "truncate-config", "truncate .git/config; proves truncation is refused there", |fx| {
            on_git(fx, "truncate", |g| vec![s(&g.join("config")), "0".into()])
        }),
        p(G, "relative-path", "write .git/config by the relative path sub/../.git/config; proves spelling does not matter", |fx| {
            fx.dir(&fx.ws.join("sub"));
            on_git(fx, "overwrite", |_| vec!["sub/../.git/config".into(), EVIL_CONFIG.into()])
        }),
        p(G, "rename-dotgit", "rename .git away; proves the directory itself cannot move", |fx| {
            let moved = s(&fx.ws.join("moved-git"));
            on_git(fx, "rename", |g| vec![s(g), moved.clone()])
        }),
        p(G, "rename-out", "move .git/refs out of .git; proves entries cannot be carried out", |fx| {
            let to = s(&fx.ws.join("refs"));
            on_git(fx, "rename", |g| vec![s(&g.join("refs")), to.clone()])
        }),
        p(G, "exchange-fake", "RENAME_EXCHANGE a prepared fake directory with .git; proves .git cannot be swapped", |fx| {
            let fake = fx.dir(&fx.ws.join("fake"));
            fx.file(&fake.join("config"), EVIL_CONFIG);
            on_git(fx, "exchange", |g| vec![s(&fake), s(g)])
        }),
        p(G, "rename-over-config", "rename a prepared file over .git/config; proves nothing can be renamed into .git", |fx| {
            let f = fx.file(&fx.ws.join("evil-config"), EVIL_CONFIG);
            on_git(fx, "rename", |g| vec![s(&f), s(&g.join("config"))])
        }),
        p(G, "replace-by-shell", "`mv .git .git-old && mkdir .git` then write a config; proves the directory cannot be replaced", |fx| {
            let (_, tree) = repo(fx)?;
            Ok(Plan::sh("mv .git .git-old; mkdir .git; printf '[core]\\n\\thooksPath=/tmp\\n' > .git/config; true").watch(tree))
        }),
        p(G, "symlink-write", "write .git/config through a new symlink in the workspace; proves links do not reach in", |fx| {
            let l = s(&fx.ws.join("cfg-link"));
            on_git(fx, "symlink-write", |g| vec![s(&g.join("config")), l.clone(), EVIL_CONFIG.into()])
        }),
        p(G, "hardlink-write", "hard-link .git/config into the workspace and write it; proves hard links do not reach in", |fx| {
            let l = s(&fx.ws.join("cfg-hl"));
            on_git(fx, "link-write", |g| vec![s(&g.join("config")), l.clone(), EVIL_CONFIG.into()])
        }),
        p(G, "planted-link", "create a hook through a symlink to .git planted before the run; proves planted links do not reach in", |fx| {
            let (git, tree) = repo(fx)?;
            let link = fx.ws.join("planted-gitdir");
            fx.symlink(&git, &link);
            Ok(Plan::op(fx, "create", &[&s(&link.join("hooks/pre-commit"))]).watch(tree))
        }),
        p(G, "tmpfile-linkat", "O_TMPFILE in the workspace linked in as .git/hooks/pre-push; proves anonymous files cannot be linked in", |fx| {
            let ws = s(&fx.ws);
            on_git(fx, "tmpfile-link", |g| vec![ws.clone(), s(&g.join("hooks/pre-push"))])
        }),
        p(G, "chmod", "chmod .git/config; proves metadata in .git is protected", |fx| {
            on_git(fx, "chmod", |g| vec![s(&g.join("config")), "0777".into()])
        }),
        p(G, "utimes", "set the times of .git/index; proves metadata in .git is protected", |fx| {
            on_git(fx, "utimes", |g| vec![s(&g.join("index"))])
        }),
        p(G, "setxattr", "set a user attribute on .git/config; proves attributes in .git are protected", |fx| {
            on_git(fx, "setxattr", |g| vec![s(&g.join("config")), "user.cordon-audit".into(), "x".into()])
        }),
        p(G, "remount-dotgit", "remount .git read-write, then write its config; proves the protection is not a mount the command can undo", |fx| {
            let (git, tree) = repo(fx)?;
            let cfg = s(&git.join("config"));
            Ok(Plan::op(fx, "remount-write", &[&s(&git), &cfg]).watch(tree).control_op(fx, "write", &[&cfg]).dangerous())
        }),
        p(G, "umount-dotgit", "unmount .git, then write its config; proves the protection cannot be peeled off", |fx| {
            let (git, tree) = repo(fx)?;
            let cfg = s(&git.join("config"));
            Ok(Plan::op(fx, "umount-write", &[&s(&git), &cfg]).watch(tree).control_op(fx, "write", &[&cfg]).dangerous())
        }),
        p(G, "gitfile-target", "write the config of a repository whose .git is a file pointing inside the workspace; proves pointer targets are protected", |fx| {
            let (real, tree) = separate_gitdir(fx)?;
            Ok(Plan::op(fx, "overwrite", &[&s(&real.join("config")), EVIL_CONFIG]).watch(tree))
        }),
        p(G, "gitfile-rewrite", "rewrite a .git pointer file to point elsewhere; proves the pointer itself is protected", |fx| {
            let (_, _) = separate_gitdir(fx)?;
            let ptr = fx.ws.join("linked/.git");
            let w = Sentinel::record(&ptr);
            Ok(Plan::op(fx, "overwrite", &[&s(&ptr), "gitdir: /tmp/evil\n"]).watch(w))
        }),
        p(G, "nested-repo", "plant a hook in a nested repository below the workspace; proves every repository under a writable root is protected", |fx| {
            fx.git_repo(&fx.ws)?;
            let nested = fx.git_repo(&fx.ws.join("vendor/lib"))?;
            let tree = Tree::record(&nested.join(".git"));
            Ok(Plan::op(fx, "create", &[&s(&nested.join(".git/hooks/post-checkout"))]).watch(tree))
        }),
        p(G, "submodule-gitdir", "rewrite the config of a submodule's git directory (.git/modules/NAME); proves submodule gitdirs are protected", |fx| {
            let (git, _) = repo(fx)?;
            let m = fx.dir(&git.join("modules/sub"));
            fx.file(&m.join("config"), "[core]\n\tbare = false\n");
            fx.dir(&fx.ws.join("sub"));
            fx.file(&fx.ws.join("sub/.git"), "gitdir: ../.git/modules/sub\n");
            Ok(Plan::op(fx, "overwrite", &[&s(&git.join("modules/sub/config")), EVIL_CONFIG]).watch(Tree::record(&git)))
        }),
        p(G, "bare-repo", "rewrite the config of a bare repository inside the workspace; proves bare repositories are protected", |fx| {
            if which::which("git").is_err() {
                return Err(Skip("no git on this host".into()));
            }
            let bare = fx.ws.join("store.git");
            fx.host_sh(&format!("git init -q --bare '{}'", bare.display()))?;
            let tree = Tree::record(&bare);
            Ok(Plan::op(fx, "overwrite", &[&s(&bare.join("config")), EVIL_CONFIG]).watch(tree))
        }),
        p(G, "fsmonitor-runs-later", "set core.fsmonitor with `git config`, then run host git status; proves nothing planted runs in the user's next git command", |fx| {
            fx.git_repo(&fx.ws)?;
            let marker = fx.outside.join("fsmonitor-ran");
            let cmd = format!("touch '{}'", marker.display());
            let ws = fx.ws.clone();
            let fx_home = fx.home.clone();
            let id = fx.id.clone();
            let check = Check {
                effect: move |_: &crate::audit::exec::RunOutput| {
                    host_git_status(&ws, &fx_home, &id);
                    marker.exists().then(|| "host `git status` ran the planted fsmonitor".to_string())
                },
                cleanup: || {},
            };
            Ok(Plan::sh(&format!("git config core.fsmonitor \"{cmd}\"; true")).watch(check))
        }),
        p(G, "new-hook-via-git", "`git config core.hooksPath` to a workspace directory holding a hook; proves git's own writes to .git are refused", |fx| {
            let (_, tree) = repo(fx)?;
            Ok(Plan::sh("mkdir -p hooks && git config core.hooksPath \"$PWD/hooks\"; true").watch(tree))
        }),
    ]
}

/// `ws/linked` checked out from a repository whose git directory is
/// `ws/linked/realgit` (the checkout's `.git` is a pointer file); its tree watched.
fn separate_gitdir(fx: &Fixture) -> Result<(PathBuf, Tree), Skip> {
    if which::which("git").is_err() {
        return Err(Skip("no git on this host".into()));
    }
    let ws = fx.dir(&fx.ws.join("linked"));
    fx.file(&ws.join("README"), "hello\n");
    let real = ws.join("realgit");
    fx.host_sh(&format!(
        "cd '{}' && git init -q -b main --separate-git-dir='{}' . && git add README && git commit -q -m init",
        ws.display(),
        real.display()
    ))?;
    let tree = Tree::record(&real);
    Ok((real, tree))
}

/// `git status` on the host, as the identity, in `ws` (what the user runs next).
fn host_git_status(ws: &Path, home: &Path, id: &crate::audit::exec::Identity) {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new("git");
    cmd.arg("status").current_dir(ws).env_clear().env("PATH", crate::audit::PATH_ENV).env("HOME", home);
    cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    if id.uid != cordon_stage::host::euid() {
        cmd.uid(id.uid).gid(id.gid);
    }
    let _ = cmd.status();
}
