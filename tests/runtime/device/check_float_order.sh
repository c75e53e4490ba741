#!/usr/bin/env bash
# check_float_order.sh — proves that the kernels of the given .cu files round every float32
# operation where the CPU code does: nvcc must not have contracted a multiply and an add into one
# FMA (its default, -fmad=true), nor left them free for ptxas to contract.
#
# Usage: check_float_order.sh LIBRARY SOURCE.cu...
# For every kernel the sources define (`__global__ void NAME(`), its body in the PTX embedded in
# LIBRARY (`cuobjdump -ptx`) must hold float32 arithmetic, and all of it correctly rounded and
# unfused: no fma/mad .f32; add, sub and mul .f32 with an explicit rounding modifier (PTX lets
# ptxas fuse those without one); div and sqrt .f32 as .rn (not .approx or .full); rcp as .rn.
# cuobjdump is found by cuobjdump.sh.
set -euo pipefail

lib=$1
shift

source "$(dirname "$0")/cuobjdump.sh"

mapfile -t kernels < <(sed -n 's/.*__global__[[:space:]]\+void[[:space:]]\+\([A-Za-z_][A-Za-z0-9_]*\)[[:space:]]*(.*/\1/p' "$@" | sort -u)
if ((${#kernels[@]} == 0)); then
    echo "FAIL: no __global__ kernels found in $*" >&2
    exit 1
fi

ptx=$(objdump_all "$lib" -ptx)
failed=0
for k in "${kernels[@]}"; do
    # the kernel's body: from its .entry line to the closing brace at the start of a line
    body=$(awk -v entry=".entry _Z${#k}${k}" 'index($0, entry) { on = 1 } on { print } on && /^}/ { exit }' <<<"$ptx")
    if [[ -z $body ]]; then
        echo "FAIL: kernel $k not found in the PTX of $lib" >&2
        failed=$((failed + 1))
        continue
    fi
    ops=$(grep -Eo '^[[:space:]]*(fma|mad|add|sub|mul|div|sqrt|rcp)(\.[a-z0-9]+)*\.f32[[:space:]]' <<<"$body" |
          sed -E 's/[[:space:]]+//g' || true)
    if [[ -z $ops ]]; then
        echo "FAIL: kernel $k: no float32 arithmetic in its PTX (is this the right kernel?)" >&2
        failed=$((failed + 1))
        continue
    fi
    bad=$(grep -Ev '^((add|sub|mul)\.(rn|rz|rm|rp)(\.ftz)?(\.sat)?|(div|sqrt|rcp)\.rn(\.ftz)?)\.f32$' <<<"$ops" || true)
    if [[ -n $bad ]]; then
        bad=$(sort <<<"$bad" | uniq -c | awk '{ printf "%s%s x %s", (NR > 1 ? ", " : ""), $1, $2 }')
        echo "FAIL: kernel $k: float32 operations the CPU does not do (fused, or free to be fused): $bad" >&2
        failed=$((failed + 1))
    else
        echo "$k: $(grep -c . <<<"$ops") float32 operations, each rounded on its own"
    fi
done
echo "${#kernels[@]} kernels, $failed failed"
((failed == 0))
