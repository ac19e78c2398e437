"""torch_mha.py - fa4gen's attention on torch tensors through the ctypes binding.

    make all && python3 examples/torch_mha.py      (needs a Hopper GPU and torch)
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fa4  # noqa: E402

q = torch.randn(2, 1024, 16, 128, device="cuda", dtype=torch.bfloat16)  # [B, S, H, D]
k = torch.randn(2, 1024, 4, 128, device="cuda", dtype=torch.bfloat16)   # GQA: 4 KV heads
v = torch.randn_like(k)
o, lse = fa4.mha_fwd(q, k, v, causal=True, return_lse=True)
print("kernel:", fa4.mha_config(q, k, v, causal=True))
ref = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                                     enable_gqa=True).transpose(1, 2)
print("rel L2 vs torch SDPA: %.2e" % ((o.float() - ref.float()).norm() / ref.float().norm()).item())
