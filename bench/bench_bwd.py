"""bench_bwd.py - fa4's attention backward (issue 29, sm90a) against cuDNN's (torch SDPA, cuDNN backend), one run.

    python3 bench/bench_bwd.py [--out FILE] [--json FILE] [--shapes SUBSTR] [--reps 20] [--variants "default;bm=64"]
                               [--no-train]

Per shape: the backward alone, timed by CUDA events (median of --reps after warm-up), fa4 and cuDNN taking turns
within every repetition (benchlib.time_interleaved), inputs rotated among sets so L2 does not hold them.
fa4: fa4.mha_bwd with a preallocated workspace and outputs (its three kernels). cuDNN: torch.autograd.grad of an
SDPA (cuDNN backend) output kept with its graph (the cuDNN backward kernel and its dO/grad bookkeeping).
TFLOP/s counts the backward as 2.5 x the forward's 4 B H Sq Sk D, halved for causal (Sq = Sk). Peak extra memory:
torch.cuda.max_memory_allocated over one call beyond what was allocated before it (fa4: workspace + dq, dk, dv,
the caller's; cuDNN: its grads and workspace). The ceiling is the measured cuBLAS bf16 8192^3 matmul rate.
--variants: fa4 config words per variant ("default" = the runtime's choice); every variant is timed interleaved with
cuDNN in its own loop, and a non-default variant prints its own ratio beside its time (e.g. "default;tail_split=0":
the runtime's pick against the same kernel with the last wave's tiles left whole).
Then (unless --no-train) a training step's attention, forward + backward, per shape: fa4_torch.flash_attn_func
(autograd through fa4::mha_bwd) against SDPA on cuDNN, torch.autograd.grad of each output for the same dO,
timed the same way (eager: the host's cost included, as a training loop pays it) and as CUDA-graph replays (the
GPU's time alone); TFLOP/s counts 3.5 x the forward's FLOPs.
"""
import argparse
import datetime
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fa4  # noqa: E402
import fa4_torch  # noqa: E402
from benchlib import capture, gpu_state, matmul_ceiling, time_interleaved, write_lines  # noqa: E402

SHAPES = [  # name, B, H, S, D, causal; cuDNN's H100 TFLOP/s from the issue
    ("B2 H16 S8192 d128 full", 2, 16, 8192, 128, False, 532),
    ("B2 H16 S8192 d128 causal", 2, 16, 8192, 128, True, 484),
    ("B8 H16 S2048 d128 causal", 8, 16, 2048, 128, True, 290),
    ("B4 H16 S4096 d64 causal", 4, 16, 4096, 64, True, 284),
    ("B2 H8 S8192 d256 full", 2, 8, 8192, 256, False, 348),
    ("B16 H16 S512 d128 causal", 16, 16, 512, 128, True, None),
    ("B16 H16 S1024 d128 full", 16, 16, 1024, 128, False, None),
    ("B16 H16 S1024 d64 causal", 16, 16, 1024, 64, True, None),
]


def flops(B, H, S, D, causal):
    f = 2.5 * 4.0 * B * H * S * S * D
    return f / 2 if causal else f


def train_step_row(name, B, H, S, D, causal, reps, nsets=2):
    """Forward + backward of the attention alone (what a training step spends on it), fa4 beside SDPA/cuDNN."""
    scale = 1.0 / math.sqrt(D)
    sets = []
    for _ in range(nsets):
        q, k, v, do = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        sets.append((q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), do))

    def fa(q, k, v, do):
        o = fa4_torch.flash_attn_func(q, k, v, causal=causal, softmax_scale=scale)
        return torch.autograd.grad(o, (q, k, v), do)

    def sdpa(q, k, v, do):
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=scale)
        return torch.autograd.grad(o, (q, k, v), do.transpose(1, 2))
    fl = 3.5 * 4.0 * B * H * S * S * D / (2 if causal else 1)
    row = {"shape": name, "flops": fl}
    try:
        ms = time_interleaved([fa, sdpa], sets, reps)
        row["fa4_ms"], row["sdpa_ms"] = ms
        row["fa4_tflops"], row["sdpa_tflops"] = fl / ms[0] / 1e9, fl / ms[1] / 1e9
        row["ratio"] = ms[1] / ms[0]
        line = "train %-26s | eager: fa4 fwd+bwd %6.1f TFLOP/s (%.3f ms) | SDPA cuDNN %6.1f (%.3f ms) | ratio %.3f" % (
            name, row["fa4_tflops"], ms[0], row["sdpa_tflops"], ms[1], row["ratio"])
    except Exception as e:  # noqa: BLE001
        row["error"] = str(e).split("\n")[0][:160]
        return row, "train %-26s | n/a (%s)" % (name, row["error"][:100])
    try:  # the same steps captured in CUDA graphs (a graph runs every set once): the GPU's time without the host's
        graphs = [capture(lambda x, f=f: f(*x), sets) for f in (fa, sdpa)]
        gms = time_interleaved([g.replay for g in graphs], [()], reps)
        row["fa4_graph_ms"], row["sdpa_graph_ms"] = gms[0] / nsets, gms[1] / nsets
        row["graph_ratio"] = gms[1] / gms[0]
        line += " | graphs: fa4 %6.1f (%.3f ms) | SDPA %6.1f (%.3f ms) | ratio %.3f" % (
            fl / row["fa4_graph_ms"] / 1e9, row["fa4_graph_ms"], fl / row["sdpa_graph_ms"] / 1e9,
            row["sdpa_graph_ms"], row["graph_ratio"])
        del graphs
    except Exception as e:  # noqa: BLE001
        row["graph_error"] = str(e).split("\n")[0][:160]
        line += " | graphs n/a (%s)" % row["graph_error"][:80]
    del sets
    torch.cuda.empty_cache()
    return row, line


def peak_extra(fn):
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    r = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del r
    return peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--json")
    ap.add_argument("--shapes", default="")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sets", type=int, default=2)
    ap.add_argument("--variants", default="default", help="';'-separated fa4 config words (commas for spaces)")
    ap.add_argument("--no-train", action="store_true", help="leave out the training-step (forward + backward) rows")
    args = ap.parse_args()
    variants = [v.strip().replace(",", " ") for v in args.variants.split(";") if v.strip()]
    torch.manual_seed(0)
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(200):
        x @ x
    torch.cuda.synchronize()
    del x
    ceiling = matmul_ceiling()
    gpu = torch.cuda.get_device_name()
    lines = ["bench_bwd %s, %s, torch %s, cuBLAS bf16 8192^3 %.0f TFLOP/s" % (
        datetime.date.today(), gpu, torch.__version__, ceiling)]
    print(lines[0], flush=True)
    rows = []
    for name, B, H, S, D, causal, issue in SHAPES:
        if args.shapes and args.shapes not in name:
            continue
        dt = torch.bfloat16
        scale = 1.0 / math.sqrt(D)
        sets = []
        for _ in range(args.sets):
            q, k, v, do = (torch.randn(B, S, H, D, device="cuda", dtype=dt) for _ in range(4))
            sets.append((q, k, v, do))
        row = {"shape": name, "B": B, "H": H, "S": S, "D": D, "causal": causal, "flops": flops(B, H, S, D, causal),
               "cudnn_issue_tflops": issue, "state": gpu_state()}
        # cuDNN: forward with its graph kept once per set; the timed call is the backward alone
        cud_sets, fa_sets = [], []
        for q, k, v, do in sets:
            qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_() for t in (q, k, v))
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=scale)
            cud_sets.append((o, (qt, kt, vt), do.transpose(1, 2)))
        def cudnn(o, ins, g):  # noqa: E306
            return torch.autograd.grad(o, ins, g, retain_graph=True)
        try:
            cudnn(*cud_sets[0])
        except Exception as e:  # noqa: BLE001
            row["cudnn_error"] = str(e).split("\n")[0][:160]
        for variant in variants:
            cfg = None if variant == "default" else variant
            key = "fa4" if variant == "default" else "fa4[%s]" % variant
            try:
                fa_sets = []
                for q, k, v, do in sets:
                    out, lse = fa4.mha_fwd(q, k, v, causal=causal, softmax_scale=scale, return_lse=True)
                    ws = torch.empty(fa4.mha_bwd_workspace_size(q, k, causal=causal, config=cfg), dtype=torch.uint8,
                                     device="cuda")
                    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
                    fa_sets.append((do, q, k, v, out, lse, dq, dk, dv, ws))
                def fa(do, q, k, v, out, lse, dq, dk, dv, ws, cfg=cfg):  # noqa: E306
                    return fa4.mha_bwd(do, q, k, v, out, lse, causal=causal, softmax_scale=scale, config=cfg, dq=dq,
                                       dk=dk, dv=dv, workspace=ws)
                # every variant interleaved with cuDNN (the sets of each fn rotate with the calls): its ratio is
                # read against the cuDNN calls of its own loop, so variants compare side by side in one run
                if "cudnn_error" not in row:
                    zipped = [fa_sets[i] + cud_sets[i] for i in range(len(sets))]
                    nfa = len(fa_sets[0])
                    ms = time_interleaved([lambda *a: fa(*a[:nfa]), lambda *a: cudnn(*a[nfa:])], zipped, args.reps)
                    row[key + "_ms"] = ms[0]
                    row["cudnn_ms" if key == "fa4" else key + "_cudnn_ms"] = ms[1]
                    if key != "fa4":
                        row[key + "_ratio"] = ms[1] / ms[0]
                else:
                    ms = time_interleaved([fa], fa_sets, args.reps)
                    row[key + "_ms"] = ms[0]
                row[key + "_tflops"] = row["flops"] / row[key + "_ms"] / 1e9
                if key == "fa4":
                    ws = fa_sets[0][9]
                    row["fa4_workspace_bytes"] = ws.numel()
                    row["fa4_peak_extra"] = peak_extra(lambda: fa4.mha_bwd(
                        *fa_sets[0][:6], causal=causal, softmax_scale=scale, config=cfg,
                        workspace=torch.empty(ws.numel(), dtype=torch.uint8, device="cuda")))
            except Exception as e:  # noqa: BLE001
                row[key + "_error"] = str(e).split("\n")[0][:200]
        if "cudnn_ms" in row:
            row["cudnn_tflops"] = row["flops"] / row["cudnn_ms"] / 1e9
            row["cudnn_peak_extra"] = peak_extra(lambda: cudnn(*cud_sets[0]))
            if "fa4_tflops" in row:
                row["ratio"] = row["fa4_tflops"] / row["cudnn_tflops"]
        rows.append(row)
        parts = ["%-26s" % name]
        for variant in variants:
            key = "fa4" if variant == "default" else "fa4[%s]" % variant
            if key + "_tflops" in row:
                parts.append("%s %6.1f TFLOP/s (%.3f ms)%s" % (
                    key, row[key + "_tflops"], row[key + "_ms"],
                    " ratio %.3f" % row[key + "_ratio"] if key + "_ratio" in row else ""))
            elif key + "_error" in row:
                parts.append("%s n/a (%s)" % (key, row[key + "_error"][:90]))
        if "cudnn_tflops" in row:
            parts.append("cuDNN %6.1f (%.3f ms)" % (row["cudnn_tflops"], row["cudnn_ms"]))
        elif "cudnn_error" in row:
            parts.append("cuDNN n/a (%s)" % row["cudnn_error"][:60])
        if "ratio" in row:
            parts.append("ratio %.3f" % row["ratio"])
        if "fa4_peak_extra" in row and "cudnn_peak_extra" in row:
            parts.append("peak extra MB fa4 %.0f / cuDNN %.0f" % (row["fa4_peak_extra"] / 2**20,
                                                                 row["cudnn_peak_extra"] / 2**20))
        lines.append(" | ".join(parts))
        print(lines[-1], flush=True)
        del sets, cud_sets, fa_sets
        torch.cuda.empty_cache()
    train = []
    if not args.no_train:
        for name, B, H, S, D, causal, _ in SHAPES:
            if args.shapes and args.shapes not in name:
                continue
            row, line = train_step_row(name, B, H, S, D, causal, args.reps)
            train.append(row)
            lines.append(line)
            print(line, flush=True)
    write_lines(args.out, lines)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": gpu, "torch": torch.__version__, "ceiling_tflops": ceiling, "rows": rows,
                       "train": train}, f, indent=1)


if __name__ == "__main__":
    main()
