#!/bin/sh
# How fast common clients give up when cordon's network is off (issue 11: "network-off
# looks like an offline machine"). Each client is pointed at TEST-NET-1 (192.0.2.1,
# never routed) and at a DNS name, under each confined runner; the script prints the
# seconds until the client exits and the network denial cordon recorded. No packet
# leaves the sandbox: the attempts are refused at socket().
#
#   bench/network_off.sh [path/to/cordon]      (default: target/release/cordon)
#
# A benchmark, not a test: it prints, it does not judge (the goal is < 2 s each).
set -u
CORDON=${1:-target/release/cordon}
[ -x "$CORDON" ] || { echo "no cordon at $CORDON (cargo build --release)"; exit 2; }
WS=$(mktemp -d /var/tmp/cordon-netoff-XXXXXX)
trap 'rm -rf "$WS"' EXIT
have() { command -v "$1" >/dev/null 2>&1; }
clients="curl|curl -sS -m 30 http://192.0.2.1/
curl|curl -sS -m 30 https://pypi.org/simple/
wget|wget -O- -T 30 http://192.0.2.1/
python3|python3 -c 'import urllib.request; urllib.request.urlopen(\"http://192.0.2.1/\", timeout=30)'
pip3|pip3 download --no-deps -d $WS/dl --index-url http://192.0.2.1/simple requests
pip3|pip3 download --no-deps -d $WS/dl requests
npm|npm view --registry http://192.0.2.1/ lodash
npm|npm view lodash
git|git ls-remote http://192.0.2.1/x"
printf '%-9s %7s  %-40s %s\n' runner seconds denial client
for runner in landlock bwrap; do
    echo "$clients" | while IFS='|' read -r tool cmd; do
        have "$tool" || { printf '%-9s %7s  %-40s %s\n' "$runner" - "(no $tool)" "$cmd"; continue; }
        start=$(date +%s.%N)
        out=$(cd "$WS" && timeout 90 "$CORDON" run --json --runner "$runner" -c "$cmd" 2>/dev/null)
        end=$(date +%s.%N)
        denial=$(printf '%s' "$out" | python3 -c 'import json,sys
try:
    d=json.load(sys.stdin)["sandbox"]["denials"]
    print(next((x["target"] for x in d if x["kind"]=="network"), "(none)"))
except Exception as e:
    print("(no result)")')
        printf '%-9s %7.2f  %-40s %s\n' "$runner" "$(echo "$end - $start" | bc)" "$denial" "$cmd"
    done
done
