/* softmax.c - online softmax, masking, exp2 and ring-state emitters shared by
 * all kernels (see softmax.h). Scores stay unscaled; the scale is folded into
 * the exp2 argument: exp2(s * scale_log2 - m * scale_log2) with one FMA. */
#include <stdio.h>
#include <string.h>

#include "kernel.h"
#include "ops.h"
#include "softmax.h"

static uint32_t threshold_bits(int t)
{
    float f = (float)t;
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void tree(Emit *e, const char *op, const char *dst, const char *const *src, int n)
{
    if (n == 1) {
        emit(e, "mov.f32 %s, %s;", dst, src[0]);
        return;
    }
    /* pairwise levels into tmp registers keep several independent chains in flight */
    enum { MAXN = 256 };
    char names[MAXN][24];
    const char *cur[MAXN];
    int m = n < MAXN ? n : MAXN;
    for (int i = 0; i < m; i++) cur[i] = src[i];
    int level = 0;
    while (m > 1) {
        int k = 0;
        for (int i = 0; i + 1 < m; i += 2, k++) {
            char tn[24];
            snprintf(tn, sizeof tn, "red%d_%d", level & 1, k);
            const char *t = (m == 2) ? dst : reg(e, "f32", tn);
            emit(e, "%s.f32 %s, %s, %s;", op, t, cur[i], cur[i + 1]);
            snprintf(names[k], sizeof names[k], "%s", t);
        }
        if (m & 1) {
            char tn[24];
            snprintf(tn, sizeof tn, "red%d_%d", level & 1, k);
            const char *t = reg(e, "f32", tn);
            emit(e, "mov.f32 %s, %s;", t, cur[m - 1]);
            snprintf(names[k], sizeof names[k], "%s", t);
            k++;
        }
        for (int i = 0; i < k; i++) cur[i] = names[i];
        m = k;
        level++;
    }
}

void sfx_max_tree(Emit *e, const char *dst, const char *const *src, int n) { tree(e, "max", dst, src, n); }
void sfx_sum_tree(Emit *e, const char *dst, const char *const *src, int n) { tree(e, "add", dst, src, n); }

void sfx_update_max_lazy(Emit *e, const char *m, const char *blk, const char *scale_log2, int threshold,
                         const char *neg_ms, const char *corr, const char *need)
{
    const char *cand = reg(e, "f32", "sfx_m_cand"), *grow = reg(e, "f32", "sfx_grow");
    const char *m_use = reg(e, "f32", "sfx_m_use"), *p = reg(e, "pred", "sfx_no_key");
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

void sfx_exp2_poly(Emit *e, const char *dst, const char *src)
{
    /* 2^x = 2^floor(x) * 2^frac: frac by Horner on the FMA pipe, floor(x) added
     * to the exponent bits. Coefficients: minimax degree 3 on [0, 1). */
    const char *x = reg(e, "f32", "poly_x");
    const char *fl = reg(e, "f32", "poly_floor");
    const char *fr = reg(e, "f32", "poly_frac");
    const char *y = reg(e, "f32", "poly_y");
    const char *bits = reg(e, "b32", "poly_bits");
    const char *ex = reg(e, "b32", "poly_exp");
    emit(e, "max.f32 %s, %s, 0fC2FE0000;", x, src); /* clamp at -127: below that 2^x flushes to 0 anyway */
    op_cvt(e, "rmi.f32.f32", fl, x);
    emit(e, "sub.f32 %s, %s, %s;", fr, x, fl);
    emit(e, "fma.rn.f32 %s, %s, 0f3D9DF09D, 0f3E6906A4;", y, fr); /* 0.0771190897, 0.2275644745 */
    emit(e, "fma.rn.f32 %s, %s, %s, 0f3F31F519;", y, y, fr);      /* 0.6951461434 */
    emit(e, "fma.rn.f32 %s, %s, %s, 0f3F800000;", y, y, fr);      /* 1.0 */
    op_cvt(e, "rzi.s32.f32", ex, fl);
    emit(e, "shl.b32 %s, %s, 23;", ex, ex);
    emit(e, "mov.b32 %s, %s;", bits, y);
    emit(e, "add.s32 %s, %s, %s;", bits, bits, ex);
    emit(e, "mov.b32 %s, %s;", dst, bits);
}

void sfx_exp2_scaled(Emit *e, const char *const *x, int n, const char *scale_log2, const char *neg_ms,
                     int poly_every)
{
    for (int i = 0; i < n; i++) {
        emit(e, "fma.rn.ftz.f32 %s, %s, %s, %s;", x[i], x[i], scale_log2, neg_ms);
        if (poly_every && i % poly_every == poly_every - 1)
            sfx_exp2_poly(e, x[i], x[i]);
        else
            emit(e, "ex2.approx.ftz.f32 %s, %s;", x[i], x[i]);
    }
}

void sfx_mask(Emit *e, const char *x, int c, const char *t_hi, const char *t_lo)
{
    const char *p = reg(e, "pred", "mask_p");
    if (t_hi) {
        emit(e, "setp.lt.s32 %s, %s, %d;", p, t_hi, c);
        emit(e, "@%s mov.f32 %s, %s;", p, x, PTX_NEG_INF);
    }
    if (t_lo) {
        emit(e, "setp.gt.s32 %s, %s, %d;", p, t_lo, c);
        emit(e, "@%s mov.f32 %s, %s;", p, x, PTX_NEG_INF);
    }
}

void sfx_reduce_lanes(Emit *e, const char *op, const char *v, const char *tmp, int lanes)
{
    for (int x = 1; x < lanes; x *= 2) {
        op_shfl_bfly(e, tmp, v, x);
        emit(e, "%s.f32 %s, %s, %s;", op, v, v, tmp);
    }
}

void sfx_lse(Emit *e, const char *dst, const char *m, const char *l, const char *scale_log2)
{
    const char *p = reg(e, "pred", "lse_empty");
    const char *t = reg(e, "f32", "lse_t");
    emit(e, "setp.eq.f32 %s, %s, 0f00000000;", p, l);
    emit(e, "lg2.approx.f32 %s, %s;", t, l);
    emit(e, "fma.rn.f32 %s, %s, %s, %s;", t, m, scale_log2, t);
    emit(e, "mul.f32 %s, %s, %s;", dst, t, PTX_LN2);
    emit(e, "selp.f32 %s, %s, %s, %s;", dst, PTX_NEG_INF, dst, p);
}

void sfx_inv_sum(Emit *e, const char *inv, const char *l, const char *o_scale)
{
    const char *p = reg(e, "pred", "inv_empty");
    emit(e, "setp.eq.f32 %s, %s, 0f00000000;", p, l);
    emit(e, "rcp.approx.ftz.f32 %s, %s;", inv, l);
    emit(e, "mul.f32 %s, %s, %s;", inv, inv, o_scale);
    emit(e, "selp.f32 %s, 0f00000000, %s, %s;", inv, inv, p);
}

void ring_reset(Emit *e, const char *stage, const char *phase)
{
    emit(e, "mov.u32 %s, 0;", stage);
    emit(e, "mov.u32 %s, 0;", phase);
}

void ring_free_parity(Emit *e, const char *par, const char *phase) { emit(e, "xor.b32 %s, %s, 1;", par, phase); }

void ring_advance(Emit *e, const char *stage, const char *phase, int stages)
{
    if (stages == 1) {
        emit(e, "xor.b32 %s, %s, 1;", phase, phase);
        return;
    }
    const char *p = reg(e, "pred", "ring_wrap");
    emit(e, "add.u32 %s, %s, 1;", stage, stage);
    emit(e, "setp.eq.u32 %s, %s, %d;", p, stage, stages);
    emit(e, "@%s mov.u32 %s, 0;", p, stage);
    emit(e, "@%s xor.b32 %s, %s, 1;", p, phase, phase);
}

void sfx_row_bounds(Emit *e, const char *row_seq, const char *kv0, const char *t_hi, const char *t_lo)
{
    int wl, wr;
    mask_bounds(&e->p->cfg, &wl, &wr);
    const char *k1 = reg(e, "b32", "sfx_klast");
    emit(e, "sub.u32 %s, %%seqlen_k, 1;", k1);
    if (wr >= 0) {
        emit(e, "add.s32 %s, %s, %%kv_off;", t_hi, row_seq);
        emit(e, "add.s32 %s, %s, %d;", t_hi, t_hi, wr);
        emit(e, "min.s32 %s, %s, %s;", t_hi, t_hi, k1);
    } else {
        emit(e, "mov.u32 %s, %s;", t_hi, k1);
    }
    emit(e, "sub.s32 %s, %s, %s;", t_hi, t_hi, kv0);
    if (wl >= 0 && t_lo) {
        emit(e, "add.s32 %s, %s, %%kv_off;", t_lo, row_seq);
        emit(e, "sub.s32 %s, %s, %d;", t_lo, t_lo, wl);
        emit(e, "sub.s32 %s, %s, %s;", t_lo, t_lo, kv0);
    }
}

int named_bar_threads(const Plan *p, int id) { return p->bars[id - 1].threads; /* ids start at 1 (plan_bar) */ }

void smem_at(Emit *e, const char *dst, uint32_t off) { emit(e, "add.u32 %s, %%smem, %u;", dst, off); }

const char *smem_reg(Emit *e, const char *name, uint32_t off)
{
    const char *r = reg(e, "b32", name);
    smem_at(e, r, off);
    return r;
}

void addr_indexed(Emit *e, const char *dst, const char *base, const char *idx, uint32_t stride)
{
    emit(e, "mad.lo.u32 %s, %s, %u, %s;", dst, idx, stride, base);
}

void smem_indexed(Emit *e, const char *dst, uint32_t off, const char *idx, uint32_t stride)
{
    addr_indexed(e, dst, "%smem", idx, stride);
    emit(e, "add.u32 %s, %s, %u;", dst, dst, off);
}

void mbar_at(Emit *e, const char *dst, uint32_t off, int i) { smem_at(e, dst, off + MBAR_BYTES * (uint32_t)i); }

void mbar_indexed(Emit *e, const char *dst, const char *base, const char *idx)
{
    addr_indexed(e, dst, base, idx, MBAR_BYTES);
}

const char *mbar_init_begin(Emit *e, char *lbl, size_t n, const char *section)
{
    const char *pr = reg(e, "pred", "p_not_t0"), *b = reg(e, "b32", "bar");
    emit_section(e, "%s", section);
    emit(e, "setp.ne.u32 %s, %%thread, 0;", pr);
    emit(e, "@%s bra %s;", pr, new_label(e, lbl, n, "init_done"));
    return b;
}

void mbar_init(Emit *e, const char *b, const Mbar *m, int i)
{
    mbar_at(e, b, m->off, i);
    op_mbar_init(e, b, m->count);
}

void mbar_init_end(Emit *e, const char *lbl)
{
    op_mbar_init_fence(e);
    emit_label(e, lbl);
}

void swizzle_row(Emit *e, const char *key, const char *base, const char *row, const char *buf)
{
    int sw = e->p->swizzle_bytes, units = sw / 16;
    emit(e, "mul.lo.u32 %s, %s, %d;", base, row, sw);
    emit(e, "shr.u32 %s, %s, 7;", key, base); /* the pattern repeats every 8 rows of 128 bytes */
    emit(e, "and.b32 %s, %s, %d;", key, key, units - 1);
    emit(e, "add.u32 %s, %s, %s;", base, base, buf);
}

void swizzle_unit(Emit *e, const char *dst, const char *key, int u)
{
    emit(e, "xor.b32 %s, %s, %d;", dst, key, u);
    emit(e, "shl.b32 %s, %s, 4;", dst, dst); /* 16-byte units */
}

void lse_store(Emit *e, const char *guard, const char *head, const char *seq, const char *idx, const char *addr,
               const char *lse)
{
    emit(e, "mad.lo.u32 %s, %%bidx, %%heads_q, %s;", idx, head);
    emit(e, "mad.lo.u32 %s, %s, %%seqlen_q, %s;", idx, idx, seq);
    emit(e, "mad.wide.u32 %s, %s, 4, %%lse_ptr;", addr, idx); /* fp32 */
    op_st_global_f32(e, guard, addr, lse);
}
