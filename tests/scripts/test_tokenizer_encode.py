#!/usr/bin/env python3
"""tests/scripts/test_tokenizer_encode.py [PROJECT_ROOT] — ddprun's C encoder of byte-level BPE
(runtime/data/tokenizer_encode.c, through `ddprun generate --encode-only`) against tiktoken, the
encoder scripts/prepare-text makes the training data with: KJV paragraphs (the whole Bible when
the `bible` program is installed), this project's README, and punctuation, white-space,
contraction, digit and non-ASCII edge cases must give the same ids, and so must a run of 1.5
million digits under Llama 3's and Qwen2's splits, within 120 s (its pieces are linear in it). Each text is encoded three
ways: with GPT-2's tokenizer.bin as prepare-text writes it, and with the same table recording Llama
3's and Qwen2's pre-tokenizers, against tiktoken with those regexes (Qwen2's after NFC, Python's
unicodedata) over GPT-2's ranks. The two regexes, as tokenizer.json files give them to the
tokenizers package (Oniguruma), split every text as tiktoken's (Python's `regex`) do. Also: invalid
UTF-8 is refused with its byte offset, and --prompt gives what --prompt-file gives.

Needs tiktoken and the GPT-2 ranks file (scripts/setup --text); without them it prints why and
exits 77, which meson reports as skipped. DDPRUN names the ddprun program (tests/meson.build).
"""
import importlib.machinery
import importlib.util
import os
import struct
import subprocess
import sys
import tempfile
import unicodedata

from encoder_texts import KJV, named_texts

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DDPRUN = os.environ.get("DDPRUN") or os.path.join(ROOT, "build", "launcher", "ddprun")
SKIP = 77

EDGE_CASES = [
    "Hello world", "Hello world\n", " Hello", "  two leading spaces", "trailing spaces   ", "\n", "\n\n\n",
    " \n ", "\t\ttabs\tand  spaces \t\n", "a\n\nb", "x\r\ny\r\n", "I'm don't we'll they've you're he'd it's",
    "'S 'LL 'Ve capital contractions", "?'s '' ''s' 'tis", "quotes \"double\" and 'single'",
    "numbers 123 4567 89012 3.14159 1,000,000 0x1F 2nd 3rd", "punctuation...!?;:--()[]{}<>@#$%^&*_+=|\\/~`",
    "<|endoftext|> spelled out is ordinary text", "emails a.b@c.de and https://example.com/path?q=1&r=2",
    "  \n  \n  indented\n    code();\n", "CamelCaseWords and snake_case_words and SHOUTING",
    "café naïve façade résumé coöperate", "em dash—here – en dash … ellipsis", "“curly” ‘quotes’ don’t",
    "日本語のテキスト、中文文本。한국어", "emoji 🙂👍🏽 and ZWJ 👩‍👩‍👧 family", "Ⅻ ½ ² ١٢٣ numbers of other scripts",
    "e\u0301 combining accent, NBSP\u00a0here, ideographic\u3000space, line\u2028separator, NEL\u0085x",
    "Ελληνικά, русский текст, עברית, العربية", "a" * 300, " " * 70 + "x", "ab" * 150 + "!",
    "digits 1 12 123 1234 12345678 1,234,567.89 ٣٤٥٦ ⅧⅨ", "!!!word .word 'quoted' (parens) [x]",
    "DON'T I'LL WE'VE YOU'RE HE'D IT'S I'M 'Ll 'lL 'ſ", "line\r\n\r\n  next\n\n\tindented\n \n x",
    "end.\n\nNext!\r\nThen?\n", "\ttab\tword\t\t", "Ångström Å e\u0301 \u212b \u1e9b\u0323 \u0958 \uac00\u11a8",
]
# Llama 3's and Qwen2's regexes (their tokenizer.json files' Split patterns), and tokenizer.bin's
# pre-tokenizer codes for them (runtime/data/tokenizer.h)
LLAMA3_PAT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
              r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2_PAT = LLAMA3_PAT.replace(r"\p{N}{1,3}", r"\p{N}")
SPLITS = [("gpt2", None, None, False), ("llama3", LLAMA3_PAT, 2, False), ("qwen2", QWEN2_PAT, 3, True)]
# a digit run split into pieces of 3 (Llama 3) and 1 (Qwen2): encoded in time linear in its length
# (GPT-2's split makes it one piece, whose merge tiktoken takes quadratic time over: not for it)
LONG_DIGITS = 1_500_000


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def load_prepare_text():
    path = os.path.join(ROOT, "scripts", "prepare-text")
    loader = importlib.machinery.SourceFileLoader("prepare_text", path)
    spec = importlib.util.spec_from_loader("prepare_text", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def split_engines_agree(texts):
    """Llama 3's and Qwen2's regexes in the tokenizers package (Oniguruma, as a tokenizer.json's Split
    runs them) split each text as Python's `regex` does (tiktoken's engine agrees, above); the
    number of texts that do not. Skipped, with a note, without the tokenizers package."""
    try:
        import regex
        from tokenizers import Regex, pre_tokenizers
    except ImportError:
        print("note: python3 cannot import tokenizers; the regex engines' comparison is left out")
        return 0
    failed = 0
    for split, pat, _, _ in SPLITS[1:]:
        onig = pre_tokenizers.Split(Regex(pat), "isolated")
        for name, text in texts:
            want = regex.findall(pat, text)
            got = [piece for piece, _ in onig.pre_tokenize_str(text)]
            if got == want:
                print(f"ok - {split} regex in tokenizers: {name}: {len(got)} pieces")
                continue
            failed += 1
            i = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
            print(f"FAIL - {split} regex in tokenizers: {name}: piece {i} is {got[i:i + 3]}, regex's {want[i:i + 3]}")
    return failed


def main():
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        skip("python3 cannot import tiktoken (scripts/setup --text installs it)")
    prep = load_prepare_text()
    ranks = prep.ranks_path(None)
    if not os.path.isfile(ranks):
        skip(f"no GPT-2 ranks file at {ranks} (scripts/setup --text fetches it)")
    enc = prep.GPT2Tokenizer(ranks).enc
    failed = 0
    with tempfile.TemporaryDirectory(prefix="ddptest.") as tmp:
        seed = os.path.join(tmp, "seed.txt")
        with open(seed, "w") as f:
            f.write(KJV)
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "prepare-text"), "--ranks", ranks, seed,
                        os.path.join(tmp, "data")], check=True, stdout=subprocess.DEVNULL)
        tok = os.path.join(tmp, "data", "tokenizer.bin")

        def ddprun_encode(data, table=tok, timeout=None):
            path = os.path.join(tmp, "prompt.txt")
            with open(path, "wb") as f:
                f.write(data)
            return subprocess.run([DDPRUN, "generate", "--encode-only", "--tokenizer", table, "--prompt-file", path],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)

        texts = named_texts(ROOT, EDGE_CASES)
        for split, pat, code, nfc in SPLITS:
            table, referee = tok, enc
            if pat:  # GPT-2's table and ranks, split as Llama 3 or Qwen2 split
                table = os.path.join(tmp, f"{split}.bin")
                with open(tok, "rb") as f:
                    data = bytearray(f.read())
                data[16:20] = struct.pack("<i", code)
                with open(table, "wb") as f:
                    f.write(data)
                referee = tiktoken.Encoding(name=split, pat_str=pat, mergeable_ranks=enc._mergeable_ranks,
                                            special_tokens={})
            cases = texts + ([(f"{LONG_DIGITS:,} digits", "7" * LONG_DIGITS + " end")] if pat else [])
            for name, text in cases:
                want = referee.encode_ordinary(unicodedata.normalize("NFC", text) if nfc else text)
                try:  # minutes at the least where a digit run's pieces cost its length each
                    r = ddprun_encode(text.encode("utf-8"), table, timeout=120)
                except subprocess.TimeoutExpired:
                    failed += 1
                    print(f"FAIL - {split}: {name}: not encoded within 120 s")
                    continue
                got = [int(x) for x in r.stdout.split()] if r.returncode == 0 else None
                if got == want:
                    print(f"ok - {split}: {name}: {len(want)} tokens")
                    continue
                failed += 1
                if got is None:
                    print(f"FAIL - {split}: {name}: ddprun exited {r.returncode}: "
                          f"{r.stderr.decode(errors='replace').strip()}")
                    continue
                i = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
                print(f"FAIL - {split}: {name}: {len(got)} ids, tiktoken {len(want)}; first difference at id {i}: "
                      f"ddprun {got[i:i + 5]} tiktoken {want[i:i + 5]} around "
                      f"{referee.decode(want[max(0, i - 5):i + 5])!r}")
        failed += split_engines_agree(texts)

        r = subprocess.run([DDPRUN, "generate", "--encode-only", "--tokenizer", tok, "--prompt", "Hello world"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode == 0 and r.stdout.split() == [b"15496", b"995"]:
            print("ok - --prompt 'Hello world' -> 15496 995")
        else:
            failed += 1
            print(f"FAIL - --prompt 'Hello world': exit {r.returncode}, {r.stdout!r} {r.stderr!r}")

        for data, offset in [(b"valid start \xc3\xa9 then \xff", 20), (b"cut short \xe2\x82", 10),
                             (b"\xed\xa0\x80 surrogate", 0)]:
            r = ddprun_encode(data)
            err = r.stderr.decode(errors="replace")
            if r.returncode == 2 and f"invalid UTF-8 at byte offset {offset}" in err and not r.stdout:
                print(f"ok - refused {data!r}: {err.strip()}")
            else:
                failed += 1
                print(f"FAIL - {data!r}: exit {r.returncode}, stdout {r.stdout!r}, stderr {err.strip()!r}")
    print(f"{len(SPLITS) * len(texts) + 2 + 2 * len(texts) + 4} checks, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
