#!/usr/bin/env bash
# What protecting where host git looks costs per spawn (docs/architecture.md, "Policy
# resolution"; docs/performance.md): `cordon run --mode workspace-write -- true` in
# workspaces of increasing git weight, with hyperfine, for one binary or two side by
# side (an A/B against an older build):
#
#   plain        a repository of 300 tracked files (index ~30 KiB)
#   superproject two submodules (one checked out, one not) and a linked worktree
#   big-index    a repository whose index holds 100 000 entries (~9 MiB)
#   clones-N     a directory of N small clones (a `~/src`): N git directories, each
#                read-only, each folder a mount point (N in $CLONES, default "250 1000")
#
# Usage: bench/git_layout.sh NEW [BASE]   (paths of cordon binaries, release builds)
#   RUNS=N (default 30), RUNNER=landlock|bwrap (default landlock), CLONES="250 1000"
# Scratch trees under ${BENCH_TMPDIR:-/var/tmp}; removed on exit. A benchmark, not a
# test: it exits non-zero only when cordon fails to run.
set -euo pipefail
new=${1:?usage: bench/git_layout.sh NEW [BASE]}
base=${2:-}
runs=${RUNS:-30}
runner=${RUNNER:-landlock}
clones=${CLONES:-250 1000}
command -v hyperfine >/dev/null || { echo "git_layout.sh: hyperfine is needed" >&2; exit 2; }
work=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/cordon-git-layout-XXXXXX")
trap 'rm -rf "$work"' EXIT
export GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b
git_() { git -c init.defaultBranch=main -c protocol.file.allow=always "$@"; }

# plain: 300 tracked files.
mkdir -p "$work/plain"
(cd "$work/plain" && git_ init -q . && for i in $(seq 1 300); do echo "$i" > "f$i"; done && git_ add -A && git_ commit -qm init)
# superproject.
git_ init -q "$work/sub-src" && git_ -C "$work/sub-src" commit -q --allow-empty -m s
mkdir -p "$work/super" && (cd "$work/super" && git_ init -q . && echo x > f && git_ add f &&
    git_ submodule -q add "$work/sub-src" in && git_ submodule -q add "$work/sub-src" out &&
    git_ commit -qm subs && git_ submodule -q deinit -f out && git_ worktree add -q wt -b w &&
    echo wt >> .git/info/exclude)
# big-index: 100 000 entries written straight into the index.
mkdir -p "$work/big" && (cd "$work/big" && git_ init -q . &&
    blob=$(echo x | git_ hash-object -w --stdin) &&
    awk -v b="$blob" 'BEGIN { for (i = 0; i < 100000; i++) printf "100644 %s\td%d/f%d\n", b, i % 1000, i }' |
        git_ update-index --index-info)
# clones-N: N copies of one small repository.
mkdir -p "$work/tmpl" && (cd "$work/tmpl" && git_ init -q . && for i in $(seq 1 10); do echo "$i" > "f$i"; done &&
    git_ add -A && git_ commit -qm t)
cases=(plain super big)
for n in $clones; do
    mkdir -p "$work/clones-$n"
    for i in $(seq 1 "$n"); do cp -a "$work/tmpl" "$work/clones-$n/r$i"; done
    cases+=("clones-$n")
done

for c in "${cases[@]}"; do
    ws="$work/$c"
    args=(-N --warmup 3 --runs "$runs" --style basic)
    cmds=()
    for bin in "$new" ${base:+"$base"}; do
        if "$bin" run --runner "$runner" --mode workspace-write --cwd "$ws" -- true >/dev/null 2>&1; then
            cmds+=("$bin run --runner $runner --mode workspace-write --cwd $ws -- true")
        else
            echo "== $c: $bin refuses: $("$bin" run --runner "$runner" --mode workspace-write --cwd "$ws" -- true 2>&1 | tail -1)"
        fi
    done
    [ ${#cmds[@]} -gt 0 ] || continue
    hyperfine "${args[@]}" --export-json "$work/$c.json" "${cmds[@]}" >/dev/null 2>&1
    # Medians (the machine may be busy: the mean is not robust), and CPU time.
    python3 - "$work/$c.json" "$c" <<'PY'
import json, statistics, sys
runs = json.load(open(sys.argv[1]))["results"]
for i, r in enumerate(runs):
    who = "new " if i == 0 else "base"
    med = statistics.median(r["times"]) * 1000
    cpu = (statistics.median(r["user"]) if "user" in r and isinstance(r["user"], list) else r["user"]) * 1000
    sysm = (statistics.median(r["system"]) if isinstance(r["system"], list) else r["system"]) * 1000
    print(f"{sys.argv[2]:>12} {who}: median {med:7.1f} ms  (user {cpu:5.1f} ms, system {sysm:5.1f} ms)")
if len(runs) == 2:
    d = (statistics.median(runs[0]["times"]) - statistics.median(runs[1]["times"])) * 1000
    print(f"{sys.argv[2]:>12} new - base: {d:+.1f} ms")
PY
done
