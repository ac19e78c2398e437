/* error.c - the runtime's messages: the per-context, per-thread last error
 * (rt_fail, fa4_last_error), the verbose log (rt_log) and the clock. It calls
 * nothing else of the runtime, so every other unit may call it: api.c ->
 * cache/driver/jit/launch/mha -> error.c has no edge back up.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_internal.h"

/* A failed fa4_create has no context to hold its message. */
static _Thread_local char create_error[RT_ERR_MAX];

static char *thread_buffer(fa4_ctx *ctx)
{
    if (!ctx) return create_error;
    char *b = pthread_getspecific(ctx->err_key);
    if (b) return b;
    b = calloc(1, RT_ERR_MAX);
    if (!b) return NULL;
    pthread_mutex_lock(&ctx->err_mu);
    char **list = realloc(ctx->err_bufs, (ctx->n_err_bufs + 1) * sizeof *list);
    if (list) {
        ctx->err_bufs = list;
        list[ctx->n_err_bufs++] = b;
    }
    pthread_mutex_unlock(&ctx->err_mu);
    if (!list || pthread_setspecific(ctx->err_key, b)) {
        if (list) {
            pthread_mutex_lock(&ctx->err_mu);
            ctx->n_err_bufs--;
            pthread_mutex_unlock(&ctx->err_mu);
        }
        free(b);
        return NULL;
    }
    return b;
}

fa4_status rt_fail(fa4_ctx *ctx, fa4_status s, const char *fmt, ...)
{
    char *b = thread_buffer(ctx);
    if (!b) return s; /* no memory for the message; the status still says it */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, RT_ERR_MAX, fmt, ap);
    va_end(ap);
    return s;
}

void rt_clear_create_error(void) { create_error[0] = 0; }

const char *rt_last_error(const fa4_ctx *ctx)
{
    if (!ctx) return create_error;
    const char *b = pthread_getspecific(ctx->err_key);
    return b ? b : "";
}

const char *fa4_last_error(const fa4_ctx *ctx) { return rt_last_error(ctx); }

double rt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void rt_log(const fa4_ctx *ctx, const char *fmt, ...)
{
    if (!ctx || !ctx->opt.verbose) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("fa4: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}


void rt_log_fetch(const fa4_ctx *ctx, const struct fa4_kernel *k, int hit, const fa4_kernel_stats *st)
{
    if (!ctx || !ctx->opt.verbose) return;
    static const char *const from[] = {[SRC_MEMORY] = "memory", [SRC_DISK] = "disk", [SRC_JIT] = "jit",
                                       [SRC_BUNDLE] = "bundle"};
    /* memory hits name where the kernel was built from; disk and bundle hits need no compile */
    const char *what = hit ? "hit" : k->source == SRC_JIT ? "miss" : "hit";
    fprintf(stderr, "fa4: fetch %s %s from %s%s%s%s key=%016llx generate=%.2fms compile=%.1fms load=%.2fms "
            "config='%s'\n", k->plan.symbol, what, hit ? "memory" : from[k->source], hit ? " (built from " : "",
            hit ? from[k->source] : "", hit ? ")" : "", (unsigned long long)k->code_key, st->generate_ms,
            st->compile_ms, st->load_ms, k->plan.canonical);
}
