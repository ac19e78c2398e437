"""host_cost.py - the host time of one attention call on a cached kernel, fa4 beside SDPA (issue 27 item 4).

    python3 bench/host_cost.py [--calls 128] [--rounds 25] [--json FILE] [--out FILE]

Method (bench/NOTES.md "host cost"): launches of tiny kernels back to back can be bound by the GPU -- once the
launch queue is full, each call waits for a kernel to finish. So every round first holds the GPU with a spin kernel
(torch.cuda._sleep, as bench/benchlib.py's hold_us), records an event behind it, then times `calls` calls (fewer
than the queue holds; fewer still for variants that launch several kernels) with perf_counter, then synchronises,
untimed. A round counts only if the event was still pending when the last call returned (the GPU was still in its
hold: no call can have waited for it); otherwise it is run again with a longer hold, then with fewer calls. Host
microseconds per call: median (min) of `rounds` counted rounds. The GPU work is tiny (q, k, v [1, 128, 8, 64] bf16,
causal; a decode step: 8 sequences x 1 token, 32/8 heads, d64, a 1024-row cache).
Variants:
  sdpa                         torch.nn.functional.scaled_dot_product_attention on [B, H, S, D] (is_causal)
  fa4.flash_attn_func          the eager Python call (FlashAttention API)
  fa4.mha_fwd                  the same through fa4's own name; then with out= and stream= given
  fa4_torch.flash_attn_func    the torch wrapper in eager mode: fa4 called directly (fa4_torch._direct)
  torch.ops.fa4.flash_attn     the custom op itself: torch.library's dispatch on top of the same call
  ctypes fa4_mha_fwd           the C call alone on a prepared fa4_mha_args, through ctypes
  ctypes floor                 the same launch recorded from that call and replayed bare (build/bench/
                               liblaunchfloor.so, bench/launch_floor.c), through ctypes: the C call's floor
  kvcache decode               flash_attn_with_kvcache: the append kernel and the attention (per-row lengths)
  kvcache decode floor         its two fa4 launches replayed bare (ctypes)
  kvcache decode, torch append the way it appended before the kv-append kernel (torch index ops), for A/B
  fa4.kv_append                the append alone; fa4_torch.flash_attn_with_kvcache (eager: directly)
and the parts of the Python fast path by themselves (key, allocation, data_ptr, stream, struct copy).
Issue 27's targets: the eager Python call <= 15 us, the C call fa4_mha_fwd on a cached kernel <= 3 us (here with
ctypes' ~0.5-1 us on top; bench/host_cost.c times it from C), SDPA in the same run.
--c-bench build/bench/host_cost runs the C bench afterwards (its own process, the same method; its lines go to
--c-out) and the last lines are one table of both: the eager Python call beside SDPA, the op's dispatch, the C call
beside its bare launch, the kvcache decode step beside its bare launches, with each target and whether it is met.
"""
import argparse
import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import time

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
import fa4  # noqa: E402
import fa4_torch  # noqa: E402

HOLD_MIN_US = 2000  # a round's hold: at least this, else 3x the round's calls at their unheld pace
CYCLES_PER_US = 2000  # torch.cuda._sleep counts clock cycles: 2 GHz or less makes the hold at least as long
HOLD_MAX_US = 250000
RERUNS_MAX = 16
CASE_MAX_S = 20  # a case that has not finished its rounds by then is reported as such, not waited for


def per_call_us(fn, calls, rounds):
    """(median, min) host us per call of fn behind a held GPU, the calls a counted round made, rounds rerun."""
    for _ in range(5):  # first calls pay one-time costs (cuDNN's set-up, a JIT, the op's first dispatch)
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        fn()
    warm = (time.perf_counter() - t0) / 20 * 1e6
    torch.cuda.synchronize()
    n, t, reruns = calls, [], 0
    hold = int(min(max(HOLD_MIN_US, 3 * n * warm), HOLD_MAX_US) * CYCLES_PER_US)
    ev = torch.cuda.Event()
    start = time.perf_counter()
    while len(t) < rounds:
        if time.perf_counter() - start > CASE_MAX_S:
            raise RuntimeError("gave up after %d s: %d of %d rounds counted, %d rerun (unheld pace %.1f us a call, "
                               "%d calls, hold %d cycles)" % (CASE_MAX_S, len(t), rounds, reruns, warm, n, hold))
        torch.cuda.synchronize()
        torch.cuda._sleep(hold)
        ev.record()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        held = not ev.query()
        torch.cuda.synchronize()
        if not held:  # the GPU left its hold before the host finished its calls: a call may have waited for it
            reruns += 1  # (a hold too short, or a launch queue that holds fewer calls): both halves
            if reruns > RERUNS_MAX:
                raise RuntimeError("no round stayed ahead of the GPU (%d calls, hold %d cycles)" % (n, hold))
            n, hold = max(8, n // 2), min(hold * 2, HOLD_MAX_US * CYCLES_PER_US)
            continue
        t.append((t1 - t0) / n * 1e6)
    return statistics.median(t), min(t), n, reruns


class Floor:
    """build/bench/liblaunchfloor.so: the launches of fa4's context recorded from one call, replayed bare."""

    def __init__(self):
        path = os.path.join(ROOT, "build", "bench", "liblaunchfloor.so")
        self.lib = ctypes.CDLL(path) if os.path.exists(path) else None
        if self.lib:
            self.lib.lf_begin.argtypes = self.lib.lf_end.argtypes = [ctypes.c_void_p]
            self.lib.lf_replay.argtypes = [ctypes.c_void_p]
            self.lib.lf_describe.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

    def record(self, fn):
        """Records the fa4 launches of one fn(); returns their description (None without the library)."""
        if not self.lib:
            return None
        ctx = fa4.context(0)
        if self.lib.lf_begin(ctx) != 0:
            raise RuntimeError("lf_begin failed")
        try:
            fn()
        finally:
            n = self.lib.lf_end(ctx)
        torch.cuda.synchronize()
        if n < 1:
            raise RuntimeError("recorded %d launches" % n)
        buf = ctypes.create_string_buffer(512)
        self.lib.lf_describe(buf, 512)
        return buf.value.decode()

    def replay_fn(self, handle):
        replay = self.lib.lf_replay
        return lambda: replay(handle)


_C_LINE = re.compile(r"^(\S.*?)\s+(-?\d+) ns per call \(median")


def c_bench(path, out):
    """Runs bench/host_cost.c's real-driver bench (its own process); {case: ns per call} of its timed lines, with
    "rc" and "gpu". Its output goes to out (when given)."""
    p = subprocess.run([path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if out:
        with open(out, "w") as f:
            f.write(p.stdout)
    found = {"rc": p.returncode}
    for line in p.stdout.splitlines():
        m = _C_LINE.match(line)
        if m:
            found[m.group(1)] = float(m.group(2))
    if p.returncode:
        print("host_cost.py: %s exited %d; its last lines:\n%s" % (path, p.returncode,
                                                                   "\n".join(p.stdout.splitlines()[-5:])))
    return found


def table(r, c, gpu):
    """One table of the issue's comparisons: Python eager vs SDPA, the op, the C call vs its bare launch."""
    def us(name):
        return r[name]["median_us"] if name in r else float("nan")

    def cus(name):
        return c[name] / 1e3 if c and name in c else float("nan")

    def verdict(x, limit):
        return "" if x != x else ("met" if x <= limit else "MISSED")
    rows = []
    sd = us("sdpa")
    e = us("fa4.flash_attn_func")
    rows.append(("eager fa4.flash_attn_func", e, "sdpa %.2f (x%.2f)" % (sd, e / sd if sd else float("nan")),
                 "<= 15", verdict(e, 15)))
    rows.append(("eager fa4.mha_fwd", us("fa4.mha_fwd"), "", "", ""))
    rows.append(("fa4_torch.flash_attn_func (eager)", us("fa4_torch.flash_attn_func (eager: direct)"),
                 "through the op %.2f" % us("torch.ops.fa4.flash_attn (the op's dispatch)"), "", ""))
    for case, label in (("mha decode", "C fa4_mha_fwd decode"), ("mha tiny prefill", "C fa4_mha_fwd tiny prefill"),
                        ("kv append (decode step)", "C fa4_kv_append decode step")):
        x, fl = cus(case + ": fa4 call"), cus(case + ": floor (same launches, bare)")
        tgt = "<= 3" if case.startswith("mha") else ""
        rows.append((label, x, "bare launch %.2f, fa4's own %.2f" % (fl, x - fl), tgt,
                     verdict(x, 3) if tgt else ""))
    x, fl = us("ctypes fa4_mha_fwd (C call)"), us("ctypes floor: its launch replayed bare")
    rows.append(("ctypes fa4_mha_fwd (tiny prefill)", x, "ctypes bare launch %.2f, fa4's own %.2f" % (fl, x - fl),
                 "", ""))
    x = us("kvcache decode (append + attn)")
    rows.append(("eager flash_attn_with_kvcache step", x, "2 launches bare %.2f; torch index append %.2f" % (
        us("kvcache decode floor: its 2 launches bare"), us("kvcache decode, torch index append (before)")), "", ""))
    out = ["## host cost table", "# %s: host us per call behind a held GPU (median of counted rounds); C rows from "
           "build/bench/host_cost (no ctypes)%s" % (gpu, "" if c else " -- not run (--c-bench)"),
           "%-36s %9s  %-44s %-6s %s" % ("call", "us/call", "beside it (same run)", "target", "")]
    for name, x, beside, tgt, v in rows:
        out.append("%-36s %9.2f  %-44s %-6s %s" % (name, x, beside, tgt, v))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=128, help="calls a round (a variant of several launches: fewer)")
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--json")
    ap.add_argument("--out")
    ap.add_argument("--c-bench", help="build/bench/host_cost: run it after, and put its numbers in the table")
    ap.add_argument("--c-out", help="where the C bench's own lines go")
    o = ap.parse_args()
    dev = torch.device("cuda", 0)
    q, k, v = (torch.randn(1, 128, 8, 64, device=dev, dtype=torch.bfloat16) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    out = torch.empty_like(q)
    handle = torch.cuda.current_stream().cuda_stream
    F = torch.nn.functional.scaled_dot_product_attention

    # the C call alone: the args mha_fwd built, called again and again through ctypes
    a = fa4._args(q, k, v, out, None, True, None, None, None)
    lib, ctx = fa4._load(), fa4.context(0)
    c_fn = lib.fa4_mha_fwd

    # a decode step: 8 sequences, 1 new token, 32/8 heads, d64, a cache of 1024 rows, per-row lengths
    kc, vc = (torch.randn(8, 1024, 8, 64, device=dev, dtype=torch.bfloat16) for _ in range(2))
    lens = torch.full((8,), 500, dtype=torch.int32, device=dev)
    qd = torch.randn(8, 1, 32, 64, device=dev, dtype=torch.bfloat16)
    kn = torch.randn(8, 1, 8, 64, device=dev, dtype=torch.bfloat16)
    lens_out = torch.empty(8, dtype=torch.int32, device=dev)
    ar1 = torch.arange(1, device=dev)
    rows = torch.arange(8, device=dev)

    def decode():
        return fa4.flash_attn_with_kvcache(qd, kc, vc, kn, kn, lens, causal=True)

    def decode_torch_append():  # the append as flash_attn_with_kvcache made it before the kv-append kernel
        pos = (lens[:, None] + ar1[None, :]).clamp_(0, 1023)
        r = rows[:, None].expand(pos.shape)
        kc[r, pos] = kn
        vc[r, pos] = kn
        bt = fa4._dense_table(torch, 8, 4, 8, (dev.type, 0), None)
        return fa4.mha_fwd(qd, fa4._View(kc, (32, 256, 8, 64), (256 * 512, 512, 64, 1)),
                           fa4._View(vc, (32, 256, 8, 64), (256 * 512, 512, 64, 1)), causal=True, block_table=bt,
                           seqlen_k=lens + 1)

    floor = Floor()
    variants = [
        ("sdpa", lambda: F(qt, kt, vt, is_causal=True), 1),
        ("fa4.flash_attn_func", lambda: fa4.flash_attn_func(q, k, v, causal=True), 1),
        ("fa4.mha_fwd", lambda: fa4.mha_fwd(q, k, v, causal=True), 1),
        ("fa4.mha_fwd out=, stream=", lambda: fa4.mha_fwd(q, k, v, causal=True, out=out, stream=handle), 1),
        ("fa4_torch.flash_attn_func (eager: direct)", lambda: fa4_torch.flash_attn_func(q, k, v, causal=True), 1),
        ("torch.ops.fa4.flash_attn (the op's dispatch)",
         lambda: torch.ops.fa4.flash_attn(q, k, v, None, True, -1, -1, 0.0, None), 1),
        ("ctypes fa4_mha_fwd (C call)", lambda: c_fn(ctx, ctypes.byref(a), handle), 1),
        ("ctypes floor: its launch replayed bare", "floor", lambda: c_fn(ctx, ctypes.byref(a), handle)),
        ("kvcache decode (append + attn)", decode, 2),
        ("kvcache decode floor: its 2 launches bare", "floor", decode),
        ("kvcache decode, torch index append (before)", decode_torch_append, 8),
        ("fa4.kv_append (decode step)", lambda: fa4.kv_append(kc, vc, kn, kn, lens, seqlens_out=lens_out), 1),
        ("fa4_torch.flash_attn_with_kvcache (eager)",
         lambda: fa4_torch.flash_attn_with_kvcache(qd, kc, vc, kn, kn, cache_seqlens=lens, causal=True), 2),
        ("sdpa again (drift check)", lambda: F(qt, kt, vt, is_causal=True), 1),
    ]
    key = (q.shape, q.stride(), q.dtype, q.device)
    tpl = bytes(a)
    parts = [
        ("part: signature key (3 tensors)", lambda: (q.shape, q.stride(), q.dtype, q.device, k.shape, k.stride(),
                                                      k.dtype, k.device, v.shape, v.stride(), v.dtype, v.device)),
        ("part: dict lookup of a key", lambda: fa4._fast.get(key)),
        ("part: torch.empty_like(q)", lambda: torch.empty_like(q)),
        ("part: 3 x data_ptr()", lambda: (q.data_ptr(), k.data_ptr(), v.data_ptr())),
        ("part: raw current stream", lambda: fa4._raw_stream(torch, 0)),
        ("part: torch.cuda.current_stream()", lambda: torch.cuda.current_stream().cuda_stream),
        ("part: args struct copy", lambda: fa4._MhaArgs.from_buffer_copy(tpl)),
        ("part: fa4_torch._direct (q, k, v)", lambda: fa4_torch._direct(q, k, v, None)),
    ]
    gpu = torch.cuda.get_device_name()
    lines = ["# bench/host_cost.py: host us per call behind a held GPU (torch.cuda._sleep, then %d calls a round, fewer "
             "for variants of several launches), median (min) of %d counted rounds; %s; torch %s; fa4 %s"
             % (o.calls, o.rounds, gpu, torch.__version__, fa4.version()),
             "# shape q, k, v [1, 128, 8, 64] bf16 causal (sdpa on [1, 8, 128, 64]); decode: 8 x 1 token, 32/8 heads, "
             "d64, cache 1024 rows, per-row lengths"]
    res = {"gpu": gpu, "torch": torch.__version__, "fa4": fa4.version(), "calls": o.calls, "rounds": o.rounds,
           "method": "held GPU (torch.cuda._sleep), event-checked rounds", "results": {}}
    for name, fn, launches in variants + [(n, f, 1) for n, f in parts]:
        if fn == "floor":
            what = floor.record(launches)
            if what is None:
                lines.append("%-48s  (skipped: build/bench/liblaunchfloor.so is missing)" % name)
                print(lines[-1], flush=True)
                continue
            res["results"].setdefault("launches", {})[name] = what
            fn, launches = floor.replay_fn(handle), what.count(";") + 1
        try:
            med, lo, n, reruns = per_call_us(fn, max(8, o.calls // launches), o.rounds)
        except RuntimeError as err:  # one case that cannot be timed must not hide the others
            lines.append("%-48s  NOT TIMED: %s" % (name, err))
            print(lines[-1], flush=True)
            continue
        res["results"][name] = {"median_us": med, "min_us": lo, "calls_per_round": n, "rounds_rerun": reruns}
        lines.append("%-48s %8.2f us  (min %.2f; %d calls a round, %d rounds rerun)" % (name, med, lo, n, reruns))
        print(lines[-1], flush=True)
    r = res["results"]

    def us(name):
        return r[name]["median_us"] if name in r else float("nan")
    lines.append("# targets: eager flash_attn_func %.2f us (<= 15; sdpa %.2f); the C call %.2f us through ctypes, its "
                 "bare launch through ctypes %.2f: fa4's own %.2f us (the C bench has it without ctypes; <= 3 us "
                 "asked for the whole C call)" % (us("fa4.flash_attn_func"), us("sdpa"),
                                                  us("ctypes fa4_mha_fwd (C call)"),
                                                  us("ctypes floor: its launch replayed bare"),
                                                  us("ctypes fa4_mha_fwd (C call)")
                                                  - us("ctypes floor: its launch replayed bare")))
    lines.append("# fa4_torch.flash_attn_func eager %.2f us vs through the op %.2f us; kvcache decode %.2f us (its 2 "
                 "launches bare %.2f; with the torch index append %.2f)"
                 % (us("fa4_torch.flash_attn_func (eager: direct)"), us("torch.ops.fa4.flash_attn (the op's dispatch)"),
                    us("kvcache decode (append + attn)"), us("kvcache decode floor: its 2 launches bare"),
                    us("kvcache decode, torch index append (before)")))
    print("\n".join(lines[-2:]))
    c = c_bench(o.c_bench, o.c_out) if o.c_bench else None
    if c is not None:
        res["c_bench"] = c
    lines += table(r, c, gpu)
    print("\n".join(lines[lines.index("## host cost table"):]), flush=True)
    if o.out:
        with open(o.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    if o.json:
        with open(o.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
