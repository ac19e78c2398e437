/* tc.c - tensor-core semantics of the simulator: TMEM, tcgen05.{mma,ld,st,cp}
 * (sm_100a) and wgmma.mma_async (sm_90a).
 *
 * Sources: the PTX ISA (9.0+), sections
 *   9.7.15.5.1    wgmma register fragments and shared-memory matrix layouts,
 *                 canonical layouts, matrix descriptor format
 *   9.7.16.1      Tensor Memory (128 lanes x 512 columns, address = lane<<16 | col)
 *   9.7.16.2      tcgen05 matrix shapes (Table 39) and data-movement shapes
 *   9.7.16.3      leading/stride dimension byte offsets, canonical layouts
 *   9.7.16.4      shared-memory descriptor (Table 40/41), instruction descriptor (Table 42)
 *   9.7.16.8      tcgen05.ld/st, access restrictions, pack/unpack
 *   9.7.16.9      tcgen05.cp
 *   9.7.16.10     MMA: transpose/negate, valid major-ness/swizzle combinations
 *                 (Table 52), D packing, data-path layouts (Layouts A, B, D, F),
 *                 swizzle atoms (Table 53)
 * Facts that the ISA gives only as figures (the ld/st fragment figures, the
 * data-path layout figures, the wgmma fragment figures) were cross-checked
 * against CUTLASS's published layouts; see the notes at each use.
 *
 * Every byte of shared memory and every TMEM cell goes through TcMem. */
#include "tc.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ errors */

static int fail(const TcMem *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(const TcMem *m, const char *fmt, ...)
{
    if (m && m->err && m->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m->err, m->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---------------------------------------------------------- number formats */

static float bits_f32(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* A small float: sign bit at position ebits+mbits, exponent bias, optional
 * IEEE inf/NaN at the all-ones exponent, optional e4m3-style NaN (all ones). */
static float minifloat(uint32_t bits, int ebits, int mbits, int bias, int ieee_special, int e4m3_nan)
{
    uint32_t s = (bits >> (ebits + mbits)) & 1u;
    uint32_t e = (bits >> mbits) & ((1u << ebits) - 1u);
    uint32_t f = bits & ((1u << mbits) - 1u);
    double v;
    if (ieee_special && e == (1u << ebits) - 1u)
        v = f ? NAN : INFINITY;
    else if (e4m3_nan && e == (1u << ebits) - 1u && f == (1u << mbits) - 1u)
        v = NAN;
    else if (e == 0)
        v = ldexp((double)f, 1 - bias - mbits);
    else
        v = ldexp((double)(f | (1u << mbits)), (int)e - bias - mbits);
    return (float)(s ? -v : v);
}

float tc_to_float(TcType t, uint32_t bits)
{
    switch (t) {
    case TC_F16: return minifloat(bits & 0xffffu, 5, 10, 15, 1, 0);
    case TC_BF16: return bits_f32((bits & 0xffffu) << 16);
    case TC_TF32: return bits_f32(bits & 0xffffe000u); /* the lower 13 bits are ignored */
    case TC_E4M3: return minifloat(bits & 0xffu, 4, 3, 7, 0, 1);
    case TC_E5M2: return minifloat(bits & 0xffu, 5, 2, 15, 1, 0);
    case TC_F32: return bits_f32(bits);
    case TC_E2M3: return minifloat(bits & 0x3fu, 2, 3, 1, 0, 0);
    case TC_E3M2: return minifloat(bits & 0x3fu, 3, 2, 3, 0, 0);
    case TC_E2M1: return minifloat(bits & 0xfu, 2, 1, 1, 0, 0);
    }
    return NAN;
}

/* double -> f16 bits, round to nearest even (one rounding) */
static uint16_t f64_to_f16(double x)
{
    uint16_t s = signbit(x) ? 0x8000u : 0u;
    if (isnan(x)) return 0x7e00u;
    double a = fabs(x);
    if (a == 0) return s;
    int e;
    (void)frexp(a, &e); /* a = f * 2^e, f in [0.5, 1): unbiased exponent e-1 */
    if (e - 1 < -14) {  /* subnormal range: unit 2^-24 */
        double q = nearbyint(ldexp(a, 24));
        return (uint16_t)(s | (uint16_t)q); /* q == 1024 encodes the smallest normal */
    }
    double q = nearbyint(ldexp(a, 11 - e)); /* in [1024, 2048] */
    if (q >= 2048) {
        q = 1024;
        e++;
    }
    int E = e - 1 + 15;
    if (E >= 31) return s | 0x7c00u;
    return (uint16_t)(s | (uint16_t)(E << 10) | (uint16_t)((int)q - 1024));
}

static const char *type_name(TcType t)
{
    switch (t) {
    case TC_F16: return "f16";
    case TC_BF16: return "bf16";
    case TC_TF32: return "tf32";
    case TC_E4M3: return "e4m3";
    case TC_E5M2: return "e5m2";
    case TC_F32: return "f32";
    case TC_E2M3: return "e2m3";
    case TC_E3M2: return "e3m2";
    case TC_E2M1: return "e2m1";
    }
    return "?";
}

static int type_bytes(TcType t)
{
    switch (t) {
    case TC_F16: case TC_BF16: return 2;
    case TC_TF32: case TC_F32: return 4;
    case TC_E4M3: case TC_E5M2: return 1;
    default: return 0;
    }
}

/* decode one element of `es` bytes at p (little endian) */
static float elem(TcType t, int es, const uint8_t *p)
{
    uint32_t v = p[0];
    if (es >= 2) v |= (uint32_t)p[1] << 8;
    if (es == 4) v |= (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return tc_to_float(t, v);
}

/* --------------------------------------------- shared-memory matrix layouts */

/* A decoded shared-memory descriptor. `width` is the swizzle width in bytes
 * (0 = no swizzle), `atom32` the 128B swizzle with 32B atomicity. */
typedef struct {
    uint32_t start, lbo, sbo;
    int width, atom32;
} Lay;

static const char *lay_name(const Lay *L)
{
    if (L->atom32) return "128B with 32B atomicity";
    switch (L->width) {
    case 0: return "no swizzle";
    case 32: return "32B";
    case 64: return "64B";
    default: return "128B";
    }
}

/* The pattern of a swizzle repeats every 8 rows of `width` bytes (4 rows of
 * 128 bytes for 32B atomicity); ISA 9.7.16.4.1 Table 41: with base offset 0 the
 * pattern starts at a 1024/512/256-byte boundary, so the matrix start address
 * must lie in the first row of a pattern (a K-major start may be advanced along
 * K inside that row). */
static int lay_check_start(const TcMem *m, const char *what, const Lay *L)
{
    if (!L->width) return 0;
    int rowbits = L->width == 128 ? 7 : L->width == 64 ? 6 : 5;
    uint32_t rows = L->atom32 ? 4 : 8;
    uint32_t phase = (L->start >> rowbits) & (rows - 1);
    if (phase)
        return fail(m,
                    "%s: matrix start address 0x%x lies in row %u of a %s swizzle pattern (%u-byte boundary) but the "
                    "base offset is 0; the ISA requires a non-zero base offset then, which this simulator does not "
                    "model",
                    what, L->start, phase, lay_name(L), rows << rowbits);
    return 0;
}

static int umma_decode(const TcMem *m, const char *what, uint64_t d, Lay *L)
{
    memset(L, 0, sizeof *L);
    L->start = (uint32_t)(d & 0x3fffu) << 4;
    L->lbo = (uint32_t)((d >> 16) & 0x3fffu) << 4;
    L->sbo = (uint32_t)((d >> 32) & 0x3fffu) << 4;
    unsigned ver = (unsigned)((d >> 46) & 7u), base = (unsigned)((d >> 49) & 7u);
    unsigned lbo_mode = (unsigned)((d >> 52) & 1u), fixed = (unsigned)((d >> 53) & 0xffu);
    unsigned swz = (unsigned)(d >> 61);
    if ((d >> 14) & 3u)
        return fail(m, "%s: shared memory descriptor 0x%016llx has reserved bits 14-15 set", what,
                    (unsigned long long)d);
    if ((d >> 30) & 3u)
        return fail(m, "%s: shared memory descriptor 0x%016llx has reserved bits 30-31 set", what,
                    (unsigned long long)d);
    if (ver != 1)
        return fail(m, "%s: shared memory descriptor 0x%016llx has %u in bits 46-48, which must hold the fixed value 0b001",
                    what, (unsigned long long)d, ver);
    if (fixed)
        return fail(m, "%s: shared memory descriptor 0x%016llx has 0x%x in bits 53-60, which must be 0", what,
                    (unsigned long long)d, fixed);
    if (lbo_mode)
        return fail(m,
                    "%s: shared memory descriptor 0x%016llx sets bit 52 (leading dimension as absolute address), which "
                    "the ISA supports on sm_103a only",
                    what, (unsigned long long)d);
    switch (swz) {
    case 0: L->width = 0; break;
    case 1: L->width = 128; L->atom32 = 1; break;
    case 2: L->width = 128; break;
    case 4: L->width = 64; break;
    case 6: L->width = 32; break;
    default:
        return fail(m, "%s: shared memory descriptor 0x%016llx has swizzle mode %u in bits 61-63 (valid: 0, 1, 2, 4, 6)",
                    what, (unsigned long long)d, swz);
    }
    if (base)
        return fail(m,
                    "%s: shared memory descriptor 0x%016llx has matrix base offset %u; only 0 (swizzle pattern starting "
                    "at its boundary) is modelled",
                    what, (unsigned long long)d, base);
    return lay_check_start(m, what, L);
}

static int wgmma_decode(const TcMem *m, const char *what, uint64_t d, Lay *L)
{
    memset(L, 0, sizeof *L);
    L->start = (uint32_t)(d & 0x3fffu) << 4;
    L->lbo = (uint32_t)((d >> 16) & 0x3fffu) << 4;
    L->sbo = (uint32_t)((d >> 32) & 0x3fffu) << 4;
    unsigned base = (unsigned)((d >> 49) & 7u);
    switch ((unsigned)(d >> 62)) {
    case 0: L->width = 0; break;
    case 1: L->width = 128; break;
    case 2: L->width = 64; break;
    default: L->width = 32; break;
    }
    if (base && L->width)
        return fail(m,
                    "%s: matrix descriptor 0x%016llx has matrix base offset %u; only 0 (swizzle pattern starting at "
                    "its boundary) is modelled",
                    what, (unsigned long long)d, base);
    return lay_check_start(m, what, L);
}

/* Canonical layouts (ISA 9.7.15.5.1.2.1.3 / 9.7.16.3.3), T = 16 / es elements
 * of 16 bytes, c = width / 16 chunks per swizzle row:
 *   K-major,  none:    ((8,m),(T,2k)) : ((1T,SBO),(1,LBO))
 *   K-major,  swizzle: ((8,m),(T,2k)) : ((cT,SBO),(1,T))
 *   MN-major, none:    ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO))
 *   MN-major, swizzle: ((T,c,m),(8,k)) : ((1,T,LBO),(cT,SBO))
 *   MN-major, 128B with 32B atomicity: the atom is 8x4 (Table 53): 4 K-rows of
 *            128 bytes, SBO between groups of 4 K-rows.
 * then Swizzle<B,4,3> (B = 1, 2, 3 for 32/64/128B) on the byte address: bits
 * [4,4+B) ^= bits [7,7+B); 32B atomicity: Swizzle<2,5,2>, bits [5,7) ^= [7,9). */
static uint32_t lay_addr(const Lay *L, int mn_major, int es, uint32_t mn, uint32_t k)
{
    uint32_t T = 16u / (uint32_t)es, a = L->start;
    if (!mn_major) {
        if (!L->width)
            a += (mn % 8) * 16 + (mn / 8) * L->sbo + (k % T) * es + (k / T) * L->lbo;
        else
            a += (mn % 8) * (uint32_t)L->width + (mn / 8) * L->sbo + k * (uint32_t)es;
    } else if (!L->width) {
        a += (mn % T) * es + (mn / T) * L->sbo + (k % 8) * 16 + (k / 8) * L->lbo;
    } else {
        uint32_t c = (uint32_t)L->width / 16, rows = L->atom32 ? 4 : 8;
        a += (mn % T) * es + ((mn / T) % c) * 16 + (mn / (T * c)) * L->lbo + (k % rows) * (uint32_t)L->width +
             (k / rows) * L->sbo;
    }
    if (L->atom32)
        a ^= ((a >> 7) & 3u) << 5;
    else if (L->width == 128)
        a ^= ((a >> 7) & 7u) << 4;
    else if (L->width == 64)
        a ^= ((a >> 7) & 3u) << 4;
    else if (L->width == 32)
        a ^= ((a >> 7) & 1u) << 4;
    return a;
}

int tc_umma_smem_addr(const TcMem *m, uint64_t desc, int mn_major, int elem_bits, uint32_t mn, uint32_t k,
                      uint32_t *addr)
{
    Lay L;
    if (elem_bits != 8 && elem_bits != 16 && elem_bits != 32)
        return fail(m, "tc_umma_smem_addr: element size %d bits is not 8, 16 or 32", elem_bits);
    if (umma_decode(m, "tcgen05 descriptor", desc, &L)) return -1;
    if (L.atom32 && !mn_major)
        return fail(m, "tcgen05 descriptor: 128B swizzling with 32B atomicity has no K-major swizzle atom (Table 53)");
    *addr = lay_addr(&L, mn_major, elem_bits / 8, mn, k);
    return 0;
}

int tc_wgmma_smem_addr(const TcMem *m, uint64_t desc, int mn_major, int elem_bits, uint32_t mn, uint32_t k,
                       uint32_t *addr)
{
    Lay L;
    if (elem_bits != 8 && elem_bits != 16 && elem_bits != 32)
        return fail(m, "tc_wgmma_smem_addr: element size %d bits is not 8, 16 or 32", elem_bits);
    if (wgmma_decode(m, "wgmma descriptor", desc, &L)) return -1;
    *addr = lay_addr(&L, mn_major, elem_bits / 8, mn, k);
    return 0;
}

/* Read an operand tile of MN x K elements into out[mn * K + k], 16 bytes at a
 * time: a 16-byte chunk is contiguous in every canonical layout, the swizzles
 * permute 16-byte (or 32-byte) units only. */
static int read_smem_operand(const TcMem *m, int cta, const Lay *L, int mn_major, TcType t, uint32_t MN,
                             uint32_t K, float sign, float *out, TcMode mode)
{
    int es = type_bytes(t);
    uint32_t T = 16u / (uint32_t)es;
    uint8_t buf[16];
    if (!mn_major) {
        for (uint32_t r = 0; r < MN; r++)
            for (uint32_t kc = 0; kc < K / T; kc++) {
                uint32_t a = lay_addr(L, 0, es, r, kc * T);
                if (m->smem_read(m->u, cta, a, buf, 16)) return -1;
                if (mode == TC_FOOTPRINT) continue;
                for (uint32_t e = 0; e < T; e++) out[r * K + kc * T + e] = sign * elem(t, es, buf + e * (uint32_t)es);
            }
    } else {
        for (uint32_t k = 0; k < K; k++)
            for (uint32_t mc = 0; mc < MN / T; mc++) {
                uint32_t a = lay_addr(L, 1, es, mc * T, k);
                if (m->smem_read(m->u, cta, a, buf, 16)) return -1;
                if (mode == TC_FOOTPRINT) continue;
                for (uint32_t e = 0; e < T; e++) out[(mc * T + e) * K + k] = sign * elem(t, es, buf + e * (uint32_t)es);
            }
    }
    return 0;
}

/* ------------------------------------------------------ instruction descriptor */

typedef struct {
    int M, N, K;          /* K in elements */
    int d_f16;            /* D is f16 (else f32) */
    TcType at, bt;
    int a_mn, b_mn;       /* transpose bits: MN-major */
    int neg_a, neg_b;
} Idesc;

static const char *kind_name(TcKind k)
{
    return k == TC_KIND_F16 ? "kind::f16" : k == TC_KIND_TF32 ? "kind::tf32" : "kind::f8f6f4";
}

static int idesc_type(TcKind kind, unsigned code, TcType *t)
{
    switch (kind) {
    case TC_KIND_F16:
        if (code == 0) { *t = TC_F16; return 0; }
        if (code == 1) { *t = TC_BF16; return 0; }
        return -1;
    case TC_KIND_TF32:
        if (code == 2) { *t = TC_TF32; return 0; }
        return -1;
    case TC_KIND_F8F6F4:
        switch (code) {
        case 0: *t = TC_E4M3; return 0;
        case 1: *t = TC_E5M2; return 0;
        case 3: *t = TC_E2M3; return 0;
        case 4: *t = TC_E3M2; return 0;
        case 5: *t = TC_E2M1; return 0;
        default: return -1;
        }
    }
    return -1;
}

#define MMA "tcgen05.mma"

static int decode_idesc(const TcMem *m, TcKind kind, int cta_group, uint32_t id, Idesc *o)
{
    memset(o, 0, sizeof *o);
    const char *kn = kind_name(kind);
    if (kind != TC_KIND_F16 && kind != TC_KIND_TF32 && kind != TC_KIND_F8F6F4)
        return fail(m, MMA ": MMA kind %d is not one of kind::f16, kind::tf32, kind::f8f6f4", (int)kind);
    if (id & 4u)
        return fail(m, MMA ".%s: instruction descriptor 0x%08x sets bit 2 (sparse A); tcgen05.mma.sp is not modelled",
                    kn, id);
    if (id & 8u)
        return fail(m, MMA ".%s: instruction descriptor 0x%08x sets bit 3 (saturate), which applies to kind::i8 only",
                    kn, id);
    if (id & (1u << 6))
        return fail(m, MMA ".%s: instruction descriptor 0x%08x sets reserved bit 6", kn, id);
    if (id & (1u << 23))
        return fail(m, MMA ".%s: instruction descriptor 0x%08x sets reserved bit 23", kn, id);
    if (id & (1u << 29))
        return fail(m, MMA ".%s: instruction descriptor 0x%08x sets reserved bit 29", kn, id);
    if (id >> 30)
        return fail(m,
                    MMA ".%s: instruction descriptor 0x%08x has maximum shift %u in bits 30-31, which applies to "
                    "tcgen05.mma.ws only (not modelled); it must be 0",
                    kn, id, id >> 30);
    unsigned dt = (id >> 4) & 3u, ac = (id >> 7) & 7u, bc = (id >> 10) & 7u;
    if (idesc_type(kind, ac, &o->at))
        return fail(m, MMA ".%s: instruction descriptor 0x%08x has A type code %u in bits 7-9, invalid for %s", kn, id, ac,
                    kn);
    if (idesc_type(kind, bc, &o->bt))
        return fail(m, MMA ".%s: instruction descriptor 0x%08x has B type code %u in bits 10-12, invalid for %s", kn, id,
                    bc, kn);
    if (dt > 1 || (dt == 0 && kind == TC_KIND_TF32))
        return fail(m, MMA ".%s: instruction descriptor 0x%08x has D type code %u in bits 4-5 (valid: %s)", kn, id, dt,
                    kind == TC_KIND_TF32 ? "1 = f32" : "0 = f16, 1 = f32");
    o->d_f16 = dt == 0;
    if (kind == TC_KIND_F16 && o->at != o->bt)
        return fail(m, MMA ".kind::f16: instruction descriptor 0x%08x mixes A %s with B %s", id, type_name(o->at),
                    type_name(o->bt));
    if (kind == TC_KIND_F16 && o->d_f16 && o->at != TC_F16)
        return fail(m, MMA ".kind::f16: instruction descriptor 0x%08x asks for an f16 D with %s inputs (f16 D needs f16 A/B)",
                    id, type_name(o->at));
    if (kind == TC_KIND_F8F6F4 && (!type_bytes(o->at) || !type_bytes(o->bt)))
        return fail(m,
                    MMA ".kind::f8f6f4: instruction descriptor 0x%08x selects A %s / B %s; the 6-bit and 4-bit operand "
                    "packings are not modelled (only e4m3, e5m2)",
                    id, type_name(o->at), type_name(o->bt));
    o->neg_a = (id >> 13) & 1u;
    o->neg_b = (id >> 14) & 1u;
    o->a_mn = (id >> 15) & 1u;
    o->b_mn = (id >> 16) & 1u;
    o->N = (int)((id >> 17) & 0x3fu) << 3;
    o->M = (int)((id >> 24) & 0x1fu) << 4;
    o->K = 32 / type_bytes(o->at); /* 256 bits of K per row (Table 39) */
    if (cta_group == 1) {
        if (o->M != 64 && o->M != 128)
            return fail(m, MMA ".cta_group::1.%s: instruction descriptor 0x%08x has M field %u, i.e. M = %d (M must be 64 or 128)",
                        kn, id, (id >> 24) & 0x1fu, o->M);
        if (o->N < 8 || o->N > 256)
            return fail(m,
                        MMA ".cta_group::1.%s: instruction descriptor 0x%08x has N field %u, i.e. N = %d (N must be a "
                        "multiple of 8 in 8..256 for M %d)",
                        kn, id, (id >> 17) & 0x3fu, o->N, o->M);
    } else {
        if (o->M != 128 && o->M != 256)
            return fail(m, MMA ".cta_group::2.%s: instruction descriptor 0x%08x has M field %u, i.e. M = %d (M must be 128 or 256)",
                        kn, id, (id >> 24) & 0x1fu, o->M);
        if (o->N < 16 || o->N > 256 || o->N % 16)
            return fail(m,
                        MMA ".cta_group::2.%s: instruction descriptor 0x%08x has N field %u, i.e. N = %d (N must be a "
                        "multiple of 16 in 16..256 for M %d)",
                        kn, id, (id >> 17) & 0x3fu, o->N, o->M);
    }
    /* Table 50: 8-bit transpose B */
    if (o->b_mn && type_bytes(o->bt) == 1) {
        int step = cta_group == 1 ? 16 : 32;
        if (o->N % step)
            return fail(m, MMA ".cta_group::%d.%s: N = %d with an MN-major 8-bit B; N must be a multiple of %d (Table 50)",
                        cta_group, kn, o->N, step);
    }
    return 0;
}

/* Table 52 / section 9.7.16.10.1: swizzle vs major-ness for A/B in smem. */
static int check_major_swizzle(const TcMem *m, const char *what, const Lay *L, int mn_major, TcType t)
{
    if (!mn_major) {
        if (L->atom32)
            return fail(m, "%s: K-major operand with 128B swizzling with 32B atomicity; that mode has no K-major atom (Table 53)",
                        what);
        return 0;
    }
    if (type_bytes(t) == 4 && !L->atom32)
        return fail(m, "%s: MN-major (transposed) 32-bit operand needs 128B swizzling with 32B atomicity, not %s (Table 52)",
                    what, lay_name(L));
    if (type_bytes(t) != 4 && L->atom32)
        return fail(m, "%s: MN-major (transposed) %s operand with 128B swizzling with 32B atomicity (Table 52 excludes it)",
                    what, type_name(t));
    return 0;
}

/* ------------------------------------------------------------ data paths */

/* Where row i (CTA-local) and column j of D live, relative to the d-tmem
 * address, per data-path layout (9.7.16.10.5; lane mapping of the figures
 * cross-checked against CUTLASS's tmem_frg):
 *   F: M=64, cta_group::1: 1/2 data path, row i at lane 32*(i/16) + i%16
 *      (plus the lane alignment 0 or 16 of the address), column j.
 *   D: M=128, cta_group::1 and A: M=256, cta_group::2: row i at lane i.
 *   B: M=128, cta_group::2 (64 rows per CTA), 2x2 organisation: columns
 *      [0,N/2) in lanes 0..63, columns [N/2,N) in lanes 64..127, both at column
 *      j mod N/2. */
typedef enum { DP_A, DP_B, DP_D, DP_F } DataPath;

static void dp_map(DataPath dp, int N, int i, int j, uint32_t *lane, uint32_t *col)
{
    switch (dp) {
    case DP_F:
        *lane = (uint32_t)(32 * (i / 16) + i % 16);
        *col = (uint32_t)j;
        break;
    case DP_B:
        *lane = (uint32_t)(i + 64 * (j / (N / 2)));
        *col = (uint32_t)(j % (N / 2));
        break;
    default:
        *lane = (uint32_t)i;
        *col = (uint32_t)j;
        break;
    }
}

/* The run of D cells of row i from column j on that share a lane and lie in consecutive TMEM columns (dp_map is
 * contiguous in j but for layout B, whose upper half of the columns moves to lanes 64 up): its length. */
static int dp_run(DataPath dp, int N, int j)
{
    return dp == DP_B ? N / 2 - j % (N / 2) : N - j;
}

/* n cells of one lane through the run callbacks when the caller gave them, else cell by cell */
static int tmem_read_n(const TcMem *m, int cta, uint32_t lane, uint32_t col, uint32_t n, uint32_t *v)
{
    if (m->tmem_read_run) return m->tmem_read_run(m->u, cta, lane, col, n, v);
    for (uint32_t k = 0; k < n; k++)
        if (m->tmem_read(m->u, cta, lane, col + k, &v[k])) return -1;
    return 0;
}

static int tmem_write_n(const TcMem *m, int cta, uint32_t lane, uint32_t col, uint32_t n, const uint32_t *v)
{
    if (m->tmem_write_run) return m->tmem_write_run(m->u, cta, lane, col, n, v);
    for (uint32_t k = 0; k < n; k++)
        if (m->tmem_write(m->u, cta, lane, col + k, v[k])) return -1;
    return 0;
}

static int tmem_footprint_n(const TcMem *m, int cta, uint32_t lane, uint32_t col, uint32_t n)
{
    if (m->tmem_footprint_write_run) return m->tmem_footprint_write_run(m->u, cta, lane, col, n);
    for (uint32_t k = 0; k < n; k++)
        if (m->tmem_footprint_write(m->u, cta, lane, col + k)) return -1;
    return 0;
}

/* Lane of row i of an A matrix in TMEM read by data-path half h (layout B reads
 * A for columns [N/2,N) from lanes 64..127: A must be duplicated there). */
static uint32_t dp_a_lane(DataPath dp, int i, int h)
{
    switch (dp) {
    case DP_F: return (uint32_t)(32 * (i / 16) + i % 16);
    case DP_B: return (uint32_t)(i + 64 * h);
    default: return (uint32_t)i;
    }
}

/* ----------------------------------------------------------------- tc_mma */

int tc_mma(const TcMem *m, const TcMma *op, TcMode mode)
{
    Idesc d;
    int cg = op->cta_group;
    if (cg != 1 && cg != 2) return fail(m, MMA ": cta_group %d is not 1 or 2", cg);
    if (decode_idesc(m, op->kind, cg, op->idesc, &d)) return -1;
    const char *kn = kind_name(op->kind);
    int M = d.M, N = d.N, K = d.K;
    int Mloc = M / cg;      /* rows of A and D per CTA */
    int Nloc = N / cg;      /* columns of B per CTA */
    DataPath dp = cg == 1 ? (M == 64 ? DP_F : DP_D) : (M == 256 ? DP_A : DP_B);
    int ncols = dp == DP_B ? N / 2 : N; /* TMEM columns of D */
    int ctas[2] = {cg == 1 ? op->cta : (op->cta & ~1), op->cta | 1};

    /* D address */
    uint32_t dl = op->d_tmem >> 16, dc = op->d_tmem & 0xffffu;
    if (dp == DP_F ? (dl != 0 && dl != 16) : dl != 0)
        return fail(m,
                    MMA ".cta_group::%d.%s: D address 0x%08x has lane %u; the M = %d data path (Layout %s) needs lane "
                    "alignment %s",
                    cg, kn, op->d_tmem, dl, M, dp == DP_F ? "F" : dp == DP_B ? "B" : dp == DP_A ? "A" : "D",
                    dp == DP_F ? "0 or 16" : "0");
    if (dc + (uint32_t)ncols > TC_TMEM_COLS)
        return fail(m, MMA ".cta_group::%d.%s: D at column %u spans %d columns, past column %d", cg, kn, dc, ncols,
                    TC_TMEM_COLS - 1);

    /* A, B layouts */
    Lay la, lb;
    uint32_t al = 0, ac = 0;
    if (op->a_is_tmem) {
        if (d.a_mn)
            return fail(m, MMA ".%s: A in Tensor Memory with the transpose-A bit set; A in TMEM is K-major only", kn);
        al = op->a_tmem >> 16;
        ac = op->a_tmem & 0xffffu;
        if (al != (dp == DP_F ? dl : 0))
            return fail(m,
                        MMA ".cta_group::%d.%s: A address 0x%08x has lane %u but must use lane %u (the lane alignment of "
                        "D for the M = %d data path)",
                        cg, kn, op->a_tmem, al, dp == DP_F ? dl : 0, M);
        if (ac + 8 > TC_TMEM_COLS)
            return fail(m, MMA ".%s: A at TMEM column %u spans 8 columns, past column %d", kn, ac, TC_TMEM_COLS - 1);
    } else {
        if (umma_decode(m, MMA " A descriptor", op->a_desc, &la)) return -1;
        if (check_major_swizzle(m, MMA " A", &la, d.a_mn, d.at)) return -1;
    }
    if (umma_decode(m, MMA " B descriptor", op->b_desc, &lb)) return -1;
    if (check_major_swizzle(m, MMA " B", &lb, d.b_mn, d.bt)) return -1;
    if (d.b_mn && Nloc % (16 / type_bytes(d.bt)))
        return fail(m, MMA ".%s: N %d per CTA is not a multiple of the %d elements of an MN-major 16-byte chunk", kn, Nloc,
                    16 / type_bytes(d.bt));

    float *A = NULL, *B = NULL, *D = NULL, *Aup = NULL;
    double *Bt = NULL;
    int rc = -1;
    size_t asz = (size_t)cg * (size_t)Mloc * (size_t)K;
    A = malloc(sizeof(float) * asz);
    B = malloc(sizeof(float) * (size_t)N * (size_t)K);
    D = malloc(sizeof(float) * (size_t)cg * (size_t)Mloc * (size_t)N);
    /* Layout B with A from TMEM: the upper data-path half (lanes 64..127)
     * reads its own copy of A, used for the columns [N/2, N). */
    if (op->a_is_tmem && dp == DP_B) Aup = malloc(sizeof(float) * asz);
    if (!A || !B || !D || (op->a_is_tmem && dp == DP_B && !Aup)) {
        fail(m, MMA ": out of memory");
        goto out;
    }
    float sa = d.neg_a ? -1.0f : 1.0f, sb = d.neg_b ? -1.0f : 1.0f;

    /* --- reads: everything is read before anything is written --- */
    for (int v = 0; v < cg; v++) {
        int cta = ctas[v];
        if (!op->a_is_tmem) {
            if (read_smem_operand(m, cta, &la, d.a_mn, d.at, (uint32_t)Mloc, (uint32_t)K, sa,
                                  A + (size_t)v * (size_t)Mloc * (size_t)K, mode))
                goto out;
        } else {
            /* A in TMEM (9.7.16.10.4): K-major, row i in the data-path lane of
             * row i, 32 bytes of K in 8 columns, elements packed contiguously
             * in each 32-bit cell from bit 0 (2 per cell for 16-bit, 4 for
             * 8-bit, 1 for tf32). */
            int es = type_bytes(d.at), halves = dp == DP_B ? 2 : 1, per = 4 / es;
            for (int h = 0; h < halves; h++) {
                float *Av = (h ? Aup : A) + (size_t)v * (size_t)Mloc * (size_t)K;
                for (int i = 0; i < Mloc; i++) {
                    uint32_t cells[8];
                    if (tmem_read_n(m, cta, al + dp_a_lane(dp, i, h), ac, 8, cells)) goto out;
                    if (mode == TC_FOOTPRINT) continue;
                    for (int c = 0; c < 8; c++) {
                        uint32_t cell = cells[c];
                        uint8_t b4[4] = {(uint8_t)cell, (uint8_t)(cell >> 8), (uint8_t)(cell >> 16),
                                         (uint8_t)(cell >> 24)};
                        for (int e = 0; e < per; e++) Av[i * K + c * per + e] = sa * elem(d.at, es, b4 + e * es);
                    }
                }
            }
        }
        if (read_smem_operand(m, cta, &lb, d.b_mn, d.bt, (uint32_t)Nloc, (uint32_t)K, sb,
                              B + (size_t)v * (size_t)Nloc * (size_t)K, mode))
            goto out;
        if (op->enable_input_d)
            for (int i = 0; i < Mloc; i++)
                for (int j = 0, n; j < N; j += n) {
                    uint32_t lane, col, cells[TC_TMEM_COLS];
                    dp_map(dp, N, i, j, &lane, &col);
                    n = dp_run(dp, N, j);
                    if (tmem_read_n(m, cta, dl + lane, dc + col, (uint32_t)n, cells)) goto out;
                    if (mode == TC_FOOTPRINT) continue;
                    float *drow = D + ((size_t)v * (size_t)Mloc + (size_t)i) * (size_t)N + (size_t)j;
                    for (int k = 0; k < n; k++)
                        drow[k] = d.d_f16 ? tc_to_float(TC_F16, cells[k] & 0xffffu) : bits_f32(cells[k]);
                }
    }
    if (mode == TC_FOOTPRINT) {
        if (m->tmem_footprint_write)
            for (int v = 0; v < cg; v++)
                for (int i = 0; i < Mloc; i++)
                    for (int j = 0, n; j < N; j += n) {
                        uint32_t lane, col;
                        dp_map(dp, N, i, j, &lane, &col);
                        n = dp_run(dp, N, j);
                        if (tmem_footprint_n(m, ctas[v], dl + lane, dc + col, (uint32_t)n)) goto out;
                    }
        rc = 0;
        goto out;
    }

    Bt = malloc(sizeof(double) * (size_t)N * (size_t)K);
    if (!Bt) {
        fail(m, MMA ": out of memory");
        goto out;
    }
    for (int j = 0; j < N; j++)
        for (int k = 0; k < K; k++) Bt[(size_t)k * (size_t)N + (size_t)j] = (double)B[(size_t)j * (size_t)K + (size_t)k];

    /* --- compute: products exact, sum in double, one rounding per MMA ---
     * Each dot product is summed in k order; eight columns are carried at once
     * (independent sums) so the additions pipeline. */
    for (int v = 0; v < cg; v++)
        for (int i = 0; i < Mloc; i++) {
            double arow[2][32];
            for (int h = 0; h < 2; h++) {
                const float *src = (h && Aup ? Aup : A) + ((size_t)v * (size_t)Mloc + (size_t)i) * (size_t)K;
                for (int k = 0; k < K; k++) arow[h][k] = (double)src[k];
            }
            float *drow = D + ((size_t)v * (size_t)Mloc + (size_t)i) * (size_t)N;
            for (int j0 = 0; j0 < N; j0 += 8) {
                const double *a = arow[(dp == DP_B && j0 >= N / 2) ? 1 : 0];
                double p0 = 0, p1 = 0, p2 = 0, p3 = 0, p4 = 0, p5 = 0, p6 = 0, p7 = 0;
                for (int k = 0; k < K; k++) {
                    const double *b = Bt + (size_t)k * (size_t)N + (size_t)j0;
                    double ak = a[k];
                    p0 += ak * b[0];
                    p1 += ak * b[1];
                    p2 += ak * b[2];
                    p3 += ak * b[3];
                    p4 += ak * b[4];
                    p5 += ak * b[5];
                    p6 += ak * b[6];
                    p7 += ak * b[7];
                }
                double p[8] = {p0, p1, p2, p3, p4, p5, p6, p7};
                for (int u = 0; u < 8; u++) {
                    double s = (op->enable_input_d ? (double)drow[j0 + u] : 0.0) + p[u];
                    drow[j0 + u] = d.d_f16 ? tc_to_float(TC_F16, f64_to_f16(s)) : (float)s;
                }
            }
        }

    /* --- writes --- */
    for (int v = 0; v < cg; v++)
        for (int i = 0; i < Mloc; i++)
            for (int j = 0, n; j < N; j += n) {
                uint32_t lane, col, cells[TC_TMEM_COLS];
                const float *drow = D + ((size_t)v * (size_t)Mloc + (size_t)i) * (size_t)N + (size_t)j;
                dp_map(dp, N, i, j, &lane, &col);
                n = dp_run(dp, N, j);
                for (int k = 0; k < n; k++) cells[k] = d.d_f16 ? f64_to_f16(drow[k]) : f32_bits(drow[k]);
                if (tmem_write_n(m, ctas[v], dl + lane, dc + col, (uint32_t)n, cells)) goto out;
            }
    rc = 0;
out:
    free(A);
    free(B);
    free(D);
    free(Aup);
    free(Bt);
    return rc;
}

/* ---------------------------------------------------------- tcgen05.ld/st */

static const char *shape_name(TcShape s)
{
    switch (s) {
    case TC_32x32b: return ".32x32b";
    case TC_16x64b: return ".16x64b";
    case TC_16x128b: return ".16x128b";
    case TC_16x256b: return ".16x256b";
    case TC_16x32bx2: return ".16x32bx2";
    }
    return "?";
}

static int regs_per_rep(TcShape s)
{
    return s == TC_16x128b ? 2 : s == TC_16x256b ? 4 : 1;
}

int tc_ldst_nregs(const TcLdSt *op)
{
    int n = op->num;
    if ((unsigned)op->shape > TC_16x32bx2 || n < 1 || n > 128 || (n & (n - 1))) return -1;
    int r = n * regs_per_rep(op->shape);
    return r > TC_MAX_REGS ? -1 : r;
}

/* Register i of thread t -> (lane offset, logical 32-bit column offset, half).
 * The ISA gives these as Figures 183-187; the formulas below were read off
 * CUTLASS's TMEM_LOAD layouts (SM100_TMEM_LOAD_*dp*b*x), which encode them:
 *   .32x32b   lane t,                      col i
 *   .16x64b   lane t/4 + 8*(t%2),          col 2*i + (t/2)%2
 *   .16x128b  lane t/4 + 8*(i%2),          col 4*(i/2) + t%4
 *   .16x256b  lane t/4 + 8*((i/2)%2),      col 8*(i/4) + 2*(t%4) + i%2
 *   .16x32bx2 lane t%16, half t/16 (second access at taddr + immHalfSplitoff),
 *             col i */
static void ldst_map(TcShape s, int t, int i, uint32_t *lane, uint32_t *lc, int *half)
{
    *half = 0;
    switch (s) {
    case TC_32x32b:
        *lane = (uint32_t)t;
        *lc = (uint32_t)i;
        break;
    case TC_16x64b:
        *lane = (uint32_t)(t / 4 + 8 * (t % 2));
        *lc = (uint32_t)(2 * i + (t / 2) % 2);
        break;
    case TC_16x128b:
        *lane = (uint32_t)(t / 4 + 8 * (i % 2));
        *lc = (uint32_t)(4 * (i / 2) + t % 4);
        break;
    case TC_16x256b:
        *lane = (uint32_t)(t / 4 + 8 * ((i / 2) % 2));
        *lc = (uint32_t)(8 * (i / 4) + 2 * (t % 4) + i % 2);
        break;
    case TC_16x32bx2:
        *lane = (uint32_t)(t % 16);
        *lc = (uint32_t)i;
        *half = t / 16;
        break;
    }
}

/* Physical cells of register i of thread t: one cell, or two with pack/unpack
 * (the low 16 bits of the lower column go to register bits 0-15, those of the
 * next column to bits 16-31). */
static int ldst_cells(const TcMem *m, const TcLdSt *op, const char *what, int t, int i, uint32_t *lane,
                      uint32_t col[2])
{
    uint32_t lo = 0, lc = 0;
    int half;
    ldst_map(op->shape, t, i, &lo, &lc, &half);
    uint32_t base = op->taddr + (half ? op->half_splitoff : 0u);
    uint32_t bl = base >> 16, bc = base & 0xffffu;
    *lane = bl + lo;
    col[0] = bc + (op->pack16 ? 2 * lc : lc);
    col[1] = col[0] + 1;
    uint32_t q = (uint32_t)(op->warp % 4);
    if (*lane < 32 * q || *lane >= 32 * q + 32)
        return fail(m,
                    "%s%s: warp %d may access only TMEM lanes %u-%u (warp %% 4 = %u), but thread %d's register %d is "
                    "at lane %u (address 0x%08x)",
                    what, shape_name(op->shape), op->warp, 32 * q, 32 * q + 31, q, t, i, *lane, op->taddr);
    if (col[op->pack16 ? 1 : 0] >= TC_TMEM_COLS)
        return fail(m, "%s%s.x%d: thread %d's register %d is at column %u, past column %d (address 0x%08x)", what,
                    shape_name(op->shape), op->num, t, i, col[op->pack16 ? 1 : 0], TC_TMEM_COLS - 1, op->taddr);
    return 0;
}

static int ldst_check(const TcMem *m, const TcLdSt *op, const char *what)
{
    if ((unsigned)op->shape > TC_16x32bx2) return fail(m, "%s: shape %d is not a tcgen05.ld/st shape", what, (int)op->shape);
    int n = op->num;
    if (n < 1 || n > 128 || (n & (n - 1)))
        return fail(m, "%s%s: .num x%d is not one of x1, x2, x4, ..., x128", what, shape_name(op->shape), n);
    if (n * regs_per_rep(op->shape) > TC_MAX_REGS)
        return fail(m, "%s%s: .x%d would need %d registers per thread; the maximum for this shape is .x%d", what,
                    shape_name(op->shape), n, n * regs_per_rep(op->shape), TC_MAX_REGS / regs_per_rep(op->shape));
    if (op->warp < 0) return fail(m, "%s: warp index %d is negative", what, op->warp);
    return 0;
}

int tc_tmem_ld(const TcMem *m, const TcLdSt *op, uint32_t regs[32][TC_MAX_REGS])
{
    const char *what = "tcgen05.ld";
    if (ldst_check(m, op, what)) return -1;
    int nr = tc_ldst_nregs(op);
    for (int t = 0; t < 32; t++)
        for (int i = 0; i < nr; i++) {
            uint32_t lane, col[2], c0, c1;
            if (ldst_cells(m, op, what, t, i, &lane, col)) return -1;
            if (m->tmem_read(m->u, op->cta, lane, col[0], &c0)) return -1;
            if (op->pack16) {
                if (m->tmem_read(m->u, op->cta, lane, col[1], &c1)) return -1;
                regs[t][i] = (c0 & 0xffffu) | (c1 & 0xffffu) << 16;
            } else {
                regs[t][i] = c0;
            }
        }
    return 0;
}

int tc_tmem_st(const TcMem *m, const TcLdSt *op, const uint32_t regs[32][TC_MAX_REGS])
{
    const char *what = "tcgen05.st";
    if (ldst_check(m, op, what)) return -1;
    int nr = tc_ldst_nregs(op);
    uint32_t lane, col[2];
    for (int t = 0; t < 32; t++) /* check every cell before the first write */
        for (int i = 0; i < nr; i++)
            if (ldst_cells(m, op, what, t, i, &lane, col)) return -1;
    for (int t = 0; t < 32; t++)
        for (int i = 0; i < nr; i++) {
            ldst_cells(m, op, what, t, i, &lane, col);
            if (op->pack16) {
                if (m->tmem_write(m->u, op->cta, lane, col[0], regs[t][i] & 0xffffu)) return -1;
                if (m->tmem_write(m->u, op->cta, lane, col[1], regs[t][i] >> 16)) return -1;
            } else if (m->tmem_write(m->u, op->cta, lane, col[0], regs[t][i])) {
                return -1;
            }
        }
    return 0;
}

/* ------------------------------------------------------------- tcgen05.cp */

/* The source is a matrix of R rows (one per TMEM lane) and 16 or 32 bytes per
 * row, read as a K-major operand of 8-bit elements through the descriptor's
 * canonical layout. Destination lanes (9.7.16.9.2; the multicast lane sets were
 * cross-checked against CUTLASS's SM100_UTCCP_* layouts):
 *   .128x256b / .128x128b   row r -> lane r
 *   .64x128b.warpx2::02_13  rows 0-31 -> warps 0 and 2, rows 32-63 -> warps 1 and 3
 *   .64x128b.warpx2::01_23  rows 0-31 -> warps 0 and 1, rows 32-63 -> warps 2 and 3
 *   .32x128b.warpx4         row r -> lane r of every warp
 * .cta_group::2 (one thread of the pair issues it, like tcgen05.mma): each CTA
 * of the pair (ranks 2p, 2p+1) copies from its own shared memory, at the
 * descriptor's address, into its own Tensor Memory at taddr, as the
 * cta_group::2 MMA reads A and B from each CTA's own shared memory. (The ISA
 * says the copy acts on the Tensor Memory of both CTAs of the pair; that each
 * reads its own shared memory is the reading that keeps copy + A-from-TMEM
 * MMA equal to the A-from-shared-memory MMA, which test_tc checks.) */
static int cp_one(const TcMem *m, const TcCp *op, int cta, TcMode mode);

int tc_tmem_cp(const TcMem *m, const TcCp *op, TcMode mode)
{
    const char *what = "tcgen05.cp";
    if (op->cta_group != 0 && op->cta_group != 1 && op->cta_group != 2)
        return fail(m, "%s: cta_group %d is not 1 or 2", what, op->cta_group);
    if (op->cta_group != 2) return cp_one(m, op, op->cta, mode);
    /* check both before the first write */
    if (mode == TC_EXECUTE && (cp_one(m, op, op->cta & ~1, TC_FOOTPRINT) || cp_one(m, op, op->cta | 1, TC_FOOTPRINT)))
        return -1;
    return cp_one(m, op, op->cta & ~1, mode) || cp_one(m, op, op->cta | 1, mode) ? -1 : 0;
}

static int cp_one(const TcMem *m, const TcCp *op, int cta, TcMode mode)
{
    const char *what = op->cta_group == 2 ? "tcgen05.cp.cta_group::2" : "tcgen05.cp";
    int rows, bytes;
    const char *sn;
    switch (op->shape) {
    case TC_CP_128x256b: rows = 128; bytes = 32; sn = ".128x256b"; break;
    case TC_CP_128x128b: rows = 128; bytes = 16; sn = ".128x128b"; break;
    case TC_CP_64x128b: rows = 64; bytes = 16; sn = ".64x128b"; break;
    case TC_CP_32x128b: rows = 32; bytes = 16; sn = ".32x128b"; break;
    case TC_CP_4x256b:
        return fail(m, "%s.4x256b: not modelled (the ISA gives its lane mapping only as a figure)", what);
    default: return fail(m, "%s: shape %d is not a tcgen05.cp shape", what, (int)op->shape);
    }
    int mc = op->multicast;
    if (op->shape == TC_CP_64x128b && mc != TC_MC_WARPX2_02_13 && mc != TC_MC_WARPX2_01_23)
        return fail(m, "%s.64x128b requires .warpx2::02_13 or .warpx2::01_23", what);
    if (op->shape == TC_CP_32x128b && mc != TC_MC_WARPX4) return fail(m, "%s.32x128b requires .warpx4", what);
    if ((op->shape == TC_CP_128x256b || op->shape == TC_CP_128x128b) && mc != TC_MC_NONE)
        return fail(m, "%s%s takes no multicast qualifier", what, sn);
    uint32_t tl = op->taddr >> 16, tc = op->taddr & 0xffffu;
    if (tl)
        return fail(m, "%s%s: destination address 0x%08x has lane %u; the copy covers all 128 lanes and needs lane 0",
                    what, sn, op->taddr, tl);
    if (tc + (uint32_t)bytes / 4 > TC_TMEM_COLS)
        return fail(m, "%s%s: destination column %u spans %d columns, past column %d", what, sn, tc, bytes / 4,
                    TC_TMEM_COLS - 1);
    Lay L;
    if (umma_decode(m, what, op->s_desc, &L)) return -1;
    if (L.atom32) return fail(m, "%s%s: 128B swizzling with 32B atomicity has no K-major layout (Table 53)", what, sn);

    uint8_t src[128][32];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < bytes / 16; c++)
            if (m->smem_read(m->u, cta, lay_addr(&L, 0, 1, (uint32_t)r, (uint32_t)(16 * c)), src[r] + 16 * c, 16))
                return -1;
    for (int r = 0; r < rows; r++) {
        uint32_t lanes[4];
        int nl = 0;
        if (rows == 128) {
            lanes[nl++] = (uint32_t)r;
        } else if (rows == 64) {
            int h = r / 32;
            int w0 = mc == TC_MC_WARPX2_02_13 ? h : 2 * h, w1 = mc == TC_MC_WARPX2_02_13 ? h + 2 : 2 * h + 1;
            lanes[nl++] = (uint32_t)(32 * w0 + r % 32);
            lanes[nl++] = (uint32_t)(32 * w1 + r % 32);
        } else {
            for (int w = 0; w < 4; w++) lanes[nl++] = (uint32_t)(32 * w + r);
        }
        for (int l = 0; l < nl; l++)
            for (int c = 0; c < bytes / 4; c++) {
                const uint8_t *p = src[r] + 4 * c;
                uint32_t cell = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
                if (mode == TC_FOOTPRINT) {
                    if (m->tmem_footprint_write &&
                        m->tmem_footprint_write(m->u, cta, lanes[l], tc + (uint32_t)c))
                        return -1;
                } else if (m->tmem_write(m->u, cta, lanes[l], tc + (uint32_t)c, cell)) {
                    return -1;
                }
            }
    }
    return 0;
}

/* ------------------------------------------------------------------ wgmma */

#define WG "wgmma.mma_async"

int tc_wgmma_d_regs(const TcWgmma *op)
{
    if (op->n < 8 || op->n > 256 || op->n % 8) return -1;
    return op->dtype == TC_F16 ? op->n / 4 : op->n / 2;
}

int tc_wgmma_a_regs(const TcWgmma *op)
{
    (void)op;
    return 4; /* four .b32 / .f16x2 registers for every dense A type (9.7.15.5.1.1) */
}

static int wgmma_check(const TcMem *m, const TcWgmma *op)
{
    int k;
    switch (op->atype) {
    case TC_F16: case TC_BF16: k = 16; break;
    case TC_TF32: k = 8; break;
    case TC_E4M3: case TC_E5M2: k = 32; break;
    default: return fail(m, WG ": A type %s is not modelled (f16, bf16, tf32, e4m3, e5m2)", type_name(op->atype));
    }
    int fp8 = op->atype == TC_E4M3 || op->atype == TC_E5M2;
    if (fp8 ? (op->btype != TC_E4M3 && op->btype != TC_E5M2) : op->btype != op->atype)
        return fail(m, WG ": .atype %s with .btype %s is not a valid combination", type_name(op->atype), type_name(op->btype));
    if (op->m != 64) return fail(m, WG ": shape m%dn%dk%d: M must be 64", op->m, op->n, op->k);
    if (op->k != k)
        return fail(m, WG ".m%dn%dk%d: K must be %d for .%s inputs", op->m, op->n, op->k, k, type_name(op->atype));
    if (op->n < 8 || op->n > 256 || op->n % 8)
        return fail(m, WG ".m64n%dk%d: N must be a multiple of 8 in 8..256", op->n, op->k);
    int d_ok = op->dtype == TC_F32 || (op->dtype == TC_F16 && (op->atype == TC_F16 || fp8));
    if (!d_ok)
        return fail(m, WG ".m64n%dk%d: .dtype %s is not valid with .%s inputs", op->n, op->k, type_name(op->dtype),
                    type_name(op->atype));
    if ((op->imm_scale_a != 1 && op->imm_scale_a != -1) || (op->imm_scale_b != 1 && op->imm_scale_b != -1))
        return fail(m, WG ": imm-scale-a %d / imm-scale-b %d must be 1 or -1", op->imm_scale_a, op->imm_scale_b);
    if ((op->tnsp_a & ~1) || (op->tnsp_b & ~1))
        return fail(m, WG ": imm-trans-a %d / imm-trans-b %d must be 0 or 1", op->tnsp_a, op->tnsp_b);
    if ((op->tnsp_a || op->tnsp_b) && op->atype != TC_F16 && op->atype != TC_BF16)
        return fail(m, WG ": transpose is supported only for .f16/.bf16 inputs, not .%s", type_name(op->atype));
    if (op->a_is_reg && op->tnsp_a)
        return fail(m, WG ": imm-trans-a with A in registers; transpose applies to shared-memory matrices only");
    return 0;
}

/* D fragment (Figures 149/151/153; cross-checked with CUTLASS CLayout_64xN):
 * element e of thread t (warp w = t/32, g = (t%32)/4, q = t%4):
 *   row = 16w + g + 8*((e/2)%2), col = 8*(e/4) + 2q + e%2
 * f32: register e; f16: register e/2, half e%2 (low half first). */
static void wg_d_map(int t, int e, int *row, int *col)
{
    int w = t / 32, g = (t % 32) / 4, q = t % 4;
    *row = 16 * w + g + 8 * ((e / 2) % 2);
    *col = 8 * (e / 4) + 2 * q + e % 2;
}

/* A fragment (Figures 148/150/152; cross-checked with CUTLASS ALayout_64x*):
 *   16-bit: a0..a7, row = 16w + g + 8*((e/2)%2), col = 8*(e/4) + 2q + e%2
 *   tf32:   a0..a3, row = 16w + g + 8*(e%2),     col = 4*(e/2) + q
 *   8-bit:  a0..a15, row = 16w + g + 8*((e/4)%2), col = 16*(e/8) + 4q + e%4
 * element e sits in register e/(4/bytes) at byte offset (e%(4/bytes))*bytes. */
static void wg_a_map(int es, int t, int e, int *row, int *col)
{
    int w = t / 32, g = (t % 32) / 4, q = t % 4;
    if (es == 2) {
        *row = 16 * w + g + 8 * ((e / 2) % 2);
        *col = 8 * (e / 4) + 2 * q + e % 2;
    } else if (es == 4) {
        *row = 16 * w + g + 8 * (e % 2);
        *col = 4 * (e / 2) + q;
    } else {
        *row = 16 * w + g + 8 * ((e / 4) % 2);
        *col = 16 * (e / 8) + 4 * q + e % 4;
    }
}

int tc_wgmma(const TcMem *m, const TcWgmma *op, const uint32_t a[128][TC_MAX_REGS], uint32_t d[128][TC_MAX_REGS],
             TcMode mode)
{
    if (wgmma_check(m, op)) return -1;
    int N = op->n, K = op->k, es = type_bytes(op->atype);
    Lay la, lb;
    if (!op->a_is_reg && wgmma_decode(m, WG " A descriptor", op->a_desc, &la)) return -1;
    if (wgmma_decode(m, WG " B descriptor", op->b_desc, &lb)) return -1;
    if (op->tnsp_b && N % (16 / es))
        return fail(m, WG ": N %d is not a multiple of the %d elements of an N-major 16-byte chunk", N, 16 / es);
    float A[64 * 32], B[256 * 32];
    float sa = (float)op->imm_scale_a, sb = (float)op->imm_scale_b;
    if (!op->a_is_reg && read_smem_operand(m, op->cta, &la, op->tnsp_a, op->atype, 64, (uint32_t)K, sa, A, mode))
        return -1;
    if (read_smem_operand(m, op->cta, &lb, op->tnsp_b, op->btype, (uint32_t)N, (uint32_t)K, sb, B, mode)) return -1;
    if (mode == TC_FOOTPRINT) return 0;
    if (op->a_is_reg) {
        int per = 4 / es, ne = 4 * per;
        for (int t = 0; t < 128; t++)
            for (int e = 0; e < ne; e++) {
                int r, c;
                wg_a_map(es, t, e, &r, &c);
                uint32_t reg = a[t][e / per];
                uint8_t b4[4] = {(uint8_t)reg, (uint8_t)(reg >> 8), (uint8_t)(reg >> 16), (uint8_t)(reg >> 24)};
                A[r * K + c] = sa * elem(op->atype, es, b4 + (e % per) * es);
            }
    }
    int f16 = op->dtype == TC_F16;
    for (int t = 0; t < 128; t++)
        for (int e = 0; e < N / 2; e++) {
            int r, c;
            wg_d_map(t, e, &r, &c);
            double s = 0.0;
            if (op->scale_d) {
                uint32_t reg = d[t][f16 ? e / 2 : e];
                s = f16 ? tc_to_float(TC_F16, (e % 2) ? reg >> 16 : reg & 0xffffu) : bits_f32(reg);
            }
            double p = 0.0;
            for (int k = 0; k < K; k++) p += (double)A[r * K + k] * (double)B[c * K + k];
            s += p;
            if (f16) {
                uint32_t h = f64_to_f16(s);
                uint32_t *reg = &d[t][e / 2];
                *reg = (e % 2) ? ((*reg & 0xffffu) | h << 16) : ((*reg & 0xffff0000u) | h);
            } else {
                d[t][e] = f32_bits((float)s);
            }
        }
    return 0;
}

/* -------------------------------------------------------------- describe */

static int put(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int put(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return r < 0 ? -1 : 0;
}

int tc_describe_umma_desc(uint64_t d, char *buf, size_t n)
{
    static const char *swz[8] = {"none",          "128B/32B-atom", "128B",          "invalid(3)",
                                 "64B",           "invalid(5)",    "32B",           "invalid(7)"};
    unsigned reserved = (unsigned)(((d >> 14) & 3u) | ((d >> 30) & 3u) << 2);
    return put(buf, n,
               "umma-desc 0x%016llx: start 0x%05x LBO %u B SBO %u B version %u%s base-offset %u LBO-mode %s fixed53-60 "
               "0x%02x swizzle %s%s",
               (unsigned long long)d, (unsigned)(d & 0x3fffu) << 4, (unsigned)((d >> 16) & 0x3fffu) << 4,
               (unsigned)((d >> 32) & 0x3fffu) << 4, (unsigned)((d >> 46) & 7u),
               ((d >> 46) & 7u) == 1 ? "" : "(must be 1)", (unsigned)((d >> 49) & 7u),
               ((d >> 52) & 1u) ? "absolute" : "relative", (unsigned)((d >> 53) & 0xffu), swz[d >> 61],
               reserved ? " reserved-bits-set" : "");
}

int tc_describe_wgmma_desc(uint64_t d, char *buf, size_t n)
{
    static const char *swz[4] = {"none", "128B", "64B", "32B"};
    uint64_t unused = d & ~(0x3fffull | 0x3fffull << 16 | 0x3fffull << 32 | 7ull << 49 | 3ull << 62);
    return put(buf, n, "wgmma-desc 0x%016llx: start 0x%05x LBO %u B SBO %u B base-offset %u swizzle %s unused-bits 0x%llx",
               (unsigned long long)d, (unsigned)(d & 0x3fffu) << 4, (unsigned)((d >> 16) & 0x3fffu) << 4,
               (unsigned)((d >> 32) & 0x3fffu) << 4, (unsigned)((d >> 49) & 7u), swz[d >> 62],
               (unsigned long long)unused);
}

int tc_describe_idesc(TcKind kind, uint32_t id, char *buf, size_t n)
{
    TcType at, bt;
    char an[16], bn[16];
    unsigned ac = (id >> 7) & 7u, bc = (id >> 10) & 7u, dt = (id >> 4) & 3u;
    if (idesc_type(kind, ac, &at)) snprintf(an, sizeof an, "invalid(%u)", ac); else snprintf(an, sizeof an, "%s", type_name(at));
    if (idesc_type(kind, bc, &bt)) snprintf(bn, sizeof bn, "invalid(%u)", bc); else snprintf(bn, sizeof bn, "%s", type_name(bt));
    const char *dn = dt == 0 ? "f16" : dt == 1 ? "f32" : dt == 2 ? "s32" : "invalid(3)";
    unsigned reserved = (id >> 6 & 1u) | (id >> 23 & 1u) << 1 | (id >> 29 & 1u) << 2;
    return put(buf, n,
               "idesc 0x%08x %s: sparse-sel %u sparse %u saturate %u D %s A %s B %s negA %u negB %u A %s B %s N %u M %u "
               "max-shift %u%s",
               id, kind_name(kind), id & 3u, (id >> 2) & 1u, (id >> 3) & 1u, dn, an, bn, (id >> 13) & 1u,
               (id >> 14) & 1u, ((id >> 15) & 1u) ? "MN-major" : "K-major", ((id >> 16) & 1u) ? "MN-major" : "K-major",
               ((id >> 17) & 0x3fu) << 3, ((id >> 24) & 0x1fu) << 4, id >> 30, reserved ? " reserved-bits-set" : "");
}
