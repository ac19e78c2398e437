/* fuzz_rt.h - shared by the runtime harnesses (fuzz_cache, fuzz_args): libfa4rt built into the
 * harness, the fake CUDA driver (build/fakecuda/libcuda.so.1 through LD_LIBRARY_PATH, as make
 * fuzz-ci runs it) and a compiler stand-in.
 *
 * The harness links with -Wl,--wrap=rt_compile: api.c's call to rt_compile lands in
 * __wrap_rt_compile below, which makes a minimal cubin (an ELF header the fake loader accepts,
 * for the plan's SM, holding the kernel's name) instead of running ptxas, so one input costs
 * microseconds. What is under test is the runtime's reading of files and arguments, not the
 * compiler; tests/unit/test_launch.c covers real cubins. */
#ifndef FA4_FUZZ_RT_H
#define FA4_FUZZ_RT_H
#include <dlfcn.h>

#include "fake_cuda.h"
#include "fuzz_common.h"
#include "rt_internal.h"

static FakeCuda *fz_fake;
static FakeCudaResetFn fz_fake_reset;
static FakeCudaMapFn fz_fake_map;
static FakeCudaUnmapFn fz_fake_unmap;
static FakeCudaEncodedFn fz_fake_encoded;
static CUresult (*fz_fake_init)(unsigned);

/* The fake driver's records; aborts unless libcuda.so.1 is the fake. */
static void fz_fake_open(void)
{
    if (fz_fake) return;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    FakeCudaStateFn get = lib ? (FakeCudaStateFn)dlsym(lib, "fake_cuda_state") : NULL;
    fz_fake_reset = lib ? (FakeCudaResetFn)dlsym(lib, "fake_cuda_reset") : NULL;
    fz_fake_init = lib ? (CUresult(*)(unsigned))dlsym(lib, "cuInit") : NULL;
    fz_fake_map = lib ? (FakeCudaMapFn)dlsym(lib, "fake_cuda_map") : NULL;
    fz_fake_unmap = lib ? (FakeCudaUnmapFn)dlsym(lib, "fake_cuda_unmap") : NULL;
    fz_fake_encoded = lib ? (FakeCudaEncodedFn)dlsym(lib, "fake_cuda_encoded") : NULL;
    if (!get || !fz_fake_reset || !fz_fake_init || !fz_fake_map || !fz_fake_unmap || !fz_fake_encoded) {
        fprintf(stderr, "fuzz: libcuda.so.1 is not the fake driver; run with LD_LIBRARY_PATH=build/fakecuda "
                        "(make fuzz-ci does)\n");
        abort();
    }
    fz_fake = get();
}

/* Makes the fake device compute capability cc (90 or 100): the fake reads it at cuInit. */
static void fz_fake_device(int cc)
{
    char v[16];
    snprintf(v, sizeof v, "%d", cc);
    setenv("FAKE_CUDA_CC", v, 1);
    fz_fake_init(0);
    fz_fake_reset();
}

enum { FZ_ELF_HEAD = 64, FZ_SHDR = 64, EM_CUDA_ = 190 };

/* Bytes of the stand-in cubin for plan p (malloc'd; *size set). Deterministic in p's symbol and SM. */
static void *fz_cubin(const Plan *p, size_t *size)
{
    int sm = atoi(p->target->ptx_target + 3); /* "sm_90a" -> 90 */
    size_t name = strlen(p->symbol), shoff = (FZ_ELF_HEAD + 1 + name + 1 + 7) & ~(size_t)7;
    *size = shoff + FZ_SHDR;
    unsigned char *b = calloc(1, *size);
    if (!b) abort();
    memcpy(b, "\177ELF", 4);
    b[4] = 2, b[5] = 1, b[6] = 1, b[8] = 8; /* 64-bit, little-endian, ELF ABI version 8 (SM in e_flags 8..15) */
    uint16_t machine = EM_CUDA_, shentsize = FZ_SHDR, shnum = 1;
    uint32_t flags = (uint32_t)sm << 8;
    uint64_t off = shoff;
    memcpy(b + 0x12, &machine, 2);
    memcpy(b + 0x28, &off, 8);
    memcpy(b + 0x30, &flags, 4);
    memcpy(b + 0x3A, &shentsize, 2);
    memcpy(b + 0x3C, &shnum, 2);
    memcpy(b + FZ_ELF_HEAD + 1, p->symbol, name); /* a whole string: NUL on both sides */
    return b;
}

fa4_status __real_rt_compile(fa4_ctx *ctx, const Plan *p, const char *ptx, size_t len, void **cubin, size_t *size);
fa4_status __wrap_rt_compile(fa4_ctx *ctx, const Plan *p, const char *ptx, size_t len, void **cubin, size_t *size);
fa4_status __wrap_rt_compile(fa4_ctx *ctx, const Plan *p, const char *ptx, size_t len, void **cubin, size_t *size)
{
    (void)ctx;
    FUZZ_CHECK(ptx && len > 0 && strlen(ptx) == len, "generated PTX of %s", p->canonical);
    *cubin = fz_cubin(p, size);
    return FA4_OK;
}

/* A context on the fake device: target t, disk cache in dir (NULL: memory only). */
static fa4_ctx *fz_ctx(fa4_target t, const char *dir)
{
    fa4_options o = FA4_OPTIONS_INIT;
    o.target = t;
    o.cache_dir = dir;
    o.disk_cache = dir != NULL;
    fa4_ctx *ctx = NULL;
    if (fa4_create(&ctx, &o) != FA4_OK || rt_driver(ctx) != FA4_OK) {
        fprintf(stderr, "fuzz: context: %s\n", fa4_last_error(ctx));
        abort();
    }
    return ctx;
}
#endif
