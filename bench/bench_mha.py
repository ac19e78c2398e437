"""bench_mha.py - fa4gen's sm90a MHA forward against torch SDPA (cuDNN and flash backends), one run, one GPU.

    python3 bench/bench_mha.py [--out FILE] [--variants "default;bn=176"] [--shapes d128] [--reps 30]

--out FILE.txt writes the table there and the same numbers as JSON to FILE.json (bench/results_json.py).

Per shape: median of >= 20 timed repetitions (CUDA events) after warm-up, the backends taking turns within
every repetition (so clock drift hits all alike), inputs rotated among several sets
so L2 does not hold them, fa4 output checked against cuDNN once (rel L2 <= 1e-2). TFLOP/s counts
4*B*H*Sq*Sk*D, halved for causal. The ceiling is the measured cuBLAS bf16 8192^3 matmul rate.
"""
import argparse
import datetime
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fa4  # noqa: E402
from benchlib import matmul_ceiling, time_interleaved, write_lines  # noqa: E402
from results_json import run_doc, write_beside  # noqa: E402

SHAPES = [  # name, B, Hq, Hkv, S, D, causal, dtype
    ("d64 full", 2, 16, 16, 8192, 64, False, torch.bfloat16),
    ("d64 causal", 2, 16, 16, 8192, 64, True, torch.bfloat16),
    ("d128 full", 2, 16, 16, 8192, 128, False, torch.bfloat16),
    ("d128 causal", 2, 16, 16, 8192, 128, True, torch.bfloat16),
    ("d256 full", 2, 16, 16, 4096, 256, False, torch.bfloat16),
    ("d256 causal", 2, 16, 16, 4096, 256, True, torch.bfloat16),
    ("B4 H32 d128 full", 4, 32, 32, 4096, 128, False, torch.bfloat16),
    ("GQA 32/8 d128 causal", 2, 32, 8, 8192, 128, True, torch.bfloat16),
    ("B16 S1024 causal", 16, 16, 16, 1024, 128, True, torch.bfloat16),
    ("fp16 d128 full", 2, 16, 16, 8192, 128, False, torch.float16),
]


def sdpa(backend, causal, gqa):
    def run(q, k, v, o):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=causal, enable_gqa=gqa)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--variants", default="default", help="';'-separated fa4 config overrides, words joined by commas; 'default' = none")
    ap.add_argument("--shapes", default="", help="substring filter on shape names")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--sets", type=int, default=3, help="input sets rotated between repetitions")
    args = ap.parse_args()
    variants = [v.strip().replace(",", " ") for v in args.variants.split(";") if v.strip()]  # "bn=64,stages=3"
    gpu = torch.cuda.get_device_name()
    torch.manual_seed(0)
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(300):  # ~0.5 s of matmuls: clocks up before anything is timed
        x @ x
    torch.cuda.synchronize()
    del x
    ceiling = matmul_ceiling(args.reps)
    lines = ["# fa4gen sm90a MHA forward vs torch SDPA, %s, %s, torch %s, cuDNN %s" % (
        datetime.date.today(), gpu, torch.__version__, torch.backends.cudnn.version()),
        "# median of %d reps, %d rotated input sets; TFLOP/s = 4*B*H*Sq*Sk*D (/2 causal) / time" % (args.reps, args.sets),
        "# cuBLAS bf16 8192^3 (ceiling): %.0f TFLOP/s" % ceiling]
    cols = ["fa4[%s]" % v for v in variants] + ["cudnn", "flash"]
    head = "%-22s" % "shape" + "".join("%20s" % c for c in cols) + "   %s/cudnn  %%ceil  check" % cols[0]
    lines.append(head)
    print("\n".join(lines), flush=True)
    records = []
    for name, B, Hq, Hkv, S, D, causal, dt in SHAPES:
        if args.shapes and args.shapes not in name:
            continue
        flops = 4 * B * Hq * S * S * D / (2 if causal else 1)
        sets = []
        for _ in range(args.sets):
            q = torch.randn(B, S, Hq, D, device="cuda", dtype=dt)
            k = torch.randn(B, S, Hkv, D, device="cuda", dtype=dt)
            v = torch.randn(B, S, Hkv, D, device="cuda", dtype=dt)
            sets.append((q, k, v, torch.empty_like(q)))
        results, check = [], ""
        fns = []
        for var in variants:
            cfg = None if var == "default" else var
            fns.append(lambda q, k, v, o, cfg=cfg: fa4.mha_fwd(q, k, v, causal=causal, config=cfg, out=o))
        for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
            fns.append(sdpa(backend, causal, Hkv != Hq))
        ok = []
        for fn in fns:  # a backend that fails on this shape is reported and left out of the timing
            try:
                fn(*sets[0])
                torch.cuda.synchronize()
                ok.append((fn, None))
            except Exception as e:
                ok.append((None, str(e)[:60]))
        live = [fn for fn, _ in ok if fn]
        ms = iter(time_interleaved(live, sets, args.reps))
        for fn, err in ok:
            results.append((flops / next(ms) / 1e9, None) if fn else (None, err))
        try:
            q, k, v, o = sets[0]
            ours = fa4.mha_fwd(q, k, v, causal=causal).float()
            ref = sdpa(SDPBackend.CUDNN_ATTENTION, causal, Hkv != Hq)(q, k, v, o).transpose(1, 2).float()
            rel = ((ours - ref).norm() / ref.norm()).item()
            check = "%.1e %s" % (rel, "ok" if rel <= 1e-2 else "FAIL")
        except Exception as e:
            check = "n/a (%s)" % str(e)[:40]
        cells = "".join("%20s" % ("%.0f" % r[0] if r[0] else "n/a") for r in results)
        first = results[0][0]  # the first variant (default) is the one the targets judge
        cud = results[len(variants)][0]
        ratio = "%.3f" % (first / cud) if first and cud else "n/a"
        pct = "%.0f%%" % (100 * first / ceiling) if first else "n/a"
        line = "%-22s%s   %9s  %5s  %s" % (name, cells, ratio, pct, check)
        lines.append(line)
        print(line, flush=True)
        for r, c in zip(results, cols):
            if not r[0]:
                lines.append("#   %s on %s: n/a: %s" % (c, name, r[1]))
        rec = {"shape": name, "B": B, "Hq": Hq, "Hkv": Hkv, "S": S, "D": D, "causal": causal,
               "dtype": str(dt).replace("torch.", ""), "tflops": {c: r[0] for r, c in zip(results, cols)},
               "check": check}
        errors = {c: r[1] for r, c in zip(results, cols) if not r[0]}
        if errors:
            rec["errors"] = errors
        records.append(rec)
        try:  # the kernel the runtime picked for the default column, for the record
            q, k, v, _ = sets[0]
            rec["config"] = fa4.mha_config(q, k, v, causal=causal)
            lines.append("#   %s: %s" % (name, rec["config"]))
        except Exception as e:
            lines.append("#   %s: config n/a (%s)" % (name, str(e)[:60]))
        del sets
        torch.cuda.empty_cache()
    write_lines(args.out, lines)
    write_beside(args.out, run_doc("mha", gpu, {"tflops": "TFLOP/s"}, records, torch=torch.__version__,
                                   cudnn=str(torch.backends.cudnn.version()), reps=args.reps, sets=args.sets,
                                   ceiling_tflops=ceiling, variants=variants))


if __name__ == "__main__":
    main()
