#!/usr/bin/env python3
"""make_hf_qwen3_tiny.py INPUT_FIXTURE ROOT [--seed S]: writes ROOT/hf-qwen3-tiny, the Hugging Face
fixture of a Qwen3 (transformers' Qwen3ForCausalLM: the Llama's block with an RMSNorm over each q and
k head before RoPE) that tests/models/test_qwen3_hf.c checks ddprun's import, forward, backward and
export against (tests/fixtures/README.md describes it). The model: 2 layers, hidden_size 64, 4 heads
over 2 key/value heads of head_dim 24 (the heads 96 wide, not hidden_size, as Qwen3-0.6B's 16 x 128
over 1024), intermediate_size 176, vocab_size 300, 32 positions, tied embeddings, rope_theta 1e6,
rms_norm_eps 1e-6; HF's own init from the seed, then every RMSNorm weight (q_norm and k_norm too)
redrawn as 1 + N(0, 0.1) so that a mix-up of two norms cannot hide. save_pretrained writes it in
float32, and its bfloat16 cast in bf16/; the input is INPUT_FIXTURE's (hf-llama-tiny's), the target
of each position the next token (the last position of a row has none: -1). From each saved folder
in float64 with eager attention: the logits (logits, logits_bf16); from the float32 folder also the
mean cross-entropy over the targets (loss) and its gradient for every parameter (grad.NAME, the
tied embedding's holding both uses), all stored rounded to float32. MANIFEST's header gives two
float32 noise floors measured by the same computation in float32: floor, the logits' largest
difference over the largest logit, and grad_floor, the largest over the tensors of a gradient's
largest difference over its largest magnitude. Needs torch >= 2 and transformers >= 4.51 (Qwen3);
never writes outside ROOT/hf-qwen3-tiny, and refuses an existing one."""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from transformers import Qwen3Config, Qwen3ForCausalLM

from hf_tiny_fixture import fixture_input, save_with_norms_redrawn

p = argparse.ArgumentParser()
p.add_argument("input_fixture")
p.add_argument("root")
p.add_argument("--seed", type=int, default=44)
a = p.parse_args()
NAME = "hf-qwen3-tiny"
out = os.path.join(a.root, NAME)
if os.path.exists(out):
    sys.exit(f"make_hf_qwen3_tiny: {out} exists")

torch.manual_seed(a.seed)
config = Qwen3Config(vocab_size=300, hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=24, max_position_embeddings=32, rms_norm_eps=1e-6,
                     rope_theta=1e6, tie_word_embeddings=True, use_sliding_window=False, sliding_window=None)
save_with_norms_redrawn(Qwen3ForCausalLM(config).to(torch.float32), out)
inp = fixture_input(a.input_fixture)
shape = list(inp.shape)
B, T = shape
V = config.vocab_size
target = np.full((B, T), -1, dtype=np.int64)
target[:, :-1] = inp[:, 1:]


def run(folder, dtype, backward):
    m = Qwen3ForCausalLM.from_pretrained(folder, torch_dtype=dtype, attn_implementation="eager").eval()
    logits = m(torch.from_numpy(inp.astype(np.int64))).logits
    if not backward:
        return logits.detach(), None, None
    loss = F.cross_entropy(logits.reshape(-1, V), torch.from_numpy(target).reshape(-1), ignore_index=-1)
    loss.backward()
    return logits.detach(), loss.detach(), {n: t.grad.detach() for n, t in m.named_parameters()}


logits, loss, grads = run(out, torch.float64, True)
logits_bf16, _, _ = run(os.path.join(out, "bf16"), torch.float64, False)
logits32, _, grads32 = run(out, torch.float32, True)


def stored(t):
    return t.to(torch.float32).double()


floor = ((logits32.double() - stored(logits)).abs().max() / stored(logits).abs().max()).item()
grad_floor = max(((grads32[n].double() - stored(g)).abs().max() / stored(g).abs().max()).item()
                 for n, g in grads.items())

arrays = [("input", "i32", inp.astype("<i4")), ("target", "i32", target.astype("<i4")),
          ("logits", "f32", logits), ("logits_bf16", "f32", logits_bf16), ("loss", "f32", loss.reshape(1))]
arrays += [(f"grad.{n}", "f32", g) for n, g in grads.items()]
with open(os.path.join(out, "MANIFEST"), "w") as f:
    f.write(f"# {NAME} seed={a.seed} L=2 C=64 NH=4 NKV=2 HD=24 FFN=176 NPOS=32 V={V} B={B} T={T} rope_theta=1000000 "
            f"norm_eps=1e-06 tied=1 floor={floor:.2g} grad_floor={grad_floor:.2g}; logits, loss and grad.* computed by "
            f"HF from model.safetensors (logits_bf16: from bf16/model.safetensors) in float64, rounded to float32 "
            f"(bf16 moves the logits by up to {(logits - logits_bf16).abs().max().item():.3g}, the largest is "
            f"{logits.abs().max().item():.3g}); loss: the mean over the targets (target -1: none); floor and "
            f"grad_floor: the same in float32; torch {torch.__version__}; transformers {transformers.__version__}\n")
    for name, dtype, v in arrays:
        v = np.asarray(v.to(torch.float32).numpy() if torch.is_tensor(v) else v)
        v = v.astype("<f4" if dtype == "f32" else "<i4")
        v.tofile(os.path.join(out, name + ".bin"))
        f.write(f"{name} {dtype} {'x'.join(str(d) for d in v.shape)}\n")
print(f"wrote {out}: floor {floor:.3g}, grad_floor {grad_floor:.3g}, loss {loss.item():.6f}")
