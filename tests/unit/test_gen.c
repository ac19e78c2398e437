/* test_gen.c - the generator without a GPU: config parse/validate/canonical/
 * hash, plan arithmetic, the PTX builder, sm90 descriptors and the CLI. */
#include "testutil.h"

#include <sys/stat.h>
#include <unistd.h>

#include "fa4gen.h"
#include "sm100/plan100.h"
#include "sm90/plan90.h"
#include "kernel.h"
#include "ops.h"
#include "score_mod.h"

static Config parse_ok(const char *text)
{
    Config c;
    char err[256] = "";
    int rc = config_parse_canonical(text, &c, err, sizeof err);
    if (rc) fail_msg("parse '%s': %s", text, err);
    return c;
}

static void plan_ok(const char *text, Plan *p)
{
    char err[256] = "";
    Config c = parse_ok(text);
    if (plan_make(&c, p, err, sizeof err)) fail_msg("plan '%s': %s", text, err);
}

/* The plan of a canonical config and its PTX (the caller frees it). */
static char *plan_ptx(const char *text, Plan *p)
{
    char err[256] = "", *ptx = NULL;
    size_t n = 0;
    plan_ok(text, p);
    Config c = parse_ok(p->canonical);
    if (fa4gen_generate(&c, p, &ptx, &n, err, sizeof err)) fail_msg("generate '%s': %s", text, err);
    return ptx;
}

static void expect_plan_error(const char *text, const char *needle)
{
    Plan *p = malloc(sizeof *p);
    char err[256] = "";
    Config c;
    int rc = config_parse_canonical(text, &c, err, sizeof err);
    if (!rc) rc = plan_make(&c, p, err, sizeof err);
    free(p);
    assert_int_equal(rc, -1);
    if (!strstr(err, needle)) fail_msg("'%s': error '%s' lacks '%s'", text, err, needle);
}

/* ---- config ---- */

static void test_canonical_roundtrip(void **state)
{
    (void)state;
    const char *texts[] = {
        "mha target=sm90a dtype=bf16 qk=128 ov=128 mask=causal",
        "mha target=sm90a dtype=fp16 qk=64 ov=64 bm=192 bn=128 group=8 stages=3 swizzle=64 mask=none",
        "mha target=sm90a dtype=bf16 qk=256 ov=256 mask=window:128,0",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        Plan *p = malloc(sizeof *p);
        plan_ok(texts[i], p);
        Config back = parse_ok(p->canonical);
        char again[256];
        config_fill_defaults(&back, NULL, 0);
        config_canonical(&back, again, sizeof again);
        assert_string_equal(p->canonical, again);
        assert_int_equal(config_hash(&back), p->hash);
        free(p);
    }
}

static void test_hash_is_stable(void **state)
{
    (void)state;
    /* The hash names the kernel across runs and machines: FNV-1a 64 of the
     * canonical text, "\n" and the generator version. Recompute it here. */
    Plan *p = malloc(sizeof *p);
    plan_ok("mha target=sm90a dtype=bf16 qk=128 ov=128 mask=causal", p);
    const char *want = "mha target=sm90a dtype=bf16 qk=128 ov=128 bm=128 bn=128 group=1 stages=2 swizzle=128 "
                       "rescale=8 poly=0 pingpong=1 persistent=0 mask=causal";
    assert_string_equal(p->canonical, want);
    uint64_t h = 0xcbf29ce484222325ull;
    char text[300];
    snprintf(text, sizeof text, "%s\n%s", want, FA4GEN_VERSION);
    for (const char *s = text; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    assert_true(h == p->hash);
    char sym[64];
    snprintf(sym, sizeof sym, "fa4_mha_sm90a_%016llx", (unsigned long long)h);
    assert_string_equal(p->symbol, sym);
    free(p);
}

static void test_config_errors_name_the_field(void **state)
{
    (void)state;
    Config c;
    char err[256];
    config_init(&c);
    assert_int_equal(config_set(&c, "dtype", "fp64", err, sizeof err), -1);
    assert_non_null(strstr(err, "dtype: 'fp64'"));
    assert_int_equal(config_set(&c, "bn", "abc", err, sizeof err), -1);
    assert_non_null(strstr(err, "bn: 'abc'"));
    assert_int_equal(config_set(&c, "swizzle", "256", err, sizeof err), -1);
    assert_non_null(strstr(err, "swizzle"));
    assert_int_equal(config_set(&c, "mask", "diagonal", err, sizeof err), -1);
    assert_non_null(strstr(err, "mask: 'diagonal'"));
    assert_int_equal(config_set(&c, "colour", "red", err, sizeof err), -1);
    assert_non_null(strstr(err, "'colour' is not a config field"));
    assert_int_equal(config_parse_canonical("mha target=sm90a qk", &c, err, sizeof err), -1);
    expect_plan_error("mha target=sm90a dtype=bf16 qk=96 ov=96", "depth: 96");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=64", "qk/ov");
    expect_plan_error("mha target=sm90a dtype=e4m3 qk=128 ov=128", "dtype: e4m3");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 bm=96", "bm: 96");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 bn=72", "bn: 72");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 bm=192", "use bn <= 80");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=256 ov=256 bn=128", "registers");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 stages=1", "stages: 1");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 qtiles=2", "sm100a fields");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 poly=60", "poly: 60");
    expect_plan_error("mha target=sm90a dtype=fp16 qk=128 ov=128 rescale=9", "rescale: 9");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=256 ov=256 swizzle=32", "swizzle: 32");
    expect_plan_error("mha target=sm90a dtype=bf16", "depth: missing");
}

static void test_smem_limit_names_the_excess(void **state)
{
    (void)state;
    /* d256, bn 96, 3 stages: 64 KB Q + 3 x (48 + 48) KB rings, over the limit */
    expect_plan_error("mha target=sm90a dtype=bf16 qk=256 ov=256 bn=96 stages=3", "bytes over");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=256 ov=256 bn=96 stages=3", "allows 232448");
}

/* ---- plan ---- */

static void test_plan_smem_map(void **state)
{
    (void)state;
    const char *texts[] = {
        "mha target=sm90a dtype=bf16 qk=64 ov=64 bm=192",
        "mha target=sm90a dtype=bf16 qk=128 ov=128 stages=3",
        "mha target=sm90a dtype=fp16 qk=256 ov=256 swizzle=64",
        "mha target=sm90a dtype=bf16 qk=128 ov=128 swizzle=32 bn=64 stages=4",
    };
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        Plan *p = malloc(sizeof *p);
        plan_ok(texts[t], p);
        const Sm90Plan *s = sm90_of(p);
        uint32_t end = 0;
        for (int i = 0; i < p->n_smem; i++) {
            const SmemEntry *e = &p->smem[i];
            assert_int_equal(e->offset % e->align, 0); /* aligned */
            assert_true(e->offset >= end);             /* in order, no overlap */
            end = e->offset + e->size;
        }
        assert_int_equal(end, p->smem_bytes);
        assert_int_equal(p->smem_launch, p->smem_bytes + p->smem_align);
        assert_true(p->smem_launch <= p->target->smem_limit);
        /* tile bytes are rows x depth x element size; tx bytes match the boxes loaded */
        assert_int_equal(s->tx_q, (uint32_t)(p->bm * p->qk * p->elem_bytes));
        assert_int_equal(s->k_stage_bytes, (uint32_t)(p->bn * p->qk * p->elem_bytes));
        assert_int_equal(s->v_stage_bytes, (uint32_t)(p->bn * p->ov * p->elem_bytes));
        assert_int_equal(s->tx_k, p->maps[1].box_bytes * (uint32_t)p->qk_chunks);
        assert_int_equal(s->tx_v, p->maps[2].box_bytes * (uint32_t)p->ov_chunks);
        assert_int_equal(plan_smem_find(p, "k")->size, s->k_stage_bytes * (uint32_t)p->stages);
        assert_int_equal(plan_smem_find(p, "bar_k_full")->size, 8u * (uint32_t)p->stages);
        /* the mbarrier table: each array where the smem map has it, with the arrivals its waiters need */
        const PlanMbar *kf = plan_mbar_find(p, "bar_k_full"), *ke = plan_mbar_find(p, "bar_k_empty");
        assert_non_null(kf);
        assert_non_null(ke);
        assert_int_equal(kf->off, plan_smem_find(p, "bar_k_full")->offset);
        assert_int_equal(kf->n, p->stages);
        assert_int_equal(kf->count, 1);             /* the producer's expect_tx arrival */
        assert_int_equal(ke->count, 4 * s->consumers); /* one per consumer warp */
        assert_int_equal(plan_mbar_find(p, "bar_q_empty")->count, s->consumers);
        assert_null(plan_mbar_find(p, "bar_nothing"));
        /* swizzled tiles start on the 1024 B pattern boundary, chunks too */
        assert_int_equal(s->off_q % 1024, 0);
        assert_int_equal(s->off_k % 1024, 0);
        assert_int_equal(s->k_chunk_bytes % (8u * (uint32_t)p->swizzle_bytes), 0);
        /* register budget: 128 x (producer + consumers x consumer) <= 65536 */
        int regs = 0;
        for (int i = 0; i < p->n_roles; i++) regs += p->roles[i].warps * 32 * p->roles[i].regs;
        assert_true(regs <= 65536);
        assert_int_equal(p->threads, 128 * (1 + s->consumers));
        assert_int_equal(p->rows_per_cta, 64 * s->consumers);
        free(p);
    }
}

/* A builder whose table is full makes plan_make fail with the table's name, never drops the entry. */
static void test_plan_table_full(void **state)
{
    (void)state;
    Plan *p = calloc(1, sizeof *p);
    for (int i = 0; i < PLAN_MAX_MBARS + 1; i++) plan_mbar(p, "bar_x", 1, 1, "test");
    assert_int_equal(p->n_mbars, PLAN_MAX_MBARS);
    assert_non_null(p->overflow);
    assert_non_null(strstr(p->overflow, "PLAN_MAX_MBARS"));
    free(p);
}

static void test_explain_json_and_text(void **state)
{
    (void)state;
    Plan *p = malloc(sizeof *p);
    plan_ok("mha target=sm90a dtype=bf16 qk=128 ov=128 mask=causal", p);
    char *j = plan_explain_json(p), *t = plan_explain_text(p);
    assert_non_null(strstr(j, "\"symbol\": \"fa4_mha_sm90a_"));
    assert_non_null(strstr(j, "\"launch\": {\"threads\": 384"));
    assert_non_null(strstr(t, "shared memory"));
    assert_non_null(strstr(t, "bar_k_empty"));
    free(j);
    free(t);
    free(p);
}

/* ---- PTX builder ---- */

static void test_builder(void **state)
{
    (void)state;
    Emit *e = malloc(sizeof *e);
    emit_init(e, NULL);
    const char *a = reg(e, "b32", "alpha");
    assert_string_equal(a, "%alpha");
    assert_ptr_equal(reg(e, "b32", "alpha"), a); /* idempotent */
    reg_array(e, "f32", "acc", 4);
    char buf[128], lbl[32];
    assert_string_equal(reglist(buf, sizeof buf, "acc", 1, 3), "{%acc1, %acc2, %acc3}");
    assert_string_equal(new_label(e, lbl, sizeof lbl, "loop"), "$loop_0");
    assert_string_equal(new_label(e, lbl, sizeof lbl, "loop"), "$loop_1");
    emit(e, "mov.u32 %s, 7;", a);
    size_t len;
    char *ptx = emit_finish(e, "HEADER\n", &len);
    assert_non_null(ptx);
    assert_non_null(strstr(ptx, "HEADER\n{\n    .reg .b32 %alpha;\n    .reg .f32 %acc<4>;\n    mov.u32 %alpha, 7;\n}"));
    assert_int_equal(len, strlen(ptx));
    free(ptx);
    reg(e, "f32", "alpha"); /* a type clash is an internal error, reported by emit_finish */
    assert_true(e->failed);
    assert_null(emit_finish(e, "", NULL));
    assert_non_null(strstr(e->err, "%alpha"));
    emit_free(e);
    free(e);
}

/* Typed handles (issue 12): a handle prints its name, elements and negations print their
 * operand text, and a register of the wrong class is refused with a message naming both. */
static void test_reg_handles(void **state)
{
    (void)state;
    Emit *e = malloc(sizeof *e);
    emit_init(e, NULL);
    Reg m = reg_f32(e, "cs_m%d", 1), p = reg_pred(e, "p_wait");
    assert_string_equal(R(e, m), "%cs_m1");
    assert_true(reg_f32(e, "cs_m%d", 1).id == m.id); /* idempotent */
    assert_string_equal(R(e, reg_not(e, p)), "!%p_wait");
    Reg acc = reg_arr(e, RT_F32, 4, "acc");
    assert_string_equal(R(e, reg_at(e, acc, 3)), "%acc3");
    char buf[64];
    assert_string_equal(reg_list(e, buf, sizeof buf, acc, 1, 2), "{%acc1, %acc2}");
    assert_true(REG_WANT(e, m, RT_F32));
    assert_true(REG_WANT(e, reg_at(e, acc, 0), RT_F32 | RT_B32));
    assert_false(e->failed);
    assert_false(REG_WANT(e, p, RT_F32)); /* an f32 operand given a predicate */
    assert_true(e->failed);
    assert_null(emit_finish(e, "", NULL));
    assert_non_null(strstr(e->err, "%p_wait"));
    assert_non_null(strstr(e->err, ".pred"));
    assert_non_null(strstr(e->err, "wants .f32"));
    emit_free(e);

    emit_init(e, NULL);
    reg_at(e, acc, 4); /* past the end of %acc<4> */
    assert_true(e->failed);
    emit_free(e);
    emit_init(e, NULL);
    reg_f32(e, "x");
    reg_b32(e, "x"); /* one name, two classes */
    assert_true(e->failed);
    assert_non_null(strstr(e->err, "%x"));
    emit_free(e);
    free(e);
}

static void test_sm90_descriptors(void **state)
{
    (void)state;
    /* K-major SW128 bf16: LBO 16, SBO 1024 -> 0x4000004000010000 (cheatsheet sec. 4) */
    uint64_t d = (uint64_t)sm90_desc_hi(1024, 128) << 32 | sm90_desc_lo_lbo(16);
    assert_true(d == 0x4000004000010000ull);
    /* MN-major SW128, LBO 1024 / SBO 2048 (CUTLASS value 0x4000008000400000) */
    d = (uint64_t)sm90_desc_hi(2048, 128) << 32 | sm90_desc_lo_lbo(1024);
    assert_true(d == 0x4000008000400000ull);
    /* swizzle codes: 64B -> 2, 32B -> 3 in bits 62-63 */
    assert_int_equal(sm90_desc_hi(512, 64) >> 30, 2);
    assert_int_equal(sm90_desc_hi(256, 32) >> 30, 3);
}

/* ---- CLI ---- */

static const char *fa4gen(void) { return getenv("FA4GEN") ? getenv("FA4GEN") : "build/fa4gen"; }

static int cli(const char *args, char **out)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", fa4gen(), args);
    return run_capture(cmd, out);
}

static void test_cli_exit_codes(void **state)
{
    (void)state;
    char *out = NULL;
    assert_int_equal(cli("--version", &out), 0);
    assert_non_null(strstr(out, fa4gen_build_id())); /* version + the generator's source hash */
    free(out);
    assert_int_equal(cli("--help", NULL), 0);
    assert_int_equal(cli("mha --help", NULL), 0);
    assert_int_equal(cli("", NULL), 2);
    assert_int_equal(cli("frobnicate", NULL), 2);
    assert_int_equal(cli("mha --target sm90a --depth 100", NULL), 2);
    assert_int_equal(cli("mha --target sm91 --depth 128", NULL), 2);
    assert_int_equal(cli("mha --target sm90a --depth 128 --bogus 1", NULL), 2);
    assert_int_equal(cli("mha --target sm90a --depth", NULL), 2);
    assert_int_equal(cli("explain --target sm90a --depth 128 --json", &out), 0);
    assert_non_null(strstr(out, "\"config\": \"mha target=sm90a"));
    free(out);
    assert_int_equal(cli("mha --target sm90a --depth 64 --dtype fp16", &out), 0);
    assert_non_null(strstr(out, ".target sm_90a"));
    assert_non_null(strstr(out, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"));
    free(out);
    /* one line on stderr naming field, value and what is allowed */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s mha --target sm90a --depth 128 --bn 72 2>&1 >/dev/null", fa4gen());
    assert_int_equal(run_capture(cmd, &out), 2);
    assert_non_null(strstr(out, "bn: 72"));
    assert_non_null(strstr(out, "multiple of 16"));
    assert_null(strchr(out, '\n') == out + strlen(out) - 1 ? NULL : "more than one line");
    free(out);
}

static void test_cli_no_partial_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4gen-cli-XXXXXX", path[128], args[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/k.ptx", dir);
    /* a failed run creates nothing */
    snprintf(args, sizeof args, "mha --target sm90a --depth 100 -o %s", path);
    assert_int_equal(cli(args, NULL), 2);
    assert_int_equal(access(path, F_OK), -1);
    /* an existing file survives a failed run untouched */
    FILE *f = fopen(path, "w");
    fputs("precious", f);
    fclose(f);
    assert_int_equal(cli(args, NULL), 2);
    char buf[32] = "";
    f = fopen(path, "r");
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_string_equal(buf, "precious");
    /* a good run replaces it whole; no temp files stay behind */
    snprintf(args, sizeof args, "mha --target sm90a --depth 128 -o %s", path);
    assert_int_equal(cli(args, NULL), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size > 10000);
    char ls[256], *listing = NULL;
    snprintf(ls, sizeof ls, "ls -A %s", dir);
    run_capture(ls, &listing);
    assert_string_equal(listing, "k.ptx\n");
    free(listing);
    /* bundle: all configs checked before any file is written */
    char list[128];
    snprintf(list, sizeof list, "%s/list", dir);
    f = fopen(list, "w");
    fputs("mha target=sm90a dtype=bf16 qk=128 ov=128\nmha target=sm90a dtype=bf16 qk=100 ov=100\n", f);
    fclose(f);
    snprintf(args, sizeof args, "bundle %s -d %s", list, dir);
    assert_int_equal(cli(args, NULL), 2);
    run_capture(ls, &listing);
    assert_string_equal(listing, "k.ptx\nlist\n");
    free(listing);
    snprintf(ls, sizeof ls, "rm -rf %s", dir);
    assert_int_equal(system(ls), 0);
}


/* ---- hostile input (issue 16): each found bug as a regression test ---- */

/* Runs fa4gen with args through sh; stderr captured into *err (stdout dropped). */
static int cli_err(const char *args, char **err)
{
    char cmd[6000];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1 >/dev/null", fa4gen(), args);
    return run_capture(cmd, err);
}

static void expect_one_line(const char *out)
{
    assert_non_null(out);
    size_t n = strlen(out);
    assert_true(n > 0 && out[n - 1] == '\n');
    if (strchr(out, '\n') != out + n - 1) fail_msg("more than one line: '%s'", out);
}

static void test_window_bounds_in_range(void **state)
{
    (void)state;
    Config c;
    char err[512];
    /* out of int range, or past the widest window: refused, not wrapped */
    const char *bad[] = {"window:99999999999999999999,0", "window:4294967297,0", "window:5,2147483647",
                         "window:2147483647,0", "window:1073741825,0", "window:0,1073741825", "window:-2,0",
                         "window:5,-2", "window: 5, 6", "window:5, 6", "window: 5,6", "window:+5,6", "window:5,6,7",
                         "window:5", "window:,5", "window:5,", "window:0x10,0", "window:5,6 "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        config_init(&c);
        if (config_set(&c, "mask", bad[i], err, sizeof err) != -1) fail_msg("'%s' accepted", bad[i]);
        assert_non_null(strstr(err, "mask: '"));
    }
    config_init(&c);
    assert_int_equal(config_set(&c, "mask", "window:1073741824,-1", err, sizeof err), 0);
    assert_int_equal(c.window_left, 1073741824);
    assert_int_equal(c.window_right, -1);
    /* a Config built by hand (the runtime's path) is checked too */
    assert_int_equal(config_parse_canonical("mha target=sm90a dtype=bf16 qk=128 ov=128", &c, err, sizeof err), 0);
    c.mask = MASK_WINDOW, c.window_left = 5, c.window_right = 2147483647;
    Plan *p = malloc(sizeof *p);
    assert_int_equal(plan_make(&c, p, err, sizeof err), -1);
    assert_non_null(strstr(err, "window:5,2147483647"));
    /* the widest window emits bounds that did not wrap */
    char *out = NULL;
    assert_int_equal(cli("mha --target sm90a --depth 128 --mask window:1073741824,1073741824", &out), 0);
    assert_non_null(strstr(out, ", 1073741825;"));
    assert_null(strstr(out, "-2147483648"));
    free(out);
    assert_int_equal(cli("mha --target sm100a --depth 128 --mask window:1073741824,1073741824", &out), 0);
    assert_null(strstr(out, "-2147483648"));
    free(out);
    /* the CLI, on both targets, and through a bundle list */
    assert_int_equal(cli("mha --target sm90a --depth 128 --mask window:5,2147483647", NULL), 2);
    assert_int_equal(cli("mha --target sm100a --depth 128 --mask window:5,2147483647", NULL), 2);
    assert_int_equal(cli("mha --target sm90a --depth 128 --mask window:4294967297,0", NULL), 2);
    char dir[] = "/tmp/fa4gen-win-XXXXXX", args[256], list[128];
    assert_non_null(mkdtemp(dir));
    snprintf(list, sizeof list, "%s/list", dir);
    FILE *f = fopen(list, "w");
    fputs("mha target=sm100a dtype=bf16 qk=128 ov=128 mask=window:5,2147483647\n", f);
    fclose(f);
    snprintf(args, sizeof args, "bundle %s -d %s", list, dir);
    assert_int_equal(cli_err(args, &out), 2);
    assert_non_null(strstr(out, "line 1: mask"));
    free(out);
    free(p);
    remove_tree(dir);
}

static void test_values_are_exact_words(void **state)
{
    (void)state;
    Config c;
    char err[512];
    int v;
    const char *bad[] = {" 128", "128 ", "+128", "1e2", "0x80", "", "-", "128abc", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (!parse_int(bad[i], &v)) fail_msg("parse_int '%s' accepted", bad[i]);
        config_init(&c);
        if (!config_set(&c, "depth", bad[i], err, sizeof err)) fail_msg("depth '%s' accepted", bad[i]);
        if (!config_set(&c, "bn", bad[i], err, sizeof err)) fail_msg("bn '%s' accepted", bad[i]);
    }
    assert_int_equal(parse_int("-1", &v), 0);
    assert_int_equal(v, -1);
    assert_int_equal(parse_int("2147483647", &v), 0);
    assert_int_equal(parse_int("2147483648", &v), -1);
    assert_int_equal(parse_int("-2147483649", &v), -1);
    assert_int_equal(cli("mha --target sm90a --depth ' 128'", NULL), 2);
}

static void test_errors_escape_what_they_echo(void **state)
{
    (void)state;
    char *out = NULL;
    const char *args[] = {"mha --target sm90a --depth 128 --mask 'none\nfoo'", "mha --target 'sm90a\nx' --depth 128",
                          "mha --target sm90a --depth '12\n8'", "'mh\na'", "mha --target sm90a --depth 128 '--b\nm' 1",
                          "mha --config 'mha target=sm90a\tqk=128 x\033[2J'", "explain --dtype 'bf\r16' --depth 128"};
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        assert_int_equal(cli_err(args[i], &out), 2);
        expect_one_line(out);
        assert_null(strchr(out, '\r'));
        assert_null(strchr(out, '\033'));
        free(out);
    }
    assert_int_equal(cli_err(args[0], &out), 2);
    assert_non_null(strstr(out, "'none\\x0afoo'"));
    free(out);
    /* a very long value is cut, and still one line */
    char big[1200] = "mha --target sm90a --depth 128 --dtype ";
    memset(big + strlen(big), 'x', 1000);
    assert_int_equal(cli_err(big, &out), 2);
    expect_one_line(out);
    assert_true(strlen(out) < 400);
    free(out);
}

static void test_unused_flags_refused(void **state)
{
    (void)state;
    char *out = NULL;
    char dir[] = "/tmp/fa4gen-flags-XXXXXX", args[512];
    assert_non_null(mkdtemp(dir));
    const char *bad[] = {"explain --target sm90a --depth 128 -o %s/x", "mha --target sm90a --depth 128 --json",
                         "mha --target sm90a --depth 128 -d %s", "explain --target sm90a --depth 128 -d %s",
                         "bundle %s/list -d %s --target sm100a", "bundle %s/list -d %s --depth 64",
                         "bundle %s/list -d %s --config mha", "bundle %s/list -d %s -o x", "bundle %s/list -d %s --json"};
    FILE *f;
    snprintf(args, sizeof args, "%s/list", dir);
    f = fopen(args, "w");
    fputs("mha target=sm90a dtype=bf16 qk=128 ov=128\n", f);
    fclose(f);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, bad[i], dir, dir);
        assert_int_equal(cli_err(args, &out), 2);
        expect_one_line(out);
        assert_non_null(strstr(out, "is not an option of this command"));
        free(out);
    }
    char ls[256], *listing = NULL;
    snprintf(ls, sizeof ls, "ls -A %s", dir);
    run_capture(ls, &listing);
    assert_string_equal(listing, "list\n");
    free(listing);
    remove_tree(dir);
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_mode;
}

static void test_output_targets(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4gen-out-XXXXXX", args[1400], path[256], link[256];
    assert_non_null(mkdtemp(dir));
    /* new files: 0666 minus the umask, not mkstemp's 0600 */
    snprintf(args, sizeof args, "sh -c 'umask 022; %s mha --target sm90a --depth 128 -o %s/a.ptx'", fa4gen(), dir);
    assert_int_equal(run_capture(args, NULL), 0);
    snprintf(path, sizeof path, "%s/a.ptx", dir);
    assert_int_equal(mode_of(path) & 0777, 0644);
    snprintf(args, sizeof args, "sh -c 'umask 077; %s mha --target sm90a --depth 128 -o %s/b.ptx'", fa4gen(), dir);
    assert_int_equal(run_capture(args, NULL), 0);
    snprintf(path, sizeof path, "%s/b.ptx", dir);
    assert_int_equal(mode_of(path) & 0777, 0600);
    /* a replaced file keeps its mode */
    assert_int_equal(chmod(path, 0640), 0);
    snprintf(args, sizeof args, "mha --target sm90a --depth 64 -o %s", path);
    assert_int_equal(cli(args, NULL), 0);
    assert_int_equal(mode_of(path) & 0777, 0640);
    /* a symlink: its target is written, the link stays */
    snprintf(link, sizeof link, "%s/link.ptx", dir);
    assert_int_equal(symlink("b.ptx", link), 0);
    snprintf(args, sizeof args, "mha --target sm90a --depth 128 -o %s", link);
    assert_int_equal(cli(args, NULL), 0);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_true(mode_of(path) & S_IFREG);
    char *out = NULL, *via = NULL;
    assert_int_equal(cli("mha --target sm90a --depth 128", &out), 0);
    snprintf(args, sizeof args, "cat %s", path);
    assert_int_equal(run_capture(args, &via), 0);
    assert_string_equal(out, via);
    free(via);
    /* a dangling link is refused, and nothing is created */
    char dangling[256];
    snprintf(dangling, sizeof dangling, "%s/dangling.ptx", dir);
    assert_int_equal(symlink("nowhere/x.ptx", dangling), 0);
    snprintf(args, sizeof args, "mha --target sm90a --depth 128 -o %s", dangling);
    assert_int_equal(cli(args, NULL), 1);
    /* a device, FIFO or directory is refused by name (issue 26 3(d): a FIFO blocked, a directory
     * exited 1 without a reason); -o - is stdout */
    char fifo[256], *err = NULL;
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    const char *nodes[][2] = {{"/dev/null", "a character device"}, {fifo, "a FIFO"}, {dir, "a directory"}};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "mha --target sm90a --depth 128 -o %s", nodes[i][0]);
        assert_int_equal(cli_err(args, &err), 2);
        expect_one_line(err);
        if (!strstr(err, nodes[i][1]) || !strstr(err, nodes[i][0])) fail_msg("-o %s: %s", nodes[i][0], err);
        free(err);
    }
    assert_true(S_ISCHR(mode_of("/dev/null")) && S_ISFIFO(mode_of(fifo)));
    assert_int_equal(cli("mha --target sm90a --depth 128 -o -", &via), 0);
    assert_string_equal(out, via);
    free(via);
    free(out);
    remove_tree(dir);
}

static void test_stdout_write_errors(void **state)
{
    (void)state;
    const char *cmds[] = {"explain --target sm90a --depth 128", "explain --target sm90a --depth 128 --json",
                          "mha --target sm90a --depth 128", "--help", "mha --help", "--version"};
    char cmd[512], *out = NULL;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s %s 2>&1 >/dev/full", fa4gen(), cmds[i]);
        if (run_capture(cmd, &out) != 1) fail_msg("'%s' into /dev/full: not exit 1", cmds[i]);
        assert_non_null(strstr(out, "cannot write to stdout"));
        free(out);
    }
}

/* Writes text to DIR/list. */
static void write_list(const char *dir, const char *text, size_t len)
{
    char path[256];
    snprintf(path, sizeof path, "%s/list", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
}

static char *listing_of(const char *dir)
{
    char ls[600], *listing = NULL;
    snprintf(ls, sizeof ls, "ls -A %s", dir);
    run_capture(ls, &listing);
    return listing;
}

static void test_bundle_lists(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4gen-bundle-XXXXXX", args[512], *out = NULL, *listing;
    assert_true(strlen(dir) < 64);
    assert_non_null(mkdtemp(dir));
    /* a comment longer than any buffer adds no kernel */
    char *text = malloc(5000);
    strcpy(text, "# ");
    memset(text + 2, 'x', 3000);
    strcpy(text + 3002, " mha target=sm90a dtype=bf16 qk=64 ov=64\nmha target=sm90a dtype=bf16 qk=128 ov=128\n");
    write_list(dir, text, strlen(text));
    snprintf(args, sizeof args, "bundle %s/list -d %s/out", dir, dir);
    assert_int_equal(cli(args, &out), 0);
    assert_int_equal(strstr(out, "\n") - out + 1, (long)strlen(out)); /* one kernel */
    assert_non_null(strstr(out, "qk=128"));
    free(out);
    /* a long config line is refused as the line it is */
    strcpy(text, "mha target=sm90a dtype=bf16 qk=128 ov=128\nmha target=sm90a dtype=bf16 qk=128 ov=128 ");
    memset(text + strlen(text), ' ', 1500);
    strcpy(text + 2000, "qk=64 ov=64\n");
    for (int i = 0; i < 2000; i++) if (!text[i]) text[i] = ' ';
    write_list(dir, text, strlen(text));
    snprintf(args, sizeof args, "bundle %s/list -d %s/out2", dir, dir);
    assert_int_equal(cli_err(args, &out), 2);
    expect_one_line(out);
    assert_non_null(strstr(out, "line 2:"));
    free(out);
    /* a NUL byte is refused */
    static const char nul[] = "mha target=sm90a dtype=bf16 qk=128 ov=128\0 qk=64\n";
    write_list(dir, nul, sizeof nul - 1);
    assert_int_equal(cli_err(args, &out), 2);
    assert_non_null(strstr(out, "line 1: holds a NUL byte"));
    free(out);
    /* duplicates are reported as duplicates and written once; comments may be indented */
    const char *dup = "mha target=sm90a dtype=bf16 qk=128 ov=128\n  # indented comment\n\t\n"
                      "mha target=sm90a dtype=bf16 qk=128 ov=128 bn=176\n";
    write_list(dir, dup, strlen(dup));
    assert_int_equal(cli_err(args, &out), 0);
    assert_non_null(strstr(out, "line 4: the same kernel as line 1"));
    assert_non_null(strstr(out, "bundle: 1 kernels"));
    free(out);
    snprintf(args, sizeof args, "%s/out2", dir);
    listing = listing_of(args);
    assert_int_equal(strlen(listing), strlen("fa4_mha_sm90a_0123456789abcdef.ptx\n"));
    free(listing);
    /* a duplicate before a refused line: the refusal alone, one line (found by fuzz_bundle) */
    const char *dup_bad = "mha target=sm90a dtype=bf16 qk=128 ov=128\nmha target=sm90a dtype=bf16 qk=128 ov=128\n"
                          "mha target=sm90a dtype=bf16 qk=128]\n";
    write_list(dir, dup_bad, strlen(dup_bad));
    snprintf(args, sizeof args, "bundle %s/list -d %s/out4", dir, dir);
    assert_int_equal(cli_err(args, &out), 2);
    expect_one_line(out);
    assert_non_null(strstr(out, "line 3: qk: '128]'"));
    free(out);
    /* an I/O failure halfway (the second file over the file-size limit) leaves nothing behind,
     * whether DIR existed (out2) or not (out3) */
    const char *two = "mha target=sm90a dtype=bf16 qk=64 ov=64 mask=none\n"
                      "mha target=sm100a dtype=bf16 qk=128 ov=128 mask=causal\n";
    write_list(dir, two, strlen(two));
    char *sizes = NULL;
    snprintf(args, sizeof args, "%s mha --config '%.49s' | wc -c; %s mha --config '%s' | wc -c", fa4gen(), two,
             fa4gen(), strchr(two, '\n') + 1);
    for (char *nl = strchr(args, '\n'); nl; nl = strchr(nl, '\n')) *nl = ' ';
    assert_int_equal(run_capture(args, &sizes), 0);
    long first = strtol(sizes, NULL, 10), second = strtol(strchr(sizes, '\n') + 1, NULL, 10);
    free(sizes);
    assert_true(first + 4096 < second);
    for (int fresh = 0; fresh < 2; fresh++) {
        snprintf(args, sizeof args, "sh -c 'trap \"\" XFSZ; ulimit -f %ld; exec %s bundle %s/list -d %s/%s' 2>&1",
                 (first + 2048) / 512, fa4gen(), dir, dir, fresh ? "out3" : "out2");
        assert_int_equal(run_capture(args, &out), 1);
        assert_non_null(strstr(out, "cannot write"));
        free(out);
    }
    listing = listing_of(dir);
    assert_string_equal(listing, "list\nout\nout2\n");
    free(listing);
    snprintf(args, sizeof args, "%s/out2", dir);
    listing = listing_of(args);
    assert_int_equal(strlen(listing), strlen("fa4_mha_sm90a_0123456789abcdef.ptx\n")); /* as it was */
    free(listing);
    /* -d onto a file is refused */
    snprintf(args, sizeof args, "bundle %s/list -d %s/list", dir, dir);
    assert_int_equal(cli(args, NULL), 2);
    free(text);
    remove_tree(dir);
}

/* The op layer checks each register operand's class (issue 12): a guard is a predicate,
 * perhaps negated; REG_NONE is "unguarded" or, for the UMMA accumulate flag, the immediate 1;
 * a register of the wrong class is refused with a message naming the op and the operand. */
static void test_op_operands(void **state)
{
    (void)state;
    Emit *e = malloc(sizeof *e);
    emit_init(e, NULL);
    Reg bar = reg_b32(e, "bar"), p = reg_pred(e, "p"), d = reg_b32(e, "d"), desc = reg_b64(e, "desc");
    op_mbar_arrive_if(e, reg_not(e, p), bar);
    op_mbar_arrive(e, bar);
    op_umma_ss(e, 1, 0, d, desc, desc, d, REG_NONE);
    op_umma_ss(e, 1, 0, d, desc, desc, d, p);
    assert_false(e->failed);
    assert_non_null(strstr(e->body.p, "@!%p mbarrier.arrive.shared::cta.b64 _, [%bar];"));
    assert_non_null(strstr(e->body.p, "    mbarrier.arrive.shared::cta.b64 _, [%bar];"));
    assert_non_null(strstr(e->body.p, "[%d], %desc, %desc, %d, 1;"));
    assert_non_null(strstr(e->body.p, "[%d], %desc, %desc, %d, %p;"));
    op_mbar_wait(e, bar, p); /* a parity given a predicate */
    assert_true(e->failed);
    assert_non_null(strstr(e->err, "op_mbar_wait"));
    assert_non_null(strstr(e->err, "parity"));
    emit_free(e);

    emit_init(e, NULL);
    bar = reg_b32(e, "bar");
    op_mbar_arrive_if(e, bar, bar); /* a guard that is not a predicate */
    assert_true(e->failed);
    assert_non_null(strstr(e->err, "guard"));
    emit_free(e);
    free(e);
}

/* ---- sinks and score_mod (issue 10) ---- */

/* What NVRTC writes for a small mod (a branch, a parameter load per argument, the return). */
static const char mod_ptx[] =
    ".version 9.0\n.target sm_90a\n.address_size 64\n\n"
    ".global .align 4 .f32 table[2] = {0f3F800000, 0f40000000};\n"
    ".visible .func  (.param .b32 func_retval0) fa4_score_mod(\n"
    "\t.param .b32 fa4_score_mod_param_0,\n\t.param .b32 fa4_score_mod_param_1,\n"
    "\t.param .b32 fa4_score_mod_param_2,\n\t.param .b32 fa4_score_mod_param_3,\n"
    "\t.param .b32 fa4_score_mod_param_4,\n\t.param .b64 fa4_score_mod_param_5\n)\n{\n"
    "\t.reg .pred \t%p<2>;\n\t.reg .b32 \t%r<3>;\n\t.reg .f32 \t%f<4>;\n\t.reg .b64 \t%rd<2>;\n\n"
    "\tld.param.f32 \t%f1, [fa4_score_mod_param_0];\n"
    "\tld.param.u32 \t%r1, [fa4_score_mod_param_3];\n"
    "\tld.param.u32 \t%r2, [fa4_score_mod_param_4];\n"
    "\tld.param.u64 \t%rd1, [fa4_score_mod_param_5];\n"
    "\tsetp.gt.s32 \t%p1, %r2, %r1;\n"
    "\t@%p1 bra \t$L__BB0_2;\n"
    "\tmov.f32 \t%f1, 0fFF800000;\n"
    "$L__BB0_2:\n"
    "\tst.param.f32 \t[func_retval0+0], %f1;\n"
    "\tret;\n\n}\n";

static void test_sink_mod_config(void **state)
{
    (void)state;
    Config c = parse_ok("mha target=sm90a dtype=bf16 qk=128 ov=128 sink=1 mod=0123456789abcdef mask=causal");
    assert_int_equal(c.sink, 1);
    assert_true(c.score_mod == 0x0123456789abcdefull);
    Plan *p = malloc(sizeof *p);
    char err[256];
    assert_int_equal(plan_make(&c, p, err, sizeof err), 0);
    if (!strstr(p->canonical, " sink=1") || !strstr(p->canonical, " mod=0123456789abcdef"))
        fail_msg("canonical %s", p->canonical);
    Config back = parse_ok(p->canonical);
    assert_true(back.score_mod == c.score_mod && back.sink == 1);
    const char *tail[3] = {"sink", "sm_scale", "aux"};
    for (int i = 0; i < 3; i++) assert_string_equal(p->params[p->n_params - 3 + i].name, tail[i]);
    /* no features: the canonical text (and so every kernel's PTX and symbol) is what it was */
    Plan *q = malloc(sizeof *q);
    plan_ok("mha target=sm90a dtype=bf16 qk=128 ov=128 mask=causal", q);
    if (strstr(q->canonical, "sink") || strstr(q->canonical, "mod=")) fail_msg("canonical %s", q->canonical);
    assert_int_equal(q->n_params, p->n_params - 3);
    assert_true(q->hash != p->hash);
    /* mod= without its source cannot be generated */
    char *ptx = NULL;
    size_t len;
    assert_int_equal(fa4gen_generate(&c, p, &ptx, &len, err, sizeof err), -1);
    if (!strstr(err, "score_mod source")) fail_msg("error %s", err);
    free(p), free(q);
    const char *bad[][2] = {{"mha target=sm90a qk=128 mod=12345", "mod:"}, {"mha target=sm90a qk=128 mod=0000000000000000", "mod:"},
                            {"mha target=sm90a qk=128 mod=0123456789ABCDEF", "mod:"}, {"mha target=sm90a qk=128 sink=2", "sink:"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) expect_plan_error(bad[i][0], bad[i][1]);
    expect_plan_error("mla-sparse target=sm90a qk=576 ov=512 sink=1", "MHA features");
    assert_true(score_mod_hash("a") != score_mod_hash("b") && score_mod_hash("") != 0);
}

/* The built-in soft-cap and ALiBi (issue 27): config words named only when on, their parameters after the base
 * ABI, the PTX's tanh.approx and the slope load; refused with mod= and for other kinds. */
static void test_softcap_alibi_config(void **state)
{
    (void)state;
    const char *targets[2] = {"sm90a", "sm100a"};
    for (int t = 0; t < 2; t++) {
        char text[160];
        snprintf(text, sizeof text, "mha target=%s dtype=bf16 qk=128 ov=128 softcap=1 alibi=1 mask=causal", targets[t]);
        Plan *p = malloc(sizeof *p);
        plan_ok(text, p);
        if (!strstr(p->canonical, " softcap=1") || !strstr(p->canonical, " alibi=1")) fail_msg("canonical %s", p->canonical);
        const char *tail[3] = {"softcap_scale", "alibi", "alibi_scale"};
        for (int i = 0; i < 3; i++) assert_string_equal(p->params[p->n_params - 3 + i].name, tail[i]);
        char *ptx = NULL, err[256];
        size_t len;
        Config cfg = p->cfg; /* fa4gen_generate plans into p again */
        if (fa4gen_generate(&cfg, p, &ptx, &len, err, sizeof err)) fail_msg("%s: %s", targets[t], err);
        if (!strstr(ptx, "tanh.approx.f32") || !strstr(ptx, "[p_alibi]") || !strstr(ptx, "abs.f32"))
            fail_msg("%s: no softcap / alibi in the PTX", targets[t]);
        free(ptx);
        Plan *q = malloc(sizeof *q);
        snprintf(text, sizeof text, "mha target=%s dtype=bf16 qk=128 ov=128 mask=causal", targets[t]);
        plan_ok(text, q);
        if (strstr(q->canonical, "softcap") || strstr(q->canonical, "alibi")) fail_msg("canonical %s", q->canonical);
        assert_int_equal(q->n_params, p->n_params - 3);
        free(p), free(q);
    }
    expect_plan_error("mha target=sm90a qk=128 softcap=1 mod=0123456789abcdef", "softcap:");
    expect_plan_error("mha target=sm90a qk=128 alibi=2", "alibi:");
    expect_plan_error("mla-sparse target=sm90a qk=576 ov=512 alibi=1", "alibi");
}

/* The splice: every site gets the function's instructions with its registers renamed, its labels
 * suffixed per site, parameter loads from the site's registers and the return into the score. */

/* Split-KV (issue 15): split=1 is in the canonical text only when on, adds the split parameters at the
 * end, packs the GQA group on sm90a; the combine family's canonical form is target, dtype, ov; the
 * refusals name the field. */
/* early=1: named in the canonical form (so the hash) only when on, the same parameters (early loads
 * change when K/V are read, not what the kernel takes), the plan's flag and explain line, both targets;
 * refused where no early loads exist. */
static void test_early_kv_config(void **state)
{
    (void)state;
    Plan *p = malloc(sizeof *p), *q = malloc(sizeof *q);
    for (int t = 0; t < 2; t++) {
        const char *tgt = t ? "sm100a" : "sm90a";
        char text[160];
        snprintf(text, sizeof text, "mha target=%s dtype=bf16 qk=128 ov=128 group=8 split=1 early=1 mask=none", tgt);
        plan_ok(text, p);
        if (!strstr(p->canonical, " split=1 early=1")) fail_msg("canonical %s", p->canonical);
        assert_int_equal(parse_ok(p->canonical).early, 1);
        assert_true(p->pdl_early_kv && p->pdl_dependent);
        snprintf(text, sizeof text, "mha target=%s dtype=bf16 qk=128 ov=128 group=8 split=1 mask=none", tgt);
        plan_ok(text, q);
        if (strstr(q->canonical, "early")) fail_msg("canonical %s", q->canonical);
        assert_true(!q->pdl_early_kv && q->hash != p->hash);
        assert_int_equal(p->n_params, q->n_params);
        char *ex = plan_explain_text(p);
        assert_non_null(ex);
        if (!strstr(ex, "pdl   early kv:")) fail_msg("explain: %s", ex);
        free(ex);
    }
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 early=1 mask=none", "early");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 split=1 early=1 varlen=1 mask=none", "early");
    /* paged: the lengths and table entries are read before the wait too (kv_early's promise covers them) */
    plan_ok("mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 split=1 early=1 page=64 mask=none", p);
    assert_true(p->pdl_early_kv && !p->pdl_prefetch_kv);
    plan_ok("mha target=sm100a dtype=bf16 qk=128 ov=128 group=8 split=1 early=1 page=16 mask=none", p);
    assert_true(p->pdl_early_kv && !p->pdl_prefetch_kv);
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 cluster=4 early=1 mask=none", "early");
    expect_plan_error("mha target=sm100a dtype=bf16 qk=128 ov=128 group=8 split=1 early=1 cta=2 mask=none", "early");
    free(p);
    free(q);
}

/* prefetch=N: the split kernel over dense or paged K/V names it always (0 is a choice; unset = 2, or 0
 * under early=1), other kernels never; the plan's count, explain line and JSON field; in the PTX every L2
 * prefetch precedes the loader's griddepcontrol.wait and names the K and V maps; refused elsewhere. */
/* plan pdl prefetch kv on the dense sm90a forward (plan pdl watch): its default, one block, is not named and 0 is;
 * warp 1 passes griddepcontrol.wait and arrives on bar_prev; the producer tests bar_prev
 * without blocking and only while it is open prefetches the first tile's Q and K/V, then waits itself; the
 * consumers wait at their role's start and the prologue does not. prefetch=0 keeps the prologue's wait. */
static void test_dense_prefetch(void **state)
{
    (void)state;
    Plan *p = malloc(sizeof *p);
    static const struct { const char *words; int want, watch; } cases[] = {
        {"qk=128 ov=128 mask=none", 1, 1}, {"qk=128 ov=128 prefetch=0 mask=causal", 0, -1},
        {"qk=128 ov=128 prefetch=3 mask=causal", 3, 1}, {"qk=256 ov=256 bn=48 mask=none", 1, 1},
        {"qk=128 ov=128 timeline=1 mask=none", 1, 1}, {"qk=64 ov=64 persistent=0 mask=causal", 1, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[200];
        snprintf(text, sizeof text, "mha target=sm90a dtype=bf16 %s", cases[i].words);
        char *ptx = plan_ptx(text, p);
        assert_non_null(ptx);
        assert_int_equal(p->pdl_prefetch_kv, cases[i].want);
        if (!strstr(p->canonical, " prefetch=") != (cases[i].want == 1)) fail_msg("canonical %s", p->canonical);
        Plan *back = malloc(sizeof *back); /* the canonical text reads back to the same kernel */
        plan_ok(p->canonical, back);
        assert_int_equal(back->pdl_prefetch_kv, cases[i].want);
        assert_string_equal(back->canonical, p->canonical);
        free(back);
        const Sm90Plan *s = sm90_of(p);
        assert_int_equal(s->watch_warp, cases[i].watch);
        const char *entry = strstr(ptx, "role dispatch"), *cons = strstr(ptx, "role consumers");
        assert_true(entry && cons);
        const char *pro_wait = strstr(ptx, "griddepcontrol.wait;");
        if ((pro_wait < entry) != !cases[i].want) fail_msg("%s: the prologue's wait", text);
        if (cases[i].want) {
            const char *test = strstr(ptx, "mbarrier.test_wait.parity.shared::cta.b64 %p_role, [%pr_prev], 0;");
            const char *qpf = strstr(ptx, "cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%tmap_q,");
            const char *kpf = strstr(ptx, "cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%tmap_k,");
            assert_true(test && qpf && kpf && test < qpf && qpf < kpf);
            const char *pwait = strstr(kpf, "griddepcontrol.wait;"), *load = strstr(kpf, "cp.async.bulk.tensor");
            assert_true(pwait && load && pwait < load);
            const char *watch_l = strstr(ptx, "$watch:");
            assert_non_null(watch_l);
            const char *ww = strstr(watch_l, "griddepcontrol.wait;"), *wa = strstr(watch_l, "mbarrier.arrive");
            assert_true(ww && wa && ww < wa);
            assert_non_null(strstr(strstr(cons, "setmaxnreg"), "griddepcontrol.wait;"));
            assert_non_null(plan_mbar_find(p, "bar_prev"));
        } else {
            assert_null(strstr(ptx, "$watch:"));
            assert_null(strstr(ptx, "cp.async.bulk.prefetch"));
            assert_null(plan_mbar_find(p, "bar_prev"));
        }
        free(ptx);
    }
    free(p);
}

static void test_prefetch_kv_config(void **state)
{
    (void)state;
    Plan *p = malloc(sizeof *p);
    char text[200];
    for (int t = 0; t < 2; t++) {
        const char *tgt = t ? "sm100a" : "sm90a";
        static const struct { const char *words; int want; } cases[] = {
            {"split=1", 2}, {"split=1 early=1", 0}, {"split=1 prefetch=0", 0}, {"split=1 early=1 prefetch=3", 3},
            {"split=1 prefetch=16", 16}};
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            snprintf(text, sizeof text, "mha target=%s dtype=bf16 qk=128 ov=128 group=8 %s mask=none", tgt, cases[i].words);
            plan_ok(text, p);
            char want[32];
            snprintf(want, sizeof want, " prefetch=%d ", cases[i].want);
            if (!strstr(p->canonical, want)) fail_msg("%s: canonical %s", text, p->canonical);
            assert_int_equal(parse_ok(p->canonical).prefetch, cases[i].want);
            assert_int_equal(p->pdl_prefetch_kv, cases[i].want);
            char *ex = plan_explain_text(p), *js = plan_explain_json(p);
            assert_true(ex && js);
            if (!strstr(ex, "pdl   prefetch kv:") != !cases[i].want) fail_msg("explain: %s", ex);
            snprintf(want, sizeof want, "\"pdl_prefetch_kv\": %d}", cases[i].want);
            if (!strstr(js, want)) fail_msg("json: %s", js);
            free(ex);
            free(js);
            char *ptx = NULL, err[256];
            size_t len = 0;
            Config c = parse_ok(p->canonical);
            assert_int_equal(fa4gen_generate(&c, p, &ptx, &len, err, sizeof err), 0);
            const char *pf = strstr(ptx, "cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%tmap_k,");
            if (!pf != !cases[i].want) fail_msg("%s: K prefetch %s", text, pf ? "present" : "missing");
            if (pf) { /* V's too; after each prefetch the loader waits before it loads anything more */
                assert_non_null(strstr(pf, "cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%tmap_v,"));
                for (const char *q = pf; q; q = strstr(q + 1, "cp.async.bulk.prefetch")) {
                    const char *wait = strstr(q, "griddepcontrol.wait;"), *load = strstr(q, "expect_tx");
                    assert_true(wait && load && wait < load);
                }
            }
            free(ptx);
        }
        /* unsplit: the dense sm90a forward prefetches one block by default (not named), sm100a none */
        snprintf(text, sizeof text, "mha target=%s dtype=bf16 qk=128 ov=128 group=8 mask=none", tgt);
        plan_ok(text, p);
        if (strstr(p->canonical, "prefetch")) fail_msg("canonical %s", p->canonical);
        assert_int_equal(p->pdl_prefetch_kv, t ? 0 : 1);
    }
    static const char *const bad[] = {
        "mha target=sm100a dtype=bf16 qk=128 ov=128 group=8 prefetch=2 mask=none",
        "mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 varlen=1 prefetch=1 mask=none",
        "mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 page=16 prefetch=1 mask=none",
        "mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 split=1 prefetch=2 varlen=1 mask=none",
        "mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 cluster=4 prefetch=2 mask=none",
        "mha target=sm100a dtype=bf16 qk=128 ov=128 group=8 split=1 prefetch=2 cta=2 mask=none",
        "mla-sparse target=sm90a qk=576 ov=512 prefetch=1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) expect_plan_error(bad[i], "prefetch");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 split=1 prefetch=17 mask=none", "0..16");
    /* paged: the loader reads the length and table entries before the wait only to aim its prefetches,
     * so after the wait it reads the sequence's length again before it loads anything */
    for (int t = 0; t < 2; t++) {
        snprintf(text, sizeof text, "mha target=%s dtype=bf16 qk=128 ov=128 group=8 split=1 page=16 mask=causal",
                 t ? "sm100a" : "sm90a");
        char *ptx = plan_ptx(text, p);
        if (!strstr(p->canonical, " prefetch=2 page=16 ")) fail_msg("canonical %s", p->canonical);
        const char *pf = strstr(ptx, "cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%tmap_k, {%pf_col, %pf_prow, "
                                     "%kv_head, %pf_page}];");
        assert_non_null(pf);
        const char *wait = strstr(pf, "griddepcontrol.wait;"), *len_again = strstr(pf, "ld.global.s32 %seqlen_k,");
        const char *load = strstr(pf, "expect_tx");
        assert_true(wait && len_again && load && wait < len_again && len_again < load);
        free(ptx);
    }
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 split=1 prefetch=2 varlen=1 page=64 mask=none",
                      "prefetch");
    free(p);
}

/* plan kv tail (issue 26 item 5): every varlen or paged MHA kernel of both targets zeroes its tail block's V
 * rows past the end (a scrub warp, bar_v_tail per stage or V slot, named barrier scrub of 32 threads, explain's
 * note); paged lookups are bounded by the pages the length uses. stale=1 turns it off (in the canonical form
 * only then) and emits the kernel as before but for its config line; it is refused where it changes nothing. */
static void test_kv_tail_plan(void **state)
{
    (void)state;
    Plan *p = malloc(sizeof *p), *q = malloc(sizeof *q);
    char text[200];
    static const char *const words[] = {"varlen=1", "page=16", "varlen=1 page=64", "group=8 split=1 page=64",
                                        "group=8 split=1 early=1 page=16", "group=4 cluster=4 varlen=1"};
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
            if (t && strstr(words[i], "cluster")) continue; /* the cluster split is sm90a's */
            snprintf(text, sizeof text, "mha target=%s dtype=bf16 qk=128 ov=128 %s mask=causal", t ? "sm100a" : "sm90a",
                     words[i]);
            plan_ok(text, p);
            assert_int_equal(p->kv_tail, 1);
            assert_int_equal(p->kv_tail_pass, 512);
            if (strstr(p->canonical, "stale")) fail_msg("canonical %s", p->canonical);
            const PlanMbar *m = plan_mbar_find(p, "bar_v_tail");
            assert_non_null(m);
            assert_int_equal(m->count, 1);
            int slots = t ? sm100_of(p)->ring[sm100_of(p)->fused ? 0 : 1].slots : p->stages;
            assert_int_equal(m->n, slots);
            int scrub = -1, bar = -1;
            for (int r = 0; r < p->n_roles; r++)
                if (!strcmp(p->roles[r].name, "scrub")) scrub = p->roles[r].first_warp;
            for (int b = 0; b < p->n_bars; b++)
                if (!strcmp(p->bars[b].name, "scrub")) bar = p->bars[b].threads;
            assert_int_equal(scrub, t ? sm100_of(p)->warp_scrub : sm90_of(p)->scrub_warp);
            assert_int_equal(bar, 32);
            char *ex = plan_explain_text(p);
            assert_non_null(ex);
            if (!strstr(ex, "kv tail ")) fail_msg("explain: %s", ex);
            free(ex);
            char *ptx = NULL, *old = NULL, err[256];
            size_t len = 0, olen = 0;
            Config c = parse_ok(p->canonical);
            assert_int_equal(fa4gen_generate(&c, p, &ptx, &len, err, sizeof err), 0);
            assert_non_null(strstr(ptx, "role scrub"));
            assert_non_null(strstr(ptx, "fence.proxy.async.shared::cta;\n    // plan: named barrier scrub"));
            if (strstr(words[i], "page")) {
                assert_non_null(strstr(ptx, "%pg_used"));
                assert_null(strstr(ptx, "%pg_idx, %max_pages;"));
            }
            /* stale=1: the kernel before the tail isolation, named in the canonical form */
            char stale[220];
            snprintf(stale, sizeof stale, "%s stale=1", text);
            plan_ok(stale, q);
            assert_int_equal(q->kv_tail, 0);
            assert_null(plan_mbar_find(q, "bar_v_tail"));
            if (!strstr(q->canonical, " stale=1 ")) fail_msg("canonical %s", q->canonical);
            assert_int_equal(parse_ok(q->canonical).stale, 1);
            Config oc = parse_ok(q->canonical);
            assert_int_equal(fa4gen_generate(&oc, q, &old, &olen, err, sizeof err), 0);
            assert_null(strstr(old, "role scrub"));
            assert_null(strstr(old, "%pg_used"));
            free(ptx);
            free(old);
        }
    plan_ok("mha target=sm90a dtype=bf16 qk=128 ov=128 mask=causal", p);
    assert_int_equal(p->kv_tail, 0);
    assert_null(plan_mbar_find(p, "bar_v_tail"));
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 stale=1 mask=causal", "stale");
    expect_plan_error("mha target=sm100a dtype=bf16 qk=128 ov=128 group=8 split=1 stale=1 mask=none", "stale");
    free(p);
    free(q);
}

/* config timeline=1 (debug): named in the canonical form only when on, a p_timeline parameter last, a store to
 * every slot of MhaTimelineSlot in the PTX (none without it); refused where it has no kernel. */
static void test_timeline_config(void **state)
{
    (void)state;
    Plan *p = malloc(sizeof *p), *q = malloc(sizeof *q);
    static const char *const base[] = {"mha target=sm90a dtype=bf16 qk=128 ov=128 mask=none",
                                       "mha target=sm90a dtype=fp16 qk=64 ov=64 mask=causal",
                                       "mha target=sm90a dtype=bf16 qk=256 ov=256 bm=64 mask=causal"};
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) {
        char text[200], err[256];
        snprintf(text, sizeof text, "%s timeline=1", base[i]);
        plan_ok(base[i], p);
        plan_ok(text, q);
        assert_null(strstr(p->canonical, "timeline"));
        if (!strstr(q->canonical, " timeline=1 ")) fail_msg("canonical %s", q->canonical);
        assert_int_equal(q->n_params, p->n_params + 1);
        assert_string_equal(q->params[q->n_params - 1].name, "timeline");
        char *on = NULL, *off = NULL;
        size_t n_on = 0, n_off = 0;
        Config c_on = parse_ok(q->canonical), c_off = parse_ok(p->canonical);
        assert_int_equal(fa4gen_generate(&c_on, q, &on, &n_on, err, sizeof err), 0);
        assert_int_equal(fa4gen_generate(&c_off, p, &off, &n_off, err, sizeof err), 0);
        assert_null(strstr(off, "clock64"));
        for (int slot = 0; slot < MHA_TIMELINE_SLOTS; slot++) { /* every slot is written */
            char st[48];
            snprintf(st, sizeof st, "st.global.b64 [%%tl_rec+%d], ", slot * 8);
            if (!strstr(on, st)) fail_msg("%s: no store to slot %d", q->canonical, slot);
        }
        free(on);
        free(off);
    }
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 split=1 timeline=1 mask=none", "timeline");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 varlen=1 timeline=1 mask=none", "timeline");
    expect_plan_error("mha target=sm100a dtype=bf16 qk=128 ov=128 timeline=1 mask=none", "timeline");
    free(p);
    free(q);
}

static int occurrences(const char *text, const char *what)
{
    int n = 0;
    for (const char *at = strstr(text, what); at; at = strstr(at + 1, what)) n++;
    return n;
}

/* plan note q release: with two Q slots and the plain epilogue a slot is freed one tile after its O store (the
 * leader's wait_group.read moves from the epilogue to the next tile's first QK and to the no-key path); one slot,
 * varlen, or the A/B word store_wait=1 keep the wait in the epilogue; store_wait is named only when on, and
 * refused where it has no kernel. */
static void test_q_release(void **state)
{
    (void)state;
    Plan *p = malloc(sizeof *p);
    static const struct { const char *text; int slots, late; } cases[] = {
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 mask=none", 2, 1},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 store_wait=1 mask=none", 2, 0},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=176 mask=none", 1, 0},
        {"mha target=sm90a dtype=fp16 qk=64 ov=64 bm=128 mask=causal persistent=1", 2, 1},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 varlen=1 mask=none", 2, 0},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 persistent=0 mask=none", 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *ptx = plan_ptx(cases[i].text, p);
        const Sm90Plan *s = sm90_of(p);
        if (s->q_slots != cases[i].slots || s->q_release_late != cases[i].late)
            fail_msg("%s: q_slots %d q_release_late %d", cases[i].text, s->q_slots, s->q_release_late);
        assert_int_equal(strstr(p->canonical, "store_wait") != NULL, strstr(cases[i].text, "store_wait") != NULL);
        int reads = occurrences(ptx, "cp.async.bulk.wait_group.read 0;");
        int released = occurrences(ptx, "plan note q release: free the previous tile's Q slot");
        if (cases[i].late ? reads != 2 || released != 2 : released != 0)
            fail_msg("%s: %d wait_group.read, %d late releases", cases[i].text, reads, released);
        free(ptx);
    }
    expect_plan_error("mha target=sm100a dtype=bf16 qk=128 ov=128 store_wait=1 mask=none", "store_wait");
    free(p);
}

/* plan note o zero: a tile's first P V writes O (its first k-step's scale-d the predicate %cs_o_acc, false at the
 * tile's top), and the 64 moves that zero O sit only on the no-keys path; o_zero=1 keeps them at every tile's top.
 * plan note o stmatrix: the epilogue stages O with stmatrix.x4; o_sts=1 with st.shared.b32. */
static void test_o_zero(void **state)
{
    (void)state;
    Plan *p = malloc(sizeof *p);
    char *on = plan_ptx("mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 mask=causal", p);
    assert_non_null(strstr(on, "{%pa0, %pa1, %pa2, %pa3}, %cs_vd, %cs_o_acc, 1, 1, 1;"));
    const char *top = strstr(on, "fresh row state"), *zero = strstr(on, "mov.f32 %o0, 0f00000000;");
    const char *empty = strstr(on, "plan note o zero: no P V wrote O");
    if (!top || !zero || !empty || zero < empty) fail_msg("O's moves are not on the no-keys path only");
    char *off = plan_ptx("mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 o_zero=1 mask=causal", p);
    assert_null(strstr(off, "%cs_o_acc"));
    assert_non_null(strstr(p->canonical, " o_zero=1 "));
    /* plan note o stmatrix: O staged by 8 stmatrix.x4 at d128 (16 columns each), none with o_sts=1 */
    int n = 0;
    for (const char *c = on; (c = strstr(c, "stmatrix.sync.aligned.m8n8.x4.shared.b16")); c++) n++;
    assert_int_equal(n, 8);
    free(off);
    off = plan_ptx("mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 o_sts=1 mask=causal", p);
    assert_null(strstr(off, "stmatrix"));
    assert_non_null(strstr(p->canonical, " o_sts=1 "));
    free(on);
    free(off);
    free(p);
}

/* plan note coords ahead: a persistent, dense, unsplit consumer with registers to spare computes the next tile's
 * coordinates during the tile before (the PTX saves and restores every register mha_tile_coords defines); d256 at
 * bn 32 and 48 too; bm 192 (160 registers), bn 176, d256 at bn 80, windows, non-persistent kernels and coords_late=1
 * do not. */
static void test_coords_ahead(void **state)
{
    (void)state;
    Plan *p = malloc(sizeof *p);
    static const struct { const char *text; int on; } cases[] = {
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 mask=none", 1},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 coords_late=1 mask=none", 0},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=176 mask=none", 0},
        {"mha target=sm90a dtype=fp16 qk=64 ov=64 bm=128 persistent=1 mask=causal", 1},
        {"mha target=sm90a dtype=bf16 qk=64 ov=64 bm=192 mask=none", 0},
        {"mha target=sm90a dtype=bf16 qk=256 ov=256 bn=48 mask=none", 1},
        {"mha target=sm90a dtype=bf16 qk=256 ov=256 bn=32 stages=3 mask=none", 1},
        {"mha target=sm90a dtype=bf16 qk=256 ov=256 bn=80 mask=none", 0},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 persistent=1 mask=window:64,0", 0},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 persistent=0 mask=causal", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *ptx = plan_ptx(cases[i].text, p);
        if (sm90_of(p)->coords_ahead != cases[i].on) fail_msg("%s: coords_ahead %d", cases[i].text, sm90_of(p)->coords_ahead);
        assert_int_equal(strstr(p->canonical, "coords_late") != NULL, strstr(cases[i].text, "coords_late") != NULL);
        for (int r = 0; r < MHA_TILE_COORD_REGS; r++) {
            char save[64], restore[64];
            snprintf(save, sizeof save, "mov.u32 %%cs_sv_%s, %%%s;", mha_tile_coord_regs[r], mha_tile_coord_regs[r]);
            snprintf(restore, sizeof restore, "mov.u32 %%%s, %%cs_sv_%s;", mha_tile_coord_regs[r], mha_tile_coord_regs[r]);
            if ((strstr(ptx, save) != NULL) != cases[i].on || (strstr(ptx, restore) != NULL) != cases[i].on)
                fail_msg("%s: save/restore of %%%s", cases[i].text, mha_tile_coord_regs[r]);
        }
        free(ptx);
    }
    expect_plan_error("mha target=sm100a dtype=bf16 qk=128 ov=128 coords_late=1 mask=none", "coords_late");
    free(p);
}

/* config dynamic=1 (plan note dynamic tiles): a persistent CTA takes each next tile from the kernel parameter
 * tile_ctr; the plan adds a tile word and a bar_tile per Q slot, forces the persistent loop, keeps coords ahead only
 * with two Q slots (the next word sits in the other slot), and names the word in the canonical text only when on.
 * Kernels whose roles walk the tiles on their own (split, varlen, paged) or that have no tile loop are refused, and
 * so is sm100a; a timeline kernel (records by tile index) takes the counter like the kernel it stamps. */
static void test_dynamic_config(void **state)
{
    (void)state;
    Plan *p = malloc(sizeof *p);
    static const struct { const char *text; int dyn, slots, ahead; } cases[] = {
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 mask=none", 0, 2, 1},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 dynamic=1 mask=none", 1, 2, 1},
        {"mha target=sm90a dtype=bf16 qk=64 ov=64 bm=128 dynamic=1 mask=causal", 1, 2, 1},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=176 dynamic=1 mask=none", 1, 1, 0},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 timeline=1 dynamic=1 mask=causal", 1, 2, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *ptx = plan_ptx(cases[i].text, p);
        const Sm90Plan *s = sm90_of(p);
        int param = 0;
        for (int k = 0; k < p->n_params; k++) param |= !strcmp(p->params[k].name, "tile_ctr");
        if (p->cfg.dynamic != cases[i].dyn || param != cases[i].dyn || s->q_slots != cases[i].slots ||
            s->coords_ahead != cases[i].ahead || !p->persistent)
            fail_msg("%s: dynamic %d, tile_ctr %d, %d Q slots, coords ahead %d, persistent %d", cases[i].text,
                     p->cfg.dynamic, param, s->q_slots, s->coords_ahead, p->persistent);
        assert_int_equal(strstr(p->canonical, "dynamic") != NULL, cases[i].dyn);
        assert_int_equal(strstr(ptx, "atom.relaxed.gpu.global.add.u32") != NULL, cases[i].dyn);
        assert_int_equal(strstr(ptx, "st.relaxed.gpu.global.v2.u32") != NULL, cases[i].dyn);
        free(ptx);
    }
    static const char *const refused[] = {
        "mha target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=64 group=8 split=1 dynamic=1 mask=causal",
        "mha target=sm90a dtype=bf16 qk=128 ov=128 varlen=1 dynamic=1 mask=causal",
        "mha target=sm90a dtype=bf16 qk=128 ov=128 page=64 dynamic=1 mask=none",
        "mha target=sm90a dtype=bf16 qk=128 ov=128 persistent=0 dynamic=1 mask=causal",
        "mha target=sm100a dtype=bf16 qk=128 ov=128 dynamic=1 mask=none",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) expect_plan_error(refused[i], "dynamic");
    /* plan note claim runs: claim=N takes runs of N tiles by an atomic add of a register (N, or 1 in the last
     * waves); claim=1 is the same kernel as none; without dynamic=1 it is refused */
    char *one = plan_ptx("mha target=sm90a dtype=bf16 qk=128 ov=128 dynamic=1 claim=1 mask=causal", p);
    assert_null(strstr(p->canonical, "claim"));
    char *two = plan_ptx("mha target=sm90a dtype=bf16 qk=128 ov=128 dynamic=1 claim=2 mask=causal", p);
    assert_non_null(strstr(p->canonical, " claim=2 "));
    assert_non_null(strstr(two, "atom.relaxed.gpu.global.add.u32 %pr_claim, [%pr_tile_ctr+0], %pr_claim_n;"));
    assert_non_null(strstr(two, "selp.u32 %pr_claim_n, 2, 1, %pr_more;"));
    assert_null(strstr(one, "%pr_claim_n"));
    free(one);
    free(two);
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 claim=2 mask=causal", "claim");
    free(p);
}

/* config occupancy=2 (sm90a MHA): .minnctapersm 2, half the register file (128 a thread at entry; the one consumer
 * 232 after setmaxnreg, the producer 24: 128 x 256 = 32768) and of the SM's shared memory a CTA; bm 64 only. */
static void test_occupancy(void **state)
{
    (void)state;
    Plan *p = malloc(sizeof *p);
    char *ptx = plan_ptx("mha target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=64 persistent=1 occupancy=2 mask=none", p);
    assert_int_equal(p->ctas_per_sm, 2);
    assert_int_equal(p->entry_regs, 128);
    assert_int_equal(sm90_of(p)->consumer_regs, 232);
    assert_int_equal(sm90_of(p)->producer_regs, 24);
    assert_true(p->smem_launch <= p->smem_cap && p->smem_cap == 233472 / 2 - 1024);
    assert_non_null(strstr(p->canonical, " occupancy=2 "));
    assert_non_null(strstr(ptx, ".minnctapersm 2\n"));
    assert_non_null(strstr(ptx, "setmaxnreg.inc.sync.aligned.u32 232;"));
    free(ptx);
    char *text = plan_explain_text(p);
    assert_non_null(strstr(text, "min(tiles, 2 x SMs)"));
    free(text);
    /* occupancy 1 is the default: not named, and the kernel is the one without the word */
    plan_ok("mha target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=64 persistent=1 occupancy=1 mask=none", p);
    assert_null(strstr(p->canonical, "occupancy"));
    assert_int_equal(p->ctas_per_sm, 1);
    assert_int_equal(p->entry_regs, 255);
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 bm=128 bn=64 occupancy=2 mask=none", "bm");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=128 persistent=1 occupancy=2 mask=none",
                      "at occupancy 2");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=64 occupancy=3 mask=none", "occupancy");
    expect_plan_error("mha target=sm100a dtype=bf16 qk=128 ov=128 occupancy=2 mask=none", "occupancy");
    free(p);
}

/* plan note tile order (sm90a MHA): by default a persistent or mask-free kernel orders a head's m-blocks as
 * consecutive tiles unless every head's K/V fits the L2 budget (TILE_FIT: the PTX picks the group of one head or
 * of all heads, once a CTA: %tile_group), and a persistent CTA walks the waves in alternating direction (%tile_step, turned at each step by
 * every role); a causal kernel without a persistent loop keeps the L2 groups; head_major=1 / 0 force one head /
 * the L2 groups with a plain stride, and the word is named only when given; sm100a has no such word. Whether the
 * walk visits every tile once is the simulator's to show (cases_sm90.txt: a causal grid of 6.75 waves). */
static void test_tile_order(void **state)
{
    (void)state;
    Plan *p = malloc(sizeof *p);
    static const struct { const char *text; int order; } cases[] = {
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 persistent=1 mask=none", TILE_FIT},
        {"mha target=sm90a dtype=fp16 qk=64 ov=64 bm=64 bn=64 group=4 split=1 mask=none", TILE_FIT},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 persistent=1 mask=causal", TILE_FIT},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 persistent=0 mask=causal", TILE_L2_GROUPS},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 mask=window:64,0", TILE_FIT},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 persistent=1 head_major=0 mask=causal", TILE_L2_GROUPS},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 persistent=1 head_major=0 mask=none", TILE_L2_GROUPS},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 persistent=1 head_major=1 mask=causal", TILE_HEAD_MAJOR},
        {"mha target=sm100a dtype=bf16 qk=128 ov=128 mask=none", TILE_L2_GROUPS},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *ptx = plan_ptx(cases[i].text, p);
        int order = cases[i].order;
        if (p->head_major != order) fail_msg("%s: head_major %d", cases[i].text, p->head_major);
        assert_int_equal(strstr(p->canonical, "head_major") != NULL, strstr(cases[i].text, "head_major") != NULL);
        if ((strstr(ptx, "mov.u32 %tile_group, 1;") != NULL) != (order == TILE_HEAD_MAJOR) ||
            (strstr(ptx, ", %tile_group, %tc_part;") != NULL) != (order == TILE_FIT))
            fail_msg("%s: the head group in the PTX", cases[i].text);
        /* the walk: producer, consumers (and scrub warp) each turn their step once a tile */
        int turns = occurrences(ptx, "sub.u32 %tile_step, %grid_ctas, %tile_step;");
        if (order != TILE_L2_GROUPS ? turns < 2 : strstr(ptx, "%tile_step") != NULL)
            fail_msg("%s: %d turns of the tile step", cases[i].text, turns);
        free(ptx);
    }
    expect_plan_error("mha target=sm100a dtype=bf16 qk=128 ov=128 head_major=1 mask=none", "head_major");
    free(p);
}

/* plan note diag half (sm90a MHA): where the mask has a right bound and bn is a multiple of 32, a consumer that sees
 * no key of a block's upper half runs a half-wide softmax and P V: the PTX has each P V issue twice, full and half
 * (pv_steps + pv_steps / 2 wgmmas where it had pv_steps); the word overrides both ways (1 without a mask: a
 * sequence's last block), is named only when given, needs bn % 32 == 0 and is sm90a's alone. */
static void test_diag_half(void **state)
{
    (void)state;
    Plan *p = malloc(sizeof *p);
    static const struct { const char *text; int on, pv_steps; } cases[] = {
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 persistent=1 mask=causal", 1, 8},
        {"mha target=sm90a dtype=bf16 qk=64 ov=64 bm=192 bn=128 mask=causal", 1, 8},
        {"mha target=sm90a dtype=bf16 qk=256 ov=256 bn=64 mask=causal", 1, 4},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 mask=window:64,16", 1, 8},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=128 group=8 split=1 mask=causal", 1, 8},
        {"mha target=sm90a dtype=bf16 qk=256 ov=256 bn=48 mask=causal", 0, 3},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 persistent=1 mask=none", 0, 8},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 mask=window:64,-1", 0, 8},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 diag_half=0 mask=causal", 0, 8},
        {"mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 diag_half=1 mask=none", 1, 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *ptx = plan_ptx(cases[i].text, p);
        const Sm90Plan *s = sm90_of(p);
        if (s->diag_half != cases[i].on) fail_msg("%s: diag_half %d", cases[i].text, s->diag_half);
        assert_int_equal(strstr(p->canonical, "diag_half") != NULL, strstr(cases[i].text, "diag_half") != NULL);
        int want = 2 * (cases[i].pv_steps + (cases[i].on ? cases[i].pv_steps / 2 : 0)); /* the loop's and the last */
        int pv = occurrences(ptx, "}, %cs_vd, "); /* an RS wgmma: the A fragment's braces, then V's descriptor */
        if (pv != want) fail_msg("%s: %d P V wgmmas, want %d", cases[i].text, pv, want);
        if ((strstr(ptx, "%cs_half_key") != NULL) != cases[i].on) fail_msg("%s: the half key", cases[i].text);
        free(ptx);
    }
    expect_plan_error("mha target=sm90a dtype=bf16 qk=256 ov=256 bn=48 diag_half=1 mask=causal", "bn");
    expect_plan_error("mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 diag_half=2 mask=causal", "diag_half");
    expect_plan_error("mha target=sm100a dtype=bf16 qk=128 ov=128 diag_half=1 mask=causal", "diag_half");
    free(p);
}

static void test_split_and_combine_config(void **state)
{
    (void)state;
    char err[256];
    Plan *p = malloc(sizeof *p), *q = malloc(sizeof *q);
    plan_ok("mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 split=1 mask=causal", p);
    if (!strstr(p->canonical, " split=1")) fail_msg("canonical %s", p->canonical);
    Config back = parse_ok(p->canonical);
    assert_int_equal(back.split, 1);
    /* then out and its strides: a run with num_splits 1 writes the final O itself */
    const char *tail[7] = {"num_splits", "o_accum", "lse_accum", "out", "out_stride_b", "out_stride_s", "out_stride_h"};
    for (int i = 0; i < 7; i++) assert_string_equal(p->params[p->n_params - 7 + i].name, tail[i]);
    assert_int_equal(p->heads_per_cta, 8);
    assert_int_equal(p->rows_per_cta, 16);
    assert_true(p->pdl_trigger && p->pdl_dependent);
    plan_ok("mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 mask=causal", q);
    if (strstr(q->canonical, "split")) fail_msg("canonical %s", q->canonical);
    assert_int_equal(q->heads_per_cta, 1); /* the unsplit sm90a kernel is what it was */
    assert_int_equal(q->n_params, p->n_params - 7);
    assert_true(q->pdl_trigger && q->pdl_dependent); /* every forward kernel: PDL both ways */
    assert_true(q->hash != p->hash);
    plan_ok("mha target=sm100a dtype=bf16 qk=128 ov=128 group=8 split=1 mask=none", p);
    assert_string_equal(p->params[p->n_params - 1].name, "out_stride_h");

    plan_ok("combine target=sm100a dtype=fp16 ov=192", p);
    assert_true(p->pdl_dependent && p->pdl_trigger);
    assert_string_equal(p->canonical, "combine target=sm100a dtype=fp16 ov=192");
    assert_true(strstr(p->symbol, "fa4_combine_sm100a_") == p->symbol);
    assert_int_equal(p->n_maps, 0);
    assert_string_equal(p->params[0].name, "o_accum");
    char *ptx = NULL;
    size_t len;
    assert_int_equal(fa4gen_generate(&p->cfg, q, &ptx, &len, err, sizeof err), 0);
    if (!strstr(ptx, ".target sm_100a") || !strstr(ptx, "ex2.approx") || !strstr(ptx, "griddepcontrol.wait;"))
        fail_msg("combine PTX");
    free(ptx);
    const char *bad[][2] = {{"mha target=sm90a qk=128 split=2", "split:"},
                            {"mha target=sm90a qk=128 split=1 sink=1", "split:"},
                            {"mla-sparse target=sm90a qk=576 ov=512 split=1", "split:"},
                            {"combine target=sm90a dtype=e4m3 ov=128", "dtype:"},
                            {"combine target=sm90a ov=128 bn=64", "combine:"},
                            {"combine target=sm90a ov=128 mask=causal", "combine:"},
                            {"combine target=sm90a qk=192 ov=128", "qk:"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) expect_plan_error(bad[i][0], bad[i][1]);
    free(p), free(q);
}

/* kv-append (issue 27): the canonical form is target, dtype, qk and ov; the plan's parameter list is the launch
 * ABI runtime/kv_append.c binds; the PTX copies 16-byte chunks, all loads before the first store, and lets the
 * attention after it launch at once. */
static void test_kv_append_config(void **state)
{
    (void)state;
    char err[256];
    Plan *p = malloc(sizeof *p), *q = malloc(sizeof *q);
    plan_ok("kv-append target=sm90a dtype=bf16 qk=128 ov=128", p);
    assert_string_equal(p->canonical, "kv-append target=sm90a dtype=bf16 qk=128 ov=128");
    assert_true(strstr(p->symbol, "fa4_kv_append_sm90a_") == p->symbol);
    Config back = parse_ok(p->canonical);
    assert_int_equal(back.kind, KIND_KV_APPEND);
    assert_int_equal(p->n_maps, 0);
    assert_int_equal(p->threads, 128);
    assert_int_equal(p->rows_per_cta, 4);
    assert_true(p->pdl_trigger && !p->pdl_dependent);
    static const char *const abi[] = {"k_new", "v_new", "k_cache", "v_cache", "kn_stride_b", "kn_stride_s",
                                      "kn_stride_h", "vn_stride_b", "vn_stride_s", "vn_stride_h", "kc_stride_p",
                                      "kc_stride_r", "kc_stride_h", "vc_stride_p", "vc_stride_r", "vc_stride_h",
                                      "seqlens_k", "seqlen_base", "seqlens_out", "block_table", "max_pages",
                                      "page_rows", "num_pages", "batch", "s_new", "heads_kv"};
    assert_int_equal(p->n_params, (int)(sizeof abi / sizeof abi[0]));
    for (int i = 0; i < p->n_params; i++) assert_string_equal(p->params[i].name, abi[i]);
    char *ptx = NULL;
    size_t len;
    assert_int_equal(fa4gen_generate(&p->cfg, q, &ptx, &len, err, sizeof err), 0);
    /* bf16 d128: 16 + 16 chunks, one step: one vector load and one store per lane, the load first */
    const char *ld = strstr(ptx, "ld.global.v4.b32"), *st = strstr(ptx, "st.global.v4.b32");
    if (!ld || !st || ld > st || strstr(ld + 1, "ld.global.v4.b32") || strstr(st + 1, "st.global.v4.b32"))
        fail_msg("kv-append d128 PTX: one 16-byte load then one store");
    if (!strstr(ptx, "griddepcontrol.launch_dependents;") || strstr(ptx, "griddepcontrol.wait;"))
        fail_msg("kv-append PTX: launch_dependents, no wait");
    free(ptx);
    /* e4m3 qk 576 / ov 512: 36 + 32 chunks, three steps; sm100a */
    plan_ok("kv-append target=sm100a dtype=e4m3 qk=576 ov=512", p);
    assert_string_equal(p->canonical, "kv-append target=sm100a dtype=e4m3 qk=576 ov=512");
    ptx = NULL;
    assert_int_equal(fa4gen_generate(&p->cfg, q, &ptx, &len, err, sizeof err), 0);
    int loads = 0;
    for (const char *x = ptx; (x = strstr(x, "ld.global.v4.b32")); x++) loads++;
    assert_int_equal(loads, 3);
    if (!strstr(ptx, ".target sm_100a")) fail_msg("kv-append sm100a PTX");
    free(ptx);
    const char *bad[][2] = {{"kv-append target=sm90a qk=128 ov=128 bn=64", "kv-append:"},
                            {"kv-append target=sm90a qk=128 ov=128 mask=causal", "kv-append:"},
                            {"kv-append target=sm90a qk=128 ov=128 page=16", "page:"},
                            {"kv-append target=sm90a qk=128 ov=128 split=1", "split:"},
                            {"kv-append target=sm90a qk=72 ov=128", "qk/ov:"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) expect_plan_error(bad[i][0], bad[i][1]);
    /* every scalar has a name (the .param list is spelled from them) */
    for (int i = 0; i < SCALAR_COUNT; i++) assert_non_null(scalar_name[i]);
    free(p), free(q);
}

static void test_score_mod_splice(void **state)
{
    (void)state;
    for (int target = 0; target < TARGET_COUNT; target++) {
        Config c;
        char err[512], *ptx = NULL;
        size_t len;
        config_init(&c);
        c.target = (TargetId)target;
        c.qk_depth = c.ov_depth = 64;
        c.sink = 1;
        c.score_mod = 42;
        Plan *p = malloc(sizeof *p);
        if (fa4gen_generate_mod(&c, mod_ptx, MOD_SPLICE, p, &ptx, &len, err, sizeof err)) fail_msg("%s", err);
        const char *want[] = {".global .align 4 .f32 table[2]", ".reg .f32 %mod_f<4>;", ".reg .b64 %mod_rd<2>;",
                              "mov.u64 %mod_rd1, %mod_aux;", "$L__BB0_2_m0:", "$L__BB0_2_m1:", "@%mod_p1 bra $L__BB0_2_m1;",
                              "ld.param.u64 %sink_ptr, [p_sink];", "ld.param.f32 %mod_scale, [p_sm_scale];"};
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            if (!strstr(ptx, want[i])) fail_msg("target %d: the PTX lacks '%s'", target, want[i]);
        if (strstr(ptx, "call.") || strstr(ptx, "ld.param.f32 %mod_f1") || strstr(ptx, "func_retval0"))
            fail_msg("target %d: the splice left a call or a parameter access", target);
        free(ptx);
        /* call and link keep the function whole */
        assert_int_equal(fa4gen_generate_mod(&c, mod_ptx, MOD_CALL, p, &ptx, &len, err, sizeof err), 0);
        assert_non_null(strstr(ptx, "call.uni (mod_ret), fa4_score_mod"));
        assert_non_null(strstr(ptx, ".visible .func  (.param .b32 func_retval0) fa4_score_mod("));
        free(ptx);
        assert_int_equal(fa4gen_generate_mod(&c, mod_ptx, MOD_LINK, p, &ptx, &len, err, sizeof err), 0);
        assert_non_null(strstr(ptx, ".extern .func (.param .b32 mod_ret) fa4_score_mod("));
        free(ptx);
        free(p);
    }
    /* forms the splice refuses, each with a sentence */
    const struct { const char *from, *to, *needle; } bad[] = {
        {"\tmov.f32 \t%f1, 0fFF800000;\n", "\tcall.uni helper, ();\n", "calls another function"},
        {"\t.reg .b64 \t%rd<2>;\n", "\t.reg .b64 \t%rd<2>;\n\t.local .align 4 .b8 __local_depot0[16];\n", "local memory"},
        {"fa4_score_mod(", "other_name(", "no function fa4_score_mod"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[4096];
        const char *at = strstr(mod_ptx, bad[i].from);
        assert_non_null(at);
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - mod_ptx), mod_ptx, bad[i].to, at + strlen(bad[i].from));
        ScoreMod m;
        char err[256] = "";
        assert_int_equal(score_mod_parse(text, MOD_SPLICE, &m, err, sizeof err), -1);
        if (!strstr(err, bad[i].needle)) fail_msg("case %zu: '%s' lacks '%s'", i, err, bad[i].needle);
    }
}

/* The CLI's --score-mod: explain needs only the hash; mha compiles with NVRTC; a compile error, a
 * missing file and FA4GEN_NO_NVRTC are one line on stderr, and no file is written. */
static void test_cli_score_mod(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4mod.XXXXXX", path[64], bad[64], out_path[80], cmd[4400];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/soft.cu", dir);
    snprintf(bad, sizeof bad, "%s/bad.cu", dir);
    snprintf(out_path, sizeof out_path, "%s/k.ptx", dir);
    const char *src = "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
                      "{ return 30.0f * tanhf(s / 30.0f); }\n";
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(src, f);
    fclose(f);
    f = fopen(bad, "w");
    assert_non_null(f);
    fputs("__device__ float score_mod(float s) { return s + nope; }\n", f);
    fclose(f);
    char *out = NULL, want[40];
    snprintf(want, sizeof want, "mod=%016llx", (unsigned long long)score_mod_hash(src));
    snprintf(cmd, sizeof cmd, "explain --target sm100a --depth 128 --sink 1 --score-mod %s", path);
    assert_int_equal(cli(cmd, &out), 0);
    if (!strstr(out, want) || !strstr(out, "p_sm_scale (f32), p_aux (u64)") || !strstr(out, "sink=1"))
        fail_msg("explain: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "mha --target sm90a --depth 64 --score-mod %s", path);
    assert_int_equal(cli(cmd, &out), 0);
    if (!strstr(out, "// score_mod (user CUDA C compiled by NVRTC)") || !strstr(out, want)) fail_msg("mha: no mod");
    free(out);
    const char *fails[][2] = {{"mha --target sm90a --depth 64 --score-mod %s.missing -o k.ptx 2>&1 >/dev/null", "cannot read"},
                              {"mha --target sm90a --depth 64 --config 'mod=0123456789abcdef' 2>&1 >/dev/null", "source"}};
    char exe[4096], line[512], full[4800];
    assert_non_null(realpath(fa4gen(), exe));
    for (int i = 0; i < 2; i++) {
        snprintf(line, sizeof line, fails[i][0], path);
        snprintf(full, sizeof full, "cd %s && %s %s", dir, exe, line);
        assert_int_equal(run_capture(full, &out), 2);
        if (!strstr(out, fails[i][1]) || strchr(out, '\n') != out + strlen(out) - 1)
            fail_msg("case %d: not one line naming '%s': %s", i, fails[i][1], out);
        free(out);
    }
    /* NVRTC's refusal: a first line, then each diagnostic on its own line with the user's line
     * number and line (never '|'-joined, never a line of the wrapper) */
    snprintf(full, sizeof full, "cd %s && %s mha --target sm90a --depth 64 --score-mod %s -o k.ptx 2>&1 >/dev/null",
             dir, exe, bad);
    assert_int_equal(run_capture(full, &out), 2);
    const char *want_lines[] = {"fa4gen: --score-mod '", "fa4gen:   line 1: error: identifier \"nope\" is undefined\n",
                                "fa4gen:         1 | __device__ float score_mod(float s) { return s + nope; }\n",
                                "fa4gen:   in fa4gen's wrapper after line 1: error: too many arguments"};
    for (int i = 0; i < 4; i++)
        if (!strstr(out, want_lines[i])) fail_msg("NVRTC's error lacks '%s': %s", want_lines[i], out);
    if (strchr(out, '|') != strstr(out, "1 | __device__") + 2 || strstr(out, "return score_mod(s, b"))
        fail_msg("NVRTC's error is joined or shows the wrapper: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "FA4GEN_NO_NVRTC=1 %s mha --target sm90a --depth 64 --score-mod %s -o %s 2>&1", exe,
             path, out_path);
    assert_int_equal(run_capture(cmd, &out), 1);
    assert_non_null(strstr(out, "NVRTC"));
    free(out);
    assert_int_equal(access(out_path, F_OK), -1);
    unlink(path), unlink(bad), rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_canonical_roundtrip),   cmocka_unit_test(test_hash_is_stable),
        cmocka_unit_test(test_config_errors_name_the_field), cmocka_unit_test(test_smem_limit_names_the_excess),
        cmocka_unit_test(test_plan_smem_map),         cmocka_unit_test(test_explain_json_and_text),
        cmocka_unit_test(test_plan_table_full),
        cmocka_unit_test(test_builder),               cmocka_unit_test(test_reg_handles),
        cmocka_unit_test(test_op_operands),
        cmocka_unit_test(test_sm90_descriptors),
        cmocka_unit_test(test_cli_exit_codes),        cmocka_unit_test(test_cli_no_partial_files),
        cmocka_unit_test(test_window_bounds_in_range), cmocka_unit_test(test_values_are_exact_words),
        cmocka_unit_test(test_errors_escape_what_they_echo), cmocka_unit_test(test_unused_flags_refused),
        cmocka_unit_test(test_output_targets),        cmocka_unit_test(test_stdout_write_errors),
        cmocka_unit_test(test_bundle_lists),           cmocka_unit_test(test_sink_mod_config),
        cmocka_unit_test(test_softcap_alibi_config),
        cmocka_unit_test(test_score_mod_splice),       cmocka_unit_test(test_cli_score_mod),
        cmocka_unit_test(test_split_and_combine_config), cmocka_unit_test(test_kv_append_config), cmocka_unit_test(test_early_kv_config),
        cmocka_unit_test(test_prefetch_kv_config),
        cmocka_unit_test(test_dense_prefetch),
        cmocka_unit_test(test_kv_tail_plan), cmocka_unit_test(test_timeline_config),
        cmocka_unit_test(test_q_release), cmocka_unit_test(test_o_zero), cmocka_unit_test(test_coords_ahead),
        cmocka_unit_test(test_occupancy),
        cmocka_unit_test(test_tile_order),
        cmocka_unit_test(test_diag_half), cmocka_unit_test(test_dynamic_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
