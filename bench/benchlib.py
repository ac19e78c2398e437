"""benchlib.py - the timing helpers every benchmark here shares (CUDA events, medians).

time_interleaved(fns, sets, reps): the median ms of each fn, the fns taking turns within every repetition
(so clock drift hits all alike; the first fn rotates, so none always follows the same, e.g. a heavy one), inputs rotated among `sets` call by call (so L2 does not hold them: each call
reads a set other than the one the call before it read, whichever fn made it).
time_ms(fn, sets, reps): one fn's median ms and its spread (max - min).
matmul_ceiling(reps): the measured cuBLAS bf16 8192^3 matmul rate in TFLOP/s, the ceiling ratios use.
capture(fn, inputs): a CUDA graph of fn(x) for each x of inputs in turn (warmed up once on a side stream).
write_lines(path, lines): the report, one line each, when a path was given.
"""
import statistics

import torch


def _event_ms(fn, args):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn(*args)
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


def time_interleaved(fns, sets, reps, warmup=5):
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
            times[f].append(_event_ms(fns[f], sets[k % len(sets)]))
            k += 1
    return [statistics.median(t) for t in times]


def time_ms(fn, sets, reps, warmup=5):
    for i in range(warmup):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    times = [_event_ms(fn, sets[i % len(sets)]) for i in range(reps)]
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
