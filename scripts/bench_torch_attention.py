#!/usr/bin/env python3
"""scripts/bench_torch_attention.py — PyTorch's causal scaled_dot_product_attention at one shape on
the GPU, timed as scripts/bench_attention.c times ddprun's attention ops, for
scripts/bench-attention-gpu.

    bench_torch_attention.py [--iters N] [--backend default|flash|cudnn|efficient] B,T,NH,NKV,HS ...

bf16 q [B, NH, T, HS], k and v [B, NKV, T, HS] (enable_gqa when NKV < NH), random in [-1, 1];
3 warm-up runs, then the median of N (default 20) runs timed with CUDA events: the forward alone,
then the backward of the output with a random gradient (retain_graph, so only the backward is in
the timed region). Prints one line per shape in bench_attention's format, FLOPs counted the same
way (causal: forward 4·B·NH·HS·T(T+1)/2, backward 2.5 times it), or `unavailable B T NH NKV HS
REASON` when the chosen backend cannot run it. Numbers only: it asserts nothing.
"""
import argparse
import statistics
import sys

import torch
import torch.nn.functional as F


def bench(a, B, T, NH, NKV, HS):
    g = torch.Generator(device="cuda").manual_seed(1)
    def rand(*s):
        return (torch.rand(*s, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
    q = rand(B, NH, T, HS).requires_grad_()
    k = rand(B, NKV, T, HS).requires_grad_()
    v = rand(B, NKV, T, HS).requires_grad_()
    dout = rand(B, NH, T, HS)
    kw = {"is_causal": True}
    if NKV != NH:
        kw["enable_gqa"] = True
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = {"flash": [SDPBackend.FLASH_ATTENTION], "cudnn": [SDPBackend.CUDNN_ATTENTION],
                "efficient": [SDPBackend.EFFICIENT_ATTENTION]}
    ctx = sdpa_kernel(backends[a.backend]) if a.backend != "default" else torch.autocast("cuda", enabled=False)

    def timed(fn):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ms = []
        for i in range(3 + a.iters):
            start.record()
            fn()
            end.record()
            end.synchronize()
            if i >= 3:
                ms.append(start.elapsed_time(end))
        return statistics.median(ms)

    shape = f"{B} {T} {NH} {NKV} {HS}"
    try:
        with ctx:
            fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, **kw))
            out = F.scaled_dot_product_attention(q, k, v, **kw)
            bwd = timed(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
    except RuntimeError as e:
        print(f"unavailable {shape} {str(e).splitlines()[0][:160]}", flush=True)
        return
    flops = 4.0 * B * NH * HS * T * (T + 1) / 2
    print(f"attention {shape} bf16 fwd_ms {fwd:.4f} bwd_ms {bwd:.4f} "
          f"fwd_tflops {flops / fwd / 1e9:.2f} bwd_tflops {2.5 * flops / bwd / 1e9:.2f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--backend", default="default", choices=["default", "flash", "cudnn", "efficient"])
    ap.add_argument("shapes", nargs="+", metavar="B,T,NH,NKV,HS")
    a = ap.parse_args()
    for s in a.shapes:
        bench(a, *map(int, s.split(",")))
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
