/* sm90/plan.c - the sm_90a target: defaults, checks and the plan of the
 * FlashAttention-3 style MHA forward kernel.
 *
 * CTA = 1 producer warpgroup (TMA) + `consumers` warpgroups of 64 query rows
 * each (wgmma m64). Q lives in smem for the whole tile and is reused for O in
 * the epilogue; K and V have `stages`-deep rings, each slot with a full (TMA
 * transaction) and an empty (consumer release) mbarrier.
 */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../mha_plan.h"
#include "../mha_bwd.h"
#include "bwd90.h"
#include "mla90.h"
#include "plan90.h"

int sm90_emit_mha(Emit *e);

enum { SM90_SMEM_LIMIT = 232448, SM90_MMA_M = 64, SM90_WG = 128, SM90_WARP = 32 };
/* an SM's shared memory, of which the system keeps 1 KB a resident CTA (CUDA's occupancy rules for cc 9.0) */
enum { SM90_SMEM_SM = 233472, SM90_SMEM_CTA_RESERVED = 1024 };

static int sm90_occupancy(const Config *c) { return c->occupancy > 1 ? c->occupancy : 1; }

/* Shared memory a CTA may launch with: the per-block limit, or at occupancy 2 its share of the SM's. */
static uint32_t sm90_smem_cap(const Config *c)
{
    int occ = sm90_occupancy(c);
    return occ > 1 ? SM90_SMEM_SM / (uint32_t)occ - SM90_SMEM_CTA_RESERVED : SM90_SMEM_LIMIT;
}
/* cluster split staging row: ov f32, +32 B so the epilogue's row-strided v2 stores are at most
 * 2-way bank conflicted */
#define SM90_CSTAGE_ROW_BYTES(ov) ((ov) * 4 + 32)

/* Register budget: 128 * (producer + consumers * consumer) <= 65536, and no more than the launch
 * gives the CTA (3 x 168 with 2 consumers), or setmaxnreg.inc waits forever. A paged producer looks
 * up a table entry per page of a tile: with 2 consumers it takes 8 registers from each (ptxas, 0
 * spills), and at depth 256 16 more (its 4 boxes per page of a tile; ptxas 13.0 spilled 4 bytes at
 * 40 with page 16): the consumer there needs at most 208 (bn <= 64), so 224 leaves it room. At occupancy 2 a CTA
 * has half the file: 128 * (producer + consumers * consumer) <= 32768. */
static void sm90_regs(int consumers, int paged, int ov, int occupancy, int *producer, int *consumer)
{
    int deep = paged && ov > 128;
    *producer = consumers <= 2 ? (deep ? 56 : paged ? 40 : 24) : 32;
    *consumer = consumers <= 2 ? (deep ? 224 : paged ? 232 : 240) : 160;
    int share = (65536 / occupancy / SM90_WG - *producer) / consumers / 8 * 8;
    if (share < *consumer) *consumer = share;
}

/* Registers a consumer thread needs: the S, O and P fragments plus addresses,
 * row state and loop counters (the overhead, measured with ptxas on the test matrix). */
enum { SM90_REG_OVERHEAD = 32 };
/* plan note coords ahead: the next tile's coordinates (mha_tile_coord_regs) stay live across a tile, and the plan
 * keeps that many and as many again of the consumer's registers free for them (no spills at bn 176 is not proved) */
enum { SM90_COORDS_AHEAD_REGS = 12, SM90_COORDS_AHEAD_MARGIN = 16 };
static int sm90_consumer_need(int bn, int ov) { return bn / 2 + ov / 2 + bn / 4 + SM90_REG_OVERHEAD; }

static void sm90_defaults(Config *c)
{
    int d = c->qk_depth;
    if (!c->swizzle) c->swizzle = 128;
    /* d64: 3 consumer warpgroups fit in 160 registers each (not when paged: sm90_regs) */
    if (!c->bm) c->bm = sm90_occupancy(c) > 1 ? 64 : d <= 64 && !c->page ? 192 : 128;
    if (!c->stages) c->stages = 2;
    if (!c->bn) {
        /* bn per depth and mask, measured on an H100 (bench/NOTES.md, bench/results/),
         * lowered in steps of 16 until Q + the rings fit the smem limit with the stages asked for */
        int causal = c->mask == MASK_CAUSAL, eb = dtype_bytes[c->dtype], bm = c->bm ? c->bm : 128;
        int bn = d <= 64 ? 128 : d <= 128 ? (causal ? 128 : 176) : (causal ? 64 : 80);
        int staging = c->cluster_split ? bm * SM90_CSTAGE_ROW_BYTES(c->ov_depth) + 4 * bm : 0;
        while (bn > 16 && (uint32_t)(bm * c->qk_depth * eb + c->stages * bn * (c->qk_depth + c->ov_depth) * eb +
                                     staging + 2048) > sm90_smem_cap(c))
            bn -= 16;
        while (c->page && (bn & (bn - 1))) bn &= bn - 1; /* paged: a power of two, so pages and tiles nest */
        c->bn = bn;
    }
    if (c->pingpong < 0) c->pingpong = c->bm != 64; /* one consumer has no partner to take turns with */
    if (c->exp2_poly < 0) c->exp2_poly = 0;
    if (c->rescale < 0) c->rescale = 8; /* FA4's threshold: rescale O only when a row max grows by > 2^8 */
    /* causal tiles differ in length: a grid of one CTA per tile, longest first, lets the
     * hardware balance them (measured +10-20% over the static persistent stride) */
    if (c->dynamic < 0) c->dynamic = 0; /* the runtime's choice: it owns the counter (runtime/sched.c) */
    if (c->persistent < 0) c->persistent = c->dynamic || (c->mask != MASK_CAUSAL && !c->cluster_split);
}

static int bad(char *err, size_t n, const char *msg, int v, const char *allowed)
{
    snprintf(err, n, "%s: %d is not allowed on sm90a; %s", msg, v, allowed);
    return -1;
}

static int sm90_check(const Config *c, char *err, size_t n)
{
    if (c->dtype != DT_BF16 && c->dtype != DT_FP16)
        return snprintf(err, n, "dtype: %s is not allowed on sm90a; use bf16 or fp16", dtype_name[c->dtype]), -1;
    if (c->qk_depth != c->ov_depth)
        return snprintf(err, n, "qk/ov: %d/%d is not allowed on sm90a; qk and ov depths must be equal",
                        c->qk_depth, c->ov_depth), -1;
    int chunk = c->swizzle / dtype_bytes[c->dtype];
    if (c->qk_depth < 64 || c->qk_depth > 256 || c->qk_depth % chunk)
        return snprintf(err, n, "depth: %d is not allowed on sm90a with swizzle %d; use 64..256 in steps of %d "
                        "(64, 128 and 256 are tested)", c->qk_depth, c->swizzle, chunk), -1;
    if (c->qk_depth > 128 && c->swizzle == 32)
        return snprintf(err, n, "swizzle: 32 is not allowed on sm90a with depth %d (16 boxes per tile and the "
                        "consumers run out of registers); use swizzle 64 or 128", c->qk_depth), -1;
    if (c->bm != 64 && c->bm != 128 && c->bm != 192)
        return bad(err, n, "bm", c->bm, "use 128 (2 consumer warpgroups), 192 (3) or 64 (1: decode)");
    if (sm90_occupancy(c) > 1 && c->bm != 64)
        return bad(err, n, "bm", c->bm, "use 64 with occupancy 2: two consumers would keep 112 registers each");
    if (sm90_occupancy(c) > 1 && c->cluster_split)
        return bad(err, n, "occupancy", c->occupancy, "use 1 with cluster");
    int producer, consumer, need, max_bn;
    sm90_regs(c->bm / SM90_MMA_M, c->page != 0, c->ov_depth, sm90_occupancy(c), &producer, &consumer);
    if (sm90_consumer_need(c->bn, c->ov_depth) > consumer) {
        need = sm90_consumer_need(c->bn, c->ov_depth);
        max_bn = (consumer - SM90_REG_OVERHEAD - c->ov_depth / 2) * 4 / 3 / 16 * 16;
        return snprintf(err, n, "bn: %d is not allowed on sm90a with bm %d and depth %d; a consumer thread would "
                        "need about %d registers (S %d + O %d + P %d + %d), over its %d; use bn <= %d%s", c->bn,
                        c->bm, c->ov_depth, need, c->bn / 2, c->ov_depth / 2, c->bn / 4, SM90_REG_OVERHEAD,
                        consumer, max_bn, max_bn < 16 ? " (none fits: use bm 128)" : ""), -1;
    }
    if (c->bn % 16 || c->bn < 16 || c->bn > 256) return bad(err, n, "bn", c->bn, "use a multiple of 16 in 16..256");
    if (c->stages < 2 || c->stages > 8) return bad(err, n, "stages", c->stages, "use 2..8");
    if (c->page && c->bm == 192)
        return bad(err, n, "bm", c->bm, "with paged KV use 128: with 3 consumers the producer keeps 32 registers and "
                   "spills its page lookups");
    if (c->page && (c->bn & (c->bn - 1)))
        return bad(err, n, "bn", c->bn, "with paged KV use a power of two (16..128), so a KV tile is whole pages or "
                   "lies inside one");
    if (c->mask == MASK_WINDOW && (c->window_left < -1 || c->window_right < -1))
        return bad(err, n, "mask window", c->window_left, "bounds are >= 0, or -1 for none");
    if (c->qtiles || c->cta_pair || c->rope_split)
        return snprintf(err, n, "qtiles/cta/rope_split: these are sm100a fields; leave them unset for sm90a"), -1;
    if (c->cluster_split && c->persistent)
        return bad(err, n, "persistent", c->persistent, "use 0 with cluster: a CTA runs one tile, so its producer "
                   "has exited (not blocked) when the consumers meet at the cluster barrier");
    if (c->dynamic && (!c->persistent || c->split || c->varlen || c->page))
        return bad(err, n, "dynamic", c->dynamic, "use 0 unless the kernel is persistent, dense and unsplit, without "
                   "varlen or paged KV (their roles walk the tiles on their own)");
    if (c->claim > 1 && c->dynamic <= 0)
        return bad(err, n, "claim", c->claim, "use 0 or 1 unless dynamic=1 (a claim is of the dynamic tile counter)");
    if (c->exp2_poly > 50) return bad(err, n, "poly", c->exp2_poly, "use 0..50 (percent of exp2 on the FMA pipe)");
    if (c->rescale > 8)
        return bad(err, n, "rescale", c->rescale, "use 0..8 (log2 units; P may grow to 2^rescale, and fp16 holds < 2^16)");
    if (c->diag_half == 1 && c->bn % 32)
        return bad(err, n, "bn", c->bn, "use a multiple of 32 with diag_half=1 (half a block is whole k16 steps of P V)");
    return 0;
}


static int sm90_plan(const Config *c, Plan *p, char *err, size_t n)
{
    (void)err;
    (void)n;
    Sm90Plan *s = sm90_mut(p);
    plan_geometry(c, p);
    s->packed = c->split && c->group > 1 && c->bm % c->group == 0 && !c->score_mod;
    s->seq_rows = s->packed ? c->bm / c->group : c->bm;
    p->rows_per_cta = s->seq_rows; /* sequence positions per CTA */
    p->heads_per_cta = s->packed ? c->group : 1;
    p->persistent = c->persistent;

    s->mma_m = SM90_MMA_M;
    /* the m64nNk16 fragment: 4 lanes per row, rows lane/4 and lane/4 + 8 of a warp's 16 */
    Sm90Frag f = {.k_step = 16, .lanes_per_row = 4, .halves = 2, .half_rows = 8, .warp_rows = 16, .a_regs = 4};
    f.qk_steps = p->qk / f.k_step;
    f.pv_steps = p->bn / f.k_step;
    f.s_regs = p->bn / 2;
    f.o_regs = p->ov / 2;
    f.p_regs = p->bn / 4;
    s->frag = f;
    s->consumers = c->bm / SM90_MMA_M;
    p->ctas_per_sm = sm90_occupancy(c);
    /* A head's m-blocks side by side share its K/V in L2 at once, where a group of L2-sized head sets re-reads some
     * of it from DRAM a wave later (H200 run 32: S256 d128 full 0.914 -> 1.010 x cuDNN). Causal m-blocks differ in
     * length, and a plain stride hands a CTA the same m-block of every head-major wave (S1024 d128 causal 1.184 ->
     * 0.881): the walk alternates the waves' direction (mha_tile_first), which evens the CTAs' loads (H200 run 41:
     * S2048 d128 causal 1.063 -> 1.205). Where every head's K/V fits L2 the order costs no DRAM, and all heads'
     * longest m-blocks first balances grids whose head-major waves the walk cannot (B4 H28/4 S1024: 56 m-blocks a
     * kv head on 132 CTAs). A grid without a persistent loop is balanced by the hardware's dispatch, longest first. */
    p->head_major = c->head_major >= 0 ? c->head_major
                    : p->persistent || c->mask == MASK_NONE ? TILE_FIT : TILE_L2_GROUPS;
    p->tile_walk = 1;
    p->smem_cap = sm90_smem_cap(c);
    int wl, wr;
    mask_bounds(c, &wl, &wr);
    /* On a causal diagonal block consumer 0 of a 128-row tile sees none of the upper 64 keys: half its softmax and
     * PV there are work on hidden keys. Without a right bound only a sequence's last block can be such a block. The
     * QK stays full width: a half-wide QK on a branch that rejoins before its wgmma.wait makes ptxas serialise every
     * wgmma (C7515), and one running on to its own wait measured 20-45% slower on long causal tiles (H200 run 39). */
    s->diag_half = c->diag_half >= 0 ? c->diag_half : wr >= 0 && c->bn % 32 == 0;
    if (s->diag_half)
        plan_note(p, "diag half", "a consumer whose rows see no key past a block's first %d (last row + kv_off%s, or "
                  "seqlen_k - 1) runs a half-wide masked softmax and P V (%d k16 steps); QK stays m64n%dk16",
                  c->bn / 2, wr > 0 ? " + right" : "", c->bn / 32, c->bn);
    sm90_regs(s->consumers, c->page != 0, c->ov_depth, p->ctas_per_sm, &s->producer_regs, &s->consumer_regs);
    p->threads = SM90_WG * (1 + s->consumers);
    /* registers per thread at entry; one consumer (256 threads) would get 256, over the 255 a thread can hold */
    int file = 65536 / p->ctas_per_sm;
    p->entry_regs = file / p->threads > 255 ? 255 : (file / p->threads) / 8 * 8;
    if (p->ctas_per_sm > 1)
        plan_note(p, "occupancy", "%d CTAs an SM: %u B of shared memory and %d registers a thread at entry each",
                  p->ctas_per_sm, p->smem_cap, p->entry_regs);

    uint32_t sw = (uint32_t)p->swizzle_bytes;
    s->q_chunk_bytes = (uint32_t)p->bm * sw;
    s->k_chunk_bytes = (uint32_t)p->bn * sw;
    s->v_chunk_bytes = (uint32_t)p->bn * sw;
    s->k_stage_bytes = s->k_chunk_bytes * (uint32_t)p->qk_chunks;
    s->v_stage_bytes = s->v_chunk_bytes * (uint32_t)p->ov_chunks;
    s->tx_q = s->q_chunk_bytes * (uint32_t)p->qk_chunks;
    s->tx_k = s->k_stage_bytes;
    s->tx_v = s->v_stage_bytes;

    /* A persistent CTA double-buffers Q when it fits: the next tile's Q then loads while
     * this tile's epilogue stages and stores O through its own slot. */
    uint32_t rings = (s->k_stage_bytes + s->v_stage_bytes) * (uint32_t)p->stages + 64u * (uint32_t)p->stages + 64u;
    s->q_slots = p->persistent && 2 * s->tx_q + rings + p->smem_align <= p->smem_cap ? 2 : 1;
    char what[64];
    snprintf(what, sizeof what, "Q tile %dx%d x %d slot%s; O staging in the epilogue", p->bm, p->qk, s->q_slots,
             s->q_slots > 1 ? "s" : "");
    s->off_q = plan_smem(p, "q", s->tx_q * (uint32_t)s->q_slots, 1024, what);
    /* With two slots the slot this tile's O is stored from is not loaded again before the tile after next, so
     * the consumer need not wait for the store to read it: the leader waits (by then long done) after the next
     * tile's first QK is issued. Varlen's row stores, split and cluster epilogues free the slot their own way. */
    s->q_release_late = s->q_slots == 2 && !c->split && !c->cluster_split && !c->varlen && !c->store_wait;
    /* d256 too where the registers allow (bn 32 and 48): modelled 2% slower, measured +0.0..+0.5% (H200 run 96) */
    /* dynamic: the next tile's index arrives in the other Q slot's tile word, so the consumers need two slots */
    s->coords_ahead = p->persistent && (!c->dynamic || s->q_slots == 2) && !c->split && !c->cluster_split &&
                      !c->varlen && !c->page && c->mask != MASK_WINDOW && !c->coords_late &&
                      sm90_consumer_need(p->bn, p->ov) + SM90_COORDS_AHEAD_REGS + SM90_COORDS_AHEAD_MARGIN <=
                          s->consumer_regs;
    if (s->coords_ahead)
        plan_note(p, "coords ahead", "a consumer computes the next tile's coordinates while its last P V runs "
                  "(%d registers held across the tile), and takes them at the next tile's top", MHA_TILE_COORD_REGS);
    if (s->q_release_late)
        plan_note(p, "q release", "a Q slot is freed one tile after its O store: the leader waits for the store's "
                  "smem read once the next tile's first QK is issued, then arrives on bar_q_empty");
    snprintf(what, sizeof what, "K ring: %d stages x %u B (%dx%d)", p->stages, s->k_stage_bytes, p->bn, p->qk);
    s->off_k = plan_smem(p, "k", s->k_stage_bytes * (uint32_t)p->stages, 1024, what);
    snprintf(what, sizeof what, "V ring: %d stages x %u B (%dx%d)", p->stages, s->v_stage_bytes, p->bn, p->ov);
    s->off_v = plan_smem(p, "v", s->v_stage_bytes * (uint32_t)p->stages, 1024, what);

    if (c->cluster_split) {
        /* the cluster's CTAs read each other's rows here */
        p->cluster[0] = c->cluster_split;
        s->cstage_row_bytes = (uint32_t)SM90_CSTAGE_ROW_BYTES(p->ov);
        snprintf(what, sizeof what, "cluster split: O/l f32 %dx%d, %u B rows; LSE f32 x %d", p->bm, p->ov,
                 s->cstage_row_bytes, p->bm);
        s->off_cstage = plan_smem(p, "cstage", s->cstage_row_bytes * (uint32_t)p->bm + 4u * (uint32_t)p->bm, 16,
                                  what);
        plan_note(p, "cluster split", "CTA rank r of the cluster's %d is split r of the tile; O / l and LSE staged in "
                  "smem, barrier.cluster, then each warp merges rows over ld.shared::cluster", c->cluster_split);
        plan_note(p, "cluster rows", "warp w of rank r merges row slots j = (k * %d + w) * %d + r (sequence-major when "
                  "packed); lane l owns O columns 4l + 128i and holds split l's LSE", 4 * s->consumers, c->cluster_split);
    }
    s->q_empty_arrivals = s->consumers;
    s->kv_empty_arrivals = 4 * s->consumers;
    s->bar_q_full = plan_mbar(p, "bar_q_full", s->q_slots, 1, "mbarrier per Q slot: Q landed (1 arrival + tx)");
    snprintf(what, sizeof what, "mbarrier per Q slot: slot free (%d arrivals)", s->q_empty_arrivals);
    s->bar_q_empty = plan_mbar(p, "bar_q_empty", s->q_slots, s->q_empty_arrivals, what);
    s->bar_k_full = plan_mbar(p, "bar_k_full", p->stages, 1, "mbarrier per stage: K landed (1 arrival + tx)");
    snprintf(what, sizeof what, "mbarrier per stage: K slot free (%d arrivals)", s->kv_empty_arrivals);
    s->bar_k_empty = plan_mbar(p, "bar_k_empty", p->stages, s->kv_empty_arrivals, what);
    s->bar_v_full = plan_mbar(p, "bar_v_full", p->stages, 1, "mbarrier per stage: V landed (1 arrival + tx)");
    snprintf(what, sizeof what, "mbarrier per stage: V slot free (%d arrivals)", s->kv_empty_arrivals);
    s->bar_v_empty = plan_mbar(p, "bar_v_empty", p->stages, s->kv_empty_arrivals, what);
    if (c->dynamic) {
        snprintf(what, sizeof what, "tile index per Q slot: u32 x %d (dynamic tiles)", s->q_slots);
        s->off_tile_ids = plan_smem(p, "tile_ids", 4u * (uint32_t)s->q_slots, 16, what);
        s->bar_tile = plan_mbar(p, "bar_tile", s->q_slots, 1, "mbarrier per Q slot: the slot's tile index written "
                                "(1 arrival)");
        plan_note(p, "dynamic tiles", "CTA c's tile 0 is c; as a tile starts the producer claims grid + "
                  "tile_ctr[0]++ and writes it (num_tiles: stop) to the next Q slot's word; the last CTA done "
                  "zeroes tile_ctr");
        if (c->claim > 1)
            plan_note(p, "claim runs", "a claim takes %d consecutive tiles (CTA c's first run from %d c), made as a "
                      "run's first tile's loads are out; a tile a claim once %d waves of tiles are left",
                      c->claim, c->claim, c->claim + CLAIM_SINGLE_WAVES);
    }
    if (!c->o_sts && !c->split && !c->cluster_split) /* the split epilogues write f32 partials, not staged O */
        plan_note(p, "o stmatrix", "the epilogue stages O / l with stmatrix.x4 (a warp's 16 rows x 16 columns an "
                  "instruction), four addresses a lane for the swizzle");
    if (!c->o_zero)
        plan_note(p, "o zero", "a tile's first P V writes O (wgmma scale-d 0, no moves at the tile's top); a tile "
                  "without kv blocks zeroes it");
    mha_plan_kv_tail(p);
    if (p->kv_tail)
        s->bar_v_tail = plan_mbar(p, "bar_v_tail", p->stages, 1, "mbarrier per stage: a tail block's V landed (1 + tx)");

    /* A prefetch issued while the previous grid runs lands under its tail; one issued after it delays the same
     * data's loads behind it (H200 run 83: the first Q 3.0 -> 5.1 us after entry with nothing before the kernel) */
    s->watch_warp = -1;
    if (c->prefetch > 0 && !c->split) { /* config_check: not varlen or paged, so no scrub warp */
        s->watch_warp = 1;
        s->bar_prev = plan_mbar(p, "bar_prev", 1, 1, "mbarrier: the previous grid done (the watch warp's arrival)");
        plan_note(p, "pdl watch", "warp %d passes griddepcontrol.wait and arrives on bar_prev; the producer prefetches "
                  "its first tile (plan pdl prefetch kv) only if bar_prev's phase is still open", s->watch_warp);
    }
    if (p->kv_tail) s->scrub_warp = 1;
    /* the producer warpgroup's second warp: the scrub warp (kv tail) or the watch warp (never both: config_check) */
    int side = p->kv_tail ? s->scrub_warp : s->watch_warp;
    plan_role(p, "producer", 0, side > 0 ? 1 : 4, s->producer_regs,
              "one thread issues every TMA load (Q, K ring, V ring)");
    if (side > 0) {
        plan_role(p, p->kv_tail ? "scrub" : "watch", side, 1, s->producer_regs,
                  p->kv_tail ? "zeroes a tail block's V rows past the end (kv tail)"
                             : "lane 0: griddepcontrol.wait, then bar_prev");
        plan_role(p, "idle", side + 1, 4 - side - 1, s->producer_regs, "the producer warpgroup's rest");
    }
    for (int w = 0; w < s->consumers; w++) {
        char name[24], job[128];
        snprintf(name, sizeof name, "consumer%d", w);
        snprintf(job, sizeof job, "rows %d..%d: S=QK^T (SS), softmax, O+=PV (RS), epilogue",
                 64 * w, 64 * w + 63);
        plan_role(p, name, 4 + 4 * w, 4, s->consumer_regs, job);
    }
    for (int w = 0; w < s->consumers; w++) {
        char name[24];
        snprintf(name, sizeof name, "epilogue%d", w);
        int id = plan_bar(p, name, SM90_WG, "consumer's O tile staged in smem, ready for the TMA store");
        if (w == 0) s->bar_epilogue0 = id;
    }

    s->pingpong = c->pingpong;
    s->rescale = c->rescale;
    s->poly_every = c->exp2_poly ? (100 + c->exp2_poly / 2) / c->exp2_poly : 0;
    if (s->poly_every)
        plan_note(p, "exp2", "every %d-th element by the FMA polynomial (poly %d%%), the rest on MUFU", s->poly_every,
                  c->exp2_poly);
    plan_note(p, "rescale", "O and l rescaled only when a row max grows by more than %d (log2); warp vote", c->rescale);
    for (int w = 0; s->pingpong && w < s->consumers; w++) {
        char name[24];
        snprintf(name, sizeof name, "turn%d", w);
        int id = plan_bar(p, name, 2 * SM90_WG, "consumer's turn to issue wgmma: it syncs, the previous one arrives");
        if (w == 0) s->bar_turn0 = id;
    }
    if (p->kv_tail) {
        s->bar_scrub = plan_bar(p, "scrub", SM90_WARP, "scrub warp: its zeroed V rows before lane 0 releases the stage");
        plan_note(p, "kv tail", "a tail block's V lands on bar_v_tail; warp %d zeroes its rows past the end (%d B a "
                  "pass), fences, arrives on bar_v_full; K's rows there: scores masked", s->scrub_warp, p->kv_tail_pass);
    }

    plan_map(p, "q", TENSOR_Q, c->dtype, (uint32_t)p->qk, (uint32_t)p->chunk_elems, (uint32_t)s->seq_rows,
             (uint32_t)p->heads_per_cta, c->swizzle);
    if (s->packed)
        plan_note(p, "rows", "GQA packed (decode): row r of the Q tile = (seq m0 + r %% %d, head h0 + r / %d); %d heads "
                  "per CTA", s->seq_rows, s->seq_rows, c->group);
    /* paged KV: the maps run over the page pool (depth, page row, head, page); a box is one tile, or one
     * page of a tile that spans several */
    uint32_t kv_box = (uint32_t)(c->page && c->page < p->bn ? c->page : p->bn);
    plan_map(p, "k", TENSOR_K, c->dtype, (uint32_t)p->qk, (uint32_t)p->chunk_elems, kv_box, 1, c->swizzle);
    plan_map(p, "v", TENSOR_V, c->dtype, (uint32_t)p->ov, (uint32_t)p->chunk_elems, kv_box, 1, c->swizzle);
    plan_map(p, "o", TENSOR_O, c->dtype, (uint32_t)p->ov, (uint32_t)p->chunk_elems, SM90_MMA_M, 1, c->swizzle);

    plan_note(p, "consumers", "%d warpgroups x %d rows", s->consumers, s->mma_m);
    plan_note(p, "tx bytes", "q %u, k %u, v %u per load", s->tx_q, s->tx_k, s->tx_v);
    plan_note(p, "qk wgmma", "m64n%dk16 x %d per kv tile per consumer (SS)", p->bn, f.qk_steps);
    plan_note(p, "pv wgmma", "m64n%dk16 x %d per kv tile per consumer (RS, P in registers)", p->ov, f.pv_steps);
    plan_note(p, "accumulators", "S %d + O %d + P %d registers per thread", f.s_regs, f.o_regs, f.p_regs);
    mha_plan_params(p);
    return 0;
}

static const Family sm90_mha = {KIND_MHA, sm90_defaults, sm90_check, sm90_plan, sm90_emit_mha};

const Target target_sm90a = {
    .id = TARGET_SM90A,
    .name = "sm90a",
    .ptx_target = "sm_90a",
    .ptx_version = "8.7",
    .sm_major = 9,
    .sm_minor = 0,
    .smem_limit = SM90_SMEM_LIMIT,
    .families = {[KIND_MHA] = &sm90_mha, [KIND_MLA_SPARSE] = &sm90_mla_sparse, [KIND_COMBINE] = &combine_family,
                 [KIND_MHA_BWD] = &sm90_mha_bwd, [KIND_MHA_BWD_PRE] = &mha_bwd_pre_family,
                 [KIND_MHA_BWD_DQ] = &mha_bwd_dq_family, [KIND_KV_APPEND] = &kv_append_family},
};
