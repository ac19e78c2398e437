#!/usr/bin/env python3
"""tests/sim/mb_replay.py [--fix] TABLE [PTXDIR] - replays tests/gpu/microbench.c's latency microbenchmarks under the timing
model: what would each read if the model's GPU ran it? A table value set from a microbenchmark is consistent only
when the model, replaying that microbenchmark's own PTX, reads back the measured number; a difference means the
value was defined differently from how the model charges it (e.g. a latency measured with its transfer time in
it, to which the model adds the transfer again). Prints per benchmark: the table value, what the model reads,
and with --fix the values that make the two agree (TABLE's values taken as the measurements).

--fix: rewrite TABLE with each such value replaced by the consistent one (source `derived`, the measured number and
the replay in its citation); tests/gpu/microbench.sh runs it on the table it measured.
PTXDIR: the kernels written by `microbench --emit DIR` (default build/mb-ptx; made here when missing, with gcc).
Needs build/sim/libcuda.so.1. CPU only, a few seconds. No attention kernel is involved.
"""
import ctypes
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
WGMMA_N = (16, 32, 48, 64, 80, 128)  # microbench.c's mb_wgmma_nN: the table's tc_frac_nN


def emit(ptxdir):
    """The microbenchmarks' PTX, written by `mb-emit --emit DIR` (microbench.c built with -DMB_EMIT_ONLY: no driver
    is linked or loaded, so it runs the same on a GPU host and here). Written again when microbench.c is newer."""
    src = os.path.join(ROOT, "tests/gpu/microbench.c")
    mark = os.path.join(ptxdir, "mb_softcap.ptx")
    if os.path.isfile(mark) and os.path.getmtime(mark) >= os.path.getmtime(src):
        return
    os.makedirs(ptxdir, exist_ok=True)
    exe = os.path.join(ROOT, "build", "mb-emit")
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    subprocess.run(["gcc", "-std=c11", "-D_GNU_SOURCE", "-DMB_EMIT_ONLY", "-O2", "-I" + cuda + "/include", src, "-o",
                    exe], check=True)
    subprocess.run([exe, "--emit", ptxdir], check=True)


def dynamic_shared(ptx):
    """The simulator takes shared memory as one dynamic (.extern) array; a kernel's static .shared arrays become
    offsets into it (each at its alignment) and `mov.u32 %r, NAME;` its address. Returns (PTX, bytes)."""
    lines, offs, top = [], {}, 0
    for l in ptx.splitlines():
        m = re.match(r"\s*\.shared\s+\.align\s+(\d+)\s+\.b(\d+)\s+(\w+)\[(\d+)\];", l)
        if m:
            al, bits, name, n = int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4))
            top = (top + al - 1) // al * al
            offs[name] = top
            top += bits // 8 * n
            continue
        lines.append(l)
    out = []
    for l in lines:
        m = re.match(r"(\s*)mov\.u32\s+(%r\d+),\s*(\w+);", l)
        if m and m.group(3) in offs:
            out.append("%smov.u32 %s, mb_dsmem;" % (m.group(1), m.group(2)))
            out.append("%sadd.u32 %s, %s, %d;" % (m.group(1), m.group(2), m.group(2), offs[m.group(3)]))
            continue
        if l.startswith(".visible .entry") and offs:  # (a kernel with its own .extern array has no static ones)
            out.append(".extern .shared .align 1024 .b8 mb_dsmem[];")
        out.append(l)
    return "\n".join(out) + "\n", top


def read_table(path):
    vals = {}
    for line in open(path):
        w = line.split("#")[0].split()
        if len(w) >= 3:
            vals[w[0]] = float(w[1])
    return vals


def replay(table, ptxdir):
    """What the model reads in each benchmark with this table: {key: clocks} (a child process: the simulated
    driver reads its table once)."""
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--read", table, ptxdir], capture_output=True,
                       text=True)
    got = dict((l.split()[0], float(l.split()[1])) for l in r.stdout.splitlines()
               if l.startswith(("tma_lat", "mbar_wake", "cpa_sm_bw", "softcap_clk_pass", "idiv_clk", "tc_frac_n", "st_")))
    tuples = [l.split() for l in r.stdout.splitlines()
              if l.startswith(("wgmma_scale_", "wgmma_beside", "wgmma_pair", "wgmma_group", "share_", "softmax", "wgmma_issue"))]
    if len(got) != 7 + len(WGMMA_N):
        sys.exit("mb_replay: the replay failed: %s" % (r.stdout + r.stderr)[-400:])
    for w in tuples:  # wgmma_scale_T (drain, scale), wgmma_beside (idle, 1, 2, 4, 16 chains), wgmma_pair, wgmma_group,
        # share_fma / share_mufu (warps 0-7's ends): clocks
        got[w[0]] = tuple(float(x) for x in w[1:])
    return got


def with_values(table, values, out):
    text = []
    for line in open(table):
        w = line.split()
        if w and w[0] in values:
            line = values[w[0]] if isinstance(values[w[0]], str) else "%-13s %.1f derived (replay)\n" % (w[0], values[w[0]])
        text.append(line)
    open(out, "w").write("".join(text))


def main():
    argv = sys.argv[1:]
    if argv and argv[0] == "--read":
        return read_benchmarks(os.path.abspath(argv[1]), argv[2])
    fix = bool(argv) and argv[0] == "--fix"
    argv = argv[1:] if fix else argv
    if not argv:
        print(__doc__)
        return 2
    table = os.path.abspath(argv[0])
    ptxdir = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(ROOT, "build", "mb-ptx"))
    emit(ptxdir)
    have = read_table(table)
    if not fix:  # what the model reads with the table as it is
        got = replay(table, ptxdir)
        for key, bench in (("mbar_wake", "mb_mbar_rt"), ("tma_lat", "mb_tma_lat"), ("cpa_sm_bw", "mb_gather")):
            print("%-10s %-11s table %8.1f  model reads %8.1f" % (key, bench, have[key], got[key]))
        print("%-10s %-11s model reads %8.1f clocks per pass (the GPU's: microbench.txt's 'probe softcap' line)" %
              ("softcap", "mb_softcap", got["softcap_clk_pass"]))
        # a table older than the probe has no idiv_clk: the model then derives it (timing.c), shown as "-"
        print("%-10s %-11s table %8s  model reads %8.2f" % ("idiv_clk", "mb_idiv", "%.2f" % have["idiv_clk"] if "idiv_clk" in
                                                               have else "-", got["idiv_clk"]))
        for n in WGMMA_N:
            key = "tc_frac_n%d" % n
            # a table measured before the narrow-N probes has no tc_frac_nN: the model then takes 1 (timing.c)
            print("%-10s %-11s table %8.3f  model reads %8.3f" % (key, "mb_wgmma_n%d" % n, have.get(key, 1.0), got[key]))
        # the stores: the GPU's clocks a warp instruction are 8 x st_line (fragment) and 128 / st_bw (one line)
        line, bw = have.get("st_line", 1.0), have.get("st_bw", 128.0)
        print("%-10s %-11s table %8.2f  model reads %8.2f clk/ins" % ("st_line", "mb_st_frag", 8 * line, got["st_frag_clk"]))
        print("%-10s %-11s table %8.2f  model reads %8.2f clk/ins" % ("st_bw", "mb_st_line", 128 / bw, got["st_line_clk"]))
        for thr in (128, 256):
            d, sc = got["wgmma_scale_%d" % thr]
            print("%-10s %-11s model reads %8.1f clk/iter, %.1f with the FMULs (+%.1f; %d threads; the GPU's: microbench.txt's "
                  "'probe wgmma_scale' lines)" % ("rescale", "mb_wgmma_scale", d, sc, sc - d, thr))
        print("%-10s %-11s model reads %8.1f and %.1f clk a round (warpgroups 0 and 1; the GPU's: the 'probe wgmma_pair' "
              "line)" % ("pair", "mb_wgmma_pair", got["wgmma_pair"][0], got["wgmma_pair"][1]))
        print("%-10s %-11s model reads %s clk an iteration at N 16, 64, 128, 256 (the GPU's: the 'probe wgmma_group' line)"
              % ("group", "mb_wgmma_drain", " ".join("%.1f" % x for x in got["wgmma_group"])))
        for k in ("share_fma", "share_mufu"):
            print("%-10s %-11s model reads warps 0-7 ending at %s clk (the GPU's: the 'probe %s' line)"
                  % ("share", "mb_" + k, " ".join("%.0f" % x for x in got[k]), k))
        print("%-10s %-11s model reads %.1f and %.1f clk a pass (one warpgroup, two; the GPU's: the 'probe softmax' line)"
              % ("softmax", "mb_softmax", got["softmax"][0], got["softmax"][1]))
        print("%-10s %-11s model reads %.1f clk a softmax pass beside wgmmas, %.1f an iteration of them beside it (the GPU's: "
              "the 'probe softmax_besd' line)" % ("softmax", "mb_softmax_beside", got["softmax_beside"][0],
                                                  got["softmax_beside"][1]))
        print("%-10s %-11s model reads %.1f clk to issue a QK-sized group beside the other warpgroup's, %.1f to its end (the "
              "GPU's: the 'probe wgmma_issue' line)" % ("issue", "mb_wgmma_issue", got["wgmma_issue"][0], got["wgmma_issue"][1]))
        alone, c1, c2, c4, c16 = got["wgmma_beside"]
        print("%-10s %-11s model reads %8.1f clk/iter alone; beside 1, 2, 4, 16 FMUL chains a warp %.3fx %.3fx %.3fx %.3fx "
              "(the GPU's: the 'probe wgmma_beside' lines)" % ("beside", "mb_wgmma_beside", alone, c1 / alone, c2 / alone,
                                                                c4 / alone, c16 / alone))
        return 0
    # mbar_wake first: the ping-pong has no TMA in it. The TMA loop waits on an mbarrier, so its latency is
    # solved with the consistent wake in place, by the secant method (the loop's time is nearly linear in it)
    got = replay(table, ptxdir)
    new = {"mbar_wake": have["mbar_wake"] - (got["mbar_wake"] - have["mbar_wake"])}
    read = {"mbar_wake": got["mbar_wake"]}
    with tempfile.TemporaryDirectory() as d:
        t2 = os.path.join(d, "t.tbl")
        x0, y0 = have["tma_lat"], None
        x = x0
        for _ in range(6):
            new["tma_lat"] = x
            with_values(table, new, t2)
            y = replay(t2, ptxdir)["tma_lat"]
            if y0 is None:
                read["tma_lat"] = y  # with the measured latency: what the table as given makes the model read
            if abs(y - have["tma_lat"]) < 0.5:
                break
            slope = (y - y0) / (x - x0) if y0 is not None and x != x0 else 1.0
            x0, y0 = x, y
            x = x - (y - have["tma_lat"]) / slope
        new["tma_lat"] = x
    bench = {"tma_lat": "mb_tma_lat", "mbar_wake": "mb_mbar_rt"}
    for key in ("mbar_wake", "tma_lat"):
        print("%-10s %-11s table %8.1f  model reads %8.1f  consistent value %8.1f" %
              (key, bench[key], have[key], read[key], new[key]))
    if fix:
        lines = {}
        for key in new:
            if new[key] <= 0:
                sys.exit("mb_replay: %s would be %.1f: the model charges that loop more than it measured" % (key, new[key]))
            lines[key] = ("%-13s %-6.1f derived   microbench %s measured %.1f; the model replaying its PTX (tests/sim/"
                          "mb_replay.py) read %.1f, the loop's other charges added again; %.1f makes it read the measured value\n"
                          % (key, new[key], bench[key], have[key], read[key], new[key]))
        with_values(table, lines, table)
        print("mb_replay: %s rewritten" % table)
    return 0


def read_benchmarks(table, ptxdir):
    os.environ.update(FA4SIM_TIMING=table, FA4SIM_CC="90", FA4SIM_TIMING_SAMPLES="1")
    cu = ctypes.CDLL(os.path.join(ROOT, "build", "sim", "libcuda.so.1"))
    ck = lambda r, what: r == 0 or sys.exit("mb_replay: %s failed: %d" % (what, r))
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    ck(cu.cuInit(0), "cuInit")
    ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    out, src = ctypes.c_uint64(), ctypes.c_uint64()
    ck(cu.cuMemAlloc_v2(ctypes.byref(out), ctypes.c_size_t(4096)), "cuMemAlloc")
    ck(cu.cuMemAlloc_v2(ctypes.byref(src), ctypes.c_size_t(4 << 20)), "cuMemAlloc")

    def run(name, params, block, dyn=0):
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        ptx, smem = dynamic_shared(open(os.path.join(ptxdir, name + ".ptx")).read())
        text = ptx.encode() + b"\0"
        ck(cu.cuModuleLoadDataEx(ctypes.byref(mod), ctypes.c_char_p(text), 0, None, None), "load " + name)
        ck(cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()), "function " + name)
        keep = [ctypes.c_uint64(out.value)] + [t(p) for t, p in params]
        args = (ctypes.c_void_p * len(keep))(*[ctypes.cast(ctypes.byref(k), ctypes.c_void_p) for k in keep])
        if smem + dyn > 48 * 1024:  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8, as microbench.c sets it
            ck(cu.cuFuncSetAttribute(fn, 8, smem + dyn), "smem attribute " + name)
        ck(cu.cuLaunchKernel(fn, 1, 1, 1, block, 1, 1, smem + dyn, None, args, None), "launch " + name)
        ck(cu.cuCtxSynchronize(), "sync " + name)
        h = (ctypes.c_uint64 * 2)()
        ck(cu.cuMemcpyDtoH_v2(h, out, ctypes.c_size_t(16)), "copy")
        return h[0]

    # the microbenchmarks' own launches (tests/gpu/microbench.c main): grid 1, the same parameters and arithmetic
    tn = 512
    u32, u64 = ctypes.c_uint32, ctypes.c_uint64
    tma = run("mb_tma_lat", [(u64, src.value), (u32, tn), (u32, 4 << 20), (u32, 1 << 20)], 128) / tn
    mn = 2000
    mbar = run("mb_mbar_rt", [(u32, mn)], 64) / mn / 2
    print("tma_lat %.3f\nmbar_wake %.3f" % (tma, mbar))
    # the cp.async gather (one SM; the same index table as microbench.c) and the soft-cap probe
    seed, ih = 12345, []
    for _ in range(4096):
        seed = (seed * 1664525 + 1013904223) & 0xffffffff
        ih.append((seed >> 8) % 8192)
    idx = ctypes.c_uint64()
    ck(cu.cuMemAlloc_v2(ctypes.byref(idx), ctypes.c_size_t(4 * 4096)), "cuMemAlloc")
    host = (ctypes.c_uint32 * 4096)(*ih)
    ck(cu.cuMemcpyHtoD_v2(idx, host, ctypes.c_size_t(4 * 4096)), "copy idx")
    big = ctypes.c_uint64()
    ck(cu.cuMemAlloc_v2(ctypes.byref(big), ctypes.c_size_t(8192 * 1152)), "cuMemAlloc")
    # the GPU runs 512 blocks, where fill and drain vanish; here two short runs, the rate from their difference
    clk = [run("mb_gather", [(u64, big.value), (u64, idx.value), (u32, gn)], 128, 2 * 64 * 1152) for gn in (4, 12)]
    print("cpa_sm_bw %.3f" % (8 * 64 * 1152 / (clk[1] - clk[0])))
    sn = 1
    print("softcap_clk_pass %.1f" % (run("mb_softcap", [(u32, sn)], 256) / sn))
    print("idiv_clk %.2f" % (run("mb_idiv", [(u32, 8), (u32, 7)], 256) / 8 / 16))  # 16 warp divisions a sub-partition
    # the narrow-N wgmma rates (one SM, two warpgroups as on the GPU) over the N 256 rate the same loop reads
    wn = 64
    name_n = lambda n: "mb_wgmma_n%d" % n if n != 256 else "mb_wgmma_rate"
    rate = lambda n: 2 * wn * 4 * 64.0 * n * 16 / run(name_n(n), [(u32, wn)], 256)
    full = rate(256)
    for n in WGMMA_N:
        print("tc_frac_n%d %.4f" % (n, rate(n) / full))
    # the O-rescale probe (one SM, 1 and 2 warpgroups): clocks an iteration without and with the 128 FMULs
    dn = 16
    for thr in (128, 256):
        print("wgmma_scale_%d %.1f %.1f" % (thr, run("mb_wgmma_drain", [(u32, dn)], thr) / dn,
                                            run("mb_wgmma_scale", [(u32, dn)], thr) / dn))
    def words(n):  # out[0 .. n - 1] after the last run: the benchmarks that write more than one value
        h = (ctypes.c_uint64 * n)()
        ck(cu.cuMemcpyDtoH_v2(h, out, ctypes.c_size_t(8 * n)), "copy")
        return list(h)
    run("mb_wgmma_pair", [(u32, dn)], 256)  # both warpgroups' round clocks
    print("wgmma_pair %.1f %.1f" % tuple(x / dn for x in words(2)))
    print("wgmma_group %s" % " ".join("%.1f" % (run(b, [(u32, dn)], 128) / dn) for b in
                                      ("mb_wgmma_drain_n16", "mb_wgmma_drain_n64", "mb_wgmma_drain_n128", "mb_wgmma_drain")))
    print("wgmma_beside %s" % " ".join("%.1f" % (run("mb_wgmma_beside_" + b, [(u32, dn)], 256) / dn)
                                       for b in ("idle", "chain", "c2", "c4", "fmul")))
    # two warps always ready on each sub-partition (microbench.c's iteration counts): each warp's end after the first start
    for name, sn2 in (("share_fma", 2048), ("share_mufu", 256)):
        run("mb_" + name, [(u32, sn2)], 256)
        h = words(16)
        t0 = min(h[2 * w] for w in range(8))
        print("%s %s" % (name, " ".join("%d" % (h[2 * w + 1] - t0) for w in range(8))))
    # one online-softmax block (microbench.c runs 64 passes; 8 here), one warpgroup and two: clocks a pass
    print("softmax %s" % " ".join("%.1f" % (run("mb_softmax", [(u32, 8)], thr) / 8) for thr in (128, 256)))
    run("mb_softmax_beside", [(u32, 16)], 256)  # microbench.c: 64 iterations; 16 here
    h = words(2)
    print("softmax_beside %.1f %.1f" % (h[1] / 8, h[0] / 16))
    run("mb_wgmma_issue", [(u32, 4)], 256)
    h = words(2)
    print("wgmma_issue %.1f %.1f" % (h[0] / 4, h[1] / 4))
    # the st.global probes (one SM, 256 threads, 64 stores a thread a pass): clocks a warp instruction
    stn = 2
    for name in ("st_frag", "st_line"):
        print("%s_clk %.3f" % (name, run("mb_" + name, [(u64, src.value), (u32, stn)], 256) / (stn * 8 * 64)))
    return 0

if __name__ == "__main__":
    sys.exit(main())
