/* buffers.c - the driver's word on every pointer a kernel will read or write.
 *
 * A device pointer is a bare address: the C API cannot see a tensor's allocation, so a buffer that
 * is too small, on the host or on another GPU would only show as a kernel fault, which kills the
 * CUDA context of every user of the device. Before a launch, each buffer the operator names (its
 * base and the bytes the kernel may touch from it, computed from the arguments) is asked of the
 * driver with one cuPointerGetAttributes call: the memory type, the device ordinal, whether it is
 * managed, and the start and size of the allocation that holds it.
 *
 * Guarantees: a launch happens only on buffers that are device memory of the context's device (or
 * managed memory, which every device reaches) and whose allocation holds every byte the kernel may
 * touch. What the driver cannot know is not claimed: a buffer carved out of a larger allocation (a
 * caching allocator's block) is checked against that allocation, not against the tensor the caller
 * meant, and two buffers of one allocation may overlap. Cost: one driver call per buffer, no
 * allocation, no lock.
 *
 * The memo (rt_check_buffers_memo, fa4_mha_fwd's calls of a signature it has seen): every pointer the
 * driver vouched for is remembered with the start and size of its allocation (RT_PTR_MEMO slots,
 * RT_PTR_WAYS-way, replaced round-robin), and a later buffer at the same pointer is checked against
 * that allocation without a driver call (bench/NOTES.md "host cost": the call is one of the largest parts
 * of a cached call's host time). What this gives up: an allocation freed back to the driver (cuMemFree,
 * torch.cuda.empty_cache) whose address the driver hands out again for a smaller allocation, another
 * device's or page-locked host memory is not seen until the pointer's slot is reused; fa4_forget_buffers
 * (after freeing) asks again. The memo is opt-in (fa4_options.remember_buffers, FA4GEN_REMEMBER_BUFFERS=1):
 * by default every buffer is asked on every call. A pointer never vouched for, or
 * a buffer its remembered allocation does not hold, is always asked.
 */
#include <stdio.h>
#include <string.h>

#include "rt_internal.h"

/* The attributes asked, in this order (each written as its documented type into a zeroed 8-byte slot, so
 * a driver that writes fewer bytes leaves the value readable on a little-endian host). */
enum { A_TYPE, A_ORDINAL, A_MANAGED, A_START, A_SIZE, N_ATTR };

static const char *type_name(unsigned t)
{
    switch (t) {
    case CU_MEMORYTYPE_HOST: return "page-locked host memory";
    case CU_MEMORYTYPE_ARRAY: return "a CUDA array";
    default: return "memory of an unknown kind";
    }
}

/* Where a pointer's remembered answer may sit: RT_PTR_WAYS slots from this one. */
static unsigned memo_set(uint64_t p)
{
    uint64_t h = (p >> 4) * 0x9e3779b97f4a7c15ull;
    return (unsigned)(h >> 40) % (RT_PTR_MEMO / RT_PTR_WAYS) * RT_PTR_WAYS;
}

/* The allocation the driver named for b->ptr, or 0 when it is not remembered. Under ctx->mu. */
static const RtPtrMemo *memo_find(const fa4_ctx *ctx, uint64_t p)
{
    const RtPtrMemo *set = &ctx->ptr_memo[memo_set(p)];
    for (int i = 0; i < RT_PTR_WAYS; i++)
        if (set[i].ptr == p) return &set[i];
    return NULL;
}

static void memo_put(fa4_ctx *ctx, uint64_t p, uint64_t start, uint64_t size)
{
    pthread_mutex_lock(&ctx->mu);
    RtPtrMemo *set = &ctx->ptr_memo[memo_set(p)], *slot = NULL;
    for (int i = 0; i < RT_PTR_WAYS && !slot; i++)
        if (set[i].ptr == p || !set[i].ptr) slot = &set[i];
    if (!slot) slot = &set[ctx->ptr_memo_next++ % RT_PTR_WAYS];
    *slot = (RtPtrMemo){p, start, size};
    pthread_mutex_unlock(&ctx->mu);
}

/* b lies in the allocation [start, start + size): the bytes it may touch from its base fit. */
static int extent_fits(const RtBuffer *b, uint64_t start, uint64_t size)
{
    uint64_t p = (uint64_t)(uintptr_t)b->ptr;
    if (b->opaque || (!start && !size)) return 1;
    return p >= start && p - start <= size && b->bytes <= size - (p - start);
}

static fa4_status check_one(fa4_ctx *ctx, const RtBuffer *b)
{
    CUpointer_attribute attr[N_ATTR] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                        CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                        CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    uint64_t v[N_ATTR] = {0};
    void *data[N_ATTR];
    for (int i = 0; i < N_ATTR; i++) data[i] = &v[i];
    CUresult r = ctx->drv.PointerGetAttributes(N_ATTR, attr, data, (CUdeviceptr)(uintptr_t)b->ptr);
    if (r)
        return rt_fail(ctx, FA4_ERR_CUDA, "%s: cuPointerGetAttributes(%p) failed: %s; nothing was launched", b->name,
                       b->ptr, rt_cu_name(ctx, r));
    unsigned type = (unsigned)v[A_TYPE];
    int ordinal = (int)(int32_t)(uint32_t)v[A_ORDINAL], managed = (uint32_t)v[A_MANAGED] != 0;
    const int want = ctx->opt.device;
    /* the driver's default for an address it has no allocation for: type 0 */
    if (type == 0)
        return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %p is not memory the CUDA driver knows (host memory?); "
                       "give device memory of device %d", b->name, b->ptr, want);
    if (!managed && type != CU_MEMORYTYPE_DEVICE)
        return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %p is %s; the kernels read and write device memory: give "
                       "memory of device %d", b->name, b->ptr, type_name(type), want);
    if (!managed && ordinal != want)
        return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %p is memory of device %d; this context runs on device %d",
                       b->name, b->ptr, ordinal, want);
    uint64_t start = v[A_START], size = v[A_SIZE], p = (uint64_t)(uintptr_t)b->ptr;
    memo_put(ctx, p, start, size); /* device memory the context may use; the extent is per buffer */
    if (b->opaque) return FA4_OK;
    /* a driver that reports no range gives nothing to check the extent against (none seen so far) */
    if (!start && !size) return FA4_OK;
    if (p < start || p - start > size)
        return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %p lies outside the allocation [0x%llx, +%llu) the driver "
                       "reports for it", b->name, b->ptr, (unsigned long long)start, (unsigned long long)size);
    uint64_t left = size - (p - start);
    if (b->bytes > left) {
        char need[32];
        if (b->bytes == UINT64_MAX) snprintf(need, sizeof need, "over 2^64");
        else snprintf(need, sizeof need, "%llu", (unsigned long long)b->bytes);
        return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: the kernel may touch %s bytes from %p, but its allocation "
                       "ends %llu bytes after it; give a buffer that holds the shape and strides of the arguments",
                       b->name, need, b->ptr, (unsigned long long)left);
    }
    return FA4_OK;
}

fa4_status rt_check_buffers(fa4_ctx *ctx, const RtBuffer *b, int n)
{
    if (!ctx->drv.PointerGetAttributes)
        return rt_fail(ctx, FA4_ERR_NO_DRIVER, "driver: cuPointerGetAttributes is missing; no buffer can be checked");
    for (int i = 0; i < n; i++) {
        if (!b[i].ptr) continue;
        fa4_status s = check_one(ctx, &b[i]);
        if (s) return s;
    }
    return FA4_OK;
}

fa4_status rt_check_buffers_memo(fa4_ctx *ctx, const RtBuffer *b, int n)
{
    if (ctx->recheck_buffers) return rt_check_buffers(ctx, b, n);
    if (!ctx->drv.PointerGetAttributes)
        return rt_fail(ctx, FA4_ERR_NO_DRIVER, "driver: cuPointerGetAttributes is missing; no buffer can be checked");
    enum { MAX_BUFFERS = 32 }; /* more than any operator has */
    if (n > MAX_BUFFERS) return rt_check_buffers(ctx, b, n);
    int ask[MAX_BUFFERS], n_ask = 0;
    pthread_mutex_lock(&ctx->mu);
    for (int i = 0; i < n; i++) {
        if (!b[i].ptr) continue;
        const RtPtrMemo *m = memo_find(ctx, (uint64_t)(uintptr_t)b[i].ptr);
        if (!m || !extent_fits(&b[i], m->start, m->size)) ask[n_ask++] = i;
    }
    pthread_mutex_unlock(&ctx->mu);
    for (int j = 0; j < n_ask; j++) {
        fa4_status s = check_one(ctx, &b[ask[j]]);
        if (s) return s;
    }
    return FA4_OK;
}

void rt_forget_buffers(fa4_ctx *ctx)
{
    pthread_mutex_lock(&ctx->mu);
    memset(ctx->ptr_memo, 0, sizeof ctx->ptr_memo);
    pthread_mutex_unlock(&ctx->mu);
}
