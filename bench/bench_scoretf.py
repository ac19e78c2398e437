"""bench_scoretf.py - the built-in softcap and ALiBi (issue 27 item 2) beside plain attention, one GPU, one run.

    python3 bench/bench_scoretf.py [--out FILE] [--json FILE] [--reps 30] [--shapes d128]

Per shape, timed in turns within every repetition (benchlib.time_interleaved: CUDA events, median of --reps after
warm-up, inputs rotated among 3 sets so L2 does not hold them), TFLOP/s (4 B H Sq Sk D, halved for causal):
  plain            fa4 flash_attn_func
  softcap          softcap=30 (config word softcap=1: tanh.approx.f32 on the scaled score, the cap in the scale)
  alibi            alibi_slopes [H] (config word alibi=1)
  softcap+alibi    both
  mod softcap      the same soft-cap as a score_mod (NVRTC; issue 10's path, 1.30x plain before), when NVRTC loads
Outputs are checked: built-in softcap against the score_mod softcap and ALiBi against a torch fp32 reference of a
slice of rows (rel L2 <= 1e-2). The text table and a JSON of the same numbers (--json).
"""
import argparse
import datetime
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fa4  # noqa: E402
from benchlib import gpu_state, time_interleaved  # noqa: E402

SHAPES = [  # name, B, Hq, Hkv, S, D, causal
    ("d128 causal", 2, 16, 16, 8192, 128, True),
    ("d128 full", 2, 16, 16, 8192, 128, False),
    ("GQA 32/8 d128 causal", 2, 32, 8, 8192, 128, True),
    ("d64 causal", 2, 16, 16, 8192, 64, True),
]
SOFTCAP = """__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)
{
    float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(s * (1.0f / 30.0f)));
    return 30.0f * t;
}
"""


def rel_l2(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--json")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--shapes", default="")
    args = ap.parse_args()
    gpu = torch.cuda.get_device_name()
    cols = ["plain", "softcap", "alibi", "softcap+alibi", "mod softcap"]
    lines = ["# fa4 built-in softcap / ALiBi (issue 27) on %s, %s, torch %s, fa4 %s; ms and TFLOP/s, median of %d"
             % (gpu, datetime.date.today(), torch.__version__, fa4.version(), args.reps),
             "%-22s" % "shape" + "".join("%15s" % c for c in cols) + "   ratios to plain (softcap alibi both mod)  check"]
    print("\n".join(lines), flush=True)
    res = {"gpu": gpu, "torch": torch.__version__, "fa4": fa4.version(), "reps": args.reps, "shapes": {}}
    for name, B, Hq, Hkv, S, D, causal in SHAPES:
        if args.shapes and args.shapes not in name:
            continue
        sets = []
        for _ in range(3):
            q = torch.randn(B, S, Hq, D, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)
            sets.append((q, k, v, torch.empty_like(q)))
        slopes = torch.tensor([2 ** (-8 * (i + 1) / Hq) for i in range(Hq)], device="cuda")
        fns = [lambda q, k, v, o: fa4.flash_attn_func(q, k, v, causal=causal, out=o),
               lambda q, k, v, o: fa4.flash_attn_func(q, k, v, causal=causal, softcap=30.0, out=o),
               lambda q, k, v, o: fa4.flash_attn_func(q, k, v, causal=causal, alibi_slopes=slopes, out=o),
               lambda q, k, v, o: fa4.flash_attn_func(q, k, v, causal=causal, softcap=30.0, alibi_slopes=slopes, out=o)]
        q, k, v, o = sets[0]
        check, mod_ok = [], True
        fns[1](q, k, v, o)
        cap = o.clone()
        try:
            fa4.mha_fwd(q, k, v, causal=causal, out=o, score_mod=SOFTCAP)
            check.append("softcap vs mod %.1e" % rel_l2(cap, o))
            fns.append(lambda q, k, v, o: fa4.mha_fwd(q, k, v, causal=causal, out=o, score_mod=SOFTCAP))
        except fa4.Fa4Error as e:
            mod_ok = False
            check.append("mod softcap not run (%s)" % str(e)[:80])
        # ALiBi on the last 64 query rows of batch 0 against fp32 torch
        fns[2](q, k, v, o)
        rows = slice(S - 64, S)
        kf = k[0].float().repeat_interleave(Hq // Hkv, dim=1).transpose(0, 1)
        vf = v[0].float().repeat_interleave(Hq // Hkv, dim=1).transpose(0, 1)
        s = (q[0, rows].float().transpose(0, 1) @ kf.transpose(-1, -2)) / math.sqrt(D)
        i = torch.arange(S - 64, S, device="cuda")[:, None]
        j = torch.arange(S, device="cuda")[None, :]
        s = s - slopes[:, None, None] * (i - j).abs()
        if causal:
            s = s.masked_fill(j > i, -math.inf)
        ref = (torch.softmax(s, -1) @ vf).transpose(0, 1)
        e_alibi = rel_l2(o[0, rows], ref)
        check.append("alibi vs fp32 %.1e" % e_alibi)
        ok = e_alibi <= 1e-2 and all(float(c.split()[-1]) <= 1e-2 for c in check if c.startswith("softcap"))
        ms = time_interleaved(fns, sets, args.reps)
        if not mod_ok:
            ms.append(float("nan"))
        flops = 4 * B * Hq * S * S * D / (2 if causal else 1)
        tf = [flops / t / 1e9 for t in ms]
        row = "%-22s" % name + "".join("%8.3f %6.0f" % (t, f) for t, f in zip(ms, tf)) + "   " + \
            " ".join("%.3f" % (t / ms[0]) for t in ms[1:]) + "  " + ("ok " if ok else "FAIL ") + "; ".join(check)
        print(row, flush=True)
        lines.append(row)
        state = gpu_state()
        if state:
            lines.append("  gpu: " + state)
        res["shapes"][name] = {"ms": dict(zip(cols, ms)), "tflops": dict(zip(cols, tf)),
                               "ratio_to_plain": dict(zip(cols, [t / ms[0] for t in ms])), "check": check, "ok": ok}
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
