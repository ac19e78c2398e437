/* ref_mla.h - a host reference for sparse MLA prefill (DeepSeek-V3.2 top-k
 * attention), for the simulator's test harness.
 *
 * It is written from the contract of FlashMLA's sparse prefill and from
 * nothing in gen/: a misreading shared with the generator would hide the
 * generator's bug. Every element is decoded from bf16 here and every sum is
 * accumulated in double.
 *
 * The problem:
 *   q       [s_q, h_q, d_qk] bf16, d_qk = 576 (512 "nope" + 64 "rope") or 512
 *   kv      [s_kv, 1, d_qk]  bf16: K is the whole row, V its first 512 columns (d_v = 512); or fp8:
 *           e4m3 bytes times f32 scales per row or per block of columns (kv8 below)
 *   indices [s_q, topk] int32: the keys query row s attends to
 *   topk_length [s_q] int32, optional (NULL: topk): only positions < topk_length[s] count; every
 *           value has a meaning (fa4.h): below 0 none (an empty row), above topk all topk
 *   attn_sink [h_q] f32, optional (NULL: none)
 * Every stride but the last dimension's is free: element strides q (s, h), kv (s), indices (s),
 * out (s, h); 0 selects the packed layout.
 * For query row s, head h, and each position t < topk_length[s] whose index i = indices[s, t]
 * is valid (0 <= i < s_kv):
 *   l_t = sm_scale * <q[s, h, :], kv[i, :]>            (all d_qk columns)
 *   max_logits[s, h] = max_t l_t
 *   lse[s, h] = log(sum_t exp(l_t))                     (natural log)
 *   out[s, h, :] = sum_t exp(l_t - lse) * kv[i, :512]
 * An index < 0 or >= s_kv, or at a position >= topk_length[s], contributes nothing; a valid
 * index that appears several times counts as many times. A row with no valid index has out 0,
 * lse +inf and max_logits -inf. A sink scales out by e^lse / (e^lse + e^sink[h]) (a sink of
 * -inf leaves it, +inf zeroes it) and leaves lse and max_logits alone; an empty row stays 0.
 * Outputs: out (double, strides as given), lse and max_logits packed [s_q, h_q] (double).
 */
#ifndef FA4SIM_REF_MLA_H
#define FA4SIM_REF_MLA_H

#include <stddef.h>
#include <stdint.h>

enum { REF_MLA_DV = 512, REF_MLA_ROPE = 64 };

/* bf16: exact decode (NaN codes give NaN), and rounding to nearest even straight from double
 * (no double rounding through float); out of range gives +-inf, NaN the quiet NaN 0x7FC0. */
double ref_mla_bf16_decode(uint16_t h);
uint16_t ref_mla_bf16_encode(double x);
/* x rounded to the nearest bf16 value, as a double. */
double ref_mla_bf16_round(double x);

/* e4m3 (OCP FN: bias 7, 3 mantissa bits, max 448, no infinities, NaN 0x7F/0xFF): exact decode, and
 * rounding to nearest even from double, saturating at +-448 (NaN gives 0x7F). */
double ref_mla_e4m3_decode(uint8_t b);
uint8_t ref_mla_e4m3_encode(double x);

typedef struct RefMla {
    const uint16_t *q;           /* bf16 */
    int64_t q_stride_s, q_stride_h;
    const uint16_t *kv;          /* bf16 */
    int64_t kv_stride_s;
    const int32_t *indices;
    int64_t indices_stride_s;
    const int32_t *topk_length;  /* [s_q] or NULL */
    const float *attn_sink;      /* [h_q] or NULL */
    int s_q, s_kv, h_q, d_qk, topk;
    double sm_scale;
    int64_t out_stride_s, out_stride_h;
    /* fp8 kv: when kv8 is given (kv then unused), element c of row i is
     * bf16(fp32(e4m3(kv8[i, c]) * kv_scale[i * (d_qk / block) + c / block])) (the fp32 product rounded
     * to the nearest bf16, as the contract says), block = kv_scale_block or d_qk when 0; kv_scale NULL or an entry 0
     * means 1. */
    const uint8_t *kv8;
    const float *kv_scale;
    int kv_scale_block;
} RefMla;

/* Does position t of query row s select a key? (index in range, t < topk_length[s]) */
int ref_mla_valid(const RefMla *p, int s, int t);

/* Fills out (rows of REF_MLA_DV doubles at the given strides), lse and max_logits (s_q * h_q
 * doubles each, packed; either may be NULL). Returns 0, or -1 with one sentence in err for a
 * problem that is not well formed (d_qk not 512 or 576, a negative size or stride, a NULL
 * buffer). */
int ref_mla_sparse_fwd(const RefMla *p, double *out, double *lse, double *max_logits, char *err, size_t errlen);

#endif
