#!/usr/bin/env bash
# DDP equivalence, the core guarantee: N ranks with per-rank batch B/N end with the same
# parameters as 1 rank with batch B over the same samples; gradient accumulation likewise.
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
equiv adamw 1e-4 optimizer.kind=adamw optimizer.nesterov=false optimizer.lr=1e-3
grep -q "global batch 64 = 32 per rank x 2 ranks x 1 accumulation" "$TMP/sgd-np2.log"
check "np=2 header prints the global batch" [ $? -eq 0 ]
finish
