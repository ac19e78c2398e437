/* test_ref_mla.c - the sparse MLA reference (ref_mla.c) against the textbook
 * formula on tiny shapes: each kind of invalid index, all-invalid rows,
 * topk_length, sinks (finite, +-large, +-inf), duplicated indices, free
 * strides, d_qk 576 and 512; and its bf16 conversions.
 * Prints 'test_ref_mla: N passed, N failed'.
 */
#include "ref_mla.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;
static int quiet; /* a mismatch that is expected: no detail */

static void check(int ok, const char *what)
{
    if (ok) passed++;
    else failed++, printf("FAIL %s\n", what);
}

/* ---------------------------------------------------------- bf16 */

static void test_bf16(void)
{
    check(ref_mla_bf16_encode(1.0) == 0x3F80, "bf16(1) = 0x3F80");
    check(ref_mla_bf16_encode(-2.0) == 0xC000, "bf16(-2) = 0xC000");
    check(ref_mla_bf16_encode(1.0 + 0x1p-8) == 0x3F80, "a tie rounds to the even 0x3F80");
    check(ref_mla_bf16_encode(1.0 + 3 * 0x1p-8) == 0x3F82, "a tie rounds to the even 0x3F82");
    check(ref_mla_bf16_encode(1.0 + 0x1p-8 + 0x1p-40) == 0x3F81, "just above a tie rounds up");
    /* 1 + 2^-8 + 2^-30 is a tie after rounding to float (24 bits): through float it would go down */
    check(ref_mla_bf16_encode(1.0 + 0x1p-8 + 0x1p-30) == 0x3F81, "no double rounding through float");
    check(ref_mla_bf16_encode(0x1.fep127) == 0x7F7F, "the largest finite");
    check(ref_mla_bf16_encode(0x1.ffp127) == 0x7F80, "the tie above the largest finite gives inf");
    check(ref_mla_bf16_encode(0x1.fefp127) == 0x7F7F, "just below that tie stays finite");
    check(ref_mla_bf16_encode(-1e300) == 0xFF80, "overflow gives -inf");
    check(ref_mla_bf16_encode(INFINITY) == 0x7F80, "inf");
    check(ref_mla_bf16_encode(NAN) == 0x7FC0, "NaN gives 0x7FC0");
    check(ref_mla_bf16_encode(-0.0) == 0x8000, "-0 keeps its sign");
    check(ref_mla_bf16_encode(0x1p-133) == 0x0001, "the smallest subnormal");
    check(ref_mla_bf16_encode(0x1p-134) == 0x0000, "half the smallest subnormal ties to 0");
    check(ref_mla_bf16_encode(0x1.8p-133) == 0x0002, "1.5 subnormal quanta tie to the even 2");
    check(ref_mla_bf16_encode(0x1.fep-127) == 0x0080, "rounding up into the normals");
    check(ref_mla_bf16_decode(0x3F80) == 1.0 && ref_mla_bf16_decode(0x0001) == 0x1p-133 &&
              ref_mla_bf16_decode(0xFF80) == -INFINITY && isnan(ref_mla_bf16_decode(0x7FC1)),
          "decode: 1, the smallest subnormal, -inf, NaN");
    int trip = 1;
    for (uint32_t c = 0; c < 0x10000; c++) {
        double v = ref_mla_bf16_decode((uint16_t)c);
        if (isnan(v)) continue;
        if (ref_mla_bf16_encode(v) != c) { trip = 0; printf("  code 0x%04x does not round-trip\n", c); break; }
    }
    check(trip, "every non-NaN bf16 code round-trips through decode and encode");
    /* random doubles of every finite magnitude (2^-141 .. 2^126): the result is a bf16 value, and no neighbour is nearer */
    uint64_t z = 12345;
    int nearest = 1;
    for (int i = 0; i < 200000 && nearest; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        double x = ldexp((double)(z >> 11) / 0x1p53 + 0.5, (int)(z % 266) - 140) * ((z >> 10) & 1 ? -1 : 1);
        uint16_t c = ref_mla_bf16_encode(x);
        double r = ref_mla_bf16_decode(c), up = ref_mla_bf16_decode((uint16_t)(c + 1));
        double dn = (c & 0x7FFF) ? ref_mla_bf16_decode((uint16_t)(c - 1)) : r;
        double d = fabs(x - r);
        if (ref_mla_bf16_round(x) != r || fabs(x - up) < d || fabs(x - dn) < d ||
            ((fabs(x - up) == d || fabs(x - dn) == d) && (c & 1))) {
            nearest = 0;
            printf("  %a rounds to 0x%04x (%a)\n", x, c, r);
        }
    }
    check(nearest, "random doubles round to the nearest bf16, ties to even");
}

/* ---------------------------------------------------------- attention */

enum { SQ = 3, HQ = 2, SKV = 6, TOPK = 4, DMAX = 576 };

static uint16_t qbuf[SQ * HQ * DMAX], kvbuf[SKV * DMAX];

static void fill(uint16_t *b, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        b[i] = ref_mla_bf16_encode(((double)(seed >> 11) / 0x1p53) * 2.0 - 1.0);
    }
}

/* The textbook: over the keys given (duplicates included), p_t = e^{l_t} / sum e^{l_u},
 * out = sum p_t v_t, lse = log sum e^{l_u}, max = max l_t; a sink multiplies out by
 * e^lse / (e^lse + e^sink). No max subtraction: the logits here are small. */
static void textbook(int d_qk, double scale, const uint16_t *qrow, const int *keys, int n, const double *sink,
                     double *o, double *lse, double *mx)
{
    double l[TOPK], den = 0.0;
    *mx = -INFINITY;
    for (int t = 0; t < n; t++) {
        double a = 0.0;
        for (int d = 0; d < d_qk; d++) a += ref_mla_bf16_decode(qrow[d]) * ref_mla_bf16_decode(kvbuf[keys[t] * d_qk + d]);
        l[t] = scale * a;
        den += exp(l[t]);
        if (l[t] > *mx) *mx = l[t];
    }
    *lse = log(den);
    double f = sink ? exp(*lse) / (exp(*lse) + exp(*sink)) : 1.0;
    for (int d = 0; d < REF_MLA_DV; d++) {
        double acc = 0.0;
        for (int t = 0; t < n; t++) acc += exp(l[t]) / den * ref_mla_bf16_decode(kvbuf[keys[t] * d_qk + d]);
        o[d] = acc * f;
    }
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-12 * (1.0 + fabs(b)); }

/* A packed problem over qbuf/kvbuf with the given indices. */
static RefMla problem(int d_qk, const int32_t *idx, const int32_t *len, const float *sink)
{
    RefMla p;
    memset(&p, 0, sizeof p);
    p.q = qbuf, p.kv = kvbuf, p.indices = idx, p.topk_length = len, p.attn_sink = sink;
    p.s_q = SQ, p.s_kv = SKV, p.h_q = HQ, p.d_qk = d_qk, p.topk = TOPK;
    p.sm_scale = 1.0 / sqrt((double)d_qk);
    return p;
}

static double out[SQ * HQ * REF_MLA_DV], lse[SQ * HQ], mx[SQ * HQ];

static int run(const RefMla *p)
{
    char err[256];
    if (ref_mla_sparse_fwd(p, out, lse, mx, err, sizeof err)) { printf("  ref_mla: %s\n", err); return -1; }
    return 0;
}

/* Row s of the run matches the textbook over keys[0..n) for every head (sink per head if given). */
static int row_is(const RefMla *p, int s, const int *keys, int n, const float *sink)
{
    for (int h = 0; h < HQ; h++) {
        double o[REF_MLA_DV], e, m, sk = sink ? (double)sink[h] : 0.0;
        const double *r = out + ((size_t)s * HQ + (size_t)h) * REF_MLA_DV;
        if (!n) {
            for (int d = 0; d < REF_MLA_DV; d++)
                if (r[d] != 0.0) { if (!quiet) printf("  row %d head %d: out[%d] = %g, not 0\n", s, h, d, r[d]); return 0; }
            if (lse[s * HQ + h] != INFINITY || mx[s * HQ + h] != -INFINITY) {
                if (!quiet) printf("  row %d head %d: lse %g max %g, want +inf and -inf\n", s, h, lse[s * HQ + h], mx[s * HQ + h]);
                return 0;
            }
            continue;
        }
        textbook(p->d_qk, p->sm_scale, qbuf + ((size_t)s * HQ + (size_t)h) * (size_t)p->d_qk, keys, n,
                 sink ? &sk : NULL, o, &e, &m);
        if (!close_to(lse[s * HQ + h], e) || !close_to(mx[s * HQ + h], m)) {
            if (!quiet) printf("  row %d head %d: lse %.17g max %.17g, textbook %.17g %.17g\n", s, h, lse[s * HQ + h],
                   mx[s * HQ + h], e, m);
            return 0;
        }
        for (int d = 0; d < REF_MLA_DV; d++)
            if (!close_to(r[d], o[d])) {
                if (!quiet) printf("  row %d head %d: out[%d] = %.17g, textbook %.17g\n", s, h, d, r[d], o[d]);
                return 0;
            }
    }
    return 1;
}

static void test_textbook(int d_qk)
{
    static const int32_t idx[SQ * TOPK] = {0, 1, 2, 3, 5, 4, 3, 2, 1, 3, 5, 0};
    static const int keys[SQ][TOPK] = {{0, 1, 2, 3}, {5, 4, 3, 2}, {1, 3, 5, 0}};
    RefMla p = problem(d_qk, idx, NULL, NULL);
    char what[128];
    snprintf(what, sizeof what, "d_qk %d: every row and head matches the textbook formula", d_qk);
    int ok = !run(&p);
    for (int s = 0; s < SQ && ok; s++) ok = row_is(&p, s, keys[s], TOPK, NULL);
    check(ok, what);
    /* V is the first 512 columns: with d_qk 576 the rope columns enter the logits only */
    if (d_qk == 576) {
        int in_logits = 1;
        double before = lse[0];
        for (int d = 512; d < 576; d++) qbuf[d] = ref_mla_bf16_encode(ref_mla_bf16_decode(qbuf[d]) + 0.5);
        run(&p);
        in_logits = lse[0] != before;
        fill(qbuf, sizeof qbuf / sizeof qbuf[0], 1); /* restore */
        check(in_logits, "d_qk 576: the rope columns are part of the logits");
    }
}

static void test_invalid(void)
{
    /* row 0: -1 and s_kv; row 1: INT32_MIN, INT32_MAX, 1000 around a valid 1; row 2: all invalid */
    static const int32_t idx[SQ * TOPK] = {-1, 2, SKV, 4, INT32_MIN, INT32_MAX, 1, 1000, -1, -7, SKV, INT32_MIN};
    static const int k0[] = {2, 4}, k1[] = {1};
    RefMla p = problem(576, idx, NULL, NULL);
    int ok = !run(&p);
    check(ok && row_is(&p, 0, k0, 2, NULL), "indices -1 and s_kv contribute nothing");
    check(ok && row_is(&p, 1, k1, 1, NULL), "indices INT32_MIN, INT32_MAX and 1000 contribute nothing");
    check(ok && row_is(&p, 2, NULL, 0, NULL), "a row with no valid index: out 0, lse +inf, max_logits -inf");
    check(ref_mla_valid(&p, 0, 1) && !ref_mla_valid(&p, 0, 0) && !ref_mla_valid(&p, 0, 2) &&
              !ref_mla_valid(&p, 1, 1) && !ref_mla_valid(&p, 0, TOPK),
          "ref_mla_valid agrees");
}

static void test_topk_length(void)
{
    static const int32_t idx[SQ * TOPK] = {0, 1, 2, 3, 5, -1, 3, 2, 1, 3, 5, 0};
    static const int32_t len[SQ] = {4, 3, 0};
    static const int k0[] = {0, 1, 2, 3}, k1[] = {5, 3};
    RefMla p = problem(576, idx, len, NULL);
    int ok = !run(&p);
    check(ok && row_is(&p, 0, k0, 4, NULL), "topk_length = topk: every position");
    check(ok && row_is(&p, 1, k1, 2, NULL), "topk_length 3: position 3 ignored, an invalid index inside still skipped");
    check(ok && row_is(&p, 2, NULL, 0, NULL), "topk_length 0: an empty row");
    /* every bit pattern has a meaning (fa4.h): past topk is topk, below 0 is an empty row */
    static const int32_t over[SQ] = {5, INT32_MAX, 0}, neg[SQ] = {4, -1, INT32_MIN};
    p.topk_length = over;
    ok = !run(&p);
    check(ok && row_is(&p, 0, k0, 4, NULL) && row_is(&p, 1, (const int[]){5, 3, 2}, 3, NULL),
          "topk_length 5 and 2^31 - 1 with topk 4: every position");
    p.topk_length = neg;
    ok = !run(&p);
    check(ok && row_is(&p, 1, NULL, 0, NULL) && row_is(&p, 2, NULL, 0, NULL),
          "topk_length -1 and -2^31: empty rows (out 0, lse +inf, max_logits -inf)");
}

static void test_duplicates(void)
{
    static const int32_t idx[SQ * TOPK] = {3, 3, 3, 1, 2, 2, -1, 2, 0, 5, 0, 5};
    static const int k0[] = {3, 3, 3, 1}, k1[] = {2, 2, 2}, k2[] = {0, 5, 0, 5}, once[] = {3, 1};
    RefMla p = problem(576, idx, NULL, NULL);
    int ok = !run(&p);
    check(ok && row_is(&p, 0, k0, 4, NULL), "a duplicated index counts as many times as it appears");
    check(ok && row_is(&p, 1, k1, 3, NULL), "one key three times (softmax of equal logits: out = v, lse = l + log 3)");
    check(ok && row_is(&p, 2, k2, 4, NULL), "two keys twice each");
    quiet = 1;
    check(ok && !row_is(&p, 0, once, 2, NULL), "(the duplicates change the result)");
    quiet = 0;
}

static void test_sink(void)
{
    static const int32_t idx[SQ * TOPK] = {0, 1, 2, 3, 5, 4, 3, 2, -1, -1, -1, -1};
    static const int keys[2][TOPK] = {{0, 1, 2, 3}, {5, 4, 3, 2}};
    double plain[SQ * HQ * REF_MLA_DV], plse[SQ * HQ], pmx[SQ * HQ];
    RefMla p = problem(576, idx, NULL, NULL);
    run(&p);
    memcpy(plain, out, sizeof out), memcpy(plse, lse, sizeof lse), memcpy(pmx, mx, sizeof mx);

    float sink[HQ] = {0.5f, (float)plse[1]}; /* head 1: about its row-0 lse, so out about halves */
    p.attn_sink = sink;
    int ok = !run(&p);
    check(ok && row_is(&p, 0, keys[0], TOPK, sink) && row_is(&p, 1, keys[1], TOPK, sink),
          "a finite sink: out scaled by e^lse / (e^lse + e^sink), as the textbook");
    check(ok && !memcmp(lse, plse, sizeof lse) && !memcmp(mx, pmx, sizeof mx), "a sink leaves lse and max_logits");
    check(ok && fabs(out[REF_MLA_DV] - plain[REF_MLA_DV] * 0.5) <= 1e-6 * fabs(plain[REF_MLA_DV]),
          "a sink equal to lse halves out");
    check(ok && row_is(&p, 2, NULL, 0, sink), "a sink on an empty row: out 0, lse +inf, max -inf");

    const float cases[4] = {-INFINITY, -1e4f, 1e4f, INFINITY};
    for (int c = 0; c < 4; c++) {
        sink[0] = sink[1] = cases[c];
        ok = !run(&p);
        int same = ok, zero = ok;
        for (size_t i = 0; i < 2 * HQ * REF_MLA_DV; i++) same &= out[i] == plain[i], zero &= out[i] == 0.0;
        same &= !memcmp(lse, plse, sizeof lse) && !memcmp(mx, pmx, sizeof mx);
        char what[96];
        snprintf(what, sizeof what, "a sink of %g %s", (double)cases[c], c < 2 ? "leaves out as without one" : "zeroes out");
        check(c < 2 ? same : zero && !memcmp(lse, plse, sizeof lse), what);
        check(ok && row_is(&p, 2, NULL, 0, NULL), "... and an empty row stays 0 / +inf / -inf");
    }
}

static void test_strides(void)
{
    static const int32_t idx[SQ * TOPK] = {0, -1, 2, 3, 5, 4, 4, 2, 1, 3, SKV, 0};
    static const int32_t len[SQ] = {4, 3, 2};
    float sink[HQ] = {0.25f, -1.0f};
    RefMla p = problem(576, idx, len, sink);
    run(&p);
    double want[SQ * HQ * REF_MLA_DV], wl[SQ * HQ], wm[SQ * HQ];
    memcpy(want, out, sizeof out), memcpy(wl, lse, sizeof lse), memcpy(wm, mx, sizeof mx);

    /* the same tensors in padded layouts */
    enum { QH = 576 + 8, QS = HQ * QH + 16, KVS = 576 + 32, IS = TOPK + 3, OH = REF_MLA_DV + 4, OS = HQ * OH + 8 };
    uint16_t *q = calloc(SQ * QS, sizeof *q), *kv = calloc(SKV * KVS, sizeof *kv);
    int32_t *ix = calloc(SQ * IS, sizeof *ix);
    double *o = calloc(SQ * OS, sizeof *o);
    if (!q || !kv || !ix || !o) { check(0, "out of memory"); return; }
    for (int s = 0; s < SQ; s++)
        for (int h = 0; h < HQ; h++) memcpy(q + s * QS + h * QH, qbuf + (s * HQ + h) * 576, 576 * sizeof *q);
    for (int s = 0; s < SKV; s++) memcpy(kv + s * KVS, kvbuf + s * 576, 576 * sizeof *kv);
    for (int s = 0; s < SQ; s++) {
        memcpy(ix + s * IS, idx + s * TOPK, TOPK * sizeof *ix);
        for (int t = TOPK; t < IS; t++) ix[s * IS + t] = 1; /* padding that must not be read */
    }
    p.q = q, p.q_stride_s = QS, p.q_stride_h = QH, p.kv = kv, p.kv_stride_s = KVS;
    p.indices = ix, p.indices_stride_s = IS, p.out_stride_s = OS, p.out_stride_h = OH;
    char err[256];
    int ok = !ref_mla_sparse_fwd(&p, o, lse, mx, err, sizeof err);
    for (int s = 0; s < SQ; s++)
        for (int h = 0; h < HQ; h++)
            ok &= !memcmp(o + s * OS + h * OH, want + (s * HQ + h) * REF_MLA_DV, REF_MLA_DV * sizeof *o);
    ok &= !memcmp(lse, wl, sizeof lse) && !memcmp(mx, wm, sizeof mx);
    check(ok, "padded strides for q (s, h), kv (s), indices (s), out (s, h) give the packed results exactly");
    free(q), free(kv), free(ix), free(o);
}

static void test_refusals(void)
{
    static const int32_t idx[SQ * TOPK] = {0};
    char err[256];
    RefMla p = problem(576, idx, NULL, NULL);
    p.d_qk = 128;
    check(ref_mla_sparse_fwd(&p, out, lse, mx, err, sizeof err) == -1 && strstr(err, "576"), "d_qk 128 is refused");
    p = problem(576, idx, NULL, NULL);
    p.kv_stride_s = -576;
    check(ref_mla_sparse_fwd(&p, out, lse, mx, err, sizeof err) == -1, "a negative stride is refused");
}

/* ---------------------------------------------------------- e4m3 and fp8 kv */

static void test_e4m3(void)
{
    check(ref_mla_e4m3_decode(0x38) == 1.0, "e4m3 0x38 = 1");
    check(ref_mla_e4m3_decode(0x7E) == 448.0 && ref_mla_e4m3_decode(0xFE) == -448.0, "e4m3 max 448");
    check(ref_mla_e4m3_decode(0x01) == 0x1p-9, "e4m3 smallest subnormal 2^-9");
    check(isnan(ref_mla_e4m3_decode(0x7F)) && isnan(ref_mla_e4m3_decode(0xFF)), "e4m3 NaN codes");
    int round_trip = 1;
    for (int b = 0; b < 256; b++)
        if ((b & 0x7F) != 0x7F && ref_mla_e4m3_encode(ref_mla_e4m3_decode((uint8_t)b)) != b)
            round_trip = 0;
    check(round_trip, "e4m3 encode(decode(b)) == b for every finite code");
    check(ref_mla_e4m3_encode(1.0625) == 0x38, "a tie (1 + 1/16) rounds to the even 1");
    check(ref_mla_e4m3_encode(1000.0) == 0x7E, "saturates at 448");
    /* fp8 kv with a scale per 64 columns: a row of ones scaled by 2 in its first block only (an entry
     * 0 in the others means 1): q = e_0 + e_64 gives the logit (2 + 1) * sm_scale */
    static uint16_t q[576];
    static uint8_t kv[576];
    static float sc[9];
    for (int d = 0; d < 576; d++) q[d] = 0, kv[d] = 0x38;
    q[0] = q[64] = 0x3F80;
    sc[0] = 2.0f;
    int32_t idx = 0;
    RefMla r;
    memset(&r, 0, sizeof r);
    r.q = q, r.kv8 = kv, r.kv_scale = sc, r.kv_scale_block = 64, r.indices = &idx;
    r.s_q = 1, r.s_kv = 1, r.h_q = 1, r.d_qk = 576, r.topk = 1, r.sm_scale = 1.0;
    double o8[512], l8, m8;
    char err[128];
    check(ref_mla_sparse_fwd(&r, o8, &l8, &m8, err, sizeof err) == 0 && m8 == 3.0 && o8[0] == 2.0 && o8[64] == 1.0,
          "fp8 kv: scales per block of 64, 0 = 1");
}

int main(void)
{
    test_bf16();
    test_e4m3();
    fill(qbuf, sizeof qbuf / sizeof qbuf[0], 1);
    fill(kvbuf, sizeof kvbuf / sizeof kvbuf[0], 2);
    test_textbook(576);
    test_textbook(512);
    test_invalid();
    test_topk_length();
    test_duplicates();
    test_sink();
    test_strides();
    test_refusals();
    printf("test_ref_mla: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
