/* cli_predict.c - `fa4gen explain --predict GPU`: after the plan, the config's predicted time on a GPU,
 * its bottleneck and each unit's busy share for one shape. The numbers are the simulator's timing mode
 * (tests/sim/TIMING.md): the config's PTX run on the CPU under a table of the GPU's rates. fa4gen does
 * not link the simulator: it runs the simulator's `timecase` program (built beside fa4gen, in
 * build/sim/, with the simulated driver libcuda.so.1; or FA4GEN_TIMECASE names it) with the runtime's
 * real launch path pointed at that driver, a private cache folder, and the table, then reads back the
 * lines the simulator prints (fa4sim-table, fa4sim-timing per launch, PRED). Evidence level: modelled
 * (DESIGN.md) -- the table used and its stated validation are printed with every prediction. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_predict.h"

extern char **environ;

enum { OUT_MAX = 1 << 20, LAUNCH_MAX = 8, ENV_MAX = 512 };

/* The GPUs by name: the table of the simulator's tests/sim/gpus/ and the target whose PTX they run. */
static const struct { const char *name; TargetId target; int cc; } gpus[] = {
    {"h100", TARGET_SM90A, 90}, {"h200", TARGET_SM90A, 90}, {"b200", TARGET_SM100A, 100}, {"b300", TARGET_SM103A, 103},
};
/* The simulated device's compute capability of each target (a table file runs the config's). */
static const int target_cc[TARGET_COUNT] = {[TARGET_SM90A] = 90, [TARGET_SM100A] = 100, [TARGET_SM103A] = 103};

int predict_gpu_target(const char *gpu)
{
    for (size_t i = 0; gpu && i < sizeof gpus / sizeof gpus[0]; i++)
        if (!strcmp(gpu, gpus[i].name)) return (int)gpus[i].target;
    return -1;
}

/* ---------------------------------------------------------------- flags */

static const struct { const char *flag; size_t off; int lo, hi; } shape_flags[] = {
    {"--batch", offsetof(PredictArgs, batch), 1, 4096},
    {"--heads", offsetof(PredictArgs, heads), 1, 4096},
    {"--seqlen-q", offsetof(PredictArgs, seqlen_q), 1, 1 << 20},
    {"--seqlen-k", offsetof(PredictArgs, seqlen_k), 1, 1 << 20},
    {"--topk", offsetof(PredictArgs, topk), 1, 1 << 16},
    {"--samples", offsetof(PredictArgs, samples), 1, 64},
};

int predict_flag(PredictArgs *p, const char *a, const char *v, char *err, size_t n)
{
    if (!strcmp(a, "--predict")) {
        if (p->gpu) return snprintf(err, n, "--predict: given twice ('%s' and '%s'); give one GPU", p->gpu, v), -1;
        if (!v[0]) return snprintf(err, n, "--predict: empty; give h100, h200, b200, b300 or a table file"), -1;
        p->gpu = v;
        return 1;
    }
    for (size_t i = 0; i < sizeof shape_flags / sizeof shape_flags[0]; i++) {
        if (strcmp(a, shape_flags[i].flag)) continue;
        int x, *dst = (int *)((char *)p + shape_flags[i].off);
        if (*dst) return snprintf(err, n, "%s: given twice; give it once", a), -1;
        if (parse_int(v, &x) || x < shape_flags[i].lo || x > shape_flags[i].hi)
            return snprintf(err, n, "%s: '%.40s' is not an integer in %d..%d", a, v, shape_flags[i].lo, shape_flags[i].hi), -1;
        *dst = x;
        if (!p->shape_flag) p->shape_flag = shape_flags[i].flag;
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- the case */

/* What timecase can pass: dense tensors, no per-call extras. The first config word it cannot, or NULL. */
static const char *unpredictable(const Config *c)
{
    if (c->kind != KIND_MHA && c->kind != KIND_MLA_SPARSE) return "kind (only mha and mla-sparse kernels are predicted)";
    if (c->kind == KIND_MLA_SPARSE) return NULL;
    return c->mask == MASK_WINDOW ? "mask=window" : c->split ? "split=1" : c->cluster_split ? "cluster"
         : c->varlen ? "varlen=1" : c->page ? "page" : c->sink ? "sink=1" : c->softcap ? "softcap=1"
         : c->alibi ? "alibi=1" : c->score_mod ? "mod (a score_mod)" : c->rope_split ? "rope_split=1" : NULL;
}

typedef struct { char v[24][300]; int n; } Words;

/* key=value words of the case (value a string or an int); -1 when one does not fit */
static int word_s(Words *w, const char *key, const char *v)
{
    if (w->n >= 24) return -1;
    int k = snprintf(w->v[w->n], sizeof w->v[0], "%s=%s", key, v);
    if (k < 0 || (size_t)k >= sizeof w->v[0]) return -1;
    w->n++;
    return 0;
}

static int word_i(Words *w, const char *key, int v)
{
    char t[16];
    snprintf(t, sizeof t, "%d", v);
    return word_s(w, key, t);
}

/* The shape with its defaults filled in (the kind's; documented in explain --help). */
static void shape_defaults(const Config *c, PredictArgs *s)
{
    int mla = c->kind == KIND_MLA_SPARSE;
    if (!s->batch) s->batch = mla ? 1 : 2;
    if (!s->heads) s->heads = mla ? 128 : 16;
    if (!s->seqlen_q) s->seqlen_q = mla ? 64 : 2048;
    if (!s->seqlen_k) s->seqlen_k = mla ? 8192 : 2048;
    if (!s->topk) s->topk = 2048;
    if (!s->samples) s->samples = 2;
}

/* timecase's words for the config and shape; 0, or 2 with a message. */
static int case_words(const Plan *plan, const PredictArgs *s, Words *w, char *err, size_t n)
{
    const Config *c = &plan->cfg;
    static const char *const dt[] = {[DT_BF16] = "bf16", [DT_FP16] = "fp16", [DT_E4M3] = "e4m3"};
    int mla = c->kind == KIND_MLA_SPARSE, bad = 0;
    if (mla && s->batch != 1) return snprintf(err, n, "--batch: a sparse MLA call has no batch (give the tokens as --seqlen-q)"), 2;
    if (!mla && s->topk != 2048) return snprintf(err, n, "--topk: only for mla-sparse"), 2;
    if (!mla && s->heads % c->group)
        return snprintf(err, n, "--heads %d: not a multiple of the config's group %d (query heads per KV head)", s->heads, c->group), 2;
    if (strlen(plan->canonical) > 240) /* timecase's word limit */
        return snprintf(err, n, "--predict: the config's text is longer than the simulator's case takes (240 characters)"), 2;
    bad |= word_s(w, "kind", mla ? "mla" : "mha");
    bad |= word_s(w, "target", target_name[c->target]);
    bad |= word_s(w, "dtype", dt[c->dtype]);
    if (!mla) {
        bad |= word_i(w, "batch", s->batch);
        bad |= word_i(w, "hkv", s->heads / c->group);
        bad |= word_i(w, "ov", c->ov_depth);
        bad |= word_s(w, "mask", c->mask == MASK_CAUSAL ? "causal" : "none");
    } else {
        bad |= word_i(w, "topk", s->topk);
    }
    bad |= word_i(w, "hq", s->heads);
    bad |= word_i(w, "qk", c->qk_depth);
    bad |= word_i(w, "sq", s->seqlen_q);
    bad |= word_i(w, "sk", s->seqlen_k);
    bad |= word_s(w, "config", plan->canonical);
    if (bad) return snprintf(err, n, "internal: the simulator's case words do not fit"), 1;
    return 0;
}

/* ---------------------------------------------------------------- the simulator's program */

/* FA4GEN_TIMECASE, else sim/timecase beside this program; 0, or 1 with a message. */
static int find_timecase(char *path, size_t cap, char *err, size_t n)
{
    const char *env = getenv("FA4GEN_TIMECASE");
    if (env && *env) {
        if (snprintf(path, cap, "%s", env) >= (int)cap) return snprintf(err, n, "FA4GEN_TIMECASE: path too long"), 1;
    } else {
        char self[PATH_MAX];
        ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
        if (k <= 0) return snprintf(err, n, "--predict: cannot find this program's folder; set FA4GEN_TIMECASE to the simulator's timecase"), 1;
        self[k] = 0;
        char *slash = strrchr(self, '/');
        if (slash) *slash = 0;
        if (snprintf(path, cap, "%s/sim/timecase", self) >= (int)cap) return snprintf(err, n, "--predict: path too long"), 1;
    }
    char lib[PATH_MAX + 32];
    const char *slash = strrchr(path, '/');
    snprintf(lib, sizeof lib, "%.*s/libcuda.so.1", slash ? (int)(slash - path) : 1, slash ? path : ".");
    if (access(path, X_OK) || access(lib, R_OK))
        return snprintf(err, n, "--predict: the simulator is not built: %s%s not found (in the source tree: make "
                        "build/sim/timecase build/sim/libcuda.so.1; or set FA4GEN_TIMECASE to a built timecase, its "
                        "libcuda.so.1 beside it)", access(path, X_OK) ? path : lib, ""), 1;
    return 0;
}

/* The environment timecase runs in: the caller's, with the simulator's driver first on the library
 * path and its own settings (an FA4SIM_* the caller set that changes the device is dropped). */
static int child_env(char **env, char store[][PATH_MAX + 64], const char *dir, const char *cache, const char *gpu,
                     int cc, int samples)
{
    int k = 0;
    for (char **e = environ; *e && k < ENV_MAX - 8; e++) {
        static const char *const drop[] = {"LD_LIBRARY_PATH=", "FA4GEN_COMPILER=", "FA4GEN_CACHE_DIR=", "FA4SIM_CC=",
                                           "FA4SIM_SMS=", "FA4SIM_TIMING=", "FA4SIM_TIMING_SAMPLES=", "FA4SIM_PTX_REPLACE="};
        int keep = 1;
        for (size_t d = 0; d < sizeof drop / sizeof drop[0]; d++) keep &= strncmp(*e, drop[d], strlen(drop[d])) != 0;
        if (keep) env[k++] = *e;
    }
    snprintf(store[0], sizeof store[0], "LD_LIBRARY_PATH=%s", dir);
    snprintf(store[1], sizeof store[1], "FA4GEN_COMPILER=driver-ptx");
    snprintf(store[2], sizeof store[2], "FA4GEN_CACHE_DIR=%s", cache);
    snprintf(store[3], sizeof store[3], "FA4SIM_CC=%d", cc);
    snprintf(store[4], sizeof store[4], "FA4SIM_TIMING=%s", gpu);
    snprintf(store[5], sizeof store[5], "FA4SIM_TIMING_SAMPLES=%d", samples);
    for (int i = 0; i < 6; i++) env[k++] = store[i];
    env[k] = NULL;
    return 0;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)f;
    return flag == FTW_DP ? rmdir(p) : unlink(p);
}

/* Runs timecase with words; its stdout and stderr together in *text (malloc'd). 0, or 1 with a message. */
static int run_timecase(const char *exe, const Words *w, const char *gpu, int cc, int samples, char **text, int *status,
                        char *err, size_t n)
{
    char dir[PATH_MAX], cache[PATH_MAX], store[6][PATH_MAX + 64];
    char *argv[32], *env[ENV_MAX];
    snprintf(dir, sizeof dir, "%s", exe);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    const char *tmp = getenv("TMPDIR");
    snprintf(cache, sizeof cache, "%s/fa4gen-predict-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(cache)) return snprintf(err, n, "--predict: cannot make a private folder: %s", strerror(errno)), 1;
    int a = 0;
    argv[a++] = (char *)exe;
    argv[a++] = "--iters";
    argv[a++] = "1";
    for (int i = 0; i < w->n; i++) argv[a++] = (char *)w->v[i];
    argv[a] = NULL;
    child_env(env, store, dir, cache, gpu, cc, samples);
    int fd[2], rc = 1;
    pid_t pid;
    *text = NULL;
    if (pipe(fd)) {
        snprintf(err, n, "--predict: pipe: %s", strerror(errno));
        goto out;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
    posix_spawn_file_actions_addclose(&fa, fd[1]);
    int e = posix_spawn(&pid, exe, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (e) {
        close(fd[0]);
        snprintf(err, n, "--predict: cannot run %s: %s", exe, strerror(e));
        goto out;
    }
    size_t len = 0;
    char *buf = malloc(OUT_MAX + 1);
    ssize_t k = 1;
    while (buf && (k = read(fd[0], buf + len, OUT_MAX - len)) != 0) {
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 || (len += (size_t)k) == OUT_MAX) break;
    }
    close(fd[0]);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {}
    if (!buf) {
        snprintf(err, n, "--predict: out of memory");
        goto out;
    }
    buf[len] = 0;
    *text = buf;
    rc = 0;
out:
    nftw(cache, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    return rc;
}

/* ---------------------------------------------------------------- its lines */

/* The value of key= in line (up to the next space, or the line's end with whole=1) into v. */
static int field(const char *line, const char *key, char *v, size_t cap, int whole)
{
    char pat[48];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(line, pat);
    if (!p) return -1;
    p += strlen(pat);
    size_t k = whole ? strcspn(p, "\n") : strcspn(p, " \n");
    snprintf(v, cap, "%.*s", (int)(k < cap ? k : cap - 1), p);
    return 0;
}

/* One launch's lines of the prediction from its fa4sim-timing line. */
static void print_launch(FILE *out, const char *line)
{
    static const char *const keys[] = {"grid", "cluster", "block", "smem", "predicted_us", "waves", "occupancy", "tflops",
                                       "bottleneck", "hbm_us", "dram_us"};
    char name[96] = "?", f[sizeof keys / sizeof keys[0]][64] = {{0}};
    sscanf(line, "fa4sim-timing: %95s", name);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (field(line, keys[i], f[i], sizeof f[i], 0)) snprintf(f[i], sizeof f[i], "?");
    const char *util = strstr(line, " util: "), *sens = strstr(line, " sens:");
    fprintf(out, "  launch      %s grid=%s cluster=%s block=%s smem=%s waves=%s occupancy=%s\n", name, f[0], f[1], f[2],
            f[3], f[5], f[6]);
    fprintf(out, "  time        %s us (tensor core %s TFLOP/s issued; HBM bound %s us; makespan under the shared DRAM %s us)\n",
            f[4], f[7], f[9], f[10]);
    fprintf(out, "  bottleneck  %s\n", f[8]);
    if (util) {
        size_t k = sens ? (size_t)(sens - util - 7) : strcspn(util + 7, "\n");
        fprintf(out, "  busy        %.*s\n", (int)k, util + 7);
    }
    if (sens) fprintf(out, "  sensitivity %.*s (each assumed value at 0.75x / 1.25x)\n", (int)strcspn(sens + 1, "\n"), sens + 1);
}

/* What timecase printed: its table, launch and prediction lines, and their fields. */
typedef struct {
    const char *launch[LAUNCH_MAX];
    int nl;
    char gpu[64], path[512], assumed[16], valid[300], us[32];
} Parsed;

/* timecase's output parsed; 0, or 1 with a message (the simulator's own words). Missing fields read `dflt`. */
static int parse_prediction(const char *text, const char *dflt, Parsed *r, char *err, size_t n)
{
    const char *table = NULL, *pred = NULL;
    r->nl = 0;
    for (const char *l = text; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] == '\n')) {
        if (!strncmp(l, "fa4sim-table:", 13)) table = l;
        else if (!strncmp(l, "fa4sim-timing:", 14) && r->nl < LAUNCH_MAX) r->launch[r->nl++] = l;
        else if (!strncmp(l, "PRED ", 5)) pred = l;
        else if (!strncmp(l, "FAIL ", 5) || !strncmp(l, "fa4sim: ", 8) || !strncmp(l, "timecase: usage", 15) ||
                 (!strncmp(l, "timecase: ", 10) && !strstr(l, " run, ")))
            return snprintf(err, n, "--predict: the simulator refused the case: %.*s", (int)strcspn(l, "\n"), l), 1;
    }
    if (!table || !pred || !r->nl) return snprintf(err, n, "--predict: the simulator printed no prediction"), 1;
    char *const f[] = {r->gpu, r->path, r->assumed, r->valid, r->us};
    const size_t cap[] = {sizeof r->gpu, sizeof r->path, sizeof r->assumed, sizeof r->valid, sizeof r->us};
    for (int i = 0; i < 5; i++) snprintf(f[i], cap[i], "%s", dflt);
    field(table, "gpu", r->gpu, sizeof r->gpu, 0);
    field(table, "path", r->path, sizeof r->path, 0);
    field(table, "assumed", r->assumed, sizeof r->assumed, 0);
    field(table, "validation", r->valid, sizeof r->valid, 1);
    field(pred, "us", r->us, sizeof r->us, 0);
    return 0;
}

/* The prediction from timecase's output; 0, or 1 with a message. */
static int print_prediction(FILE *out, const char *text, const PredictArgs *s, const Plan *plan, char *err, size_t n)
{
    Parsed r;
    if (parse_prediction(text, "?", &r, err, n)) return 1;
    const Config *c = &plan->cfg;
    fprintf(out, "\nprediction  modelled (the simulator's timing mode on this config's PTX; not a measurement)\n");
    fprintf(out, "  gpu         %s (table %s; %s values assumed)\n", r.gpu, r.path, r.assumed);
    fprintf(out, "  validation  %s\n", r.valid);
    if (c->kind == KIND_MLA_SPARSE)
        fprintf(out, "  shape       seqlen_q=%d seqlen_k=%d heads=%d topk=%d (at most %d clusters simulated per launch)\n",
                s->seqlen_q, s->seqlen_k, s->heads, s->topk, s->samples);
    else
        fprintf(out, "  shape       batch=%d heads_q=%d heads_kv=%d seqlen_q=%d seqlen_k=%d (at most %d clusters simulated per launch)\n",
                s->batch, s->heads, s->heads / c->group, s->seqlen_q, s->seqlen_k, s->samples);
    for (int i = 0; i < r.nl; i++) print_launch(out, r.launch[i]);
    fprintf(out, "  total       %s us\n", r.us);
    return 0;
}

/* ---------------------------------------------------------------- its lines as JSON */

static void json_text(FILE *out, const char *s, size_t len)
{
    fputc('"', out);
    for (size_t i = 0; i < len && s[i]; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') fprintf(out, "\\%c", ch);
        else if (ch < 0x20) fprintf(out, "\\u%04x", ch);
        else fputc(ch, out);
    }
    fputc('"', out);
}

/* A number the simulator printed, as a JSON number (null when it is not one: a NaN, a missing field). */
static void json_num(FILE *out, const char *v)
{
    char *end;
    double x = strtod(v, &end);
    int plus = *v == '+'; /* "+2.4%": JSON has no '+' */
    if (end == v || (*end && *end != '%' && *end != '/') || x != x) fputs("null", out);
    else fprintf(out, "%.*s", (int)(end - v - plus), v + plus);
}

/* "KEY=a% KEY=b% ..." up to end as {"KEY": a, ...}; with pair (the sensitivity), KEY=-a%/+b% as [a, b]. */
static void json_units(FILE *out, const char *s, const char *end, const char *prefix, int pair)
{
    int first = 1;
    fputc('{', out);
    while (s < end) {
        s += strspn(s, " ");
        if (s >= end || strncmp(s, prefix, strlen(prefix))) break;
        s += strlen(prefix);
        size_t k = strcspn(s, "= \n");
        if (s[k] != '=') break;
        fprintf(out, "%s", first ? "" : ", ");
        json_text(out, s, k);
        fputs(": ", out);
        const char *v = s + k + 1;
        if (pair) {
            const char *slash = strchr(v, '/');
            fputc('[', out);
            json_num(out, v);
            fputs(", ", out);
            json_num(out, slash && slash < end ? slash + 1 : "");
            fputc(']', out);
        } else {
            json_num(out, v);
        }
        first = 0;
        s = v + strcspn(v, " \n");
    }
    fputc('}', out);
}

/* One launch's object from its fa4sim-timing line. */
static void json_launch(FILE *out, const char *line)
{
    static const char *const keys[] = {"block", "smem", "waves", "occupancy", "predicted_us", "tflops", "hbm_us", "l2_us", "dram_us"};
    char name[96] = "?", v[64];
    unsigned g[3] = {0, 0, 0};
    sscanf(line, "fa4sim-timing: %95s", name);
    fputs("{\"kernel\": ", out);
    json_text(out, name, strlen(name));
    if (!field(line, "grid", v, sizeof v, 0)) sscanf(v, "%ux%ux%u", &g[0], &g[1], &g[2]);
    fprintf(out, ", \"grid\": [%u, %u, %u], \"cluster\": ", g[0], g[1], g[2]);
    json_num(out, field(line, "cluster", v, sizeof v, 0) ? "" : v);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        fprintf(out, ", \"%s\": ", keys[i]);
        json_num(out, field(line, keys[i], v, sizeof v, 0) ? "" : v);
    }
    fputs(", \"bottleneck\": ", out);
    if (field(line, "bottleneck", v, sizeof v, 0)) fputs("null", out);
    else json_text(out, v, strlen(v));
    const char *eol = line + strcspn(line, "\n"), *util = strstr(line, " util: "), *sens = strstr(line, " sens:");
    if (util && util > eol) util = NULL;
    if (sens && sens > eol) sens = NULL;
    fputs(", \"busy_percent\": ", out);
    if (util) json_units(out, util + 7, sens ? sens : eol, "", 0);
    else fputs("{}", out);
    if (sens) {
        fputs(", \"sensitivity_percent\": ", out);
        json_units(out, sens, eol, "sens:", 1);
    }
    fputc('}', out);
}

/* The prediction as one JSON object (explain --predict GPU --json): what print_prediction says, as data. */
static int print_prediction_json(FILE *out, const char *text, const PredictArgs *s, const Plan *plan, char *err,
                                 size_t n)
{
    Parsed r;
    if (parse_prediction(text, "", &r, err, n)) return 1;
    int n_assumed = -1, n_values = -1;
    sscanf(r.assumed, "%d/%d", &n_assumed, &n_values);
    const Config *c = &plan->cfg;
    fputs("{\"evidence\": \"modelled\", \"config\": ", out);
    json_text(out, plan->canonical, strlen(plan->canonical));
    fputs(", \"symbol\": ", out);
    json_text(out, plan->symbol, strlen(plan->symbol));
    fputs(", \"gpu\": ", out);
    json_text(out, r.gpu, strlen(r.gpu));
    fputs(", \"table\": ", out);
    json_text(out, r.path, strlen(r.path));
    fprintf(out, ", \"assumed_values\": %d, \"table_values\": %d, \"validation\": ", n_assumed, n_values);
    json_text(out, r.valid, strlen(r.valid));
    if (c->kind == KIND_MLA_SPARSE)
        fprintf(out, ", \"shape\": {\"seqlen_q\": %d, \"seqlen_k\": %d, \"heads\": %d, \"topk\": %d}", s->seqlen_q,
                s->seqlen_k, s->heads, s->topk);
    else
        fprintf(out, ", \"shape\": {\"batch\": %d, \"heads_q\": %d, \"heads_kv\": %d, \"seqlen_q\": %d, "
                "\"seqlen_k\": %d}", s->batch, s->heads, s->heads / c->group, s->seqlen_q, s->seqlen_k);
    fprintf(out, ", \"samples\": %d, \"launches\": [", s->samples);
    for (int i = 0; i < r.nl; i++) {
        fputs(i ? ", " : "", out);
        json_launch(out, r.launch[i]);
    }
    fputs("], \"total_us\": ", out);
    json_num(out, r.us);
    fputs("}\n", out);
    return 0;
}

/* ---------------------------------------------------------------- the command */

/* The table's GPU: its cc and target (-1 for a table file: the config's target decides). */
static int gpu_of(const char *g, const Config *c, int *cc, char *err, size_t n)
{
    for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
        if (strcmp(g, gpus[i].name)) continue;
        if (gpus[i].target != c->target) {
            char fit[64] = ""; /* the GPUs of the config's target */
            for (size_t j = 0; j < sizeof gpus / sizeof gpus[0]; j++)
                if (gpus[j].target == c->target)
                    snprintf(fit + strlen(fit), sizeof fit - strlen(fit), "%s%s", fit[0] ? " or " : "", gpus[j].name);
            return snprintf(err, n, "--predict %s: an %s GPU, but the config's target is %s (give %s, or --target %s; "
                            "without --target the GPU's is taken)", g, target_name[gpus[i].target],
                            target_name[c->target], fit, target_name[gpus[i].target]), 2;
        }
        *cc = gpus[i].cc;
        return 0;
    }
    if (!strchr(g, '/') && !strstr(g, ".tbl"))
        return snprintf(err, n, "--predict: '%.60s' is not a GPU; give h100, h200, b200, b300 or a table file (*.tbl)", g), 2;
    if (access(g, R_OK)) return snprintf(err, n, "--predict: cannot read the table '%.200s': %s", g, strerror(errno)), 2;
    *cc = target_cc[c->target];
    return 0;
}

/* Everything that can refuse before the simulator runs; the shape with its defaults in *s, timecase's
 * words in *w and its path in exe. */
static int prepare(const PredictArgs *p, const Plan *plan, PredictArgs *s, Words *w, int *cc, char *exe, size_t cap,
                   char *err, size_t n)
{
    const char *why = unpredictable(&plan->cfg);
    if (why) return snprintf(err, n, "--predict: a config with %s is not predicted (the simulator's timecase passes "
                             "dense Q, K, V and no per-call extras)", why), 2;
    int rc = gpu_of(p->gpu, &plan->cfg, cc, err, n);
    if (rc) return rc;
    *s = *p;
    shape_defaults(&plan->cfg, s);
    w->n = 0;
    if ((rc = case_words(plan, s, w, err, n))) return rc;
    return find_timecase(exe, cap, err, n);
}

int predict_check(const PredictArgs *p, const Plan *plan, char *err, size_t n)
{
    PredictArgs s;
    Words w;
    char exe[PATH_MAX];
    int cc;
    return prepare(p, plan, &s, &w, &cc, exe, sizeof exe, err, n);
}

int predict_run(const PredictArgs *p, const Plan *plan, FILE *out, char *err, size_t n)
{
    PredictArgs s;
    Words w;
    char exe[PATH_MAX], gpu[PATH_MAX], *text = NULL;
    int cc = 0, rc = prepare(p, plan, &s, &w, &cc, exe, sizeof exe, err, n);
    if (rc) return rc;
    /* a table file by its absolute path (the name must not depend on where timecase runs) */
    if (!((strchr(p->gpu, '/') || strstr(p->gpu, ".tbl")) && realpath(p->gpu, gpu))) snprintf(gpu, sizeof gpu, "%s", p->gpu);
    int status = 0;
    if ((rc = run_timecase(exe, &w, gpu, cc, s.samples, &text, &status, err, n))) return rc;
    rc = p->json ? print_prediction_json(out, text, &s, plan, err, n) : print_prediction(out, text, &s, plan, err, n);
    if (!rc && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        rc = 1, snprintf(err, n, "--predict: the simulator's timecase failed (status %d)", status);
    free(text);
    return rc;
}
