#!/usr/bin/env bash
# run_fuzz.sh TARGET CORPUS [DICT] — runs one libFuzzer target of tests/fuzz for a bounded time and
# fails on any finding. Fuzzes a copy of CORPUS (the committed seeds are never written to), for
# FUZZ_SECONDS seconds (default 20), single process, with -timeout=10 (an input slower than that
# is a hang), -rss_limit_mb=2048 and leak detection, and DICT when that file exists. Prints
# libFuzzer's final stats (stat::number_of_executed_units is the executions) and a summary line.
# On a finding, the reproducer is kept in build-fuzz/fuzz-findings/ (or $FUZZ_FINDINGS) and shown
# as hex; replay it with `TARGET FILE`.
set -uo pipefail
target=$1 corpus=$2 dict=${3:-}
name=$(basename "$target")
seconds=${FUZZ_SECONDS:-20}
findings=${FUZZ_FINDINGS:-$(dirname "$(dirname "$(dirname "$target")")")/fuzz-findings}
[ -x "$target" ] || { echo "run_fuzz: $target is not an executable"; exit 2; }
[ -d "$corpus" ] || { echo "run_fuzz: no seed corpus $corpus"; exit 2; }

scratch_base=/dev/shm
[ -d "$scratch_base" ] && [ -w "$scratch_base" ] || scratch_base=${TMPDIR:-/tmp}
work=$(mktemp -d "$scratch_base/ddprun-$name.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts" "$work/tmp"
cp -R "$corpus/." "$work/corpus/"

args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
      -artifact_prefix="$work/artifacts/")
[ -n "$dict" ] && [ -f "$dict" ] && args+=(-dict="$dict")
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}
echo "run_fuzz: $name for ${seconds}s on a copy of $corpus ($(ls "$corpus" | wc -l) seeds)"
TMPDIR="$work/tmp" "$target" "${args[@]}" "$work/corpus" > "$work/log" 2>&1
rc=$?
# the progress lines are many; the report, the stats and the last few lines are what matter
grep -v -E '^#[0-9]+.*(NEW|REDUCE|pulse|RELOAD)' "$work/log" | tail -n 120
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
if [ $rc -ne 0 ] || ls "$work/artifacts/"* >/dev/null 2>&1; then
    mkdir -p "$findings/$name"
    for a in "$work/artifacts/"*; do
        [ -f "$a" ] || continue
        cp "$a" "$findings/$name/"
        echo "run_fuzz: finding $findings/$name/$(basename "$a") ($(stat -c %s "$a") bytes):"
        od -A x -t x1z -v "$a" | head -n 40
    done
    echo "run_fuzz: $name FAILED (exit $rc) after ${execs:-?} executions"
    exit 1
fi
grown=$(ls "$work/corpus" | wc -l)
echo "run_fuzz: $name: ${execs:-?} executions in ${seconds}s, corpus grew to $grown inputs, no findings"
