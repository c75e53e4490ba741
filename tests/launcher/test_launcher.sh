#!/bin/bash
# test_launcher.sh — ddprun end to end with real mpirun and tests/launcher/fake_worker.c as the rank program.
#
# Proves: the mpirun command ddprun builds (--dry-run with -H / --hostfile / root / oversubscribe),
# a malformed -H entry or hostfile line refused before anything starts (named; a hostfile by
# file:line), threads per rank from the hosts' slots (as mpirun 4.1 reads them),
# config validation before launch, [rank R] output tagging and stream routing, the torchrun
# environment, failure reports naming rank + host (exit code and SIGKILL), exit-code passthrough
# (2, 75), SIGTERM -> SIGUSR1 to every rank -> exit 75, the second-signal hard stop (an mpirun that
# outlives it killed with its process group 10 s later, or at a third signal), a stop
# while the job starts (before mpirun starts, before any rank exists, while a rank loads, as a
# restart begins), a stop while nobody reads ddprun's stdout (the job goes on, the stop is
# forwarded, the dropped output counted), and --max-restarts; --host-discovery's hosts (every host listed, --max-np,
# train.global_batch's world sizes, a --min-np/--max-np range none of which it divides refused
# before the command runs, a bad line named, too few slots ending after the wait and
# saying the time waited, 300 hosts cut to the first, asked again before a restart), a stop while
# discovery waits or its command runs (exit 75, the command's process group ended), and a world size train.global_batch refuses before mpirun. Wall-time bounds below are hang guards (a launcher that fails to stop the
# surviving ranks would wait for their 60 s timeout), not performance assertions.
# Needs env: DDPRUN, FAKE_WORKER, DDP_SRC (tests/meson.build sets them).
set -u

passed=0
failed=0
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $what" >&2; fi
}
contains() { grep -qF -- "$2" "$1"; }
lacks() { ! grep -qF -- "$2" "$1"; }
count_is() { [ "$(grep -cF -- "$2" "$1")" -eq "$3" ]; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
config="$DDP_SRC/configs/fashion_mlp.yaml"
host=$(hostname)
# physical cores (mpirun's slots) of the processors this process may run on, as ddprun counts them
cores=$(python3 -c 'import os
def topo(c, name):
    with open(f"/sys/devices/system/cpu/cpu{c}/topology/{name}") as f:
        return f.read().strip()
print(len({(topo(c, "physical_package_id"), topo(c, "core_id")) for c in os.sched_getaffinity(0)}))')
first_cpu=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
export DDPRUN_WORKER=$FAKE_WORKER DDPRUN_BENCH=$FAKE_WORKER
unset OMP_NUM_THREADS FAKE_WORKER_MODE SLURM_JOB_ID SLURM_JOBID SLURM_TASKS_PER_NODE # this machine as it is

# run NAME ARGS...: runs ddprun, stdout/stderr in $tmp/NAME.out/.err, status in rc, wall time in ms
run() {
    local name=$1; shift
    local t0=$(date +%s%N)
    "$DDPRUN" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    out=$tmp/$name.out err=$tmp/$name.err
}
hang_guard() { [ $ms -lt 30000 ]; }

# ---- help / version ----
run help --help
check "--help exits 0" [ $rc -eq 0 ]
check "--help documents -np" contains $out "-np N"
run version --version
check "--version exits 0" [ $rc -eq 0 ]
check "--version prints a version" grep -qE '^ddprun [0-9]+\.[0-9]+' $out
run badflag --no-such-flag "$config"
check "unknown flag is a usage error" [ $rc -eq 2 ]
check "unknown flag is named as unknown" contains $err "unknown flag --no-such-flag"
run badflag_last --no-such-flag
check "unknown flag as the last argument is a usage error" [ $rc -eq 2 ]
check "unknown flag as the last argument is named as unknown" contains $err "unknown flag --no-such-flag"
run novalue -np
check "a value flag as the last argument needs a value" contains $err "-np needs a value"
# -- ends the flags: a CONFIG.yaml whose name begins with '-'
cp "$config" "$tmp/-dash.yaml"
(cd "$tmp" && "$DDPRUN" --dry-run -np 1 -- -dash.yaml >dash.out 2>dash.err); rc=$?
check "-- then -dash.yaml: the config (exit $rc)" bash -c "[ $rc -eq 0 ] && grep -qF -- ' -dash.yaml' '$tmp/dash.out'"
(cd "$tmp" && "$DDPRUN" --dry-run -np 1 -dash.yaml >dash2.out 2>dash2.err); rc=$?
check "-dash.yaml without --: an unknown flag (exit $rc)" bash -c "[ $rc -eq 2 ] && grep -qF 'unknown flag -dash.yaml' '$tmp/dash2.err'"
run empty_disc --host-discovery ' ' "$config"
check "--host-discovery ' ': a usage error at once (exit $rc)" bash -c "[ $rc -eq 2 ] && grep -qF 'expected a command' $err"
# the in-process commands take none of the launch flags (--dry-run would have run them all the same)
run dry_ckpt --dry-run ckpt info "$tmp/none.ddp"
check "--dry-run ckpt info: refused (exit $rc)" bash -c "[ $rc -eq 2 ] && grep -qF 'ckpt runs in this process' $err"
run dd_ckpt -- ckpt info "$tmp/none.ddp"
check "-- ckpt info: runs (-- is no flag; exit $rc, the file missing)" bash -c "[ $rc -eq 1 ] && ! grep -qF 'runs in this process' $err"
run np_generate -np 2 generate "$tmp/none.ddp"
check "-np 2 generate: refused (exit $rc)" bash -c "[ $rc -eq 2 ] && grep -qF 'generate runs in this process' $err"
run plan_disc --host-discovery 'echo h1:2' plan "$config"
check "plan with --host-discovery: refused, asking for -np (exit $rc)" \
    bash -c "[ $rc -eq 2 ] && grep -qF 'give -np N rather than --host-discovery' $err"

# ---- dry run: the mpirun command ----
run dry_h -np 4 -H host1:2,host2:2 --dry-run "$config" 'run.dir=a b'
check "dry-run exits 0" [ $rc -eq 0 ]
check "dry-run passes -H" contains $out " -H host1:2,host2:2 "
check "dry-run passes -np" contains $out " -np 4 "
check "dry-run tags output" contains $out " --tag-output "
check "dry-run runs the worker with the config" contains $out "$FAKE_WORKER $config"
check "dry-run shell-quotes overrides" contains $out "'run.dir=a b'"
check "dry-run: no --oversubscribe with -H" lacks $out "--oversubscribe"
check "dry-run exports the restart count" contains $out "-x DDPRUN_RESTART_COUNT=0"
if [ "$(id -u)" -eq 0 ]; then
    check "dry-run as root adds --allow-run-as-root" contains $out "--allow-run-as-root"
else
    check "dry-run as non-root has no --allow-run-as-root" lacks $out "--allow-run-as-root"
fi
check "dry-run starts no rank" lacks $out "[rank"
printf 'host1 slots=2\nhost2 slots=2\n' >"$tmp/hosts"
run dry_hf --dry-run -np 4 --hostfile "$tmp/hosts" "$config"
check "dry-run passes --hostfile" contains $out " --hostfile $tmp/hosts "
# without -np, the ranks are the slots the hosts have, as mpirun counts them, and ddprun says so;
# a hostfile that leaves a host's slots to mpirun (its cores) is refused, naming the host
run dry_hf_np --dry-run --hostfile "$tmp/hosts" "$config"
check "no -np, a hostfile of 2 + 2 slots: -np 4" contains $out " -np 4 "
check "... said" grep -qx "ddprun: -np not given: 4 slots in --hostfile -> 4 ranks" $err
run dry_h_np --dry-run -H host1:2,host2:3 "$config"
check "no -np, -H host1:2,host2:3: -np 5" contains $out " -np 5 "
SLURM_JOB_ID=7 SLURM_TASKS_PER_NODE="2(x3),1" run dry_slurm_np --dry-run "$config"
check "no -np, a Slurm allocation of 2(x3),1 tasks: -np 7" contains $out " -np 7 "
printf 'host1\nhost2 slots=2\n' >"$tmp/hosts_open"
run dry_hf_open --dry-run --hostfile "$tmp/hosts_open" "$config"
check "no -np, a hostfile host without slots=: refused (exit $rc), naming it" \
    bash -c "[ $rc -eq 2 ] && grep -q 'leaves host host1.s slots to mpirun: give -np' '$err'"
# A malformed -H entry or hostfile line is refused before mpirun starts, named
for bad in "host1:0" "host1:2x" "host1:-3" "host1:99999999999" ":2" "host1:2,,host2" "host one"; do
    run dry_bad_h --dry-run -np 2 -H "$bad" "$config"
    check "-H \"$bad\" is a usage error (exit $rc)" [ $rc -eq 2 ]
    check "-H \"$bad\": the entry is named" grep -qF -- "-H \"$bad\": entry " $err
    check "-H \"$bad\": nothing started" lacks $out "mpirun"
done
printf 'host1 slots=2\n# host3 slots=x\nhost2 slots=two\n' >"$tmp/hosts_bad"
run dry_bad_hf --dry-run -np 2 --hostfile "$tmp/hosts_bad" "$config"
check "a hostfile's bad slots= is a usage error (exit $rc)" [ $rc -eq 2 ]
check "a hostfile's bad slots=: file:line named" contains $err "--hostfile $tmp/hosts_bad:3: host2: slots: expected"
# What mpirun (Open MPI 4.1) refuses in a hostfile is refused before it starts, with the line
bad_hostfile() { # name, file contents, the line named, what the message says
    printf "$2" >"$tmp/hosts_$1"
    run "dry_hf_$1" --dry-run -np 2 --hostfile "$tmp/hosts_$1" "$config"
    check "hostfile $1: a usage error (exit $rc)" [ $rc -eq 2 ]
    check "hostfile $1: line $3 named" contains $err "--hostfile $tmp/hosts_$1:$3: "
    check "hostfile $1: $4" contains $err "$4"
    check "hostfile $1: nothing started" lacks $out "mpirun"
}
bad_hostfile slots_again 'host1 slots=2\nhost2\nhost1 slots=1\n' 3 "host1: slots given for a host listed before"
bad_hostfile listed_then_slots 'host1\nhost1 count=4\n' 2 "host1: slots given for a host listed before"
bad_hostfile slots_twice 'host1 slots=2 cpu=3\n' 1 "host1: cpu: the slots are given twice on one line"
bad_hostfile no_equals 'host1 slots 4\n' 1 "host1: slots: expected slots=N"
bad_hostfile no_value 'host1 slots=\n' 1 "host1: slots: expected slots=N"
bad_hostfile bad_max 'host1 max_slots=0\n' 1 "host1: max_slots: expected max_slots=N"
run dry_no_hf --dry-run -np 2 --hostfile "$tmp/no-such-hostfile" "$config"
check "an unreadable hostfile is a usage error naming it (exit $rc)" contains $err "$tmp/no-such-hostfile: cannot read"
# Threads per rank: the slots as mpirun (Open MPI 4.1) counts them, measured with its
# --display-allocation: -H adds a host's counts; in a hostfile, blanks may stand around '=',
# count= and cpu= are slots=, max_slots= is the slots where slots= is not given, a commented
# slots= is nothing, and a host listed again gains one slot (a first listing without slots
# counting 1); a host listed once without slots has its cores (measured on this one, and as
# mpirun's help says; taken to be this node's). At np 2 with 2+ cores: two ranks on host1 share
# its cores, one rank a node gets them all.
if [ "$cores" -ge 2 ]; then
    run dry_twice --dry-run -np 2 -H host1,host1 "$config"
    check "-H host1,host1: two ranks share host1's cores" contains $out "-x OMP_NUM_THREADS=$((cores / 2)) "
    hostfile_threads() { # name, file contents, threads expected
        printf "$2" >"$tmp/hosts_$1"
        run "dry_threads_$1" --dry-run -np 2 --hostfile "$tmp/hosts_$1" "$config"
        check "hostfile $1: $3 threads a rank" contains $out "-x OMP_NUM_THREADS=$3 "
    }
    hostfile_threads blanks 'host1 slots = 2\nhost2 slots=2\n' $((cores / 2))
    hostfile_threads blank_after 'host1\tslots= 2\nhost2\n' $((cores / 2))
    hostfile_threads count 'host1 count=2\nhost2 count=2\n' $((cores / 2))
    hostfile_threads cpu 'host1 cpu =2 port=22\nhost2\n' $((cores / 2))
    hostfile_threads max 'host1 max_slots=2\nhost2\n' $((cores / 2))
    hostfile_threads slots_over_max 'host1 slots=1 max-slots=2\nhost2\n' "$cores"
    hostfile_threads comment 'host1 # slots=2\nhost2\n' $((cores / 2))
    hostfile_threads listed_twice 'host1\nhost1\nhost2\n' $((cores / 2))
    hostfile_threads slots_then_listed 'host1 slots=1\nhost2 slots=2\nhost1\n' $((cores / 2))
fi
run dry_over --dry-run -np $((cores + 1)) "$config"
check "more ranks than cores adds --oversubscribe" contains $out "--oversubscribe"
run dry_one --dry-run -np 1 "$config"
check "one rank: no --oversubscribe" lacks $out "--oversubscribe"
check "one rank gets every core as threads" contains $out "-x OMP_NUM_THREADS=$cores "
# hardware threads are not cores (mpirun gives a node a slot per core): a made-up node of one core
# with every processor a thread of it takes 2 ranks only oversubscribed, one thread each
mkdir -p "$tmp/sysfs"
for ((c = 0; c < $(getconf _NPROCESSORS_CONF); c++)); do
    mkdir -p "$tmp/sysfs/cpu$c/topology"
    echo 0 >"$tmp/sysfs/cpu$c/topology/physical_package_id"
    echo 0 >"$tmp/sysfs/cpu$c/topology/core_id"
done
DDP_TEST_CPU_SYSFS=$tmp/sysfs run dry_ht --dry-run -np 2 "$config"
check "one core of hardware threads, 2 ranks: --oversubscribe" contains $out "--oversubscribe"
check "... one thread a rank" contains $out "-x OMP_NUM_THREADS=1 "
# a process allowed one processor (taskset, as a container's cpuset or a Slurm task's cgroup) has
# one core, whatever the machine has
taskset -c "$first_cpu" "$DDPRUN" --dry-run -np 2 "$config" >"$tmp/dry_taskset.out" 2>"$tmp/dry_taskset.err"
check "taskset to one processor, 2 ranks: --oversubscribe" contains "$tmp/dry_taskset.out" "--oversubscribe"
check "... one thread a rank" contains "$tmp/dry_taskset.out" "-x OMP_NUM_THREADS=1 "
taskset -c "$first_cpu" "$DDPRUN" --dry-run -np 1 "$config" >"$tmp/dry_taskset1.out" 2>&1
check "taskset to one processor, one rank: one thread" contains "$tmp/dry_taskset1.out" "-x OMP_NUM_THREADS=1 "
# inside a Slurm allocation mpirun takes the nodes' slots from SLURM_TASKS_PER_NODE: a rank's
# threads are the cores over the ranks of the busiest node ("2(x3),1": three nodes of 2 tasks, one
# of 1), not over the whole job's
SLURM_JOB_ID=7 SLURM_TASKS_PER_NODE="1(x4)" run slurm_1x4 --dry-run -np 4 "$config"
check "Slurm, 4 nodes of 1 task, 4 ranks: every core a rank's thread" contains $out "-x OMP_NUM_THREADS=$cores "
check "... and no --oversubscribe: the allocation's slots bound the ranks (this node's cores do not)" \
    lacks $out "--oversubscribe"
SLURM_JOB_ID=7 SLURM_TASKS_PER_NODE="2(x3),1" run slurm_2x3 --dry-run -np 7 "$config"
check "Slurm, tasks 2(x3),1, 7 ranks: 2 on the busiest node" contains $out "-x OMP_NUM_THREADS=$(((cores / 2) > 1 ? cores / 2 : 1)) "
SLURM_JOB_ID=7 SLURM_TASKS_PER_NODE="1(x4),junk" run slurm_junk --dry-run -np 4 "$config"
check "Slurm, a malformed SLURM_TASKS_PER_NODE: as outside an allocation" contains $out "-x OMP_NUM_THREADS=$(((cores / 4) > 1 ? cores / 4 : 1)) "
run dry_x_threads --dry-run -np 2 -x OMP_NUM_THREADS=2 "$config"
check "-x OMP_NUM_THREADS=2: ranks not bound to a core" contains $out "--bind-to none"
check "... and the user's value alone" bash -c "[ \$(grep -o 'OMP_NUM_THREADS' '$out' | wc -l) -eq 1 ]"
MPI_HOME=/opt/mpi run dry_home --dry-run --mca btl self,vader -x FOO=1 "$config"
check "mpirun comes from MPI_HOME/bin" grep -q "^/opt/mpi/bin/mpirun " $out
check "--mca and -x pass through" contains $out " --mca btl self,vader -x FOO=1 "
run dry_topo --dry-run -np 2 topo
check "topo runs the bench program" contains $out "$FAKE_WORKER topo"

# ---- --host-discovery: the hosts of each attempt from a command's host:slots lines ----
# discover NAME LINES...: a discovery script printing its arguments as lines, one run after another
# taking the next argument (the last one repeats); each run counted in $tmp/NAME.runs
discover() {
    local name=$1; shift
    printf '%s\n' "$@" >"$tmp/$name.answers"
    cat >"$tmp/$name.sh" <<EOF
#!/bin/sh
n=\$((\$(cat "$tmp/$name.runs" 2>/dev/null || echo 0) + 1)); echo \$n >"$tmp/$name.runs"
echo "discovery run \$n" >&2
line=\$(sed -n "\${n}p" "$tmp/$name.answers"); [ -n "\$line" ] || line=\$(tail -n 1 "$tmp/$name.answers")
printf '%b\n' "\$line"
EOF
    chmod +x "$tmp/$name.sh"
}
discover disc_two 'hostA:2\n# a comment\n\nhostB:3'
run disc_two --host-discovery "$tmp/disc_two.sh" --dry-run "$config"
check "discovery: every host listed, in order (exit $rc)" contains $out " -np 5 -H hostA:2,hostB:3 "
check "discovery: what it found is said" contains $err "host discovery: hostA:2, hostB:3 (5 slots) -> -np 5 -H hostA:2,hostB:3"
check "discovery: the command's stderr is shown, prefixed" contains $err "ddprun: host discovery: discovery run 1"
discover disc_max 'hostA:2\nhostB:3'
run disc_max --host-discovery "$tmp/disc_max.sh" --max-np 4 --dry-run "$config"
check "discovery: --max-np 4 cuts the last host's slots" contains $out " -np 4 -H hostA:2,hostB:2 "
discover disc_gb 'hostA:5'
run disc_gb --host-discovery "$tmp/disc_gb.sh" --dry-run "$config" train.global_batch=12 data.batch_size=4 \
    train.micro_batch=auto
check "discovery: 5 slots, global batch 12 -> the 4 ranks it divides into" contains $out " -np 4 -H hostA:4 "
# no world size from --min-np (to --max-np) divides global batch 12: refused before the command runs
for range in "--min-np 5 --max-np 5" "--min-np 13"; do
    # shellcheck disable=SC2086 # $range is flags
    run disc_gb_none --host-discovery "$tmp/disc_gb.sh" $range --dry-run "$config" train.global_batch=12 \
        data.batch_size=4 train.micro_batch=auto
    check "discovery: $range with global batch 12: refused at once (exit $rc)" [ $rc -eq 2 ]
    check "discovery: ... saying why" contains $err \
        "train.global_batch 12 divides into no world size from $(sed 's/ --max-np/ to --max-np/' <<<"$range"), so"
    check "discovery: ... without running the command" [ "$(cat "$tmp/disc_gb.runs")" -eq 1 ]
done
discover disc_bad 'hostA:2\nhostB 3'
run disc_bad --host-discovery "$tmp/disc_bad.sh" --dry-run "$config"
check "discovery: a bad line is a usage error (exit $rc)" [ $rc -eq 2 ]
check "discovery: ... naming the line" contains $err "line 2: \"hostB 3\": expected host:slots"
discover disc_dup 'hostA:2\nhostB:1\nhostA:2'
run disc_dup --host-discovery "$tmp/disc_dup.sh" --dry-run "$config"
check "discovery: a line repeated whole counts once (exit $rc)" contains $out " -np 3 -H hostA:2,hostB:1 "
discover disc_dup_slots 'hostA:2\nhostA:3'
run disc_dup_slots --host-discovery "$tmp/disc_dup_slots.sh" --dry-run "$config"
check "discovery: a host listed again with other slots is a usage error (exit $rc)" [ $rc -eq 2 ]
check "discovery: ... naming both" contains $err "line 2: \"hostA:3\": host hostA is listed twice, with 2 and 3 slots"
discover disc_small 'hostA:1'
# 5 s: asked again at 2 and 4 s, so twice at least however slow a loaded machine runs the first one
run disc_small --host-discovery "$tmp/disc_small.sh" --min-np 2 --discovery-wait 5 --dry-run "$config"
check "discovery: too few slots for --min-np ends the launch (exit $rc)" [ $rc -eq 1 ]
check "discovery: ... naming what it saw" grep -qE "waited [0-9.]+ s \(--discovery-wait 5\) for --min-np 2 slots; \
the last run of $tmp/disc_small.sh listed hostA:1 \(1 slot\)" $err
check "discovery: ... after asking again" [ "$(cat "$tmp/disc_small.runs")" -ge 2 ]
discover disc_grow 'hostA:1' 'hostA:1\nhostB:1'
run disc_grow --host-discovery "$tmp/disc_grow.sh" --min-np 2 --discovery-wait 60 --dry-run "$config"
check "discovery: a fleet that grows while ddprun waits is used (exit $rc)" contains $out " -np 2 -H hostA:1,hostB:1 "
# the time waited is the time that passed, also when a run of the command outlasts --discovery-wait
printf '#!/bin/sh\nsleep 3\necho hostA:1\n' >"$tmp/disc_slow.sh"
chmod +x "$tmp/disc_slow.sh"
run disc_slow --host-discovery "$tmp/disc_slow.sh" --min-np 2 --discovery-wait 1 --dry-run "$config"
waited=$(sed -n 's/.*host discovery: waited \([0-9.]*\) s (--discovery-wait 1).*/\1/p' $err)
check "discovery: a 3 s command with --discovery-wait 1 says the time waited (${waited:-nothing}, exit $rc)" \
    awk -v w="${waited:-0}" 'BEGIN { exit !(w >= 3 && w < 20) }'
# more hosts than ddprun keeps: the first ones, up to --max-np slots (or 256 hosts); the rest not read
printf '#!/bin/sh\ni=1; while [ $i -le 300 ]; do echo "host$i:1"; i=$((i + 1)); done\n' >"$tmp/disc_300.sh"
chmod +x "$tmp/disc_300.sh"
run disc_300 --host-discovery "$tmp/disc_300.sh" --max-np 4 --dry-run "$config"
check "discovery: 300 hosts with --max-np 4 -> the first 4 (exit $rc)" contains $out " -np 4 -H host1:1,host2:1,host3:1,host4:1 "
check "discovery: ... saying the rest was not read" contains $err "(4 slots; the hosts after these not read: --max-np 4 reached)"
run disc_300all --host-discovery "$tmp/disc_300.sh" --dry-run "$config"
check "discovery: 300 hosts without --max-np -> the first 256 (exit $rc)" grep -qE " -np 256 -H host1:1,.*,host256:1 " $out
check "discovery: ... saying so" contains $err "(256 slots; the hosts after these not read: ddprun takes at most 256)"

# ---- a stop while host discovery waits or runs its command: nothing started, nothing left ----
gone() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null); [ -z "$st" ] || [[ $st == Z* ]]; } # zombies: ended
# stop_discovery NAME ARGS...: ddprun in the background ($pid), its output in $tmp/NAME.out/.err
stop_discovery() {
    local name=$1; shift
    out=$tmp/$name.out err=$tmp/$name.err
    "$DDPRUN" "$@" >"$out" 2>"$err" &
    pid=$!
}
# end_within S: waits for ddprun (rc, ms since t0); one still running S s after the stop is killed
# (rc 999)
end_within() {
    local i
    for ((i = 0; i < $1 * 20; i++)); do kill -0 $pid 2>/dev/null || break; sleep 0.05; done
    kill -0 $pid 2>/dev/null && kill -9 $pid
    wait $pid
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    [ $ms -lt $(($1 * 1000)) ] || rc=999
}
# while it waits for --min-np between runs of the command: ends at once, the command not run again
discover disc_stop_wait 'hostA:1'
stop_discovery disc_stop_wait --host-discovery "$tmp/disc_stop_wait.sh" --min-np 2 --discovery-wait 60 "$config"
for _ in $(seq 1200); do contains $err "fewer than --min-np 2" && break; sleep 0.05; done
check "discovery: ddprun waits for --min-np" contains $err "fewer than --min-np 2"
runs=$(cat "$tmp/disc_stop_wait.runs" 2>/dev/null)
t0=$(date +%s%N)
kill -TERM $pid
end_within 5
check "discovery: SIGTERM while waiting for --min-np -> exit 75 (got $rc, ${ms} ms)" [ $rc -eq 75 ]
check "discovery: ... saying nothing was started" contains $err \
    "ddprun: stopped before start (SIGTERM) while waiting for hosts; nothing was started (exit 75)"
check "discovery: ... the command not run again" [ "$(cat "$tmp/disc_stop_wait.runs")" = "$runs" ]
check "discovery: ... nothing started" lacks $out "[rank"
# while the command runs (a child of it sleeps 30 s): its process group ended, the child too
printf '#!/bin/sh\necho $$ >"%s"\nsleep 30 &\necho $! >"%s"\nwait\necho hostA:1\n' "$tmp/disc_hang.pid" \
    "$tmp/disc_hang.child" >"$tmp/disc_hang.sh"
chmod +x "$tmp/disc_hang.sh"
stop_discovery disc_hang --host-discovery "$tmp/disc_hang.sh" "$config"
for _ in $(seq 1200); do [ -s "$tmp/disc_hang.child" ] && break; sleep 0.05; done
check "discovery: the command is running" [ -s "$tmp/disc_hang.child" ]
t0=$(date +%s%N)
kill -TERM $pid
end_within 5
check "discovery: SIGTERM while the command runs -> exit 75 (got $rc, ${ms} ms)" [ $rc -eq 75 ]
check "discovery: ... saying nothing was started" contains $err \
    "ddprun: stopped before start (SIGTERM) while waiting for hosts; nothing was started (exit 75)"
check "discovery: ... and that the command was ended" contains $err "$tmp/disc_hang.sh ended on SIGTERM (its process group)"
hang_pid=$(cat "$tmp/disc_hang.pid" 2>/dev/null) child=$(cat "$tmp/disc_hang.child" 2>/dev/null)
check "discovery: ... the command is gone (${hang_pid:-no pid})" gone "${hang_pid:-1}"
check "discovery: ... its sleeping child is gone (${child:-no pid})" gone "${child:-1}"
[ -n "$child" ] && kill "$child" 2>/dev/null # on a failure, not left behind
check "discovery: ... nothing started" lacks $out "[rank"
run disc_np --host-discovery "$tmp/disc_grow.sh" -np 2 --dry-run "$config"
check "discovery with -np is a usage error" [ $rc -eq 2 ]
run disc_alone --min-np 2 --dry-run "$config"
check "--min-np without --host-discovery is a usage error" [ $rc -eq 2 ]
run gb_refused -np 5 --dry-run "$config" train.global_batch=12 data.batch_size=4
check "a world size the global batch does not divide is refused before mpirun (exit $rc)" [ $rc -eq 2 ]
check "... naming the world sizes that would" contains $err "world sizes that would: 1, 3"

# ---- config validated before launch ----
printf 'run:\n  dir: x\nbogus_key: 1\n' >"$tmp/bad.yaml"
run badcfg -np 2 "$tmp/bad.yaml"
check "bad config exits 2" [ $rc -eq 2 ]
check "bad config message names file:line" grep -qE "bad.yaml:[0-9]+:[0-9]+" $err
check "bad config message printed once" count_is $err "bad.yaml:" 1
check "bad config starts no rank" lacks $out "[rank"

# ---- output tagging ----
FAKE_WORKER_MODE=hello run hello -np 2 "$config"
check "job exits 0" [ $rc -eq 0 ]
check "rank 0 stdout tagged" contains $out "[rank 0] hello from rank 0 of 2"
check "rank 1 stdout tagged" contains $out "[rank 1] hello from rank 1 of 2"
check "rank stderr goes to stderr, tagged" contains $err "[rank 1] note on stderr from rank 1"
check "rank stderr not on stdout" lacks $out "note on stderr"
check "no raw mpirun tags left" lacks $out "<stdout>"
# timestamps or XML asked of mpirun by its environment would hide every tag, and stderr merged into
# stdout the ranks' status lines: ddprun turns them off
OMPI_MCA_orte_timestamp_output=1 OMPI_MCA_orte_xml_output=1 OMPI_MCA_iof_base_redirect_app_stderr_to_stdout=1 \
    FAKE_WORKER_MODE=hello run stamped -np 2 "$config"
check "OMPI_MCA_orte_timestamp_output/xml_output/iof_base_redirect_app_stderr_to_stdout=1: job exits 0 (got $rc)" \
    [ $rc -eq 0 ]
check "... its lines still tagged" contains $out "[rank 1] hello from rank 1 of 2"
check "... no status line left raw" bash -c "! grep -q ddprun-rank-status $err $out"
check "... the ranks' stderr still on stderr" contains $err "[rank 1] note on stderr from rank 1"
run tag_mca -np 2 --mca orte_tag_output 0 "$config"
check "--mca orte_tag_output: refused before launch (exit 2, got $rc), naming the key" \
    bash -c "[ $rc -eq 2 ] && grep -q 'orte_tag_output: ddprun reads' $err"
# ddprun's own --mca coll_libnbc_iallreduce_algorithm yields to the user's (mpirun refuses a key twice)
FAKE_WORKER_MODE=hello run libnbc -np 2 --mca coll_libnbc_iallreduce_algorithm 2 "$config"
check "the user's --mca coll_libnbc_iallreduce_algorithm: job exits 0 (got $rc)" [ $rc -eq 0 ]

# ---- torchrun environment ----
run env -np 2 bench env
threads=$((cores / 2)); [ $threads -ge 1 ] || threads=1
for r in 0 1; do
    check "rank $r environment" contains $out "[rank $r] env RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 OMP_NUM_THREADS=$threads"
done
OMP_NUM_THREADS=3 run env_user -np 2 bench env
check "user OMP_NUM_THREADS is kept" contains $out "OMP_NUM_THREADS=3"

# ---- failures ----
run exit3 -np 2 bench exit:1:3
check "rank exit 3 -> ddprun exits 1" [ $rc -eq 1 ]
check "failure names rank 1, host, code" contains $err "rank 1 on $host exited with code 3"
check "one failure line" count_is $err "ddprun: job failed" 1
check "mpirun's abort box replaced" lacks $err "Per user-direction"
check "exit failure: no hang (${ms} ms < 30 s)" hang_guard
run unterminated -np 1 bench unterminated-exit:4
check "a rank whose last output has no newline: named with its host and code" \
    contains $err "rank 0 on $host exited with code 4"
check "... its output shown, the wrapper's status line not" \
    bash -c "grep -qF '[rank 0] no newline at the end' '$err' && ! grep -q ddprun-rank-status '$err'"
run killed -np 2 bench kill:1
check "SIGKILLed rank -> ddprun exits 1" [ $rc -eq 1 ]
check "failure names rank 1, host, signal" contains $err "rank 1 on $host was killed by SIGKILL"
check "SIGKILL failure: no hang (${ms} ms < 30 s)" hang_guard
run exit2 -np 2 bench all-exit:2
check "worker exit 2 passes through" [ $rc -eq 2 ]
run exit75 -np 2 --max-restarts 2 bench all-exit:75
check "worker exit 75 passes through" [ $rc -eq 75 ]
check "exit 75 is not restarted" lacks $err "attempt"

# ---- signals ----
# start_and_signal NAME MODE [SIGNAL [PREFIX...]]: starts ddprun -np 2 (after PREFIX, a command
# that execs it), waits for both ranks' "ready", sends SIGNAL (default TERM)
start_and_signal() {
    local name=$1 mode=$2 sig=${3:-TERM}
    shift $(($# < 3 ? $# : 3))
    out=$tmp/$name.out err=$tmp/$name.err
    "$@" "$DDPRUN" -np 2 bench "$mode" >"$out" 2>"$err" &
    pid=$!
    for _ in $(seq 600); do
        [ "$(grep -c 'ready rank' "$out")" -ge 2 ] && break
        sleep 0.1
    done
    t0=$(date +%s%N)
    kill -$sig $pid
}
finish() {
    wait $pid
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
}
start_and_signal sigterm wait-signal
finish
check "SIGTERM -> ddprun exits 75" [ $rc -eq 75 ]
check "rank 0 got SIGUSR1 and saved" contains $out "[rank 0] rank 0 got SIGUSR1, checkpoint saved"
check "rank 1 got SIGUSR1 and saved" contains $out "[rank 1] rank 1 got SIGUSR1, checkpoint saved"
check "SIGTERM: no hang (${ms} ms < 30 s)" hang_guard
# a hang-up (the terminal or ssh session closed) is a stop request too; ddprun started with SIGHUP
# at its default, whatever this test's own (a harness may run it under nohup)
start_and_signal sighup wait-signal HUP python3 -c 'import os, signal, sys
signal.signal(signal.SIGHUP, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])'
sleep 0.2
kill -HUP $pid # a closed terminal often sends two: still one request
finish
check "SIGHUP twice -> ddprun exits 75 (got $rc)" [ $rc -eq 75 ]
check "SIGHUP: the ranks got SIGUSR1 and saved" bash -c "grep -qF '[rank 0] rank 0 got SIGUSR1, checkpoint saved' $out &&
    grep -qF '[rank 1] rank 1 got SIGUSR1, checkpoint saved' $out"
# ... except under nohup, which ignores it: the job goes on, and a SIGTERM still stops it
start_and_signal nohup wait-signal HUP bash -c 'trap "" HUP; exec "$@"' nohup
sleep 1
check "SIGHUP under nohup: ignored, the job goes on" bash -c "kill -0 $pid && ! grep -q 'stop requested' $err"
kill -TERM $pid
finish
check "... a SIGTERM then stops it (exit 75, got $rc)" [ $rc -eq 75 ]
# one stop request sent twice by one process (GNU timeout signals ddprun, then its process group),
# to a ddprun whose parent left SIGTERM blocked: one request, taken (exit 75, the ranks saved)
start_and_signal repeated wait-signal TERM python3 -c 'import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
os.execvp(sys.argv[1], sys.argv[1:])'
sleep 0.1
kill -TERM $pid
finish
check "SIGTERM twice from one process, SIGTERM blocked by the parent -> exit 75 (got $rc)" [ $rc -eq 75 ]
check "... the ranks saved" grep -qF '[rank 1] rank 1 got SIGUSR1, checkpoint saved' $out
# a stop that rank 0 could not answer (held past its deadline): it says it ends the job with exit
# 75 (its checkpoint complete), but held, neither it nor mpirun ends; ddprun ends mpirun 3 s after
# the line, and the job's exit code is the one the rank said
start_and_signal held wait-held
finish
check "a held rank's unanswered stop: ddprun ends mpirun and exits 75, as the rank said (got $rc)" [ $rc -eq 75 ]
check "... saying why it ended mpirun" contains $err "mpirun has not ended the job 3 s after a rank's stop request left unanswered"
check "... no hang (${ms} ms < 30 s)" hang_guard
start_and_signal twice ignore-signal
sleep 0.5
kill -INT $pid
finish
check "second signal stops the job (non-zero)" [ $rc -ne 0 ]
check "second signal is announced" contains $err "second stop request"
check "second signal: no hang (${ms} ms < 30 s)" hang_guard
# an mpirun that outlives the second request's SIGTERM (Open MPI's orderly abort waiting for the
# daemon of a host it cannot reach; here one that ignores SIGTERM and SIGINT), with one rank as
# Open MPI starts them: ddprun's rank wrapper in a process group of its own, its worker a sleep.
# Ten seconds after the second request, or at a third, ddprun kills mpirun's process group and
# ends, and the rank dies with its parent
mkdir -p "$tmp/stuck-mpi/bin"
printf '%s\n' '#!/bin/sh' "trap '' TERM INT" "setsid '$DDPRUN' --rank-wrapper /bin/sleep 600 &" \
    'echo "stuck mpirun $$ rank $!" >&2' 'wait; wait' >"$tmp/stuck-mpi/bin/mpirun"
chmod +x "$tmp/stuck-mpi/bin/mpirun"
gone() { [ -n "$1" ] && { [ ! -e "/proc/$1" ] || grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat"; }; } # or a zombie
stuck() { # NAME STOPS: ddprun on the stuck mpirun, STOPS SIGINTs 0.6 s apart (closer, one
          # process's repeats are one request)
    out=$tmp/$1.out err=$tmp/$1.err mpirun_pid= rank_pid= worker_pid=
    MPI_HOME=$tmp/stuck-mpi "$DDPRUN" -np 2 bench wait-signal >"$out" 2>"$err" &
    pid=$!
    for _ in $(seq 100); do
        read -r mpirun_pid rank_pid < <(sed -n 's/.*stuck mpirun \([0-9]*\) rank \([0-9]*\).*/\1 \2/p' "$err")
        [ -n "$rank_pid" ] && worker_pid=$(pgrep -P "$rank_pid" sleep) && break
        sleep 0.1
    done
    t0=$(date +%s%N)
    for _ in $(seq "$2"); do kill -INT $pid; sleep 0.6; done
    for _ in $(seq 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    kill -KILL $pid 2>/dev/null # still there after 30 s: the hang guard fails (unstick ends the rest)
    finish
    sleep 0.5 # the rank's death signal, and its worker's, delivered
}
unstick() { # what ddprun did not end, so that nothing outlives the test
    [ -z "$mpirun_pid" ] || gone "$mpirun_pid" || kill -KILL -- -"$mpirun_pid"
    [ -z "$rank_pid" ] || gone "$rank_pid" || kill -KILL -- -"$rank_pid"
}
stuck_checks() { # WHAT
    check "$1: ddprun ends (non-zero, got $rc)" [ $rc -ne 0 ]
    check "$1: no hang (${ms} ms < 30 s)" hang_guard
    check "$1: mpirun ($mpirun_pid), the rank's wrapper ($rank_pid) and worker ($worker_pid) are gone" \
        eval 'gone "$mpirun_pid" && gone "$rank_pid" && gone "$worker_pid"'
    unstick
}
stuck stuck2 2
check "saying it kills mpirun ten seconds after the second request" \
    contains $err "mpirun has not ended the job 10 s after the second stop request (a host may be unreachable): killing it"
stuck_checks "stuck mpirun, two requests"
stuck stuck3 3
check "saying the third request kills mpirun" contains $err "third stop request: killing mpirun"
check "without waiting for the ten seconds" lacks $err "has not ended the job 10 s after"
stuck_checks "stuck mpirun, three requests"

# ---- stop requests while the job starts ----
# Each must end with both ranks saving (exit 75): not dropped by an mpirun that has no rank yet,
# not killing a rank that cannot take the signal yet.
both_saved() { contains $out "[rank 0] rank 0 got SIGUSR1, checkpoint saved" && contains $out "[rank 1] rank 1 got SIGUSR1, checkpoint saved"; }
# rank 1's wrapper sends ddprun SIGTERM before it can take a stop signal, then loads for 2 s more
DDP_TEST_FAULT=stop-at-start:1:0:2 run loading -np 2 bench wait-signal
check "stop while rank 1 loads -> exit 75 (got $rc)" [ $rc -eq 75 ]
check "stop while rank 1 loads: both ranks saved" both_saved
check "stop while rank 1 loads: no rank killed" lacks $err "killed by"
# SIGTERM as soon as ddprun has forked mpirun, before any rank exists
out=$tmp/early.out err=$tmp/early.err
"$DDPRUN" -np 2 bench wait-signal >"$out" 2>"$err" &
pid=$!
for _ in $(seq 2000); do pgrep -P $pid >/dev/null && break; sleep 0.005; done
t0=$(date +%s%N)
kill -TERM $pid
finish
check "stop before any rank exists -> exit 75 (got $rc)" [ $rc -eq 75 ]
check "stop before any rank exists: both ranks saved" both_saved
check "stop before any rank exists: no hang (${ms} ms < 30 s)" hang_guard
# two stops while the forked child is not mpirun yet (held 3 s before it resets its signals): the
# second stop's SIGTERM ends it there, not swallowed by the handler it inherited from ddprun
out=$tmp/forkpause.out err=$tmp/forkpause.err
DDP_TEST_FAULT=fork-pause:0:0:3 "$DDPRUN" -np 2 bench wait-signal >"$out" 2>"$err" &
pid=$!
for _ in $(seq 2000); do pgrep -P $pid >/dev/null && break; sleep 0.005; done
t0=$(date +%s%N)
kill -TERM $pid
sleep 0.6 # past the half second within which a process's repeat is one request
kill -TERM $pid
finish
check "second stop while mpirun is being forked: the job ends (exit $rc), no rank started" \
    bash -c "[ $rc -ne 0 ] && ! grep -q 'ready rank' '$out'"
check "... within 10 s (${ms} ms)" [ $ms -lt 10000 ]
# ddprun's stdout read by nobody (a reader that opened the FIFO and does not read: a pager nobody
# scrolls, a terminal on Ctrl-S) while the ranks write as fast as they can: ddprun drains on, says
# so on stderr, and a stop still reaches the ranks, which save and end the job; then, the reader
# reading again, ddprun writes out what it queued, the gap marked where it is, and exits, the
# dropped output counted
mkfifo "$tmp/stalled"
err=$tmp/stalled.err out=$tmp/stalled.err
timeout --foreground -k 10 90 "$DDPRUN" -np 2 bench chatty-wait >"$tmp/stalled" 2>"$err" &
pid=$!
exec 3<"$tmp/stalled"
for _ in $(seq 3000); do contains $err "ddprun: stdout is not being read" && break; sleep 0.01; done
t0=$(date +%s%N)
kill -TERM $pid
for _ in $(seq 3000); do contains $err "job stopped on request, resumable" && break; sleep 0.01; done
ms=$((($(date +%s%N) - t0) / 1000000))
check "stdout not read: ddprun says so on stderr" contains $err "ddprun: stdout is not being read"
check "... the stop forwarded" contains $err "sending SIGUSR1 to all ranks"
check "... the job stopped after saving, within 20 s (${ms} ms)" \
    bash -c "[ $ms -lt 20000 ] && grep -qF 'job stopped on request, resumable' '$err'"
cat <&3 >"$tmp/stalled.out"
exec 3<&-
finish
check "... the reader reading again: exit 75 (got $rc)" [ $rc -eq 75 ]
check "... the gap marked in stdout" grep -q "^ddprun: \[[0-9]* bytes of output dropped here" "$tmp/stalled.out"
check "... the dropped output counted" grep -q "bytes of output were dropped in all" $err
# SIGTERM as a restart begins: the second attempt's start-up is the same window, once its mpirun is
# forked (the first attempt's was reaped before "attempt 2 of 2"; a stop before the fork means no
# restart, and the failed attempt's exit code stands)
out=$tmp/restart_stop.out err=$tmp/restart_stop.err
"$DDPRUN" -np 2 --max-restarts 1 bench fail-first-then-wait >"$out" 2>"$err" &
pid=$!
for _ in $(seq 2000); do contains $err "attempt 2 of 2" && break; sleep 0.005; done
for _ in $(seq 2000); do pgrep -P $pid >/dev/null && break; sleep 0.005; done
t0=$(date +%s%N)
kill -TERM $pid
finish
check "stop as the restart begins -> exit 75 (got $rc)" [ $rc -eq 75 ]
check "stop as the restart begins: both ranks saved" both_saved
# SIGTERM while ddprun reads its config (a FIFO that stays empty until then): nothing starts
mkfifo "$tmp/fifo.yaml"
out=$tmp/prestart.out err=$tmp/prestart.err
"$DDPRUN" -np 2 "$tmp/fifo.yaml" >"$out" 2>"$err" &
pid=$!
catches_sigterm() { # SigCgt's bit for SIGTERM (15): ddprun has its handler (ddprun's: before its exec
    local m         # the pid is this shell's fork, which has bash's handler for SIGTERM)
    m=$(awk '/^SigCgt:/ {print $2}' /proc/$1/status 2>/dev/null)
    [ "$(cat /proc/$1/comm 2>/dev/null)" = ddprun ] && [ -n "$m" ] && [ $(((16#$m >> 14) & 1)) -eq 1 ]
}
# up to 60 s: a loaded 2-core machine has taken more than 10 s to start ddprun and its libraries
for _ in $(seq 1200); do catches_sigterm $pid && break; sleep 0.05; done
check "stop before mpirun starts: ddprun handles SIGTERM while it reads its config" catches_sigterm $pid
t0=$(date +%s%N)
kill -TERM $pid
timeout 10 sh -c 'cat "$1" >"$2"' - "$config" "$tmp/fifo.yaml"
finish
check "stop before mpirun starts -> exit 75 (got $rc)" [ $rc -eq 75 ]
check "stop before mpirun starts: says nothing ran" contains $err "before the job started"
check "stop before mpirun starts: no rank started" lacks $out "[rank"

# ---- restarts ----
run norestart -np 2 bench fail-first
check "without --max-restarts a failure is final" [ $rc -eq 1 ]
run restart -np 2 --max-restarts 1 bench fail-first
check "--max-restarts 1 recovers" [ $rc -eq 0 ]
check "attempt message" contains $err "ddprun: attempt 2 of 2 (restarting after rank 1 on $host failed: exited with code 3)"
check "ranks see the restart count" count_is $out "DDPRUN_RESTART_COUNT=1 MAX=1 ok" 2
# a program that cannot be started at all (mpirun not found: exit 127) is not tried again
MPI_HOME=$tmp/no-mpi run nompirun -np 2 --max-restarts 3 bench fail-first
check "mpirun not found: exit 1 (got $rc)" [ $rc -eq 1 ]
check "mpirun not found: no second attempt" lacks $err "attempt 2"
check "mpirun not found: says why it is not restarted" contains $err "not restarting: a program could not be started"
# nor is a job mpirun refuses before any rank starts (an option it rejects): the same refusal again
run refused -np 2 --max-restarts 3 --bind-to no-such-policy bench fail-first
check "mpirun refuses the job: exit 1 (got $rc)" [ $rc -eq 1 ]
check "mpirun refuses the job: no second attempt" lacks $err "attempt 2"
check "mpirun refuses the job: says why it is not restarted" contains $err "not restarting: mpirun started no rank"

discover disc_restart "$host:2" "$host:3"
run disc_restart --host-discovery "$tmp/disc_restart.sh" --max-restarts 1 bench fail-first
check "discovery before a restart: the restart recovers (exit $rc)" [ $rc -eq 0 ]
check "discovery before a restart: asked again" [ "$(cat "$tmp/disc_restart.runs")" -eq 2 ]
check "discovery before a restart: the restart runs on the slots it found" \
    count_is $out "DDPRUN_RESTART_COUNT=1 MAX=1 ok" 3

# ---- checkpoint tool runs in-process ----
run ckpt ckpt
check "ckpt without a verb is a usage error" [ $rc -eq 2 ]

echo "launcher: $passed passed, $failed failed"
[ $failed -eq 0 ] && [ $passed -gt 0 ]
