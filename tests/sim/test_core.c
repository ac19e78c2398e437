/* test_core.c - the simulator core on small hand-written PTX kernels, through
 * its driver (build/sim/libcuda.so.1): scalar semantics, warp collectives,
 * barriers, bulk copies with mbarriers, cp.async (gathers with zero fill, groups,
 * mbarrier completion), stmatrix (every .num, .trans, swizzled rows), and that each kind of hazard, fault and
 * deadlock is reported (and a correct twin of each is not).
 * Prints 'test_core: N passed, N failed'.
 */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fa4sim_last_report(void);
void fa4sim_reset_error(void);

static int passed, failed;

static void check(int ok, const char *what)
{
    if (ok) passed++;
    else failed++, printf("FAIL %s\n", what);
}

#define HEADER ".version 8.7\n.target sm_100a\n.address_size 64\n.extern .shared .align 1024 .b8 smem[];\n"

/* Runs kernel `k` of `ptx` with one pointer argument on grid x block; returns the launch result. */
static CUresult run(const char *ptx, unsigned grid, unsigned block, CUdeviceptr arg)
{
    CUmodule m;
    CUfunction f;
    CUresult r = cuModuleLoadDataEx(&m, ptx, 0, NULL, NULL);
    if (r) { printf("module: %d\n", (int)r); return r; }
    if ((r = cuModuleGetFunction(&f, m, "k"))) return r;
    cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 8192);
    void *params[] = {&arg};
    r = cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 8192, NULL, params, NULL);
    cuModuleUnload(m);
    return r;
}

/* Runs kernel `k` on one cluster of `ncta` CTAs with a pointer and a 128-byte tensor map as parameters. */
static CUresult run_cluster(const char *ptx, unsigned ncta, unsigned block, CUdeviceptr arg, const CUtensorMap *map)
{
    CUmodule m;
    CUfunction f;
    CUresult r = cuModuleLoadDataEx(&m, ptx, 0, NULL, NULL);
    if (r) { printf("module: %d %s\n", (int)r, fa4sim_last_report()); return r; }
    if ((r = cuModuleGetFunction(&f, m, "k"))) return r;
    cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 8192);
    CUlaunchAttribute at;
    memset(&at, 0, sizeof at);
    at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at.value.clusterDim.x = ncta, at.value.clusterDim.y = 1, at.value.clusterDim.z = 1;
    CUlaunchConfig c;
    memset(&c, 0, sizeof c);
    c.gridDimX = ncta, c.gridDimY = c.gridDimZ = 1, c.blockDimX = block, c.blockDimY = c.blockDimZ = 1;
    c.sharedMemBytes = 8192, c.attrs = &at, c.numAttrs = 1;
    void *params[] = {&arg, (void *)map};
    r = cuLaunchKernelEx(&c, f, params, NULL);
    cuModuleUnload(m);
    return r;
}

static void expect_cluster(const char *name, const char *ptx, unsigned ncta, unsigned block, CUdeviceptr arg,
                           const CUtensorMap *map, const char *word)
{
    CUresult r = run_cluster(ptx, ncta, block, arg, map);
    const char *rep = word ? fa4sim_last_report() : "";
    int ok = word ? r != CUDA_SUCCESS && strstr(rep, word) : r == CUDA_SUCCESS;
    char what[1024];
    snprintf(what, sizeof what, "%s: expected %s%s, got %d: %.400s", name, word ? "a report with " : "success",
             word ? word : "", (int)r, r ? fa4sim_last_report() : "");
    check(ok, what);
    fa4sim_reset_error();
}

/* Expects the launch to fail with a report containing `word`; clears the sticky error. */
static void expect_report(const char *name, const char *ptx, unsigned block, CUdeviceptr arg, const char *word)
{
    CUresult r = run(ptx, 1, block, arg);
    const char *rep = fa4sim_last_report();
    int ok = r != CUDA_SUCCESS && strstr(rep, word);
    char what[1024];
    snprintf(what, sizeof what, "%s: expected a report with '%s', got %d: %.300s", name, word, (int)r, rep);
    check(ok, what);
    fa4sim_reset_error();
}

static void expect_ok(const char *name, const char *ptx, unsigned block, CUdeviceptr arg)
{
    CUresult r = run(ptx, 1, block, arg);
    char what[1024];
    snprintf(what, sizeof what, "%s: launch failed (%d): %.400s", name, (int)r, r ? fa4sim_last_report() : "");
    check(r == CUDA_SUCCESS, what);
    fa4sim_reset_error();
}

/* ------------------------------------------------------------ kernels */
static const char k_alu[] = HEADER
    ".visible .entry k(.param .u64 p)\n{\n"
    ".reg .b64 %a; .reg .b32 %r<8>; .reg .f32 %f<6>; .reg .pred %q;\n"
    "ld.param.u64 %a, [p];\n"
    "mov.f32 %f0, 0f3F800000;\n"              /* 1.0 */
    "mov.f32 %f1, 0f40000000;\n"              /* 2.0 */
    "cvt.rn.bf16x2.f32 %r0, %f0, %f1;\n"      /* hi = bf16(1.0) = 0x3f80, lo = bf16(2.0) = 0x4000 */
    "st.global.u32 [%a], %r0;\n"
    "ex2.approx.ftz.f32 %f2, %f1;\n"          /* 4 */
    "st.global.f32 [%a+4], %f2;\n"
    "mov.f32 %f3, 0f7FC00000;\n"              /* NaN */
    "max.f32 %f4, %f3, %f1;\n"                /* max(NaN, 2) = 2 */
    "st.global.f32 [%a+8], %f4;\n"
    "mov.u32 %r1, -7;\n"
    "shr.s32 %r2, %r1, 1;\n"                  /* -4 */
    "st.global.u32 [%a+12], %r2;\n"
    "setp.lt.u32 %q, %r1, 5;\n"               /* 0xfffffff9 < 5 unsigned: false */
    "selp.u32 %r3, 11, 22, %q;\n"
    "st.global.u32 [%a+16], %r3;\n"
    "mov.f32 %f5, 0fC0200000;\n"              /* -2.5 */
    "cvt.rmi.f32.f32 %f5, %f5;\n"             /* -3 */
    "cvt.rzi.s32.f32 %r4, %f5;\n"
    "st.global.u32 [%a+20], %r4;\n"
    "ret;\n}\n";

/* the CUDA-core forms an fp8 dequantiser and a bf16 epilogue use; results at [p + 4 i], inputs
 * as immediates, expectations worked out by hand in test_alu16 */
static const char k_alu16[] = HEADER
    ".visible .entry k(.param .u64 p)\n{\n"
    ".reg .b64 %a, %d<4>; .reg .b32 %r<40>; .reg .b16 %h<8>; .reg .f32 %f<8>;\n"
    "ld.param.u64 %a, [p];\n"
    "mov.b16 %h0, 0xC438; cvt.rn.f16x2.e4m3x2 %r0, %h0; st.global.b32 [%a], %r0;\n"
    "mov.b16 %h1, 0x7F01; cvt.rn.f16x2.e4m3x2 %r1, %h1; st.global.b32 [%a+4], %r1;\n"
    "mov.b16 %h2, 0x7C3C; cvt.rn.f16x2.e5m2x2 %r2, %h2; st.global.b32 [%a+8], %r2;\n"
    "cvt.rn.relu.f16x2.e4m3x2 %r3, %h0; st.global.b32 [%a+12], %r3;\n"
    "mov.b32 %r4, 0x5FD03500; cvt.rn.satfinite.e4m3x2.f16x2 %h3, %r4; cvt.u32.u16 %r5, %h3; st.global.b32 [%a+16], %r5;\n"
    "mov.b32 %r6, 0x3CC03C40; cvt.rn.satfinite.e4m3x2.f16x2 %h4, %r6; cvt.u32.u16 %r7, %h4; st.global.b32 [%a+20], %r7;\n"
    "mov.f32 %f0, 0f7F800000; mov.f32 %f1, 0fFF800000;\n"
    "cvt.rn.satfinite.bf16x2.f32 %r8, %f0, %f1; st.global.b32 [%a+24], %r8;\n"
    "cvt.rn.bf16x2.f32 %r9, %f0, %f1; st.global.b32 [%a+28], %r9;\n"
    /* bf16 fma whose product is a tie: only the tiny addend decides (a double sum would lose it) */
    "mov.b32 %r10, 0x3F883F88; mov.b32 %r11, 0x0D808D80; fma.rn.bf16x2 %r12, %r10, %r10, %r11; st.global.b32 [%a+32], %r12;\n"
    "mov.b32 %r13, 0x00000000; fma.rn.bf16x2 %r14, %r10, %r10, %r13; st.global.b32 [%a+36], %r14;\n"
    "mov.b32 %r15, 0x40004200; mov.b32 %r16, 0x38007BFF; mul.rn.f16x2 %r17, %r15, %r16; st.global.b32 [%a+40], %r17;\n"
    "mov.b32 %r18, 0x80007FC1; mov.b32 %r19, 0x00003F80; min.bf16x2 %r20, %r18, %r19; st.global.b32 [%a+44], %r20;\n"
    "mov.b32 %r21, 0x33221100; mov.b32 %r22, 0xF7665544;\n"
    "prmt.b32 %r23, %r21, %r22, 0x5140; st.global.b32 [%a+48], %r23;\n"
    "prmt.b32 %r23, %r21, %r22, 0x32F0; st.global.b32 [%a+52], %r23;\n"
    "prmt.b32.f4e %r23, %r21, %r22, 1; st.global.b32 [%a+56], %r23;\n"
    "prmt.b32.b4e %r23, %r21, %r22, 0; st.global.b32 [%a+60], %r23;\n"
    "prmt.b32.rc16 %r23, %r21, %r22, 1; st.global.b32 [%a+64], %r23;\n"
    "prmt.b32.ecl %r23, %r21, %r22, 2; st.global.b32 [%a+68], %r23;\n"
    "prmt.b32.ecr %r23, %r21, %r22, 1; st.global.b32 [%a+72], %r23;\n"
    "prmt.b32.rc8 %r23, %r21, %r22, 3; st.global.b32 [%a+76], %r23;\n"
    "mov.b32 %r24, 0xFF00FF00; mov.b32 %r25, 0xF0F0F0F0; mov.b32 %r26, 0xCCCCCCCC;\n"
    "lop3.b32 %r27, %r24, %r25, %r26, 0xE8; st.global.b32 [%a+80], %r27;\n"
    "mov.f32 %f2, 0f3FC00000; mov.f32 %f3, 0f40000000; mov.f32 %f4, 0f40800000; mov.f32 %f5, 0f3E800000;\n"
    "mov.f32 %f6, 0f3F800000; mov.b64 %d0, {%f2, %f3}; mov.b64 %d1, {%f3, %f4}; mov.b64 %d2, {%f5, %f6};\n"
    "fma.rn.f32x2 %d3, %d0, %d1, %d2; st.global.b64 [%a+88], %d3;\n"
    "mov.f32 %f7, 0f7FC00000; max.NaN.f32 %f7, %f7, %f3; st.global.f32 [%a+96], %f7;\n"
    "mov.b16 %h5, 0x3F88; mov.b16 %h6, 0x0D80; fma.rn.bf16 %h7, %h5, %h5, %h6; cvt.u32.u16 %r28, %h7;\n"
    "st.global.b32 [%a+100], %r28;\n"
    "ret;\n}\n";

/* warp reductions and the bit and min/max forms; lane i holds i; thread 0 stores at [p + 4 j] */
static const char k_alu_more[] = ".version 8.8\n.target sm_100a\n.address_size 64\n"
    ".visible .entry k(.param .u64 p)\n{\n"
    ".reg .b64 %a; .reg .b32 %r<32>; .reg .f32 %f<16>; .reg .pred %q<2>;\n"
    "ld.param.u64 %a, [p]; mov.u32 %r0, %laneid; setp.ne.u32 %q0, %r0, 0;\n"
    "redux.sync.add.u32 %r1, %r0, 0xffffffff;\n"
    "sub.u32 %r2, %r0, 5; redux.sync.min.s32 %r3, %r2, 0xffffffff;\n"
    "mul.lo.u32 %r4, %r0, 3; redux.sync.max.u32 %r5, %r4, 0xffffffff;\n"
    "shl.b32 %r6, 1, %r0; redux.sync.xor.b32 %r7, %r6, 0xffffffff;\n"
    "cvt.rn.f32.u32 %f0, %r0; sub.f32 %f0, %f0, 0f41280000;\n" /* lane - 10.5 */
    "redux.sync.max.f32 %f1, %f0, 0xffffffff; redux.sync.min.abs.f32 %f2, %f0, 0xffffffff;\n"
    "setp.eq.u32 %q1, %r0, 7; selp.f32 %f3, 0f7FC00000, %f0, %q1;\n"
    "redux.sync.max.f32 %f4, %f3, 0xffffffff; redux.sync.max.NaN.f32 %f5, %f3, 0xffffffff;\n"
    "@%q0 bra $d;\n"
    "st.global.u32 [%a], %r1; st.global.u32 [%a+4], %r3; st.global.u32 [%a+8], %r5; st.global.u32 [%a+12], %r7;\n"
    "st.global.f32 [%a+16], %f1; st.global.f32 [%a+20], %f2; st.global.f32 [%a+24], %f4; st.global.f32 [%a+28], %f5;\n"
    "mov.f32 %f6, 0f3F800000; mov.f32 %f7, 0f7FC00000; mov.f32 %f8, 0f40400000;\n"
    "max.f32 %f9, %f6, %f7, %f8; max.NaN.f32 %f10, %f6, %f7, %f8; min.f32 %f11, %f8, %f6, %f7;\n"
    "st.global.f32 [%a+32], %f9; st.global.f32 [%a+36], %f10; st.global.f32 [%a+40], %f11;\n"
    "mov.b32 %r8, 0x4040BF80; ex2.approx.ftz.bf16x2 %r9, %r8; st.global.b32 [%a+44], %r9;\n"
    "mov.b32 %r10, 0x38004900; ex2.approx.f16x2 %r11, %r10; st.global.b32 [%a+48], %r11;\n"
    "mov.b32 %r12, 0xF0; bfind.u32 %r13, %r12; bfind.shiftamt.u32 %r14, %r12; mov.b32 %r15, 0; bfind.u32 %r16, %r15;\n"
    "mov.b32 %r17, 0xFFFF0000; bfind.s32 %r18, %r17;\n"
    "st.global.u32 [%a+52], %r13; st.global.u32 [%a+56], %r14; st.global.u32 [%a+60], %r16; st.global.u32 [%a+64], %r18;\n"
    "mov.b32 %r19, 0x12345678; brev.b32 %r20, %r19; st.global.u32 [%a+68], %r20;\n"
    "mov.b32 %r21, 0xF; mov.b32 %r22, 0xFFFF0000; bfi.b32 %r23, %r21, %r22, 4, 8; st.global.u32 [%a+72], %r23;\n"
    "mov.b32 %r24, 0x80000001; mov.b32 %r25, 2; mov.b32 %r26, 4; mov.b32 %r27, 40; mov.b32 %r28, 36;\n"
    "shf.l.wrap.b32 %r29, %r24, %r25, %r26; st.global.u32 [%a+76], %r29;\n"
    "shf.r.clamp.b32 %r29, %r24, %r25, %r27; st.global.u32 [%a+80], %r29;\n"
    "shf.r.wrap.b32 %r29, %r24, %r25, %r28; st.global.u32 [%a+84], %r29;\n"
    "mov.f32 %f12, 0fBF800000; mov.f32 %f13, 0f40200000; copysign.f32 %f14, %f12, %f13; st.global.f32 [%a+88], %f14;\n"
    "$d: ret;\n}\n";

/* 256-bit global load and store (sm_100, PTX 8.8) */
static const char k_v8[] = ".version 8.8\n.target sm_100a\n.address_size 64\n"
    ".visible .entry k(.param .u64 p)\n{\n"
    ".reg .b64 %a; .reg .b32 %r<8>;\n"
    "ld.param.u64 %a, [p]; ld.global.v8.b32 {%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}, [%a];\n"
    "st.global.v8.b32 [%a+32], {%r7, %r6, %r5, %r4, %r3, %r2, %r1, %r0};\nret;\n}\n";

/* warp sum of the lane ids with shfl.bfly; vote.any; elect */
static const char k_warp[] = HEADER
    ".visible .entry k(.param .u64 p)\n{\n"
    ".reg .b64 %a; .reg .b32 %r<6>; .reg .pred %q<3>;\n"
    "ld.param.u64 %a, [p];\n"
    "mov.u32 %r0, %tid.x;\n"
    "shfl.sync.bfly.b32 %r1, %r0, 16, 0x1f, 0xffffffff; add.u32 %r0, %r0, %r1;\n"
    "shfl.sync.bfly.b32 %r1, %r0, 8, 0x1f, 0xffffffff; add.u32 %r0, %r0, %r1;\n"
    "shfl.sync.bfly.b32 %r1, %r0, 4, 0x1f, 0xffffffff; add.u32 %r0, %r0, %r1;\n"
    "shfl.sync.bfly.b32 %r1, %r0, 2, 0x1f, 0xffffffff; add.u32 %r0, %r0, %r1;\n"
    "shfl.sync.bfly.b32 %r1, %r0, 1, 0x1f, 0xffffffff; add.u32 %r0, %r0, %r1;\n"
    "mov.u32 %r2, %tid.x; setp.eq.u32 %q0, %r2, 7;\n"
    "vote.sync.any.pred %q1, %q0, 0xffffffff;\n"
    "elect.sync %r3|%q2, 0xffffffff;\n"
    "@!%q2 bra $done;\n"
    "st.global.u32 [%a], %r0;\n"
    "selp.u32 %r4, 1, 0, %q1; st.global.u32 [%a+4], %r4;\n"
    "st.global.u32 [%a+8], %r2;\n"
    "$done: ret;\n}\n";

/* thread 0 writes smem, thread 32 reads it: with bar.sync (ok) or without (a hazard) */
#define K_SYNC(SYNC) HEADER \
    ".visible .entry k(.param .u64 p)\n{\n" \
    ".reg .b64 %a; .reg .b32 %r<4>; .reg .pred %q;\n" \
    "ld.param.u64 %a, [p]; mov.u32 %r0, %tid.x; mov.u32 %r1, smem;\n" \
    "setp.ne.u32 %q, %r0, 0; @%q bra $skip; mov.u32 %r2, 77; st.shared.u32 [%r1], %r2;\n" \
    "$skip: " SYNC "\n" \
    "setp.ne.u32 %q, %r0, 32; @%q bra $done; ld.shared.u32 %r3, [%r1]; st.global.u32 [%a], %r3;\n" \
    "$done: ret;\n}\n"
static const char k_sync_ok[] = K_SYNC("bar.sync 0;");
static const char k_sync_race[] = K_SYNC("");

/* one thread bulk-copies 64 bytes from global into smem on an mbarrier; thread 32 waits (or not),
 * reads and bulk-stores them back 64 bytes further on */
#define K_BULK(WAIT) HEADER \
    ".visible .entry k(.param .u64 p)\n{\n" \
    ".reg .b64 %a, %b; .reg .b32 %r<6>; .reg .pred %q<3>;\n" \
    "ld.param.u64 %a, [p]; mov.u32 %r0, %tid.x; mov.u32 %r1, smem; add.u32 %r1, %r1, 1023; and.b32 %r1, %r1, -1024;\n" \
    "add.u32 %r2, %r1, 512;\n" /* the mbarrier */ \
    "setp.ne.u32 %q0, %r0, 0; @%q0 bra $w; mbarrier.init.shared::cta.b64 [%r2], 1; fence.mbarrier_init.release.cluster;\n" \
    "$w: bar.sync 0;\n" \
    "@%q0 bra $c; mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 64;\n" \
    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%a], 64, [%r2];\n" \
    "$c: setp.ne.u32 %q1, %r0, 32; @%q1 bra $done;\n" \
    WAIT \
    "ld.shared.u32 %r3, [%r1+4]; add.u32 %r3, %r3, 1; st.shared.u32 [%r1+4], %r3; fence.proxy.async.shared::cta;\n" \
    "add.u64 %b, %a, 64; cp.async.bulk.global.shared::cta.bulk_group [%b], [%r1], 64; cp.async.bulk.commit_group;\n" \
    "cp.async.bulk.wait_group 0;\n" \
    "$done: ret;\n}\n"
static const char k_bulk_ok[] = K_BULK("$l: mbarrier.try_wait.parity.shared::cta.b64 %q2, [%r2], 0; @!%q2 bra $l;\n");
static const char k_bulk_race[] = K_BULK("");

/* one thread bulk-stores 64 bytes of smem, spins long enough for the store to have finished, then writes the
 * source again: the ISA lets the store read its source until the thread's wait_group.read, so without that wait
 * the write is a hazard however early the store ran */
#define K_STORE_REUSE(WAIT) HEADER \
    ".visible .entry k(.param .u64 p)\n{\n" \
    ".reg .b64 %a; .reg .b32 %r<4>; .reg .pred %q;\n" \
    "ld.param.u64 %a, [p]; mov.u32 %r0, %tid.x; mov.u32 %r1, smem; add.u32 %r1, %r1, 1023; and.b32 %r1, %r1, -1024;\n" \
    "setp.ne.u32 %q, %r0, 0; @%q bra $done; mov.u32 %r2, 7;\n" \
    "st.shared.v4.u32 [%r1], {%r2, %r2, %r2, %r2}; st.shared.v4.u32 [%r1+16], {%r2, %r2, %r2, %r2};\n" \
    "st.shared.v4.u32 [%r1+32], {%r2, %r2, %r2, %r2}; st.shared.v4.u32 [%r1+48], {%r2, %r2, %r2, %r2};\n" \
    "fence.proxy.async.shared::cta;\n" \
    "cp.async.bulk.global.shared::cta.bulk_group [%a], [%r1], 64; cp.async.bulk.commit_group;\n" \
    WAIT \
    "mov.u32 %r3, 0; $spin: add.u32 %r3, %r3, 1; setp.lt.u32 %q, %r3, 64; @%q bra $spin;\n" \
    "st.shared.u32 [%r1], %r3; cp.async.bulk.wait_group 0;\n" \
    "$done: ret;\n}\n"
static const char k_store_reuse_ok[] = K_STORE_REUSE("cp.async.bulk.wait_group.read 0;\n");
static const char k_store_reuse_race[] = K_STORE_REUSE("");

/* an mbarrier expecting 2 arrivals gets 1: every waiter stays */
static const char k_deadlock[] = HEADER
    ".visible .entry k(.param .u64 p)\n{\n"
    ".reg .b32 %r<3>; .reg .pred %q<2>;\n"
    "mov.u32 %r0, %tid.x; mov.u32 %r1, smem; add.u32 %r1, %r1, 1023; and.b32 %r1, %r1, -1024;\n"
    "setp.ne.u32 %q0, %r0, 0; @%q0 bra $w; mbarrier.init.shared::cta.b64 [%r1], 2;\n"
    "mbarrier.arrive.shared::cta.b64 _, [%r1];\n"
    "$w: bar.sync 0;\n"
    "$l: mbarrier.try_wait.parity.shared::cta.b64 %q1, [%r1], 0; @!%q1 bra $l;\n"
    "ret;\n}\n";

/* three arrivals on an mbarrier of count 2 (in one phase: the third is one too many) */
static const char k_overarrive[] = HEADER
    ".visible .entry k(.param .u64 p)\n{\n"
    ".reg .b32 %r<3>; .reg .pred %q<2>;\n"
    "mov.u32 %r0, %tid.x; mov.u32 %r1, smem; add.u32 %r1, %r1, 1023; and.b32 %r1, %r1, -1024;\n"
    "setp.ne.u32 %q0, %r0, 0; @%q0 bra $done; mbarrier.init.shared::cta.b64 [%r1], 2;\n"
    "mbarrier.arrive.shared::cta.b64 _, [%r1], 3;\n"
    "$done: ret;\n}\n";

/* an mbarrier of count 1, one arrival each by lane 0 of warps 0 and 1: whichever comes second counts toward
 * phase 1 without being ordered after the first (on another schedule the two swap phases); the twin has warp 1
 * wait for phase 0 before it arrives */
#define K_ARRIVE_ORDER(WAIT) HEADER \
    ".visible .entry k(.param .u64 p)\n{\n" \
    ".reg .b32 %r<3>; .reg .pred %q<3>;\n" \
    "mov.u32 %r0, %tid.x; mov.u32 %r1, smem; add.u32 %r1, %r1, 1023; and.b32 %r1, %r1, -1024;\n" \
    "setp.ne.u32 %q0, %r0, 0; @%q0 bra $init; mbarrier.init.shared::cta.b64 [%r1], 1;\n" \
    "$init: bar.sync 0; and.b32 %r2, %r0, 31; setp.ne.u32 %q0, %r2, 0; @%q0 bra $done;\n" \
    "setp.ne.u32 %q0, %r0, 32; @%q0 bra $arrive;\n" WAIT \
    "$arrive: mbarrier.arrive.shared::cta.b64 _, [%r1];\n" \
    "$done: ret;\n}\n"
static const char k_arrive_unordered[] = K_ARRIVE_ORDER("");
static const char k_arrive_ordered[] = K_ARRIVE_ORDER(
    "$w: mbarrier.try_wait.parity.shared::cta.b64 %q1, [%r1], 0; @!%q1 bra $w;\n");

/* mbarrier.test_wait never blocks (PTX ISA: a non-blocking test of the phase): thread 0 tests phase 0 of an
 * mbarrier nobody arrived on (0), arrives, tests again (1); with try_wait in the first test's place the wait is
 * one that blocks on a phase only the waiter itself would complete */
#define K_TEST_WAIT(FIRST) HEADER \
    ".visible .entry k(.param .u64 p)\n{\n" \
    ".reg .b64 %a; .reg .b32 %r<4>; .reg .pred %q<2>;\n" \
    "ld.param.u64 %a, [p]; mov.u32 %r1, smem; add.u32 %r1, %r1, 1023; and.b32 %r1, %r1, -1024;\n" \
    "mbarrier.init.shared::cta.b64 [%r1], 1;\n" \
    FIRST " %q0, [%r1], 0; selp.u32 %r2, 1, 0, %q0; st.global.u32 [%a], %r2;\n" \
    "mbarrier.arrive.shared::cta.b64 _, [%r1];\n" \
    "mbarrier.test_wait.parity.shared::cta.b64 %q1, [%r1], 0; selp.u32 %r3, 1, 0, %q1; st.global.u32 [%a+4], %r3;\n" \
    "ret;\n}\n"
static const char k_test_wait[] = K_TEST_WAIT("mbarrier.test_wait.parity.shared::cta.b64");
static const char k_test_wait_blocking[] = K_TEST_WAIT("mbarrier.try_wait.parity.shared::cta.b64");

/* griddepcontrol.wait under FA4SIM_PREV_GRID=N: the thread passes it only in scheduler round N or later (the
 * clock reads the round): the previous grid runs until then */
static const char k_griddep[] = HEADER
    ".visible .entry k(.param .u64 p)\n{\n"
    ".reg .b64 %a, %c;\n"
    "ld.param.u64 %a, [p]; griddepcontrol.wait; mov.u64 %c, %clock64; st.global.u64 [%a], %c;\n"
    "ret;\n}\n";

static const char k_oob[] = HEADER
    ".visible .entry k(.param .u64 p)\n{\n"
    ".reg .b64 %a; .reg .b32 %r;\n"
    "ld.param.u64 %a, [p]; mov.u32 %r, 5; st.global.u32 [%a+4096], %r; ret;\n}\n";

/* TMEM: allocate 64 columns in warp 0 and leave without freeing (or free twice) */
#define K_TMEM(TAIL) HEADER \
    ".visible .entry k(.param .u64 p)\n{\n" \
    ".reg .b32 %r<3>;\n" \
    "mov.u32 %r1, smem; add.u32 %r1, %r1, 1023; and.b32 %r1, %r1, -1024;\n" \
    "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 64;\n" \
    "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n" \
    "tcgen05.fence::before_thread_sync; bar.sync 0; tcgen05.fence::after_thread_sync;\n" \
    "ld.shared.b32 %r2, [%r1];\n" TAIL "ret;\n}\n"
static const char k_tmem_ok[] = K_TMEM("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 64;\n");
static const char k_tmem_leak[] = K_TMEM("");
static const char k_tmem_double[] = K_TMEM("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 64;\n"
                                           "tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 64;\n");
/* tcgen05.ld of lanes 32..63 from warp 0 (its quarter is lanes 0..31) */
static const char k_tmem_quarter[] = K_TMEM("mov.u32 %r0, 2097152;\n" /* lane 32 << 16 */
                                            "tcgen05.st.sync.aligned.32x32b.x1.b32 [%r0], {%r2};\n"
                                            "tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 64;\n");

/* ------------------------------------------------------------ cp.async (non-bulk) */
/* Global layout of these kernels: 8 rows of 16 bytes at +0, 32 int32 row indices at +512, output
 * at +1024. A smem base aligned to 1024 in %r1. */
#define CPA_PROLOGUE \
    "ld.param.u64 %a, [p]; mov.u32 %r0, %tid.x; mov.u32 %r1, smem; add.u32 %r1, %r1, 1023; and.b32 %r1, %r1, -1024;\n"
/* thread i (of 32) gathers row idx[i] into smem + 16 i: src-size 16 for 0 <= idx < 8, else 0
 * with the row address as computed (out of every allocation for most of the invalid ones) */
#define CPA_GATHER(I) \
    "mul.wide.u32 %g, " I ", 4; add.u64 %g, %g, %a; ld.global.s32 %r2, [%g+512];\n" \
    "setp.lt.u32 %q0, %r2, 8; selp.u32 %r3, 16, 0, %q0;\n" \
    "mul.wide.s32 %g, %r2, 16; add.u64 %g, %g, %a; shl.b32 %r4, " I ", 4; add.u32 %r4, %r4, %r1;\n" \
    "cp.async.cg.shared.global [%r4], [%g], 16, %r3;\n"
/* thread i stores smem row (i + K) % 32 to the output row i */
#define CPA_READ_ROW(I, K) \
    "add.u32 %r5, " I ", " K "; and.b32 %r5, %r5, 31; shl.b32 %r5, %r5, 4; add.u32 %r5, %r5, %r1;\n" \
    "ld.shared.v4.u32 {%r6, %r7, %r8, %r9}, [%r5];\n" \
    "mul.wide.u32 %o, " I ", 16; add.u64 %o, %o, %a; st.global.v4.u32 [%o+1024], {%r6, %r7, %r8, %r9};\n"
#define CPA_REGS ".reg .b64 %a, %g, %o; .reg .b32 %r<12>; .reg .pred %q<4>;\n"

/* 32 threads gather, wait for their group, synchronise, and read their neighbour's row */
#define K_CPA_GATHER(WAIT, SYNC) HEADER \
    ".visible .entry k(.param .u64 p)\n{\n" CPA_REGS CPA_PROLOGUE CPA_GATHER("%r0") \
    "cp.async.commit_group;\n" WAIT "\n" SYNC "\n" CPA_READ_ROW("%r0", "1") "ret;\n}\n"
static const char k_cpa_gather[] = K_CPA_GATHER("cp.async.wait_group 0;", "bar.sync 0;");
static const char k_cpa_no_bar[] = K_CPA_GATHER("cp.async.wait_group 0;", "");
static const char k_cpa_no_wait_bar[] = K_CPA_GATHER("", "bar.sync 0;");

/* each thread reads its own copy: after wait_group (ok) or before it (a hazard, however early the
 * copy lands: the words stay the copy's until a wait publishes them) */
#define K_CPA_SELF(BEFORE, AFTER) HEADER \
    ".visible .entry k(.param .u64 p)\n{\n" CPA_REGS CPA_PROLOGUE CPA_GATHER("%r0") \
    "cp.async.commit_group;\n" BEFORE "\n" \
    CPA_READ_ROW("%r0", "0") AFTER "\nret;\n}\n"
static const char k_cpa_self_ok[] = K_CPA_SELF("cp.async.wait_group 0;", "");
static const char k_cpa_self_early[] = K_CPA_SELF("", "cp.async.wait_group 0;");

/* thread 0 copies and signals thread 32 with a plain mbarrier.arrive: the wait_group must come
 * before the release (ok), not after it (a hazard: the release carries an epoch older than the
 * copy's publication) */
#define K_CPA_RELEASE(BEFORE, AFTER) HEADER \
    ".visible .entry k(.param .u64 p)\n{\n" CPA_REGS CPA_PROLOGUE \
    "add.u32 %r10, %r1, 1024;\n" \
    "setp.ne.u32 %q1, %r0, 0; @%q1 bra $w; mbarrier.init.shared::cta.b64 [%r10], 1;\n" \
    "$w: bar.sync 0;\n" \
    "@%q1 bra $c;\n" CPA_GATHER("%r0") "cp.async.commit_group;\n" BEFORE "\n" \
    "mbarrier.arrive.shared::cta.b64 _, [%r10];\n" AFTER "\nbra $done;\n" \
    "$c: setp.ne.u32 %q2, %r0, 32; @%q2 bra $done;\n" \
    "$l: mbarrier.try_wait.parity.shared::cta.b64 %q3, [%r10], 0; @!%q3 bra $l;\n" \
    "mov.u32 %r11, 0;\n" CPA_READ_ROW("%r11", "0") \
    "$done: ret;\n}\n"
static const char k_cpa_release_ok[] = K_CPA_RELEASE("cp.async.wait_group 0;", "");
static const char k_cpa_release_early[] = K_CPA_RELEASE("", "cp.async.wait_group 0;");

/* warp 0 gathers and signals warp 1 through an mbarrier that tracks its copies: with .noinc
 * (COUNT 32: the arrive-ons are the arrivals), or without (each arrive-on nets zero, so the
 * producers also arrive normally). Warp 1 reads row (j + 5) % 32. */
#define K_CPA_MBAR(COUNT, SIGNAL) HEADER \
    ".visible .entry k(.param .u64 p)\n{\n" CPA_REGS CPA_PROLOGUE \
    "add.u32 %r10, %r1, 1024;\n" \
    "setp.ne.u32 %q1, %r0, 0; @%q1 bra $w; mbarrier.init.shared::cta.b64 [%r10], " COUNT ";\n" \
    "fence.mbarrier_init.release.cluster;\n" \
    "$w: bar.sync 0;\n" \
    "setp.ge.u32 %q1, %r0, 32; @%q1 bra $c;\n" CPA_GATHER("%r0") SIGNAL "\nbra $done;\n" \
    "$c: $l: mbarrier.try_wait.parity.shared::cta.b64 %q3, [%r10], 0; @!%q3 bra $l;\n" \
    "sub.u32 %r11, %r0, 32;\n" CPA_READ_ROW("%r11", "5") \
    "$done: ret;\n}\n"
static const char k_cpa_noinc[] = K_CPA_MBAR("32", "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%r10];");
static const char k_cpa_inc[] = K_CPA_MBAR("32", "cp.async.mbarrier.arrive.shared::cta.b64 [%r10];\n"
                                                 "mbarrier.arrive.shared::cta.b64 _, [%r10];");
/* init counts one arrival fewer than the .noinc arrive-ons (31): phase 0 completes without the
 * last copy, which lands in phase 1, and the consumer that reads it has not waited for that phase */
static const char k_cpa_noinc_count[] = K_CPA_MBAR("31", "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%r10];");
/* without .noinc and without the normal arrivals the phase never completes */
static const char k_cpa_inc_only[] = K_CPA_MBAR("32", "cp.async.mbarrier.arrive.shared::cta.b64 [%r10];");

/* one thread, two groups: wait_group 1 publishes the older group only */
#define K_CPA_GROUPS(OFF) HEADER \
    ".visible .entry k(.param .u64 p)\n{\n" CPA_REGS CPA_PROLOGUE \
    "cp.async.ca.shared.global [%r1], [%a], 16; cp.async.commit_group;\n" \
    "cp.async.cg.shared.global [%r1+16], [%a+16], 16; cp.async.commit_group;\n" \
    "cp.async.wait_group 1;\n" \
    "ld.shared.v4.u32 {%r6, %r7, %r8, %r9}, [%r1+" OFF "]; st.global.v4.u32 [%a+1024], {%r6, %r7, %r8, %r9};\n" \
    "cp.async.wait_all;\nret;\n}\n"
static const char k_cpa_groups[] = K_CPA_GROUPS("0");
static const char k_cpa_groups_young[] = K_CPA_GROUPS("16");

/* one thread: the sizes and the zero fill. Source bytes at +0..80; smem offsets 0 (4 bytes),
 * 16 (8 bytes, src-size 3), 32 (16 bytes .cg, src-size 5 in a register), 48 (4 bytes, ignore-src
 * true, address out of every allocation), 52 (4 bytes, ignore-src false), 64 (16 bytes, src-size
 * Z at an address out of every allocation, with a cache policy); each copied back to +1024 + offset */
#define K_CPA_SIZES(Z) HEADER \
    ".visible .entry k(.param .u64 p)\n{\n" CPA_REGS ".reg .b64 %bad, %pol;\n" CPA_PROLOGUE \
    "add.u64 %bad, %a, 1073741824; mov.b64 %pol, 0; mov.u32 %r2, 5;\n" \
    "setp.eq.u32 %q0, %r2, 5; setp.ne.u32 %q1, %r2, 5;\n" \
    "cp.async.ca.shared.global [%r1], [%a], 4;\n" \
    "cp.async.ca.shared::cta.global [%r1+16], [%a+16], 8, 3;\n" \
    "cp.async.cg.shared.global.L2::128B [%r1+32], [%a+32], 16, %r2;\n" \
    "cp.async.ca.shared.global [%r1+48], [%bad], 4, %q0;\n" \
    "cp.async.ca.shared.global [%r1+52], [%a+52], 4, %q1;\n" \
    "cp.async.cg.shared.global.L2::cache_hint [%r1+64], [%bad], 16, " Z ", %pol;\n" \
    "cp.async.wait_all;\n" \
    "ld.shared.u32 %r6, [%r1]; st.global.u32 [%a+1024], %r6;\n" \
    "ld.shared.v2.u32 {%r6, %r7}, [%r1+16]; st.global.v2.u32 [%a+1040], {%r6, %r7};\n" \
    "ld.shared.v4.u32 {%r6, %r7, %r8, %r9}, [%r1+32]; st.global.v4.u32 [%a+1056], {%r6, %r7, %r8, %r9};\n" \
    "ld.shared.v2.u32 {%r6, %r7}, [%r1+48]; st.global.v2.u32 [%a+1072], {%r6, %r7};\n" \
    "ld.shared.v4.u32 {%r6, %r7, %r8, %r9}, [%r1+64]; st.global.v4.u32 [%a+1088], {%r6, %r7, %r8, %r9};\n" \
    "ret;\n}\n"
static const char k_cpa_sizes[] = K_CPA_SIZES("0");
static const char k_cpa_oob[] = K_CPA_SIZES("16");

/* the rows, the indices (valid ones and each kind of invalid one) */
static void cpa_inputs(CUdeviceptr buf, int32_t idx[32])
{
    uint32_t rows[32];
    for (int r = 0; r < 8; r++)
        for (int j = 0; j < 4; j++) rows[r * 4 + j] = 0x1000u * (uint32_t)(r + 1) + (uint32_t)j;
    for (int i = 0; i < 32; i++) idx[i] = (i * 3) % 8;
    idx[3] = -1, idx[7] = 8, idx[11] = INT32_MIN, idx[15] = INT32_MAX, idx[20] = 1000000, idx[26] = -8;
    cuMemsetD8(buf, 0, 4096);
    cuMemcpyHtoD(buf, rows, sizeof rows);
    cuMemcpyHtoD(buf + 512, idx, 32 * sizeof(int32_t));
    cuMemsetD8(buf + 1024, 0xEE, 512); /* so that zeros are written, not left */
}

/* Output row i holds gathered row idx[(i + k) % 32] (zeros when invalid) for i < n. */
static int cpa_rows_ok(CUdeviceptr buf, const int32_t idx[32], int k, int n)
{
    uint32_t out[128];
    cuMemcpyDtoH(out, buf + 1024, sizeof out);
    for (int i = 0; i < n; i++) {
        int32_t r = idx[(i + k) % 32];
        for (int j = 0; j < 4; j++) {
            uint32_t want = r >= 0 && r < 8 ? 0x1000u * (uint32_t)(r + 1) + (uint32_t)j : 0;
            if (out[i * 4 + j] != want) {
                printf("  row %d word %d: got 0x%x, want 0x%x (index %d)\n", i, j, out[i * 4 + j], want, r);
                return 0;
            }
        }
    }
    return 1;
}

static void test_cp_async(CUdeviceptr buf)
{
    int32_t idx[32];
    cpa_inputs(buf, idx);
    expect_ok("cp.async gather", k_cpa_gather, 32, buf);
    check(cpa_rows_ok(buf, idx, 1, 32), "cp.async gather: valid rows copied, invalid indices zero-filled");
    expect_report("cp.async: another thread's row read without a barrier", k_cpa_no_bar, 32, buf,
                  "reads shared memory");
    expect_report("cp.async: another thread's row read before its wait_group", k_cpa_no_wait_bar, 32, buf,
                  "in-flight async op");

    cpa_inputs(buf, idx);
    expect_ok("cp.async: own copy read after wait_group", k_cpa_self_ok, 32, buf);
    check(cpa_rows_ok(buf, idx, 0, 32), "cp.async: own copy read after wait_group");
    expect_report("cp.async: own copy read before wait_group", k_cpa_self_early, 32, buf, "in-flight async op");

    cpa_inputs(buf, idx);
    expect_ok("cp.async.wait_group 1", k_cpa_groups, 1, buf);
    int32_t first[32] = {0};
    check(cpa_rows_ok(buf, first, 0, 1), "cp.async.wait_group 1: the older group's row");
    expect_report("cp.async.wait_group 1: the younger group read", k_cpa_groups_young, 1, buf, "in-flight async op");

    cpa_inputs(buf, idx);
    expect_ok("cp.async: wait_group, then mbarrier.arrive", k_cpa_release_ok, 64, buf);
    check(cpa_rows_ok(buf, idx, 0, 1), "cp.async: a wait_group before the release publishes the copy");
    expect_report("cp.async: mbarrier.arrive, then wait_group", k_cpa_release_early, 64, buf, "reads shared memory");

    cpa_inputs(buf, idx);
    expect_ok("cp.async.mbarrier.arrive.noinc", k_cpa_noinc, 64, buf);
    check(cpa_rows_ok(buf, idx, 5, 32), "cp.async.mbarrier.arrive.noinc: the consumer warp reads the gathered rows");
    cpa_inputs(buf, idx);
    expect_ok("cp.async.mbarrier.arrive + mbarrier.arrive", k_cpa_inc, 64, buf);
    check(cpa_rows_ok(buf, idx, 5, 32), "cp.async.mbarrier.arrive (no .noinc): the consumer warp reads the rows");
    expect_report(".noinc arrivals not counted by mbarrier.init", k_cpa_noinc_count, 64, buf, "reads shared memory");
    expect_report("cp.async.mbarrier.arrive without .noinc nets zero", k_cpa_inc_only, 64, buf, "deadlock");

    uint8_t src[80], out[80];
    for (int i = 0; i < 80; i++) src[i] = (uint8_t)(i * 7 + 3);
    cuMemsetD8(buf, 0, 4096);
    cuMemcpyHtoD(buf, src, sizeof src);
    cuMemsetD8(buf + 1024, 0xEE, 80);
    expect_ok("cp.async sizes, src-size, ignore-src", k_cpa_sizes, 1, buf);
    cuMemcpyDtoH(out, buf + 1024, sizeof out);
    static const uint8_t z[16];
    check(!memcmp(out, src, 4), "cp.async.ca 4 bytes");
    check(!memcmp(out + 16, src + 16, 3) && !memcmp(out + 19, z, 5), "cp.async.ca 8 bytes, src-size 3: 5 zeros");
    check(!memcmp(out + 32, src + 32, 5) && !memcmp(out + 37, z, 11), "cp.async.cg 16 bytes, src-size 5 (register)");
    check(!memcmp(out + 48, z, 4), "ignore-src true: zeros, the address is not read");
    check(!memcmp(out + 52, src + 52, 4), "ignore-src false: copied");
    check(!memcmp(out + 64, z, 16), "src-size 0 at an address outside every allocation: zeros, no fault");
    expect_report("cp.async src-size 16 at an address outside every allocation", k_cpa_oob, 1, buf,
                  "outside every allocation");
}

/* ------------------------------------------------------------ CTA pairs */
#define HEADER_TMAP HEADER ".visible .entry k(.param .u64 p, .param .align 64 .b8 tmap[128])\n{\n"

/* A 2-CTA cluster, 32 threads each. CTA 1 gathers rows {0, -1, 5, 1000} of a 2D tensor (8 rows of
 * 64 u16) into its own shared memory with tile::gather4 (GATHER: the instruction), signalling the
 * mbarrier at the same offset in CTA 0, named by clearing bit 24 of its own address (the peer bit).
 * CTA 0 expects the bytes and waits, then the cluster synchronises (SYNC) and CTA 1 copies its
 * rows to global +2048. */
#define K_PAIR_GATHER(GATHER, SYNC) HEADER_TMAP \
    ".reg .b64 %a, %t, %o; .reg .b32 %r<16>; .reg .pred %q<4>;\n" \
    "ld.param.u64 %a, [p]; mov.u64 %t, tmap; cvta.param.u64 %t, %t;\n" \
    "mov.u32 %r0, %tid.x; mov.u32 %r1, %cluster_ctarank;\n" \
    "mov.u32 %r2, smem; add.u32 %r2, %r2, 1023; and.b32 %r2, %r2, -1024; add.u32 %r3, %r2, 4096;\n" \
    "setp.ne.u32 %q0, %r0, 0; setp.ne.u32 %q1, %r1, 0;\n" \
    "@%q0 bra $i; mbarrier.init.shared::cta.b64 [%r3], 1; fence.mbarrier_init.release.cluster;\n" \
    "$i: barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;\n" \
    "@%q0 bra $s; @%q1 bra $g;\n" \
    "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 512;\n" \
    "$l: mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %q2, [%r3], 0; @!%q2 bra $l; bra $s;\n" \
    "$g: and.b32 %r4, %r3, 0xFEFFFFFF; mov.u32 %r5, 0; mov.u32 %r6, -1; mov.u32 %r7, 5; mov.u32 %r8, 1000;\n" \
    "cp.async.bulk.prefetch.tensor.2d.L2.global.tile::gather4 [%t, {%r5, %r5, %r6, %r7, %r8}];\n" \
    GATHER " [%r2], [%t, {%r5, %r5, %r6, %r7, %r8}], [%r4];\n" \
    "$s: " SYNC "\n" \
    "@!%q1 bra $d; shl.b32 %r9, %r0, 4; add.u32 %r10, %r2, %r9;\n" \
    "ld.shared.v4.u32 {%r11, %r12, %r13, %r14}, [%r10];\n" \
    "cvt.u64.u32 %o, %r9; add.u64 %o, %o, %a; st.global.v4.u32 [%o+2048], {%r11, %r12, %r13, %r14};\n" \
    "$d: ret;\n}\n"
#define GATHER_PAIR "cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes.cta_group::2"
#define GATHER_ONE "cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes"
#define SYNC_RA "barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;"
static const char k_pair_gather[] = K_PAIR_GATHER(GATHER_PAIR, SYNC_RA);
/* a relaxed arrival releases nothing: CTA 1 reads rows whose completion it has not acquired */
static const char k_pair_gather_relaxed[] =
    K_PAIR_GATHER(GATHER_PAIR, "barrier.cluster.arrive.relaxed.aligned; barrier.cluster.wait.acquire.aligned;");
/* without .cta_group::2 the barrier must be in the destination CTA */
static const char k_pair_gather_nopair[] = K_PAIR_GATHER(GATHER_ONE, SYNC_RA);

/* CTA 1 thread 0 stores 0x1234 into CTA 0's shared memory through mapa, then arrives (ARRIVE) on
 * CTA 0's mbarrier; CTA 0 thread 0 waits (WAIT) and copies the word to global +3072. */
#define K_REMOTE(ARRIVE, WAIT, AFTER) HEADER_TMAP \
    ".reg .b64 %a; .reg .b32 %r<12>; .reg .pred %q<4>;\n" \
    "ld.param.u64 %a, [p]; mov.u32 %r0, %tid.x; mov.u32 %r1, %cluster_ctarank;\n" \
    "mov.u32 %r2, smem; add.u32 %r2, %r2, 1023; and.b32 %r2, %r2, -1024; add.u32 %r3, %r2, 4096;\n" \
    "setp.ne.u32 %q0, %r0, 0; setp.ne.u32 %q1, %r1, 0;\n" \
    "@%q0 bra $i; mbarrier.init.shared::cta.b64 [%r3], 1; fence.mbarrier_init.release.cluster;\n" \
    "$i: barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;\n" \
    "@%q0 bra $d; @!%q1 bra $w;\n" \
    "mapa.shared::cluster.u32 %r4, %r2, 0; mapa.shared::cluster.u32 %r5, %r3, 0; mov.u32 %r6, 0x1234;\n" \
    "st.shared::cluster.u32 [%r4], %r6;\n" ARRIVE " _, [%r5];\n bra $d;\n" \
    "$w: " WAIT " %q2, [%r3], 0; @!%q2 bra $w;\n" AFTER \
    "ld.shared.u32 %r7, [%r2]; st.global.u32 [%a+3072], %r7;\n" \
    "$d: ret;\n}\n"
#define ARRIVE_REL "mbarrier.arrive.release.cluster.shared::cluster.b64"
#define WAIT_ACQ "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64"
#define ARRIVE_RLX "mbarrier.arrive.relaxed.cluster.shared::cluster.b64"
#define WAIT_RLX "mbarrier.try_wait.parity.relaxed.cluster.shared::cta.b64"
static const char k_remote[] = K_REMOTE(ARRIVE_REL, WAIT_ACQ, "");
static const char k_remote_relaxed_arrive[] = K_REMOTE(ARRIVE_RLX, WAIT_ACQ, "");
static const char k_remote_relaxed_wait[] = K_REMOTE(ARRIVE_REL, WAIT_RLX, "");
/* the ISA's release and acquire patterns: a fence before the relaxed arrive, after the relaxed wait */
static const char k_remote_fenced[] = K_REMOTE("fence.acq_rel.cluster; " ARRIVE_RLX, WAIT_RLX, "fence.acq_rel.cluster;\n");
/* a fence after the relaxed arrive releases nothing to it (the predicated twin never runs: %q0 is false) */
static const char k_remote_fence_late[] =
    K_REMOTE(ARRIVE_RLX " _, [%r5]; fence.acq_rel.cluster; @%q0 " ARRIVE_RLX, WAIT_RLX, "fence.acq_rel.cluster;\n");
/* a shared::cta access with the peer's address (from mapa) faults */
static const char k_remote_cta_space[] = HEADER_TMAP
    ".reg .b32 %r<4>; .reg .pred %q;\n"
    "mov.u32 %r0, %cluster_ctarank; setp.ne.u32 %q, %r0, 1; @%q bra $d;\n"
    "mov.u32 %r1, smem; mapa.shared::cluster.u32 %r2, %r1, 0; ld.shared::cta.u32 %r3, [%r2];\n"
    "$d: ret;\n}\n";

/* The tensor cores of a CTA pair, end to end: D[256 x 64] = A[256 x 16] B[64 x 16]^T in bf16 with
 * cta_group::2. Each CTA (128 threads) stores its half of A (rows 128 rank + i) and of B (rows
 * 32 rank + j) in shared memory (no swizzle, K-major: 8-row core matrices of 16 bytes, SBO 128,
 * LBO 2048 for A, 512 for B), fences (FENCE) and meets the other at the cluster barrier; warp 0 of
 * each allocates 256 TMEM columns. CTA 0 thread 0 copies A into TMEM (CP, columns 128..135), issues
 * the A-from-TMEM MMA and commits to the done barrier of both CTAs; every thread waits (WAIT), and
 * each warp reads its 32 rows of D (8 x 32x32b.x8) to global +16384, row-major f32. */
#define K_PAIR_MMA(FENCE, CP, WAIT) K_PAIR_MMA_C(FENCE, CP, WAIT, "mov.b16 %m, 3;\n" PM_COMMIT "\n$w: ")
#define PM_COMMIT "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%r4], %m;"
#define K_PAIR_MMA_C(FENCE, CP, WAIT, COMMIT) HEADER_TMAP \
    ".reg .b64 %a, %g, %ad, %bd, %o; .reg .b32 %r<40>; .reg .pred %q<4>; .reg .b16 %m;\n" \
    "ld.param.u64 %a, [p]; mov.u32 %r0, %tid.x; mov.u32 %r1, %cluster_ctarank;\n" \
    "mov.u32 %r2, smem; add.u32 %r2, %r2, 1023; and.b32 %r2, %r2, -1024; add.u32 %r3, %r2, 6144; add.u32 %r4, %r2, 6160;\n" \
    "shr.u32 %r5, %r0, 5; and.b32 %r6, %r0, 31;\n" \
    "shl.b32 %r7, %r1, 7; add.u32 %r7, %r7, %r0; mul.wide.u32 %g, %r7, 32; add.u64 %g, %g, %a;\n" \
    "and.b32 %r8, %r0, 7; shl.b32 %r8, %r8, 4; shr.u32 %r9, %r0, 3; shl.b32 %r9, %r9, 7; add.u32 %r8, %r8, %r9;\n" \
    "add.u32 %r8, %r8, %r2;\n" \
    "ld.global.v4.u32 {%r10, %r11, %r12, %r13}, [%g]; st.shared.v4.u32 [%r8], {%r10, %r11, %r12, %r13};\n" \
    "ld.global.v4.u32 {%r10, %r11, %r12, %r13}, [%g+16]; st.shared.v4.u32 [%r8+2048], {%r10, %r11, %r12, %r13};\n" \
    "setp.lt.u32 %q0, %r0, 32; @!%q0 bra $nob;\n" \
    "shl.b32 %r7, %r1, 5; add.u32 %r7, %r7, %r0; mul.wide.u32 %g, %r7, 32; add.u64 %g, %g, %a; add.u32 %r8, %r8, 4096;\n" \
    "ld.global.v4.u32 {%r10, %r11, %r12, %r13}, [%g+8192]; st.shared.v4.u32 [%r8], {%r10, %r11, %r12, %r13};\n" \
    "ld.global.v4.u32 {%r10, %r11, %r12, %r13}, [%g+8208]; st.shared.v4.u32 [%r8+512], {%r10, %r11, %r12, %r13};\n" \
    "$nob: " FENCE "\n" \
    "setp.ne.u32 %q1, %r5, 0; @%q1 bra $na;\n" \
    "tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%r3], 256;\n" \
    "tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;\n" \
    "$na: setp.ne.u32 %q2, %r0, 0; @%q2 bra $nb; mbarrier.init.shared::cta.b64 [%r4], 1; fence.mbarrier_init.release.cluster;\n" \
    "$nb: tcgen05.fence::before_thread_sync; barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;\n" \
    "tcgen05.fence::after_thread_sync; ld.shared.u32 %r14, [%r3];\n" \
    "setp.ne.u32 %q3, %r1, 0; @%q3 bra $w; @%q2 bra $w;\n" \
    "cvt.u64.u32 %ad, %r2; shr.u64 %ad, %ad, 4; and.b64 %ad, %ad, 0x3fff; or.b64 %ad, %ad, 0x400800800000;\n" \
    "add.u32 %r15, %r2, 4096; cvt.u64.u32 %bd, %r15; shr.u64 %bd, %bd, 4; and.b64 %bd, %bd, 0x3fff;\n" \
    "or.b64 %bd, %bd, 0x400800200000; add.u32 %r16, %r14, 128;\n" \
    CP " [%r16], %ad;\n" \
    "mov.u32 %r17, 0x10100490; setp.ne.u32 %q0, %r17, %r17;\n" \
    "tcgen05.mma.cta_group::2.kind::f16 [%r14], [%r16], %bd, %r17, %q0;\n" \
    COMMIT WAIT "\n" \
    "tcgen05.fence::after_thread_sync;\n" \
    "shl.b32 %r18, %r5, 21; add.u32 %r18, %r18, %r14;\n" \
    "shl.b32 %r19, %r1, 7; shl.b32 %r20, %r5, 5; add.u32 %r19, %r19, %r20; add.u32 %r19, %r19, %r6;\n" \
    "mul.wide.u32 %o, %r19, 256; add.u64 %o, %o, %a; add.u64 %o, %o, 16384; mov.u32 %r21, 0;\n" \
    "$ld: add.u32 %r22, %r18, %r21;\n" \
    "tcgen05.ld.sync.aligned.32x32b.x8.b32 {%r24, %r25, %r26, %r27, %r28, %r29, %r30, %r31}, [%r22];\n" \
    "tcgen05.wait::ld.sync.aligned;\n" \
    "st.global.v4.u32 [%o], {%r24, %r25, %r26, %r27}; st.global.v4.u32 [%o+16], {%r28, %r29, %r30, %r31};\n" \
    "add.u64 %o, %o, 32; add.u32 %r21, %r21, 8; setp.lt.u32 %q0, %r21, 64; @%q0 bra $ld;\n" \
    "tcgen05.fence::before_thread_sync; barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;\n" \
    "tcgen05.fence::after_thread_sync;\n" \
    "@%q1 bra $d; tcgen05.dealloc.cta_group::2.sync.aligned.b32 %r14, 256;\n" \
    "$d: ret;\n}\n"
#define PM_FENCE "fence.proxy.async.shared::cta;"
#define PM_CP "tcgen05.cp.cta_group::2.128x256b"
#define PM_WAIT "$l: mbarrier.try_wait.parity.shared::cta.b64 %q0, [%r4], 0; @!%q0 bra $l;"
static const char k_pair_mma[] = K_PAIR_MMA(PM_FENCE, PM_CP, PM_WAIT);
/* the stores reach the async proxy (cp, MMA) without fence.proxy.async */
static const char k_pair_mma_nofence[] = K_PAIR_MMA("", PM_CP, PM_WAIT);
/* a cta_group::1 copy beside cta_group::2 ops: refused, as ptxas refuses it */
static const char k_pair_mma_cp1[] = K_PAIR_MMA(PM_FENCE, "tcgen05.cp.cta_group::1.128x256b", PM_WAIT);
/* waiting on the wrong parity passes at once: D is read before the commit */
static const char k_pair_mma_early[] =
    K_PAIR_MMA(PM_FENCE, PM_CP, "$l: mbarrier.try_wait.parity.shared::cta.b64 %q0, [%r4], 1; @!%q0 bra $l;");

/* the commit comes from thread 1 of CTA 0, which issued no MMA: it tracks nothing of thread 0's */
static const char k_pair_mma_other_commit[] = K_PAIR_MMA_C(
    PM_FENCE, PM_CP, PM_WAIT,
    "$w: setp.ne.u32 %q0, %r0, 1; @%q0 bra $w2; setp.ne.u32 %q0, %r1, 0; @%q0 bra $w2;\n"
    "mov.b16 %m, 3;\n" PM_COMMIT "\n$w2: ");

/* CTA 1 frees its TMEM and exits instead of waiting: the pair MMA writes into a CTA that is gone */
static const char k_pair_mma_peer_exit[] = K_PAIR_MMA(
    PM_FENCE, PM_CP,
    "@%q3 bra $x; $l: mbarrier.try_wait.parity.shared::cta.b64 %q0, [%r4], 0; @!%q0 bra $l; bra $y;\n"
    "$x: @%q1 bra $z; tcgen05.dealloc.cta_group::2.sync.aligned.b32 %r14, 256;\n$z: exit;\n$y:");

static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); /* the values used are exact in bf16 */
}

static void test_pair_mma(void)
{
    CUdeviceptr big;
    if (cuMemAlloc(&big, 16384 + 65536)) { check(0, "cuMemAlloc for the pair MMA"); return; }
    static float a[256][16], b[64][16], d[256][64];
    static uint16_t in[256 * 16 + 64 * 16];
    srand(7);
    for (int i = 0; i < 256; i++)
        for (int k = 0; k < 16; k++) a[i][k] = (float)(rand() % 17 - 8) / 4.0f, in[i * 16 + k] = bf16_of(a[i][k]);
    for (int j = 0; j < 64; j++)
        for (int k = 0; k < 16; k++) b[j][k] = (float)(rand() % 17 - 8) / 8.0f, in[4096 + j * 16 + k] = bf16_of(b[j][k]);
    cuMemsetD8(big, 0, 16384 + 65536);
    cuMemcpyHtoD(big, in, sizeof in);
    CUtensorMap unused;
    memset(&unused, 0, sizeof unused);
    expect_cluster("tcgen05.cp + mma + commit.multicast, cta_group::2", k_pair_mma, 2, 128, big, &unused, NULL);
    cuMemcpyDtoH(d, big + 16384, sizeof d);
    int bad = 0;
    for (int i = 0; i < 256; i++)
        for (int j = 0; j < 64; j++) {
            double want = 0;
            for (int k = 0; k < 16; k++) want += (double)a[i][k] * b[j][k];
            bad += d[i][j] != (float)want;
        }
    check(!bad, "cta_group::2 pair: D = A B^T over 256 rows (both CTAs' A copied into their own TMEM)");
    expect_cluster("pair MMA without fence.proxy.async", k_pair_mma_nofence, 2, 128, big, &unused, "fence.proxy.async");
    CUmodule mod;
    check(cuModuleLoadDataEx(&mod, k_pair_mma_cp1, 0, NULL, NULL) == CUDA_ERROR_INVALID_PTX,
          "tcgen05.cp.cta_group::1 in a kernel of cta_group::2 ops is refused at load");
    expect_cluster("pair MMA result read before the commit", k_pair_mma_early, 2, 128, big, &unused, "TMEM");
    expect_cluster("pair MMA committed by a thread that issued no MMA", k_pair_mma_other_commit, 2, 128, big, &unused,
                   "TMEM");
    /* reported as the peer's early dealloc, a write to its freed columns or its exit, as the schedule falls */
    expect_cluster("pair MMA while the peer CTA frees its TMEM and exits", k_pair_mma_peer_exit, 2, 128, big, &unused,
                   "hazard");
    cuMemFree(big);
}

/* TMA tile store of a 64 x 2 box of u16 at rows {7, 8} of an 8-row tensor: row 8 lies outside and
 * is not written. 32 threads fill the box (FENCE between their stores and the async proxy), thread 0
 * stores, commits and (WAIT) waits before it overwrites the box. */
#define K_TSTORE(FENCE, WAIT) HEADER_TMAP \
    ".reg .b64 %a, %t; .reg .b32 %r<8>; .reg .pred %q;\n" \
    "ld.param.u64 %a, [p]; mov.u64 %t, tmap; cvta.param.u64 %t, %t; mov.u32 %r0, %tid.x;\n" \
    "mov.u32 %r1, smem; add.u32 %r1, %r1, 1023; and.b32 %r1, %r1, -1024;\n" \
    "shl.b32 %r2, %r0, 3; add.u32 %r2, %r2, %r1; mul.lo.u32 %r3, %r0, 0x00040004; add.u32 %r3, %r3, 0x00020001;\n" \
    "add.u32 %r4, %r3, 0x00020002; st.shared.v2.u32 [%r2], {%r3, %r4};\n" \
    FENCE "\nbar.sync 0; setp.ne.u32 %q, %r0, 0; @%q bra $d; mov.u32 %r5, 0; mov.u32 %r6, 7;\n" \
    "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%t, {%r5, %r6}], [%r1]; cp.async.bulk.commit_group;\n" \
    WAIT "\nst.shared.u32 [%r1], %r5; cp.async.bulk.wait_group 0;\n" \
    "$d: ret;\n}\n"
static const char k_tstore[] = K_TSTORE("fence.proxy.async.shared::cta;", "cp.async.bulk.wait_group.read 0;");
static const char k_tstore_nowait[] = K_TSTORE("fence.proxy.async.shared::cta;", "");
static const char k_tstore_nofence[] = K_TSTORE("", "cp.async.bulk.wait_group.read 0;");

static void test_tma_store(CUdeviceptr buf)
{
    CUtensorMap map;
    cuuint64_t dims[2] = {64, 8}, strides[1] = {128};
    cuuint32_t box[2] = {64, 2}, es[2] = {1, 1};
    CUresult r = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, (void *)(uintptr_t)buf, dims, strides,
                                        box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                        CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    check(r == CUDA_SUCCESS, "tensor map for the store");
    cuMemsetD8(buf, 0xEE, 4096);
    expect_cluster("TMA tile store, wait_group.read before reuse", k_tstore, 1, 32, buf, &map, NULL);
    uint16_t g[2048];
    cuMemcpyDtoH(g, buf, sizeof g);
    int bad = 0;
    for (int i = 0; i < 2048; i++) {
        uint16_t want = i >= 7 * 64 && i < 8 * 64 ? (uint16_t)(i - 7 * 64 + 1) : 0xEEEE; /* row 7 = box row 0 */
        bad += g[i] != want;
    }
    check(!bad, "TMA store: box row 0 lands in tensor row 7; row 8 (outside) and the rest untouched");
    expect_cluster("TMA store source overwritten before wait_group.read", k_tstore_nowait, 1, 32, buf, &map,
                   "still reads");
    expect_cluster("TMA store of stores not fenced with fence.proxy.async", k_tstore_nofence, 1, 32, buf, &map,
                   "fence.proxy.async");
}

/* Two pairs (a 4-CTA cluster): CTA 1 multicasts a 64 x 2 box of u16 (rows 0-1) into CTAs 1 and 3 with
 * .cta_group::2, naming its pair's even barrier (peer bit cleared): each copy completes on the even
 * CTA of its own pair (0 and 2), which expect and wait; the odd CTAs then copy their box to global
 * +2048 + 256 (rank / 2). */
static const char k_mc_pair[] = HEADER_TMAP
    ".reg .b64 %a, %t, %o; .reg .b32 %r<16>; .reg .pred %q<4>; .reg .b16 %m;\n"
    "ld.param.u64 %a, [p]; mov.u64 %t, tmap; cvta.param.u64 %t, %t;\n"
    "mov.u32 %r0, %tid.x; mov.u32 %r1, %cluster_ctarank; and.b32 %r9, %r1, 1;\n"
    "mov.u32 %r2, smem; add.u32 %r2, %r2, 1023; and.b32 %r2, %r2, -1024; add.u32 %r3, %r2, 4096;\n"
    "setp.ne.u32 %q0, %r0, 0; setp.ne.u32 %q1, %r9, 0;\n"
    "@%q0 bra $i; mbarrier.init.shared::cta.b64 [%r3], 1; fence.mbarrier_init.release.cluster;\n"
    "$i: barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;\n"
    "@%q0 bra $s; @%q1 bra $g;\n"
    "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 256;\n"
    "$l: mbarrier.try_wait.parity.shared::cta.b64 %q2, [%r3], 0; @!%q2 bra $l; bra $s;\n"
    "$g: setp.ne.u32 %q3, %r1, 1; @%q3 bra $s; and.b32 %r4, %r3, 0xFEFFFFFF; mov.u32 %r5, 0; mov.b16 %m, 10;\n"
    "cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
    " [%r2], [%t, {%r5, %r5}], [%r4], %m;\n"
    "$s: barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;\n"
    "@!%q1 bra $d; shl.b32 %r6, %r0, 3; add.u32 %r7, %r2, %r6; ld.shared.v2.u32 {%r10, %r11}, [%r7];\n"
    "shr.u32 %r8, %r1, 1; shl.b32 %r8, %r8, 8; add.u32 %r8, %r8, %r6; cvt.u64.u32 %o, %r8; add.u64 %o, %o, %a;\n"
    "st.global.v2.u32 [%o+2048], {%r10, %r11};\n"
    "$d: ret;\n}\n";

static void test_pairs(CUdeviceptr buf)
{
    uint16_t rows[8][64];
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 64; c++) rows[r][c] = (uint16_t)(r * 1000 + c + 1);
    cuMemsetD8(buf, 0, 4096);
    cuMemcpyHtoD(buf, rows, sizeof rows);
    cuMemsetD8(buf + 2048, 0xEE, 512);
    CUtensorMap map;
    cuuint64_t dims[2] = {64, 8}, strides[1] = {128};
    cuuint32_t box[2] = {64, 1}, es[2] = {1, 1};
    CUresult r = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, (void *)(uintptr_t)buf, dims, strides,
                                        box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                        CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    check(r == CUDA_SUCCESS, "tensor map for the gather");
    expect_cluster("gather4.cta_group::2 into CTA 1 on CTA 0's barrier (peer bit cleared)", k_pair_gather, 2, 32, buf,
                   &map, NULL);
    uint16_t out[4][64];
    cuMemcpyDtoH(out, buf + 2048, sizeof out);
    int want[4] = {0, -1, 5, 1000}, bad = 0;
    for (int i = 0; i < 4; i++)
        for (int c = 0; c < 64; c++)
            bad += out[i][c] != (want[i] >= 0 && want[i] < 8 ? rows[want[i]][c] : 0);
    check(!bad, "gather4: rows 0 and 5 copied, rows -1 and 1000 (outside the tensor) zero-filled");
    expect_cluster("barrier.cluster.arrive.relaxed releases nothing", k_pair_gather_relaxed, 2, 32, buf, &map,
                   "reads shared memory");
    expect_cluster("gather4 without .cta_group::2 signalling the peer's barrier", k_pair_gather_nopair, 2, 32, buf,
                   &map, "cta_group::2");

    CUtensorMap box2;
    box[1] = 2;
    r = cuTensorMapEncodeTiled(&box2, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, (void *)(uintptr_t)buf, dims, strides, box, es,
                               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                               CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    cuMemsetD8(buf + 2048, 0xEE, 512);
    expect_cluster("multicast .cta_group::2 into both pairs, each completing on its pair's even barrier", k_mc_pair, 4,
                   32, buf, &box2, NULL);
    uint16_t mc[2][128];
    cuMemcpyDtoH(mc, buf + 2048, sizeof mc);
    bad = 0;
    for (int p2 = 0; p2 < 2; p2++)
        for (int i = 0; i < 128; i++) bad += mc[p2][i] != rows[i / 64][i % 64];
    check(r == CUDA_SUCCESS && !bad, "multicast pair load: CTAs 1 and 3 both hold rows 0-1");

    cuMemsetD8(buf + 3072, 0, 4);
    expect_cluster("mapa + st.shared::cluster + remote arrive.release / try_wait.acquire", k_remote, 2, 32, buf, &map,
                   NULL);
    uint32_t v = 0;
    cuMemcpyDtoH(&v, buf + 3072, 4);
    check(v == 0x1234, "the remote store is read after the mbarrier wait");
    expect_cluster("mbarrier.arrive.relaxed releases nothing", k_remote_relaxed_arrive, 2, 32, buf, &map,
                   "reads shared memory");
    expect_cluster("mbarrier.try_wait.relaxed acquires nothing", k_remote_relaxed_wait, 2, 32, buf, &map,
                   "reads shared memory");
    cuMemsetD8(buf + 3072, 0, 4);
    expect_cluster("fence.acq_rel + relaxed arrive, relaxed wait + fence.acq_rel", k_remote_fenced, 2, 32, buf, &map,
                   NULL);
    cuMemcpyDtoH(&v, buf + 3072, 4);
    check(v == 0x1234, "the remote store is read through the fenced relaxed pair");
    expect_cluster("a fence after the relaxed arrive", k_remote_fence_late, 2, 32, buf, &map, "reads shared memory");
    expect_cluster("ld.shared::cta of the peer's address", k_remote_cta_space, 2, 32, buf, &map, "shared::cta window");
}

/* Expected values, from the formats' definitions:
 *   e4m3 0x38 = 1.0, 0xC4 = -(1 + 4/8) * 2 = -3, 0x01 = 2^-9 (subnormal), 0x7F = NaN;
 *   e5m2 0x3C = 1.0, 0x7C = inf; f16 1.0 = 0x3C00, -3 = 0xC200, 2^-9 = 0x1800, inf = 0x7C00;
 *   f16 500 (0x5FD0) saturates to e4m3 448 = 0x7E; f16 0.3125 = 0x3500 -> e4m3 0x2A;
 *   f16 1.0625 (0x3C40) and 1.1875 (0x3CC0) are e4m3 ties: to even, 0x38 and 0x3A;
 *   bf16 max finite 0x7F7F, inf 0x7F80;
 *   bf16 (1 + 2^-4)^2 = 1.125 + 2^-8 is a tie between 0x3F90 and 0x3F91: +2^-100 (0x0D80) rounds it
 *   up, -2^-100 (0x8D80) down, 0 to even;
 *   f16 2 * 0.5 = 1 (0x3C00), 3 * 65504 overflows to inf; bf16 min(-0, +0) = -0, min(NaN, 1) = 1;
 *   prmt selectors pick bytes of {b, a} = 0xF7665544_33221100 (bit 3 of a selector: sign-fill). */
static void test_alu16(CUdeviceptr buf)
{
    uint32_t h[26];
    cuMemsetD8(buf, 0, 4096);
    expect_ok("16-bit floats, fp8, prmt, lop3, f32x2", k_alu16, 32, buf);
    cuMemcpyDtoH(h, buf, sizeof h);
    check(h[0] == 0xC2003C00u, "cvt.rn.f16x2.e4m3x2 {-3, 1}");
    check(h[1] == 0x7FFF1800u, "cvt.rn.f16x2.e4m3x2: NaN and the subnormal 2^-9");
    check(h[2] == 0x7C003C00u, "cvt.rn.f16x2.e5m2x2 {inf, 1}");
    check(h[3] == 0x00003C00u, "cvt.rn.relu.f16x2.e4m3x2 zeroes -3");
    check(h[4] == 0x7E2Au, "cvt.rn.satfinite.e4m3x2.f16x2 {500 -> 448, 0.3125}");
    check(h[5] == 0x3A38u, "cvt.rn.satfinite.e4m3x2.f16x2: ties to even");
    check(h[6] == 0x7F7FFF7Fu, "cvt.rn.satfinite.bf16x2.f32 of +-inf: +-max finite");
    check(h[7] == 0x7F80FF80u, "cvt.rn.bf16x2.f32 of +-inf: +-inf");
    check(h[8] == 0x3F913F90u, "fma.rn.bf16x2: a tiny addend breaks the product's tie (one rounding)");
    check(h[9] == 0x3F903F90u, "fma.rn.bf16x2: a tie without addend goes to even");
    check(h[10] == 0x3C007C00u, "mul.rn.f16x2 {2 * 0.5, 3 * 65504 = inf}");
    check(h[11] == 0x80003F80u, "min.bf16x2 {-0 vs +0, NaN vs 1}");
    check(h[12] == 0x55114400u, "prmt.b32 0x5140");
    check(h[13] == 0x3322FF00u, "prmt.b32 with a sign-replicating selector");
    check(h[14] == 0x44332211u, "prmt.b32.f4e 1");
    check(h[15] == 0x5566F700u, "prmt.b32.b4e 0");
    check(h[16] == 0x33223322u, "prmt.b32.rc16 1");
    check(h[17] == 0x33222222u, "prmt.b32.ecl 2");
    check(h[18] == 0x11111100u, "prmt.b32.ecr 1");
    check(h[19] == 0x33333333u, "prmt.b32.rc8 3");
    uint32_t a = 0xFF00FF00u, b = 0xF0F0F0F0u, c = 0xCCCCCCCCu;
    check(h[20] == ((a & b) | (a & c) | (b & c)), "lop3.b32 0xE8 is the bitwise majority");
    float f[2];
    memcpy(f, &h[22], 8);
    check(f[0] == 3.25f && f[1] == 9.0f, "fma.rn.f32x2 {1.5 * 2 + 0.25, 2 * 4 + 1}");
    memcpy(f, &h[24], 4);
    check(isnan(f[0]), "max.NaN.f32 (NaN, 2) is NaN");
    check(h[25] == 0x3F91u, "fma.rn.bf16 (scalar): the addend breaks the tie");
}

/* by hand: sum of lanes 496; min(lane - 5) -5; max(3 lane) 93; xor of every 1 << lane all ones;
 * lane - 10.5: max 20.5, min |.| 0.5; a NaN in lane 7 loses unless .NaN; max(1, NaN, 3) 3;
 * bf16 2^3 = 8 (0x4100), 2^-1 = 0.5 (0x3F00); f16 2^0.5 = 1.4142 -> 0x3DA8, 2^10 = 1024 (0x6400);
 * bfind 0xF0 = 7 (shiftamt 24), of 0 all ones, of s32 0xFFFF0000 = 15; brev 0x12345678 = 0x1E6A2C48;
 * bfi of 0xF, 8 bits at 4 into 0xFFFF0000 = 0xFFFF00F0; {2, 0x80000001} shifted: left 4 -> 0x28,
 * right clamp 40 -> 2, right wrap 36 (= 4) -> 0x28000000; copysign(-1, 2.5) = -2.5 */
static void test_alu_more(CUdeviceptr buf)
{
    uint32_t h[23];
    float f[23];
    cuMemsetD8(buf, 0, 4096);
    expect_ok("redux.sync, 3-input min/max, 16-bit ex2, bfind/brev/bfi/shf/copysign", k_alu_more, 32, buf);
    cuMemcpyDtoH(h, buf, sizeof h);
    memcpy(f, h, sizeof h);
    check(h[0] == 496 && h[1] == (uint32_t)-5 && h[2] == 93 && h[3] == 0xFFFFFFFFu, "redux.sync add/min.s32/max/xor");
    check(f[4] == 20.5f && f[5] == 0.5f, "redux.sync.max.f32 and min.abs.f32");
    check(f[6] == 20.5f && isnan(f[7]), "redux.sync.max.f32: a NaN loses, and wins with .NaN");
    check(f[8] == 3.0f && isnan(f[9]) && f[10] == 1.0f, "three-input max/min.f32, with and without .NaN");
    check(h[11] == 0x41003F00u, "ex2.approx.ftz.bf16x2 {3, -1}");
    check(h[12] == 0x3DA86400u, "ex2.approx.f16x2 {0.5, 10}");
    check(h[13] == 7 && h[14] == 24 && h[15] == 0xFFFFFFFFu && h[16] == 15, "bfind (.shiftamt, zero, signed)");
    check(h[17] == 0x1E6A2C48u, "brev.b32");
    check(h[18] == 0xFFFF00F0u, "bfi.b32");
    check(h[19] == 0x28u && h[20] == 2u && h[21] == 0x28000000u, "shf.l.wrap, shf.r.clamp, shf.r.wrap");
    check(f[22] == -2.5f, "copysign.f32 takes the sign of its first source");
}

/* ------------------------------------------------------------ stmatrix */
/* One warp stores NUM 8x8 b16 matrices with stmatrix (TRANS: .trans) from known registers: matrix j's register in
 * lane l holds {low half: j << 12 | 2 l, high half: j << 12 | (2 l + 1)}. Lane 8 m + i gives the address of row i
 * (.trans: column i) of matrix m in a 1024-byte area at smem + 1024 (aligned): LAYOUT 0 puts the rows one after
 * another, m 128 + i 16; LAYOUT 1 is a 128-byte-swizzled tile, 8 rows of 128 bytes whose 16-byte chunk c sits at
 * chunk c ^ row -- matrix m is chunk m of rows 0-7, so its row i lies at i 128 + (m ^ i) 16. Lanes past the 8 NUM
 * whose addresses count give an unaligned address outside shared memory (the ISA ignores them). The area is first
 * filled with 0xEEEE; BEFORE goes right before the stmatrix (a fault to inject), SYNC after it. TAIL 0: every lane
 * copies its 32 bytes of the area to global p + 32 lane; 1: FENCE, bar.sync, and lane 0 bulk-stores the area to
 * global p + 1024. */
static void stm_ptx(char *out, size_t n, int num, int trans, int layout, const char *ss, const char *before,
                    const char *sync, int tail, const char *fence)
{
    static const char *regs[] = {"%r7", "%r7, %r8", "", "%r7, %r8, %r9, %r10"};
    const char *lay = layout ? "xor.b32 %r6, %r4, %r5; shl.b32 %r6, %r6, 4; shl.b32 %r11, %r5, 7; add.u32 %r6, %r6, %r11;\n"
                             : "shl.b32 %r6, %r4, 7; shl.b32 %r11, %r5, 4; add.u32 %r6, %r6, %r11;\n";
    char end[1024];
    if (!tail)
        snprintf(end, sizeof end, "%s\n"
                 "ld.shared.v4.u32 {%%r12, %%r13, %%r14, %%r15}, [%%r2]; cvt.u64.u32 %%o, %%r0; shl.b64 %%o, %%o, 5;\n"
                 "add.u64 %%o, %%o, %%a; st.global.v4.u32 [%%o], {%%r12, %%r13, %%r14, %%r15};\n"
                 "ld.shared.v4.u32 {%%r12, %%r13, %%r14, %%r15}, [%%r2+16]; st.global.v4.u32 [%%o+16], {%%r12, %%r13, %%r14, %%r15};\n",
                 sync);
    else
        snprintf(end, sizeof end, "%s\nbar.sync 0; setp.ne.u32 %%q, %%r0, 0; @%%q bra $d; add.u64 %%o, %%a, 1024;\n"
                 "cp.async.bulk.global.shared::cta.bulk_group [%%o], [%%r1], 1024; cp.async.bulk.commit_group;\n"
                 "cp.async.bulk.wait_group 0;\n", fence);
    snprintf(out, n, HEADER
             ".visible .entry k(.param .u64 p)\n{\n"
             ".reg .b64 %%a, %%o; .reg .b32 %%r<16>; .reg .pred %%q;\n"
             "ld.param.u64 %%a, [p]; mov.u32 %%r0, %%laneid;\n"
             "mov.u32 %%r1, smem; add.u32 %%r1, %%r1, 2047; and.b32 %%r1, %%r1, -1024;\n"
             "shl.b32 %%r2, %%r0, 5; add.u32 %%r2, %%r2, %%r1; mov.u32 %%r3, 0xEEEEEEEE;\n"
             "st.shared.v4.u32 [%%r2], {%%r3, %%r3, %%r3, %%r3}; st.shared.v4.u32 [%%r2+16], {%%r3, %%r3, %%r3, %%r3};\n"
             "bar.sync 0;\n"
             "shr.u32 %%r4, %%r0, 3; and.b32 %%r5, %%r0, 7;\n"
             "%s"
             "add.u32 %%r6, %%r6, %%r1; setp.ge.u32 %%q, %%r0, %d; @%%q mov.u32 %%r6, 0xFFFFF1;\n"
             "mul.lo.u32 %%r7, %%r0, 0x00020002; add.u32 %%r7, %%r7, 0x00010000;\n"
             "add.u32 %%r8, %%r7, 0x10001000; add.u32 %%r9, %%r7, 0x20002000; add.u32 %%r10, %%r7, 0x30003000;\n"
             "%s\n"
             "stmatrix.sync.aligned.m8n8.x%d%s%s.b16 [%%r6], {%s};\n"
             "%s"
             "$d: ret;\n}\n",
             lay, 8 * num, before, num, trans ? ".trans" : "", ss, regs[num - 1], end);
}

/* What the area must hold, from the ISA's rule seen from the matrix: element (r, c) of matrix m is the half c % 2 of
 * the register of lane 4 r + c / 2; it lands at address[r] + 2 c, or with .trans at address[c] + 2 r. */
static void stm_expect(int num, int trans, int layout, uint16_t want[512])
{
    for (int i = 0; i < 512; i++) want[i] = 0xEEEE;
    for (int m = 0; m < num; m++)
        for (int r = 0; r < 8; r++)
            for (int c = 0; c < 8; c++) {
                int l = 4 * r + c / 2, h = c % 2, line = trans ? c : r, pos = trans ? r : c;
                uint32_t addr = layout ? (uint32_t)(line * 128 + (m ^ line) * 16) : (uint32_t)(m * 128 + line * 16);
                want[(addr + 2u * (uint32_t)pos) / 2] = (uint16_t)(m << 12 | (2 * l + h));
            }
}

/* the module must be refused, its log naming `word` */
static void expect_refused(const char *name, const char *ptx, const char *word)
{
    char log[1024] = "";
    CUjit_option opt[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *val[2] = {log, (void *)(uintptr_t)sizeof log};
    CUmodule m;
    CUresult r = cuModuleLoadDataEx(&m, ptx, 2, opt, val);
    if (r == CUDA_SUCCESS) cuModuleUnload(m);
    char what[1400];
    snprintf(what, sizeof what, "%s: expected the module refused with '%s', got %d: %.300s", name, word, (int)r, log);
    check(r != CUDA_SUCCESS && strstr(log, word), what);
}

static void test_stmatrix(CUdeviceptr buf)
{
    static char ptx[8192];
    static const struct { int num, trans, layout; const char *ss; } cases[] = {
        {1, 0, 0, ".shared"}, {2, 0, 0, ".shared::cta"}, {4, 0, 0, ".shared"}, {4, 0, 1, ".shared::cta"},
        {1, 1, 1, ".shared"}, {2, 1, 0, ".shared"}, {4, 1, 1, ".shared"}, {4, 1, 0, ".shared::cta"},
    };
    uint16_t got[512], want[512];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int num = cases[k].num, trans = cases[k].trans, layout = cases[k].layout;
        char name[128];
        snprintf(name, sizeof name, "stmatrix .x%d%s%s, %s rows", num, trans ? ".trans" : "", cases[k].ss,
                 layout ? "128B-swizzled" : "contiguous");
        stm_ptx(ptx, sizeof ptx, num, trans, layout, cases[k].ss, "", "bar.sync 0;", 0, "");
        cuMemsetD8(buf, 0, 4096);
        expect_ok(name, ptx, 32, buf);
        cuMemcpyDtoH(got, buf, sizeof got);
        stm_expect(num, trans, layout, want);
        int bad = 0, first = -1;
        for (int i = 0; i < 512; i++)
            if (got[i] != want[i]) { bad++; if (first < 0) first = i; }
        char what[256];
        snprintf(what, sizeof what, "%s: %d of 512 elements differ (first at %d: 0x%04x, want 0x%04x)", name, bad, first,
                 first < 0 ? 0 : got[first], first < 0 ? 0 : want[first]);
        check(!bad, what);
    }
    /* the bulk store (async proxy) reads the matrices: with fence.proxy.async it carries them, without it is reported */
    stm_ptx(ptx, sizeof ptx, 4, 1, 1, ".shared", "", "", 1, "fence.proxy.async.shared::cta;");
    cuMemsetD8(buf, 0, 4096);
    expect_ok("stmatrix .x4.trans, fence.proxy.async, bulk store", ptx, 32, buf);
    cuMemcpyDtoH(got, buf + 1024, sizeof got);
    stm_expect(4, 1, 1, want);
    check(!memcmp(got, want, sizeof got), "stmatrix .x4.trans: the bulk store carries the matrices");
    stm_ptx(ptx, sizeof ptx, 4, 1, 1, ".shared", "", "", 1, "");
    expect_report("stmatrix then a bulk store without fence.proxy.async", ptx, 32, buf, "fence.proxy.async");
    /* other lanes' elements read without a barrier */
    stm_ptx(ptx, sizeof ptx, 4, 0, 0, ".shared", "", "", 0, "");
    expect_report("stmatrix: another lane's elements read without bar.sync", ptx, 32, buf, "not synchronised");
    /* faults: an unaligned row address (lane 3: +8), a row past the end of shared memory (lane 13), a lane exited */
    stm_ptx(ptx, sizeof ptx, 4, 0, 1, ".shared", "setp.eq.u32 %q, %r0, 3; @%q add.u32 %r6, %r6, 8;", "bar.sync 0;", 0, "");
    expect_report("stmatrix: a row address not 16-byte aligned", ptx, 32, buf, "not 16-byte aligned");
    stm_ptx(ptx, sizeof ptx, 1, 1, 0, ".shared", "setp.eq.u32 %q, %r0, 6; @%q add.u32 %r6, %r6, 4;", "bar.sync 0;", 0, "");
    expect_report("stmatrix .x1.trans: a column address not 16-byte aligned", ptx, 32, buf, "not 16-byte aligned");
    stm_ptx(ptx, sizeof ptx, 2, 0, 0, ".shared", "setp.eq.u32 %q, %r0, 13; @%q add.u32 %r6, %r6, 0x100000;",
            "bar.sync 0;", 0, "");
    expect_report("stmatrix: a row outside shared memory", ptx, 32, buf, "outside CTA 0's shared memory");
    stm_ptx(ptx, sizeof ptx, 4, 0, 0, ".shared", "setp.eq.u32 %q, %r0, 31; @%q ret;", "", 0, "");
    expect_report("stmatrix with lane 31 exited", ptx, 32, buf, "not 32");
    /* forms refused at load: a generic address (no state space), shared::cluster, .m16n8 / .b8, a register short */
    stm_ptx(ptx, sizeof ptx, 4, 0, 0, "", "", "bar.sync 0;", 0, "");
    expect_refused("stmatrix without a state space (generic)", ptx, "generic");
    stm_ptx(ptx, sizeof ptx, 4, 0, 0, ".shared::cluster", "", "bar.sync 0;", 0, "");
    expect_refused("stmatrix.shared::cluster", ptx, "shared::cluster");
    static const char k_stm_b8[] = HEADER ".visible .entry k(.param .u64 p)\n{\n.reg .b32 %r<2>;\nmov.u32 %r0, smem;\n"
        "stmatrix.sync.aligned.m16n8.x1.trans.shared.b8 [%r0], {%r1};\nret;\n}\n";
    expect_refused("stmatrix.m16n8 .b8", k_stm_b8, "m8n8");
    static const char k_stm_short[] = HEADER ".visible .entry k(.param .u64 p)\n{\n.reg .b32 %r<2>;\nmov.u32 %r0, smem;\n"
        "stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r0], {%r1};\nret;\n}\n";
    expect_refused("stmatrix .x2 with one register", k_stm_short, "2 register");
}

int main(void)
{
    if (cuInit(0)) { printf("test_core: the simulator driver did not start\n"); return 1; }
    CUdevice dev;
    CUcontext ctx;
    cuDeviceGet(&dev, 0);
    cuDevicePrimaryCtxRetain(&ctx, dev);
    cuCtxSetCurrent(ctx);
    CUdeviceptr buf;
    cuMemAlloc(&buf, 4096);
    uint32_t h[32];

    cuMemsetD8(buf, 0, 4096);
    expect_ok("alu", k_alu, 32, buf);
    cuMemcpyDtoH(h, buf, 24);
    float f[3];
    memcpy(f, h, sizeof f);
    check(h[0] == 0x3f804000u, "cvt.rn.bf16x2.f32 puts its first source in the upper half");
    check(f[1] == 4.0f, "ex2(2) = 4");
    check(f[2] == 2.0f, "max(NaN, 2) = 2");
    check(h[3] == (uint32_t)-4, "shr.s32 -7, 1 = -4");
    check(h[4] == 22, "setp.lt.u32 compares unsigned");
    check(h[5] == (uint32_t)-3, "cvt.rmi then cvt.rzi: floor(-2.5) = -3");

    test_alu16(buf);
    test_alu_more(buf);
    for (int i = 0; i < 8; i++) h[i] = 0x100u + (uint32_t)i;
    cuMemcpyHtoD(buf, h, 32);
    expect_ok("ld/st.global.v8", k_v8, 1, buf);
    cuMemcpyDtoH(h, buf + 32, 32);
    check(h[0] == 0x107 && h[7] == 0x100 && h[3] == 0x104, "ld.global.v8.b32 / st.global.v8.b32 move 8 words in order");

    cuMemsetD8(buf, 0, 4096);
    expect_ok("warp", k_warp, 32, buf);
    cuMemcpyDtoH(h, buf, 12);
    check(h[0] == 496, "shfl.bfly butterfly sum of lanes 0..31 = 496");
    check(h[1] == 1, "vote.any sees lane 7");
    check(h[2] == 0, "elect.sync elects lane 0");

    cuMemsetD8(buf, 0, 4096);
    expect_ok("bar.sync publishes a store", k_sync_ok, 64, buf);
    cuMemcpyDtoH(h, buf, 4);
    check(h[0] == 77, "thread 32 reads thread 0's store after bar.sync");
    /* the read may come before the store (never written) or after it (not synchronised): both are the race */
    expect_report("no barrier between store and load", k_sync_race, 64, buf, "hazard");

    for (int i = 0; i < 16; i++) h[i] = 100 + (uint32_t)i;
    cuMemcpyHtoD(buf, h, 64);
    expect_ok("bulk copy on an mbarrier", k_bulk_ok, 64, buf);
    cuMemcpyDtoH(h, buf + 64, 64);
    check(h[0] == 100 && h[1] == 102 && h[15] == 115, "bulk load, thread update, bulk store round trip");
    expect_report("read before the mbarrier wait", k_bulk_race, 64, buf, "hazard");

    expect_report("deadlock", k_deadlock, 64, buf, "deadlock");
    expect_report("over-arrival", k_overarrive, 32, buf, "arrival");
    expect_report("arrival not ordered after the previous phase", k_arrive_unordered, 64, buf, "phase before");
    expect_ok("arrival after a wait on the previous phase", k_arrive_ordered, 64, buf);
    cuMemsetD8(buf, 0xff, 8);
    expect_ok("mbarrier.test_wait on an open phase", k_test_wait, 1, buf);
    cuMemcpyDtoH(h, buf, 8);
    check(h[0] == 0 && h[1] == 1, "test_wait: 0 while the phase is open, 1 once it completed, never blocking");
    expect_report("try_wait on a phase only the waiter completes", k_test_wait_blocking, 1, buf, "deadlock");
    uint64_t clk = 0;
    setenv("FA4SIM_PREV_GRID", "50", 1);
    expect_ok("griddepcontrol.wait while the previous grid runs", k_griddep, 1, buf);
    unsetenv("FA4SIM_PREV_GRID");
    cuMemcpyDtoH(&clk, buf, 8);
    check(clk >= 50, "FA4SIM_PREV_GRID=50: griddepcontrol.wait passes in round 50 or later");
    expect_ok("griddepcontrol.wait, no previous grid", k_griddep, 1, buf);
    cuMemcpyDtoH(&clk, buf, 8);
    check(clk < 50, "without FA4SIM_PREV_GRID griddepcontrol.wait passes at once");
    expect_report("out of bounds", k_oob, 32, buf, "outside every allocation");

    expect_ok("TMEM alloc + dealloc", k_tmem_ok, 32, buf);
    expect_report("TMEM leak", k_tmem_leak, 32, buf, "still allocated");
    expect_report("TMEM double free", k_tmem_double, 32, buf, "not allocated");
    expect_report("TMEM lane quarter", k_tmem_quarter, 32, buf, "lane");

    test_cp_async(buf);
    test_pairs(buf);
    test_tma_store(buf);
    test_pair_mma();
    test_stmatrix(buf);
    /* last: a launch added earlier moves the schedules of the ones after it */
    expect_ok("store source rewritten after wait_group.read", k_store_reuse_ok, 32, buf);
    cuMemcpyDtoH(h, buf, 4);
    check(h[0] == 7, "the bulk store wrote the source's first value");
    expect_report("store source rewritten before wait_group.read", k_store_reuse_race, 32, buf, "store's source");

    cuMemFree(buf);
    printf("test_core: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
