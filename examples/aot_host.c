/* aot_host.c - a host linked with an AOT bundle and JIT disabled: every kernel must come
 * from the bundle (aot_kernels.c, written by `fa4gen bundle aot_kernels.txt -o aot_kernels.c
 * --name aot_kernels`), and a kernel it lacks fails with FA4_ERR_NO_KERNEL naming its config.
 *
 * Checks: the kernel its call needs is in the bundle's table; a kernel it does not hold is
 * refused (nothing is generated); with a GPU, the call's kernel is fetched from the bundle
 * and the call (causal, bf16, GQA 8:2, d128) matches a CPU reference on four rows. */
#include "example_gpu.h"

extern const fa4_bundle fa4_bundle_aot_kernels;

int main(void)
{
    Cu cu;
    int gpu = open_cuda(&cu) == 0;
    fa4_options opt = FA4_OPTIONS_INIT;
    opt.disable_jit = 1;
    if (!gpu) opt.target = FA4_TARGET_SM90A;
    fa4_ctx *ctx = NULL;
    fa4_status s = fa4_create(&ctx, &opt);
    if (s) return fail(NULL, "fa4_create", s);
    const fa4_bundle *b = &fa4_bundle_aot_kernels;
    printf("bundle '%s' (fa4gen %s): %d kernels\n", b->name, b->generator, b->n_kernels);
    fa4_mha_args a = example_args();
    char config[256];
    if ((s = fa4_mha_config(ctx, &a, config, sizeof config))) {
        fail(ctx, "fa4_mha_config", s);
        fa4_destroy(ctx);
        return 1;
    }
    int held = 0;
    for (int i = 0; i < b->n_kernels; i++) held |= !strcmp(b->kernels[i].config, config);
    printf("kernel: %s\nin the bundle: %s\n", config, held ? "yes" : "NO");
    /* what JIT disabled means: a kernel the bundle lacks is an error, not a compile */
    void *cubin = NULL;
    size_t size = 0;
    s = fa4_compile(ctx, "mha target=sm90a dtype=fp16 qk=64 ov=64 mask=none", &cubin, &size);
    free(cubin);
    int refused = s == FA4_ERR_NO_KERNEL;
    printf("a kernel outside the bundle: %s (%s)\n", fa4_status_string(s), refused ? "refused, ok" : "NOT refused");
    int rc = held && refused ? 0 : 1;
    if (!rc && gpu) {
        fa4_kernel *k = NULL;
        fa4_kernel_stats st;
        if ((s = fa4_get_kernel(ctx, config, &k, &st))) rc = fail(ctx, "fa4_get_kernel", s);
        else printf("from: %s\n", source_name(st.source));
        if (!rc && st.source != 3) rc = 1;
        if (!rc) rc = run_on_gpu(ctx, &cu);
    }
    if (!gpu) printf("no GPU here: skipping the launch\n");
    fa4_destroy(ctx);
    return rc;
}
