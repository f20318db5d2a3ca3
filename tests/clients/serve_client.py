#!/usr/bin/env python3
"""A small `cordon serve` client (Python standard library only) and the scenarios that
tests/integration/serve.rs runs with it.

Usage: serve_client.py --cordon BIN --workspace DIR SCENARIO

Every scenario prints `ok <what>` lines as it goes and exits 0 when all checks hold;
a failed check raises (exit 1, traceback on stderr). Effects are judged from outside
the sandbox: files that must not exist, processes that must be gone.
"""

import argparse
import json
import os
import queue
import subprocess
import threading
import time

DEADLINE = 30.0  # seconds: a hang is a failure, never a wait


class Server:
    """One `cordon serve` process, with a reader thread that files responses by id."""

    def __init__(self, cordon, workspace, *flags):
        self.proc = subprocess.Popen(
            [cordon, "serve", "--cwd", workspace, *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.responses = {}
        self.requests = queue.Queue()  # the server's own requests (`approve`)
        self.null_id = queue.Queue()  # errors that could not be tied to a request
        self.order = []  # ids in the order their responses arrived
        self.cond = threading.Condition()
        self.next_id = 1000  # scenarios that pick their own ids use smaller ones
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.stderr_lines = []
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self):
        for raw in self.proc.stdout:
            msg = json.loads(raw)  # every line the server writes must be JSON
            assert msg.get("jsonrpc") == "2.0", msg
            if "method" in msg:
                self.requests.put(msg)
                continue
            with self.cond:
                if msg["id"] is None:
                    self.null_id.put(msg)
                else:
                    self.responses[msg["id"]] = msg
                    self.order.append(msg["id"])
                self.cond.notify_all()

    def _read_stderr(self):
        for raw in self.proc.stderr:
            self.stderr_lines.append(raw.decode(errors="replace"))

    def send_raw(self, data: bytes):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, method, params=None, id=None):
        if id is None:
            self.next_id += 1
            id = self.next_id
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send_raw(json.dumps(msg).encode() + b"\n")
        return id

    def wait(self, id, timeout=DEADLINE):
        end = time.monotonic() + timeout
        with self.cond:
            while id not in self.responses:
                left = end - time.monotonic()
                assert left > 0, f"no response to request {id!r} within {timeout}s"
                self.cond.wait(left)
            return self.responses[id]

    def call(self, method, params=None, timeout=DEADLINE):
        return self.wait(self.send(method, params), timeout)

    def result(self, method, params=None, timeout=DEADLINE):
        msg = self.call(method, params, timeout)
        assert "result" in msg, f"{method} failed: {msg}"
        return msg["result"]

    def error(self, method, params=None):
        msg = self.call(method, params)
        assert "error" in msg, f"{method} should have failed: {msg}"
        return msg["error"]

    def next_null(self, timeout=DEADLINE):
        return self.null_id.get(timeout=timeout)

    def close(self, timeout=DEADLINE):
        """Close stdin and wait for the server to exit."""
        self.proc.stdin.close()
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=5)
        return code


def ok(what):
    print(f"ok {what}", flush=True)


def procs_with(marker):
    """Host pids whose command line contains `marker` (as one argument)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if marker.encode() in args:
            found.append(int(pid))
    return found


def alive(pid):
    """True if `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(pred, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


# ----------------------------------------------------------------- scenarios


def scenario_concurrent(args):
    s = Server(args.cordon, args.workspace)
    hello = s.result("hello", {"protocol_versions": [1], "client": "serve_client.py"})
    assert hello["protocol_version"] == 1 and "run" in hello["capabilities"], hello
    assert hello["ceiling"]["mode"] == "workspace-write", hello
    ok("hello handshake")

    # Eight one-second runs at once: concurrent, so well under eight seconds.
    n = 8
    t0 = time.monotonic()
    ids = [s.send("run", {"command": f"sleep 1; echo run-{i}"}) for i in range(n)]
    for i, id in enumerate(ids):
        r = s.wait(id)["result"]
        assert r["exit_code"] == 0 and r["stdout"]["text"] == f"run-{i}\n", r
        assert r["sandbox"]["mode"] == "workspace-write" and r["sandbox"]["runner"] != "passthrough", r
    elapsed = time.monotonic() - t0
    assert elapsed < n * 0.6, f"{n} one-second runs took {elapsed:.1f}s: not concurrent"
    ok(f"{n} concurrent one-second runs in {elapsed:.2f}s")

    # Responses come as each completes: a fast run sent after a slow one answers first.
    slow = s.send("run", {"command": "sleep 1.5; echo slow"})
    fast = s.send("run", {"argv": ["echo", "fast"]})
    s.wait(slow)
    assert s.order.index(fast) < s.order.index(slow), s.order
    ok("responses are written as each request completes")

    # The request fields reach the command.
    r = s.result(
        "run",
        {
            "command": 'printf "%s|%s|" "$GREETING" "$(pwd)"; cat',
            "stdin": "from stdin",
            "env": {"GREETING": "hi"},
            "workdir": "sub",
            "timeout_ms": 5000,
        },
    )
    ws = os.path.realpath(args.workspace)
    assert r["stdout"]["text"] == f"hi|{ws}/sub|from stdin", r
    assert r["timeout_ms"] == 5000, r
    ok("command, stdin, env, workdir and timeout_ms are honoured")

    # Narrowing works; the result is the same JSON as `cordon run --json`.
    r = s.result("run", {"command": "echo x > narrowed.txt", "mode": "read-only"})
    assert r["sandbox"]["mode"] == "read-only" and r["exit_code"] != 0, r
    assert not os.path.exists(os.path.join(args.workspace, "narrowed.txt"))
    cli = subprocess.run(
        [args.cordon, "run", "--json", "--cwd", args.workspace, "--", "true"], capture_output=True, check=True
    )
    assert set(json.loads(cli.stdout)) == set(s.result("run", {"argv": ["true"]})), "run result keys differ from the CLI"
    ok("narrowing to read-only refuses the write; result keys match cordon run --json")

    # A write outside the workspace is refused (judged by effect).
    outside = os.path.join(args.outside, "escape.txt")
    r = s.result("run", {"command": f"echo x > {outside}"})
    assert r["exit_code"] != 0 and not os.path.exists(outside), r
    ok("write outside the workspace refused")
    assert s.close() == 0
    ok("clean exit on end of input")


def scenario_kill(args):
    s = Server(args.cordon, args.workspace)
    started = s.result("start", {"command": "echo started; for i in $(seq 1 600); do echo tick $i; sleep 0.1; done"})
    h = started["handle"]
    assert alive(started["pid"]), started
    seen = []

    def got_started():
        seen.append(s.result("read", {"handle": h})["stdout"])
        return "started" in "".join(seen)

    assert wait_until(got_started), seen
    r1 = s.result("read", {"handle": h})
    time.sleep(0.3)
    r2 = s.result("read", {"handle": h})
    assert r1["status"] == "running" and r2["status"] == "running", (r1, r2)
    ticks = [l for l in (r1["stdout"] + r2["stdout"]).splitlines() if l.startswith("tick")]
    assert len(ticks) == len(set(ticks)), "a read repeated output: reads must be incremental"
    ok("incremental reads of a background process")

    k = s.result("kill", {"handle": h})
    assert k["was_running"] is True and k["status"] == "exited" and k["signal"] is not None, k
    assert wait_until(lambda: not alive(started["pid"])), "killed process still alive"
    k2 = s.result("kill", {"handle": h})
    assert k2["was_running"] is False, k2
    final = s.result("read", {"handle": h})
    assert final["status"] == "exited" and final["result"]["signal"] is not None, final
    assert final["result"]["aborted"] is True, final
    ok("kill stops the process, is idempotent, and read shows the exit")

    # A short background run: read after it exits returns everything plus the result.
    h2 = s.result("start", {"argv": ["sh", "-c", "echo one; echo two >&2; exit 3"]})["handle"]
    assert wait_until(lambda: s.result("read", {"handle": h2})["status"] == "exited")
    e = s.error("read", {"handle": 999})
    assert e["data"]["code"] == "UNKNOWN_HANDLE", e
    k = s.result("kill", {"handle": h2})
    assert k["was_running"] is False and k["exit_code"] == 3, k
    ok("unknown handle is an error; kill of an exited process reports its exit")
    assert s.close() == 0


def scenario_malformed(args):
    s = Server(args.cordon, args.workspace)
    cases = [
        (b"not json\n", None, -32700, "PARSE_ERROR"),
        (b"\xff\xfe\x00garbage\n", None, -32700, "PARSE_ERROR"),
        (b"[1, 2]\n", None, -32600, "INVALID_REQUEST"),
        (b'{"method": "run", "params": {"command": "true"}}\n', None, -32600, "INVALID_REQUEST"),
        (b'{"id": [1], "method": "run"}\n', None, -32600, "INVALID_REQUEST"),
        (b'{"id": 1, "method": "launch"}\n', 1, -32601, "METHOD_NOT_FOUND"),
        (b'{"id": 2, "method": "run", "params": {"command": 5}}\n', 2, -32602, "INVALID_PARAMS"),
        (b'{"id": 3, "method": "run", "params": {}}\n', 3, -32602, "INVALID_PARAMS"),
        (b'{"id": 4, "method": "run", "params": {"command": "true", "cwd": "/"}}\n', 4, -32602, "INVALID_PARAMS"),
        (b'{"id": 5, "method": "run", "params": [1]}\n', 5, -32602, "INVALID_PARAMS"),
        (b'{"id": 6, "method": "read", "params": {"handle": "x"}}\n', 6, -32602, "INVALID_PARAMS"),
        (b'{"id": 7, "method": "run", "params": {"command": "true", "timeout_ms": -5}}\n', 7, -32602, "INVALID_PARAMS"),
        (b'{"id": "s", "method": "run", "params": {"command": "true", "mode": "full-access"}}\n', "s", -32001, "CEILING_EXCEEDED"),
        (b'{"id": 8, "method": "run", "params": {"command": "true", "network": true}}\n', 8, -32001, "CEILING_EXCEEDED"),
        (b'{"id": 9, "method": "run", "params": {"command": "true", "workdir": "/etc"}}\n', 9, -32001, "CEILING_EXCEEDED"),
        (b'{"id": 10, "method": "run", "params": {"command": "true", "workdir": ".."}}\n', 10, -32001, "CEILING_EXCEEDED"),
        (b'{"id": 11, "method": "run", "params": {"command": "true", "writable_roots": ["/var"]}}\n', 11, -32001, "CEILING_EXCEEDED"),
        (b'{"id": 12, "method": "run", "params": {"command": "true", "workdir": "missing-dir"}}\n', 12, -32000, "WORKDIR_UNAVAILABLE"),
        (b'{"id": 13, "method": "run", "params": {"argv": ["no-such-program-xyz"]}}\n', 13, -32000, "PROGRAM_NOT_FOUND"),
        (b'{"id": 14, "method": "run", "params": {"command": "true", "env": {"CORDON_X": "1"}}}\n', 14, -32000, "INVALID_ENV"),
        (b'{"id": 15, "method": "hello", "params": {"protocol_versions": [99]}}\n', 15, -32004, "UNSUPPORTED_VERSION"),
        (b'{"id": 16, "jsonrpc": "1.0", "method": "probe"}\n', 16, -32600, "INVALID_REQUEST"),
    ]
    for raw, id, code, name in cases:
        s.send_raw(raw)
        msg = s.next_null() if id is None else s.wait(id)
        err = msg["error"]
        assert err["code"] == code and err["data"]["code"] == name, (raw, msg)
        if err["data"].get("field") is not None:
            assert err["data"]["field"] in err["message"], msg
    ok(f"{len(cases)} malformed or refused requests answered with the right codes")

    # Errors name the field.
    e = s.error("run", {"command": "true", "mode": "full-access"})
    assert e["data"]["field"] == "mode" and "mode" in e["message"], e
    e = s.error("run", {"command": 5})
    assert e["data"]["field"] == "command" and "expected a string" in e["message"], e
    ok("errors name the offending field")

    s.send_raw(b"\n   \n")  # blank lines are skipped silently
    r = s.result("run", {"command": "echo still serving"})
    assert r["stdout"]["text"] == "still serving\n", r
    assert s.null_id.empty(), "blank lines must not be answered"
    ok("the server keeps serving after bad input")
    assert s.close() == 0


def scenario_oversized(args):
    s = Server(args.cordon, args.workspace)
    # 2 MiB line, sent in pieces, with an id that must not be trusted.
    big = b'{"id": 77, "method": "run", "params": {"command": "echo ' + b"A" * (2 << 20) + b'"}}\n'
    for i in range(0, len(big), 65536):
        s.send_raw(big[i : i + 65536])
    after = s.send("run", {"command": "echo after"})
    err = s.next_null()["error"]
    assert err["code"] == -32700 and err["data"]["code"] == "LINE_TOO_LONG", err
    assert err["data"]["limit"] == 1 << 20, err
    assert s.wait(after)["result"]["stdout"]["text"] == "after\n"
    assert 77 not in s.responses, "the oversized line must not run"
    ok("oversized line refused with id null; the next line is served")

    # A line just under the limit still works (the bulk goes to stdin: one argument
    # of a megabyte would exceed the kernel's per-argument limit).
    payload = "x" * ((1 << 20) - 200)
    r = s.result("run", {"command": "wc -c", "stdin": payload})
    assert r["exit_code"] == 0 and r["stdout"]["text"].strip() == str(len(payload)), r
    ok("a line just under 1 MiB is accepted (its stdin reaches the command)")
    assert s.close() == 0


def scenario_eof_kills(args):
    tag = f"{os.getpid()}{int(time.time() * 1000) % 100000}"
    # full-access ceiling, so one child can be passthrough (a host pid it can write).
    s = Server(args.cordon, args.workspace, "--mode", "full-access")
    pidfile = os.path.join(args.workspace, "child.pid")
    m_full, m_conf, m_fg, m_grand = (f"7{tag}1", f"7{tag}2", f"7{tag}3", f"7{tag}4")
    full = s.result("start", {"command": f"echo $$ > {pidfile}; exec sleep {m_full}", "mode": "full-access"})
    conf = s.result(
        "start", {"command": f"sleep {m_grand} & exec sleep {m_conf}", "mode": "workspace-write"}
    )
    # A foreground run in flight at end of input finishes and is answered.
    fg = s.send("run", {"argv": ["sh", "-c", 'sleep 2; echo "fg-$0"', m_fg], "mode": "read-only"})
    assert wait_until(lambda: os.path.exists(pidfile) and open(pidfile).read().strip() != "")
    child_pid = int(open(pidfile).read())
    assert wait_until(lambda: all(procs_with(m) for m in (m_full, m_conf, m_fg, m_grand))), "children did not start"
    assert alive(child_pid) and alive(conf["pid"])
    ok(f"children running (passthrough pid {child_pid}, confined leader pid {conf['pid']})")

    t0 = time.monotonic()
    code = s.close()
    took = time.monotonic() - t0
    assert code == 0, code
    r = s.responses.get(fg)
    assert r is not None and r["result"]["aborted"] is False and r["result"]["exit_code"] == 0, (
        f"in-flight foreground run not finished and answered: {r}"
    )
    assert f"fg-{m_fg}" in r["result"]["stdout"]["text"], r
    assert not alive(child_pid), f"pid {child_pid} (written by the child) survived the server"
    assert not alive(conf["pid"]), "confined child survived"
    for m in (m_full, m_conf, m_fg, m_grand):
        assert procs_with(m) == [], f"process with marker {m} survived"
    ok(f"closing stdin answered the foreground run, killed and reaped every other child; exited in {took:.2f}s")


def scenario_approve(args):
    # Issue 27: a `git commit` refused in workspace-write. A client that declared the
    # `approve` capability in `hello` is asked (the server's `approve` request) for
    # exactly "write .git" for one retry; its answer decides, judged with host git;
    # every decision lands in the audit log. Without the capability, nobody is asked
    # and the result says why.
    ws = args.workspace
    audit = os.path.join(args.outside, "serve-audit.jsonl")

    def sh(*argv):
        subprocess.run(argv, cwd=ws, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def commits():
        out = subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=ws, capture_output=True, text=True)
        return int(out.stdout.strip())

    git = ["git", "-c", "user.name=t", "-c", "user.email=t@x"]
    sh(*git, "init", "-q", "-b", "main", ".")
    sh(*git, "commit", "-q", "--allow-empty", "-m", "one")
    command = "echo out-line; git -c user.name=t -c user.email=t@x commit -q --allow-empty -m granted"
    git_dir = os.path.join(os.path.realpath(ws), ".git")

    srv = Server(args.cordon, ws, "--audit-log", audit)
    hello = srv.result("hello", {"protocol_versions": [1], "client": "test-harness", "capabilities": ["approve"]})
    assert "approve" in hello["capabilities"], hello
    answers = [{"result": {"grant": False}}, {"error": {"code": -1, "message": "user closed the dialog"}},
               {"result": {"grant": True}}]
    for i, answer in enumerate(answers):
        run_id = srv.send("run", {"command": command})
        req = srv.requests.get(timeout=DEADLINE)
        assert req["method"] == "approve" and req["id"].startswith("cordon-approve-"), req
        p = req["params"]
        assert p["for"] == run_id, p
        assert p["request"]["grant"] == {"kind": "write", "path": git_dir}, p
        boundary = p["boundary"]
        assert f"<<<{boundary}\nout-line\n>>>{boundary}" in p["text"], p["text"]
        assert f"proposed: write git's own files in {git_dir}" in p["text"], p["text"]
        srv.send_raw(json.dumps({"jsonrpc": "2.0", "id": req["id"], **answer}).encode() + b"\n")
        msg = srv.wait(run_id)
        assert "result" in msg, msg
        r = msg["result"]
        granted = answer.get("result", {}).get("grant") is True
        assert r["escalation"]["decision"]["verdict"] == ("granted" if granted else "refused"), r
        assert commits() == (2 if granted else 1), f"answer {answer}: {r}"
        if granted:
            assert r["exit_code"] == 0 and r["sandbox"]["mode"] == "workspace-write", r
            assert r["escalation"]["first_run"]["exit_code"] != 0, r
    ok("the approve request carries the grant and the fenced output; no and an error refuse, yes commits")
    # An answer nobody waits for is dropped; the server goes on.
    srv.send_raw(b'{"jsonrpc":"2.0","id":"cordon-approve-999","result":{"grant":true}}\n')
    assert srv.result("probe") is not None
    assert srv.close() == 0
    lines = [json.loads(l) for l in open(audit)]
    assert [l["decision"] for l in lines] == ["refused", "refused", "granted"], lines
    assert all(l["approver"] == {"kind": "serve-client", "detail": "test-harness"} for l in lines), lines
    ok("every decision is in the audit log")

    srv = Server(args.cordon, ws, "--audit-log", audit)
    r = srv.result("run", {"command": command})
    assert srv.requests.empty(), "a client without the capability was asked"
    assert r["escalation"]["grant"] == {"kind": "write", "path": git_dir}, r
    assert "cannot ask" in r["escalation"]["not_offered"], r
    assert commits() == 2
    assert srv.close() == 0
    ok("without the approve capability nobody is asked, and the result says why")


SCENARIOS = {
    "approve": scenario_approve,
    "concurrent": scenario_concurrent,
    "kill": scenario_kill,
    "malformed": scenario_malformed,
    "oversized": scenario_oversized,
    "eof-kills": scenario_eof_kills,
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cordon", required=True)
    p.add_argument("--workspace", required=True)
    p.add_argument("--outside", required=False, default="/var/tmp")
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    args = p.parse_args()
    SCENARIOS[args.scenario](args)


if __name__ == "__main__":
    main()
