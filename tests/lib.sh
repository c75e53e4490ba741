# tests/lib.sh — shared helpers for the shell integration tests (sourced, never run).
# Needs DDPRUN, DDPRUN_WORKER, DDP_SRC from tests/meson.build's prog_env.
set -uo pipefail
FAILED=0
CHECKS=0
TMP=$(mktemp -d /tmp/ddptest.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
CKPT_COMPARE=${CKPT_COMPARE:-$(dirname "$DDPRUN")/../tests/ckpt_compare}
SMALL=$DDP_SRC/tests/launcher/trainer/ddp_small.yaml
# the tests' jobs run on this machine as it is, also when the tests run inside a Slurm allocation
# (whose slots mpirun and ddprun would take instead)
unset SLURM_JOB_ID SLURM_JOBID SLURM_TASKS_PER_NODE

check() { # description, command...
    local what=$1; shift
    CHECKS=$((CHECKS + 1))
    if "$@"; then
        echo "ok - $what"
    else
        echo "FAIL - $what"
        FAILED=$((FAILED + 1))
    fi
}

# distance A B PREFIX: ckpt_compare's relative distance of checkpoints A and B on PREFIX (the largest
# difference over the largest value of A)
distance() { "$CKPT_COMPARE" "$1" "$2" "$3" 1 | sed -n 's/^[1-9][0-9]* tensors under.*relative \([0-9.e+-]*\) (tolerance.*/\1/p' | tail -n 1; }
# closer A B C D PREFIX FACTOR: A and B are more than FACTOR times closer on PREFIX than C and D
# (a bound relative to a referee of the same run, where the numerics bound no absolute one); says both
closer() {
    local near far
    near=$(distance "$1" "$2" "$5") far=$(distance "$3" "$4" "$5")
    echo "# distances on $5: $near, against $far (factor $6)"
    [ -n "$near" ] && [ -n "$far" ] && awk -v a="$near" -v b="$far" -v f="$6" 'BEGIN { exit !(a * f < b) }'
}

# worker NP RUNDIR [overrides...]: the worker under plain mpirun (the way srun users run it)
worker() {
    local np=$1 dir=$2; shift 2
    mpirun -np "$np" --oversubscribe --bind-to none "$DDPRUN_WORKER" "$SMALL" run.dir="$dir" "$@"
}

# last_ckpt RUNDIR: path of the newest checkpoint
last_ckpt() { ls "$1"/checkpoints/ckpt-*.ddp 2>/dev/null | sort | tail -n 1; }

# resolved_model_keys RUNDIR KIND KEY...: the values of model.KIND.KEY... RUNDIR/config.resolved.yaml
# holds, space-separated in the order asked (the writer's layout: two-space indents)
resolved_model_keys() {
    local dir=$1 kind=$2; shift 2
    awk -v kind="$kind" -v keys="$*" '$0 ~ "^  " kind ":" {on = 1; next} on && /^    / {v[$1] = $2; next} {on = 0}
         END {n = split(keys, k, " "); for (i = 1; i <= n; i++) printf "%s%s", v[k[i] ":"], i < n ? " " : "\n"}' \
        "$dir/config.resolved.yaml"
}

# resolved_gpt2_shape RUNDIR: the model.gpt2 shape RUNDIR/config.resolved.yaml holds, as
# "n_layer n_head n_embd block_size vocab_size"
resolved_gpt2_shape() { resolved_model_keys "$1" gpt2 n_layer n_head n_embd block_size vocab_size; }

# hf_gpt2_shape DIR: the shape DIR/config.json (a Hugging Face GPT-2 folder) gives, as
# "n_layer n_head n_embd n_positions vocab_size"
hf_gpt2_shape() {
    python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
print(c["n_layer"], c["n_head"], c["n_embd"], c["n_positions"], c["vocab_size"])' "$1/config.json"
}

finish() {
    echo "$CHECKS checks, $FAILED failed"
    [ "$CHECKS" -gt 0 ] && [ "$FAILED" -eq 0 ]
}
