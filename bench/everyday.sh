#!/usr/bin/env bash
# The everyday matrix: ordinary agent commands (build, test, lint and package tools of
# Python, Node, Go and Rust, plus git, make and the shell; a test suite with its own
# loopback server, unix sockets, multiprocessing, the host's /tmp, package installs
# through cordon's proxy, Ctrl-C on a terminal) run through `cordon run --mode
# workspace-write`, in a fresh workspace. Prints one line per command (PASS, FAIL with
# the last line of its stderr, or SKIP when the tool is not installed or the command
# fails on the host too: each command also runs unconfined in a twin workspace, so
# only what works without cordon counts) and the share that passed.
#
# Usage: bench/everyday.sh [--cordon PATH] [--runner R] [--as USER] [--allow-host P]...
#                          [--tsv FILE] [--keep]
#   --cordon PATH    the cordon binary (default: target/release/cordon, else target/debug/cordon)
#   --runner R       pass `--runner R` to every run (landlock, bwrap; default: cordon's auto)
#   --as USER        run the whole matrix as USER (from root: setpriv, a clean environment
#                    with USER's home; PATH from $EVERYDAY_USER_PATH, else the system's)
#   --allow-host P   add `--allow-host P` to the rows that go through cordon's proxy (where
#                    registry names resolve to special-purpose addresses, their range)
#   --tsv FILE       also write `STATUS<TAB>NAME<TAB>DETAIL` per row to FILE
#   --only REGEX     run only the rows whose name matches REGEX (grep -E)
#   --keep           keep the scratch directories (printed at the end)
# The workspace goes into a fresh directory under $EVERYDAY_BASE (default /var/tmp); the
# host files the matrix reads from outside it into a fresh directory under /tmp (and one
# under /dev/shm and ~/.cache), made before the runs as a checkout or a build would be.
# Rows judge the real outcome: a file exists, an output matches, the tool's own exit
# status; a few judge cordon's report too (no denial where the host alone refuses).
#
# It is a measurement, not a test: it exits 0 whatever the share, and 2 when cordon
# itself cannot run.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
self=$here/bench/everyday.sh
cordon="" runner="" as_user="" tsv="" only="" keep=0
allow=()
while [ $# -gt 0 ]; do
    case "$1" in
        --cordon) cordon=$2; shift 2 ;;
        --runner) runner=$2; shift 2 ;;
        --as) as_user=$2; shift 2 ;;
        --allow-host) allow+=(--allow-host "$2"); shift 2 ;;
        --tsv) tsv=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        -h|--help) sed -n 2,29p "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
if [ -z "$cordon" ]; then
    for c in "${CARGO_TARGET_DIR:-$here/target}/release/cordon" "${CARGO_TARGET_DIR:-$here/target}/debug/cordon"; do
        [ -x "$c" ] && { cordon=$c; break; }
    done
fi
[ -x "$cordon" ] || { echo "no cordon binary (build it, or pass --cordon)" >&2; exit 2; }
cordon=$(cd "$(dirname "$cordon")" && pwd)/$(basename "$cordon")

# --as USER: the same script again, as that user, with that user's own environment.
if [ -n "$as_user" ] && [ "$(id -un)" != "$as_user" ]; then
    home=$(getent passwd "$as_user" | cut -d: -f6)
    [ -n "$home" ] || { echo "no user $as_user" >&2; exit 2; }
    # The same options again, paths made absolute (the user starts elsewhere).
    rest=(--cordon "$cordon" "${allow[@]}")
    [ -n "$runner" ] && rest+=(--runner "$runner")
    [ -n "$only" ] && rest+=(--only "$only")
    [ "$keep" = 1 ] && rest+=(--keep)
    if [ -n "$tsv" ]; then
        case "$tsv" in /*) ;; *) tsv=$PWD/$tsv ;; esac
        : > "$tsv" && chown "$as_user" "$tsv"
        rest+=(--tsv "$tsv")
    fi
    cd / || exit 2
    exec setpriv --reuid "$as_user" --regid "$(id -g "$as_user")" --init-groups \
        env -i HOME="$home" USER="$as_user" LOGNAME="$as_user" LANG=C.UTF-8 \
        PATH="${EVERYDAY_USER_PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}" \
        bash "$self" "${rest[@]}"
fi

# The matrix's cargo commands build in their own projects, not in cordon's target dir.
unset CARGO_TARGET_DIR
runner_args=()
[ -n "$runner" ] && runner_args=(--runner "$runner")

base=${EVERYDAY_BASE:-/var/tmp}
scratch=$(mktemp -d "$base/cordon-everyday-XXXXXX")
ws=$scratch/ws
host_ws=$scratch/host-ws
# Host files outside the workspace, where the issue-26 classes read them.
htmp=$(mktemp -d /tmp/cordon-everyday-host-XXXXXX)
hshm=$(mktemp -d /dev/shm/cordon-everyday-XXXXXX 2>/dev/null || true)
hcache=""
if mkdir -p "$HOME/.cache" 2>/dev/null; then
    hcache=$(mktemp -d "$HOME/.cache/cordon-everyday-XXXXXX" 2>/dev/null || true)
fi
mkdir -p "$ws" "$host_ws"
cleanup() {
    [ "$keep" = 1 ] && return
    rm -rf "$scratch" "$htmp"
    [ -n "$hshm" ] && rm -rf "$hshm"
    [ -n "$hcache" ] && rm -rf "$hcache"
}
trap cleanup EXIT
if ! out=$("$cordon" run -q --mode workspace-write "${runner_args[@]}" --cwd "$ws" -- true 2>&1); then
    echo "cordon cannot run a command here: $out" >&2
    exit 2
fi

pass=0 fail=0 skip=0
failures=()
[ -n "$tsv" ] && : > "$tsv"
# record STATUS NAME DETAIL: print a row and count it.
record() {
    local status=$1 name=$2 detail=$3
    case "$status" in
        PASS) pass=$((pass + 1)); printf 'PASS  %s\n' "$name" ;;
        FAIL) fail=$((fail + 1)); failures+=("$name"); printf 'FAIL  %-44s %s\n' "$name" "$detail" ;;
        SKIP) skip=$((skip + 1)); printf 'SKIP  %-44s (%s)\n' "$name" "$detail" ;;
        # Not counted in the share: the protections the matrix checks on the way.
        KEPT|LEAK) printf '%-4s  %-44s %s\n' "$status" "$name" "$detail" ;;
    esac
    [ -n "$tsv" ] && printf '%s\t%s\t%s\n' "$status" "$name" "$detail" >> "$tsv"
}
# chosen NAME: whether --only lets the row run (the row's settings are reset if not).
chosen() {
    [ -z "$only" ] && return 0
    printf '%s\n' "$1" | grep -Eq -- "$only" && return 0
    FLAGS=() ROWENV=() TWINENV=()
    return 1
}
last_line() { printf '%s\n' "$1" | grep -v '^\s*$' | tail -n 1 | cut -c1-160; }
missing() {
    local t
    for t in "$@"; do command -v "$t" >/dev/null 2>&1 || { echo "$t"; return 0; }; done
    return 1
}

# Per-row settings, reset after each row: extra cordon flags, an environment for
# both sides, and one for the unconfined twin alone.
FLAGS=() ROWENV=() TWINENV=()
# run NAME NEEDS CMD: run CMD (bash) in the workspace; NEEDS lists programs that must
# exist (space-separated). PASS when its exit status is 0, as it is on the host.
run() {
    local name=$1 needs=$2 cmd=$3 t
    chosen "$name" || return 0
    if t=$(missing $needs); then
        record SKIP "$name" "$t not installed"
    elif ! (cd "$host_ws" && env "${ROWENV[@]}" "${TWINENV[@]}" bash -c "$cmd") >/dev/null 2>&1; then
        record SKIP "$name" "fails on the host too"
    else
        local err rc
        err=$(env "${ROWENV[@]}" "$cordon" run -q --mode workspace-write "${runner_args[@]}" \
            "${FLAGS[@]}" --cwd "$ws" --timeout 600 -- bash -c "$cmd" 2>&1 >"$scratch/out")
        rc=$?
        if [ $rc -eq 0 ]; then
            record PASS "$name" ""
        else
            # The last line of stderr, else of stdout (pytest reports on stdout).
            [ -z "$(last_line "$err")" ] && err=$(cat "$scratch/out")
            record FAIL "$name" "rc=$rc: $(last_line "$err")"
        fi
    fi
    FLAGS=() ROWENV=() TWINENV=()
}

# --- fixtures (made on the host, as a checkout would be), in both workspaces ---
fixtures() {
local ws=$1
mkdir -p "$ws/py/pkg" "$ws/py/tests" "$ws/py/netsuite" "$ws/node" "$ws/node-dep" "$ws/node-net" \
    "$ws/go" "$ws/c" "$ws/repo" "$ws/rsfetch/src"
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
# A test suite that starts its own server on 127.0.0.1 and talks to it (and, under
# pytest, writes to its tmp_path under /tmp).
cat > "$ws/py/netsuite/test_server.py" <<'EOF'
import http.server
import threading
import unittest
import urllib.request


class Pong(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"pong"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Roundtrip(unittest.TestCase):
    def test_own_server(self):
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pong)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        try:
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with opener.open(f"http://127.0.0.1:{srv.server_port}/", timeout=10) as r:
                self.assertEqual(r.read(), b"pong")
        finally:
            srv.shutdown()


def test_tmp_path(tmp_path):
    (tmp_path / "x").write_text("y")
    assert (tmp_path / "x").read_text() == "y"
EOF
cat > "$ws/py/pyproject.toml" <<'EOF'
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "pkg"
version = "0.1.0"

[tool.setuptools]
packages = ["pkg"]
EOF
echo "pip" > "$ws/py/requirements.txt"
cat > "$ws/node/package.json" <<'EOF'
{"name": "demo", "version": "1.0.0", "private": false,
 "scripts": {"test": "node test.js", "build": "node build.js"}}
EOF
echo 'const assert = require("assert"); assert.strictEqual(1 + 1, 2); console.log("ok");' > "$ws/node/test.js"
echo 'require("fs").mkdirSync("dist", {recursive: true}); require("fs").writeFileSync("dist/out.js", "x");' > "$ws/node/build.js"
echo '{"name": "dep", "version": "1.0.0", "private": true, "dependencies": {"is-number": "^7.0.0"}}' > "$ws/node-dep/package.json"
echo '{"name": "net", "version": "1.0.0", "private": true}' > "$ws/node-net/package.json"
cat > "$ws/go/go.mod" <<'EOF'
module example.com/demo

go 1.18
EOF
printf 'package main\n\nfunc main() { println("hi") }\n' > "$ws/go/main.go"
printf 'package main\n\nimport "testing"\n\nfunc TestX(t *testing.T) {}\n' > "$ws/go/main_test.go"
printf '#include <stdio.h>\nint main(void){puts("hi");return 0;}\n' > "$ws/c/hello.c"
printf 'hello: hello.c\n\tcc -o hello hello.c\n' > "$ws/c/Makefile"
printf '#!/bin/sh\necho script-ran\n' > "$ws/run.sh"
# A crate with one dependency the build must download (not in any cache here).
cat > "$ws/rsfetch/Cargo.toml" <<'EOF'
[package]
name = "rsfetch"
version = "0.1.0"
edition = "2021"

[dependencies]
hex = "0.4"
EOF
echo 'fn main() { println!("{}", hex::encode("hi")); }' > "$ws/rsfetch/src/main.rs"
(cd "$ws/repo" && git init -q -b main . && echo a > a.txt && git add a.txt \
    && git -c user.name=b -c user.email=b@x commit -q -m init) || true
# pytest (and a build backend) in a virtualenv of the project's own, made on the host
# with the network.
if command -v python3 >/dev/null 2>&1; then
    (cd "$ws/py" && python3 -m venv .venv-test && .venv-test/bin/pip install -q pytest setuptools wheel) >/dev/null 2>&1 || true
fi
# npm's cache warmed by an install on the host; the lock file goes with the project.
if command -v npm >/dev/null 2>&1; then
    (cd "$ws/node-dep" && npm install -q --no-audit --no-fund && rm -rf node_modules \
        && npm cache add is-number@7.0.0) >/dev/null 2>&1 || true
fi
}
fixtures "$ws"
fixtures "$host_ws"
# Outside the workspace: a build log, a bare repository and a virtualenv under the
# host's /tmp, a file in /dev/shm and in ~/.cache.
echo "cordon-everyday-marker" > "$htmp/build.log"
if command -v git >/dev/null 2>&1; then
    git clone -q --bare "$ws/repo" "$htmp/origin.git" 2>/dev/null || true
fi
if command -v python3 >/dev/null 2>&1; then
    python3 -m venv "$htmp/venv" >/dev/null 2>&1 || true
fi
[ -n "$hshm" ] && echo "cordon-everyday-marker" > "$hshm/state"
[ -n "$hcache" ] && echo "cordon-everyday-marker" > "$hcache/entry"
# A policy program that says yes: cordon asks it for the narrow grant ("write
# <repo>/.git" for one retry, still workspace-write, offline), the documented way to
# let git write a repository that existed before the run.
approver=$scratch/approve.sh
printf '#!/bin/sh\ncat > /dev/null\nexit 0\n' > "$approver"
chmod 755 "$approver"
proxy=("${allow[@]}")

# --- the matrix ---
run "shell: write in the workspace"      ""       'echo x > f.txt && grep -qx x f.txt'
run "shell: TMPDIR scratch file"         ""       't=$(mktemp) && echo x > "$t" && grep -qx x "$t"'
run "shell: sed -i an edit"              sed      'echo old > e.txt && sed -i s/old/new/ e.txt && grep -qx new e.txt'
run "shell: grep -rn and find"           "grep find" 'grep -rn add py >/dev/null && find . -name "*.py" | grep -q .'
run "shell: tar an archive"              tar      'tar czf py.tgz py/pkg && tar tzf py.tgz | grep -q __init__'
run "shell: diff and patch"              patch    'printf "a\n" > p1 && printf "b\n" > p2 && { diff -u p1 p2 > d.patch || true; } && patch -s p1 d.patch && grep -qx b p1'
run "shell: cp -r, mv, ln -s"            ""       'cp -r py/pkg pk2 && mv pk2 pk3 && ln -s pk3 pk4 && test -f pk4/__init__.py'
run "shell: chmod +x and run a script"   ""       'chmod +x run.sh && ./run.sh | grep -qx script-ran'
run "shell: xargs and sort | uniq"       xargs    'find py -name "*.py" | xargs wc -l | sort | uniq | grep -q total'
run "shell: background job and wait"     ""       'sleep 0.2 & wait $! && echo done > bg.txt && test -s bg.txt'
run "shell: ps lists the run"            ps       'ps -e -o pid,comm | grep -q bash'
run "shell: ls the home, read /etc"      ""       'ls -a ~ >/dev/null && grep -q . /etc/os-release'
run "shell: mkdir in XDG_CACHE_HOME"     ""       'mkdir -p "${XDG_CACHE_HOME:-$HOME/.cache}/x" && test -d "${XDG_CACHE_HOME:-$HOME/.cache}/x"'
run "shell: mkdir -p ~/.cache/x"         ""       'mkdir -p ~/.cache/cordon-everyday && rmdir ~/.cache/cordon-everyday'
run "shell: rm a missing file in the ws" ""       '! rm gone.txt 2>err.txt && grep -q "No such file" err.txt'
run "host /tmp: read a file"             ""       "grep -qx cordon-everyday-marker '$htmp/build.log'"
run "host /tmp: list a directory"        ""       "ls '$htmp' | grep -qx build.log"
run "host /tmp: git clone a repository"  git      "git clone -q '$htmp/origin.git' cloned && grep -qx a cloned/a.txt"
run "host /tmp: a venv's interpreter"    python3  "'$htmp/venv/bin/python' -c 'import sys; print(sys.prefix)' | grep -qx '$htmp/venv'"
run "host /tmp: a venv's pip"            python3  "'$htmp/venv/bin/python' -m pip --version | grep -q '$htmp/venv'"
if [ -n "$hshm" ]; then
    run "host /dev/shm: read a file"     ""       "grep -qx cordon-everyday-marker '$hshm/state'"
fi
if [ -n "$hcache" ]; then
    run "host ~/.cache: read a file"     ""       "grep -qx cordon-everyday-marker '$hcache/entry'"
fi
run "python: run a script"               python3  'cd py && python3 -c "import pkg; print(pkg.add(1,2))" | grep -qx 3'
run "python: unittest"                   python3  'cd py && python3 -m unittest -q 2>&1 | grep -q "^OK"'
run "python: unittest, own loopback server" python3 'cd py && python3 -m unittest -q netsuite.test_server'
run "python: pytest, own loopback server" python3 'cd py && test -x .venv-test/bin/pytest && .venv-test/bin/pytest -q -p no:cacheprovider netsuite'
run "python: unix socket in the workspace" python3 "python3 -c '
import os, socket
s = socket.socket(socket.AF_UNIX); s.bind(\"ipc.sock\"); s.listen(1)
if os.fork() == 0:
    c = socket.socket(socket.AF_UNIX); c.connect(\"ipc.sock\"); c.sendall(b\"ping\"); c.close(); os._exit(0)
conn, _ = s.accept(); assert conn.recv(4) == b\"ping\"; os.wait()
'"
run "python: unix socket in TMPDIR"      python3  "python3 -c '
import os, socket, tempfile
p = os.path.join(tempfile.mkdtemp(), \"s\")
s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(1)
c = socket.socket(socket.AF_UNIX); c.connect(p); c.sendall(b\"ping\")
conn, _ = s.accept(); assert conn.recv(4) == b\"ping\"
'"
run "python: TCP echo on ::1"            python3  "python3 -c '
import socket
s = socket.socket(socket.AF_INET6); s.bind((\"::1\", 0)); s.listen(1)
c = socket.create_connection((\"::1\", s.getsockname()[1])); c.sendall(b\"ping\")
conn, _ = s.accept(); assert conn.recv(4) == b\"ping\"
'"
run "python: a dev server and curl"      "python3 curl" 'port=$((20000 + RANDOM % 20000)); python3 -m http.server --bind 127.0.0.1 $port >/dev/null 2>&1 & for i in $(seq 100); do curl -sf --noproxy "*" "http://127.0.0.1:$port/" >/dev/null && ok=1 && break; sleep 0.1; done; kill $! 2>/dev/null; [ "${ok:-}" = 1 ]'
run "python: multiprocessing.Manager"    python3  "python3 -c '
from multiprocessing import Manager
with Manager() as m:
    d = m.dict(); d[\"a\"] = 1; assert d[\"a\"] == 1
'"
run "python: multiprocessing.Pool"       python3  "python3 -c '
from multiprocessing import Pool
with Pool(2) as p:
    assert p.map(abs, [-1, -2, -3]) == [1, 2, 3]
'"
run "python: ProcessPoolExecutor"        python3  "python3 -c '
from concurrent.futures import ProcessPoolExecutor
with ProcessPoolExecutor(2) as e:
    assert list(e.map(abs, [-1, -2])) == [1, 2]
'"
run "python: sqlite3 database file"      python3  "python3 -c 'import sqlite3; c = sqlite3.connect(\"db.sqlite\"); c.execute(\"create table t(x)\"); c.commit()' && test -s db.sqlite"
run "python: compileall"                 python3  'cd py && python3 -m compileall -q . && ls pkg/__pycache__ | grep -q pyc'
run "python: venv"                       python3  'cd py && python3 -m venv .venv && test -x .venv/bin/python'
run "python: pip list (venv)"            python3  'cd py && .venv/bin/pip list --disable-pip-version-check | grep -q pip'
run "python: pip install satisfied req"  python3  'cd py && .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt'
run "python: pip install -e (no index)"  python3  'cd py && .venv-test/bin/pip install -q --disable-pip-version-check --no-index --no-build-isolation -e . && .venv-test/bin/python -c "import pkg"'
run "python: pip wheel (no index)"       python3  'cd py && .venv-test/bin/pip wheel -q --disable-pip-version-check --no-index --no-build-isolation --no-deps -w dist . && ls dist | grep -q whl'
run "python: pip list (user python)"     python3  'python3 -m pip list --disable-pip-version-check | grep -q pip'
run "python: pip cache dir"              python3  'python3 -m pip cache dir'
FLAGS=(--allow-hosts python "${proxy[@]}")
run "python: pip install via --allow-hosts" python3 'python3 -m venv .venv-net && .venv-net/bin/pip install -q --no-cache-dir --disable-pip-version-check six && .venv-net/bin/python -c "import six"'
run "node: run a script"                 node     'cd node && node test.js | grep -qx ok'
run "node: npm test"                     npm      'cd node && npm test --silent'
run "node: npm run build"                npm      'cd node && npm run build --silent && test -f dist/out.js'
run "node: npm install (no deps)"        npm      'cd node && npm install --no-audit --no-fund && test -f package-lock.json'
run "node: npm ci"                       npm      'cd node && npm ci --no-audit --no-fund'
run "node: npm ls"                       npm      'cd node && npm ls'
run "node: npm pack"                     npm      'cd node && npm pack --silent && test -f demo-1.0.0.tgz'
run "node: npx a local bin"              npx      'cd node && npx --no-install node -e 1'
run "node: npm install, warm cache"      npm      'cd node-dep && npm install --offline --no-audit --no-fund && node -e "process.exit(require(\"is-number\")(5) ? 0 : 1)"'
FLAGS=(--allow-hosts node "${proxy[@]}")
run "node: npm install via --allow-hosts" npm     'cd node-net && npm install --prefer-online --no-audit --no-fund is-odd@3 && node -e "process.exit(require(\"is-odd\")(3) ? 0 : 1)"'
run "go: build"                          go       'cd go && go build ./... && go build -o demo . && ./demo'
run "go: test"                           go       'cd go && go test ./...'
run "go: vet"                            go       'cd go && go vet ./...'
run "go: fmt"                            gofmt    'cd go && test -z "$(gofmt -l .)"'
run "rust: cargo new"                    cargo    'cargo new -q --vcs none rs && test -f rs/src/main.rs'
run "rust: cargo build --offline"        cargo    'cd rs && cargo build -q --offline && test -x target/debug/rs'
run "rust: cargo check --offline"        cargo    'cd rs && cargo check -q --offline'
run "rust: cargo run --offline"          cargo    'cd rs && cargo run -q --offline | grep -q "Hello, world"'
run "rust: cargo test --offline"         cargo    'cd rs && cargo test -q --offline'
run "rust: cargo fmt --check"            "cargo rustfmt" 'cd rs && cargo fmt --check'
run "rust: cargo clippy --offline"       "cargo cargo-clippy" 'cd rs && cargo clippy -q --offline'
run "rust: cargo doc --offline"          "cargo rustdoc" 'cd rs && cargo doc -q --offline --no-deps && test -d target/doc'
run "rust: cargo package --offline"      cargo    'cd rs && cargo package -q --offline --allow-dirty --no-verify && ls target/package | grep -q crate'
run "rust: rustc a file"                 rustc    'cd rs && rustc --edition 2021 -o hello src/main.rs && ./hello | grep -q Hello'
# The twin downloads into a home of its own, so the host's cargo cache stays cold.
FLAGS=(--allow-hosts rust "${proxy[@]}") TWINENV=(CARGO_HOME="$scratch/twin-cargo-home")
run "rust: cargo build fetching a crate"  cargo   'cd rsfetch && cargo build -q && ./target/debug/rsfetch | grep -qx 6869'
run "c: make"                            "make cc" 'cd c && make -s && ./hello | grep -qx hi'
run "git: status"                        git      'cd repo && git status --short'
run "git: log"                           git      'cd repo && git log --oneline | grep -q init'
run "git: diff"                          git      'cd repo && echo b >> a.txt && git diff --stat | grep -q a.txt'
run "git: init, add, commit a new repo"  git      'mkdir fresh && cd fresh && git init -q && echo x > x && git add x && git -c user.name=b -c user.email=b@x commit -qm x && git log --oneline | grep -q x'
run "git: config --global"               git      'git config --global --get-regexp . >/dev/null; git config --global cordon.everyday x && test "$(git config --global cordon.everyday)" = x && git config --global --unset cordon.everyday'
# The same git commands in a repository that existed before the run, the documented
# way: its .git is protected in workspace-write and the approver grants the write.
FLAGS=(--approver "$approver")
run "git: add (granted)"                 git      'cd repo && echo d >> a.txt && git add a.txt && git diff --cached --quiet a.txt; [ $? = 1 ]'
FLAGS=(--approver "$approver")
run "git: commit (granted)"              git      'cd repo && git -c user.name=b -c user.email=b@x commit -qam granted && git log -1 --format=%s | grep -qx granted'
FLAGS=(--approver "$approver")
run "git: stash (granted)"               git      'cd repo && echo e >> a.txt && git stash -q && git stash list | grep -q .'
FLAGS=(--approver "$approver")
run "git: checkout -b (granted)"         git      'cd repo && git checkout -q -b topic && test "$(git branch --show-current)" = topic'
# git with a HOME whose configuration the user cannot read (HOME kept across sudo -u).
if [ "$(id -u)" != 0 ] && [ -d /root ] && ! [ -r /root ]; then
    ROWENV=(HOME=/root)
    run "git: status, HOME it cannot read" git    'cd repo && git status --short >/dev/null && git log --oneline | grep -q init'
fi

# Rows whose outcome is cordon's own behaviour around the command.
# rm of a file that does not exist, outside the writable roots: the host alone would
# refuse it (rm says "No such file or directory"), so it is no denial (issue 26).
rm_missing() {
    local name=$1 cmd=$2 host_rc err rc
    chosen "$name" || return 0
    (cd "$host_ws" && bash -c "$cmd") >/dev/null 2>&1
    host_rc=$?
    err=$("$cordon" run --mode workspace-write "${runner_args[@]}" --cwd "$ws" -- bash -c "$cmd" 2>&1 >/dev/null)
    rc=$?
    if printf '%s\n' "$err" | grep -q '^cordon: denied'; then
        record FAIL "$name" "rc=$rc: $(printf '%s\n' "$err" | grep '^cordon: denied' | head -n 1 | cut -c1-140)"
    elif [ "$rc" != "$host_rc" ]; then
        record FAIL "$name" "rc=$rc (host: $host_rc): $(last_line "$err")"
    else
        record PASS "$name" ""
    fi
}
missing_path=/usr/cordon-everyday-missing-$$
if ! chosen "shell: rm a missing file outside"; then
    :
elif [ -e "$missing_path" ] || (rm "$missing_path" 2>&1 | grep -vq "No such file"); then
    record SKIP "shell: rm a missing file outside" "the host does not answer ENOENT"
else
    rm_missing "shell: rm a missing file outside" "rm $missing_path"
    rm_missing "shell: rm -f a missing file outside" "rm -f $missing_path"
fi

# A timeout past the old 10-minute cap.
if ! chosen "cordon: --timeout 900 (long build)"; then
    :
elif "$cordon" run -q --mode workspace-write "${runner_args[@]}" --cwd "$ws" --timeout 900 -- true >/dev/null 2>"$scratch/t.err"; then
    record PASS "cordon: --timeout 900 (long build)" ""
else
    record FAIL "cordon: --timeout 900 (long build)" "$(last_line "$(cat "$scratch/t.err")")"
fi

# Ctrl-C on a terminal: a pseudo-terminal runs a script; Ctrl-C is typed once the
# command says "ready". Judged by what the terminal shows and how the script ended.
cat > "$scratch/ctrlc_pty.py" <<'EOF'
import os, pty, select, signal, sys, time
script = sys.argv[1]
pid, fd = pty.fork()
if pid == 0:
    os.execvp("bash", ["bash", "-c", script])
seen = b""
def read_for(secs, until=None):
    global seen
    end = time.time() + secs
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                data = os.read(fd, 4096)
            except OSError:
                return False
            if not data:
                return False
            seen += data
            if until and until in seen:
                return True
    return True
read_for(120, b"ready")
if b"ready" not in seen:
    os.kill(pid, signal.SIGKILL)
    print("never-ready", seen.decode(errors="replace").strip()[-160:].replace("\n", " | "))
    sys.exit(0)
time.sleep(0.5)
os.write(fd, b"\x03")
end = time.time() + 30
status = None
while time.time() < end:
    read_for(0.2)
    done, st = os.waitpid(pid, os.WNOHANG)
    if done:
        status = st
        break
if status is None:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    print("still-running", seen.decode(errors="replace").strip()[-160:].replace("\n", " | "))
    sys.exit(0)
read_for(0.3)
how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
print(how, seen.decode(errors="replace").strip()[-200:].replace("\r", "").replace("\n", " | "))
EOF
pyint='import time
try:
    print("ready", flush=True)
    time.sleep(60)
except KeyboardInterrupt:
    print("interrupt-handled", flush=True)
    raise'
# The script runs "$CMD" before the command: on the host a wrapper that only execs it,
# confined one that runs it through cordon.
printf '#!/bin/sh\nexec "$@"\n' > "$scratch/bare.sh"
{
    printf '#!/bin/sh\nexec'
    printf ' %q' "$cordon" run --mode workspace-write "${runner_args[@]}" --cwd "$ws" --
    printf ' "$@"\n'
} > "$scratch/confined.sh"
chmod 755 "$scratch/bare.sh" "$scratch/confined.sh"
ctrl_c() {
    local name=$1 script=$2 want=$3 forbid=$4 host conf
    chosen "$name" || return 0
    if ! command -v python3 >/dev/null 2>&1; then record SKIP "$name" "python3 not installed"; return; fi
    host=$(cd "$host_ws" && CMD=$scratch/bare.sh python3 "$scratch/ctrlc_pty.py" "$script")
    if ! [[ "$host" == "signal 2"* && "$host" == *"$want"* && "$host" != *"$forbid"* ]]; then
        record SKIP "$name" "on the host: $host"
        return
    fi
    conf=$(cd "$ws" && CMD=$scratch/confined.sh python3 "$scratch/ctrlc_pty.py" "$script")
    if [[ "$conf" == "signal 2"* && "$conf" == *"$want"* && "$conf" != *"$forbid"* ]]; then
        record PASS "$name" ""
    else
        record FAIL "$name" "$(printf '%s' "$conf" | cut -c1-160)"
    fi
}
ctrl_c "terminal: Ctrl-C reaches python as SIGINT" "\"\$CMD\" python3 -c '$pyint'; echo after \$?" interrupt-handled after
ctrl_c "terminal: Ctrl-C stops a loop around it" "while true; do \"\$CMD\" sh -c 'echo ready; sleep 60'; echo looped; done" ready looped

# --- protections met on the way (not counted in the share: the run must change
# nothing of the host's here) ---
echo "--- protections (not counted): the host must be unchanged"
protect() {
    local name=$1 cmd=$2 check=$3
    chosen "$name" || return 0
    env "${ROWENV[@]}" "$cordon" run -q --mode workspace-write "${runner_args[@]}" "${FLAGS[@]}" \
        --cwd "$ws" -- bash -c "$cmd" >/dev/null 2>&1
    if bash -c "$check"; then record KEPT "$name" ""; else record LEAK "$name" "the host changed"; fi
    FLAGS=() ROWENV=()
}
head_before=$(git -C "$ws/repo" rev-parse HEAD 2>/dev/null)
protect "git: commit without a grant"     'cd repo && git -c user.name=b -c user.email=b@x commit -qam nogrant' \
    "[ \"\$(git -C '$ws/repo' rev-parse HEAD)\" = '$head_before' ]"
protect "host /tmp: append to a file"      "echo leak >> '$htmp/build.log'" "grep -qx cordon-everyday-marker '$htmp/build.log' && ! grep -q leak '$htmp/build.log'"
protect "host /tmp: new file"              "echo leak > '$htmp/new'" "! test -e '$htmp/new'"
protect "host /tmp: push to the bare repo" "cd cloned && git -c user.name=b -c user.email=b@x commit -q --allow-empty -m leak && git push -q origin HEAD:leak" \
    "! git -C '$htmp/origin.git' rev-parse -q --verify leak >/dev/null"
[ -n "$hcache" ] && protect "host ~/.cache: remove a file" "rm -f '$hcache/entry'" "test -f '$hcache/entry'"

total=$((pass + fail))
echo "---"
if [ $total -gt 0 ]; then
    echo "passed $pass of $total ($((1000 * pass / total / 10)).$((1000 * pass / total % 10))%), skipped $skip (tool missing, or failing on the host too); cordon $("$cordon" --version 2>/dev/null | head -n 1), runner ${runner:-auto}, as $(id -un)"
fi
[ ${#failures[@]} -gt 0 ] && printf 'failed: %s\n' "${failures[@]}"
[ "$keep" = 1 ] && echo "kept: $scratch $htmp"
exit 0
