"""profile_mla.py - run one fa4 sparse MLA prefill a few times (for ncu): s_q 4096, h_q 128, topk 2048, d 576.

    ncu --kernel-name regex:fa4_mla --launch-skip 2 --launch-count 1 python3 bench/profile_mla.py --skv 32768
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fa4  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--sq", type=int, default=4096)
ap.add_argument("--hq", type=int, default=128)
ap.add_argument("--topk", type=int, default=2048)
ap.add_argument("--skv", type=int, default=32768)
a = ap.parse_args()
q = torch.randn(a.sq, a.hq, 576, device="cuda", dtype=torch.bfloat16)
kv = torch.randn(a.skv, 1, 576, device="cuda", dtype=torch.bfloat16)
idx = torch.randint(0, a.skv, (a.sq, a.topk), dtype=torch.int32, device="cuda")
for _ in range(4):
    fa4.mla_sparse_fwd(q, kv, idx, sm_scale=576 ** -0.5)
torch.cuda.synchronize()
