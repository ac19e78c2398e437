"""fa4_torch - fa4gen's operators as torch.library custom ops, for torch.compile and CUDA graphs.

    import fa4_torch
    o = fa4_torch.mha_fwd(q, k, v, causal=True)              # or torch.ops.fa4.mha_fwd(...)
    out, lse, max_logits = fa4_torch.mla_sparse_fwd(q, kv, indices)

The ops `fa4::mha_fwd` and `fa4::mla_sparse_fwd` call the ctypes binding (fa4.py) and have
fake (meta) implementations, so torch.compile(fullgraph=True) traces through them without a
graph break. Each call launches on torch's current stream, never synchronises the host, and
allocates its outputs with torch (libfa4rt allocates no device memory), so CUDA-graph capture
and replay work once the kernel has been fetched: run the op once before capturing (the first
call of a config generates, compiles and loads its kernel, which a capture cannot do).
Bad shapes, dtypes or devices raise fa4.Fa4Error with the runtime's message.
"""
from typing import List, Optional, Tuple

try:
    import torch
except ModuleNotFoundError as e:
    if e.name != "torch":
        raise
    raise ImportError("fa4_torch needs PyTorch: pip install fa4gen[torch]", name="torch") from None

import fa4

Tensor = torch.Tensor
_MLA_DV = 512  # fa4.h: out holds the first 512 columns of kv (V)


def _check_fake(cond, msg):
    if not cond:
        raise fa4.Fa4Error(msg)


# ---------------------------------------------------------------- mha_fwd

@torch.library.custom_op("fa4::mha_fwd", mutates_args=())
def _mha_fwd(q: Tensor, k: Tensor, v: Tensor, causal: bool, softmax_scale: Optional[float],
             window: Optional[List[int]], config: Optional[str]) -> Tuple[Tensor, Tensor]:
    return fa4.mha_fwd(q, k, v, causal=causal, softmax_scale=softmax_scale, return_lse=True, config=config,
                       window=tuple(window) if window is not None else None)


@_mha_fwd.register_fake
def _mha_fwd_fake(q, k, v, causal, softmax_scale, window, config):
    _check_fake(q.dim() == 4 and k.dim() == 4 and v.dim() == 4, "q, k, v: need [B, S, H, D] tensors")
    b, s, h, _ = q.shape
    o = q.new_empty((b, s, h, v.shape[3]), dtype=fa4._out_dtype(torch, q))
    lse = q.new_empty((b, h, s), dtype=torch.float32)
    return o, lse


def mha_fwd(q, k, v, causal=False, softmax_scale=None, return_lse=False, config=None, window=None):
    """fa4.mha_fwd as the torch op fa4::mha_fwd: [B, S, H, D] CUDA tensors (bf16/fp16); returns out,
    or (out, lse) with lse fp32 [B, H, S] (natural log)."""
    o, lse = torch.ops.fa4.mha_fwd(q, k, v, causal, softmax_scale, list(window) if window is not None else None,
                                   config)
    return (o, lse) if return_lse else o


# ---------------------------------------------------------------- mla_sparse_fwd

@torch.library.custom_op("fa4::mla_sparse_fwd", mutates_args=())
def _mla_sparse_fwd(q: Tensor, kv: Tensor, indices: Tensor, sm_scale: Optional[float], attn_sink: Optional[Tensor],
                    topk_length: Optional[Tensor], config: Optional[str]) -> Tuple[Tensor, Tensor, Tensor]:
    return fa4.mla_sparse_fwd(q, kv, indices, sm_scale=sm_scale, attn_sink=attn_sink, topk_length=topk_length,
                              config=config)


@_mla_sparse_fwd.register_fake
def _mla_sparse_fwd_fake(q, kv, indices, sm_scale, attn_sink, topk_length, config):
    _check_fake(q.dim() == 3, "q: needs a [s_q, h_q, d_qk] tensor")
    s_q, h_q, _ = q.shape
    out = q.new_empty((s_q, h_q, _MLA_DV), dtype=torch.bfloat16)
    lse = q.new_empty((s_q, h_q), dtype=torch.float32)
    return out, lse, q.new_empty((s_q, h_q), dtype=torch.float32)


def mla_sparse_fwd(q, kv, indices, sm_scale=None, attn_sink=None, topk_length=None, config=None):
    """fa4.mla_sparse_fwd as the torch op fa4::mla_sparse_fwd; returns (out, lse, max_logits)."""
    return torch.ops.fa4.mla_sparse_fwd(q, kv, indices, sm_scale, attn_sink, topk_length, config)
