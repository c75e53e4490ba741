#!/usr/bin/env bash
# check_fatbin.sh — proves the nvcc build embeds every kernel for every requested GPU arch.
#
# Usage: check_fatbin.sh LIBRARY ARCHS SOURCE.cu...
#   ARCHS is the meson option gpu_archs (e.g. "80,90"); PTX of the last one must be embedded too.
# The expected kernel names come from the sources (every `__global__ void [__launch_bounds__(...)] NAME(`), never from a
# list kept by hand. For each arch, `cuobjdump -symbols` of LIBRARY must list each kernel as an
# entry point (mangled _Z<len><name>...) in an sm_<arch> ELF, and `cuobjdump --list-ptx` must show
# PTX for the last arch. cuobjdump is found by cuobjdump.sh.
set -euo pipefail

lib=$1 archs=$2
shift 2

source "$(dirname "$0")/cuobjdump.sh"

# An optional `__launch_bounds__(...)` may stand between `void` and the name.
mapfile -t kernels < <(sed -n 's/.*__global__[[:space:]]\+void[[:space:]]\+\(__launch_bounds__([^)]*)[[:space:]]\+\)\?\([A-Za-z_][A-Za-z0-9_]*\)[[:space:]]*(.*/\2/p' "$@" | sort -u)
if ((${#kernels[@]} == 0)); then
    echo "FAIL: no __global__ kernels found in $*" >&2
    exit 1
fi

symbols=$(objdump_all "$lib" -symbols)
failed=0 checked=0
IFS=',' read -r -a arch_list <<<"$archs"
for arch in "${arch_list[@]}"; do
    arch=${arch// /}
    # entry points listed in the ELF sections for this arch
    entries=$(awk -v want="arch = sm_$arch" '
        /^Fatbin (elf|ptx) code:/ { in_elf = ($2 == "elf"); matched = 0; next }
        $0 == want { matched = in_elf; next }
        matched && /STO_ENTRY/ { print $NF }' <<<"$symbols")
    for k in "${kernels[@]}"; do
        checked=$((checked + 1))
        if ! grep -q "^_Z${#k}${k}" <<<"$entries"; then
            echo "FAIL: kernel $k has no sm_$arch code in $lib" >&2
            failed=$((failed + 1))
        fi
    done
    echo "sm_$arch: $(grep -c . <<<"$entries") entry points"
done

last=${arch_list[-1]// /}
checked=$((checked + 1))
ptx_list=$(objdump_all "$lib" --list-ptx)
if ! grep -q "sm_$last\.ptx" <<<"$ptx_list"; then
    echo "FAIL: no PTX for compute_$last in $lib" >&2
    failed=$((failed + 1))
fi
ptx=$(objdump_all "$lib" -ptx)
for k in "${kernels[@]}"; do
    checked=$((checked + 1))
    if ! grep -q "\.entry _Z${#k}${k}" <<<"$ptx"; then
        echo "FAIL: kernel $k missing from the embedded PTX" >&2
        failed=$((failed + 1))
    fi
done

echo "${#kernels[@]} kernels (${kernels[*]}) x archs $archs + PTX: $checked checks, $failed failed"
((failed == 0))
