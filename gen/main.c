/* main.c - the fa4gen command line: flags -> config -> PTX file or plan.
 *
 * Exit status: 0 ok, 1 I/O or internal failure (a failed write to stdout
 * included), 2 invalid input (one line on stderr naming the field, the value
 * and what is allowed; what it echoes is escaped, so it stays one line). A
 * flag the command does not use is invalid input, not ignored.
 *
 * Output: a regular file (or a new one) is written to a temporary name beside
 * it and renamed into place, so a failed run never creates or truncates it; a
 * symlink is followed (its target is written, the link stays); a device or
 * FIFO (/dev/null, /dev/stdout) is opened and written, never replaced. New
 * files get mode 0666 minus the umask; a replaced file keeps its mode. A
 * bundle is written into a temporary folder first, so a failed bundle leaves
 * nothing behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aot.h"
#include "fa4gen.h"
#include "score_mod.h"

static const char usage_top[] =
    "usage: fa4gen <command> [options]\n"
    "\n"
    "commands:\n"
    "  mha        emit the PTX of one multi-head attention forward kernel\n"
    "  combine    emit the split-KV combine kernel: fa4gen combine --target T --dtype bf16|fp16 --ov-depth D\n"
    "  explain    print the plan of a kernel (same options; --json for JSON)\n"
    "  bundle     AOT: compile configs into a C source a host links (the runtime takes its kernels\n"
    "             before it generates any): fa4gen bundle [LIST] [--config TEXT]... -o FILE.c\n"
    "             [--targets sm90a,sm100a] [--name NAME] [--jobs N]; or one PTX file per config:\n"
    "             fa4gen bundle LIST -d DIR\n"
    "\n"
    "  fa4gen mha --help       the kernel options\n"
    "  fa4gen bundle --help    the bundle options\n"
    "  fa4gen --version        generator version\n";

static const char usage_mha[] =
    "usage: fa4gen mha     --target sm90a|sm100a --dtype bf16|fp16|e4m3 --depth D [options] [-o FILE]\n"
    "       fa4gen explain --target ... [options] [--json]\n"
    "       fa4gen mha     --config '<canonical config>' [-o FILE]\n"
    "\n"
    "options (omitted ones take the plan's best defaults for target, depth and dtype):\n"
    "  --target T          sm90a (Hopper, FlashAttention-3 design) or sm100a (Blackwell, FA4 design;\n"
    "                      ptxas-checked, not run: no Blackwell GPU here)\n"
    "  --dtype T           bf16 | fp16 | e4m3 (e4m3: sm100a only)\n"
    "  --depth D           head dim of Q, K and V; or --qk-depth D and --ov-depth D\n"
    "  --bm N              query rows per CTA (sm90a: 128 or 192; 64: one consumer, for decode tiles)\n"
    "  --bn N              keys per KV tile (multiple of 16)\n"
    "  --group G           query heads per KV head (GQA/MQA); 1 = MHA\n"
    "  --stages S          KV ring depth\n"
    "  --swizzle B         shared-memory swizzle: 32 | 64 | 128 bytes\n"
    "  --mask M            none | causal | window:L,R (causal aligns bottom-right)\n"
    "  --qtiles N          sm100a: Q tiles per CTA (1 or 2)\n"
    "  --cta N             sm100a: 2 = the CTA pair: a 2-CTA cluster shares each MMA (M 256, cta_group::2)\n"
    "  --rescale N         sm100a: conditional O-rescale threshold (log2 units)\n"
    "  --poly P            sm100a: percent of exp2 done by the FMA polynomial\n"
    "  --rope-split 0|1    sm100a MLA prefill: the rope part of K is a separate tensor\n"
    "  --rope-dtype T      its dtype\n"
    "  --pingpong 0|1      sm90a: consumer warpgroups take turns issuing wgmma (default 1)\n"
    "  --persistent 0|1    sm90a: min(tiles, SMs) CTAs loop over tiles (default: 1, 0 for causal)\n"
    "  mla-sparse on sm100a (instead of --bm/--bn/--stages/--qtiles/--cta):\n"
    "  --cta-group N       1: one CTA per token and 64 heads (h_q > 64: one CTA per 64 heads)\n"
    "  --b-topk N          top-k positions per KV block (64)\n"
    "  --num-mbars N       KV ring slots, each with a full and an empty mbarrier (2)\n"
    "  --q-smem-depth D    Q columns the MMA reads from shared memory (d_qk)\n"
    "  --q-tmem-depth D    Q columns it reads from TMEM (0 for cta-group 1)\n"
    "  --tma-store 0|1     mla-sparse: O through shared memory and a TMA store (out strides multiples of 16 B)\n"
    "                      instead of per-thread stores (sm90a: 1, the runtime's pick when the strides allow; sm100a: 0)\n"
    "  --split 0|1         split-KV: the kernel writes f32 partial O and LSE for its split of the kv blocks\n"
    "                      (the split count is a kernel parameter); `fa4gen combine` merges the splits;\n"
    "                      run with one split it writes the final O and LSE itself\n"
    "  --cluster N         sm90a split-KV: N (2..16) CTAs of a cluster split each tile's kv blocks and merge\n"
    "                      their O in distributed shared memory (implies --split 1; no workspace or combine)\n"
    "  --early 0|1         split-KV, dense or paged K/V (not cta 2): stream the first tile's first K/V blocks (rows before\n"
    "                      seqlen_k - seqlen_q) before griddepcontrol.wait, blocks in ascending order\n"
    "                      (fa4_mha_args.kv_early: the caller's promise that no kernel still running writes\n"
    "                      those rows, nor, paged, their table entries or lengths)\n"
    "  --prefetch N        split-KV, dense or paged K/V (not cta 2): prefetch into L2, before griddepcontrol.wait,\n"
    "                      the next N (0..16) K/V blocks the first tile loads -- a hint, it asks nothing of the\n"
    "                      caller (default 2; 0 with --early 1; paged reads the table twice)\n"
    "  --sink 0|1          a per-head sink logit joins the softmax denominator (kernel parameter p_sink)\n"
    "  --varlen 0|1        packed [total, heads, depth] tensors with cu_seqlens_q/k (p_cu_seqlens_q ...)\n"
    "  --page P            paged K, V: P rows per page (16..256, a power of two) via a block table\n"
    "  --score-mod FILE    CUDA C defining __device__ float score_mod(float s, int b, int h, int q, int k,\n"
    "                      const void *aux), applied to every scaled score before the mask; mha compiles\n"
    "                      it with NVRTC (needs libnvrtc), explain needs only its hash (config word mod=)\n"
    "  --config TEXT       the canonical one-line form (as printed by explain); other options then refine it\n"
    "  -o FILE             mha: write the PTX to FILE (default, or FILE -: stdout)\n"
    "  --json              explain: print the plan as JSON\n"
    "\n"
    "Values are exact words: numbers are decimal (optional '-', no spaces or '+'), range-checked;\n"
    "window:L,R has no spaces, L and R in 0..1073741824 or -1 (unbounded).\n"
    "\n"
    "The kernel symbol is fa4_<kind>_<target>_<hash>, hash = FNV-1a 64 of the canonical\n"
    "config and the generator version: `fa4gen explain` prints all three. The runtime's disk cache\n"
    "and AOT bundles key on the build id (`fa4gen --version`: version + a hash of the generator's sources).\n";

typedef struct {
    Config cfg;
    char *mod_src; /* --score-mod FILE's text (owned) */
    const char *out;
    const char *bundle_dir;
    int json;
} Cli;

/* CLI flag -> config key. */
static const char *const flag_keys[][2] = {
    {"--target", "target"}, {"--dtype", "dtype"},       {"--depth", "depth"},     {"--qk-depth", "qk"},
    {"--ov-depth", "ov"},   {"--bm", "bm"},             {"--bn", "bn"},           {"--group", "group"},
    {"--stages", "stages"}, {"--swizzle", "swizzle"},   {"--mask", "mask"},       {"--qtiles", "qtiles"},
    {"--cta", "cta"},       {"--rescale", "rescale"},   {"--poly", "poly"},       {"--rope-split", "rope_split"},
    {"--rope-dtype", "rope_dtype"}, {"--pingpong", "pingpong"},   {"--persistent", "persistent"},
    {"--b-topk", "b_topk"}, {"--num-mbars", "num_mbars"}, {"--q-smem-depth", "q_smem_depth"},
    {"--q-tmem-depth", "q_tmem_depth"}, {"--cta-group", "cta_group"}, {"--tma-store", "tma_store"},
    {"--sink", "sink"},     {"--split", "split"},     {"--cluster", "cluster"},     {"--early", "early"},  {"--prefetch", "prefetch"},     {"--varlen", "varlen"}, {"--page", "page"},
};

/* One line on stderr: control and non-ASCII bytes of what it echoes become \xNN. */
static void say(const char *fmt, ...) FA4_PRINTF(1, 2);
static void say(const char *fmt, ...)
{
    char msg[1024], line[4200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t o = 0;
    for (const unsigned char *c = (const unsigned char *)msg; *c && o + 5 < sizeof line; c++) {
        if (*c >= 0x20 && *c < 0x7f) line[o++] = (char)*c;
        else o += (size_t)snprintf(line + o, sizeof line - o, "\\x%02x", *c);
    }
    line[o] = 0;
    fprintf(stderr, "fa4gen: %s\n", line);
}

static int invalid(const char *msg)
{
    say("%s", msg);
    return 2;
}

/* --score-mod FILE: the source text (no NUL bytes, at most 1 MiB); its hash becomes the config's mod=. */
static int read_mod(Cli *cli, const char *name)
{
    enum { MOD_MAX = 1 << 20 };
    FILE *f = fopen(name, "rb");
    if (!f) {
        say("--score-mod: cannot read '%s': %s", name, strerror(errno));
        return 2;
    }
    char *src = malloc(MOD_MAX + 1);
    size_t n = src ? fread(src, 1, MOD_MAX + 1, f) : 0;
    int bad = !src ? 1 : ferror(f) ? 1 : n > MOD_MAX ? 2 : memchr(src, 0, n) ? 3 : 0;
    fclose(f);
    if (bad) {
        free(src);
        say(bad == 1 ? "--score-mod: cannot read '%s'" : bad == 2 ? "--score-mod: '%s' is larger than 1 MiB"
                                                                  : "--score-mod: '%s' holds a NUL byte; a mod is CUDA C text", name);
        return bad == 1 ? 1 : 2;
    }
    src[n] = 0;
    free(cli->mod_src);
    cli->mod_src = src;
    cli->cfg.score_mod = score_mod_hash(src);
    return 0;
}

/* What a command takes besides the config flags. */
enum { USE_OUT = 1, USE_JSON = 2, USE_DIR = 4, USE_CONFIG = 8 };

static int parse_flags(Cli *cli, int argc, char **argv, int first, int uses, const char *cmd)
{
    char err[512];
    config_init(&cli->cfg);
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        int takes = !strcmp(a, "--json") ? USE_JSON : !strcmp(a, "-o") ? USE_OUT : !strcmp(a, "-d") ? USE_DIR
                    : a[0] == '-' ? USE_CONFIG : 0;
        if (takes && !(uses & takes)) {
            snprintf(err, sizeof err, "%s: '%s' is not an option of this command%s", cmd, a,
                     takes == USE_CONFIG ? " (every config comes from the list)"
                     : takes == USE_OUT  ? " (mha writes PTX with -o; explain prints to stdout)"
                     : takes == USE_JSON ? " (only explain prints JSON)"
                                         : " (only bundle writes a folder)");
            return invalid(err);
        }
        if (takes != USE_JSON && takes) i++; /* skip the value */
    }
    /* --config first, so that flags refine it whatever their order */
    for (int i = first; i < argc; i++)
        if (!strcmp(argv[i], "--config")) {
            if (i + 1 >= argc) return invalid("--config: missing value; give the canonical config text");
            if (config_parse_canonical(argv[i + 1], &cli->cfg, err, sizeof err)) return invalid(err);
        }
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) { cli->json = 1; continue; }
        if (!strcmp(a, "--config")) { i++; continue; }
        if (!strcmp(a, "-o") || !strcmp(a, "-d")) {
            if (i + 1 >= argc) return invalid(!strcmp(a, "-o") ? "-o: missing file name" : "-d: missing directory");
            if (!strcmp(a, "-o")) cli->out = strcmp(argv[i + 1], "-") ? argv[i + 1] : NULL; /* '-': stdout */
            else cli->bundle_dir = argv[i + 1];
            i++;
            continue;
        }
        if (!strcmp(a, "--score-mod")) {
            if (i + 1 >= argc) return invalid("--score-mod: missing file name");
            int rc = read_mod(cli, argv[++i]);
            if (rc) return rc;
            continue;
        }
        const char *key = NULL;
        for (size_t k = 0; k < sizeof flag_keys / sizeof flag_keys[0]; k++)
            if (!strcmp(a, flag_keys[k][0])) key = flag_keys[k][1];
        if (!key) {
            snprintf(err, sizeof err, "'%s' is not an option; see fa4gen mha --help", a);
            return invalid(err);
        }
        if (i + 1 >= argc) {
            snprintf(err, sizeof err, "%s: missing value", a);
            return invalid(err);
        }
        if (config_set(&cli->cfg, key, argv[++i], err, sizeof err)) return invalid(err);
    }
    return 0;
}

static int write_all(int fd, const char *data, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t k = write(fd, data + done, len - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (k == 0) errno = EIO;
            return -1;
        }
        done += (size_t)k;
    }
    return 0;
}

static mode_t current_umask(void)
{
    mode_t m = umask(0);
    umask(m);
    return m;
}
static mode_t new_file_mode(void) { return 0666 & ~current_umask(); }

/* Write data to path. A regular file (or none yet) goes through a temporary
 * file beside it and a rename; a symlink is followed; anything else (device,
 * FIFO) is written in place, never replaced. */
static int write_atomic(const char *path, const char *data, size_t len)
{
    char tmp[4096], *real = NULL;
    struct stat st;
    int exists = stat(path, &st) == 0; /* follows links */
    if (exists && !S_ISREG(st.st_mode)) {
        int fd = open(path, O_WRONLY | O_NOCTTY);
        if (fd < 0 || write_all(fd, data, len) || close(fd)) {
            say("cannot write '%s': %s", path, strerror(errno));
            return 1;
        }
        return 0;
    }
    struct stat lst;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        /* the link's target, so that the rename replaces it and not the link */
        if (exists) real = realpath(path, NULL);
        if (!real) {
            say("-o: '%s' is a symlink to a missing file; give the target path", path);
            return 1;
        }
        path = real;
    }
    int rc = 1;
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp) {
        say("-o: path is too long");
        goto out;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        say("cannot create a file next to '%s': %s", path, strerror(errno));
        goto out;
    }
    int ok = fchmod(fd, exists ? (st.st_mode & 07777) : new_file_mode()) == 0 && write_all(fd, data, len) == 0 &&
             fsync(fd) == 0;
    ok = (close(fd) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        say("cannot write '%s': %s", path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    rc = 0;
out:
    free(real);
    return rc;
}

/* NVRTC's PTX of --score-mod for the config's target; 0, or the exit status after a message. */
static int compile_mod(const Cli *cli, char **mod_ptx, ScoreModLink *link)
{
    char err[512];
    *mod_ptx = NULL;
    if (!cli->mod_src) return 0;
    if (score_mod_link_from_env(link, err, sizeof err)) return invalid(err);
    if (*link == MOD_LINK)
        return invalid("FA4GEN_SCORE_MOD_LINK=link: the CLI writes one self-contained PTX file; use splice or call "
                       "(the runtime links)");
    if ((unsigned)cli->cfg.target >= TARGET_COUNT) return invalid("target: not a target");
    char *log = NULL;
    int rc = score_mod_compile(cli->mod_src, target_get(cli->cfg.target), mod_ptx, &log, err, sizeof err);
    if (rc == MOD_NO_NVRTC) {
        say("%s", err);
        return 1;
    }
    if (rc) { /* one line, as every invalid input: NVRTC's log lines joined by '|' */
        for (char *c = log; c && *c; c++)
            if (*c == '\n') *c = c[1] ? '|' : 0;
        say("%s: %s", err, log && log[0] ? log : "(no log)");
        free(log);
        return 2;
    }
    return 0;
}

static int generate(const Cli *cli, Plan *plan, char **ptx, size_t *len)
{
    char err[512], *mod_ptx;
    ScoreModLink link = MOD_SPLICE;
    int rc = compile_mod(cli, &mod_ptx, &link);
    if (rc) return rc;
    if (fa4gen_generate_mod(&cli->cfg, mod_ptx, (int)link, plan, ptx, len, err, sizeof err)) {
        free(mod_ptx);
        say("%s", err);
        return strncmp(err, "internal", 8) ? 2 : 1;
    }
    free(mod_ptx);
    return 0;
}

static int cmd_emit(const Cli *cli)
{
    Plan *plan = malloc(sizeof *plan);
    char *ptx = NULL;
    size_t len = 0;
    if (!plan) return 1;
    int rc = generate(cli, plan, &ptx, &len);
    if (!rc) {
        if (cli->out) rc = write_atomic(cli->out, ptx, len);
        else rc = fwrite(ptx, 1, len, stdout) == len ? 0 : 1;
    }
    free(ptx);
    free(plan);
    return rc;
}

static int cmd_explain(const Cli *cli)
{
    char err[512];
    Plan *plan = malloc(sizeof *plan);
    if (!plan) return 1;
    int rc = 0;
    if (plan_make(&cli->cfg, plan, err, sizeof err)) {
        say("%s", err);
        rc = 2;
    } else {
        char *text = cli->json ? plan_explain_json(plan) : plan_explain_text(plan);
        if (!text) rc = 1;
        else fputs(text, stdout);
        free(text);
    }
    free(plan);
    return rc;
}

/* The lines of a bundle list, read whole (no line-length limit). */
typedef struct { char **text; int *lineno; int n; } Lines;

static void lines_free(Lines *l)
{
    for (int i = 0; i < l->n; i++) free(l->text[i]);
    free(l->text);
    free(l->lineno);
}

/* Keeps the config lines: not blank, not a comment (first non-blank '#'). */
static int read_list(const char *name, Lines *out)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(name, "r");
    if (!f) {
        say("bundle: cannot read '%s': %s", name, strerror(errno));
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int rc = 0, cap_lines = 0, oom = 0;
    for (int lineno = 1; (got = getline(&line, &cap, f)) >= 0; lineno++) {
        if (memchr(line, 0, (size_t)got)) {
            say("bundle: %s line %d: holds a NUL byte; a list is text", name, lineno);
            rc = 2;
            break;
        }
        line[strcspn(line, "\r\n")] = 0;
        const char *w = line + strspn(line, " \t");
        if (!*w || *w == '#') continue;
        if (out->n == cap_lines) {
            cap_lines = cap_lines ? 2 * cap_lines : 16;
            char **t = realloc(out->text, (size_t)cap_lines * sizeof *t);
            if (t) out->text = t;
            int *ln = realloc(out->lineno, (size_t)cap_lines * sizeof *ln);
            if (ln) out->lineno = ln;
            if (!t || !ln) { rc = oom = 1; break; }
        }
        if (!(out->text[out->n] = strdup(line))) { rc = oom = 1; break; }
        out->lineno[out->n++] = lineno;
    }
    if (!rc && ferror(f)) {
        say("bundle: cannot read '%s': %s", name, strerror(errno));
        rc = 1;
    }
    free(line);
    fclose(f);
    if (oom) say("bundle: out of memory reading '%s'", name);
    if (rc) lines_free(out);
    return rc;
}

/* rm -r of the flat folder a failed bundle wrote. */
static void remove_dir(const char *dir, Plan *const *plans, int n)
{
    char path[4200];
    for (int i = 0; i < n; i++)
        if (plans[i]) {
            snprintf(path, sizeof path, "%s/%s.ptx", dir, plans[i]->symbol);
            unlink(path);
        }
    rmdir(dir);
}

/* The bundle's C name: --name, or FILE's base name with every other character an '_'. */
static int bundle_name(const char *given, const char *out, char *name, size_t n)
{
    if (given) {
        int ok = strlen(given) < n && !(given[0] >= '0' && given[0] <= '9') && given[0];
        for (const char *c = given; *c && ok; c++)
            ok = *c == '_' || (*c >= '0' && *c <= '9') || ((*c | 32) >= 'a' && (*c | 32) <= 'z');
        if (!ok) {
            say("bundle: --name '%s' is not a C identifier (letters, digits, '_'; not a digit first)", given);
            return 2;
        }
        snprintf(name, n, "%s", given);
        return 0;
    }
    const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
    size_t k = 0;
    if (*base >= '0' && *base <= '9') name[k++] = '_';
    for (const char *c = base; *c && *c != '.' && k + 1 < n; c++)
        name[k++] = ((*c >= '0' && *c <= '9') || ((*c | 32) >= 'a' && (*c | 32) <= 'z')) ? *c : '_';
    name[k] = 0;
    if (!k) snprintf(name, n, "bundle");
    return 0;
}

/* --targets T,T: each a target's name, once. */
static int parse_targets(const char *v, AotRequest *r)
{
    r->n_targets = 0;
    for (const char *t = v; *t;) {
        size_t k = strcspn(t, ",");
        int id = -1;
        for (int j = 0; j < TARGET_COUNT; j++)
            if (strlen(target_name[j]) == k && !strncmp(t, target_name[j], k)) id = j;
        for (int j = 0; j < r->n_targets && id >= 0; j++)
            if ((int)r->targets[j] == id) {
                say("bundle: --targets '%s': a target is named twice", v);
                return 2;
            }
        if (id < 0) {
            say("bundle: --targets '%s': give targets from sm90a, sm100a, comma-separated, each once", v);
            return 2;
        }
        r->targets[r->n_targets++] = (TargetId)id;
        t += k + (t[k] == ',');
    }
    if (!r->n_targets) return invalid("bundle: --targets: empty; give sm90a, sm100a or both");
    return 0;
}

/* bundle [LIST] [--config TEXT]... [--targets T,T] [--name NAME] [--jobs N] -o FILE.c */
static int cmd_bundle_c(int argc, char **argv)
{
    AotRequest r = {0};
    const char *list = NULL, *out = NULL, *given_name = NULL;
    char name[64], err[512];
    int rc = 0, n_cfg = 0, jobs = (int)sysconf(_SC_NPROCESSORS_ONLN);
    AotConfig *cfgs = calloc((size_t)argc, sizeof *cfgs);
    Lines l = {0};
    if (!cfgs) return 1;
    for (int i = 2, takes = 0; i < argc && !rc; i += 1 + takes) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        takes = !strcmp(a, "-o") || !strcmp(a, "--config") || !strcmp(a, "--targets") || !strcmp(a, "--name") ||
                !strcmp(a, "--jobs");
        if (takes && !v) {
            snprintf(err, sizeof err, "bundle: %s: missing value", a);
            rc = invalid(err);
        } else if (!strcmp(a, "-o")) {
            out = v;
        } else if (!strcmp(a, "--config")) {
            cfgs[n_cfg++] = (AotConfig){v, "--config", 0};
        } else if (!strcmp(a, "--name")) {
            given_name = v;
        } else if (!strcmp(a, "--jobs")) {
            if (parse_int(v, &jobs) || jobs < 1 || jobs > 256) {
                say("bundle: --jobs '%s': give a number of configs compiled at once, 1..256", v);
                rc = 2;
            }
        } else if (!strcmp(a, "--targets")) {
            rc = parse_targets(v, &r);
        } else if (a[0] == '-' || list) {
            snprintf(err, sizeof err, "bundle: '%s' is not an option of this command (bundle -o takes LIST, --config, "
                     "--targets, --name, --jobs; see fa4gen bundle --help)", a);
            rc = invalid(err);
        } else {
            list = a;
        }
    }
    if (!rc && !out) rc = invalid("bundle: -o FILE.c is required");
    if (!rc) rc = bundle_name(given_name, out, name, sizeof name);
    if (!rc && list && !(rc = read_list(list, &l))) {
        AotConfig *more = realloc(cfgs, ((size_t)n_cfg + (size_t)l.n + 1) * sizeof *cfgs);
        if (!more) rc = 1;
        else cfgs = more;
        for (int i = 0; i < l.n && !rc; i++) cfgs[n_cfg++] = (AotConfig){l.text[i], list, l.lineno[i]};
    }
    if (!rc) {
        r.configs = cfgs;
        r.n_configs = n_cfg;
        r.name = name;
        r.jobs = jobs;
        r.say = say;
        char *text = NULL;
        size_t len = 0;
        rc = aot_bundle(&r, &text, &len);
        if (!rc) rc = write_atomic(out, text, len);
        if (!rc) fprintf(stderr, "fa4gen: bundle: wrote %s (fa4_bundle_%s)\n", out, name);
        free(text);
    }
    lines_free(&l);
    free(cfgs);
    return rc;
}

/* bundle LIST -d DIR: one kernel per config line; every config is checked
 * before any file is written, every file is written into a temporary folder
 * (inside DIR, or beside it when DIR does not exist yet) and only then moved
 * into place. A line that names the same kernel as an earlier one is reported
 * and written once. */
static const char usage_bundle[] =
    "usage: fa4gen bundle [LIST] [--config TEXT]... [--targets T,T] [--name NAME] [--jobs N] -o FILE.c\n"
    "       fa4gen bundle LIST -d DIR\n"
    "\n"
    "-o FILE.c   compile every config (a LIST line, canonical or any subset of its key=value words, or a\n"
    "            --config) with the toolkit's ptxas into a cubin, pack it with its PTX into a fatbin\n"
    "            (fatbinary), and write a C source holding them, a table by config hash and a\n"
    "            constructor that registers it: a host that links it gets these kernels before anything\n"
    "            is generated (FA4GEN_DISABLE_JIT=1: only these). Tools: FA4GEN_PTXAS, FA4GEN_FATBINARY,\n"
    "            $CUDA_HOME/bin, /usr/local/cuda/bin, PATH.\n"
    "  --targets T,T   compile each config for each of these targets (sm90a, sm100a) instead of its own\n"
    "  --name NAME     the table is fa4_bundle_NAME (default: FILE's base name)\n"
    "  --jobs N        configs compiled at once (default: the CPUs online); a line per finished kernel\n"
    "-d DIR      write one PTX file per config into DIR (no compile)\n";

static int cmd_bundle(int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_bundle, stdout);
            return 0;
        }
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-o")) return cmd_bundle_c(argc, argv);
    if (argc < 3 || argv[2][0] == '-')
        return invalid("bundle: give a config list and -o FILE.c (a C source of compiled kernels) or -d DIR (PTX files)");
    Cli cli = {0};
    int rc = parse_flags(&cli, argc, argv, 3, USE_DIR, "bundle");
    if (rc) return rc;
    if (!cli.bundle_dir)
        return invalid("bundle: -o FILE.c (a C source of compiled kernels) or -d DIR (PTX files) is required");
    Lines l;
    if ((rc = read_list(argv[2], &l))) return rc;
    Plan **plans = calloc((size_t)l.n + 1, sizeof *plans);
    int *dup_of = malloc(((size_t)l.n + 1) * sizeof *dup_of);
    char err[512], tmp[4096], path[4200];
    int n = 0;
    if (!plans || !dup_of) rc = 1;
    for (int i = 0; i < l.n && dup_of; i++) dup_of[i] = -1;
    for (int i = 0; i < l.n && !rc; i++) {
        Config c;
        if (!(plans[i] = malloc(sizeof *plans[i]))) { rc = 1; break; }
        if (config_parse_canonical(l.text[i], &c, err, sizeof err) || plan_make(&c, plans[i], err, sizeof err)) {
            say("bundle: %s line %d: %s", argv[2], l.lineno[i], err);
            rc = 2;
            break;
        }
        for (int j = 0; j < i; j++)
            if (plans[j] && !strcmp(plans[j]->canonical, plans[i]->canonical)) {
                dup_of[i] = j; /* reported once every line has passed, so a refusal stays one line */
                break;
            }
    }
    for (int i = 0; i < l.n && !rc; i++)
        if (dup_of[i] >= 0) {
            say("bundle: %s line %d: the same kernel as line %d (%s); written once", argv[2], l.lineno[i],
                l.lineno[dup_of[i]], plans[i]->symbol);
            free(plans[i]);
            plans[i] = NULL;
        }
    struct stat st;
    int fresh = stat(cli.bundle_dir, &st) != 0; /* DIR itself is created by the final rename */
    if (!rc && !fresh && !S_ISDIR(st.st_mode)) {
        say("bundle: -d '%s' is not a directory", cli.bundle_dir);
        rc = 2;
    }
    if (!rc && snprintf(tmp, sizeof tmp, fresh ? "%s.tmp.XXXXXX" : "%s/.fa4gen-bundle.XXXXXX", cli.bundle_dir) >=
                   (int)sizeof tmp) {
        say("bundle: -d: path is too long");
        rc = 1;
    }
    if (!rc && !mkdtemp(tmp)) {
        say("bundle: cannot create a folder %s '%s': %s", fresh ? "beside" : "in", cli.bundle_dir, strerror(errno));
        rc = 1;
    }
    int made = !rc;
    for (int i = 0; i < l.n && !rc; i++) {
        if (!plans[i]) continue;
        Cli one = {0};
        one.cfg = plans[i]->cfg;
        char *ptx = NULL;
        size_t len = 0;
        rc = generate(&one, plans[i], &ptx, &len);
        if (!rc) {
            snprintf(path, sizeof path, "%s/%s.ptx", tmp, plans[i]->symbol);
            rc = write_atomic(path, ptx, len);
        }
        free(ptx);
    }
    if (!rc && fresh && (chmod(tmp, 0777 & ~current_umask()) || rename(tmp, cli.bundle_dir))) {
        say("bundle: cannot create '%s': %s", cli.bundle_dir, strerror(errno));
        rc = 1;
    }
    for (int i = 0; i < l.n && !rc; i++) {
        if (!plans[i]) continue;
        char from[4200];
        snprintf(path, sizeof path, "%s/%s.ptx", cli.bundle_dir, plans[i]->symbol);
        snprintf(from, sizeof from, "%s/%s.ptx", tmp, plans[i]->symbol);
        if (!fresh && rename(from, path)) {
            say("bundle: cannot write '%s': %s", path, strerror(errno));
            rc = 1;
            break;
        }
        printf("%s  %s\n", path, plans[i]->canonical);
        n++;
    }
    if (made && (rc || !fresh)) remove_dir(tmp, plans, l.n); /* fresh and ok: tmp is DIR now */
    for (int i = 0; i < l.n && plans; i++) free(plans[i]);
    free(plans);
    free(dup_of);
    lines_free(&l);
    if (!rc) fprintf(stderr, "fa4gen: bundle: %d kernels\n", n);
    return rc;
}

/* The parsed command: the kind the command names, then emit or explain. */
static int run_cli(Cli *cli, const char *cmd, int kind, const char *explain_kind)
{
    if (kind >= 0 && cli->cfg.kind != KIND_MHA && (int)cli->cfg.kind != kind) { /* KIND_MHA: config_init's */
        say("kind: the config names %s but the command is %s; use fa4gen %s", kind_name[cli->cfg.kind], cmd,
            kind_name[cli->cfg.kind]);
        return 2;
    }
    if (explain_kind || kind >= 0) {
        char err[512];
        if (config_set(&cli->cfg, "kind", kind >= 0 ? cmd : explain_kind, err, sizeof err)) return invalid(err);
    }
    return kind >= 0 ? cmd_emit(cli) : cmd_explain(cli);
}

static int run(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(usage_top, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("fa4gen %s\n", fa4gen_build_id());
        return 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "bundle")) return cmd_bundle(argc, argv);
    int kind = -1; /* a kernel kind's name is the command that emits it */
    for (int k = 0; k < KIND_COUNT; k++)
        if (!strcmp(cmd, kind_name[k])) kind = k;
    if (kind < 0 && strcmp(cmd, "explain")) {
        char kinds[64] = "";
        for (int k = 0; k < KIND_COUNT; k++) snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s, ", kind_name[k]);
        say("'%s' is not a command; use %sexplain or bundle (fa4gen --help)", cmd, kinds);
        return 2;
    }
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_mha, stdout);
            return 0;
        }
    Cli cli = {0};
    int first = 2;
    if (!strcmp(cmd, "explain") && argc > 2 && argv[2][0] != '-') {
        /* explain KIND ... */
        first = 3;
    }
    int rc = parse_flags(&cli, argc, argv, first, kind >= 0 ? USE_OUT | USE_CONFIG : USE_JSON | USE_CONFIG, cmd);
    if (!rc) rc = run_cli(&cli, cmd, kind, first == 3 ? argv[2] : NULL);
    free(cli.mod_src);
    return rc;
}

int main(int argc, char **argv)
{
    int rc = run(argc, argv);
    /* what went to stdout (PTX, a plan, help, a bundle's listing) must have arrived */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        say("cannot write to stdout: %s", strerror(errno ? errno : EIO));
        if (!rc) rc = 1;
    }
    return rc;
}
