/* jit.c - how fast libfa4rt turns a config into a kernel.
 *
 * Prints: PTX generation (ms), cold compile PTX -> cubin (ms), disk-cache hit
 * (ms) and in-memory hit (us, averaged). The first three need no GPU
 * (fa4_compile); the memory hit needs a driver (fa4_get_kernel) and says n/a
 * without one. Uses a fresh temporary cache directory, removed at the end.
 *
 *   make bench-jit    or    build/bench/jit ["config text"]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fa4.h"
#include "fa4gen.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int die(fa4_ctx *ctx, const char *what, fa4_status s)
{
    fprintf(stderr, "%s: %s: %s\n", what, fa4_status_string(s), fa4_last_error(ctx));
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Generation alone, through the generator API (config -> plan -> PTX): the
 * first call (cold caches) and the median of the calls after it. */
static int bench_generate(const char *config, int reps)
{
    Config c;
    char err[256];
    if (config_parse_canonical(config, &c, err, sizeof err)) {
        fprintf(stderr, "config: %s\n", err);
        return 1;
    }
    Plan *p = malloc(sizeof *p);
    double *t = malloc(sizeof *t * (size_t)reps);
    size_t len = 0;
    for (int i = 0; i < reps; i++) {
        char *ptx = NULL;
        double t0 = now_ms();
        int rc = fa4gen_generate(&c, p, &ptx, &len, err, sizeof err);
        t[i] = now_ms() - t0;
        free(ptx);
        if (rc) {
            fprintf(stderr, "generate: %s\n", err);
            free(p), free(t);
            return 1;
        }
    }
    double first = t[0];
    qsort(t + 1, (size_t)reps - 1, sizeof *t, cmp_double);
    printf("generate PTX          %9.3f ms   (%zu bytes, median of %d after the first call, which took %.3f ms)\n",
           t[1 + (reps - 1) / 2], len, reps - 1, first);
    free(p), free(t);
    return 0;
}

static fa4_ctx *ctx_with(const char *dir, int disk)
{
    fa4_options o = FA4_OPTIONS_INIT;
    o.cache_dir = dir;
    o.disk_cache = disk;
    fa4_ctx *ctx = NULL;
    fa4_status s = fa4_create(&ctx, &o);
    if (s) die(NULL, "fa4_create", s);
    return ctx;
}

static int bench_compile(const char *config, const char *dir, int reps)
{
    fa4_ctx *cold = ctx_with(dir, 0), *warm = ctx_with(dir, 1);
    if (!cold || !warm) return 1;
    void *bin;
    size_t n;
    fa4_kernel_stats st;
    double compile = 0;
    fa4_status s;
    for (int i = 0; i < 3; i++) { /* memory-only context: every call compiles */
        if ((s = fa4_compile_v2(cold, config, &bin, &n, &st))) return die(cold, "fa4_compile", s);
        compile += st.compile_ms;
        free(bin);
    }
    printf("cold compile          %9.3f ms   (PTX -> %zu-byte cubin, mean of 3)\n", compile / 3, n);
    if ((s = fa4_compile_v2(warm, config, &bin, &n, &st))) return die(warm, "fa4_compile", s); /* fills the file */
    free(bin);
    double t0 = now_ms();
    for (int i = 0; i < reps; i++) {
        if ((s = fa4_compile_v2(warm, config, &bin, &n, &st))) return die(warm, "fa4_compile", s);
        if (st.source != 1) fprintf(stderr, "warning: expected a disk hit, got source %d\n", st.source);
        free(bin);
    }
    printf("disk-cache hit        %9.3f ms   (plan + key + read + verify, mean of %d)\n", (now_ms() - t0) / reps,
           reps);
    fa4_destroy(cold);
    fa4_destroy(warm);
    return 0;
}

static int bench_memory(const char *config, const char *dir)
{
    fa4_ctx *ctx = ctx_with(dir, 1);
    if (!ctx) return 1;
    fa4_kernel *k;
    fa4_kernel_stats st;
    fa4_status s = fa4_get_kernel(ctx, config, &k, &st);
    if (s == FA4_ERR_NO_DRIVER || s == FA4_ERR_NO_DEVICE || s == FA4_ERR_UNSUPPORTED) {
        printf("in-memory hit         n/a          (%s)\n", fa4_last_error(ctx));
        fa4_destroy(ctx);
        return 0;
    }
    if (s) return die(ctx, "fa4_get_kernel", s);
    printf("first get_kernel      %9.3f ms   (source %d: generate %.2f, compile %.2f, load %.2f)\n", st.total_ms,
           st.source, st.generate_ms, st.compile_ms, st.load_ms);
    enum { REPS = 200000 };
    double t0 = now_ms();
    for (int i = 0; i < REPS; i++)
        if ((s = fa4_get_kernel(ctx, config, &k, NULL))) return die(ctx, "fa4_get_kernel", s);
    printf("in-memory hit         %9.3f us   (mean of %d)\n", (now_ms() - t0) * 1e3 / REPS, REPS);
    fa4_destroy(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    const char *config = argc > 1 ? argv[1] : "mha target=sm90a dtype=bf16 qk=128 ov=128 mask=causal";
    char dir[] = "/tmp/fa4bench.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    printf("fa4gen %s JIT benchmark: %s\n", FA4GEN_VERSION, config);
    int rc = bench_generate(config, 51);
    if (!rc) rc = bench_compile(config, dir, 50);
    if (!rc) rc = bench_memory(config, dir);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}
