#!/usr/bin/env python3
"""Load benchmark for `cordon serve`: N confined runs with 64 in flight through one
server, against the same N runs done one `cordon run` process at a time.

Reports, for both: wall time and runs per second; that no run was lost (every request
answered, exit 0, the expected stdout); that no process was left behind (a marker in
every command line is searched in /proc afterwards, and the host's process count is
taken before and after); and the server's peak RSS (VmHWM) plus its RSS samples.

Usage: bench/serve_load.py [--cordon target/release/cordon] [--runs 512]
                           [--inflight 64] [--mode workspace-write] [--json FILE]
                           [--serve-only]
Standard library only. Run from the repository root after `cargo build --release`.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def host_processes():
    return sum(1 for p in os.listdir("/proc") if p.isdigit())


def with_marker(marker):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def status_kb(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def cpu_seconds(pid):
    """(own, reaped children) CPU seconds of a process, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) / tick, (cutime + cstime) / tick


def bench_serve(args, ws, marker):
    proc = subprocess.Popen(
        [args.cordon, "serve", "--mode", args.mode, "--cwd", ws],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    rss_samples = []
    stop_sampling = threading.Event()

    def sample():
        while not stop_sampling.is_set():
            v = status_kb(proc.pid, "VmRSS")
            if v:
                rss_samples.append(v)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()

    def send(obj):
        proc.stdin.write(json.dumps(obj).encode() + b"\n")
        proc.stdin.flush()

    def recv():
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("server closed stdout")
        return json.loads(line)

    send({"jsonrpc": "2.0", "id": "hello", "method": "hello"})
    hello = recv()
    assert hello["id"] == "hello" and "result" in hello, hello
    idle_rss = status_kb(proc.pid, "VmRSS")

    sent_at = {}
    latencies = []
    lost, bad = set(range(args.runs)), []
    next_i = 0

    def send_run(i):
        sent_at[i] = time.monotonic()
        send({"jsonrpc": "2.0", "id": i, "method": "run", "params": {"command": f"echo {marker}-{i}"}})

    t0 = time.monotonic()
    while next_i < min(args.inflight, args.runs):
        send_run(next_i)
        next_i += 1
    peak_children = 0
    answered = 0
    while answered < args.runs:
        msg = recv()
        i = msg["id"]
        answered += 1
        latencies.append(time.monotonic() - sent_at[i])
        lost.discard(i)
        r = msg.get("result")
        if r is None or r["exit_code"] != 0 or r["stdout"]["text"] != f"{marker}-{i}\n" or r["sandbox"]["mode"] != args.mode:
            bad.append(msg)
        if next_i < args.runs:
            send_run(next_i)
            next_i += 1
        if answered % 16 == 0:
            peak_children = max(peak_children, len(with_marker(marker)))
    elapsed = time.monotonic() - t0
    peak_rss = status_kb(proc.pid, "VmHWM")
    server_cpu, children_cpu = cpu_seconds(proc.pid)
    proc.stdin.close()
    code = proc.wait(timeout=30)
    stop_sampling.set()
    sampler.join()
    return {
        "runs": args.runs,
        "inflight": args.inflight,
        "seconds": round(elapsed, 3),
        "runs_per_second": round(args.runs / elapsed, 1),
        "lost": len(lost),
        "bad": len(bad),
        "bad_examples": bad[:2],
        "latency_ms_p50": round(statistics.median(latencies) * 1000, 1),
        "latency_ms_p99": round(sorted(latencies)[int(len(latencies) * 0.99) - 1] * 1000, 1),
        "server_idle_rss_kib": idle_rss,
        "server_peak_rss_kib": peak_rss,
        "server_rss_samples": len(rss_samples),
        "server_exit_code": code,
        "server_cpu_seconds": round(server_cpu, 2),
        "children_cpu_seconds": round(children_cpu, 2),
        "marker_processes_seen_at_once_max": peak_children,
    }


def bench_sequential(args, ws, marker):
    bad = []
    t0 = time.monotonic()
    for i in range(args.runs):
        out = subprocess.run(
            [args.cordon, "run", "--json", "--mode", args.mode, "--cwd", ws, "-c", f"echo {marker}-{i}"],
            capture_output=True,
        )
        try:
            r = json.loads(out.stdout)
            if r["exit_code"] != 0 or r["stdout"]["text"] != f"{marker}-{i}\n":
                bad.append(r)
        except (ValueError, KeyError):
            bad.append({"stdout": out.stdout[:200].decode(errors="replace"), "code": out.returncode})
    elapsed = time.monotonic() - t0
    return {
        "runs": args.runs,
        "seconds": round(elapsed, 3),
        "runs_per_second": round(args.runs / elapsed, 1),
        "lost_or_bad": len(bad),
        "bad_examples": bad[:2],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cordon", default="target/release/cordon")
    p.add_argument("--runs", type=int, default=512)
    p.add_argument("--inflight", type=int, default=64)
    p.add_argument("--mode", default="workspace-write", choices=["read-only", "workspace-write", "full-access"])
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--serve-only", action="store_true", help="skip the one-at-a-time comparison (memory checks)")
    args = p.parse_args()
    if not os.access(args.cordon, os.X_OK):
        sys.exit(f"{args.cordon} not found: run `cargo build --release` first")

    # Not under /tmp: it is private inside the sandbox.
    ws = tempfile.mkdtemp(prefix="cordon-serve-load-", dir="/var/tmp")
    marker = f"load{os.getpid()}x{int(time.time())}"
    try:
        before = host_processes()
        serve = bench_serve(args, ws, marker + "s")
        time.sleep(0.2)
        leftovers_serve = with_marker(marker + "s")
        if args.serve_only:
            sequential = {"runs": 0, "seconds": 0, "runs_per_second": float("nan"), "lost_or_bad": 0, "bad_examples": []}
        else:
            sequential = bench_sequential(args, ws, marker + "q")
        time.sleep(0.2)
        leftovers_seq = with_marker(marker + "q")
        after = host_processes()
    finally:
        shutil.rmtree(ws, ignore_errors=True)

    result = {
        "host": {"cpus": os.cpu_count(), "kernel": os.uname().release},
        "mode": args.mode,
        "serve": serve,
        "sequential_cordon_run": sequential,
        "speedup": round(serve["runs_per_second"] / sequential["runs_per_second"], 2) if sequential["runs"] else None,
        "processes": {
            "host_before": before,
            "host_after": after,
            "left_behind_serve": leftovers_serve,
            "left_behind_sequential": leftovers_seq,
        },
    }
    s, q = serve, sequential
    print(f"mode {args.mode}, {args.runs} runs, {os.cpu_count()} CPUs")
    print(
        f"cordon serve ({s['inflight']} in flight): {s['seconds']:.2f} s, {s['runs_per_second']} runs/s, "
        f"latency p50 {s['latency_ms_p50']} ms p99 {s['latency_ms_p99']} ms, lost {s['lost']}, bad {s['bad']}"
    )
    if q["runs"]:
        print(f"cordon run, one at a time:     {q['seconds']:.2f} s, {q['runs_per_second']} runs/s, lost or bad {q['lost_or_bad']}")
        print(f"speedup: {result['speedup']}x")
    print(
        f"CPU: server {s['server_cpu_seconds']} s, its children {s['children_cpu_seconds']} s "
        f"({1000 * (s['server_cpu_seconds'] + s['children_cpu_seconds']) / args.runs:.2f} ms per run)"
    )
    print(
        f"server RSS: idle {s['server_idle_rss_kib'] / 1024:.1f} MiB, peak {s['server_peak_rss_kib'] / 1024:.1f} MiB; "
        f"exit code {s['server_exit_code']}"
    )
    print(
        f"processes: host {before} before, {after} after; left behind: serve {len(leftovers_serve)}, "
        f"sequential {len(leftovers_seq)}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    ok = s["lost"] == 0 and s["bad"] == 0 and q["lost_or_bad"] == 0 and not leftovers_serve and not leftovers_seq
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
