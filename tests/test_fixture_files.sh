#!/usr/bin/env bash
# tests/test_fixture_files.sh — the repository's reference fixtures (tests/fixtures/README.md) are
# the bytes tests/fixtures/SHA256SUMS records: every listed file present and unchanged, a changed
# byte named, no file there that it does not list (README.md and SHA256SUMS aside), each fixture's
# MANIFEST among them, and nothing large (no file over 1 MiB, 16 MiB in all). And no test that
# the build registers sets DDP_TEST_FIXTURES in its environment, so the caller's value reaches
# the tests (the fixture tests read it first, then fall back to tests/fixtures).
# Needs DDP_SRC (the source root) and DDP_BUILD (this build directory) from tests/meson.build.
set -uo pipefail
FIX=$DDP_SRC/tests/fixtures
TMP=$(mktemp -d /tmp/ddptest.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
FAILED=0
CHECKS=0
check() { # description, command...
    local what=$1; shift
    CHECKS=$((CHECKS + 1))
    if "$@"; then echo "ok - $what"; else echo "FAIL - $what"; FAILED=$((FAILED + 1)); fi
}

sums_match() { (cd "$FIX" && sha256sum --check --strict --quiet SHA256SUMS); }
check "every file SHA256SUMS lists is there with its recorded sum" sums_match

listed() { sed -E 's/^[0-9a-f]{64}  //' "$FIX/SHA256SUMS" | LC_ALL=C sort; }
present() { (cd "$FIX" && find . -type f ! -path ./SHA256SUMS ! -path ./README.md | sed 's|^\./||' | LC_ALL=C sort); }
unlisted=$(LC_ALL=C comm -13 <(listed) <(present))
[ -z "$unlisted" ] || echo "not in SHA256SUMS: $unlisted"
check "no file in tests/fixtures that SHA256SUMS does not list" [ -z "$unlisted" ]
for f in mlp-reference gpt-reference llama-reference hf-gpt2-tiny hf-llama-tiny hf-qwen2-tiny sft-reference; do
    check "SHA256SUMS lists $f/MANIFEST" grep -q "  $f/MANIFEST\$" "$FIX/SHA256SUMS"
done

large=$(find "$FIX" -type f -size +1024k)
[ -z "$large" ] || echo "over 1 MiB: $large"
check "no fixture file over 1 MiB" [ -z "$large" ]
total_kib=$(du -sk "$FIX" | cut -f1)
check "the fixtures take at most 16 MiB ($total_kib KiB)" [ "$total_kib" -le 16384 ]

# the check itself: a copy with one byte changed fails, naming that file
mkdir -p "$TMP/copy/mlp-reference"
cp "$FIX/SHA256SUMS" "$TMP/copy/" && cp "$FIX/mlp-reference/"* "$TMP/copy/mlp-reference/"
printf '\x01' | dd of="$TMP/copy/mlp-reference/relu.loss.bin" bs=1 seek=2 conv=notrunc status=none
(cd "$TMP/copy" && sha256sum --check --strict --quiet --ignore-missing SHA256SUMS) > "$TMP/flip.log" 2>&1
check "a changed byte fails the check" [ $? -ne 0 ]
check "... naming the file" grep -q '^mlp-reference/relu.loss.bin: FAILED' "$TMP/flip.log"

meson introspect "$DDP_BUILD" --tests > "$TMP/tests.json"
check "meson introspect lists this build's tests" [ -s "$TMP/tests.json" ]
setters=$(python3 -c 'import json, sys
print(" ".join(t["name"] for t in json.load(open(sys.argv[1])) if "DDP_TEST_FIXTURES" in (t.get("env") or {})))' \
    "$TMP/tests.json")
[ -z "$setters" ] || echo "tests whose env sets DDP_TEST_FIXTURES: $setters"
check "no registered test sets DDP_TEST_FIXTURES (the caller's value reaches the tests)" [ -z "$setters" ]

echo "$CHECKS checks, $FAILED failed"
[ "$CHECKS" -gt 0 ] && [ "$FAILED" -eq 0 ]
