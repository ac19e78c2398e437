"""short_timeline.py - where a short tile's time goes: the sm90a MHA forward's phase stamps (config word timeline=1).

    python3 bench/short_timeline.py [--out FILE] [--json FILE] [--shapes SUBSTR] [--variants "default;persistent=0"]
                                    [--steady]

The timeline kernel is the default kernel of the shape (or a variant's words) plus clock64 stamps at each tile's
phase boundaries (gen/fa4gen.h MhaTimelineSlot), written to the workspace (NSLOTS u64 a tile). Per shape and variant:
one warm call, then a call whose records are read; every phase's median and 10th/90th percentile over the tiles,
in ns (the SM clock's rate taken per CTA from its globaltimer and clock64 stamps), the gap between a CTA's tiles
(its consumer 0 done with one tile -> at the next), how far the producer runs ahead, and the SMs' busy share of the
kernel's span. Also the kernel's time with and without the stamps (eager, 20 calls): what the stamps cost.

--steady: the same kernels in the steady state of back-to-back calls, inputs rotated so L2 holds none of a call's
(the single call above finds part of its inputs in L2 and nothing running before it): two timeline calls A, B in the
middle of a run of calls, their spans from the first CTA's entry to the last consumer's store, and the seam between
them (A's last store -> B's first entry, PDL wait passed, first Q landed), beside each backend's time a call under
CUDA graphs -- the timeline kernel, the plain one, cuDNN and a stream of the same bytes (torch.addcmul reads Q, K, V
and writes O: no attention kernel moves less; shapes without GQA).

decode() and summarize() need no GPU (tests/python/test_timeline_sim.py runs them on the simulator's records).
"""
import argparse
import json
import math
import os
import statistics
import struct
import sys

# gen/fa4gen.h MhaTimelineSlot, in order
SLOTS = ["id", "entry", "p_tile", "p_q", "p_kv_end", "c_tile", "c_q", "c_qk0", "c_s0", "c_main_end", "c_lse",
         "c_staged", "c_stored", "cl_stored", "gt_c_tile", "gt_c_stored", "c_qk_last", "c_s_last", "c_p_last",
         "c_pv_last", "cl_qk0", "cl_main_end", "p_waited", "p_synced"]
NSLOTS = len(SLOTS)

# (name, from slot, to slot): durations in clock64 cycles of one tile
PHASES = [
    ("P  Q slot wait + Q issue", "p_tile", "p_q"),
    ("P  K/V issue (ring waits)", "p_q", "p_kv_end"),
    ("C0 tile top -> Q landed", "c_tile", "c_q"),
    ("C0 Q -> first QK issued (K, turn)", "c_q", "c_qk0"),
    ("C0 first QK -> S ready", "c_qk0", "c_s0"),
    ("C0 rest of the mainloop", "c_s0", "c_main_end"),
    # the rest of the mainloop in parts (tiles of two or more kv blocks; the C0 "last" stamps are the loop's last pass)
    ("C0 . S0 -> last QK issued (softmax, turn)", "c_s0", "c_qk_last"),
    ("C0 . last QK -> its S ready", "c_qk_last", "c_s_last"),
    ("C0 . last S -> P ready (softmax, PV wait)", "c_s_last", "c_p_last"),
    ("C0 . P ready -> last PV issued (turn)", "c_p_last", "c_pv_last"),
    ("C0 . last PV issued -> retired", "c_pv_last", "c_main_end"),
    ("C0 l reduce + LSE store", "c_main_end", "c_lse"),
    ("C0 O normalise + stage + sync", "c_lse", "c_staged"),
    ("C0 O store reads smem (wait)", "c_staged", "c_stored"),
    ("C0 tile total", "c_tile", "c_stored"),
    ("CL first QK after C0's", "c_qk0", "cl_qk0"),
    ("CL mainloop end after C0's", "c_main_end", "cl_main_end"),
    ("CL stored after C0 stored", "c_stored", "cl_stored"),
    ("producer lead (P tile -> C0 tile)", "p_tile", "c_tile"),
]


def config_tiles(cfg, B, Hq, S):
    """The tiles of a canonical config's grid over B x Hq heads of S query rows: one a bm-row m-block of a head."""
    bm = int(cfg.split(" bm=")[1].split()[0])
    return math.ceil(S / bm) * Hq * B


def decode(raw, tiles):
    """The records of `tiles` tiles from the workspace bytes: a list of dicts slot -> int (0: never written)."""
    words = struct.unpack("<%dQ" % (tiles * NSLOTS), raw[:tiles * NSLOTS * 8])
    recs = []
    for t in range(tiles):
        r = dict(zip(SLOTS, words[t * NSLOTS:(t + 1) * NSLOTS]))
        r["tile"], r["cta"], r["smid"] = t, r["id"] & 0xFFFFFFFF, r["id"] >> 32
        recs.append(r)
    return recs


def check(recs):
    """What must hold for every tile whose producer and consumer 0 ran (records of tiles with keys): a list of
    sentences, empty when all hold."""
    bad = []
    # p_waited: in the prologue, before p_synced; where the producer itself waits (plan pdl prefetch kv), after
    # p_tile: either way between entry and p_q
    order = (["entry", "p_synced", "p_tile", "p_q", "p_kv_end"], ["entry", "p_waited", "p_q"],
             ["c_tile", "c_q", "c_qk0", "c_s0", "c_main_end", "c_lse", "c_staged", "c_stored"])
    for r in recs:
        for chain in order:
            vals = [r[s] for s in chain]
            if 0 in vals[1:]:
                bad.append("tile %d: slot %s never written" % (r["tile"], chain[vals[1:].index(0) + 1]))
            elif any(b < a for a, b in zip(vals, vals[1:])):
                bad.append("tile %d: %s out of order: %s" % (r["tile"], "/".join(chain), vals))
        if r["gt_c_stored"] < r["gt_c_tile"] or not r["gt_c_tile"]:
            bad.append("tile %d: globaltimer %d -> %d" % (r["tile"], r["gt_c_tile"], r["gt_c_stored"]))
    return bad


def _pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))]


def summarize(recs, ns_per_cycle=None):
    """Per phase: (median, p10, p90, n) in ns (cycles when the rate is unknown: ns_per_cycle=None and no
    globaltimer span), plus the per-CTA facts. Returns a dict."""
    by_cta = {}
    for r in recs:
        if r["c_tile"]:
            by_cta.setdefault(r["cta"], []).append(r)
    rates = []
    for rs in by_cta.values():
        rs.sort(key=lambda r: r["c_tile"])
        dc, dg = rs[-1]["c_stored"] - rs[0]["c_tile"], rs[-1]["gt_c_stored"] - rs[0]["gt_c_tile"]
        if dc > 0 and dg > 0:
            rates.append(dg / dc)
    rate = ns_per_cycle or (statistics.median(rates) if rates else None)
    unit = rate or 1.0
    out = {"ns_per_cycle": rate, "unit": "ns" if rate else "cycles", "phases": {}, "tiles": len(recs),
           "ctas": len(by_cta)}

    def put(name, xs):
        if xs:
            out["phases"][name] = (statistics.median(xs) * unit, _pct(xs, 0.1) * unit, _pct(xs, 0.9) * unit, len(xs))

    for name, a, b in PHASES:
        put(name, [r[b] - r[a] for r in recs if r[a] and r[b]])
    # the CTA's first tile: its entry to the producer's and consumer 0's start
    firsts = [rs[0] for rs in by_cta.values()]
    put("first tile: entry -> P tile (prologue)", [r["p_tile"] - r["entry"] for r in firsts if r["p_tile"]])
    # the prologue in parts (the producer thread): the PDL wait; the barrier init, the CTA barrier and setmaxnreg;
    # the producer's setup and its first tile's coordinates
    put("first tile: . entry -> PDL wait passed", [r["p_waited"] - r["entry"] for r in firsts if r["p_waited"]])
    put("first tile: . entry -> CTA synced", [r["p_synced"] - r["entry"] for r in firsts if r["p_synced"]])
    put("first tile: . synced -> P tile", [r["p_tile"] - r["p_synced"] for r in firsts if r["p_synced"]])
    put("first tile: . P tile -> Q issued", [r["p_q"] - r["p_tile"] for r in firsts if r["p_q"]])
    put("first tile: entry -> C0 Q landed", [r["c_q"] - r["entry"] for r in firsts if r["c_q"]])
    # between a CTA's tiles: consumer 0 done with one (its store read smem) -> at the next one's top
    put("C0 between tiles (stored -> next tile)",
        [b["c_tile"] - a["c_stored"] for rs in by_cta.values() for a, b in zip(rs, rs[1:])])
    out["tiles_per_cta"] = statistics.median([len(rs) for rs in by_cta.values()]) if by_cta else 0
    gts = [(r["gt_c_tile"], r["gt_c_stored"]) for r in recs if r["gt_c_tile"] and r["gt_c_stored"]]
    if gts:
        span = max(b for _, b in gts) - min(a for a, _ in gts)
        busy = sum(b - a for a, b in gts)
        out["span_ns"] = span
        # consumer 0's busy share of (span x CTAs): what the grid loses to prologues, gaps and the tail
        out["busy_share"] = busy / (span * len(by_cta)) if span and by_cta else None
        ends = sorted(max(r["gt_c_stored"] for r in rs) for rs in by_cta.values())
        out["tail_ns"] = ends[-1] - ends[len(ends) // 2]  # the last CTA's end after the median CTA's
        out["ctas_table"] = cta_table(by_cta, min(a for a, _ in gts))
        # the last wave: tiles begun after the first CTA ended against the rest -- whether a tile runs faster once
        # fewer CTAs share the DRAM (a latency-bound chain does not)
        late = [b - a for a, b in gts if a > ends[0]]
        early = [b - a for a, b in gts if a <= ends[0]]
        if late and early:
            out["late_tiles"] = (len(late), statistics.median(late), statistics.median(early))
    return out


def cta_table(by_cta, t0):
    """Per CTA (globaltimer ns from the grid's first tile top): start, end, tiles, busy, SM -- what the tail is
    made of: CTAs with more tiles (the order's count), slower tiles (their SM or their neighbours), or a late
    start."""
    rows = []
    for cta, rs in by_cta.items():
        rs = [r for r in rs if r["gt_c_tile"] and r["gt_c_stored"]]
        if not rs:
            continue
        busy = sum(r["gt_c_stored"] - r["gt_c_tile"] for r in rs)
        rows.append({"cta": cta, "smid": rs[0]["smid"], "tiles": len(rs), "busy": busy,
                     "start": min(r["gt_c_tile"] for r in rs) - t0, "end": max(r["gt_c_stored"] for r in rs) - t0})
    rows.sort(key=lambda r: r["end"])
    return rows


def tail_lines(rows):
    """The per-CTA table in a few lines: the ends' spread, then the last CTAs against the median ones."""
    if len(rows) < 4:
        return []
    ends = [r["end"] for r in rows]
    q = lambda xs, f: sorted(xs)[min(len(xs) - 1, int(f * (len(xs) - 1)))]
    mid = rows[len(rows) // 4:3 * len(rows) // 4]
    late = rows[-max(1, len(rows) // 10):]

    def mean(xs):
        return sum(xs) / len(xs)

    def group(name, g):
        return "#   %-22s %4d CTAs: tiles %.2f, busy %.1f us, ns a tile %.0f, start %.2f us, end %.1f us" % (
            name, len(g), mean([r["tiles"] for r in g]), mean([r["busy"] for r in g]) / 1e3,
            mean([r["busy"] / r["tiles"] for r in g]), mean([r["start"] for r in g]) / 1e3,
            mean([r["end"] for r in g]) / 1e3)

    out = ["#   CTA ends (us after the first tile top): min %.1f p10 %.1f median %.1f p90 %.1f max %.1f" % tuple(
        x / 1e3 for x in (ends[0], q(ends, 0.1), q(ends, 0.5), q(ends, 0.9), ends[-1])),
           group("middle half by end", mid), group("last tenth by end", late),
           "#   the last 6: " + "; ".join("cta %d sm %d %d tiles %.0f ns/tile end %.1f" % (
               r["cta"], r["smid"], r["tiles"], r["busy"] / r["tiles"], r["end"] / 1e3) for r in rows[-6:])]
    return out


def cta_bounds(recs, rate):
    """Per CTA (globaltimer ns): its entry, PDL wait passed, first Q landed and last store (either consumer), the
    clock64 stamps placed on the globaltimer by the CTA's first tile pair (gt_c_tile, c_tile) at `rate` ns a cycle."""
    by_cta = {}
    for r in recs:
        if r["c_tile"] and r["gt_c_tile"]:
            by_cta.setdefault(r["cta"], []).append(r)
    out = []
    for rs in by_cta.values():
        rs.sort(key=lambda r: r["c_tile"])
        f = rs[0]
        at = lambda cyc, f=f: f["gt_c_tile"] + (cyc - f["c_tile"]) * rate
        end = max(at(max(r["c_stored"], r["cl_stored"])) for r in rs)
        out.append({"entry": at(f["entry"]), "waited": at(f["p_waited"]) if f["p_waited"] else None,
                    "issued": at(f["p_q"]) if f["p_q"] else None, "q": at(f["c_q"]), "end": end})
    return out


def seam_lines(a, b):
    """Two back-to-back calls' CTA bounds (cta_bounds): each call's span and the seam between them, in lines."""
    def span(c):
        return max(x["end"] for x in c) - min(x["entry"] for x in c)
    a_end = max(x["end"] for x in a)
    a_ends = sorted(x["end"] for x in a)
    rel = lambda xs: sorted(x - a_end for x in xs if x is not None)
    eb, wb, qb = rel([x["entry"] for x in b]), rel([x["waited"] for x in b]), rel([x["q"] for x in b])
    ib = rel([x["issued"] for x in b])
    med = lambda xs: xs[len(xs) // 2]
    return ["#   steady: call A span %.1f us, call B span %.1f us (first entry -> last store, globaltimer)" % (
                span(a) / 1e3, span(b) / 1e3),
            "#   A's CTAs end (us before A's last store): first %.1f, median %.1f, p90 %.1f" % (
                (a_end - a_ends[0]) / 1e3, (a_end - med(a_ends)) / 1e3,
                (a_end - a_ends[int(0.9 * (len(a_ends) - 1))]) / 1e3),
            "#   B after A's last store (us): entry first %.2f median %.2f last %.2f; PDL wait passed first %.2f "
            "median %.2f; Q issued first %.2f median %.2f; first Q landed first %.2f median %.2f" % (
                eb[0] / 1e3, med(eb) / 1e3, eb[-1] / 1e3, wb[0] / 1e3 if wb else float("nan"),
                med(wb) / 1e3 if wb else float("nan"), ib[0] / 1e3 if ib else float("nan"),
                med(ib) / 1e3 if ib else float("nan"), qb[0] / 1e3, med(qb) / 1e3)]


def steady(torch, fa4, shape, words):
    """The --steady lines of one shape and variant (see the module's doc)."""
    from benchlib import capture, time_interleaved
    from bench_mha import sdpa
    from torch.nn.attention import SDPBackend
    name, B, Hq, Hkv, S, D, causal = shape
    nbytes = (2 * B * S * Hq + 2 * B * S * Hkv) * D * 2
    nsets = max(3, math.ceil(160e6 / nbytes))
    sets = [(torch.randn(B, S, Hq, D, device="cuda", dtype=torch.bfloat16),
             torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16),
             torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16),
             torch.empty(B, S, Hq, D, device="cuda", dtype=torch.bfloat16)) for _ in range(nsets)]
    cfg = fa4.mha_config(sets[0][0], sets[0][1], sets[0][2], causal=causal, config=words or None)
    tiles = config_tiles(cfg, B, Hq, S)
    ws = [torch.zeros(tiles * NSLOTS * 8, dtype=torch.uint8, device="cuda") for _ in range(3)]
    tl = (words + " timeline=1").strip()

    def call(i, w):
        q, k, v, o = sets[i % nsets]
        fa4.mha_fwd(q, k, v, causal=causal, config=tl, out=o, num_splits=1, workspace=w)

    for i in range(nsets):
        call(i, ws[0])
    torch.cuda.synchronize()
    torch.cuda._sleep(200 * 2000)  # ~200 us: the host queues the run before the GPU reaches it
    for i in range(8):
        call(i, ws[0])
    call(8, ws[1])
    call(9, ws[2])
    for i in range(10, 12):
        call(i, ws[0])
    torch.cuda.synchronize()
    recs = [decode(bytes(w[:tiles * NSLOTS * 8].cpu().numpy().tobytes()), tiles) for w in ws[1:]]
    rate = summarize(recs[0])["ns_per_cycle"]
    lines = seam_lines(cta_bounds(recs[0], rate), cta_bounds(recs[1], rate))
    # a call's time under graphs, the backends taking turns (short_shapes.py's method)
    fns = [("timeline", lambda q, k, v, o: fa4.mha_fwd(q, k, v, causal=causal, config=tl, out=o, num_splits=1,
                                                        workspace=ws[0])),
           ("plain", lambda q, k, v, o: fa4.mha_fwd(q, k, v, causal=causal, config=words or None, out=o)),
           ("cudnn", lambda q, k, v, o, f=sdpa(SDPBackend.CUDNN_ATTENTION, causal, Hkv != Hq): f(q, k, v, o))]
    if Hkv == Hq:
        fns.append(("stream", lambda q, k, v, o: torch.addcmul(q, k, v, out=o)))
    calls = 20
    graphs = [capture(lambda x, fn=fn: fn(*x), [sets[i % nsets] for i in range(calls)]) for _, fn in fns]
    ms = time_interleaved([g.replay for g in graphs], [()], 15, warmup=2, hold_us=100)
    us = {n: m / calls * 1e3 for (n, _), m in zip(fns, ms)}
    lines.append("#   a call under graphs (us): " + ", ".join("%s %.1f" % kv for kv in us.items()) +
                 "; %.1f MB a call%s" % (nbytes / 1e6, ", the stream at %.2f TB/s" % (nbytes / us["stream"] / 1e6)
                                         if "stream" in us else ""))
    del graphs, sets, ws
    torch.cuda.empty_cache()
    return lines


def report(name, s):
    """Lines for one summary."""
    u = s["unit"]
    lines = ["## %s: %d tiles on %d CTAs (median %s tiles a CTA)%s" % (
        name, s["tiles"], s["ctas"], s["tiles_per_cta"],
        ", %.3f ns/cycle" % s["ns_per_cycle"] if s["ns_per_cycle"] else "")]
    if "span_ns" in s:
        lines.append("#   span %.1f us (first C0 tile top -> last C0 stored); C0 busy %.0f%% of span x CTAs; "
                     "tail %.1f us (last CTA done after the median one)" % (
                         s["span_ns"] / 1e3, 100 * (s["busy_share"] or 0), s["tail_ns"] / 1e3))
    lines.append("%-42s %10s %10s %10s %6s" % ("phase (%s)" % u, "median", "p10", "p90", "n"))
    for k, (med, p10, p90, n) in s["phases"].items():
        lines.append("%-42s %10.0f %10.0f %10.0f %6d" % (k, med, p10, p90, n))
    lines += tail_lines(s.get("ctas_table", []))
    if s.get("late_tiles"):
        lines.append("#   tiles begun after the first CTA ended: %d, median %.0f ns a tile (the others %.0f)" %
                     s["late_tiles"])
    return lines


SHAPES = [  # name, B, Hq, Hkv, S, D, causal
    ("B64 H8 S256 d128 full", 64, 8, 8, 256, 128, False),
    ("B128 H16 S128 d64 causal", 128, 16, 16, 128, 64, True),
    ("B64 H16 S256 d64 causal", 64, 16, 16, 256, 64, True),  # diag half: measured -6.3%, modelled wrong (issue 31)
    ("B64 H16 S256 d128 causal", 64, 16, 16, 256, 128, True),  # the grid's slowest against cuDNN (0.97x, run 58)
    ("B16 H32 S1024 d128 causal", 16, 32, 32, 1024, 128, True),
    ("B64 H8 S256 d256 full", 64, 8, 8, 256, 256, False),
    ("B128 H16 S128 d128 full", 128, 16, 16, 128, 128, False),
]


def main():
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import fa4

    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--json")
    ap.add_argument("--shapes", default="", help="substring filter on shape names ('|' between alternatives)")
    ap.add_argument("--variants", default="default;persistent=0",
                    help="';'-separated config words (commas between words) added to timeline=1; 'default' = none")
    ap.add_argument("--steady", action="store_true", help="also time two calls among back-to-back calls (see the doc)")
    args = ap.parse_args()
    variants = [v.strip().replace(",", " ") for v in args.variants.split(";") if v.strip()]
    lines = ["# fa4gen sm90a MHA forward: phase timeline of short tiles (config timeline=1), %s, torch %s" % (
        torch.cuda.get_device_name(), torch.__version__)]
    print(lines[0], flush=True)
    rows = []
    from short_shapes import name_matches
    shapes = [sh for sh in SHAPES if name_matches(sh[0], args.shapes)]
    # every kernel first, compiled in parallel threads into the disk cache (fa4.compile), so no call waits on ptxas
    texts = set()
    for name, B, Hq, Hkv, S, D, causal in shapes:
        q = torch.empty(B, S, Hq, D, device="cuda", dtype=torch.bfloat16)
        k = torch.empty(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)
        for var in variants:
            words = "" if var == "default" else var
            try:
                cfg = fa4.mha_config(q, k, k, causal=causal, config=words or None)
                texts.update((cfg, cfg.replace(" mask=", " timeline=1 mask=")))
            except Exception:
                pass  # the loop below says why
        del q, k
    from concurrent.futures import ThreadPoolExecutor

    def build(text):
        try:
            fa4.compile(text)
        except Exception:
            pass

    with ThreadPoolExecutor(max_workers=max(1, min(16, (os.cpu_count() or 2) - 1))) as pool:
        list(pool.map(build, sorted(texts)))
    for name, B, Hq, Hkv, S, D, causal in shapes:
        torch.manual_seed(0)
        q = torch.randn(B, S, Hq, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)
        o = torch.empty_like(q)
        tiles_max = math.ceil(S / 64) * Hq * B  # bm >= 64: records for at most this many tiles
        ws = torch.zeros(tiles_max * NSLOTS * 8, dtype=torch.uint8, device="cuda")
        for var in variants:
            words = "" if var == "default" else var
            try:
                # the stamps record tiles by index, whichever CTA ran them: a dynamic default (the tile counter)
                # keeps it under timeline=1
                cfg = fa4.mha_config(q, k, v, causal=causal, config=words or None)
                tiles = config_tiles(cfg, B, Hq, S)
                tl = (words + " timeline=1").strip()
                call_tl = lambda: fa4.mha_fwd(q, k, v, causal=causal, config=tl, out=o, num_splits=1, workspace=ws)
                call = lambda: fa4.mha_fwd(q, k, v, causal=causal, config=words or None, out=o)
                call_tl()
                call()
                torch.cuda.synchronize()
                times = {}
                for label, fn in (("plain", call), ("timeline", call_tl), ("plain2", call)):
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    for _ in range(20):
                        fn()
                    b.record()
                    b.synchronize()
                    times[label] = a.elapsed_time(b) / 20 * 1e3
                ws.zero_()
                call_tl()
                torch.cuda.synchronize()
                recs = decode(bytes(ws[:tiles * NSLOTS * 8].cpu().numpy().tobytes()), tiles)
            except Exception as e:  # a variant this shape refuses: say so, go on
                lines.append("## %s [%s]: n/a: %s" % (name, var, str(e)[:200]))
                print(lines[-1], flush=True)
                continue
            s = summarize(recs)
            bad = check([r for r in recs if r["c_qk0"]])
            out = report("%s [%s] %s" % (name, var, cfg), s)
            out.append("#   eager, 20 calls: %.1f us a call plain, %.1f with the stamps, %.1f plain again%s" % (
                times["plain"], times["timeline"], times["plain2"],
                "" if not bad else "; %d record problems, first: %s" % (len(bad), bad[0])))
            if args.steady:
                try:
                    out += steady(torch, fa4, (name, B, Hq, Hkv, S, D, causal), words)
                except Exception as e:
                    out.append("#   steady: n/a: %s" % str(e)[:200])
            lines += out
            print("\n".join(out), flush=True)
            s.pop("ctas_table", None)  # summarized in the report's lines; not kept in the json
            rows.append({"shape": name, "variant": var, "config": cfg, "summary": s, "eager_us": times,
                         "problems": bad[:10]})
        q = k = v = o = ws = None  # freed before the next shape allocates
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
