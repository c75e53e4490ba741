#!/usr/bin/env python3
"""make_hf_llama_scaled.py SRC ROOT [--factor F --low L --high H --original N]: writes
ROOT/hf-llama-scaled-tiny, the Hugging Face fixture of a Llama whose RoPE frequencies are
stretched as Llama 3.1 and 3.2 stretch them (rope_scaling {"rope_type": "llama3"}), which
tests/models/test_llama_rope_scaling.c checks ddprun's import, forward and export against
(tests/fixtures/README.md describes it). SRC is tests/fixtures/hf-llama-tiny: its weights and
input are taken as they are, its config gets the rope_scaling; transformers saves the folder
(save_pretrained, safetensors, float32) and computes the logits from that folder in float64
with eager attention, stored rounded to float32. The defaults (factor 4, low_freq_factor 0.5,
high_freq_factor 2, original_max_position_embeddings 16, with head size 16 and rope_theta 10000)
put the RoPE pairs in all three of the stretch's bands: pair 0 (wavelength 6.3 positions, under
16/2) keeps its speed, pair 1 (19.9) is blended, pairs 2..7 (over 16/0.5) turn 4 times slower.
Needs torch and transformers; never writes outside ROOT/hf-llama-scaled-tiny, and refuses an
existing one."""
import argparse
import os
import sys

import numpy as np
import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

p = argparse.ArgumentParser()
p.add_argument("src")
p.add_argument("root")
p.add_argument("--factor", type=float, default=4.0)
p.add_argument("--low", type=float, default=0.5)
p.add_argument("--high", type=float, default=2.0)
p.add_argument("--original", type=int, default=16)
a = p.parse_args()
out = os.path.join(a.root, "hf-llama-scaled-tiny")
if os.path.exists(out):
    sys.exit(f"make_hf_llama_scaled: {out} exists")

config = LlamaConfig.from_pretrained(a.src)
config.rope_scaling = {"rope_type": "llama3", "factor": a.factor, "low_freq_factor": a.low,
                       "high_freq_factor": a.high, "original_max_position_embeddings": a.original}
config._name_or_path = ""  # as a model made from scratch saves it: no path of this machine
model = LlamaForCausalLM.from_pretrained(a.src, config=config, torch_dtype=torch.float32)
model.config._name_or_path = ""
model.save_pretrained(out, safe_serialization=True)

# the input and its shape from SRC's MANIFEST ("input i32 BxT")
shape = None
with open(os.path.join(a.src, "MANIFEST")) as f:
    header = f.readline().rstrip("\n")
    for line in f:
        name, dtype, dims = line.split()
        if name == "input":
            shape = [int(d) for d in dims.split("x")]
inp = np.fromfile(os.path.join(a.src, "input.bin"), dtype="<i4").reshape(shape)
inp.astype("<i4").tofile(os.path.join(out, "input.bin"))

again = LlamaForCausalLM.from_pretrained(out, torch_dtype=torch.float64, attn_implementation="eager").eval()
with torch.no_grad():
    logits = again(torch.from_numpy(inp.astype(np.int64))).logits
logits.to(torch.float32).numpy().astype("<f4").tofile(os.path.join(out, "logits.bin"))
unscaled = LlamaForCausalLM.from_pretrained(a.src, torch_dtype=torch.float64, attn_implementation="eager").eval()
with torch.no_grad():
    moved = (unscaled(torch.from_numpy(inp.astype(np.int64))).logits - logits).abs().max().item()

fields = dict(kv.split("=") for kv in header.split(";")[0].split()[2:])
B, T = shape
V = fields["V"]
with open(os.path.join(out, "MANIFEST"), "w") as f:
    f.write(f"# hf-llama-scaled-tiny L={fields['L']} C={fields['C']} NH={fields['NH']} NKV={fields['NKV']} "
            f"FFN={fields['FFN']} NPOS={fields['NPOS']} V={V} B={B} T={T} rope_theta={fields['rope_theta']} "
            f"norm_eps={fields['norm_eps']} rope_factor={a.factor:g} rope_low_freq_factor={a.low:g} "
            f"rope_high_freq_factor={a.high:g} rope_original_positions={a.original}; hf-llama-tiny's weights "
            f"and input with rope_scaling llama3; logits computed by HF from model.safetensors in float64, "
            f"rounded to float32 (the stretch moves them by up to {moved:.3g}); torch {torch.__version__}; "
            f"transformers {transformers.__version__}\n")
    f.write(f"input i32 {B}x{T}\nlogits f32 {B}x{T}x{V}\n")
print(f"wrote {out}; the stretch moves the logits by up to {moved:.3g}")
