#!/usr/bin/env bash
# End to end on the emulated CUDA build: `ddprun -np 2 configs/fashion_mlp.yaml device=cuda
# train.max_steps=50` (cuBLAS GEMMs, every CUDA kernel, NCCL gradient all-reduce, all through the
# emulation layer) gives the same loss sequence as device=cpu within 1e-4 relative, and no step
# (gradient clipping on) makes the host wait for the GPU between its batch upload and the next step.
source "$(dirname "$0")/../../lib.sh"
export DDP_CUDA_EMU_DEVICES=2   # one emulated GPU per rank
ARGS=(train.max_steps=50 train.log_every=5 optimizer.schedule.warmup_steps=10 train.eval=false
      checkpoint.every_minutes=0 optimizer.grad_clip=1.0)
for dev in cpu cuda; do
    "$DDPRUN" -np 2 "$DDP_SRC/configs/fashion_mlp.yaml" device=$dev run.dir="$TMP/$dev" "${ARGS[@]}" >"$TMP/$dev.log" 2>&1
    check "device=$dev run completes" [ $? -eq 0 ]
done
check "the cuda run used the CUDA device and NCCL" \
    grep -q "device CUDA emulator.*gradient backend nccl" "$TMP/cuda.log"
check "loss sequences agree within 1e-4 relative" python3 - "$TMP/cpu/metrics.jsonl" "$TMP/cuda/metrics.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p) if '"train"' in l] for p in sys.argv[1:3])
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"{len(a)} losses each, first {a[0]:.6f} / {b[0]:.6f}, last {a[-1]:.6f} / {b[-1]:.6f}, worst relative difference {worst:.2e}")
sys.exit(0 if len(a) == len(b) == 10 and worst <= 1e-4 else 1)
PY
check "no host wait inside any cuda step (clipping on): every log line says host_waits 0" python3 - "$TMP/cuda/metrics.jsonl" <<'PY'
import json, sys
waits = [json.loads(l)["host_waits"] for l in open(sys.argv[1]) if '"train"' in l]
print(f"host waits per log interval: {waits}")
sys.exit(0 if len(waits) == 10 and not any(waits) else 1)
PY
finish
