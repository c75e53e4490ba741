#!/usr/bin/env bash
# ddprun --host-discovery on simulated hosts (network namespaces h1..h3, tests/launcher/netns_hosts.sh):
# a job whose discovery command answers differently before each restart resumes on what it has,
# with the same global batch. The command lists h1:2 h2:2 (np 4); after a failure, h1:2 alone (h2
# removed: np 2); after another, h1:2 h3:1 (h3 new: np 3). The MLP at train.global_batch 48 (4 per
# rank) trains 4 x 3, then 4 x 6, then 4 x 4 per step, resumes from rank 0's checkpoints on h1,
# and ends within 4 x 48 ulps of an uninterrupted np 4 run (test_global_batch.sh derives it). A
# fleet that stays below --min-np ends the launch after --discovery-wait, naming what it saw. A
# preemption notice on h2 alone stops the job (exit 75 from every rank) and ddprun restarts without
# h2, under -H and under --host-discovery (which still lists it); not where rank 0 ran on h2. A
# notice on h2 during rank 0's download, and h2's rank killed then (its machine taken before the
# job could stop): the job fails, and the restart under -H leaves h2 out too.
# The first failure is DDP_TEST_FAULT's exit on rank 0 (first attempt only); the second, a rank of
# the np 2 attempt killed by this test once that attempt has trained past its checkpoint.
# Skipped (exit 77), never passed, where namespaces cannot be made.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/netns_hosts.sh"
netns_up 3
echo "simulated hosts: ${NS_PREFIX}h1 ${NS_PREFIX}h2 ${NS_PREFIX}h3 on ${NS_NET}0/24"
ddp() { timeout 300 "$DDPRUN" "$@"; } # a launcher that hangs fails the test instead
G=(train.global_batch=48 data.batch_size=4 train.max_steps=400 train.epochs=10 checkpoint.every_steps=20
   checkpoint.resume=auto)

# the discovery command: run N prints answer N (the last one repeats), and counts its runs
printf '%s\n' 'h1:2\nh2:2' 'h1:2' 'h1:2\nh3:1' >"$TMP/answers"
cat >"$TMP/discover.sh" <<EOF
#!/bin/sh
n=\$((\$(cat "$TMP/runs" 2>/dev/null || echo 0) + 1)); echo \$n >"$TMP/runs"
line=\$(sed -n "\${n}p" "$TMP/answers"); [ -n "\$line" ] || line=\$(tail -n 1 "$TMP/answers")
printf '%b\n' "\$line"
EOF
chmod +x "$TMP/discover.sh"

ddp -np 4 "$SMALL" run.dir="$TMP/ref" "${G[@]}" >"$TMP/ref.log" 2>&1
check "uninterrupted np 4 run on one host (exit $?)" [ -f "$TMP/ref/checkpoints/ckpt-00000400.ddp" ]

DDP_TEST_FAULT=exit:0:40 ddp --host-discovery "$TMP/discover.sh" --max-restarts 2 "${NS_MPI[@]}" "$SMALL" \
    run.dir="$NS_RUNROOT/disc" "${G[@]}" >"$TMP/disc.log" 2>&1 &
pid=$!
# the np 2 attempt (resumed at step 40) trains past step 60 and one of its checkpoints (60 or later)
# is on disk (the writes run in the background: slow on a loaded machine): one of its ranks is killed
metrics=$NS_STORE/h1/disc/metrics.jsonl
for _ in $(seq 1200); do
    grep -q "h1:2 (2 slots) -> -np 2" "$TMP/disc.log" && grep -qE '"step":(6[5-9]|[7-9][0-9]|[1-3][0-9]{2}),' \
        "$metrics" 2>/dev/null && ls "$NS_STORE/h1/disc/checkpoints" | grep -qE '^ckpt-0000(00[6-9]|0[1-3][0-9])0\.ddp$' &&
        break
    sleep 0.05
done
victim=""
for p in $(ip netns pids "${NS_PREFIX}h1"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ddprun-worker ] && victim=$p && break
done
check "the np 2 attempt is running on h1 (a rank to kill: ${victim:-none})" [ -n "$victim" ]
[ -n "$victim" ] && kill -9 "$victim"
wait $pid
rc=$?
check "the job ends after two restarts (exit $rc)" eval '[ $rc -eq 0 ] && [ -f "$NS_STORE/h1/disc/checkpoints/ckpt-00000400.ddp" ]'
check "discovery ran at the start and before each restart" [ "$(cat "$TMP/runs")" -eq 3 ]
check "attempt 1 on h1 and h2" grep -qF "host discovery: h1:2, h2:2 (4 slots) -> -np 4 -H h1:2,h2:2" "$TMP/disc.log"
check "attempt 2 without h2" grep -qF "host discovery: h1:2 (2 slots) -> -np 2 -H h1:2" "$TMP/disc.log"
check "attempt 3 with the new host h3" grep -qF "host discovery: h1:2, h3:1 (3 slots) -> -np 3 -H h1:2,h3:1" \
    "$TMP/disc.log"
for split in "4 ranks: 4 per rank x 3" "2 ranks: 4 per rank x 6" "3 ranks: 4 per rank x 4"; do
    check "the global batch kept: train.global_batch 48 at $split" \
        grep -qF "train.global_batch 48 at $split accumulation" "$TMP/disc.log"
done
check "each restart resumed from a checkpoint at another world size" bash -c \
    "grep -q 'world size changed from 4 to 2' '$TMP/disc.log' && grep -q 'world size changed from 2 to 3' '$TMP/disc.log'"
check "... and ends within 4 x 48 ulps of the uninterrupted run" \
    "$CKPT_COMPARE" "$TMP/ref/checkpoints/ckpt-00000400.ddp" "$NS_STORE/h1/disc/checkpoints/ckpt-00000400.ddp" param/ 1.1e-5

# a fleet below --min-np: the launch waits, asks again, then ends naming what it saw
printf '%s\n' 'h1:1' >"$TMP/answers"
rm -f "$TMP/runs"
ddp --host-discovery "$TMP/discover.sh" --min-np 2 --discovery-wait 3 "${NS_MPI[@]}" "$SMALL" \
    run.dir="$NS_RUNROOT/small" "${G[@]}" >"$TMP/small.log" 2>&1
rc=$?
check "a fleet below --min-np ends the launch (exit $rc)" [ $rc -eq 1 ]
check "... naming the time waited and what the command listed" grep -qE \
    "waited [0-9.]+ s \(--discovery-wait 3\) for --min-np 2 slots; the last run of $TMP/discover.sh listed h1:1 \(1 slot\)" \
    "$TMP/small.log"
check "... after asking again" [ "$(cat "$TMP/runs")" -ge 2 ]
check "... and nothing ran" [ ! -e "$NS_STORE/h1/small" ]

# a preemption notice on h2 alone (a metadata server answering like AWS in h2's namespace, one
# that never announces anything in h1's): the ranks save and stop, and ddprun restarts without h2, under
# -H and under --host-discovery (which still lists h2, as a cloud lists a machine with minutes left)
META_DIR=$TMP/meta
mkdir -p "$META_DIR"
ip netns exec "${NS_PREFIX}h2" python3 "$DDP_SRC/tests/launcher/metadata_server.py" aws "$META_DIR" &
meta_pid=$!
for _ in $(seq 100); do [ -f "$META_DIR/port" ] && break; sleep 0.05; done
export DDPRUN_METADATA_URL=http://127.0.0.1:$(cat "$META_DIR/port")
# h1's own service, at the same address in its namespace, never announces anything: its ranks log
# no warning, so ddprun learns where rank 0 runs from the rank wrapper's status line alone
mkdir -p "$TMP/meta-h1"
ip netns exec "${NS_PREFIX}h1" python3 "$DDP_SRC/tests/launcher/metadata_server.py" aws "$TMP/meta-h1" \
    "$(cat "$META_DIR/port")" &
meta_h1_pid=$!
for _ in $(seq 100); do [ -f "$TMP/meta-h1/port" ] && break; sleep 0.05; done
check "h1's own metadata service is up, at h2's port (else h1's ranks would warn and name rank 0's host)" \
    [ "$(cat "$TMP/meta-h1/port" 2>/dev/null)" = "$(cat "$META_DIR/port")" ]
N=(train.global_batch=8 data.batch_size=4 train.max_steps=200 train.epochs=10 checkpoint.every_steps=50
   checkpoint.resume=auto checkpoint.preemption_notice=aws checkpoint.notice_poll_s=0.3)
# noticed NAME RANK0_HOST ddprun-flags...: the job into run.dir notice-NAME (log $TMP/notice-NAME.log),
# h2's notice once rank 0 (on RANK0_HOST) logged step 20; its exit status in rc
noticed() {
    local name=$1 host=$2; shift 2
    rm -f "$META_DIR/notice" "$META_DIR/served" "$TMP/runs"
    ddp "$@" --max-restarts 1 "${NS_MPI[@]}" "$SMALL" run.dir="$NS_RUNROOT/notice-$name" "${N[@]}" \
        >"$TMP/notice-$name.log" 2>&1 &
    local pid=$!
    for _ in $(seq 1200); do
        grep -qE '"step":(2[0-9]|[3-9][0-9]),' "$NS_STORE/$host/notice-$name/metrics.jsonl" 2>/dev/null && break
        sleep 0.05
    done
    touch "$META_DIR/notice"
    wait $pid
    rc=$?
}
printf '%s\n' 'h1:1\nh2:1' >"$TMP/answers"
for how in hosts discovery; do
    if [ $how = hosts ]; then where=(-np 2 -H h1:1,h2:1); else where=(--host-discovery "$TMP/discover.sh"); fi
    noticed $how h1 "${where[@]}"
    log=$TMP/notice-$how.log
    check "$how: a notice on h2 mid-run: the job goes on without h2 and completes (exit $rc)" \
        bash -c "[ $rc -eq 0 ] && [ -f '$NS_STORE/h1/notice-$how/checkpoints/ckpt-00000200.ddp' ]"
    check "$how: ... h2's rank named the notice" grep -q "h2\] warning: preemption notice: " "$log"
    check "$how: ... ddprun restarted without h2" grep -qF \
        "attempt 2 of 2 (restarting without h2, whose preemption notice stopped the job)" "$log"
    check "$how: ... on h1 alone, resumed" bash -c "grep -qE -- '-np 1 -H h1:1' '$log' && grep -q 'resumed from' '$log'"
done
check "discovery: h2, still listed, left out" grep -qF "leaving out h2, whose preemption notice came" \
    "$TMP/notice-discovery.log"
# h2's notice while rank 0 downloads (a resume waits for the download, the stop with it) and h2's
# machine taken before the job could stop: the job fails, and the restart leaves h2 out as well
rm -f "$META_DIR/notice" "$META_DIR/served" "$TMP/fetching" "$TMP/fetched"
printf '#!/bin/sh\n[ -e "%s" ] && exit 0\ntouch "%s" "%s"\nsleep 60\n' "$TMP/fetched" "$TMP/fetching" \
    "$TMP/fetched" >"$TMP/fetch.sh" # the first attempt's download is slow, the second's brings nothing
chmod +x "$TMP/fetch.sh"
ddp -np 2 -H h1:1,h2:1 --max-restarts 1 "${NS_MPI[@]}" "$SMALL" run.dir="$NS_RUNROOT/taken" "${N[@]}" \
    checkpoint.download_cmd="$TMP/fetch.sh" >"$TMP/taken.log" 2>&1 &
pid=$!
for _ in $(seq 1200); do [ -e "$TMP/fetching" ] && break; sleep 0.05; done
touch "$META_DIR/notice"
for _ in $(seq 1200); do grep -q "h2\] warning: preemption notice: " "$TMP/taken.log" && break; sleep 0.05; done
victim=""
for p in $(ip netns pids "${NS_PREFIX}h2"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ddprun-worker ] && victim=$p && break
done
check "taken: h2's rank saw the notice during the download (its rank: ${victim:-none})" \
    eval '[ -n "$victim" ] && grep -q "h2\] warning: preemption notice: " "$TMP/taken.log"'
[ -n "$victim" ] && kill -9 "$victim"
wait $pid
rc=$?
check "taken: the job goes on without h2 and completes (exit $rc)" \
    bash -c "[ $rc -eq 0 ] && [ -f '$NS_STORE/h1/taken/checkpoints/ckpt-00000200.ddp' ]"
check "taken: ... the restart left h2 out, saying why" grep -qF \
    "leaving out the host(s) whose ranks did not arrive or whose preemption notice came: -np 1 -H h1:1" "$TMP/taken.log"

# rank 0 on h2, its checkpoints on h2's disk and no download_cmd: the job ends 75, restarting nothing
noticed rank0 h2 -np 2 -H h2:1,h1:1
check "rank 0's host noticed: the job ends 75, not restarted (exit $rc)" [ $rc -eq 75 ]
check "... saying why" grep -qF "not restarting without h2: rank 0 saved its checkpoints there" "$TMP/notice-rank0.log"
kill $meta_pid $meta_h1_pid 2>/dev/null
wait $meta_pid $meta_h1_pid 2>/dev/null
finish
