"""bench_decode.py - decode attention (seqlen_q 1) of fa4gen against every torch SDPA backend, one run, one GPU.

    python3 bench/bench_decode.py [--out FILE] [--paged] [--batches 1,4,16,64] [--seqlens 4096,16384,65536,131072]
                                  [--gqa 64/8,32/8] [--reps 30] [--ab "CONFIG WORDS"] [--graphs [--calls N]]
                                  [--no-ws] [--kv-early] [--kv-tail N] [--math last|inline|off]

Per shape (d128 bf16, GQA packed): fa4.mha_fwd with num_splits 0 (the runtime picks the split count; the
workspace is allocated once per shape, outside the timing) against SDPA flash / efficient / cuDNN / math,
each where it runs (a backend that refuses or runs out of memory is n/a). The figure of merit is the achieved
HBM bandwidth, K + V bytes / time, against the copy bandwidth measured in the same run (a 2 x 1 GiB
device-to-device copy: read + write bytes / time). Target (issue 15): >= 85% of it for seqlen_k >= 16k.
Median of --reps repetitions (CUDA events) after warm-up, the backends taking turns within every repetition
(the first one rotating). SDPA math (~40 GB/s: K/V expanded to every query head) is timed in a pass of its own
after every other shape (--math last): run inline, its seconds of heavy work slowed the clocks for the next
shape's timing, every backend's alike (B1 Sk16k read 75% of the copy after B64 Sk4k's math, 84% first).
Each shape's notes log the GPU's clocks, power and clock-event reasons just before its timing;
K/V sets are rotated when they are small enough to hide in L2 otherwise. fa4's output is checked against the
first torch backend that ran (rel L2 <= 1e-2).

--graphs times every backend's call as a CUDA-graph replay (captured once per input set), so the host's
per-call cost (Python, argument checks, launch) leaves the figure, as in a serving engine's captured decode
step; without it small shapes measure that cost (about 0.15-0.2 ms a call here), not the kernel. Even a
graph's replay costs ~10 us of launch (profile_decode.py); --calls N puts N calls in one graph, as a decode
step holds every layer's attention, and reports the time per call.

--ab times a second fa4 kernel chosen by config words (e.g. "bm=64": one consumer warpgroup, 64-row tiles)
in the same repetitions, its own split pick and workspace, for one-change experiments (column "fa4[ab]";
several configs separated by ';' give fa4[ab1], fa4[ab2], ..; with --kv-early they pass kv_early too, with
--paged they read the pages too).

--hold-us (default 200, with --graphs): before each timed replay the GPU spins that long, so the host has
queued the start event, the replay and the end event before the GPU reaches them. Without it (0) a replay's
time included the host's graph-launch latency, 10-25 us a replay (profile_decode.py --timeline: an 8-call
replay's kernels spanned 212 us of a 237 us time), which a serving loop running ahead of the GPU never sees;
every backend's time loses it alike.

--no-ws: fa4 gets no workspace (num_splits 0 still): on sm90a the runtime then runs a decode shape as a
cluster split (the split CTAs merge in distributed shared memory); column "splits" is its cluster size.

--kv-early: fa4 calls pass kv_early=True (fa4.h: K/V rows before the newest seqlen_q -- paged: and the block
table, seqlens_k -- are not written by a kernel that may still run, true here: the kernels before each call are
other calls', which write only O and LSE), so the split kernel streams its first K/V blocks under the previous
kernel's tail; column "fa4[plain]" times the same calls without it in the same repetitions. With --paged too.

--kv-tail N (0 < N < 64): every sequence's kv length is seqlen_k - N, so each split kernel's last kv block
holds a sequence's last key and rows past it (a real decode step's case: lengths are rarely multiples of the
tile): dense calls (fa4's and torch's) see K, V views that end there; paged, seqlens_k stops there and the page
rows past it hold NaN, which must not reach O (issue 26 item 5; fa4's check column stays finite). With
--ab "stale=1" the second column is the kernel without the tail isolation (config word stale, unsafe: A/B only),
in the same repetitions.

--paged: K and V live in pages of 64 rows [num_pages, 64, heads_kv, 128] with a shuffled block table
[batch, seqlen_k / 64]; fa4 reads them through the paged path (issue 15 item 2, branch w15v); torch has no
paged SDPA, so its columns time the same data dense. The only code that knows the paged call is paged_call().
--out FILE.txt writes the table there and the same numbers as JSON to FILE.json (bench/results_json.py).

--page-order in-order|local|shuffled (with --paged; default shuffled): the block table in order (pages
contiguous), shuffled only within runs of 16 pages (2 MiB, one large page of the GPU's page table), or shuffled
over the pool, to tell the kernel's cost of paging from that of scattered pages (H100, B16 Sk16k: dense 3095
GB/s, in order 3066, shuffled 3012).
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
from benchlib import capture, gpu_state, time_interleaved, time_ms, write_lines  # noqa: E402
from results_json import run_doc, write_beside  # noqa: E402

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


def paged_call(config=None, ws=None, early=False):
    """fa4's paged decode call (config words and a workspace of its own for --ab; kv_early), or None when
    this build's binding has no paged path (w15v not merged)."""
    params = inspect.signature(fa4.mha_fwd).parameters
    if "block_table" not in params:
        return None

    def run(s):
        return fa4.mha_fwd(s["q"], s["k_pages"], s["v_pages"], out=s["o"], block_table=s["block_table"],
                           seqlen_k=s["seqlens_k"], num_splits=0, config=config,
                           workspace=s["ws"] if ws is None else ws, kv_early=early)
    return run


def page_perm(n, order):
    """Where each of n pages is stored: in order, shuffled within runs of 16, or shuffled over all."""
    if order == "in-order":
        return torch.arange(n, device="cuda")
    if order == "local":
        base = torch.arange(n, device="cuda")
        for s in range(0, n, 16):
            m = min(16, n - s)
            base[s:s + m] = s + torch.randperm(m, device="cuda")
        return base
    return torch.randperm(n, device="cuda")


def add_pages(s, order="shuffled"):
    """The set's K/V also as pages of PAGE rows in the given order, with their block table and lengths."""
    B, S = s["k"].shape[:2]
    n = S // PAGE
    perm = page_perm(B * n, order)
    s["k_pages"], s["v_pages"] = to_pages(s["k"], perm), to_pages(s["v"], perm)
    s["block_table"] = perm.reshape(B, n).to(torch.int32)
    s["seqlens_k"] = torch.full((B,), S, device="cuda", dtype=torch.int32)


def stale_tail(s, n):
    """--kv-tail: the last n kv rows of every sequence are past its length: the dense views end before them,
    seqlens_k stops there, and in the pages those rows hold NaN (a cache's stale rows)."""
    B, S = s["k"].shape[:2]
    s["k"], s["v"] = s["k"][:, :S - n], s["v"][:, :S - n]
    if "k_pages" in s:
        s["seqlens_k"].fill_(S - n)
        last = s["block_table"][:, (S - 1) // PAGE].long()
        for pages in (s["k_pages"], s["v_pages"]):
            pages[last, (S - n) % PAGE:] = float("nan")


def make_set(B, S, Hq, Hkv, paged, order="shuffled"):
    s = {"q": torch.randn(B, 1, Hq, D, device="cuda", dtype=torch.bfloat16),
         "k": torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16),
         "v": torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)}
    s["o"] = torch.empty_like(s["q"])
    if paged:
        add_pages(s, order)
    return s


def time_shape(args, B, S, Hq, Hkv, free, paged):
    """One shape: fa4 and every fast torch backend taking turns in the same repetitions (math too with
    --math inline). A row: the bandwidths, fa4's check, and the notes printed under its line."""
    kv_bytes = 2 * B * S * Hkv * D * 2
    name = "B%d Sk%dk GQA %d/%d" % (B, S // 1024, Hq, Hkv)
    row = {"name": name, "B": B, "S": S, "Hq": Hq, "Hkv": Hkv, "kv_bytes": kv_bytes, "bw": {}, "notes": []}
    if kv_bytes * (3 if args.paged else 1.2) > free * 0.8:
        row["skipped"] = "# %s: skipped, K+V %.1f GB do not fit twice" % (name, kv_bytes / 1e9)
        return row
    # small K/V: rotate among enough sets that the calls between two reads of one set stream
    # more than twice the L2 (50 MB on H100) through it
    nsets = max(3, -(-(128 << 20) // kv_bytes) + 1) if kv_bytes < (256 << 20) else 1
    sets = [make_set(B, S, Hq, Hkv, args.paged and paged is not None, args.page_order) for _ in range(nsets)]
    splits, ws_bytes = fa4.mha_split_count(sets[0]["q"], sets[0]["k"], sets[0]["v"], num_splits=0)
    ws = torch.empty(max(ws_bytes, 16), device="cuda", dtype=torch.uint8)  # once, outside the timing
    for s in sets:
        s["ws"] = None if args.no_ws else ws
    if args.no_ws:  # the cluster split the runtime picks without one (1: none)
        m = re.search(r" cluster=(\d+)", fa4.mha_config(sets[0]["q"], sets[0]["k"], sets[0]["v"]))
        splits = int(m.group(1)) if m else 1
    row["splits"] = splits

    def dense(s, early=args.kv_early):
        return fa4.mha_fwd(s["q"], s["k"], s["v"], out=s["o"], num_splits=0, workspace=s["ws"], kv_early=early)
    ours = paged_call(early=args.kv_early) if paged else dense
    fns = [("fa4", ours)] + [(n, sdpa(b)) for n, b in BACKENDS if n != "math" or args.math == "inline"]
    if args.kv_early:
        fns.insert(1, ("fa4[plain]", paged_call() if paged else lambda s: dense(s, early=False)))
    for i, (n, cfg) in enumerate(zip(ab_names(args), ab_configs(args))):
        s0 = sets[0]  # paged: the paged call's own pick (a config word may be one only paged kernels take: stale=1)
        _, ab_bytes = fa4.mha_split_count(s0["q"], s0["k_pages"], s0["v_pages"], config=cfg, num_splits=0,
                                          block_table=s0["block_table"], seqlen_k=s0["seqlens_k"]) if paged else \
            fa4.mha_split_count(s0["q"], s0["k"], s0["v"], config=cfg, num_splits=0)
        ab_ws = torch.empty(max(ab_bytes, 16), device="cuda", dtype=torch.uint8)
        fns.insert(1 + i, (n, paged_call(cfg, ab_ws, args.kv_early) if paged else lambda s, w=ab_ws, c=cfg: fa4.mha_fwd(
            s["q"], s["k"], s["v"], out=s["o"], config=c, num_splits=0, workspace=w, kv_early=args.kv_early)))
    for s in sets if args.kv_tail else []:  # after every split count and workspace above (full length)
        stale_tail(s, args.kv_tail)
    ok, errs = [], {}
    for n, fn in fns:  # a backend that fails on this shape is n/a, left out of the timing
        if n == "math" and not math_fits(row, free, errs):
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
    state = gpu_state()
    # math (expanded K/V, ~40 GB/s) is timed apart even inline: its heavy kernels would heat the GPU for
    # whichever call follows them within the repetitions
    fast = [(n, fn) for n, fn in timed if n != "math"]
    hold = args.hold_us if args.graphs else 0
    ms = dict(zip([n for n, _ in fast], [t / per for t in time_interleaved(
        [fn for _, fn in fast], [(s,) for s in sets], args.reps, hold_us=hold)]))
    for n, fn in timed:
        if n == "math":
            ms[n] = time_ms(fn, [(s,) for s in sets], max(3, args.reps // 10), hold_us=hold)[0] / per
    row["check"] = "n/a"
    refn = next((n for n, _ in ok if not n.startswith("fa4")), None)
    if "fa4" in ms and refn:
        mine = ours(sets[0]).float()
        ref = dict(ok)[refn](sets[0]).float()
        rel = ((mine - ref).norm() / ref.norm()).item()
        row["check"] = "%.1e %s (vs %s)" % (rel, "ok" if rel <= 1e-2 else "FAIL", refn)
    row["bw"] = {n: kv_bytes / t / 1e6 for n, t in ms.items()}
    row["notes"] += ["#   %s on %s: n/a: %s" % (n, name, e) for n, e in errs.items()]
    if state:
        row["notes"].append("#   %s: GPU before timing: %s" % (name, state))
    try:
        cfg = fa4.mha_config(sets[0]["q"], sets[0]["k"], sets[0]["v"], config=None)
        row["notes"].append("#   %s: unsplit config %s; split kernel: split=1 of it" % (name, cfg))
    except Exception as e:  # noqa: BLE001
        row["notes"].append("#   %s: config n/a (%s)" % (name, str(e)[:60]))
    del sets, ws
    torch.cuda.empty_cache()
    return row


def ab_configs(args):
    return [c.strip() for c in args.ab.split(";")] if args.ab else []


def ab_names(args):
    n = len(ab_configs(args))
    return ["fa4[ab]"] if n == 1 else ["fa4[ab%d]" % (i + 1) for i in range(n)]


def math_fits(row, free, errs):
    if row["kv_bytes"] * row["Hq"] // row["Hkv"] > free // 4:
        errs["math"] = "K/V expanded to %d heads would not fit" % row["Hq"]
        return False
    return True


def time_math(args, row, free):
    """SDPA math for one shape, in the pass after every other shape (--math last), so its heat falls on
    nothing that is timed; eager or graphed as the rest, one input set (at ~40 GB/s L2 does not matter)."""
    errs = {}
    if math_fits(row, free, errs):
        s = make_set(row["B"], row["S"], row["Hq"], row["Hkv"], False)
        fn = sdpa(BACKENDS[-1][1])
        try:
            fn(s)
            torch.cuda.synchronize()
            if args.graphs:
                fn = graphed(fn, [s], args.calls)
            ms = time_ms(fn, [(s,)], max(3, args.reps // 10), hold_us=args.hold_us if args.graphs else 0)[0] / \
                (args.calls if args.graphs else 1)
            row["bw"]["math"] = row["kv_bytes"] / ms / 1e6
        except Exception as e:  # noqa: BLE001 - report any backend failure
            errs["math"] = str(e).split("\n")[0][:70]
        del s
        torch.cuda.empty_cache()
    row["notes"] += ["#   math on %s: n/a: %s" % (row["name"], e) for e in errs.values()]


def format_row(row, cols, copy_bw):
    if "skipped" in row:
        return row["skipped"]
    bw = row["bw"]
    best = max((v for n, v in bw.items() if not n.startswith("fa4")), default=None)
    row["pct"] = 100 * bw["fa4"] / copy_bw if "fa4" in bw else None
    cells = "".join("%11s" % ("%.0f" % bw[c] if c in bw else "n/a") for c in cols)
    return "%-24s %8.0f %6d%s   %9s  %8s  %s" % (
        row["name"], row["kv_bytes"] / 1e6, row["splits"], cells,
        "%.0f%%" % row["pct"] if row["pct"] is not None else "n/a",
        "%.2f" % (bw["fa4"] / best) if best and "fa4" in bw else "n/a", row["check"])


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
    ap.add_argument("--ab", help="config words of a second fa4 kernel timed beside the default; "
                    "several separated by ';'")
    ap.add_argument("--page-order", choices=("shuffled", "local", "in-order"), default="shuffled",
                    help="with --paged: the pool's page order (local: shuffled within runs of 16 pages)")
    ap.add_argument("--hold-us", type=float, default=200, help="with --graphs: the GPU spins this long before each "
                    "timed replay, so the host's launch latency stays out of the time (0: the old method)")
    ap.add_argument("--kv-early", action="store_true", help="fa4 with kv_early=True; fa4[plain] without, beside it")
    ap.add_argument("--kv-tail", type=int, default=0, help="kv lengths seqlen_k - N (0 < N < 64): a tail block per "
                    "sequence; paged, NaN in the page rows past the length")
    ap.add_argument("--math", choices=("last", "inline", "off"), default="last",
                    help="SDPA math: in a pass after every shape (default), within each shape's timing, or not run")
    args = ap.parse_args()
    if not 0 <= args.kv_tail < PAGE:
        ap.error("--kv-tail: 0..%d" % (PAGE - 1))
    gpu = torch.cuda.get_device_name()
    torch.manual_seed(0)
    free = torch.cuda.mem_get_info()[0]
    copy_bw = copy_bandwidth(args.reps)
    paged = paged_call() if args.paged else None
    lines = ["# fa4gen decode (seqlen_q 1, d128 bf16) vs torch SDPA, %s, %s, torch %s, cuDNN %s%s" % (
        datetime.date.today(), gpu, torch.__version__, torch.backends.cudnn.version(),
        (", fa4 K/V paged (page %d, page order %s)" % (PAGE, args.page_order))
        if args.paged else ""),
        "# GB/s = K+V bytes / median time of %d reps%s; copy = 2 x 1 GiB device-to-device copy: %.0f GB/s" % (
            args.reps, (" of CUDA-graph replays, %d call(s) per graph (time / call), GPU held %g us before each"
                        % (args.calls, args.hold_us)) if args.graphs
            else " of eager calls (host cost included)", copy_bw),
        "# fa4: num_splits 0 (runtime pick; its split count and kernel below); target >= 85%% of copy for Sk >= 16k"]
    if args.kv_tail:
        lines.append("# --kv-tail %d: kv lengths seqlen_k - %d (GB/s still counts seqlen_k rows)%s" % (
            args.kv_tail, args.kv_tail, "; the page rows past them hold NaN" if args.paged else ""))
    if args.paged and paged is None:
        lines.append("# --paged: this build's fa4.mha_fwd has no block_table (the paged path is issue 15 item 2, "
                     "branch w15v): fa4 runs dense")
    cols = ["fa4"] + ab_names(args) + (["fa4[plain]"] if args.kv_early else []) + \
        [n for n, _ in BACKENDS if n != "math" or args.math != "off"]
    for n, cfg in zip(ab_names(args), ab_configs(args)):
        lines.append("# %s: config \"%s\"%s" % (n, cfg, ", kv_early=True" if args.kv_early else ""))
    if args.kv_early:
        lines.append("# fa4: kv_early=True (the split kernel reads its first K/V blocks under the previous kernel's "
                     "tail); fa4[plain]: the same call without it")
    head = "%-24s %8s %6s" % ("shape", "KV MB", "splits") + "".join("%11s" % (c + " GB/s") for c in cols) + \
        "   fa4 %copy  fa4/best  check"
    lines.append(head)
    print("\n".join(lines), flush=True)
    rows = []
    for g in args.gqa.split(","):
        Hq, Hkv = (int(x) for x in g.split("/"))
        for S in (int(x) for x in args.seqlens.split(",")):
            for B in (int(x) for x in args.batches.split(",")):
                row = time_shape(args, B, S, Hq, Hkv, free, paged)
                rows.append(row)
                print(format_row(row, cols, copy_bw) + ("   (math pending)" if args.math == "last" else ""),
                      flush=True)
    if args.math == "last":  # its own pass: ~40 GB/s of expanded K/V heats the GPU for whatever follows
        for row in rows:
            if "skipped" not in row:
                time_math(args, row, free)
    met = total = 0
    for row in rows:
        lines.append(format_row(row, cols, copy_bw))
        lines += row["notes"]
        pct = row.get("pct")
        if pct is not None and row["S"] >= 16384:
            total += 1
            met += pct >= 85
    lines.append("# target: %d of %d shapes with Sk >= 16k reach 85%% of the copy bandwidth" % (met, total))
    print(lines[-1], flush=True)
    write_lines(args.out, lines)
    records = []
    for row in rows:
        rec = {"shape": row["name"], "B": row["B"], "S": row["S"], "Hq": row["Hq"], "Hkv": row["Hkv"],
               "kv_mb": row["kv_bytes"] / 1e6}
        if "skipped" in row:
            rec["skipped"] = True
        else:
            rec.update(splits=row["splits"], gbps=dict(row["bw"]), pct_copy=row.get("pct"), check=row["check"])
        records.append(rec)
    write_beside(args.out, run_doc(
        "decode", gpu, {"gbps": "GB/s", "kv_mb": "MB", "pct_copy": "%"}, records, torch=torch.__version__,
        cudnn=str(torch.backends.cudnn.version()), copy_gbps=copy_bw, graphs=args.graphs,
        calls_per_graph=args.calls if args.graphs else 1, hold_us=args.hold_us if args.graphs else 0,
        reps=args.reps, paged=bool(args.paged and paged is not None), page=PAGE, page_order=args.page_order,
        kv_early=args.kv_early, no_ws=args.no_ws, ab=ab_configs(args), math=args.math, target_met=met,
        target_total=total))


if __name__ == "__main__":
    main()
