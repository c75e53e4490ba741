#!/usr/bin/env python3
"""hf_same_tensors.py A B — exits 0 when Hugging Face folders A and B hold the same tensors in
model.safetensors (read with the `safetensors` package: names, dtypes, shapes and bytes) and their
config.json files hold the same keys (transformers_version aside) at the same values; else says what
differs and exits 1. The HF export tests' referee (test_hf_llama.sh, test_hf_qwen2.sh)."""
import json
import sys

import safetensors


def tensors(folder):
    with open(folder + "/model.safetensors", "rb") as f:
        return dict(safetensors.deserialize(f.read()))


def main(a_dir, b_dir):
    a, b = tensors(a_dir), tensors(b_dir)
    if sorted(a) != sorted(b):
        sys.exit(f"tensor names differ: {sorted(set(a) ^ set(b))}")
    for name in a:
        for field in ("dtype", "shape", "data"):
            if a[name][field] != b[name][field]:
                sys.exit(f"{name}: {field} differs")
    with open(a_dir + "/config.json") as f:
        ca = json.load(f)
    with open(b_dir + "/config.json") as f:
        cb = json.load(f)
    diff = {k: (cb.get(k, "absent"), ca.get(k, "absent")) for k in set(ca) | set(cb)
            if k != "transformers_version" and ca.get(k, "absent") != cb.get(k, "absent")}
    if diff:
        sys.exit(f"config.json keys differ: {diff}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
