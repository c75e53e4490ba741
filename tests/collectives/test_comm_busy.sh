#!/usr/bin/env bash
# A rank busy outside the collectives does not shield a hung one: at np 3 rank 0 answers that it is
# busy for 20 s, rank 1 answers so for 2.5 s and then sleeps outside MPI, and rank 2 waits in a
# non-blocking all-reduce issued with the label "bucket 7 of 9" (cleared before the wait) under a
# deadline of 1 s (test_comm --busy-and-hung). Rank 2's verdict ends the job within seconds, naming
# rank 1 as not arrived, rank 0 as busy and the all-reduce by its label; were a busy rank's word to
# hold every wait, or an answer to count past its round, it would come only once rank 0's work
# ended, after 20 s. $1: the test_comm program.
source "$(dirname "$0")/../lib.sh"
t0=$(date +%s.%N)
timeout 120 mpirun -np 3 --oversubscribe --bind-to none "$1" --busy-and-hung >"$TMP/busy.log" 2>&1
rc=$?
took=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
sed 's/^/# /' "$TMP/busy.log" | grep -F "ddp.timeout_s: " | head -3
ended() { [ $rc -ne 0 ] && [ $rc -ne 124 ]; } # by the verdict, not by the test's own limit
check "the job ends in a verdict (exit $rc)" ended
check "before rank 0's work ends (took $took s, rank 0 busy for 20 s)" \
    python3 -c "import sys; sys.exit(0 if $took < 15 else 1)"
check "the verdict names rank 1 as not arrived" grep -q "ddp.timeout_s: .*Not arrived: rank 1 (host" "$TMP/busy.log"
check "... and only rank 1" bash -c "! grep -q 'Not arrived: rank 1 (host [^)]*), rank' '$TMP/busy.log'"
check "... says the deadline started over" grep -q "did not complete within 1 s of the last time every rank answered" \
    "$TMP/busy.log"
check "... and lists rank 0 as busy" \
    grep -q "ddp.timeout_s: .*rank 0 outside the collectives, busy with test work" "$TMP/busy.log"
check "... and names the all-reduce by its label at the issue" \
    grep -q "ddp.timeout_s: all-reduce #[0-9]* (bucket 7 of 9) did not complete" "$TMP/busy.log"
finish
