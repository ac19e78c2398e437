/* core.h - the simulator core's private types, shared by sim.c (scheduling,
 * memory, synchronisation, async units) and alu.c (the scalar instructions).
 */
#ifndef FA4SIM_CORE_H
#define FA4SIM_CORE_H

#include <stdint.h>

#include "sim.h"
#include "tc.h"
#include "tma.h"
#include "timing.h"

enum {
    MAX_CTAS = 16,      /* per cluster */
    MAX_PREFETCH = 128, /* per CTA: L2 prefetches not yet followed by a load of their box */
    MAX_MBARS = 512,    /* per cluster */
    NAMED_BARS = 16,
    GROUP_RING = 64,    /* bulk-async groups a thread may have outstanding */
    CLUSTER_SHIFT = 24, /* a shared address is rank << 24 | offset: a CTA's shared::cta addresses are its own
                           shared::cluster addresses (the ISA: the shared::cta window lies in the
                           shared::cluster window), as on the GPU, where clearing bit 24 names the even CTA
                           of a pair */
};

typedef enum { TS_RUN, TS_COLL, TS_BAR, TS_MBAR, TS_CLUSTER, TS_BULK, TS_WG, TS_CPA, TS_NREG, TS_EXIT } ThreadState;

/* What last wrote a shared-memory word or TMEM cell. */
typedef enum {
    W_NONE,   /* never written */
    W_THREAD, /* a thread's generic-proxy store; clk = the thread */
    W_TCST,   /* a thread's tcgen05.st (or tcgen05.alloc's address); clk = the thread */
    W_ASYNC   /* an async unit: clk = the mbarrier or tcgen05 pipe that publishes it */
} WriterKind;

typedef struct Shadow {
    uint32_t ep;      /* the writer clock's epoch at the write */
    uint16_t clk;
    uint8_t kind;     /* WriterKind */
    uint8_t rd;       /* TMEM: 1 when rclk/rep name its last reader (a thread's tcgen05.ld or the tcgen05 pipe) */
    uint16_t readers; /* in-flight async ops that will read it */
    uint16_t writers; /* in-flight async ops that will write it */
    uint16_t rclk;    /* TMEM: the last reader's clock (the thread, or the issuing CTA's pipe) */
    uint32_t rep;     /* TMEM: its epoch at the read (the pipe: the reading op's sequence number) */
} Shadow;

/* A thread's (non-.relaxed) arrival on an mbarrier: the thread, its epoch at the arrival, the PTX line. */
typedef struct MbArrival {
    uint32_t ep;
    int t, line;
} MbArrival;

typedef struct Mbar {
    int cta;
    uint32_t addr;
    int expected, pending;
    int64_t tx;
    uint32_t phase;   /* phases completed so far */
    int clk;
    uint32_t *acc;    /* join of what arrivals released into the current phase */
    uint32_t *done;   /* join of every completed phase: what a successful wait acquires */
    int init_line;
    int init_t;        /* the thread whose mbarrier.init made it, and its epoch then: a use must see it */
    uint32_t init_ep;
    /* the thread arrivals of the current phase [0] and of the last completed one [1]: an arrival must be ordered
     * after every arrival of the previous phase (sim.c, mbar_arrival_ordered) */
    MbArrival *arr[2];
    int narr[2], caparr[2];
} Mbar;

typedef struct NamedBar {
    int expected, arrived;
    uint32_t gen;
    uint32_t *acc;
} NamedBar;

typedef struct Cta {
    int rank;
    unsigned ctaid[3];
    uint8_t *smem;        /* [0, smem_end): addresses below smem_base are never valid */
    uint32_t smem_base, smem_end;
    Shadow *ssh;          /* one per 4-byte word */
    int16_t *mbmap;       /* word -> mbarrier index + 1 */
    uint32_t *tmem;       /* lane * 512 + column */
    Shadow *tsh;
    uint8_t tcol[TC_TMEM_COLS]; /* 1: column allocated */
    int relinquished;
    NamedBar bars[NAMED_BARS];
    int first_thread, nthreads;
    uint32_t pipe_issued; /* tcgen05.mma ops issued: the pipe clock's epochs */
    /* tensor prefetches (L2 hints) whose box no TMA load of this CTA has taken yet: a kernel that
     * prefetches boxes it never loads spends bandwidth for nothing (check_exit_state reports them) */
    struct { uint64_t map; int32_t coords[5]; int nc, line; } pf[MAX_PREFETCH];
    int npf;
    /* setmaxnreg: registers in the CTA's pool (what the threads' budgets leave of the CTA's share of the SM's
     * 64K, 65536 / CTAs per SM) */
    int reg_pool, reg_share;
} Cta;

/* A cp.async that has landed in shared memory but is not published yet (see sim.c). */
typedef struct CpLanded {
    uint32_t seg;    /* the issuing thread's segment */
    uint32_t word;   /* first destination word (in the issuing thread's CTA) */
    uint32_t nwords;
} CpLanded;

/* The epochs at which a thread executed a kind of fence, in order: a write at epoch w is covered for a
 * reader that acquired the thread's epoch r when some fence f has w <= f < r (the fence came after the
 * write and before the release the reader acquired; a later fence does not cover an earlier release). */
typedef struct FenceLog {
    uint32_t *e;
    int n, cap;
} FenceLog;

typedef struct Thread {
    uint64_t *r;
    int pc;
    uint8_t state;
    int cta, tid, gtid, lane, warp; /* warp: index in the cluster's warp array */
    uint32_t *vc;
    /* what it waits for */
    int wait_mbar;
    int wait_bar;
    uint32_t wait_gen;
    uint32_t cl_phase;
    int cl_arrived;
    int wait_n;
    /* tcgen05 publication state */
    int st_unwaited;
    uint32_t tc_fenced, proxy_fenced;
    /* tcgen05 ordering across threads (PTX ISA, tcgen05 memory consistency model): tcvc is what the thread's
     * asynchronous tcgen05 ops (mma, cp, ld, st) are ordered after: its vc at its last
     * tcgen05.fence::after_thread_sync (a wait or barrier after that fence orders generic ops only);
     * ld_fenced: the epoch up to which its tcgen05.ld reads were complete (wait::ld) when it executed
     * tcgen05.fence::before_thread_sync, so that a release after it orders them before another thread's
     * write of the same cells */
    uint32_t *tcvc;
    uint32_t ld_fenced;
    FenceLog f_proxy, f_tcst, f_tcld; /* fence.proxy.async; before_thread_sync with its st / ld complete */
    /* wgmma.fence (PTX ISA, wgmma.fence): icount counts the thread's instructions, racc[reg] is the count at
     * the last access of reg by an instruction other than wgmma.mma_async, wg_fenced the count at its last
     * wgmma.fence; a wgmma whose accumulator or A registers were accessed after that fence is a hazard */
    uint32_t icount, wg_fenced;
    int slept; /* the thread's last quantum ended in nanosleep (a spin that found nothing yet) */
    uint32_t *racc;
    /* fence.mbarrier_init.release.cluster: the epoch it covers (0: none); a .relaxed arrive releases it */
    uint32_t mbinit_fenced;
    /* setmaxnreg: the warp's per-thread register budget now (the count the kernel started with until then) */
    int nreg;
    /* fence.acq_rel / fence.sc with relaxed mbarrier and cluster-barrier operations (the ISA's release
     * and acquire patterns): fence_ep, the thread's epoch at its last fence (0: none), is what a later
     * .relaxed arrive releases; racq_mbar (index + 1) is the last mbarrier a .relaxed wait passed, whose
     * phases a later fence acquires */
    uint32_t fence_ep;
    int racq_mbar;
    uint32_t tc_seq; /* the pipe sequence number of the last tcgen05.mma/cp this thread issued */
    uint8_t waited;  /* passed griddepcontrol.wait: the launch's late writes are visible to its loads */
    /* registers an async op still owns (tcgen05.ld before wait::ld, wgmma accumulators) */
    uint8_t *pend;
    int npend;
    int ld_pending;
    /* bulk-async groups of TMA stores */
    uint32_t grp_commit;
    uint16_t grp_out[GROUP_RING];
    uint32_t wg_retired; /* wgmma groups whose accumulators this thread owns again */
    /* cp.async (non-bulk): the thread's copies fall into segments, closed by commit_group and by
     * cp.async.mbarrier.arrive; cpa_fly counts each segment's copies that have not landed */
    uint32_t cpa_seg;                  /* the open segment */
    uint32_t cpa_arrives, cpa_arrived; /* cp.async.mbarrier.arrive issued / fired: they fire in order */
    uint32_t cpa_low;                  /* every segment below it has landed */
    uint32_t cpa_commit;               /* cp.async-groups committed */
    uint32_t cpa_grp_end[GROUP_RING];  /* group g: its copies are in segments below cpa_grp_end[g % GROUP_RING] */
    uint16_t cpa_fly[GROUP_RING];      /* per segment, ring-indexed */
    uint8_t cpa_retry;                 /* blocked in wait_all, which has already committed */
    CpLanded *cpl;                     /* landed copies not yet published */
    int ncpl, cpl_cap;
    uint64_t steps;
} Thread;

typedef struct Warp {
    int first, n; /* threads [first, first + n) */
    int cta;
} Warp;

typedef enum {
    A_TMA_LOAD, A_TMA_STORE, A_MMA, A_COMMIT, A_CP, A_WGMMA, A_BULK_LOAD, A_BULK_STORE,
    A_CPA,       /* a cp.async copy */
    A_CPA_ARRIVE /* the arrive-on of a cp.async.mbarrier.arrive */
} AsyncKind;

typedef struct Op {
    int kind;
    int cta;          /* issuing CTA */
    int thread;       /* issuing thread (gtid) */
    int line;
    uint64_t ready;
    int stream;       /* -1: unordered; else completes in seq order within the stream */
    uint32_t seq;
    uint32_t group;   /* TMA store: the thread's bulk group */
    uint32_t *fp;     /* footprint: see fp_pack() in sim.c */
    int nfp, fpcap;
    uint32_t *vc;     /* commit: what its arrival releases */
    union {
        struct { TmaMap map; int32_t coords[5]; int gather4; uint32_t dst; int ctas[MAX_CTAS]; int nctas;
                 int mbar_cta; uint32_t mbar; uint64_t gaddr; uint32_t bytes; uint8_t multicast, pair, redadd; } tma;
                 /* tma: also the bulk copies; pair: .cta_group::2; redadd: a bulk store that adds f32 */
        struct { TcMma mma; uint32_t seq; } mma;
        struct { uint32_t mbar; int ctas[MAX_CTAS]; int nctas; uint32_t upto; } commit;
        TcCp cp;
        struct { TcWgmma w; int wg_first; int *dregs; int nd; uint32_t (*a)[TC_MAX_REGS]; uint32_t group; } wg;
        /* A_CPA: src, dst, seg (the copy's segment), size and src_size; A_CPA_ARRIVE: mbar (in the
         * issuing CTA), seg (it fires once every segment below has landed) */
        struct { uint64_t src; uint32_t dst, seg, mbar; uint8_t size, src_size; } cpa;
    } u;
} Op;

/* A completed wgmma whose accumulators its warpgroup's threads have not all retired yet. */
typedef struct WgDone {
    int wg;
    uint32_t group;
    int *dregs, nd;
} WgDone;

enum { MAX_TIMED_ATOMS = 8 };

typedef struct Sim {
    const SimLaunch *l;
    const PtxEntry *e;
    unsigned clusterid[3], ncluster[3];
    int ncta;
    Cta cta[MAX_CTAS];
    int nthreads, nwarps;
    Thread *th;
    Warp *warps;
    int *order;
    int nclk;
    uint32_t *vcbuf;
    Mbar *mb;
    int nmb;
    Op **ops;
    int nops, opcap;
    /* TMA / bulk stores that completed but whose thread has not waited past their bulk-async group
     * (cp.async.bulk.wait_group[.read]): their shared-memory sources still count as read, since the ISA
     * lets the store read them until that wait, however early it finished here */
    Op **held;
    int nheld, heldcap;
    uint32_t *stream_next, *stream_issue;
    int nstreams;
    /* wgmma groups per warpgroup */
    uint32_t *wg_commit; /* wgmma groups committed, per warpgroup */
    WgDone *wgdone;
    int nwgdone, wgdone_cap;
    uint32_t cl_phase;
    int cl_arrived, live;
    uint64_t step, rng;
    int max_latency;
    int status;
    char *report;
    size_t rlen, rcap;
    /* the instruction being executed, for messages */
    const Ins *cur;
    Thread *cur_t;
    uint8_t *param;
    struct Timing *tm; /* the timing mode's clock (timing.c), NULL in functional runs */
    /* timing mode: the atom.global.add words this cluster's CTAs have added to, and how often (sim.c atom_timed) */
    struct { uint64_t addr; uint32_t n[MAX_CTAS]; } atoms[MAX_TIMED_ATOMS];
    int natoms;
} Sim;

/* sim.c */
void sim_hazard(Sim *s, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
uint64_t sim_special(Sim *s, Thread *t, int sr);

/* alu.c: executes a scalar instruction (arithmetic, compare, convert, mov of
 * registers and immediates). Returns 0 when `in` is not one. */
int alu_exec(Sim *s, Thread *t, const Ins *in);
uint64_t alu_val(Sim *s, Thread *t, const Operand *o);
void alu_set(Sim *s, Thread *t, const Operand *o, uint64_t v);
void sim_pend_hazard(Sim *s, Thread *t, int reg);

/* sim.c, for the timing mode (timing.c) */
int sim_run_thread(Sim *s, Thread *t, int quantum);
int sim_try_collective(Sim *s, int wi);
void sim_complete_op(Sim *s, int i);
int sim_op_eligible(Sim *s, const Op *op);
void sim_report_deadlock(Sim *s);
/* one cluster (x, y, z) of the launch under the clock: its end time, busy clocks per unit, tensor flops and
 * loaded and prefetched bytes added to *cycles (set), busy, flops and bytes */
int sim_run_cluster_timed(const SimLaunch *l, unsigned x, unsigned y, unsigned z, double l2_bw_sm, double cpa_bw_sm,
                          char **report, double *cycles, double busy[TP_COUNT], double *flops, TimingBytes *bytes);

/* timing.c */
typedef struct Timing Timing;
Timing *timing_new(Sim *s);
void timing_free(Timing *tm);
void timing_set_share(Timing *tm, double l2_bw_sm, double cpa_bw_sm); /* L2 and cp.async bytes/clk of this SM */
double timing_now(const Timing *tm); /* the clock, SM clocks since the cluster started */
void timing_run_cluster(Sim *s);
void timing_op_issued(Sim *s, Op *op);
void timing_collect(const Timing *tm, double *cycles, double busy[TP_COUNT], double *flops, TimingBytes *bytes);
void timing_prefetch(Sim *s, int cta, uint32_t bytes, int early);
int timing_run_launch(const SimLaunch *l, char **report);

static inline uint64_t rreg(Sim *s, Thread *t, int reg)
{
    if (t->npend && t->pend[reg]) sim_pend_hazard(s, t, reg);
    t->racc[reg] = t->icount;
    return t->r[reg];
}

static inline void wreg(Sim *s, Thread *t, int reg, uint64_t v)
{
    if (t->npend && t->pend[reg]) sim_pend_hazard(s, t, reg);
    t->racc[reg] = t->icount;
    t->r[reg] = v;
}

#endif
