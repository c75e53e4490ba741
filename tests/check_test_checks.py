#!/usr/bin/env python3
"""check_test_checks.py — every `check DESCRIPTION COMMAND...` in the shell tests (tests/lib.sh's)
asserts all of its command. In `check "..." [ a ] && [ b ]` only `[ a ]` runs under check: `[ b ]`
runs after it, unasserted, and a failing `b` fails no test (a pipe after it, likewise, feeds check's
own report to the next command). Such a list must be one word for check: `eval '...'` or
`bash -c "..."`. The files are read as the shell reads them: quotes, $(...) and here-documents
span lines, and a check may follow `do`, `then`, `;`, `&&` or `||`. Reports each offending check
as FILE:LINE and exits 1.

  check_test_checks.py SOURCE_ROOT
"""
import pathlib
import re
import sys

OWN_CHECK = {"test_prepare_text.sh"}  # a check() of another meaning (a comparison script's)
LEADING = {"do", "then", "else", "!", "{", "(", "time"}


def skip_quoted(text, i):
    """The index after the single- or double-quoted string starting at text[i]."""
    if text[i] == "'":
        end = text.find("'", i + 1)
        return len(text) if end < 0 else end + 1
    i += 1
    while i < len(text) and text[i] != '"':
        if text[i] == "\\":
            i += 2
        elif text.startswith("$(", i):
            i = skip_substitution(text, i + 2)
        else:
            i += 1
    return i + 1


def skip_substitution(text, i):
    """The index after the ) that closes a $( <( or >( whose body starts at i."""
    depth = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c in "'\"":
            i = skip_quoted(text, i)
            continue
        if text.startswith(("$(", "<(", ">("), i):
            i = skip_substitution(text, i + 2)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return i + 1
            depth -= 1
        i += 1
    return i


def commands(text):
    """(line, words of a simple command, the operator after it) for the whole file."""
    i, line, start_line, current, word, out = 0, 1, 1, [], "", []
    heredocs = []

    def end_word():
        nonlocal word
        if word:
            current.append(word)
            word = ""

    def end_command(op):
        nonlocal current, start_line
        end_word()
        if current:
            out.append((start_line, current, op))
        current, start_line = [], line

    while i < len(text):
        c = text[i]
        if c == "\\" and text.startswith("\\\n", i):
            i, line = i + 2, line + 1
            continue
        if c == "\n":
            end_command("\n")
            line += 1
            i += 1
            for term, strip in heredocs:  # the bodies follow the line that opened them
                while i < len(text):
                    eol = text.find("\n", i)
                    eol = len(text) if eol < 0 else eol
                    body, i, line = text[i:eol], eol + 1, line + 1
                    if (body.lstrip("\t") if strip else body) == term:
                        break
            heredocs = []
            start_line = line
            continue
        if c == "#" and not word:
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
            continue
        m = re.match(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2", text[i:])
        if m:
            heredocs.append((m.group(3), m.group(1) == "-"))
            word += m.group(0)
            i += m.end()
            continue
        if c in "'\"":
            j = skip_quoted(text, i)
            line += text.count("\n", i, j)
            word += "Q"
            i = j
            continue
        if text.startswith(("$(", "<(", ">("), i):
            j = skip_substitution(text, i + 2)
            line += text.count("\n", i, j)
            word += "S"
            i = j
            continue
        op = next((o for o in ("&&", "||", ";;", "|", ";", "&") if text.startswith(o, i)), None)
        if op and not (op == "&" and text.startswith((">&", "&>"), i - 1)):
            end_command(op)
            i += len(op)
            continue
        if c in " \t":
            end_word()
        else:
            word += c
        i += 1
    end_command("")
    return out


def main():
    root = pathlib.Path(sys.argv[1])
    bad = 0
    for path in sorted((root / "tests").rglob("*.sh")):
        if path.name in OWN_CHECK:
            continue
        for line, words, op in commands(path.read_text()):
            while words and words[0] in LEADING:
                words = words[1:]
            if words[:1] == ["check"] and op in ("&&", "||", "|"):
                print(f"{path.relative_to(root)}:{line}: `{op}` after a check: what follows it runs outside "
                      f"the check (one word for check: eval '...' or bash -c)")
                bad += 1
    print(f"{bad} check(s) with part of a command outside check" if bad else "every check asserts all of its command")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
