/* bwd100.h - the sm_100a attention backward's part of the plan (kind mha-bwd; FlashAttention-4's design with
 * the accumulators in Tensor Memory, docs/kernels/mha-bwd.md). Filled by sm100/plan_bwd.c, read by
 * sm100/mha_bwd.c. Offsets are relative to the aligned dynamic shared memory base; TMEM columns relative to
 * the allocation's base. */
#ifndef FA4GEN_BWD100_H
#define FA4GEN_BWD100_H
#include <stdint.h>

#include "../fa4gen.h"

typedef struct Sm100BwdPlan {
    /* warps: load (one thread: TMA), mma (one elected thread; the warp allocates TMEM), compute warpgroup
     * (thread t = TMEM lane t = key n0 + t of S^T, dP^T, dK, dV) */
    int warp_load, warp_mma, warp_compute;
    /* dq_t 0: dQ = dS K (M = bm queries in the lanes, N = depth); dq_t 1 (bm 64): dQ^T = K^T dS^T (M = depth in
     * the lanes, N = bm), so that every MMA has M = 128 */
    int dq_t;
    /* pair 2 (config cta=2, d128): a cluster of two CTAs owns 2 x 128 keys; every MMA is cta_group::2, issued by the
     * even CTA (rank 0): S^T, dP^T, dV, dK as M = 256 (each CTA its 128 keys), dQ^T = K^T dS^T as M = 128 over the
     * pair's 256 keys (layout B: each CTA 64 depth rows, the query halves in lanes 0..63 / 64..127), so the pair adds
     * one dQ block per m-block instead of two. pair 1: the one-CTA kernel. */
    int pair;
    int dq_cols;                      /* TMEM columns of dQ (or dQ^T): the N of its MMA */
    int dq_tiles_m, dq_tiles_n, dq_n; /* the dQ block's layout (mha_bwd.h, bwd_dq_split) */
    int steps_d, steps_m, steps_n;    /* MMA K steps of 16 over depth, bm, bn */
    int ld_cols;                      /* columns of one tcgen05.ld in the compute warps (32x32b.x<ld_cols>) */

    /* instruction descriptors (kind::f16, f32 D) and smem descriptor templates (start 0) */
    uint32_t idesc_sdp, idesc_dkv, idesc_dq;
    uint64_t desc_kmaj;                          /* K-major SW128 (K, V, Q, dO, P^T, dS^T as K-major) */
    uint64_t desc_mn_q, desc_mn_kv, desc_mn_ds;  /* MN-major SW128: LBO = the tile's chunk stride */

    /* shared memory: tiles are arrays of 128-byte swizzled chunks [chunk][row][64 elements] */
    uint32_t off_k, off_v, kv_chunk_bytes;               /* K, V (bn rows) */
    uint32_t off_q, off_do, q_chunk_bytes, q_stage_bytes; /* Q and dO rings (bm rows) */
    uint32_t off_p, off_ds, pt_chunk_bytes, pt_bytes;    /* P^T, dS^T: [query chunk][bn key rows][64 queries] */
    uint32_t off_nl2, off_dpsum, vec_stage_bytes;        /* nl2 and D rings: bm f32 a stage */
    uint32_t off_tmem_slot;
    /* pair: a Q / dO stage is [QR: chunks x bm/2 rows, the rows half r of this CTA (S^T, dP^T's B)][QC: bm rows of
     * depth chunk r (dK, dV's B)]; KT = K's depth chunk r of the pair's 256 keys (dQ^T's A, loaded once); DSX = dS^T
     * of the pair's 256 keys x the query half r (dQ^T's B, MN-major, bm/2 of each 128-byte row used): each compute
     * thread writes its dS row's half h into CTA h's DSX (st.shared::cluster for the peer) */
    uint32_t qr_chunk_bytes, off_qc, off_kt, off_dsx, kt_bytes, dsx_bytes;
    int pair_keys, half_m; /* 2 x bn keys; bm / 2 query rows of a half */
    uint32_t tx_kv_pair, tx_q_pair, tx_vec; /* the even CTA expects both CTAs' tile bytes (+ its own nl2 / D); the odd its vectors */

    /* TMEM columns */
    uint32_t tm_s, tm_dp, tm_dq, tm_dv, tm_dk;

    /* mbarriers */
    uint32_t bar_kv_full, bar_q_full, bar_q_empty, bar_do_full, bar_do_empty;
    uint32_t bar_s_full, bar_dp_full, bar_p_full, bar_ds_full, bar_dq_full, bar_kv_done;
    int slot_empty_arrivals; /* the MMA's commit + every compute thread (nl2 / D read) */
    uint32_t tx_kv, tx_q, tx_do;

    uint32_t bar_q_vec, bar_do_vec; /* pair: per stage, this CTA's nl2 / D landed (1 arrival + tx; the tiles land on the even CTA's q_full / do_full) */
    int ds_arrivals;                /* p_full, ds_full: the compute threads of the pair (256) or of the CTA (128) */
    int bar_tmem_free; /* named: compute read dK, dV; the MMA warp frees TMEM */
    /* deterministic=1 (mha_bwd.h bwd_det_*): compute thread 0 waits for the kv block's turn at the dQ block and
     * increments after the adds, around the named barrier dq_turn of the compute warps; the spin's nanosleep */
    int det, bar_turn;
} Sm100BwdPlan;

_Static_assert(sizeof(Sm100BwdPlan) <= PLAN_FAMILY_BYTES, "Sm100BwdPlan outgrows Plan.family");
static inline Sm100BwdPlan *sm100bwd_mut(Plan *p) { return (Sm100BwdPlan *)(void *)p->family; }
static inline const Sm100BwdPlan *sm100bwd_of(const Plan *p) { return (const Sm100BwdPlan *)(const void *)p->family; }

extern const Family sm100_mha_bwd;
int sm100_emit_mha_bwd(Emit *e);

#endif
