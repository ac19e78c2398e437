/* ops_bwd.h - the op layer's forms the attention backward adds (spellings live in ops_bwd.c and
 * sm90/ops_bwd.c only). PTX ISA: cp.async.bulk (non-tensor, global -> shared with mbarrier completion),
 * cp.reduce.async.bulk (non-tensor, shared -> global, .add.f32, bulk-group completion), ld/st vectors,
 * red.global.add.v4.f32,
 * wgmma with both operands transposed from shared memory. */
#ifndef FA4GEN_OPS_BWD_H
#define FA4GEN_OPS_BWD_H

#include "fa4gen.h"

/* bytes (a multiple of 16) from global src (16-byte aligned) into shared dst, completing as transaction
 * bytes on the mbarrier bar (the issuing thread expects them with op_mbar_expect_tx). */
void op_bulk_load(Emit *e, Reg dst, Reg src, uint32_t bytes, Reg bar);
/* global dst[i] += shared src[i] for bytes / 4 f32 elements, atomically per element, asynchronously: a
 * bulk group (op_bulk_commit; op_bulk_wait_read before src is rewritten, op_bulk_wait before exit). The
 * writing threads' generic stores to src need fence.proxy.async first. */
void op_bulk_reduce_add_f32(Emit *e, Reg dst, Reg src, uint32_t bytes);
/* 16 bytes from global [addr + off] into four b32 registers where guard holds (REG_NONE: always). */
void op_ld_global_v4_b32(Emit *e, Reg guard, const Reg dst[4], Reg addr, uint32_t off);
/* 16 bytes of four f32 registers to shared [base + off]. */
void op_st_shared_v4_f32(Emit *e, Reg base, uint32_t off, const Reg src[4]);
/* global f32 [addr + off .. + 16) += the four f32 registers, each element atomically (red, relaxed, gpu
 * scope; PTX ISA: the .v4.f32 form needs sm_90). */
void op_red_global_add_v4_f32(Emit *e, Reg addr, uint32_t off, const Reg src[4]);
/* The same for one f32 element, and for two (8 bytes, 8-aligned; the .v2.f32 form needs sm_90). */
void op_red_global_add_f32(Emit *e, Reg addr, uint32_t off, Reg x);
void op_red_global_add_v2_f32(Emit *e, Reg addr, uint32_t off, Reg x, Reg y);
/* deterministic=1's turn counters (u32 in global memory): an acquire load at gpu scope, a release add of v at gpu
 * scope where guard holds (REG_NONE: always; red: no result), a sleep of ns nanoseconds (a hint; at most 1 ms), and the proxy fence that orders the
 * generic proxy's accesses to global memory with the async proxy's (a bulk reduction after an acquire, a release
 * after a bulk reduction's completion). */
void op_ld_acquire_gpu_u32(Emit *e, Reg dst, Reg addr);
void op_red_release_gpu_add_u32(Emit *e, Reg guard, Reg addr, uint32_t v);
void op_nanosleep(Emit *e, Reg ns);
/* 16 bytes of f32 from global [addr + off] into four f32 registers, a relaxed load at gpu scope (read from the
 * point of coherence: the sums other CTAs released, after this thread's acquire or its group's barrier). */
void op_ld_relaxed_gpu_v4_f32(Emit *e, const Reg dst[4], Reg addr, uint32_t off);
void op_fence_proxy_async_global(Emit *e);
/* sm_90a: D (f32 array acc, its first n/2 elements) (+)= A * B, both from shared memory, either
 * transposed (MN-major) for 16-bit types: tnsp_a, tnsp_b are the wgmma's imm-trans-a / imm-trans-b. */
void op_wgmma_ss_t(Emit *e, int n, DType dt, Reg acc, Reg adesc, Reg bdesc, int scale_d, int tnsp_a, int tnsp_b);

#endif
