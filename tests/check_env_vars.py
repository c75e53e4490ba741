#!/usr/bin/env python3
"""check_env_vars.py — docs/environment.md lists every environment variable the code reads, once.

Extracts the variables the programs' sources (runtime/, collectives/, models/, launcher/, and the
emulator tests/cudaemu/ that the emulated build links into them: C, C++ and CUDA) read with getenv and the ones they set for the ranks (setenv, mpirun's `-x NAME=...`),
and compares them with the tables of docs/environment.md:
- "Read by the programs": exactly the variables the sources read;
- "Set by ddprun for each rank": variables the sources set and none of them reads;
- "Read by the scripts and tests": each named in scripts/ or tests/, and every variable the C
  sources of scripts/ and tests/ read is in one of the tables.
A getenv or setenv whose name is a parameter (a helper such as `env_int(const char *name)`) is
followed to the helper's calls in the same file; a call whose argument is not a string literal is
reported, since then nobody can tell which variable it reads. No variable may be listed twice.
Exits 1 listing every difference. Takes the source root as its argument (default: this file's
repository); --doc=PATH checks another copy of the page. It only reads files: it must not build,
run or write anything."""
import os
import re
import sys

# the emulator (tests/cudaemu, not its own tests) is linked into the emulated build's programs
PROGRAM_DIRS = ("runtime", "collectives", "models", "launcher", "tests/cudaemu")
NOT_PROGRAMS = ("tests/cudaemu/tests",)
SOURCE_EXT = (".c", ".h", ".cpp", ".cu", ".cuh")
# variables the C library or the system defines, read by tests for scratch space
STANDARD = {"TMPDIR"}
TABLES = {"read": "Read by the programs", "set": "Set by ddprun for each rank",
          "scripts": "Read by the scripts and tests"}

TOKEN = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*', re.S)
CALL = re.compile(r"\b(?:secure_getenv|getenv|setenv)\s*\(")
FUNC_DEF = re.compile(r"^[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\(([^;{}()]*)\)\s*\{", re.M)
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
EXPORT = re.compile(r'"-x"\s*\)\s*;[^";]*"([A-Z_][A-Z0-9_]*)(?:=[^"]*)?"')


def strip_comments(text):
    """The text with comments blanked (newlines kept), string literals intact."""
    def blank(m):
        s = m.group(0)
        return s if s[0] in "\"'" else re.sub(r"[^\n]", " ", s)
    return TOKEN.sub(blank, text)


def call_args(text, open_paren):
    """The top-level arguments of the call whose '(' is at open_paren, and the end position."""
    depth, args, start, i = 0, [], open_paren + 1, open_paren
    while i < len(text):
        c = text[i]
        if c in "\"'":
            m = TOKEN.match(text, i)
            i = m.end() if m else i + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append(text[start:i].strip())
                return args, i
        elif c == "," and depth == 1:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1
    return args, i


def literal_name(arg):
    m = re.fullmatch(r'"([^"]*)"', arg)
    return m.group(1) if m and NAME.match(m.group(1)) else None


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def names_through(text, rel, pos, arg, problems, seen=()):
    """The variable names a getenv/setenv argument at pos stands for: a literal, or a parameter of
    the enclosing function followed to that function's calls in this file."""
    name = literal_name(arg)
    if name:
        return [(name, f"{rel}:{line_of(text, pos)}")]
    defs = [m for m in FUNC_DEF.finditer(text) if m.start() < pos]
    params = [re.findall(r"\w+", p)[-1] if re.findall(r"\w+", p) else "" for p in
              defs[-1].group(2).split(",")] if defs else []
    if not defs or arg not in params or defs[-1].group(1) in seen:
        problems.append(f"{rel}:{line_of(text, pos)}: cannot tell which variable `{arg}` names "
                        "(give the name as a string literal, or pass it as a parameter)")
        return []
    func, index = defs[-1].group(1), params.index(arg)
    out = []
    for m in re.finditer(r"\b%s\s*\(" % re.escape(func), text):
        if m.start() == defs[-1].start() + defs[-1].group(0).find(func):
            continue  # the definition itself
        args, _ = call_args(text, m.end() - 1)
        if index < len(args):
            out += names_through(text, rel, m.start(), args[index], problems, seen + (func,))
    return out


def scan(root, top_dirs, problems, skip=()):
    """{'read': {name: [where]}, 'set': {name: [where]}} over the C/C++/CUDA files of top_dirs,
    leaving out the folders skip names."""
    found = {"read": {}, "set": {}}
    for top in top_dirs:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            if any((os.path.relpath(dirpath, root) + "/").startswith(s + "/") for s in skip):
                continue
            for f in sorted(files):
                if not f.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = strip_comments(fh.read())
                for m in CALL.finditer(text):
                    args, _ = call_args(text, m.end() - 1)
                    kind = "set" if m.group(0).startswith("setenv") else "read"
                    if not args or not args[0]:
                        continue
                    for name, where in names_through(text, rel, m.start(), args[0], problems):
                        found[kind].setdefault(name, []).append(where)
                for m in EXPORT.finditer(text):
                    found["set"].setdefault(m.group(1), []).append(f"{rel}:{line_of(text, m.start())}")
    return found


def doc_tables(path, problems):
    """{table key: {name: line}} from the page's tables, by their section headings."""
    tables = {k: {} for k in TABLES}
    current, seen = None, {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if line.startswith("## "):
                title = line[3:].strip()
                current = next((k for k, t in TABLES.items() if t == title), None)
                continue
            if current is None or not line.startswith("| `"):
                continue
            first_cell = line.split("|")[1]
            for name in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)", first_cell):
                if name in seen:
                    problems.append(f"{path}:{lineno}: {name} is listed twice (first on line {seen[name]})")
                    continue
                seen[name] = lineno
                tables[current][name] = lineno
    for key, title in TABLES.items():
        if not tables[key]:
            problems.append(f"{path}: no table under '## {title}'")
    return tables


def mentioned_in(root, name, tops):
    word = re.compile(r"\b%s\b" % re.escape(name))
    for top in tops:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                try:
                    with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                        if word.search(fh.read()):
                            return True
                except (UnicodeDecodeError, OSError):
                    continue
    return False


def compare_programs(code, tables, doc):
    """Differences between what the programs read and set and the first two tables."""
    problems, read, set_ = [], code["read"], code["set"]
    for name in sorted(set(read) - set(tables["read"])):
        problems.append(f"{name} is read ({', '.join(read[name])}) but not in the table "
                        f"'{TABLES['read']}' of {doc}")
    for name in sorted(set(tables["read"]) - set(read)):
        problems.append(f"{doc}:{tables['read'][name]}: {name} is listed as read, but no getenv in "
                        f"{', '.join(PROGRAM_DIRS)} reads it")
    for name, lineno in sorted(tables["set"].items()):
        if name not in set_:
            problems.append(f"{doc}:{lineno}: {name} is listed as set for the ranks, but nothing sets it")
        if name in read:
            problems.append(f"{doc}:{lineno}: {name} is also read ({', '.join(read[name])}): list it under "
                            f"'{TABLES['read']}'")
    for name in sorted(set(set_) - set(read) - set(tables["set"])):
        problems.append(f"{name} is set for the ranks ({', '.join(set_[name])}) but not in the table "
                        f"'{TABLES['set']}' of {doc}")
    return problems


def compare_scripts(root, side, tables, doc):
    """Differences between what scripts/ and tests/ read and the third table."""
    problems = []
    for name, lineno in sorted(tables["scripts"].items()):
        if not mentioned_in(root, name, ("scripts", "tests")):
            problems.append(f"{doc}:{lineno}: {name} is listed, but nothing in scripts/ or tests/ names it")
    listed = set(tables["read"]) | set(tables["set"]) | set(tables["scripts"])
    for name in sorted(set(side["read"]) - listed - STANDARD):
        problems.append(f"{name} is read ({', '.join(side['read'][name])}) but not in the table "
                        f"'{TABLES['scripts']}' of {doc}")
    return problems


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--doc")]
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    doc = next((a.split("=", 1)[1] for a in argv[1:] if a.startswith("--doc=")),
               os.path.join(root, "docs", "environment.md"))
    problems = []
    code = scan(root, PROGRAM_DIRS, problems, skip=NOT_PROGRAMS)
    side = scan(root, ("scripts", "tests"), problems)
    tables = doc_tables(doc, problems)
    problems += compare_programs(code, tables, doc) + compare_scripts(root, side, tables, doc)
    for p in problems:
        print(p)
    only_set = set(code["set"]) - set(code["read"])
    print(f"env vars: {len(code['read'])} read and {len(only_set)} only set by the programs, "
          f"{len(set(side['read']) - STANDARD)} read by C sources of scripts and tests; "
          f"{sum(len(t) for t in tables.values())} documented; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
