#!/usr/bin/env python3
"""The container suite: cordon inside Podman containers under the runtime's default
settings and the variants a platform meets (docs/containers.md, docs/testing.md).

For each variant it starts one container from a minimal image built from this host's
own files (tests/containers/rootfs.py; no registry), with the cordon binary and the
probe mounted read-only at /opt/cordon, runs tests/containers/inside.sh there, and
judges its records:
- an escape case's effect (seen inside the container, outside the sandbox) must be
  "ok", and a secret read from another process must not appear in the output;
- a positive control must succeed wherever its run was allowed to start;
- `cordon probe` must agree with what `cordon run` did: the runner and level it
  predicted, or SANDBOX_UNAVAILABLE where it said nothing can enforce the mode;
- no result may say `runner_failed` with `enforcement.level: "full"`;
- each variant's outcome must be the one it is expected to have (`EXPECT`).
It prints a table (one row per variant) and exits 1 on any failure, 0 otherwise.

Usage: suite.py [--budget SECONDS] [--cordon PATH] [--only NAME,NAME] [--no-expect]
Needs root, podman and runc (crun refuses this host's hybrid cgroup layout), cc, and
for the rootless variant the user CORDON_TEST_USER (default cordon-test) with
subordinate ids. Under CORDON_MUST_ENFORCE=1 a missing tool fails instead of skipping.
"""

import argparse
import json
import os
import pwd
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import rootfs  # noqa: E402

IMAGE = "localhost/cordon-ct"
DOCKER_PROFILE = os.path.join(HERE, "docker-default.json")
SECRET = "hunter2-ct-marker"

# The restriction each escape case tests: an effect there is an escape unless the run
# declared exactly this restriction as a gap (then it is the gap, reported).
RESTRICTION = {
    "fs-write": "fs-write",
    "fs-create": "fs-write",
    "fs-chmod": "fs-metadata",
    "git-config": "protected-paths",
    "git-hook": "protected-paths",
    "tmp-write": "private-tmp",
    "proc-environ": "process-inspection",
    "proc-grep": "process-inspection",
    "kill": "signals",
    "ptrace": "process-inspection",
    "renice": "process-inspection",
    "renice-cordon": "process-inspection",
    "net-tcp": "network",
    "survivor": "process-lifetime",
    "ipc-shm": "ipc",
    "userns": "syscall-filter",
    "mount": "syscall-filter",
    "limit-pids": "limit-pids",
}

# name -> (podman arguments, run podman as the test user, description)
VARIANTS = {
    "podman-default": ([], False, "rootful Podman, its defaults (masked /proc, Podman's seccomp profile)"),
    "rootless": ([], True, "rootless Podman as the test user, its defaults"),
    "user-65534": (["--user", "65534:65534"], False, "rootful Podman, --user 65534"),
    "docker-seccomp": (
        ["--security-opt", f"seccomp={DOCKER_PROFILE}"],
        False,
        "Docker's default seccomp profile (no namespaces, no mounts)",
    ),
    "docker-noptrace": (
        ["--security-opt", "seccomp={work}/docker-noptrace.json"],
        False,
        "Docker's profile without its kernel >= 4.8 rule: ptrace and process_vm_readv need CAP_SYS_PTRACE",
    ),
    "docker-noptrace-65534": (
        ["--security-opt", "seccomp={work}/docker-noptrace.json", "--user", "65534:65534"],
        False,
        "the same, --user 65534",
    ),
    "unmask-all": (["--security-opt", "unmask=ALL"], False, "--security-opt unmask=ALL (procMount: Unmasked)"),
    "no-netns": (
        ["--security-opt", "unmask=ALL", "--security-opt", "seccomp={work}/no-netns.json"],
        False,
        "every namespace but the network's (a profile refusing CLONE_NEWNET alone), /proc unmasked",
    ),
}

# What each variant must reach: (a hard-mode workspace-write run without flags, the
# same under `--accept-gaps container`, `--runner bwrap` in hard mode). "full"; "container": the
# container profile with exactly its gaps (CONTAINER_GAPS); an error code (fails closed).
CONTAINER_GAPS = {"fs-write", "fs-metadata", "protected-paths", "private-tmp", "ipc"}
EXPECT = {
    "podman-default": ("full", "full", "SANDBOX_UNAVAILABLE"),
    "rootless": ("full", "full", "SANDBOX_UNAVAILABLE"),
    "user-65534": ("full", "full", "SANDBOX_UNAVAILABLE"),
    "docker-seccomp": ("SANDBOX_UNAVAILABLE", "container", "SANDBOX_UNAVAILABLE"),
    "docker-noptrace": ("SANDBOX_UNAVAILABLE", "container", "SANDBOX_UNAVAILABLE"),
    "docker-noptrace-65534": ("SANDBOX_UNAVAILABLE", "container", "SANDBOX_UNAVAILABLE"),
    "unmask-all": ("full", "full", "full"),
    "no-netns": ("full", "full", "full"),
}
# The flags of every escape and control run: the container profile accepted (where
# the host can do more, the run is simply full).
DEFAULT_FLAGS = "--accept-gaps container"


def must_enforce():
    return os.environ.get("CORDON_MUST_ENFORCE") == "1"


def skip(reason):
    if must_enforce():
        print(f"FAIL container suite: {reason} (CORDON_MUST_ENFORCE=1)")
        sys.exit(1)
    print(f"SKIP container suite: {reason}")
    sys.exit(0)


def podman_env(user):
    """Environment and preexec for running podman as `user` (None: as root)."""
    if user is None:
        return dict(os.environ), None
    pw = pwd.getpwnam(user)
    runtime = f"/tmp/cordon-ct-xdg-{pw.pw_uid}"
    os.makedirs(runtime, mode=0o700, exist_ok=True)
    os.chown(runtime, pw.pw_uid, pw.pw_gid)
    env = {
        "HOME": pw.pw_dir,
        "USER": user,
        "LOGNAME": user,
        "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "XDG_RUNTIME_DIR": runtime,
    }

    def drop():
        os.setgroups([])
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)
        os.chdir(pw.pw_dir)

    return env, drop


def podman(args, user=None, timeout=120, input=None):
    env, preexec = podman_env(user)
    return subprocess.run(
        ["podman", *args], env=env, preexec_fn=preexec, capture_output=True, timeout=timeout, input=input
    )


def runtime_args():
    """Arguments every `podman run` takes on this kind of host (not security settings):
    runc, since crun refuses a hybrid cgroup layout; limits no higher than this
    process's own hard limits (root here lacks CAP_SYS_RESOURCE, and Podman's defaults
    ask for more)."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], 32768)
    args = ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]
    return ["--runtime", "runc"], args


def no_netns_profile(work):
    """A profile that allows every system call but a network namespace: `unshare` and
    `clone` with CLONE_NEWNET refused (EPERM), `clone3` answered ENOSYS (its flags are
    in memory a filter cannot read; libc and bubblewrap fall back to `clone`), as a
    hardened profile or an LSM refusing network namespaces alone would."""
    newnet = 0x40000000
    profile = {
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [
            {
                "names": ["unshare", "clone"],
                "action": "SCMP_ACT_ERRNO",
                "errnoRet": 1,
                "args": [{"index": 0, "value": newnet, "valueTwo": newnet, "op": "SCMP_CMP_MASKED_EQ"}],
            },
            {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
        ],
    }
    path = os.path.join(work, "no-netns.json")
    with open(path, "w") as f:
        json.dump(profile, f)
    os.chmod(path, 0o644)


def noptrace_profile(work):
    """Docker's profile minus its `minKernel: 4.8` rule that allows ptrace and
    process_vm_readv to everyone: what it is on older kernels, and what the issue met
    (then only CAP_SYS_PTRACE, which containers lack, allows them)."""
    with open(DOCKER_PROFILE) as f:
        profile = json.load(f)
    profile["syscalls"] = [
        r for r in profile["syscalls"]
        if not ("process_vm_readv" in r["names"] and r.get("includes", {}).get("minKernel"))
    ]
    path = os.path.join(work, "docker-noptrace.json")
    with open(path, "w") as f:
        json.dump(profile, f)
    os.chmod(path, 0o644)


def ensure_image(tar, tag, user):
    if podman(["image", "exists", tag], user).returncode == 0:
        return
    r = podman(["import", "--change", "ENV=PATH=/usr/bin:/usr/sbin", tar, tag], user, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"podman import failed: {r.stderr.decode(errors='replace')}")


def stage(cordon, work):
    """Copy cordon, the probe (compiled here) and the case script into `work` (0755)."""
    os.chmod(work, 0o755)
    shutil.copy2(cordon, os.path.join(work, "cordon"))
    probe = os.path.join(work, "probe")
    r = subprocess.run(
        ["cc", "-O2", "-Wall", "-o", probe, os.path.join(REPO, "tests/probe/probe.c")], capture_output=True
    )
    if r.returncode != 0:
        raise SystemExit("probe.c failed to compile:\n" + r.stderr.decode(errors="replace"))
    shutil.copy2(os.path.join(HERE, "inside.sh"), os.path.join(work, "inside.sh"))
    for f in ["cordon", "probe", "inside.sh"]:
        os.chmod(os.path.join(work, f), 0o755)
    return [os.path.join(work, "cordon"), probe]


def parse(stdout):
    probe, runs, effects, done = None, {}, {}, False
    for line in stdout.splitlines():
        parts = line.split("\t")
        if parts[0] == "PROBE" and len(parts) == 2:
            try:
                probe = json.loads(parts[1])
            except json.JSONDecodeError:
                probe = None
        elif parts[0] == "RUN" and len(parts) == 5:
            name, kind, status, text = parts[1], parts[2], parts[3], parts[4]
            try:
                res = json.loads(text) if text else None
            except json.JSONDecodeError:
                res = None
            runs[name] = (kind, int(status), res, text)
        elif parts[0] == "EFFECT" and len(parts) == 3:
            effects[parts[1]] = parts[2]
        elif parts[0] == "PLAIN" and len(parts) >= 3:
            effects["plain-" + parts[1]] = parts[2]
        elif line == "DONE":
            done = True
    return probe, runs, effects, done


def outcome(res):
    """One word for a run result: full, partial(gaps), NAME of an error code, or ?."""
    if res is None:
        return "?"
    if "error" in res:
        return res["error"].get("code", "?")
    sb = res.get("sandbox", {})
    enf = sb.get("enforcement", {})
    level = enf.get("level", "?")
    if sb.get("runner_failed"):
        return f"RUNNER_FAILED-result({level})"
    profile = enf.get("profile")
    gaps = sorted(g["restriction"] for g in enf.get("gaps", []))
    if profile:
        return f"profile:{profile}"
    if level == "partial":
        return "partial(" + ",".join(gaps) + ")"
    return level


def predicted(probe, mode, runner=None):
    """What probe said a run in `mode` (auto, or an explicit runner) would do:
    (runner, level) or ("unavailable", reason)."""
    if probe is None:
        return ("?", "no probe output")
    if runner is None:
        for e in probe.get("auto", []):
            if e.get("mode") == mode:
                if "error" in e:
                    return ("unavailable", e["error"].get("code"))
                return (e.get("runner"), e.get("enforcement", {}).get("level"))
        return ("?", "mode missing")
    for r in probe.get("runners", []):
        if r.get("runner") == runner:
            if r.get("probe", {}).get("status") != "available":
                return ("unavailable", r["probe"].get("reason"))
            for m in r.get("modes", []):
                if m.get("mode") == mode:
                    enf = m.get("enforcement") or {}
                    return (runner, enf.get("level"))
    return ("?", "runner missing")


def judge(name, probe, runs, effects, done):
    """(row dict, list of failures) for one variant."""
    fails = []
    if not done:
        fails.append("the case script did not finish")
    row = {"variant": name}
    # Agreement.
    for case, mode, runner in [
        ("agree-read-only", "read-only", None),
        ("agree-workspace-write", "workspace-write", None),
        ("agree-bwrap-workspace-write", "workspace-write", "bwrap"),
    ]:
        if case not in runs:
            fails.append(f"{case}: no record")
            continue
        _, status, res, text = runs[case]
        want = predicted(probe, mode, runner)
        got = outcome(res)
        key = "bwrap" if runner else mode
        row[key] = got
        if res is None:
            fails.append(f"{case}: no JSON result (exit {status}): {text[:200]}")
            continue
        if "error" in res:
            code = res["error"].get("code")
            if code == "SANDBOX_UNAVAILABLE" and want[0] == "unavailable":
                continue
            fails.append(f"{case}: probe predicted {want}, run said {code}: {res['error'].get('message', '')[:300]}")
            continue
        sb = res["sandbox"]
        if sb.get("runner_failed"):
            level = sb.get("enforcement", {}).get("level")
            fails.append(f"{case}: a result with runner_failed (level {level}) instead of an error")
            continue
        got_pair = (sb.get("runner"), sb.get("enforcement", {}).get("level"))
        if got_pair != want:
            fails.append(f"{case}: probe predicted {want}, run did {got_pair}")
        if res.get("exit_code") != 0:
            fails.append(f"{case}: `true` exited {res.get('exit_code')}: {res['stderr']['text'][:200]}")
    # Escapes and controls.
    escapes, ran, controls_ok, controls_run, declared = [], 0, 0, 0, []
    local_ipc = set()
    gaps = set()
    for case, (kind, status, res, text) in runs.items():
        if kind == "agree":
            continue
        if res is None:
            fails.append(f"{case}: no JSON result (exit {status}): {text[:200]}")
            continue
        run_gaps = set()
        if "error" not in res:
            sb = res["sandbox"]
            if sb.get("runner_failed") and sb.get("enforcement", {}).get("level") == "full":
                fails.append(f"{case}: runner_failed with enforcement level full")
            run_gaps = {g["restriction"] for g in sb.get("enforcement", {}).get("gaps", [])}
            gaps |= run_gaps
        out = "" if "error" in res else res["stdout"]["text"] + res["stderr"]["text"]
        if kind == "escape":
            if "error" not in res:
                ran += 1
            eff = effects.get(case)
            hit = []
            if eff is not None and eff != "ok":
                hit.append(eff)
            if SECRET in out:
                hit.append("read another process's secret")
            if hit and RESTRICTION.get(case) in run_gaps:
                declared.append(f"{case} ({RESTRICTION[case]})")
            else:
                escapes.extend(f"{case}: {h}" for h in hit)
            if case == "git-config" and "error" not in res and not res["sandbox"].get("denials"):
                if not res["sandbox"].get("unobserved"):
                    fails.append("git-config: a refused write into .git was not reported (denials: [])")
        elif kind == "ipc":
            # Local IPC with the network off: the result says what the run had, the
            # probe's host fact agrees, and the effect matches the claim.
            if "error" in res:
                if res["error"].get("code") != "SANDBOX_UNAVAILABLE":
                    fails.append(f"{case}: {res['error'].get('code')}: {res['error'].get('message', '')[:300]}")
                continue
            ipc = res["sandbox"].get("local_ipc") or {}
            worked = '"ok":true' in res["stdout"]["text"]
            netns = ((probe or {}).get("host", {}).get("net_namespace") or {}).get("status")
            local_ipc.add(ipc.get("status", "absent"))
            if ipc.get("status") == "own-namespace":
                if not worked:
                    fails.append(f"{case}: local_ipc own-namespace, but the echo failed: {out[-300:]}")
                if netns != "available":
                    fails.append(f"{case}: local_ipc own-namespace, but probe said net_namespace {netns}")
            elif ipc.get("status") == "refused" and ipc.get("reason"):
                if worked:
                    fails.append(f"{case}: local_ipc refused, but the echo worked: {out[-300:]}")
            else:
                fails.append(f"{case}: no local_ipc in a network-off result: {ipc}")
        elif kind == "control":
            if "error" in res:
                code = res["error"].get("code")
                if code != "SANDBOX_UNAVAILABLE":
                    fails.append(f"{case}: {code}: {res['error'].get('message', '')[:300]}")
                continue
            controls_run += 1
            if res.get("exit_code") == 0 and not res["sandbox"].get("runner_failed"):
                controls_ok += 1
            else:
                fails.append(f"{case}: control failed (exit {res.get('exit_code')}): {res['stderr']['text'][-300:]}")
    row["plain bwrap"] = effects.pop("plain-bwrap", "?")
    for case, eff in effects.items():
        if eff.startswith("BROKEN"):
            fails.append(f"{case}: {eff}")
    fails.extend(f"ESCAPE {e}" for e in escapes)
    row["escapes"] = f"{len(escapes)} ({ran} ran)"
    row["effects of declared gaps"] = ",".join(declared) or "-"
    row["controls"] = f"{controls_ok}/{controls_run}"
    row["gaps"] = ",".join(sorted(gaps)) or "-"
    row["local ipc"] = ",".join(sorted(local_ipc)) or "-"
    limits = None
    for case in ["ctl-read", "agree-workspace-write"]:
        res = runs.get(case, (None, None, None, None))[2]
        if res and "limits" in res:
            limits = res["limits"]
            break
    row["limits"] = f"mem:{limits.get('memory_by')} pids:{limits.get('pids_by')}" if limits else "-"
    ctl = runs.get("ctl-read", (None, None, None, None))[2]
    row["with flags"] = profile_outcome(ctl)
    return row, fails


def profile_outcome(res):
    """full, container (exactly the container profile's gaps), partial(...), or an error code."""
    if res is None:
        return "?"
    if "error" in res:
        return res["error"].get("code", "?")
    enf = res["sandbox"]["enforcement"]
    gaps = {g["restriction"] for g in enf.get("gaps", [])}
    if enf.get("level") == "partial" and gaps == CONTAINER_GAPS:
        return "container"
    return outcome(res)


def print_table(rows):
    cols = ["variant", "read-only", "workspace-write", "with flags", "bwrap", "plain bwrap", "escapes", "effects of declared gaps", "controls", "local ipc", "gaps", "limits"]
    width = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r.get(c, "")).ljust(width[c]) for c in cols))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=300.0, help="seconds for the whole suite")
    ap.add_argument("--cordon", default=os.path.join(REPO, "target/debug/cordon"))
    ap.add_argument("--only", default="")
    ap.add_argument("--no-expect", action="store_true", help="report outcomes without asserting EXPECT")
    ap.add_argument("--flags", default=None, help="CT_FLAGS for the escape and control runs")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for the container (investigation)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    start = time.monotonic()
    deadline = start + args.budget

    if not sys.platform.startswith("linux"):
        skip("not Linux")
    if os.geteuid() != 0:
        skip("needs root (rootful Podman, and the test user for rootless)")
    for tool in ["podman", "runc", "cc"]:
        if shutil.which(tool) is None:
            skip(f"no {tool} (apt-get install podman runc gcc)")
    if not os.path.exists(args.cordon):
        skip(f"no cordon binary at {args.cordon} (cargo build)")
    test_user = os.environ.get("CORDON_TEST_USER", "cordon-test")
    names = [n for n in VARIANTS if not args.only or n in args.only.split(",")]

    work = tempfile.mkdtemp(prefix="cordon-ct-", dir="/var/tmp")
    try:
        lib_users = stage(args.cordon, work)
        noptrace_profile(work)
        no_netns_profile(work)
        data, digest = rootfs.build(lib_users)
        tag = f"{IMAGE}:{digest[:16]}"
        tar = os.path.join(work, "rootfs.tar")
        with open(tar, "wb") as f:
            f.write(data)
        os.chmod(tar, 0o644)
        runtime, limits = runtime_args()
        rows, all_fails = [], []
        for name in names:
            extra, rootless, _ = VARIANTS[name]
            extra = [a.replace("{work}", work) for a in extra]
            user = test_user if rootless else None
            if rootless:
                try:
                    pwd.getpwnam(test_user)
                except KeyError:
                    skip(f"no user {test_user} for the rootless variant")
            ensure_image(tar, tag, user)
            net = []
            if rootless and not tun_usable(test_user):
                # slirp4netns cannot open /dev/net/tun (0600 here): the container gets
                # no network namespace of its own beyond loopback; cordon's cases need none.
                net = ["--network", "none"]
            env_flags = args.flags if args.flags is not None else os.environ.get("CT_FLAGS", DEFAULT_FLAGS)
            cmd = [
                *runtime, "run", "--rm", *limits, *net, *extra,
                "-v", f"{work}:/opt/cordon:ro", "-e", f"CT_FLAGS={env_flags}",
                *[a for e in args.env for a in ("-e", e)],
                tag, "/bin/sh", "/opt/cordon/inside.sh",
            ]
            left = deadline - time.monotonic()
            if left <= 5:
                all_fails.append(f"{name}: out of time budget")
                rows.append({"variant": name, "escapes": "not run (budget)"})
                continue
            t0 = time.monotonic()
            try:
                r = podman(cmd, user, timeout=left)
                stdout, stderr = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
            except subprocess.TimeoutExpired as e:
                stdout = (e.stdout or b"").decode(errors="replace")
                stderr = "timed out"
            took = time.monotonic() - t0
            if args.verbose:
                print(f"== {name} ({took:.1f}s)\n{stdout}\n{stderr}")
            probe, runs, effects, done = parse(stdout)
            row, fails = judge(name, probe, runs, effects, done)
            if not done:
                fails.append(f"stderr: {stderr[-500:]}")
            expect = EXPECT.get(name)
            if expect and not args.no_expect:
                got = (row.get("workspace-write"), row.get("with flags"), row.get("bwrap"))
                if got != expect:
                    fails.append(f"expected (hard, with flags, bwrap) {expect}, got {got}")
            row["time"] = f"{took:.1f}s"
            rows.append(row)
            all_fails.extend(f"{name}: {f}" for f in fails)
        print_table(rows)
        print(f"container suite: {len(rows)} variants in {time.monotonic() - start:.1f}s")
        for f in all_fails:
            print(f"FAIL {f}")
        return 1 if all_fails else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def tun_usable(user):
    env, preexec = podman_env(user)
    r = subprocess.run(["sh", "-c", "exec 3<>/dev/net/tun"], env=env, preexec_fn=preexec, capture_output=True)
    return r.returncode == 0


if __name__ == "__main__":
    sys.exit(main())
