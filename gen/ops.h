/* ops.h - the op layer: the only code that knows PTX instruction spellings.
 *
 * ops.c holds the forms both targets share (mbarrier, TMA, named barriers,
 * setmaxnreg, fences); sm90/ops.c adds wgmma, sm100/ops.c adds tcgen05.
 * Kernel emitters speak in these ops, so another lowering of the same ops is
 * a new op file, not a new kernel. Operands are register names or PTX
 * expressions ("%smem+1024"); immediates are ints.
 */
#ifndef FA4GEN_OPS_H
#define FA4GEN_OPS_H

#include "fa4gen.h"

/* ---- shared (ops.c) ---- */
void op_mbar_init(Emit *e, const char *bar, int count);
void op_mbar_init_fence(Emit *e);
/* Spin until the barrier's phase with the given parity has completed. */
void op_mbar_wait(Emit *e, const char *bar, const char *parity);
void op_mbar_arrive(Emit *e, const char *bar);
void op_mbar_expect_tx(Emit *e, const char *bar, uint32_t bytes);
/* 4-D tiled TMA load of one box into smem, completing on bar. */
void op_tma_load_4d(Emit *e, const char *dst, const char *tmap, const char *c0, const char *c1, const char *c2,
                    const char *c3, const char *bar);
void op_tma_store_4d(Emit *e, const char *tmap, const char *c0, const char *c1, const char *c2, const char *c3,
                     const char *src);
void op_bulk_commit(Emit *e);
void op_bulk_wait_read(Emit *e, int n); /* smem sources of all but n groups may be reused */
void op_bulk_wait(Emit *e, int n);      /* writes of all but n groups are done */
void op_fence_proxy_async(Emit *e);     /* st.shared before async-proxy (TMA/MMA) reads */
void op_bar_sync(Emit *e, int id, int threads);
void op_bar_arrive(Emit *e, int id, int threads);
void op_setmaxnreg(Emit *e, int regs, int entry_regs); /* inc or dec, chosen from entry_regs */
void op_param_addr(Emit *e, const char *dst, const char *param); /* generic address of a kernel param */

/* ---- sm_90a (sm90/ops.c) ---- */
/* The upper 32 bits of a wgmma smem descriptor: SBO and the swizzle mode. */
uint32_t sm90_desc_hi(uint32_t sbo, int swizzle_bytes);
/* The LBO field as it sits in the lower word (LBO >> 4 << 16). */
uint32_t sm90_desc_lo_lbo(uint32_t lbo);
/* dst(b64) = descriptor for the smem address in addr(u32), lbo, sbo, swizzle. */
void op_sm90_desc(Emit *e, const char *dst, const char *addr, uint32_t lbo, uint32_t sbo, int swizzle_bytes);
void op_wgmma_fence(Emit *e);
void op_wgmma_commit(Emit *e);
void op_wgmma_wait(Emit *e, int pending);
/* D(f32 array acc, n/2 regs from acc_first) (+)= A(smem desc) * B(smem desc). */
void op_wgmma_ss(Emit *e, int n, DType dt, const char *acc, const char *adesc, const char *bdesc,
                 const char *scale_d, int tnsp_b);
/* D += A(4 x b32 regs a[0..3]) * B(smem desc). */
void op_wgmma_rs(Emit *e, int n, DType dt, const char *acc, const char *const a[4], const char *bdesc,
                 int tnsp_b);

#endif
