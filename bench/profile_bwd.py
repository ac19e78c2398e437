"""profile_bwd.py - where a backward call's time goes: every kernel of fa4's backward and of cuDNN's, one run.

    python3 bench/profile_bwd.py [--out FILE] [--shapes SUBSTR] [--calls 10] [--variants "default;stages=1"]

Per shape (bench_bwd.py's list): fa4.mha_bwd (preallocated workspace and outputs) and the cuDNN backward
(torch.autograd.grad of an SDPA output kept with its graph) each run --calls times under torch.profiler after a
warm-up; every GPU kernel's mean duration per call is printed with the share of the call's kernel time, and the
main kernel's TFLOP/s alone (the 2.5 x forward FLOPs over that kernel's time). The sum of the kernels is the
GPU's busy time; the gap to bench_bwd.py's event time is launch gaps. Inputs rotate between two sets so L2 does
not hold them.
"""
import argparse
import collections
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fa4  # noqa: E402
from bench_bwd import SHAPES, flops  # noqa: E402
from benchlib import write_lines  # noqa: E402


def kernel_times(fn, sets, calls):
    """Mean us per call of every CUDA kernel fn launches, in first-launch order."""
    for i in range(3):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            fn(*sets[i % len(sets)])
        torch.cuda.synchronize()
    tot = collections.OrderedDict()
    for ev in prof.events():
        if ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        name = ev.name
        if name.startswith("Memcpy") or name.startswith("Memset"):
            name = name.split(" ")[0]
        tot[name] = tot.get(name, 0.0) + ev.device_time_total
    return [(n, t / calls) for n, t in tot.items()]


def fa4_kernels(sets, causal, scale, cfg, calls):
    fa_sets = []
    for q, k, v, do in sets:
        out, lse = fa4.mha_fwd(q, k, v, causal=causal, softmax_scale=scale, return_lse=True)
        ws = torch.empty(fa4.mha_bwd_workspace_size(q, k, causal=causal, config=cfg), dtype=torch.uint8, device="cuda")
        fa_sets.append((do, q, k, v, out, lse, torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), ws))

    def fa(do, q, k, v, out, lse, dq, dk, dv, ws):
        return fa4.mha_bwd(do, q, k, v, out, lse, causal=causal, softmax_scale=scale, config=cfg, dq=dq, dk=dk, dv=dv,
                           workspace=ws)
    return kernel_times(fa, fa_sets, calls)


def short_name(n):
    if n.startswith("fa4_mha_bwd_pre"):
        return "fa4 pre"
    if n.startswith("fa4_mha_bwd_dq"):
        return "fa4 dq"
    if n.startswith("fa4_mha_bwd"):
        return "fa4 main"
    return n[:60]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--shapes", default="")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--variants", default="default")
    args = ap.parse_args()
    variants = [v.strip().replace(",", " ") for v in args.variants.split(";") if v.strip()]
    lines = ["profile_bwd: %s, torch %s; us per call (share of the call's kernel time)" % (
        torch.cuda.get_device_name(), torch.__version__)]
    print(lines[0], flush=True)
    for name, B, H, S, D, causal, _ in SHAPES:
        if args.shapes and args.shapes not in name:
            continue
        scale = 1.0 / math.sqrt(D)
        sets = [tuple(torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
                for _ in range(2)]
        fl = flops(B, H, S, D, causal)
        runs, skipped = [], []
        for variant in variants:
            cfg = None if variant == "default" else variant
            try:
                runs.append(("fa4" if cfg is None else "fa4[%s]" % variant, fa4_kernels(sets, causal, scale, cfg,
                                                                                     args.calls)))
            except Exception as e:  # noqa: BLE001
                skipped.append("  fa4[%s] n/a: %s" % (variant, str(e).split("\n")[0][:120]))
        cud = []
        for q, k, v, do in sets:
            qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_() for t in (q, k, v))
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=scale)
            cud.append((o, (qt, kt, vt), do.transpose(1, 2)))
        runs.append(("cuDNN", kernel_times(lambda o, ins, g: torch.autograd.grad(o, ins, g, retain_graph=True),
                                           cud, args.calls)))
        lines.append("== %s (%.1f GFLOP)" % (name, fl / 1e9))
        for who, ks in runs:
            if not ks:  # under ncu, CUPTI has another subscriber and torch.profiler records nothing
                lines.append("  %-22s no kernels recorded (another profiler holds CUPTI)" % who)
                continue
            total = sum(t for _, t in ks)
            main_t = max(t for _, t in ks) if ks else 0
            parts = ["%s %.1f (%.0f%%)" % (short_name(n), t, 100 * t / total) for n, t in ks]
            lines.append("  %-22s total %8.1f us = %6.1f TFLOP/s | largest kernel %6.1f TFLOP/s | %s" % (
                who, total, fl / total / 1e6, fl / main_t / 1e6, " | ".join(parts)))
        lines.extend(skipped)
        for ln in lines[-len(runs) - len(skipped) - 1:]:
            print(ln, flush=True)
        del sets, cud
        torch.cuda.empty_cache()
        write_lines(args.out, lines)  # after every shape: a later failure keeps what was measured


if __name__ == "__main__":
    main()
