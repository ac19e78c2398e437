/* test_bwd.c - the attention backward without a GPU (issue 29): the three kinds' configs (canonical text,
 * defaults, refusals with a sentence), the workspace layout, and fa4_mha_bwd's argument checks, which must
 * all run before the driver is touched (this binary runs with no libcuda). */
#include <math.h>

#include "fa4.h"
#include "fa4gen.h"
#include "mha_bwd.h"
#include "testutil.h"

static char cache_dir[] = "/tmp/fa4bwd.XXXXXX";

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

/* plan text -> 0 and the canonical form, or -1 and the refusal */
static int plan_text(const char *text, char *out, size_t n)
{
    Config c;
    Plan *p = malloc(sizeof *p);
    char err[512];
    assert_non_null(p);
    int rc = config_parse_canonical(text, &c, err, sizeof err);
    if (!rc) rc = plan_make(&c, p, err, sizeof err);
    snprintf(out, n, "%s", rc ? err : p->canonical);
    free(p);
    return rc;
}

static void test_configs(void **state)
{
    (void)state;
    char t[512];
    assert_int_equal(plan_text("mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 mask=causal", t, sizeof t), 0);
    assert_string_equal(t, "mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=128 group=1 stages=2 swizzle=128 "
                           "mask=causal");
    assert_int_equal(plan_text("mha-bwd target=sm90a dtype=fp16 qk=64 ov=64 group=4 varlen=1", t, sizeof t), 0);
    assert_string_equal(t, "mha-bwd target=sm90a dtype=fp16 qk=64 ov=64 bm=128 bn=128 group=4 stages=2 swizzle=128 "
                           "varlen=1 mask=none");
    assert_int_equal(plan_text("mha-bwd-pre target=sm90a dtype=bf16 qk=128 sink=1", t, sizeof t), 0);
    assert_string_equal(t, "mha-bwd-pre target=sm90a dtype=bf16 qk=128 bm=64 sink=1");
    assert_int_equal(plan_text("mha-bwd-dq target=sm90a dtype=bf16 qk=64 varlen=1", t, sizeof t), 0);
    assert_string_equal(t, "mha-bwd-dq target=sm90a dtype=bf16 qk=64 bm=128 bn=128 varlen=1");
    /* d256: the split-depth tile (64 x 64, two consumers), and the dq kernel's split that matches it */
    assert_int_equal(plan_text("mha-bwd target=sm90a dtype=bf16 qk=256 ov=256", t, sizeof t), 0);
    assert_string_equal(t, "mha-bwd target=sm90a dtype=bf16 qk=256 ov=256 bm=64 bn=64 group=1 stages=2 swizzle=128 "
                           "mask=none");
    assert_int_equal(plan_text("mha-bwd-dq target=sm90a dtype=bf16 qk=256", t, sizeof t), 0);
    assert_string_equal(t, "mha-bwd-dq target=sm90a dtype=bf16 qk=256 bm=64 bn=64");
    /* sm100a: the tile of sm90a's d64 / d128 plans (so the workspace is the same), and the pre / dq kernels */
    assert_int_equal(plan_text("mha-bwd target=sm100a dtype=bf16 qk=128 ov=128 mask=causal", t, sizeof t), 0);
    assert_string_equal(t, "mha-bwd target=sm100a dtype=bf16 qk=128 ov=128 bm=64 bn=128 group=1 stages=2 swizzle=128 "
                           "mask=causal");
    assert_int_equal(plan_text("mha-bwd target=sm100a dtype=fp16 qk=64 ov=64 group=4 varlen=1", t, sizeof t), 0);
    assert_string_equal(t, "mha-bwd target=sm100a dtype=fp16 qk=64 ov=64 bm=128 bn=128 group=4 stages=2 swizzle=128 "
                           "varlen=1 mask=none");
    assert_int_equal(plan_text("mha-bwd-pre target=sm100a dtype=bf16 qk=128 sink=1", t, sizeof t), 0);
    assert_int_equal(plan_text("mha-bwd-dq target=sm100a dtype=bf16 qk=64 varlen=1", t, sizeof t), 0);
    int tm = 0, tn = 0, dq_n = 0;
    assert_int_equal(bwd_dq_split(64, 64, 256, &tm, &tn, &dq_n), 0);
    assert_int_equal(tm, 1), assert_int_equal(tn, 2), assert_int_equal(dq_n, 128);
    /* deterministic=1: the main kernel and the pre kernel (it zeroes the turn counters) take it */
    assert_int_equal(plan_text("mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 mask=causal deterministic=1", t, sizeof t), 0);
    assert_non_null(strstr(t, "deterministic=1"));
    assert_int_equal(plan_text("mha-bwd target=sm90a dtype=bf16 qk=256 ov=256 deterministic=1", t, sizeof t), 0);
    assert_int_equal(plan_text("mha-bwd target=sm100a dtype=bf16 qk=128 ov=128 group=2 deterministic=1", t, sizeof t), 0);
    assert_non_null(strstr(t, "deterministic=1"));
    assert_int_equal(plan_text("mha-bwd-pre target=sm90a dtype=bf16 qk=128 deterministic=1", t, sizeof t), 0);
    assert_non_null(strstr(t, "deterministic=1"));
    Config mc, pc;
    config_init(&mc);
    mc.kind = KIND_MHA_BWD, mc.deterministic = 1, mc.qk_depth = mc.ov_depth = 128, mc.bm = 64, mc.bn = 128;
    bwd_aux_config(&mc, KIND_MHA_BWD_PRE, 0, &pc);
    assert_int_equal(pc.deterministic, 1);
    bwd_aux_config(&mc, KIND_MHA_BWD_DQ, 0, &pc);
    assert_int_equal(pc.deterministic, 0);
    /* a forward kernel's text is unchanged by the new kinds' words */
    assert_int_equal(plan_text("mha target=sm90a dtype=bf16 qk=128 ov=128 mask=causal", t, sizeof t), 0);
    assert_null(strstr(t, "deterministic"));
    static const struct { const char *text, *needle; } refused[] = {
        {"mha-bwd target=sm90a dtype=bf16 qk=192 ov=192", "depth: 192"},
        {"mha-bwd target=sm90a dtype=bf16 qk=256 ov=256 bn=128", "bn: 128"},
        {"mha-bwd target=sm90a dtype=bf16 qk=256 ov=256 bm=128", "bm: 128"},
        {"mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 bm=128", "bm: 128"},
        {"mha-bwd target=sm90a dtype=e4m3 qk=128 ov=128", "dtype: e4m3"},
        {"mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 mod=0123456789abcdef", "no derivative"},
        {"mha-bwd-dq target=sm90a dtype=bf16 qk=128 deterministic=1", "mha-bwd-dq: it takes only"},
        {"mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 deterministic=2", "deterministic"},
        {"mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 sink=1", "sink"},
        {"mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 bn=64", "bn: 64"},
        {"mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 pingpong=1", "forward words"},
        {"mha-bwd target=sm100a dtype=bf16 qk=256 ov=256", "depth: 256"},
        {"mha-bwd target=sm100a dtype=bf16 qk=128 ov=128 bm=128", "512 TMEM columns"},
        {"mha-bwd target=sm100a dtype=bf16 qk=64 ov=64 bm=64", "bm: 64"},
        {"mha-bwd target=sm100a dtype=bf16 qk=128 ov=128 bn=64", "bn: 64"},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 deterministic=1", "deterministic"},
        {"mha-bwd-pre target=sm90a dtype=bf16 qk=128 mask=causal", "mha-bwd-pre: it takes only"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        if (plan_text(refused[i].text, t, sizeof t) == 0 || !strstr(t, refused[i].needle))
            fail_msg("'%s' gave '%s' (wanted a refusal naming '%s')", refused[i].text, t, refused[i].needle);
    }
}

/* tail_split: the plan words and refusals, and the runtime's split (bwd_tail_pick) on the H200's 132 SMs. */
static void test_tail_split(void **state)
{
    (void)state;
    char t[512];
    assert_int_equal(plan_text("mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 tail_split=1", t, sizeof t), 0);
    assert_non_null(strstr(t, "tail_split=1"));
    assert_int_equal(plan_text("mha-bwd-pre target=sm90a dtype=bf16 qk=128 tail_split=1", t, sizeof t), 0);
    assert_non_null(strstr(t, "tail_split=1"));
    Config mc, pc;
    config_init(&mc);
    mc.kind = KIND_MHA_BWD, mc.tail_split = 1, mc.qk_depth = mc.ov_depth = 128, mc.bm = 64, mc.bn = 128;
    bwd_aux_config(&mc, KIND_MHA_BWD_PRE, 0, &pc);
    assert_int_equal(pc.tail_split, 1);
    bwd_aux_config(&mc, KIND_MHA_BWD_DQ, 0, &pc);
    assert_int_equal(pc.tail_split, 0);
    static const struct { const char *text, *needle; } refused[] = {
        {"mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 tail_split=1 deterministic=1", "tail_split: 1"},
        {"mha-bwd target=sm90a dtype=bf16 qk=256 ov=256 tail_split=1", "depth > 128"},
        {"mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 tail_split=1 varlen=1", "varlen=1"},
        {"mha-bwd target=sm100a dtype=bf16 qk=128 ov=128 tail_split=1", "sm100a"},
        {"mha-bwd-dq target=sm90a dtype=bf16 qk=128 tail_split=1", "tail_split: 1 is not allowed for mha-bwd-dq"},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 tail_split=1", "tail_split"},
        {"mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 tail_split=2", "tail_split"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        if (plan_text(refused[i].text, t, sizeof t) == 0 || !strstr(t, refused[i].needle))
            fail_msg("'%s' gave '%s' (wanted a refusal naming '%s')", refused[i].text, t, refused[i].needle);
    }
    /* B2 H16 S8192 d128: 2048 tiles of 128 iterations, 15.5 waves; the last 68 tiles in 5 parts (3 rounds of 32
     * iterations instead of one of 128): 1980 + 340 CTAs, 68 slots of 128 KB + 16 */
    BwdTail tl = bwd_tail_pick(2048, 132, 128, 128, 128);
    assert_int_equal(tl.parts, 5), assert_int_equal(tl.first, 1980), assert_int_equal(tl.tiles, 68);
    assert_int_equal(tl.grid, 2320), assert_int_equal(tl.bytes, 68 * (131072 + 16));
    /* none: short tiles (S1024: 16 iterations), a whole number of waves, fewer tiles than SMs */
    assert_int_equal(bwd_tail_pick(2048, 132, 16, 128, 128).parts, 0);
    assert_int_equal(bwd_tail_pick(264, 132, 128, 128, 128).parts, 0);
    assert_int_equal(bwd_tail_pick(100, 132, 128, 128, 128).parts, 0);
    assert_int_equal(bwd_tail_pick(100, 132, 128, 128, 128).grid, 100);
    /* a last wave nearly full: splitting gains under 1% */
    assert_int_equal(bwd_tail_pick(2 * 132 + 131, 132, 128, 128, 128).parts, 0);
    /* a nearly empty last wave: its 4 tiles in 8 parts share the SMs */
    tl = bwd_tail_pick(3 * 132 + 4, 132, 128, 128, 128);
    assert_int_equal(tl.parts, 8), assert_int_equal(tl.first, 396), assert_int_equal(tl.grid, 396 + 32);
}

/* The dQ block's split index (row part + column part) is the documented layout, a bijection onto the block. */
static void test_dq_parts(void **state)
{
    (void)state;
    static const int shapes[][3] = {{128, 128, 64}, {64, 128, 128}, {64, 128, 64}, {64, 64, 256}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int bm = shapes[s][0], bn = shapes[s][1], d = shapes[s][2], tm, tn, dq_n;
        assert_int_equal(bwd_dq_split(bm, bn, d, &tm, &tn, &dq_n), 0);
        unsigned char *seen = calloc((size_t)(bm * d), 1);
        assert_non_null(seen);
        for (int r = 0; r < bm; r++)
            for (int c = 0; c < d; c++) {
                uint32_t i = bwd_dq_row_part(bm, bn, d, r) + bwd_dq_col_part(bm, bn, d, c);
                /* mha_bwd.h: tile (r / 64, c / dq_n) of warpgroup w = tm_i + tiles_m tn_i; register x = 4j + k of
                 * thread t sits at float ((w dq_n / 8 + j) 128 + t) 4 + k */
                int rr = r % 64, cc = c % dq_n, w = r / 64 + tm * (c / dq_n);
                int thr = 16 * 2 * (rr / 16) + 4 * (rr % 8) + (cc % 8) / 2, reg = 4 * (cc / 8) + 2 * ((rr / 8) % 2) + cc % 2;
                uint32_t want = (uint32_t)(((w * dq_n / 8 + reg / 4) * 128 + thr) * 4 + reg % 4);
                if (i != want || i >= (uint32_t)(bm * d) || seen[i]++)
                    fail_msg("bm %d bn %d d %d: (%d, %d) -> %u, layout %u", bm, bn, d, r, c, i, want);
            }
        free(seen);
    }
}

static void test_workspace_layout(void **state)
{
    (void)state;
    /* dense: q_rows = m_blocks bm; parts 16-byte aligned, in order */
    BwdWorkspace w = bwd_workspace(0, 2, 16, 8192, 8192, 128, 64, 0, 0, 0);
    assert_int_equal(w.m_blocks, 128);
    assert_int_equal(w.q_rows, 8192);
    assert_int_equal(w.dpsum, 2ull * 16 * 8192 * 128 * 4);
    assert_int_equal(w.nlse2, w.dpsum + 2ull * 16 * 8192 * 4);
    assert_int_equal(w.bytes, w.nlse2 + 2ull * 16 * 8192 * 4);
    assert_int_equal(w.stats_bytes, 2 * 2ull * 16 * 8192 * 4);
    /* D and nl2 in dq: at its start, the workspace the accumulator alone */
    BwdWorkspace s = bwd_workspace(0, 2, 16, 8192, 8192, 128, 64, 0, 1, 0);
    assert_true(s.stats_in_dq && s.dpsum == 0 && s.nlse2 == 2ull * 16 * 8192 * 4);
    assert_int_equal(s.bytes, 2ull * 16 * 8192 * 128 * 4);
    assert_int_equal(s.bytes + s.stats_bytes, w.bytes);
    /* a tail block and a sink */
    w = bwd_workspace(0, 1, 3, 100, 100, 64, 128, 1, 0, 0);
    assert_int_equal(w.q_rows, 128);
    assert_true(w.sink_part % 16 == 0 && w.bytes >= w.sink_part + 3 * 4);
    s = bwd_workspace(0, 1, 3, 100, 100, 64, 128, 1, 1, 0);
    assert_true(s.sink_part == 3ull * 128 * 64 * 4 && s.bytes == w.bytes - w.stats_bytes);
    /* varlen: FlashAttention-3's padding, round_up(total + batch bm, bm) */
    w = bwd_workspace(1, 3, 2, 1000, 700, 128, 64, 0, 0, 0);
    assert_int_equal(w.q_rows, (1000 + 3 * 64 + 63) / 64 * 64);
    assert_int_equal(w.m_blocks, (700 + 63) / 64);
    /* deterministic: one u32 turn counter per dQ block of the workspace, after the rest */
    BwdWorkspace wd = bwd_workspace(1, 3, 2, 1000, 700, 128, 64, 0, 0, 1);
    assert_int_equal(wd.dq_sem, w.bytes);
    assert_int_equal(wd.bytes, w.bytes + (2 * w.q_rows / 64 * 4 + 15) / 16 * 16);
    /* the dQ block's split between the consumers */
    int tm, tn, n;
    assert_int_equal(bwd_dq_split(64, 128, 128, &tm, &tn, &n), 0);
    assert_true(tm == 1 && tn == 2 && n == 64);
    assert_int_equal(bwd_dq_split(128, 128, 64, &tm, &tn, &n), 0);
    assert_true(tm == 2 && tn == 1 && n == 64);
    assert_int_equal(bwd_dq_split(128, 64, 64, &tm, &tn, &n), -1);
}

static fa4_ctx *make_ctx(fa4_target t)
{
    fa4_options o = FA4_OPTIONS_INIT;
    o.target = t;
    fa4_ctx *ctx = NULL;
    assert_int_equal(fa4_create(&ctx, &o), FA4_OK);
    return ctx;
}

#define P(x) ((void *)(uintptr_t)(x))
static fa4_mha_bwd_args good_args(void)
{
    fa4_mha_bwd_args a = FA4_MHA_BWD_ARGS_INIT;
    a.q = P(0x100000), a.k = P(0x200000), a.v = P(0x300000), a.o = P(0x400000), a.dout = P(0x500000);
    a.lse = P(0x600000), a.dq = P(0x700000), a.dk = P(0x800000), a.dv = P(0x900000);
    a.batch = 2, a.seqlen_q = 300, a.seqlen_k = 500, a.heads_q = 8, a.heads_kv = 2, a.qk_depth = a.ov_depth = 128;
    a.mask = FA4_MASK_CAUSAL;
    a.workspace = P(0x10000000), a.workspace_size = (size_t)1 << 30;
    return a;
}

/* Where D and nl2 live: dq's own memory when dq is dense, large enough, not varlen and overlaps nothing; else
 * the workspace. A launch checks its workspace against that before the driver. */
static void test_stats_in_dq(void **state)
{
    (void)state;
    fa4_ctx *ctx = make_ctx(FA4_TARGET_SM90A);
    fa4_mha_bwd_args a = good_args();
    const uintptr_t mb = (uintptr_t)1 << 24; /* 16 MiB apart: the tensors (1.2 MB) overlap nothing */
    a.q = P(1 * mb), a.k = P(2 * mb), a.v = P(3 * mb), a.o = P(4 * mb), a.dout = P(5 * mb), a.lse = P(6 * mb);
    a.dq = P(7 * mb), a.dk = P(8 * mb), a.dv = P(9 * mb), a.workspace = P(16 * mb);
    BwdWorkspace in = bwd_workspace(0, 2, 8, 300, 300, 128, 64, 0, 1, 0);
    BwdWorkspace out = bwd_workspace(0, 2, 8, 300, 300, 128, 64, 0, 0, 0);
    size_t bytes = 0;
    assert_int_equal(fa4_mha_bwd_workspace_size(ctx, &a, &bytes), FA4_OK);
    assert_int_equal(bytes, in.bytes);
    a.workspace_size = in.bytes;
    fa4_status st = fa4_mha_bwd(ctx, &a, NULL);
    assert_true(st == FA4_ERR_NO_DRIVER || st == FA4_ERR_NO_DEVICE || st == FA4_ERR_UNSUPPORTED);
    /* dq overlapping dk, lse or q: the pre kernel would overwrite an input; the workspace holds them */
    void *over[] = {P(8 * mb + 4096), P(6 * mb - 4096), P(1 * mb + 65536)};
    for (int i = 0; i < 3; i++) {
        a.dq = over[i];
        assert_int_equal(fa4_mha_bwd_workspace_size(ctx, &a, &bytes), FA4_OK);
        assert_int_equal(bytes, out.bytes);
        assert_int_equal(fa4_mha_bwd(ctx, &a, NULL), FA4_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(fa4_last_error(ctx), "this dq cannot hold them"));
    }
    a.dq = P(7 * mb);
    /* holes: every other row of a [2, 300, 8, 256] buffer */
    a.dq_stride[0] = 300 * 8 * 256, a.dq_stride[1] = 8 * 256, a.dq_stride[2] = 256;
    assert_int_equal(fa4_mha_bwd_workspace_size(ctx, &a, &bytes), FA4_OK);
    assert_int_equal(bytes, out.bytes);
    /* dense in another order ([S, B, H, D]): it holds them */
    a.dq_stride[0] = 8 * 128, a.dq_stride[1] = 2 * 8 * 128, a.dq_stride[2] = 128;
    assert_int_equal(fa4_mha_bwd_workspace_size(ctx, &a, &bytes), FA4_OK);
    assert_int_equal(bytes, in.bytes);
    /* too small for them: one query row of depth 64 holds 128 bytes, its 64-row block's D and nl2 need 512 */
    a = good_args();
    a.seqlen_q = 1, a.qk_depth = a.ov_depth = 64, a.dq = NULL;
    assert_int_equal(fa4_mha_bwd_workspace_size(ctx, &a, &bytes), FA4_OK);
    assert_int_equal(bytes, bwd_workspace(0, 2, 8, 1, 1, 64, 128, 0, 0, 0).bytes);
    fa4_destroy(ctx);
}

static void b_size(fa4_mha_bwd_args *a) { a->size = 8; }
static void b_dtype(fa4_mha_bwd_args *a) { a->dtype = (fa4_dtype)7; }
static void b_q(fa4_mha_bwd_args *a) { a->q = NULL; }
static void b_dout(fa4_mha_bwd_args *a) { a->dout = NULL; }
static void b_dv(fa4_mha_bwd_args *a) { a->dv = NULL; }
static void b_lse(fa4_mha_bwd_args *a) { a->lse = NULL; }
static void b_batch(fa4_mha_bwd_args *a) { a->batch = 0; }
static void b_heads(fa4_mha_bwd_args *a) { a->heads_kv = 3; }
static void b_align(fa4_mha_bwd_args *a) { a->dk = P(0x800008); }
static void b_stride(fa4_mha_bwd_args *a) { a->do_stride[1] = 1028; }
static void b_negstride(fa4_mha_bwd_args *a) { a->dq_stride[2] = -128; }
static void b_scale(fa4_mha_bwd_args *a) { a->softmax_scale = NAN; }
static void b_mask(fa4_mha_bwd_args *a) { a->mask = (fa4_mask)9; }
static void b_window(fa4_mha_bwd_args *a) { a->mask = FA4_MASK_WINDOW, a->window_left = -5; }
static void b_sink(fa4_mha_bwd_args *a) { a->sink = P(0x1000); }
static void b_ws(fa4_mha_bwd_args *a) { a->workspace = NULL; }
static void b_ws_size(fa4_mha_bwd_args *a) { a->workspace_size = 4096; }
static void b_ws_align(fa4_mha_bwd_args *a) { a->workspace = P(0x10000004); }
static void b_vl_k(fa4_mha_bwd_args *a) { a->cu_seqlens_q = P(0x2000); }
static void b_vl_max(fa4_mha_bwd_args *a) { a->cu_seqlens_q = P(0x2000), a->cu_seqlens_k = P(0x3000), a->batch = 1; }
static void b_config(fa4_mha_bwd_args *a) { a->config = "mask=none"; }
static void b_span(fa4_mha_bwd_args *a) { a->seqlen_k = 1 << 20, a->k_stride[1] = (int64_t)1 << 38; }

static const struct { const char *name, *needle; void (*breakit)(fa4_mha_bwd_args *); } bad_cases[] = {
    {"size", "args->size", b_size}, {"dtype", "dtype", b_dtype}, {"q NULL", "q: NULL", b_q},
    {"dout NULL", "dout: NULL", b_dout}, {"dv NULL", "dv: NULL", b_dv}, {"lse NULL", "lse", b_lse},
    {"batch 0", "batch", b_batch}, {"heads_kv", "heads_kv", b_heads}, {"dk align", "dk", b_align},
    {"do stride", "dout_stride[1]", b_stride}, {"dq stride", "dq_stride[2]", b_negstride},
    {"scale", "softmax_scale", b_scale}, {"mask", "mask", b_mask}, {"window", "window_left", b_window},
    {"sink without dsink", "dsink", b_sink}, {"workspace NULL", "workspace", b_ws},
    {"workspace small", "workspace_size", b_ws_size}, {"workspace align", "workspace", b_ws_align},
    {"cu_seqlens_k missing", "cu_seqlens_k", b_vl_k}, {"max_seqlen_q", "max_seqlen_q", b_vl_max},
    {"config changes mask", "args->config", b_config}, {"span", "spans", b_span},
};

static void test_bad_args(void **state)
{
    (void)state;
    fa4_target targets[2] = {FA4_TARGET_AUTO, FA4_TARGET_SM90A};
    for (int t = 0; t < 2; t++) {
        fa4_ctx *ctx = make_ctx(targets[t]);
        for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
            fa4_mha_bwd_args a = good_args();
            bad_cases[i].breakit(&a);
            fa4_status s = fa4_mha_bwd(ctx, &a, NULL);
            if (s != FA4_ERR_INVALID_ARGUMENT || !strstr(fa4_last_error(ctx), bad_cases[i].needle))
                fail_msg("case %s: status %d, message '%s'", bad_cases[i].name, (int)s, fa4_last_error(ctx));
        }
        assert_int_equal(fa4_mha_bwd(ctx, NULL, NULL), FA4_ERR_INVALID_ARGUMENT);
        fa4_destroy(ctx);
    }
    fa4_mha_bwd_args a = good_args();
    assert_int_equal(fa4_mha_bwd(NULL, &a, NULL), FA4_ERR_INVALID_ARGUMENT);
}

/* What the library cannot do is FA4_ERR_UNSUPPORTED with a sentence: a score_mod (no derivative), d192, e4m3,
 * d256 on sm100a; and good arguments get as far as the driver (absent here), on either target. */
static void test_unsupported_and_driver(void **state)
{
    (void)state;
    fa4_ctx *ctx = make_ctx(FA4_TARGET_SM90A);
    fa4_mha_bwd_args a = good_args();
    a.score_mod = "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux) { return s; }";
    assert_int_equal(fa4_mha_bwd(ctx, &a, NULL), FA4_ERR_UNSUPPORTED);
    assert_non_null(strstr(fa4_last_error(ctx), "no derivative"));
    a = good_args();
    a.qk_depth = a.ov_depth = 192;
    assert_int_equal(fa4_mha_bwd(ctx, &a, NULL), FA4_ERR_UNSUPPORTED);
    a = good_args();
    a.dtype = FA4_E4M3;
    assert_int_equal(fa4_mha_bwd(ctx, &a, NULL), FA4_ERR_UNSUPPORTED);
    a = good_args();
    a.deterministic = 2;
    assert_int_equal(fa4_mha_bwd(ctx, &a, NULL), FA4_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fa4_last_error(ctx), "deterministic"));
    /* deterministic=1 (sm90a): accepted; its workspace has the turn counters; a config may ask for it too */
    a = good_args();
    a.q = a.k = a.dq = NULL; /* no dq pointer: its packed layout holds D and nl2 */
    a.deterministic = 1;
    size_t det_bytes = 0;
    assert_int_equal(fa4_mha_bwd_workspace_size(ctx, &a, &det_bytes), FA4_OK);
    BwdWorkspace wdet = bwd_workspace(0, 2, 8, 300, 300, 128, 64, 0, 1, 1);
    assert_int_equal(det_bytes, wdet.bytes);
    assert_int_equal(wdet.bytes, bwd_workspace(0, 2, 8, 300, 300, 128, 64, 0, 1, 0).bytes + 2 * 8 * 320 / 64 * 4);
    a.deterministic = 0;
    a.config = "deterministic=1";
    size_t cfg_bytes = 0;
    assert_int_equal(fa4_mha_bwd_workspace_size(ctx, &a, &cfg_bytes), FA4_OK);
    assert_int_equal(cfg_bytes, det_bytes);
    a.deterministic = 1;
    a.config = "deterministic=0";
    assert_int_equal(fa4_mha_bwd_workspace_size(ctx, &a, &cfg_bytes), FA4_ERR_INVALID_ARGUMENT);
    /* the workspace size needs no pointer and no driver */
    a = good_args();
    a.q = a.k = a.dq = NULL; /* no dq pointer: its packed layout holds D and nl2 */
    size_t bytes = 0;
    assert_int_equal(fa4_mha_bwd_workspace_size(ctx, &a, &bytes), FA4_OK);
    BwdWorkspace w = bwd_workspace(0, 2, 8, 300, 300, 128, 64, 0, 1, 0);
    assert_int_equal(bytes, w.bytes);
    char cfg[256];
    assert_int_equal(fa4_mha_bwd_config(ctx, &a, cfg, sizeof cfg), FA4_OK);
    assert_non_null(strstr(cfg, "mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=128 group=4"));
    a = good_args();
    fa4_status s = fa4_mha_bwd(ctx, &a, NULL);
    assert_true(s == FA4_ERR_NO_DRIVER || s == FA4_ERR_NO_DEVICE || s == FA4_ERR_UNSUPPORTED);
    fa4_destroy(ctx);
    ctx = make_ctx(FA4_TARGET_SM100A);
    a.qk_depth = a.ov_depth = 256;
    assert_int_equal(fa4_mha_bwd(ctx, &a, NULL), FA4_ERR_UNSUPPORTED);
    assert_non_null(strstr(fa4_last_error(ctx), "sm100a"));
    a = good_args();
    assert_int_equal(fa4_mha_bwd_config(ctx, &a, cfg, sizeof cfg), FA4_OK);
    assert_non_null(strstr(cfg, "mha-bwd target=sm100a dtype=bf16 qk=128 ov=128 bm=64 bn=128 group=4"));
    s = fa4_mha_bwd(ctx, &a, NULL);
    assert_true(s == FA4_ERR_NO_DRIVER || s == FA4_ERR_NO_DEVICE);
    /* the CTA pair (config cta=2): d128 dense reaches the driver, with the word in its config; d64, deterministic
     * and varlen are refused by name */
    a = good_args();
    a.config = "cta=2";
    assert_int_equal(fa4_mha_bwd_config(ctx, &a, cfg, sizeof cfg), FA4_OK);
    assert_non_null(strstr(cfg, "cta=2"));
    s = fa4_mha_bwd(ctx, &a, NULL);
    assert_true(s == FA4_ERR_NO_DRIVER || s == FA4_ERR_NO_DEVICE);
    a.qk_depth = a.ov_depth = 64;
    assert_int_equal(fa4_mha_bwd(ctx, &a, NULL), FA4_ERR_UNSUPPORTED);
    assert_non_null(strstr(fa4_last_error(ctx), "depth 128"));
    a = good_args();
    a.config = "cta=2";
    a.deterministic = 1;
    assert_int_equal(fa4_mha_bwd(ctx, &a, NULL), FA4_ERR_UNSUPPORTED);
    assert_non_null(strstr(fa4_last_error(ctx), "deterministic=1 is not built"));
    fa4_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_configs), cmocka_unit_test(test_dq_parts), cmocka_unit_test(test_workspace_layout), cmocka_unit_test(test_stats_in_dq),
        cmocka_unit_test(test_bad_args), cmocka_unit_test(test_unsupported_and_driver), cmocka_unit_test(test_tail_split),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
