/* test_sm100_desc.c - UMMA descriptors, field by field, against the values
 * CUTLASS's make_umma_desc / make_instr_desc return (the PTX ISA's tcgen05
 * descriptor tables), and round trips over the layouts the sm100a kernels will use. */
#include "testutil.h"

#include "sm100/mla100.h"
#include "sm100/sm100.h"

static void test_smem_reference_values(void **state)
{
    (void)state;
    const struct { Sm100SmemDesc d; uint64_t want; } cases[] = {
        {{0, 16, 1024, 0, 0, SM100_SW_128}, 0x4000404000010000ull},  /* K-major SW128 bf16 */
        {{0, 16, 512, 0, 0, SM100_SW_64}, 0x8000402000010000ull},    /* K-major SW64 */
        {{0, 16, 256, 0, 0, SM100_SW_32}, 0xc000401000010000ull},    /* K-major SW32 */
        {{0, 2048, 128, 0, 0, SM100_SW_NONE}, 0x0000400800800000ull}, /* K-major interleave */
        {{0, 1024, 2048, 0, 0, SM100_SW_128}, 0x4000408000400000ull}, /* MN-major SW128 (128, 64) */
        {{0, 16384, 1024, 0, 0, SM100_SW_128}, 0x4000404004000000ull}, /* MN-major, V as 64 x 128 boxes */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t v = sm100_smem_desc(&cases[i].d);
        if (v != cases[i].want) fail_msg("case %zu: 0x%016llx != 0x%016llx", i, (unsigned long long)v,
                                         (unsigned long long)cases[i].want);
    }
    /* the helper our kernels use builds the same K-major value */
    assert_true(sm100_tile_desc(0, SM100_MAJOR_K, 128, 0) == 0x4000404000010000ull);
    assert_true(sm100_tile_desc(0, SM100_MAJOR_MN, 128, 16384) == 0x4000404004000000ull);
}

static void test_smem_round_trip(void **state)
{
    (void)state;
    static const int sw[] = {32, 64, 128};
    for (int s = 0; s < 3; s++)
        for (int major = 0; major < 2; major++)
            for (uint32_t start = 0; start < 232448; start += 1024 * 7) {
                uint32_t chunk = 128u * (uint32_t)sw[s]; /* 128 rows per chunk */
                uint64_t v = sm100_tile_desc(start, (Sm100Major)major, sw[s], chunk);
                int version;
                Sm100SmemDesc d = sm100_smem_desc_decode(v, &version);
                assert_int_equal(version, 1);
                assert_int_equal(d.start, start);
                assert_int_equal(d.sbo, 8u * (uint32_t)sw[s]);
                assert_int_equal(d.lbo, major ? chunk : 16u);
                assert_int_equal(d.swizzle, sm100_swizzle_mode(sw[s]));
                assert_int_equal(d.base_offset, 0);
                assert_int_equal(d.lbo_mode, 0);
                /* K advance: 32 B per MMA K step adds 2 to the start field and nothing else */
                Sm100SmemDesc k = sm100_smem_desc_decode(v + 2, NULL);
                assert_int_equal(k.start, start + 32);
                assert_int_equal(k.sbo, d.sbo);
            }
}

static void test_instr_reference_values(void **state)
{
    (void)state;
    const struct { Sm100InstrDesc d; uint32_t want; } cases[] = {
        {{128, 128, 1, 1, 1, SM100_MAJOR_K, SM100_MAJOR_K, 0, 0}, 0x08200490u},  /* bf16 M128 N128 */
        {{128, 128, 1, 1, 1, SM100_MAJOR_K, SM100_MAJOR_MN, 0, 0}, 0x08210490u}, /* P.V, V MN-major */
        {{128, 256, 1, 1, 1, SM100_MAJOR_K, SM100_MAJOR_MN, 0, 0}, 0x08410490u},
        {{128, 128, 1, 0, 0, SM100_MAJOR_K, SM100_MAJOR_K, 0, 0}, 0x08200010u},  /* e4m3 */
        {{64, 64, 1, 0, 0, SM100_MAJOR_K, SM100_MAJOR_K, 0, 0}, 0x04100010u},    /* f16 M64 N64 */
        {{256, 256, 1, 1, 1, SM100_MAJOR_K, SM100_MAJOR_K, 0, 0}, 0x10400490u},  /* cta_group::2 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t v = sm100_instr_desc(&cases[i].d);
        if (v != cases[i].want) fail_msg("case %zu: 0x%08x != 0x%08x", i, v, cases[i].want);
    }
    assert_int_equal(sm100_format(DT_BF16), 1);
    assert_int_equal(sm100_format(DT_FP16), 0);
    assert_int_equal(sm100_format(DT_E4M3), 0);
}

static void test_instr_round_trip(void **state)
{
    (void)state;
    static const DType dts[] = {DT_BF16, DT_FP16, DT_E4M3};
    static const int ms[] = {64, 128, 256};
    for (int t = 0; t < 3; t++)
        for (int mi = 0; mi < 3; mi++)
            for (int n = 64; n <= 256; n += 16)
                for (int bmaj = 0; bmaj < 2; bmaj++) {
                    Sm100InstrDesc d = {ms[mi], n, 1, sm100_format(dts[t]), sm100_format(dts[t]), SM100_MAJOR_K,
                                        (Sm100Major)bmaj, 0, 0};
                    Sm100InstrDesc r = sm100_instr_desc_decode(sm100_instr_desc(&d));
                    assert_int_equal(r.m, d.m);
                    assert_int_equal(r.n, d.n);
                    assert_int_equal(r.d_format, 1);
                    assert_int_equal(r.a_format, d.a_format);
                    assert_int_equal(r.b_format, d.b_format);
                    assert_int_equal(r.a_major, SM100_MAJOR_K);
                    assert_int_equal(r.b_major, bmaj);
                    assert_int_equal(r.negate_a | r.negate_b, 0);
                }
}

static void test_mma_shapes(void **state)
{
    (void)state;
    assert_true(sm100_mma_shape_ok(128, 128, 1, 0));
    assert_true(sm100_mma_shape_ok(64, 8, 1, 0));
    assert_true(sm100_mma_shape_ok(128, 24, 1, 0));
    assert_false(sm100_mma_shape_ok(128, 24, 1, 1)); /* TS with M 128 needs N % 16 */
    assert_false(sm100_mma_shape_ok(256, 128, 1, 0)); /* M 256 needs the CTA pair */
    assert_true(sm100_mma_shape_ok(256, 256, 2, 0));
    assert_false(sm100_mma_shape_ok(128, 264, 1, 0));
}

/* ---- every descriptor the sm100a kernels emit, read back from their PTX ---- */

/* The hex operand of the first line containing `pat` (an instruction on a named register). */
static uint32_t ptx_hex(const char *ptx, const char *pat)
{
    const char *l = strstr(ptx, pat);
    if (!l) fail_msg("PTX has no line with '%s'", pat);
    const char *x = strstr(l, "0x");
    const char *eol = strchr(l, '\n');
    if (!x || (eol && x > eol)) fail_msg("line '%s' has no hex operand", pat);
    return (uint32_t)strtoul(x, NULL, 16);
}

/* The immediate of every `add.u32 <dst>, <src>, N;` line, in order. */
static int ptx_steps(const char *ptx, const char *dst_src, uint32_t *out, int max)
{
    int n = 0;
    for (const char *l = strstr(ptx, dst_src); l && n < max; l = strstr(l + 1, dst_src))
        out[n++] = (uint32_t)strtoul(l + strlen(dst_src), NULL, 10);
    return n;
}

static void check_smem_desc(uint64_t v, const Plan *p, Sm100Major major, uint32_t lbo, const char *what)
{
    int version;
    Sm100SmemDesc d = sm100_smem_desc_decode(v, &version);
    if (version != 1) fail_msg("%s: %s desc version %d", p->canonical, what, version);
    if (d.start != 0) fail_msg("%s: %s template start %u (the kernel ORs the address in)", p->canonical, what, d.start);
    if (d.swizzle != sm100_swizzle_mode(p->swizzle_bytes))
        fail_msg("%s: %s swizzle code %d for %d B", p->canonical, what, d.swizzle, p->swizzle_bytes);
    if (d.sbo != 8u * (uint32_t)p->swizzle_bytes) fail_msg("%s: %s SBO %u, want 8 rows of %d B", p->canonical, what,
                                                            d.sbo, p->swizzle_bytes);
    if (d.lbo != lbo) fail_msg("%s: %s LBO %u, want %u (%s-major)", p->canonical, what, d.lbo, lbo,
                               major == SM100_MAJOR_K ? "K" : "MN");
    if (d.base_offset || d.lbo_mode) fail_msg("%s: %s base offset / lbo mode set", p->canonical, what);
}

static void check_instr_desc(uint32_t v, const Plan *p, int n, Sm100Major b_major, const char *what)
{
    Sm100InstrDesc d = sm100_instr_desc_decode(v);
    int fmt = p->cfg.dtype == DT_BF16 ? 1 : 0; /* BF16 1 (kind::f16); F16 0; E4M3 0 (kind::f8f6f4) */
    int m = 128 * sm100_of(p)->cta_pair; /* the pair: one MMA covers 128 rows in each CTA */
    if (d.m != m || d.n != n) fail_msg("%s: %s M %d N %d, want M %d N %d", p->canonical, what, d.m, d.n, m, n);
    if (d.d_format != 1) fail_msg("%s: %s D format %d, want F32", p->canonical, what, d.d_format);
    if (d.a_format != fmt || d.b_format != fmt) fail_msg("%s: %s formats %d/%d, want %d", p->canonical, what,
                                                         d.a_format, d.b_format, fmt);
    if (d.a_major != SM100_MAJOR_K || d.b_major != b_major) fail_msg("%s: %s majors %d/%d", p->canonical, what,
                                                                     d.a_major, d.b_major);
    if (d.negate_a || d.negate_b) fail_msg("%s: %s negates", p->canonical, what);
    if (v & (0x3u << 30 | 1u << 23 | 1u << 29 | 0xFu)) fail_msg("%s: %s reserved/sparse bits set: 0x%08x",
                                                                  p->canonical, what, v);
}

static void check_kernel_descs(const char *text)
{
    Config c;
    char err[512];
    static Plan plan;
    config_init(&c);
    if (config_apply_text(&c, text, err, sizeof err)) fail_msg("config '%s': %s", text, err);
    char *ptx = NULL;
    size_t len;
    if (fa4gen_generate(&c, &plan, &ptx, &len, err, sizeof err)) fail_msg("generate '%s': %s", text, err);
    const Plan *p = &plan;
    const Sm100Plan *s = sm100_of(p);
    int pad_qk = (p->qk + p->chunk_elems - 1) / p->chunk_elems * p->chunk_elems;
    int pad_ov = (p->ov + p->chunk_elems - 1) / p->chunk_elems * p->chunk_elems;
    int cg = s->cta_pair;
    uint32_t vchunk = (uint32_t)p->bn * (uint32_t)p->swizzle_bytes;
    uint32_t kchunk = (uint32_t)(p->bn / cg) * (uint32_t)p->swizzle_bytes; /* the pair: half of K's rows per CTA */

    uint32_t iqk = ptx_hex(ptx, "mov.u32 %mm_idesc_qk,"), ipv = ptx_hex(ptx, "mov.u32 %mm_idesc_pv,");
    check_instr_desc(iqk, p, p->bn, SM100_MAJOR_K, "QK idesc");
    check_instr_desc(ipv, p, pad_ov, SM100_MAJOR_MN, "PV idesc");
    assert_true(sm100_mma_shape_ok(128 * cg, p->bn, cg, 0) && sm100_mma_shape_ok(128 * cg, pad_ov, cg, 1));
    /* every tcgen05 op names the plan's CTA group; the pair's TMA loads complete on the even
     * CTA's barriers (.cta_group::2), a single CTA's never name a group */
    char group[64];
    snprintf(group, sizeof group, "tcgen05.mma.cta_group::%d.", cg);
    if (!strstr(ptx, group)) fail_msg("%s: no '%s' in the PTX", p->canonical, group);
    int loads = 0, pair_loads = 0;
    for (const char *l = strstr(ptx, "cp.async.bulk.tensor.4d."); l; l = strstr(l + 1, "cp.async.bulk.tensor.4d.")) {
        if (strncmp(l + 24, "global.", 7) == 0) continue; /* the O store */
        loads++;
        pair_loads += strncmp(l + 24, "cta_group::2.", 13) == 0;
    }
    if (loads == 0 || pair_loads != (cg == 2 ? loads : 0))
        fail_msg("%s: %d of %d TMA loads are .cta_group::2", p->canonical, pair_loads, loads);
    for (const char *l = strstr(ptx, "tcgen05."); l; l = strstr(l + 1, "tcgen05.")) {
        const char *g = strstr(l, "cta_group::"), *eol = strchr(l, '\n');
        if (g && g < eol && g[11] - '0' != cg) fail_msg("%s: '%.60s' is not cta_group::%d", p->canonical, l, cg);
    }

    uint64_t khi = ptx_hex(ptx, "mov.u32 %mm_khi,"), vhi = ptx_hex(ptx, "mov.u32 %mm_vhi,");
    check_smem_desc(khi << 32 | ptx_hex(ptx, "or.b32 %mm_qlo0, %mm_qlo0,"), p, SM100_MAJOR_K, 16, "Q");
    if (s->qtiles > 1) check_smem_desc(khi << 32 | ptx_hex(ptx, "or.b32 %mm_qlo1, %mm_qlo1,"), p, SM100_MAJOR_K, 16, "Q1");
    check_smem_desc(khi << 32 | ptx_hex(ptx, "or.b32 %mm_klo, %mm_klo,"), p, SM100_MAJOR_K, 16, "K");
    check_smem_desc(vhi << 32 | ptx_hex(ptx, "or.b32 %mm_vlo, %mm_vlo,"), p, SM100_MAJOR_MN, vchunk, "V");

    /* K steps: every MMA advances 32 bytes of K; K-major tiles step inside a swizzled row and jump
     * to the next chunk (rows x swizzle bytes away), MN-major V steps 32 B / elem rows of swizzle bytes */
    uint32_t st[64];
    int eb = p->elem_bytes, mk = 32 / eb;
    int n = ptx_steps(ptx, "add.u32 %mm_alo, %mm_qlo0, ", st, 64);
    assert_true(n >= pad_qk / mk);
    for (int k = 0; k < pad_qk / mk; k++) {
        int col = k * mk;
        uint32_t want = ((uint32_t)(col / p->chunk_elems) * 128u * (uint32_t)p->swizzle_bytes +
                         (uint32_t)(col % p->chunk_elems * eb)) >> 4;
        if (st[k] != want) fail_msg("%s: Q K step %d adds %u, want %u", p->canonical, k, st[k], want);
    }
    n = ptx_steps(ptx, "add.u32 %mm_blo, %mm_klo, ", st, 64);
    assert_true(n >= pad_qk / mk);
    for (int k = 0; k < pad_qk / mk; k++) {
        int col = k * mk;
        uint32_t w = ((uint32_t)(col / p->chunk_elems) * kchunk + (uint32_t)(col % p->chunk_elems * eb)) >> 4;
        if (st[k] != w) fail_msg("%s: K K step %d adds %u, want %u", p->canonical, k, st[k], w);
    }
    n = ptx_steps(ptx, "add.u32 %mm_blo, %mm_vlo, ", st, 64);
    assert_true(n >= p->bn / mk);
    for (int k = 0; k < p->bn / mk; k++) {
        uint32_t want = ((uint32_t)(k * mk) * (uint32_t)p->swizzle_bytes) >> 4;
        if (st[k] != want) fail_msg("%s: V K step %d adds %u, want %u", p->canonical, k, st[k], want);
    }
    n = ptx_steps(ptx, "add.u32 %mm_pa, %mm_tp0, ", st, 64);
    assert_true(n >= p->bn / mk);
    for (int k = 0; k < p->bn / mk; k++)
        if (st[k] != (uint32_t)(8 * k)) fail_msg("%s: P TMEM step %d is %u columns, want %d", p->canonical, k, st[k],
                                                 8 * k);
    /* the plan's templates are what the kernel emits */
    assert_true((uint32_t)(s->desc_q >> 32) == khi && (uint32_t)(s->desc_v >> 32) == vhi);
    assert_true(s->idesc_qk == iqk && s->idesc_pv == ipv);
    free(ptx);
}

static void test_kernel_descriptors(void **state)
{
    (void)state;
    static const char *const cfgs[] = {
        "mha target=sm100a dtype=bf16 qk=128 ov=128",
        "mha target=sm100a dtype=fp16 qk=64 ov=64 swizzle=32",
        "mha target=sm100a dtype=bf16 qk=64 ov=64 swizzle=64 qtiles=1",
        "mha target=sm100a dtype=e4m3 qk=128 ov=128",
        "mha target=sm100a dtype=e4m3 qk=128 ov=128 swizzle=32",
        "mha target=sm100a dtype=e4m3 qk=64 ov=64 swizzle=64 bn=64",
        "mha target=sm100a dtype=bf16 qk=96 ov=96",
        "mha target=sm100a dtype=bf16 qk=96 ov=96 swizzle=128 bn=96",
        "mha target=sm100a dtype=bf16 qk=192 ov=128 rope_split=1 rope_dtype=bf16",
        "mha target=sm100a dtype=fp16 qk=128 ov=128 group=8 bn=64 stages=6",
        /* the CTA pair: M 256, K halves of bn/2 rows per CTA, V halves of the chunks */
        "mha target=sm100a dtype=bf16 qk=128 ov=128 cta=2",
        "mha target=sm100a dtype=e4m3 qk=128 ov=128 cta=2",
        "mha target=sm100a dtype=fp16 qk=96 ov=96 cta=2",
        "mha target=sm100a dtype=bf16 qk=128 ov=128 cta=2 bn=64 stages=4 swizzle=32",
        "mha target=sm100a dtype=bf16 qk=128 ov=128 cta=2 group=4 qtiles=1",
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) check_kernel_descs(cfgs[i]);
}

/* ---- plan limits and the row mapping the descriptors and kernels rely on ---- */

static void expect_refusal(const char *text, const char *a, const char *b)
{
    Config c;
    static Plan plan;
    char err[512];
    config_init(&c);
    if (config_apply_text(&c, text, err, sizeof err)) fail_msg("config '%s': %s", text, err);
    if (!plan_make(&c, &plan, err, sizeof err)) fail_msg("'%s' was planned; want a refusal", text);
    if (!strstr(err, a) || (b && !strstr(err, b))) fail_msg("'%s': message '%s' lacks '%s' / '%s'", text, err, a, b ? b : "");
}

static void test_plan_limits(void **state)
{
    (void)state;
    expect_refusal("mha target=sm100a qk=256 ov=256", "sm90a", NULL);
    expect_refusal("mha target=sm100a qk=64 ov=64 cta=2", "65..128", "cta=1");
    expect_refusal("mha target=sm100a qk=192 ov=128 cta=2", "65..128", NULL);
    expect_refusal("mha target=sm100a qk=96 ov=96 cta=2 swizzle=64", "odd 3 chunks", "use swizzle 32");
    expect_refusal("mha target=sm100a qk=128 ov=128 bn=48", "minimum of 64", "16 short");
    expect_refusal("mha target=sm100a qk=128 ov=128 stages=2", "2 KV stages", "1 short");
    expect_refusal("mha target=sm100a qk=128 ov=128 bn=128 stages=7", "232448", "bytes over");
    expect_refusal("mha target=sm100a qk=128 ov=128 bn=192", "bn <= 128", NULL);
    expect_refusal("mha target=sm100a dtype=e4m3 qk=192 ov=128 rope_split=1", "rope_dtype", NULL);

    Config c;
    static Plan p;
    char err[512];
    config_init(&c);
    assert_int_equal(config_apply_text(&c, "mha target=sm100a qk=128 ov=128 group=4", err, sizeof err), 0);
    if (plan_make(&c, &p, err, sizeof err)) fail_msg("%s", err);
    const Sm100Plan *s = sm100_of(&p);
    /* FA4Config, d128 bf16: BN 128, 5 fused K/V slots, 512 TMEM columns */
    assert_int_equal(p.bn, 128);
    assert_int_equal(s->fused, 1);
    assert_int_equal(s->ring[0].slots, 5);
    assert_int_equal(p.tmem_cols, 512);
    assert_true(p.smem_launch <= 232448);
    /* GQA packing: 4 heads x 32 sequence rows per 128-row tile; Q and O boxes over (seq, head) */
    assert_int_equal(s->packed, 1);
    assert_int_equal(s->seq_rows, 32);
    assert_int_equal(p.rows_per_cta, 64);
    assert_int_equal(p.maps[0].box[1], 32);
    assert_int_equal(p.maps[0].box[2], 4);
    assert_int_equal(s->mma_per_kv, 2 * (128 / 16 + 128 / 16));
    /* registers: 128 x (2 x softmax + correction + warpgroup 3) fills the register file */
    assert_int_equal(128 * (2 * s->sfx_regs + s->corr_regs + s->other_regs), 65536);

    /* the CTA pair, d128 bf16: a cluster of 2, MMA M 256; each CTA loads 64 K rows and one of the
     * two 64-column V chunks; the even CTA's full barriers expect both halves; P and O-ready
     * barriers count both CTAs' 128 threads */
    config_init(&c);
    assert_int_equal(config_apply_text(&c, "mha target=sm100a qk=128 ov=128 cta=2", err, sizeof err), 0);
    if (plan_make(&c, &p, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(p.cluster[0], 2);
    assert_int_equal(s->mma_m, 256);
    assert_int_equal(s->tile_rows, 128);
    assert_int_equal(s->k_rows, 64);
    assert_int_equal(s->v_chunks, 1);
    assert_int_equal(p.maps[1].box[1], 64);  /* k */
    assert_int_equal(p.maps[2].box[1], 128); /* v: all bn rows, half of the chunks */
    assert_int_equal(s->tx_k, 2u * s->k_tile_bytes);
    assert_int_equal(s->tx_k, 128u * 128u * 2u);
    assert_int_equal(s->tx_v, 2u * s->v_tile_bytes);
    assert_int_equal(s->pair_arrivals, 256);
    assert_int_equal(s->sfx_arrivals, 128);
    assert_int_equal(p.rows_per_cta, 256);
}

/* Sparse MLA, head-64 kernel: the descriptors its MMAs use, decoded field by field, as the PTX
 * carries them; the TMEM map; the refusals name the field and the excess. */
static void test_mla_sparse_plan(void **state)
{
    (void)state;
    static Plan plan;
    char err[512];
    for (int qk = 512; qk <= 576; qk += 64) {
        Config c;
        char text[128];
        snprintf(text, sizeof text, "mla-sparse target=sm100a qk=%d", qk);
        config_init(&c);
        assert_int_equal(config_apply_text(&c, text, err, sizeof err), 0);
        char *ptx = NULL;
        size_t len;
        if (fa4gen_generate(&c, &plan, &ptx, &len, err, sizeof err)) fail_msg("generate '%s': %s", text, err);
        const Plan *p = &plan;
        const SparsePlan100 *s = mla100(p);
        Sm100InstrDesc q = sm100_instr_desc_decode(ptx_hex(ptx, "mov.u32 %mm_idesc_qk,"));
        Sm100InstrDesc v = sm100_instr_desc_decode(ptx_hex(ptx, "mov.u32 %mm_idesc_pv,"));
        /* QK: M 64 (the 1/2 data path), N 32 = half of b_topk per TMEM lane half, both operands K-major */
        assert_int_equal(q.m, 64), assert_int_equal(q.n, 32);
        assert_int_equal(q.a_major, SM100_MAJOR_K), assert_int_equal(q.b_major, SM100_MAJOR_K);
        /* PV: N 256 = half of d_v per lane half, V MN-major */
        assert_int_equal(v.m, 64), assert_int_equal(v.n, 256);
        assert_int_equal(v.a_major, SM100_MAJOR_K), assert_int_equal(v.b_major, SM100_MAJOR_MN);
        assert_int_equal(q.d_format, 1), assert_int_equal(q.a_format, 1), assert_int_equal(q.b_format, 1);
        assert_int_equal(v.d_format, 1), assert_int_equal(v.a_format, 1), assert_int_equal(v.b_format, 1);
        assert_true(sm100_mma_shape_ok(64, 32, 1, 0) && sm100_mma_shape_ok(64, 256, 1, 1));
        int version;
        Sm100SmemDesc dq = sm100_smem_desc_decode(s->desc_q, &version);
        assert_int_equal(version, 1);
        assert_int_equal(dq.sbo, 1024), assert_int_equal(dq.lbo, 16), assert_int_equal(dq.swizzle, SM100_SW_128);
        Sm100SmemDesc dk = sm100_smem_desc_decode(s->desc_k, &version);
        assert_int_equal(dk.sbo, 1024), assert_int_equal(dk.swizzle, SM100_SW_128);
        /* V: LBO steps over one 64-row chunk of 64 columns (8 KB), SBO over 8 key rows */
        Sm100SmemDesc dv = sm100_smem_desc_decode(s->desc_v, &version);
        assert_int_equal(dv.lbo, 64 * 128), assert_int_equal(dv.sbo, 1024), assert_int_equal(dv.swizzle, SM100_SW_128);
        assert_int_equal(s->kv_chunk_bytes, 64 * 128);
        assert_int_equal(s->k_half_bytes, 32 * 128);
        assert_int_equal(s->v_half_bytes, 4 * 64 * 128);
        assert_int_equal(s->qk_steps, qk / 16), assert_int_equal(s->pv_steps, 4), assert_int_equal(s->p_step_cols, 8);
        /* TMEM: O 256 columns at 0 (both lane halves), two 32-column S/P buffers after it */
        assert_int_equal(s->tm_o, 0), assert_int_equal(s->tm_s[0], 256), assert_int_equal(s->tm_s[1], 288);
        assert_int_equal(p->tmem_cols, 512);
        assert_int_equal(s->lane_half, 16 << 16);
        assert_int_equal(s->tx_kv, (uint32_t)qk * 2u * 64u);
        assert_true(p->smem_launch <= 232448);
        assert_int_equal(p->threads, 192);
        /* the D of the upper half sits at lane 16: the MMAs add it to the TMEM base */
        char want[48];
        snprintf(want, sizeof want, "add.u32 %%mm_d, %%tmem, %u;", s->tm_s[0] + (16u << 16));
        if (!strstr(ptx, want)) fail_msg("%s: no '%s'", p->canonical, want);
        assert_non_null(strstr(ptx, "tile::gather4.mbarrier::complete_tx::bytes"));
        assert_null(strstr(ptx, "cta_group::2"));
        free(ptx);
    }
    /* refusals */
    Config c;
    config_init(&c);
    assert_int_equal(config_apply_text(&c, "mla-sparse target=sm100a qk=576 num_mbars=3", err, sizeof err), 0);
    assert_int_equal(plan_make(&c, &plan, err, sizeof err), -1);
    assert_non_null(strstr(err, "num_mbars: 3"));
    assert_non_null(strstr(err, "63604 bytes over"));
    config_init(&c);
    assert_int_equal(config_apply_text(&c, "mla-sparse target=sm100a qk=576 cta_group=2 num_mbars=2", err, sizeof err), 0);
    assert_int_equal(plan_make(&c, &plan, err, sizeof err), -1);
    assert_non_null(strstr(err, "num_mbars: 2"));
    assert_non_null(strstr(err, "use num_mbars 1"));
    config_init(&c);
    assert_int_equal(config_apply_text(&c, "mla-sparse target=sm100a qk=576 cta_group=2 b_topk=32", err, sizeof err), 0);
    assert_int_equal(plan_make(&c, &plan, err, sizeof err), -1);
    assert_non_null(strstr(err, "b_topk: 32 is not allowed for cta_group 2; use 128"));
    assert_non_null(strstr(err, "or 64"));
    /* Q in TMEM: b_topk 128 leaves 128 columns (64 over), the k ring of one b_topk-64 slot cannot stage it,
     * the head-64 kernel does not copy Q */
    static const struct { const char *cfg, *want; } q_refusals[] = {
        {"cta_group=2 q_tmem_depth=384", "576 of 512; 64 columns over: use b_topk 64"},
        {"cta_group=2 b_topk=64 num_mbars=1 q_tmem_depth=384", "12288 bytes over"},
        {"cta_group=2 b_topk=64 num_mbars=2 q_smem_depth=100 q_tmem_depth=476", "q_smem_depth: 100 is not allowed"},
        {"cta_group=2 b_topk=64 num_mbars=2 q_smem_depth=192 q_tmem_depth=320", "192 + 320 is not d_qk 576"},
        {"cta_group=1 q_tmem_depth=384", "not allowed for cta_group 1"},
    };
    for (size_t i = 0; i < sizeof q_refusals / sizeof q_refusals[0]; i++) {
        char text[160];
        snprintf(text, sizeof text, "mla-sparse target=sm100a qk=576 %s", q_refusals[i].cfg);
        config_init(&c);
        assert_int_equal(config_apply_text(&c, text, err, sizeof err), 0);
        assert_int_equal(plan_make(&c, &plan, err, sizeof err), -1);
        if (!strstr(err, q_refusals[i].want)) fail_msg("'%s': '%s' lacks '%s'", text, err, q_refusals[i].want);
    }
    /* tma_store: only mla-sparse has it; on sm100a named in the canonical form only when on; the out map and 8 stores */
    config_init(&c);
    assert_int_equal(config_apply_text(&c, "mha target=sm100a depth=128 tma_store=1", err, sizeof err), 0);
    assert_int_equal(plan_make(&c, &plan, err, sizeof err), -1);
    assert_non_null(strstr(err, "tma_store: 1 is not allowed for mha; only mla-sparse has it"));
    config_init(&c);
    assert_int_equal(config_apply_text(&c, "mla-sparse target=sm100a qk=576 cta_group=2 tma_store=1", err, sizeof err), 0);
    {
        char *ptx = NULL;
        size_t len;
        if (fa4gen_generate(&c, &plan, &ptx, &len, err, sizeof err)) fail_msg("generate tma_store: %s", err);
        assert_non_null(strstr(plan.canonical, " tma_store=1"));
        assert_int_equal(plan.maps[plan.n_maps - 1].tensor, TENSOR_O);
        assert_int_equal(plan.maps[plan.n_maps - 1].box_bytes, 64 * 64 * 2);
        int st = 0;
        for (const char *t = ptx; (t = strstr(t, "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group")); t++) st++;
        assert_int_equal(st, 8);
        free(ptx);
    }
    config_init(&c);
    assert_int_equal(config_apply_text(&c, "mla-sparse target=sm100a qk=576 cta_group=2", err, sizeof err), 0);
    assert_int_equal(plan_make(&c, &plan, err, sizeof err), 0);
    assert_non_null(strstr(plan.canonical, " tma_store=1")); /* the default since 2026-11-29, named */
    assert_int_equal(plan.maps[plan.n_maps - 1].tensor, TENSOR_O);
    config_init(&c);
    assert_int_equal(config_apply_text(&c, "mla-sparse target=sm100a qk=576 cta_group=2 tma_store=0", err, sizeof err), 0);
    assert_int_equal(plan_make(&c, &plan, err, sizeof err), 0);
    assert_non_null(strstr(plan.canonical, " tma_store=0")); /* 0 named too: the text reads back the same kernel */
    assert_true(plan.maps[plan.n_maps - 1].tensor != TENSOR_O);
    /* two slots of b_topk 64 (QK N 64) and Q 192 + 384: the TMEM map ends at column 512, QK steps 12.. read
     * A from TMEM (24 MMAs with a TMEM address), 48 copies */
    config_init(&c);
    assert_int_equal(config_apply_text(&c, "mla-sparse target=sm100a qk=576 cta_group=2 b_topk=64 num_mbars=2 "
                                           "q_tmem_depth=384", err, sizeof err), 0);
    {
        char *ptx = NULL;
        size_t len;
        if (fa4gen_generate(&c, &plan, &ptx, &len, err, sizeof err)) fail_msg("generate q split: %s", err);
        const SparsePlan100 *s = mla100(&plan);
        Sm100InstrDesc q = sm100_instr_desc_decode(ptx_hex(ptx, "mov.u32 %mm_idesc_qk,"));
        assert_int_equal(q.m, 128), assert_int_equal(q.n, 64);
        assert_true(sm100_mma_shape_ok(128, 64, 2, 0));
        assert_int_equal(s->stages, 2), assert_int_equal(s->q_smem_chunks, 3), assert_int_equal(s->q_smem_steps, 12);
        assert_int_equal(s->tm_q, 256 + 2 * 32), assert_int_equal(s->tm_q + 192, 512);
        int cps = 0, ts = 0;
        for (const char *t = ptx; (t = strstr(t, "tcgen05.cp.cta_group::2.64x128b.warpx2::02_13")); t++) cps++;
        for (const char *t = ptx; (t = strstr(t, "kind::f16 [%mm_d], [%mm_a]")); t++) ts++;
        assert_int_equal(cps, 48);
        /* two S buffers: 24 QK steps from TMEM + 8 PV (P from TMEM) at three sites (qk_ahead: after the next
         * block's QK, at a skipped block, after the loop) */
        assert_int_equal(ts, 2 * (24 + 3 * 8));
        /* QK(i+1) before PV(i): K and V of a slot on barriers of their own, the bytes split between them */
        assert_int_equal(s->qk_ahead, 1);
        assert_int_equal(s->tx_kv, 2 * s->kv_stage_bytes), assert_int_equal(s->tx_v, 2 * s->v_stage_bytes);
        assert_true(s->bar_v_full != s->bar_v_empty && s->bar_v_full != s->bar_kv_full);
        free(ptx);
        config_init(&c);
        assert_int_equal(config_apply_text(&c, "mla-sparse target=sm100a qk=576 cta_group=2 b_topk=64 num_mbars=1",
                                           err, sizeof err), 0);
        assert_int_equal(plan_make(&c, &plan, err, sizeof err), 0);
        assert_int_equal(mla100(&plan)->qk_ahead, 0); /* one slot: each block's PV follows its QK */
        assert_int_equal(mla100(&plan)->tx_v, 0);
    }
    /* the pair: M 128 over both CTAs (64 heads each), QK N = b_topk 128 (64 keys from each CTA), PV N 256
     * (128 V columns from each CTA) twice; V chunks of 128 rows */
    for (int qk = 512; qk <= 576; qk += 64) {
        char text[128];
        snprintf(text, sizeof text, "mla-sparse target=sm100a qk=%d cta_group=2", qk);
        config_init(&c);
        assert_int_equal(config_apply_text(&c, text, err, sizeof err), 0);
        char *ptx = NULL;
        size_t len;
        if (fa4gen_generate(&c, &plan, &ptx, &len, err, sizeof err)) fail_msg("generate '%s': %s", text, err);
        const SparsePlan100 *s = mla100(&plan);
        Sm100InstrDesc q = sm100_instr_desc_decode(ptx_hex(ptx, "mov.u32 %mm_idesc_qk,"));
        Sm100InstrDesc v = sm100_instr_desc_decode(ptx_hex(ptx, "mov.u32 %mm_idesc_pv,"));
        assert_int_equal(q.m, 128), assert_int_equal(q.n, 128), assert_int_equal(q.b_major, SM100_MAJOR_K);
        assert_int_equal(v.m, 128), assert_int_equal(v.n, 256), assert_int_equal(v.b_major, SM100_MAJOR_MN);
        assert_true(sm100_mma_shape_ok(128, 128, 2, 0) && sm100_mma_shape_ok(128, 256, 2, 1));
        int version;
        Sm100SmemDesc dv = sm100_smem_desc_decode(s->desc_v, &version);
        assert_int_equal(dv.lbo, 128 * 128), assert_int_equal(dv.sbo, 1024);
        Sm100SmemDesc dk = sm100_smem_desc_decode(s->desc_k, &version);
        assert_int_equal(dk.sbo, 1024), assert_int_equal(dk.swizzle, SM100_SW_128);
        assert_int_equal(plan.cluster[0], 2), assert_int_equal(s->k_rows, 64), assert_int_equal(s->v_chunks, 4);
        assert_int_equal(s->tx_kv, 2u * (64u * (uint32_t)qk * 2u + 128u * 256u * 2u));
        assert_int_equal(s->pair_arrivals, 256);
        assert_true(plan.smem_launch <= 232448);
        assert_non_null(strstr(ptx, "tcgen05.mma.cta_group::2.kind::f16"));
        assert_non_null(strstr(ptx, "tile::gather4.mbarrier::complete_tx::bytes.cta_group::2"));
        assert_null(strstr(ptx, "cta_group::1"));
        free(ptx);
    }
    config_init(&c);
    assert_int_equal(config_apply_text(&c, "mla-sparse target=sm90a qk=576 b_topk=64", err, sizeof err), 0);
    assert_int_equal(plan_make(&c, &plan, err, sizeof err), -1);
    assert_non_null(strstr(err, "only mla-sparse on sm100a and sm103a has it"));
    config_init(&c);
    assert_int_equal(config_apply_text(&c, "mla-sparse target=sm100a qk=576 bn=64", err, sizeof err), 0);
    assert_int_equal(plan_make(&c, &plan, err, sizeof err), -1);
    assert_non_null(strstr(err, "b_topk"));
    /* fp8 kv: the MMAs still take bf16 (formats BF16), a dequant warpgroup (warps 6-9), one bf16 slot,
     * the kv map gathers e4m3 bytes in unswizzled boxes that divide the row */
    for (int qk = 512; qk <= 576; qk += 64) {
        char text[128];
        snprintf(text, sizeof text, "mla-sparse target=sm100a dtype=e4m3 qk=%d", qk);
        config_init(&c);
        assert_int_equal(config_apply_text(&c, text, err, sizeof err), 0);
        char *ptx = NULL;
        size_t len;
        if (fa4gen_generate(&c, &plan, &ptx, &len, err, sizeof err)) fail_msg("generate '%s': %s", text, err);
        const SparsePlan100 *s = mla100(&plan);
        Sm100InstrDesc q = sm100_instr_desc_decode(ptx_hex(ptx, "mov.u32 %mm_idesc_qk,"));
        assert_int_equal(q.a_format, 1), assert_int_equal(q.b_format, 1), assert_int_equal(q.m, 64);
        assert_int_equal(s->kv_fp8, 1), assert_int_equal(plan.threads, 320), assert_int_equal(s->stages, 1);
        assert_int_equal(s->raw_box, qk == 576 ? 192 : 256), assert_int_equal(s->raw_chunks * s->raw_box, qk);
        assert_int_equal(s->dq_units * 128 * 16, 64 * qk * 2); /* every bf16 byte of a block, once */
        const MapSpec *kv = &plan.maps[1];
        assert_int_equal(kv->dtype, DT_E4M3), assert_int_equal(kv->mode, MAP_GATHER4);
        assert_int_equal(kv->box[0], (uint32_t)s->raw_box), assert_int_equal(kv->swizzle, 0);
        assert_int_equal(plan.maps[0].dtype, DT_BF16);
        assert_non_null(strstr(ptx, "cvt.rn.f16x2.e4m3x2"));
        assert_non_null(strstr(ptx, "p_kv_scale_blocks"));
        assert_true(plan.smem_launch <= 232448);
        free(ptx);
    }
    /* fp8 kv in the pair: b_topk 64 and one bf16 slot by default (128 refused), a raw ring of every row, the
     * dequant warpgroup (320 threads), raw gathers .cta_group::2 on the CTA's own barrier */
    config_init(&c);
    assert_int_equal(config_apply_text(&c, "mla-sparse target=sm100a dtype=e4m3 qk=576 cta_group=2 b_topk=128", err,
                                       sizeof err), 0);
    assert_int_equal(plan_make(&c, &plan, err, sizeof err), -1);
    assert_non_null(strstr(err, "b_topk/num_mbars: 128/1 is not allowed for fp8 kv with cta_group 2; use 64/1"));
    config_init(&c);
    assert_int_equal(config_apply_text(&c, "mla-sparse target=sm100a dtype=e4m3 qk=576 cta_group=2", err, sizeof err), 0);
    {
        char *ptx = NULL;
        size_t len;
        if (fa4gen_generate(&c, &plan, &ptx, &len, err, sizeof err)) fail_msg("generate fp8 pair: %s", err);
        const SparsePlan100 *s = mla100(&plan);
        assert_int_equal(s->block, 64), assert_int_equal(s->stages, 1), assert_int_equal(plan.threads, 320);
        assert_int_equal(s->raw_stage_bytes, 64 * 576);
        assert_non_null(strstr(ptx, "cvt.rn.f16x2.e4m3x2"));
        assert_true(plan.smem_launch <= 232448);
        free(ptx);
    }
    /* the canonical form carries the seed's keys and reads back to the same hash */
    config_init(&c);
    assert_int_equal(config_apply_text(&c, "mla-sparse target=sm100a qk=576", err, sizeof err), 0);
    assert_int_equal(plan_make(&c, &plan, err, sizeof err), 0);
    assert_non_null(strstr(plan.canonical, "b_topk=64 num_mbars=2 q_smem_depth=576 q_tmem_depth=0 cta_group=1"));
    assert_null(strstr(plan.canonical, " bn="));
    Config back;
    assert_int_equal(config_parse_canonical(plan.canonical, &back, err, sizeof err), 0);
    assert_true(config_hash(&back) == plan.hash);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smem_reference_values), cmocka_unit_test(test_smem_round_trip),
        cmocka_unit_test(test_instr_reference_values), cmocka_unit_test(test_instr_round_trip),
        cmocka_unit_test(test_mma_shapes), cmocka_unit_test(test_kernel_descriptors),
        cmocka_unit_test(test_plan_limits), cmocka_unit_test(test_mla_sparse_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
