/* mla90.h - the sm_90a sparse MLA prefill plan (family mla-sparse), filled by
 * sm90/mla_sparse.c's planner and read by its emitter. Offsets are relative to
 * the aligned dynamic shared memory base. */
#ifndef FA4GEN_MLA90_H
#define FA4GEN_MLA90_H

#include "../fa4gen.h"

typedef struct SparsePlan90 {
    int heads;            /* query heads per CTA: the wgmma M (bm) */
    int block;            /* top-k positions per KV block (bn) */
    int consumers;        /* consumer warpgroups; each owns dv_per_consumer columns of O */
    int dv, dv_per_consumer;
    int qk_chunks, dv_chunks; /* 64-element (128-byte) chunks of a Q/KV row and of V */
    int units;            /* 16-byte copies per Q/KV row */
    uint32_t chunk_bytes; /* one chunk of a tile: rows x 128 B, 128B-swizzled */
    uint32_t off_q, off_kv, kv_stage_bytes, off_valid, valid_stage_bytes;
    uint32_t bar_q_full, bar_kv_full, bar_kv_empty;
    int q_full_count, kv_full_count, kv_empty_count;
    int producer_regs, consumer_regs;
    int rescale;          /* conditional O rescale threshold, log2 units */
    /* the split of S: consumer c computes S and P of block 2j+c (kv slot c) and shares P through smem */
    uint32_t off_p[2];    /* P of consumer c's block (heads x block bf16, 128B-swizzled), read by the other */
    int p_in_rope;        /* P of consumer 0 sits in the rope chunk of slot 0 (read only by consumer 0's QK) */
    int half_chunks;      /* a slot is two halves: A = chunks [0, half_chunks) = consumer 0's V columns, B = the
                           * rest; consumer h is the last reader of half h of both slots and frees it */
    uint32_t off_xmax, off_xsum; /* per consumer, per head: block row max and final row sum, exchanged */
    int bar_max, bar_p, bar_sum; /* named barrier ids the two consumers meet at */
    int tma_store;        /* O staged in the Q tile (consumer c: chunks 4c..) and stored by TMA */
    int bar_epi0;         /* named barrier bar_epi0 + c: consumer c's O is staged (its 128 threads) */
    int qk_steps, pv_steps; /* wgmmas per S block and per O += P V */
} SparsePlan90;

_Static_assert(sizeof(SparsePlan90) <= PLAN_FAMILY_BYTES, "SparsePlan90 outgrows Plan.family");
static inline SparsePlan90 *mla90_plan(Plan *p) { return (SparsePlan90 *)(void *)p->family; }
static inline const SparsePlan90 *mla90(const Plan *p) { return (const SparsePlan90 *)(const void *)p->family; }

int sm90_emit_mla_sparse(Emit *e);
extern const Family sm90_mla_sparse;

#endif
