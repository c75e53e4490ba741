#!/usr/bin/env bash
# check_config_reference.sh DDPRUN SOURCE_ROOT — docs/config-reference.md is exactly what the key
# table makes (`ddprun config reference`, config/config_reference.c): a key's row changed
# without regenerating the document, or the document edited by hand, fails here with the
# difference and the command that regenerates it.
set -u
ddprun=$(realpath "$1")
root=$(realpath "$2")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! "$ddprun" config reference > "$out"; then
    echo "FAIL: $ddprun config reference failed"
    exit 1
fi
if ! diff -u --label docs/config-reference.md --label "ddprun config reference" "$root/docs/config-reference.md" "$out"; then
    echo "FAIL: docs/config-reference.md is not what the key table makes (above: - committed, + generated)"
    echo "regenerate it: $ddprun config reference > $root/docs/config-reference.md"
    exit 1
fi
echo "config reference: docs/config-reference.md is what the key table makes ($(grep -c '^| `' "$out") keys)"
