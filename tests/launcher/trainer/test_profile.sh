#!/usr/bin/env bash
# train.profile_steps end to end under real mpirun, on the small GPT-2 job (byte tokens of the
# Debian license texts), 8 steps, the window steps 3-5 (train.profile_start 2):
#  - np=1: run.dir/profile.json holds every device op of a GPT-2 step (GPT2_STEP_OPS below), every
#    row's time is > 0, the ops' sum per step is at most the step time and at least OPS_FRACTION of
#    it, nothing was dropped; the table is printed; trace-rank0.json parses with the expected tracks;
#  - np=2: trace-rank0.json and trace-rank1.json parse, each with the four tracks, the step ranges
#    and every bucket's all-reduce on the communication track (with ~270 buckets, as many lanes as
#    run at once, each nested; with ddp.zero 3: the units'
#    parameter all-gathers, the next unit's in flight across compute); scripts/trace-merge puts both ranks
#    in one file, refuses to overwrite it without --force, and replaces it with --force;
#  - a checkpoint write that began before the window opened is traced from time 0;
#  - a window past the end of training is cut to what runs, and the log says so;
#  - profiling off (the default) writes no profile files;
#  - with argument `cuda` (emulated build), instead of the above: np=2 on device=cuda
#    ddp.backend=nccl, the same checks of profile.json and the traces, the collectives stamped on
#    the NCCL stream, and no step makes the host wait for the GPU (host_waits 0 in every log line
#    with the profiler recording).
# OPS_FRACTION: outside the ops a CPU step only gathers a 16 x 25-token batch and does the
# reducer's and the loop's bookkeeping (microseconds against milliseconds of GEMMs at np=1), and
# other processes' preemption falls inside and outside the ops in proportion to the time spent
# there; so half is far below what any machine gives (0.9 and more here). The emulator runs queued
# work only when the host waits and times each op as its drain runs it; the host's enqueueing
# outside the drains is short against the emulated kernels (0.97 here).
source "$(dirname "$0")/../../lib.sh"
SMALL=$DDP_SRC/tests/launcher/trainer/gpt2_small.yaml
# Every device op one fp32 GPT-2 training step runs (precision fp32, AdamW, clipping): the names
# the profiler's table shows. The attention ops here change when attention becomes one op pair.
GPT2_STEP_OPS="upload embedding_forward layernorm_forward gemm_bias gemm_bias_gelu attention_forward residual_layernorm_forward
    softmax_xent gemm bias_grad gemm_gelu_backward layernorm_backward attention_backward embedding_backward fill
    sumsq clip_scale adamw_step"
OPS_FRACTION_CPU=0.5
OPS_FRACTION_EMU=0.5
DATA=$TMP/bytes
cat /usr/share/common-licenses/{GPL-3,Apache-2.0,LGPL-3,MPL-2.0,Artistic} >"$TMP/corpus.txt"
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$TMP/corpus.txt" "$DATA" >"$TMP/prepare.log" 2>&1
check "prepare-text writes the byte-level shards" [ -f "$DATA/train_000000.bin" ]
RUN=(data.path="$DATA" train.max_steps=8 train.log_every=1 train.profile_start=2)

# profiled NAME NP [overrides...]: the small job, 3 steps profiled
profiled() {
    local name=$1 np=$2; shift 2
    timeout 300 mpirun -np "$np" --oversubscribe --bind-to none "$DDPRUN_WORKER" "$SMALL" run.dir="$TMP/$name" \
        "${RUN[@]}" train.profile_steps=3 "$@" >"$TMP/$name.log" 2>&1
}

# profile_ok RUNDIR STEPS MIN_FRACTION: profile.json's window, ops, times and sums
profile_ok() {
    python3 - "$1/profile.json" "$2" "$3" "$GPT2_STEP_OPS" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
steps, frac, want = int(sys.argv[2]), float(sys.argv[3]), sys.argv[4].split()
ops = [r for r in p["ops"] if r["track"] == "compute" and r["family"] != "phase"]
names = {r["key"].split()[0] for r in ops}
missing = [o for o in want if o not in names]
bad = [r["key"] for r in p["ops"] + p["families"] if not r["ms_per_step"] > 0]
step, in_ops = p["step_ms"], p["ops_ms_per_step"]
summed = sum(r["ms_per_step"] for r in ops)
print(f"{p['steps']} steps of {step:.3f} ms, {in_ops:.3f} ms in {len(ops)} op rows ({in_ops / step:.2f}), "
      f"missing {missing}, rows not > 0 {bad}, dropped {p['dropped']}")
ok = (p["steps"] == steps and not missing and not bad and p["dropped"] == 0 and abs(summed - in_ops) <= 1e-3 * in_ops
      and in_ops <= step * (1 + 1e-9) + 1e-6 and in_ops >= frac * step)
sys.exit(0 if ok else 1)
PY
}

# trace_ok FILE RANK COMM_NAME: the trace parses; its tracks, steps, ops, the buckets' collectives, and every
# track's ranges nest (Perfetto draws a thread's ranges only then)
trace_ok() {
    python3 - "$1" "$2" "$3" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
rank, comm = int(sys.argv[2]), sys.argv[3]
tracks = {e["args"]["name"]: e["tid"] for e in events if e.get("name") == "thread_name"}
want = ["steps", "compute stream", "communication stream", "host", "checkpoint writer"]
x = [e for e in events if e["ph"] == "X"]
steps = [e for e in x if e.get("cat") == "step"]
on = lambda track: [e for e in x if e["tid"] == tracks.get(track)]
comm_tids = {tid for name, tid in tracks.items() if name.startswith("communication stream")}
colls = [e for e in x if e["tid"] in comm_tids and e["name"].startswith(comm + " bucket ")]
# Perfetto shows a thread's ranges only when they nest: none ends inside a later one. ts and dur are
# written to the nanosecond from the same stamps, so sums of them are exact to float64's error on
# numbers below 1e10 us (1e-6 us); a range rounded past its neighbour is off by 1e-3.
SLACK_US = 1e-6
def nested(tid):
    open_ends = []
    for e in sorted((e for e in x if e["tid"] == tid), key=lambda e: (e["ts"], -e["dur"])):
        while open_ends and open_ends[-1] <= e["ts"] + SLACK_US:
            open_ends.pop()
        if open_ends and e["ts"] + e["dur"] > open_ends[-1] + SLACK_US:
            print(f"tid {tid}: {e['name']} at {e['ts']} ends past the range it begins in")
            return False
        open_ends.append(e["ts"] + e["dur"])
    return True
buckets = {e["name"].split(" (")[0] for e in colls}
print(f"rank {rank}: tracks {sorted(tracks)}, {len(steps)} steps, {len(on('compute stream'))} compute ranges, "
      f"{len(colls)} {comm} ranges over {len(buckets)} buckets")
ok = (all(t in tracks for t in want) and all(e["pid"] == rank + 1 and e["tid"] >= 1 for e in events) and len(steps) == 3
      and on("compute stream") and all(e["dur"] >= 0 for e in x) and on("host")
      and (comm == "-" or (colls and len(colls) % 3 == 0)) and all(nested(tid) for tid in set(tracks.values())))
sys.exit(0 if ok else 1)
PY
}

if [ "${1:-}" = cuda ]; then
    export DDP_CUDA_EMU_DEVICES=2
    profiled gpu 2 device=cuda ddp.backend=nccl
    check "cuda+nccl np=2 profiled run completes" [ $? -eq 0 ]
    check "cuda: the run used the CUDA device and NCCL" grep -q "device CUDA emulator.*gradient backend nccl" \
        "$TMP/gpu.log"
    check "cuda: profile.json: every GPT-2 op, times > 0, ops within [$OPS_FRACTION_EMU, 1] of the step" \
        profile_ok "$TMP/gpu" 3 $OPS_FRACTION_EMU
    for r in 0 1; do
        check "cuda: trace-rank$r.json: tracks, steps, every bucket's all-reduce on the NCCL stream" \
            trace_ok "$TMP/gpu/trace-rank$r.json" $r allreduce
    done
    check "cuda: no host wait inside any step while recording (host_waits 0 on every line)" python3 -c '
import json, sys
waits = [json.loads(l)["host_waits"] for l in open(sys.argv[1]) if "\"train\"" in l]
print(f"host waits per step: {waits}")
sys.exit(0 if len(waits) == 8 and not any(waits) else 1)' "$TMP/gpu/metrics.jsonl"
    finish
    exit
fi

# --- np=1 on the CPU, in a run.dir an attempt at np=3 left traces in ---
mkdir -p "$TMP/cpu1" && echo '{"traceEvents":[]}' | tee "$TMP/cpu1/trace-rank1.json" >"$TMP/cpu1/trace-rank2.json"
profiled cpu1 1
check "np=1 profiled run completes" [ $? -eq 0 ]
check "np=1: the traces of ranks 1 and 2 an earlier attempt left are gone (trace-merge would take them)" \
    [ ! -e "$TMP/cpu1/trace-rank1.json" -a ! -e "$TMP/cpu1/trace-rank2.json" ]
check "np=1: profile.json: every GPT-2 op, times > 0, ops within [$OPS_FRACTION_CPU, 1] of the step" \
    profile_ok "$TMP/cpu1" 3 $OPS_FRACTION_CPU
check "np=1: the table is printed at the end" grep -q "profile: step .* ms, in device ops" "$TMP/cpu1.log"
check "np=1: trace-rank0.json parses with the tracks" trace_ok "$TMP/cpu1/trace-rank0.json" 0 -

# --- np=2 on the CPU, the traces merged ---
profiled cpu2 2
check "np=2 profiled run completes" [ $? -eq 0 ]
check "np=2: profile.json: every GPT-2 op, times > 0, ops at most the step" profile_ok "$TMP/cpu2" 3 0
for r in 0 1; do
    check "np=2: trace-rank$r.json: tracks, steps, every bucket's all-reduce" \
        trace_ok "$TMP/cpu2/trace-rank$r.json" $r allreduce
done
# --- a checkpoint write running when the window opens (step 2's, made 1 s slower; the window opens
# at step 3) is on the checkpoint writer's track from time 0: a trace holds no negative times
DDP_TEST_FAULT=slow-write:0:2:1 profiled ckptwin 1 checkpoint.every_steps=2
check "np=1, a checkpoint write across the window's start: profiled run completes" [ $? -eq 0 ]
check "... the slowed write is traced (its range within the window), and no range starts before time 0" python3 -c '
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
tracks = {e["args"]["name"]: e["tid"] for e in events if e.get("name") == "thread_name"}
x = [e for e in events if e["ph"] == "X"]
writes = [(e["ts"], e["dur"]) for e in x if e["tid"] == tracks["checkpoint writer"] and e["name"] == "checkpoint write"]
earliest = min(e["ts"] for e in x)
print(f"checkpoint writes (ts, dur) {writes}, earliest range {earliest}")
sys.exit(0 if any(d >= 0.9e6 for _, d in writes) and earliest >= 0 else 1)' "$TMP/ckptwin/trace-rank0.json"

# --- np=2 with ~270 buckets: on MPI a bucket's range lasts from its issue until a test or wait
# finds it done, so many run at once; the trace puts them on as many lanes as run at once at most
# (first fit in order of start), and every lane's ranges nest
profiled many 2 ddp.bucket_mb=0.0005 ddp.first_bucket_mb=0.0002
check "np=2, ~270 buckets: profiled run completes" [ $? -eq 0 ]
check "np=2, ~270 buckets: trace-rank0.json: every bucket's all-reduce, every lane's ranges nest" \
    trace_ok "$TMP/many/trace-rank0.json" 0 allreduce
check "np=2, ~270 buckets: as many communication lanes as ranges in flight at once" python3 -c '
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
comm = [e for e in events if e["ph"] == "X" and names.get(e["tid"], "").startswith("communication stream")]
lanes = len({e["tid"] for e in comm})
edges = sorted([(e["ts"], 1) for e in comm] + [(e["ts"] + e["dur"], -1) for e in comm])  # an end before a start at one time
most = at_once = 0
for _, d in edges:
    at_once += d
    most = max(most, at_once)
print(f"{len(comm)} ranges, at most {most} at once, on {lanes} lanes")
sys.exit(0 if lanes == most else 1)' "$TMP/many/trace-rank0.json"

# --- ZeRO-3 at np=2: each unit's parameter all-gather on the communication track, the next unit's
# running while a unit computes (in flight across at least one compute range it did not wait for)
profiled zero3 2 ddp.zero=3
check "np=2 ddp.zero=3 profiled run completes" [ $? -eq 0 ]
check "ZeRO-3: the units' all-gathers overlap compute on rank 0's trace" python3 - "$TMP/zero3/trace-rank0.json" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
tracks = {e["args"]["name"]: e["tid"] for e in events if e.get("name") == "thread_name"}
x = [e for e in events if e["ph"] == "X"]
comm_tids = {tid for name, tid in tracks.items() if name.startswith("communication stream")}
gathers = [e for e in x if e["tid"] in comm_tids and e["name"].startswith("all-gather unit ")]
compute = [e for e in x if e["tid"] == tracks["compute stream"]]
inside = lambda c, g: g["ts"] < c["ts"] and c["ts"] + c["dur"] < g["ts"] + g["dur"]
hidden = [g for g in gathers if any(inside(c, g) for c in compute)]
print(f"{len(gathers)} unit all-gathers, {len(hidden)} with a whole compute range inside")
sys.exit(0 if gathers and len(hidden) >= len(gathers) // 4 else 1)
PY

MERGE=$DDP_SRC/scripts/trace-merge
"$MERGE" "$TMP/merged.json" "$TMP"/cpu2/trace-rank{0,1}.json >"$TMP/merge.log" 2>&1
check "trace-merge writes one file" [ $? -eq 0 ]
check "the merged trace parses and holds ranks 0 and 1" python3 -c '
import json, sys
pids = {e["pid"] for e in json.load(open(sys.argv[1]))["traceEvents"]}
sys.exit(0 if pids == {1, 2} else 1)' "$TMP/merged.json"
cp "$TMP/merged.json" "$TMP/merged.before"
"$MERGE" "$TMP/merged.json" "$TMP/cpu2/trace-rank0.json" >"$TMP/merge2.log" 2>&1
check "trace-merge refuses an existing output without --force" [ $? -ne 0 ]
check "... and leaves it as it was" cmp -s "$TMP/merged.json" "$TMP/merged.before"
"$MERGE" --force "$TMP/merged.json" "$TMP/cpu2/trace-rank0.json" >/dev/null 2>&1
check "with --force it replaces it" python3 -c '
import json, sys
sys.exit(0 if {e["pid"] for e in json.load(open(sys.argv[1]))["traceEvents"]} == {1} else 1)' "$TMP/merged.json"
"$MERGE" "$TMP/twice.json" "$TMP/cpu2/trace-rank0.json" "$TMP/cpu2/trace-rank0.json" >/dev/null 2>&1
check "trace-merge refuses two traces of one rank" [ $? -ne 0 -a ! -e "$TMP/twice.json" ]

# --- the window cut to what runs, and profiling off ---
profiled cut 1 train.profile_steps=10
check "a window past the end runs" [ $? -eq 0 ]
check "... cut to the 6 steps left, and said so" grep -q "train.profile_steps 10 cut to 6" "$TMP/cut.log"
check "... profile.json covers those 6 steps" python3 -c '
import json, sys
sys.exit(0 if json.load(open(sys.argv[1]))["steps"] == 6 else 1)' "$TMP/cut/profile.json"
timeout 300 mpirun -np 1 "$DDPRUN_WORKER" "$SMALL" run.dir="$TMP/off" "${RUN[@]}" >"$TMP/off.log" 2>&1
check "profiling off: the run completes" [ $? -eq 0 ]
check "profiling off: no profile files" [ -z "$(ls "$TMP/off" | grep -E 'profile|trace')" ]
check "profiling off: no profile lines" bash -c "! grep -q 'profile:' '$TMP/off.log'"

finish
