#!/usr/bin/env bash
# The everyday matrix: ordinary agent commands (build, test, lint and package tools of
# Python, Node, Go and Rust, plus git, make and the shell) run through
# `cordon run --mode workspace-write` with no extra flags, offline, in a fresh
# workspace. Prints one line per command (PASS, FAIL with the last line of its stderr,
# or SKIP when the tool is not installed or the command fails on the host too: each
# command also runs unconfined in a twin workspace, so only what works without cordon
# counts) and the share that passed.
#
# Usage: bench/everyday.sh [--cordon PATH] [--keep]
#   --cordon PATH  the cordon binary (default: target/release/cordon, else target/debug/cordon)
#   --keep         keep the scratch workspace (printed at the end)
# Scratch files go into a fresh directory under $EVERYDAY_BASE (default /tmp: a
# workspace under /tmp works like any other).
#
# It is a measurement, not a test: it exits 0 whatever the share, and 2 when cordon
# itself cannot run.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cordon=""
keep=0
while [ $# -gt 0 ]; do
    case "$1" in
        --cordon) cordon=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        -h|--help) sed -n 2,16p "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
if [ -z "$cordon" ]; then
    for c in "${CARGO_TARGET_DIR:-$here/target}/release/cordon" "${CARGO_TARGET_DIR:-$here/target}/debug/cordon"; do
        [ -x "$c" ] && { cordon=$c; break; }
    done
fi
[ -x "$cordon" ] || { echo "no cordon binary (build it, or pass --cordon)" >&2; exit 2; }
# The matrix's cargo commands build in their own project, not in cordon's target dir.
unset CARGO_TARGET_DIR

base=${EVERYDAY_BASE:-/tmp}
scratch=$(mktemp -d "$base/cordon-everyday-XXXXXX")
ws=$scratch/ws
host_ws=$scratch/host-ws
mkdir -p "$ws" "$host_ws"
cleanup() { [ "$keep" = 1 ] || rm -rf "$scratch"; }
trap cleanup EXIT
"$cordon" run -q --cwd "$ws" -- true || { echo "cordon cannot run a command here" >&2; exit 2; }

pass=0 fail=0 skip=0
failures=()
# run NAME NEEDS CMD: run CMD (bash) in the workspace; NEEDS is a program that must exist.
run() {
    local name=$1 needs=$2 cmd=$3
    if [ -n "$needs" ] && ! command -v "$needs" >/dev/null 2>&1; then
        printf 'SKIP  %-34s (%s not installed)\n' "$name" "$needs"
        skip=$((skip + 1))
        return
    fi
    if ! (cd "$host_ws" && bash -c "$cmd") >/dev/null 2>&1; then
        printf 'SKIP  %-34s (fails on the host too)\n' "$name"
        skip=$((skip + 1))
        return
    fi
    local err
    err=$("$cordon" run -q --mode workspace-write --cwd "$ws" --timeout 300 -- bash -c "$cmd" 2>&1 >/dev/null)
    local rc=$?
    if [ $rc -eq 0 ]; then
        printf 'PASS  %s\n' "$name"
        pass=$((pass + 1))
    else
        local last
        last=$(printf '%s\n' "$err" | grep -v '^\s*$' | tail -n 1 | cut -c1-160)
        printf 'FAIL  %-34s rc=%s: %s\n' "$name" "$rc" "$last"
        fail=$((fail + 1))
        failures+=("$name")
    fi
}

# --- fixtures (made on the host, as a checkout would be), in both workspaces ---
fixtures() {
local ws=$1
mkdir -p "$ws/py/pkg" "$ws/py/tests" "$ws/node" "$ws/go" "$ws/c" "$ws/repo"
cat > "$ws/py/pkg/__init__.py" <<'EOF'
def add(a, b):
    return a + b
EOF
cat > "$ws/py/tests/test_add.py" <<'EOF'
import unittest
from pkg import add

class T(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(1, 2), 3)
EOF
cat > "$ws/py/pyproject.toml" <<'EOF'
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "pkg"
version = "0.1.0"
EOF
echo "pip" > "$ws/py/requirements.txt"
cat > "$ws/node/package.json" <<'EOF'
{"name": "demo", "version": "1.0.0", "private": false,
 "scripts": {"test": "node test.js", "build": "node build.js"}}
EOF
echo 'const assert = require("assert"); assert.strictEqual(1 + 1, 2); console.log("ok");' > "$ws/node/test.js"
echo 'require("fs").mkdirSync("dist", {recursive: true}); require("fs").writeFileSync("dist/out.js", "x");' > "$ws/node/build.js"
cat > "$ws/go/go.mod" <<'EOF'
module example.com/demo

go 1.18
EOF
printf 'package main\n\nfunc main() { println("hi") }\n' > "$ws/go/main.go"
printf 'package main\n\nimport "testing"\n\nfunc TestX(t *testing.T) {}\n' > "$ws/go/main_test.go"
printf '#include <stdio.h>\nint main(void){puts("hi");return 0;}\n' > "$ws/c/hello.c"
printf 'hello: hello.c\n\tcc -o hello hello.c\n' > "$ws/c/Makefile"
(cd "$ws/repo" && git init -q -b main . && echo a > a.txt && git add a.txt \
    && git -c user.name=b -c user.email=b@x commit -q -m init) || true
}
fixtures "$ws"
fixtures "$host_ws"

# --- the matrix ---
run "shell: write in the workspace"      ""       'echo x > f.txt && cat f.txt'
run "shell: TMPDIR scratch file"         ""       't=$(mktemp) && echo x > "$t"'
run "shell: sed -i an edit"             sed      'echo old > e.txt && sed -i s/old/new/ e.txt && grep -q new e.txt'
run "shell: grep -rn and find"          grep     'grep -rn add py >/dev/null && find . -name "*.py" | grep -q .'
run "shell: tar an archive"             tar      'tar czf py.tgz py && tar tzf py.tgz >/dev/null'
run "shell: diff and patch"             patch    'printf "a\n" > p1 && printf "b\n" > p2 && { diff -u p1 p2 > d.patch || true; } && patch -s p1 d.patch'
run "shell: mkdir in XDG_CACHE_HOME"     ""       'mkdir -p "${XDG_CACHE_HOME:-$HOME/.cache}/x"'
run "shell: mkdir -p ~/.cache/x"         ""       'mkdir -p ~/.cache/cordon-everyday && rmdir ~/.cache/cordon-everyday'
run "python: run a script"               python3  'cd py && python3 -c "import pkg; print(pkg.add(1,2))"'
run "python: unittest"                   python3  'cd py && python3 -m unittest -q'
run "python: compileall"                 python3  'cd py && python3 -m compileall -q .'
run "python: venv"                       python3  'cd py && python3 -m venv .venv'
run "python: pip list (venv)"            python3  'cd py && .venv/bin/pip list --disable-pip-version-check'
run "python: pip install satisfied req"  python3  'cd py && .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt'
run "python: pip install -e (no index)"  python3  'cd py && .venv/bin/pip install -q --disable-pip-version-check --no-index --no-build-isolation -e .'
run "python: pip wheel (no index)"       python3  'cd py && .venv/bin/pip wheel -q --disable-pip-version-check --no-index --no-build-isolation --no-deps -w dist .'
run "python: pip list (user python)"     python3  'python3 -m pip list --disable-pip-version-check'
run "python: pip cache dir"              python3  'python3 -m pip cache dir'
run "node: run a script"                 node     'cd node && node test.js'
run "node: npm test"                     npm      'cd node && npm test --silent'
run "node: npm run build"                npm      'cd node && npm run build --silent'
run "node: npm install (no deps)"        npm      'cd node && npm install --no-audit --no-fund'
run "node: npm ci"                       npm      'cd node && npm ci --no-audit --no-fund'
run "node: npm ls"                       npm      'cd node && npm ls'
run "node: npm pack"                     npm      'cd node && npm pack --silent'
run "node: npx a local bin"              npx      'cd node && npx --no-install node -e 1'
run "go: build"                          go       'cd go && go build ./...'
run "go: test"                           go       'cd go && go test ./...'
run "go: vet"                            go       'cd go && go vet ./...'
run "go: fmt"                            gofmt    'cd go && gofmt -l .'
run "rust: cargo new"                    cargo    'cargo new -q --vcs none rs'
run "rust: cargo build --offline"        cargo    'cd rs && cargo build -q --offline'
run "rust: cargo check --offline"        cargo    'cd rs && cargo check -q --offline'
run "rust: cargo run --offline"          cargo    'cd rs && cargo run -q --offline'
run "rust: cargo test --offline"         cargo    'cd rs && cargo test -q --offline'
run "rust: cargo fmt --check"            cargo    'cd rs && cargo fmt --check'
run "rust: cargo clippy --offline"       cargo    'cd rs && cargo clippy -q --offline'
run "rust: cargo doc --offline"          cargo    'cd rs && cargo doc -q --offline --no-deps'
run "rust: cargo package --offline"      cargo    'cd rs && cargo package -q --offline --allow-dirty --no-verify'
run "rust: rustc a file"                 rustc    'cd rs && rustc --edition 2021 -o hello src/main.rs'
run "c: make"                            make     'cd c && make -s'
run "git: status"                        git      'cd repo && git status --short'
run "git: log"                           git      'cd repo && git log --oneline'
run "git: diff"                          git      'cd repo && echo b >> a.txt && git diff --stat'
run "git: init a new repo"               git      'mkdir fresh && cd fresh && git init -q'
run "git: add (existing repo)"           git      'cd repo && git add a.txt'
run "git: commit (existing repo)"        git      'cd repo && git -c user.name=b -c user.email=b@x commit -qam change'
run "git: stash"                         git      'cd repo && echo c >> a.txt && git stash -q'
run "git: checkout -b"                   git      'cd repo && git checkout -q -b topic'
run "git: config --global"               git      'git config --global --get-regexp . >/dev/null; git config --global cordon.everyday x && git config --global --unset cordon.everyday'

# The same .git commands under review: an approver that says yes to the narrow grant
# cordon asks for ("write <repo>/.git" for one retry, still workspace-write, offline).
# Not counted in the share above (they change the command line).
approver=$scratch/approve.sh
printf '#!/bin/sh\ncat > /dev/null\nexit 0\n' > "$approver"
chmod 755 "$approver"
echo "--- with --approver granting the narrow grant (not counted above)"
for pair in "git: add|cd repo && echo d >> a.txt && git add a.txt" \
            "git: commit|cd repo && git -c user.name=b -c user.email=b@x commit -qam granted" \
            "git: stash|cd repo && echo e >> a.txt && git stash -q" \
            "git: checkout -b|cd repo && git checkout -q -b granted"; do
    name=${pair%%|*} cmd=${pair#*|}
    command -v git >/dev/null 2>&1 || break
    if err=$("$cordon" run -q --mode workspace-write --cwd "$ws" --approver "$approver" -- bash -c "$cmd" 2>&1 >/dev/null); then
        printf 'PASS  %s (granted: %s)\n' "$name" "$(printf '%s\n' "$err" | grep -o 'grant `[^`]*`' | head -n 1)"
    else
        printf 'FAIL  %s: %s\n' "$name" "$(printf '%s\n' "$err" | tail -n 1 | cut -c1-160)"
    fi
done

total=$((pass + fail))
echo "---"
if [ $total -gt 0 ]; then
    echo "passed $pass of $total ($((100 * pass / total))%), skipped $skip (tool missing, or failing on the host too)"
fi
[ ${#failures[@]} -gt 0 ] && printf 'failed: %s\n' "${failures[@]}"
[ "$keep" = 1 ] && echo "workspace kept: $ws"
exit 0
