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
The library: $FA4_LIB, else the copy the fa4gen wheel carries (fa4gen/lib/libfa4rt.so), else libfa4rt.so
beside this file, else build/libfa4rt.so of the repository this file is in, else libfa4rt.so.0 from the dynamic
loader's path, else pkg-config's (an installed fa4gen). Before loading it, the nvidia-* wheels' NVRTC and
nvJitLink (and a ptxas, when the toolkit has none) are handed to it: fa4gen.prepare_env().
torch.library ops (torch.compile, CUDA graphs): fa4_torch.py. Without torch, version() and compile() work
and the tensor functions raise Fa4Error.
"""
import ctypes
import functools
import math
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
                ("verbose", ctypes.c_int), ("disable_jit", ctypes.c_int)]


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
                ("max_pages", ctypes.c_int), ("num_pages", ctypes.c_int), ("kv_early", ctypes.c_int)]


class _MlaSparseArgs(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("q", ctypes.c_void_p), ("kv", ctypes.c_void_p),
                ("indices", ctypes.c_void_p), ("out", ctypes.c_void_p), ("lse", ctypes.c_void_p),
                ("max_logits", ctypes.c_void_p), ("attn_sink", ctypes.c_void_p), ("topk_length", ctypes.c_void_p),
                ("s_q", ctypes.c_int), ("s_kv", ctypes.c_int), ("h_q", ctypes.c_int), ("d_qk", ctypes.c_int),
                ("topk", ctypes.c_int), ("q_stride", ctypes.c_int64 * 2), ("kv_stride", ctypes.c_int64),
                ("indices_stride", ctypes.c_int64), ("out_stride", ctypes.c_int64 * 2), ("sm_scale", ctypes.c_float),
                ("config", ctypes.c_char_p), ("kv_dtype", ctypes.c_int), ("kv_scale", ctypes.c_void_p),
                ("kv_scale_block", ctypes.c_int)]


class Fa4Error(RuntimeError):
    pass


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
    return _lib


def _check(status, ctx):
    if status != 0:
        lib = _load()
        raise Fa4Error("%s: %s" % (lib.fa4_status_string(status).decode(), lib.fa4_last_error(ctx).decode()))


def _needs_torch(fn):
    """fn takes torch tensors: without torch it raises one Fa4Error saying how to get it."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            import torch  # noqa: F401
        except ModuleNotFoundError as e:
            if e.name != "torch":  # torch is there but broken: its own error says more
                raise
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
        opt = _Options(ctypes.sizeof(_Options), 2, device, 0, None, 1, 0, 0)
        ctx = ctypes.c_void_p()
        _check(lib.fa4_create(ctypes.byref(ctx), ctypes.byref(opt)), None)
        _ctx[device] = ctx
    return _ctx[device]


def _dtype_code(torch, dt):
    codes = {torch.bfloat16: _BF16, torch.float16: _FP16}
    e4m3 = getattr(torch, "float8_e4m3fn", None)
    if e4m3 is not None:
        codes[e4m3] = _E4M3
    return codes.get(dt)


def _out_dtype(torch, q):
    """O's dtype: the input's, or bf16 for e4m3 inputs (the kernel writes bf16)."""
    return torch.bfloat16 if _dtype_code(torch, q.dtype) == _E4M3 else q.dtype


def _args(q, k, v, o, lse, causal, window, softmax_scale, config, k_rope=None, descale=(None, None, None),
          sink=None, score_mod=None, aux=None):
    import torch
    named = [("q", q), ("k", k), ("v", v), ("out", o)] + ([("k_rope", k_rope)] if k_rope is not None else [])
    for name, t in named:
        if not t.is_cuda or t.dim() != 4 or t.stride(3) != 1:
            raise Fa4Error("%s: needs a CUDA tensor [B, S, H, D] with a contiguous last dim" % name)
    dt = _dtype_code(torch, q.dtype)
    if dt is None or k.dtype != q.dtype or v.dtype != q.dtype or (k_rope is not None and k_rope.dtype != q.dtype):
        raise Fa4Error("dtype: q, k, v (and k_rope) must all be bf16, all fp16 or all float8_e4m3fn")
    if o.dtype != _out_dtype(torch, q):
        raise Fa4Error("out: dtype %s; the kernel writes %s" % (o.dtype, _out_dtype(torch, q)))
    k_depth = q.shape[3] - (_ROPE_DEPTH if k_rope is not None else 0)
    if k.shape[3] != k_depth:
        raise Fa4Error("k: depth %d; expected %d (q's depth%s)" % (k.shape[3], k_depth,
                       " minus k_rope's %d" % _ROPE_DEPTH if k_rope is not None else ""))
    if k_rope is not None and tuple(k_rope.shape) != tuple(k.shape[:3]) + (_ROPE_DEPTH,):
        raise Fa4Error("k_rope: shape %s; expected %s" % (tuple(k_rope.shape), tuple(k.shape[:3]) + (_ROPE_DEPTH,)))
    a = _MhaArgs()
    a.size = ctypes.sizeof(_MhaArgs)
    a.dtype = dt
    a.q, a.k, a.v, a.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
    a.lse = lse.data_ptr() if lse is not None else None
    a.batch, a.seqlen_q, a.heads_q, a.qk_depth = q.shape
    a.seqlen_k, a.heads_kv, a.ov_depth = k.shape[1], k.shape[2], v.shape[3]
    strided = [("q_stride", q), ("k_stride", k), ("v_stride", v), ("o_stride", o)]
    if k_rope is not None:
        a.k_rope = k_rope.data_ptr()
        strided.append(("k_rope_stride", k_rope))
    for field, t in strided:
        getattr(a, field)[:] = [t.stride(0), t.stride(1), t.stride(2)]
    a.softmax_scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[3])
    a.q_descale, a.k_descale, a.v_descale = [float(d) if d is not None else 0.0 for d in descale]
    if window is not None:
        a.mask, a.window_left, a.window_right = _MASK_WINDOW, window[0], window[1]
    else:
        a.mask = _MASK_CAUSAL if causal else _MASK_NONE
    a.config = config.encode() if config else None
    if sink is not None:
        if not sink.is_cuda or sink.dtype != torch.float32 or sink.numel() != q.shape[2] or not sink.is_contiguous():
            raise Fa4Error("sink: needs a contiguous CUDA float32 tensor of heads_q = %d values" % q.shape[2])
        a.sink = sink.data_ptr()
    if score_mod is not None:
        a.score_mod = score_mod.encode()
    if aux is not None:
        if not aux.is_cuda:
            raise Fa4Error("aux: needs a CUDA tensor (the score_mod reads it on the device)")
        a.score_mod_aux = aux.data_ptr()
    return a


def _split_args(a, num_splits, workspace):
    if num_splits is not None:
        a.num_splits = int(num_splits)
    if workspace is not None:
        if not workspace.is_cuda or not workspace.is_contiguous():
            raise Fa4Error("workspace: needs a contiguous CUDA tensor")
        a.workspace, a.workspace_size = workspace.data_ptr(), workspace.numel() * workspace.element_size()


def _int32_vector(torch, name, t, n):
    if t is None:
        return None
    if not t.is_cuda or t.dtype != torch.int32 or t.dim() != 1 or not t.is_contiguous() or (n and t.numel() != n):
        raise Fa4Error("%s: needs a contiguous CUDA int32 vector%s" % (name, " of %d entries" % n if n else ""))
    return t


def _serving(torch, a, q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, block_table, seqlen_k):
    """varlen (cu_seqlens_q) and paged KV (block_table) fields of the args (fa4.h has the contract)."""
    if cu_seqlens_q is not None:
        _int32_vector(torch, "cu_seqlens_q", cu_seqlens_q, 0)
        a.batch = cu_seqlens_q.numel() - 1
        a.cu_seqlens_q = cu_seqlens_q.data_ptr()
        if cu_seqlens_k is not None:
            a.cu_seqlens_k = _int32_vector(torch, "cu_seqlens_k", cu_seqlens_k, a.batch + 1).data_ptr()
        if max_seqlen_q is None:
            raise Fa4Error("max_seqlen_q: needed with cu_seqlens_q (the longest sequence; sizes the grid)")
        a.max_seqlen_q = int(max_seqlen_q)
        for field in ("q_stride", "k_stride", "v_stride", "o_stride"):
            getattr(a, field)[0] = 0  # packed rows: no batch axis (paged k, v set theirs below)
    elif cu_seqlens_k is not None or max_seqlen_q is not None:
        raise Fa4Error("cu_seqlens_k / max_seqlen_q: given without cu_seqlens_q")
    if block_table is None:
        if seqlen_k is not None:
            raise Fa4Error("seqlen_k: given without block_table (it is paged KV's per-sequence kv length)")
        return
    if not block_table.is_cuda or block_table.dtype != torch.int32 or block_table.dim() != 2 or \
            not block_table.is_contiguous() or block_table.shape[0] != a.batch:
        raise Fa4Error("block_table: needs a contiguous CUDA int32 tensor [batch = %d, max_pages]" % a.batch)
    a.block_table = block_table.data_ptr()
    a.seqlens_k = _int32_vector(torch, "seqlen_k", seqlen_k, a.batch).data_ptr() if seqlen_k is not None else None
    a.num_pages, a.page_size, a.max_pages = k.shape[0], k.shape[1], block_table.shape[1]
    a.seqlen_k = 0
    for field, t in (("k_stride", k),):
        getattr(a, field)[0] = t.stride(0)


def _mha_args(torch, q, k, v, o, lse, causal, window, softmax_scale, config, k_rope, descales, sink, score_mod, aux,
              serving):
    """The fa4_mha_args of a call; serving = (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, block_table, seqlen_k)."""
    cu_seqlens_q, cu_seqlens_k, max_seqlen_q, block_table, seqlen_k = serving
    varlen = cu_seqlens_q is not None
    if varlen and q.dim() != 3:
        raise Fa4Error("q: with cu_seqlens_q it is packed [total_q, heads, depth]; got %d dims" % q.dim())
    # varlen: the packed 3-D tensors as one batch of rows (the library reads their row and head strides)
    as4 = (lambda t: t.unsqueeze(0) if t is not None and t.dim() == 3 else t) if varlen else (lambda t: t)
    if varlen and block_table is not None and k.dim() != 4:
        raise Fa4Error("k: paged KV needs [num_pages, page_size, heads_kv, depth]; got %d dims" % k.dim())
    a = _args(as4(q), as4(k), as4(v), as4(o), lse, causal, window, softmax_scale, config, k_rope, descales, sink,
              score_mod, aux)
    _serving(torch, a, q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, block_table, seqlen_k)
    if block_table is not None:
        a.v_stride[0] = v.stride(0)
    return a


@_needs_torch
def mha_fwd(q, k, v, causal=False, softmax_scale=None, return_lse=False, config=None, out=None, window=None,
            k_rope=None, q_descale=None, k_descale=None, v_descale=None, sink=None, score_mod=None, aux=None,
            num_splits=None, workspace=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
            block_table=None, seqlen_k=None, kv_early=False):
    """Attention forward on [B, S, H, D] tensors; returns out (and lse when asked).

    Variable-length batches (sm90a, sm100a): q [total_q, H, D] packed with cu_seqlens_q (int32 [B + 1], CUDA) and
    max_seqlen_q (int); k, v [total_k, Hkv, D] with cu_seqlens_k; out [total_q, H, D]; lse [H, total_q].
    Paged KV (sm90a, sm100a): k, v [num_pages, page_size, Hkv, D] page pools, block_table int32 [B, max_pages] and
    seqlen_k int32 [B] (each sequence's kv length), with dense or varlen q. Nothing is copied to the host:
    the kernel clamps the device tables (fa4.h).

    k_rope: MLA prefill (sm100a, q depth 192): K's last 64 columns as their own [B, Sk, Hkv, 64] tensor,
    with k holding the first 128. q/k/v_descale: per-tensor dequantisation scales (None = 1), folded into
    the softmax scale (q, k) and the output (v). float8_e4m3fn inputs give a bf16 output.
    sink: float32 [heads_q] sink logits, in each row's softmax denominator only (lse excludes them).
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
    prefetches them into L2 there (config word prefetch), which asks nothing."""
    import torch
    varlen = cu_seqlens_q is not None
    o_shape = q.shape[:-1] + (v.shape[-1],)
    o = out if out is not None else torch.empty(o_shape, dtype=_out_dtype(torch, q), device=q.device)
    if return_lse:
        lse = torch.empty((q.shape[1], q.shape[0]) if varlen else (q.shape[0], q.shape[2], q.shape[1]),
                          dtype=torch.float32, device=q.device)
    else:
        lse = None
    ctx = context(q.device.index or 0)
    a = _mha_args(torch, q, k, v, o, lse, causal, window, softmax_scale, config, k_rope,
                  (q_descale, k_descale, v_descale), sink, score_mod, aux,
                  (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, block_table, seqlen_k))
    _split_args(a, num_splits, workspace)
    a.kv_early = 1 if kv_early else 0
    stream = torch.cuda.current_stream(q.device).cuda_stream
    _check(_load().fa4_mha_fwd(ctx, ctypes.byref(a), ctypes.c_void_p(stream)), ctx)
    return (o, lse) if return_lse else o


@_needs_torch
def mha_config(q, k, v, causal=False, config=None, window=None, k_rope=None, sink=None, score_mod=None):
    """The canonical kernel config mha_fwd would use for these tensors."""
    import torch
    o = torch.empty(q.shape[:3] + (v.shape[3],), dtype=_out_dtype(torch, q), device=q.device)
    ctx = context(q.device.index or 0)
    a = _args(q, k, v, o, None, causal, window, None, config, k_rope, sink=sink, score_mod=score_mod)
    buf = ctypes.create_string_buffer(512)
    _check(_load().fa4_mha_config(ctx, ctypes.byref(a), buf, 512), ctx)
    return buf.value.decode()


@_needs_torch
def mha_split_count(q, k, v, causal=False, config=None, window=None, num_splits=None, cu_seqlens_q=None,
                    cu_seqlens_k=None, max_seqlen_q=None, block_table=None, seqlen_k=None):
    """(splits, workspace bytes) mha_fwd would use for these tensors with a workspace (fa4_mha_split_count);
    the varlen and paged keywords as mha_fwd takes them. 0 bytes: one split, which needs no workspace."""
    import torch
    o = torch.empty(q.shape[:-1] + (v.shape[-1],), dtype=_out_dtype(torch, q), device=q.device)
    ctx = context(q.device.index or 0)
    a = _mha_args(torch, q, k, v, o, None, causal, window, None, config, None, (None, None, None), None, None, None,
                  (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, block_table, seqlen_k))
    _split_args(a, num_splits, None)
    n, b = ctypes.c_int(0), ctypes.c_size_t(0)
    _check(_load().fa4_mha_split_count(ctx, ctypes.byref(a), ctypes.byref(n), ctypes.byref(b)), ctx)
    return n.value, b.value


@_needs_torch
def mla_sparse_fwd(q, kv, indices, sm_scale=None, attn_sink=None, topk_length=None, config=None, out=None,
                   kv_scale=None, kv_scale_block=0):
    """Sparse MLA prefill (DeepSeek-V3.2 top-k attention; fa4.h has the contract).

    q [s_q, h_q, d_qk] bf16 (d_qk 576 or 512), kv [s_kv, 1, d_qk] bf16 whose first 512 columns are V
    (or float8_e4m3fn on sm100a, dequantised as kv * kv_scale[row, column // kv_scale_block]: kv_scale
    [s_kv, d_qk // kv_scale_block] float32, kv_scale_block 0 = one scale per row, None = unit scales),
    indices [s_q, topk] int32 (topk a multiple of 64). An index < 0, >= s_kv or at a position >=
    topk_length[s] contributes nothing. attn_sink [h_q] fp32 scales out by e^lse / (e^lse + e^sink).
    Returns out [s_q, h_q, 512] bf16, lse and max_logits [s_q, h_q] fp32 (natural log)."""
    import torch
    if kv.dim() == 3:
        if kv.shape[1] != 1:
            raise Fa4Error("kv: shape %s; expected [s_kv, 1, d_qk] (one kv head)" % (tuple(kv.shape),))
        kv2 = kv[:, 0, :]
    else:
        kv2 = kv
    for name, t, dims in (("q", q, 3), ("kv", kv2, 2), ("indices", indices, 2)):
        if not t.is_cuda or t.dim() != dims or t.stride(-1) != 1:
            raise Fa4Error("%s: needs a CUDA tensor of %d dims with a contiguous last dim" % (name, dims))
    fp8 = kv2.dtype == getattr(torch, "float8_e4m3fn", None)
    if q.dtype != torch.bfloat16 or (kv2.dtype != torch.bfloat16 and not fp8):
        raise Fa4Error("dtype: q must be bfloat16, kv bfloat16 or float8_e4m3fn")
    if indices.dtype != torch.int32:
        raise Fa4Error("indices: dtype %s; use int32" % indices.dtype)
    s_q, h_q, d_qk = q.shape
    o = out if out is not None else torch.empty(s_q, h_q, 512, dtype=torch.bfloat16, device=q.device)
    lse = torch.empty(s_q, h_q, dtype=torch.float32, device=q.device)
    max_logits = torch.empty(s_q, h_q, dtype=torch.float32, device=q.device)
    a = _MlaSparseArgs()
    a.size = ctypes.sizeof(_MlaSparseArgs)
    a.q, a.kv, a.indices, a.out = q.data_ptr(), kv2.data_ptr(), indices.data_ptr(), o.data_ptr()
    a.lse, a.max_logits = lse.data_ptr(), max_logits.data_ptr()
    if attn_sink is not None:
        if attn_sink.dtype != torch.float32 or attn_sink.numel() != h_q or not attn_sink.is_contiguous():
            raise Fa4Error("attn_sink: needs a contiguous float32 tensor of h_q = %d values" % h_q)
        a.attn_sink = attn_sink.data_ptr()
    if topk_length is not None:
        if topk_length.dtype != torch.int32 or topk_length.numel() != s_q or not topk_length.is_contiguous():
            raise Fa4Error("topk_length: needs a contiguous int32 tensor of s_q = %d values" % s_q)
        a.topk_length = topk_length.data_ptr()
    a.s_q, a.h_q, a.d_qk, a.s_kv, a.topk = s_q, h_q, d_qk, kv2.shape[0], indices.shape[1]
    a.q_stride[:] = [q.stride(0), q.stride(1)]
    a.kv_stride = kv2.stride(0)
    a.indices_stride = indices.stride(0)
    a.out_stride[:] = [o.stride(0), o.stride(1)]
    a.sm_scale = sm_scale if sm_scale is not None else 0.0
    a.config = config.encode() if config else None
    if fp8:
        a.kv_dtype, a.kv_scale_block = 2, kv_scale_block  # FA4_E4M3
        if kv_scale is not None:
            if kv_scale.dtype != torch.float32 or not kv_scale.is_contiguous() or not kv_scale.is_cuda:
                raise Fa4Error("kv_scale: needs a contiguous float32 CUDA tensor [s_kv, d_qk / kv_scale_block]")
            a.kv_scale = kv_scale.data_ptr()
    ctx = context(q.device.index or 0)
    stream = torch.cuda.current_stream(q.device).cuda_stream
    _check(_load().fa4_mla_sparse_fwd(ctx, ctypes.byref(a), ctypes.c_void_p(stream)), ctx)
    return o, lse, max_logits


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
                ("deterministic", ctypes.c_int), ("workspace", ctypes.c_void_p), ("workspace_size", ctypes.c_size_t)]


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
    return [0, t.stride(0), t.stride(1)] if varlen else [t.stride(0), t.stride(1), t.stride(2)]


def mha_bwd(dout, q, k, v, out, lse, causal=False, softmax_scale=None, window=None, config=None, sink=None,
            cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
            dq=None, dk=None, dv=None, dsink=None, workspace=None):
    """Attention backward (sm90a): the gradients of mha_fwd(q, k, v, ...) = out (with its lse) for dout.

    Returns (dq, dk, dv), and dsink too when sink is given. Same shapes and conventions as mha_fwd ([B, S, H, D],
    or packed [total, H, D] with cu_seqlens_q/k (int32 [B + 1], CUDA) and max_seqlen_q/k for varlen; causal
    bottom-right; GQA: dk, dv are summed over the group). dq, dk, dv, dsink: outputs to write (None: allocated
    like q, k, v; dsink float32 [heads_q]). workspace: a contiguous CUDA tensor of at least
    mha_bwd_workspace_size(...) bytes (None: allocated from torch for this call)."""
    import torch
    varlen = cu_seqlens_q is not None
    a = _bwd_args(torch, dout, q, k, v, out, lse, causal, window, softmax_scale, config, sink, varlen)
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
    return (dq, dk, dv, dsink) if sink is not None else (dq, dk, dv)


def mha_bwd_workspace_size(q, k, causal=False, window=None, config=None, sink=None, cu_seqlens_q=None,
                           max_seqlen_q=None, max_seqlen_k=None):
    """The workspace bytes mha_bwd needs (its shapes, mask, varlen and sink decide); no launch."""
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
    lib = _bwd_lib()
    ctx = context(q.device.index or 0)
    n = ctypes.c_size_t()
    _check(lib.fa4_mha_bwd_workspace_size(ctx, ctypes.byref(a), ctypes.byref(n)), ctx)
    return n.value
