/* softmax.h - emitters shared by every kernel of every target: the online
 * softmax in the log2 domain (scale folded into one FMA), score masking, the
 * exp2 polynomial, LSE, and the mbarrier ring state. They work on lists of
 * register handles (Reg), so the sm90 layout (two rows per thread, spread over four
 * lanes) and the sm100 layout (one row per thread) both use them. */
#ifndef FA4GEN_SOFTMAX_H
#define FA4GEN_SOFTMAX_H

#include "fa4gen.h"

#define PTX_NEG_INF "0fFF800000"
#define PTX_LN2 "0f3F317218"   /* ln(2) */
#define PTX_LOG2E "0f3FB8AA3B" /* log2(e) */
#define PTX_ONE "0f3F800000"

/* dst = max / sum of n registers, as a balanced tree for ILP. */
void sfx_max_tree(Emit *e, Reg dst, const Reg *src, int n);
void sfx_sum_tree(Emit *e, Reg dst, const Reg *src, int n);
/* FA4's conditional rescale: the running max m moves only when the block max
 * exceeds it by more than threshold (log2 units); need = it moved (then corr =
 * exp2((m_old - m_new) * scale_log2)), else corr = 1 and P stays <= 2^threshold. */
void sfx_update_max_lazy(Emit *e, Reg m, Reg blk, Reg scale_log2, int threshold, Reg neg_ms, Reg corr, Reg need);
/* x[i] = exp2(x[i] * scale_log2 + neg_ms); every poly_every-th element (0 = none) by the polynomial. */
void sfx_exp2_scaled(Emit *e, const Reg *x, int n, Reg scale_log2, Reg neg_ms, int poly_every);
/* dst = exp2(src) on the FMA pipe (degree-3 polynomial; FA4 design), src <= 0 expected. */
void sfx_exp2_poly(Emit *e, Reg dst, Reg src);
/* Mask x (set -inf) when the column constant c lies above t_hi or below t_lo (REG_NONE = no bound). */
void sfx_mask(Emit *e, Reg x, int c, Reg t_hi, Reg t_lo);
/* v = op (max, add) of v over `lanes` neighbouring lanes (a power of two; lanes that hold
 * parts of one row), by butterfly shuffles through tmp; every lane gets the result. */
void sfx_reduce_lanes(Emit *e, const char *op, Reg v, Reg tmp, int lanes);
/* lse = (m_use * scale_log2 + log2(l)) * ln2, or -inf when l == 0. */
void sfx_lse(Emit *e, Reg dst, Reg m, Reg l, Reg scale_log2);
/* inv = o_scale / l, or 0 when l == 0 (rows that saw no key give O = 0). */
void sfx_inv_sum(Emit *e, Reg inv, Reg l, Reg o_scale);
/* The same with a sink: inv = o_scale / (l + 2^(sink log2 e - m scale_log2)), the sink term in the
 * units of l (m is the row's running max; -inf counts as 0), or 0 when l == 0. LSE stays sfx_lse
 * of l alone. */
void sfx_inv_sum_sink(Emit *e, Reg inv, Reg l, Reg m, Reg sink, Reg scale_log2, Reg o_scale);
/* dst = sink[head] (f32) from %sink_ptr (kernel.h); addr (b64) is scratch. */
void sfx_sink_load(Emit *e, Reg dst, Reg head, Reg addr);
/* softcap=1 (plan note softcap): x[i] = tanh(x[i] * %softcap_scale), tanh.approx.f32 (PTX ISA 7.0, sm_75+). */
void sfx_softcap(Emit *e, const Reg *x, int n);
/* alibi=1: nslope = -alibi[head] * %alibi_scale, the slope in the raw scores' units; addr (b64) scratch. */
void sfx_alibi_slope(Emit *e, Reg nslope, Reg head, Reg addr);
/* alibi=1 (plan note alibi): x[i] += nslope * |d0 + col[i]|, d0 (s32) = the first key of x's columns minus
 * the row's diagonal key (row + seqlen_k - seqlen_q); df (f32) and t (f32) are scratch. */
void sfx_alibi(Emit *e, const Reg *x, const int *col, int n, Reg d0, Reg nslope, Reg df, Reg t);

/* Mask thresholds of one query row (sequence index row_seq) against the key
 * block starting at kv0, for sfx_mask: t_hi = last visible key - kv0 (keys
 * past seqlen_k hidden), t_lo = first visible key - kv0 (only with a left
 * window bound; REG_NONE otherwise). Reads %kv_off and %seqlen_k (kernel.h). */
void sfx_row_bounds(Emit *e, Reg row_seq, Reg kv0, Reg t_hi, Reg t_lo);

/* ---- pieces every kernel's emitters share ---- */

/* Shared memory addresses, from %smem (mha_prologue): dst = %smem + off; a fresh b32 register
 * `name` = %smem + off (returned); dst = base + idx * stride;
 * dst = %smem + off + idx * stride. */
void smem_at(Emit *e, Reg dst, uint32_t off);
Reg smem_reg(Emit *e, const char *name, uint32_t off);
void addr_indexed(Emit *e, Reg dst, Reg base, Reg idx, uint32_t stride);
void smem_indexed(Emit *e, Reg dst, uint32_t off, Reg idx, uint32_t stride);

/* An mbarrier array of the smem map: barrier i at off + i * MBAR_BYTES, completing a phase
 * after count arrivals (plus the transaction bytes expected on it, if any). */
enum { MBAR_BYTES = 8 }; /* .b64 (PTX ISA "mbarrier") */
typedef struct { const char *name; uint32_t off; int count; } Mbar;
/* The plan's mbarrier array (PlanMbar) of that name, or the one at smem offset off: its arrival
 * count is the plan's, never the emitter's (emit_fail when the plan has none). */
Mbar mbar_plan(Emit *e, const char *name);
Mbar mbar_plan_at(Emit *e, uint32_t off);
/* dst = barrier i of the array at off; dst = barrier idx (a register). */
void mbar_at(Emit *e, Reg dst, uint32_t off, int i);
void mbar_indexed(Emit *e, Reg dst, Reg base, Reg idx);
/* Thread 0 initialises the barriers between begin and end (then the fence makes them visible
 * to the async proxy); begin returns the address register for mbar_init and names the label. */
Reg mbar_init_begin(Emit *e, char *lbl, size_t n, const char *section);
void mbar_init(Emit *e, Reg b, const Mbar *m, int i);
void mbar_init_end(Emit *e, const char *lbl);

/* The TMA's swizzle of a staged row: 16-byte unit u of row r sits at unit
 * u ^ ((r * swizzle_bytes >> 7) & (units - 1)). key = that mask, base = buf + r * swizzle_bytes. */
void swizzle_row(Emit *e, Reg key, Reg base, Reg row, Reg buf);
/* dst = the byte offset of unit u of the row whose key is in key: (key ^ u) << 4. */
void swizzle_unit(Emit *e, Reg dst, Reg key, int u);

/* LSE of sequence row seq of head into [batch, heads_q, seqlen_q] fp32 at %lse_ptr (varlen:
 * [heads_q, total_q], the row's packed index %vl_q_start + seq), where guard holds; idx (b32) and
 * addr (b64) are scratch. */
void lse_store(Emit *e, Reg guard, Reg head, Reg seq, Reg idx, Reg addr, Reg lse);

/* The thread count of named barrier id (plan bars). */
int named_bar_threads(const Plan *p, int id);

/* Ring state of an mbarrier pipeline, one (stage, phase) pair of registers per walker:
 * reset starts at slot 0, phase 0; advance steps stage = (stage + 1) % stages and flips the
 * phase on wrap; free_parity is the parity a producer waits for on a slot's empty barrier
 * (the phase before the consumers' current one, so the first pass does not wait). */
void ring_reset(Emit *e, Reg stage, Reg phase);
void ring_advance(Emit *e, Reg stage, Reg phase, int stages);
void ring_free_parity(Emit *e, Reg par, Reg phase);

#endif
