/* harness.c - see harness.h. */
#include "harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int errf(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

const char *cu_error(const Cu *cu, CUresult r)
{
    const char *s = NULL;
    if (cu->GetErrorString && cu->GetErrorString(r, &s) == CUDA_SUCCESS && s) return s;
    return "unknown CUDA error";
}

static int cu_resolve(void *lib, const char *name, void *slot, char *err, size_t n)
{
    void *p = dlsym(lib, name);
    if (!p) return errf(err, n, "libcuda.so.1 has no %s", name);
    memcpy(slot, &p, sizeof p); /* POSIX: data and function pointers convert */
    return 0;
}

int cu_open(Cu *cu, char *err, size_t n)
{
    memset(cu, 0, sizeof *cu);
    cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu->lib) return errf(err, n, "dlopen(libcuda.so.1): %s", dlerror());
    const struct { const char *name; void *slot; } syms[] = {
        {"cuGetErrorString", &cu->GetErrorString}, {"cuInit", &cu->Init}, {"cuDeviceGet", &cu->DeviceGet},
        {"cuDevicePrimaryCtxRetain", &cu->DevicePrimaryCtxRetain}, {"cuCtxSetCurrent", &cu->CtxSetCurrent},
        {"cuMemAlloc_v2", &cu->MemAlloc}, {"cuMemFree_v2", &cu->MemFree}, {"cuMemcpyHtoD_v2", &cu->MemcpyHtoD},
        {"cuMemcpyDtoH_v2", &cu->MemcpyDtoH}, {"cuMemsetD8_v2", &cu->MemsetD8},
        {"cuCtxSynchronize", &cu->CtxSynchronize},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (cu_resolve(cu->lib, syms[i].name, syms[i].slot, err, n)) return -1;
    CUresult r;
    const char *what = "cuInit";
    if ((r = cu->Init(0)) || (what = "cuDeviceGet", r = cu->DeviceGet(&cu->dev, 0)) ||
        (what = "cuDevicePrimaryCtxRetain", r = cu->DevicePrimaryCtxRetain(&cu->ctx, cu->dev)) ||
        (what = "cuCtxSetCurrent", r = cu->CtxSetCurrent(cu->ctx)))
        return errf(err, n, "%s: %s", what, cu_error(cu, r));
    return 0;
}

int split_words(const char *s, char words[][WORD_MAX], int max, char *err, size_t n)
{
    int count = 0;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
        if (!*p || *p == '#') return count;
        if (count == max) return errf(err, n, "more than %d words", max);
        size_t o = 0;
        int quoted = 0;
        for (; *p && (quoted || (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n' && *p != '#')); p++) {
            if (*p == '"') {
                quoted = !quoted;
                continue;
            }
            if (o + 1 >= WORD_MAX) return errf(err, n, "a word is longer than %d characters", WORD_MAX - 1);
            words[count][o++] = *p;
        }
        if (quoted) return errf(err, n, "unterminated quote");
        words[count++][o] = 0;
    }
}

int word_int(const char *key, const char *v, long lo, long hi, int *out, char *err, size_t n)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi)
        return errf(err, n, "%s=%s: expected an integer in %ld..%ld", key, v, lo, hi);
    *out = (int)x;
    return 0;
}

int word_choice(const char *key, const char *v, const char *const *names, int count, int *out, char *err,
                        size_t n)
{
    for (int i = 0; i < count; i++)
        if (!strcmp(v, names[i])) return *out = i, 0;
    char list[128] = "";
    for (int i = 0; i < count; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    return errf(err, n, "%s=%s: expected one of %s", key, v, list);
}

int word_config(const char *v, char *dst, size_t cap, char *err, size_t n)
{
    if (strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_=:,.- ") != strlen(v))
        return errf(err, n, "config=\"%s\": expected kernel config words like \"bn=64 stages=3\"", v);
    size_t o = 0;
    for (const char *p = v; *p; p++) {
        if (*p == ' ' && (o == 0 || dst[o - 1] == ' ')) continue;
        if (o + 1 >= cap) return errf(err, n, "config: longer than %zu characters", cap - 1);
        dst[o++] = *p;
    }
    while (o && dst[o - 1] == ' ') o--;
    dst[o] = 0;
    return 0;
}

uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t fnv1a(const void *data, size_t n, uint64_t h)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double abs_diff(double a, double b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0.0 : INFINITY;
    if (a == b) return 0.0;
    return fabs(a - b);
}

void check(Checks *k, int ok, const char *fmt, ...)
{
    k->run++;
    if (ok) return;
    k->failed++;
    va_list ap;
    va_start(ap, fmt);
    printf("self-test FAILED: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

int case_key(const CaseSyntax *sx, const char *key)
{
    for (int i = 0; i < sx->nkeys; i++)
        if (!strcmp(key, sx->keys[i])) return i;
    return -1;
}

/* Applies one "key=value" word; seen[] catches repeats. */
static int case_word(const CaseSyntax *sx, void *c, int *seen, const char *word, char *err, size_t n)
{
    const char *eq = strchr(word, '=');
    char key[32];
    if (!eq || eq == word || (size_t)(eq - word) >= sizeof key)
        return errf(err, n, "'%s': expected key=value", word);
    memcpy(key, word, (size_t)(eq - word));
    key[eq - word] = 0;
    int k = case_key(sx, key);
    if (k < 0) {
        char list[512] = "";
        for (int i = 0; i < sx->nkeys; i++) snprintf(list + strlen(list), sizeof list - strlen(list), " %s", sx->keys[i]);
        return errf(err, n, "unknown key '%s' (keys:%s)", key, list);
    }
    if (seen[k]) return errf(err, n, "key '%s' given twice", key);
    seen[k] = 1;
    return sx->set_key(c, k, eq + 1, err, n);
}

int case_words(const CaseSyntax *sx, char words[][WORD_MAX], int count, void *c, char *err, size_t n)
{
    int seen[KEYS_MAX] = {0};
    sx->defaults(c);
    for (int i = 0; i < count; i++)
        if (case_word(sx, c, seen, words[i], err, n)) return -1;
    return sx->finish(c, seen, err, n);
}

int case_line(const CaseSyntax *sx, const char *line, void *c, char *err, size_t n)
{
    char words[WORDS_MAX][WORD_MAX];
    int count = split_words(line, words, WORDS_MAX, err, n);
    if (count <= 0) return count;
    return case_words(sx, words, count, c, err, n) ? -1 : 1;
}

int case_list_add(const CaseSyntax *sx, CaseList *l, const void *c)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        void *v = realloc(l->v, sx->size * (size_t)cap);
        if (!v) return -1;
        l->v = v, l->cap = cap;
    }
    memcpy((char *)l->v + sx->size * (size_t)l->n++, c, sx->size);
    return 0;
}

int case_load(const CaseSyntax *sx, const char *path, CaseList *l)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: cannot open %s: %s\n", sx->prog, path, strerror(errno));
        return -1;
    }
    char line[LINE_MAX_CHARS], err[512];
    void *c = malloc(sx->size);
    int lineno = 0, rc = c ? 0 : -1;
    while (c && fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            fprintf(stderr, "%s: %s:%d: line longer than %d characters\n", sx->prog, path, lineno, LINE_MAX_CHARS - 2);
            rc = -1;
            break;
        }
        int k = case_line(sx, line, c, err, sizeof err);
        if (k < 0) {
            fprintf(stderr, "%s: %s:%d: %s\n", sx->prog, path, lineno, err);
            rc = -1; /* report every bad line, then stop */
        } else if (k > 0 && case_list_add(sx, l, c)) {
            rc = -1;
            break;
        }
    }
    if (!c || (rc && lineno == 0)) fprintf(stderr, "%s: out of memory\n", sx->prog);
    free(c);
    fclose(f);
    if (!rc && !l->n) {
        fprintf(stderr, "%s: %s holds no case\n", sx->prog, path);
        rc = -1;
    }
    return rc;
}

int parse_u64(const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!*v || *v == '-' || *v == '+' || *v == ' ') return -1;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || errno) return -1;
    *out = x;
    return 0;
}

int case_argv(const CaseSyntax *sx, int argc, char **argv, Opts *o, char words[][WORD_MAX], int *nwords)
{
    *nwords = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--self-test")) o->self_test = 1;
        else if (!strcmp(a, "--quiet")) o->quiet = 1;
        else if (!strcmp(a, "--no-skip")) o->no_skip = 1;
        else if (sx->has_plan && !strcmp(a, "--plan")) o->plan = 1;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            sx->usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--seed") || !strcmp(a, "--cases") || !strcmp(a, "--dump") || !strcmp(a, "--compare")) {
            if (!val) return fprintf(stderr, "%s: %s needs a value\n", sx->prog, a), 2;
            i++;
            if (!strcmp(a, "--seed") && parse_u64(val, &o->seed))
                return fprintf(stderr, "%s: --seed %s: expected an unsigned integer\n", sx->prog, val), 2;
            if (!strcmp(a, "--cases")) o->cases_file = val;
            if (!strcmp(a, "--dump")) o->dump_dir = val;
            if (!strcmp(a, "--compare")) o->compare_dir = val;
        } else {
            /* a case word: key=value, --key=value or --key value */
            const char *w = a[0] == '-' && a[1] == '-' ? a + 2 : a;
            char word[WORD_MAX];
            if (a != w && !strchr(w, '=')) {
                if (case_key(sx, w) < 0) return fprintf(stderr, "%s: unknown option %s\n", sx->prog, a), sx->usage(stderr), 2;
                if (!val) return fprintf(stderr, "%s: %s needs a value\n", sx->prog, a), 2;
                snprintf(word, sizeof word, "%s=%s", w, val);
                i++;
            } else if (!strchr(w, '=')) {
                return fprintf(stderr, "%s: unexpected argument '%s'\n", sx->prog, a), sx->usage(stderr), 2;
            } else {
                snprintf(word, sizeof word, "%s", w);
            }
            if (*nwords == WORDS_MAX) return fprintf(stderr, "%s: more than %d case words\n", sx->prog, WORDS_MAX), 2;
            snprintf(words[(*nwords)++], WORD_MAX, "%s", word);
        }
    }
    return 0;
}

int case_collect(const CaseSyntax *sx, const Opts *o, char words[][WORD_MAX], int nwords, CaseList *l)
{
    if (o->cases_file && nwords)
        return fprintf(stderr, "%s: give --cases FILE or one case's words, not both\n", sx->prog), -1;
    if (o->cases_file) return case_load(sx, o->cases_file, l);
    if (!nwords) return fprintf(stderr, "%s: no case (--cases FILE or case words)\n", sx->prog), sx->usage(stderr), -1;
    void *c = malloc(sx->size);
    char err[512];
    int rc = !c ? -1 : case_words(sx, words, nwords, c, err, sizeof err) ? (fprintf(stderr, "%s: case: %s\n", sx->prog, err), -1)
                                                                     : case_list_add(sx, l, c);
    free(c);
    return rc;
}

static int run_cases(const CaseRunner *r, void *env, Cu *cu, const Opts *o, const CaseList *l)
{
    char err[512];
    if (cu_open(cu, err, sizeof err)) {
        fprintf(stderr, "%s: driver: %s\n", r->sx->prog, err);
        return 2;
    }
    if (!o->quiet) printf("%s: %d cases, seed %" PRIu64 "\n", r->sx->prog, l->n, o->seed);
    Tally t = {0, 0, 0, 0, 0};
    for (int i = 0; i < l->n; i++) {
        int compared = 0;
        CaseVerdict v = r->run(env, (const char *)l->v + (size_t)i * r->sx->size, &compared);
        t.pass += v == CASE_PASS, t.fail += v == CASE_FAIL, t.skip += v == CASE_SKIP;
        t.compared += compared == 1, t.missing += compared == -1;
    }
    if (r->done) r->done(env, &t);
    printf("%s: %d passed, %d failed, %d skipped\n", r->sx->prog, t.pass, t.fail, t.skip);
    return t.fail ? 1 : 0;
}

int case_main(const CaseRunner *r, void *env, Cu *cu, Opts *o, int argc, char **argv)
{
    static char words[WORDS_MAX][WORD_MAX];
    int nwords;
    int rc = case_argv(r->sx, argc, argv, o, words, &nwords);
    if (rc) return rc;
    if (o->self_test) return r->self_test();
    CaseList l = {NULL, 0, 0};
    if (case_collect(r->sx, o, words, nwords, &l)) return free(l.v), 2;
    rc = o->plan && r->plan ? r->plan(env, &l) : run_cases(r, env, cu, o, &l);
    free(l.v);
    return rc;
}

int case_lines_open(CaseLines *cl, const char *path, const char *words)
{
    cl->f = path ? fopen(path, "r") : NULL;
    cl->words = path ? NULL : words;
    return path && !cl->f ? -1 : 0;
}

int case_lines_next(CaseLines *cl, char *line, size_t n)
{
    for (;;) {
        if (cl->f) {
            if (!fgets(line, (int)n, cl->f)) return 0;
        } else {
            if (!cl->words || !cl->words[0]) return 0;
            snprintf(line, n, "%s", cl->words);
            cl->words = NULL;
        }
        line[strcspn(line, "#\n")] = 0;
        if (line[strspn(line, " \t\r")]) return 1;
    }
}

void case_lines_close(CaseLines *cl)
{
    if (cl->f) fclose(cl->f);
    cl->f = NULL;
}

int kv_next(char **cursor, char **key, char **val, char *err, size_t n)
{
    char *w = *cursor + strspn(*cursor, " \t\r\n");
    if (!*w) return 0;
    size_t len = strcspn(w, " \t\r\n");
    *cursor = w[len] ? w + len + 1 : w + len;
    w[len] = 0;
    char *v = strchr(w, '=');
    if (!v) return errf(err, n, "'%s' is not key=value", w);
    *v++ = 0;
    *key = w, *val = v;
    return 1;
}
