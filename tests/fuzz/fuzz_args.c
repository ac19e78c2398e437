/* fuzz_args.c - fa4_mha_fwd and fa4_mla_sparse_fwd argument structs through the fake driver.
 *
 * The input chooses the entry, target, struct size, dtype, shapes, strides, pointers (16-byte
 * aligned or not, NULL, near the top of the address space), flags, scales and tuning words.
 * For every pointer the harness "allocates" (the fake never dereferences) the bytes the layout
 * fa4.h describes needs, computed here in 128-bit arithmetic from the arguments alone: the
 * largest offset any index of the declared shape reaches with the declared strides (0 = packed).
 * The fake driver knows memory as ranges (issue 26): the input's last bytes give each pointer's slot
 * (2^57 bytes apart) a range: by default device 0's whole slot, so inputs written before keep their
 * meaning; else a small one of 2^k bytes, page-locked host memory, device 1's memory, managed memory,
 * or none.
 *
 * Properties:
 *   - a rejected call returns an error whose message begins with the name of an argument field
 *     (or config / args->config for the tuning words), never FA4_ERR_INTERNAL, and launches nothing;
 *   - an accepted call's every buffer is device memory of device 0 or managed memory, and the range the
 *     driver knows for it holds every byte its arguments describe (computed here, in 128 bits);
 *   - an accepted call launches once; a buffer of the size its arguments need can exist (at most
 *     2^57 bytes, not wrapping the address space); every tensor map it encodes starts at its
 *     tensor's base and reaches no further than that buffer; the MLA kernel's raw-pointer
 *     parameters (decoded by the plan's parameter list) are the caller's pointers and strides,
 *     and the rows they reach stay inside the buffers; the 32-bit row indices of LSE (MHA:
 *     batch x heads_q x seqlen_q, gen/softmax.c lse_store; MLA: s_q x h_q) do not wrap; the grid
 *     counts the kernel's tiles without a wrap. */
#include <limits.h>
#include <math.h>
#include <stddef.h>

#include "fuzz_rt.h"

typedef unsigned __int128 u128;

enum { N_SLOTS = 10, SLOT_SHIFT = 57 };

/* ---------------------------------------------------------------- reading the input */

typedef struct { const unsigned char *p; size_t n; } Rd;

static uint8_t u8(Rd *r) { return r->n ? (r->n--, *r->p++) : 0; }
static uint32_t u32(Rd *r) { uint32_t v = 0; for (int i = 0; i < 4; i++) v = v << 8 | u8(r); return v; }
static uint64_t u64(Rd *r) { return (uint64_t)u32(r) << 32 | u32(r); }

/* A size: mostly small, sometimes a power of two +-1, INT_MAX-ish, 0, negative or raw. */
static int pick_int(Rd *r)
{
    uint8_t b = u8(r), v = u8(r);
    switch (b % 8) {
    case 0: return 0;
    case 1: return -(int)v - 1;
    case 2: return (int)((1u << (v % 31)) + (unsigned)(b / 8 % 3) - 1u);
    case 3: return INT_MAX - v;
    case 4: return (int)u32(r);
    default: return 1 + v % 64 * (b / 8 % 4 ? 1 : 64);
    }
}

static int pick_from(Rd *r, const int *t, int n) { return t[u8(r) % n]; }

/* An element stride: mostly 0 (packed), else small, a power of two, or raw. */
static int64_t pick_stride(Rd *r)
{
    uint8_t b = u8(r), v = u8(r);
    switch (b % 8) {
    case 4: return (int64_t)v * 8;
    case 5: return ((int64_t)1 << (v % 63)) - (b / 8 % 2);
    case 6: return (int64_t)u64(r);
    default: return 0;
    }
}

static float pick_float(Rd *r)
{
    static const float t[] = {0.0f, 1.0f, 0.125f, 0.088388f, -1.0f, 1e30f, 3e38f, 1e-30f, 0.0f, 0.0f, 0.0f, 2.0f};
    uint8_t b = u8(r);
    if (b == 255) return NAN;
    if (b == 254) return INFINITY;
    return t[b % (sizeof t / sizeof t[0])];
}

/* Buffer slot i's base: slots are 2^57 bytes apart (the largest span accepted), so a base names its tensor
 * and its range (pick_memory). */
static const void *pick_ptr(Rd *r, int slot, int optional)
{
    uint8_t b = u8(r), v = u8(r);
    uintptr_t base = ((uintptr_t)(slot + 1) << SLOT_SHIFT) + (uintptr_t)v * 4096;
    switch (b % 16) {
    case 0: return optional ? NULL : (const void *)base;
    case 1: return optional ? (const void *)base : NULL;
    case 2: return (const void *)(base + 4 * (1 + v % 3)); /* misaligned for TMA, aligned for 4-byte stores */
    case 3: return (const void *)(UINTPTR_MAX - ((uintptr_t)(slot + 1) << 24) - (uintptr_t)v * 4096 + 1);
    default: return (const void *)base;
    }
}

/* ---------------------------------------------------------------- memory the fake driver knows */

enum { MEM_DEVICE, MEM_SMALL, MEM_HOST, MEM_OTHER_DEVICE, MEM_MANAGED, MEM_NONE };
static const char *const mem_names[] = {"device 0", "small", "page-locked host", "device 1", "managed", "none"};
static struct { uint64_t base, size; int kind; } ranges[N_SLOTS];
static int n_ranges;

/* One range per slot from the input's last bytes (none left: device 0 up to 2^57 bytes from the slot's base,
 * the memory every input had before the driver was asked). */
static void pick_memory(Rd *r)
{
    for (int i = 0; i < N_SLOTS; i++) {
        uint8_t b = u8(r), v = u8(r);
        int kind = b % 8 <= MEM_NONE ? b % 8 : MEM_DEVICE;
        uint64_t base = (uint64_t)(i + 1) << SLOT_SHIFT;
        uint64_t size = kind == MEM_SMALL ? (uint64_t)1 << (v % 48) : (uint64_t)1 << SLOT_SHIFT;
        ranges[i].kind = kind;
        if (kind == MEM_NONE) continue;
        ranges[n_ranges].base = base, ranges[n_ranges].size = size, ranges[n_ranges].kind = kind;
        static const unsigned type[] = {CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST,
                                        CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE};
        FUZZ_CHECK(!fz_fake_map(base, size, type[kind], kind >= MEM_OTHER_DEVICE, kind == MEM_MANAGED),
                   "fake_cuda_map");
        n_ranges++;
    }
}

static void drop_memory(void)
{
    for (int i = 0; i < n_ranges; i++) fz_fake_unmap(ranges[i].base);
    n_ranges = 0;
}

/* An accepted call's buffer: device 0 or managed memory whose range (the latest registered holding p, as
 * the fake driver looks it up) holds need bytes from p. */
static void check_memory(const char *name, const void *p, u128 need)
{
    if (!p) return;
    uint64_t a = (uint64_t)(uintptr_t)p;
    int hit = -1;
    for (int i = n_ranges - 1; i >= 0 && hit < 0; i--)
        if (a >= ranges[i].base && a - ranges[i].base < ranges[i].size) hit = i;
    FUZZ_CHECK(hit >= 0, "accepted %s at %p, memory the driver does not know", name, p);
    int kind = ranges[hit].kind;
    FUZZ_CHECK(kind == MEM_DEVICE || kind == MEM_SMALL || kind == MEM_MANAGED, "accepted %s in %s memory", name,
               mem_names[kind]);
    FUZZ_CHECK((u128)(a - ranges[hit].base) + need <= (u128)ranges[hit].size, "accepted %s at %p needing %.6g bytes "
               "in a range of %.6g bytes from 0x%llx", name, p, (double)need, (double)ranges[hit].size,
               (unsigned long long)ranges[hit].base);
}

/* Accepted and refused calls per entry (printed at exit with FUZZ_ARGS_STATS=1: is the corpus
 * reaching launches?). */
static long n_calls[2][2];
static long n_serving[2]; /* accepted mha calls with varlen, with paged KV */

static void print_stats(void)
{
    fprintf(stderr, "fuzz_args: mha %ld accepted (%ld varlen, %ld paged), %ld refused; mla %ld accepted, %ld refused\n",
            n_calls[0][1], n_serving[0], n_serving[1], n_calls[0][0], n_calls[1][1], n_calls[1][0]);
}

/* ---------------------------------------------------------------- checks */

enum { MAX_SPAN_LOG2 = 57 };

/* A rejected call: an error naming a field, nothing launched. */
static void check_refusal(fa4_ctx *ctx, fa4_status s, const char *const *fields, int n_fields)
{
    const char *msg = fa4_last_error(ctx);
    FUZZ_CHECK(s != FA4_ERR_INTERNAL, "internal error: %s", msg);
    FUZZ_CHECK(fz_fake->n_launches == 0, "status %d but %d launches", s, fz_fake->n_launches);
    size_t k = strcspn(msg, ":[ ");
    int named = 0;
    for (int i = 0; i < n_fields && !named; i++) named = strlen(fields[i]) == k && !strncmp(msg, fields[i], k);
    FUZZ_CHECK(named, "status %d: the message does not begin with a field's name: '%s'", s, msg);
}

/* A buffer that the harness could allocate: at most 2^57 bytes, not wrapping. */
static int can_exist(const void *p, u128 need)
{
    return need <= ((u128)1 << MAX_SPAN_LOG2) && (u128)(uintptr_t)p + need <= ((u128)1 << 64);
}

/* The captured launch: the plan's parameters decoded by their types. */
static struct {
    fa4_ctx *ctx;
    int launches;
    const Plan *plan;
    uint64_t scalar[SCALAR_COUNT];
    int has[SCALAR_COUNT];
    int maps[PLAN_MAX_MAPS]; /* fake encode index of each plan map */
    unsigned grid;
} cap;

static CUresult (*real_launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               CUstream, void **, void **);
static CUresult (*real_launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);

/* Every map a launch passed, by serial: the call memo reuses a map it encoded many inputs ago (for the
 * same signature and bases), which the fake's ring of recent encodes may no longer hold. The launch hook
 * copies each map while the fake still holds it (it was encoded by this call or an earlier one seen here). */
enum { SEEN_MAPS = 1 << 15 };
static struct { uint32_t serial; int valid; FakeMap map; } seen_maps[SEEN_MAPS];

static void remember_map(uint32_t serial)
{
    const FakeMap *m = fz_fake_encoded(serial);
    if (!m) return;
    seen_maps[serial % SEEN_MAPS].serial = serial;
    seen_maps[serial % SEEN_MAPS].valid = 1;
    seen_maps[serial % SEEN_MAPS].map = *m;
}

/* The map of encode serial: the fake's, else the copy the launch hook kept; NULL when neither holds it. */
static const FakeMap *map_of(uint32_t serial)
{
    const FakeMap *m = fz_fake_encoded(serial);
    if (m) return m;
    if (seen_maps[serial % SEEN_MAPS].valid && seen_maps[serial % SEEN_MAPS].serial == serial)
        return &seen_maps[serial % SEEN_MAPS].map;
    return NULL;
}

static void capture(CUfunction f, void **params, unsigned grid)
{
    const KernelMap *m = &cap.ctx->kernels;
    const struct fa4_kernel *k = NULL;
    for (size_t i = 0; i < m->cap && !k; i++)
        if (m->slot[i].k && m->slot[i].k->fn == f) k = m->slot[i].k;
    FUZZ_CHECK(k != NULL, "a launch of a function no kernel of the context holds");
    cap.plan = &k->plan;
    cap.launches++;
    cap.grid = grid;
    memset(cap.has, 0, sizeof cap.has);
    for (int i = 0; i < k->plan.n_params; i++) {
        const ParamSpec *q = &k->plan.params[i];
        if (q->type == PARAM_TMAP) {
            uint32_t w[3];
            memcpy(w, params[i], sizeof w);
            FUZZ_CHECK(w[0] == FAKE_MAP_MAGIC && w[2] == ~FAKE_MAP_MAGIC, "parameter %s is not an encoded map",
                       q->name);
            cap.maps[q->index] = (int)w[1]; /* the encode's serial (fake_cuda_encoded) */
            remember_map(w[1]);
            continue;
        }
        uint64_t v = 0;
        memcpy(&v, params[i], q->type == PARAM_U64 ? 8 : 4);
        cap.scalar[q->index] = v;
        cap.has[q->index] = 1;
    }
}

static CUresult hook_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned smem, CUstream s, void **params, void **extra)
{
    capture(f, params, gx);
    FUZZ_CHECK(gy == 1 && gz == 1, "grid %ux%ux%u", gx, gy, gz);
    return real_launch(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}

static CUresult hook_launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    capture(f, params, c->gridDimX);
    FUZZ_CHECK(c->gridDimY == 1 && c->gridDimZ == 1, "grid y/z");
    return real_launch_ex(c, f, params, extra);
}

/* How far a fake-recorded map reaches from its base, in bytes. */
static u128 map_reach(const FakeMap *m, int elem)
{
    u128 r = (u128)m->dims[0] * (u128)elem;
    for (uint32_t i = 1; i < m->rank; i++) r += (u128)(m->dims[i] - 1) * m->strides[i - 1];
    return r;
}

static int map_elem(uint32_t t) { return t == CU_TENSOR_MAP_DATA_TYPE_UINT8 ? 1 : 2; }

/* The largest byte offset + 1 a [count0, count1, count2, depth] tensor reaches with element strides s. */
static u128 tensor_need(const int count[3], int depth, const int64_t s[3], int elem)
{
    u128 r = (u128)depth;
    for (int d = 0; d < 3; d++) r += (u128)(count[d] - 1) * (u128)(uint64_t)s[d];
    return r * (u128)elem;
}

/* ---------------------------------------------------------------- contexts */

static fa4_ctx *ctxs[2]; /* sm90a, sm100a */

static fa4_ctx *ctx_for(int t)
{
    if (ctxs[t] && ctxs[t]->kernels.count > 256) { /* bound the memory cache's growth */
        fa4_destroy(ctxs[t]);
        ctxs[t] = NULL;
    }
    fz_fake_device(t ? 100 : 90);
    if (!ctxs[t]) {
        ctxs[t] = fz_ctx(t ? FA4_TARGET_SM100A : FA4_TARGET_SM90A, NULL);
        real_launch = ctxs[t]->drv.LaunchKernel;
        real_launch_ex = ctxs[t]->drv.LaunchKernelEx;
        ctxs[t]->drv.LaunchKernel = hook_launch;
        ctxs[t]->drv.LaunchKernelEx = hook_launch_ex;
    }
    memset(&cap, 0, sizeof cap);
    cap.ctx = ctxs[t];
    return ctxs[t];
}

/* ---------------------------------------------------------------- fa4_mha_fwd */

static const char *const mha_fields[] = {
    "args", "args->size", "dtype", "q", "k", "v", "o", "lse", "batch", "seqlen_q", "seqlen_k", "heads_q",
    "heads_kv", "qk_depth", "ov_depth", "q_stride", "k_stride", "v_stride", "o_stride", "softmax_scale", "mask",
    "window_left", "window_right", "config", "args->config", "k_rope", "k_rope_stride", "q_descale", "k_descale",
    "v_descale", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "cu_seqlens_q_host", "cu_seqlens_k_host",
    "block_table", "seqlens_k", "page_size", "max_pages", "num_pages"};

static const char *const mha_configs[] = {NULL, "stages=2", "bm=128", "persistent=1", "persistent=0",
                                          "target=sm100a", "dtype=fp16", "qk=64", "mask=causal", "bn=13", "rope_split=1",
                                          "bm=192 bn=96", "pingpong=0", "zz", "mask=window:1,1", "cta=2", "qtiles=1",
                                          "cta=2 bn=128", "early=1", "split=1 early=1", "prefetch=3",
                                          "split=1 prefetch=16", "prefetch=17", "early=1 prefetch=0", NULL};

static void fuzz_mha(Rd *r)
{
    static const int depths[] = {64, 128, 192, 256, 96, 32, 16, 80, 512, 576, 0, -16, 1024, 1040, 17, 128};
    static const int windows[] = {-1, 0, 1, 64, 127, 128, 1000, 1 << 30, (1 << 30) + 1, -2, INT_MAX, INT_MIN};
    int t = u8(r) % 2;
    fa4_ctx *ctx = ctx_for(t);
    fa4_mha_args a = FA4_MHA_ARGS_INIT;
    uint8_t sz = u8(r);
    static const size_t sizes[] = {0, 8, offsetof(fa4_mha_args, o_stride), offsetof(fa4_mha_args, softmax_scale),
                                   offsetof(fa4_mha_args, config), offsetof(fa4_mha_args, k_rope),
                                   offsetof(fa4_mha_args, q_descale), sizeof(fa4_mha_args) + 64};
    a.size = sz < 224 ? sizeof a : sizes[sz % 8];
    uint8_t dt = u8(r);
    a.dtype = (fa4_dtype)(dt < 250 ? dt % 3 : dt);
    a.batch = pick_int(r), a.seqlen_q = pick_int(r), a.seqlen_k = pick_int(r);
    a.heads_kv = pick_int(r);
    uint8_t g = u8(r);
    a.heads_q = g < 192 && a.heads_kv > 0 && a.heads_kv <= INT_MAX / 8 ? a.heads_kv * (1 + g % 8) : pick_int(r);
    a.qk_depth = pick_from(r, depths, 16), a.ov_depth = u8(r) % 4 ? a.qk_depth : pick_from(r, depths, 16);
    uint8_t mk = u8(r);
    a.mask = (fa4_mask)(mk < 250 ? mk % 3 : mk);
    a.window_left = pick_from(r, windows, 12), a.window_right = pick_from(r, windows, 12);
    int64_t *strides[5] = {a.q_stride, a.k_stride, a.v_stride, a.o_stride, a.k_rope_stride};
    for (int i = 0; i < 5; i++)
        for (int d = 0; d < 3; d++) strides[i][d] = pick_stride(r);
    a.q = pick_ptr(r, 0, 0), a.k = pick_ptr(r, 1, 0), a.v = pick_ptr(r, 2, 0), a.o = (void *)pick_ptr(r, 3, 0);
    a.lse = (float *)pick_ptr(r, 4, 1);
    a.k_rope = u8(r) % 4 == 0 ? pick_ptr(r, 5, 0) : NULL;
    a.softmax_scale = pick_float(r), a.q_descale = pick_float(r), a.k_descale = pick_float(r),
    a.v_descale = pick_float(r);
    a.config = mha_configs[u8(r) % (sizeof mha_configs / sizeof mha_configs[0])];
    /* issue 15: varlen (cu_seqlens) and paged KV (block table), alone or together */
    static const int pages[] = {16, 64, 256, 128, 32, 48, 512, 0};
    uint8_t serving = u8(r);
    if ((serving & 3) == 0) {
        a.cu_seqlens_q = (const int32_t *)pick_ptr(r, 6, 0);
        a.cu_seqlens_k = u8(r) % 4 ? (const int32_t *)pick_ptr(r, 7, 1) : NULL;
        a.max_seqlen_q = pick_int(r);
        if (u8(r) % 4) a.q_stride[0] = a.k_stride[0] = a.v_stride[0] = a.o_stride[0] = 0;
    }
    if ((serving & 12) == 0) {
        a.block_table = (const int32_t *)pick_ptr(r, 8, 0), a.seqlens_k = (const int32_t *)pick_ptr(r, 9, 1);
        a.page_size = pick_from(r, pages, 8), a.max_pages = pick_int(r), a.num_pages = pick_int(r);
        if (u8(r) % 4) a.seqlen_k = 0;
    }

    /* kv_early: a promise, never refused; any nonzero value is on */
    uint8_t ke = u8(r);
    a.kv_early = ke < 128 ? 0 : ke < 240 ? 1 : pick_int(r);

    pick_memory(r);
    if (getenv("FUZZ_ARGS_SHOW")) /* what a crash input calls */
        fprintf(stderr, "mha %s size %zu dtype %d b %d sq %d sk %d hq %d hkv %d qk %d ov %d mask %d window %d,%d "
                "q %p k %p v %p o %p lse %p k_rope %p config %s\n", t ? "sm100a" : "sm90a", a.size, (int)a.dtype,
                a.batch, a.seqlen_q, a.seqlen_k, a.heads_q, a.heads_kv, a.qk_depth, a.ov_depth, (int)a.mask,
                a.window_left, a.window_right, a.q, a.k, a.v, a.o, (void *)a.lse, a.k_rope,
                a.config ? a.config : "(null)");
    fa4_status s = fa4_mha_fwd(ctx, &a, NULL);
    n_calls[0][s == FA4_OK]++;
    if (s != FA4_OK) {
        check_refusal(ctx, s, mha_fields, sizeof mha_fields / sizeof mha_fields[0]);
        drop_memory();
        return;
    }
    /* What the struct said, read as the library reads it (fields past size take their defaults). */
    fa4_mha_args e = FA4_MHA_ARGS_INIT;
    memcpy(&e, &a, a.size < sizeof e ? a.size : sizeof e);
    FUZZ_CHECK(cap.launches == 1 && fz_fake->n_launches == 1, "accepted: %d launches", cap.launches);
    const int varlen = e.cu_seqlens_q != NULL, paged = e.block_table != NULL;
    n_serving[0] += varlen, n_serving[1] += paged;
    FUZZ_CHECK(e.batch > 0 && e.seqlen_q > 0 && (paged ? e.seqlen_k == 0 : e.seqlen_k > 0) && e.heads_q > 0 &&
               e.heads_kv > 0, "accepted shape");
    /* paged: the kv bound the library works with (fa4.h) */
    const int64_t kv_cap = paged ? (int64_t)e.max_pages * e.page_size : e.seqlen_k;
    if (paged) {
        FUZZ_CHECK(e.page_size >= 16 && e.page_size <= 256 && !(e.page_size & (e.page_size - 1)) && e.max_pages > 0 &&
                   e.num_pages > 0 && e.seqlens_k && kv_cap < INT_MAX, "accepted paged KV: page %d x %d pages, "
                   "pool %d", e.page_size, e.max_pages, e.num_pages);
        FUZZ_CHECK(cap.has[SCALAR_BLOCK_TABLE] && cap.scalar[SCALAR_BLOCK_TABLE] == (uint64_t)(uintptr_t)e.block_table &&
                   cap.scalar[SCALAR_SEQLENS_K] == (uint64_t)(uintptr_t)e.seqlens_k &&
                   cap.scalar[SCALAR_MAX_PAGES] == (uint32_t)e.max_pages &&
                   cap.scalar[SCALAR_NUM_PAGES] == (uint32_t)e.num_pages, "paged parameters");
        FUZZ_CHECK(can_exist(e.block_table, (u128)e.batch * (u128)e.max_pages * 4) && can_exist(e.seqlens_k,
                   (u128)e.batch * 4), "accepted a block table or seqlens_k past the address space");
    }
    if (varlen) {
        FUZZ_CHECK(e.max_seqlen_q >= 1 && e.max_seqlen_q <= e.seqlen_q && (paged ? !e.cu_seqlens_k : !!e.cu_seqlens_k),
                   "accepted varlen: max_seqlen_q %d of %d rows", e.max_seqlen_q, e.seqlen_q);
        FUZZ_CHECK(cap.has[SCALAR_CU_SEQLENS_Q] && cap.scalar[SCALAR_CU_SEQLENS_Q] == (uint64_t)(uintptr_t)e.cu_seqlens_q &&
                   cap.scalar[SCALAR_TOTAL_Q] == (uint32_t)e.seqlen_q && cap.scalar[SCALAR_OUT] ==
                   (uint64_t)(uintptr_t)e.o, "varlen parameters");
        FUZZ_CHECK(can_exist(e.cu_seqlens_q, ((u128)e.batch + 1) * 4), "accepted cu_seqlens_q past the address space");
    }
    const int eb = e.dtype == FA4_E4M3 ? 1 : 2;
    const int rope = e.k_rope != NULL;
    const void *ptr[5] = {e.q, e.k, e.v, e.o, e.k_rope};
    const int depth[5] = {e.qk_depth, rope ? e.qk_depth - 64 : e.qk_depth, e.ov_depth, e.ov_depth, 64};
    const int elem[5] = {eb, eb, eb, 2, eb};
    u128 need[5] = {0};
    int64_t *es[5] = {e.q_stride, e.k_stride, e.v_stride, e.o_stride, e.k_rope_stride};
    for (int i = 0; i < 4 + rope; i++) {
        int kv = i == 1 || i == 2 || i == 4;
        /* varlen: one batch of packed rows; paged k, v: the pool's pages */
        int count[3] = {varlen ? 1 : e.batch, kv ? e.seqlen_k : e.seqlen_q, kv ? e.heads_kv : e.heads_q};
        if (kv && paged) count[0] = e.num_pages, count[1] = e.page_size;
        int64_t s3[3];
        const u128 packed[3] = {(u128)count[1] * (u128)count[2] * (u128)depth[i], (u128)count[2] * (u128)depth[i],
                                (u128)depth[i]};
        for (int d = 0; d < 3; d++) {
            FUZZ_CHECK(es[i][d] >= 0, "accepted a negative stride of tensor %d", i);
            FUZZ_CHECK(es[i][d] || packed[d] < ((u128)1 << 63), "accepted a packed stride past 2^63");
            s3[d] = es[i][d] ? es[i][d] : (int64_t)packed[d];
        }
        need[i] = tensor_need(count, depth[i], s3, elem[i]);
        FUZZ_CHECK(can_exist(ptr[i], need[i]), "accepted tensor %d needing %.3g bytes at %p", i, (double)need[i],
                   ptr[i]);
    }
    for (int i = 0; i < cap.plan->n_maps; i++) {
        const FakeMap *m = map_of((uint32_t)cap.maps[i]);
        FUZZ_CHECK(m != NULL, "map '%s' of an encode neither the fake nor the harness holds", cap.plan->maps[i].name);
        int which = -1;
        for (int j = 0; j < 4 + rope; j++)
            if (m->addr == (uint64_t)(uintptr_t)ptr[j]) which = j;
        FUZZ_CHECK(which >= 0, "map '%s' starts at 0x%llx, no tensor's base", cap.plan->maps[i].name,
                   (unsigned long long)m->addr);
        u128 reach = map_reach(m, map_elem(m->dtype));
        FUZZ_CHECK(reach <= need[which], "map '%s' reaches %.6g bytes past its base; the buffer has %.6g",
                   cap.plan->maps[i].name, (double)reach, (double)need[which]);
    }
    u128 rows = (u128)(varlen ? 1 : e.batch) * (u128)e.heads_q * (u128)e.seqlen_q; /* varlen: [heads_q, total_q] */
    FUZZ_CHECK(cap.has[SCALAR_LSE] && cap.scalar[SCALAR_LSE] == (uint64_t)(uintptr_t)e.lse, "lse parameter");
    if (e.lse) {
        FUZZ_CHECK(rows <= ((u128)1 << 32), "accepted LSE of %.6g rows: the kernel's 32-bit index wraps",
                   (double)rows);
        FUZZ_CHECK(can_exist(e.lse, rows * 4), "accepted lse at %p needing %.6g bytes", (const void *)e.lse,
                   (double)(rows * 4));
    }
    FUZZ_CHECK(cap.scalar[SCALAR_SEQLEN_Q] == (uint32_t)(varlen ? e.max_seqlen_q : e.seqlen_q) &&
                   cap.scalar[SCALAR_SEQLEN_K] == (uint32_t)kv_cap && cap.scalar[SCALAR_HEADS_Q] == (uint32_t)e.heads_q &&
                   cap.scalar[SCALAR_BATCH] == (uint32_t)e.batch, "shape parameters");
    FUZZ_CHECK(cap.grid >= 1 && cap.grid <= INT_MAX, "grid %u", cap.grid);
    /* every buffer the kernel may touch lies in memory the driver knows as device 0's (or managed) */
    static const char *const tname[5] = {"q", "k", "v", "o", "k_rope"};
    for (int i = 0; i < 4 + rope; i++) check_memory(tname[i], ptr[i], need[i]);
    check_memory("lse", e.lse, rows * 4);
    if (varlen) {
        check_memory("cu_seqlens_q", e.cu_seqlens_q, ((u128)e.batch + 1) * 4);
        check_memory("cu_seqlens_k", e.cu_seqlens_k, ((u128)e.batch + 1) * 4);
    }
    if (paged) {
        check_memory("block_table", e.block_table, (u128)e.batch * (u128)e.max_pages * 4);
        check_memory("seqlens_k", e.seqlens_k, (u128)e.batch * 4);
    }
    drop_memory();
}

/* ---------------------------------------------------------------- fa4_mla_sparse_fwd */

static const char *const mla_fields[] = {
    "args", "args->size", "q", "kv", "indices", "out", "lse", "max_logits", "attn_sink", "topk_length", "s_q",
    "s_kv", "h_q", "d_qk", "topk", "q_stride", "kv_stride", "indices_stride", "out_stride", "sm_scale", "config",
    "args->config"};

static const char *const mla_configs[] = {NULL, "bn=64", "stages=3", "kind=mha", "qk=512", "bn=7", "x", "rescale=0",
                                          NULL, NULL};

static void fuzz_mla(Rd *r)
{
    int t = u8(r) % 8 == 0; /* mostly sm90a, the target that has the kernel */
    fa4_ctx *ctx = ctx_for(t);
    fa4_mla_sparse_args a = FA4_MLA_SPARSE_ARGS_INIT;
    uint8_t sz = u8(r);
    static const size_t sizes[] = {0, 8, offsetof(fa4_mla_sparse_args, q_stride), offsetof(fa4_mla_sparse_args, sm_scale),
                                   offsetof(fa4_mla_sparse_args, config), sizeof(fa4_mla_sparse_args) + 64, (size_t)2 << 20,
                                   sizeof(fa4_mla_sparse_args)};
    a.size = sz < 224 ? sizeof a : sizes[sz % 8];
    static const int heads[] = {8, 16, 64, 128, 192, 256, 1, 7, 136};
    static const int dqk[] = {576, 512, 576, 576, 128, 0};
    a.s_q = pick_int(r), a.s_kv = pick_int(r);
    uint8_t h = u8(r);
    a.h_q = h < 192 ? heads[h % 9] : pick_int(r);
    a.d_qk = pick_from(r, dqk, 6);
    uint8_t tk = u8(r);
    a.topk = tk < 192 ? 64 * (1 + tk % 32) : pick_int(r);
    a.q_stride[0] = pick_stride(r), a.q_stride[1] = pick_stride(r), a.kv_stride = pick_stride(r);
    a.indices_stride = pick_stride(r), a.out_stride[0] = pick_stride(r), a.out_stride[1] = pick_stride(r);
    a.q = pick_ptr(r, 0, 0), a.kv = pick_ptr(r, 1, 0), a.indices = pick_ptr(r, 2, 0), a.out = (void *)pick_ptr(r, 3, 0);
    a.lse = (float *)pick_ptr(r, 4, 1), a.max_logits = (float *)pick_ptr(r, 5, 1);
    a.attn_sink = pick_ptr(r, 6, 1), a.topk_length = pick_ptr(r, 7, 1);
    a.sm_scale = pick_float(r);
    a.config = mla_configs[u8(r) % (sizeof mla_configs / sizeof mla_configs[0])];
    pick_memory(r);

    if (getenv("FUZZ_ARGS_SHOW"))
        fprintf(stderr, "mla %s size %zu s_q %d s_kv %d h_q %d d_qk %d topk %d strides %lld %lld %lld %lld %lld %lld "
                "q %p kv %p indices %p out %p lse %p max_logits %p sink %p topk_length %p config %s\n",
                t ? "sm100a" : "sm90a", a.size, a.s_q, a.s_kv, a.h_q, a.d_qk, a.topk, (long long)a.q_stride[0],
                (long long)a.q_stride[1], (long long)a.kv_stride, (long long)a.indices_stride,
                (long long)a.out_stride[0], (long long)a.out_stride[1], a.q, a.kv, (const void *)a.indices, a.out,
                (void *)a.lse, (void *)a.max_logits, (const void *)a.attn_sink, (const void *)a.topk_length,
                a.config ? a.config : "(null)");
    fa4_status s = fa4_mla_sparse_fwd(ctx, &a, NULL);
    n_calls[1][s == FA4_OK]++;
    if (s != FA4_OK) {
        check_refusal(ctx, s, mla_fields, sizeof mla_fields / sizeof mla_fields[0]);
        drop_memory();
        return;
    }
    fa4_mla_sparse_args e = FA4_MLA_SPARSE_ARGS_INIT;
    memcpy(&e, &a, a.size < sizeof e ? a.size : sizeof e);
    FUZZ_CHECK(cap.launches == 1 && fz_fake->n_launches == 1, "accepted: %d launches", cap.launches);
    FUZZ_CHECK(e.s_q > 0 && e.s_kv > 0 && e.h_q > 0 && e.topk > 0, "accepted shape");
    /* fa4.h's layout: the buffers the arguments describe (0 strides: packed) */
    const int64_t qs = e.q_stride[0] ? e.q_stride[0] : (int64_t)e.h_q * e.d_qk, qh = e.q_stride[1] ? e.q_stride[1] : e.d_qk;
    const int64_t kvs = e.kv_stride ? e.kv_stride : e.d_qk, is = e.indices_stride ? e.indices_stride : e.topk;
    const int64_t os = e.out_stride[0] ? e.out_stride[0] : (int64_t)e.h_q * 512, oh = e.out_stride[1] ? e.out_stride[1] : 512;
    FUZZ_CHECK(qs >= 0 && qh >= 0 && kvs >= 0 && is >= 0 && os >= 0 && oh >= 0, "accepted a negative stride");
    const u128 sq1 = (u128)(e.s_q - 1), h1 = (u128)(e.h_q - 1);
    const u128 need_q = (sq1 * (u128)qs + h1 * (u128)qh + (u128)e.d_qk) * 2;
    const u128 need_kv = ((u128)(e.s_kv - 1) * (u128)kvs + (u128)e.d_qk) * 2;
    const u128 need_idx = (sq1 * (u128)is + (u128)e.topk) * 4;
    const u128 need_out = (sq1 * (u128)os + h1 * (u128)oh + 512) * 2;
    const u128 rows = (u128)e.s_q * (u128)e.h_q;
    const struct { const char *name; const void *p; u128 need; ScalarId id; } buf[] = {
        {"q", e.q, need_q, SCALAR_Q}, {"kv", e.kv, need_kv, SCALAR_KV}, {"indices", e.indices, need_idx, SCALAR_INDICES},
        {"out", e.out, need_out, SCALAR_OUT}, {"lse", e.lse, rows * 4, SCALAR_LSE},
        {"max_logits", e.max_logits, rows * 4, SCALAR_MAX_LOGITS}, {"attn_sink", e.attn_sink, (u128)e.h_q * 4, SCALAR_SINK},
        {"topk_length", e.topk_length, (u128)e.s_q * 4, SCALAR_TOPK_LENGTH}};
    /* a buffer reaches the kernel as a pointer parameter (sm90a) or as the base of tensor maps (sm100a: q, kv) */
    int mapped[8] = {0};
    for (int m = 0; m < cap.plan->n_maps; m++) {
        const FakeMap *fm = map_of((uint32_t)cap.maps[m]);
        FUZZ_CHECK(fm != NULL, "map '%s' of an encode neither the fake nor the harness holds", cap.plan->maps[m].name);
        int which = -1;
        for (size_t i = 0; i < sizeof buf / sizeof buf[0]; i++)
            if (buf[i].p && fm->addr == (uint64_t)(uintptr_t)buf[i].p) which = (int)i;
        FUZZ_CHECK(which >= 0, "map '%s' starts at 0x%llx, no buffer's base", cap.plan->maps[m].name,
                   (unsigned long long)fm->addr);
        u128 reach = map_reach(fm, map_elem(fm->dtype));
        FUZZ_CHECK(reach <= buf[which].need, "map '%s' reaches %.6g bytes past its base; %s has %.6g",
                   cap.plan->maps[m].name, (double)reach, buf[which].name, (double)buf[which].need);
        mapped[which] = 1;
    }
    for (size_t i = 0; i < sizeof buf / sizeof buf[0]; i++) {
        FUZZ_CHECK(mapped[i] || (cap.has[buf[i].id] && cap.scalar[buf[i].id] == (uint64_t)(uintptr_t)buf[i].p),
                   "parameter %s", buf[i].name);
        if (buf[i].p)
            FUZZ_CHECK(can_exist(buf[i].p, buf[i].need), "accepted %s at %p needing %.6g bytes", buf[i].name,
                       buf[i].p, (double)buf[i].need);
    }
    /* What the kernel reaches, from its parameters (gen/sm90/mla_sparse.c: 64-bit element offsets
     * tok x stride_s + head x stride_h, heads past h_q never read, kv rows below s_kv). */
    const uint64_t *v = cap.scalar;
    const u128 d = (u128)cap.plan->cfg.qk_depth, tok1 = (u128)v[SCALAR_SEQLEN_Q] - 1, hd1 = (u128)v[SCALAR_HEADS_Q] - 1;
    FUZZ_CHECK(v[SCALAR_SEQLEN_Q] == (uint32_t)e.s_q && v[SCALAR_S_KV] == (uint32_t)e.s_kv &&
                   v[SCALAR_HEADS_Q] == (uint32_t)e.h_q && v[SCALAR_TOPK] == (uint32_t)e.topk && d == (u128)e.d_qk,
               "shape parameters");
    if (cap.has[SCALAR_Q_STRIDE_S])
        FUZZ_CHECK((tok1 * v[SCALAR_Q_STRIDE_S] + hd1 * v[SCALAR_Q_STRIDE_H] + d) * 2 <= need_q, "q rows reach past q");
    if (cap.has[SCALAR_KV_STRIDE])
        FUZZ_CHECK(((u128)v[SCALAR_S_KV] - 1) * v[SCALAR_KV_STRIDE] * 2 + d * 2 <= need_kv, "kv rows reach past kv");
    FUZZ_CHECK((tok1 * v[SCALAR_IDX_STRIDE] + v[SCALAR_TOPK]) * 4 <= need_idx, "index rows reach past indices");
    FUZZ_CHECK((tok1 * v[SCALAR_OUT_STRIDE_S] + hd1 * v[SCALAR_OUT_STRIDE_H] + 512) * 2 <= need_out,
               "out rows reach past out");
    if (e.lse || e.max_logits)
        FUZZ_CHECK(rows <= ((u128)1 << 32), "accepted s_q x h_q = %.6g rows of lse/max_logits: the kernel's 32-bit "
                   "index wraps", (double)rows);
    /* a tile is one cluster: cl CTAs of heads_per_cta heads each (sm100a's CTA pair) */
    const u128 cl = (u128)(cap.plan->cluster[0] > 0 ? cap.plan->cluster[0] : 1), hpc = (u128)cap.plan->heads_per_cta;
    const u128 ctas = (u128)e.s_q * (((u128)e.h_q + hpc * cl - 1) / (hpc * cl) * cl);
    FUZZ_CHECK(ctas <= INT_MAX && cap.grid == (unsigned)ctas, "grid %u for %.6g CTAs", cap.grid, (double)ctas);
    for (size_t i = 0; i < sizeof buf / sizeof buf[0]; i++) check_memory(buf[i].name, buf[i].p, buf[i].need);
    drop_memory();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static int ready;
    if (!ready) {
        fz_fake_open();
        if (getenv("FUZZ_ARGS_STATS")) atexit(print_stats);
        ready = 1;
    }
    Rd r = {data, size};
    if (u8(&r) % 3 == 2) fuzz_mla(&r);
    else fuzz_mha(&r);
    return 0;
}
