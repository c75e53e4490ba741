"""PyTorch reference for scripts/bench-gpt and scripts/bench-gpt-gpu: the same GPT-2 as models/gpt2.c
(tied token embedding and classifier, learned position embedding, pre-LayerNorm blocks, causal
self-attention as explicit matmul + mask + softmax, tanh-GELU MLP of 4x width, final LayerNorm),
trained with AdamW (weight decay on the 2-D weights only, as ddprun's per-tensor no-decay list) and
gradient clipping at 1.0, fp32 on the CPU, one process with --threads intra-op threads. On a GPU
(--device cuda): --bf16 autocasts forward to bfloat16 over fp32 weights (ddprun's `precision:
bf16`), --fused uses the fused AdamW kernel, --sdpa replaces the explicit attention by
scaled_dot_product_attention (flash attention), --compile wraps the model in torch.compile (the
warm-up steps absorb the compilation), and each timed window ends with a device synchronisation.
Out of GPU memory, it prints "out_of_memory" instead of the figures. The vocabulary is the padded
one ddprun's wte holds (nanoGPT's 50304 trick), so the GEMM shapes and FLOPs match ours exactly.
--model llama measures the same kind of Llama as models/llama.c instead, written with torch.nn as
Hugging Face's LlamaForCausalLM computes it: an untied lm_head (--tie: the classifier is the token
embedding, as Llama-3.2-1B's), RMSNorm (--norm-eps; F.rms_norm where the PyTorch has it, else the
formula), rotary position embeddings (rotate-half, base --rope-theta), grouped-query attention with
--kv-heads K/V heads repeated to the query heads (explicit attention, or with --sdpa
scaled_dot_product_attention with is_causal), SwiGLU MLP of --ffn width, no biases, AdamW decaying
the 2-D weights. With PyTorch 2 the model is built on --device directly (no host-side init).
Batches are random windows of a token shard from scripts/prepare-text (uint16 or uint32 tokens),
or random tokens below --vocab-padded.

Prints one line: the median tokens/s over windows of --window steps after --warmup steps, then
the median ms/step, e.g. "tokens_per_s 4321.0 ms_per_step 1234.5". Measures only.
--params prints the model's counts instead, built on the meta device (nothing allocated, nothing
run; PyTorch 2): "params P flop_params N": P every parameter (a tied matrix once), N those a token's
step multiplies by, the FLOP count's N (every parameter but the token embedding, which is a lookup;
the classifier counted, also when it is the tied embedding), as scripts/bench-gpt-gpu counts them;
for GPT-2 N is P, llm.c's convention, which bench-gpt-gpu keeps.
Needs python3 with numpy and PyTorch (1.13 or later; --sdpa, --compile and --params need 2.x)."""
import argparse
import math
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, C, NH, T, sdpa=False):
        super().__init__()
        self.NH = NH
        self.sdpa = sdpa
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T),
                             persistent=False)

    def attn(self, x):
        B, T, C = x.shape
        hs = C // self.NH
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.NH, hs).transpose(1, 2)
        k = k.view(B, T, self.NH, hs).transpose(1, 2)
        v = v.view(B, T, self.NH, hs).transpose(1, 2)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, L, C, NH, T, Vp, sdpa=False):
        super().__init__()
        self.wte = nn.Embedding(Vp, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList([Block(C, NH, T, sdpa) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for blk in self.h:
            x = blk(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied classifier
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


class RMSNorm(nn.Module):
    def __init__(self, C, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(C))

    def forward(self, x):
        if hasattr(F, "rms_norm"):  # PyTorch 2.4 and later: one op
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, C, NH, NKV, F, T, eps, sdpa=False):
        super().__init__()
        self.NH, self.NKV, self.hs, self.sdpa = NH, NKV, C // NH, sdpa
        self.input_layernorm = RMSNorm(C, eps)
        self.q_proj = nn.Linear(C, NH * self.hs, bias=False)
        self.k_proj = nn.Linear(C, NKV * self.hs, bias=False)
        self.v_proj = nn.Linear(C, NKV * self.hs, bias=False)
        self.o_proj = nn.Linear(NH * self.hs, C, bias=False)
        self.post_attention_layernorm = RMSNorm(C, eps)
        self.gate_proj = nn.Linear(C, F, bias=False)
        self.up_proj = nn.Linear(C, F, bias=False)
        self.down_proj = nn.Linear(F, C, bias=False)
        if not sdpa:  # SDPA masks by is_causal; the T x T mask is the explicit attention's alone
            self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T),
                                 persistent=False)

    def attn(self, x, cos, sin):
        B, T, _ = x.shape
        hs = self.hs
        q = self.q_proj(x).view(B, T, self.NH, hs).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.NKV, hs).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.NKV, hs).transpose(1, 2)
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)  # bf16 under autocast, as the projections
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(self.NH // self.NKV, dim=1)  # query head h reads K/V head h // (NH/NKV)
        v = v.repeat_interleave(self.NH // self.NKV, dim=1)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = F.softmax(att.masked_fill(~self.mask[:, :, :T, :T], float("-inf")), dim=-1)
            y = att @ v
        return self.o_proj(y.transpose(1, 2).contiguous().view(B, T, self.NH * hs))

    def forward(self, x, cos, sin):
        x = x + self.attn(self.input_layernorm(x), cos, sin)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, L, C, NH, NKV, F, T, Vp, theta=10000.0, eps=1e-5, tie=False, sdpa=False):
        super().__init__()
        self.embed_tokens = nn.Embedding(Vp, C)
        self.layers = nn.ModuleList([LlamaBlock(C, NH, NKV, F, T, eps, sdpa) for _ in range(L)])
        self.norm = RMSNorm(C, eps)
        self.lm_head = None if tie else nn.Linear(C, Vp, bias=False)
        hs = C // NH
        inv = 1.0 / theta ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs)
        ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
        ang = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def counts(self):
        """(P, N): every parameter (a tied matrix once), and the FLOP count's N (all but the token
        embedding's lookup; the classifier counted, tied or not)."""
        P = sum(p.numel() for p in self.parameters())
        return P, P - (0 if self.lm_head is None else self.embed_tokens.weight.numel())

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.embed_tokens(idx)
        cos, sin = self.cos[:T], self.sin[:T]
        for blk in self.layers:
            x = blk(x, cos, sin)
        x = self.norm(x)
        logits = F.linear(x, self.embed_tokens.weight) if self.lm_head is None else self.lm_head(x)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--embd", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab-padded", type=int, default=50304)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8, help="timed steps after the warm-up")
    ap.add_argument("--window", type=int, default=2, help="steps per timed window")
    ap.add_argument("--data", help="a train_*.bin shard from scripts/prepare-text")
    ap.add_argument("--foreach", action="store_true", help="AdamW(foreach=True)")
    ap.add_argument("--fused", action="store_true", help="AdamW(fused=True), GPU only")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--bf16", action="store_true", help="autocast forward to bfloat16 (GPU)")
    ap.add_argument("--sdpa", action="store_true", help="flash attention instead of explicit matmuls")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--model", default="gpt2", choices=("gpt2", "llama"))
    ap.add_argument("--kv-heads", type=int, default=0, help="llama: K/V heads (default: --heads)")
    ap.add_argument("--ffn", type=int, default=0, help="llama: MLP width (required with --model llama)")
    ap.add_argument("--tie", action="store_true", help="llama: the classifier is the token embedding")
    ap.add_argument("--rope-theta", type=float, default=10000.0, help="llama: RoPE base (Llama 3: 500000)")
    ap.add_argument("--norm-eps", type=float, default=1e-5, help="llama: RMSNorm's epsilon")
    ap.add_argument("--params", action="store_true",
                    help="print 'params P flop_params N' of the model built on the meta device, and exit")
    a = ap.parse_args()
    if a.model == "llama" and a.ffn <= 0:
        ap.error("--model llama needs --ffn")

    def build():
        if a.model == "llama":
            return Llama(a.layers, a.embd, a.heads, a.kv_heads or a.heads, a.ffn, T, a.vocab_padded,
                         a.rope_theta, a.norm_eps, a.tie, a.sdpa)
        return GPT2(a.layers, a.embd, a.heads, T, a.vocab_padded, a.sdpa)

    B, T = a.batch, a.seq
    if a.params:  # the shapes alone: nothing allocated, nothing initialised for real
        with torch.device("meta"):
            model = build()
        if a.model == "llama":
            P, N = model.counts()
        else:  # llm.c's count for GPT-2, as bench-gpt-gpu's: every parameter, wpe and the padded wte
            P = N = sum(p.numel() for p in model.parameters())
        print(f"params {P} flop_params {N}")
        return

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.data:
        with open(a.data, "rb") as f:
            header = np.frombuffer(f.read(1024), dtype="<i4")
            token_type = {20240520: "<u2", 20240801: "<u4"}.get(int(header[0]))  # llm.c's two formats
            if token_type is None:
                sys.exit(f"{a.data}: magic {header[0]} is not an llm.c token shard's")
            tokens = np.frombuffer(f.read(), dtype=token_type)[: header[2]].astype(np.int64)
    else:
        tokens = np.random.default_rng(0).integers(0, a.vocab_padded, 1 << 20)
    tokens = torch.from_numpy(tokens)
    gen = torch.Generator().manual_seed(1)

    def batch():
        starts = torch.randint(0, len(tokens) - T - 1, (B,), generator=gen)
        win = torch.stack([tokens[s:s + T + 1] for s in starts.tolist()])
        return win[:, :-1].to(dev), win[:, 1:].to(dev)

    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    if a.model == "llama" and hasattr(torch.device, "__enter__"):  # PyTorch 2: built and drawn on dev
        with dev:
            model = build()
    else:
        model = build().to(dev)
    run = torch.compile(model) if a.compile else model
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() != 2]
    kw = {"fused": True} if a.fused else {"foreach": True} if a.foreach else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8, **kw)

    def step():
        x, y = batch()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.bf16):
            loss = run(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    sync()
    rates, ms = [], []
    for _ in range(max(1, a.steps // a.window)):
        t0 = time.perf_counter()
        for _ in range(a.window):
            loss = step()
        sync()
        dt = time.perf_counter() - t0
        rates.append(B * T * a.window / dt)
        ms.append(1e3 * dt / a.window)
    if not math.isfinite(loss.item()):
        print("bench_torch_gpt: loss is not finite", file=sys.stderr)
    print(f"tokens_per_s {statistics.median(rates):.1f} ms_per_step {statistics.median(ms):.1f}")


if __name__ == "__main__":
    try:
        main()
    except torch.OutOfMemoryError:
        print("out_of_memory")
