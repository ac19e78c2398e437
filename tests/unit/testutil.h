/* testutil.h - shared helpers for the cmocka unit tests. */
#ifndef FA4_TESTUTIL_H
#define FA4_TESTUTIL_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Run a shell command, capture stdout into a malloc'd string; returns exit status. */
static inline int run_capture(const char *cmd, char **out)
{
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += k;
        if (cap - len < 1024) buf = realloc(buf, cap *= 2);
    }
    int st = pclose(f);
    if (buf) buf[len] = 0;
    if (out) *out = buf; else free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Point FA4GEN_CACHE_DIR at a fresh directory made from the mkdtemp template dir. */
static inline int temp_cache_dir(char *dir)
{
    if (!mkdtemp(dir)) return -1;
    return setenv("FA4GEN_CACHE_DIR", dir, 1);
}

/* rm -rf, also through directories a test made read-only; the shell's exit status. */
static inline int remove_tree(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
    return system(cmd);
}
#endif
