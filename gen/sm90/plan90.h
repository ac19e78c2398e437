/* plan90.h - the sm_90a (Hopper, FlashAttention-3 design) part of the plan.
 * Filled by sm90/plan.c; read by sm90/mha.c. Offsets are relative to the
 * aligned dynamic shared memory base. */
#ifndef FA4GEN_PLAN90_H
#define FA4GEN_PLAN90_H
#include <stdint.h>

#include "../fa4gen.h"

/* The wgmma shapes and accumulator fragment the consumers are written for (PTX ISA, "Register
 * fragments and shared memory matrix layouts" for wgmma .m64nNk16). */
typedef struct {
    int k_step;             /* elements per wgmma K step (k16) */
    int qk_steps, pv_steps; /* wgmmas per S = Q K^T and per O += P V */
    int lanes_per_row;      /* lanes that share one accumulator row */
    int halves, half_rows;  /* rows per thread: lane/4 and lane/4 + half_rows */
    int warp_rows;          /* accumulator rows per warp */
    int a_regs;             /* b32 registers of one A fragment (one K step of P) */
    int s_regs, o_regs, p_regs; /* per thread: S and O accumulators (f32), P (packed pairs) */
} Sm90Frag;

/* plan note claim runs: a claim takes a run of tiles (config claim) only while more than claim + CLAIM_SINGLE_WAVES
 * waves of tiles are left past the run's first tile, so the grid's last waves go a tile a claim and the CTAs' ends
 * stay within about one tile of each other */
enum { CLAIM_SINGLE_WAVES = 2 };

typedef struct Sm90Plan {
    Sm90Frag frag;
    int consumers;       /* consumer warpgroups; each owns mma_m query rows */
    int mma_m;           /* rows per wgmma (64) */
    int producer_regs, consumer_regs; /* setmaxnreg targets */

    /* buffers: every tile is an array of swizzled chunks [chunk][row][chunk_elems] */
    uint32_t off_q, q_chunk_bytes;            /* Q tiles (q_slots of tx_q bytes); each reused for its O */
    int q_slots;                              /* 2: the next tile's Q loads during this tile's epilogue */
    int q_release_late; /* q_slots 2, plain epilogue: a slot is freed one tile after its O store was issued */
    int coords_ahead;   /* persistent, dense, unsplit: the next tile's coordinates while the first QK runs */
    uint32_t off_k, k_stage_bytes, k_chunk_bytes;
    uint32_t off_v, v_stage_bytes, v_chunk_bytes;

    /* mbarriers (8 B each; per-stage ones are arrays) */
    uint32_t bar_q_full, bar_q_empty; /* q_slots each */
    uint32_t bar_k_full, bar_k_empty, bar_v_full, bar_v_empty;
    int q_empty_arrivals;  /* one per consumer warpgroup */
    int kv_empty_arrivals; /* one per consumer warp */

    uint32_t tx_q, tx_k, tx_v; /* expected transaction bytes per load */

    int bar_epilogue0; /* named barrier id of consumer 0's epilogue; consumer w uses +w */
    int pingpong;      /* consumers take turns issuing their wgmmas */
    int rescale;       /* conditional rescale threshold, log2 units (0 = whenever the max grows) */
    int poly_every;    /* every n-th exp2 by the FMA polynomial (0 = all on MUFU) */
    int bar_turn0;     /* named barrier id of consumer 0's turn; consumer w waits on +w */
    /* decode (split=1, group > 1 dividing bm, no score_mod): the GQA group is packed into the M
     * tile, row r = (seq m0 + r % seq_rows, head h0 + r / seq_rows) */
    int packed, seq_rows;
    /* plan note diag half: a consumer whose rows see no key of a block's upper half (causal diagonal, window edge,
     * the sequence's last block) runs a half-wide masked softmax and P V over bn/32 k16 steps there */
    int diag_half;
    /* cluster split (cluster=N): each CTA's O / l rows (f32, cstage_row_bytes apart) then its LSEs */
    uint32_t off_cstage, cstage_row_bytes;
    /* plan kv tail: warp scrub_warp of the producer warpgroup zeroes the tail block's V rows past the
     * sequence's end; the tail block's V lands on bar_v_tail[stage] (1 arrival + tx), the scrub warp then
     * arrives on bar_v_full[stage]; bar_scrub: the warp's named barrier (its stores before lane 0's arrive) */
    int scrub_warp, bar_scrub;
    uint32_t bar_v_tail;
    /* config dynamic: the tile index of each Q slot (u32) and the mbarrier that says it is written */
    uint32_t off_tile_ids, bar_tile;
    /* plan pdl prefetch kv, unsplit: lane 0 of warp watch_warp (-1: none) passes griddepcontrol.wait and arrives on
     * bar_prev; the producer prefetches the first tile only while that phase is open (the previous grid still runs) */
    int watch_warp;
    uint32_t bar_prev;
} Sm90Plan;

_Static_assert(sizeof(Sm90Plan) <= PLAN_FAMILY_BYTES, "Sm90Plan outgrows Plan.family");
static inline Sm90Plan *sm90_mut(Plan *p) { return (Sm90Plan *)(void *)p->family; }
static inline const Sm90Plan *sm90_of(const Plan *p) { return (const Sm90Plan *)(const void *)p->family; }

#endif
