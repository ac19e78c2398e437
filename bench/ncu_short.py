"""ncu_short.py - one call of cuDNN's SDPA and one of fa4's default kernel per short shape, for Nsight Compute.

    ncu --profile-from-start off --section LaunchStats --section Occupancy ... python3 bench/ncu_short.py \
        [--shapes "B64 H8 S256 d128 full;B16 H16 S1024 d64 causal"]

Every kernel of each backend is warmed (its JIT and cuDNN's plan cache filled) before the profiler starts, then
one call of each runs between cudaProfilerStart / Stop, cuDNN first: ncu's report then holds, per shape, cuDNN's
kernels and fa4's, with their launch shapes (grid, block, registers, shared memory), occupancy and where their
warps wait -- the facts of how cuDNN lays out a short shape, beside ours. Shapes: "B<batch> H<heads>[/<kv heads>]
S<seqlen> d<depth> full|causal" (bf16).
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))

SHAPES = "B64 H8 S256 d128 full;B64 H16 S256 d64 causal;B16 H16 S1024 d64 causal;B64 H8 S256 d256 full"


def parse(text):
    m = re.fullmatch(r"B(\d+) H(\d+)(?:/(\d+))? S(\d+) d(\d+) (full|causal)", text.strip())
    if not m:
        raise SystemExit("ncu_short.py: shape %r is not 'B<b> H<h>[/<hkv>] S<s> d<d> full|causal'" % text)
    b, h, hkv, s, d, mask = m.groups()
    return int(b), int(h), int(hkv or h), int(s), int(d), mask == "causal"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default=SHAPES, help="';'-separated shapes (default: %(default)s)")
    args = ap.parse_args()
    import torch
    import fa4
    from bench_mha import sdpa
    from torch.nn.attention import SDPBackend

    calls = []
    for text in args.shapes.split(";"):
        if not text.strip():
            continue
        B, H, Hkv, S, D, causal = parse(text)
        q = torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)
        o = torch.empty_like(q)
        cud = sdpa(SDPBackend.CUDNN_ATTENTION, causal, Hkv != H)
        ours = (lambda q, k, v, o, c=causal: fa4.mha_fwd(q, k, v, causal=c, out=o))
        for _ in range(3):  # JIT, cuDNN's plan, clocks
            cud(q, k, v, o)
            ours(q, k, v, o)
        calls.append((text.strip(), cud, ours, (q, k, v, o)))
    torch.cuda.synchronize()
    for text, cud, ours, t in calls:
        print("profiling %s: cuDNN, then fa4" % text, flush=True)
        torch.cuda.profiler.start()
        cud(*t)
        ours(*t)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
