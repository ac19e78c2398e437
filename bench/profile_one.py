"""profile_one.py - run one fa4 MHA forward a few times (for ncu): B2 H16 S8192 D<depth>, bf16.

    ncu --kernel-name regex:fa4_mha --launch-skip 2 --launch-count 1 python3 bench/profile_one.py --depth 128 --config bn=128
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fa4  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--depth", type=int, default=128)
ap.add_argument("--seqlen", type=int, default=8192)
ap.add_argument("--causal", action="store_true")
ap.add_argument("--config")
a = ap.parse_args()
q = torch.randn(2, a.seqlen, 16, a.depth, device="cuda", dtype=torch.bfloat16)
k, v = torch.randn_like(q), torch.randn_like(q)
for _ in range(4):
    fa4.mha_fwd(q, k, v, causal=a.causal, config=a.config)
torch.cuda.synchronize()
print(fa4.mha_config(q, k, v, causal=a.causal, config=a.config))
