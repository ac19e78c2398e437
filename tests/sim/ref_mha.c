/* ref_mha.c - host reference for attention forward (see ref_mha.h). */
#include "ref_mha.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- element formats */

/* A binary floating-point storage format: explicit fraction bits, exponent
 * bias, smallest normal exponent, largest finite value. */
typedef struct {
    int frac_bits, bias, emin, exp_bits;
    double max;
    int has_inf; /* 0: e4m3 FN (saturate on encode, only S.1111.111 is NaN) */
    uint32_t nan_code;
} Format;

static const Format FMT[3] = {
    [REF_BF16] = {7, 127, -126, 8, 0x1.fep127, 1, 0x7FC0},
    [REF_FP16] = {10, 15, -14, 5, 65504.0, 1, 0x7E00},
    [REF_E4M3] = {3, 7, -6, 4, 448.0, 0, 0x7F},
};

int ref_dtype_bytes(RefDtype t) { return t == REF_E4M3 ? 1 : 2; }

const char *ref_dtype_name(RefDtype t)
{
    static const char *const n[3] = {"bf16", "fp16", "e4m3"};
    return (unsigned)t < 3 ? n[t] : "?";
}

static double decode(const Format *f, uint32_t bits)
{
    int total = 1 + f->exp_bits + f->frac_bits;
    uint32_t sign = bits >> (total - 1) & 1;
    uint32_t ex = bits >> f->frac_bits & ((1u << f->exp_bits) - 1);
    uint32_t fr = bits & ((1u << f->frac_bits) - 1);
    uint32_t exp_max = (1u << f->exp_bits) - 1;
    double v;
    if (f->has_inf && ex == exp_max) v = fr ? NAN : INFINITY;
    else if (!f->has_inf && ex == exp_max && fr == (1u << f->frac_bits) - 1) v = NAN;
    else if (ex == 0) v = ldexp((double)fr, f->emin - f->frac_bits);
    else v = ldexp((double)(fr | 1u << f->frac_bits), (int)ex - f->bias - f->frac_bits);
    return sign ? -v : v;
}

/* Round x (finite) to the format's grid, nearest even; may return +-inf
 * (formats with infinity) or a value above max (saturating formats; the
 * caller clamps). */
static double round_to_grid(const Format *f, double x)
{
    if (x == 0.0) return x;
    int e;
    frexp(x, &e); /* |x| = m 2^e, m in [0.5, 1): leading bit 2^(e-1) */
    int lead = e - 1 < f->emin ? f->emin : e - 1;
    double quantum = ldexp(1.0, lead - f->frac_bits);
    double r = nearbyint(x / quantum) * quantum; /* default rounding mode: to nearest even */
    if (fabs(r) > f->max) return f->has_inf ? copysign(INFINITY, x) : r;
    return r;
}

static uint32_t encode(const Format *f, double x)
{
    int total = 1 + f->exp_bits + f->frac_bits;
    if (isnan(x)) return f->nan_code;
    uint32_t sign = signbit(x) ? 1u << (total - 1) : 0;
    double r = isinf(x) ? x : round_to_grid(f, x);
    if (fabs(r) > f->max) r = f->has_inf ? r : copysign(f->max, x);
    double a = fabs(r);
    uint32_t exp_max = (1u << f->exp_bits) - 1;
    if (isinf(a)) return sign | exp_max << f->frac_bits;
    if (a == 0.0) return sign;
    int e;
    frexp(a, &e);
    if (e - 1 < f->emin) /* subnormal: a multiple of 2^(emin - frac_bits) */
        return sign | (uint32_t)ldexp(a, f->frac_bits - f->emin);
    uint32_t fr = (uint32_t)(ldexp(a, f->frac_bits - (e - 1)) - ldexp(1.0, f->frac_bits));
    return sign | (uint32_t)(e - 1 + f->bias) << f->frac_bits | fr;
}

double ref_bf16_decode(uint16_t h) { return decode(&FMT[REF_BF16], h); }
double ref_fp16_decode(uint16_t h) { return decode(&FMT[REF_FP16], h); }
double ref_e4m3_decode(uint8_t b) { return decode(&FMT[REF_E4M3], b); }
uint16_t ref_bf16_encode(double x) { return (uint16_t)encode(&FMT[REF_BF16], x); }
uint16_t ref_fp16_encode(double x) { return (uint16_t)encode(&FMT[REF_FP16], x); }
uint8_t ref_e4m3_encode(double x) { return (uint8_t)encode(&FMT[REF_E4M3], x); }

double ref_load(RefDtype t, const void *base, int64_t index)
{
    if (t == REF_E4M3) return ref_e4m3_decode(((const uint8_t *)base)[index]);
    uint16_t h;
    memcpy(&h, (const unsigned char *)base + index * 2, 2);
    return decode(&FMT[t], h);
}

void ref_store(RefDtype t, void *base, int64_t index, double x)
{
    if (t == REF_E4M3) {
        ((uint8_t *)base)[index] = ref_e4m3_encode(x);
        return;
    }
    uint16_t h = (uint16_t)encode(&FMT[t], x);
    memcpy((unsigned char *)base + index * 2, &h, 2);
}

double ref_round(RefDtype t, double x)
{
    unsigned char b[2];
    ref_store(t, b, 0, x);
    return ref_load(t, b, 0);
}

/* ---------------------------------------------------------- masks */

int ref_visible(RefMask mask, int window_left, int window_right, int seqlen_q, int seqlen_k, int i, int *lo,
                int *hi)
{
    int64_t off = (int64_t)seqlen_k - seqlen_q, a = 0, b = (int64_t)seqlen_k - 1;
    if (mask == REF_MASK_CAUSAL) b = i + off;
    if (mask == REF_MASK_WINDOW) {
        if (window_left >= 0) a = i + off - window_left;
        if (window_right >= 0) b = i + off + window_right;
    }
    if (a < 0) a = 0;
    if (b > (int64_t)seqlen_k - 1) b = (int64_t)seqlen_k - 1;
    if (a > b) a = b + 1; /* none: keep lo > hi */
    *lo = (int)a;
    *hi = (int)b;
    return (int)(b - a + 1);
}

/* ---------------------------------------------------------- attention */

void ref_packed_strides(int seqlen, int heads, int depth, int64_t out[3])
{
    out[2] = depth;
    out[1] = (int64_t)heads * depth;
    out[0] = (int64_t)seqlen * out[1];
}

static int fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && n) vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

static int check_problem(const RefMha *p, char *err, size_t n)
{
    if ((unsigned)p->dtype > REF_E4M3) return fail(err, n, "dtype %d is not a RefDtype", (int)p->dtype);
    if (!p->q.data || !p->k.data || !p->v.data) return fail(err, n, "q, k and v need data");
    if (p->batch <= 0 || p->seqlen_q <= 0 || p->seqlen_k <= 0 || p->heads_q <= 0 || p->heads_kv <= 0 ||
        p->qk_depth <= 0 || p->ov_depth <= 0)
        return fail(err, n, "batch, seqlens, heads and depths must be > 0");
    if (p->heads_q % p->heads_kv)
        return fail(err, n, "heads_kv %d does not divide heads_q %d", p->heads_kv, p->heads_q);
    if (p->k_rope.data && p->qk_depth <= REF_ROPE_DEPTH)
        return fail(err, n, "k_rope needs qk_depth > %d (got %d)", REF_ROPE_DEPTH, p->qk_depth);
    if ((unsigned)p->mask > REF_MASK_WINDOW) return fail(err, n, "mask %d is not a RefMask", (int)p->mask);
    if (p->mask == REF_MASK_WINDOW && (p->window_left < -1 || p->window_right < -1))
        return fail(err, n, "window %d,%d: each side is >= 0 or -1 (unbounded)", p->window_left, p->window_right);
    const double d[4] = {p->softmax_scale, p->q_descale, p->k_descale, p->v_descale};
    for (int i = 0; i < 4; i++)
        if (!isfinite(d[i]) || d[i] < 0) return fail(err, n, "scales must be finite and >= 0 (0 = default)");
    return 0;
}

/* Tensor t with packed strides filled in for [*, seqlen, heads, depth]. */
static RefTensor with_strides(RefTensor t, int seqlen, int heads, int depth)
{
    int64_t packed[3];
    ref_packed_strides(seqlen, heads, depth, packed);
    for (int i = 0; i < 3; i++)
        if (!t.stride[i]) t.stride[i] = packed[i];
    return t;
}

static int64_t at(const RefTensor *t, int b, int s, int h) { return b * t->stride[0] + s * t->stride[1] + h * t->stride[2]; }

/* K (qk_depth columns, from k and k_rope when split) and V of KV head hk of
 * batch b, decoded: k_rows[j * qk + d], v_rows[j * ov + d]. */
static void load_kv(const RefMha *p, const RefTensor *k, const RefTensor *kr, const RefTensor *v, int b, int hk,
                    double *k_rows, double *v_rows)
{
    int nope = kr->data ? p->qk_depth - REF_ROPE_DEPTH : p->qk_depth;
    for (int j = 0; j < p->seqlen_k; j++) {
        for (int d = 0; d < nope; d++) k_rows[(size_t)j * p->qk_depth + d] = ref_load(p->dtype, k->data, at(k, b, j, hk) + d);
        for (int d = nope; d < p->qk_depth; d++)
            k_rows[(size_t)j * p->qk_depth + d] = ref_load(p->dtype, kr->data, at(kr, b, j, hk) + d - nope);
        for (int d = 0; d < p->ov_depth; d++) v_rows[(size_t)j * p->ov_depth + d] = ref_load(p->dtype, v->data, at(v, b, j, hk) + d);
    }
}

/* P.V as a kernel rounds it (RefRound): the scores s[lo..hi] (row max m), O's row (zeroed) gets
 * sum_j round(e^(s_j - m_b)) e^(m_b - m) v_j, m_b the running max after the block of key j. */
static void rounded_pv(const RefRound *r, const double *s, const double *v_rows, int ov, int lo, int hi, double m,
                       double *o_row)
{
    int bsz = r->block > 0 ? r->block : hi + 1, first = lo / bsz, last = hi / bsz;
    double mu = -INFINITY;
    for (int k = 0; k <= last - first; k++) {
        int blk = r->descending ? last - k : first + k;
        int a = blk * bsz > lo ? blk * bsz : lo, z = (blk + 1) * bsz - 1 < hi ? (blk + 1) * bsz - 1 : hi;
        double bmax = -INFINITY;
        for (int j = a; j <= z; j++) bmax = s[j] > bmax ? s[j] : bmax;
        if (bmax == -INFINITY) continue;
        if (mu == -INFINITY || (bmax - mu) * M_LOG2E > r->rescale_log2) mu = bmax;
        double back = exp(mu - m);
        for (int j = a; j <= z; j++) {
            if (s[j] == -INFINITY) continue;
            double pj = ref_round(r->p_type, exp(s[j] - mu)) * back;
            const double *vj = v_rows + (size_t)j * ov;
            for (int d = 0; d < ov; d++) o_row[d] += pj * vj[d];
        }
    }
}

/* One query row (batch b, head h, row i) against the decoded K/V rows: o_row (ov_depth) and the LSE. */
static double attend_row(const RefMha *p, const double *q_row, const double *k_rows, const double *v_rows, int lo,
                         int hi, double scale, double *s, double *o_row, double *o_rnd_row, int b, int h, int i)
{
    for (int d = 0; d < p->ov_depth; d++) o_row[d] = 0.0;
    if (o_rnd_row)
        for (int d = 0; d < p->ov_depth; d++) o_rnd_row[d] = 0.0;
    if (lo > hi) return -INFINITY;
    double m = -INFINITY;
    for (int j = lo; j <= hi; j++) {
        const double *kj = k_rows + (size_t)j * p->qk_depth;
        double part[4] = {0.0, 0.0, 0.0, 0.0}; /* four partial sums: the loop vectorises */
        int d = 0;
        for (; d + 4 <= p->qk_depth; d += 4)
            for (int u = 0; u < 4; u++) part[u] += q_row[d + u] * kj[d + u];
        for (; d < p->qk_depth; d++) part[0] += q_row[d] * kj[d];
        double dot = (part[0] + part[1]) + (part[2] + part[3]);
        s[j] = scale * dot;
        if (p->softcap > 0.0) s[j] = p->softcap * tanh(s[j] / p->softcap);
        if (p->alibi) s[j] -= p->alibi[h] * fabs((double)i + p->seqlen_k - p->seqlen_q - j);
        if (p->score_mod) s[j] = p->score_mod(p->mod_ctx, s[j], b, h, i, j);
        if (s[j] > m) m = s[j];
    }
    if (m == -INFINITY) return -INFINITY; /* the mod hid every key */
    if (o_rnd_row) rounded_pv(&p->round, s, v_rows, p->ov_depth, lo, hi, m, o_rnd_row);
    double l = 0.0;
    for (int j = lo; j <= hi; j++) {
        s[j] = exp(s[j] - m);
        l += s[j];
        const double *vj = v_rows + (size_t)j * p->ov_depth;
        for (int d = 0; d < p->ov_depth; d++) o_row[d] += s[j] * vj[d];
    }
    double vd = p->v_descale != 0.0 ? p->v_descale : 1.0;
    double den = l + (p->sink ? exp(p->sink[h] - m) : 0.0);
    for (int d = 0; d < p->ov_depth; d++) o_row[d] *= vd / den;
    if (o_rnd_row)
        for (int d = 0; d < p->ov_depth; d++) o_rnd_row[d] *= vd / den;
    return m + log(l);
}

int ref_mha_fwd(const RefMha *p, double *o, double *lse, char *err, size_t errlen)
{
    if (check_problem(p, err, errlen)) return -1;
    int nope = p->k_rope.data ? p->qk_depth - REF_ROPE_DEPTH : p->qk_depth;
    RefTensor q = with_strides(p->q, p->seqlen_q, p->heads_q, p->qk_depth);
    RefTensor k = with_strides(p->k, p->seqlen_k, p->heads_kv, nope);
    RefTensor kr = with_strides(p->k_rope, p->seqlen_k, p->heads_kv, REF_ROPE_DEPTH);
    RefTensor v = with_strides(p->v, p->seqlen_k, p->heads_kv, p->ov_depth);
    double scale = p->softmax_scale != 0.0 ? p->softmax_scale : 1.0 / sqrt((double)p->qk_depth);
    scale *= (p->q_descale != 0.0 ? p->q_descale : 1.0) * (p->k_descale != 0.0 ? p->k_descale : 1.0);
    int group = p->heads_q / p->heads_kv;
    double *k_rows = malloc(sizeof(double) * (size_t)p->seqlen_k * (size_t)p->qk_depth);
    double *v_rows = malloc(sizeof(double) * (size_t)p->seqlen_k * (size_t)p->ov_depth);
    double *s = malloc(sizeof(double) * (size_t)p->seqlen_k);
    double *q_row = malloc(sizeof(double) * (size_t)p->qk_depth);
    if (!k_rows || !v_rows || !s || !q_row) {
        free(k_rows), free(v_rows), free(s), free(q_row);
        return fail(err, errlen, "out of memory for seqlen_k %d", p->seqlen_k);
    }
    for (int b = 0; b < p->batch; b++)
        for (int hk = 0; hk < p->heads_kv; hk++) {
            load_kv(p, &k, &kr, &v, b, hk, k_rows, v_rows);
            for (int h = hk * group; h < (hk + 1) * group; h++)
                for (int i = 0; i < p->seqlen_q; i++) {
                    for (int d = 0; d < p->qk_depth; d++) q_row[d] = ref_load(p->dtype, q.data, at(&q, b, i, h) + d);
                    int lo, hi;
                    ref_visible(p->mask, p->window_left, p->window_right, p->seqlen_q, p->seqlen_k, i, &lo, &hi);
                    double *o_row = o + (((size_t)b * p->seqlen_q + i) * p->heads_q + h) * p->ov_depth;
                    size_t orow = (((size_t)b * p->seqlen_q + i) * p->heads_q + h) * p->ov_depth;
                    double *o_rnd_row = p->round.on && p->o_rnd ? p->o_rnd + orow : NULL;
                    double l = attend_row(p, q_row, k_rows, v_rows, lo, hi, scale, s, o_row, o_rnd_row, b, h, i);
                    if (lse) lse[((size_t)b * p->heads_q + h) * p->seqlen_q + i] = l;
                }
        }
    free(k_rows), free(v_rows), free(s), free(q_row);
    return 0;
}
