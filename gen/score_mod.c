/* score_mod.c - a user's score_mod: NVRTC, the function read from its PTX, and the call
 * sites (see score_mod.h for the contract and the three ways the kernel reaches it).
 *
 * Guarantees: nothing here needs NVRTC until a source is compiled, and its absence is a
 * status (MOD_NO_NVRTC) with the paths tried; a compile error returns NVRTC's log. The
 * splice accepts only the forms it understands (parameter loads, one return value, local
 * labels) and refuses anything else with a sentence, so a mod never half-compiles.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudalibs.h"
#include "score_mod.h"
#include "softmax.h"

const char *const score_mod_link_name[MOD_LINK_COUNT] = {"splice", "call", "link"};

int score_mod_link_from_env(ScoreModLink *out, char *err, size_t n)
{
    const char *v = getenv("FA4GEN_SCORE_MOD_LINK");
    *out = MOD_SPLICE;
    if (!v || !v[0]) return 0;
    for (int i = 0; i < MOD_LINK_COUNT; i++)
        if (!strcmp(v, score_mod_link_name[i])) {
            *out = (ScoreModLink)i;
            return 0;
        }
    snprintf(err, n, "FA4GEN_SCORE_MOD_LINK: '%.32s' is not allowed; use splice, call or link", v);
    return -1;
}

uint64_t score_mod_hash(const char *src)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *s = (const unsigned char *)src; *s; s++) h = (h ^ *s) * 0x100000001b3ull;
    return h ? h : 1;
}

/* ---------------------------------------------------------------- NVRTC */

/* The few NVRTC entry points used (nvrtc.h's signatures; the results are ints, 0 = success). */
typedef struct NvrtcProg *NvrtcProgram;
typedef struct {
    void *lib;
    int (*Version)(int *, int *);
    int (*CreateProgram)(NvrtcProgram *, const char *, const char *, int, const char *const *,
                         const char *const *);
    int (*DestroyProgram)(NvrtcProgram *);
    int (*CompileProgram)(NvrtcProgram, int, const char *const *);
    int (*GetPTXSize)(NvrtcProgram, size_t *);
    int (*GetPTX)(NvrtcProgram, char *);
    int (*GetProgramLogSize)(NvrtcProgram, size_t *);
    int (*GetProgramLog)(NvrtcProgram, char *);
    const char *(*GetErrorString)(int);
} Nvrtc;

static int nvrtc_open(Nvrtc *r, char *err, size_t en)
{
    const char *off = getenv("FA4GEN_NO_NVRTC");
    memset(r, 0, sizeof *r);
    if (off && off[0] && strcmp(off, "0")) { /* tests: behave as on a machine without NVRTC */
        snprintf(err, en, "score_mod: NVRTC disabled by FA4GEN_NO_NVRTC; a score_mod is CUDA C compiled at run time "
                 "and needs it");
        return MOD_NO_NVRTC;
    }
    char why[640];
    if (!(r->lib = cudalib_open(CUDALIB_NVRTC, 0, NULL, why, sizeof why))) {
        snprintf(err, en, "score_mod: %s; a score_mod is CUDA C compiled at run time and needs it", why);
        return MOD_NO_NVRTC;
    }
    const struct { const char *name; void **fn; } syms[] = {
        {"nvrtcVersion", (void **)&r->Version}, {"nvrtcCreateProgram", (void **)&r->CreateProgram},
        {"nvrtcDestroyProgram", (void **)&r->DestroyProgram}, {"nvrtcCompileProgram", (void **)&r->CompileProgram},
        {"nvrtcGetPTXSize", (void **)&r->GetPTXSize}, {"nvrtcGetPTX", (void **)&r->GetPTX},
        {"nvrtcGetProgramLogSize", (void **)&r->GetProgramLogSize}, {"nvrtcGetProgramLog", (void **)&r->GetProgramLog},
        {"nvrtcGetErrorString", (void **)&r->GetErrorString}};
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *fn = dlsym(r->lib, syms[i].name);
        if (!fn) {
            snprintf(err, en, "score_mod: libnvrtc has no %s", syms[i].name);
            dlclose(r->lib);
            return MOD_NO_NVRTC;
        }
        memcpy(syms[i].fn, &fn, sizeof fn);
    }
    return MOD_OK;
}

int score_mod_nvrtc_version(char *buf, size_t n, char *err, size_t en)
{
    Nvrtc r;
    int rc = nvrtc_open(&r, err, en), major = 0, minor = 0;
    if (rc) return rc;
    if (r.Version(&major, &minor)) major = minor = 0;
    snprintf(buf, n, "nvrtc-%d.%d", major, minor);
    dlclose(r.lib);
    return MOD_OK;
}

/* The wrapper gives the user's function a C symbol and the exact signature the kernel calls. */
static const char wrapper[] =
    "\n// fa4gen: the symbol the kernel calls\n"
    "extern \"C\" __device__ float " SCORE_MOD_SYMBOL "(float s, int b, int h, int q, int k, const void *aux)\n"
    "{ return score_mod(s, b, h, q, k, aux); }\n";

int score_mod_compile(const char *src, const Target *t, char **ptx, char **log, char *err, size_t en)
{
    *ptx = *log = NULL;
    Nvrtc r;
    int rc = nvrtc_open(&r, err, en);
    if (rc) return rc;
    size_t ls = strlen(src);
    char *text = malloc(ls + sizeof wrapper);
    if (!text) {
        dlclose(r.lib);
        snprintf(err, en, "score_mod: out of memory");
        return MOD_COMPILE_ERROR;
    }
    memcpy(text, src, ls);
    memcpy(text + ls, wrapper, sizeof wrapper);
    char arch[48];
    snprintf(arch, sizeof arch, "--gpu-architecture=%s", t->ptx_target); /* sm_90a: PTX for that target */
    /* -rdc keeps the extern "C" function, which no kernel of this program references */
    const char *opts[] = {arch, "--relocatable-device-code=true", "--std=c++17", "-default-device"};
    NvrtcProgram prog = NULL;
    int res = r.CreateProgram(&prog, text, "score_mod.cu", 0, NULL, NULL);
    if (res) {
        snprintf(err, en, "score_mod: nvrtcCreateProgram: %s", r.GetErrorString(res));
        rc = MOD_COMPILE_ERROR;
    } else if ((res = r.CompileProgram(prog, (int)(sizeof opts / sizeof opts[0]), opts))) {
        size_t n = 0;
        if (!r.GetProgramLogSize(prog, &n) && n && (*log = malloc(n + 1)) && r.GetProgramLog(prog, *log)) (*log)[0] = 0;
        snprintf(err, en, "score_mod: NVRTC could not compile the source (%s)", r.GetErrorString(res));
        rc = MOD_COMPILE_ERROR;
    } else {
        size_t n = 0;
        if (r.GetPTXSize(prog, &n) || !(*ptx = malloc(n + 1)) || r.GetPTX(prog, *ptx)) {
            free(*ptx);
            *ptx = NULL;
            snprintf(err, en, "score_mod: NVRTC compiled the source but returned no PTX");
            rc = MOD_COMPILE_ERROR;
        } else {
            (*ptx)[n] = 0;
        }
    }
    if (prog) r.DestroyProgram(&prog);
    free(text);
    dlclose(r.lib);
    return rc;
}

/* ---------------------------------------------------------------- reading NVRTC's PTX */

static int fail(char *err, size_t n, const char *fmt, ...) FA4_PRINTF(3, 4);
static int fail(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* The text of the `.func ... fa4_score_mod(` definition: [*start, *end) covers it from the
 * .visible to the closing brace, *open is its opening brace. */
static int find_func(const char *ptx, const char **start, const char **open, const char **end)
{
    const char *s = ptx;
    while ((s = strstr(s, SCORE_MOD_SYMBOL "("))) {
        const char *line = s;
        while (line > ptx && line[-1] != '\n') line--;
        if (strstr(line, ".func") && strstr(line, ".func") < s && !strstr(line, ".extern")) break;
        s++;
    }
    if (!s) return -1;
    *start = s;
    while (*start > ptx && (*start)[-1] != '\n') (*start)--;
    const char *o = strchr(s, ')');
    o = o ? strchr(o, '{') : NULL;
    if (!o) return -1;
    int depth = 0;
    for (const char *c = o; *c; c++) {
        if (*c == '{') depth++;
        if (*c == '}' && --depth == 0) {
            *open = o;
            *end = c + 1;
            return 0;
        }
    }
    return -1;
}

static char *dup_range(const char *a, const char *b)
{
    char *s = malloc((size_t)(b - a) + 1);
    if (s) {
        memcpy(s, a, (size_t)(b - a));
        s[b - a] = 0;
    }
    return s;
}

/* ".reg .f32 %f<26>;" -> one register array of the function. */
static int parse_reg(ScoreMod *m, const char *line, char *err, size_t n)
{
    char type[16], name[32];
    int count;
    if (sscanf(line, " .reg .%15[a-z0-9] %%%31[a-zA-Z_]<%d>;", type, name, &count) != 3 || count <= 0)
        return fail(err, n, "score_mod: cannot read the register declaration '%.60s' of the compiled mod", line);
    if (strcmp(type, "pred") && strcmp(type, "b16") && strcmp(type, "b32") && strcmp(type, "b64") &&
        strcmp(type, "f32") && strcmp(type, "f64"))
        return fail(err, n, "score_mod: the compiled mod uses .%s registers, which the splice does not declare", type);
    if (m->n_regs == MOD_MAX_REGS || strlen(name) + 5 >= sizeof m->regs[0].name)
        return fail(err, n, "score_mod: the compiled mod declares too many register kinds");
    snprintf(m->regs[m->n_regs].type, sizeof m->regs[0].type, "%s", type);
    snprintf(m->regs[m->n_regs].name, sizeof m->regs[0].name, "%s", name);
    m->regs[m->n_regs++].count = count;
    return 0;
}

static void squeeze(char *s)
{
    char *o = s;
    for (const char *c = s; *c; c++) {
        char ch = *c == '\t' ? ' ' : *c;
        if (ch == ' ' && o > s && o[-1] == ' ') continue;
        *o++ = ch;
    }
    *o = 0;
}

static void trim(char *s)
{
    size_t k = strlen(s);
    while (k && isspace((unsigned char)s[k - 1])) s[--k] = 0;
    size_t i = 0;
    while (isspace((unsigned char)s[i])) i++;
    memmove(s, s + i, strlen(s + i) + 1);
}

/* One body line: kept (an instruction or a label) or refused. */
static int check_line(ScoreMod *m, const char *l, char *err, size_t n)
{
    if (l[0] == '.') {
        if (!strncmp(l, ".local", 6) || strstr(l, "__local_depot"))
            return fail(err, n, "score_mod: the compiled mod uses local memory (an array or a spill on the stack); "
                        "a mod must keep its values in registers");
        return fail(err, n, "score_mod: the compiled mod has the directive '%.40s', which the splice does not take", l);
    }
    if (!strncmp(l, "call", 4) || strstr(l, " call"))
        return fail(err, n, "score_mod: the compiled mod calls another function ('%.60s'); mark helpers "
                    "__forceinline__ and use no printf, so it compiles to one function", l);
    size_t k = strlen(l);
    if (k && l[k - 1] == ':') {
        if (m->n_labels == MOD_MAX_LABELS || k >= sizeof m->labels[0])
            return fail(err, n, "score_mod: the compiled mod has too many labels");
        snprintf(m->labels[m->n_labels++], sizeof m->labels[0], "%.*s", (int)(k - 1), l);
    }
    return 0;
}

int score_mod_parse(const char *ptx, ScoreModLink link, ScoreMod *m, char *err, size_t n)
{
    memset(m, 0, sizeof *m);
    m->link = link;
    m->ptx = ptx;
    const char *start, *open, *end;
    if (find_func(ptx, &start, &open, &end))
        return fail(err, n, "score_mod: NVRTC's PTX has no function " SCORE_MOD_SYMBOL);
    /* module-level data the function may read */
    Buf g = {0};
    for (const char *s = ptx; *s;) {
        const char *e = strchr(s, '\n');
        e = e ? e + 1 : s + strlen(s);
        if ((!strncmp(s, ".global", 7) || !strncmp(s, ".const", 6)) && (s < start || s >= end))
            buf_printf(&g, "%.*s", (int)(e - s), s);
        s = e;
    }
    m->globals = g.p;
    m->func = dup_range(start, end);
    Buf body = {0};
    int rc = m->func ? 0 : fail(err, n, "score_mod: out of memory");
    for (const char *s = open + 1; !rc && s < end - 1;) {
        const char *e = memchr(s, '\n', (size_t)(end - 1 - s));
        e = e ? e + 1 : end - 1;
        char line[512];
        if ((size_t)(e - s) >= sizeof line) {
            rc = fail(err, n, "score_mod: a line of the compiled mod is longer than %zu characters", sizeof line);
            break;
        }
        snprintf(line, sizeof line, "%.*s", (int)(e - s), s);
        s = e;
        squeeze(line); /* NVRTC's tabs and column padding: one space between words */
        char *cm = strstr(line, "//");
        if (cm) *cm = 0;
        trim(line);
        if (!line[0]) continue;
        if (!strncmp(line, ".reg", 4)) rc = parse_reg(m, line, err, n);
        else if (!(rc = check_line(m, line, err, n))) buf_printf(&body, "%s\n", line);
    }
    m->body = body.p;
    if (!rc && (body.oom || g.oom)) rc = fail(err, n, "score_mod: out of memory");
    if (!rc && !m->body) rc = fail(err, n, "score_mod: the compiled " SCORE_MOD_SYMBOL " has no instructions");
    if (rc) score_mod_free(m);
    return rc;
}

void score_mod_free(ScoreMod *m)
{
    free(m->body);
    free(m->func);
    free(m->globals);
    m->body = m->func = m->globals = NULL;
}

/* The parameters in order: s, b, h, q, k, aux (the wrapper's signature). */
static const char *const param_type[6] = {"b32", "b32", "b32", "b32", "b32", "b64"};

void score_mod_module_text(const ScoreMod *m, Buf *out)
{
    buf_puts(out, "\n// score_mod (user CUDA C compiled by NVRTC): ");
    buf_printf(out, "%s\n", m->link == MOD_SPLICE ? "spliced into every score site"
                            : m->link == MOD_CALL ? "a function of this module"
                                                  : "linked in by nvJitLink");
    if (m->globals) buf_puts(out, m->globals);
    if (m->link == MOD_CALL) {
        buf_printf(out, "%s\n", m->func);
    } else if (m->link == MOD_LINK) {
        buf_puts(out, ".extern .func (.param .b32 mod_ret) " SCORE_MOD_SYMBOL "(");
        for (int i = 0; i < 6; i++) buf_printf(out, "%s.param .%s mod_a%d", i ? ", " : "", param_type[i], i);
        buf_puts(out, ");\n");
    }
    buf_puts(out, "\n");
}

/* ---------------------------------------------------------------- call sites */

static int ident_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '$'; }

/* The register the function's %<name><digits> becomes: %mod_<name><digits>. */
static int is_mod_reg(const ScoreMod *m, const char *s, size_t len)
{
    for (int i = 0; i < m->n_regs; i++)
        if (strlen(m->regs[i].name) == len && !strncmp(m->regs[i].name, s, len)) return 1;
    return 0;
}

/* One body line rewritten for call site `site`: registers renamed, labels suffixed,
 * parameter loads from the site's registers, the return value into x, ret to the end. */
static void splice_line(Emit *e, const ScoreMod *m, const char *l, const char *const args[6], const char *x,
                        const char *done, int last)
{
    char out[1024];
    size_t o = 0;
    int pi;
    char ty[8];
    if (sscanf(l, "ld.param.%7[a-z0-9] %*s [" SCORE_MOD_SYMBOL "_param_%d", ty, &pi) == 2 && pi >= 0 && pi < 6) {
        const char *dst = strchr(l, '%');
        size_t dn = dst ? strcspn(dst, ",") : 0;
        if (!dst) {
            emit_fail(e, "score_mod: cannot read '%s'", l);
            return;
        }
        emit(e, "mov.%s %%mod_%.*s, %s;", ty, (int)dn - 1, dst + 1, args[pi]);
        return;
    }
    if (!strncmp(l, "st.param.", 9) && strstr(l, "func_retval0")) {
        const char *src = strrchr(l, ',');
        char ty2[8] = "";
        sscanf(l, "st.param.%7[a-z0-9]", ty2);
        const char *r = src ? strchr(src, '%') : NULL;
        if (!r || (strcmp(ty2, "f32") && strcmp(ty2, "b32"))) {
            emit_fail(e, "score_mod: cannot read the return '%s' (the mod must return a float)", l);
            return;
        }
        emit(e, "mov.b32 %s, %%mod_%.*s;", x, (int)strcspn(r + 1, ";"), r + 1);
        return;
    }
    if (!strcmp(l, "ret;")) {
        if (!last) emit(e, "bra.uni %s;", done);
        return;
    }
    size_t ll = strlen(l);
    char guarded[96];
    if (l[0] == '@' && ll > 5 && ll < 64 && !strcmp(l + ll - 5, " ret;")) { /* a guarded return: a branch out */
        snprintf(guarded, sizeof guarded, "%.*s bra %s;", (int)(ll - 5), l, done);
        l = guarded; /* its guard is renamed below */
    }
    for (const char *s = l; *s && o + 64 < sizeof out;) {
        if (*s == '%' && isalpha((unsigned char)s[1])) {
            size_t k = 1;
            while (isalpha((unsigned char)s[k]) || s[k] == '_') k++;
            if (is_mod_reg(m, s + 1, k - 1)) {
                memcpy(out + o, "%mod_", 5), o += 5;
                s++;
                continue;
            }
        }
        if ((s == l || !ident_char(s[-1])) && ident_char(*s)) {
            size_t k = 0;
            while (ident_char(s[k])) k++;
            for (int i = 0; i < m->n_labels; i++)
                if (strlen(m->labels[i]) == k && !strncmp(m->labels[i], s, k)) {
                    o += (size_t)snprintf(out + o, sizeof out - o, "%s_m%d", m->labels[i], m->sites);
                    s += k;
                    k = 0;
                    break;
                }
            if (k) {
                memcpy(out + o, s, k), o += k;
                s += k;
            }
            continue;
        }
        out[o++] = *s++;
    }
    out[o] = 0;
    size_t len = strlen(out);
    if (len && out[len - 1] == ':') {
        out[len - 1] = 0;
        emit_label(e, out);
    } else {
        emit(e, "%s", out);
    }
}

static void declare_regs(Emit *e, const ScoreMod *m)
{
    for (int i = 0; i < m->n_regs; i++) {
        char name[24];
        snprintf(name, sizeof name, "mod_%s", m->regs[i].name);
        reg_array(e, m->regs[i].type, name, m->regs[i].count);
    }
}

void score_mod_site(Emit *e, Reg x_, Reg b, Reg h, Reg q, Reg k)
{
    ScoreMod *m = e->mod;
    if (!m) {
        emit_fail(e, "internal: a score_mod site without a score_mod");
        return;
    }
    REG_WANT(e, x_, RT_F32), REG_WANT(e, b, RT_B32), REG_WANT(e, h, RT_B32), REG_WANT(e, q, RT_B32);
    REG_WANT(e, k, RT_B32);
    Reg s = reg_f32(e, "mod_s");
    const char *x = R(e, x_);
    emit(e, "mul.f32 %s, %s, %%mod_scale;", R(e, s), x);
    const char *args[6] = {R(e, s), R(e, b), R(e, h), R(e, q), R(e, k), "%mod_aux"};
    if (m->link != MOD_SPLICE) {
        emit(e, "{");
        emit(e, ".param .b32 mod_ret;");
        for (int i = 0; i < 6; i++) {
            emit(e, ".param .%s mod_a%d;", param_type[i], i);
            emit(e, "st.param.%s [mod_a%d], %s;", param_type[i], i, args[i]);
        }
        emit(e, "call.uni (mod_ret), " SCORE_MOD_SYMBOL ", (mod_a0, mod_a1, mod_a2, mod_a3, mod_a4, mod_a5);");
        emit(e, "ld.param.b32 %s, [mod_ret];", x);
        emit(e, "}");
        m->sites++;
        return;
    }
    declare_regs(e, m);
    char done[40];
    snprintf(done, sizeof done, "$mod_done_%d", m->sites);
    int need_done = 0;
    for (const char *l = m->body; *l;) {
        const char *nl = strchr(l, '\n');
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(nl - l), l);
        l = nl + 1;
        int last = !*l;
        size_t ll = strlen(line);
        if ((!strcmp(line, "ret;") && !last) || (line[0] == '@' && ll > 5 && !strcmp(line + ll - 5, " ret;")))
            need_done = 1;
        splice_line(e, m, line, args, x, done, last);
    }
    if (need_done) emit_label(e, done);
    m->sites++;
}
