"""bench_decode.py - decode attention (seqlen_q 1) of fa4gen against every torch SDPA backend, one run, one GPU.

    python3 bench/bench_decode.py [--out FILE] [--paged] [--batches 1,4,16,64] [--seqlens 4096,16384,65536,131072]
                                  [--gqa 64/8,32/8] [--reps 30] [--ab "CONFIG WORDS"] [--graphs [--calls N]]
                                  [--no-ws] [--kv-early]

Per shape (d128 bf16, GQA packed): fa4.mha_fwd with num_splits 0 (the runtime picks the split count; the
workspace is allocated once per shape, outside the timing) against SDPA flash / efficient / cuDNN / math,
each where it runs (a backend that refuses or runs out of memory is n/a). The figure of merit is the achieved
HBM bandwidth, K + V bytes / time, against the copy bandwidth measured in the same run (a 2 x 1 GiB
device-to-device copy: read + write bytes / time). Target (issue 15): >= 85% of it for seqlen_k >= 16k.
Median of --reps repetitions (CUDA events) after warm-up, the backends taking turns within every repetition
(the first one rotating; math, ~40 GB/s, timed apart so its heavy kernels do not precede another's call);
K/V sets are rotated when they are small enough to hide in L2 otherwise. fa4's output is checked against the
first torch backend that ran (rel L2 <= 1e-2).

--graphs times every backend's call as a CUDA-graph replay (captured once per input set), so the host's
per-call cost (Python, argument checks, launch) leaves the figure, as in a serving engine's captured decode
step; without it small shapes measure that cost (about 0.15-0.2 ms a call here), not the kernel. Even a
graph's replay costs ~10 us of launch (profile_decode.py); --calls N puts N calls in one graph, as a decode
step holds every layer's attention, and reports the time per call.

--ab times a second fa4 kernel chosen by config words (e.g. "bm=64": one consumer warpgroup, 64-row tiles)
in the same repetitions, its own split pick and workspace, for one-change experiments (column "fa4[ab]").

--no-ws: fa4 gets no workspace (num_splits 0 still): on sm90a the runtime then runs a decode shape as a
cluster split (the split CTAs merge in distributed shared memory); column "splits" is its cluster size.

--kv-early: fa4 calls pass kv_early=True (fa4.h: K/V rows before the newest seqlen_q are not written by the
kernel just before, true here: the kernel before each call is another call's, which writes only O and LSE), so the
sm90a split kernel streams its first K/V blocks under the previous kernel's tail; column "fa4[plain]" times the
same calls without it in the same repetitions.

--paged: K and V live in pages of 64 rows [num_pages, 64, heads_kv, 128] with a shuffled block table
[batch, seqlen_k / 64]; fa4 reads them through the paged path (issue 15 item 2, branch w15v); torch has no
paged SDPA, so its columns time the same data dense. The only code that knows the paged call is paged_call().
"""
import argparse
import datetime
import inspect
import os
import re
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fa4  # noqa: E402
from benchlib import capture, time_interleaved, time_ms, write_lines  # noqa: E402

PAGE = 64
D = 128
BACKENDS = [("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
            ("cudnn", SDPBackend.CUDNN_ATTENTION), ("math", SDPBackend.MATH)]


def copy_bandwidth(reps):
    """GB/s of a large device-to-device copy (read + write bytes), the ceiling decode is judged against."""
    n = 1 << 29  # 1 GiB of bf16
    src = torch.empty(n, device="cuda", dtype=torch.bfloat16).normal_()
    dst = torch.empty_like(src)
    for _ in range(5):
        dst.copy_(src)
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n * 2 / statistics.median(ts) / 1e6


def graphed(fn, sets, calls=1):
    """fn replayed from one CUDA graph per input set: the host's per-call cost (Python, argument checks,
    launches) leaves the timing, as in a serving engine that captures its decode step. calls > 1: the graph
    holds that many calls in a row (the sets taken in turn, as the layers of one decode step), so the
    graph's own launch is shared and a call costs its kernels and the gaps between them."""
    graphs = {id(s): capture(fn, [sets[(k + i) % len(sets)] for i in range(calls)]) for k, s in enumerate(sets)}
    return lambda s: graphs[id(s)].replay()


def sdpa(backend):
    def run(s):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(s["q"].transpose(1, 2), s["k"].transpose(1, 2),
                                                  s["v"].transpose(1, 2), enable_gqa=True).transpose(1, 2)
    return run


def to_pages(x, perm):
    """[B, S, H, D] -> [B * S / PAGE, PAGE, H, D] pages, page p of sequence b stored at perm[b * n + p]."""
    B, S, H, Dd = x.shape
    pages = x.reshape(B * (S // PAGE), PAGE, H, Dd)
    out = torch.empty_like(pages)
    out[perm] = pages
    return out


def paged_call():
    """fa4's paged decode call, or None when this build's binding has no paged path (w15v not merged)."""
    params = inspect.signature(fa4.mha_fwd).parameters
    if "block_table" not in params:
        return None

    def run(s):
        return fa4.mha_fwd(s["q"], s["k_pages"], s["v_pages"], out=s["o"], block_table=s["block_table"],
                           seqlen_k=s["seqlens_k"], num_splits=0, workspace=s["ws"])
    return run


def make_set(B, S, Hq, Hkv, paged):
    s = {"q": torch.randn(B, 1, Hq, D, device="cuda", dtype=torch.bfloat16),
         "k": torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16),
         "v": torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)}
    s["o"] = torch.empty_like(s["q"])
    if paged:
        n = S // PAGE
        perm = torch.randperm(B * n, device="cuda")
        s["k_pages"], s["v_pages"] = to_pages(s["k"], perm), to_pages(s["v"], perm)
        s["block_table"] = perm.reshape(B, n).to(torch.int32)
        s["seqlens_k"] = torch.full((B,), S, device="cuda", dtype=torch.int32)
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--paged", action="store_true", help="fa4 reads K/V through a block table of 64-row pages")
    ap.add_argument("--batches", default="1,4,16,64")
    ap.add_argument("--seqlens", default="4096,16384,65536,131072")
    ap.add_argument("--gqa", default="64/8,32/8")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--graphs", action="store_true", help="time CUDA-graph replays (no per-call host cost)")
    ap.add_argument("--calls", type=int, default=1, help="with --graphs: calls per graph (layers of a decode step); "
                    "the time per call is the replay's / calls")
    ap.add_argument("--no-ws", action="store_true", help="fa4 without a workspace (sm90a: a cluster split)")
    ap.add_argument("--ab", help="config words of a second fa4 kernel timed beside the default (dense only)")
    ap.add_argument("--kv-early", action="store_true", help="fa4 with kv_early=True; fa4[plain] without, beside it")
    args = ap.parse_args()
    gpu = torch.cuda.get_device_name()
    torch.manual_seed(0)
    free = torch.cuda.mem_get_info()[0]
    copy_bw = copy_bandwidth(args.reps)
    paged = paged_call() if args.paged else None
    lines = ["# fa4gen decode (seqlen_q 1, d128 bf16) vs torch SDPA, %s, %s, torch %s, cuDNN %s%s" % (
        datetime.date.today(), gpu, torch.__version__, torch.backends.cudnn.version(),
        ", fa4 K/V paged (page %d)" % PAGE if args.paged else ""),
        "# GB/s = K+V bytes / median time of %d reps%s; copy = 2 x 1 GiB device-to-device copy: %.0f GB/s" % (
            args.reps, (" of CUDA-graph replays, %d call(s) per graph (time / call)" % args.calls) if args.graphs
            else " of eager calls (host cost included)", copy_bw),
        "# fa4: num_splits 0 (runtime pick; its split count and kernel below); target >= 85%% of copy for Sk >= 16k"]
    if args.paged and paged is None:
        lines.append("# --paged: this build's fa4.mha_fwd has no block_table (the paged path is issue 15 item 2, "
                     "branch w15v): fa4 runs dense")
    cols = ["fa4"] + (["fa4[ab]"] if args.ab else []) + (["fa4[plain]"] if args.kv_early else []) + \
        [n for n, _ in BACKENDS]
    if args.ab:
        lines.append("# fa4[ab]: config \"%s\"" % args.ab)
    if args.kv_early:
        lines.append("# fa4: kv_early=True (the split kernel reads its first K/V blocks under the previous kernel's "
                     "tail); fa4[plain]: the same call without it")
    head = "%-24s %8s %6s" % ("shape", "KV MB", "splits") + "".join("%11s" % (c + " GB/s") for c in cols) + \
        "   fa4 %copy  fa4/best  check"
    lines.append(head)
    print("\n".join(lines), flush=True)
    met = total = 0
    for g in args.gqa.split(","):
        Hq, Hkv = (int(x) for x in g.split("/"))
        for S in (int(x) for x in args.seqlens.split(",")):
            for B in (int(x) for x in args.batches.split(",")):
                kv_bytes = 2 * B * S * Hkv * D * 2
                name = "B%d Sk%dk GQA %d/%d" % (B, S // 1024, Hq, Hkv)
                if kv_bytes * (3 if args.paged else 1.2) > free * 0.8:
                    lines.append("# %s: skipped, K+V %.1f GB do not fit twice" % (name, kv_bytes / 1e9))
                    continue
                # small K/V: rotate among enough sets that the calls between two reads of one set stream
                # more than twice the L2 (50 MB on H100) through it
                nsets = max(3, -(-(128 << 20) // kv_bytes) + 1) if kv_bytes < (256 << 20) else 1
                sets = [make_set(B, S, Hq, Hkv, args.paged and paged is not None) for _ in range(nsets)]
                splits, ws_bytes = fa4.mha_split_count(sets[0]["q"], sets[0]["k"], sets[0]["v"], num_splits=0)
                ws = torch.empty(max(ws_bytes, 16), device="cuda", dtype=torch.uint8)  # once, outside the timing
                for s in sets:
                    s["ws"] = None if args.no_ws else ws
                if args.no_ws:  # the cluster split the runtime picks without one (1: none)
                    m = re.search(r" cluster=(\d+)", fa4.mha_config(sets[0]["q"], sets[0]["k"], sets[0]["v"]))
                    splits = int(m.group(1)) if m else 1
                def dense(s, early=args.kv_early):
                    return fa4.mha_fwd(s["q"], s["k"], s["v"], out=s["o"], num_splits=0, workspace=s["ws"],
                                       kv_early=early)
                ours = paged or dense
                fns = [("fa4", ours)] + [(n, sdpa(b)) for n, b in BACKENDS]
                if args.kv_early and not paged:
                    fns.insert(1, ("fa4[plain]", lambda s: dense(s, early=False)))
                if args.ab:
                    _, ab_bytes = fa4.mha_split_count(sets[0]["q"], sets[0]["k"], sets[0]["v"], config=args.ab,
                                                      num_splits=0)
                    ab_ws = torch.empty(max(ab_bytes, 16), device="cuda", dtype=torch.uint8)
                    fns.insert(1, ("fa4[ab]", lambda s, w=ab_ws: fa4.mha_fwd(s["q"], s["k"], s["v"], out=s["o"],
                                                                              config=args.ab, num_splits=0, workspace=w)))
                ok, errs = [], {}
                for n, fn in fns:  # a backend that fails on this shape is n/a, left out of the timing
                    if n == "math" and kv_bytes * Hq // Hkv > free // 4:
                        errs[n] = "K/V expanded to %d heads would not fit" % Hq
                        continue
                    try:
                        fn(sets[0])
                        torch.cuda.synchronize()
                        ok.append((n, fn))
                    except Exception as e:  # noqa: BLE001 - report any backend failure
                        errs[n] = str(e).split("\n")[0][:70]
                        torch.cuda.empty_cache()
                timed = ok
                if args.graphs:  # each backend's call captured once per set, replayed in the timing
                    timed = []
                    for n, fn in ok:
                        try:
                            timed.append((n, graphed(fn, sets, args.calls)))
                        except Exception as e:  # noqa: BLE001 - a backend that cannot be captured is n/a
                            errs[n] = "graph capture: " + str(e).split("\n")[0][:60]
                per = args.calls if args.graphs else 1
                # math (expanded K/V, ~40 GB/s) is timed apart: a contender only in name, its heavy kernels
                # would heat the GPU for whichever call follows them
                fast = [(n, fn) for n, fn in timed if n != "math"]
                ms = dict(zip([n for n, _ in fast], [t / per for t in time_interleaved(
                    [fn for _, fn in fast], [(s,) for s in sets], args.reps)]))
                for n, fn in timed:
                    if n == "math":
                        ms[n] = time_ms(fn, [(s,) for s in sets], max(3, args.reps // 10))[0] / per
                check = "n/a"
                refn = next((n for n, _ in ok if not n.startswith("fa4")), None)
                if "fa4" in ms and refn:
                    mine = ours(sets[0]).float()
                    ref = dict(ok)[refn](sets[0]).float()
                    rel = ((mine - ref).norm() / ref.norm()).item()
                    check = "%.1e %s (vs %s)" % (rel, "ok" if rel <= 1e-2 else "FAIL", refn)
                bw = {n: kv_bytes / t / 1e6 for n, t in ms.items()}
                best = max((v for n, v in bw.items() if not n.startswith("fa4")), default=None)
                pct = 100 * bw["fa4"] / copy_bw if "fa4" in bw else None
                if pct is not None and S >= 16384:
                    total += 1
                    met += pct >= 85
                cells = "".join("%11s" % ("%.0f" % bw[c] if c in bw else "n/a") for c in cols)
                line = "%-24s %8.0f %6d%s   %9s  %8s  %s" % (
                    name, kv_bytes / 1e6, splits, cells, "%.0f%%" % pct if pct is not None else "n/a",
                    "%.2f" % (bw["fa4"] / best) if best and "fa4" in bw else "n/a", check)
                lines.append(line)
                print(line, flush=True)
                for n, e in errs.items():
                    lines.append("#   %s on %s: n/a: %s" % (n, name, e))
                try:
                    cfg = fa4.mha_config(sets[0]["q"], sets[0]["k"], sets[0]["v"], config=None)
                    lines.append("#   %s: unsplit config %s; split kernel: split=1 of it" % (name, cfg))
                except Exception as e:  # noqa: BLE001
                    lines.append("#   %s: config n/a (%s)" % (name, str(e)[:60]))
                del sets, ws
                torch.cuda.empty_cache()
    lines.append("# target: %d of %d shapes with Sk >= 16k reach 85%% of the copy bandwidth" % (met, total))
    print(lines[-1], flush=True)
    write_lines(args.out, lines)


if __name__ == "__main__":
    main()
