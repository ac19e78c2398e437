/* sm90/bwd_common.c - the emitter pieces both consumers of the sm_90a attention backward share (bwd90.h):
 * the low word of a K-major descriptor and the soft-cap's t and P (the iteration's coordinates and the
 * workspace row are both targets', in gen/mha_bwd.c). Emitter stage: sm90/mha_bwd.c (depth <= 128 and the
 * kernel's skeleton) and sm90/mha_bwd_depth.c (split_depth's consumer) call these; they call neither back. */
#include <stdio.h>

#include "../ops.h"
#include "../softmax.h"
#include "bwd90.h"

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
