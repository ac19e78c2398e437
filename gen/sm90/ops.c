/* sm90/ops.c - the sm_90a op layer: wgmma and its shared-memory descriptors.
 * Descriptor layout (PTX ISA, "Matrix Descriptor Format"; cheatsheet sec. 4):
 * bits 0-13 start address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 62-63 swizzle
 * (1 = 128B, 2 = 64B, 3 = 32B). */
#include <stdio.h>

#include "../ops.h"

static int sm90_swizzle_code(int swizzle_bytes)
{
    return swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : 3;
}

uint32_t sm90_desc_hi(uint32_t sbo, int swizzle_bytes)
{
    return ((sbo >> 4) & 0x3FFF) | (uint32_t)sm90_swizzle_code(swizzle_bytes) << 30;
}

uint32_t sm90_desc_lo_lbo(uint32_t lbo) { return ((lbo >> 4) & 0x3FFF) << 16; }

void op_sm90_desc(Emit *e, const char *dst, const char *addr, uint32_t lbo, uint32_t sbo, int swizzle_bytes)
{
    const char *lo = reg(e, "b32", "desc_lo");
    const char *hi = reg(e, "b32", "desc_hi");
    emit(e, "shr.u32 %s, %s, 4;", lo, addr);
    emit(e, "and.b32 %s, %s, 0x3FFF;", lo, lo);
    emit(e, "or.b32 %s, %s, 0x%08X;", lo, lo, sm90_desc_lo_lbo(lbo));
    emit(e, "mov.b32 %s, 0x%08X;", hi, sm90_desc_hi(sbo, swizzle_bytes));
    emit(e, "mov.b64 %s, {%s, %s};", dst, lo, hi);
}

void op_wgmma_fence(Emit *e) { emit(e, "wgmma.fence.sync.aligned;"); }
void op_wgmma_commit(Emit *e) { emit(e, "wgmma.commit_group.sync.aligned;"); }
void op_wgmma_wait(Emit *e, int pending) { emit(e, "wgmma.wait_group.sync.aligned %d;", pending); }

static const char *wgmma_type(DType dt) { return dt == DT_FP16 ? "f16" : "bf16"; }

void op_wgmma_ss(Emit *e, int n, DType dt, const char *acc, const char *adesc, const char *bdesc,
                 const char *scale_d, int tnsp_b)
{
    char list[2048];
    reglist(list, sizeof list, acc, 0, n / 2);
    emit(e, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s %s, %s, %s, %s, 1, 1, 0, %d;", n, wgmma_type(dt),
         wgmma_type(dt), list, adesc, bdesc, scale_d, tnsp_b);
}

void op_wgmma_rs(Emit *e, int n, DType dt, const char *acc, const char *const a[4], const char *bdesc, int tnsp_b)
{
    char list[2048];
    reglist(list, sizeof list, acc, 0, n / 2);
    emit(e, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s %s, {%s, %s, %s, %s}, %s, 1, 1, 1, %d;", n,
         wgmma_type(dt), wgmma_type(dt), list, a[0], a[1], a[2], a[3], bdesc, tnsp_b);
}
