#!/usr/bin/env python3
"""test_utf8.py — runtime/base/utf8.c against Python's UTF-8 codec, the referee: for Unicode's
edge cases (truncated, overlong, surrogate, above U+10FFFF, stray continuation bytes) and 20000
random byte strings weighted toward UTF-8's lead and continuation bytes, utf8_replace_invalid must
give exactly bytes.decode("utf-8", errors="replace") (one U+FFFD per maximal subpart), and
utf8_next must read the result back as its code points.

  test_utf8.py UTF8_REPLACE_EXE
"""
import random
import subprocess
import sys

EDGES = [b"", b"plain", "caf\u00e9 \u20ac \U0001F600 \U0010FFFF".encode(), b"\xe2\x80", b"\xe2\x80A",
         b"\xc0\xaf", b"\xc1\xbf", b"\xed\xa0\x80x", b"\xed\x9f\xbf", b"\xf4\x90\x80\x80", b"\xf4\x8f\xbf\xbf",
         b"\xf0\x9f\x98", b"\x80\x80", b"a\xffb", b"\xf0\x9f\x98\x80\xe2", b"\xe0\x80\xaf", b"\xe0\xa0\x80",
         b"\xf8\x88\x80\x80\x80", b"\xf0\x80\x80\x80", b"\xf0\x90\x80\x80", b"\xc2", b"\xc2\x80", b"\xfe\xff"]
rng = random.Random(20261204)
alphabet = list(range(0x00, 0x80, 7)) + list(range(0x80, 0xC0)) + list(range(0xC0, 0x100))
cases = EDGES + [bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(20000)]
cases = [c for c in cases if b"\n" not in c]
out = subprocess.run([sys.argv[1]], input="".join(c.hex() + "\n" for c in cases), capture_output=True, text=True,
                     check=True).stdout.splitlines()
bad = 0
for case, line in zip(cases, out):
    want = case.decode("utf-8", errors="replace")
    got_hex, *cps = line.split(" ")
    got = bytes.fromhex(got_hex)
    if got != want.encode("utf-8") or [int(c, 16) for c in cps] != [ord(ch) for ch in want]:
        bad += 1
        if bad <= 10:
            print(f"FAIL {case!r}: got {got!r} {cps}, Python gives {want.encode()!r}")
assert len(out) == len(cases), (len(out), len(cases))
print(f"test_utf8: {len(cases)} strings, {bad} differ from Python's")
sys.exit(1 if bad else 0)
