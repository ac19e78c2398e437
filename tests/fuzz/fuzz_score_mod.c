/* fuzz_score_mod.c - a score_mod's way in without NVRTC (gen/score_mod.c). The first byte picks:
 *   0  the source scanner (score_mod_check_source) on the rest as a source T: a refusal is one
 *      printable line naming a line of T; T + "\n#include ..." is refused unless T ends in a line
 *      splice (which joins the directive to T's last line, where it is none).
 *   1  the PTX locator (score_mod_parse): the rest becomes comments and a string literal put
 *      around and inside a known fa4_score_mod (and a decoy declaration and function before it);
 *      the function must be found whole and its body read back exactly, whatever they hold.
 *   2  NVRTC's log rewritten (score_mod_map_log): the rest is split into a source and a log; every
 *      line of the result is one of the forms it writes, a source line it echoes is that line
 *      of the source, nothing else of the log's echo gets through, and the length is capped. */
#include <ctype.h>

#include "fuzz_common.h"
#include "score_mod.h"

static void check_scanner(const char *t, size_t n)
{
    char err[512];
    if (score_mod_check_source(t, err, sizeof err)) {
        fuzz_one_line(err);
        int line = 0, lines = 1;
        FUZZ_CHECK(sscanf(err, "line %d: ", &line) == 1, "'%s' names no line", err);
        for (size_t i = 0; i < n; i++) lines += t[i] == '\n';
        FUZZ_CHECK(line >= 1 && line <= lines, "line %d of %d lines", line, lines);
    }
    if (n && (t[n - 1] == '\\' || (n > 1 && t[n - 1] == '\r' && t[n - 2] == '\\'))) return;
    static const char inc[] = "\n#include \"/etc/passwd\"\n";
    char *s = malloc(n + sizeof inc);
    memcpy(s, t, n);
    memcpy(s + n, inc, sizeof inc);
    FUZZ_CHECK(score_mod_check_source(s, err, sizeof err) != 0, "an #include after the source was accepted");
    free(s);
}

/* Fuzzed text made safe for one kind of hiding place: a // comment (no newline), a block comment
 * (no newline, no star-slash), a string literal (no newline, quote or backslash). */
static void piece(Buf *b, const char *f, size_t n, int kind)
{
    buf_puts(b, kind == 0 ? "// " : kind == 1 ? "/* " : "\"");
    for (size_t i = 0; i < n; i++) {
        char c = f[i];
        if (c == '\n' || c == '\r' || !c || (kind == 1 && c == '*') || (kind == 2 && (c == '"' || c == '\\'))) c = ' ';
        buf_printf(b, "%c", c);
    }
    buf_puts(b, kind == 0 ? "\n" : kind == 1 ? " */" : "\"");
}

static void check_locator(const char *f, size_t n)
{
    size_t k = n / 6 + 1; /* six places, each a slice of the input */
    const char *sl[6];
    size_t len[6];
    for (int i = 0; i < 6; i++) {
        sl[i] = f + (i * k < n ? i * k : n);
        len[i] = i * k < n ? (n - i * k < k ? n - i * k : k) : 0;
    }
    Buf b = {0};
    buf_puts(&b, ".version 9.0\n.target sm_90a\n.address_size 64\n\n");
    piece(&b, sl[0], len[0], 0);
    piece(&b, sl[1], len[1], 1);
    buf_puts(&b, "\n.extern .func (.param .b32 r) " SCORE_MOD_SYMBOL "(.param .b32 a);\n");
    buf_puts(&b, ".visible .func  (.param .b32 func_retval0) decoy(\n\t.param .b32 decoy_param_0\n)\n{\n\t");
    piece(&b, sl[2], len[2], 2);
    buf_puts(&b, ";\n\tret;\n}\n.visible .func  (.param .b32 func_retval0) " SCORE_MOD_SYMBOL "(\n");
    buf_puts(&b, "\t.param .b32 " SCORE_MOD_SYMBOL "_param_0\n)\n{\n\t.reg .f32 \t%f<3>;\n\n");
    buf_puts(&b, "\tld.param.f32 \t%f1, [" SCORE_MOD_SYMBOL "_param_0];\n\t");
    piece(&b, sl[3], len[3], 0);
    buf_puts(&b, "\tmul.f32 \t%f2, ");
    piece(&b, sl[4], len[4], 1);
    buf_puts(&b, " %f1, 0f40000000;\n\t");
    piece(&b, sl[5], len[5], 1);
    buf_puts(&b, "\n\tst.param.f32 \t[func_retval0+0], %f2;\n\tret;\n\n}\n");
    FUZZ_CHECK(!b.oom, "oom");
    ScoreMod m;
    char err[256];
    FUZZ_CHECK(score_mod_parse(b.p, MOD_SPLICE, &m, err, sizeof err) == 0, "%s in:\n%s", err, b.p);
    FUZZ_CHECK(!strcmp(m.body, "ld.param.f32 %f1, [" SCORE_MOD_SYMBOL "_param_0];\nmul.f32 %f2, %f1, 0f40000000;\n"
                               "st.param.f32 [func_retval0+0], %f2;\nret;\n"),
               "body '%s' of:\n%s", m.body, b.p);
    FUZZ_CHECK(strstr(m.func, ".visible .func  (.param .b32 func_retval0) " SCORE_MOD_SYMBOL "(\n") == m.func,
               "func starts '%.80s'", m.func);
    FUZZ_CHECK(m.n_regs == 1 && m.regs[0].count == 3, "registers");
    score_mod_free(&m);
    buf_free(&b);
}

/* Line `line` of src as the mapper echoes it (tabs as spaces, control bytes as '?', cut). */
static int echo_matches(const char *src, int line, const char *echo)
{
    const char *l = src;
    for (int i = 1; i < line && l; i++) l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL;
    if (!l) return 0;
    size_t len = strcspn(l, "\r\n"), k = 0;
    for (; k < len && k < 120 && echo[k]; k++) {
        char want = l[k] == '\t' ? ' ' : (unsigned char)l[k] < 0x20 || l[k] == 0x7f ? '?' : l[k];
        if (echo[k] != want) return 0;
    }
    return k == (len < 120 ? len : 120) && (!echo[k] || !strcmp(echo + k, "..."));
}

static void check_log(const char *f, size_t n)
{
    const char *cut = memchr(f, 0, n);
    size_t sn = cut ? (size_t)(cut - f) : n / 2;
    char *src = strndup(f, sn), *log = strndup(f + sn + (cut != NULL), n - sn - (cut != NULL));
    char *m = score_mod_map_log(src, log);
    FUZZ_CHECK(m != NULL, "NULL");
    FUZZ_CHECK(strlen(m) <= 4096, "%zu bytes", strlen(m));
    for (char *l = m; *l;) {
        size_t k = strcspn(l, "\n");
        char *line = strndup(l, k);
        int at = 0, echo_at = 0, used = 0;
        if (sscanf(line, "line %d: %n", &at, &used) == 1 && used) {
            FUZZ_CHECK(at >= 1, "line %d", at);
        } else if (sscanf(line, " %d |%n", &echo_at, &used) == 1 && used && line[used] == ' ') {
            FUZZ_CHECK(echo_matches(src, echo_at, line + used + 1), "echo '%s' is not line %d of the source", line,
                       echo_at);
        } else {
            FUZZ_CHECK(!strncmp(line, "in fa4gen's wrapper after line ", 31) || !strncmp(line, "in another file: ", 17) ||
                           !strncmp(line, "  (it calls score_mod(", 22) || !strncmp(line, "  (", 3) ||
                           !strncmp(line, "nvrtc", 5) || !strncmp(line, "error", 5) || line[0] == '(',
                       "line '%s'", line);
        }
        FUZZ_CHECK(k <= 260, "a line of %zu bytes", k);
        free(line);
        l += k + (l[k] == '\n');
    }
    free(m);
    free(src);
    free(log);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 1 || size > 8192) return 0;
    const char *f = (const char *)data + 1;
    size_t n = size - 1;
    if (data[0] % 3 == 0) {
        char *t = strndup(f, n); /* a source is text: it ends at a NUL (the CLI refuses NUL bytes) */
        check_scanner(t, strlen(t));
        free(t);
    } else if (data[0] % 3 == 1) {
        check_locator(f, n);
    } else {
        check_log(f, n);
    }
    return 0;
}
