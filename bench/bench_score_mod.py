"""bench_score_mod.py - fa4gen's sinks and score_mod (issue 10) on one GPU, one run.

    python3 bench/bench_score_mod.py [--out FILE] [--reps 30] [--shapes d128] [--ablate]

--out FILE.txt writes the table there and the same numbers as JSON to FILE.json (bench/results_json.py).

Per shape, timed in turns within every repetition (CUDA events, median of --reps after warm-up, inputs
rotated among several sets so L2 does not hold them):
  plain            fa4 without a mod
  softcap/splice   fa4 with 30 tanh(s / 30) by tanh.approx.f32 (inline PTX, one MUFU op, as FA3's
                   soft-capping), the mod copied into every score site (the default link mode)
  softcap/call     the same mod as a function of the module, called (ptxas decides whether to inline)
  softcap/link     the same mod linked in by nvJitLink (FA4GEN_SCORE_MOD_LINK=link)
  tanhf/splice     30 tanhf(s / 30): CUDA's accurate tanhf (an ex2 and a division per score)
  sink             fa4 with per-head sinks
  flex             torch's flex_attention (torch.compile) with 30 tanh(s / 30) (and a causal block mask)
--ablate instead times plain beside mods that each keep one part of the soft-cap (identity, the two
multiplies alone, tanh alone, the whole soft-cap) to split its cost between the FMA pipe and the MUFU.
The claims it decides (printed at the end): softcap/splice d128 causal within 10% of plain; faster than
flex; the link mode the runtime should default to (the fastest of splice, call and link). Outputs are
checked against flex (or against splice when flex is unavailable): rel L2 <= 1e-2.
"""
import argparse
import datetime
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fa4  # noqa: E402
from benchlib import time_interleaved  # noqa: E402
from results_json import run_doc, write_beside  # noqa: E402

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
ABLATIONS = [  # name, the body of score_mod
    ("identity", "return s;"),
    ("mul only", "return 30.0f * (s * (1.0f / 30.0f));"),
    ("tanh only", 'float t; asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(s)); return t;'),
    ("softcap", 'float t; asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(s * (1.0f / 30.0f))); return 30.0f * t;'),
]
MOD_HEAD = "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n{ %s }\n"
SOFTCAP_TANHF = """__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)
{ return 30.0f * tanhf(s * (1.0f / 30.0f)); }
"""


def fa4_fn(causal, score_mod=None, link=None, sink=None):
    def run(q, k, v, o, qt, kt, vt):
        if link:
            os.environ["FA4GEN_SCORE_MOD_LINK"] = link  # read at each call: the memory cache keys on it
        fa4.mha_fwd(q, k, v, causal=causal, out=o, score_mod=score_mod, sink=sink)
        if link:
            del os.environ["FA4GEN_SCORE_MOD_LINK"]
    return run


def flex_fn(B, Hq, S, causal, gqa):
    """torch's flex_attention with the same soft-cap, compiled; (fn, None) or (None, why)."""
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        compiled = torch.compile(flex_attention, dynamic=False)

        def softcap(score, b, h, q_idx, kv_idx):
            return 30.0 * torch.tanh(score / 30.0)

        block_mask = None
        if causal:
            block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, B, Hq, S, S, device="cuda")

        def run(q, k, v, o, qt, kt, vt):
            return compiled(qt, kt, vt, score_mod=softcap, block_mask=block_mask, enable_gqa=gqa)
        return run, None
    except Exception as e:  # torch without flex_attention or without a working torch.compile
        return None, "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")


def rel_l2(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm()).item()


def ablate(args):
    """plain beside the parts of the soft-cap, d128 causal shapes by default."""
    lines = ["# score_mod ablation on %s, %s" % (torch.cuda.get_device_name(), datetime.date.today()),
             "%-22s%10s" % ("shape (ms)", "plain") + "".join("%12s" % n for n, _ in ABLATIONS) + "   (ratio to plain)"]
    records = []
    for name, B, Hq, Hkv, S, D, causal in SHAPES:
        if args.shapes not in name:
            continue
        sets = []
        for _ in range(3):
            q = torch.randn(B, S, Hq, D, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)
            sets.append((q, k, v, torch.empty_like(q), None, None, None))
        fns = [fa4_fn(causal)] + [fa4_fn(causal, MOD_HEAD % body, "splice") for _, body in ABLATIONS]
        ms = time_interleaved(fns, sets, args.reps)
        lines.append("%-22s%10.3f" % (name, ms[0]) + "".join("%12.3f" % t for t in ms[1:]) + "   " +
                     " ".join("%.3f" % (t / ms[0]) for t in ms[1:]))
        print(lines[-1], flush=True)
        records.append({"shape": name, "B": B, "Hq": Hq, "Hkv": Hkv, "S": S, "D": D, "causal": causal,
                        "ms": dict(zip(["plain"] + [n for n, _ in ABLATIONS], ms))})
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    write_beside(args.out, run_doc("score_mod_ablation", torch.cuda.get_device_name(), {"ms": "ms"}, records,
                                   torch=torch.__version__, reps=args.reps))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--shapes", default="", help="only shapes whose name contains this")
    ap.add_argument("--ablate", action="store_true", help="time the parts of the soft-cap instead")
    args = ap.parse_args()
    if args.ablate:
        return ablate(args)
    gpu = torch.cuda.get_device_name()
    lines = ["# fa4gen sinks + score_mod (issue 10) on %s, %s, torch %s" % (gpu, datetime.date.today(),
                                                                        torch.__version__)]
    cols = ["plain", "softcap/splice", "softcap/call", "softcap/link", "tanhf/splice", "sink", "flex"]
    lines.append("%-22s" % "shape (ms)" + "".join("%16s" % c for c in cols) +
                 "   splice/plain  flex/splice  fastest-link  check")
    print("\n".join(lines), flush=True)
    verdicts, records = [], []
    for name, B, Hq, Hkv, S, D, causal in SHAPES:
        if args.shapes and args.shapes not in name:
            continue
        sets = []
        for _ in range(3):
            q = torch.randn(B, S, Hq, D, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)
            o = torch.empty_like(q)
            sets.append((q, k, v, o, q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous(),
                         v.transpose(1, 2).contiguous()))
        sink = torch.randn(Hq, device="cuda", dtype=torch.float32)
        fns = [fa4_fn(causal), fa4_fn(causal, SOFTCAP, "splice"), fa4_fn(causal, SOFTCAP, "call"),
               fa4_fn(causal, SOFTCAP, "link"), fa4_fn(causal, SOFTCAP_TANHF, "splice"), fa4_fn(causal, sink=sink)]
        flex, why = flex_fn(B, Hq, S, causal, Hq != Hkv)
        # correctness once: softcap (every link mode) against flex, or against splice
        q, k, v, o, qt, kt, vt = sets[0]
        outs = {}
        for mode in ("splice", "call", "link"):
            fa4_fn(causal, SOFTCAP, mode)(q, k, v, o, qt, kt, vt)
            outs[mode] = o.clone()
        fa4_fn(causal, SOFTCAP_TANHF, "splice")(q, k, v, o, qt, kt, vt)
        outs["tanhf"] = o.clone()
        ref = None
        if flex:
            try:
                ref = flex(q, k, v, o, qt, kt, vt).transpose(1, 2)
                fns.append(flex)
            except Exception as e:
                flex, why = None, "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        base = ref if ref is not None else outs["splice"]
        errs = {m: rel_l2(outs[m], base) for m in outs}
        check = "ok" if max(errs.values()) <= 1e-2 else "FAIL " + " ".join("%s=%.1e" % kv for kv in errs.items())
        ms = time_interleaved(fns, sets, args.reps)
        if not flex:
            ms.append(float("nan"))
        link_ms = dict(zip(("splice", "call", "link"), ms[1:4]))
        fastest = min(link_ms, key=link_ms.get)
        row = "%-22s" % name + "".join("%16.3f" % t for t in ms) + "   %12.3f  %11.3f  %12s  %s" % (
            ms[1] / ms[0], ms[6] / ms[1] if flex else float("nan"), fastest, check)
        print(row, flush=True)
        lines.append(row)
        records.append({"shape": name, "B": B, "Hq": Hq, "Hkv": Hkv, "S": S, "D": D, "causal": causal,
                        "ms": dict(zip(cols, ms)), "splice_over_plain": ms[1] / ms[0],
                        "flex_over_splice": ms[6] / ms[1] if flex else None, "fastest_link": fastest, "check": check})
        if name == "d128 causal":
            verdicts.append("claim softcap d128 causal within 10%% of plain: %s (%.3f)" %
                            ("PASS" if ms[1] <= 1.10 * ms[0] else "FAIL", ms[1] / ms[0]))
            verdicts.append("claim softcap d128 causal faster than flex_attention: %s" %
                            (("PASS (%.2fx)" % (ms[6] / ms[1]) if ms[1] < ms[6] else "FAIL (%.2fx)" % (ms[6] / ms[1]))
                             if flex else "not measured (flex_attention unavailable: %s)" % why))
            verdicts.append("link mode by time: splice %.3f, call %.3f, link %.3f ms -> default %s" %
                            (link_ms["splice"], link_ms["call"], link_ms["link"], fastest))
        if not flex:
            lines.append("  flex_attention unavailable: %s" % why)
    lines += verdicts
    print("\n".join(verdicts))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    write_beside(args.out, run_doc("score_mod", gpu, {"ms": "ms"}, records, torch=torch.__version__, reps=args.reps,
                                   verdicts=verdicts))


if __name__ == "__main__":
    main()
