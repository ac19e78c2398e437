"""tests/gpu/test_torch.py - fa4_torch's ops on a GPU (tests/gpu/run.sh runs it; needs torch with CUDA).

1. eager: fa4::mha_fwd against torch SDPA in fp32 (bottom-right causal, GQA), and lse against logsumexp;
   with torch.cuda.set_sync_debug_mode("error"), so any host synchronisation inside the op raises.
2. torch.compile(fullgraph=True) of a function around both ops (no graph break allowed) gives the
   eager result bit for bit.
3. CUDA graphs: capture after one warm-up call, replay on new inputs copied into the static ones,
   equal to eager bit for bit (outputs come from torch's graph pool; libfa4rt allocates no device
   memory).
4. bad input raises fa4.Fa4Error carrying the runtime's message (heads_kv not dividing heads_q,
   an unsupported depth, a CPU tensor, a wrong dtype).
Prints one line per check and 'torch gpu: N passed, N failed'.
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import fa4  # noqa: E402
import fa4_torch  # noqa: E402

passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    print("%s %s %s" % ("ok  " if cond else "FAIL", name, detail), flush=True)
    if cond:
        passed += 1
    else:
        failed += 1


def reference(q, k, v, causal):
    """fp32 attention on [B, S, H, D], bottom-right causal, GQA by repeating K/V heads; and lse [B, H, S]."""
    b, sq, hq, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    qf = q.float().transpose(1, 2)
    kf = k.float().repeat_interleave(hq // hk, dim=2).transpose(1, 2)
    vf = v.float().repeat_interleave(hq // hk, dim=2).transpose(1, 2)
    s = qf @ kf.transpose(-1, -2) / math.sqrt(d)
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + sk - sq, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return (torch.softmax(s, dim=-1) @ vf).transpose(1, 2), lse


def rel_l2(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


dev = torch.device("cuda")
torch.manual_seed(0)
print("torch %s, %s, fa4 %s" % (torch.__version__, torch.cuda.get_device_name(), fa4.version()), flush=True)


def inputs(b=2, sq=300, sk=500, hq=8, hk=2, d=128, dtype=torch.bfloat16):
    q = torch.randn(b, sq, hq, d, device=dev, dtype=dtype)
    k = torch.randn(b, sk, hk, d, device=dev, dtype=dtype)
    v = torch.randn(b, sk, hk, d, device=dev, dtype=dtype)
    return q, k, v


# ---- 1. eager, no host sync
q, k, v = inputs()
fa4_torch.mha_fwd(q, k, v, causal=True)  # the first call fetches (compiles) the kernel: outside the sync check
torch.cuda.synchronize()
torch.cuda.set_sync_debug_mode("error")
try:
    o, lse = fa4_torch.mha_fwd(q, k, v, causal=True, return_lse=True)
    synced = False
except RuntimeError as e:
    synced = "synchroniz" in str(e)
    o, lse = None, None
torch.cuda.set_sync_debug_mode("default")
check("eager call without host synchronisation", not synced and o is not None)
ref, ref_lse = reference(q, k, v, True)
check("eager out vs fp32 reference", rel_l2(o, ref) < 5e-3, "rel L2 %.2e" % rel_l2(o, ref))
check("eager lse vs logsumexp", (lse - ref_lse).abs().max().item() < 1e-3,
      "max err %.2e" % (lse - ref_lse).abs().max().item())

# ---- 2. torch.compile(fullgraph=True)
qm = torch.randn(64, 64, 576, device=dev, dtype=torch.bfloat16) / 4
kv = torch.randn(1024, 1, 576, device=dev, dtype=torch.bfloat16) / 4
idx = torch.randint(-1, 1024, (64, 128), device=dev, dtype=torch.int32)


def block(q, k, v, qm, kv, idx):
    o = fa4_torch.mha_fwd(q * 1.0, k, v, causal=True)
    out, lse, _ = fa4_torch.mla_sparse_fwd(qm, kv, idx)
    return o.float() * 2.0, out.float() + 1.0, lse


eager = block(q, k, v, qm, kv, idx)
try:
    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True)
    got = compiled(q, k, v, qm, kv, idx)
    same = all(torch.equal(a, b) for a, b in zip(got, eager))
    check("torch.compile(fullgraph=True) traces both ops; equals eager", same)
except Exception as e:  # noqa: BLE001
    check("torch.compile(fullgraph=True)", False, "%s: %s" % (type(e).__name__, str(e)[:2000]))

# ---- 3. CUDA graph capture and replay
static = list(inputs(sq=256, sk=256))
fa4_torch.mha_fwd(*static, causal=True)  # warm-up: the kernel is fetched here, not in the capture
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
stream = torch.cuda.Stream()
try:
    with torch.cuda.graph(g, stream=stream):
        static_out = fa4_torch.mha_fwd(*static, causal=True)
    ok = True
except Exception as e:  # noqa: BLE001
    ok = False
    check("CUDA graph capture", False, "%s: %s" % (type(e).__name__, e))
if ok:
    check("CUDA graph capture", True)
    worst = 0.0
    for trial in range(3):
        fresh = inputs(sq=256, sk=256)
        for s_, f_ in zip(static, fresh):
            s_.copy_(f_)
        g.replay()
        torch.cuda.synchronize()
        want = fa4_torch.mha_fwd(*fresh, causal=True)
        worst = max(worst, (static_out.float() - want.float()).abs().max().item())
    check("CUDA graph replay equals eager on new inputs (3 replays)", worst == 0.0, "max |diff| %.3g" % worst)

# ---- 4. errors carry the runtime's message
bad = [
    ("heads_kv not dividing heads_q", lambda: fa4_torch.mha_fwd(*inputs(hq=3, hk=2)), "heads_kv"),
    ("unsupported depth", lambda: fa4_torch.mha_fwd(*inputs(d=72)), "72"),
    ("CPU tensor", lambda: fa4_torch.mha_fwd(q.cpu(), k.cpu(), v.cpu()), "CUDA tensor"),
    ("fp32", lambda: fa4_torch.mha_fwd(q.float(), k.float(), v.float()), "dtype"),
    ("mla indices int64", lambda: fa4_torch.mla_sparse_fwd(qm, kv, idx.long()), "int32"),
]
for name, fn, want in bad:
    try:
        fn()
        check("error: " + name, False, "no exception")
    except fa4.Fa4Error as e:
        check("error: " + name, want in str(e), str(e)[:300])
    except Exception as e:  # noqa: BLE001
        check("error: " + name, False, "%s instead of Fa4Error: %s" % (type(e).__name__, str(e)[:300]))

print("torch gpu: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
