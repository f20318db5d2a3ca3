#!/usr/bin/env bash
# Record the observable output of a fixed set of cordon invocations (help texts, errors,
# runs in each mode, serve and mcp sessions, probe, doctor), normalized (workspace path,
# state-dir paths, spill names, boundaries, pids and host-sized numbers masked), so that
# a change of what a user sees is a reviewed diff: `tests/integration/record.rs`
# compares a fresh recording with `tests/record/expected/` on every test run, and
# `CORDON_UPDATE_GOLDEN=1 cargo test --test integration record::` re-records it.
# `host.txt` names the host facts the host-dependent recordings hang on; the test
# compares those only on a host with the same facts (the CI host).
#
# Usage: tests/record/record.sh CORDON_BINARY OUT_DIR
set -u
cordon=$(realpath "$1")
out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
ws=$(mktemp -d /var/tmp/cordon-record.XXXXXX)
mkdir -p "$ws/sub" "$ws/.git"
trap 'rm -rf "$ws"' EXIT
cd "$ws" || exit 1

norm() {
    sed -e "s#$ws#<WS>#g" \
        -e 's#"memory":[0-9][0-9]*#"memory":<N>#g' -e 's#"tmpfs_size":[0-9][0-9]*#"tmpfs_size":<N>#g' \
        -e 's#/[^" ]*/cordon-[0-9a-zA-Z_.-]*/spill[^" ]*#<SPILL>#g' \
        -e 's#"boundary":"[^"]*"#"boundary":"<B>"#g' \
        -e 's#cordon-output-[0-9a-f]*#cordon-output-<B>#g' \
        -e 's#"pid":[0-9][0-9]*#"pid":<PID>#g' \
        -e 's#"/sys/fs/cgroup[^"]*"#"<CGROUP>"#g' \
        -e 's#"serverInfo":{[^}]*}#"serverInfo":<INFO>#g' \
        -e 's#^\(  memory: *\)[0-9][0-9]* bytes#\1<N> bytes#'
}

# rec NAME ARGS... : stdout, stderr and exit status of `cordon ARGS`.
rec() {
    local name=$1
    shift
    {
        "$cordon" "$@" </dev/null 2>"$out/.stderr"
        local code=$?
        echo "--- stderr"
        cat "$out/.stderr"
        echo "--- exit $code"
    } | norm >"$out/$name.txt"
    rm -f "$out/.stderr"
}

rec help --help
rec run-help run --help
rec serve-help serve --help
rec mcp-help mcp --help
rec session-help session --help
rec audit-help audit --help
for m in read-only workspace-write full-access; do
    rec "run-$m" run --json --mode "$m" -- sh -c 'echo out; echo err >&2; touch f && echo wrote; ls'
    rec "run-$m-text" run --mode "$m" -- sh -c 'echo out; touch g && echo wrote'
    rec "run-$m-shell" run --json --mode "$m" -c 'echo $0 "$@" | tr a-z A-Z'
done
rm -f f g
rec run-network run --json --network --writable "$ws/sub" --limit-pids 64 -- true
rec run-env run --json --env FOO=bar -- sh -c 'echo $FOO'
rec run-timeout run --json --timeout 0.5 -- sleep 5
rec run-notfound run --json -- /nonexistent/prog
rec run-notfound-text run -- /nonexistent/prog
rec run-nocmd run --json
rec bad-mode run --mode bogus -- true
rec bad-runner run --runner bogus -- true
rec bad-timeout run --timeout -1 -- true
rec bad-timeout2 run --timeout abc -- true
rec bad-spill run --spill-cap 1X -- true
rec bad-env run --env =x -- true
rec bad-flag run --nope -- true
rec bad-requires run --audit-log /x -- true
rec bad-serve-mode serve --mode bogus
rec bad-mcp-mode mcp --mode bogus
rec invalid-relative run --json --writable rel -- true
rec invalid-system run --json --writable /etc -- true
rec invalid-missing run --json --writable /nonexistent/x -- true
rec invalid-cwd run --json --cwd /nonexistent/x -- true
rec serve-invalid serve --writable /etc
rec probe probe --json
# The facts the host-dependent recordings hang on (identity, Landlock ABI, namespaces,
# bubblewrap, the limits' mechanisms), one per line.
"$cordon" probe --json </dev/null 2>/dev/null | python3 -c '
import json, sys
p = json.load(sys.stdin)
h = p.get("host", {})
print("euid-is-root:", h.get("euid") == 0)
print("landlock-abi:", h.get("landlock_abi"))
print("seccomp:", h.get("seccomp"))
print("namespaces:", json.dumps(h.get("namespaces"), sort_keys=True))
print("net-namespace:", (h.get("net_namespace") or {}).get("status"))
print("bwrap:", h.get("bwrap") is not None)
limits = p.get("limits") or {}
print("limits:", json.dumps({k: v for k, v in limits.items() if k.endswith("_by")}, sort_keys=True))
' >"$out/host.txt" 2>&1
rec probe-text probe
rec doctor doctor --json
rec session-show-missing session show "$ws/nosession"

python3 "$here/drive.py" "$cordon" serve "$ws" --network <"$here/serve.jsonl" 2>&1 | norm >"$out/serve.txt"
python3 "$here/drive.py" "$cordon" serve "$ws" --mode read-only <"$here/serve-ro.jsonl" 2>&1 | norm >"$out/serve-ro.txt"
python3 "$here/drive.py" "$cordon" mcp "$ws" <"$here/mcp.jsonl" 2>&1 | norm >"$out/mcp.txt"
