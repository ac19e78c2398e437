/* test_launch.c - fa4_mha_fwd end to end against the fake CUDA driver
 * (fake_cuda.c as build/fakecuda/libcuda.so.1; run with
 * LD_LIBRARY_PATH=build/fakecuda, as `make unit` does).
 *
 * Kernels are really generated and compiled (ptxas); the fake loads the
 * cubin, records the tensor-map encodes and the launch, and each case checks
 * them against the plan of the config fa4_mha_config reports, and against
 * the shapes and strides the test itself gave: tensor maps (dtype, dims,
 * byte strides, box, swizzle), block, dynamic smem (attribute and launch),
 * grid and cluster, and the scalar parameters. Device pointers are aligned
 * fake addresses; nothing dereferences them. */
#include <cuda.h>
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fa4.h"
#include "fa4gen.h"
#include "rt_internal.h"
#include "fake_cuda.h"
#include "fnv_collision.h"
#include "testutil.h"

static char cache_dir[] = "/tmp/fa4launch.XXXXXX";
static FakeCuda *fk;
static FakeCudaResetFn fake_reset;
static FakeCudaMapFn fake_map;
static FakeCudaUnmapFn fake_unmap;

/* Device pointers of the cases: 256 MiB apart in one range of device 0 that the fake driver knows (setup),
 * 2^44 bytes from 2^45, far from any host mapping (heap, libraries, stacks). */
#define DEV_BASE 0x200000000000ull
#define DEV_RANGE ((uint64_t)1 << 44)
#define DEV(i) ((void *)(uintptr_t)(DEV_BASE + (uint64_t)(i) * 0x10000000ull))
/* Pointers of the shapes whose products pass 2^40 bytes: 2^55 bytes apart in a 2^57-byte range of device 0
 * (the fake knows addresses, not bytes), so the checks past the driver's are reached. */
#define HUGE_BASE ((uint64_t)1 << 58)
#define HUGE_RANGE ((uint64_t)1 << 57)
#define HUGE(i) ((void *)(uintptr_t)(HUGE_BASE + (uint64_t)(i) * ((uint64_t)1 << 55)))
#define LOG2E 1.4426950408889634

static int setup(void **state)
{
    (void)state;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    FakeCudaStateFn get = lib ? (FakeCudaStateFn)dlsym(lib, "fake_cuda_state") : NULL;
    fake_reset = lib ? (FakeCudaResetFn)dlsym(lib, "fake_cuda_reset") : NULL;
    fake_map = lib ? (FakeCudaMapFn)dlsym(lib, "fake_cuda_map") : NULL;
    fake_unmap = lib ? (FakeCudaUnmapFn)dlsym(lib, "fake_cuda_unmap") : NULL;
    if (!get || !fake_reset || !fake_map || !fake_unmap) {
        fprintf(stderr, "test_launch: libcuda.so.1 is not the fake driver; run with LD_LIBRARY_PATH=build/fakecuda "
                        "(make unit does)\n");
        return -1;
    }
    fk = get();
    if (fake_map(DEV_BASE, DEV_RANGE, CU_MEMORYTYPE_DEVICE, 0, 0) ||
        fake_map(HUGE_BASE, HUGE_RANGE, CU_MEMORYTYPE_DEVICE, 0, 0))
        return -1;
    return temp_cache_dir(cache_dir);
}

static int teardown(void **state)
{
    (void)state;
    return remove_tree(cache_dir);
}

/* A fresh context on a fake device of compute capability cc (e.g. 100), with
 * the records cleared. dir: its own cache directory, or NULL for the shared one. */
static fa4_ctx *ctx_on(int cc, fa4_target t, const char *dir)
{
    char v[16];
    snprintf(v, sizeof v, "%d", cc);
    setenv("FAKE_CUDA_CC", v, 1);
    fake_reset();
    fa4_options o = FA4_OPTIONS_INIT;
    o.target = t;
    o.cache_dir = dir;
    fa4_ctx *ctx = NULL;
    assert_int_equal(fa4_create(&ctx, &o), FA4_OK);
    return ctx;
}

static void must(fa4_ctx *ctx, fa4_status s, const char *what)
{
    if (s != FA4_OK)
        fail_msg("%s: %s: %s (fake driver: %d refused, last: %s)", what, fa4_status_string(s), fa4_last_error(ctx),
                 fk->n_refused, fk->refused);
}

static void nothing_recorded(const char *why)
{
    if (fk->n_encodes || fk->n_launches)
        fail_msg("%s: %d encodes and %d launches recorded; expected none", why, fk->n_encodes, fk->n_launches);
}

/* ---------------------------------------------------------------- expectations */

/* A tensor as the test laid it out: element strides (batch, seq, head). */
typedef struct {
    const void *ptr;
    int batch, seqlen, heads, depth, elem;
    int64_t stride[3];
} Tensor;

static Tensor packed(const void *ptr, int batch, int seqlen, int heads, int depth, int elem)
{
    Tensor t = {ptr, batch, seqlen, heads, depth, elem,
                {(int64_t)seqlen * heads * depth, (int64_t)heads * depth, depth}};
    return t;
}

/* The plan of the config the runtime picks for a. */
static Plan *plan_of(fa4_ctx *ctx, const fa4_mha_args *a)
{
    char canon[320], err[512];
    must(ctx, fa4_mha_config(ctx, a, canon, sizeof canon), "fa4_mha_config");
    Config c;
    Plan *p = malloc(sizeof *p);
    assert_non_null(p);
    if (config_parse_canonical(canon, &c, err, sizeof err) || plan_make(&c, p, err, sizeof err))
        fail_msg("plan of '%s': %s", canon, err);
    return p;
}

/* The grid rule, restated: clusters of cluster[0] CTAs, each covering
 * rows_per_cta x cluster[0] query rows of heads_per_cta heads. */
static unsigned grid_rule(const Plan *p, const fa4_mha_args *a)
{
    unsigned cx = (unsigned)p->cluster[0], rows = (unsigned)p->rows_per_cta * cx;
    unsigned g = ((unsigned)a->seqlen_q + rows - 1) / rows * (unsigned)(a->heads_q / p->heads_per_cta) *
                 (unsigned)a->batch * cx;
    unsigned cap = (unsigned)fk->sm_count / cx * cx;
    return p->persistent && g > cap ? cap : g;
}

static CUtensorMapDataType cu_dtype(DType d)
{
    return d == DT_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
           : d == DT_FP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8;
}

static CUtensorMapSwizzle cu_swizzle(int bytes)
{
    return bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
           : bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B : CU_TENSOR_MAP_SWIZZLE_NONE;
}

/* Map i of the launch is plan map i over tensor t. */
static void expect_map(const FakeMap *m, const MapSpec *ms, const Tensor *t)
{
    if (m->addr != (uint64_t)(uintptr_t)t->ptr) fail_msg("map %s: address 0x%llx, tensor at %p", ms->name,
                                                         (unsigned long long)m->addr, t->ptr);
    assert_int_equal(m->rank, 4);
    assert_int_equal(m->dtype, cu_dtype(ms->dtype));
    assert_int_equal(dtype_bytes[ms->dtype], t->elem);
    const uint64_t dims[4] = {(uint64_t)t->depth, (uint64_t)t->seqlen, (uint64_t)t->heads, (uint64_t)t->batch};
    const uint64_t bytes[3] = {(uint64_t)(t->stride[1] * t->elem), (uint64_t)(t->stride[2] * t->elem),
                               (uint64_t)(t->stride[0] * t->elem)};
    for (int d = 0; d < 4; d++) {
        if (m->dims[d] != dims[d]) fail_msg("map %s: dim %d is %llu, tensor has %llu", ms->name, d,
                                            (unsigned long long)m->dims[d], (unsigned long long)dims[d]);
        assert_int_equal(m->box[d], ms->box[d]);
        assert_int_equal(m->elem[d], 1);
    }
    assert_int_equal(ms->depth, t->depth);
    for (int d = 0; d < 3; d++)
        if (m->strides[d] != bytes[d]) fail_msg("map %s: byte stride %d is %llu, expected %llu", ms->name, d,
                                                (unsigned long long)m->strides[d], (unsigned long long)bytes[d]);
    assert_int_equal(m->swizzle, cu_swizzle(ms->swizzle));
    assert_int_equal(m->interleave, CU_TENSOR_MAP_INTERLEAVE_NONE);
}

/* The one launch recorded is the plan's kernel over tensors t (indexed by
 * TensorId), with the scalars of a and the given scales. */
static const FakeLaunch *expect_launch(const Plan *p, const Tensor t[TENSOR_COUNT], const fa4_mha_args *a,
                                       double scale_log2, double o_scale)
{
    if (fk->n_refused) fail_msg("fake driver refused %d call(s); last: %s", fk->n_refused, fk->refused);
    assert_int_equal(fk->n_launches, 1);
    const FakeLaunch *l = &fk->launches[0];
    assert_string_equal(l->kernel, p->symbol);
    unsigned cx = (unsigned)p->cluster[0];
    /* clusters and programmatic dependents (every forward kernel) go through cuLaunchKernelEx */
    assert_int_equal(l->ex, cx > 1 || p->pdl_dependent);
    assert_int_equal(l->pdl, p->pdl_dependent);
    assert_int_equal(l->cluster[0], cx);
    assert_int_equal(l->cluster[1], 1);
    assert_int_equal(l->cluster[2], 1);
    assert_int_equal(l->grid[0], grid_rule(p, a));
    assert_int_equal(l->grid[0] % cx, 0);
    assert_int_equal(l->grid[1], 1);
    assert_int_equal(l->grid[2], 1);
    assert_int_equal(l->block[0], (unsigned)p->threads);
    assert_int_equal(l->block[1], 1);
    assert_int_equal(l->smem, p->smem_launch);
    assert_int_equal(l->smem_attr, (int)p->smem_launch); /* set when the kernel was loaded */
    assert_int_equal(l->n_maps, p->n_maps);
    /* the maps encoded for this launch, in plan order; or, for a call whose signature and tensor bases an
     * earlier launch had, all of them reused from it (the call memo) */
    int fresh = fk->n_encodes == p->n_maps;
    if (!fresh) assert_int_equal(fk->n_encodes, 0);
    for (int i = 0; i < p->n_maps; i++) {
        if (fresh) assert_int_equal(l->map_ids[i], i);
        else assert_true(l->map_ids[i] < 0);
        expect_map(&l->maps[i], &p->maps[i], &t[p->maps[i].tensor]);
    }
    assert_int_equal(l->lse, (uint64_t)(uintptr_t)a->lse);
    assert_int_equal(l->seqlen_q, a->seqlen_q);
    assert_int_equal(l->seqlen_k, a->seqlen_k);
    assert_int_equal(l->heads_q, a->heads_q);
    assert_int_equal(l->batch, a->batch);
    if (fabs(l->scale_log2 - scale_log2) > 1e-6 * fabs(scale_log2))
        fail_msg("scale_log2 %.9g, expected %.9g", (double)l->scale_log2, scale_log2);
    if (fabs(l->o_scale - o_scale) > 1e-7 * fabs(o_scale))
        fail_msg("o_scale %.9g, expected %.9g", (double)l->o_scale, o_scale);
    return l;
}

/* ---------------------------------------------------------------- cases */

static fa4_mha_args mha(fa4_dtype dt, int batch, int sq, int sk, int hq, int hkv, int qk, int ov, fa4_mask mask)
{
    fa4_mha_args a = FA4_MHA_ARGS_INIT;
    a.dtype = dt;
    a.q = DEV(1), a.k = DEV(2), a.v = DEV(3), a.o = DEV(4), a.lse = DEV(5);
    a.batch = batch, a.seqlen_q = sq, a.seqlen_k = sk, a.heads_q = hq, a.heads_kv = hkv;
    a.qk_depth = qk, a.ov_depth = ov;
    a.mask = mask;
    return a;
}

/* Tensors of a packed call (o in the kernel's output dtype). */
static void packed_tensors(const fa4_mha_args *a, int elem, int o_elem, Tensor t[TENSOR_COUNT])
{
    memset(t, 0, sizeof(Tensor) * TENSOR_COUNT);
    t[TENSOR_Q] = packed(a->q, a->batch, a->seqlen_q, a->heads_q, a->qk_depth, elem);
    t[TENSOR_K] = packed(a->k, a->batch, a->seqlen_k, a->heads_kv, a->qk_depth, elem);
    t[TENSOR_V] = packed(a->v, a->batch, a->seqlen_k, a->heads_kv, a->ov_depth, elem);
    t[TENSOR_O] = packed(a->o, a->batch, a->seqlen_q, a->heads_q, a->ov_depth, o_elem);
}

static int map_index(const Plan *p, const char *name)
{
    for (int i = 0; i < p->n_maps; i++)
        if (!strcmp(p->maps[i].name, name)) return i;
    return -1;
}

/* sm100a d128 bf16 causal: the four maps, 512 threads, the plan's smem, one CTA per tile. */
static void test_sm100_d128(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(100, FA4_TARGET_SM100A, NULL);
    fa4_mha_args a = mha(FA4_BF16, 2, 1000, 1000, 16, 16, 128, 128, FA4_MASK_CAUSAL);
    Plan *p = plan_of(ctx, &a);
    assert_int_equal(p->cfg.target, TARGET_SM100A);
    assert_int_equal(p->n_maps, 4);
    assert_int_equal(p->threads, 512);
    assert_int_equal(p->cluster[0], 1);
    Tensor t[TENSOR_COUNT];
    packed_tensors(&a, 2, 2, t);
    int loaded = fk->modules_loaded;
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd");
    assert_int_equal(fk->modules_loaded, loaded + 1);
    assert_true(fk->proc_found > 0); /* entry points came through cuGetProcAddress */
    expect_launch(p, t, &a, LOG2E / sqrt(128.0), 1.0);
    const char *names[4] = {"q", "k", "v", "o"};
    for (int i = 0; i < 4; i++) assert_string_equal(p->maps[i].name, names[i]);

    /* Again: the memory cache, no second load; the same launch, its maps reused (the call memo). */
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (cached)");
    assert_int_equal(fk->modules_loaded, loaded + 1);
    assert_int_equal(fk->n_encodes, 0);
    expect_launch(p, t, &a, LOG2E / sqrt(128.0), 1.0);

    /* A caller built before k_rope and the descales: junk past its size is ignored. */
    struct { fa4_mha_args a; char junk[64]; } old;
    memset(&old, 0x5a, sizeof old);
    memcpy(&old.a, &a, offsetof(fa4_mha_args, k_rope));
    old.a.size = offsetof(fa4_mha_args, k_rope);
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &old.a, NULL), "fa4_mha_fwd (old struct)");
    expect_launch(p, t, &a, LOG2E / sqrt(128.0), 1.0);
    fa4_destroy(ctx);

    /* AUTO on a 10.0 device picks sm100a: the same kernel (a disk-cache hit). */
    ctx = ctx_on(100, FA4_TARGET_AUTO, NULL);
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (AUTO)");
    expect_launch(p, t, &a, LOG2E / sqrt(128.0), 1.0);
    free(p);
    fa4_destroy(ctx);
    assert_int_equal(fk->modules_live, 0);
}

/* B300 (compute capability 10.3): AUTO picks sm103a, the sm100a kernel for .target sm_103a (its own symbol,
 * so its own cache entry); an explicit sm100a context on it, or an sm103a one on a 10.0 device, is refused
 * before anything is compiled ('a' targets load only on their own chip). */
static void test_sm103_target(void **state)
{
    (void)state;
    fa4_mha_args a = mha(FA4_BF16, 2, 1000, 1000, 16, 16, 128, 128, FA4_MASK_CAUSAL);
    fa4_ctx *ctx = ctx_on(103, FA4_TARGET_AUTO, NULL);
    Plan *p = plan_of(ctx, &a);
    assert_int_equal(p->cfg.target, TARGET_SM103A);
    assert_string_equal(p->target->ptx_target, "sm_103a");
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (AUTO on 10.3)");
    assert_int_equal(fk->n_launches, 1);
    if (strncmp(fk->launches[0].kernel, "fa4_mha_sm103a_", 15)) fail_msg("launched %s", fk->launches[0].kernel);
    free(p);
    fa4_destroy(ctx);
    ctx = ctx_on(103, FA4_TARGET_SM100A, NULL);
    assert_int_equal(fa4_mha_fwd(ctx, &a, NULL), FA4_ERR_UNSUPPORTED);
    if (!strstr(fa4_last_error(ctx), "compute capability 10.0") || !strstr(fa4_last_error(ctx), "is 10.3"))
        fail_msg("%s", fa4_last_error(ctx));
    nothing_recorded("sm100a on a 10.3 device");
    fa4_destroy(ctx);
    ctx = ctx_on(100, FA4_TARGET_SM103A, NULL);
    assert_int_equal(fa4_mha_fwd(ctx, &a, NULL), FA4_ERR_UNSUPPORTED);
    if (!strstr(fa4_last_error(ctx), "sm103a kernels (sm_103a)")) fail_msg("%s", fa4_last_error(ctx));
    nothing_recorded("sm103a on a 10.0 device");
    fa4_destroy(ctx);
}

/* GQA packed: the group's 8 query heads share a tile, so the grid counts
 * heads_q / 8 head groups; Q and O boxes span the group's heads. */
static void test_sm100_gqa_packed(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(100, FA4_TARGET_SM100A, NULL);
    fa4_mha_args a = mha(FA4_BF16, 2, 1000, 1000, 32, 4, 128, 128, FA4_MASK_NONE);
    a.softmax_scale = 0.1f;
    Plan *p = plan_of(ctx, &a);
    assert_int_equal(p->heads_per_cta, 8);
    assert_int_equal(p->maps[map_index(p, "q")].box[2], 8);
    Tensor t[TENSOR_COUNT];
    packed_tensors(&a, 2, 2, t);
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd");
    const FakeLaunch *l = expect_launch(p, t, &a, 0.1 * LOG2E, 1.0);
    unsigned rows = (unsigned)p->rows_per_cta;
    assert_int_equal(l->grid[0], (1000 + rows - 1) / rows * (32 / 8) * 2);
    free(p);
    fa4_destroy(ctx);
}

/* MLA prefill (qk 192 / ov 128): with k_rope the plan reads K from two maps,
 * k (128 nope columns) and k_rope (64 columns, its own strides); without it
 * K is one 192-column tensor. k_rope with other depths is refused before
 * anything is encoded or launched, and args->config cannot contradict k_rope. */
static void test_sm100_mla_rope(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(100, FA4_TARGET_SM100A, NULL);
    fa4_mha_args a = mha(FA4_BF16, 2, 700, 900, 8, 8, 192, 128, FA4_MASK_CAUSAL);
    a.k_rope = DEV(6);
    /* k_rope inside a buffer of 96 columns per head, 8 heads */
    a.k_rope_stride[0] = 900LL * 8 * 96, a.k_rope_stride[1] = 8 * 96, a.k_rope_stride[2] = 96;
    Plan *p = plan_of(ctx, &a);
    assert_int_equal(p->cfg.rope_split, 1);
    assert_int_equal(p->n_maps, 5);
    int ik = map_index(p, "k"), ir = map_index(p, "k_rope");
    assert_true(ik >= 0 && ir >= 0);
    assert_int_equal(p->maps[ik].depth, 128);
    assert_int_equal(p->maps[ir].depth, 64);
    assert_int_equal(p->maps[ir].tensor, TENSOR_K_ROPE);
    Tensor t[TENSOR_COUNT];
    packed_tensors(&a, 2, 2, t);
    t[TENSOR_K] = packed(a.k, 2, 900, 8, 128, 2);
    t[TENSOR_K_ROPE] = (Tensor){a.k_rope, 2, 900, 8, 64, 2, {900LL * 8 * 96, 8 * 96, 96}};
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (k_rope)");
    const FakeLaunch *l = expect_launch(p, t, &a, LOG2E / sqrt(192.0), 1.0);
    assert_int_equal(l->maps[ir].strides[0], 8 * 96 * 2);
    assert_int_equal(l->maps[ir].strides[1], 96 * 2);
    free(p);

    /* The same shape without k_rope: rope_split=0, K is [.., 192]. */
    fa4_mha_args b = a;
    b.k_rope = NULL;
    memset(b.k_rope_stride, 0, sizeof b.k_rope_stride);
    p = plan_of(ctx, &b);
    assert_int_equal(p->cfg.rope_split, 0);
    assert_int_equal(p->n_maps, 4);
    packed_tensors(&b, 2, 2, t);
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &b, NULL), "fa4_mha_fwd (no k_rope)");
    expect_launch(p, t, &b, LOG2E / sqrt(192.0), 1.0);
    free(p);

    /* args->config must agree with k_rope. */
    const char *clash[2] = {"rope_split=0", "rope_split=1"};
    const fa4_mha_args *who[2] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        fa4_mha_args c = *who[i];
        c.config = clash[i];
        fake_reset();
        assert_int_equal(fa4_mha_fwd(ctx, &c, NULL), FA4_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(fa4_last_error(ctx), "rope_split"));
        nothing_recorded(clash[i]);
    }

    /* k_rope with qk 128: refused, naming k_rope; nothing compiled, encoded or launched. */
    fa4_mha_args c = mha(FA4_BF16, 2, 700, 900, 8, 8, 128, 128, FA4_MASK_CAUSAL);
    c.k_rope = DEV(6);
    fake_reset();
    int loaded = fk->modules_loaded;
    assert_int_equal(fa4_mha_fwd(ctx, &c, NULL), FA4_ERR_UNSUPPORTED);
    assert_non_null(strstr(fa4_last_error(ctx), "k_rope"));
    assert_non_null(strstr(fa4_last_error(ctx), "192"));
    nothing_recorded("k_rope with qk 128");
    assert_int_equal(fk->modules_loaded, loaded);
    char buf[320];
    assert_int_equal(fa4_mha_config(ctx, &c, buf, sizeof buf), FA4_ERR_UNSUPPORTED);
    assert_non_null(strstr(fa4_last_error(ctx), "k_rope"));
    fa4_destroy(ctx);
}

/* e4m3: q, k, v maps move bytes; O is bf16, so its element strides count
 * 2-byte elements (a head stride of 136 is 272 B: aligned for bf16, not for
 * bytes); the descales fold into scale_log2 and o_scale. */
static void test_sm100_e4m3_descale(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(100, FA4_TARGET_SM100A, NULL);
    fa4_mha_args a = mha(FA4_E4M3, 2, 1000, 1000, 16, 16, 128, 128, FA4_MASK_NONE);
    a.q_descale = 0.5f, a.k_descale = 0.25f, a.v_descale = 2.0f;
    a.o_stride[0] = 1000LL * 16 * 136, a.o_stride[1] = 16 * 136, a.o_stride[2] = 136;
    Plan *p = plan_of(ctx, &a);
    int io = map_index(p, "o");
    assert_int_equal(p->maps[io].dtype, DT_BF16);
    assert_int_equal(p->maps[map_index(p, "q")].dtype, DT_E4M3);
    Tensor t[TENSOR_COUNT];
    packed_tensors(&a, 1, 2, t);
    t[TENSOR_O] = (Tensor){a.o, 2, 1000, 16, 128, 2, {1000LL * 16 * 136, 16 * 136, 136}};
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (e4m3)");
    const FakeLaunch *l = expect_launch(p, t, &a, LOG2E / sqrt(128.0) * 0.5 * 0.25, 2.0);
    assert_int_equal(l->maps[io].dtype, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
    assert_int_equal(l->maps[io].strides[1], 272);
    assert_int_equal(l->maps[map_index(p, "q")].dtype, CU_TENSOR_MAP_DATA_TYPE_UINT8);
    free(p);
    fa4_destroy(ctx);
}

/* The CTA pair (cta=2): a cluster of 2 along the query rows, launched with
 * cuLaunchKernelEx and an even grid. */
static void test_sm100_cluster(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(100, FA4_TARGET_SM100A, NULL);
    fa4_mha_args a = mha(FA4_BF16, 2, 1000, 1000, 16, 16, 128, 128, FA4_MASK_CAUSAL);
    a.config = "cta=2";
    Plan *p = plan_of(ctx, &a);
    assert_int_equal(p->cluster[0], 2);
    Tensor t[TENSOR_COUNT];
    packed_tensors(&a, 2, 2, t);
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (cta=2)");
    const FakeLaunch *l = expect_launch(p, t, &a, LOG2E / sqrt(128.0), 1.0);
    assert_int_equal(l->ex, 1);
    assert_int_equal(l->cluster[0], 2);
    assert_int_equal(l->grid[0] % 2, 0);
    unsigned rows = (unsigned)p->rows_per_cta * 2;
    assert_int_equal(l->grid[0], (1000 + rows - 1) / rows * 16 * 2 * 2);
    free(p);
    fa4_destroy(ctx);
}

/* fa4_get_kernel's handle is usable: fa4_kernel_get_info gives the loaded function and the
 * launch shape the plan has, and refuses an uninitialised info struct. */
static void test_kernel_info(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(100, FA4_TARGET_SM100A, NULL);
    fa4_kernel *k = NULL;
    must(ctx, fa4_get_kernel(ctx, "mha target=sm100a dtype=bf16 qk=128 ov=128 cta=2 mask=causal", &k, NULL),
         "fa4_get_kernel");
    fa4_kernel_info info = FA4_KERNEL_INFO_INIT;
    assert_int_equal(fa4_kernel_get_info(k, &info), FA4_OK);
    assert_non_null(info.function);
    assert_true(strstr(info.symbol, "fa4_mha_sm100a_") == info.symbol);
    assert_true(strstr(info.config, "cta=2") != NULL);
    assert_int_equal(info.threads, 512);
    assert_int_equal(info.cluster[0], 2);
    assert_int_equal(info.n_params, 4 + 7); /* q k v o maps, then the seven scalars */
    assert_true(info.smem_bytes > 0);
    fa4_kernel_info bad = {0};
    assert_int_equal(fa4_kernel_get_info(k, &bad), FA4_ERR_INVALID_ARGUMENT);
    fa4_destroy(ctx);
}

/* sm90a on a 9.0 device (AUTO): the same ABI; causal with seqlen_k <= 2048 runs
 * persistent, so the grid is min(tiles, SMs). Entry points come through the
 * dlsym fallback here (the fake's cuGetProcAddress finds nothing). A k_rope
 * is refused on sm90a, naming it. */
static void test_sm90_d128(void **state)
{
    (void)state;
    setenv("FAKE_CUDA_NO_PROC", "1", 1);
    fa4_ctx *ctx = ctx_on(90, FA4_TARGET_AUTO, NULL);
    fa4_mha_args a = mha(FA4_BF16, 2, 1000, 1000, 16, 16, 128, 128, FA4_MASK_CAUSAL);
    Plan *p = plan_of(ctx, &a);
    unsetenv("FAKE_CUDA_NO_PROC");
    assert_true(fk->proc_missed > 0);
    assert_int_equal(fk->proc_found, 0);
    assert_int_equal(p->cfg.target, TARGET_SM90A);
    assert_true(p->persistent);
    Tensor t[TENSOR_COUNT];
    packed_tensors(&a, 2, 2, t);
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (sm90a)");
    const FakeLaunch *l = expect_launch(p, t, &a, LOG2E / sqrt(128.0), 1.0);
    unsigned tiles = (1000 + (unsigned)p->rows_per_cta - 1) / (unsigned)p->rows_per_cta * 16 * 2;
    assert_int_equal(l->grid[0], tiles < 148 ? tiles : 148);
    assert_int_equal(l->block[0], (unsigned)p->threads);

    fa4_mha_args r = mha(FA4_BF16, 2, 1000, 1000, 16, 16, 192, 128, FA4_MASK_CAUSAL);
    r.k_rope = DEV(6);
    fake_reset();
    assert_int_equal(fa4_mha_fwd(ctx, &r, NULL), FA4_ERR_UNSUPPORTED);
    if (!strstr(fa4_last_error(ctx), "k_rope")) fail_msg("message: %s", fa4_last_error(ctx));
    nothing_recorded("k_rope on sm90a");
    free(p);
    fa4_destroy(ctx);
}


/* config dynamic (runtime/sched.c): a full d128 call of many tiles takes the dynamic kernel, its launch its stream's
 * counter from one pool, made (and zeroed on a stream of its own) by the first eager call; another stream has its own
 * counter, a capturing stream a fresh one per call; a call under capture before any pool exists runs the static twin
 * (no allocation inside a capture) and a config that asks dynamic=1 is refused then; without stream ids there are
 * no counters; the slots run out into the static walk; fa4_destroy frees the pool. */
static void test_dynamic_tiles(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(90, FA4_TARGET_SM90A, NULL);
    fa4_mha_args a = mha(FA4_BF16, 8, 1024, 1024, 16, 16, 128, 128, FA4_MASK_NONE); /* 1024 tiles, 148 SMs */
    Plan *p = plan_of(ctx, &a);
    assert_int_equal(p->cfg.dynamic, 1);
    Config sc = p->cfg;
    sc.dynamic = 0;
    Plan *stat = malloc(sizeof *stat);
    char err[512];
    assert_non_null(stat);
    if (plan_make(&sc, stat, err, sizeof err)) fail_msg("the static twin: %s", err);
    CUstream s1 = (CUstream)(uintptr_t)0x1000, s2 = (CUstream)(uintptr_t)0x2000; /* handles the fake only names */
    int ranges = fk->n_ranges;

    fake_reset();
    fk->capturing = 1;
    must(ctx, fa4_mha_fwd(ctx, &a, s1), "fa4_mha_fwd under capture before a pool");
    assert_int_equal(fk->n_launches, 1);
    assert_string_equal(fk->launches[0].kernel, stat->symbol);
    assert_int_equal(fk->n_ranges, ranges);
    assert_int_equal(fk->n_memsets, 0);
    fa4_mha_args asked = a;
    asked.config = "dynamic=1";
    fake_reset();
    fk->capturing = 1;
    assert_int_equal(fa4_mha_fwd(ctx, &asked, s1), FA4_ERR_INVALID_ARGUMENT);
    if (!strstr(fa4_last_error(ctx), "tile counter")) fail_msg("message: %s", fa4_last_error(ctx));
    nothing_recorded("dynamic=1 with no counter");

    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (eager)");
    assert_int_equal(fk->n_launches, 1);
    assert_string_equal(fk->launches[0].kernel, p->symbol);
    assert_int_equal(fk->n_ranges, ranges + 1);
    assert_int_equal(fk->n_memsets, 1);
    assert_int_equal(fk->memset_bytes, (uint64_t)RT_SCHED_SLOTS * RT_SCHED_STRIDE);
    assert_int_equal(fk->memset_value, 0);
    assert_int_equal(fk->streams_live, 0);
    uint64_t pool = fk->memset_ptr, end = pool + fk->memset_bytes;

    int pushed;
    must(ctx, rt_ctx_enter(ctx, &pushed), "rt_ctx_enter");
    uint64_t c0 = rt_tile_counter(ctx, NULL), c1 = rt_tile_counter(ctx, s1), c2 = rt_tile_counter(ctx, s2);
    assert_true(c0 >= pool && c0 < end && (c0 - pool) % RT_SCHED_STRIDE == 0);
    assert_int_equal(rt_tile_counter(ctx, NULL), c0);
    assert_int_equal(rt_tile_counter(ctx, s1), c1);
    assert_true(c1 && c2 && c1 != c0 && c2 != c0 && c2 != c1);
    fk->capturing = 1; /* the fake's NULL stream never captures */
    uint64_t k1 = rt_tile_counter(ctx, s1), k2 = rt_tile_counter(ctx, s1);
    assert_true(k1 >= pool && k2 < end && k1 != k2 && k1 != c0 && k1 != c1 && k1 != c2 && k2 != c1 && k2 != c2);
    assert_int_equal(rt_tile_counter(ctx, NULL), c0);
    fk->capturing = 0, fk->no_stream_id = 1;
    assert_int_equal(rt_tile_counter(ctx, (CUstream)(uintptr_t)0x3000), 0);
    fk->no_stream_id = 0, fk->capturing = 1;
    int fresh = 0;
    while (rt_tile_counter(ctx, s1) && fresh <= RT_SCHED_SLOTS) fresh++;
    assert_true(fresh < RT_SCHED_SLOTS);
    assert_int_equal(rt_tile_counter(ctx, s2), 0);        /* every slot taken: a capture gets none */
    fk->capturing = 0;
    assert_int_equal(rt_tile_counter(ctx, s2), c2);       /* a stream keeps the one it has */
    assert_int_equal(rt_tile_counter(ctx, (CUstream)(uintptr_t)0x4000), 0); /* a new stream gets none */
    rt_ctx_leave(ctx, pushed);
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &a, (CUstream)(uintptr_t)0x4000), "fa4_mha_fwd with the slots gone");
    assert_string_equal(fk->launches[0].kernel, stat->symbol);
    fa4_destroy(ctx);
    assert_int_equal(fk->n_ranges, ranges);
    free(p), free(stat);
}

/* Split-KV (issue 15): the refusals of num_splits and the workspace (nothing launched), the
 * workspace size, the split kernel then the combine kernel on the same stream, and the runtime's
 * pick for num_splits 0 (none without a workspace). */
static void refused(fa4_ctx *ctx, const fa4_mha_args *a, const char *word, const char *why)
{
    fake_reset();
    assert_int_equal(fa4_mha_fwd(ctx, a, NULL), FA4_ERR_INVALID_ARGUMENT);
    if (!strstr(fa4_last_error(ctx), word)) fail_msg("%s: message does not name %s: %s", why, word, fa4_last_error(ctx));
    nothing_recorded(why);
}

static void test_split_kv(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(90, FA4_TARGET_SM90A, NULL);
    fa4_mha_args a = mha(FA4_BF16, 2, 1, 4096, 64, 8, 128, 128, FA4_MASK_NONE);
    uint64_t rows = 2 * 64 * 1;
    a.num_splits = -1;
    refused(ctx, &a, "num_splits", "num_splits -1");
    a.num_splits = FA4_MAX_SPLITS + 1;
    refused(ctx, &a, "num_splits", "num_splits past the maximum");
    a.num_splits = 4;
    refused(ctx, &a, "workspace", "no workspace");
    a.workspace = DEV(7);
    a.workspace_size = 4 * rows * 129 * 4 - 1;
    refused(ctx, &a, "workspace_size", "a workspace one byte short");
    a.workspace = (char *)DEV(7) + 8;
    a.workspace_size = 1 << 20;
    refused(ctx, &a, "workspace", "a misaligned workspace");
    a.workspace = DEV(7);
    float sink[64] = {0};
    a.sink = sink;
    refused(ctx, &a, "sink", "splits with a sink");
    a.sink = NULL;

    int n = 0;
    size_t bytes = 0;
    must(ctx, fa4_mha_split_count(ctx, &a, &n, &bytes), "fa4_mha_split_count");
    assert_int_equal(n, 4);
    assert_int_equal(bytes, 4 * rows * 129 * 4);
    a.workspace_size = bytes;
    Plan *p = plan_of(ctx, &a);
    assert_int_equal(p->cfg.split, 1);
    assert_int_equal(p->heads_per_cta, 8); /* decode: the group packed into the tile */
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (4 splits)");
    if (fk->n_refused) fail_msg("fake driver refused %d call(s); last: %s", fk->n_refused, fk->refused);
    assert_int_equal(fk->n_launches, 2);
    assert_string_equal(fk->launches[0].kernel, p->symbol);
    unsigned tiles = 1 * (64 / 8) * 2 * 4;
    assert_int_equal(fk->launches[0].grid[0], tiles < (unsigned)fk->sm_count ? tiles : (unsigned)fk->sm_count);
    assert_true(strstr(fk->launches[1].kernel, "fa4_combine_sm90a_") == fk->launches[1].kernel);
    assert_int_equal(fk->launches[1].grid[0], (unsigned)((rows + 3) / 4));
    assert_int_equal(fk->launches[1].block[0], 128);
    assert_ptr_equal(fk->launches[1].stream, fk->launches[0].stream);
    free(p);

    /* num_splits 0: without a workspace the unsplit kernel; with one, a pick and two launches */
    a.num_splits = 0;
    a.workspace = NULL, a.workspace_size = 0;
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (auto, no workspace)");
    assert_int_equal(fk->n_launches, 1);
    must(ctx, fa4_mha_split_count(ctx, &a, &n, &bytes), "fa4_mha_split_count (auto)");
    assert_true(n > 1 && n <= FA4_MAX_SPLITS);
    assert_int_equal(bytes, (uint64_t)n * rows * 129 * 4);
    a.workspace = DEV(7), a.workspace_size = bytes;
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (auto)");
    assert_int_equal(fk->n_launches, 2);
    fa4_destroy(ctx);
}

/* The split choice (runtime/split.c), a pure function. */
static void test_split_choice(void **state)
{
    (void)state;
    assert_int_equal(rt_split_choice(0, 132, 100), 1);
    assert_int_equal(rt_split_choice(10, 0, 100), 1);
    assert_int_equal(rt_split_choice(10, 132, 0), 1);
    assert_int_equal(rt_split_choice(132, 132, 1000), 1); /* a full wave */
    assert_int_equal(rt_split_choice(500, 132, 1000), 1);
    assert_int_equal(rt_split_choice(64, 132, 1000), 2);   /* 128 of 132 SMs */
    assert_int_equal(rt_split_choice(64, 132, 3), 1);      /* too few kv blocks to share */
    assert_int_equal(rt_split_choice(8, 132, 1000), 16);   /* batch 1, 8 kv heads: 128 of 132 SMs */
    assert_true(rt_split_choice(1, 132, 100000) <= FA4_MAX_SPLITS);
    /* cluster split (no workspace, sm90a): at most half the SMs, at most 8 CTAs a cluster */
    assert_int_equal(rt_cluster_split_choice(16, 8, 132), 8);  /* batch 1, 8 kv heads: 64 CTAs */
    assert_int_equal(rt_cluster_split_choice(4, 32, 132), 2);  /* batch 4: clusters of 4 would not all fit */
    assert_int_equal(rt_cluster_split_choice(3, 8, 132), 3);   /* the pick itself when it is smaller */
    assert_int_equal(rt_cluster_split_choice(1, 8, 132), 0);   /* nothing to split */
    assert_int_equal(rt_cluster_split_choice(16, 40, 132), 0); /* 2 CTAs per tile would pass half the SMs */
    assert_int_equal(rt_cluster_split_choice(16, 0, 132), 0);
    assert_int_equal(rt_cluster_split_choice(16, 8, 0), 0);
    assert_int_equal(rt_cluster_split_choice(128, 1, 132), FA4_MAX_CLUSTER_SPLIT);
    assert_true(rt_split_choice(1, 132, 100000) >= 100); /* most of the SMs */
    assert_true(rt_split_choice(1, 132, 20) <= 10);        /* at least 2 kv blocks a split */
    assert_int_equal(rt_split_workspace_bytes(0, 10, 128), 0);
    assert_int_equal(rt_split_workspace_bytes(3, 10, 128), 3 * 10 * 129 * 4);
}

/* varlen and paged KV (issue 15) on the fake sm_90 device: the grid counts max_seqlen_q's m-blocks;
 * q/o maps see one batch of packed rows; paged k/v maps run over the page pool (depth, page, heads_kv,
 * num_pages) with a box of min(page, bn) rows; p_seqlen_q is max_seqlen_q and p_seqlen_k the packed k
 * rows (varlen) or max_pages x page (paged). */
static void test_sm90_varlen_paged(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(90, FA4_TARGET_AUTO, NULL);
    fa4_mha_args a = mha(FA4_BF16, 3, 1000, 1500, 8, 2, 128, 128, FA4_MASK_CAUSAL);
    a.cu_seqlens_q = DEV(6), a.cu_seqlens_k = DEV(7), a.max_seqlen_q = 300;
    Plan *p = plan_of(ctx, &a);
    assert_int_equal(p->cfg.varlen, 1);
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (varlen)");
    assert_int_equal(fk->n_launches, 1);
    const FakeLaunch *l = &fk->launches[0];
    unsigned tiles = (300 + (unsigned)p->rows_per_cta - 1) / (unsigned)p->rows_per_cta * 8 * 3;
    assert_int_equal(l->grid[0], p->persistent && tiles > 148 ? 148 : tiles); /* FAKE_CUDA_SMS 148 */
    assert_int_equal(l->seqlen_q, 300);
    assert_int_equal(l->seqlen_k, 1500);
    assert_int_equal(l->batch, 3);
    assert_int_equal(l->n_maps, 4);
    assert_int_equal(l->maps[0].dims[1], 1000); /* q: packed rows, one batch */
    assert_int_equal(l->maps[0].dims[3], 1);
    assert_int_equal(l->maps[1].dims[1], 1500);
    free(p);

    for (int page = 16; page <= 256; page *= 4) {
        fa4_mha_args b = mha(FA4_BF16, 3, 1000, 0, 8, 2, 128, 128, FA4_MASK_CAUSAL);
        b.cu_seqlens_q = DEV(6), b.max_seqlen_q = 300;
        b.block_table = DEV(8), b.seqlens_k = DEV(9), b.page_size = page, b.max_pages = 40, b.num_pages = 100;
        p = plan_of(ctx, &b);
        assert_int_equal(p->cfg.page, page);
        fake_reset();
        must(ctx, fa4_mha_fwd(ctx, &b, NULL), "fa4_mha_fwd (varlen + paged)");
        assert_int_equal(fk->n_launches, 1);
        l = &fk->launches[0];
        assert_int_equal(l->seqlen_k, 40u * (unsigned)page);
        for (int m = 1; m <= 2; m++) { /* k, v */
            assert_int_equal(l->maps[m].dims[1], (uint64_t)page);
            assert_int_equal(l->maps[m].dims[2], 2);
            assert_int_equal(l->maps[m].dims[3], 100);
            assert_int_equal(l->maps[m].box[1], (uint32_t)(page < p->bn ? page : p->bn));
            assert_int_equal(l->maps[m].strides[2], (uint64_t)page * 2 * 128 * 2); /* page stride, bytes */
        }
        free(p);
    }
    fa4_destroy(ctx);
}

/* Sinks and a score_mod (issue 10): the kernel takes p_sink, p_sm_scale and p_aux after the ABI's
 * scalars; the mod's source hash is in the config; a source NVRTC refuses is FA4_ERR_COMPILE with
 * NVRTC's log, and nothing is launched. */
static void test_sink_score_mod(void **state)
{
    (void)state;
    static const char softcap[] = "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
                                  "{ return 30.0f * tanhf(s / 30.0f); }\n";
    fa4_ctx *ctx = ctx_on(90, FA4_TARGET_SM90A, NULL);
    fa4_mha_args a = mha(FA4_BF16, 2, 300, 300, 8, 2, 128, 128, FA4_MASK_CAUSAL);
    a.sink = DEV(7);
    a.score_mod = softcap;
    a.score_mod_aux = DEV(8);
    Plan *p = plan_of(ctx, &a);
    assert_int_equal(p->cfg.sink, 1);
    if (!strstr(p->canonical, " sink=1") || !strstr(p->canonical, " mod=")) fail_msg("config %s", p->canonical);
    const char *tail[3] = {"sink", "sm_scale", "aux"};
    for (int i = 0; i < 3; i++) assert_string_equal(p->params[p->n_params - 3 + i].name, tail[i]);
    Tensor t[TENSOR_COUNT];
    packed_tensors(&a, 2, 2, t);
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (sink + score_mod)");
    expect_launch(p, t, &a, LOG2E / sqrt(128.0), 1.0);
    /* the other two ways in: a called .func (one module, ptxas), and nvJitLink linking NVRTC's PTX */
    for (int i = 0; i < 2; i++) {
        setenv("FA4GEN_SCORE_MOD_LINK", i ? "link" : "call", 1);
        fake_reset();
        must(ctx, fa4_mha_fwd(ctx, &a, NULL), i ? "fa4_mha_fwd (score_mod linked)" : "fa4_mha_fwd (score_mod called)");
        expect_launch(p, t, &a, LOG2E / sqrt(128.0), 1.0);
    }
    setenv("FA4GEN_SCORE_MOD_LINK", "inline", 1);
    fake_reset();
    assert_int_equal(fa4_mha_fwd(ctx, &a, NULL), FA4_ERR_INVALID_ARGUMENT);
    unsetenv("FA4GEN_SCORE_MOD_LINK");
    free(p);

    a.score_mod = "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
                  "{ return s + undefined_thing; }\n";
    fake_reset();
    fa4_status s = fa4_mha_fwd(ctx, &a, NULL);
    if (s != FA4_ERR_COMPILE || !strstr(fa4_last_error(ctx), "undefined_thing"))
        fail_msg("a mod that does not compile: %s: %s", fa4_status_string(s), fa4_last_error(ctx));
    nothing_recorded("a mod NVRTC refuses");
    a.score_mod = " \n";
    assert_int_equal(fa4_mha_fwd(ctx, &a, NULL), FA4_ERR_INVALID_ARGUMENT);
    a.score_mod = NULL;
    assert_int_equal(fa4_mha_fwd(ctx, &a, NULL), FA4_ERR_INVALID_ARGUMENT); /* aux without a mod */
    nothing_recorded("bad score_mod arguments");
    fa4_destroy(ctx);
}

static int dir_entries(const char *path)
{
    DIR *d = opendir(path);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The status of the first two entries of dir, in name order (an inode changes when a rename rewrites one). */
static void entry_stats(const char *dir, struct stat st[2])
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort), k = 0;
    assert_true(n >= 0);
    for (int i = 0; i < n; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]->d_name);
        if (names[i]->d_name[0] != '.' && k < 2) assert_int_equal(stat(p, &st[k++]), 0);
        free(names[i]);
    }
    free(names);
    assert_int_equal(k, 2);
}

/* Two score_mod sources with one FNV-1a 64 (fnv_collision.h: a real collision), so one config
 * text (mod= is that hash): each still runs its own kernel. The memory cache compares the whole
 * source (also when the caller rewrites one buffer in place), and the disk key names the
 * source's SHA-256: two entries, and a fresh context takes each source's own. */
static void test_score_mod_collision(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4launch-mod.XXXXXX";
    assert_non_null(mkdtemp(dir));
    fa4_ctx *ctx = ctx_on(90, FA4_TARGET_SM90A, dir);
    fa4_mha_args a = mha(FA4_BF16, 2, 300, 300, 8, 2, 128, 128, FA4_MASK_CAUSAL);
    char src[512];
    snprintf(src, sizeof src, "%s", FNV_COLLISION_A);
    a.score_mod = src;
    int loaded = fk->modules_loaded;
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (source A)");
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (source A again)");
    assert_int_equal(fk->modules_loaded, loaded + 1); /* the second call is a memory hit */
    snprintf(src, sizeof src, "%s", FNV_COLLISION_B); /* same buffer, other code, same FNV */
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (source B)");
    if (fk->modules_loaded != loaded + 2)
        fail_msg("source B ran source A's kernel: %d module loads for two sources with one FNV-1a 64",
                 fk->modules_loaded - loaded);
    fa4_destroy(ctx);
    if (dir_entries(dir) != 2) fail_msg("%d disk-cache entries for two sources, expected 2", dir_entries(dir));
    struct stat before[2], after[2];
    entry_stats(dir, before);
    for (int i = 0; i < 2; i++) { /* fresh contexts, B first: each takes its own entry, none is rewritten */
        ctx = ctx_on(90, FA4_TARGET_SM90A, dir);
        a.score_mod = i ? FNV_COLLISION_A : FNV_COLLISION_B;
        must(ctx, fa4_mha_fwd(ctx, &a, NULL), i ? "fa4_mha_fwd (A, fresh)" : "fa4_mha_fwd (B, fresh)");
        fa4_destroy(ctx);
    }
    entry_stats(dir, after);
    for (int i = 0; i < 2; i++) assert_true(before[i].st_ino == after[i].st_ino);
    remove_tree(dir);
}

/* sm100a kernels on a 9.0 device: refused before anything is compiled
 * (its own cache stays empty), loaded, encoded or launched. */
static void test_sm100_on_sm90(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4launch-cc90.XXXXXX";
    assert_non_null(mkdtemp(dir));
    fa4_ctx *ctx = ctx_on(90, FA4_TARGET_SM100A, dir);
    fa4_mha_args a = mha(FA4_BF16, 2, 1000, 1000, 16, 16, 128, 128, FA4_MASK_CAUSAL);
    int loaded = fk->modules_loaded;
    assert_int_equal(fa4_mha_fwd(ctx, &a, NULL), FA4_ERR_UNSUPPORTED);
    const char *msg = fa4_last_error(ctx);
    if (!strstr(msg, "sm_100") || !strstr(msg, "9.0")) fail_msg("message '%s' names neither sm_100 nor 9.0", msg);
    nothing_recorded("sm100a on 9.0");
    assert_int_equal(fk->modules_loaded, loaded);
    assert_int_equal(dir_entries(dir), 0);
    fa4_destroy(ctx);
    rmdir(dir);
}

/* Sparse MLA on a 10.0 device: the sm100a head-64 kernel, its two maps (q as (d_qk, h_q, s_q) with
 * 64-head boxes; kv rows for gather4, box {64, 1}), one CTA per token and 64 heads. AUTO picks it
 * on 10.0 and the sm90a kernel on 9.0; an explicit sm100a on 9.0 is refused naming the sm90a
 * kernel, with nothing encoded or launched. */
static fa4_mla_sparse_args mla_args(void)
{
    fa4_mla_sparse_args a = FA4_MLA_SPARSE_ARGS_INIT;
    a.q = DEV(1), a.kv = DEV(2), a.indices = (const int32_t *)DEV(3), a.out = DEV(4);
    a.s_q = 5, a.s_kv = 1000, a.h_q = 128, a.d_qk = 576, a.topk = 128;
    return a;
}

static void test_sm100_mla_sparse(void **state)
{
    (void)state;
    fa4_mla_sparse_args a = mla_args();
    fa4_ctx *ctx = ctx_on(100, FA4_TARGET_SM100A, NULL);
    must(ctx, fa4_mla_sparse_fwd(ctx, &a, NULL), "fa4_mla_sparse_fwd");
    assert_int_equal(fk->n_launches, 1);
    const FakeLaunch *l = &fk->launches[0];
    if (!strstr(l->kernel, "mla_sparse_sm100a")) fail_msg("launched %s", l->kernel);
    assert_int_equal(l->grid[0], 5 * 2), assert_int_equal(l->block[0], 192);
    assert_int_equal(l->cluster[0], 2); /* h_q 128: the head-128 kernel, one CTA pair per token */
    assert_int_equal(l->n_maps, 3);     /* q, kv and (the default TMA-store epilogue) out */
    const FakeMap *q = &l->maps[0], *kv = &l->maps[1], *o = &l->maps[2];
    assert_int_equal(o->rank, 3), assert_int_equal(o->dims[0], 512), assert_int_equal(o->dims[1], 128);
    assert_int_equal(o->dims[2], 5), assert_int_equal(o->box[0], 64), assert_int_equal(o->box[1], 64);
    assert_true(o->addr == (uint64_t)(uintptr_t)DEV(4));
    assert_int_equal(q->rank, 3), assert_int_equal(q->dims[0], 576), assert_int_equal(q->dims[1], 128);
    assert_int_equal(q->dims[2], 5), assert_int_equal(q->strides[0], 576 * 2), assert_int_equal(q->strides[1], 128 * 576 * 2);
    assert_int_equal(q->box[0], 64), assert_int_equal(q->box[1], 64), assert_int_equal(q->box[2], 1);
    assert_int_equal(kv->rank, 2), assert_int_equal(kv->dims[0], 576), assert_int_equal(kv->dims[1], 1000);
    assert_int_equal(kv->strides[0], 576 * 2), assert_int_equal(kv->box[0], 64), assert_int_equal(kv->box[1], 1);
    assert_true(q->addr == (uint64_t)(uintptr_t)DEV(1) && kv->addr == (uint64_t)(uintptr_t)DEV(2));
    /* out rows a tensor map cannot address: the per-thread st.global epilogue, another kernel, no out map */
    char tma_kernel[sizeof l->kernel];
    snprintf(tma_kernel, sizeof tma_kernel, "%s", l->kernel);
    fake_reset();
    a.out_stride[1] = 514, a.out_stride[0] = 128 * 514;
    must(ctx, fa4_mla_sparse_fwd(ctx, &a, NULL), "fa4_mla_sparse_fwd (odd out strides)");
    assert_int_equal(fk->n_launches, 1), assert_int_equal(fk->launches[0].n_maps, 2);
    if (!strcmp(fk->launches[0].kernel, tma_kernel)) fail_msg("the same kernel for both epilogues");
    fake_reset();
    a.config = "tma_store=1"; /* asked for on those strides: refused, nothing launched */
    assert_int_equal(fa4_mla_sparse_fwd(ctx, &a, NULL), FA4_ERR_INVALID_ARGUMENT);
    if (!strstr(fa4_last_error(ctx), "args->config") || !strstr(fa4_last_error(ctx), "out_stride"))
        fail_msg("'%s'", fa4_last_error(ctx));
    nothing_recorded("sm100a tma_store=1 on odd strides");
    a.config = NULL, a.out_stride[1] = 0, a.out_stride[0] = 0;
    /* topk must be a multiple of the kernel's b_topk (128 for the pair, 64 for the head-64 kernel) */
    a.topk = 192;
    assert_int_equal(fa4_mla_sparse_fwd(ctx, &a, NULL), FA4_ERR_UNSUPPORTED);
    if (!strstr(fa4_last_error(ctx), "multiple of 128")) fail_msg("'%s'", fa4_last_error(ctx));
    /* h_q 40: the head-64 kernel, one CTA per token */
    a.topk = 192, a.h_q = 40;
    fake_reset();
    must(ctx, fa4_mla_sparse_fwd(ctx, &a, NULL), "fa4_mla_sparse_fwd (h_q 40)");
    assert_int_equal(fk->launches[0].grid[0], 5), assert_int_equal(fk->launches[0].cluster[0], 1);
    fa4_destroy(ctx);

    a = mla_args();
    ctx = ctx_on(100, FA4_TARGET_AUTO, NULL);
    must(ctx, fa4_mla_sparse_fwd(ctx, &a, NULL), "fa4_mla_sparse_fwd (AUTO, 10.0)");
    if (!strstr(fk->launches[0].kernel, "mla_sparse_sm100a")) fail_msg("AUTO on 10.0 launched %s", fk->launches[0].kernel);
    fa4_destroy(ctx);
    ctx = ctx_on(90, FA4_TARGET_AUTO, NULL);
    must(ctx, fa4_mla_sparse_fwd(ctx, &a, NULL), "fa4_mla_sparse_fwd (AUTO, 9.0)");
    if (!strstr(fk->launches[0].kernel, "mla_sparse_sm90a")) fail_msg("AUTO on 9.0 launched %s", fk->launches[0].kernel);
    fa4_destroy(ctx);

    /* fp8 kv: the head-64 kernel with its dequant warpgroup; kv's map moves e4m3 as bytes (strides in
     * bytes, unswizzled 192-byte boxes); scales only with FA4_E4M3, blocks a multiple of 64 dividing d_qk */
    a = mla_args();
    a.kv_dtype = FA4_E4M3, a.kv_scale = (const float *)DEV(5), a.kv_scale_block = 64;
    ctx = ctx_on(100, FA4_TARGET_AUTO, NULL);
    must(ctx, fa4_mla_sparse_fwd(ctx, &a, NULL), "fa4_mla_sparse_fwd (fp8)");
    {
        const FakeLaunch *f = &fk->launches[0];
        assert_int_equal(f->block[0], 320), assert_int_equal(f->cluster[0], 1), assert_int_equal(f->grid[0], 10);
        const FakeMap *k8 = &f->maps[1];
        assert_int_equal(k8->dtype, CU_TENSOR_MAP_DATA_TYPE_UINT8), assert_int_equal(k8->strides[0], 576);
        assert_int_equal(k8->box[0], 192), assert_int_equal(k8->box[1], 1);
        assert_int_equal(k8->swizzle, CU_TENSOR_MAP_SWIZZLE_NONE);
    }
    a.kv_scale_block = 96;
    assert_int_equal(fa4_mla_sparse_fwd(ctx, &a, NULL), FA4_ERR_INVALID_ARGUMENT);
    if (!strstr(fa4_last_error(ctx), "kv_scale_block")) fail_msg("'%s'", fa4_last_error(ctx));
    a.kv_scale_block = 0, a.kv_stride = 584; /* 8 bytes: not a 16-byte row */
    assert_int_equal(fa4_mla_sparse_fwd(ctx, &a, NULL), FA4_ERR_INVALID_ARGUMENT);
    if (!strstr(fa4_last_error(ctx), "kv_stride")) fail_msg("'%s'", fa4_last_error(ctx));
    a = mla_args();
    a.kv_scale = (const float *)DEV(5);
    assert_int_equal(fa4_mla_sparse_fwd(ctx, &a, NULL), FA4_ERR_INVALID_ARGUMENT);
    if (!strstr(fa4_last_error(ctx), "kv_scale: given for bf16 kv")) fail_msg("'%s'", fa4_last_error(ctx));
    fa4_destroy(ctx);

    a = mla_args();
    char dir[] = "/tmp/fa4launch-mla90.XXXXXX";
    assert_non_null(mkdtemp(dir));
    ctx = ctx_on(90, FA4_TARGET_SM100A, dir);
    assert_int_equal(fa4_mla_sparse_fwd(ctx, &a, NULL), FA4_ERR_UNSUPPORTED);
    const char *msg = fa4_last_error(ctx);
    if (!strstr(msg, "sm90a") || !strstr(msg, "9.0") || !strstr(msg, "10.x")) fail_msg("message '%s'", msg);
    nothing_recorded("mla sm100a on 9.0");
    assert_int_equal(dir_entries(dir), 0);
    fa4_destroy(ctx);
    rmdir(dir);
}

/* Bad descales are argument errors, found before the driver is even opened. */
static void test_bad_descale(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(100, FA4_TARGET_SM100A, NULL);
    const struct { const char *name; float q, k, v; } cases[] = {
        {"q_descale", -1.0f, 0, 0}, {"k_descale", 0, NAN, 0}, {"v_descale", 0, 0, INFINITY},
        {"v_descale", 0, 0, -0.5f}, {"k_descale", 1e30f, 1e30f, 0}, /* the product overflows a float */
    };
    int inits = fk->inits;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fa4_mha_args a = mha(FA4_BF16, 2, 1000, 1000, 16, 16, 128, 128, FA4_MASK_CAUSAL);
        a.q_descale = cases[i].q, a.k_descale = cases[i].k, a.v_descale = cases[i].v;
        fa4_status s = fa4_mha_fwd(ctx, &a, NULL);
        if (s != FA4_ERR_INVALID_ARGUMENT || !strstr(fa4_last_error(ctx), cases[i].name))
            fail_msg("case %zu: status %d, message '%s'", i, (int)s, fa4_last_error(ctx));
    }
    nothing_recorded("bad descales");
    assert_int_equal(fk->inits, inits);
    fa4_destroy(ctx);
}


/* Shapes whose products pass 2^31, 2^32 or 2^63 (issue 16): the ones the
 * kernels or the driver cannot index are refused naming the field, before
 * anything is encoded or launched; the ones they can are launched with every
 * extent and stride computed in 64 bits. */
static void expect_refused(fa4_ctx *ctx, const fa4_mha_args *a, const char *field, const char *why)
{
    fake_reset();
    fa4_status s = fa4_mha_fwd(ctx, a, NULL);
    if (s != FA4_ERR_INVALID_ARGUMENT || !strstr(fa4_last_error(ctx), field))
        fail_msg("%s: status %s, message '%s' (expected one naming %s)", why, fa4_status_string(s),
                 fa4_last_error(ctx), field);
    nothing_recorded(why);
}

static void test_huge_shapes(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(90, FA4_TARGET_SM90A, NULL);
    fa4_mha_args a;
    /* window bounds past 2^30, and bounds that would wrap the kernel's int32 key range */
    a = mha(FA4_BF16, 1, 1000, 1000, 16, 16, 128, 128, FA4_MASK_WINDOW);
    a.window_left = 5, a.window_right = 2147483647;
    expect_refused(ctx, &a, "window_right", "window_right INT_MAX");
    a.window_left = (1 << 30) + 1, a.window_right = 0;
    expect_refused(ctx, &a, "window_left", "window_left 2^30 + 1");
    a = mha(FA4_BF16, 1, 1000, 2147483600, 1, 1, 128, 128, FA4_MASK_CAUSAL);
    a.lse = NULL;
    expect_refused(ctx, &a, "seqlen_k", "causal seqlen_k near INT_MAX");
    a = mha(FA4_BF16, 1, 1000, 1500000000, 1, 1, 128, 128, FA4_MASK_WINDOW);
    a.window_left = 0, a.window_right = 1 << 30, a.lse = NULL;
    expect_refused(ctx, &a, "seqlen_k", "seqlen_k + window_right over INT_MAX");
    a = mha(FA4_BF16, 1, 1500000000, 1000, 1, 1, 128, 128, FA4_MASK_WINDOW);
    a.window_left = 1 << 30, a.window_right = -1, a.lse = NULL;
    expect_refused(ctx, &a, "seqlen_q", "seqlen_q + window_left over INT_MAX");
    /* packed strides past 2^63 elements, and explicit strides whose span passes the address space */
    a = mha(FA4_BF16, 2147483647, 2147483647, 2147483647, 1024, 1024, 1024, 1024, FA4_MASK_NONE);
    expect_refused(ctx, &a, "q_stride[0]", "packed batch stride over 2^63");
    a = mha(FA4_BF16, 1 << 20, 128, 128, 1, 1, 128, 128, FA4_MASK_NONE);
    a.q_stride[0] = (int64_t)1 << 38;
    expect_refused(ctx, &a, "q:", "q spans 2^59 bytes");
    a = mha(FA4_BF16, 1, 128, 128, 1, 1, 128, 128, FA4_MASK_NONE);
    a.o = (void *)(uintptr_t)(UINTPTR_MAX - 4095); /* 16-byte aligned, but the span wraps the address space */
    expect_refused(ctx, &a, "o:", "o wraps the address space");
    a = mha(FA4_BF16, 1, 128, 128, 1, 1, 128, 128, FA4_MASK_NONE);
    a.k_stride[1] = INT64_MAX - 15;
    expect_refused(ctx, &a, "k_stride[1]", "stride x element size over 2^63");
    /* LSE rows past 2^32 (the kernel indexes LSE in 32 bits) */
    a = mha(FA4_BF16, 16, 1 << 24, 256, 32, 32, 128, 128, FA4_MASK_NONE);
    expect_refused(ctx, &a, "lse", "LSE rows 2^33");
    /* a persistent grid caps the CTAs, but the kernel's tile count must still fit 31 bits: 2^55-byte q and o
     * with the seq axis outermost, so every stride stays below TMA's 2^40 bytes without an overlap */
    a = mha(FA4_BF16, 512, 1 << 30, 256, 512, 512, 64, 64, FA4_MASK_NONE);
    a.lse = NULL;
    a.q_stride[2] = a.o_stride[2] = 64, a.q_stride[0] = a.o_stride[0] = 512 * 64;
    a.q_stride[1] = a.o_stride[1] = (int64_t)512 * 512 * 64;
    a.q = HUGE(0), a.o = HUGE(1);
    expect_refused(ctx, &a, "tiles", "2^41 tiles on a persistent grid");
    /* accepted: batch stride 2^36 elements (2^37 bytes), 2^33 query rows, no LSE: every map in 64 bits */
    a = mha(FA4_BF16, 16, 1 << 24, 256, 32, 32, 128, 128, FA4_MASK_NONE);
    a.lse = NULL;
    Plan *p = plan_of(ctx, &a);
    assert_true(p->persistent);
    Tensor t[TENSOR_COUNT];
    packed_tensors(&a, 2, 2, t);
    assert_true(t[TENSOR_Q].stride[0] == (int64_t)1 << 36);
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (2^41-byte q)");
    expect_launch(p, t, &a, LOG2E / sqrt(128.0), 1.0);
    free(p);
    /* accepted: the widest window with short sequences */
    a = mha(FA4_BF16, 1, 1000, 1000, 16, 16, 128, 128, FA4_MASK_WINDOW);
    a.window_left = 1 << 30, a.window_right = 1 << 30;
    p = plan_of(ctx, &a);
    packed_tensors(&a, 2, 2, t);
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (window 2^30)");
    expect_launch(p, t, &a, LOG2E / sqrt(128.0), 1.0);
    free(p);
    fa4_destroy(ctx);
}

/* gen/softmax.c lse_store indexes LSE [batch, heads_q, seqlen_q] in 32 bits ((b x heads_q + h) x
 * seqlen_q + row, then a 64-bit byte offset): every row below 2^32 is addressable, so 2^32 rows are
 * launched and one row more is refused naming lse (issue 16: the runtime, not a 64-bit index, keeps
 * the store in bounds; the PTX stays as it is). */
static void test_lse_rows_boundary(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(90, FA4_TARGET_SM90A, NULL);
    fa4_mha_args a = mha(FA4_BF16, 4, 1 << 30, 256, 1, 1, 128, 128, FA4_MASK_NONE); /* 4 x 1 x 2^30 = 2^32 rows */
    Plan *p = plan_of(ctx, &a);
    Tensor t[TENSOR_COUNT];
    packed_tensors(&a, 2, 2, t);
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (2^32 LSE rows)");
    const FakeLaunch *l = expect_launch(p, t, &a, LOG2E / sqrt(128.0), 1.0);
    assert_int_equal(l->lse, (uint64_t)(uintptr_t)a.lse);
    free(p);
    a.seqlen_q = (1 << 30) + 1; /* 2^32 + 4 rows */
    expect_refused(ctx, &a, "lse", "LSE rows 2^32 + 4");
    a.heads_q = a.heads_kv = 4, a.seqlen_q = (1 << 28) + 1; /* 4 x 4 x (2^28 + 1) = 2^32 + 16, through heads */
    expect_refused(ctx, &a, "lse", "LSE rows 2^32 + 16 through heads");
    fa4_destroy(ctx);
}

/* k_rope with depths that cannot split K, after a call without k_rope put the same config in the
 * memory cache (rope_split is not in the canonical text where it is refused, so the key matched):
 * refused naming k_rope, not an internal error at encode time (found by tests/fuzz/fuzz_args). */
static void test_rope_after_memory_hit(void **state)
{
    (void)state;
    const int cc[2] = {100, 90};
    const fa4_target tg[2] = {FA4_TARGET_SM100A, FA4_TARGET_SM90A};
    for (int i = 0; i < 2; i++) {
        fa4_ctx *ctx = ctx_on(cc[i], tg[i], NULL);
        fa4_mha_args a = mha(FA4_BF16, 2, 300, 400, 8, 8, 128, 128, FA4_MASK_NONE);
        must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (no k_rope)");
        a.k_rope = DEV(6);
        fake_reset();
        fa4_status s = fa4_mha_fwd(ctx, &a, NULL);
        if (s != FA4_ERR_UNSUPPORTED || strncmp(fa4_last_error(ctx), "k_rope:", 7))
            fail_msg("sm_%d: k_rope with qk = ov = 128 after a memory hit: %s: %s", cc[i], fa4_status_string(s),
                     fa4_last_error(ctx));
        nothing_recorded("k_rope after a memory hit");
        fa4_destroy(ctx);
    }
}

/* Sparse MLA on sm90a picks its epilogue from out's layout: the TMA store (one rank-3 map over out as
 * (512, h_q, s_q), 64 x 64 boxes) when base and byte strides are 16-byte multiples, else st.global
 * (no map); asking for the TMA store on such strides is refused naming args->config. */
static void test_sm90_mla_epilogue(void **state)
{
    (void)state;
    fa4_mla_sparse_args a = mla_args();
    fa4_ctx *ctx = ctx_on(90, FA4_TARGET_SM90A, NULL);
    must(ctx, fa4_mla_sparse_fwd(ctx, &a, NULL), "fa4_mla_sparse_fwd (packed out)");
    assert_int_equal(fk->n_launches, 1);
    const FakeLaunch *l = &fk->launches[0];
    assert_int_equal(l->n_maps, 1);
    const FakeMap *o = &l->maps[0];
    assert_int_equal(o->rank, 3), assert_int_equal(o->dims[0], 512), assert_int_equal(o->dims[1], 128);
    assert_int_equal(o->dims[2], 5), assert_int_equal(o->strides[0], 512 * 2), assert_int_equal(o->strides[1], 128 * 512 * 2);
    assert_int_equal(o->box[0], 64), assert_int_equal(o->box[1], 64), assert_int_equal(o->box[2], 1);
    assert_true(o->addr == (uint64_t)(uintptr_t)DEV(4));
    char tma_kernel[sizeof l->kernel];
    snprintf(tma_kernel, sizeof tma_kernel, "%s", l->kernel);
    fake_reset();
    a.out_stride[1] = 514, a.out_stride[0] = 128 * 514; /* 1028-byte head rows: no tensor map */
    must(ctx, fa4_mla_sparse_fwd(ctx, &a, NULL), "fa4_mla_sparse_fwd (odd out strides)");
    assert_int_equal(fk->n_launches, 1), assert_int_equal(fk->launches[0].n_maps, 0);
    if (!strcmp(fk->launches[0].kernel, tma_kernel)) fail_msg("the same kernel for both epilogues");
    fake_reset();
    a.config = "tma_store=1";
    assert_int_equal(fa4_mla_sparse_fwd(ctx, &a, NULL), FA4_ERR_INVALID_ARGUMENT);
    if (!strstr(fa4_last_error(ctx), "args->config") || !strstr(fa4_last_error(ctx), "out_stride"))
        fail_msg("'%s'", fa4_last_error(ctx));
    nothing_recorded("tma_store=1 on odd strides");
    fa4_destroy(ctx);
}

static fa4_mla_sparse_args mla(int s_q, int s_kv, int h_q, int topk)
{
    fa4_mla_sparse_args a = FA4_MLA_SPARSE_ARGS_INIT;
    a.q = DEV(1), a.kv = DEV(2), a.indices = DEV(3), a.out = DEV(4);
    a.s_q = s_q, a.s_kv = s_kv, a.h_q = h_q, a.d_qk = 576, a.topk = topk;
    return a;
}

static void expect_mla_refused(fa4_ctx *ctx, const fa4_mla_sparse_args *a, const char *field, const char *why)
{
    fake_reset();
    fa4_status s = fa4_mla_sparse_fwd(ctx, a, NULL);
    size_t k = strlen(field);
    if (s != FA4_ERR_INVALID_ARGUMENT || strncmp(fa4_last_error(ctx), field, k) || fa4_last_error(ctx)[k] != ':')
        fail_msg("%s: status %s, message '%s' (expected one naming %s)", why, fa4_status_string(s),
                 fa4_last_error(ctx), field);
    nothing_recorded(why);
}

/* Sparse MLA shapes whose products pass 2^31, 2^32, 2^57 or 2^63 (found by tests/fuzz/fuzz_args:
 * the grid of s_q x head blocks wrapped 32 bits, and no span was checked): refused naming the field. */
static void test_mla_huge_shapes(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(90, FA4_TARGET_SM90A, NULL);
    fa4_mla_sparse_args a = mla(4, 1000, 64, 2048);
    fake_reset();
    must(ctx, fa4_mla_sparse_fwd(ctx, &a, NULL), "fa4_mla_sparse_fwd (small)");
    assert_int_equal(fk->n_launches, 1);
    assert_int_equal(fk->launches[0].grid[0], 4);
    /* 2^31 - 8 tokens x 2 blocks of 64 heads: 2^32 - 16 CTAs, which wrapped to a small grid */
    a = mla(INT_MAX - 7, 1000, 128, 2048);
    a.q = HUGE(0), a.indices = HUGE(1), a.out = HUGE(2);
    expect_mla_refused(ctx, &a, "s_q", "grid over 2^31 - 1");
    /* lse and max_logits [s_q, h_q] past 2^32 rows (the kernel's 32-bit index) */
    a = mla(1 << 26, 1000, 128, 2048);
    a.lse = DEV(5);
    expect_mla_refused(ctx, &a, "lse", "lse rows 2^33");
    a.lse = NULL, a.max_logits = DEV(5);
    expect_mla_refused(ctx, &a, "max_logits", "max_logits rows 2^33");
    /* spans: past 2^57, past 2^63 (saturated), wrapping the address space */
    a = mla(1 << 20, 1000, 64, 2048);
    a.q_stride[0] = (int64_t)1 << 40;
    expect_mla_refused(ctx, &a, "q", "q spans 2^61 bytes");
    a = mla(INT_MAX - 7, 1000, 64, 2048);
    a.out_stride[0] = (int64_t)1 << 40;
    expect_mla_refused(ctx, &a, "out", "out spans over 2^63 bytes");
    a = mla(4, 1 << 30, 64, 2048);
    a.kv_stride = (int64_t)1 << 30;
    expect_mla_refused(ctx, &a, "kv", "kv spans 2^61 bytes");
    a = mla(4, 1000, 64, 2048);
    a.indices = (const int32_t *)(uintptr_t)(UINTPTR_MAX - 4095);
    expect_mla_refused(ctx, &a, "indices", "indices wrap the address space");
    a = mla(4, 1000, 64, 2048);
    a.topk_length = (const int32_t *)(uintptr_t)(UINTPTR_MAX - 3);
    expect_mla_refused(ctx, &a, "topk_length", "topk_length wraps the address space");
    fa4_destroy(ctx);
}

/* ---------------------------------------------------------------- issue 26: buffers and strides */

/* Exact buffers for the cases below: each a fresh range of device 0 of exactly the bytes asked (the
 * fake knows ranges, not bytes), 64 KiB apart, from 2^46 (past DEV and HUGE-free space). */
static uint64_t next_buf = (uint64_t)1 << 46;
static void *buf_of(uint64_t bytes, unsigned type, int device, int managed)
{
    void *p = (void *)(uintptr_t)next_buf;
    if (fake_map(next_buf, bytes, type, device, managed)) fail_msg("the fake driver's range table is full");
    next_buf += (bytes + 0xffff) / 0x10000 * 0x10000 + 0x10000;
    return p;
}
static void *dev_buf(uint64_t bytes) { return buf_of(bytes, CU_MEMORYTYPE_DEVICE, 0, 0); }

/* A call refused with FA4_ERR_INVALID_ARGUMENT, its message starting with field (":" or "[" next) and holding
 * want (when given), nothing encoded or launched. */
static void refused_as(fa4_ctx *ctx, fa4_status s, const char *field, const char *want, const char *why)
{
    const char *msg = fa4_last_error(ctx);
    size_t k = strlen(field);
    if (s != FA4_ERR_INVALID_ARGUMENT || strncmp(msg, field, k) || (msg[k] != ':' && msg[k] != '[' && msg[k] != ' ') ||
        (want && !strstr(msg, want)))
        fail_msg("%s: %s: '%s' (expected a refusal naming %s%s%s)", why, fa4_status_string(s), msg, field,
                 want ? " saying " : "", want ? want : "");
    nothing_recorded(why);
}

static void mha_refused(fa4_ctx *ctx, const fa4_mha_args *a, const char *field, const char *want, const char *why)
{
    fake_reset();
    refused_as(ctx, fa4_mha_fwd(ctx, a, NULL), field, want, why);
}

static void mla_refused(fa4_ctx *ctx, const fa4_mla_sparse_args *a, const char *field, const char *want,
                        const char *why)
{
    fake_reset();
    refused_as(ctx, fa4_mla_sparse_fwd(ctx, a, NULL), field, want, why);
}

/* An MHA call whose every buffer has exactly the bytes fa4.h's layout needs (packed). */
static fa4_mha_args mha_exact(int batch, int sq, int sk, int hq, int hkv, int d)
{
    fa4_mha_args a = mha(FA4_BF16, batch, sq, sk, hq, hkv, d, d, FA4_MASK_CAUSAL);
    uint64_t qo = (uint64_t)batch * sq * hq * d * 2, kv = (uint64_t)batch * sk * hkv * d * 2;
    a.q = dev_buf(qo), a.k = dev_buf(kv), a.v = dev_buf(kv), a.o = dev_buf(qo);
    a.lse = dev_buf((uint64_t)batch * hq * sq * 4);
    return a;
}

/* Issue 26 item 4 (C API): every pointer the kernel reads or writes is asked of the driver (one
 * cuPointerGetAttributes each) before anything is compiled or launched: memory the driver does not know
 * (plain host memory), page-locked host memory, another device's memory and allocations smaller than what
 * the kernel touches are refused naming the argument; managed memory is accepted. */
static void test_mha_buffers(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(90, FA4_TARGET_SM90A, NULL);
    const int B = 2, SQ = 300, SK = 400, HQ = 8, HKV = 2, D = 128;
    const uint64_t row = (uint64_t)HQ * D * 2; /* one token of o */
    fa4_mha_args a = mha_exact(B, SQ, SK, HQ, HKV, D), b;
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (exact buffers)");
    assert_int_equal(fk->n_launches, 1);
    assert_int_equal(fk->n_ptr_queries, 5); /* q, k, v, o, lse: one driver call each */

    b = a, b.o = dev_buf((uint64_t)B * SQ * row - row); /* out one token short */
    mha_refused(ctx, &b, "o", "allocation ends", "o one row short");
    b = a, b.o = (char *)dev_buf((uint64_t)B * SQ * row) + 16; /* inside an allocation, 16 bytes too late */
    mha_refused(ctx, &b, "o", "ends", "o 16 bytes into an exact allocation");
    b = a, b.lse = dev_buf((uint64_t)B * HQ * SQ * 4 - 4);
    mha_refused(ctx, &b, "lse", "ends", "lse one float short");
    b = a, b.k = dev_buf((uint64_t)B * SK * HKV * D * 2 - 16);
    mha_refused(ctx, &b, "k", "ends", "k 16 bytes short");
    void *host = aligned_alloc(64, 4096);
    assert_non_null(host);
    b = a, b.o = host;
    mha_refused(ctx, &b, "o", "not memory the CUDA driver knows", "o in host memory");
    b = a, b.lse = host;
    mha_refused(ctx, &b, "lse", "not memory the CUDA driver knows", "lse in host memory");
    b = a, b.q = buf_of((uint64_t)B * SQ * row, CU_MEMORYTYPE_HOST, 0, 0);
    mha_refused(ctx, &b, "q", "page-locked host memory", "q in page-locked host memory");
    b = a, b.k = buf_of((uint64_t)B * SK * HKV * D * 2, CU_MEMORYTYPE_DEVICE, 1, 0);
    mha_refused(ctx, &b, "k", "device 1", "k on device 1");
    /* managed memory: every device reads it */
    b = a, b.v = buf_of((uint64_t)B * SK * HKV * D * 2, CU_MEMORYTYPE_DEVICE, 1, 1);
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &b, NULL), "fa4_mha_fwd (managed v)");
    assert_int_equal(fk->n_launches, 1);
    /* the sink [heads_q] and a score_mod's aux (opaque: where it lives, not its extent) */
    b = a, b.sink = dev_buf(HQ * 4 - 4);
    mha_refused(ctx, &b, "sink", "ends", "sink one float short");
    b = a, b.sink = host;
    mha_refused(ctx, &b, "sink", "not memory", "sink in host memory");
    b = a, b.score_mod = "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
                         "{ return s; }\n";
    b.score_mod_aux = host;
    mha_refused(ctx, &b, "score_mod_aux", "not memory", "aux in host memory");

    /* varlen: o holds the packed rows; cu_seqlens_q [batch + 1] */
    fa4_mha_args v = mha(FA4_BF16, 3, 1000, 1500, HQ, HKV, D, D, FA4_MASK_CAUSAL);
    v.q = dev_buf(1000 * row), v.o = dev_buf(1000 * row), v.lse = dev_buf(HQ * 1000 * 4);
    v.k = dev_buf(1500ull * HKV * D * 2), v.v = dev_buf(1500ull * HKV * D * 2);
    v.cu_seqlens_q = dev_buf(4 * 4), v.cu_seqlens_k = dev_buf(4 * 4), v.max_seqlen_q = 300;
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &v, NULL), "fa4_mha_fwd (varlen, exact buffers)");
    assert_int_equal(fk->n_ptr_queries, 7);
    b = v, b.o = dev_buf(999 * row);
    mha_refused(ctx, &b, "o", "ends", "varlen o one row short");
    b = v, b.cu_seqlens_q = dev_buf(3 * 4);
    mha_refused(ctx, &b, "cu_seqlens_q", "ends", "cu_seqlens_q of batch entries, not batch + 1");
    b = v, b.cu_seqlens_k = host;
    mha_refused(ctx, &b, "cu_seqlens_k", "not memory", "cu_seqlens_k in host memory");

    /* paged KV: the pools [num_pages, page, heads_kv, d], block_table [batch, max_pages], seqlens_k [batch] */
    fa4_mha_args g = mha(FA4_BF16, 3, 1000, 0, HQ, HKV, D, D, FA4_MASK_CAUSAL);
    g.q = v.q, g.o = v.o, g.lse = v.lse, g.cu_seqlens_q = v.cu_seqlens_q, g.max_seqlen_q = 300;
    g.page_size = 64, g.max_pages = 40, g.num_pages = 100;
    g.k = dev_buf(100ull * 64 * HKV * D * 2), g.v = dev_buf(100ull * 64 * HKV * D * 2);
    g.block_table = dev_buf(3 * 40 * 4), g.seqlens_k = dev_buf(3 * 4);
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &g, NULL), "fa4_mha_fwd (paged, exact buffers)");
    b = g, b.k = dev_buf(99ull * 64 * HKV * D * 2);
    mha_refused(ctx, &b, "k", "ends", "a k pool one page short");
    b = g, b.block_table = dev_buf(3 * 40 * 4 - 4);
    mha_refused(ctx, &b, "block_table", "ends", "block_table one entry short");
    b = g, b.seqlens_k = host;
    mha_refused(ctx, &b, "seqlens_k", "not memory", "seqlens_k in host memory");

    /* split-KV: the workspace the launch uses must lie in its allocation, whatever workspace_size says */
    fa4_mha_args w = mha_exact(2, 1, 4096, 64, 8, 128);
    w.num_splits = 4, w.workspace_size = 4ull * 2 * 64 * 129 * 4;
    w.workspace = dev_buf(w.workspace_size);
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &w, NULL), "fa4_mha_fwd (4 splits, exact workspace)");
    assert_int_equal(fk->n_launches, 2);
    w.workspace = dev_buf(w.workspace_size - 16);
    mha_refused(ctx, &w, "workspace", "ends", "a workspace allocation 16 bytes short of workspace_size");
    free(host);
    fa4_destroy(ctx);
}

/* The same for sparse MLA: out with too few rows, indices with fewer rows than q, attn_sink or
 * topk_length on the host, and the other buffers, refused naming them; one driver call per buffer. */
static void test_mla_buffers(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(90, FA4_TARGET_SM90A, NULL);
    const int SQ = 4, SKV = 1000, HQ = 64, TOPK = 128;
    fa4_mla_sparse_args a = mla(SQ, SKV, HQ, TOPK), b;
    a.q = dev_buf((uint64_t)SQ * HQ * 576 * 2), a.kv = dev_buf((uint64_t)SKV * 576 * 2);
    a.indices = dev_buf((uint64_t)SQ * TOPK * 4), a.out = dev_buf((uint64_t)SQ * HQ * 512 * 2);
    a.lse = dev_buf(SQ * HQ * 4), a.max_logits = dev_buf(SQ * HQ * 4);
    a.attn_sink = dev_buf(HQ * 4), a.topk_length = dev_buf(SQ * 4);
    fake_reset();
    must(ctx, fa4_mla_sparse_fwd(ctx, &a, NULL), "fa4_mla_sparse_fwd (exact buffers)");
    assert_int_equal(fk->n_launches, 1);
    assert_int_equal(fk->n_ptr_queries, 8);
    b = a, b.out = dev_buf((uint64_t)(SQ - 1) * HQ * 512 * 2);
    mla_refused(ctx, &b, "out", "ends", "out one token short");
    b = a, b.indices = dev_buf((uint64_t)(SQ - 1) * TOPK * 4);
    mla_refused(ctx, &b, "indices", "ends", "indices with fewer rows than q");
    b = a, b.kv = dev_buf((uint64_t)(SKV - 1) * 576 * 2);
    mla_refused(ctx, &b, "kv", "ends", "kv one row short");
    b = a, b.lse = dev_buf(SQ * HQ * 4 - 4);
    mla_refused(ctx, &b, "lse", "ends", "lse one float short");
    b = a, b.max_logits = buf_of(SQ * HQ * 4, CU_MEMORYTYPE_DEVICE, 1, 0);
    mla_refused(ctx, &b, "max_logits", "device 1", "max_logits on device 1");
    float sink[HQ];
    int32_t len[SQ];
    memset(sink, 0, sizeof sink), memset(len, 0, sizeof len);
    b = a, b.attn_sink = sink;
    mla_refused(ctx, &b, "attn_sink", "not memory the CUDA driver knows", "attn_sink on the host");
    b = a, b.topk_length = len;
    mla_refused(ctx, &b, "topk_length", "not memory the CUDA driver knows", "topk_length on the host");
    b = a, b.topk_length = buf_of(SQ * 4, CU_MEMORYTYPE_HOST, 0, 0);
    mla_refused(ctx, &b, "topk_length", "page-locked", "topk_length in page-locked host memory");
    b = a, b.q = dev_buf((uint64_t)SQ * HQ * 576 * 2 - 2 * 576);
    mla_refused(ctx, &b, "q", "ends", "q one head row short");
    fa4_destroy(ctx);
}

/* The call memo (mha.c) and the pointer memo (buffers.c): a call whose signature (every field but pointer
 * values) was seen launches without the pointer-free work and reuses its tensor maps when the tensor bases
 * are the same; pointers the driver vouched for are not asked again, new ones are; every pointer check still
 * runs on every call, and a refusal reads as it would on a fresh context. */
static void test_call_memo(void **state)
{
    (void)state;
    char err[256];
    if (rt_mha_memo_fields(err, sizeof err)) fail_msg("%s", err);
    setenv("FA4GEN_REMEMBER_BUFFERS", "1", 1); /* the pointer memo is opt-in */
    fa4_ctx *ctx = ctx_on(90, FA4_TARGET_SM90A, NULL);
    unsetenv("FA4GEN_REMEMBER_BUFFERS");
    const int B = 2, SQ = 256, SK = 512, HQ = 8, HKV = 2, D = 128;
    const uint64_t qo = (uint64_t)B * SQ * HQ * D * 2;
    fa4_mha_args a = mha_exact(B, SQ, SK, HQ, HKV, D), b;
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "first call");
    int n_maps = fk->n_encodes;
    assert_true(n_maps > 0);
    assert_int_equal(fk->n_ptr_queries, 5);
    char sym[FAKE_NAME];
    snprintf(sym, sizeof sym, "%s", fk->launches[0].kernel);
    FakeLaunch first = fk->launches[0];

    fake_reset(); /* the same call: no driver question, no encode, the same launch */
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "the same call");
    assert_int_equal(fk->n_launches, 1);
    assert_int_equal(fk->n_ptr_queries, 0);
    assert_int_equal(fk->n_encodes, 0);
    assert_string_equal(fk->launches[0].kernel, sym);
    assert_int_equal(fk->launches[0].grid[0], first.grid[0]);
    for (int i = 0; i < n_maps; i++) assert_memory_equal(&fk->launches[0].maps[i], &first.maps[i], sizeof(FakeMap));

    b = a, b.o = dev_buf(qo); /* a new o: asked once, the maps encoded again over it */
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &b, NULL), "a new o");
    assert_int_equal(fk->n_ptr_queries, 1);
    assert_int_equal(fk->n_encodes, n_maps);
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &b, NULL), "the new o again");
    assert_int_equal(fk->n_ptr_queries + fk->n_encodes, 0);

    /* what differs between calls of one signature is still checked, and refused as on a fresh context */
    void *host = aligned_alloc(64, 4096);
    assert_non_null(host);
    fa4_mha_args bad[6];
    const char *field[6] = {"q", "o", "o", "lse", "k", "lse"};
    for (int i = 0; i < 6; i++) bad[i] = a;
    bad[0].q = (char *)a.q + 8;               /* not 16-byte aligned */
    bad[1].o = host;                          /* host memory */
    bad[2].o = dev_buf(qo - 16);              /* one allocation 16 bytes short */
    bad[3].lse = (float *)(void *)((char *)a.lse + 2); /* not 4-byte aligned */
    bad[4].k = buf_of((uint64_t)B * SK * HKV * D * 2, CU_MEMORYTYPE_DEVICE, 1, 0); /* device 1 */
    bad[5].lse = (float *)(uintptr_t)(UINTPTR_MAX - 63); /* wraps the address space */
    fa4_ctx *fresh = ctx_on(90, FA4_TARGET_SM90A, NULL);
    must(fresh, fa4_mha_fwd(fresh, &a, NULL), "a fresh context's first call"); /* so both have the driver open */
    for (int i = 0; i < 6; i++) {
        fake_reset();
        fa4_status s = fa4_mha_fwd(ctx, &bad[i], NULL);
        char msg[RT_ERR_MAX];
        snprintf(msg, sizeof msg, "%s", fa4_last_error(ctx));
        refused_as(ctx, s, field[i], NULL, "a bad pointer in a memoized signature");
        fa4_ctx *other = ctx_on(90, FA4_TARGET_SM90A, NULL);
        refused_as(other, fa4_mha_fwd(other, &bad[i], NULL), field[i], NULL, "the same on a fresh context");
        if (strcmp(msg, fa4_last_error(other))) fail_msg("case %d: '%s' vs '%s'", i, msg, fa4_last_error(other));
        fa4_destroy(other);
    }
    fa4_destroy(fresh);

    /* one field apart: its own outcome (a new scale), and config texts of one length apart */
    b = a, b.softmax_scale = 0.25f;
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &b, NULL), "another scale");
    assert_true(fabs(fk->launches[0].scale_log2 - 0.25 * LOG2E) < 1e-6);
    const char *cfg[2] = {"stages=2", "stages=3"};
    char syms[2][FAKE_NAME];
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 2; i++) {
            char text[16];
            snprintf(text, sizeof text, "%s", cfg[i]); /* a buffer of the caller's, reused */
            b = a, b.config = text;
            fake_reset();
            must(ctx, fa4_mha_fwd(ctx, &b, NULL), cfg[i]);
            if (!r) snprintf(syms[i], sizeof syms[i], "%s", fk->launches[0].kernel);
            else assert_string_equal(fk->launches[0].kernel, syms[i]);
        }
    assert_string_not_equal(syms[0], syms[1]);

    /* forgetting, or a default context (no pointer memo): every pointer asked */
    fa4_forget_buffers(ctx);
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "after fa4_forget_buffers");
    assert_int_equal(fk->n_ptr_queries, 5);
    fa4_destroy(ctx);
    fa4_options o = FA4_OPTIONS_INIT;
    o.target = FA4_TARGET_SM90A;
    assert_int_equal(fa4_create(&ctx, &o), FA4_OK);
    for (int i = 0; i < 2; i++) {
        fake_reset();
        must(ctx, fa4_mha_fwd(ctx, &a, NULL), "default: no pointer memo");
        assert_int_equal(fk->n_ptr_queries, 5);
    }
    fa4_destroy(ctx);
    free(host);
}

/* Issue 26 item 7: strides that step over less than the extent inside them (rows, heads or batches that
 * overlap) are refused naming the stride, for outputs and inputs alike, so the span check bounds every
 * product of counts; a transposed (head-major) layout is no overlap and runs. A shape whose counts
 * multiply past 2^64 (the grid's tiles and LSE's rows wrapped to small numbers on the older checks, so it
 * launched with aliasing strides) is refused. */
static void test_overlapping_strides(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(90, FA4_TARGET_SM90A, NULL);
    fa4_mha_args a = mha(FA4_BF16, 2, 300, 400, 8, 2, 128, 128, FA4_MASK_NONE), b;
    b = a, b.o_stride[2] = 64; /* heads 64 elements apart, rows of 128 */
    mha_refused(ctx, &b, "o_stride[2]", "overlap", "o's heads overlap");
    b = a, b.o_stride[1] = 512; /* tokens 512 apart, 8 heads of 128 */
    mha_refused(ctx, &b, "o_stride[1]", "overlap", "o's tokens overlap");
    b = a, b.o_stride[0] = 299 * 8 * 128; /* batches one token too close */
    mha_refused(ctx, &b, "o_stride[0]", "overlap", "o's batches overlap");
    b = a, b.q_stride[2] = 64;
    mha_refused(ctx, &b, "q_stride[2]", "overlap", "q's heads overlap");
    b = a, b.k_stride[0] = 8; /* every batch on the same rows (a broadcast) */
    mha_refused(ctx, &b, "k_stride[0]", "overlap", "k's batches broadcast");
    /* head-major (q and o as [B, H, S, D] in memory): no overlap, launched with those strides */
    b = a;
    b.q_stride[0] = b.o_stride[0] = 8LL * 300 * 128, b.q_stride[1] = b.o_stride[1] = 128;
    b.q_stride[2] = b.o_stride[2] = 300 * 128;
    Plan *p = plan_of(ctx, &b);
    Tensor t[TENSOR_COUNT];
    packed_tensors(&b, 2, 2, t);
    t[TENSOR_Q].stride[0] = t[TENSOR_O].stride[0] = 8LL * 300 * 128;
    t[TENSOR_Q].stride[1] = t[TENSOR_O].stride[1] = 128, t[TENSOR_Q].stride[2] = t[TENSOR_O].stride[2] = 300 * 128;
    fake_reset();
    must(ctx, fa4_mha_fwd(ctx, &b, NULL), "fa4_mha_fwd (head-major q and o)");
    expect_launch(p, t, &b, LOG2E / sqrt(128.0), 1.0);
    free(p);
    /* batch x heads_q x seqlen_q = 2^71 + 2^29 and tiles 2^64 + 2^22: both wrapped 64 bits to small values,
     * and with every stride 16 bytes the spans were small; refused at the first overlapping stride now */
    b = mha(FA4_BF16, 213005 * 32, 1429 * 128, 1000, 14449 << 17, 14449 << 17, 64, 64, FA4_MASK_NONE);
    b.config = "bm=128";
    for (int d = 0; d < 3; d++) b.q_stride[d] = b.k_stride[d] = b.v_stride[d] = b.o_stride[d] = 8;
    b.q = b.o = HUGE(0), b.k = b.v = HUGE(1), b.lse = HUGE(2);
    mha_refused(ctx, &b, "q_stride", "overlap", "counts whose products wrap 2^64");

    /* sparse MLA: out and q per axis order; head-major out runs */
    fa4_mla_sparse_args m = mla(4, 1000, 64, 128), n;
    n = m, n.out_stride[1] = 256;
    mla_refused(ctx, &n, "out_stride[1]", "overlap", "out's heads overlap");
    n = m, n.out_stride[0] = 63 * 512;
    mla_refused(ctx, &n, "out_stride[0]", "overlap", "out's tokens overlap");
    n = m, n.q_stride[0] = 576; /* every token on the first one's heads */
    mla_refused(ctx, &n, "q_stride[0]", "overlap", "q's tokens overlap");
    n = m, n.out_stride[0] = 512, n.out_stride[1] = 4 * 512; /* [h_q, s_q, 512] in memory */
    fake_reset();
    must(ctx, fa4_mla_sparse_fwd(ctx, &n, NULL), "fa4_mla_sparse_fwd (head-major out)");
    assert_int_equal(fk->n_launches, 1);
    fa4_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sm100_d128),         cmocka_unit_test(test_sm103_target),         cmocka_unit_test(test_sm100_gqa_packed),
        cmocka_unit_test(test_sm100_mla_rope),     cmocka_unit_test(test_sm100_e4m3_descale),
        cmocka_unit_test(test_sm100_cluster),      cmocka_unit_test(test_sm90_d128),
        cmocka_unit_test(test_sm90_varlen_paged),
        cmocka_unit_test(test_sm100_on_sm90), cmocka_unit_test(test_sm100_mla_sparse), cmocka_unit_test(test_sm90_mla_epilogue),
        cmocka_unit_test(test_bad_descale),
        cmocka_unit_test(test_kernel_info),        cmocka_unit_test(test_huge_shapes),
        cmocka_unit_test(test_sink_score_mod),     cmocka_unit_test(test_score_mod_collision),
        cmocka_unit_test(test_rope_after_memory_hit), cmocka_unit_test(test_mla_huge_shapes),
        cmocka_unit_test(test_lse_rows_boundary), cmocka_unit_test(test_split_kv),
        cmocka_unit_test(test_split_choice),
        cmocka_unit_test(test_mha_buffers),        cmocka_unit_test(test_mla_buffers),
        cmocka_unit_test(test_overlapping_strides), cmocka_unit_test(test_call_memo),
        cmocka_unit_test(test_dynamic_tiles),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
