#!/usr/bin/env bash
# DDP equivalence, the core guarantee: N ranks with per-rank batch B/N end with the same
# parameters as 1 rank with batch B over the same samples; gradient accumulation likewise, an
# epoch's last, shorter step of accumulation included; the parameters handed out in many chunks
# (DDP_COMM_MAX_CHUNK) give the same run bit for bit.
# Real mpirun, real Fashion-MNIST, 20 steps, shuffled.
source "$(dirname "$0")/../../lib.sh"

equiv() { # name tolerance optimizer-overrides...
    local name=$1 tol=$2; shift 2
    worker 1 "$TMP/$name-np1" data.batch_size=64 "$@" >"$TMP/$name-np1.log" 2>&1
    check "$name: np=1 batch 64 runs" [ $? -eq 0 ]
    worker 2 "$TMP/$name-np2" data.batch_size=32 "$@" >"$TMP/$name-np2.log" 2>&1
    check "$name: np=2 batch 32 runs" [ $? -eq 0 ]
    worker 4 "$TMP/$name-np4" data.batch_size=16 "$@" >"$TMP/$name-np4.log" 2>&1
    check "$name: np=4 batch 16 runs" [ $? -eq 0 ]
    worker 1 "$TMP/$name-acc2" data.batch_size=32 train.grad_accum=2 "$@" >"$TMP/$name-acc2.log" 2>&1
    check "$name: np=1 batch 32 x grad_accum 2 runs" [ $? -eq 0 ]
    local ref; ref=$(last_ckpt "$TMP/$name-np1")
    check "$name: final checkpoint written at step 20" [ "$(basename "$ref")" = ckpt-00000020.ddp ]
    for v in np2 np4 acc2; do
        check "$name: $v params equal np=1 within $tol" "$CKPT_COMPARE" "$ref" "$(last_ckpt "$TMP/$name-$v")" param/ "$tol"
    done
    # A different global batch must NOT match: proves the comparison can fail.
    worker 1 "$TMP/$name-other" data.batch_size=48 "$@" >/dev/null 2>&1
    check "$name: batch 48 differs from batch 64 (the referee can fail)" \
        bash -c "! '$CKPT_COMPARE' '$ref' '$(last_ckpt "$TMP/$name-other")' param/ $tol >/dev/null"
}

equiv sgd 1e-5 optimizer.kind=sgd
# Rank 0 hands its parameters out a chunk at a time: with DDP_COMM_MAX_CHUNK=997 (a prime, so the
# last chunk is short) the model goes in some two thousand broadcasts, and the run is the same,
# bit for bit (each all-reduce in 997-element calls adds the same numbers per element)
DDP_COMM_MAX_CHUNK=997 worker 2 "$TMP/chunked-np2" data.batch_size=32 optimizer.kind=sgd >"$TMP/chunked.log" 2>&1
check "np=2 with the parameters broadcast 997 floats at a time runs" [ $? -eq 0 ]
check "its checkpoint the unchunked np=2 run's, bit for bit" \
    "$DDPRUN" ckpt diff "$(last_ckpt "$TMP/sgd-np2")" "$(last_ckpt "$TMP/chunked-np2")"
equiv adamw 1e-4 optimizer.kind=adamw optimizer.nesterov=false optimizer.lr=1e-3
grep -q "global batch 64 = 32 per rank x 2 ranks x 1 accumulation" "$TMP/sgd-np2.log"
check "np=2 header prints the global batch" [ $? -eq 0 ]

# data.drop_last false with gradient accumulation: the micro-batches left at an epoch's end that do
# not fill train.grad_accum make a last, shorter step (as Hugging Face's Trainer does), its loss the
# mean over its own samples. 10 synthetic samples in batches of 2 x accumulation 2 (np 1), or 1 x 2
# ranks x 2, are 3 steps an epoch (4, 4 and 2 samples): the same steps as batches of 4 without
# accumulation, so the same parameters within the regrouped sums' rounding (as above).
SHORT=(data.kind=synthetic data.synthetic.train=10 data.synthetic.test=4 data.shuffle=false data.drop_last=false
       train.max_steps=0 train.epochs=2 train.eval=false optimizer.schedule.warmup_steps=0 optimizer.grad_clip=0)
worker 1 "$TMP/short-ref" data.batch_size=4 "${SHORT[@]}" >"$TMP/short-ref.log" 2>&1
check "short last step: batch 4 runs" [ $? -eq 0 ]
worker 1 "$TMP/short-acc" data.batch_size=2 train.grad_accum=2 "${SHORT[@]}" >"$TMP/short-acc.log" 2>&1
check "short last step: batch 2 x accumulation 2 runs" [ $? -eq 0 ]
worker 2 "$TMP/short-np2" data.batch_size=1 train.grad_accum=2 "${SHORT[@]}" >"$TMP/short-np2.log" 2>&1
check "short last step: np 2 batch 1 x accumulation 2 runs" [ $? -eq 0 ]
for v in ref acc np2; do
    check "short last step: $v trained 3 steps an epoch, the last shorter (checkpoint of step 6)" \
        [ "$(basename "$(last_ckpt "$TMP/short-$v")")" = ckpt-00000006.ddp ]
done
for v in acc np2; do
    check "short last step: $v params equal batch 4's within 1e-5" "$CKPT_COMPARE" "$(last_ckpt "$TMP/short-ref")" \
        "$(last_ckpt "$TMP/short-$v")" param/ 1e-5
done
worker 1 "$TMP/short-drop" data.batch_size=2 train.grad_accum=2 "${SHORT[@]}" data.drop_last=true >"$TMP/short-drop.log" 2>&1
check "short last step: with drop_last true the last 2 samples are dropped (2 steps an epoch, the referee can fail)" \
    bash -c "[ \"\$(basename '$(last_ckpt "$TMP/short-drop")')\" = ckpt-00000004.ddp ] &&
             ! '$CKPT_COMPARE' '$(last_ckpt "$TMP/short-ref")' '$(last_ckpt "$TMP/short-drop")' param/ 1e-5 >/dev/null"
check "short last step: ... and the header says so" \
    grep -q "data.drop_last: 2 of the 10 training samples are left out of each epoch (the same ones every epoch)" \
    "$TMP/short-drop.log"
check "short last step: drop_last false leaves none out, and says nothing" bash -c "! grep -q 'left out' '$TMP/short-acc.log'"
finish
