/* api.c - contexts, config text, and the kernel pipeline (generate -> disk
 * cache / compile -> load -> memory cache). Messages: error.c.
 *
 * Guarantees: every public entry point returns a status and, on failure,
 * leaves one message for this thread on the context; nothing exits or
 * aborts. All state lives in the fa4_ctx; the only other state is the
 * thread-local message of a failed fa4_create (there is no context yet).
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_internal.h"
#include "score_mod.h"

static const char *const status_text[FA4_NUM_STATUS] = {
    [FA4_OK] = "success",
    [FA4_ERR_INVALID_ARGUMENT] = "invalid argument",
    [FA4_ERR_UNSUPPORTED] = "unsupported configuration, dtype, depth, target or GPU",
    [FA4_ERR_NO_DRIVER] = "the CUDA driver (libcuda.so.1) could not be loaded or initialised",
    [FA4_ERR_NO_DEVICE] = "no CUDA device, or the chosen device does not exist",
    [FA4_ERR_COMPILE] = "compilation failed (PTX to cubin, or a score_mod's CUDA C)",
    [FA4_ERR_CUDA] = "a CUDA driver call failed",
    [FA4_ERR_CACHE] = "the kernel cache could not be used",
    [FA4_ERR_OUT_OF_MEMORY] = "out of memory",
    [FA4_ERR_INTERNAL] = "internal error in fa4gen (please report the message)",
    [FA4_ERR_NO_KERNEL] = "JIT is disabled and no linked bundle holds the kernel",
};

_Static_assert(sizeof FA4_VERSION_STRING == sizeof FA4GEN_VERSION, "fa4.h and the generator name one version");

const char *fa4_version(void) { return FA4_VERSION_STRING; }

const char *fa4_status_string(fa4_status s)
{
    if ((unsigned)s >= FA4_NUM_STATUS) return "unknown status";
    return status_text[s];
}

/* ---------------------------------------------------------------- contexts */

/* Copy min(size, sizeof) of the caller's options over the defaults, so a
 * caller built against an older, shorter fa4_options keeps working. */
static fa4_status read_options(const fa4_options *in, fa4_options *out)
{
    const fa4_options def = FA4_OPTIONS_INIT;
    *out = def;
    if (!in) return FA4_OK;
    if (in->size < offsetof(fa4_options, version) + sizeof in->version)
        return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT,
                       "opt->size: %zu is too small; initialise options with FA4_OPTIONS_INIT", in->size);
    memcpy(out, in, in->size < sizeof *out ? in->size : sizeof *out);
    out->size = sizeof *out;
    if (in->version == 0)
        return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "opt->version: 0; initialise options with FA4_OPTIONS_INIT");
    if (out->device < 0)
        return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "opt->device: %d; use a device ordinal >= 0", out->device);
    if ((unsigned)out->target > FA4_TARGET_SM103A)
        return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "opt->target: %d is not a fa4_target", (int)out->target);
    if (out->cache_dir && out->cache_dir[0] != '/')
        return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT,
                       "opt->cache_dir: '%s' is relative; give an absolute path (the cache never depends on the "
                       "working directory)", out->cache_dir);
    return FA4_OK;
}

fa4_status fa4_create(fa4_ctx **pctx, const fa4_options *opt)
{
    rt_clear_create_error();
    if (!pctx) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "ctx: NULL; pass the address of a fa4_ctx pointer");
    *pctx = NULL;
    fa4_options o;
    fa4_status s = read_options(opt, &o);
    if (s) return s;
    fa4_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return rt_fail(NULL, FA4_ERR_OUT_OF_MEMORY, "fa4_create: out of memory");
    ctx->opt = o;
    ctx->device_target = -1;
    atomic_init(&ctx->drv_state, LIB_UNTRIED);
    atomic_init(&ctx->tmp_counter, 0);
    atomic_init(&ctx->noticed, o.verbose < 0); /* verbose -1: no compile notice */
    ctx->opt.verbose = o.verbose > 0;
    if (pthread_key_create(&ctx->err_key, NULL)) {
        free(ctx);
        return rt_fail(NULL, FA4_ERR_OUT_OF_MEMORY, "fa4_create: no thread-specific key left");
    }
    pthread_mutex_init(&ctx->mu, NULL);
    pthread_mutex_init(&ctx->err_mu, NULL);
    if (o.cache_dir) {
        if (strlen(o.cache_dir) >= sizeof ctx->cache_dir) {
            fa4_destroy(ctx);
            return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "opt->cache_dir: longer than %zu characters",
                           sizeof ctx->cache_dir - 1);
        }
        snprintf(ctx->cache_dir, sizeof ctx->cache_dir, "%s", o.cache_dir);
    }
    ctx->opt.cache_dir = NULL; /* the caller's string may not outlive the context */
    rt_cache_resolve_dir(ctx);
    const char *no_jit = getenv("FA4GEN_DISABLE_JIT"), *log = getenv("FA4GEN_LOG");
    const char *remember = getenv("FA4GEN_REMEMBER_BUFFERS");
    ctx->no_jit = ctx->opt.disable_jit || (no_jit && no_jit[0] && strcmp(no_jit, "0"));
    /* exact checks unless the caller opts into the pointer memo (issue 26: a freed, reused address) */
    ctx->recheck_buffers = !(ctx->opt.remember_buffers || (remember && remember[0] && strcmp(remember, "0")));
    if (log && log[0] && strcmp(log, "0")) ctx->opt.verbose = 1;
    *pctx = ctx;
    return FA4_OK;
}

void fa4_destroy(fa4_ctx *ctx)
{
    if (!ctx) return;
    rt_mha_memo_free(ctx);
    rt_map_free(ctx, &ctx->kernels);
    rt_sched_close(ctx);
    rt_driver_close(ctx);
    if (ctx->jl.lib) dlclose(ctx->jl.lib);
    for (size_t i = 0; i < ctx->n_err_bufs; i++) free(ctx->err_bufs[i]);
    free(ctx->err_bufs);
    pthread_key_delete(ctx->err_key);
    pthread_mutex_destroy(&ctx->mu);
    pthread_mutex_destroy(&ctx->err_mu);
    free(ctx);
}

/* ---------------------------------------------------------------- config text */

fa4_status rt_parse_config_given(fa4_ctx *ctx, const char *text, Config *c, ConfigGiven *g, const char *what)
{
    char err[256];
    memset(g, 0, sizeof *g);
    if (config_give_text(c, g, text, err, sizeof err)) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %s", what, err);
    return FA4_OK;
}

fa4_status rt_parse_config(fa4_ctx *ctx, const char *text, Config *c, const char *what)
{
    ConfigGiven g;
    return rt_parse_config_given(ctx, text, c, &g, what);
}

/* ---------------------------------------------------------------- the pipeline */

fa4_status rt_plan(fa4_ctx *ctx, const Config *c, Plan *p, fa4_status config_err)
{
    char err[512];
    /* plan_make fills defaults and checks: its failures are the caller's config. */
    if (plan_make(c, p, err, sizeof err)) return rt_fail(ctx, config_err, "config: %s", err);
    return FA4_OK;
}

/* A miss with JIT disabled: the message names the kernel, every bundle searched and why each missed. */
static fa4_status no_kernel(fa4_ctx *ctx, const Plan *p)
{
    char searched[3072];
    rt_bundle_explain_miss(p, searched, sizeof searched);
    return rt_fail(ctx, FA4_ERR_NO_KERNEL, "JIT is disabled (%s) and no linked bundle holds '%s' (%s, generator %s); "
                   "%s. Add this config to the bundle's list (fa4gen configs lists every config a workload needs)",
                   ctx->opt.disable_jit ? "fa4_options.disable_jit" : "FA4GEN_DISABLE_JIT", p->canonical, p->symbol,
                   fa4gen_build_id(), searched);
}

/* A JIT compile is the first call's cost; one that takes longer than this says so (compile_notice). */
#define RT_NOTICE_MS 100.0

/* Once per context, unless FA4GEN_LOG=0 or fa4_options.verbose < 0 (verbose > 0: the fetch log says it
 * already), one line on stderr: which kernel took how long to compile, and how to have it ahead of time. */
static void compile_notice(fa4_ctx *ctx, const Plan *p, const fa4_kernel_stats *st)
{
    double ms = st->generate_ms + st->compile_ms;
    const char *log = getenv("FA4GEN_LOG");
    if (ms <= RT_NOTICE_MS || ctx->opt.verbose || (log && !strcmp(log, "0"))) return;
    if (atomic_exchange(&ctx->noticed, 1)) return;
    fprintf(stderr, "fa4: compiled %s in %.0f ms at first use (JIT%s; this context reports no more); to build kernels "
            "ahead of time: fa4gen configs ... | fa4gen bundle - -o kernels.c, then link kernels.c (or "
            "fa4.load_bundle); FA4GEN_LOG=0 silences this, FA4GEN_LOG=1 logs every fetch\n", p->symbol, ms,
            ctx->disk_ok ? ", kept in the disk cache for later runs" : "");
}

/* Generate (with the score_mod's PTX when the config has one) and compile. */
static fa4_status generate_compile(fa4_ctx *ctx, const Config *c, const RtMod *mod, Plan *p, void **cubin,
                                   size_t *size, fa4_kernel_stats *st)
{
    char err[512], *ptx = NULL, *mod_ptx = NULL;
    size_t len = 0;
    double t0 = rt_now_ms();
    fa4_status s = mod ? rt_mod_ptx(ctx, mod, p->target, &mod_ptx) : FA4_OK;
    if (s) return s;
    if (fa4gen_generate_mod(c, mod_ptx, mod ? mod->link : 0, p, &ptx, &len, err, sizeof err)) {
        free(ptx);
        free(mod_ptx);
        /* a mod the splice cannot take is the caller's; anything else is ours */
        return rt_fail(ctx, !strncmp(err, "score_mod:", 10) ? FA4_ERR_COMPILE : FA4_ERR_INTERNAL, "generate '%s': %s",
                       p->canonical, err);
    }
    st->generate_ms += rt_now_ms() - t0;
    t0 = rt_now_ms();
    if (mod && mod->link == MOD_LINK) s = rt_compile_linked(ctx, p, ptx, len, mod_ptx, cubin, size);
    else s = rt_compile(ctx, p, ptx, len, cubin, size);
    free(ptx);
    free(mod_ptx);
    st->compile_ms = rt_now_ms() - t0;
    return s;
}

fa4_status rt_build_cubin(fa4_ctx *ctx, const Config *c, const char *mod_src, Plan *p, void **cubin, size_t *size,
                          fa4_kernel_stats *st, uint64_t *key)
{
    char key_text[RT_KEY_TEXT_MAX];
    if (ctx->no_jit) return no_kernel(ctx, p);
    double t0 = rt_now_ms();
    RtMod mod;
    fa4_status s = c->score_mod ? rt_mod_prepare(ctx, c, mod_src, &mod) : FA4_OK;
    if (s) return s;
    s = rt_cache_key(ctx, p, c->score_mod ? mod.user_code : "none", key_text, sizeof key_text, key);
    if (s) return s;
    st->generate_ms += rt_now_ms() - t0;
    if (rt_disk_get(ctx, key_text, *key, cubin, size)) {
        st->source = SRC_DISK;
        return FA4_OK;
    }
    s = generate_compile(ctx, c, c->score_mod ? &mod : NULL, p, cubin, size, st);
    if (s) return s;
    st->source = SRC_JIT;
    compile_notice(ctx, p, st);
    rt_disk_put(ctx, key_text, *key, *cubin, *size);
    return FA4_OK;
}

struct fa4_kernel *rt_kernel_lookup(fa4_ctx *ctx, const char *key, uint64_t hash)
{
    return rt_kernel_lookup_mod(ctx, key, hash, NULL);
}

struct fa4_kernel *rt_kernel_lookup_mod(fa4_ctx *ctx, const char *key, uint64_t hash, const char *mod_src)
{
    pthread_mutex_lock(&ctx->mu);
    struct fa4_kernel *k = rt_map_find(&ctx->kernels, key, hash, mod_src);
    pthread_mutex_unlock(&ctx->mu);
    if (k && ctx->opt.verbose) {
        fa4_kernel_stats st = {0};
        rt_log_fetch(ctx, k, 1, &st);
    }
    return k;
}

void rt_kernel_free(struct fa4_kernel *k)
{
    if (!k) return;
    free(k->key);
    free(k->mod_src);
    free(k);
}

static void unload(fa4_ctx *ctx, CUmodule m)
{
    int pushed;
    if (rt_ctx_enter(ctx, &pushed) == FA4_OK) {
        ctx->drv.ModuleUnload(m);
        rt_ctx_leave(ctx, pushed);
    }
}

fa4_status rt_kernel_build(fa4_ctx *ctx, const char *key, uint64_t hash, const Config *c, const char *mod_src,
                           struct fa4_kernel **out, fa4_kernel_stats *st, fa4_status config_err)
{
    struct fa4_kernel *k = calloc(1, sizeof *k);
    if (k) {
        k->key = strdup(key);
        k->mod_src = mod_src ? strdup(mod_src) : NULL; /* the memory key holds the whole source (rt_map_find) */
    }
    if (!k || !k->key || (mod_src && !k->mod_src)) {
        rt_kernel_free(k);
        return rt_fail(ctx, FA4_ERR_OUT_OF_MEMORY, "kernel: out of memory");
    }
    k->key_hash = hash;
    void *cubin = NULL;
    size_t size = 0;
    double t0 = rt_now_ms();
    fa4_status s = rt_plan(ctx, c, &k->plan, config_err);
    st->generate_ms = rt_now_ms() - t0;
    /* a linked bundle first: it needs no generator, compiler or disk. Never for a score_mod: a
     * bundle holds no user code, and its key would name the source only by mod='s 64-bit FNV. */
    const fa4_bundle_kernel *bk = s || c->score_mod ? NULL : rt_bundle_find(&k->plan, &k->bundle);
    const void *image = NULL;
    if (bk) {
        image = bk->fatbin;
        k->source = SRC_BUNDLE;
        k->code_key = bk->config_hash;
    } else if (!s && !(s = rt_build_cubin(ctx, c, mod_src, &k->plan, &cubin, &size, st, &k->code_key))) {
        image = cubin;
        k->source = (KernelSource)st->source;
    }
    if (s == FA4_OK) {
        t0 = rt_now_ms();
        s = rt_load(ctx, &k->plan, image, &k->module, &k->fn);
        st->load_ms = rt_now_ms() - t0;
    }
    free(cubin);
    if (s) {
        rt_kernel_free(k);
        return s;
    }
    st->source = (int)k->source;
    if (ctx->opt.verbose) rt_log_fetch(ctx, k, 0, st);
    pthread_mutex_lock(&ctx->mu);
    struct fa4_kernel *in = rt_map_insert(&ctx->kernels, k);
    pthread_mutex_unlock(&ctx->mu);
    if (!in) {
        unload(ctx, k->module);
        rt_kernel_free(k);
        return rt_fail(ctx, FA4_ERR_OUT_OF_MEMORY, "kernel cache: out of memory");
    }
    if (in != k) { /* another thread built the same kernel first; keep one */
        unload(ctx, k->module);
        rt_kernel_free(k);
    }
    *out = in;
    return FA4_OK;
}

/* ---------------------------------------------------------------- public kernels */

static void base_config(const fa4_ctx *ctx, Config *c)
{
    config_init(c);
    if (ctx->opt.target != FA4_TARGET_AUTO) c->target = rt_target_of(ctx->opt.target);
}

/* A linked bundle's cubin for p: the ELF for p's target out of the entry's fatbin, copied. 1 found, 0 not
 * (no entry, a score_mod, or no uncompressed ELF for the target in it), -1 out of memory. */
static int bundle_cubin(const Config *c, const Plan *p, void **cubin, size_t *size, const char **name)
{
    const fa4_bundle_kernel *bk = c->score_mod ? NULL : rt_bundle_find(p, name);
    const void *elf;
    size_t len;
    if (!bk || rt_fatbin_cubin(bk->fatbin, bk->fatbin_size, p->target->sm_major * 10 + p->target->sm_minor, &elf,
                               &len))
        return 0;
    if (!(*cubin = malloc(len))) return -1;
    memcpy(*cubin, elf, len);
    *size = len;
    return 1;
}

fa4_status fa4_compile_v2(fa4_ctx *ctx, const char *config, void **cubin, size_t *size, fa4_kernel_stats *stats)
{
    if (!ctx) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "ctx: NULL");
    if (!config) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "config: NULL");
    if (!cubin || !size) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: NULL", cubin ? "size" : "cubin");
    *cubin = NULL;
    *size = 0;
    fa4_kernel_stats st = {0};
    double t0 = rt_now_ms();
    Config c;
    base_config(ctx, &c);
    fa4_status s = rt_parse_config(ctx, config, &c, "config");
    if (s) return s;
    Plan *p = malloc(sizeof *p);
    if (!p) return rt_fail(ctx, FA4_ERR_OUT_OF_MEMORY, "plan: out of memory");
    uint64_t key;
    s = rt_plan(ctx, &c, p, FA4_ERR_INVALID_ARGUMENT);
    st.generate_ms = rt_now_ms() - t0;
    const char *bundle = NULL;
    int in_bundle = s ? 0 : bundle_cubin(&c, p, cubin, size, &bundle);
    if (in_bundle < 0) s = rt_fail(ctx, FA4_ERR_OUT_OF_MEMORY, "compile: out of memory");
    if (in_bundle > 0) {
        st.source = SRC_BUNDLE;
        key = p->hash;
    } else if (!s) {
        s = rt_build_cubin(ctx, &c, NULL, p, cubin, size, &st, &key);
    }
    if (!s && ctx->opt.verbose)
        rt_log(ctx, "compile %s key=%016llx %s%s%s generate=%.2fms compile=%.1fms", p->canonical,
               (unsigned long long)key, st.source == SRC_BUNDLE ? "bundle hit (" : st.source == SRC_DISK ? "disk hit"
               : "jit miss", in_bundle > 0 ? bundle : "", in_bundle > 0 ? ")" : "", st.generate_ms, st.compile_ms);
    free(p);
    st.total_ms = rt_now_ms() - t0;
    if (stats) *stats = st;
    return s;
}

void fa4_forget_buffers(fa4_ctx *ctx)
{
    if (ctx) rt_forget_buffers(ctx);
}

fa4_status fa4_compile(fa4_ctx *ctx, const char *config, void **cubin, size_t *size)
{
    return fa4_compile_v2(ctx, config, cubin, size, NULL);
}

fa4_status fa4_kernel_get_info(const fa4_kernel *k, fa4_kernel_info *info)
{
    if (!k || !info) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "%s: NULL", k ? "info" : "k");
    if (info->size < sizeof(size_t))
        return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "info->size: %zu; initialise with FA4_KERNEL_INFO_INIT",
                       info->size);
    const Plan *p = &k->plan;
    fa4_kernel_info v = {sizeof v, p->canonical, p->symbol, (void *)k->fn, p->threads, p->smem_launch,
                         {p->cluster[0], p->cluster[1], p->cluster[2]}, p->n_params};
    size_t n = info->size < sizeof v ? info->size : sizeof v; /* older, shorter structs keep working */
    memcpy(info, &v, n);
    info->size = n;
    return FA4_OK;
}

fa4_status fa4_get_kernel(fa4_ctx *ctx, const char *config, fa4_kernel **kp, fa4_kernel_stats *stats)
{
    double t0 = rt_now_ms();
    if (!ctx) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "ctx: NULL");
    if (!config) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "config: NULL");
    if (!kp) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "k: NULL");
    *kp = NULL;
    fa4_kernel_stats st = {0};
    fa4_status s = rt_driver(ctx);
    if (s) return s;
    /* The key names the target the text is read against, then the text. */
    TargetId t = TARGET_SM90A;
    if (ctx->opt.target == FA4_TARGET_AUTO && (s = rt_device_target(ctx, &t))) return s;
    if (ctx->opt.target != FA4_TARGET_AUTO) t = rt_target_of(ctx->opt.target);
    char key[640];
    int kn = snprintf(key, sizeof key, "%s|%s", target_name[t], config);
    if (kn < 0 || (size_t)kn >= sizeof key)
        return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "config: text is longer than %zu characters", sizeof key - 8);
    uint64_t hash = rt_fnv1a(key, (size_t)kn, RT_FNV_SEED);
    fa4_kernel *k = rt_kernel_lookup(ctx, key, hash);
    if (!k) {
        Config c;
        config_init(&c);
        c.target = t;
        if ((s = rt_parse_config(ctx, config, &c, "config"))) return s;
        if ((s = rt_check_target(ctx, c.target))) return s;
        if ((s = rt_kernel_build(ctx, key, hash, &c, NULL, &k, &st, FA4_ERR_INVALID_ARGUMENT))) return s;
    }
    st.total_ms = rt_now_ms() - t0;
    if (stats) *stats = st;
    *kp = k;
    return FA4_OK;
}
