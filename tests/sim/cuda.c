/* cuda.c - the simulator's driver front: a libcuda.so.1 whose device runs PTX
 * on the CPU (sim.c). A program that opens libcuda.so.1 (libfa4rt does, with
 * dlopen) runs on the simulated device when LD_LIBRARY_PATH names this
 * library's folder, and on a GPU otherwise.
 *
 * The device: compute capability FA4SIM_CC (100 default, 90, or 103: the B300, which runs sm_103a PTX
 * with the sm_100a semantics), FA4SIM_SMS
 * multiprocessors (4 default: persistent grids then loop over several tiles),
 * the sm_100a / sm_90a shared-memory opt-in limit. Memory is host memory, and
 * every device access is checked against the allocations. Modules are PTX
 * text (the real driver JITs PTX as well; a cubin is refused: SASS cannot run
 * here). Launches run to completion inside the launch call, cluster by
 * cluster, with the scheduler seed FA4SIM_SEED (default 1) mixed with the
 * launch count; a fault, hazard or deadlock fails the launch with
 * CUDA_ERROR_LAUNCH_FAILED (CUDA_ERROR_ILLEGAL_ADDRESS for a fault), prints
 * the report on stderr and keeps it for fa4sim_last_report(), and, like a real
 * device error, is sticky: later calls fail too until the process ends.
 * FA4SIM_RESIDENT=k (functional mode): k clusters resident at once, dispatched in linear order and
 * interleaved by the seeded scheduler (CTAs that meet in global memory run side by side; sim.c run_window).
 * The default, 1, runs one cluster after another.
 *
 * FA4SIM_PTX_REPLACE=FILE (tests only): a module whose PTX defines the same
 * entry as FILE is loaded from FILE instead, so a mutated kernel runs through
 * the runtime's real launch path (tests/sim/mutants.sh).
 *
 * FA4SIM_TIMING=h100|b200|FILE.tbl: the timing mode (timing.h, TIMING.md). Each launch simulates a
 * window of clusters under the table's clock and prints its predicted time on stderr (one line
 * starting `fa4sim-timing:`; fa4sim_timing_last() returns the last one). The device then has the
 * table's SM count unless FA4SIM_SMS says otherwise. FA4SIM_TIMING_DIR: the tables' folder
 * (default: tests/sim/gpus of the tree this library was built from). FA4SIM_TIMING_SAMPLES: clusters
 * to simulate per launch (default 4). FA4SIM_TIMING_SENS=1: also how far the prediction moves when
 * each value the table marks `assumed` moves -25% and +25% (one more window per value and sign).
 * The table, once loaded, is named on stderr in one line starting `fa4sim-table:` (its path, how many
 * values it assumes, and its `# validation:` comment).
 *
 * fa4sim_late_write (tests only): bytes the grid before the next launch writes
 * late. The next launch's threads read them once they pass griddepcontrol.wait,
 * and the bytes they replace before it (sim.h, SimLate): the latest a device
 * may make a finished grid's writes visible to a programmatic dependent.
 */
#include <cuda.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/cuda_errors.h"
#include "ptx.h"
#include "sim.h"
#include "tma.h"
#include "timing.h"

#ifndef FA4SIM_GPU_DIR
#define FA4SIM_GPU_DIR "tests/sim/gpus"
#endif

#define EXPORT __attribute__((visibility("default")))

enum { CTX_STACK = 8, DEFAULT_SMEM = 48 * 1024 };

struct CUctx_st { int device; };
struct CUfunc_st { const PtxEntry *entry; struct CUmod_st *module; int max_dyn_smem; struct CUfunc_st *next; };
struct CUmod_st { PtxModule *ptx; struct CUfunc_st *funcs; };

/* The driver's state, as a real driver's: one device, its allocations, the sticky error. */
static struct {
    pthread_mutex_t mu;
    int initialized, cc, sms, smem_optin, verbose;
    uint64_t seed, launches;
    SimGlobal global;
    int cap;
    CUresult sticky;
    char *report;
} dev = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0, 0, 0, {NULL, 0}, 0, CUDA_SUCCESS, NULL};

/* Late writes for the next launch, in the order given (one thread drives the device); bytes holds the
 * n new bytes, then room for the n they replace (sim.old). */
typedef struct Late { SimLate sim; struct Late *next; unsigned char bytes[]; } Late;
static Late *late_head, **late_tail = &late_head;

/* The timing mode's table and the last launch's report line. */
static TimingGpu timing_gpu;
static int timing_on, timing_samples, timing_sens;
static char timing_line[4096];

static double timing_total;
EXPORT const char *fa4sim_timing_last(void) { return timing_line; }
/* The predicted microseconds of every launch since the last reset (tests/sim/timecase.c). */
EXPORT double fa4sim_timing_total_us(void) { return timing_total; }
EXPORT void fa4sim_timing_reset(void) { timing_total = 0; }

static struct CUctx_st primary;
static int primary_refs;
static _Thread_local CUcontext ctx_stack[CTX_STACK];
static _Thread_local int ctx_depth;

/* FA4SIM_PREV_GRID's cap: a wait held longer only slows the run (a held wait counts as progress, so no spin
 * report would end a hang) */
enum { PREV_GRID_MAX = 1000000 };

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

static CUresult fail(CUresult r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static CUresult fail(CUresult r, const char *fmt, ...)
{
    if (dev.verbose) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "fa4sim: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
    return r;
}

/* The report of the last failed launch ("" if none): for tests and the debug command. */
EXPORT const char *fa4sim_last_report(void) { return dev.report ? dev.report : ""; }

/* Queues n bytes from src for dst (inside one allocation) as a late write of the grid before the
 * next launch: 0, or -1 (a bad range, no memory). */
EXPORT int fa4sim_late_write(CUdeviceptr dst, const void *src, size_t n)
{
    if (!src || !n || sim_global_check(&dev.global, dst, n)) return -1;
    Late *w = malloc(sizeof *w + 2 * n);
    if (!w) return -1;
    w->sim = (SimLate){dst, n, w->bytes + n, NULL};
    w->next = NULL;
    memcpy(w->bytes, src, n);
    *late_tail = w, late_tail = &w->next;
    return 0;
}

/* The pending late writes land: each keeps the bytes it replaces, memory takes its own; the list
 * (its SimLate chain is what the launch reads before its wait) is the caller's to free. */
static Late *late_land(void)
{
    Late *list = late_head;
    for (Late *w = list; w; w = w->next) {
        memcpy(w->bytes + w->sim.n, (void *)(uintptr_t)w->sim.dst, w->sim.n);
        memcpy((void *)(uintptr_t)w->sim.dst, w->bytes, w->sim.n);
        w->sim.next = w->next ? &w->next->sim : NULL;
    }
    late_head = NULL, late_tail = &late_head;
    return list;
}

static void late_free(Late *w)
{
    while (w) {
        Late *next = w->next;
        free(w);
        w = next;
    }
}

/* Clears the sticky error (tests that expect a failure and go on). */
EXPORT void fa4sim_reset_error(void)
{
    pthread_mutex_lock(&dev.mu);
    dev.sticky = CUDA_SUCCESS;
    pthread_mutex_unlock(&dev.mu);
}

/* ------------------------------------------------------------ init, device */
EXPORT CUresult cuInit(unsigned int flags)
{
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&dev.mu);
    if (!dev.initialized) {
        dev.cc = env_int("FA4SIM_CC", 100);
        dev.sms = env_int("FA4SIM_SMS", 4);
        dev.seed = (uint64_t)env_int("FA4SIM_SEED", 1);
        dev.verbose = env_int("FA4SIM_VERBOSE", 0);
        dev.smem_optin = dev.cc >= 100 ? 232448 : 232448;
        dev.initialized = 1;
        const char *tn = getenv("FA4SIM_TIMING");
        if (tn && *tn) {
            char err[512];
            const char *dir = getenv("FA4SIM_TIMING_DIR");
            if (timing_load(&timing_gpu, tn, dir && *dir ? dir : FA4SIM_GPU_DIR, err, sizeof err)) {
                fprintf(stderr, "fa4sim: FA4SIM_TIMING: %s\n", err);
                dev.cc = -1; /* refused below */
            } else {
                timing_on = 1;
                if (!getenv("FA4SIM_SMS")) dev.sms = (int)timing_gpu.v[K_SMS];
                timing_samples = env_int("FA4SIM_TIMING_SAMPLES", 4);
                timing_sens = env_int("FA4SIM_TIMING_SENS", 0);
                int assumed = 0;
                for (int k = 0; k < K_COUNT; k++) assumed += timing_gpu.src[k] == SRC_ASSUMED;
                fprintf(stderr, "fa4sim-table: gpu=%s path=%s assumed=%d/%d validation=%s\n", timing_gpu.name,
                        timing_gpu.path, assumed, K_COUNT, timing_gpu.validation);
            }
        }
    }
    pthread_mutex_unlock(&dev.mu);
    if (dev.cc != 90 && dev.cc != 100 && dev.cc != 103)
        return fail(CUDA_ERROR_NO_DEVICE, "FA4SIM_CC=%d: the simulator is 90, 100 or 103", dev.cc);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *v)
{
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

/* NVRTC (a score_mod's compiler) opens libcuda.so.1 too and asks for the driver's private
 * tables; this driver has none, which NVRTC takes as "no driver" and compiles anyway. */
EXPORT CUresult cuGetExportTable(const void **table, const CUuuid *id)
{
    (void)id;
    if (table) *table = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

EXPORT CUresult cuGetErrorName(CUresult r, const char **s) { return cu_err_lookup(r, s, 1); }

EXPORT CUresult cuGetErrorString(CUresult r, const char **s) { return cu_err_lookup(r, s, 0); }

EXPORT CUresult cuDeviceGetCount(int *n)
{
    if (!dev.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    *n = 1;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    if (!dev.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    if (!dev.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = dev.cc / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = dev.cc % 10; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = dev.sms; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = dev.smem_optin; break;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *v = 1; break;
    default: return fail(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetAttribute: attribute %d is not simulated", (int)a);
    }
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ contexts */
static CUcontext current(void) { return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL; }

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    if (!dev.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    primary_refs++;
    *c = &primary;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    if (primary_refs <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    primary_refs--;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *c)
{
    if (!dev.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    *c = current();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext c)
{
    if (!dev.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (c && c != &primary) return CUDA_ERROR_INVALID_CONTEXT;
    if (!c) { if (ctx_depth) ctx_depth--; return CUDA_SUCCESS; }
    if (ctx_depth) ctx_stack[ctx_depth - 1] = c;
    else ctx_stack[ctx_depth++] = c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext c)
{
    if (!dev.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (c != &primary) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == CTX_STACK) return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *c)
{
    if (!dev.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!ctx_depth) return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext top = ctx_stack[--ctx_depth];
    if (c) *c = top;
    return CUDA_SUCCESS;
}

static CUresult need_context(void)
{
    if (!dev.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
    return dev.sticky;
}

EXPORT CUresult cuCtxSynchronize(void) { return need_context(); }
EXPORT CUresult cuStreamSynchronize(CUstream s) { (void)s; return need_context(); }

/* ------------------------------------------------------------ memory */
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    CUresult r = need_context();
    if (r) return r;
    if (!p || !n) return CUDA_ERROR_INVALID_VALUE;
    void *m = NULL;
    if (posix_memalign(&m, 256, n)) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(m, 0xCD, n); /* device memory starts as garbage */
    pthread_mutex_lock(&dev.mu);
    if (dev.global.nallocs == dev.cap) {
        int nc = dev.cap ? dev.cap * 2 : 64;
        SimAlloc *a = realloc(dev.global.allocs, sizeof *a * (size_t)nc);
        if (!a) { pthread_mutex_unlock(&dev.mu); free(m); return CUDA_ERROR_OUT_OF_MEMORY; }
        dev.global.allocs = a, dev.cap = nc;
    }
    dev.global.allocs[dev.global.nallocs++] = (SimAlloc){(uint64_t)(uintptr_t)m, n};
    pthread_mutex_unlock(&dev.mu);
    *p = (CUdeviceptr)(uintptr_t)m;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
    if (!p) return CUDA_SUCCESS;
    pthread_mutex_lock(&dev.mu);
    for (int i = 0; i < dev.global.nallocs; i++)
        if (dev.global.allocs[i].base == p) {
            dev.global.allocs[i] = dev.global.allocs[--dev.global.nallocs];
            pthread_mutex_unlock(&dev.mu);
            free((void *)(uintptr_t)p);
            return CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&dev.mu);
    return CUDA_ERROR_INVALID_VALUE;
}

/* As the driver documents it: each attribute written as its type; an address in no allocation gets the
 * defaults (memory type 0, ordinal -2, no range) and CUDA_SUCCESS. Every allocation is device 0's. */
EXPORT CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data, CUdeviceptr ptr)
{
    if (!dev.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!n || !attrs || !data) return CUDA_ERROR_INVALID_VALUE;
    const SimAlloc *a = NULL;
    pthread_mutex_lock(&dev.mu);
    for (int i = 0; i < dev.global.nallocs && !a; i++)
        if (ptr >= dev.global.allocs[i].base && ptr - dev.global.allocs[i].base < dev.global.allocs[i].size)
            a = &dev.global.allocs[i];
    SimAlloc hit = a ? *a : (SimAlloc){0, 0};
    pthread_mutex_unlock(&dev.mu);
    for (unsigned i = 0; i < n; i++) {
        if (!data[i]) return CUDA_ERROR_INVALID_VALUE;
        switch (attrs[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data[i] = a ? CU_MEMORYTYPE_DEVICE : 0; break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data[i] = a ? 0 : -2; break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned *)data[i] = 0; break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data[i] = (CUdeviceptr)hit.base; break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data[i] = (size_t)hit.size; break;
        default:
            return fail(CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttributes: attribute %d is not simulated", (int)attrs[i]);
        }
    }
    return CUDA_SUCCESS;
}

/* Launches so far (tests: a refused call must not have launched). */
EXPORT unsigned long long fa4sim_launch_count(void)
{
    pthread_mutex_lock(&dev.mu);
    unsigned long long n = dev.launches;
    pthread_mutex_unlock(&dev.mu);
    return n;
}

static CUresult span(CUdeviceptr p, size_t n)
{
    CUresult r = need_context();
    if (r) return r;
    return sim_global_check(&dev.global, p, n) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n)
{
    CUresult r = span(d, n);
    if (!r) memcpy((void *)(uintptr_t)d, h, n);
    return r;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n)
{
    CUresult r = span(d, n);
    if (!r) memcpy(h, (const void *)(uintptr_t)d, n);
    return r;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n)
{
    CUresult r = span(d, n);
    if (!r) memset((void *)(uintptr_t)d, v, n);
    return r;
}

/* The simulator runs every launch before it returns, so an asynchronous memset is done at once. */
EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream st)
{
    (void)st;
    return cuMemsetD8_v2(d, v, n);
}

/* ------------------------------------------------------------ streams: every launch runs before it returns, so a
 * stream is only a name, and none ever captures a graph (the runtime's capture paths: tests/unit/test_launch.c) */
EXPORT CUresult cuStreamCreate(CUstream *st, unsigned int flags)
{
    (void)flags;
    CUresult r = need_context();
    if (r) return r;
    if (!st) return CUDA_ERROR_INVALID_VALUE;
    void *name = malloc(1);
    if (!name) return CUDA_ERROR_OUT_OF_MEMORY;
    *st = (CUstream)name;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream st)
{
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    free((void *)st);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamIsCapturing(CUstream st, CUstreamCaptureStatus *status)
{
    (void)st;
    if (!status) return CUDA_ERROR_INVALID_VALUE;
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return need_context();
}

/* A stream's id is its handle's value (the NULL stream's 0): the simulator runs each launch to its end before the
 * next, so a handle reused after its stream is destroyed shares nothing in flight. */
EXPORT CUresult cuStreamGetId(CUstream st, unsigned long long *id)
{
    if (!id) return CUDA_ERROR_INVALID_VALUE;
    *id = (unsigned long long)(uintptr_t)st;
    return need_context();
}

EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    static _Thread_local CUstreamCaptureMode cur = CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (!mode) return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode was = cur;
    cur = *mode, *mode = was;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ modules */
static void jit_log(unsigned n, const CUjit_option *opt, void **val, const char *msg)
{
    char *buf = NULL;
    size_t size = 0;
    for (unsigned i = 0; opt && val && i < n; i++) {
        if (opt[i] == CU_JIT_ERROR_LOG_BUFFER) buf = val[i];
        if (opt[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) size = (size_t)(uintptr_t)val[i];
    }
    if (buf && size) snprintf(buf, size, "%s", msg);
}

/* The text of FA4SIM_PTX_REPLACE when it defines the entry `text` defines, else NULL. */
static char *replacement(const char *text)
{
    const char *path = getenv("FA4SIM_PTX_REPLACE");
    if (!path || !*path) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    long n = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    if (n > 0 && !fseek(f, 0, SEEK_SET) && (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n)
        buf[n] = 0;
    else
        free(buf), buf = NULL;
    fclose(f);
    const char *e1 = strstr(text, ".entry "), *e2 = buf ? strstr(buf, ".entry ") : NULL;
    if (!e1 || !e2) { free(buf); return NULL; }
    size_t k = strcspn(e1 + 7, "( \n");
    if (strncmp(e1 + 7, e2 + 7, k) || strcspn(e2 + 7, "( \n") != k) { free(buf); return NULL; }
    return buf;
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned int n, CUjit_option *opt, void **val)
{
    CUresult r = need_context();
    if (r) return r;
    if (!m || !image) return CUDA_ERROR_INVALID_VALUE;
    const char *text = image;
    char err[1024];
    char *replaced = replacement(text);
    if (replaced) text = replaced;
    if (!memcmp(text, "\177ELF", 4)) {
        jit_log(n, opt, val, "fa4sim: the simulated device runs PTX only; this image is a cubin (SASS)");
        return CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    PtxModule *p = ptx_parse(text, strlen(text), err, sizeof err);
    free(replaced);
    if (!p) {
        char msg[1200];
        snprintf(msg, sizeof msg, "fa4sim: PTX not accepted: %s", err);
        jit_log(n, opt, val, msg);
        return fail(CUDA_ERROR_INVALID_PTX, "%s", msg);
    }
    char want[16];
    snprintf(want, sizeof want, "sm_%d%s", dev.cc, dev.cc >= 90 ? "a" : "");
    if (strcmp(p->target, want)) {
        snprintf(err, sizeof err, "fa4sim: PTX for %s cannot run on the simulated %s device", p->target, want);
        jit_log(n, opt, val, err);
        ptx_free(p);
        return fail(CUDA_ERROR_NO_BINARY_FOR_GPU, "%s", err);
    }
    /* timing mode: the order ptxas would issue each block's independent chains in (FA4SIM_SCHED=0: PTX order) */
    if (timing_on && env_int("FA4SIM_SCHED", 1) && timing_schedule(p, &timing_gpu)) {
        ptx_free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct CUmod_st *mod = calloc(1, sizeof *mod);
    if (!mod) { ptx_free(p); return CUDA_ERROR_OUT_OF_MEMORY; }
    mod->ptx = p;
    *m = mod;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleUnload(CUmodule m)
{
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    for (struct CUfunc_st *f = m->funcs, *nx; f; f = nx) nx = f->next, free(f);
    ptx_free(m->ptx);
    free(m);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    if (!f || !m || !name) return CUDA_ERROR_INVALID_VALUE;
    for (struct CUfunc_st *x = m->funcs; x; x = x->next)
        if (!strcmp(x->entry->name, name)) return *f = x, CUDA_SUCCESS;
    const PtxEntry *e = ptx_find_entry(m->ptx, name);
    if (!e) return fail(CUDA_ERROR_NOT_FOUND, "cuModuleGetFunction: no kernel '%s'", name);
    struct CUfunc_st *fn = calloc(1, sizeof *fn);
    if (!fn) return CUDA_ERROR_OUT_OF_MEMORY;
    fn->entry = e, fn->module = m, fn->next = m->funcs;
    m->funcs = fn;
    *f = fn;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int value)
{
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
        if (value < 0 || value > dev.smem_optin)
            return fail(CUDA_ERROR_INVALID_VALUE, "cuFuncSetAttribute: %d bytes of dynamic smem, the device has %d",
                        value, dev.smem_optin);
        f->max_dyn_smem = value;
    }
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ tensor maps */
EXPORT CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType t, cuuint32_t rank, void *addr,
                                       const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                                       const cuuint32_t *elem, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                       CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
    char err[512];
    CUresult r = tma_encode_tiled(map, t, rank, addr, dims, strides, box, elem, il, sw, l2, oob, err, sizeof err);
    return r ? fail(r, "cuTensorMapEncodeTiled: %s", err) : CUDA_SUCCESS;
}

/* ------------------------------------------------------------ launches */
/* The launch's unique-traffic bound: the bytes of the allocations its parameters point into (a pointer
 * parameter, or a tensor map's global address: any aligned 8-byte word of the parameter bytes that lies inside
 * an allocation), or of every allocation when no word does. Every allocation of the context charged a split-KV
 * decode's combine kernel with the K/V cache its split kernel had read (58.9 us of HBM time for ~2 us). */
static uint64_t launch_bytes(const SimLaunch *l)
{
    uint64_t bytes = 0, all = 0;
    const unsigned char *pb = l->params;
    for (int i = 0; i < dev.global.nallocs; i++) {
        const SimAlloc *a = &dev.global.allocs[i];
        all += a->size;
        for (uint32_t off = 0; pb && off + 8 <= l->entry->param_bytes; off += 8) {
            uint64_t w;
            memcpy(&w, pb + off, 8);
            if (w >= a->base && w - a->base < a->size) {
                bytes += a->size;
                break;
            }
        }
    }
    return bytes ? bytes : all;
}

/* The timing mode: the launch's window under the clock, its report line, and with FA4SIM_TIMING_SENS
 * the prediction again with each assumed value at 0.75x and 1.25x. */
static int timed_launch(SimLaunch *l, char **report)
{
    TimingLaunch tl = {&timing_gpu, launch_bytes(l), timing_samples};
    TimingOut out;
    l->timing = &tl, l->tout = &out;
    int st = sim_run(l, report);
    if (st) return st;
    int n = snprintf(timing_line, sizeof timing_line,
                     "fa4sim-timing: %s gpu=%s grid=%ux%ux%u cluster=%u block=%u smem=%u predicted_us=%.2f "
                     "cycles=%.0f window_cycles=%.0f clusters=%d simulated=%d waves=%d occupancy=%d tflops=%.1f "
                     "hbm_us=%.2f l2_us=%.2f dram_us=%.2f bottleneck=%s util:", l->entry->name, timing_gpu.name, l->grid[0],
                     l->grid[1], l->grid[2], l->cluster[0] * l->cluster[1] * l->cluster[2], l->block[0], l->dyn_smem,
                     out.us, out.cycles, out.window_cycles, out.clusters, out.simulated, out.waves, out.occupancy,
                     out.tflops, out.hbm_cycles / (timing_gpu.v[K_CLOCK_GHZ] * 1e3),
                     out.l2_cycles / (timing_gpu.v[K_CLOCK_GHZ] * 1e3),
                     out.dram_cycles / (timing_gpu.v[K_CLOCK_GHZ] * 1e3), out.bottleneck);
    if (out.prefetch_mb > 0 && n > 0 && (size_t)n < sizeof timing_line) /* (only then: other lines stay as they were) */
        n += snprintf(timing_line + n, sizeof timing_line - (size_t)n, " l2_prefetch_mb=%.1f head_us=%.2f",
                      out.prefetch_mb, out.head_us);
    for (int u = 0; u < TP_COUNT && n > 0 && (size_t)n < sizeof timing_line; u++)
        n += snprintf(timing_line + n, sizeof timing_line - (size_t)n, " %s=%.0f%%", timing_unit_name(u),
                      out.span[u] > 0 ? 100 * out.busy[u] / out.span[u] : 0);
    if (timing_sens)
        for (int k = 0; k < K_COUNT && n > 0 && (size_t)n < sizeof timing_line; k++) {
            if (timing_gpu.src[k] != SRC_ASSUMED) continue;
            double us[2], keep = timing_gpu.v[k];
            for (int sgn = 0; sgn < 2; sgn++) {
                timing_gpu.v[k] = keep * (sgn ? 1.25 : 0.75);
                TimingOut o2;
                l->tout = &o2;
                char *r2 = NULL;
                int s2 = sim_run(l, &r2);
                free(r2);
                us[sgn] = s2 ? NAN : o2.us;
            }
            timing_gpu.v[k] = keep;
            n += snprintf(timing_line + n, sizeof timing_line - (size_t)n, " sens:%s=%+.1f%%/%+.1f%%",
                          timing_key_name(k), 100 * (us[0] / out.us - 1), 100 * (us[1] / out.us - 1));
        }
    l->tout = &out;
    timing_total += out.us;
    fprintf(stderr, "%s\n", timing_line);
    return SIM_OK;
}

static CUresult launch(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned smem,
                       const unsigned cluster[3], int pdl, void **params, void **extra)
{
    CUresult r = need_context();
    if (r) return r;
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    if (extra) return fail(CUDA_ERROR_INVALID_VALUE, "launch: 'extra' is not simulated");
    const PtxEntry *e = f->entry;
    if (e->nparams && !params) return fail(CUDA_ERROR_INVALID_VALUE, "launch: kernelParams is NULL");
    for (int i = 0; i < 3; i++) {
        if (!grid[i] || !block[i]) return CUDA_ERROR_INVALID_VALUE;
        if (grid[i] % cluster[i]) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
        if (e->reqntid[0] && (unsigned)e->reqntid[i] != block[i])
            return fail(CUDA_ERROR_INVALID_VALUE, "launch %s: block %ux%ux%u but .reqntid %dx%dx%d", e->name, block[0],
                        block[1], block[2], e->reqntid[0], e->reqntid[1], e->reqntid[2]);
        if (e->cluster[0] && (unsigned)e->cluster[i] != cluster[i])
            return fail(CUDA_ERROR_INVALID_CLUSTER_SIZE, "launch %s: cluster %ux%ux%u but .reqnctapercluster %dx%dx%d",
                        e->name, cluster[0], cluster[1], cluster[2], e->cluster[0], e->cluster[1], e->cluster[2]);
    }
    if ((uint64_t)block[0] * block[1] * block[2] > 1024) return CUDA_ERROR_INVALID_VALUE;
    unsigned limit = f->max_dyn_smem > DEFAULT_SMEM ? (unsigned)f->max_dyn_smem : DEFAULT_SMEM;
    if (smem > limit)
        return fail(CUDA_ERROR_INVALID_VALUE, "launch %s: %u bytes of dynamic smem, the function allows %u", e->name,
                    smem, limit);
    uint8_t *pbuf = calloc(1, e->param_bytes + 16);
    if (!pbuf) return CUDA_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < e->nparams; i++) {
        if (!params[i]) { free(pbuf); return fail(CUDA_ERROR_INVALID_VALUE, "launch: parameter %d is NULL", i); }
        memcpy(pbuf + e->params[i].offset, params[i], e->params[i].size);
    }
    pthread_mutex_lock(&dev.mu);
    uint64_t n = ++dev.launches;
    pthread_mutex_unlock(&dev.mu);
    SimLaunch l = {f->module->ptx, e, {grid[0], grid[1], grid[2]}, {block[0], block[1], block[2]},
                   {cluster[0], cluster[1], cluster[2]}, smem, pbuf, &dev.global,
                   dev.seed * 0x9e3779b97f4a7c15ull + n, dev.cc / 10, dev.verbose, NULL};
    Late *late = late_land();
    l.late = late ? &late->sim : NULL;
    l.resident = timing_on ? 1 : env_int("FA4SIM_RESIDENT", 1); /* read per launch: a test may set it per case */
    int prev = timing_on ? 0 : env_int("FA4SIM_PREV_GRID", 0); /* per launch, as resident; 0..1e6 rounds */
    l.prev_grid_steps = prev <= 0 ? 0 : prev > PREV_GRID_MAX ? PREV_GRID_MAX : (uint64_t)prev;
    l.pdl = pdl;
    char *report = NULL;
    int st = timing_on ? timed_launch(&l, &report) : sim_run(&l, &report);
    late_free(late);
    free(pbuf);
    if (st == SIM_OK) { free(report); return CUDA_SUCCESS; }
    fprintf(stderr, "fa4sim: launch of %s failed:\n%s", e->name, report ? report : "(no report)\n");
    pthread_mutex_lock(&dev.mu);
    free(dev.report);
    dev.report = report;
    dev.sticky = st == SIM_FAULT ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_ERROR_LAUNCH_FAILED;
    r = dev.sticky;
    pthread_mutex_unlock(&dev.mu);
    return r;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned smem, CUstream stream, void **params, void **extra)
{
    (void)stream;
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz}, one[3] = {1, 1, 1};
    return launch(f, grid, block, smem, one, 0, params, extra);
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    unsigned cluster[3] = {1, 1, 1};
    int pdl = 0;
    for (unsigned i = 0; i < c->numAttrs; i++) {
        if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
            pdl = c->attrs[i].value.programmaticStreamSerializationAllowed != 0;
        if (c->attrs[i].id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) continue;
        cluster[0] = c->attrs[i].value.clusterDim.x;
        cluster[1] = c->attrs[i].value.clusterDim.y;
        cluster[2] = c->attrs[i].value.clusterDim.z;
        if (!cluster[0] || !cluster[1] || !cluster[2]) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    }
    const unsigned grid[3] = {c->gridDimX, c->gridDimY, c->gridDimZ};
    const unsigned block[3] = {c->blockDimX, c->blockDimY, c->blockDimZ};
    return launch(f, grid, block, c->sharedMemBytes, cluster, pdl, params, extra);
}

/* ------------------------------------------------------------ the linker: absent */
EXPORT CUresult cuLinkCreate_v2(unsigned int n, CUjit_option *o, void **v, CUlinkState *s)
{
    (void)n, (void)o, (void)v, (void)s;
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ------------------------------------------------------------ entry points by name */
typedef struct { const char *name; void *fn; } Sym;
#define S(n, f) {n, (void *)f}
static const Sym syms[] = {
    S("cuInit", cuInit), S("cuDriverGetVersion", cuDriverGetVersion), S("cuGetErrorName", cuGetErrorName),
    S("cuGetErrorString", cuGetErrorString), S("cuDeviceGet", cuDeviceGet), S("cuDeviceGetCount", cuDeviceGetCount),
    S("cuDeviceGetAttribute", cuDeviceGetAttribute), S("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain),
    S("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2), S("cuCtxGetCurrent", cuCtxGetCurrent),
    S("cuCtxSetCurrent", cuCtxSetCurrent), S("cuCtxPushCurrent", cuCtxPushCurrent_v2),
    S("cuCtxPopCurrent", cuCtxPopCurrent_v2), S("cuCtxSynchronize", cuCtxSynchronize),
    S("cuStreamSynchronize", cuStreamSynchronize), S("cuMemAlloc", cuMemAlloc_v2), S("cuMemFree", cuMemFree_v2),
    S("cuMemcpyHtoD", cuMemcpyHtoD_v2), S("cuMemcpyDtoH", cuMemcpyDtoH_v2), S("cuMemsetD8", cuMemsetD8_v2),
    S("cuModuleLoadDataEx", cuModuleLoadDataEx), S("cuModuleUnload", cuModuleUnload),
    S("cuModuleGetFunction", cuModuleGetFunction), S("cuFuncSetAttribute", cuFuncSetAttribute),
    S("cuLaunchKernel", cuLaunchKernel), S("cuLaunchKernelEx", cuLaunchKernelEx),
    S("cuTensorMapEncodeTiled", cuTensorMapEncodeTiled), S("cuLinkCreate", cuLinkCreate_v2),
    S("cuPointerGetAttributes", cuPointerGetAttributes), S("cuMemsetD8Async", cuMemsetD8Async),
    S("cuStreamCreate", cuStreamCreate), S("cuStreamDestroy", cuStreamDestroy_v2),
    S("cuStreamIsCapturing", cuStreamIsCapturing), S("cuStreamGetId", cuStreamGetId),
    S("cuThreadExchangeStreamCaptureMode", cuThreadExchangeStreamCaptureMode),
};
#undef S

EXPORT CUresult cuGetProcAddress_v2(const char *name, void **fn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *q)
{
    (void)version, (void)flags;
    if (!name || !fn) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!strcmp(syms[i].name, name)) {
            *fn = syms[i].fn;
            if (q) *q = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    *fn = NULL;
    if (q) *q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}
