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
#include <limits.h>
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

static int fail(char *err, size_t n, const char *fmt, ...) FA4_PRINTF(3, 4);
static int fail(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
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

/* ---------------------------------------------------------------- the source, before NVRTC */

/* A score_mod is one self-contained source: a directive or operator that reads another file
 * (#include, #include_next, #import, #embed, __has_include, __has_embed) would put that file's
 * text into NVRTC's messages (and past the 1 MiB limit), and #line would renumber the lines the
 * messages name. They are found by a small lexer that knows what the preprocessor knows: line
 * splices, comments, string and character literals (with prefixes), raw strings and pp-numbers
 * (1'000 holds no character literal), so none of them hides a directive or fakes one. */

typedef struct { const char *p; int line; } Lex;

/* p past any line splices (a backslash before LF or CRLF), counting their lines. */
static const char *unsplice(const char *p, int *line)
{
    while (p[0] == '\\' && (p[1] == '\n' || (p[1] == '\r' && p[2] == '\n'))) {
        p += p[1] == '\n' ? 2 : 3;
        (*line)++;
    }
    return p;
}

static int lex_ch(Lex *x) { return (unsigned char)*(x->p = unsplice(x->p, &x->line)); }

static int lex_peek(const Lex *x) /* the character after the current one */
{
    int line = x->line;
    const char *p = unsplice(x->p, &line);
    return *p ? (unsigned char)*unsplice(p + 1, &line) : 0;
}

static void lex_adv(Lex *x)
{
    if (!lex_ch(x)) return;
    if (*x->p == '\n') x->line++;
    x->p++;
}

static int ident_start(int c) { return isalpha(c) || c == '_' || c == '$' || c >= 0x80; }
static int ident_cont(int c) { return ident_start(c) || isdigit(c); }

/* An identifier or pp-number into w (truncated to n - 1 characters; the rest is consumed). */
static void lex_word(Lex *x, char *w, size_t n)
{
    size_t k = 0;
    int num = isdigit(lex_ch(x)) || lex_ch(x) == '.', prev = 0;
    for (int c = lex_ch(x); c; prev = c, c = lex_ch(x)) {
        int sign = num && (c == '+' || c == '-') && prev && strchr("eEpP", prev);
        int sep = num && c == '\'' && ident_cont(lex_peek(x)); /* C++14 digit separator */
        if (!(ident_cont(c) || (num && c == '.') || sign || sep)) break;
        if (k + 1 < n) w[k++] = (char)c;
        lex_adv(x);
    }
    w[k] = 0;
}

/* A "..." or '...' literal: ends at its closing quote or, unterminated, before the line's end. */
static void lex_quoted(Lex *x)
{
    int q = lex_ch(x);
    lex_adv(x);
    for (int c = lex_ch(x); c && c != '\n' && c != q; c = lex_ch(x)) {
        lex_adv(x);
        if (c == '\\' && lex_ch(x) && lex_ch(x) != '\n') lex_adv(x);
    }
    if (lex_ch(x) == q) lex_adv(x);
}

/* A raw string R"d(...)d" from its '"': splices are not undone inside, so it is read as written.
 * -1 when it never ends (or its delimiter is not one). */
static int lex_raw(Lex *x)
{
    const char *p = x->p + 1, *d = p;
    while (*p && *p != '(' && p - d <= 16 && !strchr(" )\\\t\v\f\n", *p)) p++;
    if (*p != '(') return -1;
    size_t dn = (size_t)(p - d);
    for (p++; *p; p++) {
        if (*p == '\n') x->line++;
        if (*p == ')' && !strncmp(p + 1, d, dn) && p[1 + dn] == '"') {
            x->p = p + dn + 2;
            return 0;
        }
    }
    return -1;
}

/* A comment at x (// or / *): skipped; -1 when a block comment never ends. */
static int lex_comment(Lex *x)
{
    lex_adv(x);
    if (lex_ch(x) == '/') {
        while (lex_ch(x) && lex_ch(x) != '\n') lex_adv(x);
        return 0;
    }
    for (lex_adv(x); lex_ch(x); lex_adv(x))
        if (lex_ch(x) == '*' && lex_peek(x) == '/') {
            lex_adv(x);
            lex_adv(x);
            return 0;
        }
    return -1;
}

static int is_comment(const Lex *x) { return *x->p == '/' && (lex_peek(x) == '/' || lex_peek(x) == '*'); }

static const char *const refused_directives[] = {"include", "include_next", "import", "embed", "line"};
static const char *const refused_operators[] = {"__has_include", "__has_include_next", "__has_embed"};

static int in_list(const char *w, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(w, list[i])) return 1;
    return 0;
}

/* After a directive's '#': its name (blanks and comments may stand between). */
static int lex_directive(Lex *x, int line, char *err, size_t n)
{
    char w[32] = "";
    for (;;) {
        int c = lex_ch(x);
        if (c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r') lex_adv(x);
        else if (is_comment(x)) {
            if (lex_comment(x)) return fail(err, n, "line %d: a comment that starts there never ends", line);
        } else break;
    }
    if (ident_start(lex_ch(x))) lex_word(x, w, sizeof w);
    if (in_list(w, refused_directives, sizeof refused_directives / sizeof refused_directives[0]))
        return fail(err, n, "line %d: '#%s' is not allowed; a score_mod is one self-contained source%s", line, w,
                    !strcmp(w, "line") ? " whose lines NVRTC's messages name as they are"
                                       : " (it reads no other file; CUDA's math functions need no header)");
    return 0;
}

int score_mod_check_source(const char *src, char *err, size_t n)
{
    Lex x = {src, 1};
    int line_start = 1;
    char w[32];
    for (int c = lex_ch(&x); c; c = lex_ch(&x)) {
        int line = x.line;
        if (c == '\n') {
            line_start = 1;
            lex_adv(&x);
        } else if (isspace(c)) {
            lex_adv(&x);
        } else if (is_comment(&x)) {
            if (lex_comment(&x))
                return fail(err, n, "line %d: a comment that starts there never ends (the source must end outside "
                            "one)", line);
        } else if (line_start && (c == '#' || (c == '%' && lex_peek(&x) == ':'))) {
            lex_adv(&x);
            if (c == '%') lex_adv(&x);
            line_start = 0;
            if (lex_directive(&x, line, err, n)) return -1;
        } else if (c == '"' || c == '\'') {
            line_start = 0;
            lex_quoted(&x);
        } else if (ident_start(c) || isdigit(c) || (c == '.' && isdigit(lex_peek(&x)))) {
            line_start = 0;
            lex_word(&x, w, sizeof w);
            if (in_list(w, refused_operators, sizeof refused_operators / sizeof refused_operators[0]))
                return fail(err, n, "line %d: '%s' is not allowed; a score_mod reads no other file", line, w);
            size_t k = strlen(w);
            int raw = k && w[k - 1] == 'R' && (k == 1 || !strcmp(w, "u8R") || !strcmp(w, "uR") || !strcmp(w, "UR") ||
                                                !strcmp(w, "LR"));
            if (raw && lex_ch(&x) == '"' && lex_raw(&x))
                return fail(err, n, "line %d: a raw string literal that starts there never ends", line);
        } else {
            line_start = 0;
            lex_adv(&x);
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- NVRTC's messages */

/* NVRTC's log, rewritten for the user: each diagnostic as "line N: error: ..." with line N of
 * the user's source after it (cut at MOD_ECHO bytes), a diagnostic in the wrapper named as
 * such. The log's own echo of source lines and carets is dropped, so nothing but the user's
 * own lines is ever shown; at most MOD_DIAGS diagnostics and MOD_LOG_MAX bytes. */
enum { MOD_DIAGS = 16, MOD_ECHO = 120, MOD_MSG = 240, MOD_LOG_MAX = 4096 };

/* "score_mod.cu(12): error: ..." -> 12 and the text after "): "; 0 when l is not one. */
static int diag_line(const char *l, const char **msg)
{
    const char *open = strchr(l, '('), *close = open ? strstr(open, "): ") : NULL;
    if (isspace((unsigned char)l[0]) || !open || !close || open == l || close == open + 1) return 0; /* an echo */
    for (const char *d = open + 1; d < close; d++)
        if (!isdigit((unsigned char)*d)) return 0;
    *msg = close + 3;
    long v = strtol(open + 1, NULL, 10);
    return strncmp(l, "score_mod.cu(", 13) ? -1 : v > 0 && v < INT_MAX ? (int)v : -1; /* -1: another file */
}

/* Line `line` (1-based) of src, cut to MOD_ECHO bytes, tabs as spaces, other control bytes as '?'. */
static void source_line(const char *src, int line, char *out, size_t n)
{
    const char *l = src;
    for (int i = 1; i < line && l; i++) l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL;
    size_t k = 0, len = l ? strcspn(l, "\r\n") : 0;
    for (size_t i = 0; i < len && k + 4 < n && i < MOD_ECHO; i++)
        out[k++] = l[i] == '\t' ? ' ' : (unsigned char)l[i] < 0x20 || l[i] == 0x7f ? '?' : l[i];
    if (len > MOD_ECHO && k + 4 < n) k += (size_t)snprintf(out + k, n - k, "...");
    out[k] = 0;
}

static int count_lines(const char *src)
{
    int lines = 0;
    for (const char *c = src; *c; c++) lines += *c == '\n';
    return lines + (src[0] && src[strlen(src) - 1] != '\n');
}

char *score_mod_map_log(const char *src, const char *log)
{
    Buf out = {0};
    int user = count_lines(src), shown = 0, more = 0, wrapper_said = 0;
    char echo[MOD_ECHO + 8];
    for (const char *l = log ? log : ""; *l;) {
        size_t k = strcspn(l, "\n");
        char line[MOD_MSG + 1];
        snprintf(line, sizeof line, "%.*s", (int)(k < MOD_MSG ? k : MOD_MSG), l);
        l += k + (l[k] == '\n');
        const char *msg = NULL;
        int at = diag_line(line, &msg);
        const char *during = strstr(line, "detected during");
        int tool = !strncmp(line, "nvrtc", 5) || !strncmp(line, "error", 5); /* about the options, not the source */
        if (!at && !tool && !(during && shown && during == line + strspn(line, " ")))
            continue; /* an echo of the source, a caret, the summary */
        if (shown == MOD_DIAGS || out.len > MOD_LOG_MAX - 2 * (MOD_MSG + MOD_ECHO)) {
            more += at != 0;
            continue;
        }
        if (tool) {
            buf_printf(&out, "%s\n", line);
            shown++;
        } else if (!at) {
            buf_printf(&out, "  (%s)\n", during);
        } else if (at > 0 && at <= user) {
            source_line(src, at, echo, sizeof echo);
            buf_printf(&out, "line %d: %s\n  %5d | %s\n", at, msg, at, echo);
            shown++;
        } else if (at > 0) {
            buf_printf(&out, "in fa4gen's wrapper after line %d: %s\n", user, msg);
            if (!wrapper_said++)
                buf_puts(&out, "  (it calls score_mod(s, b, h, q, k, aux) as float score_mod(float, int, int, int, "
                         "int, const void *))\n");
            shown++;
        } else {
            buf_printf(&out, "in another file: %s\n", msg);
            shown++;
        }
    }
    if (more) buf_printf(&out, "(%d more diagnostic%s not shown)\n", more, more == 1 ? "" : "s");
    if (out.oom) {
        buf_free(&out);
        return NULL;
    }
    if (out.len && out.p[out.len - 1] == '\n') out.p[--out.len] = 0;
    return out.p ? out.p : strdup("");
}

/* The wrapper gives the user's function a C symbol and the exact signature the kernel calls. */
static const char wrapper[] =
    "\n// fa4gen: the symbol the kernel calls\n"
    "extern \"C\" __device__ float " SCORE_MOD_SYMBOL "(float s, int b, int h, int q, int k, const void *aux)\n"
    "{ return score_mod(s, b, h, q, k, aux); }\n";

int score_mod_compile(const char *src, const Target *t, char **ptx, char **log, char *err, size_t en)
{
    *ptx = *log = NULL;
    char why[256];
    if (score_mod_check_source(src, why, sizeof why)) {
        snprintf(err, en, "score_mod: %s", why);
        return MOD_COMPILE_ERROR;
    }
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
        char *raw = NULL;
        if (!r.GetProgramLogSize(prog, &n) && n && (raw = malloc(n + 1)) && r.GetProgramLog(prog, raw)) raw[0] = 0;
        if (raw) raw[n] = 0;
        *log = score_mod_map_log(src, raw); /* never NVRTC's raw text: it echoes what it read */
        free(raw);
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

/* PTX as ptxas reads it: the length of the comment or string literal at s, 0 when there is none.
 * Braces, ';' and directives inside them are text, not structure (inline asm can put anything
 * into a comment: asm("// }") must not close the function); an unterminated one runs to the end
 * of its line (a string) or of the text (a block comment). */
static size_t ptx_opaque(const char *s)
{
    if (s[0] == '/' && s[1] == '/') return strcspn(s, "\n");
    if (s[0] == '/' && s[1] == '*') {
        const char *e = strstr(s + 2, "*/");
        return e ? (size_t)(e + 2 - s) : strlen(s);
    }
    if (s[0] != '"') return 0;
    size_t k = 1;
    while (s[k] && s[k] != '"' && s[k] != '\n') k += s[k] == '\\' && s[k + 1] && s[k + 1] != '\n' ? 2 : 1;
    return k + (s[k] == '"');
}

static int ptx_word_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '$' || c == '.' || c == '%'; }

/* The next token of PTX at s past blanks and comments (a string literal counts as one). */
static const char *ptx_next(const char *s)
{
    for (;;) {
        size_t k = ptx_opaque(s);
        if (k && s[0] == '/') s += k;
        else if (isspace((unsigned char)*s)) s++;
        else return s;
    }
}

/* The end of the brace block opening at o (past its '}'), or NULL when it never closes. */
static const char *ptx_block_end(const char *o)
{
    int depth = 0;
    for (const char *c = o; *c;) {
        size_t k = ptx_opaque(c);
        if (k) {
            c += k;
            continue;
        }
        depth += (*c == '{') - (*c == '}');
        if (*c++ == '}' && depth == 0) return c;
    }
    return NULL;
}

/* The text of the `.func ... fa4_score_mod(...) {...}` definition, found by walking PTX's tokens
 * at module level: [*start, *end) covers it from the start of its statement's line to the closing
 * brace, *open is its opening brace. A declaration (`.extern`, or no body) is passed over. */
static int find_func(const char *ptx, const char **start, const char **open, const char **end)
{
    const char *stmt = NULL; /* the first token of the module-level statement being read */
    int func = 0, ext = 0;
    for (const char *c = ptx_next(ptx); *c; c = ptx_next(c)) {
        if (!stmt) stmt = c;
        size_t k = ptx_opaque(c);
        if (!k && ptx_word_char(*c))
            while (ptx_word_char(c[k])) k++;
        if (k) {
            func |= k == 5 && !strncmp(c, ".func", 5);
            ext |= k == 7 && !strncmp(c, ".extern", 7);
            int named = k == strlen(SCORE_MOD_SYMBOL) && !strncmp(c, SCORE_MOD_SYMBOL, k);
            c += k;
            if (!named || !func || ext || *ptx_next(c) != '(') continue;
            int paren = 0; /* the parameter list, then the body */
            for (c = ptx_next(c); *c && *c != '{' && *c != ';'; c = ptx_next(c)) {
                paren += (*c == '(') - (*c == ')');
                c += ptx_opaque(c) ? ptx_opaque(c) : 1;
            }
            if (*c == '{' && !paren && (*end = ptx_block_end(c))) {
                while (stmt > ptx && stmt[-1] != '\n') stmt--;
                *start = stmt;
                *open = c;
                return 0;
            }
        }
        if (*c == '{') { /* a block at module level: another function's body or an initializer */
            const char *e = ptx_block_end(c);
            if (!e) return -1;
            c = e;
        } else if (*c) {
            c++;
        }
        if (c[-1] == ';' || c[-1] == '}') stmt = NULL, func = ext = 0; /* the statement ended */
    }
    return -1;
}

/* The module-level data the function may read: lines starting with .global or .const outside
 * [start, end), where a line inside a comment or a brace block (another function's body) is not
 * module level. */
static void module_globals(const char *ptx, const char *start, const char *end, Buf *g)
{
    int depth = 0;
    for (const char *c = ptx, *line = ptx; *c;) {
        if (c == line && !depth && (c < start || c >= end) && (!strncmp(c, ".global", 7) || !strncmp(c, ".const", 6))) {
            size_t k = strcspn(c, "\n");
            buf_printf(g, "%.*s", (int)(k + (c[k] == '\n')), c);
        }
        size_t k = ptx_opaque(c);
        if (k) {
            c += k;
            continue;
        }
        depth += (*c == '{') - (*c == '}');
        if (*c++ == '\n') line = c;
    }
}

/* [a, b) with PTX's comments taken out: a // comment to its line's end, a block comment as one
 * space (so an instruction written around one stays one line); string literals kept as written. */
static char *uncommented(const char *a, const char *b)
{
    char *s = malloc((size_t)(b - a) + 1), *o = s;
    for (const char *c = a; s && c < b;) {
        size_t k = ptx_opaque(c);
        if (k > (size_t)(b - c)) k = (size_t)(b - c);
        if (k && c[0] == '/') {
            if (c[1] == '*') *o++ = ' ';
            c += k;
        } else if (k) {
            memcpy(o, c, k), o += k, c += k;
        } else {
            *o++ = *c++;
        }
    }
    if (s) *o = 0;
    return s;
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
    Buf g = {0};
    module_globals(ptx, start, end, &g);
    m->globals = g.p;
    m->func = dup_range(start, end);
    char *text = uncommented(open + 1, end - 1);
    Buf body = {0};
    int rc = m->func && text ? 0 : fail(err, n, "score_mod: out of memory");
    const char *text_end = text ? text + strlen(text) : NULL;
    for (const char *s = text; !rc && s < text_end;) {
        const char *e = memchr(s, '\n', (size_t)(text_end - s));
        e = e ? e + 1 : text_end;
        char line[512];
        if ((size_t)(e - s) >= sizeof line) {
            rc = fail(err, n, "score_mod: a line of the compiled mod is longer than %zu characters", sizeof line);
            break;
        }
        snprintf(line, sizeof line, "%.*s", (int)(e - s), s);
        s = e;
        squeeze(line); /* NVRTC's tabs and column padding: one space between words */
        trim(line);
        if (!line[0]) continue;
        if (!strncmp(line, ".reg", 4)) rc = parse_reg(m, line, err, n);
        else if (!(rc = check_line(m, line, err, n))) buf_printf(&body, "%s\n", line);
    }
    free(text);
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
