#!/usr/bin/env python3
"""make_mlp_reference.py ROOT [--seed S] [--batch B] [--dims IN-HIDDEN...-CLASSES]: writes
ROOT/mlp-reference, the MLP reference fixture that tests/models/mlp_fixture.h checks against
(tests/fixtures/README.md describes it), with PyTorch: the model and every expected value in
float64, each tensor rounded to float32 when written. With the defaults (seed 30, batch 16,
784-64-32-10) and Debian's python3-torch 1.13 it writes the bytes of tests/fixtures/mlp-reference
(the fixture_regenerate test checks); other arguments give a fixture of other shapes that the MLP
tests must pass unchanged (DDP_TEST_FIXTURES=ROOT). It prints the smallest nonzero gradient entry
of the AdamW trajectories: below ~5e-8, float32 rounding shows in AdamW's steps (pick another
seed). Needs torch; never writes outside ROOT/mlp-reference, and refuses an existing one."""
import argparse
import os
import sys

import torch

p = argparse.ArgumentParser()
p.add_argument("root")
p.add_argument("--seed", type=int, default=30)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--dims", default="784-64-32-10")
a = p.parse_args()

dims = [int(d) for d in a.dims.split("-") if d.isdigit() and int(d) > 0]
if len(dims) < 3 or len(dims) != len(a.dims.split("-")) or a.batch < 1:
    sys.exit("make_mlp_reference: --dims needs IN-HIDDEN...-CLASSES (positive widths), --batch at least 1")
n_layers = len(dims) - 1

# the layers' init (nn.Linear's own) from the global generator, the batch from one of its own,
# both seeded with the seed: inputs uniform in [0, 1) as float32, labels uniform in [0, classes)
torch.manual_seed(a.seed)
init_layers = [torch.nn.Linear(dims[i], dims[i + 1]) for i in range(n_layers)]
g = torch.Generator().manual_seed(a.seed)
x32 = torch.rand(a.batch, dims[0], generator=g)
y = torch.randint(0, dims[-1], (a.batch,), generator=g)



def params_from(layers):
    """{"fc1.weight": float64 tensor, ...}: PyTorch's layout, weight [out, in]."""
    params = {}
    for i, layer in enumerate(layers):
        params[f"fc{i+1}.weight"] = layer.weight.detach().double().clone()
        params[f"fc{i+1}.bias"] = layer.bias.detach().double().clone()
    return params


init = params_from(init_layers)
x = x32.double()
manifest = []
out = os.path.join(a.root, "mlp-reference")
if os.path.exists(out):
    sys.exit(f"make_mlp_reference: {out} exists; give a new directory")
os.makedirs(out)


def save(name, t, dtype="f32"):
    """NAME.bin: t rounded to float32 (or int32), little-endian, row-major; its MANIFEST line."""
    arr = t.detach().numpy().astype("<f4" if dtype == "f32" else "<i4")
    arr.tofile(os.path.join(out, name + ".bin"))
    shape = "x".join(str(s) for s in (arr.shape if arr.ndim else (1,)))
    manifest.append(f"{name} {dtype} {shape}")


def forward(params, act):
    """Logits of the batch: Linear layers, act between them (exact GELU, not tanh), none after the last."""
    h = x
    for i in range(n_layers):
        h = h @ params[f"fc{i+1}.weight"].T + params[f"fc{i+1}.bias"]
        if i < n_layers - 1:
            h = torch.relu(h) if act == "relu" else torch.nn.functional.gelu(h)
    return h


def leaf(params):
    """Fresh float64 copies that collect gradients."""
    return {k: v.clone().requires_grad_(True) for k, v in params.items()}


save("input", x32)
save("labels", y.int(), "i32")
for act in ("relu", "gelu"):
    P = leaf(init)
    for k, v in init.items():
        save(f"{act}.init.{k}", v)
    logits = forward(P, act)
    loss = torch.nn.functional.cross_entropy(logits, y)
    loss.backward()
    save(f"{act}.logits", logits)
    save(f"{act}.loss", loss.reshape(1))
    for k in init:
        save(f"{act}.grad.{k}", P[k].grad)
    save(f"{act}.grad_global_norm", torch.sqrt(sum((P[k].grad ** 2).sum() for k in init)).reshape(1))

smallest = {}  # the smallest nonzero |gradient| entry of each trajectory


def trajectory(name, make_opt, clip=None):
    """3 steps of make_opt's optimizer from the init on the same batch (ReLU model), each a fresh
    forward/backward, clipping the global gradient norm to clip first when given."""
    P = leaf(init)
    opt = make_opt(list(P.values()))
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(forward(P, "relu"), y)
        losses.append(loss.item())
        loss.backward()
        g = torch.cat([p.grad.abs().flatten() for p in P.values()])
        smallest[name] = min(smallest.get(name, 1.0), g[g > 0].min().item())
        if clip:
            torch.nn.utils.clip_grad_norm_(list(P.values()), clip)
        opt.step()
    for k in init:
        save(f"{name}.after3.{k}", P[k])
    save(f"{name}.losses", torch.tensor(losses, dtype=torch.float64))


trajectory("sgd", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4))
trajectory("sgd_plain", lambda ps: torch.optim.SGD(ps, lr=0.1))
trajectory("adamw", lambda ps: torch.optim.AdamW(ps, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01))
trajectory("adamw_clip", lambda ps: torch.optim.AdamW(ps, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01), 0.5)

with open(os.path.join(out, "MANIFEST"), "w") as f:
    f.write(f"# mlp-reference seed={a.seed} B={a.batch} dims={a.dims}; torch {torch.__version__}\n")
    f.write("\n".join(manifest) + "\n")

for name in ("adamw", "adamw_clip"):
    note = "" if smallest[name] >= 5e-8 else "  (below 5e-8: float32 rounding shows in AdamW's steps; try another --seed)"
    print(f"{name}: smallest nonzero |gradient| {smallest[name]:.3g}{note}")
