/* ref_mha.h - a host reference for multi-head attention forward, for the
 * simulator's test harness (sim_mha.c).
 *
 * It is written from the semantics that runtime/fa4.h and the README publish,
 * and from nothing in gen/: a misreading shared with the generator would hide
 * the generator's bug. Every element is decoded from its storage format here
 * (bf16, fp16, OCP e4m3 "FN"), and every sum is accumulated in double.
 *
 * The problem (fa4.h's fa4_mha_args):
 *   Q [batch, seqlen_q, heads_q, qk_depth], K [batch, seqlen_k, heads_kv, qk_depth],
 *   V [batch, seqlen_k, heads_kv, ov_depth], element strides (batch, seq, head),
 *   depth stride 1. Query head h reads KV head h / (heads_q / heads_kv) (GQA).
 *   With k_rope, K holds the first qk_depth - 64 columns and k_rope the last 64.
 *   s_ij = softmax_scale * q_descale * k_descale * <q_i, k_j>   (scale 0: 1/sqrt(qk_depth),
 *                                                               descale 0: 1)
 *   O_i = v_descale * sum_j softmax_j(s_ij) v_j over the keys row i sees,
 *   LSE_i = log(sum_j exp(s_ij)), natural log.
 *   Row i sees key j (off = seqlen_k - seqlen_q, bottom-right alignment):
 *     none    every j
 *     causal  j <= i + off
 *     window  i + off - L <= j <= i + off + R, where L or R = -1 leaves that side unbounded
 *   A row that sees no key has O = 0 and LSE = -inf.
 *   score_mod (fa4.h): s_ij becomes score_mod(s_ij, b, h, i, j) before the mask (here: on
 *   the keys the row sees); the softmax runs on those values, and a row whose every value is
 *   -inf is a row that sees no key.
 *   softcap, alibi (fa4.h, FlashAttention's definitions): s_ij = softcap tanh(s_ij / softcap), then
 *   s_ij -= alibi[h] |i + seqlen_k - seqlen_q - j|, both before the mask (and before a score_mod).
 *   sink (fa4.h, gpt-oss): O_i = sum_j e^(s_ij - m) v_j / (sum_j e^(s_ij - m) + e^(sink_h - m)),
 *   m = max_j s_ij; LSE_i = log sum_j e^(s_ij) (the sink is not in it).
 * Outputs: O packed [batch, seqlen_q, heads_q, ov_depth] and LSE packed
 * [batch, heads_q, seqlen_q] (fa4.h's LSE layout), both double.
 */
#ifndef FA4SIM_REF_MHA_H
#define FA4SIM_REF_MHA_H

#include <stddef.h>
#include <stdint.h>

typedef enum { REF_BF16 = 0, REF_FP16 = 1, REF_E4M3 = 2 } RefDtype;
typedef enum { REF_MASK_NONE = 0, REF_MASK_CAUSAL = 1, REF_MASK_WINDOW = 2 } RefMask;

enum { REF_ROPE_DEPTH = 64 }; /* fa4.h: k_rope holds K's last 64 columns */

/* ---------------------------------------------------------- element formats */

/* Bytes of one stored element. */
int ref_dtype_bytes(RefDtype t);
const char *ref_dtype_name(RefDtype t);

/* Exact decodes (every bf16, fp16 and e4m3 value is a double). NaN codes give NaN;
 * e4m3 (OCP FN: bias 7, no infinity, S.1111.111 is NaN) has max 448. */
double ref_bf16_decode(uint16_t h);
double ref_fp16_decode(uint16_t h);
double ref_e4m3_decode(uint8_t b);

/* Round to nearest even. Out of range: bf16/fp16 give +-inf, e4m3 saturates to
 * +-448 (the usual conversion for inputs). NaN gives a NaN code. */
uint16_t ref_bf16_encode(double x);
uint16_t ref_fp16_encode(double x);
uint8_t ref_e4m3_encode(double x);

/* Element `index` (in elements) of a buffer of type t. */
double ref_load(RefDtype t, const void *base, int64_t index);
/* Store x rounded to t at element `index`. */
void ref_store(RefDtype t, void *base, int64_t index, double x);

/* ---------------------------------------------------------- masks */

/* The keys query row i sees: [*lo, *hi] clipped to [0, seqlen_k); returns
 * their count (0 when none, then *lo > *hi). */
int ref_visible(RefMask mask, int window_left, int window_right, int seqlen_q, int seqlen_k, int i, int *lo,
                int *hi);

/* ---------------------------------------------------------- attention */

typedef struct RefTensor {
    const void *data;  /* host memory; element 0 of batch 0, row 0, head 0 */
    int64_t stride[3]; /* elements: batch, seq, head (0 selects the packed layout) */
} RefTensor;

/* How a kernel rounds, for a second reference that rounds as it does, so that what remains between the two is
 * the order of f32 sums and the exp2 approximations (the exact reference stays the independent check):
 * P enters P.V rounded to p_type (nearest even); P_j = e^(s_j - m) where m is the running max a kernel keeps
 * over KV blocks of `block` keys (aligned at key 0; visited from the last one down when descending, else from
 * the first), set by the first block that holds a visible key and raised only when a later block's max
 * exceeds it by more than rescale_log2 (in log2 units: 0 raises it at every growth); the row sum (the
 * softmax denominator) takes P unrounded; earlier blocks are rescaled exactly. The caller rounds O to its
 * storage type. on = 0: the exact reference. */
typedef struct RefRound {
    int on;
    RefDtype p_type;
    int block;
    double rescale_log2;
    int descending;
} RefRound;

/* x rounded to the nearest value of type t (an e4m3 value saturates at +-448), as a double. */
double ref_round(RefDtype t, double x);

typedef struct RefMha {
    RefDtype dtype; /* of q, k, v and k_rope */
    RefTensor q, k, v;
    RefTensor k_rope; /* data NULL: K is one tensor of qk_depth columns */
    int batch, seqlen_q, seqlen_k, heads_q, heads_kv, qk_depth, ov_depth;
    RefMask mask;
    int window_left, window_right;
    double softmax_scale;                 /* 0: 1/sqrt(qk_depth) */
    double q_descale, k_descale, v_descale; /* 0: 1 */
    const double *sink; /* [heads_q] sink logits, NULL: none */
    double (*score_mod)(const void *ctx, double s, int b, int h, int q, int k); /* NULL: none */
    const void *mod_ctx;
    double softcap;      /* > 0: s_ij = softcap * tanh(s_ij / softcap); 0: none */
    const double *alibi; /* [heads_q] slopes, NULL: none: s_ij -= alibi[h] |i + seqlen_k - seqlen_q - j| */
    RefRound round;      /* on: P rounded as a kernel rounds it (RefRound), into o_rnd */
    double *o_rnd;       /* with round.on: the rounding-aware O, laid out as o (o stays the exact one) */
} RefMha;

/* Fills o (batch*seqlen_q*heads_q*ov_depth doubles) and lse
 * (batch*heads_q*seqlen_q doubles; may be NULL). Returns 0, or -1 with one
 * sentence in err for a problem that is not well formed. */
int ref_mha_fwd(const RefMha *p, double *o, double *lse, char *err, size_t errlen);

/* The packed element strides of [batch, seqlen, heads, depth]. */
void ref_packed_strides(int seqlen, int heads, int depth, int64_t out[3]);

#endif
