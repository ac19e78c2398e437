/* mla100.h - the sm_100a sparse MLA prefill plan (family mla-sparse on sm100a), filled by
 * sm100/mla_sparse.c's planner and read by its emitter. Offsets are relative to the aligned
 * dynamic shared memory base; TMEM columns relative to the allocation. */
#ifndef FA4GEN_MLA100_H
#define FA4GEN_MLA100_H

#include "../fa4gen.h"

/* The family's fixed numbers (the planner derives the rest from them). */
enum {
    MLA_DV = 512,             /* V: the first 512 columns of every kv row (fa4.h) */
    MLA_HEADS = 64,           /* query heads per CTA: the MMA M of the head-64 kernel */
    MLA_WARP = 32,
    MLA_SFX_WARPS = 4,
    MLA_LANE_HALF = 16,       /* the upper data-path half of M = 64 starts at this TMEM lane */
    MLA_TMEM_COLS = 512,
    MLA_SMEM_LIMIT = 232448,  /* sm_100a dynamic shared memory per CTA (228 KB - 1 KB) */
    MLA_O_CHUNK = 32,         /* O columns per tcgen05.ld/st */
    MLA_MAX_REGS = 248,       /* per thread at entry: 192 (320 with fp8) threads need no setmaxnreg */
    MLA_DQ_WARPS = 4,         /* fp8: the dequant warpgroup */
    MLA_RAW_STAGES = 2,       /* fp8: raw (e4m3) ring slots */
    MLA_RAW_BOX_MAX = 256,    /* fp8: bytes of a row per gather4 box: <= 256 elements, a 16 B multiple */
    MLA_UNIT = 16,            /* bytes of one swizzled smem unit */
    MLA100_NAME = 40,         /* label buffers (mla100_loop_begin's top and done) */
};
enum { MLA100_SBUFS = 2 }; /* S/P buffers in TMEM: S of block i+1 lands while P of block i is read */

typedef struct SparsePlan100 {
    int heads;            /* query heads per CTA: the MMA M (64, data path "M = 64": rows in lanes 0-15
                           * of each lane quarter, or 16-31 for an MMA whose D sits at lane 16) */
    int block;            /* b_topk: top-k positions per KV block */
    int cta_group;
    int dv;               /* V: the first dv columns of every kv row */
    int half_cols;        /* S columns per lane half: block / 2 (the two QK MMAs per K step) */
    int o_cols;           /* O columns per lane half: dv / 2 (the two PV MMAs) */
    int mma_k;            /* elements per MMA K step */
    int qk_steps, pv_steps; /* K steps per QK MMA pair and per PV MMA pair */
    int p_step_cols;      /* TMEM columns of P per PV K step */
    int lane_half;        /* TMEM lane offset of the upper data-path half (16), as an address field */
    uint32_t idesc_qk, idesc_pv;
    uint64_t desc_q, desc_k, desc_v; /* smem descriptors with start address 0 */

    /* shared memory */
    uint32_t off_q, q_chunk_bytes;
    uint32_t off_kv, kv_stage_bytes, kv_chunk_bytes;
    uint32_t k_half_bytes;  /* K rows block/2.. start this far into each chunk */
    uint32_t v_half_bytes;  /* V columns dv/2.. start this far into a stage */
    uint32_t off_mask, mask_stage_bytes; /* validity bits of a block: block / 32 words */
    uint32_t off_tmem_slot;
    int stages;           /* num_mbars */
    uint32_t tx_q, tx_kv;

    /* mbarriers */
    uint32_t bar_q_full, bar_kv_full, bar_kv_empty, bar_s_full, bar_p_full, bar_pv_done;
    int bar_tmem_free;    /* named barrier: softmax done with TMEM, the MMA warp frees it */

    /* TMEM */
    uint32_t tm_o, tm_s[MLA100_SBUFS];
    /* Q split (pair): the first q_smem_chunks chunks stay in smem; the rest land in the k ring first
     * (staging) and are copied to TMEM at tm_q (both lane halves, tcgen05.cp), 8 columns a K step */
    int q_smem_chunks, q_smem_steps;
    uint32_t tm_q, bar_q_copied;
    /* tma_store: O (bf16) staged over the dead kv ring in 128B-swizzled chunks of 64 columns x 64 heads,
     * then one thread stores every chunk with a TMA store (map out) */
    int tma_store, ostage_chunks, bar_ostaged;
    uint32_t off_ostage, ostage_chunk_bytes;
    int o_chunk;          /* O columns per tcgen05.ld/st in the rescale and the epilogue */

    /* the pair (cta_group 2): CTA r gathers positions k_rows r .. of a block (K, all columns) and
     * every position's V columns of its d_v half (v_chunks chunks of block rows) */
    int k_rows, v_chunks;
    uint32_t off_v, v_chunk_bytes, v_stage_bytes;
    uint32_t off_xchg, xchg_words;   /* softmax: row max, row sum, P words of the other key half */
    uint32_t bar_mask_full;          /* local: the slot's validity bits written (the pair's kv_full is the even CTA's) */
    int pair_arrivals;               /* bar_p_full: the softmax threads of both CTAs */
    int bar_sfx;                     /* named barrier of the softmax warps (the key halves meet) */

    /* fp8 kv (dtype e4m3): rows gathered as bytes into a raw ring (raw_chunks boxes of raw_box bytes
     * a row, no swizzle), dequantised to the bf16 slot by the dequant warpgroup */
    int kv_fp8;
    int raw_stages, raw_chunks, raw_box;
    uint32_t off_raw, raw_stage_bytes, raw_chunk_bytes, tx_raw;
    uint32_t off_coord, coord_stage_bytes; /* the row coordinates of a raw slot (the scales' rows) */
    uint32_t off_raw_mask;
    uint32_t bar_raw_full, bar_raw_empty;
    int warp_dq, dq_units;                 /* first dequant warp; 16-byte bf16 units per thread a block */

    /* roles */
    int warp_mma, warp_load, sfx_warps;
    int rescale, poly_every;
    int qk_ahead;         /* pair, two or more KV slots: the MMA warp issues S(i+1) = Q K(i+1)^T into the other
                           * S buffer before it waits for P(i) and issues O += P(i) V(i); a slot's K and V then
                           * land and are freed apart (bar_kv_full / bar_kv_empty: K and the bits; bar_v_full /
                           * bar_v_empty: V), so K of block i+2 is gathered once QK(i) read the slot */
    uint32_t bar_v_full, bar_v_empty, tx_v;
} SparsePlan100;

_Static_assert(sizeof(SparsePlan100) <= PLAN_FAMILY_BYTES, "SparsePlan100 outgrows Plan.family");
static inline SparsePlan100 *mla100_plan(Plan *p) { return (SparsePlan100 *)(void *)p->family; }
static inline const SparsePlan100 *mla100(const Plan *p) { return (const SparsePlan100 *)(const void *)p->family; }

int sm100_emit_mla_sparse(Emit *e); /* sm100/mla_sparse.c: the family's emitter, one of the two below */
int sm100_emit_mla_head64(Emit *e); /* sm100/mla_head64.c: the head-64 kernel (cta_group 1) */
int sm100_emit_mla_pair(Emit *e);   /* sm100/mla_pair.c: the head-128 kernel (cta_group 2) */
/* Shared by both kernels (sm100/mla_common.c): the kv-block loop's head and tail (counter j, the ring
 * at slot 0 / phase 0, the exit test at the top; `who` prefixes labels), a 64-bit element address
 * base + (a * stride + b) * bytes, and the epilogue (O / l x sink factor to bf16, lse, max_logits;
 * pair: one row half per thread of the CTA pair's data path, else one row per lane pair). */
void mla100_prologue(Emit *e, int pair);   /* coordinates, parameters, the token and heads (pair: the cluster's) */
void mla100_tmem_alloc(Emit *e, int pair); /* TMEM columns (pair: cta_group::2 in each CTA), then the CTA/cluster syncs */
void mla100_loop_begin(Emit *e, const char *who, Reg j, Reg stage, Reg phase, char *top, char *done); /* top, done: MLA100_NAME chars */
void mla100_loop_end(Emit *e, Reg j, Reg stage, Reg phase, int stages, const char *top, const char *done);
void mla100_indices(Emit *e, Reg j, Reg stage, int pair); /* block j's indices, coordinates and validity bits */
void mla100_sfx_dispatch(Emit *e, void (*block)(Emit *e, int buf)); /* softmax of processed block %sx_it, it++ */
void mla100_elem_addr(Emit *e, Reg dst, Reg base, Reg a, Reg stride, Reg b, int bytes);
void mla100_epilogue(Emit *e, int pair);
void mla100_rescale(Emit *e);
void mla100_dq_word(Emit *e, Reg w, Reg sc, Reg *out); /* fp8: four e4m3 of w times sc -> two bf16 pairs in out[0..1] */
/* The role dispatch of either kernel (plan: sfx_warps, warp_mma, warp_load, warp_dq): each warp branches to
 * its role; the load role's code comes first, then $dequant (fp8 kv only), $mma and $softmax, each role's
 * code from its emitter. The caller emits $exit and what follows; %p_role is free for it. */
typedef struct {
    void (*load)(Emit *e), (*dequant)(Emit *e), (*mma)(Emit *e), (*softmax)(Emit *e);
} Mla100Roles;
void mla100_roles(Emit *e, const Mla100Roles *r);
extern const Family sm100_mla_sparse;

#endif
