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

/* wgmma m64n256k16 bf16 -> f32, A and B from shared memory (zeros: the values do not matter). 128 or
 * 256 threads (1 or 2 warpgroups). lat=0: n iterations of 4 wgmmas, commit, wait_group 1 (rate);
 * lat=1: n iterations of one wgmma, commit, wait_group 0, the mean clocks per iteration in out. */
static void k_wgmma_n(const char *name, int lat, int nn)
{
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
    P("  mov.u64 %%rd10, %%clock64;\n  mov.u32 %%r3, 0;\nLOOP:\n  wgmma.fence.sync.aligned;\n");
    int per = lat ? 1 : 4;
    for (int k = 0; k < per; k++) {
        P("  wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16 {", nn);
        for (int i = 0; i < acc; i++) P("%s%%f%d", i ? ", " : "", i);
        P("}, %%rd4, %%rd5, 1, 1, 1, 0, 0;\n");
    }
    P("  wgmma.commit_group.sync.aligned;\n  wgmma.wait_group.sync.aligned %d;\n", lat ? 0 : 1);
    P("  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n");
    P("  wgmma.wait_group.sync.aligned 0;\n  mov.u64 %%rd11, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n");
    for (int i = 1; i < acc; i++) P("  add.f32 %%f0, %%f0, %%f%d;\n", i);
    P("  mov.u32 %%r8, %%ctaid.x;\n  mov.u32 %%r10, %%ntid.x;\n  mad.lo.u32 %%r9, %%r8, %%r10, %%r2;\n  mul.wide.u32 %%rd2, %%r9, 16;\n  add.u64 %%rd2, %%rd1, %%rd2;\n");
    P("  st.global.u64 [%%rd2], %%rd11;\n  st.global.f32 [%%rd2+8], %%f0;\n  ret;\n}\n");
}

/* bulk copies (the TMA engine, no tensor map) from src + cta * stride (wrapping in `span` bytes) into a ring of
 * shared memory, each slot on its mbarrier; one elected thread issues, all wait.
 * lat=1: 8 KB copies, one in flight (issue -> complete_tx clocks, mean in out): the latency.
 * lat=0: BULK_SLOTS copies of BULK_BYTES in flight (dynamic shared memory): the bandwidth an SM can pull, with as
 * many bytes in flight as an attention kernel's K/V ring holds (2 stages x 2 x 32-44 KB); 4 x 8 KB in flight
 * measured the latency's bound instead (14.6 B/clk on the H200, below what the d128 kernels were timed pulling).
 * out[cta] = clocks. */
enum { BULK_SLOTS = 8, BULK_BYTES = 16384, BULK_SMEM = BULK_SLOTS * BULK_BYTES };
static void k_bulk(int lat)
{
    int slots = lat ? 4 : BULK_SLOTS, bytes = lat ? 8192 : BULK_BYTES, lg_s = lat ? 2 : 3, lg_b = lat ? 13 : 14;
    head_with(lat ? "" : ".extern .shared .align 128 .b8 dring[];\n", lat ? "mb_tma_lat" : "mb_tma_bw", ".param .u64 out, .param .u64 src, .param .u32 n, .param .u32 span, .param .u32 stride");
    if (lat) P("  .shared .align 128 .b8 ring[32768];\n");
    P("  .shared .align 8 .b64 bars[%d];\n", slots);
    P("  ld.param.u64 %%rd1, [out];\n  ld.param.u64 %%rd6, [src];\n  ld.param.u32 %%r1, [n];\n  ld.param.u32 %%r12, [span];\n  ld.param.u32 %%r20, [stride];\n");
    P("  mov.u32 %%r2, %%tid.x;\n  mov.u32 %%r4, %s;\n  mov.u32 %%r5, bars;\n  mov.u32 %%r8, %%ctaid.x;\n", lat ? "ring" : "dring");
    P("  setp.eq.u32 %%p2, %%r2, 0;\n");
    for (int i = 0; i < slots; i++) P("  @%%p2 mbarrier.init.shared::cta.b64 [%%r5+%d], 1;\n", 8 * i);
    P("  fence.mbarrier_init.release.cluster;\n  bar.sync 0;\n");
    /* offset into src: each CTA starts at cta * stride */
    P("  mul.wide.u32 %%rd7, %%r8, %%r20;\n  mov.u64 %%rd10, %%clock64;\n  mov.u32 %%r3, 0;\n  mov.u32 %%r13, 0;\n");
    P("LOOP:\n  and.b32 %%r9, %%r3, %d;\n  shl.b32 %%r10, %%r9, %d;\n  add.u32 %%r10, %%r10, %%r4;\n  shl.b32 %%r11, %%r9, 3;\n  add.u32 %%r11, %%r11, %%r5;\n", slots - 1, lg_b);
    /* parity of this slot's use: (i / slots) & 1 */
    P("  shr.u32 %%r14, %%r3, %d;\n  and.b32 %%r14, %%r14, 1;\n", lg_s);
    P("  cvt.u64.u32 %%rd8, %%r13;\n  add.u64 %%rd8, %%rd8, %%rd7;\n  cvt.u64.u32 %%rd12, %%r12;\n  rem.u64 %%rd8, %%rd8, %%rd12;\n  add.u64 %%rd8, %%rd8, %%rd6;\n");
    P("  @%%p2 mbarrier.arrive.expect_tx.shared::cta.b64 %%rd9, [%%r11], %d;\n", bytes);
    P("  @%%p2 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%%r10], [%%rd8], %d, [%%r11];\n", bytes);
    if (lat) {
        P("WAIT:\n  mbarrier.try_wait.parity.shared::cta.b64 %%p1, [%%r11], %%r14;\n  @!%%p1 bra WAIT;\n");
    } else { /* wait for the copy issued slots - 1 before (slots in flight) */
        P("  setp.lt.u32 %%p3, %%r3, %d;\n  @%%p3 bra SKIP;\n  add.u32 %%r15, %%r3, 1;\n  and.b32 %%r15, %%r15, %d;\n  shl.b32 %%r16, %%r15, 3;\n  add.u32 %%r16, %%r16, %%r5;\n", slots - 1, slots - 1);
        P("  sub.u32 %%r17, %%r3, %d;\n  shr.u32 %%r17, %%r17, %d;\n  and.b32 %%r17, %%r17, 1;\n", slots - 1, lg_s);
        P("WAIT:\n  mbarrier.try_wait.parity.shared::cta.b64 %%p1, [%%r16], %%r17;\n  @!%%p1 bra WAIT;\nSKIP:\n");
    }
    P("  bar.sync 0;\n  add.u32 %%r13, %%r13, %d;\n  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n", bytes);
    if (!lat) { /* drain the last slots - 1 */
        for (int d = slots - 1; d >= 1; d--) {
            P("  sub.u32 %%r18, %%r1, %d;\n  and.b32 %%r19, %%r18, %d;\n  shl.b32 %%r19, %%r19, 3;\n  add.u32 %%r19, %%r19, %%r5;\n  shr.u32 %%r18, %%r18, %d;\n  and.b32 %%r18, %%r18, 1;\n", d, slots - 1, lg_s);
            P("D%d:\n  mbarrier.try_wait.parity.shared::cta.b64 %%p1, [%%r19], %%r18;\n  @!%%p1 bra D%d;\n", d, d);
        }
    }
    P("  mov.u64 %%rd11, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n");
    P("  @!%%p2 bra DONE;\n  mul.wide.u32 %%rd2, %%r8, 8;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  st.global.u64 [%%rd2], %%rd11;\nDONE:\n  ret;\n}\n");
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
    for (int k = 0; k < GATHER_ROWS / GATHER_GROUPS; k++) {
        /* the index of row g + 16 k of block j (each CTA its own stretch of the table) */
        P("  mad.lo.u32 %%r13, %%r3, %d, %%r10;\n  add.u32 %%r13, %%r13, %d;\n  and.b32 %%r13, %%r13, %d;\n", GATHER_ROWS,
          GATHER_GROUPS * k, GATHER_IDX - 1);
        P("  mul.wide.u32 %%rd2, %%r13, 4;\n  add.u64 %%rd2, %%rd7, %%rd2;\n  ld.global.nc.u32 %%r14, [%%rd2];\n");
        P("  mul.wide.u32 %%rd3, %%r14, %d;\n  cvt.u64.u32 %%rd4, %%r6;\n  add.u64 %%rd3, %%rd3, %%rd4;\n  add.u64 %%rd3, %%rd6, %%rd3;\n",
          GATHER_ROW);
        for (int c = 0; c < GATHER_ROW / 128; c++)
            P("  cp.async.cg.shared.global [%%r12+%d], [%%rd3+%d], 16;\n", GATHER_CHUNK * c + GATHER_GROUPS * 128 * k, 128 * c);
    }
    P("  cp.async.commit_group;\n  cp.async.wait_group 1;\n");
    P("  add.u32 %%r3, %%r3, 1;\n  setp.lt.u32 %%p1, %%r3, %%r1;\n  @%%p1 bra LOOP;\n  cp.async.wait_group 0;\n  bar.sync 0;\n");
    P("  mov.u64 %%rd11, %%clock64;\n  sub.u64 %%rd11, %%rd11, %%rd10;\n");
    P("  @!%%p2 bra DONE;\n  mul.wide.u32 %%rd2, %%r8, 8;\n  add.u64 %%rd2, %%rd1, %%rd2;\n  st.global.u64 [%%rd2], %%rd11;\nDONE:\n  ret;\n}\n");
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
static void g_wr(void) { k_wgmma_n("mb_wgmma_rate", 0, 256); }
static void g_wl(void) { k_wgmma_n("mb_wgmma_lat", 1, 256); }
/* the SS rate at the narrow N of a QK wgmma (N = bn: 32..128 when shared memory is short), as a fraction of the
 * N 256 rate (tc_frac_nN; the model interpolates in N): narrow tiles fetch more operand bytes per MAC */
static void g_w16(void) { k_wgmma_n("mb_wgmma_n16", 0, 16); }
static void g_w32(void) { k_wgmma_n("mb_wgmma_n32", 0, 32); }
static void g_w48(void) { k_wgmma_n("mb_wgmma_n48", 0, 48); }
static void g_w64(void) { k_wgmma_n("mb_wgmma_n64", 0, 64); }
static void g_w80(void) { k_wgmma_n("mb_wgmma_n80", 0, 80); }
static void g_w128(void) { k_wgmma_n("mb_wgmma_n128", 0, 128); }
static void g_tb(void) { k_bulk(0); }
static void g_tl(void) { k_bulk(1); }
static const struct { const char *name; Gen gen; } kernels[] = {
    {"mb_clock", k_clock}, {"mb_empty", k_empty}, {"mb_mufu_ex2", g_ex2}, {"mb_cvt_bf16x2", g_cvt},
    {"mb_smem", k_smem}, {"mb_wgmma_rate", g_wr}, {"mb_wgmma_lat", g_wl}, {"mb_tma_bw", g_tb},
    {"mb_tma_lat", g_tl}, {"mb_mbar_rt", k_mbar}, {"mb_gather", k_gather}, {"mb_softcap", k_softcap},
    {"mb_wgmma_n16", g_w16}, {"mb_wgmma_n32", g_w32}, {"mb_wgmma_n48", g_w48}, {"mb_wgmma_n64", g_w64},
    {"mb_wgmma_n80", g_w80}, {"mb_wgmma_n128", g_w128},
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
    Meas m[32];
    int nm = 0;
    unsigned long long h[4096];

    /* clock: one CTA spinning ~20 ms while 132 CTAs of wgmma keep the tensor cores busy is not possible in
     * one kernel; the clock under a plain spin is what the others are converted with (logged) */
    unsigned n = 2000000;
    void *ac[] = {&out, &n};
    launch_ms(fn("mb_clock"), (unsigned)sms, 128, 0, ac, 1);
    CK(cuMemcpyDtoH(h, out, 16));
    double ghz = (double)h[0] / (double)h[1];
    m[nm++] = (Meas){"clock_ghz", "clock", ghz, ""};
    snprintf(m[nm - 1].how, sizeof m[0].how, "clock64 / globaltimer over a spin on all SMs");
    double hz = ghz * 1e9;

    void *ae[] = {&out};
    double lus = 1000.0 * launch_ms(fn("mb_empty"), 1, 32, 0, ae, 200);
    m[nm++] = (Meas){"launch_us", "launch", lus, "mean of 200 back-to-back empty launches, CUDA events"};

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
    m[nm++] = (Meas){"tc_macs", "wgmma_rate", macs / (ms * 1e-3 * hz * sms), "wgmma m64n256k16 bf16, 2 warpgroups per SM, 4 per commit"};
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
    m[nm++] = (Meas){"l2_bw", "l2_all_bw", (double)sms * tn * BULK_BYTES / (ms * 1e-3 * hz), "every SM as l2_sm_bw, CUDA events"};
    unsigned hspan = (unsigned)span, hstride = (unsigned)(span / (size_t)sms) & ~(BULK_BYTES - 1u),
             hn = hstride / BULK_BYTES;
    void *ah[] = {&out, &src, &hn, &hspan, &hstride};
    ms = launch_ms(tbw, (unsigned)sms, 128, BULK_SMEM, ah, 3);
    m[nm++] = (Meas){"hbm_gbs", "hbm_bw", (double)sms * hn * BULK_BYTES / (ms * 1e-3) / 1e9, "every SM streaming its own slice of a 512 MB buffer (past L2) once, cp.async.bulk; launch gap included"};

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
    m[nm++] = (Meas){"cpa_bw", "gather_all_bw", (double)sms * gn * GATHER_BLOCK / (ms * 1e-3 * hz), "every SM as gather_sm_bw, CUDA events"};

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
    double tcm = 1;
    for (int i = 0; i < nm; i++)
        if (!strcmp(m[i].key, "tc_macs")) tcm = m[i].v;
    for (size_t i = 0; i < sizeof wn / sizeof wn[0]; i++) {
        ms = launch_ms(fn(wn[i].name), (unsigned)sms, 256, 0, aw, 3);
        double r = (double)sms * 2 * wn_iters * 4 * 64.0 * wn[i].n * 16 / (ms * 1e-3 * hz * sms);
        m[nm] = (Meas){wn[i].key, wn[i].name + 3, r / tcm, ""};
        snprintf(m[nm++].how, sizeof m[0].how, "wgmma m64n%dk16 SS bf16 as wgmma_rate: %.1f MAC/clk of the N 256 rate's "
                 "%.1f (operands %.0f B/clk at it)", wn[i].n, r, tcm, r * (2048.0 + 32 * wn[i].n) / (1024.0 * wn[i].n));
        printf("microbench %-12s %-10s %10.3f  (%s)\n", m[nm - 1].bench, m[nm - 1].key, m[nm - 1].v, m[nm - 1].how);
    }
    /* the table again, measured keys replaced */
    FILE *in = fopen(argv[1], "r"), *o = fopen(argv[2], "w");
    if (!in || !o) { fprintf(stderr, "microbench: cannot read %s or write %s\n", argv[1], argv[2]); return 1; }
    char line[1024], dname[256] = "";
    CK(cuDeviceGetName(dname, sizeof dname, dev));
    fprintf(o, "# measured by tests/gpu/microbench.c on %s (%d SMs); other values as in %s\n", dname, sms, argv[1]);
    while (fgets(line, sizeof line, in)) {
        char key[64];
        int done = 0;
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
