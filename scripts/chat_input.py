"""scripts/chat_input.py — what scripts/prepare-chat reads, as it reads it: a file's bytes or UTF-8
text (read_bytes, read_file), and the JSONL examples, each line checked whole into messages
[{"role", "content"}] and each file held to one format (read_examples; prepare-chat's docstring
says the formats and what is refused). Loads scripts/prepare-text as a module (prep), whose Fail is
every error's: prepare-chat takes prep and Fail from here, as a second load would be a second Fail
that its handler does not catch. Must not render, tokenize or write, nor read the tokenizer's
folder (its chat template and end ids): prepare-chat does."""
import importlib.machinery
import importlib.util
import json
import os
import sys

ROLES = ("system", "user", "assistant")
FORMATS = ('a line is {"messages": [{"role": ..., "content": ...}, ...]} or '
           '{"prompt": ..., "completion": ...}')


def load_prepare_text():
    # no .py suffix, so not importable by name: loaded from beside this file
    path = os.path.join(os.path.dirname(os.path.realpath(__file__)), "prepare-text")
    loader = importlib.machinery.SourceFileLoader("prepare_text", path)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("prepare_text", loader))
    loader.exec_module(module)
    return module


prep = load_prepare_text()
Fail = prep.Fail


def read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise Fail(f"{path}: {e.strerror}")


def read_file(path, what):
    try:
        return read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as e:
        raise Fail(f"{path}: {what} is not UTF-8: invalid byte at offset {e.start}")


def type_name(value):
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


class RepeatedKey(ValueError):
    pass


def object_once(pairs):
    """json.loads' object_pairs_hook: an object that names a key twice is refused, where json.loads
    would keep the last value and drop the first silently."""
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise RepeatedKey(key)
        obj[key] = value
    return obj


def check_text(value, what, where):
    """A string that JSON's escapes made into no text: a lone surrogate (\\ud800 unpaired) has no UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise Fail(f"{where}: {what} holds a lone surrogate (\\u{ord(value[e.start]):04x} unpaired) at character "
                   f"{e.start}: not text")


def parse_example(obj, where):
    """(format name, messages as [{"role", "content"}]) of one line's JSON value."""
    if not isinstance(obj, dict):
        raise Fail(f"{where}: a JSON {type_name(obj)}, not an object: {FORMATS}")
    keys = set(obj)
    if "messages" in keys and keys & {"prompt", "completion"}:
        raise Fail(f"{where}: holds both formats' keys: {FORMATS}")
    if "messages" in keys:
        kind, wanted = "messages", {"messages"}
    elif keys & {"prompt", "completion"}:
        kind, wanted = "prompt/completion", {"prompt", "completion"}
        if not wanted <= keys:
            raise Fail(f"{where}: has \"{(keys & wanted).pop()}\" but no \"{(wanted - keys).pop()}\"")
    else:
        raise Fail(f"{where}: neither format (keys: {', '.join(sorted(keys)) or 'none'}): {FORMATS}")
    for key in sorted(keys - wanted):
        why = "tool definitions are not rendered" if key in ("tools", "functions") else "nothing else is read"
        raise Fail(f"{where}: key {key!r}: {why} ({FORMATS})")
    if kind == "prompt/completion":
        if not isinstance(obj["prompt"], str) or not isinstance(obj["completion"], str):
            raise Fail(f"{where}: \"prompt\" and \"completion\" must both be strings (a user message and the "
                       "assistant's answer); conversations go in \"messages\"")
        check_text(obj["prompt"], "\"prompt\"", where)
        check_text(obj["completion"], "\"completion\"", where)
        return kind, [{"role": "user", "content": obj["prompt"]}, {"role": "assistant", "content": obj["completion"]}]
    messages = obj["messages"]
    if not isinstance(messages, list) or not messages:
        raise Fail(f"{where}: \"messages\" is a {type_name(messages)}{' (empty)' if messages == [] else ''}, "
                   "not a list of messages")
    for i, m in enumerate(messages):
        at = f"{where}: messages[{i}]"
        if not isinstance(m, dict):
            raise Fail(f"{at} is a {type_name(m)}, not an object {{\"role\", \"content\"}}")
        for key in ("role", "content"):
            if key not in m:
                raise Fail(f"{at} has no \"{key}\"")
        for key in sorted(set(m) - {"role", "content"}):
            raise Fail(f"{at} has key {key!r}: a message is {{\"role\", \"content\"}} only")
        if m["role"] not in ROLES:
            raise Fail(f"{at}: unknown role {m['role']!r} (system, user or assistant)")
        if not isinstance(m["content"], str):
            raise Fail(f"{at}: content is a {type_name(m['content'])}, not a string")
        check_text(m["content"], "content", at)
    return kind, [{"role": m["role"], "content": m["content"]} for m in messages]


def read_examples(path):
    """Yields (line number, messages) for each line of a JSONL file, all in one format."""
    lines = read_bytes(path).split(b"\n")  # not splitlines: a JSON string may hold U+2028 raw
    if lines[-1] == b"":
        lines.pop()  # the newline that ends the last line
    if not lines:
        raise Fail(f"{path}: empty file: no example")
    first = None
    for n, raw in enumerate(lines, 1):
        where = f"{path}:{n}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise Fail(f"{where}: invalid UTF-8 at byte offset {e.start} of the line")
        if not line.strip():
            raise Fail(f"{where}: a blank line (JSONL holds one JSON object per line)")
        try:
            obj = json.loads(line, object_pairs_hook=object_once)
        except RepeatedKey as e:
            raise Fail(f"{where}: key {e.args[0]!r} appears twice in one object (JSON readers differ on which "
                       "to keep)")
        except json.JSONDecodeError as e:
            raise Fail(f"{where}: invalid JSON at column {e.colno}: {e.msg}")
        except ValueError as e:  # one json.loads raises outside JSONDecodeError (a number too long)
            raise Fail(f"{where}: invalid JSON: {e}")
        except RecursionError:  # valid JSON too, past Python's recursion limit
            raise Fail(f"{where}: JSON nested too deeply to read (arrays or objects {sys.getrecursionlimit()} "
                       "deep or more)")
        kind, messages = parse_example(obj, where)
        if first is None:
            first = (kind, n)
        elif kind != first[0]:
            raise Fail(f"{where}: a {kind} example in a file whose line {first[1]} is a {first[0]} "
                       "example: one format per file")
        yield n, messages
