/* split.c - split-KV arithmetic of fa4_mha_fwd that needs no driver: the split count the runtime
 * picks, and the workspace a split launch needs. Pure functions, tested in tests/unit. */
#include "rt_internal.h"

_Static_assert(FA4_MAX_SPLITS <= COMBINE_MAX_SPLITS, "the combine kernel reads at most COMBINE_MAX_SPLITS splits");

int rt_split_choice(uint64_t tiles, int sm_count, int kv_blocks)
{
    if (tiles == 0 || sm_count <= 0 || kv_blocks <= 0) return 1;
    if (tiles >= (uint64_t)sm_count) return 1; /* a full wave already */
    int max = kv_blocks / RT_SPLIT_MIN_BLOCKS;
    if (max > FA4_MAX_SPLITS) max = FA4_MAX_SPLITS;
    if (max <= 1) return 1;
    /* the fraction of the last wave's SMs kept busy by tiles x s CTAs; the smallest s within 95%
     * of the best (fewer splits: less partial traffic, a cheaper combine). 95, not less: batch 1 with
     * 8 kv heads then takes 16 splits (128 of 132 SMs), not 15 (120), and the combine of 16 splits
     * costs about what 15 do (4 loads a step), H100, bench/NOTES.md "decode tile" */
    double eff[FA4_MAX_SPLITS + 1], best = 0;
    for (int s = 1; s <= max; s++) {
        uint64_t ctas = tiles * (uint64_t)s, waves = (ctas + (uint64_t)sm_count - 1) / (uint64_t)sm_count;
        eff[s] = (double)ctas / (double)(waves * (uint64_t)sm_count);
        if (eff[s] > best) best = eff[s];
    }
    for (int s = 1; s <= max; s++)
        if (eff[s] >= 0.95 * best) return s;
    return 1;
}

int rt_cluster_split_choice(int splits, uint64_t tiles, int sm_count)
{
    if (splits < 2 || tiles == 0 || sm_count <= 0) return 0;
    /* at most half the SMs: clusters of 1 CTA per SM are placed whole inside a GPC, and a grid
     * that wants every SM leaves some clusters for a second wave (H100: 32 clusters of 4 ran 120 us
     * where 128 plain CTAs ran 92). Half the SMs still stream at full rate (B1 Sk16k: 64 CTAs
     * 25.8 us, 128 CTAs 25.7), bench/NOTES.md "cluster split" */
    uint64_t n = (uint64_t)sm_count / 2 / tiles;
    if (n > (uint64_t)splits) n = (uint64_t)splits;
    if (n > FA4_MAX_CLUSTER_SPLIT) n = FA4_MAX_CLUSTER_SPLIT;
    return n < 2 ? 0 : (int)n;
}

uint64_t rt_split_workspace_bytes(int num_splits, uint64_t rows, int ov_depth)
{
    if (num_splits < 1) return 0;
    /* f32 O rows, then f32 LSEs; saturated, so a product past 2^64 cannot pass as a small size */
    uint64_t row_floats = (uint64_t)(ov_depth > 0 ? ov_depth : 0) + 1;
    return rt_mul_sat(rt_mul_sat(rt_mul_sat((uint64_t)num_splits, rows), row_floats), 4);
}
