"""hf_tiny_fixture.py — what the generators of the tiny Hugging Face fixtures share
(make_hf_mistral_tiny.py, make_hf_qwen3_tiny.py): saving a freshly made model with its RMSNorm
weights redrawn, in float32 and as its bf16 cast, and reading another fixture's input. Imported
from the generators' own directory; needs torch and numpy."""
import os

import numpy as np
import torch


def save_with_norms_redrawn(model, out):
    """Every RMSNorm weight of model redrawn as 1 + N(0, 0.1) from torch's generator (so that a
    mix-up of two norms cannot hide), then save_pretrained into out in float32 and into out/bf16 as
    the bfloat16 cast."""
    with torch.no_grad():
        for name, t in model.named_parameters():
            if name.endswith("norm.weight"):
                t.copy_(1 + 0.1 * torch.randn_like(t))
    model.save_pretrained(out, safe_serialization=True)
    model.to(torch.bfloat16).save_pretrained(os.path.join(out, "bf16"), safe_serialization=True)


def fixture_input(fixture):
    """fixture's `input` tensor (int32, the shape its MANIFEST gives)."""
    shape = None
    with open(os.path.join(fixture, "MANIFEST")) as f:
        f.readline()
        for line in f:
            name, _, dims = line.split()
            if name == "input":
                shape = [int(d) for d in dims.split("x")]
    return np.fromfile(os.path.join(fixture, "input.bin"), dtype="<i4").reshape(shape)
