"""tests/python/test_args_fuzz.py - the Python argument layer (python/fa4.py) through the simulated driver.

No torch: the tensors are duck-typed stand-ins over device memory the simulated driver (build/sim/libcuda.so.1,
a CUDA driver whose device runs PTX on the CPU) allocates, or over host memory. Issue 26, item 4:
  - a few good calls (MHA dense and varlen, sparse MLA with topk_length) run through fa4.mha_fwd /
    fa4.mla_sparse_fwd and match a plain-Python reference;
  - then many bad calls, each a good call with 1 to 3 random mutations that make it wrong (a shape off by
    one, a dtype, a CPU tensor, a tensor on another device, an int that does not fit its C field, a
    negative or non-int int, a non-finite or unrepresentable float, a non-bool flag, a broadcast or
    overlapping stride, a tensor whose allocation is smaller than its shape, a host pointer behind a
    "CUDA" tensor): every one must raise fa4.Fa4Error naming an argument, and launch nothing (the
    simulated driver counts launches) nor hurt the device (no sticky error);
  - a good call at the end still runs and matches.
Issue 26's own cases run one by one first (out with too few rows, indices with fewer rows than q, CPU tensors,
an fp32 out, num_splits=2**32+1, max_seqlen_q=2**32+9, window=(2**32+5, 0), allocations one row short).
The mutations are drawn with seed 1 and then with a seed drawn for this run (printed; FA4_ARGS_FUZZ_SEED=N
replays it). FA4_ARGS_FUZZ_N sets the bad calls per seed (default 1000); FA4_ARGS_FUZZ_VERBOSE=1 prints each
call and its refusal.
Prints one line per good call and per seed, then 'args fuzz: N passed, N failed'. Run by make unit
(needs build/libfa4rt.so and build/sim/libcuda.so.1).
"""
import atexit
import ctypes
import math
import os
import random
import shutil
import struct
import sys
import tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report import report  # noqa: E402  (tests/report.py: the suite line make test sums)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SIM = os.path.join(ROOT, "build", "sim", "libcuda.so.1")
os.environ.setdefault("FA4_LIB", os.path.join(ROOT, "build", "libfa4rt.so"))
os.environ["FA4GEN_COMPILER"] = "driver-ptx"  # the simulator runs PTX, not cubins
os.environ["FA4SIM_CC"] = "90"
if "FA4GEN_CACHE_DIR" not in os.environ:  # a fresh cache: the simulator gets this tree's PTX
    os.environ["FA4GEN_CACHE_DIR"] = tempfile.mkdtemp(prefix="fa4argsfuzz.")
    atexit.register(shutil.rmtree, os.environ["FA4GEN_CACHE_DIR"], True)
sys.path.insert(0, os.path.join(ROOT, "python"))

for need in (SIM, os.environ["FA4_LIB"]):
    if not os.path.exists(need):
        print("args fuzz: %s is missing (make build/libfa4rt.so build/sim/libcuda.so.1)" % need)
        sys.exit(1)
# loaded first, so libfa4rt's dlopen("libcuda.so.1") finds it by its soname, whatever LD_LIBRARY_PATH says
sim = ctypes.CDLL(SIM, mode=ctypes.RTLD_GLOBAL)

import fa4  # noqa: E402

passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL %s %s" % (name, detail), flush=True)


# ---------------------------------------------------------------- the simulated device



def cu(what, r):
    if r != 0:
        raise RuntimeError("%s failed: CUresult %d" % (what, r))


sim.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
sim.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
sim.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
sim.cuMemFree_v2.argtypes = [ctypes.c_uint64]
sim.fa4sim_launch_count.restype = ctypes.c_ulonglong
cu("cuInit", sim.cuInit(0))
_ctx = ctypes.c_void_p()
cu("cuDevicePrimaryCtxRetain", sim.cuDevicePrimaryCtxRetain(ctypes.byref(_ctx), 0))
cu("cuCtxSetCurrent", sim.cuCtxSetCurrent(_ctx))


def launches():
    return sim.fa4sim_launch_count()


def healthy():
    return sim.cuCtxSynchronize() == 0


# ---------------------------------------------------------------- duck-typed tensors

class DType:
    def __init__(self, name, size, fmt):
        self.name, self.itemsize, self.fmt = name, size, fmt

    def __str__(self):
        return "torch." + self.name


BF16, FP16, FP32 = DType("bfloat16", 2, None), DType("float16", 2, "e"), DType("float32", 4, "f")
I32, I64 = DType("int32", 4, "i"), DType("int64", 8, "q")


class Device:
    def __init__(self, kind, index):
        self.type, self.index = kind, index


class T:
    """The torch tensor interface fa4.py reads, over an address."""

    def __init__(self, ptr, shape, dtype, strides=None, device=("cuda", 0)):
        self.ptr, self.shape, self.dtype = ptr, tuple(shape), dtype
        self._strides = tuple(strides) if strides is not None else packed(shape)
        self.device = Device(*device)
        self.is_cuda = device[0] == "cuda"

    def data_ptr(self):
        return self.ptr

    def stride(self):
        return self._strides

    def dim(self):
        return len(self.shape)

    def numel(self):
        return math.prod(self.shape)

    def element_size(self):
        return self.dtype.itemsize

    def is_contiguous(self):
        return self._strides == packed(self.shape)


def packed(shape):
    st, acc = [], 1
    for n in reversed(shape):
        st.append(acc)
        acc *= n
    return tuple(reversed(st))


def span(shape, strides):
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


_keep = []  # host buffers stay alive as long as tensors point at them


def dev_alloc(nbytes):
    p = ctypes.c_uint64()
    cu("cuMemAlloc", sim.cuMemAlloc_v2(ctypes.byref(p), max(nbytes, 1)))
    return p.value


def tensor(shape, dtype, strides=None, short=0, where="device"):
    """A tensor of shape in a fresh allocation holding exactly its span (less `short` bytes): where is
    'device' (simulated device memory), 'host' (a CUDA-typed tensor over host memory) or 'cpu'."""
    strides = strides if strides is not None else packed(shape)
    nbytes = span(shape, strides) * dtype.itemsize - short
    if where == "device":
        return T(dev_alloc(nbytes), shape, dtype, strides)
    buf = ctypes.create_string_buffer(max(nbytes, 16) + 16)
    _keep.append(buf)
    addr = (ctypes.addressof(buf) + 15) // 16 * 16
    return T(addr, shape, dtype, strides, device=("cpu", None) if where == "cpu" else ("cuda", 0))


def upload(t, values):
    """values (floats or ints, packed order) into t's memory, encoded as t's dtype."""
    if t.dtype is BF16:
        raw = b"".join(struct.pack("<H", bf16_bits(x)) for x in values)
    else:
        raw = struct.pack("<%d%s" % (len(values), t.dtype.fmt), *values)
    cu("cuMemcpyHtoD", sim.cuMemcpyHtoD_v2(t.ptr, raw, len(raw)))


def download(t):
    n = t.numel() * t.dtype.itemsize
    buf = ctypes.create_string_buffer(n)
    cu("cuMemcpyDtoH", sim.cuMemcpyDtoH_v2(buf, t.ptr, n))
    if t.dtype is BF16:
        return [bf16_value(h) for h in struct.unpack("<%dH" % t.numel(), buf.raw)]
    return list(struct.unpack("<%d%s" % (t.numel(), t.dtype.fmt), buf.raw))


def bf16_bits(x):
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def bf16_value(h):
    return struct.unpack("<f", struct.pack("<I", h << 16))[0]


# ---------------------------------------------------------------- good calls and their references

def rand_bf16(rng, n):
    return [bf16_value(bf16_bits(rng.uniform(-1, 1))) for _ in range(n)]


def attention(q, k, v, sq, sk, h, hkv, d, causal, rows=None):
    """O [sq, h, d] and lse [h, sq] of one sequence (q [sq, h, d], k, v [sk, hkv, d], packed lists)."""
    o, lse = [0.0] * (sq * h * d), [0.0] * (h * sq)
    scale = 1 / math.sqrt(d)
    for i in range(sq):
        for hh in range(h):
            g = hh // (h // hkv)
            qi = q[(i * h + hh) * d:(i * h + hh + 1) * d]
            s = []
            for j in range(sk):
                if causal and j > i + sk - sq:
                    continue
                kj = k[(j * hkv + g) * d:(j * hkv + g + 1) * d]
                s.append((j, scale * sum(a * b for a, b in zip(qi, kj))))
            if not s:
                lse[hh * sq + i] = -math.inf
                continue
            mx = max(x for _, x in s)
            w = [(j, math.exp(x - mx)) for j, x in s]
            z = sum(x for _, x in w)
            lse[hh * sq + i] = mx + math.log(z)
            for c in range(d):
                o[(i * h + hh) * d + c] = sum(x * v[(j * hkv + g) * d + c] for j, x in w) / z
    return o, lse


def close(got, want, tol):
    """(worst |got - want| <= tol, worst); equal infinities match, a NaN on either side is an infinite error."""
    worst = 0.0
    for a, b in zip(got, want):
        if math.isinf(a) and a == b:
            continue
        d = abs(a - b)
        worst = max(worst, math.inf if d != d else d)
    return worst <= tol, worst


class MhaCall:
    """A good dense (or varlen) MHA call: its tensors, uploaded inputs and its reference."""

    def __init__(self, rng, varlen=False):
        self.varlen = varlen
        self.b, self.sq, self.sk, self.h, self.hkv, self.d = (2, 8, 24, 2, 1, 64) if varlen else (1, 16, 32, 2, 1, 64)
        b, sq, sk, h, hkv, d = self.b, self.sq, self.sk, self.h, self.hkv, self.d
        lead_q, lead_k = ((b * sq,) if varlen else (b, sq)), ((b * sk,) if varlen else (b, sk))
        self.q = tensor(lead_q + (h, d), BF16)
        self.k = tensor(lead_k + (hkv, d), BF16)
        self.v = tensor(lead_k + (hkv, d), BF16)
        self.out = tensor(lead_q + (h, d), BF16)
        self.lse = tensor((h, b * sq) if varlen else (b, h, sq), FP32)
        self.host = [rand_bf16(rng, t.numel()) for t in (self.q, self.k, self.v)]
        for t, x in zip((self.q, self.k, self.v), self.host):
            upload(t, x)
        self.kw = dict(causal=True, out=self.out, lse=self.lse, return_lse=True, stream=0)
        if varlen:
            self.cu_q, self.cu_k = tensor((b + 1,), I32), tensor((b + 1,), I32)
            upload(self.cu_q, [i * sq for i in range(b + 1)])
            upload(self.cu_k, [i * sk for i in range(b + 1)])
            self.kw.update(cu_seqlens_q=self.cu_q, cu_seqlens_k=self.cu_k, max_seqlen_q=sq)

    def args(self):
        return [self.q, self.k, self.v], dict(self.kw)

    def run_and_check(self, what):
        a, kw = self.args()
        n = launches()
        fa4.mha_fwd(*a, **kw)
        check(what + ": launched", launches() > n)
        b, sq, sk, h, hkv, d = self.b, self.sq, self.sk, self.h, self.hkv, self.d
        got_o, got_l = download(self.out), download(self.lse)
        q, k, v = self.host
        ok = True
        for s in range(b):
            ro, rl = attention(q[s * sq * h * d:(s + 1) * sq * h * d], k[s * sk * hkv * d:(s + 1) * sk * hkv * d],
                               v[s * sk * hkv * d:(s + 1) * sk * hkv * d], sq, sk, h, hkv, d, True)
            good_o, wo = close(got_o[s * sq * h * d:(s + 1) * sq * h * d], ro, 2e-2)
            lse_rows = ([got_l[hh * b * sq + s * sq + i] for hh in range(h) for i in range(sq)] if self.varlen
                        else got_l[s * h * sq:(s + 1) * h * sq])
            good_l, wl = close(lse_rows, rl, 1e-3)
            check("%s: sequence %d matches the reference" % (what, s), good_o and good_l,
                  "max |dO| %.3g, max |dlse| %.3g" % (wo, wl))
            ok &= good_o and good_l
        print("%s %s: b %d sq %d sk %d h %d/%d d %d" % ("ok  " if ok else "FAIL", what, b, sq, sk, h, hkv, d),
              flush=True)


class MlaCall:
    """A good sparse MLA call with topk_length (rows of length -1, -2^31, topk + 5 and 37: fa4.h's meanings)."""

    def __init__(self, rng):
        self.sq, self.skv, self.hq, self.d, self.topk = 4, 96, 8, 512, 64
        sq, skv, hq, d, topk = self.sq, self.skv, self.hq, self.d, self.topk
        self.q = tensor((sq, hq, d), BF16)
        self.kv = tensor((skv, 1, d), BF16)
        self.idx = tensor((sq, topk), I32)
        self.out = tensor((sq, hq, 512), BF16)
        self.lse, self.mx = tensor((sq, hq), FP32), tensor((sq, hq), FP32)
        self.len = tensor((sq,), I32)
        self.hq_, self.hkv_ = rand_bf16(rng, self.q.numel()), rand_bf16(rng, self.kv.numel())
        upload(self.q, self.hq_)
        upload(self.kv, self.hkv_)
        self.rows = [rng.sample(range(skv), topk) for _ in range(sq)]
        upload(self.idx, [i for r in self.rows for i in r])
        self.lens = [-1, -2 ** 31, topk + 5, 37]
        upload(self.len, self.lens)
        self.kw = dict(topk_length=self.len, out=self.out, lse=self.lse, max_logits=self.mx, stream=0)

    def args(self):
        return [self.q, self.kv, self.idx], dict(self.kw)

    def run_and_check(self, what):
        a, kw = self.args()
        n = launches()
        fa4.mla_sparse_fwd(*a, **kw)
        check(what + ": launched", launches() > n)
        got_o, got_l, got_m = download(self.out), download(self.lse), download(self.mx)
        sq, hq, d, topk = self.sq, self.hq, self.d, self.topk
        ok = True
        for s in range(sq):
            n_keys = max(0, min(self.lens[s], topk))
            keys = self.rows[s][:n_keys]
            for h in range(hq):
                qv = self.hq_[(s * hq + h) * d:(s * hq + h + 1) * d]
                row = got_o[(s * hq + h) * 512:(s * hq + h + 1) * 512]
                if not keys:  # an empty row: out 0, lse +inf, max_logits -inf
                    good = all(x == 0.0 for x in row) and got_l[s * hq + h] == math.inf and \
                        got_m[s * hq + h] == -math.inf
                    check("%s: row %d (length %d) head %d is the empty row" % (what, s, self.lens[s], h), good,
                          "lse %r max %r" % (got_l[s * hq + h], got_m[s * hq + h]))
                    ok &= good
                    continue
                logit = [sum(a * b for a, b in zip(qv, self.hkv_[i * d:(i + 1) * d])) / math.sqrt(d) for i in keys]
                mx = max(logit)
                w = [math.exp(x - mx) for x in logit]
                z = sum(w)
                ref = [sum(wi * self.hkv_[i * d + c] for wi, i in zip(w, keys)) / z for c in range(512)]
                good_o, wo = close(row, ref, 2e-2)
                good_l = abs(got_l[s * hq + h] - (mx + math.log(z))) < 1e-3 and abs(got_m[s * hq + h] - mx) < 1e-3
                check("%s: row %d (length %d) head %d" % (what, s, self.lens[s], h), good_o and good_l,
                      "max |dO| %.3g, lse %r" % (wo, got_l[s * hq + h]))
                ok &= good_o and good_l
        print("%s %s: s_q %d s_kv %d h_q %d topk %d, topk_length %s" % ("ok  " if ok else "FAIL", what, sq,
              self.skv, hq, topk, self.lens), flush=True)


# ---------------------------------------------------------------- mutations: each makes a good call wrong

def retensor(t, shape=None, dtype=None, strides=None, short=0, where="device"):
    """A tensor like t with one thing changed (a fresh allocation that fits what it says, unless short)."""
    shape = shape if shape is not None else t.shape
    return tensor(shape, dtype or t.dtype, strides, short, where)


def mut_shape(rng, call, a, kw, names):
    name = rng.choice(names)
    t = pick(a, kw, name)
    dims = list(t.shape)
    # kv's rows are the one dim no other tensor repeats: fewer rows is a valid call (indices past s_kv count
    # for nothing), so only its other dims are made wrong
    i = rng.randrange(1, len(dims)) if name == "kv" else rng.randrange(len(dims))
    dims[i] = dims[i] + 1 if dims[i] == 1 or rng.random() < 0.5 else dims[i] - 1
    put(a, kw, name, retensor(t, shape=dims))
    return "%s shape %s" % (name, dims)


def mut_dtype(rng, call, a, kw, names):
    name = rng.choice(names)
    t = pick(a, kw, name)
    dt = rng.choice([d for d in (BF16, FP16, FP32, I32, I64) if d is not t.dtype])
    put(a, kw, name, retensor(t, dtype=dt))
    return "%s dtype %s" % (name, dt.name)


def mut_cpu(rng, call, a, kw, names):
    name = rng.choice(names)
    put(a, kw, name, retensor(pick(a, kw, name), where="cpu"))
    return "%s on the cpu" % name


def mut_other_device(rng, call, a, kw, names):
    name = rng.choice(names)
    t = pick(a, kw, name)
    put(a, kw, name, T(t.ptr, t.shape, t.dtype, t.stride(), device=("cuda", 1)))
    return "%s on cuda:1" % name


def mut_short(rng, call, a, kw, names):
    """The shape is right, the allocation one element short: only the driver can tell (libfa4rt asks it)."""
    name = rng.choice(names)
    t = pick(a, kw, name)
    put(a, kw, name, retensor(t, short=t.dtype.itemsize))
    return "%s one element short of its allocation" % name


def mut_host_ptr(rng, call, a, kw, names):
    name = rng.choice(names)
    put(a, kw, name, retensor(pick(a, kw, name), where="host"))
    return "%s: a CUDA tensor over host memory" % name


def mut_broadcast(rng, call, a, kw, names):
    names = [n for n in names if max(pick(a, kw, n).shape[:-1] or (1,)) > 1]
    if not names:
        return None
    name = rng.choice(names)
    t = pick(a, kw, name)
    dims = [i for i, n in enumerate(t.shape[:-1]) if n > 1]
    st = list(t.stride())
    st[rng.choice(dims)] = 0
    put(a, kw, name, T(t.ptr, t.shape, t.dtype, st))
    return "%s broadcast (stride 0)" % name


def mut_last_stride(rng, call, a, kw, names):
    name = rng.choice(names)
    t = pick(a, kw, name)
    st = [s * 2 for s in packed(t.shape)]
    put(a, kw, name, retensor(t, strides=st))
    return "%s last dim stride 2" % name


BAD_INTS = [2 ** 32 + 1, 2 ** 31, -2 ** 31 - 1, 2 ** 63, -1, 1.5, "2", True, None, float("nan")]
BAD_FLOATS = [float("nan"), float("inf"), -float("inf"), 1e39, -1e39, 1e-50, "0.1", True, [1.0]]
BAD_BOOLS = [2, "yes", None, 1.0, [True]]


def mut_kw(rng, call, a, kw, table):
    key, values = rng.choice(table)
    v = rng.choice(values)
    if callable(v):
        v = v(call)
    if key == "window" and kw.get("causal") is True:
        kw["causal"] = False  # the window's own checks, not its clash with causal
    kw[key] = v
    return "%s=%r" % (key, v)


MHA_KWS = [
    ("num_splits", [2 ** 32 + 1, 2 ** 31, -1, 1.5, "2", True, 129]),
    ("softmax_scale", BAD_FLOATS), ("q_descale", BAD_FLOATS), ("k_descale", BAD_FLOATS + [-1.0]),
    ("v_descale", BAD_FLOATS),
    ("window", [(2 ** 32 + 5, 0), (0, 2 ** 32 + 5), (2 ** 31, 0), (-2, 0), (1.0, 0), (0, "x"), (1, 2, 3), 5,
                (2 ** 30 + 1, 0)]),
    ("causal", BAD_BOOLS), ("return_lse", BAD_BOOLS), ("kv_early", BAD_BOOLS),
    ("stream", [-1, 2 ** 64, 1.5, "s"]), ("config", [123, b"bm=64", "bm=64\0"]), ("score_mod", [b"x", 7]),
    ("max_seqlen_q", [2 ** 32 + 9, 0, -1, 10 ** 6, 1.5]),
]
VARLEN_KWS = [("max_seqlen_q", [2 ** 32 + 9, 2 ** 31, 0, -1, 10 ** 6, 1.5, "8", None]),
              ("cu_seqlens_q", [lambda c: retensor(c.cu_q, dtype=I64), lambda c: retensor(c.cu_q, where="cpu"),
                                lambda c: retensor(c.cu_q, shape=(c.b, 1)),
                                lambda c: retensor(c.cu_q, short=4)]),
              ("cu_seqlens_k", [lambda c: retensor(c.cu_k, shape=(c.b + 2,)), lambda c: retensor(c.cu_k, where="host"),
                                lambda c: retensor(c.cu_k, dtype=FP32)])]
MLA_KWS = [
    ("sm_scale", BAD_FLOATS), ("kv_scale_block", [2 ** 31, -64, 64, 1.5]), ("stream", [-1, 2 ** 64]),
    ("attn_sink", [lambda c: tensor((c.hq,), FP32, where="cpu"), lambda c: tensor((c.hq + 1,), FP32),
                   lambda c: tensor((c.hq,), BF16), lambda c: tensor((c.hq,), FP32, short=4),
                   lambda c: tensor((c.hq,), FP32, where="host")]),
    ("topk_length", [lambda c: retensor(c.len, where="cpu"), lambda c: retensor(c.len, dtype=I64),
                     lambda c: retensor(c.len, shape=(c.sq - 1,)), lambda c: retensor(c.len, short=4),
                     lambda c: retensor(c.len, where="host")]),
    ("kv_scale", [lambda c: tensor((c.skv, 1), FP32)]),  # scales for bf16 kv
    ("config", [5, "kind=mha"]),
]


def mut_sink(rng, call, a, kw, names):
    """An MHA sink that is wrong: on the cpu, one short, bf16, a lying allocation, host memory."""
    f = rng.choice([lambda: tensor((call.h,), FP32, where="cpu"), lambda: tensor((call.h + 1,), FP32),
                    lambda: tensor((call.h,), BF16), lambda: tensor((call.h,), FP32, short=4),
                    lambda: tensor((call.h,), FP32, where="host")])
    kw["sink"] = f()
    return "sink %s" % kw["sink"].shape


def mut_overlap(rng, call, a, kw, names):
    """out with heads half a row apart: shape and dtype right, the rows overlap (the C API refuses it)."""
    if "out" not in names:
        return None
    o = kw["out"]
    st = list(packed(o.shape))
    st[-2] = o.shape[-1] // 2
    kw["out"] = retensor(o, strides=st)
    return "out heads overlap"


def mut_not_tensor(rng, call, a, kw, names):
    name = rng.choice(names)
    put(a, kw, name, rng.choice([[1, 2, 3], 7, "q", object()]))
    return "%s not a tensor" % name


POS = {"q": 0, "k": 1, "v": 2, "kv": 1, "indices": 2}


def pick(a, kw, name):
    return a[POS[name]] if name in POS else kw[name]


def put(a, kw, name, t):
    if name in POS:
        a[POS[name]] = t
    else:
        kw[name] = t


def fuzz(seed, n, mha, varlen, mla):
    """n bad calls drawn with seed; each must raise Fa4Error and launch nothing."""
    rng = random.Random(seed)
    bad = 0
    for it in range(n):
        kind = rng.choice(("mha", "mha", "varlen", "mla", "mla"))
        call = {"mha": mha, "varlen": varlen, "mla": mla}[kind]
        a, kw = call.args()
        if kind == "mla":
            names = ["q", "kv", "indices", "out", "lse", "max_logits", "topk_length"]
            muts = [mut_shape, mut_dtype, mut_cpu, mut_other_device, mut_short, mut_host_ptr, mut_broadcast,
                    mut_last_stride, mut_not_tensor, lambda r, c, a_, k_, n_: mut_kw(r, c, a_, k_, MLA_KWS)]
        else:
            names = ["q", "k", "v", "out", "lse"] + (["cu_seqlens_q", "cu_seqlens_k"] if kind == "varlen" else [])
            table = MHA_KWS if kind == "mha" else MHA_KWS[:-1] + VARLEN_KWS
            muts = [mut_shape, mut_dtype, mut_cpu, mut_other_device, mut_short, mut_host_ptr, mut_broadcast,
                    mut_last_stride, mut_not_tensor, mut_sink, mut_overlap,
                    lambda r, c, a_, k_, n_: mut_kw(r, c, a_, k_, table)]
        # 1 to 3 mutations that cannot undo each other: each tensor is changed at most once, and one shape at
        # most (two shapes could agree again: q and out one token shorter is a good call)
        what, used, shaped, target = [], set(), False, rng.choice((1, 1, 2, 3))
        while len(what) < target:
            mut = rng.choice(muts)
            if mut is mut_shape and shaped:
                continue
            before_ids = {n: id(pick(a, kw, n)) for n in names}
            desc = mut(rng, call, a, kw, [n for n in names if n not in used])
            if desc is None:
                continue
            used |= {n for n in names if id(pick(a, kw, n)) != before_ids[n]}
            shaped |= mut is mut_shape
            what.append(desc)
        if kind == "mha" and "max_seqlen_q" in kw and kw["max_seqlen_q"] is None:
            del kw["max_seqlen_q"]
        before = launches()
        try:
            (fa4.mla_sparse_fwd if kind == "mla" else fa4.mha_fwd)(*a, **kw)
            ok, why = False, "accepted"
        except fa4.Fa4Error as e:
            msg = str(e)
            ok, why = True, msg
        except Exception as e:  # noqa: BLE001 - any other exception is the failure being tested
            ok, why = False, "%s: %s" % (type(e).__name__, e)
        ok = ok and launches() == before and healthy()
        if os.environ.get("FA4_ARGS_FUZZ_VERBOSE"):
            print("  %s: %s -> %s" % (kind, "; ".join(what), why[:160]))
        check("seed %d call %d (%s: %s)" % (seed, it, kind, "; ".join(what)), ok,
              "%s; launches %d -> %d" % (why[:300], before, launches()))
        bad += not ok
    return bad


def issue_cases(mha, varlen, mla):
    """Issue 26's wrong arguments one by one: each refused naming the argument, nothing launched."""
    def kw(call, **more):
        a, k = call.args()
        k.update(more)
        return a, k

    o, lo = mha.out, varlen.out
    cases = [
        ("mha out with too few rows", "out", fa4.mha_fwd, kw(mha, out=retensor(o, shape=(1, 15) + o.shape[2:]))),
        ("varlen out with too few rows", "out", fa4.mha_fwd, kw(varlen, out=retensor(lo, shape=(lo.shape[0] - 1,) +
                                                                                  lo.shape[1:]))),
        ("mla out with too few rows", "out", fa4.mla_sparse_fwd, kw(mla, out=retensor(mla.out, shape=(3, 8, 512)))),
        ("mla indices with fewer rows than q", "indices", fa4.mla_sparse_fwd,
         ([mla.q, mla.kv, retensor(mla.idx, shape=(3, 64))], mla.args()[1])),
        ("mha out on the cpu", "out", fa4.mha_fwd, kw(mha, out=retensor(o, where="cpu"))),
        ("mla attn_sink on the cpu", "attn_sink", fa4.mla_sparse_fwd,
         kw(mla, attn_sink=tensor((8,), FP32, where="cpu"))),
        ("mla topk_length on the cpu", "topk_length", fa4.mla_sparse_fwd,
         kw(mla, topk_length=retensor(mla.len, where="cpu"))),
        ("mha out fp32", "out", fa4.mha_fwd, kw(mha, out=retensor(o, dtype=FP32))),
        ("mla out fp32", "out", fa4.mla_sparse_fwd, kw(mla, out=retensor(mla.out, dtype=FP32))),
        ("num_splits=2**32+1", "num_splits", fa4.mha_fwd, kw(mha, num_splits=2 ** 32 + 1)),
        ("max_seqlen_q=2**32+9", "max_seqlen_q", fa4.mha_fwd, kw(varlen, max_seqlen_q=2 ** 32 + 9)),
        ("window=(2**32+5, 0)", "window[0]", fa4.mha_fwd, kw(mha, causal=False, window=(2 ** 32 + 5, 0))),
        ("mha out in an allocation one row short (C)", "o", fa4.mha_fwd,
         kw(mha, out=retensor(o, short=o.shape[2] * o.shape[3] * 2))),
        ("mla indices in an allocation one row short (C)", "indices", fa4.mla_sparse_fwd,
         ([mla.q, mla.kv, retensor(mla.idx, short=64 * 4)], mla.args()[1])),
        ("mla topk_length a host pointer (C)", "topk_length", fa4.mla_sparse_fwd,
         kw(mla, topk_length=retensor(mla.len, where="host"))),
    ]
    for name, field, fn, (a, k) in cases:
        before = launches()
        try:
            fn(*a, **k)
            ok, msg = False, "accepted"
        except fa4.Fa4Error as e:
            msg = str(e)
            ok = any(msg.startswith(field + c) or ("invalid argument: " + field + c) in msg for c in ":[ ")
        ok = ok and launches() == before and healthy()
        check("issue 26: " + name, ok, msg[:300])
        print("%s issue 26: %s -> %s" % ("ok  " if ok else "FAIL", name, msg[:150]), flush=True)


def main():
    rng = random.Random(1)
    mha, varlen, mla = MhaCall(rng), MhaCall(rng, varlen=True), MlaCall(rng)
    mha.run_and_check("mha dense")
    varlen.run_and_check("mha varlen")
    mla.run_and_check("mla sparse")
    issue_cases(mha, varlen, mla)
    n = int(os.environ.get("FA4_ARGS_FUZZ_N", "1000"))
    seeds = [1, int(os.environ.get("FA4_ARGS_FUZZ_SEED", random.SystemRandom().randrange(2, 1 << 30)))]
    for seed in seeds:
        bad = fuzz(seed, n, mha, varlen, mla)
        print("%s seed %d: %d bad calls, %d accepted or launched (FA4_ARGS_FUZZ_SEED=%d replays it)" %
              ("ok  " if not bad else "FAIL", seed, n, bad, seed), flush=True)
    mha.run_and_check("mha dense after the bad calls")
    return report("args fuzz", passed, failed)


if __name__ == "__main__":
    sys.exit(main())
