/* microbench.c - the H100 microbenchmarks behind tests/sim/gpus/h100.tbl's [mb NAME] values.
 *
 *   microbench --emit DIR           write each benchmark's PTX into DIR (CPU only: ptxas checks it)
 *   microbench TABLE OUT.tbl        run them on GPU 0 (driver API, CUDA events, clock64), print one
 *                                   line each, and write TABLE again as OUT.tbl with each measured key's
 *                                   value replaced (source `measured microbench NAME ...`)
 *
 * Each benchmark is a small PTX kernel written here (no fa4gen kernel is timed: the attention kernels
 * are the model's out-of-sample test). Rates are per SM per clock: the work done / (elapsed ns x the
 * clock the `clock` benchmark measured x the SMs that ran it).
 */
#include <cuda.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PTX_MAX = 1 << 18 };

static char ptx[PTX_MAX];
static size_t plen;

static void P(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void P(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(ptx + plen, PTX_MAX - plen, fmt, ap);
    va_end(ap);
    if (n > 0 && plen + (size_t)n < PTX_MAX) plen += (size_t)n;
}

/* A kernel's head; decl: module-scope declarations before it ("" for none) */
static void head_with(const char *decl, const char *name, const char *params)
{
    plen = 0;
    P(".version 8.0\n.target sm_90a\n.address_size 64\n%s\n.visible .entry %s(%s)\n{\n", decl, name, params);
    P("  .reg .b32 %%r<64>;\n  .reg .b64 %%rd<32>;\n  .reg .f32 %%f<160>;\n  .reg .pred %%p<8>;\n");
}

static void head(const char *name, const char *params) { head_with("", name, params); }

/* clock: clock64 and globaltimer over a spin of N iterations; out[0] = clocks, out[1] = ns */
static void k_clock(void)
{
    head("mb_clock", ".param .u64 out, .param .u32 n");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u32 %%r1, [n];\n");
    P("  mov.u64 %%rd2, %%clock64;\n  mov.u64 %%rd3, %%globaltimer;\n  mov.u32 %%r2, 0;\n  mov.f32 %%f1, 1.0;\n");
    P("LOOP:\n  fma.rn.f32 %%f1, %%f1, %%f1, %%f1;\n  add.u32 %%r2, %%r2, 1;\n  setp.lt.u32 %%p1, %%r2, %%r1;\n  @%%p1 bra LOOP;\n");
    P("  mov.u64 %%rd4, %%clock64;\n  mov.u64 %%rd5, %%globaltimer;\n  sub.u64 %%rd4, %%rd4, %%rd2;\n  sub.u64 %%rd5, %%rd5, %%rd3;\n");
    P("  mov.u32 %%r3, %%tid.x;\n  setp.ne.u32 %%p2, %%r3, 0;\n  @%%p2 bra DONE;\n");
    P("  st.global.u64 [%%rd1], %%rd4;\n  st.global.u64 [%%rd1+8], %%rd5;\n  st.global.f32 [%%rd1+16], %%f1;\nDONE:\n  ret;\n}\n");
}

static void k_empty(void)
{
    head("mb_empty", ".param .u64 out");
    P("  ret;\n}\n");
}

/* 8 independent chains of one op per iteration; the result is stored so nothing is dead */
static void k_unary(const char *name, const char *op)
{
    head(name, ".param .u64 out, .param .u32 n");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u32 %%r1, [n];\n  mov.u32 %%r2, %%tid.x;\n  cvt.rn.f32.u32 %%f100, %%r2;\n");
    for (int i = 0; i < 8; i++) P("  add.f32 %%f%d, %%f100, 0f3F00%02X00;\n", i, i);
    P("  mov.u32 %%r3, 0;\nLOOP:\n");
    for (int i = 0; i < 8; i++) {
        if (!strcmp(op, "ex2")) P("  ex2.approx.ftz.f32 %%f%d, %%f%d;\n", i, i);
        else P("  cvt.rn.bf16x2.f32 %%r%d, %%f%d, %%f%d;\n  mov.b32 %%f%d, %%r%d;\n", 10 + i, i, (i + 1) % 8, i, 10 + i);
    }
    P("  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n");
    for (int i = 1; i < 8; i++) P("  add.f32 %%f0, %%f0, %%f%d;\n", i);
    P("  mul.wide.u32 %%rd2, %%r2, 4;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  st.global.f32 [%%rd2], %%f0;\n  ret;\n}\n");
}

/* shared-memory bandwidth: conflict-free ld.shared.v4 (each thread its own 16 B), 4 per iteration */
static void k_smem(void)
{
    head("mb_smem", ".param .u64 out, .param .u32 n");
    P("  .shared .align 16 .b8 buf[16384];\n");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u32 %%r1, [n];\n  mov.u32 %%r2, %%tid.x;\n");
    P("  mov.u32 %%r4, buf;\n  shl.b32 %%r5, %%r2, 4;\n  add.u32 %%r5, %%r4, %%r5;\n  st.shared.v4.u32 [%%r5], {%%r2, %%r2, %%r2, %%r2};\n  bar.sync 0;\n");
    P("  mov.u32 %%r3, 0;\n  mov.u32 %%r20, 0;\nLOOP:\n");
    for (int i = 0; i < 4; i++) P("  ld.volatile.shared.v4.u32 {%%r%d, %%r%d, %%r%d, %%r%d}, [%%r5+%d];\n  xor.b32 %%r20, %%r20, %%r%d;\n", 30 + 4 * i, 31 + 4 * i, 32 + 4 * i, 33 + 4 * i, (i & 1) * 8192, 30 + 4 * i);
    P("  xor.b32 %%r5, %%r5, %%r20;\n  xor.b32 %%r5, %%r5, %%r20;\n");
    P("  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n");
    P("  mul.wide.u32 %%rd2, %%r2, 4;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  st.global.u32 [%%rd2], %%r20;\n  ret;\n}\n");
}

/* wgmma m64nNk16 bf16 -> f32, A and B from shared memory (zeros: the values do not matter). 128 or
 * 256 threads (1 or 2 warpgroups). WG_RATE: n iterations of 4 wgmmas, commit, wait_group 1 (rate);
 * WG_LAT: n iterations of one wgmma, commit, wait_group 0, the mean clocks per iteration in out;
 * WG_DRAIN: 4 wgmmas, commit, wait_group 0; WG_SCALE: the same, then every accumulator register multiplied by a
 * value the compiler cannot know (an attention consumer's O rescale between two P V wgmmas): the pair says what
 * that rescale costs beside the other warpgroup's wgmmas (a probe: no table value). */
enum WgMode { WG_RATE, WG_LAT, WG_DRAIN, WG_SCALE };
static void k_wgmma_n(const char *name, enum WgMode mode, int nn)
{
    int lat = mode == WG_LAT;
    int acc = nn / 2; /* f32 accumulator registers per thread of m64nNk16 */
    head(name, ".param .u64 out, .param .u32 n");
    P("  .shared .align 1024 .b8 buf[16384];\n");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u32 %%r1, [n];\n  mov.u32 %%r2, %%tid.x;\n  mov.u32 %%r4, buf;\n");
    /* zero 16 KB: 256 threads x 64 B or 128 x 128 */
    P("  mov.u32 %%r60, 0;\n  mov.u32 %%r6, 0;\nZ:\n  shl.b32 %%r7, %%r6, 4;\n  add.u32 %%r7, %%r7, %%r4;\n  st.shared.v4.u32 [%%r7], {%%r60, %%r60, %%r60, %%r60};\n");
    P("  add.u32 %%r6, %%r6, 1;\n  setp.lt.u32 %%p3, %%r6, 1024;\n  @%%p3 bra Z;\n");
    /* each writer's fence before the barrier: the wgmmas (async proxy) read what the zeroing stores wrote */
    P("  fence.proxy.async.shared::cta;\n  bar.sync 0;\n");
    /* descriptors: start >> 4 in bits 0-13, LBO 128 B, SBO 256 B, no swizzle; A at buf, B at buf+2048 */
    P("  cvt.u64.u32 %%rd3, %%r4;\n  shr.u64 %%rd3, %%rd3, 4;\n  and.b64 %%rd3, %%rd3, 16383;\n");
    P("  or.b64 %%rd4, %%rd3, 0x0000001000080000;\n"); /* SBO 256>>4=16 at bit 32, LBO 128>>4=8 at bit 16 */
    P("  add.u64 %%rd5, %%rd4, 128;\n"); /* B: +2048 B */
    for (int i = 0; i < acc; i++) P("  mov.f32 %%f%d, 0f00000000;\n", i);
    P("  mov.u64 %%rd10, %%clock64;\n  mov.u64 %%rd12, %%globaltimer;\n  mov.u32 %%r3, 0;\nLOOP:\n  wgmma.fence.sync.aligned;\n");
    int per = lat ? 1 : 4;
    for (int k = 0; k < per; k++) {
        P("  wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16 {", nn);
        for (int i = 0; i < acc; i++) P("%s%%f%d", i ? ", " : "", i);
        P("}, %%rd4, %%rd5, 1, 1, 1, 0, 0;\n");
    }
    P("  wgmma.commit_group.sync.aligned;\n  wgmma.wait_group.sync.aligned %d;\n", mode == WG_RATE ? 1 : 0);
    if (mode == WG_SCALE) {
        P("  cvt.rn.f32.u32 %%f159, %%r3;\n");
        for (int i = 0; i < acc; i++) P("  mul.f32 %%f%d, %%f%d, %%f159;\n", i, i);
    }
    P("  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n");
    P("  wgmma.wait_group.sync.aligned 0;\n  mov.u64 %%rd11, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n");
    P("  mov.u64 %%rd13, %%globaltimer;\n  sub.u64 %%rd13, %%rd13, %%rd12;\n  cvt.u32.u64 %%r11, %%rd13;\n");
    for (int i = 1; i < acc; i++) P("  add.f32 %%f0, %%f0, %%f%d;\n", i);
    P("  mov.u32 %%r8, %%ctaid.x;\n  mov.u32 %%r10, %%ntid.x;\n  mad.lo.u32 %%r9, %%r8, %%r10, %%r2;\n  mul.wide.u32 %%rd2, %%r9, 16;\n  add.u64 %%rd2, %%rd1, %%rd2;\n");
    P("  st.global.u64 [%%rd2], %%rd11;\n  st.global.f32 [%%rd2+8], %%f0;\n  st.global.u32 [%%rd2+12], %%r11;\n  ret;\n}\n");
}

/* The two-warpgroup probes' common parts (256 threads): each thread zeroes its 64 bytes of the 16 KB operand buffer
 * `buf`, fenced for the async proxy before the barrier; the SS descriptors (A at buf, B 2 KB on, no swizzle) in
 * rd4 / rd5 and 128 zeroed f32 accumulators; one group of 4 x m64n256k16; the accumulators summed into f0. */
static void wg_operands(void)
{
    P("  mov.u32 %%r60, 0;\n  shl.b32 %%r7, %%r2, 6;\n  add.u32 %%r7, %%r7, %%r4;\n");
    for (int i = 0; i < 4; i++) P("  st.shared.v4.u32 [%%r7+%d], {%%r60, %%r60, %%r60, %%r60};\n", 16 * i);
    P("  fence.proxy.async.shared::cta;\n  bar.sync 0;\n");
}

static void wg_descs_acc(void)
{
    P("  cvt.u64.u32 %%rd3, %%r4;\n  shr.u64 %%rd3, %%rd3, 4;\n  and.b64 %%rd3, %%rd3, 16383;\n  or.b64 %%rd4, %%rd3, 0x0000001000080000;\n  add.u64 %%rd5, %%rd4, 128;\n");
    for (int i = 0; i < 128; i++) P("  mov.f32 %%f%d, 0f00000000;\n", i);
}

static void wg_mma4(void)
{
    for (int k = 0; k < 4; k++) {
        P("  wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {");
        for (int i = 0; i < 128; i++) P("%s%%f%d", i ? ", " : "", i);
        P("}, %%rd4, %%rd5, 1, 1, 1, 0, 0;\n");
    }
}

static void wg_acc_sum(void)
{
    for (int i = 1; i < 128; i++) P("  add.f32 %%f0, %%f0, %%f%d;\n", i);
}

/* The two-warpgroup probes' warpgroup 0 (256 threads; out, n in rd1, r1): the WG_RATE loop (m64n256k16, 4 a commit,
 * wait_group 1) for n iterations, its clocks in out[0]; warpgroup 1 branches to `other`, which follows. */
static void wg_rate_role(const char *other)
{
    P("  setp.eq.u32 %%p4, %%r2, 0;\n");
    wg_operands();
    P("  setp.ge.u32 %%p3, %%r2, 128;\n  @%%p3 bra %s;\n", other);
    wg_descs_acc();
    P("  mov.u64 %%rd10, %%clock64;\n  mov.u32 %%r3, 0;\nLOOP:\n  wgmma.fence.sync.aligned;\n");
    wg_mma4();
    P("  wgmma.commit_group.sync.aligned;\n  wgmma.wait_group.sync.aligned 1;\n");
    P("  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n  wgmma.wait_group.sync.aligned 0;\n");
    P("  mov.u64 %%rd11, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n");
    wg_acc_sum();
    P("  @!%%p4 bra DONE;\n  st.global.u64 [%%rd1], %%rd11;\n  st.global.f32 [%%rd1+16], %%f0;\n  bra DONE;\n");
    P("%s:\n", other);
}

/* wgmmas beside FMULs: warpgroup 0 runs the WG_RATE loop (m64n256k16, 4 a commit, wait_group 1) for n iterations;
 * warpgroup 1 multiplies `chains` independent registers (16: one FMUL a clock on each sub-partition; 1: one each
 * FMUL latency), 128 FMULs a pass, 8 n passes (16 chains: about twice warpgroup 0's time alone, so it covers
 * warpgroup 0's loop), or (chains 0) exits at once. out[0] = warpgroup 0's clocks, out[1] = warpgroup 1's. Does FP32
 * work on the sub-partitions slow the other warpgroup's wgmmas, and by how much at a partial FMUL rate? */
static void k_wgmma_beside(const char *name, int chains)
{
    head(name, ".param .u64 out, .param .u32 n");
    P("  .shared .align 1024 .b8 buf[16384];\n");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u32 %%r1, [n];\n  mov.u32 %%r2, %%tid.x;\n  mov.u32 %%r4, buf;\n");
    wg_rate_role("FM");
    if (chains) {
        P("  mov.u64 %%rd10, %%clock64;\n  cvt.rn.f32.u32 %%f150, %%r2;\n  mul.f32 %%f150, %%f150, 0f3C000000;\n");
        P("  shl.b32 %%r5, %%r1, 3;\n  mov.u32 %%r3, 0;\n");
        for (int i = 0; i < 16; i++) P("  add.f32 %%f%d, %%f150, 0f3F8%02X000;\n", 130 + i, i);
        P("FLOOP:\n");
        for (int r = 0; r < 128; r++) P("  mul.f32 %%f%d, %%f%d, %%f150;\n", 130 + r % chains, 130 + r % chains);
        P("  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p5, %%r3, %%r5;\n  @%%p5 bra FLOOP;\n");
        P("  mov.u64 %%rd11, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n");
        for (int i = 1; i < 16; i++) P("  add.f32 %%f130, %%f130, %%f%d;\n", 130 + i);
        P("  mul.wide.u32 %%rd2, %%r2, 4;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  st.global.f32 [%%rd2+64], %%f130;\n");
        P("  setp.ne.u32 %%p6, %%r2, 128;\n  @%%p6 bra DONE;\n  st.global.u64 [%%rd1+8], %%rd11;\n");
    }
    P("DONE:\n  ret;\n}\n");
}


/* Does issuing a wgmma hold the warp while the tensor pipe is busy? Warpgroup 0 issues 8 x m64n256k16 (about 1000
 * clocks of work) and commits, then lets warpgroup 1 go (named barrier 1); warpgroup 1 reads its clock, issues a QK-sized
 * group, 8 x m64n128k16 (a 64 x 128 x 128 product, both operands in shared memory), reads the clock again, commits,
 * waits for it and reads the clock a third time. n rounds; out[0] = warpgroup 1's mean clocks from the first read to the
 * second (the issue), out[1] = to the third (its group done). A probe: no table value. */
static void k_wgmma_issue(void)
{
    head("mb_wgmma_issue", ".param .u64 out, .param .u32 n");
    P("  .shared .align 1024 .b8 buf[16384];\n");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u32 %%r1, [n];\n  mov.u32 %%r2, %%tid.x;\n  mov.u32 %%r4, buf;\n");
    wg_operands();
    wg_descs_acc();
    P("  mov.u64 %%rd12, 0;\n  mov.u64 %%rd13, 0;\n  mov.u32 %%r3, 0;\n  setp.ge.u32 %%p3, %%r2, 128;\nLOOP:\n  bar.sync 0;\n");
    P("  @%%p3 bra W1;\n  wgmma.fence.sync.aligned;\n");
    wg_mma4();
    wg_mma4();
    P("  wgmma.commit_group.sync.aligned;\n  bar.arrive 1, 256;\n  wgmma.wait_group.sync.aligned 0;\n  bra NEXT;\n");
    P("W1:\n  bar.sync 1, 256;\n  mov.u64 %%rd10, %%clock64;\n  wgmma.fence.sync.aligned;\n");
    for (int k = 0; k < 8; k++) {
        P("  wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {");
        for (int i = 0; i < 64; i++) P("%s%%f%d", i ? ", " : "", i);
        P("}, %%rd4, %%rd5, 1, 1, 1, 0, 0;\n");
    }
    P("  mov.u64 %%rd11, %%clock64;\n  wgmma.commit_group.sync.aligned;\n  wgmma.wait_group.sync.aligned 0;\n");
    P("  mov.u64 %%rd14, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n  sub.u64 %%rd14, %%rd14, %%rd10;\n");
    P("  add.u64 %%rd12, %%rd12, %%rd11;\n  add.u64 %%rd13, %%rd13, %%rd14;\n");
    P("NEXT:\n  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n");
    wg_acc_sum();
    P("  setp.ne.u32 %%p2, %%r2, 128;\n  @%%p2 bra DONE;\n  st.global.u64 [%%rd1], %%rd12;\n  st.global.u64 [%%rd1+8], %%rd13;\n");
    P("  st.global.f32 [%%rd1+16], %%f0;\nDONE:\n  ret;\n}\n");
}

/* Two warpgroups issue 4 x m64n256k16 at the same moment (after a bar.sync), each waits for its own (wait_group 0):
 * when does each see its group done? First come, first served: one after 4 wgmmas' time, the other after 8; shared:
 * both after 8. n rounds; out[0], out[1] = warpgroup 0's and 1's mean clocks a round (a probe: no table value). */
static void k_wgmma_pair(void)
{
    head("mb_wgmma_pair", ".param .u64 out, .param .u32 n");
    P("  .shared .align 1024 .b8 buf[16384];\n");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u32 %%r1, [n];\n  mov.u32 %%r2, %%tid.x;\n  mov.u32 %%r4, buf;\n");
    wg_operands();
    wg_descs_acc();
    P("  mov.u64 %%rd12, 0;\n  mov.u32 %%r3, 0;\nLOOP:\n  bar.sync 0;\n  mov.u64 %%rd10, %%clock64;\n  wgmma.fence.sync.aligned;\n");
    wg_mma4();
    P("  wgmma.commit_group.sync.aligned;\n  wgmma.wait_group.sync.aligned 0;\n  mov.u64 %%rd11, %%clock64;\n");
    P("  sub.u64 %%rd11, %%rd11, %%rd10;\n  add.u64 %%rd12, %%rd12, %%rd11;\n");
    P("  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n");
    wg_acc_sum();
    P("  and.b32 %%r8, %%r2, 127;\n  setp.ne.u32 %%p2, %%r8, 0;\n  @%%p2 bra DONE;\n  shr.u32 %%r9, %%r2, 7;\n");
    P("  mul.wide.u32 %%rd2, %%r9, 8;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  st.global.u64 [%%rd2], %%rd12;\n  st.global.f32 [%%rd2+16], %%f0;\n");
    P("DONE:\n  ret;\n}\n");
}

/* The bulk-copy rings (mb_tma_bw*, mb_pdl_dep, mb_tma_tile*): copy %r3 (of %r1) uses slot %r3 & (slots - 1), its mbarrier
 * at %r5 + 8 slot. ring_wait: after issuing copy i, wait for copy i - (slots - 1), so at most `slots` are in flight;
 * ring_drain: after the loop, wait for the last slots - 1. */
static void ring_wait(int slots, int lg_s)
{
    P("  setp.lt.u32 %%p3, %%r3, %d;\n  @%%p3 bra SKIP;\n  add.u32 %%r15, %%r3, 1;\n  and.b32 %%r15, %%r15, %d;\n  shl.b32 %%r16, %%r15, 3;\n  add.u32 %%r16, %%r16, %%r5;\n", slots - 1, slots - 1);
    P("  sub.u32 %%r17, %%r3, %d;\n  shr.u32 %%r17, %%r17, %d;\n  and.b32 %%r17, %%r17, 1;\n", slots - 1, lg_s);
    P("WAIT:\n  mbarrier.try_wait.parity.shared::cta.b64 %%p1, [%%r16], %%r17;\n  @!%%p1 bra WAIT;\nSKIP:\n");
}

static void ring_drain(int slots, int lg_s)
{
    for (int d = slots - 1; d >= 1; d--) {
        P("  sub.u32 %%r18, %%r1, %d;\n  and.b32 %%r19, %%r18, %d;\n  shl.b32 %%r19, %%r19, 3;\n  add.u32 %%r19, %%r19, %%r5;\n  shr.u32 %%r18, %%r18, %d;\n  and.b32 %%r18, %%r18, 1;\n", d, slots - 1, lg_s);
        P("D%d:\n  mbarrier.try_wait.parity.shared::cta.b64 %%p1, [%%r19], %%r18;\n  @!%%p1 bra D%d;\n", d, d);
    }
}

/* bulk copies (the TMA engine, no tensor map) from src + cta * stride (wrapping in `span` bytes) into a ring of
 * shared memory, each slot on its mbarrier; one elected thread issues, all wait.
 * lat=1: 8 KB copies, one in flight (issue -> complete_tx clocks, mean in out): the latency.
 * lat=0: BULK_SLOTS copies of BULK_BYTES in flight (dynamic shared memory): the bandwidth an SM can pull, with as
 * many bytes in flight as an attention kernel's K/V ring holds (2 stages x 2 x 32-44 KB); 4 x 8 KB in flight
 * measured the latency's bound instead (14.6 B/clk on the H200, below what the d128 kernels were timed pulling).
 * out[cta] = clocks. BULK_PDL (mb_pdl_dep, the PDL probe's dependent grid): as lat=0, after thread 0 prefetched the
 * slice's first npf copies into L2 and every thread passed griddepcontrol.wait; out[4 cta ..] = globaltimer stamps. */
enum { BULK_SLOTS = 8, BULK_BYTES = 16384, BULK_SMEM = BULK_SLOTS * BULK_BYTES };
enum BulkMode { BULK_BW, BULK_LAT, BULK_PDL };
static void k_bulk(enum BulkMode mode, const char *name, int lg_s)
{
    int lat = mode == BULK_LAT, pdl = mode == BULK_PDL;
    int slots = 1 << lg_s, bytes = lat ? 8192 : BULK_BYTES, lg_b = lat ? 13 : 14;
    head_with(lat ? "" : ".extern .shared .align 128 .b8 dring[];\n", name,
              pdl ? ".param .u64 out, .param .u64 src, .param .u32 n, .param .u32 span, .param .u32 stride, .param .u32 npf"
                  : ".param .u64 out, .param .u64 src, .param .u32 n, .param .u32 span, .param .u32 stride");
    if (lat) P("  .shared .align 128 .b8 ring[32768];\n");
    if (pdl) P("  mov.u64 %%rd20, %%globaltimer;\n");
    P("  .shared .align 8 .b64 bars[%d];\n", slots);
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u64 %%rd6, [src];\n  ld.param.u32 %%r1, [n];\n  ld.param.u32 %%r12, [span];\n  ld.param.u32 %%r20, [stride];\n");
    P("  mov.u32 %%r2, %%tid.x;\n  mov.u32 %%r4, %s;\n  mov.u32 %%r5, bars;\n  mov.u32 %%r8, %%ctaid.x;\n", lat ? "ring" : "dring");
    P("  setp.eq.u32 %%p2, %%r2, 0;\n");
    for (int i = 0; i < slots; i++) P("  @%%p2 mbarrier.init.shared::cta.b64 [%%r5+%d], 1;\n", 8 * i);
    P("  fence.mbarrier_init.release.cluster;\n  bar.sync 0;\n");
    /* offset into src: each CTA starts at cta * stride */
    P("  mul.wide.u32 %%rd7, %%r8, %%r20;\n");
    if (pdl) { /* thread 0 prefetches the slice's first npf copies into L2, then every thread waits for the previous grid */
        P("  ld.param.u32 %%r21, [npf];\n  mov.u32 %%r22, 0;\n  add.u64 %%rd23, %%rd6, %%rd7;\n  @!%%p2 bra PF_DONE;\n");
        P("PF:\n  setp.ge.u32 %%p3, %%r22, %%r21;\n  @%%p3 bra PF_DONE;\n  mul.wide.u32 %%rd24, %%r22, %d;\n  add.u64 %%rd24, %%rd23, %%rd24;\n", bytes);
        P("  cp.async.bulk.prefetch.L2.global [%%rd24], %d;\n  add.u32 %%r22, %%r22, 1;\n  bra PF;\nPF_DONE:\n", bytes);
        P("  griddepcontrol.wait;\n  mov.u64 %%rd21, %%globaltimer;\n");
    }
    P("  mov.u64 %%rd10, %%clock64;\n  mov.u32 %%r3, 0;\n  mov.u32 %%r13, 0;\n");
    P("LOOP:\n  and.b32 %%r9, %%r3, %d;\n  shl.b32 %%r10, %%r9, %d;\n  add.u32 %%r10, %%r10, %%r4;\n  shl.b32 %%r11, %%r9, 3;\n  add.u32 %%r11, %%r11, %%r5;\n", slots - 1, lg_b);
    /* parity of this slot's use: (i / slots) & 1 */
    P("  shr.u32 %%r14, %%r3, %d;\n  and.b32 %%r14, %%r14, 1;\n", lg_s);
    P("  cvt.u64.u32 %%rd8, %%r13;\n  add.u64 %%rd8, %%rd8, %%rd7;\n  cvt.u64.u32 %%rd12, %%r12;\n  rem.u64 %%rd8, %%rd8, %%rd12;\n  add.u64 %%rd8, %%rd8, %%rd6;\n");
    P("  @%%p2 mbarrier.arrive.expect_tx.shared::cta.b64 %%rd9, [%%r11], %d;\n", bytes);
    P("  @%%p2 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%%r10], [%%rd8], %d, [%%r11];\n", bytes);
    if (lat) {
        P("WAIT:\n  mbarrier.try_wait.parity.shared::cta.b64 %%p1, [%%r11], %%r14;\n  @!%%p1 bra WAIT;\n");
    } else { /* wait for the copy issued slots - 1 before (slots in flight) */
        ring_wait(slots, lg_s);
    }
    P("  bar.sync 0;\n  add.u32 %%r13, %%r13, %d;\n  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n", bytes);
    if (!lat) ring_drain(slots, lg_s); /* the last slots - 1 */
    P("  mov.u64 %%rd11, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n");
    if (pdl) /* out[4 cta ..]: globaltimer at entry, after the wait, at the end */
        P("  mov.u64 %%rd22, %%globaltimer;\n  @!%%p2 bra DONE;\n  mul.wide.u32 %%rd2, %%r8, 32;\n  add.u64 %%rd2, %%rd1, %%rd2;\n"
          "  st.global.u64 [%%rd2], %%rd20;\n  st.global.u64 [%%rd2+8], %%rd21;\n  st.global.u64 [%%rd2+16], %%rd22;\nDONE:\n  ret;\n}\n");
    else
        P("  @!%%p2 bra DONE;\n  mul.wide.u32 %%rd2, %%r8, 8;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  st.global.u64 [%%rd2], %%rd11;\nDONE:\n  ret;\n}\n");
}

/* Tensor-map TMA from DRAM, as the attention kernels load K and V: each CTA streams its own rows of a [rows, 128]
 * bf16 tensor (128-byte swizzle) in 64-row blocks of two 64 x 64 boxes (16 KB, a d128 K block at bn 64), 1 << lg_s
 * blocks in flight; out[cta] = clocks. Against mb_tma_bw's 1-D bulk copies of the same bytes: a probe, no table value. */
static void k_tma_tile(const char *name, int lg_s)
{
    int slots = 1 << lg_s;
    head_with(".extern .shared .align 1024 .b8 dring[];\n", name,
              ".param .u64 out, .param .align 64 .b8 tmap[128], .param .u32 n, .param .u32 rows, .param .u32 half");
    P("  .shared .align 8 .b64 bars[%d];\n", slots);
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u32 %%r1, [n];\n  ld.param.u32 %%r12, [rows];\n  ld.param.u32 %%r23, [half];\n");
    /* half > 0: blocks alternate between the CTA's rows and the same rows `half` rows on (a K and a V stream) */
    P("  setp.ne.u32 %%p6, %%r23, 0;\n  selp.u32 %%r24, 1, 0, %%p6;\n");
    P("  mov.b64 %%rd6, tmap;\n  cvta.param.u64 %%rd6, %%rd6;\n");
    P("  mov.u32 %%r2, %%tid.x;\n  mov.u32 %%r4, dring;\n  add.u32 %%r4, %%r4, 1023;\n  and.b32 %%r4, %%r4, -1024;\n");
    P("  mov.u32 %%r5, bars;\n  mov.u32 %%r8, %%ctaid.x;\n  setp.eq.u32 %%p2, %%r2, 0;\n");
    for (int i = 0; i < slots; i++) P("  @%%p2 mbarrier.init.shared::cta.b64 [%%r5+%d], 1;\n", 8 * i);
    P("  fence.mbarrier_init.release.cluster;\n  bar.sync 0;\n  mul.lo.u32 %%r20, %%r8, %%r12;\n");
    P("  mov.u64 %%rd10, %%clock64;\n  mov.u32 %%r3, 0;\n  mov.u32 %%r21, 0;\n  mov.u32 %%r22, 64;\n");
    P("LOOP:\n  and.b32 %%r9, %%r3, %d;\n  shl.b32 %%r10, %%r9, 14;\n  add.u32 %%r10, %%r10, %%r4;\n  shl.b32 %%r11, %%r9, 3;\n"
      "  add.u32 %%r11, %%r11, %%r5;\n  shr.u32 %%r13, %%r3, %%r24;\n  shl.b32 %%r13, %%r13, 6;\n  add.u32 %%r13, %%r13, %%r20;\n"
      "  and.b32 %%r25, %%r3, %%r24;\n  mad.lo.u32 %%r13, %%r25, %%r23, %%r13;\n  add.u32 %%r14, %%r10, 8192;\n", slots - 1);
    P("  @%%p2 mbarrier.arrive.expect_tx.shared::cta.b64 %%rd9, [%%r11], 16384;\n");
    P("  @%%p2 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%%r10], [%%rd6, {%%r21, %%r13}], [%%r11];\n");
    P("  @%%p2 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%%r14], [%%rd6, {%%r22, %%r13}], [%%r11];\n");
    ring_wait(slots, lg_s);
    P("  bar.sync 0;\n  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n");
    ring_drain(slots, lg_s);
    P("  mov.u64 %%rd11, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n");
    P("  @!%%p2 bra DONE;\n  mul.wide.u32 %%rd2, %%r8, 8;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  st.global.u64 [%%rd2], %%rd11;\nDONE:\n  ret;\n}\n");
}

/* the previous grid of the PDL probe: every thread triggers its dependents at once (as the split-KV combine does),
 * then spins ns nanoseconds of globaltimer; out[2 cta ..]: globaltimer at entry and at the end (thread 0) */
static void k_pdl_prev(void)
{
    head("mb_pdl_prev", ".param .u64 out, .param .u32 ns");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u32 %%r1, [ns];\n  griddepcontrol.launch_dependents;\n");
    P("  mov.u64 %%rd2, %%globaltimer;\n  cvt.u64.u32 %%rd3, %%r1;\nSPIN:\n  mov.u64 %%rd4, %%globaltimer;\n  sub.u64 %%rd5, %%rd4, %%rd2;\n");
    P("  setp.lt.u64 %%p1, %%rd5, %%rd3;\n  @%%p1 bra SPIN;\n  mov.u32 %%r2, %%tid.x;\n  setp.ne.u32 %%p2, %%r2, 0;\n  @%%p2 bra DONE;\n");
    P("  mov.u32 %%r8, %%ctaid.x;\n  mul.wide.u32 %%rd6, %%r8, 16;\n  add.u64 %%rd6, %%rd1, %%rd6;\n");
    P("  st.global.u64 [%%rd6], %%rd2;\n  st.global.u64 [%%rd6+8], %%rd4;\nDONE:\n  ret;\n}\n");
}

/* cp.async gather, the sm90a sparse MLA producer's own pattern (gen/sm90/mla_sparse.c mla_producer, gather_half):
 * 128 threads, 8 a row (thread = 8 group + unit), each thread its 16-byte unit of every 128-byte chunk of a
 * GATHER_ROW-byte row, so one warp-wide cp.async.cg reads 4 whole rows' 128-byte lines (coalesced, as the
 * kernel's); a block is GATHER_ROWS rows by an index table, group g's rows g + 16 k (k < 4), 9 chunks each (36
 * copies a thread), into a 128B-swizzled K-major slot (chunk c at c x 8 KB, row r at 128 r, unit u at u ^ (r % 8));
 * two blocks in flight (commit, wait_group 1) into two slots, as the kernel's two-slot ring. Rows come from the
 * first GATHER_SRC_ROWS x GATHER_ROW bytes of src (L2-resident); idx holds GATHER_IDX row numbers. out[cta] =
 * clocks of n blocks (thread 0). */
enum { GATHER_ROW = 1152, GATHER_ROWS = 64, GATHER_BLOCK = GATHER_ROW * GATHER_ROWS, GATHER_SMEM = 2 * GATHER_BLOCK,
       GATHER_IDX = 4096, GATHER_SRC_ROWS = 8192, GATHER_CHUNK = 128 * GATHER_ROWS, GATHER_GROUPS = 16 };
static void k_gather(void)
{
    head_with(".extern .shared .align 128 .b8 gring[];\n", "mb_gather",
              ".param .u64 out, .param .u64 src, .param .u64 idx, .param .u32 n");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u64 %%rd6, [src];\n  ld.param.u64 %%rd7, [idx];\n  ld.param.u32 %%r1, [n];\n");
    P("  mov.u32 %%r2, %%tid.x;\n  mov.u32 %%r8, %%ctaid.x;\n  setp.eq.u32 %%p2, %%r2, 0;\n");
    /* group g = tid / 8, unit u = tid % 8: global column offset 16 u; smem 128 g + 16 (u ^ (g % 8)) */
    P("  shr.u32 %%r4, %%r2, 3;\n  and.b32 %%r5, %%r2, 7;\n  shl.b32 %%r6, %%r5, 4;\n  and.b32 %%r7, %%r4, 7;\n");
    P("  xor.b32 %%r7, %%r7, %%r5;\n  shl.b32 %%r7, %%r7, 4;\n  mad.lo.u32 %%r7, %%r4, 128, %%r7;\n");
    P("  mov.u32 %%r9, gring;\n  add.u32 %%r9, %%r9, %%r7;\n  mul.lo.u32 %%r10, %%r8, %d;\n  add.u32 %%r10, %%r10, %%r4;\n", GATHER_ROWS);
    P("  mov.u64 %%rd10, %%clock64;\n  mov.u32 %%r3, 0;\n");
    P("LOOP:\n  and.b32 %%r11, %%r3, 1;\n  mad.lo.u32 %%r12, %%r11, %d, %%r9;\n", GATHER_BLOCK);
    /* the indices of rows g + 16 k of block j (each CTA its own stretch of the table), all four loaded before any copy:
     * the order ptxas gives them (one load latency a block, not four), written out so that the timing model, which
     * keeps memory instructions where they are, replays the same schedule */
    for (int k = 0; k < GATHER_ROWS / GATHER_GROUPS; k++) {
        P("  mad.lo.u32 %%r13, %%r3, %d, %%r10;\n  add.u32 %%r13, %%r13, %d;\n  and.b32 %%r13, %%r13, %d;\n", GATHER_ROWS,
          GATHER_GROUPS * k, GATHER_IDX - 1);
        P("  mul.wide.u32 %%rd2, %%r13, 4;\n  add.u64 %%rd2, %%rd7, %%rd2;\n  ld.global.nc.u32 %%r%d, [%%rd2];\n", 30 + k);
    }
    for (int k = 0; k < GATHER_ROWS / GATHER_GROUPS; k++) {
        P("  mul.wide.u32 %%rd3, %%r%d, %d;\n  cvt.u64.u32 %%rd4, %%r6;\n  add.u64 %%rd3, %%rd3, %%rd4;\n  add.u64 %%rd3, %%rd6, %%rd3;\n",
          30 + k, GATHER_ROW);
        for (int c = 0; c < GATHER_ROW / 128; c++)
            P("  cp.async.cg.shared.global [%%r12+%d], [%%rd3+%d], 16;\n", GATHER_CHUNK * c + GATHER_GROUPS * 128 * k, 128 * c);
    }
    P("  cp.async.commit_group;\n  cp.async.wait_group 1;\n");
    P("  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n  cp.async.wait_group 0;\n  bar.sync 0;\n");
    P("  mov.u64 %%rd11, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n");
    P("  @!%%p2 bra DONE;\n  mul.wide.u32 %%rd2, %%r8, 8;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  st.global.u64 [%%rd2], %%rd11;\nDONE:\n  ret;\n}\n");
}

/* 32-bit integer division by a register (the tile decode's div.u32 / rem.u32 by heads and m-block counts): 8
 * independent chains a thread of div.u32 then an add that keeps the dividend large, each chain its own divisor,
 * which moves on every pass (a divisor the loop does not change lets ptxas take its reciprocal out of the loop: 235
 * clocks a pass on an H200 with one fixed divisor, ~10 instructions a division; the attention kernels' tile decode
 * divides by values ptxas does not hoist), 256 threads (two warps a sub-partition), one SM, n passes; out[0] =
 * clocks of the n passes (thread 0). ptxas expands each div into 18 SASS instructions (I2F, MUFU.RCP, F2I, IMADs,
 * IADD3s, ISETPs). Table value idiv_clk: the clocks a warp division holds its sub-partition, which timing.c
 * idiv_sass charges (tests/sim/mb_replay.py checks the model reads it back). */
static void k_idiv(void)
{
    head("mb_idiv", ".param .u64 out, .param .u32 n, .param .u32 d");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u32 %%r1, [n];\n  ld.param.u32 %%r40, [d];\n  mov.u32 %%r2, %%tid.x;\n");
    for (int i = 0; i < 8; i++)
        P("  mad.lo.u32 %%r%d, %%r2, %d, %d;\n  add.u32 %%r%d, %%r40, %d;\n", 10 + i, 7919 + i, 0x40000000 + i, 50 + i, i);
    P("  setp.eq.u32 %%p2, %%r2, 0;\n  mov.u64 %%rd10, %%clock64;\n  mov.u32 %%r3, 0;\nLOOP:\n");
    for (int i = 0; i < 8; i++)
        P("  div.u32 %%r%d, %%r%d, %%r%d;\n  add.u32 %%r%d, %%r%d, 0x40000000;\n  add.u32 %%r%d, %%r%d, 8;\n", 10 + i,
          10 + i, 50 + i, 10 + i, 10 + i, 50 + i, 50 + i);
    P("  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n");
    P("  mov.u64 %%rd11, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n");
    for (int i = 1; i < 8; i++) P("  add.u32 %%r10, %%r10, %%r%d;\n", 10 + i);
    P("  mul.wide.u32 %%rd2, %%r2, 4;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  st.global.u32 [%%rd2+16], %%r10;\n");
    P("  @!%%p2 bra DONE;\n  st.global.u64 [%%rd1], %%rd11;\nDONE:\n  ret;\n}\n");
}

/* The soft-cap score_mod as fa4gen's splice puts it into the sm90a kernel (30 tanhf(s / 30), NVRTC 13.0's
 * tanhf: ex2 + rcp for |x| >= 0.6, an odd polynomial below), on SOFTCAP_SCORES independent scores per thread
 * (a consumer thread's share of a 64 x 176 S tile), each site reusing the same temporaries as the splice
 * does. 256 threads (two warpgroups, as the consumers), n passes; out[0] = clocks of the n passes (thread 0).
 * Not a table value: a probe of how the PTX-order model issues a long dependent chain repeated over
 * independent scores, against what ptxas makes of it (tests/sim/mb_replay.py reads the model's clocks). */
enum { SOFTCAP_SCORES = 88 };
static void k_softcap(void)
{
    head("mb_softcap", ".param .u64 out, .param .u32 n");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u32 %%r1, [n];\n  mov.u32 %%r2, %%tid.x;\n  cvt.rn.f32.u32 %%f150, %%r2;\n");
    P("  mul.f32 %%f150, %%f150, 0f3C000000;\n");
    for (int i = 0; i < SOFTCAP_SCORES; i++) P("  add.f32 %%f%d, %%f150, 0f%08X;\n", i, 0xC1000000u + (unsigned)i * 0x20000u);
    P("  setp.eq.u32 %%p2, %%r2, 0;\n  mov.u64 %%rd10, %%clock64;\n  mov.u32 %%r3, 0;\nLOOP:\n");
    for (int i = 0; i < SOFTCAP_SCORES; i++) {
        P("  mul.f32 %%f101, %%f%d, 0f3D088889;\n  abs.f32 %%f102, %%f101;\n  mul.f32 %%f103, %%f102, 0f4038AA3B;\n", i);
        P("  ex2.approx.ftz.f32 %%f104, %%f103;\n  add.f32 %%f105, %%f104, 0f3F800000;\n  rcp.approx.ftz.f32 %%f106, %%f105;\n");
        P("  fma.rn.f32 %%f107, %%f106, 0fC0000000, 0f3F800000;\n  setp.ge.f32 %%p5, %%f102, 0f41102CB4;\n");
        P("  selp.f32 %%f108, 0f3F800000, %%f107, %%p5;\n  copysign.f32 %%f109, %%f101, %%f108;\n  mul.f32 %%f110, %%f101, %%f101;\n");
        P("  fma.rn.f32 %%f111, %%f110, 0f3C80F082, 0fBD563CAE;\n  fma.rn.f32 %%f112, %%f111, %%f110, 0f3E085941;\n");
        P("  fma.rn.f32 %%f113, %%f112, %%f110, 0fBEAAA9ED;\n  fma.rn.f32 %%f114, %%f113, %%f110, 0f00000000;\n");
        P("  fma.rn.f32 %%f115, %%f114, %%f101, %%f101;\n  setp.ge.f32 %%p6, %%f102, 0f3F19999A;\n");
        P("  selp.f32 %%f116, %%f109, %%f115, %%p6;\n  mul.f32 %%f%d, %%f116, 0f41F00000;\n", i);
    }
    P("  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n");
    P("  mov.u64 %%rd11, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n");
    for (int i = 1; i < SOFTCAP_SCORES; i++) P("  add.f32 %%f0, %%f0, %%f%d;\n", i);
    P("  mul.wide.u32 %%rd2, %%r2, 4;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  st.global.f32 [%%rd2+16], %%f0;\n");
    P("  @!%%p2 bra DONE;\n  st.global.u64 [%%rd1], %%rd11;\nDONE:\n  ret;\n}\n");
}

/* st.global from registers, as an epilogue without a TMA store writes O: each CTA its own 64 KB tile (64 rows of
 * 1 KB, L2-resident), 256 threads, 64 four-byte stores a thread per pass. frag=1: the accumulator fragment's
 * pattern (a warp instruction covers 8 rows x 16 bytes: 8 distinct 128-byte lines, as the sparse MLA's
 * tma_store=0 epilogue); frag=0: a warp instruction covers 128 contiguous bytes (one line). n passes; out[cta] =
 * clocks (thread 0, between two bar.syncs). The model charges a store the larger of its lines x st_line (frag) and
 * its bytes / st_bw (line). */
enum { ST_TILE = 65536, ST_PER_THREAD = 64 };
static void k_store(const char *name, int frag)
{
    head(name, ".param .u64 out, .param .u64 dst, .param .u32 n");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u64 %%rd6, [dst];\n  ld.param.u32 %%r1, [n];\n");
    P("  mov.u32 %%r2, %%tid.x;\n  mov.u32 %%r8, %%ctaid.x;\n  setp.eq.u32 %%p2, %%r2, 0;\n");
    P("  shr.u32 %%r4, %%r2, 5;\n  and.b32 %%r5, %%r2, 31;\n");
    if (frag) /* row 8 warp + lane / 4 (1 KB apart), 4 bytes at lane % 4; store i at +16 i */
        P("  shr.u32 %%r6, %%r5, 2;\n  mad.lo.u32 %%r6, %%r4, 8, %%r6;\n  shl.b32 %%r6, %%r6, 10;\n  and.b32 %%r7, %%r5, 3;\n  mad.lo.u32 %%r6, %%r7, 4, %%r6;\n");
    else /* warp w: 8 KB at 8 KB w; 4 bytes at 4 lane; store i at +128 i */
        P("  shl.b32 %%r6, %%r4, 13;\n  mad.lo.u32 %%r6, %%r5, 4, %%r6;\n");
    P("  mul.wide.u32 %%rd7, %%r8, %d;\n  add.u64 %%rd7, %%rd7, %%rd6;\n  cvt.u64.u32 %%rd8, %%r6;\n  add.u64 %%rd7, %%rd7, %%rd8;\n", ST_TILE);
    P("  bar.sync 0;\n  mov.u64 %%rd10, %%clock64;\n  mov.u32 %%r3, 0;\nLOOP:\n");
    for (int i = 0; i < ST_PER_THREAD; i++) P("  st.global.b32 [%%rd7+%d], %%r3;\n", frag ? 16 * i : 128 * i);
    P("  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n  bar.sync 0;\n");
    P("  mov.u64 %%rd11, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n");
    P("  @!%%p2 bra DONE;\n  mul.wide.u32 %%rd2, %%r8, 8;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  st.global.u64 [%%rd2], %%rd11;\nDONE:\n  ret;\n}\n");
}

/* How a sub-partition's issue is shared between two warps that both always have an instruction ready: 256 threads
 * (warps w and w + 4 on one sub-partition), after a bar.sync each warp runs n iterations of 8 independent chains
 * (fma: fma.rn.f32, one warp alone issues one a clock; mufu: ex2.approx.ftz.f32, the pipe's 8 clocks a warp
 * instruction) and records its clock64 before and after: out[2 w], out[2 w + 1]. Both warps of a sub-partition
 * ending together says the scheduler alternates; one ending at half the time says it favours one warp (greedy or
 * oldest first). A probe: no table value. */
static void k_share(const char *name, int mufu)
{
    head(name, ".param .u64 out, .param .u32 n");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u32 %%r1, [n];\n  mov.u32 %%r2, %%tid.x;\n  cvt.rn.f32.u32 %%f100, %%r2;\n");
    for (int i = 0; i < 8; i++) P("  add.f32 %%f%d, %%f100, 0f3F00%02X00;\n", i, i);
    P("  bar.sync 0;\n  mov.u64 %%rd10, %%clock64;\n  mov.u32 %%r3, 0;\nLOOP:\n");
    for (int i = 0; i < 8; i++) {
        if (mufu) P("  ex2.approx.ftz.f32 %%f%d, %%f%d;\n", i, i);
        else P("  fma.rn.f32 %%f%d, %%f%d, 0f3F7FFFF0, 0f3A800000;\n", i, i);
    }
    P("  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n  mov.u64 %%rd11, %%clock64;\n");
    for (int i = 1; i < 8; i++) P("  add.f32 %%f0, %%f0, %%f%d;\n", i);
    P("  and.b32 %%r4, %%r2, 31;\n  setp.ne.u32 %%p2, %%r4, 0;\n  @%%p2 bra DONE;\n  shr.u32 %%r5, %%r2, 5;\n");
    P("  mul.wide.u32 %%rd2, %%r5, 16;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  st.global.u64 [%%rd2], %%rd10;\n  st.global.u64 [%%rd2+8], %%rd11;\n");
    P("  st.global.f32 [%%rd1+256], %%f0;\nDONE:\n  ret;\n}\n");
}

/* The online-softmax probe's registers: 64 scores f0-f63 from the thread index, the sums f156-f157, the packs' xor r20 */
static void softmax_init(void)
{
    P("  cvt.rn.f32.u32 %%f158, %%r2;\n");
    P("  mul.f32 %%f158, %%f158, 0f3C000000;\n");
    for (int i = 0; i < 64; i++) P("  add.f32 %%f%d, %%f158, 0f%08X;\n", i, 0xC0000000u + (unsigned)i * 0x40000u);
    P("  mov.f32 %%f156, 0f00000000;\n  mov.f32 %%f157, 0f00000000;\n  mov.u32 %%r20, 0;\n");
}

/* One pass of the online-softmax probe (below): f0-f63 the scores, f64-f127 the exponentials, f128-f158 temporaries */
static void softmax_pass(void)
{
    for (int h = 0; h < 2; h++) { /* row h: scores f[32h .. 32h+31]; a max tree into f128 ... */
        int b = 32 * h, t = 128;
        for (int i = 0; i < 16; i++) P("  max.f32 %%f%d, %%f%d, %%f%d;\n", t + i, b + 2 * i, b + 2 * i + 1);
        for (int w = 16; w > 1; w /= 2)
            for (int i = 0; i < w / 2; i++) P("  max.f32 %%f%d, %%f%d, %%f%d;\n", t + i, t + 2 * i, t + 2 * i + 1);
        P("  fma.rn.f32 %%f%d, %%f%d, 0f0DA24260, %%f%d;\n  max.f32 %%f%d, %%f%d, %%f%d;\n", 144 + h, 156 + h, t, 146 + h, t, 144 + h);
        for (int k = 1; k <= 2; k *= 2) {
            P("  shfl.sync.bfly.b32 %%f%d, %%f%d, %d, 31, 0xffffffff;\n", 148 + h, 146 + h, k);
            P("  max.f32 %%f%d, %%f%d, %%f%d;\n", 146 + h, 146 + h, 148 + h);
        }
        P("  mul.f32 %%f%d, %%f%d, 0fBFB8AA3B;\n", 150 + h, 146 + h);
    }
    for (int i = 0; i < 64; i++) {
        P("  fma.rn.f32 %%f%d, %%f%d, 0f3FB8AA3B, %%f%d;\n", 64 + i, i, 150 + i / 32);
        P("  ex2.approx.ftz.f32 %%f%d, %%f%d;\n", 64 + i, 64 + i);
    }
    for (int h = 0; h < 2; h++) { /* the row sum: 4 chains of 8, then 3 adds */
        for (int c = 0; c < 4; c++) {
            P("  mov.f32 %%f%d, %%f%d;\n", 152 + c, 64 + 32 * h + c);
            for (int k = 1; k < 8; k++) P("  add.f32 %%f%d, %%f%d, %%f%d;\n", 152 + c, 152 + c, 64 + 32 * h + c + 4 * k);
        }
        P("  add.f32 %%f152, %%f152, %%f153;\n  add.f32 %%f154, %%f154, %%f155;\n  add.f32 %%f%d, %%f152, %%f154;\n", 156 + h);
    }
    for (int i = 0; i < 32; i++) {
        P("  cvt.rn.bf16x2.f32 %%r%d, %%f%d, %%f%d;\n", 30 + i, 64 + 2 * i + 1, 64 + 2 * i);
        P("  xor.b32 %%r20, %%r20, %%r%d;\n", 30 + i);
    }
}

/* One online-softmax block as an sm90a consumer thread holds it (an m64n128 S fragment: 64 scores, two rows of 32,
 * each row shared by a quad of 4 threads), n times: the two row maxima (a max tree, two shuffles), 64 FFMA + 64 ex2,
 * the two row sums, 32 bf16x2 packs. Each pass's maxima also take the previous pass's sums times 1e-30 (so nothing is
 * loop-invariant) and the packs are xor-ed into one register (so none is dead): 33 instructions the kernel does not
 * have. out[0] = thread 0's clocks over the n passes; 128 threads (one warpgroup) or 256 (two: two warps a
 * sub-partition, as the two consumers of the kernel). A probe: no table value. */
static void k_softmax(void)
{
    head("mb_softmax", ".param .u64 out, .param .u32 n");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u32 %%r1, [n];\n  mov.u32 %%r2, %%tid.x;\n");
    softmax_init();
    P("  setp.eq.u32 %%p2, %%r2, 0;\n  mov.u64 %%rd10, %%clock64;\n  mov.u32 %%r3, 0;\nLOOP:\n");
    softmax_pass();
    P("  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n");
    P("  mov.u64 %%rd11, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n  add.f32 %%f156, %%f156, %%f157;\n");
    P("  mul.wide.u32 %%rd2, %%r2, 4;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  st.global.f32 [%%rd2+16], %%f156;\n  st.global.u32 [%%rd2+2048], %%r20;\n");
    P("  @!%%p2 bra DONE;\n  st.global.u64 [%%rd1], %%rd11;\nDONE:\n  ret;\n}\n");
}

/* The softmax beside wgmmas: warpgroup 0 runs the WG_RATE loop (m64n256k16, 4 a commit, wait_group 1) for n
 * iterations while warpgroup 1 runs n / 2 passes of the online-softmax probe (about 2/3 of warpgroup 0's time alone),
 * as the kernel's two consumers overlap one's softmax with the other's MMAs. out[0] = warpgroup 0's clocks, out[1] =
 * warpgroup 1's (thread 128). A probe: no table value. */
static void k_softmax_beside(void)
{
    head("mb_softmax_beside", ".param .u64 out, .param .u32 n");
    P("  .shared .align 1024 .b8 buf[16384];\n");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u32 %%r1, [n];\n  mov.u32 %%r2, %%tid.x;\n  mov.u32 %%r4, buf;\n");
    wg_rate_role("SM");
    softmax_init();
    P("  shr.u32 %%r5, %%r1, 1;\n  mov.u64 %%rd10, %%clock64;\n  mov.u32 %%r3, 0;\nSLOOP:\n");
    softmax_pass();
    P("  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p5, %%r3, %%r5;\n  @%%p5 bra SLOOP;\n");
    P("  mov.u64 %%rd11, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n  add.f32 %%f156, %%f156, %%f157;\n");
    P("  mul.wide.u32 %%rd2, %%r2, 4;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  st.global.f32 [%%rd2+64], %%f156;\n  st.global.u32 [%%rd2+2048], %%r20;\n");
    P("  setp.ne.u32 %%p6, %%r2, 128;\n  @%%p6 bra DONE;\n  st.global.u64 [%%rd1+8], %%rd11;\n");
    P("DONE:\n  ret;\n}\n");
}

/* mbarrier round trip: warp 0 lane 0 arrives on bar A and waits on B; warp 1 lane 0 waits on A and
 * arrives on B; n round trips; out = clocks. */
static void k_mbar(void)
{
    head("mb_mbar_rt", ".param .u64 out, .param .u32 n");
    P("  .shared .align 8 .b64 bars[2];\n");
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u32 %%r1, [n];\n  mov.u32 %%r2, %%tid.x;\n  mov.u32 %%r5, bars;\n");
    P("  setp.eq.u32 %%p2, %%r2, 0;\n  @%%p2 mbarrier.init.shared::cta.b64 [%%r5], 1;\n  @%%p2 mbarrier.init.shared::cta.b64 [%%r5+8], 1;\n");
    P("  fence.mbarrier_init.release.cluster;\n  bar.sync 0;\n");
    P("  setp.eq.u32 %%p3, %%r2, 32;\n  or.pred %%p4, %%p2, %%p3;\n  @!%%p4 bra DONE;\n");
    P("  mov.u64 %%rd10, %%clock64;\n  mov.u32 %%r3, 0;\n");
    P("LOOP:\n  and.b32 %%r14, %%r3, 1;\n  @%%p3 bra PONG;\n");
    P("  mbarrier.arrive.shared::cta.b64 %%rd9, [%%r5];\nW1:\n  mbarrier.try_wait.parity.shared::cta.b64 %%p1, [%%r5+8], %%r14;\n  @!%%p1 bra W1;\n  bra NEXT;\n");
    P("PONG:\nW2:\n  mbarrier.try_wait.parity.shared::cta.b64 %%p1, [%%r5], %%r14;\n  @!%%p1 bra W2;\n  mbarrier.arrive.shared::cta.b64 %%rd9, [%%r5+8];\n");
    P("NEXT:\n  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n");
    P("  mov.u64 %%rd11, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n  @!%%p2 bra DONE;\n  st.global.u64 [%%rd1], %%rd11;\nDONE:\n  ret;\n}\n");
}

typedef void (*Gen)(void);
static void g_ex2(void) { k_unary("mb_mufu_ex2", "ex2"); }
static void g_cvt(void) { k_unary("mb_cvt_bf16x2", "cvt"); }
static void g_wr(void) { k_wgmma_n("mb_wgmma_rate", WG_RATE, 256); }
static void g_wl(void) { k_wgmma_n("mb_wgmma_lat", WG_LAT, 256); }
static void g_wd(void) { k_wgmma_n("mb_wgmma_drain", WG_DRAIN, 256); }
static void g_ws(void) { k_wgmma_n("mb_wgmma_scale", WG_SCALE, 256); }
static void g_wd16(void) { k_wgmma_n("mb_wgmma_drain_n16", WG_DRAIN, 16); }
static void g_wd64(void) { k_wgmma_n("mb_wgmma_drain_n64", WG_DRAIN, 64); }
static void g_wd128(void) { k_wgmma_n("mb_wgmma_drain_n128", WG_DRAIN, 128); }
static void g_wb0(void) { k_wgmma_beside("mb_wgmma_beside_idle", 0); }
static void g_wb1(void) { k_wgmma_beside("mb_wgmma_beside_fmul", 16); }
static void g_wb2(void) { k_wgmma_beside("mb_wgmma_beside_chain", 1); }
static void g_wb3(void) { k_wgmma_beside("mb_wgmma_beside_c2", 2); }
static void g_wb4(void) { k_wgmma_beside("mb_wgmma_beside_c4", 4); }
/* the SS rate at the narrow N of a QK wgmma (N = bn: 32..128 when shared memory is short), as a fraction of the
 * N 256 rate (tc_frac_nN; the model interpolates in N): narrow tiles fetch more operand bytes per MAC */
static void g_w16(void) { k_wgmma_n("mb_wgmma_n16", WG_RATE, 16); }
static void g_w32(void) { k_wgmma_n("mb_wgmma_n32", WG_RATE, 32); }
static void g_w48(void) { k_wgmma_n("mb_wgmma_n48", WG_RATE, 48); }
static void g_w64(void) { k_wgmma_n("mb_wgmma_n64", WG_RATE, 64); }
static void g_w80(void) { k_wgmma_n("mb_wgmma_n80", WG_RATE, 80); }
static void g_w128(void) { k_wgmma_n("mb_wgmma_n128", WG_RATE, 128); }
static void g_tb(void) { k_bulk(BULK_BW, "mb_tma_bw", 3); }
static void g_tb2(void) { k_bulk(BULK_BW, "mb_tma_bw_s2", 1); }
static void g_tb4(void) { k_bulk(BULK_BW, "mb_tma_bw_s4", 2); }
static void g_tt2(void) { k_tma_tile("mb_tma_tile_s2", 1); }
static void g_tt4(void) { k_tma_tile("mb_tma_tile_s4", 2); }
static void g_tt8(void) { k_tma_tile("mb_tma_tile_s8", 3); }
static void g_tl(void) { k_bulk(BULK_LAT, "mb_tma_lat", 2); }
static void g_pd(void) { k_bulk(BULK_PDL, "mb_pdl_dep", 3); }
static void g_sf(void) { k_store("mb_st_frag", 1); }
static void g_sl(void) { k_store("mb_st_line", 0); }
static void g_shf(void) { k_share("mb_share_fma", 0); }
static void g_shm(void) { k_share("mb_share_mufu", 1); }
static const struct { const char *name; Gen gen; } kernels[] = {
    {"mb_clock", k_clock}, {"mb_empty", k_empty}, {"mb_mufu_ex2", g_ex2}, {"mb_cvt_bf16x2", g_cvt},
    {"mb_smem", k_smem}, {"mb_wgmma_rate", g_wr}, {"mb_wgmma_lat", g_wl}, {"mb_tma_bw", g_tb}, {"mb_tma_bw_s2", g_tb2}, {"mb_tma_bw_s4", g_tb4},
    {"mb_tma_tile_s2", g_tt2}, {"mb_tma_tile_s4", g_tt4}, {"mb_tma_tile_s8", g_tt8},
    {"mb_tma_lat", g_tl}, {"mb_mbar_rt", k_mbar}, {"mb_gather", k_gather}, {"mb_softcap", k_softcap}, {"mb_idiv", k_idiv},
    {"mb_wgmma_n16", g_w16}, {"mb_wgmma_n32", g_w32}, {"mb_wgmma_n48", g_w48}, {"mb_wgmma_n64", g_w64},
    {"mb_wgmma_n80", g_w80}, {"mb_wgmma_n128", g_w128}, {"mb_st_frag", g_sf}, {"mb_st_line", g_sl},
    {"mb_share_fma", g_shf}, {"mb_share_mufu", g_shm}, {"mb_softmax", k_softmax}, {"mb_softmax_beside", k_softmax_beside},
    {"mb_wgmma_issue", k_wgmma_issue},
    {"mb_wgmma_drain", g_wd}, {"mb_wgmma_scale", g_ws}, {"mb_wgmma_drain_n16", g_wd16},
    {"mb_wgmma_drain_n64", g_wd64}, {"mb_wgmma_drain_n128", g_wd128}, {"mb_wgmma_beside_idle", g_wb0},
    {"mb_wgmma_beside_fmul", g_wb1}, {"mb_wgmma_beside_chain", g_wb2}, {"mb_wgmma_beside_c2", g_wb3},
    {"mb_wgmma_beside_c4", g_wb4}, {"mb_wgmma_pair", k_wgmma_pair}, {"mb_pdl_prev", k_pdl_prev},
    {"mb_pdl_dep", g_pd},
};
enum { NK = sizeof kernels / sizeof kernels[0] };

/* ------------------------------------------------------------ the GPU side
 * (left out of an -DMB_EMIT_ONLY build: `--emit` needs no driver, so tests/sim/mb_replay.py builds it without
 * -lcuda, and neither a GPU host's libcuda nor the simulator's is loaded to write PTX) */
#ifndef MB_EMIT_ONLY
#define CK(x) do { CUresult r_ = (x); if (r_) { const char *s_ = ""; cuGetErrorString(r_, &s_); \
    fprintf(stderr, "microbench: %s: %s\n", #x, s_); exit(1); } } while (0)

static CUmodule mods[NK];
static CUfunction fn(const char *name)
{
    for (int i = 0; i < NK; i++)
        if (!strcmp(kernels[i].name, name)) {
            if (!mods[i]) {
                kernels[i].gen();
                char log[8192] = "";
                CUjit_option o[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
                void *v[2] = {log, (void *)(uintptr_t)sizeof log};
                if (cuModuleLoadDataEx(&mods[i], ptx, 2, o, v)) { fprintf(stderr, "microbench: %s: %s\n", name, log); exit(1); }
            }
            CUfunction f;
            CK(cuModuleGetFunction(&f, mods[i], name));
            return f;
        }
    exit(1);
}

/* The bulk-copy ring with 2 << k copies of BULK_BYTES in flight (k 0..2: mb_tma_bw_s2, _s4, mb_tma_bw), its dynamic
 * shared memory allowed; *smem = the bytes to launch it with. */
static CUfunction bulk_ring(int k, unsigned *smem)
{
    static const char *const name[] = {"mb_tma_bw_s2", "mb_tma_bw_s4", "mb_tma_bw"};
    CUfunction f = fn(name[k]);
    *smem = (unsigned)BULK_BYTES << (k + 1);
    CK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)*smem));
    return f;
}

static float launch_ms(CUfunction f, unsigned grid, unsigned block, unsigned smem, void **args, int reps)
{
    CUevent a, b;
    CK(cuEventCreate(&a, 0));
    CK(cuEventCreate(&b, 0));
    CK(cuLaunchKernel(f, grid, 1, 1, block, 1, 1, smem, NULL, args, NULL)); /* warm */
    CK(cuEventRecord(a, NULL));
    for (int i = 0; i < reps; i++) CK(cuLaunchKernel(f, grid, 1, 1, block, 1, 1, smem, NULL, args, NULL));
    CK(cuEventRecord(b, NULL));
    CK(cuEventSynchronize(b));
    float ms;
    CK(cuEventElapsedTime(&ms, a, b));
    return ms / reps;
}

typedef struct Meas { const char *key, *bench; double v; char how[200]; } Meas;

/* the value measured for key so far, or `none` */
static double meas_value(const Meas *m, int nm, const char *key, double none)
{
    for (int i = 0; i < nm; i++)
        if (!strcmp(m[i].key, key)) return m[i].v;
    return none;
}

#endif

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--emit")) {
        for (int i = 0; i < NK; i++) {
            kernels[i].gen();
            char path[1024];
            snprintf(path, sizeof path, "%s/%s.ptx", argv[2], kernels[i].name);
            FILE *f = fopen(path, "w");
            if (!f) { fprintf(stderr, "microbench: %s: cannot write\n", path); return 1; }
            fwrite(ptx, 1, plen, f);
            fclose(f);
        }
        return 0;
    }
#ifdef MB_EMIT_ONLY
    fprintf(stderr, "usage: mb-emit --emit DIR (built with -DMB_EMIT_ONLY: no GPU side)\n");
    return 2;
#else
    if (argc != 3) { fprintf(stderr, "usage: microbench --emit DIR | microbench TABLE OUT.tbl\n"); return 2; }
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    int sms;
    CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CUdeviceptr out, src;
    size_t span = (size_t)512 << 20; /* 512 MB: past the 50 MB L2 */
    CK(cuMemAlloc(&out, 1 << 20));
    CK(cuMemAlloc(&src, span + (1 << 20)));
    CK(cuMemsetD8(src, 0, span + (1 << 20)));
    Meas m[40];
    int nm = 0;
    unsigned long long h[4096];

    /* Two clocks. The SM clock under a plain spin on every SM (`hz`) converts the rates of the light benchmarks (MUFU,
     * conversions, shared memory, one SM's TMA) timed with CUDA events into clocks; they ran at it. Under every SM's
     * tensor core the clock drops (power): mb_wgmma_rate's own clock64 / globaltimer gives that clock, the table's
     * clock_ghz, since the attention kernels keep the tensor cores busy and run at it (bench/short_timeline.py's
     * ns/cycle on an H200: 1.73-1.76 GHz where the spin reads 1.98); tc_macs is then MACs per clock at it, and the
     * whole-GPU bandwidths (l2_bw, cpa_bw: bytes per second) are per clock of it. m[0] is filled in there. */
    unsigned n = 2000000;
    void *ac[] = {&out, &n};
    launch_ms(fn("mb_clock"), (unsigned)sms, 128, 0, ac, 1);
    CK(cuMemcpyDtoH(h, out, 16));
    double ghz = (double)h[0] / (double)h[1];
    double hz = ghz * 1e9, hz_tc = hz;
    m[nm++] = (Meas){"clock_ghz", "clock_tc", 0, ""};

    /* the host's launch rate: a probe (the table's launch_us and gap_pdl_us are the GPU-side gaps of the PDL probe) */
    void *ae[] = {&out};
    printf("probe      launch_rate  us       %10.3f  (mean of 200 back-to-back empty launches, CUDA events: the host's "
           "launch rate, not the GPU's gap between kernels)\n", 1000.0 * launch_ms(fn("mb_empty"), 1, 32, 0, ae, 200));

    unsigned it = 4096;
    void *au[] = {&out, &it};
    unsigned blk = 512, grid = (unsigned)sms * 4;
    double ms = launch_ms(fn("mb_mufu_ex2"), grid, blk, 0, au, 5);
    double lanes = (double)grid * blk * it * 8 / (ms * 1e-3 * hz * sms);
    m[nm++] = (Meas){"mufu_lanes", "mufu_ex2", lanes, "ex2.approx.ftz.f32, 8 chains per thread, 2048 threads per SM"};
    ms = launch_ms(fn("mb_cvt_bf16x2"), grid, blk, 0, au, 5);
    lanes = (double)grid * blk * it * 8 / (ms * 1e-3 * hz * sms);
    m[nm++] = (Meas){"cvt_lanes", "cvt_bf16x2", lanes, "cvt.rn.bf16x2.f32 (+ a mov ptxas folds), 8 chains per thread"};

    ms = launch_ms(fn("mb_smem"), grid, blk, 0, au, 5);
    double bpc = (double)grid * blk * it * 4 * 16 / (ms * 1e-3 * hz * sms);
    m[nm++] = (Meas){"smem_bw", "smem_bw", bpc, "ld.shared.v4 conflict-free, 4 per iteration"};

    unsigned wn_iters = 2048;
    void *aw[] = {&out, &wn_iters};
    ms = launch_ms(fn("mb_wgmma_rate"), (unsigned)sms, 256, 0, aw, 3);
    double macs = (double)sms * 2 * wn_iters * 4 * 64.0 * 256 * 16;
    /* the clock under the tensor load: thread 0 of CTA 0, its clock64 and globaltimer over the loop */
    CK(cuMemcpyDtoH(h, out, 16));
    double tc_ns = (double)(h[1] >> 32), tc_spin = macs / (ms * 1e-3 * hz * sms); /* MACs per spin clock: ratios */
    if (tc_ns > 0 && h[0] > 0) hz_tc = (double)h[0] / tc_ns * 1e9;
    m[0].v = hz_tc / 1e9;
    snprintf(m[0].how, sizeof m[0].how, "clock64 / globaltimer over mb_wgmma_rate's loop on every SM (the SM clock under "
             "a tensor load; over a spin on every SM: %.3f)", ghz);
    m[nm++] = (Meas){"tc_macs", "wgmma_rate", macs / sms / (double)(h[0] ? h[0] : 1),
                     "wgmma m64n256k16 bf16, 2 warpgroups per SM, 4 per commit: MACs per clock64 cycle"};
    unsigned ln = 256;
    void *awl[] = {&out, &ln};
    launch_ms(fn("mb_wgmma_lat"), 1, 128, 0, awl, 1);
    CK(cuMemcpyDtoH(h, out, 16));
    double wl = (double)h[0] / ln - 64.0 * 256 * 16 / m[nm - 1].v;
    m[nm++] = (Meas){"tc_lat", "wgmma_lat", wl > 1 ? wl : 1, "one wgmma m64n256k16 + commit + wait_group 0 per iteration, minus its throughput time"};

    unsigned tn = 512, tspan = 4u << 20, tstride = 1u << 20; /* 4 MB: L2-resident, shared by the SMs */
    void *at[] = {&out, &src, &tn, &tspan, &tstride};
    launch_ms(fn("mb_tma_lat"), 1, 128, 0, at, 1);
    CK(cuMemcpyDtoH(h, out, 8));
    m[nm++] = (Meas){"tma_lat", "tma_lat", (double)h[0] / tn, "cp.async.bulk 8 KB from L2, one in flight (issue -> complete_tx, bar.sync included)"};
    tn = 4096;
    CUfunction tbw = fn("mb_tma_bw");
    CK(cuFuncSetAttribute(tbw, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, BULK_SMEM));
    launch_ms(tbw, 1, 128, BULK_SMEM, at, 1);
    CK(cuMemcpyDtoH(h, out, 8));
    m[nm++] = (Meas){"l2_sm_bw", "l2_sm_bw", (double)tn * BULK_BYTES / (double)h[0], "one SM, cp.async.bulk 16 KB x 8 in flight from a 4 MB (L2) buffer"};
    ms = launch_ms(tbw, (unsigned)sms, 128, BULK_SMEM, at, 3);
    m[nm++] = (Meas){"l2_bw", "l2_all_bw", (double)sms * tn * BULK_BYTES / (ms * 1e-3 * hz_tc), "every SM as l2_sm_bw, CUDA events (B per clock at clock_ghz)"};
    {   /* L2 -> SM bandwidth against the bytes an SM keeps in flight (2, 4, 8 copies of 16 KB; an attention kernel's
         * K/V ring holds up to 128 KB): is l2_sm_bw (8 copies) a latency bound? A probe, no table value; its 8-copy
         * point is l2_sm_bw and l2_bw, just measured */
        double one[3] = {0, 0, meas_value(m, nm, "l2_sm_bw", 0)}, all[3] = {0, 0, meas_value(m, nm, "l2_bw", 0) / sms};
        for (int k = 0; k < 2; k++) {
            unsigned sm_b;
            CUfunction f = bulk_ring(k, &sm_b);
            launch_ms(f, 1, 128, sm_b, at, 1);
            CK(cuMemcpyDtoH(h, out, 8));
            one[k] = (double)tn * BULK_BYTES / (double)h[0];
            all[k] = (double)tn * BULK_BYTES / (launch_ms(f, (unsigned)sms, 128, sm_b, at, 3) * 1e-3 * hz_tc);
        }
        printf("probe      l2_inflight  B/clk %.1f %.1f %.1f one SM, %.1f %.1f %.1f each of %d SMs  (cp.async.bulk 16 KB "
               "copies from a 4 MB (L2) buffer, 2 / 4 / 8 in flight an SM)\n", one[0], one[1], one[2], all[0], all[1],
               all[2], sms);
    }
    unsigned hspan = (unsigned)span, hstride = (unsigned)(span / (size_t)sms) & ~(BULK_BYTES - 1u),
             hn = hstride / BULK_BYTES;
    void *ah[] = {&out, &src, &hn, &hspan, &hstride};
    ms = launch_ms(tbw, (unsigned)sms, 128, BULK_SMEM, ah, 3);
    m[nm++] = (Meas){"hbm_gbs", "hbm_bw", (double)sms * hn * BULK_BYTES / (ms * 1e-3) / 1e9, "every SM streaming its own slice of a 512 MB buffer (past L2) once, cp.async.bulk; launch gap included"};
    {   /* DRAM bandwidth against the bytes each SM keeps in flight (2, 4, 8 copies of 16 KB), on every SM and on 128 (a
         * split-KV decode grid): a probe, no table value */
        printf("probe      hbm_inflight GB/s");
        for (int g = 0; g < 2; g++)
            for (int k = 0; k < 3; k++) {
                unsigned sm_b, nsm = g ? 128 : (unsigned)sms;
                CUfunction f = bulk_ring(k, &sm_b);
                double t = launch_ms(f, nsm, 128, sm_b, ah, 3);
                printf(" %.0f", (double)nsm * hn * BULK_BYTES / (t * 1e-3) / 1e9);
            }
        printf("  (%d SMs then 128, each keeping 32 / 64 / 128 KB of cp.async.bulk 16 KB copies in flight from its own "
               "slice of 512 MB)\n", sms);
        /* the same bytes through a tensor map: [rows, 128] bf16, 128-byte swizzle, 64 x 64 boxes, two a 16 KB block */
        CUtensorMap tm;
        cuuint64_t dims[2] = {128, span / 256}, strides[1] = {256};
        cuuint32_t box[2] = {64, 64}, es[2] = {1, 1};
        CK(cuTensorMapEncodeTiled(&tm, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)src, dims, strides, box, es,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
        static const char *const tn2[] = {"mb_tma_tile_s2", "mb_tma_tile_s4", "mb_tma_tile_s8"};
        printf("probe      hbm_tile     GB/s");
        for (int g = 0; g < 2; g++)
            for (int k = 0; k < 3; k++) {
                CUfunction f = fn(tn2[k]);
                unsigned nsm = g ? 128 : (unsigned)sms, rows = (unsigned)(span / 256 / nsm) & ~63u, tnb = rows / 64, h0 = 0;
                unsigned sm_b = (16384u << (k + 1)) + 1024;
                void *att[] = {&out, &tm, &tnb, &rows, &h0};
                CK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)sm_b));
                double t = launch_ms(f, nsm, 128, sm_b, att, 3);
                printf(" %.0f", (double)nsm * tnb * 16384 / (t * 1e-3) / 1e9);
            }
        printf("  (the same, 2 / 4 / 8 blocks of 16 KB in flight, each two 64 x 64 bf16 boxes through a tensor map with the "
               "128-byte swizzle, as the attention kernels load K and V)\n");
        /* two streams an SM, K and V: blocks alternate between the CTA's rows of each half of the tensor */
        printf("probe      hbm_tile_kv  GB/s");
        for (int g = 0; g < 2; g++)
            for (int k = 0; k < 3; k++) {
                CUfunction f = fn(tn2[k]);
                unsigned nsm = g ? 128 : (unsigned)sms, half = (unsigned)(span / 256 / 2);
                unsigned rows = (half / nsm) & ~63u, tnb = 2 * (rows / 64), sm_b = (16384u << (k + 1)) + 1024;
                void *att[] = {&out, &tm, &tnb, &rows, &half};
                double t = launch_ms(f, nsm, 128, sm_b, att, 3);
                printf(" %.0f", (double)nsm * tnb * 16384 / (t * 1e-3) / 1e9);
            }
        printf("  (as hbm_tile with two streams an SM, a K block then a V block from the other half of the tensor)\n");
    }

    unsigned mn = 10000;
    void *am[] = {&out, &mn};
    launch_ms(fn("mb_mbar_rt"), 1, 64, 0, am, 1);
    CK(cuMemcpyDtoH(h, out, 8));
    m[nm++] = (Meas){"mbar_wake", "mbar_rt", (double)h[0] / mn / 2, "half an mbarrier ping-pong round trip between two warps"};

    /* the cp.async gather: one SM (its clocks), then every SM (CUDA events); rows by a fixed pseudo-random table */
    unsigned ih[GATHER_IDX], seed = 12345;
    for (int i = 0; i < GATHER_IDX; i++) seed = seed * 1664525u + 1013904223u, ih[i] = (seed >> 8) % GATHER_SRC_ROWS;
    CUdeviceptr idx;
    CK(cuMemAlloc(&idx, sizeof ih));
    CK(cuMemcpyHtoD(idx, ih, sizeof ih));
    unsigned gn = 512;
    void *ag[] = {&out, &src, &idx, &gn};
    CUfunction gf = fn("mb_gather");
    CK(cuFuncSetAttribute(gf, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, GATHER_SMEM));
    launch_ms(gf, 1, 128, GATHER_SMEM, ag, 1);
    CK(cuMemcpyDtoH(h, out, 8));
    m[nm++] = (Meas){"cpa_sm_bw", "gather_sm_bw", (double)gn * GATHER_BLOCK / (double)h[0],
                     "one SM, sparse MLA producer pattern: 128 threads, 8 a row, 64 rows x 1152 B a block by an index table, cp.async.cg 16 B, 2 blocks in flight, 9.4 MB (L2)"};
    ms = launch_ms(gf, (unsigned)sms, 128, GATHER_SMEM, ag, 3);
    m[nm++] = (Meas){"cpa_bw", "gather_all_bw", (double)sms * gn * GATHER_BLOCK / (ms * 1e-3 * hz_tc), "every SM as gather_sm_bw, CUDA events (B per clock at clock_ghz)"};

    /* a 32-bit division (idiv_clk): 16 warp divisions a sub-partition a pass (8 chains x 2 warps) */
    unsigned dv = 7, dn2 = 64; /* the first divisors: a kernel parameter, unknown to ptxas */
    void *aiv[] = {&out, &dn2, &dv};
    launch_ms(fn("mb_idiv"), 1, 256, 0, aiv, 1);
    CK(cuMemcpyDtoH(h, out, 8));
    m[nm] = (Meas){"idiv_clk", "idiv", (double)h[0] / dn2 / 16, ""};
    snprintf(m[nm].how, sizeof m[nm].how, "div.u32 by a register, 8 chains a thread each its own divisor moving every pass, 256 "
             "threads, one SM: %.1f clocks a pass of 16 warp divisions a sub-partition (20 issue slots each)", (double)h[0] / dn2);
    nm++;
    for (int i = 0; i < nm; i++) printf("microbench %-12s %-10s %10.3f  (%s)\n", m[i].bench, m[i].key, m[i].v, m[i].how);
    /* probes: no table value; tests/sim/mb_replay.py prints what the model reads for the same PTX beside them */
    unsigned sn = 64;
    void *as[] = {&out, &sn};
    launch_ms(fn("mb_softcap"), 1, 256, 0, as, 1);
    CK(cuMemcpyDtoH(h, out, 8));
    printf("probe      softcap      clk/pass %10.1f  (the spliced soft-cap on %d independent scores per thread, 256 threads, one SM: "
           "clocks per pass; issue-bound would be ~%d, PTX-order latency-bound several times that)\n",
           (double)h[0] / sn, SOFTCAP_SCORES, SOFTCAP_SCORES * 21 * 8 / 4);
    /* the SS wgmma rate at narrow N (table keys tc_frac_nN: the fraction of tc_macs, the N 256 rate) */
    static const struct { const char *name, *key; int n; } wn[] = {
        {"mb_wgmma_n16", "tc_frac_n16", 16}, {"mb_wgmma_n32", "tc_frac_n32", 32}, {"mb_wgmma_n48", "tc_frac_n48", 48},
        {"mb_wgmma_n64", "tc_frac_n64", 64}, {"mb_wgmma_n80", "tc_frac_n80", 80}, {"mb_wgmma_n128", "tc_frac_n128", 128}};
    double tcm = tc_spin;
    for (size_t i = 0; i < sizeof wn / sizeof wn[0]; i++) {
        ms = launch_ms(fn(wn[i].name), (unsigned)sms, 256, 0, aw, 3);
        double r = (double)sms * 2 * wn_iters * 4 * 64.0 * wn[i].n * 16 / (ms * 1e-3 * hz * sms);
        m[nm] = (Meas){wn[i].key, wn[i].name + 3, r / tcm, ""};
        snprintf(m[nm++].how, sizeof m[0].how, "wgmma m64n%dk16 SS bf16 as wgmma_rate: %.1f MAC per spin clock of the N 256 rate's "
                 "%.1f (operands %.0f B/clk at it)", wn[i].n, r, tcm, r * (2048.0 + 32 * wn[i].n) / (1024.0 * wn[i].n));
        printf("microbench %-12s %-10s %10.3f  (%s)\n", m[nm - 1].bench, m[nm - 1].key, m[nm - 1].v, m[nm - 1].how);
    }
    /* st.global from registers (mb_st_frag / mb_st_line): clocks per warp instruction, one SM (its clock64) and
     * every SM (CUDA events); st_line = the one-SM fragment figure over its 8 lines */
    CUdeviceptr dst;
    CK(cuMemAlloc(&dst, (size_t)sms * ST_TILE));
    unsigned stn = 64;
    void *ast[] = {&out, &dst, &stn};
    double one[2], all[2], ins = (double)stn * 8 * ST_PER_THREAD;
    static const char *const stk[2] = {"mb_st_frag", "mb_st_line"};
    for (int k = 0; k < 2; k++) {
        launch_ms(fn(stk[k]), 1, 256, 0, ast, 1);
        CK(cuMemcpyDtoH(h, out, 8));
        one[k] = (double)h[0] / ins;
        all[k] = launch_ms(fn(stk[k]), (unsigned)sms, 256, 0, ast, 3) * 1e-3 * hz / ins;
        printf("probe      %-12s clk/ins  %10.2f  (st.global.b32, 256 threads, %s a warp instruction: one SM; every SM %.2f)\n",
               stk[k] + 3, one[k], k ? "1 line" : "8 lines x 16 B", all[k]);
    }
    m[nm] = (Meas){"st_line", "st_frag", one[0] / 8, ""}; /* its 128 bytes at st_bw would take a quarter of that */
    snprintf(m[nm++].how, sizeof m[0].how, "st.global.b32 in the accumulator fragment's pattern (8 lines x 16 B a warp "
             "instruction), one SM: %.2f clk an instruction / 8; 1 line: %.2f; every SM: %.2f / %.2f", one[0], one[1],
             all[0], all[1]);
    m[nm] = (Meas){"st_bw", "st_line", 128 / one[1], ""};
    snprintf(m[nm++].how, sizeof m[0].how, "st.global.b32, 128 contiguous bytes a warp instruction, one SM: 128 B / %.2f clk "
             "(every SM: %.2f)", one[1], all[1]);
    for (int i = nm - 2; i < nm; i++) printf("microbench %-12s %-10s %10.3f  (%s)\n", m[i].bench, m[i].key, m[i].v, m[i].how);
    /* the O-rescale probe (no table value; tests/sim/mb_replay.py prints the model's clocks for the same PTX): one
     * SM, 1 or 2 warpgroups, 4 wgmmas m64n256k16 + wait_group 0 an iteration, then (scale) 128 FMULs a thread */
    unsigned dn = 256;
    void *ad[] = {&out, &dn};
    for (unsigned thr = 128; thr <= 256; thr += 128) {
        double c[2];
        for (int k = 0; k < 2; k++) {
            launch_ms(fn(k ? "mb_wgmma_scale" : "mb_wgmma_drain"), 1, thr, 0, ad, 1);
            CK(cuMemcpyDtoH(h, out, 16));
            c[k] = (double)h[0] / dn;
        }
        printf("probe      wgmma_scale  clk/iter   %8.1f  (%u threads: 4 x m64n256k16 + wait_group 0 an iteration %.1f clk, "
               "then 128 FMULs on the accumulators: +%.1f)\n", c[1], thr, c[0], c[1] - c[0]);
    }
    {   /* a group's latency by width (a probe): one warpgroup, 4 x m64nNk16 + commit + wait_group 0 an iteration, as an
         * attention consumer waits for its S = QK^T; mb_replay.py prints the model's clocks for the same PTX */
        static const char *const gn[4] = {"mb_wgmma_drain_n16", "mb_wgmma_drain_n64", "mb_wgmma_drain_n128", "mb_wgmma_drain"};
        double c[4];
        for (int k = 0; k < 4; k++) {
            launch_ms(fn(gn[k]), 1, 128, 0, ad, 1);
            CK(cuMemcpyDtoH(h, out, 16));
            c[k] = (double)h[0] / dn;
        }
        printf("probe      wgmma_group  clk/iter   %.1f %.1f %.1f %.1f  (one warpgroup, 4 x m64nNk16 + commit + wait_group 0 an "
               "iteration at N 16, 64, 128, 256)\n", c[0], c[1], c[2], c[3]);
        /* the rate benchmark with one warpgroup an SM instead of two: does a warpgroup alone reach the pipe's peak? */
        double solo = launch_ms(fn("mb_wgmma_rate"), (unsigned)sms, 128, 0, aw, 3);
        printf("probe      wgmma_solo   MAC/clk    %.1f  (wgmma_rate with one warpgroup an SM: 4 x m64n256k16 a commit, "
               "wait_group 1; two warpgroups: tc_macs)\n", (double)sms * wn_iters * 4 * 64.0 * 256 * 16 / (solo * 1e-3 * hz * sms));
    }
    /* does FP32 work on the sub-partitions slow the other warpgroup's wgmmas? warpgroup 0's clocks an iteration of
     * 4 x m64n256k16 with warpgroup 1 gone, then beside 1, 2, 4 and 16 independent FMUL chains a warp (at the FMUL's
     * latency of 4: about 0.25, 0.5, 1 and 1 FMUL a clock on each sub-partition; the rate each reached is printed).
     * A probe (H200 run 9: 2.8x at 16 chains, none at 1); not a table value yet */
    {
        static const struct { const char *name; int chains; } bk[] = {{"mb_wgmma_beside_chain", 1}, {"mb_wgmma_beside_c2", 2},
                                                                      {"mb_wgmma_beside_c4", 4}, {"mb_wgmma_beside_fmul", 16}};
        launch_ms(fn("mb_wgmma_beside_idle"), 1, 256, 0, ad, 1);
        CK(cuMemcpyDtoH(h, out, 16));
        double alone = (double)h[0] / dn;
        for (size_t k = 0; k < sizeof bk / sizeof bk[0]; k++) {
            launch_ms(fn(bk[k].name), 1, 256, 0, ad, 1);
            CK(cuMemcpyDtoH(h, out, 16));
            printf("probe      wgmma_beside clk/iter   %8.1f  (one warpgroup's 4 x m64n256k16, wait_group 1: %.1f clk alone, "
                   "%.1f = %.3fx beside %2d FMUL chains a warp of the other warpgroup, %.3f FMULs a clock a sub-partition)\n",
                   (double)h[0] / dn, alone, (double)h[0] / dn, (double)h[0] / dn / alone, bk[k].chains,
                   8.0 * dn * 128 / (double)h[1]);
        }
    }
    {   /* two warps always ready on each sub-partition: when each ends (a probe; the model's replay: mb_replay.py) */
        static const char *const shn[] = {"mb_share_fma", "mb_share_mufu"};
        for (int k = 0; k < 2; k++) {
            unsigned sn2 = k ? 256 : 2048;
            void *as2[] = {&out, &sn2};
            launch_ms(fn(shn[k]), 1, 256, 0, as2, 1);
            CK(cuMemcpyDtoH(h, out, 8 * 16));
            unsigned long long t0 = ~0ull;
            for (int w = 0; w < 8; w++) if (h[2 * w] < t0) t0 = h[2 * w];
            printf("probe      %-13s clk", shn[k] + 3);
            for (int w = 0; w < 8; w++) printf(" %llu", h[2 * w + 1] - t0);
            printf("  (warps 0-7's ends after the first start, %u iterations of 8 independent %s; warps w and w + 4 share "
                   "a sub-partition)\n", sn2, k ? "ex2" : "FFMA");
        }
    }
    {   /* one online-softmax block, one and two warpgroups (a probe; the model's replay: mb_replay.py) */
        unsigned smn = 64;
        void *asm_[] = {&out, &smn};
        double c[2];
        for (int k = 0; k < 2; k++) {
            launch_ms(fn("mb_softmax"), 1, k ? 256 : 128, 0, asm_, 1);
            CK(cuMemcpyDtoH(h, out, 8));
            c[k] = (double)h[0] / smn;
        }
        printf("probe      softmax      clk/pass %7.1f %7.1f  (an m64n128 S fragment's online softmax, 64 scores a thread: "
               "one warpgroup, two)\n", c[0], c[1]);
        launch_ms(fn("mb_softmax_beside"), 1, 256, 0, asm_, 1);
        CK(cuMemcpyDtoH(h, out, 16));
        double besd = (double)h[1] / (smn / 2);
        printf("probe      softmax_besd clk      %7.1f %7.1f  (warpgroup 1's softmax a pass beside warpgroup 0's wgmma loop, "
               "%u passes; warpgroup 0's 4 x m64n256k16 an iteration beside it, %u iterations)\n",
               besd, (double)h[0] / smn, smn / 2, smn);
        /* tc_beside: the softmax's speed beside the wgmmas over its speed alone (one warpgroup each time) */
        m[nm] = (Meas){"tc_beside", "softmax_beside", besd > 0 ? c[0] / besd : 1, ""};
        snprintf(m[nm++].how, sizeof m[0].how, "one warpgroup's online-softmax pass (mb_softmax) %.1f clk alone, %.1f beside "
                 "the other warpgroup's wgmma loop, which ran at %.1f clk an iteration (alone: the wgmma_beside line's)",
                 c[0], besd, (double)h[0] / smn);
        printf("microbench %-12s %-10s %10.3f  (%s)\n", m[nm - 1].bench, m[nm - 1].key, m[nm - 1].v, m[nm - 1].how);
    }
    {   /* a QK-sized wgmma group issued while the other warpgroup's group runs: the issue's clocks (a probe) */
        unsigned wi = 32;
        void *awi[] = {&out, &wi};
        launch_ms(fn("mb_wgmma_issue"), 1, 256, 0, awi, 1);
        CK(cuMemcpyDtoH(h, out, 16));
        printf("probe      wgmma_issue  clk      %7.1f %7.1f  (warpgroup 1's 8 x m64n128k16 issued while warpgroup 0's 8 x "
               "m64n256k16 run: clocks to issue them, to their completion)\n", (double)h[0] / wi, (double)h[1] / wi);
    }
    {   /* two warpgroups' groups issued together: when each sees its own done (a probe) */
        launch_ms(fn("mb_wgmma_pair"), 1, 256, 0, ad, 1);
        CK(cuMemcpyDtoH(h, out, 16));
        printf("probe      wgmma_pair   clk/round  %7.1f %7.1f  (two warpgroups, 4 x m64n256k16 each at once, wait_group 0: "
               "warpgroup 0's and 1's clocks to their own completion; first come first served would read ~1x and ~2x the "
               "4 wgmmas' time, shared ~2x both)\n", (double)h[0] / dn, (double)h[1] / dn);
    }
    {   /* PDL and L2 prefetch (pf_bw, pf_gbs, pf_head_us). A previous grid (mb_pdl_prev: triggers its dependents at
         * once, as the split-KV combine does, then spins T us on every SM) and a dependent grid (mb_pdl_dep, launched with
         * programmatic stream serialization, one CTA an SM): each CTA prefetches the first npf of its slice's nblk 16 KB
         * copies into L2 (cp.async.bulk.prefetch.L2), waits for the previous grid (griddepcontrol.wait), then streams its
         * slice through the 8-slot ring (as mb_tma_bw). The slices lie past a 192 MB region read before each pair, so L2
         * holds none of them. Per row, means of the middle 15 of 21 (globaltimer ticks in 0.256 us on an H200: the spread of 21
         * repetitions dithers it): the pair's time (CUDA events), B's first CTA start after A's, the
         * wait's release after A's end, B's end after A's end, with the same for pdl=0 (a plain launch: no overlap) */
        CUstream ps;
        CUevent pa, pb;
        CK(cuStreamCreate(&ps, CU_STREAM_NON_BLOCKING));
        CK(cuEventCreate(&pa, 0));
        CK(cuEventCreate(&pb, 0));
        CUfunction fpv = fn("mb_pdl_prev"), fdp = fn("mb_pdl_dep");
        CK(cuFuncSetAttribute(fdp, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, BULK_SMEM));
        CUdeviceptr sa = out, sb = out + 65536, dsrc = src + ((size_t)256 << 20);
        unsigned fspan = 192u << 20, fstride = (fspan / (unsigned)sms) & ~(BULK_BYTES - 1u), fnb = fstride / BULK_BYTES;
        unsigned dspan = 0x7fffc000u, dstride = 64u * BULK_BYTES;
        void *af[] = {&out, &src, &fnb, &fspan, &fstride};
        /* carve: A's preferred shared-memory carveout (0: the driver's choice for a kernel without shared memory, which
         * leaves no room for B's 128 KB ring beside A's CTA, so B cannot start before A ends; 100: all of it shared) */
        static const struct { unsigned t_ns, nblk, npf; int pdl, carve; } pc[] = {
            {3000, 36, 0, 1, 0}, {3000, 36, 4, 1, 0}, {3000, 36, 8, 1, 0}, {3000, 36, 16, 1, 0}, {3000, 36, 32, 1, 0},
            {3000, 36, 36, 1, 0}, {20000, 12, 0, 1, 0}, {20000, 12, 12, 1, 0}, {20000, 24, 0, 1, 0}, {20000, 24, 24, 1, 0},
            {3000, 36, 0, 0, 0}, {3000, 36, 8, 0, 0}, {3000, 36, 32, 0, 0}, {3000, 36, 36, 0, 0},
            {3000, 36, 0, 1, 100}, {3000, 36, 4, 1, 100}, {3000, 36, 8, 1, 100}, {3000, 36, 16, 1, 100},
            {3000, 36, 32, 1, 100}, {3000, 36, 36, 1, 100}, {20000, 36, 0, 1, 100}, {20000, 36, 8, 1, 100},
            {20000, 36, 16, 1, 100}, {20000, 36, 36, 1, 100}, {20000, 12, 0, 1, 100}, {20000, 12, 12, 1, 100},
            {20000, 24, 0, 1, 100}, {20000, 24, 24, 1, 100}};
        double rel[sizeof pc / sizeof pc[0]], end[sizeof pc / sizeof pc[0]]; /* wait release, B's end: after A's end, us */
        for (size_t k = 0; k < sizeof pc / sizeof pc[0]; k++) {
            CK(cuFuncSetAttribute(fpv, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, pc[k].carve ? pc[k].carve : -1));
            enum { REPS = 21, CUT = 3 };
            double v[REPS][4];
            unsigned tns = pc[k].t_ns, nb = pc[k].nblk, npf = pc[k].npf;
            void *ap[] = {&sa, &tns};
            void *ad2[] = {&sb, &dsrc, &nb, &dspan, &dstride, &npf};
            for (int r = 0; r < REPS; r++) {
                CK(cuLaunchKernel(tbw, (unsigned)sms, 1, 1, 128, 1, 1, BULK_SMEM, ps, af, NULL));
                CK(cuEventRecord(pa, ps));
                CK(cuLaunchKernel(fpv, (unsigned)sms, 1, 1, 128, 1, 1, 0, ps, ap, NULL));
                CUlaunchAttribute at;
                memset(&at, 0, sizeof at);
                at.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
                at.value.programmaticStreamSerializationAllowed = 1;
                CUlaunchConfig lc;
                memset(&lc, 0, sizeof lc);
                lc.gridDimX = (unsigned)sms, lc.gridDimY = lc.gridDimZ = 1, lc.blockDimX = 128, lc.blockDimY = lc.blockDimZ = 1;
                lc.sharedMemBytes = BULK_SMEM, lc.hStream = ps, lc.attrs = &at, lc.numAttrs = pc[k].pdl ? 1 : 0;
                CK(cuLaunchKernelEx(&lc, fdp, ad2, NULL));
                CK(cuEventRecord(pb, ps));
                CK(cuEventSynchronize(pb));
                float pms;
                CK(cuEventElapsedTime(&pms, pa, pb));
                unsigned long long A[2 * 1024], B[4 * 1024];
                CK(cuMemcpyDtoH(A, sa, (size_t)sms * 16));
                CK(cuMemcpyDtoH(B, sb, (size_t)sms * 32));
                unsigned long long a0 = ~0ull, a1 = 0, b0 = ~0ull, bw = ~0ull, b1 = 0;
                for (int i = 0; i < sms; i++) {
                    if (A[2 * i] < a0) a0 = A[2 * i];
                    if (A[2 * i + 1] > a1) a1 = A[2 * i + 1];
                    if (B[4 * i] < b0) b0 = B[4 * i];
                    if (B[4 * i + 1] < bw) bw = B[4 * i + 1];
                    if (B[4 * i + 2] > b1) b1 = B[4 * i + 2];
                }
                v[r][0] = pms * 1e3, v[r][1] = ((double)b0 - (double)a0) / 1e3, v[r][2] = ((double)bw - (double)a1) / 1e3;
                v[r][3] = ((double)b1 - (double)a1) / 1e3;
            }
            double med[4];
            for (int c = 0; c < 4; c++) {
                double x[REPS];
                for (int r = 0; r < REPS; r++) x[r] = v[r][c];
                for (int i = 0; i < REPS; i++)
                    for (int j = i + 1; j < REPS; j++)
                        if (x[j] < x[i]) { double t = x[i]; x[i] = x[j]; x[j] = t; }
                med[c] = 0;
                for (int i = CUT; i < REPS - CUT; i++) med[c] += x[i] / (REPS - 2 * CUT);
            }
            rel[k] = med[2], end[k] = med[3];
            printf("probe      pdl          T %4.1f us  slice %2u x 16 KB  prefetch %2u  pdl %d carve %3d: pair %7.2f us, B start %+7.2f us "
                   "after A's, wait release %+6.2f after A's end, B end %+7.2f after A's end (%.1f MB streamed, %.1f MB prefetched)\n",
                   tns / 1e3, nb, npf, pc[k].pdl, pc[k].carve, med[0], med[1], med[2], med[3], (double)sms * nb * BULK_BYTES / 1e6,
                   (double)sms * npf * BULK_BYTES / 1e6);
        }
        /* pf_bw: the thread that issues the prefetches reaches its wait later by their bytes at the engine's prefetch
         * rate once its queue is full: the slope between 16 and 36 prefetches (rows 3 and 5: no overlap, T 3 us) */
        m[nm] = (Meas){"pf_bw", "pdl_prefetch", 20.0 * BULK_BYTES / ((rel[5] - rel[3]) * 1e-6 * hz), ""};
        snprintf(m[nm++].how, sizeof m[0].how, "cp.async.bulk.prefetch.L2 16 KB, every SM: the issuing thread's wait "
                 "release %.2f us after 16, %.2f after 36 (B/clk of the slope)", rel[3], rel[5]);
        /* pf_gbs, pf_head_us: B's end after A's end against the prefetched MB P, over the rows without overlap that
         * prefetch (each against its slice's row with none: rows 1-5 against 0, 7 against 6, 9 against 8), one least-
         * squares line a P - g: the prefetched bytes' DRAM time is 1 / hbm_gbs + a a MB, g the head start */
        static const int row[7][2] = {{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {7, 6}, {9, 8}};
        double sx = 0, sy = 0, sxx = 0, sxy = 0, hbm = meas_value(m, nm, "hbm_gbs", 1);
        for (int i = 0; i < 7; i++) {
            double x = (double)sms * pc[row[i][0]].npf * BULK_BYTES / 1e6, y = end[row[i][0]] - end[row[i][1]];
            sx += x, sy += y, sxx += x * x, sxy += x * y;
        }
        double a = (7 * sxy - sx * sy) / (7 * sxx - sx * sx), g = (a * sx - sy) / 7;
        m[nm] = (Meas){"pf_gbs", "pdl_prefetch", 1e3 / (a + 1e3 / hbm), ""};
        snprintf(m[nm++].how, sizeof m[0].how, "prefetching P of a 26-78 MB stream into L2 before loading it ended %.4f us "
                 "a prefetched MB later (least squares, 7 rows, P 8.7-77.9 MB): its DRAM time at 1 / (%.4f + 1 / hbm_gbs)", a, a);
        m[nm] = (Meas){"pf_head_us", "pdl_prefetch", g, ""};
        snprintf(m[nm++].how, sizeof m[0].how, "the same line's intercept: prefetches issued before griddepcontrol.wait "
                 "start before its release (%.2f us after A's end) and before the first loads' DRAM latency", rel[0]);
        /* the GPU's gap between two kernels of a stream: the dependent's wait released after the previous grid's end
         * (row 10: a plain launch, whose wait passes at once; row 0: a programmatic dependent), neither prefetching */
        m[nm] = (Meas){"launch_us", "pdl_gap", rel[10], ""};
        snprintf(m[nm++].how, sizeof m[0].how, "a plainly launched kernel's first global access %.2f us after the previous "
                 "grid's end (the PDL probe's pdl 0 row, no prefetch)", rel[10]);
        m[nm] = (Meas){"gap_pdl_us", "pdl_gap", rel[0], ""};
        snprintf(m[nm++].how, sizeof m[0].how, "a programmatic dependent's griddepcontrol.wait released %.2f us after the "
                 "previous grid's end (the PDL probe's pdl 1 row, no prefetch; it started before)", rel[0]);
        for (int i = nm - 5; i < nm; i++) printf("microbench %-12s %-10s %10.3f  (%s)\n", m[i].bench, m[i].key, m[i].v, m[i].how);
    }
    /* the table again, measured keys replaced */
    FILE *in = fopen(argv[1], "r"), *o = fopen(argv[2], "w");
    if (!in || !o) { fprintf(stderr, "microbench: cannot read %s or write %s\n", argv[1], argv[2]); return 1; }
    char line[1024], dname[256] = "";
    CK(cuDeviceGetName(dname, sizeof dname, dev));
    fprintf(o, "# measured by tests/gpu/microbench.c on %s (%d SMs); other values as in %s\n", dname, sms, argv[1]);
    /* the template's validation is not this table's: microbench.sh's timing-validation.txt of the same run is */
    fprintf(o, "# validation: none stated yet (tests/gpu/microbench.sh writes this run's to timing-validation.txt)\n");
    while (fgets(line, sizeof line, in)) {
        char key[64];
        int done = 0;
        if (!strncmp(line, "# validation:", 13)) continue;
        if (line[0] != '#' && sscanf(line, "%63s", key) == 1)
            for (int i = 0; i < nm; i++)
                if (!strcmp(key, m[i].key)) {
                    fprintf(o, "%-13s %-6.4g measured  microbench %s on %s: %s\n", key, m[i].v, m[i].bench, dname, m[i].how);
                    done = 1;
                    break;
                }
        if (!done) fputs(line, o);
    }
    fclose(in);
    fclose(o);
    printf("microbench: %d values measured, table %s\n", nm, argv[2]);
    return 0;
#endif
}
