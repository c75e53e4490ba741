"""tests/scripts/make_hf_tokenizer.py KIND OUT — a small Hugging Face tokenizer.json for
test_prepare_text.sh, built and trained (on a few KJV verses) with the tokenizers package itself, so
that prepare-text reads what that library writes. Test data only: it checks nothing.
  bytelevel      GPT-2's kind: ByteLevel pre-tokenizer and decoder, <|endoftext|> special, and the
                 non-ASCII added token "naïve café"
  sentencepiece  Llama 2's kind: Metaspace, BPE with byte fallback (<0x00>..<0xFF> after <unk> <s>
                 </s>), decoder Replace/ByteFallback/Fuse/Strip, <s> put before each text
  wide           bytelevel with the merged tokens' ids moved above 65,535 and <|begin_of_text|>
                 (the last id) put before each text, as Llama 3's
  llama3         bytelevel with Llama 3's pre-tokenizer: its Split regex, then ByteLevel without one
  qwen2          llama3 with Qwen2's regex (single digits) after an NFC normalizer
  othersplit     llama3 with a Split regex of its own (digits apart, GPT-2's otherwise)
  wordpiece      bytelevel with a WordPiece decoder (prepare-text refuses it)
  gap            bytelevel with the last merged token's id moved 1000 up, leaving ids with no token
  small          bytelevel of 290 ids, for the 300 of tests/fixtures/hf-llama-tiny
  small-swapped  small with two merged tokens' ids swapped: another vocabulary of the same size
  small-added    small with one more added token (<|eom_id|>), as Llama 3.1's beside Llama 3's
  small-marked   small with one of its own tokens added again: listed in added_tokens at its id
"""
import json, sys
from tokenizers import Tokenizer, Regex, models, normalizers, trainers, pre_tokenizers, decoders, processors
kind, out = sys.argv[1], sys.argv[2]
# written out here, as the released tokenizer.json files spell them, not taken from prepare-text
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
          r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
         r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
OTHER = r"""\p{N}|'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
KJV = ["In the beginning God created the heaven and the earth.",
       "And the earth was without form, and void; and darkness was upon the face of the deep.",
       "And the Spirit of God moved upon the face of the waters.",
       "And God said, Let there be light: and there was light.",
       "And God saw the light, that it was good: and God divided the light from the darkness."] * 4

def bytelevel(vocab, split=None, nfc=False):
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    if split:
        t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), "isolated"),
                                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    if nfc:
        t.normalizer = normalizers.NFC()
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(KJV, trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                                                   initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                   show_progress=False))
    return t

if kind in ("bytelevel", "wordpiece", "gap"):
    t = bytelevel(400)
    t.add_tokens(["naïve café"])  # encodes to one id whose bytes are this UTF-8
    d = json.loads(t.to_str())
    if kind == "wordpiece":
        d["decoder"] = {"type": "WordPiece", "prefix": "##", "cleanup": True}
    if kind == "gap":  # the last merged token moves past the added one: the ids between have no token
        vocab = d["model"]["vocab"]
        vocab[max(vocab, key=vocab.get)] += 1000
    t = Tokenizer.from_str(json.dumps(d))
elif kind in ("small", "small-swapped", "small-added", "small-marked"):
    t = bytelevel(290)
    d = json.loads(t.to_str())
    if kind == "small-swapped":
        vocab = d["model"]["vocab"]
        a, b = sorted(vocab, key=vocab.get)[-2:]
        vocab[a], vocab[b] = vocab[b], vocab[a]
    t = Tokenizer.from_str(json.dumps(d))
    if kind == "small-added":
        t.add_special_tokens(["<|eom_id|>"])
    if kind == "small-marked":
        vocab = t.get_vocab(with_added_tokens=False)
        t.add_tokens([max(vocab, key=vocab.get)])
elif kind in ("llama3", "qwen2", "othersplit"):
    t = bytelevel(400, {"llama3": LLAMA3, "qwen2": QWEN2, "othersplit": OTHER}[kind], nfc=kind == "qwen2")
elif kind == "wide":
    d = json.loads(bytelevel(400).to_str())
    vocab = d["model"]["vocab"]
    first = 1 + 256  # <|endoftext|>, then the byte alphabet
    d["model"]["vocab"] = {s: (i + 65536 if i >= first else i) for s, i in vocab.items()}
    d["model"]["vocab"].update({f"<filler{i}>": i for i in range(first, first + 65536)})
    t = Tokenizer.from_str(json.dumps(d))
    t.add_special_tokens(["<|begin_of_text|>"])
    bos = t.token_to_id("<|begin_of_text|>")
    assert bos > 65535
    t.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                     special_tokens=[("<|begin_of_text|>", bos)])
elif kind == "sentencepiece":
    t = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never")
    t.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                   decoders.Strip(" ", 1, 0)])
    t.train_from_iterator(KJV, trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                                   show_progress=False))
    d = json.loads(t.to_str())  # sentencepiece's <0x00>..<0xFF> after the specials, as Llama 2 has them
    vocab = d["model"]["vocab"]
    d["model"]["vocab"] = {s: (i + 256 if i >= 3 else i) for s, i in vocab.items()}
    d["model"]["vocab"].update({f"<0x{b:02X}>": 3 + b for b in range(256)})
    t = Tokenizer.from_str(json.dumps(d))
    t.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
else:
    sys.exit(f"make_tok.py: unknown kind {kind}")
t.save(out)
