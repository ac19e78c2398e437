/* bwd90.h - the sm_90a attention backward's part of the plan (FlashAttention-3's "SdP swapAB" scheme,
 * docs/kernels/mha-bwd.md). Filled by sm90/plan_bwd.c, read by sm90/mha_bwd.c. Offsets are relative to
 * the aligned dynamic shared memory base. */
#ifndef FA4GEN_BWD90_H
#define FA4GEN_BWD90_H
#include <stdint.h>

#include "../fa4gen.h"

typedef struct Sm90BwdPlan {
    /* split_depth 0 (depth <= 128): consumer w owns keys 64w..64w+63 of every GEMM, computed transposed
     * (S^T, dP^T; dK, dV rows; the whole depth).  split_depth 1 (depth > 128, FlashAttention-3's d256
     * shape): the consumers split the keys of S and dP (n = keys_wg each) and the depth of dK, dV and dQ
     * (kv_cols each); P and dS go through smem, dQ leaves by red.global.add.v4.f32 from registers. */
    int split_depth;
    int consumers;                    /* bwd_consumers (mha_bwd.h) */
    int keys_wg;                      /* keys of S / dP per consumer: 64 (the wgmma M) or bn / 2 (its N) */
    int kv_cols;                      /* dK / dV columns per consumer: depth or depth / 2 */
    int producer_regs, consumer_regs; /* setmaxnreg targets */
    /* per consumer thread (wgmma m64nNk16 fragments) */
    int sdp_regs;    /* S^T and dP^T accumulators (m64 n bm): bm / 2 f32 each */
    int p_regs;      /* P^T and dS^T packed to 16-bit pairs: bm / 4 b32 each (the RS A fragments) */
    int kv_regs;     /* dK and dV accumulators (m64 n depth): depth / 2 f32 each */
    int dq_tiles_m, dq_tiles_n, dq_n, dq_regs; /* the dQ block's split (mha_bwd.h): dq_n / 2 f32 per thread */
    int steps_d, steps_m, steps_n;    /* wgmma K steps of 16 over depth, bm, bn */
    int ds_stages;                    /* dS^T buffers (2: one named barrier per m-block) */
    int ds_packed_p; /* dS = P (dP - D) takes P from a packed fp16 copy (bm 128: the f32 P would not fit beside
                        dP, P^T and the in-flight dV wgmma, issued before the dP wait; fp16 data: P^T itself, bf16:
                        a second array, 11 bits instead of 8); else from the f32 S^T */

    /* shared memory: tiles are arrays of 128-byte swizzled chunks [chunk][row][64 elements] */
    uint32_t off_k, off_v, kv_chunk_bytes;       /* K, V tiles (bn rows); dK, dV staged over them at the end */
    uint32_t off_q, off_do, q_chunk_bytes, q_stage_bytes; /* Q and dO rings (bm rows), stages each */
    uint32_t off_ds, ds_atom_bytes, ds_stage_bytes;       /* dS^T: [query atom][key row][64 queries];
                                                             split_depth: dS [query row][64 keys] */
    uint32_t off_p;                              /* split_depth: P [query row][64 keys], ds_stages */
    uint32_t off_dq, dq_bytes;                   /* the dQ block f32 (mha_bwd.h layout; not split_depth) */
    uint32_t off_nl2, off_dpsum, vec_stage_bytes; /* nl2 and D rings: bm f32 a stage */

    /* mbarriers */
    uint32_t bar_kv_full, bar_q_full, bar_q_empty, bar_do_full, bar_do_empty, bar_dq_full, bar_dq_empty;
    int slot_empty_arrivals; /* one per consumer warp */
    int dq_full_arrivals;    /* every consumer thread */
    uint32_t tx_kv, tx_q, tx_do;

    /* named barriers */
    int bar_ds;      /* both consumers: dS^T (split_depth: dS) of this m-block is in smem */
    int bar_p;       /* split_depth: both consumers' P of this m-block is in smem */
    int bar_kv_done; /* both consumers: the last wgmma reading K and V is done (the epilogue reuses them) */
    int bar_epi0;    /* consumer w's dK/dV staging, + w */
    /* deterministic=1 (mha_bwd.h bwd_det_*): the adders of a dQ block (split_depth 0: the writer, 1 arrival;
     * split_depth 1: each consumer, whose thread 0 waits and increments around a named barrier turn0 + w) and
     * the spin's nanosleep, first and largest */
    int det, det_arrivals;
    int bar_turn0;
    /* tail_split=1 (mha_bwd.h "Tail split"): a split tile's f32 dK, dV partials, slot_bytes per tile in the
     * float4 [consumer][dK, dV][reg / 4][thread] order of the accumulators; the combining part waits for
     * tail_arrivals = consumers x (parts - 1) on the tile's counter */
    int tail;
    uint32_t tail_slot_bytes;
} Sm90BwdPlan;

_Static_assert(sizeof(Sm90BwdPlan) <= PLAN_FAMILY_BYTES, "Sm90BwdPlan outgrows Plan.family");
static inline Sm90BwdPlan *sm90bwd_mut(Plan *p) { return (Sm90BwdPlan *)(void *)p->family; }
static inline const Sm90BwdPlan *sm90bwd_of(const Plan *p) { return (const Sm90BwdPlan *)(const void *)p->family; }

extern const Family sm90_mha_bwd;

/* ---- the emitters' shared pieces (sm90/bwd_common.c), called by sm90/mha_bwd.c and by split_depth's
 * consumer in sm90/mha_bwd_depth.c ---- */

/* wgmma m64nNk16 accumulator register of (column pair q, row half h, element x): row 16 warp + lane / 4
 * + 8 h, column 8 q + 2 (lane % 4) + x (PTX ISA, wgmma accumulator fragment). */
static inline int bwd90_acc(int q, int h, int x) { return 4 * q + 2 * h + x; }
/* Low word of a K-major SW128 descriptor of the tile at addr: start >> 4 (the LBO field or-ed in later). */
void bwd90_desc_lo(Emit *e, Reg lo, Reg addr);
/* softcap=1 (plan note softcap), before the mask: the sdp_regs S accumulators become t = tanh(S softcap_scale). */
void bwd90_softcap(Emit *e);
/* softcap=1: a pair of accumulators t (p0, p1) becomes P = exp2(t scale_log2 + nl2) with nl2 = vec[x0], vec[x1],
 * and g0, g1 = max(1 - t^2, 0) (ds/du; 0 where the mask set t = -inf). The caller packs P for dV, then folds g
 * into the P that dS takes, in the same pair: no array of g lives across the loop. */
void bwd90_softcap_p(Emit *e, Reg p0, Reg p1, Reg vec, int x0, int x1, Reg g0, Reg g1);
/* split_depth: the consumer's registers beyond the common ones, and one (query head, m-block) iteration. */
void bwd90_depth_setup(Emit *e);
void bwd90_depth_iteration(Emit *e);

#endif
