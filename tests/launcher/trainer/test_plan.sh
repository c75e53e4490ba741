#!/usr/bin/env bash
# `ddprun plan CONFIG` (ddprun-worker --plan): the memory plan without training, on GPT-2 and the
# Llama:
#  - its line is the very line the training job logs in its header, at np=1, np=2 and np=3 with
#    ZeRO-1, for both models (tiny configs, a 3-step job each);
#  - the parameter counts of configs/gpt2_124m.yaml, configs/llama3_1b.yaml (Llama-3.2-1B's shape:
#    1,235,814,400, Hugging Face's count), configs/qwen2.5_0.5b.yaml (Qwen2.5-0.5B's: 494,032,768,
#    fitting an 80 GB GPU) and configs/llama_kjv.yaml equal the closed formulas of
#    their shapes, and each line's total is the sum of its parts (bf16 copies included);
#  - ZeRO-1 divides the optimizer state by the ranks; ZeRO-2's and ZeRO-3's lines are the jobs' too;
#    configs/llama3_8b.yaml (np 8), llama3_70b.yaml (np 32), mistral_7b_sft.yaml,
#    mistral_nemo_12b_sft.yaml and qwen3_8b_sft.yaml (np 8) have Llama-3.1-8B's, 70B's,
#    Mistral-7B-v0.3's, Mistral-Nemo-Base-2407's (heads of head_dim 128 over 5120 channels) and
#    Qwen3-8B's (q/k norms) parameter counts and plan at most 70 GiB per GPU;
#    -np before or after plan;
#  - with train.global_batch, the activations are the micro-batch the world size gets (job and plan);
#  - train.logits_mb: the classifier's chunk, the job's line as the plan's, less than the whole batch's,
#    and its text samples drawn;
#  - sizes past 64 bits (issue 37: 128 layers of 65536 over 2^24 tokens and 2^20 positions, at
#    batch 65536 and 2^31-1) are refused with exit 2 naming the keys; below that the figures grow
#    with the batch (1, 2, 1024, 2048);
#  - the plan is what a job allocates: an 8-layer Llama at np=4 in every ZeRO stage (recompute none;
#    ZeRO-0 and 3 full too) peaks within 10 % of its plan (the device ledger), each stage below the last;
#  - nothing is written (no run.dir), no device or MPI is needed; --dry-run prints the worker's
#    command; a bad override, the MLP (whose size follows its data) and a missing config are
#    refused with exit 2.
source "$(dirname "$0")/../../lib.sh"
TR=$DDP_SRC/tests/launcher/trainer
DATA=$TMP/bytes
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$DDP_SRC/README.md" "$DATA" >/dev/null 2>&1
check "prepare-text: byte-token data" [ -f "$DATA/tokenizer.bin" ]
S=(data.path="$DATA" train.max_steps=3 optimizer.schedule.warmup_steps=1)

# plan_line OUT: the memory line of a plan or of a training log (without the log's prefix)
plan_line() { sed -n 's/^\(\[rank 0[^]]*\] \)\{0,1\}\(memory per rank: .*\)$/\2/p' "$1"; }

for model in gpt2 llama; do
    for np_zero in 1:0 2:0 3:1 3:2 3:3; do
        np=${np_zero%:*} zero=${np_zero#*:}
        name=$model-$np-$zero
        SMALL=$TR/${model}_small.yaml worker "$np" "$TMP/$name" "${S[@]}" ddp.zero=$zero >"$TMP/$name.log" 2>&1
        check "$model np=$np ddp.zero=$zero: the 3-step job runs" [ $? -eq 0 ]
        "$DDPRUN" plan "$TR/${model}_small.yaml" -np "$np" "${S[@]}" ddp.zero=$zero run.dir="$TMP/$name-plan" \
            >"$TMP/$name.plan" 2>"$TMP/$name.plan.err"
        check "$model np=$np ddp.zero=$zero: ddprun plan exits 0" [ $? -eq 0 ]
        got=$(plan_line "$TMP/$name.plan") want=$(plan_line "$TMP/$name.log")
        echo "# plan: $got"
        check "$model np=$np ddp.zero=$zero: the plan's line is the job's" [ -n "$want" -a "$got" = "$want" ]
        check "$model np=$np ddp.zero=$zero: the plan wrote nothing" [ ! -e "$TMP/$name-plan" ]
    done
done
check "with ZeRO-1 over 3 ranks the line says so" grep -q "ZeRO-1 over 3 ranks; without" "$TMP/llama-3-1.plan"
check "with ZeRO-3 the line names the parameter shard and windows" \
    grep -q "parameters [0-9.]* MiB (ZeRO-3: a shard of" "$TMP/llama-3-3.plan"

# with train.global_batch the activations are the micro-batch the world size gets: 6 over 3 ranks
# with micro_batch auto under data.batch_size 4 is 2 rows per rank, in the plan as in the job's header
G=(train.global_batch=6 train.micro_batch=auto data.batch_size=4 train.grad_accum=1 data.drop_last=true)
SMALL=$TR/gpt2_small.yaml worker 3 "$TMP/global" "${S[@]}" "${G[@]}" >"$TMP/global.log" 2>&1
check "global batch 6 at np=3: the 3-step job runs" [ $? -eq 0 ]
"$DDPRUN" plan "$TR/gpt2_small.yaml" -np 3 "${S[@]}" "${G[@]}" >"$TMP/global.plan" 2>&1
got=$(plan_line "$TMP/global.plan") want=$(plan_line "$TMP/global.log")
check "global batch 6 at np=3: the plan's line is the job's, with 2 rows per rank ($got)" \
    [ -n "$want" -a "$got" = "$want" -a "${got/(2 rows)/}" != "$got" ]

# params_formula KIND key=value...: the parameter count of the shape (python3)
params_formula() {
    python3 - "$@" <<'PY'
import sys
kind, s = sys.argv[1], dict(a.split("=") for a in sys.argv[2:])
s = {k: int(v) for k, v in s.items()}
Vp = (s["V"] + 127) // 128 * 128
C, L = s["C"], s["L"]
if kind == "gpt2":
    print(Vp * C + s["T"] * C + L * (12 * C * C + 13 * C) + 2 * C)
else:
    hd = s.get("HD", C // s["NH"])  # head_dim, when the config sets its own
    block = 2 * C + C * s["NH"] * hd + 2 * C * s["NKV"] * hd + s["NH"] * hd * C + 3 * C * s["F"]
    if kind == "qwen2":  # the q, k and v projections' biases
        block += (s["NH"] + 2 * s["NKV"]) * hd
    if kind == "qwen3":  # the q and k heads' norms
        block += 2 * hd
    print(Vp * C * (1 if s["tie"] else 2) + L * block + C)
PY
}
# plan_params OUT: the parameter count a plan printed
plan_params() { sed -n 's/^plan: .*: \([0-9]*\) parameters in .*/\1/p' "$1"; }
# parts_add_up OUT: parameters + gradients + state + bf16 copies + activations = the total (0.1 MiB rounding)
parts_add_up() {
    python3 - "$(plan_line "$1")" <<'PY'
import re, sys
line = re.sub(r"\([^)]*\)", "", sys.argv[1])  # the ZeRO remark's "without"/"about" figures are not parts
mib = [float(x) for x in re.findall(r"([0-9]+\.[0-9]) MiB", line)]
parts, total = mib[:-1], mib[-1]
print(f"# parts {parts} total {total}")
sys.exit(0 if parts and abs(sum(parts) - total) <= 0.05 * len(parts) else 1)
PY
}

"$DDPRUN" -np 8 plan "$DDP_SRC/configs/llama3_1b.yaml" >"$TMP/1b.plan" 2>"$TMP/1b.err"
check "llama3_1b at np=8: ddprun -np 8 plan exits 0" [ $? -eq 0 ]
cat "$TMP/1b.plan"
want=$(params_formula llama L=16 C=2048 NH=32 NKV=8 F=8192 V=128256 tie=1)
check "llama3_1b: $(plan_params "$TMP/1b.plan") parameters = the formula's $want = Llama-3.2-1B's 1235814400" \
    [ "$(plan_params "$TMP/1b.plan")" = "$want" -a "$want" = 1235814400 ]
check "llama3_1b: ZeRO-1 over 8 ranks, an eighth of the replicated AdamW state" \
    grep -q "optimizer state 1178.6 MiB (ZeRO-1 over 8 ranks; without: 9428.5 MiB)" "$TMP/1b.plan"
check "llama3_1b: bf16 copies of parameters and gradients (2 bytes each)" \
    grep -q "bf16 copies: parameters 2357.1 MiB, gradients 2357.1 MiB" "$TMP/1b.plan"
check "llama3_1b: the parts add up to the total" parts_add_up "$TMP/1b.plan"
"$DDPRUN" plan "$DDP_SRC/configs/llama3_1b.yaml" -np 4 >"$TMP/1b4.plan" 2>/dev/null
check "-np after plan: ZeRO-1 over 4 ranks" grep -q "optimizer state 2357.1 MiB (ZeRO-1 over 4 ranks" "$TMP/1b4.plan"

"$DDPRUN" -np 8 plan "$DDP_SRC/configs/qwen2.5_0.5b.yaml" >"$TMP/qwen.plan" 2>"$TMP/qwen.err"
check "qwen2.5_0.5b at np=8: ddprun -np 8 plan exits 0" [ $? -eq 0 ]
cat "$TMP/qwen.plan"
want=$(params_formula qwen2 L=24 C=896 NH=14 NKV=2 F=4864 V=151936 tie=1)
check "qwen2.5_0.5b: $(plan_params "$TMP/qwen.plan") parameters = the formula's $want = Qwen2.5-0.5B's 494032768" \
    [ "$(plan_params "$TMP/qwen.plan")" = "$want" -a "$want" = 494032768 ]
check "qwen2.5_0.5b: the parts add up to the total" parts_add_up "$TMP/qwen.plan"
check "qwen2.5_0.5b: fits an 80 GB GPU (76293 MiB)" python3 -c \
    "import sys, re; sys.exit(float(re.findall(r'([0-9.]+) MiB in all', open('$TMP/qwen.plan').read())[0]) > 76293)"

# fits GIB OUT: the plan's total is at most GIB GiB
fits() { python3 -c "import sys, re; sys.exit(float(re.findall(r'([0-9.]+) MiB in all', open('$2').read())[0]) > $1 * 1024)"; }

# CONFIG:NP:KIND:SHAPE:COUNT — Hugging Face's parameter count of the released model the config names
# (the folder named by a config's checkpoint.init_from is not read by plan)
for big in llama3_8b:8:llama:L=32,C=4096,NH=32,NKV=8,F=14336,V=128256,tie=0:8030261248 \
    llama3_70b:32:llama:L=80,C=8192,NH=64,NKV=8,F=28672,V=128256,tie=0:70553706496 \
    mistral_7b_sft:8:mistral:L=32,C=4096,NH=32,NKV=8,F=14336,V=32768,tie=0:7248023552 \
    mistral_nemo_12b_sft:8:mistral:L=40,C=5120,NH=32,NKV=8,HD=128,F=14336,V=131072,tie=0:12247782400 \
    qwen3_8b_sft:8:qwen3:L=36,C=4096,NH=32,NKV=8,F=12288,V=151936,tie=0:8190735360; do
    IFS=: read -r name np kind shape hf <<<"$big"
    "$DDPRUN" -np "$np" plan "$DDP_SRC/configs/$name.yaml" >"$TMP/$name.plan" 2>"$TMP/$name.err"
    check "$name at np=$np: ddprun plan exits 0" [ $? -eq 0 ]
    cat "$TMP/$name.plan"
    want=$(params_formula "$kind" ${shape//,/ })
    check "$name: $(plan_params "$TMP/$name.plan") parameters = the formula's $want = Hugging Face's $hf" \
        [ "$(plan_params "$TMP/$name.plan")" = "$want" -a "$want" = "$hf" ]
    check "$name: ZeRO-3 over $np ranks" grep -q "(ZeRO-3 over $np ranks" "$TMP/$name.plan"
    check "$name: the parts add up to the total" parts_add_up "$TMP/$name.plan"
    check "$name: at most 70 GiB per GPU" fits 70 "$TMP/$name.plan"
done

"$DDPRUN" -np 8 plan "$DDP_SRC/configs/gpt2_124m.yaml" >"$TMP/124m.plan" 2>/dev/null
want=$(params_formula gpt2 L=12 C=768 T=1024 V=50257)
check "gpt2_124m: $(plan_params "$TMP/124m.plan") parameters = the formula's $want" \
    [ "$(plan_params "$TMP/124m.plan")" = "$want" ]
check "gpt2_124m: the parts add up to the total" parts_add_up "$TMP/124m.plan"
"$DDPRUN" -np 2 plan "$DDP_SRC/configs/llama_kjv.yaml" >"$TMP/kjv.plan" 2>/dev/null
want=$(params_formula llama L=4 C=128 NH=4 NKV=2 F=352 V=256 tie=0)
check "llama_kjv: $(plan_params "$TMP/kjv.plan") parameters = the formula's $want" \
    [ "$(plan_params "$TMP/kjv.plan")" = "$want" ]

# issue 37: sizes past 64 bits. Llama-3.2-1B's config at 128 layers of width 65536 over a 2^24
# vocabulary and 2^20 positions: the batch of the issue (65536) with the whole micro-batch's logits
# (train.logits_mb 0: 2^61 bytes of them) and the largest data.batch_size are refused naming the
# keys, exit 2, nothing printed as a plan; below that the figures grow with the batch.
BIG=(model.llama.n_layer=128 model.llama.n_embd=65536 model.llama.n_head=64 model.llama.n_kv_head=8
     model.llama.ffn_hidden=0 model.llama.vocab_size=16777216 model.llama.block_size=1048576 data.seq_len=1048576)
for b in 65536 2147483647; do
    "$DDPRUN" plan "$DDP_SRC/configs/llama3_1b.yaml" -np 1 "${BIG[@]}" data.batch_size=$b train.logits_mb=0 \
        >"$TMP/big$b.plan" 2>"$TMP/big$b.err"
    rc=$?
    cat "$TMP/big$b.err"
    check "batch $b at the big shape: refused with exit 2 (got $rc), no plan printed" \
        [ $rc -eq 2 -a ! -s "$TMP/big$b.plan" ]
    for key in model.llama.n_layer=128 model.llama.n_embd=65536 model.llama.vocab_size=16777216 data.seq_len=1048576 \
        "$b sequences per rank (data.batch_size)" "overflows 64 bits"; do
        check "... the message names $key" grep -qF "$key" "$TMP/big$b.err"
    done
done
# plan_acts / plan_all OUT: the activations' and the total MiB of a plan's memory line
plan_acts() { plan_line "$1" | sed -n 's/.*, activations \([0-9.]*\) MiB.*/\1/p'; }
plan_all() { plan_line "$1" | sed -n 's/.* \([0-9.]*\) MiB in all$/\1/p'; }
prev_acts=0 prev_all=0
for b in 1 2 1024 2048 65536; do # 65536: its logits 1 GiB at a time (the default), the rest fits
    "$DDPRUN" plan "$DDP_SRC/configs/llama3_1b.yaml" -np 1 "${BIG[@]}" data.batch_size=$b >"$TMP/big$b.plan" 2>/dev/null
    check "batch $b at the big shape: planned, exit 0" [ $? -eq 0 ]
    acts=$(plan_acts "$TMP/big$b.plan") all=$(plan_all "$TMP/big$b.plan")
    echo "# batch $b: activations $acts MiB, $all MiB in all"
    check "batch $b: activations $acts MiB >= $prev_acts, $all MiB in all >= $prev_all (the smaller batch before)" \
        python3 -c "import sys; a, pa, t, pt = map(float, sys.argv[1:]); sys.exit(not (pa <= a > 0 and pt <= t))" \
        "${acts:-0}" "$prev_acts" "${all:-0}" "$prev_all"
    prev_acts=${acts:-0} prev_all=${all:-0}
done

# train.logits_mb, the classifier's chunk of logits (384 rows of 256 x 4 bytes in all; 0.01 MiB is 10
# rows): the job builds what the plan counts, and the chunk plans less than the whole micro-batch's
for mb in 0 0.01; do
    name=logits-$mb
    SMALL=$TR/llama_small.yaml worker 2 "$TMP/$name" "${S[@]}" train.logits_mb=$mb train.sample_every=3 \
        train.sample_tokens=8 >"$TMP/$name.log" 2>&1
    check "llama np=2 train.logits_mb=$mb: the 3-step job runs" [ $? -eq 0 ]
    check "train.logits_mb=$mb: its text sample at step 3 (generation reads a row's logits)" \
        grep -q "^sample at step 3: " "$TMP/$name.log"
    "$DDPRUN" plan "$TR/llama_small.yaml" -np 2 "${S[@]}" train.logits_mb=$mb >"$TMP/$name.plan" 2>&1
    got=$(plan_line "$TMP/$name.plan") want=$(plan_line "$TMP/$name.log")
    check "train.logits_mb=$mb: the plan's line is the job's ($got)" [ -n "$want" -a "$got" = "$want" ]
done
check "train.logits_mb 0.01 plans $(plan_acts "$TMP/logits-0.01.plan") MiB of activations, less than 0's $(plan_acts "$TMP/logits-0.plan")" \
    python3 -c 'import sys; c, w = map(float, sys.argv[1:]); sys.exit(not (0 < c < w))' \
    "$(plan_acts "$TMP/logits-0.01.plan")" "$(plan_acts "$TMP/logits-0.plan")"

# The plan against what the job allocated: an 8-layer Llama at np=4 (parameters weigh more than its
# activations, so every stage's sharding shows), each ZeRO stage with recompute none, ZeRO-0 and 3
# with full too; the
# device ledger's peak (metrics.jsonl's peak_mib, the largest rank's) within 10 % of the plan's
# total, and each stage below the one before (measured: within 0.3 %).
L8=(model.llama.n_layer=8 model.llama.n_embd=128 model.llama.ffn_hidden=352 data.seq_len=32 model.llama.block_size=32
    data.batch_size=2 train.log_every=1)
prev=
for zero in 0 1 2 3; do
    for mode in none $([ $zero = 0 -o $zero = 3 ] && echo full); do
        name=peak-$zero-$mode
        SMALL=$TR/llama_small.yaml worker 4 "$TMP/$name" "${S[@]}" "${L8[@]}" ddp.zero=$zero train.recompute=$mode \
            >"$TMP/$name.log" 2>&1
        planned=$(sed -n 's/.* \([0-9.]*\) MiB in all$/\1/p' "$TMP/$name.log" | head -n 1)
        peak=$(grep -o '"peak_mib":[0-9.]*' "$TMP/$name/metrics.jsonl" | cut -d: -f2 | sort -n | tail -n 1)
        check "llama 8 layers np=4 ddp.zero=$zero recompute $mode: measured peak ${peak:-?} MiB within 10 % of the plan's ${planned:-?}" \
            python3 -c 'import sys; p, m = map(float, sys.argv[1:]); sys.exit(not (p > 0 and abs(m - p) <= 0.1 * p))' \
            "${planned:-0}" "${peak:-0}"
    done
    check "ddp.zero=$zero: its peak (recompute none) below the stage before's" \
        python3 -c 'import sys; sys.exit(not (sys.argv[1] == "" or float(sys.argv[2]) < float(sys.argv[1])))' \
        "$prev" "$(grep -o '"peak_mib":[0-9.]*' "$TMP/peak-$zero-none/metrics.jsonl" | cut -d: -f2 | sort -n | tail -n 1)"
    prev=$(grep -o '"peak_mib":[0-9.]*' "$TMP/peak-$zero-none/metrics.jsonl" | cut -d: -f2 | sort -n | tail -n 1)
done

"$DDPRUN" --dry-run -np 8 plan "$DDP_SRC/configs/llama3_1b.yaml" >"$TMP/dry.out" 2>&1
check "--dry-run: prints the worker's --plan command and exits 0" grep -q "ddprun-worker --plan 8 .*llama3_1b.yaml" "$TMP/dry.out"
check "... and nothing else" [ "$(wc -l <"$TMP/dry.out")" -eq 1 ]
"$DDPRUN" -np 8 plan "$DDP_SRC/configs/llama3_1b.yaml" model.llama.n_head=5 >/dev/null 2>"$TMP/bad.err"
rc=$?
check "a bad override: exit 2 (got $rc) naming the key" eval '[ $rc -eq 2 ] && grep -q "model.llama.n_head" "$TMP/bad.err"'
"$DDPRUN" -np 2 plan "$SMALL" >/dev/null 2>"$TMP/mlp.err"
rc=$?
check "the MLP: refused with exit 2 (got $rc)" [ $rc -eq 2 ]
check "... saying its size follows its data" grep -q "follows its data's files" "$TMP/mlp.err"
"$DDPRUN" plan -np 2 >/dev/null 2>"$TMP/none.err"
rc=$?
check "no config: exit 2 (got $rc)" [ $rc -eq 2 ]
finish
