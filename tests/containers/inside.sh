#!/bin/sh
# The container suite's cases, run inside one container per variant (see suite.py).
#
# Every case runs `cordon run --json` and then looks at the effect from outside the
# sandbox (still inside the container): a file outside the workspace unchanged, a
# victim process alive with its secret unread, no survivor, a trap that received
# nothing. It prints tab-separated records on stdout for suite.py to judge:
#   PROBE  <cordon probe --json>
#   RUN    <case> <kind> <exit status> <result JSON>     kind: escape, control, agree, ipc
#   EFFECT <case> ok | ESCAPE <what> | BROKEN <what>
# It judges no JSON itself (the image has no JSON tool); suite.py does.
#
# Environment: CT_BIN (where cordon and the probe are mounted), CT_FLAGS (flags for
# every escape and control run, e.g. a container profile the variant accepts).
set -u
B="${CT_BIN:-/opt/cordon}"
C="$B/cordon"
P="$B/probe"
FLAGS="${CT_FLAGS:-}"
T="/var/tmp/ct-$$"
ws="$T/ws"
out="$T/outside"
mkdir -p "$ws" "$out"
export HOME="$T/home"
mkdir -p "$HOME"
tab="$(printf '\t')"

cd "$ws" || exit 2
git init -q . 2>/dev/null
git config user.email ct@example.invalid
git config user.name ct
echo base > tracked
git add tracked && git commit -qm base
echo secret > "$out/victim"
chmod 0644 "$out/victim"
cp .git/config "$T/git-config.orig"

# A process of the container outside the run, with a secret in its environment.
CT_SECRET=hunter2-ct-marker sleep 600 &
victim=$!
# A loopback trap the sandboxed command must not reach (network off).
port=$((20000 + $$ % 20000))
"$P" listen 127.0.0.1 "$port" 4000 > "$T/trap.json" 2>&1 &
trap_pid=$!

run() { # run CASE KIND [cordon run args...]
    name=$1 kind=$2
    shift 2
    res=$("$C" run --json "$@" 2>"$T/$name.err")
    st=$?
    printf 'RUN%s%s%s%s%s%s%s%s\n' "$tab" "$name" "$tab" "$kind" "$tab" "$st" "$tab" "$res"
}
effect() { # effect CASE VERDICT...
    name=$1
    shift
    printf 'EFFECT%s%s%s%s\n' "$tab" "$name" "$tab" "$*"
}
refused() { # refused CASE WHAT: the probe in the last run must not report success
    if printf '%s' "$res" | grep -q '\\"ok\\":true'; then effect "$1" ESCAPE "$2"; else effect "$1" ok; fi
}
same_file() { # same_file PATH CONTENT MODE
    [ -f "$1" ] && [ "$(cat "$1")" = "$2" ] && [ "$(stat -c %a "$1")" = "$3" ]
}

printf 'PROBE%s%s\n' "$tab" "$("$C" probe --json 2>/dev/null | tr -d '\n')"

# ---- plain bubblewrap (no cordon): where it works, `--runner bwrap` must work too.
if bwrap --ro-bind / / --proc /proc --dev /dev --unshare-all --die-with-parent true 2>"$T/plain.err"; then
    printf 'PLAIN%sbwrap%sworks\n' "$tab" "$tab"
else
    printf 'PLAIN%sbwrap%sfails: %s\n' "$tab" "$tab" "$(head -c 60 "$T/plain.err" | tr '\n\t' '  ')"
fi

# ---- agreement: hard mode, no flags: what probe predicted must be what run does.
run agree-read-only agree --mode read-only -- true
run agree-workspace-write agree --mode workspace-write -- true
run agree-bwrap-workspace-write agree --runner bwrap --mode workspace-write -- true

# ---- escapes (judged by effect)
# shellcheck disable=SC2086
run fs-write escape $FLAGS -- "$P" overwrite "$out/victim" pwned
if same_file "$out/victim" secret 644; then effect fs-write ok; else effect fs-write ESCAPE "victim changed"; fi

# shellcheck disable=SC2086
run fs-create escape $FLAGS -- "$P" create "$out/created"
if [ -e "$out/created" ]; then effect fs-create ESCAPE "file created outside"; else effect fs-create ok; fi

# shellcheck disable=SC2086
run fs-chmod escape $FLAGS -- "$P" chmod "$out/victim" 511
if same_file "$out/victim" secret 644; then effect fs-chmod ok; else effect fs-chmod ESCAPE "mode changed"; fi

# shellcheck disable=SC2086
run git-config escape $FLAGS -- "$P" append "$ws/.git/config" "[core]hooksPath=/x"
if cmp_out=$(cat "$ws/.git/config") && [ "$cmp_out" = "$(cat "$T/git-config.orig")" ]; then
    effect git-config ok
else
    effect git-config ESCAPE ".git/config modified"
    cp "$T/git-config.orig" "$ws/.git/config"
fi

# shellcheck disable=SC2086
run git-hook escape $FLAGS -- "$P" create "$ws/.git/hooks/pre-commit"
if [ -e "$ws/.git/hooks/pre-commit" ]; then effect git-hook ESCAPE "hook planted"; else effect git-hook ok; fi

marker="ct-leak-$$"
# shellcheck disable=SC2086
run tmp-write escape $FLAGS -- "$P" create "/tmp/$marker"
if [ -e "/tmp/$marker" ]; then effect tmp-write ESCAPE "file left in the container's /tmp"; else effect tmp-write ok; fi

# shellcheck disable=SC2086
run proc-environ escape $FLAGS -- "$P" read "/proc/$victim/environ"
# shellcheck disable=SC2086
run proc-grep escape $FLAGS -- "$P" proc-grep hunter2-ct-marker
# (judged by suite.py: the secret must not be in either result's output)

# shellcheck disable=SC2086
run kill escape $FLAGS -- "$P" kill "$victim" 9
if kill -0 "$victim" 2>/dev/null; then effect kill ok; else effect kill ESCAPE "victim killed"; fi

# shellcheck disable=SC2086
run ptrace escape $FLAGS -- "$P" ptrace-attach "$victim"
if kill -0 "$victim" 2>/dev/null && grep -q '^TracerPid:[[:space:]]*0$' "/proc/$victim/status" \
    && ! grep -q '^State:[[:space:]]*[tT]' "/proc/$victim/status"; then
    effect ptrace ok
else
    effect ptrace ESCAPE "victim traced, stopped or gone"
fi

nice_of() { # the nice value (field 19 of /proc/PID/stat; the name in field 2 has no spaces here)
    cut -d' ' -f19 "/proc/$1/stat"
}
nice_before=$(nice_of "$victim")
# shellcheck disable=SC2086
run renice escape $FLAGS -- "$P" setpriority "$victim" 19
if [ "$(nice_of "$victim")" = "$nice_before" ]; then effect renice ok; else effect renice ESCAPE "victim reniced"; fi
# cordon itself, which a run without a pid namespace can name (the init's parent).
# shellcheck disable=SC2086
run renice-cordon escape $FLAGS -c 'read -r _ _ _ c _ < /proc/$PPID/stat; if [ "$c" -gt 1 ]; then '"$P"' setpriority "$c" 19; else echo unnameable; fi'
refused renice-cordon "cordon reniced from inside the run"

# shellcheck disable=SC2086
run net-tcp escape $FLAGS -- "$P" tcp 127.0.0.1 "$port"

late="$ws/survivor-$$"
# shellcheck disable=SC2086
run survivor escape $FLAGS -- "$P" daemonize 30000 "$late"
found=""
for f in /proc/[0-9]*/cmdline; do
    if tr '\0' ' ' < "$f" 2>/dev/null | grep -q "survivor-$$"; then
        found="$found ${f#/proc/}"
    fi
done
if [ -n "$found" ]; then
    effect survivor ESCAPE "process left after the run:$found"
    for f in $found; do kill -9 "${f%/cmdline}" 2>/dev/null; done
else
    effect survivor ok
fi

shm_before=$(wc -l < /proc/sysvipc/shm)
# shellcheck disable=SC2086
run ipc-shm escape $FLAGS -- "$P" shmget 4242
shm_after=$(wc -l < /proc/sysvipc/shm)
if [ "$shm_before" = "$shm_after" ]; then effect ipc-shm ok; else effect ipc-shm ESCAPE "SysV segment left in the container"; fi

# shellcheck disable=SC2086
run userns escape $FLAGS -- "$P" unshare user
refused userns "a user namespace was created inside the run"
# shellcheck disable=SC2086
run mount escape $FLAGS -- "$P" mount-tmpfs "$ws"
refused mount "a tmpfs was mounted inside the run"

# An explicit process limit: where the run happens, at most 32 processes (the probe's
# fork loop reports how many children it got).
# shellcheck disable=SC2086
run limit-pids escape $FLAGS --limit-pids 32 -- "$P" fork-loop 64 3000
forked=$(printf '%s' "$res" | grep -o 'forked=[0-9]*' | head -n 1 | cut -d= -f2)
if [ -n "$forked" ] && [ "$forked" -gt 32 ]; then
    effect limit-pids ESCAPE "$forked processes under --limit-pids 32"
else
    effect limit-pids ok
fi

# ---- local IPC with the network off (judged by suite.py: `sandbox.local_ipc` says
# what the run had, the echo's outcome matches it, and probe's net_namespace agrees)
# shellcheck disable=SC2086
run ipc-loopback ipc $FLAGS -- "$P" loopback-echo 127.0.0.1 $((port + 1))
# shellcheck disable=SC2086
run ipc-unix ipc $FLAGS -- "$P" unix-echo "$ws/ipc.sock"
# shellcheck disable=SC2086
run ipc-loopback-bwrap ipc --runner bwrap $FLAGS -- "$P" loopback-echo 127.0.0.1 $((port + 1))

# ---- positive controls (judged by suite.py: the command must succeed)
# shellcheck disable=SC2086
run ctl-edit control $FLAGS -c 'set -e; echo a > f; mv f g; ln g h; : > g; mkdir d; mv h d/; rm -r d g; echo ok'
# shellcheck disable=SC2086
run ctl-git control $FLAGS -c 'set -e; echo more >> tracked; git status --short; git diff --stat; git log --oneline | wc -l'
# shellcheck disable=SC2086
run ctl-read control $FLAGS -c 'set -e; cat /etc/passwd > /dev/null; ls / > /dev/null; echo ok'
# shellcheck disable=SC2086
run ctl-pipe control $FLAGS -c 'echo hi | tr a-z A-Z'
# shellcheck disable=SC2086
run ctl-tmpdir control $FLAGS -c 'set -e; echo x > "$TMPDIR/f"; cat "$TMPDIR/f"'
# shellcheck disable=SC2086
run ctl-proc-self control $FLAGS -c 'set -e; grep -q "^Pid:" /proc/self/status; ls /proc/$$/fd > /dev/null; echo ok'
# shellcheck disable=SC2086
run ctl-jobs control $FLAGS -c 'set -e; sleep 0.1 & wait $!; echo ok'
# shellcheck disable=SC2086
run ctl-bwrap control --runner bwrap $FLAGS -c 'set -e; echo a > f; rm f; echo ok'

wait "$trap_pid"
if grep -q 'accepted=0' "$T/trap.json"; then
    effect net-tcp ok
elif grep -q 'accepted=' "$T/trap.json"; then
    effect net-tcp ESCAPE "the loopback trap received a connection"
else
    effect net-tcp BROKEN "trap did not listen: $(cat "$T/trap.json")"
fi
kill -9 "$victim" 2>/dev/null
rm -rf "$T"
echo DONE
