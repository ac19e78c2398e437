/* test_sm100_desc.c - UMMA descriptors, field by field, against the values
 * CUTLASS's make_umma_desc / make_instr_desc return (notes/ptx-cheatsheet.md
 * sec. 1-2), and round trips over the layouts the sm100a kernels will use. */
#include "testutil.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smem_reference_values), cmocka_unit_test(test_smem_round_trip),
        cmocka_unit_test(test_instr_reference_values), cmocka_unit_test(test_instr_round_trip),
        cmocka_unit_test(test_mma_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
