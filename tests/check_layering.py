#!/usr/bin/env python3
"""check_layering.py — the folders are the design: prove that no source file includes from a layer
above its own, that every project include names its path from the project root, that every
path a comment or a build file names still exists, that config/'s code names no model kind, and
that the training job's files (launcher/trainer/) include each other without a cycle.

The allowed edges below are the dependency order README's "How it works" describes. A file may
include system headers and, by bare name, files of its own folder or a header the build puts on
its include path (the emulator's, in the emulated build); anything else must be a root-relative
path ("runtime/base/err.h") into a folder its own folder may depend on.
Path references: in comments (C /* */ and //, # in meson, shell, Python, YAML and INI files,
Python docstrings) and in Markdown prose (code blocks, which show example output, excepted),
every root-relative path under one of REFERENCED_TOPS must name a file or folder that exists
(a * matches as a glob). A path glued to something before it (build/launcher/ddprun, $dir/x,
CPU/MPI/launcher) is not root-relative and is not checked.
Exits 1 and lists every offending line or reference. Takes the source root as its argument."""
import glob
import os
import re
import sys

# folder -> folders it may include from (its own folder is always allowed)
ALLOWED = {
    "runtime/base": [],
    "runtime/data": ["runtime/base"],
    # test infrastructure the emulated build's device layer runs on, which names its headers by bare
    # name ("cudaemu.h": on the include path of that build only), never by a path under tests/
    "tests/cudaemu": ["runtime/base"],
    "runtime/hf": ["runtime/base"],
    "runtime/device": ["runtime/base"],
    "runtime/optim": ["runtime/base", "runtime/device"],
    "runtime/ckpt": ["runtime/base"],
    "runtime/cloud": ["runtime/base"],
    "runtime/tensorboard": ["runtime/base"],
    "collectives": ["runtime/base", "runtime/device"],
    "models": ["runtime/base", "runtime/data", "runtime/hf", "runtime/device"],
    # the config holds each layer's own option types, so it sits above them (below the training job)
    "config": ["runtime/base", "runtime/device", "runtime/optim", "runtime/cloud", "models"],
    # the programs: launcher/meson.build links each from its folder
    "launcher": [],
    "launcher/shared": ["runtime/base"],  # what several programs use
    "launcher/trainer": ["runtime/base", "runtime/data", "runtime/device", "runtime/optim", "runtime/ckpt",
                         "runtime/cloud", "runtime/tensorboard", "config", "collectives", "models",
                         "launcher/shared",
                         "runtime/hf"],  # runtime/hf: init_from's tokenizer.json against the data's vocabulary
    "launcher/worker": ["runtime/base", "runtime/cloud", "config", "collectives", "launcher/trainer",
                        "launcher/shared"],
    "launcher/bench": ["runtime/base", "runtime/device", "collectives", "launcher/shared"],
    "launcher/commands": ["runtime/base", "runtime/data", "runtime/hf", "runtime/device", "runtime/ckpt",
                          "config", "models"],  # runtime/hf: the JSON reader, for generate's chat.json
    # runtime/ckpt and runtime/cloud: a write given up and a preemption notice, in ranks' output
    "launcher/ddprun": ["runtime/base", "runtime/device", "runtime/ckpt", "runtime/cloud", "config", "collectives",
                        "launcher/commands", "launcher/shared"],
    "scripts": ["runtime", "collectives", "models"],
    "tests": ["runtime", "collectives", "models", "config", "launcher", "tests"],
    "tests/cudaemu/tests": ["runtime/base", "runtime/device", "tests"],  # the emulator's own tests
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


REFERENCED_TOPS = ("runtime", "collectives", "models", "config", "launcher", "tests", "scripts", "docs", "configs")
PATH_REF = re.compile(r"(?<![\w./$~-])((?:%s)/[\w./*-]*[\w*])" % "|".join(REFERENCED_TOPS))
C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
HASH_COMMENT = re.compile(r"(?:^|(?<=\s))#[^\n]*", re.M)
DOCSTRING = re.compile(r'"""(?:.|\n)*?"""')
HASH_COMMENTED = ("meson.build", "meson_options.txt", ".sh", ".yaml", ".ini")


def markdown_prose(text):
    """The lines of a Markdown text outside fenced and indented code blocks."""
    prose, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and not line.startswith("    "):
            prose.append(line)
    return ["\n".join(prose)]


def commented_text(name, text):
    """The parts of a file that are comments (or prose), where a path is a pointer for readers."""
    if name.endswith(SOURCE_EXT):
        return C_COMMENT.findall(text)
    if name.endswith(".md"):
        return markdown_prose(text)
    if name.endswith(".py"):
        return HASH_COMMENT.findall(text) + DOCSTRING.findall(text)
    if name.endswith(HASH_COMMENTED) or text.startswith("#!"):
        return HASH_COMMENT.findall(text)
    return []


def path_exists(root, ref):
    if "*" in ref:
        return bool(glob.glob(os.path.join(root, ref)))
    return os.path.exists(os.path.join(root, ref))


def check_references(root, rel):
    try:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        return []  # binary test data
    problems = []
    for chunk in commented_text(os.path.basename(rel), text):
        for ref in PATH_REF.findall(chunk):
            if not path_exists(root, ref):
                problems.append(f"{rel}: names {ref}, which does not exist")
    return problems


def source_files(root):
    """The relative path of every file under the folders ALLOWED lists."""
    for top in ALLOWED:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if layer_of(rel) == top:
                    yield rel


# config/ composes the model kinds' sections from their descriptors (models/model_config.h) and must
# name no kind in its code: adding one is then files in models/ only. The kinds are model.kind's
# choices (models/model_config.c's model_kind_names); comments and strings (descriptions, which
# docs/config-reference.md pins) may still mention them.
KIND_NAMES = re.compile(r'model_kind_names\[\]\s*=\s*\{([^}]*)\}')
CODE_NOISE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def check_config_names_no_kind(root):
    with open(os.path.join(root, "models", "model_config.c"), encoding="utf-8") as f:
        m = KIND_NAMES.search(f.read())
    if not m:
        return ["models/model_config.c: no model_kind_names[] = {...} to read the model kinds from"]
    kinds = re.findall(r'"([a-z0-9_]+)"', m.group(1))
    word = re.compile(r'\b\w*(?:' + "|".join(kinds) + r')\w*\b', re.I)
    problems = []
    for rel in sorted(source_files(root)):
        if layer_of(rel) != "config" or not rel.endswith(SOURCE_EXT):
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            code = CODE_NOISE.sub(lambda t: "\n" * t.group(0).count("\n"), f.read())
        for lineno, line in enumerate(code.split("\n"), 1):
            for hit in dict.fromkeys(word.findall(line)):
                problems.append(f"{rel}:{lineno}: {hit}: config/ names a model kind (its descriptor in models/ "
                                f"should say it)")
    return problems


# The trainer's files include the headers of the files they call, so a cycle among its includes is
# a circle of calls (train_ckpt.c calling train_finite.c calling train_ckpt.c): none may exist, so
# that each file can be read knowing only what it calls. A file and its header are one unit
# (train_ckpt.c and train_ckpt.h are train_ckpt); a unit includes another when any of its files
# includes the other's header, by bare name or by its path from the project root.
ACYCLIC_FOLDERS = ("launcher/trainer",)


def include_units(root, folder):
    """unit -> {included unit: (including file, included header)} for folder's .c and .h files."""
    names = sorted(n for n in os.listdir(os.path.join(root, folder)) if n.endswith((".c", ".h")))
    edges = {os.path.splitext(n)[0]: {} for n in names}
    for name in names:
        unit = os.path.splitext(name)[0]
        with open(os.path.join(root, folder, name), encoding="utf-8", errors="replace") as f:
            for line in f:
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                if target.startswith(folder + "/"):
                    target = target[len(folder) + 1:]
                other = os.path.splitext(target)[0]
                if "/" not in target and target in names and other != unit:
                    edges[unit].setdefault(other, (name, target))
    return edges


def find_cycles(edges):
    """Each cycle a depth-first search meets, as the list of its units (first unit repeated last)."""
    state, path, cycles = {}, [], []

    def visit(u):
        state[u] = "open"
        path.append(u)
        for v in sorted(edges.get(u, {})):
            if state.get(v) == "open":
                cycles.append(path[path.index(v):] + [v])
            elif v not in state:
                visit(v)
        path.pop()
        state[u] = "done"

    for u in sorted(edges):
        if u not in state:
            visit(u)
    return cycles


def check_include_cycles(root):
    problems = []
    for folder in ACYCLIC_FOLDERS:
        edges = include_units(root, folder)
        for cycle in find_cycles(edges):
            steps = ", ".join(f"{edges[a][b][0]} includes {edges[a][b][1]}" for a, b in zip(cycle, cycle[1:]))
            problems.append(f"{folder}: include cycle {' -> '.join(cycle)} ({steps}): a circle of calls; move the "
                            f"function to the file it belongs to, or pass what it needs as an argument or callback")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems, checked = [], 0
    for rel in source_files(root):
        if rel.endswith(SOURCE_EXT):
            problems += check_file(root, rel)
            checked += 1
    problems += check_config_names_no_kind(root)
    problems += check_include_cycles(root)
    referring = list(source_files(root)) + ["README.md", "meson.build", "meson_options.txt"]
    for top in ("docs", "configs"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            referring += [os.path.relpath(os.path.join(dirpath, n), root) for n in names]
    for rel in referring:
        if os.path.exists(os.path.join(root, rel)):
            problems += check_references(root, rel)
    for p in problems:
        print(p)
    print(f"layering: {checked} files checked for includes, {len(referring)} for path references, "
          f"{len(problems)} problems")
    return 1 if problems or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
