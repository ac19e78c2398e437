/* ops.h - the op layer: the only code that knows PTX instruction spellings.
 *
 * ops.c holds the forms both targets share (mbarrier, TMA, named barriers,
 * setmaxnreg, fences); sm90/ops.c adds wgmma, sm100/ops.c adds tcgen05.
 * Kernel emitters speak in these ops, so another lowering of the same ops is
 * a new op file, not a new kernel.
 *
 * Operands: every register operand is a typed handle (Reg, fa4gen.h), and each op checks the
 * class its PTX operand needs (REG_WANT: an internal error names the op and the operand, so a
 * wrong register fails in the generator, not in ptxas). Shared-memory addresses are b32,
 * global and generic addresses b64. A guard is a pred Reg (reg_not for "@!%p") or REG_NONE for
 * an unguarded instruction. Operands that PTX also takes as immediates are split, never
 * strings: the immediate is an int parameter or a separate op (op_mbar_wait_imm for a
 * constant parity, op_bar_sync_if for a constant barrier id next to op_bar_sync_at for one in
 * a register, wgmma's scale_d an int), and the UMMA accumulate flag is a pred Reg or
 * REG_NONE for the immediate 1. What is not a register stays text: cvt forms, ld types and
 * kernel parameter names.
 */
#ifndef FA4GEN_OPS_H
#define FA4GEN_OPS_H

#include "fa4gen.h"

/* ---- shared (ops.c) ---- */
void op_mbar_init(Emit *e, Reg bar, int count);
void op_mbar_init_fence(Emit *e);
/* Spin until the barrier's phase with the given parity has completed. */
void op_mbar_wait(Emit *e, Reg bar, Reg parity);
void op_mbar_wait_imm(Emit *e, Reg bar, int parity); /* parity a constant, 0 or 1 */
void op_mbar_test_wait_imm(Emit *e, Reg p, Reg bar, int parity); /* p = the phase completed; never blocks */
void op_mbar_arrive(Emit *e, Reg bar);
void op_mbar_expect_tx(Emit *e, Reg bar, uint32_t bytes);
/* The same, only in threads where pred holds (REG_NONE: always). */
void op_mbar_expect_tx_if(Emit *e, Reg pred, Reg bar, uint32_t bytes);
/* 4-D tiled TMA load of one box into smem, completing on bar. */
void op_tma_load_4d(Emit *e, Reg dst, Reg tmap, Reg c0, Reg c1, Reg c2, Reg c3, Reg bar);
/* A hint: the 4-D box at (c0..c3) of tmap into L2; no value is read, nothing completes. */
void op_tma_prefetch_4d(Emit *e, Reg tmap, Reg c0, Reg c1, Reg c2, Reg c3);
/* Smem matrix descriptors (wgmma and tcgen05 alike) hold addresses in 16-byte units: the
 * start-field delta of a byte offset, and of K step kk inside a K-major tile of chunks
 * (steps_per_chunk steps of step_bytes in each chunk of chunk_bytes). */
uint32_t op_desc_delta(uint32_t bytes);
uint32_t op_desc_kstep(int kk, int steps_per_chunk, uint32_t step_bytes, uint32_t chunk_bytes);
/* ---- clusters (sm_90a forms; used by the sm_100a CTA pair) ---- */
/* dst = the shared::cluster address of the smem address addr in the CTA of cluster rank `rank`. */
void op_mapa(Emit *e, Reg dst, Reg addr, Reg rank);
/* Arrive on a barrier named by a shared::cluster address (op_mapa), perhaps in another CTA.
 * Default semantics, as CUTLASS's cluster barriers: what the waiter consumes is TMEM or smem
 * written by the async proxy, ordered by tcgen05 fences; .release.cluster would add a
 * MEMBAR.ALL.GPU per arrive, and an .acquire.cluster wait a CCTL.IVALL per wait (SASS). */
void op_mbar_arrive_cluster(Emit *e, Reg bar);
/* Every thread of the cluster: arrive (release) and wait (acquire); threads need not be converged. */
void op_cluster_sync(Emit *e);
/* TMA load into this CTA's smem that completes on bar, which may sit in the peer CTA of the pair
 * (a shared::cluster address): .cta_group::2. */
void op_tma_load_4d_pair(Emit *e, Reg dst, Reg tmap, Reg c0, Reg c1, Reg c2, Reg c3, Reg bar);
void op_tma_store_4d(Emit *e, Reg tmap, Reg c0, Reg c1, Reg c2, Reg c3, Reg src);
void op_tma_store_3d(Emit *e, Reg tmap, Reg c0, Reg c1, Reg c2, Reg src);
/* 3-D tiled TMA load of one box (a rank-3 map) into smem, completing on bar; _pair: bar may sit
 * in the peer CTA of the pair (.cta_group::2). */
void op_tma_load_3d(Emit *e, Reg dst, Reg tmap, Reg c0, Reg c1, Reg c2, Reg bar);
void op_tma_load_3d_pair(Emit *e, Reg dst, Reg tmap, Reg c0, Reg c1, Reg c2, Reg bar);
void op_bulk_commit(Emit *e);
void op_bulk_wait_read(Emit *e, int n); /* smem sources of all but n groups may be reused */
void op_bulk_wait(Emit *e, int n);      /* writes of all but n groups are done */
void op_fence_proxy_async(Emit *e);     /* st.shared before async-proxy (TMA/MMA) reads */
/* The same for generic stores to any CTA's smem of the cluster (st.shared::cluster) before its async-proxy reads. */
void op_fence_proxy_async_cluster(Emit *e);
/* 16 bytes of four b32 registers to [addr + off], a shared::cluster address (op_mapa), perhaps the peer CTA's. */
void op_st_cluster_v4_b32(Emit *e, Reg addr, uint32_t off, const Reg src[4]);
void op_bar_sync(Emit *e, int id, int threads);
void op_bar_arrive(Emit *e, int id, int threads);
/* Guarded forms: guard is a pred Reg (reg_not: negated) or REG_NONE for always; _if takes the
 * barrier id as an immediate, _at a b32 register holding it. */
void op_bar_sync_if(Emit *e, Reg guard, int id, int threads);
void op_bar_arrive_if(Emit *e, Reg guard, int id, int threads);
void op_bar_sync_at(Emit *e, Reg guard, Reg id, int threads);
void op_bar_arrive_at(Emit *e, Reg guard, Reg id, int threads);
void op_mbar_arrive_if(Emit *e, Reg guard, Reg bar);
/* The lanes of the warp reconverge here (bar.warp.sync over the full warp). */
void op_warp_sync(Emit *e);
/* dst = src of the lane whose index is this lane's xor lane_mask, over the full warp. */
void op_shfl_bfly(Emit *e, Reg dst, Reg src, int lane_mask);
/* dst = src of lane `lane` (a b32 register, 0..31), over the full warp. */
void op_shfl_idx(Emit *e, Reg dst, Reg src, Reg lane);
/* dst(b32) = bit i set when pred holds in lane i, over the full warp. */
void op_vote_ballot(Emit *e, Reg dst, Reg pred);
/* dst(pred) = pred holds in any lane of the full warp. */
void op_vote_any(Emit *e, Reg dst, Reg pred);
/* dst = {hi, lo} rounded to dt and packed, lo in the low half: a b32 for bf16/fp16, a b16
 * (saturating) for e4m3. */
/* dst = src converted as form says: "<rounding>.<to>.<from>" or "<to>.<from>", e.g. "u64.u32"
 * (widening) or "rmi.f32.f32" (floor). */
void op_cvt(Emit *e, const char *form, Reg dst, Reg src);
void op_cvt_pack(Emit *e, DType dt, Reg dst, Reg hi, Reg lo);
/* Shared memory at [base+off] (base a b32 address register, %smem included). */
void op_ld_shared_b32(Emit *e, Reg dst, Reg base, uint32_t off);
void op_ld_shared_v2_b32(Emit *e, Reg d0, Reg d1, Reg base, uint32_t off); /* 8 bytes, 8-aligned */
void op_st_shared_b32(Emit *e, Reg base, uint32_t off, Reg src);
void op_st_shared_b32_if(Emit *e, Reg guard, Reg base, uint32_t off, Reg src); /* guard REG_NONE: always */
void op_st_global_f32(Emit *e, Reg guard, Reg addr, Reg src);
/* atom.<sem>.gpu.global.add.u32 dst, [addr+off], v (sem: relaxed, acq_rel) */
void op_atom_add_u32(Emit *e, const char *sem, Reg dst, Reg addr, uint32_t off, uint32_t v);
void op_atom_add_u32_reg(Emit *e, const char *sem, Reg dst, Reg addr, uint32_t off, Reg v);
void op_st_relaxed_gpu_v2_u32_zero(Emit *e, Reg guard, Reg addr); /* two u32 zeros, 8-aligned */
void op_st_shared_v2_f32(Emit *e, Reg base, uint32_t off, Reg x, Reg y);
/* Distributed shared memory: addr a shared::cluster address (mapa); guard REG_NONE: always. */
void op_ld_cluster_f32_if(Emit *e, Reg guard, Reg dst, Reg addr);
void op_ld_cluster_v4_f32_if(Emit *e, Reg guard, const Reg dst[4], Reg addr, uint32_t off);
void op_st_shared_v4_b32(Emit *e, Reg base, uint32_t off, const Reg src[4]);
void op_ld_shared_v4_b32(Emit *e, const Reg dst[4], Reg base, uint32_t off); /* 16 bytes, 16-aligned */
void op_setmaxnreg(Emit *e, int regs, int entry_regs); /* inc or dec, chosen from entry_regs */
void op_param_addr(Emit *e, Reg dst, const char *param); /* generic address of a kernel param */

/* ---- sm_90a (sm90/ops.c) ---- */
/* The upper 32 bits of a wgmma smem descriptor: SBO and the swizzle mode. */
uint32_t sm90_desc_hi(uint32_t sbo, int swizzle_bytes);
/* The LBO field as it sits in the lower word (LBO >> 4 << 16). */
uint32_t sm90_desc_lo_lbo(uint32_t lbo);
/* dst(b64) = descriptor for the smem address in addr(u32), lbo, sbo, swizzle. */
void op_sm90_desc(Emit *e, Reg dst, Reg addr, uint32_t lbo, uint32_t sbo, int swizzle_bytes);
void op_wgmma_fence(Emit *e);
void op_wgmma_commit(Emit *e);
void op_wgmma_wait(Emit *e, int pending);
/* D(f32 array acc, its first n/2 elements) (+)= A(smem desc) * B(smem desc); scale_d the
 * immediate 0 (overwrite) or 1 (accumulate). */
void op_wgmma_ss(Emit *e, int n, DType dt, Reg acc, Reg adesc, Reg bdesc, int scale_d, int tnsp_b);
/* D += A(4 b32 registers a[0..3]) * B(smem desc). */
void op_stmatrix_x4(Emit *e, Reg base, uint32_t off, const Reg r[4]);
void op_wgmma_rs(Emit *e, int n, DType dt, Reg acc, const Reg a[4], Reg bdesc, Reg scale_d, int tnsp_b);

/* ---- sm_100a (sm100/ops.c) ---- */
/* cg is the CTA group, 1 or 2 (the pair: alloc/dealloc by one warp in each CTA, MMA and commit
 * by one thread of the even CTA for both). */
/* TMEM allocation (one full warp): the base address lands in smem at slot. */
void op_tmem_alloc(Emit *e, int cg, Reg slot, int ncols);
void op_tmem_relinquish(Emit *e, int cg);
void op_tmem_dealloc(Emit *e, int cg, Reg taddr, int ncols);
/* Order tcgen05 ops around thread synchronisation (barriers, mbarrier waits). */
void op_tc_fence_before(Emit *e);
void op_pair_tmem_free(Emit *e, Reg pr, int warp_mma, uint32_t off_slot, int ncols);
void op_tc_fence_after(Emit *e);
/* dst(b32) = low word of the smem descriptor tmpl (start address 0) with the start of addr(u32)
 * put in; a K step then adds (bytes >> 4) to it, and the high word is tmpl >> 32. */
void op_umma_desc_lo(Emit *e, Reg dst, Reg addr, uint64_t tmpl);
/* D(tmem) (+)= A * B: ss A from smem (desc), ts A from TMEM (address); acc a pred Reg, or
 * REG_NONE for the immediate 1 (ptxas takes the immediate 1 but not 0: a false
 * enable-input-d needs a predicate). */
void op_umma_ss(Emit *e, int cg, int f8, Reg d, Reg adesc, Reg bdesc, Reg idesc, Reg acc);
void op_umma_ts(Emit *e, int cg, int f8, Reg d, Reg a_tmem, Reg bdesc, Reg idesc, Reg acc);
/* Arrive on bar once every earlier tcgen05 op of this thread has completed; with a b16 CTA mask
 * (mask not REG_NONE) on the barrier at bar's offset in each CTA of the mask. */
void op_umma_commit(Emit *e, int cg, Reg bar, Reg mask);
/* tcgen05.cp .64x128b.warpx2::02_13: 64 rows x 16 bytes from smem (descriptor) to TMEM, rows 0-31 into
 * lanes 0-31 and 64-95, 32-63 into 32-63 and 96-127: the A layout of an M 128 cta_group::2 MMA */
void op_tmem_cp_64x128b_dup(Emit *e, int cg, Reg taddr, Reg sdesc);
/* 32x32b: thread t of the warp reads/writes TMEM lane (warp%4)*32 + t, n consecutive columns,
 * elements first .. first+n-1 of the register array arr (n a power of two, 1..128). */
void op_tmem_ld(Emit *e, Reg arr, int first, int n, Reg taddr);
void op_tmem_st(Emit *e, Reg taddr, Reg arr, int first, int n);
/* The same with n (1, 2, 4) single registers, e.g. row statistics. */
void op_tmem_ld_regs(Emit *e, const Reg *regs, int n, Reg taddr);
void op_tmem_st_regs(Emit *e, Reg taddr, const Reg *regs, int n);
void op_tmem_wait_ld(Emit *e);
enum { OP_TMEM_MAX_X = 128 }; /* the largest .x of one 32x32b tcgen05.ld/st */
/* dst = the TMEM lane field (bits 31:16) of the 32 lanes warp `warp` may access: 32 * (warp % 4). */
void op_tmem_warp_lanes(Emit *e, Reg dst, Reg warp);
void op_tmem_wait_st(Emit *e);
/* Four rows of a 2-D (gather4) map at column col, rows[0..3], into smem at dst as a 4-row box,
 * completing on bar (PTX ISA cp.async.bulk.tensor .tile::gather4; rows outside the tensor are
 * zero-filled and still count their bytes). cg 2: bar may sit in the peer CTA of the pair
 * (a shared::cluster address), .cta_group::2. */
void op_tma_gather4(Emit *e, int cg, Reg dst, Reg tmap, Reg col, const Reg rows[4], Reg bar);
/* p = this lane is the warp's elected leader. */
void op_elect(Emit *e, Reg p);

#endif
