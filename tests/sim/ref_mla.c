/* ref_mla.c - host reference for sparse MLA prefill (see ref_mla.h). */
#include "ref_mla.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- bf16 */

/* bf16 is the upper half of an IEEE single: every bf16 value is a float, exactly. */
double ref_mla_bf16_decode(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return (double)f;
}

double ref_mla_bf16_round(double x)
{
    if (isnan(x) || isinf(x) || x == 0.0) return x;
    int e;
    frexp(x, &e); /* |x| = m 2^e, m in [0.5, 1): the leading bit is 2^(e-1) */
    int lead = e - 1 < -126 ? -126 : e - 1; /* below 2^-126 the grid is the subnormals' */
    double quantum = ldexp(1.0, lead - 7);  /* 7 fraction bits */
    double r = nearbyint(x / quantum) * quantum; /* the default rounding mode: to nearest, ties to even */
    if (fabs(r) > 0x1.fep127) return copysign(INFINITY, x);
    return r;
}

uint16_t ref_mla_bf16_encode(double x)
{
    if (isnan(x)) return signbit(x) ? 0xFFC0 : 0x7FC0;
    float f = (float)ref_mla_bf16_round(x); /* exact: the rounded value is a float with 16 zero low bits */
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return (uint16_t)(bits >> 16);
}

/* ---------------------------------------------------------- attention */

static int fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t n, const char *fmt, ...)
{
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

double ref_mla_e4m3_decode(uint8_t b)
{
    int sign = b >> 7, e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return NAN;
    double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return sign ? -v : v;
}

uint8_t ref_mla_e4m3_encode(double x)
{
    if (isnan(x)) return 0x7F;
    uint8_t sign = signbit(x) ? 0x80 : 0, best = 0;
    double a = fabs(x), err = INFINITY;
    for (int b = 0; b < 0x7F; b++) { /* 0x7F is NaN; ties go to the even code (m bit 0 clear) */
        double d = fabs(ref_mla_e4m3_decode((uint8_t)b) - a);
        if (d < err || (d == err && !(b & 1))) err = d, best = (uint8_t)b;
    }
    return sign | best;
}

/* The strides with 0 replaced by the packed ones. */
typedef struct Strides { int64_t qs, qh, kvs, is, os, oh; } Strides;

static Strides strides_of(const RefMla *p)
{
    Strides st = {p->q_stride_s, p->q_stride_h, p->kv_stride_s, p->indices_stride_s, p->out_stride_s,
                  p->out_stride_h};
    if (!st.qh) st.qh = p->d_qk;
    if (!st.qs) st.qs = (int64_t)p->h_q * st.qh;
    if (!st.kvs) st.kvs = p->d_qk;
    if (!st.is) st.is = p->topk;
    if (!st.oh) st.oh = REF_MLA_DV;
    if (!st.os) st.os = (int64_t)p->h_q * st.oh;
    return st;
}

int ref_mla_valid(const RefMla *p, int s, int t)
{
    Strides st = strides_of(p);
    int len = p->topk_length ? p->topk_length[s] : p->topk;
    if (t < 0 || t >= len || t >= p->topk) return 0;
    int32_t i = p->indices[(int64_t)s * st.is + t];
    return i >= 0 && i < p->s_kv;
}

static int check_problem(const RefMla *p, char *err, size_t n)
{
    if (!p->q || !(p->kv || p->kv8) || !p->indices) return fail(err, n, "q, kv and indices must be given");
    if (p->kv8 && p->kv_scale_block && (p->kv_scale_block < 0 || p->d_qk % p->kv_scale_block))
        return fail(err, n, "kv_scale_block %d does not divide d_qk %d", p->kv_scale_block, p->d_qk);
    if (p->d_qk != REF_MLA_DV && p->d_qk != REF_MLA_DV + REF_MLA_ROPE)
        return fail(err, n, "d_qk is %d: sparse MLA takes 512 or 576", p->d_qk);
    if (p->s_q < 0 || p->s_kv < 0 || p->h_q < 0 || p->topk < 0)
        return fail(err, n, "s_q %d, s_kv %d, h_q %d, topk %d: sizes must not be negative", p->s_q, p->s_kv,
                    p->h_q, p->topk);
    if (p->q_stride_s < 0 || p->q_stride_h < 0 || p->kv_stride_s < 0 || p->indices_stride_s < 0 ||
        p->out_stride_s < 0 || p->out_stride_h < 0)
        return fail(err, n, "strides must not be negative");
    return 0;
}

/* Element d of kv row i: bf16, or e4m3 times its scale rounded to bf16. */
static double kv_at(const RefMla *p, const Strides *st, int32_t i, int d)
{
    if (!p->kv8) return ref_mla_bf16_decode(p->kv[(int64_t)i * st->kvs + d]);
    double x = ref_mla_e4m3_decode(p->kv8[(int64_t)i * st->kvs + d]);
    if (!p->kv_scale) return x;
    int block = p->kv_scale_block ? p->kv_scale_block : p->d_qk;
    double sc = p->kv_scale[(int64_t)i * (p->d_qk / block) + d / block];
    /* the contract: the fp32 product rounded to bf16 (e4m3 is exact in fp32; rounding the exact product
     * straight to bf16 would differ in rare double-rounding ties) */
    return ref_mla_bf16_round((double)((float)x * (float)(sc == 0.0 ? 1.0 : sc)));
}

/* sm_scale * <q row, kv row i> over all d_qk columns */
static double logit(const RefMla *p, const Strides *st, const uint16_t *qrow, int32_t i)
{
    double acc = 0.0;
    for (int d = 0; d < p->d_qk; d++) acc += ref_mla_bf16_decode(qrow[d]) * kv_at(p, st, i, d);
    return p->sm_scale * acc;
}

/* One (query row, head): out row, lse, max. l is scratch for topk logits. */
static void one_row(const RefMla *p, const Strides *st, int s, int h, double *l, double *o, double *lse,
                    double *mx)
{
    const uint16_t *qrow = p->q + (int64_t)s * st->qs + (int64_t)h * st->qh;
    double m = -INFINITY;
    int any = 0;
    for (int t = 0; t < p->topk; t++) {
        if (!ref_mla_valid(p, s, t)) continue;
        int32_t i = p->indices[(int64_t)s * st->is + t];
        l[t] = logit(p, st, qrow, i);
        if (l[t] > m) m = l[t];
        any = 1;
    }
    for (int d = 0; d < REF_MLA_DV; d++) o[d] = 0.0;
    if (!any) { *lse = INFINITY, *mx = -INFINITY; return; }
    /* subtract the max before exp: the sum is then in [1, topk] */
    double sum = 0.0;
    for (int t = 0; t < p->topk; t++) {
        if (!ref_mla_valid(p, s, t)) continue;
        int32_t i = p->indices[(int64_t)s * st->is + t];
        double w = exp(l[t] - m);
        sum += w;
        for (int d = 0; d < REF_MLA_DV; d++) o[d] += w * kv_at(p, st, i, d);
    }
    *mx = m;
    *lse = m + log(sum);
    /* the sink joins the denominator only: e^lse / (e^lse + e^sink) = 1 / (1 + e^(sink - lse)) */
    double scale = 1.0 / sum;
    if (p->attn_sink) scale /= 1.0 + exp((double)p->attn_sink[h] - *lse);
    for (int d = 0; d < REF_MLA_DV; d++) o[d] *= scale;
}

int ref_mla_sparse_fwd(const RefMla *p, double *out, double *lse, double *max_logits, char *err, size_t errlen)
{
    if (check_problem(p, err, errlen)) return -1;
    if (!out) return fail(err, errlen, "out must be given");
    Strides st = strides_of(p);
    double *l = malloc(sizeof *l * (size_t)(p->topk ? p->topk : 1));
    if (!l) return fail(err, errlen, "out of memory");
    for (int s = 0; s < p->s_q; s++)
        for (int h = 0; h < p->h_q; h++) {
            double e, m;
            one_row(p, &st, s, h, l, out + (int64_t)s * st.os + (int64_t)h * st.oh, &e, &m);
            if (lse) lse[(int64_t)s * p->h_q + h] = e;
            if (max_logits) max_logits[(int64_t)s * p->h_q + h] = m;
        }
    free(l);
    return 0;
}
