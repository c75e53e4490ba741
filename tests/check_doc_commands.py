#!/usr/bin/env python3
"""check_doc_commands.py — the commands README.md and docs/ show work as written.

Every code block of README.md must be fenced with a language (```sh for commands, ```text for
output, ```yaml ...); an indented block is refused, so no command escapes the check. In README.md
and every docs/*.md, each ```sh block is split into commands (continued lines joined, comments,
`&&`, `;` and `|` respected) and each command must hold up:
- its program is a script that exists and is executable (scripts/...), a program meson builds
  (build*/DIR/NAME: an executable('NAME' in DIR/meson.build; ddprun, ddprun-worker, ddprun-bench
  by their installed names), or one of a few outside tools (mpirun, srun ...; under mpirun and
  srun a program of this project must follow);
- every path into the repository's folders (configs/, scripts/, tests/ ...) and every config file
  (*.yaml; CONFIG.yaml-style capitals are placeholders) exists;
- every option a project program is given appears in that program's sources (the script itself;
  launcher/ for ddprun and its programs);
- every `key.path=value` override of a training command is a key of the config key table
  (config/), and with --build BUILD the whole command is validated by
  `ddprun --dry-run` (the config and every override, as a job would read them: exit 0; a
  --hostfile not in the repository is the reader's own, and an empty file stands in for it);
- a checkpoint it names (RUN_DIR/checkpoints/ckpt-NNNNNNNN.ddp) is one a config in configs/ (or a
  training command of the same file with run.dir=RUN_DIR) keeps at the end of its run.
A command quoted inline in prose (a script of scripts/ or ddprun with its options) is held to the
parts that do not depend on placeholders: a scripts/ program it names exists, every option it shows
(inside usage brackets and `a|b` alternatives too) appears in that program's sources, and every
key.path=value is a config key.
Exits 1 listing every failure. Usage: check_doc_commands.py SOURCE_ROOT [--build BUILD] [FILE.md ...]
(default files: README.md and docs/*.md). It must not run the commands themselves: the only
program it starts is `ddprun --dry-run`, which starts no rank and writes nothing."""
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:  # the checkpoint rule needs it; everything else does not
    yaml = None

REPO_TOPS = ("runtime", "collectives", "models", "config", "launcher", "tests", "scripts", "docs", "configs")
OUTSIDE_TOOLS = {"mpirun", "srun", "meson", "ninja", "python3", "git", "sbatch", "nvidia-smi"}
RANK_STARTERS = {"mpirun", "srun"}
INSTALLED_PROGRAMS = ("ddprun", "ddprun-worker", "ddprun-bench")
SEPARATORS = {"&&", "||", ";", "|", "&"}
ENV_ASSIGN = re.compile(r"^[A-Z_][A-Z0-9_]*=")
OVERRIDE = re.compile(r"^([a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*)=(.*)$", re.S)
CKPT = re.compile(r"^(.+)/checkpoints/ckpt-(\d+)\.ddp$")
BUILT_PATH = re.compile(r"^build[\w.-]*/(.+)/([^/]+)$")  # build*/DIR/NAME
KEY_ROW = re.compile(r'(?:\b[A-Z_]+\(\s*|\.path\s*=\s*)"([a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*)"')


class Repo:
    def __init__(self, root, build):
        self.root, self.build = root, build
        self.keys = set()
        # the general keys' rows (config/) and each model kind's (models/*_config.c)
        for path in glob.glob(os.path.join(root, "config", "*.c")) + \
                glob.glob(os.path.join(root, "models", "*_config.c")):
            with open(path, encoding="utf-8") as f:
                self.keys.update(KEY_ROW.findall(f.read()))
        self.installed = {}
        for path in glob.glob(os.path.join(root, "**", "meson.build"), recursive=True):
            rel = os.path.relpath(os.path.dirname(path), root)
            if rel.split(os.sep)[0].startswith("build"):
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for m in re.finditer(r"executable\(\s*'([^']+)'", text):
                self.installed.setdefault(m.group(1), rel)
        # the programs' folders (launcher/: each program's sources in its subfolders)
        folders = {self.installed[p] for p in INSTALLED_PROGRAMS if p in self.installed}
        self.program_text = self.read_tree(sorted(folders))

    def read_tree(self, tops):
        text = []
        for top in tops:
            for path in glob.glob(os.path.join(self.root, top, "**", "*.c"), recursive=True):
                with open(path, encoding="utf-8", errors="replace") as f:
                    text.append(f.read())
        return "\n".join(text)

    def meson_builds(self, folder, name):
        path = os.path.join(self.root, folder, "meson.build")
        if not os.path.exists(path):
            return False
        with open(path, encoding="utf-8") as f:
            return re.search(r"executable\(\s*'%s'" % re.escape(name), f.read()) is not None


def code_blocks(text):
    """(language, first line number, lines) of each fenced block, and the indented blocks' lines."""
    blocks, indented, lines = [], [], text.split("\n")
    i, prev_blank, in_list = 0, True, False
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            lang, start, body = line[3:].strip(), i + 1, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            blocks.append((lang, start + 1, body))
            prev_blank = False
        else:
            if line.startswith(("- ", "* ")) or re.match(r"^\d+\. ", line):
                in_list = True
            elif not line.strip():
                pass
            elif not line.startswith(" "):
                in_list = False
            if line.startswith("    ") and line.strip() and prev_blank and not in_list:
                indented.append(i + 1)
            prev_blank = not line.strip()
        i += 1
    return blocks, indented


def inline_spans(text):
    """(line number, text) of each `code span` outside fenced blocks."""
    spans, fenced = [], False
    for n, line in enumerate(text.split("\n"), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            spans.extend((n, m.group(1)) for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", line))
    return spans


def usage_flags(token):
    """The options a usage token shows: --a, [--b], [--c|--d], (-e)."""
    return [part for part in re.split(r"[|\[\]()]", token) if re.match(r"^--?[A-Za-z][\w-]*(=.*)?$", part)]


def commands(body, first_line):
    """(line number, tokens) of each command of a shell block."""
    out, pending, start = [], "", None
    for n, line in enumerate(body, first_line):
        if start is None:
            start = n
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        pending += line
        lex = shlex.shlex(pending, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        lex.commenters = "#"
        try:
            tokens = list(lex)
        except ValueError as e:
            out.append((start, ["<unparsable>", str(e)]))
            tokens = []
        cmd = []
        for t in tokens + [";"]:
            if t in SEPARATORS:
                if cmd:
                    out.append((start, cmd))
                cmd = []
            else:
                cmd.append(t)
        pending, start = "", None
    return out


class Checker:
    def __init__(self, repo):
        self.repo = repo
        self.problems = []
        self.training = {}  # run.dir -> (config path, overrides) of training commands seen, per file

    def fail(self, where, msg):
        self.problems.append(f"{where}: {msg}")

    def program(self, tok):
        """('script'|'built'|'installed'|'outside', text to look options up in) or None."""
        r = self.repo
        if tok.startswith("scripts/"):
            path = os.path.join(r.root, tok)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                with open(path, encoding="utf-8", errors="replace") as f:
                    return "script", f.read()
            return None
        m = BUILT_PATH.match(tok)
        if m:
            if not r.meson_builds(m.group(1), m.group(2)):
                return None
            if r.build and tok.startswith("build/") and not os.path.exists(
                    os.path.join(r.build, m.group(1), m.group(2))):
                return None
            return "built", r.program_text
        if tok in INSTALLED_PROGRAMS and tok in r.installed:
            return "installed", r.program_text
        if tok in OUTSIDE_TOOLS:
            return "outside", None
        return None

    def check_file(self, rel, require_fences):
        with open(os.path.join(self.repo.root, rel), encoding="utf-8") as f:
            text = f.read()
        blocks, indented = code_blocks(text)
        if require_fences:
            for n in indented:
                self.fail(f"{rel}:{n}", "an indented code block: fence it with its language (```sh, ```text ...)")
            for lang, n, _ in blocks:
                if not lang:
                    self.fail(f"{rel}:{n - 1}",
                              "a code block without a language: ```sh for commands, ```text for output")
        self.training = {}
        cmds = [(n, toks) for lang, first, body in blocks if lang in ("sh", "bash", "shell")
                for n, toks in commands(body, first)]
        for n, toks in cmds:
            self.note_training(toks)
        for n, toks in cmds:
            self.check_command(f"{rel}:{n}", toks)
        quoted = 0
        for n, span in inline_spans(text):
            quoted += self.check_inline(f"{rel}:{n}", span)
        return len(cmds) + quoted

    def check_inline(self, where, span):
        """Check a command quoted in prose; 1 when the span is one, else 0."""
        try:
            toks = shlex.split(span)
        except ValueError:
            toks = span.split()
        while toks and ENV_ASSIGN.match(toks[0]):
            toks = toks[1:]
        if not toks or not (toks[0].startswith("scripts/") or toks[0] in INSTALLED_PROGRAMS
                            or BUILT_PATH.match(toks[0])):
            return 0
        prog, kind, args = self.split_program(toks)
        if kind is None:
            if not os.path.exists(os.path.join(self.repo.root, prog)):
                self.fail(where, f"{prog}: no such script or program")
                return 1
            return 0  # a source file named in prose, not a command
        for a in args:
            for flag in usage_flags(a):
                self.check_option(where, prog, kind, flag)
            m = OVERRIDE.match(a)
            if m and "." in m.group(1):
                self.check_override(where, a)
        return 1

    def check_option(self, where, prog, kind, option):
        """An option shown for a project program must appear in the program's sources."""
        flag = option.split("=", 1)[0]
        if flag in ("-h", "--help") and "argparse" in kind[1]:
            return  # argparse answers it without naming it
        if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(flag), kind[1]):
            self.fail(where, f"{prog} {flag}: no such option in {prog}'s sources")

    def check_override(self, where, override):
        """A key.path=value override must name a key of the config key table."""
        key = OVERRIDE.match(override).group(1)
        if key not in self.repo.keys:
            self.fail(where, f"{override}: {key} is not a config key (config/, models/*_config.c)")

    def split_program(self, toks):
        """(program token, kind, arguments) of the project program a command runs; kind is program()'s."""
        while toks and (ENV_ASSIGN.match(toks[0]) or toks[0] == "exec"):  # `exec PROGRAM` runs PROGRAM
            toks = toks[1:]
        if not toks:
            return None
        kind = self.program(toks[0])
        if kind and kind[0] == "outside" and toks[0] in RANK_STARTERS:
            for i, t in enumerate(toks[1:], 1):
                sub = self.program(t)
                if sub and sub[0] != "outside":
                    return t, sub, toks[i + 1:]
            return toks[0], ("starter", None), []
        return toks[0], kind, toks[1:]

    def training_args(self, prog, args):
        """(config, overrides) when the command trains (ddprun CONFIG.yaml / ddprun-worker CONFIG.yaml)."""
        name = os.path.basename(prog)
        if name not in ("ddprun", "ddprun-worker"):
            return None
        configs = [a for a in args if a.endswith((".yaml", ".yml")) and not a.startswith("-")]
        if not configs:
            return None
        after = args[args.index(configs[0]) + 1:]
        return configs[0], [a for a in after if OVERRIDE.match(a)]

    def note_training(self, toks):
        split = self.split_program(toks)
        if not split:
            return
        t = self.training_args(split[0], split[2])
        if t:
            run_dir = next((OVERRIDE.match(o).group(2) for o in t[1] if o.startswith("run.dir=")), None)
            if run_dir:
                self.training[run_dir] = t

    def check_command(self, where, toks):
        if toks and toks[0] == "<unparsable>":
            return self.fail(where, f"cannot split the command: {toks[1]}")
        split = self.split_program(toks)
        if not split:
            return
        prog, kind, args = split
        if kind is None:
            return self.fail(where, f"{prog}: no such script or program (scripts/ files must exist and be "
                                    "executable; build*/DIR/NAME needs executable('NAME' in DIR/meson.build)")
        if kind[0] == "starter":
            return self.fail(where, f"{prog} starts no program of this project")
        if kind[0] == "outside":
            return
        for a in args:
            self.check_argument(where, prog, kind, a)
        t = self.training_args(prog, args)
        if t:
            for o in t[1]:
                self.check_override(where, o)
            if self.repo.build:
                self.dry_run(where, prog, args)

    def check_argument(self, where, prog, kind, a):
        root = self.repo.root
        if a.startswith("-") and not re.match(r"^-\d", a) and len(a) > 1:
            return self.check_option(where, prog, kind, a)
        if a.endswith((".yaml", ".yml")):
            stem = os.path.basename(a).rsplit(".", 1)[0]
            if not stem.isupper() and not os.path.isfile(os.path.join(root, a)):
                self.fail(where, f"{a}: no such config file")
            return
        if a.split("/", 1)[0] in REPO_TOPS and "/" in a:
            if not glob.glob(os.path.join(root, a)):
                self.fail(where, f"{a}: no such file or folder in the repository")
            return
        m = CKPT.match(a)
        if m:
            self.check_checkpoint(where, m.group(1), int(m.group(2)), a)

    def dry_run(self, where, prog, args):
        ddprun = os.path.join(self.repo.build, self.repo.installed.get("ddprun", "launcher"), "ddprun")
        if os.path.basename(prog) == "ddprun":
            cmd = [ddprun, "--dry-run"] + args
        else:
            cmd = [ddprun, "--dry-run", "-np", "1"] + args
        with tempfile.NamedTemporaryFile("w", suffix=".hosts") as own_hostfile:
            # a hostfile outside the repository is the reader's own (ddprun reads it before the
            # dry run prints): an empty one stands in for it
            for i, a in enumerate(cmd[:-1]):
                if a in ("--hostfile", "-hostfile", "--machinefile") and \
                        not os.path.exists(os.path.join(self.repo.root, cmd[i + 1])):
                    cmd[i + 1] = own_hostfile.name
            r = subprocess.run(cmd, cwd=self.repo.root, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            msg = [m for m in (r.stderr.strip() or r.stdout.strip()).splitlines() if not m.startswith("(ddprun --help")]
            self.fail(where, f"ddprun --dry-run refuses it (exit {r.returncode}): {msg[-1] if msg else ''}")

    def check_checkpoint(self, where, run_dir, step, text):
        if not re.search(r"ckpt-\d{8,}\.ddp$", text):
            return self.fail(where, f"{text}: checkpoint names have 8 or more digits (ckpt-%08lld.ddp)")
        if yaml is None:
            return
        sources = []
        for path in sorted(glob.glob(os.path.join(self.repo.root, "configs", "*.yaml"))):
            with open(path, encoding="utf-8") as f:
                cfg = yaml.safe_load(f) or {}
            if (cfg.get("run") or {}).get("dir") == run_dir:
                sources.append((os.path.relpath(path, self.repo.root), cfg, []))
        if run_dir in self.training:
            config, overrides = self.training[run_dir]
            with open(os.path.join(self.repo.root, config), encoding="utf-8") as f:
                sources.append((config, yaml.safe_load(f) or {}, overrides))
        if not sources:
            return self.fail(where, f"{text}: no config in configs/ and no training command here writes "
                                    f"run.dir {run_dir}")
        reasons = []
        for name, cfg, overrides in sources:
            kept = kept_steps(cfg, overrides)
            if kept is None or step in kept:
                return
            reasons.append(f"{name} keeps steps {kept}")
        self.fail(where, f"{text}: no run writes step {step} there ({'; '.join(reasons)})")


def setting(cfg, overrides, path, default):
    for o in reversed(overrides):
        key, value = OVERRIDE.match(o).groups()
        if key == path:
            return yaml.safe_load(value)
    node = cfg
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def kept_steps(cfg, overrides):
    """The checkpoint steps a run of this config keeps at its end; None when epochs decide."""
    last = int(setting(cfg, overrides, "train.max_steps", 0) or 0)
    if last <= 0 or setting(cfg, overrides, "checkpoint.dir", ""):
        return None
    every = int(setting(cfg, overrides, "checkpoint.every_steps", 0) or 0)
    keep = int(setting(cfg, overrides, "checkpoint.keep_last", 3))
    steps = sorted(set(range(every, last + 1, every) if every else []) | {last})
    return steps[-keep:]


def main(argv):
    args, build, files = [], None, []
    it = iter(argv[1:])
    for a in it:
        if a == "--build":
            build = os.path.abspath(next(it))
        elif a.endswith(".md"):
            files.append(a)
        else:
            args.append(a)
    root = os.path.abspath(args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not files:
        files = ["README.md"] + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    checker = Checker(Repo(root, build))
    count = 0
    for rel in files:
        count += checker.check_file(rel, require_fences=os.path.basename(rel) == "README.md")
    for p in checker.problems:
        print(p)
    print(f"doc commands: {count} commands in {len(files)} files checked"
          f"{' (with ddprun --dry-run)' if build else ''}; {len(checker.problems)} problems")
    return 1 if checker.problems or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
