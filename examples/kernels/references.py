"""Correctness references for the corpus kernels, in plain PyTorch.

Each port spec names one of these as `references:<function>`. The correctness
harness calls it with the input arrays (torch tensors on the GPU, in their
test dtype) and the scalars as keyword arguments, plus the constants the spec
lists in `reference.pass_constants`, and compares its result (one tensor, or
a dict of tensors by output parameter name) with the kernel's outputs after
casting both to float64. Every reference computes in float32 or wider.
"""

import math

import torch
import torch.nn.functional as F

MASK32 = 0xFFFFFFFF


def vector_add(a, b):
    return a.float() + b.float()


def scaled_gelu(x, scale):
    return scale * F.gelu(x.float(), approximate="tanh")


def masked_softshrink(x, mask, lambd):
    v = x.float()
    return torch.where(mask != 0, F.softshrink(v, lambd), v)


def softmax(x):
    return torch.softmax(x.float(), dim=-1)


def rmsnorm(x, weight, eps):
    v = x.float()
    return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def layernorm(x, weight, bias, eps):
    v = x.float()
    var, mean = torch.var_mean(v, dim=-1, unbiased=False)
    y = F.layer_norm(v, (v.shape[-1],), weight.float(), bias.float(), eps)
    return {"y": y, "mean_out": mean, "rstd_out": torch.rsqrt(var + eps)}


def silu_and_mul(x):
    gate, up = x[:, 0, :].float(), x[:, 1, :].float()
    return F.silu(gate) * up


def swiglu(a, b):
    return F.silu(a.float()) * b.float()


def matmul(a, b):
    return torch.matmul(a.float(), b.float())


def transpose(x):
    return x.t()


def embedding_gather(table, ids):
    rows = F.embedding(ids.clamp(min=0).long(), table)
    return torch.where((ids >= 0)[:, None], rows, torch.zeros_like(rows))


def rotary(x, positions, cos_cache, sin_cache):
    cos = cos_cache.float()[positions][:, None, :]
    sin = sin_cache.float()[positions][:, None, :]
    x1, x2 = x[:, :, 0, :].float(), x[:, :, 1, :].float()
    return {"x": torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=2)}


def attention_decode(q, k, v, seq_lens, scale):
    scores = torch.einsum("bhd,bsd->bhs", q.float(), k.float()) * scale
    positions = torch.arange(k.shape[1], device=k.device)
    valid = positions[None, None, :] < seq_lens[:, None, None]
    scores = scores.masked_fill(~valid, -math.inf)
    out = torch.einsum("bhs,bsd->bhd", torch.softmax(scores, dim=-1), v.float())
    return {"out": out, "lse": torch.logsumexp(scores, dim=-1) / math.log(2.0)}


def column_sum(x, out):
    return {"out": out + x.float().sum(dim=0)}


def cumsum(x):
    return torch.cumsum(x, dim=-1)


def _mul32(a, c):
    """(a * c) mod 2^32 for a < 2^32, in int64 without overflow: c split in halves."""
    low = a * (c & 0xFFFF)
    high = ((a * (c >> 16)) & 0xFFFF) << 16
    return (low + high) & MASK32


def _rotl32(x, r):
    return ((x << r) | (x >> (32 - r))) & MASK32


def _murmur3_32(key, seed):
    k = _mul32(_rotl32(_mul32(key, 0xCC9E2D51), 15), 0x1B873593)
    h = (_mul32(_rotl32(seed ^ k, 13), 5) + 0xE6546B64) & MASK32
    h = h ^ 4
    h = _mul32(h ^ (h >> 16), 0x85EBCA6B)
    h = _mul32(h ^ (h >> 13), 0xC2B2AE35)
    return h ^ (h >> 16)


def dropout(x, seed, p):
    index = torch.arange(x.numel(), device=x.device, dtype=torch.int64)
    bits = _murmur3_32(index, seed & MASK32)
    uniform = (bits >> 8).to(torch.float32) * (1.0 / 16777216.0)
    p32 = torch.tensor(p, dtype=torch.float32, device=x.device)
    kept = x.float() / (1.0 - p32)
    return torch.where(uniform >= p32, kept, torch.zeros_like(kept))


def cross_entropy(logits, targets):
    return F.cross_entropy(logits.float(), targets, reduction="none", ignore_index=-100)


def grouped_matmul(x, weights, expert_offsets):
    out = torch.zeros(x.shape[0], weights[0].shape[1], device=x.device, dtype=torch.float32)
    offsets = expert_offsets.tolist()
    for expert, weight in enumerate(weights):
        start, end = offsets[expert], offsets[expert + 1]
        out[start:end] = x[start:end].float() @ weight.float()
    return out
