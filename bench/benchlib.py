"""benchlib.py - the timing helpers every benchmark here shares (CUDA events, medians).

time_interleaved(fns, sets, reps, hold_us=0): the median ms of each fn, the fns taking turns within every repetition
(so clock drift hits all alike; the first fn rotates, so none always follows the same, e.g. a heavy one), inputs rotated among `sets` call by call (so L2 does not hold them: each call
reads a set other than the one the call before it read, whichever fn made it).
time_ms(fn, sets, reps, hold_us=0): one fn's median ms and its spread (max - min).
hold_us > 0: before each timed call the stream spins that long on the GPU (torch.cuda._sleep), so the host
has queued the start event, the call and the end event before the GPU reaches them: the time is the GPU's,
without the host's submission latency (a CUDA-graph launch's ~10-25 us, which a serving loop running ahead
of the GPU hides). nvbench times kernels behind a blocking kernel for the same reason.
matmul_ceiling(reps): the measured cuBLAS bf16 8192^3 matmul rate in TFLOP/s, the ceiling ratios use.
capture(fn, inputs): a CUDA graph of fn(x) for each x of inputs in turn (warmed up once on a side stream).
write_lines(path, lines): the report, one line each, when a path was given.
gpu_state(): the GPU's SM/memory clocks, power, temperature and active clock-event reasons (nvidia-smi), or "".
"""
import statistics
import subprocess

import torch


def _event_ms(fn, args, hold_us=0):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if hold_us:
        torch.cuda._sleep(int(hold_us * 2000))  # cycles; >= hold_us at clocks up to 2 GHz
    a.record()
    fn(*args)
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


def time_interleaved(fns, sets, reps, warmup=5, hold_us=0):
    for fn in fns:
        for i in range(warmup):
            fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    times = [[] for _ in fns]
    k = 0  # per call, not per repetition: the next fn must not find this call's inputs in L2
    n = len(fns)
    for i in range(reps):
        for j in range(n):  # repetition i starts at fn i % n: each fn follows each other one as often
            f = (i + j) % n
            times[f].append(_event_ms(fns[f], sets[k % len(sets)], hold_us))
            k += 1
    return [statistics.median(t) for t in times]


def time_ms(fn, sets, reps, warmup=5, hold_us=0):
    for i in range(warmup):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    times = [_event_ms(fn, sets[i % len(sets)], hold_us) for i in range(reps)]
    return statistics.median(times), max(times) - min(times)


def matmul_ceiling(reps=10):
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms, _ = time_ms(lambda a, b: torch.matmul(a, b), [(x, y)], reps)
    return 2 * 8192 ** 3 / ms / 1e9


def capture(fn, inputs):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(inputs[0])
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for x in inputs:
            fn(x)
    return g


def write_lines(path, lines):
    if path:
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")


def gpu_state():
    """One line of the GPU's state now: a shape timed right after heavy work runs at lower clocks (power or
    thermal slowdown), so the reports log it beside each shape."""
    for reasons in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):  # newer, older drivers
        q = "clocks.sm,clocks.mem,power.draw,temperature.gpu," + reasons
        try:
            r = subprocess.run(["nvidia-smi", "--query-gpu=" + q, "--format=csv,noheader,nounits"],
                               capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        v = [x.strip() for x in r.stdout.split("\n")[0].split(",")]
        if r.returncode == 0 and len(v) == 5:
            return "sm %s MHz, mem %s MHz, %s W, %s C, clock events %s" % tuple(v)
    return ""
