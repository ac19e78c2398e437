/* sm100/mha100.h - the pieces the sm_100a MHA forward kernel's files share: the skeleton and the load, MMA
 * and scrub roles (sm100/mha.c), every role's start (sm100/mha_context.c), the softmax warpgroups
 * (sm100/mha_softmax.c) and the correction warpgroup with the epilogue (sm100/mha_correction.c). Emitter
 * stage, private to those four files. */
#ifndef FA4GEN_MHA100_H
#define FA4GEN_MHA100_H

#include "../fa4gen.h"
#include "../ops.h"
#include "sm100.h"

enum { NAME = 40, F32_BYTES = 4 };

/* The largest power of two <= min(left, cap): the x of one tcgen05.ld/st. */
static inline int piece(int left, int cap)
{
    int k = cap;
    while (k > left) k /= 2;
    return k;
}

static inline int pair(const Plan *p) { return sm100_of(p)->cta_pair == 2; }

/* The tile index: one CTA per tile, or one cluster (the CTA pair) per tile. */
static inline void tile_index(Emit *e, Reg dst)
{
    REG_WANT(e, dst, RT_B32);
    emit(e, "mov.u32 %s, %s;", R(e, dst), pair(e->p) ? "%clusterid.x" : "%ctaid.x");
}

/* dst = the shared::cluster address of this CTA's smem address addr in the even CTA of the
 * pair, which owns the barriers the MMAs wait on (mha100_role_context sets %lead_rank). */
static inline void lead_addr(Emit *e, Reg dst, Reg addr) { op_mapa(e, dst, addr, reg_find(e, "lead_rank")); }

/* Arrive on a barrier the MMA thread waits on: this CTA's own, or the even CTA's for the pair. */
static inline void arrive_for_mma(Emit *e, Reg bar, Reg lead_bar)
{
    if (pair(e->p)) op_mbar_arrive_cluster(e, lead_bar);
    else op_mbar_arrive(e, bar);
}

/* A role's start (sm100/mha_context.c): the MHA prologue, the smem base, the tile's coordinates, key range
 * and KV block count, the TMEM base and this warp's lane field, %row. loads_early: the load warp under plan
 * pdl early/prefetch kv, which waits for the previous grid itself. The smem base and the tile's part alone
 * serve the roles that need no more (scrub) or read them again (the load warp's next tile). */
void mha100_role_context(Emit *e, int loads_early);
void mha100_smem_base_again(Emit *e);
void mha100_tile_context(Emit *e);
/* dst = the query head of this thread's row (sm100/mha_softmax.c; the epilogue reads it too). */
void mha100_row_head(Emit *e, Reg dst);
/* The roles of the other files: softmax warpgroup (sm100/mha_softmax.c), correction warpgroup and the
 * epilogue (sm100/mha_correction.c). */
void mha100_softmax(Emit *e);
void mha100_correction(Emit *e);

#endif
