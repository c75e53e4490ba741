# hf_family.sh — sourced by the Llama family kinds' Hugging Face launcher tests (test_hf_qwen2.sh,
# test_hf_qwen3.sh), after lib.sh: the part of them that is the same for every kind (never run).
#
# trained_round_trip RUN TITLE HF DATA: RUN is the test's launcher (RUN NP RUNDIR [overrides...]),
# TITLE the kind in messages. Two training steps at np 2 from the folder HF change its weights;
# exported, imported back with a step that changes nothing ($STILL) and exported again, the files
# are the same; `ddprun generate` draws from the trained model with DATA's tokenizer. The runs go
# into $TMP/t, $TMP/tx, $TMP/r and $TMP/rx.
trained_round_trip() {
    local run=$1 title=$2 hf=$3 data=$4
    "$run" 2 "$TMP/t" checkpoint.init_from="$hf" >"$TMP/t.log" 2>&1
    check "np=2: two training steps from the fixture" [ $? -eq 0 ]
    "$DDPRUN" ckpt export --format hf "$TMP/t/checkpoints/ckpt-00000002.ddp" "$TMP/tx" >/dev/null 2>&1
    check "exported" [ $? -eq 0 ]
    check "training changed the weights" bash -c "! cmp -s '$TMP/tx/model.safetensors' '$hf/model.safetensors'"
    "$run" 1 "$TMP/r" "${STILL[@]}" checkpoint.init_from="$TMP/tx" >"$TMP/r.log" 2>&1
    check "imported back" [ $? -eq 0 ]
    "$DDPRUN" ckpt export --format hf "$TMP/r/checkpoints/ckpt-00000001.ddp" "$TMP/rx" >/dev/null 2>&1
    check "exported again: the same model.safetensors" cmp "$TMP/rx/model.safetensors" "$TMP/tx/model.safetensors"
    check "and config.json" cmp "$TMP/rx/config.json" "$TMP/tx/config.json"
    "$DDPRUN" generate "$TMP/t/checkpoints/ckpt-00000002.ddp" --tokenizer "$data/tokenizer.bin" --prompt "In the" \
        --tokens 8 --seed 1 >"$TMP/gen.txt" 2>"$TMP/gen.err"
    check "generate draws from the trained $title (exit $?)" [ -s "$TMP/gen.txt" ]
}
