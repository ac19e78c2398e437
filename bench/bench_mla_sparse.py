"""bench_mla_sparse.py - fa4gen's sm90a sparse MLA prefill against the torch gather + softmax formulation,
one run, one GPU.

    python3 bench/bench_mla_sparse.py [--out FILE] [--reps 20] [--quick] [--ab "CONFIG WORDS"]

--out FILE.txt writes the table there and the same numbers as JSON to FILE.json (bench/results_json.py).

Shapes from issue 13: s_q 4096, h_q 128, topk 2048, d_qk 576, s_kv 8k / 32k / 128k, with a sink; also
h_q 64 and topk 512. FLOPs = 2 * s_q * h_q * topk * (d_qk + 512). Each backend is timed in turn within
every repetition (CUDA events, median); fa4's output is checked against the torch formulation once
(rel L2 <= 1e-2). --ab times a second fa4 kernel chosen by config words (e.g. "tma_store=0") in the same
repetitions, for one-change experiments. The ceiling is the measured cuBLAS bf16 8192^3 matmul rate in the same run.
"""
import argparse
import datetime
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fa4  # noqa: E402
from benchlib import matmul_ceiling  # noqa: E402
from results_json import run_doc, write_beside  # noqa: E402

SHAPES = [  # name, s_q, h_q, topk, d_qk, s_kv
    ("h128 topk2048 skv8k", 4096, 128, 2048, 576, 8192),
    ("h128 topk2048 skv32k", 4096, 128, 2048, 576, 32768),
    ("h128 topk2048 skv128k", 4096, 128, 2048, 576, 131072),
    ("h64 topk2048 skv32k", 4096, 64, 2048, 576, 32768),
    ("h128 topk512 skv32k", 4096, 128, 512, 576, 32768),
]


def torch_ref(q, kv, idx, sm_scale, sink):
    """The gather + softmax formulation (one chunk of query rows at a time to bound memory)."""
    s_q, h_q, d = q.shape
    out = torch.empty(s_q, h_q, 512, dtype=q.dtype, device=q.device)
    for s0 in range(0, s_q, 512):
        ix = idx[s0:s0 + 512].long()
        valid = (ix >= 0) & (ix < kv.shape[0])
        k = kv[ix.clamp(0, kv.shape[0] - 1)]                    # [c, topk, d]
        logits = torch.einsum("chd,ctd->cht", q[s0:s0 + 512].float(), k.float()) * sm_scale
        logits = logits.masked_fill(~valid[:, None, :], float("-inf"))
        lse = torch.logsumexp(logits, dim=-1, keepdim=True)
        p = torch.exp(logits - lse)
        o = torch.einsum("cht,ctd->chd", p, k[..., :512].float())
        o = o * torch.sigmoid(lse - sink[None, :, None])          # e^lse / (e^lse + e^sink)
        out[s0:s0 + 512] = o.to(q.dtype)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ab", help="config words of a second fa4 kernel timed beside the default")
    args = ap.parse_args()
    torch.manual_seed(0)
    ceiling = matmul_ceiling()
    records = []
    lines = ["# sparse MLA prefill, %s, %s" % (torch.cuda.get_device_name(), datetime.date.today()),
             "# matmul ceiling (cuBLAS bf16 8192^3): %.0f TFLOP/s" % ceiling,
             "%-24s %10s %10s %9s %9s %8s" % ("shape", "fa4 ms", "torch ms", "fa4 TF/s", "vs torch", "relL2")
             + ("   [%s] ms  TF/s" % args.ab if args.ab else "")]
    for name, s_q, h_q, topk, d, s_kv in SHAPES[:2] if args.quick else SHAPES:
        q = torch.randn(s_q, h_q, d, dtype=torch.bfloat16, device="cuda")
        kv = torch.randn(s_kv, 1, d, dtype=torch.bfloat16, device="cuda")
        idx = torch.randint(0, s_kv, (s_q, topk), dtype=torch.int32, device="cuda")
        sink = torch.randn(h_q, dtype=torch.float32, device="cuda")
        scale = d ** -0.5
        o, lse, ml = fa4.mla_sparse_fwd(q, kv, idx, sm_scale=scale, attn_sink=sink)
        ref = torch_ref(q, kv[:, 0], idx, scale, sink)
        rel = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
        fns = [lambda: fa4.mla_sparse_fwd(q, kv, idx, sm_scale=scale, attn_sink=sink),
               lambda: torch_ref(q, kv[:, 0], idx, scale, sink)]
        if args.ab:
            fns.append(lambda: fa4.mla_sparse_fwd(q, kv, idx, sm_scale=scale, attn_sink=sink, config=args.ab))
        times = [[] for _ in fns]
        for fn in fns:
            fn()
        torch.cuda.synchronize()
        for _ in range(args.reps if not args.quick else 5):
            for t, fn in zip(times, fns):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                fn()
                e1.record()
                e1.synchronize()
                t.append(e0.elapsed_time(e1))
        fa, tr = statistics.median(times[0]), statistics.median(times[1])
        flops = 2 * s_q * h_q * topk * (d + 512)
        lines.append("%-24s %10.3f %10.3f %9.0f %8.2fx %8.1e" % (name, fa, tr, flops / fa / 1e9, tr / fa, rel))
        rec = {"shape": name, "s_q": s_q, "h_q": h_q, "topk": topk, "d_qk": d, "s_kv": s_kv,
               "ms": {"fa4": fa, "torch": tr}, "tflops": {"fa4": flops / fa / 1e9, "torch": flops / tr / 1e9},
               "speedup_vs_torch": tr / fa, "rel_l2": rel}
        records.append(rec)
        if args.ab:
            ab = statistics.median(times[2])
            lines[-1] += " %12.3f %5.0f" % (ab, flops / ab / 1e9)
            rec["ms"]["fa4[%s]" % args.ab], rec["tflops"]["fa4[%s]" % args.ab] = ab, flops / ab / 1e9
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        open(args.out, "w").write(text)
    write_beside(args.out, run_doc("mla_sparse", torch.cuda.get_device_name(), {"ms": "ms", "tflops": "TFLOP/s"},
                                   records, torch=torch.__version__, ceiling_tflops=ceiling,
                                   reps=args.reps if not args.quick else 5, ab=args.ab))


if __name__ == "__main__":
    main()
