#!/usr/bin/env bash
# tests/scripts/test_prepare_chat.sh [PROJECT_ROOT] — scripts/prepare-chat against an independent
# reader of its output (check.py below: its own parsing of the .bin/.mask/.docs files, its own
# renderings of the test templates, the tokenizers package's decode): the masked tokens decode to
# exactly the assistant turns (ChatML in Qwen2.5's style, Llama 3's, a template whose generation
# prompt a token straddles), prompt/completion, --train-on all, the val split rule, shard limits,
# truncate and drop and their counts, chat.json (its ids decode to the test's own text of each
# template's user turn and end of turn, the stop id is the end-of-turn token, also_stop the folder's
# other eos_token_id ids, generation_config.json's before config.json's, and the training
# documents hold those very ids around each first user message and answer), and every refusal
# (exit 2, FILE:LINE named, no traceback, OUT_DIR untouched, no temporary folder), templates whose
# one-turn pieces chat.json cannot hold among them. It builds its own byte-level BPE tokenizer with the
# tokenizers package; skipped (exit 77) without jinja2 or tokenizers. With DDPRUN_WORKER set, the
# worker trains a few steps on the shards. It must not need the network or a particular CPU, and
# checks prepare-chat's files only through check.py and ddprun's reader, never prepare-chat's code.
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
# tests/lib.sh names the build's programs (meson's prog_env); this test runs none of them
DDPRUN=${DDPRUN:-unused} DDP_SRC=${DDP_SRC:-$ROOT}
source "$ROOT/tests/lib.sh"
PREP=$ROOT/scripts/prepare-chat
if ! python3 -c 'import jinja2, tokenizers' 2>/dev/null; then
    echo "SKIP: python3 cannot import jinja2 and tokenizers (scripts/setup --text installs them)"
    exit 77
fi
cd "$TMP"

# --- templates: Qwen2.5's ChatML (its tool branch never taken), Llama 3's, and "User:\n / Bot: "
# lines whose generation prompt ends in the space the added token " Hi" spans
cat > chatml.jinja <<'EOF'
{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- for tool in tools %}{{- tool | tojson }}{%- endfor %}
    {{- '<|im_end|>\n' }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
EOF
printf '%s' "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}" > llama3.jinja
cat > bot.jinja <<'EOF'
{% for m in messages %}{{ ('User:\n' if m.role == 'user' else 'Bot: ') + m.content + '\n' }}{% endfor %}
{% if add_generation_prompt %}Bot: {% endif %}
EOF
# Mistral v0.3's, without its system message and alternation checks
printf '%s' "{{- bos_token }}{%- for m in messages %}{%- if m.role == 'user' %}{{- '[INST] ' + m.content + '[/INST]' }}{%- else %}{{- ' ' + m.content + eos_token }}{%- endif %}{%- endfor %}" > mistral.jinja
# Qwen3's: the last answer after an empty think block the generation prompt does not write
cat > think.jinja <<'EOF'
{%- for m in messages %}
    {%- if m.role == 'assistant' and loop.last %}
        {{- '<|im_start|>assistant\n<think>\n\n</think>\n\n' + m.content + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
EOF
# what prepare-chat must refuse
printf '{%% for m in messages %%}\n{%% generation %%}{{ m.content }}{%% endgeneration %%}{%% endfor %%}' > generation.jinja
printf '{{ messages[0].content | shout }}' > filter.jinja
printf 'Today is {{ date_string }}.{%% for m in messages %%}{{ m.content }}{%% endfor %%}' > undefined.jinja
printf '{%% for tool in tools %%}{{ tool }}{%% endfor %%}{%% for m in messages %%}{{ m.content }}{%% endfor %%}' > tools.jinja
printf '{%% for m in messages %%}\n{%% if m.role == "system" %%}\n{{ raise_exception("System messages are not supported") }}\n{%% endif %%}{{ m.content }}\n{%% endfor %%}' > nosystem.jinja
# assistant turns rendered as "bot" while the generation prompt says "assistant"
printf "{%% for m in messages %%}{{ '<|im_start|>' + ('bot' if m.role == 'assistant' else m.role) + '\\\\n' + m.content + '<|im_end|>\\\\n' }}{%% endfor %%}{%% if add_generation_prompt %%}<|im_start|>assistant\\\\n{%% endif %%}" > unstable.jinja
# what chat.json cannot hold: "User: " before the message, whose space a word's token takes (" the");
# the message written in capitals; nothing after an answer (no token ends the turn)
printf "{%% for m in messages %%}{{ m.role + ': ' + m.content + '\\\\n' }}{%% endfor %%}{%% if add_generation_prompt %%}assistant: {%% endif %%}" > inline.jinja
printf "{%% for m in messages %%}{{ m.role + ':\\\\n' + m.content | upper + '\\\\n' }}{%% endfor %%}{%% if add_generation_prompt %%}{{ 'assistant:\\\\n' }}{%% endif %%}" > upper.jinja
printf "{%% for m in messages %%}{{ m.content }}{%% if m.role == 'user' %%}{{ '\\\\n=>\\\\n' }}{%% endif %%}{%% endfor %%}" > noend.jinja

# --- data
cat > chat.jsonl <<'EOF'
{"messages": [{"role": "user", "content": "What is the capital of France?"}, {"role": "assistant", "content": "The capital of France is Paris."}]}
{"messages": [{"role": "system", "content": "You are a terse assistant."}, {"role": "user", "content": "Say hello in Japanese."}, {"role": "assistant", "content": "こんにちは 🙂"}, {"role": "user", "content": "And in French?"}, {"role": "assistant", "content": "Bonjour."}]}
{"messages": [{"role": "user", "content": "  Tell me a joke about cats.  "}, {"role": "assistant", "content": "  Cats do not tell jokes; they are the joke.  "}]}
{"messages": [{"role": "user", "content": "Count to three."}, {"role": "assistant", "content": "One, two, three."}]}
{"messages": [{"role": "user", "content": "Thanks!"}, {"role": "assistant", "content": ""}]}
EOF
cat > pc.jsonl <<'EOF'
{"prompt": "Translate 'cat' to German.", "completion": "Katze"}
{"prompt": "2 + 2 =", "completion": " 4"}
{"prompt": "Name a colour.", "completion": "Blue."}
EOF
cat > bot.jsonl <<'EOF'
{"messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "Hi there, friend."}]}
{"messages": [{"role": "user", "content": "hello again"}, {"role": "assistant", "content": "Hi."}, {"role": "user", "content": "bye"}, {"role": "assistant", "content": "Hi and bye."}]}
{"messages": [{"role": "user", "content": "a list"}, {"role": "assistant", "content": "\n- one\n- two"}]}
EOF
LONG=$(python3 -c 'print(" ".join(f"word{i}" for i in range(150)))')
# line 2: an answer long enough to be cut, its start kept; line 3 of late.jsonl: an answer behind a long question
printf '%s\n' '{"prompt": "Count to three.", "completion": "One, two, three."}' \
    "{\"prompt\": \"List words.\", \"completion\": \"$LONG\"}" \
    '{"prompt": "Name a colour.", "completion": "Blue."}' > long.jsonl
printf '%s\n' '{"prompt": "Count to three.", "completion": "One, two, three."}' \
    '{"prompt": "Name a colour.", "completion": "Blue."}' \
    "{\"prompt\": \"$LONG\", \"completion\": \"Done.\"}" > late.jsonl
printf '%s\n' '{"messages": [{"role": "user", "content": "Count to three."}, {"role": "assistant", "content": "One."}]}' \
    '{"messages": [{"role": "user", "content": "Are you there?"}]}' \
    '{"messages": [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."}]}' > noanswer.jsonl

# --- tokenizer: a byte-level BPE with GPT-2's trim_offsets post-processor (prepare-chat must not
# take its trimmed offsets), the special tokens of both templates, and the non-special " Hi"
python3 - <<'EOF' || exit 1
import json, os
from tokenizers import Tokenizer, models, normalizers, trainers, pre_tokenizers, decoders, processors
special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>",
           "<|end_header_id|>", "<|eot_id|>"]
corpus = [l for f in ("chat.jsonl", "pc.jsonl") for l in open(f, encoding="utf-8")] * 3
t = Tokenizer(models.BPE())
t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
t.decoder = decoders.ByteLevel()
t.post_processor = processors.ByteLevel(trim_offsets=True)
t.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=600, special_tokens=special, show_progress=False,
                                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
t.add_tokens([" Hi"])
added = lambda s: {"__type": "AddedToken", "content": s, "lstrip": False, "normalized": False,
                   "rstrip": False, "single_word": False, "special": True}
configs = {"qwen": {"bos_token": None, "eos_token": "<|im_end|>", "chat_template": open("chatml.jinja").read()},
           "llama": {"bos_token": added("<|begin_of_text|>"), "eos_token": added("<|eot_id|>"),
                     "chat_template": open("llama3.jinja").read()},
           "notemplate": {"eos_token": "<|im_end|>"}, "bare": None, "jinja": {"eos_token": "<|im_end|>"}}
for name, config in configs.items():
    os.mkdir(name)
    t.save(f"{name}/tokenizer.json")
    if config is not None:
        json.dump(config, open(f"{name}/tokenizer_config.json", "w"), indent=2)
# the model's end ids: Qwen2.5 base's config.json names <|endoftext|>; Llama 3.1's generation_config.json
# a list (the end of turn among them, one id twice), which wins over its config.json's
i = t.token_to_id
json.dump({"eos_token_id": i("<|endoftext|>")}, open("qwen/config.json", "w"))
json.dump({"eos_token_id": i("<|begin_of_text|>")}, open("llama/config.json", "w"))
json.dump({"eos_token_id": [i("<|endoftext|>"), i("<|eot_id|>"), i("<|endoftext|>"), i("<|im_end|>")]},
          open("llama/generation_config.json", "w"))
for name, eos in (("badeos", [5, 100000]), ("texteos", "<|im_end|>")):
    os.mkdir(name)
    t.save(f"{name}/tokenizer.json")
    json.dump(configs["qwen"], open(f"{name}/tokenizer_config.json", "w"))
    json.dump({"eos_token_id": eos}, open(f"{name}/generation_config.json", "w"))
open("jinja/chat_template.jinja", "w").write(open("chatml.jinja").read())  # transformers >= 4.50's place
# Mistral's kind: sentencepiece's BPE (a space as U+2581, before the text's first word too), its
# template writing "[INST] " before the message and a space before the answer, each of which the
# word after it takes
m = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
m.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
m.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                               decoders.Strip(" ", 1, 0)])
m.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=600, show_progress=False,
                                                  special_tokens=["<unk>", "<s>", "</s>", "[INST]", "[/INST]"] +
                                                  [f"<0x{b:02X}>" for b in range(256)]))
os.mkdir("mistral")
m.save("mistral/tokenizer.json")
json.dump({"bos_token": "<s>", "eos_token": "</s>", "chat_template": open("mistral.jinja").read()},
          open("mistral/tokenizer_config.json", "w"))
t.normalizer = normalizers.Lowercase()  # a split ddprun's prompt encoder does not have
os.mkdir("lower")
t.save("lower/tokenizer.json")
json.dump(configs["qwen"], open("lower/tokenizer_config.json", "w"), indent=2)
EOF

# --- check.py MODE OUT_DIR ...: reads OUT_DIR's train and val files by the documented format
# (headers, sizes, numbering, document lengths summing to each shard), puts the documents back in
# input order by the documented split rule, and compares them with what the mode expects.
cat > check.py <<'EOF'
import json, os, struct, sys
from array import array
from fractions import Fraction
MASK, DOCS = 20250611, 20250612

def die(msg):
    sys.exit(f"check: {msg}")

def ints(data, code):
    a = array(code, data)
    if sys.byteorder != "little":
        a.byteswap()
    return a

def read_split(out, split, limit=None):
    names = sorted(n for n in os.listdir(out) if n.startswith(split + "_"))
    bins = [n[:-4] for n in names if n.endswith(".bin")]
    if not bins or bins != [f"{split}_{k:06d}" for k in range(len(bins))]:
        die(f"{out}: {split} shards not numbered from 000000: {names}")
    if names != sorted(b + e for b in bins for e in (".bin", ".docs", ".mask")):
        die(f"{out}: {split} files are not .bin, .mask and .docs per shard: {names}")
    docs = []
    for b in bins:
        d, m, l = (open(os.path.join(out, b + e), "rb").read() for e in (".bin", ".mask", ".docs"))
        h, hm, hl = (struct.unpack("<256i", x[:1024]) for x in (d, m, l))
        code, width = {(20240520, 1): ("H", 2), (20240801, 7): ("I", 4)}.get(h[:2], (None, 0))
        n = h[2]
        if not code or any(h[3:]) or n < 1 or len(d) != 1024 + width * n:
            die(f"{b}.bin: header {h[:3]} for {len(d)} bytes")
        if hm[:3] != (MASK, 1, n) or any(hm[3:]) or len(m) != 1024 + n:
            die(f"{b}.mask: header {hm[:3]} for {len(m)} bytes; expected ({MASK}, 1, {n})")
        lengths = ints(l[1024:], "I")
        if hl[:3] != (DOCS, 1, len(lengths)) or any(hl[3:]) or len(l) != 1024 + 4 * len(lengths):
            die(f"{b}.docs: header {hl[:3]} for {len(l)} bytes")
        if sum(lengths) != n or 0 in lengths:
            die(f"{b}.docs: lengths {list(lengths)} do not sum to the shard's {n} tokens")
        if limit and n > limit:
            die(f"{b}.bin: {n} tokens, over --shard-tokens {limit}")
        mask = m[1024:]
        if set(mask) - {0, 1}:
            die(f"{b}.mask: values {sorted(set(mask))}")
        toks, pos = ints(d[1024:], code), 0
        for length in lengths:
            docs.append((list(toks[pos:pos + length]), list(mask[pos:pos + length])))
            pos += length
    return docs, len(bins)

def ordered(out, frac, limit=None):
    """Every document in input order: kept example j is in val when floor((j+1)k/n) > floor(jk/n)."""
    (train, _), (val, _) = read_split(out, "train", limit), read_split(out, "val", limit)
    n = len(train) + len(val)
    k = max(1, n * Fraction(frac) // 1)
    if len(val) != k:
        die(f"{out}: {len(val)} val documents of {n}, expected {k}")
    t, v = iter(train), iter(val)
    return [next(v) if (j + 1) * k // n > j * k // n else next(t) for j in range(n)]

def render(style, msgs):
    """(the conversation's text, the text of each assistant turn the loss must count)"""
    if style == "chatml":
        head = [] if msgs[0]["role"] == "system" else ["<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"]
        turn = lambda m: f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n"
        return "".join(head + [turn(m) for m in msgs]), [m["content"] + "<|im_end|>\n" for m in msgs
                                                          if m["role"] == "assistant"]
    if style == "llama3":
        turn = lambda m: f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n{m['content'].strip()}<|eot_id|>"
        return "<|begin_of_text|>" + "".join(map(turn, msgs)), [m["content"].strip() + "<|eot_id|>" for m in msgs
                                                                 if m["role"] == "assistant"]
    if style == "bot":  # an answer's " Hi" is one token holding the prompt's space: it counts; before
        # "\n" the prompt's space is a token of its own (GPT-2's trim_offsets would put it in the answer)
        turn = lambda m: ("User:\n" if m["role"] == "user" else "Bot: ") + m["content"] + "\n"
        return "".join(map(turn, msgs)), [(" " if m["content"].startswith("Hi") else "") + m["content"] + "\n"
                                          for m in msgs if m["role"] == "assistant"]

def examples(paths):
    for p in paths:
        for line in open(p, encoding="utf-8").read().split("\n")[:-1]:
            o = json.loads(line)
            yield o["messages"] if "messages" in o else [{"role": "user", "content": o["prompt"]},
                                                         {"role": "assistant", "content": o["completion"]}]

def runs(tok, ids, mask):
    out, cur = [], []
    for i, m in zip(ids + [None], mask + [0]):
        if m:
            cur.append(i)
        elif cur:
            out.append(tok.decode(cur, skip_special_tokens=False))
            cur = []
    return out

# each style's one-turn chat: (the text before a first user message, after it with the generation
# prompt, after an answer; the special token that ends a turn), and what a template does to content
TURNS = {"chatml": ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n",
                    "<|im_end|>\n<|im_start|>assistant\n", "<|im_end|>\n", "<|im_end|>", str),
         "llama3": ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n",
                    "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>", "<|eot_id|>",
                    str.strip),
         # the suffix ends before the first token holding any of the answer: " the" holds the prompt's space
         "bot": ("User:\n", "\nBot:", "\n", None, str),
         # sentencepiece: "[INST] "'s space and the answer's are the next word's (decoded, a text's first
         # space is dropped, as transformers' decoder drops it)
         "mistral": ("<s>[INST]", "[/INST]", "</s>", "</s>", str),
         "think": ("<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", "<|im_end|>\n",
                   "<|im_end|>", str)}
# each tokenizer folder's end tokens, as the fixture above wrote them (the stop among them is left out)
ALSO_STOP = {"mistral": [], "qwen": ["<|endoftext|>"], "llama": ["<|endoftext|>", "<|eot_id|>", "<|im_end|>"], "jinja": []}

def find(doc, at, ids, text, tok, what):
    """The position after doc[at:p] == text's tokens (by decoding) followed by ids; dies if none."""
    for p in range(at, len(doc) - len(ids) + 1):
        if doc[p:p + len(ids)] == ids and tok.decode(doc[at:p], skip_special_tokens=False) == text:
            return p + len(ids)
    die(f"{what}: {text!r} then the ids {ids} not found in {doc[at:]}")

mode, out = sys.argv[1], sys.argv[2]
if mode == "chatjson":  # OUT TOKENIZER STYLE TEMPLATE FRAC INPUTS...: chat.json, and the documents by it
    from tokenizers import Tokenizer
    tok_path, style, template, frac, inputs = sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7:]
    tok = Tokenizer.from_file(tok_path)
    c = json.load(open(os.path.join(out, "chat.json"), encoding="utf-8"))
    keys = ["version", "template", "tokenizer", "user_prefix", "user_suffix", "end_of_turn", "stop", "also_stop"]
    if list(c) != keys or c["version"] != 2 or c["template"] != template or c["tokenizer"] != tok_path:
        die(f"{out}/chat.json: {c}")
    prefix, suffix, end, special, content = TURNS[style]
    for key, text in (("user_prefix", prefix), ("user_suffix", suffix), ("end_of_turn", end)):
        if tok.decode(c[key], skip_special_tokens=False) != text:
            die(f"{out}/chat.json: {key} {c[key]} decodes to {tok.decode(c[key], skip_special_tokens=False)!r}, "
                f"expected {text!r}")
    if c["stop"] != c["end_of_turn"][0] or (special and c["stop"] != tok.token_to_id(special)):
        die(f"{out}/chat.json: stop {c['stop']}, end_of_turn {c['end_of_turn']}, {special} is {tok.token_to_id(special)}")
    also = [tok.token_to_id(x) for x in ALSO_STOP[os.path.dirname(tok_path)] if tok.token_to_id(x) != c["stop"]]
    if c["also_stop"] != also:
        die(f"{out}/chat.json: also_stop {c['also_stop']}, expected {also}")
    if style != "bot":  # the model was trained on these ids: around every first user message and answer
        for j, ((ids, _), msgs) in enumerate(zip(ordered(out, frac), examples(inputs))):
            if msgs[0]["role"] != "user" or len(msgs) < 2:
                continue
            if ids[:len(c["user_prefix"])] != c["user_prefix"]:
                die(f"{out}: document {j} does not start with user_prefix: {ids}")
            at = find(ids, len(c["user_prefix"]), c["user_suffix"], content(msgs[0]["content"]), tok, f"document {j}")
            find(ids, at, c["end_of_turn"], content(msgs[1]["content"]), tok, f"document {j}")
    print(f"prepare-chat: chat.json: user prefix {len(c['user_prefix'])} tokens, user suffix {len(c['user_suffix'])}, "
          f"end of turn {len(c['end_of_turn'])} (stop id {c['stop']}{''.join(f', also {x}' if k == 0 else f', {x}' for k, x in enumerate(also))})")
elif mode in ("chat", "all"):
    from tokenizers import Tokenizer
    tok_path, style, frac, inputs = sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
    tok = Tokenizer.from_file(tok_path)
    docs = ordered(out, frac)
    want = [render(style, m) for m in examples(inputs)]
    if len(docs) != len(want):
        die(f"{out}: {len(docs)} documents, expected {len(want)}")
    for j, ((ids, mask), (text, turns)) in enumerate(zip(docs, want)):
        got = tok.decode(ids, skip_special_tokens=False)
        if got != text:
            die(f"{out}: document {j} is {got!r}, expected {text!r}")
        if mode == "chat" and runs(tok, ids, mask) != turns:
            die(f"{out}: document {j}: trainable {runs(tok, ids, mask)!r}, expected {turns!r}")
        if mode == "all" and mask != [0] + [1] * (len(ids) - 1):
            die(f"{out}: document {j}: mask {mask}, expected all but the first token")
    # the report's lines for the splits, as prepare-chat must print them
    for split in ("train", "val"):
        d, shards = read_split(out, split)
        print(f"prepare-chat: {split}: {len(d)} documents, {sum(len(x[0]) for x in d)} tokens, "
              f"{sum(sum(x[1]) for x in d)} trainable, {shards} shard(s)")
elif mode in ("trunc", "drop"):  # OUT FULL FRAC N: OUT is FULL's data with --max-tokens N
    full, frac, n = ordered(sys.argv[3], sys.argv[4]), sys.argv[4], int(sys.argv[5])
    docs = ordered(out, frac)
    want = ([(i[:n], m[:n]) for i, m in full] if mode == "trunc" else [d for d in full if len(d[0]) <= n])
    if docs != want:
        die(f"{out}: documents {[len(d[0]) for d in docs]} long, expected {[len(d[0]) for d in want]}")
    print(sum(len(i) > n for i, _ in full))
elif mode == "lengths":  # OUT FRAC
    print(*sorted(len(i) for i, _ in ordered(out, sys.argv[3])))
elif mode == "shards":  # OUT FRAC LIMIT: prints the train shards' count
    ordered(out, sys.argv[3], int(sys.argv[4]))
    print(read_split(out, "train")[1])
EOF
chk() { python3 "$TMP/check.py" "$@"; }
quiet() { "$@" > /dev/null; }
into() { local file=$1; shift; "$@" > "$file"; }  # FILE COMMAND...: the command's output into FILE
split_lines() { grep -E '^prepare-chat: (train|val):' "$1"; }
no_traceback() { ! grep -q Traceback "$1"; }
has() { grep -qE -- "$2" "$1"; }  # FILE ERE
lacks() { ! has "$@"; }

# --- ChatML (Qwen2.5's template, its tools branch tested and skipped) over both formats; 8 examples,
# --val-fraction 0.25: val holds examples 3 and 7
"$PREP" --tokenizer qwen --val-fraction 0.25 chat.jsonl pc.jsonl o1 > o1.log 2>&1
check "ChatML: runs ($(head -n 1 o1.log))" \
    has o1.log "^prepare-chat: 8 examples read from 2 file\(s\): 8 kept \(0 of them truncated\), 0 dropped \(0 over-long, 0 with no trainable token\)$"
check "ChatML: documents decode to the conversations, the masked tokens to the assistant turns, val by the rule" \
    into o1.want chk chat o1 qwen/tokenizer.json chatml 0.25 chat.jsonl pc.jsonl
check "ChatML: the report's split lines: $(split_lines o1.log | tr '\n' ' ')" diff o1.want <(split_lines o1.log)
check "ChatML: tokenizer.bin written" test -s o1/tokenizer.bin
check "ChatML: chat.json: the user turn with the default system prompt, <|im_end|> the stop, as in the documents" \
    into o1.chat chk chatjson o1 qwen/tokenizer.json chatml qwen/tokenizer_config.json 0.25 chat.jsonl pc.jsonl
check "ChatML: the report's chat.json line: $(grep '^prepare-chat: chat.json:' o1.log)" \
    diff o1.chat <(grep '^prepare-chat: chat.json:' o1.log)
# ddprun's shard reader takes the .bin files with the .mask and .docs beside them (when DDPRUN_WORKER
# is set; tests/meson.build leaves it unset in sanitized builds): a tiny GPT-2 counts every train
# window and trains three steps
if [ -n "${DDPRUN_WORKER:-}" ]; then
    third_int() { python3 -c 'import struct, sys; print(struct.unpack("<3i", open(sys.argv[1], "rb").read(12))[2])' "$1"; }
    vocab=$(third_int o1/tokenizer.bin) tokens=$(third_int o1/train_000000.bin)  # the headers' counts
    mpirun -np 1 --oversubscribe --bind-to none "$DDPRUN_WORKER" "$ROOT/tests/launcher/trainer/gpt2_small.yaml" \
        run.dir="$TMP/run1" data.path="$TMP/o1" model.gpt2.vocab_size="$vocab" model.gpt2.n_layer=1 \
        model.gpt2.n_embd=8 data.seq_len=8 data.batch_size=2 train.max_steps=3 > run1.log 2>&1
    check "ddprun-worker trains on the shards: $(grep -m 1 'data:' run1.log)" \
        has run1.log "data: tokens/train $(((tokens - 1) / 8)) samples"
else
    echo "SKIP: ddprun-worker check: DDPRUN_WORKER is not set"
fi
check "ChatML: no note on the prompt encoder (GPT-2's split)" lacks o1.log "^prepare-chat: note:"
"$PREP" --tokenizer lower --val-fraction 0.25 chat.jsonl pc.jsonl o1l > o1l.log 2>&1
check "a lowercasing tokenizer: a note that generate splits prompts as GPT-2 does" \
    has o1l.log "^prepare-chat: note: .*pre-tokenizer is not GPT-2's.*splits prompts as GPT-2 does"
"$PREP" --tokenizer jinja --val-fraction 0.25 chat.jsonl pc.jsonl o1j > o1j.log 2>&1
check "ChatML from chat_template.jinja: $(tail -n 1 o1j.log)" diff -r -x chat.json o1 o1j
check "ChatML from chat_template.jinja: chat.json names it" \
    quiet chk chatjson o1j jinja/tokenizer.json chatml jinja/chat_template.jinja 0.25 chat.jsonl pc.jsonl

# --- Llama 3 (bos_token an AddedToken, content trimmed), --tokenizer given the tokenizer.json
"$PREP" --tokenizer llama/tokenizer.json chat.jsonl pc.jsonl o2 > o2.log 2>&1
check "Llama 3: masked tokens are the trimmed assistant turns and <|eot_id|>" \
    into o2.want chk chat o2 llama/tokenizer.json llama3 0.05 chat.jsonl pc.jsonl
check "Llama 3: the report's split lines" diff o2.want <(split_lines o2.log)
check "Llama 3: chat.json: BOS and headers, <|eot_id|> the stop, as in the documents" \
    quiet chk chatjson o2 llama/tokenizer.json llama3 llama/tokenizer_config.json 0.05 chat.jsonl pc.jsonl

# --- a token straddling the generation prompt's end (" Hi": the prompt's space, the answer's word)
# counts; the prompt's lone space before an answer's "\n" does not
"$PREP" --tokenizer qwen --chat-template bot.jinja bot.jsonl o3 > o3.log 2>&1
check "a token holding the answer's first character counts, one holding none does not" \
    quiet chk chat o3 qwen/tokenizer.json bot 0.05 bot.jsonl
check "plain-text turns: chat.json's end of turn a newline, the suffix without the space the answer's word takes" \
    quiet chk chatjson o3 qwen/tokenizer.json bot bot.jinja 0.05 bot.jsonl

# --- Qwen3's template: what it writes between the generation prompt and the answer (an empty think
# block) is the suffix's, as in the training documents
"$PREP" --tokenizer qwen --chat-template think.jinja pc.jsonl o3t > o3t.log 2>&1
check "think block: chat.json's suffix holds it, as the documents do ($(tail -n 1 o3t.log))" \
    quiet chk chatjson o3t qwen/tokenizer.json think think.jinja 0.05 pc.jsonl
# --- Mistral's: the spaces before the message and the answer are their first words' tokens', so the
# prefix and suffix end before them (generate encodes a prompt as sentencepiece does: after a space)
"$PREP" --tokenizer mistral pc.jsonl o3m > o3m.log 2>&1
check "sentencepiece, Mistral's template: chat.json's pieces, as in the documents ($(tail -n 1 o3m.log))" \
    quiet chk chatjson o3m mistral/tokenizer.json mistral mistral/tokenizer_config.json 0.05 pc.jsonl

# --- --train-on all: every token but each document's first
"$PREP" --tokenizer qwen --train-on all --val-fraction 0.5 chat.jsonl o4 > o4.log 2>&1
check "--train-on all: every token but the documents' first" \
    into o4.want chk all o4 qwen/tokenizer.json chatml 0.5 chat.jsonl
check "--train-on all: the report's split lines" diff o4.want <(split_lines o4.log)
check "--train-on all: the report says so" has o4.log "loss on all, o4 "

# --- shards: whole documents, at most --shard-tokens each; one longer document is refused
max=$(chk lengths o1 0.25 | tr ' ' '\n' | tail -n 1)
"$PREP" --tokenizer qwen --val-fraction 0.25 --shard-tokens $((max + 5)) chat.jsonl pc.jsonl o5 > o5.log 2>&1
n=$(chk shards o5 0.25 $((max + 5)))
check "--shard-tokens $((max + 5)): $n train shards of whole documents" test "${n:-0}" -ge 2
chk chat o5 qwen/tokenizer.json chatml 0.25 chat.jsonl pc.jsonl > o5.want
check "--shard-tokens: the same documents and masks across shards" diff o5.want <(split_lines o5.log)

# --- over-long: truncate keeps the first N tokens (and the mask's), drop removes; counted
"$PREP" --tokenizer qwen long.jsonl o6 > o6.log 2>&1
N=$(chk lengths o6 0.05 | awk '{print $(NF - 1)}')  # the second longest: only the longest is cut
"$PREP" --tokenizer qwen --max-tokens "$N" long.jsonl o7 > o7.log 2>&1
check "truncate: the first $N tokens and their mask" test "$(chk trunc o7 o6 0.05 "$N")" = 1
check "truncate: counted ($(head -n 1 o7.log))" \
    has o7.log "3 examples read from 1 file\(s\): 3 kept \(1 of them truncated\), 0 dropped \(0 over-long"
"$PREP" --tokenizer qwen --max-tokens "$N" --overlong drop long.jsonl o8 > o8.log 2>&1
check "drop: the others unchanged" test "$(chk drop o8 o6 0.05 "$N")" = 1
check "drop: counted ($(head -n 1 o8.log))" \
    has o8.log "3 examples read from 1 file\(s\): 2 kept \(0 of them truncated\), 1 dropped \(1 over-long, 0 with no trainable token\)"
"$PREP" --tokenizer qwen --max-tokens "$N" --overlong drop noanswer.jsonl o9 > o9.log 2>&1
check "drop: an example with no assistant message, counted ($(head -n 1 o9.log))" \
    has o9.log "2 kept \(0 of them truncated\), 1 dropped \(0 over-long, 1 with no trainable token\)"

# --- a tokenizer.json saved with truncation and padding on (transformers saves one so after a
# call with truncation=True): nothing is cut or padded, the shards are the plain tokenizer's
mkdir qtrunc && cp qwen/tokenizer_config.json qtrunc/
python3 -c 'import tokenizers; t = tokenizers.Tokenizer.from_file("qwen/tokenizer.json")
t.enable_truncation(8); t.enable_padding(length=64); t.save("qtrunc/tokenizer.json")'
"$PREP" --tokenizer qtrunc long.jsonl o6t > o6t.log 2>&1
check "truncation and padding in tokenizer.json: the same shards, masks and documents" \
    bash -c 'for f in o6/*.bin o6/*.mask o6/*.docs; do [ "${f##*/}" = tokenizer.bin ] || cmp -s "$f" "o6t/${f##*/}" || exit 1; done'

# --- a reader of the report that leaves early (| head -0) loses the report, not the folder
"$PREP" --tokenizer qwen long.jsonl o6p 2> o6p.err | head -c 0
check "stdout closed early: exit 0 (${PIPESTATUS[0]}), no error ($(head -c 200 o6p.err))" \
    test "${PIPESTATUS[0]}" = 0 -a ! -s o6p.err
check "... the folder written whole" cmp o6/train_000000.bin o6p/train_000000.bin

# --- --force replaces; prepare-text --force over a chat folder leaves no stale mask behind
"$PREP" --tokenizer qwen --val-fraction 0.5 chat.jsonl o6 > /dev/null 2>&1
check "--force absent: refused, exit 2" test $? = 2
"$PREP" --tokenizer qwen --val-fraction 0.5 --force chat.jsonl o6 > o6.log 2>&1
chk chat o6 qwen/tokenizer.json chatml 0.5 chat.jsonl > o6.want
check "--force replaces the outputs: $(split_lines o6.log | head -n 1)" diff o6.want <(split_lines o6.log)
printf 'plain text\n' > a.txt
"$ROOT/scripts/prepare-text" --tokenizer bytes --force a.txt o6 > /dev/null
check "prepare-text --force drops prepare-chat's .mask, .docs and chat.json" \
    test -z "$(ls o6 | grep -E '\.(mask|docs)$|^chat\.json$')"

# --- refusals: exit 2, "prepare-chat: error: FILE[:LINE]: reason", no traceback, nothing written:
# each runs with --force over keep/ (an earlier output and a file of the user's), which must stay
# byte for byte as it was, with no temporary folder beside it
"$PREP" --tokenizer qwen --val-fraction 0.5 chat.jsonl keep > /dev/null
echo mine > keep/notes.txt
cp -a keep keep.before
refused() { # WHAT ERE ARGS...: the ERE follows "prepare-chat: error: "
    local what=$1 pattern=$2 rc=0; shift 2
    "$PREP" "$@" --force keep > out.log 2> err.log || rc=$?
    check "$what: exit 2 ($rc)" test "$rc" = 2
    check "$what: $(head -c 300 err.log)" has err.log "^prepare-chat: error: $pattern"
    check "$what: no traceback" no_traceback err.log
    check "$what: keep/ as it was" diff -r keep.before keep
    check "$what: no temporary folder" test -z "$(ls -A | grep '^\.keep\.')"
}
bad() { # NAME LINE...: NAME.jsonl holding the lines
    local name=$1; shift
    printf '%s\n' "$@" > "$name.jsonl"
}
OK='{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}'
bad json "$OK" "$OK" '{"messages": [}'
refused "invalid JSON" "json\.jsonl:3: invalid JSON at column 15" --tokenizer qwen json.jsonl
bad deep "$OK" "{\"messages\": $(printf '[%.0s' $(seq 1000))$(printf ']%.0s' $(seq 1000))}"
refused "JSON nested 1000 deep" "deep\.jsonl:2: JSON nested too deeply to read" --tokenizer qwen deep.jsonl
bad neither "$OK" '{"text": "Hello."}'
refused "neither format" "neither\.jsonl:2: neither format \(keys: text\)" --tokenizer qwen neither.jsonl
bad mixed "$OK" '{"prompt": "Hi", "completion": "Hello."}'
refused "mixed formats" "mixed\.jsonl:2: a prompt/completion example in a file whose line 1 is a messages example" \
    --tokenizer qwen mixed.jsonl
bad both '{"messages": [], "prompt": "Hi", "completion": "Hello."}'
refused "both formats' keys" "both\.jsonl:1: holds both formats' keys" --tokenizer qwen both.jsonl
bad role "$OK" '{"messages": [{"role": "user", "content": "Hi"}, {"role": "tool", "content": "42"}]}'
refused "unknown role" "role\.jsonl:2: messages\[1\]: unknown role 'tool'" --tokenizer qwen role.jsonl
bad norole "$OK" "$OK" '{"messages": [{"content": "Hi"}]}'
refused "missing role" "norole\.jsonl:3: messages\[0\] has no \"role\"" --tokenizer qwen norole.jsonl
bad content '{"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}'
refused "non-string content" "content\.jsonl:1: messages\[0\]: content is a list, not a string" \
    --tokenizer qwen content.jsonl
bad extra "$OK" '{"messages": [{"role": "user", "content": "Hi"}], "id": 7}'
refused "an unread key" "extra\.jsonl:2: key 'id'" --tokenizer qwen extra.jsonl
bad tools '{"messages": [{"role": "user", "content": "Hi"}], "tools": []}'
refused "tool definitions" "tools\.jsonl:1: key 'tools': tool definitions are not rendered" --tokenizer qwen tools.jsonl
bad first "$OK" '{"messages": [{"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yes?"}]}'
refused "the assistant's message first, a template that reads messages[0]" \
    "first\.jsonl:2: messages\[0\] is the assistant's, and the template cannot render the prompt before it .*begin the conversation with a user or system message" \
    --tokenizer qwen first.jsonl
bad msgkey "$OK" '{"messages": [{"role": "user", "content": "Hi", "name": "bob"}]}'
refused "a message key besides role and content" "msgkey\.jsonl:2: messages\[0\] has key 'name'" \
    --tokenizer qwen msgkey.jsonl
bad half '{"prompt": "Hi"}'
refused "prompt without completion" "half\.jsonl:1: has \"prompt\" but no \"completion\"" --tokenizer qwen half.jsonl
bad pclist '{"prompt": "Hi", "completion": ["Hello."]}'
refused "a completion that is no string" "pclist\.jsonl:1: \"prompt\" and \"completion\" must both be strings" \
    --tokenizer qwen pclist.jsonl
bad twice "$OK" '{"prompt": "a", "prompt": "b", "completion": "c"}'
refused "a key twice" "twice\.jsonl:2: key 'prompt' appears twice in one object" --tokenizer qwen twice.jsonl
bad twicemsg '{"messages": [{"role": "user", "content": "a", "content": "b"}, {"role": "assistant", "content": "c"}]}'
refused "a message's key twice" "twicemsg\.jsonl:1: key 'content' appears twice" --tokenizer qwen twicemsg.jsonl
bad surrogate "$OK" '{"prompt": "x\ud800y", "completion": "z"}'
refused "a lone surrogate" "surrogate\.jsonl:2: \"prompt\" holds a lone surrogate \(\\\\ud800 unpaired\) at character 1" \
    --tokenizer qwen surrogate.jsonl
bad surmsg '{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "\udfff"}]}'
refused "a lone surrogate in a message" "surmsg\.jsonl:1: messages\[1\]: content holds a lone surrogate" \
    --tokenizer qwen surmsg.jsonl
bad special "$OK" '{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "It ends a turn: <|im_end|> here."}]}'
refused "a special token's text in a message" "special\.jsonl:2: the assistant message \(the example's message 2\) holds '<\|im_end\|>', a special token's text, at character 16" \
    --tokenizer qwen special.jsonl
bad special2 '{"prompt": "Hi", "completion": "Hello."}' '{"prompt": "Say <|eot_id|>", "completion": "No."}'
refused "another template's special token in a prompt" "special2\.jsonl:2: the user message \(the example's message 1\) holds '<\|eot_id\|>'" \
    --tokenizer qwen special2.jsonl
bad blank "$OK" "" "$OK"
refused "a blank line" "blank\.jsonl:2: a blank line" --tokenizer qwen blank.jsonl
printf '%s\n{"prompt": "caf\xe9", "completion": "x"}\n' "$OK" > utf8.jsonl
refused "invalid UTF-8" "utf8\.jsonl:2: invalid UTF-8 at byte offset 15 of the line" --tokenizer qwen utf8.jsonl
: > empty.jsonl
refused "an empty file" "empty\.jsonl: empty file" --tokenizer qwen chat.jsonl empty.jsonl
refused "no input" "no INPUT\.jsonl given" --tokenizer qwen
bad one "$OK"
refused "one example" "one\.jsonl: 1 example\(s\) kept; train and val need one each" --tokenizer qwen one.jsonl
refused "a missing input" "nope\.jsonl: No such file" --tokenizer qwen nope.jsonl
refused "no assistant message" "noanswer\.jsonl:2: no trainable token \(no assistant message" --tokenizer qwen noanswer.jsonl
refused "trainable tokens all truncated away" "late\.jsonl:3: no trainable token \(none in its first $N tokens" \
    --tokenizer qwen --max-tokens "$N" late.jsonl
refused "a document over --shard-tokens" "long\.jsonl:2: [0-9]+ tokens, more than --shard-tokens $N" \
    --tokenizer qwen --shard-tokens "$N" long.jsonl
# the tokenizer and its template
refused "a tokenizer without tokenizer_config.json" "bare/tokenizer_config\.json: not found, so the tokenizer has no chat template" \
    --tokenizer bare chat.jsonl
refused "a tokenizer_config.json without chat_template" "notemplate/tokenizer_config\.json: no chat_template" \
    --tokenizer notemplate chat.jsonl
refused "a missing tokenizer" "nothere/tokenizer\.json: not found" --tokenizer nothere/tokenizer.json chat.jsonl
refused "an eos_token_id outside the vocabulary" \
    "badeos/generation_config\.json: eos_token_id \[5, 100000\]: 100000 is not a token id of the tokenizer's" \
    --tokenizer badeos chat.jsonl
refused "an eos_token_id that is text" "texteos/generation_config\.json: eos_token_id '<\|im_end\|>'" \
    --tokenizer texteos chat.jsonl
refused "{% generation %}" "generation\.jinja: chat template line 2: \{% generation %\} blocks" \
    --tokenizer qwen --chat-template generation.jinja chat.jsonl
refused "an unknown filter" "filter\.jinja: chat template line 1: No filter named 'shout'.*transformers' tojson" \
    --tokenizer qwen --chat-template filter.jinja chat.jsonl
# a template that fails on any chat fails on chat.json's one-turn chat, rendered before any example
refused "an undefined variable" "undefined\.jinja \(a one-turn chat rendered for chat\.json\): the chat template \(undefined\.jinja, line 1\) needs what prepare-chat does not render: 'date_string' is undefined" \
    --tokenizer qwen --chat-template undefined.jinja chat.jsonl
refused "a loop over tools" "tools\.jinja \(a one-turn chat rendered for chat\.json\): the chat template \(tools\.jinja, line 1\) failed: TypeError: .*NoneType.*no tool definitions" \
    --tokenizer qwen --chat-template tools.jinja chat.jsonl
refused "raise_exception" "chat\.jsonl:2: the chat template refuses the example \(raise_exception at its line 3\): System messages are not supported" \
    --tokenizer qwen --chat-template nosystem.jinja chat.jsonl
refused "a template not prefix-stable" "unstable\.jinja \(a one-turn chat rendered for chat\.json\): the chat template is not prefix-stable for one turn" \
    --tokenizer qwen --chat-template unstable.jinja chat.jsonl
# Qwen3's way: a think block on the last answer alone, so an earlier answer's rendering changes
refused "a template stable for one turn, not for two" "chat\.jsonl:2: the chat template is not prefix-stable at messages\[2\] \(assistant\)" \
    --tokenizer qwen --chat-template think.jinja chat.jsonl
refused "chat.json's template refused before any example is read (json.jsonl's line 3 is no JSON)" \
    "inline\.jinja \(a one-turn chat rendered for chat\.json\): the chat template's pieces are not separable" \
    --tokenizer qwen --chat-template inline.jinja json.jsonl
# templates chat.json cannot hold (its one-turn chat is rendered around the question
# "the sentinel question of ddprun?" and the answer "the sentinel answer of ddprun.")
refused "a token across the user prefix's end" \
    "inline\.jinja \(a one-turn chat rendered for chat\.json\): the chat template's pieces are not separable: the user prefix 'user: ' and the user message" \
    --tokenizer qwen --chat-template inline.jinja chat.jsonl
refused "a template that changes the message" "upper\.jinja \(a one-turn chat rendered for chat\.json\): the chat template writes a user message .* 0 times" \
    --tokenizer qwen --chat-template upper.jinja chat.jsonl
refused "nothing after an answer" "noend\.jinja \(a one-turn chat rendered for chat\.json\): the chat template writes nothing after an assistant message" \
    --tokenizer qwen --chat-template noend.jinja pc.jsonl
# a refusal into a new OUT_DIR creates nothing
"$PREP" --tokenizer qwen json.jsonl fresh > /dev/null 2>&1
check "a refusal creates no OUT_DIR" test ! -e fresh -a -z "$(ls -A | grep '^\.fresh\.')"
finish
