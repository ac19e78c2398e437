"""fa4 - a ctypes binding of libfa4rt for torch users.

    import fa4
    o = fa4.mha_fwd(q, k, v, causal=True)          # q, k, v: [B, S, H, D] CUDA bf16/fp16 tensors
    o, lse = fa4.mha_fwd(q, k, v, return_lse=True)  # lse: fp32 [B, H, S], natural log
    o = fa4.mha_fwd(q, k, v, q_descale=0.5, k_descale=0.25, v_descale=2.0)  # float8_e4m3fn in, bf16 out
    o = fa4.mha_fwd(q, k_nope, v, k_rope=k_rope)    # MLA prefill (sm100a): q [.., 192], k_nope [.., 128],
                                                    # k_rope [B, Sk, Hkv, 64], v [.., 128]
    out, lse, max_logits = fa4.mla_sparse_fwd(q, kv, indices)   # sparse MLA prefill (sm90a):
        # q [s_q, h_q, 576|512] bf16, kv [s_kv, 1, d_qk] bf16 (V = first 512 columns), indices [s_q, topk] int32;
        # out [s_q, h_q, 512] bf16, lse / max_logits [s_q, h_q] fp32 (natural log; empty rows: +inf / -inf)

Causal masks align bottom-right (query i sees key j <= i + Sk - Sq), as FlashAttention.

Every argument is checked before libfa4rt is called: each tensor for device (CUDA, q's device), dtype, shape
and strides against what the kernel touches, each int against the C field it fills (no silent wrap), each
flag and scale for its type; a bad one raises Fa4Error naming it. Tensors may be any objects with torch's
tensor interface (data_ptr(), shape, stride(), dtype, device, is_cuda, dim(), numel(), element_size(),
is_contiguous()): torch is imported only to allocate outputs the caller did not give and to find the current
stream when no stream= is given.
The library: $FA4_LIB, else the copy the fa4gen wheel carries (fa4gen/lib/libfa4rt.so), else libfa4rt.so
beside this file, else build/libfa4rt.so of the repository this file is in, else libfa4rt.so.0 from the dynamic
loader's path, else pkg-config's (an installed fa4gen). Before loading it, the nvidia-* wheels' NVRTC and
nvJitLink (and a ptxas, when the toolkit has none) are handed to it: fa4gen.prepare_env().
torch.library ops (torch.compile, CUDA graphs): fa4_torch.py. Without torch, version() and compile() work
and the tensor functions raise Fa4Error unless
the caller gives every output and the stream (duck-typed tensors).
"""
import ctypes
import functools
import math
import numbers
import operator
import os

try:
    import fa4gen as _wheel  # the wheel's files and CUDA library search (python/fa4gen/)
except ImportError:  # fa4.py copied on its own
    _wheel = None

_HERE = os.path.dirname(os.path.abspath(__file__))
_BF16, _FP16, _E4M3 = 0, 1, 2
_ROPE_DEPTH = 64  # fa4.h: k_rope holds the last 64 columns of K
_MASK_NONE, _MASK_CAUSAL, _MASK_WINDOW = 0, 1, 2


class _Options(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("version", ctypes.c_uint), ("device", ctypes.c_int),
                ("target", ctypes.c_int), ("cache_dir", ctypes.c_char_p), ("disk_cache", ctypes.c_int),
                ("verbose", ctypes.c_int), ("disable_jit", ctypes.c_int), ("remember_buffers", ctypes.c_int)]


class _MhaArgs(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("dtype", ctypes.c_int),
                ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("o", ctypes.c_void_p), ("lse", ctypes.c_void_p),
                ("batch", ctypes.c_int), ("seqlen_q", ctypes.c_int), ("seqlen_k", ctypes.c_int),
                ("heads_q", ctypes.c_int), ("heads_kv", ctypes.c_int), ("qk_depth", ctypes.c_int),
                ("ov_depth", ctypes.c_int),
                ("q_stride", ctypes.c_int64 * 3), ("k_stride", ctypes.c_int64 * 3),
                ("v_stride", ctypes.c_int64 * 3), ("o_stride", ctypes.c_int64 * 3),
                ("softmax_scale", ctypes.c_float), ("mask", ctypes.c_int),
                ("window_left", ctypes.c_int), ("window_right", ctypes.c_int), ("config", ctypes.c_char_p),
                ("k_rope", ctypes.c_void_p), ("k_rope_stride", ctypes.c_int64 * 3),
                ("q_descale", ctypes.c_float), ("k_descale", ctypes.c_float), ("v_descale", ctypes.c_float),
                ("sink", ctypes.c_void_p), ("score_mod", ctypes.c_char_p), ("score_mod_aux", ctypes.c_void_p),
                ("num_splits", ctypes.c_int), ("workspace", ctypes.c_void_p), ("workspace_size", ctypes.c_size_t),
                ("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_k", ctypes.c_void_p), ("max_seqlen_q", ctypes.c_int),
                ("cu_seqlens_q_host", ctypes.c_void_p), ("cu_seqlens_k_host", ctypes.c_void_p),
                ("block_table", ctypes.c_void_p), ("seqlens_k", ctypes.c_void_p), ("page_size", ctypes.c_int),
                ("max_pages", ctypes.c_int), ("num_pages", ctypes.c_int), ("kv_early", ctypes.c_int),
                ("softcap", ctypes.c_float), ("alibi_slopes", ctypes.c_void_p)]


class _MlaSparseArgs(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("q", ctypes.c_void_p), ("kv", ctypes.c_void_p),
                ("indices", ctypes.c_void_p), ("out", ctypes.c_void_p), ("lse", ctypes.c_void_p),
                ("max_logits", ctypes.c_void_p), ("attn_sink", ctypes.c_void_p), ("topk_length", ctypes.c_void_p),
                ("s_q", ctypes.c_int), ("s_kv", ctypes.c_int), ("h_q", ctypes.c_int), ("d_qk", ctypes.c_int),
                ("topk", ctypes.c_int), ("q_stride", ctypes.c_int64 * 2), ("kv_stride", ctypes.c_int64),
                ("indices_stride", ctypes.c_int64), ("out_stride", ctypes.c_int64 * 2), ("sm_scale", ctypes.c_float),
                ("config", ctypes.c_char_p), ("kv_dtype", ctypes.c_int), ("kv_scale", ctypes.c_void_p),
                ("kv_scale_block", ctypes.c_int)]


class _KvAppendArgs(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("dtype", ctypes.c_int), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("k_cache", ctypes.c_void_p), ("v_cache", ctypes.c_void_p), ("batch", ctypes.c_int),
                ("s_new", ctypes.c_int), ("heads_kv", ctypes.c_int), ("k_depth", ctypes.c_int), ("v_depth", ctypes.c_int),
                ("k_stride", ctypes.c_int64 * 3), ("v_stride", ctypes.c_int64 * 3),
                ("k_cache_stride", ctypes.c_int64 * 3), ("v_cache_stride", ctypes.c_int64 * 3),
                ("cache_batch", ctypes.c_int), ("cache_rows", ctypes.c_int), ("cache_batch_idx", ctypes.c_void_p),
                ("block_table", ctypes.c_void_p), ("page_size", ctypes.c_int), ("max_pages", ctypes.c_int),
                ("num_pages", ctypes.c_int), ("cache_seqlens", ctypes.c_void_p), ("cache_seqlen", ctypes.c_int),
                ("seqlens_out", ctypes.c_void_p)]


class Fa4Error(RuntimeError):
    pass


# ---------------------------------------------------------------- the argument layer
# Small checks that read tensors only through the interface named in the module's docstring (duck typing), so
# they run without torch and can serve other front ends (a FlashAttention-compatible API). Each raises Fa4Error
# whose message starts with the argument's name.

INT32 = (-2 ** 31, 2 ** 31 - 1)
INT64 = (-2 ** 63, 2 ** 63 - 1)
SIZE_T = (0, 2 ** 64 - 1)
_FLT_MAX = 3.4028234663852886e38
_TENSOR_ATTRS = ("data_ptr", "shape", "stride", "dtype", "device", "is_contiguous", "numel", "element_size")


def _int(name, v, lo=INT32[0], hi=INT32[1]):
    """v as a Python int in [lo, hi] (bounds inclusive: a C field's range, or tighter); bools and floats are
    refused, anything with __index__ (numpy, torch scalars) taken."""
    if isinstance(v, bool) or not hasattr(type(v), "__index__"):
        raise Fa4Error("%s: %r is a %s; give an int in %d..%d" % (name, v, type(v).__name__, lo, hi))
    v = operator.index(v)
    if v < lo or v > hi:
        raise Fa4Error("%s: %d is out of range; use %d..%d" % (name, v, lo, hi))
    return v


def _bool(name, v):
    """v as a bool: True/False (or a numpy/torch bool scalar); an int such as 2 is refused, not read as True."""
    if isinstance(v, bool):
        return v
    if type(v).__name__ in ("bool_", "bool8") and hasattr(v, "item"):
        return bool(v.item())
    raise Fa4Error("%s: %r is a %s; give True or False" % (name, v, type(v).__name__))


def _float(name, v):
    """v as a float that a C float holds with its meaning: finite, within float32's range, and not a nonzero
    value that rounds to 0 (0 selects a default in several fields)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise Fa4Error("%s: %r is a %s; give a finite float" % (name, v, type(v).__name__))
    f = float(v)
    if not math.isfinite(f) or abs(f) > _FLT_MAX:
        raise Fa4Error("%s: %r is not a finite float32" % (name, v))
    if f != 0.0 and ctypes.c_float(f).value == 0.0:
        raise Fa4Error("%s: %r rounds to 0 in float32, which would select the default" % (name, v))
    return f


def _str(name, v):
    if v is None:
        return None
    if not isinstance(v, str):
        raise Fa4Error("%s: %r is a %s; give a str or None" % (name, v, type(v).__name__))
    if "\0" in v:
        raise Fa4Error("%s: holds a NUL character" % name)
    return v.encode()


def _dtype_name(dt):
    """'bfloat16' for torch.bfloat16 (or any dtype object whose str ends so)."""
    return str(dt).rsplit(".", 1)[-1]


def _device(name, t):
    """(type, index) of t's device: 'cuda', 0 for cuda:0; the index is None where the object gives none."""
    d = t.device
    if isinstance(d, str):
        kind, _, idx = d.partition(":")
        return kind, int(idx) if idx else None
    kind = getattr(d, "type", None)
    if not isinstance(kind, str):
        raise Fa4Error("%s: its device %r has no type" % (name, d))
    idx = getattr(d, "index", None)
    return kind, (None if idx is None else _int(name + ".device.index", idx, 0, INT32[1]))


def _where(dev):
    return dev[0] if dev[1] is None else "%s:%d" % dev


def _tensor(name, t, dtype=None, shape=None, device=None, contiguous=False):
    """Checks t and returns (shape, strides) as tuples of ints. dtype: a name or a tuple of names ('bfloat16');
    shape: the sizes, None where any size goes (its length is the number of dims); device: (type, index) of q,
    which t must share; contiguous: packed row-major. The last dim must have stride 1 (size 1 aside), and no
    dim of more than one index may have stride 0 or less (a broadcast): the kernels read each element once
    and write each output element once."""
    if t is None:
        raise Fa4Error("%s: None; give a CUDA tensor" % name)
    missing = [a for a in _TENSOR_ATTRS if not hasattr(t, a)]
    if missing:
        raise Fa4Error("%s: a %s is not a tensor (it has no %s)" % (name, type(t).__name__, ", ".join(missing)))
    dev = _device(name, t)
    if dev[0] != "cuda":
        raise Fa4Error("%s: a tensor on %s; needs a CUDA tensor%s" % (name, _where(dev),
                       " on " + _where(device) if device else ""))
    if device is not None and dev[1] != device[1]:
        raise Fa4Error("%s: a tensor on %s; q is on %s, and every tensor of a call must be on q's device"
                       % (name, _where(dev), _where(device)))
    if dtype is not None:
        names = (dtype,) if isinstance(dtype, str) else tuple(dtype)
        got = _dtype_name(t.dtype)
        if got not in names:
            raise Fa4Error("%s: dtype %s; use %s" % (name, got, " or ".join(names)))
    dims = tuple(_int("%s.shape[%d]" % (name, i), n, 0, INT32[1]) for i, n in enumerate(t.shape))
    strides = tuple(_int("%s.stride(%d)" % (name, i), s, INT64[0], INT64[1]) for i, s in enumerate(t.stride()))
    if len(strides) != len(dims):
        raise Fa4Error("%s: %d strides for %d dims" % (name, len(strides), len(dims)))
    if shape is not None:
        if len(dims) != len(shape):
            raise Fa4Error("%s: %d dims %s; expected %d %s" % (name, len(dims), list(dims), len(shape),
                           _shape_text(shape)))
        for i, (got, want) in enumerate(zip(dims, shape)):
            if want is not None and got != want:
                raise Fa4Error("%s: shape %s; expected %s (dim %d is %d, not %d)" % (name, list(dims),
                               _shape_text(shape), i, got, want))
    if any(n == 0 for n in dims):
        raise Fa4Error("%s: shape %s has an empty dim" % (name, list(dims)))
    if contiguous and not t.is_contiguous():
        raise Fa4Error("%s: shape %s with strides %s; needs a contiguous tensor" % (name, list(dims), list(strides)))
    if dims and dims[-1] > 1 and strides[-1] != 1:
        raise Fa4Error("%s: stride %d in the last dim; it must be contiguous (stride 1)" % (name, strides[-1]))
    for i, (n, st) in enumerate(zip(dims, strides)):
        if n > 1 and st <= 0:
            raise Fa4Error("%s: stride %d in dim %d of size %d (a broadcast or reversed view); give a tensor whose "
                           "elements are distinct, e.g. .contiguous()" % (name, st, i, n))
    return dims, strides


def _shape_text(shape):
    return "[%s]" % ", ".join("*" if n is None else str(n) for n in shape)


def _ptr(name, t):
    """t's data pointer as an address (None for no tensor)."""
    if t is None:
        return None
    p = _int(name + ".data_ptr()", t.data_ptr(), 0, SIZE_T[1])
    if p == 0:
        raise Fa4Error("%s: data_ptr() is 0 (an empty or unallocated tensor)" % name)
    return p


def _c_strides(dims, strides):
    """The C API's element strides of a tensor's outer dims (the last is 1): a dim of size 1 steps nowhere, so
    its stride (which torch leaves arbitrary, e.g. after unsqueeze) is given as 0, the packed layout's."""
    return [0 if n == 1 else s for n, s in zip(dims[:-1], strides[:-1])]


def _nbytes(name, t):
    return _int(name + " bytes", t.numel() * t.element_size(), 0, SIZE_T[1])


def _stream(stream, device):
    """The CUstream handle: stream as given (an int, a ctypes pointer or an object with .cuda_stream), or
    torch's current stream on device when None."""
    if stream is None:
        return _raw_stream(_torch("stream"), device[1] or 0)
    if hasattr(stream, "cuda_stream"):
        stream = stream.cuda_stream
    if isinstance(stream, ctypes.c_void_p):
        stream = stream.value or 0
    return _int("stream", stream, 0, SIZE_T[1])


_torch_mod = None


def _torch(why):
    global _torch_mod
    try:
        import torch
    except ImportError:
        raise Fa4Error("%s: not given, and torch (which would supply it) is not installed" % why) from None
    _torch_mod = torch
    return torch


_lib = None
_ctx = {}


def _library_candidates():
    if os.environ.get("FA4_LIB"):
        return [os.environ["FA4_LIB"]]
    paths = [os.path.join(_HERE, "libfa4rt.so"), os.path.join(_HERE, "..", "build", "libfa4rt.so"), "libfa4rt.so.0"]
    if _wheel is not None and _wheel.library():
        paths.insert(0, _wheel.library())
    try:
        import subprocess
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "fa4gen"], capture_output=True, text=True,
                                timeout=10).stdout.strip()
        if libdir:
            paths.append(os.path.join(libdir, "libfa4rt.so.0"))
    except (OSError, subprocess.SubprocessError):
        pass
    return paths


def _open_library():
    tried = []
    for path in _library_candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append("%s (missing)" % path)
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise Fa4Error("libfa4rt not found; pip install fa4gen (the wheel carries it), build it (make) or install it "
                   "(make install), or set FA4_LIB. "
                   "Tried: " + "; ".join(tried))


def _load():
    global _lib
    if _lib is None:
        if _wheel is not None:
            _wheel.prepare_env()  # before libfa4rt opens nvJitLink / NVRTC / ptxas
        _lib = _open_library()
        _lib.fa4_status_string.restype = ctypes.c_char_p
        _lib.fa4_last_error.restype = ctypes.c_char_p
        _lib.fa4_last_error.argtypes = [ctypes.c_void_p]
        _lib.fa4_create.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_Options)]
        _lib.fa4_destroy.argtypes = [ctypes.c_void_p]
        _lib.fa4_mha_fwd.argtypes = [ctypes.c_void_p, ctypes.POINTER(_MhaArgs), ctypes.c_void_p]
        _lib.fa4_mha_config.argtypes = [ctypes.c_void_p, ctypes.POINTER(_MhaArgs), ctypes.c_char_p, ctypes.c_size_t]
        _lib.fa4_mha_split_count.argtypes = [ctypes.c_void_p, ctypes.POINTER(_MhaArgs), ctypes.POINTER(ctypes.c_int),
                                             ctypes.POINTER(ctypes.c_size_t)]
        _lib.fa4_mla_sparse_fwd.argtypes = [ctypes.c_void_p, ctypes.POINTER(_MlaSparseArgs), ctypes.c_void_p]
        _lib.fa4_kv_append.argtypes = [ctypes.c_void_p, ctypes.POINTER(_KvAppendArgs), ctypes.c_void_p]
    return _lib


def _check(status, ctx):
    if status != 0:
        lib = _load()
        raise Fa4Error("%s: %s" % (lib.fa4_status_string(status).decode(), lib.fa4_last_error(ctx).decode()))


_have_torch = False


def _needs_torch(fn):
    """fn takes torch tensors: without torch it raises one Fa4Error saying how to get it."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        global _have_torch
        if _have_torch:
            return fn(*args, **kwargs)
        try:
            import torch  # noqa: F401
            _have_torch = True
        except ModuleNotFoundError as e:
            if e.name != "torch":  # torch is there but broken: its own error says more
                raise
            # a caller that hands over every output and the stream (duck-typed tensors) needs no torch
            if kwargs.get("out") is None or kwargs.get("stream") is None:
                raise Fa4Error("fa4.%s needs PyTorch: pip install fa4gen[torch]" % fn.__name__) from None
        return fn(*args, **kwargs)
    return wrapper


def compile(config, device=0):
    """The cubin of a kernel config (canonical text or "key=value ..." as fa4gen explain takes it), through the
    disk cache (fa4_compile; needs no GPU, nor torch). FA4GEN_LOG=1 says which compiler and libraries were used."""
    lib = _load()
    lib.fa4_compile.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
                                ctypes.POINTER(ctypes.c_size_t)]
    ctx = context(device)
    buf, n = ctypes.c_void_p(), ctypes.c_size_t(0)
    _check(lib.fa4_compile(ctx, config.encode(), ctypes.byref(buf), ctypes.byref(n)), ctx)
    try:
        return ctypes.string_at(buf, n.value)
    finally:
        ctypes.CDLL(None).free(buf)


def version():
    """libfa4rt's version (fa4.h's FA4_VERSION_STRING; fa4gen --version says the same)."""
    lib = _load()
    lib.fa4_version.restype = ctypes.c_char_p
    return lib.fa4_version().decode()


def context(device=0):
    """The fa4 context of a CUDA device (created once, kept for the process)."""
    lib = _load()
    if device not in _ctx:
        opt = _Options(ctypes.sizeof(_Options), 3, device, 0, None, 1, 0, 0, 0)
        ctx = ctypes.c_void_p()
        _check(lib.fa4_create(ctypes.byref(ctx), ctypes.byref(opt)), None)
        _ctx[device] = ctx
    return _ctx[device]


_MHA_DTYPES = {"bfloat16": _BF16, "float16": _FP16, "float8_e4m3fn": _E4M3}
_MLA_DV = 512  # fa4.h: out holds the first 512 columns of kv (V)
_WINDOW_MAX = 1 << 30  # fa4.h FA4_WINDOW_MAX
FA4_MAX_SPLITS = 128  # fa4.h


def _dtype_code(torch, dt):
    return _MHA_DTYPES.get(_dtype_name(dt))


def _out_dtype(torch, q):
    """O's dtype: the input's, or bf16 for e4m3 inputs (the kernel writes bf16)."""
    return torch.bfloat16 if _dtype_code(torch, q.dtype) == _E4M3 else q.dtype


def _out_dtype_name(q_dtype_name):
    return "bfloat16" if q_dtype_name == "float8_e4m3fn" else q_dtype_name


class _Mha:
    """What the checks of one MHA call learn: the device, the shapes, the mode (varlen, paged)."""

    def __init__(self, q, k, v, varlen, paged):
        self.varlen, self.paged = varlen, paged
        dims = 3 if varlen else 4
        qd, self.q_strides = _tensor("q", q, dtype=tuple(_MHA_DTYPES), shape=(None,) * dims)
        self.device = _device("q", q)
        if self.device[1] is None:
            self.device = (self.device[0], 0)
        self.dtype = _dtype_name(q.dtype)
        self.q_dims = qd
        # varlen q is [total_q, H, D]: one batch of packed rows
        self.b, self.sq, self.h, self.d_qk = (1,) + qd if varlen else qd
        kv_dims = 4 if paged or not varlen else 3
        self.k_dims, self.k_strides = _tensor("k", k, dtype=self.dtype, shape=(None,) * kv_dims, device=self.device)
        self.v_dims, self.v_strides = _tensor("v", v, dtype=self.dtype, shape=(None,) * kv_dims, device=self.device)
        kd, vd = self.k_dims, self.v_dims
        if kd[:-1] != vd[:-1]:
            raise Fa4Error("v: shape %s; its leading dims must be k's %s" % (list(vd), list(kd[:-1])))
        self.h_kv, self.d_v = kd[-2], vd[-1]
        if not paged and not varlen and kd[0] != self.b:
            raise Fa4Error("k: shape %s; its batch must be q's %d" % (list(kd), self.b))
        self.sk = 0 if paged else kd[-3]


def _as4(dims, strides, varlen):
    """A varlen tensor [rows, H, D] as the C API's one batch of packed rows."""
    return ((1,) + dims, (0,) + strides) if varlen and len(dims) == 3 else (dims, strides)


def _args(q, k, v, o, lse, causal, window, softmax_scale, config, k_rope=None, descale=(None, None, None),
          sink=None, score_mod=None, aux=None, serving=(None, None, None, None, None), softcap=None, alibi_slopes=None):
    """The fa4_mha_args of a call, every argument checked (fa4.h's contract; the module's docstring):
    serving = (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, block_table, seqlen_k). o and lse are the outputs
    (lse may be None). Imports nothing."""
    cu_seqlens_q, cu_seqlens_k, max_seqlen_q, block_table, seqlen_k = serving
    varlen, paged = cu_seqlens_q is not None, block_table is not None
    m = _Mha(q, k, v, varlen, paged)
    dev = m.device
    a = _MhaArgs()
    a.size = ctypes.sizeof(_MhaArgs)
    a.dtype = _MHA_DTYPES[m.dtype]
    k_depth = m.d_qk - (_ROPE_DEPTH if k_rope is not None else 0)
    if m.k_dims[-1] != k_depth:
        raise Fa4Error("k: depth %d; expected %d (q's depth%s)" % (m.k_dims[-1], k_depth,
                       " minus k_rope's %d" % _ROPE_DEPTH if k_rope is not None else ""))
    o_shape = m.q_dims[:-1] + (m.d_v,)
    od, os_ = _tensor("out", o, dtype=_out_dtype_name(m.dtype), shape=o_shape, device=dev)
    tensors = [("q", m.q_dims, m.q_strides), ("k", m.k_dims, m.k_strides), ("v", m.v_dims, m.v_strides),
               ("o", od, os_)]
    if k_rope is not None:
        if paged or varlen:
            raise Fa4Error("k_rope: not supported with %s" % ("paged KV" if paged else "varlen (cu_seqlens_q)"))
        rd, rs = _tensor("k_rope", k_rope, dtype=m.dtype, shape=m.k_dims[:3] + (_ROPE_DEPTH,), device=dev)
        tensors.append(("k_rope", rd, rs))
        a.k_rope = _ptr("k_rope", k_rope)
    if lse is not None:
        # the kernel writes LSE packed: [B, H, Sq], varlen [H, total_q]
        lse_shape = (m.h, m.sq) if varlen else (m.b, m.h, m.sq)
        _tensor("lse", lse, dtype="float32", shape=lse_shape, device=dev, contiguous=True)
    a.q, a.k, a.v, a.o, a.lse = _ptr("q", q), _ptr("k", k), _ptr("v", v), _ptr("out", o), _ptr("lse", lse)
    a.batch, a.seqlen_q, a.heads_q, a.qk_depth = m.b, m.sq, m.h, m.d_qk
    a.seqlen_k, a.heads_kv, a.ov_depth = m.sk, m.h_kv, m.d_v
    for name, dims, strides in tensors:
        dims, strides = _as4(dims, strides, varlen)
        getattr(a, name + "_stride")[:] = _c_strides(dims, strides)
    a.softmax_scale = _float("softmax_scale", softmax_scale) if softmax_scale is not None else 0.0
    a.q_descale, a.k_descale, a.v_descale = [_float(n, d) if d is not None else 0.0
                                             for n, d in zip(("q_descale", "k_descale", "v_descale"), descale)]
    causal = _bool("causal", causal)
    if window is not None:
        if causal:
            raise Fa4Error("window: given with causal=True; a window (left, right=0) is the causal one")
        if not isinstance(window, (tuple, list)) or len(window) != 2:
            raise Fa4Error("window: %r; give (left, right), each -1 (unbounded) or 0..%d" % (window, _WINDOW_MAX))
        a.mask = _MASK_WINDOW
        a.window_left = _int("window[0]", window[0], -1, _WINDOW_MAX)
        a.window_right = _int("window[1]", window[1], -1, _WINDOW_MAX)
    else:
        a.mask = _MASK_CAUSAL if causal else _MASK_NONE
    a.config = _str("config", config)
    if sink is not None:
        _tensor("sink", sink, dtype="float32", shape=(m.h,), device=dev, contiguous=True)
        a.sink = _ptr("sink", sink)
    if softcap is not None:
        a.softcap = _float("softcap", softcap)
        if a.softcap < 0:
            raise Fa4Error("softcap: %r; give a cap > 0, or 0 / None for none" % (softcap,))
    if alibi_slopes is not None:
        if hasattr(alibi_slopes, "dim") and alibi_slopes.dim() == 2:
            raise Fa4Error("alibi_slopes: shape %s; fa4 takes one slope per query head, float32 [%d] (FlashAttention's "
                           "per-batch [batch, nheads] slopes are not supported)" % (list(alibi_slopes.shape), m.h))
        _tensor("alibi_slopes", alibi_slopes, dtype="float32", shape=(m.h,), device=dev, contiguous=True)
        a.alibi_slopes = _ptr("alibi_slopes", alibi_slopes)
    a.score_mod = _str("score_mod", score_mod)
    if aux is not None:
        _tensor("aux", aux, device=dev)  # opaque: the score_mod indexes it, the runtime checks where it lives
        a.score_mod_aux = _ptr("aux", aux)
    _serving(a, m, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, block_table, seqlen_k)
    return a


def _serving(a, m, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, block_table, seqlen_k):
    """varlen (cu_seqlens_q) and paged KV (block_table) fields of the args (fa4.h has the contract)."""
    dev = m.device
    if m.varlen:
        cd, _ = _tensor("cu_seqlens_q", cu_seqlens_q, dtype="int32", shape=(None,), device=dev, contiguous=True)
        if cd[0] < 2:
            raise Fa4Error("cu_seqlens_q: %d entries; give batch + 1 >= 2" % cd[0])
        a.batch = cd[0] - 1
        a.cu_seqlens_q = _ptr("cu_seqlens_q", cu_seqlens_q)
        if cu_seqlens_k is not None:
            if m.paged:
                raise Fa4Error("cu_seqlens_k: given with block_table; paged KV takes each sequence's kv length "
                               "from seqlen_k")
            _tensor("cu_seqlens_k", cu_seqlens_k, dtype="int32", shape=(a.batch + 1,), device=dev, contiguous=True)
            a.cu_seqlens_k = _ptr("cu_seqlens_k", cu_seqlens_k)
        elif not m.paged:
            raise Fa4Error("cu_seqlens_k: None; varlen (cu_seqlens_q) needs it, or paged KV (block_table)")
        if max_seqlen_q is None:
            raise Fa4Error("max_seqlen_q: needed with cu_seqlens_q (the longest sequence; sizes the grid)")
        a.max_seqlen_q = _int("max_seqlen_q", max_seqlen_q, 1, m.sq)
    elif cu_seqlens_k is not None or max_seqlen_q is not None:
        raise Fa4Error("%s: given without cu_seqlens_q" % ("cu_seqlens_k" if cu_seqlens_k is not None
                                                            else "max_seqlen_q"))
    if not m.paged:
        if seqlen_k is not None:
            raise Fa4Error("seqlen_k: given without block_table (it is paged KV's per-sequence kv length)")
        return
    bd, _ = _tensor("block_table", block_table, dtype="int32", shape=(a.batch, None), device=dev, contiguous=True)
    if seqlen_k is None:
        raise Fa4Error("seqlen_k: None; paged KV (block_table) needs each sequence's kv length")
    _tensor("seqlen_k", seqlen_k, dtype="int32", shape=(a.batch,), device=dev, contiguous=True)
    a.block_table, a.seqlens_k = _ptr("block_table", block_table), _ptr("seqlen_k", seqlen_k)
    a.num_pages, a.page_size, a.max_pages = m.k_dims[0], m.k_dims[1], bd[1]
    a.seqlen_k = 0


def _split_args(a, num_splits, workspace, device):
    if num_splits is not None:
        a.num_splits = _int("num_splits", num_splits, 0, INT32[1])
    if workspace is not None:
        _tensor("workspace", workspace, device=device, contiguous=True)
        a.workspace, a.workspace_size = _ptr("workspace", workspace), _nbytes("workspace", workspace)


def _empty(torch, shape, dtype, device):
    return torch.empty(shape, dtype=dtype, device=torch.device(device[0], device[1]))


def _alloc_out(torch, q, shape, dtype, device):
    """out as FlashAttention allocates it: torch.empty_like(q) when it has q's shape and dtype (q's layout when q
    is dense, else packed), else packed. The fast path allocates the same way, so a remembered call's out strides
    are the ones its first call checked."""
    if dtype == q.dtype and tuple(shape) == tuple(q.shape):
        return torch.empty_like(q)
    return _empty(torch, shape, dtype, device)


# ---------------------------------------------------------------- the fast path (issue 27 item 4)
# A call whose signature was seen (every tensor's shape, strides, dtype and device; every other argument's value
# and type) reuses the fa4_mha_args its first call built after every check passed: only the data pointers (and the
# outputs it allocates) change. What can differ between two calls of one signature is checked on each: the
# pointers (nonzero and in range here; alignment, allocation and device by libfa4rt, whose call memo runs the
# checks that read a pointer on every call); dtypes and devices are part of the signature. A signature not seen
# takes the full path, every check included.

_OPT_NAMES = ("out", "lse", "k_rope", "sink", "aux", "workspace", "cu_seqlens_q", "cu_seqlens_k", "block_table",
              "seqlen_k", "alibi_slopes")
_OPT_FIELDS = ("o", "lse", "k_rope", "sink", "score_mod_aux", "workspace", "cu_seqlens_q", "cu_seqlens_k",
               "block_table", "seqlens_k", "alibi_slopes")
_PTR_MAX = 2 ** 64
_fast = {}
_FAST_MAX = 512


class _Prepared:
    """A remembered call: the args' bytes, which optional tensors it has, how it allocates out and lse."""
    __slots__ = ("tpl", "keep", "opt", "out", "lse", "ctx", "dev", "fn")


def _meta(t):
    return None if t is None else (t.shape, t.stride(), t.dtype, t.device)


def _set_ptrs(a, fields, tensors):
    """Each given tensor's data pointer into its field of a; False (a left partly set) when one is 0 or out of range."""
    for field, t in zip(fields, tensors):
        if t is not None:
            p = t.data_ptr()
            if not 0 < p < _PTR_MAX:
                return False
            setattr(a, field, p)
    return True


def _raw_stream(torch, index):
    """torch's current stream on device `index` as a CUstream handle (the cheap way where torch has it)."""
    get = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return get(index) if get is not None else torch.cuda.current_stream(index).cuda_stream


def _fast_call(ent, q, k, v, opt, return_lse, stream):
    """The call through a remembered signature; None when a pointer sends it down the full path."""
    a = _MhaArgs.from_buffer_copy(ent.tpl)
    if not _set_ptrs(a, ("q", "k", "v"), (q, k, v)):
        return None
    out, lse = opt[0], opt[1]
    torch = _torch_mod
    if ent.out is not None:  # allocated here as the first call did: (shape, dtype, like q)
        out = torch.empty_like(q) if ent.out[2] else _empty(torch, ent.out[0], ent.out[1], ent.dev)
        a.o = out.data_ptr()
    if ent.lse is not None:
        lse = _empty(torch, ent.lse, torch.float32, ent.dev)
        a.lse = lse.data_ptr()
    for i in ent.opt:  # the optional tensors the call has (out and lse when given)
        p = (out if i == 0 else lse if i == 1 else opt[i]).data_ptr()
        if not 0 < p < _PTR_MAX:
            return None
        setattr(a, _OPT_FIELDS[i], p)
    if stream is None:
        handle = _raw_stream(torch, ent.dev[1])
    else:
        handle = _stream(stream, ent.dev)
    _check(ent.fn(ent.ctx, ctypes.byref(a), handle), ent.ctx)
    return (out, lse) if return_lse else out


@_needs_torch
def mha_fwd(q, k, v, causal=False, softmax_scale=None, return_lse=False, config=None, out=None, window=None,
            k_rope=None, q_descale=None, k_descale=None, v_descale=None, sink=None, score_mod=None, aux=None,
            num_splits=None, workspace=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
            block_table=None, seqlen_k=None, kv_early=False, lse=None, stream=None, softcap=None,
            alibi_slopes=None):
    """Attention forward on [B, S, H, D] tensors; returns out (and lse when asked).

    out: the output tensor ([B, Sq, H, Dv], q's dtype or bf16 for e4m3; allocated with torch when None, as
    torch.empty_like(q) where the shapes agree); lse: an fp32 tensor [B, H, Sq] the kernel writes (allocated when
    None and return_lse); stream: a CUstream handle (int) or a torch stream, torch's current stream when None.
    With out, lse (when asked) and stream given, torch is not needed.

    Variable-length batches (sm90a, sm100a): q [total_q, H, D] packed with cu_seqlens_q (int32 [B + 1], CUDA) and
    max_seqlen_q (int); k, v [total_k, Hkv, D] with cu_seqlens_k; out [total_q, H, D]; lse [H, total_q].
    Paged KV (sm90a, sm100a): k, v [num_pages, page_size, Hkv, D] page pools, block_table int32 [B, max_pages] and
    seqlen_k int32 [B] (each sequence's kv length), with dense or varlen q. Nothing is copied to the host:
    the kernel clamps the device tables (fa4.h).

    k_rope: MLA prefill (sm100a, q depth 192): K's last 64 columns as their own [B, Sk, Hkv, 64] tensor,
    with k holding the first 128. q/k/v_descale: per-tensor dequantisation scales (None = 1), folded into
    the softmax scale (q, k) and the output (v). float8_e4m3fn inputs give a bf16 output.
    sink: float32 [heads_q] sink logits, in each row's softmax denominator only (lse excludes them).
    softcap: > 0: every scaled score s becomes softcap * tanh(s / softcap) (None or 0: none). alibi_slopes:
    float32 [heads_q]: score -= slope[h] * |i + Sk - Sq - j| (FlashAttention's ALiBi). Both built in (no NVRTC).
    score_mod: CUDA C source defining __device__ float score_mod(float s, int b, int h, int q, int k,
    const void *aux), applied to every scaled score (softmax_scale * q.k) before the mask (fa4.h has the
    contract); aux: a CUDA tensor whose data pointer the mod receives.
    num_splits: split-KV (None/0: the runtime picks when a workspace is given -- on sm90a a decode shape without
    one gets a cluster split, which needs none --, 1: no split, N: N splits);
    workspace: a contiguous CUDA tensor of at least mha_split_count(...)[1] bytes (scratch, reused by the caller).
    kv_early: promise that K/V rows before each sequence's newest seqlen_q are not written by a kernel that may
    still run when this call starts (the one just before it on the stream, or earlier ones a programmatic launch
    overlaps; a decode step's KV append writes only the newest); the split kernel (dense K/V) then streams its
    first K/V blocks under that kernel's tail (fa4.h, fa4_mha_args.kv_early). Without it the split kernel only
    prefetches them into L2 there (config word prefetch), which asks nothing.

    A call whose signature (shapes, strides, dtypes, devices, other arguments) matches an earlier accepted call
    reuses what that call's checks built and only reads the new pointers (fa4_mha_fwd checks them)."""
    opt = (out, lse, k_rope, sink, aux, workspace, cu_seqlens_q, cu_seqlens_k, block_table, seqlen_k, alibi_slopes)
    scal = (causal, softmax_scale, return_lse, config, window, q_descale, k_descale, v_descale, score_mod, num_splits,
            max_seqlen_q, kv_early, softcap, stream is None)
    try:
        key = (q.shape, q.stride(), q.dtype, q.device, k.shape, k.stride(), k.dtype, k.device, v.shape, v.stride(),
               v.dtype, v.device, None if (out is None and lse is None and k_rope is None and sink is None and aux is None
                                           and workspace is None and cu_seqlens_q is None and cu_seqlens_k is None
                                           and block_table is None and seqlen_k is None and alibi_slopes is None)
               else tuple(map(_meta, opt)), scal, tuple(map(type, scal)),
               window.__class__ is tuple and tuple(map(type, window)))
        ent = _fast.get(key)
    except (TypeError, AttributeError):  # an unhashable argument, or no tensor: the full path says what is wrong
        key = ent = None
    if ent is not None:
        r = _fast_call(ent, q, k, v, opt, return_lse, stream)
        if r is not None:
            return r
    varlen = cu_seqlens_q is not None
    m = _Mha(q, k, v, varlen, block_table is not None)  # q, k, v first: outputs are allocated on q's device
    return_lse = _bool("return_lse", return_lse)
    out_spec = lse_spec = None
    if out is None:
        torch = _torch("out")
        shape, dt = m.q_dims[:-1] + (m.d_v,), _out_dtype(torch, q)
        out = _alloc_out(torch, q, shape, dt, m.device)
        out_spec = (shape, dt, dt == q.dtype and shape == tuple(q.shape))
    if lse is None and return_lse:
        torch = _torch("lse")
        lse_spec = (m.h, m.sq) if varlen else (m.b, m.h, m.sq)
        lse = _empty(torch, lse_spec, torch.float32, m.device)
    a = _args(q, k, v, out, lse, causal, window, softmax_scale, config, k_rope, (q_descale, k_descale, v_descale),
              sink, score_mod, aux, (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, block_table, seqlen_k), softcap,
              alibi_slopes)
    _split_args(a, num_splits, workspace, m.device)
    a.kv_early = 1 if _bool("kv_early", kv_early) else 0
    handle = _stream(stream, m.device)
    ctx = context(m.device[1])
    fn = _load().fa4_mha_fwd
    _check(fn(ctx, ctypes.byref(a), ctypes.c_void_p(handle)), ctx)
    if key is not None:  # accepted: remember it (what needed torch to run has imported it: _torch_mod)
        ent = _Prepared()
        ent.tpl, ent.keep, ent.ctx, ent.dev, ent.fn = bytes(a), a, ctx, m.device, fn
        ent.out, ent.lse = out_spec, lse_spec
        ent.opt = tuple(i for i, t in enumerate(opt) if t is not None and i > 1) + \
            ((0,) if out_spec is None else ()) + ((1,) if lse_spec is None and opt[1] is not None else ())
        if len(_fast) >= _FAST_MAX:
            _fast.clear()
        _fast[key] = ent
    return (out, lse) if return_lse else out


# ---------------------------------------------------------------- the FlashAttention API (issue 27 item 2)
# flash_attn_func, flash_attn_varlen_func and flash_attn_with_kvcache take FlashAttention's arguments with their
# meanings, defaults and return shapes (FA2's, with FA3/FA4's leading order: softmax_scale and causal right after
# the tensors; dropout_p, deterministic, return_attn_probs keyword-only), so code moves by its import line. What
# FlashAttention has and fa4 does not (dropout, a backward pass, rotary embedding in the kernel, cache_leftpad,
# per-batch ALiBi slopes) is refused with an Fa4Error naming the argument, never ignored.

_DEF_WINDOW = (-1, -1)
# the FlashAttention entry points check for torch themselves (@_needs_torch) and call mha_fwd's body: a second
# wrapper's *args/**kwargs repacking is about a microsecond of an eager call's ~15 (bench/host_cost.py)
_mha_fwd = mha_fwd.__wrapped__


def _fa_refuse(dropout_p, deterministic, return_attn_probs):
    if not (isinstance(dropout_p, numbers.Real) and not isinstance(dropout_p, bool) and dropout_p == 0):
        raise Fa4Error("dropout_p: %r; fa4 has no attention dropout (FlashAttention applies it in training): give 0.0"
                       % (dropout_p,))
    _bool("deterministic", deterministic)  # the forward is deterministic; the backward (autograd) takes it
    if return_attn_probs is not False:
        raise Fa4Error("return_attn_probs: %r; fa4 does not return the attention probabilities (FlashAttention "
                       "returns them for testing only): use return_lse=True for the log-sum-exp" % (return_attn_probs,))


def _fa_mask(causal, window_size):
    """(causal, window) for mha_fwd from FlashAttention's causal and window_size (left, right), -1 (or None) =
    unbounded; with causal, FlashAttention sets right = 0."""
    if (causal is True or causal is False) and (window_size is _DEF_WINDOW or window_size == _DEF_WINDOW) and \
            window_size.__class__ is tuple and window_size[0].__class__ is int and window_size[1].__class__ is int:
        return causal, None
    causal = _bool("causal", causal)
    if window_size is None:
        window_size = _DEF_WINDOW
    if not isinstance(window_size, (tuple, list)) or len(window_size) != 2:
        raise Fa4Error("window_size: %r; give (left, right), each -1 (unbounded) or 0..%d" % (window_size, _WINDOW_MAX))
    left, right = [-1 if w is None else _int("window_size[%d]" % i, w, -1, _WINDOW_MAX)
                   for i, w in enumerate(window_size)]
    if causal:
        return (True, None) if left < 0 else (False, (left, 0))
    return (False, None) if left < 0 and right < 0 else (False, (left, right))


def _fa_lse_flag(return_lse, return_softmax_lse):
    """return_lse, or FlashAttention 2's name for it (return_softmax_lse) when given."""
    if return_softmax_lse is None:
        return return_lse
    if return_lse is not False:
        raise Fa4Error("return_softmax_lse: given with return_lse; they are one flag (FlashAttention 2's name and "
                       "FlashAttention 3/4's): give one")
    return return_softmax_lse


@_needs_torch
def flash_attn_func(q, k, v, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                    return_lse=False, *, dropout_p=0.0, deterministic=False, return_attn_probs=False, out=None,
                    lse=None, stream=None):
    """FlashAttention's flash_attn_func: q [B, Sq, H, D], k, v [B, Sk, Hkv, D] (Hkv divides H: GQA/MQA), CUDA
    bf16/fp16 (float8_e4m3fn: bf16 out); returns out [B, Sq, H, Dv], or (out, lse) with lse fp32 [B, H, Sq]
    (natural log) when return_lse. softmax_scale None: 1/sqrt(D). causal: bottom-right aligned (query i sees key
    j <= i + Sk - Sq). window_size (left, right): keys i + Sk - Sq - left .. i + Sk - Sq + right, -1 unbounded
    (causal sets right = 0). softcap > 0: scores become softcap * tanh(score / softcap). alibi_slopes: fp32
    [H]; score -= slope[h] * |i + Sk - Sq - j|. dropout_p != 0 and return_attn_probs=True are refused (no
    dropout). deterministic: the forward is deterministic either way; fa4_torch.flash_attn_func's backward (and
    mha_bwd(deterministic=True)) then sums dQ in a fixed order. out, lse, stream: fa4's extras (mha_fwd)."""
    if dropout_p or deterministic or return_attn_probs:
        _fa_refuse(dropout_p, deterministic, return_attn_probs)
    c, w = _fa_mask(causal, window_size)
    return _mha_fwd(q, k, v, causal=c, softmax_scale=softmax_scale, return_lse=return_lse, window=w, out=out,
                    lse=lse, stream=stream, softcap=softcap, alibi_slopes=alibi_slopes)


def _seqlens_from_cu(cu):
    """Per-sequence lengths int32 [B] from cumulative ones [B + 1], on the device (no host sync)."""
    return cu[1:] - cu[:-1]


@_needs_torch
def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=None,
                           causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False,
                           block_table=None, *, dropout_p=0.0, deterministic=False, return_attn_probs=False,
                           out=None, lse=None, stream=None):
    """FlashAttention's flash_attn_varlen_func: q [total_q, H, D], k, v [total_k, Hkv, D] packed, cu_seqlens_q /
    cu_seqlens_k int32 [B + 1] (CUDA), max_seqlen_q / max_seqlen_k ints; returns out [total_q, H, Dv], or (out,
    lse) with lse fp32 [H, total_q]. With block_table (int32 [B, max_blocks]), k and v are paged caches
    [num_blocks, page_block_size, Hkv, D] and cu_seqlens_k gives each sequence's kv length (its differences,
    taken on the device); page_block_size a power of two in 16..256. Masks per sequence, as flash_attn_func."""
    if dropout_p or deterministic or return_attn_probs:
        _fa_refuse(dropout_p, deterministic, return_attn_probs)
    _int("max_seqlen_k", max_seqlen_k, 0, INT32[1])
    c, w = _fa_mask(causal, window_size)
    seqlen_k = None
    if block_table is not None:
        _tensor("cu_seqlens_k", cu_seqlens_k, dtype="int32", shape=(None,), contiguous=True)
        seqlen_k, cu_seqlens_k = _seqlens_from_cu(cu_seqlens_k), None
    return _mha_fwd(q, k, v, causal=c, softmax_scale=softmax_scale, return_lse=return_lse, window=w, out=out,
                    lse=lse, stream=stream, softcap=softcap, alibi_slopes=alibi_slopes, cu_seqlens_q=cu_seqlens_q,
                    cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, block_table=block_table, seqlen_k=seqlen_k)


# ---------------------------------------------------------------- the KV-cache append (issue 27)
# fa4_kv_append (runtime/fa4.h): the new K, V rows into a dense or paged cache by one kernel launch, and the
# lengths after the append for the attention that follows. A call whose signature was seen reuses its args.

_kva_fast = {}


def _kv_append_args(k_cache, v_cache, k, v, cache_seqlens, cache_batch_idx, block_table, seqlens_out):
    """The fa4_kv_append_args of a call, every argument checked (fa4.h's contract), and the device. Imports
    nothing."""
    kd, ks = _tensor("k", k, dtype=tuple(_MHA_DTYPES), shape=(None,) * 4)
    dev = _device("k", k)
    dev = (dev[0], 0 if dev[1] is None else dev[1])
    dt = _dtype_name(k.dtype)
    b, s_new, h, d_k = kd
    vd, vs = _tensor("v", v, dtype=dt, shape=(b, s_new, h, None), device=dev)
    paged = block_table is not None
    cd, cs = _tensor("k_cache", k_cache, dtype=dt, shape=(None, None, h, d_k), device=dev)
    vcd, vcs = _tensor("v_cache", v_cache, dtype=dt, shape=(cd[0], cd[1], h, vd[3]), device=dev)
    a = _KvAppendArgs()
    a.size = ctypes.sizeof(_KvAppendArgs)
    a.dtype = _MHA_DTYPES[dt]
    a.k, a.v, a.k_cache, a.v_cache = _ptr("k", k), _ptr("v", v), _ptr("k_cache", k_cache), _ptr("v_cache", v_cache)
    a.batch, a.s_new, a.heads_kv, a.k_depth, a.v_depth = b, s_new, h, d_k, vd[3]
    a.k_stride[:], a.v_stride[:] = _c_strides(kd, ks), _c_strides(vd, vs)
    a.k_cache_stride[:], a.v_cache_stride[:] = _c_strides(cd, cs), _c_strides(vcd, vcs)
    if paged:
        if cache_batch_idx is not None:
            raise Fa4Error("cache_batch_idx: given with block_table; the table already says where each sequence's "
                           "pages are")
        bd, _ = _tensor("block_table", block_table, dtype="int32", shape=(b, None), device=dev, contiguous=True)
        a.block_table, a.max_pages, a.num_pages, a.page_size = _ptr("block_table", block_table), bd[1], cd[0], cd[1]
    else:
        a.cache_batch, a.cache_rows = cd[0], cd[1]
        if cache_batch_idx is not None:
            _tensor("cache_batch_idx", cache_batch_idx, dtype="int32", shape=(b,), device=dev, contiguous=True)
            a.cache_batch_idx = _ptr("cache_batch_idx", cache_batch_idx)
    if isinstance(cache_seqlens, numbers.Integral) and not isinstance(cache_seqlens, bool):
        a.cache_seqlen = _int("cache_seqlens", cache_seqlens, 0, INT32[1])
    else:
        _tensor("cache_seqlens", cache_seqlens, dtype="int32", shape=(b,), device=dev, contiguous=True)
        a.cache_seqlens = _ptr("cache_seqlens", cache_seqlens)
    if seqlens_out is not None:
        _tensor("seqlens_out", seqlens_out, dtype="int32", shape=(b,), device=dev, contiguous=True)
        a.seqlens_out = _ptr("seqlens_out", seqlens_out)
    return a, dev


_KVA_PTRS = (("k", 2), ("v", 3), ("k_cache", 0), ("v_cache", 1))
_KVA_OPT = ("cache_seqlens", "cache_batch_idx", "block_table", "seqlens_out")


@_needs_torch
def kv_append(k_cache, v_cache, k, v, cache_seqlens, cache_batch_idx=None, block_table=None, seqlens_out=None,
              stream=None):
    """Append new K, V rows to a KV cache in place, by one kernel launch (fa4_kv_append; fa4.h has the contract).

    k, v [B, S_new, Hkv, D] (bf16, fp16 or float8_e4m3fn; the caches' dtype) go to positions cache_seqlens[b] .. +
    S_new of sequence b in a dense cache k_cache, v_cache [B_cache, S_max, Hkv, D] (row cache_batch_idx[b], int32
    [B], or b) or a paged one [num_pages, page_size, Hkv, D] through block_table (int32 [B, max_pages]).
    cache_seqlens: int32 [B] (CUDA), or an int for every sequence (checked to fit). seqlens_out (int32 [B], CUDA,
    optional) receives cache_seqlens + S_new. A token whose position lies outside the cache, or whose page lies
    outside the pool (a negative length or table entry, one past the end), is not written. Returns seqlens_out.
    stream: a CUstream handle or a torch stream (torch's current one when None)."""
    opt = (cache_seqlens, cache_batch_idx, block_table, seqlens_out)
    try:
        key = (_meta(k_cache), _meta(v_cache), _meta(k), _meta(v), cache_seqlens if isinstance(cache_seqlens, int)
               else _meta(cache_seqlens), type(cache_seqlens), _meta(cache_batch_idx), _meta(block_table),
               _meta(seqlens_out), stream is None)
        ent = _kva_fast.get(key)
    except (TypeError, AttributeError):  # the full path says what is wrong
        key = ent = None
    if ent is not None:
        a = _KvAppendArgs.from_buffer_copy(ent[0])
        ptrs = (k_cache.data_ptr(), v_cache.data_ptr(), k.data_ptr(), v.data_ptr())
        if all(0 < p < _PTR_MAX for p in ptrs):
            a.k_cache, a.v_cache, a.k, a.v = ptrs
            ok = True
            for name, t in zip(_KVA_OPT, opt):
                if t is not None and not isinstance(t, int):
                    p = t.data_ptr()
                    ok &= 0 < p < _PTR_MAX
                    setattr(a, name, p)
            if ok:
                handle = _raw_stream(_torch_mod, ent[1][1]) if stream is None else _stream(stream, ent[1])
                _check(ent[3](ent[2], ctypes.byref(a), handle), ent[2])
                return seqlens_out
    a, dev = _kv_append_args(k_cache, v_cache, k, v, cache_seqlens, cache_batch_idx, block_table, seqlens_out)
    handle = _stream(stream, dev)
    ctx = context(dev[1])
    fn = _load().fa4_kv_append
    _check(fn(ctx, ctypes.byref(a), ctypes.c_void_p(handle)), ctx)
    if key is not None:
        if len(_kva_fast) >= _FAST_MAX:
            _kva_fast.clear()
        _kva_fast[key] = (bytes(a), dev, ctx, fn)
    return seqlens_out


class _View:
    """A tensor description over another tensor's memory: its pointer, dtype and device, with its own shape and
    element strides (a slice or a reshape of a cache, handed to mha_fwd without a torch op)."""

    def __init__(self, t, shape, strides):
        self._t, self.shape, self._st = t, tuple(shape), tuple(strides)
        self.dtype, self.device, self.is_cuda = t.dtype, t.device, getattr(t, "is_cuda", True)

    def data_ptr(self):
        return self._t.data_ptr()

    def stride(self):
        return self._st

    def dim(self):
        return len(self.shape)

    def numel(self):
        return math.prod(self.shape)

    def element_size(self):
        return self._t.element_size()

    def is_contiguous(self):
        st, acc = [], 1
        for n in reversed(self.shape):
            st.append(acc)
            acc *= n
        return self._st == tuple(reversed(st))


_page_tables = {}  # (rows, pages per row, device) -> int32 [rows, pages per row]: the dense cache as pages
_aranges = {}  # (n, device) -> int32 arange(n), made once


def _dense_pages(s_max):
    """The page size a dense cache of s_max rows per sequence is read through: the largest power of two in
    16..256 dividing s_max, or None."""
    for p in (256, 128, 64, 32, 16):
        if s_max % p == 0:
            return p
    return None


def _dense_table(torch, b, per, rows, dev, cache_batch_idx):
    """The block table that reads a dense cache of `rows` sequences as pages, `per` pages a sequence: row r's pages
    are r * per .. + per - 1. Sequence b reads row cache_batch_idx[b] (clamped to -1 .. rows, whose pages lie
    outside the pool: such a sequence sees no key) or row b (a table made once per shape)."""
    if cache_batch_idx is None:
        t = _page_tables.get((b, per, dev))
        if t is None:
            ar = _arange32(torch, max(b, per), dev)
            t = _page_tables.setdefault((b, per, dev), ar[None, :per].add(ar[:b, None], alpha=per).contiguous())
        return t
    return _arange32(torch, per, dev)[None, :].add(cache_batch_idx.clamp(-1, rows)[:, None], alpha=per)


def _arange32(torch, n, dev):
    t = _aranges.get((n, dev))
    if t is None:
        t = _aranges.setdefault((n, dev), torch.arange(n, dtype=torch.int32, device=torch.device(dev[0], dev[1])))
    return t


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, cache_batch_idx=None,
                            block_table=None, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            num_splits=0, return_lse=False, *, alibi_slopes=None, rotary_cos=None, rotary_sin=None,
                            cache_leftpad=None, rotary_interleaved=True, return_softmax_lse=None, out=None):
    """FlashAttention's flash_attn_with_kvcache (decode, and chunked prefill against a cache).

    q [B, Sq, H, D]; k_cache, v_cache [B_cache, S_max, Hkv, D] (dense, B_cache >= B; cache_batch_idx int32 [B]
    picks row cache_batch_idx[b] for batch b, default b) or [num_blocks, page_block_size, Hkv, D] (paged, with
    block_table int32 [B, max_blocks]). cache_seqlens: int32 [B] (CUDA) or an int, the tokens already in each cache
    row (None: the dense cache is full). k, v [B, S_new, Hkv, D] (optional, together): written into the caches at
    positions cache_seqlens[b] .. + S_new, in place and on the current stream before the attention, by one kernel
    (fa4.kv_append; no host sync), which also computes the lengths the attention then runs over (cache_seqlens +
    S_new keys; causal: bottom-right aligned, so query i of Sq sees keys up to cache_seqlens + S_new - Sq + i).
    Returns out [B, Sq, H, Dv], or (out, lse [B, H, Sq] fp32) with return_lse (FlashAttention 2:
    return_softmax_lse). num_splits: 0 lets the runtime pick (on sm90a a decode shape gets a cluster split), 1 none,
    N forces N (a workspace is allocated). rotary_cos / rotary_sin / cache_leftpad are refused (apply the rotary
    embedding before the call).

    Launches: the append (when k, v are given) and the attention; a dense cache with one int length is read as a
    view of its first B rows and cache_seqlens + S_new positions, otherwise (per-row lengths, cache_batch_idx,
    paged) through pages (a dense cache's S_max must then be a multiple of 16), and cache_batch_idx costs two
    small torch ops more (its page table). Device values have one meaning for every bit pattern (fa4.h,
    fa4_kv_append): a new token whose position lies outside the cache, or whose row or page lies outside it (a
    negative length or table entry, cache_batch_idx outside [0, B_cache)), is not written (FlashAttention leaves
    that undefined); lengths below 0 read as 0 keys, past the cache as the whole cache; a sequence whose
    cache_batch_idx lies outside the cache sees no key (out 0, lse -inf)."""
    for name, val in (("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin), ("cache_leftpad", cache_leftpad)):
        if val is not None:
            raise Fa4Error("%s: given; fa4's kernels apply no rotary embedding and take no left padding: rotate q and "
                           "k (and pad on the right) before the call" % name)
    if rotary_interleaved is not True:
        _bool("rotary_interleaved", rotary_interleaved)
    return_lse = _fa_lse_flag(return_lse, return_softmax_lse)
    c, w = _fa_mask(causal, window_size)
    torch = _torch("flash_attn_with_kvcache")
    if (k is None) != (v is None):
        raise Fa4Error("%s: None while %s is given; the new tokens come as k and v together"
                       % ("v" if v is None else "k", "k" if v is None else "v"))
    qd, _ = _tensor("q", q, shape=(None, None, None, None))
    dev = _device("q", q)
    dev = (dev[0], 0 if dev[1] is None else dev[1])
    b = qd[0]
    paged = block_table is not None
    cd, cs = _tensor("k_cache", k_cache, shape=(None, None, None, None), device=dev)
    vd, vs = _tensor("v_cache", v_cache, shape=(cd[0], cd[1], cd[2], None), device=dev)
    s_new = 0
    if k is not None:
        kd, _ = _tensor("k", k, shape=(b, None, cd[2], cd[3]), device=dev)
        s_new = kd[1]
    if cache_batch_idx is not None:
        if paged:
            raise Fa4Error("cache_batch_idx: given with block_table; the table already says where each sequence's "
                           "pages are")
        _tensor("cache_batch_idx", cache_batch_idx, dtype="int32", shape=(b,), device=dev, contiguous=True)
    elif not paged and cd[0] < b:
        raise Fa4Error("k_cache: shape %s; its batch must be at least q's %d (without cache_batch_idx, batch b reads "
                       "cache row b)" % (list(cd), b))
    if paged:
        bd, _ = _tensor("block_table", block_table, dtype="int32", shape=(b, None), device=dev, contiguous=True)
    cap = bd[1] * cd[1] if paged else cd[1]  # positions a sequence can hold
    lens = host_len = None  # the lengths before the append: a device int32 [B], or one int for every sequence
    if cache_seqlens is None:
        if paged:
            raise Fa4Error("cache_seqlens: None with block_table; a paged cache needs each sequence's length")
        if k is not None:
            raise Fa4Error("cache_seqlens: None with k and v; the new tokens go after each row's cache_seqlens tokens")
        host_len = cd[1]
    elif isinstance(cache_seqlens, numbers.Integral) and not isinstance(cache_seqlens, bool):
        if _int("cache_seqlens", cache_seqlens, 0, INT32[1]) + s_new > cap:
            raise Fa4Error("cache_seqlens: %d with %d new tokens; the cache holds %d positions a sequence"
                           % (cache_seqlens, s_new, cap))
        host_len = int(cache_seqlens)
    else:
        _tensor("cache_seqlens", cache_seqlens, dtype="int32", shape=(b,), device=dev, contiguous=True)
        lens = cache_seqlens
    per_row = paged or cache_batch_idx is not None or lens is not None or host_len + s_new == 0
    handle = _stream(None, dev)
    seqlen_k = lens
    if k is not None:  # the append: one launch, which also writes the lengths the attention reads
        seqlen_k = _empty(torch, (b,), torch.int32, dev) if per_row else None
        kv_append(k_cache, v_cache, k, v, host_len if lens is None else lens, cache_batch_idx, block_table,
                  seqlens_out=seqlen_k, stream=handle)
    workspace = None
    num_splits = _int("num_splits", num_splits, 0, FA4_MAX_SPLITS)
    kw = dict(causal=c, softmax_scale=softmax_scale, return_lse=return_lse, window=w, out=out, softcap=softcap,
              alibi_slopes=alibi_slopes, num_splits=num_splits or None, stream=handle)
    if not per_row:  # dense, one length: the first B rows' first host_len + S_new positions, a view
        n = host_len + s_new
        kc, vc = _View(k_cache, (b, n) + cd[2:], cs), _View(v_cache, (b, n) + vd[2:], vs)
        if num_splits > 1:
            workspace = _split_workspace(torch, q, kc, vc, c, w, num_splits, None, None)
        return mha_fwd(q, kc, vc, workspace=workspace, **kw)
    if seqlen_k is None:  # no append: the lengths as they are
        seqlen_k = lens if lens is not None else torch.full((b,), host_len, dtype=torch.int32,
                                                            device=torch.device(dev[0], dev[1]))
    if paged:
        bt, kc, vc = block_table, k_cache, v_cache
    else:  # a dense cache with per-row lengths is read as pages of its rows
        page = _dense_pages(cd[1])
        if page is None or cs[0] != cd[1] * cs[1] or vs[0] != vd[1] * vs[1]:
            raise Fa4Error("k_cache: shape %s with strides %s; with per-row lengths (cache_seqlens a tensor, or "
                           "cache_batch_idx) fa4 reads a dense cache through pages: its rows per sequence must be a "
                           "multiple of 16 and its batch stride rows x row stride" % (list(cd), list(cs)))
        per = cd[1] // page
        bt = _dense_table(torch, b, per, cd[0], dev, cache_batch_idx)
        kc = _View(k_cache, (cd[0] * per, page) + cd[2:], (page * cs[1],) + cs[1:])
        vc = _View(v_cache, (vd[0] * per, page) + vd[2:], (page * vs[1],) + vs[1:])
    if num_splits > 1:
        workspace = _split_workspace(torch, q, kc, vc, c, w, num_splits, bt, seqlen_k)
    return mha_fwd(q, kc, vc, block_table=bt, seqlen_k=seqlen_k, workspace=workspace, **kw)


def _split_workspace(torch, q, k, v, causal, window, num_splits, block_table, seqlen_k):
    _, nbytes = mha_split_count(q, k, v, causal=causal, window=window, num_splits=num_splits, block_table=block_table,
                                seqlen_k=seqlen_k)
    return torch.empty(max(nbytes, 16), dtype=torch.uint8, device=q.device) if nbytes else None


def _shape_args(q, k, v, causal, config, window, k_rope, sink, score_mod, serving):
    """The args of mha_config / mha_split_count, which read shapes only: out stands in as q (same rows,
    never written) when the depths agree, else as a description with q's pointer."""
    m = _Mha(q, k, v, serving[0] is not None, serving[3] is not None)
    o = q if m.d_v == m.d_qk and _out_dtype_name(m.dtype) == m.dtype else _Like(q, m.q_dims[:-1] + (m.d_v,),
                                                                                 _out_dtype_name(m.dtype))
    return m, _args(q, k, v, o, None, causal, window, None, config, k_rope, sink=sink, score_mod=score_mod,
                    serving=serving)


class _Like:
    """A packed tensor description over another tensor's pointer and device (the shape-only calls' out)."""

    def __init__(self, t, shape, dtype):
        self._t, self.shape, self.dtype, self.device = t, tuple(shape), dtype, t.device
        self.is_cuda = getattr(t, "is_cuda", True)

    def data_ptr(self):
        return self._t.data_ptr()

    def stride(self):
        st, acc = [], 1
        for n in reversed(self.shape):
            st.append(acc)
            acc *= n
        return tuple(reversed(st))

    def dim(self):
        return len(self.shape)

    def numel(self):
        return math.prod(self.shape)

    def element_size(self):
        return 1 if self.dtype == "float8_e4m3fn" else 2

    def is_contiguous(self):
        return True


@_needs_torch
def mha_config(q, k, v, causal=False, config=None, window=None, k_rope=None, sink=None, score_mod=None):
    """The canonical kernel config mha_fwd would use for these tensors."""
    m, a = _shape_args(q, k, v, causal, config, window, k_rope, sink, score_mod, (None,) * 5)
    ctx = context(m.device[1])
    buf = ctypes.create_string_buffer(512)
    _check(_load().fa4_mha_config(ctx, ctypes.byref(a), buf, 512), ctx)
    return buf.value.decode()


@_needs_torch
def mha_split_count(q, k, v, causal=False, config=None, window=None, num_splits=None, cu_seqlens_q=None,
                    cu_seqlens_k=None, max_seqlen_q=None, block_table=None, seqlen_k=None):
    """(splits, workspace bytes) mha_fwd would use for these tensors with a workspace (fa4_mha_split_count);
    the varlen and paged keywords as mha_fwd takes them. 0 bytes: one split, which needs no workspace."""
    m, a = _shape_args(q, k, v, causal, config, window, None, None, None,
                       (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, block_table, seqlen_k))
    _split_args(a, num_splits, None, m.device)
    ctx = context(m.device[1])
    n, b = ctypes.c_int(0), ctypes.c_size_t(0)
    _check(_load().fa4_mha_split_count(ctx, ctypes.byref(a), ctypes.byref(n), ctypes.byref(b)), ctx)
    return n.value, b.value


def _mla_args(q, kv, indices, out, lse, max_logits, sm_scale, attn_sink, topk_length, config, kv_scale,
              kv_scale_block):
    """The fa4_mla_sparse_args of a call, every argument checked (fa4.h's contract). Imports nothing."""
    qd, qs = _tensor("q", q, dtype="bfloat16", shape=(None, None, None))
    dev = _device("q", q)
    dev = (dev[0], 0 if dev[1] is None else dev[1])
    s_q, h_q, d_qk = qd
    kd, ks = _tensor("kv", kv, dtype=("bfloat16", "float8_e4m3fn"), device=dev)
    if len(kd) == 3:
        if kd[1] != 1:
            raise Fa4Error("kv: shape %s; expected [s_kv, 1, d_qk] (one kv head)" % list(kd))
        kd, ks = (kd[0], kd[2]), (ks[0], ks[2])
    elif len(kd) != 2:
        raise Fa4Error("kv: %d dims %s; expected [s_kv, 1, d_qk] or [s_kv, d_qk]" % (len(kd), list(kd)))
    if kd[1] != d_qk:
        raise Fa4Error("kv: shape %s; its rows must have q's d_qk = %d columns" % (list(kd), d_qk))
    fp8 = _dtype_name(kv.dtype) == "float8_e4m3fn"
    idd, ids = _tensor("indices", indices, dtype="int32", shape=(s_q, None), device=dev)
    od, os_ = _tensor("out", out, dtype="bfloat16", shape=(s_q, h_q, _MLA_DV), device=dev)
    a = _MlaSparseArgs()
    a.size = ctypes.sizeof(_MlaSparseArgs)
    for name, t in (("lse", lse), ("max_logits", max_logits)):
        if t is not None:
            _tensor(name, t, dtype="float32", shape=(s_q, h_q), device=dev, contiguous=True)
    if attn_sink is not None:
        _tensor("attn_sink", attn_sink, dtype="float32", shape=(h_q,), device=dev, contiguous=True)
    if topk_length is not None:
        _tensor("topk_length", topk_length, dtype="int32", shape=(s_q,), device=dev, contiguous=True)
    a.q, a.kv, a.indices, a.out = _ptr("q", q), _ptr("kv", kv), _ptr("indices", indices), _ptr("out", out)
    a.lse, a.max_logits = _ptr("lse", lse), _ptr("max_logits", max_logits)
    a.attn_sink, a.topk_length = _ptr("attn_sink", attn_sink), _ptr("topk_length", topk_length)
    a.s_q, a.h_q, a.d_qk, a.s_kv, a.topk = s_q, h_q, d_qk, kd[0], idd[1]
    a.q_stride[:] = _c_strides(qd, qs)
    a.kv_stride = _c_strides(kd, ks)[0]
    a.indices_stride = _c_strides(idd, ids)[0]
    a.out_stride[:] = _c_strides(od, os_)
    a.sm_scale = _float("sm_scale", sm_scale) if sm_scale is not None else 0.0
    a.config = _str("config", config)
    block = _int("kv_scale_block", kv_scale_block, 0, INT32[1])
    if fp8:
        a.kv_dtype, a.kv_scale_block = _E4M3, block
        if kv_scale is not None:
            per_row = d_qk // block if block and d_qk % block == 0 else (1 if not block else None)
            if per_row is None:
                raise Fa4Error("kv_scale_block: %d does not divide d_qk %d" % (block, d_qk))
            _tensor("kv_scale", kv_scale, dtype="float32", shape=(kd[0], per_row), device=dev, contiguous=True)
            a.kv_scale = _ptr("kv_scale", kv_scale)
    elif kv_scale is not None or block:
        raise Fa4Error("%s: given for bf16 kv; scales are for float8_e4m3fn kv only"
                       % ("kv_scale" if kv_scale is not None else "kv_scale_block"))
    return a, dev


@_needs_torch
def mla_sparse_fwd(q, kv, indices, sm_scale=None, attn_sink=None, topk_length=None, config=None, out=None,
                   kv_scale=None, kv_scale_block=0, lse=None, max_logits=None, stream=None):
    """Sparse MLA prefill (DeepSeek-V3.2 top-k attention; fa4.h has the contract).

    q [s_q, h_q, d_qk] bf16 (d_qk 576 or 512), kv [s_kv, 1, d_qk] bf16 whose first 512 columns are V
    (or float8_e4m3fn on sm100a, dequantised as kv * kv_scale[row, column // kv_scale_block]: kv_scale
    [s_kv, d_qk // kv_scale_block] float32, kv_scale_block 0 = one scale per row, None = unit scales),
    indices [s_q, topk] int32 (topk a multiple of 64). An index < 0, >= s_kv or at a position >=
    topk_length[s] contributes nothing; topk_length [s_q] int32: a value below 0 is an empty row, one past topk
    is topk. attn_sink [h_q] fp32 scales out by e^lse / (e^lse + e^sink).
    Returns out [s_q, h_q, 512] bf16, lse and max_logits [s_q, h_q] fp32 (natural log). out, lse, max_logits:
    tensors to write into (allocated with torch when None); stream: a CUstream handle or a torch stream (torch's
    current one when None)."""
    qd, _ = _tensor("q", q, dtype="bfloat16", shape=(None, None, None))
    dev = _device("q", q)
    dev = (dev[0], 0 if dev[1] is None else dev[1])
    s_q, h_q, _ = qd
    if out is None or lse is None or max_logits is None:
        torch = _torch("out" if out is None else "lse" if lse is None else "max_logits")
        out = _empty(torch, (s_q, h_q, _MLA_DV), torch.bfloat16, dev) if out is None else out
        lse = _empty(torch, (s_q, h_q), torch.float32, dev) if lse is None else lse
        max_logits = _empty(torch, (s_q, h_q), torch.float32, dev) if max_logits is None else max_logits
    a, dev = _mla_args(q, kv, indices, out, lse, max_logits, sm_scale, attn_sink, topk_length, config, kv_scale,
                       kv_scale_block)
    handle = _stream(stream, dev)
    ctx = context(dev[1])
    _check(_load().fa4_mla_sparse_fwd(ctx, ctypes.byref(a), ctypes.c_void_p(handle)), ctx)
    return out, lse, max_logits


# ---------------------------------------------------------------- attention backward (issue 29)
# A small ctypes wrapper of fa4_mha_bwd (runtime/fa4.h); the torch.library op and autograd registration
# build on it (fa4_torch.py).

class _MhaBwdArgs(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("dtype", ctypes.c_int),
                ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p), ("o", ctypes.c_void_p),
                ("dout", ctypes.c_void_p), ("lse", ctypes.c_void_p),
                ("dq", ctypes.c_void_p), ("dk", ctypes.c_void_p), ("dv", ctypes.c_void_p),
                ("batch", ctypes.c_int), ("seqlen_q", ctypes.c_int), ("seqlen_k", ctypes.c_int),
                ("heads_q", ctypes.c_int), ("heads_kv", ctypes.c_int), ("qk_depth", ctypes.c_int),
                ("ov_depth", ctypes.c_int),
                ("q_stride", ctypes.c_int64 * 3), ("k_stride", ctypes.c_int64 * 3), ("v_stride", ctypes.c_int64 * 3),
                ("o_stride", ctypes.c_int64 * 3), ("do_stride", ctypes.c_int64 * 3), ("dq_stride", ctypes.c_int64 * 3),
                ("dk_stride", ctypes.c_int64 * 3), ("dv_stride", ctypes.c_int64 * 3),
                ("softmax_scale", ctypes.c_float), ("mask", ctypes.c_int),
                ("window_left", ctypes.c_int), ("window_right", ctypes.c_int), ("config", ctypes.c_char_p),
                ("sink", ctypes.c_void_p), ("dsink", ctypes.c_void_p), ("score_mod", ctypes.c_char_p),
                ("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_k", ctypes.c_void_p),
                ("max_seqlen_q", ctypes.c_int), ("max_seqlen_k", ctypes.c_int),
                ("cu_seqlens_q_host", ctypes.c_void_p), ("cu_seqlens_k_host", ctypes.c_void_p),
                ("deterministic", ctypes.c_int), ("workspace", ctypes.c_void_p), ("workspace_size", ctypes.c_size_t),
                ("softcap", ctypes.c_float), ("dlse", ctypes.c_void_p)]


def _bwd_lib():
    lib = _load()
    if not getattr(lib, "_fa4_bwd_ready", False):
        lib.fa4_mha_bwd.argtypes = [ctypes.c_void_p, ctypes.POINTER(_MhaBwdArgs), ctypes.c_void_p]
        lib.fa4_mha_bwd_workspace_size.argtypes = [ctypes.c_void_p, ctypes.POINTER(_MhaBwdArgs),
                                                   ctypes.POINTER(ctypes.c_size_t)]
        lib.fa4_mha_bwd_config.argtypes = [ctypes.c_void_p, ctypes.POINTER(_MhaBwdArgs), ctypes.c_char_p,
                                           ctypes.c_size_t]
        lib._fa4_bwd_ready = True
    return lib


def _bwd_args(torch, dout, q, k, v, out, lse, causal, window, softmax_scale, config, sink, varlen):
    dims = 3 if varlen else 4
    named = [("dout", dout), ("q", q), ("k", k), ("v", v), ("out", out)]
    for name, t in named:
        if not t.is_cuda or t.dim() != dims or t.stride(-1) != 1:
            raise Fa4Error("%s: needs a CUDA tensor %s with a contiguous last dim"
                           % (name, "[total, H, D]" if varlen else "[B, S, H, D]"))
        if t.device != q.device:
            raise Fa4Error("%s: on %s, q on %s" % (name, t.device, q.device))
    dt = _dtype_code(torch, q.dtype)
    if dt not in (_BF16, _FP16) or any(t.dtype != q.dtype for _, t in named):
        raise Fa4Error("dtype: dout, q, k, v and out must all be bf16 or all fp16")
    if not lse.is_cuda or lse.dtype != torch.float32 or not lse.is_contiguous():
        raise Fa4Error("lse: needs the forward's contiguous CUDA float32 LSE")
    a = _MhaBwdArgs()
    a.size = ctypes.sizeof(_MhaBwdArgs)
    a.dtype = dt
    a.q, a.k, a.v, a.o, a.dout, a.lse = q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), dout.data_ptr(), \
        lse.data_ptr()
    if varlen:
        a.batch = 0
        a.seqlen_q, a.heads_q, a.qk_depth = q.shape
        a.seqlen_k, a.heads_kv, a.ov_depth = k.shape[0], k.shape[1], v.shape[2]
    else:
        a.batch, a.seqlen_q, a.heads_q, a.qk_depth = q.shape
        a.seqlen_k, a.heads_kv, a.ov_depth = k.shape[1], k.shape[2], v.shape[3]
    a.softmax_scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    if window is not None:
        a.mask, a.window_left, a.window_right = _MASK_WINDOW, window[0], window[1]
    else:
        a.mask = _MASK_CAUSAL if causal else _MASK_NONE
    a.config = config.encode() if config else None
    if sink is not None:
        if not sink.is_cuda or sink.dtype != torch.float32 or sink.numel() != a.heads_q or not sink.is_contiguous():
            raise Fa4Error("sink: needs a contiguous CUDA float32 tensor of heads_q = %d values" % a.heads_q)
        a.sink = sink.data_ptr()
    return a


def _strides(t, varlen):
    """The (batch, seq, head) element strides; 0 (the packed default) for a dim of one element, whose stride
    addresses nothing (torch may give it any value, which the runtime's alignment checks would refuse)."""
    dims = (None, 0, 1) if varlen else (0, 1, 2)
    return [0 if d is None or t.shape[d] == 1 else t.stride(d) for d in dims]


def mha_bwd(dout, q, k, v, out, lse, causal=False, softmax_scale=None, window=None, config=None, sink=None,
            cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
            dq=None, dk=None, dv=None, dsink=None, workspace=None, softcap=None, dlse=None, deterministic=False):
    """Attention backward (sm90a): the gradients of mha_fwd(q, k, v, ...) = out (with its lse) for dout.

    Returns (dq, dk, dv), and dsink too when sink is given. Same shapes and conventions as mha_fwd ([B, S, H, D],
    or packed [total, H, D] with cu_seqlens_q/k (int32 [B + 1], CUDA) and max_seqlen_q/k for varlen; causal
    bottom-right; GQA: dk, dv are summed over the group). dq, dk, dv, dsink: outputs to write (None: allocated
    like q, k, v; dsink float32 [heads_q]). workspace: a contiguous CUDA tensor of at least
    mha_bwd_workspace_size(...) bytes (None: allocated from torch for this call). softcap: the forward's
    soft-cap (None or 0: none). dlse: dL/dLSE when the forward's lse feeds the loss too (a contiguous CUDA float32
    tensor shaped like lse; None: no gradient reaches lse). deterministic: dQ summed over the kv blocks in a fixed
    order, so two calls give bit-identical dq (a turn counter per dQ block; slower where many kv blocks share a
    query block); dk, dv, dsink are deterministic either way. Launches on torch's current stream; no host sync.
    A call whose signature (every tensor's shape, strides, dtype and device; the other arguments) matches an earlier
    accepted call reuses what that call built and only reads the new pointers (fa4_mha_bwd checks them)."""
    opt = (dq, dk, dv, dsink, workspace, sink, dlse, cu_seqlens_q, cu_seqlens_k)
    scal = (causal, softmax_scale, window, config, softcap, deterministic, max_seqlen_q, max_seqlen_k)
    try:
        key = (_meta(dout), _meta(q), _meta(k), _meta(v), _meta(out), _meta(lse), tuple(map(_meta, opt)), scal,
               tuple(map(type, scal)), window.__class__ is tuple and tuple(map(type, window)))
        ent = _bwd_fast.get(key)
    except (TypeError, AttributeError):  # an unhashable argument, or no tensor: the full path says what is wrong
        key = ent = None
    if ent is not None:
        r = _bwd_fast_call(ent, (dout, q, k, v, out, lse), opt)
        if r is not None:
            return r
    torch = _torch("mha_bwd")
    varlen = cu_seqlens_q is not None
    a = _bwd_args(torch, dout, q, k, v, out, lse, causal, window, softmax_scale, config, sink, varlen)
    a.softcap = _float("softcap", softcap or 0.0)
    a.deterministic = int(_bool("deterministic", deterministic))
    if dlse is not None:
        if not dlse.is_cuda or dlse.dtype != torch.float32 or not dlse.is_contiguous() or dlse.shape != lse.shape:
            raise Fa4Error("dlse: needs a contiguous CUDA float32 tensor shaped like lse %s" % (tuple(lse.shape),))
        a.dlse = dlse.data_ptr()
    if varlen:
        if cu_seqlens_k is None or max_seqlen_q is None or max_seqlen_k is None:
            raise Fa4Error("varlen: give cu_seqlens_q, cu_seqlens_k, max_seqlen_q and max_seqlen_k together")
        for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
            if not t.is_cuda or t.dtype != torch.int32 or t.dim() != 1 or not t.is_contiguous():
                raise Fa4Error("%s: needs a contiguous CUDA int32 vector [B + 1]" % name)
        if cu_seqlens_k.numel() != cu_seqlens_q.numel():
            raise Fa4Error("cu_seqlens_k: %d entries, cu_seqlens_q %d" % (cu_seqlens_k.numel(), cu_seqlens_q.numel()))
        a.batch = cu_seqlens_q.numel() - 1
        a.cu_seqlens_q, a.cu_seqlens_k = cu_seqlens_q.data_ptr(), cu_seqlens_k.data_ptr()
        a.max_seqlen_q, a.max_seqlen_k = int(max_seqlen_q), int(max_seqlen_k)
    dq = dq if dq is not None else torch.empty_like(q)
    dk = dk if dk is not None else torch.empty_like(k)
    dv = dv if dv is not None else torch.empty_like(v)
    for name, t, like in (("dq", dq, q), ("dk", dk, k), ("dv", dv, v)):
        if not t.is_cuda or t.dtype != like.dtype or tuple(t.shape) != tuple(like.shape) or t.stride(-1) != 1:
            raise Fa4Error("%s: needs a CUDA %s tensor of shape %s with a contiguous last dim"
                           % (name, like.dtype, tuple(like.shape)))
    a.dq, a.dk, a.dv = dq.data_ptr(), dk.data_ptr(), dv.data_ptr()
    for field, t in (("q_stride", q), ("k_stride", k), ("v_stride", v), ("o_stride", out), ("do_stride", dout),
                     ("dq_stride", dq), ("dk_stride", dk), ("dv_stride", dv)):
        getattr(a, field)[:] = _strides(t, varlen)
    if sink is not None:
        dsink = dsink if dsink is not None else torch.empty(a.heads_q, dtype=torch.float32, device=q.device)
        if not dsink.is_cuda or dsink.dtype != torch.float32 or dsink.numel() != a.heads_q or not dsink.is_contiguous():
            raise Fa4Error("dsink: needs a contiguous CUDA float32 tensor of heads_q = %d values" % a.heads_q)
        a.dsink = dsink.data_ptr()
    lib = _bwd_lib()
    ctx = context(q.device.index or 0)
    n = ctypes.c_size_t()
    _check(lib.fa4_mha_bwd_workspace_size(ctx, ctypes.byref(a), ctypes.byref(n)), ctx)
    if workspace is None:
        workspace = torch.empty(max(n.value, 16), dtype=torch.uint8, device=q.device)
    if not workspace.is_cuda or not workspace.is_contiguous():
        raise Fa4Error("workspace: needs a contiguous CUDA tensor")
    a.workspace, a.workspace_size = workspace.data_ptr(), workspace.numel() * workspace.element_size()
    stream = torch.cuda.current_stream(q.device).cuda_stream
    _check(lib.fa4_mha_bwd(ctx, ctypes.byref(a), ctypes.c_void_p(stream)), ctx)
    if key is not None:  # accepted: remember it
        ent = _BwdPrepared()
        ent.tpl, ent.ctx, ent.dev, ent.fn = bytes(a), ctx, q.device.index or 0, lib.fa4_mha_bwd
        ent.alloc = tuple(t is None for t in opt[:5])
        ent.ws, ent.heads_q = workspace.numel() * workspace.element_size(), a.heads_q
        if len(_bwd_fast) >= _FAST_MAX:
            _bwd_fast.clear()
        _bwd_fast[key] = ent
    return (dq, dk, dv, dsink) if sink is not None else (dq, dk, dv)


# A call of mha_bwd whose signature (every tensor's shape, strides, dtype and device; the other arguments and their
# types) matches an earlier accepted call reuses that call's fa4_mha_bwd_args and workspace size: only the pointers
# (and the buffers it allocates, laid out as the first call's were) change. fa4_mha_bwd checks every pointer-dependent
# rule again (alignment; D and nl2 in dq only when dq overlaps nothing); a call it refuses takes the full path, which
# decides again and raises what is wrong.
_bwd_fast = {}
_ERR_INVALID_ARGUMENT = 1  # FA4_ERR_INVALID_ARGUMENT (fa4.h): refused before anything was launched
_BWD_PTRS = ("dout", "q", "k", "v", "o", "lse")
_BWD_OPT_FIELDS = ("dq", "dk", "dv", "dsink", "workspace", "sink", "dlse", "cu_seqlens_q", "cu_seqlens_k")


class _BwdPrepared:
    """A remembered backward call: the args' bytes, which buffers it allocates, the workspace's bytes."""
    __slots__ = ("tpl", "ctx", "dev", "fn", "alloc", "ws", "heads_q")


def _bwd_fast_call(ent, tensors, opt):
    """mha_bwd through a remembered signature; None when a pointer or the library's checks send it down the full
    path (nothing was launched then)."""
    torch = _torch_mod
    a = _MhaBwdArgs.from_buffer_copy(ent.tpl)
    if not _set_ptrs(a, _BWD_PTRS, tensors):
        return None
    q = tensors[1]
    opt = list(opt)
    for i, like in enumerate(tensors[1:4]):  # dq, dk, dv like q, k, v: the first call's layout (same strides)
        if ent.alloc[i]:
            opt[i] = torch.empty_like(like)
    if ent.alloc[3] and opt[5] is not None:
        opt[3] = torch.empty(ent.heads_q, dtype=torch.float32, device=q.device)
    if ent.alloc[4]:
        opt[4] = torch.empty(ent.ws, dtype=torch.uint8, device=q.device)
    if not _set_ptrs(a, _BWD_OPT_FIELDS, opt):
        return None
    status = ent.fn(ent.ctx, ctypes.byref(a), ctypes.c_void_p(_raw_stream(torch, ent.dev)))
    if status == _ERR_INVALID_ARGUMENT:
        return None
    _check(status, ent.ctx)
    dq, dk, dv, dsink = opt[:4]
    return (dq, dk, dv, dsink) if opt[5] is not None else (dq, dk, dv)


def mha_bwd_workspace_size(q, k, causal=False, window=None, config=None, sink=None, cu_seqlens_q=None,
                           max_seqlen_q=None, max_seqlen_k=None, deterministic=False):
    """The workspace bytes mha_bwd needs (its shapes, mask, varlen, sink and deterministic decide); no launch."""
    import torch
    varlen = cu_seqlens_q is not None
    a = _MhaBwdArgs()
    a.size = ctypes.sizeof(_MhaBwdArgs)
    a.dtype = _dtype_code(torch, q.dtype)
    if varlen:
        a.batch = cu_seqlens_q.numel() - 1
        a.seqlen_q, a.heads_q, a.qk_depth = q.shape
        a.seqlen_k, a.heads_kv, a.ov_depth = k.shape[0], k.shape[1], k.shape[2]
        a.cu_seqlens_q = a.cu_seqlens_k = cu_seqlens_q.data_ptr()
        a.max_seqlen_q, a.max_seqlen_k = int(max_seqlen_q), int(max_seqlen_k)
    else:
        a.batch, a.seqlen_q, a.heads_q, a.qk_depth = q.shape
        a.seqlen_k, a.heads_kv, a.ov_depth = k.shape[1], k.shape[2], k.shape[3]
    if window is not None:
        a.mask, a.window_left, a.window_right = _MASK_WINDOW, window[0], window[1]
    else:
        a.mask = _MASK_CAUSAL if causal else _MASK_NONE
    a.config = config.encode() if config else None
    if sink is not None:
        a.sink = a.dsink = sink.data_ptr()
    a.deterministic = int(_bool("deterministic", deterministic))
    lib = _bwd_lib()
    ctx = context(q.device.index or 0)
    n = ctypes.c_size_t()
    _check(lib.fa4_mha_bwd_workspace_size(ctx, ctypes.byref(a), ctypes.byref(n)), ctx)
    return n.value


# ---------------------------------------------------------------- AOT bundles and the kernel cache (issue 28)

class _Bundle(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("name", ctypes.c_char_p), ("generator", ctypes.c_char_p),
                ("n_kernels", ctypes.c_int), ("kernels", ctypes.c_void_p)]


_loaded_bundles = {}  # path -> (the CDLL, kept so it stays loaded; the names it registered)


def bundles():
    """The AOT bundles registered in this process (linked into it, or loaded with load_bundle), in order:
    a list of (name, generator, kernels). The runtime uses a bundle's kernels only when its generator is this
    library's build (fa4gen --version)."""
    lib = _load()
    lib.fa4_bundle_count.restype = ctypes.c_int
    lib.fa4_bundle_at.restype = ctypes.POINTER(_Bundle)
    lib.fa4_bundle_at.argtypes = [ctypes.c_int]
    out = []
    for i in range(lib.fa4_bundle_count()):
        b = lib.fa4_bundle_at(i).contents
        out.append((b.name.decode(), b.generator.decode(), b.n_kernels))
    return out


def load_bundle(path):
    """Load an AOT bundle's shared object, so every fa4 call takes its kernels before compiling any:

        fa4gen configs ... | fa4gen bundle - -o kernels.c
        cc -shared -fPIC -I$(python -c 'import fa4gen; print(fa4gen.include_dir())') kernels.c -o kernels.so
        fa4.load_bundle("kernels.so")      # then, e.g., FA4GEN_DISABLE_JIT=1: bundled kernels only

    The object's constructor registers its table with libfa4rt (fa4_bundle_register), which must be the
    libfa4rt this module loaded: build it without linking libfa4rt (the symbol resolves to this process's
    copy, whose symbols are made global here first) or against the same libfa4rt.so. Returns the names of
    the bundles it registered; raises Fa4Error when it registers none (it was linked with another copy of
    libfa4rt, e.g. libfa4rt.a) or cannot be loaded. Loading the same path again does nothing."""
    lib = _load()
    path = os.path.abspath(os.fspath(path))
    if path in _loaded_bundles:
        return list(_loaded_bundles[path][1])
    # the bundle's call to fa4_bundle_register resolves through the global scope: put libfa4rt there
    ctypes.CDLL(lib._name, mode=os.RTLD_NOW | os.RTLD_GLOBAL | getattr(os, "RTLD_NOLOAD", 4))
    before = len(bundles())
    try:
        handle = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    except OSError as e:
        raise Fa4Error("load_bundle: %s" % e) from None
    new = bundles()[before:]
    if not new:
        raise Fa4Error("load_bundle: %s registered no bundle with this libfa4rt (%s); build it without linking "
                       "libfa4rt (cc -shared -fPIC kernels.c -o kernels.so) so that it registers with this one"
                       % (path, lib._name))
    _loaded_bundles[path] = (handle, [n for n, _, _ in new])
    return [n for n, _, _ in new]


class _CacheEntry(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("file", ctypes.c_char_p), ("config", ctypes.c_char_p),
                ("generator", ctypes.c_char_p), ("problem", ctypes.c_char_p), ("this_build", ctypes.c_int),
                ("bytes", ctypes.c_uint64), ("mtime", ctypes.c_int64), ("atime", ctypes.c_int64)]


_CACHE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_CacheEntry))


def cache_dir(device=0):
    """The disk cache's folder (fa4gen cache path); it may not exist yet."""
    lib = _load()
    ctx = context(device)
    buf = ctypes.create_string_buffer(4096)
    lib.fa4_cache_dir.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    _check(lib.fa4_cache_dir(ctx, buf, len(buf)), ctx)
    return buf.value.decode()


def cache_list(device=0):
    """The disk cache's entries, most recently used first (fa4gen cache list): dicts with file, config,
    generator, problem (None for a valid entry), this_build, bytes, mtime, atime."""
    lib = _load()
    ctx = context(device)
    out = []

    def one(_user, e):
        e = e.contents
        out.append({"file": e.file.decode(), "config": e.config.decode(), "generator": e.generator.decode(),
                    "problem": e.problem.decode() if e.problem else None, "this_build": bool(e.this_build),
                    "bytes": e.bytes, "mtime": e.mtime, "atime": e.atime})
        return 0
    fn = _CACHE_FN(one)
    lib.fa4_cache_list.argtypes = [ctypes.c_void_p, _CACHE_FN, ctypes.c_void_p]
    _check(lib.fa4_cache_list(ctx, fn, None), ctx)
    return out


def cache_clear(device=0):
    """Remove every entry of the disk cache (fa4gen cache clear): (entries removed, bytes)."""
    lib = _load()
    ctx = context(device)
    n, b = ctypes.c_int(0), ctypes.c_uint64(0)
    lib.fa4_cache_clear.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_uint64)]
    _check(lib.fa4_cache_clear(ctx, ctypes.byref(n), ctypes.byref(b)), ctx)
    return n.value, b.value


def cache_prune(max_bytes, device=0):
    """Remove the least recently used entries until the rest take at most max_bytes (fa4gen cache prune):
    (entries removed, bytes)."""
    lib = _load()
    ctx = context(device)
    n, b = ctypes.c_int(0), ctypes.c_uint64(0)
    lib.fa4_cache_prune.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(ctypes.c_int),
                                    ctypes.POINTER(ctypes.c_uint64)]
    _check(lib.fa4_cache_prune(ctx, _int("max_bytes", max_bytes, 0, 2 ** 64 - 1), ctypes.byref(n), ctypes.byref(b)),
           ctx)
    return n.value, b.value
