/* mha.c - fa4_mha_fwd: validate, pick the config, get the kernel, encode the
 * tensor maps, launch.
 *
 * Guarantees: every check on the caller's arguments runs before the driver is
 * opened, so a bad argument is FA4_ERR_INVALID_ARGUMENT (naming it) on any
 * machine, with or without a GPU; nothing is launched unless every check,
 * including the tensor-map encodes, has passed. The launch ABI (parameter
 * order, grid, block, smem, cluster) follows the plan and is described at
 * launch() below.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"
#include "score_mod.h"

#define BAD(what, ...) rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, what ": " __VA_ARGS__)

static const int arg_dtype_bytes[] = {[FA4_BF16] = 2, [FA4_FP16] = 2, [FA4_E4M3] = 1};

/* fa4.h's contract for MLA prefill: k_rope holds the last 64 columns of K. */
enum { ROPE_DEPTH = 64 };

/* The tensors of one call, in this order; k_rope only when the caller gives it. */
enum { T_Q, T_K, T_V, T_O, T_K_ROPE, N_TENSORS };

/* One tensor as the kernel sees it: base, element strides (batch, seq, head),
 * the strides the caller gave (for messages), shape and element size. */
typedef struct {
    const char *name;
    const void *ptr;
    const int64_t *given;
    int64_t stride[3];
    int batch, seqlen, heads, depth, elem_bytes;
} TensorArg;

/* O's element size: e4m3 kernels write bf16 O (fa4.h; encode_map checks the plan agrees). */
static int out_elem_bytes(fa4_dtype d) { return d == FA4_E4M3 ? 2 : arg_dtype_bytes[d]; }

/* a x b, or INT64_MAX when it does not fit (every such value is then refused). */
static int64_t mul_sat(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* Element strides with 0 replaced by the packed [batch, seqlen, heads, depth] layout. */
static void packed_strides(const int64_t in[3], int seqlen, int heads, int depth, int64_t out[3])
{
    const int64_t def[3] = {mul_sat(mul_sat(seqlen, heads), depth), mul_sat(heads, depth), depth};
    for (int i = 0; i < 3; i++) out[i] = in[i] ? in[i] : def[i];
}

/* Fills t and returns how many tensors the call has (4, or 5 with k_rope). */
static int tensors(const fa4_mha_args *a, TensorArg t[N_TENSORS])
{
    static const char *const names[N_TENSORS] = {"q", "k", "v", "o", "k_rope"};
    const int64_t *st[N_TENSORS] = {a->q_stride, a->k_stride, a->v_stride, a->o_stride, a->k_rope_stride};
    const void *ptr[N_TENSORS] = {a->q, a->k, a->v, a->o, a->k_rope};
    /* with k_rope, k holds only the nope columns */
    const int depth[N_TENSORS] = {a->qk_depth, a->k_rope ? a->qk_depth - ROPE_DEPTH : a->qk_depth, a->ov_depth,
                                  a->ov_depth, ROPE_DEPTH};
    int n = a->k_rope ? N_TENSORS : T_K_ROPE;
    for (int i = 0; i < n; i++) {
        int kv = i == T_K || i == T_V || i == T_K_ROPE;
        t[i].name = names[i];
        t[i].ptr = ptr[i];
        t[i].given = st[i];
        t[i].batch = a->cu_seqlens_q ? 1 : a->batch; /* varlen: one batch of packed rows */
        if (kv && a->block_table) t[i].batch = a->num_pages; /* paged: the pool's pages of page_size rows */
        t[i].seqlen = kv ? (a->block_table ? a->page_size : a->seqlen_k) : a->seqlen_q;
        t[i].heads = kv ? a->heads_kv : a->heads_q;
        t[i].depth = depth[i];
        t[i].elem_bytes = i == T_O ? out_elem_bytes(a->dtype) : arg_dtype_bytes[a->dtype];
        packed_strides(st[i], t[i].seqlen, t[i].heads, t[i].depth, t[i].stride);
    }
    return n;
}

/* ---------------------------------------------------------------- checks */

static fa4_status read_args(fa4_ctx *ctx, const fa4_mha_args *in, fa4_mha_args *a)
{
    const fa4_mha_args def = FA4_MHA_ARGS_INIT;
    const size_t min = offsetof(fa4_mha_args, o_stride) + sizeof in->o_stride;
    *a = def;
    if (!in) return BAD("args", "NULL");
    if (in->size < min)
        return BAD("args->size", "%zu is smaller than the %zu bytes this library needs; set it to "
                   "sizeof(fa4_mha_args) (FA4_MHA_ARGS_INIT does)", in->size, min);
    memcpy(a, in, in->size < sizeof *a ? in->size : sizeof *a);
    return FA4_OK;
}

static fa4_status check_shape(fa4_ctx *ctx, const fa4_mha_args *a)
{
    if ((unsigned)a->dtype > FA4_E4M3) return BAD("dtype", "%d is not a fa4_dtype", (int)a->dtype);
    if (!a->q) return BAD("q", "NULL");
    if (!a->k) return BAD("k", "NULL");
    if (!a->v) return BAD("v", "NULL");
    if (!a->o) return BAD("o", "NULL");
    const int dims[5] = {a->batch, a->seqlen_q, a->seqlen_k, a->heads_q, a->heads_kv};
    static const char *const dim_names[5] = {"batch", "seqlen_q", "seqlen_k", "heads_q", "heads_kv"};
    for (int i = 0; i < 5; i++)
        if (dims[i] <= 0) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %d; must be > 0", dim_names[i], dims[i]);
    if (a->heads_q % a->heads_kv)
        return BAD("heads_kv", "%d does not divide heads_q = %d (the group, query heads per KV head, must be whole)",
                   a->heads_kv, a->heads_q);
    const int depth[2] = {a->qk_depth, a->ov_depth};
    for (int i = 0; i < 2; i++)
        if (depth[i] <= 0 || depth[i] % 16 || depth[i] > 1024)
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %d; use a multiple of 16 up to 1024",
                           i ? "ov_depth" : "qk_depth", depth[i]);
    if (a->k_rope && a->qk_depth <= ROPE_DEPTH)
        return BAD("k_rope", "given with qk_depth %d; k_rope holds the last %d of K's qk_depth columns and k the "
                   "rest, so qk_depth must be larger (MLA prefill: 192)", a->qk_depth, ROPE_DEPTH);
    return FA4_OK;
}

/* Sequence lengths of one cu_seqlens host mirror: starts at >= 0, monotone, ends within rows. */
static fa4_status check_cu_host(fa4_ctx *ctx, const char *name, const int32_t *cu, int batch, int rows, int *max_len)
{
    *max_len = 0;
    if (cu[0] < 0) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s[0]: %d; must be >= 0", name, cu[0]);
    for (int b = 0; b < batch; b++) {
        if (cu[b + 1] < cu[b])
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: not monotone: [%d] = %d > [%d] = %d", name, b, cu[b],
                           b + 1, cu[b + 1]);
        if (cu[b + 1] - cu[b] > *max_len) *max_len = cu[b + 1] - cu[b];
    }
    if (cu[batch] > rows)
        return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s[%d]: %d is past the tensor's %d packed rows", name, batch,
                       cu[batch], rows);
    return FA4_OK;
}

/* varlen (cu_seqlens_q given): the packed layout's own rules. seqlen_q and seqlen_k are the packed
 * row counts; the per-sequence arrays live on the device and are checked through host mirrors only. */
static fa4_status check_varlen(fa4_ctx *ctx, const fa4_mha_args *a)
{
    if (!a->cu_seqlens_q) {
        if (a->cu_seqlens_k) return BAD("cu_seqlens_k", "given without cu_seqlens_q (varlen needs both)");
        if (a->max_seqlen_q) return BAD("max_seqlen_q", "%d given without cu_seqlens_q", a->max_seqlen_q);
        if (a->cu_seqlens_q_host || a->cu_seqlens_k_host)
            return BAD("cu_seqlens_q_host", "host mirrors given without cu_seqlens_q");
        return FA4_OK;
    }
    if (!a->cu_seqlens_k && !a->block_table)
        return BAD("cu_seqlens_k", "NULL; varlen (cu_seqlens_q given) needs it, or paged KV (block_table, seqlens_k)");
    if (a->cu_seqlens_k && a->block_table)
        return BAD("cu_seqlens_k", "given with block_table; paged KV takes each sequence's kv length from seqlens_k");
    if ((uintptr_t)a->cu_seqlens_q % 4 || (uintptr_t)a->cu_seqlens_k % 4)
        return BAD("cu_seqlens_q", "the cu_seqlens arrays must be 4-byte aligned int32");
    if (a->max_seqlen_q < 1 || a->max_seqlen_q > a->seqlen_q)
        return BAD("max_seqlen_q", "%d; use 1..seqlen_q (%d, the packed q rows): the longest sequence's length",
                   a->max_seqlen_q, a->seqlen_q);
    if (a->k_rope) return BAD("k_rope", "not supported with varlen (cu_seqlens_q)");
    const int64_t *st[4] = {a->q_stride, a->k_stride, a->v_stride, a->o_stride};
    static const char *const nm[4] = {"q_stride[0]", "k_stride[0]", "v_stride[0]", "o_stride[0]"};
    for (int i = 0; i < 4; i++)
        if (st[i][0] && !(a->block_table && (i == 1 || i == 2))) /* paged k, v: axis 0 is the page */
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %lld; varlen tensors are packed rows with no batch "
                           "axis: leave it 0", nm[i], (long long)st[i][0]);
    int max_q = 0, max_k = 0;
    fa4_status s;
    if (a->cu_seqlens_q_host) {
        if ((s = check_cu_host(ctx, "cu_seqlens_q", a->cu_seqlens_q_host, a->batch, a->seqlen_q, &max_q))) return s;
        if (max_q > a->max_seqlen_q)
            return BAD("max_seqlen_q", "%d is shorter than a sequence of cu_seqlens_q (%d rows); its rows past "
                       "max_seqlen_q would be left unwritten", a->max_seqlen_q, max_q);
    }
    if (a->cu_seqlens_k_host && a->block_table) return BAD("cu_seqlens_k_host", "given with block_table");
    if (a->cu_seqlens_k_host &&
        (s = check_cu_host(ctx, "cu_seqlens_k", a->cu_seqlens_k_host, a->batch, a->seqlen_k, &max_k)))
        return s;
    /* the kernel indexes LSE [heads_q, total_q] in 32 bits */
    if ((uint64_t)a->heads_q * (uint64_t)a->seqlen_q > ((uint64_t)1 << 32) - 1)
        return BAD("seqlen_q", "%d packed rows x heads_q %d is over 2^32 - 1; the kernels index LSE in 32 bits",
                   a->seqlen_q, a->heads_q);
    return FA4_OK;
}

/* Paged KV: seqlen_k becomes the bound the shape checks and the kernel see, max_pages x page_size (checked to
 * fit by check_paged). */
static void paged_bound(fa4_mha_args *a)
{
    if (a->block_table) a->seqlen_k = (int)((int64_t)a->max_pages * a->page_size);
}

/* Paged KV (block_table given): the pool, the table and the lengths the host can check. The table's
 * contents and seqlens_k are device memory: the kernel clamps and masks them (gen/varlen.c). */
static fa4_status check_paged(fa4_ctx *ctx, fa4_mha_args *a)
{
    if (!a->block_table) {
        if (a->seqlens_k) return BAD("seqlens_k", "given without block_table (it is paged KV's per-sequence length)");
        if (a->page_size || a->max_pages || a->num_pages)
            return BAD("page_size", "page_size/max_pages/num_pages given without block_table");
        return FA4_OK;
    }
    if (!a->seqlens_k) return BAD("seqlens_k", "NULL; paged KV (block_table given) needs each sequence's kv length");
    if ((uintptr_t)a->block_table % 4 || (uintptr_t)a->seqlens_k % 4)
        return BAD("block_table", "block_table and seqlens_k must be 4-byte aligned int32");
    if (a->page_size < 16 || a->page_size > 256 || (a->page_size & (a->page_size - 1)))
        return BAD("page_size", "%d is not allowed; use a power of two in 16..256", a->page_size);
    if (a->max_pages < 1) return BAD("max_pages", "%d; must be >= 1 (block_table's row length)", a->max_pages);
    if (a->num_pages < 1) return BAD("num_pages", "%d; must be >= 1 (pages in the k and v pools)", a->num_pages);
    if (a->k_rope) return BAD("k_rope", "not supported with paged KV");
    /* the kernels bound kv rows by max_pages x page_size in 32-bit signed arithmetic (check_math's slack) */
    int64_t cap = (int64_t)a->max_pages * a->page_size;
    if (cap > INT32_MAX - 1024)
        return BAD("max_pages", "%d x page_size %d = %lld kv rows per sequence; the kernels need < 2^31 - 1024",
                   a->max_pages, a->page_size, (long long)cap);
    if ((int64_t)a->batch * a->max_pages > INT32_MAX)
        return BAD("max_pages", "%d x batch %d table entries; at most 2^31 - 1", a->max_pages, a->batch);
    if (a->seqlen_k)
        return BAD("seqlen_k", "%d given with block_table; leave it 0 (each sequence's kv length is seqlens_k[b], "
                   "bounded by max_pages x page_size)", a->seqlen_k);
    paged_bound(a);
    return FA4_OK;
}

/* No buffer spans more: the widest virtual address space (x86-64 5-level paging). */
#define MAX_SPAN ((int64_t)1 << 57)

static int64_t add_sat(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

/* The bytes from t's base to the end of its last row, (depth + sum (count - 1) x stride) x element
 * size: every byte a tensor map over t may touch. INT64_MAX when it does not fit 63 bits. */
static int64_t tensor_span(const TensorArg *t)
{
    const int64_t count[3] = {t->batch, t->seqlen, t->heads};
    int64_t elems = t->depth;
    for (int d = 0; d < 3; d++) elems = add_sat(elems, mul_sat(count[d] - 1, t->stride[d]));
    return mul_sat(elems, t->elem_bytes);
}

/* No two elements of t share an address: taken in the order of their strides, the batch, seq and head
 * axes (those of more than one index) each step over at least the extent of the axes inside them,
 * depth first. An output that overlapped itself would be written twice per element; an input may not
 * either, so that the span bounds the product of its counts (fa4.h: tensors may alias each other,
 * never themselves). */
static fa4_status check_overlap(fa4_ctx *ctx, const TensorArg *t)
{
    static const char *const axis[3] = {"batch", "seq", "head"};
    const int64_t count[3] = {t->batch, t->seqlen, t->heads};
    int ord[3], n = 0;
    for (int d = 0; d < 3; d++) {
        if (count[d] <= 1) continue;
        int i = n++;
        for (; i > 0 && t->stride[ord[i - 1]] > t->stride[d]; i--) ord[i] = ord[i - 1];
        ord[i] = d;
    }
    int64_t extent = t->depth;
    for (int i = 0; i < n; i++) {
        int d = ord[i];
        if (t->stride[d] < extent)
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s_stride[%d] (%s): %lld elements%s steps over less than "
                           "the %lld elements of the axes inside it; a tensor's rows, heads and batches may not overlap",
                           t->name, d, axis[d], (long long)t->stride[d], t->given[d] ? "" : " (packed)",
                           (long long)extent);
        extent = add_sat(extent, mul_sat(count[d] - 1, t->stride[d]));
    }
    return FA4_OK;
}

/* Elements of LSE: [batch, heads_q, seqlen_q], varlen [heads_q, seqlen_q] (the packed rows). The
 * partial rows of a split are the same rows. Saturated: 31-bit factors can pass 2^64. */
static uint64_t lse_rows(const fa4_mha_args *a)
{
    return rt_mul_sat(rt_mul_sat((uint64_t)(a->cu_seqlens_q ? 1 : a->batch), (uint64_t)a->heads_q),
                      (uint64_t)a->seqlen_q);
}

/* TMA wants 16-byte aligned bases and 16-byte multiple strides below 2^40. */
static fa4_status check_layout(fa4_ctx *ctx, const fa4_mha_args *a)
{
    static const char *const axis[3] = {"batch", "seq", "head"};
    TensorArg t[N_TENSORS];
    int n = tensors(a, t);
    for (int i = 0; i < n; i++) {
        if ((uintptr_t)t[i].ptr % 16)
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: address %p is not 16-byte aligned (TMA needs it)",
                           t[i].name, t[i].ptr);
        for (int d = 0; d < 3; d++) {
            if (t[i].given[d] < 0)
                return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s_stride[%d] (%s): %lld; strides must be positive "
                               "(0 selects the packed layout)", t[i].name, d, axis[d], (long long)t[i].given[d]);
            int64_t bytes = mul_sat(t[i].stride[d], t[i].elem_bytes);
            if (bytes % 16 || bytes >= ((int64_t)1 << 40))
                return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s_stride[%d] (%s): %lld elements = %lld bytes; TMA "
                               "needs a multiple of 16 bytes below 2^40", t[i].name, d, axis[d],
                               (long long)t[i].stride[d], (long long)bytes);
        }
        fa4_status s = check_overlap(ctx, &t[i]);
        if (s) return s;
    }
    /* The bytes a tensor spans: in 64 bits without overflow, and within the address space. With no
     * overlap this also bounds batch x seqlen x heads x depth of every tensor by 2^57. */
    for (int i = 0; i < n; i++) {
        int64_t span = tensor_span(&t[i]);
        if (span > MAX_SPAN || (uintptr_t)t[i].ptr > UINTPTR_MAX - (uintptr_t)span)
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: batch %d x seqlen %d x heads %d with strides "
                           "(%lld, %lld, %lld) spans %s bytes from %p; no buffer is that large (2^57)", t[i].name,
                           t[i].batch, t[i].seqlen, t[i].heads, (long long)t[i].stride[0], (long long)t[i].stride[1],
                           (long long)t[i].stride[2], span == INT64_MAX ? "over 2^63" : "over 2^57", t[i].ptr);
    }
    /* the device tables the kernels index (varlen, paged KV) lie inside the address space */
    const struct { const char *name; const void *p; uint64_t bytes; } tabs[] = {
        {"cu_seqlens_q", a->cu_seqlens_q, ((uint64_t)a->batch + 1) * 4},
        {"cu_seqlens_k", a->cu_seqlens_k, ((uint64_t)a->batch + 1) * 4},
        {"block_table", a->block_table, (uint64_t)a->batch * (uint64_t)(a->max_pages > 0 ? a->max_pages : 0) * 4},
        {"seqlens_k", a->seqlens_k, (uint64_t)a->batch * 4}};
    for (size_t i = 0; i < sizeof tabs / sizeof tabs[0]; i++)
        if (tabs[i].p && (uintptr_t)tabs[i].p > UINTPTR_MAX - tabs[i].bytes)
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %llu bytes from %p wrap the address space", tabs[i].name,
                           (unsigned long long)tabs[i].bytes, tabs[i].p);
    if ((uintptr_t)a->lse % 4) return BAD("lse", "address %p is not 4-byte aligned", (void *)a->lse);
    if ((uintptr_t)a->sink % 4) return BAD("sink", "address %p is not 4-byte aligned", (const void *)a->sink);
    if ((uintptr_t)a->alibi_slopes % 4)
        return BAD("alibi_slopes", "address %p is not 4-byte aligned", (const void *)a->alibi_slopes);
    if (a->score_mod && !a->score_mod[strspn(a->score_mod, " \t\r\n")])
        return BAD("score_mod", "empty source; give CUDA C defining __device__ float score_mod(float s, int b, int h, "
                   "int q, int k, const void *aux), or NULL for none");
    if (!a->score_mod && a->score_mod_aux) return BAD("score_mod_aux", "given without a score_mod");
    /* the kernel indexes LSE [batch, heads_q, seqlen_q] in 32 bits (gen/softmax.c lse_store); varlen:
     * [heads_q, seqlen_q] (check_varlen). The product is checked: three 31-bit factors can pass 2^64. */
    uint64_t rows = lse_rows(a);
    if (a->lse && rows > ((uint64_t)1 << 32))
        return BAD("lse", "batch %d x heads_q %d x seqlen_q %d = %.4g rows; the kernels index LSE in 32 bits (at most "
                   "2^32 rows): pass lse = NULL or split the batch", a->batch, a->heads_q, a->seqlen_q,
                   (double)a->batch * (double)a->heads_q * (double)a->seqlen_q);
    uint64_t lse_bytes = rows * 4; /* <= 2^34 here */
    if (a->lse && (uintptr_t)a->lse > UINTPTR_MAX - lse_bytes)
        return BAD("lse", "%llu bytes from %p wrap the address space", (unsigned long long)lse_bytes, (void *)a->lse);
    return FA4_OK;
}

/* The kernel's two scalars (launch ABI): the softmax scale in log2 units with the
 * q and k descales folded in, and the v descale, which scales O. With a softcap the
 * raw scores become tanh(q.k softcap_scale) and scale_log2 is the cap's; alibi_scale takes
 * a slope into the raw scores' units. */
typedef struct { float scale_log2, o_scale, sm_scale, softcap_scale, alibi_scale; } KernelScales;

static double or_one(float x) { return x != 0.0f ? (double)x : 1.0; }

/* sm_scale: the same product in natural units, the scale of a score_mod's s (p_sm_scale). */
static KernelScales kernel_scales(const fa4_mha_args *a)
{
    double s = a->softmax_scale != 0.0f ? (double)a->softmax_scale : 1.0 / sqrt((double)a->qk_depth);
    double qk = s * or_one(a->q_descale) * or_one(a->k_descale), unit = a->softcap > 0.0f ? (double)a->softcap : qk;
    KernelScales k = {(float)(unit * 1.4426950408889634), (float)or_one(a->v_descale), (float)qk,
                      (float)(a->softcap > 0.0f ? qk / a->softcap : 0.0), (float)(1.0 / unit)};
    return k;
}

static fa4_status check_descales(fa4_ctx *ctx, const fa4_mha_args *a)
{
    static const char *const names[3] = {"q_descale", "k_descale", "v_descale"};
    const float d[3] = {a->q_descale, a->k_descale, a->v_descale};
    for (int i = 0; i < 3; i++)
        if (!isfinite(d[i]) || d[i] < 0.0f)
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %g; use a finite scale > 0 (0 means 1)", names[i],
                           (double)d[i]);
    KernelScales ks = kernel_scales(a);
    if (a->softcap > 0.0f && !(isfinite(ks.scale_log2) && isfinite(ks.softcap_scale) && ks.softcap_scale > 0.0f &&
                               isfinite(ks.alibi_scale)))
        return BAD("softcap", "%g with softmax_scale x descales %g: the kernel's scales (x cap log2 e, / cap) leave "
                   "float's range", (double)a->softcap, (double)ks.sm_scale);
    if (!isfinite(ks.scale_log2) || !isfinite(ks.alibi_scale))
        return BAD("k_descale", "softmax_scale x q_descale x k_descale = %g x %g x %g overflows a float",
                   (double)a->softmax_scale, or_one(a->q_descale), or_one(a->k_descale));
    return FA4_OK;
}

/* Room for one KV tile (bn <= 256) and the +1 past the widest window bound (FA4_WINDOW_MAX). */
enum { MASK_SLACK = 512 };

static fa4_status check_math(fa4_ctx *ctx, const fa4_mha_args *a)
{
    if (!isfinite(a->softmax_scale)) return BAD("softmax_scale", "%g is not finite", (double)a->softmax_scale);
    if (!isfinite(a->softcap) || a->softcap < 0.0f)
        return BAD("softcap", "%g; use a finite cap > 0, or 0 for none", (double)a->softcap);
    if ((a->softcap > 0.0f || a->alibi_slopes) && a->score_mod)
        return BAD(a->softcap > 0.0f ? "softcap" : "alibi_slopes", "given with a score_mod; the score_mod can compute "
                   "it itself (the built-in transforms and a score_mod do not combine)");
    if ((unsigned)a->mask > FA4_MASK_WINDOW) return BAD("mask", "%d is not a fa4_mask", (int)a->mask);
    if (a->mask == FA4_MASK_WINDOW) {
        if (a->window_left < -1 || a->window_left > FA4_WINDOW_MAX)
            return BAD("window_left", "%d; use 0..%d, or -1 for unbounded", a->window_left, FA4_WINDOW_MAX);
        if (a->window_right < -1 || a->window_right > FA4_WINDOW_MAX)
            return BAD("window_right", "%d; use 0..%d, or -1 for unbounded", a->window_right, FA4_WINDOW_MAX);
    }
    /* The kernels compute a row's key range in 32-bit signed arithmetic: row + seqlen_k - seqlen_q + right + 1,
     * rounded up to a KV tile (< MASK_SLACK), and row + seqlen_k - seqlen_q - left. */
    int right = a->mask == FA4_MASK_CAUSAL ? 0 : a->mask == FA4_MASK_WINDOW ? a->window_right : -1;
    int left = a->mask == FA4_MASK_WINDOW ? a->window_left : -1;
    if (right >= 0 && (int64_t)a->seqlen_k + right + MASK_SLACK > INT32_MAX)
        return BAD("seqlen_k", "%d with the mask's right bound %d; the kernels need seqlen_k + bound <= 2^31 - %d",
                   a->seqlen_k, right, MASK_SLACK + 1);
    if (left >= 0 && (int64_t)a->seqlen_q + left + MASK_SLACK > INT32_MAX)
        return BAD("seqlen_q", "%d with the window's left bound %d; the kernels need seqlen_q + bound <= 2^31 - %d",
                   a->seqlen_q, left, MASK_SLACK + 1);
    return check_descales(ctx, a);
}

/* The partial rows of a split: LSE's rows (batch x heads_q x seqlen_q; varlen: heads_q x total_q, seqlen_q
 * holding the packed q rows), saturated. */
static uint64_t split_rows(const fa4_mha_args *a) { return lse_rows(a); }

/* Where the partial LSEs start in the workspace: after splits x rows x ov_depth f32 partial O values. When
 * the workspace is used, check_workspace has bounded the product; otherwise the kernel never reads the
 * value, and a product past 2^64 gives 0 rather than a wrapped address. */
static uint64_t lse_accum(const fa4_mha_args *a, int splits)
{
    uint64_t off = rt_mul_sat(rt_mul_sat(rt_mul_sat((uint64_t)splits, split_rows(a)), (uint64_t)a->ov_depth), 4);
    uint64_t ws = (uint64_t)(uintptr_t)a->workspace;
    return off == UINT64_MAX || off > UINT64_MAX - ws ? 0 : ws + off;
}

/* The query rows a tile's sequence may have: seqlen_q, or max_seqlen_q for varlen. */
static uint64_t seq_rows_q(const fa4_mha_args *a)
{
    return (uint64_t)(a->cu_seqlens_q ? a->max_seqlen_q : a->seqlen_q);
}

/* Split-KV arguments (fa4.h num_splits, workspace): what needs no driver. */
static fa4_status check_split(fa4_ctx *ctx, const fa4_mha_args *a)
{
    if (a->num_splits < 0 || a->num_splits > FA4_MAX_SPLITS)
        return BAD("num_splits", "%d; use 0 (the runtime picks), 1 (no split) or 2..%d", a->num_splits,
                   FA4_MAX_SPLITS);
    if (a->num_splits > 1 && a->sink)
        return BAD("num_splits", "%d with a sink; a sink joins the whole row's denominator, which no split sees: use "
                   "num_splits 1 (or 0)", a->num_splits);
    if ((uintptr_t)a->workspace % 16)
        return BAD("workspace", "address %p is not 16-byte aligned", a->workspace);
    if (!a->workspace && a->workspace_size) return BAD("workspace", "NULL with workspace_size %zu", a->workspace_size);
    return FA4_OK;
}

/* ---------------------------------------------------------------- config */

/* What the config rules (mha_pick.c) read of a call: no pointer, only whether one is given. target:
 * as far as it is known (the context's, or the placeholder sm90a for AUTO until finish_config). */
static void shape_of(const fa4_mha_args *a, TargetId target, RtMhaShape *s)
{
    memset(s, 0, sizeof *s);
    s->target = target;
    s->sm_count = 0; /* set where a split count is picked (resolve_splits) */
    s->dtype = a->dtype;
    s->qk_depth = a->qk_depth, s->ov_depth = a->ov_depth;
    s->heads_q = a->heads_q, s->heads_kv = a->heads_kv, s->batch = a->batch;
    s->mask = a->mask, s->window_left = a->window_left, s->window_right = a->window_right;
    s->seq_rows_q = seq_rows_q(a);
    s->seqlen_k = a->seqlen_k; /* paged: check_paged made it max_pages x page_size */
    s->varlen = a->cu_seqlens_q != NULL;
    s->page_size = a->block_table ? a->page_size : 0;
    s->sink = a->sink != NULL, s->rope_split = a->k_rope != NULL;
    s->softcap = a->softcap > 0.0f, s->alibi = a->alibi_slopes != NULL;
    s->score_mod = a->score_mod ? score_mod_hash(a->score_mod) : 0;
    s->num_splits = a->num_splits, s->workspace = a->workspace != NULL, s->kv_early = a->kv_early;
    s->config = a->config;
}

/* The config for a (target from the context, or placeholder sm90a for AUTO),
 * with args->config overrides, which may tune the kernel but not change
 * what it computes. finish_config completes it once the target is known. */
static fa4_status args_config(fa4_ctx *ctx, const fa4_mha_args *a, Config *c)
{
    RtMhaShape s;
    shape_of(a, rt_target_of(ctx->opt.target), &s);
    return rt_mha_base_config(ctx, &s, c);
}

/* Every check that needs no driver, then the config, for arguments read_args has copied. */
static fa4_status prepare_read(fa4_ctx *ctx, fa4_mha_args *a, Config *c)
{
    fa4_status s;
    if ((s = check_paged(ctx, a)) || (s = check_shape(ctx, a)) || (s = check_varlen(ctx, a)) ||
        (s = check_layout(ctx, a)) || (s = check_math(ctx, a)) || (s = check_split(ctx, a)))
        return s;
    return args_config(ctx, a, c);
}

static fa4_status prepare(fa4_ctx *ctx, const fa4_mha_args *in, fa4_mha_args *a, Config *c)
{
    fa4_status s = read_args(ctx, in, a);
    return s ? s : prepare_read(ctx, a, c);
}

/* k_rope turns on rope_split, which the generator allows only for some
 * targets and depths: ask it (no plan, no compile) so that the refusal names
 * k_rope, the argument that asked for it, with the generator's reason. */
static fa4_status check_rope(fa4_ctx *ctx, const fa4_mha_args *a, const Config *c)
{
    if (!a->k_rope) return FA4_OK;
    Config t = *c;
    char err[512];
    if (config_fill_defaults(&t, err, sizeof err) == 0 && config_check(&t, err, sizeof err) == 0) return FA4_OK;
    return rt_fail(ctx, FA4_ERR_UNSUPPORTED, "k_rope: the kernel config with K's rope part in its own tensor "
                   "(rope_split=1) is refused for target %s, qk_depth %d, ov_depth %d: %s", target_name[c->target],
                   a->qk_depth, a->ov_depth, err);
}

/* Resolve AUTO from the device (an explicit target needs no driver here; a question that launches
 * nothing, on a machine without a GPU, takes the generator's default target sm90a, as fa4_compile
 * does), check the device runs it when launching, then apply the shape rules, which depend on the
 * target. */
static fa4_status finish_config(fa4_ctx *ctx, const fa4_mha_args *a, Config *c, int launching, int assume_ws)
{
    fa4_status s;
    if (ctx->opt.target == FA4_TARGET_AUTO) {
        if (launching || rt_driver_ready(ctx)) {
            if ((s = rt_driver(ctx)) || (s = rt_device_target(ctx, &c->target))) return s;
        } else {
            c->target = TARGET_SM90A;
        }
    }
    if (launching && (s = rt_check_target(ctx, c->target))) return s;
    RtMhaShape sh;
    shape_of(a, c->target, &sh);
    sh.sm_count = rt_sm_count(ctx, c->target); /* the tile-order rule counts the persistent grid's CTAs */
    sh.workspace = sh.workspace || assume_ws;  /* the rules see the workspace the split picks will assume */
    rt_mha_shape_rules(c, &sh);
    return FA4_OK;
}

static void split_path_words(Config *c, const fa4_mha_args *a, int path);
static fa4_status resolve_splits(fa4_ctx *ctx, const fa4_mha_args *a, Config *c, int assume_ws, int *splits,
                                 int *path);

fa4_status fa4_mha_config(fa4_ctx *ctx, const fa4_mha_args *args, char *buf, size_t n)
{
    if (!ctx) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "ctx: NULL");
    if (!buf || !n) return BAD("buf", "NULL or n == 0");
    buf[0] = 0;
    fa4_mha_args a;
    Config c;
    fa4_status s = prepare(ctx, args, &a, &c);
    int splits, path;
    if (s || (s = finish_config(ctx, &a, &c, 0, 0)) || (s = check_rope(ctx, &a, &c)) ||
        (s = resolve_splits(ctx, &a, &c, 0, &splits, &path)))
        return s;
    split_path_words(&c, &a, path);
    Plan *p = malloc(sizeof *p);
    if (!p) return rt_fail(ctx, FA4_ERR_OUT_OF_MEMORY, "plan: out of memory");
    char err[512];
    if (plan_make(&c, p, err, sizeof err)) s = rt_fail(ctx, FA4_ERR_UNSUPPORTED, "config: %s", err);
    else if (strlen(p->canonical) >= n) s = BAD("n", "%zu is too small for the config text (%zu bytes)", n,
                                                 strlen(p->canonical) + 1);
    else strcpy(buf, p->canonical);
    free(p);
    return s;
}

/* ---------------------------------------------------------------- launch */

/* Launch ABI (both targets): the plan's parameter list (gen/kernel.c,
 * mha_plan_params), packed by rt_launch: the tensor maps, then lse (0 if none),
 * seqlen_q, seqlen_k, heads_q, batch, scale_log2 (softmax scale x q_descale x
 * k_descale x log2 e), o_scale (v_descale). A tile is one
 * cluster of cx = plan cluster[0] CTAs side by side along the query rows,
 * covering rows_per_cta x cx rows of heads_per_cta query heads (the GQA group
 * when the plan packs it into the tile, else 1). The grid is
 * ceil(seqlen_q / (rows_per_cta x cx)) x (heads_q / heads_per_cta) x batch
 * clusters of cx CTAs, or for a persistent kernel at most the device's SMs
 * rounded down to whole clusters, times the CTAs an SM holds (plan ctas_per_sm; the kernel strides over the
 * tiles). */

static fa4_status grid_size(fa4_ctx *ctx, const Plan *p, const fa4_mha_args *a, int splits, unsigned *grid)
{
    int cx = p->cluster[0] > 0 ? p->cluster[0] : 1;
    int hpc = p->heads_per_cta > 0 ? p->heads_per_cta : 1;
    if (p->rows_per_cta <= 0) return rt_fail(ctx, FA4_ERR_INTERNAL, "plan: rows_per_cta is %d", p->rows_per_cta);
    if (p->cfg.cluster_split) { /* the cluster's CTAs are the tile's splits, not more rows */
        if (splits != cx) return rt_fail(ctx, FA4_ERR_INTERNAL, "cluster split of %d CTAs run with %d splits", cx, splits);
        splits = 1;
    }
    if (a->heads_q % hpc)
        return rt_fail(ctx, FA4_ERR_INTERNAL, "plan: %d query heads per CTA do not divide heads_q %d (%s)", hpc,
                       a->heads_q, p->canonical);
    uint64_t rows = (uint64_t)p->rows_per_cta * (uint64_t)(p->cfg.cluster_split ? 1 : cx);
    uint64_t seq_rows = (uint64_t)(a->cu_seqlens_q ? a->max_seqlen_q : a->seqlen_q); /* varlen: the longest */
    /* 31-bit factors: the product can pass 2^64, so it saturates (and is refused below) */
    uint64_t clusters = rt_mul_sat(rt_mul_sat(rt_mul_sat((seq_rows + rows - 1) / rows, (uint64_t)(a->heads_q / hpc)),
                                              (uint64_t)a->batch), (uint64_t)splits);
    uint64_t ctas = clusters * (uint64_t)cx;
    /* the kernel counts tiles (clusters) in 32 bits: a persistent grid's cap must not hide a wrap */
    if (clusters > 0x7fffffffu)
        return BAD("seqlen_q", "%d x heads_q %d x batch %d x %d splits makes %.4g tiles of %llu rows; the kernels "
                   "count at most 2^31 - 1", a->seqlen_q, a->heads_q, a->batch, splits,
                   ceil((double)seq_rows / (double)rows) * (double)(a->heads_q / hpc) * (double)a->batch * splits,
                   (unsigned long long)rows);
    if (p->persistent) { /* ctas_per_sm CTAs an SM (config occupancy) */
        uint64_t cap = (uint64_t)(ctx->device.sm_count / cx * cx) * (uint64_t)p->ctas_per_sm;
        if (cap < (uint64_t)cx) cap = (uint64_t)cx; /* a device smaller than a cluster: the driver will say */
        if (ctas > cap) ctas = cap;
    }
    if (ctas == 0 || ctas > 0x7fffffffu)
        return BAD("seqlen_q", "%d x heads_q %d x batch %d needs %llu CTAs; the grid allows 2^31 - 1", a->seqlen_q,
                   a->heads_q, a->batch, (unsigned long long)ctas);
    *grid = (unsigned)ctas;
    return FA4_OK;
}

/* config timeline=1 (debug; gen/fa4gen.h MhaTimelineSlot): the records go to the workspace, which must hold
 * MHA_TIMELINE_SLOTS u64 per tile. */
static fa4_status check_timeline(fa4_ctx *ctx, const Plan *p, const fa4_mha_args *a)
{
    if (!p->cfg.timeline) return FA4_OK;
    uint64_t rows = (uint64_t)p->rows_per_cta, tiles = rt_mul_sat(rt_mul_sat((seq_rows_q(a) + rows - 1) / rows,
                                                                             (uint64_t)a->heads_q), (uint64_t)a->batch);
    uint64_t need = rt_mul_sat(tiles, MHA_TIMELINE_SLOTS * sizeof(uint64_t));
    if (!a->workspace || a->workspace_size < need)
        return BAD("workspace", "%zu bytes at %p with config timeline=1; the phase records of %llu tiles need %llu "
                   "(%d u64 a tile; give num_splits 1)", a->workspace_size, a->workspace, (unsigned long long)tiles,
                   (unsigned long long)need, MHA_TIMELINE_SLOTS);
    return FA4_OK;
}

/* What the launch binds: the call's tensors as its maps see them, and its scalars. */
static fa4_status bind(fa4_ctx *ctx, const Plan *p, const fa4_mha_args *a, int splits, uint64_t tile_ctr,
                       RtLaunch *l)
{
    static const TensorId id[N_TENSORS] = {[T_Q] = TENSOR_Q, [T_K] = TENSOR_K, [T_V] = TENSOR_V, [T_O] = TENSOR_O,
                                           [T_K_ROPE] = TENSOR_K_ROPE};
    memset(l, 0, sizeof *l);
    fa4_status s = grid_size(ctx, p, a, splits, &l->grid);
    if (s || (s = check_timeline(ctx, p, a))) return s;
    TensorArg t[N_TENSORS];
    int n = tensors(a, t);
    for (int i = 0; i < n; i++) {
        RtTensor *r = &l->tensors[id[i]];
        int64_t eb = t[i].elem_bytes;
        r->name = t[i].name, r->ptr = t[i].ptr, r->elem_bytes = t[i].elem_bytes, r->rank = 4;
        r->dims[0] = (uint64_t)t[i].depth, r->dims[1] = (uint64_t)t[i].seqlen;
        r->dims[2] = (uint64_t)t[i].heads, r->dims[3] = (uint64_t)t[i].batch;
        /* byte strides of seq, head, batch (TensorArg keeps batch, seq, head) */
        r->byte_strides[0] = (uint64_t)(t[i].stride[1] * eb);
        r->byte_strides[1] = (uint64_t)(t[i].stride[2] * eb);
        r->byte_strides[2] = (uint64_t)(t[i].stride[0] * eb);
    }
    KernelScales ks = kernel_scales(a);
    /* varlen (gen/varlen.c): p_seqlen_q is max_seqlen_q, p_seqlen_k the packed k rows, p_total_q the q rows */
    uint32_t seqlen_q = (uint32_t)(a->cu_seqlens_q ? a->max_seqlen_q : a->seqlen_q);
    const RtScalar v[SCALAR_COUNT] = {
        [SCALAR_LSE] = {.u64 = (uint64_t)(uintptr_t)a->lse}, [SCALAR_SEQLEN_Q] = {.u32 = seqlen_q},
        [SCALAR_SEQLEN_K] = {.u32 = (uint32_t)a->seqlen_k}, [SCALAR_HEADS_Q] = {.u32 = (uint32_t)a->heads_q},
        [SCALAR_BATCH] = {.u32 = (uint32_t)a->batch}, [SCALAR_SCALE_LOG2] = {.f32 = ks.scale_log2},
        [SCALAR_O_SCALE] = {.f32 = ks.o_scale}, [SCALAR_SINK] = {.u64 = (uint64_t)(uintptr_t)a->sink},
        [SCALAR_SM_SCALE] = {.f32 = ks.sm_scale}, [SCALAR_AUX] = {.u64 = (uint64_t)(uintptr_t)a->score_mod_aux},
        [SCALAR_NUM_SPLITS] = {.u32 = (uint32_t)splits}, [SCALAR_O_ACCUM] = {.u64 = (uint64_t)(uintptr_t)a->workspace},
        [SCALAR_LSE_ACCUM] = {.u64 = lse_accum(a, splits)},
        [SCALAR_CU_SEQLENS_Q] = {.u64 = (uint64_t)(uintptr_t)a->cu_seqlens_q},
        [SCALAR_CU_SEQLENS_K] = {.u64 = (uint64_t)(uintptr_t)a->cu_seqlens_k},
        [SCALAR_TOTAL_Q] = {.u32 = (uint32_t)a->seqlen_q}, [SCALAR_OUT] = {.u64 = (uint64_t)(uintptr_t)a->o},
        [SCALAR_OUT_STRIDE_B] = {.u64 = (uint64_t)t[T_O].stride[0]}, [SCALAR_OUT_STRIDE_S] = {.u64 = (uint64_t)t[T_O].stride[1]},
        [SCALAR_OUT_STRIDE_H] = {.u64 = (uint64_t)t[T_O].stride[2]},
        [SCALAR_BLOCK_TABLE] = {.u64 = (uint64_t)(uintptr_t)a->block_table},
        [SCALAR_SEQLENS_K] = {.u64 = (uint64_t)(uintptr_t)a->seqlens_k}, [SCALAR_MAX_PAGES] = {.u32 = (uint32_t)a->max_pages},
        [SCALAR_NUM_PAGES] = {.u32 = (uint32_t)a->num_pages}, [SCALAR_SOFTCAP_SCALE] = {.f32 = ks.softcap_scale},
        [SCALAR_ALIBI] = {.u64 = (uint64_t)(uintptr_t)a->alibi_slopes}, [SCALAR_ALIBI_SCALE] = {.f32 = ks.alibi_scale},
        [SCALAR_TIMELINE] = {.u64 = (uint64_t)(uintptr_t)a->workspace}, [SCALAR_TILE_CTR] = {.u64 = tile_ctr}};
    for (int i = 0; i < SCALAR_COUNT; i++) l->scalars[i] = v[i], l->has_scalar[i] = 1;
    return FA4_OK;
}

/* ---------------------------------------------------------------- split-KV */

/* The split count for a (config c, target known), through the split rules (mha_pick.c) with the
 * SM count of the device, or without one the target's flagship (rt_sm_count); assume_ws: as if a
 * workspace were given. */
static fa4_status resolve_splits(fa4_ctx *ctx, const fa4_mha_args *a, Config *c, int assume_ws, int *splits,
                                 int *path)
{
    RtMhaShape s;
    shape_of(a, c->target, &s);
    s.sm_count = rt_sm_count(ctx, c->target);
    return rt_mha_splits(ctx, &s, c, assume_ws, splits, path);
}

/* The config words that follow from the call on the split path (rt_mha_split_words). */
static void split_path_words(Config *c, const fa4_mha_args *a, int path)
{
    RtMhaShape s;
    shape_of(a, c->target, &s);
    rt_mha_split_words(c, &s, path);
}

/* The workspace a launch with `splits` needs fits what the caller gave. */
static fa4_status check_workspace(fa4_ctx *ctx, const fa4_mha_args *a, int splits)
{
    uint64_t rows = split_rows(a), partial = rt_mul_sat((uint64_t)splits, rows);
    if (partial > 0x7fffffffu)
        return BAD("num_splits", "%d x batch %d x heads_q %d x seqlen_q %d = %.4g partial rows; the kernels index "
                   "them in 31 bits: use fewer splits", splits, a->batch, a->heads_q, a->seqlen_q,
                   (double)splits * (double)rows);
    uint64_t need = rt_split_workspace_bytes(splits, rows, a->ov_depth);
    if (!a->workspace)
        return BAD("workspace", "NULL with num_splits %d; give a 16-byte aligned device buffer of at least %llu bytes "
                   "(fa4_mha_split_count says how many)", splits, (unsigned long long)need);
    if (a->workspace_size < need)
        return BAD("workspace_size", "%zu bytes; num_splits %d needs %llu (f32 O and LSE per split)",
                   a->workspace_size, splits, (unsigned long long)need);
    return FA4_OK;
}

fa4_status fa4_mha_split_count(fa4_ctx *ctx, const fa4_mha_args *args, int *num_splits, size_t *workspace_bytes)
{
    if (!ctx) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "ctx: NULL");
    fa4_mha_args a;
    Config c;
    int splits, path;
    fa4_status s = prepare(ctx, args, &a, &c);
    if (s || (s = finish_config(ctx, &a, &c, 0, 1)) || (s = resolve_splits(ctx, &a, &c, 1, &splits, &path))) return s;
    if (num_splits) *num_splits = splits;
    if (workspace_bytes)
        *workspace_bytes = path && splits > 1 && !c.cluster_split
                               ? (size_t)rt_split_workspace_bytes(splits, split_rows(&a), a.ov_depth)
                               : 0; /* one split writes O itself; a cluster split merges in smem */
    return FA4_OK;
}

/* The combine kernel for a's output: its target, O's dtype (e4m3 kernels write bf16), ov. */
static fa4_status get_combine(fa4_ctx *ctx, const fa4_mha_args *a, TargetId t, fa4_kernel **k)
{
    Config c;
    rt_mha_combine_config(t, a->dtype, a->ov_depth, &c);
    char key[360];
    config_canonical(&c, key, sizeof key);
    uint64_t hash = rt_fnv1a(key, strlen(key), RT_FNV_SEED);
    fa4_kernel_stats st = {0};
    *k = rt_kernel_lookup(ctx, key, hash);
    return *k ? FA4_OK : rt_kernel_build(ctx, key, hash, &c, NULL, k, &st, FA4_ERR_UNSUPPORTED);
}

/* Launch ABI of the combine kernel (gen/combine.c): o_accum, lse_accum, out, lse, num_splits,
 * seqlen_q, heads_q, batch, O's element strides (batch, seq, head), cu_seqlens_q (varlen: seqlen_q is
 * total_q, batch the sequences); one row per warp. */
static fa4_status launch_combine(fa4_ctx *ctx, const fa4_kernel *k, const fa4_mha_args *a, int splits,
                                 CUstream stream)
{
    RtLaunch l;
    memset(&l, 0, sizeof l);
    TensorArg t[N_TENSORS];
    tensors(a, t);
    uint64_t rows = split_rows(a), per = (uint64_t)k->plan.rows_per_cta;
    l.grid = (unsigned)((rows + per - 1) / per);
    uint64_t ws = (uint64_t)(uintptr_t)a->workspace;
    const struct { ScalarId id; RtScalar v; } v[] = {
        {SCALAR_O_ACCUM, {.u64 = ws}}, {SCALAR_LSE_ACCUM, {.u64 = lse_accum(a, splits)}},
        {SCALAR_OUT, {.u64 = (uint64_t)(uintptr_t)a->o}}, {SCALAR_LSE, {.u64 = (uint64_t)(uintptr_t)a->lse}},
        {SCALAR_NUM_SPLITS, {.u32 = (uint32_t)splits}}, {SCALAR_SEQLEN_Q, {.u32 = (uint32_t)a->seqlen_q}},
        {SCALAR_HEADS_Q, {.u32 = (uint32_t)a->heads_q}}, {SCALAR_BATCH, {.u32 = (uint32_t)a->batch}},
        {SCALAR_OUT_STRIDE_B, {.u64 = a->cu_seqlens_q ? 0 : (uint64_t)t[T_O].stride[0]}},
        {SCALAR_OUT_STRIDE_S, {.u64 = (uint64_t)t[T_O].stride[1]}}, {SCALAR_OUT_STRIDE_H, {.u64 = (uint64_t)t[T_O].stride[2]}},
        /* varlen: seqlen_q is total_q, batch the sequences (the combine reads cu_seqlens_q[0] and [batch]) */
        {SCALAR_CU_SEQLENS_Q, {.u64 = (uint64_t)(uintptr_t)a->cu_seqlens_q}}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) l.scalars[v[i].id] = v[i].v, l.has_scalar[v[i].id] = 1;
    return rt_launch(ctx, k, &l, stream);
}

/* Every buffer the kernels of this call read or write, with the bytes they may touch from its base, as the
 * driver must see them (buffers.c): the tensors' spans, LSE, the sink, the workspace when the call uses
 * it (ws_bytes, else 0), the varlen and paged tables, and score_mod_aux, whose extent only the caller's
 * score_mod knows (checked for where it lives). The host mirrors cu_seqlens_*_host are read by this
 * library on the host and cannot be asked about. */
/* the tensors, then buffers()'s list of the other pointers (its static assertion keeps the count true) */
enum { N_BUFFERS = N_TENSORS + 9 };

/* Fills b from a and its n tensors t (tensors()) and returns how many buffers it holds. */
static int buffers(const fa4_mha_args *a, uint64_t ws_bytes, const TensorArg *t, int n, RtBuffer b[N_BUFFERS])
{
    int m = 0;
    for (int i = 0; i < n; i++) b[m++] = (RtBuffer){t[i].name, t[i].ptr, (uint64_t)tensor_span(&t[i]), 0};
    const uint64_t batch = (uint64_t)a->batch, entry = sizeof(int32_t);
    const RtBuffer more[] = {
        {"lse", a->lse, rt_mul_sat(lse_rows(a), sizeof(float)), 0},
        {"sink", a->sink, (uint64_t)a->heads_q * sizeof(float), 0},
        {"alibi_slopes", a->alibi_slopes, (uint64_t)a->heads_q * sizeof(float), 0},
        {"workspace", ws_bytes ? a->workspace : NULL, ws_bytes, 0},
        {"cu_seqlens_q", a->cu_seqlens_q, (batch + 1) * entry, 0},
        {"cu_seqlens_k", a->cu_seqlens_k, (batch + 1) * entry, 0},
        {"block_table", a->block_table, rt_mul_sat(batch * entry, (uint64_t)a->max_pages), 0},
        {"seqlens_k", a->seqlens_k, batch * entry, 0},
        {"score_mod_aux", a->score_mod_aux, 0, 1}};
    _Static_assert(sizeof more / sizeof more[0] == N_BUFFERS - N_TENSORS, "N_BUFFERS counts buffers()'s list");
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) b[m++] = more[i];
    return m;
}

static fa4_status check_buffers(fa4_ctx *ctx, const fa4_mha_args *a, uint64_t ws_bytes)
{
    TensorArg t[N_TENSORS];
    RtBuffer b[N_BUFFERS];
    int n = tensors(a, t);
    return rt_check_buffers(ctx, b, buffers(a, ws_bytes, t, n, b));
}

/* ---------------------------------------------------------------- the call memo
 *
 * Most of a cached call's host time went to work whose outcome depends on the arguments' values but not on
 * their pointers: the config's canonical text, built and hashed twice (the split-facts memo and the kernel
 * map), the split count and the kernel lookups (bench/NOTES.md "host cost"). The memo keeps that outcome
 * (the kernels, the split count, the workspace use) per context for the argument signatures seen last:
 * every field of fa4_mha_args except the values of its pointers (a pointer contributes whether it is NULL;
 * config and score_mod contribute their text), plus FA4GEN_SCORE_MOD_LINK's mode for a score_mod.
 *
 * Guarantees: a signature is remembered only after a call of it passed every check and launched, so the
 * checks that read no pointer would pass again; the checks that read one (alignment, the address space
 * wrap, and the driver's word on each buffer, rt_check_buffers_memo) run on every call, and a call that
 * fails one of the first two goes down the full path, which words the refusal. Calls with cu_seqlens host
 * mirrors (their contents are checked on the host) and verbose contexts (which log every fetch) always take
 * the full path. The launch encodes its tensor maps once per kernel and set of tensor bases (RtMapCache). */

/* Every field of fa4_mha_args, in order: V a value (its bytes join the key), P a pointer (whether it is NULL
 * joins the key), S a string (its length joins the key; the text is compared whole). A field missing here
 * would let calls that differ in it share an outcome: rt_mha_memo_fields (test_launch) checks that the list
 * covers every byte of the struct but alignment padding. */
#define MHA_FIELDS(V, P, S)                                                                                     \
    V(size) V(dtype) P(q) P(k) P(v) P(o) P(lse) V(batch) V(seqlen_q) V(seqlen_k) V(heads_q) V(heads_kv)      \
    V(qk_depth) V(ov_depth) V(q_stride) V(k_stride) V(v_stride) V(o_stride) V(softmax_scale) V(mask)          \
    V(window_left) V(window_right) S(config) P(k_rope) V(k_rope_stride) V(q_descale) V(k_descale)              \
    V(v_descale) P(sink) S(score_mod) P(score_mod_aux) V(num_splits) P(workspace) V(workspace_size)           \
    P(cu_seqlens_q) P(cu_seqlens_k) V(max_seqlen_q) P(cu_seqlens_q_host) P(cu_seqlens_k_host) P(block_table) \
    P(seqlens_k) V(page_size) V(max_pages) V(num_pages) V(kv_early) V(softcap) P(alibi_slopes)

int rt_mha_memo_fields(char *err, size_t n)
{
#define FIELD_ROW(f) {#f, offsetof(fa4_mha_args, f), sizeof(((fa4_mha_args *)0)->f), \
                      _Alignof(__typeof__(((fa4_mha_args *)0)->f))},
    static const struct { const char *name; size_t off, size, align; } f[] = {MHA_FIELDS(FIELD_ROW, FIELD_ROW, FIELD_ROW)};
#undef FIELD_ROW
    size_t end = 0;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        size_t want = (end + f[i].align - 1) / f[i].align * f[i].align;
        if (f[i].off != want)
            return snprintf(err, n, "fa4_mha_args.%s is at byte %zu; after the fields before it, %zu: a field between "
                            "them is missing from MHA_FIELDS", f[i].name, f[i].off, want), -1;
        end = f[i].off + f[i].size;
    }
    size_t al = _Alignof(fa4_mha_args), total = (end + al - 1) / al * al;
    if (total != sizeof(fa4_mha_args))
        return snprintf(err, n, "MHA_FIELDS ends at byte %zu of fa4_mha_args's %zu: a field after %s is missing", end,
                        sizeof(fa4_mha_args), f[sizeof f / sizeof f[0] - 1].name), -1;
    return 0;
}

enum { MHA_KEY_MAX = sizeof(fa4_mha_args) + sizeof(int) };

typedef struct {
    unsigned char bytes[MHA_KEY_MAX];
    size_t len;
    uint64_t hash;
} MhaKey;

/* What a call's pointer-free work decided. */
typedef struct {
    fa4_kernel *k, *comb; /* comb: the combine kernel, when ws */
    int splits;
    int ws; /* partials in the workspace, merged by the combine kernel */
    uint64_t tile_ctr; /* a dynamic kernel's counter for this call's stream (sched.c); not remembered */
} MhaOutcome;

struct RtMhaMemo {
    RtMapCache maps; /* first: CUtensorMap's alignment */
    uint64_t hash, gen;
    MhaKey key;
    char *config, *score_mod; /* the strings' text (NULL: none) */
    MhaOutcome out;
};

/* a's signature; 0 when the call takes the full path whatever the memo holds. */
static int memo_key(fa4_ctx *ctx, const fa4_mha_args *a, MhaKey *key)
{
    int link = 0;
    if (ctx->opt.verbose || a->cu_seqlens_q_host || a->cu_seqlens_k_host) return 0;
    if (a->score_mod) {
        ScoreModLink l;
        char err[160];
        if (score_mod_link_from_env(&l, err, sizeof err)) return 0; /* the full path words it */
        link = (int)l;
    }
    unsigned char *p = key->bytes;
#define KEY_V(f) memcpy(p, &a->f, sizeof a->f), p += sizeof a->f;
#define KEY_P(f) *p++ = a->f != NULL;
#define KEY_S(f) {                                                        \
        size_t len_ = a->f ? strlen(a->f) : SIZE_MAX;                     \
        memcpy(p, &len_, sizeof len_), p += sizeof len_;                  \
    }
    MHA_FIELDS(KEY_V, KEY_P, KEY_S)
#undef KEY_V
#undef KEY_P
#undef KEY_S
    memcpy(p, &link, sizeof link), p += sizeof link;
    key->len = (size_t)(p - key->bytes);
    uint64_t h = 0x9e3779b97f4a7c15ull ^ key->len;
    size_t i = 0;
    for (; i + 8 <= key->len; i += 8) {
        uint64_t w;
        memcpy(&w, key->bytes + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    for (; i < key->len; i++) h = (h ^ key->bytes[i]) * 0x100000001b3ull;
    key->hash = h;
    return 1;
}

static unsigned memo_set(uint64_t hash) { return (unsigned)(hash >> 40) % (RT_MHA_MEMO / RT_MHA_WAYS) * RT_MHA_WAYS; }

static int same_text(const char *x, const char *y) { return x == y || (x && y && !strcmp(x, y)); }

static int memo_matches(const RtMhaMemo *e, const MhaKey *key, const fa4_mha_args *a)
{
    return e && e->hash == key->hash && e->key.len == key->len && !memcmp(e->key.bytes, key->bytes, key->len) &&
           same_text(e->config, a->config) && same_text(e->score_mod, a->score_mod);
}

/* The outcome and tensor maps remembered for a's signature (copied: the entry may be replaced once
 * unlocked), with the entry's stamp; 0 when there is none. */
static int memo_get(fa4_ctx *ctx, const MhaKey *key, const fa4_mha_args *a, MhaOutcome *out, RtMapCache *maps,
                    uint64_t *gen)
{
    int found = 0;
    RtMhaMemo **set = &ctx->mha_memo[memo_set(key->hash)];
    pthread_mutex_lock(&ctx->mu);
    for (int i = 0; i < RT_MHA_WAYS && !found; i++)
        if (memo_matches(set[i], key, a)) {
            *out = set[i]->out, *maps = set[i]->maps, *gen = set[i]->gen;
            found = 1;
        }
    pthread_mutex_unlock(&ctx->mu);
    return found;
}

static void memo_free(RtMhaMemo *e)
{
    if (!e) return;
    free(e->config);
    free(e->score_mod);
    free(e);
}

/* Remember a launched call's outcome; best effort (out of memory: not remembered). */
static void memo_put(fa4_ctx *ctx, const MhaKey *key, const fa4_mha_args *a, const MhaOutcome *out,
                     const RtMapCache *maps)
{
    size_t al = _Alignof(RtMhaMemo), bytes = (sizeof(RtMhaMemo) + al - 1) / al * al;
    RtMhaMemo *e = aligned_alloc(al, bytes);
    if (!e) return;
    memset(e, 0, sizeof *e);
    e->maps = *maps, e->hash = key->hash, e->key = *key, e->out = *out;
    e->config = a->config ? strdup(a->config) : NULL;
    e->score_mod = a->score_mod ? strdup(a->score_mod) : NULL;
    if ((a->config && !e->config) || (a->score_mod && !e->score_mod)) {
        memo_free(e);
        return;
    }
    RtMhaMemo **set = &ctx->mha_memo[memo_set(key->hash)], **slot = NULL, *old;
    pthread_mutex_lock(&ctx->mu);
    for (int i = 0; i < RT_MHA_WAYS && !slot; i++)
        if (!set[i] || memo_matches(set[i], key, a)) slot = &set[i];
    if (!slot) slot = &set[ctx->mha_memo_next++ % RT_MHA_WAYS];
    old = *slot;
    e->gen = ++ctx->mha_memo_gen;
    *slot = e;
    pthread_mutex_unlock(&ctx->mu);
    memo_free(old);
}

/* Tensor maps a memoized call encoded anew go back to its entry (if it is still there). */
static void memo_put_maps(fa4_ctx *ctx, const MhaKey *key, uint64_t gen, const RtMapCache *maps)
{
    RtMhaMemo **set = &ctx->mha_memo[memo_set(key->hash)];
    pthread_mutex_lock(&ctx->mu);
    for (int i = 0; i < RT_MHA_WAYS; i++)
        if (set[i] && set[i]->gen == gen) set[i]->maps = *maps;
    pthread_mutex_unlock(&ctx->mu);
}

void rt_mha_memo_free(fa4_ctx *ctx)
{
    for (unsigned i = 0; i < RT_MHA_MEMO; i++) memo_free(ctx->mha_memo[i]), ctx->mha_memo[i] = NULL;
}

/* The checks of prepare_read that read a pointer's value, as one answer (the full path words a refusal):
 * check_paged's and check_varlen's table alignment, check_layout's tensor alignment, its address-space wraps
 * and the lse and sink alignment, check_split's workspace alignment. A call of a memoized signature passed
 * every other check of prepare_read when the signature was first seen. a: paged_bound applied. */
static int pointers_pass(const fa4_mha_args *a, const TensorArg *t, int n)
{
    if ((uintptr_t)a->block_table % 4 || (uintptr_t)a->seqlens_k % 4 || (uintptr_t)a->cu_seqlens_q % 4 ||
        (uintptr_t)a->cu_seqlens_k % 4 || (uintptr_t)a->lse % 4 || (uintptr_t)a->sink % 4 ||
        (uintptr_t)a->alibi_slopes % 4 ||
        (uintptr_t)a->workspace % 16)
        return 0;
    for (int i = 0; i < n; i++)
        if ((uintptr_t)t[i].ptr % 16 || (uintptr_t)t[i].ptr > UINTPTR_MAX - (uintptr_t)tensor_span(&t[i])) return 0;
    const struct { const void *p; uint64_t bytes; } tabs[] = {
        {a->cu_seqlens_q, ((uint64_t)a->batch + 1) * 4}, {a->cu_seqlens_k, ((uint64_t)a->batch + 1) * 4},
        {a->block_table, (uint64_t)a->batch * (uint64_t)(a->max_pages > 0 ? a->max_pages : 0) * 4},
        {a->seqlens_k, (uint64_t)a->batch * 4}, {a->lse, lse_rows(a) * 4}};
    for (size_t i = 0; i < sizeof tabs / sizeof tabs[0]; i++)
        if (tabs[i].p && (uintptr_t)tabs[i].p > UINTPTR_MAX - tabs[i].bytes) return 0;
    return 1;
}

/* The workspace bytes the launch of outcome o uses (0: none). */
static uint64_t ws_bytes(const fa4_mha_args *a, const MhaOutcome *o)
{
    return o->ws ? rt_split_workspace_bytes(o->splits, split_rows(a), a->ov_depth) : 0;
}

/* The launches of a call whose checks have all passed (the buffers' included): the kernel, then the combine
 * kernel when the partials go through the workspace. maps: the tensor maps to reuse or refill. */
static fa4_status launch_call(fa4_ctx *ctx, const fa4_mha_args *a, const MhaOutcome *o, CUstream stream,
                              RtMapCache *maps)
{
    RtLaunch l;
    fa4_status s = bind(ctx, &o->k->plan, a, o->splits, o->tile_ctr, &l);
    if (!s) s = rt_launch_cached(ctx, o->k, &l, stream, maps);
    if (!s && o->ws) s = launch_combine(ctx, o->comb, a, o->splits, stream);
    return s;
}

/* A call of a memoized signature: 1 when it ran or was refused (*s), 0 to take the full path. */
static int memo_call(fa4_ctx *ctx, fa4_mha_args *a, const MhaKey *key, CUstream stream, fa4_status *s)
{
    MhaOutcome o;
    RtMapCache maps;
    uint64_t gen;
    if (!memo_get(ctx, key, a, &o, &maps, &gen)) return 0;
    paged_bound(a);
    TensorArg t[N_TENSORS];
    RtBuffer b[N_BUFFERS];
    int n = tensors(a, t);
    if (!pointers_pass(a, t, n)) return 0;
    int pushed;
    if ((*s = rt_ctx_enter(ctx, &pushed))) return 1;
    if (o.k->plan.cfg.dynamic > 0 && !(o.tile_ctr = rt_tile_counter(ctx, stream))) {
        rt_ctx_leave(ctx, pushed); /* no counter for this stream now: the full path picks the static walk */
        return 0;
    }
    int was_valid = maps.valid;
    const void *was[TENSOR_COUNT];
    memcpy(was, maps.ptr, sizeof was);
    *s = rt_check_buffers_memo(ctx, b, buffers(a, ws_bytes(a, &o), t, n, b));
    if (!*s) *s = launch_call(ctx, a, &o, stream, &maps);
    rt_ctx_leave(ctx, pushed);
    if (!*s && (!was_valid || memcmp(was, maps.ptr, sizeof was))) memo_put_maps(ctx, key, gen, &maps);
    return 1;
}

/* fa4_mha_fwd once the arguments, the config and the split count are settled; the context is current.
 * key: the call's signature, remembered with the outcome once it has launched (NULL: not remembered). */
static fa4_status run(fa4_ctx *ctx, const fa4_mha_args *a, Config *c, int splits, int path, CUstream stream,
                      const MhaKey *key, int dynamic_asked)
{
    fa4_status s;
    MhaOutcome o = {NULL, NULL, splits, path && splits > 1 && !c->cluster_split, 0};
    if (c->dynamic > 0 && !(o.tile_ctr = rt_tile_counter(ctx, stream))) {
        if (dynamic_asked > 0)
            return BAD("config", "dynamic=1: no tile counter for this stream (the first dynamic call of a context "
                       "must not be under stream capture; a driver before CUDA 12.0 has none); leave dynamic out");
        rt_static_walk(c); /* the rules' choice: the static walk computes the same */
        key = NULL;     /* not remembered: the next call of this signature may have a counter */
    }
    if (o.ws && (s = check_workspace(ctx, a, splits))) return s;
    /* check_rope even on a memory hit: where rope_split is refused it is not in the canonical text, so
     * the key of a call with k_rope can name a kernel without it (found by tests/fuzz/fuzz_args) */
    if ((s = check_rope(ctx, a, c))) return s;
    /* the driver's word on every pointer before anything is compiled or launched for it */
    if ((s = check_buffers(ctx, a, ws_bytes(a, &o)))) return s;
    if (o.ws && (s = get_combine(ctx, a, c->target, &o.comb))) return s;
    char text[360];
    config_canonical(c, text, sizeof text);
    int link;
    if (c->score_mod && (s = rt_mod_link(ctx, &link))) return s;
    if (c->score_mod) /* the link mode changes the cubin, not the config */
        snprintf(text + strlen(text), sizeof text - strlen(text), " |%s", score_mod_link_name[link]);
    uint64_t hash = rt_fnv1a(text, strlen(text), RT_FNV_SEED);
    o.k = rt_kernel_lookup_mod(ctx, text, hash, a->score_mod);
    fa4_kernel_stats st = {0};
    if (!o.k && (s = rt_kernel_build(ctx, text, hash, c, a->score_mod, &o.k, &st, FA4_ERR_UNSUPPORTED))) return s;
    RtMapCache maps;
    maps.valid = 0;
    if (!(s = launch_call(ctx, a, &o, stream, &maps)) && key) memo_put(ctx, key, a, &o, &maps);
    return s;
}

fa4_status fa4_mha_fwd(fa4_ctx *ctx, const fa4_mha_args *args, void *stream)
{
    if (!ctx) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "ctx: NULL");
    fa4_mha_args a;
    Config c;
    MhaKey key;
    fa4_status s = read_args(ctx, args, &a);
    if (s) return s;
    int keyed = memo_key(ctx, &a, &key);
    /* a context whose driver is not open yet has remembered nothing (and a refusal must not open it) */
    int ready = atomic_load_explicit(&ctx->drv_state, memory_order_acquire) == LIB_READY;
    if (keyed && ready && memo_call(ctx, &a, &key, (CUstream)stream, &s)) return s;
    if ((s = read_args(ctx, args, &a)) || (s = prepare_read(ctx, &a, &c))) return s; /* a afresh: memo_call may have bounded it */
    int dynamic_asked = c.dynamic;
    /* Only now the driver: everything above is the caller's arguments. */
    int splits, path, pushed;
    if ((s = rt_driver(ctx)) || (s = finish_config(ctx, &a, &c, 1, 0)) ||
        (s = resolve_splits(ctx, &a, &c, 0, &splits, &path)))
        return s;
    split_path_words(&c, &a, path);
    if ((s = rt_ctx_enter(ctx, &pushed))) return s;
    s = run(ctx, &a, &c, splits, path, (CUstream)stream, keyed ? &key : NULL, dynamic_asked);
    rt_ctx_leave(ctx, pushed);
    return s;
}
