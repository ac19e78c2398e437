/* test_aot.c - fa4_mha_configs_for against fa4_mha_fwd, on the fake CUDA driver (run with
 * LD_LIBRARY_PATH=build/fakecuda, as `make unit` does).
 *
 * The replay: a workload is enumerated, every config it lists is registered as a bundle entry (a
 * minimal cubin holding the entry's symbol, in a fatbin, which the fake driver loads), JIT is
 * disabled, and concrete calls drawn from the workload's ranges go through fa4_mha_fwd: every one
 * must find its kernels (the split and combine kernels included) in that bundle. A call outside the
 * workload must miss with the message naming the bundle searched. tests/unit/test_bundle.c does the
 * same with real ptxas cubins for a smaller workload built by `fa4gen configs | fa4gen bundle -`. */
#include <cuda.h>
#include <dlfcn.h>
#include <math.h>

#include "fa4.h"
#include "fa4gen.h"
#include "fake_cuda.h"
#include "testutil.h"

static FakeCuda *fk;
static FakeCudaResetFn fake_reset;
enum { MEM_BASE = 0x100000000000ull };
#define MEM_SIZE (1ull << 44)

static int setup(void **state)
{
    (void)state;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    FakeCudaStateFn get = lib ? (FakeCudaStateFn)dlsym(lib, "fake_cuda_state") : NULL;
    fake_reset = lib ? (FakeCudaResetFn)dlsym(lib, "fake_cuda_reset") : NULL;
    FakeCudaMapFn map = lib ? (FakeCudaMapFn)dlsym(lib, "fake_cuda_map") : NULL;
    if (!get || !fake_reset || !map || map(MEM_BASE, MEM_SIZE, CU_MEMORYTYPE_DEVICE, 0, 0)) {
        fprintf(stderr, "test_aot: libcuda.so.1 is not the fake driver; run with LD_LIBRARY_PATH=build/fakecuda\n");
        return -1;
    }
    fk = get();
    unsetenv("FA4GEN_DISABLE_JIT");
    setenv("FA4GEN_LOG", "0", 1);
    setenv("FA4GEN_CACHE_DIR", "/nonexistent-fa4gen-test-aot", 1); /* JIT is off: nothing is read or written */
    return 0;
}

/* ---------------------------------------------------------------- a bundle of stand-in cubins */

typedef struct {
    char **config;
    int n, cap;
    char **notes;
    int n_notes;
} Listed;

static int collect(void *user, const fa4_config_entry *e)
{
    Listed *l = user;
    assert_int_equal(e->size, sizeof *e);
    assert_non_null(e->example);
    if (!e->config) {
        assert_non_null(e->note);
        l->notes = realloc(l->notes, (size_t)(l->n_notes + 1) * sizeof *l->notes);
        l->notes[l->n_notes++] = strdup(e->note);
        return 0;
    }
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->config[i], e->config)) fail_msg("listed twice: %s", e->config);
    if (l->n == l->cap) l->cap = l->cap ? 2 * l->cap : 64, l->config = realloc(l->config, (size_t)l->cap * sizeof(char *));
    l->config[l->n++] = strdup(e->config);
    return 0;
}

static void listed_free(Listed *l)
{
    for (int i = 0; i < l->n; i++) free(l->config[i]);
    for (int i = 0; i < l->n_notes; i++) free(l->notes[i]);
    free(l->config), free(l->notes);
    memset(l, 0, sizeof *l);
}

static void put16(unsigned char *p, unsigned v) { p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8); }
static void put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> 8 * i); }
static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> 8 * i); }

/* A fatbin with one ELF entry for sm: a 64-bit CUDA ELF header, the symbol as a string, one section
 * header (what the fake driver checks and searches). */
static unsigned char *stand_in(const char *symbol, int sm, size_t *size)
{
    size_t name = strlen(symbol) + 2, shoff = (64 + name + 7) / 8 * 8, elf = shoff + 64, total = 16 + 64 + elf;
    unsigned char *f = aligned_alloc(16, (total + 15) / 16 * 16), *e = f + 80;
    memset(f, 0, total);
    put32(f, 0xBA55ED50u), put16(f + 4, 1), put16(f + 6, 16), put64(f + 8, 64 + elf);
    put16(f + 16, 2), put16(f + 18, 0x101), put32(f + 20, 64), put64(f + 24, elf), put32(f + 44, (uint32_t)sm);
    memcpy(e, "\177ELF", 4), e[4] = 2, e[5] = 1, e[6] = 1;
    put16(e + 0x10, 2), put16(e + 0x12, 190), put32(e + 0x14, 1), put64(e + 0x28, shoff), put32(e + 0x30, (uint32_t)sm);
    put16(e + 0x34, 64), put16(e + 0x3A, 64), put16(e + 0x3C, 1);
    memcpy(e + 65, symbol, name - 2);
    *size = total;
    return f;
}

/* Registers the listed configs as bundle `name` (kept for the process, as a linked table is). */
static const fa4_bundle *register_listed(const Listed *l, const char *name)
{
    fa4_bundle_kernel *k = calloc((size_t)l->n, sizeof *k);
    for (int i = 0; i < l->n; i++) {
        Config c;
        char err[256], sym[64];
        if (config_parse_canonical(l->config[i], &c, err, sizeof err) || config_fill_defaults(&c, err, sizeof err))
            fail_msg("'%s': %s", l->config[i], err);
        config_symbol(&c, sym, sizeof sym);
        k[i].config_hash = config_hash(&c);
        k[i].config = strdup(l->config[i]);
        k[i].symbol = strdup(sym);
        k[i].fatbin = stand_in(sym, c.target == TARGET_SM100A ? 100 : 90, &k[i].fatbin_size);
    }
    fa4_bundle *b = calloc(1, sizeof *b);
    *b = (fa4_bundle){sizeof *b, strdup(name), fa4gen_build_id(), l->n, k};
    assert_int_equal(fa4_bundle_register(b), FA4_OK);
    return b;
}

/* ---------------------------------------------------------------- calls */

typedef struct {
    int d, g, h, b, sq, sk, layout, ws, early;
    fa4_mask mask;
} Call;

enum { L_DENSE, L_VARLEN, L_PAGED, L_VARLEN_PAGED, PAGE = 64 };

static fa4_mha_args call_args(const Call *c)
{
    fa4_mha_args a = FA4_MHA_ARGS_INIT;
    void *mem = (void *)(uintptr_t)MEM_BASE;
    a.q = a.k = a.v = mem, a.o = mem;
    a.batch = c->b, a.heads_kv = c->h, a.heads_q = c->h * c->g, a.qk_depth = a.ov_depth = c->d, a.mask = c->mask;
    a.seqlen_q = c->sq, a.seqlen_k = c->sk;
    if (c->layout == L_VARLEN || c->layout == L_VARLEN_PAGED) { /* b sequences of sq queries (and sk keys) */
        a.cu_seqlens_q = mem, a.max_seqlen_q = c->sq, a.seqlen_q = c->b * c->sq;
        if (c->layout == L_VARLEN) a.cu_seqlens_k = mem, a.seqlen_k = c->b * c->sk;
    }
    if (c->layout == L_PAGED || c->layout == L_VARLEN_PAGED) { /* a table as wide as the sequence */
        a.block_table = mem, a.seqlens_k = mem, a.page_size = PAGE;
        a.max_pages = (c->sk + PAGE - 1) / PAGE, a.num_pages = c->b * a.max_pages, a.seqlen_k = 0;
    }
    if (c->ws) a.workspace = mem, a.workspace_size = (size_t)1 << 43;
    a.kv_early = c->early;
    return a;
}

static void say_call(const Call *c, char *buf, size_t n)
{
    static const char *const lay[] = {"dense", "varlen", "paged", "varlen+paged"};
    snprintf(buf, n, "d%d group %d heads_kv %d batch %d seqlen_q %d seqlen_k %d mask %d %s ws %d early %d", c->d, c->g,
             c->h, c->b, c->sq, c->sk, (int)c->mask, lay[c->layout], c->ws, c->early);
}

static unsigned rng = 12345u;
static int pick(const int *v, int n)
{
    rng = rng * 1103515245u + 12345u;
    return v[(rng >> 8) % (unsigned)n];
}

/* The workload the replays draw from (and a second, narrower one for the negative control). */
static const int depths[] = {64, 128}, groups[] = {1, 4, 8}, pages[] = {PAGE};
static const fa4_mask masks[] = {FA4_MASK_NONE, FA4_MASK_CAUSAL};
static const int sqs[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 192, 255, 256,
                          257, 1000, 2048, 4000, 16384};
static const int sks[] = {1, 2, 63, 64, 65, 100, 500, 1024, 2047, 2048, 2049, 2100, 3000, 4096, 5000, 8192, 12000,
                          16384};
static const int heads[] = {1, 2, 3, 5, 8}, batches[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 33, 40};

static fa4_workload workload(const fa4_target *t, const int *sm)
{
    fa4_workload w = FA4_WORKLOAD_INIT;
    w.targets = t, w.n_targets = 1, w.sm_counts = sm, w.n_sm_counts = sm ? 1 : 0;
    w.qk_depths = depths, w.n_depths = 2, w.groups = groups, w.n_groups = 3, w.masks = masks, w.n_masks = 2;
    w.heads_kv_min = 1, w.heads_kv_max = 8, w.batch_min = 1, w.batch_max = 40;
    w.seqlen_q_min = 1, w.seqlen_q_max = 16384, w.seqlen_k_min = 1, w.seqlen_k_max = 16384;
    w.layouts = FA4_LAYOUT_DENSE | FA4_LAYOUT_VARLEN | FA4_LAYOUT_PAGED | FA4_LAYOUT_VARLEN_PAGED;
    w.page_sizes = pages, w.n_page_sizes = 1;
    w.kv_early = FA4_WHEN_EITHER, w.workspace = FA4_WHEN_EITHER;
    return w;
}

static fa4_ctx *jit_off_ctx(int cc, int sms, fa4_target t)
{
    char v[16];
    snprintf(v, sizeof v, "%d", cc);
    setenv("FAKE_CUDA_CC", v, 1);
    snprintf(v, sizeof v, "%d", sms);
    setenv("FAKE_CUDA_SMS", v, 1);
    fake_reset();
    fa4_options o = FA4_OPTIONS_INIT;
    o.target = t, o.disable_jit = 1, o.disk_cache = 0;
    fa4_ctx *ctx = NULL;
    assert_int_equal(fa4_create(&ctx, &o), FA4_OK);
    return ctx;
}

/* n calls drawn from the workload's lists; every one must launch from the bundle. */
static void replay(int cc, int sms, fa4_target t, int n)
{
    fa4_ctx *ctx = jit_off_ctx(cc, sms, t);
    int splits = 0, clusters = 0, combines = 0;
    for (int i = 0; i < n; i++) {
        Call c = {pick(depths, 2), pick(groups, 3), pick(heads, 5), pick(batches, 12), pick(sqs, 27), pick(sks, 18),
                  (int)(rng % 4), (int)(rng >> 3 & 1), (int)(rng >> 5 & 1), masks[rng >> 7 & 1]};
        fa4_mha_args a = call_args(&c);
        char cfg[512] = "", what[200];
        fa4_mha_config(ctx, &a, cfg, sizeof cfg);
        int launches = fk->n_launches;
        fa4_status s = fa4_mha_fwd(ctx, &a, NULL);
        if (s) {
            say_call(&c, what, sizeof what);
            fail_msg("%s (config %s): %s: %s", what, cfg, fa4_status_string(s), fa4_last_error(ctx));
        }
        splits += strstr(cfg, " split=1") != NULL, clusters += strstr(cfg, " cluster=") != NULL;
        combines += fk->n_launches - launches == 2;
        fake_reset();
    }
    /* the draws reached the rules' corners: split kernels, cluster splits (sm90a), the combine kernel */
    if (!splits || !combines || (t == FA4_TARGET_SM90A && !clusters))
        fail_msg("%d calls: %d split, %d cluster, %d combine", n, splits, clusters, combines);
    print_message("    %s, %d SMs: %d calls, %d split, %d cluster split, %d with the combine kernel: no miss\n",
                  t == FA4_TARGET_SM90A ? "sm90a" : "sm100a", sms, n, splits, clusters, combines);
    fa4_destroy(ctx);
}

static void enumerate(fa4_ctx *ctx, const fa4_workload *w, Listed *l)
{
    fa4_status s = fa4_mha_configs_for(ctx, w, collect, l);
    if (s) fail_msg("fa4_mha_configs_for: %s", fa4_last_error(ctx));
}

/* The config fa4_mha_config picks for call c into cfg; the test fails (naming `where`) unless l lists it. */
static void want_listed(fa4_ctx *ctx, const Listed *l, const Call *c, const char *where, char *cfg, size_t n)
{
    fa4_mha_args a = call_args(c);
    char what[200];
    cfg[0] = 0;
    assert_int_equal(fa4_mha_config(ctx, &a, cfg, n), FA4_OK);
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->config[i], cfg)) return;
    say_call(c, what, sizeof what);
    fail_msg("%s%s: %s not listed", where, what, cfg);
}

/* Every call of the workload finds its kernels in the bundle of what fa4_mha_configs_for listed, on
 * both targets with the flagship SM counts, and on an sm90a of 114 SMs (H100 PCIe) listed as such; the
 * SM count moves a decode shape's cluster split. */
static void test_replay(void **state)
{
    (void)state;
    static const fa4_target sm90 = FA4_TARGET_SM90A, sm100 = FA4_TARGET_SM100A;
    static const int pcie = 114;
    fa4_ctx *ctx = NULL;
    assert_int_equal(fa4_create(&ctx, NULL), FA4_OK);
    Listed l90 = {0}, l100 = {0}, l114 = {0};
    fa4_workload w = workload(&sm90, NULL);
    enumerate(ctx, &w, &l90);
    w = workload(&sm100, NULL);
    enumerate(ctx, &w, &l100);
    w = workload(&sm90, &pcie);
    enumerate(ctx, &w, &l114);
    fa4_destroy(ctx);
    print_message("    listed: sm90a %d configs, sm100a %d, sm90a at 114 SMs %d\n", l90.n, l100.n, l114.n);
    assert_int_equal(l90.n_notes + l100.n_notes, 0);
    register_listed(&l90, "aot_sm90a");
    register_listed(&l100, "aot_sm100a");
    replay(90, 132, FA4_TARGET_SM90A, 1500);
    replay(100, 148, FA4_TARGET_SM100A, 1500);
    /* 114 SMs pick other cluster splits: only the bundle listed for 114 covers them all */
    register_listed(&l114, "aot_sm90a_114");
    replay(90, 114, FA4_TARGET_SM90A, 1500);
    listed_free(&l90), listed_free(&l100), listed_free(&l114);
    assert_int_equal(fa4_create(&ctx, NULL), FA4_OK);
    /* one decode shape (batch 1, 8 kv heads, group 8): 132 SMs take a cluster split of 8 CTAs, 114 of 7 */
    Listed one[2] = {{0}, {0}};
    static const int g8[] = {8}, sm_of[2] = {132, 114};
    for (int i = 0; i < 2; i++) {
        w = (fa4_workload)FA4_WORKLOAD_INIT;
        w.targets = &sm90, w.n_targets = 1, w.sm_counts = &sm_of[i], w.n_sm_counts = 1, w.groups = g8, w.n_groups = 1;
        w.heads_kv_min = w.heads_kv_max = 8, w.batch_min = w.batch_max = 1, w.seqlen_q_min = w.seqlen_q_max = 1;
        w.seqlen_k_min = w.seqlen_k_max = 16384, w.workspace = FA4_WHEN_NEVER, w.masks = masks, w.n_masks = 1;
        enumerate(ctx, &w, &one[i]);
        assert_int_equal(one[i].n, 1);
    }
    if (!strstr(one[0].config[0], " cluster=8 ") || !strstr(one[1].config[0], " cluster=7 "))
        fail_msg("132 SMs: %s; 114 SMs: %s", one[0].config[0], one[1].config[0]);
    listed_free(&one[0]), listed_free(&one[1]);
    fa4_destroy(ctx);
}

/* A call outside the workload (a GQA group it does not list) misses, and the message names every bundle
 * searched, with its kernels and generator, and why it missed. */
static void test_outside_misses(void **state)
{
    (void)state;
    fa4_ctx *ctx = jit_off_ctx(90, 132, FA4_TARGET_SM90A);
    Call c = {64, 2, 2, 1, 1, 4096, L_DENSE, 1, 0, FA4_MASK_CAUSAL};
    fa4_mha_args a = call_args(&c);
    fa4_status s = fa4_mha_fwd(ctx, &a, NULL);
    const char *msg = fa4_last_error(ctx);
    if (s != FA4_ERR_NO_KERNEL) fail_msg("%s: %s", fa4_status_string(s), msg);
    assert_int_equal(fa4_bundle_count(), 3);
    char want[200];
    snprintf(want, sizeof want, "'aot_sm90a' (%d kernels, generator %s): no entry with this canonical config",
             fa4_bundle_at(0)->n_kernels, fa4gen_build_id());
    if (!strstr(msg, "no linked bundle holds 'mha target=sm90a dtype=bf16 qk=64 ov=64 ") || !strstr(msg, " group=2 ") || !strstr(msg, want) ||
        !strstr(msg, "searched 3 bundles:") || !strstr(msg, "'aot_sm100a' (") || !strstr(msg, "fa4gen configs"))
        fail_msg("message: %s", msg);
    assert_int_equal(fk->n_launches, 0);
    fa4_destroy(ctx);
}

/* fa4_compile with JIT disabled reads the bundles: the cubin is the entry's ELF for its target. */
static void test_compile_from_bundle(void **state)
{
    (void)state;
    fa4_ctx *ctx = jit_off_ctx(90, 132, FA4_TARGET_SM90A);
    const fa4_bundle *b = fa4_bundle_at(0);
    assert_non_null(b);
    assert_true(b->n_kernels > 0);
    void *cubin = NULL;
    size_t size = 0;
    fa4_kernel_stats st;
    if (fa4_compile_v2(ctx, b->kernels[0].config, &cubin, &size, &st))
        fail_msg("fa4_compile_v2 '%s': %s", b->kernels[0].config, fa4_last_error(ctx));
    assert_int_equal(st.source, 3);
    assert_int_equal(size, b->kernels[0].fatbin_size - 80);
    assert_memory_equal(cubin, (const unsigned char *)b->kernels[0].fatbin + 80, size);
    free(cubin);
    assert_int_equal(fa4_compile(ctx, "mha target=sm90a qk=64 ov=64 group=2", &cubin, &size), FA4_ERR_NO_KERNEL);
    assert_null(cubin);
    assert_non_null(strstr(fa4_last_error(ctx), "searched 3 bundles"));
    assert_int_equal(fa4_bundle_count(), 3);
    assert_null(fa4_bundle_at(3));
    assert_null(fa4_bundle_at(-1));
    fa4_destroy(ctx);
}

/* What the walk knows of split.c: past RT_SPLIT_KV_SATURATE kv blocks, and at tiles >= SMs, the pick
 * does not change (configs.c walks no further). */
int rt_split_choice(uint64_t tiles, int sm_count, int kv_blocks); /* rt_internal.h */
int rt_least_pad_bn(int64_t seqlen_k);                            /* rt_internal.h */
static void test_split_saturation(void **state)
{
    (void)state;
    const int sat = 2 * FA4_MAX_SPLITS, sms[] = {78, 114, 132, 148};
    for (int s = 0; s < 4; s++)
        for (uint64_t t = 1; t <= (uint64_t)sms[s] + 3; t++) {
            int at = rt_split_choice(t, sms[s], sat);
            for (int k = sat; k < sat + 700; k += 37) assert_int_equal(rt_split_choice(t, sms[s], k), at);
            if (t >= (uint64_t)sms[s]) assert_int_equal(at, 1);
        }
}

/* Refusals name the field; cases no kernel serves come back as notes, one per target and reason. */
static void test_workload_checks(void **state)
{
    (void)state;
    fa4_ctx *ctx = NULL;
    assert_int_equal(fa4_create(&ctx, NULL), FA4_OK);
    Listed l = {0};
    static const int bad_depth[] = {72}, page0[] = {48}, sm0[] = {0}, d256[] = {64, 256};
    static const fa4_target auto_t[] = {FA4_TARGET_AUTO};
    static const fa4_mask win[] = {FA4_MASK_WINDOW};
    struct { const char *needle; void (*set)(fa4_workload *); } cases[] = {
        {"workload->qk_depths: [0] = 72", NULL}, {"workload->page_sizes: none given", NULL},
        {"workload->page_sizes: [0] = 48", NULL}, {"workload->sm_counts: [0] = 0", NULL},
        {"workload->targets: [0] = 0", NULL}, {"workload->seqlen_k_min..max: 5..4", NULL},
        {"workload->masks: [0] is FA4_MASK_WINDOW", NULL}, {"workload->size, version", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fa4_workload w = FA4_WORKLOAD_INIT;
        switch (i) {
        case 0: w.qk_depths = bad_depth, w.n_depths = 1; break;
        case 1: w.layouts = FA4_LAYOUT_PAGED; break;
        case 2: w.layouts = FA4_LAYOUT_PAGED, w.page_sizes = page0, w.n_page_sizes = 1; break;
        case 3: w.sm_counts = sm0, w.n_sm_counts = 1; break;
        case 4: w.targets = auto_t, w.n_targets = 1; break;
        case 5: w.seqlen_k_min = 5, w.seqlen_k_max = 4; break;
        case 6: w.masks = win, w.n_masks = 1; break;
        case 7: w.version = 0; break;
        }
        assert_int_equal(fa4_mha_configs_for(ctx, &w, collect, &l), FA4_ERR_INVALID_ARGUMENT);
        if (!strstr(fa4_last_error(ctx), cases[i].needle)) fail_msg("case %zu: %s", i, fa4_last_error(ctx));
    }
    /* d256 on sm100a, and e4m3 on sm90a: notes, not errors; the rest is listed */
    fa4_workload w = FA4_WORKLOAD_INIT;
    static const fa4_dtype dt[] = {FA4_BF16, FA4_E4M3};
    w.qk_depths = d256, w.n_depths = 2, w.dtypes = dt, w.n_dtypes = 2, w.seqlen_q_max = 4096, w.seqlen_k_max = 4096;
    w.seqlen_q_min = w.seqlen_k_min = 1;
    assert_int_equal(fa4_mha_configs_for(ctx, &w, collect, &l), FA4_OK);
    assert_true(l.n > 0);
    int n256 = 0, e4m3 = 0;
    for (int i = 0; i < l.n; i++) {
        n256 += strstr(l.config[i], "target=sm100a") && strstr(l.config[i], "qk=256");
        e4m3 += strstr(l.config[i], "target=sm90a") && strstr(l.config[i], "dtype=e4m3");
    }
    assert_int_equal(n256 + e4m3, 0);
    assert_int_equal(l.n_notes, 2); /* one per (target, reason), each counting its classes */
    listed_free(&l);
    /* a window: one class per (left, right) pair, named in the config */
    static const int wins[] = {128, 0, 64, 64};
    static const fa4_mask mw[] = {FA4_MASK_WINDOW};
    w = (fa4_workload)FA4_WORKLOAD_INIT;
    w.masks = mw, w.n_masks = 1, w.windows = wins, w.n_windows = 4, w.seqlen_k_max = w.seqlen_q_max = 512;
    w.seqlen_k_min = w.seqlen_q_min = 1;
    assert_int_equal(fa4_mha_configs_for(ctx, &w, collect, &l), FA4_OK);
    int w1 = 0, w2 = 0;
    for (int i = 0; i < l.n; i++) w1 += strstr(l.config[i], "mask=window:128,0") != NULL, w2 += strstr(l.config[i], "mask=window:64,64") != NULL;
    assert_true(w1 > 0 && w2 > 0);
    listed_free(&l);
    fa4_destroy(ctx);
}

/* An sm90a workload at 132 SMs over one head dim (*d), the groups g[0..n_g), both masks, 1..8 kv heads, batch 1..64
 * and lengths 1..seq_max (the arrays must outlive it). */
static fa4_workload sm90_workload(const int *d, const int *g, int n_g, int seq_max)
{
    static const fa4_target t[] = {FA4_TARGET_SM90A};
    static const int sm[] = {132};
    fa4_workload w = FA4_WORKLOAD_INIT;
    w.targets = t, w.n_targets = 1, w.sm_counts = sm, w.n_sm_counts = 1, w.qk_depths = d, w.n_depths = 1;
    w.groups = g, w.n_groups = n_g, w.masks = masks, w.n_masks = 2, w.heads_kv_min = 1, w.heads_kv_max = 8;
    w.batch_min = 1, w.batch_max = 64, w.seqlen_q_min = w.seqlen_k_min = 1, w.seqlen_q_max = w.seqlen_k_max = seq_max;
    return w;
}

/* plan note tile order: an sm90a causal call over dense K/V takes the grid whose busiest CTA the kernel's own order
 * counts least (mha_tile_order_load, mha_tile_dispatch_load; H200 runs 45-47 timed them): short ones the persistent
 * walk, or head_major=0 where the stride counts 1% less; long ones a CTA a tile unless a persistent grid counts 1%
 * less. A causal workload lists every grid these rules may pick, so each pick is found. */
static void test_tile_order_rule(void **state)
{
    (void)state;
    fa4_ctx *ctx = jit_off_ctx(90, 132, FA4_TARGET_SM90A);
    static const struct { Call c; const char *want, *unwant; double walk, l2; } cases[] = {
        {{128, 1, 16, 4, 1792, 1792, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, " head_major=0 ", NULL, 1.48, 1.30}, /* +12.7% */
        {{128, 1, 16, 4, 896, 896, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, " head_major=0 ", NULL, 1.70, 1.51},   /* +11.4% */
        {{128, 1, 16, 8, 2048, 2048, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, " persistent=1 ", "head_major", 1.03, 1.17},
        {{128, 1, 16, 64, 256, 256, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, " persistent=1 ", "head_major", 1.03, 1.13},
        {{128, 1, 16, 4, 1792, 1792, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, "head_major", 0, 0}, /* full: no rule */
        {{256, 1, 16, 2, 4096, 4096, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, " persistent=1 ", "head_major", 1.03, 1.25},
        {{128, 1, 16, 2, 8192, 8192, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, " persistent=1 ", "head_major", 1.03, 1.20},
        /* d64 and GQA: dynamic tiles in the L2 groups' order (runs 63-66: +8.5%, +4% over a CTA a tile) */
        {{64, 1, 16, 2, 8192, 8192, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, " head_major=0 dynamic=1 ", NULL, 0, 0},
        {{128, 4, 8, 2, 8192, 8192, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, " head_major=0 dynamic=1 ", NULL, 0, 0},
        {{128, 4, 1, 1, 8192, 8192, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, " persistent=0 ", "dynamic", 0, 0}, /* 64 tiles */
        {{128, 1, 1, 1, 4096, 4096, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, " persistent=0 ", NULL, 0, 0},  /* 32 tiles */
    };
    static const int dd[] = {64, 128, 256}, g[] = {1, 4};
    Listed l[3] = {{0}};
    for (int i = 0; i < 3; i++) {
        fa4_workload w = sm90_workload(&dd[i], g, 2, 8192);
        w.heads_kv_max = 16;
        enumerate(ctx, &w, &l[i]);
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const Call *c = &cases[i].c;
        char cfg[512], what[200];
        want_listed(ctx, &l[c->d == 64 ? 0 : c->d == 128 ? 1 : 2], c, "", cfg, sizeof cfg);
        say_call(c, what, sizeof what);
        if ((cases[i].want && !strstr(cfg, cases[i].want)) || (cases[i].unwant && strstr(cfg, cases[i].unwant)))
            fail_msg("%s: %s", what, cfg);
        if (cases[i].walk == 0) continue;
        Config f;
        char err[256];
        config_init(&f);
        f.kind = KIND_MHA, f.target = TARGET_SM90A, f.dtype = DT_BF16, f.qk_depth = f.ov_depth = c->d;
        f.bm = 128, f.bn = c->d == 256 ? 64 : 128, f.mask = MASK_CAUSAL, f.persistent = 1;
        assert_int_equal(config_fill_defaults(&f, err, sizeof err), 0);
        double walk = mha_tile_order_load(&f, TILE_FIT, c->b, c->h, c->sq, c->sk, 132);
        double l2 = mha_tile_order_load(&f, TILE_L2_GROUPS, c->b, c->h, c->sq, c->sk, 132);
        if (fabs(walk - cases[i].walk) > 0.01 || fabs(l2 - cases[i].l2) > 0.01)
            fail_msg("%s: counted walk %.3f, L2 groups %.3f; want %.2f, %.2f", what, walk, l2, cases[i].walk,
                     cases[i].l2);
    }
    /* a grid past the count's bounds is not counted: 4294901761 x 67109888 heads x 64 m-blocks wraps 2^64 to
     * 65536 tiles, which a product checked alone would let through into a 2^58-unit loop */
    Config f;
    char err[256];
    config_init(&f);
    f.kind = KIND_MHA, f.target = TARGET_SM90A, f.dtype = DT_BF16, f.qk_depth = f.ov_depth = 128;
    f.bm = f.bn = 128, f.mask = MASK_CAUSAL, f.persistent = 1;
    assert_int_equal(config_fill_defaults(&f, err, sizeof err), 0);
    assert_true(mha_tile_order_load(&f, TILE_FIT, 4294901761u, 67109888u, 8192, 8192, 132) == 0);
    assert_true(mha_tile_dispatch_load(&f, 4294901761u, 67109888u, 8192, 8192, 132) == 0);
    assert_true(mha_tile_order_load(&f, TILE_FIT, 1, 16, 128 * 65, 8192, 132) == 0); /* 65 m-blocks a head */
    /* a config without its defaults (group 0: a group of no heads would never advance) counts nothing, at once */
    Config raw = f;
    raw.group = 0;
    assert_true(mha_tile_order_load(&raw, TILE_FIT, 4, 16, 1024, 1024, 132) == 0);
    raw = f, raw.bn = 0;
    assert_true(mha_tile_dispatch_load(&raw, 4, 16, 1024, 1024, 132) == 0);
    for (int i = 0; i < 3; i++) listed_free(&l[i]);
    fa4_destroy(ctx);
}

/* Short d256 (sm90a, dense): the runtime's bn 48 up to RT_SHORT_D256_Q_ROWS query rows (bn 32 over RT_D256_FINE_K_LO
 * to RT_D256_FINE_K keys without a mask or GQA: test_short_d256_fine); the walk cuts the query lengths at the first
 * and the kv lengths at the others, so every call of a d256 workload finds its config in the list on each side. */
static void test_short_d256_cut(void **state)
{
    (void)state;
    fa4_ctx *ctx = jit_off_ctx(90, 132, FA4_TARGET_SM90A);
    static const int d[] = {256}, g[] = {1, 4};
    static const int lens[] = {1, 64, 100, 192, 193, 224, 255, 256, 257, 511, 512, 513, 1000, 2048, 2049, 4096};
    fa4_workload w = sm90_workload(d, g, 2, 4096);
    Listed l = {0};
    enumerate(ctx, &w, &l);
    int calls = 0, short48 = 0;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        for (size_t j = 0; j < sizeof lens / sizeof lens[0]; j++)
            for (int k = 0; k < 8; k++) {
                Call c = {256, g[k & 1], k & 2 ? 8 : 1, k & 4 ? 64 : 2, lens[i], lens[j], L_DENSE, 0, 0, masks[k >> 1 & 1]};
                char cfg[512];
                want_listed(ctx, &l, &c, "", cfg, sizeof cfg);
                calls++, short48 += strstr(cfg, " bn=48 ") != NULL;
            }
    assert_true(short48 > 0 && short48 < calls);
    Call at = {256, 1, 8, 64, 512, 512, L_DENSE, 0, 0, FA4_MASK_NONE}, past = at;
    past.sq = 513;
    fa4_mha_args a = call_args(&at), b = call_args(&past);
    char c1[512], c2[512];
    assert_int_equal(fa4_mha_config(ctx, &a, c1, sizeof c1), FA4_OK);
    assert_int_equal(fa4_mha_config(ctx, &b, c2, sizeof c2), FA4_OK);
    if (!strstr(c1, " bn=48 ") || strstr(c2, " bn=48 ")) fail_msg("512 rows: %s; 513 rows: %s", c1, c2);
    print_message("    d256: %d calls, %d with bn 48, all listed (%d configs)\n", calls, short48, l.n);
    listed_free(&l);
    fa4_destroy(ctx);
}

/* Short d64 (sm90a, dense, no GQA): up to RT_DECODE_TILE_ROWS query rows the runtime's 64-row tile runs two CTAs an SM
 * (occupancy=2); past it 128-row tiles, one CTA; a GQA call of the same length is a decode shape and keeps its tile;
 * a caller's occupancy=1 stays. */
static void test_short_d64_occupancy(void **state)
{
    (void)state;
    fa4_ctx *ctx = jit_off_ctx(90, 132, FA4_TARGET_SM90A);
    static const struct { int group, sq; const char *config; int occ2; } cases[] = {
        {1, 64, NULL, 1}, {1, 1, NULL, 1}, {1, 65, NULL, 0}, {4, 64, NULL, 0}, {1, 64, "occupancy=1", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int m = 0; m < 2; m++) {
            Call c = {64, cases[i].group, 8, 64, cases[i].sq, cases[i].sq, L_DENSE, 0, 0, masks[m]};
            fa4_mha_args a = call_args(&c);
            a.config = cases[i].config;
            char cfg[512] = "";
            assert_int_equal(fa4_mha_config(ctx, &a, cfg, sizeof cfg), FA4_OK);
            if ((strstr(cfg, " occupancy=2 ") != NULL) != cases[i].occ2 ||
                (cases[i].occ2 && !strstr(cfg, " bm=64 bn=64 ")))
                fail_msg("group %d, %d rows, config %s: %s", cases[i].group, cases[i].sq,
                         cases[i].config ? cases[i].config : "-", cfg);
        }
    fa4_destroy(ctx);
}

/* Short d64 over dense K/V (sm90a, no GQA, 65..256 query rows, causal up to 1024): the 128-row tile's kv block is
 * the one of least padding up to RT_SHORT_PAD_K keys (77 keys: 80; 197: 112; 240: 80), 128 past it; the walk cuts
 * the kv lengths where that block changes, so every call of a d64 workload finds its config listed. */
static void test_short_d64_pad(void **state)
{
    (void)state;
    fa4_ctx *ctx = jit_off_ctx(90, 132, FA4_TARGET_SM90A);
    static const int d[] = {64}, g[] = {1};
    static const int ks[] = {1, 50, 64, 65, 77, 80, 81, 97, 128, 129, 160, 161, 197, 224, 225, 240, 241, 256, 257, 600};
    static const int qs[] = {65, 100, 256, 257};
    fa4_workload w = sm90_workload(d, g, 1, 1024);
    Listed l = {0};
    enumerate(ctx, &w, &l);
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        for (size_t j = 0; j < sizeof qs / sizeof qs[0]; j++)
            for (int m = 0; m < 2; m++) {
                Call c = {64, 1, 8, 4, qs[j], ks[i], L_DENSE, 0, 0, masks[m]};
                char cfg[512], what[200], want[16];
                want_listed(ctx, &l, &c, "", cfg, sizeof cfg);
                say_call(&c, what, sizeof what);
                int short_tile = qs[j] <= 256 || masks[m] == FA4_MASK_CAUSAL; /* causal: up to 1024 rows */
                int bn = short_tile && ks[i] <= 256 ? rt_least_pad_bn(ks[i]) : 128;
                snprintf(want, sizeof want, " bn=%d ", bn);
                if (!strstr(cfg, want)) fail_msg("%s: %s, want bn %d", what, cfg, bn);
            }
    assert_int_equal(rt_least_pad_bn(77), 80);
    assert_int_equal(rt_least_pad_bn(197), 112);
    assert_int_equal(rt_least_pad_bn(240), 80);
    assert_int_equal(rt_least_pad_bn(256), 128);
    print_message("    d64: %d configs listed\n", l.n);
    listed_free(&l);
    fa4_destroy(ctx);
}

/* Small grids (runtime/mha_pick.c small_grid_tile): a dense call of at most 2048 keys whose 128-row tiles (GQA packed:
 * a kv head's query rows) fill at most half the SMs runs 64-row tiles (d256: 64-key blocks), unless the caller's
 * config names bm, a workspace or a split count is given, or the layout is varlen or paged; a workload lists both. */
/* The config the rules pick for call c with the caller's tuning words (NULL: none) into cfg, the call in words
 * into what (for messages). */
static void config_of(fa4_ctx *ctx, const Call *c, const char *words, char *cfg, size_t n, char *what, size_t wn)
{
    fa4_mha_args a = call_args(c);
    a.config = words;
    cfg[0] = 0;
    assert_int_equal(fa4_mha_config(ctx, &a, cfg, n), FA4_OK);
    say_call(c, what, wn);
}

/* Short d256 without a mask or GQA over dense K/V (runtime/mha_pick.c short_d256_tile; H200 run 79): more than
 * RT_D256_FINE_K_LO and at most RT_D256_FINE_K keys take 32-key blocks in 3 stages, other short d256 calls 48-key
 * blocks, a small grid 64-row tiles with 64-key blocks in the plan's stages; a caller's bn or stages wins. (That a
 * d256 workload lists each of these: test_short_d256_cut.) */
static void test_short_d256_fine(void **state)
{
    (void)state;
    fa4_ctx *ctx = jit_off_ctx(90, 132, FA4_TARGET_SM90A);
    static const struct { Call c; const char *config, *want; } cases[] = {
        {{256, 1, 8, 64, 256, 256, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, " bn=32 group=1 stages=3 "},
        {{256, 1, 8, 64, 200, 193, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, " bn=32 group=1 stages=3 "},
        {{256, 1, 8, 64, 256, 192, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, " bn=48 group=1 stages=2 "},
        {{256, 1, 8, 64, 256, 257, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, " bn=48 group=1 stages=2 "},
        {{256, 1, 8, 64, 256, 256, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL, " bn=48 group=1 stages=2 "},
        {{256, 4, 2, 64, 256, 256, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, " bn=48 group=4 stages=2 "},  /* GQA */
        {{256, 1, 8, 64, 256, 256, L_DENSE, 0, 0, FA4_MASK_NONE}, "stages=2", " bn=48 group=1 stages=2 "},
        {{256, 1, 8, 64, 256, 256, L_DENSE, 0, 0, FA4_MASK_NONE}, "bn=64", " bn=64 group=1 stages=2 "},
        {{256, 1, 4, 2, 256, 256, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, " bm=64 bn=64 group=1 stages=2 "}, /* small */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cfg[512], what[200];
        config_of(ctx, &cases[i].c, cases[i].config, cfg, sizeof cfg, what, sizeof what);
        if (!strstr(cfg, cases[i].want))
            fail_msg("%s (config %s): %s, want%s", what, cases[i].config ? cases[i].config : "-", cfg, cases[i].want);
    }
    fa4_destroy(ctx);
}

/* Call c's pick is a dynamic config (naming `word` too, when given) that workload w lists; what the call runs
 * without a tile counter (a capture before any eager call: the fake's streams capture) is its static twin, and with
 * one the pick: each kernel is one the workload listed. */
static void counter_fallback(const fa4_workload *w, const Call *c, const char *word)
{
    fa4_ctx *ctx = jit_off_ctx(90, 132, FA4_TARGET_SM90A);
    Listed l = {0};
    enumerate(ctx, w, &l);
    char cfg[512];
    want_listed(ctx, &l, c, "", cfg, sizeof cfg);
    assert_non_null(strstr(cfg, " dynamic=1 "));
    if (word && !strstr(cfg, word)) fail_msg("%s: no%s", cfg, word);
    fa4_destroy(ctx);
    assert_int_equal(fa4_create(&ctx, NULL), FA4_OK);
    fa4_mha_args a = call_args(c);
    for (int eager = 0; eager < 2; eager++) {
        fake_reset();
        fk->capturing = !eager;
        if (fa4_mha_fwd(ctx, &a, (void *)(uintptr_t)0x1000)) fail_msg("fa4_mha_fwd: %s", fa4_last_error(ctx));
        assert_int_equal(fk->n_launches, 1);
        int found = 0;
        for (int i = 0; i < l.n && !found; i++) {
            Config k;
            char err[256], sym[64];
            if (config_parse_canonical(l.config[i], &k, err, sizeof err) || config_fill_defaults(&k, err, sizeof err))
                fail_msg("'%s': %s", l.config[i], err);
            config_symbol(&k, sym, sizeof sym);
            found = !strcmp(sym, fk->launches[0].kernel) && (k.dynamic > 0) == eager &&
                    (!word || (k.claim > 1) == eager);
        }
        if (!found) fail_msg("%s: the kernel launched %s is not among the %d listed", eager ? "eager" : "capturing",
                             fk->launches[0].kernel, l.n);
    }
    listed_free(&l);
    fa4_destroy(ctx);
}

/* Dynamic tiles (runtime/mha_pick.c dynamic_tiles; H200 runs 63-72): the rule's picks by shape, and a workload lists
 * each pick and its dynamic=0 twin (what a call without a tile counter runs), so an AOT bundle has both;
 * claim_runs' claim=2 on d128 MHA heads of two m-blocks (H200 run 92), dropped with the counter. */
static void test_dynamic_rule(void **state)
{
    (void)state;
    fa4_ctx *ctx = jit_off_ctx(90, 132, FA4_TARGET_SM90A);
    static const struct { Call c; const char *config; int dyn, hm0, claim2; } cases[] = {
        {{128, 1, 16, 8, 1024, 1024, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 1, 0, 0},    /* 1024 tiles */
        {{256, 1, 8, 64, 256, 256, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 1, 0, 0},      /* d256 full */
        {{128, 1, 8, 64, 256, 256, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 1, 0, 1},      /* d128 full, two m-blocks */
        {{128, 1, 16, 64, 256, 256, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL, 1, 0, 1},   /* d128 causal, two: head-major */
        {{128, 1, 16, 64, 200, 200, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL, 1, 0, 1},   /* 200 rows: two m-blocks too */
        {{128, 1, 16, 64, 384, 384, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL, 0, 0, 0},   /* three: the walk */
        {{128, 1, 16, 128, 128, 128, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL, 0, 0, 0},  /* one: the walk */
        {{128, 4, 32, 32, 256, 256, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL, 0, 0, 0},   /* GQA causal, two m-blocks */
        {{128, 1, 16, 128, 128, 128, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 1, 0, 0},   /* d128 full, one m-block */
        {{128, 1, 16, 32, 384, 384, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 1, 0, 0},    /* d128 full, three */
        {{64, 1, 16, 16, 1024, 1024, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL, 1, 1, 0},  /* d64 causal: the L2 order */
        {{128, 4, 8, 2, 8192, 8192, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL, 1, 1, 0},   /* GQA causal, long */
        {{64, 1, 16, 64, 256, 256, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL, 0, 0, 0},    /* two m-blocks a head */
        {{256, 1, 16, 16, 512, 512, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL, 1, 0, 0},   /* short d256 causal: walk order */
        {{256, 1, 16, 4, 2048, 2048, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL, 0, 0, 0},  /* longer d256 causal */
        {{128, 1, 16, 16, 1024, 1024, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL, 0, 0, 0}, /* d128 MHA causal: the walk */
        {{128, 4, 8, 32, 256, 256, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 0, 0, 0},      /* GQA full */
        {{64, 1, 16, 16, 1024, 1024, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 0, 0, 0},    /* d64 full */
        {{128, 1, 16, 1, 1024, 1024, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 0, 0, 0},    /* 128 tiles: one wave */
        {{128, 1, 16, 8, 1024, 1024, L_DENSE, 0, 0, FA4_MASK_NONE}, "dynamic=0", 0, 0, 0},
        {{128, 1, 16, 8, 1024, 1024, L_DENSE, 0, 0, FA4_MASK_NONE}, "persistent=0", 0, 0, 0},
        {{128, 1, 16, 8, 1024, 1024, L_VARLEN, 0, 0, FA4_MASK_NONE}, NULL, 0, 0, 0},
        {{128, 1, 16, 8, 1024, 1024, L_PAGED, 0, 0, FA4_MASK_NONE}, NULL, 0, 0, 0},
        /* claims of runs (claim_runs): the caller's claim=1, or dynamic=0, keeps a tile a claim; dynamic=1 given
         * still takes the rule's claim; d256 heads of two m-blocks keep single claims */
        {{128, 1, 16, 64, 256, 256, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, "claim=1", 1, 0, 0},
        {{128, 1, 16, 64, 256, 256, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, "dynamic=0", 0, 0, 0},
        {{128, 1, 8, 64, 256, 256, L_DENSE, 0, 0, FA4_MASK_NONE}, "dynamic=1", 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cfg[512], what[200];
        config_of(ctx, &cases[i].c, cases[i].config, cfg, sizeof cfg, what, sizeof what);
        if ((strstr(cfg, " dynamic=1 ") != NULL) != cases[i].dyn ||
            (cases[i].hm0 && !strstr(cfg, " head_major=0 ")) || (strstr(cfg, " claim=2 ") != NULL) != cases[i].claim2)
            fail_msg("%s (config %s): %s, want dynamic %d%s%s", what, cases[i].config ? cases[i].config : "-", cfg,
                     cases[i].dyn, cases[i].hm0 ? " head_major=0" : "", cases[i].claim2 ? " claim=2" : "");
    }
    fa4_destroy(ctx);
    /* long d64 causal: the twin (a CTA a tile, head_major=0 named) is no other shape's pick, so only the twin rule
     * lists it */
    static const int d64[] = {64}, d128[] = {128}, g1[] = {1};
    fa4_workload w = sm90_workload(d64, g1, 1, 8192);
    w.heads_kv_min = w.heads_kv_max = 16, w.batch_max = 4, w.seqlen_q_min = w.seqlen_k_min = 4096;
    counter_fallback(&w, &(Call){64, 1, 16, 2, 8192, 8192, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL);
    /* a head's two d128 m-blocks in one claim: without a counter the static walk, claim dropped */
    w = sm90_workload(d128, g1, 1, 256);
    w.heads_kv_min = w.heads_kv_max = 16, w.seqlen_q_min = w.seqlen_k_min = 256;
    counter_fallback(&w, &(Call){128, 1, 16, 64, 256, 256, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, " claim=2 ");
}

static void test_small_grid_rule(void **state)
{
    (void)state;
    fa4_ctx *ctx = jit_off_ctx(90, 132, FA4_TARGET_SM90A);
    static const struct { Call c; const char *config; int bm64; } cases[] = {
        {{128, 1, 16, 4, 128, 128, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 1},     /* 64 tiles */
        {{128, 1, 16, 1, 128, 128, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 1},     /* 16 */
        {{128, 1, 11, 3, 256, 256, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL, 1},   /* 66: 132 at bm 64, as many as SMs */
        {{128, 1, 67, 1, 128, 128, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 0},     /* 67: 134 > 132 */
        {{128, 1, 8, 2, 2048, 2048, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL, 0},  /* 256 */
        {{128, 4, 8, 1, 256, 256, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 1},      /* GQA 32/8: 8 x 8 packed tiles */
        {{128, 4, 8, 4, 512, 512, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 0},      /* 4 x 8 x 16 */
        {{64, 1, 8, 2, 512, 512, L_DENSE, 0, 0, FA4_MASK_CAUSAL}, NULL, 1},
        {{256, 1, 16, 1, 512, 512, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 1},
        {{128, 1, 16, 4, 128, 128, L_DENSE, 0, 0, FA4_MASK_NONE}, "bm=128", 0}, /* the caller's tile */
        {{128, 1, 16, 4, 128, 128, L_DENSE, 1, 0, FA4_MASK_NONE}, NULL, 0},     /* a workspace: the split rules' */
        {{128, 1, 16, 4, 128, 128, L_VARLEN, 0, 0, FA4_MASK_NONE}, NULL, 0},
        {{128, 1, 16, 4, 128, 128, L_PAGED, 0, 0, FA4_MASK_NONE}, NULL, 0},
        {{128, 1, 16, 1, 128, 4096, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 0},    /* long keys: not measured */
        {{128, 4, 2, 1, 32, 2048, L_DENSE, 0, 0, FA4_MASK_NONE}, NULL, 0},      /* GQA 4, 128 packed rows: split's */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cfg[512], what[200];
        config_of(ctx, &cases[i].c, cases[i].config, cfg, sizeof cfg, what, sizeof what);
        int bm64 = strstr(cfg, " bm=64 ") != NULL;
        if (bm64 != cases[i].bm64 || (bm64 && cases[i].c.d == 256 && !strstr(cfg, " bn=64 ")))
            fail_msg("%s (config %s): %s, want bm %d", what, cases[i].config ? cases[i].config : "-", cfg,
                     cases[i].bm64 ? 64 : 128);
    }
    /* the split count assumes a workspace; the rule must then see one too, or a caller who sizes the workspace by
     * it finds the call with that workspace split otherwise (H200 run 53, test_mha: B3 H64/8 Sq16 Sk777 causal was
     * given the 3170304 bytes of 64-row tiles and asked for 4755456) */
    {
        Call c = {128, 8, 8, 3, 16, 777, L_DENSE, 0, 0, FA4_MASK_CAUSAL};
        fa4_mha_args a = call_args(&c);
        int n0 = 0, n1 = 0;
        size_t b0 = 0, b1 = 0;
        assert_int_equal(fa4_mha_split_count(ctx, &a, &n0, &b0), FA4_OK);
        a.workspace = (void *)(uintptr_t)MEM_BASE, a.workspace_size = b0;
        assert_int_equal(fa4_mha_split_count(ctx, &a, &n1, &b1), FA4_OK);
        if (n0 != n1 || b0 != b1) fail_msg("split count without a workspace %d (%zu bytes), with one %d (%zu)", n0, b0, n1, b1);
    }
    /* a workload of every size lists both tiles: each call above that its ranges hold finds its config */
    static const int d[] = {128}, g[] = {1, 4};
    fa4_workload w = sm90_workload(d, g, 2, 4096);
    Listed l = {0};
    enumerate(ctx, &w, &l);
    int n64 = 0;
    for (int n = 0; n < l.n; n++) n64 += strstr(l.config[n], " bm=64 ") != NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const Call *c = &cases[i].c;
        if (c->d != 128 || c->layout != L_DENSE || c->ws || cases[i].config || c->h > 8 || c->b > 64) continue;
        char cfg[512];
        want_listed(ctx, &l, c, "", cfg, sizeof cfg);
    }
    if (!n64) fail_msg("the d128 workload lists no 64-row tile");
    print_message("    d128: %d configs listed, %d with 64-row tiles\n", l.n, n64);
    listed_free(&l);
    /* one length, one sequence, every head count, no workspace: the walk witnesses a piece of equal decisions once
     * (its fewest heads, a small grid), so the 128-row tile of many heads is listed only as the rule's twin (with a
     * workspace class beside it, that class's picks would list it by chance) */
    for (int m = 0; m < 2; m++) {
        fa4_workload one = sm90_workload(d, g, 1, 128);
        one.masks = &masks[m], one.n_masks = 1, one.workspace = FA4_WHEN_NEVER;
        one.heads_kv_min = 1, one.heads_kv_max = 128, one.batch_min = one.batch_max = 1;
        one.seqlen_q_min = one.seqlen_k_min = 128;
        Listed lo = {0};
        enumerate(ctx, &one, &lo);
        for (int h = 1; h <= 128; h *= 128) {
            Call c = {128, 1, h, 1, 128, 128, L_DENSE, 0, 0, masks[m]};
            char cfg[512];
            want_listed(ctx, &lo, &c, "B1 S128 workload: ", cfg, sizeof cfg);
        }
        listed_free(&lo);
    }
    fa4_destroy(ctx);
}

/* Random dense calls without a workspace (the small-grid rule's domain) against the list of a workload with none: each
 * finds its config, at every depth and with and without GQA (the review's probe: 39-359 misses in 200-400 calls before
 * the rule's picks were listed beside each witness). */
static void test_small_grid_replay(void **state)
{
    (void)state;
    fa4_ctx *ctx = jit_off_ctx(90, 132, FA4_TARGET_SM90A);
    static const int ds[] = {64, 128, 256}, gs[] = {1, 4};
    unsigned r = 2026u;
    for (int di = 0; di < 3; di++) {
        fa4_workload w = sm90_workload(&ds[di], gs, 2, 2048);
        w.workspace = FA4_WHEN_NEVER;
        Listed l = {0};
        enumerate(ctx, &w, &l);
        for (int i = 0; i < 150; i++) {
            r = r * 1103515245u + 12345u;
            Call c = {ds[di], gs[r >> 9 & 1], 1 + (int)(r >> 10 & 7), 1 + (int)(r >> 13 & 63), 0, 0, L_DENSE, 0, 0,
                      masks[r >> 20 & 1]};
            r = r * 1103515245u + 12345u;
            c.sq = 1 + (int)((r >> 8) % 2048), c.sk = 1 + (int)((r >> 19) % 2048);
            char cfg[512];
            want_listed(ctx, &l, &c, "no workspace: ", cfg, sizeof cfg);
        }
        listed_free(&l);
    }
    fa4_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_saturation), cmocka_unit_test(test_workload_checks),
        cmocka_unit_test(test_replay),           cmocka_unit_test(test_outside_misses),
        cmocka_unit_test(test_compile_from_bundle), cmocka_unit_test(test_short_d256_cut),
        cmocka_unit_test(test_short_d64_occupancy), cmocka_unit_test(test_short_d64_pad),
        cmocka_unit_test(test_short_d256_fine),
        cmocka_unit_test(test_tile_order_rule),  cmocka_unit_test(test_small_grid_rule), cmocka_unit_test(test_dynamic_rule),
        cmocka_unit_test(test_small_grid_replay),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
