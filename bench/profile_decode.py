"""profile_decode.py - where a decode call's time goes: per-kernel device durations (CUPTI, via
torch.profiler) and the CUDA-graph replay time of the whole call, for fa4 variants and torch's backends.

    python3 bench/profile_decode.py [--shapes B1xS16384x64/8,...] [--variants "default;bm=64;splits=32;early"]
                                    [--reps 20] [--calls N] [--timeline] [--out FILE]

A variant is config words for fa4 (e.g. "bm=64 bn=64 stages=3"), optionally with "splits=N" (forced
num_splits); "default" is the runtime's pick; the word "early" passes kv_early=True. --calls N puts N calls (input sets
in turn) in each graph, as the layers of one decode step; times are then per call. The word "paged" reads
K/V from pages of 64 rows in shuffled order (bench_decode.py --paged's layout; torch still reads them dense). --timeline adds, per run,
one replay's kernels in order: start and end relative to the replay's first kernel, and the gap each leaves
after the one before it (negative: they overlap). Per shape and variant: the replay time of the whole call
(median of --reps, CUDA events around one graph replay), then each kernel the call launched with its mean
device duration. The gap between the replay and the kernels' sum is launch and dependency latency. A kernel
launched as a programmatic dependent (the combine) starts early and waits inside: its device time includes the
wait, so it overlaps the kernel before it. K/V are
rotated over sets so L2 does not hold them. Not a benchmark of record: bench_decode.py is.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fa4  # noqa: E402
from benchlib import capture, time_ms, write_lines  # noqa: E402
from bench_decode import add_pages  # noqa: E402

D = 128


def parse_variant(text):
    words, splits, early, paged = [], 0, False, False
    for w in text.split():
        if w.startswith("splits="):
            splits = int(w.split("=")[1])
        elif w == "early":
            early = True
        elif w == "paged":
            paged = True
        elif w != "default":
            words.append(w)
    return (" ".join(words) or None), splits, early, paged


def fa4_call(config, splits, early, paged, sets):
    q, k, v = sets[0]["q"], sets[0]["k"], sets[0]["v"]
    n, ws_bytes = fa4.mha_split_count(q, k, v, config=config, num_splits=splits)
    ws = torch.empty(max(ws_bytes, 16), device="cuda", dtype=torch.uint8)
    if paged:
        for s in sets:
            if "block_table" not in s:  # once per set, for every paged variant
                add_pages(s)
        return n, lambda s: fa4.mha_fwd(s["q"], s["k_pages"], s["v_pages"], out=s["o"], block_table=s["block_table"],
                                        seqlen_k=s["seqlens_k"], config=config, num_splits=splits, workspace=ws,
                                        kv_early=early)
    return n, lambda s: fa4.mha_fwd(s["q"], s["k"], s["v"], out=s["o"], config=config, num_splits=splits,
                                    workspace=ws, kv_early=early)


def sdpa(backend):
    def run(s):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(s["q"].transpose(1, 2), s["k"].transpose(1, 2),
                                                  s["v"].transpose(1, 2), enable_gqa=True)
    return run


def replay_ms(graphs, reps):
    """Median ms of a replay, the graphs in turn, each queued behind a 200 us hold (benchlib.time_ms)."""
    return time_ms(lambda g: g.replay(), [(g,) for g in graphs], reps, warmup=len(graphs), hold_us=200)[0]


def kernel_times(graphs, reps):
    """[(kernel name, mean us, count per call)] of the graph replays, from CUPTI."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(reps):
            graphs[i % len(graphs)].replay()
        torch.cuda.synchronize()
    out = {}
    for ev in prof.events():
        if ev.device_type.name != "CUDA" or "memcpy" in ev.name.lower() or "memset" in ev.name.lower():
            continue
        t = out.setdefault(ev.name, [0.0, 0])
        t[0] += ev.device_time if hasattr(ev, "device_time") else ev.cuda_time
        t[1] += 1
    return [(n, t[0] / t[1], t[1] / reps) for n, t in out.items()]


def timeline(graph):
    """One replay's kernels in start order: (name, start us, end us) relative to the first kernel's start."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    ks = sorted((ev.time_range.start, ev.time_range.end, ev.name) for ev in prof.events()
                if ev.device_type.name == "CUDA" and "memcpy" not in ev.name.lower()
                and "memset" not in ev.name.lower())
    t0 = ks[0][0] if ks else 0
    return [(n, a - t0, b - t0) for a, b, n in ks]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="B1xS16384x64/8,B1xS131072x64/8,B16xS4096x64/8")
    ap.add_argument("--variants", default="default")
    ap.add_argument("--torch", default="cudnn,flash")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--calls", type=int, default=1, help="calls per graph (input sets in turn); times per call")
    ap.add_argument("--timeline", action="store_true", help="one replay's kernels: start, end, gap")
    ap.add_argument("--out")
    args = ap.parse_args()
    torch.manual_seed(0)
    lines = ["# profile_decode %s, torch %s, cuDNN %s; us per call: graph replay, then each kernel's mean "
             "device time" % (torch.cuda.get_device_name(), torch.__version__, torch.backends.cudnn.version())]
    print(lines[0], flush=True)
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    for shape in args.shapes.split(","):
        b, s, g = shape.split("x")
        B, S = int(b[1:]), int(s[1:])
        Hq, Hkv = (int(x) for x in g.split("/"))
        kv_bytes = 2 * B * S * Hkv * D * 2
        nsets = 3 if kv_bytes < (256 << 20) else 1
        sets = []
        for _ in range(nsets):
            st = {"q": torch.randn(B, 1, Hq, D, device="cuda", dtype=torch.bfloat16),
                  "k": torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16),
                  "v": torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)}
            st["o"] = torch.empty_like(st["q"])
            sets.append(st)
        ideal = kv_bytes / 3.0e6  # us at 3 TB/s
        lines.append("## %s: K+V %.1f MB (%.1f us at 3 TB/s)" % (shape, kv_bytes / 1e6, ideal))
        print(lines[-1], flush=True)
        runs = []
        for vt in args.variants.split(";"):
            config, splits, early, paged = parse_variant(vt)
            try:
                n, fn = fa4_call(config, splits, early, paged, sets)
                runs.append(("fa4 [%s] splits %d" % (vt.strip(), n), fn))
            except Exception as e:  # noqa: BLE001
                lines.append("  fa4 [%s]: n/a: %s" % (vt, str(e).split("\n")[0][:100]))
        for name in args.torch.split(","):
            if name:
                runs.append((name, sdpa(backends[name])))
        ref = None
        for name, fn in runs:
            try:
                graphs = [capture(fn, [sets[(k + i) % len(sets)] for i in range(args.calls)])
                          for k in range(len(sets))]
                ms = replay_ms(graphs, args.reps) / args.calls
                ks = [(kn, us, cnt / args.calls) for kn, us, cnt in kernel_times(graphs, args.reps)]
                out = (sets[0]["o"] if name.startswith("fa4") else fn(sets[0]).transpose(1, 2)).float()
                if ref is None:
                    ref = out.clone()
                rel = ((out - ref).norm() / ref.norm()).item()
            except Exception as e:  # noqa: BLE001
                lines.append("  %-40s n/a: %s" % (name, str(e).split("\n")[0][:100]))
                print(lines[-1], flush=True)
                continue
            lines.append("  %-40s %8.1f us  %5.0f GB/s  (rel vs first %.1e)" % (name, ms * 1e3, kv_bytes / ms / 1e6, rel))
            for kn, us, cnt in ks:
                lines.append("      %8.1f us x%.0f  %s" % (us, cnt, kn[:90]))
            print("\n".join(lines[-1 - len(ks):]), flush=True)
            if args.timeline:
                tl, prev = [], None
                for kn, a, b in timeline(graphs[0]):
                    tl.append("      timeline %8.2f .. %8.2f us  gap %6.2f  %s" % (
                        a, b, a - prev if prev is not None else 0.0, kn[:60]))
                    prev = b
                lines += tl
                print("\n".join(tl), flush=True)
        del sets
        torch.cuda.empty_cache()
    write_lines(args.out, lines)


if __name__ == "__main__":
    main()
