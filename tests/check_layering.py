#!/usr/bin/env python3
"""check_layering.py — the folders are the design: prove that no source file includes from a layer
above its own, and that every project include names its path from the project root.

The allowed edges below are the dependency order README's "How it works" describes. A file may
include system headers and, by bare name, files of its own folder; anything else must be a
root-relative path ("runtime/base/err.h") into a folder its own folder may depend on. Exits 1 and
lists every offending line. Takes the source root as its argument."""
import os
import re
import sys

# folder -> folders it may include from (its own folder is always allowed)
ALLOWED = {
    "runtime/base": [],
    "runtime/config": ["runtime/base"],
    "runtime/data": ["runtime/base"],
    "runtime/cudaemu": ["runtime/base"],
    "runtime/device": ["runtime/base", "runtime/config", "runtime/cudaemu"],
    "runtime/optim": ["runtime/base", "runtime/config", "runtime/device"],
    "runtime/ckpt": ["runtime/base"],
    "collectives": ["runtime/base", "runtime/config", "runtime/device", "runtime/cudaemu"],
    "models": ["runtime/base", "runtime/config", "runtime/data", "runtime/device"],
    "launcher": ["runtime", "collectives", "models"],
    "scripts": ["runtime", "collectives", "models"],
    "tests": ["runtime", "collectives", "models", "launcher", "tests"],
}
SOURCE_EXT = (".c", ".h", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    """The most specific ALLOWED key that contains path."""
    best = None
    for key in ALLOWED:
        if path == key or path.startswith(key + "/"):
            if best is None or len(key) > len(best):
                best = key
    return best


def check_file(root, rel):
    problems = []
    layer = layer_of(rel)
    here = os.path.dirname(rel)
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            where = f"{rel}:{lineno}: #include \"{target}\""
            if ".." in target.split("/"):
                problems.append(f"{where}: relative path; name it from the project root")
                continue
            if "/" not in target:
                # bare name: a file of the same folder (or a generated/system-style header)
                if os.path.exists(os.path.join(root, here, target)) or not os.path.exists(
                        os.path.join(root, target)):
                    continue
                problems.append(f"{where}: not in this folder; name it from the project root")
                continue
            if not os.path.exists(os.path.join(root, target)):
                continue  # a system or toolkit header such as "oneapi/dnnl/dnnl.h"
            tlayer = layer_of(target)
            if tlayer is None or layer is None:
                continue
            if tlayer == layer or target.startswith(layer + "/"):
                continue
            if any(tlayer == a or tlayer.startswith(a + "/") for a in ALLOWED[layer]):
                continue
            problems.append(f"{where}: {layer}/ may not include from {tlayer}/ (upward or sideways)")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems, checked = [], 0
    for top in ALLOWED:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if name.endswith(SOURCE_EXT):
                    rel = os.path.relpath(os.path.join(dirpath, name), root)
                    if layer_of(rel) == top:
                        problems += check_file(root, rel)
                        checked += 1
    for p in problems:
        print(p)
    print(f"layering: {checked} files checked, {len(problems)} problems")
    return 1 if problems or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
