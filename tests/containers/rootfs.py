"""A minimal container root file system made from this Debian host's own files.

No registry is involved: the listed programs are copied from the host with the shared
libraries `ldd` names for them, into a deterministic tar (sorted names, fixed times and
owners), so the same host yields the same image id and a cached image is reused.
What it does not do: install packages or make a general-purpose image; it holds what
tests/containers/inside.sh runs and nothing else.
"""

import hashlib
import io
import os
import re
import subprocess
import tarfile

# The programs the cases run inside the container (besides cordon and the probe,
# which the suite mounts in): a shell for the case script and for `cordon run -c`,
# the core utilities the cases call, git for the positive controls and the .git guard,
# bubblewrap for `--runner bwrap`.
PROGRAMS = [
    "/bin/sh", "/bin/bash", "/usr/bin/env", "/usr/bin/cat", "/usr/bin/ls", "/usr/bin/mkdir",
    "/usr/bin/rm", "/usr/bin/mv", "/usr/bin/ln", "/usr/bin/cp", "/usr/bin/touch", "/usr/bin/chmod",
    "/usr/bin/stat", "/usr/bin/sleep", "/usr/bin/id", "/usr/bin/echo", "/usr/bin/head",
    "/usr/bin/tail", "/usr/bin/tr", "/usr/bin/wc", "/usr/bin/true", "/usr/bin/false",
    "/usr/bin/test", "/usr/bin/grep", "/usr/bin/sed", "/usr/bin/git", "/usr/bin/bwrap",
    "/usr/bin/readlink", "/usr/bin/sort", "/usr/bin/uname", "/usr/bin/timeout", "/usr/bin/kill",
    "/usr/bin/printf", "/usr/bin/date", "/usr/bin/cut", "/usr/bin/cmp", "/usr/bin/dirname", "/usr/bin/basename", "/usr/bin/tee",
]

PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
GROUP = "root:x:0:\nnogroup:x:65534:\n"
# A fixed time for every entry: the tar (and so the image id) depends only on content.
MTIME = 1_700_000_000


def libraries(program):
    """The shared libraries `ldd` resolves for `program` (and the loader)."""
    out = subprocess.run(["ldd", program], capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        m = re.search(r"(/\S+) \(0x", line)
        if m:
            libs.append(m.group(1))
    return libs


def files(lib_users):
    """Every path the image holds, with its host source (resolved); `lib_users` are
    programs mounted in later (cordon, the probe) whose libraries the image must hold."""
    wanted = {}
    for prog in lib_users:
        for lib in libraries(prog):
            wanted[os.path.normpath(lib)] = os.path.realpath(lib)
    for prog in PROGRAMS:
        if not os.path.exists(prog):
            raise SystemExit(f"rootfs: {prog} is missing on this host (install it: see .ci/run)")
        wanted[prog] = os.path.realpath(prog)
        for lib in libraries(prog):
            # Keep the path the loader looks for (the ld.so path is fixed in every ELF
            # file) and copy the file it resolves to.
            wanted[os.path.normpath(lib)] = os.path.realpath(lib)
    return wanted


def add_dir(tar, name, mode=0o755):
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    info.mtime = MTIME
    tar.addfile(info)


def add_bytes(tar, name, data, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = MTIME
    tar.addfile(info, io.BytesIO(data))


def add_symlink(tar, name, target):
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    info.mtime = MTIME
    tar.addfile(info)


def in_usr(path):
    """`path` relative to the root, with the merged directories spelt under usr/."""
    rel = path.lstrip("/")
    for top in ["bin/", "sbin/", "lib/", "lib64/"]:
        if rel.startswith(top):
            return "usr/" + rel
    return rel


def build(lib_users=()):
    """The rootfs as tar bytes and their sha256 (hex)."""
    entries = files(lib_users)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        dirs = set()
        # Debian 12 merges /usr: the root's bin, sbin and lib* are links into /usr.
        for top in ["bin", "sbin", "lib", "lib64"]:
            add_symlink(tar, top, f"usr/{top}")
        for d in ["usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "etc", "root", "home", "var", "opt", "proc",
                  "sys", "dev", "run"]:
            dirs.add(d)
        # One entry per path inside (/lib/x and /usr/lib/x are the same file there).
        placed = {}
        for dest in sorted(entries):
            placed[in_usr(dest)] = entries[dest]
        for rel in placed:
            parent = os.path.dirname(rel)
            while parent:
                dirs.add(parent)
                parent = os.path.dirname(parent)
        for d in sorted(dirs):
            add_dir(tar, d, 0o700 if d == "root" else 0o755)
        add_dir(tar, "tmp", 0o1777)
        add_dir(tar, "var/tmp", 0o1777)
        for rel in sorted(placed):
            with open(placed[rel], "rb") as f:
                add_bytes(tar, rel, f.read(), os.stat(placed[rel]).st_mode & 0o7777)
        add_bytes(tar, "etc/passwd", PASSWD.encode())
        add_bytes(tar, "etc/group", GROUP.encode())
        add_bytes(tar, "etc/hosts", b"127.0.0.1 localhost\n::1 localhost\n")
    data = buf.getvalue()
    return data, hashlib.sha256(data).hexdigest()


if __name__ == "__main__":
    import sys
    data, digest = build(sys.argv[1:])
    print(len(data), digest)
