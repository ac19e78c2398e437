"""host_step.py - the host's time per call of a training step's attention and of its pieces (fa4 beside SDPA).

    python3 bench/host_step.py        # B16 H16 S512 d128 causal, bf16

Host us/call: wall time of 50 calls issued while the GPU sleeps (torch.cuda._sleep), so the host never waits on
it; back-to-back ms/call: 20 calls between two CUDA events (the larger of host and GPU time). Then a cProfile of
30 fa4 steps by own and by cumulative time. A diagnostic for bench/NOTES.md, not a benchmark of record.
"""
import cProfile
import io
import math
import os
import pstats
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fa4  # noqa: E402
import fa4_torch  # noqa: E402
B, H, S, D, causal = 16, 16, 512, 128, True
scale = 1 / math.sqrt(D)
q, k, v, do = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
for t in (q, k, v): t.requires_grad_()
def fa_step():
    o = fa4_torch.flash_attn_func(q, k, v, causal=causal, softmax_scale=scale)
    return torch.autograd.grad(o, (q, k, v), do)
def sdpa_step():
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=scale)
    return torch.autograd.grad(o, (q, k, v), do.transpose(1, 2))
qd, kd, vd = (t.detach() for t in (q, k, v))
o, lse = fa4.mha_fwd(qd, kd, vd, causal=causal, softmax_scale=scale, return_lse=True)
def fwd_op(): return fa4_torch.flash_attn_func(q, k, v, causal=causal, softmax_scale=scale)
def fwd_direct(): return fa4.mha_fwd(qd, kd, vd, causal=causal, softmax_scale=scale, return_lse=True)
def bwd_op(): return torch.ops.fa4.mha_bwd(do, qd, kd, vd, o, lse, None, causal, scale, None, 0.0, None, None, None, 0, 0, None, False)
def bwd_direct(): return fa4.mha_bwd(do, qd, kd, vd, o, lse, causal=causal, softmax_scale=scale)
def bwd_full():  # the same without the remembered signature (fa4._bwd_fast emptied first)
    fa4._bwd_fast.clear()
    return fa4.mha_bwd(do, qd, kd, vd, o, lse, causal=causal, softmax_scale=scale)
def bwd_impl(): return fa4_torch._mha_bwd_impl(do, qd, kd, vd, o, lse, None, causal, scale, None, 0.0, None, None, None,
                                               0, 0, None, False)
def gpu_ms(fn, n=20):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn(); torch.cuda.synchronize(); a.record()
    for _ in range(n): fn()
    b.record(); b.synchronize(); return a.elapsed_time(b) / n
def host_us(fn, n=50):
    fn(); torch.cuda.synchronize()
    torch.cuda._sleep(int(400e6))  # keep the GPU busy: the host never waits on it
    t = time.perf_counter()
    for _ in range(n): fn()
    dt = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize(); return dt
def fwd_only_grad():
    return fa4_torch.flash_attn_func(q, k, v, causal=causal, softmax_scale=scale)
o2 = fwd_only_grad()
def bwd_only():
    return torch.autograd.grad(o2, (q, k, v), do, retain_graph=True)
for name, fn in (("sdpa step", sdpa_step), ("fa4 step", fa_step), ("fa4 fwd op (grad)", fwd_op),
                 ("fa4.mha_fwd direct", fwd_direct), ("fa4::mha_bwd op", bwd_op), ("fa4.mha_bwd direct", bwd_direct),
                 ("fa4.mha_bwd full path", bwd_full), ("fa4_torch bwd impl", bwd_impl),
                 ("autograd.grad of fa4 out", bwd_only)):
    print("%-22s host %8.1f us/call   back-to-back %8.3f ms/call" % (name, host_us(fn), gpu_ms(fn)), flush=True)
pr = cProfile.Profile(); fa_step(); torch.cuda.synchronize()
torch.cuda._sleep(int(400e6)); pr.enable()
for _ in range(30): fa_step()
pr.disable(); torch.cuda.synchronize()
s = io.StringIO(); st = pstats.Stats(pr, stream=s); st.sort_stats("tottime").print_stats(18); st.sort_stats("cumtime").print_stats(30); print(s.getvalue()[:12000])
