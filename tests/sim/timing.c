/* timing.c - the simulator's timing mode (see timing.h for the model, TIMING.md for its limits).
 *
 * Three parts: the table loader; the clock of one cluster (an event loop that replaces sim.c's
 * random scheduler: warps issue in time order, async ops complete at their modelled times); and the
 * launch (which clusters to simulate, and how their times scale to the grid).
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* ------------------------------------------------------------ the table */
static const char *const key_names[K_COUNT] = {
    [K_CLOCK_GHZ] = "clock_ghz", [K_SMS] = "sms", [K_SMEM_SM_KIB] = "smem_sm_kib", [K_REGS_SM] = "regs_sm",
    [K_MAX_WARPS_SM] = "max_warps_sm", [K_MAX_CTAS_SM] = "max_ctas_sm", [K_FMA_LANES] = "fma_lanes",
    [K_ALU_LANES] = "alu_lanes", [K_IMAD_LANES] = "imad_lanes", [K_MUFU_LANES] = "mufu_lanes",
    [K_CVT_LANES] = "cvt_lanes", [K_SHFL_LANES] = "shfl_lanes", [K_FMA_LAT] = "fma_lat", [K_ALU_LAT] = "alu_lat",
    [K_MUFU_LAT] = "mufu_lat", [K_CVT_LAT] = "cvt_lat", [K_SHFL_LAT] = "shfl_lat", [K_SMEM_BW] = "smem_bw",
    [K_SMEM_LAT] = "smem_lat", [K_DSMEM_LAT] = "dsmem_lat", [K_GMEM_LAT] = "gmem_lat", [K_ST_LINE] = "st_line",
    [K_ST_BW] = "st_bw", [K_TC_MACS] = "tc_macs", [K_TC_FP8_X] = "tc_fp8_x", [K_TC_LAT] = "tc_lat",
    [K_TC_ISSUE] = "tc_issue", [K_FMA_DENSE] = "fma_dense", [K_TC_BESIDE] = "tc_beside", [K_TC_FRAC_N16] = "tc_frac_n16",
    [K_TC_FRAC_N32] = "tc_frac_n32", [K_TC_FRAC_N48] = "tc_frac_n48", [K_TC_FRAC_N64] = "tc_frac_n64",
    [K_TC_FRAC_N80] = "tc_frac_n80", [K_TC_FRAC_N128] = "tc_frac_n128", [K_TMEM_LAT] = "tmem_lat",
    [K_TMEM_BW] = "tmem_bw", [K_TMA_OP] = "tma_op", [K_TMA_ROW] = "tma_row", [K_TMA_LAT] = "tma_lat",
    [K_PF_BW] = "pf_bw", [K_PF_GBS] = "pf_gbs", [K_PF_HEAD_US] = "pf_head_us", [K_L2_SM_BW] = "l2_sm_bw", [K_L2_BW] = "l2_bw",
    [K_CPA_SM_BW] = "cpa_sm_bw", [K_CPA_BW] = "cpa_bw", [K_HBM_GBS] = "hbm_gbs", [K_MBAR_WAKE] = "mbar_wake",
    [K_BAR_WAKE] = "bar_wake", [K_CLUSTER_WAKE] = "cluster_wake", [K_FENCE_LAT] = "fence_lat",
    [K_LAUNCH_US] = "launch_us", [K_GAP_PDL_US] = "gap_pdl_us", [K_IDIV_CLK] = "idiv_clk",
};

const char *timing_key_name(int k) { return k >= 0 && k < K_COUNT ? key_names[k] : "?"; }

int timing_key_find(const char *name)
{
    for (int k = 0; k < K_COUNT; k++)
        if (!strcmp(key_names[k], name)) return k;
    return -1;
}

static int source_word(const char *w)
{
    static const char *const names[] = {"published", "measured", "derived", "assumed"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(w, names[i])) return i;
    return -1;
}

/* warp instruction interval of a pipe with `lanes` results per clock per SM (4 sub-partitions) */
static double interval_of(double lanes) { return lanes > 0 ? 32.0 / (lanes / 4.0) : 1.0; }

/* A key the table does not give: `v`, marked assumed (timing_load, for keys newer than the table). */
static void table_default(TimingGpu *g, int k, double v, const char *why)
{
    if (g->have[k]) return;
    g->v[k] = v, g->src[k] = SRC_ASSUMED, g->have[k] = 1;
    snprintf(g->why[k], sizeof g->why[k], "not in the table: %s", why);
}

int timing_load(TimingGpu *g, const char *name_or_path, const char *dir, char *err, size_t n)
{
    char path[1024];
    if (strchr(name_or_path, '/') || strstr(name_or_path, ".tbl")) snprintf(path, sizeof path, "%s", name_or_path);
    else snprintf(path, sizeof path, "%s/%s.tbl", dir ? dir : ".", name_or_path);
    FILE *f = fopen(path, "r");
    if (!f) { snprintf(err, n, "timing table %s: cannot open", path); return -1; }
    memset(g, 0, sizeof *g);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t bl = strlen(base) < sizeof g->name - 1 ? strlen(base) : sizeof g->name - 1;
    memcpy(g->name, base, bl);
    g->name[bl] = 0;
    snprintf(g->path, sizeof g->path, "%s", path);
    snprintf(g->validation, sizeof g->validation, "none stated in the table");
    char *dot = strstr(g->name, ".tbl");
    if (dot) *dot = 0;
    char line[1024];
    int ln = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        ln++;
        char *h = strchr(line, '#');
        if (h && !strncmp(h, "# validation:", 13)) {
            const char *t = h + 13;
            while (*t == ' ') t++;
            size_t tl = strcspn(t, "\r\n");
            snprintf(g->validation, sizeof g->validation, "%.*s", (int)tl, t);
        }
        if (h) *h = 0;
        char key[64], val[64], src[32];
        int used = 0;
        if (sscanf(line, " %63s %63s %31s %n", key, val, src, &used) < 3) {
            char tmp[8];
            if (sscanf(line, " %7s", tmp) == 1) { snprintf(err, n, "%s:%d: want `key value source citation`", path, ln); rc = -1; }
            continue;
        }
        int k = timing_key_find(key), s = source_word(src);
        char *end;
        double v = strtod(val, &end);
        if (k < 0) { snprintf(err, n, "%s:%d: unknown key %s", path, ln, key); rc = -1; break; }
        if (*end || !(v > 0) || !isfinite(v)) { snprintf(err, n, "%s:%d: %s: value %s is not a positive number", path, ln, key, val); rc = -1; break; }
        if (s < 0) { snprintf(err, n, "%s:%d: %s: source %s is not published, measured, derived or assumed", path, ln, key, src); rc = -1; break; }
        if (g->have[k]) { snprintf(err, n, "%s:%d: %s given twice", path, ln, key); rc = -1; break; }
        char *why = line + used;
        while (*why && isspace((unsigned char)*why)) why++;
        size_t L = strlen(why);
        while (L && isspace((unsigned char)why[L - 1])) why[--L] = 0;
        if (!L) { snprintf(err, n, "%s:%d: %s: the source needs a citation or a reason", path, ln, key); rc = -1; break; }
        g->v[k] = v, g->src[k] = (uint8_t)s, g->have[k] = 1;
        snprintf(g->why[k], sizeof g->why[k], "%s", why);
    }
    fclose(f);
    /* keys later probes added, for tables measured before them: the narrow-N wgmma rates (H200 run 7) the N 256
     * rate; the stores (run 8) a line a clock and 128 bytes a clock; FMA runs beside wgmmas (run 9) no clash */
    for (int k = K_TC_FRAC_N16; k <= K_TC_FRAC_N128 && !rc; k++) table_default(g, k, 1, "the N 256 rate");
    if (!rc) {
        table_default(g, K_ST_LINE, 1, "one line a clock");
        table_default(g, K_ST_BW, 128, "128 bytes a clock");
        table_default(g, K_FMA_DENSE, 0, "no clash");
        /* the softmax beside wgmmas (run 22): unslowed */
        table_default(g, K_TC_BESIDE, 1, "not slowed");
        /* the PDL/prefetch probe (run 10): a prefetch as a load, its bytes at the DRAM rate, no head start */
        table_default(g, K_PF_BW, g->v[K_L2_SM_BW], "a prefetch at l2_sm_bw, as a load");
        table_default(g, K_PF_GBS, g->v[K_HBM_GBS], "prefetched bytes at hbm_gbs");
        table_default(g, K_PF_HEAD_US, 0, "no head start");
        /* the PDL probe's gaps (run 18): a programmatic dependent as a plain launch */
        table_default(g, K_GAP_PDL_US, g->v[K_LAUNCH_US], "as launch_us");
        /* mb_idiv (run 58): I2F, MUFU.RCP and F2I at the MUFU rate are the least a division holds that unit */
        table_default(g, K_IDIV_CLK, 3 * interval_of(g->v[K_MUFU_LANES]), "its I2F, MUFU.RCP, F2I at mufu_lanes");
    }
    for (int k = 0; k < K_COUNT && !rc; k++)
        if (!g->have[k]) { snprintf(err, n, "%s: key %s missing", path, key_names[k]); rc = -1; }
    return rc;
}

/* ------------------------------------------------------------ one cluster's clock */
/* Pipes of a sub-partition (a warp instruction occupies one for `interval` clocks). */
enum { PI_NONE, PI_FMA, PI_ALU, PI_IMAD, PI_MUFU, PI_CVT, PI_SHFL, PI_SMEM, PI_GMEM, PI_SYNC, PI_TC, PI_COUNT };

/* The sm_90a tensor pipe shares its rate among the warpgroups that have wgmmas in flight, each warpgroup's in order:
 * mb_wgmma_pair (H200 run 9) measured two warpgroups' groups of 4 wgmmas issued together both finishing after ~8
 * wgmmas' time (1080 / 1073 clocks), where a first-come pipe would finish one after 4. */
typedef struct TcJob { Op *op; double left; int stream, head; } TcJob;
typedef struct TcShare {
    TcJob *j;        /* in flight, in issue order */
    int n, cap;      /* j, proj and ended each hold cap entries */
    double at;       /* progress is accounted up to here */
    int dirty;       /* the pipe lost clocks since the completions were projected */
    TcJob *proj;     /* tc_project's working copy of j */
    Op **ended;      /* the ops one step ended */
} TcShare;

typedef struct Timing {
    const TimingGpu *g;
    double now;
    double *wnext;       /* per warp: earliest next issue */
    double *wlast;       /* per warp: its last issue (-1: none yet) */
    int8_t *wblk;        /* per warp: 0 runnable, else the ThreadState it blocked in (+1), -1 exited */
    double *rready;      /* per warp x register: when the value is ready */
    double *ldready;     /* per warp: tcgen05.ld results */
    int nregs;
    double slot[MAX_CTAS][4];            /* sub-partition issue slot */
    double pipe[MAX_CTAS][4][PI_COUNT];  /* pipe free */
    double smem_free[MAX_CTAS], tc_free[MAX_CTAS], tma_free[MAX_CTAS], tmas_free[MAX_CTAS], tmem_free[MAX_CTAS];
    double lsu_free[MAX_CTAS];
    double st_free[MAX_CTAS];            /* the SM's st.global path (st_line clocks a line) */
    double fma_last[MAX_CTAS][4];        /* a sub-partition's last FMA-pipe issue, and how many ran back to back */
    int fma_run[MAX_CTAS][4];
    double tc_lost[MAX_CTAS];            /* the last clock the tensor pipe lost to an FMA run (one a clock) */
    TcShare tcq[MAX_CTAS];               /* wgmmas in flight, per SM (tc_share) */
    int tc_fifo;                         /* FA4SIM_TC_FIFO=1: first come, first served instead */
    int warp_fixed;                      /* FA4SIM_WARP_FIXED=1: ties go to the lower warp index (before run 19) */
    int tc_queue;                        /* FA4SIM_TC_QUEUE=D: wgmmas first come, first served, D accepted an SM */
    int trace_warp;                      /* FA4SIM_TRACE=W: each issue of warp W on stderr (-1: none) */
    char why;                            /* what held issue_time's answer back (the trace's reason letter) */
    char *wwhy;                          /* per warp: the reason its issue was last put off (the trace's) */
    double qfin[MAX_CTAS][16];           /* ... the completion clocks of the last D accepted, a ring */
    unsigned qn[MAX_CTAS];
    double *stream_last;
    double end;
    double busy[TP_COUNT];
    double tc_flops;
    double l2_bw_sm;     /* bytes per clock this SM's loads get */
    double cpa_bw_sm;    /* bytes per clock this SM's cp.async gathers get */
    TimingBytes bytes;   /* loaded by TMA/bulk/cp.async and prefetched into L2 in the window */
} Timing;

static double V(const Timing *tm, int k) { return tm->g->v[k]; }

/* A wgmma's SS rate (A and B from shared memory) at width N as a fraction of the N 256 rate: the measured points
 * (tc_frac_nN, keys K_TC_FRAC_N16.. in the order of `at`) joined by straight lines, the N 16 value below 16 and 1
 * from 256 on. */
enum { TC_FRAC_POINTS = K_TC_FRAC_N128 - K_TC_FRAC_N16 + 1 };
static double tc_frac(const Timing *tm, int n)
{
    static const int at[TC_FRAC_POINTS + 1] = {16, 32, 48, 64, 80, 128, 256};
    double f[TC_FRAC_POINTS + 1];
    for (int i = 0; i < TC_FRAC_POINTS; i++) f[i] = V(tm, K_TC_FRAC_N16 + i);
    f[TC_FRAC_POINTS] = 1;
    if (n <= at[0]) return f[0];
    for (int i = 0; i < TC_FRAC_POINTS; i++)
        if (n <= at[i + 1]) return f[i] + (f[i + 1] - f[i]) * (n - at[i]) / (at[i + 1] - at[i]);
    return 1;
}

static int is_float(int ty) { return ty == T_F32 || ty == T_F64 || ty == T_F16 || ty == T_BF16 || ty == T_F16X2 || ty == T_BF16X2 || ty == T_F32X2; }

typedef struct Cost {
    int pipe;        /* PI_* */
    double interval; /* clocks the pipe is busy */
    double lat;      /* result latency */
    int tp;          /* TP_* it counts toward */
    int free;        /* costs nothing (register moves ptxas removes) */
    int issues;      /* SASS instructions it becomes: issue slots it takes (1 but for integer division) */
} Cost;

/* A 32-bit integer div or rem: ptxas 13.0 expands it, whatever the divisor (an immediate too: 128 is not
 * turned into a shift), into a reciprocal and its correction: I2F, MUFU.RCP, F2I, then IMADs, IADD3s and
 * ISETPs. SASS counted with cuobjdump, the same on sm_90a, sm_100a and sm_103a: div.u32 by a register 18
 * instructions, rem.u32 17, div.s32 23, rem.s32 21; by an immediate 4 fewer. A rem right after the div of
 * the same operands shares its sequence (div + rem: 22, 4 more than the div). The dependent chain is
 * I2F -> MUFU -> IADD3 -> F2I and eleven integer steps (IMAD, IMAD.HI, ISETP, predicated IADD3). Its
 * throughput is measured (mb_idiv: idiv_clk, 35.8 clocks a warp division on an H200, against 20 issue
 * slots) and charged to the MUFU unit its I2F, RCP and F2I run on (16 lanes an SM: 24 of those clocks). A 64-bit
 * division (a call in SASS, longer) is charged as a 32-bit one: the kernels' only one is the deterministic
 * backward's counter address at bm 192 (a power-of-two bm shifts). */
static int same_value(const Operand *a, const Operand *b)
{
    return a->kind == b->kind && (a->kind == O_REG ? a->reg == b->reg : a->kind == O_IMM && a->imm == b->imm);
}

static int idiv_sass(const Ins *in, const Ins *prev)
{
    int sgn = in->type == T_S32 || in->type == T_S64, imm = in->nops > 2 && in->ops[2].kind == O_IMM;
    if (in->nops == 3 && in->op == OP_REM && prev && prev->op == OP_DIV && prev->type == in->type &&
        prev->nops == 3 && same_value(&prev->ops[1], &in->ops[1]) && same_value(&prev->ops[2], &in->ops[2]) &&
        !same_value(&prev->ops[0], &in->ops[1]) && !same_value(&prev->ops[0], &in->ops[2]) && prev->guard < 0 &&
        in->guard < 0)
        return 4;
    return (in->op == OP_DIV ? (sgn ? 23 : 18) : (sgn ? 21 : 17)) - (imm ? 4 : 0);
}

static Cost cost_of(const Timing *tm, const Ins *in, const Ins *prev)
{
    Cost c = {PI_ALU, interval_of(V(tm, K_ALU_LANES)), V(tm, K_ALU_LAT), TP_ALU, 0, 1};
    Cost fma = {PI_FMA, interval_of(V(tm, K_FMA_LANES)), V(tm, K_FMA_LAT), TP_FMA, 0, 1};
    Cost mufu = {PI_MUFU, interval_of(V(tm, K_MUFU_LANES)), V(tm, K_MUFU_LAT), TP_MUFU, 0, 1};
    Cost cvt = {PI_CVT, interval_of(V(tm, K_CVT_LANES)), V(tm, K_CVT_LAT), TP_CVT, 0, 1};
    Cost shfl = {PI_SHFL, interval_of(V(tm, K_SHFL_LANES)), V(tm, K_SHFL_LAT), TP_SHFL, 0, 1};
    Cost sync = {PI_SYNC, 1, V(tm, K_ALU_LAT), TP_ISSUE, 0, 1};
    switch (in->op) {
    case OP_MOV:
        /* a register or immediate move is a renaming ptxas removes; a pack/unpack is one ALU op */
        if (in->ops[0].kind != O_VEC && in->ops[1].kind != O_VEC) c.free = 1;
        return c;
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_FMA: case OP_MAD:
        if (is_float(in->type)) return fma;
        if (in->op == OP_MUL || in->op == OP_MAD) { c.pipe = PI_IMAD; c.interval = interval_of(V(tm, K_IMAD_LANES)); c.tp = TP_FMA; }
        return c;
    case OP_EX2: case OP_LG2: case OP_RCP: case OP_SQRT: case OP_RSQRT: case OP_TANH: return mufu;
    case OP_DIV: case OP_REM:
        if (is_float(in->type)) { mufu.interval += 4 * interval_of(V(tm, K_FMA_LANES)); mufu.lat += 4 * V(tm, K_FMA_LAT); return mufu; }
        c.issues = idiv_sass(in, prev);
        if (c.issues <= 4) { /* the rem of a div just made: an IMAD and a select or two */
            c.interval *= c.issues / 2, c.lat *= c.issues;
            return c;
        }
        mufu.issues = c.issues, mufu.interval = V(tm, K_IDIV_CLK);
        mufu.lat = 2 * V(tm, K_CVT_LAT) + V(tm, K_MUFU_LAT) + 11 * V(tm, K_ALU_LAT);
        return mufu;
    case OP_CVT:
        if (is_float(in->type) || is_float(in->type2) || in->type == T_E4M3X2 || in->type == T_E5M2X2) {
            /* rounding a float to an integral float (cvt.rni.f32.f32) is an ALU op */
            if (in->type == in->type2 && in->type == T_F32) return fma;
            return cvt;
        }
        c.free = (in->mods & (M_SAT)) == 0 && in->type2 != T_PRED; /* integer width changes: renames */
        return c;
    case OP_SHFL: case OP_REDUX: return shfl;
    case OP_LD: case OP_ST: case OP_STMATRIX:
        if (in->space == SP_SHARED || in->space == SP_SHARED_CLUSTER) {
            Cost m = {PI_SMEM, 1, in->space == SP_SHARED_CLUSTER ? V(tm, K_DSMEM_LAT) : V(tm, K_SMEM_LAT), TP_SMEM, 0, 1};
            return m;
        }
        if (in->space == SP_PARAM) { c.lat = V(tm, K_SMEM_LAT); return c; } /* constant bank */
        { Cost m = {PI_GMEM, 1, V(tm, K_GMEM_LAT), TP_GMEM, 0, 1}; return m; }
    case OP_BAR_SYNC: case OP_BAR_ARRIVE: case OP_CLUSTER_ARRIVE: case OP_CLUSTER_WAIT: case OP_MBAR_INIT:
    case OP_MBAR_ARRIVE: case OP_MBAR_EXPECT_TX: case OP_MBAR_TRY_WAIT: case OP_TMA_LOAD: case OP_TMA_STORE:
    case OP_TMA_PREFETCH: case OP_BULK_LOAD: case OP_BULK_STORE: case OP_BULK_COMMIT: case OP_BULK_WAIT: case OP_CPA:
    case OP_CPA_COMMIT: case OP_CPA_WAIT: case OP_CPA_ARRIVE: case OP_TC_COMMIT: case OP_TC_MMA: case OP_TC_CP:
    case OP_WG_COMMIT: case OP_WG_WAIT: case OP_WG_FENCE: case OP_TC_WAIT_ST: case OP_TC_WAIT_LD: case OP_ELECT:
    case OP_VOTE: case OP_BAR_WARP: case OP_SETMAXNREG: case OP_GRIDDEP: case OP_GRIDDEP_WAIT: case OP_TC_ALLOC:
    case OP_TC_DEALLOC: case OP_TC_RELINQUISH: case OP_TC_FENCE_BEFORE: case OP_TC_FENCE_AFTER: case OP_FENCE_MBAR_INIT:
        if (in->op == OP_MBAR_TRY_WAIT) sync.lat = V(tm, K_SMEM_LAT);
        return sync;
    case OP_FENCE: case OP_FENCE_PROXY_ASYNC: sync.interval = V(tm, K_FENCE_LAT); return sync;
    case OP_WG_MMA: { Cost w = {PI_TC, V(tm, K_TC_ISSUE), 1, TP_ISSUE, 0, 1}; return w; }
    case OP_TC_LD: case OP_TC_ST: { Cost w = {PI_SMEM, 1, V(tm, K_TMEM_LAT), TP_TMEM, 0, 1}; return w; }
    case OP_BRA: case OP_RET: case OP_EXIT: case OP_CVTA: case OP_MAPA: return c;
    case OP_MIN: case OP_MAX: case OP_NEG: case OP_ABS: case OP_SETP: case OP_SELP: case OP_COPYSIGN:
    default: return c;
    }
}

/* Registers an operand reads (its own reg, its vector's, a memory operand's base and coordinates). */
typedef void (*RegFn)(Timing *tm, int w, int reg, double *acc);

static void regs_of(Timing *tm, int w, const Operand *o, RegFn fn, double *acc)
{
    switch (o->kind) {
    case O_REG: fn(tm, w, o->reg, acc); break;
    case O_VEC: case O_MEM: case O_PAIR:
        for (int i = 0; i < o->nvec; i++) regs_of(tm, w, &o->vec[i], fn, acc);
        break;
    default: break;
    }
}

static void reg_max(Timing *tm, int w, int reg, double *acc)
{
    double r = tm->rready[(size_t)w * tm->nregs + reg];
    if (r > *acc) *acc = r;
}

static void reg_set(Timing *tm, int w, int reg, double *at) { tm->rready[(size_t)w * tm->nregs + reg] = *at; }

/* Does ops[0] name what the instruction writes? */
static int has_dest(int op)
{
    if (op < OP_LD) return 1; /* the scalar instructions */
    switch (op) {
    case OP_LD: case OP_CVTA: case OP_MAPA: case OP_SHFL: case OP_VOTE: case OP_ELECT: case OP_REDUX: case OP_TC_LD:
    case OP_MBAR_TRY_WAIT: case OP_MBAR_ARRIVE: case OP_MBAR_EXPECT_TX: return 1;
    default: return 0;
    }
}

static double operands_ready(Timing *tm, int w, const Ins *in)
{
    double t = 0;
    if (in->guard >= 0) reg_max(tm, w, in->guard, &t);
    for (int i = has_dest(in->op) ? 1 : 0; i < in->nops; i++) regs_of(tm, w, &in->ops[i], reg_max, &t);
    /* a register also read as an accumulator: wgmma's D when scale-d may be 1 */
    if (in->op == OP_WG_MMA) regs_of(tm, w, &in->ops[0], reg_max, &t);
    if (in->op == OP_TC_WAIT_LD && tm->ldready[w] > t) t = tm->ldready[w];
    return t;
}

/* Bytes one thread's load or store moves (the element size times the vector width). */
static int type_bytes(const Ins *in)
{
    int esz = in->type == T_B8 || in->type == T_U8 || in->type == T_S8 ? 1
            : in->type == T_B16 || in->type == T_U16 || in->type == T_S16 || in->type == T_F16 || in->type == T_BF16 ? 2
            : in->type == T_B64 || in->type == T_U64 || in->type == T_S64 || in->type == T_F64 ? 8 : 4;
    return esz * (in->vec ? in->vec : 1);
}

/* Shared-memory wavefronts of a warp's access: per group of threads that one wavefront can serve
 * (128 bytes), the largest number of distinct 4-byte words any bank holds. */
static int smem_wavefronts(Sim *s, Thread **ts, int n, const Ins *in)
{
    int bytes = type_bytes(in);
    const Operand *mo = &in->ops[in->op == OP_LD ? 1 : 0];
    if (mo->kind != O_MEM || !n) return 1;
    int per = bytes <= 4 ? 32 : 128 / bytes; /* threads per wavefront */
    int total = 0;
    for (int g0 = 0; g0 < n; g0 += per) {
        uint32_t words[32][4];
        int nw[32] = {0}, worst = 1;
        for (int i = g0; i < n && i < g0 + per; i++) {
            uint64_t a = alu_val(s, ts[i], &mo->vec[0]) + (uint64_t)mo->imm;
            for (int b = 0; b < (bytes + 3) / 4; b++) {
                uint32_t word = (uint32_t)((a >> 2) + (uint64_t)b), bank = word & 31;
                int seen = 0;
                for (int j = 0; j < nw[bank] && j < 4; j++) seen |= words[bank][j] == word;
                if (seen) continue;
                if (nw[bank] < 4) words[bank][nw[bank]] = word;
                nw[bank]++;
                if (nw[bank] > worst) worst = nw[bank];
            }
        }
        total += worst;
    }
    return total;
}

/* stmatrix: each 8x8 matrix is 8 rows of 16 bytes (128 bytes, one wavefront when its rows fall in distinct banks);
 * per matrix, the largest number of distinct 4-byte words any bank holds */
static int stmatrix_wavefronts(Sim *s, Thread **ts, int n, const Ins *in)
{
    const Operand *mo = &in->ops[0];
    Thread *lane[32] = {0};
    for (int i = 0; i < n; i++) lane[ts[i]->lane & 31] = ts[i];
    int total = 0;
    for (int m = 0; m < in->b; m++) {
        uint32_t words[32][8];
        int nw[32] = {0}, worst = 1;
        for (int i = 0; i < 8; i++) {
            Thread *t = lane[8 * m + i];
            if (!t || mo->kind != O_MEM) continue;
            uint64_t a = alu_val(s, t, &mo->vec[0]) + (uint64_t)mo->imm;
            for (int b = 0; b < 4; b++) {
                uint32_t word = (uint32_t)((a >> 2) + (uint64_t)b), bank = word & 31;
                int seen = 0;
                for (int j = 0; j < nw[bank]; j++) seen |= words[bank][j] == word;
                if (seen) continue;
                words[bank][nw[bank]++] = word;
                if (nw[bank] > worst) worst = nw[bank];
            }
        }
        total += worst;
    }
    return total > 0 ? total : 1;
}

/* st.global and red.global: the SM's store path is busy for the larger of st_line clocks per distinct 128-byte
 * line a warp's store touches and its bytes at st_bw (H200: an accumulator-fragment store, 8 rows x 16 bytes,
 * 16 clocks; 128 contiguous bytes, 4: mb_st_frag, mb_st_line). Threads whose guard is off store nothing. */
static int is_global_store(const Ins *in) { return in->op == OP_ST && in->space == SP_GLOBAL; }

static double store_clocks(const Timing *tm, Sim *s, Thread **ts, int n, const Ins *in)
{
    const Operand *mo = &in->ops[0];
    uint64_t seen[32];
    int lines = 0, active = 0;
    if (mo->kind != O_MEM) return V(tm, K_ST_LINE);
    for (int i = 0; i < n; i++) {
        if (in->guard >= 0 && (int)(rreg(s, ts[i], in->guard) & 1) == in->guard_neg) continue;
        uint64_t line = (alu_val(s, ts[i], &mo->vec[0]) + (uint64_t)mo->imm) >> 7;
        int j = 0;
        active++;
        while (j < lines && seen[j] != line) j++;
        if (j == lines && lines < 32) seen[lines++] = line;
    }
    double by_lines = lines * V(tm, K_ST_LINE), by_bytes = active * type_bytes(in) / V(tm, K_ST_BW);
    return by_lines > by_bytes ? by_lines : by_bytes;
}

Timing *timing_new(Sim *s)
{
    Timing *tm = calloc(1, sizeof *tm);
    if (!tm) return NULL;
    tm->g = s->l->timing->gpu;
    tm->nregs = s->e->nregs > 0 ? s->e->nregs : 1;
    tm->wnext = calloc((size_t)s->nwarps, sizeof *tm->wnext);
    tm->wlast = malloc((size_t)s->nwarps * sizeof *tm->wlast);
    tm->wblk = calloc((size_t)s->nwarps, 1);
    tm->ldready = calloc((size_t)s->nwarps, sizeof *tm->ldready);
    tm->wwhy = calloc((size_t)s->nwarps, 1);
    tm->rready = calloc((size_t)s->nwarps * (size_t)tm->nregs, sizeof *tm->rready);
    tm->stream_last = calloc((size_t)s->nstreams + 1, sizeof *tm->stream_last);
    if (!tm->wnext || !tm->wlast || !tm->wblk || !tm->rready || !tm->stream_last || !tm->ldready || !tm->wwhy) {
        timing_free(tm);
        return NULL;
    }
    for (int w = 0; w < s->nwarps; w++) tm->wlast[w] = -1;
    for (int i = 0; i < MAX_CTAS; i++) {
        tm->tc_lost[i] = -1;
        for (int p = 0; p < 4; p++) tm->fma_last[i][p] = -1e30;
    }
    const char *fifo = getenv("FA4SIM_TC_FIFO");
    tm->tc_fifo = fifo && *fifo == '1';
    const char *fixed = getenv("FA4SIM_WARP_FIXED");
    tm->warp_fixed = fixed && *fixed == '1';
    const char *tq = getenv("FA4SIM_TC_QUEUE");
    tm->tc_queue = tq ? atoi(tq) : 0;
    if (tm->tc_queue < 0 || tm->tc_queue > 16) tm->tc_queue = 0;
    const char *tr = getenv("FA4SIM_TRACE");
    tm->trace_warp = tr && *tr ? atoi(tr) : -1;
    return tm;
}

void timing_free(Timing *tm)
{
    if (!tm) return;
    free(tm->wnext), free(tm->wlast), free(tm->wblk), free(tm->rready), free(tm->stream_last), free(tm->ldready);
    free(tm->wwhy);
    for (int i = 0; i < MAX_CTAS; i++) free(tm->tcq[i].j), free(tm->tcq[i].proj), free(tm->tcq[i].ended);
    free(tm);
}

static int warp_smsp(Sim *s, int w)
{
    int per = (int)((s->l->block[0] * s->l->block[1] * s->l->block[2] + 31) / 32);
    return (w % per) % 4;
}

/* Bytes a load op brings and the number of rows it gathers. */
static uint32_t op_bytes(const Op *op, int *rows)
{
    *rows = 0;
    switch (op->kind) {
    case A_BULK_LOAD: case A_BULK_STORE: return op->u.tma.bytes;
    case A_TMA_LOAD:
        if (op->u.tma.gather4) { *rows = 4; return tma_gather4_bytes(&op->u.tma.map); }
        return tma_tile_bytes(&op->u.tma.map);
    case A_TMA_STORE: return tma_tile_bytes(&op->u.tma.map);
    case A_CPA: return op->u.cpa.size;
    default: return 0;
    }
}

/* ------------------------------------------------------------ the shared tensor pipe (wgmma) */
static int tc_head(const TcShare *q, int i)
{
    for (int k = 0; k < i; k++)
        if (q->j[k].stream == q->j[i].stream) return 0;
    return 1;
}

/* One step of the sharing: the heads (each stream's oldest job) all progress at 1 / heads of the pipe until the
 * first of them ends or `until` comes. Returns the time reached; jobs that ended are dropped, their ops put in
 * ended[] when given (an op may be complete and gone by then: only its time was needed). */
static double tc_step(TcShare *q, double until, Op **ended, int *nended)
{
    int heads = 0;
    double m = INFINITY;
    for (int i = 0; i < q->n; i++) /* marked before anything moves: the compaction below shifts the list */
        if ((q->j[i].head = tc_head(q, i))) heads++, m = fmin(m, q->j[i].left);
    double dt = m * heads, go = q->at + dt <= until ? m : (until - q->at) / heads;
    q->at = q->at + dt <= until ? q->at + dt : until;
    int w = 0;
    for (int i = 0; i < q->n; i++) {
        if (q->j[i].head) q->j[i].left -= go;
        if (q->j[i].head && q->j[i].left <= 1e-9) {
            if (ended) ended[(*nended)++] = q->j[i].op;
            continue;
        }
        q->j[w++] = q->j[i];
    }
    q->n = w;
    return q->at;
}

static void tc_advance(TcShare *q, double t)
{
    while (q->n && q->at < t) tc_step(q, t, NULL, NULL);
    if (q->at < t) q->at = t;
}

/* Every op in flight on the SM gets the completion the sharing gives it if nothing else arrives (a later arrival
 * or a lost clock moves them again); returns `mine`'s (NULL: none). */
static double tc_project(Timing *tm, int sm, const Op *mine)
{
    TcShare *q = &tm->tcq[sm];
    TcShare f = {q->proj, q->n, q->n, q->at, 0, NULL, NULL};
    double got = q->at;
    if (q->n) memcpy(f.j, q->j, (size_t)q->n * sizeof(TcJob));
    while (f.n) {
        int ne = 0;
        double at = tc_step(&f, INFINITY, q->ended, &ne), r = at + V(tm, K_TC_LAT);
        for (int i = 0; i < ne; i++) {
            Op *op = q->ended[i];
            if (op == mine) got = at;
            else op->ready = (uint64_t)ceil(r);
            if (op->stream >= 0 && r > tm->stream_last[op->stream]) tm->stream_last[op->stream] = r;
        }
    }
    tm->tc_free[sm] = f.at; /* when the last of them ends */
    q->dirty = 0;
    return got;
}

/* A wgmma of `work` pipe clocks issued now: the jobs in flight progress to now and the new one joins. */
static double tc_share_issue(Timing *tm, int sm, Op *op, double now, double work)
{
    TcShare *q = &tm->tcq[sm];
    tc_advance(q, now);
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 32;
        TcJob *j = realloc(q->j, (size_t)cap * sizeof *j), *proj;
        if (j) q->j = j;
        proj = j ? realloc(q->proj, (size_t)cap * sizeof *proj) : NULL;
        if (proj) q->proj = proj;
        Op **ended = proj ? realloc(q->ended, (size_t)cap * sizeof *ended) : NULL;
        if (!ended) return now + work; /* out of memory: this one as if alone (the arrays kept so far stay valid) */
        q->ended = ended, q->cap = cap;
    }
    q->j[q->n++] = (TcJob){op, work, op->stream, 0};
    return tc_project(tm, sm, op);
}

/* Is a sub-partition of SM `sm` slowed at t by wgmmas in flight there? mb_softmax_beside (H200 run 22): one warpgroup's
 * online softmax ran at 0.69 of its speed alone beside the other warpgroup's wgmma loop, whose wgmmas ran at full
 * speed (mb_wgmma_beside's FMULs: 0.677 a clock): on sm_90a the accumulators live in the register file the other warps'
 * instructions read. So while a wgmma is in flight, a non-tensor instruction holds its issue slot and its pipe
 * 1 / tc_beside times longer (the table's 1: no effect, as on sm_100a, whose accumulators are in tensor memory). */
static int tc_beside(Timing *tm, int sm, double t)
{
    if (!(V(tm, K_TC_BESIDE) < 1) || !(V(tm, K_TC_BESIDE) > 0) || tm->tc_fifo) return 0;
    if (tm->tc_queue) return tm->tc_free[sm] > t;
    TcShare *q = &tm->tcq[sm];
    tc_advance(q, t);
    return q->n > 0;
}

/* An FMA-pipe instruction at t on sub-partition p, the `run`-th issued back to back there (each within 2 clocks of
 * the one before). mb_wgmma_beside (H200 run 9b): beside another warpgroup's wgmmas, 1 or 2 FMUL chains a warp (one
 * FMUL every 4 or 2 clocks) cost them nothing; 4 or 16 chains (an unbroken run) made them 2.83x slower and ran at
 * 0.677 a clock. So from the 4th instruction of a run, while wgmmas are in flight on the SM, the run issues at
 * fma_dense a clock and the pipe loses that clock (once a clock, however many sub-partitions clash in it). Returns
 * the instruction's pipe interval. */
static double fma_clash(Sim *s, Timing *tm, int sm, int p, double t, double interval)
{
    int run = t - tm->fma_last[sm][p] < 2 ? tm->fma_run[sm][p] + 1 : 1;
    tm->fma_last[sm][p] = t, tm->fma_run[sm][p] = run;
    TcShare *q = &tm->tcq[sm];
    if (run < 4 || tm->tc_fifo || !(V(tm, K_FMA_DENSE) > 0)) return interval;
    if (tm->tc_queue) {
        if (!(tm->tc_free[sm] > t)) return interval;
        if (floor(t) > tm->tc_lost[sm]) { /* the pipe loses this clock: everything queued on it ends a clock later */
            tm->tc_lost[sm] = floor(t);
            tm->tc_free[sm] += 1;
            for (int i = 0; i < tm->tc_queue; i++)
                if (tm->qfin[sm][i] > t) tm->qfin[sm][i] += 1;
            for (int i = 0; i < s->nops; i++) {
                Op *o = s->ops[i];
                if (o->kind == A_WGMMA && o->cta == sm && (double)o->ready > t) o->ready++;
            }
        }
        return fmax(interval, 1 / V(tm, K_FMA_DENSE));
    }
    tc_advance(q, t);
    if (!q->n) return interval;
    if (floor(t) > tm->tc_lost[sm]) {
        tm->tc_lost[sm] = floor(t);
        q->at += 1;
        q->dirty = 1;
    }
    return fmax(interval, 1 / V(tm, K_FMA_DENSE));
}

/* An L2 prefetch (cp.async.bulk.prefetch.tensor) of `bytes`, early: issued before the thread's griddepcontrol.wait.
 * It holds the SM's TMA engine, in order with the loads, for its bytes at pf_bw (mb_pdl: 16 KB prefetches went through
 * the engine at 69 B/clk on an H200, 2.5x a load's rate: a load brings its bytes into the SM), and counts toward the
 * launch's prefetched bytes, which timing_run_launch prices at their own DRAM rate. */
void timing_prefetch(Sim *s, int cta, uint32_t bytes, int early)
{
    Timing *tm = s->tm;
    double start = fmax(tm->now, tm->tma_free[cta]), dur = fmax(bytes / V(tm, K_PF_BW), V(tm, K_TMA_OP));
    tm->tma_free[cta] = start + dur;
    tm->busy[TP_TMA] += dur;
    tm->bytes.prefetched += bytes;
    if (early) tm->bytes.prefetched_early += bytes;
}

/* The modelled completion time of an async op issued now (sim.c calls it from op_push). */
void timing_op_issued(Sim *s, Op *op)
{
    Timing *tm = s->tm;
    int sm = op->cta;
    double now = tm->now, ready = now, start;
    int rows;
    switch (op->kind) {
    case A_WGMMA: {
        const TcWgmma *w = &op->u.wg.w;
        double macs = (double)w->m * w->n * w->k;
        double rate = V(tm, K_TC_MACS) * (w->atype == TC_E4M3 || w->atype == TC_E5M2 ? V(tm, K_TC_FP8_X) : 1) *
                      (w->a_is_reg ? 1 : tc_frac(tm, w->n)); /* measured SS only: RS keeps the N 256 rate */
        tm->busy[TP_TC] += macs / rate;
        tm->tc_flops += 2 * macs;
        if (tm->tc_fifo || tm->tc_queue) {
            start = fmax(now, tm->tc_free[sm]);
            tm->tc_free[sm] = start + macs / rate;
            ready = tm->tc_free[sm] + V(tm, K_TC_LAT);
            if (tm->tc_queue) tm->qfin[sm][tm->qn[sm]++ % (unsigned)tm->tc_queue] = tm->tc_free[sm];
        } else {
            ready = tc_share_issue(tm, sm, op, now, macs / rate) + V(tm, K_TC_LAT);
        }
        break;
    }
    case A_MMA: case A_CP: {
        double macs = 0, rate = V(tm, K_TC_MACS);
        int pair = 0;
        if (op->kind == A_MMA) {
            uint32_t id = op->u.mma.mma.idesc;
            double N = (double)(((id >> 17) & 0x3fu) << 3), M = (double)(((id >> 24) & 0x1fu) << 4);
            double K = op->u.mma.mma.kind == TC_KIND_F8F6F4 ? 32 : op->u.mma.mma.kind == TC_KIND_TF32 ? 8 : 16;
            if (op->u.mma.mma.kind == TC_KIND_F8F6F4) rate *= V(tm, K_TC_FP8_X);
            pair = op->u.mma.mma.cta_group == 2;
            macs = M * N * K / (pair ? 2 : 1); /* .cta_group::2: each SM of the pair does half */
            tm->tc_flops += 2 * M * N * K;
        } else {
            macs = 0;
            pair = op->u.cp.cta_group == 2;
        }
        start = fmax(now, tm->tc_free[sm]);
        if (pair && (sm ^ 1) < s->ncta) start = fmax(start, tm->tc_free[sm ^ 1]);
        double dur = op->kind == A_CP ? 128.0 * 16 / V(tm, K_TMEM_BW) : macs / rate;
        tm->tc_free[sm] = start + dur;
        if (pair && (sm ^ 1) < s->ncta) tm->tc_free[sm ^ 1] = start + dur, tm->busy[TP_TC] += dur;
        tm->busy[TP_TC] += dur;
        ready = start + dur + V(tm, K_TC_LAT);
        break;
    }
    case A_COMMIT: ready = fmax(now, tm->tc_free[sm] + V(tm, K_TC_LAT)); break;
    case A_TMA_LOAD: case A_BULK_LOAD: case A_CPA: {
        double bytes = op_bytes(op, &rows);
        int n = op->kind == A_CPA ? 1 : op->u.tma.nctas;
        double *eng = op->kind == A_CPA ? &tm->lsu_free[sm] : &tm->tma_free[sm];
        double over = op->kind == A_CPA ? 0 : V(tm, K_TMA_OP) + rows * V(tm, K_TMA_ROW);
        start = fmax(now, *eng);
        double dur = bytes / (op->kind == A_CPA ? tm->cpa_bw_sm : tm->l2_bw_sm);
        *eng = start + fmax(dur, over);
        tm->busy[TP_TMA] += fmax(dur, over);
        tm->bytes.loaded += (uint64_t)bytes * (uint64_t)(n > 0 ? 1 : 0);
        ready = start + fmax(dur, over) + (op->kind == A_CPA ? V(tm, K_GMEM_LAT) : V(tm, K_TMA_LAT));
        break;
    }
    case A_TMA_STORE: case A_BULK_STORE: {
        double bytes = op_bytes(op, &rows);
        start = fmax(now, tm->tmas_free[sm]);
        double dur = fmax(bytes / tm->l2_bw_sm, V(tm, K_TMA_OP));
        tm->tmas_free[sm] = start + dur;
        ready = start + dur + V(tm, K_TMA_LAT);
        break;
    }
    case A_CPA_ARRIVE: ready = now; break;
    default: break;
    }
    /* in-order streams (a CTA's tcgen05 pipe, a warpgroup's wgmmas) complete in order */
    if (op->stream >= 0 && op->stream < s->nstreams) {
        if (ready < tm->stream_last[op->stream]) ready = tm->stream_last[op->stream];
        tm->stream_last[op->stream] = ready;
    }
    op->ready = (uint64_t)ceil(ready);
}

static double wake_latency(const Timing *tm, int blk)
{
    switch (blk - 1) {
    case TS_MBAR: return V(tm, K_MBAR_WAKE);
    case TS_BAR: return V(tm, K_BAR_WAKE);
    case TS_CLUSTER: return V(tm, K_CLUSTER_WAKE);
    case TS_WG: case TS_BULK: case TS_CPA: return V(tm, K_MBAR_WAKE);
    default: return 1;
    }
}

/* After an event: warps that were blocked and have a running thread again wake at now + latency;
 * warps that have none block, recording why. */
static void wake_scan(Sim *s, Timing *tm)
{
    for (int w = 0; w < s->nwarps; w++) {
        if (tm->wblk[w] < 0) continue;
        const Warp *wp = &s->warps[w];
        int run = 0, why = -1, live = 0;
        for (int i = wp->first; i < wp->first + wp->n; i++) {
            int st = s->th[i].state;
            if (st == TS_RUN) { run = 1; break; }
            if (st != TS_EXIT) { live = 1; if (why < 0 || st != TS_COLL) why = st; }
        }
        if (run) {
            if (tm->wblk[w] > 0) {
                double t = tm->now + wake_latency(tm, tm->wblk[w]);
                if (t > tm->wnext[w]) tm->wnext[w] = t, tm->wwhy[w] = 'b'; /* woken */
            }
            tm->wblk[w] = 0;
        } else if (!live) {
            tm->wblk[w] = -1;
            if (tm->now > tm->end) tm->end = tm->now;
        } else if (!tm->wblk[w]) {
            tm->wblk[w] = (int8_t)(why + 1);
        }
    }
}

/* When warp w's next instruction can issue, and at what cost. */
static double issue_time(Sim *s, Timing *tm, int w, const Ins *in, Cost *c)
{
    int sm = s->warps[w].cta, p = warp_smsp(s, w);
    *c = cost_of(tm, in, in > s->e->ins ? in - 1 : NULL);
    double t = tm->wnext[w];
    double r = operands_ready(tm, w, in);
    tm->why = tm->wwhy[w] ? tm->wwhy[w] : 'w'; /* the warp's own last issue or wake-up, or what put it off */
    if (r > t) t = r, tm->why = 'r';
    if (in->op == OP_WG_MMA && tm->tc_queue && tm->qn[sm] >= (unsigned)tm->tc_queue) {
        double f = tm->qfin[sm][tm->qn[sm] % (unsigned)tm->tc_queue]; /* the one accepted D ago must have ended */
        if (f > t) t = f, tm->why = 'q';
    }
    if (c->free) return t;
    if (tm->slot[sm][p] > t) t = tm->slot[sm][p], tm->why = 's';
    if (tm->pipe[sm][p][c->pipe] > t) t = tm->pipe[sm][p][c->pipe], tm->why = 'p';
    if (c->pipe == PI_SMEM && tm->smem_free[sm] > t) t = tm->smem_free[sm], tm->why = 'm';
    if (is_global_store(in) && tm->st_free[sm] > t) t = tm->st_free[sm], tm->why = 'g';
    return t;
}

/* Issues one instruction of warp w at time t: the threads at the pc of its first running thread. */
static void issue(Sim *s, Timing *tm, int w, const Ins *in, const Cost *c0, double t)
{
    Warp *wp = &s->warps[w];
    int sm = wp->cta, p = warp_smsp(s, w);
    Cost c = *c0;
    Thread *ts[32];
    int n = 0, pc = -1;
    for (int i = wp->first; i < wp->first + wp->n; i++) {
        Thread *th = &s->th[i];
        if (th->state != TS_RUN) continue;
        if (pc < 0) pc = th->pc;
        if (th->pc == pc) ts[n++] = th;
    }
    if (c.pipe == PI_SMEM && (in->op == OP_LD || in->op == OP_ST || in->op == OP_STMATRIX)) {
        int wf = in->op == OP_STMATRIX ? stmatrix_wavefronts(s, ts, n, in) : smem_wavefronts(s, ts, n, in);
        c.interval = wf;
        c.lat += wf - 1;
        tm->smem_free[sm] = t + wf;
        tm->busy[TP_SMEM] += wf;
    } else if (is_global_store(in)) {
        double busy = store_clocks(tm, s, ts, n, in);
        tm->st_free[sm] = t + busy;
        tm->busy[TP_GMEM] += busy;
    } else if (in->op == OP_TC_LD || in->op == OP_TC_ST) {
        /* 32 lanes x the shape's registers per lane x 4 bytes */
        int nr = in->ops[in->op == OP_TC_LD ? 0 : 1].nvec;
        double wf = 32.0 * 4 * (nr > 0 ? nr : 1) / V(tm, K_TMEM_BW);
        tm->busy[TP_TMEM] += wf;
        c.lat += wf;
        if (in->op == OP_TC_LD && t + c.lat > tm->ldready[w]) tm->ldready[w] = t + c.lat;
    }
    double slot = c.issues;
    if (!c.free && c.pipe != PI_TC && tc_beside(tm, sm, t)) {
        c.interval /= V(tm, K_TC_BESIDE);
        slot /= V(tm, K_TC_BESIDE);
    }
    if (c.pipe == PI_FMA && !c.free) c.interval = fma_clash(s, tm, sm, p, t, c.interval);
    if (!c.free) {
        tm->slot[sm][p] = t + slot;
        tm->pipe[sm][p][c.pipe] = t + c.interval;
        tm->busy[TP_ISSUE] += c.issues;
        if (c.tp != TP_ISSUE && c.tp != TP_SMEM && c.tp != TP_TMEM) tm->busy[c.tp] += c.interval;
    }
    tm->wnext[w] = t + (c.free ? 0 : c.issues);
    if (!c.free) tm->wlast[w] = t;
    if (w == tm->trace_warp) /* reason: w own/wake, r registers, q wgmma queue, s issue slot, p pipe, m smem, g store */
        fprintf(stderr, "fa4sim-trace: cta %d warp %d t=%.1f line %d %s why=%c interval=%.2f%s\n", sm, w, t, in->line,
                ptx_op_name(in->op), tm->why, c.interval, c.free ? " free" : "");
    tm->wwhy[w] = 0;
    tm->now = t;
    /* results */
    if (has_dest(in->op) && in->nops) {
        double at = t + c.lat;
        regs_of(tm, w, &in->ops[0], reg_set, &at);
    }
    for (int i = 0; i < n && !s->status; i++) sim_run_thread(s, ts[i], 1);
    if (!s->status) sim_try_collective(s, w);
}

/* Runs the cluster to its end under the clock (replaces sim.c's random scheduler). */
void timing_run_cluster(Sim *s)
{
    Timing *tm = s->tm;
    wake_scan(s, tm);
    while (!s->status) {
        /* the warp that can issue first; of warps ready at the same clock, the one that issued least recently: a
         * sub-partition's scheduler alternates between warps that are always ready (mb_share_fma / _mufu on an H200:
         * both warps of a sub-partition ended within 0.1% / 5% of each other; a fixed order ended one at half time) */
        int bw = -1;
        for (int w = 0; w < s->nwarps; w++)
            if (!tm->wblk[w] && (bw < 0 || tm->wnext[w] < tm->wnext[bw] ||
                                 (tm->wnext[w] == tm->wnext[bw] && !tm->warp_fixed && tm->wlast[w] < tm->wlast[bw])))
                bw = w;
        int bo = -1;
        for (int i = 0; i < s->nops; i++)
            if (sim_op_eligible(s, s->ops[i]) && (bo < 0 || s->ops[i]->ready < s->ops[bo]->ready)) bo = i;
        if (bo >= 0 && (bw < 0 || (double)s->ops[bo]->ready <= tm->wnext[bw])) {
            if (s->ops[bo]->kind == A_WGMMA && tm->tcq[s->ops[bo]->cta].dirty) { /* the pipe lost clocks since */
                tc_project(tm, s->ops[bo]->cta, NULL);
                continue;
            }
            if ((double)s->ops[bo]->ready > tm->now) tm->now = (double)s->ops[bo]->ready;
            int kind = s->ops[bo]->kind;
            sim_complete_op(s, bo);
            if (tm->now > tm->end) tm->end = tm->now;
            if (kind == A_CPA || kind == A_CPA_ARRIVE)
                for (int i = 0; i < s->nthreads; i++)
                    if (s->th[i].state == TS_CPA) s->th[i].state = TS_RUN;
            wake_scan(s, tm);
            continue;
        }
        if (bw < 0) {
            if (!s->live && !s->nops) break;
            sim_report_deadlock(s);
            break;
        }
        /* the warp's next instruction: the pc of its first running thread */
        const Warp *wp = &s->warps[bw];
        int pc = -1;
        for (int i = wp->first; i < wp->first + wp->n && pc < 0; i++)
            if (s->th[i].state == TS_RUN) pc = s->th[i].pc;
        if (pc < 0 || pc >= s->e->nins) { /* runs off the end: exits at once */
            for (int i = wp->first; i < wp->first + wp->n; i++)
                if (s->th[i].state == TS_RUN) sim_run_thread(s, &s->th[i], 1);
            wake_scan(s, tm);
            continue;
        }
        const Ins *in = &s->e->ins[pc];
        Cost c;
        double t = issue_time(s, tm, bw, in, &c);
        if (t > tm->wnext[bw]) { tm->wnext[bw] = t, tm->wwhy[bw] = tm->why; continue; } /* others may go first */
        issue(s, tm, bw, in, &c, t);
        wake_scan(s, tm);
        if (tm->now > tm->end) tm->end = tm->now;
    }
}

double timing_cluster_end(const Timing *tm) { return tm->end; }

/* ------------------------------------------------------------ the launch */
/* Resident CTAs per SM: shared memory, warps, registers and the CTA limit. Registers: the PTX does not
 * say how many ptxas gives a thread, but .maxnreg caps it, and a kernel that asks .minnctapersm N gets at
 * most the file's share, 64K / (threads x N) rounded down to 8 (fa4gen's kernels that use setmaxnreg fix
 * their entry count there, and the ptxas matrices check ptxas's count against it); without either, no
 * register limit is applied. Leaving registers out let two 512-thread CTAs of 128 registers share an SM:
 * persistent=0 kernels were predicted 27-49% faster than measured (bench/NOTES.md, timing A/B). */
static int occupancy(const SimLaunch *l, const TimingGpu *g)
{
    int threads = (int)(l->block[0] * l->block[1] * l->block[2]);
    int warps = (threads + 31) / 32;
    double smem = (double)l->dyn_smem + l->entry->static_smem + 1024;
    int by_smem = smem > 0 ? (int)(g->v[K_SMEM_SM_KIB] * 1024 / smem) : 64;
    int by_warps = (int)(g->v[K_MAX_WARPS_SM] / warps);
    int occ = by_smem < by_warps ? by_smem : by_warps;
    int file = (int)g->v[K_REGS_SM], regs = l->entry->maxnreg;
    if (!regs && l->entry->minctas > 0 && threads > 0) regs = file / (threads * l->entry->minctas) / 8 * 8;
    if (regs > 255) regs = 255;
    if (regs > 0 && threads > 0 && file / (threads * regs) < occ) occ = file / (threads * regs);
    if (occ > (int)g->v[K_MAX_CTAS_SM]) occ = (int)g->v[K_MAX_CTAS_SM];
    return occ < 1 ? 1 : occ;
}

/* What a cluster took: its clocks and the bytes its loads moved (its share of the DRAM traffic); for a place a
 * cluster runs on (Slot), the sums over the clusters it ran in turn. */
typedef struct Work { double cycles, bytes; } Work;
typedef struct Sample { unsigned x; Work w; } Sample;
typedef Work Slot;

/* A cluster at x: its work interpolated between the samples'. */
static Work interp(const Sample *sm, int n, unsigned x)
{
    if (n == 1 || x <= sm[0].x) return sm[0].w;
    for (int i = 1; i < n; i++)
        if (x <= sm[i].x) {
            double f = (double)(x - sm[i - 1].x) / (double)(sm[i].x - sm[i - 1].x);
            const Work *a = &sm[i - 1].w, *b = &sm[i].w;
            return (Work){a->cycles + f * (b->cycles - a->cycles), a->bytes + f * (b->bytes - a->bytes)};
        }
    return sm[n - 1].w;
}

/* The last cluster differs from the first by more than 10% in clocks or loaded bytes (a persistent grid whose CTAs
 * run 16 or 15 tiles is not ragged: the line between them is the mean). */
static int ragged(const Work *first, const Work *last)
{
    return fabs(last->cycles - first->cycles) > 0.1 * first->cycles || fabs(last->bytes - first->bytes) > 0.1 * first->bytes;
}

static int cmp_slot(const void *a, const void *b)
{
    double x = ((const Slot *)a)->cycles, y = ((const Slot *)b)->cycles;
    return x < y ? -1 : x > y;
}

/* List scheduling of the grid's clusters in launch order (x fastest) on `slots` places: the makespan, and in
 * slot[] what each place ran. A cluster's clocks and bytes are interpolated from the samples by its x index. */
static double makespan(const unsigned nc[3], int slots, const Sample *sm, int n, Slot *slot, int *waves)
{
    uint64_t total = (uint64_t)nc[0] * nc[1] * nc[2];
    if (slots < 1) slots = 1;
    double m = 0;
    if (total <= (uint64_t)slots) {
        for (uint64_t i = 0; i < total; i++) {
            slot[i] = interp(sm, n, (unsigned)(i % nc[0]));
            m = fmax(m, slot[i].cycles);
        }
        *waves = 1;
        return m;
    }
    /* a min-heap of slot free times would be exact; the grid sizes here (<= 1e6) allow a sorted sweep
     * in rounds: each round every slot takes the next cluster (equal-time clusters keep the order) */
    uint64_t i = 0;
    int rounds = 0;
    while (i < total) {
        qsort(slot, (size_t)slots, sizeof *slot, cmp_slot);
        for (int k = 0; k < slots && i < total; k++, i++) {
            Work w = interp(sm, n, (unsigned)(i % nc[0]));
            slot[k].cycles += w.cycles, slot[k].bytes += w.bytes;
        }
        rounds++;
    }
    for (int k = 0; k < slots; k++) m = fmax(m, slot[k].cycles);
    *waves = rounds;
    return m;
}

/* A place's draw on the DRAM: the rate it wants, its bytes left (of 1; 0: done) and the rate it gets now. */
typedef struct Draw { double want, left, rate; } Draw;

static int cmp_want(const void *a, const void *b)
{
    double x = ((const Draw *)a)->want, y = ((const Draw *)b)->want;
    return x < y ? -1 : x > y;
}

/* The DRAM shared by the places: each place's share of the launch's DRAM bytes is its share of the loaded bytes;
 * it draws them no faster than its own clocks allow (bytes / clocks, the rate it had with the L2 alone) and the
 * places still running split `dram_cycles`' rate evenly, what one cannot take going to the others (max-min fair
 * sharing). The launch ends when the last place has its bytes: at least the busiest place's clocks and the DRAM
 * bound, and more where the bound holds while the places' loads are uneven -- then the busy places' tail gets
 * the bandwidth the idle ones left, but only up to their own rate. */
static double dram_shared(const Slot *slot, int n, double dram_cycles)
{
    double sum_b = 0, span = 0;
    for (int k = 0; k < n; k++) sum_b += slot[k].bytes, span = fmax(span, slot[k].cycles);
    if (!(sum_b > 0) || !(dram_cycles > 0)) return fmax(span, dram_cycles);
    Draw *p = calloc((size_t)n, sizeof *p);
    if (!p) return fmax(span, dram_cycles);
    int live = 0;
    double t = 0, cap = 1.0 / dram_cycles;
    for (int k = 0; k < n; k++) {
        double share = slot[k].bytes / sum_b;
        if (share > 0 && slot[k].cycles > 0) p[live++] = (Draw){share / slot[k].cycles, share, 0};
        else t = fmax(t, slot[k].cycles); /* a place without loads: its own clocks */
    }
    qsort(p, (size_t)live, sizeof *p, cmp_want); /* the water-filling order */
    double now = 0;
    for (int left = live; left > 0;) {
        /* this turn's rates (each what it wants, at most an even split of what the lower ones left), then the
         * time to the first place's end */
        double rest = cap, dt = INFINITY;
        for (int k = 0, count = left; k < live; k++)
            if (p[k].left > 0) {
                p[k].rate = fmin(p[k].want, rest / count--);
                rest -= p[k].rate;
                dt = fmin(dt, p[k].left / p[k].rate);
            }
        for (int k = 0; k < live; k++)
            if (p[k].left > 0 && (p[k].left -= p[k].rate * dt) <= 1e-12) p[k].left = 0, left--;
        now += dt;
    }
    free(p);
    return fmax(t, now);
}

/* The launch's window: the clusters simulated under the clock, their units' busy clocks and the bytes they moved. */
typedef struct Window {
    const SimLaunch *l;
    double l2_bw_sm, cpa_bw_sm; /* an SM's share of the L2 and gather bandwidth under the launch */
    char **report;
    TimingOut *out;             /* busy, tc_flops, window_cycles summed over the samples */
    TimingBytes moved;
} Window;

/* Simulates the cluster at x (y = z = 0) under the clock into *s and the window's sums. */
static int time_sample(Window *win, unsigned x, Sample *s)
{
    double cyc = 0, busy[TP_COUNT] = {0}, flops = 0;
    uint64_t loaded = win->moved.loaded;
    int st = sim_run_cluster_timed(win->l, x, 0, 0, win->l2_bw_sm, win->cpa_bw_sm, win->report, &cyc, busy, &flops,
                                   &win->moved);
    if (st) return st;
    *s = (Sample){x, {cyc, (double)(win->moved.loaded - loaded)}};
    for (int u = 0; u < TP_COUNT; u++) win->out->busy[u] += busy[u];
    win->out->tc_flops += flops;
    win->out->window_cycles = fmax(win->out->window_cycles, cyc);
    return SIM_OK;
}

static const char *const tp_names[TP_COUNT] = {"issue", "fma", "alu", "mufu", "cvt", "shfl", "smem", "gmem", "tc", "tma", "tmem"};
const char *timing_unit_name(int u) { return u >= 0 && u < TP_COUNT ? tp_names[u] : "?"; }

int timing_run_launch(const SimLaunch *l, char **report)
{
    const TimingLaunch *tl = l->timing;
    const TimingGpu *g = tl->gpu;
    TimingOut *out = l->tout;
    unsigned nc[3] = {l->grid[0] / l->cluster[0], l->grid[1] / l->cluster[1], l->grid[2] / l->cluster[2]};
    int csize = (int)(l->cluster[0] * l->cluster[1] * l->cluster[2]);
    uint64_t total = (uint64_t)nc[0] * nc[1] * nc[2];
    int occ = occupancy(l, g);
    int sms = (int)g->v[K_SMS];
    int slots = sms / csize * occ;
    int active = (int)((uint64_t)csize * total < (uint64_t)sms ? (uint64_t)csize * total : (uint64_t)sms);
    /* the clusters to simulate: up to `samples` distinct x indices at y = z = 0, evenly spread, then the last one's
     * neighbour where the last is ragged (its clocks or loaded bytes more than 10% off the first's: a short split, a
     * partial tile) -- without it the line drawn to the last spreads its shortness over the clusters between */
    int want = tl->samples > 0 ? tl->samples : 4;
    if ((unsigned)want > nc[0]) want = (int)nc[0];
    if (want > 63) want = 63;
    unsigned xs[64];
    int nx = 0;
    for (int k = 0; k < want; k++) {
        unsigned x = want == 1 ? 0 : (unsigned)((double)k * (nc[0] - 1) / (want - 1) + 0.5);
        if (!nx || xs[nx - 1] != x) xs[nx++] = x;
    }
    Sample sm[64];
    int n = 0, st = SIM_OK;
    memset(out, 0, sizeof *out);
    Window win = {l, fmin(g->v[K_L2_SM_BW], g->v[K_L2_BW] / (active > 0 ? active : 1)),
                  fmin(g->v[K_CPA_SM_BW], g->v[K_CPA_BW] / (active > 0 ? active : 1)), report, out, {0, 0, 0}};
    for (int k = 0; k < nx && !st; k++) st = time_sample(&win, xs[k], &sm[n++]);
    if (!st && n >= 2 && sm[n - 2].x != nc[0] - 2 && ragged(&sm[0].w, &sm[n - 1].w)) {
        sm[n] = sm[n - 1]; /* x order: the neighbour before the last */
        st = time_sample(&win, nc[0] - 2, &sm[n - 1]);
        n++;
    }
    if (st) return st;
    const TimingBytes moved = win.moved;
    /* co-resident CTAs share their SM: a slot's time is at least occ x the busiest unit's share */
    double sum_cyc = 0;
    for (int i = 0; i < n; i++) sum_cyc += sm[i].w.cycles;
    if (occ > 1) {
        double worst = 0;
        for (int u = TP_FMA; u < TP_COUNT; u++) {
            double per_sm = out->busy[u] / ((double)n * csize) / (u <= TP_SHFL ? 4.0 : 1.0);
            if (per_sm > worst) worst = per_sm;
        }
        for (int i = 0; i < n; i++) sm[i].w.cycles = fmax(sm[i].w.cycles, occ * worst * sm[i].w.cycles / (sum_cyc / n));
    }
    int waves = 1;
    int places = slots > 0 ? slots : 1; /* as makespan counts them */
    Slot *slot = calloc((size_t)places, sizeof *slot);
    if (!slot) {
        if (report) *report = strdup("out of memory\n");
        return SIM_FAULT;
    }
    double span = makespan(nc, slots, sm, n, slot, &waves);
    /* the grid's memory bounds: unique bytes from DRAM, the window's loads scaled over L2. Bytes the grid prefetches
     * into L2 (then loads) come from DRAM at pf_gbs, not hbm_gbs; those prefetched before griddepcontrol.wait start
     * before the wait's release and the first loads' DRAM latency, taking up to pf_head_us off (mb_pdl on an H200:
     * prefetching 8.7-77.9 MB of a 26-78 MB stream, then loading it, ended 0.090 us a prefetched MB later, less 0.94
     * us: one line over seven rows, at every size up to 1.5x the L2's 50 MB, with no sign of the L2's capacity) */
    double hz = g->v[K_CLOCK_GHZ] * 1e9, per = (double)total / n;
    double pf = fmin((double)moved.prefetched * per, (double)tl->hbm_bytes), early = (double)moved.prefetched_early * per;
    double hbm_s = ((double)tl->hbm_bytes - pf) / (g->v[K_HBM_GBS] * 1e9) + pf / (g->v[K_PF_GBS] * 1e9);
    out->head_us = fmin(1e6 * fmin(early, pf) / (g->v[K_HBM_GBS] * 1e9), g->v[K_PF_HEAD_US]);
    out->hbm_cycles = (hbm_s - out->head_us * 1e-6) * hz;
    out->l2_cycles = (double)moved.loaded * per / g->v[K_L2_BW];
    out->prefetch_mb = pf / 1e6;
    /* the DRAM bound shared by the places as their loads fall (an uneven persistent grid under it: its busiest
     * CTAs still stream after the others ended) */
    double dram = dram_shared(slot, total < (uint64_t)places ? (int)total : places, out->hbm_cycles);
    free(slot);
    out->dram_cycles = dram;
    double cyc = fmax(dram, out->l2_cycles);
    out->cycles = cyc;
    out->us = cyc / hz * 1e6 + g->v[l->pdl ? K_GAP_PDL_US : K_LAUNCH_US];
    out->clusters = (int)(total > 0x7fffffff ? 0x7fffffff : total);
    out->simulated = n, out->waves = waves, out->occupancy = occ;
    out->tflops = out->tc_flops * ((double)total / n) / (out->us * 1e-6) / 1e12;
    /* utilisation: busy clocks over the simulated clusters' span, per unit (sub-partition units per
     * sub-partition) */
    for (int u = 0; u < TP_COUNT; u++) out->span[u] = sum_cyc * csize * (u <= TP_SHFL ? 4.0 : 1.0);
    const char *b = "latency";
    double best = 0.5; /* a unit under 50% busy is not the bottleneck */
    for (int u = 0; u < TP_COUNT; u++) {
        double f = out->span[u] > 0 ? out->busy[u] / out->span[u] : 0;
        if (f > best) best = f, b = tp_names[u];
    }
    /* the DRAM, when it ends the launch and is busy at least half of it (as a unit: the shared-DRAM makespan ends
     * a hair after the clocks' span whenever any bytes are loaded) */
    if (dram > span && dram >= out->l2_cycles && out->hbm_cycles >= 0.5 * dram) b = "hbm";
    else if (out->l2_cycles >= span) b = "l2";
    snprintf(out->bottleneck, sizeof out->bottleneck, "%s", b);
    return SIM_OK;
}

/* Hook used by sim.c to give a cluster its Timing: the L2 share is the launch's. */
double timing_now(const Timing *tm) { return tm->now; }

void timing_set_share(Timing *tm, double l2_bw_sm, double cpa_bw_sm)
{
    tm->l2_bw_sm = l2_bw_sm > 0 ? l2_bw_sm : 1;
    tm->cpa_bw_sm = cpa_bw_sm > 0 ? cpa_bw_sm : 1;
}

void timing_collect(const Timing *tm, double *cycles, double busy[TP_COUNT], double *flops, TimingBytes *bytes)
{
    *cycles = tm->end;
    for (int u = 0; u < TP_COUNT; u++) busy[u] += tm->busy[u];
    *flops += tm->tc_flops;
    bytes->loaded += tm->bytes.loaded;
    bytes->prefetched += tm->bytes.prefetched;
    bytes->prefetched_early += tm->bytes.prefetched_early;
}

/* ------------------------------------------------------------ ptxas's schedule, approximated */
/* The model issues a warp's instructions in program order, stalling on each operand; ptxas does not: it renames
 * registers that PTX reuses and interleaves independent dependency chains. timing_schedule approximates that on
 * the decoded PTX once, at load, in timing mode: within each basic block, a register defined more than once by
 * pure instructions (arithmetic, compare, select, conversion, MUFU, register moves; unguarded) and named by no
 * other instruction of the block gets a fresh register for each definition but the last; then each run of pure
 * instructions between two others is list-scheduled as one warp would issue it: one instruction a clock, the
 * oldest whose operands are ready first (latencies from the table), its dependencies kept (read after write,
 * and the write-after-read/write orders renaming left). Memory, synchronisation, async and control instructions
 * neither move nor let anything cross them. The values computed are the same; only their order changes. */
static int sched_pure(const Ins *in)
{
    switch (in->op) {
    case OP_MOV:
        for (int i = 0; i < in->nops; i++)
            if (in->ops[i].kind == O_SPECIAL) return 0;
        return 1;
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_MAD: case OP_FMA: case OP_MIN: case OP_MAX: case OP_NEG:
    case OP_ABS: case OP_NOT: case OP_AND: case OP_OR: case OP_XOR: case OP_SHL: case OP_SHR: case OP_SELP:
    case OP_SETP: case OP_CVT: case OP_EX2: case OP_LG2: case OP_RCP: case OP_SQRT: case OP_RSQRT: case OP_TANH:
    case OP_BFE: case OP_POPC: case OP_CLZ: case OP_PRMT: case OP_LOP3: case OP_BFIND: case OP_BREV: case OP_BFI:
    case OP_SHF: case OP_COPYSIGN: case OP_DIV: case OP_REM:
        return 1;
    default: return 0;
    }
}

typedef struct SchedRegs { int *r; int n, cap; } SchedRegs;

static void sched_collect(const Operand *o, SchedRegs *out)
{
    switch (o->kind) {
    case O_REG:
        if (out->n < out->cap) out->r[out->n++] = o->reg;
        break;
    case O_VEC: case O_MEM: case O_PAIR:
        for (int i = 0; i < o->nvec; i++) sched_collect(&o->vec[i], out);
        break;
    default: break;
    }
}

/* the registers a pure instruction writes (ops[0]) and reads (the rest and its guard) */
static void sched_defs_uses(const Ins *in, SchedRegs *d, SchedRegs *u)
{
    d->n = u->n = 0;
    if (in->nops) sched_collect(&in->ops[0], d);
    for (int i = 1; i < in->nops; i++) sched_collect(&in->ops[i], u);
    if (in->guard >= 0 && u->n < u->cap) u->r[u->n++] = in->guard;
    if (in->guard >= 0) /* a guarded definition keeps the old value where it does not execute */
        for (int i = 0; i < d->n && u->n < u->cap; i++) u->r[u->n++] = d->r[i];
}

static void sched_rename(Operand *o, const int *cur)
{
    switch (o->kind) {
    case O_REG: o->reg = cur[o->reg]; break;
    case O_VEC: case O_MEM: case O_PAIR:
        for (int i = 0; i < o->nvec; i++) sched_rename(&o->vec[i], cur);
        break;
    default: break;
    }
}

/* Fresh registers for all but the last definition of each renamable register of block [a, b). */
static int sched_rename_block(PtxEntry *e, int a, int b, int *bad, int *left, int *cur, int *nfresh,
                              int *capfresh)
{
    int db[64], ub[64];
    SchedRegs d = {db, 0, 64}, u = {ub, 0, 64};
    for (int i = a; i < b; i++) {
        const Ins *in = &e->ins[i];
        sched_defs_uses(in, &d, &u);
        if (!sched_pure(in)) {
            for (int k = 0; k < in->nops; k++) {
                SchedRegs all = {db, 0, 64};
                sched_collect(&in->ops[k], &all);
                for (int j = 0; j < all.n; j++) bad[all.r[j]] = 1;
            }
            if (in->guard >= 0) bad[in->guard] = 1;
            continue;
        }
        for (int j = 0; j < d.n; j++) {
            left[d.r[j]]++;
            if (in->guard >= 0 || d.n > 1) bad[d.r[j]] = 1;
        }
    }
    for (int i = a; i < b; i++) {
        Ins *in = &e->ins[i];
        if (!sched_pure(in)) continue;
        for (int k = 1; k < in->nops; k++) sched_rename(&in->ops[k], cur);
        if (in->guard >= 0) in->guard = cur[in->guard];
        if (in->nops && in->ops[0].kind == O_REG) {
            int r = in->ops[0].reg;
            if (!bad[r] && --left[r] > 0) {
                if (*nfresh == *capfresh) {
                    int nc = *capfresh ? 2 * *capfresh : 256;
                    PtxReg *nr = realloc(e->regs, sizeof(PtxReg) * (size_t)(e->nregs + nc)); /* ptx_free frees it */
                    if (!nr) return -1;
                    e->regs = nr, *capfresh = nc, *nfresh = 0;
                }
                int f = e->nregs++;
                (*nfresh)++;
                e->regs[f] = e->regs[r];
                cur[r] = f;
                in->ops[0].reg = f;
            } else {
                cur[r] = r;
            }
        }
    }
    /* reset the per-block state of the registers this block touched */
    for (int i = a; i < b; i++) {
        const Ins *in = &e->ins[i];
        for (int k = 0; k < in->nops; k++) {
            SchedRegs all = {db, 0, 64};
            sched_collect(&in->ops[k], &all);
            for (int j = 0; j < all.n; j++) bad[all.r[j]] = 0, left[all.r[j]] = 0;
        }
        if (in->guard >= 0) bad[in->guard] = left[in->guard] = 0;
    }
    return 0;
}

/* List-schedules the pure run [a, b) as one warp would issue it; rewrites it in that order. wr_by / rd_by: per
 * register, the run's last writer and last reader since (-1 outside a run). */
typedef struct SchedEdge { int from, to; double del; } SchedEdge;

static int sched_run(PtxEntry *e, int a, int b, const Timing *tm, int *wr_by, int *rd_by)
{
    int n = b - a, ne = 0, cape = 4 * (b - a) + 64;
    if (n < 2) return 0;
    double *ready = calloc((size_t)n, sizeof(double)), *lat = calloc((size_t)n, sizeof(double));
    int *npred = calloc((size_t)n, sizeof(int)), *order = calloc((size_t)n, sizeof(int));
    int *first = calloc((size_t)n + 1, sizeof(int));
    SchedEdge *ed = malloc(sizeof(SchedEdge) * (size_t)cape), *es = NULL;
    Ins *copy = malloc(sizeof(Ins) * (size_t)n);
    char *done = calloc((size_t)n, 1);
    int db[64], ub[64], rc = -1;
    SchedRegs d = {db, 0, 64}, u = {ub, 0, 64};
    if (!ready || !lat || !npred || !order || !first || !ed || !copy || !done) goto out;
    /* dependencies: the last writer of each read register (its latency), of each written register and its
     * last reader since (order only) */
    for (int i = 0; i < n; i++) {
        const Ins *in = &e->ins[a + i];
        Cost c = cost_of(tm, in, i ? in - 1 : NULL);
        lat[i] = c.free ? 0 : c.lat;
        sched_defs_uses(in, &d, &u);
        for (int j = 0; j < u.n + 2 * d.n; j++) {
            int p = j < u.n ? wr_by[u.r[j]] : (j - u.n) % 2 ? rd_by[d.r[(j - u.n) / 2]] : wr_by[d.r[(j - u.n) / 2]];
            if (p < 0 || p == i) continue;
            if (ne == cape) {
                SchedEdge *x = realloc(ed, sizeof(SchedEdge) * (size_t)(cape *= 2));
                if (!x) goto out;
                ed = x;
            }
            ed[ne++] = (SchedEdge){p, i, j < u.n ? lat[p] : (j - u.n) % 2 ? 0 : 1};
            npred[i]++;
        }
        for (int j = 0; j < u.n; j++) rd_by[u.r[j]] = i;
        for (int j = 0; j < d.n; j++) wr_by[d.r[j]] = i, rd_by[d.r[j]] = -1;
    }
    /* successors by source (counting sort) */
    es = malloc(sizeof(SchedEdge) * (size_t)(ne ? ne : 1));
    if (!es) goto out;
    for (int k = 0; k < ne; k++) first[ed[k].from + 1]++;
    for (int i = 0; i < n; i++) first[i + 1] += first[i];
    {
        int *fill = calloc((size_t)n, sizeof(int));
        if (!fill) goto out;
        for (int k = 0; k < ne; k++) es[first[ed[k].from] + fill[ed[k].from]++] = ed[k];
        free(fill);
    }
    double t = 0;
    int lo = 0;
    for (int k = 0; k < n; k++) {
        int best = -1, early = -1;
        for (int i = lo; i < n; i++) {
            if (done[i] || npred[i]) continue;
            if (ready[i] <= t) { best = i; break; }
            if (early < 0 || ready[i] < ready[early]) early = i;
        }
        if (best < 0) best = early, t = ready[early]; /* none ready: the earliest */
        done[best] = 1, order[k] = best;
        for (int q = first[best]; q < first[best + 1]; q++) {
            npred[es[q].to]--;
            if (t + es[q].del > ready[es[q].to]) ready[es[q].to] = t + es[q].del;
        }
        if (lat[best] > 0) t += 1;
        while (lo < n && done[lo]) lo++;
    }
    memcpy(copy, &e->ins[a], sizeof(Ins) * (size_t)n);
    for (int k = 0; k < n; k++) e->ins[a + k] = copy[order[k]];
    rc = 0;
out:
    /* clear the register maps for the next run */
    if (copy)
        for (int i = 0; i < n; i++) {
            sched_defs_uses(&e->ins[a + i], &d, &u);
            for (int j = 0; j < u.n; j++) rd_by[u.r[j]] = -1, wr_by[u.r[j]] = -1;
            for (int j = 0; j < d.n; j++) rd_by[d.r[j]] = -1, wr_by[d.r[j]] = -1;
        }
    free(ready), free(lat), free(npred), free(order), free(first), free(ed), free(es), free(copy), free(done);
    return rc;
}

int timing_schedule(PtxModule *m, const TimingGpu *g)
{
    Timing tm = {0};
    tm.g = g;
    for (int ei = 0; ei < m->nentries; ei++) {
        PtxEntry *e = &m->entries[ei];
        if (e->nins < 2) continue;
        /* block starts: branch targets and the instruction after a branch, return or exit */
        char *start = calloc((size_t)e->nins + 1, 1);
        if (!start) return -1;
        start[0] = 1;
        for (int i = 0; i < e->nins; i++) {
            const Ins *in = &e->ins[i];
            for (int k = 0; k < in->nops; k++)
                if (in->ops[k].kind == O_LABEL && in->ops[k].reg >= 0 && in->ops[k].reg < e->nins) start[in->ops[k].reg] = 1;
            if (in->op == OP_BRA || in->op == OP_RET || in->op == OP_EXIT) start[i + 1] = 1;
        }
        /* the renamed registers' count is not known in advance: maps sized for twice the instructions more */
        size_t cap = (size_t)e->nregs + (size_t)e->nins + 16;
        int *bad = calloc(cap, sizeof(int)), *left = calloc(cap, sizeof(int)), *cur = malloc(cap * sizeof(int));
        int *wr_by = malloc(cap * sizeof(int)), *rd_by = malloc(cap * sizeof(int));
        if (!bad || !left || !cur || !wr_by || !rd_by) return -1;
        for (size_t r = 0; r < cap; r++) cur[r] = (int)r, wr_by[r] = rd_by[r] = -1;
        int nfresh = 0, capfresh = 0;
        for (int a = 0; a < e->nins;) {
            int b = a + 1;
            while (b < e->nins && !start[b]) b++;
            if (sched_rename_block(e, a, b, bad, left, cur, &nfresh, &capfresh)) return -1;
            for (int i = a; i < b; i++) {
                int j = i;
                while (j < b && sched_pure(&e->ins[j])) j++;
                if (j > i && sched_run(e, i, j, &tm, wr_by, rd_by)) return -1;
                i = j;
            }
            a = b;
        }
        free(start), free(bad), free(left), free(cur), free(wr_by), free(rd_by);
    }
    return 0;
}
