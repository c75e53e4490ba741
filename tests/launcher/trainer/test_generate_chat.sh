#!/usr/bin/env bash
# `ddprun generate --chat` on a tiny GPT-2 trained one step on byte tokens (scripts/prepare-text
# --tokenizer bytes of README.md), with chat.json files written here by hand (the byte tokenizer's
# ids are the bytes): --encode-only --chat prints exactly user_prefix + the prompt's bytes +
# user_suffix, with chat.json found beside the run's tokenizer, beside --tokenizer, or by
# --chat-file; the answer is the plain continuation of the wrapped prompt (greedy and seeded) cut
# before the first stop id, so a stop id the model draws first gives an empty answer, one it never
# draws all --tokens tokens, and with also_stop ids the first drawn of stop and those ends it (a
# version 1 file, without also_stop, is read as before; one with it refused); outside --chat the prompt follows the tokenizer's end-of-text id (a
# chat of that id alone before the prompt draws the same), unprinted; a missing or malformed
# chat.json exits 2 naming the file; plain generate ends at a drawn separator, unprinted (--no-stop: past it); --tokens past the context's room after the wrapped prompt draws
# only that room, so the template never slides out of the window; a sentencepiece tokenizer's dummy-prefix space is not printed.
source "$(dirname "$0")/../../lib.sh"
TINY=$DDP_SRC/tests/launcher/trainer/gpt2_tiny.yaml
DATA=$TMP/data
TOK=$DATA/tokenizer.bin
PREFIX=$'### Question:\n' SUFFIX=$'\n### Answer:\n' PROMPT="Who wrote it?"
N=8

"$DDP_SRC/scripts/prepare-text" --tokenizer bytes "$DDP_SRC/README.md" "$DATA" >/dev/null
check "prepare-text: byte-token data" [ -f "$TOK" ]
# a context of 48: the wrapped prompt (40 ids) and the answer fit, as --chat requires of the prompt
mpirun -np 1 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$TINY" run.dir="$TMP/run" data.path="$DATA" \
    train.max_steps=1 data.seq_len=48 train.sample_every=1 train.sample_tokens=300 >"$TMP/run.log" 2>&1
CK=$TMP/run/checkpoints/ckpt-00000001.ddp
check "a 1-step tiny GPT-2 checkpoint" [ -f "$CK" ]
# its text sample, 300 bytes drawn nearly at random (some 40 of them control bytes), reaches the log
# as UTF-8 with no control byte but newline and tab, the others escaped, each newline indented (the
# first line after the sample's that is not is the job's next one, the checkpoint's)
check "the training's text sample in the log: UTF-8, control bytes escaped, lines indented" python3 -c '
import re, sys
d = open(sys.argv[1], "rb").read()
d.decode("utf-8")
bad = sorted({b for b in d if (b < 0x20 and b not in (9, 10)) or b == 0x7F})
s = d.decode()
sample = s[s.index("sample at step 1: "):]
after = next(l for l in sample.split("\n")[1:] if not l.startswith("  "))
sys.exit(f"control bytes {bad}" if bad else "no \\xNN escape" if not re.search(r"\\x[01][0-9A-F]", sample) else
         None if after.startswith("checkpoint: ") else f"a sample line not indented: {after[:60]!r}")' \
    "$TMP/run.log"

ids() { printf '%s' "$1" | od -An -v -tu1 | tr -s ' \n' '  ' | sed 's/^ //; s/ $//'; } # TEXT: its bytes
csv() { ids "$1" | sed 's/ /, /g'; }
# chat_json FILE STOP [ALSO]: PREFIX and SUFFIX as the user turn, [STOP, 10] the end of turn, the ids
# ALSO (comma-separated) also_stop
chat_json() {
    printf '{"version": 2, "template": "by hand", "tokenizer": "bytes",\n "user_prefix": [%s],\n "user_suffix": [%s],\n "end_of_turn": [%s, 10], "stop": %s%s}\n' \
        "$(csv "$PREFIX")" "$(csv "$SUFFIX")" "$2" "$2" "${3+, \"also_stop\": [$3]}" >"$1"
}
chat_json "$DATA/chat.json" 0

# --- the wrapped ids
WANT="$(ids "$PREFIX") $(ids "$PROMPT") $(ids "$SUFFIX")"
"$DDPRUN" generate "$CK" --encode-only --chat --prompt "$PROMPT" >"$TMP/enc1" 2>"$TMP/enc.err"
check "--encode-only --chat: user_prefix, the prompt's bytes, user_suffix (chat.json of the run's data.path)" \
    [ "$(cat "$TMP/enc1")" = "$WANT" ]
"$DDPRUN" generate "$CK" --chat --prompt "$(printf 'x%.0s' $(seq 9))$PROMPT" >/dev/null 2>"$TMP/long.err"
check "--chat with a wrapped prompt longer than the context (49 ids of 48): refused (exit $?), naming both" \
    grep -q "the wrapped prompt is 49 tokens, more than the model's context of 48" "$TMP/long.err"
"$DDPRUN" generate --encode-only --chat --tokenizer "$TOK" --prompt "$PROMPT" >"$TMP/enc2" 2>>"$TMP/enc.err"
check "... chat.json beside --tokenizer" [ "$(cat "$TMP/enc2")" = "$WANT" ]
mkdir -p "$TMP/elsewhere" && mv "$DATA/chat.json" "$TMP/elsewhere/c.json"
"$DDPRUN" generate "$CK" --encode-only --chat --chat-file "$TMP/elsewhere/c.json" --prompt "$PROMPT" >"$TMP/enc3" 2>>"$TMP/enc.err"
check "... --chat-file PATH" [ "$(cat "$TMP/enc3")" = "$WANT" ]
printf '%s' "$PROMPT" >"$TMP/prompt.txt"
"$DDPRUN" generate "$CK" --encode-only --chat --chat-file "$TMP/elsewhere/c.json" --prompt-file "$TMP/prompt.txt" \
    >"$TMP/enc4" 2>>"$TMP/enc.err"
check "... --prompt-file FILE" [ "$(cat "$TMP/enc4")" = "$WANT" ]
"$DDPRUN" generate "$CK" --encode-only --chat --chat-file "$TMP/elsewhere/c.json" >"$TMP/enc5" 2>>"$TMP/enc.err"
check "... no prompt: an empty user message" [ "$(cat "$TMP/enc5")" = "$(ids "$PREFIX") $(ids "$SUFFIX")" ]
mv "$TMP/elsewhere/c.json" "$DATA/chat.json"

# --- the answer: the plain continuation of the wrapped prompt, up to the first stop id
# continuation OUT: the ids plain `generate` drew after PREFIX PROMPT SUFFIX (its output OUT)
continuation() {
    python3 -c 'import sys; d, p = open(sys.argv[1], "rb").read(), sys.argv[2].encode()
sys.exit(f"output {d!r} is not the prompt, then a continuation") if not (d.startswith(p) and d.endswith(b"\n")) else None
print(*d[len(p):-1])' "$1" "$PREFIX$PROMPT$SUFFIX"
}
# answer_is OUT CONT STOPS: OUT is CONT's ids up to the first one of the ids STOPS, then a newline
answer_is() {
    python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); cont = [int(x) for x in sys.argv[2].split()]
stops = {int(x) for x in sys.argv[3].split()}; cut = next((i for i, x in enumerate(cont) if x in stops), len(cont))
want = bytes(cont[:cut]) + b"\n"; sys.exit(0 if d == want else f"answer {d!r}, expected {want!r}")' "$@"
}
never() { python3 -c 'import sys; print(min(set(range(256)) - {int(x) for x in sys.argv[1].split()}))' "$1"; }
for draw in "--temperature 0" "--seed 5 --top-k 0"; do
    # shellcheck disable=SC2086 # $draw is flags
    "$DDPRUN" generate "$CK" --prompt "$PREFIX$PROMPT$SUFFIX" --tokens $N $draw >"$TMP/plain" 2>"$TMP/plain.err"
    CONT=$(continuation "$TMP/plain")
    check "$draw: plain generate draws $N tokens after the wrapped prompt: $CONT" [ "$(wc -w <<<"$CONT")" -eq $N ]
    read -ra C <<<"$CONT"
    # the first id drawn (an empty answer), the last, and one never drawn (all $N tokens)
    for stop in "${C[0]}" "${C[N - 1]}" "$(never "$CONT")"; do
        chat_json "$DATA/chat.json" "$stop"
        # shellcheck disable=SC2086
        "$DDPRUN" generate "$CK" --chat --prompt "$PROMPT" --tokens $N $draw >"$TMP/answer" 2>"$TMP/answer.err"
        check "$draw, stop id $stop: exit 0" [ $? -eq 0 ]
        check "$draw, stop id $stop: the answer alone, cut before the first stop id" answer_is "$TMP/answer" "$CONT" "$stop"
    done
    check "$draw: a stop id never drawn (the last one asked): all $N tokens" [ "$(wc -c <"$TMP/answer")" -eq $((N + 1)) ]
    # also_stop: a stop id never drawn, and the last and the third drawn ids as the model's other ends
    chat_json "$DATA/chat.json" "$(never "$CONT")" "${C[N - 1]}, ${C[2]}"
    # shellcheck disable=SC2086
    "$DDPRUN" generate "$CK" --chat --prompt "$PROMPT" --tokens $N $draw >"$TMP/answer" 2>"$TMP/answer.err"
    check "$draw, also_stop ${C[N - 1]} ${C[2]}: the answer cut before the first of them" \
        answer_is "$TMP/answer" "$CONT" "${C[N - 1]} ${C[2]}"
    check "$draw, also_stop: the log names them" grep -qF "stop at id $(never "$CONT") (also at ${C[N - 1]}, ${C[2]})" \
        "$TMP/answer.err"
done
# --tokens past the context: the answer ends where the context does (48 - 40 + 1 ids: the last one
# drawn is never read), never sliding the template out of the window ($draw: the loop's last)
# shellcheck disable=SC2086
"$DDPRUN" generate "$CK" --prompt "$PREFIX$PROMPT$SUFFIX" --tokens 9 $draw >"$TMP/plain9" 2>/dev/null
CONT9=$(continuation "$TMP/plain9")
chat_json "$DATA/chat.json" "$(never "$CONT9")"
# shellcheck disable=SC2086
"$DDPRUN" generate "$CK" --chat --prompt "$PROMPT" --tokens 20 $draw >"$TMP/full" 2>"$TMP/full.err"
check "--tokens 20 after a 40-id prompt in a 48-id context: the first 9 alone" answer_is "$TMP/full" "$CONT9" ""
check "... said" grep -qF "up to 9 to draw, what the context leaves" "$TMP/full.err"
check "the log line says where the chat came from" \
    grep -q "chat: $(wc -w <<<"$(ids "$PREFIX")") + $(wc -w <<<"$(ids "$PROMPT")") + $(wc -w <<<"$(ids "$SUFFIX")") ids from $DATA/chat.json, stop at id" \
    "$TMP/answer.err"

# --- outside --chat the prompt follows the data's document separator (tokenizer.bin's end-of-text
# id, as prepare-text put it before every document): plain generate prints the prompt and then
# what a chat of user_prefix [EOT] (no suffix) stopping at EOT answers to it; the separator is not
# printed, and drawing it ends the draw.
EOT=0
mkdir -p "$TMP/eot"
with_eot() { # ID OUT: the byte tokenizer with ID as its end-of-text id
    python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[12:16] = int(sys.argv[2]).to_bytes(4, "little")
open(sys.argv[3], "wb").write(b)' "$TOK" "$1" "$2"
}
with_eot $EOT "$TMP/eot/tokenizer.bin"
printf '{"version": 1, "user_prefix": [%s], "user_suffix": [], "end_of_turn": [%s], "stop": %s}\n' "$EOT" "$EOT" \
    "$EOT" >"$TMP/eot/chat.json"
G=(--tokenizer "$TMP/eot/tokenizer.bin" --prompt "$PROMPT" --tokens $N --seed 3 --top-k 0)
"$DDPRUN" generate "$CK" "${G[@]}" >"$TMP/sep" 2>"$TMP/sep.err"
check "separator: exit 0" [ $? -eq 0 ]
"$DDPRUN" generate "$CK" "${G[@]}" --chat >"$TMP/sep-chat" 2>/dev/null
check "separator: the prompt, then the continuation of [$EOT] + the prompt" \
    [ "$(cat "$TMP/sep")" = "$PROMPT$(cat "$TMP/sep-chat")" ]
check "separator: the log names the start token" \
    grep -qF "$(($(wc -w <<<"$(ids "$PROMPT")") + 1)) prompt tokens (the first the start token $EOT)" "$TMP/sep.err"
"$DDPRUN" generate "$CK" "${G[@]/$TMP\/eot\/tokenizer.bin/$TOK}" >"$TMP/nosep" 2>"$TMP/nosep.err"
check "no separator (the byte tokenizer): nothing before the prompt" \
    bash -c "! grep -q 'start token' '$TMP/nosep.err' && ! cmp -s '$TMP/sep' '$TMP/nosep'"

# --- a drawn separator ends the draw, unprinted; --no-stop draws past it. Which ids a one-step model
# draws is chance, so the separator is the first of a few bytes missing from the prompt (a separator
# is no byte token) that its own long, flat draw (temperature 3) holds: each is drawn with a chance
# near 1/256 a token, so 3000 draws all miss one with a chance near e^-11.
D=(--prompt "$PROMPT" --tokens 3000 --seed 3 --top-k 0 --temperature 3)
for sep in 0 1 2 3; do
    with_eot $sep "$TMP/eot/sep.bin"
    "$DDPRUN" generate "$CK" --tokenizer "$TMP/eot/sep.bin" "${D[@]}" --no-stop >"$TMP/all" 2>"$TMP/all.err"
    at=$(python3 -c 'import sys; print(open(sys.argv[1], "rb").read()[len(sys.argv[2]):-1].find(bytes([int(sys.argv[3])])))' \
        "$TMP/all" "$PROMPT" $sep)
    [ "$at" -ge 0 ] && break
done
check "--no-stop: the prompt and all 3000 tokens ($sep first drawn at $at)" \
    [ "$(wc -c <"$TMP/all")" -eq $((${#PROMPT} + 3000 + 1)) ]
"$DDPRUN" generate "$CK" --tokenizer "$TMP/eot/sep.bin" "${D[@]}" >"$TMP/stopped" 2>"$TMP/stopped.err"
check "separator $sep drawn: the text ends before it (the first $at tokens)" \
    cmp "$TMP/stopped" <(head -c $((${#PROMPT} + at)) "$TMP/all"; echo)
check "... the log names it" grep -qF "up to 3000 to draw" "$TMP/stopped.err"
check "... and the stop" grep -qF "stop at the document separator, id $sep" "$TMP/stopped.err"

# --- a sentencepiece split with a dummy prefix (tokenizer.bin's fifth int32 5): the prompt is encoded
# after a space and printed as typed, without it, as transformers' decoder strips it
mkdir -p "$TMP/sp"
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[16:20] = (5).to_bytes(4, "little")
open(sys.argv[2], "wb").write(b)' "$TOK" "$TMP/sp/tokenizer.bin"
S=(--tokenizer "$TMP/sp/tokenizer.bin" --prompt "$PROMPT")
"$DDPRUN" generate --encode-only "${S[@]}" >"$TMP/sp.ids" 2>/dev/null
check "sentencepiece: the prompt encoded after a space" [ "$(cat "$TMP/sp.ids")" = "32 $(ids "$PROMPT")" ]
"$DDPRUN" generate "$CK" "${S[@]}" --tokens $N --temperature 0 >"$TMP/sp.out" 2>"$TMP/sp.err"
check "sentencepiece: the prompt printed as typed, then $N bytes: $(head -c 60 "$TMP/sp.out")" \
    bash -c "[ \"\$(head -c ${#PROMPT} '$TMP/sp.out')\" = '$PROMPT' ] && [ \$(wc -c <'$TMP/sp.out') -eq $((${#PROMPT} + N + 1)) ]"

# --- refusals: exit 2, the file named, nothing on stdout
refused() { # WHAT FILE ERE ARGS...: generate with ARGS exits 2, its message names FILE and matches ERE
    local what=$1 file=$2 pattern=$3 rc=0; shift 3
    "$DDPRUN" generate "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
    check "$what: exit 2 ($rc)" [ $rc -eq 2 ]
    check "$what: $(head -c 300 "$TMP/err")" grep -qF -- "$file" "$TMP/err"
    check "$what: says why" grep -qE -- "$pattern" "$TMP/err"
    check "$what: nothing printed" [ ! -s "$TMP/out" ]
}
rm "$DATA/chat.json"
refused "no chat.json beside the run's tokenizer" "$DATA/chat.json" "cannot open.*prepare-chat writes chat.json" \
    "$CK" --chat --prompt "$PROMPT"
refused "no chat.json beside --tokenizer (--encode-only)" "$DATA/chat.json" "cannot open" \
    --encode-only --chat --tokenizer "$TOK" --prompt "$PROMPT"
refused "a missing --chat-file" "$TMP/nope.json" "cannot open" "$CK" --chat --chat-file "$TMP/nope.json"
bad() { # NAME TEXT: $TMP/NAME.json holding TEXT
    printf '%s\n' "$2" >"$TMP/$1.json"
}
GOOD_PREFIX="\"user_prefix\": [$(csv "$PREFIX")], \"user_suffix\": [$(csv "$SUFFIX")]"
bad json '{"version": 1,'
bad nostop "{\"version\": 1, $GOOD_PREFIX, \"end_of_turn\": [10]}"
bad mismatch "{\"version\": 1, $GOOD_PREFIX, \"end_of_turn\": [10, 11], \"stop\": 11}"
bad range "{\"version\": 1, $GOOD_PREFIX, \"end_of_turn\": [256], \"stop\": 256}"
bad version "{\"version\": 3, $GOOD_PREFIX, \"end_of_turn\": [10], \"stop\": 10}"
bad empty "{\"version\": 1, $GOOD_PREFIX, \"end_of_turn\": [], \"stop\": 10}"
bad notids "{\"version\": 1, \"user_prefix\": \"### Question\", \"user_suffix\": [], \"end_of_turn\": [10], \"stop\": 10}"
bad negative "{\"version\": 1, $GOOD_PREFIX, \"end_of_turn\": [-1], \"stop\": -1}"
bad extra "{\"version\": 1, $GOOD_PREFIX, \"end_of_turn\": [10], \"stop\": 10, \"system\": \"hi\"}"
bad array '[1, 2, 3]'
bad also_range "{\"version\": 2, $GOOD_PREFIX, \"end_of_turn\": [10], \"stop\": 10, \"also_stop\": [3, 256]}"
bad also_text "{\"version\": 2, $GOOD_PREFIX, \"end_of_turn\": [10], \"stop\": 10, \"also_stop\": 3}"
bad also_v1 "{\"version\": 1, $GOOD_PREFIX, \"end_of_turn\": [10], \"stop\": 10, \"also_stop\": [3]}"
refused "invalid JSON" "$TMP/json.json:" "json\.json:[0-9]+:[0-9]+" "$CK" --chat --chat-file "$TMP/json.json" --prompt x
refused "no stop" "$TMP/nostop.json" 'no "stop"' "$CK" --chat --chat-file "$TMP/nostop.json" --prompt x
refused "stop not end_of_turn's first id" "$TMP/mismatch.json:1:" "stop is 11, not end_of_turn's first id 10" \
    "$CK" --chat --chat-file "$TMP/mismatch.json" --prompt x
refused "an id outside the tokenizer" "$TMP/range.json:1:" "end_of_turn\[0\] is 256, outside the tokenizer's 256 ids" \
    "$CK" --chat --chat-file "$TMP/range.json" --prompt x
refused "another version" "$TMP/version.json:1:" "version 3, this ddprun reads versions 1 to 2" \
    "$CK" --chat --chat-file "$TMP/version.json" --prompt x
refused "an empty end of turn" "$TMP/empty.json:1:" "end_of_turn is empty" \
    "$CK" --chat --chat-file "$TMP/empty.json" --prompt x
refused "ids that are text" "$TMP/notids.json:1:" '"user_prefix" is a string, not an array of token ids' \
    "$CK" --chat --chat-file "$TMP/notids.json" --prompt x
refused "a negative id" "$TMP/negative.json:1:" "end_of_turn\[0\] is a number \(-1\), not a token id" \
    "$CK" --chat --chat-file "$TMP/negative.json" --prompt x
refused "an unknown key" "$TMP/extra.json:1:" 'unknown key "system"' \
    "$CK" --chat --chat-file "$TMP/extra.json" --prompt x
refused "not an object" "$TMP/array.json" "an array, not an object" \
    --encode-only --chat --tokenizer "$TOK" --chat-file "$TMP/array.json" --prompt x
refused "an also_stop id outside the tokenizer" "$TMP/also_range.json:1:" \
    "also_stop\[1\] is 256, outside the tokenizer's 256 ids" "$CK" --chat --chat-file "$TMP/also_range.json" --prompt x
refused "also_stop in a version 1 file" "$TMP/also_v1.json:1:" "also_stop in a version 1 chat.json" \
    "$CK" --chat --chat-file "$TMP/also_v1.json" --prompt x
refused "also_stop not a list" "$TMP/also_text.json:1:" '"also_stop" is a number, not an array of token ids' \
    "$CK" --chat --chat-file "$TMP/also_text.json" --prompt x
refused "--chat-file without --chat" "--chat-file" "needs --chat" "$CK" --chat-file "$TMP/nostop.json" --prompt x
refused "--no-stop with --chat" "--no-stop" "exclusive" "$CK" --chat --no-stop --prompt x
finish
