#!/usr/bin/env python3
"""make_hf_mistral_tiny.py INPUT_FIXTURE ROOT [--seed S] [--head-dim HD --name NAME]: writes
ROOT/NAME (hf-mistral-tiny), the Hugging Face fixture of a Mistral (transformers' MistralForCausalLM:
the Llama's block, rope_theta 1e6, no sliding window as in Mistral-7B-v0.2 and later) that
tests/models/test_mistral_hf.c checks ddprun's import, forward and export against
(tests/fixtures/README.md describes it). The model: 2 layers, hidden_size 64, 4 heads over 2
key/value heads of head_dim HD (16, hidden_size / heads; hf-mistral-nemo-tiny's 24 makes the heads
96 wide, as Mistral-Nemo's are not hidden_size wide), intermediate_size 176, vocab_size 300, 32
positions, untied; HF's own init from the seed, then every RMSNorm weight redrawn as
1 + N(0, 0.1) so that a mix-up of two norms cannot hide. save_pretrained writes it in float32, and
its bfloat16 cast in bf16/; the input is INPUT_FIXTURE's (hf-llama-tiny's: text bytes modulo the
vocabulary), and the logits of each folder are computed from that folder in float64 with eager
attention, stored rounded to float32; MANIFEST's header gives the float32 noise floor (floor=: a
float32 forward of the folder against those logits, relative to the largest). Needs torch and
transformers; never writes outside ROOT/NAME, and refuses an existing one."""
import argparse
import os
import sys

import numpy as np
import torch
import transformers
from transformers import MistralConfig, MistralForCausalLM

from hf_tiny_fixture import fixture_input, save_with_norms_redrawn

p = argparse.ArgumentParser()
p.add_argument("input_fixture")
p.add_argument("root")
p.add_argument("--seed", type=int, default=43)
p.add_argument("--head-dim", type=int, default=16)
p.add_argument("--name", default="hf-mistral-tiny")
a = p.parse_args()
out = os.path.join(a.root, a.name)
if os.path.exists(out):
    sys.exit(f"make_hf_mistral_tiny: {out} exists")

torch.manual_seed(a.seed)
config = MistralConfig(vocab_size=300, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=a.head_dim, max_position_embeddings=32,
                       rms_norm_eps=1e-5, rope_theta=1e6, sliding_window=None, tie_word_embeddings=False)
save_with_norms_redrawn(MistralForCausalLM(config).to(torch.float32), out)
inp = fixture_input(a.input_fixture)
shape = list(inp.shape)
inp.astype("<i4").tofile(os.path.join(out, "input.bin"))


def logits_of(folder, dtype=torch.float64):
    m = MistralForCausalLM.from_pretrained(folder, torch_dtype=dtype, attn_implementation="eager").eval()
    with torch.no_grad():
        return m(torch.from_numpy(inp.astype(np.int64))).logits


f32, bf16 = logits_of(out), logits_of(os.path.join(out, "bf16"))
# The float32 noise floor: transformers' own float32 forward of the folder against the stored logits,
# over the largest; what a correct float32 implementation can be held to.
stored = f32.to(torch.float32).double()
floor = ((logits_of(out, torch.float32).double() - stored).abs().max() / stored.abs().max()).item()
f32.to(torch.float32).numpy().astype("<f4").tofile(os.path.join(out, "logits.bin"))
bf16.to(torch.float32).numpy().astype("<f4").tofile(os.path.join(out, "logits_bf16.bin"))
B, T = shape
V = config.vocab_size
with open(os.path.join(out, "MANIFEST"), "w") as f:
    head_dim = f" HD={a.head_dim}" if a.head_dim != 16 else ""
    f.write(f"# {a.name} seed={a.seed} L=2 C=64 NH=4 NKV=2{head_dim} FFN=176 NPOS=32 V={V} B={B} T={T} "
            f"rope_theta=1000000 norm_eps=1e-05 floor={floor:.2g}; floor: transformers' float32 forward of "
            f"model.safetensors against logits, over the largest; logits computed by HF from model.safetensors "
            f"(logits_bf16: from bf16/model.safetensors) in float64, rounded to float32 (bf16 moves them by up to "
            f"{(f32 - bf16).abs().max().item():.3g}, the largest is {f32.abs().max().item():.3g}); torch "
            f"{torch.__version__}; transformers {transformers.__version__}\n")
    f.write(f"input i32 {B}x{T}\nlogits f32 {B}x{T}x{V}\nlogits_bf16 f32 {B}x{T}x{V}\n")
print(f"wrote {out}")
