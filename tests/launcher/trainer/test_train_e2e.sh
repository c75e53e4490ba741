#!/usr/bin/env bash
# The main job end to end, as a user runs it: `ddprun -np 2 configs/fashion_mlp.yaml` trains the
# 784-1024-1024-10 MLP on real Fashion-MNIST for 3 epochs and must reach >= 85% test accuracy;
# metrics.jsonl, the resolved config and the final checkpoint are written and usable; the log,
# the metrics and the checkpoint carry what the model declares about itself (its description;
# accuracy, as a classifier; no tokens per second, not being a language model); a healthy run names no
# straggler.
source "$(dirname "$0")/../../lib.sh"
run=$TMP/fashion
"$DDPRUN" -np 2 "$DDP_SRC/configs/fashion_mlp.yaml" run.dir="$run" train.log_every=100 >"$TMP/out.log" 2>&1
rc=$?
tail -n 8 "$TMP/out.log"
check "ddprun -np 2 configs/fashion_mlp.yaml exits 0 (got $rc)" [ $rc -eq 0 ]
acc=$(python3 -c 'import json,sys; e=[json.loads(l) for l in open(sys.argv[1]) if "\"eval\"" in l]; print(e[-1]["test_acc"] if len(e) == 3 else -1)' "$run/metrics.jsonl")
check "three evaluations, the last at >= 85% test accuracy (got $acc)" python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.85 else 1)"
grep straggler "$TMP/out.log"  # shown when the check below fails
check "a healthy run names no straggler (both ranks share the cores)" bash -c "! grep -q straggler '$TMP/out.log'"
check "every output line of the job is tagged with its rank" bash -c "grep -q '^\[rank 0\] epoch 3 step 702/702' '$TMP/out.log'"
check "the resolved config is valid input again (dry run validates it)" "$DDPRUN" --dry-run -np 2 "$run/config.resolved.yaml"
check "the final checkpoint is valid (ckpt info)" "$DDPRUN" ckpt info "$run/checkpoints/ckpt-00000702.ddp"
model="mlp hidden=[1024,1024] activation=relu in=784 classes=10"
check "the header line prints the model's description" grep -qF "[rank 0] model: $model, 1863690 parameters" "$TMP/out.log"
check "the checkpoint records the model's description" \
    bash -c "'$DDPRUN' ckpt info '$run/checkpoints/ckpt-00000702.ddp' | grep -qxF 'model $model'"
check "metrics: every train record has loss and acc, none tokens_per_s; every eval record test_acc" python3 - "$run/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in rows if r["kind"] == "train"]
evals = [r for r in rows if r["kind"] == "eval"]
ok = train and evals and all("loss" in r and "acc" in r and "tokens_per_s" not in r for r in train)
sys.exit(0 if ok and all("test_acc" in r for r in evals) else 1)
PY
check "scripts/plot draws the curves" bash -c "'$DDP_SRC/scripts/plot' '$run' '$TMP/c.png' >/dev/null && [ -s '$TMP/c.png' ]"
finish
