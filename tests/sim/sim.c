/* sim.c - the simulator core: threads, warps, the scheduler, memory with its
 * shadow, barriers, and the async units (see sim.h for the model).
 *
 * Hazards reported (each stops the run with the PTX line and the thread):
 *   - a read of shared memory or TMEM that was never written;
 *   - a read or write of a cp.async destination before the copy is published
 *     (wait_group / wait_all of its group, or the mbarrier phase it arrives on);
 *   - a read (by a thread, an MMA, a TMA store) of data whose write the reader
 *     has not acquired: an async write not yet published through the mbarrier
 *     the reader waited on, a tcgen05.st not followed by wait::st,
 *     fence::before_thread_sync and a release, a generic store read by the async
 *     proxy without fence.proxy.async;
 *   - a write over memory that an in-flight async op still reads or writes, and a
 *     read of memory an in-flight async op will write;
 *   - a register that an async op owns (tcgen05.ld before wait::ld, wgmma
 *     accumulators before wait_group) read or written;
 *   - TMEM lanes outside the warp's quarter (from tc.c), TMEM over-allocation,
 *     double or foreign free, a CTA exiting with TMEM allocated, a .cta_group::2
 *     op whose peer CTA is missing or exits (or frees its TMEM) before it completes;
 *   - a TMA load signalling an mbarrier outside its destination CTA (and, with
 *     .cta_group::2, outside the destination's pair);
 *   - an asynchronous tcgen05 op (mma, cp, ld, st) touching TMEM that another thread or the pipe wrote
 *     or read, ordered only by a wait or barrier with no tcgen05.fence::after_thread_sync after it (the
 *     thread's tcvc), or whose other side did not complete (wait::ld / wait::st) and execute
 *     tcgen05.fence::before_thread_sync between its access and the release (the fence logs); the same
 *     for a tcgen05.dealloc of cells other threads loaded or stored;
 *   - a wgmma.mma_async whose accumulator or A registers the thread accessed after its last wgmma.fence;
 *   - an mbarrier used (by a thread, or by the TMA / commit it issues) before its mbarrier.init is visible
 *     to that thread (fence.mbarrier_init.release.cluster counts for a .relaxed arrive after it);
 *   - setmaxnreg: .inc that the CTA's register pool (64K / CTAs per SM) can never grant, or waits for
 *     (a deadlock naming the warps at setmaxnreg.inc), .dec raising / .inc lowering the budget;
 *   - mbarrier misuse: arrive or complete_tx past what the phase expects, use
 *     of an uninitialised mbarrier, a thread's arrival not ordered after every thread arrival of the
 *     previous phase (on another schedule it would count toward that phase: an init count too low);
 *   - out-of-range shared or global addresses, a stmatrix row address not 16-byte aligned (SIM_FAULT);
 *   - a deadlock: no thread can move and no async op is pending; the report
 *     lists every warp's position.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

enum { SMEM_WINDOW = 1u << CLUSTER_SHIFT };

/* ------------------------------------------------------------ reports */
static void report_add(Sim *s, const char *fmt, va_list ap)
{
    char buf[2048];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof buf) n = sizeof buf - 1;
    if (s->rlen + (size_t)n + 2 > s->rcap) {
        size_t nc = s->rcap ? s->rcap * 2 : 4096;
        while (s->rlen + (size_t)n + 2 > nc) nc *= 2;
        char *r = realloc(s->report, nc);
        if (!r) return;
        s->report = r, s->rcap = nc;
    }
    memcpy(s->report + s->rlen, buf, (size_t)n);
    s->rlen += (size_t)n;
    s->report[s->rlen] = 0;
}

static void say(Sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(Sim *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report_add(s, fmt, ap);
    va_end(ap);
}

static const char *status_word(int st)
{
    switch (st) {
    case SIM_FAULT: return "fault";
    case SIM_HAZARD: return "hazard";
    case SIM_DEADLOCK: return "deadlock";
    default: return "unsupported";
    }
}

void sim_hazard(Sim *s, int status, const char *fmt, ...)
{
    if (s->status) return;
    s->status = status;
    const Ins *in = s->cur;
    Thread *t = s->cur_t;
    say(s, "%s", status_word(status));
    if (in) say(s, " at PTX line %d `%s`", in->line, ptx_line(s->l->mod, in->line));
    if (t)
        say(s, ", cluster (%u,%u,%u) CTA rank %d (ctaid %u) thread %d (warp %d lane %d)", s->clusterid[0],
            s->clusterid[1], s->clusterid[2], t->cta, s->cta[t->cta].ctaid[0], t->tid, t->tid / 32, t->lane);
    say(s, ": ");
    va_list ap;
    va_start(ap, fmt);
    report_add(s, fmt, ap);
    va_end(ap);
    say(s, "\n");
}

void sim_pend_hazard(Sim *s, Thread *t, int reg)
{
    sim_hazard(s, SIM_HAZARD, "register %s is still owned by an async op (tcgen05.ld before tcgen05.wait::ld, or a "
               "wgmma accumulator before wgmma.wait_group)", s->e->regs[reg].name);
    t->pend[reg] = 0; /* report once */
    t->npend--;
}

/* Registers owned by async ops: PEND_LD for a tcgen05.ld destination, plus a
 * count of in-flight wgmmas accumulating into it. */
enum { PEND_LD = 0x80 };

static void pend_own(Thread *t, int reg, int what)
{
    if (!t->pend[reg]) t->npend++;
    t->pend[reg] = (uint8_t)(what == PEND_LD ? t->pend[reg] | PEND_LD : t->pend[reg] + 1);
}

static void pend_release(Thread *t, int reg, int what)
{
    if (!t->pend[reg]) return;
    t->pend[reg] = (uint8_t)(what == PEND_LD ? t->pend[reg] & ~PEND_LD : t->pend[reg] - 1);
    if (!t->pend[reg]) t->npend--;
}

/* ------------------------------------------------------------ random */
static uint64_t rnd(Sim *s)
{
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int rnd_below(Sim *s, int n) { return n <= 1 ? 0 : (int)(rnd(s) % (uint64_t)n); }

/* ------------------------------------------------------------ clocks */
static int pipe_clk(Sim *s, int cta) { return s->nthreads + cta; }

static void vc_join(Sim *s, uint32_t *dst, const uint32_t *src)
{
    for (int i = 0; i < s->nclk; i++)
        if (src[i] > dst[i]) dst[i] = src[i];
}

/* A thread releases: what it has done so far becomes visible to whoever acquires `into`. */
static void release(Sim *s, Thread *t, uint32_t *into)
{
    vc_join(s, into, t->vc);
    t->vc[t->gtid]++;
}

static uint32_t *vc_alloc(Sim *s)
{
    uint32_t *v = calloc((size_t)s->nclk, sizeof *v);
    if (!v) sim_hazard(s, SIM_UNSUPPORTED, "out of memory");
    return v;
}

/* A .relaxed arrival: it releases what the thread did before its last fence.acq_rel / fence.sc (the
 * ISA's release pattern), nothing without one. */
static void release_relaxed(Sim *s, Thread *t, uint32_t *into)
{
    /* fence.mbarrier_init.release.cluster releases only the thread's mbarrier.inits before it: counted here as
     * a release of the thread's own epoch at that fence (so a relaxed arrive after it publishes the inits and
     * -- a simplification -- the thread's own other writes before that fence, but nothing it acquired) */
    if (t->mbinit_fenced && into[t->gtid] < t->mbinit_fenced) into[t->gtid] = t->mbinit_fenced;
    if (t->fence_ep) {
        uint32_t now = t->vc[t->gtid];
        t->vc[t->gtid] = t->fence_ep;
        vc_join(s, into, t->vc);
        t->vc[t->gtid] = now;
    }
    t->vc[t->gtid]++;
}

static void flog_add(Sim *s, FenceLog *f, uint32_t ep)
{
    if (f->n && f->e[f->n - 1] == ep) return;
    if (f->n == f->cap) {
        int nc = f->cap ? f->cap * 2 : 64;
        uint32_t *n = realloc(f->e, sizeof *n * (size_t)nc);
        if (!n) { sim_hazard(s, SIM_UNSUPPORTED, "out of memory"); return; }
        f->e = n, f->cap = nc;
    }
    f->e[f->n++] = ep;
}

/* Is there a fence f in the log with w <= f < r? */
static int flog_covers(const FenceLog *f, uint32_t w, uint32_t r)
{
    int lo = 0, hi = f->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (f->e[mid] < w) lo = mid + 1;
        else hi = mid;
    }
    return lo < f->n && f->e[lo] < r;
}

/* Does a reader that knows `vc` see the write recorded in sh? thread_reader:
 * the generic proxy reads (a thread's ld); otherwise the async proxy (MMA, TMA
 * store), which also needs the writer's proxy or tcgen05 fence. */
static const char *unpublished(Sim *s, const Shadow *sh, const uint32_t *vc, int self, int async_reader)
{
    if (sh->kind == W_NONE) return "was never written";
    if (sh->kind != W_ASYNC && sh->clk == self) {
        if (async_reader && sh->kind == W_THREAD && sh->ep > s->th[self].proxy_fenced)
            return "was written by this thread without fence.proxy.async before the async proxy reads it";
        return NULL;
    }
    if (vc[sh->clk] < sh->ep) {
        if (sh->kind == W_ASYNC) {
            return sh->clk >= s->nthreads + s->ncta ? "was written by an async unit (TMA or cp.async) whose "
                                                      "completion the reader has not waited for on its mbarrier"
                                                    : "was written by a tcgen05.mma whose commit the reader has not "
                                                      "waited for";
        }
        return sh->kind == W_TCST ? "was written by another thread's tcgen05.st that the reader has not acquired "
                                    "(missing wait::st, fence::before_thread_sync or a barrier between them)"
                                  : "was written by another thread that the reader has not synchronised with";
    }
    if (async_reader && sh->kind == W_THREAD && !flog_covers(&s->th[sh->clk].f_proxy, sh->ep, vc[sh->clk]))
        return "was written by a thread that did not execute fence.proxy.async between the write and the release "
               "the async proxy's reader acquired";
    if (sh->kind == W_TCST && !flog_covers(&s->th[sh->clk].f_tcst, sh->ep, vc[sh->clk]))
        return "was written by a tcgen05.st that its thread did not complete (tcgen05.wait::st) and fence "
               "(tcgen05.fence::before_thread_sync) before releasing it";
    return NULL;
}

/* ------------------------------------------------------------ address spaces */
typedef struct Where { int cta; uint32_t off; } Where;

/* Has every thread of the CTA exited? */
static int cta_exited(Sim *s, int cta)
{
    const Cta *c = &s->cta[cta];
    for (int i = c->first_thread; i < c->first_thread + c->nthreads; i++)
        if (s->th[i].state != TS_EXIT) return 0;
    return 1;
}

/* A shared address (shared::cta or, with cluster, shared::cluster) of n bytes. */
static int smem_where(Sim *s, Thread *t, uint64_t a, int cluster, uint32_t n, Where *w)
{
    int cta = t ? t->cta : 0;
    int rank = (int)(a >> CLUSTER_SHIFT);
    if (rank != cta) {
        if (!cluster || rank >= s->ncta || (a >> 32)) {
            sim_hazard(s, SIM_FAULT, "shared address 0x%llx is not valid %s", (unsigned long long)a,
                       cluster ? "in this cluster" : "in the CTA's shared::cta window (another CTA's address?)");
            return -1;
        }
        /* a CTA's shared memory lives as long as the CTA: once every thread of it has exited, a
         * shared::cluster access to it is undefined (PTX ISA, distributed shared memory) */
        if (t && cta_exited(s, rank)) {
            sim_hazard(s, SIM_HAZARD, "shared::cluster access to CTA %d of the cluster after it exited (its "
                       "shared memory is gone; a cluster barrier before its exit keeps it)", rank);
            return -1;
        }
        cta = rank;
    }
    a &= SMEM_WINDOW - 1;
    const Cta *c = &s->cta[cta];
    if (a < c->smem_base || a + n > c->smem_end) {
        sim_hazard(s, SIM_FAULT, "shared access of %u bytes at 0x%llx is outside CTA %d's shared memory "
                   "[0x%x, 0x%x)", n, (unsigned long long)a, cta, c->smem_base, c->smem_end);
        return -1;
    }
    w->cta = cta, w->off = (uint32_t)a;
    return 0;
}

int sim_global_check(const SimGlobal *g, uint64_t addr, uint64_t n)
{
    for (int i = 0; i < g->nallocs; i++)
        if (addr >= g->allocs[i].base && addr + n <= g->allocs[i].base + g->allocs[i].size) return 0;
    return -1;
}

/* A generic address: global allocations or this launch's parameter buffer. */
static void *generic_ptr(Sim *s, uint64_t a, uint32_t n)
{
    uint64_t p = (uint64_t)(uintptr_t)s->param;
    if (a >= p && a + n <= p + s->e->param_bytes) return (void *)(uintptr_t)a;
    if (!sim_global_check(s->l->global, a, n)) return (void *)(uintptr_t)a;
    sim_hazard(s, SIM_FAULT, "address 0x%llx (%u bytes) is neither in an allocation nor in the kernel's "
               "parameters", (unsigned long long)a, n);
    return NULL;
}

/* ------------------------------------------------------------ shadow helpers */
static Shadow *ssh(Sim *s, int cta, uint32_t off) { return &s->cta[cta].ssh[off >> 2]; }

static void check_read(Sim *s, Thread *reader, const uint32_t *vc, Shadow *sh, int async_reader, const char *what,
                       int cta, uint32_t where, int tmem, int pipe)
{
    /* tcgen05 pipe ops run in issue order: what an earlier one writes is theirs to read, and a
     * cell no op has written yet may still be written by one in flight (checked at completion) */
    if (pipe && tmem && (sh->kind == W_NONE || (sh->kind == W_ASYNC && sh->clk == pipe))) return;
    if (sh->writers && !(pipe && tmem)) {
        if (tmem)
            sim_hazard(s, SIM_HAZARD, "%s reads TMEM lane %u column %u of CTA %d while an in-flight async op is still "
                       "writing it", what, where >> 16, where & 0xffff, cta);
        else
            sim_hazard(s, SIM_HAZARD, "%s reads shared memory 0x%x of CTA %d while an in-flight async op is still "
                       "writing it", what, where, cta);
        return;
    }
    const char *why = unpublished(s, sh, vc, reader ? reader->gtid : -1, async_reader);
    if (why) {
        if (tmem)
            sim_hazard(s, SIM_HAZARD, "%s reads TMEM lane %u column %u of CTA %d, which %s", what, where >> 16,
                       where & 0xffff, cta, why);
        else
            sim_hazard(s, SIM_HAZARD, "%s reads shared memory 0x%x of CTA %d, which %s", what, where, cta, why);
    }
}

static void check_write(Sim *s, Shadow *sh, const char *what, int cta, uint32_t where, int tmem, int self_writer)
{
    if (sh->readers)
        sim_hazard(s, SIM_HAZARD, "%s overwrites %s 0x%x of CTA %d while an in-flight async op (MMA or TMA store) "
                   "still reads it (a store's source: until its thread's cp.async.bulk.wait_group[.read])", what,
                   tmem ? "TMEM cell" : "shared memory", where, cta);
    else if (sh->writers > self_writer)
        sim_hazard(s, SIM_HAZARD, "%s writes %s 0x%x of CTA %d while an in-flight async op also writes it", what,
                   tmem ? "TMEM cell" : "shared memory", where, cta);
}

static void mark(Shadow *sh, int kind, int clk, uint32_t ep)
{
    sh->kind = (uint8_t)kind, sh->clk = (uint16_t)clk, sh->ep = ep;
}

/* Footprints: what an in-flight op reads or writes, undone at completion.
 * Packed: bit 31 TMEM, bit 30 write, bits 29..26 CTA, bits 25..0 word or cell. */
static uint32_t fp_pack(int tmem, int write, int cta, uint32_t idx)
{
    return (uint32_t)tmem << 31 | (uint32_t)write << 30 | (uint32_t)cta << 26 | idx;
}

static void fp_add(Sim *s, Op *op, uint32_t v)
{
    if (op->nfp && op->fp[op->nfp - 1] == v) return;
    if (op->nfp == op->fpcap) {
        int nc = op->fpcap ? op->fpcap * 2 : 256;
        uint32_t *n = realloc(op->fp, sizeof *n * (size_t)nc);
        if (!n) { sim_hazard(s, SIM_UNSUPPORTED, "out of memory"); return; }
        op->fp = n, op->fpcap = nc;
    }
    op->fp[op->nfp++] = v;
}

static Shadow *fp_shadow(Sim *s, uint32_t v)
{
    int cta = (v >> 26) & 15;
    uint32_t idx = v & ((1u << 26) - 1);
    return (v >> 31) ? &s->cta[cta].tsh[idx] : &s->cta[cta].ssh[idx];
}

static void fp_apply(Sim *s, Op *op, int delta)
{
    /* footprints may repeat an index non-adjacently: count each entry */
    for (int i = 0; i < op->nfp; i++) {
        Shadow *sh = fp_shadow(s, op->fp[i]);
        if ((op->fp[i] >> 30) & 1) sh->writers = (uint16_t)(sh->writers + delta);
        else sh->readers = (uint16_t)(sh->readers + delta);
    }
}

/* ------------------------------------------------------------ unit callbacks */
/* The units (tc.c, tma.c) reach memory through these. Ctx says who is asking and
 * whether accesses are checked (issue) or only performed (completion). */
typedef struct Ctx {
    Sim *s;
    Op *op;           /* footprint collected here at issue */
    Thread *reader;   /* whose clock a read is checked against */
    const uint32_t *vc;
    const uint32_t *tvc; /* the reader's tcvc: what its asynchronous tcgen05 ops are ordered after (TMEM) */
    int check;        /* 1: check hazards and collect footprint; 0: just move data */
    int async_reader;
    int pipe;         /* the issuing CTA's tcgen05 pipe clock, for pipe ops (ordered among themselves) */
    int op_line;      /* at completion: the line that issued the op */
    const char *what;
    int wkind, wclk;  /* what a write records */
    uint32_t wep;
    char err[512];
} Ctx;

static int cb_smem_read(void *u, int cta, uint32_t addr, void *dst, uint32_t n)
{
    Ctx *c = u;
    Sim *s = c->s;
    if (cta < 0 || cta >= s->ncta) { snprintf(c->err, sizeof c->err, "CTA rank %d is not in the cluster", cta); return -1; }
    const Cta *k = &s->cta[cta];
    if (addr < k->smem_base || (uint64_t)addr + n > k->smem_end) {
        sim_hazard(s, SIM_FAULT, "%s reads shared memory [0x%x, 0x%llx) outside CTA %d's [0x%x, 0x%x)", c->what, addr,
                   (unsigned long long)addr + n, cta, k->smem_base, k->smem_end);
        snprintf(c->err, sizeof c->err, "shared address out of range");
        return -1;
    }
    memcpy(dst, k->smem + addr, n);
    if (c->check) {
        for (uint32_t w = addr >> 2; w <= (addr + n - 1) >> 2; w++) {
            check_read(s, c->reader, c->vc, &k->ssh[w], c->async_reader, c->what, cta, w << 2, 0, 0);
            if (c->op) fp_add(s, c->op, fp_pack(0, 0, cta, w));
        }
        if (s->status) { snprintf(c->err, sizeof c->err, "hazard"); return -1; }
    }
    return 0;
}

static int cb_smem_write(void *u, int cta, uint32_t addr, const void *src, uint32_t n)
{
    Ctx *c = u;
    Sim *s = c->s;
    if (cta < 0 || cta >= s->ncta) { snprintf(c->err, sizeof c->err, "CTA rank %d is not in the cluster", cta); return -1; }
    Cta *k = &s->cta[cta];
    if (addr < k->smem_base || (uint64_t)addr + n > k->smem_end) {
        sim_hazard(s, SIM_FAULT, "%s writes shared memory [0x%x, 0x%llx) outside CTA %d's [0x%x, 0x%x)", c->what,
                   addr, (unsigned long long)addr + n, cta, k->smem_base, k->smem_end);
        snprintf(c->err, sizeof c->err, "shared address out of range");
        return -1;
    }
    memcpy(k->smem + addr, src, n);
    for (uint32_t w = addr >> 2; w <= (addr + n - 1) >> 2; w++) {
        check_write(s, &k->ssh[w], c->what, cta, w << 2, 0, 0);
        mark(&k->ssh[w], c->wkind, c->wclk, c->wep);
    }
    if (s->status) { snprintf(c->err, sizeof c->err, "hazard"); return -1; }
    return 0;
}

static int cb_gmem_read(void *u, uint64_t addr, void *dst, uint32_t n)
{
    Ctx *c = u;
    if (sim_global_check(c->s->l->global, addr, n)) {
        sim_hazard(c->s, SIM_FAULT, "%s reads global memory [0x%llx, +%u) outside every allocation", c->what,
                   (unsigned long long)addr, n);
        snprintf(c->err, sizeof c->err, "global address out of range");
        return -1;
    }
    memcpy(dst, (const void *)(uintptr_t)addr, n);
    return 0;
}

static int cb_gmem_write(void *u, uint64_t addr, const void *src, uint32_t n)
{
    Ctx *c = u;
    if (sim_global_check(c->s->l->global, addr, n)) {
        sim_hazard(c->s, SIM_FAULT, "%s writes global memory [0x%llx, +%u) outside every allocation", c->what,
                   (unsigned long long)addr, n);
        snprintf(c->err, sizeof c->err, "global address out of range");
        return -1;
    }
    memcpy((void *)(uintptr_t)addr, src, n);
    return 0;
}

static int tmem_ok(Ctx *c, int cta, uint32_t lane, uint32_t col, const char *dir)
{
    Sim *s = c->s;
    if (cta < 0 || cta >= s->ncta || lane >= TC_TMEM_LANES || col >= TC_TMEM_COLS) {
        sim_hazard(s, SIM_FAULT, "%s %s TMEM lane %u column %u of CTA %d: out of range", c->what, dir, lane, col, cta);
        snprintf(c->err, sizeof c->err, "TMEM address out of range");
        return 0;
    }
    if (!s->cta[cta].tcol[col]) {
        sim_hazard(s, SIM_HAZARD, "%s %s TMEM column %u of CTA %d, which is not allocated", c->what, dir, col, cta);
        snprintf(c->err, sizeof c->err, "TMEM column not allocated");
        return 0;
    }
    return 1;
}

static int cb_tmem_read(void *u, int cta, uint32_t lane, uint32_t col, uint32_t *v)
{
    Ctx *c = u;
    Sim *s = c->s;
    if (!tmem_ok(c, cta, lane, col, "reads")) return -1;
    uint32_t i = lane * TC_TMEM_COLS + col;
    *v = s->cta[cta].tmem[i];
    if (!c->check && c->pipe && s->cta[cta].tsh[i].kind == W_NONE) {
        sim_hazard(s, SIM_HAZARD, "%s (issued at line %d) reads TMEM lane %u column %u of CTA %d, which was never "
                   "written", c->what, c->op_line, lane, col, cta);
        snprintf(c->err, sizeof c->err, "hazard");
        return -1;
    }
    Shadow *sh = &s->cta[cta].tsh[i];
    if (c->check) {
        /* TMEM is written by tcgen05 ops only: an async tcgen05 op reading it is ordered after another thread's
         * (or the pipe's) write only through tcgen05.fence::after_thread_sync (c->tvc) */
        check_read(s, c->reader, c->tvc, sh, c->async_reader, c->what, cta, lane << 16 | col, 1, c->pipe);
        if (c->op) fp_add(s, c->op, fp_pack(1, 0, cta, i));
        if (s->status) { snprintf(c->err, sizeof c->err, "hazard"); return -1; }
        if (!c->pipe && c->reader) /* a thread's tcgen05.ld: the cell's last reader */
            sh->rd = 1, sh->rclk = (uint16_t)c->reader->gtid, sh->rep = c->reader->vc[c->reader->gtid];
    } else if (c->pipe) { /* an MMA's read at completion */
        sh->rd = 1, sh->rclk = (uint16_t)c->wclk, sh->rep = c->wep;
    }
    return 0;
}

/* A write of TMEM cell sh by a thread's tcgen05.st or (at issue) a tcgen05.mma/cp: the cell's last writer and
 * last reader, when another thread or the pipe, must be ordered before it -- the other side waited
 * (wait::ld / wait::st, or the MMA's commit) and executed tcgen05.fence::before_thread_sync before a release,
 * this side acquired it and executed tcgen05.fence::after_thread_sync (PTX ISA, tcgen05 memory consistency
 * model, canonical patterns). pipe: the writer is the CTA's pipe itself (its own earlier ops are ordered). */
static void tmem_overwrite_check(Ctx *c, const Shadow *sh, int cta, uint32_t lane, uint32_t col, int pipe)
{
    Sim *s = c->s;
    if (!c->tvc || !c->reader) return;
    int self = c->reader->gtid;
    const char *why = NULL;
    if (sh->kind == W_ASYNC && !(pipe && sh->clk == pipe) && c->tvc[sh->clk] < sh->ep)
        why = "written by a tcgen05.mma whose completion the writer has not acquired (commit, a wait on its "
              "mbarrier, then tcgen05.fence::after_thread_sync)";
    else if (sh->kind == W_TCST && sh->clk != self &&
             (c->tvc[sh->clk] < sh->ep || !flog_covers(&s->th[sh->clk].f_tcst, sh->ep, c->tvc[sh->clk])))
        why = "written by another thread's tcgen05.st that is not ordered before this write (wait::st, "
              "fence::before_thread_sync, a release; the acquire, fence::after_thread_sync)";
    else if (sh->rd && sh->rclk != self && !(pipe && sh->rclk == pipe)) {
        if (sh->rclk >= s->nthreads) {
            if (c->tvc[sh->rclk] < sh->rep)
                why = "read by a tcgen05.mma whose completion the writer has not acquired (commit, a wait on its "
                      "mbarrier, then tcgen05.fence::after_thread_sync)";
        } else if (c->tvc[sh->rclk] < sh->rep || !flog_covers(&s->th[sh->rclk].f_tcld, sh->rep, c->tvc[sh->rclk])) {
            why = "read by another thread's tcgen05.ld that is not ordered before this write (wait::ld, "
                  "fence::before_thread_sync, a release; the acquire, fence::after_thread_sync)";
        }
    }
    if (why)
        sim_hazard(s, SIM_HAZARD, "%s writes TMEM lane %u column %u of CTA %d, which was %s", c->what, lane, col,
                   cta, why);
}

static int cb_tmem_write(void *u, int cta, uint32_t lane, uint32_t col, uint32_t v)
{
    Ctx *c = u;
    Sim *s = c->s;
    if (!tmem_ok(c, cta, lane, col, "writes")) return -1;
    uint32_t i = lane * TC_TMEM_COLS + col;
    Shadow *sh = &s->cta[cta].tsh[i];
    /* the tcgen05 pipe is the only async unit on TMEM and runs in order: only thread stores can race it */
    if (!c->pipe) check_write(s, sh, c->what, cta, lane << 16 | col, 1, 0);
    if (!c->pipe && c->check) tmem_overwrite_check(c, sh, cta, lane, col, 0);
    s->cta[cta].tmem[i] = v;
    mark(sh, c->wkind, c->wclk, c->wep);
    sh->rd = 0; /* its readers were ordered before this write (checked above, or at the MMA's issue) */
    if (s->status) { snprintf(c->err, sizeof c->err, "hazard"); return -1; }
    return 0;
}

/* At issue: a cell the op will write. A thread's tcgen05.st or ld racing it is then a hazard. */
static int cb_tmem_footprint_write(void *u, int cta, uint32_t lane, uint32_t col)
{
    Ctx *c = u;
    if (!tmem_ok(c, cta, lane, col, "writes")) return -1;
    tmem_overwrite_check(c, &c->s->cta[cta].tsh[lane * TC_TMEM_COLS + col], cta, lane, col, c->pipe);
    if (c->s->status) { snprintf(c->err, sizeof c->err, "hazard"); return -1; }
    fp_add(c->s, c->op, fp_pack(1, 1, cta, lane * TC_TMEM_COLS + col));
    return 0;
}

/* A lane's run of cells: the one-cell callbacks above in column order (called directly, so the compiler inlines them:
 * an MMA's D is a run of up to 512 cells a lane, each checked and shadowed as before) */
static int cb_tmem_read_run(void *u, int cta, uint32_t lane, uint32_t col, uint32_t n, uint32_t *v)
{
    for (uint32_t k = 0; k < n; k++)
        if (cb_tmem_read(u, cta, lane, col + k, &v[k])) return -1;
    return 0;
}

static int cb_tmem_write_run(void *u, int cta, uint32_t lane, uint32_t col, uint32_t n, const uint32_t *v)
{
    for (uint32_t k = 0; k < n; k++)
        if (cb_tmem_write(u, cta, lane, col + k, v[k])) return -1;
    return 0;
}

static int cb_tmem_footprint_write_run(void *u, int cta, uint32_t lane, uint32_t col, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        if (cb_tmem_footprint_write(u, cta, lane, col + k)) return -1;
    return 0;
}

static TcMem tc_mem(Ctx *c)
{
    TcMem m = {c, cb_smem_read, cb_tmem_read, cb_tmem_write, c->err, sizeof c->err,
               c->op ? cb_tmem_footprint_write : NULL, cb_tmem_read_run, cb_tmem_write_run,
               c->op ? cb_tmem_footprint_write_run : NULL};
    return m;
}

static TmaMem tma_mem(Ctx *c)
{
    TmaMem m = {c, cb_gmem_read, cb_gmem_write, cb_smem_read, cb_smem_write, c->err, sizeof c->err};
    return m;
}

static void ctx_init(Ctx *c, Sim *s, Op *op, Thread *reader, int check, const char *what)
{
    memset(c, 0, sizeof *c);
    c->s = s, c->op = op, c->reader = reader, c->vc = reader ? reader->vc : NULL, c->check = check;
    c->tvc = reader ? reader->tcvc : NULL;
    c->async_reader = 1, c->what = what;
}

/* A unit's error that is not already a hazard: report it as the unit wrote it. */
static void unit_fail(Sim *s, Ctx *c)
{
    if (!s->status) sim_hazard(s, SIM_HAZARD, "%s: %s", c->what, c->err[0] ? c->err : "refused");
}

/* ------------------------------------------------------------ mbarriers */
static Mbar *mbar_at(Sim *s, int cta, uint32_t off, int must)
{
    int16_t i = s->cta[cta].mbmap[off >> 2];
    if (i > 0) return &s->mb[i - 1];
    if (must) sim_hazard(s, SIM_HAZARD, "mbarrier at 0x%x of CTA %d is used but was never initialised", off, cta);
    return NULL;
}

/* A use of mbarrier m by thread t (or by an async op t issues: its mbarrier operand is accessed through the
 * generic proxy): t must see the mbarrier.init -- a barrier (bar.sync, barrier.cluster) or a release after it,
 * or, across CTAs through a .relaxed arrive, fence.mbarrier_init.release.cluster (PTX ISA, mbarrier.init's
 * example and fence's .mbarrier_init). Returns m, or NULL after a report. */
static Mbar *mbar_seen(Sim *s, Thread *t, Mbar *m)
{
    if (!m || !t || m->init_t == t->gtid || t->vc[m->init_t] >= m->init_ep) return m;
    sim_hazard(s, SIM_HAZARD, "mbarrier at 0x%x of CTA %d is used before its mbarrier.init (line %d, thread %d) is "
               "visible to this thread: no barrier or release orders the init before the use", m->addr, m->cta,
               m->init_line, s->th[m->init_t].tid);
    return NULL;
}

static void wake_mbar(Sim *s, int idx)
{
    for (int i = 0; i < s->nthreads; i++)
        if (s->th[i].state == TS_MBAR && s->th[i].wait_mbar == idx) s->th[i].state = TS_RUN;
}

static void mbar_complete_phase(Sim *s, Mbar *m)
{
    MbArrival *a = m->arr[1];
    int cap = m->caparr[1];
    m->arr[1] = m->arr[0], m->narr[1] = m->narr[0], m->caparr[1] = m->caparr[0]; /* this phase's becomes the previous */
    m->arr[0] = a, m->narr[0] = 0, m->caparr[0] = cap;
    m->phase++;
    vc_join(s, m->done, m->acc);
    m->done[m->clk] = m->phase;
    m->pending = m->expected;
    m->tx = 0;
    wake_mbar(s, (int)(m - s->mb));
}

static void mbar_maybe_complete(Sim *s, Mbar *m)
{
    if (m->pending == 0 && m->tx == 0) mbar_complete_phase(s, m);
}

static void mbar_arrive(Sim *s, Mbar *m, int count, const uint32_t *vc)
{
    if (count > m->pending) {
        sim_hazard(s, SIM_HAZARD, "mbarrier at 0x%x of CTA %d (initialised at line %d with %d arrivals) receives "
                   "%d arrival(s) with only %d pending in phase %u", m->addr, m->cta, m->init_line, m->expected,
                   count, m->pending, m->phase);
        return;
    }
    if (vc) vc_join(s, m->acc, vc);
    m->pending -= count;
    mbar_maybe_complete(s, m);
}

static void mbar_tx(Sim *s, Mbar *m, int64_t bytes)
{
    m->tx += bytes;
    if (m->tx < 0 && m->pending == 0) {
        sim_hazard(s, SIM_HAZARD, "mbarrier at 0x%x of CTA %d: complete_tx of %lld bytes exceeds the transaction "
                   "count expected in phase %u by %lld (expect_tx too small?)", m->addr, m->cta,
                   (long long)-bytes, m->phase, (long long)-m->tx);
        return;
    }
    mbar_maybe_complete(s, m);
}

/* ------------------------------------------------------------ async ops */
static Op *op_new(Sim *s, int kind, Thread *t, int stream)
{
    Op *op = calloc(1, sizeof *op);
    if (!op) { sim_hazard(s, SIM_UNSUPPORTED, "out of memory"); return NULL; }
    op->kind = kind, op->cta = t->cta, op->thread = t->gtid, op->line = s->cur ? s->cur->line : 0;
    op->stream = stream;
    if (stream >= 0) op->seq = s->stream_issue[stream]++;
    op->ready = s->step + (uint64_t)rnd_below(s, s->max_latency + 1);
    return op;
}

static void op_push(Sim *s, Op *op)
{
    if (s->tm) timing_op_issued(s, op); /* the timing mode: when it completes */
    if (s->nops == s->opcap) {
        int nc = s->opcap ? s->opcap * 2 : 64;
        Op **n = realloc(s->ops, sizeof *n * (size_t)nc);
        if (!n) { sim_hazard(s, SIM_UNSUPPORTED, "out of memory"); free(op); return; }
        s->ops = n, s->opcap = nc;
    }
    s->ops[s->nops++] = op;
}

static void op_free(Op *op)
{
    if (op->kind == A_WGMMA) { free(op->u.wg.dregs); free(op->u.wg.a); }
    free(op->fp);
    free(op->vc);
    free(op);
}

static int cpa_landed_below(Thread *t, uint32_t end);

static int op_eligible(Sim *s, const Op *op)
{
    /* the arrive-on of cp.async.mbarrier.arrive waits for the thread's earlier copies, and so
     * for its earlier arrive-ons, whose copies are a subset: they fire in issue order, each
     * publishing the copies the ones before it did not */
    if (op->kind == A_CPA_ARRIVE)
        return op->seq == s->th[op->thread].cpa_arrived && cpa_landed_below(&s->th[op->thread], op->u.cpa.seg);
    return op->stream < 0 || s->stream_next[op->stream] == op->seq;
}

/* cp.async.bulk (no tensor map): n contiguous bytes between global and shared memory. */
static int bulk_copy(Ctx *c, uint64_t gaddr, int cta, uint32_t saddr, uint32_t n, int to_shared)
{
    uint8_t buf[4096];
    for (uint32_t done = 0; done < n;) {
        uint32_t k = n - done < sizeof buf ? n - done : (uint32_t)sizeof buf;
        int r = to_shared ? cb_gmem_read(c, gaddr + done, buf, k) || cb_smem_write(c, cta, saddr + done, buf, k)
                          : cb_smem_read(c, cta, saddr + done, buf, k) || cb_gmem_write(c, gaddr + done, buf, k);
        if (r) return -1;
        done += k;
    }
    return 0;
}

static void complete_tma_load(Sim *s, Op *op)
{
    Ctx c;
    ctx_init(&c, s, NULL, NULL, 0, "TMA load");
    fp_apply(s, op, -1);
    TmaMem m = tma_mem(&c);
    uint32_t bytes = op->kind == A_BULK_LOAD ? op->u.tma.bytes
                   : op->u.tma.gather4 ? tma_gather4_bytes(&op->u.tma.map) : tma_tile_bytes(&op->u.tma.map);
    for (int i = 0; i < op->u.tma.nctas && !s->status; i++) {
        int cta = op->u.tma.ctas[i];
        /* the mbarrier: the named one; when multicast, the same offset in each destination CTA, or
         * with .cta_group::2 in the CTA of the destination's pair that holds the position (even or odd)
         * the named barrier holds in its pair (the leader's barrier serves both CTAs of each pair) */
        int bcta = !(op->u.tma.multicast) ? op->u.tma.mbar_cta
                 : op->u.tma.pair        ? (cta & ~1) | (op->u.tma.mbar_cta & 1) : cta;
        Mbar *mb = mbar_at(s, bcta, op->u.tma.mbar, 1);
        if (!mb) return;
        c.wkind = W_ASYNC, c.wclk = mb->clk, c.wep = mb->phase + 1;
        int r = op->kind == A_BULK_LOAD ? bulk_copy(&c, op->u.tma.gaddr, cta, op->u.tma.dst, op->u.tma.bytes, 1)
              : op->u.tma.gather4 ? tma_load_gather4(&m, &op->u.tma.map, op->u.tma.coords[0], op->u.tma.coords + 1,
                                                     cta, op->u.tma.dst)
                                  : tma_load_tile(&m, &op->u.tma.map, op->u.tma.coords, cta, op->u.tma.dst);
        if (r) { unit_fail(s, &c); return; }
        mbar_tx(s, mb, -(int64_t)bytes);
    }
}

/* cp.reduce.async.bulk .add.f32: global f32 [gaddr + 4i] += shared f32 [saddr + 4i], each element once (the
 * simulator completes the op at one point, so the adds are atomic per element, as the ISA's reduction). */
static int bulk_reduce_add_f32(Ctx *c, uint64_t gaddr, int cta, uint32_t saddr, uint32_t n)
{
    float src[1024], dst[1024];
    for (uint32_t done = 0; done < n;) {
        uint32_t k = n - done < sizeof src ? n - done : (uint32_t)sizeof src;
        if (cb_smem_read(c, cta, saddr + done, src, k) || cb_gmem_read(c, gaddr + done, dst, k)) return -1;
        for (uint32_t i = 0; i < k / 4; i++) dst[i] += src[i];
        if (cb_gmem_write(c, gaddr + done, dst, k)) return -1;
        done += k;
    }
    return 0;
}

static void complete_tma_store(Sim *s, Op *op)
{
    Ctx c;
    ctx_init(&c, s, NULL, NULL, 0, "TMA store");
    TmaMem m = tma_mem(&c); /* the source's footprint stays until the thread's wait (store_hold) */
    if (op->kind == A_BULK_STORE && op->u.tma.redadd
            ? bulk_reduce_add_f32(&c, op->u.tma.gaddr, op->cta, op->u.tma.dst, op->u.tma.bytes)
        : op->kind == A_BULK_STORE ? bulk_copy(&c, op->u.tma.gaddr, op->cta, op->u.tma.dst, op->u.tma.bytes, 0)
                                 : tma_store_tile(&m, &op->u.tma.map, op->u.tma.coords, op->cta, op->u.tma.dst)) {
        unit_fail(s, &c);
        return;
    }
    Thread *t = &s->th[op->thread];
    t->grp_out[op->group % GROUP_RING]--;
    if (t->state == TS_BULK) t->state = TS_RUN; /* re-checks its wait */
}


/* A .cta_group::2 op needs the peer CTA in the cluster and, until it completes, not exited (the ISA's
 * issue granularity: "the peer CTA should be active and should not have exited"). */
static int pair_peer_ok(Sim *s, int cta, int line, const char *what)
{
    int peer = cta ^ 1;
    if (peer >= s->ncta) {
        sim_hazard(s, SIM_FAULT, "%s.cta_group::2 in CTA %d of a %d-CTA cluster: the peer CTA (rank %d) does not exist",
                   what, cta, s->ncta, peer);
        return 0;
    }
    if (cta_exited(s, peer)) {
        sim_hazard(s, SIM_HAZARD, "%s.cta_group::2 (line %d) of CTA %d: the peer CTA %d has exited before it completed",
                   what, line, cta, peer);
        return 0;
    }
    return 1;
}

static void complete_mma(Sim *s, Op *op)
{
    if ((op->kind == A_CP ? op->u.cp.cta_group : op->u.mma.mma.cta_group) == 2 &&
        !pair_peer_ok(s, op->cta, op->line, op->kind == A_CP ? "tcgen05.cp" : "tcgen05.mma"))
        return;
    Ctx c;
    ctx_init(&c, s, NULL, NULL, 0, op->kind == A_CP ? "tcgen05.cp" : "tcgen05.mma");
    c.pipe = pipe_clk(s, op->cta);
    c.op_line = op->line;
    fp_apply(s, op, -1);
    c.wkind = W_ASYNC, c.wclk = pipe_clk(s, op->cta), c.wep = op->u.mma.seq;
    TcMem m = tc_mem(&c);
    if (op->kind == A_CP ? tc_tmem_cp(&m, &op->u.cp, TC_EXECUTE) : tc_mma(&m, &op->u.mma.mma, TC_EXECUTE))
        unit_fail(s, &c);
}

static void complete_commit(Sim *s, Op *op)
{
    for (int i = 0; i < op->u.commit.nctas && !s->status; i++) {
        Mbar *mb = mbar_at(s, op->u.commit.ctas[i], op->u.commit.mbar, 1);
        if (mb) mbar_arrive(s, mb, 1, op->vc);
    }
}

static void complete_wgmma(Sim *s, Op *op)
{
    Ctx c;
    ctx_init(&c, s, NULL, NULL, 0, "wgmma.mma_async");
    fp_apply(s, op, -1);
    TcMem m = tc_mem(&c);
    static _Thread_local uint32_t d[128][TC_MAX_REGS];
    int nd = op->u.wg.nd;
    for (int i = 0; i < 128; i++) {
        Thread *t = &s->th[op->u.wg.wg_first + i];
        for (int j = 0; j < nd; j++) d[i][j] = (uint32_t)t->r[op->u.wg.dregs[j]];
    }
    if (tc_wgmma(&m, &op->u.wg.w, (const uint32_t(*)[TC_MAX_REGS])op->u.wg.a, d, TC_EXECUTE)) { unit_fail(s, &c); return; }
    for (int i = 0; i < 128; i++) {
        Thread *t = &s->th[op->u.wg.wg_first + i];
        for (int j = 0; j < nd; j++) {
            t->r[op->u.wg.dregs[j]] = d[i][j];
        }
        if (t->state == TS_WG) t->state = TS_RUN;
    }
    /* the accumulators stay owned until each thread's wgmma.wait_group retires the group */
    if (s->nwgdone == s->wgdone_cap) {
        int nc = s->wgdone_cap ? s->wgdone_cap * 2 : 64;
        WgDone *n = realloc(s->wgdone, sizeof *n * (size_t)nc);
        if (!n) { sim_hazard(s, SIM_UNSUPPORTED, "out of memory"); return; }
        s->wgdone = n, s->wgdone_cap = nc;
    }
    s->wgdone[s->nwgdone++] = (WgDone){op->u.wg.wg_first / 128, op->u.wg.group, op->u.wg.dregs, nd};
    op->u.wg.dregs = NULL;
}

/* A thread passed wgmma.wait_group: it owns again the accumulators of the groups the wait retired. */
static void wg_retire(Sim *s, Thread *t, int wg, uint32_t upto)
{
    for (int i = 0; i < s->nwgdone; i++) {
        WgDone *w = &s->wgdone[i];
        if (w->wg != wg || w->group < t->wg_retired || w->group >= upto) continue;
        for (int j = 0; j < w->nd; j++) pend_release(t, w->dregs[j], 1);
    }
    if (upto > t->wg_retired) t->wg_retired = upto;
}

/* ------------------------------------------------------------ cp.async (non-bulk)
 * A cp.async copies 4, 8 or 16 bytes from global memory into the issuing CTA's shared memory,
 * zero-filling what src-size (or ignore-src) leaves out. It is queued at issue (exec_cpa) and
 * lands (data moved) at a point the scheduler picks; the destination words carry a writer
 * footprint from issue until the copy is *published*, not merely landed, because the ISA makes
 * cp.async writes visible only through a completion mechanism: to the issuing thread after the
 * cp.async.wait_group / wait_all that covers the copy's group, or to whoever waits on an mbarrier
 * phase that a cp.async.mbarrier.arrive made track it. So any access to those words before the
 * publication is a hazard on every schedule, not only on those where the copy happens to be late.
 * Publication tags the words:
 *   - by a wait: as a generic-proxy store of the issuing thread (cp.async is a weak generic-proxy
 *     write) at the thread's epoch at the wait, so the clock rules of st.shared apply from there:
 *     the issuer reads them at once; another thread needs a barrier or mbarrier release that the
 *     issuer performs after the wait (a release before it carries an older epoch); the async proxy
 *     (wgmma, TMA store) needs the issuer's fence.proxy.async after the wait;
 *   - by the arrive-on: as an async write published by that mbarrier phase (like a TMA load), so
 *     a reader must have waited on the phase. The arrive-on releases nothing else of the thread's
 *     (the ISA gives cp.async.mbarrier.arrive no release semantics): a producer that also stored
 *     to shared memory must arrive normally as well.
 * A copy is published once, by whichever comes first. (Not modelled: a copy published through
 * an mbarrier and then also waited for by its issuer stays visible through the mbarrier only;
 * the async proxy reading mbarrier-published copies is not checked for fence.proxy.async.)
 * The thread's copies fall into segments, closed by commit_group (a group is a run of segments)
 * and by cp.async.mbarrier.arrive (its arrive-on fires once every earlier segment has landed). */

/* Have all of t's copies in segments below `end` landed? (end <= t->cpa_seg) */
static int cpa_landed_below(Thread *t, uint32_t end)
{
    while (t->cpa_low < t->cpa_seg && !t->cpa_fly[t->cpa_low % GROUP_RING]) t->cpa_low++;
    return t->cpa_low >= end;
}

/* Publishes t's landed copies in segments below `end`: to t itself (m NULL: a wait), or to the
 * waiters of m's current phase (the arrive-on that is about to arrive on m). */
static void cpa_publish(Sim *s, Thread *t, uint32_t end, const Mbar *m)
{
    Cta *c = &s->cta[t->cta];
    int keep = 0;
    for (int i = 0; i < t->ncpl; i++) {
        CpLanded l = t->cpl[i];
        if (l.seg >= end) { t->cpl[keep++] = l; continue; }
        for (uint32_t w = l.word; w < l.word + l.nwords; w++) {
            c->ssh[w].writers--;
            if (m) mark(&c->ssh[w], W_ASYNC, m->clk, m->phase + 1);
            else mark(&c->ssh[w], W_THREAD, t->gtid, t->vc[t->gtid]);
        }
    }
    t->ncpl = keep;
}

/* The copy lands: its bytes (zeros past src_size; no global read when src_size is 0) are in
 * shared memory, the footprint stays until it is published. */
static void complete_cpa(Sim *s, Op *op)
{
    Thread *t = &s->th[op->thread];
    uint8_t *d = s->cta[op->cta].smem + op->u.cpa.dst;
    memset(d, 0, op->u.cpa.size);
    if (op->u.cpa.src_size) memcpy(d, (const void *)(uintptr_t)op->u.cpa.src, op->u.cpa.src_size);
    t->cpa_fly[op->u.cpa.seg % GROUP_RING]--;
    if (t->ncpl == t->cpl_cap) {
        int nc = t->cpl_cap ? t->cpl_cap * 2 : 16;
        CpLanded *n = realloc(t->cpl, sizeof *n * (size_t)nc);
        if (!n) { sim_hazard(s, SIM_UNSUPPORTED, "out of memory"); return; }
        t->cpl = n, t->cpl_cap = nc;
    }
    t->cpl[t->ncpl++] = (CpLanded){op->u.cpa.seg, op->u.cpa.dst >> 2, op->u.cpa.size / 4u};
}

/* Every copy the cp.async.mbarrier.arrive tracks has landed: publish them on the mbarrier's
 * current phase, then arrive (the count was raised at issue unless .noinc). */
static void complete_cpa_arrive(Sim *s, Op *op)
{
    Mbar *m = mbar_at(s, op->cta, op->u.cpa.mbar, 1);
    if (!m) return;
    if (m->pending < 1) {
        /* reported here, with the issuing line: the scheduler, not an instruction, fires it */
        s->cur = NULL, s->cur_t = &s->th[op->thread];
        sim_hazard(s, SIM_HAZARD, "the arrive-on of cp.async.mbarrier.arrive.noinc (line %d `%s`) finds no "
                   "pending arrival on mbarrier 0x%x of CTA %d (initialised at line %d with %d arrivals) in phase "
                   "%u: .noinc arrivals must be counted in mbarrier.init", op->line, ptx_line(s->l->mod, op->line),
                   m->addr, m->cta, m->init_line, m->expected, m->phase);
        return;
    }
    s->th[op->thread].cpa_arrived++;
    cpa_publish(s, &s->th[op->thread], op->u.cpa.seg, m);
    mbar_arrive(s, m, 1, NULL);
}

/* A completed store is held (its footprint on the source kept) until its thread waits past its group. */
static int store_hold(Sim *s, Op *op)
{
    if (s->th[op->thread].state == TS_EXIT) { /* exited without waiting: nothing of its CTA writes the source again */
        fp_apply(s, op, -1);
        return 0;
    }
    if (s->nheld == s->heldcap) {
        int nc = s->heldcap ? s->heldcap * 2 : 16;
        Op **n = realloc(s->held, sizeof *n * (size_t)nc);
        if (!n) { sim_hazard(s, SIM_UNSUPPORTED, "out of memory"); return 0; }
        s->held = n, s->heldcap = nc;
    }
    s->held[s->nheld++] = op;
    return 1;
}

/* Thread t waited past its bulk-async groups below `below` (or exited: every group): their stores'
 * sources may be written again. */
static void store_release(Sim *s, const Thread *t, uint32_t below)
{
    for (int i = 0; i < s->nheld;) {
        Op *op = s->held[i];
        if (op->thread == t->gtid && op->group < below) {
            fp_apply(s, op, -1);
            op_free(op);
            s->held[i] = s->held[--s->nheld];
        } else {
            i++;
        }
    }
}

static void complete(Sim *s, int i)
{
    Op *op = s->ops[i];
    s->ops[i] = s->ops[--s->nops];
    if (op->stream >= 0) s->stream_next[op->stream]++;
    switch (op->kind) {
    case A_TMA_LOAD: case A_BULK_LOAD: complete_tma_load(s, op); break;
    case A_TMA_STORE: case A_BULK_STORE:
        complete_tma_store(s, op);
        if (!s->status && store_hold(s, op)) return;
        break;
    case A_MMA: case A_CP: complete_mma(s, op); break;
    case A_COMMIT: complete_commit(s, op); break;
    case A_WGMMA: complete_wgmma(s, op); break;
    case A_CPA: complete_cpa(s, op); break;
    case A_CPA_ARRIVE: complete_cpa_arrive(s, op); break;
    }
    op_free(op);
}

/* Completes ops that are due, in random order. Returns how many. */
static int complete_due(Sim *s, int force)
{
    int done = 0;
    for (int pass = 0; pass < 4 && !s->status; pass++) {
        int any = 0;
        for (int k = s->nops; k > 0 && !s->status; k--) {
            int i = rnd_below(s, s->nops);
            if (i >= s->nops) break;
            Op *op = s->ops[i];
            if (op->ready <= s->step && op_eligible(s, op)) { complete(s, i); done++, any++; }
        }
        if (!any) break;
    }
    if (!done && force && s->nops && !s->status) {
        /* nothing due: complete the eligible op closest to its time */
        int best = -1;
        for (int i = 0; i < s->nops; i++)
            if (op_eligible(s, s->ops[i]) && (best < 0 || s->ops[i]->ready < s->ops[best]->ready)) best = i;
        if (best >= 0) { complete(s, best); done++; }
    }
    return done;
}

/* ------------------------------------------------------------ special registers */
uint64_t sim_special(Sim *s, Thread *t, int sr)
{
    const Cta *c = &s->cta[t->cta];
    const SimLaunch *l = s->l;
    switch (sr) {
    case SR_TID_X: return (uint32_t)t->tid % l->block[0];
    case SR_TID_Y: return (uint32_t)t->tid / l->block[0] % l->block[1];
    case SR_TID_Z: return (uint32_t)t->tid / (l->block[0] * l->block[1]);
    case SR_NTID_X: return l->block[0];
    case SR_NTID_Y: return l->block[1];
    case SR_NTID_Z: return l->block[2];
    case SR_CTAID_X: return c->ctaid[0];
    case SR_CTAID_Y: return c->ctaid[1];
    case SR_CTAID_Z: return c->ctaid[2];
    case SR_NCTAID_X: return l->grid[0];
    case SR_NCTAID_Y: return l->grid[1];
    case SR_NCTAID_Z: return l->grid[2];
    case SR_LANEID: return (uint32_t)t->lane;
    case SR_WARPID: return (uint32_t)t->tid / 32;
    case SR_CLUSTERID_X: return s->clusterid[0];
    case SR_CLUSTERID_Y: return s->clusterid[1];
    case SR_CLUSTERID_Z: return s->clusterid[2];
    case SR_NCLUSTERID_X: return s->ncluster[0];
    case SR_CLUSTER_CTARANK: return (uint32_t)t->cta;
    case SR_CLUSTER_NCTARANK: return (uint32_t)s->ncta;
    case SR_CLUSTER_CTAID_X: return c->ctaid[0] % l->cluster[0];
    case SR_SMID: return (uint32_t)(s->clusterid[0] % 132);
    /* the clocks (PTX ISA: monotone counters; no rate is promised): the scheduler's step; in the timing mode
     * %clock64 is the modelled SM clock, so a microbenchmark's PTX replayed there reads what the model predicts */
    case SR_CLOCK64: return s->tm ? (uint64_t)timing_now(s->tm) : s->step;
    case SR_GLOBALTIMER: return s->step;
    default: sim_hazard(s, SIM_UNSUPPORTED, "special register %d not simulated", sr); return 0;
    }
}

/* ------------------------------------------------------------ memory instructions */
static uint64_t mem_addr(Sim *s, Thread *t, const Operand *o)
{
    if (o->kind != O_MEM) { sim_hazard(s, SIM_UNSUPPORTED, "expected a memory operand"); return 0; }
    return alu_val(s, t, &o->vec[0]) + (uint64_t)o->imm;
}

static uint32_t type_bytes(int ty)
{
    switch (ty) {
    case T_B8: case T_U8: case T_S8: return 1;
    case T_B16: case T_U16: case T_S16: case T_F16: case T_BF16: return 2;
    case T_B64: case T_U64: case T_S64: case T_F64: return 8;
    default: return 4;
    }
}

static void exec_ld_shared(Sim *s, Thread *t, const Ins *in, uint64_t a, uint32_t esz)
{
    Where w;
    uint32_t n = esz * in->vec;
    if (smem_where(s, t, a, in->space == SP_SHARED_CLUSTER, n, &w)) return;
    Cta *c = &s->cta[w.cta];
    for (uint32_t x = w.off >> 2; x <= (w.off + n - 1) >> 2; x++)
        check_read(s, t, t->vc, &c->ssh[x], 0, "ld.shared", w.cta, x << 2, 0, 0);
    const Operand *d = &in->ops[0];
    for (int i = 0; i < in->vec; i++) {
        uint64_t v = 0;
        memcpy(&v, c->smem + w.off + i * esz, esz);
        alu_set(s, t, d->kind == O_VEC ? &d->vec[i] : d, v);
    }
}

static void exec_st_shared(Sim *s, Thread *t, const Ins *in, uint64_t a, uint32_t esz)
{
    Where w;
    uint32_t n = esz * in->vec;
    if (smem_where(s, t, a, in->space == SP_SHARED_CLUSTER, n, &w)) return;
    Cta *c = &s->cta[w.cta];
    const Operand *v = &in->ops[1];
    for (int i = 0; i < in->vec; i++) {
        uint64_t x = alu_val(s, t, v->kind == O_VEC ? &v->vec[i] : v);
        memcpy(c->smem + w.off + i * esz, &x, esz);
    }
    for (uint32_t x = w.off >> 2; x <= (w.off + n - 1) >> 2; x++) {
        check_write(s, &c->ssh[x], "st.shared", w.cta, x << 2, 0, 0);
        mark(&c->ssh[x], W_THREAD, t->gtid, t->vc[t->gtid]);
    }
}

/* Timing mode runs a few clusters of the grid, one at a time, so a word the whole grid's CTAs add to (a work
 * counter: a dynamic kernel's tile claims, its count of CTAs done) would see only this cluster's adds, and a sampled
 * CTA would take every tile. There the model answers the grid's turn instead: the grid's CTAs take turns, so the
 * n-th add of CTA c (linear index c of G CTAs) finds the word's launch-time value plus (n G + c) adds before it, and
 * the word itself stays as the launch found it (the next sample sees the same). With a tile counter this hands CTA c
 * the tiles of a plain stride -- what claims come to when tiles cost alike; a dynamic grid's balancing of unlike tiles
 * is not modelled (docs/simulator.md). -1 when the table is full. */
static int atom_timed(Sim *s, Thread *t, uint64_t a, uint32_t x, uint32_t add, uint32_t *old)
{
    const SimLaunch *l = s->l;
    const Cta *c = &s->cta[t->cta];
    int i = 0;
    while (i < s->natoms && s->atoms[i].addr != a) i++;
    if (i == s->natoms) {
        if (i == MAX_TIMED_ATOMS) return -1;
        memset(&s->atoms[s->natoms++], 0, sizeof s->atoms[0]);
        s->atoms[i].addr = a;
    }
    uint64_t g = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
    uint64_t lin = c->ctaid[0] + (uint64_t)l->grid[0] * (c->ctaid[1] + (uint64_t)l->grid[1] * c->ctaid[2]);
    uint64_t turns = (uint64_t)s->atoms[i].n[t->cta]++ * g + lin;
    *old = x + (uint32_t)(turns * add);
    return 0;
}

static void exec_ldst(Sim *s, Thread *t, const Ins *in)
{
    uint32_t esz = type_bytes(in->type);
    int ld = in->op == OP_LD;
    const Operand *mo = &in->ops[ld ? 1 : 0];
    uint64_t a = mem_addr(s, t, mo);
    if (s->status) return;
    if (in->space == SP_SHARED || in->space == SP_SHARED_CLUSTER) {
        if (ld) exec_ld_shared(s, t, in, a, esz);
        else exec_st_shared(s, t, in, a, esz);
        return;
    }
    uint32_t n = esz * in->vec;
    uint8_t *p;
    if (in->space == SP_PARAM) {
        if (!ld || a + n > s->e->param_bytes) { sim_hazard(s, SIM_FAULT, "parameter access out of range"); return; }
        p = s->param + a;
    } else if (in->space == SP_GLOBAL) {
        if (sim_global_check(s->l->global, a, n)) {
            sim_hazard(s, SIM_FAULT, "global %s of %u bytes at 0x%llx is outside every allocation",
                       ld ? "load" : "store", n, (unsigned long long)a);
            return;
        }
        p = (uint8_t *)(uintptr_t)a;
    } else {
        p = generic_ptr(s, a, n);
        if (!p) return;
    }
    uint8_t before[64]; /* a load before the wait: the late writes' old bytes where they overlap */
    if (ld && !t->waited && s->l->late && n <= sizeof before) {
        memcpy(before, p, n);
        for (uint32_t i = 0; i < n; i++) /* the first late write of a byte replaced what was there */
            for (const SimLate *w = s->l->late; w; w = w->next)
                if (a + i >= w->dst && a + i < w->dst + w->n) {
                    before[i] = w->old[a + i - w->dst];
                    break;
                }
        p = before;
    }
    const Operand *r = &in->ops[ld ? 0 : 1];
    for (int i = 0; i < in->vec; i++) {
        const Operand *ri = r->kind == O_VEC ? &r->vec[i] : r;
        if (ld && (in->mods & M_REDADD)) { /* atom.global.add.u32: the old value out, the sum in place */
            uint32_t x, add = (uint32_t)alu_val(s, t, &in->ops[2]), y;
            memcpy(&x, p, 4);
            if (s->tm) {
                if (atom_timed(s, t, a, x, add, &y)) {
                    sim_hazard(s, SIM_UNSUPPORTED, "timing: atom.global.add on more than %d words in one cluster",
                               MAX_TIMED_ATOMS);
                    return;
                }
                alu_set(s, t, ri, y);
                continue;
            }
            y = x + add;
            memcpy((uint8_t *)(uintptr_t)a, &y, 4);
            alu_set(s, t, ri, x);
        } else if (ld) {
            uint64_t v = 0;
            memcpy(&v, p + i * esz, esz);
            alu_set(s, t, ri, v);
        } else if ((in->mods & M_REDADD) && in->type == T_U32) { /* red.global.add.u32 (a turn counter) */
            uint32_t x, y = (uint32_t)alu_val(s, t, ri);
            memcpy(&x, p + i * esz, 4);
            x += y;
            memcpy(p + i * esz, &x, 4);
        } else if (in->mods & M_REDADD) { /* red.global.add.f32: the element plus the value */
            uint64_t v = alu_val(s, t, ri);
            float x, y;
            uint32_t b32 = (uint32_t)v;
            memcpy(&x, p + i * esz, 4);
            memcpy(&y, &b32, 4);
            x += y;
            memcpy(p + i * esz, &x, 4);
        } else {
            uint64_t v = alu_val(s, t, ri);
            memcpy(p + i * esz, &v, esz);
        }
    }
}

/* ------------------------------------------------------------ barriers */
static void bar_complete(Sim *s, Cta *c, int id)
{
    NamedBar *b = &c->bars[id];
    for (int i = c->first_thread; i < c->first_thread + c->nthreads; i++) {
        Thread *t = &s->th[i];
        if (t->state == TS_BAR && t->wait_bar == id && t->wait_gen == b->gen) {
            vc_join(s, t->vc, b->acc);
            t->state = TS_RUN;
            t->pc++;
        }
    }
    b->gen++;
    b->arrived = 0;
    b->expected = 0;
}

/* bar.sync / bar.arrive: returns 1 when the thread must block */
static int exec_bar(Sim *s, Thread *t, const Ins *in)
{
    Cta *c = &s->cta[t->cta];
    int id = (int)alu_val(s, t, &in->ops[0]);
    int count = in->nops > 1 ? (int)alu_val(s, t, &in->ops[1]) : c->nthreads;
    if (id < 0 || id >= NAMED_BARS) { sim_hazard(s, SIM_FAULT, "named barrier %d out of range", id); return 0; }
    if (count <= 0 || count % 32 || count > c->nthreads) {
        sim_hazard(s, SIM_FAULT, "barrier thread count %d must be a positive multiple of 32 up to %d", count,
                   c->nthreads);
        return 0;
    }
    NamedBar *b = &c->bars[id];
    if (!b->acc && !(b->acc = vc_alloc(s))) return 0;
    if (b->arrived && b->expected != count) {
        sim_hazard(s, SIM_HAZARD, "barrier %d used with thread count %d while %d threads already arrived expecting "
                   "%d", id, count, b->arrived, b->expected);
        return 0;
    }
    b->expected = count;
    release(s, t, b->acc);
    b->arrived++;
    if (in->op == OP_BAR_ARRIVE) {
        if (b->arrived == b->expected) bar_complete(s, c, id);
        return 0;
    }
    t->state = TS_BAR, t->wait_bar = id, t->wait_gen = b->gen;
    if (b->arrived == b->expected) bar_complete(s, c, id); /* moves this thread on too */
    return t->state == TS_BAR;
}

static void cluster_check(Sim *s)
{
    if (s->cl_arrived < s->live || s->cl_arrived == 0) return;
    s->cl_phase++;
    s->cl_arrived = 0;
    for (int i = 0; i < s->nthreads; i++) s->th[i].cl_arrived = 0;
    for (int i = 0; i < s->nthreads; i++)
        if (s->th[i].state == TS_CLUSTER && s->th[i].cl_phase < s->cl_phase) s->th[i].state = TS_RUN;
}

/* ------------------------------------------------------------ mbarrier instructions */
static Mbar *mbar_operand(Sim *s, Thread *t, const Ins *in, const Operand *o, Where *w)
{
    uint64_t a = mem_addr(s, t, o);
    if (s->status || smem_where(s, t, a, in->space == SP_SHARED_CLUSTER || (a >> CLUSTER_SHIFT) != (uint64_t)t->cta, 8, w))
        return NULL;
    if (w->off & 7) { sim_hazard(s, SIM_FAULT, "mbarrier address 0x%x is not 8-byte aligned", w->off); return NULL; }
    return mbar_seen(s, t, mbar_at(s, w->cta, w->off, 1));
}

static void exec_mbar_init(Sim *s, Thread *t, const Ins *in)
{
    Where w;
    uint64_t a = mem_addr(s, t, &in->ops[0]);
    if (s->status || smem_where(s, t, a, 0, 8, &w)) return;
    int count = (int)alu_val(s, t, &in->ops[1]);
    if (count < 1 || count > (1 << 20) - 1) { sim_hazard(s, SIM_FAULT, "mbarrier count %d out of range", count); return; }
    Mbar *m = mbar_at(s, w.cta, w.off, 0);
    if (!m) {
        if (s->nmb == MAX_MBARS) { sim_hazard(s, SIM_UNSUPPORTED, "more than %d mbarriers", MAX_MBARS); return; }
        m = &s->mb[s->nmb++];
        memset(m, 0, sizeof *m);
        m->clk = s->nthreads + s->ncta + (int)(m - s->mb);
        if (!(m->acc = vc_alloc(s)) || !(m->done = vc_alloc(s))) return;
        s->cta[w.cta].mbmap[w.off >> 2] = (int16_t)(s->nmb);
        s->cta[w.cta].mbmap[(w.off >> 2) + 1] = (int16_t)(s->nmb);
    }
    m->cta = w.cta, m->addr = w.off, m->expected = m->pending = count, m->tx = 0, m->init_line = in->line;
    m->narr[0] = m->narr[1] = 0;
    m->init_t = t->gtid, m->init_ep = t->vc[t->gtid];
    /* phase counting restarts, the clock does not: earlier acquisitions stay valid */
    Shadow *sh = ssh(s, w.cta, w.off);
    mark(&sh[0], W_THREAD, t->gtid, t->vc[t->gtid]);
    mark(&sh[1], W_THREAD, t->gtid, t->vc[t->gtid]);
}

/* A thread's arrival counts toward the phase in progress when it is performed; the PTX ISA gives arrivals no phase
 * of their own. So an arrival that is not ordered after every arrival of the previous phase (no release / acquire
 * chain from each of them to this thread) may, on another schedule, be performed before one of them and count
 * toward that phase: the phase then completes without an arrival it waits for (an init count one too low does
 * this each phase). Reported as a hazard; the thread's own earlier arrivals are ordered by program order, and
 * async arrivals (commit, complete_tx) and .relaxed ones are not tracked. Returns 0 after a report. */
static int mbar_arrival_ordered(Sim *s, Thread *t, Mbar *m, const Ins *in)
{
    for (int i = 0; i < m->narr[1]; i++) {
        const MbArrival *a = &m->arr[1][i];
        if (a->t == t->gtid || t->vc[a->t] >= a->ep) continue;
        sim_hazard(s, SIM_HAZARD, "mbarrier at 0x%x of CTA %d (initialised at line %d with %d arrivals): this arrival "
                   "(phase %u) is not ordered after thread %d's arrival at line %d in the phase before, so on another "
                   "schedule it could count toward that phase and complete it early (an expected count too low, or "
                   "no wait on the previous phase before arriving again)", m->addr, m->cta, m->init_line, m->expected,
                   m->phase, s->th[a->t].tid, a->line);
        return 0;
    }
    if (m->narr[0] == m->caparr[0]) {
        int nc = m->caparr[0] ? m->caparr[0] * 2 : 64;
        MbArrival *n = realloc(m->arr[0], sizeof *n * (size_t)nc);
        if (!n) { sim_hazard(s, SIM_UNSUPPORTED, "out of memory"); return 0; }
        m->arr[0] = n, m->caparr[0] = nc;
    }
    m->arr[0][m->narr[0]++] = (MbArrival){t->vc[t->gtid], t->gtid, in->line};
    return 1;
}

static void exec_mbar_arrive(Sim *s, Thread *t, const Ins *in)
{
    Where w;
    Mbar *m = mbar_operand(s, t, in, &in->ops[1], &w);
    if (!m) return;
    if (in->op == OP_MBAR_EXPECT_TX) {
        int64_t tx = (int64_t)alu_val(s, t, &in->ops[2]);
        m->tx += tx;
        if (in->c) { mbar_maybe_complete(s, m); return; } /* mbarrier.expect_tx: no arrival */
        if (in->mods & M_RELAXED) release_relaxed(s, t, m->acc);
        else if (!mbar_arrival_ordered(s, t, m, in)) return;
        else release(s, t, m->acc);
        mbar_arrive(s, m, 1, NULL);
        return;
    }
    int count = in->nops > 2 ? (int)alu_val(s, t, &in->ops[2]) : 1;
    if (in->mods & M_RELAXED) release_relaxed(s, t, m->acc); /* without a fence before it: no release */
    else if (!mbar_arrival_ordered(s, t, m, in)) return;
    else release(s, t, m->acc);
    mbar_arrive(s, m, count, NULL);
}

/* Returns 1 when the thread blocks (its wait has not completed; try_wait blocks until the phase completes, a
 * legal choice of the ISA's "potentially blocking" wait; test_wait never blocks). */
static int exec_mbar_wait(Sim *s, Thread *t, const Ins *in)
{
    Where w;
    Mbar *m = mbar_operand(s, t, in, &in->ops[1], &w);
    if (!m) return 0;
    if (!in->a) { sim_hazard(s, SIM_UNSUPPORTED, "mbarrier waits on a state token are not simulated (use .parity)"); return 0; }
    uint32_t parity = (uint32_t)alu_val(s, t, &in->ops[2]) & 1;
    if ((m->phase & 1) != parity) {
        if (!(in->mods & M_RELAXED)) vc_join(s, t->vc, m->done);
        else t->racq_mbar = (int)(m - s->mb) + 1; /* acquired only by a fence after it */
        alu_set(s, t, &in->ops[0], 1);
        return 0;
    }
    if (in->c) { /* test_wait: the phase is still open; no order is acquired */
        alu_set(s, t, &in->ops[0], 0);
        return 0;
    }
    t->state = TS_MBAR;
    t->wait_mbar = (int)(m - s->mb);
    return 1;
}

/* ------------------------------------------------------------ TMA */
static int tmap_operand(Sim *s, Thread *t, const Operand *o, TmaMap *map, int32_t *coords, int *ncoords)
{
    if (o->kind != O_MEM || o->nvec != 2) { sim_hazard(s, SIM_UNSUPPORTED, "expected [tensor-map, {coords}]"); return -1; }
    uint64_t a = alu_val(s, t, &o->vec[0]);
    const void *p = generic_ptr(s, a, 128);
    if (!p) return -1;
    char err[256];
    if (tma_decode(p, map, err, sizeof err)) { sim_hazard(s, SIM_FAULT, "tensor map at 0x%llx: %s", (unsigned long long)a, err); return -1; }
    const Operand *v = &o->vec[1];
    *ncoords = v->nvec;
    for (int i = 0; i < v->nvec && i < 5; i++) coords[i] = (int32_t)alu_val(s, t, &v->vec[i]);
    return 0;
}

static int load_dest(Sim *s, Thread *t, const Ins *in, Op *op, uint64_t da, uint32_t bytes, const Operand *mbar,
                     int mask_op);
static int store_source(Sim *s, Thread *t, Op *op, uint64_t sa, uint32_t bytes);

/* A tensor prefetch: remember its box until a load of this CTA takes the same one. */
static void exec_tma_prefetch(Sim *s, Thread *t, const Ins *in)
{
    TmaMap map;
    int32_t coords[5];
    int nc;
    if (tmap_operand(s, t, &in->ops[0], &map, coords, &nc)) return; /* an L2 hint: the tensor map must still be one */
    Cta *c = &s->cta[t->cta];
    if (c->npf == MAX_PREFETCH) {
        sim_hazard(s, SIM_UNSUPPORTED, "more than %d tensor prefetches of CTA %d wait for their loads", MAX_PREFETCH, t->cta);
        return;
    }
    c->pf[c->npf].map = alu_val(s, t, &in->ops[0].vec[0]);
    memcpy(c->pf[c->npf].coords, coords, sizeof coords);
    c->pf[c->npf].nc = nc, c->pf[c->npf].line = in->line;
    c->npf++;
    if (s->tm) timing_prefetch(s, t->cta, tma_tile_bytes(&map), !t->waited);
}

/* A load of a box this CTA prefetched: the prefetch was used. */
static void prefetch_taken(Sim *s, Thread *t, const Ins *in, const int32_t *coords, int nc)
{
    Cta *c = &s->cta[t->cta];
    uint64_t map = alu_val(s, t, &in->ops[1].vec[0]);
    for (int i = 0; i < c->npf; i++)
        if (c->pf[i].map == map && c->pf[i].nc == nc && !memcmp(c->pf[i].coords, coords, (size_t)nc * sizeof *coords)) {
            c->pf[i] = c->pf[--c->npf];
            i--;
        }
}

static void exec_tma_load(Sim *s, Thread *t, const Ins *in)
{
    Op *op = op_new(s, A_TMA_LOAD, t, -1);
    if (!op) return;
    int nc;
    uint64_t da = mem_addr(s, t, &in->ops[0]);
    if (tmap_operand(s, t, &in->ops[1], &op->u.tma.map, op->u.tma.coords, &nc)) { op_free(op); return; }
    op->u.tma.gather4 = !!(in->mods & M_GATHER4);
    int want = op->u.tma.gather4 ? 5 : in->a;
    if (nc != want || (!op->u.tma.gather4 && (uint32_t)in->a != op->u.tma.map.rank)) {
        sim_hazard(s, SIM_FAULT, "TMA .%dd with %d coordinates on a rank-%u tensor map", in->a, nc, op->u.tma.map.rank);
        op_free(op);
        return;
    }
    if (s->cta[t->cta].npf) prefetch_taken(s, t, in, op->u.tma.coords, nc);
    uint32_t bytes = op->u.tma.gather4 ? tma_gather4_bytes(&op->u.tma.map) : tma_tile_bytes(&op->u.tma.map);
    if (load_dest(s, t, in, op, da, bytes, &in->ops[2], 3)) op_free(op);
    else op_push(s, op);
}

/* The destination side of a TMA or bulk load: shared address, mbarrier, multicast CTAs, and the
 * footprint of what it will write. Returns -1 (after a report) when it cannot be issued. */
static int load_dest(Sim *s, Thread *t, const Ins *in, Op *op, uint64_t da, uint32_t bytes, const Operand *mbar,
                     int mask_op)
{
    Where dst, bar;
    uint64_t ba = mem_addr(s, t, mbar);
    if (s->status || smem_where(s, t, da, 1, bytes, &dst) || smem_where(s, t, ba, 1, 8, &bar)) return -1;
    if (!mbar_seen(s, t, mbar_at(s, bar.cta, bar.off, 1))) return -1;
    if (!(in->mods & M_MULTICAST) && bar.cta != dst.cta && (in->b != 2 || bar.cta != (dst.cta ^ 1))) {
        sim_hazard(s, SIM_HAZARD, "a load into CTA %d signals an mbarrier of CTA %d: the barrier must be in the "
                   "destination CTA, or with .cta_group::2 in its peer (rank %d)", dst.cta, bar.cta, dst.cta ^ 1);
        return -1;
    }
    op->u.tma.dst = dst.off, op->u.tma.mbar = bar.off, op->u.tma.mbar_cta = bar.cta;
    op->u.tma.pair = in->b == 2;
    if (in->mods & M_MULTICAST) {
        if (in->nops <= mask_op) { sim_hazard(s, SIM_FAULT, "multicast load without a CTA mask"); return -1; }
        uint32_t mask = (uint32_t)alu_val(s, t, &in->ops[mask_op]) & 0xffff;
        op->u.tma.multicast = 1;
        for (int r = 0; r < s->ncta; r++)
            if (mask >> r & 1) op->u.tma.ctas[op->u.tma.nctas++] = r;
        if (mask >> s->ncta) { sim_hazard(s, SIM_FAULT, "multicast mask 0x%x names CTAs outside the cluster", mask); return -1; }
    } else {
        op->u.tma.ctas[op->u.tma.nctas++] = dst.cta;
    }
    for (int i = 0; i < op->u.tma.nctas && op->u.tma.multicast; i++) { /* each destination's barrier */
        int cta = op->u.tma.ctas[i];
        int bcta = op->u.tma.pair ? (cta & ~1) | (bar.cta & 1) : cta;
        if (!mbar_seen(s, t, mbar_at(s, bcta, bar.off, 1))) return -1;
    }
    for (int i = 0; i < op->u.tma.nctas; i++) {
        Cta *c = &s->cta[op->u.tma.ctas[i]];
        for (uint32_t w = dst.off >> 2; w <= (dst.off + bytes - 1) >> 2; w++) {
            check_write(s, &c->ssh[w], "TMA load", op->u.tma.ctas[i], w << 2, 0, 0);
            fp_add(s, op, fp_pack(0, 1, op->u.tma.ctas[i], w));
        }
    }
    if (s->status) return -1;
    fp_apply(s, op, +1);
    return 0;
}

static int bulk_sizes_ok(Sim *s, uint64_t g, uint64_t sh, uint64_t n)
{
    if (!n || n % 16 || g % 16 || sh % 16) {
        sim_hazard(s, SIM_FAULT, "cp.async.bulk of %llu bytes between 0x%llx and 0x%llx: size and addresses must be "
                   "multiples of 16", (unsigned long long)n, (unsigned long long)g, (unsigned long long)sh);
        return 0;
    }
    if (sim_global_check(s->l->global, g, n)) {
        sim_hazard(s, SIM_FAULT, "cp.async.bulk of %llu bytes at global 0x%llx is outside every allocation",
                   (unsigned long long)n, (unsigned long long)g);
        return 0;
    }
    return 1;
}

/* cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src], size, [mbar] */
static void exec_bulk_load(Sim *s, Thread *t, const Ins *in)
{
    uint64_t da = mem_addr(s, t, &in->ops[0]), ga = mem_addr(s, t, &in->ops[1]);
    uint64_t n = alu_val(s, t, &in->ops[2]);
    if (s->status || !bulk_sizes_ok(s, ga, da, n)) return;
    Op *op = op_new(s, A_BULK_LOAD, t, -1);
    if (!op) return;
    op->u.tma.gaddr = ga, op->u.tma.bytes = (uint32_t)n;
    if (load_dest(s, t, in, op, da, (uint32_t)n, &in->ops[3], 4)) op_free(op);
    else op_push(s, op);
}

/* cp.async.bulk.global.shared::cta.bulk_group [dst], [src], size */
static void exec_bulk_store(Sim *s, Thread *t, const Ins *in)
{
    uint64_t ga = mem_addr(s, t, &in->ops[0]), sa = mem_addr(s, t, &in->ops[1]);
    uint64_t n = alu_val(s, t, &in->ops[2]);
    if (s->status || !bulk_sizes_ok(s, ga, sa, n)) return;
    Op *op = op_new(s, A_BULK_STORE, t, -1);
    if (!op) return;
    op->u.tma.gaddr = ga, op->u.tma.bytes = (uint32_t)n, op->u.tma.redadd = !!(in->mods & M_REDADD);
    if (store_source(s, t, op, sa, (uint32_t)n)) op_free(op);
    else op_push(s, op);
}

static void exec_tma_store(Sim *s, Thread *t, const Ins *in)
{
    Op *op = op_new(s, A_TMA_STORE, t, -1);
    if (!op) return;
    int nc;
    if (tmap_operand(s, t, &in->ops[0], &op->u.tma.map, op->u.tma.coords, &nc)) { op_free(op); return; }
    if ((uint32_t)nc != op->u.tma.map.rank || in->a != nc) {
        sim_hazard(s, SIM_FAULT, "TMA store .%dd with %d coordinates on a rank-%u map", in->a, nc, op->u.tma.map.rank);
        op_free(op);
        return;
    }
    uint64_t sa = mem_addr(s, t, &in->ops[1]);
    if (s->status || store_source(s, t, op, sa, tma_tile_bytes(&op->u.tma.map))) op_free(op);
    else op_push(s, op);
}

/* The source side of a TMA or bulk store: the shared range it will read (checked against the
 * issuer's clock: the async proxy reads it) and its bulk group. */
static int store_source(Sim *s, Thread *t, Op *op, uint64_t sa, uint32_t bytes)
{
    Where src;
    if (s->status || smem_where(s, t, sa, 0, bytes, &src)) return -1;
    op->u.tma.dst = src.off;
    Cta *c = &s->cta[src.cta];
    for (uint32_t w = src.off >> 2; w <= (src.off + bytes - 1) >> 2; w++) {
        check_read(s, t, t->vc, &c->ssh[w], 1, "TMA store", src.cta, w << 2, 0, 0);
        fp_add(s, op, fp_pack(0, 0, src.cta, w));
    }
    if (s->status) return -1;
    op->group = t->grp_commit;
    t->grp_out[op->group % GROUP_RING]++;
    fp_apply(s, op, +1);
    return 0;
}

/* cp.async.bulk.wait_group N: 1 when the thread must wait */
static int bulk_wait_blocks(Thread *t, uint32_t n)
{
    uint32_t outstanding = 0;
    uint32_t lo = t->grp_commit > GROUP_RING ? t->grp_commit - GROUP_RING : 0;
    for (uint32_t g = lo; g < t->grp_commit; g++) outstanding += t->grp_out[g % GROUP_RING] > 0;
    return outstanding > n;
}

/* ------------------------------------------------------------ cp.async (non-bulk), per thread */
/* Closes the open segment (see cpa_landed_below); the ring holds GROUP_RING segments in flight. */
static int cpa_new_segment(Sim *s, Thread *t)
{
    cpa_landed_below(t, 0); /* advances cpa_low */
    if (t->cpa_seg + 1 - t->cpa_low >= GROUP_RING) {
        sim_hazard(s, SIM_UNSUPPORTED, "more than %d cp.async groups and cp.async.mbarrier.arrives with copies in "
                   "flight", GROUP_RING - 1);
        return -1;
    }
    t->cpa_seg++;
    return 0;
}

static void cpa_commit(Sim *s, Thread *t)
{
    t->cpa_grp_end[t->cpa_commit % GROUP_RING] = t->cpa_seg + 1;
    t->cpa_commit++;
    cpa_new_segment(s, t);
}

/* The bytes read from src: src-size, or none when the ignore-src predicate is true. */
static uint32_t cpa_src_size(Sim *s, Thread *t, const Ins *in, uint32_t size)
{
    if (in->nops - 3 - in->b < 1) return size; /* only a cache policy (or nothing) follows cp-size */
    const Operand *o = &in->ops[3];
    if (o->kind == O_REG && s->e->regs[o->reg].type == T_PRED) return (alu_val(s, t, o) & 1) ? 0 : size;
    return (uint32_t)alu_val(s, t, o);
}

/* cp.async.{ca,cg}.shared{::cta}.global [dst], [src], cp-size{, src-size | ignore-src}{, cache-policy} */
static void exec_cpa(Sim *s, Thread *t, const Ins *in)
{
    if (in->nops < 3 || in->ops[2].kind != O_IMM) { sim_hazard(s, SIM_UNSUPPORTED, "cp.async: cp-size must be an immediate"); return; }
    uint32_t size = (uint32_t)in->ops[2].imm;
    uint64_t da = mem_addr(s, t, &in->ops[0]), ga = mem_addr(s, t, &in->ops[1]);
    uint32_t src = cpa_src_size(s, t, in, size);
    if (s->status) return;
    if ((size != 4 && size != 8 && size != 16) || (in->a && size != 16)) {
        sim_hazard(s, SIM_FAULT, "cp.async.%s with cp-size %u (4, 8 or 16; .cg only 16)", in->a ? "cg" : "ca", size);
        return;
    }
    if (src > size) { sim_hazard(s, SIM_FAULT, "cp.async: src-size %u exceeds cp-size %u (undefined)", src, size); return; }
    /* the source is not read when src-size is 0 or ignore-src holds: its address may be anything */
    if (da % size || (src && ga % size)) {
        sim_hazard(s, SIM_FAULT, "cp.async of %u bytes: shared 0x%llx or global 0x%llx is not %u-byte aligned", size,
                   (unsigned long long)da, (unsigned long long)ga, size);
        return;
    }
    Where w;
    if (smem_where(s, t, da, 0, size, &w)) return;
    if (src && sim_global_check(s->l->global, ga, src)) {
        sim_hazard(s, SIM_FAULT, "cp.async reads global memory [0x%llx, +%u) outside every allocation",
                   (unsigned long long)ga, src);
        return;
    }
    Cta *c = &s->cta[w.cta];
    for (uint32_t x = w.off >> 2; x < (w.off + size) >> 2; x++) check_write(s, &c->ssh[x], "cp.async", w.cta, x << 2, 0, 0);
    if (s->status) return;
    Op *op = op_new(s, A_CPA, t, -1);
    if (!op) return;
    op->u.cpa.src = ga, op->u.cpa.dst = w.off, op->u.cpa.seg = t->cpa_seg;
    op->u.cpa.size = (uint8_t)size, op->u.cpa.src_size = (uint8_t)src;
    for (uint32_t x = w.off >> 2; x < (w.off + size) >> 2; x++) c->ssh[x].writers++; /* undone at publication */
    t->cpa_fly[t->cpa_seg % GROUP_RING]++;
    op_push(s, op);
}

/* cp.async.wait_group N, or wait_all (= commit_group; wait_group 0): 1 when the thread must wait.
 * Passing publishes the copies of the groups waited for to the thread. */
static int cpa_wait_blocks(Sim *s, Thread *t, const Ins *in)
{
    uint32_t n = 0;
    if (in->a) {
        if (!t->cpa_retry) cpa_commit(s, t); /* once, not on each re-check */
    } else {
        n = (uint32_t)alu_val(s, t, &in->ops[0]);
    }
    if (n >= GROUP_RING) { sim_hazard(s, SIM_UNSUPPORTED, "cp.async.wait_group %u: at most %d", n, GROUP_RING - 1); return 0; }
    if (t->cpa_commit <= n) return 0; /* N or fewer groups at all */
    uint32_t end = t->cpa_grp_end[(t->cpa_commit - n - 1) % GROUP_RING];
    if (!cpa_landed_below(t, end)) { t->cpa_retry = (uint8_t)in->a; return 1; }
    t->cpa_retry = 0;
    cpa_publish(s, t, end, NULL);
    return 0;
}

/* cp.async.mbarrier.arrive{.noinc}.shared{::cta}.b64 [mbar]: an arrive-on once the thread's
 * copies so far have landed. Without .noinc the pending count is raised now, so that arrive-on
 * nets zero in this phase; with .noinc it is one of the arrivals mbarrier.init counted. */
static void exec_cpa_arrive(Sim *s, Thread *t, const Ins *in)
{
    Where w;
    Mbar *m = mbar_operand(s, t, in, &in->ops[0], &w);
    if (!m) return;
    if (w.cta != t->cta) { sim_hazard(s, SIM_FAULT, "cp.async.mbarrier.arrive on another CTA's mbarrier (shared::cta only)"); return; }
    if (!in->a) {
        if (m->pending + 1 > (1 << 20) - 1) { sim_hazard(s, SIM_FAULT, "cp.async.mbarrier.arrive: pending count overflows"); return; }
        m->pending++;
    }
    Op *op = op_new(s, A_CPA_ARRIVE, t, -1);
    if (!op) return;
    op->u.cpa.mbar = w.off, op->u.cpa.seg = t->cpa_seg + 1;
    op->seq = t->cpa_arrives++;
    if (cpa_new_segment(s, t)) { op_free(op); return; }
    op_push(s, op);
}

/* ------------------------------------------------------------ tcgen05 (per thread) */
static int pipe_stream(Sim *s, int cta) { (void)s; return cta; }

static void exec_tc_mma(Sim *s, Thread *t, const Ins *in)
{
    const Operand *o = in->ops;
    if (in->nops != 5) { sim_hazard(s, SIM_UNSUPPORTED, "tcgen05.mma with disable-output-lane or scale operands is not simulated"); return; }
    if (in->b == 2 && !pair_peer_ok(s, t->cta, in->line, "tcgen05.mma")) return;
    Op *op = op_new(s, A_MMA, t, pipe_stream(s, t->cta));
    if (!op) return;
    TcMma *m = &op->u.mma.mma;
    m->kind = (TcKind)in->a, m->cta_group = in->b, m->cta = t->cta;
    m->d_tmem = (uint32_t)alu_val(s, t, &o[0].vec[0]) + (uint32_t)o[0].imm;
    if (o[1].kind == O_MEM) m->a_is_tmem = 1, m->a_tmem = (uint32_t)mem_addr(s, t, &o[1]);
    else m->a_desc = alu_val(s, t, &o[1]);
    m->b_desc = alu_val(s, t, &o[2]);
    m->idesc = (uint32_t)alu_val(s, t, &o[3]);
    m->enable_input_d = (int)(alu_val(s, t, &o[4]) & 1);
    op->u.mma.seq = t->tc_seq = ++s->cta[t->cta].pipe_issued;
    Ctx c;
    ctx_init(&c, s, op, t, 1, "tcgen05.mma");
    c.pipe = pipe_clk(s, t->cta);
    TcMem mem = tc_mem(&c);
    if (tc_mma(&mem, m, TC_FOOTPRINT)) { unit_fail(s, &c); op_free(op); return; }
    fp_apply(s, op, +1);
    op_push(s, op);
}

static void exec_tc_cp(Sim *s, Thread *t, const Ins *in)
{
    if (in->b == 2 && !pair_peer_ok(s, t->cta, in->line, "tcgen05.cp")) return;
    Op *op = op_new(s, A_CP, t, pipe_stream(s, t->cta));
    if (!op) return;
    op->u.cp.cta = t->cta;
    op->u.cp.shape = (TcCpShape)in->a;
    op->u.cp.multicast = (TcCpMulticast)in->c;
    op->u.cp.taddr = (uint32_t)mem_addr(s, t, &in->ops[0]);
    op->u.cp.s_desc = alu_val(s, t, &in->ops[1]);
    op->u.cp.cta_group = in->b;
    op->u.mma.seq = t->tc_seq = ++s->cta[t->cta].pipe_issued;
    Ctx c;
    ctx_init(&c, s, op, t, 1, "tcgen05.cp");
    c.pipe = pipe_clk(s, t->cta);
    TcMem mem = tc_mem(&c);
    if (tc_tmem_cp(&mem, &op->u.cp, TC_FOOTPRINT)) { unit_fail(s, &c); op_free(op); return; }
    fp_apply(s, op, +1);
    op_push(s, op);
}

static void exec_tc_commit(Sim *s, Thread *t, const Ins *in)
{
    Op *op = op_new(s, A_COMMIT, t, pipe_stream(s, t->cta));
    if (!op) return;
    Where w;
    uint64_t a = mem_addr(s, t, &in->ops[0]);
    if (s->status || smem_where(s, t, a, 1, 8, &w)) { op_free(op); return; }
    op->u.commit.mbar = w.off;
    if (in->mods & M_MULTICAST) {
        uint32_t mask = (uint32_t)alu_val(s, t, &in->ops[1]) & 0xffff;
        for (int r = 0; r < s->ncta; r++)
            if (mask >> r & 1) op->u.commit.ctas[op->u.commit.nctas++] = r;
    } else {
        op->u.commit.ctas[op->u.commit.nctas++] = w.cta;
    }
    for (int i = 0; i < op->u.commit.nctas; i++)
        if (!mbar_seen(s, t, mbar_at(s, op->u.commit.ctas[i], w.off, 1))) { op_free(op); return; }
    if (!(op->vc = vc_alloc(s))) { op_free(op); return; }
    vc_join(s, op->vc, t->vc);
    /* it tracks the ops this thread issued (the pipe runs in order, so with them every earlier op):
     * an op another thread issues later is not covered */
    if (t->tc_seq > op->vc[pipe_clk(s, t->cta)]) op->vc[pipe_clk(s, t->cta)] = t->tc_seq;
    t->vc[t->gtid]++;
    op->ready = s->step; /* the commit waits only for the ops before it in the pipe */
    op_push(s, op);
}

static void exec_tc_alloc(Sim *s, Thread *t, const Ins *in, int ncols, Where where)
{
    Cta *c = &s->cta[t->cta];
    (void)in;
    if (c->relinquished) { sim_hazard(s, SIM_HAZARD, "tcgen05.alloc after tcgen05.relinquish_alloc_permit"); return; }
    if (ncols < 32 || ncols > TC_TMEM_COLS || (ncols & (ncols - 1))) {
        sim_hazard(s, SIM_FAULT, "tcgen05.alloc of %d columns: must be a power of 2 in 32..512", ncols);
        return;
    }
    for (int start = 0; start + ncols <= TC_TMEM_COLS; start += ncols) {
        int free_run = 1;
        for (int i = start; i < start + ncols; i++) free_run &= !c->tcol[i];
        if (!free_run) continue;
        memset(c->tcol + start, 1, (size_t)ncols);
        uint32_t addr = (uint32_t)start; /* lane 0, column start */
        memcpy(s->cta[where.cta].smem + where.off, &addr, 4);
        Shadow *sh = ssh(s, where.cta, where.off);
        check_write(s, sh, "tcgen05.alloc", where.cta, where.off, 0, 0);
        mark(sh, W_TCST, t->gtid, t->vc[t->gtid]);
        t->st_unwaited = 0;
        return;
    }
    int used = 0;
    for (int i = 0; i < TC_TMEM_COLS; i++) used += c->tcol[i];
    sim_hazard(s, SIM_HAZARD, "TMEM over-allocation: tcgen05.alloc of %d columns with %d of 512 already allocated "
               "(the real allocator would block forever)", ncols, used);
}

/* a tcgen05.mma or .cp writes the TMEM of its CTA, and with .cta_group::2 of the peer too */
static int op_touches_cta(const Op *op, int cta)
{
    int cg = op->kind == A_CP ? op->u.cp.cta_group : op->u.mma.mma.cta_group;
    return op->cta == cta || (cg == 2 && (op->cta ^ 1) == cta);
}

static void exec_tc_dealloc(Sim *s, Thread *t, uint32_t taddr, int ncols)
{
    Cta *c = &s->cta[t->cta];
    uint32_t col = taddr & 0xffff;
    if ((taddr >> 16) || col + (uint32_t)ncols > TC_TMEM_COLS) {
        sim_hazard(s, SIM_FAULT, "tcgen05.dealloc of address 0x%x, %d columns: out of range", taddr, ncols);
        return;
    }
    for (uint32_t i = col; i < col + (uint32_t)ncols; i++)
        if (!c->tcol[i]) {
            sim_hazard(s, SIM_HAZARD, "tcgen05.dealloc frees column %u, which is not allocated (double free?)", i);
            return;
        }
    for (int i = 0; i < s->nops; i++)
        if ((s->ops[i]->kind == A_MMA || s->ops[i]->kind == A_CP) && op_touches_cta(s->ops[i], t->cta)) {
            sim_hazard(s, SIM_HAZARD, "tcgen05.dealloc while a tcgen05.mma issued at line %d has not completed",
                       s->ops[i]->line);
            return;
        }
    /* dealloc is a synchronous tcgen05 instruction (ordered by program order after the thread's waits and
     * barriers: no fence::after_thread_sync needed), but another thread's asynchronous tcgen05.ld / st of the
     * freed cells must be ordered before it: waited (wait::ld / wait::st), then tcgen05.fence::before_thread_sync
     * and a release this thread acquired */
    for (uint32_t lane = 0; lane < TC_TMEM_LANES; lane++)
        for (uint32_t i = col; i < col + (uint32_t)ncols; i++) {
            const Shadow *sh = &c->tsh[lane * TC_TMEM_COLS + i];
            const char *why = NULL;
            if (sh->rd && sh->rclk < s->nthreads && sh->rclk != t->gtid &&
                (t->vc[sh->rclk] < sh->rep || !flog_covers(&s->th[sh->rclk].f_tcld, sh->rep, t->vc[sh->rclk])))
                why = "read by another thread's tcgen05.ld";
            else if (sh->kind == W_TCST && sh->clk != t->gtid &&
                     (t->vc[sh->clk] < sh->ep || !flog_covers(&s->th[sh->clk].f_tcst, sh->ep, t->vc[sh->clk])))
                why = "written by another thread's tcgen05.st";
            if (why) {
                sim_hazard(s, SIM_HAZARD, "tcgen05.dealloc frees TMEM lane %u column %u, %s that is not ordered before "
                           "the dealloc (wait::ld / wait::st, tcgen05.fence::before_thread_sync, a release this "
                           "thread acquired)", lane, i, why);
                return;
            }
        }
    memset(c->tcol + col, 0, (size_t)ncols);
}

/* ------------------------------------------------------------ warp collectives */
static int is_collective(int op)
{
    switch (op) {
    case OP_SHFL: case OP_VOTE: case OP_ELECT: case OP_BAR_WARP: case OP_REDUX: case OP_TC_ALLOC: case OP_TC_DEALLOC:
    case OP_TC_RELINQUISH: case OP_TC_LD: case OP_TC_ST: case OP_WG_MMA: case OP_WG_COMMIT: case OP_STMATRIX:
        return 1;
    default: return 0;
    }
}

/* The warpgroup collectives meet across 4 warps. */
static int is_wg_collective(int op) { return op == OP_WG_MMA || op == OP_WG_COMMIT; }

static void coll_tc_ldst(Sim *s, Thread **ts, int n, const Ins *in)
{
    static _Thread_local uint32_t regs[32][TC_MAX_REGS];
    Thread *t0 = ts[0];
    int ld = in->op == OP_TC_LD;
    const Operand *mo = &in->ops[ld ? 1 : 0], *vo = &in->ops[ld ? 0 : 1];
    uint32_t taddr = (uint32_t)mem_addr(s, t0, mo);
    for (int i = 1; i < n; i++)
        if ((uint32_t)mem_addr(s, ts[i], mo) != taddr) {
            s->cur_t = ts[i];
            sim_hazard(s, SIM_HAZARD, "tcgen05.%s: the TMEM address differs between lanes of the warp", ld ? "ld" : "st");
            return;
        }
    if (n != 32) { sim_hazard(s, SIM_HAZARD, "tcgen05.%s executed by %d threads of a warp, not 32", ld ? "ld" : "st", n); return; }
    TcLdSt op = {t0->cta, t0->tid / 32, (TcShape)in->a, in->b, !!(in->mods & M_PACK16), taddr, 0};
    int nr = tc_ldst_nregs(&op);
    if (nr < 0 || nr != vo->nvec) {
        sim_hazard(s, SIM_FAULT, "tcgen05.%s: %d registers given, the shape needs %d", ld ? "ld" : "st", vo->nvec, nr);
        return;
    }
    Ctx c;
    ctx_init(&c, s, NULL, t0, 1, ld ? "tcgen05.ld" : "tcgen05.st");
    c.async_reader = 0;
    TcMem m = tc_mem(&c);
    if (ld) {
        if (tc_tmem_ld(&m, &op, regs)) { unit_fail(s, &c); return; }
        for (int i = 0; i < n; i++) {
            Thread *t = ts[i];
            for (int j = 0; j < nr; j++) {
                const Operand *d = &vo->vec[j];
                if (d->kind != O_REG) continue;
                wreg(s, t, d->reg, regs[t->lane][j]);
                pend_own(t, d->reg, PEND_LD);
            }
            t->ld_pending = 1;
        }
    } else {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < nr; j++) regs[ts[i]->lane][j] = (uint32_t)alu_val(s, ts[i], &vo->vec[j]);
        c.wkind = W_TCST, c.wclk = t0->gtid, c.wep = t0->vc[t0->gtid];
        c.async_reader = 0;
        /* each lane's cells carry its own thread: tc.c writes lane by lane, so tag afterwards */
        if (tc_tmem_st(&m, &op, regs)) { unit_fail(s, &c); return; }
        for (int i = 0; i < n; i++) ts[i]->st_unwaited = 1;
    }
}

static void coll_wgmma(Sim *s, Thread **ts, int n, const Ins *in)
{
    Thread *t0 = ts[0];
    if (n != 128) { sim_hazard(s, SIM_HAZARD, "wgmma.mma_async executed by %d threads, not a warpgroup's 128", n); return; }
    int wg = t0->gtid / 128;
    const Operand *o = in->ops;
    /* wgmma.fence (PTX ISA): before the warpgroup's first wgmma, and between a thread's access of a register and
     * a wgmma that uses it as accumulator or A fragment (accumulators passed from wgmma to wgmma excepted) */
    for (int i = 0; i < n; i++) {
        Thread *t = ts[i];
        int bad = -1;
        for (int j = 0; j < o[0].nvec && bad < 0; j++)
            if (o[0].vec[j].kind == O_REG && t->racc[o[0].vec[j].reg] > t->wg_fenced) bad = o[0].vec[j].reg;
        for (int j = 0; o[1].kind == O_VEC && j < o[1].nvec && bad < 0; j++)
            if (o[1].vec[j].kind == O_REG && t->racc[o[1].vec[j].reg] > t->wg_fenced) bad = o[1].vec[j].reg;
        if (bad >= 0 || !t->wg_fenced) {
            s->cur_t = t;
            if (bad >= 0)
                sim_hazard(s, SIM_HAZARD, "wgmma.mma_async uses register %s, which this thread accessed after its last "
                           "wgmma.fence (or with none before)", s->e->regs[bad].name);
            else
                sim_hazard(s, SIM_HAZARD, "wgmma.mma_async with no wgmma.fence before it in this thread");
            return;
        }
    }
    Op *op = op_new(s, A_WGMMA, t0, s->ncta + wg);
    if (!op) return;
    TcWgmma *w = &op->u.wg.w;
    w->cta = t0->cta, w->m = in->a, w->n = in->b, w->k = in->c;
    w->dtype = (TcType)in->type, w->atype = (TcType)in->type2, w->btype = (TcType)in->d;
    w->a_is_reg = o[1].kind == O_VEC;
    int rest = 3;
    if (!w->a_is_reg) w->a_desc = alu_val(s, t0, &o[1]);
    w->b_desc = alu_val(s, t0, &o[2]);
    w->scale_d = in->nops > rest ? (int)(alu_val(s, t0, &o[rest]) & 1) : 1;
    w->imm_scale_a = in->nops > rest + 1 ? (int)(int64_t)o[rest + 1].imm : 1;
    w->imm_scale_b = in->nops > rest + 2 ? (int)(int64_t)o[rest + 2].imm : 1;
    if (w->a_is_reg) w->tnsp_b = in->nops > rest + 3 ? (int)o[rest + 3].imm : 0;
    else w->tnsp_a = in->nops > rest + 3 ? (int)o[rest + 3].imm : 0, w->tnsp_b = in->nops > rest + 4 ? (int)o[rest + 4].imm : 0;
    int nd = o[0].nvec;
    if (nd != tc_wgmma_d_regs(w)) { sim_hazard(s, SIM_FAULT, "wgmma: %d accumulator registers, the shape needs %d", nd, tc_wgmma_d_regs(w)); op_free(op); return; }
    op->u.wg.nd = nd;
    op->u.wg.wg_first = wg * 128;
    op->u.wg.dregs = malloc(sizeof(int) * (size_t)nd);
    op->u.wg.a = calloc(128, sizeof *op->u.wg.a);
    if (!op->u.wg.dregs || !op->u.wg.a) { op_free(op); sim_hazard(s, SIM_UNSUPPORTED, "out of memory"); return; }
    for (int j = 0; j < nd; j++) op->u.wg.dregs[j] = o[0].vec[j].reg;
    if (w->a_is_reg)
        for (int i = 0; i < 128; i++)
            for (int j = 0; j < o[1].nvec; j++) { /* the wgmma's own read is no access that needs a fence */
                uint32_t keep = o[1].vec[j].kind == O_REG ? ts[i]->racc[o[1].vec[j].reg] : 0;
                op->u.wg.a[i][j] = (uint32_t)alu_val(s, ts[i], &o[1].vec[j]);
                if (o[1].vec[j].kind == O_REG) ts[i]->racc[o[1].vec[j].reg] = keep;
            }
    /* the accumulators belong to the op until wait_group (chained wgmmas on them are fine: in order) */
    for (int i = 0; i < 128; i++)
        for (int j = 0; j < nd; j++)
            pend_own(ts[i], op->u.wg.dregs[j], 1);
    op->u.wg.group = s->wg_commit[wg];
    Ctx c;
    ctx_init(&c, s, op, t0, 1, "wgmma.mma_async");
    TcMem m = tc_mem(&c);
    if (tc_wgmma(&m, w, NULL, NULL, TC_FOOTPRINT)) { unit_fail(s, &c); op_free(op); return; }
    fp_apply(s, op, +1);
    op_push(s, op);
}

/* redux.sync.op{.abs}{.NaN}.type: add/min/max of .u32/.s32, and/or/xor of .b32, min/max of .f32
 * (.abs first takes magnitudes; .NaN makes any NaN the result, else NaNs lose), one result for all */
static void coll_redux(Sim *s, Thread **ts, int n, const Ins *in)
{
    int f = in->type == T_F32, sg = in->type == T_S32;
    uint32_t acc = 0;
    float facc = NAN;
    int fnan = 0;
    for (int i = 0; i < n; i++) {
        uint32_t v = (uint32_t)alu_val(s, ts[i], &in->ops[1]);
        if (f) {
            float x;
            memcpy(&x, &v, 4);
            if (in->mods & M_ABS) x = fabsf(x);
            if (isnan(x)) { fnan = 1; continue; }
            if (isnan(facc) || (in->a == 1 ? (x < facc || (x == facc && signbit(x)))
                                           : (x > facc || (x == facc && !signbit(x)))))
                facc = x;
            continue;
        }
        if (!i) { acc = v; continue; }
        switch (in->a) {
        case 0: acc += v; break;
        case 1: acc = sg ? ((int32_t)v < (int32_t)acc ? v : acc) : (v < acc ? v : acc); break;
        case 2: acc = sg ? ((int32_t)v > (int32_t)acc ? v : acc) : (v > acc ? v : acc); break;
        case 3: acc &= v; break;
        case 4: acc |= v; break;
        default: acc ^= v; break;
        }
    }
    if (f) {
        if (in->a != 1 && in->a != 2) { sim_hazard(s, SIM_UNSUPPORTED, "redux.sync of .f32 other than min/max"); return; }
        if (fnan && (in->mods & M_NAN)) facc = NAN;
        memcpy(&acc, &facc, 4);
    }
    for (int i = 0; i < n; i++) alu_set(s, ts[i], &in->ops[0], acc);
}

/* stmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared{::cta}.b16 [p], {r0..} (PTX ISA, warp-level matrix store
 * instruction stmatrix), the rule implemented:
 *   - the warp stores num (1, 2 or 4) 8x8 matrices of 16-bit elements; register j of every lane carries its piece of
 *     matrix j;
 *   - lane l's register holds two elements of row l / 4: column 2 (l % 4) in its low 16 bits and column
 *     2 (l % 4) + 1 in its high 16 bits, so lanes 4i..4i+3 together hold row i;
 *   - the row addresses come from the lanes' [p]: lanes 8j..8j+7 name rows 0..7 of matrix j (only lanes 0-7 are
 *     read for .x1, 0-15 for .x2); a row is 8 consecutive b16 (16 bytes) from its address, which must be 16-byte
 *     aligned (a fault here), and the rows need not be contiguous (a swizzled tile's rows are not);
 *   - .trans stores the matrix column-major: the eight addresses then start columns 0..7, and element (row r,
 *     column c) goes to address[c] + 2 r.
 * Each element is a weak generic-proxy store of the lane whose register holds it, so each is checked and recorded
 * as st.shared's are (the word's last writer: with .trans a word holds elements of two lanes, rows 2i and 2i + 1,
 * and records the higher lane, as two 16-bit st.shared of one word would record the later one). */
static void coll_stmatrix(Sim *s, Thread **ts, int n, const Ins *in)
{
    const Operand *mo = &in->ops[0], *vo = &in->ops[1];
    int nm = in->b, trans = in->c;
    if (n != 32) {
        sim_hazard(s, SIM_HAZARD, "stmatrix executed by %d threads of a warp, not 32 (.sync.aligned: every lane, none "
                   "exited)", n);
        return;
    }
    Thread *lane[32];
    for (int i = 0; i < n; i++) lane[ts[i]->lane] = ts[i];
    Where row[4][8]; /* matrix, row (.trans: column) -> its 16 bytes */
    for (int m = 0; m < nm; m++)
        for (int i = 0; i < 8; i++) {
            Thread *t = lane[8 * m + i];
            s->cur_t = t;
            uint64_t a = mem_addr(s, t, mo);
            if (s->status) return;
            if (a & 15) {
                sim_hazard(s, SIM_FAULT, "stmatrix: lane %d's address 0x%llx (matrix %d, %s %d) is not 16-byte aligned",
                           t->lane, (unsigned long long)a, m, trans ? "column" : "row", i);
                return;
            }
            if (smem_where(s, t, a, 0, 16, &row[m][i])) return;
        }
    for (int l = 0; l < 32; l++) {
        Thread *t = lane[l];
        s->cur_t = t;
        int r = l / 4, c0 = 2 * (l % 4);
        for (int m = 0; m < nm; m++) {
            uint32_t v = (uint32_t)alu_val(s, t, &vo->vec[m]);
            for (int h = 0; h < 2; h++) {
                int c = c0 + h;
                const Where *w = trans ? &row[m][c] : &row[m][r];
                uint32_t off = w->off + 2u * (uint32_t)(trans ? r : c);
                Cta *k = &s->cta[w->cta];
                uint16_t e = (uint16_t)(v >> (16 * h));
                check_write(s, &k->ssh[off >> 2], "stmatrix", w->cta, off & ~3u, 0, 0);
                if (s->status) return;
                memcpy(k->smem + off, &e, 2);
                mark(&k->ssh[off >> 2], W_THREAD, t->gtid, t->vc[t->gtid]);
            }
        }
    }
}

static void coll_exec(Sim *s, Thread **ts, int n, const Ins *in)
{
    Thread *t0 = ts[0];
    s->cur_t = t0;
    switch (in->op) {
    case OP_SHFL: {
        uint32_t vals[32], out[32];
        int present[32] = {0};
        for (int i = 0; i < n; i++) vals[ts[i]->lane] = (uint32_t)alu_val(s, ts[i], &in->ops[1]), present[ts[i]->lane] = 1;
        for (int i = 0; i < n; i++) {
            Thread *t = ts[i];
            uint32_t lane = (uint32_t)t->lane, b = (uint32_t)alu_val(s, t, &in->ops[2]) & 31;
            uint32_t c = (uint32_t)alu_val(s, t, &in->ops[3]);
            uint32_t seg = (c >> 8) & 31, cval = c & 31;
            uint32_t maxl = (lane & seg) | (cval & ~seg), minl = lane & seg, j;
            int ok;
            switch (in->a) {
            case 1: j = lane - b; ok = (int32_t)j >= (int32_t)maxl; break;
            case 2: j = lane + b; ok = j <= maxl; break;
            case 3: j = minl | (b & ~seg); ok = j <= maxl; break;
            default: j = lane ^ b; ok = j <= maxl; break;
            }
            if (!ok || j > 31) j = lane;
            if (!present[j]) { s->cur_t = t; sim_hazard(s, SIM_HAZARD, "shfl.sync reads lane %u, which is not in the shuffle", j); return; }
            out[i] = vals[j];
            if (in->ops[0].kind == O_PAIR) alu_set(s, t, &in->ops[0].vec[1], (uint64_t)ok);
        }
        for (int i = 0; i < n; i++) alu_set(s, ts[i], in->ops[0].kind == O_PAIR ? &in->ops[0].vec[0] : &in->ops[0], out[i]);
        break;
    }
    case OP_VOTE: {
        int any = 0, all = 1;
        uint32_t ballot = 0, first = 0;
        for (int i = 0; i < n; i++) {
            uint64_t p = alu_val(s, ts[i], &in->ops[1]) & 1;
            any |= (int)p, all &= (int)p;
            if (p) ballot |= 1u << ts[i]->lane;
            if (!i) first = (uint32_t)p;
        }
        int uni = all || !any;
        (void)first;
        for (int i = 0; i < n; i++)
            alu_set(s, ts[i], &in->ops[0], in->a == 0 ? (uint64_t)any : in->a == 1 ? (uint64_t)all
                                         : in->a == 2 ? (uint64_t)uni : ballot);
        break;
    }
    case OP_REDUX: coll_redux(s, ts, n, in); break;
    case OP_ELECT: {
        int leader = 32;
        for (int i = 0; i < n; i++) if (ts[i]->lane < leader) leader = ts[i]->lane;
        for (int i = 0; i < n; i++) {
            const Operand *o = &in->ops[0];
            if (o->kind == O_PAIR) {
                alu_set(s, ts[i], &o->vec[0], (uint64_t)leader);
                alu_set(s, ts[i], &o->vec[1], (uint64_t)(ts[i]->lane == leader));
            } else {
                alu_set(s, ts[i], o, (uint64_t)leader);
            }
        }
        break;
    }
    case OP_TC_ALLOC: {
        Where w;
        uint64_t a = mem_addr(s, t0, &in->ops[0]);
        if (s->status || smem_where(s, t0, a, 0, 4, &w)) return;
        exec_tc_alloc(s, t0, in, (int)alu_val(s, t0, &in->ops[1]), w);
        break;
    }
    case OP_TC_DEALLOC: exec_tc_dealloc(s, t0, (uint32_t)alu_val(s, t0, &in->ops[0]), (int)alu_val(s, t0, &in->ops[1])); break;
    case OP_TC_RELINQUISH: s->cta[t0->cta].relinquished = 1; break;
    case OP_TC_LD: case OP_TC_ST: coll_tc_ldst(s, ts, n, in); break;
    case OP_WG_MMA: coll_wgmma(s, ts, n, in); break;
    case OP_WG_COMMIT: s->wg_commit[t0->gtid / 128]++; break;
    case OP_STMATRIX: coll_stmatrix(s, ts, n, in); break;
    default: break; /* bar.warp.sync: the meeting is the whole effect */
    }
    for (int i = 0; i < n; i++) { ts[i]->state = TS_RUN; ts[i]->pc++; }
}

/* Fires the collective a warp (or warpgroup) has met at, if all its live threads are there. */
static int try_collective(Sim *s, int wi)
{
    Warp *w = &s->warps[wi];
    Thread *first = NULL;
    for (int i = w->first; i < w->first + w->n; i++)
        if (s->th[i].state == TS_COLL) { first = &s->th[i]; break; }
    if (!first) return 0;
    const Ins *in = &s->e->ins[first->pc];
    int lo = w->first, hi = w->first + w->n;
    if (is_wg_collective(in->op)) {
        lo = first->gtid / 128 * 128;
        hi = lo + 128;
        if (hi > s->nthreads) hi = s->nthreads;
    }
    uint32_t mask = 0xffffffffu;
    if (in->op == OP_SHFL) mask = (uint32_t)alu_val(s, first, &in->ops[4]);
    else if (in->op == OP_VOTE || in->op == OP_BAR_WARP || in->op == OP_ELECT || in->op == OP_REDUX)
        mask = (uint32_t)alu_val(s, first, &in->ops[in->nops - 1]);
    Thread *ts[128] = {0}; /* n >= 1 whenever first is in its own mask; zeroed so no reading of ts[0] is undefined */
    int n = 0;
    for (int i = lo; i < hi; i++) {
        Thread *t = &s->th[i];
        if (t->state == TS_EXIT || !(mask >> t->lane & 1)) continue;
        if (t->state != TS_COLL || t->pc != first->pc) return 0; /* someone is not there yet */
        ts[n++] = t;
    }
    s->cur = in;
    coll_exec(s, ts, n, in);
    return 1;
}

/* ------------------------------------------------------------ setmaxnreg */
/* setmaxnreg.{inc,dec}.sync.aligned.u32 N (PTX ISA, setmaxnreg): the warp's per-thread register budget becomes
 * N, taken from or given back to the CTA's pool; .inc blocks until the pool holds what it needs (a .dec of
 * another warp must come first: if none ever does, the run ends in a deadlock naming the waiting warps). .dec
 * above the current budget, .inc below it and N outside 24..256 or not a multiple of 8 are undefined: reported.
 * The registers of a warp that exits stay with it (the ISA does not say they return to the pool).
 * Returns 1 when the thread must wait. */
static int exec_setmaxnreg(Sim *s, Thread *t, const Ins *in)
{
    int n = (int)in->ops[0].imm, inc = !!(in->mods & M_INC);
    Cta *c = &s->cta[t->cta];
    if (n < 24 || n > 256 || n % 8) {
        sim_hazard(s, SIM_FAULT, "setmaxnreg %d: the count must be a multiple of 8 in 24..256", n);
        return 0;
    }
    if (inc ? n < t->nreg : n > t->nreg) {
        sim_hazard(s, SIM_FAULT, "setmaxnreg.%s %d with %d registers a thread held: .dec must not raise the budget "
                   "nor .inc lower it (undefined)", inc ? "inc" : "dec", n, t->nreg);
        return 0;
    }
    int need = n - t->nreg;
    if (need > c->reg_share - (c->nthreads - 1) * 24 - t->nreg) {
        sim_hazard(s, SIM_HAZARD, "setmaxnreg.inc %d can never be granted: with every other thread of the CTA at the "
                   "minimum (24) the CTA would hold more than its %d registers (64K per SM, %d CTA(s) resident)",
                   n, c->reg_share, 65536 / c->reg_share);
        return 0;
    }
    if (need > c->reg_pool) return 1;
    c->reg_pool -= need;
    t->nreg = n;
    if (need < 0) /* registers back in the pool: the CTA's waiting .inc threads try again (either scheduler) */
        for (int i = c->first_thread; i < c->first_thread + c->nthreads; i++)
            if (s->th[i].state == TS_NREG) s->th[i].state = TS_RUN;
    return 0;
}

/* ------------------------------------------------------------ the interpreter */
static void thread_exit(Sim *s, Thread *t)
{
    t->state = TS_EXIT;
    store_release(s, t, UINT32_MAX);
    s->live--;
    if (t->cl_arrived) s->cl_arrived--;
    cluster_check(s);
}

/* Runs t for up to quantum instructions. Returns instructions executed. */
static int run_thread(Sim *s, Thread *t, int quantum)
{
    const PtxEntry *e = s->e;
    int done = 0;
    s->cur_t = t;
    while (done < quantum && t->state == TS_RUN && !s->status) {
        if (t->pc >= e->nins) { thread_exit(s, t); break; }
        const Ins *in = &e->ins[t->pc];
        s->cur = in;
        done++;
        t->icount++;
        if (in->guard >= 0 && (rreg(s, t, in->guard) & 1) == in->guard_neg) { t->pc++; continue; }
        if (alu_exec(s, t, in)) { t->pc++; continue; }
        if (is_collective(in->op)) { t->state = TS_COLL; break; }
        switch (in->op) {
        case OP_LD: case OP_ST: exec_ldst(s, t, in); break;
        case OP_CVTA:
            if (in->space != SP_PARAM) { sim_hazard(s, SIM_UNSUPPORTED, "cvta of this space is not simulated"); break; }
            alu_set(s, t, &in->ops[0], (uint64_t)(uintptr_t)s->param + alu_val(s, t, &in->ops[1]));
            break;
        case OP_MAPA: {
            uint64_t a = alu_val(s, t, &in->ops[1]) & (SMEM_WINDOW - 1);
            uint32_t rank = (uint32_t)alu_val(s, t, &in->ops[2]);
            if (rank >= (uint32_t)s->ncta) { sim_hazard(s, SIM_FAULT, "mapa to CTA rank %u of a %d-CTA cluster", rank, s->ncta); break; }
            alu_set(s, t, &in->ops[0], a | (uint64_t)rank << CLUSTER_SHIFT);
            break;
        }
        case OP_BRA: t->pc = in->ops[0].reg; continue;
        case OP_RET: case OP_EXIT: thread_exit(s, t); return done;
        case OP_FENCE: /* fence.acq_rel / fence.sc: completes the release and acquire patterns of .relaxed ops */
            if (t->racq_mbar) vc_join(s, t->vc, s->mb[t->racq_mbar - 1].done);
            t->fence_ep = t->vc[t->gtid]++;
            break;
        case OP_SETMAXNREG:
            if (exec_setmaxnreg(s, t, in)) { t->state = TS_NREG; t->icount--; return done - 1; } /* no progress */
            break;
        case OP_FENCE_MBAR_INIT: t->mbinit_fenced = t->vc[t->gtid]++; break;
        case OP_TC_FENCE_AFTER: /* later async tcgen05 ops are ordered after every wait and barrier before it */
            memcpy(t->tcvc, t->vc, sizeof *t->vc * (size_t)s->nclk);
            if (t->racq_mbar) vc_join(s, t->tcvc, s->mb[t->racq_mbar - 1].done);
            break;
        case OP_WG_FENCE: t->wg_fenced = t->icount; break;
        /* griddepcontrol: the simulated device runs one grid at a time in stream order, so every earlier
         * grid has completed before this one starts: launch_dependents only permits an early start that
         * never happens here, and wait waits for nothing -- except for the rounds a launch says the previous
         * grid still runs (SimLaunch.prev_grid_steps): the wait holds the thread (pc kept) until then. From
         * it on the thread's loads see the launch's late writes (SimLate) */
        case OP_GRIDDEP: break;
        case OP_GRIDDEP_WAIT:
            if (s->step < s->l->prev_grid_steps) return done; /* it moved: no spin; it looks again next round */
            t->waited = 1;
            break;
        case OP_NANOSLEEP: t->pc++; t->slept = 1; return done; /* yields: the spin's next look is next round */
        case OP_FENCE_PROXY_ASYNC:
            flog_add(s, &t->f_proxy, t->vc[t->gtid]);
            t->proxy_fenced = t->vc[t->gtid]++;
            break;
        case OP_TC_FENCE_BEFORE:
            if (!t->st_unwaited) t->tc_fenced = t->vc[t->gtid], flog_add(s, &t->f_tcst, t->vc[t->gtid]);
            if (!t->ld_pending) t->ld_fenced = t->vc[t->gtid], flog_add(s, &t->f_tcld, t->vc[t->gtid]);
            t->vc[t->gtid]++;
            break;
        case OP_TC_WAIT_ST: t->st_unwaited = 0; break;
        case OP_TC_WAIT_LD:
            if (t->ld_pending) {
                for (int i = 0; i < e->nregs && t->npend; i++)
                    if (t->pend[i] & PEND_LD) pend_release(t, i, PEND_LD);
                t->ld_pending = 0;
            }
            break;
        case OP_BAR_SYNC: case OP_BAR_ARRIVE:
            if (exec_bar(s, t, in)) return done;
            if (in->op == OP_BAR_SYNC) continue; /* bar_complete advanced the pc */
            break;
        case OP_CLUSTER_ARRIVE:
            /* .relaxed: an arrival that releases nothing (a later wait acquires only the others') */
            if (in->mods & M_RELAXED) release_relaxed(s, t, s->vcbuf);
            else release(s, t, s->vcbuf);
            t->cl_phase = s->cl_phase, t->cl_arrived = 1;
            s->cl_arrived++;
            cluster_check(s);
            break;
        case OP_CLUSTER_WAIT:
            if (s->cl_phase <= t->cl_phase) { t->state = TS_CLUSTER; return done; }
            vc_join(s, t->vc, s->vcbuf);
            break;
        case OP_MBAR_INIT: exec_mbar_init(s, t, in); break;
        case OP_MBAR_ARRIVE: case OP_MBAR_EXPECT_TX: exec_mbar_arrive(s, t, in); break;
        case OP_MBAR_TRY_WAIT: if (exec_mbar_wait(s, t, in)) return done; break;
        case OP_TMA_LOAD: exec_tma_load(s, t, in); break;
        case OP_TMA_STORE: exec_tma_store(s, t, in); break;
        case OP_TMA_PREFETCH: exec_tma_prefetch(s, t, in); break;
        case OP_BULK_LOAD: exec_bulk_load(s, t, in); break;
        case OP_BULK_STORE: exec_bulk_store(s, t, in); break;
        case OP_BULK_COMMIT: t->grp_commit++; break;
        case OP_BULK_WAIT: {
            uint32_t n = (uint32_t)alu_val(s, t, &in->ops[0]);
            if (bulk_wait_blocks(t, n)) { t->state = TS_BULK; return done; }
            store_release(s, t, t->grp_commit > n ? t->grp_commit - n : 0);
            break;
        }
        case OP_CPA: exec_cpa(s, t, in); break;
        case OP_CPA_COMMIT: cpa_commit(s, t); break;
        case OP_CPA_WAIT:
            if (cpa_wait_blocks(s, t, in)) { t->state = TS_CPA; return done; }
            break;
        case OP_CPA_ARRIVE: exec_cpa_arrive(s, t, in); break;
        case OP_TC_MMA: exec_tc_mma(s, t, in); break;
        case OP_TC_COMMIT: exec_tc_commit(s, t, in); break;
        case OP_TC_CP: exec_tc_cp(s, t, in); break;
        case OP_WG_WAIT: {
            int wg = t->gtid / 128;
            uint32_t n = (uint32_t)alu_val(s, t, &in->ops[0]);
            /* committed groups not complete: groups complete in order, so count from the oldest in flight */
            uint32_t pending = 0;
            for (int i = 0; i < s->nops; i++)
                if (s->ops[i]->kind == A_WGMMA && s->ops[i]->u.wg.wg_first / 128 == wg) {
                    uint32_t g = s->ops[i]->u.wg.group;
                    if (g < s->wg_commit[wg] && s->wg_commit[wg] - g > pending) pending = s->wg_commit[wg] - g;
                }
            if (pending > n) { t->state = TS_WG; return done; }
            wg_retire(s, t, wg, s->wg_commit[wg] > n ? s->wg_commit[wg] - n : 0);
            break;
        }
        default:
            sim_hazard(s, SIM_UNSUPPORTED, "%s is not simulated", ptx_op_name(in->op));
            break;
        }
        t->pc++;
    }
    return done;
}

/* ------------------------------------------------------------ deadlock report */
static const char *state_name(int st)
{
    static const char *n[] = {"running", "at a warp collective", "at bar.sync", "waiting on an mbarrier",
                              "at barrier.cluster.wait", "at cp.async.bulk.wait_group", "at wgmma.wait_group",
                              "at cp.async.wait_group", "at setmaxnreg.inc (the CTA's register pool is short)",
                              "exited"};
    return n[st];
}

static void report_stuck(Sim *s, const char *why)
{
    s->cur = NULL, s->cur_t = NULL;
    sim_hazard(s, SIM_DEADLOCK, "%s; where each warp is:", why);
    for (int wi = 0; wi < s->nwarps; wi++) {
        Warp *w = &s->warps[wi];
        /* group the warp's threads by (state, pc) */
        int seen[32] = {0};
        for (int i = 0; i < w->n; i++) {
            if (seen[i]) continue;
            Thread *t = &s->th[w->first + i];
            int count = 0;
            for (int j = i; j < w->n; j++) {
                Thread *u = &s->th[w->first + j];
                if (!seen[j] && u->state == t->state && u->pc == t->pc) seen[j] = 1, count++;
            }
            if (t->state == TS_EXIT) { say(s, "  CTA %d warp %d: %d lane(s) exited\n", t->cta, t->tid / 32, count); continue; }
            const Ins *in = &s->e->ins[t->pc < s->e->nins ? t->pc : s->e->nins - 1];
            say(s, "  CTA %d warp %d: %d lane(s) %s, line %d `%s`", t->cta, t->tid / 32, count, state_name(t->state),
                in->line, ptx_line(s->l->mod, in->line));
            if (t->state == TS_MBAR) {
                Mbar *m = &s->mb[t->wait_mbar];
                say(s, " (mbarrier 0x%x of CTA %d: phase %u, %d of %d arrivals pending, tx %lld)", m->addr, m->cta,
                    m->phase, m->pending, m->expected, (long long)m->tx);
            }
            if (t->state == TS_BAR) {
                NamedBar *b = &s->cta[t->cta].bars[t->wait_bar];
                say(s, " (barrier %d: %d of %d arrived)", t->wait_bar, b->arrived, b->expected);
            }
            if (t->state == TS_NREG)
                say(s, " (holds %d registers a thread, asks %d; the pool has %d of the CTA's %d)", t->nreg,
                    (int)in->ops[0].imm, s->cta[t->cta].reg_pool, s->cta[t->cta].reg_share);
            say(s, "\n");
        }
    }
}

static void report_deadlock(Sim *s) { report_stuck(s, "no thread can move and no async op is pending"); }

/* ------------------------------------------------------------ one cluster */
static int sim_setup(Sim *s)
{
    const SimLaunch *l = s->l;
    int per_cta = (int)(l->block[0] * l->block[1] * l->block[2]);
    s->nthreads = per_cta * s->ncta;
    s->nwarps = s->ncta * ((per_cta + 31) / 32);
    s->nclk = s->nthreads + s->ncta + MAX_MBARS;
    s->th = calloc((size_t)s->nthreads, sizeof *s->th);
    s->warps = calloc((size_t)s->nwarps, sizeof *s->warps);
    s->order = calloc((size_t)s->nwarps, sizeof *s->order);
    s->mb = calloc(MAX_MBARS, sizeof *s->mb);
    s->vcbuf = calloc((size_t)s->nclk, sizeof *s->vcbuf);
    s->nstreams = s->ncta + (s->nthreads + 127) / 128;
    s->stream_next = calloc((size_t)s->nstreams, sizeof(uint32_t));
    s->stream_issue = calloc((size_t)s->nstreams, sizeof(uint32_t));
    int nwg = (s->nthreads + 127) / 128;
    s->wg_commit = calloc((size_t)nwg, sizeof(uint32_t));
    uint64_t *regs = calloc((size_t)s->nthreads * (size_t)s->e->nregs, sizeof(uint64_t));
    uint32_t *vcs = calloc((size_t)s->nthreads * (size_t)s->nclk * 2, sizeof(uint32_t)); /* vc, then tcvc */
    uint8_t *pend = calloc((size_t)s->nthreads * (size_t)s->e->nregs, 1);
    uint32_t *racc = calloc((size_t)s->nthreads * (size_t)s->e->nregs, sizeof(uint32_t));
    if (!s->th || !s->warps || !s->order || !s->mb || !s->vcbuf || !s->stream_next || !s->stream_issue ||
        !s->wg_commit || !regs || !vcs || !pend || !racc) {
        free(regs), free(vcs), free(pend), free(racc);
        sim_hazard(s, SIM_UNSUPPORTED, "out of memory for %d threads", s->nthreads);
        return -1;
    }
    /* poison: a register's value before its first write is undefined (PTX ISA), so it starts as a NaN in both
     * halves (f32 and f64 reads see a NaN, an address a fault, a predicate false), not as a convenient zero */
    for (size_t i = 0; i < (size_t)s->nthreads * (size_t)s->e->nregs; i++) regs[i] = 0xFFF80000FFC00000ull;
    uint32_t smem_base = 1024 + 16 * (uint32_t)rnd_below(s, 64); /* the kernel must align it itself */
    /* registers: the SM's 64K shared by the CTAs resident on it (.minnctapersm, else 1); each thread starts
     * with .maxnreg, else the most the CTA's share gives it (a multiple of 8, at most 255 -- what ptxas
     * allocates for a setmaxnreg kernel), and the CTA's pool holds the rest of its share */
    int ctas_per_sm = s->e->minctas > 0 ? s->e->minctas : 1;
    int nreg0 = s->e->maxnreg > 0 ? s->e->maxnreg : 65536 / ctas_per_sm / per_cta / 8 * 8;
    if (nreg0 > 255) nreg0 = 255;
    for (int c = 0; c < s->ncta; c++) {
        Cta *k = &s->cta[c];
        k->rank = c;
        k->smem_base = smem_base;
        k->smem_end = smem_base + l->dyn_smem + s->e->static_smem;
        k->smem = calloc(k->smem_end, 1);
        k->ssh = calloc(k->smem_end / 4 + 2, sizeof *k->ssh);
        k->mbmap = calloc(k->smem_end / 4 + 2, sizeof *k->mbmap);
        k->tmem = calloc(TC_TMEM_LANES * TC_TMEM_COLS, sizeof *k->tmem);
        k->tsh = calloc(TC_TMEM_LANES * TC_TMEM_COLS, sizeof *k->tsh);
        if (!k->smem || !k->ssh || !k->mbmap || !k->tmem || !k->tsh) {
            free(regs), free(vcs), free(pend), free(racc);
            sim_hazard(s, SIM_UNSUPPORTED, "out of memory for shared memory");
            return -1;
        }
        memset(k->smem, 0xA5, k->smem_end); /* poison: never-written reads are hazards anyway */
        k->first_thread = c * per_cta, k->nthreads = per_cta;
        k->reg_share = 65536 / ctas_per_sm;
        k->reg_pool = k->reg_share - per_cta * nreg0;
    }
    for (int i = 0; i < s->nthreads; i++) {
        Thread *t = &s->th[i];
        t->r = regs + (size_t)i * (size_t)s->e->nregs;
        t->vc = vcs + (size_t)i * (size_t)s->nclk;
        t->pend = pend + (size_t)i * (size_t)s->e->nregs;
        t->tcvc = vcs + ((size_t)s->nthreads + (size_t)i) * (size_t)s->nclk;
        t->racc = racc + (size_t)i * (size_t)s->e->nregs;
        t->nreg = nreg0;
        t->gtid = i, t->cta = i / per_cta, t->tid = i % per_cta, t->lane = t->tid % 32;
        t->warp = t->cta * ((per_cta + 31) / 32) + t->tid / 32;
        t->vc[i] = 1;
        t->state = TS_RUN;
    }
    for (int w = 0; w < s->nwarps; w++) {
        int cta = w / ((per_cta + 31) / 32), wic = w % ((per_cta + 31) / 32);
        s->warps[w].first = cta * per_cta + wic * 32;
        s->warps[w].n = per_cta - wic * 32 < 32 ? per_cta - wic * 32 : 32;
        s->warps[w].cta = cta;
        s->order[w] = w;
    }
    s->live = s->nthreads;
    return 0;
}

static void sim_teardown(Sim *s)
{
    if (s->th) {
        free(s->th[0].r); free(s->th[0].vc); free(s->th[0].pend); free(s->th[0].racc);
        for (int i = 0; i < s->nthreads; i++) {
            free(s->th[i].cpl);
            free(s->th[i].f_proxy.e), free(s->th[i].f_tcst.e), free(s->th[i].f_tcld.e);
        }
    }
    for (int c = 0; c < s->ncta; c++) {
        Cta *k = &s->cta[c];
        free(k->smem), free(k->ssh), free(k->mbmap), free(k->tmem), free(k->tsh);
        for (int b = 0; b < NAMED_BARS; b++) free(k->bars[b].acc);
    }
    for (int i = 0; i < s->nmb; i++) free(s->mb[i].acc), free(s->mb[i].done), free(s->mb[i].arr[0]), free(s->mb[i].arr[1]);
    for (int i = 0; i < s->nops; i++) op_free(s->ops[i]);
    for (int i = 0; i < s->nheld; i++) op_free(s->held[i]);
    free(s->held);
    for (int i = 0; i < s->nwgdone; i++) free(s->wgdone[i].dregs);
    free(s->wgdone);
    free(s->ops), free(s->th), free(s->warps), free(s->order), free(s->mb), free(s->vcbuf);
    free(s->stream_next), free(s->stream_issue), free(s->wg_commit);
}

static void check_exit_state(Sim *s)
{
    s->cur = NULL, s->cur_t = NULL;
    for (int c = 0; c < s->ncta && !s->status; c++)
        for (int i = 0; i < TC_TMEM_COLS; i++)
            if (s->cta[c].tcol[i]) {
                sim_hazard(s, SIM_HAZARD, "CTA %d exited with TMEM column %d still allocated (missing tcgen05.dealloc)", c, i);
                break;
            }
    /* (not under late writes: a prefetch aimed by what a load read before the wait may miss) */
    for (int c = 0; c < s->ncta && !s->status && !s->l->late; c++)
        if (s->cta[c].npf)
            sim_hazard(s, SIM_HAZARD, "CTA %d prefetched %d tensor box(es) into L2 that it never loaded (the first at line "
                       "%d, coordinates {%d, %d, ..}): the prefetch and the loads disagree", c, s->cta[c].npf,
                       s->cta[c].pf[0].line, s->cta[c].pf[0].coords[0], s->cta[c].pf[0].coords[1]);
}

/* Spin-only rounds in a row (every thread that moved ended its quantum in nanosleep, nothing completed) after
 * which the spinners are deadlocked: nothing else runs that could change what they poll. */
enum { SPIN_ROUNDS = 4 };

static void report_spin(Sim *s)
{
    report_stuck(s, "every live thread is blocked or spins (nanosleep) on global memory that no running CTA changes "
                 "any more: a CTA waits for one launched after it, or for an increment nobody makes");
}

/* One round of the random scheduler over the cluster's warps: 0 some thread made progress (or an async op
 * completed), 1 only spins moved (quanta that ended in nanosleep), 2 the cluster is done or failed. */
static int cluster_round(Sim *s)
{
    s->step++;
    int moved = 0, real = 0;
    for (int i = s->nwarps - 1; i > 0; i--) { /* a fresh random warp order every round */
        int j = rnd_below(s, i + 1), x = s->order[i];
        s->order[i] = s->order[j], s->order[j] = x;
    }
    for (int k = 0; k < s->nwarps && !s->status; k++) {
        Warp *w = &s->warps[s->order[k]];
        int quantum = 1 + rnd_below(s, 96);
        for (int i = w->first; i < w->first + w->n && !s->status; i++)
            if (s->th[i].state == TS_RUN) {
                Thread *t = &s->th[i];
                t->slept = 0;
                int n = run_thread(s, t, quantum);
                moved += n;
                if (!t->slept) real += n;
            }
        if (!s->status) {
            int c = try_collective(s, s->order[k]);
            moved += c, real += c;
        }
    }
    if (s->status) return 2;
    /* blocked waits that may now pass: bulk, wgmma and cp.async waits re-check by running */
    int done = complete_due(s, 0);
    if (!s->live && !s->nops) return 2;
    if (!moved && !done) {
        if (!(done = complete_due(s, 1))) {
            if (!s->live) return 2;
            report_deadlock(s);
            return 2;
        }
    }
    for (int i = 0; i < s->nthreads; i++)
        if (s->th[i].state == TS_BULK || s->th[i].state == TS_WG || s->th[i].state == TS_CPA ||
            s->th[i].state == TS_NREG)
            s->th[i].state = TS_RUN;
    return real || done ? 0 : 1;
}

static void run_cluster(Sim *s)
{
    if (s->tm) { /* the timing mode's clock replaces the random scheduler */
        timing_run_cluster(s);
        if (!s->status) check_exit_state(s);
        return;
    }
    int spins = 0;
    while (!s->status) {
        int r = cluster_round(s);
        if (r == 2) break;
        spins = r == 1 ? spins + 1 : 0;
        if (spins >= SPIN_ROUNDS) report_spin(s);
    }
    if (!s->status) check_exit_state(s);
}

/* One cluster of the launch, functional (tm_out NULL) or under the timing mode's clock. */
typedef struct TimedOut { double l2_bw_sm, cpa_bw_sm, *cycles, *busy, *flops; TimingBytes *bytes; } TimedOut;

/* Sets up cluster (x, y, z) in s (zeroed here); its status (0: ready to run). */
static int cluster_open(Sim *s, const SimLaunch *l, const unsigned nc[3], unsigned x, unsigned y, unsigned z,
                        uint8_t *param)
{
    int ncta = (int)(l->cluster[0] * l->cluster[1] * l->cluster[2]);
    memset(s, 0, sizeof *s);
    s->l = l, s->e = l->entry, s->ncta = ncta;
    s->clusterid[0] = x, s->clusterid[1] = y, s->clusterid[2] = z;
    memcpy(s->ncluster, nc, 3 * sizeof *nc);
    s->rng = l->seed ^ ((uint64_t)(x + 1) * 0x100000001b3ull) ^ ((uint64_t)(y + 7) << 40) ^ ((uint64_t)z << 52);
    s->max_latency = (int)(rnd(s) % 6);
    memcpy(param, l->params, l->entry->param_bytes);
    s->param = param;
    for (int c = 0; c < ncta; c++) {
        unsigned r = (unsigned)c;
        s->cta[c].ctaid[0] = x * l->cluster[0] + r % l->cluster[0];
        s->cta[c].ctaid[1] = y * l->cluster[1] + r / l->cluster[0] % l->cluster[1];
        s->cta[c].ctaid[2] = z * l->cluster[2] + r / (l->cluster[0] * l->cluster[1]);
    }
    sim_setup(s);
    return s->status;
}

/* Tears s down; its status, with the report moved to *report when it failed. */
static int cluster_close(Sim *s, char **report)
{
    sim_teardown(s);
    if (s->status) *report = s->report;
    else free(s->report);
    s->report = NULL;
    return s->status;
}

static int one_cluster(const SimLaunch *l, const unsigned nc[3], unsigned x, unsigned y, unsigned z, uint8_t *param,
                       char **report, const TimedOut *to)
{
    Sim s;
    if (!cluster_open(&s, l, nc, x, y, z, param)) {
        if (to && !(s.tm = timing_new(&s))) sim_hazard(&s, SIM_UNSUPPORTED, "out of memory for the timing mode");
        if (s.tm) timing_set_share(s.tm, to->l2_bw_sm, to->cpa_bw_sm);
        if (!s.status) run_cluster(&s);
        if (s.tm && !s.status) timing_collect(s.tm, to->cycles, to->busy, to->flops, to->bytes);
        timing_free(s.tm);
    }
    return cluster_close(&s, report);
}

/* FA4SIM_RESIDENT=k (l->resident > 1): up to k clusters resident at once, dispatched in linear order (x fastest,
 * as a GPU dispatches a grid) as earlier ones finish, each resident cluster running 0..2 scheduler rounds per
 * turn in a seeded random order: CTAs that meet in global memory (turn counters, atomics) interleave as on a
 * device, and a spin on a CTA launched later is reported as a deadlock. */
static int run_window(const SimLaunch *l, const unsigned nc[3], char **report)
{
    int k = l->resident;
    uint64_t total = (uint64_t)nc[0] * nc[1] * nc[2], next = 0;
    Sim *win = calloc((size_t)k, sizeof *win);
    uint8_t *param = malloc((size_t)k * (l->entry->param_bytes + 16));
    int *busy = calloc((size_t)k, sizeof *busy);
    if (!win || !param || !busy) {
        free(win), free(param), free(busy);
        *report = strdup("out of memory\n");
        return SIM_UNSUPPORTED;
    }
    uint64_t rng = l->seed * 0x2545f4914f6cdd1dull + 0x9e3779b97f4a7c15ull;
    int status = SIM_OK, spins = 0;
    for (;;) {
        int active = 0;
        for (int i = 0; i < k && !status; i++) {
            if (!busy[i] && next < total) {
                unsigned x = (unsigned)(next % nc[0]), y = (unsigned)(next / nc[0] % nc[1]);
                unsigned z = (unsigned)(next / ((uint64_t)nc[0] * nc[1]));
                next++;
                busy[i] = 1;
                if (cluster_open(&win[i], l, nc, x, y, z, param + (size_t)i * (l->entry->param_bytes + 16)))
                    status = cluster_close(&win[i], report), busy[i] = 0;
            }
            active += busy[i];
        }
        if (status || !active) break;
        /* spin-only counts only a turn in which every resident cluster ran and none made progress */
        int ran = 1, real = 0, start = (int)((rng >> 33) % (uint64_t)k);
        for (int j = 0; j < k && !status; j++) {
            int i = (start + j) % k;
            if (!busy[i]) continue;
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int rounds = (int)((rng >> 33) % 3);
            if (!rounds) ran = 0;
            for (int r = 0; r < rounds && busy[i]; r++) {
                int res = cluster_round(&win[i]);
                if (res == 2) {
                    if (!win[i].status) check_exit_state(&win[i]);
                    status = cluster_close(&win[i], report), busy[i] = 0, real = 1;
                } else if (res == 0) real = 1;
            }
        }
        if (status) continue;
        if (real) spins = 0;
        else if (ran) spins++;
        if (spins >= SPIN_ROUNDS) {
            for (int i = 0; i < k; i++)
                if (busy[i]) {
                    report_spin(&win[i]);
                    status = cluster_close(&win[i], report), busy[i] = 0;
                    break;
                }
        }
    }
    for (int i = 0; i < k; i++)
        if (busy[i]) {
            char *r = NULL;
            cluster_close(&win[i], &r);
            free(r);
        }
    free(win), free(param), free(busy);
    return status;
}

int sim_run_cluster_timed(const SimLaunch *l, unsigned x, unsigned y, unsigned z, double l2_bw_sm, double cpa_bw_sm,
                          char **report,
                          double *cycles, double busy[TP_COUNT], double *flops, TimingBytes *bytes)
{
    unsigned nc[3] = {l->grid[0] / l->cluster[0], l->grid[1] / l->cluster[1], l->grid[2] / l->cluster[2]};
    uint8_t *param = malloc(l->entry->param_bytes + 16);
    if (!param) { *report = strdup("out of memory\n"); return SIM_UNSUPPORTED; }
    TimedOut to = {l2_bw_sm, cpa_bw_sm, cycles, busy, flops, bytes};
    int st = one_cluster(l, nc, x, y, z, param, report, &to);
    free(param);
    return st;
}

/* for timing.c: the scheduler's pieces */
int sim_run_thread(Sim *s, Thread *t, int quantum) { return run_thread(s, t, quantum); }
int sim_try_collective(Sim *s, int wi) { return try_collective(s, wi); }
void sim_complete_op(Sim *s, int i) { complete(s, i); }
int sim_op_eligible(Sim *s, const Op *op) { return op_eligible(s, op); }
void sim_report_deadlock(Sim *s) { report_deadlock(s); }

int sim_run(const SimLaunch *l, char **report)
{
    *report = NULL;
    int ncta = (int)(l->cluster[0] * l->cluster[1] * l->cluster[2]);
    if (ncta < 1 || ncta > MAX_CTAS || l->grid[0] % l->cluster[0] || l->grid[1] % l->cluster[1] ||
        l->grid[2] % l->cluster[2]) {
        *report = strdup("unsupported: cluster shape does not divide the grid or exceeds 16 CTAs\n");
        return SIM_UNSUPPORTED;
    }
    if (l->timing && l->tout) return timing_run_launch(l, report); /* a window of clusters under the clock */
    unsigned nc[3] = {l->grid[0] / l->cluster[0], l->grid[1] / l->cluster[1], l->grid[2] / l->cluster[2]};
    if (l->resident > 1) return run_window(l, nc, report);
    uint8_t *param = malloc(l->entry->param_bytes + 16);
    if (!param) { *report = strdup("out of memory\n"); return SIM_UNSUPPORTED; }
    int status = SIM_OK;
    for (unsigned z = 0; z < nc[2] && !status; z++)
        for (unsigned y = 0; y < nc[1] && !status; y++)
            for (unsigned x = 0; x < nc[0] && !status; x++) status = one_cluster(l, nc, x, y, z, param, report, NULL);
    free(param);
    return status;
}
