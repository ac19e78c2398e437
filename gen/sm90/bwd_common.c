/* sm90/bwd_common.c - the emitter pieces both consumers of the sm_90a attention backward share (bwd90.h):
 * the iteration's m-block and query head, the workspace row, the low word of a K-major descriptor, and the
 * soft-cap's t and P. Emitter stage: sm90/mha_bwd.c (depth <= 128 and the kernel's skeleton) and
 * sm90/mha_bwd_depth.c (split_depth's consumer) call these; they call neither back. */
#include <stdio.h>

#include "../ops.h"
#include "../softmax.h"
#include "bwd90.h"

/* Iteration %it_reg -> m-block m and query head hq (g = it / nm of the kv head's group). */
void bwd90_iter_coords(Emit *e, Reg itr, Reg m, Reg hq)
{
    const Plan *p = e->p;
    if (p->cfg.group == 1) {
        emit(e, "add.u32 %s, %%m_begin, %s;", R(e, m), R(e, itr));
        if (reg_is(hq)) emit(e, "mov.u32 %s, %%kvh;", R(e, hq));
        return;
    }
    Reg g = reg_b32(e, "ic_g");
    emit(e, "div.u32 %s, %s, %%nm;", R(e, g), R(e, itr));
    emit(e, "rem.u32 %s, %s, %%nm;", R(e, m), R(e, itr));
    emit(e, "add.u32 %s, %s, %%m_begin;", R(e, m), R(e, m));
    if (reg_is(hq)) emit(e, "mad.lo.u32 %s, %%kvh, %d, %s;", R(e, hq), p->cfg.group, R(e, g));
}

/* ws = the workspace row of (hq, m)'s first query: (bws heads_q + hq) q_rows + pad + m bm (u64). */
void bwd90_ws_row(Emit *e, Reg ws, Reg m, Reg hq)
{
    Reg t = reg_b32(e, "wr_t"), t64 = reg_b64(e, "wr_t64");
    if (e->p->cfg.varlen) emit(e, "mov.u32 %s, %s;", R(e, t), R(e, hq));
    else emit(e, "mad.lo.u32 %s, %%bidx, %%heads_q, %s;", R(e, t), R(e, hq));
    emit(e, "mul.wide.u32 %s, %s, %%q_rows;", R(e, ws), R(e, t));
    emit(e, "mad.lo.u32 %s, %s, %d, %%pad;", R(e, t), R(e, m), e->p->bm);
    op_cvt(e, "u64.u32", t64, t);
    emit(e, "add.s64 %s, %s, %s;", R(e, ws), R(e, ws), R(e, t64));
}

/* Low word of a K-major SW128 descriptor of the tile at addr (u32): start >> 4 | LBO field. */
void bwd90_desc_lo(Emit *e, Reg lo, Reg addr)
{
    emit(e, "shr.u32 %s, %s, 4;", R(e, lo), R(e, addr));
    emit(e, "and.b32 %s, %s, 0x3FFF;", R(e, lo), R(e, lo));
}

void bwd90_softcap(Emit *e)
{
    const Sm90BwdPlan *s = sm90bwd_of(e->p);
    Reg sacc = reg_find(e, "s");
    emit_note(e, "plan note softcap: t = tanh(S softcap_scale), before the mask (the forward's order)");
    for (int i = 0; i < s->sdp_regs; i++) {
        Reg v = reg_at(e, sacc, i);
        sfx_softcap(e, &v, 1);
    }
}

void bwd90_softcap_p(Emit *e, Reg p0, Reg p1, Reg vec, int x0, int x1, Reg g0, Reg g1)
{
    const Reg v[2] = {p0, p1}, g[2] = {g0, g1};
    const int x[2] = {x0, x1};
    for (int k = 0; k < 2; k++) {
        emit(e, "neg.f32 %s, %s;", R(e, g[k]), R(e, v[k]));
        emit(e, "fma.rn.f32 %s, %s, %s, %s;", R(e, g[k]), R(e, g[k]), R(e, v[k]), PTX_ONE);
        emit(e, "max.f32 %s, %s, 0f00000000;", R(e, g[k]), R(e, g[k]));
        emit(e, "fma.rn.ftz.f32 %s, %s, %%scale_log2, %s;", R(e, v[k]), R(e, v[k]), R(e, reg_at(e, vec, x[k])));
        emit(e, "ex2.approx.ftz.f32 %s, %s;", R(e, v[k]), R(e, v[k]));
    }
}
