/* sched.c - the tile counters of dynamic kernels (config dynamic=1, plan note dynamic tiles).
 *
 * A dynamic kernel's CTAs claim tiles from two u32 words in device memory (tiles claimed, CTAs done) that must read
 * zero when the launch starts; its last CTA zeroes them as it ends. Two launches that run at once must never share
 * words (each would take the other's tiles and leave its own unwritten), so the words come from one zeroed pool per
 * context, RT_SCHED_SLOTS slots of RT_SCHED_STRIDE bytes:
 *   - an eager launch takes its stream's slot. A stream's launches run one after another, and a dynamic kernel
 *     claims only after its griddepcontrol.wait (the previous grid has ended and its zeroing is visible). Streams
 *     are told apart by cuStreamGetId, unique for the context's life, so the slot of a destroyed stream (whose last
 *     launch may still run) never goes to a new stream that reuses the handle;
 *   - a launch captured into a graph takes a slot of its own, never handed out again: the graph may replay on any
 *     stream, beside eager launches of the stream it was captured on. CUDA runs one graph exec's launches one after
 *     another; two execs instantiated from one captured graph share its slots and must not run at the same time.
 * The pool is made by the first dynamic call on a stream that is not capturing (an allocation must not become part
 * of, or break, a capture), under relaxed capture mode so that another thread's capture is not disturbed, and zeroed
 * on a private non-blocking stream. Where there is no slot (the pool not made yet, a driver without these entry
 * points, every slot taken) rt_tile_counter answers 0 and the caller runs its config with dynamic=0: the same result.
 */
#include <string.h>

#include "rt_internal.h"

/* The pool's state: 0 not made, 1 made, -1 failed (not tried again). */
static int make_pool(fa4_ctx *ctx)
{
    Driver *d = &ctx->drv;
    if (!d->MemAlloc || !d->MemFree || !d->MemsetD8Async || !d->StreamCreate || !d->StreamDestroy ||
        !d->StreamSynchronize || !d->ThreadExchangeStreamCaptureMode)
        return -1;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (d->ThreadExchangeStreamCaptureMode(&mode)) return -1;
    CUdeviceptr pool = 0;
    CUstream zero = NULL;
    size_t bytes = (size_t)RT_SCHED_SLOTS * RT_SCHED_STRIDE;
    int ok = !d->MemAlloc(&pool, bytes) && !d->StreamCreate(&zero, CU_STREAM_NON_BLOCKING) &&
             !d->MemsetD8Async(pool, 0, bytes, zero) && !d->StreamSynchronize(zero);
    if (zero) d->StreamDestroy(zero);
    if (!ok && pool) d->MemFree(pool);
    d->ThreadExchangeStreamCaptureMode(&mode);
    if (!ok) return -1;
    ctx->sched_pool = pool;
    return 1;
}

/* A slot never handed out before, or -1. Under ctx->mu. */
static int fresh_slot(fa4_ctx *ctx)
{
    return ctx->sched_used < RT_SCHED_SLOTS ? (int)ctx->sched_used++ : -1;
}

/* The slot of the stream with this id, a fresh one for a stream not seen before, or -1. Under ctx->mu. */
static int stream_slot(fa4_ctx *ctx, unsigned long long id)
{
    for (unsigned i = 0; i < ctx->n_sched_streams; i++)
        if (ctx->sched_streams[i].id == id) return (int)ctx->sched_streams[i].slot;
    if (ctx->n_sched_streams == RT_SCHED_STREAMS) return -1;
    int slot = fresh_slot(ctx);
    if (slot >= 0) ctx->sched_streams[ctx->n_sched_streams++] = (RtSchedStream){id, (uint32_t)slot};
    return slot;
}

uint64_t rt_tile_counter(fa4_ctx *ctx, CUstream stream)
{
    Driver *d = &ctx->drv;
    CUstreamCaptureStatus cap;
    unsigned long long id = 0;
    if (!d->StreamIsCapturing || !d->StreamGetId || d->StreamIsCapturing(stream, &cap)) return 0;
    if (cap == CU_STREAM_CAPTURE_STATUS_INVALIDATED) return 0; /* the launch fails as the capture does */
    int capturing = cap == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (!capturing && d->StreamGetId(stream, &id)) return 0;
    pthread_mutex_lock(&ctx->mu);
    if (!ctx->sched_state && !capturing) ctx->sched_state = make_pool(ctx);
    int slot = ctx->sched_state != 1 ? -1 : capturing ? fresh_slot(ctx) : stream_slot(ctx, id);
    uint64_t addr = slot < 0 ? 0 : (uint64_t)ctx->sched_pool + (uint64_t)slot * RT_SCHED_STRIDE;
    pthread_mutex_unlock(&ctx->mu);
    return addr;
}

void rt_sched_close(fa4_ctx *ctx)
{
    if (ctx->sched_state != 1) return;
    int pushed;
    if (!rt_ctx_enter(ctx, &pushed)) {
        ctx->drv.MemFree(ctx->sched_pool); /* fa4_destroy: no launch of the context is in flight */
        rt_ctx_leave(ctx, pushed);
    }
    ctx->sched_state = 0, ctx->sched_pool = 0;
}
