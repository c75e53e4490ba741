"""tests/scripts/encoder_texts.py — the texts the prompt encoder's referee tests encode
(test_tokenizer_encode.py against tiktoken, test_tokenizer_sentencepiece.py against
sentencepiece): KJV paragraphs, this project's README, and the whole King James Bible when the
`bible` program is installed. A module of those tests; it checks nothing itself."""
import os
import subprocess

KJV = """In the beginning God created the heaven and the earth. And the earth was without form, and void; \
and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters.
And God said, Let there be light: and there was light.

The LORD is my shepherd; I shall not want. He maketh me to lie down in green pastures: he leadeth me \
beside the still waters. He restoreth my soul: he leadeth me in the paths of righteousness for his \
name's sake.

Vanity of vanities, saith the Preacher, vanity of vanities; all is vanity. What profit hath a man of \
all his labour which he taketh under the sun? One generation passeth away, and another generation \
cometh: but the earth abideth for ever.
"""


def bible_text():
    """The whole KJV without verse references (`bible -f Gen1:1-Rev22:21`), or None without it."""
    try:
        r = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except FileNotFoundError:
        return None
    if r.returncode != 0:
        return None
    lines = r.stdout.decode("utf-8").splitlines()
    return "\n".join(line.split(" ", 1)[1] for line in lines if " " in line) + "\n"


def named_texts(root, edge_cases):
    """(name, text) pairs: KJV paragraphs, README.md, the whole KJV if installed, then the edge cases."""
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        texts = [("KJV paragraphs", KJV), ("README.md", f.read())]
    kjv = bible_text()
    if kjv:
        texts.append(("the whole KJV (bible -f Gen1:1-Rev22:21)", kjv))
    else:
        print("note: `bible` not installed; the whole-KJV comparison is left out")
    return texts + [(f"edge case {i}: {t[:40]!r}", t) for i, t in enumerate(edge_cases)]
