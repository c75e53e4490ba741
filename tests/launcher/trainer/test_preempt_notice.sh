#!/usr/bin/env bash
# The cloud's preemption notice through the real launcher: a local server answers like AWS (IMDSv2),
# GCP or Azure (tests/launcher/metadata_server.py, reached through DDPRUN_METADATA_URL). Once it
# starts announcing the preemption, the np=2 job saves and exits 75 within the poll interval plus
# the save time, naming the notice; the checkpoint resumes. `auto` finds GCP and Azure by their
# answers (Azure by its instance metadata: its Scheduled Events' first answer comes late); with no
# metadata service it stays silent and the job ends normally. Azure's events for 80 other VMs of the
# placement group (an answer of 24 KB) do not stop the job, nor while its VM name's first request
# fails, and this VM's event among them does; nor does an AWS answer of 200 that is garbage. AWS
# inside a container, where the IMDSv2 token's answer does not arrive: found by `auto` and asked
# without a token (IMDSv1), or, where the instance refuses that, a warning names the hop limit.
source "$(dirname "$0")/../../lib.sh"
POLL=0.5
LONG=(model.mlp.hidden=[512,512] optimizer.kind=adamw optimizer.nesterov=false train.max_steps=3000
      train.log_every=5)
SERVER=$DDP_SRC/tests/launcher/metadata_server.py
server_pid=

start_server() { # provider dir
    mkdir -p "$2"
    python3 "$SERVER" "$1" "$2" &
    server_pid=$!
    for _ in $(seq 100); do [ -f "$2/port" ] && break; sleep 0.05; done
    export DDPRUN_METADATA_URL=http://127.0.0.1:$(cat "$2/port")
}
stop_server() { kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; }
trap 'stop_server; rm -rf "$TMP"' EXIT

# quiet_job NAME SETTING [FLAG...]: an np=2 job of 40 steps beside an AWS stand-in that announces
# nothing, its DIR/meta holding the FLAG files (metadata_server.py); exit status in rc, log NAME/job.log
quiet_job() {
    local d=$TMP/$1 setting=$2
    shift 2
    mkdir -p "$d/meta" && for f in "$@"; do touch "$d/meta/$f"; done
    start_server aws "$d/meta"
    "$DDPRUN" -np 2 "$SMALL" run.dir="$d/run" train.max_steps=40 checkpoint.notice_poll_s=$POLL \
        checkpoint.preemption_notice="$setting" >"$d/job.log" 2>&1
    rc=$?
    stop_server
}

# notice_case PROVIDER SETTING NAMED REFUSALS NOTICE_PATH [DIR]: run until step 20 and the watch's first request
# to NOTICE_PATH answered, then the server announces the preemption
notice_case() {
    local p=$1 setting=$2 d=$TMP/${6:-$1}
    start_server "$p" "$d/meta"
    "$DDPRUN" -np 2 "$SMALL" run.dir="$d/run" "${LONG[@]}" checkpoint.preemption_notice="$setting" \
        checkpoint.notice_poll_s=$POLL >"$d/job.log" 2>&1 &
    local pid=$! reached=no
    for _ in $(seq 1200); do
        grep -q '"step":20,' "$d/run/metrics.jsonl" 2>/dev/null && { reached=yes; break; }
        sleep 0.05
    done
    check "$p ($setting): training ran to step 20 before any notice" [ $reached = yes ]
    # the bound below counts from the notice: the watch has had its first answer before it (Azure's
    # comes 3 s late), so that a loaded machine's slow start is not counted
    local answered=no
    for _ in $(seq 1200); do
        grep -q "GET .*$5" "$d/meta/requests.log" 2>/dev/null && { answered=yes; break; }
        sleep 0.05
    done
    check "$p ($setting): the watch had its first answer before the notice" [ $answered = yes ]
    local t0 t1 rc
    t0=$(date +%s.%N)
    touch "$d/meta/notice"
    wait $pid
    rc=$?
    t1=$(date +%s.%N)
    stop_server
    check "$p ($setting): the job exits 75 (got $rc)" [ $rc -eq 75 ]
    check "$p ($setting): the notice is named" grep -q "preemption notice: $3" "$d/job.log"
    check "$p ($setting): rank 0 says why it stopped" grep -q "stopped by the cloud's preemption notice" "$d/job.log"
    local saved save_ms bound took
    saved=$(last_ckpt "$d/run")
    check "$p ($setting): a checkpoint was saved ($saved)" eval '[ -n "$saved" ] && "$DDPRUN" ckpt info "$saved" >/dev/null'
    save_ms=$(sed -n 's/.*written in \([0-9.]*\) ms.*/\1/p' "$d/job.log" | tail -n 1)
    # poll interval + save + one step, MPI finalize and the exit through mpirun (1-2 s on an idle
    # 2-core machine; 10 s allowed for a loaded one)
    bound=$(python3 -c "print($POLL + ${save_ms:-0} / 1000 + 10)")
    took=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
    echo "$p ($setting): notice served -> job exited in $took s (save ${save_ms:-?} ms, bound $bound s)"
    check "$p ($setting): exited within poll interval + save time + 10 s" python3 -c "exit(not $took <= $bound)"
    check "$p ($setting): the server saw only requests with the provider's headers" \
        bash -c "! grep REFUSED '$d/meta/requests.log' | grep -v '$4'"
}

notice_case aws aws "AWS spot/instance-action: terminate at 2026-11-25T18:02:00Z" "^$" "spot/instance-action"
check "aws: the IMDSv2 token was asked for" grep -q "PUT /latest/api/token" "$TMP/aws/meta/requests.log"
# AWS inside a container (the instance's hop limit 1): the token's answer never arrives; `auto`
# finds AWS by its answers to the others' questions (Server: EC2ws), and the notice is asked
# without a token (IMDSv1)
mkdir -p "$TMP/aws-v1/meta" && touch "$TMP/aws-v1/meta/token_lost" "$TMP/aws-v1/meta/imdsv1"
notice_case aws auto "AWS spot/instance-action: terminate at 2026-11-25T18:02:00Z" "^$" "spot/instance-action" aws-v1
check "aws in a container (auto): detected" grep -q "watching AWS's preemption notice" "$TMP/aws-v1/job.log"
check "aws in a container: asked without a token, said once" \
    [ "$(grep -c 'no IMDSv2 token comes back.*asking without one (IMDSv1)' "$TMP/aws-v1/job.log")" -eq 1 ]
# ... where the instance refuses IMDSv1: `auto` still finds AWS (its 401s say EC2ws), and a warning
# says how to let the token through; the job ends normally
quiet_job aws-hop auto token_lost
check "aws in a container without IMDSv1: the job completes (exit 0, got $rc)" [ $rc -eq 0 ]
check "... AWS detected by its refusal" grep -q "watching AWS's preemption notice" "$TMP/aws-hop/job.log"
check "... the warning names the hop limit, once" \
    [ "$(grep -c 'no IMDSv2 token came back (no answer) and IMDSv1 is refused.*--instance-id ID '\
'--http-put-response-hop-limit 2; asking' "$TMP/aws-hop/job.log")" -eq 1 ]
# auto: the detection asks all three providers at once; the others' questions may be refused
notice_case gcp auto "GCP instance/preempted: TRUE" "/metadata/instance" "instance/preempted"
check "gcp (auto): detected" grep -q "watching GCP's preemption notice" "$TMP/gcp/job.log"
mkdir -p "$TMP/azure/meta" && touch "$TMP/azure/meta/name_fails"
notice_case azure auto "Azure Scheduled Events: Preempt (EventId 5A2E-THIS" "preempted" "scheduledevents"
check "azure (auto): detected" grep -q "watching Azure's preemption notice" "$TMP/azure/job.log"
check "azure: the event for another VM was not taken for this one" bash -c "! grep -q 0F1C-OTHER '$TMP/azure/job.log'"

# the saved checkpoint resumes (the stop path is the signal's, whose resume test_preempt.sh proves exact)
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/aws/run" "${LONG[@]}" train.max_steps=60 checkpoint.resume=auto \
    >"$TMP/resume.log" 2>&1
check "the job resumes from the notice's checkpoint" grep -q "resumed from .*ckpt-" "$TMP/resume.log"

# a service answering 200 with garbage: no notice; reported once, escaped; the job ends normally
quiet_job garbage aws garbage
check "aws answering garbage: the job completes (exit 0, got $rc)" [ $rc -eq 0 ]
check "aws answering garbage: not taken for a notice" bash -c "! grep -q 'preemption notice:' '$TMP/garbage/job.log'"
check "aws answering garbage: reported once" [ "$(grep -c 'not the documented format' "$TMP/garbage/job.log")" -eq 1 ]
check "aws answering garbage: its bytes escaped" grep -q 'answered "\\x1b\[2J\\x00' "$TMP/garbage/job.log"
check "aws answering garbage: the log is printable text" bash -c "! LC_ALL=C grep -q '[^[:print:][:space:]]' '$TMP/garbage/job.log'"

# auto with no metadata service: one line says no notice is watched, and the job ends normally
export DDPRUN_METADATA_URL=http://127.0.0.1:9   # discard port: connection refused
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/none" checkpoint.preemption_notice=auto >"$TMP/none.log" 2>&1
check "auto on no cloud: the job completes" [ $? -eq 0 ]
check "auto on no cloud: said once (one host)" [ "$(grep -c "preemption_notice auto: no cloud's metadata service (AWS, GCP, Azure) answered within 1 s: this host's preemption notices are not watched" "$TMP/none.log")" -eq 1 ]
check "auto on no cloud: nothing else said about notices" [ "$(grep -ci 'notice' "$TMP/none.log")" -eq 1 ]
# a provider named explicitly whose service does not answer is reported, and the job goes on
"$DDPRUN" -np 2 "$SMALL" run.dir="$TMP/down" checkpoint.preemption_notice=aws >"$TMP/down.log" 2>&1
check "aws without a metadata service: the job completes" [ $? -eq 0 ]
check "aws without a metadata service: reported once" [ "$(grep -c 'preemption_notice AWS' "$TMP/down.log")" -eq 1 ]
finish
