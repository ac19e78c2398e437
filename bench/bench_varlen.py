"""bench_varlen.py - issue 15 benchmark (a): varlen causal prefill, fa4gen sm90a against torch's varlen paths.

    python3 bench/bench_varlen.py [--out FILE] [--reps 30]

--out FILE.txt writes the report there and the table as JSON to FILE.json (bench/results_json.py).

One batch of 16 sequences of mixed lengths 100..8k (LENGTHS), d128, GQA 32/8, causal, bf16, packed
[total, heads, 128]. In the same run, on the same inputs:
  fa4 varlen           fa4.mha_fwd(cu_seqlens_q=, cu_seqlens_k=, max_seqlen_q=)
  fa4 varlen paged64   the same K, V scattered over a shuffled pool of 64-row pages (block_table, seqlen_k)
  torch varlen_attn    torch.nn.attention.varlen.varlen_attn (flash-attention based), when the module exists
                       (GQA through enable_gqa when it takes it, else K, V expanded to 32 heads beforehand)
  sdpa cudnn / flash   scaled_dot_product_attention per sequence, one call each (the loop is timed)
  flex document mask   torch.compile(flex_attention) on the packed batch with a block mask that keeps each
                       token inside its own sequence, causal
Each backend's output is checked against the per-sequence SDPA (math backend in fp32 for the two shortest
sequences, cuDNN for all) before timing; a backend that fails or is missing is reported, not timed.
Timing: median of --reps CUDA-event repetitions after warm-up, backends taking turns within each repetition.
TFLOP/s counts only the causal unmasked pairs: 4 * D * Hq * sum_b L_b (L_b + 1) / 2.
"""
import argparse
import datetime
import inspect
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fa4  # noqa: E402
from results_json import run_doc, write_beside  # noqa: E402

LENGTHS = [8192, 100, 4096, 257, 6000, 1024, 3000, 512, 7777, 130, 2048, 5000, 333, 8000, 1500, 4500]
HQ, HKV, D, PAGE = 32, 8, 128, 64


def time_interleaved(fns, reps, warmup=3):
    for fn in fns:
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    times = [[] for _ in fns]
    for _ in range(reps):
        for t, fn in zip(times, fns):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            t.append(a.elapsed_time(b))
    return [statistics.median(t) for t in times]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    dev = torch.device("cuda")
    torch.manual_seed(0)
    lens = torch.tensor(LENGTHS, dtype=torch.int32)
    cu = torch.zeros(len(LENGTHS) + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(lens, 0)
    total, max_len = int(cu[-1]), max(LENGTHS)
    cu_d = cu.to(dev)
    q = torch.randn(total, HQ, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn(total, HKV, D, device=dev, dtype=torch.bfloat16)
    v = torch.randn(total, HKV, D, device=dev, dtype=torch.bfloat16)
    scale = D ** -0.5
    pairs = sum(L * (L + 1) // 2 for L in LENGTHS)
    flops = 4.0 * D * HQ * pairs

    say("# bench_varlen %s  %s  torch %s" % (datetime.datetime.now().isoformat(timespec="seconds"),
                                            torch.cuda.get_device_name(), torch.__version__))
    say("# 16 sequences, lengths %s (total %d), d%d, GQA %d/%d, causal, bf16; TFLOP/s over %.3e causal FLOPs"
        % (LENGTHS, total, D, HQ, HKV, flops))

    # paged copy of K, V: every sequence's rows in its own pages, pages shuffled over the pool
    n_pages = [(L + PAGE - 1) // PAGE for L in LENGTHS]
    max_pages, pool = max(n_pages), sum(n_pages)
    perm = torch.randperm(pool)
    table = torch.full((len(LENGTHS), max_pages), -1, dtype=torch.int32)
    kp = torch.zeros(pool, PAGE, HKV, D, device=dev, dtype=torch.bfloat16)
    vp = torch.zeros_like(kp)
    nxt = 0
    for b, L in enumerate(LENGTHS):
        for p in range(n_pages[b]):
            page = int(perm[nxt])
            nxt += 1
            table[b, p] = page
            rows = min(PAGE, L - p * PAGE)
            src = int(cu[b]) + p * PAGE
            kp[page, :rows] = k[src:src + rows]
            vp[page, :rows] = v[src:src + rows]
    table_d, lens_d = table.to(dev), lens.to(dev)

    def ours():
        return fa4.mha_fwd(q, k, v, causal=True, cu_seqlens_q=cu_d, cu_seqlens_k=cu_d, max_seqlen_q=max_len)

    def ours_paged():
        return fa4.mha_fwd(q, kp, vp, causal=True, cu_seqlens_q=cu_d, max_seqlen_q=max_len, block_table=table_d,
                           seqlen_k=lens_d)

    def per_seq(backend):
        def run():
            outs = []
            with sdpa_kernel(backend):
                for b in range(len(LENGTHS)):
                    s, e = int(cu[b]), int(cu[b + 1])
                    qs, ks, vs = (t[s:e].transpose(0, 1).unsqueeze(0) for t in (q, k, v))
                    outs.append(F.scaled_dot_product_attention(qs, ks, vs, is_causal=True, scale=scale,
                                                               enable_gqa=True)[0].transpose(0, 1))
            return torch.cat(outs, 0)
        return run

    backends = [("fa4 varlen", ours), ("fa4 varlen paged64", ours_paged)]
    try:
        from torch.nn.attention.varlen import varlen_attn
        params = inspect.signature(varlen_attn).parameters
        kw = {}
        if "scale" in params:
            kw["scale"] = scale
        if "window_size" in params:
            kw["window_size"] = (-1, 0)  # causal, bottom-right (equal lengths: the same as top-left)
        else:
            kw["is_causal"] = True
        gqa = "enable_gqa" in params
        if gqa:
            kw["enable_gqa"] = True
        kx = k if gqa else k.repeat_interleave(HQ // HKV, dim=1)
        vx = v if gqa else v.repeat_interleave(HQ // HKV, dim=1)
        name = "torch varlen_attn" + ("" if gqa else " (kv expanded)")
        backends.append((name, lambda: varlen_attn(q, kx, vx, cu_d, cu_d, max_len, max_len, **kw)))
    except (ImportError, AttributeError) as ex:
        say("# torch.nn.attention.varlen.varlen_attn: not available (%s)" % ex)
    backends.append(("sdpa cudnn per seq", per_seq(SDPBackend.CUDNN_ATTENTION)))
    backends.append(("sdpa flash per seq", per_seq(SDPBackend.FLASH_ATTENTION)))
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        doc = torch.repeat_interleave(torch.arange(len(LENGTHS), device=dev), lens_d.long())

        def doc_causal(b, h, qi, ki):
            return (doc[qi] == doc[ki]) & (qi >= ki)

        bm = create_block_mask(doc_causal, None, None, total, total, device=dev)
        flex = torch.compile(flex_attention)
        q4, k4, v4 = (t.transpose(0, 1).unsqueeze(0) for t in (q, k, v))
        backends.append(("flex document mask", lambda: flex(q4, k4, v4, block_mask=bm, scale=scale,
                                                             enable_gqa=True)[0].transpose(0, 1)))
    except Exception as ex:  # noqa: BLE001 - report whatever keeps flex from running
        say("# flex_attention: not available (%s: %s)" % (type(ex).__name__, str(ex)[:120]))

    ref = per_seq(SDPBackend.CUDNN_ATTENTION)().float()
    # an independent check of the reference on the two shortest sequences: fp32 math SDPA
    for b in sorted(range(len(LENGTHS)), key=lambda i: LENGTHS[i])[:2]:
        s, e = int(cu[b]), int(cu[b + 1])
        qs, ks, vs = (t[s:e].float().transpose(0, 1).unsqueeze(0) for t in (q, k, v))
        with sdpa_kernel(SDPBackend.MATH):
            m = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True, scale=scale, enable_gqa=True)
        err = (m[0].transpose(0, 1) - ref[s:e]).abs().max().item()
        say("# reference (cuDNN) vs fp32 math on sequence %d (length %d): max |diff| %.2e" % (b, LENGTHS[b], err))
    timed, checks = [], {}
    for name, fn in backends:
        try:
            out = fn().float()
            rel = ((out - ref).norm() / ref.norm()).item()
            ok = rel <= 1e-2 and torch.isfinite(out).all().item()
            checks[name] = {"rel_l2": rel, "ok": bool(ok)}
            say("# check %-28s rel L2 vs reference %.2e %s" % (name, rel, "ok" if ok else "FAILED"))
            if ok:
                timed.append((name, fn))
        except Exception as ex:  # noqa: BLE001 - a backend torch lacks on this machine is reported
            say("# %-34s failed: %s: %s" % (name, type(ex).__name__, str(ex)[:160]))
    ms = time_interleaved([fn for _, fn in timed], args.reps)
    say()
    say("%-30s %10s %10s %10s" % ("backend", "ms", "TFLOP/s", "time/fa4"))
    base = ms[0] if timed and timed[0][0] == "fa4 varlen" else None
    records = []
    for (name, _), t in zip(timed, ms):
        say("%-30s %10.3f %10.1f %10s" % (name, t, flops / t / 1e9, "%.2fx" % (t / base) if base else "-"))
        records.append({"backend": name, "ms": t, "tflops": flops / t / 1e9, "time_vs_fa4": t / base if base else None,
                        "rel_l2": checks.get(name, {}).get("rel_l2")})
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    write_beside(args.out, run_doc("varlen", torch.cuda.get_device_name(), {"ms": "ms", "tflops": "TFLOP/s"}, records,
                                   torch=torch.__version__, lengths=LENGTHS, heads_q=HQ, heads_kv=HKV, depth=D,
                                   page=PAGE, causal=True, dtype="bfloat16", reps=args.reps, checks=checks))
    fails = [n for n, _ in backends if n.startswith("fa4") and n not in [x for x, _ in timed]]
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
