/* cli_tools.c - `fa4gen configs` and `fa4gen cache`: the CLI's front ends of fa4_mha_configs_for and of
 * the cache tools (runtime/fa4.h). They link libfa4rt, which opens the CUDA driver only when asked to
 * (neither command does, but for the SM count of a GPU of the target when one is there), so the CLI
 * keeps running on machines without a GPU.
 *
 * Exit status as main.c's: 0 ok, 1 a failure (the cache folder refused, out of memory), 2 invalid input
 * (one line naming the option, the value and what is allowed).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_tools.h"
#include "fa4.h"

/* ---------------------------------------------------------------- configs */

const char cli_usage_configs[] =
    "usage: fa4gen configs [options]   (pipe it: fa4gen configs ... | fa4gen bundle - -o kernels.c)\n"
    "\n"
    "Prints every canonical config fa4_mha_fwd can pick for the calls described (one per line, each after a\n"
    "'#' line naming one call that needs it), the split-KV combine kernel included, so that a bundle of them\n"
    "never misses at run time with JIT disabled. The config a call needs depends on its shape (up to seqlen_k\n"
    "2048 sm90a runs causal persistent, full d128 with 128-key blocks and d64 of at most 256 query rows with\n"
    "smaller tiles; decode shapes take the split kernel, the split count and sm90a's cluster split depend on\n"
    "batch, heads, kv length and SM count): the runtime's own rules are walked at\n"
    "their breakpoints (fa4_mha_configs_for). Calls no kernel serves (d256 on sm100a, e4m3 on sm90a) are\n"
    "skipped with one note per target and reason on stderr. Lists are comma-separated; a range is A..B or N.\n"
    "\n"
    "  --targets T,T       sm90a, sm100a, sm103a (default: sm90a and sm100a)\n"
    "  --sm-counts N,N     SM counts of the GPUs the bundle is for (default: a GPU of the target here, else\n"
    "                      132 for sm90a (H100 SXM, H200), 148 for sm100a (B200) and sm103a (B300)); they move\n"
    "                      the split picks:\n"
    "                      an H100 PCIe has 114\n"
    "  --dtype T,T         bf16, fp16, e4m3 (default bf16)\n"
    "  --head-dims D,D     head dims (qk = ov), or QK:OV such as 192:128 (default 128)\n"
    "  --groups G,G        query heads per kv head (default 1)\n"
    "  --heads-kv A..B     kv heads of a call, after any tensor parallelism (default 1..128)\n"
    "  --masks M,M         none, causal (default causal)\n"
    "  --window L,R        a sliding-window mask too (L, R as fa4_mha_args; may be given again)\n"
    "  --batch A..B        batch sizes, varlen: sequences (default 1..256)\n"
    "  --seqlen A..B       seqlen_q and seqlen_k (default 1..131072)\n"
    "  --seqlen-q A..B     seqlen_q alone (varlen: max_seqlen_q)\n"
    "  --seqlen-k A..B     seqlen_k alone (varlen: a sequence's kv length; paged: max_pages x page_size)\n"
    "  --decode            decode steps too: seqlen_q 1..16 with any seqlen_k\n"
    "  --decode-q N        decode steps of 1..N queries (implies --decode)\n"
    "  --varlen            varlen calls too (cu_seqlens)\n"
    "  --paged P,P         paged KV calls too, pages of P rows (with --varlen: varlen q over paged KV too)\n"
    "  --no-dense          no calls with dense tensors (only --varlen, --paged)\n"
    "  --sink 0|1|both     calls with a sink (default 0)\n"
    "  --kv-early 0|1|both calls with fa4_mha_args.kv_early (default 0)\n"
    "  --workspace 0|1|both calls that give a split workspace (default both)\n"
    "  --num-splits N      fa4_mha_args.num_splits of every call (default 0: the runtime picks)\n"
    "  --tuning TEXT       fa4_mha_args.config of every call (tuning words: 'bm=128 stages=3')\n"
    "\n"
    "Exit status: 0 when at least one config is listed, 2 for invalid options or when no kernel serves\n"
    "any call described, 1 on other failures. Every option takes its value after a space or '='.\n";

const char *const cli_configs_options[] = {
    "--targets", "--sm-counts", "--dtype",  "--head-dims", "--groups",   "--heads-kv",  "--masks",
    "--window",  "--batch",     "--seqlen", "--seqlen-q",  "--seqlen-k", "--decode",    "--decode-q",
    "--varlen",  "--paged",     "--no-dense", "--sink",    "--kv-early", "--workspace", "--num-splits",
    "--tuning",  NULL,
};

int cli_configs_flag_alone(const char *a)
{
    return !strcmp(a, "--decode") || !strcmp(a, "--varlen") || !strcmp(a, "--no-dense");
}

enum { LIST = 64 };

typedef struct {
    fa4_workload w;
    fa4_target targets[3];
    int sm[LIST], qk[LIST], ov[LIST], groups[LIST], pages[LIST], windows[2 * LIST];
    fa4_dtype dtypes[LIST];
    fa4_mask masks[LIST];
    int n_windows, varlen, no_dense, paged, decode;
    const char *seen[32]; /* the value each option was given (index in cli_configs_options) */
} Workload;

/* A decimal int in lo..hi, written as the canonical form writes numbers. */
static int parse_num(const char *v, int lo, int hi, int *out)
{
    int neg = v[0] == '-';
    const char *d = v + neg;
    if (!*d || (d[0] == '0' && d[1]) || strspn(d, "0123456789") != strlen(d) || strlen(d) > 10) return -1;
    long long x = strtoll(d, NULL, 10) * (neg ? -1 : 1);
    if (x < lo || x > hi || (neg && !x)) return -1;
    *out = (int)x;
    return 0;
}

/* A..B or N, 1 <= A <= B <= hi. */
static int parse_range(const char *v, int hi, int *lo_out, int *hi_out)
{
    char a[16], b[16];
    const char *dots = strstr(v, "..");
    size_t k = dots ? (size_t)(dots - v) : strlen(v);
    if (k >= sizeof a || (dots && strlen(dots + 2) >= sizeof b)) return -1;
    memcpy(a, v, k), a[k] = 0;
    snprintf(b, sizeof b, "%s", dots ? dots + 2 : a);
    return parse_num(a, 1, hi, lo_out) || parse_num(b, 1, hi, hi_out) || *hi_out < *lo_out ? -1 : 0;
}

/* Comma-separated items, each through one(item, i, ctx); the count, or -1. */
static int parse_list(const char *v, int max, int (*one)(const char *item, int i, void *u), void *u)
{
    int n = 0;
    char item[64];
    for (const char *p = v;; n++) {
        size_t k = strcspn(p, ",");
        if (!k || k >= sizeof item || n == max) return -1;
        memcpy(item, p, k), item[k] = 0;
        if (one(item, n, u)) return -1;
        if (!p[k]) return n + 1;
        p += k + 1;
    }
}

static int one_target(const char *s, int i, void *u)
{
    Workload *k = u;
    fa4_target t = !strcmp(s, "sm90a")    ? FA4_TARGET_SM90A
                 : !strcmp(s, "sm100a") ? FA4_TARGET_SM100A
                 : !strcmp(s, "sm103a") ? FA4_TARGET_SM103A
                                        : FA4_TARGET_AUTO;
    for (int j = 0; j < i; j++)
        if (k->targets[j] == t) return -1;
    return t == FA4_TARGET_AUTO || i >= 3 ? -1 : (k->targets[i] = t, 0);
}
static int one_sm(const char *s, int i, void *u) { return parse_num(s, 1, 1024, &((Workload *)u)->sm[i]); }
static int one_dtype(const char *s, int i, void *u)
{
    fa4_dtype *d = &((Workload *)u)->dtypes[i];
    return !strcmp(s, "bf16") ? (*d = FA4_BF16, 0) : !strcmp(s, "fp16") ? (*d = FA4_FP16, 0)
         : !strcmp(s, "e4m3") ? (*d = FA4_E4M3, 0) : -1;
}
static int one_dim(const char *s, int i, void *u)
{
    Workload *k = u;
    char qk[16];
    const char *colon = strchr(s, ':');
    size_t n = colon ? (size_t)(colon - s) : strlen(s);
    if (n >= sizeof qk) return -1;
    memcpy(qk, s, n), qk[n] = 0;
    return parse_num(qk, 16, 1024, &k->qk[i]) || parse_num(colon ? colon + 1 : qk, 16, 1024, &k->ov[i]) ||
                   k->qk[i] % 16 || k->ov[i] % 16
               ? -1
               : 0;
}
static int one_group(const char *s, int i, void *u) { return parse_num(s, 1, 1024, &((Workload *)u)->groups[i]); }
static int one_page(const char *s, int i, void *u)
{
    int *p = &((Workload *)u)->pages[i];
    return parse_num(s, 16, 256, p) || (*p & (*p - 1)) ? -1 : 0;
}
static int one_mask(const char *s, int i, void *u)
{
    fa4_mask *m = &((Workload *)u)->masks[i];
    return !strcmp(s, "none") ? (*m = FA4_MASK_NONE, 0) : !strcmp(s, "causal") ? (*m = FA4_MASK_CAUSAL, 0) : -1;
}

static int parse_when(const char *v, fa4_when *w)
{
    *w = !strcmp(v, "0") ? FA4_WHEN_NEVER : !strcmp(v, "1") ? FA4_WHEN_ALWAYS : !strcmp(v, "both") ? FA4_WHEN_EITHER
                                                                                                    : FA4_WHEN_DEFAULT;
    return *w == FA4_WHEN_DEFAULT ? -1 : 0;
}

/* What each option expects, for its refusal. */
static const char *const option_hint[] = {
    "sm90a, sm100a, sm103a, comma-separated, each once",
    "SM counts 1..1024, comma-separated",
    "bf16, fp16, e4m3, comma-separated",
    "head dims (multiples of 16 up to 1024), or QK:OV, comma-separated",
    "groups 1..1024, comma-separated",
    "A..B or N, 1..65536",
    "none, causal, comma-separated (a window: --window L,R)",
    "L,R with each in -1..1073741824",
    "A..B or N, 1..16777216",
    "A..B or N, 1..1073741824",
    "A..B or N, 1..1073741824",
    "A..B or N, 1..1073741824",
    "no value",
    "N in 1..1073741824",
    "no value",
    "page sizes, powers of two in 16..256, comma-separated",
    "no value",
    "0, 1 or both",
    "0, 1 or both",
    "0, 1 or both",
    "0..128",
    "tuning words as fa4_mha_args.config",
};

static int option_index(const char *a)
{
    for (int i = 0; cli_configs_options[i]; i++)
        if (!strcmp(a, cli_configs_options[i])) return i;
    return -1;
}

/* One option; -1 when its value is not allowed. */
static int configs_option(Workload *k, int i, const char *v)
{
    fa4_workload *w = &k->w;
    int n;
    switch (i) {
    case 0: n = parse_list(v, 3, one_target, k); if (n < 0) return -1; w->targets = k->targets, w->n_targets = n; return 0;
    case 1: n = parse_list(v, LIST, one_sm, k); if (n < 0) return -1; w->sm_counts = k->sm, w->n_sm_counts = n; return 0;
    case 2: n = parse_list(v, LIST, one_dtype, k); if (n < 0) return -1; w->dtypes = k->dtypes, w->n_dtypes = n; return 0;
    case 3: n = parse_list(v, LIST, one_dim, k); if (n < 0) return -1;
            w->qk_depths = k->qk, w->ov_depths = k->ov, w->n_depths = n; return 0;
    case 4: n = parse_list(v, LIST, one_group, k); if (n < 0) return -1; w->groups = k->groups, w->n_groups = n; return 0;
    case 5: return parse_range(v, 1 << 16, &w->heads_kv_min, &w->heads_kv_max);
    case 6: n = parse_list(v, LIST - 1, one_mask, k); if (n < 0) return -1; w->masks = k->masks, w->n_masks = n; return 0;
    case 7: {
        char l[16];
        const char *comma = strchr(v, ',');
        if (!comma || (size_t)(comma - v) >= sizeof l || k->n_windows >= 2 * LIST - 2) return -1;
        memcpy(l, v, (size_t)(comma - v)), l[comma - v] = 0;
        if (parse_num(l, -1, 1 << 30, &k->windows[k->n_windows]) || parse_num(comma + 1, -1, 1 << 30, &k->windows[k->n_windows + 1]))
            return -1;
        k->n_windows += 2;
        return 0;
    }
    case 8: return parse_range(v, 1 << 24, &w->batch_min, &w->batch_max);
    case 9: if (parse_range(v, 1 << 30, &w->seqlen_q_min, &w->seqlen_q_max)) return -1;
            w->seqlen_k_min = w->seqlen_q_min, w->seqlen_k_max = w->seqlen_q_max; return 0;
    case 10: return parse_range(v, 1 << 30, &w->seqlen_q_min, &w->seqlen_q_max);
    case 11: return parse_range(v, 1 << 30, &w->seqlen_k_min, &w->seqlen_k_max);
    case 12: k->decode = 1; return 0;
    case 13: k->decode = 1; return parse_num(v, 1, 1 << 30, &w->decode_q);
    case 14: k->varlen = 1; return 0;
    case 15: n = parse_list(v, LIST, one_page, k); if (n < 0) return -1;
             w->page_sizes = k->pages, w->n_page_sizes = n, k->paged = 1; return 0;
    case 16: k->no_dense = 1; return 0;
    case 17: return parse_when(v, &w->sink);
    case 18: return parse_when(v, &w->kv_early);
    case 19: return parse_when(v, &w->workspace);
    case 20: return parse_num(v, 0, 128, &w->num_splits);
    case 21: w->config = v; return 0;
    }
    return -1;
}

/* The masks with any --window, and the layouts. */
static int configs_finish(Workload *k, CliSay say)
{
    fa4_workload *w = &k->w;
    if (k->n_windows) {
        if (!w->n_masks) k->masks[w->n_masks++] = FA4_MASK_CAUSAL; /* the default stays */
        k->masks[w->n_masks++] = FA4_MASK_WINDOW;
        w->masks = k->masks, w->windows = k->windows, w->n_windows = k->n_windows;
    }
    if (k->decode && !w->decode_q) w->decode_q = 16;
    w->layouts = (k->no_dense ? 0 : FA4_LAYOUT_DENSE) | (k->varlen ? FA4_LAYOUT_VARLEN : 0) |
                 (k->paged ? FA4_LAYOUT_PAGED : 0) | (k->paged && k->varlen ? FA4_LAYOUT_VARLEN_PAGED : 0);
    if (!w->layouts) {
        say("configs: --no-dense leaves no calls; add --varlen or --paged P");
        return 2;
    }
    return 0;
}

static int configs_parse(int argc, char **argv, Workload *k, CliSay say)
{
    fa4_workload init = FA4_WORKLOAD_INIT;
    memset(k, 0, sizeof *k);
    k->w = init;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        int o = option_index(a), alone = cli_configs_flag_alone(a);
        if (o < 0) {
            say("configs: '%s' is not an option of this command; see fa4gen configs --help", a);
            return 2;
        }
        if (!alone && i + 1 >= argc) {
            say("configs: %s: missing value (%s)", a, option_hint[o]);
            return 2;
        }
        const char *v = alone ? "" : argv[++i];
        if (k->seen[o] && o != 7) { /* --window may be given again */
            say("configs: %s: given twice ('%s' and '%s'); give it once", a, k->seen[o], v);
            return 2;
        }
        k->seen[o] = v;
        if (configs_option(k, o, v)) {
            say("configs: %s '%s': give %s", a, v, option_hint[o]);
            return 2;
        }
    }
    return configs_finish(k, say);
}

enum { NOTES = 16 };

typedef struct {
    int n, per_target[TARGET_COUNT], combine, skipped;
    char *notes[NOTES]; /* said once it is known that some config is listed (else one line says why none) */
    int write_failed;
} Printed;

static int print_one(void *user, const fa4_config_entry *e)
{
    Printed *p = user;
    if (!e->config) {
        char line[1024];
        snprintf(line, sizeof line, "skipped %d case%s no kernel serves: %s (e.g. %s)", e->count,
                 e->count == 1 ? "" : "s", e->note, e->example);
        if (p->skipped < NOTES) p->notes[p->skipped] = strdup(line);
        p->skipped++;
        return 0;
    }
    if (!p->n) printf("# fa4gen configs: the kernels fa4_mha_fwd can pick for these calls (generator %s)\n",
                      fa4gen_build_id());
    if (printf("# e.g. %s\n%s\n", e->example, e->config) < 0) p->write_failed = 1;
    p->n++;
    if (!strncmp(e->config, "combine", 7)) p->combine++;
    else p->per_target[strstr(e->config, "target=sm103a") ? TARGET_SM103A
                       : strstr(e->config, "target=sm100a") ? TARGET_SM100A : TARGET_SM90A]++;
    return p->write_failed;
}

int cli_configs(int argc, char **argv, CliSay say)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(cli_usage_configs, stdout);
            return 0;
        }
    Workload k;
    int rc = configs_parse(argc, argv, &k, say);
    if (rc) return rc;
    fa4_ctx *ctx = NULL;
    fa4_options o = FA4_OPTIONS_INIT;
    o.disk_cache = 0; /* nothing is compiled */
    if (fa4_create(&ctx, &o)) {
        say("configs: %s", fa4_last_error(NULL));
        return 1;
    }
    Printed p;
    memset(&p, 0, sizeof p);
    fa4_status s = fa4_mha_configs_for(ctx, &k.w, print_one, &p);
    if (s) {
        say("configs: %s", fa4_last_error(ctx));
        rc = s == FA4_ERR_INVALID_ARGUMENT ? 2 : 1;
    } else if (p.write_failed) {
        rc = 1; /* main says it */
    } else if (!p.n) {
        say("configs: no kernel serves any call described%s%s", p.skipped ? ": " : "",
            p.skipped && p.notes[0] ? p.notes[0] : "");
        rc = 2;
    } else {
        for (int i = 0; i < p.skipped && i < NOTES; i++)
            if (p.notes[i]) say("configs: %s", p.notes[i]);
        char sm103[32] = ""; /* named only when asked for, so the line of the other targets stays as it was */
        if (p.per_target[TARGET_SM103A]) snprintf(sm103, sizeof sm103, ", sm103a %d", p.per_target[TARGET_SM103A]);
        fprintf(stderr, "fa4gen: configs: %d config%s (sm90a %d, sm100a %d%s, combine %d)%s\n", p.n, p.n == 1 ? "" : "s",
                p.per_target[TARGET_SM90A], p.per_target[TARGET_SM100A], sm103, p.combine,
                p.skipped ? "; the calls noted above are skipped" : "");
    }
    for (int i = 0; i < NOTES; i++) free(p.notes[i]);
    fa4_destroy(ctx);
    return rc;
}

/* ---------------------------------------------------------------- cache */

const char cli_usage_cache[] =
    "usage: fa4gen cache path\n"
    "       fa4gen cache list\n"
    "       fa4gen cache clear\n"
    "       fa4gen cache prune --max-size N\n"
    "\n"
    "The runtime's disk cache of JIT-compiled kernels (one <16 hex>.cubin per kernel): FA4GEN_CACHE_DIR, else\n"
    "$XDG_CACHE_HOME/fa4gen, else $HOME/.cache/fa4gen.\n"
    "  path                print the folder (it may not exist yet)\n"
    "  list                one line per entry, most recently used first: size, last use, config; entries of\n"
    "                      another fa4gen build (never loaded by this one) and invalid ones are marked\n"
    "  clear               remove every entry\n"
    "  prune --max-size N  remove the least recently used entries until the rest take at most N bytes\n"
    "                      (N with an optional K, M or G suffix: 1024-based; 0 removes all)\n"
    "\n"
    "Under the runtime's trust rules (docs/trust.md): a folder that is not this user's or that group or\n"
    "others may write is refused with the runtime's warning (exit 1); only this user's regular files with an\n"
    "entry's name are listed or removed (and temporary files of writers that died), never through a symlink.\n"
    "fa4gen cache <subcommand> --help prints this.\n";

const char *const cli_cache_subcommands[] = {"path", "list", "clear", "prune", NULL};

/* N with an optional K, M, G suffix (powers of 1024), in 0..2^62. */
static int parse_size(const char *v, uint64_t *out)
{
    size_t n = strspn(v, "0123456789");
    if (!n || n > 18 || (v[0] == '0' && n > 1)) return -1;
    uint64_t x = strtoull(v, NULL, 10), mul = 1;
    const char *suf = v + n;
    if (*suf) {
        const char *units = "KMG", *u = strchr(units, *suf & ~32);
        if (!u || suf[1]) return -1;
        mul = (uint64_t)1 << (10 * (u - units + 1));
    }
    if (x > ((uint64_t)1 << 62) / mul) return -1;
    *out = x * mul;
    return 0;
}

static void human(uint64_t b, char *buf, size_t n)
{
    if (b < 1024) snprintf(buf, n, "%" PRIu64 " B", b);
    else if (b < (1u << 20)) snprintf(buf, n, "%.1f KiB", (double)b / 1024);
    else if (b < (1u << 30)) snprintf(buf, n, "%.1f MiB", (double)b / (1 << 20));
    else snprintf(buf, n, "%.2f GiB", (double)b / (1u << 30));
}

static void age(int64_t t, char *buf, size_t n)
{
    int64_t s = (int64_t)time(NULL) - t;
    if (s < 0) s = 0;
    if (s < 120) snprintf(buf, n, "%llds ago", (long long)s);
    else if (s < 7200) snprintf(buf, n, "%lldm ago", (long long)s / 60);
    else if (s < 172800) snprintf(buf, n, "%lldh ago", (long long)s / 3600);
    else snprintf(buf, n, "%lldd ago", (long long)s / 86400);
}

typedef struct {
    int n, other, bad;
    uint64_t bytes;
} Listing;

static int list_one(void *user, const fa4_cache_entry *e)
{
    Listing *l = user;
    char size[32], when[32];
    human(e->bytes, size, sizeof size);
    age(e->atime > e->mtime ? e->atime : e->mtime, when, sizeof when);
    l->n++, l->bytes += e->bytes;
    l->other += !e->problem && !e->this_build, l->bad += e->problem != NULL;
    if (e->problem) printf("%10s  %9s  %s  (invalid: %s; the runtime rebuilds it)\n", size, when, e->file, e->problem);
    else printf("%10s  %9s  %s%s\n", size, when, e->config, e->this_build ? "" : "  (another fa4gen build)");
    return 0;
}

/* The subcommand's own words: none, or --max-size N for prune. */
static int cache_args(int argc, char **argv, const char *sub, uint64_t *max, CliSay say)
{
    int is_prune = !strcmp(sub, "prune"), have = 0;
    for (int i = 3; i < argc; i++) {
        if (is_prune && !strcmp(argv[i], "--max-size")) {
            if (i + 1 >= argc) {
                say("cache prune: --max-size: missing value; give N bytes, with an optional K, M or G suffix");
                return 2;
            }
            if (have++) {
                say("cache prune: --max-size: given twice; give it once");
                return 2;
            }
            if (parse_size(argv[++i], max)) {
                say("cache prune: --max-size '%s': give N bytes, with an optional K, M or G suffix (1024-based)", argv[i]);
                return 2;
            }
            continue;
        }
        say("cache %s: '%s' is not an option of this command%s", sub, argv[i],
            is_prune ? " (prune takes --max-size N)" : " (it takes none)");
        return 2;
    }
    if (is_prune && !have) {
        say("cache prune: --max-size N is required (the most the entries may take)");
        return 2;
    }
    return 0;
}

static int cache_run(fa4_ctx *ctx, const char *sub, uint64_t max, CliSay say)
{
    char dir[4096], b[32];
    fa4_status s = fa4_cache_dir(ctx, dir, sizeof dir);
    if (!s && !strcmp(sub, "path")) {
        printf("%s\n", dir);
        return 0;
    }
    if (!s && !strcmp(sub, "list")) {
        Listing l = {0, 0, 0, 0};
        if (!(s = fa4_cache_list(ctx, list_one, &l))) {
            human(l.bytes, b, sizeof b);
            printf("# %d entr%s, %s in %s", l.n, l.n == 1 ? "y" : "ies", b, dir);
            if (l.other) printf("; %d of another fa4gen build", l.other);
            if (l.bad) printf("; %d invalid", l.bad);
            printf("\n");
        }
    } else if (!s) {
        int n = 0;
        uint64_t bytes = 0;
        s = !strcmp(sub, "clear") ? fa4_cache_clear(ctx, &n, &bytes) : fa4_cache_prune(ctx, max, &n, &bytes);
        if (!s) {
            human(bytes, b, sizeof b);
            printf("removed %d entr%s (%s) from %s\n", n, n == 1 ? "y" : "ies", b, dir);
        }
    }
    if (s) say("cache %s: %s", sub, fa4_last_error(ctx));
    return s ? 1 : 0;
}

int cli_cache(int argc, char **argv, CliSay say)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(cli_usage_cache, stdout);
            return 0;
        }
    const char *sub = argc > 2 ? argv[2] : "";
    int known = 0;
    for (int i = 0; cli_cache_subcommands[i]; i++) known |= !strcmp(sub, cli_cache_subcommands[i]);
    if (!known) {
        say("cache: %s%s%s; use path, list, clear or prune --max-size N (fa4gen cache --help)",
            sub[0] ? "'" : "no subcommand", sub, sub[0] ? "' is not a subcommand" : "");
        return 2;
    }
    uint64_t max = 0;
    int rc = cache_args(argc, argv, sub, &max, say);
    if (rc) return rc;
    fa4_ctx *ctx = NULL;
    if (fa4_create(&ctx, NULL)) {
        say("cache: %s", fa4_last_error(NULL));
        return 1;
    }
    rc = cache_run(ctx, sub, max, say);
    fa4_destroy(ctx);
    return rc;
}
