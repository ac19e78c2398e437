/* plan100.h - the sm_100a (Blackwell, FlashAttention-4 "2Q" design) part of the plan.
 * Filled by sm100/plan.c; read by sm100/mha.c. Offsets are relative to the
 * aligned dynamic shared memory base; TMEM columns relative to the allocation. */
#ifndef FA4GEN_PLAN100_H
#define FA4GEN_PLAN100_H
#include <stdint.h>

#include "../fa4gen.h"

enum { SM100_MAX_QTILES = 2 };

/* One mbarrier ring of smem slots (K, V, or both alternating when fused). */
typedef struct Sm100Ring {
    uint32_t off;        /* first slot */
    uint32_t slot_bytes; /* one slot: the larger of what it holds */
    int slots;
    uint32_t bar_full;   /* mbarrier per slot: TMA landed (1 arrival + tx) */
    uint32_t bar_empty;  /* mbarrier per slot: MMAs done reading (tcgen05.commit) */
} Sm100Ring;

typedef struct Sm100Plan {
    int mma_m;     /* MMA M: 128, or 256 for the CTA pair (cta_group::2, 128 rows in each CTA) */
    int tile_rows; /* rows of one Q tile in this CTA: 128, one TMEM lane each */
    int qtiles;    /* Q tiles per CTA, each with its own softmax warpgroup, S and O */
    int cta_pair;  /* 1, or 2: a cluster of two CTAs shares each MMA; the even CTA issues them */

    /* query rows: row r of a Q tile is (seq q0 + r % seq_rows, head h0 + r / seq_rows) */
    int packed;      /* the group's heads share the M tile (mma_m % group == 0, group > 1) */
    int seq_rows;    /* sequence positions per Q tile (mma_m / group when packed, else mma_m) */
    int heads_per_tile;

    /* MMA shapes */
    int mma_k;               /* elements per MMA K step (32 bytes: 16 bf16/fp16, 32 e4m3) */
    int qk_pad, ov_pad;      /* depths rounded up to whole swizzle chunks */
    int qk_steps, pv_steps;  /* MMAs per tile for S = Q K^T and O += P V */
    int mma_per_kv;          /* tensor-core MMAs per KV tile, all Q tiles */
    int p_step_cols;         /* TMEM columns of P per MMA K step (32 bytes of a row / 4 bytes a column) */
    uint32_t idesc_qk, idesc_pv;        /* instruction descriptors */
    uint64_t desc_q, desc_k, desc_v;    /* smem descriptors with start address 0 */
    int kind_f8;                        /* kind::f8f6f4 (e4m3) instead of kind::f16 */

    /* shared memory */
    uint32_t off_q, q_tile_bytes, q_chunk_bytes;
    uint32_t k_tile_bytes, k_chunk_bytes, v_tile_bytes, v_chunk_bytes; /* this CTA's part of a KV tile */
    int k_rows;               /* K rows (keys) per CTA: bn / cta_pair, the pair's halves of MMA N */
    int v_chunks;             /* V column chunks per CTA: ov_chunks / cta_pair */
    int fused;                /* one ring, K and V alternating; else ring 0 = K, ring 1 = V */
    Sm100Ring ring[2];
    int n_rings;
    int k_nope_chunks;        /* rope_split: the first chunks of K come from map k, the rest from k_rope */
    /* O staging for the TMA store (over the Q tiles when they are dead, else its own entry) */
    DType o_dtype;
    int o_chunk_elems, o_chunks;
    uint32_t off_o, o_tile_bytes, o_chunk_bytes;
    int o_bufs;               /* staging buffers; tile t uses t % o_bufs */
    uint32_t off_tmem_slot;   /* u32 written by tcgen05.alloc */

    /* mbarriers, arrays of qtiles (8 B each) */
    uint32_t bar_q_full;      /* TMA: Q tile landed */
    uint32_t bar_s_full;      /* commit: S = Q K^T done */
    uint32_t bar_corr_full;   /* softmax (128 arrivals): row correction factors in TMEM */
    uint32_t bar_p_full;      /* softmax (128): P written to TMEM */
    uint32_t bar_o_ready;     /* correction (128): O rescaled, PV may accumulate */
    uint32_t bar_l_full;      /* softmax (128): final row max and sum in TMEM */
    uint32_t bar_o_full;      /* commit: last PV done, O final */
    int sfx_arrivals;         /* bar_corr_full, bar_l_full: the 128 softmax threads of this CTA */
    int pair_arrivals;        /* bar_p_full, bar_o_ready: 128 threads of each CTA of the pair */
    uint32_t tx_q, tx_k, tx_v; /* bytes one full barrier expects: both CTAs' loads for the pair */

    /* TMEM columns per Q tile */
    uint32_t tm_s[SM100_MAX_QTILES], tm_p[SM100_MAX_QTILES], tm_o[SM100_MAX_QTILES];
    uint32_t tm_stats[SM100_MAX_QTILES]; /* 3 f32 columns per row: O factor, final l, final m */
    uint32_t tm_stats_l; /* the column of the final l within a row's stats (m follows it) */
    int tmem_need;            /* columns used */

    /* softmax */
    int s_chunk;              /* S columns per tcgen05.ld */
    int rescale, poly_every;
    int o_chunk_cols;         /* O columns per correction ld/st */

    /* plan kv tail: warp warp_scrub zeroes the tail block's V rows past the sequence's end; the tail block's V
     * lands on bar_v_tail[slot] of the V ring (1 arrival + tx), the scrub warp then arrives on the slot's full
     * barrier; bar_scrub: the warp's named barrier (its stores before lane 0's arrive) */
    uint32_t bar_v_tail;
    int warp_scrub, bar_scrub;

    /* roles: warps and registers */
    int warp_sfx0, warp_corr, warp_mma, warp_load;
    int sfx_regs, corr_regs, other_regs, idle_regs;
    int bar_epilogue, bar_tmem_free; /* named barriers */
} Sm100Plan;

_Static_assert(sizeof(Sm100Plan) <= PLAN_FAMILY_BYTES, "Sm100Plan outgrows Plan.family");
static inline Sm100Plan *sm100_mut(Plan *p) { return (Sm100Plan *)(void *)p->family; }
static inline const Sm100Plan *sm100_of(const Plan *p) { return (const Sm100Plan *)(const void *)p->family; }

#endif
