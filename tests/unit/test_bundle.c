/* test_bundle.c - AOT bundles, JIT disabled, and the fetch log, against the fake CUDA driver
 * (run with LD_LIBRARY_PATH=build/fakecuda, as `make unit` does).
 *
 * The binary links build/tests/gen/test_bundle_kernels.c, which `fa4gen bundle
 * tests/unit/bundle_list.txt -o ...` wrote (real ptxas cubins in real fatbins), and
 * build/tests/gen/test_configs_kernels.c, which `fa4gen configs $(cat tests/unit/bundle_workload.txt)
 * | fa4gen bundle - -o ...` wrote; their constructors have registered them before main. Each case
 * checks where a kernel came from by what the fake driver was given (a fatbin or a bare cubin) and by
 * what reached the disk cache, not only by what the runtime reports. */
#include <cuda.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include "fa4.h"
#include "fa4gen.h"
#include "fake_cuda.h"
#include "testutil.h"

/* bundle_list.txt's kernels (the constructor registered the table), and bundle_workload.txt's */
extern const fa4_bundle fa4_bundle_test_bundle_kernels, fa4_bundle_test_configs_kernels;
#define IN_BUNDLE_SM90 "mha target=sm90a dtype=bf16 qk=64 ov=64 mask=causal persistent=1"
#define IN_BUNDLE_SM100 "mha target=sm100a dtype=bf16 qk=64 ov=64 mask=none"
#define NOT_IN_BUNDLE "mha target=sm90a dtype=bf16 qk=64 ov=64 mask=none"

static char cache_dir[] = "/tmp/fa4bundle.XXXXXX";
static FakeCuda *fk;
static FakeCudaResetFn fake_reset;
static int loaded_before; /* the fake counts module loads across contexts */
#define LOADED() (fk->modules_loaded - loaded_before)

static int setup(void **state)
{
    (void)state;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    FakeCudaStateFn get = lib ? (FakeCudaStateFn)dlsym(lib, "fake_cuda_state") : NULL;
    fake_reset = lib ? (FakeCudaResetFn)dlsym(lib, "fake_cuda_reset") : NULL;
    FakeCudaMapFn map = lib ? (FakeCudaMapFn)dlsym(lib, "fake_cuda_map") : NULL;
    /* the device memory test_mha_fwd_from_bundle's pointers lie in (the runtime asks the driver) */
    if (!get || !fake_reset || !map || map(0x7f0000000000ull, 1ull << 29, CU_MEMORYTYPE_DEVICE, 0, 0)) {
        fprintf(stderr, "test_bundle: libcuda.so.1 is not the fake driver; run with LD_LIBRARY_PATH=build/fakecuda\n");
        return -1;
    }
    fk = get();
    unsetenv("FA4GEN_DISABLE_JIT");
    unsetenv("FA4GEN_LOG");
    return temp_cache_dir(cache_dir);
}

static int teardown(void **state)
{
    (void)state;
    return remove_tree(cache_dir);
}

static int dir_entries(const char *path)
{
    DIR *d = opendir(path);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* A fresh context on a fake device of compute capability cc with its own empty cache folder. */
static fa4_ctx *ctx_on(int cc, int disable_jit, char *dir)
{
    char v[16];
    snprintf(v, sizeof v, "%d", cc);
    setenv("FAKE_CUDA_CC", v, 1);
    fake_reset();
    loaded_before = fk->modules_loaded;
    if (dir) {
        strcpy(dir, "/tmp/fa4bundle-d.XXXXXX"); /* a fresh name each time */
        assert_int_equal(temp_cache_dir(dir), 0);
    }
    fa4_options o = FA4_OPTIONS_INIT;
    o.cache_dir = dir ? dir : cache_dir;
    o.disable_jit = disable_jit;
    fa4_ctx *ctx = NULL;
    assert_int_equal(fa4_create(&ctx, &o), FA4_OK);
    return ctx;
}

static void must(fa4_ctx *ctx, fa4_status s, const char *what)
{
    if (s != FA4_OK)
        fail_msg("%s: %s: %s (fake driver: %d refused, last: %s)", what, fa4_status_string(s), fa4_last_error(ctx),
                 fk->n_refused, fk->refused);
}

/* The table fa4gen wrote: every entry's hash, symbol and config are the generator's own. */
static void test_table(void **state)
{
    (void)state;
    const fa4_bundle *b = &fa4_bundle_test_bundle_kernels;
    assert_int_equal(b->size, sizeof *b);
    assert_string_equal(b->generator, fa4gen_build_id());
    assert_string_equal(b->name, "test_bundle_kernels");
    assert_int_equal(b->n_kernels, 2);
    for (int i = 0; i < b->n_kernels; i++) {
        const fa4_bundle_kernel *e = &b->kernels[i];
        Config c;
        char err[256], canon[256], sym[64];
        assert_int_equal(config_parse_canonical(e->config, &c, err, sizeof err), 0);
        assert_int_equal(config_fill_defaults(&c, err, sizeof err), 0);
        config_canonical(&c, canon, sizeof canon);
        config_symbol(&c, sym, sizeof sym);
        assert_string_equal(canon, e->config);
        assert_string_equal(sym, e->symbol);
        assert_true(e->config_hash == config_hash(&c));
        assert_int_equal((uintptr_t)e->fatbin % 16, 0);
        uint32_t magic;
        memcpy(&magic, e->fatbin, 4);
        assert_true(magic == 0xBA55ED50u);
    }
    assert_int_equal(fa4_bundle_register(b), FA4_OK); /* twice: nothing happens */
    assert_string_equal(fa4_version(), FA4GEN_VERSION); /* one release: header, library, generator */
    assert_string_equal(fa4_version(), FA4_VERSION_STRING);
}

/* A kernel the bundle holds comes from it: the driver gets the fatbin, nothing is compiled
 * or written to the disk cache, on either target; one it lacks is compiled as before. */
static void test_bundle_before_jit(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4bundle-a.XXXXXX";
    const char *configs[2] = {IN_BUNDLE_SM90, IN_BUNDLE_SM100};
    const int ccs[2] = {90, 100};
    for (int i = 0; i < 2; i++) {
        fa4_ctx *ctx = ctx_on(ccs[i], 0, dir);
        fa4_kernel *k = NULL;
        fa4_kernel_stats st;
        must(ctx, fa4_get_kernel(ctx, configs[i], &k, &st), "fa4_get_kernel (bundled)");
        assert_int_equal(st.source, 3);
        assert_true(st.compile_ms == 0.0);
        assert_int_equal(fk->fatbins_loaded, 1);
        assert_int_equal(dir_entries(dir), 0);
        fa4_destroy(ctx);
        remove_tree(dir);
    }
    fa4_ctx *ctx = ctx_on(90, 0, dir);
    fa4_kernel *k = NULL;
    fa4_kernel_stats st;
    must(ctx, fa4_get_kernel(ctx, NOT_IN_BUNDLE, &k, &st), "fa4_get_kernel (not bundled)");
    assert_int_equal(st.source, 2);
    assert_int_equal(fk->fatbins_loaded, 0);
    assert_int_equal(LOADED(), 1);
    assert_int_equal(dir_entries(dir), 1);
    fa4_destroy(ctx);
    remove_tree(dir);
}

/* fa4_mha_fwd finds the bundle too: the config it derives for these shapes is in the list. */
static void test_mha_fwd_from_bundle(void **state)
{
    (void)state;
    fa4_ctx *ctx = ctx_on(90, 1, NULL);
    fa4_mha_args a = FA4_MHA_ARGS_INIT;
    a.q = a.k = a.v = (void *)(uintptr_t)0x7f0000000000ull;
    a.o = (void *)(uintptr_t)0x7f0010000000ull;
    /* 2048 query rows: past the short-d64 tiles (RT_SHORT_Q_ROWS; causal RT_SHORT_D64_CAUSAL_Q_ROWS), the plan's
     * 192-row tile, persistent (seqlen_k <= RT_PERSISTENT_SEQLEN_K); 8 heads, so the 128-row tiles (128) fill more
     * than half the SMs and the small-grid rule keeps out */
    a.batch = 1, a.seqlen_q = a.seqlen_k = 2048, a.heads_q = a.heads_kv = 8, a.qk_depth = a.ov_depth = 64;
    a.mask = FA4_MASK_CAUSAL;
    must(ctx, fa4_mha_fwd(ctx, &a, NULL), "fa4_mha_fwd (JIT disabled, bundled config)");
    assert_int_equal(fk->fatbins_loaded, 1);
    assert_int_equal(fk->n_launches, 1);
    a.qk_depth = a.ov_depth = 128; /* not bundled: refused before any launch */
    assert_int_equal(fa4_mha_fwd(ctx, &a, NULL), FA4_ERR_NO_KERNEL);
    assert_int_equal(fk->n_launches, 1);
    if (!strstr(fa4_last_error(ctx), "qk=128 ov=128")) fail_msg("message: %s", fa4_last_error(ctx));
    fa4_destroy(ctx);
}

/* The bundle `fa4gen configs | fa4gen bundle -` built for tests/unit/bundle_workload.txt (sm90a and
 * sm100a, d64, GQA 8/2, batch 1..2, seqlen_q and seqlen_k 1..4096, causal, with and without a split
 * workspace) serves every call of that workload with JIT disabled, on both targets: a grid of calls
 * through fa4_mha_fwd finds every kernel (split, cluster split and combine included) in it, with real
 * ptxas cubins loaded from real fatbins. A call outside the workload misses, naming both bundles. */
static void test_configs_bundle_replay(void **state)
{
    (void)state;
    static const int sqs[] = {1, 2, 3, 8, 15, 16, 17, 32, 33, 64, 65, 100, 128, 129, 200, 1000, 2048, 4096};
    static const int sks[] = {1, 2, 64, 65, 100, 500, 1024, 2048, 2049, 3000, 4096};
    const int ccs[2] = {90, 100};
    int calls = 0, combines = 0, splits = 0;
    for (int t = 0; t < 2; t++) {
        fa4_ctx *ctx = ctx_on(ccs[t], 1, NULL);
        for (size_t i = 0; i < sizeof sqs / sizeof sqs[0]; i++)
            for (size_t j = 0; j < sizeof sks / sizeof sks[0]; j++)
                for (int b = 1; b <= 2; b++)
                    for (int ws = 0; ws < 2; ws++) {
                        fa4_mha_args a = FA4_MHA_ARGS_INIT;
                        a.q = a.k = a.v = (void *)(uintptr_t)0x7f0000000000ull;
                        a.o = (void *)(uintptr_t)0x7f0010000000ull;
                        a.batch = b, a.seqlen_q = sqs[i], a.seqlen_k = sks[j], a.heads_q = 8, a.heads_kv = 2;
                        a.qk_depth = a.ov_depth = 64, a.mask = FA4_MASK_CAUSAL;
                        if (ws) a.workspace = (void *)(uintptr_t)0x7f0010000000ull, a.workspace_size = 1 << 27;
                        int before = fk->n_launches;
                        char cfg[512] = "";
                        fa4_mha_config(ctx, &a, cfg, sizeof cfg);
                        fa4_status st = fa4_mha_fwd(ctx, &a, NULL);
                        if (st)
                            fail_msg("sm_%d batch %d seqlen_q %d seqlen_k %d ws %d (%s): %s", ccs[t], b, sqs[i], sks[j], ws,
                                     cfg, fa4_last_error(ctx));
                        calls++, splits += strstr(cfg, " split=1") != NULL, combines += fk->n_launches - before == 2;
                        fake_reset();
                    }
        fa4_destroy(ctx);
    }
    assert_true(splits > 0 && combines > 0);
    print_message("    %d calls (%d split, %d with the combine kernel) from the %d kernels fa4gen configs listed: no "
                  "miss\n", calls, splits, combines, fa4_bundle_test_configs_kernels.n_kernels);
    /* outside: d128 */
    fa4_ctx *ctx = ctx_on(90, 1, NULL);
    fa4_mha_args a = FA4_MHA_ARGS_INIT;
    a.q = a.k = a.v = (void *)(uintptr_t)0x7f0000000000ull;
    a.o = (void *)(uintptr_t)0x7f0010000000ull;
    a.batch = 1, a.seqlen_q = 1, a.seqlen_k = 4096, a.heads_q = 8, a.heads_kv = 2, a.qk_depth = a.ov_depth = 128;
    a.mask = FA4_MASK_CAUSAL;
    assert_int_equal(fa4_mha_fwd(ctx, &a, NULL), FA4_ERR_NO_KERNEL);
    char want[256];
    snprintf(want, sizeof want, "'test_configs_kernels' (%d kernels, generator %s): no entry with this canonical config",
             fa4_bundle_test_configs_kernels.n_kernels, fa4gen_build_id());
    if (!strstr(fa4_last_error(ctx), want) || !strstr(fa4_last_error(ctx), "'test_bundle_kernels' (2 kernels"))
        fail_msg("message: %s", fa4_last_error(ctx));
    /* fa4_compile reads the bundle too: the ELF for the config's target out of its fatbin */
    void *cubin = NULL;
    size_t size = 0;
    fa4_kernel_stats st;
    must(ctx, fa4_compile_v2(ctx, fa4_bundle_test_configs_kernels.kernels[0].config, &cubin, &size, &st), "fa4_compile");
    assert_int_equal(st.source, 3);
    assert_true(size > 1000 && !memcmp(cubin, "\177ELF", 4));
    free(cubin);
    fa4_destroy(ctx);
}

/* JIT disabled (the option or FA4GEN_DISABLE_JIT=1): a miss is FA4_ERR_NO_KERNEL naming the
 * canonical config; nothing is generated, compiled, loaded or written. */
static void test_jit_disabled_miss(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4bundle-b.XXXXXX";
    for (int how = 0; how < 2; how++) {
        if (how) setenv("FA4GEN_DISABLE_JIT", "1", 1);
        fa4_ctx *ctx = ctx_on(90, !how, dir);
        fa4_kernel *k = NULL;
        assert_int_equal(fa4_get_kernel(ctx, NOT_IN_BUNDLE, &k, NULL), FA4_ERR_NO_KERNEL);
        assert_null(k);
        const char *msg = fa4_last_error(ctx);
        char searched[256];
        snprintf(searched, sizeof searched, "searched 2 bundles: 'test_bundle_kernels' (2 kernels, generator %s): no entry "
                 "with this canonical config", fa4gen_build_id());
        if (!strstr(msg, "mha target=sm90a dtype=bf16 qk=64 ov=64 bm=192 bn=128 group=1 stages=2 swizzle=128") ||
            !strstr(msg, how ? "FA4GEN_DISABLE_JIT" : "disable_jit") || !strstr(msg, searched))
            fail_msg("message: %s", msg);
        assert_int_equal(LOADED(), 0);
        assert_int_equal(dir_entries(dir), 0);
        void *cubin = NULL;
        size_t size = 0;
        assert_int_equal(fa4_compile(ctx, NOT_IN_BUNDLE, &cubin, &size), FA4_ERR_NO_KERNEL);
        assert_null(cubin);
        must(ctx, fa4_get_kernel(ctx, IN_BUNDLE_SM90, &k, NULL), "fa4_get_kernel (bundled, JIT disabled)");
        assert_int_equal(fk->fatbins_loaded, 1);
        fa4_destroy(ctx);
        remove_tree(dir);
        unsetenv("FA4GEN_DISABLE_JIT");
    }
    setenv("FA4GEN_DISABLE_JIT", "0", 1); /* "0" is off */
    fa4_ctx *ctx = ctx_on(90, 0, dir);
    fa4_kernel *k = NULL;
    must(ctx, fa4_get_kernel(ctx, NOT_IN_BUNDLE, &k, NULL), "FA4GEN_DISABLE_JIT=0");
    fa4_destroy(ctx);
    remove_tree(dir);
    unsetenv("FA4GEN_DISABLE_JIT");
}

/* A table from another generator version is never used, even with a matching hash, and the
 * miss says so; bad tables are refused with a message. */
static void test_other_generator(void **state)
{
    (void)state;
    static const unsigned char junk[16] = {0};
    static fa4_bundle_kernel e[1] = {{0, IN_BUNDLE_SM90, "fa4_mha_sm90a_0", junk, sizeof junk}};
    static const fa4_bundle old = {sizeof(fa4_bundle), "old", "0.0.1", 1, e};
    e[0].config_hash = fa4_bundle_test_bundle_kernels.kernels[0].config_hash;
    assert_int_equal(fa4_bundle_register(&old), FA4_OK);
    fa4_ctx *ctx = ctx_on(90, 1, NULL);
    fa4_kernel *k = NULL;
    assert_int_equal(fa4_get_kernel(ctx, NOT_IN_BUNDLE, &k, NULL), FA4_ERR_NO_KERNEL);
    if (!strstr(fa4_last_error(ctx), "'old' (1 kernel, generator 0.0.1): written by another fa4gen build, never used"))
        fail_msg("message: %s", fa4_last_error(ctx));
    fa4_destroy(ctx);
    /* The same release built from other generator sources: its kernels may differ, so it is not used. */
    static const fa4_bundle other_src = {sizeof(fa4_bundle), "other_src", FA4GEN_VERSION "+0000000000000000", 1, e};
    assert_int_equal(fa4_bundle_register(&other_src), FA4_OK);
    ctx = ctx_on(90, 1, NULL);
    assert_int_equal(fa4_get_kernel(ctx, NOT_IN_BUNDLE, &k, NULL), FA4_ERR_NO_KERNEL);
    if (!strstr(fa4_last_error(ctx), "'other_src' (1 kernel, generator " FA4GEN_VERSION "+0000000000000000): written by "
                "another fa4gen build"))
        fail_msg("message: %s", fa4_last_error(ctx));
    fa4_destroy(ctx);
    /* a bundle of another build that holds the very config is named as such */
    static char canon[256];
    static fa4_bundle_kernel e2[1] = {{0, canon, "fa4_mha_sm90a_0", junk, sizeof junk}};
    static const fa4_bundle stale = {sizeof(fa4_bundle), "stale", "0.0.2", 1, e2};
    Config c;
    char err[256];
    config_init(&c);
    assert_int_equal(config_apply_text(&c, NOT_IN_BUNDLE, err, sizeof err), 0);
    assert_int_equal(config_fill_defaults(&c, err, sizeof err), 0);
    config_canonical(&c, canon, sizeof canon);
    assert_int_equal(fa4_bundle_register(&stale), FA4_OK);
    ctx = ctx_on(90, 1, NULL);
    assert_int_equal(fa4_get_kernel(ctx, NOT_IN_BUNDLE, &k, NULL), FA4_ERR_NO_KERNEL);
    if (!strstr(fa4_last_error(ctx), "searched 5 bundles:") ||
        !strstr(fa4_last_error(ctx), "'stale' (1 kernel, generator 0.0.2): holds this config but was written by another "
                "fa4gen build, never used"))
        fail_msg("message: %s", fa4_last_error(ctx));
    fa4_destroy(ctx);

    assert_int_equal(fa4_bundle_register(NULL), FA4_ERR_INVALID_ARGUMENT);
    fa4_bundle bad = {sizeof(fa4_bundle) - 8, "short", FA4GEN_VERSION, 0, NULL};
    assert_int_equal(fa4_bundle_register(&bad), FA4_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fa4_last_error(NULL), "regenerate"));
    static const fa4_bundle_kernel no_fatbin[1] = {{1, "mha", "fa4_x", NULL, 0}};
    fa4_bundle empty = {sizeof(fa4_bundle), "nofatbin", FA4GEN_VERSION, 1, no_fatbin};
    assert_int_equal(fa4_bundle_register(&empty), FA4_ERR_INVALID_ARGUMENT);
}

/* FA4GEN_LOG=1: one line per fetch with the canonical config, the key, hit or miss, where
 * the code came from and the times. stderr goes to a file for the duration. */
static char *capture_fetches(void (*body)(void))
{
    char path[] = "/tmp/fa4bundle-log.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    body();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    size_t n = 0;
    FILE *f = fopen(path, "rb");
    char *text = calloc(1, 1 << 16);
    if (f) n = fread(text, 1, (1 << 16) - 1, f), fclose(f);
    text[n] = 0;
    unlink(path);
    return text;
}

static void fetch_four_ways(void)
{
    char dir[] = "/tmp/fa4bundle-c.XXXXXX";
    setenv("FA4GEN_LOG", "1", 1);
    fa4_ctx *ctx = ctx_on(90, 0, dir);
    fa4_kernel *k;
    must(ctx, fa4_get_kernel(ctx, IN_BUNDLE_SM90, &k, NULL), "bundle");
    must(ctx, fa4_get_kernel(ctx, IN_BUNDLE_SM90, &k, NULL), "memory");
    must(ctx, fa4_get_kernel(ctx, NOT_IN_BUNDLE, &k, NULL), "jit");
    fa4_destroy(ctx);
    fa4_options o = FA4_OPTIONS_INIT;
    o.cache_dir = dir;
    assert_int_equal(fa4_create(&ctx, &o), FA4_OK);
    must(ctx, fa4_get_kernel(ctx, NOT_IN_BUNDLE, &k, NULL), "disk");
    fa4_destroy(ctx);
    unsetenv("FA4GEN_LOG");
    remove_tree(dir);
}

static void test_fetch_log(void **state)
{
    (void)state;
    char *log = capture_fetches(fetch_four_ways);
    const fa4_bundle_kernel *b = &fa4_bundle_test_bundle_kernels.kernels[0];
    char want[512];
    snprintf(want, sizeof want, "fa4: fetch %s hit from bundle key=%016llx generate=", b->symbol,
             (unsigned long long)b->config_hash);
    const char *lines[] = {want, "hit from memory (built from bundle)", "miss from jit key=", "hit from disk key=",
                           "compile=0.0ms", "config='mha target=sm90a dtype=bf16 qk=64 ov=64 bm=192"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (!strstr(log, lines[i])) fail_msg("the log lacks '%s':\n%s", lines[i], log);
    int fetches = 0;
    for (const char *s = log; (s = strstr(s, "fa4: fetch ")); s++) fetches++;
    if (fetches != 4) fail_msg("%d fetch lines, expected 4:\n%s", fetches, log);
    free(log);
}

/* A JIT compile over 100 ms says so once per context (by default), naming the kernel and how to build it
 * ahead of time; FA4GEN_LOG=0 and fa4_options.verbose = -1 silence it; FA4GEN_LOG=1 logs fetches instead. */
static int notice_mode;
static void compile_two(void)
{
    char dir[] = "/tmp/fa4bundle-n.XXXXXX";
    if (notice_mode == 1) setenv("FA4GEN_LOG", "0", 1);
    fa4_ctx *ctx = ctx_on(90, 0, dir);
    if (notice_mode == 2) { /* a context of its own with verbose -1 */
        fa4_destroy(ctx);
        fa4_options o = FA4_OPTIONS_INIT;
        o.cache_dir = dir, o.verbose = -1;
        assert_int_equal(fa4_create(&ctx, &o), FA4_OK);
    }
    fa4_kernel *k;
    must(ctx, fa4_get_kernel(ctx, NOT_IN_BUNDLE, &k, NULL), "jit 1");
    must(ctx, fa4_get_kernel(ctx, "mha target=sm90a dtype=bf16 qk=64 ov=64 mask=none bn=64", &k, NULL), "jit 2");
    fa4_destroy(ctx);
    unsetenv("FA4GEN_LOG");
    remove_tree(dir);
}

static void test_compile_notice(void **state)
{
    (void)state;
    notice_mode = 0;
    char *log = capture_fetches(compile_two);
    const char *first = strstr(log, "fa4: compiled fa4_mha_sm90a_");
    if (!first || strstr(first + 1, "fa4: compiled ") || !strstr(log, " ms at first use (JIT") ||
        !strstr(log, "fa4gen configs ... | fa4gen bundle - -o kernels.c") || !strstr(log, "FA4GEN_LOG=0 silences this"))
        fail_msg("want one notice: '%s'", log);
    free(log);
    for (notice_mode = 1; notice_mode <= 2; notice_mode++) {
        log = capture_fetches(compile_two);
        if (strstr(log, "fa4: compiled")) fail_msg("mode %d: '%s'", notice_mode, log);
        free(log);
    }
}

/* ---------------------------------------------------------------- the CLI's bundle -o */

/* Runs "env fa4gen bundle ARGS" in dir; stderr in *err; the exit status. */
static int bundle_cli(const char *dir, const char *env, const char *args, char **err)
{
    char cmd[2048], here[512];
    assert_non_null(getcwd(here, sizeof here));
    snprintf(cmd, sizeof cmd, "cd %s && env %s %s/build/fa4gen bundle %s 2>&1 >/dev/null", dir, env, here, args);
    return run_capture(cmd, err);
}

static void expect_one_line(const char *out, const char *want)
{
    size_t n = strlen(out);
    if (!n || out[n - 1] != '\n' || strchr(out, '\n') != out + n - 1 || !strstr(out, want))
        fail_msg("expected one line holding '%s', got '%s'", want, out);
}

/* Refusals are one line with exit 2 and write nothing; a failing tool is exit 1 with its log
 * and writes nothing; a good list writes the source with a progress line per kernel. */
static void test_cli_bundle_c(void **state)
{
    (void)state;
    char dir[] = "/tmp/fa4bundle-cli.XXXXXX", path[256], *out = NULL;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/list", dir);
    FILE *f = fopen(path, "w");
    fputs("# one kernel\nmha target=sm90a dtype=bf16 qk=64 ov=64 mask=none\n", f);
    fclose(f);
    static const struct { const char *args, *want; } bad[] = {
        {"list", "-o FILE.c (a C source of compiled kernels) or -d DIR (PTX files) is required"},
        {"list -o k.c --jobs 0", "--jobs '0'"},
        {"list -o k.c --jobs", "--jobs: missing value"},
        {"list -o k.c --targets sm90a,sm90a", "named twice"},
        {"list -o k.c --targets sm80", "--targets 'sm80'"},
        {"list -o k.c --name 1x", "not a C identifier"},
        {"list -o k.c --depth 64", "'--depth' is not an option of this command"},
        {"list -o k.c -d out", "'-d' is not an option of this command"},
        {"-o k.c", "no configs"},
        {"-o k.c --config 'mha target=sm90a qk=72 ov=72'", "--config 'mha target=sm90a qk=72 ov=72':"},
        {"-o k.c --targets sm100a --config 'mha qk=256 ov=256'", "no config could be built for the --targets given; the "
                                                                  "first: --config 'mha qk=256 ov=256': for sm100a: depth: 256"},
        {"list -o k.c --targets sm90a --config 'mha qk=abc'", "--config 'mha qk=abc': qk: 'abc'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (bundle_cli(dir, "", bad[i].args, &out) != 2) fail_msg("'%s': not exit 2: %s", bad[i].args, out);
        expect_one_line(out, bad[i].want);
        free(out);
    }
    if (bundle_cli(dir, "FA4GEN_PTXAS=/bin/false", "list -o k.c", &out) != 1 || !strstr(out, "/bin/false failed"))
        fail_msg("a failing ptxas: %s", out);
    free(out);
    if (bundle_cli(dir, "FA4GEN_FATBINARY=/nonexistent", "list -o k.c", &out) != 1 || !strstr(out, "no fatbinary"))
        fail_msg("no fatbinary: %s", out);
    free(out);
    char ls[300], *listing = NULL;
    snprintf(ls, sizeof ls, "ls -A %s", dir);
    run_capture(ls, &listing);
    assert_string_equal(listing, "list\n"); /* nothing written by any of them */
    free(listing);
    /* two targets from one line, two at a time: two kernels, a progress line each */
    assert_int_equal(bundle_cli(dir, "", "list --targets sm90a,sm100a --jobs 2 --name two -o k.c", &out), 0);
    if (!strstr(out, "[1/2] fa4_mha_sm") || !strstr(out, "[2/2] fa4_mha_sm") || !strstr(out, "fa4_bundle_two"))
        fail_msg("progress: %s", out);
    free(out);
    snprintf(ls, sizeof ls, "grep -c 'target=sm100a\\|target=sm90a' %s/k.c", dir);
    run_capture(ls, &listing);
    assert_string_equal(listing, "4\n"); /* each config in a comment and in the table */
    free(listing);
    /* --targets: a config a target cannot build is skipped with one note, the rest is built */
    assert_int_equal(bundle_cli(dir, "", "list --targets sm90a,sm100a --config 'mha qk=256 ov=256' --jobs 2 -o k.c", &out),
                     0);
    if (!strstr(out, "--config 'mha qk=256 ov=256': skipped for sm100a: depth: 256") || !strstr(out, "[3/3]"))
        fail_msg("--targets with d256: %s", out);
    free(out);
    /* a list from standard input */
    assert_int_equal(bundle_cli(dir, "", "- --name piped -o p.c < list", &out), 0);
    if (!strstr(out, "[1/1] fa4_mha_sm90a_") || !strstr(out, "fa4_bundle_piped")) fail_msg("stdin: %s", out);
    free(out);
    assert_int_equal(bundle_cli(dir, "", "- -o p.c < /dev/null", &out), 2);
    expect_one_line(out, "no configs");
    free(out);
    remove_tree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),           cmocka_unit_test(test_bundle_before_jit),
        cmocka_unit_test(test_mha_fwd_from_bundle), cmocka_unit_test(test_jit_disabled_miss),
        cmocka_unit_test(test_fetch_log),       cmocka_unit_test(test_other_generator),
        cmocka_unit_test(test_cli_bundle_c),    cmocka_unit_test(test_configs_bundle_replay),
        cmocka_unit_test(test_compile_notice),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
