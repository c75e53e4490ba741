#!/usr/bin/env python3
"""test_mutation_check.py — scripts/mutation-check interrupted in the middle of a run leaves no
planted defect behind: SIGTERM to its whole process group (what `timeout` or a CI limit sends)
while it tests a build with a defect planted, then the source tree (every file git tracks or would
add) and the emulated build it was run beside (every file but meson's logs) must be byte for byte
what they were, no process it started (in either worker) may be left, and the scratch copy it named
must be gone.

    test_mutation_check.py SOURCE_ROOT BUILD_DIR

Runs two mutations (--only twice) in two workers (--jobs 2), so that the other worker is building or
testing too when the signal comes. The waits are hang guards, not measurements."""
import glob
import hashlib
import importlib.machinery
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time

MUTATIONS = ("a kernel writes one element past its buffer", "a missing __syncthreads (the column sums' second stage")


def mutations_of(root):
    """[(file, pattern)] of MUTATIONS in the script's own table."""
    path = os.path.join(root, "scripts", "mutation-check")
    loader = importlib.machinery.SourceFileLoader("mutation_check", path)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("mutation_check", loader))
    loader.exec_module(module)
    found = [(m[1], m[2]) for m in module.MUTATIONS if any(name in m[0] for name in MUTATIONS)]
    if len(found) != len(MUTATIONS):
        sys.exit(f"test_mutation_check: expected {len(MUTATIONS)} mutations in the table, found {len(found)}")
    return found


def planted(trees, mutations):
    """True when one of trees holds a mutation's file whose pattern no longer matches: planted."""
    for tree in trees:
        for rel, pattern in mutations:
            try:
                with open(os.path.join(tree, rel)) as f:
                    if not re.search(pattern, f.read()):
                        return True
            except OSError:
                continue
    return False


def tree_snapshot(root):
    """{path: sha256} of the files git tracks or would add under root."""
    out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, check=True).stdout.decode()
    return {p: digest(os.path.join(root, p)) for p in out.split("\0") if p and os.path.isfile(os.path.join(root, p))}


def build_snapshot(build):
    """{path: sha256} of every file under build but meson's logs (which a test run writes)."""
    snap = {}
    for top, dirs, files in os.walk(build):
        dirs[:] = [d for d in dirs if os.path.join(top, d) != os.path.join(build, "meson-logs")]
        for name in files:
            path = os.path.join(top, name)
            if os.path.isfile(path) and not os.path.islink(path):
                snap[os.path.relpath(path, build)] = digest(path)
    return snap


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def processes():
    """{pid: (parent pid, argv)} of every process now."""
    table = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                table[int(pid)] = (ppid, f.read().decode(errors="replace").split("\0"))
        except OSError:
            continue
    return table


def descendants(root):
    """{pid: argv} of the processes below root."""
    table = processes()
    found, grew = {}, True
    while grew:
        grew = False
        for pid, (ppid, argv) in table.items():
            if pid not in found and (ppid == root or ppid in found):
                found[pid] = argv
                grew = True
    return found


def runs_tests(root):
    """True once a `meson test` runs below root."""
    return any("test" in argv and any(a.endswith("meson") for a in argv) for argv in descendants(root).values())


def main():
    root, build = sys.argv[1], sys.argv[2]
    failures = []

    def check(what, ok):
        print(("ok - " if ok else "FAIL - ") + what, flush=True)
        if not ok:
            failures.append(what)

    tree_before, build_before = tree_snapshot(root), build_snapshot(build)
    out_path = os.path.join(build, "meson-logs", "test_mutation_check.out")
    with open(out_path, "w") as out:
        only = [arg for name in MUTATIONS for arg in ("--only", name)]
        proc = subprocess.Popen([os.path.join(root, "scripts", "mutation-check"), "--jobs", "2"] + only,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        mutations = mutations_of(root)
        deadline = time.monotonic() + 900
        while proc.poll() is None and time.monotonic() < deadline:
            scratch = re.search(r"scratch copy in (\S+)", open(out_path).read())
            trees = [root] + (glob.glob(os.path.join(scratch.group(1), "worker*", "src")) if scratch else [])
            if runs_tests(proc.pid) and planted(trees, mutations):
                break
            time.sleep(0.05)
        check("mutation-check reached the tests of the planted defect", proc.poll() is None)
        started = descendants(proc.pid)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            rc = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
    for _ in range(200):
        left = [p for p, (_, argv) in processes().items() if started.get(p) == argv]  # same pid, same program
        if not left:
            break
        time.sleep(0.05)
    text = open(out_path).read()
    print(text, end="")
    check(f"interrupted, it exits non-zero (got {rc})", rc != 0)
    check(f"no process it started outlives it (left: {left[:5]})", not left)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    tree_after, build_after = tree_snapshot(root), build_snapshot(build)
    changed = sorted(p for p in tree_before.keys() | tree_after.keys() if tree_before.get(p) != tree_after.get(p))
    check(f"the source tree is unchanged (changed: {changed[:5]})", not changed)
    changed = sorted(p for p in build_before.keys() | build_after.keys() if build_before.get(p) != build_after.get(p))
    check(f"{build} is unchanged (changed: {changed[:5]})", not changed)
    scratch = re.search(r"scratch copy in (\S+)", text)
    check("it named its scratch copy", scratch is not None)
    if scratch:
        check(f"the scratch copy {scratch.group(1)} is removed", not os.path.exists(scratch.group(1)))
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
