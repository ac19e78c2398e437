/* mha_plan.h - plan knowledge of the MHA kernels (forward and backward) that the target
 * planners and the shared emitters both read: the parameter ABI, the PDL predicates, the kv
 * tail, and the mask's key bounds. Plan stage (mha_plan.c): below the emitters of kernel.c,
 * softmax.c and varlen.c, which ask here and never re-derive; it calls none of them back. */
#ifndef FA4GEN_MHA_PLAN_H
#define FA4GEN_MHA_PLAN_H

#include "fa4gen.h"

/* The MHA parameter ABI, both targets: every tensor map in plan order, then lse (u64),
 * seqlen_q, seqlen_k, heads_q, batch (u32), scale_log2, o_scale (f32); then, only for the
 * features a config turns on, sink (u64, sink=1) and sm_scale (f32), aux (u64) (mod=).
 * Called by the planners after their maps. */
void mha_plan_params(Plan *p);

/* plan pdl early kv / prefetch kv: the roles run griddepcontrol.wait themselves (the loader after its
 * early loads and prefetches, every other role at its start), not the prologue. */
static inline int mha_roles_wait(const Plan *p) { return p->pdl_early_kv || p->pdl_prefetch_kv; }
/* plan pdl prefetch kv on an unsplit kernel (sm90a): the CTA's first tile's Q is prefetched too (its loads are the
 * tile's Q, as large as a block, where a split kernel's Q is a few rows) */
static inline int mha_prefetch_q(const Plan *p) { return p->pdl_prefetch_kv && !p->cfg.split; }
/* plan pdl prefetch kv, paged, without early loads: the loader reads the sequence's length and the
 * table entries before the wait only to aim its prefetches, and reads the length again after it. */
static inline int mha_prefetch_rereads(const Plan *p)
{
    return p->cfg.page && p->pdl_prefetch_kv && !p->pdl_early_kv;
}

/* The scrub warp's stores: st.shared.v4 (16 bytes) by each of a warp's 32 lanes (kv_tail_pass,
 * and the stride of mha_scrub_tail's lanes). */
enum { SCRUB_LANES = 32, SCRUB_STORE_BYTES = 16 };
/* plan kv tail: fills Plan.kv_tail and kv_tail_pass (both planners call it before their barriers). */
void mha_plan_kv_tail(Plan *p);

/* The mask bounds of the config: key j is visible from row i when
 * i + off - wl <= j <= i + off + wr; -1 = unbounded. */
void mask_bounds(const Config *c, int *wl, int *wr);

#endif
