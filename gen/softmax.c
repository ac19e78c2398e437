/* softmax.c - online softmax, masking, exp2 and ring-state emitters shared by
 * all kernels (see softmax.h). Scores stay unscaled; the scale is folded into
 * the exp2 argument: exp2(s * scale_log2 - m * scale_log2) with one FMA. */
#include <stdio.h>
#include <string.h>

#include "mha_plan.h"
#include "ops.h"
#include "ops_copy.h"
#include "softmax.h"

/* The f32 bits of the integer t (exact for |t| < 2^24). */
static uint32_t threshold_bits(int t)
{
    float f = (float)t;
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void tree(Emit *e, const char *op, Reg dst, const Reg *src, int n)
{
    REG_WANT(e, dst, RT_F32);
    if (n == 1) {
        emit(e, "mov.f32 %s, %s;", R(e, dst), R(e, src[0]));
        return;
    }
    /* pairwise levels into tmp registers keep several independent chains in flight */
    enum { MAXN = 256 };
    Reg cur[MAXN];
    int m = n < MAXN ? n : MAXN;
    for (int i = 0; i < m; i++) cur[i] = src[i];
    int level = 0;
    while (m > 1) {
        int k = 0;
        for (int i = 0; i + 1 < m; i += 2, k++) {
            Reg t = (m == 2) ? dst : reg_f32(e, "red%d_%d", level & 1, k);
            emit(e, "%s.f32 %s, %s, %s;", op, R(e, t), R(e, cur[i]), R(e, cur[i + 1]));
            cur[k] = t; /* k <= i: level-wise in place */
        }
        if (m & 1) {
            Reg t = reg_f32(e, "red%d_%d", level & 1, k);
            emit(e, "mov.f32 %s, %s;", R(e, t), R(e, cur[m - 1]));
            cur[k++] = t;
        }
        m = k;
        level++;
    }
}

void sfx_max_tree(Emit *e, Reg dst, const Reg *src, int n) { tree(e, "max", dst, src, n); }
void sfx_sum_tree(Emit *e, Reg dst, const Reg *src, int n) { tree(e, "add", dst, src, n); }

void sfx_update_max_lazy(Emit *e, Reg m_, Reg blk_, Reg scale_log2_, int threshold, Reg neg_ms_, Reg corr_,
                         Reg need_)
{
    REG_WANT(e, m_, RT_F32), REG_WANT(e, blk_, RT_F32), REG_WANT(e, scale_log2_, RT_F32);
    REG_WANT(e, neg_ms_, RT_F32), REG_WANT(e, corr_, RT_F32), REG_WANT(e, need_, RT_PRED);
    const char *m = R(e, m_), *blk = R(e, blk_), *scale_log2 = R(e, scale_log2_);
    const char *neg_ms = R(e, neg_ms_), *corr = R(e, corr_), *need = R(e, need_);
    const char *cand = R(e, reg_f32(e, "sfx_m_cand")), *grow = R(e, reg_f32(e, "sfx_grow"));
    const char *m_use = R(e, reg_f32(e, "sfx_m_use")), *p = R(e, reg_pred(e, "sfx_no_key"));
    emit(e, "max.f32 %s, %s, %s;", cand, m, blk);
    emit(e, "sub.f32 %s, %s, %s;", grow, cand, m); /* +inf while the row has seen no key */
    emit(e, "mul.f32 %s, %s, %s;", grow, grow, scale_log2);
    emit(e, "setp.gt.f32 %s, %s, 0f%08X;", need, grow, threshold_bits(threshold));
    emit_note(e, "below the threshold the old max stays: P <= 2^%d, and O needs no rescale", threshold);
    emit(e, "selp.f32 %s, %s, %s, %s;", cand, cand, m, need);
    emit(e, "setp.eq.f32 %s, %s, %s;", p, cand, PTX_NEG_INF);
    emit(e, "selp.f32 %s, 0f00000000, %s, %s;", m_use, cand, p);
    emit(e, "mul.f32 %s, %s, %s;", neg_ms, m_use, scale_log2);
    emit(e, "neg.f32 %s, %s;", neg_ms, neg_ms);
    emit(e, "fma.rn.f32 %s, %s, %s, %s;", corr, m, scale_log2, neg_ms);
    emit(e, "ex2.approx.ftz.f32 %s, %s;", corr, corr);
    emit(e, "selp.f32 %s, %s, 0f3F800000, %s;", corr, corr, need);
    emit(e, "mov.f32 %s, %s;", m, cand);
}

void sfx_exp2_poly(Emit *e, Reg dst, Reg src)
{
    /* 2^x = 2^floor(x) * 2^frac: frac by Horner on the FMA pipe, floor(x) added
     * to the exponent bits. Coefficients: minimax degree 3 on [0, 1). */
    REG_WANT(e, dst, RT_F32 | RT_B32), REG_WANT(e, src, RT_F32 | RT_B32);
    Reg x = reg_f32(e, "poly_x"), fl = reg_f32(e, "poly_floor");
    const char *fr = R(e, reg_f32(e, "poly_frac")), *y = R(e, reg_f32(e, "poly_y"));
    const char *bits = R(e, reg_b32(e, "poly_bits"));
    Reg ex = reg_b32(e, "poly_exp");
    emit(e, "max.f32 %s, %s, 0fC2FE0000;", R(e, x), R(e, src)); /* clamp at -127: below that 2^x flushes to 0 anyway */
    op_cvt(e, "rmi.f32.f32", fl, x);
    emit(e, "sub.f32 %s, %s, %s;", fr, R(e, x), R(e, fl));
    emit(e, "fma.rn.f32 %s, %s, 0f3D9DF09D, 0f3E6906A4;", y, fr); /* 0.0771190897, 0.2275644745 */
    emit(e, "fma.rn.f32 %s, %s, %s, 0f3F31F519;", y, y, fr);      /* 0.6951461434 */
    emit(e, "fma.rn.f32 %s, %s, %s, 0f3F800000;", y, y, fr);      /* 1.0 */
    op_cvt(e, "rzi.s32.f32", ex, fl);
    emit(e, "shl.b32 %s, %s, 23;", R(e, ex), R(e, ex));
    emit(e, "mov.b32 %s, %s;", bits, y);
    emit(e, "add.s32 %s, %s, %s;", bits, bits, R(e, ex));
    emit(e, "mov.b32 %s, %s;", R(e, dst), bits);
}

void sfx_exp2_scaled(Emit *e, const Reg *x, int n, Reg scale_log2, Reg neg_ms, int poly_every)
{
    REG_WANT(e, scale_log2, RT_F32), REG_WANT(e, neg_ms, RT_F32);
    for (int i = 0; i < n; i++) {
        REG_WANT(e, x[i], RT_F32 | RT_B32);
        const char *xi = R(e, x[i]);
        emit(e, "fma.rn.ftz.f32 %s, %s, %s, %s;", xi, xi, R(e, scale_log2), R(e, neg_ms));
        if (poly_every && i % poly_every == poly_every - 1)
            sfx_exp2_poly(e, x[i], x[i]);
        else
            emit(e, "ex2.approx.ftz.f32 %s, %s;", R(e, x[i]), R(e, x[i]));
    }
}

void sfx_mask(Emit *e, Reg x, int c, Reg t_hi, Reg t_lo)
{
    REG_WANT(e, x, RT_F32 | RT_B32);
    const char *p = R(e, reg_pred(e, "mask_p"));
    if (reg_is(t_hi) && REG_WANT(e, t_hi, RT_B32)) {
        emit(e, "setp.lt.s32 %s, %s, %d;", p, R(e, t_hi), c);
        emit(e, "@%s mov.f32 %s, %s;", p, R(e, x), PTX_NEG_INF);
    }
    if (reg_is(t_lo) && REG_WANT(e, t_lo, RT_B32)) {
        emit(e, "setp.gt.s32 %s, %s, %d;", p, R(e, t_lo), c);
        emit(e, "@%s mov.f32 %s, %s;", p, R(e, x), PTX_NEG_INF);
    }
}

void sfx_reduce_lanes(Emit *e, const char *op, Reg v, Reg tmp, int lanes)
{
    REG_WANT(e, v, RT_F32), REG_WANT(e, tmp, RT_F32);
    for (int x = 1; x < lanes; x *= 2) {
        op_shfl_bfly(e, tmp, v, x);
        emit(e, "%s.f32 %s, %s, %s;", op, R(e, v), R(e, v), R(e, tmp));
    }
}

void sfx_lse(Emit *e, Reg dst_, Reg m, Reg l_, Reg scale_log2)
{
    REG_WANT(e, dst_, RT_F32), REG_WANT(e, m, RT_F32), REG_WANT(e, l_, RT_F32), REG_WANT(e, scale_log2, RT_F32);
    const char *dst = R(e, dst_), *l = R(e, l_);
    const char *p = R(e, reg_pred(e, "lse_empty"));
    const char *t = R(e, reg_f32(e, "lse_t"));
    emit(e, "setp.eq.f32 %s, %s, 0f00000000;", p, l);
    emit(e, "lg2.approx.f32 %s, %s;", t, l);
    emit(e, "fma.rn.f32 %s, %s, %s, %s;", t, R(e, m), R(e, scale_log2), t);
    emit(e, "mul.f32 %s, %s, %s;", dst, t, PTX_LN2);
    emit(e, "selp.f32 %s, %s, %s, %s;", dst, PTX_NEG_INF, dst, p);
}

void sfx_inv_sum(Emit *e, Reg inv_, Reg l_, Reg o_scale)
{
    REG_WANT(e, inv_, RT_F32), REG_WANT(e, l_, RT_F32), REG_WANT(e, o_scale, RT_F32);
    const char *inv = R(e, inv_), *l = R(e, l_);
    const char *p = R(e, reg_pred(e, "inv_empty"));
    emit(e, "setp.eq.f32 %s, %s, 0f00000000;", p, l);
    emit(e, "rcp.approx.ftz.f32 %s, %s;", inv, l);
    emit(e, "mul.f32 %s, %s, %s;", inv, inv, R(e, o_scale));
    emit(e, "selp.f32 %s, 0f00000000, %s, %s;", inv, inv, p);
}

void sfx_inv_sum_sink(Emit *e, Reg inv_, Reg l_, Reg m_, Reg sink_, Reg scale_log2, Reg o_scale)
{
    REG_WANT(e, inv_, RT_F32), REG_WANT(e, l_, RT_F32), REG_WANT(e, m_, RT_F32), REG_WANT(e, sink_, RT_F32);
    REG_WANT(e, scale_log2, RT_F32), REG_WANT(e, o_scale, RT_F32);
    const char *inv = R(e, inv_), *l = R(e, l_), *m = R(e, m_);
    const char *p = R(e, reg_pred(e, "inv_empty")), *t = R(e, reg_f32(e, "sink_t"));
    emit_note(e, "sink: the denominator gains e^(sink - m) in l's units (m = -inf counts as 0: l = 0 then)");
    emit(e, "setp.eq.f32 %s, %s, %s;", p, m, PTX_NEG_INF);
    emit(e, "selp.f32 %s, 0f00000000, %s, %s;", t, m, p);
    emit(e, "mul.f32 %s, %s, %s;", t, t, R(e, scale_log2));
    emit(e, "neg.f32 %s, %s;", t, t);
    emit(e, "fma.rn.f32 %s, %s, %s, %s;", t, R(e, sink_), PTX_LOG2E, t);
    emit(e, "ex2.approx.ftz.f32 %s, %s;", t, t);
    emit(e, "add.f32 %s, %s, %s;", t, t, l);
    emit(e, "setp.eq.f32 %s, %s, 0f00000000;", p, l);
    emit(e, "rcp.approx.ftz.f32 %s, %s;", inv, t);
    emit(e, "mul.f32 %s, %s, %s;", inv, inv, R(e, o_scale));
    emit(e, "selp.f32 %s, 0f00000000, %s, %s;", inv, inv, p);
}

void sfx_softcap(Emit *e, const Reg *x, int n)
{
    for (int i = 0; i < n; i++) {
        emit(e, "mul.f32 %s, %s, %%softcap_scale;", R(e, x[i]), R(e, x[i]));
        emit(e, "tanh.approx.f32 %s, %s;", R(e, x[i]), R(e, x[i]));
    }
}

void sfx_alibi_slope(Emit *e, Reg nslope, Reg head, Reg addr)
{
    REG_WANT(e, nslope, RT_F32), REG_WANT(e, head, RT_B32), REG_WANT(e, addr, RT_B64);
    emit(e, "mul.wide.u32 %s, %s, 4;", R(e, addr), R(e, head));
    emit(e, "add.u64 %s, %s, %%alibi_ptr;", R(e, addr), R(e, addr));
    op_ld_global(e, REG_NONE, "f32", nslope, addr, 0);
    emit(e, "mul.f32 %s, %s, %%alibi_scale;", R(e, nslope), R(e, nslope));
    emit(e, "neg.f32 %s, %s;", R(e, nslope), R(e, nslope));
}

void sfx_alibi(Emit *e, const Reg *x, const int *col, int n, Reg d0, Reg nslope, Reg df, Reg t)
{
    emit(e, "cvt.rn.f32.s32 %s, %s;", R(e, df), R(e, d0));
    for (int i = 0; i < n; i++) {
        emit(e, "add.f32 %s, %s, 0f%08X;", R(e, t), R(e, df), threshold_bits(col[i]));
        emit(e, "abs.f32 %s, %s;", R(e, t), R(e, t));
        emit(e, "fma.rn.f32 %s, %s, %s, %s;", R(e, x[i]), R(e, t), R(e, nslope), R(e, x[i]));
    }
}

void sfx_sink_load(Emit *e, Reg dst, Reg head, Reg addr)
{
    REG_WANT(e, dst, RT_F32), REG_WANT(e, head, RT_B32), REG_WANT(e, addr, RT_B64);
    emit(e, "mul.wide.u32 %s, %s, 4;", R(e, addr), R(e, head));
    emit(e, "add.u64 %s, %s, %%sink_ptr;", R(e, addr), R(e, addr));
    op_ld_global(e, REG_NONE, "f32", dst, addr, 0);
}

void ring_reset(Emit *e, Reg stage, Reg phase)
{
    REG_WANT(e, stage, RT_B32), REG_WANT(e, phase, RT_B32);
    emit(e, "mov.u32 %s, 0;", R(e, stage));
    emit(e, "mov.u32 %s, 0;", R(e, phase));
}

void ring_free_parity(Emit *e, Reg par, Reg phase)
{
    REG_WANT(e, par, RT_B32), REG_WANT(e, phase, RT_B32);
    emit(e, "xor.b32 %s, %s, 1;", R(e, par), R(e, phase));
}

void ring_advance(Emit *e, Reg stage_, Reg phase_, int stages)
{
    REG_WANT(e, stage_, RT_B32), REG_WANT(e, phase_, RT_B32);
    const char *stage = R(e, stage_), *phase = R(e, phase_);
    if (stages == 1) {
        emit(e, "xor.b32 %s, %s, 1;", phase, phase);
        return;
    }
    const char *p = R(e, reg_pred(e, "ring_wrap"));
    emit(e, "add.u32 %s, %s, 1;", stage, stage);
    emit(e, "setp.eq.u32 %s, %s, %d;", p, stage, stages);
    emit(e, "@%s mov.u32 %s, 0;", p, stage);
    emit(e, "@%s xor.b32 %s, %s, 1;", p, phase, phase);
}

void sfx_row_bounds(Emit *e, Reg row_seq_, Reg kv0_, Reg t_hi_, Reg t_lo_)
{
    REG_WANT(e, row_seq_, RT_B32), REG_WANT(e, kv0_, RT_B32), REG_WANT(e, t_hi_, RT_B32);
    int wl, wr;
    mask_bounds(&e->p->cfg, &wl, &wr);
    const char *row_seq = R(e, row_seq_), *kv0 = R(e, kv0_), *t_hi = R(e, t_hi_);
    const char *k1 = R(e, reg_b32(e, "sfx_klast"));
    emit(e, "sub.u32 %s, %%seqlen_k, 1;", k1);
    if (wr >= 0) {
        emit(e, "add.s32 %s, %s, %%kv_off;", t_hi, row_seq);
        emit(e, "add.s32 %s, %s, %d;", t_hi, t_hi, wr);
        emit(e, "min.s32 %s, %s, %s;", t_hi, t_hi, k1);
    } else {
        emit(e, "mov.u32 %s, %s;", t_hi, k1);
    }
    emit(e, "sub.s32 %s, %s, %s;", t_hi, t_hi, kv0);
    if (wl >= 0 && reg_is(t_lo_) && REG_WANT(e, t_lo_, RT_B32)) {
        const char *t_lo = R(e, t_lo_);
        emit(e, "add.s32 %s, %s, %%kv_off;", t_lo, row_seq);
        emit(e, "sub.s32 %s, %s, %d;", t_lo, t_lo, wl);
        emit(e, "sub.s32 %s, %s, %s;", t_lo, t_lo, kv0);
    }
}

int named_bar_threads(const Plan *p, int id) { return p->bars[id - 1].threads; /* ids start at 1 (plan_bar) */ }

void smem_at(Emit *e, Reg dst, uint32_t off)
{
    REG_WANT(e, dst, RT_B32);
    emit(e, "add.u32 %s, %%smem, %u;", R(e, dst), off);
}

Reg smem_reg(Emit *e, const char *name, uint32_t off)
{
    Reg r = reg_b32(e, "%s", name);
    smem_at(e, r, off);
    return r;
}

void addr_indexed(Emit *e, Reg dst, Reg base, Reg idx, uint32_t stride)
{
    REG_WANT(e, dst, RT_B32), REG_WANT(e, base, RT_B32), REG_WANT(e, idx, RT_B32);
    emit(e, "mad.lo.u32 %s, %s, %u, %s;", R(e, dst), R(e, idx), stride, R(e, base));
}

void smem_indexed(Emit *e, Reg dst, uint32_t off, Reg idx, uint32_t stride)
{
    addr_indexed(e, dst, reg_find(e, "smem"), idx, stride);
    emit(e, "add.u32 %s, %s, %u;", R(e, dst), R(e, dst), off);
}

void mbar_at(Emit *e, Reg dst, uint32_t off, int i) { smem_at(e, dst, off + MBAR_BYTES * (uint32_t)i); }

void mbar_indexed(Emit *e, Reg dst, Reg base, Reg idx) { addr_indexed(e, dst, base, idx, MBAR_BYTES); }

Reg mbar_init_begin(Emit *e, char *lbl, size_t n, const char *section)
{
    const char *pr = R(e, reg_pred(e, "p_not_t0"));
    Reg b = reg_b32(e, "bar");
    emit_section(e, "%s", section);
    emit(e, "setp.ne.u32 %s, %%thread, 0;", pr);
    emit(e, "@%s bra %s;", pr, new_label(e, lbl, n, "init_done"));
    return b;
}

static Mbar mbar_entry(Emit *e, const PlanMbar *m, const char *what)
{
    if (!m) {
        emit_fail(e, "internal: the plan has no mbarrier %s", what);
        return (Mbar){"?", 0, 1};
    }
    return (Mbar){m->name, m->off, m->count};
}

Mbar mbar_plan(Emit *e, const char *name) { return mbar_entry(e, plan_mbar_find(e->p, name), name); }

Mbar mbar_plan_at(Emit *e, uint32_t off)
{
    for (int i = 0; i < e->p->n_mbars; i++)
        if (e->p->mbars[i].off == off) return mbar_entry(e, &e->p->mbars[i], "");
    return mbar_entry(e, NULL, "at that offset");
}

void mbar_init(Emit *e, Reg b, const Mbar *m, int i)
{
    mbar_at(e, b, m->off, i);
    op_mbar_init(e, b, m->count);
}

void mbar_init_end(Emit *e, const char *lbl)
{
    op_mbar_init_fence(e);
    emit_label(e, lbl);
}

void swizzle_row(Emit *e, Reg key_, Reg base_, Reg row, Reg buf)
{
    REG_WANT(e, key_, RT_B32), REG_WANT(e, base_, RT_B32), REG_WANT(e, row, RT_B32), REG_WANT(e, buf, RT_B32);
    int sw = e->p->swizzle_bytes, units = sw / 16;
    const char *key = R(e, key_), *base = R(e, base_);
    emit(e, "mul.lo.u32 %s, %s, %d;", base, R(e, row), sw);
    emit(e, "shr.u32 %s, %s, 7;", key, base); /* the pattern repeats every 8 rows of 128 bytes */
    emit(e, "and.b32 %s, %s, %d;", key, key, units - 1);
    emit(e, "add.u32 %s, %s, %s;", base, base, R(e, buf));
}

void swizzle_unit(Emit *e, Reg dst, Reg key, int u)
{
    REG_WANT(e, dst, RT_B32), REG_WANT(e, key, RT_B32);
    emit(e, "xor.b32 %s, %s, %d;", R(e, dst), R(e, key), u);
    emit(e, "shl.b32 %s, %s, 4;", R(e, dst), R(e, dst)); /* 16-byte units */
}

void lse_store(Emit *e, Reg guard, Reg head, Reg seq, Reg idx_, Reg addr, Reg lse)
{
    REG_WANT(e, head, RT_B32), REG_WANT(e, seq, RT_B32), REG_WANT(e, idx_, RT_B32), REG_WANT(e, addr, RT_B64);
    const char *idx = R(e, idx_);
    if (e->p->cfg.varlen) {
        emit_note(e, "varlen: LSE [heads_q, total_q], the row's packed index");
        emit(e, "add.u32 %s, %s, %%vl_q_start;", idx, R(e, seq));
        emit(e, "mad.lo.u32 %s, %s, %%total_q, %s;", idx, R(e, head), idx);
    } else {
        emit(e, "mad.lo.u32 %s, %%bidx, %%heads_q, %s;", idx, R(e, head));
        emit(e, "mad.lo.u32 %s, %s, %%seqlen_q, %s;", idx, idx, R(e, seq));
    }
    emit(e, "mad.wide.u32 %s, %s, 4, %%lse_ptr;", R(e, addr), idx); /* fp32 */
    op_st_global_f32(e, guard, addr, lse);
}
