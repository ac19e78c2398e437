"""short_power.py - the SM clock and the board power each backend runs at, on its own, for a few short shapes.

    python3 bench/short_power.py [--out FILE] [--shapes "B64 H8 S256 d128 full|..." | --all] [--seconds 2] [--rounds 2]

short_shapes.py times fa4 and cuDNN taking turns, so both run at the clock their mix allows. Under a power cap (the
H200's clock events read "SW power cap" in those runs) a kernel that draws more power per second lowers the clock it
runs at. Here each backend replays its CUDA graph (the same calls and rotated inputs as short_shapes.py) alone for
--seconds, while nvidia-smi samples the SM clock and the power every 50 ms; per backend: the time a call under that
sustained load, the median clock and power, and the energy a call (power x time). Backends alternate --rounds times,
so a slow drift in temperature shows as a difference between the rounds. --all: every shape of the short grid, and
a summary line of the ratios (cuDNN's time / fa4's, the last round's).
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from short_shapes import SHORT, name_matches  # noqa: E402

DEFAULT_SHAPES = "B64 H8 S256 d128 full|B64 H16 S256 d128 causal|B64 H8 S256 d256 full|B128 H16 S128 d128 full"


def sample_gpu():
    """Start nvidia-smi sampling clocks.sm and power.draw every 50 ms; returns the process (its stdout: csv)."""
    return subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                             "-lms", "50"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def run_alone(torch, graph, calls, seconds):
    """Replay graph for about `seconds` with nvidia-smi sampling; returns (us a call, MHz median, W median)."""
    graph.replay()
    torch.cuda.synchronize()
    t = time.time()
    n = 0
    while time.time() - t < 0.3:  # how many replays fill `seconds`
        graph.replay()
        n += 1
    torch.cuda.synchronize()
    per = (time.time() - t) / n
    reps = max(3, int(seconds / per))
    mon = sample_gpu()
    time.sleep(0.2)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        graph.replay()
    b.record()
    b.synchronize()
    mon.terminate()
    out, _ = mon.communicate()
    mhz, watts = [], []
    for line in out.splitlines():
        v = [x.strip() for x in line.split(",")]
        try:
            mhz.append(float(v[0]))
            watts.append(float(v[1]))
        except (ValueError, IndexError):
            pass
    n = len(mhz)
    core = slice(n // 5, n - n // 10 or None)  # drop the ramp at the start, the idle at the end
    us = a.elapsed_time(b) / reps / calls * 1e3
    return us, statistics.median(mhz[core] or mhz or [0]), statistics.median(watts[core] or watts or [0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="shape names of short_shapes.py, '|' between them")
    ap.add_argument("--all", action="store_true", help="every shape of short_shapes.py's grid")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    import torch
    import fa4
    from benchlib import capture, gpu_state
    from bench_mha import sdpa
    from torch.nn.attention import SDPBackend

    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    lines = ["# short_power.py: each backend's graph replayed alone for %.1f s, nvidia-smi every 50 ms; %s; GPU %s" % (
        args.seconds, torch.cuda.get_device_name(), gpu_state()),
             "%-32s %-6s %5s %9s %8s %7s %9s" % ("shape", "kernel", "round", "us/call", "sm MHz", "W", "mJ/call")]
    print("\n".join(lines), flush=True)
    ratios = []
    for sh in [s for s in SHORT if args.all or name_matches(s[0], args.shapes)]:
        name, B, Hq, Hkv, S, D, causal, dt = sh
        calls = 20
        sets = []
        for _ in range(4):
            q = torch.randn(B, S, Hq, D, device="cuda", dtype=dtypes[dt])
            k = torch.randn(B, S, Hkv, D, device="cuda", dtype=dtypes[dt])
            v = torch.randn(B, S, Hkv, D, device="cuda", dtype=dtypes[dt])
            sets.append((q, k, v, torch.empty_like(q)))
        cud = sdpa(SDPBackend.CUDNN_ATTENTION, causal, Hkv != Hq)
        fns = {"cudnn": lambda q, k, v, o: cud(q, k, v, o),
               "fa4": lambda q, k, v, o: fa4.mha_fwd(q, k, v, causal=causal, out=o)}
        graphs = {n: capture(lambda x, fn=fn: fn(*x), [sets[i % len(sets)] for i in range(calls)])
                  for n, fn in fns.items()}
        for rnd in range(1, args.rounds + 1):
            last = {}
            for n in ("cudnn", "fa4"):
                us, mhz, w = run_alone(torch, graphs[n], calls, args.seconds)
                last[n] = us
                lines.append("%-32s %-6s %5d %9.2f %8.0f %7.1f %9.3f" % (name, n, rnd, us, mhz, w, w * us / 1e3))
                print(lines[-1], flush=True)
                time.sleep(0.5)
        ratios.append(last["cudnn"] / last["fa4"])
        sets = graphs = None
        torch.cuda.empty_cache()
    if ratios:
        gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        lines.append("# cuDNN / fa4 alone at the power cap: >= 1.05x on %d of %d shapes, geomean %.3f, min %.3f" % (
            sum(r >= 1.05 for r in ratios), len(ratios), gm, min(ratios)))
        print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
