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

void op_sm90_desc(Emit *e, Reg dst, Reg addr, uint32_t lbo, uint32_t sbo, int swizzle_bytes)
{
    Reg lo = reg_b32(e, "desc_lo");
    Reg hi = reg_b32(e, "desc_hi");
    REG_WANT(e, dst, RT_B64);
    REG_WANT(e, addr, RT_B32);
    emit(e, "shr.u32 %s, %s, 4;", R(e, lo), R(e, addr));
    emit(e, "and.b32 %s, %s, 0x3FFF;", R(e, lo), R(e, lo));
    emit(e, "or.b32 %s, %s, 0x%08X;", R(e, lo), R(e, lo), sm90_desc_lo_lbo(lbo));
    emit(e, "mov.b32 %s, 0x%08X;", R(e, hi), sm90_desc_hi(sbo, swizzle_bytes));
    emit(e, "mov.b64 %s, {%s, %s};", R(e, dst), R(e, lo), R(e, hi));
}

void op_wgmma_fence(Emit *e) { emit(e, "wgmma.fence.sync.aligned;"); }
void op_wgmma_commit(Emit *e) { emit(e, "wgmma.commit_group.sync.aligned;"); }
void op_wgmma_wait(Emit *e, int pending) { emit(e, "wgmma.wait_group.sync.aligned %d;", pending); }

static const char *wgmma_type(DType dt) { return dt == DT_FP16 ? "f16" : "bf16"; }

void op_wgmma_ss(Emit *e, int n, DType dt, Reg acc, Reg adesc, Reg bdesc, int scale_d, int tnsp_b)
{
    char list[2048];
    REG_WANT(e, acc, RT_F32);
    REG_WANT(e, adesc, RT_B64);
    REG_WANT(e, bdesc, RT_B64);
    reg_list(e, list, sizeof list, acc, 0, n / 2);
    emit(e, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s %s, %s, %s, %d, 1, 1, 0, %d;", n, wgmma_type(dt),
         wgmma_type(dt), list, R(e, adesc), R(e, bdesc), scale_d, tnsp_b);
}

/* stmatrix.x4 (warp-collective): register i of each lane is its pair of matrix i (row lane/4, columns 2 (lane%4)..+1);
 * lanes 8i..8i+7 give matrix i's row addresses (16 bytes a row, 16-byte aligned) */
void op_stmatrix_x4(Emit *e, Reg base, uint32_t off, const Reg r[4])
{
    REG_WANT(e, base, RT_B32);
    for (int i = 0; i < 4; i++) reg_want(e, r[i], RT_B32, __func__, "r[i]");
    emit(e, "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%s+%u], {%s, %s, %s, %s};", R(e, base), off, R(e, r[0]),
         R(e, r[1]), R(e, r[2]), R(e, r[3]));
}

/* scale_d: a predicate register (0: D = A B, its old value unread), or REG_NONE for 1 (D += A B) */
void op_wgmma_rs(Emit *e, int n, DType dt, Reg acc, const Reg a[4], Reg bdesc, Reg scale_d, int tnsp_b)
{
    char list[2048];
    REG_WANT(e, acc, RT_F32);
    REG_WANT(e, bdesc, RT_B64);
    for (int i = 0; i < 4; i++) reg_want(e, a[i], RT_B32, __func__, "a[i]");
    if (scale_d.id) REG_WANT(e, scale_d, RT_PRED);
    reg_list(e, list, sizeof list, acc, 0, n / 2);
    emit(e, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s %s, {%s, %s, %s, %s}, %s, %s, 1, 1, %d;", n,
         wgmma_type(dt), wgmma_type(dt), list, R(e, a[0]), R(e, a[1]), R(e, a[2]), R(e, a[3]), R(e, bdesc),
         scale_d.id ? R(e, scale_d) : "1", tnsp_b);
}
