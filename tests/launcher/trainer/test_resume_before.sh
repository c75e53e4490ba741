#!/usr/bin/env bash
# Checkpoints written before issue 38's refactor (tests/fixtures/ckpt-a1c6d91: GPT-2 and the Llama,
# np 2, accumulation 2, AdamW with clipping, steps 4 and 8) still load, and a job resumed from step 4
# with today's code continues as that code did: its step 8 holds the fixture's progress (step,
# epoch, samples consumed) and parameters and AdamW moments within 1e-4 (the DDP-equivalence
# tolerance: on another CPU the GEMMs sum in another order; on the machine that wrote them the two
# are identical, which the test reports). The referee can fail: the step-4 checkpoint is not
# within 1e-4 of step 8.
source "$(dirname "$0")/../../lib.sh"
FIX=${DDP_TEST_FIXTURES:-$DDP_SRC/tests/fixtures}/ckpt-a1c6d91
DATA=$TMP/bytes
cat /usr/share/common-licenses/{GPL-3,Apache-2.0} >"$TMP/corpus.txt"
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$TMP/corpus.txt" "$DATA" >"$TMP/prepare.log" 2>&1
check "prepare-text writes the byte-level shards" [ -f "$DATA/train_000000.bin" ]
progress() { "$DDPRUN" ckpt info "$1" | sed -n 's/^\(step .*\)  total_steps.*/\1/p'; }

for model in gpt2 llama; do
    run=$TMP/$model
    mkdir -p "$run/checkpoints"
    cp "$FIX/$model/ckpt-00000004.ddp" "$run/checkpoints/"
    check "$model: the step-4 checkpoint reads (ckpt info: every CRC)" "$DDPRUN" ckpt info "$FIX/$model/ckpt-00000004.ddp"
    OMP_NUM_THREADS=1 mpirun -np 2 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$FIX/$model/config.yaml" \
        run.dir="$run" data.path="$DATA" data.batch_size=4 train.grad_accum=2 train.max_steps=8 \
        checkpoint.every_steps=4 checkpoint.keep_last=3 checkpoint.resume=auto >"$run.log" 2>&1
    check "$model: resumed from step 4 to step 8 (exit $?)" grep -q "resumed from .*ckpt-00000004.ddp: step 4" "$run.log"
    ours=$run/checkpoints/ckpt-00000008.ddp theirs=$FIX/$model/ckpt-00000008.ddp
    check "$model: step 8's progress is the fixture's ($(progress "$ours"))" [ "$(progress "$ours")" = "$(progress "$theirs")" ]
    for what in param/ optim/exp_avg/ optim/exp_avg_sq/; do
        check "$model: step 8's $what within 1e-4 of the fixture's" "$CKPT_COMPARE" "$theirs" "$ours" "$what" 1e-4
    done
    if "$DDPRUN" ckpt diff "$theirs" "$ours" >/dev/null; then
        echo "# $model: step 8 is the fixture's bit for bit (this CPU sums as the one that wrote it)"
    fi
    check "$model: the referee can fail: step 4 is not within 1e-4 of step 8" \
        bash -c "! '$CKPT_COMPARE' '$theirs' '$FIX/$model/ckpt-00000004.ddp' param/ 1e-4 >/dev/null"
done
finish
