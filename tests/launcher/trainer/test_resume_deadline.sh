#!/usr/bin/env bash
# A resume may take longer than any step's collective: rank 0 reading a checkpoint whole while the
# others wait for its broadcast, a rank reading its pieces of a sharded set while the others wait
# for its verdict. Those waits have checkpoint.resume_timeout_s instead of ddp.timeout_s
# (DDP_TEST_FAULT=slow-resume holds the reader after it read step 2's checkpoint):
#  - a resume 6 s slower than a 2 s ddp.timeout_s trains on, whole file (rank 0 slow) and sharded
#    set (rank 1 slow), with no deadline's verdict;
#  - the resume's deadline still ends a resume held past it, naming the rank that did not arrive;
#  - a stop requested during such a resume is answered after it (exit 75), not ended by ddp.timeout_s;
#  - training's collectives have ddp.timeout_s again: a rank held after a resumed step is named
#    within it, not within the resume's 600 s.
source "$(dirname "$0")/../../lib.sh"
TINY=$DDP_SRC/tests/launcher/trainer/gpt2_tiny.yaml
DATA=$TMP/data
"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$DDP_SRC/README.md" "$DATA" >/dev/null
check "prepare-text: byte-token data" [ -f "$DATA/tokenizer.bin" ]

# job NAME [overrides...]: np 2 into $TMP/NAME (log $TMP/NAME.log); rc, took (seconds)
job() {
    local name=$1 t0=$SECONDS
    shift
    timeout 120 "$DDPRUN" -np 2 "$TINY" run.dir="$TMP/$name" data.path="$DATA" "$@" >"$TMP/$name.log" 2>&1
    rc=$? took=$((SECONDS - t0))
}
verdict() { grep -q 'ddp.timeout_s: ' "$TMP/$1.log"; }

for kind in whole sharded; do
    job "$kind" train.max_steps=2 checkpoint.every_steps=2 checkpoint.sharded=$([ $kind = sharded ] && echo true || echo false)
    check "$kind: step 2's checkpoint written" bash -c "[ $rc -eq 0 ] && ls '$TMP/$kind/checkpoints' | grep -q 00000002"
done
for name in slow held after stopped; do cp -r "$TMP/whole" "$TMP/$name"; done
cp -r "$TMP/sharded" "$TMP/sharded_slow"

# the reader 6 s slow under a 2 s ddp.timeout_s: the resume's own deadline covers it
DDP_TEST_FAULT=slow-resume:0:2:6 job slow checkpoint.resume=auto train.max_steps=4 ddp.timeout_s=2
check "whole file, rank 0 reading 6 s: trains on to step 4 (rc $rc)" \
    bash -c "[ $rc -eq 0 ] && grep -q 'step 4/4' '$TMP/slow.log'"
check "... no deadline's verdict" bash -c "! grep -q 'ddp.timeout_s: ' '$TMP/slow.log'"
DDP_TEST_FAULT=slow-resume:1:2:6 job sharded_slow checkpoint.resume=auto checkpoint.sharded=true train.max_steps=4 \
    ddp.timeout_s=2
check "sharded set, rank 1 reading its pieces 6 s: trains on to step 4 (rc $rc)" \
    bash -c "[ $rc -eq 0 ] && grep -q 'step 4/4' '$TMP/sharded_slow.log'"
check "... no deadline's verdict" bash -c "! grep -q 'ddp.timeout_s: ' '$TMP/sharded_slow.log'"

# held past the resume's deadline (3 s): named, as at any deadline
DDP_TEST_FAULT=slow-resume:0:2:60 job held checkpoint.resume=auto train.max_steps=4 ddp.timeout_s=2 \
    checkpoint.resume_timeout_s=3
check "held 60 s past a 3 s checkpoint.resume_timeout_s: the job ends (rc $rc) within 30 s (took $took s)" \
    bash -c "[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -le 30 ]"
check "... the verdict names the resume's deadline and rank 0" \
    grep -q "ddp.timeout_s: .*checkpoint resume) did not complete within 3 s.*Not arrived: rank 0" "$TMP/held.log"
check "... and ddprun's last line names the resume's key" grep -q \
    "^ddprun: job failed: the resume's collective deadline (checkpoint.resume_timeout_s) passed" "$TMP/held.log"

# a stop requested during a resume slower than ddp.timeout_s waits for the resume, then is answered:
# the job saves and exits 75, not 1 two seconds after the request
DDP_TEST_FAULT=slow-resume:0:2:10 "$DDPRUN" -np 2 "$TINY" run.dir="$TMP/stopped" data.path="$DATA" \
    checkpoint.resume=auto train.max_steps=4 ddp.timeout_s=2 >"$TMP/stopped.log" 2>&1 &
pid=$!
sleep 4
kill -TERM $pid
t0=$SECONDS
wait $pid
rc=$? took=$((SECONDS - t0))
check "stopped 4 s into a 10 s resume under a 2 s ddp.timeout_s: exit 75 (got $rc, after $took s)" [ $rc -eq 75 ]
check "... the stop answered, not ended by its deadline" bash -c "! grep -q 'stop request was not answered' \
'$TMP/stopped.log'"

# after the resume, a rank held after step 3 is named within ddp.timeout_s (2 s), not 600 s
DDP_TEST_FAULT=sleep:1:3:60 job after checkpoint.resume=auto train.max_steps=6 ddp.timeout_s=2 \
    checkpoint.resume_timeout_s=600
check "held after a resumed step: the job ends (rc $rc) within 30 s (took $took s)" \
    bash -c "[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -le 30 ]"
check "... under ddp.timeout_s, naming rank 1" \
    grep -q "ddp.timeout_s: .*step [34]) did not complete within 2 s.*Not arrived: rank 1" "$TMP/after.log"
check "... and ddprun's last line names ddp.timeout_s" grep -q \
    "^ddprun: job failed: the collective deadline (ddp.timeout_s) passed" "$TMP/after.log"
finish
