/* jit_host.c - a host that JITs: the first run generates and compiles its kernel, later
 * runs take it from the disk cache ($FA4GEN_CACHE_DIR, else ~/.cache/fa4gen).
 *
 *   jit_host [--expect-cached]
 *
 * It asks the runtime which kernel its call needs (fa4_mha_config), fetches it and says
 * where it came from; --expect-cached fails unless that was the disk cache (the second
 * run's check). With a GPU it then runs the call (causal, bf16, GQA 8:2, d128) and checks
 * four output rows against a CPU reference; without one it compiles for sm90a, which needs
 * no GPU, and stops there. */
#include "example_gpu.h"

int main(int argc, char **argv)
{
    int expect_cached = argc > 1 && !strcmp(argv[1], "--expect-cached");
    if (argc > 1 + expect_cached) {
        fprintf(stderr, "usage: jit_host [--expect-cached]\n");
        return 2;
    }
    Cu cu;
    int gpu = open_cuda(&cu) == 0;
    fa4_options opt = FA4_OPTIONS_INIT;
    if (!gpu) opt.target = FA4_TARGET_SM90A; /* AUTO reads the GPU's */
    fa4_ctx *ctx = NULL;
    fa4_status s = fa4_create(&ctx, &opt);
    if (s) return fail(NULL, "fa4_create", s);
    printf("libfa4rt %s (header %s)\n", fa4_version(), FA4_VERSION_STRING);
    fa4_mha_args a = example_args();
    char config[256];
    fa4_kernel_stats st;
    int rc = 1;
    if ((s = fa4_mha_config(ctx, &a, config, sizeof config))) {
        fail(ctx, "fa4_mha_config", s);
    } else if (gpu) {
        fa4_kernel *k;
        if ((s = fa4_get_kernel(ctx, config, &k, &st))) fail(ctx, "fa4_get_kernel", s);
        else rc = 0;
    } else {
        void *cubin = NULL;
        size_t size = 0;
        if ((s = fa4_compile_v2(ctx, config, &cubin, &size, &st))) fail(ctx, "fa4_compile", s);
        else rc = 0;
        free(cubin);
    }
    if (!rc) {
        printf("kernel: %s\nfrom: %s in %.1f ms (generate %.2f, compile %.1f)\n", config, source_name(st.source),
               st.total_ms, st.generate_ms, st.compile_ms);
        if (expect_cached && st.source != 1) {
            fprintf(stderr, "jit_host: expected the disk cache on this run, got: %s\n", source_name(st.source));
            rc = 1;
        }
    }
    if (!rc && !gpu) printf("no GPU here: skipping the launch\n");
    if (!rc && gpu) rc = run_on_gpu(ctx, &cu);
    fa4_destroy(ctx);
    return rc;
}
