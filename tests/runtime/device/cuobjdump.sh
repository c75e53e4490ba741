# cuobjdump.sh — sourced by the nvcc build's fatbin checks (never run): finds cuobjdump and reads
# a static library that may be one of meson's thin archives.
# Sets $cuobjdump (from PATH, /usr/local/cuda/bin, or the PyPI package nvidia-cuda-cuobjdump, which
# scripts/setup installs: the CUDA 13.0 toolkit here lacks it) and defines
#   objdump_all LIBRARY ARGS...   cuobjdump ARGS on the library, or on each member of a thin archive
# Exits 1 with a message when cuobjdump cannot be found.

cuobjdump=$(command -v cuobjdump || true)
[[ -z $cuobjdump && -x /usr/local/cuda/bin/cuobjdump ]] && cuobjdump=/usr/local/cuda/bin/cuobjdump
if [[ -z $cuobjdump ]]; then
    cuobjdump=$(python3 - <<'PY' 2>/dev/null || true
import os, nvidia
for root in nvidia.__path__:
    for sub in ("cu13", "cuda_cuobjdump"):
        p = os.path.join(root, sub, "bin", "cuobjdump")
        if os.access(p, os.X_OK):
            print(p)
            raise SystemExit
PY
)
fi
if [[ -z $cuobjdump ]]; then
    echo "FAIL: cuobjdump not found (pip install nvidia-cuda-cuobjdump, see scripts/setup)" >&2
    exit 1
fi

# meson writes thin archives, which cuobjdump cannot read: inspect their member objects instead
objdump_all() { # library, cuobjdump args...
    local lib=$1
    shift
    local inputs=("$lib")
    if [[ $(head -c 7 "$lib") == '!<thin>' ]]; then
        mapfile -t inputs < <(cd "$(dirname "$lib")" && ar t "$(basename "$lib")")
        inputs=("${inputs[@]/#/$(dirname "$lib")/}")
    fi
    local f
    for f in "${inputs[@]}"; do "$cuobjdump" "$@" "$f"; done
}
