/* kv_append.c - fa4_kv_append: validate, get the kv-append kernel (gen/kv_append.c), launch.
 *
 * Guarantees (fa4.h has the contract): every check on the caller's arguments runs before the driver is opened,
 * so a bad argument is FA4_ERR_INVALID_ARGUMENT naming it on any machine; then the driver's word on every
 * buffer (buffers.c) and only then one launch. The device values (cache_seqlens, block_table, cache_batch_idx)
 * are read by the kernel alone, which gives every bit pattern the meaning fa4.h documents.
 *
 * A dense cache is launched as a pool of cache_batch pages of cache_rows rows (max_pages 1), its table
 * cache_batch_idx (or none: sequence b's page is b), so the kernel has one addressing scheme for both layouts.
 */
#include <stdio.h>
#include <string.h>

#include "rt_internal.h"

#define BAD(what, ...) rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, what ": " __VA_ARGS__)

static const int elem_bytes[] = {[FA4_BF16] = 2, [FA4_FP16] = 2, [FA4_E4M3] = 1};

/* The kernel copies 16-byte chunks (a v4.b32 load and store): bases and strides in bytes are multiples of it. */
enum { CHUNK = 16 };

/* One 4-D tensor of the call: [n0, n1, heads, depth] at element strides (n0, n1, head), 0 taken as packed. */
typedef struct {
    const char *name;
    const void *ptr;
    const int64_t *given;
    int64_t stride[3];
    int64_t count[3];
    int depth;
} KvaTensor;

enum { T_K, T_V, T_KC, T_VC, N_T };

static int64_t mul_sat(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

static int64_t add_sat(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

static void tensors(const fa4_kv_append_args *a, KvaTensor t[N_T])
{
    int paged = a->block_table != NULL;
    int64_t pages = paged ? a->num_pages : a->cache_batch, rows = paged ? a->page_size : a->cache_rows;
    const struct { const char *name; const void *ptr; const int64_t *st; int64_t n0, n1; int depth; } d[N_T] = {
        {"k", a->k, a->k_stride, a->batch, a->s_new, a->k_depth},
        {"v", a->v, a->v_stride, a->batch, a->s_new, a->v_depth},
        {"k_cache", a->k_cache, a->k_cache_stride, pages, rows, a->k_depth},
        {"v_cache", a->v_cache, a->v_cache_stride, pages, rows, a->v_depth}};
    for (int i = 0; i < N_T; i++) {
        KvaTensor *x = &t[i];
        x->name = d[i].name, x->ptr = d[i].ptr, x->given = d[i].st, x->depth = d[i].depth;
        x->count[0] = d[i].n0, x->count[1] = d[i].n1, x->count[2] = a->heads_kv;
        const int64_t packed[3] = {mul_sat(mul_sat(d[i].n1, a->heads_kv), d[i].depth),
                                   mul_sat(a->heads_kv, d[i].depth), d[i].depth};
        for (int j = 0; j < 3; j++) x->stride[j] = d[i].st[j] ? d[i].st[j] : packed[j];
    }
}

/* Bytes from a tensor's base to the end of its last row (INT64_MAX past 2^63). */
static int64_t span(const KvaTensor *t, int eb)
{
    int64_t elems = t->depth;
    for (int j = 0; j < 3; j++) elems = add_sat(elems, mul_sat(t->count[j] - 1, t->stride[j]));
    return mul_sat(elems, eb);
}

static fa4_status read_args(fa4_ctx *ctx, const fa4_kv_append_args *in, fa4_kv_append_args *a)
{
    const fa4_kv_append_args def = FA4_KV_APPEND_ARGS_INIT;
    const size_t min = offsetof(fa4_kv_append_args, seqlens_out) + sizeof in->seqlens_out;
    *a = def;
    if (!in) return BAD("args", "NULL");
    if (in->size < min)
        return BAD("args->size", "%zu is smaller than the %zu bytes this library needs; set it to "
                   "sizeof(fa4_kv_append_args) (FA4_KV_APPEND_ARGS_INIT does)", in->size, min);
    memcpy(a, in, in->size < sizeof *a ? in->size : sizeof *a);
    return FA4_OK;
}

static fa4_status check_shape(fa4_ctx *ctx, const fa4_kv_append_args *a)
{
    if ((unsigned)a->dtype > FA4_E4M3) return BAD("dtype", "%d is not a fa4_dtype", (int)a->dtype);
    const void *p[4] = {a->k, a->v, a->k_cache, a->v_cache};
    static const char *const pn[4] = {"k", "v", "k_cache", "v_cache"};
    for (int i = 0; i < 4; i++)
        if (!p[i]) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: NULL", pn[i]);
    const int dims[3] = {a->batch, a->s_new, a->heads_kv};
    static const char *const dn[3] = {"batch", "s_new", "heads_kv"};
    for (int i = 0; i < 3; i++)
        if (dims[i] <= 0) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %d; must be > 0", dn[i], dims[i]);
    const int depth[2] = {a->k_depth, a->v_depth};
    for (int i = 0; i < 2; i++)
        if (depth[i] <= 0 || depth[i] % 16 || depth[i] > 1024)
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %d; use a multiple of 16 up to 1024",
                           i ? "v_depth" : "k_depth", depth[i]);
    /* the kernel numbers its row pairs (b, i, h) in 32 bits */
    if ((int64_t)a->batch * a->s_new * a->heads_kv > INT32_MAX)
        return BAD("s_new", "batch %d x s_new %d x heads_kv %d rows; the kernel takes at most 2^31 - 1", a->batch,
                   a->s_new, a->heads_kv);
    return FA4_OK;
}

/* The cache's layout: dense (block_table NULL) or paged, and its capacity in positions (< 2^31: the kernel's
 * positions are 32-bit past its bound check). */
static fa4_status check_cache(fa4_ctx *ctx, const fa4_kv_append_args *a, int64_t *capacity)
{
    if (!a->block_table) {
        if (a->page_size || a->max_pages || a->num_pages)
            return BAD("page_size", "page_size/max_pages/num_pages given without block_table (a dense cache has "
                       "cache_batch and cache_rows)");
        if (a->cache_batch <= 0) return BAD("cache_batch", "%d; a dense cache has >= 1 rows (sequences)", a->cache_batch);
        if (a->cache_rows <= 0) return BAD("cache_rows", "%d; a dense cache holds >= 1 positions a row", a->cache_rows);
        if (!a->cache_batch_idx && a->cache_batch < a->batch)
            return BAD("cache_batch", "%d rows for batch %d; without cache_batch_idx sequence b goes to row b: give a "
                       "cache of >= batch rows, or cache_batch_idx", a->cache_batch, a->batch);
        if ((uintptr_t)a->cache_batch_idx % 4)
            return BAD("cache_batch_idx", "address %p is not 4-byte aligned (int32)", (const void *)a->cache_batch_idx);
        *capacity = a->cache_rows;
        return FA4_OK;
    }
    if (a->cache_batch || a->cache_rows || a->cache_batch_idx)
        return BAD("cache_batch", "cache_batch/cache_rows/cache_batch_idx given with block_table (a paged cache has "
                   "num_pages pages of page_size rows)");
    if ((uintptr_t)a->block_table % 4)
        return BAD("block_table", "address %p is not 4-byte aligned (int32)", (const void *)a->block_table);
    if (a->page_size <= 0) return BAD("page_size", "%d; must be > 0", a->page_size);
    if (a->max_pages <= 0) return BAD("max_pages", "%d; must be > 0 (block_table's row length)", a->max_pages);
    if (a->num_pages <= 0) return BAD("num_pages", "%d; must be > 0 (pages in the pools)", a->num_pages);
    *capacity = (int64_t)a->max_pages * a->page_size;
    if (*capacity > INT32_MAX)
        return BAD("max_pages", "%d x page_size %d = %lld positions a sequence; at most 2^31 - 1", a->max_pages,
                   a->page_size, (long long)*capacity);
    return FA4_OK;
}

/* The lengths: a device array, or one host value for every sequence (checked to fit the cache). */
static fa4_status check_lengths(fa4_ctx *ctx, const fa4_kv_append_args *a, int64_t capacity)
{
    if (a->cache_seqlens) {
        if (a->cache_seqlen)
            return BAD("cache_seqlen", "%d given with cache_seqlens; the device array holds the lengths (leave it 0)",
                       a->cache_seqlen);
        if ((uintptr_t)a->cache_seqlens % 4)
            return BAD("cache_seqlens", "address %p is not 4-byte aligned (int32)", (const void *)a->cache_seqlens);
    } else if (a->cache_seqlen < 0 || (int64_t)a->cache_seqlen + a->s_new > capacity) {
        return BAD("cache_seqlen", "%d with s_new %d; every sequence's tokens (cache_seqlen + s_new) must fit the "
                   "cache's %lld positions", a->cache_seqlen, a->s_new, (long long)capacity);
    }
    if ((uintptr_t)a->seqlens_out % 4)
        return BAD("seqlens_out", "address %p is not 4-byte aligned (int32)", (void *)a->seqlens_out);
    uintptr_t o = (uintptr_t)a->seqlens_out, c = (uintptr_t)a->cache_seqlens, n = (uintptr_t)a->batch * 4;
    /* the kernel's warps read lengths while one writes its sequence's new length */
    if (o && c && o < c + n && c < o + n)
        return BAD("seqlens_out", "%p overlaps cache_seqlens %p (%d int32 each); give another buffer",
                   (void *)a->seqlens_out, (const void *)a->cache_seqlens, a->batch);
    return FA4_OK;
}

/* Strides: positive or 0 (packed), whole 16-byte chunks; bases 16-byte aligned; no tensor overlapping itself
 * (a cache whose rows overlap would be written twice; taken in the order of their strides, each axis of more than
 * one index steps over at least the axes inside it); spans within 64 bits and the address space. */
static fa4_status check_layout(fa4_ctx *ctx, const fa4_kv_append_args *a, const KvaTensor t[N_T])
{
    static const char *const axis[3] = {"0", "1", "2"};
    int eb = elem_bytes[a->dtype];
    for (int i = 0; i < N_T; i++) {
        const KvaTensor *x = &t[i];
        if ((uintptr_t)x->ptr % CHUNK)
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: address %p is not 16-byte aligned (the kernel copies "
                           "16-byte chunks)", x->name, x->ptr);
        for (int d = 0; d < 3; d++) {
            if (x->given[d] < 0)
                return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s_stride[%s]: %lld; strides must be positive (0 "
                               "selects the packed layout)", x->name, axis[d], (long long)x->given[d]);
            if (mul_sat(x->stride[d], eb) % CHUNK)
                return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s_stride[%s]: %lld elements = %lld bytes; the kernel "
                               "needs a multiple of 16 bytes", x->name, axis[d], (long long)x->stride[d],
                               (long long)mul_sat(x->stride[d], eb));
        }
        int ord[3], n = 0;
        for (int d = 0; d < 3; d++) {
            if (x->count[d] <= 1) continue;
            int j = n++;
            for (; j > 0 && x->stride[ord[j - 1]] > x->stride[d]; j--) ord[j] = ord[j - 1];
            ord[j] = d;
        }
        int64_t extent = x->depth;
        for (int j = 0; j < n; j++) {
            int d = ord[j];
            if (x->stride[d] < extent)
                return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s_stride[%d]: %lld elements%s steps over less than the "
                               "%lld elements of the axes inside it; a tensor's rows may not overlap", x->name, d,
                               (long long)x->stride[d], x->given[d] ? "" : " (packed)", (long long)extent);
            extent = add_sat(extent, mul_sat(x->count[d] - 1, x->stride[d]));
        }
        int64_t s = span(x, eb);
        if (s > ((int64_t)1 << 57) || (uintptr_t)x->ptr > UINTPTR_MAX - (uintptr_t)s)
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: shape [%lld, %lld, %lld, %d] at its strides spans over "
                           "2^57 bytes from %p; no buffer is that large", x->name, (long long)x->count[0],
                           (long long)x->count[1], (long long)x->count[2], x->depth, x->ptr);
    }
    return FA4_OK;
}

static fa4_status prepare(fa4_ctx *ctx, const fa4_kv_append_args *in, fa4_kv_append_args *a, KvaTensor t[N_T])
{
    int64_t capacity = 0;
    fa4_status s;
    if ((s = read_args(ctx, in, a)) || (s = check_shape(ctx, a)) || (s = check_cache(ctx, a, &capacity)) ||
        (s = check_lengths(ctx, a, capacity)))
        return s;
    tensors(a, t);
    return check_layout(ctx, a, t);
}

/* The kernel of a call: its canonical config (gen/kv_append.c: target, dtype, qk, ov), looked up, else built. */
static fa4_status get_kernel(fa4_ctx *ctx, const fa4_kv_append_args *a, TargetId target, fa4_kernel **k)
{
    static const DType dt[] = {[FA4_BF16] = DT_BF16, [FA4_FP16] = DT_FP16, [FA4_E4M3] = DT_E4M3};
    Config c;
    config_init(&c);
    c.kind = KIND_KV_APPEND;
    c.target = target;
    c.dtype = dt[a->dtype];
    c.qk_depth = a->k_depth;
    c.ov_depth = a->v_depth;
    char key[128];
    config_canonical(&c, key, sizeof key);
    uint64_t hash = rt_fnv1a(key, strlen(key), RT_FNV_SEED);
    fa4_kernel_stats st = {0};
    *k = rt_kernel_lookup(ctx, key, hash);
    return *k ? FA4_OK : rt_kernel_build(ctx, key, hash, &c, NULL, k, &st, FA4_ERR_UNSUPPORTED);
}

static void set(RtLaunch *l, ScalarId id, RtScalar v)
{
    l->scalars[id] = v;
    l->has_scalar[id] = 1;
}
#define U64(x) ((RtScalar){.u64 = (uint64_t)(x)})
#define U32(x) ((RtScalar){.u32 = (uint32_t)(x)})
#define PTR(x) U64((uintptr_t)(x))

/* Launch ABI (gen/kv_append.c kva_plan): pointers, the four tensors' element strides, the lengths in and out, the
 * table (a dense cache: cache_batch_idx, one entry a sequence), rows per page, the pool's pages, the shape. */
static void bind(const fa4_kv_append_args *a, const KvaTensor t[N_T], const Plan *p, RtLaunch *l)
{
    int paged = a->block_table != NULL;
    memset(l, 0, sizeof *l);
    static const ScalarId st[N_T][3] = {
        {SCALAR_KN_STRIDE_B, SCALAR_KN_STRIDE_S, SCALAR_KN_STRIDE_H},
        {SCALAR_VN_STRIDE_B, SCALAR_VN_STRIDE_S, SCALAR_VN_STRIDE_H},
        {SCALAR_KC_STRIDE_P, SCALAR_KC_STRIDE_R, SCALAR_KC_STRIDE_H},
        {SCALAR_VC_STRIDE_P, SCALAR_VC_STRIDE_R, SCALAR_VC_STRIDE_H}};
    static const ScalarId ptr[N_T] = {SCALAR_K_NEW, SCALAR_V_NEW, SCALAR_K_CACHE, SCALAR_V_CACHE};
    for (int i = 0; i < N_T; i++) {
        set(l, ptr[i], PTR(t[i].ptr));
        for (int d = 0; d < 3; d++) set(l, st[i][d], U64(t[i].stride[d]));
    }
    set(l, SCALAR_SEQLENS_K, PTR(a->cache_seqlens));
    set(l, SCALAR_SEQLEN_BASE, U32(a->cache_seqlen));
    set(l, SCALAR_SEQLENS_OUT, PTR(a->seqlens_out));
    set(l, SCALAR_BLOCK_TABLE, PTR(paged ? a->block_table : a->cache_batch_idx));
    set(l, SCALAR_MAX_PAGES, U32(paged ? a->max_pages : 1));
    set(l, SCALAR_PAGE_ROWS, U32(paged ? a->page_size : a->cache_rows));
    set(l, SCALAR_NUM_PAGES, U32(paged ? a->num_pages : a->cache_batch));
    set(l, SCALAR_BATCH, U32(a->batch));
    set(l, SCALAR_S_NEW, U32(a->s_new));
    set(l, SCALAR_HEADS_KV, U32(a->heads_kv));
    uint64_t rows = (uint64_t)a->batch * (uint64_t)a->s_new * (uint64_t)a->heads_kv, per = (uint64_t)p->rows_per_cta;
    l->grid = (unsigned)((rows + per - 1) / per);
}

fa4_status fa4_kv_append(fa4_ctx *ctx, const fa4_kv_append_args *args, void *stream)
{
    if (!ctx) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "ctx: NULL");
    fa4_kv_append_args a;
    KvaTensor t[N_T];
    fa4_status s = prepare(ctx, args, &a, t);
    if (s) return s;
    /* Only now the driver: everything above is the caller's arguments. */
    TargetId target = rt_target_of(ctx->opt.target);
    if ((s = rt_driver(ctx)) || (ctx->opt.target == FA4_TARGET_AUTO && (s = rt_device_target(ctx, &target))) ||
        (s = rt_check_target(ctx, target)))
        return s;
    int eb = elem_bytes[a.dtype];
    uint64_t b = (uint64_t)a.batch * 4;
    const RtBuffer buf[] = {
        {"k", a.k, (uint64_t)span(&t[T_K], eb), 0}, {"v", a.v, (uint64_t)span(&t[T_V], eb), 0},
        {"k_cache", a.k_cache, (uint64_t)span(&t[T_KC], eb), 0}, {"v_cache", a.v_cache, (uint64_t)span(&t[T_VC], eb), 0},
        {"cache_seqlens", a.cache_seqlens, b, 0}, {"seqlens_out", a.seqlens_out, b, 0},
        {"cache_batch_idx", a.cache_batch_idx, b, 0},
        {"block_table", a.block_table, rt_mul_sat(b, (uint64_t)(a.block_table ? a.max_pages : 0)), 0}};
    fa4_kernel *k;
    int pushed;
    if ((s = rt_ctx_enter(ctx, &pushed))) return s;
    if (!(s = rt_check_buffers_memo(ctx, buf, (int)(sizeof buf / sizeof buf[0]))) && !(s = get_kernel(ctx, &a, target, &k))) {
        RtLaunch l;
        bind(&a, t, &k->plan, &l);
        s = rt_launch(ctx, k, &l, (CUstream)stream);
    }
    rt_ctx_leave(ctx, pushed);
    return s;
}
