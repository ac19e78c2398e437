/* alu.c - the scalar instructions of the simulator: integer and float
 * arithmetic, comparisons, selects, conversions and moves, with the PTX ISA's
 * rounding, flush-to-zero, NaN and shift rules.
 *
 * Approximate instructions (ex2, lg2, rcp .approx) use the C library's correctly
 * rounded functions: within the ISA's stated error bounds, so a kernel that is
 * right under the ISA's contract is right here.
 */
#include <math.h>
#include <string.h>

#include "core.h"

static float f32(uint64_t v) { float f; uint32_t u = (uint32_t)v; memcpy(&f, &u, 4); return f; }
static uint64_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static double f64(uint64_t v) { double d; memcpy(&d, &v, 8); return d; }
static uint64_t bits64(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }

static float ftz(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }

static int is_signed(int t) { return t == T_S8 || t == T_S16 || t == T_S32 || t == T_S64; }
static int is_float(int t) { return t == T_F32 || t == T_F64 || t == T_F16 || t == T_BF16; }
static int is_half16(int t) { return t == T_F16 || t == T_BF16 || t == T_F16X2 || t == T_BF16X2; }
static int width(int t)
{
    switch (t) {
    case T_PRED: return 1;
    case T_B8: case T_U8: case T_S8: return 8;
    case T_B16: case T_U16: case T_S16: case T_F16: case T_BF16: return 16;
    case T_B64: case T_U64: case T_S64: case T_F64: return 64;
    default: return 32;
    }
}

static uint64_t trunc_to(uint64_t v, int t)
{
    int w = width(t);
    return w >= 64 ? v : w == 1 ? (v & 1) : (v & ((1ull << w) - 1));
}

static int64_t sext(uint64_t v, int t)
{
    int w = width(t);
    if (w >= 64) return (int64_t)v;
    uint64_t m = 1ull << (w - 1);
    v &= (1ull << w) - 1;
    return (int64_t)((v ^ m) - m);
}

uint64_t alu_val(Sim *s, Thread *t, const Operand *o)
{
    switch (o->kind) {
    case O_REG: return o->neg ? !rreg(s, t, o->reg) : rreg(s, t, o->reg);
    case O_IMM: return (uint64_t)o->imm;
    case O_SPECIAL: return sim_special(s, t, o->reg);
    case O_SYM: /* the dynamic shared variable: a shared::cta address, which carries the CTA's rank */
        return o->reg < 0 ? (uint64_t)t->cta << CLUSTER_SHIFT | s->cta[t->cta].smem_base : (uint64_t)o->imm;
    default:
        sim_hazard(s, SIM_UNSUPPORTED, "operand form not valid here");
        return 0;
    }
}

void alu_set(Sim *s, Thread *t, const Operand *o, uint64_t v)
{
    if (o->kind == O_SINK) return;
    if (o->kind != O_REG) { sim_hazard(s, SIM_UNSUPPORTED, "destination is not a register"); return; }
    wreg(s, t, o->reg, v);
}

/* --------------------------------------------------------- conversions */
/* float -> bf16 / f16 bits, round to nearest even (satfinite clamps to max finite) */
static uint32_t to_bf16(float f)
{
    uint32_t u = (uint32_t)bits(f);
    if (isnan(f)) return 0x7fff;
    u += 0x7fff + ((u >> 16) & 1);
    return u >> 16;
}

static uint32_t to_f16(float f, int satfinite)
{
    uint32_t u = (uint32_t)bits(f), sign = (u >> 16) & 0x8000;
    if (isnan(f)) return 0x7fff;
    float a = fabsf(f);
    if (a >= 65520.0f) return sign | (satfinite ? 0x7bff : 0x7c00);
    if (a < 6.103515625e-05f) { /* subnormal: units of 2^-24 */
        float q = nearbyintf(a * 16777216.0f);
        return sign | (uint32_t)q;
    }
    int e;
    float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    float q = nearbyintf(m * 2048.0f); /* 11 significant bits */
    if (q >= 2048.0f) q /= 2, e++;
    uint32_t exp = (uint32_t)(e - 1 + 15);
    return sign | (exp << 10) | ((uint32_t)q & 0x3ff);
}

/* e4m3 (OCP FN: bias 7, max 448, no infinities, NaN 0x7f) and e5m2 */
static uint32_t to_f8(float f, int e5m2, int satfinite)
{
    uint32_t sign = signbit(f) ? 0x80 : 0;
    if (isnan(f)) return 0x7f;
    float a = fabsf(f);
    int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
    float maxv = e5m2 ? 57344.0f : 448.0f;
    if (isinf(a) || a > maxv) {
        if (satfinite || !e5m2) return sign | (e5m2 ? 0x7b : (satfinite ? 0x7e : 0x7f));
        return sign | 0x7c;
    }
    float minnorm = ldexpf(1.0f, 1 - bias);
    uint32_t r;
    if (a < minnorm) {
        float q = nearbyintf(a / ldexpf(1.0f, 1 - bias - mbits));
        r = (uint32_t)q; /* may round up into the smallest normal: same encoding */
    } else {
        int e;
        float m = frexpf(a, &e);
        float q = nearbyintf(m * (float)(1 << (mbits + 1)));
        if (q >= (float)(1 << (mbits + 1))) q /= 2, e++;
        uint32_t exp = (uint32_t)(e - 1 + bias);
        r = (exp << mbits) | ((uint32_t)q & ((1u << mbits) - 1));
        if (!e5m2 && r > 0x7e) r = 0x7e;
    }
    return sign | r;
}

static float round_float_int(float x, uint32_t mods)
{
    if (mods & M_RMI) return floorf(x);
    if (mods & M_RPI) return ceilf(x);
    if (mods & M_RZI) return truncf(x);
    return nearbyintf(x);
}

static int64_t float_to_int(double x, int t, uint32_t mods)
{
    if (isnan(x)) return 0;
    double r = (mods & M_RMI) ? floor(x) : (mods & M_RPI) ? ceil(x) : (mods & M_RZI) ? trunc(x) : nearbyint(x);
    int w = width(t);
    if (is_signed(t)) {
        double lo = -ldexp(1, w - 1), hi = ldexp(1, w - 1) - 1;
        return r < lo ? (int64_t)lo : r > hi ? (int64_t)hi : (int64_t)r;
    }
    double hi = ldexp(1, w) - 1;
    return r < 0 ? 0 : r > hi ? (int64_t)(uint64_t)hi : (int64_t)(uint64_t)r;
}

static float half_to_float(uint32_t h)
{
    uint32_t s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    float f = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), (int)e - 25);
    return s ? -f : f;
}

static double src_as_double(uint64_t v, int t)
{
    switch (t) {
    case T_F32: return f32(v);
    case T_F64: return f64(v);
    case T_F16: return half_to_float((uint32_t)v & 0xffff);
    case T_BF16: return f32((v & 0xffff) << 16);
    default: return is_signed(t) ? (double)sext(v, t) : (double)trunc_to(v, t);
    }
}

/* --------------------------------------------------------- 16-bit floats */
/* x rounded to nearest-even f16 (bf 0: 5 exponent bits, 10 mantissa bits) or bf16 (bf 1: 8, 7),
 * once: err is the error of x against the exact result (0 when x is exact) and breaks a tie that
 * x alone would send to even. NaN gives the canonical 0x7fff; overflow gives infinity, or the
 * largest finite value with satfinite. */
static uint32_t round16(double x, double err, int bf, int satfinite)
{
    const int mbits = bf ? 7 : 10, bias = bf ? 127 : 15, emax_field = bf ? 255 : 31;
    if (isnan(x)) return 0x7fff;
    uint32_t sign = signbit(x) ? 0x8000u : 0u;
    double a = fabs(x);
    uint32_t maxfin = (uint32_t)((emax_field - 1) << mbits) | ((1u << mbits) - 1);
    if (isinf(a)) return sign | (satfinite ? maxfin : (uint32_t)emax_field << mbits);
    if (a == 0) return sign;
    int dir = err == 0 ? 0 : ((err > 0) == (x > 0) ? 1 : -1); /* the exact magnitude is above / below a */
    int e;
    (void)frexp(a, &e);
    int exp = e - 1 < 1 - bias ? 1 - bias : e - 1; /* subnormals share the smallest exponent */
    double q = ldexp(a, mbits - exp), r = floor(q), frac = q - r;
    if (frac > 0.5 || (frac == 0.5 && (dir > 0 || (dir == 0 && fmod(r, 2.0) != 0)))) r += 1;
    if (r >= ldexp(1, mbits + 1)) r /= 2, exp++;
    uint32_t bits = r < ldexp(1, mbits) ? (uint32_t)r /* subnormal (or zero) */
                                         : (uint32_t)(exp + bias) << mbits | ((uint32_t)r - (1u << mbits));
    if (exp + bias >= emax_field) return sign | (satfinite ? maxfin : (uint32_t)emax_field << mbits);
    return sign | bits;
}

static double h2d(uint32_t h, int bf) { return bf ? f32((uint64_t)(h & 0xffff) << 16) : half_to_float(h & 0xffff); }

/* the rounding error of a + b = s (Knuth's two-sum) */
static double sum_err(double a, double b, double s)
{
    double bb = s - a;
    return (a - (s - bb)) + (b - bb);
}

/* One element of add/sub/mul/fma/min/max/neg/abs/ex2 on f16 or bf16 (bf): computed exactly in double
 * (products of two 16-bit floats are exact), rounded once. .ftz flushes subnormal inputs and results, .sat clamps to [0, 1], .relu clamps negatives to 0; .NaN makes min/max
 * return NaN when an input is NaN (else a NaN input loses to the other). */
static uint32_t half_op(const Ins *in, int bf, uint32_t ha, uint32_t hb, uint32_t hc)
{
    ha &= 0xffff, hb &= 0xffff, hc &= 0xffff;
    if (in->op == OP_NEG) return ha ^ 0x8000u;
    if (in->op == OP_ABS) return ha & 0x7fffu;
    int fz = !!(in->mods & M_FTZ);
    double x = h2d(ha, bf), y = h2d(hb, bf), z = h2d(hc, bf), r, err = 0, tiny = bf ? 0x1p-126 : 0x1p-14;
    if (fz) {
        if (fabs(x) < tiny) x = copysign(0.0, x);
        if (fabs(y) < tiny) y = copysign(0.0, y);
        if (fabs(z) < tiny) z = copysign(0.0, z);
    }
    switch (in->op) {
    case OP_EX2: r = exp2(x); break; /* .approx: the correctly rounded value is within its bound */
    case OP_MIN: case OP_MAX: {
        if (isnan(x) || isnan(y)) {
            if ((in->mods & M_NAN) || (isnan(x) && isnan(y))) return 0x7fff;
            r = isnan(x) ? y : x;
        } else if (x == y) {
            r = (in->op == OP_MIN) == !!signbit(x) ? x : y;
        } else {
            r = (in->op == OP_MIN) == (x < y) ? x : y;
        }
        if ((in->mods & M_RELU) && r < 0) r = 0;
        return round16(r, 0, bf, 0); /* one of the inputs (or 0): exact */
    }
    case OP_ADD: r = x + y; err = sum_err(x, y, r); break;
    case OP_SUB: r = x - y; err = sum_err(x, -y, r); break;
    case OP_MUL: r = x * y; break;
    default: { /* fma, mad */
        double p = x * y;
        r = p + z;
        err = sum_err(p, z, r);
    }
    }
    if (in->mods & M_RELU) {
        if (isnan(r)) return 0x7fff;
        if (r < 0 || (r == 0 && err < 0)) r = 0, err = 0;
    }
    if (in->mods & M_SAT) {
        if (isnan(r)) return 0;
        if (r < 0 || (r == 0 && err < 0)) r = 0, err = 0;
        if (r > 1 || (r == 1 && err > 0)) r = 1, err = 0;
    }
    uint32_t h = round16(r, err, bf, 0);
    if (fz && (h & (bf ? 0x7f80u : 0x7c00u)) == 0) h &= 0x8000u;
    return h;
}

/* f16/bf16 arithmetic, scalar (.f16, .bf16) or packed (.f16x2, .bf16x2: each half alone). */
static void exec_half(Sim *s, Thread *t, const Ins *in)
{
    const Operand *o = in->ops;
    int bf = in->type == T_BF16 || in->type == T_BF16X2, pairs = in->type == T_F16X2 || in->type == T_BF16X2;
    int nsrc = in->op == OP_NEG || in->op == OP_ABS || in->op == OP_EX2 ? 1 : in->op == OP_FMA || in->op == OP_MAD ? 3 : 2;
    uint64_t a = alu_val(s, t, &o[1]), b = nsrc > 1 ? alu_val(s, t, &o[2]) : 0, c = nsrc > 2 ? alu_val(s, t, &o[3]) : 0;
    uint32_t r = half_op(in, bf, (uint32_t)a, (uint32_t)b, (uint32_t)c);
    if (pairs) r |= half_op(in, bf, (uint32_t)a >> 16, (uint32_t)b >> 16, (uint32_t)c >> 16) << 16;
    alu_set(s, t, &o[0], r);
}

/* PTX 'prmt.b32{.mode} d, a, b, c': byte i of d is byte sel(i) of {b, a} (a bytes 0-3, b 4-7).
 * The default mode reads a 4-bit selector per byte from c (bit 3: replicate the byte's sign);
 * the others derive every selector from c[1:0] = s: .f4e s+i, .b4e s-i, .rc8 s, .ecl max(i, s),
 * .ecr min(i, s), .rc16 2*(s%2) + i%2 (each modulo 8). */
static uint32_t prmt(uint32_t a, uint32_t b, uint32_t c, int mode)
{
    uint64_t x = (uint64_t)b << 32 | a;
    uint32_t d = 0, s = c & 3;
    for (uint32_t i = 0; i < 4; i++) {
        uint32_t sel, rep = 0;
        switch (mode) {
        case 0: sel = (c >> (4 * i)) & 7, rep = (c >> (4 * i + 3)) & 1; break;
        case 1: sel = (s + i) & 7; break;
        case 2: sel = (s - i) & 7; break;
        case 3: sel = s; break;
        case 4: sel = i > s ? i : s; break;
        case 5: sel = i < s ? i : s; break;
        default: sel = 2 * (s & 1) + (i & 1); break;
        }
        uint32_t byte = (uint32_t)(x >> (8 * sel)) & 0xff;
        if (rep) byte = (byte & 0x80) ? 0xff : 0;
        d |= byte << (8 * i);
    }
    return d;
}

/* PTX 'lop3.b32 d, a, b, c, immLut': bit k of d is bit (a_k*4 + b_k*2 + c_k) of immLut. */
static uint32_t lop3(uint32_t a, uint32_t b, uint32_t c, uint32_t lut)
{
    uint32_t d = 0;
    for (int k = 0; k < 32; k++) {
        uint32_t idx = ((a >> k) & 1) << 2 | ((b >> k) & 1) << 1 | ((c >> k) & 1);
        d |= ((lut >> idx) & 1) << k;
    }
    return d;
}

/* an fp8 pair (low byte first) -> f16x2: exact; NaN gives the canonical 0x7fff; .relu zeroes
 * negatives */
static uint32_t f8x2_to_f16x2(uint32_t v, int e5m2, int relu)
{
    uint32_t r = 0;
    for (int i = 0; i < 2; i++) {
        float x = tc_to_float(e5m2 ? TC_E5M2 : TC_E4M3, (v >> (8 * i)) & 0xff);
        if (relu && x < 0) x = 0;
        r |= (isnan(x) ? 0x7fffu : to_f16(x, 0)) << (16 * i);
    }
    return r;
}

static void exec_cvt(Sim *s, Thread *t, const Ins *in)
{
    int dt = in->type, st = in->type2;
    const Operand *o = in->ops;
    if (dt == T_F16X2 && (st == T_E4M3X2 || st == T_E5M2X2)) { /* cvt.rn{.relu}.f16x2.e4m3x2 d, a16 */
        alu_set(s, t, &o[0], f8x2_to_f16x2((uint32_t)alu_val(s, t, &o[1]), st == T_E5M2X2, !!(in->mods & M_RELU)));
        return;
    }
    if ((dt == T_E4M3X2 || dt == T_E5M2X2) && st == T_F16X2) { /* cvt.rn.satfinite{.relu}.e4m3x2.f16x2 d16, a */
        uint32_t v = (uint32_t)alu_val(s, t, &o[1]), r = 0;
        for (int i = 0; i < 2; i++) {
            float x = half_to_float((v >> (16 * i)) & 0xffff);
            if ((in->mods & M_RELU) && x < 0) x = 0;
            r |= to_f8(x, dt == T_E5M2X2, !!(in->mods & M_SATFINITE)) << (8 * i);
        }
        alu_set(s, t, &o[0], r);
        return;
    }
    if (dt == T_BF16X2 || dt == T_F16X2 || dt == T_E4M3X2 || dt == T_E5M2X2) {
        /* d = {hi: a, lo: b} */
        float a = f32(alu_val(s, t, &o[1])), b = f32(alu_val(s, t, &o[2]));
        if (in->mods & M_RELU) a = a < 0 ? 0 : a, b = b < 0 ? 0 : b;
        int sat = !!(in->mods & M_SATFINITE);
        uint64_t r;
        if (dt == T_BF16X2) r = (uint64_t)round16(a, 0, 1, sat) << 16 | round16(b, 0, 1, sat);
        else if (dt == T_F16X2) r = (uint64_t)to_f16(a, sat) << 16 | to_f16(b, sat);
        else r = (uint64_t)to_f8(a, dt == T_E5M2X2, sat) << 8 | to_f8(b, dt == T_E5M2X2, sat);
        alu_set(s, t, &o[0], r);
        return;
    }
    uint64_t v = alu_val(s, t, &o[1]);
    uint64_t r;
    if (is_float(dt)) {
        double x = src_as_double(v, st);
        if (dt == T_F32) {
            float f = (float)x;
            if (is_float(st) && (in->mods & (M_RNI | M_RZI | M_RMI | M_RPI))) f = round_float_int(f, in->mods);
            if (in->mods & M_FTZ) f = ftz(f);
            if (in->mods & M_SAT) f = isnan(f) ? 0.0f : f < 0 ? 0.0f : f > 1 ? 1.0f : f;
            r = bits(f);
        } else if (dt == T_F64) {
            r = bits64(x);
        } else if (dt == T_BF16) {
            r = to_bf16((float)x);
        } else {
            r = to_f16((float)x, 0);
        }
    } else if (is_float(st)) {
        r = (uint64_t)float_to_int(src_as_double(v, st), dt, in->mods);
    } else {
        r = is_signed(st) ? (uint64_t)sext(v, st) : trunc_to(v, st);
        if (in->mods & M_SAT) {
            int64_t x = is_signed(st) ? sext(v, st) : (int64_t)trunc_to(v, st);
            int w = width(dt);
            int64_t lo = is_signed(dt) ? -(1ll << (w - 1)) : 0;
            int64_t hi = is_signed(dt) ? (1ll << (w - 1)) - 1 : (w >= 64 ? INT64_MAX : (1ll << w) - 1);
            r = (uint64_t)(x < lo ? lo : x > hi ? hi : x);
        }
    }
    alu_set(s, t, &o[0], trunc_to(r, dt));
}

/* --------------------------------------------------------- compare */
static int compare(int cmp, int ty, uint64_t a, uint64_t b)
{
    if (ty == T_F32 || ty == T_F64) {
        double x = ty == T_F32 ? f32(a) : f64(a), y = ty == T_F32 ? f32(b) : f64(b);
        int un = isnan(x) || isnan(y);
        switch (cmp) {
        case CMP_EQ: return !un && x == y;
        case CMP_NE: return !un && x != y;
        case CMP_LT: return !un && x < y;
        case CMP_LE: return !un && x <= y;
        case CMP_GT: return !un && x > y;
        case CMP_GE: return !un && x >= y;
        case CMP_EQU: return un || x == y;
        case CMP_NEU: return un || x != y;
        case CMP_LTU: return un || x < y;
        case CMP_LEU: return un || x <= y;
        case CMP_GTU: return un || x > y;
        case CMP_GEU: return un || x >= y;
        case CMP_NUM: return !un;
        case CMP_NAN: return un;
        default: return 0;
        }
    }
    if (is_signed(ty)) {
        int64_t x = sext(a, ty), y = sext(b, ty);
        switch (cmp) {
        case CMP_EQ: return x == y;
        case CMP_NE: return x != y;
        case CMP_LT: return x < y;
        case CMP_LE: return x <= y;
        case CMP_GT: return x > y;
        case CMP_GE: return x >= y;
        default: return 0;
        }
    }
    uint64_t x = trunc_to(a, ty), y = trunc_to(b, ty);
    switch (cmp) {
    case CMP_EQ: return x == y;
    case CMP_NE: return x != y;
    case CMP_LT: case CMP_LO: return x < y;
    case CMP_LE: case CMP_LS: return x <= y;
    case CMP_GT: case CMP_HI: return x > y;
    case CMP_GE: case CMP_HS: return x >= y;
    default: return 0;
    }
}

/* --------------------------------------------------------- arithmetic */
static float fbin(int op, float a, float b, uint32_t mods)
{
    if ((op == OP_MIN || op == OP_MAX) && (mods & M_NAN) && (isnan(a) || isnan(b))) return NAN;
    switch (op) {
    case OP_ADD: return a + b;
    case OP_SUB: return a - b;
    case OP_MUL: return a * b;
    case OP_DIV: return a / b;
    case OP_MIN: return isnan(a) ? b : isnan(b) ? a : (a < b || (a == b && signbit(a))) ? a : b;
    case OP_MAX: return isnan(a) ? b : isnan(b) ? a : (a > b || (a == b && !signbit(a))) ? a : b;
    default: return NAN;
    }
}

static void exec_float(Sim *s, Thread *t, const Ins *in)
{
    const Operand *o = in->ops;
    int fz = !!(in->mods & M_FTZ);
    float a = f32(alu_val(s, t, &o[1])), r;
    if (fz) a = ftz(a);
    switch (in->op) {
    case OP_NEG: alu_set(s, t, &o[0], (bits(a) ^ 0x80000000u)); return;
    case OP_ABS: alu_set(s, t, &o[0], (bits(a) & 0x7fffffffu)); return;
    case OP_EX2: r = exp2f(a); break;
    case OP_LG2: r = log2f(a); break;
    case OP_RCP: r = 1.0f / a; break;
    case OP_SQRT: r = sqrtf(a); break;
    case OP_RSQRT: r = 1.0f / sqrtf(a); break;
    case OP_TANH: r = tanhf(a); break; /* tanh.approx.f32 (PTX ISA 7.0, sm_75): max relative error 2^-11 */
    case OP_FMA: case OP_MAD: {
        float b = f32(alu_val(s, t, &o[2])), c = f32(alu_val(s, t, &o[3]));
        if (fz) b = ftz(b), c = ftz(c);
        r = fmaf(a, b, c);
        break;
    }
    default: {
        float b = f32(alu_val(s, t, &o[2]));
        if (fz) b = ftz(b);
        r = fbin(in->op, a, b, in->mods);
        if ((in->op == OP_MIN || in->op == OP_MAX) && in->nops == 4) { /* the three-input form (sm_100) */
            float c = f32(alu_val(s, t, &o[3]));
            r = fbin(in->op, r, fz ? ftz(c) : c, in->mods);
        }
    }
    }
    if (fz) r = ftz(r);
    if (in->mods & M_SAT) r = isnan(r) ? 0.0f : r < 0 ? 0.0f : r > 1 ? 1.0f : r;
    alu_set(s, t, &o[0], bits(r));
}

/* add/sub/mul/fma .f32x2 (sm_100a): each 32-bit half of the 64-bit registers alone, element 0 in
 * the low half, with the rounding, .ftz and .sat rules of the .f32 form. */
static void exec_f32x2(Sim *s, Thread *t, const Ins *in)
{
    const Operand *o = in->ops;
    int fz = !!(in->mods & M_FTZ), n = in->op == OP_FMA || in->op == OP_MAD ? 3 : 2;
    uint64_t v[3] = {0, 0, 0}, d = 0;
    for (int i = 0; i < n; i++) v[i] = alu_val(s, t, &o[1 + i]);
    for (int h = 0; h < 2; h++) {
        float x[3];
        for (int i = 0; i < 3; i++) x[i] = fz ? ftz(f32(v[i] >> (32 * h))) : f32(v[i] >> (32 * h));
        float r = in->op == OP_FMA || in->op == OP_MAD ? fmaf(x[0], x[1], x[2]) : fbin(in->op, x[0], x[1], in->mods);
        if (fz) r = ftz(r);
        if (in->mods & M_SAT) r = isnan(r) ? 0.0f : r < 0 ? 0.0f : r > 1 ? 1.0f : r;
        d |= bits(r) << (32 * h);
    }
    alu_set(s, t, &o[0], d);
}

static int exec_int(Sim *s, Thread *t, const Ins *in)
{
    const Operand *o = in->ops;
    int ty = in->type, w = width(ty), sg = is_signed(ty);
    uint64_t a = alu_val(s, t, &o[1]);
    uint64_t b = in->nops > 2 ? alu_val(s, t, &o[2]) : 0;
    uint64_t r;
    int64_t sa = sext(a, ty), sb = sext(b, ty);
    uint64_t ua = trunc_to(a, ty), ub = trunc_to(b, ty);
    int dty = ty;
    switch (in->op) {
    case OP_ADD: r = ua + ub; break;
    case OP_SUB: r = ua - ub; break;
    case OP_MUL: case OP_MAD:
        if (in->mods & M_WIDE) {
            r = sg ? (uint64_t)(sa * sb) : ua * ub;
            dty = sg ? T_S64 : T_U64;
        } else if (in->mods & M_HI) {
            if (w == 64) {
                unsigned __int128 p = sg ? (unsigned __int128)((__int128)sa * sb) : (unsigned __int128)ua * ub;
                r = (uint64_t)(p >> 64);
            } else {
                r = (sg ? (uint64_t)(sa * sb) : ua * ub) >> w;
            }
        } else {
            r = ua * ub;
        }
        if (in->op == OP_MAD) r += trunc_to(alu_val(s, t, &o[3]), dty);
        break;
    case OP_DIV: case OP_REM:
        if (!ub) { sim_hazard(s, SIM_FAULT, "integer division by zero"); return 1; }
        if (sg) r = (uint64_t)(in->op == OP_DIV ? sa / sb : sa % sb);
        else r = in->op == OP_DIV ? ua / ub : ua % ub;
        break;
    case OP_MIN: r = sg ? (uint64_t)(sa < sb ? sa : sb) : (ua < ub ? ua : ub); break;
    case OP_MAX: r = sg ? (uint64_t)(sa > sb ? sa : sb) : (ua > ub ? ua : ub); break;
    case OP_NEG: r = (uint64_t)-sa; break;
    case OP_ABS: r = (uint64_t)(sa < 0 ? -sa : sa); break;
    case OP_NOT: r = ty == T_PRED ? !a : ~ua; break;
    case OP_AND: r = ua & ub; break;
    case OP_OR: r = ua | ub; break;
    case OP_XOR: r = ua ^ ub; break;
    case OP_SHL: r = (uint32_t)b >= (uint32_t)w ? 0 : ua << (uint32_t)b; break;
    case OP_SHR:
        if (sg) r = (uint64_t)((uint32_t)b >= (uint32_t)w ? (sa < 0 ? -1 : 0) : sa >> (uint32_t)b);
        else r = (uint32_t)b >= (uint32_t)w ? 0 : ua >> (uint32_t)b;
        break;
    case OP_POPC: r = (uint64_t)__builtin_popcountll(ua); dty = T_U32; break;
    case OP_CLZ: r = ua ? (uint64_t)(__builtin_clzll(ua) - (64 - w)) : (uint64_t)w; dty = T_U32; break;
    case OP_BFE: {
        uint32_t pos = (uint32_t)b & 0xff, len = (uint32_t)alu_val(s, t, &o[3]) & 0xff;
        uint64_t field = pos >= (uint32_t)w ? 0 : ua >> pos;
        if (len < (uint32_t)w) field &= (1ull << len) - 1;
        if (sg && len && len < (uint32_t)w && pos + len <= (uint32_t)w && ((field >> (len - 1)) & 1))
            field |= ~0ull << len;
        r = field;
        break;
    }
    default: return 0;
    }
    alu_set(s, t, &o[0], trunc_to(r, dty));
    return 1;
}

/* bfind (.shiftamt), brev, bfi, shf.{l,r}.{wrap,clamp} */
static int exec_bits(Sim *s, Thread *t, const Ins *in)
{
    const Operand *o = in->ops;
    int w = width(in->type);
    uint64_t a = trunc_to(alu_val(s, t, &o[1]), in->type), r;
    switch (in->op) {
    case OP_BFIND: { /* the most significant bit that differs from the sign (signed) or is set; ~0 if none */
        uint64_t v = is_signed(in->type) && (a >> (w - 1)) & 1 ? trunc_to(~a, in->type) : a;
        if (!v) { r = 0xffffffffu; break; }
        int pos = 63 - __builtin_clzll(v);
        r = (uint64_t)(in->c ? w - 1 - pos : pos);
        break;
    }
    case OP_BREV:
        r = 0;
        for (int i = 0; i < w; i++) r |= ((a >> i) & 1) << (w - 1 - i);
        break;
    case OP_BFI: { /* bfi d, f, b, pos, len: b with bits [pos, pos + len) taken from f */
        uint64_t b = trunc_to(alu_val(s, t, &o[2]), in->type);
        uint32_t pos = (uint32_t)alu_val(s, t, &o[3]) & 0xff, len = (uint32_t)alu_val(s, t, &o[4]) & 0xff;
        r = b;
        for (uint32_t i = 0; i < len && pos + i < (uint32_t)w; i++)
            r = (r & ~(1ull << (pos + i))) | ((a >> i) & 1) << (pos + i);
        break;
    }
    default: { /* shf: the 64-bit {b, a} (b high) shifted by c (wrap: c % 32, clamp: min(c, 32)); the high
                * word for .l, the low word for .r */
        uint64_t b = (uint32_t)alu_val(s, t, &o[2]), both = b << 32 | (uint32_t)a;
        uint32_t c = (uint32_t)alu_val(s, t, &o[3]), n = in->c ? (c > 32 ? 32 : c) : c & 31;
        r = in->a ? (uint32_t)(both >> n) : (uint32_t)((both << n) >> 32);
        alu_set(s, t, &o[0], r);
        return 1;
    }
    }
    alu_set(s, t, &o[0], in->op == OP_BFIND ? (uint32_t)r : trunc_to(r, in->type));
    return 1;
}

static void exec_setp(Sim *s, Thread *t, const Ins *in)
{
    const Operand *o = in->ops;
    int r = compare(in->cmp, in->type, alu_val(s, t, &o[o[0].kind == O_PAIR ? 1 : 1]), alu_val(s, t, &o[2]));
    int p_first = o[0].kind == O_PAIR;
    const Operand *pd = p_first ? &o[0].vec[0] : &o[0];
    const Operand *qd = p_first ? &o[0].vec[1] : NULL;
    int r2 = !r;
    if (in->bop) {
        int c = (int)alu_val(s, t, &o[3]) & 1;
        if (in->bop == 1) r &= c, r2 &= c;
        else if (in->bop == 2) r |= c, r2 |= c;
        else r ^= c, r2 ^= c;
    }
    alu_set(s, t, pd, (uint64_t)r);
    if (qd) alu_set(s, t, qd, (uint64_t)r2);
}

int alu_exec(Sim *s, Thread *t, const Ins *in)
{
    const Operand *o = in->ops;
    switch (in->op) {
    case OP_MOV:
        if (o[1].kind == O_VEC || o[0].kind == O_VEC) { /* pack / unpack: element 0 is the low part */
            const Operand *v = o[1].kind == O_VEC ? &o[1] : &o[0];
            int w = width(in->type) / (v->nvec ? v->nvec : 1);
            if (v->nvec < 2 || w < 8) { sim_hazard(s, SIM_UNSUPPORTED, "mov with this vector operand is not simulated"); return 1; }
            uint64_t m = w >= 64 ? ~0ull : (1ull << w) - 1;
            if (o[1].kind == O_VEC) {
                uint64_t r = 0;
                for (int i = 0; i < v->nvec; i++) r |= (alu_val(s, t, &v->vec[i]) & m) << (i * w);
                alu_set(s, t, &o[0], r);
            } else {
                uint64_t x = alu_val(s, t, &o[1]);
                for (int i = 0; i < v->nvec; i++) alu_set(s, t, &v->vec[i], (x >> (i * w)) & m);
            }
            return 1;
        }
        alu_set(s, t, &o[0], trunc_to(alu_val(s, t, &o[1]), in->type));
        return 1;
    case OP_SELP: {
        uint64_t c = alu_val(s, t, &o[3]) & 1;
        alu_set(s, t, &o[0], trunc_to(alu_val(s, t, c ? &o[1] : &o[2]), in->type));
        return 1;
    }
    case OP_SETP: exec_setp(s, t, in); return 1;
    case OP_CVT: exec_cvt(s, t, in); return 1;
    case OP_PRMT:
        alu_set(s, t, &o[0], prmt((uint32_t)alu_val(s, t, &o[1]), (uint32_t)alu_val(s, t, &o[2]),
                                  (uint32_t)alu_val(s, t, &o[3]), in->a));
        return 1;
    case OP_LOP3:
        alu_set(s, t, &o[0], lop3((uint32_t)alu_val(s, t, &o[1]), (uint32_t)alu_val(s, t, &o[2]),
                                  (uint32_t)alu_val(s, t, &o[3]), (uint32_t)alu_val(s, t, &o[4]) & 0xff));
        return 1;
    case OP_BFIND: case OP_BREV: case OP_BFI: case OP_SHF: return exec_bits(s, t, in);
    case OP_COPYSIGN: {
        if (in->type != T_F32) break;
        uint64_t a = alu_val(s, t, &o[1]), b = alu_val(s, t, &o[2]);
        alu_set(s, t, &o[0], (b & 0x7fffffffu) | (a & 0x80000000u)); /* |b| with the sign of a */
        return 1;
    }
    case OP_EX2: case OP_LG2: case OP_RCP: case OP_SQRT: case OP_RSQRT: case OP_TANH: case OP_FMA:
        if ((in->op == OP_FMA || in->op == OP_EX2) && is_half16(in->type)) { exec_half(s, t, in); return 1; }
        if (in->op == OP_FMA && in->type == T_F32X2) { exec_f32x2(s, t, in); return 1; }
        if (in->type != T_F32) break;
        exec_float(s, t, in);
        return 1;
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_MAD: case OP_DIV: case OP_MIN: case OP_MAX: case OP_NEG:
    case OP_ABS:
        if (in->type == T_F32) { exec_float(s, t, in); return 1; }
        if (is_half16(in->type) && in->op != OP_DIV && in->op != OP_MAD) { exec_half(s, t, in); return 1; }
        if (in->type == T_F32X2 && in->op != OP_MIN && in->op != OP_MAX && in->op != OP_NEG && in->op != OP_ABS &&
            in->op != OP_DIV) {
            exec_f32x2(s, t, in);
            return 1;
        }
        if (in->type == T_F64) {
            double a = f64(alu_val(s, t, &o[1])), b = in->nops > 2 ? f64(alu_val(s, t, &o[2])) : 0, r;
            switch (in->op) {
            case OP_ADD: r = a + b; break;
            case OP_SUB: r = a - b; break;
            case OP_MUL: r = a * b; break;
            case OP_DIV: r = a / b; break;
            case OP_NEG: r = -a; break;
            default: sim_hazard(s, SIM_UNSUPPORTED, "f64 form not simulated"); return 1;
            }
            alu_set(s, t, &o[0], bits64(r));
            return 1;
        }
        return exec_int(s, t, in);
    case OP_REM: case OP_NOT: case OP_AND: case OP_OR: case OP_XOR: case OP_SHL: case OP_SHR: case OP_POPC:
    case OP_CLZ: case OP_BFE:
        return exec_int(s, t, in);
    default: return 0;
    }
    sim_hazard(s, SIM_UNSUPPORTED, "this type of the instruction is not simulated");
    return 1;
}
