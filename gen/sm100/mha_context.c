/* sm100/mha_context.c - what every role of the sm_100a MHA forward kernel computes at its start (mha100.h):
 * the smem base, the tile's coordinates, key range and KV block count, the TMEM base and lane field.
 * Emitter stage, below the roles (sm100/mha.c, mha_softmax.c, mha_correction.c), which call it; it calls
 * none of them. */
#include <stdio.h>

#include "../kernel.h"
#include "mha100.h"
#include "sm100.h"

/* The smem base once more, spelled so that ptxas recomputes it here instead of keeping the
 * prologue's value live (and spilled) across a setmaxnreg. */
void mha100_smem_base_again(Emit *e)
{
    emit_note(e, "smem base again (not the prologue's value: that would stay live across setmaxnreg)");
    emit(e, "mov.u32 %%smem, fa4_smem;");
    emit(e, "add.u32 %%smem, %%smem, %u;", e->p->smem_align - 1);
    emit(e, "shr.u32 %%smem, %%smem, %d;", __builtin_ctz(e->p->smem_align));
    emit(e, "shl.b32 %%smem, %%smem, %d;", __builtin_ctz(e->p->smem_align));
}

/* The tile's coordinates, key range and KV block count (%nblk): what mha100_role_context reads from the
 * parameters and, varlen or paged, the sequence's lengths. */
void mha100_tile_context(Emit *e)
{
    const Sm100Plan *s = sm100_of(e->p);
    tile_index(e, reg_b32(e, "tile"));
    if (s->packed) mha_tile_coords_packed(e);
    else mha_tile_coords(e);
    if (pair(e->p)) {
        const char *rank = reg(e, "b32", "cta_rank");
        emit_note(e, "the pair: the key range above covers both CTAs' rows; CTA r takes rows m0 + %d r",
                  e->p->rows_per_cta);
        emit(e, "mov.u32 %s, %%cluster_ctarank;", rank);
        emit(e, "mad.lo.u32 %%m0, %s, %d, %%m0;", rank, e->p->rows_per_cta);
        emit(e, "and.b32 %s, %s, 0x%08X;", reg(e, "b32", "lead_rank"), rank, ~(uint32_t)(s->cta_pair - 1));
        emit(e, "setp.eq.u32 %s, %s, %%lead_rank;", reg(e, "pred", "is_lead"), rank);
    }
    const char *nblk = reg(e, "b32", "nblk");
    emit_note(e, "KV blocks this tile visits, from n_end - 1 down to n_begin");
    emit(e, "sub.s32 %s, %%n_end, %%n_begin;", nblk);
    emit(e, "max.s32 %s, %s, 0;", nblk, nblk);
    if (e->p->cfg.varlen) {
        Reg past = reg_pred(e, "vl_empty");
        emit_note(e, "varlen: a tile past its sequence's end (grid sized by max_seqlen_q) visits no block and "
                  "stores nothing");
        emit(e, "setp.ge.u32 %s, %%m0, %%seqlen_q;", R(e, past));
        emit(e, "@%s mov.u32 %s, 0;", R(e, past), nblk);
    }
}

/* What every role needs, computed after its setmaxnreg so that nothing from
 * the prologue stays live into a role's smaller register budget: thread,
 * parameters, tile coordinates, KV block count, TMEM base and lane field.
 * loads_early: the load warp under plan pdl early/prefetch kv, which waits for the previous grid itself. */
void mha100_role_context(Emit *e, int loads_early)
{
    const Sm100Plan *s = sm100_of(e->p);
    mha_prologue(e);
    if (mha_roles_wait(e->p) && !loads_early) {
        emit_note(e, "plan pdl early/prefetch kv: this role's global accesses follow the previous grid (the load "
                  "warp streams or prefetches K/V before it)");
        emit(e, "griddepcontrol.wait;");
    }
    mha100_smem_base_again(e);
    mha100_tile_context(e);
    op_ld_shared_b32(e, reg_b32(e, "tmem"), reg_find(e, "smem"), s->off_tmem_slot);
    emit_note(e, "TMEM lane field of this warp: lanes 32*(warp%%4) .. +31 (bits 31:16)");
    op_tmem_warp_lanes(e, reg_b32(e, "tm_lane"), reg_find(e, "warp"));
    emit(e, "and.b32 %s, %%thread, %d;", reg(e, "b32", "row"), s->tile_rows - 1);
}
