#!/usr/bin/env python3
"""tests/scripts/test_tokenizer_sentencepiece.py [PROJECT_ROOT] — ddprun's C encoder
(runtime/data/tokenizer_encode.c, through `ddprun generate --encode-only`) on a sentencepiece BPE
vocabulary against the sentencepiece library and the tokenizers package.

A BPE model is trained here by sentencepiece with Llama 2's options (byte fallback, digits apart,
white-space-only pieces, no normalization, a dummy prefix) on this project's README and KJV
paragraphs; characters below its coverage are left to byte fallback. It is written as a Hugging
Face tokenizer.json the way transformers converts one (vocabulary by id, every split of a piece
into two pieces a merge, in the order of the pieces' ids) in three forms, whose pre-tokenizer
codes scripts/prepare-text must record: Llama 2's (a Prepend and Replace normalizer: 7),
Mistral's (a Metaspace pre-tokenizer with prepend_scheme "first": 5) and one without the dummy
prefix (prepend_scheme "never": 6). Then KJV (the whole Bible when the `bible` program is
installed), the README and edge cases (runs of spaces, digits, characters without a piece,
newlines, special tokens spelled out, a typed ▁, which both read as a space) must encode to the
tokenizers package's ids for that tokenizer.json (special tokens as text), and to sentencepiece's
own: always for Llama 2's form; for Mistral's where the text does not begin with a space or a ▁
(Metaspace puts no space before one, sentencepiece does); for the bare form, sentencepiece's ids less its dummy prefix's piece where
that stands alone. DDPRUN names the ddprun program.

Needs the sentencepiece and tokenizers packages (scripts/setup --text); without them it prints why
and exits 77, which meson reports as skipped.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

from encoder_texts import KJV, named_texts

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DDPRUN = os.environ.get("DDPRUN") or os.path.join(ROOT, "build", "launcher", "ddprun")
SKIP = 77
META = "\u2581"

EDGE_CASES = [
    "Hello world", " leading space", "  two leading spaces", "trailing spaces   ", "a  b   c    d", "\n", "a\n\nb",
    "tabs\tand\t\tmore", "digits 1 12 123 1234567 3.14159", "café naïve résumé", "日本語 中文 한국어 🙂👍🏽",
    "punctuation...!?;:--()[]{}<>@#$%^&*_+=|\\/~`", "<s> and </s> spelled out", "x" * 300, " " * 40 + "x",
    "The LORD is my shepherd", "ThE lOrD", "e\u0301 combining, NBSP\u00a0here",
    META + "LORD typed", "in" + META + "the" + META + META + "beginning", "x " + META + " y", "ends" + META, META,
    META + " mixed", " " + META,
]


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def train(spm, tmp, corpus):
    """A sentencepiece BPE model with Llama 2's options, trained on corpus; returns the processor."""
    path = os.path.join(tmp, "corpus.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(corpus)
    prefix = os.path.join(tmp, "sp")
    spm.SentencePieceTrainer.train(
        input=path, model_prefix=prefix, model_type="bpe", vocab_size=1200, byte_fallback=True,
        split_digits=True, allow_whitespace_only_pieces=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, character_coverage=0.995,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


def tokenizer_json(sp, form):
    """sp as a tokenizer.json: vocabulary by id; every split of a piece into two pieces a merge, in the
    order of the pieces' ids; form "mistral" (Metaspace, first), "llama2" (Prepend + Replace) or "bare"."""
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    merges = []
    for i in range(sp.get_piece_size()):
        if sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i):
            continue
        piece = sp.id_to_piece(i)
        splits = [(piece[:k], piece[k:]) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
        merges += [[a, b] for a, b in sorted(splits, key=lambda ab: (vocab[ab[0]], vocab[ab[1]]))]
    special = [{"id": i, "content": sp.id_to_piece(i), "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for i in (0, 1, 2)]
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
           "normalizer": None, "pre_tokenizer": None,
           "post_processor": {"type": "TemplateProcessing",
                              "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                         {"Sequence": {"id": "A", "type_id": 0}}],
                              "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                              "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
           "decoder": {"type": "Sequence", "decoders": [
               {"type": "Replace", "pattern": {"String": META}, "content": " "}, {"type": "ByteFallback"},
               {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
           "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                     "vocab": vocab, "merges": merges}}
    if form == "llama2":
        doc["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": META}, {"type": "Replace", "pattern": {"String": " "}, "content": META}]}
    else:
        doc["pre_tokenizer"] = {"type": "Metaspace", "replacement": META,
                                "prepend_scheme": "never" if form == "bare" else "first", "split": False}
    return doc


def ddprun_encode(tmp, table, text):
    """ddprun's ids for text, or the reason it gave none."""
    prompt = os.path.join(tmp, "prompt.txt")
    with open(prompt, "wb") as f:
        f.write(text.encode("utf-8"))
    r = subprocess.run([DDPRUN, "generate", "--encode-only", "--tokenizer", table, "--prompt-file", prompt],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        return f"ddprun exited {r.returncode}: {r.stderr.decode(errors='replace').strip()}"
    return [int(x) for x in r.stdout.split()]


def main():
    try:
        import sentencepiece as spm
        import tokenizers
    except ImportError as e:
        skip(f"python3 cannot import {e.name} (scripts/setup --text installs it)")
    failed, checks = 0, 0

    def check(ok, what):
        nonlocal failed, checks
        checks += 1
        failed += not ok
        print(f"{'ok' if ok else 'FAIL'} - {what}")

    texts = named_texts(ROOT, EDGE_CASES)
    readme = texts[1][1]
    with tempfile.TemporaryDirectory(prefix="ddptest.") as tmp:
        sp = train(spm, tmp, KJV + readme)
        prefix_id = sp.piece_to_id(META)
        for form, code in (("llama2", 7), ("mistral", 5), ("bare", 6)):
            path = os.path.join(tmp, f"{form}.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(tokenizer_json(sp, form), f, ensure_ascii=False)
            hf = tokenizers.Tokenizer.from_file(path)
            hf.encode_special_tokens = True  # "<s>" in a prompt is text, as ddprun encodes it
            data = os.path.join(tmp, f"data-{form}")
            seed = os.path.join(tmp, "seed.txt")
            with open(seed, "w", encoding="utf-8") as f:
                f.write(KJV)
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "prepare-text"), "--tokenizer", path, seed,
                            data], check=True, stdout=subprocess.DEVNULL)
            table = os.path.join(data, "tokenizer.bin")
            with open(table, "rb") as f:
                split = struct.unpack("<5i", f.read(20))[4]
            check(split == code, f"{form}: prepare-text records pre-tokenizer {split}, expected {code}")
            for name, text in texts:
                want = hf.encode(text, add_special_tokens=False).ids
                theirs = sp.encode(text)
                if form == "bare":  # sentencepiece's ids less its dummy prefix's own piece, where it stands alone
                    theirs = theirs[1:] if theirs[:1] == [prefix_id] else None
                elif form == "mistral" and text.startswith((" ", META)):
                    theirs = None  # Metaspace puts no space before it, sentencepiece does
                got = ddprun_encode(tmp, table, text)
                agree = "" if theirs is None else ", sentencepiece's" if theirs == want else ", NOT sentencepiece's"
                if isinstance(got, list) and got == want and theirs in (None, want):
                    check(True, f"{form}: {name}: {len(want)} ids, the tokenizers package's{agree}")
                    continue
                if not isinstance(got, list):
                    check(False, f"{form}: {name}: {got}")
                    continue
                i = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
                check(False, f"{form}: {name}: ddprun {len(got)} ids, tokenizers {len(want)}{agree}; first "
                      f"difference at {i}: ddprun {[sp.id_to_piece(x) for x in got[i:i + 4]]} tokenizers "
                      f"{[sp.id_to_piece(x) for x in want[i:i + 4]]}")
    print(f"{checks} checks, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
