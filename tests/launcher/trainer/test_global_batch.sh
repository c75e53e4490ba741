#!/usr/bin/env bash
# train.global_batch under real mpirun: a job resumed on another world size continues the same
# optimisation. For the MLP (train.micro_batch fixed: global batch 48 = 4 per rank x 4, 2, 3 ranks
# x accumulation 3, 6, 4) and GPT-2 (micro_batch auto: global batch 12 = 3 x 4 ranks, 3 x 2 ranks x
# accumulation 2, 4 x 3 ranks), a chain np=4 -> stop -> np=2 -> stop -> np=3 against an
# uninterrupted np=4 run:
#  - every step trains the same samples in the same order: each rank's trace (DDP_TEST_TRACE_DIR,
#    "epoch index" per trained sample) is put back into the step's global order (micro-step m, rank
#    r, row j is position m*R*B + r + j*R of the step's window) and the chain's steps equal the
#    reference's, exactly;
#  - the schedule is the same (steps per epoch, the horizon), the checkpoints' hash accepts the
#    resume at every world size, and each part logs the split it derived;
#  - the parameters agree within the tolerance of a reordered float sum (below), and a different
#    global batch does not (the referee can fail).
# A world size that does not divide the global batch is refused before training (exit 2, under
# mpirun and by ddprun before mpirun starts) naming the numbers and the world sizes that would.
#
# Tolerance. Both runs sum the same per-sample gradients in another grouping (a rank's rows in a
# GEMM, micro-steps accumulated, ranks all-reduced). Regrouping a float32 sum of n terms moves it
# by at most about n ulps (n u sum|terms|, u = 2^-24; Higham, "Accuracy and Stability of Numerical
# Algorithms", 4.2); the tests allow 4 n ulps of the largest parameter, n the terms of a step's
# gradient sum: MLP n = 48 samples, 4 x 48 x 2^-24 = 1.1e-5; GPT-2 n = 12 sequences x 24
# positions = 288, 4 x 288 x 2^-24 = 6.9e-5. The optimizer carries a step's rounding forward
# without multiplying it (SGD's learning rate and momentum and AdamW's normalised step, both at
# most lr per step, are below 1, and the rounding errors of later steps do not add up in one
# direction): at the end of the runs the measured difference is 1.8e-7 (MLP, 30 steps) and 1.3e-6
# (GPT-2, 20 steps) of the largest parameter, while a different global batch is farther than 1e-4.
source "$(dirname "$0")/../../lib.sh"
MLP=$DDP_SRC/tests/launcher/trainer/ddp_small.yaml
GPT=$DDP_SRC/tests/launcher/trainer/gpt2_small.yaml
DATA=$TMP/bytes
cat /usr/share/common-licenses/{GPL-3,Apache-2.0,LGPL-3,MPL-2.0,Artistic} >"$TMP/corpus.txt"
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$TMP/corpus.txt" "$DATA" >"$TMP/prepare.log" 2>&1
check "prepare-text writes the byte-level shards" [ -f "$DATA/train_000000.bin" ]

# run NAME PART NP CONFIG [overrides...]: one part of a job under mpirun into $TMP/NAME, its trace
# in $TMP/NAME/trace-PART, its log in $TMP/NAME-PART.log
run() {
    local name=$1 part=$2 np=$3 cfg=$4
    shift 4
    mkdir -p "$TMP/$name/trace-$part"
    DDP_TEST_TRACE_DIR=$TMP/$name/trace-$part timeout 300 mpirun -np "$np" --oversubscribe --bind-to none \
        "$DDPRUN_WORKER" "$cfg" run.dir="$TMP/$name" "$@" >"$TMP/$name-$part.log" 2>&1
}
ckpt() { echo "$TMP/$1/checkpoints/ckpt-$(printf %08d "$2").ddp"; }

# same_steps REF CHAIN...: each argument DIR:WORLD:BATCH:ACCUM, a part's trace folder and its split;
# the chain's parts, one after another, train the reference's steps: the same samples, same order
same_steps() {
    python3 - "$@" <<'PY'
import sys

def steps(arg):
    folder, world, batch, accum = arg.rsplit(":", 3)
    world, batch, accum = int(world), int(batch), int(accum)
    ranks = [[l.split() for l in open(f"{folder}/trace-w{world}-r{r}.txt") if l.strip()] for r in range(world)]
    per_step = batch * accum
    if len({len(x) for x in ranks}) != 1 or len(ranks[0]) % per_step:
        sys.exit(f"{arg}: ranks traced {[len(x) for x in ranks]} samples, not whole steps of {per_step}")
    out = []
    for s in range(len(ranks[0]) // per_step):
        seq = [None] * (world * per_step)
        for r in range(world):
            for i in range(per_step):
                m, j = divmod(i, batch)
                seq[m * world * batch + r + j * world] = tuple(ranks[r][s * per_step + i])
        out.append(seq)
    return out

ref = steps(sys.argv[1])
chain = [s for arg in sys.argv[2:] for s in steps(arg)]
if len(chain) != len(ref):
    sys.exit(f"the chain trained {len(chain)} steps, the reference {len(ref)}")
for k, (a, b) in enumerate(zip(ref, chain)):
    if a != b:
        sys.exit(f"step {k + 1} differs: reference {a[:6]}..., chain {b[:6]}...")
print(f"{len(ref)} steps of {len(ref[0])} samples each, identical")
PY
}

# chain NAME CONFIG STOP1 STOP2 LAST SPLIT4 SPLIT2 SPLIT3 [overrides...]: the reference at np=4 and
# the chain np=4 (stopped after STOP1) -> np=2 (after STOP2) -> np=3 to LAST, then every check
chain() {
    local n=$1 cfg=$2 s1=$3 s2=$4 last=$5 split4=$6 split2=$7 split3=$8
    shift 8
    run "$n-ref" all 4 "$cfg" "$@"
    check "$n: uninterrupted np=4 run ends at step $last" [ -f "$(ckpt "$n-ref" "$last")" ]
    DDP_TEST_FAULT=stop:0:$s1 run "$n" a 4 "$cfg" "$@"
    check "$n: np=4 stops at step $s1" [ -f "$(ckpt "$n" "$s1")" ]
    DDP_TEST_FAULT=stop:1:$s2 run "$n" b 2 "$cfg" "$@" checkpoint.resume=auto
    check "$n: np=2 resumes and stops at step $s2" [ -f "$(ckpt "$n" "$s2")" ]
    run "$n" c 3 "$cfg" "$@" checkpoint.resume=auto
    check "$n: np=3 resumes and ends at step $last" [ -f "$(ckpt "$n" "$last")" ]
    check "$n: the world size changed 4 -> 2 -> 3" bash -c "grep -q 'world size changed from 4 to 2' '$TMP/$n-b.log' &&
        grep -q 'world size changed from 2 to 3' '$TMP/$n-c.log'"
    for part in "all 4 $split4" "a 4 $split4" "b 2 $split2" "c 3 $split3"; do
        set -- $part
        local name=$n
        [ "$1" = all ] && name=$n-ref
        local b=${3%x*} a=${3#*x}
        check "$n: part $1 at np=$2 trains $b per rank x $a accumulation" \
            grep -q "train.global_batch [0-9]* at $2 ranks: $b per rank x $a accumulation" "$TMP/$name-$1.log"
        local epoch
        epoch=$(grep -o "[0-9]* steps per epoch, [0-9]* steps in total" "$TMP/$name-$1.log")
        check "$n: part $1 plans the reference's schedule ($epoch)" \
            grep -qF "$epoch" "$TMP/$n-ref-all.log"
    done
    local s4=${split4/x/:} s2p=${split2/x/:} s3p=${split3/x/:}
    check "$n: every step trained the reference's samples in its order" same_steps "$TMP/$n-ref/trace-all:4:$s4" \
        "$TMP/$n/trace-a:4:$s4" "$TMP/$n/trace-b:2:$s2p" "$TMP/$n/trace-c:3:$s3p"
}

# --- the MLP: SGD with Nesterov momentum, global batch 48 of 4 per rank ---
M=(train.global_batch=48 data.batch_size=4 train.max_steps=30)
chain mlp "$MLP" 10 20 30 4x3 4x6 4x4 "${M[@]}"
check "mlp: parameters within 1.1e-5 (4 x 48 ulps) of the uninterrupted run" \
    "$CKPT_COMPARE" "$(ckpt mlp-ref 30)" "$(ckpt mlp 30)" param/ 1.1e-5
check "mlp: momentum within 1.1e-5 of the uninterrupted run" \
    "$CKPT_COMPARE" "$(ckpt mlp-ref 30)" "$(ckpt mlp 30)" optim/ 1.1e-5
run mlp-other all 4 "$MLP" train.global_batch=64 data.batch_size=4 train.max_steps=30
check "mlp: global batch 64 differs from 48 at 1.1e-5 (the referee can fail)" \
    bash -c "! '$CKPT_COMPARE' '$(ckpt mlp-ref 30)' '$(ckpt mlp-other 30)' param/ 1.1e-5 >/dev/null"

# --- GPT-2: AdamW with clipping, global batch 12 split by train.micro_batch auto ---
G=(data.path="$DATA" train.global_batch=12 data.batch_size=4 train.micro_batch=auto train.max_steps=20)
chain gpt "$GPT" 7 14 20 3x1 3x2 4x1 "${G[@]}"
check "gpt: parameters within 6.9e-5 (4 x 288 ulps) of the uninterrupted run" \
    "$CKPT_COMPARE" "$(ckpt gpt-ref 20)" "$(ckpt gpt 20)" param/ 6.9e-5
run gpt-other all 4 "$GPT" data.path="$DATA" train.global_batch=16 data.batch_size=4 train.max_steps=20
check "gpt: global batch 16 differs from 12 at 6.9e-5 (the referee can fail)" \
    bash -c "! '$CKPT_COMPARE' '$(ckpt gpt-ref 20)' '$(ckpt gpt-other 20)' param/ 6.9e-5 >/dev/null"

# --- a world size that does not divide the global batch: refused before training ---
run refused all 5 "$GPT" "${G[@]}"
rc=$?
check "np=5 with global batch 12: every rank refuses with exit 2 (got $rc)" [ $rc -eq 2 ]
check "... naming the numbers and the world sizes that would" grep -qF \
    "train.global_batch 12 cannot be split over 5 ranks: 12 samples do not divide into 5 equal shares; world sizes that would: 1, 2, 3, 4, 6, 12" \
    "$TMP/refused-all.log"
check "... at the override that set it" grep -qE "<override [0-9]+>:1:20: train.global_batch 12 cannot be split" \
    "$TMP/refused-all.log"
check "... before anything was written" eval '[ ! -e "$TMP/refused/checkpoints" ] && [ ! -e "$TMP/refused/metrics.jsonl" ]'
"$DDPRUN" -np 8 "$MLP" run.dir="$TMP/refused-ddprun" train.global_batch=48 data.batch_size=4 >"$TMP/refused-ddprun.log" 2>&1
rc=$?
check "ddprun -np 8 with global batch 48 of 4 per rank: exit 2 before mpirun (got $rc)" \
    eval '[ $rc -eq 2 ] && [ ! -e "$TMP/refused-ddprun" ]'
check "... naming the numbers and the world sizes that would" grep -qF \
    "48 / (8 ranks x data.batch_size 4) is not a whole number of micro-steps; world sizes that would: 1, 2, 3, 4, 6, 12" \
    "$TMP/refused-ddprun.log"

# --- a per-rank checkpoint does not resume as a global-batch run (the hash names the change) ---
run mode all 2 "$MLP" train.max_steps=6
run mode again 2 "$MLP" train.max_steps=8 train.global_batch=128 checkpoint.resume=auto
rc=$?
check "a per-rank checkpoint resumed with train.global_batch: refused (exit $rc)" [ $rc -eq 2 ]
check "... naming both settings" bash -c "grep -qF 'data.batch_size 64 (not used by this run)' '$TMP/mode-again.log' &&
    grep -qF 'train.global_batch (not used by the saved run; this run: 128)' '$TMP/mode-again.log'"
finish
