/* driver.c - the CUDA driver, opened at run time.
 *
 * Guarantees: only libcuda.so.1 is opened (never the link-time stub
 * libcuda.so), so a machine without a driver gets FA4_ERR_NO_DRIVER rather
 * than a crash. Entry points come from cuGetProcAddress at CUDA 12.0 ABI, so
 * the versioned (_v2, _v3) symbols match cuda.h's prototypes; dlsym of the
 * spelled-out versioned name is the fallback for drivers without it.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "rt_internal.h"

typedef CUresult (*GetProcV2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*GetProcV1)(const char *, void **, int, cuuint64_t);

/* Each entry: the base name cuGetProcAddress knows, the exported name whose
 * prototype matches the member (the dlsym fallback), and the member. */
typedef struct { const char *name, *exported; size_t off; int optional; } DrvSym;
#define D(n, e, m, o) {n, e, offsetof(Driver, m), o}
static const DrvSym drv_syms[] = {
    D("cuInit", "cuInit", Init, 0),
    D("cuDriverGetVersion", "cuDriverGetVersion", DriverGetVersion, 0),
    D("cuGetErrorName", "cuGetErrorName", GetErrorName, 0),
    D("cuGetErrorString", "cuGetErrorString", GetErrorString, 0),
    D("cuDeviceGet", "cuDeviceGet", DeviceGet, 0),
    D("cuDeviceGetCount", "cuDeviceGetCount", DeviceGetCount, 0),
    D("cuDeviceGetAttribute", "cuDeviceGetAttribute", DeviceGetAttribute, 0),
    D("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", DevicePrimaryCtxRetain, 0),
    D("cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", DevicePrimaryCtxRelease, 0),
    D("cuCtxGetCurrent", "cuCtxGetCurrent", CtxGetCurrent, 0),
    D("cuCtxSetCurrent", "cuCtxSetCurrent", CtxSetCurrent, 0),
    D("cuCtxPushCurrent", "cuCtxPushCurrent_v2", CtxPushCurrent, 0),
    D("cuCtxPopCurrent", "cuCtxPopCurrent_v2", CtxPopCurrent, 0),
    D("cuModuleLoadDataEx", "cuModuleLoadDataEx", ModuleLoadDataEx, 0),
    D("cuModuleUnload", "cuModuleUnload", ModuleUnload, 0),
    D("cuModuleGetFunction", "cuModuleGetFunction", ModuleGetFunction, 0),
    D("cuFuncSetAttribute", "cuFuncSetAttribute", FuncSetAttribute, 0),
    D("cuLaunchKernel", "cuLaunchKernel", LaunchKernel, 0),
    D("cuLaunchKernelEx", "cuLaunchKernelEx", LaunchKernelEx, 1),
    D("cuTensorMapEncodeTiled", "cuTensorMapEncodeTiled", TensorMapEncodeTiled, 1),
    D("cuLinkCreate", "cuLinkCreate_v2", LinkCreate, 1),
    D("cuLinkAddData", "cuLinkAddData_v2", LinkAddData, 1),
    D("cuLinkComplete", "cuLinkComplete", LinkComplete, 1),
    D("cuLinkDestroy", "cuLinkDestroy", LinkDestroy, 1),
    /* required: every driver since CUDA 4 has it, and no kernel is launched on a pointer it was not asked about */
    D("cuPointerGetAttributes", "cuPointerGetAttributes", PointerGetAttributes, 0),
    D("cuMemAlloc", "cuMemAlloc_v2", MemAlloc, 1),
    D("cuMemFree", "cuMemFree_v2", MemFree, 1),
    D("cuMemsetD8Async", "cuMemsetD8Async", MemsetD8Async, 1),
    D("cuStreamCreate", "cuStreamCreate", StreamCreate, 1),
    D("cuStreamDestroy", "cuStreamDestroy_v2", StreamDestroy, 1),
    D("cuStreamSynchronize", "cuStreamSynchronize", StreamSynchronize, 1),
    D("cuStreamIsCapturing", "cuStreamIsCapturing", StreamIsCapturing, 1),
    D("cuStreamGetId", "cuStreamGetId", StreamGetId, 1),
    D("cuThreadExchangeStreamCaptureMode", "cuThreadExchangeStreamCaptureMode", ThreadExchangeStreamCaptureMode, 1),
};
#undef D

static void *resolve(void *lib, GetProcV2 gp2, GetProcV1 gp1, const DrvSym *s)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    if (gp2 && gp2(s->name, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS && fn) return fn;
    fn = NULL;
    if (gp1 && gp1(s->name, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT) == CUDA_SUCCESS && fn) return fn;
    return dlsym(lib, s->exported);
}

static fa4_status load_symbols(fa4_ctx *ctx)
{
    Driver *d = &ctx->drv;
    GetProcV2 gp2 = (GetProcV2)dlsym(d->lib, "cuGetProcAddress_v2");
    GetProcV1 gp1 = gp2 ? NULL : (GetProcV1)dlsym(d->lib, "cuGetProcAddress");
    for (size_t i = 0; i < sizeof drv_syms / sizeof drv_syms[0]; i++) {
        void *fn = resolve(d->lib, gp2, gp1, &drv_syms[i]);
        if (!fn && !drv_syms[i].optional) {
            ctx->drv_status = FA4_ERR_NO_DRIVER;
            snprintf(ctx->drv_msg, sizeof ctx->drv_msg,
                     "driver: libcuda.so.1 has no %s; the installed NVIDIA driver is too old", drv_syms[i].name);
            return FA4_ERR_NO_DRIVER;
        }
        memcpy((char *)d + drv_syms[i].off, &fn, sizeof fn);
    }
    return FA4_OK;
}

const char *rt_cu_name(const fa4_ctx *ctx, CUresult r)
{
    const char *name = NULL;
    if (ctx->drv.GetErrorName) ctx->drv.GetErrorName(r, &name);
    return name ? name : "CUDA_ERROR_UNKNOWN_CODE";
}

static fa4_status drv_fail(fa4_ctx *ctx, fa4_status s, const char *what, CUresult r)
{
    const char *desc = NULL;
    if (ctx->drv.GetErrorString) ctx->drv.GetErrorString(r, &desc);
    ctx->drv_status = s;
    snprintf(ctx->drv_msg, sizeof ctx->drv_msg, "driver: %s failed: %s (%d: %s)", what, rt_cu_name(ctx, r), (int)r,
             desc ? desc : "no description");
    return s;
}

static fa4_status open_device(fa4_ctx *ctx)
{
    Driver *d = &ctx->drv;
    Device *v = &ctx->device;
    CUresult r = d->Init(0);
    if (r == CUDA_ERROR_NO_DEVICE) return drv_fail(ctx, FA4_ERR_NO_DEVICE, "cuInit", r);
    if (r) return drv_fail(ctx, FA4_ERR_NO_DRIVER, "cuInit", r);
    d->DriverGetVersion(&d->version);
    int count = 0;
    if ((r = d->DeviceGetCount(&count))) return drv_fail(ctx, FA4_ERR_NO_DEVICE, "cuDeviceGetCount", r);
    if (ctx->opt.device >= count) {
        ctx->drv_status = FA4_ERR_NO_DEVICE;
        snprintf(ctx->drv_msg, sizeof ctx->drv_msg, "device: ordinal %d does not exist; this machine has %d CUDA "
                 "device(s)", ctx->opt.device, count);
        return FA4_ERR_NO_DEVICE;
    }
    if ((r = d->DeviceGet(&v->dev, ctx->opt.device))) return drv_fail(ctx, FA4_ERR_NO_DEVICE, "cuDeviceGet", r);
    d->DeviceGetAttribute(&v->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, v->dev);
    d->DeviceGetAttribute(&v->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, v->dev);
    d->DeviceGetAttribute(&v->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, v->dev);
    if ((r = d->DevicePrimaryCtxRetain(&v->primary, v->dev)))
        return drv_fail(ctx, FA4_ERR_CUDA, "cuDevicePrimaryCtxRetain", r);
    return FA4_OK;
}

static fa4_status open_driver(fa4_ctx *ctx)
{
    Driver *d = &ctx->drv;
    d->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!d->lib) {
        const char *e = dlerror();
        ctx->drv_status = FA4_ERR_NO_DRIVER;
        snprintf(ctx->drv_msg, sizeof ctx->drv_msg,
                 "driver: libcuda.so.1 could not be loaded (%s); install the NVIDIA driver to run kernels; "
                 "fa4_compile needs only nvJitLink", e ? e : "not found");
        return FA4_ERR_NO_DRIVER;
    }
    fa4_status s = load_symbols(ctx);
    if (s == FA4_OK) s = open_device(ctx);
    return s;
}

int rt_driver_ready(fa4_ctx *ctx)
{
    int state = atomic_load_explicit(&ctx->drv_state, memory_order_acquire);
    if (state == LIB_UNTRIED) {
        pthread_mutex_lock(&ctx->mu);
        state = atomic_load_explicit(&ctx->drv_state, memory_order_relaxed);
        if (state == LIB_UNTRIED) {
            state = open_driver(ctx) == FA4_OK ? LIB_READY : LIB_FAILED;
            atomic_store_explicit(&ctx->drv_state, state, memory_order_release);
        }
        pthread_mutex_unlock(&ctx->mu);
    }
    return state == LIB_READY;
}

fa4_status rt_driver(fa4_ctx *ctx)
{
    if (rt_driver_ready(ctx)) return FA4_OK;
    /* drv_msg and drv_status are written once, before the release store. */
    return rt_fail(ctx, ctx->drv_status, "%s", ctx->drv_msg);
}

void rt_driver_close(fa4_ctx *ctx)
{
    if (ctx->device.primary && ctx->drv.DevicePrimaryCtxRelease) ctx->drv.DevicePrimaryCtxRelease(ctx->device.dev);
    if (ctx->drv.lib) dlclose(ctx->drv.lib);
    memset(&ctx->drv, 0, sizeof ctx->drv);
    ctx->device.primary = NULL;
}

fa4_status rt_ctx_enter(fa4_ctx *ctx, int *pushed)
{
    *pushed = 0;
    fa4_status s = rt_driver(ctx);
    if (s) return s;
    CUcontext cur = NULL;
    CUresult r = ctx->drv.CtxGetCurrent(&cur);
    if (r == CUDA_SUCCESS && cur == ctx->device.primary) return FA4_OK;
    if (r == CUDA_SUCCESS && cur == NULL) {
        /* Like the CUDA runtime: with nothing current, the primary context stays current. */
        r = ctx->drv.CtxSetCurrent(ctx->device.primary);
    } else {
        /* The caller has its own context current; borrow the thread briefly. */
        r = ctx->drv.CtxPushCurrent(ctx->device.primary);
        *pushed = r == CUDA_SUCCESS;
    }
    if (r) return rt_fail(ctx, FA4_ERR_CUDA, "cuCtxSetCurrent(primary context) failed: %s", rt_cu_name(ctx, r));
    return FA4_OK;
}

void rt_ctx_leave(fa4_ctx *ctx, int pushed)
{
    CUcontext prev;
    if (pushed) ctx->drv.CtxPopCurrent(&prev);
}

fa4_status rt_device_target(fa4_ctx *ctx, TargetId *t)
{
    const Device *v = &ctx->device;
    /* another minor of a major found here is refused by rt_check_target, which names the exact cc */
    if (v->cc_major == 9) *t = TARGET_SM90A;
    else if (v->cc_major == 10) *t = v->cc_minor == 3 ? TARGET_SM103A : TARGET_SM100A;
    else
        return rt_fail(ctx, FA4_ERR_UNSUPPORTED,
                       "target: AUTO found a GPU of compute capability %d.%d; fa4gen has kernels for 9.0 (sm90a), "
                       "10.0 (sm100a) and 10.3 (sm103a) only", v->cc_major, v->cc_minor);
    return FA4_OK;
}

TargetId rt_target_of(fa4_target t)
{
    return t == FA4_TARGET_SM103A ? TARGET_SM103A : t == FA4_TARGET_SM100A ? TARGET_SM100A : TARGET_SM90A;
}

fa4_status rt_check_target(fa4_ctx *ctx, TargetId t)
{
    const Target *T = target_get(t);
    const Device *v = &ctx->device;
    /* 'a' targets use arch-specific instructions: the exact CC must match. */
    if (v->cc_major == T->sm_major && v->cc_minor == T->sm_minor) return FA4_OK;
    char other[64] = ""; /* the target that device takes, when there is one */
    for (int i = 0; i < TARGET_COUNT; i++) {
        const Target *U = target_get((TargetId)i);
        if (U->sm_major == v->cc_major && U->sm_minor == v->cc_minor)
            snprintf(other, sizeof other, " (its target is %s)", U->name);
    }
    return rt_fail(ctx, FA4_ERR_UNSUPPORTED,
                   "target: %s kernels (%s) run only on a GPU of compute capability %d.%d, but device %d is "
                   "%d.%d%s; nothing was compiled or launched", T->name, T->ptx_target, T->sm_major, T->sm_minor,
                   ctx->opt.device, v->cc_major, v->cc_minor, other);
}
