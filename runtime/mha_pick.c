/* mha_pick.c - the config rules of fa4_mha_fwd: from a call's shape to the kernels it launches.
 *
 * One owner for the rules: fa4_mha_fwd, fa4_mha_config and fa4_mha_split_count (mha.c) turn their
 * arguments into an RtMhaShape, which holds no pointer, and run it through these functions;
 * fa4_mha_configs_for (configs.c) runs the shapes of a described workload through the same
 * functions. The rules read a shape in these places, and these are the breakpoints the enumerator
 * walks (each threshold is a named constant here):
 *   - shape_rules: sm90a with the rules' seqlen_k <= RT_PERSISTENT_SEQLEN_K, except a decode shape (group
 *     > 1, seq_rows_q x group <= RT_DECODE_TILE_ROWS): causal runs persistent, full d128 (16-bit) takes bn 128,
 *     d64 (group 1, 16-bit) with seq_rows_q <= RT_SHORT_Q_ROWS (causal: RT_SHORT_D64_CAUSAL_Q_ROWS) takes bm 128
 *     (<= RT_DECODE_TILE_ROWS: bm 64 bn 64),
 *     d256 (16-bit, dense) with seq_rows_q <= RT_SHORT_D256_Q_ROWS takes bn RT_SHORT_D256_BN; and two rules
 *     read batch and heads, not a breakpoint the enumerator walks (it lists their other picks beside each
 *     witness): the causal tile order (rt_tile_order_twins) and small grids' 64-row tiles (rt_small_grid_open);
 *   - decode_tile: sm90a, group >= 2, seq_rows_q x group <= RT_DECODE_TILE_ROWS: bm 64 bn 64 stages 3;
 *   - the split rules: a split plan is looked at only when the runtime picks a count or
 *     seq_rows_q x group <= RT_PACK_ROWS_MAX; then the split kernel's rows decide `decode`, and the
 *     count comes from rt_split_choice (tiles, SMs, kv blocks) and rt_cluster_split_choice.
 * Guarantees: no driver call (the SM count is the shape's), no allocation but the plans of split
 * configs, which the context memoizes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

#define BAD(what, ...) rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, what ": " __VA_ARGS__)

/* Flagship SM counts, for the split picks where no device of the target is open: the H100 SXM (and
 * H200) have 132 SMs, the B200 148. The count moves only the split choices (how many splits, and on
 * sm90a the CTAs of a cluster split), which change which decode kernels a shape needs. */
static const int default_sm_count[TARGET_COUNT] = {[TARGET_SM90A] = 132, [TARGET_SM100A] = 148, [TARGET_SM103A] = 148};

int rt_default_sm_count(TargetId t) { return (unsigned)t < TARGET_COUNT ? default_sm_count[t] : 0; }

int rt_sm_count(fa4_ctx *ctx, TargetId t)
{
    const Target *T = target_get(t);
    /* the device's, when it runs this target; a build machine's other GPU says nothing of the target's */
    if (rt_driver_ready(ctx) && T && ctx->device.cc_major == T->sm_major && ctx->device.cc_minor == T->sm_minor &&
        ctx->device.sm_count > 0)
        return ctx->device.sm_count;
    return rt_default_sm_count(t);
}

/* ---------------------------------------------------------------- the config the arguments decide */

fa4_status rt_mha_base_config(fa4_ctx *ctx, const RtMhaShape *s, Config *c)
{
    static const DType dt[] = {[FA4_BF16] = DT_BF16, [FA4_FP16] = DT_FP16, [FA4_E4M3] = DT_E4M3};
    static const MaskKind mk[] = {[FA4_MASK_NONE] = MASK_NONE, [FA4_MASK_CAUSAL] = MASK_CAUSAL,
                                  [FA4_MASK_WINDOW] = MASK_WINDOW};
    config_init(c);
    c->kind = KIND_MHA;
    c->target = s->target;
    c->dtype = dt[s->dtype];
    c->qk_depth = s->qk_depth;
    c->ov_depth = s->ov_depth;
    c->group = s->heads_q / s->heads_kv;
    c->mask = mk[s->mask];
    if (c->mask == MASK_WINDOW) {
        c->window_left = s->window_left;
        c->window_right = s->window_right;
    }
    c->sink = s->sink;
    c->softcap = s->softcap;
    c->alibi = s->alibi;
    c->score_mod = s->score_mod;
    c->rope_split = s->rope_split;
    if (c->rope_split) c->rope_dtype = c->dtype; /* fa4.h: k_rope has k's dtype */
    c->varlen = s->varlen;
    c->page = s->page_size;
    if (!s->config) return FA4_OK;
    Config want = *c;
    fa4_status st = rt_parse_config(ctx, s->config, c, "args->config");
    if (st) return st;
    const char *changed = c->kind != want.kind ? "kind"
                          : c->target != want.target ? "target (set it in fa4_options)"
                          : c->dtype != want.dtype ? "dtype"
                          : c->qk_depth != want.qk_depth || c->ov_depth != want.ov_depth ? "depth"
                          : c->group != want.group ? "group (heads_q / heads_kv)"
                          : c->mask != want.mask || c->window_left != want.window_left ||
                                    c->window_right != want.window_right
                              ? "mask"
                          : c->sink != want.sink ? "sink (args->sink)"
                          : c->softcap != want.softcap ? "softcap (args->softcap)"
                          : c->alibi != want.alibi ? "alibi (args->alibi_slopes)"
                          : c->varlen != want.varlen ? "varlen (args->cu_seqlens_q)"
                          : c->page != want.page ? "page (args->block_table, page_size)"
                          : c->score_mod != want.score_mod ? "mod (args->score_mod)"
                          : c->rope_split != want.rope_split ||
                                    (c->rope_split && c->rope_dtype != want.rope_dtype)
                              ? "rope_split/rope_dtype (k_rope and dtype)"
                              : NULL;
    if (changed)
        return BAD("args->config", "'%s' changes %s, which the arguments decide; give only tuning keys "
                   "(bm bn stages swizzle pingpong persistent qtiles cta rescale poly)", s->config, changed);
    return FA4_OK;
}

/* ---------------------------------------------------------------- shape rules */

/* A decode shape: the GQA group's query rows of a sequence fill at most one 64-row tile. */
static int decode_shape(const Config *c, const RtMhaShape *s)
{
    return c->group > 1 && s->seq_rows_q * (uint64_t)c->group <= RT_DECODE_TILE_ROWS;
}

/* The decode tile (sm90a, bench/NOTES.md "decode tile"): when one 64-row tile packs every query
 * row of the GQA group (seqlen_q <= 64 / group), one consumer warpgroup with bn 64 and 3 stages
 * streams K and V 3-12% faster than the 128-row default (CUPTI kernel times, H100 and H200). Only
 * words the caller's config left unset are chosen. */
static void decode_tile(Config *c, const RtMhaShape *s)
{
    if (c->target != TARGET_SM90A || !decode_shape(c, s)) return;
    if (c->bm || c->bn || c->stages) return;
    c->bm = 64, c->bn = 64, c->stages = 3;
}

/* rt_internal.h: the short d64 tile's kv block of least padding over seqlen_k keys. */
int rt_least_pad_bn(int64_t seqlen_k)
{
    int best = RT_PAD_BN_MAX;
    int64_t least = (seqlen_k + RT_PAD_BN_MAX - 1) / RT_PAD_BN_MAX * RT_PAD_BN_MAX;
    for (int bn = RT_PAD_BN_MAX - 16; bn >= RT_PAD_BN_MIN; bn -= 16) {
        int64_t keys = (seqlen_k + bn - 1) / bn * bn;
        if (keys < least) least = keys, best = bn;
    }
    return best;
}

/* Short d64 sequences (sm90a, group 1, 16-bit, no window, seqlen_k <= RT_PERSISTENT_SEQLEN_K; bench/NOTES.md "short
 * sequences"): the plan's 192-row tile pads a sequence of at most RT_SHORT_Q_ROWS rows (S 197: 2 x 192 = 384
 * rows) where 128-row tiles pad less and give the SMs more tiles: H200, CUDA graphs, cuDNN / fa4 0.65-0.88 ->
 * 0.96-1.05 at S 77..256; at most RT_DECODE_TILE_ROWS rows, one 64-row consumer tile with 64-key blocks
 * (S 64: 0.82 -> 1.61). Longer d64 sequences keep 192 (S 512 full: 1.00 with it, 0.93 with 128), except causal ones
 * up to RT_SHORT_D64_CAUSAL_Q_ROWS rows: there 192-row tiles pad the diagonal's triangle and leave fewer tiles
 * (B16 H16 S1024 causal, run 1: 0.885 with 192, 0.924 with 128). The 64-row tiles run two CTAs an SM (config
 * occupancy 2: half the registers and shared memory each, a persistent grid of 2 x SMs): S 64 1.64 -> 2.07, where a
 * one-consumer CTA alone leaves the SM waiting on its loads (H200 run 29, bench/results/2026-11-29-h200-short-
 * occupancy-run29.txt; no gain at 128-row tiles' lengths: a 64-row tile loads its K/V for half the rows). Over dense
 * K/V of at most RT_SHORT_PAD_K keys the 128-row tile takes the kv block of least padding (rt_least_pad_bn: 77 keys
 * in one block of 80, not 128; 197 in two of 112, not 256; H200 run 35, bench/results/2026-11-29-h200-short-pad-
 * run35.txt). Only words the caller's config left unset. */
static void short_d64_tile(Config *c, const RtMhaShape *s)
{
    if (c->qk_depth != 64 || c->ov_depth != 64 || c->group != 1 || c->dtype == DT_E4M3 || c->mask == MASK_WINDOW ||
        c->bm || s->seq_rows_q > (c->mask == MASK_CAUSAL ? RT_SHORT_D64_CAUSAL_Q_ROWS : RT_SHORT_Q_ROWS))
        return;
    if (s->seq_rows_q <= RT_DECODE_TILE_ROWS && !c->bn) {
        c->bm = 64, c->bn = 64;
        if (!c->occupancy) c->occupancy = 2; /* two such CTAs an SM: S 64 1.64 -> 2.07 (run 29) */
    } else {
        c->bm = 128;
        if (!c->bn && !s->varlen && !s->page_size && s->seqlen_k <= RT_SHORT_PAD_K)
            c->bn = rt_least_pad_bn(s->seqlen_k); /* S77: bn 80, 1.12 -> 1.35; S197: bn 112, 1.15 -> 1.23 (run 35) */
    }
}

/* Short d256 sequences (sm90a, 16-bit, dense K/V, no window, split or varlen; seqlen_k <= RT_PERSISTENT_SEQLEN_K;
 * bench/NOTES.md "short sequences"): bn RT_SHORT_D256_BN instead of the plan's 80 (full) / 64 (causal) leaves room for
 * a second Q slot beside the K/V ring, so a persistent CTA loads the next tile's Q under this one and frees the slot
 * one tile after its O store; at S 256 it also pads 288 keys where 80 pads 320. Modelled (h200.tbl): B64 H8 S256
 * full 88.7 -> 66.3 us, B16 H16 S512 causal 94.6 -> 79.5. Measured (H200, CUDA graphs, cuDNN / fa4 with bn 48 vs
 * 80 in one run, bench/results/2026-11-28-h200-short-shapes-run4.txt): S256 full 0.843 vs 0.830, S512 causal 0.913
 * vs 0.868, but S1024 full 1.030 vs 1.084 and S2048 causal 0.997 vs 1.033: hence at most RT_SHORT_D256_Q_ROWS
 * query rows. Without a mask or GQA over RT_D256_FINE_K_LO < seqlen_k <= RT_D256_FINE_K keys, where 48-key blocks
 * pad 32 or more keys: 32-key blocks in 3 stages (both Q slots still fit) -- B64 H8 S256 full 0.999 / 0.997 -> 1.044 /
 * 1.044 x cuDNN (H200 run 79, bench/results/2026-11-30-h200-short-d256-bn-run79.txt; with the static walk 1.009 /
 * 1.013), where the longer d256 shapes lose with them (S512 causal -1%, S1024 full -8%). Only a bn and stages the
 * caller's config left unset. */
static void short_d256_tile(Config *c, const RtMhaShape *s)
{
    if (c->qk_depth != 256 || c->ov_depth != 256 || c->dtype == DT_E4M3 || c->mask == MASK_WINDOW || c->bn ||
        c->page || c->split || c->varlen || s->seq_rows_q > RT_SHORT_D256_Q_ROWS)
        return;
    if (c->mask == MASK_NONE && c->group == 1 && !c->stages && s->seqlen_k > RT_D256_FINE_K_LO &&
        s->seqlen_k <= RT_D256_FINE_K) {
        c->bn = RT_D256_FINE_BN, c->stages = RT_D256_FINE_STAGES;
        return;
    }
    c->bn = RT_SHORT_D256_BN;
}

/* The grid rules' common ground: an sm90a MHA call over dense K/V, unsplit, one CTA an SM, with an SM count to fill
 * and a shape to fill it with. */
static int dense_sm90_grid(const Config *c, const RtMhaShape *s)
{
    return c->target == TARGET_SM90A && c->kind == KIND_MHA && !c->split && !c->cluster_split && c->occupancy <= 1 &&
           !s->varlen && !s->page_size && s->sm_count > 0 && s->batch > 0 && s->heads_q > 0 && s->seqlen_k > 0;
}

/* A GQA group whose query rows one tile could pack (at most RT_PACK_ROWS_MAX): the split prelude plans those (a
 * packed decode-like tile, a cluster split). */
static int group_packs(const Config *c, const RtMhaShape *s)
{
    return c->group >= 2 && s->seq_rows_q * (uint64_t)c->group <= RT_PACK_ROWS_MAX;
}

/* rt_internal.h: the small-grid rule's domain -- a dense call of short keys that no split rule can touch: no
 * workspace given or assumed, no split count, and no GQA group one tile could pack. */
int rt_small_grid_open(const Config *c, const RtMhaShape *s)
{
    return dense_sm90_grid(c, s) && c->dtype != DT_E4M3 && (c->mask == MASK_NONE || c->mask == MASK_CAUSAL) &&
           !s->workspace && s->num_splits == 0 && c->group > 0 && s->seqlen_k <= RT_PERSISTENT_SEQLEN_K &&
           s->seq_rows_q > 0 && s->seq_rows_q <= RT_PERSISTENT_SEQLEN_K && !group_packs(c, s);
}

/* The call's tiles of 128 rows over `units` row sets of `rows` rows each, saturated (batch, heads and the group are
 * the caller's ints: a count past 2^64 only means "many"); the grid rules' yardstick, whatever the plan's bm. */
static uint64_t tiles_128(uint64_t units, uint64_t rows)
{
    return rt_mul_sat(units, (rows + 127) / 128);
}

/* A small grid (bench/NOTES.md "Small grids"): where the call's 128-row tiles (GQA packed: a kv head's query rows)
 * would fill at most half the SMs, 64-row tiles run twice the tiles on the idle SMs -- one consumer warpgroup a CTA,
 * the plan's other words (d256: 64-key blocks, not 48: 1.535 vs 1.412 at B1 H16 S512 full). H200, CUDA graphs,
 * cuDNN / fa4 over 11 calls of 16-64 tiles (B1-4, S128-1024, d64/d128/d256, causal and full, GQA 32/8, fp16;
 * bench/results/2026-11-29-h200-small-grid-rule-run53.txt): 1.114-1.435 with 128-row tiles, 1.431-1.805 with 64.
 * Only where the caller's config left bm (bn) open (bm_open, bn_open: before the rules). */
static void small_grid_tile(Config *c, const RtMhaShape *s, int bm_open, int bn_open, int stages_open)
{
    if (!bm_open || c->bm == 64 || !rt_small_grid_open(c, s)) return;
    uint64_t rows = rt_mul_sat(s->seq_rows_q, (uint64_t)c->group); /* GQA packed: a kv head's query rows */
    uint64_t units = rt_mul_sat((uint64_t)s->batch, (uint64_t)(s->heads_q / c->group));
    if (rt_mul_sat(2, tiles_128(units, rows)) > (uint64_t)s->sm_count) return;
    c->bm = 64;
    if (c->qk_depth == 256 && bn_open) {
        c->bn = 64;
        if (stages_open) c->stages = 0; /* the plan's, not short_d256_tile's 32-key ring */
    }
}

/* plan note tile order: an sm90a causal call over dense K/V whose grid the rules below choose from the call's
 * batch, heads and lengths (a short one: the persistent walk or stride; a long one: those or a CTA a tile). */
static int tile_order_open(const Config *c, const RtMhaShape *s)
{
    return dense_sm90_grid(c, s) && c->mask == MASK_CAUSAL && s->seq_rows_q <= UINT32_MAX &&
           s->seqlen_k <= UINT32_MAX;
}

int rt_tile_order_twins(const Config *c, const RtMhaShape *s, Config twins[3])
{
    if (!tile_order_open(c, s)) return 0;
    static const int forms[3][2] = {{1, -1}, {1, 0}, {-1, -1}}; /* persistent, head_major */
    int n = 0, forms_n = s->seqlen_k <= RT_PERSISTENT_SEQLEN_K ? 2 : 3;
    if (s->seqlen_k <= RT_PERSISTENT_SEQLEN_K && c->persistent != 1) return 0;
    for (int i = 0; i < forms_n; i++)
        if (c->persistent != forms[i][0] || c->head_major != forms[i][1]) {
            twins[n] = *c;
            twins[n].persistent = forms[i][0], twins[n++].head_major = forms[i][1];
        }
    return n;
}

/* The grid's busiest CTA over the mean (gen/kernel.c mha_tile_order_load, mha_tile_dispatch_load: the kernel's own
 * order, counted), for the persistent walk (TILE_FIT), the persistent stride (TILE_L2_GROUPS) and, where asked, a
 * CTA a tile handed out by the hardware; 0 where not counted. */
typedef struct { double walk, stride, dispatch; } TileLoads;

static int tile_loads(const Config *c, const RtMhaShape *s, int dispatch, TileLoads *t)
{
    Config f = *c;
    char err[256];
    f.persistent = 1;
    if (config_fill_defaults(&f, err, sizeof err)) return -1; /* plan_make reports it */
    uint32_t b = (uint32_t)s->batch, h = (uint32_t)s->heads_q, sq = (uint32_t)s->seq_rows_q, sk = (uint32_t)s->seqlen_k;
    uint32_t sms = (uint32_t)s->sm_count;
    t->walk = mha_tile_order_load(&f, TILE_FIT, b, h, sq, sk, sms);
    t->stride = mha_tile_order_load(&f, TILE_L2_GROUPS, b, h, sq, sk, sms);
    t->dispatch = dispatch ? mha_tile_dispatch_load(&f, b, h, sq, sk, sms) : 0;
    return t->walk > 0 && t->stride > 0 && (!dispatch || t->dispatch > 0) ? 0 : -1;
}

/* Short causal sequences run persistent (rt_mha_shape_rules); the plan's default walk (TILE_FIT: head-major waves of
 * alternating direction) evens most of their grids but not all: where a head's m-blocks and the grid's CTAs fall
 * into a pattern no direction evens, the L2 groups' plain stride leaves the busiest CTA less (H200 run 45: B4 H16
 * S1792 d128 causal +12.7% with the walk, counted +14.2%). Take head_major=0 when it counts 1% less. */
static void short_tile_order(Config *c, const RtMhaShape *s)
{
    TileLoads t;
    if (c->head_major >= 0 || c->persistent != 1 || !tile_order_open(c, s) || tile_loads(c, s, 0, &t)) return;
    if (t.stride < 0.99 * t.walk) c->head_major = 0;
}

/* Long causal sequences run a CTA a tile, which the hardware balances (longest m-blocks first), unless a persistent
 * grid counts 1% less for its busiest CTA: the walk evens d256's few long tiles better (H200 run 47: B2 H16 S4096
 * d256 causal 1.111 -> 1.222 x cuDNN, counted 1.154 -> 1.031), and loses where the waves fall badly (d64 S8192 with
 * 192-row tiles: 1.154 -> 0.984, counted 1.024 -> 1.293; GQA 32/8 S8192 1.129 -> 0.790, counted 1.001 -> 1.499). */
static void long_tile_order(Config *c, const RtMhaShape *s)
{
    TileLoads t;
    if (c->persistent >= 0 || c->head_major >= 0 || s->seqlen_k <= RT_PERSISTENT_SEQLEN_K || !tile_order_open(c, s))
        return;
    /* two waves of 128-row tiles at least: a smaller grid is the split rules' to fill, and a CTA a tile there */
    if (tiles_128(rt_mul_sat((uint64_t)s->batch, (uint64_t)s->heads_q), s->seq_rows_q) < 2 * (uint64_t)s->sm_count ||
        tile_loads(c, s, 1, &t))
        return;
    double best = t.walk < t.stride ? t.walk : t.stride;
    if (best >= 0.99 * t.dispatch) return;
    c->persistent = 1;
    if (t.stride < t.walk) c->head_major = 0;
}

/* The query rows of the config's tile: its bm, or the plan's default; 0 where the config does not plan. */
int rt_config_bm(const Config *c)
{
    Config f = *c;
    char err[256];
    return config_fill_defaults(&f, err, sizeof err) || f.bm <= 0 ? 0 : f.bm;
}

static uint64_t m_blocks_of(const Config *c, const RtMhaShape *s)
{
    uint64_t bm = (uint64_t)rt_config_bm(c);
    return bm ? (s->seq_rows_q + bm - 1) / bm : 0;
}

static int d128_mha(const Config *c) { return c->qk_depth == 128 && c->group == 1; }

/* d128 MHA heads of two m-blocks (S129..256 at bm 128): since the first tile's prefetch under the previous grid
 * (plan pdl watch) the counter gains on them, causal ones in the walk's head-major order too (H200 run 86, three
 * samples in one run: B64 H16 S256 d128 causal 0.988 / 0.992 / 0.991 -> 1.008 / 1.007 / 1.005 x cuDNN, B64 H8 S256
 * d128 full 1.054 / 1.058 / 1.054 -> 1.061 / 1.062 / 1.060, fp16 1.057 / 1.057 / 1.076 -> 1.068 / 1.065 / 1.067),
 * where before it they lost 1-2% (runs 68-76); causal d64 of two m-blocks still loses (1.165-1.172 -> 1.140-1.145) */
static int d128_two_m_blocks(const Config *c, const RtMhaShape *s)
{
    return d128_mha(c) && m_blocks_of(c, s) == 2;
}

/* Dynamic tiles (config dynamic, plan note dynamic tiles; bench/NOTES.md "The dynamic tile counter"): a persistent CTA
 * takes each next tile from a per-launch counter, so the tiles' run times, which vary with the memory traffic around
 * them, even out where a static walk hands each CTA its share up front. H200, CUDA graphs, cuDNN / fa4 with and
 * without it in one run (runs 63-66, bench/results/2026-11-29-h200-short-dynamic-run6*.txt): full (unmasked) d128 and
 * d256 calls of two waves or more +0.2..+3.2% (B128 H16 S128 d128 1.014 -> 1.046, S256 d256 0.972 -> 0.985; GQA full
 * -1%: left out); causal d64 and GQA calls, in the L2 groups' order (head_major 0: within a group the longest
 * m-blocks first, the order a free CTA should take them in) +1.5..+8.5% (B16 H16 S1024 d64 1.057 -> 1.100, the long
 * d64 1.153 -> 1.251, GQA 32/8 S8192 1.161 -> 1.207) except where each head has two m-blocks, which the walk pairs
 * long with short exactly (B64 H16 S256 d64 1.156 -> 1.138: left out). Causal d256 of at most RT_SHORT_D256_Q_ROWS
 * query rows (the short d256 blocks) in the walk's head-major order: B16 H16 S512 +1.0%, +1.9%, +1.7% in three runs
 * (1.013 -> 1.023, 1.054 -> 1.074, 1.060 -> 1.075); longer d256 causal -6..-9%, d128 causal without GQA -0.4..-3%
 * however ordered: left to the walk. Full d128 with two m-blocks a head (S256) -1.0..-1.4% in runs 68, 72 and 74,
 * -0.8..-2.0% in run 76 (bench/results/2026-11-30-h200-short-rule-ab-run76.txt, bf16 and fp16), before the first
 * tile's prefetch; with it d128 MHA heads of two m-blocks, causal ones too, gain (d128_two_m_blocks). Only where the
 * caller's config left dynamic open and the grid is two waves. */
int rt_dynamic_open(const Config *c, const RtMhaShape *s)
{
    int full = c->mask == MASK_NONE && c->group == 1 && c->qk_depth >= 128;
    int causal = c->mask == MASK_CAUSAL && ((c->qk_depth <= 128 && (c->qk_depth <= 64 || c->group > 1)) ||
                                            (c->qk_depth == 256 && s->seq_rows_q <= RT_SHORT_D256_Q_ROWS) ||
                                            d128_two_m_blocks(c, s));
    return dense_sm90_grid(c, s) && c->dynamic != 0 && c->persistent != 0 && c->dtype != DT_E4M3 &&
           (full || causal) && s->num_splits <= 1 && c->group > 0 && s->seq_rows_q > 0 && !group_packs(c, s);
}

static void dynamic_tiles(Config *c, const RtMhaShape *s)
{
    if (c->dynamic >= 0 || !rt_dynamic_open(c, s)) return;
    uint64_t m_blocks = m_blocks_of(c, s);
    if (rt_mul_sat(rt_mul_sat((uint64_t)s->batch, (uint64_t)s->heads_q), m_blocks) < 2 * (uint64_t)s->sm_count) return;
    /* two m-blocks a head: the walk pairs a causal head's long m-block with its short one exactly (measured above);
     * d128 MHA heads (d128_two_m_blocks) and d256's six-block tiles still gain, the former in head-major order */
    int two = m_blocks == 2;
    if (two && c->mask == MASK_CAUSAL && !d128_mha(c)) return;
    if (c->mask == MASK_CAUSAL && c->head_major < 0 && c->qk_depth <= 128 && !two) c->head_major = 0;
    c->dynamic = 1;
}

/* The static walk of c (no tile counter): dynamic=0, and no claim of runs, a word of the counter's */
void rt_static_walk(Config *c)
{
    c->dynamic = 0;
    c->claim = 0;
}

/* Claims of runs (config claim, plan note claim runs): a dynamic kernel over d128 MHA heads of two m-blocks claims
 * a head's two tiles at once (the long one, then the short one when causal), the next head's claim made as the
 * first tile's loads are out, so the counter's round trip hides behind the second tile. With a tile a claim the
 * counter hands a CTA long and short tiles at random and its producer waits on each claim: the timelines of B64 H16
 * S256 d128 causal (H200 runs 91-92, bench/results/2026-11-30-h200-short-claim-run92.txt) read 3995 ns a tile
 * against the static walk's 3753 (which pairs long with short); with runs of two 3810, and the call 70.7 -> 67.1
 * us (cuDNN 70.9). Runs of more tiles lose where a CTA's run spans more K/V than the L2 keeps for 132 CTAs at
 * once (S512 d128 full, runs of 4: 1.088 -> 0.966 x cuDNN), and so do d256 heads of two m-blocks (S256 full 1.049
 * -> 0.908). */
static void claim_runs(Config *c, const RtMhaShape *s)
{
    if (c->dynamic > 0 && c->claim == 0 && d128_two_m_blocks(c, s)) c->claim = 2;
}

/* The part of the tuning table that depends on the shape, not only on the config (the plan's defaults cover
 * depth, dtype and mask); the rules hold for the rules' seqlen_k <= RT_PERSISTENT_SEQLEN_K, outside decode
 * shapes (they run split, or take the decode tile) and fill only what args->config left unset (the third,
 * short d64 tiles, is short_d64_tile above, the fourth, short d256 blocks, short_d256_tile, the fifth, small
 * grids' 64-row tiles, small_grid_tile, and the sixth, the causal grid's tile order, short_tile_order; over longer
 * keys only long_tile_order applies):
 *   - causal runs persistent (H100, bench/NOTES.md): short causal tiles have a few KV blocks, and the
 *     persistent loop loads the next tile's Q and K/V under this tile's epilogue;
 *   - full (no mask) d128, 16-bit: bn 128 instead of the plan's 176 (bench/NOTES.md "short sequences"):
 *     fewer padded keys on short rows (S 256: two 176-key blocks for 256 keys) and a K/V ring small enough for
 *     a second Q slot, so the next tile's Q loads under this one. H200, CUDA graphs, 10 shapes of S 128..2048:
 *     cuDNN / fa4 from 0.64-1.00 to 0.86-1.07, none slower (bench/results/2026-11-28-h200-short-shapes.txt). */
void rt_mha_shape_rules(Config *c, const RtMhaShape *s)
{
    if (c->target != TARGET_SM90A || c->cluster_split || decode_shape(c, s)) return;
    int bm_open = !c->bm, bn_open = !c->bn, stages_open = !c->stages;
    if (s->seqlen_k > RT_PERSISTENT_SEQLEN_K) {
        long_tile_order(c, s);
        dynamic_tiles(c, s);
        return;
    }
    if (c->mask == MASK_CAUSAL) {
        if (c->persistent < 0) c->persistent = 1; /* with 2 stages the plan double-buffers Q too */
    } else if (c->mask == MASK_NONE && c->qk_depth == 128 && c->ov_depth == 128 && c->dtype != DT_E4M3 && !c->bn) {
        c->bn = 128;
    }
    short_d64_tile(c, s);
    short_d256_tile(c, s);
    small_grid_tile(c, s, bm_open, bn_open, stages_open);
    short_tile_order(c, s);
    dynamic_tiles(c, s);
    claim_runs(c, s);
}

/* ---------------------------------------------------------------- split-KV */

/* The plan facts of split config sc (rows per tile, heads per CTA, bn) and, for cluster_n > 0,
 * whether a cluster split of cluster_n CTAs plans too: from the context's memo, else from
 * plan_make (then remembered). */
fa4_status rt_split_facts(fa4_ctx *ctx, const Config *sc, int cluster_n, RtSplitFacts *out)
{
    char key[RT_SPLIT_KEY];
    config_canonical(sc, key, sizeof key);
    uint64_t hash = rt_fnv1a(key, strlen(key), RT_FNV_SEED);
    RtSplitFacts f = {.hash = hash};
    int found = 0;
    pthread_mutex_lock(&ctx->mu);
    for (unsigned i = 0; i < RT_SPLIT_FACTS && !found; i++)
        if (ctx->split_facts[i].hash == hash && !strcmp(ctx->split_facts[i].key, key))
            f = ctx->split_facts[i], found = 1; /* a copy: the entry may be replaced once unlocked */
    pthread_mutex_unlock(&ctx->mu);
    if (found && (!cluster_n || (f.cluster_tried >> cluster_n & 1))) {
        *out = f;
        return FA4_OK;
    }

    Plan *p = malloc(sizeof *p);
    if (!p) return rt_fail(ctx, FA4_ERR_OUT_OF_MEMORY, "plan: out of memory");
    char err[512];
    snprintf(f.key, sizeof f.key, "%s", key);
    if (!found && (f.ok = !plan_make(sc, p, err, sizeof err))) {
        f.rows = p->rows_per_cta * (p->cluster[0] > 0 ? p->cluster[0] : 1);
        f.hpc = p->heads_per_cta > 0 ? p->heads_per_cta : 1;
        f.bn = p->bn;
    }
    if (cluster_n > 0 && cluster_n < 32) {
        Config cc = *sc;
        cc.cluster_split = cluster_n, cc.persistent = 0;
        f.cluster_tried |= 1u << cluster_n;
        if (f.ok && !plan_make(&cc, p, err, sizeof err)) f.cluster_fits |= 1u << cluster_n;
    }
    free(p);
    pthread_mutex_lock(&ctx->mu);
    RtSplitFacts *slot = NULL;
    for (unsigned i = 0; i < RT_SPLIT_FACTS && !slot; i++)
        if (ctx->split_facts[i].hash == hash && !strcmp(ctx->split_facts[i].key, key)) slot = &ctx->split_facts[i];
    if (!slot) slot = &ctx->split_facts[ctx->n_split_facts++ % RT_SPLIT_FACTS];
    *slot = f;
    pthread_mutex_unlock(&ctx->mu);
    *out = f;
    return FA4_OK;
}

fa4_status rt_split_prelude(fa4_ctx *ctx, const RtMhaShape *s, Config *c, int assume_ws, RtSplitPrelude *p)
{
    memset(p, 0, sizeof *p);
    p->done = 1;
    if (c->cluster_split) { /* the caller's cluster=N: N splits, merged in the cluster */
        if (s->num_splits && s->num_splits != c->cluster_split)
            return BAD("num_splits", "%d with config cluster=%d; a cluster split's count is its CTAs (give 0 or %d)",
                       s->num_splits, c->cluster_split, c->cluster_split);
        p->splits = c->cluster_split, p->path = 1;
        decode_tile(c, s);
        return FA4_OK;
    }
    p->splits = s->num_splits ? s->num_splits : 1;
    p->path = p->splits > 1;
    if (p->path) decode_tile(c, s);
    if (s->num_splits > 1 || s->sink) return FA4_OK;
    p->have_ws = s->workspace || assume_ws;
    /* sm90a without a workspace: a cluster split, which needs none. With one, the workspace path
     * stays: the cluster split measured no faster there (bench/NOTES.md "cluster split") */
    p->cluster_ok = c->target == TARGET_SM90A && s->num_splits == 0 && !p->have_ws && c->persistent != 1 &&
                    c->dynamic <= 0 && s->sm_count > 0;
    p->pick = s->num_splits == 0 && (p->have_ws || p->cluster_ok);
    /* nothing to pick and no tile could pack the whole group (the largest holds 256 rows): no plan needed */
    if (!p->pick && !group_packs(c, s)) return FA4_OK;
    p->sc = *c;
    p->sc.split = 1;
    if (p->sc.dynamic > 0) rt_static_walk(&p->sc); /* a split kernel walks its tiles statically */
    decode_tile(&p->sc, s);
    fa4_status st = rt_split_facts(ctx, &p->sc, 0, &p->f);
    if (st) return st;
    if (!p->f.ok) return FA4_OK; /* no split kernel for this config: run unsplit */
    p->done = 0;
    return FA4_OK;
}

void rt_split_scene(const RtMhaShape *s, const RtSplitPrelude *p, RtSplitScene *sc)
{
    uint64_t rows = (uint64_t)p->f.rows;
    int hpc = p->f.hpc;
    memset(sc, 0, sizeof *sc);
    sc->tiles = rt_mul_sat(rt_mul_sat((s->seq_rows_q + rows - 1) / rows, (uint64_t)(s->heads_q / hpc)),
                           (uint64_t)s->batch); /* saturated: a huge count only means "no split" */
    /* varlen without pages: seqlen_k is the packed kv rows of all sequences; their mean length decides */
    int64_t kv_rows = s->varlen && !s->page_size ? s->seqlen_k / (s->batch > 0 ? s->batch : 1) : s->seqlen_k;
    sc->kv_blocks = (int)((kv_rows + p->f.bn - 1) / p->f.bn);
    sc->decode = hpc > 1 && s->seq_rows_q <= rows;
    sc->pick = p->pick, sc->cluster_ok = p->cluster_ok, sc->use_ws = p->have_ws;
    sc->sm_count = s->sm_count;
}

int rt_split_choice_of(const RtSplitScene *sc)
{
    return sc->pick ? rt_split_choice(sc->tiles, sc->sm_count, sc->kv_blocks) : 1;
}

int rt_split_outcome(const RtSplitScene *sc, int choice, int (*fits)(void *u, int n), void *u, RtSplitOutcome *o)
{
    /* decode shapes only: where the cluster split was measured (bench/NOTES.md "cluster split") */
    int n = sc->cluster_ok && sc->decode ? rt_cluster_split_choice(choice, sc->tiles, sc->sm_count) : 0;
    if (n) { /* its staging may not fit beside this tile's rings */
        int f = fits(u, n);
        if (f < 0) return -1;
        if (!f) n = 0;
    }
    if (n) {
        o->splits = n, o->path = 1, o->cluster = n;
        return 0;
    }
    o->splits = sc->pick && sc->use_ws ? choice : 1;
    o->path = o->splits > 1 || sc->decode;
    o->cluster = 0;
    return 0;
}

/* rt_split_outcome's fits in the runtime: the plan of the cluster config, memoized per context. */
typedef struct { fa4_ctx *ctx; const Config *sc; fa4_status st; } FitsCtx;

static int fits_by_plan(void *u, int n)
{
    FitsCtx *f = u;
    RtSplitFacts facts;
    if ((f->st = rt_split_facts(f->ctx, f->sc, n, &facts))) return -1;
    return (int)(facts.cluster_fits >> n & 1);
}

/* The split count for a (config c, target known): as given, or the runtime's pick for 0, which
 * uses the shape's SM count and splits only with a workspace (assume_ws: assume one); on sm90a a
 * call without one gets a cluster split instead (c->cluster_split, no workspace).
 * *path: the split kernel runs (splits > 1, or 1 for a decode shape whose split kernel packs the
 * GQA group into the tile, which the unsplit kernel may not; with 1 split it writes O itself, no
 * combine). On the split path c gets the decode tile where the caller left it open. */
fa4_status rt_mha_splits(fa4_ctx *ctx, const RtMhaShape *s, Config *c, int assume_ws, int *splits, int *path)
{
    RtSplitPrelude p;
    fa4_status st = rt_split_prelude(ctx, s, c, assume_ws, &p);
    *splits = p.splits, *path = p.path;
    if (st || p.done) return st;
    RtSplitScene sc;
    rt_split_scene(s, &p, &sc);
    RtSplitOutcome o;
    FitsCtx f = {ctx, &p.sc, FA4_OK};
    if (rt_split_outcome(&sc, rt_split_choice_of(&sc), fits_by_plan, &f, &o)) return f.st;
    if (o.cluster) c->cluster_split = o.cluster, c->persistent = 0;
    *splits = o.splits, *path = o.path;
    if (*path) decode_tile(c, s);
    return FA4_OK;
}

/* The config words that follow from the call on the split path: split=1, and early=1 where the caller
 * allows it (kv_early) and the kernel has it (config_split_pdl). */
void rt_mha_split_words(Config *c, const RtMhaShape *s, int path)
{
    if (!path) return;
    c->split = 1;
    c->early = s->kv_early && config_split_pdl(c);
}

void rt_mha_combine_config(TargetId t, fa4_dtype dtype, int ov_depth, Config *c)
{
    config_init(c);
    c->kind = KIND_COMBINE;
    c->target = t;
    c->dtype = dtype == FA4_FP16 ? DT_FP16 : DT_BF16; /* O's dtype: e4m3 kernels write bf16 */
    c->qk_depth = c->ov_depth = ov_depth;
}

fa4_status rt_mha_pick(fa4_ctx *ctx, const RtMhaShape *s, int assume_ws, RtMhaPick *out)
{
    memset(out, 0, sizeof *out);
    fa4_status st = rt_mha_base_config(ctx, s, &out->main);
    if (st) return st;
    rt_mha_shape_rules(&out->main, s);
    if ((st = rt_mha_splits(ctx, s, &out->main, assume_ws, &out->splits, &out->path))) return st;
    rt_mha_split_words(&out->main, s, out->path);
    /* partials in the workspace, merged by the combine kernel (a cluster split merges in smem) */
    out->combine = out->path && out->splits > 1 && !out->main.cluster_split;
    if (out->combine) rt_mha_combine_config(s->target, s->dtype, s->ov_depth, &out->comb);
    return FA4_OK;
}
