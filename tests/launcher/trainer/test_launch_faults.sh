#!/usr/bin/env bash
# Stop requests that reach ddprun while its job starts, and ddprun itself killed, through the real
# launcher and workers at np 2:
#  - a stop while rank 1 is still loading (DDP_TEST_FAULT=stop-at-start: the rank's wrapper sends
#    ddprun SIGTERM before it can take a stop signal, then takes 2 s more to start)
#  - a stop as soon as ddprun has forked mpirun, before any rank exists
# Each must end with every rank saving a checkpoint and exit 75: no rank killed by the stop signal,
# no stop dropped (the job would train on).
#  - ddprun killed with SIGKILL mid-run (DDP_TEST_FAULT=kill-launcher): mpirun and every rank must
#    end within seconds, not train on with parent 1.
#  - a config file missing on one rank's host only: the job ends at once, that rank naming it; the
#    same file missing on every rank is said once, and different ones each; the data missing on one
#    rank's host only ends the job at once as well, with exit 2; ddprun's report names that rank
#    (the others wait a moment before ending: train_agree_bystander_pause); a rank loading other
#    settings than rank 0's (its host's copy of the config differs) is refused naming them.
# The jobs are long and quiet (no progress lines: a write to a dead ddprun's pipe would end mpirun
# by SIGPIPE and hide orphans); `timeout -s KILL` bounds a job whose stop was lost.
source "$(dirname "$0")/../../lib.sh"
LONG=(train.max_steps=100000 train.log_every=100000)

# child_of PID: the first child process of PID, once it has one (empty if PID ended first)
child_of() {
    local c=
    for _ in $(seq 2000); do
        c=$(pgrep -P "$1" | head -n 1)
        [ -n "$c" ] || ! kill -0 "$1" 2>/dev/null && break
        sleep 0.005
    done
    echo "$c"
}

# stopped_and_saved TAG RC: the job TAG ended by its stop request as README says
stopped_and_saved() {
    local tag=$1 rc=$2
    check "$tag: the job exits 75 (got $rc)" [ "$rc" -eq 75 ]
    check "$tag: a checkpoint was saved" [ -n "$(last_ckpt "$TMP/$tag")" ]
    check "$tag: the ranks stopped by the signal" grep -q "stopped by signal, checkpoint saved" "$TMP/$tag.log"
    check "$tag: no rank was killed" bash -c "! grep -q 'killed by' '$TMP/$tag.log'"
}

DDP_TEST_FAULT=stop-at-start:1:0:2 timeout -s KILL 120 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/loading" "${LONG[@]}" \
    >"$TMP/loading.log" 2>&1
stopped_and_saved loading $?

timeout -s KILL 120 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/early" "${LONG[@]}" >"$TMP/early.log" 2>&1 &
guard=$!
ddprun=$(child_of $guard)
mpirun=$(child_of "$ddprun")
check "early: ddprun started mpirun" [ -n "$mpirun" ]
kill -TERM "$ddprun"
wait $guard
stopped_and_saved early $?

DDP_TEST_FAULT=kill-launcher:1:20 timeout -s KILL 120 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/orphans" "${LONG[@]}" \
    >"$TMP/orphans.log" 2>&1
rc=$?
check "kill-launcher: ddprun was killed by SIGKILL (exit $rc)" [ $rc -eq 137 ]
left=
for _ in $(seq 300); do # 30 s: a hang guard, not a measurement
    left=$(pgrep -f "run.dir=$TMP/orphans" | tr "\n" " ")
    [ -z "$left" ] && break
    sleep 0.1
done
check "mpirun and the ranks end once ddprun is gone (left: ${left:-none})" [ -z "$left" ]
# A config file missing on one rank's host only (rank 1's wrapper names a path that does not exist
# there): the job ends at once with rank 1's own message, not with rank 0 waiting for it in its
# first collective until the job is killed.
cat >"$TMP/rank1-elsewhere.sh" <<EOF
#!/bin/sh
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then shift; exec "$DDPRUN_WORKER" "$TMP/not-on-this-host.yaml" "\$@"; fi
exec "$DDPRUN_WORKER" "\$@"
EOF
chmod +x "$TMP/rank1-elsewhere.sh"
DDPRUN_WORKER="$TMP/rank1-elsewhere.sh" timeout -s KILL 60 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/elsewhere" \
    >"$TMP/elsewhere.log" 2>&1
rc=$?
check "a config missing on rank 1's host: the job ends with a usage error (exit 2, got $rc)" [ $rc -eq 2 ]
check "rank 1 names the missing file" grep -q "rank 1.*not-on-this-host.yaml" "$TMP/elsewhere.log"
check "... and ddprun's report names rank 1, not rank 0 that exited with its status" \
    grep -q "^ddprun: rank 1 on .* exited with code 2" "$TMP/elsewhere.log"
# Every rank given the same missing file: one message, rank 0's; each its own: each says its own.
cat >"$TMP/each-elsewhere.sh" <<EOF
#!/bin/sh
shift; exec "$DDPRUN_WORKER" "$TMP/missing-\${BY_RANK:+\$OMPI_COMM_WORLD_RANK}.yaml" "\$@"
EOF
chmod +x "$TMP/each-elsewhere.sh"
DDPRUN_WORKER="$TMP/each-elsewhere.sh" timeout -s KILL 60 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/same" \
    >"$TMP/same.log" 2>&1
rc=$?
said=$(grep -c "missing-.yaml: cannot read config" "$TMP/same.log")
check "the same config missing on every rank: exit 2 (got $rc), said once ($said)" test "$rc:$said" = 2:1
BY_RANK=1 DDPRUN_WORKER="$TMP/each-elsewhere.sh" timeout -s KILL 60 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/each" \
    >"$TMP/each.log" 2>&1
rc=$?
said=$(grep -c "missing-[01].yaml: cannot read config" "$TMP/each.log")
check "each rank's own config missing: exit 2 (got $rc), each named ($said)" test "$rc:$said" = 2:2
# The data missing on rank 1's host only, found after the ranks agreed on their start: the job
# ends at once with exit 2 and rank 1's message (a rank that fails alone must not wait in
# MPI_Finalize for ranks waiting for it in a collective).
# rank1_job TAG ARGS...: ddprun -np 2 into $TMP/TAG, rank 1's worker given ARGS after the others
# (what its host sees); its status in rc, its output in $TMP/TAG.log
rank1_job() {
    local tag=$1 extra="" a
    shift
    for a in "$@"; do extra+=" $(printf '%q' "$a")"; done
    cat >"$TMP/$tag.sh" <<EOF
#!/bin/sh
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then exec "$DDPRUN_WORKER" "\$@"$extra; fi
exec "$DDPRUN_WORKER" "\$@"
EOF
    chmod +x "$TMP/$tag.sh"
    DDPRUN_WORKER="$TMP/$tag.sh" timeout -s KILL 60 "$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/$tag" >"$TMP/$tag.log" 2>&1
    rc=$?
}
rank1_job nodata data.path="$TMP/no-data-here"
check "data missing on rank 1's host: the job ends with a usage error (exit 2, got $rc)" [ $rc -eq 2 ]
check "rank 1 names the missing data" grep -q "rank 1.*no-data-here" "$TMP/nodata.log"
check "... and ddprun's report names rank 1" grep -q "^ddprun: rank 1 on .* exited with code 2" "$TMP/nodata.log"
# Rank 1 given other settings than rank 0's (its host's copy of the config says another learning
# rate): refused before training, naming the setting and both values (the ranks would step apart);
# a path of rank 1's own (another run.dir) is not a difference.
rank1_job other optimizer.lr=0.5 run.dir="$TMP/other-b"
check "rank 1 with another optimizer.lr: the job ends with a usage error (exit 2, got $rc)" [ $rc -eq 2 ]
check "... rank 1 names the setting, rank 0's value and its own" \
    grep -q "rank 1.*other settings than rank 0's: optimizer.lr 0.05 (this rank: 0.5); every host" "$TMP/other.log"
check "... and nothing else (run.dir is its host's own)" bash -c "! grep -q 'run.dir' '$TMP/other.log'"
check "... before training" bash -c "! grep -q 'step 1' '$TMP/other.log'"
# whatever a failed check left running (this test's processes name $TMP in their arguments)
left=$(pgrep -f "$TMP/")
[ -z "$left" ] || kill -KILL $left 2>/dev/null
finish
