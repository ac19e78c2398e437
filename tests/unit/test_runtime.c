/* test_runtime.c - libfa4rt without a GPU: status strings, versioned options,
 * error messages, config text, fa4_mha_fwd argument checks (which must run
 * before the driver is touched) and the no-driver path. */
#include <dlfcn.h>
#include <math.h>
#include <unistd.h>

#include "fa4.h"
#include "testutil.h"

static char cache_dir[] = "/tmp/fa4rt.XXXXXX";

static int setup(void **state)
{
    (void)state;
    return temp_cache_dir(cache_dir);
}

static int teardown(void **state)
{
    (void)state;
    return remove_tree(cache_dir);
}

static fa4_ctx *make_ctx(fa4_target t)
{
    fa4_options o = FA4_OPTIONS_INIT;
    o.target = t;
    fa4_ctx *ctx = NULL;
    assert_int_equal(fa4_create(&ctx, &o), FA4_OK);
    assert_non_null(ctx);
    return ctx;
}

static void test_status_strings(void **state)
{
    (void)state;
    for (int s = 0; s < FA4_NUM_STATUS; s++) {
        const char *text = fa4_status_string((fa4_status)s);
        assert_non_null(text);
        assert_true(strlen(text) > 3);
        for (int t = 0; t < s; t++) assert_string_not_equal(text, fa4_status_string((fa4_status)t));
    }
    assert_string_equal(fa4_status_string(FA4_OK), "success");
    assert_non_null(fa4_status_string(FA4_NUM_STATUS));
    assert_non_null(fa4_status_string((fa4_status)-1));
}

static void test_options_versioning(void **state)
{
    (void)state;
    fa4_ctx *ctx = NULL;
    assert_int_equal(fa4_create(&ctx, NULL), FA4_OK); /* NULL: defaults */
    fa4_destroy(ctx);
    /* An older caller whose struct ends after cache_dir: the rest defaults. */
    struct {
        fa4_options o;
        char guard[16];
    } old;
    memset(&old, 0x7f, sizeof old); /* junk past the declared size must be ignored */
    old.o.size = offsetof(fa4_options, disk_cache);
    old.o.version = 1;
    old.o.device = 0;
    old.o.target = FA4_TARGET_SM90A;
    old.o.cache_dir = NULL;
    assert_int_equal(fa4_create(&ctx, &old.o), FA4_OK);
    fa4_destroy(ctx);
    fa4_options bad = FA4_OPTIONS_INIT;
    bad.size = 4;
    assert_int_equal(fa4_create(&ctx, &bad), FA4_ERR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_non_null(strstr(fa4_last_error(NULL), "opt->size"));
    bad = (fa4_options)FA4_OPTIONS_INIT;
    bad.version = 0;
    assert_int_equal(fa4_create(&ctx, &bad), FA4_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fa4_last_error(NULL), "opt->version"));
    bad = (fa4_options)FA4_OPTIONS_INIT;
    bad.cache_dir = "relative/dir";
    assert_int_equal(fa4_create(&ctx, &bad), FA4_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fa4_last_error(NULL), "cache_dir"));
    bad = (fa4_options)FA4_OPTIONS_INIT;
    bad.target = (fa4_target)7;
    assert_int_equal(fa4_create(&ctx, &bad), FA4_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fa4_last_error(NULL), "opt->target"));
    assert_int_equal(fa4_create(NULL, NULL), FA4_ERR_INVALID_ARGUMENT);
    fa4_destroy(NULL); /* a no-op */
}

static void test_last_error(void **state)
{
    (void)state;
    fa4_ctx *ctx = make_ctx(FA4_TARGET_SM90A);
    assert_string_equal(fa4_last_error(ctx), "");
    void *bin;
    size_t n;
    assert_int_equal(fa4_compile(ctx, "mha bm=7", &bin, &n), FA4_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fa4_last_error(ctx), "bm"));
    assert_int_equal(fa4_compile(ctx, "mha nosuchkey=1", &bin, &n), FA4_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fa4_last_error(ctx), "nosuchkey"));
    assert_int_equal(fa4_compile(ctx, NULL, &bin, &n), FA4_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fa4_last_error(ctx), "config"));
    fa4_destroy(ctx);
}

/* ---------------------------------------------------------------- mha args */

static _Alignas(16) char fake[4][256]; /* never dereferenced: checks fail before any launch */

static fa4_mha_args good_args(void)
{
    fa4_mha_args a = FA4_MHA_ARGS_INIT;
    a.q = fake[0], a.k = fake[1], a.v = fake[2], a.o = fake[3];
    a.batch = 2, a.seqlen_q = 128, a.seqlen_k = 256, a.heads_q = 8, a.heads_kv = 2;
    a.qk_depth = a.ov_depth = 128;
    a.mask = FA4_MASK_CAUSAL;
    return a;
}

/* Each case breaks one argument; the status is INVALID_ARGUMENT and the
 * message names the argument, on this machine with or without a driver. */
typedef struct { const char *name, *needle; void (*breakit)(fa4_mha_args *); } BadCase;
static void b_size(fa4_mha_args *a) { a->size = 8; }
static void b_dtype(fa4_mha_args *a) { a->dtype = (fa4_dtype)9; }
static void b_q(fa4_mha_args *a) { a->q = NULL; }
static void b_k(fa4_mha_args *a) { a->k = NULL; }
static void b_v(fa4_mha_args *a) { a->v = NULL; }
static void b_o(fa4_mha_args *a) { a->o = NULL; }
static void b_batch(fa4_mha_args *a) { a->batch = 0; }
static void b_seqlen_q(fa4_mha_args *a) { a->seqlen_q = -1; }
static void b_seqlen_k(fa4_mha_args *a) { a->seqlen_k = 0; }
static void b_heads_q(fa4_mha_args *a) { a->heads_q = 0; }
static void b_group(fa4_mha_args *a) { a->heads_kv = 3; }
static void b_qk(fa4_mha_args *a) { a->qk_depth = 100; }
static void b_ov(fa4_mha_args *a) { a->ov_depth = 0; }
static void b_align(fa4_mha_args *a) { a->k = fake[1] + 2; }
static void b_stride_neg(fa4_mha_args *a) { a->q_stride[1] = -1024; }
static void b_stride_align(fa4_mha_args *a) { a->v_stride[2] = 130; }
static void b_lse(fa4_mha_args *a) { a->lse = (float *)(void *)(fake[0] + 2); }
static void b_scale_nan(fa4_mha_args *a) { a->softmax_scale = NAN; }
static void b_scale_inf(fa4_mha_args *a) { a->softmax_scale = INFINITY; }
static void b_mask(fa4_mha_args *a) { a->mask = (fa4_mask)5; }
static void b_window(fa4_mha_args *a) { a->mask = FA4_MASK_WINDOW, a->window_left = -5; }
static void b_config_key(fa4_mha_args *a) { a->config = "bm=128 frobnicate=1"; }
static void b_config_value(fa4_mha_args *a) { a->config = "stages=99"; }
static void b_config_dtype(fa4_mha_args *a) { a->config = "dtype=fp16"; }
static void b_descale_neg(fa4_mha_args *a) { a->q_descale = -1.0f; }
static void b_descale_nan(fa4_mha_args *a) { a->k_descale = NAN; }
static void b_descale_inf(fa4_mha_args *a) { a->v_descale = INFINITY; }
static void b_rope_align(fa4_mha_args *a) { a->k_rope = fake[1] + 2; }
static void b_rope_stride(fa4_mha_args *a) { a->k_rope = fake[1], a->k_rope_stride[1] = 36; }
static void b_rope_depth(fa4_mha_args *a) { a->k_rope = fake[1], a->qk_depth = a->ov_depth = 64; }
static void b_config_rope(fa4_mha_args *a) { a->config = "rope_split=1"; }
/* e4m3 O is bf16: 2^39 elements are 2^40 bytes, past TMA's limit (as e4m3 bytes they would pass) */
static void b_e4m3_o_stride(fa4_mha_args *a) { a->dtype = FA4_E4M3, a->o_stride[0] = (int64_t)1 << 39; }

/* varlen and paged KV (issue 15): the device arrays are fakes; host mirrors are real */
static const int32_t cu_ok[3] = {0, 60, 128}, cu_nonmono[3] = {0, 70, 50}, cu_neg[3] = {-4, 60, 128},
                     cu_past[3] = {0, 100, 300};
static void varlen_on(fa4_mha_args *a)
{
    a->cu_seqlens_q = (const int32_t *)(void *)fake[0], a->cu_seqlens_k = (const int32_t *)(void *)fake[1];
    a->max_seqlen_q = 68;
}
static void paged_on(fa4_mha_args *a)
{
    a->block_table = (const int32_t *)(void *)fake[0], a->seqlens_k = (const int32_t *)(void *)fake[1];
    a->page_size = 64, a->max_pages = 8, a->num_pages = 16, a->seqlen_k = 0;
}
static void b_vl_k_only(fa4_mha_args *a) { a->cu_seqlens_k = (const int32_t *)(void *)fake[1]; }
static void b_vl_q_only(fa4_mha_args *a) { varlen_on(a), a->cu_seqlens_k = NULL; }
static void b_vl_max0(fa4_mha_args *a) { varlen_on(a), a->max_seqlen_q = 0; }
static void b_vl_max_big(fa4_mha_args *a) { varlen_on(a), a->max_seqlen_q = 129; }
static void b_vl_max_alone(fa4_mha_args *a) { a->max_seqlen_q = 5; }
static void b_vl_bstride(fa4_mha_args *a) { varlen_on(a), a->o_stride[0] = 4096; }
static void b_vl_nonmono(fa4_mha_args *a) { varlen_on(a), a->cu_seqlens_q_host = cu_nonmono; }
static void b_vl_neg(fa4_mha_args *a) { varlen_on(a), a->cu_seqlens_q_host = cu_neg; }
static void b_vl_past(fa4_mha_args *a) { varlen_on(a), a->cu_seqlens_k_host = cu_past; }
static void b_vl_short_max(fa4_mha_args *a) { varlen_on(a), a->max_seqlen_q = 60, a->cu_seqlens_q_host = cu_ok; }
static void b_vl_rope(fa4_mha_args *a) { varlen_on(a), a->k_rope = fake[1]; }
static void b_vl_lse32(fa4_mha_args *a) { varlen_on(a), a->seqlen_q = 1 << 30; } /* x heads 8: LSE past 2^32 rows */
static void b_vl_config(fa4_mha_args *a) { a->config = "varlen=1"; }
static void b_vl_align(fa4_mha_args *a) { varlen_on(a), a->cu_seqlens_k = (const int32_t *)(void *)(fake[1] + 2); }
static void b_pg_size(fa4_mha_args *a) { paged_on(a), a->page_size = 48; }
static void b_pg_size_big(fa4_mha_args *a) { paged_on(a), a->page_size = 512; }
static void b_pg_max0(fa4_mha_args *a) { paged_on(a), a->max_pages = 0; }
static void b_pg_num0(fa4_mha_args *a) { paged_on(a), a->num_pages = 0; }
static void b_pg_lens(fa4_mha_args *a) { paged_on(a), a->seqlens_k = NULL; }
static void b_pg_seqlen_k(fa4_mha_args *a) { paged_on(a), a->seqlen_k = 256; }
static void b_pg_cap32(fa4_mha_args *a) { paged_on(a), a->max_pages = 1 << 25; } /* x 64 = 2^31: past int32 */
static void b_pg_table31(fa4_mha_args *a) { paged_on(a), a->batch = 1 << 10, a->max_pages = 1 << 22, a->page_size = 16; }
static void b_pg_cu_k(fa4_mha_args *a) { varlen_on(a), paged_on(a); }
static void b_pg_fields(fa4_mha_args *a) { a->page_size = 64; }
static void b_pg_lens_alone(fa4_mha_args *a) { a->seqlens_k = (const int32_t *)(void *)fake[1]; }
static void b_pg_config(fa4_mha_args *a) { a->config = "page=64"; }
static void b_pg_kstride(fa4_mha_args *a) { paged_on(a), a->k_stride[1] = 100; }
/* found by tests/fuzz/fuzz_args: tables at the top of the address space */
static void b_pg_wrap(fa4_mha_args *a) { paged_on(a), a->block_table = (const int32_t *)(UINTPTR_MAX - 15); }
static void b_vl_wrap(fa4_mha_args *a) { varlen_on(a), a->cu_seqlens_k = (const int32_t *)(UINTPTR_MAX - 7); }

static const BadCase bad_cases[] = {
    {"size", "args->size", b_size},          {"dtype", "dtype", b_dtype},
    {"q", "q:", b_q},                         {"k", "k:", b_k},
    {"v", "v:", b_v},                         {"o", "o:", b_o},
    {"batch", "batch", b_batch},             {"seqlen_q", "seqlen_q", b_seqlen_q},
    {"seqlen_k", "seqlen_k", b_seqlen_k},    {"heads_q", "heads_q", b_heads_q},
    {"group", "heads_kv", b_group},          {"qk_depth", "qk_depth", b_qk},
    {"ov_depth", "ov_depth", b_ov},          {"align", "k: address", b_align},
    {"stride<0", "q_stride[1]", b_stride_neg}, {"stride%16", "v_stride[2]", b_stride_align},
    {"lse", "lse", b_lse},                   {"scale nan", "softmax_scale", b_scale_nan},
    {"scale inf", "softmax_scale", b_scale_inf}, {"mask", "mask", b_mask},
    {"window", "window_left", b_window},     {"config key", "frobnicate", b_config_key},
    {"config value", "stages", b_config_value}, {"config dtype", "dtype", b_config_dtype},
    {"descale<0", "q_descale", b_descale_neg}, {"descale nan", "k_descale", b_descale_nan},
    {"descale inf", "v_descale", b_descale_inf}, {"k_rope align", "k_rope: address", b_rope_align},
    {"k_rope stride", "k_rope_stride[1]", b_rope_stride}, {"k_rope depth", "k_rope", b_rope_depth},
    {"config rope_split", "rope_split", b_config_rope}, {"e4m3 o stride", "o_stride[0]", b_e4m3_o_stride},
    {"varlen k only", "cu_seqlens_k", b_vl_k_only}, {"varlen q only", "cu_seqlens_k", b_vl_q_only},
    {"varlen max 0", "max_seqlen_q", b_vl_max0}, {"varlen max > rows", "max_seqlen_q", b_vl_max_big},
    {"max_seqlen_q alone", "max_seqlen_q", b_vl_max_alone}, {"varlen batch stride", "o_stride[0]", b_vl_bstride},
    {"cu not monotone", "cu_seqlens_q: not monotone", b_vl_nonmono}, {"cu[0] < 0", "cu_seqlens_q[0]", b_vl_neg},
    {"cu past tensor", "cu_seqlens_k[2]", b_vl_past}, {"max < longest", "max_seqlen_q", b_vl_short_max},
    {"varlen k_rope", "k_rope", b_vl_rope}, {"varlen lse 2^32", "seqlen_q", b_vl_lse32},
    {"config varlen", "varlen", b_vl_config}, {"cu align", "cu_seqlens", b_vl_align},
    {"page size 48", "page_size", b_pg_size}, {"page size 512", "page_size", b_pg_size_big},
    {"max_pages 0", "max_pages", b_pg_max0}, {"num_pages 0", "num_pages", b_pg_num0},
    {"seqlens_k NULL", "seqlens_k", b_pg_lens}, {"paged seqlen_k", "seqlen_k", b_pg_seqlen_k},
    {"max_pages x page 2^31", "max_pages", b_pg_cap32}, {"batch x max_pages 2^32", "max_pages", b_pg_table31},
    {"paged cu_seqlens_k", "cu_seqlens_k", b_pg_cu_k}, {"page fields alone", "page_size", b_pg_fields},
    {"seqlens_k alone", "seqlens_k", b_pg_lens_alone}, {"config page", "page", b_pg_config},
    {"paged k stride", "k_stride[1]", b_pg_kstride}, {"block_table wraps", "block_table", b_pg_wrap},
    {"cu_seqlens_k wraps", "cu_seqlens_k", b_vl_wrap},
};

static void test_mha_bad_args(void **state)
{
    (void)state;
    fa4_target targets[2] = {FA4_TARGET_AUTO, FA4_TARGET_SM90A};
    for (int t = 0; t < 2; t++) {
        fa4_ctx *ctx = make_ctx(targets[t]);
        for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
            fa4_mha_args a = good_args();
            bad_cases[i].breakit(&a);
            fa4_status s = fa4_mha_fwd(ctx, &a, NULL);
            if (s != FA4_ERR_INVALID_ARGUMENT || !strstr(fa4_last_error(ctx), bad_cases[i].needle))
                fail_msg("case %s: status %d, message '%s'", bad_cases[i].name, (int)s, fa4_last_error(ctx));
        }
        assert_int_equal(fa4_mha_fwd(ctx, NULL, NULL), FA4_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(fa4_last_error(ctx), "args"));
        fa4_destroy(ctx);
    }
    fa4_mha_args a = good_args();
    assert_int_equal(fa4_mha_fwd(NULL, &a, NULL), FA4_ERR_INVALID_ARGUMENT);
}

/* Good varlen / paged arguments pass every check and name their config words, on both targets; the
 * sm100a CTA pair refuses them. */
static void test_mha_serving_config(void **state)
{
    (void)state;
    fa4_ctx *ctx = make_ctx(FA4_TARGET_SM90A);
    char buf[512];
    fa4_mha_args a = good_args();
    varlen_on(&a);
    a.cu_seqlens_q_host = cu_ok, a.cu_seqlens_k_host = cu_ok;
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_non_null(strstr(buf, " varlen=1"));
    assert_null(strstr(buf, " page="));
    a.cu_seqlens_k = NULL, a.cu_seqlens_k_host = NULL;
    paged_on(&a);
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_non_null(strstr(buf, " varlen=1 page=64"));
    a = good_args();
    paged_on(&a);
    a.page_size = 16;
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_non_null(strstr(buf, " page=16"));
    assert_null(strstr(buf, "varlen"));
    a.mask = FA4_MASK_NONE; /* d128 non-causal: bn 176 becomes the power of two 128 */
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_non_null(strstr(buf, " bn=128"));
    fa4_destroy(ctx);
    ctx = make_ctx(FA4_TARGET_SM100A);
    a = good_args();
    varlen_on(&a);
    a.cu_seqlens_k = NULL;
    paged_on(&a);
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_non_null(strstr(buf, "target=sm100a"));
    assert_non_null(strstr(buf, " varlen=1 page=64"));
    a.config = "cta=2";
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_ERR_UNSUPPORTED);
    assert_non_null(strstr(fa4_last_error(ctx), "cta=2"));
    fa4_destroy(ctx);
}

/* kv_early names early=1 on the split kernel over dense K/V (not a cluster split or the sm100a CTA
 * pair), and nowhere else (it is a promise the kernel may use, not a request that can fail). */
static void test_mha_kv_early_config(void **state)
{
    (void)state;
    fa4_ctx *ctx = make_ctx(FA4_TARGET_SM90A);
    char buf[512];
    fa4_mha_args a = good_args();
    a.seqlen_q = 1, a.heads_q = 64, a.heads_kv = 8, a.mask = FA4_MASK_NONE;
    a.num_splits = 4, a.workspace = fake[3], a.workspace_size = 1 << 20;
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_non_null(strstr(buf, " split=1 prefetch=2 ")); /* the L2 prefetch, which asks nothing, by default */
    assert_null(strstr(buf, "early"));
    a.config = "prefetch=0"; /* the caller's word stands */
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_non_null(strstr(buf, " split=1 prefetch=0 "));
    a.config = NULL;
    a.kv_early = 1;
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_non_null(strstr(buf, " split=1 early=1 prefetch=0 ")); /* the early loads fill the tail instead */
    a.num_splits = 1, a.workspace = NULL, a.workspace_size = 0; /* one split, the decode kernel writes O itself */
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_non_null(strstr(buf, " split=1 early=1"));
    a.seqlen_q = 128, a.heads_q = 8, a.heads_kv = 2; /* no split path: nothing to load early */
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_null(strstr(buf, "early"));
    a = good_args();
    a.seqlen_q = 1, a.heads_q = 64, a.heads_kv = 8, a.mask = FA4_MASK_NONE, a.kv_early = 1;
    a.num_splits = 4, a.workspace = fake[3], a.workspace_size = 1 << 20;
    paged_on(&a);
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_non_null(strstr(buf, " split=1 early=1 prefetch=0 page=64")); /* paged: lengths, table, blocks early */
    a.kv_early = 0;
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_null(strstr(buf, "early"));
    assert_non_null(strstr(buf, " split=1 prefetch=2 page=64")); /* paged prefetch: the table read twice */
    fa4_destroy(ctx);
    ctx = make_ctx(FA4_TARGET_SM100A);
    a = good_args();
    a.seqlen_q = 1, a.heads_q = 64, a.heads_kv = 8, a.mask = FA4_MASK_NONE, a.kv_early = 1;
    a.num_splits = 4, a.workspace = fake[3], a.workspace_size = 1 << 20;
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_non_null(strstr(buf, " split=1 early=1"));
    a.config = "cta=2"; /* the CTA pair has no early loads */
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_non_null(strstr(buf, " cta=2"));
    assert_null(strstr(buf, "early"));
    fa4_destroy(ctx);
}

static int have_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) dlclose(h);
    return h != NULL;
}

static void test_no_driver(void **state)
{
    (void)state;
    if (have_driver()) skip();
    fa4_ctx *ctx = make_ctx(FA4_TARGET_AUTO);
    fa4_mha_args a = good_args();
    assert_int_equal(fa4_mha_fwd(ctx, &a, NULL), FA4_ERR_NO_DRIVER);
    assert_non_null(strstr(fa4_last_error(ctx), "libcuda.so.1"));
    fa4_kernel *k = NULL;
    assert_int_equal(fa4_get_kernel(ctx, "mha qk=128", &k, NULL), FA4_ERR_NO_DRIVER);
    assert_null(k);
    char buf[256];
    /* A question that launches nothing needs no GPU: AUTO answers for the default target, sm90a, with
     * the H100's SM count for the split picks (issue 28: the build machine asks it). */
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_non_null(strstr(buf, "mha target=sm90a "));
    int n = 0;
    size_t bytes = 0;
    a.seqlen_q = 1, a.mask = FA4_MASK_NONE, a.seqlen_k = 8192, a.heads_q = 64, a.heads_kv = 8;
    assert_int_equal(fa4_mha_split_count(ctx, &a, &n, &bytes), FA4_OK);
    assert_true(n > 1 && bytes > 0); /* batch 2 x 8 kv heads = 16 tiles of 132 SMs: split */
    /* and sm90a's decode without a workspace takes a cluster split, as it would on an H100 */
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    if (!strstr(buf, " cluster=")) fail_msg("no cluster split without a GPU: %s", buf);
    fa4_destroy(ctx);
    /* An explicit target still needs the driver to launch, after the checks. */
    ctx = make_ctx(FA4_TARGET_SM90A);
    assert_int_equal(fa4_mha_fwd(ctx, &a, NULL), FA4_ERR_NO_DRIVER);
    fa4_destroy(ctx);
}

/* resolve_splits memoizes its split plans per context (32 entries, replaced round-robin): 40 decode
 * calls (10 bn values x 4 GQA groups), twice over, must give the same config each time, whether it
 * came from a fresh plan, the memo, or a replaced entry. */
static void test_split_facts_memo(void **state)
{
    (void)state;
    fa4_ctx *ctx = make_ctx(FA4_TARGET_SM90A);
    char first[40][256], buf[256], cfg[32];
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < 40; i++) {
            fa4_mha_args a = good_args();
            a.batch = 1, a.seqlen_q = 1, a.seqlen_k = 4096, a.mask = FA4_MASK_NONE;
            a.heads_kv = 2, a.heads_q = 4 << (i / 10); /* groups 2, 4, 8, 16 */
            snprintf(cfg, sizeof cfg, "bn=%d stages=2", 16 + 16 * (i % 10));
            a.config = cfg;
            fa4_status st = fa4_mha_config(ctx, &a, buf, sizeof buf);
            if (st) fail_msg("fa4_mha_config %d: %s", i, fa4_last_error(ctx));
            if (pass == 0) snprintf(first[i], sizeof first[i], "%s", buf);
            else assert_string_equal(buf, first[i]);
        }
    assert_non_null(strstr(first[0], " bn=16 "));
    assert_non_null(strstr(first[39], " group=16 "));
    assert_non_null(strstr(first[39], " split=1 "));
    fa4_destroy(ctx);
}

static void test_mha_config(void **state)
{
    (void)state;
    fa4_ctx *ctx = make_ctx(FA4_TARGET_SM90A);
    fa4_mha_args a = good_args();
    char buf[256];
    fa4_status s = fa4_mha_config(ctx, &a, buf, sizeof buf);
    if (s) fail_msg("fa4_mha_config: %s", fa4_last_error(ctx));
    assert_non_null(strstr(buf, "mha target=sm90a dtype=bf16 qk=128 ov=128"));
    assert_non_null(strstr(buf, "group=4"));
    assert_non_null(strstr(buf, "mask=causal"));
    a.config = "stages=3";
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_non_null(strstr(buf, "stages=3"));
    a.mask = FA4_MASK_WINDOW, a.window_left = 64, a.window_right = 0, a.config = NULL;
    assert_int_equal(fa4_mha_config(ctx, &a, buf, sizeof buf), FA4_OK);
    assert_non_null(strstr(buf, "mask=window:64,0"));
    assert_int_equal(fa4_mha_config(ctx, &a, buf, 8), FA4_ERR_INVALID_ARGUMENT);
    fa4_destroy(ctx);
}

static void test_compile_text_forms(void **state)
{
    (void)state;
    fa4_ctx *ctx = make_ctx(FA4_TARGET_AUTO);
    void *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    fa4_status s = fa4_compile(ctx, "mha target=sm90a dtype=bf16 qk=128 ov=128 mask=causal", &a, &na);
    if (s == FA4_ERR_NO_DRIVER) skip(); /* neither nvJitLink nor a driver here */
    if (s) fail_msg("compile: %s", fa4_last_error(ctx));
    /* The same kernel spelled as the full canonical form is the same cubin. */
    s = fa4_compile(ctx, "mha target=sm90a dtype=bf16 qk=128 ov=128 bm=128 bn=128 group=1 stages=2 swizzle=128 "
                         "rescale=8 poly=0 pingpong=1 persistent=0 mask=causal", &b, &nb);
    if (s) fail_msg("compile: %s", fa4_last_error(ctx));
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    free(a), free(b);
    fa4_destroy(ctx);
}

/* Both compilers: the ptxas executable (whole program, the default) and
 * nvJitLink (FA4GEN_NO_PTXAS=1) turn the same config into a loadable cubin,
 * under different cache keys. */
static void test_compiler_paths(void **state)
{
    (void)state;
    const char *cfg = "mha target=sm90a dtype=bf16 qk=64 ov=64";
    for (int no_ptxas = 0; no_ptxas < 2; no_ptxas++) {
        if (no_ptxas) setenv("FA4GEN_NO_PTXAS", "1", 1);
        fa4_options o = FA4_OPTIONS_INIT;
        o.disk_cache = 0;
        fa4_ctx *ctx = NULL;
        assert_int_equal(fa4_create(&ctx, &o), FA4_OK);
        void *cubin = NULL;
        size_t n = 0;
        fa4_status s = fa4_compile(ctx, cfg, &cubin, &n);
        unsetenv("FA4GEN_NO_PTXAS");
        if (s == FA4_ERR_NO_DRIVER) { fa4_destroy(ctx); skip(); }
        if (s) fail_msg("compile (%s): %s", no_ptxas ? "nvJitLink" : "ptxas", fa4_last_error(ctx));
        assert_true(n > 1000);
        assert_memory_equal(cubin, "\177ELF", 4); /* a cubin is an ELF file */
        free(cubin);
        fa4_destroy(ctx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_strings), cmocka_unit_test(test_options_versioning),
        cmocka_unit_test(test_last_error),     cmocka_unit_test(test_mha_bad_args),
        cmocka_unit_test(test_mha_serving_config), cmocka_unit_test(test_mha_kv_early_config),
        cmocka_unit_test(test_no_driver),      cmocka_unit_test(test_mha_config),
        cmocka_unit_test(test_split_facts_memo),
        cmocka_unit_test(test_compile_text_forms),
        cmocka_unit_test(test_compiler_paths),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
