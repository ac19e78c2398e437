/* test_tma.c - the TMA unit of the simulator against references written here
 * from the documents, independently of tma.c:
 *  - the swizzle as the PTX ISA (5.5.7) draws it: tables of which 16-byte
 *    chunk each 16-byte slot of a 128-byte shared-memory line holds, indexed by
 *    the absolute line number (so a 128-byte aligned destination that is not
 *    aligned to the pattern's repeat starts mid-table, as the ISA's base-offset
 *    formula says);
 *  - the box laid out densely (innermost fastest), a swizzled row taking the
 *    whole swizzle width (CUDA programming guide), elements at coordinate +
 *    k * elementStride (driver API), out-of-bounds elements filled (ISA 5.5.3.3)
 *    on loads and left alone on stores.
 * Plain C; the last line reads "test_tma: N passed, N failed". */
#include "tma.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int npass, nfail;

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (cond) {                                                                               \
            npass++;                                                                              \
        } else {                                                                                  \
            nfail++;                                                                              \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                           \
            printf(__VA_ARGS__);                                                                  \
            printf("\n");                                                                         \
        }                                                                                         \
    } while (0)

/* ---- a deterministic generator ------------------------------------------------------- */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
/* uniform in [lo, hi] */
static int64_t rr(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

/* ---- fake memories ------------------------------------------------------------------- */
#define GVIRT 0x200000000ull /* where the fake global memory pretends to live */
#define GSIZE (4u << 20)
#define SSIZE (256u << 10)
static unsigned char *gmem;            /* GSIZE bytes at GVIRT */
static unsigned char smem[2][SSIZE];   /* two CTAs */
static uint64_t g_lo, g_hi;            /* the tensor's extent: reads/writes outside it fail */
static long n_gread, n_gwrite, n_sread, n_swrite;
static char errbuf[512];

static int cb_gread(void *u, uint64_t a, void *dst, uint32_t n)
{
    (void)u;
    n_gread++;
    if (a < g_lo || a + n > g_hi || n == 0) {
        snprintf(errbuf, sizeof errbuf, "global read of %u bytes at 0x%llx outside [0x%llx, 0x%llx)", n,
                 (unsigned long long)a, (unsigned long long)g_lo, (unsigned long long)g_hi);
        return -1;
    }
    memcpy(dst, gmem + (a - GVIRT), n);
    return 0;
}
static int cb_gwrite(void *u, uint64_t a, const void *src, uint32_t n)
{
    (void)u;
    n_gwrite++;
    if (a < g_lo || a + n > g_hi || n == 0) {
        snprintf(errbuf, sizeof errbuf, "global write of %u bytes at 0x%llx outside [0x%llx, 0x%llx)", n,
                 (unsigned long long)a, (unsigned long long)g_lo, (unsigned long long)g_hi);
        return -1;
    }
    memcpy(gmem + (a - GVIRT), src, n);
    return 0;
}
static int cb_sread(void *u, int cta, uint32_t a, void *dst, uint32_t n)
{
    (void)u;
    n_sread++;
    if (cta < 0 || cta > 1 || (uint64_t)a + n > SSIZE) {
        snprintf(errbuf, sizeof errbuf, "shared read out of range");
        return -1;
    }
    memcpy(dst, smem[cta] + a, n);
    return 0;
}
static int cb_swrite(void *u, int cta, uint32_t a, const void *src, uint32_t n)
{
    (void)u;
    n_swrite++;
    if (cta < 0 || cta > 1 || (uint64_t)a + n > SSIZE) {
        snprintf(errbuf, sizeof errbuf, "shared write out of range");
        return -1;
    }
    memcpy(smem[cta] + a, src, n);
    return 0;
}
static const TmaMem MEM = {NULL, cb_gread, cb_gwrite, cb_sread, cb_swrite, errbuf, sizeof errbuf};

/* ---- the swizzle tables of the PTX ISA (5.5.7): slot p of line l holds chunk T[l % rows][p] ---- */
static const unsigned char T_NONE[1][8] = {{0, 1, 2, 3, 4, 5, 6, 7}};
static const unsigned char T_32B[2][8] = {{0, 1, 2, 3, 4, 5, 6, 7}, {1, 0, 3, 2, 5, 4, 7, 6}};
static const unsigned char T_64B[4][8] = {
    {0, 1, 2, 3, 4, 5, 6, 7}, {1, 0, 3, 2, 5, 4, 7, 6}, {2, 3, 0, 1, 6, 7, 4, 5}, {3, 2, 1, 0, 7, 6, 5, 4}};
static const unsigned char T_128B[8][8] = {
    {0, 1, 2, 3, 4, 5, 6, 7}, {1, 0, 3, 2, 5, 4, 7, 6}, {2, 3, 0, 1, 6, 7, 4, 5}, {3, 2, 1, 0, 7, 6, 5, 4},
    {4, 5, 6, 7, 0, 1, 2, 3}, {5, 4, 7, 6, 1, 0, 3, 2}, {6, 7, 4, 5, 2, 3, 0, 1}, {7, 6, 5, 4, 3, 2, 1, 0}};
static const unsigned char T_A32[4][8] = {
    {0, 1, 2, 3, 4, 5, 6, 7}, {2, 3, 0, 1, 6, 7, 4, 5}, {4, 5, 6, 7, 0, 1, 2, 3}, {6, 7, 4, 5, 2, 3, 0, 1}};
static const unsigned char T_A64[2][8] = {{0, 1, 2, 3, 4, 5, 6, 7}, {4, 5, 6, 7, 0, 1, 2, 3}};

static const unsigned char (*table(CUtensorMapSwizzle s, int *rows))[8]
{
    switch (s) {
    case CU_TENSOR_MAP_SWIZZLE_32B: *rows = 2; return T_32B;
    case CU_TENSOR_MAP_SWIZZLE_64B: *rows = 4; return T_64B;
    case CU_TENSOR_MAP_SWIZZLE_128B: *rows = 8; return T_128B;
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B:
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B: *rows = 4; return T_A32;
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B: *rows = 2; return T_A64;
    default: *rows = 1; return T_NONE;
    }
}
/* the width a swizzled row occupies (driver enum comments) */
static uint32_t span_of(CUtensorMapSwizzle s)
{
    static const uint32_t w[] = {0, 32, 64, 128, 128, 128, 128};
    return w[s];
}

/* linear image lin (size bytes, a multiple of 128, at shared address base) to its swizzled image sw */
static void swizzle_image(CUtensorMapSwizzle s, uint32_t base, const unsigned char *lin, unsigned char *sw,
                          uint32_t size)
{
    int rows;
    const unsigned char(*T)[8] = table(s, &rows);
    for (uint32_t l = 0; l < size / 128; l++) {
        const uint32_t abs_line = base / 128 + l;
        for (int p = 0; p < 8; p++) {
            unsigned char *d = sw + l * 128 + p * 16;
            const unsigned char *c = lin + l * 128 + T[abs_line % rows][p] * 16;
            if (s == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B && (abs_line & 1)) {
                memcpy(d, c + 8, 8); /* the 8-byte halves swap on every other line */
                memcpy(d + 8, c, 8);
            } else {
                memcpy(d, c, 16);
            }
        }
    }
}
static void unswizzle_image(CUtensorMapSwizzle s, uint32_t base, const unsigned char *sw, unsigned char *lin,
                            uint32_t size)
{
    int rows;
    const unsigned char(*T)[8] = table(s, &rows);
    for (uint32_t l = 0; l < size / 128; l++) {
        const uint32_t abs_line = base / 128 + l;
        for (int p = 0; p < 8; p++)
            memcpy(lin + l * 128 + T[abs_line % rows][p] * 16, sw + l * 128 + p * 16, 16);
    }
}

/* ---- a tensor, its map and the reference box ---------------------------------------- */
typedef struct {
    CUtensorMapDataType dt;
    uint32_t eb, rank;
    uint64_t gaddr;
    uint64_t dims[5], strides[5]; /* strides[0] = eb */
    uint32_t box[5], es[5];
    CUtensorMapSwizzle sw;
    CUtensorMapFloatOOBfill oob;
} Spec;

static uint32_t cnt(const Spec *s, int i) { return i == 0 ? s->box[0] : (s->box[i] + s->es[i] - 1) / s->es[i]; }
static uint32_t rowb(const Spec *s) { return s->box[0] * s->eb; }
static uint32_t pitch_of(const Spec *s)
{
    const uint32_t w = span_of(s->sw);
    return w > rowb(s) ? w : rowb(s);
}
static uint64_t nrows(const Spec *s)
{
    uint64_t r = 1;
    for (uint32_t i = 1; i < s->rank; i++)
        r *= cnt(s, i);
    return r;
}
static uint32_t round128(uint64_t n) { return (uint32_t)((n + 127) / 128 * 128); }

static CUresult encode(const Spec *s, CUtensorMap *cm, char *err, size_t n)
{
    cuuint64_t d[5], st[4];
    cuuint32_t b[5], e[5];
    for (uint32_t i = 0; i < s->rank; i++) {
        d[i] = s->dims[i];
        b[i] = s->box[i];
        e[i] = s->es[i];
        if (i)
            st[i - 1] = s->strides[i];
    }
    return tma_encode_tiled(cm, s->dt, s->rank, (void *)(uintptr_t)s->gaddr, d, st, b, e,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, s->sw, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, s->oob, err, n);
}

/* place the tensor in the fake global memory and fill it with random bytes */
static void place(Spec *s)
{
    uint64_t ext = s->eb;
    for (uint32_t i = 0; i < s->rank; i++)
        ext += (s->dims[i] - 1) * s->strides[i];
    s->gaddr = GVIRT + 16 * (uint64_t)rr(0, 7);
    g_lo = s->gaddr;
    g_hi = s->gaddr + ext;
    if (g_hi > GVIRT + GSIZE) {
        printf("test bug: tensor too large\n");
        exit(2);
    }
    for (uint64_t a = 0; a < 256 + ext; a += 8) {
        uint64_t v = rnd();
        memcpy(gmem + a, &v, 8);
    }
}

/* the bytes of the element at box index k (k[0] innermost) for coordinates c,
 * and whether it lies inside the tensor */
static int elem_at(const Spec *s, const int32_t *c, const uint32_t *k, uint64_t *gofs)
{
    uint64_t o = s->gaddr - GVIRT;
    for (uint32_t i = 0; i < s->rank; i++) {
        const int64_t x = (int64_t)c[i] + (int64_t)k[i] * (i ? s->es[i] : 1);
        if (x < 0 || x >= (int64_t)s->dims[i])
            return 0;
        o += (uint64_t)x * s->strides[i];
    }
    *gofs = o;
    return 1;
}

static uint64_t nan_bits(const Spec *s) { return tma_oob_nan(s->dt); }

/* the linear (unswizzled) image of the box in shared memory, poison 0xEE where nothing lands */
static void ref_linear(const Spec *s, const int32_t *c, unsigned char *lin, uint32_t size)
{
    memset(lin, 0xEE, size);
    const uint64_t rows = nrows(s);
    const uint32_t pitch = pitch_of(s);
    for (uint64_t r = 0; r < rows; r++) {
        uint32_t k[5] = {0, 0, 0, 0, 0};
        uint64_t t = r;
        for (uint32_t i = 1; i < s->rank; i++) {
            k[i] = (uint32_t)(t % cnt(s, i));
            t /= cnt(s, i);
        }
        for (k[0] = 0; k[0] < s->box[0]; k[0]++) {
            unsigned char *d = lin + r * pitch + k[0] * s->eb;
            uint64_t go;
            if (elem_at(s, c, k, &go)) {
                memcpy(d, gmem + go, s->eb);
            } else if (s->oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA) {
                const uint64_t v = nan_bits(s);
                memcpy(d, &v, s->eb);
            } else {
                memset(d, 0, s->eb);
            }
        }
    }
}

static unsigned char lin[SSIZE], want[SSIZE];

/* one tile load against the reference; returns 1 when it matched */
static int run_load(const Spec *s, const int32_t *c, int cta, uint32_t base, const char *what)
{
    CUtensorMap cm;
    TmaMap m;
    char e[256];
    if (encode(s, &cm, e, sizeof e) != CUDA_SUCCESS || tma_decode(&cm, &m, e, sizeof e)) {
        printf("FAIL %s: map refused: %s\n", what, e);
        return 0;
    }
    const uint32_t size = round128((uint64_t)nrows(s) * pitch_of(s));
    memset(smem[cta] + base, 0xEE, size + 256);
    errbuf[0] = 0;
    if (tma_load_tile(&MEM, &m, c, cta, base)) {
        printf("FAIL %s: load refused: %s\n", what, errbuf);
        return 0;
    }
    ref_linear(s, c, lin, size);
    swizzle_image(s->sw, base, lin, want, size);
    if (memcmp(smem[cta] + base, want, size)) {
        uint32_t i = 0;
        while (smem[cta][base + i] == want[i])
            i++;
        printf("FAIL %s: shared byte %u is 0x%02x, want 0x%02x (rank %u eb %u sw %d box %u,%u,%u c %d,%d,%d)\n", what,
               i, smem[cta][base + i], want[i], s->rank, s->eb, (int)s->sw, s->box[0], s->box[1], s->box[2], c[0],
               c[1], s->rank > 2 ? c[2] : 0);
        return 0;
    }
    for (uint32_t i = size; i < size + 256; i++)
        if (smem[cta][base + i] != 0xEE) {
            printf("FAIL %s: byte %u past the box was written\n", what, i);
            return 0;
        }
    if (tma_tile_bytes(&m) != nrows(s) * rowb(s)) {
        printf("FAIL %s: tma_tile_bytes %u, want %llu\n", what, tma_tile_bytes(&m),
               (unsigned long long)(nrows(s) * rowb(s)));
        return 0;
    }
    /* tma_smem_offset against the reference, from a pattern-aligned destination */
    if (base % 1024 == 0)
        for (uint64_t y = 0; y < nrows(s); y++)
            for (uint32_t x = 0; x < s->box[0]; x++) {
                const uint32_t o = tma_smem_offset(&m, x, (uint32_t)y);
                if (o >= size || memcmp(want + o, lin + y * pitch_of(s) + x * s->eb, s->eb)) {
                    printf("FAIL %s: tma_smem_offset(%u, %llu) = %u does not hold that element\n", what, x,
                           (unsigned long long)y, o);
                    return 0;
                }
            }
    return 1;
}

static unsigned char gwant[GSIZE];

/* one tile store against the reference */
static int run_store(const Spec *s, const int32_t *c, int cta, uint32_t base, const char *what)
{
    CUtensorMap cm;
    TmaMap m;
    char e[256];
    if (encode(s, &cm, e, sizeof e) != CUDA_SUCCESS || tma_decode(&cm, &m, e, sizeof e)) {
        printf("FAIL %s: map refused: %s\n", what, e);
        return 0;
    }
    const uint32_t size = round128((uint64_t)nrows(s) * pitch_of(s));
    for (uint32_t i = 0; i < size; i++)
        smem[cta][base + i] = (unsigned char)rnd();
    unswizzle_image(s->sw, base, smem[cta] + base, lin, size);
    const uint64_t gext = g_hi - GVIRT + 64;
    memcpy(gwant, gmem, gext);
    const uint64_t rows = nrows(s);
    for (uint64_t r = 0; r < rows; r++) {
        uint32_t k[5] = {0, 0, 0, 0, 0};
        uint64_t t = r;
        for (uint32_t i = 1; i < s->rank; i++) {
            k[i] = (uint32_t)(t % cnt(s, i));
            t /= cnt(s, i);
        }
        for (k[0] = 0; k[0] < s->box[0]; k[0]++) {
            uint64_t go;
            if (elem_at(s, c, k, &go))
                memcpy(gwant + go, lin + r * pitch_of(s) + k[0] * s->eb, s->eb);
        }
    }
    memcpy(want, smem[cta] + base, size);
    errbuf[0] = 0;
    if (tma_store_tile(&MEM, &m, c, cta, base)) {
        printf("FAIL %s: store refused: %s\n", what, errbuf);
        return 0;
    }
    if (memcmp(gmem, gwant, gext)) {
        uint64_t i = 0;
        while (gmem[i] == gwant[i])
            i++;
        printf("FAIL %s: global byte +0x%llx is 0x%02x, want 0x%02x (rank %u eb %u sw %d)\n", what,
               (unsigned long long)i, gmem[i], gwant[i], s->rank, s->eb, (int)s->sw);
        return 0;
    }
    if (memcmp(want, smem[cta] + base, size)) {
        printf("FAIL %s: the store changed shared memory\n", what);
        return 0;
    }
    return 1;
}

/* ---- random specs ----------------------------------------------------------------------- */
static const CUtensorMapDataType DT_OF_EB[9] = {
    [1] = CU_TENSOR_MAP_DATA_TYPE_UINT8, [2] = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    [4] = CU_TENSOR_MAP_DATA_TYPE_FLOAT32, [8] = CU_TENSOR_MAP_DATA_TYPE_FLOAT64};

static void random_spec(Spec *s, uint32_t rank, uint32_t eb, int allow_flip)
{
    memset(s, 0, sizeof *s);
    s->rank = rank;
    s->eb = eb;
    s->dt = DT_OF_EB[eb];
    /* a swizzle; inner box bytes a multiple of 16 and within the span */
    for (;;) {
        s->sw = (CUtensorMapSwizzle)rr(0, 6);
        if (s->sw == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B && !allow_flip)
            continue;
        break;
    }
    const uint32_t maxb = s->sw ? span_of(s->sw) : (rank == 1 ? 2048 : 512);
    uint32_t bytes = 16 * (uint32_t)rr(1, maxb / 16);
    if (bytes / eb > 256)
        bytes = 256 * eb;
    s->box[0] = bytes / eb;
    /* outer boxes small enough for shared memory: at most ~48 KiB */
    const uint32_t budget_rows = (48u << 10) / (s->sw ? span_of(s->sw) > bytes ? span_of(s->sw) : bytes : bytes);
    uint64_t rows = 1;
    for (uint32_t i = 1; i < rank; i++) {
        const uint32_t lim = rank == 2 ? 64 : rank == 3 ? 12 : 5;
        s->es[i] = rr(0, 3) == 0 ? (uint32_t)rr(2, 8) : 1;
        s->box[i] = (uint32_t)rr(1, lim);
        if (rr(0, 5) == 0)
            s->box[i] = (uint32_t)rr(1, 256);
        while (rows * cnt(s, i) > budget_rows && s->box[i] > 1)
            s->box[i] = s->box[i] / 2 ? s->box[i] / 2 : 1;
        rows *= cnt(s, i);
    }
    s->es[0] = (uint32_t)rr(1, 8); /* ignored without interleave */
    /* dims around the box so that edges are hit */
    for (uint32_t i = 0; i < rank; i++) {
        s->dims[i] = (uint64_t)rr(1, (int64_t)s->box[i] + 5);
    }
    /* keep the tensor within the fake global memory */
    s->strides[0] = eb;
    for (uint32_t i = 1; i < rank; i++) {
        const uint64_t prev = i == 1 ? (s->dims[0] * eb + 15) / 16 * 16 : s->strides[i - 1] * s->dims[i - 1];
        s->strides[i] = prev + 16 * (uint64_t)rr(0, 2);
    }
    uint64_t ext = eb;
    for (uint32_t i = 0; i < rank; i++)
        ext += (s->dims[i] - 1) * s->strides[i];
    if (ext > GSIZE / 2) { /* shrink the outer dims */
        for (uint32_t i = 1; i < rank; i++)
            s->dims[i] = s->dims[i] > 3 ? 3 : s->dims[i];
        for (uint32_t i = 2; i < rank; i++)
            s->strides[i] = s->strides[i - 1] * s->dims[i - 1];
    }
    s->oob = (s->dt != CU_TENSOR_MAP_DATA_TYPE_UINT8 && rr(0, 2) == 0) ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
                                                                        : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
    place(s);
}

static void random_coords(const Spec *s, int32_t *c)
{
    for (uint32_t i = 0; i < s->rank; i++) {
        const int64_t reach = (int64_t)s->box[i] * (i ? s->es[i] : 1);
        c[i] = (int32_t)rr(-reach - 2, (int64_t)s->dims[i] + 2);
    }
}

static uint32_t random_base(CUtensorMapSwizzle sw)
{
    (void)sw;
    return 128u * (uint32_t)rr(0, 96); /* 128-byte aligned, often mid-pattern */
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_random_loads_stores(void)
{
    static const uint32_t ebs[4] = {1, 2, 4, 8};
    for (uint32_t rank = 1; rank <= 5; rank++)
        for (int w = 0; w < 4; w++) {
            int ok_l = 0, ok_s = 0, n = 150;
            for (int it = 0; it < n; it++) {
                Spec s;
                int32_t c[5];
                random_spec(&s, rank, ebs[w], 1);
                random_coords(&s, c);
                ok_l += run_load(&s, c, (int)(it & 1), random_base(s.sw), "random load");
                if (s.sw != CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B) {
                    random_coords(&s, c);
                    ok_s += run_store(&s, c, (int)(it & 1), random_base(s.sw), "random store");
                } else {
                    ok_s++;
                }
            }
            CHECK(ok_l == n, "rank %u, %u-byte elements: %d of %d random loads matched", rank, ebs[w], ok_l, n);
            CHECK(ok_s == n, "rank %u, %u-byte elements: %d of %d random stores matched", rank, ebs[w], ok_s, n);
        }
}

/* every swizzle mode, boxes whose rows fill the span and boxes narrower than it,
 * destinations at every 128-byte phase of the pattern */
static void test_swizzle_modes(void)
{
    for (int sw = 0; sw <= 6; sw++)
        for (int narrow = 0; narrow < 2; narrow++) {
            int ok = 0, n = 0;
            for (uint32_t phase = 0; phase < 8; phase++) {
                Spec s;
                memset(&s, 0, sizeof s);
                s.rank = 2;
                s.eb = 2;
                s.dt = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
                s.sw = (CUtensorMapSwizzle)sw;
                const uint32_t w = sw ? span_of(s.sw) : 128;
                s.box[0] = (narrow ? (w > 16 ? w / 2 : 16) : w) / 2;
                s.box[1] = 24;
                s.es[0] = s.es[1] = 1;
                s.dims[0] = 300;
                s.dims[1] = 50;
                s.strides[0] = 2;
                s.strides[1] = 640;
                place(&s);
                const int32_t c[2] = {(int32_t)rr(0, 200), (int32_t)rr(0, 20)};
                n++;
                ok += run_load(&s, c, 0, 4096 + 128 * phase, "swizzle load");
                if (sw != CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B) {
                    n++;
                    ok += run_store(&s, c, 1, 8192 + 128 * phase, "swizzle store");
                }
            }
            CHECK(ok == n, "swizzle %d (%s rows): %d of %d copies matched", sw, narrow ? "narrow" : "full", ok, n);
        }
}

/* every placement of a 2D box across the edges of a small tensor, negative coordinates included */
static void test_edges(void)
{
    static const CUtensorMapSwizzle sws[3] = {CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_SWIZZLE_32B,
                                              CU_TENSOR_MAP_SWIZZLE_128B};
    for (int v = 0; v < 3; v++) {
        Spec s;
        memset(&s, 0, sizeof s);
        s.rank = 2;
        s.eb = 2;
        s.dt = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
        s.sw = sws[v];
        s.box[0] = v == 2 ? 64 : 16;
        s.box[1] = 5;
        s.es[0] = s.es[1] = 1;
        s.dims[0] = v == 2 ? 70 : 37;
        s.dims[1] = 11;
        s.strides[0] = 2;
        s.strides[1] = 160;
        s.oob = v == 1 ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
        place(&s);
        int ok = 0, n = 0;
        for (int32_t y = -6; y <= 12; y++)
            for (int32_t x = -(int32_t)s.box[0] - 1; x <= (int32_t)s.dims[0] + 1; x++) {
                const int32_t c[2] = {x, y};
                n += 2;
                ok += run_load(&s, c, 0, 1024, "edge load");
                ok += run_store(&s, c, 1, 2048, "edge store");
            }
        CHECK(ok == n, "edge sweep %d: %d of %d copies matched", v, ok, n);
    }
    /* a box far outside the tensor: all fill, nothing read or written */
    Spec s;
    memset(&s, 0, sizeof s);
    s.rank = 3;
    s.eb = 4;
    s.dt = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    s.box[0] = 8;
    s.box[1] = 3;
    s.box[2] = 2;
    s.es[0] = s.es[1] = s.es[2] = 1;
    s.dims[0] = 10;
    s.dims[1] = 4;
    s.dims[2] = 3;
    s.strides[0] = 4;
    s.strides[1] = 48;
    s.strides[2] = 192;
    s.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
    place(&s);
    const int32_t far[3] = {-100000, 2000000000, -7};
    n_gread = n_gwrite = 0;
    CHECK(run_load(&s, far, 0, 0, "far load") && n_gread == 0, "a box wholly outside: filled, no global read");
    CHECK(run_store(&s, far, 0, 0, "far store") && n_gwrite == 0, "a box wholly outside: no global write");
}

/* the (batch, seq, head, dim) layout: dims {d, s, h} with the head stride below the row stride */
static void test_permuted_strides(void)
{
    Spec s;
    memset(&s, 0, sizeof s);
    s.rank = 3;
    s.eb = 2;
    s.dt = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    s.sw = CU_TENSOR_MAP_SWIZZLE_128B;
    s.box[0] = 64;
    s.box[1] = 32;
    s.box[2] = 1;
    s.es[0] = s.es[1] = s.es[2] = 1;
    s.dims[0] = 128; /* d */
    s.dims[1] = 70;  /* seq */
    s.dims[2] = 4;   /* heads */
    s.strides[0] = 2;
    s.strides[1] = 4 * 128 * 2; /* next token: past every head */
    s.strides[2] = 128 * 2;     /* next head */
    place(&s);
    int ok = 0;
    for (int i = 0; i < 20; i++) {
        const int32_t c[3] = {64 * (int32_t)rr(0, 1), (int32_t)rr(-8, 60), (int32_t)rr(0, 3)};
        ok += run_load(&s, c, 0, 1024 * (uint32_t)rr(0, 8), "permuted load");
        ok += run_store(&s, c, 0, 1024 * (uint32_t)rr(0, 8), "permuted store");
    }
    CHECK(ok == 40, "permuted strides: %d of 40 copies matched", ok);
}

/* element strides: every traversed element is coordinate + k * stride */
static void test_element_strides(void)
{
    Spec s;
    memset(&s, 0, sizeof s);
    s.rank = 3;
    s.eb = 4;
    s.dt = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    s.box[0] = 8;
    s.box[1] = 7; /* 7 / 3: 3 rows traversed */
    s.box[2] = 8; /* 8 / 4: 2 */
    s.es[0] = 5;  /* ignored */
    s.es[1] = 3;
    s.es[2] = 4;
    s.dims[0] = 20;
    s.dims[1] = 20;
    s.dims[2] = 20;
    s.strides[0] = 4;
    s.strides[1] = 80;
    s.strides[2] = 1600;
    place(&s);
    CUtensorMap cm;
    TmaMap m;
    char e[256];
    CHECK(encode(&s, &cm, e, sizeof e) == CUDA_SUCCESS && tma_decode(&cm, &m, e, sizeof e) == 0, "map: %s", e);
    CHECK(tma_tile_bytes(&m) == 8 * 4 * 3 * 2, "tile bytes with element strides: %u, want 192", tma_tile_bytes(&m));
    const int32_t c[3] = {3, 2, 1};
    CHECK(run_load(&s, c, 0, 0, "element-stride load"), "element-stride load");
    /* directly: box row (k1 = 2, k2 = 1) is tensor row y = 2 + 6, z = 1 + 4 */
    float got, exp;
    memcpy(&got, smem[0] + (1 * 3 + 2) * 32 + 0, 4);
    memcpy(&exp, gmem + (s.gaddr - GVIRT) + 5 * 1600 + 8 * 80 + 3 * 4, 4);
    CHECK(memcmp(&got, &exp, 4) == 0, "element (3, 8, 5) lands in box row 5");
    const int32_t c2[3] = {0, 15, 14}; /* rows 15, 18, 21 (out) and planes 14, 18 */
    CHECK(run_load(&s, c2, 0, 0, "element-stride edge load"), "element-stride edge load");
    CHECK(run_store(&s, c2, 0, 0, "element-stride edge store"), "element-stride edge store");
}

static void test_oob_nan(void)
{
    static const CUtensorMapDataType dts[5] = {CU_TENSOR_MAP_DATA_TYPE_FLOAT16, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                                               CU_TENSOR_MAP_DATA_TYPE_FLOAT32, CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
                                               CU_TENSOR_MAP_DATA_TYPE_FLOAT64};
    static const uint32_t ebs[5] = {2, 2, 4, 4, 8};
    for (int i = 0; i < 5; i++) {
        const uint64_t v = tma_oob_nan(dts[i]);
        int isnan = 0;
        if (dts[i] == CU_TENSOR_MAP_DATA_TYPE_FLOAT16)
            isnan = (v & 0x7c00) == 0x7c00 && (v & 0x3ff) && v <= 0xffff;
        else if (dts[i] == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16)
            isnan = (v & 0x7f80) == 0x7f80 && (v & 0x7f) && v <= 0xffff;
        else if (ebs[i] == 4)
            isnan = (v & 0x7f800000u) == 0x7f800000u && (v & 0x7fffff) && v <= 0xffffffffu;
        else
            isnan = (v & 0x7ff0000000000000ull) == 0x7ff0000000000000ull && (v & 0xfffffffffffffull);
        CHECK(isnan, "the OOB fill of data type %d (0x%llx) is a NaN of that type", (int)dts[i],
              (unsigned long long)v);
    }
    CHECK(tma_oob_nan(CU_TENSOR_MAP_DATA_TYPE_INT32) == 0, "no OOB NaN for integers");
    /* a load with the NaN fill puts it exactly in the out-of-bounds elements */
    Spec s;
    memset(&s, 0, sizeof s);
    s.rank = 2;
    s.eb = 2;
    s.dt = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    s.box[0] = 8;
    s.box[1] = 2;
    s.es[0] = s.es[1] = 1;
    s.dims[0] = 5;
    s.dims[1] = 1;
    s.strides[0] = 2;
    s.strides[1] = 16;
    s.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
    place(&s);
    const int32_t c[2] = {-1, 0};
    CHECK(run_load(&s, c, 0, 0, "nan load"), "NaN-fill load");
    int good = 1;
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 8; x++) {
            uint16_t h;
            memcpy(&h, smem[0] + y * 16 + x * 2, 2);
            const int in = y == 0 && x >= 1 && x <= 5;
            if (!in && h != (uint16_t)tma_oob_nan(s.dt))
                good = 0;
            if (in && memcmp(&h, gmem + (s.gaddr - GVIRT) + (x - 1) * 2, 2))
                good = 0;
        }
    CHECK(good, "NaN fill exactly where the box leaves the tensor");
}

/* gather4: four rows at column col, laid out as a 4-row box */
static int run_gather4(const Spec *s, int32_t col, const int32_t row[4], uint32_t base, const char *what)
{
    CUtensorMap cm;
    TmaMap m;
    char e[256];
    if (encode(s, &cm, e, sizeof e) != CUDA_SUCCESS || tma_decode(&cm, &m, e, sizeof e)) {
        printf("FAIL %s: map refused: %s\n", what, e);
        return 0;
    }
    const uint32_t pitch = pitch_of(s), size = round128(4 * pitch);
    memset(smem[0] + base, 0xEE, size + 128);
    errbuf[0] = 0;
    if (tma_load_gather4(&MEM, &m, col, row, 0, base)) {
        printf("FAIL %s: refused: %s\n", what, errbuf);
        return 0;
    }
    memset(lin, 0xEE, size);
    for (int r = 0; r < 4; r++)
        for (uint32_t k = 0; k < s->box[0]; k++) {
            const int64_t x = (int64_t)col + k;
            unsigned char *d = lin + r * pitch + k * s->eb;
            if (x >= 0 && x < (int64_t)s->dims[0] && row[r] >= 0 && row[r] < (int64_t)s->dims[1]) {
                memcpy(d, gmem + (s->gaddr - GVIRT) + (uint64_t)row[r] * s->strides[1] + (uint64_t)x * s->eb, s->eb);
            } else if (s->oob) {
                const uint64_t v = nan_bits(s);
                memcpy(d, &v, s->eb);
            } else {
                memset(d, 0, s->eb);
            }
        }
    swizzle_image(s->sw, base, lin, want, size);
    if (memcmp(smem[0] + base, want, size + 0)) {
        printf("FAIL %s: shared image differs (sw %d, col %d)\n", what, (int)s->sw, col);
        return 0;
    }
    for (uint32_t i = size; i < size + 128; i++)
        if (smem[0][base + i] != 0xEE) {
            printf("FAIL %s: wrote past four rows\n", what);
            return 0;
        }
    if (tma_gather4_bytes(&m) != 4 * rowb(s)) {
        printf("FAIL %s: gather4 bytes %u, want %u\n", what, tma_gather4_bytes(&m), 4 * rowb(s));
        return 0;
    }
    return 1;
}

static void test_gather4(void)
{
    static const uint32_t ebs[4] = {1, 2, 4, 8};
    int ok = 0, n = 0;
    for (int it = 0; it < 400; it++) {
        Spec s;
        memset(&s, 0, sizeof s);
        s.rank = 2;
        s.eb = ebs[it % 4];
        s.dt = DT_OF_EB[s.eb];
        s.sw = (CUtensorMapSwizzle)rr(0, 6);
        const uint32_t maxb = s.sw ? span_of(s.sw) : 512;
        uint32_t bytes = 16 * (uint32_t)rr(1, maxb / 16);
        if (bytes / s.eb > 256)
            bytes = 256 * s.eb;
        s.box[0] = bytes / s.eb;
        s.box[1] = 1;
        s.es[0] = s.es[1] = 1;
        s.dims[0] = (uint64_t)rr(1, s.box[0] + 4);
        s.dims[1] = (uint64_t)rr(1, 300);
        s.strides[0] = s.eb;
        s.strides[1] = (s.dims[0] * s.eb + 15) / 16 * 16 + 16 * (uint64_t)rr(0, 3);
        s.oob = (s.eb > 1 && rr(0, 1)) ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
                                       : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
        place(&s);
        int32_t row[4];
        for (int r = 0; r < 4; r++)
            row[r] = (int32_t)rr(-3, (int64_t)s.dims[1] + 2);
        const int32_t col = (int32_t)rr(-(int64_t)s.box[0] - 1, (int64_t)s.dims[0] + 1);
        n++;
        ok += run_gather4(&s, col, row, 128 * (uint32_t)rr(0, 64), "gather4");
    }
    CHECK(ok == n, "gather4: %d of %d random loads matched", ok, n);

    /* the indices a sparse-attention kernel passes for invalid tokens, as row coordinates: every kind
     * outside [0, rows) is a row of fill (zeros, or the NaN fill), the rows inside are copied */
    for (int nanfill = 0; nanfill < 2; nanfill++) {
        Spec g;
        memset(&g, 0, sizeof g);
        g.rank = 2, g.eb = 2, g.dt = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, g.sw = CU_TENSOR_MAP_SWIZZLE_128B;
        g.box[0] = 64, g.box[1] = 1, g.es[0] = g.es[1] = 1;
        g.dims[0] = 576, g.dims[1] = 100, g.strides[0] = 2, g.strides[1] = 576 * 2;
        g.oob = nanfill ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
        place(&g);
        const int32_t sets[4][4] = {{INT32_MIN, 0, INT32_MAX, 99}, {-1, 100, 7, -2}, {1 << 30, 3, -(1 << 30), 101},
                                    {99, 98, 100, 0}};
        for (int i = 0; i < 4; i++)
            CHECK(run_gather4(&g, 448, sets[i], 1024 * (uint32_t)i, "gather4 invalid indices"),
                  "gather4 rows {%d, %d, %d, %d} (%s fill)", sets[i][0], sets[i][1], sets[i][2], sets[i][3],
                  nanfill ? "NaN" : "zero");
    }

    /* maps gather4 cannot use */
    Spec s;
    memset(&s, 0, sizeof s);
    s.rank = 2;
    s.eb = 2;
    s.dt = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    s.box[0] = 64;
    s.box[1] = 4;
    s.es[0] = s.es[1] = 1;
    s.dims[0] = 64;
    s.dims[1] = 64;
    s.strides[0] = 2;
    s.strides[1] = 128;
    s.sw = CU_TENSOR_MAP_SWIZZLE_128B;
    place(&s);
    CUtensorMap cm;
    TmaMap m;
    char e[256];
    encode(&s, &cm, e, sizeof e);
    tma_decode(&cm, &m, e, sizeof e);
    const int32_t rows[4] = {0, 1, 2, 3};
    CHECK(tma_load_gather4(&MEM, &m, 0, rows, 0, 0) == -1 && strstr(errbuf, "boxDim[1]"),
          "gather4 refuses boxDim[1] = 4: %s", errbuf);
    s.rank = 3;
    s.box[1] = 1;
    s.box[2] = 1;
    s.dims[2] = 2;
    s.es[2] = 1;
    s.strides[2] = 128 * 64;
    place(&s);
    encode(&s, &cm, e, sizeof e);
    tma_decode(&cm, &m, e, sizeof e);
    CHECK(tma_load_gather4(&MEM, &m, 0, rows, 0, 0) == -1 && strstr(errbuf, "2D"), "gather4 refuses a 3D map: %s",
          errbuf);
}

/* refusals of the copies themselves */
static void test_copy_refusals(void)
{
    Spec s;
    memset(&s, 0, sizeof s);
    s.rank = 2;
    s.eb = 2;
    s.dt = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    s.box[0] = 64;
    s.box[1] = 8;
    s.es[0] = s.es[1] = 1;
    s.dims[0] = 64;
    s.dims[1] = 64;
    s.strides[0] = 2;
    s.strides[1] = 128;
    s.sw = CU_TENSOR_MAP_SWIZZLE_128B;
    place(&s);
    CUtensorMap cm;
    TmaMap m;
    char e[256];
    encode(&s, &cm, e, sizeof e);
    tma_decode(&cm, &m, e, sizeof e);
    const int32_t c[2] = {0, 0};
    static const uint32_t bad[4] = {16, 64, 96, 1040};
    for (int i = 0; i < 4; i++) {
        errbuf[0] = 0;
        CHECK(tma_load_tile(&MEM, &m, c, 0, bad[i]) == -1 && strstr(errbuf, "128-byte aligned"),
              "load to shared 0x%x refused for alignment: %s", bad[i], errbuf);
        CHECK(tma_store_tile(&MEM, &m, c, 0, bad[i]) == -1 && strstr(errbuf, "128-byte aligned"),
              "store from shared 0x%x refused for alignment: %s", bad[i], errbuf);
    }
    s.sw = CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B;
    encode(&s, &cm, e, sizeof e);
    tma_decode(&cm, &m, e, sizeof e);
    CHECK(tma_store_tile(&MEM, &m, c, 0, 0) == -1 && strstr(errbuf, "FLIP_8B"), "store with the 8B flip refused: %s",
          errbuf);
    /* a callback's failure is passed on */
    s.sw = CU_TENSOR_MAP_SWIZZLE_NONE;
    encode(&s, &cm, e, sizeof e);
    tma_decode(&cm, &m, e, sizeof e);
    g_hi = g_lo + 100; /* the fake memory now refuses most of the tensor */
    errbuf[0] = 0;
    CHECK(tma_load_tile(&MEM, &m, c, 0, 0) == -1 && strstr(errbuf, "global read"), "callback error passed on: %s",
          errbuf);
    /* packed and interleaved maps are encoded but not copied */
    cuuint64_t d[3] = {128, 4, 4}, st[2] = {64, 256};
    cuuint32_t b[3] = {128, 2, 2}, es[3] = {1, 1, 1};
    CHECK(tma_encode_tiled(&cm, CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, 3, (void *)(uintptr_t)GVIRT, d, st, b, es,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE, e,
                           sizeof e) == CUDA_SUCCESS &&
              tma_decode(&cm, &m, e, sizeof e) == 0,
          "a 16U4_ALIGN16B map is accepted: %s", e);
    const int32_t c3[3] = {0, 0, 0};
    CHECK(tma_load_tile(&MEM, &m, c3, 0, 0) == -1 && strstr(errbuf, "not modelled"), "packed copy refused: %s",
          errbuf);
    CHECK(tma_tile_bytes(&m) == 128 * 2 * 2, "16U4_ALIGN16B tile bytes (16 values in 16 bytes): %u",
          tma_tile_bytes(&m));
    cuuint64_t d2[3] = {8, 4, 4}, st2[2] = {32, 128};
    cuuint32_t b2[3] = {8, 2, 2};
    CHECK(tma_encode_tiled(&cm, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, (void *)(uintptr_t)GVIRT, d2, st2, b2, es,
                           CU_TENSOR_MAP_INTERLEAVE_32B, CU_TENSOR_MAP_SWIZZLE_32B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE, e, sizeof e) == CUDA_SUCCESS &&
              tma_decode(&cm, &m, e, sizeof e) == 0,
          "an interleaved map is accepted: %s", e);
    CHECK(tma_load_tile(&MEM, &m, c3, 0, 0) == -1 && strstr(errbuf, "interleave"), "interleaved copy refused: %s",
          errbuf);
}

/* ---- encode refusals: one per documented rule ---------------------------------------------- */
typedef struct {
    CUtensorMapDataType dt;
    cuuint32_t rank;
    uint64_t gaddr;
    cuuint64_t dims[5], strides[4];
    cuuint32_t box[5], es[5];
    CUtensorMapInterleave il;
    CUtensorMapSwizzle sw;
    CUtensorMapL2promotion l2;
    CUtensorMapFloatOOBfill oob;
} Args;

static Args good2d(void)
{
    Args a;
    memset(&a, 0, sizeof a);
    a.dt = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    a.rank = 2;
    a.gaddr = GVIRT;
    a.dims[0] = 128;
    a.dims[1] = 1000;
    a.strides[0] = 256;
    a.box[0] = 64;
    a.box[1] = 128;
    for (int i = 0; i < 5; i++)
        a.es[i] = 1;
    a.sw = CU_TENSOR_MAP_SWIZZLE_128B;
    a.l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
    return a;
}
static Args good_packed(CUtensorMapDataType dt)
{
    Args a = good2d();
    a.dt = dt;
    a.rank = 3;
    a.dims[0] = 256;
    a.dims[2] = 4;
    a.strides[0] = 128;
    a.strides[1] = 128 * 1000;
    a.box[0] = 128;
    a.box[1] = 8;
    a.box[2] = 1;
    a.sw = CU_TENSOR_MAP_SWIZZLE_128B;
    return a;
}
static Args good_il32(void)
{
    Args a = good2d();
    a.dt = CU_TENSOR_MAP_DATA_TYPE_UINT16;
    a.rank = 3;
    a.dims[0] = 16;
    a.dims[1] = 10;
    a.dims[2] = 10;
    a.strides[0] = 32;
    a.strides[1] = 320;
    a.box[0] = 16;
    a.box[1] = 4;
    a.box[2] = 4;
    a.il = CU_TENSOR_MAP_INTERLEAVE_32B;
    a.sw = CU_TENSOR_MAP_SWIZZLE_32B;
    return a;
}

static CUresult enc(const Args *a, char *e, size_t n)
{
    CUtensorMap cm;
    return tma_encode_tiled(&cm, a->dt, a->rank, (void *)(uintptr_t)a->gaddr, a->dims, a->strides, a->box, a->es,
                            a->il, a->sw, a->l2, a->oob, e, n);
}

#define EXPECT_REFUSED(args, word)                                                                \
    do {                                                                                          \
        char e_[300] = "";                                                                        \
        const Args a_ = (args);                                                                   \
        const CUresult r_ = enc(&a_, e_, sizeof e_);                                              \
        CHECK(r_ == CUDA_ERROR_INVALID_VALUE && strstr(e_, word) && strchr(e_, '.'),              \
              "refused (%s): result %d, err \"%s\"", word, (int)r_, e_);                          \
    } while (0)

static void test_encode_refusals(void)
{
    char e[300];
    /* the good maps pass */
    {
        Args a = good2d();
        CHECK(enc(&a, e, sizeof e) == CUDA_SUCCESS, "the 2D map is accepted: %s", e);
        Args p = good_packed(CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B);
        CHECK(enc(&p, e, sizeof e) == CUDA_SUCCESS, "a 16U6_ALIGN16B map is accepted: %s", e);
        Args q = good_packed(CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B);
        CHECK(enc(&q, e, sizeof e) == CUDA_SUCCESS, "a 16U4_ALIGN16B map is accepted: %s", e);
        Args i = good_il32();
        CHECK(enc(&i, e, sizeof e) == CUDA_SUCCESS, "an interleave-32B map is accepted: %s", e);
        Args big = good2d();
        big.dims[1] = 1ull << 32;
        big.strides[0] = (1ull << 40) - 16;
        CHECK(enc(&big, e, sizeof e) == CUDA_SUCCESS, "globalDim 2^32 and stride 2^40 - 16 accepted: %s", e);
        Args w = good2d();
        w.dt = CU_TENSOR_MAP_DATA_TYPE_UINT8;
        w.box[0] = 256;
        w.box[1] = 256;
        w.sw = CU_TENSOR_MAP_SWIZZLE_NONE;
        w.es[0] = 8;
        w.es[1] = 8;
        CHECK(enc(&w, e, sizeof e) == CUDA_SUCCESS, "boxDim 256 and elementStrides 8 accepted: %s", e);
        Args n = good2d();
        n.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
        CHECK(enc(&n, e, sizeof e) == CUDA_SUCCESS, "NaN fill on bf16 accepted: %s", e);
        Args one = good2d();
        one.rank = 1;
        one.box[0] = 8;
        CHECK(tma_encode_tiled(&(CUtensorMap){0}, one.dt, 1, (void *)(uintptr_t)GVIRT, one.dims, NULL, one.box,
                               one.es, 0, 0, 0, 0, e, sizeof e) == CUDA_SUCCESS,
              "rank 1 needs no globalStrides: %s", e);
        Args a8 = good2d();
        a8.dt = CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B;
        a8.dims[0] = 256;
        a8.box[0] = 64; /* 32 bytes */
        a8.sw = CU_TENSOR_MAP_SWIZZLE_32B;
        CHECK(enc(&a8, e, sizeof e) == CUDA_SUCCESS, "a 16U4_ALIGN8B map of 32-byte rows accepted: %s", e);
    }
    /* the tensor map object */
    {
        const Args a = good2d();
        CHECK(tma_encode_tiled(NULL, a.dt, a.rank, (void *)(uintptr_t)a.gaddr, a.dims, a.strides, a.box, a.es, a.il,
                               a.sw, a.l2, a.oob, e, sizeof e) == CUDA_ERROR_INVALID_VALUE &&
                  strstr(e, "tensorMap"),
              "NULL tensorMap refused: %s", e);
        static _Alignas(128) unsigned char raw[256];
        CHECK(tma_encode_tiled((CUtensorMap *)(void *)(raw + 32), a.dt, a.rank, (void *)(uintptr_t)a.gaddr, a.dims,
                               a.strides, a.box, a.es, a.il, a.sw, a.l2, a.oob, e,
                               sizeof e) == CUDA_ERROR_INVALID_VALUE &&
                  strstr(e, "64-byte"),
              "tensorMap at 32 mod 64 refused: %s", e);
        CHECK(tma_encode_tiled((CUtensorMap *)(void *)(raw + 64), a.dt, a.rank, (void *)(uintptr_t)a.gaddr, a.dims,
                               a.strides, a.box, a.es, a.il, a.sw, a.l2, a.oob, e, sizeof e) == CUDA_SUCCESS,
              "tensorMap at 64 mod 128 accepted: %s", e);
        CHECK(tma_encode_tiled(&(CUtensorMap){0}, a.dt, a.rank, (void *)(uintptr_t)a.gaddr, NULL, a.strides, a.box,
                               a.es, a.il, a.sw, a.l2, a.oob, e, sizeof e) == CUDA_ERROR_INVALID_VALUE &&
                  strstr(e, "globalDim"),
              "NULL globalDim refused: %s", e);
        CHECK(tma_encode_tiled(&(CUtensorMap){0}, a.dt, a.rank, (void *)(uintptr_t)a.gaddr, a.dims, NULL, a.box,
                               a.es, a.il, a.sw, a.l2, a.oob, e, sizeof e) == CUDA_ERROR_INVALID_VALUE &&
                  strstr(e, "globalStrides"),
              "NULL globalStrides refused for rank 2: %s", e);
        CHECK(tma_encode_tiled(&(CUtensorMap){0}, a.dt, a.rank, (void *)(uintptr_t)a.gaddr, a.dims, a.strides, NULL,
                               a.es, a.il, a.sw, a.l2, a.oob, e, sizeof e) == CUDA_ERROR_INVALID_VALUE &&
                  strstr(e, "boxDim"),
              "NULL boxDim refused: %s", e);
        CHECK(tma_encode_tiled(&(CUtensorMap){0}, a.dt, a.rank, (void *)(uintptr_t)a.gaddr, a.dims, a.strides, a.box,
                               NULL, a.il, a.sw, a.l2, a.oob, e, sizeof e) == CUDA_ERROR_INVALID_VALUE &&
                  strstr(e, "elementStrides"),
              "NULL elementStrides refused: %s", e);
    }
    Args a;
    /* enums */
    a = good2d(), a.dt = (CUtensorMapDataType)16;
    EXPECT_REFUSED(a, "tensorDataType");
    a = good2d(), a.il = (CUtensorMapInterleave)3;
    EXPECT_REFUSED(a, "interleave");
    a = good2d(), a.sw = (CUtensorMapSwizzle)7;
    EXPECT_REFUSED(a, "swizzle");
    a = good2d(), a.l2 = (CUtensorMapL2promotion)4;
    EXPECT_REFUSED(a, "l2Promotion");
    a = good2d(), a.oob = (CUtensorMapFloatOOBfill)2;
    EXPECT_REFUSED(a, "oobFill");
    /* rank */
    a = good2d(), a.rank = 0;
    EXPECT_REFUSED(a, "tensorRank");
    a = good2d(), a.rank = 6;
    EXPECT_REFUSED(a, "tensorRank");
    a = good2d(), a.il = CU_TENSOR_MAP_INTERLEAVE_16B;
    EXPECT_REFUSED(a, "tensorRank");
    /* globalAddress */
    a = good2d(), a.gaddr = GVIRT + 8;
    EXPECT_REFUSED(a, "globalAddress");
    a = good_il32(), a.gaddr = GVIRT + 16;
    EXPECT_REFUSED(a, "globalAddress");
    a = good_packed(CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B), a.gaddr = GVIRT + 16;
    EXPECT_REFUSED(a, "globalAddress");
    a = good_packed(CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B), a.gaddr = GVIRT + 48;
    EXPECT_REFUSED(a, "globalAddress");
    /* globalDim */
    a = good2d(), a.dims[1] = 0;
    EXPECT_REFUSED(a, "globalDim[1]");
    a = good2d(), a.dims[0] = (1ull << 32) + 1;
    EXPECT_REFUSED(a, "globalDim[0]");
    a = good_packed(CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B), a.dims[0] = 200;
    EXPECT_REFUSED(a, "globalDim[0]");
    a = good_packed(CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B), a.dims[0] = 64;
    EXPECT_REFUSED(a, "globalDim[0]");
    a = good2d(), a.dt = CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B, a.dims[0] = 255, a.box[0] = 64,
    a.sw = CU_TENSOR_MAP_SWIZZLE_NONE;
    EXPECT_REFUSED(a, "globalDim[0]");
    /* globalStrides */
    a = good2d(), a.strides[0] = 264;
    EXPECT_REFUSED(a, "globalStrides[0]");
    a = good2d(), a.strides[0] = 1ull << 40;
    EXPECT_REFUSED(a, "globalStrides[0]");
    a = good_il32(), a.strides[1] = 336;
    EXPECT_REFUSED(a, "globalStrides[1]");
    a = good_packed(CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B), a.strides[0] = 144;
    EXPECT_REFUSED(a, "globalStrides[0]");
    a = good_packed(CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B), a.strides[1] = 128 * 1000 + 16;
    EXPECT_REFUSED(a, "globalStrides[1]");
    /* boxDim */
    a = good2d(), a.box[1] = 0;
    EXPECT_REFUSED(a, "boxDim[1]");
    a = good2d(), a.box[1] = 257;
    EXPECT_REFUSED(a, "boxDim[1]");
    a = good2d(), a.box[0] = 4, a.sw = CU_TENSOR_MAP_SWIZZLE_NONE;
    EXPECT_REFUSED(a, "boxDim[0]");
    a = good2d(), a.dt = CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B, a.dims[0] = 256, a.box[0] = 48,
    a.sw = CU_TENSOR_MAP_SWIZZLE_NONE;
    EXPECT_REFUSED(a, "boxDim[0]");
    a = good_packed(CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B), a.box[0] = 64;
    EXPECT_REFUSED(a, "boxDim[0]");
    /* elementStrides */
    a = good2d(), a.es[1] = 0;
    EXPECT_REFUSED(a, "elementStrides[1]");
    a = good2d(), a.es[1] = 9;
    EXPECT_REFUSED(a, "elementStrides[1]");
    a = good2d(), a.es[0] = 0;
    EXPECT_REFUSED(a, "elementStrides[0]");
    /* swizzle against the inner box */
    a = good2d(), a.sw = CU_TENSOR_MAP_SWIZZLE_32B, a.box[0] = 32;
    EXPECT_REFUSED(a, "swizzle 32B");
    a = good2d(), a.sw = CU_TENSOR_MAP_SWIZZLE_64B, a.box[0] = 64;
    EXPECT_REFUSED(a, "swizzle 64B");
    a = good2d(), a.sw = CU_TENSOR_MAP_SWIZZLE_128B, a.box[0] = 128;
    EXPECT_REFUSED(a, "swizzle 128B");
    a = good2d(), a.sw = CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B, a.box[0] = 72;
    EXPECT_REFUSED(a, "swizzle 128B_ATOM_64B");
    a = good2d(), a.sw = CU_TENSOR_MAP_SWIZZLE_32B, a.box[0] = 16; /* exactly 32 bytes: fine */
    CHECK(enc(&a, e, sizeof e) == CUDA_SUCCESS, "32 bytes under swizzle 32B accepted: %s", e);
    /* interleave and swizzle combinations */
    a = good_packed(CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B), a.il = CU_TENSOR_MAP_INTERLEAVE_16B;
    EXPECT_REFUSED(a, "16U6_ALIGN16B requires");
    a = good_il32(), a.sw = CU_TENSOR_MAP_SWIZZLE_64B;
    EXPECT_REFUSED(a, "INTERLEAVE_32B requires");
    a = good_il32(), a.il = CU_TENSOR_MAP_INTERLEAVE_16B, a.sw = CU_TENSOR_MAP_SWIZZLE_128B; /* any swizzle */
    CHECK(enc(&a, e, sizeof e) == CUDA_SUCCESS, "interleave 16B with swizzle 128B accepted: %s", e);
    a = good_packed(CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B), a.sw = CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B;
    EXPECT_REFUSED(a, "supports only");
    a = good_packed(CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B), a.sw = CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B;
    EXPECT_REFUSED(a, "supports only");
    /* oobFill */
    a = good2d(), a.dt = CU_TENSOR_MAP_DATA_TYPE_UINT16, a.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
    EXPECT_REFUSED(a, "oobFill");
    a = good2d(), a.dt = CU_TENSOR_MAP_DATA_TYPE_INT64, a.box[0] = 16,
    a.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
    EXPECT_REFUSED(a, "oobFill");
    a = good_packed(CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B), a.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
    EXPECT_REFUSED(a, "oobFill");
}

/* ---- decode -------------------------------------------------------------------------------- */
static void test_decode(void)
{
    char e[300];
    TmaMap m;
    CUtensorMap cm;
    memset(&cm, 0, sizeof cm);
    CHECK(tma_decode(&cm, &m, e, sizeof e) == -1 && e[0], "128 zero bytes refused: %s", e);
    CHECK(tma_decode(NULL, &m, e, sizeof e) == -1, "NULL refused");
    int refused = 0;
    for (int i = 0; i < 1000; i++) {
        for (int q = 0; q < 16; q++)
            cm.opaque[q] = rnd();
        refused += tma_decode(&cm, &m, e, sizeof e) == -1;
    }
    CHECK(refused == 1000, "random bytes refused %d of 1000 times", refused);

    /* a real map round-trips... */
    const cuuint64_t d[5] = {100, 7, 6, 5, 3}, st[4] = {208, 208 * 7, 208 * 7 * 6 + 32, 208 * 7 * 6 * 5 + 64};
    const cuuint32_t b[5] = {48, 3, 2, 5, 1}, es[5] = {1, 2, 3, 1, 8};
    CHECK(tma_encode_tiled(&cm, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 5, (void *)(uintptr_t)(GVIRT + 32), d, st, b, es,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_64B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA, e,
                           sizeof e) == CUDA_SUCCESS,
          "5D map: %s", e);
    int same = tma_decode(&cm, &m, e, sizeof e) == 0 && m.dtype == CU_TENSOR_MAP_DATA_TYPE_FLOAT16 && m.rank == 5 &&
               m.gaddr == GVIRT + 32 && m.elem_bytes == 2 && m.strides[0] == 2 &&
               m.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && m.swizzle == CU_TENSOR_MAP_SWIZZLE_NONE &&
               m.oob_fill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
    for (int i = 0; i < 5; i++)
        same = same && m.dims[i] == d[i] && m.box[i] == b[i] && m.elem_strides[i] == es[i] &&
               (i == 0 || m.strides[i] == st[i - 1]);
    CHECK(same, "the decoded map holds what was encoded");
    CHECK(tma_tile_bytes(&m) == 96 * 2 * 1 * 5 * 1, "5D tile bytes %u, want 960", tma_tile_bytes(&m));
    /* ...and every single-bit change to it is refused */
    refused = 0;
    for (int bit = 0; bit < 1024; bit++) {
        CUtensorMap c2 = cm;
        ((unsigned char *)c2.opaque)[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        refused += tma_decode(&c2, &m, e, sizeof e) == -1;
    }
    CHECK(refused == 1024, "single-bit changes refused %d of 1024 times", refused);
    /* a copy of the map elsewhere decodes the same (position-independent) */
    static _Alignas(64) unsigned char copy[192];
    memcpy(copy + 64, &cm, sizeof cm);
    CHECK(tma_decode(copy + 64, &m, e, sizeof e) == 0, "a copied map decodes: %s", e);
    /* unused dimensions read as size 1 */
    const cuuint64_t d1[1] = {64};
    const cuuint32_t b1[1] = {16}, e1[1] = {1};
    tma_encode_tiled(&cm, CU_TENSOR_MAP_DATA_TYPE_UINT32, 1, (void *)(uintptr_t)GVIRT, d1, NULL, b1, e1, 0, 0, 0, 0,
                     e, sizeof e);
    CHECK(tma_decode(&cm, &m, e, sizeof e) == 0 && m.rank == 1 && m.dims[3] == 1 && m.box[4] == 1 &&
              m.elem_strides[2] == 1 && tma_tile_bytes(&m) == 64,
          "rank-1 map decodes with unit outer dimensions");
}

/* ---- speed and contiguity -------------------------------------------------------------------- */
static void test_speed(void)
{
    Spec s;
    memset(&s, 0, sizeof s);
    s.rank = 2;
    s.eb = 2;
    s.dt = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    s.box[0] = 128;
    s.box[1] = 128;
    s.es[0] = s.es[1] = 1;
    s.dims[0] = 128;
    s.dims[1] = 4096;
    s.strides[0] = 2;
    s.strides[1] = 256;
    place(&s);
    CUtensorMap cm;
    TmaMap m;
    char e[256];
    encode(&s, &cm, e, sizeof e);
    tma_decode(&cm, &m, e, sizeof e);
    const int32_t c[2] = {0, 1000};
    n_gread = n_swrite = 0;
    tma_load_tile(&MEM, &m, c, 0, 0);
    CHECK(n_gread == 128 && n_swrite == 128, "a 128x128 bf16 box in 128 global reads and 128 shared writes (%ld, %ld)",
          n_gread, n_swrite);
    const int reps = 500;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < reps; i++)
        tma_load_tile(&MEM, &m, c, 0, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / reps;
    CHECK(us < 1000, "a 128x128 bf16 load takes %.1f us", us);
    printf("  128x128 bf16 load, no swizzle: %.1f us\n", us);
    /* 128 rows of 64 bf16 under 128B swizzle */
    s.box[0] = 64;
    s.sw = CU_TENSOR_MAP_SWIZZLE_128B;
    encode(&s, &cm, e, sizeof e);
    tma_decode(&cm, &m, e, sizeof e);
    n_gread = n_swrite = 0;
    tma_load_tile(&MEM, &m, c, 0, 0);
    CHECK(n_gread == 128 && n_swrite == 128, "a 64x128 bf16 box under 128B swizzle: one write a row (%ld, %ld)",
          n_gread, n_swrite);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < reps; i++)
        tma_load_tile(&MEM, &m, c, 0, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / reps;
    CHECK(us < 1000, "a 64x128 bf16 swizzled load takes %.1f us", us);
    printf("  64x128 bf16 load, 128B swizzle: %.1f us\n", us);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < reps; i++)
        tma_store_tile(&MEM, &m, c, 0, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / reps;
    CHECK(us < 1000, "a 64x128 bf16 swizzled store takes %.1f us", us);
}

/* the layout the swizzle tables give, spelled out for one case: a 128B-swizzled
 * bf16 box of 64 columns, element (x, y) at 128 y + 16 ((x / 8) ^ (y % 8)) + 2 (x % 8) */
static void test_smem_offset_examples(void)
{
    Spec s;
    memset(&s, 0, sizeof s);
    s.rank = 2;
    s.eb = 2;
    s.dt = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    s.box[0] = 64;
    s.box[1] = 16;
    s.es[0] = s.es[1] = 1;
    s.dims[0] = 64;
    s.dims[1] = 16;
    s.strides[0] = 2;
    s.strides[1] = 128;
    s.sw = CU_TENSOR_MAP_SWIZZLE_128B;
    place(&s);
    CUtensorMap cm;
    TmaMap m;
    char e[256];
    encode(&s, &cm, e, sizeof e);
    tma_decode(&cm, &m, e, sizeof e);
    int ok = 1;
    for (uint32_t y = 0; y < 16; y++)
        for (uint32_t x = 0; x < 64; x++)
            ok &= tma_smem_offset(&m, x, y) == 128 * y + 16 * ((x / 8) ^ (y % 8)) + 2 * (x % 8);
    CHECK(ok, "128B swizzle: element (x, y) at 128y + 16((x/8) ^ (y%%8)) + 2(x%%8)");
    /* 32B swizzle of 16 bf16 columns: four 32-byte rows a line, lines alternate */
    s.box[0] = 16;
    s.sw = CU_TENSOR_MAP_SWIZZLE_32B;
    encode(&s, &cm, e, sizeof e);
    tma_decode(&cm, &m, e, sizeof e);
    ok = 1;
    for (uint32_t y = 0; y < 16; y++)
        for (uint32_t x = 0; x < 16; x++)
            ok &= tma_smem_offset(&m, x, y) == 32 * y + 16 * ((x / 8) ^ ((y / 4) % 2)) + 2 * (x % 8);
    CHECK(ok, "32B swizzle: rows 0-3 as they are, rows 4-7 with their halves swapped");
    /* a narrow row under 64B swizzle takes 64 bytes */
    s.box[0] = 8;
    s.sw = CU_TENSOR_MAP_SWIZZLE_64B;
    encode(&s, &cm, e, sizeof e);
    tma_decode(&cm, &m, e, sizeof e);
    CHECK(tma_smem_offset(&m, 0, 1) == 64 && tma_smem_offset(&m, 0, 2) == 128 + 16 &&
              tma_smem_offset(&m, 0, 6) == 384 + 48 && tma_tile_bytes(&m) == 16 * 16,
          "64B swizzle, 16-byte rows: 64 bytes apart, chunk moved by the line; tile bytes count data only");
}

int main(void)
{
    gmem = calloc(GSIZE + 4096, 1);
    if (!gmem)
        return 1;
    test_encode_refusals();
    test_decode();
    test_smem_offset_examples();
    test_swizzle_modes();
    test_edges();
    test_permuted_strides();
    test_element_strides();
    test_oob_nan();
    test_gather4();
    test_copy_refusals();
    test_random_loads_stores();
    test_speed();
    free(gmem);
    printf("test_tma: %d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
