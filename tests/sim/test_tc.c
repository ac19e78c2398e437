/* test_tc.c - standalone tests of the tensor-core unit (tc.c).
 *
 * Operands are placed in a fake shared memory by this file's own reading of
 * the PTX ISA canonical layouts (hierarchical shape:stride modes evaluated
 * generically, then the CuTe-style Swizzle<B,M,S> XOR of address bits), and
 * results are compared with a plain double-precision matmul. */
#include "tc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int n_pass, n_fail;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            n_pass++;                                                      \
        } else {                                                           \
            n_fail++;                                                      \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                    \
            printf(__VA_ARGS__);                                           \
            printf("\n");                                                  \
        }                                                                  \
    } while (0)

/* ------------------------------------------------------------ fake memory */

enum { NCTA = 4, SMEM_BYTES = 256 * 1024 };
static uint8_t smem[NCTA][SMEM_BYTES];
static uint32_t tmem[NCTA][128][512];
static long n_smem_bytes, n_tmem_reads, n_tmem_writes, n_fp_writes;
static char errbuf[512];

static int cb_smem_read(void *u, int cta, uint32_t addr, void *dst, uint32_t n)
{
    (void)u;
    if (cta < 0 || cta >= NCTA || addr + n > SMEM_BYTES) {
        snprintf(errbuf, sizeof errbuf, "fake smem: read of %u bytes at 0x%x in CTA %d out of range", n, addr, cta);
        return -1;
    }
    memcpy(dst, smem[cta] + addr, n);
    n_smem_bytes += n;
    return 0;
}
static int cb_tmem_read(void *u, int cta, uint32_t lane, uint32_t col, uint32_t *v)
{
    (void)u;
    if (cta < 0 || cta >= NCTA || lane >= 128 || col >= 512) {
        snprintf(errbuf, sizeof errbuf, "fake tmem: read of lane %u col %u in CTA %d out of range", lane, col, cta);
        return -1;
    }
    *v = tmem[cta][lane][col];
    n_tmem_reads++;
    return 0;
}
static int cb_tmem_write(void *u, int cta, uint32_t lane, uint32_t col, uint32_t v)
{
    (void)u;
    if (cta < 0 || cta >= NCTA || lane >= 128 || col >= 512) {
        snprintf(errbuf, sizeof errbuf, "fake tmem: write of lane %u col %u in CTA %d out of range", lane, col, cta);
        return -1;
    }
    tmem[cta][lane][col] = v;
    n_tmem_writes++;
    return 0;
}
static int cb_fp_write(void *u, int cta, uint32_t lane, uint32_t col)
{
    (void)u;
    (void)cta;
    (void)lane;
    (void)col;
    n_fp_writes++;
    return 0;
}

static TcMem MEM = {0, cb_smem_read, cb_tmem_read, cb_tmem_write, errbuf, sizeof errbuf, cb_fp_write};

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

/* ----------------------------------------------------- test-side encoders */

/* Values exactly representable in every input type used here: 0 and
 * +-(1 + m/4) * 2^e, e in [-3, 3]. */
static float rnd_val(void)
{
    uint32_t r = rnd();
    if (r % 9 == 0) return 0.0f;
    float v = ldexpf(1.0f + (float)((r >> 4) % 4) / 4.0f, (int)((r >> 8) % 7) - 3);
    return (r >> 16) & 1 ? -v : v;
}

static uint32_t f2bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}
static float bits2f(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* encode an exactly representable normal (or zero) value */
static uint32_t enc_small(float v, int ebits, int mbits, int bias)
{
    uint32_t s = signbit(v) ? 1u : 0u;
    if (v == 0) return s << (ebits + mbits);
    int e;
    float f = frexpf(fabsf(v), &e); /* [0.5,1) */
    uint32_t E = (uint32_t)(e - 1 + bias);
    uint32_t mant = (uint32_t)((f * 2.0f - 1.0f) * (float)(1u << mbits));
    return s << (ebits + mbits) | E << mbits | mant;
}

static uint32_t encode(TcType t, float v)
{
    switch (t) {
    case TC_F16: return enc_small(v, 5, 10, 15);
    case TC_BF16: return f2bits(v) >> 16;
    case TC_TF32: return f2bits(v) | (rnd() & 0x1fffu); /* junk in the ignored 13 bits */
    case TC_F32: return f2bits(v);
    case TC_E4M3: return enc_small(v, 4, 3, 7);
    case TC_E5M2: return enc_small(v, 5, 2, 15);
    default: return 0;
    }
}

static int tbytes(TcType t)
{
    return t == TC_F16 || t == TC_BF16 ? 2 : t == TC_TF32 || t == TC_F32 ? 4 : 1;
}

/* test-side f16 decode (for f16 accumulators) */
static float f16dec(uint32_t h)
{
    int e = (int)((h >> 10) & 31), f = (int)(h & 1023);
    float v = e ? ldexpf((float)(1024 + f), e - 25) : ldexpf((float)f, -24);
    return (h & 0x8000) ? -v : v;
}
static float round_f16(double x)
{
    /* brute force nearest-even among f16 values via float rounding of the
     * scaled value: adequate for the moderate magnitudes of these tests */
    if (x == 0) return 0;
    int e;
    frexp(fabs(x), &e);
    double ulp = ldexp(1.0, (e - 1 < -14 ? -14 : e - 1) - 10);
    return (float)(nearbyint(x / ulp) * ulp);
}

/* --------------------------------------------- canonical layouts (test side) */

/* One mode of a CuTe layout: up to 3 sub-modes (shape, byte stride); the last
 * sub-mode takes whatever remains of the coordinate. */
typedef struct {
    int n;
    long shape[3], stride[3];
} Mode;

static long eval_mode(const Mode *md, long c)
{
    long off = 0;
    for (int i = 0; i < md->n; i++) {
        long ci = (i == md->n - 1) ? c : c % md->shape[i];
        off += ci * md->stride[i];
        if (i < md->n - 1) c /= md->shape[i];
    }
    return off;
}

/* CuTe Swizzle<B,M,S> on a byte offset: bits [M+S, M+S+B) are XORed into bits
 * [M, M+B). */
static uint32_t cute_swizzle(uint32_t a, int B, int M, int S)
{
    uint32_t ymask = ((1u << B) - 1u) << (M + S);
    return a ^ ((a & ymask) >> S);
}

typedef struct {
    int swz;        /* 0 none, 32, 64, 128, 1 = 128B with 32B atomicity */
    int mn_major;
    int es;         /* element bytes */
    uint32_t start, lbo, sbo;
} TLay;

/* Byte address of element (mn, k) per the ISA's canonical layout table. */
static uint32_t tlay_addr(const TLay *L, long mn, long k)
{
    long T = 16 / L->es, es = L->es;
    Mode a, b; /* a: MN mode, b: K mode */
    if (!L->mn_major) {
        if (!L->swz) {
            a = (Mode){2, {8, 0}, {T * es, L->sbo}};
            b = (Mode){2, {T, 0}, {es, L->lbo}};
        } else {
            a = (Mode){2, {8, 0}, {L->swz * 1L, L->sbo}}; /* (cT) elements = swizzle width bytes */
            b = (Mode){2, {T, 0}, {es, T * es}};
        }
    } else {
        if (!L->swz) {
            a = (Mode){3, {T, 1, 0}, {es, T * es, L->sbo}};
            b = (Mode){2, {8, 0}, {T * es, L->lbo}};
        } else if (L->swz == 1) {
            a = (Mode){3, {T, 8, 0}, {es, T * es, L->lbo}};
            b = (Mode){2, {4, 0}, {128, L->sbo}};
        } else {
            long c = L->swz / 16;
            a = (Mode){3, {T, c, 0}, {es, T * es, L->lbo}};
            b = (Mode){2, {8, 0}, {c * T * es, L->sbo}};
        }
    }
    uint32_t addr = L->start + (uint32_t)(eval_mode(&a, mn) + eval_mode(&b, k));
    switch (L->swz) {
    case 32: return cute_swizzle(addr, 1, 4, 3);
    case 64: return cute_swizzle(addr, 2, 4, 3);
    case 128: return cute_swizzle(addr, 3, 4, 3);
    case 1: return cute_swizzle(addr, 2, 5, 2);
    default: return addr;
    }
}

static uint64_t umma_desc(const TLay *L)
{
    uint64_t code = L->swz == 0 ? 0 : L->swz == 1 ? 1 : L->swz == 128 ? 2 : L->swz == 64 ? 4 : 6;
    return (uint64_t)((L->start >> 4) & 0x3fff) | (uint64_t)((L->lbo >> 4) & 0x3fff) << 16 |
           (uint64_t)((L->sbo >> 4) & 0x3fff) << 32 | 1ull << 46 | code << 61;
}

static uint64_t wgmma_desc(const TLay *L)
{
    uint64_t code = L->swz == 0 ? 0 : L->swz == 128 ? 1 : L->swz == 64 ? 2 : 3;
    return (uint64_t)((L->start >> 4) & 0x3fff) | (uint64_t)((L->lbo >> 4) & 0x3fff) << 16 |
           (uint64_t)((L->sbo >> 4) & 0x3fff) << 32 | code << 62;
}

/* Choose LBO/SBO for a dense tile of MN x K elements (K = the MMA's K) at
 * `start`; `variant` flips the order of the two strided dimensions. */
static void tlay_dense(TLay *L, int swz, int mn_major, int es, uint32_t MN, uint32_t K, uint32_t start, int variant)
{
    L->swz = swz;
    L->mn_major = mn_major;
    L->es = es;
    L->start = start;
    uint32_t T = 16u / (uint32_t)es;
    if (!mn_major) {
        if (!swz) { /* core matrices 8 rows x 16 B; K has 2 of them */
            if (variant) { L->lbo = 128; L->sbo = 256; }
            else { L->sbo = 128; L->lbo = (MN + 7) / 8 * 128; }
        } else {
            L->lbo = 16; /* "not used, assumed to be 1" */
            L->sbo = 8u * (uint32_t)swz;
        }
    } else {
        if (!swz) { /* core matrices T (MN) x 8 (K) = 128 B */
            uint32_t nmn = (MN + T - 1) / T, nk = (K + 7) / 8;
            if (variant) { L->lbo = 128; L->sbo = 128 * nk; }
            else { L->sbo = 128; L->lbo = 128 * nmn; }
        } else if (swz == 1) {
            uint32_t nk = (K + 3) / 4;
            L->sbo = 512;
            L->lbo = 512 * nk;
        } else {
            uint32_t nk = (K + 7) / 8;
            L->sbo = 8u * (uint32_t)swz;
            L->lbo = 8u * (uint32_t)swz * nk;
        }
    }
}

/* write element values (row-major MN x K floats) into CTA cta's smem */
static void place(int cta, const TLay *L, TcType t, const float *v, uint32_t MN, uint32_t K)
{
    for (uint32_t r = 0; r < MN; r++)
        for (uint32_t k = 0; k < K; k++) {
            uint32_t a = tlay_addr(L, r, k), bits = encode(t, v[r * K + k]);
            for (int b = 0; b < L->es; b++) smem[cta][a + (uint32_t)b] = (uint8_t)(bits >> (8 * b));
        }
}

/* ------------------------------------------------------------ idesc helper */

static uint32_t type_code(TcType t)
{
    switch (t) {
    case TC_F16: case TC_E4M3: return 0;
    case TC_BF16: case TC_E5M2: return 1;
    case TC_TF32: return 2;
    default: return 7;
    }
}

static uint32_t make_idesc(int d_f32, TcType at, TcType bt, int neg_a, int neg_b, int a_mn, int b_mn, int N, int M)
{
    return (uint32_t)d_f32 << 4 | type_code(at) << 7 | type_code(bt) << 10 | (uint32_t)neg_a << 13 |
           (uint32_t)neg_b << 14 | (uint32_t)a_mn << 15 | (uint32_t)b_mn << 16 | (uint32_t)(N >> 3) << 17 |
           (uint32_t)(M >> 4) << 24;
}

/* D location per data-path layout, written from the Layout table of 9.7.16.10.5:
 * F (M=64, 1/2 data path): each warp's quarter holds 16 rows in its first 16
 * lanes; B (M=128 pair, 2x2): the left half of the columns in lanes 0-63, the
 * right half in lanes 64-127. */
static void d_where(int M, int cg, int N, int i, int j, uint32_t *lane, uint32_t *col)
{
    if (cg == 1 && M == 64) {
        *lane = (uint32_t)(i + 16 * (i / 16));
        *col = (uint32_t)j;
    } else if (cg == 2 && M == 128) {
        int h = j >= N / 2;
        *lane = (uint32_t)(i + 64 * h);
        *col = (uint32_t)(j - h * N / 2);
    } else {
        *lane = (uint32_t)i;
        *col = (uint32_t)j;
    }
}

/* ---------------------------------------------------------- MMA test core */

typedef struct {
    TcKind kind;
    TcType at, bt;
    int d_f32;
    int M, N, cg;
    int a_mn, b_mn, aswz, bswz, avar, bvar;
    int a_tmem;
    int enable_d, neg_a, neg_b;
    int cta;           /* issuing CTA */
    uint32_t dlane, dcol, acol;
    uint32_t a_koff;   /* K-major swizzled A: start advanced along K by this many bytes */
} MmaCase;

static int run_mma_case(const MmaCase *c, const char *label)
{
    int cg = c->cg, M = c->M, N = c->N, K = 32 / tbytes(c->at);
    int Mloc = M / cg, Nloc = N / cg;
    int ctas[2] = {cg == 1 ? c->cta : (c->cta & ~1), c->cta | 1};
    static float A[256 * 32], Bm[256 * 32], D0[2][128 * 256];
    for (int i = 0; i < M * K; i++) A[i] = rnd_val();
    for (int i = 0; i < N * K; i++) Bm[i] = rnd_val();
    TLay la = {0}, lb;
    uint32_t abase = 0x2000 + c->a_koff, bbase = 0x12000;
    for (int v = 0; v < cg; v++) {
        int cta = ctas[v];
        memset(smem[cta], 0xEE, SMEM_BYTES);
        if (!c->a_tmem) {
            tlay_dense(&la, c->aswz, c->a_mn, tbytes(c->at), (uint32_t)Mloc, (uint32_t)K, abase, c->avar);
            place(cta, &la, c->at, A + v * Mloc * K, (uint32_t)Mloc, (uint32_t)K);
        } else {
            /* A in TMEM: row i in the data-path lane of row i, 32 bytes per row in
             * 8 columns, packed from bit 0; layout B duplicates A in lanes 64-127 */
            int es = tbytes(c->at), per = 4 / es;
            for (int i = 0; i < Mloc; i++)
                for (int col = 0; col < 8; col++) {
                    uint32_t cell = 0;
                    for (int e = 0; e < per; e++)
                        cell |= encode(c->at, A[(v * Mloc + i) * K + col * per + e]) << (8 * es * e);
                    uint32_t lane, dummy;
                    d_where(M, cg, N, i, 0, &lane, &dummy);
                    tmem[cta][c->dlane + lane][c->acol + (uint32_t)col] = cell;
                    if (cg == 2 && M == 128) tmem[cta][64 + i][c->acol + (uint32_t)col] = cell;
                }
        }
        /* B as an N x K operand; CTA v holds columns [v*N/2, (v+1)*N/2) in the pair */
        tlay_dense(&lb, c->bswz, c->b_mn, tbytes(c->bt), (uint32_t)Nloc, (uint32_t)K, bbase, c->bvar);
        place(cta, &lb, c->bt, Bm + v * Nloc * K, (uint32_t)Nloc, (uint32_t)K);
        /* old D */
        for (int i = 0; i < Mloc; i++)
            for (int j = 0; j < N; j++) {
                uint32_t lane, col;
                float old = rnd_val();
                D0[v][i * N + j] = old;
                d_where(M, cg, N, i, j, &lane, &col);
                tmem[cta][c->dlane + lane][c->dcol + col] = c->d_f32 ? f2bits(old) : encode(TC_F16, old);
            }
    }
    TcMma op = {0};
    op.kind = c->kind;
    op.cta_group = cg;
    op.cta = c->cta;
    op.d_tmem = c->dlane << 16 | c->dcol;
    op.a_is_tmem = c->a_tmem;
    op.a_tmem = c->dlane << 16 | c->acol;
    op.a_desc = umma_desc(&la);
    op.b_desc = umma_desc(&lb);
    op.idesc = make_idesc(c->d_f32, c->at, c->bt, c->neg_a, c->neg_b, c->a_mn, c->b_mn, N, M);
    op.enable_input_d = c->enable_d;
    errbuf[0] = 0;
    if (tc_mma(&MEM, &op, TC_EXECUTE)) {
        CHECK(0, "%s: tc_mma refused: %s", label, errbuf);
        return -1;
    }
    int bad = 0;
    double sa = c->neg_a ? -1 : 1, sb = c->neg_b ? -1 : 1;
    for (int v = 0; v < cg && bad < 3; v++)
        for (int i = 0; i < Mloc && bad < 3; i++)
            for (int j = 0; j < N && bad < 3; j++) {
                double s = c->enable_d ? D0[v][i * N + j] : 0;
                for (int k = 0; k < K; k++) s += sa * A[(v * Mloc + i) * K + k] * sb * Bm[j * K + k];
                uint32_t lane, col;
                d_where(M, cg, N, i, j, &lane, &col);
                uint32_t cell = tmem[ctas[v]][c->dlane + lane][c->dcol + col];
                double got = c->d_f32 ? bits2f(cell) : f16dec(cell & 0xffff);
                double want = c->d_f32 ? (double)(float)s : round_f16(s);
                if (fabs(got - want) > 1e-6 * fmax(1.0, fabs(want)) || (!c->d_f32 && (cell >> 16))) {
                    bad++;
                    CHECK(0, "%s: CTA %d D[%d][%d] = %g, want %g", label, ctas[v], v * Mloc + i, j, got, want);
                }
            }
    CHECK(bad == 0, "%s", label);
    return bad ? -1 : 0;
}

static const char *tn(TcType t)
{
    switch (t) {
    case TC_F16: return "f16";
    case TC_BF16: return "bf16";
    case TC_TF32: return "tf32";
    case TC_E4M3: return "e4m3";
    case TC_E5M2: return "e5m2";
    default: return "?";
    }
}

static void test_mma_sweep(void)
{
    struct { TcKind k; TcType a, b; int d_f32; } types[] = {
        {TC_KIND_F16, TC_BF16, TC_BF16, 1}, {TC_KIND_F16, TC_F16, TC_F16, 1},   {TC_KIND_F16, TC_F16, TC_F16, 0},
        {TC_KIND_F8F6F4, TC_E4M3, TC_E4M3, 1}, {TC_KIND_F8F6F4, TC_E5M2, TC_E4M3, 1},
        {TC_KIND_F8F6F4, TC_E5M2, TC_E5M2, 0}, {TC_KIND_TF32, TC_TF32, TC_TF32, 1},
    };
    int swzs[4] = {0, 32, 64, 128};
    int Ns[] = {8, 16, 24, 64, 136, 256, 48, 200};
    int counter = 0;
    char label[256];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (int amn = 0; amn < 2; amn++)
            for (int bmn = 0; bmn < 2; bmn++)
                for (int s = 0; s < 4; s++)
                    for (int M = 64; M <= 128; M *= 2) {
                        MmaCase c = {0};
                        c.kind = types[t].k;
                        c.at = types[t].a;
                        c.bt = types[t].b;
                        c.d_f32 = types[t].d_f32;
                        c.M = M;
                        c.cg = 1;
                        c.cta = counter % NCTA;
                        c.a_mn = amn;
                        c.b_mn = bmn;
                        c.aswz = swzs[s];
                        c.bswz = swzs[(s + 1 + counter) % 4];
                        if (c.at == TC_TF32) { /* MN-major tf32 only with 128B/32B atomicity */
                            if (amn) c.aswz = 1;
                            if (bmn) c.bswz = 1;
                        }
                        c.avar = counter & 1;
                        c.bvar = (counter >> 1) & 1;
                        c.N = Ns[counter % 8];
                        if (bmn && tbytes(c.bt) == 1 && c.N % 16) c.N += 8;
                        c.enable_d = counter & 1;
                        c.neg_a = (counter % 5) == 0;
                        c.neg_b = (counter % 7) == 0;
                        c.dlane = (M == 64 && (counter & 2)) ? 16 : 0;
                        c.dcol = (uint32_t)(counter % 3) * 8;
                        if (!amn && c.aswz >= 64 && (counter & 4)) c.a_koff = 32; /* 2nd K slice of a wide row */
                        snprintf(label, sizeof label, "mma %s x %s -> %s, A %s/%d B %s/%d M%d N%d d%d koff%u", tn(c.at),
                                 tn(c.bt), c.d_f32 ? "f32" : "f16", amn ? "MN" : "K", c.aswz, bmn ? "MN" : "K", c.bswz,
                                 M, c.N, c.enable_d, c.a_koff);
                        run_mma_case(&c, label);
                        counter++;
                    }
}

static void test_mma_pair_and_ts(void)
{
    char label[256];
    int counter = 0;
    /* cta_group::2, M = 256 and 128, issued by either CTA of the pair */
    for (int M = 128; M <= 256; M *= 2)
        for (int s = 0; s < 4; s++)
            for (int mn = 0; mn < 2; mn++) {
                int swz[4] = {0, 32, 64, 128};
                int Ns[4] = {16, 64, 128, 256};
                MmaCase c = {0};
                c.kind = TC_KIND_F16;
                c.at = c.bt = (counter & 1) ? TC_F16 : TC_BF16;
                c.d_f32 = 1;
                c.M = M;
                c.N = Ns[(s + mn) % 4];
                c.cg = 2;
                c.cta = (counter % 4 == 3) ? 3 : counter % 2; /* pairs (0,1) and (2,3) */
                c.a_mn = mn;
                c.b_mn = !mn;
                c.aswz = swz[s];
                c.bswz = swz[(s + 2) % 4];
                c.enable_d = counter & 1;
                c.dcol = 64;
                snprintf(label, sizeof label, "mma cta_group::2 M%d N%d issued by CTA %d, A %s/%d B %s/%d", M, c.N, c.cta,
                         mn ? "MN" : "K", c.aswz, !mn ? "MN" : "K", c.bswz);
                run_mma_case(&c, label);
                counter++;
            }
    /* fp8 pair with MN-major 8-bit B (N multiple of 32) */
    {
        MmaCase c = {0};
        c.kind = TC_KIND_F8F6F4;
        c.at = TC_E4M3;
        c.bt = TC_E5M2;
        c.d_f32 = 1;
        c.M = 256;
        c.N = 96;
        c.cg = 2;
        c.b_mn = 1;
        c.bswz = 64;
        c.aswz = 128;
        c.enable_d = 1;
        run_mma_case(&c, "mma cta_group::2 e4m3 x e5m2 MN-major B N96");
    }
    /* TS form: A from TMEM */
    struct { int M, cg, N; uint32_t lane; TcType t; } ts[] = {
        {128, 1, 128, 0, TC_BF16}, {64, 1, 64, 0, TC_F16}, {64, 1, 32, 16, TC_BF16}, {256, 2, 256, 0, TC_BF16},
        {128, 2, 128, 0, TC_F16},  {128, 1, 64, 0, TC_E4M3}, {128, 1, 32, 0, TC_TF32}, {128, 2, 32, 0, TC_E5M2},
    };
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        MmaCase c = {0};
        c.kind = ts[i].t == TC_TF32 ? TC_KIND_TF32 : tbytes(ts[i].t) == 1 ? TC_KIND_F8F6F4 : TC_KIND_F16;
        c.at = c.bt = ts[i].t;
        c.d_f32 = 1;
        c.M = ts[i].M;
        c.cg = ts[i].cg;
        c.N = ts[i].N;
        c.a_tmem = 1;
        c.dlane = ts[i].lane;
        c.dcol = 256;
        c.acol = 100;
        c.bswz = (int)(i % 4) * 32 == 96 ? 128 : (int)(i % 4) * 32;
        c.enable_d = (int)(i & 1);
        c.cta = (int)(i % 2);
        snprintf(label, sizeof label, "mma TS %s M%d cta_group::%d N%d lane %u", tn(c.at), c.M, c.cg, c.N, c.dlane);
        run_mma_case(&c, label);
    }
    /* Layout B reads the right half of the columns with the copy of A in lanes
     * 64-127: spoil that copy and the right half (only) must change. */
    {
        MmaCase c = {0};
        c.kind = TC_KIND_F16;
        c.at = c.bt = TC_BF16;
        c.d_f32 = 1;
        c.M = 128;
        c.cg = 2;
        c.N = 64;
        c.a_tmem = 1;
        c.dcol = 0;
        c.acol = 200;
        run_mma_case(&c, "mma TS layout B (reference)");
        float ref[128][64];
        for (int l = 0; l < 128; l++)
            for (int j = 0; j < 32; j++) ref[l][j] = bits2f(tmem[0][l][j]);
        for (int l = 64; l < 128; l++)
            for (int col = 0; col < 8; col++) tmem[0][l][200 + col] = 0; /* zero the duplicate */
        TcMma op = {0};
        op.kind = TC_KIND_F16;
        op.cta_group = 2;
        op.cta = 0;
        op.d_tmem = 0;
        op.a_is_tmem = 1;
        op.a_tmem = 200;
        TLay lb;
        tlay_dense(&lb, 0, 0, 2, 32, 16, 0x12000, 0);
        op.b_desc = umma_desc(&lb);
        op.idesc = make_idesc(1, TC_BF16, TC_BF16, 0, 0, 0, 0, 64, 128);
        op.enable_input_d = 0;
        int rc = tc_mma(&MEM, &op, TC_EXECUTE);
        int left_same = 1, right_zero = 1;
        for (int l = 0; l < 64; l++)
            for (int j = 0; j < 32; j++) {
                if (bits2f(tmem[0][l][j]) != ref[l][j]) left_same = 0;
                if (bits2f(tmem[0][64 + l][j]) != 0.0f) right_zero = 0;
            }
        CHECK(rc == 0 && left_same && right_zero,
              "layout B TS: left half from lanes 0-63 (%d), right half from the zeroed copy in lanes 64-127 (%d)",
              left_same, right_zero);
    }
}

/* D through tcgen05.ld: 4 warps of .32x32b read an M=128 result row by row */
static void test_mma_then_ld(void)
{
    MmaCase c = {0};
    c.kind = TC_KIND_F16;
    c.at = c.bt = TC_BF16;
    c.d_f32 = 1;
    c.M = 128;
    c.cg = 1;
    c.N = 32;
    c.aswz = 128;
    c.bswz = 128;
    c.dcol = 32;
    run_mma_case(&c, "mma for ld");
    int ok = 1;
    for (int w = 4; w < 8; w++) {
        TcLdSt ld = {0, w, TC_32x32b, 32, 0, (uint32_t)(32 * (w % 4)) << 16 | 32, 0};
        static uint32_t regs[32][TC_MAX_REGS];
        if (tc_tmem_ld(&MEM, &ld, regs)) { ok = 0; break; }
        for (int t = 0; t < 32; t++)
            for (int j = 0; j < 32; j++)
                if (regs[t][j] != tmem[0][32 * (w % 4) + t][32 + j]) ok = 0;
    }
    CHECK(ok, "32x32b loads of an M=128 D by warps 4-7: thread t of warp w holds row 32*(w%%4)+t");
}

static void test_mma_footprint_and_speed(void)
{
    /* footprint: reads only, exact byte count */
    TLay la, lb;
    tlay_dense(&la, 128, 0, 2, 128, 16, 0x2000, 0);
    tlay_dense(&lb, 64, 1, 2, 96, 16, 0x12000, 0);
    TcMma op = {0};
    op.kind = TC_KIND_F16;
    op.cta_group = 1;
    op.cta = 1;
    op.d_tmem = 16;
    op.a_desc = umma_desc(&la);
    op.b_desc = umma_desc(&lb);
    op.idesc = make_idesc(1, TC_BF16, TC_BF16, 0, 0, 0, 1, 96, 128);
    op.enable_input_d = 1;
    memset(tmem[1], 0x5a, sizeof tmem[1]);
    n_smem_bytes = n_tmem_reads = n_tmem_writes = n_fp_writes = 0;
    int rc = tc_mma(&MEM, &op, TC_FOOTPRINT);
    CHECK(rc == 0 && n_smem_bytes == (128 + 96) * 32 && n_tmem_reads == 128 * 96 && n_tmem_writes == 0 &&
              n_fp_writes == 128 * 96 && tmem[1][0][16] == 0x5a5a5a5au,
          "footprint: %ld smem bytes, %ld TMEM reads, %ld writes, %ld footprint writes (rc %d %s)", n_smem_bytes,
          n_tmem_reads, n_tmem_writes, n_fp_writes, rc, errbuf);
    op.enable_input_d = 0;
    n_tmem_reads = 0;
    rc = tc_mma(&MEM, &op, TC_FOOTPRINT);
    CHECK(rc == 0 && n_tmem_reads == 0, "footprint without enable-input-d reads no D (%ld)", n_tmem_reads);

    /* speed: 128x128x16 bf16 */
    tlay_dense(&lb, 128, 0, 2, 128, 16, 0x12000, 0);
    op.b_desc = umma_desc(&lb);
    op.idesc = make_idesc(1, TC_BF16, TC_BF16, 0, 0, 0, 0, 128, 128);
    op.enable_input_d = 1;
    memset(tmem[1], 0, sizeof tmem[1]);
    /* the process's CPU time, best of 4 batches: the machine is shared, wall time measures the others */
    double us = 1e30;
    for (int b = 0; b < 4; b++) {
        struct timespec t0, t1;
        int reps = 50;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
        for (int i = 0; i < reps; i++) rc |= tc_mma(&MEM, &op, TC_EXECUTE);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
        double t = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) / reps;
        if (t < us) us = t;
    }
    printf("tc_mma 128x128x16 bf16: %.1f us per MMA\n", us);
    CHECK(rc == 0 && us < 1000.0, "128x128x16 bf16 MMA takes %.1f us (want well under 1 ms)", us);
}

/* ------------------------------------------------------------ refusals */

static int refused(const char *needle)
{
    int ok = strstr(errbuf, needle) != NULL;
    if (!ok) printf("  (message was: %s)\n", errbuf);
    return ok;
}

static void test_mma_refusals(void)
{
    TLay l;
    tlay_dense(&l, 128, 0, 2, 128, 16, 0x2000, 0);
    uint64_t good = umma_desc(&l);
    TcMma base = {0};
    base.kind = TC_KIND_F16;
    base.cta_group = 1;
    base.a_desc = good;
    base.b_desc = good;
    base.idesc = make_idesc(1, TC_BF16, TC_BF16, 0, 0, 0, 0, 128, 128);
    TcMma op;
    CHECK(tc_mma(&MEM, &base, TC_FOOTPRINT) == 0, "baseline accepted: %s", errbuf);

#define REFUSE(mod, needle)                                                         \
    do {                                                                            \
        op = base;                                                                  \
        mod;                                                                        \
        errbuf[0] = 0;                                                              \
        CHECK(tc_mma(&MEM, &op, TC_FOOTPRINT) == -1 && refused(needle), "%s", #mod); \
    } while (0)

    REFUSE(op.a_desc &= ~(7ull << 46), "bits 46-48");
    REFUSE(op.b_desc |= 1ull << 55, "bits 53-60");
    REFUSE(op.a_desc = (op.a_desc & ~(7ull << 61)) | 3ull << 61, "swizzle mode 3");
    REFUSE(op.a_desc = (op.a_desc & ~(7ull << 61)) | 5ull << 61, "swizzle mode 5");
    REFUSE(op.a_desc = (op.a_desc & ~(7ull << 61)) | 7ull << 61, "swizzle mode 7");
    REFUSE(op.a_desc |= 1ull << 52, "sm_103a");
    REFUSE(op.b_desc |= 3ull << 49, "base offset 3");
    REFUSE(op.a_desc += 0x400 >> 4 >> 1, "row 4 of a 128B swizzle pattern"); /* start + 512 */
    REFUSE(op.a_desc |= 1ull << 14, "reserved bits 14-15");
    REFUSE(op.idesc |= 4, "sparse");
    REFUSE(op.idesc |= 8, "saturate");
    REFUSE(op.idesc |= 1u << 23, "reserved bit 23");
    REFUSE(op.idesc |= 1u << 30, "maximum shift");
    REFUSE(op.idesc = make_idesc(1, TC_BF16, TC_BF16, 0, 0, 0, 0, 0, 128), "N must be a multiple of 8 in 8..256 for M 128");
    REFUSE(op.idesc = make_idesc(1, TC_BF16, TC_BF16, 0, 0, 0, 0, 128, 256), "M must be 64 or 128");
    REFUSE((op.cta_group = 2, op.idesc = make_idesc(1, TC_BF16, TC_BF16, 0, 0, 0, 0, 24, 256)), "multiple of 16 in 16..256");
    REFUSE((op.cta_group = 2, op.idesc = make_idesc(1, TC_BF16, TC_BF16, 0, 0, 0, 0, 64, 64)), "M must be 128 or 256");
    REFUSE(op.idesc = make_idesc(0, TC_BF16, TC_BF16, 0, 0, 0, 0, 128, 128), "f16 D needs f16 A/B");
    REFUSE(op.idesc = make_idesc(1, TC_F16, TC_BF16, 0, 0, 0, 0, 128, 128), "mixes A f16 with B bf16");
    REFUSE((op.kind = TC_KIND_TF32), "A type code 1");
    REFUSE((op.kind = TC_KIND_F8F6F4, op.idesc = (op.idesc & ~(7u << 7)) | 3u << 7), "6-bit and 4-bit");
    REFUSE((op.kind = TC_KIND_F8F6F4, op.idesc = make_idesc(1, TC_E4M3, TC_E4M3, 0, 0, 0, 1, 24, 128)),
           "multiple of 16 (Table 50)");
    REFUSE(op.d_tmem = 16u << 16, "lane alignment 0");
    REFUSE(op.d_tmem = 400, "past column 511");
    REFUSE((op.a_is_tmem = 1, op.a_tmem = 0, op.idesc = make_idesc(1, TC_BF16, TC_BF16, 0, 0, 1, 0, 128, 128)),
           "K-major only");
    REFUSE((op.a_desc = (op.a_desc & ~(7ull << 61)) | 1ull << 61), "no K-major");
    {
        TLay t;
        tlay_dense(&t, 128, 1, 4, 128, 8, 0x2000, 0);
        REFUSE((op.kind = TC_KIND_TF32, op.a_desc = umma_desc(&t),
                op.idesc = make_idesc(1, TC_TF32, TC_TF32, 0, 0, 1, 0, 128, 128)),
               "needs 128B swizzling with 32B atomicity");
    }
    REFUSE(op.cta_group = 3, "cta_group 3");
#undef REFUSE
}

/* ------------------------------------------------ ISA canonical examples */

static void test_isa_layout_examples(void)
{
    /* 9.7.16.3.3 / 9.7.15.5.1.2.1.3 "Examples": exact layouts with concrete
     * LBO/SBO and their encodings; element offsets x element size = bytes. */
    struct {
        const char *name;
        int mn_major, swz, es;
        uint32_t lbo_enc, sbo_enc;
        Mode mn, k; /* exact layout, strides in elements */
        int kmax;
    } ex[] = {
        {"K-major, no-swizzling, tf32: ((8,2),(4,4)):((4,32),(1,64))", 0, 0, 4, 16, 8,
         {2, {8, 2}, {4, 32}}, {2, {4, 4}, {1, 64}}, 16},
        /* only the 32 bytes of K one MMA reads: the example's K mode runs on
         * linearly past the 32-byte swizzle row */
        {"K-major, 32B swizzling, tf32: Swizzle<1,4,3> o ((8,2),(4,4)):((8,64),(1,4))", 0, 32, 4, 1, 16,
         {2, {8, 2}, {8, 64}}, {2, {4, 4}, {1, 4}}, 8},
        {"MN-major, no-swizzling, bf16: ((8,1,2),(8,2)):((1,8,64),(8,128))", 1, 0, 2, 16, 8,
         {3, {8, 1, 2}, {1, 8, 64}}, {2, {8, 2}, {8, 128}}, 16},
        {"MN-major, 32B swizzling, bf16: Swizzle<1,4,3> o ((8,2,2),(8,2)):((1,8,128),(16,256))", 1, 32, 2, 16, 32,
         {3, {8, 2, 2}, {1, 8, 128}}, {2, {8, 2}, {16, 256}}, 16},
        {"MN-major, 64B swizzling, bf16: Swizzle<2,4,3> o ((8,4,2),(8,2)):((1,8,256),(32,512))", 1, 64, 2, 32, 64,
         {3, {8, 4, 2}, {1, 8, 256}}, {2, {8, 2}, {32, 512}}, 16},
    };
    for (size_t e = 0; e < sizeof ex / sizeof ex[0]; e++) {
        uint32_t start = 0x4000;
        TLay L = {ex[e].swz, ex[e].mn_major, ex[e].es, start, ex[e].lbo_enc << 4, ex[e].sbo_enc << 4};
        uint64_t ud = umma_desc(&L), wd = wgmma_desc(&L);
        int bad = 0;
        int nmn = (int)(ex[e].mn.shape[0] * ex[e].mn.shape[1] * (ex[e].mn.n == 3 ? ex[e].mn.shape[2] : 1));
        for (int r = 0; r < nmn; r++)
            for (int k = 0; k < ex[e].kmax; k++) {
                Mode a = ex[e].mn, b = ex[e].k;
                /* whole-shape evaluation: every sub-mode bounded */
                long off = 0, c = r;
                for (int i = 0; i < a.n; i++) { off += (c % a.shape[i]) * a.stride[i]; c /= a.shape[i]; }
                c = k;
                for (int i = 0; i < b.n; i++) { off += (c % b.shape[i]) * b.stride[i]; c /= b.shape[i]; }
                uint32_t want = start + (uint32_t)(off * ex[e].es);
                if (ex[e].swz == 32) want = cute_swizzle(want, 1, 4, 3);
                if (ex[e].swz == 64) want = cute_swizzle(want, 2, 4, 3);
                uint32_t got1 = 0, got2 = 0;
                int rc1 = tc_umma_smem_addr(&MEM, ud, ex[e].mn_major, ex[e].es * 8, (uint32_t)r, (uint32_t)k, &got1);
                int rc2 = tc_wgmma_smem_addr(&MEM, wd, ex[e].mn_major, ex[e].es * 8, (uint32_t)r, (uint32_t)k, &got2);
                if (rc1 || rc2 || got1 != want || got2 != want) {
                    if (!bad) printf("  %s: (%d,%d) want 0x%x got 0x%x / 0x%x (%s)\n", ex[e].name, r, k, want, got1, got2, errbuf);
                    bad++;
                }
            }
        CHECK(!bad, "ISA example %s", ex[e].name);
        char buf[256];
        tc_describe_umma_desc(ud, buf, sizeof buf);
        char want[64];
        snprintf(want, sizeof want, "LBO %u B SBO %u B", ex[e].lbo_enc << 4, ex[e].sbo_enc << 4);
        CHECK(strstr(buf, want) != NULL, "describe of example %zu: %s (want %s)", e, buf, want);
    }
}

/* ------------------------------------------------------------- ld / st */

/* Expected (lane offset, 32-bit column offset, half) of register i of thread t,
 * as this file reads the ISA's fragment figures 183-187. */
static void frag_where(TcShape s, int t, int i, int *lane, int *col, int *half)
{
    int g = t >> 2, q = t & 3;
    *half = 0;
    switch (s) {
    case TC_32x32b: *lane = t; *col = i; break;
    case TC_16x64b: /* per 64-bit chunk: threads in pairs, even threads rows 0-7, odd threads rows 8-15 */
        *lane = g + ((t & 1) ? 8 : 0);
        *col = i * 2 + ((t >> 1) & 1);
        break;
    case TC_16x128b: /* per 128-bit chunk: a quad spans 4 columns; r even rows 0-7, r odd rows 8-15 */
        *lane = g + ((i & 1) ? 8 : 0);
        *col = (i >> 1) * 4 + q;
        break;
    case TC_16x256b: /* per 256-bit chunk: like an m16n8 accumulator: {r0,r1} row g, {r2,r3} row g+8 */
        *lane = g + ((i & 2) ? 8 : 0);
        *col = (i >> 2) * 8 + q * 2 + (i & 1);
        break;
    case TC_16x32bx2: *lane = t & 15; *col = i; *half = t >> 4; break;
    }
}

static void test_ldst(void)
{
    static uint32_t regs[32][TC_MAX_REGS], back[32][TC_MAX_REGS];
    TcShape shapes[5] = {TC_32x32b, TC_16x64b, TC_16x128b, TC_16x256b, TC_16x32bx2};
    const char *names[5] = {"32x32b", "16x64b", "16x128b", "16x256b", "16x32bx2"};
    int per[5] = {1, 1, 2, 4, 1};
    /* Table 49 register counts, and the ISA's examples */
    for (int s = 0; s < 5; s++)
        for (int n = 1; n <= 128; n *= 2) {
            TcLdSt op = {0, 0, shapes[s], n, 0, 0, 0};
            int want = n * per[s] > 128 ? -1 : n * per[s];
            CHECK(tc_ldst_nregs(&op) == want, "Table 49: %s.x%d -> %d registers", names[s], n, want);
        }
    {
        TcLdSt a = {0, 0, TC_32x32b, 2, 0, 0, 0}, b = {0, 0, TC_16x128b, 4, 0, 0, 0}, c = {0, 0, TC_16x32bx2, 8, 0, 0, 16},
               d = {0, 0, TC_16x64b, 4, 0, 0, 0}, e = {0, 0, TC_16x128b, 1, 1, 0, 0};
        CHECK(tc_ldst_nregs(&a) == 2 && tc_ldst_nregs(&b) == 8 && tc_ldst_nregs(&c) == 8 && tc_ldst_nregs(&d) == 4 &&
                  tc_ldst_nregs(&e) == 2,
              "ISA ld/st examples: {r0,r1} / 8 regs / 8 regs / {r0..r3} / {r0,r1}");
    }
    for (int s = 0; s < 5; s++)
        for (int n = 1; n * per[s] <= 128; n *= 2)
            for (int pack = 0; pack < 2; pack++) {
                int w = (n + s + pack) % 8; /* any warp, its quarter is w % 4 */
                uint32_t lane0 = (uint32_t)(32 * (w % 4)) + ((shapes[s] != TC_32x32b && (n & 2)) ? 16u : 0u);
                uint32_t col0 = (uint32_t)((n * 3 + s) % 7);
                uint32_t split = 300;
                int ncols = n * per[s] * (shapes[s] == TC_16x128b ? 2 : shapes[s] == TC_16x256b ? 2 : shapes[s] == TC_16x64b ? 2 : 1);
                ncols = ncols * (pack ? 2 : 1);
                if (shapes[s] == TC_16x32bx2) split = (uint32_t)(ncols + 3);
                if (col0 + split + (uint32_t)ncols > 512) col0 = 0, split = (uint32_t)ncols;
                for (int l = 0; l < 128; l++)
                    for (int col = 0; col < 512; col++) tmem[2][l][col] = (uint32_t)l << 20 | (uint32_t)col << 8 | 0x5u;
                TcLdSt op = {2, w, shapes[s], n, pack, lane0 << 16 | col0, split};
                int nr = tc_ldst_nregs(&op);
                errbuf[0] = 0;
                int rc = tc_tmem_ld(&MEM, &op, regs);
                int bad = 0;
                for (int t = 0; t < 32 && !rc; t++)
                    for (int i = 0; i < nr; i++) {
                        int lo = 0, co = 0, h = 0;
                        frag_where(shapes[s], t, i, &lo, &co, &h);
                        uint32_t L = lane0 + (uint32_t)lo, C = col0 + (h ? split : 0u) + (uint32_t)(pack ? 2 * co : co);
                        uint32_t want = pack ? ((tmem[2][L][C] & 0xffffu) | (tmem[2][L][C + 1] & 0xffffu) << 16)
                                             : tmem[2][L][C];
                        if (regs[t][i] != want) {
                            if (!bad) printf("  %s.x%d pack %d: thread %d reg %d = 0x%08x want 0x%08x\n", names[s], n, pack, t, i, regs[t][i], want);
                            bad++;
                        }
                    }
                CHECK(rc == 0 && !bad, "tcgen05.ld.%s.x%d%s by warp %d at lane %u: %s", names[s], n, pack ? ".pack::16b" : "",
                      w, lane0, errbuf);
                /* round trip: st random registers (unpack), ld them back */
                for (int t = 0; t < 32; t++)
                    for (int i = 0; i < nr; i++) regs[t][i] = rnd();
                for (int l = 0; l < 128; l++) memset(tmem[2][l], 0xAB, sizeof tmem[2][l]);
                rc = tc_tmem_st(&MEM, &op, (const uint32_t(*)[TC_MAX_REGS])regs);
                rc |= tc_tmem_ld(&MEM, &op, back);
                bad = 0;
                long touched = 0;
                for (int t = 0; t < 32; t++)
                    for (int i = 0; i < nr; i++) bad += regs[t][i] != back[t][i];
                for (int l = 0; l < 128; l++)
                    for (int col = 0; col < 512; col++) touched += tmem[2][l][col] != 0xABABABABu;
                CHECK(rc == 0 && !bad && touched == 32L * nr * (pack ? 2 : 1),
                      "st/ld round trip .%s.x%d%s: %d mismatches, %ld cells written (want %d)", names[s], n,
                      pack ? " pack/unpack" : "", bad, touched, 32 * nr * (pack ? 2 : 1));
                if (pack) { /* unpack leaves the upper halves 0 */
                    int hi = 0;
                    for (int l = 0; l < 128; l++)
                        for (int col = 0; col < 512; col++)
                            if (tmem[2][l][col] != 0xABABABABu && (tmem[2][l][col] >> 16)) hi++;
                    CHECK(hi == 0, "unpack::16b writes each 16-bit half to the low bits of its column (%d cells)", hi);
                }
            }
    /* the quarter rule */
    {
        TcLdSt op = {0, 5, TC_32x32b, 1, 0, 0u << 16, 0};
        errbuf[0] = 0;
        CHECK(tc_tmem_ld(&MEM, &op, regs) == -1 && refused("warp 5") && refused("lanes 32-63") && refused("lane 0"),
              "warp 5 loading lanes 0-31 is refused");
        TcLdSt op2 = {0, 2, TC_16x64b, 1, 0, 81u << 16, 0};
        errbuf[0] = 0;
        CHECK(tc_tmem_st(&MEM, &op2, (const uint32_t(*)[TC_MAX_REGS])regs) == -1 && refused("lanes 64-95") &&
                  refused("lane 96"),
              "warp 2 storing .16x64b at lane 81 (lanes 81-96) touches lane 96 and is refused");
        TcLdSt op3 = {0, 3, TC_16x32bx2, 1, 0, 96u << 16, 32u << 16};
        errbuf[0] = 0;
        CHECK(tc_tmem_ld(&MEM, &op3, regs) == -1 && refused("lane 128"),
              ".16x32bx2 whose split offset moves the second half out of the quarter is refused");
        TcLdSt op4 = {0, 0, TC_16x256b, 64, 0, 0, 0};
        errbuf[0] = 0;
        CHECK(tc_tmem_ld(&MEM, &op4, regs) == -1 && refused("x64"), ".16x256b.x64 is refused (Table 49: NA)");
        TcLdSt op5 = {0, 0, TC_32x32b, 3, 0, 0, 0};
        CHECK(tc_tmem_ld(&MEM, &op5, regs) == -1, ".x3 is refused");
        TcLdSt op6 = {0, 0, TC_32x32b, 128, 0, 400, 0};
        errbuf[0] = 0;
        CHECK(tc_tmem_ld(&MEM, &op6, regs) == -1 && refused("past column"), "columns past 511 are refused");
    }
}

/* ------------------------------------------------------------------ cp */

static void test_cp(void)
{
    struct { TcCpShape s; TcCpMulticast mc; int rows, bytes; const char *name; } cs[] = {
        {TC_CP_128x256b, TC_MC_NONE, 128, 32, "128x256b"},
        {TC_CP_128x128b, TC_MC_NONE, 128, 16, "128x128b"},
        {TC_CP_64x128b, TC_MC_WARPX2_02_13, 64, 16, "64x128b.warpx2::02_13"},
        {TC_CP_64x128b, TC_MC_WARPX2_01_23, 64, 16, "64x128b.warpx2::01_23"},
        {TC_CP_32x128b, TC_MC_WARPX4, 32, 16, "32x128b.warpx4"},
    };
    int swzs[4] = {0, 32, 64, 128};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int s = 0; s < 4; s++) {
            TLay L;
            tlay_dense(&L, swzs[s], 0, 1, (uint32_t)cs[i].rows, (uint32_t)cs[i].bytes, 0x8000, (int)i & 1);
            static uint8_t src[128][32];
            for (int r = 0; r < cs[i].rows; r++)
                for (int b = 0; b < cs[i].bytes; b++) {
                    src[r][b] = (uint8_t)rnd();
                    smem[3][tlay_addr(&L, r, b)] = src[r][b];
                }
            memset(tmem[3], 0, sizeof tmem[3]);
            TcCp op = {3, cs[i].s, cs[i].mc, 40, umma_desc(&L), 1};
            errbuf[0] = 0;
            int rc = tc_tmem_cp(&MEM, &op, TC_EXECUTE);
            int bad = 0, written = 0;
            for (int l = 0; l < 128; l++)
                for (int c = 0; c < 512; c++) written += tmem[3][l][c] != 0;
            for (int r = 0; r < cs[i].rows; r++) {
                int lanes[4], nl = 0;
                if (cs[i].rows == 128) lanes[nl++] = r;
                else if (cs[i].rows == 32) for (int w = 0; w < 4; w++) lanes[nl++] = 32 * w + r;
                else if (cs[i].mc == TC_MC_WARPX2_02_13) { lanes[nl++] = r; lanes[nl++] = r + 64; } /* warps {0,2} / {1,3} */
                else { lanes[nl++] = (r / 32) * 64 + r % 32; lanes[nl++] = (r / 32) * 64 + 32 + r % 32; }
                for (int j = 0; j < nl; j++)
                    for (int c = 0; c < cs[i].bytes / 4; c++) {
                        uint32_t want = 0;
                        memcpy(&want, src[r] + 4 * c, 4);
                        if (tmem[3][lanes[j]][40 + c] != want) bad++;
                    }
            }
            CHECK(rc == 0 && !bad, "tcgen05.cp.%s swizzle %d: %d bad cells (%s)", cs[i].name, swzs[s], bad, errbuf);
            (void)written;
        }
    TcCp bad1 = {0, TC_CP_4x256b, TC_MC_NONE, 0, 0, 1};
    TLay L;
    tlay_dense(&L, 0, 0, 1, 128, 32, 0x8000, 0);
    bad1.s_desc = umma_desc(&L);
    errbuf[0] = 0;
    CHECK(tc_tmem_cp(&MEM, &bad1, TC_EXECUTE) == -1 && refused("4x256b"), "cp .4x256b refused");
    TcCp bad2 = {0, TC_CP_128x256b, TC_MC_NONE, 0, bad1.s_desc, 3};
    errbuf[0] = 0;
    CHECK(tc_tmem_cp(&MEM, &bad2, TC_EXECUTE) == -1 && refused("cta_group 3"), "cp cta_group 3 refused");
    TcCp bad3 = {0, TC_CP_64x128b, TC_MC_NONE, 0, bad1.s_desc, 1};
    errbuf[0] = 0;
    CHECK(tc_tmem_cp(&MEM, &bad3, TC_EXECUTE) == -1 && refused("requires"), "cp .64x128b without multicast refused");
    TcCp bad4 = {0, TC_CP_128x128b, TC_MC_NONE, 32u << 16, bad1.s_desc, 1};
    errbuf[0] = 0;
    CHECK(tc_tmem_cp(&MEM, &bad4, TC_EXECUTE) == -1 && refused("lane 32"), "cp to lane 32 refused");
}

/* tcgen05.cp.cta_group::2: each CTA of the pair copies from its own shared memory into its own
 * TMEM, whichever CTA issues it; a copy of an A operand followed by the A-from-TMEM MMA equals
 * the MMA reading A from shared memory through the same descriptor. */
static void test_cp_pair(void)
{
    TLay L;
    tlay_dense(&L, 128, 0, 1, 128, 32, 0x8000, 0);
    static uint8_t src[2][128][32];
    for (int issuer = 2; issuer <= 3; issuer++) {
        for (int v = 0; v < 2; v++)
            for (int r = 0; r < 128; r++)
                for (int b = 0; b < 32; b++) {
                    src[v][r][b] = (uint8_t)rnd();
                    smem[2 + v][tlay_addr(&L, r, b)] = src[v][r][b];
                }
        memset(tmem, 0, sizeof tmem);
        TcCp op = {issuer, TC_CP_128x256b, TC_MC_NONE, 16, umma_desc(&L), 2};
        errbuf[0] = 0;
        int rc = tc_tmem_cp(&MEM, &op, TC_EXECUTE), bad = 0, stray = 0;
        for (int v = 0; v < 2; v++)
            for (int r = 0; r < 128; r++)
                for (int c = 0; c < 8; c++) {
                    uint32_t want;
                    memcpy(&want, src[v][r] + 4 * c, 4);
                    bad += tmem[2 + v][r][16 + c] != want;
                }
        for (int cta = 0; cta < 2; cta++)
            for (int l = 0; l < 128; l++)
                for (int c = 0; c < 512; c++) stray += tmem[cta][l][c] != 0;
        CHECK(rc == 0 && !bad && !stray,
              "tcgen05.cp.cta_group::2.128x256b issued by CTA %d: %d cells not from their own CTA's shared memory, "
              "%d written outside the pair (%s)", issuer, bad, stray, errbuf);
    }
    /* copy + TS MMA == SS MMA: M = 256 over the pair (2, 3), N = 64, bf16, A K-major 128B-swizzled */
    TLay la, lb;
    tlay_dense(&la, 128, 0, 2, 128, 16, 0x4000, 0);
    tlay_dense(&lb, 0, 0, 2, 32, 16, 0x12000, 0);
    static float a[2][128 * 16], b[2][32 * 16];
    for (int v = 0; v < 2; v++) {
        for (int i = 0; i < 128 * 16; i++) a[v][i] = rnd_val();
        for (int i = 0; i < 32 * 16; i++) b[v][i] = rnd_val();
        place(2 + v, &la, TC_BF16, a[v], 128, 16);
        place(2 + v, &lb, TC_BF16, b[v], 32, 16);
    }
    memset(tmem, 0, sizeof tmem);
    TcMma ss = {TC_KIND_F16, 2, 3, 0, 0, 0, umma_desc(&la), umma_desc(&lb),
                make_idesc(1, TC_BF16, TC_BF16, 0, 0, 0, 0, 64, 256), 0};
    errbuf[0] = 0;
    int rc = tc_mma(&MEM, &ss, TC_EXECUTE);
    static uint32_t dss[2][128][64];
    int refbad = 0;
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < 128; i++)
            for (int j = 0; j < 64; j++) {
                dss[v][i][j] = tmem[2 + v][i][j];
                double want = 0;
                for (int k = 0; k < 16; k++) want += (double)a[v][i * 16 + k] * b[j / 32][(j % 32) * 16 + k];
                refbad += fabs(bits2f(dss[v][i][j]) - want) > 1e-6 * (1 + fabs(want));
            }
    CHECK(rc == 0 && !refbad, "cta_group::2 SS MMA M256 N64 against the double reference: %d bad (%s)", refbad, errbuf);
    memset(tmem, 0, sizeof tmem);
    TcCp cp = {2, TC_CP_128x256b, TC_MC_NONE, 200, umma_desc(&la), 2};
    TcMma ts = ss;
    ts.a_is_tmem = 1, ts.a_tmem = 200, ts.a_desc = 0;
    errbuf[0] = 0;
    rc = tc_tmem_cp(&MEM, &cp, TC_EXECUTE) || tc_mma(&MEM, &ts, TC_EXECUTE);
    int diff = 0;
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < 128; i++)
            for (int j = 0; j < 64; j++) diff += tmem[2 + v][i][j] != dss[v][i][j];
    CHECK(rc == 0 && !diff, "tcgen05.cp.cta_group::2 of A + A-from-TMEM MMA equals the SS MMA: %d cells differ (%s)", diff,
          errbuf);

    /* M = 128 over the pair (Layout B: 64 rows per CTA, A read from lanes i and 64 + i): two
     * .64x128b.warpx2::02_13 copies (16 bytes of K each, the second at +16 bytes / +4 columns) give
     * the SS result; ::01_23 puts rows 32-63 in lanes 64-127 and must not. */
    TLay la2;
    tlay_dense(&la2, 128, 0, 2, 64, 16, 0x4000, 0);
    for (int v = 0; v < 2; v++) place(2 + v, &la2, TC_BF16, a[v], 64, 16);
    memset(tmem, 0, sizeof tmem);
    TcMma ss2 = {TC_KIND_F16, 2, 2, 0, 0, 0, umma_desc(&la2), umma_desc(&lb),
                 make_idesc(1, TC_BF16, TC_BF16, 0, 0, 0, 0, 64, 128), 0};
    errbuf[0] = 0;
    rc = tc_mma(&MEM, &ss2, TC_EXECUTE);
    static uint32_t dss2[2][128][32];
    for (int v = 0; v < 2; v++)
        for (int l = 0; l < 128; l++)
            for (int c = 0; c < 32; c++) dss2[v][l][c] = tmem[2 + v][l][c];
    CHECK(rc == 0, "cta_group::2 SS MMA M128 (%s)", errbuf);
    for (int mc = TC_MC_WARPX2_02_13; mc <= TC_MC_WARPX2_01_23; mc++) {
        memset(tmem, 0, sizeof tmem);
        TcCp h0 = {3, TC_CP_64x128b, (TcCpMulticast)mc, 200, umma_desc(&la2), 2}, h1 = h0;
        TLay la2k = la2;
        la2k.start += 16; /* the second 16 bytes of K: same swizzle row */
        h1.taddr = 204, h1.s_desc = umma_desc(&la2k);
        TcMma ts2 = ss2;
        ts2.a_is_tmem = 1, ts2.a_tmem = 200, ts2.a_desc = 0;
        errbuf[0] = 0;
        rc = tc_tmem_cp(&MEM, &h0, TC_EXECUTE) || tc_tmem_cp(&MEM, &h1, TC_EXECUTE) || tc_mma(&MEM, &ts2, TC_EXECUTE);
        diff = 0;
        for (int v = 0; v < 2; v++)
            for (int l = 0; l < 128; l++)
                for (int c = 0; c < 32; c++) diff += tmem[2 + v][l][c] != dss2[v][l][c];
        if (mc == TC_MC_WARPX2_02_13)
            CHECK(rc == 0 && !diff, "two .64x128b.warpx2::02_13 copies + TS MMA M128 pair equal the SS MMA: %d differ (%s)",
                  diff, errbuf);
        else
            CHECK(rc == 0 && diff, "the ::01_23 lane pattern is not Layout B's duplicate of A (%d cells differ)", diff);
    }
}

/* ---------------------------------------------------------------- wgmma */

/* D fragment as this file reads Figures 149/151/153: warp w owns rows
 * 16w..16w+15; like the m16n8 accumulator, repeated every 8 columns. */
static void wg_d_where(int t, int e, int *row, int *col)
{
    int w = t >> 5, lane = t & 31;
    *row = 16 * w + (lane >> 2) + ((e & 2) ? 8 : 0);
    *col = (e >> 2) * 8 + (lane & 3) * 2 + (e & 1);
}
/* A fragment, Figures 148/150/152 */
static void wg_a_where(int es, int t, int e, int *row, int *col)
{
    int w = t >> 5, lane = t & 31, g = lane >> 2, q = lane & 3;
    if (es == 2) { *row = 16 * w + g + ((e & 2) ? 8 : 0); *col = (e >> 2) * 8 + q * 2 + (e & 1); }
    else if (es == 4) { *row = 16 * w + g + ((e & 1) ? 8 : 0); *col = (e >> 1) * 4 + q; }
    else { *row = 16 * w + g + ((e & 4) ? 8 : 0); *col = (e >> 3) * 16 + q * 4 + (e & 3); }
}

static void run_wgmma(TcType at, TcType bt, TcType dt, int N, int rs, int amn, int bmn, int aswz, int bswz, int scale_d,
                      int sa, int sb, const char *label)
{
    int es = tbytes(at), K = 32 / es;
    static float A[64 * 32], B[256 * 32], D0[64 * 256];
    static uint32_t areg[128][TC_MAX_REGS], d[128][TC_MAX_REGS];
    for (int i = 0; i < 64 * K; i++) A[i] = rnd_val();
    for (int i = 0; i < N * K; i++) B[i] = rnd_val();
    memset(smem[0], 0xCD, SMEM_BYTES);
    TLay la = {0}, lb;
    if (!rs) {
        tlay_dense(&la, aswz, amn, es, 64, (uint32_t)K, 0x1000, 0);
        place(0, &la, at, A, 64, (uint32_t)K);
    } else {
        memset(areg, 0, sizeof areg);
        int per = 4 / es;
        for (int t = 0; t < 128; t++)
            for (int e = 0; e < 4 * per; e++) {
                int r, c;
                wg_a_where(es, t, e, &r, &c);
                areg[t][e / per] |= encode(at, A[r * K + c]) << (8 * es * (e % per));
            }
    }
    tlay_dense(&lb, bswz, bmn, es, (uint32_t)N, (uint32_t)K, 0x10000, 1);
    place(0, &lb, bt, B, (uint32_t)N, (uint32_t)K);
    int f16 = dt == TC_F16;
    memset(d, 0, sizeof d);
    for (int t = 0; t < 128; t++)
        for (int e = 0; e < N / 2; e++) {
            int r, c;
            wg_d_where(t, e, &r, &c);
            float v = rnd_val();
            D0[r * N + c] = v;
            if (f16) d[t][e / 2] |= encode(TC_F16, v) << (16 * (e & 1));
            else d[t][e] = f2bits(v);
        }
    TcWgmma op = {0, 64, N, K, dt, at, bt, rs, wgmma_desc(&la), wgmma_desc(&lb), scale_d, sa, sb, amn, bmn};
    errbuf[0] = 0;
    if (tc_wgmma(&MEM, &op, (const uint32_t(*)[TC_MAX_REGS])areg, d, TC_EXECUTE)) {
        CHECK(0, "%s: refused: %s", label, errbuf);
        return;
    }
    int bad = 0;
    for (int t = 0; t < 128; t++)
        for (int e = 0; e < N / 2; e++) {
            int r, c;
            wg_d_where(t, e, &r, &c);
            double s = scale_d ? D0[r * N + c] : 0;
            for (int k = 0; k < K; k++) s += (double)sa * A[r * K + k] * sb * B[c * K + k];
            double got = f16 ? f16dec((d[t][e / 2] >> (16 * (e & 1))) & 0xffff) : bits2f(d[t][e]);
            double want = f16 ? round_f16(s) : (double)(float)s;
            if (fabs(got - want) > 1e-6 * fmax(1, fabs(want))) {
                if (!bad) printf("  %s: thread %d d%d (row %d col %d) = %g want %g\n", label, t, e, r, c, got, want);
                bad++;
            }
        }
    CHECK(!bad, "%s: %d bad", label, bad);
}

static void test_wgmma(void)
{
    char label[200];
    int Ns[] = {8, 16, 24, 64, 128, 256, 72, 200};
    int swzs[4] = {0, 32, 64, 128};
    int counter = 0;
    struct { TcType a, b, d; } ty[] = {
        {TC_BF16, TC_BF16, TC_F32}, {TC_F16, TC_F16, TC_F32}, {TC_F16, TC_F16, TC_F16},
        {TC_TF32, TC_TF32, TC_F32}, {TC_E4M3, TC_E5M2, TC_F32}, {TC_E5M2, TC_E5M2, TC_F16},
    };
    for (size_t t = 0; t < sizeof ty / sizeof ty[0]; t++)
        for (int rs = 0; rs < 2; rs++)
            for (int s = 0; s < 4; s++) {
                int sixteen = tbytes(ty[t].a) == 2;
                int amn = sixteen && !rs && (counter & 1), bmn = sixteen && (counter & 2);
                int N = Ns[counter % 8];
                if (bmn && N % 8) N = 16;
                snprintf(label, sizeof label, "wgmma %s %s.%s.%s N%d A %s/%d B %s/%d", rs ? "RS" : "SS", tn(ty[t].d == TC_F16 ? TC_F16 : TC_TF32) , tn(ty[t].a),
                         tn(ty[t].b), N, amn ? "MN" : "K", swzs[s], bmn ? "MN" : "K", swzs[(s + 3) % 4]);
                run_wgmma(ty[t].a, ty[t].b, ty[t].d, N, rs, amn, bmn, swzs[s], swzs[(s + 3) % 4], counter % 3 != 0,
                          (counter % 4 == 1) ? -1 : 1, (counter % 5 == 2) ? -1 : 1, label);
                counter++;
            }
    /* ISA example: wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {f32d0..3}, {f16a0..3}, descB, 1, -1, -1, 1 */
    {
        TcWgmma op = {0, 64, 8, 16, TC_F32, TC_F16, TC_F16, 1, 0, 0, 1, -1, -1, 0, 1};
        CHECK(tc_wgmma_d_regs(&op) == 4 && tc_wgmma_a_regs(&op) == 4, "ISA example m64n8k16.f32: 4 D and 4 A registers");
        run_wgmma(TC_F16, TC_F16, TC_F32, 8, 1, 0, 1, 0, 0, 1, -1, -1, "ISA example m64n8k16 RS, scale -1 -1, trans-b 1");
        TcWgmma op2 = {0, 64, 72, 16, TC_F16, TC_F16, TC_F16, 0, 0, 0, 1, -1, 1, 1, 0};
        CHECK(tc_wgmma_d_regs(&op2) == 18, "ISA example m64n72k16.f16: 18 D registers (f16d0..f16d17)");
        run_wgmma(TC_F16, TC_F16, TC_F16, 72, 0, 1, 0, 128, 64, 1, -1, 1, "ISA example m64n72k16.f16 SS, trans-a 1");
    }
    /* refusals */
    static uint32_t a[128][TC_MAX_REGS], d[128][TC_MAX_REGS];
    TLay l;
    tlay_dense(&l, 128, 0, 2, 64, 16, 0x1000, 0);
    TcWgmma base = {0, 64, 64, 16, TC_F32, TC_BF16, TC_BF16, 0, wgmma_desc(&l), wgmma_desc(&l), 1, 1, 1, 0, 0};
    TcWgmma op;
#define WREFUSE(mod, needle)                                                                                     \
    do {                                                                                                          \
        op = base;                                                                                                \
        mod;                                                                                                      \
        errbuf[0] = 0;                                                                                            \
        CHECK(tc_wgmma(&MEM, &op, (const uint32_t(*)[TC_MAX_REGS])a, d, TC_FOOTPRINT) == -1 && refused(needle), \
              "%s", #mod);                                                                                        \
    } while (0)
    CHECK(tc_wgmma(&MEM, &base, (const uint32_t(*)[TC_MAX_REGS])a, d, TC_FOOTPRINT) == 0, "wgmma baseline: %s", errbuf);
    WREFUSE(op.n = 12, "multiple of 8");
    WREFUSE(op.k = 32, "K must be 16");
    WREFUSE(op.m = 128, "M must be 64");
    WREFUSE(op.dtype = TC_F16, "not valid with .bf16");
    WREFUSE(op.btype = TC_F16, "not a valid combination");
    WREFUSE(op.imm_scale_a = 2, "must be 1 or -1");
    WREFUSE((op.atype = op.btype = TC_E4M3, op.k = 32, op.tnsp_b = 1), "transpose is supported only");
    WREFUSE((op.a_is_reg = 1, op.tnsp_a = 1), "registers");
    WREFUSE(op.a_desc |= 2ull << 49, "base offset 2");
    WREFUSE(op.b_desc += 0x200 >> 4, "lies in row 4");
#undef WREFUSE
    /* footprint: shared memory only, exact bytes */
    n_smem_bytes = 0;
    int rc = tc_wgmma(&MEM, &base, (const uint32_t(*)[TC_MAX_REGS])a, d, TC_FOOTPRINT);
    CHECK(rc == 0 && n_smem_bytes == (64 + 64) * 32, "wgmma footprint reads %ld smem bytes", n_smem_bytes);
}

/* ------------------------------------------------------- number formats */

static void test_formats(void)
{
    CHECK(tc_to_float(TC_BF16, 0x3f80) == 1.0f && tc_to_float(TC_BF16, 0xc040) == -3.0f, "bf16 1.0, -3.0");
    CHECK(tc_to_float(TC_F16, 0x3c00) == 1.0f && tc_to_float(TC_F16, 0x7bff) == 65504.0f &&
              tc_to_float(TC_F16, 0x0001) == ldexpf(1, -24) && isinf(tc_to_float(TC_F16, 0x7c00)) &&
              isnan(tc_to_float(TC_F16, 0x7e00)),
          "f16 1.0, max 65504, min subnormal 2^-24, inf, nan");
    CHECK(tc_to_float(TC_TF32, 0x3f801fffu) == 1.0f, "tf32 ignores the lower 13 bits");
    CHECK(tc_to_float(TC_E4M3, 0x7e) == 448.0f && isnan(tc_to_float(TC_E4M3, 0x7f)) && tc_to_float(TC_E4M3, 0x38) == 1.0f &&
              tc_to_float(TC_E4M3, 0x01) == ldexpf(1, -9) && tc_to_float(TC_E4M3, 0xb8) == -1.0f &&
              tc_to_float(TC_E4M3, 0x78) == 256.0f,
          "e4m3 max 448, NaN 0x7f, 1.0, min subnormal 2^-9, 256 (no infinity)");
    CHECK(tc_to_float(TC_E5M2, 0x7b) == 57344.0f && isinf(tc_to_float(TC_E5M2, 0x7c)) && isnan(tc_to_float(TC_E5M2, 0x7d)) &&
              tc_to_float(TC_E5M2, 0x3c) == 1.0f && tc_to_float(TC_E5M2, 0x01) == ldexpf(1, -16),
          "e5m2 max 57344, inf, nan, 1.0, min subnormal 2^-16");
    CHECK(tc_to_float(TC_E2M1, 0x7) == 6.0f && tc_to_float(TC_E2M1, 0x1) == 0.5f && tc_to_float(TC_E2M1, 0xa) == -1.0f,
          "e2m1 6.0, 0.5, -1.0");
    CHECK(tc_to_float(TC_E3M2, 0x1f) == 28.0f && tc_to_float(TC_E3M2, 0x01) == 0.0625f, "e3m2 max 28, min subnormal 1/16");
    CHECK(tc_to_float(TC_E2M3, 0x1f) == 7.5f && tc_to_float(TC_E2M3, 0x01) == 0.125f, "e2m3 max 7.5, min subnormal 1/8");
    CHECK(tc_to_float(TC_F32, 0x40490fdbu) == 3.14159274f, "f32 pass-through");
    for (int i = 0; i < 2000; i++) {
        float v = rnd_val();
        if (tc_to_float(TC_F16, encode(TC_F16, v)) != v || tc_to_float(TC_E4M3, encode(TC_E4M3, v)) != v ||
            tc_to_float(TC_E5M2, encode(TC_E5M2, v)) != v || tc_to_float(TC_BF16, encode(TC_BF16, v)) != v) {
            CHECK(0, "encode/decode of %g", v);
            break;
        }
    }
}

static void test_describe(void)
{
    char buf[512];
    TLay L = {128, 0, 2, 0x3400, 16, 1024};
    tc_describe_umma_desc(umma_desc(&L), buf, sizeof buf);
    CHECK(strstr(buf, "start 0x03400") && strstr(buf, "LBO 16 B") && strstr(buf, "SBO 1024 B") && strstr(buf, "version 1") &&
              strstr(buf, "base-offset 0") && strstr(buf, "relative") && strstr(buf, "swizzle 128B"),
          "describe umma: %s", buf);
    printf("%s\n", buf);
    tc_describe_wgmma_desc(wgmma_desc(&L), buf, sizeof buf);
    CHECK(strstr(buf, "swizzle 128B") && strstr(buf, "SBO 1024 B"), "describe wgmma: %s", buf);
    printf("%s\n", buf);
    tc_describe_idesc(TC_KIND_F16, make_idesc(1, TC_BF16, TC_BF16, 1, 0, 0, 1, 256, 128), buf, sizeof buf);
    CHECK(strstr(buf, "D f32") && strstr(buf, "A bf16") && strstr(buf, "B bf16") && strstr(buf, "negA 1") &&
              strstr(buf, "B MN-major") && strstr(buf, "N 256") && strstr(buf, "M 128"),
          "describe idesc: %s", buf);
    printf("%s\n", buf);
    tc_describe_idesc(TC_KIND_F8F6F4, make_idesc(0, TC_E4M3, TC_E5M2, 0, 0, 0, 0, 8, 64) | 4u, buf, sizeof buf);
    CHECK(strstr(buf, "A e4m3") && strstr(buf, "B e5m2") && strstr(buf, "D f16") && strstr(buf, "sparse 1"),
          "describe f8f6f4 idesc: %s", buf);
}

int main(void)
{
    test_formats();
    test_isa_layout_examples();
    test_describe();
    test_mma_sweep();
    test_mma_pair_and_ts();
    test_mma_then_ld();
    test_mma_refusals();
    test_mma_footprint_and_speed();
    test_ldst();
    test_cp();
    test_cp_pair();
    test_wgmma();
    printf("test_tc: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
