/* timing.h - the simulator's timing mode (FA4SIM_TIMING=h100|b200|FILE.tbl).
 *
 * The functional simulator (sim.c) decides what every instruction and async unit does; the timing
 * mode decides when. Instead of the seeded random scheduler, a cluster then runs under an
 * event-driven clock: per SM four sub-partition schedulers each issue at most one warp instruction
 * per clock; every instruction goes to a pipe (FMA, ALU, MUFU, conversion, shuffle, shared memory
 * with bank conflicts, global memory, sync, tensor core) with a throughput and a latency; a
 * per-warp register scoreboard holds an instruction until its operands are ready; async units
 * (wgmma, tcgen05.mma, TMA, bulk copies, cp.async) complete at the time their unit's throughput,
 * the SM's share of L2 bandwidth and their latency give; a thread woken by an mbarrier, a named
 * barrier or a cluster barrier resumes after that barrier's wake-up latency. Every number comes
 * from a table (tests/sim/gpus/<gpu>.tbl) with one source per value: nothing is fitted to the
 * kernels it predicts. See tests/sim/TIMING.md for what is and is not modelled.
 *
 * A launch in timing mode simulates a window of clusters (sim_run picks them: see
 * timing_pick_clusters), then scales the window to the whole grid by waves and tails.
 */
#ifndef FA4SIM_TIMING_H
#define FA4SIM_TIMING_H

#include <stddef.h>
#include <stdint.h>

/* The table's keys: one enum entry and one name each (timing.c, key_names). */
typedef enum {
    K_CLOCK_GHZ,     /* SM clock under load */
    K_SMS,           /* SMs */
    K_SMEM_SM_KIB,   /* shared memory per SM (KiB) usable by CTAs */
    K_REGS_SM,       /* 32-bit registers per SM */
    K_MAX_WARPS_SM,  /* resident warps per SM */
    K_MAX_CTAS_SM,   /* resident CTAs per SM */
    K_FMA_LANES,     /* fp32 add/mul/fma results per clock per SM (and packed half2: one instruction) */
    K_ALU_LANES,     /* integer/logic/compare/min/max/select results per clock per SM */
    K_IMAD_LANES,    /* integer multiply(-add) results per clock per SM */
    K_MUFU_LANES,    /* ex2/lg2/rcp/rsqrt/sqrt/tanh results per clock per SM */
    K_CVT_LANES,     /* float conversions (f32 -> bf16/f16/e4m3 packs, int <-> float) per clock per SM */
    K_SHFL_LANES,    /* shfl/redux results per clock per SM */
    K_FMA_LAT,       /* dependent-issue latency, clocks */
    K_ALU_LAT,
    K_MUFU_LAT,
    K_CVT_LAT,
    K_SHFL_LAT,
    K_SMEM_BW,       /* shared memory bytes per clock per SM (one wavefront) */
    K_SMEM_LAT,      /* ld.shared latency, clocks */
    K_DSMEM_LAT,     /* ld/st.shared::cluster to another CTA, clocks */
    K_GMEM_LAT,      /* ld.global latency (L2 hit), clocks */
    K_ST_LINE,       /* clocks the SM's store path spends per distinct 128-byte line a warp's st.global touches */
    K_ST_BW,         /* bytes per clock the SM's store path takes (a warp's st.global costs the larger of the two) */
    K_TC_MACS,       /* dense 16-bit tensor-core multiply-adds per clock per SM */
    K_TC_FP8_X,      /* fp8 rate / 16-bit rate */
    K_TC_LAT,        /* wgmma / tcgen05.mma latency beyond its throughput time, clocks */
    K_TC_ISSUE,      /* clocks a wgmma occupies its warps' issue slot */
    K_FMA_DENSE,     /* FMA-pipe instructions a clock a sub-partition issues in an unbroken run beside wgmmas */
    K_TC_BESIDE,     /* the speed of a sub-partition's other instructions while wgmmas are in flight on the SM (<= 1) */
    K_TC_FRAC_N16,   /* wgmma SS rate at N 16 / the N 256 rate (tc_macs); the model interpolates in N between */
    K_TC_FRAC_N32,   /* ... at N 32 */
    K_TC_FRAC_N48,   /* ... at N 48 */
    K_TC_FRAC_N64,   /* ... at N 64 */
    K_TC_FRAC_N80,   /* ... at N 80 */
    K_TC_FRAC_N128,  /* ... at N 128 (a table without these keys: 1, the N 256 rate at every N) */
    K_TMEM_LAT,      /* tcgen05.ld latency, clocks */
    K_TMEM_BW,       /* tcgen05.ld/st bytes per clock per SM */
    K_TMA_OP,        /* clocks the SM's TMA engine spends per box (or bulk copy) beyond its bytes */
    K_TMA_ROW,       /* extra clocks per gathered row (tile::gather4) */
    K_TMA_LAT,       /* TMA load latency from L2, clocks */
    K_PF_BW,         /* bytes per clock the SM's TMA engine gets through of an L2 prefetch (it moves nothing to the SM) */
    K_PF_GBS,        /* DRAM GB/s of the bytes a grid prefetches into L2 (then loads): below hbm_gbs, measured */
    K_PF_HEAD_US,    /* the most DRAM time prefetches issued before griddepcontrol.wait take off the launch, us */
    K_L2_SM_BW,      /* L2 -> one SM bytes per clock, when few SMs load */
    K_L2_BW,         /* L2 -> all SMs bytes per clock (the grid shares it) */
    K_CPA_SM_BW,     /* cp.async (the LSU path: 16-byte gathers of scattered rows) L2 -> one SM, bytes per clock */
    K_CPA_BW,        /* the same, L2 -> all SMs gathering at once, bytes per clock (the grid shares it) */
    K_HBM_GBS,       /* DRAM bandwidth, GB/s */
    K_MBAR_WAKE,     /* mbarrier phase completion -> waiting warp issues, clocks */
    K_BAR_WAKE,      /* bar.sync release -> waiting warp issues, clocks */
    K_CLUSTER_WAKE,  /* barrier.cluster release -> waiting warp issues, clocks */
    K_FENCE_LAT,     /* fence.acq_rel / fence.proxy.async, clocks */
    K_LAUNCH_US,     /* a plain launch's gap after the stream's previous kernel (its end -> this grid's first global
                      * access), microseconds */
    K_GAP_PDL_US,    /* the same for a programmatic dependent launch (-> its griddepcontrol.wait's release) */
    K_IDIV_CLK,      /* clocks a warp's 32-bit integer division (ptxas's I2F, MUFU.RCP, F2I sequence) holds the
                      * sub-partition's MUFU/conversion unit, divisions back to back */
    K_COUNT
} TimingKey;

/* Where a value comes from. */
typedef enum { SRC_PUBLISHED, SRC_MEASURED, SRC_DERIVED, SRC_ASSUMED } TimingSource;

typedef struct TimingGpu {
    char name[32];
    double v[K_COUNT];
    uint8_t src[K_COUNT];
    uint8_t have[K_COUNT];
    char why[K_COUNT][160]; /* the table's source text */
    char path[1024];        /* the file it was read from */
    char validation[256];   /* its `# validation:` comment: how far its predictions were measured off */
} TimingGpu;

const char *timing_key_name(int k);
int timing_key_find(const char *name); /* -1 when unknown */

/* Loads a table: a name (h100, b200: dir/<name>.tbl) or a path. 0, or -1 with a message. Every key
 * must be present, once. Lines: `key value source words...` (source: published, measured,
 * derived or assumed, then the citation or the microbenchmark's name); '#' comments. One comment
 * `# validation: TEXT` says how the table's predictions compared with kernels timed on a GPU (or that
 * none were); the driver repeats it (fa4sim-table line) so that a prediction is never quoted without it. */
int timing_load(TimingGpu *g, const char *name_or_path, const char *dir, char *err, size_t n);

/* What the timing mode reports for a launch. */
enum { TP_ISSUE, TP_FMA, TP_ALU, TP_MUFU, TP_CVT, TP_SHFL, TP_SMEM, TP_GMEM, TP_TC, TP_TMA, TP_TMEM, TP_COUNT };
typedef struct TimingOut {
    double cycles;            /* predicted launch time, clocks (the whole grid) */
    double us;                /* the same in microseconds, launch cost included */
    double window_cycles;     /* the longest simulated cluster */
    double busy[TP_COUNT];    /* the simulated window's busy clocks per unit, summed over its SMs */
    double span[TP_COUNT];    /* the clocks busy[] is a share of (per unit) */
    double hbm_cycles, l2_cycles; /* the grid's memory bounds */
    double dram_cycles;       /* the makespan with the DRAM bound shared by the places as their loads fall */
    double prefetch_mb, head_us; /* the grid's L2 prefetches; the DRAM time those before its wait took off it */
    double tflops;            /* tensor-core flops issued / time (the simulated window scaled) */
    double tc_flops;          /* tensor flops the window issued */
    int clusters, simulated, waves, occupancy, persistent_like;
    char bottleneck[32];
} TimingOut;

const char *timing_unit_name(int u); /* TP_* */

/* bytes a simulated cluster moved: loaded (TMA, bulk, cp.async) and prefetched into L2 (before its griddepcontrol.wait) */
typedef struct TimingBytes { uint64_t loaded, prefetched, prefetched_early; } TimingBytes;

/* per-launch inputs that only the driver knows */
typedef struct TimingLaunch {
    const TimingGpu *gpu;
    uint64_t hbm_bytes; /* bytes of the allocations the launch can touch (its unique traffic bound) */
    int samples;        /* clusters to simulate at most (default 4) */
} TimingLaunch;

/* ptxas's renaming and interleaving of independent chains, approximated on a module at load (timing mode): 0, or
 * -1 when out of memory (timing.c, "ptxas's schedule, approximated") */
struct PtxModule;
int timing_schedule(struct PtxModule *m, const TimingGpu *g);

#endif
