//! Code the user runs later through host git (docs/threat-model.md, "code the user runs
//! later"): wherever host git looks for a repository's configuration or hooks when run
//! in a protected repository, a command cannot leave one behind. Judged by effect: a
//! marker file that a planted `core.fsmonitor` (or hook) would create when the user's
//! own `git status`, `git diff` and `git commit -a` run on the host afterwards. Every
//! case also plants the same thing directly on the host (the control: it does run
//! there), and checks that ordinary git work inside still works.

use super::*;

/// A superproject at `ws` (as the identity, on the host) with a submodule checked out
/// (`mods/in`), one registered but not checked out (`mods/out`), one registered whose
/// directory is gone (`gone`), a gitlink without a `.gitmodules` entry and without a
/// directory (`bare-link`), and a linked worktree inside the workspace (`wt`).
fn superproject(c: &Ctx) {
    let src = c.root.join("subsrc");
    c.mkdir(&src);
    c.file(&src.join("README"), "sub\n");
    c.host_sh(&format!("cd '{}' && git init -q -b main . && git add README && git commit -q -m sub", s(&src)));
    c.git_init();
    let add = |p: &str| format!("git -c protocol.file.allow=always submodule --quiet add '{}' {p}", s(&src));
    c.host_sh(&format!(
        "{} && {} && {} && git commit -q -m subs && git submodule --quiet deinit -f mods/out && \
         git submodule --quiet deinit -f gone && rmdir gone && \
         git update-index --add --cacheinfo 160000,$(git -C '{}' rev-parse HEAD),bare-link && \
         git commit -q -m link && git worktree add -q wt -b wtb && echo wt >> .git/info/exclude",
        add("mods/in"),
        add("mods/out"),
        add("gone"),
        s(&src)
    ));
    assert!(c.ws.join("mods/in/.git").is_file() && c.ws.join("mods/out").is_dir(), "layout");
    assert!(!c.ws.join("gone").exists() && c.ws.join("wt/.git").is_file(), "layout");
}

/// `git init` at `dir` (relative to the workspace) with a `core.fsmonitor` that creates
/// `marker`, as a shell snippet.
fn plant(dir: &str, marker: &Path) -> String {
    format!(
        "mkdir -p {dir} && git init -q {dir} && git -C {dir} config core.fsmonitor 'touch {m}; false'",
        m = s(marker)
    )
}

/// What the user does next on the host: `git status`, `git diff`, `git commit -a` in the
/// superproject (also with the settings that make git recurse into submodules more:
/// `status.submoduleSummary`, `diff.submodule=log`, `submodule.recurse`), `git
/// submodule status` and `git status` in the linked worktree.
fn host_git(c: &Ctx) {
    let recurse = ["-c", "status.submoduleSummary=true", "-c", "diff.submodule=log", "-c", "submodule.recurse=true"];
    let runs: [&[&str]; 6] = [
        &["status"],
        &["diff"],
        &[recurse[0], recurse[1], recurse[2], recurse[3], recurse[4], recurse[5], "status"],
        &[recurse[0], recurse[1], recurse[2], recurse[3], recurse[4], recurse[5], "diff"],
        &["submodule", "status"],
        &["commit", "-q", "-a", "--allow-empty", "-m", "after"],
    ];
    for args in runs {
        let _ = c
            .host_cmd("git")
            .args(args)
            .env("GIT_AUTHOR_NAME", "u")
            .env("GIT_AUTHOR_EMAIL", "u@x")
            .env("GIT_COMMITTER_NAME", "u")
            .env("GIT_COMMITTER_EMAIL", "u@x")
            .output();
    }
    let _ = c.host_cmd("git").args(["-C", "wt", "status"]).output();
}

/// The attacks of issue 25 (findings 1 and 2) and their siblings, one marker each.
fn attacks(c: &Ctx) -> Vec<(String, PathBuf)> {
    let m = |tag: &str| c.outside.join(format!("ran-{tag}-{}", c.unique()));
    let mut v = Vec::new();
    // 1. A registered submodule path that is not checked out.
    let k = m("not-checked-out");
    v.push((plant("mods/out", &k), k));
    // 2. Moving the folder that holds a protected gitfile, then planting in its place.
    let k = m("moved-holder");
    v.push((format!("mv mods/in mods/in.old; {}", plant("mods/in", &k)), k));
    // ... or an ancestor of it.
    let k = m("moved-ancestor");
    v.push((format!("mv mods mods.old; {}", plant("mods/in", &k)), k));
    // A registered path whose directory is gone, and a gitlink without .gitmodules.
    let k = m("gone");
    v.push((plant("gone", &k), k));
    let k = m("bare-link");
    v.push((plant("bare-link", &k), k));
    // A linked worktree moved away and replaced.
    let k = m("worktree");
    v.push((format!("mv wt wt.old; {}", plant("wt", &k)), k));
    // The workspace's own git directory renamed away and replaced.
    let k = m("own-git");
    v.push((format!("mv .git git.old; rm -rf .git; {}", plant(".", &k)), k));
    v
}

/// The controls inside: git reads, edits in the superproject and in the checked-out
/// submodule; `git submodule update --init` of the unpopulated one is refused (it
/// would write `.git/modules` and populate a registered path) and leaves nothing.
fn controls_inside(c: &Ctx, o: &RunOpts) -> Result<(), Skip> {
    let out = c.sh(
        o,
        "echo more >> README && echo sub-edit >> mods/in/README && git status --porcelain && git log --oneline -1 \
         && git -C mods/in status --porcelain && mkdir -p newdir/deeper && mv newdir newdir2 && rm -r newdir2",
    )?;
    out.assert_success();
    assert!(out.out().contains(" M README") && out.out().lines().count() >= 3, "git inside: {out:?}");
    let up = c.sh(o, "git -c protocol.file.allow=always submodule update --init mods/out")?;
    assert_ne!(up.exit_code(), Some(0), "submodule update of a registered path is refused: {up:?}");
    assert!(fs::read_dir(c.ws.join("mods/out")).unwrap().next().is_none(), "mods/out stays empty: {up:?}");
    Ok(())
}

case!(git_host_plants_at_registered_paths_run_nothing, |c| {
    superproject(c);
    let o = c.opts(WORKSPACE_WRITE);
    let attacks = attacks(c);
    for (script, _) in &attacks {
        c.sh(&o, &format!("{script}; true"))?;
    }
    host_git(c);
    for (script, marker) in &attacks {
        assert_absent(marker, &format!("host git ran what `{script}` planted"));
    }
    assert!(c.ws.join("mods/in/.git").is_file() && c.ws.join(".git/HEAD").is_file(), "the layout is intact");
    controls_inside(c, &o)?;
    // The control: the same plants, made on the host, do run at the user's next git.
    let (script, marker) = &attacks[0];
    c.host_sh(script);
    host_git(c);
    assert!(marker.exists(), "control: a planted fsmonitor at a registered path runs on the host");
    let (script, marker) = &attacks[1];
    c.host_sh(script);
    host_git(c);
    assert!(marker.exists(), "control: a repository planted in place of a moved submodule runs on the host");
});

case!(git_host_plants_reported_and_moved_aside, |c| {
    // What cannot be mounted over (a registered path whose directory is gone) is
    // checked when the run ends: moved aside and reported, whatever the command did.
    superproject(c);
    let marker = c.outside.join(format!("ran-gone-{}", c.unique()));
    let out = c.sh(&c.opts(WORKSPACE_WRITE), &plant("gone", &marker))?;
    out.assert_success();
    let j = out.j();
    let target = s(&c.ws.join("gone/.git")).to_string();
    let reported = j["sandbox"]["denials"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["target"] == target.as_str() && d["evidence"].as_str().unwrap_or("").contains("moved aside"));
    assert!(reported && j["sandbox"]["denied"] == true, "the plant is reported: {j}");
    assert!(!c.ws.join("gone/.git").exists(), "the plant is gone from where git looks: {j}");
    host_git(c);
    assert_absent(&marker, "host git ran the repository planted at a registered path");
});

case!(git_host_plants_through_serve_run_nothing, |c| {
    superproject(c);
    let attacks = attacks(c);
    let mut serve = ServeConn::start(c);
    for (i, (script, _)) in attacks.iter().enumerate() {
        let r = serve.call(i + 1, "run", serde_json::json!({"argv": ["/bin/sh", "-c", format!("{script}; true")]}));
        assert!(r.get("result").is_some(), "serve ran the request: {r}");
    }
    drop(serve);
    host_git(c);
    for (script, marker) in &attacks {
        assert_absent(marker, &format!("host git ran what `{script}` planted through serve"));
    }
});

case!(git_grant_commits_but_keeps_hooks_and_config, |c| {
    // The approver grants `.git` for one retry of a command that commits AND plants a
    // hook and `core.fsmonitor`: the commit lands, the plants do not, and the user's
    // next host `git status` and `git commit` run nothing planted.
    c.git_init();
    let count = || c.host_sh("git rev-list --count HEAD").trim().to_string();
    let hook = c.outside.join(format!("hook-ran-{}", c.unique()));
    let fsmon = c.outside.join(format!("fsmonitor-ran-{}", c.unique()));
    let approver = c.outside.join(format!("approve-{}.sh", c.unique()));
    c.file(&approver, "#!/bin/sh\ncat > /dev/null\nexit 0\n");
    set_mode(&approver, 0o755);
    let script = format!(
        "echo v2 >> README; git -c user.name=t -c user.email=t@x commit -q -am granted; st=$?; \
         printf '#!/bin/sh\\ntouch {h}\\n' > .git/hooks/post-commit; chmod +x .git/hooks/post-commit; \
         git config core.fsmonitor 'touch {f}; false'; git config core.hooksPath evil-hooks; \
         echo 'gitdir: /elsewhere' > .git/commondir; exit $st",
        h = s(&hook),
        f = s(&fsmon)
    );
    let mut o = c.opts(WORKSPACE_WRITE);
    o.extra_args = vec!["--approver".into(), s(&approver).into()];
    let out = c.sh(&o, &script)?;
    let j = out.j();
    assert_eq!(j["escalation"]["request"]["grant"]["path"], s(&c.ws.join(".git")), "{j}");
    assert_eq!(count(), "2", "the granted retry committed: {j}");
    assert!(!c.ws.join(".git/commondir").exists(), "a planted commondir is moved aside: {j}");
    c.host_sh("echo more >> README && git status --porcelain >/dev/null && git commit -q -am host");
    assert_absent(&hook, "a hook planted under a .git grant ran at the user's next commit");
    assert_absent(&fsmon, "a core.fsmonitor planted under a .git grant ran at the user's next status");
    // The control: the same hook written on the host runs at the next commit.
    c.host_sh(&format!(
        "printf '#!/bin/sh\\ntouch {h}\\n' > .git/hooks/post-commit && chmod +x .git/hooks/post-commit && \
         echo again >> README && git commit -q -am control",
        h = s(&hook)
    ));
    assert!(hook.exists(), "control: a post-commit hook runs on the host");
});

case!(git_many_repositories_all_protected, |c| {
    // A writable root holding more git directories than the old mount budget (256), as
    // a `~/src` of clones does: the last one found is as protected as the first (its
    // git directory read-only, its folder not movable), and ordinary work still runs.
    const REPOS: usize = 300;
    let src = c.outside.join("src");
    c.mkdir(&src);
    for i in 0..REPOS {
        let git = src.join(format!("r{i:03}/.git"));
        for d in ["objects", "refs/heads", "hooks"] {
            fs::create_dir_all(git.join(d)).unwrap();
        }
        fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    }
    c.host_sh(&format!("chown -R {}:{} '{}' 2>/dev/null || true", c.id.uid, c.id.gid, s(&src)));
    let mut o = c.opts(WORKSPACE_WRITE);
    o.writable.push(src.clone());
    let marker = c.outside.join(format!("ran-many-{}", c.unique()));
    let last = src.join(format!("r{:03}", REPOS - 1));
    let out = c.sh(
        &o,
        &format!(
            "cd '{src}' && echo x > r000/file && rm r000/file && \
             mkdir -p r299/.git/hooks 2>/dev/null; printf '#!/bin/sh\\ntouch {m}\\n' > r299/.git/hooks/post-commit; \
             mv r299 moved; mkdir -p r299 && git init -q r299 && git -C r299 config core.fsmonitor 'touch {m}; false'; \
             echo done",
            src = s(&src),
            m = s(&marker)
        ),
    )?;
    assert!(out.out().contains("done"), "{out:?}");
    let protected = out.j()["sandbox"]["protected"].as_array().map(|a| a.len()).unwrap_or(0);
    assert!(protected >= REPOS, "every git directory is protected ({protected}): {out:?}");
    assert!(last.join(".git/HEAD").is_file() && !src.join("moved").exists(), "r299 stayed where it was: {out:?}");
    assert!(!last.join(".git/hooks/post-commit").exists() && !last.join(".git/config").exists(), "{out:?}");
    let _ = c.host_cmd("git").args(["-C", s(&last), "status"]).output();
    assert_absent(&marker, "host git ran what was planted in the 300th repository");
});

/// A command that turns the tracked file `path` (relative to the workspace) into a
/// repository with a commit (so git can record it as a submodule) and a
/// `core.fsmonitor` that creates `marker`, as a shell snippet.
fn plant_in_tracked(path: &str, marker: &Path) -> String {
    format!(
        "rm {path} && mkdir {path} && git init -q {path} && echo x > {path}/x && git -C {path} add x && \
         git -C {path} -c user.name=t -c user.email=t@x commit -q -m x && \
         git -C {path} config core.fsmonitor 'touch {m}; false'",
        m = s(marker)
    )
}

/// [`host_git`], then `git status` once more: after `git commit -a` recorded a planted
/// repository as a submodule, the next status is the one that runs git there.
fn host_git_then_status(c: &Ctx) {
    host_git(c);
    let _ = c.host_cmd("git").arg("status").output();
}

case!(git_host_tracked_file_made_a_repository_runs_nothing, |c| {
    // A tracked file replaced by a repository: host `git status` shows it modified,
    // `git commit -a` records it as a submodule without a word, and every `git status`
    // after that runs git in it (its `core.fsmonitor`). Moved aside when the run ends.
    c.git_init();
    c.mkdir(&c.ws.join("lib"));
    c.file(&c.ws.join("lib/tool.sh"), "echo tool\n");
    c.file(&c.ws.join("control.txt"), "control\n");
    c.host_sh("git add lib/tool.sh control.txt && git commit -q -m tool");
    let top = c.outside.join(format!("ran-tracked-top-{}", c.unique()));
    let deep = c.outside.join(format!("ran-tracked-deep-{}", c.unique()));
    let script =
        format!("{}; {}; echo planted", plant_in_tracked("README", &top), plant_in_tracked("lib/tool.sh", &deep));
    let out = c.sh(&c.opts(WORKSPACE_WRITE), &script)?;
    assert!(out.out().contains("planted"), "the plant ran inside: {out:?}");
    let j = out.j();
    for p in ["README/.git", "lib/tool.sh/.git"] {
        let target = s(&c.ws.join(p)).to_string();
        let reported =
            j["sandbox"]["denials"].as_array().unwrap().iter().any(|d| {
                d["target"] == target.as_str() && d["evidence"].as_str().unwrap_or("").contains("moved aside")
            });
        assert!(reported, "{p} is reported moved aside: {j}");
        assert!(!c.ws.join(p).exists(), "{p} is gone from where git looks: {j}");
    }
    host_git_then_status(c);
    assert_absent(&top, "host git ran a repository planted in place of a tracked file");
    assert_absent(&deep, "host git ran a repository planted in place of a tracked file in a directory");
    // Work inside is unchanged: a tracked file made a plain directory, and a nested
    // repository made in an untracked directory, are left alone.
    let out = c.sh(&c.opts(WORKSPACE_WRITE), "mkdir -p lib/tool.sh && git init -q newrepo && echo done")?;
    assert!(out.out().contains("done") && c.ws.join("newrepo/.git").is_dir(), "{out:?}");
    // The control: the same plant made on the host runs at the user's next git.
    c.host_sh(&plant_in_tracked("control.txt", &top));
    host_git_then_status(c);
    assert!(top.exists(), "control: a tracked file made a repository on the host runs at the next git status");
});

case!(git_host_held_writes_plant_nothing, |c| {
    // Writes held back while an approver may be asked are applied when nobody needs
    // asking. Applying never writes a sentinel itself, but it did write a symlink on
    // the way to one (an included config file that does not exist yet) and a tracked
    // file made a repository: checked again once applied, both moved aside. (The bwrap
    // runner holds nothing back: the check at the run's end does it.)
    c.git_init();
    c.host_sh("git config include.path ../inc/extra.cfg");
    let inc = c.outside.join(format!("ran-held-include-{}", c.unique()));
    let tracked = c.outside.join(format!("ran-held-tracked-{}", c.unique()));
    let approver = c.outside.join(format!("approve-{}.sh", c.unique()));
    c.file(&approver, "#!/bin/sh\ncat > /dev/null\nexit 0\n");
    set_mode(&approver, 0o755);
    let mut o = c.opts(WORKSPACE_WRITE);
    o.extra_args =
        vec!["--approver".into(), s(&approver).into(), "--audit-log".into(), s(&c.outside.join("audit.jsonl")).into()];
    let script = format!(
        "mkdir evil && printf '[core]\\n\\tfsmonitor = \"touch {m}; false\"\\n' > evil/extra.cfg && ln -s evil inc && \
         {}; echo ok > ordinary",
        plant_in_tracked("README", &tracked),
        m = s(&inc)
    );
    let out = c.sh(&o, &script)?;
    let j = out.j();
    assert_eq!(fs::read_to_string(c.ws.join("ordinary")).unwrap(), "ok\n", "control: the run's change: {out:?}");
    if c.runner != "bwrap" {
        assert_eq!(j["held"]["fate"], "applied", "{out:?}");
        let skipped = j["held"]["skipped"].to_string();
        assert!(skipped.contains("moved aside"), "what was moved aside is listed: {out:?}");
    }
    assert!(fs::symlink_metadata(c.ws.join("inc")).is_err(), "the symlink is gone from where git looks: {j}");
    host_git_then_status(c);
    assert_absent(&inc, "host git ran a config file included through a symlink a held run planted");
    assert_absent(&tracked, "host git ran a repository a held run planted in place of a tracked file");
    // The control: the same symlink made on the host is followed by the user's next git.
    c.host_sh("ln -s evil inc");
    let _ = c.host_cmd("git").arg("status").output();
    assert!(inc.exists(), "control: an include reached through a symlink runs on the host");
});

case!(git_host_plants_cannot_keep_cordon_from_moving_them, |c| {
    // What the command plants is moved aside whatever it does to keep it there: names
    // made in advance for every quarantine name cordon would pick (the seconds and
    // cordon's pid are guessable: GIT_CONFIG_GLOBAL names the pid), a holder made
    // read-only, one made unsearchable, a parent directory made unreadable (an
    // unprivileged cordon has no capability to override them).
    c.git_init();
    for d in ["d3", "d4"] {
        c.mkdir(&c.ws.join(d));
    }
    for f in ["t1", "t2", "d3/t3", "d4/t4"] {
        c.file(&c.ws.join(f), "t\n");
    }
    c.host_sh("git add t1 t2 d3/t3 d4/t4 && git commit -q -m files");
    let markers: Vec<PathBuf> = (1..=4).map(|i| c.outside.join(format!("ran-kept-{i}-{}", c.unique()))).collect();
    let script = format!(
        "{p1} && pid=$(echo \"$GIT_CONFIG_GLOBAL\" | sed 's/.*-run-\\([0-9]*\\)-.*/\\1/') && now=$(date +%s) && \
         for t in $(seq $now $((now + 3))); do touch t1/.git.cordon-quarantine-$t-$pid; \
         for n in $(seq 1 99); do touch t1/.git.cordon-quarantine-$t-$pid-$n; done; done; \
         {p2} && chmod 555 t2; {p3} && chmod 0 d3/t3; {p4} && chmod 0 d4; echo planted",
        p1 = plant_in_tracked("t1", &markers[0]),
        p2 = plant_in_tracked("t2", &markers[1]),
        p3 = plant_in_tracked("d3/t3", &markers[2]),
        p4 = plant_in_tracked("d4/t4", &markers[3]),
    );
    let out = c.sh(&c.opts(WORKSPACE_WRITE), &script)?;
    assert!(out.out().contains("planted"), "the plants ran inside: {out:?}");
    let evidence = out.j()["sandbox"]["denials"].to_string();
    assert!(!evidence.contains("NOT moved"), "every plant was moved aside: {out:?}");
    for p in ["t1/.git", "t2/.git", "d3/t3/.git", "d4/t4/.git"] {
        assert!(fs::symlink_metadata(c.ws.join(p)).is_err(), "{p} is gone from where git looks: {out:?}");
    }
    host_git_then_status(c);
    for (i, m) in markers.iter().enumerate() {
        assert_absent(m, &format!("host git ran plant {} that tried to stay where it was", i + 1));
    }
});
