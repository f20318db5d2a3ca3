#!/usr/bin/env python3
"""Drive `cordon serve` or `cordon mcp` one request at a time (deterministic order).

Usage: drive.py CORDON serve|mcp CWD < requests.jsonl
Each input line is written, then exactly one response line is read (lines whose
first word is `#notify` are written without waiting). The output is every response
line, in order, followed by the exit status.
"""
import subprocess
import sys

cordon, sub, cwd = sys.argv[1], sys.argv[2], sys.argv[3]
args = [cordon, sub, "--cwd", cwd] + sys.argv[4:]
p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
for line in sys.stdin:
    line = line.rstrip("\n")
    if not line:
        continue
    wait = True
    if line.startswith("#notify "):
        line, wait = line[len("#notify "):], False
    p.stdin.write(line.encode() + b"\n")
    p.stdin.flush()
    if wait:
        sys.stdout.write(p.stdout.readline().decode())
p.stdin.close()
rest = p.stdout.read().decode()
sys.stdout.write(rest)
err = p.stderr.read().decode()
code = p.wait()
sys.stdout.write(f"--- stderr\n{err}--- exit {code}\n")
