/* sm100/desc.c - UMMA shared-memory and instruction descriptors (see sm100.h).
 * Bit layouts: smem descriptor 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4,
 * 46-47 version (1 on sm_100), 49-51 base offset, 52 LBO mode, 61-63 swizzle;
 * instruction descriptor 4-5 D format, 7-9 A format, 10-12 B format, 13/14
 * negate A/B, 15/16 A/B major (1 = MN), 17-22 N >> 3, 24-28 M >> 4. */
#include "sm100.h"

Sm100Swizzle sm100_swizzle_mode(int swizzle_bytes)
{
    return swizzle_bytes == 128 ? SM100_SW_128 : swizzle_bytes == 64 ? SM100_SW_64
                                                 : swizzle_bytes == 32 ? SM100_SW_32 : SM100_SW_NONE;
}

uint64_t sm100_smem_desc(const Sm100SmemDesc *d)
{
    return (uint64_t)((d->start >> 4) & 0x3FFF) | (uint64_t)((d->lbo >> 4) & 0x3FFF) << 16 |
           (uint64_t)((d->sbo >> 4) & 0x3FFF) << 32 | 1ull << 46 | (uint64_t)(d->base_offset & 7) << 49 |
           (uint64_t)(d->lbo_mode & 1) << 52 | (uint64_t)(d->swizzle & 7) << 61;
}

Sm100SmemDesc sm100_smem_desc_decode(uint64_t v, int *version)
{
    Sm100SmemDesc d;
    d.start = (uint32_t)(v & 0x3FFF) << 4;
    d.lbo = (uint32_t)(v >> 16 & 0x3FFF) << 4;
    d.sbo = (uint32_t)(v >> 32 & 0x3FFF) << 4;
    d.base_offset = (int)(v >> 49 & 7);
    d.lbo_mode = (int)(v >> 52 & 1);
    d.swizzle = (Sm100Swizzle)(v >> 61 & 7);
    if (version) *version = (int)(v >> 46 & 3);
    return d;
}

uint64_t sm100_tile_desc(uint32_t start, Sm100Major major, int swizzle_bytes, uint32_t chunk_stride)
{
    /* K-major: the K step stays inside one swizzled row, so LBO is unused (CUTLASS writes 16) */
    Sm100SmemDesc d = {start, major == SM100_MAJOR_K ? 16u : chunk_stride, 8u * (uint32_t)swizzle_bytes, 0, 0,
                       sm100_swizzle_mode(swizzle_bytes)};
    return sm100_smem_desc(&d);
}

int sm100_format(DType dt) { return dt == DT_BF16 ? 1 : 0; /* F16 and E4M3 are both code 0 in their kinds */ }

uint32_t sm100_instr_desc(const Sm100InstrDesc *d)
{
    return (uint32_t)(d->d_format & 3) << 4 | (uint32_t)(d->a_format & 7) << 7 | (uint32_t)(d->b_format & 7) << 10 |
           (uint32_t)(d->negate_a & 1) << 13 | (uint32_t)(d->negate_b & 1) << 14 | (uint32_t)d->a_major << 15 |
           (uint32_t)d->b_major << 16 | (uint32_t)((d->n >> 3) & 0x3F) << 17 | (uint32_t)((d->m >> 4) & 0x1F) << 24;
}

Sm100InstrDesc sm100_instr_desc_decode(uint32_t v)
{
    Sm100InstrDesc d;
    d.d_format = (int)(v >> 4 & 3);
    d.a_format = (int)(v >> 7 & 7);
    d.b_format = (int)(v >> 10 & 7);
    d.negate_a = (int)(v >> 13 & 1);
    d.negate_b = (int)(v >> 14 & 1);
    d.a_major = (Sm100Major)(v >> 15 & 1);
    d.b_major = (Sm100Major)(v >> 16 & 1);
    d.n = (int)(v >> 17 & 0x3F) << 3;
    d.m = (int)(v >> 24 & 0x1F) << 4;
    return d;
}

int sm100_mma_shape_ok(int m, int n, int cta_group, int ts)
{
    if (cta_group == 1 && m != 64 && m != 128) return 0;
    if (cta_group == 2 && m != 128 && m != 256) return 0;
    int step = (ts && m == 128) || cta_group == 2 ? 16 : 8; /* cta_group::2: the conservative step */
    return n >= step && n <= 256 && n % step == 0;
}
