/* sm100/plan_bwd.c - the sm_100a attention backward (kind mha-bwd): defaults, checks and the plan.
 *
 * CTA = warpgroup 0 (warp 0: TMA loads; warp 1: TMEM owner and MMA issuer; warps 2, 3 leave) + one compute
 * warpgroup (warps 4..7). One CTA per (kv block of bn = 128 keys, kv head, batch), as on sm90a; K and V stay
 * in smem, Q (+ nl2) and dO (+ D) come through `stages`-deep rings, one slot per (query head of the group,
 * m-block). Every accumulator lives in Tensor Memory (FlashAttention-4's backward): S^T and dP^T (keys in the
 * lanes), dV and dK (accumulated over the whole loop), dQ (one m-block at a time). P^T and dS^T go through
 * smem, where they are the K-major A operands of dV and dK and the MN-major operand of dQ. d64 takes bm 128,
 * d128 bm 64 (dQ^T with the depth in the lanes): S^T + dP^T + dQ + dV + dK fill 448 of the 512 columns.
 */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../mha_bwd.h"
#include "bwd100.h"
#include "sm100.h"

enum { CHUNK_BYTES = 128, LANES = 128, TMEM_ALLOC = 512, LD_COLS = 32, ENTRY_REGS = 255, BWD100_THREADS = 256 };

static void bwd_defaults(Config *c)
{
    if (!c->swizzle) c->swizzle = 128;
    if (!c->bm) c->bm = c->qk_depth <= 64 ? 128 : 64;
    if (!c->bn) c->bn = 128;
    if (!c->stages) c->stages = 2;
}

static int bad(char *err, size_t n, const char *field, int v, const char *allowed)
{
    return plan_refuse(err, n, "%s: %d is not allowed for mha-bwd on sm100a; %s", field, v, allowed);
}

/* TMEM columns of the plan: S^T, dP^T (bm each), dQ (or dQ^T; the pair's layout B takes half its N), dV, dK
 * (depth each). */
static int tmem_need(int bm, int d, int pair) { return 2 * bm + (bm < LANES ? bm : d) / pair + 2 * d; }

static int bwd_check(const Config *c, char *err, size_t n)
{
    if (c->score_mod)
        return plan_refuse(err, n, "mod: a score_mod has no derivative the backward could use; mha-bwd refuses it "
                           "(train with the built-in masks and sinks, or differentiate the mod yourself)");
    if (c->dtype != DT_BF16 && c->dtype != DT_FP16)
        return plan_refuse(err, n, "dtype: %s is not allowed for mha-bwd on sm100a; use bf16 or fp16",
                           dtype_name[c->dtype]);
    if (c->qk_depth != c->ov_depth)
        return plan_refuse(err, n, "qk/ov: %d/%d is not allowed for mha-bwd on sm100a; the depths must be equal",
                           c->qk_depth, c->ov_depth);
    if (c->qk_depth != 64 && c->qk_depth != 128)
        return plan_refuse(err, n, "depth: %d is not allowed for mha-bwd on sm100a; use 64 or 128 (d256 is built "
                           "for sm90a only)", c->qk_depth);
    if (c->swizzle != 128) return bad(err, n, "swizzle", c->swizzle, "use 128");
    if (c->bn != 128) return bad(err, n, "bn", c->bn, "use 128 keys (one per TMEM lane of S^T, dP^T, dK, dV)");
    int want_bm = c->qk_depth == 64 ? 128 : 64;
    if (c->bm != want_bm)
        return plan_refuse(err, n, "bm: %d is not allowed for mha-bwd on sm100a with depth %d; use %d (S^T, dP^T, dQ, "
                           "dK and dV must share the 512 TMEM columns: %d would need %d)", c->bm, c->qk_depth, want_bm,
                           c->bm, tmem_need(c->bm, c->qk_depth, 1));
    if (c->stages < 1 || c->stages > 4) return bad(err, n, "stages", c->stages, "use 1..4 (Q and dO ring slots)");
    if (c->sink)
        return plan_refuse(err, n, "sink: not a word of mha-bwd; the sink enters through mha-bwd-pre (the LSE it "
                           "writes) and its gradient through mha-bwd-dq");
    if (c->tail_split)
        return plan_refuse(err, n, "tail_split: 1 is not allowed for mha-bwd on sm100a; the split of the last wave's kv "
                           "tiles is an sm90a form");
    if (c->cta_pair == 2 && c->qk_depth != 128)
        return plan_refuse(err, n, "cta: 2 (the CTA pair) is built for mha-bwd on sm100a with depth 128; at depth %d each CTA "
                           "would hold a %d-column half of Q, dO and K for dK, dV and dQ, half a 128-byte swizzle row, which "
                           "the one-chunk TMA boxes and MMA descriptors do not express; use cta=1", c->qk_depth,
                           c->qk_depth / 2);
    if (c->cta_pair == 2 && c->varlen)
        return plan_refuse(err, n, "cta: 2 with varlen=1 is not built for mha-bwd (a pair's two kv blocks would leave a "
                           "sequence at different blocks); use cta=1");
    if (c->cta_pair == 2 && c->deterministic)
        return plan_refuse(err, n, "cta: 2 with deterministic=1 is not built for mha-bwd (the turn counters count one "
                           "adder per kv block, the pair adds once for two); use cta=1");
    Config d;
    config_init(&d);
    if (c->qtiles || c->rescale != d.rescale || c->exp2_poly != d.exp2_poly || c->rope_split ||
        c->pingpong != d.pingpong || c->persistent != d.persistent)
        return plan_refuse(err, n, "mha-bwd: qtiles rescale poly rope_split pingpong persistent are forward "
                           "words; the backward takes bm bn stages cta (and mask, group, varlen)");
    return 0;
}

static uint32_t idesc(const Config *c, int m, int n, Sm100Major a, Sm100Major b)
{
    Sm100InstrDesc d = {m, n, 1, sm100_format(c->dtype), sm100_format(c->dtype), a, b, 0, 0};
    return sm100_instr_desc(&d);
}

static void bwd_smem(const Config *c, Plan *p, Sm100BwdPlan *s)
{
    char what[96];
    uint32_t chunks = (uint32_t)p->qk_chunks;
    snprintf(what, sizeof what, "K tile %dx%d (%u B chunks)", p->bn, p->qk, s->kv_chunk_bytes);
    s->off_k = plan_smem(p, "k", s->kv_chunk_bytes * chunks, 1024, what);
    snprintf(what, sizeof what, "V tile %dx%d", p->bn, p->qk);
    s->off_v = plan_smem(p, "v", s->kv_chunk_bytes * chunks, 1024, what);
    if (s->pair == 2)
        snprintf(what, sizeof what, "Q ring: %d stages x [rows half r %dx%d | chunk r %dx64]", p->stages, s->half_m, p->qk,
                 p->bm);
    else snprintf(what, sizeof what, "Q ring: %d stages x %u B (%dx%d)", p->stages, s->q_stage_bytes, p->bm, p->qk);
    s->off_q = plan_smem(p, "q", s->q_stage_bytes * (uint32_t)p->stages, 1024, what);
    if (s->pair == 2)
        snprintf(what, sizeof what, "dO ring: %d stages x [rows half r | chunk r], as Q", p->stages);
    else snprintf(what, sizeof what, "dO ring: %d stages x %u B (%dx%d)", p->stages, s->q_stage_bytes, p->bm, p->qk);
    s->off_do = plan_smem(p, "do", s->q_stage_bytes * (uint32_t)p->stages, 1024, what);
    snprintf(what, sizeof what, "P^T %s: [query chunk][%d key rows][64 queries] SW128", dtype_name[c->dtype], p->bn);
    s->off_p = plan_smem(p, "pt", s->pt_bytes, 1024, what);
    snprintf(what, sizeof what, "dS^T %s: the same layout", dtype_name[c->dtype]);
    s->off_ds = plan_smem(p, "dst", s->pt_bytes, 1024, what);
    if (s->pair == 2) {
        snprintf(what, sizeof what, "KT: K depth chunk r, the pair's %d keys", s->pair_keys);
        s->off_kt = plan_smem(p, "kt", s->kt_bytes, 1024, what);
        snprintf(what, sizeof what, "DSX: dS^T, %d keys x queries half r", s->pair_keys);
        s->off_dsx = plan_smem(p, "dsx", s->dsx_bytes, 1024, what);
    }
    s->off_nl2 = plan_smem(p, "nl2", s->vec_stage_bytes * (uint32_t)p->stages, 16, "nl2 ring: -LSE log2 e per query row");
    s->off_dpsum = plan_smem(p, "dpsum", s->vec_stage_bytes * (uint32_t)p->stages, 16, "D ring: rowsum(dO O)");
    s->off_tmem_slot = plan_smem(p, "tmem_slot", 16, 16, "TMEM base address (tcgen05.alloc writes it)");
}

static void bwd_barriers(Plan *p, Sm100BwdPlan *s)
{
    char what[96];
    s->slot_empty_arrivals = 1 + LANES;
    s->ds_arrivals = LANES * s->pair;
    s->bar_kv_full = plan_mbar(p, "bar_kv_full", 1, 1, "K and V landed (1 arrival + tx)");
    s->bar_q_full = plan_mbar(p, "bar_q_full", p->stages, 1, "per stage: Q and nl2 landed (1 arrival + tx)");
    snprintf(what, sizeof what, "per stage: Q slot free (%d: the dK MMA's commit + compute threads, nl2 read)",
             s->slot_empty_arrivals);
    s->bar_q_empty = plan_mbar(p, "bar_q_empty", p->stages, s->slot_empty_arrivals, what);
    s->bar_do_full = plan_mbar(p, "bar_do_full", p->stages, 1, "per stage: dO and D landed (1 arrival + tx)");
    snprintf(what, sizeof what, "per stage: dO slot free (%d: the dV MMA's commit + compute threads, D read)",
             s->slot_empty_arrivals);
    s->bar_do_empty = plan_mbar(p, "bar_do_empty", p->stages, s->slot_empty_arrivals, what);
    s->bar_s_full = plan_mbar(p, "bar_s_full", 1, 1, "S^T in TMEM (commit); also: the last m-block's MMAs are done");
    s->bar_dp_full = plan_mbar(p, "bar_dp_full", 1, 1, "dP^T in TMEM (commit)");
    snprintf(what, sizeof what, "P^T in smem, S^T read (%d compute threads%s)", s->ds_arrivals,
             s->pair == 2 ? " of the pair; the even CTA's" : "");
    s->bar_p_full = plan_mbar(p, "bar_p_full", 1, s->ds_arrivals, what);
    snprintf(what, sizeof what, "dS^T in smem, dP^T and the last dQ read (%d compute threads%s)", s->ds_arrivals,
             s->pair == 2 ? "; DSX too" : "");
    s->bar_ds_full = plan_mbar(p, "bar_ds_full", 1, s->ds_arrivals, what);
    s->bar_dq_full = plan_mbar(p, "bar_dq_full", 1, 1, "dQ in TMEM (commit)");
    s->bar_kv_done = plan_mbar(p, "bar_kv_done", 1, 1, "dK and dV final in TMEM (commit after the loop)");
    if (s->pair == 2) {
        s->bar_q_vec = plan_mbar(p, "bar_q_vec", p->stages, 1, "pair, per stage: this CTA's nl2 landed (1 arrival + tx)");
        s->bar_do_vec = plan_mbar(p, "bar_do_vec", p->stages, 1, "pair, per stage: this CTA's D landed (1 arrival + tx)");
    }
}

/* The pair's counts per m-block and SM (d128, bm 64: plan note pair counts; bench/NOTES.md has the argument):
 * bytes the tensor core reads from this SM's smem (A of its own rows, B of its half), the dS bytes the compute
 * threads store, and the f32 adds into the dQ accumulator. pair 1: the one-CTA kernel's. */
static void pair_counts(const Plan *p, const Sm100BwdPlan *s, uint32_t *mma_read, uint32_t *ds_store, uint32_t *adds)
{
    uint32_t eb = (uint32_t)p->elem_bytes, bm = (uint32_t)p->bm, bn = (uint32_t)p->bn, d = (uint32_t)p->qk;
    uint32_t pr = (uint32_t)s->pair, a_sdp = bn * d * eb, a_dkv = bn * bm * eb, b_q = bm * d * eb / pr;
    uint32_t dq_a = d / pr * (uint32_t)s->pair_keys * eb, dq_b = (uint32_t)s->pair_keys * bm / pr * eb;
    *mma_read = 2 * (a_sdp + b_q) + 2 * (a_dkv + b_q) + dq_a + dq_b;
    *ds_store = 2 * bn * bm * eb + (pr == 2 ? bn * bm * eb : 0); /* P^T, dS^T; the pair also its DSX halves */
    *adds = bm * d / pr;
}

static void bwd_notes(Plan *p, const Sm100BwdPlan *s)
{
    int d = p->qk, mm = LANES * s->pair;
    plan_note(p, "sdp mma", "S^T = K Q^T, dP^T = V dO^T: %d x M%d N%d SS each, A and B K-major (idesc 0x%08X)",
              s->steps_d, mm, p->bm, s->idesc_sdp);
    plan_note(p, "dkv mma", "dV += P^T dO, dK += dS^T Q: %d x M%d N%d SS each, A K-major (smem P^T, dS^T), B "
              "MN-major (idesc 0x%08X)", s->steps_m, mm, d, s->idesc_dkv);
    if (s->pair == 2) {
        plan_note(p, "dq mma", "dQ^T = K^T dS^T over the pair's %d keys: %d x M128 N%d SS, layout B, A = KT, B = DSX, "
                  "MN-major (idesc 0x%08X)", s->pair_keys, s->steps_n, p->bm, s->idesc_dq);
        plan_note(p, "dq lanes", "CTA r, lane l: depth 64 r + l %% 64; columns = queries %d (l / 64) + column",
                  s->half_m);
        plan_note(p, "cta pair", "cluster of 2: CTA r = keys %d r.. of the pair's %d; the even CTA issues every MMA "
                  "(cta_group::2) and commits to both CTAs (mask 0b11)", p->bn, s->pair_keys);
        plan_note(p, "pair halves", "CTA r loads Q, dO rows %d r.. (B of S^T, dP^T) and depth chunk r (B of dK, dV), K "
                  "chunk r of all %d keys (A of dQ^T)", s->half_m, s->pair_keys);
        plan_note(p, "pair sync", "tiles land on the even CTA's kv_full, q_full, do_full (%u, %u B: both CTAs'); nl2, D "
                  "on each CTA's q_vec, do_vec", s->tx_kv_pair, s->tx_q_pair);
        plan_note(p, "pair ds", "p_full, ds_full: both CTAs' compute threads (remote arrivals); key row k stores its dS "
                  "query half h into CTA h's DSX row k");
        uint32_t r1, w1, a1, r2, w2, a2;
        Sm100BwdPlan one = *s;
        one.pair = 1, one.pair_keys = p->bn;
        pair_counts(p, &one, &r1, &w1, &a1);
        pair_counts(p, s, &r2, &w2, &a2);
        double flop = 10.0 * p->bn * p->bm * d; /* five GEMMs of bn x bm x d per m-block and SM */
        plan_note(p, "pair smem", "per m-block and SM (%.2f MFLOP): MMA smem reads %u B (one CTA %u; %.1f vs %.1f B per "
                  "kFLOP), dS stores %u B (%u)", flop / 1e6, r2, r1, r2 / flop * 1e3, r1 / flop * 1e3, w2, w1);
        plan_note(p, "pair adds", "dQ f32 adds per m-block and SM %u (one CTA %u; %.2f vs %.2f per kFLOP)", a2, a1,
                  a2 / flop * 1e3, a1 / flop * 1e3);
    } else if (s->dq_t)
        plan_note(p, "dq mma", "dQ^T = K^T dS^T: %d x M128 N%d SS, A and B MN-major (idesc 0x%08X): lane = depth "
                  "column, TMEM column = query", s->steps_n, s->dq_cols, s->idesc_dq);
    else
        plan_note(p, "dq mma", "dQ = dS K: %d x M128 N%d SS, A and B MN-major (idesc 0x%08X): lane = query, TMEM "
                  "column = depth", s->steps_n, s->dq_cols, s->idesc_dq);
    plan_note(p, "mma per m-block", "%d tcgen05.mma%s: S^T %d, dP^T %d, dV %d, dK %d, dQ %d", 2 * s->steps_d +
              2 * s->steps_m + s->steps_n, s->pair == 2 ? " (the even CTA, for the pair)" : "", s->steps_d, s->steps_d, s->steps_m, s->steps_m, s->steps_n);
    plan_note(p, "compute", "thread t = key n0 + t, rows in %d-column tcgen05.ld pieces: P = exp2(S scale_log2 + nl2) "
              "to smem (P^T) and in f32 over S^T (tcgen05.st); dS = P (dP - D) to smem (dS^T)", s->ld_cols);
    if (s->pair == 2)
        plan_note(p, "dq", "thread t = depth 64 r + t %% 64, queries %d (t / 64)..: %d red.global.add.f32 (one CTA: %d); "
                  "the mha_bwd.h block layout (tiles %dx%d of 64 x %d)", s->half_m, s->dq_cols, p->bm, s->dq_tiles_m,
                  s->dq_tiles_n, s->dq_n);
    else
    plan_note(p, "dq", "%s; the mha_bwd.h block layout (tiles %dx%d of 64 x %d)", s->dq_t ?
              "thread = depth column: one red.global.add.f32 per query row" :
              "thread = query row: one red.global.add.v2.f32 per column pair", s->dq_tiles_m, s->dq_tiles_n, s->dq_n);
    plan_note(p, "order", "mma: S^T; dP^T; wait P^T, dV (frees dO); wait dS^T, dK (frees Q), dQ; ds_full also "
              "says S^T, dP^T and the last dQ were read, so the next S^T and dQ may overwrite them");
    plan_note(p, "epilogue", "dK x scale and dV from TMEM to %s, st.global.v4 of rows < seqlen_k (batch, seq, head "
              "strides); a tile that no query sees stores zeros", dtype_name[p->cfg.dtype]);
}

static int bwd_plan(const Config *c, Plan *p, char *err, size_t n)
{
    Sm100BwdPlan *s = sm100bwd_mut(p);
    plan_geometry(c, p);
    int d = p->qk;
    p->rows_per_cta = p->bn;
    p->heads_per_cta = c->group;
    p->threads = BWD100_THREADS;
    p->entry_regs = ENTRY_REGS;
    s->warp_load = 0, s->warp_mma = 1, s->warp_compute = 4;
    s->pair = c->cta_pair == 2 ? 2 : 1;
    s->pair_keys = p->bn * s->pair;
    s->half_m = p->bm / s->pair;
    s->dq_t = p->bm < LANES;
    int dq_n_mma = s->dq_t ? p->bm : d, mm = LANES * s->pair; /* the dQ MMA's N; the M of S^T, dP^T, dV, dK */
    s->dq_cols = dq_n_mma / s->pair;
    if (bwd_dq_split(p->bm, p->bn, d, &s->dq_tiles_m, &s->dq_tiles_n, &s->dq_n))
        return plan_refuse(err, n, "internal: bm %d, bn %d, depth %d have no dQ block layout", p->bm, p->bn, d);
    s->steps_d = d / 16, s->steps_m = p->bm / 16, s->steps_n = s->pair_keys / 16;
    s->ld_cols = LD_COLS;
    if (!sm100_mma_shape_ok(mm, p->bm, s->pair, 0) || !sm100_mma_shape_ok(mm, d, s->pair, 0) ||
        !sm100_mma_shape_ok(LANES, dq_n_mma, s->pair, 0) || (s->pair == 2 && !s->dq_t))
        return plan_refuse(err, n, "internal: an MMA shape of bm %d, depth %d is not a tcgen05.mma shape", p->bm, d);
    s->idesc_sdp = idesc(c, mm, p->bm, SM100_MAJOR_K, SM100_MAJOR_K);
    s->idesc_dkv = idesc(c, mm, d, SM100_MAJOR_K, SM100_MAJOR_MN);
    s->idesc_dq = idesc(c, LANES, dq_n_mma, SM100_MAJOR_MN, SM100_MAJOR_MN);

    uint32_t eb = (uint32_t)p->elem_bytes, chunks = (uint32_t)p->qk_chunks;
    s->kv_chunk_bytes = (uint32_t)p->bn * CHUNK_BYTES;
    s->q_chunk_bytes = (uint32_t)p->bm * CHUNK_BYTES;
    s->q_stage_bytes = s->q_chunk_bytes * chunks;
    s->qr_chunk_bytes = (uint32_t)s->half_m * CHUNK_BYTES;
    s->off_qc = s->pair == 2 ? s->qr_chunk_bytes * chunks : 0;
    s->kt_bytes = s->pair == 2 ? (uint32_t)s->pair_keys * CHUNK_BYTES : 0;
    s->dsx_bytes = s->kt_bytes;
    s->pt_chunk_bytes = (uint32_t)p->bn * CHUNK_BYTES;
    s->pt_bytes = s->pt_chunk_bytes * (uint32_t)(p->bm / p->chunk_elems);
    s->vec_stage_bytes = (uint32_t)p->bm * BWD_F32;
    s->tx_kv = 2u * (uint32_t)(p->bn * d) * eb;
    s->tx_q = (uint32_t)(p->bm * d) * eb + s->vec_stage_bytes;
    s->tx_do = s->tx_q;
    s->tx_vec = s->vec_stage_bytes;
    s->tx_kv_pair = 2u * (s->tx_kv + s->kt_bytes);
    s->tx_q_pair = 2u * (uint32_t)(p->bm * d) * eb;
    s->desc_kmaj = sm100_tile_desc(0, SM100_MAJOR_K, p->swizzle_bytes, 0);
    s->desc_mn_q = sm100_tile_desc(0, SM100_MAJOR_MN, p->swizzle_bytes, s->q_chunk_bytes);
    s->desc_mn_kv = sm100_tile_desc(0, SM100_MAJOR_MN, p->swizzle_bytes, s->pair == 2 ? s->kt_bytes : s->kv_chunk_bytes);
    s->desc_mn_ds = sm100_tile_desc(0, SM100_MAJOR_MN, p->swizzle_bytes, s->pair == 2 ? s->dsx_bytes : s->pt_chunk_bytes);
    bwd_smem(c, p, s);
    bwd_barriers(p, s);

    int need = tmem_need(p->bm, d, s->pair);
    if (need > TMEM_ALLOC)
        return plan_refuse(err, n, "internal: %d TMEM columns needed, %d exist", need, TMEM_ALLOC);
    p->tmem_cols = TMEM_ALLOC;
    char what[96];
    s->tm_s = plan_tmem(p, "S^T", 0, (uint32_t)p->bm, "f32 S^T: lane = key, column = query");
    s->tm_dp = plan_tmem(p, "dP^T", (uint32_t)p->bm, (uint32_t)p->bm, "f32 dP^T");
    if (s->pair == 2) snprintf(what, sizeof what, "f32 dQ^T, layout B: queries +%d in lanes 64..", s->half_m);
    else snprintf(what, sizeof what, "f32 %s of the m-block", s->dq_t ? "dQ^T (lane = depth)" : "dQ (lane = query)");
    s->tm_dq = plan_tmem(p, "dQ", 2u * (uint32_t)p->bm, (uint32_t)s->dq_cols, what);
    s->tm_dv = plan_tmem(p, "dV", s->tm_dq + (uint32_t)s->dq_cols, (uint32_t)d, "f32 dV of the kv block (whole loop)");
    s->tm_dk = plan_tmem(p, "dK", s->tm_dv + (uint32_t)d, (uint32_t)d, "f32 dK of the kv block (whole loop)");

    plan_role(p, "load", s->warp_load, 1, 0, "one thread: K, V once; Q + nl2, dO + D rings (TMA, bulk copies)");
    plan_role(p, "mma", s->warp_mma, 1, 0, "TMEM alloc / dealloc (the warp); one elected thread issues every MMA");
    plan_role(p, "idle", 2, 2, 0, "warps 2, 3 leave after the prologue");
    plan_role(p, "compute", s->warp_compute, 4, 0, "P^T, dS^T to smem; dQ to the workspace; dK, dV out");
    s->bar_tmem_free = plan_bar(p, "tmem_free", LANES + 32, "compute read dK and dV: the MMA warp frees TMEM");
    if (c->deterministic) {
        s->det = 1;
        s->bar_turn = plan_bar(p, "dq_turn", LANES, "deterministic: the compute warps' turn to add dQ, and their adds done");
        plan_param_scalar(p, SCALAR_DQ_SEM, PARAM_U64);
        plan_note(p, "deterministic", "a dQ block takes its kv blocks' adds in kv block order: counter dq_sem[row / %d]; m-blocks descend; "
                  "kv block n waits for its rank n - n_first(m) (ld.acquire.gpu, nanosleep %d..%d ns)", p->bm,
                  BWD_DET_SLEEP_NS, BWD_DET_SLEEP_MAX_NS);
        plan_note(p, "det release", "compute thread 0 waits, named barrier dq_turn, the reds, dq_turn again, then thread "
                  "0's red.release.gpu +1");
    }

    uint32_t ce = (uint32_t)p->chunk_elems;
    plan_map(p, "q", TENSOR_Q, c->dtype, (uint32_t)d, ce, (uint32_t)s->half_m, 1, 128);
    plan_map(p, "k", TENSOR_K, c->dtype, (uint32_t)d, ce, (uint32_t)p->bn, 1, 128);
    plan_map(p, "v", TENSOR_V, c->dtype, (uint32_t)d, ce, (uint32_t)p->bn, 1, 128);
    plan_map(p, "do", TENSOR_DO, c->dtype, (uint32_t)d, ce, (uint32_t)s->half_m, 1, 128);
    p->cluster[0] = s->pair;
    for (int i = 0; i < p->n_maps; i++) plan_param_map(p, i);
    static const struct { ScalarId s; ParamType t; } params[] = {
        {SCALAR_SEQLEN_Q, PARAM_U32}, {SCALAR_SEQLEN_K, PARAM_U32}, {SCALAR_HEADS_Q, PARAM_U32},
        {SCALAR_BATCH, PARAM_U32},    {SCALAR_SCALE_LOG2, PARAM_F32}, {SCALAR_SCALE, PARAM_F32},
        {SCALAR_DQ_ACCUM, PARAM_U64}, {SCALAR_DPSUM, PARAM_U64},      {SCALAR_NLSE2, PARAM_U64},
        {SCALAR_Q_ROWS, PARAM_U32},   {SCALAR_DK, PARAM_U64},         {SCALAR_DK_STRIDE_B, PARAM_U64},
        {SCALAR_DK_STRIDE_S, PARAM_U64}, {SCALAR_DK_STRIDE_H, PARAM_U64}, {SCALAR_DV, PARAM_U64},
        {SCALAR_DV_STRIDE_B, PARAM_U64}, {SCALAR_DV_STRIDE_S, PARAM_U64}, {SCALAR_DV_STRIDE_H, PARAM_U64}};
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) plan_param_scalar(p, params[i].s, params[i].t);
    if (c->varlen) {
        plan_param_scalar(p, SCALAR_CU_SEQLENS_Q, PARAM_U64);
        plan_param_scalar(p, SCALAR_CU_SEQLENS_K, PARAM_U64);
        plan_param_scalar(p, SCALAR_TOTAL_Q, PARAM_U32);
        plan_param_scalar(p, SCALAR_TOTAL_K, PARAM_U32);
        plan_note(p, "varlen", "packed [total, heads, depth]; sequence b = rows cu_seqlens[b]..cu_seqlens[b+1]; "
                  "seqlen_q / seqlen_k = the longest; workspace rows padded per sequence; dK, dV batch strides 0");
    }
    if (c->softcap) {
        plan_param_scalar(p, SCALAR_SOFTCAP_SCALE, PARAM_F32);
        plan_note(p, "softcap", "s = cap tanh(u / cap): t = tanh(q.k softcap_scale), P = exp2(t scale_log2 + nl2) "
                  "(scale_log2 = cap log2 e); dS = P (1 - t^2) (dP - D): the factor folded into the P over S^T");
    }
    if (s->pair == 2)
        plan_note(p, "tile", "CTA pair = %d keys of one kv head (CTA r: %d r..); loops over its %d query heads x the "
                  "m-blocks of %d rows that see a key of the pair", s->pair_keys, p->bn, c->group, p->bm);
    else
    plan_note(p, "tile", "CTA = %d keys of one kv head; loops over its %d query heads x the m-blocks of %d rows that "
              "see a key", p->bn, c->group, p->bm);
    bwd_notes(p, s);
    plan_note(p, "tmem", "%d of %d columns: S^T %d, dP^T %d, dQ %d, dV %d, dK %d", need, TMEM_ALLOC, p->bm, p->bm,
              s->dq_cols, d, d);
    plan_note(p, "tx bytes", "kv %u once, q %u and do %u per m-block (tile + %u B of nl2 / D)", s->tx_kv, s->tx_q,
              s->tx_do, s->vec_stage_bytes);
    if (s->pair == 2)
        plan_note(p, "grid", "2 ceil(seqlen_k / %d) x heads_kv x batch CTAs, clusters of 2 (CTAs 2i, 2i+1 = pair i)",
                  s->pair_keys);
    else
    plan_note(p, "grid", "ceil(seqlen_k / %d) x heads_kv x batch CTAs (varlen: seqlen_k = max_seqlen_k)", p->bn);
    return 0;
}

const Family sm100_mha_bwd = {KIND_MHA_BWD, bwd_defaults, bwd_check, bwd_plan, sm100_emit_mha_bwd};
