#!/usr/bin/env bash
# run.tensorboard's event file (runtime/tensorboard/event_file.c, launcher/trainer/train_tb.c), read
# back by the tensorboard package's own reader (tb_read.py), an outside referee that checks every
# record's CRC-32Cs: a finished GPT-2 run at np 2 holds the progress lines' values at their steps
# (those metrics.jsonl has), every rank's figures, the val loss, the checkpoint times and the text
# samples as the text plugin's (UTF-8, each ill-formed part of a byte-level sample U+FFFD), the
# checkpoint figures at the steps saved; after a rank is killed and the job restarted from an
# earlier checkpoint, each step once, the restarted attempt's (metrics.jsonl marks the resume; a
# line an attempt left cut short is removed by the next), and
# so after a restart from step 0 (no checkpoint yet); a
# copy cut inside its last record, or inside a record's header, still gives every whole record; a
# running job's file is read while it trains. Exits 77 (skipped)
# only when the tensorboard package is neither installed nor installable.
source "$(dirname "$0")/../../lib.sh"
if ! python3 -c "import tensorboard" 2>/dev/null; then
    python3 -m pip install -q tensorboard 2>/dev/null || python3 -m pip install -q --break-system-packages tensorboard \
        2>/dev/null || { echo "SKIP: the tensorboard package cannot be installed"; exit 77; }
fi
READ=$DDP_SRC/tests/launcher/trainer/tb_read.py
TINY=$DDP_SRC/tests/launcher/trainer/gpt2_tiny.yaml
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$DDP_SRC/README.md" "$TMP/data" >/dev/null
GPT=(data.path="$TMP/data" run.tensorboard=true train.log_every=5 train.eval=true train.eval_every=10
     train.sample_every=10 train.sample_tokens=16 checkpoint.every_steps=10 optimizer.grad_clip=1.0)

"$DDPRUN" -np 2 "$TINY" run.dir="$TMP/done" "${GPT[@]}" train.max_steps=30 >"$TMP/done.log" 2>&1
check "finished run: the job completes" [ $? -eq 0 ]
files=("$TMP"/done/tensorboard/events.out.tfevents.*)
check "finished run: one event file in run.dir/tensorboard" eval '[ ${#files[@]} -eq 1 ] && [ -s "${files[0]}" ]'
python3 "$READ" "${files[0]}" >"$TMP/done.json"
check "finished run: tensorboard reads it" [ $? -eq 0 ]
check "finished run: values, steps and tags as metrics.jsonl and the log have them" \
    python3 - "$TMP/done.json" "$TMP/done/metrics.jsonl" "$TMP/done.log" <<'PY'
import json, math, sys
tb = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2])]
# byte tokens: the samples' bytes as they are, each ill-formed part of them U+FFFD in TensorBoard
log = open(sys.argv[3], "rb").read().decode("utf-8", errors="replace")
s = tb["scalars"]
def same(tag, want, places=None):  # float32 of metrics.jsonl's %.6g (5e-6 relative), or %.{places}f
    got = s.get(tag)
    assert got is not None, (tag, sorted(s))
    assert [g[0] for g in got] == [w[0] for w in want], (tag, got, want)
    for (_, g), (_, w) in zip(got, want):
        assert math.isclose(g, w, rel_tol=1e-5, abs_tol=0 if places is None else 10 ** -places), (tag, g, w)
train = [l for l in lines if l["kind"] == "train"]
assert [l["step"] for l in train] == [5, 10, 15, 20, 25, 30]
for key, tag, places in [("loss", "train/loss", None), ("lr", "train/lr", None), ("grad_norm", "train/grad_norm", None),
                         ("tokens_per_s", "train/tokens_per_s", 1), ("samples_per_s", "train/samples_per_s", 1),
                         ("ms_per_step", "train/ms_per_step", 4), ("comm_exposed_ms", "train/comm_exposed_ms", 4)]:
    same(tag, [(l["step"], l[key]) for l in train], places)
for r in (0, 1):
    for key, name, places in [("step_ms", "step_ms", 4), ("wait_ms", "wait_ms", 4), ("data_ms", "data_ms", 4),
                              ("peak_mib", "peak_mem_mib", 2)]:
        same(f"rank{r}/{name}", [(l["step"], l["ranks"][r][key]) for l in train], places)
same("train/peak_mem_mib", [(l["step"], max(x["peak_mib"] for x in l["ranks"])) for l in train], 2)
assert "train/mfu" not in s and "train/acc" not in s  # no peak known on the CPU; not a classifier
evals = [l for l in lines if l["kind"] == "eval"]
same("eval/val_loss", [(l["step"], l["val_loss"]) for l in evals])
# at the steps saved, whenever the background write ended
assert [e[0] for e in s["checkpoint/write_s"]] == [10, 20, 30] and all(v > 0 for _, v in s["checkpoint/write_s"]), \
    s["checkpoint/write_s"]
assert all(v > 0 for _, v in s["checkpoint/mb"]) and "checkpoint/stall_ms" in s
texts = tb["texts"]["samples/text"]
assert [t[0] for t in texts] == [10, 20, 30], texts
assert tb["text_plugin"]["samples/text"] == "text"
for step, text in texts:
    assert f"sample at step {step}: {text.splitlines()[0] if text.strip() else ''}" in log, (step, text)
PY

# a rank killed after step 27, the job restarted from step 20's checkpoint (or step 10's, where the
# background write of 20 had not ended when rank 0 was killed too): the steps after it trained again
DDP_TEST_FAULT=kill:1:27 "$DDPRUN" --max-restarts 1 -np 2 "$TINY" run.dir="$TMP/re" "${GPT[@]}" train.max_steps=30 \
    >"$TMP/re.log" 2>&1
check "restart: the job completes after one restart (exit $?)" [ $? -eq 0 ]
refiles=("$TMP"/re/tensorboard/events.out.tfevents.*)
check "restart: an event file per attempt" [ ${#refiles[@]} -eq 2 ]
python3 "$READ" "$TMP/re/tensorboard" >"$TMP/re.json"
check "restart: tensorboard shows each step once, the restarted attempt's (a SessionLog START after the resume)" \
    python3 - "$TMP/re.json" "$TMP/re/metrics.jsonl" <<'PY'
import json, math, sys
tb = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2])]
at = [i for i, l in enumerate(lines) if l["kind"] == "resume"]
assert len(at) == 1 and lines[at[0]]["step"] in (10, 20), [l for l in lines if l["kind"] == "resume"]
resumed = lines[at[0]]["step"]
first = [l["step"] for l in lines[:at[0]] if l["kind"] == "train"]
assert first == [5, 10, 15, 20, 25], first  # step 25's line is the first attempt's, trained again after
kept = [l for l in lines[:at[0]] if l["kind"] == "train" and l["step"] <= resumed] + \
       [l for l in lines[at[0]:] if l["kind"] == "train"]
for tag, key in [("train/loss", "loss"), ("train/ms_per_step", "ms_per_step")]:
    got = tb["scalars"][tag]
    assert [g[0] for g in got] == [l["step"] for l in kept] == [5, 10, 15, 20, 25, 30], (tag, got)
    for (_, v), l in zip(got, kept):
        assert math.isclose(v, l[key], rel_tol=1e-5, abs_tol=1e-4), (tag, v, l)
assert [t[0] for t in tb["texts"]["samples/text"]] == [10, 20, 30], tb["texts"]["samples/text"]
PY

# a rank killed after step 7, before the first checkpoint: the restarted attempt trains from step 0
# again: its file's SessionLog START at step 1 leaves the steps once, its own, and metrics.jsonl
# marks the restart as a resume from step 0
DDP_TEST_FAULT=kill:1:7 "$DDPRUN" --max-restarts 1 -np 2 "$TINY" run.dir="$TMP/re0" "${GPT[@]}" train.max_steps=10 \
    >"$TMP/re0.log" 2>&1
check "restart from step 0: the job completes after one restart (exit $?)" [ $? -eq 0 ]
python3 "$READ" "$TMP/re0/tensorboard" >"$TMP/re0.json"
check "restart from step 0: tensorboard shows each step once, the restarted attempt's" \
    python3 - "$TMP/re0.json" "$TMP/re0/metrics.jsonl" <<'PY'
import json, math, sys
tb = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2])]
assert [(l["kind"], l["step"]) for l in lines if l["kind"] in ("train", "resume")] == \
    [("train", 5), ("resume", 0), ("train", 5), ("train", 10)], lines  # attempt 1's step 5, then attempt 2's
train = [l for l in lines if l["kind"] == "train"]
got = tb["scalars"]["train/loss"]
assert [g[0] for g in got] == [5, 10], got
assert math.isclose(got[0][1], train[1]["loss"], rel_tol=1e-5, abs_tol=1e-4), (got, train)
PY

# an attempt ended while it wrote a line left it cut: the next attempt removes it, saying so, so
# that its own first line does not join it into a line that is no JSON
printf '{"kind":"train","step":11,"lo' >>"$TMP/re0/metrics.jsonl"
"$DDPRUN" -np 2 "$TINY" run.dir="$TMP/re0" "${GPT[@]}" train.max_steps=15 checkpoint.resume=auto >"$TMP/cut.log" 2>&1
check "a line cut short at the end of metrics.jsonl: the resumed job runs (exit $?)" [ $? -eq 0 ]
check "... removes it, saying so" grep -q "metrics.jsonl ended in a line cut short (29 bytes" "$TMP/cut.log"
check "... and every line of metrics.jsonl is JSON, the resume's included" python3 -c "
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert [l['step'] for l in lines if l['kind'] == 'resume'][-1] == 10, lines" "$TMP/re0/metrics.jsonl"

# cut copies: inside the last record's data, and 3 bytes into the header of a record
f=${files[0]}
size=$(stat -c %s "$f")
head -c $((size - 5)) "$f" >"$TMP/cut-data.tfevents"
python3 "$READ" "$TMP/cut-data.tfevents" >"$TMP/cut-data.json" 2>"$TMP/cut-data.err"
check "cut inside the last record: tensorboard still reads the file" [ $? -eq 0 ]
check "cut inside the last record: every whole record, the last one not" python3 - "$TMP/done.json" "$TMP/cut-data.json" <<'PY'
import json, sys
whole, cut = (json.load(open(p)) for p in sys.argv[1:])
last = max(max(v[0] for v in vals) for vals in whole["scalars"].values())
n_whole = sum(len(v) for v in whole["scalars"].values()) + sum(len(v) for v in whole["texts"].values())
n_cut = sum(len(v) for v in cut["scalars"].values()) + sum(len(v) for v in cut["texts"].values())
assert 0 < n_cut < n_whole, (n_cut, n_whole)
for tag, vals in cut["scalars"].items():
    assert vals == whole["scalars"][tag][:len(vals)], tag
assert cut["scalars"]["train/loss"][:5] == whole["scalars"]["train/loss"][:5]
PY
# the first record (file_version) is 8 + 4 + 23 + 4 = 39 bytes; the second starts there
python3 - "$f" "$TMP/cut-header.tfevents" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
pos, ends = 0, []
while pos < len(data):
    n = struct.unpack("<Q", data[pos:pos + 8])[0]
    pos += 8 + 4 + n + 4
    ends.append(pos)
assert ends[-1] == len(data), "the file ends with a whole record"
open(sys.argv[2], "wb").write(data[:ends[5] + 3])   # 6 whole records, then 3 bytes of a header
PY
python3 "$READ" "$TMP/cut-header.tfevents" >"$TMP/cut-header.json" 2>/dev/null
check "cut inside a header: tensorboard reads the whole records before it" python3 - "$TMP/cut-header.json" <<'PY'
import json, sys
cut = json.load(open(sys.argv[1]))
n = sum(len(v) for v in cut["scalars"].values()) + sum(len(v) for v in cut["texts"].values())
assert n > 0 and cut["scalars"]["train/loss"][0][0] == 5, cut["scalars"].get("train/loss")
PY

# a running job's file, read while it trains
"$DDPRUN" -np 2 "$TINY" run.dir="$TMP/live" "${GPT[@]}" train.max_steps=100000 train.eval=false \
    checkpoint.every_steps=0 >"$TMP/live.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
    grep -q '"step":20,' "$TMP/live/metrics.jsonl" 2>/dev/null && break
    sleep 0.1
done
live=("$TMP"/live/tensorboard/events.out.tfevents.*)
python3 "$READ" "${live[0]}" >"$TMP/live.json"
check "live: tensorboard reads the file of a running job" [ $? -eq 0 ]
check "live: the job was still training when it was read" kill -0 $pid
check "live: the file has the progress lines written so far, step 20 among them" python3 - "$TMP/live.json" <<'PY'
import json, sys
steps = [v[0] for v in json.load(open(sys.argv[1]))["scalars"]["train/loss"]]
assert steps[:4] == [5, 10, 15, 20], steps
PY
kill -TERM $pid
wait $pid
check "live: stopped by a signal, exits 75" [ $? -eq 75 ]
finish
