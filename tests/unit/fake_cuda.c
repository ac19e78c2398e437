/* fake_cuda.c - a fake CUDA driver (libcuda.so.1) for testing libfa4rt's
 * launch path on machines without a GPU. See fake_cuda.h for what it records
 * and the environment it reads.
 *
 * It exports every entry point runtime/driver.c resolves, both through
 * cuGetProcAddress_v2 (by base name, as the real driver) and as versioned
 * symbols (the dlsym fallback). Checks follow the driver API documentation:
 * a refused call returns the documented error and says why in
 * FakeCuda.refused, so a failing test can print it.
 */
#include <cuda.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_errors.h"
#include "fake_cuda.h"

#define EXPORT __attribute__((visibility("default")))

enum { MODULE_FUNCS = 8, CTX_STACK = 8, EM_CUDA = 190, DEFAULT_SMEM = 48 * 1024 };

struct CUctx_st { int device; };
struct CUfunc_st { char name[FAKE_NAME]; int max_dyn_smem; struct CUmod_st *module; };
struct CUmod_st {
    unsigned char *image;
    size_t size;
    struct CUfunc_st *funcs[MODULE_FUNCS];
    int n_funcs;
};

static FakeCuda st;
static int initialized;
static int primary_refs;
static struct CUctx_st primary = {0};
static _Thread_local CUcontext ctx_stack[CTX_STACK];
static _Thread_local int ctx_depth;

EXPORT FakeCuda *fake_cuda_state(void) { return &st; }

/* Every encode since the library was loaded, by serial (a ring): maps outlive fake_cuda_reset, as encoded
 * maps outlive nothing in a real driver (they are plain bytes the caller keeps). */
static FakeMap history[FAKE_ENCODE_HISTORY];
static uint32_t n_serials;

EXPORT const FakeMap *fake_cuda_encoded(uint32_t serial)
{
    if (serial >= n_serials || n_serials - serial > FAKE_ENCODE_HISTORY) return NULL;
    return &history[serial % FAKE_ENCODE_HISTORY];
}

EXPORT void fake_cuda_reset(void)
{
    int major = st.cc_major, minor = st.cc_minor, sms = st.sm_count, inits = st.inits;
    int loaded = st.modules_loaded, live = st.modules_live, funcs = st.functions;
    /* the counts of loads and entry points span contexts, and memory outlives a case; the rest is per case */
    int n_ranges = st.n_ranges;
    static FakeRange ranges[FAKE_MAX_RANGES];
    memcpy(ranges, st.ranges, sizeof ranges);
    memset(&st, 0, sizeof st);
    st.cc_major = major, st.cc_minor = minor, st.sm_count = sms, st.inits = inits;
    st.modules_loaded = loaded, st.modules_live = live, st.functions = funcs;
    st.n_ranges = n_ranges;
    memcpy(st.ranges, ranges, sizeof ranges);
    st.encode_base = n_serials;
}

EXPORT int fake_cuda_map(uint64_t base, uint64_t size, unsigned type, int device, int managed)
{
    if (st.n_ranges == FAKE_MAX_RANGES) return -1;
    st.ranges[st.n_ranges++] = (FakeRange){base, size, type, device, managed};
    return 0;
}

EXPORT int fake_cuda_unmap(uint64_t base)
{
    for (int i = st.n_ranges - 1; i >= 0; i--)
        if (st.ranges[i].base == base) {
            memmove(&st.ranges[i], &st.ranges[i + 1], sizeof st.ranges[0] * (size_t)(st.n_ranges - i - 1));
            st.n_ranges--;
            return 0;
        }
    return -1;
}

/* The latest registered range that holds address p, or NULL. */
static const FakeRange *range_of(uint64_t p)
{
    for (int i = st.n_ranges - 1; i >= 0; i--)
        if (p >= st.ranges[i].base && p - st.ranges[i].base < st.ranges[i].size) return &st.ranges[i];
    return NULL;
}

static CUresult refuse(CUresult r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static CUresult refuse(CUresult r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st.refused, sizeof st.refused, fmt, ap);
    va_end(ap);
    st.n_refused++;
    return r;
}

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

static CUcontext current(void) { return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL; }

/* ------------------------------------------------------------ init, device */

EXPORT CUresult cuInit(unsigned int flags)
{
    if (flags) return refuse(CUDA_ERROR_INVALID_VALUE, "cuInit: flags %u must be 0", flags);
    int cc = env_int("FAKE_CUDA_CC", 100);
    st.cc_major = cc / 10;
    st.cc_minor = cc % 10;
    st.sm_count = env_int("FAKE_CUDA_SMS", 148);
    st.inits++;
    initialized = 1;
    return CUDA_SUCCESS;
}

/* NVRTC (a score_mod's compiler) opens libcuda.so.1 too and asks for the driver's private tables;
 * the fake has none, which NVRTC takes as "no driver" and compiles anyway. */
EXPORT CUresult cuGetExportTable(const void **table, const CUuuid *id)
{
    (void)id;
    if (table) *table = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

EXPORT CUresult cuDriverGetVersion(int *v)
{
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorName(CUresult r, const char **s) { return cu_err_lookup(r, s, 1); }

EXPORT CUresult cuGetErrorString(CUresult r, const char **s) { return cu_err_lookup(r, s, 0); }

EXPORT CUresult cuDeviceGetCount(int *n)
{
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    *n = 1;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0)
        return refuse(CUDA_ERROR_INVALID_DEVICE, "cuDeviceGet: ordinal %d; the fake has device 0", ordinal);
    *d = 0;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = st.cc_major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = st.cc_minor; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = st.sm_count; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = FAKE_SMEM_OPTIN; break;
    default: return refuse(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetAttribute: attribute %d is not faked", (int)a);
    }
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ contexts */

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    primary_refs++;
    *c = &primary;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    if (primary_refs <= 0) return refuse(CUDA_ERROR_INVALID_CONTEXT, "cuDevicePrimaryCtxRelease: not retained");
    primary_refs--;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *c)
{
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    *c = current();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext c)
{
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (c && c != &primary) return refuse(CUDA_ERROR_INVALID_CONTEXT, "cuCtxSetCurrent: unknown context");
    if (!c) { /* the documented behaviour: NULL pops the current context */
        if (ctx_depth) ctx_depth--;
        return CUDA_SUCCESS;
    }
    if (ctx_depth) ctx_stack[ctx_depth - 1] = c;
    else ctx_stack[ctx_depth++] = c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext c)
{
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (c != &primary) return refuse(CUDA_ERROR_INVALID_CONTEXT, "cuCtxPushCurrent: unknown context");
    if (ctx_depth == CTX_STACK) return refuse(CUDA_ERROR_INVALID_VALUE, "cuCtxPushCurrent: stack full");
    ctx_stack[ctx_depth++] = c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *c)
{
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!ctx_depth) return refuse(CUDA_ERROR_INVALID_CONTEXT, "cuCtxPopCurrent: no current context");
    CUcontext top = ctx_stack[--ctx_depth];
    if (c) *c = top;
    return CUDA_SUCCESS;
}

static CUresult need_context(const char *what)
{
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!current()) return refuse(CUDA_ERROR_INVALID_CONTEXT, "%s: no current context", what);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ modules */

static uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t rd32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t rd16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/* Write why into the caller's CU_JIT_ERROR_LOG_BUFFER, as the real loader does. */
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

/* The SM number a cubin is built for. ptxas 13 writes ELF ABI version 8 with
 * the SM in e_flags bits 8..15 (sm_100a: 0x64xx); older cubins keep it in bits 0..7. */
static int cubin_sm(const unsigned char *h)
{
    uint32_t flags = rd32(h + 0x30);
    return h[8] >= 8 ? (int)((flags >> 8) & 0xff) : (int)(flags & 0xff);
}

/* Check a 64-bit little-endian CUDA ELF; its size is where the section headers end. */
static CUresult check_cubin(const unsigned char *h, size_t *size, char *why, size_t n)
{
    if (memcmp(h, "\177ELF", 4) != 0) {
        int ptx = h[0] == '/' || h[0] == '.' || h[0] == '\n' || h[0] == ' ';
        snprintf(why, n, "image is not an ELF cubin%s", ptx ? " (PTX: the fake driver has no JIT)" : "");
        return ptx ? CUDA_ERROR_JIT_COMPILER_NOT_FOUND : CUDA_ERROR_INVALID_IMAGE;
    }
    if (h[4] != 2 || h[5] != 1 || rd16(h + 0x12) != EM_CUDA) {
        snprintf(why, n, "ELF class %d, data %d, machine %d: not a 64-bit CUDA cubin", h[4], h[5], rd16(h + 0x12));
        return CUDA_ERROR_INVALID_IMAGE;
    }
    int sm = cubin_sm(h), dev = st.cc_major * 10 + st.cc_minor;
    if (sm != dev) {
        snprintf(why, n, "cubin for sm_%d, device is sm_%d", sm, dev);
        return CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    uint64_t shoff = rd64(h + 0x28);
    uint16_t shentsize = rd16(h + 0x3A), shnum = rd16(h + 0x3C);
    *size = (size_t)(shoff + (uint64_t)shentsize * shnum);
    if (!shnum || *size < 64 || *size > ((size_t)1 << 30)) {
        snprintf(why, n, "ELF section headers (offset %llu, %u x %u) make no sense", (unsigned long long)shoff,
                 shnum, shentsize);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    return CUDA_SUCCESS;
}

/* A fatbin (what fatbinary writes: magic, version, header size, payload size, then entries of
 * kind (1 PTX, 2 ELF), header size, payload size and sm): the ELF entry for the device, as a
 * real driver picks it; NULL with a reason when none fits (the fake cannot JIT the PTX). */
enum { FATBIN_MAGIC = 0xBA55ED50u, FATBIN_ELF = 2 };
static const unsigned char *fatbin_elf(const unsigned char *h, char *why, size_t n)
{
    uint16_t head = rd16(h + 6);
    uint64_t total = rd64(h + 8);
    int dev = st.cc_major * 10 + st.cc_minor, archs = 0;
    for (uint64_t o = head; o + 32 <= head + total;) {
        const unsigned char *e = h + o;
        uint32_t ehead = rd32(e + 4), sm = rd32(e + 28);
        uint64_t size = rd64(e + 8);
        if (rd16(e) == FATBIN_ELF && (int)sm == dev) return e + ehead;
        archs++;
        o += ehead + size;
    }
    snprintf(why, n, "fatbin with %d entries has no ELF for sm_%d (the fake driver cannot JIT its PTX)", archs, dev);
    return NULL;
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned int n, CUjit_option *opt, void **val)
{
    CUresult r = need_context("cuModuleLoadDataEx");
    if (r) return r;
    if (!m || !image) return refuse(CUDA_ERROR_INVALID_VALUE, "cuModuleLoadDataEx: NULL module or image");
    char why[256];
    size_t size = 0;
    int fat = rd32(image) == FATBIN_MAGIC;
    if (fat && !(image = fatbin_elf(image, why, sizeof why))) {
        jit_log(n, opt, val, why);
        return refuse(CUDA_ERROR_NO_BINARY_FOR_GPU, "cuModuleLoadDataEx: %s", why);
    }
    if ((r = check_cubin(image, &size, why, sizeof why))) {
        jit_log(n, opt, val, why);
        return refuse(r, "cuModuleLoadDataEx: %s", why);
    }
    struct CUmod_st *mod = calloc(1, sizeof *mod);
    if (!mod || !(mod->image = malloc(size))) {
        free(mod);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(mod->image, image, size);
    mod->size = size;
    st.modules_loaded++;
    st.modules_live++;
    st.fatbins_loaded += fat;
    *m = mod;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleUnload(CUmodule m)
{
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    for (int i = 0; i < m->n_funcs; i++) free(m->funcs[i]);
    free(m->image);
    free(m);
    st.modules_live--;
    return CUDA_SUCCESS;
}

/* A kernel is in the cubin when its name is a whole string of a string table. */
static int has_symbol(const struct CUmod_st *m, const char *name)
{
    size_t k = strlen(name);
    for (size_t i = 1; i + k < m->size; i++)
        if (m->image[i - 1] == 0 && m->image[i + k] == 0 && memcmp(m->image + i, name, k) == 0) return 1;
    return 0;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    if (!f || !m || !name) return CUDA_ERROR_INVALID_VALUE;
    if (strlen(name) >= FAKE_NAME || !has_symbol(m, name))
        return refuse(CUDA_ERROR_NOT_FOUND, "cuModuleGetFunction: no kernel '%s' in the module", name);
    for (int i = 0; i < m->n_funcs; i++)
        if (!strcmp(m->funcs[i]->name, name)) return *f = m->funcs[i], CUDA_SUCCESS;
    if (m->n_funcs == MODULE_FUNCS) return CUDA_ERROR_OUT_OF_MEMORY;
    struct CUfunc_st *fn = calloc(1, sizeof *fn);
    if (!fn) return CUDA_ERROR_OUT_OF_MEMORY;
    snprintf(fn->name, sizeof fn->name, "%s", name);
    fn->module = m;
    m->funcs[m->n_funcs++] = fn;
    st.functions++;
    *f = fn;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int value)
{
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
        if (value < 0 || value > FAKE_SMEM_OPTIN)
            return refuse(CUDA_ERROR_INVALID_VALUE, "cuFuncSetAttribute: %d bytes of dynamic smem, the device has "
                          "%d", value, FAKE_SMEM_OPTIN);
        f->max_dyn_smem = value;
    }
    if (st.n_attrs < FAKE_MAX_ATTRS) {
        FakeAttr *r = &st.attrs[st.n_attrs++];
        snprintf(r->kernel, sizeof r->kernel, "%s", f->name);
        r->attr = (int)a;
        r->value = value;
    }
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ memory */

/* Device memory is addresses only: allocations come from a region no host mapping uses, 256-byte aligned,
 * and nothing is behind them (nothing in the fake dereferences a device pointer). */
enum { FAKE_ALLOC_ALIGN = 256 };
static uint64_t next_alloc = 0x300000000000ull;

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    CUresult r = need_context("cuMemAlloc");
    if (r) return r;
    if (!p || !n) return refuse(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc: NULL pointer or 0 bytes");
    if (fake_cuda_map(next_alloc, n, CU_MEMORYTYPE_DEVICE, 0, 0))
        return refuse(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc: the fake holds %d ranges", FAKE_MAX_RANGES);
    *p = (CUdeviceptr)next_alloc;
    next_alloc += (n + FAKE_ALLOC_ALIGN - 1) / FAKE_ALLOC_ALIGN * FAKE_ALLOC_ALIGN + FAKE_ALLOC_ALIGN;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
    if (!p) return CUDA_SUCCESS;
    const FakeRange *r = range_of((uint64_t)p);
    if (!r || r->base != (uint64_t)p || r->type != CU_MEMORYTYPE_DEVICE)
        return refuse(CUDA_ERROR_INVALID_VALUE, "cuMemFree: 0x%llx is not the start of an allocation",
                      (unsigned long long)p);
    fake_cuda_unmap((uint64_t)p);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream stream)
{
    (void)stream;
    CUresult r = need_context("cuMemsetD8Async");
    if (r) return r;
    const FakeRange *g = range_of((uint64_t)d);
    if (!g || g->type != CU_MEMORYTYPE_DEVICE || (uint64_t)d - g->base > g->size || n > g->size - ((uint64_t)d - g->base))
        return refuse(CUDA_ERROR_INVALID_VALUE, "cuMemsetD8Async: [0x%llx, +%zu) is not device memory the fake "
                      "allocated", (unsigned long long)d, n);
    st.n_memsets++, st.memset_ptr = (uint64_t)d, st.memset_bytes = n, st.memset_value = v;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ streams */

/* A created stream is a heap token; its id is the token's address (the NULL stream's 0). */
EXPORT CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
    CUresult r = need_context("cuStreamCreate");
    if (r) return r;
    if (!s || (flags & ~1u)) return refuse(CUDA_ERROR_INVALID_VALUE, "cuStreamCreate: NULL or flags %u", flags);
    *s = (CUstream)malloc(1);
    if (!*s) return refuse(CUDA_ERROR_OUT_OF_MEMORY, "cuStreamCreate: out of memory");
    st.streams_live++;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s)
{
    if (!s) return refuse(CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy: NULL stream");
    free((void *)s);
    st.streams_live--;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream s)
{
    (void)s;
    return need_context("cuStreamSynchronize");
}

EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    CUresult r = need_context("cuStreamIsCapturing");
    if (r) return r;
    if (!status) return refuse(CUDA_ERROR_INVALID_VALUE, "cuStreamIsCapturing: NULL status");
    *status = s && st.capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamGetId(CUstream s, unsigned long long *id)
{
    CUresult r = need_context("cuStreamGetId");
    if (r) return r;
    if (st.no_stream_id) return refuse(CUDA_ERROR_NOT_SUPPORTED, "cuStreamGetId: refused (no_stream_id)");
    if (!id) return refuse(CUDA_ERROR_INVALID_VALUE, "cuStreamGetId: NULL id");
    *id = (unsigned long long)(uintptr_t)s;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    static CUstreamCaptureMode cur = CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (!mode) return refuse(CUDA_ERROR_INVALID_VALUE, "cuThreadExchangeStreamCaptureMode: NULL mode");
    CUstreamCaptureMode was = cur;
    cur = *mode, *mode = was;
    return CUDA_SUCCESS;
}

/* As the driver documents it: each attribute written as its type; an address in no known range gets
 * the defaults (memory type 0, ordinal -2, no range) and CUDA_SUCCESS. */
EXPORT CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data, CUdeviceptr ptr)
{
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!n || !attrs || !data) return refuse(CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttributes: no attributes");
    st.n_ptr_queries++;
    const FakeRange *r = range_of((uint64_t)ptr);
    for (unsigned i = 0; i < n; i++) {
        if (!data[i]) return refuse(CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttributes: data[%u] is NULL", i);
        switch (attrs[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data[i] = r ? r->type : 0; break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data[i] = r ? r->device : -2; break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned *)data[i] = r ? (unsigned)r->managed : 0; break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data[i] = r ? (CUdeviceptr)r->base : 0; break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data[i] = r ? (size_t)r->size : 0; break;
        default:
            return refuse(CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttributes: attribute %d is not faked", (int)attrs[i]);
        }
    }
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ tensor maps */

static int dtype_size(CUtensorMapDataType t)
{
    switch (t) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

static int swizzle_bytes(CUtensorMapSwizzle s)
{
    return s == CU_TENSOR_MAP_SWIZZLE_32B ? 32 : s == CU_TENSOR_MAP_SWIZZLE_64B ? 64
           : s == CU_TENSOR_MAP_SWIZZLE_128B ? 128 : 0;
}

#define BAD_MAP(...) refuse(CUDA_ERROR_INVALID_VALUE, "cuTensorMapEncodeTiled: " __VA_ARGS__)

/* The documented rules for a tiled map without interleave. */
static CUresult check_map(const CUtensorMap *map, CUtensorMapDataType t, cuuint32_t rank, const void *addr,
                          const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                          const cuuint32_t *elem, CUtensorMapInterleave il, CUtensorMapSwizzle sw)
{
    int es = dtype_size(t);
    if (!map || (uintptr_t)map % 64) return BAD_MAP("tensorMap %p is not 64-byte aligned", (const void *)map);
    if (!es) return BAD_MAP("data type %d", (int)t);
    if (rank < 1 || rank > 5) return BAD_MAP("rank %u; use 1..5", rank);
    if (il != CU_TENSOR_MAP_INTERLEAVE_NONE) return BAD_MAP("interleave %d is not faked", (int)il);
    if (!addr || (uintptr_t)addr % 16) return BAD_MAP("global address %p is not 16-byte aligned", addr);
    if (!dims || !box || !elem || (rank > 1 && !strides)) return BAD_MAP("NULL array");
    for (cuuint32_t i = 0; i < rank; i++) {
        if (dims[i] == 0 || dims[i] > ((uint64_t)1 << 32)) return BAD_MAP("globalDim[%u] = %llu", i,
                                                                          (unsigned long long)dims[i]);
        if (box[i] == 0 || box[i] > 256) return BAD_MAP("boxDim[%u] = %u; use 1..256", i, box[i]);
        if (elem[i] == 0 || elem[i] > 8) return BAD_MAP("elementStrides[%u] = %u; use 1..8", i, elem[i]);
    }
    for (cuuint32_t i = 0; i + 1 < rank; i++)
        if (strides[i] % 16 || strides[i] >= ((uint64_t)1 << 40))
            return BAD_MAP("globalStrides[%u] = %llu bytes; use a multiple of 16 below 2^40", i,
                           (unsigned long long)strides[i]);
    uint64_t inner = (uint64_t)box[0] * (uint64_t)es;
    if (inner % 16) return BAD_MAP("boxDim[0] %u x %d B = %llu B is not a multiple of 16", box[0], es,
                                   (unsigned long long)inner);
    int swb = swizzle_bytes(sw);
    if (sw != CU_TENSOR_MAP_SWIZZLE_NONE && !swb) return BAD_MAP("swizzle %d is not faked", (int)sw);
    if (swb && inner > (uint64_t)swb)
        return BAD_MAP("inner box %llu B exceeds the %d B swizzle span", (unsigned long long)inner, swb);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType t, cuuint32_t rank, void *addr,
                                       const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                                       const cuuint32_t *elem, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                       CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = check_map(map, t, rank, addr, dims, strides, box, elem, il, sw);
    if (r) return r;
    if (oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && t <= CU_TENSOR_MAP_DATA_TYPE_INT64)
        return BAD_MAP("NaN out-of-bounds fill needs a float data type");
    if (st.n_encodes == FAKE_MAX_ENCODES) return refuse(CUDA_ERROR_OUT_OF_MEMORY, "cuTensorMapEncodeTiled: the "
                                                        "fake records %d encodes; reset it", FAKE_MAX_ENCODES);
    FakeMap *m = &st.encodes[st.n_encodes];
    memset(m, 0, sizeof *m);
    m->dtype = (uint32_t)t, m->rank = rank, m->addr = (uint64_t)(uintptr_t)addr;
    for (cuuint32_t i = 0; i < rank; i++) {
        m->dims[i] = dims[i], m->box[i] = box[i], m->elem[i] = elem[i];
        if (i + 1 < rank) m->strides[i] = strides[i];
    }
    m->interleave = (uint32_t)il, m->swizzle = (uint32_t)sw, m->l2 = (uint32_t)l2, m->oob = (uint32_t)oob;
    uint32_t words[3] = {FAKE_MAP_MAGIC, n_serials, ~FAKE_MAP_MAGIC};
    memset(map, 0, sizeof *map);
    memcpy(map, words, sizeof words);
    history[n_serials++ % FAKE_ENCODE_HISTORY] = *m;
    st.n_encodes++;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ launches */

/* The encode a parameter is, or NULL when it is not a map we made (its serial in *serial).
 * Reads word 0 first: every parameter has at least 4 bytes. */
static const FakeMap *map_param(const void *p, uint32_t *serial)
{
    uint32_t w[3];
    memcpy(&w[0], p, 4);
    if (w[0] != FAKE_MAP_MAGIC) return NULL;
    memcpy(w, p, sizeof w);
    *serial = w[1];
    return w[2] == ~FAKE_MAP_MAGIC ? fake_cuda_encoded(w[1]) : NULL;
}

static CUresult record_params(FakeLaunch *l, void **params)
{
    int i = 0;
    const FakeMap *m;
    uint32_t serial;
    for (; params[i] && (m = map_param(params[i], &serial)); i++) {
        if (i == FAKE_MAX_LAUNCH_MAPS) return refuse(CUDA_ERROR_INVALID_VALUE, "launch: more than %d maps",
                                                     FAKE_MAX_LAUNCH_MAPS);
        l->map_ids[i] = (int)(serial - st.encode_base); /* below 0: encoded before the reset */
        l->map_serials[i] = serial;
        l->maps[i] = *m;
    }
    l->n_maps = i;
    for (int k = 0; k < 7; k++)
        if (!params[i + k]) return refuse(CUDA_ERROR_INVALID_VALUE, "launch: parameter %d is NULL", i + k);
    memcpy(&l->lse, params[i], 8);
    memcpy(&l->seqlen_q, params[i + 1], 4);
    memcpy(&l->seqlen_k, params[i + 2], 4);
    memcpy(&l->heads_q, params[i + 3], 4);
    memcpy(&l->batch, params[i + 4], 4);
    memcpy(&l->scale_log2, params[i + 5], 4);
    memcpy(&l->o_scale, params[i + 6], 4);
    return CUDA_SUCCESS;
}

/* The checks both launch calls make, then the record. */
static CUresult launch(int ex, CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned smem,
                       const unsigned cluster[3], CUstream stream, void **params, void **extra)
{
    CUresult r = need_context(ex ? "cuLaunchKernelEx" : "cuLaunchKernel");
    if (r) return r;
    if (!f) return refuse(CUDA_ERROR_INVALID_HANDLE, "launch: NULL function");
    if (extra) return refuse(CUDA_ERROR_INVALID_VALUE, "launch: 'extra' is not faked");
    if (!params) return refuse(CUDA_ERROR_INVALID_VALUE, "launch %s: kernelParams is NULL", f->name);
    for (int i = 0; i < 3; i++) {
        if (!grid[i] || !block[i]) return refuse(CUDA_ERROR_INVALID_VALUE, "launch %s: grid or block dimension %d is 0",
                                                 f->name, i);
        if (grid[i] % cluster[i])
            return refuse(CUDA_ERROR_INVALID_CLUSTER_SIZE, "launch %s: grid dim %d = %u is not a multiple of the "
                          "cluster's %u", f->name, i, grid[i], cluster[i]);
    }
    if ((uint64_t)block[0] * block[1] * block[2] > 1024)
        return refuse(CUDA_ERROR_INVALID_VALUE, "launch %s: block %ux%ux%u has more than 1024 threads", f->name,
                      block[0], block[1], block[2]);
    if (cluster[0] * cluster[1] * cluster[2] > 8)
        return refuse(CUDA_ERROR_INVALID_CLUSTER_SIZE, "launch %s: cluster of %u CTAs; 8 is the portable limit",
                      f->name, cluster[0] * cluster[1] * cluster[2]);
    unsigned limit = f->max_dyn_smem > DEFAULT_SMEM ? (unsigned)f->max_dyn_smem : DEFAULT_SMEM;
    if (smem > limit)
        return refuse(CUDA_ERROR_INVALID_VALUE, "launch %s: %u bytes of dynamic smem but the function allows %u "
                      "(cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES)", f->name, smem, limit);
    if (st.n_launches == FAKE_MAX_LAUNCHES)
        return refuse(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "launch: the fake records %d launches; reset it",
                      FAKE_MAX_LAUNCHES);
    FakeLaunch l;
    memset(&l, 0, sizeof l);
    if ((r = record_params(&l, params))) return r;
    l.ex = ex;
    snprintf(l.kernel, sizeof l.kernel, "%s", f->name);
    memcpy(l.grid, grid, sizeof l.grid);
    memcpy(l.block, block, sizeof l.block);
    memcpy(l.cluster, cluster, sizeof l.cluster);
    l.smem = smem;
    l.smem_attr = f->max_dyn_smem;
    l.stream = stream;
    st.launches[st.n_launches++] = l;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned smem, CUstream stream, void **params, void **extra)
{
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz}, one[3] = {1, 1, 1};
    return launch(0, f, grid, block, smem, one, stream, params, extra);
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    if (!c) return refuse(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernelEx: NULL config");
    unsigned cluster[3] = {1, 1, 1};
    if (c->numAttrs && !c->attrs) return refuse(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernelEx: attrs is NULL");
    for (unsigned i = 0; i < c->numAttrs; i++) {
        if (c->attrs[i].id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) continue;
        cluster[0] = c->attrs[i].value.clusterDim.x;
        cluster[1] = c->attrs[i].value.clusterDim.y;
        cluster[2] = c->attrs[i].value.clusterDim.z;
        if (!cluster[0] || !cluster[1] || !cluster[2])
            return refuse(CUDA_ERROR_INVALID_CLUSTER_SIZE, "cuLaunchKernelEx: cluster dimension 0");
    }
    int pdl = 0;
    for (unsigned i = 0; i < c->numAttrs; i++)
        if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
            pdl = c->attrs[i].value.programmaticStreamSerializationAllowed != 0;
    const unsigned grid[3] = {c->gridDimX, c->gridDimY, c->gridDimZ};
    const unsigned block[3] = {c->blockDimX, c->blockDimY, c->blockDimZ};
    CUresult r = launch(1, f, grid, block, c->sharedMemBytes, cluster, c->hStream, params, extra);
    if (r == CUDA_SUCCESS) st.launches[st.n_launches - 1].pdl = pdl;
    return r;
}

/* ------------------------------------------------------------ the linker */

/* The fake has no PTX JIT: libfa4rt compiles with ptxas or nvJitLink instead. */
EXPORT CUresult cuLinkCreate_v2(unsigned int n, CUjit_option *opt, void **val, CUlinkState *s)
{
    (void)n, (void)opt, (void)val;
    if (s) *s = NULL;
    return refuse(CUDA_ERROR_NOT_SUPPORTED, "cuLinkCreate: the fake driver has no PTX JIT");
}

EXPORT CUresult cuLinkAddData_v2(CUlinkState s, CUjitInputType t, void *data, size_t size, const char *name,
                                 unsigned int n, CUjit_option *opt, void **val)
{
    (void)s, (void)t, (void)data, (void)size, (void)name, (void)n, (void)opt, (void)val;
    return CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuLinkComplete(CUlinkState s, void **cubin, size_t *size)
{
    (void)s, (void)cubin, (void)size;
    return CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuLinkDestroy(CUlinkState s)
{
    (void)s;
    return CUDA_ERROR_INVALID_HANDLE;
}

/* ------------------------------------------------------------ entry points */

typedef struct { const char *name; void *fn; } Proc;
#define P(base, fn) {base, (void *)fn}
static const Proc procs[] = {
    P("cuInit", cuInit), P("cuDriverGetVersion", cuDriverGetVersion), P("cuGetErrorName", cuGetErrorName),
    P("cuGetErrorString", cuGetErrorString), P("cuDeviceGet", cuDeviceGet), P("cuDeviceGetCount", cuDeviceGetCount),
    P("cuDeviceGetAttribute", cuDeviceGetAttribute), P("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain),
    P("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2), P("cuCtxGetCurrent", cuCtxGetCurrent),
    P("cuCtxSetCurrent", cuCtxSetCurrent), P("cuCtxPushCurrent", cuCtxPushCurrent_v2),
    P("cuCtxPopCurrent", cuCtxPopCurrent_v2), P("cuModuleLoadDataEx", cuModuleLoadDataEx),
    P("cuModuleUnload", cuModuleUnload), P("cuModuleGetFunction", cuModuleGetFunction),
    P("cuFuncSetAttribute", cuFuncSetAttribute), P("cuLaunchKernel", cuLaunchKernel),
    P("cuLaunchKernelEx", cuLaunchKernelEx), P("cuTensorMapEncodeTiled", cuTensorMapEncodeTiled),
    P("cuLinkCreate", cuLinkCreate_v2), P("cuLinkAddData", cuLinkAddData_v2), P("cuLinkComplete", cuLinkComplete),
    P("cuLinkDestroy", cuLinkDestroy), P("cuMemAlloc", cuMemAlloc_v2), P("cuMemFree", cuMemFree_v2),
    P("cuPointerGetAttributes", cuPointerGetAttributes), P("cuMemsetD8Async", cuMemsetD8Async),
    P("cuStreamCreate", cuStreamCreate), P("cuStreamDestroy", cuStreamDestroy_v2),
    P("cuStreamSynchronize", cuStreamSynchronize), P("cuStreamIsCapturing", cuStreamIsCapturing),
    P("cuStreamGetId", cuStreamGetId), P("cuThreadExchangeStreamCaptureMode", cuThreadExchangeStreamCaptureMode),
};
#undef P

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status)
{
    (void)flags;
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    for (size_t i = 0; version >= 12000 && !env_int("FAKE_CUDA_NO_PROC", 0) && i < sizeof procs / sizeof procs[0]; i++)
        if (!strcmp(procs[i].name, symbol)) {
            *pfn = procs[i].fn;
            if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
            st.proc_found++;
            return CUDA_SUCCESS;
        }
    st.proc_missed++;
    return CUDA_ERROR_NOT_FOUND;
}
